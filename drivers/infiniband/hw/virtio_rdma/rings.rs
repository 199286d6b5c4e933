// SPDX-License-Identifier: GPL-2.0

//! Queues in guest memory (`VIRTIO_RDMA_F_RINGS`): the rings of CQs and QPs.
//!
//! With the feature, every CQ and QP but the GSI QP has rings in guest memory. A process
//! allocates the rings of its CQs and QPs in its own memory and names them when it creates
//! them (`struct virtio_rdma_create_cq_cmd`, `struct virtio_rdma_create_qp_cmd`); the driver
//! checks their geometry and pins them writable (the device writes completions and indices
//! into them). The rings of kernel CQs and QPs are DMA-coherent memory the driver allocates
//! and uses itself (`kernel_rings.rs`). Either way the driver hands the device their page
//! table with CREATE_CQ_RING / CREATE_QP_RING and keeps both until the device has confirmed
//! that it destroyed the queue: a ring the device may still use stays allocated until the
//! device is reset ([`GuestRing`], `kept.rs`). From then on the device reads work requests
//! from the rings and writes completions into them. A process's doorbell only kicks the
//! notification queue (`qp.rs`), and the completion events of armed CQs come on the
//! completion-event queues (`events.rs`).
//!
//! A QP with rings reports only to CQs with rings; the GSI QP, which keeps its virtqueues,
//! reports to kernel CQs with rings too.

use core::sync::atomic::{fence, AtomicBool, Ordering};

use kernel::{
    bindings, new_spinlock_irq,
    prelude::*,
    rdma::{self, CqInitAttr, DmaTable, QpCap, QpInitAttr, SharedMem, Udata, Umem},
    sync::{Arc, SpinLockIrq},
};
use zerocopy::{FromZeros, IntoBytes};

use crate::{
    abi, cq, ctrl,
    device::RdmaDev,
    kept::Kept,
    kernel_rings::{CompRing, WorkRing},
    mr, qp,
    wqe::{RqBuf, SqBuf},
    wr_table::{self, Posted},
};

type Device<'a> = rdma::Device<RdmaDev<'a>>;

const PAGE_SIZE: u32 = abi::PAGE_SIZE;
const SQ_REQ_LEN: u32 = core::mem::size_of::<abi::SqReq>() as u32;
const RQ_REQ_LEN: u32 = core::mem::size_of::<abi::RqReq>() as u32;
const SGE_LEN: u32 = core::mem::size_of::<abi::Sge>() as u32;
/// The stride of a completion ring: one `struct virtio_rdma_ring_cqe` a slot.
const CQE_STRIDE: u32 = core::mem::size_of::<abi::RingCqe>() as u32;

/// Most bytes a work ring's slot may take: a page, far more than any element the driver's
/// limits allow (`wqe::MAX_SGE` entries or `wqe::MAX_INLINE` bytes after the header).
const MAX_STRIDE: u32 = PAGE_SIZE;

/// The bytes of a ring of `depth` slots of `stride` bytes: the record, then the slots.
pub(crate) fn ring_len(depth: u32, stride: u32) -> u64 {
    u64::from(abi::RING_SLOTS) + u64::from(depth) * u64::from(stride)
}

/// Checks a ring's address: the device reads a ring page by page from the first byte of the
/// first, so it starts on a page.
pub(crate) fn check_addr(addr: u64) -> Result {
    if addr % u64::from(PAGE_SIZE) != 0 {
        return Err(EINVAL);
    }
    Ok(())
}

/// Checks a ring's depth: a power of two, at least `min` (what the queue must hold), at most
/// the device's limit `max` rounded up to a power of two.
pub(crate) fn check_depth(depth: u32, min: u32, max: u32) -> Result {
    let limit = max.checked_next_power_of_two().unwrap_or(1 << 31);
    if !depth.is_power_of_two() || depth < min || depth > limit {
        return Err(EINVAL);
    }
    Ok(())
}

/// The smallest slot of a send ring: the header, then the most SGEs or inline data `cap`
/// allows.
pub(crate) fn sq_stride_min(cap: &QpCap) -> u32 {
    let data = cap
        .max_send_sge
        .saturating_mul(SGE_LEN)
        .max(cap.max_inline_data);
    SQ_REQ_LEN.saturating_add(data)
}

/// The smallest slot of a receive ring: the header, then the most SGEs `cap` allows.
pub(crate) fn rq_stride_min(cap: &QpCap) -> u32 {
    RQ_REQ_LEN.saturating_add(cap.max_recv_sge.saturating_mul(SGE_LEN))
}

/// Checks a work ring's stride: 8-aligned (the elements' fields are naturally aligned), at
/// least `min`, at most [`MAX_STRIDE`].
pub(crate) fn check_stride(stride: u32, min: u32) -> Result {
    if stride % 8 != 0 || stride < min || stride > MAX_STRIDE {
        return Err(EINVAL);
    }
    Ok(())
}

