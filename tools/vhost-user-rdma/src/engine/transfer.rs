// SPDX-License-Identifier: GPL-2.0
//! Messages that move in chunks.
//!
//! An RC or UC SEND, RDMA WRITE or RDMA READ of more than [`CHUNK`] bytes
//! is checked and admitted as a whole (keys, ranges, the receive it takes,
//! its PSNs), then moves one chunk per step, each under its own hold of
//! the two devices' locks: a guest's multi-megabyte message no longer keeps
//! its peer or a control command waiting for its whole copy, and the device serves its other
//! queues between passes. Every step checks again what the chunk touches
//! (both QPs, the responder's receive, the MRs of both sides), so a step
//! never writes memory that is no longer registered; a check that fails
//! ends the message with the status the first check would have given,
//! after the bytes already moved (as a NIC's error partway through a
//! message).
//!
//! Over a link that loses packets (`link.rs`) every RC message of more
//! than one packet moves this way, and a chunk is the requester's window:
//! the responder takes it up to the first packet lost (`taken`), NAKs a
//! packet after the gap with the PSN it expects, and the requester goes
//! back there at once (a retry fewer; progress restores the count, as
//! rxe's completer does); a lost last packet or a lost ACK waits for the
//! QP's transport timer (the element waits in `Qp::resend` with its
//! transfer kept). What the responder took before is a duplicate when it
//! comes again: it touches no memory, and a receive completes once, when
//! its message's last byte is taken.
//!
//! The responder's receive is held in its QP while the message fills it:
//! flushing or discarding that QP completes or returns it first, in RQ
//! order, and the next message takes it if this one is abandoned.

use std::sync::atomic::{AtomicU64, Ordering};

use vm_memory::GuestAddressSpace;
use zerocopy::little_endian::U32;

use super::*;
use crate::link::Gap;
use crate::qp::{HeldRecv, Resend, Transfer};

/// Bytes one step moves: large enough that what a step costs besides its
/// memcpy (the checks again, the hand-over of the locks, a pass of
/// the loop every `SQ_BUDGET` steps) is small beside it (at 64 KiB a 1 MiB
/// WRITE ran at 0.66 of memcpy, at 256 KiB 0.84: `benches/transfer.rs`),
/// small enough that another guest waits microseconds. The fuzz targets'
/// guest memories are 1 MiB, so they move messages in smaller chunks.
pub const CHUNK: u64 = if cfg!(feature = "fuzzing") {
    64 << 10
} else {
    256 << 10
};

/// Names held receives: tokens are never reused.
static TOKENS: AtomicU64 = AtomicU64::new(1);

/// What an operation that moves in chunks leaves to [`step`].
#[derive(Debug)]
pub(super) struct Started {
    total: u64,
    recv: Option<(u64, VirtioRdmaCqReq, bool)>,
}

/// Starts a message of `total` bytes; `recv`: the responder's receive it
/// fills, with that receive's completion and whether it is solicited.
pub(super) fn start(
    peer: &Peer,
    recv: Option<(Recv, VirtioRdmaCqReq, bool)>,
    total: u64,
) -> Started {
    let recv = recv.map(|(r, c, solicited)| {
        let token = TOKENS.fetch_add(1, Ordering::Relaxed);
        if let Some(q) = peer.ctrl().lock().qp_mut(peer.qpn) {
            q.held_recv = Some(HeldRecv {
                head: r.head,
                wqe: r.wqe,
                token,
                cqn: r.recv_cqn,
                pdn: r.pdn,
                xrc_srqn: r.xrc_srqn,
            });
        }
        (token, c, solicited)
    });
    Started { total, recv }
}

/// The transfer of element (`head`, `w`) of QP `qpn` that `started`.
pub(super) fn begin(head: u16, w: SendWqe, started: Started) -> Transfer {
    Transfer {
        head,
        wqe: w,
        done: 0,
        taken: 0,
        tried_to: 0,
        retries_left: None,
        total: started.total,
        recv: started.recv,
    }
}

