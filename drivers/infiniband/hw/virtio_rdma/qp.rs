// SPDX-License-Identifier: GPL-2.0

//! Queue pairs.
//!
//! Each QP has a send and a receive virtqueue (`VIRTIO_RDMA_SQ_VQ`/`RQ_VQ` of its number).
//! Their element buffers are allocated when the QP is created, one per work request it may
//! have outstanding, and kept on free lists: posting takes a buffer, encodes the request into
//! it (`wqe.rs`) and lends it to the device; the device gives it back once it has read it,
//! and the next post reclaims it. One kick per post call. Completions come through the CQs
//! (`cq.rs`); the device flushes outstanding requests when the QP goes to the error state.
//!
//! A user QP has the same buffers; its process posts through rings it maps (`uring.rs`), and
//! the doorbell moves the new elements into the buffers, checked, in place of encoding.
//!
//! Either way the element's `wr_id` is replaced by a token of the work queue's table
//! (`wr_table.rs`) before the device sees it; completions get the `wr_id` back from the table.
//!
//! With queues in guest memory (`VIRTIO_RDMA_F_RINGS`) every QP but the GSI QP has rings
//! instead of virtqueues (`rings.rs`). A user QP has neither buffers nor tables: the device
//! reads its process's rings itself, and its doorbell only kicks the notification queue. A
//! kernel QP's rings are the driver's: posting encodes each request as for a virtqueue, copies
//! it into the next slot and publishes the batch (`kernel_rings.rs`), kicking the notification
//! queue only when the device asked for it; its tables work as with virtqueues.
//!
//! XRC (`xrcd.rs`): an initiator QP is a process's ring QP without a receive ring; a target QP
//! has no queues at all (CREATE_XRC_TGT_QP), only its domain.

use kernel::{
    bindings, new_spinlock_irq,
    prelude::*,
    rdma::{
        self, NewQp, QpAttr, QpCap, QpInitAttr, RecvWr, RecvWrs, ResAttrs, SendWr, SendWrs, Udata,
        WorkQueue,
    },
    sync::SpinLockIrq,
    virtio::{DmaBuf, Virtqueue},
};
use zerocopy::{FromZeros, Immutable, IntoBytes};

use crate::{
    abi, ah, cq,
    device::RdmaDev,
    kernel_rings::WorkRing,
    mr,
    rings::{self, NewRings, QpRings},
    uring::Uring,
    wqe::{self, RqBuf, SendDesc, SqBuf, WorkElement},
    wr_table::{self, BadToken, PostTable, Posted, Queue, WrTable},
    xrcd,
};

type Device<'a> = rdma::Device<RdmaDev<'a>>;
type Qp<'a> = rdma::Qp<RdmaDev<'a>>;

/// The QP number of the GSI QP (QP1).
pub(crate) const GSI_QPN: u32 = 1;

/// The driver's part of a QP.
pub(crate) struct DevQp {
    qpn: u32,
    qp_type: u32,
    cap: QpCap,
    /// CQ numbers of the send and receive CQs.
    send_cqn: u32,
    recv_cqn: u32,
    /// Every send request is signaled.
    sq_sig_all: bool,
    /// Where the QP's work requests go.
    queues: Queues,
}

/// Where a QP's work requests go.
enum Queues {
    /// Virtqueues, to which the driver lends elements: a kernel QP's, or a user QP's without
    /// `VIRTIO_RDMA_F_RINGS`.
    Virtqueues(VqQueues),
    /// Rings in the process's memory, which the device reads itself (`rings.rs`).
    Guest(QpRings),
    /// Rings of a kernel QP in the driver's memory, which the device reads.
    Kernel(KernelQueues),
    /// None: an XRC target QP of domain `xrcdn`, which takes the receives of its messages
    /// from the domain's XRC SRQs.
    Target { xrcdn: u32 },
}

/// The rings of a kernel QP and the requests outstanding on them.
struct KernelQueues {
    /// The send ring; the lock also serialises posting.
    sq: Pin<KBox<SpinLockIrq<WorkRing<SqBuf>>>>,
    /// The receive ring (none with a shared receive queue); the lock also serialises
    /// posting.
    rq: Option<Pin<KBox<SpinLockIrq<WorkRing<RqBuf>>>>>,
    /// The outstanding send and receive requests.
    sq_wrs: Pin<KBox<SpinLockIrq<WrTable>>>,
    rq_wrs: Pin<KBox<SpinLockIrq<WrTable>>>,
}

/// The virtqueues of a QP, their element buffers and the requests outstanding on them.
struct VqQueues {
    sq_vq: u32,
    rq_vq: u32,
    /// Send element buffers not lent to the device; the lock also serialises posting.
    sq: Pin<KBox<SpinLockIrq<KVec<KBox<SqBuf>>>>>,
    /// Receive element buffers not lent to the device.
    rq: Pin<KBox<SpinLockIrq<KVec<KBox<RqBuf>>>>>,
    /// The outstanding send and receive requests.
    sq_wrs: Pin<KBox<SpinLockIrq<WrTable>>>,
    rq_wrs: Pin<KBox<SpinLockIrq<WrTable>>>,
    /// The rings of a user QP (`None` for a kernel QP).
    user: Option<UserRings>,
}

/// The rings a user QP's process posts through.
struct UserRings {
    sq: Uring<SqBuf>,
    rq: Uring<RqBuf>,
}

impl VqQueues {
    fn wrs(&self, queue: Queue) -> &SpinLockIrq<WrTable> {
        match queue {
            Queue::Send => &self.sq_wrs,
            Queue::Recv => &self.rq_wrs,
        }
    }
}

impl DevQp {
    /// The number of the CQ that receives this QP's completions of kind `send`.
    pub(crate) fn cqn(&self, send: bool) -> u32 {
        if send {
            self.send_cqn
        } else {
            self.recv_cqn
        }
    }

