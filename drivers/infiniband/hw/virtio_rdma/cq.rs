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
//!
//! With queues in guest memory (`VIRTIO_RDMA_F_RINGS`) every CQ has instead a ring, which the
//! device writes into itself (`rings.rs`), and no virtqueue. A user CQ's ring is in its
//! process's memory: nothing for the kernel to poll or arm. A kernel CQ's ring is the
//! driver's: polling takes completions from it, checked as those of a virtqueue, and arming is
//! a store into it (`kernel_rings.rs`). Completion events come on a completion-event queue
//! (`events.rs`).

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use kernel::{
    bindings, new_spinlock_irq,
    prelude::*,
    rdma::{
        self, CqInitAttr, CqNotify, CqRegistry, NewCq, QpRegistry, ResAttrs, Ucontext, Udata, Wc,
        WcSink,
    },
    sync::SpinLockIrq,
    virtio::{Virtqueue, VirtqueueGuard},
};
use zerocopy::{FromZeros, IntoBytes};

use crate::{
    abi,
    device::RdmaDev,
    health,
    kernel_rings::CompRing,
    rings::{self, CqRings},
    uring::CqRing,
    wr_table::{BadToken, Posted, Queue},
};

/// The buffer of one completion: what the device writes.
pub(crate) type CqeBuf = abi::CqReq;

const CQE_LEN: usize = core::mem::size_of::<CqeBuf>();

/// The driver's part of a CQ.
pub(crate) struct Cq {
    cqn: u32,
    /// The CQ's virtqueue.
    vq: u32,
    /// CQE buffers lent to the device. Grows only under the queue's lock.
    depth: AtomicU32,
    /// The consumer asked to be notified of the next completion.
    armed: AtomicBool,
    /// The kinds of device error (bits of [`bad`]) reported already: each once per CQ.
    warned: AtomicU32,
    /// The ring of a user CQ (`None` for a kernel CQ). Its lock, taken under the queue's,
    /// serialises the ring's producer and lets a resize replace the ring.
    ring: Option<Pin<KBox<SpinLockIrq<CqRing>>>>,
    /// A resize of this user CQ is under way: another one fails with [`EBUSY`].
    resizing: AtomicBool,
    /// The ring in guest memory of a CQ with `VIRTIO_RDMA_F_RINGS` (which has no virtqueue:
    /// `vq` means nothing then).
    pub(crate) guest: Option<CqRings>,
}

type Device<'a> = rdma::Device<RdmaDev<'a>>;

impl Cq {
    /// Adds what `rdma res show cq -dd` prints of the driver's view: the CQ's virtqueue, the
    /// CQE buffers lent to the device, whether the consumer armed it, and whose ring it has.
    pub(crate) fn fill_res(&self, attrs: &mut ResAttrs<'_>) -> Result {
        if let Some(guest) = &self.guest {
            attrs.put_u32(c"comp_vq", guest.comp_vq)?;
            attrs.put_u32(c"depth", guest.depth())?;
            let rings = if guest.kernel().is_some() {
                attrs.put_u32(c"armed", self.armed.load(Ordering::Relaxed).into())?;
                c"guest-kernel"
            } else {
                c"guest"
            };
            return attrs.put_str(c"rings", rings);
        }
        attrs.put_u32(c"vq", self.vq)?;
        attrs.put_u32(c"depth", self.depth.load(Ordering::Relaxed))?;
        attrs.put_u32(c"armed", self.armed.load(Ordering::Relaxed).into())?;
        let rings = if self.ring.is_some() {
            c"user"
        } else {
            c"kernel"
        };
        attrs.put_str(c"rings", rings)
    }
}

/// The virtqueue of a CQ; [`EOPNOTSUPP`] for a CQ with a ring in guest memory, which has none.
fn queue<'d>(dev: &'d Device<'_>, cq: &Cq) -> Result<&'d Virtqueue> {
    if cq.guest.is_some() {
        return Err(EOPNOTSUPP);
    }
    dev.ctrl.queues().get(cq.vq as usize).ok_or(EPROTO)
}