/// Checks the ring a process gives a CQ of at least `cqe` completions, on a device of at most
/// `max_cqe`.
pub(crate) fn check_cq_cmd(cmd: &abi::CreateCqCmd, cqe: u32, max_cqe: u32) -> Result {
    if cmd.reserved != 0 {
        return Err(EINVAL);
    }
    check_addr(cmd.addr)?;
    check_depth(cmd.depth, cqe, max_cqe)
}

/// Checks the rings a process gives a QP of capabilities `cap` (checked already), on a device
/// of at most `max_qp_wr` requests a queue. A QP with a shared receive queue (`srq`) has no
/// receive ring: its description is all zero.
pub(crate) fn check_qp_cmd(
    cmd: &abi::CreateQpCmd,
    cap: &QpCap,
    max_qp_wr: u32,
    has_rq: bool,
) -> Result {
    check_addr(cmd.sq_addr)?;
    check_depth(cmd.sq_depth, cap.max_send_wr, max_qp_wr)?;
    check_stride(cmd.sq_stride, sq_stride_min(cap))?;
    if !has_rq {
        if cmd.rq_addr != 0 || cmd.rq_depth != 0 || cmd.rq_stride != 0 {
            return Err(EINVAL);
        }
        return Ok(());
    }
    check_addr(cmd.rq_addr)?;
    check_depth(cmd.rq_depth, cap.max_recv_wr, max_qp_wr)?;
    check_stride(cmd.rq_stride, rq_stride_min(cap))
}

/// Checks the ring a process gives an SRQ of `max_wr` receives of `max_sge` entries (both
/// checked already), on a device of at most `max_srq_wr` receives an SRQ.
pub(crate) fn check_srq_cmd(
    cmd: &abi::CreateSrqCmd,
    max_wr: u32,
    max_sge: u32,
    max_srq_wr: u32,
) -> Result {
    if cmd.reserved != 0 || cmd.reserved1 != 0 {
        return Err(EINVAL);
    }
    check_addr(cmd.addr)?;
    check_depth(cmd.depth, max_wr, max_srq_wr)?;
    check_stride(cmd.stride, srq_stride_min(max_sge))
}

/// The smallest slot of an SRQ's ring: a receive of `max_sge` entries.
pub(crate) fn srq_stride_min(max_sge: u32) -> u32 {
    RQ_REQ_LEN.saturating_add(max_sge.saturating_mul(SGE_LEN))
}

/// What holds a ring's bytes.
pub(crate) enum Backing {
    /// A process's pages, pinned.
    User(Umem),
    /// The kernel's own memory, shared with the device (`kernel_rings.rs`).
    Kernel(SharedMem),
}

/// A ring in guest memory: a process's, pinned, or the kernel's own; with the page table
/// through which the device uses it.
///
/// Once lent to the device ([`GuestRing::lend`]) it stays allocated (pinned), and its table
/// too, until [`GuestRing::release`] says that the device does not use it any more; dropped
/// before that, both go to the device's [`KeptRing`]s until the device is reset (as a
/// deregistration that fails keeps an MR's pages, `mr.rs`).
pub(crate) struct GuestRing {
    /// The memory and its table; taken only to be kept.
    mem: Option<KeptRing>,
    /// Where the memory goes if the ring is dropped while lent: the device's list.
    kept: Arc<Kept<KeptRing>>,
    /// The ring as the device knows it.
    wire: abi::Ring,
    /// The device may use the ring.
    lent: AtomicBool,
}

impl GuestRing {
    /// Pins the ring of `depth` slots of `stride` bytes at `addr` (checked already) of the
    /// calling process, writable, and builds its page table. May sleep.
    pub(crate) fn pin(dev: &Device<'_>, addr: u64, depth: u32, stride: u32) -> Result<Self> {
        // Writable: the device writes completions and indices into it.
        let access = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
        let mut umem = Umem::get(dev, addr, ring_len(depth, stride), access)?;
        umem.set_iova(PAGE_SIZE as usize, addr)?;
        let (table, npages) = mr::page_table(dev, &umem)?;
        Ok(Self::new(
            dev,
            Backing::User(umem),
            table,
            npages,
            depth,
            stride,
        ))
    }

    /// Allocates a kernel ring of `depth` slots (a power of two) of `stride` bytes, zeroed,
    /// and builds its page table. May sleep.
    pub(crate) fn alloc(dev: &Device<'_>, depth: u32, stride: u32) -> Result<Self> {
        let len = usize::try_from(ring_len(depth, stride)).map_err(|_| EINVAL)?;
        let npages = len.div_ceil(PAGE_SIZE as usize);
        let mem = SharedMem::new(dev, npages * PAGE_SIZE as usize)?;
        let mut table = DmaTable::new(dev, npages)?;
        let mut page = mem.dma_addr();
        for i in 0..npages {
            table.set(i, page)?;
            page += u64::from(PAGE_SIZE);
        }
        table.sync_for_device();
        let npages = u32::try_from(npages).map_err(|_| EINVAL)?;
        Ok(Self::new(
            dev,
            Backing::Kernel(mem),
            table,
            npages,
            depth,
            stride,
        ))
    }

