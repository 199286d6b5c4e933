// SPDX-License-Identifier: GPL-2.0
//! The data path: executing SQ elements, delivering to receive queues of
//! QPs on this or another device of the process, completing, and moving
//! QPs to the error state with flush completions.
//!
//! This file is the requester: it reads and checks an SQ element and its
//! own memory, forms the request (`message.rs`), hands it to the responder
//! (`responder.rs`, which works from the request and its own device only)
//! and turns the answer into a completion, placing a READ's data and an
//! atomic's original value itself.
//!
//! Everything here runs holding what the step may touch (see `fabric.rs`:
//! the lanes of the QP and of its peer, or the whole fabric); steps of
//! other QPs of the same devices may run at the same time on other
//! threads (`lane.rs`). Data moves
//! directly from one guest's memory to the other's (`VolatileSlice` to
//! `VolatileSlice`), never through a bounce buffer. Every key, PD, access
//! right and bound is checked against the registered MRs before a byte
//! moves; a check that fails gives the IB completion status and, as IB
//! does, moves the QP (and for responder errors the responder QP) to error.
//!
//! Fairness: one kick of an SQ executes at most [`SQ_BUDGET`] elements
//! (or chunks of a large message, see `transfer.rs`), keeping the locks
//! from one to the next only while no other thread waits for them
//! ([`fabric::pass_on`]), so that another thread waiting for this device
//! (its peer's, or a control command) gets its turn between any two of
//! this QP's elements; an SQ with more left is scheduled again
//! ([`Ctrl::schedule_sq`]) and served after the kicks of the loop's round,
//! a pass of each scheduled SQ at a time, back to back for a bounded
//! number of steps before the loop looks for events again (`worker.rs`). A
//! posted receive retries only the sender stalled on that very QP.
//!
//! An XRC_INI QP requests as RC does, of its XRC_TGT peer; each request
//! names the XRC SRQ of the target's domain that stands in for the
//! target's PD and receive queue (`xrcd.rs`), and one naming anything
//! else fails with IB_WC_REM_INV_REQ_ERR and moves nothing.
//!
//! UC QPs are connected like RC but nothing acknowledges their messages:
//! what the responder does not take (no receive posted, a failed remote
//! access check, a responder that is gone) is lost without stalling or
//! failing the requester, whose work request completes successfully once
//! its own local checks pass.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{debug, error};
use smallvec::SmallVec;
use vhost_user_backend::VringT;
use virtio_queue::{DescriptorChain, QueueT};
use vm_memory::{
    Bytes, GuestAddress, GuestAddressSpace, GuestMemoryBackend, GuestMemoryMmap, VolatileMemory,
    VolatileSlice,
};
use zerocopy::little_endian::{U16, U32, U64};

use crate::abi::VirtioRdmaCqReq;
use crate::counter_sets::CounterSet;
use crate::cq;
use crate::ctrl::{Ctrl, State};
use crate::device::RdmaDevice;
use crate::event::{self, Event};
use crate::fabric::{self, Fabric};
use crate::ib::*;
use crate::limits;
use crate::mr::{MrKind, Ranges};
use crate::packet::Op;
use crate::qp::{self, rnr_delay_us, Resend, Why};
use crate::ring::{Element, WorkRing};
use crate::stats::{Counter, Tally};
use crate::transport;
use crate::vring::RdmaVring;
use crate::wqe::{self, wr_id_of, RecvWqe, SendWqe, Sge, SGE_LEN, SQ_HDR_LEN};
use crate::xrcd::{self, Target};

mod message;
mod responder;
mod transfer;
pub mod wire;

use message::{Frame, Payload, Remote, Request, Response};
use responder::{complete_recv, recv_error, Peer, Recv};

pub use responder::MAX_BAD_KEYS;
pub use transfer::CHUNK;

/// Result of executing one SQ element.
enum Exec {
    /// Finished with this status and byte count.
    Done(u8, u32),
    /// The responder has no receive posted; retry after this delay (RC).
    Rnr(Duration),
    /// Nothing answered (RC): sent again when the transport timer runs out.
    Unanswered,
    /// Admitted, larger than a chunk: moves in chunks (`transfer.rs`).
    Partial(transfer::Started),
}

/// Guest memory of one side of a copy, one slice per contiguous run
/// (inline up to four: no heap allocation in the common case).
type Slices<'m> = SmallVec<[VolatileSlice<'m, ()>; 4]>;

/// A work queue of a QP: its virtqueue, or its ring in guest memory. Ring
/// elements are consumed as they are read (the device keeps the copy), so
/// only a virtqueue's elements are given back.
enum Wq<'a> {
    Vring(&'a RdmaVring),
    Ring(Arc<WorkRing>),
}

impl Wq<'_> {
    /// Takes the next element, at most `max` bytes of it, into `buf`;
    /// its head.
    fn pop(&self, ctrl: &Ctrl, max: usize, buf: &mut Element) -> Option<u16> {
        match self {
            Wq::Vring(v) => pop(ctrl, v, max, buf),
            Wq::Ring(r) => r.pop_into(&ctrl.mem().memory(), max, buf).then_some(0),
        }
    }

    /// Returns a taken element unwritten.
    fn give_back(&self, ctrl: &Ctrl, head: u16) {
        if let Wq::Vring(v) = self {
            give_back(ctrl, v, head);
        }
    }

    /// Stops notifications while the device takes elements (a ring's
    /// follow the device's polling, `Ctrl::poll_rings`).
    fn quiet(&self) {
        if let Wq::Vring(v) = self {
            let _ = v.disable_notification();
        }
    }

    /// Makes the producer's next post notify; whether elements arrived
    /// meanwhile, which the caller must then take itself.
    fn kicks_again(&self, ctrl: &Ctrl) -> bool {
        match self {
            Wq::Vring(v) => kicks_again(v),
            Wq::Ring(r) => r.has_work(&ctrl.mem().memory()),
        }
    }
}

/// Which work queue of a QP.
#[derive(Clone, Copy)]
enum Side {
    Send,
    Recv,
}

/// The `side` work queue of QP `qpn`: its virtqueue, else its ring.
fn wq_of(ctrl: &Ctrl, qpn: u32, side: Side) -> Option<Wq<'_>> {
    let vring = match side {
        Side::Send => ctrl.sq_vring(qpn),
        Side::Recv => ctrl.rq_vring(qpn),
    };
    if let Some(v) = vring {
        return Some(Wq::Vring(v));
    }
    let st = ctrl.lock();
    let rings = st.qp(qpn)?.rings.as_ref()?;
    Some(Wq::Ring(match side {
        Side::Send => rings.sq.clone(),
        Side::Recv => rings.rq.clone()?,
    }))
}

/// The SQ of QP `qpn`.
fn sq_of(ctrl: &Ctrl, qpn: u32) -> Option<Wq<'_>> {
    wq_of(ctrl, qpn, Side::Send)
}

/// The RQ of QP `qpn` (a QP with an SRQ has none: only a virtqueue the
/// driver does not use).
fn rq_of(ctrl: &Ctrl, qpn: u32) -> Option<Wq<'_>> {
    wq_of(ctrl, qpn, Side::Recv)
}

/// The RQ virtqueue a receive of QP `qpn` came from and goes back to:
/// none for a QP with an SRQ, whose receives are consumed from its ring.
fn recv_vring(ctrl: &Ctrl, qpn: u32) -> Option<&RdmaVring> {
    let own = ctrl.lock().qp(qpn).is_some_and(|q| q.srq.is_none());
    ctrl.rq_vring(qpn).filter(|_| own)
}

/// SQ elements one pass executes before the device's other queues get
/// their turn.
pub const SQ_BUDGET: usize = 8;

