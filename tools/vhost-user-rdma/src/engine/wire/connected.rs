// SPDX-License-Identifier: GPL-2.0
//! Connected QPs on the wire: an RC or UC QP whose destination GID no
//! device of this process holds, on a device with an uplink, runs IB's
//! transport on packets (`transport/`: RC's requester and responder, UC's
//! sender and receiver), whose packets go out as RoCEv2 frames and come in
//! from the uplink's reader.
//!
//! UC: an SQ element's packets go out at once and it completes (UC has no
//! acknowledgement); packets from the peer fill receives and MRs in order,
//! and a message with a gap, no receive or a refused key is dropped, the
//! QP staying where it is.
//!
//! The requester: an SQ element becomes a [`Request`] (its payload
//! gathered from the sender's MRs at once, as a NIC reads it when it
//! sends), kept in the QP's [`WireConn`] with its element until the
//! requester completes it; completions come in order, a READ's data and
//! an atomic's original value land in the element's SGEs then. Elements
//! follow each other without waiting: the requester's window paces them.
//!
//! The responder: a request packet from the QP's peer (its source IP is
//! the QP's destination GID; an RC packet names no source QP) reaches the
//! QP's memory through [`WireTarget`], under the same checks as a request
//! from a QP of this process: a SEND fills the next receive (held in the
//! QP between a message's packets, as a chunked message's is), a WRITE,
//! READ or atomic needs an rkey of the QP's PD with the rights, and the
//! QP's own access flags.
//!
//! Timers run on the uplink's reader thread ([`tick`]): the earliest
//! deadline of the device's wire QPs is armed on the uplink, whose reader
//! wakes for it.
//!
//! Every RC opcode goes: SEND (with immediate data or Invalidate), RDMA
//! WRITE (with immediate data), READ, both atomics, and IBA 1.5's ATOMIC
//! WRITE and FLUSH. XRC does not go on the wire yet.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use log::debug;
use vm_memory::GuestAddressSpace;
use zerocopy::little_endian::U32;

use super::super::message::Nak;
use super::super::responder::{
    complete_recv, flush_granted, recv_error, rmw, take_recv, Peer, Recv, Take,
};
use super::super::transfer::{span, take_held};
use super::super::*;
use super::{dest_mac, hop_limit, imm_from_wire, imm_to_wire, ip_of, send_packet};
use crate::net::uplink::Uplink;
use crate::packet::{Packet, Transport};
use crate::qp::{HeldRecv, WireConn};
use crate::roce::{self, Endpoints};
use crate::transport::requester::{Completion, Config, Request};
use crate::transport::responder::{Refusal, Responder, SendPart, Target};
use crate::transport::Status;
use crate::transport::{uc, AtomicOp};

/// The longest RDMA READ a peer on the wire may ask for at once: its
/// responses are read into one buffer (the transport's responder answers
/// a READ whole), so a peer must not make the backend allocate gigabytes.
/// perftest and the ULPs read far less per request.
const MAX_WIRE_READ: u32 = 16 << 20;

/// Names the receive a message from the wire holds in its QP (a chunked
/// transfer's tokens start at 1).
const WIRE_TOKEN: u64 = 0;

/// The payload a wire QP's requester holds at most before the SQ waits
/// for completions (one message may be larger, up to [`MAX_WIRE_MSG`]): a
/// guest's posts cannot make the backend copy its memory without bound.
const WIRE_BUFFER: u64 = 4 << 20;

/// The largest SEND or WRITE a wire QP carries (its payload is copied
/// out when it is posted); a larger one fails with a local length error.
const MAX_WIRE_MSG: u64 = 64 << 20;

/// Microseconds since the process's first use of the wire: the transport
/// state machines' clock.
pub fn now_us() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_micros() as u64
}

/// Whether QP `q`'s requester holds [`WIRE_BUFFER`] bytes or more (its
/// SQ then waits; false for a QP not on the wire).
pub(in crate::engine) fn holds_enough(q: &crate::qp::Qp) -> bool {
    q.wire.as_ref().is_some_and(|w| w.buffered >= WIRE_BUFFER)
}

/// The uplink of `ctrl`'s device, if it is on one.
fn uplink(ctrl: &Ctrl) -> Option<Arc<Uplink>> {
    ctrl.device().and_then(|d| d.uplink().cloned())
}