    /// The table of the requests outstanding on the send or the receive queue; `None` for a
    /// user QP with rings in guest memory, of whose requests the driver knows nothing.
    fn wrs(&self, queue: Queue) -> Option<&SpinLockIrq<WrTable>> {
        match (&self.queues, queue) {
            (Queues::Virtqueues(vqs), _) => Some(vqs.wrs(queue)),
            (Queues::Kernel(k), Queue::Send) => Some(&k.sq_wrs),
            (Queues::Kernel(k), Queue::Recv) => Some(&k.rq_wrs),
            (Queues::Guest(_) | Queues::Target { .. }, _) => None,
        }
    }

    /// The rings of a user QP with rings in guest memory.
    pub(crate) fn user_rings(&self) -> Option<&QpRings> {
        match &self.queues {
            Queues::Guest(rings) => Some(rings),
            _ => None,
        }
    }

    /// Takes the oldest request off the send or the receive queue, to flush it.
    pub(crate) fn take_oldest(&self, queue: Queue) -> Option<Posted> {
        self.wrs(queue)?.lock().take_oldest()
    }

    /// Whether a request is outstanding on the send or the receive queue.
    pub(crate) fn has_outstanding(&self, queue: Queue) -> bool {
        self.wrs(queue).is_some_and(|wrs| !wrs.lock().is_empty())
    }

    /// Adds what `rdma res show qp -dd` prints of the driver's view: the QP's virtqueues, its
    /// CQs, the requests outstanding on each queue, and whose rings it has.
    pub(crate) fn fill_res(&self, attrs: &mut ResAttrs<'_>) -> Result {
        let vqs = match &self.queues {
            Queues::Virtqueues(vqs) => vqs,
            Queues::Target { xrcdn } => return attrs.put_u32(c"xrcdn", *xrcdn),
            Queues::Guest(rings) => {
                attrs.put_u32(c"send_cqn", self.send_cqn)?;
                attrs.put_u32(c"recv_cqn", self.recv_cqn)?;
                attrs.put_u32(c"sq_depth", rings.sq.depth())?;
                attrs.put_u32(c"rq_depth", rings.rq.as_ref().map_or(0, |r| r.depth()))?;
                return attrs.put_str(c"rings", c"guest");
            }
            Queues::Kernel(k) => {
                attrs.put_u32(c"send_cqn", self.send_cqn)?;
                attrs.put_u32(c"recv_cqn", self.recv_cqn)?;
                attrs.put_u32(c"sq_depth", k.sq.lock().ring().depth())?;
                let rq_depth = k.rq.as_ref().map_or(0, |r| r.lock().ring().depth());
                attrs.put_u32(c"rq_depth", rq_depth)?;
                attrs.put_u32(c"sq_outstanding", k.sq_wrs.lock().outstanding())?;
                attrs.put_u32(c"rq_outstanding", k.rq_wrs.lock().outstanding())?;
                return attrs.put_str(c"rings", c"guest-kernel");
            }
        };
        attrs.put_u32(c"sq_vq", vqs.sq_vq)?;
        attrs.put_u32(c"rq_vq", vqs.rq_vq)?;
        attrs.put_u32(c"send_cqn", self.send_cqn)?;
        attrs.put_u32(c"recv_cqn", self.recv_cqn)?;
        attrs.put_u32(c"sq_outstanding", vqs.sq_wrs.lock().outstanding())?;
        attrs.put_u32(c"rq_outstanding", vqs.rq_wrs.lock().outstanding())?;
        let rings = if vqs.user.is_some() {
            c"user"
        } else {
            c"kernel"
        };
        attrs.put_str(c"rings", rings)
    }

    /// Takes the request `token` names off the send or the receive queue, for its completion.
    pub(crate) fn complete(
        &self,
        queue: Queue,
        token: u64,
    ) -> core::result::Result<Posted, BadToken> {
        self.wrs(queue)
            .ok_or(BadToken::NotOutstanding)?
            .lock()
            .complete(token)
    }
}

/// A work request table of `depth` entries of `queue` under its own lock.
fn wr_table(depth: u32, queue: Queue) -> Result<Pin<KBox<SpinLockIrq<WrTable>>>> {
    KBox::pin_init(
        new_spinlock_irq!(WrTable::new(depth, queue)?, "virtio_rdma_wrs"),
        GFP_KERNEL,
    )
}

/// Records the request in `buf` in `wrs` and puts its token into the element; [`ENOMEM`] when
/// the queue has as many requests outstanding as it may.
fn record<B: WorkElement, T: PostTable>(
    wrs: &SpinLockIrq<T>,
    buf: &mut B,
    sig_all: bool,
) -> Result {
    let posted = buf.posted(sig_all).ok_or(EINVAL)?;
    let token = wrs.lock().post(posted).ok_or(ENOMEM)?;
    buf.set_token(token);
    Ok(())
}

/// Whether a QP of `attr` has a receive queue of its own: not with a shared receive queue,
/// nor as an XRC initiator, which receives nothing.
pub(crate) fn has_rq(attr: &QpInitAttr) -> bool {
    attr.srq.is_none() && attr.qp_type != bindings::ib_qp_type_IB_QPT_XRC_INI
}

/// Checks what the consumer asks for against what the device and the driver support.
pub(crate) fn check_init(attr: &QpInitAttr, limits: &QpCap) -> Result<QpCap> {
    match attr.qp_type {
        bindings::ib_qp_type_IB_QPT_RC
        | bindings::ib_qp_type_IB_QPT_UC
        | bindings::ib_qp_type_IB_QPT_UD
        | bindings::ib_qp_type_IB_QPT_GSI
        | bindings::ib_qp_type_IB_QPT_XRC_INI => {}
        _ => return Err(EOPNOTSUPP),
    }
    if attr.create_flags != 0 {
        return Err(EOPNOTSUPP);
    }
    // A QP with a shared receive queue has no receive queue of its own (IB ignores its
    // receive sizes then), nor has an XRC initiator; the GSI QP has its own.
    if !has_rq(attr) {
        if attr.qp_type == bindings::ib_qp_type_IB_QPT_GSI {
            return Err(EINVAL);
        }
        let c = &attr.cap;
        if c.max_send_wr > limits.max_send_wr
            || c.max_send_sge > limits.max_send_sge
            || c.max_inline_data > limits.max_inline_data
        {
            return Err(EINVAL);
        }
        return Ok(QpCap {
            max_send_sge: c.max_send_sge.max(1),
            max_recv_wr: 0,
            max_recv_sge: 0,
            ..*c
        });
    }
    let c = &attr.cap;
    if c.max_send_wr > limits.max_send_wr
        || c.max_recv_wr > limits.max_recv_wr
        || c.max_send_sge > limits.max_send_sge
        || c.max_recv_sge > limits.max_recv_sge
        || c.max_inline_data > limits.max_inline_data
    {
        return Err(EINVAL);
    }
    Ok(QpCap {
        max_send_sge: c.max_send_sge.max(1),
        max_recv_sge: c.max_recv_sge.max(1),
        ..*c
    })
}