/// Creates a CQ: the device's CQ, then its queue filled with `cqe` buffers; for a process
/// (`user`), also the ring it polls. With `VIRTIO_RDMA_F_RINGS`, a CQ with a ring instead: the
/// one the process gives, or the driver's (`rings.rs`).
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
    if dev.config.layout.rings().is_some() {
        let udata = user.map(|(_, udata)| udata);
        let (cqn, guest) = rings::create_cq(dev, attr, udata)?;
        return Ok(NewCq {
            depth: guest.depth(),
            index: cqn,
            data: Cq {
                cqn,
                vq: 0,
                depth: AtomicU32::new(guest.depth()),
                armed: AtomicBool::new(false),
                warned: AtomicU32::new(0),
                ring: None,
                resizing: AtomicBool::new(false),
                guest: Some(guest),
            },
        });
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
            let ring = CqRing::new(uctx, attr.cqe)?;
            let ring = KBox::pin_init(new_spinlock_irq!(ring, "virtio_rdma_ucq_ring"), GFP_KERNEL)?;
            (Some(ring), Some(udata))
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
        depth: AtomicU32::new(0),
        armed: AtomicBool::new(false),
        warned: AtomicU32::new(0),
        ring,
        resizing: AtomicBool::new(false),
        guest: None,
    };
    let Some(vq) = dev.config.layout.cq(cqn) else {
        dev_err!(
            dev.as_ref(),
            "CREATE_CQ returned CQ {} of {}\n",
            cqn,
            dev.config.layout.max_cq()
        );
        // Not destroyed: the number may be a live CQ's with a ring.
        return Err(EPROTO);
    };
    // Before anything of CQ `cqn` is touched: a device that names a live CQ's number again
    // must not make the driver destroy that CQ or lend buffers to its queue.
    let cqs = &dev.ctrl.queues().handler().get_ref().cqs;
    if cqs.reserve(cqn).is_err() {
        dev_err!(
            dev.as_ref(),
            "CREATE_CQ returned CQ {}, which is in use\n",
            cqn
        );
        return Err(EPROTO);
    }
    let mut cq = Cq { vq, ..cq };
    let answered = match (udata, &cq.ring) {
        (Some(udata), Some(ring)) => {
            // Not under the ring's lock: the answer is copied to the process.
            let ring = ring.lock().describe();
            ring.and_then(|ring| udata.write_response(abi::CreateCqResp { ring }.as_bytes()))
        }
        _ => Ok(()),
    };
    if let Err(e) = answered.and_then(|()| fill(dev, &mut cq, bufs)) {
        destroy(dev, &cq);
        cqs.release(cqn);
        return Err(e);
    }
    Ok(NewCq {
        depth: *cq.depth.get_mut(),
        index: cqn,
        data: cq,
    })
}

/// Lends `bufs` to the CQ's queue, with callbacks off until the CQ is armed (on for good for a
/// user CQ, whose ring they fill).
fn fill(dev: &Device<'_>, cq: &mut Cq, bufs: KVec<KBox<CqeBuf>>) -> Result {
    let queue = queue(dev, cq)?;
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
        *cq.depth.get_mut() += 1;
    }
    let notify = q.kick_prepare();
    drop(q);
    if notify {
        queue.notify();
    }
    Ok(())
}

/// Resizes user CQ `cq` to hold at least `cqe` completions. A resize of the same CQ under way
/// makes it [`EBUSY`]; on any error the CQ stays as it was.
pub(crate) fn resize_user(
    cq: &rdma::Cq<RdmaDev<'_>>,
    uctx: &Ucontext<RdmaDev<'_>>,
    cqe: u32,
    udata: &mut Udata<'_>,
) -> Result<u32> {
    let dev = cq.device();
    if cqe == 0 || cqe > dev.config.raw.max_cqe.get() {
        return Err(EINVAL);
    }
    // Checked before anything changes: once the CQ has its new ring, the process must learn
    // where it is.
    if udata.out_len() < core::mem::size_of::<abi::ResizeCqResp>() {
        return Err(EINVAL);
    }
    if cq.resizing.swap(true, Ordering::Acquire) {
        return Err(EBUSY);
    }
    let resized = match &cq.guest {
        Some(guest) => rings::resize_user_cq(cq, guest, cqe, udata),
        None => resize_queue(cq, uctx, cqe, udata),
    };
    cq.resizing.store(false, Ordering::Release);
    resized
}