    fn new(
        dev: &Device<'_>,
        mem: Backing,
        table: DmaTable,
        npages: u32,
        depth: u32,
        stride: u32,
    ) -> Self {
        let wire = abi::Ring {
            pages: table.dma_addr().into(),
            npages: npages.into(),
            depth: depth.into(),
            stride: stride.into(),
            reserved: 0.into(),
        };
        Self {
            mem: Some(KeptRing { mem, _table: table }),
            kept: dev.kept_rings.clone(),
            wire,
            lent: AtomicBool::new(false),
        }
    }

    /// The ring as the device knows it; the device may use it from now on.
    pub(crate) fn lend(&self) -> abi::Ring {
        self.lent.store(true, Ordering::Relaxed);
        self.wire
    }

    /// The device does not use the ring (any more): its memory may go back to the process.
    pub(crate) fn release(&self) {
        self.lent.store(false, Ordering::Relaxed);
    }

    /// After a command that would have had the device use the ring failed with `err`.
    pub(crate) fn refused(&self, err: Error) {
        if !ctrl::may_be_done(err) {
            self.release();
        }
    }

    /// The number of slots.
    pub(crate) fn depth(&self) -> u32 {
        self.wire.depth.get()
    }

    /// The bytes of a slot.
    pub(crate) fn stride(&self) -> u32 {
        self.wire.stride.get()
    }

    /// The memory of a kernel ring.
    pub(crate) fn shared(&self) -> Option<&SharedMem> {
        match &self.mem {
            Some(KeptRing {
                mem: Backing::Kernel(m),
                ..
            }) => Some(m),
            _ => None,
        }
    }

    /// The memory of a kernel ring, to write.
    pub(crate) fn shared_mut(&mut self) -> Option<&mut SharedMem> {
        match &mut self.mem {
            Some(KeptRing {
                mem: Backing::Kernel(m),
                ..
            }) => Some(m),
            _ => None,
        }
    }
}

/// What a stopped device left on a process's rings, which are the driver's then.
impl GuestRing {
    fn umem(&self) -> Result<&Umem> {
        match &self.mem {
            Some(KeptRing {
                mem: Backing::User(umem),
                ..
            }) => Ok(umem),
            _ => Err(EINVAL),
        }
    }

    /// The little-endian word at `off` of a process's ring.
    fn word(&self, off: usize) -> Result<u32> {
        let mut b = [0u8; 4];
        self.umem()?.read(off, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Stores `value` as the little-endian word at `off` of a process's ring.
    fn set_word(&self, off: usize, value: u32) -> Result {
        self.umem()?.write(off, &value.to_le_bytes())
    }

    /// The byte offset of slot `n` (any count).
    fn slot(&self, n: u32) -> usize {
        abi::RING_SLOTS as usize
            + (n & self.depth().wrapping_sub(1)) as usize * self.stride() as usize
    }
}

/// The completion ring of a process's CQ, written by the driver as the device would.
struct FlushCq<'a> {
    ring: &'a GuestRing,
    /// The process's consumer.
    consumer: u32,
    /// The number of the next completion.
    next: u32,
    /// The number of the first completion written here.
    start: u32,
}

impl<'a> FlushCq<'a> {
    /// Finds where the device stopped writing: the first slot from the process's consumer on
    /// whose sequence number is not the one of its completion.
    fn new(ring: &'a GuestRing) -> Result<Self> {
        let consumer = ring.word(CQ_CONSUMER)?;
        let mut next = consumer;
        while next.wrapping_sub(consumer) < ring.depth()
            && ring.word(ring.slot(next) + CQE_SEQ)? == next.wrapping_add(1)
        {
            next = next.wrapping_add(1);
        }
        Ok(Self {
            ring,
            consumer,
            next,
            start: next,
        })
    }