/// Guest-physical ranges of bytes `[off, off + n)` of `sges` in MRs of
/// `pdn` granting `access`; all of them must be there.
pub(in crate::engine) fn span(
    st: &State,
    pdn: u32,
    sges: &[Sge],
    access: u32,
    mut off: u64,
    mut n: u64,
) -> Result<Ranges, ()> {
    let mut out = Ranges::new();
    for s in sges.iter().filter(|s| s.length > 0) {
        if n == 0 {
            break;
        }
        let len = u64::from(s.length);
        if off >= len {
            off -= len;
            continue;
        }
        let take = (len - off).min(n);
        let mr = st.mrs.by_key(s.lkey).ok_or(())?;
        if mr.pdn != pdn || mr.access & access != access {
            return Err(());
        }
        let addr = s.addr.checked_add(off).ok_or(())?;
        mr.translate_into(addr, take, &mut out).map_err(|_| ())?;
        off = 0;
        n -= take;
    }
    if n > 0 {
        return Err(());
    }
    Ok(out)
}

/// How a step ends.
enum Outcome {
    /// More chunks to go.
    More,
    /// A sequence-error NAK: the next chunk starts where it says, now,
    /// with a retry fewer.
    Nak,
    /// Nothing answered: the transport timer sends it again.
    Unanswered,
    /// The message is over with this status (and byte count).
    End(u8, u32),
}

/// Moves the next chunk of QP `qpn`'s transfer, or ends it; whether the SQ
/// may go on (the transfer goes on, or ended well).
pub(super) fn step(fabric: &Fabric, ctrl: &Ctrl, qpn: u32) -> bool {
    let Some(s) = sender(ctrl, qpn) else {
        return false;
    };
    let Some(mut t) = ctrl.lock().qp_mut(qpn).and_then(|q| q.transfer.take()) else {
        return false;
    };
    match chunk(fabric, ctrl, qpn, &s, &mut t) {
        Outcome::More => keep(ctrl, qpn, t),
        Outcome::Nak => match retry(ctrl, qpn, &t) {
            Some(left) => {
                t.retries_left = Some(left);
                keep(ctrl, qpn, t)
            }
            None => {
                finish(
                    fabric,
                    ctrl,
                    qpn,
                    &s,
                    t.head,
                    &t.wqe,
                    IB_WC_RETRY_EXC_ERR,
                    0,
                );
                false
            }
        },
        Outcome::Unanswered => {
            let (head, wqe, left) = (t.head, t.wqe.clone(), t.retries_left);
            keep(ctrl, qpn, t);
            resend_later(fabric, ctrl, qpn, &s, head, wqe, Again::Unanswered, left);
            false
        }
        Outcome::End(status, len) => {
            finish(fabric, ctrl, qpn, &s, t.head, &t.wqe, status, len);
            status == IB_WC_SUCCESS
        }
    }
}

/// Puts transfer `t` back into QP `qpn`; whether it goes on (the QP is
/// still there).
fn keep(ctrl: &Ctrl, qpn: u32, t: Transfer) -> bool {
    match ctrl.lock().qp_mut(qpn) {
        Some(q) => {
            q.transfer = Some(t);
            true
        }
        None => false,
    }
}

/// The retries left after one more of transfer `t`, or `None` if it had
/// none left (RETRY_EXC_ERR).
fn retry(ctrl: &Ctrl, qpn: u32, t: &Transfer) -> Option<u8> {
    let left = t
        .retries_left
        .or_else(|| ctrl.lock().qp(qpn).map(|q| q.attr.retry_cnt))?;
    left.checked_sub(1)
}