/// [`resize_user`] of a CQ with a virtqueue: the queue gets more CQE buffers if the CQ grows
/// (the device needs no command: it writes into whatever buffers it has), and the process a new
/// ring into which the completions it has not consumed are copied (the numbering goes on, so
/// its consumer index stays right). A CQ that shrinks keeps its buffers lent; its ring's room
/// is what bounds it. The old ring goes when the process unmaps it.
fn resize_queue(
    cq: &rdma::Cq<RdmaDev<'_>>,
    uctx: &Ucontext<RdmaDev<'_>>,
    cqe: u32,
    udata: &mut Udata<'_>,
) -> Result<u32> {
    let dev = cq.device();
    let Some(ring) = &cq.ring else {
        return Err(EINVAL);
    };
    // No request data is defined.
    udata.read_request(&mut [])?;
    // Allocate first: nothing may sleep once the queue is locked.
    let more = cqe.saturating_sub(cq.depth.load(Ordering::Relaxed));
    let mut bufs = KVec::with_capacity(more as usize, GFP_KERNEL)?;
    for _ in 0..more {
        bufs.push(KBox::new(CqeBuf::new_zeroed(), GFP_KERNEL)?, GFP_KERNEL)?;
    }
    let mut new = CqRing::new(uctx, cqe)?;
    let resp = abi::ResizeCqResp {
        ring: new.describe()?,
        produced: 0,
        reserved: 0,
    };
    let queue = queue(dev, cq)?;
    let mut q = queue.lock::<CqeBuf>()?;
    let old = {
        let mut cur = ring.lock();
        new.take_over(&cur, cqe)?;
        core::mem::replace(&mut *cur, new)
    };
    for buf in bufs {
        if let Err((e, _)) = q.add(buf, 0, CQE_LEN) {
            // The CQ holds fewer than asked; it overruns sooner, as the process learns.
            dev_warn!(
                dev.as_ref(),
                "CQ {}: cannot lend more CQE buffers: {:?}
",
                cq.cqn,
                e
            );
            break;
        }
        cq.depth.fetch_add(1, Ordering::Relaxed);
    }
    let notify = q.kick_prepare();
    drop(q);
    if notify {
        queue.notify();
    }
    // Outside the locks: an mmap entry goes.
    drop(old);
    udata.write_response(resp.as_bytes())?;
    Ok(cq.depth.load(Ordering::Relaxed).min(resp.ring.depth))
}

/// Tells the device to destroy CQ `cqn`; returns whether the device confirmed that it has no
/// such CQ any more (it destroyed it, or never had it).
pub(crate) fn destroy_on_device(dev: &Device<'_>, cqn: u32) -> bool {
    let cmd = abi::CmdDestroyCq {
        cqn: cqn.into(),
        reserved: 0.into(),
    };
    match dev.ctrl.exec::<_, ()>(abi::cmd::DESTROY_CQ, &cmd) {
        Ok(()) | Err(ENOENT) => true,
        Err(e) => {
            dev_err!(dev.as_ref(), "DESTROY_CQ {}: {:?}\n", cqn, e);
            false
        }
    }
}

/// Destroys a CQ: the device gives back every buffer of its queue (unused ones with length 0),
/// which are freed. The ring of a CQ with one goes back to its process once the device
/// confirmed; otherwise it stays pinned (`rings.rs`).
pub(crate) fn destroy(dev: &Device<'_>, cq: &Cq) {
    let confirmed = destroy_on_device(dev, cq.cqn);
    if let Some(guest) = &cq.guest {
        if confirmed {
            guest.release();
        }
        return;
    }
    let Ok(queue) = queue(dev, cq) else {
        return;
    };
    let Ok(mut q) = queue.lock::<CqeBuf>() else {
        return;
    };
    let mut back = 0;
    while q.get_buf().is_some() {
        back += 1;
    }
    // A stopped device gives nothing back; its queues are emptied when they go.
    let depth = cq.depth.load(Ordering::Relaxed);
    if back < depth && !dev.health.stopped() {
        // The rest stay lent to the device until it is reset (then they are freed).
        dev_warn!(
            dev.as_ref(),
            "CQ {}: the device kept {} of {} CQE buffers after DESTROY_CQ\n",
            cq.cqn,
            depth - back,
            depth
        );
    }
}

/// `IB_WC_*` flags the device may report.
const WC_FLAGS: u32 = bindings::ib_wc_flags_IB_WC_GRH
    | bindings::ib_wc_flags_IB_WC_WITH_IMM
    | bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE
    | bindings::ib_wc_flags_IB_WC_WITH_SMAC
    | bindings::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE;

const RECV: u8 = bindings::ib_wc_opcode_IB_WC_RECV as u8;
const RECV_RDMA_WITH_IMM: u8 = bindings::ib_wc_opcode_IB_WC_RECV_RDMA_WITH_IMM as u8;
const SUCCESS: u8 = bindings::ib_wc_status_IB_WC_SUCCESS as u8;
const GENERAL_ERR: u8 = bindings::ib_wc_status_IB_WC_GENERAL_ERR as u8;

/// The work queue a completion is for, by its opcode (receive opcodes have
/// `IB_WC_RECV`'s bit; the device reports the opcode of flushed requests too).
pub(crate) fn queue_of(cqe: &CqeBuf) -> Queue {
    if cqe.opcode & RECV != 0 {
        Queue::Recv
    } else {
        Queue::Send
    }
}