    /// Writes `cqe` as the next completion, its sequence number last; [`ENOSPC`] if the ring
    /// is full.
    fn push(&mut self, cqe: &abi::CqReq) -> Result {
        if self.next.wrapping_sub(self.consumer) >= self.ring.depth() {
            return Err(ENOSPC);
        }
        let off = self.ring.slot(self.next);
        self.ring.umem()?.write(off, cqe.as_bytes())?;
        // The completion before its sequence number, as the device orders them.
        fence(Ordering::Release);
        self.ring
            .set_word(off + CQE_SEQ, self.next.wrapping_add(1))?;
        self.next = self.next.wrapping_add(1);
        Ok(())
    }
}

const CQ_CONSUMER: usize = core::mem::offset_of!(abi::RingRecord, consumer);
const WQ_PRODUCER: usize = core::mem::offset_of!(abi::RingRecord, producer);
const WQ_CONSUMER: usize = core::mem::offset_of!(abi::RingRecord, consumer);
const WQ_FLAGS: usize = core::mem::offset_of!(abi::RingRecord, flags);
const CQ_ARM: usize = core::mem::offset_of!(abi::RingRecord, arm);
const CQE_SEQ: usize = core::mem::offset_of!(abi::RingCqe, seq);

/// After the device stopped (it touches no memory any more): completes the requests left on
/// the work rings of the process's QPs that report to CQ `cq` (whose ring is `ring`), flushed,
/// into that ring, in posting order, as far as it has room, and marks them taken (the work
/// ring's consumer), as the device would have, and asks the process to ring the doorbell
/// (NOTIFY) on its next post. Requests are those between the device's
/// consumer and the process's producer (at most a ring's depth: the process's producer is its
/// own business); requests the device had taken are its own and are not known here. Returns
/// whether the process should be woken: it armed the CQ and a completion was written.
pub(crate) fn flush_user_cq(cq: &rdma::Cq<RdmaDev<'_>>, ring: &GuestRing) -> bool {
    let Ok(mut out) = FlushCq::new(ring) else {
        return false;
    };
    let dev = cq.device();
    dev.ctrl.queues().handler().get_ref().qps.each(|qp| {
        let Some(rings) = qp.user_rings() else {
            return;
        };
        for (wq, send) in [(Some(&rings.sq), true), (rings.rq.as_ref(), false)] {
            let Some(wq) = wq else {
                continue;
            };
            if qp.cqn(send) != cq.index() {
                continue;
            }
            let (Ok(producer), Ok(mut consumer)) = (wq.word(WQ_PRODUCER), wq.word(WQ_CONSUMER))
            else {
                continue;
            };
            let end = consumer.wrapping_add(producer.wrapping_sub(consumer).min(wq.depth()));
            while consumer != end {
                let mut hdr = [0u8; 9];
                if wq
                    .umem()
                    .and_then(|u| u.read(wq.slot(consumer), &mut hdr))
                    .is_err()
                {
                    break;
                }
                let mut wr_id = [0u8; 8];
                wr_id.copy_from_slice(&hdr[..8]);
                let opcode = if send {
                    wr_table::wc_opcode(hdr[8].into())
                } else {
                    bindings::ib_wc_opcode_IB_WC_RECV as u8
                };
                let posted = Posted {
                    wr_id: u64::from_le_bytes(wr_id),
                    len: 0,
                    opcode,
                    signaled: true,
                };
                if out.push(&cq::flushed(qp, &posted)).is_err() {
                    break;
                }
                consumer = consumer.wrapping_add(1);
            }
            let _ = wq.set_word(WQ_CONSUMER, consumer);
            // Whatever the device last asked for: the process's next post rings the doorbell,
            // which flushes it (`qp::ring_doorbell`), or it would wait for the device forever.
            let _ = wq.set_word(WQ_FLAGS, abi::RING_F_NOTIFY);
        }
    });
    // Woken only if it asked (`arm`), once, as the device does.
    out.next != out.start
        && matches!(ring.word(CQ_ARM), Ok(a) if a != abi::cq_arm::NONE)
        && ring.set_word(CQ_ARM, 0).is_ok()
}

/// A ring's memory and page table, kept while the device may still use them (`kept.rs`).
pub(crate) struct KeptRing {
    mem: Backing,
    /// Only held: the device reads it.
    _table: DmaTable,
}

impl Drop for GuestRing {
    fn drop(&mut self) {
        if *self.lent.get_mut() {
            // The device may still write into the pages or read the table: both stay until
            // the device is reset.
            if let Some(mem) = self.mem.take() {
                self.kept.keep(mem);
            }
        }
    }
}

/// Where the ring of a CQ with a ring is.
pub(crate) enum CqRing {
    /// A process's ring, which it polls and arms itself. Locked so that a resize can replace
    /// it.
    User(Pin<KBox<SpinLockIrq<GuestRing>>>),
    /// A kernel CQ's ring, which the driver polls and arms (`cq.rs`).
    Kernel(Pin<KBox<SpinLockIrq<CompRing>>>),
}

/// The ring of a CQ with a ring, and the completion-event queue its events come on.
pub(crate) struct CqRings {
    pub(crate) ring: CqRing,
    /// The completion-event queue (`0..num_comp_vqs`).
    pub(crate) comp_vq: u32,
}

impl CqRings {
    /// Runs `f` on the ring (under its lock for a kernel CQ).
    fn with_ring<R>(&self, f: impl FnOnce(&GuestRing) -> R) -> R {
        match &self.ring {
            CqRing::User(ring) => f(&ring.lock()),
            CqRing::Kernel(comp) => f(comp.lock().ring()),
        }
    }

    /// The number of slots.
    pub(crate) fn depth(&self) -> u32 {
        self.with_ring(GuestRing::depth)
    }

    /// The device does not use the ring (any more).
    pub(crate) fn release(&self) {
        self.with_ring(GuestRing::release)
    }

