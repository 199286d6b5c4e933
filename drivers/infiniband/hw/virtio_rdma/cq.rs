// SPDX-License-Identifier: GPL-2.0

//! Completion queues.
//!
//! Each CQ has its own virtqueue (`VIRTIO_RDMA_CQ_VQ(cqn)`), which the driver keeps filled with
//! device-writable CQE buffers, allocated once when the CQ is created: the device writes one
//! completion into a buffer and returns it; polling converts it and lends the same buffer back.
//! Arming the CQ enables the virtqueue's callback, so no control command is needed per arm;
//! the callback (hard-IRQ context) disables it again and notifies the consumer.
//!
//! A user CQ also has a ring its process maps (`uring.rs`): its queue's callback stays on, and
//! moves each completion, checked, into the ring and the buffer back to the device; the
//! process polls the ring without a system call. A completion that finds the ring full is lost
//! and reported as a CQ overrun.

use core::sync::atomic::{AtomicBool, Ordering};

use kernel::{
    bindings,
    prelude::*,
    rdma::{
        self, CqInitAttr, CqNotify, CqRegistry, NewCq, QpRegistry, Ucontext, Udata, Wc, WcSink,
    },
    virtio::{Virtqueue, VirtqueueGuard},
};
use zerocopy::{FromZeros, IntoBytes};

use crate::{abi, uring::CqRing, verbs::RdmaDev};

/// The buffer of one completion: what the device writes.
pub(crate) type CqeBuf = abi::CqReq;

const CQE_LEN: usize = core::mem::size_of::<CqeBuf>();

/// The driver's part of a CQ.
pub(crate) struct Cq {
    cqn: u32,
    /// The CQ's virtqueue.
    vq: u32,
    /// CQE buffers lent to the device.
    depth: u32,
    /// The consumer asked to be notified of the next completion.
    armed: AtomicBool,
    /// A malformed completion was reported once already (reported once per CQ).
    warned: AtomicBool,
    /// The ring of a user CQ (`None` for a kernel CQ).
    ring: Option<CqRing>,
}

type Device<'a> = rdma::Device<RdmaDev<'a>>;

/// The virtqueue of a CQ.
fn queue<'d>(dev: &'d Device<'_>, vq: u32) -> Result<&'d Virtqueue> {
    dev.ctrl.queues().get(vq as usize).ok_or(EPROTO)
}

/// Creates a CQ: the device's CQ, then its queue filled with `cqe` buffers; for a process
/// (`user`), also the ring it polls.
pub(crate) fn create(
    dev: &Device<'_>,
    attr: &CqInitAttr,
    user: Option<(&Ucontext<RdmaDev<'_>>, &mut Udata<'_>)>,
) -> Result<NewCq<Cq>> {
    let max_cqe = dev.config.raw.max_cqe.get();
    if attr.cqe == 0 || attr.cqe > max_cqe {
        return Err(EINVAL);
    }
    if attr.flags != 0 {
        return Err(EOPNOTSUPP);
    }
    // Allocate first: nothing may sleep once the queue is locked.
    let mut bufs = KVec::with_capacity(attr.cqe as usize, GFP_KERNEL)?;
    for _ in 0..attr.cqe {
        bufs.push(KBox::new(CqeBuf::new_zeroed(), GFP_KERNEL)?, GFP_KERNEL)?;
    }
    let (ring, udata) = match user {
        Some((uctx, udata)) => {
            // No request data is defined.
            udata.read_request(&mut [])?;
            (Some(CqRing::new(uctx, attr.cqe)?), Some(udata))
        }
        None => (None, None),
    };

    let rsp: abi::RspCreateCq = dev.ctrl.exec(
        abi::cmd::CREATE_CQ,
        &abi::CmdCreateCq {
            cqe: attr.cqe.into(),
            reserved: 0.into(),
        },
    )?;
    let cqn = rsp.cqn.get();
    let cq = Cq {
        cqn,
        vq: 0,
        depth: 0,
        armed: AtomicBool::new(false),
        warned: AtomicBool::new(false),
        ring,
    };
    let Some(vq) = dev.config.layout.cq(cqn) else {
        dev_err!(
            dev.as_ref(),
            "CREATE_CQ returned CQ {} of {}\n",
            cqn,
            dev.config.layout.max_cq()
        );
        destroy_on_device(dev, cqn);
        return Err(EPROTO);
    };
    let mut cq = Cq { vq, ..cq };
    let answered = match (udata, &cq.ring) {
        (Some(udata), Some(ring)) => ring
            .describe()
            .and_then(|ring| udata.write_response(abi::CreateCqResp { ring }.as_bytes())),
        _ => Ok(()),
    };
    if let Err(e) = answered.and_then(|()| fill(dev, &mut cq, bufs)) {
        destroy(dev, &cq);
        return Err(e);
    }
    Ok(NewCq {
        depth: cq.depth,
        index: cqn,
        data: cq,
    })
}