/// The transport timer of QP `qpn`'s transfer ran out (`wait`, set by
/// [`step`]): the transfer goes on from what the requester knows arrived,
/// with a retry fewer, or ends with RETRY_EXC_ERR.
pub(super) fn timed_out(fabric: &Fabric, ctrl: &Ctrl, qpn: u32, s: &Sender, wait: Resend) {
    let Some(mut t) = ctrl.lock().qp_mut(qpn).and_then(|q| q.transfer.take()) else {
        return;
    };
    t.retries_left = Some(wait.retries_left);
    match retry(ctrl, qpn, &t) {
        Some(left) => {
            t.retries_left = Some(left);
            if keep(ctrl, qpn, t) {
                ctrl.schedule_sq(qpn);
            }
        }
        None => finish(fabric, ctrl, qpn, s, t.head, &t.wqe, IB_WC_RETRY_EXC_ERR, 0),
    }
}

fn chunk(fabric: &Fabric, ctrl: &Ctrl, qpn: u32, s: &Sender, t: &mut Transfer) -> Outcome {
    let uc = s.unreliable();
    let w = t.wqe.clone();
    let total_len = u32::try_from(t.total).unwrap_or(u32::MAX);
    // UC: what the responder does not take is lost, and the requester
    // succeeds once its own side is done.
    let lost = Outcome::End(IB_WC_SUCCESS, total_len);
    // The responder, still there and still connected to this QP (the PSNs
    // were checked when the message was admitted).
    let accepted = request_op(w.opcode)
        .and_then(|op| request(qpn, s, &w, op).ok())
        .and_then(|m| responder::accept(fabric, &m, false).ok().map(|p| (m, p)));
    let Some((m, mut peer)) = accepted else {
        return if uc {
            lost
        } else {
            Outcome::End(IB_WC_RETRY_EXC_ERR, 0)
        };
    };
    // The XRC SRQ it names, still of the target's domain (its PD is the
    // rkeys' and the receive's).
    if responder::resolve_xrc(&mut peer, &m).is_err() {
        // Its SRQ was destroyed meanwhile: the receive it held ended with
        // it, without a completion.
        if let Some((token, ..)) = t.recv {
            take_held(&peer, token);
        }
        return Outcome::End(IB_WC_REM_INV_REQ_ERR, 0);
    }
    let pc = peer.ctrl();
    // The receive it fills, still held for it.
    let held = match &t.recv {
        Some((token, ..)) => {
            let st = pc.lock();
            let q = st.qp(peer.qpn);
            let held = q
                .and_then(|q| q.held_recv.as_ref())
                .filter(|h| h.token == *token);
            match (q, held) {
                (Some(_), Some(h)) => Some((h.wqe.sges.clone(), h.pdn)),
                _ => {
                    return if uc {
                        lost
                    } else {
                        Outcome::End(IB_WC_RETRY_EXC_ERR, 0)
                    }
                }
            }
        }
        None => None,
    };
    let read = w.opcode == IB_WR_RDMA_READ;
    let n = CHUNK.min(t.total - t.done);
    // What of the chunk's packets the link delivers (`link.rs`): all, or
    // those before the first it loses. A READ's data are its responses.
    let mtu = qp::mtu_bytes(s.path_mtu);
    let packets = qp::packets(w.opcode, n, s.path_mtu);
    let faults = ctrl.link_faults().filter(|_| !uc);
    let request_lost = read && faults.is_some_and(|f| f.drops_request());
    let gap = match faults {
        _ if request_lost => Some(Gap {
            taken: 0,
            seen_after: false,
        }),
        None => None,
        Some(f) if read => f.answer_gap(packets),
        Some(f) => f.request_gap(packets),
    };
    let arrived = gap.map_or(n, |g| (u64::from(g.taken) * mtu).min(n));
    // Sent again: the packets of this chunk sent before count again.
    let again = t.tried_to.min(t.done + n).saturating_sub(t.done);
    if again > 0 {
        s.tally(ctrl)
            .sent(qp::packets(w.opcode, again, s.path_mtu), again);
    }
    t.tried_to = t.tried_to.max(t.done + n);
    // The bytes that reach memory: a READ's responses all land where they
    // belong; what a responder took before (its answer lost) is a
    // duplicate and touches nothing.
    let from = if read { t.done } else { t.done.max(t.taken) };
    let to = t.done + arrived;
    if to > from {
        if let Err(end) = place(fabric, ctrl, &peer, s, t, held, from, to - from) {
            return end;
        }
    }
    if !read {
        t.taken = t.taken.max(to);
        // The responder's side ends with the message's last byte: its
        // receive completes once, whatever becomes of the answer.
        if t.taken == t.total {
            if let Some((token, c, solicited)) = t.recv.take() {
                if let Some(r) = take_held(&peer, token) {
                    complete_recv(fabric, &peer, &r, c, solicited);
                }
            }
        }
    }
    // The answer: an ACK of the whole chunk; after a gap, a sequence-error
    // NAK if a packet after it arrived (it names the PSN the responder
    // expects; a READ's requester asks again from its own gap); else, or
    // if the answer is lost, nothing until the transport timer.
    let known = if read { to } else { t.taken };
    let answered = !request_lost && (read || faults.is_none_or(|f| !f.drops_answer()));
    let nak = gap.is_some_and(|g| g.seen_after);
    if nak && !read {
        // The responder took the packet after the gap for what it is: out
        // of sequence (and drops the rest of the chunk silently, as its
        // NAK is out). A READ's requester drops its own out-of-sequence
        // responses: no request was dropped.
        peer.tally().inc(Counter::BadPsn);
    }
    if gap.is_some() && !nak || !answered {
        return Outcome::Unanswered;
    }
    if known > t.done {
        t.done = known;
        t.retries_left = None;
    }
    if nak {
        return Outcome::Nak;
    }
    if t.done < t.total {
        return Outcome::More;
    }
    let len = if read {
        u32::try_from(w.payload_len()).unwrap_or(u32::MAX)
    } else {
        total_len
    };
    Outcome::End(IB_WC_SUCCESS, len)
}