/// Whether sender `s` of `ctrl` is an RC or UC QP whose peer is on the
/// network: its device is on an uplink and no device of this process
/// holds its destination GID.
pub(in crate::engine) fn on_wire(fabric: &Fabric, ctrl: &Ctrl, s: &Sender) -> bool {
    matches!(s.qp_type, IB_QPT_RC | IB_QPT_UC)
        && ctrl.device().is_some_and(|d| d.uplink().is_some())
        && fabric::by_gid(fabric, &s.dgid).is_none()
}

/// QP `qpn`'s connection, taken out of it while a step works on it (the
/// step holds the QP's lane: no other step of it runs meanwhile).
fn take(ctrl: &Ctrl, qpn: u32) -> Option<Box<WireConn>> {
    ctrl.lock()
        .qp_mut(qpn)
        .map(|q| q.wire.take().unwrap_or_default())
}

/// Puts connection `c` back into QP `qpn`, counts what its transport saw,
/// and arms the uplink's timer for its requester's next deadline.
fn put(ctrl: &Ctrl, qpn: u32, mut c: Box<WireConn>) {
    let deadline = c.requester.as_ref().and_then(|r| r.next_deadline());
    let asked = c.requester.as_mut().map(|r| r.take_seen());
    let mut answered = c.responder.as_mut().map(|r| r.take_seen());
    if let Some(r) = c.uc_receiver.as_mut() {
        let gaps = r.take_seen().out_of_sequence;
        answered
            .get_or_insert_with(Default::default)
            .out_of_sequence += gaps;
    }
    let counters = ctrl.lock().qp_mut(qpn).and_then(|q| {
        q.wire = Some(c);
        q.counters.clone()
    });
    let (asked, answered) = (asked.unwrap_or_default(), answered.unwrap_or_default());
    if (asked, answered) != Default::default() {
        let tally = ctrl.stats().of(counters.as_deref());
        tally.add(Counter::BadPsn, answered.out_of_sequence.into());
        tally.add(Counter::RnrNaksSent, answered.rnr_naks.into());
        tally.add(Counter::RnrNaksRcvd, asked.rnr_naks.into());
        ctrl.stats().add(Counter::WireResent, asked.resent.into());
        ctrl.stats()
            .add(Counter::WireDuplicates, answered.duplicates.into());
    }
    if let (Some(at), Some(up)) = (deadline, uplink(ctrl)) {
        up.arm(at);
    }
}

/// The frames' headers of QP `qpn`'s packets; `None` (and counted) while
/// the peer's MAC is not known.
fn path(ctrl: &Ctrl, up: &Uplink, qpn: u32) -> Option<Endpoints> {
    let st = ctrl.lock();
    let q = st.qp(qpn)?;
    let av = &q.attr.ah_attr;
    let sgid = st.gids.get(usize::from(av.sgid_index))?.gid;
    let dst_ip = ip_of(&av.dgid);
    let Some(dst_mac) = dest_mac(up, &dst_ip) else {
        ctrl.stats().inc(Counter::WireNoNeighbour);
        return None;
    };
    Some(Endpoints {
        src_mac: ctrl.limits().mac().0,
        dst_mac,
        src_ip: ip_of(&sgid),
        dst_ip,
        src_port: roce::source_port(qpn),
        traffic_class: av.traffic_class,
        hop_limit: hop_limit(av.hop_limit),
        flow_label: av.flow_label.get(),
    })
}

/// Sends QP `qpn`'s packets `out`, counted as the QP's sent packets
/// (requests and answers alike, as rxe counts them).
fn transmit(ctrl: &Ctrl, qpn: u32, out: &mut Vec<Packet>) {
    if out.is_empty() {
        return;
    }
    if let Some(s) = sender(ctrl, qpn) {
        let bytes = out.iter().map(|p| p.payload.len() as u64).sum();
        s.tally(ctrl).sent(out.len() as u32, bytes);
    }
    let Some(up) = uplink(ctrl) else {
        return;
    };
    let Some(ep) = path(ctrl, &up, qpn) else {
        debug!(
            "{}: QP {qpn}: peer's MAC unknown; packets lost",
            ctrl.name()
        );
        out.clear();
        return;
    };
    let mut frame = Vec::new();
    for p in out.drain(..) {
        send_packet(ctrl, &up, &ep, &p, &mut frame);
    }
}