    /// The ring of a kernel CQ.
    pub(crate) fn kernel(&self) -> Option<&SpinLockIrq<CompRing>> {
        match &self.ring {
            CqRing::User(_) => None,
            CqRing::Kernel(comp) => Some(comp),
        }
    }
}

/// Creates the device's CQ with a ring, of at least `attr.cqe` completions (checked already):
/// for a process (`udata`), the ring it names in its request; for the kernel, a ring the
/// driver allocates. Returns its number, reserved in the CQ registry, and its ring.
pub(crate) fn create_cq(
    dev: &Device<'_>,
    attr: &CqInitAttr,
    mut udata: Option<&mut Udata<'_>>,
) -> Result<(u32, CqRings)> {
    let rings = dev.config.layout.rings().ok_or(EOPNOTSUPP)?;
    // The core checks the vector against the device's (`num_comp_vqs`, at least 1); the
    // remainder only makes sure, without a panic path.
    let comp_vq = attr
        .comp_vector
        .checked_rem(rings.num_comp_vqs)
        .ok_or(EINVAL)?;
    let ring = match udata.as_deref_mut() {
        Some(udata) => {
            let mut cmd = abi::CreateCqCmd::new_zeroed();
            udata.read_request(cmd.as_mut_bytes())?;
            check_cq_cmd(&cmd, attr.cqe, dev.config.raw.max_cqe.get())?;
            let ring = GuestRing::pin(dev, cmd.addr, cmd.depth, CQE_STRIDE)?;
            CqRing::User(KBox::pin_init(
                new_spinlock_irq!(ring, "virtio_rdma_ucq_ring"),
                GFP_KERNEL,
            )?)
        }
        None => {
            let depth = attr.cqe.checked_next_power_of_two().ok_or(EINVAL)?;
            let ring = GuestRing::alloc(dev, depth, CQE_STRIDE)?;
            CqRing::Kernel(KBox::pin_init(
                new_spinlock_irq!(CompRing::new(ring), "virtio_rdma_cq_ring"),
                GFP_KERNEL,
            )?)
        }
    };
    let cq = CqRings { ring, comp_vq };
    let rsp: abi::RspCreateCq = dev
        .ctrl
        .exec(
            abi::cmd::CREATE_CQ_RING,
            &abi::CmdCreateCqRing {
                ring: cq.with_ring(GuestRing::lend),
                comp_vq: comp_vq.into(),
                reserved: 0.into(),
            },
        )
        .inspect_err(|&e| cq.with_ring(|r| r.refused(e)))?;
    let cqn = rsp.cqn.get();
    if !dev.config.layout.is_ring_cq(cqn) {
        dev_err!(
            dev.as_ref(),
            "CREATE_CQ_RING returned CQ {}, not one of {}..{}\n",
            cqn,
            dev.config.layout.max_cq(),
            dev.config.layout.total_cq()
        );
        // Not destroyed: the number may be a live virtqueue CQ's, and the new CQ's own
        // number is unknown. The device may use the ring under it: the ring stays.
        return Err(EPROTO);
    }
    // As for any CQ: a number the device hands out twice must not lead to the live CQ that has
    // it. The device then uses the ring under a number the driver cannot destroy: it stays.
    let cqs = &dev.ctrl.queues().handler().get_ref().cqs;
    if cqs.reserve(cqn).is_err() {
        dev_err!(
            dev.as_ref(),
            "CREATE_CQ_RING returned CQ {}, which is in use\n",
            cqn
        );
        return Err(EPROTO);
    }
    // The answer describes no ring of the driver's (the process has its own).
    if let Some(udata) = udata {
        if let Err(e) = udata.write_response(abi::CreateCqResp::new_zeroed().as_bytes()) {
            if cq::destroy_on_device(dev, cqn) {
                cq.release();
            }
            cqs.release(cqn);
            return Err(e);
        }
    }
    Ok((cqn, cq))
}

/// Resizes user CQ `cq`, whose rings are `guest`, to at least `cqe` completions (within the
/// device's limit, checked already): the ring the process names in its request replaces the
/// CQ's at the device (RESIZE_CQ_RING), and the answer tells the process how many completions
/// the old ring received (it takes those not consumed from there). The old ring goes back to
/// the process; after a command the device may have done (a timeout), both stay pinned.
pub(crate) fn resize_user_cq(
    cq: &rdma::Cq<RdmaDev<'_>>,
    guest: &CqRings,
    cqe: u32,
    udata: &mut Udata<'_>,
) -> Result<u32> {
    let dev = cq.device();
    let CqRing::User(ring) = &guest.ring else {
        return Err(EINVAL);
    };
    let mut req = abi::ResizeCqCmd::new_zeroed();
    udata.read_request(req.as_mut_bytes())?;
    // The same ring description as at creation.
    let cmd = abi::CreateCqCmd {
        addr: req.addr,
        depth: req.depth,
        reserved: req.reserved,
    };
    check_cq_cmd(&cmd, cqe, dev.config.raw.max_cqe.get())?;
    let new = GuestRing::pin(dev, cmd.addr, cmd.depth, CQE_STRIDE)?;
    let rsp: abi::RspResizeCqRing = dev
        .ctrl
        .exec(
            abi::cmd::RESIZE_CQ_RING,
            &abi::CmdResizeCqRing {
                ring: new.lend(),
                cqn: cq.index().into(),
                reserved: 0.into(),
            },
        )
        .inspect_err(|&e| new.refused(e))?;
    let depth = new.depth();
    let old = core::mem::replace(&mut *ring.lock(), new);
    // The device uses only the new ring now; unpinning may sleep: outside the lock.
    old.release();
    drop(old);
    let resp = abi::ResizeCqResp {
        ring: abi::Uring::new_zeroed(),
        produced: rsp.produced.get(),
        reserved: 0,
    };
    udata.write_response(resp.as_bytes())?;
    Ok(depth)
}

/// The rings of a QP with rings (no receive ring for a QP with a shared receive queue).
pub(crate) struct QpRings {
    pub(crate) sq: GuestRing,
    pub(crate) rq: Option<GuestRing>,
}

impl QpRings {
    /// The device does not use the rings (any more).
    pub(crate) fn release(&self) {
        self.sq.release();
        if let Some(rq) = &self.rq {
            rq.release();
        }
    }
}

/// How deep a kernel ring for `n` requests is: `n` rounded up to a power of two.
fn kernel_depth(n: u32) -> Result<u32> {
    n.max(1).checked_next_power_of_two().ok_or(EINVAL)
}

/// How wide a kernel ring's slot for an element of `n` bytes is: rounded up to 8 bytes, a
/// slot's alignment.
fn kernel_stride(n: u32) -> Result<u32> {
    n.checked_next_multiple_of(8).ok_or(EINVAL)
}

/// Allocates the rings of a kernel QP of capabilities `cap` (checked already): each as deep as
/// its queue rounded up to a power of two, with slots of the largest element `cap` allows; no
/// receive ring with a shared receive queue (`srq`).
pub(crate) fn alloc_qp_rings(dev: &Device<'_>, cap: &QpCap, srq: bool) -> Result<QpRings> {
    let sq = GuestRing::alloc(
        dev,
        kernel_depth(cap.max_send_wr)?,
        kernel_stride(sq_stride_min(cap))?,
    )?;
    let rq = if srq {
        None
    } else {
        Some(GuestRing::alloc(
            dev,
            kernel_depth(cap.max_recv_wr)?,
            kernel_stride(rq_stride_min(cap))?,
        )?)
    };
    Ok(QpRings { sq, rq })
}

/// Allocates the ring of a kernel SRQ of `max_wr` receives of `max_sge` entries (checked
/// already).
pub(crate) fn alloc_srq_ring(dev: &Device<'_>, max_wr: u32, max_sge: u32) -> Result<GuestRing> {
    GuestRing::alloc(
        dev,
        kernel_depth(max_wr)?,
        kernel_stride(srq_stride_min(max_sge))?,
    )
}

/// The rings of a new QP.
pub(crate) enum NewRings<'a, 'u> {
    /// A process's, which it names in its request (`udata`).
    User(&'a mut Udata<'u>),
    /// A kernel QP's, allocated already ([`GuestRing::alloc`]), under its work queues' locks
    /// (no receive ring with a shared receive queue).
    Kernel(
        &'a SpinLockIrq<WorkRing<SqBuf>>,
        Option<&'a SpinLockIrq<WorkRing<RqBuf>>>,
    ),
}

/// The rings of a QP being created, as [`create_qp`] holds them.
enum Held<'a> {
    User(QpRings),
    Kernel(
        &'a SpinLockIrq<WorkRing<SqBuf>>,
        Option<&'a SpinLockIrq<WorkRing<RqBuf>>>,
    ),
}