/// What a QP of this device may have at most (also what `query_device` reports).
pub(crate) fn limits(dev: &Device<'_>) -> QpCap {
    let c = &dev.config.raw;
    QpCap {
        max_send_wr: c.max_qp_wr.get(),
        max_recv_wr: c.max_qp_wr.get(),
        max_send_sge: c.max_send_sge.get().min(wqe::MAX_SGE),
        max_recv_sge: c.max_recv_sge.get().min(wqe::MAX_SGE),
        max_inline_data: c.max_inline_data.get().min(wqe::MAX_INLINE),
    }
}

/// Allocates `n` zeroed buffers.
fn buffers<B: FromZeros>(n: u32) -> Result<KVec<KBox<B>>> {
    let mut v = KVec::with_capacity(n as usize, GFP_KERNEL)?;
    for _ in 0..n {
        v.push(KBox::new(B::new_zeroed(), GFP_KERNEL)?, GFP_KERNEL)?;
    }
    Ok(v)
}

/// CREATE_QP's request (the first part of CREATE_QP_RING's): a QP of `pd` for `attr` with
/// capabilities `cap`, reporting to `send_cq` and `recv_cq` (an XRC initiator has none: the
/// device ignores the number then).
pub(crate) fn create_cmd(
    pd: &rdma::Pd<RdmaDev<'_>>,
    attr: &QpInitAttr,
    cap: &QpCap,
    send_cq: &rdma::Cq<RdmaDev<'_>>,
    recv_cq: Option<&rdma::Cq<RdmaDev<'_>>>,
) -> abi::CmdCreateQp {
    abi::CmdCreateQp {
        pdn: pd.pdn.into(),
        qp_type: attr.qp_type as u8,
        sq_sig_all: u8::from(attr.sq_sig_all),
        reserved0: 0.into(),
        max_send_wr: cap.max_send_wr.into(),
        max_send_sge: cap.max_send_sge.into(),
        send_cqn: send_cq.index().into(),
        max_recv_wr: cap.max_recv_wr.into(),
        max_recv_sge: cap.max_recv_sge.into(),
        recv_cqn: recv_cq.map_or(0, |cq| cq.index()).into(),
        max_inline_data: cap.max_inline_data.into(),
        srqn: attr.srq.unwrap_or(0).into(),
    }
}

/// Creates a QP; with `udata`, a user QP with its rings: rings it maps, or with
/// `VIRTIO_RDMA_F_RINGS` rings in its own memory (`rings.rs`). Only an XRC initiator, a
/// process's ring QP (there is no kernel XRC), has no `recv_cq`.
pub(crate) fn create(
    pd: &rdma::Pd<RdmaDev<'_>>,
    attr: &QpInitAttr,
    send_cq: &rdma::Cq<RdmaDev<'_>>,
    recv_cq: Option<&rdma::Cq<RdmaDev<'_>>>,
    mut udata: Option<&mut Udata<'_>>,
) -> Result<NewQp<DevQp>> {
    let dev = pd.device();
    let cap = check_init(attr, &limits(dev))?;
    let gsi = attr.qp_type == bindings::ib_qp_type_IB_QPT_GSI;
    // The GSI QP is the kernel's.
    if gsi && udata.is_some() {
        return Err(EINVAL);
    }
    if attr.qp_type == bindings::ib_qp_type_IB_QPT_XRC_INI {
        if !xrcd::supported(dev) || udata.is_none() {
            return Err(EOPNOTSUPP);
        }
    } else if recv_cq.is_none() {
        return Err(EINVAL);
    }
    let qp = |qpn, queues| NewQp {
        qpn,
        cap,
        data: DevQp {
            qpn,
            qp_type: attr.qp_type,
            cap,
            send_cqn: send_cq.index(),
            // An initiator's receive CQ is its send CQ: it has no receive completions, and
            // the device failing flushes nothing there.
            recv_cqn: recv_cq.map_or(send_cq.index(), |cq| cq.index()),
            sq_sig_all: attr.sq_sig_all,
            queues,
        },
    };
    if dev.config.layout.rings().is_some() && !gsi {
        let cqs = (send_cq, recv_cq);
        if let Some(udata) = udata {
            let (qpn, rings) = rings::create_qp(pd, attr, &cap, cqs, NewRings::User(udata))?;
            return Ok(qp(qpn, Queues::Guest(rings.ok_or(EINVAL)?)));
        }
        let k = kernel_queues(dev, &cap, !has_rq(attr))?;
        let kernel = NewRings::Kernel(&k.sq, k.rq.as_deref());
        let (qpn, _) = rings::create_qp(pd, attr, &cap, cqs, kernel)?;
        return Ok(qp(qpn, Queues::Kernel(k)));
    }
    // Shared receive queues come with rings: only QPs with rings take from them.
    if attr.srq.is_some() {
        return Err(EOPNOTSUPP);
    }
    let recv_cq = recv_cq.ok_or(EINVAL)?;
    // The device completes the requests of a user QP with virtqueues into CQs with
    // virtqueues; the GSI QP's may go to kernel CQs with rings.
    if udata.is_some() && (send_cq.guest.is_some() || recv_cq.guest.is_some()) {
        return Err(EINVAL);
    }
    let user = match udata.as_deref_mut() {
        Some(udata) => {
            // No request data is defined.
            udata.read_request(&mut [])?;
            let uctx = pd.ucontext().ok_or(EINVAL)?;
            Some(UserRings {
                sq: Uring::new(uctx, cap.max_send_wr)?,
                rq: Uring::new(uctx, cap.max_recv_wr)?,
            })
        }
        None => None,
    };
    let sq = KBox::pin_init(
        new_spinlock_irq!(buffers::<SqBuf>(cap.max_send_wr)?, "virtio_rdma_sq"),
        GFP_KERNEL,
    )?;
    let rq = KBox::pin_init(
        new_spinlock_irq!(buffers::<RqBuf>(cap.max_recv_wr)?, "virtio_rdma_rq"),
        GFP_KERNEL,
    )?;
    let sq_wrs = wr_table(cap.max_send_wr, Queue::Send)?;
    let rq_wrs = wr_table(cap.max_recv_wr, Queue::Recv)?;
    let rsp: abi::RspCreateQp = dev.ctrl.exec(
        abi::cmd::CREATE_QP,
        &create_cmd(pd, attr, &cap, send_cq, Some(recv_cq)),
    )?;
    let qpn = rsp.qpn.get();
    let layout = &dev.config.layout;
    let (Some(sq_vq), Some(rq_vq)) = (layout.sq(qpn), layout.rq(qpn)) else {
        dev_err!(dev.as_ref(), "CREATE_QP returned QP number {}\n", qpn);
        // Not destroyed: the number may be a live QP's with rings.
        return Err(EPROTO);
    };
    // Before anything of QP `qpn` is touched: a device that names a live QP's number again
    // must not make the driver destroy that QP (or take its elements back) on the way out.
    let qps = &dev.ctrl.queues().handler().get_ref().qps;
    if qps.reserve(qpn).is_err() {
        dev_err!(
            dev.as_ref(),
            "CREATE_QP returned QP {}, which is in use\n",
            qpn
        );
        return Err(EPROTO);
    }
    if gsi != (qpn == GSI_QPN) {
        dev_err!(
            dev.as_ref(),
            "CREATE_QP returned QP number {} for type {}\n",
            qpn,
            attr.qp_type
        );
        destroy_on_device(dev, qpn);
        qps.release(qpn);
        return Err(EPROTO);
    }
    if let (Some(udata), Some(rings)) = (udata, &user) {
        let answer = rings.sq.describe().and_then(|sq| {
            let rq = rings.rq.describe()?;
            udata.write_response(abi::CreateQpResp { sq, rq }.as_bytes())
        });
        if let Err(e) = answer {
            destroy_on_device(dev, qpn);
            qps.release(qpn);
            return Err(e);
        }
    }
    Ok(qp(
        qpn,
        Queues::Virtqueues(VqQueues {
            sq_vq,
            rq_vq,
            sq,
            rq,
            sq_wrs,
            rq_wrs,
            user,
        }),
    ))
}