/// Moves bytes `[off, off + n)` of transfer `t` between the requester's
/// SGEs and the responder's receive (`held`) or remote range, each side
/// checked again; `Err` ends the message as the first check would have.
#[allow(clippy::too_many_arguments)]
fn place(
    fabric: &Fabric,
    ctrl: &Ctrl,
    peer: &Peer,
    s: &Sender,
    t: &Transfer,
    held: Option<(crate::wqe::Sges, u32)>,
    off: u64,
    n: u64,
) -> Result<(), Outcome> {
    let uc = s.unreliable();
    let total_len = u32::try_from(t.total).unwrap_or(u32::MAX);
    let lost = || Outcome::End(IB_WC_SUCCESS, total_len);
    let w = &t.wqe;
    let pc = peer.ctrl();
    // From the checks of the MRs to the end of the copy.
    let _gates = gates(ctrl, pc, false);
    let lguard = ctrl.mem().memory();
    let pguard = pc.mem().memory();
    let local = |access: u32| {
        span(&ctrl.lock(), s.pdn, &w.sges, access, off, n)
            .ok()
            .and_then(|r| slices(&lguard, &r))
    };
    let remote = |access: u32| {
        let r = w.rdma();
        let addr = r.remote_addr.get().checked_add(off)?;
        responder::resolve_remote(peer, r.rkey.get(), addr, n, access)
            .ok()
            .and_then(|r| slices(&pguard, &r))
    };
    let (src, dst) = match w.opcode {
        IB_WR_SEND | IB_WR_SEND_WITH_IMM | IB_WR_SEND_WITH_INV => {
            let Some(src) = local(0) else {
                return Err(Outcome::End(IB_WC_LOC_PROT_ERR, 0));
            };
            let (sges, rpdn) = held.unwrap_or_default();
            let dst = span(&pc.lock(), rpdn, &sges, IB_ACCESS_LOCAL_WRITE, off, n)
                .ok()
                .and_then(|r| slices(&pguard, &r));
            let Some(dst) = dst else {
                // The responder's receive fails; an RC requester learns of
                // it, a UC one does not.
                fail_recv(fabric, peer, t);
                return Err(if uc {
                    lost()
                } else {
                    Outcome::End(IB_WC_REM_OP_ERR, 0)
                });
            };
            (src, dst)
        }
        IB_WR_RDMA_WRITE | IB_WR_RDMA_WRITE_WITH_IMM => {
            let Some(src) = local(0) else {
                return Err(Outcome::End(IB_WC_LOC_PROT_ERR, 0));
            };
            let Some(dst) = remote(IB_ACCESS_REMOTE_WRITE) else {
                if uc {
                    // A key that went away under a message (not a guess:
                    // its first check passed, `responder::write`).
                    return Err(lost());
                }
                // As on a first check: the responder moves to error and
                // reports it (its flush completes a WRITE_WITH_IMM's held
                // receive first).
                to_error_event(fabric, pc, peer.qpn, Event::QpAccessErr(peer.qpn));
                return Err(Outcome::End(IB_WC_REM_ACCESS_ERR, 0));
            };
            (src, dst)
        }
        IB_WR_RDMA_READ => {
            let Some(src) = remote(IB_ACCESS_REMOTE_READ) else {
                to_error_event(fabric, pc, peer.qpn, Event::QpAccessErr(peer.qpn));
                return Err(Outcome::End(IB_WC_REM_ACCESS_ERR, 0));
            };
            let Some(dst) = local(IB_ACCESS_LOCAL_WRITE) else {
                return Err(Outcome::End(IB_WC_LOC_PROT_ERR, 0));
            };
            (src, dst)
        }
        _ => return Err(Outcome::End(IB_WC_LOC_QP_OP_ERR, 0)),
    };
    copy(&src, &dst);
    Ok(())
}