impl Held<'_> {
    /// Runs `f` on the send ring, then the receive ring (if there is one).
    fn each(&self, mut f: impl FnMut(&GuestRing)) {
        match self {
            Self::User(r) => {
                f(&r.sq);
                if let Some(rq) = &r.rq {
                    f(rq);
                }
            }
            Self::Kernel(sq, rq) => {
                f(sq.lock().ring());
                if let Some(rq) = rq {
                    f(rq.lock().ring());
                }
            }
        }
    }

    /// The device does not use the rings (any more).
    fn release(&self) {
        self.each(GuestRing::release);
    }
}

/// Creates the device's QP of `pd` with rings, for `attr` with capabilities `cap` (both
/// checked already), reporting to CQs with rings `send_cq` and `recv_cq` (none for an XRC
/// initiator). Returns its number, reserved in the QP registry, and a process's rings (the
/// kernel's stay where they are).
pub(crate) fn create_qp(
    pd: &rdma::Pd<RdmaDev<'_>>,
    attr: &QpInitAttr,
    cap: &QpCap,
    (send_cq, recv_cq): (&rdma::Cq<RdmaDev<'_>>, Option<&rdma::Cq<RdmaDev<'_>>>),
    new: NewRings<'_, '_>,
) -> Result<(u32, Option<QpRings>)> {
    let dev = pd.device();
    let layout = &dev.config.layout;
    if layout.rings().is_none() {
        return Err(EOPNOTSUPP);
    }
    // The device writes the completions of a QP with rings into its CQs' rings.
    if send_cq.guest.is_none() || recv_cq.is_some_and(|cq| cq.guest.is_none()) {
        return Err(EINVAL);
    }
    let (held, udata, flags) = match new {
        NewRings::User(udata) => {
            let mut cmd = abi::CreateQpCmd::new_zeroed();
            udata.read_request(cmd.as_mut_bytes())?;
            let has_rq = qp::has_rq(attr);
            check_qp_cmd(&cmd, cap, dev.config.raw.max_qp_wr.get(), has_rq)?;
            let sq = GuestRing::pin(dev, cmd.sq_addr, cmd.sq_depth, cmd.sq_stride)?;
            let rq = if !has_rq {
                None
            } else {
                Some(GuestRing::pin(
                    dev,
                    cmd.rq_addr,
                    cmd.rq_depth,
                    cmd.rq_stride,
                )?)
            };
            let rings = QpRings { sq, rq };
            (Held::User(rings), Some(udata), abi::QP_RING_F_USER)
        }
        NewRings::Kernel(sq, rq) => (Held::Kernel(sq, rq), None, 0),
    };
    // A QP with a shared receive queue names no receive ring: all zero.
    let mut wires = [abi::Ring::new_zeroed(); 2];
    let mut i = 0;
    held.each(|r| {
        wires[i] = r.lend();
        i += 1;
    });
    let rsp: abi::RspCreateQp = dev
        .ctrl
        .exec(
            abi::cmd::CREATE_QP_RING,
            &abi::CmdCreateQpRing {
                qp: qp::create_cmd(pd, attr, cap, send_cq, recv_cq),
                sq: wires[0],
                rq: wires[1],
                flags: flags.into(),
                reserved: 0.into(),
            },
        )
        .inspect_err(|&e| held.each(|r| r.refused(e)))?;
    let qpn = rsp.qpn.get();
    claim_ring_qpn(dev, qpn, "CREATE_QP_RING")?;
    let qps = &dev.ctrl.queues().handler().get_ref().qps;
    // The answer is zero: the process has its own rings.
    if let Some(udata) = udata {
        if let Err(e) = udata.write_response(abi::CreateQpResp::new_zeroed().as_bytes()) {
            if qp::destroy_on_device(dev, qpn) {
                held.release();
            }
            qps.release(qpn);
            return Err(e);
        }
    }
    match held {
        Held::User(rings) => Ok((qpn, Some(rings))),
        Held::Kernel(..) => Ok((qpn, None)),
    }
}