/// Creates an XRC target QP of `xrcd`: numbered as a ring QP, with no queues, CQs or PD.
pub(crate) fn create_xrc_tgt(
    xrcd: &rdma::Xrcd<RdmaDev<'_>>,
    attr: &QpInitAttr,
) -> Result<NewQp<DevQp>> {
    let dev = xrcd.device();
    if attr.qp_type != bindings::ib_qp_type_IB_QPT_XRC_TGT || attr.create_flags != 0 {
        return Err(EINVAL);
    }
    let cmd = abi::CmdCreateXrcTgtQp {
        xrcdn: xrcd.xrcdn.into(),
        reserved: 0.into(),
    };
    let rsp: abi::RspCreateQp = dev.ctrl.exec(abi::cmd::CREATE_XRC_TGT_QP, &cmd)?;
    let qpn = rsp.qpn.get();
    rings::claim_ring_qpn(dev, qpn, "CREATE_XRC_TGT_QP")?;
    let cap = QpCap::default();
    Ok(NewQp {
        qpn,
        cap,
        data: DevQp {
            qpn,
            qp_type: attr.qp_type,
            cap,
            send_cqn: 0,
            recv_cqn: 0,
            sq_sig_all: false,
            queues: Queues::Target { xrcdn: xrcd.xrcdn },
        },
    })
}

/// Allocates the rings and tables of a kernel QP of capabilities `cap`.
fn kernel_queues(dev: &Device<'_>, cap: &QpCap, srq: bool) -> Result<KernelQueues> {
    let rings = rings::alloc_qp_rings(dev, cap, srq)?;
    let sq = WorkRing::new(rings.sq, KBox::new(SqBuf::new_zeroed(), GFP_KERNEL)?);
    let rq = match rings.rq {
        Some(rq) => {
            let rq = WorkRing::new(rq, KBox::new(RqBuf::new_zeroed(), GFP_KERNEL)?);
            Some(KBox::pin_init(
                new_spinlock_irq!(rq, "virtio_rdma_rq_ring"),
                GFP_KERNEL,
            )?)
        }
        None => None,
    };
    Ok(KernelQueues {
        sq: KBox::pin_init(new_spinlock_irq!(sq, "virtio_rdma_sq_ring"), GFP_KERNEL)?,
        rq,
        sq_wrs: wr_table(cap.max_send_wr, Queue::Send)?,
        rq_wrs: wr_table(cap.max_recv_wr, Queue::Recv)?,
    })
}

/// Tells the device to destroy QP `qpn`; returns whether the device confirmed that it has no
/// such QP any more (it destroyed it, or never had it).
pub(crate) fn destroy_on_device(dev: &Device<'_>, qpn: u32) -> bool {
    let cmd = abi::CmdDestroyQp {
        qpn: qpn.into(),
        reserved: 0.into(),
    };
    match dev.ctrl.exec::<_, ()>(abi::cmd::DESTROY_QP, &cmd) {
        Ok(()) | Err(ENOENT) => true,
        Err(e) => {
            dev_err!(dev.as_ref(), "DESTROY_QP {}: {:?}\n", qpn, e);
            false
        }
    }
}