/// Serves a kick of QP `qpn`'s SQ: one budgeted pass. Returns the number
/// of steps it took (elements, or chunks of a large message).
pub fn sq_kicked(ctrl: &Ctrl, qpn: u32) -> usize {
    let Some(sq) = sq_of(ctrl, qpn) else {
        return 0;
    };
    let mut fabric = fabric::for_qp(ctrl, qpn);
    for step in 0..SQ_BUDGET {
        if !sq_step(&fabric, ctrl, qpn, &sq) {
            fabric::unlock_fair(fabric);
            // Whatever stopped it (empty ring, error, RNR stall, state),
            // the driver's next post must kick: with EVENT_IDX that needs
            // avail_event to be current.
            if let Wq::Vring(v) = sq {
                let _ = v.enable_notification();
            }
            return step;
        }
        fabric = fabric::pass_on(fabric, ctrl, qpn);
    }
    fabric::unlock_fair(fabric);
    // Budget used up: more after the other queues (this runs on the
    // device's own loop, or in the fuzz targets' stand-in for it).
    ctrl.requeue_sq(qpn);
    SQ_BUDGET
}

/// Serves the SQs of lane `lane` scheduled for another pass
/// ([`Ctrl::schedule_sq`]), one pass each. Returns the steps they took.
pub fn run_scheduled(ctrl: &Ctrl, lane: usize) -> usize {
    ctrl.lanes()
        .get(lane)
        .take_scheduled()
        .into_iter()
        .map(|qpn| sq_kicked(ctrl, qpn))
        .sum()
}

/// Serves a kick of QP `qpn`'s RQ: a new receive may unblock a sender
/// waiting on RNR; on a QP in error the receive is flushed at once.
pub fn rq_kicked(ctrl: &Ctrl, qpn: u32) {
    let fabric = fabric::for_qp(ctrl, qpn);
    if let Some(v) = ctrl.rq_vring(qpn) {
        // Keep the driver kicking (with EVENT_IDX, avail_event must move).
        let _ = v.enable_notification();
    }
    let state = ctrl.lock().qp(qpn).map(|q| q.state());
    if state == Some(IB_QPS_ERR) {
        flush(&fabric, ctrl, qpn);
    }
    retry_senders_of(&fabric, ctrl, qpn);
}

/// Retries the due RNR waits of lane `lane`'s QPs (timer); returns the
/// time until the lane's next one.
pub fn tick(ctrl: &Ctrl, lane: usize) -> Option<Duration> {
    let now = Instant::now();
    let due: Vec<u32> = {
        let st = ctrl.lock();
        if !st.resending() {
            return None;
        }
        st.qps
            .iter()
            .filter(|(n, q)| {
                ctrl.lanes().index_of(*n) == lane
                    && q.resend
                        .as_ref()
                        .and_then(|r| r.next_try)
                        .is_some_and(|t| t <= now)
            })
            .map(|(n, _)| n)
            .collect()
    };
    for qpn in due {
        let fabric = fabric::for_qp(ctrl, qpn);
        retry_one(&fabric, ctrl, qpn, true);
        fabric::unlock_fair(fabric);
    }
    next_timer(ctrl, lane)
}

/// Time until the next RNR retry of lane `lane`'s QPs, if any is pending.
pub fn next_timer(ctrl: &Ctrl, lane: usize) -> Option<Duration> {
    let st = ctrl.lock();
    if !st.resending() {
        return None;
    }
    let now = Instant::now();
    st.qps
        .iter()
        .filter(|(n, _)| ctrl.lanes().index_of(*n) == lane)
        .filter_map(|(_, q)| {
            q.resend
                .as_ref()
                .and_then(|r| r.next_try)
                .map(|t| t.saturating_duration_since(now))
        })
        .min()
}

/// Retries the sender stalled on RNR whose responder is QP `qpn` of
/// `ctrl` (a receive was posted there): its peer, if that is connected to
/// it (admission lets no other QP's requests in, and the step holds no
/// other device than the peer's).
fn retry_senders_of(fabric: &Fabric, ctrl: &Ctrl, qpn: u32) {
    let Some(peer) = ctrl
        .lock()
        .qp(qpn)
        .map(|q| (q.attr.ah_attr.dgid, q.attr.dest_qp_num.get()))
    else {
        return;
    };
    let Some(dev) = fabric::by_gid(fabric, &peer.0) else {
        return;
    };
    let sender = dev
        .ctrl()
        .lock()
        .qp(peer.1)
        .filter(|q| q.resend.as_ref().is_some_and(|r| r.why == Why::Rnr))
        .map(|q| (q.attr.dest_qp_num.get(), q.attr.ah_attr.dgid));
    // (Its device's tables are unlocked: it may be this device.)
    let stalled = sender.is_some_and(|(dest, dgid)| dest == qpn && ctrl.has_gid(&dgid));
    if stalled {
        retry_one(fabric, dev.ctrl(), peer.1, false);
    }
}

fn retry_one(fabric: &Fabric, ctrl: &Ctrl, qpn: u32, timed: bool) {
    let Some((mut wait, s)) = ({
        let mut st = ctrl.lock();
        let wait = st.take_resend(qpn);
        wait.zip(sender_in(&st, qpn))
    }) else {
        return;
    };
    if ctrl.lock().qp(qpn).is_some_and(|q| q.transfer.is_some()) {
        // A chunk of a message moving in chunks went unanswered.
        match timed {
            true => transfer::timed_out(fabric, ctrl, qpn, &s, wait),
            false => ctrl.lock().set_resend(qpn, wait),
        }
        return;
    }
    if wait.why == Why::Unanswered {
        // Only its timer sends an unanswered request again.
        if !timed {
            ctrl.lock().set_resend(qpn, wait);
            return;
        }
        if wait.retries_left == 0 {
            debug!(
                "{}: QP {qpn}: wr_id {} unanswered after its retries",
                ctrl.name(),
                wait.wqe.wr_id
            );
            finish(
                fabric,
                ctrl,
                qpn,
                &s,
                wait.head,
                &wait.wqe,
                IB_WC_RETRY_EXC_ERR,
                0,
            );
            return;
        }
        wait.retries_left -= 1;
    }
    let Resend {
        head,
        wqe,
        why,
        retries_left,
        next_try,
    } = wait;
    match execute(fabric, ctrl, qpn, &s, &wqe) {
        Exec::Rnr(delay) => {
            // A timed retry uses one up (7: never); the RNR count starts
            // over after an unanswered one.
            let left = match why {
                Why::Rnr if timed && retries_left != RNR_RETRY_INFINITE => {
                    Some(retries_left.saturating_sub(1))
                }
                Why::Rnr => Some(retries_left),
                Why::Unanswered => None,
            };
            resend_later(fabric, ctrl, qpn, &s, head, wqe, Again::Rnr(delay), left);
            if !timed {
                // Retried for a receive posted at the responder: its timer
                // stays as it was.
                if let Some(r) = ctrl.lock().qp_mut(qpn).and_then(|q| q.resend.as_mut()) {
                    r.next_try = next_try;
                }
                // Another thread (the responder's lane, or device) had
                // taken the wait: the QP's own thread may have looked for
                // its next timer meanwhile and found none.
                ctrl.lanes().of(qpn).wake_up();
            }
        }
        Exec::Unanswered => {
            let left = (why == Why::Unanswered).then_some(retries_left);
            resend_later(fabric, ctrl, qpn, &s, head, wqe, Again::Unanswered, left);
            if !timed {
                ctrl.lanes().of(qpn).wake_up();
            }
        }
        Exec::Done(status, len) => {
            let ok = status == IB_WC_SUCCESS;
            finish(fabric, ctrl, qpn, &s, head, &wqe, status, len);
            if ok {
                // The rest of the SQ, on its own device's thread.
                ctrl.schedule_sq(qpn);
            }
        }
        Exec::Partial(started) => {
            if let Some(q) = ctrl.lock().qp_mut(qpn) {
                q.transfer = Some(transfer::begin(head, wqe, started));
            }
            ctrl.schedule_sq(qpn);
        }
    }
}

/// When an element goes again.
enum Again {
    /// After an RNR NAK's timer (or a receive posted at the responder).
    Rnr(Duration),
    /// After the QP's transport timer (never for `timeout` 0).
    Unanswered,
}

