// SPDX-License-Identifier: GPL-2.0
//! The responder: it takes a [`Request`] and its own device's state only
//! (the QP the request names, connected to its sender and expecting its
//! PSN; its receives, MRs, windows and rights) and answers with a
//! [`Response`]. It never reads the requester's work request or writes
//! its memory: a READ's data and an atomic's original value go back in the
//! response, and the requester places them.
//!
//! The responder keeps its own side of the QP: it counts what it takes and
//! refuses, moves its expected PSN past what it took (not past an RNR
//! NAK'd request, which comes again), and moves its QP to error where IB
//! says a responder does.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use vm_memory::GuestMemoryMmap;
use zerocopy::little_endian::U32;

use super::message::{Frame, Nak, Request, Response};
use super::*;
use crate::packet::Op;
use crate::transport::AtomicOp;

/// Why a request reaches no responder.
pub(super) enum Refused {
    /// No device holds the destination GID.
    NoDevice,
    /// The destination QP is not a QP of the sender's type in RTR/RTS.
    NotReady(u32),
    /// The destination QP is connected to another QP (dropped, counted).
    NotPeer(u32),
    /// The PSN is not the one the responder expects (dropped, counted).
    BadPsn(u32, u32, u32),
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::NoDevice => write!(f, "no device holds the destination GID"),
            Refused::NotReady(n) => {
                write!(f, "destination QP {n} is not a QP of this type in RTR/RTS")
            }
            Refused::NotPeer(n) => write!(f, "destination QP {n} is connected to another QP"),
            Refused::BadPsn(n, psn, expected) => {
                write!(f, "QP {n} expects PSN {expected}, not {psn}")
            }
        }
    }
}

/// The responder: a device of the fabric and a QP on it.
pub(in crate::engine) struct Peer {
    pub dev: Arc<RdmaDevice>,
    pub qpn: u32,
    /// The QP's counter set when it was found, if it is bound to one.
    pub counters: Option<Arc<CounterSet>>,
    /// For an XRC_TGT QP: the XRC SRQ the request names, its PD and
    /// receive queue for this request.
    pub xrc: Option<Target>,
    /// The request is one it took before (RC, XRC): its PSN is behind the
    /// expected one.
    pub duplicate: bool,
}

impl Peer {
    /// QP `qpn` of `dev`, before anything about it was looked up.
    pub(in crate::engine) fn new(dev: Arc<RdmaDevice>, qpn: u32) -> Self {
        Peer {
            dev,
            qpn,
            counters: None,
            xrc: None,
            duplicate: false,
        }
    }

    pub(in crate::engine) fn ctrl(&self) -> &Ctrl {
        self.dev.ctrl()
    }

    /// Where what the responder QP takes or refuses counts.
    pub(super) fn tally(&self) -> Tally<'_> {
        self.ctrl().stats().of(self.counters.as_deref())
    }
}

/// The responder of request `m`, if it takes requests from its sender:
/// the QP the request names, on the device holding its destination GID,
/// of the sender's type, in RTR or RTS, whose own path names the sender
/// (its destination QPN the sender's and its destination GID the
/// sender's source GID, which only the sender's device can hold), and
/// (`check_psn`) expecting the request's PSN. A request from anyone else
/// is dropped as a responder drops packets that are not for it, and
/// counted on the responder's device.
pub(super) fn accept(fabric: &Fabric, m: &Request<'_>, check_psn: bool) -> Result<Peer, Refused> {
    let dev = fabric::by_gid(fabric, &m.dest_gid).ok_or(Refused::NoDevice)?;
    let mut peer = Peer::new(dev, m.dest_qp);
    let pc = peer.dev.ctrl();
    let st = pc.lock();
    let q = st
        .qp(peer.qpn)
        .filter(|q| q.qp_type == xrcd::responder_type(m.qp_type) && q.can_receive())
        .ok_or(Refused::NotReady(peer.qpn))?;
    // Dropped as not for it: counted on the QP addressed.
    let tally = pc.stats().of(q.counters.as_deref());
    if q.attr.dest_qp_num.get() != m.src_qp || q.attr.ah_attr.dgid != m.src_gid {
        tally.inc(Counter::NotPeer);
        debug!(
            "{}: QP {}: request from a QP that is not its peer dropped",
            pc.name(),
            peer.qpn
        );
        return Err(Refused::NotPeer(peer.qpn));
    }
    let expected = q.attr.rq_psn.get();
    // A PSN from the past is a duplicate (the requester sent it again: it
    // or its answer was lost); an RC responder answers it again, a UC one
    // drops it.
    let behind = transport::psn_diff(m.psn, expected);
    peer.duplicate = check_psn && !uc(m) && (-DUPLICATE_WINDOW..0).contains(&behind);
    if check_psn && expected != m.psn && !peer.duplicate {
        tally.inc(Counter::BadPsn);
        debug!(
            "{}: QP {}: PSN {} (expected {expected}) dropped",
            pc.name(),
            peer.qpn,
            m.psn
        );
        return Err(Refused::BadPsn(peer.qpn, m.psn, expected));
    }
    let counters = q.counters.clone();
    drop(st);
    peer.counters = counters;
    Ok(peer)
}