/// Lends `bufs` to the CQ's queue, with callbacks off until the CQ is armed (on for good for a
/// user CQ, whose ring they fill).
fn fill(dev: &Device<'_>, cq: &mut Cq, bufs: KVec<KBox<CqeBuf>>) -> Result {
    let queue = queue(dev, cq.vq)?;
    let mut q = queue.lock::<CqeBuf>()?;
    if cq.ring.is_some() {
        q.enable_cb();
    } else {
        q.disable_cb();
    }
    for buf in bufs {
        q.add(buf, 0, CQE_LEN).map_err(|(e, _)| {
            dev_err!(
                dev.as_ref(),
                "CQ {}: cannot lend CQE buffers: {:?}\n",
                cq.cqn,
                e
            );
            e
        })?;
        cq.depth += 1;
    }
    let notify = q.kick_prepare();
    drop(q);
    if notify {
        queue.notify();
    }
    Ok(())
}

/// Tells the device to destroy CQ `cqn`.
fn destroy_on_device(dev: &Device<'_>, cqn: u32) {
    let cmd = abi::CmdDestroyCq {
        cqn: cqn.into(),
        reserved: 0.into(),
    };
    if let Err(e) = dev.ctrl.exec::<_, ()>(abi::cmd::DESTROY_CQ, &cmd) {
        dev_err!(dev.as_ref(), "DESTROY_CQ {}: {:?}\n", cqn, e);
    }
}

/// Destroys a CQ: the device gives back every buffer of its queue (unused ones with length 0),
/// which are freed.
pub(crate) fn destroy(dev: &Device<'_>, cq: &Cq) {
    destroy_on_device(dev, cq.cqn);
    let Ok(queue) = queue(dev, cq.vq) else {
        return;
    };
    let Ok(mut q) = queue.lock::<CqeBuf>() else {
        return;
    };
    let mut back = 0;
    while q.get_buf().is_some() {
        back += 1;
    }
    if back < cq.depth {
        // The rest stay lent to the device until it is reset (then they are freed).
        dev_warn!(
            dev.as_ref(),
            "CQ {}: the device kept {} of {} CQE buffers after DESTROY_CQ\n",
            cq.cqn,
            cq.depth - back,
            cq.depth
        );
    }
}

/// `IB_WC_*` flags the device may report.
const WC_FLAGS: u32 = bindings::ib_wc_flags_IB_WC_GRH
    | bindings::ib_wc_flags_IB_WC_WITH_IMM
    | bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE
    | bindings::ib_wc_flags_IB_WC_WITH_SMAC
    | bindings::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE;