/// Makes element (`head`, `w`) of QP `qpn` (sender `s`) wait to be sent
/// `again`, with `left` retries if it waited for the same reason before,
/// else the QP's count; an RNR NAK'd one with none left completes with
/// RNR_RETRY_EXC_ERR.
#[allow(clippy::too_many_arguments)]
fn resend_later(
    fabric: &Fabric,
    ctrl: &Ctrl,
    qpn: u32,
    s: &Sender,
    head: u16,
    w: SendWqe,
    again: Again,
    left: Option<u8>,
) {
    let Some((rnr_retry, retry_cnt, timeout)) = ctrl
        .lock()
        .qp(qpn)
        .map(|q| (q.attr.rnr_retry, q.attr.retry_cnt, q.attr.timeout))
    else {
        return;
    };
    let now = Instant::now();
    let (why, retries_left, next_try) = match again {
        Again::Rnr(delay) => {
            let left = left.unwrap_or(rnr_retry);
            if left == 0 {
                finish(fabric, ctrl, qpn, s, head, &w, IB_WC_RNR_RETRY_EXC_ERR, 0);
                return;
            }
            (Why::Rnr, left, Some(now + delay))
        }
        Again::Unanswered => {
            let timer = transport::ack_timeout_us(timeout).map(Duration::from_micros);
            (
                Why::Unanswered,
                left.unwrap_or(retry_cnt),
                timer.map(|t| now + t),
            )
        }
    };
    ctrl.lock().set_resend(
        qpn,
        Resend {
            head,
            wqe: w,
            why,
            retries_left,
            next_try,
        },
    );
}

/// Reads the device-readable bytes of a chain, at most `max`, into `buf`;
/// nothing if a descriptor is not in guest memory. Descriptor by descriptor
/// into one buffer (virtio-queue's `Reader` would allocate a list of them
/// first), the caller's: an element is 512 bytes inline, and moving it
/// out by value cost two copies of that per element.
fn read_chain(
    chain: DescriptorChain<&GuestMemoryMmap>,
    mem: &GuestMemoryMmap,
    max: usize,
    buf: &mut Element,
) {
    buf.clear();
    for desc in chain.filter(|d| !d.is_write_only()) {
        let start = buf.len();
        let n = (desc.len() as usize).min(max - start);
        if n == 0 {
            break;
        }
        buf.resize(start + n, 0);
        if mem.read_slice(&mut buf[start..], desc.addr()).is_err() {
            buf.clear();
            return;
        }
    }
}

/// Returns a chain to the driver with nothing written.
fn give_back(ctrl: &Ctrl, vring: &RdmaVring, head: u16) {
    if let Err(e) = vring.add_used(head, 0) {
        error!("{}: cannot return element {head}: {e}", ctrl.name());
        return;
    }
    vring.used_grew(false);
}

/// Pops one chain and reads it into `buf`; its head.
fn pop(ctrl: &Ctrl, vring: &RdmaVring, max: usize, buf: &mut Element) -> Option<u16> {
    let guard = ctrl.mem().memory();
    let mem = &*guard;
    let chain = vring.get_mut().get_queue_mut().pop_descriptor_chain(mem)?;
    let head = chain.head_index();
    read_chain(chain, mem, max, buf);
    Some(head)
}

/// Returns every available chain of `vring` unwritten.
pub fn return_all(ctrl: &Ctrl, vring: &RdmaVring) {
    let mut buf = Element::new();
    while let Some(head) = pop(ctrl, vring, 0, &mut buf) {
        give_back(ctrl, vring, head);
    }
}

/// Returns every chain available on `vring` unwritten (RESET), if the
/// queue is running: at most a queue's worth, so that a driver adding
/// buffers as fast as they come back cannot keep the caller (which holds
/// the whole fabric) here.
pub fn return_available(ctrl: &Ctrl, vring: &RdmaVring) {
    let size = {
        let state = vring.get_ref();
        let queue = state.get_queue();
        // A queue not set up holds nothing (and popping it would log errors).
        if !(queue.ready() && state.is_enabled()) {
            return;
        }
        queue.size()
    };
    let mut buf = Element::new();
    for _ in 0..size {
        let Some(head) = pop(ctrl, vring, 0, &mut buf) else {
            return;
        };
        give_back(ctrl, vring, head);
    }
}

fn cqe(wr_id: u64, status: u8, opcode: u8, qpn: u32) -> VirtioRdmaCqReq {
    VirtioRdmaCqReq {
        wr_id: U64::new(wr_id),
        status,
        opcode,
        port_num: 1,
        qp_num: U32::new(qpn),
        ..Default::default()
    }
}

/// Posts a completion; a CQ overrun moves QP `qpn` to error.
fn complete(
    fabric: &Fabric,
    ctrl: &Ctrl,
    qpn: u32,
    cqn: u32,
    c: &VirtioRdmaCqReq,
    solicited: bool,
) {
    if let Err(e) = cq::post(ctrl, cqn, c, solicited) {
        // A guest (a process, with rings) can overrun its CQs at will: rate-limited.
        ctrl.guest_warn(format_args!(
            "QP {qpn}: completion lost: {e}; QP moves to error"
        ));
        if matches!(e, cq::CqError::Overrun(_) | cq::CqError::RingFull(_)) {
            event::post(ctrl, Event::CqErr(cqn));
        }
        to_error_event(fabric, ctrl, qpn, Event::QpFatal(qpn));
    }
}

/// Moves QP `qpn` to error like [`to_error`] and, if it was not in error
/// yet, reports `event` (a responder error no completion of its own shows).
fn to_error_event(fabric: &Fabric, ctrl: &Ctrl, qpn: u32, event: Event) {
    if to_error(fabric, ctrl, qpn) {
        event::post(ctrl, event);
    }
}

/// Moves QP `qpn` to error and flushes it; `false` if it was in error
/// already (or does not exist).
pub fn to_error(fabric: &Fabric, ctrl: &Ctrl, qpn: u32) -> bool {
    let changed = match ctrl.lock().qp_mut(qpn) {
        Some(q) if q.attr.qp_state != IB_QPS_ERR => {
            q.attr.qp_state = IB_QPS_ERR;
            true
        }
        _ => false,
    };
    if changed {
        debug!("{}: QP {qpn} moves to error", ctrl.name());
        entered_error(fabric, ctrl, qpn);
    }
    changed
}

/// What follows QP `qpn`'s move into ERR: its flush, then for a QP with an
/// SRQ the "last WQE reached" event (its receive completions are all out,
/// and it takes no more receives from the SRQ).
pub fn entered_error(fabric: &Fabric, ctrl: &Ctrl, qpn: u32) {
    flush(fabric, ctrl, qpn);
    if ctrl.lock().qp(qpn).is_some_and(|q| q.srq.is_some()) {
        event::post(ctrl, Event::QpLastWqeReached(qpn));
    }
}

/// Completes every outstanding SQ and RQ element of QP `qpn` with
/// IB_WC_WR_FLUSH_ERR (signaled or not, as IB flushes). An SRQ's receives
/// stay for its other QPs: only the one this QP held for a message that
/// did not end is flushed.
pub fn flush(_fabric: &Fabric, ctrl: &Ctrl, qpn: u32) {
    let Some((send_cqn, recv_cqn, pending)) = ({
        let mut st = ctrl.lock();
        let stalled = st.take_resend(qpn).map(|w| (w.head, w.wqe));
        st.qp_mut(qpn).map(|q| {
            // The element stalled (on RNR, or unanswered) or moving in
            // chunks comes first; a chunk unanswered is both, one element.
            let moving = q.transfer.take().map(|t| (t.head, t.wqe));
            let head = stalled.or(moving);
            (q.send_cqn, q.recv_cqn, head)
        })
    }) else {
        return;
    };
    let post = |cqn: u32, c: VirtioRdmaCqReq| {
        if let Err(e) = cq::post(ctrl, cqn, &c, false) {
            ctrl.guest_warn(format_args!("QP {qpn}: flush completion lost: {e}"));
        }
    };
    // Elements on the wire, in the requester's hands, come next.
    let on_wire = wire::flush_connected(ctrl, qpn);
    if let Some(sq) = sq_of(ctrl, qpn) {
        for (head, w) in pending.into_iter().chain(on_wire) {
            sq.give_back(ctrl, head);
            post(
                send_cqn,
                cqe(w.wr_id, IB_WC_WR_FLUSH_ERR, wqe::wc_opcode(w.opcode), qpn),
            );
        }
        drain(ctrl, &sq, SQ_HDR_LEN, |bytes| {
            let op = bytes
                .get(8)
                .copied()
                .map(wqe::wc_opcode)
                .unwrap_or(IB_WC_SEND);
            post(send_cqn, cqe(wr_id_of(bytes), IB_WC_WR_FLUSH_ERR, op, qpn));
        });
    }
    // A receive a message was filling comes before those still posted.
    transfer::drop_held(ctrl, qpn, Some(IB_WC_WR_FLUSH_ERR));
    if let Some(rq) = rq_of(ctrl, qpn) {
        drain(ctrl, &rq, 8, |bytes| {
            post(
                recv_cqn,
                cqe(wr_id_of(bytes), IB_WC_WR_FLUSH_ERR, IB_WC_RECV, qpn),
            );
        });
    }
}