/// Reserves QP number `qpn`, which command `cmd` returned for a QP numbered as a ring QP, in
/// the QP registry; [`EPROTO`] if it is not a ring QP's number or is in use.
pub(crate) fn claim_ring_qpn(dev: &Device<'_>, qpn: u32, cmd: &str) -> Result {
    let layout = &dev.config.layout;
    if !layout.is_ring_qp(qpn) || qpn == qp::GSI_QPN {
        dev_err!(
            dev.as_ref(),
            "{} returned QP {}, not one of {}..{}\n",
            cmd,
            qpn,
            layout.max_qp(),
            layout.total_qp()
        );
        // See `create_cq`: the number may be the GSI QP's.
        return Err(EPROTO);
    }
    // See `create_cq`.
    let qps = &dev.ctrl.queues().handler().get_ref().qps;
    if qps.reserve(qpn).is_err() {
        dev_err!(
            dev.as_ref(),
            "{} returned QP {}, which is in use\n",
            cmd,
            qpn
        );
        return Err(EPROTO);
    }
    Ok(())
}

#[kunit_tests(virtio_rdma_rings)]
mod tests {
    use super::*;

    fn cap(send_sge: u32, recv_sge: u32, inline: u32) -> QpCap {
        QpCap {
            max_send_wr: 100,
            max_recv_wr: 1,
            max_send_sge: send_sge,
            max_recv_sge: recv_sge,
            max_inline_data: inline,
        }
    }

    fn qp_cmd() -> abi::CreateQpCmd {
        abi::CreateQpCmd {
            sq_addr: 0x7f00_0000_0000,
            rq_addr: 0x7f00_0001_0000,
            sq_depth: 128,
            sq_stride: 128,
            rq_depth: 1,
            rq_stride: 32,
        }
    }

    #[test]
    fn qp_without_rq_names_no_receive_ring() {
        // A QP with an SRQ, or an XRC initiator: the receive ring is all zero.
        let c = cap(4, 1, 64);
        let mut cmd = qp_cmd();
        assert_eq!(check_qp_cmd(&cmd, &c, 1024, false), Err(EINVAL));
        cmd.rq_addr = 0;
        cmd.rq_depth = 0;
        assert_eq!(check_qp_cmd(&cmd, &c, 1024, false), Err(EINVAL));
        cmd.rq_stride = 0;
        assert_eq!(check_qp_cmd(&cmd, &c, 1024, false), Ok(()));
        // A QP with its own receive queue needs the ring.
        assert_eq!(check_qp_cmd(&cmd, &c, 1024, true), Err(EINVAL));
    }