fn queue<'d>(dev: &'d Device<'_>, index: u32) -> Result<&'d Virtqueue> {
    dev.ctrl.queues().get(index as usize).ok_or(EPROTO)
}

/// Puts a buffer back on its free list, which has room for every buffer of the QP (it was
/// allocated with that capacity), so this never allocates.
fn give_back<B>(free: &mut KVec<KBox<B>>, buf: KBox<B>) {
    // A full list would mean more buffers than were allocated: impossible, so dropping is fine.
    let _ = free.push_within_capacity(buf);
}

/// Takes back the buffers the device has finished with.
fn reclaim<B: DmaBuf>(vq: &Virtqueue, free: &mut KVec<KBox<B>>) -> Result<usize> {
    let mut q = vq.lock::<B>()?;
    let mut n = 0;
    while let Some((buf, _)) = q.get_buf() {
        give_back(free, buf);
        n += 1;
    }
    Ok(n)
}

/// Destroys a QP: the device gives back every element of its queues, which are freed. The
/// rings of a QP with rings in guest memory go back to its process once the device confirmed;
/// otherwise they stay pinned (`rings.rs`).
pub(crate) fn destroy(qp: &Qp<'_>) {
    let dev = qp.device();
    let confirmed = destroy_on_device(dev, qp.qpn);
    let vqs = match &qp.queues {
        Queues::Virtqueues(vqs) => vqs,
        Queues::Guest(rings) => {
            if confirmed {
                rings.release();
            }
            return;
        }
        Queues::Kernel(k) => {
            if confirmed {
                k.sq.lock().ring().release();
                if let Some(rq) = &k.rq {
                    rq.lock().ring().release();
                }
            }
            return;
        }
        Queues::Target { .. } => return,
    };
    for (index, lent) in [(vqs.sq_vq, true), (vqs.rq_vq, false)] {
        let Ok(vq) = queue(dev, index) else {
            continue;
        };
        let back = if lent {
            let mut free = vqs.sq.lock();
            reclaim(vq, &mut free).map(|_| free.len() as u32)
        } else {
            let mut free = vqs.rq.lock();
            reclaim(vq, &mut free).map(|_| free.len() as u32)
        };
        let total = if lent {
            qp.cap.max_send_wr
        } else {
            qp.cap.max_recv_wr
        };
        if let Ok(back) = back {
            // A stopped device gives nothing back; its queues are emptied when they go.
            if back < total && !dev.health.stopped() {
                // The rest stay lent to the device until it is reset (then they are freed).
                dev_warn!(
                    dev.as_ref(),
                    "QP {}: the device kept {} of {} elements after DESTROY_QP\n",
                    qp.qpn,
                    total - back,
                    total
                );
            }
        }
    }
}

/// The device's form of the attributes of `attr` that `mask` names; the others are zero
/// (consumers need not initialise them: ib_mad, for one, passes unzeroed memory).
fn wire_attr(attr: &QpAttr, mask: u32) -> Result<abi::QpAttr> {
    let a = attr.raw();
    let has = |bit: u32| mask & bit != 0;
    let mut w = abi::QpAttr::new_zeroed();
    if has(bindings::ib_qp_attr_mask_IB_QP_STATE) {
        w.qp_state = u8::try_from(a.qp_state).map_err(|_| EINVAL)?;
    }
    if has(bindings::ib_qp_attr_mask_IB_QP_CUR_STATE) {
        w.cur_qp_state = u8::try_from(a.cur_qp_state).map_err(|_| EINVAL)?;
    }
    if has(bindings::ib_qp_attr_mask_IB_QP_PATH_MTU) {
        w.path_mtu = u8::try_from(a.path_mtu).map_err(|_| EINVAL)?;
    }
    if has(bindings::ib_qp_attr_mask_IB_QP_PATH_MIG_STATE) {
        w.path_mig_state = u8::try_from(a.path_mig_state).map_err(|_| EINVAL)?;
    }
    if has(bindings::ib_qp_attr_mask_IB_QP_QKEY) {
        w.qkey.set(a.qkey);
    }
    if has(bindings::ib_qp_attr_mask_IB_QP_RQ_PSN) {
        w.rq_psn.set(a.rq_psn);
    }
    if has(bindings::ib_qp_attr_mask_IB_QP_SQ_PSN) {
        w.sq_psn.set(a.sq_psn);
    }
    if has(bindings::ib_qp_attr_mask_IB_QP_DEST_QPN) {
        w.dest_qp_num.set(a.dest_qp_num);
    }
    if has(bindings::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS) {
        // Optional flags (relaxed ordering) are hints the device does not define, as for MRs.
        let access = u32::try_from(a.qp_access_flags).map_err(|_| EINVAL)?;
        w.qp_access_flags
            .set(access & !bindings::ib_access_flags_IB_ACCESS_OPTIONAL);
    }
    if has(bindings::ib_qp_attr_mask_IB_QP_PKEY_INDEX) {
        w.pkey_index.set(a.pkey_index);
    }
    if has(bindings::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY) {
        w.en_sqd_async_notify = a.en_sqd_async_notify;
    }
    if has(bindings::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC) {
        w.max_rd_atomic = a.max_rd_atomic;
    }
    if has(bindings::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC) {
        w.max_dest_rd_atomic = a.max_dest_rd_atomic;
    }
    if has(bindings::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER) {
        w.min_rnr_timer = a.min_rnr_timer;
    }
    if has(bindings::ib_qp_attr_mask_IB_QP_PORT) {
        w.port_num = u8::try_from(a.port_num).map_err(|_| EINVAL)?;
    }
    if has(bindings::ib_qp_attr_mask_IB_QP_TIMEOUT) {
        w.timeout = a.timeout;
    }
    if has(bindings::ib_qp_attr_mask_IB_QP_RETRY_CNT) {
        w.retry_cnt = a.retry_cnt;
    }
    if has(bindings::ib_qp_attr_mask_IB_QP_RNR_RETRY) {
        w.rnr_retry = a.rnr_retry;
    }
    if has(bindings::ib_qp_attr_mask_IB_QP_AV) {
        w.ah_attr = ah::wire_av(&attr.ah().ok_or(EINVAL)?)?;
    }
    Ok(w)
}