/// Takes every element of `wq` (its first `max` bytes to `each`), also
/// those that arrive meanwhile; a ring's, at most a ring's worth (a process
/// that keeps posting gets the rest flushed on the next pass).
fn drain(ctrl: &Ctrl, wq: &Wq<'_>, max: usize, mut each: impl FnMut(&[u8])) {
    let mut budget = match wq {
        Wq::Vring(_) => usize::MAX,
        Wq::Ring(r) => r.depth() as usize,
    };
    let mut bytes = Element::new();
    loop {
        while let Some(head) = wq.pop(ctrl, max, &mut bytes) {
            wq.give_back(ctrl, head);
            each(&bytes);
            budget = budget.saturating_sub(1);
            if budget == 0 {
                return;
            }
        }
        if !wq.kicks_again(ctrl) {
            break;
        }
    }
}

/// Makes the driver's next post to `vring` kick (with EVENT_IDX, avail_event
/// must be current: elements taken without a kick, such as receives consumed
/// by incoming messages, leave it behind). Returns whether elements arrived
/// meanwhile, which the caller must then take itself. Requests posted to a
/// QP in error (ib_drain_qp's marker receive) are only flushed if they kick.
fn kicks_again(vring: &RdmaVring) -> bool {
    vring.enable_notification().unwrap_or(false)
}

/// Returns every outstanding element of QP `qpn` without completions
/// (DESTROY_QP, and the move to RESET).
pub fn discard(ctrl: &Ctrl, qpn: u32) {
    let pending = {
        let mut st = ctrl.lock();
        let stalled = st.take_resend(qpn).map(|w| w.head);
        let moving = st
            .qp_mut(qpn)
            .and_then(|q| q.transfer.take())
            .map(|t| t.head);
        stalled.or(moving)
    };
    let on_wire = wire::flush_connected(ctrl, qpn);
    if let Some(sq) = sq_of(ctrl, qpn) {
        for head in pending
            .into_iter()
            .chain(on_wire.into_iter().map(|(h, _)| h))
        {
            sq.give_back(ctrl, head);
        }
        discard_all(ctrl, &sq);
    }
    transfer::drop_held(ctrl, qpn, None);
    // Nothing of the connection survives a reset.
    if let Some(q) = ctrl.lock().qp_mut(qpn) {
        q.atomic_replies.clear();
        q.bad_keys = 0;
    }
    if let Some(rq) = rq_of(ctrl, qpn) {
        discard_all(ctrl, &rq);
    }
}

/// Returns (a virtqueue) or passes (a ring) every element of `wq`.
fn discard_all(ctrl: &Ctrl, wq: &Wq<'_>) {
    match wq {
        Wq::Vring(v) => return_all(ctrl, v),
        Wq::Ring(r) => r.skip_all(&ctrl.mem().memory()),
    }
}

/// Executes the next SQ element of QP `qpn` if it is in RTS and not
/// stalled; whether it did (and the SQ may hold more).
fn sq_step(fabric: &Fabric, ctrl: &Ctrl, qpn: u32, sq: &Wq<'_>) -> bool {
    let mut bytes = Element::new();
    loop {
        let snapshot = {
            let st = ctrl.lock();
            st.qp(qpn).zip(sender_in(&st, qpn)).map(|(q, s)| {
                let user = q.rings.as_ref().is_some_and(|r| r.user).then(|| q.is_ud());
                (
                    q.state(),
                    // On RNR or unanswered, or (on the wire) with the
                    // requester's buffer full: completions run it again.
                    q.resend.is_some() || wire::holds_enough(q),
                    q.transfer.is_some(),
                    q.caps,
                    user,
                    s,
                )
            })
        };
        let Some((state, stalled, moving, caps, user, s)) = snapshot else {
            // No QP: elements wait until one is created (the driver posts
            // only to QPs it created; a hostile one just fills its ring).
            return false;
        };
        match state {
            IB_QPS_ERR => {
                flush(fabric, ctrl, qpn);
                return false;
            }
            IB_QPS_RTS if !stalled => {}
            _ => return false,
        }
        if moving {
            return transfer::step(fabric, ctrl, qpn);
        }
        sq.quiet();
        let max = SQ_HDR_LEN + SGE_LEN * caps.max_send_sge as usize + caps.max_inline_data as usize;
        let Some(head) = sq.pop(ctrl, max + 1, &mut bytes) else {
            if sq.kicks_again(ctrl) {
                continue;
            }
            return false;
        };
        let parsed = wqe::parse_send(&bytes, caps.max_send_sge, caps.max_inline_data).and_then(
            |w| match user {
                // Only what a process may post, from a process's ring.
                Some(ud) => match wqe::check_user(&w, ud).and_then(|()| local_inv_user(ctrl, &w)) {
                    Ok(()) => Ok(w),
                    Err(why) => Err(wqe::Malformed {
                        wr_id: w.wr_id,
                        why,
                    }),
                },
                None => Ok(w),
            },
        );
        let wqe = match parsed {
            Ok(w) => w,
            Err(m) => {
                ctrl.guest_warn(format_args!("QP {qpn}: bad SQ element: {}", m.why));
                sq.give_back(ctrl, head);
                let c = cqe(
                    m.wr_id,
                    IB_WC_LOC_QP_OP_ERR,
                    wqe::wc_opcode(bytes.get(8).copied().unwrap_or(0)),
                    qpn,
                );
                complete(fabric, ctrl, qpn, s.send_cqn, &c, false);
                to_error(fabric, ctrl, qpn);
                return false;
            }
        };
        let local = matches!(wqe.opcode, IB_WR_REG_MR | IB_WR_LOCAL_INV | IB_WR_BIND_MW);
        if !local && wire::on_wire(fabric, ctrl, &s) {
            // A peer on the network: the transport's requester carries it.
            if !wire::post_connected(fabric, ctrl, qpn, &s, head, wqe) {
                return false;
            }
            continue;
        }
        match execute(fabric, ctrl, qpn, &s, &wqe) {
            Exec::Done(status, len) => {
                finish(fabric, ctrl, qpn, &s, head, &wqe, status, len);
                return status == IB_WC_SUCCESS;
            }
            Exec::Rnr(delay) => {
                resend_later(fabric, ctrl, qpn, &s, head, wqe, Again::Rnr(delay), None);
                return false;
            }
            Exec::Unanswered => {
                resend_later(fabric, ctrl, qpn, &s, head, wqe, Again::Unanswered, None);
                return false;
            }
            Exec::Partial(started) => {
                if let Some(q) = ctrl.lock().qp_mut(qpn) {
                    q.transfer = Some(transfer::begin(head, wqe, started));
                }
                return true;
            }
        }
    }
}