/// The held receive of `peer` named `token`, taken out of its QP.
pub(in crate::engine) fn take_held(peer: &Peer, token: u64) -> Option<Recv> {
    let mut st = peer.ctrl().lock();
    let q = st.qp_mut(peer.qpn)?;
    if q.held_recv.as_ref().map(|h| h.token) != Some(token) {
        return None;
    }
    let h = q.held_recv.take()?;
    Some(Recv {
        head: h.head,
        wqe: h.wqe,
        recv_cqn: h.cqn,
        pdn: h.pdn,
        qp_pdn: q.pdn,
        xrc_srqn: h.xrc_srqn,
    })
}

/// The message's receive (if it has one) fails at the responder.
fn fail_recv(fabric: &Fabric, peer: &Peer, t: &Transfer) {
    if let Some((token, ..)) = t.recv {
        if let Some(r) = take_held(peer, token) {
            recv_error(fabric, peer, &r, IB_WC_LOC_PROT_ERR);
        }
    }
}

/// A receive held for a transfer, completed with `status` (flush) or
/// returned (`None`: discard) before the QP's other receives.
pub(super) fn drop_held(ctrl: &Ctrl, qpn: u32, status: Option<u8>) {
    let Some(h) = ctrl.lock().qp_mut(qpn).and_then(|q| q.held_recv.take()) else {
        return;
    };
    match status {
        Some(status) => flush_held(ctrl, qpn, h, status),
        None => {
            if let Some(rq) = recv_vring(ctrl, qpn) {
                give_back(ctrl, rq, h.head);
            }
        }
    }
}

/// Completes receive `h`, taken out of QP `qpn`, with `status` on the CQ
/// it was taken for.
pub(super) fn flush_held(ctrl: &Ctrl, qpn: u32, h: HeldRecv, status: u8) {
    if let Some(rq) = recv_vring(ctrl, qpn) {
        give_back(ctrl, rq, h.head);
    }
    let mut c = cqe(h.wqe.wr_id, status, IB_WC_RECV, qpn);
    c.byte_len = U32::new(0);
    if let Err(e) = cq::post(ctrl, h.cqn, &c, false) {
        ctrl.guest_warn(format_args!("QP {qpn}: flush completion lost: {e}"));
    }
}