    #[test]
    fn ring_length_is_record_then_slots() {
        assert_eq!(ring_len(1, 64), 128);
        assert_eq!(ring_len(64, 64), 64 + 4096);
        // No overflow at the extremes.
        assert_eq!(
            ring_len(u32::MAX, u32::MAX),
            64 + u64::from(u32::MAX) * u64::from(u32::MAX)
        );
        // A CQ slot is `struct virtio_rdma_ring_cqe`.
        assert_eq!(CQE_STRIDE, 64);
    }

    #[test]
    fn depth_is_a_power_of_two_within_bounds() {
        assert_eq!(check_depth(1, 1, 1), Ok(()));
        assert_eq!(check_depth(128, 100, 1024), Ok(()));
        // The device's limit rounded up.
        assert_eq!(check_depth(1024, 1000, 1000), Ok(()));
        assert_eq!(check_depth(2048, 1000, 1000), Err(EINVAL));
        // Not a power of two, or zero.
        assert_eq!(check_depth(0, 0, 1024), Err(EINVAL));
        assert_eq!(check_depth(100, 100, 1024), Err(EINVAL));
        // Smaller than the queue.
        assert_eq!(check_depth(64, 100, 1024), Err(EINVAL));
        // A limit past the largest power of two.
        assert_eq!(check_depth(1 << 31, 1, u32::MAX), Ok(()));
    }

    #[test]
    fn addresses_are_page_aligned() {
        assert_eq!(check_addr(0x1000), Ok(()));
        assert_eq!(check_addr(0x7fff_ffff_f000), Ok(()));
        assert_eq!(check_addr(0x1008), Err(EINVAL));
        assert_eq!(check_addr(0x800), Err(EINVAL));
        assert_eq!(check_addr(u64::MAX), Err(EINVAL));
    }

    #[test]
    fn strides_hold_the_largest_element() {
        // 64-byte header, then 16 bytes an SGE or the inline data, whichever is larger.
        assert_eq!(sq_stride_min(&cap(1, 1, 0)), 80);
        assert_eq!(sq_stride_min(&cap(4, 1, 256)), 320);
        assert_eq!(sq_stride_min(&cap(16, 1, 64)), 320);
        // 16-byte header, then the SGEs.
        assert_eq!(rq_stride_min(&cap(1, 1, 0)), 32);
        assert_eq!(rq_stride_min(&cap(1, 16, 0)), 272);
        // No overflow on absurd capabilities.
        assert_eq!(sq_stride_min(&cap(u32::MAX, 1, 0)), u32::MAX);
        assert_eq!(check_stride(80, 80), Ok(()));
        assert_eq!(check_stride(4096, 80), Ok(()));
        assert_eq!(check_stride(72, 80), Err(EINVAL));
        assert_eq!(check_stride(84, 80), Err(EINVAL));
        assert_eq!(check_stride(4104, 80), Err(EINVAL));
        assert_eq!(check_stride(8, 0), Ok(()));
        assert_eq!(check_stride(u32::MAX, 0), Err(EINVAL));
    }

    #[test]
    fn cq_rings_are_checked() {
        let good = abi::CreateCqCmd {
            addr: 0x7f00_0000_0000,
            depth: 256,
            reserved: 0,
        };
        assert_eq!(check_cq_cmd(&good, 200, 1024), Ok(()));
        assert_eq!(check_cq_cmd(&good, 257, 1024), Err(EINVAL));
        assert_eq!(check_cq_cmd(&good, 200, 128), Err(EINVAL));
        let unaligned = abi::CreateCqCmd {
            addr: good.addr + 64,
            ..good
        };
        assert_eq!(check_cq_cmd(&unaligned, 200, 1024), Err(EINVAL));
        let reserved = abi::CreateCqCmd {
            reserved: 1,
            ..good
        };
        assert_eq!(check_cq_cmd(&reserved, 200, 1024), Err(EINVAL));
    }

    #[test]
    fn qp_rings_are_checked() {
        let c = cap(4, 1, 64);
        assert_eq!(check_qp_cmd(&qp_cmd(), &c, 1024, true), Ok(()));
        for bad in [
            abi::CreateQpCmd {
                sq_depth: 64,
                ..qp_cmd()
            },
            abi::CreateQpCmd {
                rq_depth: 0,
                ..qp_cmd()
            },
            abi::CreateQpCmd {
                sq_depth: 2048,
                ..qp_cmd()
            },
            abi::CreateQpCmd {
                sq_stride: 120,
                ..qp_cmd()
            },
            abi::CreateQpCmd {
                rq_stride: 28,
                ..qp_cmd()
            },
            abi::CreateQpCmd {
                rq_stride: 8192,
                ..qp_cmd()
            },
            abi::CreateQpCmd {
                sq_addr: 0x7f00_0000_0100,
                ..qp_cmd()
            },
            abi::CreateQpCmd {
                rq_addr: 0x7f00_0001_0008,
                ..qp_cmd()
            },
        ] {
            assert_eq!(check_qp_cmd(&bad, &c, 1024, true), Err(EINVAL));
        }
        // More inline data needs a larger send slot.
        assert_eq!(
            check_qp_cmd(&qp_cmd(), &cap(4, 1, 128), 1024, true),
            Err(EINVAL)
        );
    }
}