/// Returns an executed element of sender `s` (QP `qpn`) to the driver and
/// completes it.
#[allow(clippy::too_many_arguments)]
fn finish(
    fabric: &Fabric,
    ctrl: &Ctrl,
    qpn: u32,
    s: &Sender,
    head: u16,
    w: &SendWqe,
    status: u8,
    len: u32,
) {
    if let Some(sq) = ctrl.sq_vring(qpn) {
        give_back(ctrl, sq, head);
    }
    if status != IB_WC_SUCCESS || w.signaled(s.sig_all) {
        let mut c = cqe(w.wr_id, status, wqe::wc_opcode(w.opcode), qpn);
        c.byte_len = U32::new(len);
        complete(fabric, ctrl, qpn, s.send_cqn, &c, false);
    }
    if status != IB_WC_SUCCESS {
        debug!(
            "{}: QP {qpn}: wr_id {} failed with status {status}",
            ctrl.name(),
            w.wr_id
        );
        to_error(fabric, ctrl, qpn);
    }
}

/// Snapshot of the sending QP: what a step needs of it, read under one
/// lock (nothing in it changes while the step holds the fabric: only
/// control commands change it, and they hold the whole fabric).
struct Sender {
    pdn: u32,
    qp_type: u8,
    qkey: u32,
    dgid: [u8; 16],
    dest_qpn: u32,
    /// PSN of its next request (RC/UC).
    psn: u32,
    path_mtu: u8,
    /// Its source GID (at its path's GID index), if the index holds one.
    sgid: Option<[u8; 16]>,
    send_cqn: u32,
    sig_all: bool,
    /// Its counter set, if it is bound to one.
    counters: Option<Arc<CounterSet>>,
}

impl Sender {
    /// Where what the QP sends counts, on its device `ctrl`.
    fn tally<'a>(&'a self, ctrl: &'a Ctrl) -> Tally<'a> {
        ctrl.stats().of(self.counters.as_deref())
    }

    /// UC: no acknowledgement ever tells the requester what became of a
    /// message at the responder.
    fn unreliable(&self) -> bool {
        self.qp_type == IB_QPT_UC
    }
}

/// A UC message the responder did not take. Without acknowledgements the
/// requester cannot tell: its work request succeeds (with the `len` bytes
/// it sent) and the message is lost.
fn lost(ctrl: &Ctrl, qpn: u32, w: &SendWqe, len: usize, why: fmt::Arguments<'_>) -> Exec {
    debug!(
        "{}: QP {qpn}: UC wr_id {} dropped: {why}",
        ctrl.name(),
        w.wr_id
    );
    Exec::Done(IB_WC_SUCCESS, len as u32)
}

/// A snapshot of QP `qpn` as a sender.
fn sender(ctrl: &Ctrl, qpn: u32) -> Option<Sender> {
    sender_in(&ctrl.lock(), qpn)
}

/// [`sender`], in tables the caller holds.
fn sender_in(st: &State, qpn: u32) -> Option<Sender> {
    st.qp(qpn).map(|q| Sender {
        pdn: q.pdn,
        qp_type: q.qp_type,
        qkey: q.attr.qkey.get(),
        dgid: q.attr.ah_attr.dgid,
        dest_qpn: q.attr.dest_qp_num.get(),
        psn: q.attr.sq_psn.get(),
        path_mtu: q.attr.path_mtu,
        sgid: st
            .gids
            .get(usize::from(q.attr.ah_attr.sgid_index))
            .map(|e| e.gid),
        send_cqn: q.send_cqn,
        sig_all: q.sq_sig_all,
        // An Arc clone only for a bound QP.
        counters: q.counters.clone(),
    })
}

/// A device's MR gate as a step holds it ([`gates`]).
enum Gate<'a> {
    Shared {
        _held: parking_lot::RwLockReadGuard<'a, ()>,
    },
    Sole {
        _held: parking_lot::RwLockWriteGuard<'a, ()>,
    },
}

/// The MR gates of `own` and `peer` (`Ctrl::mr_gate`) for a step that
/// copies between them: shared, `peer`'s exclusively if `sole_peer` (the
/// step changes the peer's MRs: SEND with Invalidate). Taken in one
/// global order (address), only by a step holding its lanes, and never
/// while one is held: steps cannot deadlock on them.
fn gates<'a>(own: &'a Ctrl, peer: &'a Ctrl, sole_peer: bool) -> SmallVec<[Gate<'a>; 2]> {
    let take = |c: &'a Ctrl, sole: bool| match sole {
        true => Gate::Sole {
            _held: c.mr_gate().write(),
        },
        false => Gate::Shared {
            _held: c.mr_gate().read(),
        },
    };
    if std::ptr::eq(own, peer) {
        return smallvec::smallvec![take(own, sole_peer)];
    }
    let mut order = [(own, false), (peer, sole_peer)];
    order.sort_by_key(|(c, _)| *c as *const Ctrl as usize);
    order.into_iter().map(|(c, sole)| take(c, sole)).collect()
}