/// Modifies a QP. Moving to RESET discards its outstanding requests (the device drops them
/// without completions), so their table entries go too. On a stopped device (`health.rs`),
/// which holds no QP, moving one to ERR or RESET (as consumers do before destroying it) is
/// done without the device; other changes fail.
pub(crate) fn modify(qp: &Qp<'_>, attr: &QpAttr, mask: u32) -> Result {
    let wire = wire_attr(attr, mask)?;
    let state = (mask & bindings::ib_qp_attr_mask_IB_QP_STATE != 0).then_some(attr.raw().qp_state);
    let ending = matches!(
        state,
        Some(bindings::ib_qp_state_IB_QPS_ERR | bindings::ib_qp_state_IB_QPS_RESET)
    );
    if !(ending && qp.device().health.stopped()) {
        qp.device().ctrl.exec::<_, ()>(
            abi::cmd::MODIFY_QP,
            &abi::CmdModifyQp {
                qpn: qp.qpn.into(),
                attr_mask: mask.into(),
                attr: wire,
            },
        )?;
    }
    if state == Some(bindings::ib_qp_state_IB_QPS_RESET) {
        for queue in [Queue::Send, Queue::Recv] {
            if let Some(wrs) = qp.wrs(queue) {
                wrs.lock().reset();
            }
        }
    }
    Ok(())
}

/// Queries a QP.
pub(crate) fn query(
    qp: &Qp<'_>,
    attr: &mut bindings::ib_qp_attr,
    init: &mut bindings::ib_qp_init_attr,
) -> Result {
    let rsp: abi::RspQueryQp = qp.device().ctrl.exec(
        abi::cmd::QUERY_QP,
        &abi::CmdQueryQp {
            qpn: qp.qpn.into(),
            attr_mask: 0.into(),
        },
    )?;
    let w = &rsp.attr;
    attr.qp_state = w.qp_state.into();
    attr.cur_qp_state = w.cur_qp_state.into();
    attr.path_mtu = w.path_mtu.into();
    attr.path_mig_state = w.path_mig_state.into();
    attr.qkey = w.qkey.get();
    attr.rq_psn = w.rq_psn.get();
    attr.sq_psn = w.sq_psn.get();
    attr.dest_qp_num = w.dest_qp_num.get();
    attr.qp_access_flags = w.qp_access_flags.get() as i32;
    attr.pkey_index = w.pkey_index.get();
    attr.sq_draining = w.sq_draining;
    attr.max_rd_atomic = w.max_rd_atomic;
    attr.max_dest_rd_atomic = w.max_dest_rd_atomic;
    attr.min_rnr_timer = w.min_rnr_timer;
    attr.port_num = w.port_num.into();
    attr.timeout = w.timeout;
    attr.retry_cnt = w.retry_cnt;
    attr.rnr_retry = w.rnr_retry;
    // The primary path as the device keeps it: a QP restated from its query (rdma-core's
    // tests do so after a rereg) needs it for RTR.
    if let Some(av) = ah::from_wire(&w.ah_attr)? {
        av.write_attr(&mut attr.ah_attr);
    }
    // The queue sizes are the driver's (the device's echo of them is not needed).
    let cap = bindings::ib_qp_cap {
        max_send_wr: qp.cap.max_send_wr,
        max_recv_wr: qp.cap.max_recv_wr,
        max_send_sge: qp.cap.max_send_sge,
        max_recv_sge: qp.cap.max_recv_sge,
        max_inline_data: qp.cap.max_inline_data,
        max_rdma_ctxs: 0,
    };
    attr.cap = cap;
    init.cap = cap;
    init.qp_type = qp.qp_type;
    Ok(())
}

/// Encodes send request `wr` of `qp` into `buf`; returns the element's length.
fn encode_send_wr<'a>(qp: &Qp<'a>, wr: &SendWr<'_, RdmaDev<'a>>, buf: &mut SqBuf) -> Result<usize> {
    let ud_qp = matches!(
        qp.qp_type,
        bindings::ib_qp_type_IB_QPT_UD | bindings::ib_qp_type_IB_QPT_GSI
    );
    let ud = if ud_qp {
        let (ah, remote_qpn, remote_qkey) = wr.ud().ok_or(EINVAL)?;
        Some((remote_qpn, remote_qkey, ah.av))
    } else {
        None
    };
    let reg = match wr.reg() {
        Some((mr, key, access)) => Some(mr::reg_element(mr, key, access)?),
        None => None,
    };
    let desc = SendDesc {
        wr_id: wr.wr_id(),
        opcode: wr.opcode(),
        send_flags: wr.send_flags(),
        ex: wr.ex(),
        op: wr.op(),
        ud,
        reg,
    };
    if wr.send_flags() & bindings::ib_send_flags_IB_SEND_INLINE as u32 != 0 {
        wqe::encode_send_inline(buf, &desc, qp.cap.max_inline_data, |room| {
            wr.copy_inline(room)
        })
    } else {
        wr.sges()
            .and_then(|sges| wqe::encode_send(buf, &desc, sges, qp.cap.max_send_sge))
    }
}

/// Posts send requests.
pub(crate) fn post_send<'a>(qp: &Qp<'a>, wrs: &mut SendWrs<'_, RdmaDev<'a>>) -> Result {
    let dev = qp.device();
    if dev.health.failed() {
        let sig_all = qp.sq_sig_all;
        return post_failed(
            qp,
            Queue::Send,
            wrs.map(|wr| Posted {
                wr_id: wr.wr_id(),
                len: 0,
                opcode: wr_table::wc_opcode(wr.opcode()),
                signaled: sig_all
                    || wr.send_flags() & bindings::ib_send_flags_IB_SEND_SIGNALED as u32 != 0,
            }),
        );
    }
    let encode = |wr: &SendWr<'_, RdmaDev<'a>>, buf: &mut SqBuf| encode_send_wr(qp, wr, buf);
    match &qp.queues {
        Queues::Kernel(k) => post_to_ring(dev, &k.sq, (&k.sq_wrs, qp.sq_sig_all), wrs, encode),
        Queues::Virtqueues(v) => {
            post_to_vq(dev, v.sq_vq, &v.sq, (&v.sq_wrs, qp.sq_sig_all), wrs, encode)
        }
        // A process posts to its own rings; a target QP sends nothing.
        Queues::Guest(_) | Queues::Target { .. } => Err(EINVAL),
    }
}