/// The status and opcode of a completion, checked: a status or (successful) opcode that is not
/// the kernel's becomes a general error rather than reaching the consumer.
pub(crate) fn checked_status(cqe: &CqeBuf) -> (u32, u32) {
    let status = u32::from(cqe.status);
    let opcode = u32::from(cqe.opcode);
    let known_opcode = matches!(
        opcode,
        bindings::ib_wc_opcode_IB_WC_SEND
            | bindings::ib_wc_opcode_IB_WC_RDMA_WRITE
            | bindings::ib_wc_opcode_IB_WC_RDMA_READ
            | bindings::ib_wc_opcode_IB_WC_COMP_SWAP
            | bindings::ib_wc_opcode_IB_WC_FETCH_ADD
            | bindings::ib_wc_opcode_IB_WC_LOCAL_INV
            | bindings::ib_wc_opcode_IB_WC_REG_MR
            | bindings::ib_wc_opcode_IB_WC_RECV
            | bindings::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM
    );
    if status > bindings::ib_wc_status_IB_WC_GENERAL_ERR
        || (status == bindings::ib_wc_status_IB_WC_SUCCESS && !known_opcode)
    {
        return (bindings::ib_wc_status_IB_WC_GENERAL_ERR, opcode);
    }
    (status, opcode)
}

/// Checks the completion in `buf` (`len` bytes as the device says) and runs `f` on the QP it
/// names and the checked copy. It must have the size of one and name a QP that reports to
/// `cq`; a status or opcode the kernel does not know becomes a general error, flags are those
/// the device may set. `None` (reported once) otherwise. `f` runs under the QP registry's lock
/// (one lookup: this is every completion's path), so it must not sleep.
fn with_checked<'a, R>(
    cq: &rdma::Cq<RdmaDev<'a>>,
    qps: &QpRegistry<RdmaDev<'a>>,
    buf: &CqeBuf,
    len: u32,
    f: impl FnOnce(&rdma::Qp<RdmaDev<'a>>, &CqeBuf) -> R,
) -> Option<R> {
    if len as usize != CQE_LEN {
        warn_once(cq, |d| {
            dev_warn!(
                d,
                "CQ {}: completion of {} bytes, expected {}\n",
                cq.cqn,
                len,
                CQE_LEN
            )
        });
        return None;
    }
    let qpn = buf.qp_num.get();
    let out = qps
        .with(qpn, |qp| {
            if qp.cqn(true) != cq.cqn && qp.cqn(false) != cq.cqn {
                return None;
            }
            let (status, opcode) = checked_status(buf);
            let mut cqe = *buf;
            // Both fit: they are the device's byte values or `IB_WC_GENERAL_ERR`.
            cqe.status = status as u8;
            cqe.opcode = opcode as u8;
            cqe.wc_flags.set(buf.wc_flags.get() & WC_FLAGS);
            cqe.port_num = rdma::FIRST_PORT as u8;
            Some(f(qp, &cqe))
        })
        .flatten();
    if out.is_none() {
        warn_once(cq, |d| {
            dev_warn!(
                d,
                "CQ {}: completion for QP {}, not one of its QPs; dropped\n",
                cq.cqn,
                qpn
            )
        });
    }
    out
}

/// Lends a CQE buffer back to the device; returns whether it was.
fn lend_back(
    dev: &Device<'_>,
    cqn: u32,
    q: &mut VirtqueueGuard<'_, CqeBuf>,
    buf: KBox<CqeBuf>,
) -> bool {
    match q.add(buf, 0, CQE_LEN) {
        Ok(()) => true,
        Err((e, _)) => {
            dev_err!(
                dev.as_ref(),
                "CQ {}: cannot lend a CQE buffer back: {:?}\n",
                cqn,
                e
            );
            false
        }
    }
}