/// How far behind the expected PSN a request still counts as a
/// duplicate: as far as a requester can be behind (its window of
/// unacknowledged packets; the in-process link has one message in flight
/// per QP, of at most 2^31 bytes).
const DUPLICATE_WINDOW: i32 = 1 << 22;

/// Atomics whose results the responder keeps (IB's responder resources).
const ATOMIC_REPLIES: usize = 16;

/// Executes request `m` at `peer` (accepted), whose guest memory is
/// `pmem`, and answers it.
pub(super) fn respond<'p>(
    fabric: &Fabric,
    peer: &mut Peer,
    pmem: &'p GuestMemoryMmap,
    m: &Request<'_>,
) -> Response<'p> {
    let r = match resolve_xrc(peer, m) {
        // IB's invalid XRC extended header: NAK'd, nothing moves.
        Err(why) => {
            debug!(
                "{}: QP {}: request names SRQ {:?}: {why}",
                peer.ctrl().name(),
                peer.qpn,
                m.xrc_srqn
            );
            Response::Nak(Nak::InvalidRequest)
        }
        Ok(()) if peer.duplicate => return duplicate(fabric, peer, pmem, m),
        Ok(()) => match m.op {
            Op::SendOnly | Op::SendOnlyImm | Op::SendOnlyInv => send(fabric, peer, pmem, m),
            Op::WriteOnly | Op::WriteOnlyImm => write(fabric, peer, pmem, m),
            Op::ReadRequest => read(fabric, peer, pmem, m),
            Op::CompareSwap | Op::FetchAdd => atomic(fabric, peer, pmem, m),
            Op::AtomicWrite => atomic_write(fabric, peer, pmem, m),
            Op::Flush => flush(fabric, peer, m),
            _ => Response::Nak(Nak::InvalidRequest),
        },
    };
    // What was taken (answered or not) moves the expected PSN past its
    // packets; an RNR NAK'd request comes again with the same PSNs.
    if matches!(r, Response::Rnr(_)) {
        peer.tally().inc(Counter::RnrNaksSent);
    } else {
        peer.tally().rcvd(m.npsn, m.len);
        if let Some(q) = peer.ctrl().lock().qp_mut(peer.qpn) {
            q.attr.rq_psn = U32::new(transport::psn_add(q.attr.rq_psn.get(), m.npsn));
        }
    }
    r
}

/// Answers request `m`, a duplicate, without doing it again (IBA
/// 9.7.5.1.3): a SEND, WRITE, ATOMIC WRITE or FLUSH is acknowledged; a
/// READ reads the memory again; an atomic's answer is the original value
/// it had, from the responder's resources (never run twice: one no longer
/// there is dropped, and the requester's retries run out).
fn duplicate<'p>(
    fabric: &Fabric,
    peer: &Peer,
    pmem: &'p GuestMemoryMmap,
    m: &Request<'_>,
) -> Response<'p> {
    debug!(
        "{}: QP {}: duplicate request PSN {} answered again",
        peer.ctrl().name(),
        peer.qpn,
        m.psn
    );
    match m.op {
        Op::ReadRequest => read(fabric, peer, pmem, m),
        Op::CompareSwap | Op::FetchAdd => {
            let st = peer.ctrl().lock();
            let orig = st.qp(peer.qpn).and_then(|q| {
                q.atomic_replies
                    .iter()
                    .find(|(psn, _)| *psn == m.psn)
                    .map(|(_, orig)| *orig)
            });
            match orig {
                Some(orig) => Response::Atomic(orig),
                None => Response::Dropped(format!(
                    "QP {}: duplicate atomic PSN {} no longer in its resources",
                    peer.qpn, m.psn
                )),
            }
        }
        _ => Response::Ack,
    }
}