/// Posts receive requests.
pub(crate) fn post_recv(qp: &Qp<'_>, wrs: &mut RecvWrs<'_>) -> Result {
    let dev = qp.device();
    if dev.health.failed() {
        return post_failed(
            qp,
            Queue::Recv,
            wrs.map(|wr| Posted {
                wr_id: wr.wr_id(),
                len: 0,
                opcode: bindings::ib_wc_opcode_IB_WC_RECV as u8,
                signaled: true,
            }),
        );
    }
    let max_sge = qp.cap.max_recv_sge;
    let encode = |wr: &RecvWr<'_>, buf: &mut RqBuf| {
        wr.sges()
            .and_then(|sges| wqe::encode_recv(buf, wr.wr_id(), sges, max_sge))
    };
    match &qp.queues {
        // A QP with a shared receive queue takes its receives from there.
        Queues::Kernel(k) => {
            let rq = k.rq.as_ref().ok_or(EINVAL)?;
            post_to_ring(dev, rq, (&k.rq_wrs, false), wrs, encode)
        }
        Queues::Virtqueues(v) => post_to_vq(dev, v.rq_vq, &v.rq, (&v.rq_wrs, false), wrs, encode),
        // A process posts to its own rings; a target QP takes from its domain's SRQs.
        Queues::Guest(_) | Queues::Target { .. } => Err(EINVAL),
    }
}

/// Posts `wrs` to a kernel QP's work `ring`: each is encoded (`encode` returns the element's
/// length) into the ring's scratch element, recorded in the work queue's `table` (with
/// whether the QP signals every request) and copied into the next slot; the batch is then
/// published. Stops at the first request that fails, with its error.
pub(crate) fn post_to_ring<B: IntoBytes + Immutable + WorkElement, W, T: PostTable>(
    dev: &Device<'_>,
    ring: &SpinLockIrq<WorkRing<B>>,
    (table, sig_all): (&SpinLockIrq<T>, bool),
    wrs: impl Iterator<Item = W>,
    mut encode: impl FnMut(&W, &mut B) -> Result<usize>,
) -> Result {
    let mut ring = ring.lock();
    let mut result = Ok(());
    for wr in wrs {
        let len = encode(&wr, &mut ring.scratch)
            .and_then(|len| ring.can_push(len).map(|()| len))
            .and_then(|len| record(table, &mut *ring.scratch, sig_all).map(|()| len));
        if let Err(e) = len.and_then(|len| ring.push(len).inspect_err(|_| table.lock().unpost())) {
            result = Err(e);
            break;
        }
    }
    publish(dev, ring.publish());
    result
}

/// Posts `wrs` to the virtqueue `index`: each is encoded into an element buffer taken from
/// `free` and recorded as by [`post_to_ring`], then lent to the device; one kick at the end.
fn post_to_vq<B: DmaBuf + WorkElement, W>(
    dev: &Device<'_>,
    index: u32,
    free: &SpinLockIrq<KVec<KBox<B>>>,
    (table, sig_all): (&SpinLockIrq<WrTable>, bool),
    wrs: impl Iterator<Item = W>,
    mut encode: impl FnMut(&W, &mut B) -> Result<usize>,
) -> Result {
    let vq = queue(dev, index)?;
    let mut free = free.lock();
    reclaim(vq, &mut free)?;
    let mut q = vq.lock::<B>()?;
    let mut result = Ok(());
    let mut added = false;
    for wr in wrs {
        let Some(mut buf) = free.pop() else {
            result = Err(ENOMEM);
            break;
        };
        let len =
            encode(&wr, &mut buf).and_then(|len| record(table, &mut *buf, sig_all).map(|()| len));
        let len = match len {
            Ok(len) => len,
            Err(e) => {
                give_back(&mut free, buf);
                result = Err(e);
                break;
            }
        };
        if let Err((e, buf)) = q.add(buf, len, 0) {
            table.lock().unpost();
            give_back(&mut free, buf);
            result = Err(e);
            break;
        }
        added = true;
    }
    let notify = added && q.kick_prepare();
    drop(q);
    drop(free);
    if notify {
        vq.notify();
    }
    result
}

/// After a kernel QP's work ring published its new elements: kicks the notification queue if
/// the device asked for it (`notify`). The requests are posted whatever the kick does: a kick
/// fails only when the device is gone, and then they complete flushed (`health.rs`).
pub(crate) fn publish(dev: &Device<'_>, notify: bool) {
    if notify {
        let _ = kick_notify(dev);
    }
}

/// Kicks the notification queue: the device looks at every work ring that has work.
pub(crate) fn kick_notify(dev: &Device<'_>) -> Result {
    let index = dev.config.layout.notify().ok_or(EINVAL)?;
    if queue(dev, index)?.notify() {
        Ok(())
    } else {
        Err(EIO)
    }
}

/// Posts to a QP of a failed device: the requests only go into the queue's table, from which
/// the CQ's next poll flushes them (`cq.rs`); its consumer is told to poll if it armed the CQ.
/// This is how `ib_drain_qp` ends on a failed device.
fn post_failed(qp: &Qp<'_>, queue: Queue, requests: impl Iterator<Item = Posted>) -> Result {
    let mut result = Ok(());
    {
        let mut wrs = qp.wrs(queue).ok_or(EINVAL)?.lock();
        for posted in requests {
            if wrs.post(posted).is_none() {
                result = Err(ENOMEM);
                break;
            }
        }
    }
    let cqs = &qp.device().ctrl.queues().handler().get_ref().cqs;
    cq::kick(cqs, qp.cqn(queue == Queue::Send));
    result
}