/// What the consumer gets of the device's completion `cqe` of request `posted`: the request's
/// `wr_id`, and for a send its opcode (neither ever the device's). A success must carry the
/// opcode of its request (a receive: `IB_WC_RECV`, or `IB_WC_RECV_RDMA_WITH_IMM`, whose
/// length is the remote write's) and at most the request's length; a success that does not,
/// or a status the kernel does not know, becomes `IB_WC_GENERAL_ERR` (the second value is
/// `false` then: the device erred). An error carries no length.
pub(crate) fn check(cqe: &CqeBuf, posted: &Posted) -> (CqeBuf, bool) {
    let mut out = *cqe;
    out.wr_id.set(posted.wr_id);
    out.wc_flags.set(cqe.wc_flags.get() & WC_FLAGS);
    out.port_num = rdma::FIRST_PORT as u8;
    let recv = posted.opcode == RECV;
    if !recv {
        out.opcode = posted.opcode;
    }
    let fits = match (cqe.status, cqe.opcode) {
        (SUCCESS, RECV_RDMA_WITH_IMM) => recv,
        (SUCCESS, opcode) => opcode == posted.opcode && cqe.byte_len.get() <= posted.len,
        (status, _) => u32::from(status) <= bindings::ib_wc_status_IB_WC_GENERAL_ERR,
    };
    if !fits {
        out.status = GENERAL_ERR;
    }
    if out.status != SUCCESS {
        out.byte_len.set(0);
        if recv {
            out.opcode = RECV;
        }
    }
    (out, fits)
}

/// Reasons a CQ reports a device error (each once).
mod bad {
    pub(super) const LENGTH: u32 = 1 << 0;
    /// A QP the driver does not know.
    pub(super) const QP: u32 = 1 << 1;
    pub(super) const REQUEST: u32 = 1 << 2;
    pub(super) const CONTENT: u32 = 1 << 3;
    /// A queue that does not report to this CQ.
    pub(super) const QUEUE: u32 = 1 << 4;
}

/// A completion showed that the device lost track of its work requests.
pub(crate) struct DeviceError;

/// Checks the completion in `buf` (`len` bytes as the device says) and runs `f` on the QP it
/// names and what its consumer gets (see [`check`]). It must have the size of one, name a QP,
/// a work queue of that QP that reports to `cq` (by its opcode), and a token of a request
/// outstanding on that queue (`wr_table.rs`), which it retires. Otherwise the completion is
/// dropped (reported once per reason): `Ok(None)` if it is of a QP that is gone or of requests a
/// reset discarded, [`DeviceError`] if the device lost track of its requests (which fails it,
/// `health.rs`). `f` runs under the QP registry's lock (one lookup: this is every completion's
/// path), so it must not sleep.
fn with_checked<'a, R>(
    cq: &rdma::Cq<RdmaDev<'a>>,
    qps: &QpRegistry<RdmaDev<'a>>,
    buf: &CqeBuf,
    len: u32,
    f: impl FnOnce(&rdma::Qp<RdmaDev<'a>>, &CqeBuf) -> R,
) -> core::result::Result<Option<R>, DeviceError> {
    if len as usize != CQE_LEN {
        warn_once(cq, bad::LENGTH, |d| {
            dev_warn!(
                d,
                "CQ {}: completion of {} bytes, expected {}; dropped\n",
                cq.cqn,
                len,
                CQE_LEN
            )
        });
        return Err(DeviceError);
    }
    let qpn = buf.qp_num.get();
    let queue = queue_of(buf);
    let out = qps.with(qpn, |qp| {
        if qp.cqn(queue == Queue::Send) != cq.cqn {
            warn_once(cq, bad::QUEUE, |d| {
                dev_warn!(
                    d,
                    "CQ {}: {:?} completion for QP {}, which does not report it here; dropped\n",
                    cq.cqn,
                    queue,
                    qpn
                )
            });
            return Err(DeviceError);
        }
        // The receives of a QP with a shared receive queue are the SRQ's.
        let token = buf.wr_id.get();
        let taken = match qp.srq() {
            Some(srq) if queue == Queue::Recv => srq.complete(token),
            _ => qp.complete(queue, token),
        };
        let posted = match taken {
            Ok(posted) => posted,
            // Completions of requests a reset discarded, left in the CQ.
            Err(BadToken::Discarded) => return Ok(None),
            Err(why) => {
                warn_once(cq, bad::REQUEST, |d| {
                    dev_warn!(
                        d,
                        "CQ {}: QP {}: {:?} completion with token {:#x}: {:?}; dropped\n",
                        cq.cqn,
                        qpn,
                        queue,
                        buf.wr_id.get(),
                        why
                    )
                });
                return Err(DeviceError);
            }
        };
        let (cqe, fits) = check(buf, &posted);
        if !fits {
            warn_once(cq, bad::CONTENT, |d| {
                dev_warn!(
                    d,
                    "CQ {}: QP {}: completion (status {}, opcode {}, {} bytes) does not fit its request (opcode {}, {} bytes); reported as a general error\n",
                    cq.cqn,
                    qpn,
                    buf.status,
                    buf.opcode,
                    buf.byte_len.get(),
                    posted.opcode,
                    posted.len
                )
            });
        }
        Ok(Some(f(qp, &cqe)))
    });
    match out {
        Some(out) => out,
        // Completions of a QP destroyed meanwhile stay behind in its CQ.
        None => {
            warn_once(cq, bad::QP, |d| {
                dev_warn!(
                    d,
                    "CQ {}: completion for QP {}, which the driver does not know; dropped\n",
                    cq.cqn,
                    qpn
                )
            });
            Ok(None)
        }
    }
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

/// What the consumer gets of completion `cqe` of `qp`.
fn wc<'q, 'a>(qp: &'q rdma::Qp<RdmaDev<'a>>, cqe: &CqeBuf) -> Wc<'q, RdmaDev<'a>> {
    Wc {
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
    }
}

/// Reaps completions into `sink`, lending each buffer back to the device (or, from a kernel
/// CQ's ring, giving its slots back); once the device failed, the requests outstanding on the
/// CQ's QPs instead, flushed.
pub(crate) fn poll<'a>(cq: &rdma::Cq<RdmaDev<'a>>, sink: &mut WcSink<'_, RdmaDev<'a>>) -> Result {
    let dev = cq.device();
    let qps = &dev.ctrl.queues().handler().get_ref().qps;
    if let Some(guest) = &cq.guest {
        // A user CQ's ring is its process's to poll.
        let comp = guest.kernel().ok_or(EOPNOTSUPP)?;
        return poll_ring(cq, comp, qps, sink);
    }
    let queue = queue(dev, cq)?;
    let mut q = queue.lock::<CqeBuf>()?;
    let failed = dev.health.failed();
    let mut lent = false;
    let mut error = false;
    while !sink.is_full() {
        let Some((buf, len)) = q.get_buf() else {
            break;
        };
        // Nothing a failed device reports is believed.
        if !failed {
            // `sink` is not full: the push succeeds.
            let checked = with_checked(cq, qps, &buf, len, |qp, cqe| {
                let _ = sink.push(&wc(qp, cqe));
            });
            error |= checked.is_err();
        }
        lent |= lend_back(dev, cq.cqn, &mut q, buf);
        if error {
            break;
        }
    }
    let notify = lent && q.kick_prepare();
    drop(q);
    if notify {
        queue.notify();
    }
    finish_poll(cq, qps, sink, error);
    Ok(())
}