/// UC: the responder drops what it does not take, and nothing tells the
/// requester.
fn uc(m: &Request<'_>) -> bool {
    m.qp_type == IB_QPT_UC
}

/// For a request of an XRC_INI QP: the XRC SRQ it names at its target
/// `peer` (of the target's domain, else refused), which the responder then
/// uses in place of the target's PD, receive queue and recv CQ. Other
/// QPs' requests name none.
pub(super) fn resolve_xrc(peer: &mut Peer, m: &Request<'_>) -> Result<(), crate::srq::Refusal> {
    let Some(srqn) = m.xrc_srqn else {
        return Ok(());
    };
    let st = peer.ctrl().lock();
    // Admission let only an XRC_TGT QP, which has a domain, answer.
    let xrcdn = st
        .qp(peer.qpn)
        .and_then(|q| q.xrcdn)
        .ok_or("no target QP")?;
    let target = xrcd::target(&st.srqs, xrcdn, srqn)?;
    drop(st);
    peer.xrc = Some(target);
    Ok(())
}

/// Remote access: rkey (an MR's or a window's), PD of the responder QP (of
/// the XRC SRQ a request to a target QP names), MR or window and QP access
/// rights, bounds.
pub(in crate::engine) fn resolve_remote(
    peer: &Peer,
    rkey: u32,
    addr: u64,
    len: u64,
    access: u32,
) -> Result<Ranges, ()> {
    if len == 0 {
        return Ok(Ranges::new());
    }
    let st = peer.ctrl().lock();
    let qp = st.qp(peer.qpn).ok_or(())?;
    if qp.attr.qp_access_flags.get() & access != access {
        return Err(());
    }
    // A target QP has no PD: the rkeys are those of the XRC SRQ's.
    let pdn = peer.xrc.map_or(qp.pdn, |t| t.pdn);
    st.mrs
        .remote(rkey, peer.qpn, pdn, addr, len, access)
        .ok_or(())
}

/// Requests with a refused key a UC responder drops before it moves to
/// error. UC has no NAK: a wrong rkey is dropped and the QP carries on
/// (IBA 9.7.5.2.2, as rxe does), so a connected peer could otherwise
/// guess keys for ever, at no cost, until one lets it write (a key's low
/// byte is its only secret part). With this bound a connection gets 16
/// guesses, then the responder's consumer hears of them
/// (`IB_EVENT_QP_ACCESS_ERR`) and must connect the QP again.
pub const MAX_BAD_KEYS: u32 = 16;

/// A UC responder dropped a request because of its key: counted on QP
/// `peer`; the [`MAX_BAD_KEYS`]th moves it to error, as an RC responder's
/// first does.
pub(in crate::engine) fn uc_key_refused(fabric: &Fabric, peer: &Peer) {
    let over = peer.ctrl().lock().qp_mut(peer.qpn).is_some_and(|q| {
        q.bad_keys = q.bad_keys.saturating_add(1);
        q.bad_keys == MAX_BAD_KEYS
    });
    if over {
        peer.ctrl().guest_warn(format_args!(
            "UC QP {}: {MAX_BAD_KEYS} requests with a refused key; the QP moves to error",
            peer.qpn
        ));
        to_error_event(fabric, peer.ctrl(), peer.qpn, Event::QpAccessErr(peer.qpn));
    }
}

/// A receive taken from the responder's RQ or SRQ.
pub(in crate::engine) struct Recv {
    pub head: u16,
    pub wqe: RecvWqe,
    pub recv_cqn: u32,
    /// The PD its lkeys are checked against (its SRQ's, if it has one).
    pub pdn: u32,
    /// The responder QP's own PD (what SEND_WITH_INV's rkey must be of;
    /// a target QP's is its XRC SRQ's).
    pub qp_pdn: u32,
    /// The XRC SRQ it came from, for a target QP.
    pub xrc_srqn: Option<u32>,
}

pub(in crate::engine) enum Take {
    Got(Recv),
    Empty(Duration),
    /// A malformed element was completed in error; the responder QP is in
    /// error now.
    Bad,
}