/// Reaps completions into `sink`, lending each buffer back to the device.
pub(crate) fn poll<'a>(cq: &rdma::Cq<RdmaDev<'a>>, sink: &mut WcSink<'_, RdmaDev<'a>>) -> Result {
    let dev = cq.device();
    let qps = &dev.ctrl.queues().handler().get_ref().qps;
    let queue = queue(dev, cq.vq)?;
    let mut q = queue.lock::<CqeBuf>()?;
    let mut lent = false;
    while !sink.is_full() {
        let Some((buf, len)) = q.get_buf() else {
            break;
        };
        // `sink` is not full: the push succeeds.
        let _ = with_checked(cq, qps, &buf, len, |qp, cqe| {
            sink.push(&Wc {
                qp,
                wr_id: cqe.wr_id.get(),
                status: cqe.status.into(),
                opcode: cqe.opcode.into(),
                vendor_err: cqe.vendor_err.get(),
                byte_len: cqe.byte_len.get(),
                ex: cqe.ex.get(),
                src_qp: cqe.src_qp.get(),
                wc_flags: cqe.wc_flags.get(),
                pkey_index: cqe.pkey_index.get(),
                sl: cqe.sl,
                port_num: cqe.port_num.into(),
                smac: cqe.smac,
                vlan_id: cqe.vlan_id.get(),
                network_hdr_type: cqe.network_hdr_type,
            })
        });
        lent |= lend_back(dev, cq.cqn, &mut q, buf);
    }
    let notify = lent && q.kick_prepare();
    drop(q);
    if notify {
        queue.notify();
    }
    Ok(())
}

/// Moves the completions the device returned into the user CQ's ring, lending each buffer
/// back; returns whether any was lent. The queue's callback stays on. A completion that finds
/// the ring full (the process did not consume) is lost: the CQ overran, which its consumer
/// learns as `IB_EVENT_CQ_ERR`.
fn to_ring<'a>(
    cq: &rdma::Cq<RdmaDev<'a>>,
    ring: &CqRing,
    qps: &QpRegistry<RdmaDev<'a>>,
    q: &mut VirtqueueGuard<'_, CqeBuf>,
) -> bool {
    let dev = cq.device();
    let mut lent = false;
    let mut lost = 0u32;
    loop {
        while let Some((buf, len)) = q.get_buf() {
            let pushed = with_checked(cq, qps, &buf, len, |_, cqe| {
                ring.has_room() && ring.push(cqe).is_ok()
            });
            if pushed == Some(false) {
                lost += 1;
            }
            lent |= lend_back(dev, cq.cqn, q, buf);
        }
        // Look again for completions that came while the callback was being re-enabled.
        if q.enable_cb() {
            break;
        }
    }
    if lost > 0 {
        cq.error_event();
    }
    lent
}

/// Reports a device error of `cq` once.
fn warn_once(cq: &rdma::Cq<RdmaDev<'_>>, report: impl FnOnce(&kernel::device::Device)) {
    if !cq.warned.swap(true, Ordering::Relaxed) {
        report(cq.device().as_ref());
    }
}

/// Arms the CQ: its queue calls back on the next completion. Solicited-only arming notifies on
/// any completion too (a spurious wake-up, which consumers tolerate), so that arming never
/// needs the control queue.
pub(crate) fn req_notify(cq: &rdma::Cq<RdmaDev<'_>>, flags: CqNotify) -> Result<bool> {
    let queue = queue(cq.device(), cq.vq)?;
    let mut q = queue.lock::<CqeBuf>()?;
    cq.armed.store(true, Ordering::Release);
    if cq.ring.is_some() {
        // The callback is on for good; a process polls its ring again after arming.
        return Ok(false);
    }
    let pending = !q.enable_cb();
    Ok(pending && flags.report_missed_events())
}

/// The callback of a CQ's queue (hard-IRQ context): moves completions into a user CQ's ring,
/// and notifies the consumer once per arming.
pub(crate) fn completion_event(
    cqs: &CqRegistry<RdmaDev<'_>>,
    qps: &QpRegistry<RdmaDev<'_>>,
    cqn: u32,
    vq: &Virtqueue,
) {
    // Under the queue's lock, as arming is: a consumer re-arming on another CPU is not undone.
    let fire = cqs.with(cqn, |cq| {
        let Ok(mut q) = vq.lock::<CqeBuf>() else {
            return false;
        };
        match &cq.ring {
            Some(ring) => {
                if to_ring(cq, ring, qps, &mut q) && q.kick_prepare() {
                    drop(q);
                    vq.notify();
                }
            }
            None => q.disable_cb(),
        }
        cq.armed.swap(false, Ordering::AcqRel)
    });
    if fire == Some(true) {
        cqs.completion_event(cqn);
    }
}