/// The doorbell of a user QP: lends the device the elements its process added to the ring of
/// `wq` since the last doorbell; for a QP with rings in guest memory, which the device reads
/// itself, only kicks the notification queue (the device asked for it in the ring's record).
/// [`EIO`] once the device failed; once it stopped, the requests on a ring in guest memory
/// complete flushed (the driver set NOTIFY in every such ring when it stopped, so that each post
/// comes here).
pub(crate) fn ring_doorbell(qp: &Qp<'_>, wq: WorkQueue) -> Result {
    let dev = qp.device();
    if matches!(qp.queues, Queues::Guest(_)) && dev.health.stopped() {
        let cqs = &dev.ctrl.queues().handler().get_ref().cqs;
        cq::flush_user(cqs, qp.cqn(matches!(wq, WorkQueue::Send)));
        return Err(EIO);
    }
    dev.health.check()?;
    let vqs = match &qp.queues {
        Queues::Virtqueues(vqs) => vqs,
        Queues::Guest(_) => return kick_notify(dev),
        // Kernel QPs have no doorbell system call, target QPs no queues.
        Queues::Kernel(_) | Queues::Target { .. } => return Err(EINVAL),
    };
    let rings = vqs.user.as_ref().ok_or(EINVAL)?;
    match wq {
        WorkQueue::Send => {
            let ud = qp.qp_type == bindings::ib_qp_type_IB_QPT_UD;
            let mut free = vqs.sq.lock();
            let wrs = (&*vqs.sq_wrs, qp.sq_sig_all);
            lend_from_ring(queue(dev, vqs.sq_vq)?, &mut free, &rings.sq, wrs, |elem| {
                wqe::check_user_send(elem, &qp.cap, ud)
            })
        }
        WorkQueue::Recv => {
            let mut free = vqs.rq.lock();
            let wrs = (&*vqs.rq_wrs, false);
            lend_from_ring(queue(dev, vqs.rq_vq)?, &mut free, &rings.rq, wrs, |elem| {
                wqe::check_user_recv(elem, &qp.cap)
            })
        }
    }
}

/// Moves the pending elements of `ring` into free buffers, each checked by `check` (which
/// returns its length) and recorded in the work queue's table `wrs` (with whether the QP
/// signals every request), and lends them to `vq`. The caller holds the work queue's lock
/// (`free`). An element `check` refuses is skipped and ends the call with its error.
fn lend_from_ring<B: DmaBuf + IntoBytes + WorkElement>(
    vq: &Virtqueue,
    free: &mut KVec<KBox<B>>,
    ring: &Uring<B>,
    (wrs, sig_all): (&SpinLockIrq<WrTable>, bool),
    check: impl Fn(&B) -> Result<usize>,
) -> Result {
    reclaim(vq, free)?;
    let (mut next, count) = ring.pending()?;
    let end = next.wrapping_add(count);
    let mut q = vq.lock::<B>()?;
    let mut result = Ok(());
    let mut added = false;
    while next != end {
        // As many elements as the QP may have outstanding are lent already.
        let Some(mut buf) = free.pop() else {
            result = Err(ENOMEM);
            break;
        };
        let len = match ring.read(next, &mut buf).and_then(|()| check(&buf)) {
            Ok(len) => len,
            Err(e) => {
                give_back(free, buf);
                next = next.wrapping_add(1);
                result = Err(e);
                break;
            }
        };
        // A full table (requests not yet completed) leaves the element for the next doorbell.
        if let Err(e) = record(wrs, &mut *buf, sig_all) {
            give_back(free, buf);
            result = Err(e);
            break;
        }
        if let Err((e, buf)) = q.add(buf, len, 0) {
            wrs.lock().unpost();
            give_back(free, buf);
            result = Err(e);
            break;
        }
        next = next.wrapping_add(1);
        added = true;
    }
    let notify = added && q.kick_prepare();
    drop(q);
    if notify {
        vq.notify();
    }
    ring.set_consumer(next).and(result)
}

#[kunit_tests(virtio_rdma_qp)]
mod tests {
    use super::*;

    fn init(qp_type: u32, srq: Option<u32>) -> QpInitAttr {
        QpInitAttr {
            qp_type,
            cap: QpCap {
                max_send_wr: 16,
                max_recv_wr: 8,
                max_send_sge: 2,
                max_recv_sge: 2,
                max_inline_data: 0,
            },
            sq_sig_all: false,
            create_flags: 0,
            srq,
            port_num: 1,
        }
    }

    fn limits() -> QpCap {
        QpCap {
            max_send_wr: 64,
            max_recv_wr: 64,
            max_send_sge: 4,
            max_recv_sge: 4,
            max_inline_data: 64,
        }
    }

    #[test]
    fn xrc_initiator_has_no_receive_queue() {
        let ini = init(bindings::ib_qp_type_IB_QPT_XRC_INI, None);
        assert!(!has_rq(&ini));
        let cap = check_init(&ini, &limits());
        assert!(cap.is_ok_and(|c| c.max_recv_wr == 0 && c.max_recv_sge == 0 && c.max_send_wr == 16));
        // Neither has a QP with an SRQ; an RC QP without one has its own.
        assert!(!has_rq(&init(bindings::ib_qp_type_IB_QPT_RC, Some(1))));
        let rc = init(bindings::ib_qp_type_IB_QPT_RC, None);
        assert!(has_rq(&rc));
        assert!(check_init(&rc, &limits()).is_ok_and(|c| c.max_recv_wr == 8));
    }

    #[test]
    fn target_qps_are_not_made_by_create_qp() {
        // CREATE_XRC_TGT_QP makes them (`create_xrc_tgt`): create_qp refuses the type.
        let tgt = init(bindings::ib_qp_type_IB_QPT_XRC_TGT, None);
        assert_eq!(check_init(&tgt, &limits()).err(), Some(EOPNOTSUPP));
        // The GSI QP always has its own receive queue.
        let gsi = init(bindings::ib_qp_type_IB_QPT_GSI, Some(1));
        assert_eq!(check_init(&gsi, &limits()).err(), Some(EINVAL));
    }
}