/// The requester's configuration from QP `qpn`'s attributes.
fn config(q: &crate::qp::Qp) -> Config {
    Config {
        dest_qp: q.attr.dest_qp_num.get(),
        mtu: qp::mtu_bytes(q.attr.path_mtu) as u32,
        timeout: q.attr.timeout,
        retry_cnt: q.attr.retry_cnt,
        rnr_retry: q.attr.rnr_retry,
    }
}

/// Posts SQ element (`head`, `w`) of QP `qpn` (sender `s`, on the wire) to
/// its requester; whether the SQ may go on.
pub(in crate::engine) fn post(
    fabric: &Fabric,
    ctrl: &Ctrl,
    qpn: u32,
    s: &Sender,
    head: u16,
    w: SendWqe,
) -> bool {
    let req = {
        let mem = ctrl.mem().memory();
        local_side(ctrl, &mem, s, &w).and_then(|local| request(&w, local))
    };
    let req = match req {
        Ok(r) => r,
        Err(status) => {
            finish(fabric, ctrl, qpn, s, head, &w, status, 0);
            return false;
        }
    };
    if s.qp_type == IB_QPT_UC {
        return post_uc(fabric, ctrl, qpn, s, head, w, req);
    }
    let Some(mut c) = take(ctrl, qpn) else {
        return false;
    };
    if c.requester.is_none() {
        c.requester = ctrl.lock().qp(qpn).map(|q| {
            debug!(
                "{}: QP {qpn}: requester from PSN {:#x}: {:?}",
                ctrl.name(),
                q.attr.sq_psn.get(),
                config(q)
            );
            crate::transport::requester::Requester::new(config(q), q.attr.sq_psn.get())
        });
    }
    let (mut out, mut done) = (Vec::new(), Vec::new());
    let id = c.next_id;
    c.next_id += 1;
    c.buffered += held(&req);
    c.posted.push_back((id, head, w, held(&req)));
    if let Some(r) = c.requester.as_mut() {
        r.post(id, req, now_us(), &mut out, &mut done);
    }
    let ended = settle(&mut c, done);
    put(ctrl, qpn, c);
    transmit(ctrl, qpn, &mut out);
    complete_all(fabric, ctrl, qpn, ended)
}

/// Sends request `req` of SQ element (`head`, `w`) of UC QP `qpn` (sender
/// `s`) and completes the element: UC waits for nothing. Whether the SQ
/// may go on.
fn post_uc(
    fabric: &Fabric,
    ctrl: &Ctrl,
    qpn: u32,
    s: &Sender,
    head: u16,
    w: SendWqe,
    req: Request,
) -> bool {
    let Some(mut c) = take(ctrl, qpn) else {
        return false;
    };
    if c.uc_sender.is_none() {
        c.uc_sender = ctrl.lock().qp(qpn).map(|q| {
            let mtu = qp::mtu_bytes(q.attr.path_mtu) as u32;
            uc::Sender::new(q.attr.dest_qp_num.get(), mtu, q.attr.sq_psn.get())
        });
    }
    let mut out = Vec::new();
    let sent = c.uc_sender.as_mut().is_some_and(|u| u.send(&req, &mut out));
    put(ctrl, qpn, c);
    transmit(ctrl, qpn, &mut out);
    // READ and atomics are not UC's (the driver does not post them).
    let status = if sent {
        IB_WC_SUCCESS
    } else {
        IB_WC_LOC_QP_OP_ERR
    };
    let len = u32::try_from(w.payload_len()).unwrap_or(u32::MAX);
    finish(fabric, ctrl, qpn, s, head, &w, status, len);
    sent
}