/// Takes the next receive of `peer`: from its SRQ if it has one (a target
/// QP: the XRC SRQ the request names), else from its RQ.
pub(in crate::engine) fn take_recv(fabric: &Fabric, peer: &Peer) -> Take {
    let pc = peer.ctrl();
    let Some((mut max_sge, recv_cqn, qp_pdn, srq, timer)) = pc.lock().qp(peer.qpn).map(|q| {
        (
            q.caps.max_recv_sge,
            peer.xrc.map_or(q.recv_cqn, |t| t.cqn),
            peer.xrc.map_or(q.pdn, |t| t.pdn),
            peer.xrc.map(|t| t.link()).or(q.srq),
            q.attr.min_rnr_timer,
        )
    }) else {
        return Take::Empty(Duration::ZERO);
    };
    let xrc_srqn = peer.xrc.map(|t| t.srqn);
    let recv = |head, wqe| Recv {
        head,
        wqe,
        recv_cqn,
        pdn: srq.map_or(qp_pdn, |s| s.pdn),
        qp_pdn,
        xrc_srqn,
    };
    // A receive held for a message that never ended is the next one, for
    // a message to the same queue (a target QP's came from the XRC SRQ
    // one request named; one for another SRQ ends it).
    let held = pc.lock().qp_mut(peer.qpn).and_then(|q| q.held_recv.take());
    if let Some(h) = held {
        if h.xrc_srqn == xrc_srqn {
            return Take::Got(recv(h.head, h.wqe));
        }
        transfer::flush_held(pc, peer.qpn, h, IB_WC_WR_FLUSH_ERR);
    }
    let delay = Duration::from_micros(rnr_delay_us(timer));
    let rq = match srq {
        Some(link) => pc.lock().srqs.get(link.srqn).map(|s| {
            max_sge = s.max_sge;
            Wq::Ring(s.ring.clone())
        }),
        None => rq_of(pc, peer.qpn),
    };
    let Some(rq) = rq else {
        return Take::Empty(delay);
    };
    let max = wqe::RQ_HDR_LEN + SGE_LEN * max_sge as usize;
    let mut bytes = Element::new();
    let Some(head) = rq.pop(pc, max + 1, &mut bytes) else {
        return Take::Empty(delay);
    };
    if let Some(link) = srq {
        srq_took(pc, link.srqn, &rq);
    }
    match wqe::parse_recv(&bytes, max_sge) {
        Ok(wqe) => Take::Got(recv(head, wqe)),
        Err(m) => {
            let what = if srq.is_some() { "SRQ" } else { "RQ" };
            pc.guest_warn(format_args!(
                "QP {}: bad {what} element: {}",
                peer.qpn, m.why
            ));
            rq.give_back(pc, head);
            let c = cqe(m.wr_id, IB_WC_LOC_QP_OP_ERR, IB_WC_RECV, peer.qpn);
            complete(fabric, pc, peer.qpn, recv_cqn, &c, false);
            to_error(fabric, pc, peer.qpn);
            Take::Bad
        }
    }
}

/// A receive for a message: taken, or the response a message that needs
/// one gets without it (an RNR NAK, or for UC the message dropped).
fn need_recv<'p>(fabric: &Fabric, peer: &Peer, m: &Request<'_>) -> Result<Recv, Response<'p>> {
    match take_recv(fabric, peer) {
        Take::Got(r) => Ok(r),
        // UC has no RNR NAK to wait on: the message is lost.
        Take::Empty(_) if uc(m) => Err(Response::Dropped(format!(
            "QP {} has no receive posted",
            peer.qpn
        ))),
        Take::Empty(d) => Err(Response::Rnr(d)),
        Take::Bad if uc(m) => Err(Response::Dropped(format!(
            "QP {} failed a malformed receive",
            peer.qpn
        ))),
        Take::Bad => Err(Response::Nak(Nak::RemoteOperation)),
    }
}

/// After a receive was taken from SRQ `srqn` (ring `rq`): reports the
/// limit event if the receives left fell below its armed limit.
fn srq_took(ctrl: &Ctrl, srqn: u32, rq: &Wq<'_>) {
    let Wq::Ring(ring) = rq else {
        return;
    };
    let Some(left) = ring.pending(&ctrl.mem().memory()) else {
        return;
    };
    let fired = ctrl.lock().srqs.get_mut(srqn).is_some_and(|s| s.took(left));
    if fired {
        event::post(ctrl, Event::SrqLimitReached(srqn));
    }
}