/// [`poll`] of a kernel CQ with a ring.
fn poll_ring<'a>(
    cq: &rdma::Cq<RdmaDev<'a>>,
    comp: &SpinLockIrq<CompRing>,
    qps: &QpRegistry<RdmaDev<'a>>,
    sink: &mut WcSink<'_, RdmaDev<'a>>,
) -> Result {
    let dev = cq.device();
    let mut error = false;
    // Nothing a failed device reports is believed: its requests complete from the tables.
    if !dev.health.failed() {
        let mut ring = comp.lock();
        // At most a ring's worth a call: a device that keeps writing must not keep this CPU
        // here with interrupts off.
        let mut budget = ring.ring().depth();
        while !sink.is_full() && budget > 0 {
            budget -= 1;
            let Some(cqe) = ring.peek() else {
                break;
            };
            ring.take();
            // `sink` is not full: the push succeeds.
            let checked = with_checked(cq, qps, &cqe, CQE_LEN as u32, |qp, cqe| {
                let _ = sink.push(&wc(qp, cqe));
            });
            if checked.is_err() {
                error = true;
                break;
            }
        }
        ring.give_back();
    }
    finish_poll(cq, qps, sink, error);
    Ok(())
}

/// The end of a poll of `cq`: a completion of no outstanding request (`error`) fails the
/// device; once it failed, the requests outstanding on the CQ's QPs complete into `sink`,
/// flushed.
fn finish_poll<'a>(
    cq: &rdma::Cq<RdmaDev<'a>>,
    qps: &QpRegistry<RdmaDev<'a>>,
    sink: &mut WcSink<'_, RdmaDev<'a>>,
    error: bool,
) {
    let dev = cq.device();
    if error
        && health::fail(
            dev,
            format_args!("CQ {}: a completion of no outstanding request", cq.cqn),
        )
    {
        kick_all(&dev.ctrl.queues().handler().get_ref().cqs);
    }
    if dev.health.failed() {
        flush(cq, qps, sink);
    }
}