fn execute(fabric: &Fabric, ctrl: &Ctrl, qpn: u32, s: &Sender, w: &SendWqe) -> Exec {
    // Work requests that change the device's MRs: no step of another lane
    // copies through them meanwhile.
    match w.opcode {
        IB_WR_REG_MR | IB_WR_LOCAL_INV | IB_WR_BIND_MW => {
            let _gate = ctrl.mr_gate().write();
            let status = match w.opcode {
                IB_WR_REG_MR => reg_mr(ctrl, s.pdn, w),
                IB_WR_LOCAL_INV => local_inv(ctrl, s.pdn, w.ex),
                _ => bind_mw(ctrl, qpn, s.pdn, w),
            };
            return Exec::Done(status, 0);
        }
        _ => {}
    }
    if matches!(s.qp_type, IB_QPT_UD | IB_QPT_GSI) {
        if !matches!(w.opcode, IB_WR_SEND | IB_WR_SEND_WITH_IMM) {
            return Exec::Done(IB_WC_LOC_QP_OP_ERR, 0);
        }
        return ud_send(fabric, ctrl, qpn, s, w);
    }
    // IB defines no UC packets for RDMA READ, atomics or SEND with
    // Invalidate.
    let uc_op = matches!(
        w.opcode,
        IB_WR_SEND | IB_WR_SEND_WITH_IMM | IB_WR_RDMA_WRITE | IB_WR_RDMA_WRITE_WITH_IMM
    );
    if s.unreliable() && !uc_op {
        ctrl.guest_warn(format_args!(
            "QP {qpn}: wr_id {}: opcode {} is not a UC operation",
            w.wr_id, w.opcode
        ));
        return Exec::Done(IB_WC_LOC_QP_OP_ERR, 0);
    }
    let Some(op) = request_op(w.opcode) else {
        return Exec::Done(IB_WC_LOC_QP_OP_ERR, 0);
    };
    // RC, UC and XRC: a message to the connected peer, which takes it only
    // from this very QP and at the PSN it expects.
    let bytes = w.payload_len();
    let n = qp::packets(w.opcode, bytes, s.path_mtu);
    let lguard = ctrl.mem().memory();
    let faults = ctrl.link_faults();
    let accepted = request(qpn, s, w, op).and_then(|mut m| {
        if faults.is_some() && !s.unreliable() {
            m.whole_up_to = qp::mtu_bytes(s.path_mtu);
        }
        // A message that moves in chunks meets the link's faults packet by
        // packet there (`transfer.rs`), not here as well.
        let chunked = m.len > m.whole_up_to
            && matches!(
                m.op,
                Op::SendOnly
                    | Op::SendOnlyImm
                    | Op::SendOnlyInv
                    | Op::WriteOnly
                    | Op::WriteOnlyImm
                    | Op::ReadRequest
            );
        if !chunked && faults.is_some_and(|f| f.drops_request()) {
            return Err("the link lost it".to_string());
        }
        responder::accept(fabric, &m, true)
            .map(|peer| (m, peer))
            .map_err(|why| why.to_string())
    });
    let (mut m, mut peer) = match accepted {
        Ok(x) => x,
        Err(why) => {
            // Sent, and nobody took it.
            s.tally(ctrl).sent(n, bytes);
            if s.unreliable() {
                // The requester still reads its payload before anything
                // leaves it; then the message is lost.
                advance_psn(ctrl, qpn, s, n);
                return match gather(ctrl, &lguard, s.pdn, w) {
                    Ok(p) => lost(ctrl, qpn, w, p.len(), format_args!("{why}")),
                    Err(status) => Exec::Done(status, 0),
                };
            }
            debug!(
                "{}: QP {qpn}: wr_id {} PSN {}: {why}",
                ctrl.name(),
                w.wr_id,
                s.psn
            );
            // Nobody answers: the transport timer sends it again.
            return Exec::Unanswered;
        }
    };
    // From the checks of the MRs on both sides to the end of the copy.
    let pdev = Arc::clone(&peer.dev);
    let _gates = gates(ctrl, pdev.ctrl(), m.ieth.is_some());
    // The requester's side first: what it sends, or where a READ's data
    // and an atomic's original value go.
    let into = match local_side(ctrl, &lguard, s, w) {
        Ok(Local::Sends(p)) => {
            m.payload = p;
            None
        }
        Ok(Local::Receives(dst)) => Some(dst),
        Ok(Local::Nothing) => None,
        Err(status) => return Exec::Done(status, byte_len(w)),
    };
    s.tally(ctrl).sent(n, bytes);
    let pguard = pdev.ctrl().mem().memory();
    let answer = responder::respond(fabric, &mut peer, &pguard, &m);
    if faults.is_some_and(|f| f.duplicates()) {
        // The same request again: the responder finds it a duplicate (an
        // RC one answers it without executing it twice, a UC one drops
        // it); the requester takes the first answer.
        if let Ok(mut again) = responder::accept(fabric, &m, true) {
            let _ = responder::respond(fabric, &mut again, &pguard, &m);
        }
    }
    if s.unreliable() {
        advance_psn(ctrl, qpn, s, n);
    } else if !matches!(answer, Response::Moving(_)) && faults.is_some_and(|f| f.drops_answer()) {
        debug!(
            "{}: QP {qpn}: wr_id {} PSN {}: the link lost its answer",
            ctrl.name(),
            w.wr_id,
            s.psn
        );
        return Exec::Unanswered;
    }
    let done = match answer {
        Response::Ack => Exec::Done(IB_WC_SUCCESS, m.payload.len() as u32),
        Response::Nak(nak) => Exec::Done(nak.status(), byte_len(w)),
        Response::Rnr(delay) => {
            // Sent again later with the same PSNs.
            s.tally(ctrl).inc(Counter::RnrNaksRcvd);
            return Exec::Rnr(delay);
        }
        Response::Read(src) => {
            if let Some(dst) = &into {
                copy(&src, dst);
            }
            Exec::Done(IB_WC_SUCCESS, byte_len(w))
        }
        Response::Atomic(orig) => {
            if let Some(dst) = &into {
                write_bytes(&orig.to_le_bytes(), dst);
            }
            Exec::Done(IB_WC_SUCCESS, 8)
        }
        Response::Moving(started) => Exec::Partial(started),
        Response::Dropped(why) if s.unreliable() => {
            return lost(ctrl, qpn, w, m.payload.len(), format_args!("{why}"));
        }
        Response::Dropped(_) => return Exec::Unanswered,
    };
    // Answered: the requester moves past its packets.
    if !s.unreliable() {
        advance_psn(ctrl, qpn, s, n);
    }
    done
}

/// Moves QP `qpn`'s next PSN past the `n` packets of the message sent
/// with `s.psn`.
fn advance_psn(ctrl: &Ctrl, qpn: u32, s: &Sender, n: u32) {
    if let Some(q) = ctrl.lock().qp_mut(qpn) {
        q.attr.sq_psn = U32::new(transport::psn_add(s.psn, n));
    }
}

/// The byte count of a READ's or an atomic's completion, whatever its
/// status (IB reports what its SGEs asked for, and 8); for others, that of
/// a failed one.
fn byte_len(w: &SendWqe) -> u32 {
    match w.opcode {
        IB_WR_RDMA_READ => u32::try_from(w.payload_len()).unwrap_or(u32::MAX),
        IB_WR_ATOMIC_CMP_AND_SWP | IB_WR_ATOMIC_FETCH_AND_ADD => 8,
        _ => 0,
    }
}

/// The operation of an RC/UC/XRC request of work request opcode `opcode`,
/// as its only packet names it; `None` for an opcode that is no request.
fn request_op(opcode: u8) -> Option<Op> {
    Some(match opcode {
        IB_WR_SEND => Op::SendOnly,
        IB_WR_SEND_WITH_IMM => Op::SendOnlyImm,
        IB_WR_SEND_WITH_INV => Op::SendOnlyInv,
        IB_WR_RDMA_WRITE => Op::WriteOnly,
        IB_WR_RDMA_WRITE_WITH_IMM => Op::WriteOnlyImm,
        IB_WR_RDMA_READ => Op::ReadRequest,
        IB_WR_ATOMIC_CMP_AND_SWP => Op::CompareSwap,
        IB_WR_ATOMIC_FETCH_AND_ADD => Op::FetchAdd,
        IB_WR_ATOMIC_WRITE => Op::AtomicWrite,
        IB_WR_FLUSH => Op::Flush,
        _ => return None,
    })
}

/// The message `op` of RC/UC/XRC work request `w` of QP `qpn` (sender
/// `s`), without its payload; why there is none.
fn request<'m>(qpn: u32, s: &Sender, w: &SendWqe, op: Op) -> Result<Request<'m>, String> {
    let src_gid = s.sgid.ok_or("the source GID index holds no GID")?;
    let len = w.payload_len();
    let (remote, compare_add, swap, flush) = match op {
        Op::WriteOnly | Op::WriteOnlyImm | Op::ReadRequest => {
            let r = w.rdma();
            let remote = Remote {
                va: r.remote_addr.get(),
                rkey: r.rkey.get(),
                len: len.min(GATHER_LIMIT),
            };
            (remote, 0, 0, (0, 0))
        }
        Op::CompareSwap | Op::FetchAdd | Op::AtomicWrite => {
            let a = w.atomic();
            let remote = Remote {
                va: a.remote_addr.get(),
                rkey: a.rkey.get(),
                len: 8,
            };
            (remote, a.compare_add.get(), a.swap.get(), (0, 0))
        }
        Op::Flush => {
            let f = w.flush();
            let remote = Remote {
                va: f.remote_addr.get(),
                rkey: f.rkey.get(),
                len: f.length.get(),
            };
            (remote, 0, 0, (f.flush_type, f.flush_level))
        }
        _ => (Remote::default(), 0, 0, (0, 0)),
    };
    Ok(Request {
        src_gid,
        src_qp: qpn,
        qp_type: s.qp_type,
        dest_gid: s.dgid,
        dest_qp: s.dest_qpn,
        op,
        psn: s.psn,
        npsn: qp::packets(w.opcode, len, s.path_mtu),
        len,
        se: w.send_flags & IB_SEND_SOLICITED != 0,
        remote,
        imm: matches!(op, Op::SendOnlyImm | Op::WriteOnlyImm).then_some(w.ex),
        ieth: (op == Op::SendOnlyInv).then_some(w.ex),
        compare_add,
        swap,
        flush,
        xrc_srqn: (s.qp_type == IB_QPT_XRC_INI).then(|| w.xrc().remote_srqn.get()),
        qkey: None,
        frame: Frame::default(),
        payload: Payload::Inline(&[]),
        whole_up_to: CHUNK,
    })
}