/// Completes receive `r` on `peer` with `c` (status etc. filled in).
pub(in crate::engine) fn complete_recv(
    fabric: &Fabric,
    peer: &Peer,
    r: &Recv,
    mut c: VirtioRdmaCqReq,
    solicited: bool,
) {
    let pc = peer.ctrl();
    if let Some(rq) = recv_vring(pc, peer.qpn) {
        give_back(pc, rq, r.head);
    }
    c.wr_id = U64::new(r.wqe.wr_id);
    c.qp_num = U32::new(peer.qpn);
    c.port_num = 1;
    let failed = c.status != IB_WC_SUCCESS;
    complete(fabric, pc, peer.qpn, r.recv_cqn, &c, solicited);
    if failed {
        to_error(fabric, pc, peer.qpn);
    }
}

pub(in crate::engine) fn recv_error(fabric: &Fabric, peer: &Peer, r: &Recv, status: u8) {
    complete_recv(fabric, peer, r, cqe(0, status, IB_WC_RECV, peer.qpn), false);
}

/// The responder QP's error for a request: it moves to error and reports
/// `event`, and an RC requester gets `nak`; a UC one gets nothing.
fn refuse<'p>(fabric: &Fabric, peer: &Peer, event: Event, nak: Nak) -> Response<'p> {
    to_error_event(fabric, peer.ctrl(), peer.qpn, event);
    Response::Nak(nak)
}

/// SEND (with immediate data or Invalidate).
fn send<'p>(
    fabric: &Fabric,
    peer: &Peer,
    pmem: &'p GuestMemoryMmap,
    m: &Request<'_>,
) -> Response<'p> {
    let r = match need_recv(fabric, peer, m) {
        Ok(r) => r,
        Err(answer) => return answer,
    };
    let pc = peer.ctrl();
    let len = m.payload.len();
    let dst = resolve(
        &pc.lock(),
        r.pdn,
        &r.wqe.sges,
        IB_ACCESS_LOCAL_WRITE,
        len as u64,
    )
    .ok()
    .and_then(|ranges| slices(pmem, &ranges));
    // A receive the responder cannot scatter into is the responder's local
    // error (its receive fails, it moves to error); an RC requester also
    // learns of it from the NAK, a UC one does not.
    let Some(dst) = dst else {
        recv_error(fabric, peer, &r, IB_WC_LOC_PROT_ERR);
        if uc(m) {
            return Response::Dropped(format!("QP {}: receive SGEs refused", peer.qpn));
        }
        return Response::Nak(Nak::RemoteOperation);
    };
    if total(&dst) < len {
        recv_error(fabric, peer, &r, IB_WC_LOC_LEN_ERR);
        if uc(m) {
            return Response::Dropped(format!("QP {}: receive shorter than {len} bytes", peer.qpn));
        }
        return Response::Nak(Nak::InvalidRequest);
    }
    let mut c = cqe(0, IB_WC_SUCCESS, IB_WC_RECV, peer.qpn);
    if let Some(rkey) = m.ieth {
        if !invalidate(pc, r.qp_pdn, rkey) {
            recv_error(fabric, peer, &r, IB_WC_LOC_PROT_ERR);
            return Response::Nak(Nak::RemoteOperation);
        }
        c.wc_flags = U32::new(IB_WC_WITH_INVALIDATE);
        c.ex = U32::new(rkey);
    }
    if let Some(imm) = m.imm {
        c.wc_flags = U32::new(IB_WC_WITH_IMM);
        c.ex = U32::new(imm);
    }
    c.byte_len = U32::new(len as u32);
    c.src_qp = U32::new(m.src_qp);
    if len as u64 > m.whole_up_to {
        return Response::Moving(transfer::start(peer, Some((r, c, m.se)), len as u64));
    }
    m.payload.copy_to(&dst);
    complete_recv(fabric, peer, &r, c, m.se);
    Response::Ack
}