/// The transport's request for SQ element `w`, whose local side `local`
/// passed the requester's checks; `Err(status)` if it cannot go.
fn request(w: &SendWqe, local: Local<'_>) -> Result<Request, u8> {
    let payload = || match &local {
        Local::Sends(p) if p.len() as u64 > MAX_WIRE_MSG => Err(IB_WC_LOC_LEN_ERR),
        Local::Sends(p) => Ok(p.to_vec()),
        _ => Ok(Vec::new()),
    };
    let (r, a) = (w.rdma(), w.atomic());
    Ok(match w.opcode {
        IB_WR_SEND | IB_WR_SEND_WITH_IMM | IB_WR_SEND_WITH_INV => Request::Send {
            payload: payload()?,
            imm: (w.opcode == IB_WR_SEND_WITH_IMM).then_some(imm_to_wire(w.ex)),
            inv: (w.opcode == IB_WR_SEND_WITH_INV).then_some(w.ex),
        },
        IB_WR_RDMA_WRITE | IB_WR_RDMA_WRITE_WITH_IMM => Request::Write {
            va: r.remote_addr.get(),
            rkey: r.rkey.get(),
            payload: payload()?,
            imm: (w.opcode == IB_WR_RDMA_WRITE_WITH_IMM).then_some(imm_to_wire(w.ex)),
        },
        IB_WR_RDMA_READ => Request::Read {
            va: r.remote_addr.get(),
            rkey: r.rkey.get(),
            len: byte_len(w),
        },
        IB_WR_ATOMIC_FETCH_AND_ADD | IB_WR_ATOMIC_CMP_AND_SWP => Request::Atomic {
            va: a.remote_addr.get(),
            rkey: a.rkey.get(),
            op: match w.opcode {
                IB_WR_ATOMIC_CMP_AND_SWP => AtomicOp::CompareSwap {
                    compare: a.compare_add.get(),
                    swap: a.swap.get(),
                },
                _ => AtomicOp::FetchAdd {
                    add: a.compare_add.get(),
                },
            },
        },
        // The 8 bytes as they were in the element (see the in-process
        // responder's ATOMIC WRITE).
        IB_WR_ATOMIC_WRITE => Request::AtomicWrite {
            va: a.remote_addr.get(),
            rkey: a.rkey.get(),
            value: a.compare_add.get().to_le_bytes(),
        },
        IB_WR_FLUSH => {
            let f = w.flush();
            // A RETH's length is 32 bits; a whole MR's FLUSH names none.
            let len = match u32::try_from(f.length.get()) {
                Ok(len) => len,
                Err(_) if f.flush_level == IB_FLUSH_MR => 0,
                Err(_) => return Err(IB_WC_LOC_LEN_ERR),
            };
            Request::Flush {
                va: f.remote_addr.get(),
                rkey: f.rkey.get(),
                len,
                feth: (u32::from(f.flush_level & 3) << 4) | u32::from(f.flush_type & 0xf),
            }
        }
        _ => return Err(IB_WC_LOC_QP_OP_ERR),
    })
}

/// The payload bytes request `r` holds.
fn held(r: &Request) -> u64 {
    match r {
        Request::Send { payload, .. } | Request::Write { payload, .. } => payload.len() as u64,
        _ => 0,
    }
}

/// The posted elements `done` completes, taken out of `c`, in order.
fn settle(c: &mut WireConn, done: Vec<Completion>) -> Vec<(u16, SendWqe, Completion)> {
    let mut ended = Vec::with_capacity(done.len());
    for d in done {
        if let Some(at) = c.posted.iter().position(|(id, ..)| *id == d.wr_id) {
            if let Some((_, head, w, bytes)) = c.posted.remove(at) {
                c.buffered = c.buffered.saturating_sub(bytes);
                ended.push((head, w, d));
            }
        }
    }
    ended
}

/// Completes what the requester ended; whether the QP is still fine.
fn complete_all(
    fabric: &Fabric,
    ctrl: &Ctrl,
    qpn: u32,
    ended: Vec<(u16, SendWqe, Completion)>,
) -> bool {
    let Some(s) = sender(ctrl, qpn) else {
        return false;
    };
    let mut ok = true;
    for (head, w, d) in ended {
        let mut status = match d.status {
            Status::Success => IB_WC_SUCCESS,
            Status::RemoteInvalidRequest => IB_WC_REM_INV_REQ_ERR,
            Status::RemoteAccess => IB_WC_REM_ACCESS_ERR,
            Status::RemoteOperation => IB_WC_REM_OP_ERR,
            Status::RetryExceeded => IB_WC_RETRY_EXC_ERR,
            Status::RnrRetryExceeded => IB_WC_RNR_RETRY_EXC_ERR,
            Status::Flushed => IB_WC_WR_FLUSH_ERR,
        };
        // A READ's data, an atomic's original value: into the element's
        // SGEs, which must still be the sender's to write.
        if status == IB_WC_SUCCESS && !d.data.is_empty() {
            let _gate = ctrl.mr_gate().read();
            let mem = ctrl.mem().memory();
            let len = d.data.len() as u64;
            let dst = span(&ctrl.lock(), s.pdn, &w.sges, IB_ACCESS_LOCAL_WRITE, 0, len)
                .ok()
                .and_then(|r| slices(&mem, &r));
            match dst {
                Some(dst) => write_bytes(&d.data, &dst),
                None => status = IB_WC_LOC_PROT_ERR,
            }
        }
        let len = match w.opcode {
            IB_WR_RDMA_READ | IB_WR_ATOMIC_FETCH_AND_ADD | IB_WR_ATOMIC_CMP_AND_SWP => {
                d.data.len() as u32
            }
            _ => u32::try_from(w.payload_len()).unwrap_or(u32::MAX),
        };
        if status != IB_WC_SUCCESS {
            debug!(
                "{}: QP {qpn}: wr_id {} ({:?}) ends with status {status}",
                ctrl.name(),
                w.wr_id,
                d.status
            );
        }
        finish(fabric, ctrl, qpn, &s, head, &w, status, len);
        ok &= status == IB_WC_SUCCESS;
    }
    ok
}