/// Completes requests outstanding on the QPs that report to `cq` into `sink`, as flushed, in
/// the order they were posted (the device failed: it will not complete them).
fn flush<'a>(
    cq: &rdma::Cq<RdmaDev<'a>>,
    qps: &QpRegistry<RdmaDev<'a>>,
    sink: &mut WcSink<'_, RdmaDev<'a>>,
) {
    qps.each(|qp| {
        for queue in [Queue::Send, Queue::Recv] {
            if qp.cqn(queue == Queue::Send) != cq.cqn {
                continue;
            }
            while !sink.is_full() {
                let Some(posted) = qp.take_oldest(queue) else {
                    break;
                };
                let _ = sink.push(&wc(qp, &flushed(qp, &posted)));
            }
        }
    });
}

/// The completion of `posted`, a request of `qp`, flushed.
pub(crate) fn flushed(qp: &rdma::Qp<RdmaDev<'_>>, posted: &Posted) -> CqeBuf {
    let mut cqe = CqeBuf::new_zeroed();
    cqe.wr_id.set(posted.wr_id);
    cqe.status = bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR as u8;
    cqe.opcode = posted.opcode;
    cqe.qp_num.set(qp.qp_num());
    cqe.port_num = rdma::FIRST_PORT as u8;
    cqe
}

/// Completes the requests outstanding on the QPs that report to user CQ `cq` into its ring,
/// flushed, in the order they were posted, as far as the ring has room (the device failed: it
/// will not complete them, and the process learns so from its ring, as from a device). Returns
/// whether any was.
fn flush_to_ring(cq: &rdma::Cq<RdmaDev<'_>>, ring: &SpinLockIrq<CqRing>) -> bool {
    let dev = cq.device();
    let Ok(queue) = queue(dev, cq) else {
        return false;
    };
    // The queue's lock, then the ring's, as `to_ring` takes them.
    let Ok(_q) = queue.lock::<CqeBuf>() else {
        return false;
    };
    let ring = ring.lock();
    let mut any = false;
    dev.ctrl.queues().handler().get_ref().qps.each(|qp| {
        for queue in [Queue::Send, Queue::Recv] {
            if qp.cqn(queue == Queue::Send) != cq.cqn {
                continue;
            }
            while ring.has_room() {
                let Some(posted) = qp.take_oldest(queue) else {
                    break;
                };
                any |= ring.push(&flushed(qp, &posted)).is_ok();
            }
        }
    });
    any
}

/// Whether a QP that reports to `cq` has a request outstanding.
fn flushable(cq: &rdma::Cq<RdmaDev<'_>>, qps: &QpRegistry<RdmaDev<'_>>) -> bool {
    let mut any = false;
    qps.each(|qp| {
        for queue in [Queue::Send, Queue::Recv] {
            any |= qp.cqn(queue == Queue::Send) == cq.cqn && qp.has_outstanding(queue);
        }
    });
    any
}

/// Has the consumer of kernel CQ `cqn` poll (once the device failed, so that requests posted
/// since complete, flushed), if it armed the CQ.
pub(crate) fn kick(cqs: &CqRegistry<RdmaDev<'_>>, cqn: u32) {
    if cqs.with(cqn, |cq| cq.armed.swap(false, Ordering::AcqRel)) == Some(true) {
        cqs.completion_event(cqn);
    }
}

/// Once the device has stopped: completes the requests left on the rings of the process's QPs
/// that report to `cq`, flushed, into the CQ's ring, and has its consumer poll if it armed the
/// CQ. Returns whether `cq` is a process's CQ with a ring in guest memory.
fn flush_user_ring(cq: &rdma::Cq<RdmaDev<'_>>) -> bool {
    let Some(rings::CqRing::User(ring)) = cq.guest.as_ref().map(|g| &g.ring) else {
        return false;
    };
    if cq.device().health.stopped() && rings::flush_user_cq(cq, &ring.lock()) {
        cq.completion_event();
    }
    true
}

/// A process posted to a QP of a stopped device (its doorbell): the requests go to CQ `cqn`
/// flushed, as they would on a QP in the error state.
pub(crate) fn flush_user(cqs: &CqRegistry<RdmaDev<'_>>, cqn: u32) {
    cqs.with(cqn, flush_user_ring);
}

/// The device just failed: has the consumer of every armed kernel CQ poll (which flushes the
/// requests outstanding on its QPs), and flushes those of user QPs into their CQs' rings.
/// User CQs with rings in guest memory get the requests left on their QPs' rings once the
/// device has stopped (before, it may still be using the rings); the driver has no record of
/// their requests.
pub(crate) fn kick_all(cqs: &CqRegistry<RdmaDev<'_>>) {
    cqs.each(|cq| {
        if flush_user_ring(cq) {
            return;
        }
        let pending = match &cq.ring {
            None => true,
            Some(ring) => flush_to_ring(cq, ring),
        };
        if pending && cq.armed.swap(false, Ordering::AcqRel) {
            cq.completion_event();
        }
    });
}