/// RDMA WRITE (with immediate data).
fn write<'p>(
    fabric: &Fabric,
    peer: &Peer,
    pmem: &'p GuestMemoryMmap,
    m: &Request<'_>,
) -> Response<'p> {
    let len = m.payload.len();
    let dst = resolve_remote(
        peer,
        m.remote.rkey,
        m.remote.va,
        len as u64,
        IB_ACCESS_REMOTE_WRITE,
    )
    .ok()
    .and_then(|ranges| slices(pmem, &ranges));
    let Some(dst) = dst else {
        // A UC responder drops a write that fails its access checks and
        // carries on: there is no NAK to send, and IB does not move it to
        // error for that.
        if uc(m) {
            uc_key_refused(fabric, peer);
            return Response::Dropped(format!(
                "QP {}: rkey {:#x} refused remote write of {len} bytes at {:#x}",
                peer.qpn, m.remote.rkey, m.remote.va
            ));
        }
        return refuse(
            fabric,
            peer,
            Event::QpAccessErr(peer.qpn),
            Nak::RemoteAccess,
        );
    };
    // WRITE_WITH_IMM consumes a receive: without one, nothing is written.
    let r = match m.imm {
        Some(_) => match need_recv(fabric, peer, m) {
            Ok(r) => Some(r),
            Err(answer) => return answer,
        },
        None => None,
    };
    let mut c = cqe(0, IB_WC_SUCCESS, IB_WC_RECV_RDMA_WITH_IMM, peer.qpn);
    c.byte_len = U32::new(len as u32);
    c.wc_flags = U32::new(IB_WC_WITH_IMM);
    c.ex = U32::new(m.imm.unwrap_or(0));
    c.src_qp = U32::new(m.src_qp);
    if len as u64 > m.whole_up_to {
        return Response::Moving(transfer::start(peer, r.map(|r| (r, c, m.se)), len as u64));
    }
    m.payload.copy_to(&dst);
    if let Some(r) = r {
        complete_recv(fabric, peer, &r, c, m.se);
    }
    Response::Ack
}

/// RDMA READ: the responder's memory, for the requester to read from.
fn read<'p>(
    fabric: &Fabric,
    peer: &Peer,
    pmem: &'p GuestMemoryMmap,
    m: &Request<'_>,
) -> Response<'p> {
    let src = resolve_remote(
        peer,
        m.remote.rkey,
        m.remote.va,
        m.remote.len,
        IB_ACCESS_REMOTE_READ,
    )
    .ok()
    .and_then(|ranges| slices(pmem, &ranges));
    let Some(src) = src else {
        return refuse(
            fabric,
            peer,
            Event::QpAccessErr(peer.qpn),
            Nak::RemoteAccess,
        );
    };
    if m.remote.len > m.whole_up_to {
        return Response::Moving(transfer::start(peer, None, m.remote.len));
    }
    Response::Read(src)
}

/// Runs `f` on the 8 aligned bytes of an atomic or ATOMIC WRITE at the
/// responder, as one host atomic; the NAK if the request may not reach
/// them.
fn on_cell<'p>(
    fabric: &Fabric,
    peer: &Peer,
    pmem: &'p GuestMemoryMmap,
    m: &Request<'_>,
    access: u32,
    f: impl FnOnce(&AtomicU64) -> Response<'p>,
) -> Response<'p> {
    if m.remote.va % 8 != 0 {
        return refuse(fabric, peer, Event::QpReqErr(peer.qpn), Nak::InvalidRequest);
    }
    let target = resolve_remote(peer, m.remote.rkey, m.remote.va, 8, access)
        .ok()
        .and_then(|ranges| slices(pmem, &ranges));
    // Aligned 8 bytes never cross a page, so the target is one slice of 8
    // bytes, aligned in the mapping too.
    let cell = match target.as_deref() {
        Some([t]) => t.get_atomic_ref::<AtomicU64>(0).ok(),
        _ => None,
    };
    match cell {
        Some(cell) => f(cell),
        None => refuse(
            fabric,
            peer,
            Event::QpAccessErr(peer.qpn),
            Nak::RemoteAccess,
        ),
    }
}

/// Atomic `op` on `cell` as one host atomic: the original value. A host
/// atomic makes the read-modify-write atomic against every other atomic,
/// whichever thread (lane) or device runs it (IB_ATOMIC_HCA asks for no
/// more). The value is little endian; a failed compare writes nothing.
pub(in crate::engine) fn rmw(cell: &AtomicU64, op: AtomicOp) -> u64 {
    let update = |raw: u64| {
        let v = u64::from_le(raw);
        let new = match op {
            AtomicOp::CompareSwap { compare, swap } => (v == compare).then_some(swap)?,
            AtomicOp::FetchAdd { add } => v.wrapping_add(add),
        };
        Some(new.to_le())
    };
    let raw = match cell.fetch_update(Ordering::SeqCst, Ordering::SeqCst, update) {
        Ok(raw) | Err(raw) => raw,
    };
    u64::from_le(raw)
}