/// Takes RC packet `p` from `ep` on the wire, for QP `p.dest_qp` of `dev`.
pub(super) fn received(dev: &Arc<RdmaDevice>, ep: &Endpoints, p: &Packet) {
    let ctrl = dev.ctrl();
    let qpn = p.dest_qp;
    let fabric = fabric::for_qp(ctrl, qpn);
    let peer_ip = ctrl
        .lock()
        .qp(qpn)
        .filter(|q| q.qp_type == transport_of(p) && q.can_receive())
        .map(|q| (ip_of(&q.attr.ah_attr.dgid), q.counters.clone()));
    let Some((peer_ip, counters)) = peer_ip else {
        ctrl.stats().inc(Counter::WireRxDropped);
        debug!(
            "{}: {:?} PSN {:#x} for QP {qpn} (state {:?}), not a connected QP of its type",
            ctrl.name(),
            p.opcode.op,
            p.psn,
            ctrl.lock().qp(qpn).map(|q| (q.qp_type, q.state()))
        );
        return fabric::unlock_fair(fabric);
    };
    let tally = ctrl.stats().of(counters.as_deref());
    if peer_ip != ep.src_ip {
        tally.inc(Counter::NotPeer);
        return fabric::unlock_fair(fabric);
    }
    tally.rcvd(1, p.payload.len() as u64);
    ctrl.stats().inc(Counter::WireRxPkts);
    if p.opcode.transport == Transport::Uc {
        receive_uc(&fabric, dev, qpn, p);
    } else if p.opcode.op.shape().request {
        respond(&fabric, dev, qpn, p);
    } else {
        answered(&fabric, ctrl, qpn, p);
    }
    fabric::unlock_fair(fabric);
}

/// The QP type packet `p`'s transport is for.
fn transport_of(p: &Packet) -> u8 {
    match p.opcode.transport {
        Transport::Uc => IB_QPT_UC,
        _ => IB_QPT_RC,
    }
}

/// QP `qpn` of `dev` as the target of requests from the wire, counting
/// in its counter set.
fn peer_of(dev: &Arc<RdmaDevice>, qpn: u32) -> Peer {
    let mut peer = Peer::new(dev.clone(), qpn);
    peer.counters = dev.ctrl().lock().qp(qpn).and_then(|q| q.counters.clone());
    peer
}

/// A packet for UC QP `qpn`'s receiver. Nothing answers it, and nothing
/// it meets moves the QP to error but too many refused keys
/// ([`responder::MAX_BAD_KEYS`]).
fn receive_uc(fabric: &Fabric, dev: &Arc<RdmaDevice>, qpn: u32, p: &Packet) {
    let ctrl = dev.ctrl();
    let Some(mut c) = take(ctrl, qpn) else {
        return;
    };
    if c.uc_receiver.is_none() {
        c.uc_receiver = ctrl.lock().qp(qpn).map(|q| {
            let mtu = qp::mtu_bytes(q.attr.path_mtu) as u32;
            uc::Receiver::new(mtu, q.attr.rq_psn.get())
        });
    }
    let peer = peer_of(dev, qpn);
    let mut refused = false;
    if let Some(r) = c.uc_receiver.as_mut() {
        let mut t = WireTarget::new(fabric, &peer);
        r.on_packet(p, &mut t);
        // A key refused (the only access a UC request asks for).
        refused = matches!(t.failed, Some(Event::QpAccessErr(_)));
    }
    put(ctrl, qpn, c);
    if refused {
        responder::uc_key_refused(fabric, &peer);
    }
}