/// Moves the completions the device returned into the user CQ's ring, lending each buffer
/// back; returns whether any was lent, and whether the device lost track of its requests. The queue's callback stays on. A completion that finds
/// the ring full (the process did not consume) is lost: the CQ overran, which its consumer
/// learns as `IB_EVENT_CQ_ERR`.
fn to_ring<'a>(
    cq: &rdma::Cq<RdmaDev<'a>>,
    ring: &SpinLockIrq<CqRing>,
    qps: &QpRegistry<RdmaDev<'a>>,
    q: &mut VirtqueueGuard<'_, CqeBuf>,
) -> (bool, core::result::Result<(), DeviceError>) {
    let dev = cq.device();
    let ring = ring.lock();
    let mut lent = false;
    let mut lost = 0u32;
    let mut checked = Ok(());
    loop {
        while let Some((buf, len)) = q.get_buf() {
            // The buffer goes back before the process can see its completion: the process may
            // post its next request at once (on another CPU), and that request's completion
            // needs a buffer. Lent afterwards, a CQ of one entry overran.
            let cqe = *buf;
            lent |= lend_back(dev, cq.cqn, q, buf);
            // Nothing a failed device reports is believed.
            if checked.is_ok() && !dev.health.failed() {
                match with_checked(cq, qps, &cqe, len, |_, cqe| {
                    ring.has_room() && ring.push(cqe).is_ok()
                }) {
                    Ok(Some(false)) => lost += 1,
                    Ok(_) => {}
                    Err(e) => checked = Err(e),
                }
            }
        }
        // Look again for completions that came while the callback was being re-enabled.
        if q.enable_cb() {
            break;
        }
    }
    if lost > 0 {
        cq.error_event();
    }
    (lent, checked)
}

/// Reports a device error of `cq` once per `reason` (a bit of [`bad`]).
fn warn_once(
    cq: &rdma::Cq<RdmaDev<'_>>,
    reason: u32,
    report: impl FnOnce(&kernel::device::Device),
) {
    if cq.warned.fetch_or(reason, Ordering::Relaxed) & reason == 0 {
        report(cq.device().as_ref());
    }
}

/// Arms the CQ: its queue calls back on the next completion. Solicited-only arming notifies on
/// any completion too (a spurious wake-up, which consumers tolerate), so that arming never
/// needs the control queue. A kernel CQ with a ring is armed in its ring, solicited-only as
/// asked; a user CQ with a ring is armed in its ring by its process ([`EOPNOTSUPP`] here).
pub(crate) fn req_notify(cq: &rdma::Cq<RdmaDev<'_>>, flags: CqNotify) -> Result<bool> {
    if let Some(guest) = &cq.guest {
        let comp = guest.kernel().ok_or(EOPNOTSUPP)?;
        cq.armed.store(true, Ordering::Release);
        let pending = comp.lock().arm(flags.solicited_only());
        return Ok(flags.report_missed_events() && (pending || failed_pending(cq)));
    }
    let queue = queue(cq.device(), cq)?;
    let mut q = queue.lock::<CqeBuf>()?;
    cq.armed.store(true, Ordering::Release);
    if cq.ring.is_some() {
        // The callback is on for good; a process polls its ring again after arming.
        return Ok(false);
    }
    let pending = !q.enable_cb();
    drop(q);
    if cq.device().health.failed() {
        return Ok(flags.report_missed_events() && failed_pending(cq));
    }
    Ok(pending && flags.report_missed_events())
}

/// Whether the device failed and a QP that reports to kernel CQ `cq` has a request left: its
/// requests complete out of the tables, so the consumer must poll while any is left.
fn failed_pending(cq: &rdma::Cq<RdmaDev<'_>>) -> bool {
    let dev = cq.device();
    dev.health.failed() && flushable(cq, &dev.ctrl.queues().handler().get_ref().qps)
}