/// COMPARE AND SWAP, FETCH AND ADD: the original value goes back.
fn atomic<'p>(
    fabric: &Fabric,
    peer: &Peer,
    pmem: &'p GuestMemoryMmap,
    m: &Request<'_>,
) -> Response<'p> {
    let op = if m.op == Op::CompareSwap {
        AtomicOp::CompareSwap {
            compare: m.compare_add,
            swap: m.swap,
        }
    } else {
        AtomicOp::FetchAdd { add: m.compare_add }
    };
    on_cell(fabric, peer, pmem, m, IB_ACCESS_REMOTE_ATOMIC, |cell| {
        let orig = rmw(cell, op);
        // Kept to answer a duplicate of this request.
        if let Some(q) = peer.ctrl().lock().qp_mut(peer.qpn) {
            if q.atomic_replies.len() == ATOMIC_REPLIES {
                q.atomic_replies.pop_front();
            }
            q.atomic_replies.push_back((m.psn, orig));
        }
        Response::Atomic(orig)
    })
}

/// ATOMIC WRITE (IBA 1.5): the 8 bytes the request carries (in its
/// `compare_add`, in memory order) land at an aligned remote address in
/// one store, under the rights of an RDMA WRITE.
fn atomic_write<'p>(
    fabric: &Fabric,
    peer: &Peer,
    pmem: &'p GuestMemoryMmap,
    m: &Request<'_>,
) -> Response<'p> {
    on_cell(fabric, peer, pmem, m, IB_ACCESS_REMOTE_WRITE, |cell| {
        // The carried bytes, as they were in the element.
        let bytes = m.compare_add.to_le_bytes();
        cell.store(u64::from_ne_bytes(bytes), Ordering::SeqCst);
        Response::Ack
    })
}

/// FLUSH (IBA 1.5) of a range or of the whole MR its rkey names, to global
/// visibility. Every earlier request of the QP finished its copy before
/// this one started, so a fence is all the placement needs.
fn flush<'p>(fabric: &Fabric, peer: &Peer, m: &Request<'_>) -> Response<'p> {
    let (flush_type, flush_level) = m.flush;
    match flush_granted(
        peer,
        m.remote.rkey,
        m.remote.va,
        m.remote.len,
        flush_type,
        flush_level,
    ) {
        Ok(()) => {
            std::sync::atomic::fence(Ordering::SeqCst);
            Response::Ack
        }
        Err(Nak::InvalidRequest) => {
            refuse(fabric, peer, Event::QpReqErr(peer.qpn), Nak::InvalidRequest)
        }
        Err(nak) => refuse(fabric, peer, Event::QpAccessErr(peer.qpn), nak),
    }
}

/// Whether a FLUSH of placement `flush_type` at selectivity `flush_level`
/// of `len` bytes at `va` under `rkey` may run at `peer`: the QP's and the
/// MR's FLUSH rights of each placement asked for (a persistent one no MR
/// here can grant) and, for a range, its bounds.
pub(in crate::engine) fn flush_granted(
    peer: &Peer,
    rkey: u32,
    va: u64,
    len: u64,
    flush_type: u8,
    flush_level: u8,
) -> Result<(), Nak> {
    let placements = IB_FLUSH_GLOBAL | IB_FLUSH_PERSISTENT;
    if flush_type == 0 || flush_type & !placements != 0 || flush_level > IB_FLUSH_MR {
        return Err(Nak::InvalidRequest);
    }
    let mut access = 0;
    if flush_type & IB_FLUSH_GLOBAL != 0 {
        access |= IB_ACCESS_FLUSH_GLOBAL;
    }
    if flush_type & IB_FLUSH_PERSISTENT != 0 {
        access |= IB_ACCESS_FLUSH_PERSISTENT;
    }
    let st = peer.ctrl().lock();
    let granted = st.qp(peer.qpn).is_some_and(|qp| {
        let pdn = peer.xrc.map_or(qp.pdn, |t| t.pdn);
        qp.attr.qp_access_flags.get() & access == access
            && match flush_level {
                // The whole MR: its key and rights, whatever the range.
                IB_FLUSH_MR => st
                    .mrs
                    .by_key(rkey)
                    .is_some_and(|mr| mr.pdn == pdn && mr.access & access == access),
                _ => st
                    .mrs
                    .remote(rkey, peer.qpn, pdn, va, len, access)
                    .is_some(),
            }
    });
    granted.then_some(()).ok_or(Nak::RemoteAccess)
}