/// A request packet for QP `qpn`'s responder.
fn respond(fabric: &Fabric, dev: &Arc<RdmaDevice>, qpn: u32, p: &Packet) {
    let ctrl = dev.ctrl();
    let Some(mut c) = take(ctrl, qpn) else {
        return;
    };
    if c.responder.is_none() {
        c.responder = ctrl.lock().qp(qpn).map(|q| {
            Responder::new(
                q.attr.dest_qp_num.get(),
                qp::mtu_bytes(q.attr.path_mtu) as u32,
                q.attr.rq_psn.get(),
                q.attr.min_rnr_timer,
            )
        });
    }
    let mut out = Vec::new();
    let mut failed = None;
    if let Some(r) = c.responder.as_mut() {
        let peer = peer_of(dev, qpn);
        let mut t = WireTarget::new(fabric, &peer);
        r.on_packet(p, &mut t, &mut out);
        failed = t.failed;
        if r.in_error() && failed.is_none() {
            failed = Some(Event::QpReqErr(qpn));
        }
    }
    put(ctrl, qpn, c);
    transmit(ctrl, qpn, &mut out);
    if let Some(event) = failed {
        to_error_event(fabric, ctrl, qpn, event);
    }
}

/// An answer (ACK, NAK, READ response, atomic ACK) for QP `qpn`'s
/// requester.
fn answered(fabric: &Fabric, ctrl: &Ctrl, qpn: u32, p: &Packet) {
    let Some(mut c) = take(ctrl, qpn) else {
        return;
    };
    let (mut out, mut done) = (Vec::new(), Vec::new());
    if let Some(r) = c.requester.as_mut() {
        r.on_packet(p, now_us(), &mut out, &mut done);
    }
    log::trace!(
        "{}: QP {qpn}: {:?} PSN {:#x} len {}: {} completed, sends {:?}",
        ctrl.name(),
        p.opcode.op,
        p.psn,
        p.payload.len(),
        done.len(),
        out.iter()
            .map(|p| (p.opcode.op, p.psn, p.reth.map(|r| r.dma_len.get())))
            .collect::<Vec<_>>()
    );
    let ended = settle(&mut c, done);
    put(ctrl, qpn, c);
    transmit(ctrl, qpn, &mut out);
    if !ended.is_empty() && complete_all(fabric, ctrl, qpn, ended) {
        // Room in the requester's buffer: the SQ may have more to send.
        ctrl.schedule_sq(qpn);
    }
}

/// Runs the due timers of `dev`'s wire QPs (the uplink's reader calls it
/// when the armed deadline passes) and arms the next.
pub fn tick(dev: &Arc<RdmaDevice>) {
    let ctrl = dev.ctrl();
    let now = now_us();
    let (due, next): (Vec<u32>, Option<u64>) = {
        let st = ctrl.lock();
        let mut next = None::<u64>;
        let mut due = Vec::new();
        for (n, q) in st.qps.iter() {
            let Some(at) = q
                .wire
                .as_ref()
                .and_then(|w| w.requester.as_ref())
                .and_then(|r| r.next_deadline())
            else {
                continue;
            };
            if at <= now {
                due.push(n);
            } else {
                next = Some(next.map_or(at, |m| m.min(at)));
            }
        }
        (due, next)
    };
    if let (Some(at), Some(up)) = (next, dev.uplink()) {
        up.arm(at);
    }
    for qpn in due {
        let fabric = fabric::for_qp(ctrl, qpn);
        if let Some(mut c) = take(ctrl, qpn) {
            let (mut out, mut done) = (Vec::new(), Vec::new());
            if let Some(r) = c.requester.as_mut() {
                r.on_timer(now_us(), &mut out, &mut done);
                debug!(
                    "{}: QP {qpn}: transport timer: {} packets again, {} outstanding",
                    ctrl.name(),
                    out.len(),
                    r.outstanding()
                );
            }
            let ended = settle(&mut c, done);
            put(ctrl, qpn, c);
            transmit(ctrl, qpn, &mut out);
            if !ended.is_empty() && complete_all(&fabric, ctrl, qpn, ended) {
                ctrl.schedule_sq(qpn);
            }
        }
        fabric::unlock_fair(fabric);
    }
}