/// The requester's own memory a request uses.
enum Local<'m> {
    /// A SEND's or WRITE's payload.
    Sends(Payload<'m>),
    /// Where a READ's data or an atomic's original value goes.
    Receives(Slices<'m>),
    /// None (ATOMIC WRITE carries its data, FLUSH has none).
    Nothing,
}

/// Resolves the local side of RC/UC request `w` in `mem`; `Err(status)`
/// if the requester's own checks fail (nothing is sent).
fn local_side<'m>(
    ctrl: &Ctrl,
    mem: &'m GuestMemoryMmap,
    s: &Sender,
    w: &'m SendWqe,
) -> Result<Local<'m>, u8> {
    match w.opcode {
        IB_WR_RDMA_READ => {
            if w.send_flags & IB_SEND_INLINE != 0 {
                return Err(IB_WC_LOC_QP_OP_ERR);
            }
            let dst = resolve(
                &ctrl.lock(),
                s.pdn,
                &w.sges,
                IB_ACCESS_LOCAL_WRITE,
                GATHER_LIMIT,
            )
            .ok()
            .and_then(|ranges| slices(mem, &ranges))
            .ok_or(IB_WC_LOC_PROT_ERR)?;
            if total(&dst) as u64 > u64::from(limits::MAX_MSG_SZ) {
                return Err(IB_WC_LOC_LEN_ERR);
            }
            Ok(Local::Receives(dst))
        }
        IB_WR_ATOMIC_CMP_AND_SWP | IB_WR_ATOMIC_FETCH_AND_ADD => {
            let [sge] = w.sges.as_slice() else {
                return Err(IB_WC_LOC_QP_OP_ERR);
            };
            if sge.length < 8 {
                return Err(IB_WC_LOC_LEN_ERR);
            }
            let one = Sge { length: 8, ..*sge };
            let dst = resolve(&ctrl.lock(), s.pdn, &[one], IB_ACCESS_LOCAL_WRITE, 8)
                .ok()
                .and_then(|ranges| slices(mem, &ranges))
                .ok_or(IB_WC_LOC_PROT_ERR)?;
            Ok(Local::Receives(dst))
        }
        // The 8 bytes it writes are in the request, nowhere else.
        IB_WR_ATOMIC_WRITE if !w.sges.is_empty() || !w.inline.is_empty() => {
            Err(IB_WC_LOC_QP_OP_ERR)
        }
        IB_WR_ATOMIC_WRITE | IB_WR_FLUSH => Ok(Local::Nothing),
        _ => gather(ctrl, mem, s.pdn, w).map(Local::Sends),
    }
}

/// For the tests of the fuzz targets' harness: one step of QP `qpn`'s SQ
/// (an element, or a chunk of a large message); whether there may be more.
#[cfg(all(feature = "fuzzing", test))]
pub(crate) fn fuzz_step(ctrl: &Ctrl, qpn: u32) -> bool {
    let Some(sq) = sq_of(ctrl, qpn) else {
        return false;
    };
    let fabric = fabric::for_qp(ctrl, qpn);
    sq_step(&fabric, ctrl, qpn, &sq)
}

/// For the fuzz targets: resolves `sges` as the data path does and maps
/// the ranges, without copying.
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz_resolve(ctrl: &Ctrl, pdn: u32, sges: &[Sge], access: u32) -> bool {
    let Ok(ranges) = resolve(&ctrl.lock(), pdn, sges, access, GATHER_LIMIT) else {
        return false;
    };
    let guard = ctrl.mem().memory();
    let mapped = slices(&guard, &ranges).is_some();
    mapped
}

/// For the fuzz targets: resolves an SQ element's SGEs and executes it if
/// it is a local operation (REG_MR, LOCAL_INV, BIND_MW).
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz_local(ctrl: &Ctrl, pdn: u32, w: &SendWqe) -> u8 {
    if w.send_flags & IB_SEND_INLINE == 0 {
        fuzz_resolve(ctrl, pdn, &w.sges, 0);
    }
    match w.opcode {
        IB_WR_REG_MR => reg_mr(ctrl, pdn, w),
        IB_WR_LOCAL_INV => local_inv(ctrl, pdn, w.ex),
        IB_WR_BIND_MW => bind_mw(ctrl, 0, pdn, w),
        _ => IB_WC_SUCCESS,
    }
}

/// Bytes a gather list may resolve to: one past the largest message, so
/// that a longer one is seen (and refused) without translating all of it.
const GATHER_LIMIT: u64 = limits::MAX_MSG_SZ as u64 + 1;

/// Guest-physical ranges of the first `limit` bytes of `sges` in MRs of
/// `pdn` granting `access`. SGEs past `limit` are not looked at (as rxe
/// walks an SGE list only as far as the data goes): what one element costs
/// is bounded by the data it moves, not by the lengths the guest claims
/// (32 SGEs of 4 GiB on the DMA MR would be 32 Mi page ranges).
fn resolve(st: &State, pdn: u32, sges: &[Sge], access: u32, limit: u64) -> Result<Ranges, ()> {
    let mut out = Ranges::new();
    let mut left = limit;
    for s in sges.iter().filter(|s| s.length > 0) {
        if left == 0 {
            break;
        }
        let mr = st.mrs.by_key(s.lkey).ok_or(())?;
        if mr.pdn != pdn || mr.access & access != access {
            return Err(());
        }
        let len = u64::from(s.length).min(left);
        mr.translate_into(s.addr, len, &mut out).map_err(|_| ())?;
        left -= len;
    }
    Ok(out)
}

/// Slices of guest memory for `ranges`, one per range unless a range
/// crosses from one memory region into the next; `None` if a byte is not
/// mapped.
fn slices<'m>(mem: &'m GuestMemoryMmap, ranges: &[(u64, usize)]) -> Option<Slices<'m>> {
    let mut out = Slices::new();
    for &(a, n) in ranges {
        for s in mem.get_slices(GuestAddress(a), n) {
            out.push(s.ok()?);
        }
    }
    Some(out)
}

fn total(s: &Slices<'_>) -> usize {
    s.iter().map(|v| v.len()).sum()
}

/// Copies `min(total(src), total(dst))` bytes, guest to guest.
fn copy(src: &Slices<'_>, dst: &Slices<'_>) {
    let (mut i, mut io, mut j, mut jo) = (0, 0, 0, 0);
    while i < src.len() && j < dst.len() {
        let n = (src[i].len() - io).min(dst[j].len() - jo);
        if let (Ok(a), Ok(b)) = (src[i].subslice(io, n), dst[j].subslice(jo, n)) {
            a.copy_to_volatile_slice(b);
        }
        io += n;
        jo += n;
        if io == src[i].len() {
            i += 1;
            io = 0;
        }
        if jo == dst[j].len() {
            j += 1;
            jo = 0;
        }
    }
}

/// Writes `bytes` at the start of `dst`.
fn write_bytes(bytes: &[u8], dst: &Slices<'_>) {
    let mut off = 0;
    for d in dst {
        if off >= bytes.len() {
            break;
        }
        let n = d.len().min(bytes.len() - off);
        if let Ok(sub) = d.subslice(0, n) {
            sub.copy_from(&bytes[off..off + n]);
        }
        off += n;
    }
}

/// Skips the first `n` bytes of `s`.
fn skip<'m>(s: &Slices<'m>, mut n: usize) -> Slices<'m> {
    let mut out = Slices::new();
    for v in s {
        if n >= v.len() {
            n -= v.len();
            continue;
        }
        if let Ok(sub) = v.subslice(n, v.len() - n) {
            out.push(sub);
        }
        n = 0;
    }
    out
}

/// Gathers the sender's payload; `Err(status)` on a bad local SGE.
fn gather<'m>(
    ctrl: &Ctrl,
    mem: &'m GuestMemoryMmap,
    pdn: u32,
    w: &'m SendWqe,
) -> Result<Payload<'m>, u8> {
    if w.send_flags & IB_SEND_INLINE != 0 {
        return Ok(Payload::Inline(&w.inline));
    }
    let ranges =
        resolve(&ctrl.lock(), pdn, &w.sges, 0, GATHER_LIMIT).map_err(|()| IB_WC_LOC_PROT_ERR)?;
    let src = slices(mem, &ranges).ok_or(IB_WC_LOC_PROT_ERR)?;
    if total(&src) as u64 > u64::from(limits::MAX_MSG_SZ) {
        return Err(IB_WC_LOC_LEN_ERR);
    }
    Ok(Payload::Guest(src))
}