/// The 40-byte GRH area of a RoCEv2 UD receive: an IPv4 header in its last
/// 20 bytes when both GIDs are IPv4-mapped, else an IPv6 header.
fn grh(sgid: &[u8; 16], dgid: &[u8; 16], frame: &Frame, len: usize) -> ([u8; 40], u8) {
    let mut g = [0u8; 40];
    let v4 =
        |gid: &[u8; 16]| gid[..10].iter().all(|b| *b == 0) && gid[10] == 0xff && gid[11] == 0xff;
    // UDP + BTH + DETH + payload + ICRC.
    let l4 = (8 + 12 + 8 + len + 4) as u16;
    if v4(sgid) && v4(dgid) {
        let h = &mut g[20..];
        h[0] = 0x45;
        h[1] = frame.traffic_class;
        h[2..4].copy_from_slice(&(l4 + 20).to_be_bytes());
        h[6] = 0x40;
        h[8] = frame.hop_limit.max(1);
        h[9] = 17;
        h[12..16].copy_from_slice(&sgid[12..]);
        h[16..20].copy_from_slice(&dgid[12..]);
        let mut sum: u32 = h
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        (g, RDMA_NETWORK_IPV4)
    } else {
        let flow = frame.flow_label & 0xf_ffff;
        let word = (6u32 << 28) | (u32::from(frame.traffic_class) << 20) | flow;
        g[..4].copy_from_slice(&word.to_be_bytes());
        g[4..6].copy_from_slice(&l4.to_be_bytes());
        g[6] = 17;
        g[7] = frame.hop_limit;
        g[8..24].copy_from_slice(sgid);
        g[24..40].copy_from_slice(dgid);
        (g, RDMA_NETWORK_IPV6)
    }
}

/// Delivers datagram `m` (UD or GSI) to the QP it names on `dev`, whose
/// guest memory is `pmem`: taken by a UD QP in RTR or RTS with its Q_Key
/// and a receive posted (the GRH, then the payload), else dropped (a wrong
/// Q_Key counted); nothing answers.
pub(super) fn datagram(
    fabric: &Fabric,
    dev: Arc<RdmaDevice>,
    pmem: &GuestMemoryMmap,
    m: &Request<'_>,
) {
    let mut peer = Peer::new(dev, m.dest_qp);
    let (ready, qkey_ok, counters) = peer
        .ctrl()
        .lock()
        .qp(peer.qpn)
        .filter(|q| q.is_ud() && q.can_receive())
        .map_or((false, false, None), |q| {
            (true, Some(q.attr.qkey.get()) == m.qkey, q.counters.clone())
        });
    peer.counters = counters;
    if ready && !qkey_ok {
        peer.tally().inc(Counter::BadQkey);
    }
    if !qkey_ok {
        debug!(
            "{}: QP {}: datagram from QP {} dropped",
            peer.ctrl().name(),
            peer.qpn,
            m.src_qp
        );
        return;
    }
    let r = match take_recv(fabric, &peer) {
        Take::Got(r) => r,
        Take::Empty(_) | Take::Bad => return,
    };
    let len = m.payload.len();
    peer.tally().rcvd(1, len as u64);
    let pc = peer.ctrl();
    let need = (GRH_LEN + len) as u64;
    let dst = resolve(&pc.lock(), r.pdn, &r.wqe.sges, IB_ACCESS_LOCAL_WRITE, need)
        .ok()
        .and_then(|ranges| slices(pmem, &ranges));
    let Some(dst) = dst else {
        recv_error(fabric, &peer, &r, IB_WC_LOC_PROT_ERR);
        return;
    };
    if total(&dst) < GRH_LEN + len {
        recv_error(fabric, &peer, &r, IB_WC_LOC_LEN_ERR);
        return;
    }
    let (g, net) = grh(&m.src_gid, &m.dest_gid, &m.frame, len);
    write_bytes(&g, &dst);
    m.payload.copy_to(&skip(&dst, GRH_LEN));
    let mut c = cqe(0, IB_WC_SUCCESS, IB_WC_RECV, peer.qpn);
    let mut flags = IB_WC_GRH | IB_WC_WITH_SMAC | IB_WC_WITH_NETWORK_HDR_TYPE;
    if let Some(imm) = m.imm {
        flags |= IB_WC_WITH_IMM;
        c.ex = U32::new(imm);
    }
    c.wc_flags = U32::new(flags);
    c.byte_len = U32::new((GRH_LEN + len) as u32);
    c.src_qp = U32::new(m.src_qp);
    c.sl = m.frame.sl;
    c.network_hdr_type = net;
    c.smac = m.frame.smac;
    c.pkey_index = U16::new(0);
    complete_recv(fabric, &peer, &r, c, m.se);
}