/// Completes every element QP `qpn`'s requester holds with a flush error
/// and forgets the connection (the QP went to error: nothing of it goes
/// on).
pub(in crate::engine) fn flush(ctrl: &Ctrl, qpn: u32) -> Vec<(u16, SendWqe)> {
    ctrl.lock()
        .qp_mut(qpn)
        .and_then(|q| q.wire.take())
        .map(|c| c.posted.into_iter().map(|(_, h, w, _)| (h, w)).collect())
        .unwrap_or_default()
}

/// What a request packet from the wire reaches: its QP's receives and
/// memory, checked as for a request from a QP of this process.
struct WireTarget<'a> {
    fabric: &'a Fabric,
    peer: &'a Peer,
    /// The affiliated error a refusal reports, if one did.
    failed: Option<Event>,
}

impl<'a> WireTarget<'a> {
    fn new(fabric: &'a Fabric, peer: &'a Peer) -> Self {
        WireTarget {
            fabric,
            peer,
            failed: None,
        }
    }

    fn ctrl(&self) -> &Ctrl {
        self.peer.ctrl()
    }

    /// The receive a SEND is filling, as held in the QP.
    fn held(&self) -> Option<(crate::wqe::Sges, u32)> {
        self.ctrl()
            .lock()
            .qp(self.peer.qpn)
            .and_then(|q| q.held_recv.as_ref())
            .map(|h| (h.wqe.sges.clone(), h.pdn))
    }

    /// Takes the held receive out of the QP.
    fn unhold(&self) -> Option<Recv> {
        take_held(self.peer, WIRE_TOKEN)
    }

    /// The remote range `[va, va + len)` under `rkey` with `access`, as
    /// slices of the QP's guest memory, handed to `f` under the MR gate.
    fn remote<R>(
        &mut self,
        va: u64,
        rkey: u32,
        len: u64,
        access: u32,
        f: impl FnOnce(&Slices<'_>) -> R,
    ) -> Result<R, Refusal> {
        let ctrl = self.peer.ctrl();
        let _gate = ctrl.mr_gate().read();
        let mem = ctrl.mem().memory();
        let dst = responder::resolve_remote(self.peer, rkey, va, len, access)
            .ok()
            .and_then(|r| slices(&mem, &r));
        match dst {
            Some(d) => Ok(f(&d)),
            None => {
                self.failed = Some(Event::QpAccessErr(self.peer.qpn));
                Err(Refusal::Access)
            }
        }
    }
}

impl WireTarget<'_> {
    /// Runs `f` on the 8 aligned bytes at `va` under `rkey` with `access`,
    /// as one host atomic (an atomic's or ATOMIC WRITE's target).
    fn on_cell<R>(
        &mut self,
        va: u64,
        rkey: u32,
        access: u32,
        f: impl FnOnce(&AtomicU64) -> R,
    ) -> Result<R, Refusal> {
        if va % 8 != 0 {
            return Err(Refusal::Invalid);
        }
        let done = self.remote(va, rkey, 8, access, |cell| {
            // Aligned 8 bytes are one slice, aligned in the mapping too.
            match cell.as_slice() {
                [c] => c.get_atomic_ref::<AtomicU64>(0).ok().map(f),
                _ => None,
            }
        })?;
        done.ok_or(Refusal::Access)
    }
}