/// A completion event of CQ `cqn`, which has a ring (hard-IRQ context): a kernel CQ's consumer
/// is called only if it armed the CQ, once per arming, whatever the device says; a user CQ's
/// event goes to its process (uverbs), which armed it in its ring.
pub(crate) fn ring_event(cqs: &CqRegistry<RdmaDev<'_>>, cqn: u32) {
    let fire = cqs.with(cqn, |cq| match cq.guest.as_ref().and_then(|g| g.kernel()) {
        Some(_) => cq.armed.swap(false, Ordering::AcqRel),
        None => true,
    });
    if fire == Some(true) {
        cqs.completion_event(cqn);
    }
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
    let mut checked = Ok(());
    let fire = cqs.with(cqn, |cq| {
        let Ok(mut q) = vq.lock::<CqeBuf>() else {
            return false;
        };
        match &cq.ring {
            Some(ring) => {
                let (lent, c) = to_ring(cq, ring, qps, &mut q);
                checked = c;
                if lent && q.kick_prepare() {
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
    if checked.is_err() {
        let failed = cqs.with(cqn, |cq| {
            health::fail(
                cq.device(),
                format_args!("CQ {}: a completion of no outstanding request", cqn),
            )
        });
        // With no queue or registry lock held.
        if failed == Some(true) {
            kick_all(cqs);
        }
    }
}

#[kunit_tests(virtio_rdma_cq)]
mod tests {
    use super::*;

    const SEND: u8 = bindings::ib_wc_opcode_IB_WC_SEND as u8;
    const READ: u8 = bindings::ib_wc_opcode_IB_WC_RDMA_READ as u8;
    const FLUSH: u8 = bindings::ib_wc_status_IB_WC_WR_FLUSH_ERR as u8;

    fn cqe(status: u8, opcode: u8, byte_len: u32) -> CqeBuf {
        let mut c = CqeBuf::new_zeroed();
        c.wr_id.set(0x1_0000_0003);
        c.status = status;
        c.opcode = opcode;
        c.byte_len.set(byte_len);
        c.wc_flags.set(u32::MAX);
        c
    }

    fn posted(opcode: u8, len: u32) -> Posted {
        Posted {
            wr_id: 0xffff_8880_dead_beef,
            len,
            opcode,
            signaled: true,
        }
    }

    #[test]
    fn a_fitting_completion_carries_the_consumers_wr_id() {
        let (out, fits) = check(&cqe(SUCCESS, READ, 4096), &posted(READ, 4096));
        assert!(fits);
        assert_eq!(out.wr_id.get(), 0xffff_8880_dead_beef);
        assert_eq!(
            (out.status, out.opcode, out.byte_len.get()),
            (SUCCESS, READ, 4096)
        );
        // Only the flags the device may report.
        assert_eq!(out.wc_flags.get(), WC_FLAGS);
        let (out, fits) = check(&cqe(SUCCESS, RECV, 40), &posted(RECV, 1064));
        assert!(fits);
        assert_eq!((out.opcode, out.byte_len.get()), (RECV, 40));
        // A WRITE_WITH_IMM's length is the remote write's, not the receive's.
        let (out, fits) = check(&cqe(SUCCESS, RECV_RDMA_WITH_IMM, 1 << 20), &posted(RECV, 0));
        assert!(fits);
        assert_eq!(
            (out.opcode, out.byte_len.get()),
            (RECV_RDMA_WITH_IMM, 1 << 20)
        );
    }

    #[test]
    fn a_success_that_does_not_fit_is_a_general_error() {
        for (c, p) in [
            // Longer than the request's buffers.
            (cqe(SUCCESS, READ, 4097), posted(READ, 4096)),
            (cqe(SUCCESS, RECV, u32::MAX), posted(RECV, 1024)),
            // Another operation than the one posted.
            (cqe(SUCCESS, SEND, 0), posted(READ, 4096)),
            (cqe(SUCCESS, 77, 0), posted(RECV, 4096)),
            // A receive's opcode on a send.
            (cqe(SUCCESS, RECV_RDMA_WITH_IMM, 0), posted(SEND, 8)),
        ] {
            let (out, fits) = check(&c, &p);
            assert!(!fits);
            assert_eq!((out.status, out.byte_len.get()), (GENERAL_ERR, 0));
            assert_eq!(out.wr_id.get(), p.wr_id);
        }
        // A status the kernel does not know.
        let (out, fits) = check(&cqe(200, SEND, 0), &posted(SEND, 0));
        assert_eq!((out.status, fits), (GENERAL_ERR, false));
    }

    #[test]
    fn errors_keep_the_requests_opcode_and_no_length() {
        let (out, fits) = check(&cqe(FLUSH, RECV, 99), &posted(READ, 4096));
        assert!(fits);
        assert_eq!(
            (out.status, out.opcode, out.byte_len.get()),
            (FLUSH, READ, 0)
        );
        let (out, _) = check(&cqe(FLUSH, RECV_RDMA_WITH_IMM, 99), &posted(RECV, 4096));
        assert_eq!(out.opcode, RECV);
    }

    #[test]
    fn the_opcode_names_the_queue() {
        assert_eq!(queue_of(&cqe(FLUSH, RECV, 0)), Queue::Recv);
        assert_eq!(queue_of(&cqe(SUCCESS, RECV_RDMA_WITH_IMM, 0)), Queue::Recv);
        assert_eq!(queue_of(&cqe(SUCCESS, READ, 0)), Queue::Send);
    }
}