/// Invalidates the fast-reg MR or frees the bound type 2 window of `pdn`
/// whose key is `rkey` (a type 1 window is not invalidated, o10-37.2.26).
fn invalidate(ctrl: &Ctrl, pdn: u32, rkey: u32) -> bool {
    let mut st = ctrl.lock();
    if let Some(w) = st.mrs.mw_mut(rkey >> 8) {
        let ok = w.pdn == pdn
            && w.key == (rkey & 0xff) as u8
            && w.mw_type == IB_MW_TYPE_2
            && w.bound.is_some();
        if ok {
            w.bound = None;
        }
        return ok;
    }
    match st.mrs.get_mut(rkey >> 8) {
        Some(mr)
            if mr.pdn == pdn
                && mr.key == (rkey & 0xff) as u8
                && matches!(mr.kind, MrKind::FastReg { .. }) =>
        {
            mr.valid = false;
            true
        }
        _ => false,
    }
}

fn local_inv(ctrl: &Ctrl, pdn: u32, rkey: u32) -> u8 {
    if invalidate(ctrl, pdn, rkey) {
        IB_WC_SUCCESS
    } else {
        ctrl.guest_warn(format_args!("LOCAL_INV of key {rkey:#x} refused"));
        IB_WC_LOC_QP_OP_ERR
    }
}

/// A process invalidates windows only: fast-registration MRs are the
/// kernel's (a PD does not say whose they are).
fn local_inv_user(ctrl: &Ctrl, w: &SendWqe) -> Result<(), String> {
    if w.opcode != IB_WR_LOCAL_INV || ctrl.lock().mrs.mw(w.ex >> 8).is_some() {
        return Ok(());
    }
    Err(format!(
        "LOCAL_INV of key {:#x}: a process invalidates only windows",
        w.ex
    ))
}

/// Binds (or unbinds) a memory window for QP `qpn` of PD `pdn`.
fn bind_mw(ctrl: &Ctrl, qpn: u32, pdn: u32, w: &SendWqe) -> u8 {
    let req = w.bind();
    let mut st = ctrl.lock();
    let mwn = req.mw_rkey >> 8;
    let checked = match st.mrs.mw(mwn) {
        Some(mw) if mw.key == (req.mw_rkey & 0xff) as u8 => {
            let mrn = req.mr_lkey >> 8;
            let mr = st.mrs.by_key(req.mr_lkey).map(|mr| (mrn, mr));
            mw.check_bind(qpn, pdn, &req, mr)
        }
        _ => Err("no window has that rkey"),
    };
    match checked {
        Ok(binding) => {
            if let Some(mw) = st.mrs.mw_mut(mwn) {
                mw.key = (req.new_rkey & 0xff) as u8;
                mw.bound = binding;
            }
            IB_WC_SUCCESS
        }
        Err(why) => {
            drop(st);
            ctrl.guest_warn(format_args!(
                "QP {qpn}: wr_id {}: BIND_MW of rkey {:#x}: {why}",
                w.wr_id, req.mw_rkey
            ));
            IB_WC_MW_BIND_ERR
        }
    }
}

fn reg_mr(ctrl: &Ctrl, pdn: u32, w: &SendWqe) -> u8 {
    let reg = w.reg();
    let (mrn, key, access) = (reg.mrn.get(), reg.key.get(), reg.access.get());
    let (iova, length, npages) = (reg.iova.get(), reg.length.get(), reg.npages.get());
    let max = {
        let st = ctrl.lock();
        match st.mrs.get(mrn) {
            Some(mr) if mr.pdn == pdn && !mr.valid && key >> 8 == mrn => match mr.kind {
                MrKind::FastReg { max_pages } => max_pages,
                _ => return IB_WC_LOC_QP_OP_ERR,
            },
            _ => return IB_WC_LOC_QP_OP_ERR,
        }
    };
    if !crate::mr::access_ok(access) || length == 0 || length > limits::MAX_MR_SIZE {
        return IB_WC_LOC_QP_OP_ERR;
    }
    let Some(need) = crate::mr::pages_needed(iova, length) else {
        return IB_WC_LOC_QP_OP_ERR;
    };
    let pages = if npages != 0 {
        if npages > max || u64::from(npages) < need {
            return IB_WC_LOC_QP_OP_ERR;
        }
        let guard = ctrl.mem().memory();
        match crate::mr::load_page_table(&guard, reg.pages.get(), npages) {
            Ok(p) => p,
            Err(_) => return IB_WC_LOC_PROT_ERR,
        }
    } else {
        match ctrl.lock().mrs.get(mrn).and_then(|m| m.staged.clone()) {
            Some(m) if m.pages.len() as u64 >= need => m.pages,
            _ => return IB_WC_LOC_QP_OP_ERR,
        }
    };
    let mut st = ctrl.lock();
    let Some(mr) = st.mrs.get_mut(mrn) else {
        return IB_WC_LOC_QP_OP_ERR;
    };
    mr.key = (key & 0xff) as u8;
    mr.access = access;
    mr.map = crate::mr::PageMap {
        iova,
        length,
        pages,
    };
    mr.valid = true;
    IB_WC_SUCCESS
}

/// A UD or GSI SEND: a datagram to the QP its address vector and DETH
/// name. Unreliable: what nobody takes is dropped and the send succeeds.
fn ud_send(fabric: &Fabric, ctrl: &Ctrl, qpn: u32, s: &Sender, w: &SendWqe) -> Exec {
    let ud = w.ud();
    let av = ud.av;
    let Some(sgid) = ctrl
        .lock()
        .gids
        .get(usize::from(av.sgid_index))
        .map(|e| e.gid)
    else {
        return Exec::Done(IB_WC_LOC_QP_OP_ERR, 0);
    };
    let lguard = ctrl.mem().memory();
    let payload = match gather(ctrl, &lguard, s.pdn, w) {
        Ok(p) => p,
        Err(status) => return Exec::Done(status, 0),
    };
    let len = payload.len();
    // A UD message is one packet: at most the port's IB MTU.
    if len as u64 > crate::qp::mtu_bytes(ctrl.limits().ib_mtu()) {
        return Exec::Done(IB_WC_LOC_LEN_ERR, 0);
    }
    let done = Exec::Done(IB_WC_SUCCESS, len as u32);
    s.tally(ctrl).sent(1, len as u64);
    // A Q_Key with the top bit set means the sender's own.
    let qkey = if ud.remote_qkey.get() & QKEY_PRIVILEGED != 0 {
        s.qkey
    } else {
        ud.remote_qkey.get()
    };
    let m = Request {
        src_gid: sgid,
        src_qp: qpn,
        qp_type: s.qp_type,
        dest_gid: av.dgid,
        dest_qp: ud.remote_qpn.get(),
        op: if w.opcode == IB_WR_SEND_WITH_IMM {
            Op::SendOnlyImm
        } else {
            Op::SendOnly
        },
        psn: s.psn,
        npsn: 1,
        len: len as u64,
        se: w.send_flags & IB_SEND_SOLICITED != 0,
        remote: Remote::default(),
        imm: (w.opcode == IB_WR_SEND_WITH_IMM).then_some(w.ex),
        ieth: None,
        compare_add: 0,
        swap: 0,
        flush: (0, 0),
        xrc_srqn: None,
        qkey: Some(qkey),
        frame: Frame {
            traffic_class: av.traffic_class,
            flow_label: av.flow_label.get(),
            hop_limit: av.hop_limit,
            sl: av.sl,
            smac: ctrl.limits().mac().0,
        },
        payload,
        whole_up_to: CHUNK,
    };
    // The link: the device holding the destination GID, if any, else the
    // network if the port is on one.
    let Some(dev) = fabric::by_gid(fabric, &av.dgid) else {
        match ctrl.device().as_ref().and_then(|d| d.uplink()) {
            Some(up) => wire::send_datagram(ctrl, up, &m),
            None => debug!("{}: QP {qpn}: UD send to unknown GID dropped", ctrl.name()),
        }
        return done;
    };
    let pguard = dev.ctrl().mem().memory();
    responder::datagram(fabric, dev, &pguard, &m);
    done
}