impl Target for WireTarget<'_> {
    fn receive(&mut self, part: SendPart<'_>) -> Result<(), Refusal> {
        let qpn = self.peer.qpn;
        // A receive a dropped UC message held is the one take_recv gives.
        if part.first {
            let r = match take_recv(self.fabric, self.peer) {
                Take::Got(r) => r,
                Take::Empty(_) => return Err(Refusal::NoReceive),
                Take::Bad => return Err(Refusal::Invalid),
            };
            if let Some(q) = self.ctrl().lock().qp_mut(qpn) {
                q.held_recv = Some(HeldRecv {
                    head: r.head,
                    wqe: r.wqe,
                    token: WIRE_TOKEN,
                    cqn: r.recv_cqn,
                    pdn: r.pdn,
                    xrc_srqn: r.xrc_srqn,
                });
            }
        }
        let Some((sges, pdn)) = self.held() else {
            return Err(Refusal::Invalid);
        };
        let ctrl = self.peer.ctrl();
        let placed = {
            let _gate = ctrl.mr_gate().read();
            let mem = ctrl.mem().memory();
            let n = part.data.len() as u64;
            let dst = span(
                &ctrl.lock(),
                pdn,
                &sges,
                IB_ACCESS_LOCAL_WRITE,
                part.offset,
                n,
            )
            .ok()
            .and_then(|r| slices(&mem, &r));
            dst.map(|d| write_bytes(part.data, &d)).is_some()
        };
        if !placed {
            // Longer than the receive, or its MRs are gone: it fails, and
            // the requester is told its request was invalid.
            if let Some(r) = self.unhold() {
                recv_error(self.fabric, self.peer, &r, IB_WC_LOC_LEN_ERR);
            }
            return Err(Refusal::Invalid);
        }
        if part.last {
            if let Some(r) = self.unhold() {
                let mut c = cqe(0, IB_WC_SUCCESS, IB_WC_RECV, qpn);
                if let Some(rkey) = part.invalidate {
                    // Under the gate: no copy through the MR is between its
                    // check and its end meanwhile.
                    let done = {
                        let _gate = ctrl.mr_gate().write();
                        invalidate(ctrl, r.qp_pdn, rkey)
                    };
                    if !done {
                        recv_error(self.fabric, self.peer, &r, IB_WC_LOC_PROT_ERR);
                        return Err(Refusal::Operation);
                    }
                    c.wc_flags = U32::new(IB_WC_WITH_INVALIDATE);
                    c.ex = U32::new(rkey);
                }
                if let Some(imm) = part.imm {
                    c.wc_flags = U32::new(IB_WC_WITH_IMM);
                    c.ex = U32::new(imm_from_wire(imm));
                }
                c.byte_len = U32::new((part.offset + part.data.len() as u64) as u32);
                complete_recv(self.fabric, self.peer, &r, c, part.solicited);
            }
        }
        Ok(())
    }

    fn write(&mut self, va: u64, rkey: u32, data: &[u8]) -> Result<(), Refusal> {
        self.remote(va, rkey, data.len() as u64, IB_ACCESS_REMOTE_WRITE, |d| {
            write_bytes(data, d)
        })
    }

    fn read(&mut self, va: u64, rkey: u32, len: u32) -> Result<Vec<u8>, Refusal> {
        if len > MAX_WIRE_READ {
            return Err(Refusal::Invalid);
        }
        self.remote(va, rkey, u64::from(len), IB_ACCESS_REMOTE_READ, |src| {
            let mut out = vec![0u8; len as usize];
            let mut at = 0;
            for s in src.iter() {
                at += s.copy_to(&mut out[at..]);
            }
            out
        })
    }

    fn write_imm(&mut self, len: u32, imm: u32, solicited: bool) -> Result<(), Refusal> {
        let r = match take_recv(self.fabric, self.peer) {
            Take::Got(r) => r,
            Take::Empty(_) => return Err(Refusal::NoReceive),
            Take::Bad => return Err(Refusal::Invalid),
        };
        let mut c = cqe(0, IB_WC_SUCCESS, IB_WC_RECV_RDMA_WITH_IMM, self.peer.qpn);
        c.byte_len = U32::new(len);
        c.wc_flags = U32::new(IB_WC_WITH_IMM);
        c.ex = U32::new(imm_from_wire(imm));
        complete_recv(self.fabric, self.peer, &r, c, solicited);
        Ok(())
    }

    fn atomic(&mut self, va: u64, rkey: u32, op: AtomicOp) -> Result<u64, Refusal> {
        self.on_cell(va, rkey, IB_ACCESS_REMOTE_ATOMIC, |cell| rmw(cell, op))
    }

    fn atomic_write(&mut self, va: u64, rkey: u32, value: [u8; 8]) -> Result<(), Refusal> {
        self.on_cell(va, rkey, IB_ACCESS_REMOTE_WRITE, |cell| {
            cell.store(u64::from_ne_bytes(value), Ordering::SeqCst)
        })
    }

    fn flush(&mut self, va: u64, rkey: u32, len: u32, feth: u32) -> Result<(), Refusal> {
        let (flush_type, flush_level) = ((feth & 0xf) as u8, ((feth >> 4) & 3) as u8);
        match flush_granted(self.peer, rkey, va, u64::from(len), flush_type, flush_level) {
            Ok(()) => {
                std::sync::atomic::fence(Ordering::SeqCst);
                Ok(())
            }
            Err(Nak::InvalidRequest) => Err(Refusal::Invalid),
            Err(_) => {
                self.failed = Some(Event::QpAccessErr(self.peer.qpn));
                Err(Refusal::Access)
            }
        }
    }
}
