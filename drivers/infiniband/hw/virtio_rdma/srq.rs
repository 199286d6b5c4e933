// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (the protocol document's "Shared receive queues").
//!
//! An SRQ is a receive ring in guest memory whose receives serve every QP created with it, so
//! the device offers SRQs only with rings (`VIRTIO_RDMA_F_RINGS`). A kernel SRQ's ring is the
//! driver's (`kernel_rings.rs`): posting encodes each receive as for a QP's receive ring and
//! records it in the SRQ's table, whose tokens the completions must name (`wr_table.rs`; the
//! receives of an SRQ may complete in any order, as different QPs take them). A process's SRQ
//! is a ring in its own memory, pinned (`rings.rs`), which it posts to itself; its doorbell
//! only kicks the notification queue. The completions of an SRQ's receives come through the
//! receive CQs of the QPs that took them (`cq.rs`).
//!
//! An XRC SRQ (CREATE_XRC_SRQ) is a process's only: it belongs to a domain (`xrcd.rs`) and its
//! completions go to a ring CQ of its own, naming target QPs that may be another process's;
//! no kernel consumer uses XRC, and a kernel CQ could not tie such completions to a table.

use kernel::{
    new_spinlock_irq,
    prelude::*,
    rdma::{self, NewSrq, RecvWr, RecvWrs, SrqAttr, SrqChange, SrqXrc, Udata},
    sync::SpinLockIrq,
};
use zerocopy::FromZeros;

use crate::{
    abi,
    device::RdmaDev,
    kernel_rings::WorkRing,
    qp, rings,
    rings::GuestRing,
    wqe::{self, RqBuf},
    wr_table::{BadToken, Posted, SrqTable},
    xrcd,
};

type Device<'a> = rdma::Device<RdmaDev<'a>>;
type Srq<'a> = rdma::Srq<RdmaDev<'a>>;

/// The driver's part of an SRQ.
pub(crate) struct DevSrq {
    srqn: u32,
    attr: SrqAttr,
    ring: SrqRing,
}

/// Where an SRQ's receives are.
enum SrqRing {
    /// A kernel SRQ's ring and the receives outstanding on it.
    Kernel {
        /// The lock also serialises posting.
        ring: Pin<KBox<SpinLockIrq<WorkRing<RqBuf>>>>,
        wrs: Pin<KBox<SpinLockIrq<SrqTable>>>,
    },
    /// A process's ring, which it posts to itself.
    User(GuestRing),
}

impl DevSrq {
    /// Takes the receive `token` names out of a kernel SRQ's table, as its completion; a
    /// process's SRQ has no table (its completions are the process's to check).
    pub(crate) fn complete(&self, token: u64) -> core::result::Result<Posted, BadToken> {
        match &self.ring {
            SrqRing::Kernel { wrs, .. } => wrs.lock().complete(token),
            SrqRing::User(_) => Err(BadToken::NotOutstanding),
        }
    }

    /// The device does not use the ring (any more).
    fn release(&self) {
        self.ring.with(GuestRing::release)
    }
}

impl SrqRing {
    /// Runs `f` on the ring (under its lock for a kernel SRQ).
    fn with<R>(&self, f: impl FnOnce(&GuestRing) -> R) -> R {
        match self {
            SrqRing::Kernel { ring, .. } => f(ring.lock().ring()),
            SrqRing::User(ring) => f(ring),
        }
    }
}

/// What an SRQ of this device may have at most: no limit if the device offers no SRQs.
fn limits(dev: &Device<'_>) -> Option<(u32, u32)> {
    let c = &dev.config.raw;
    dev.config.layout.rings()?;
    if c.max_srq.get() == 0 {
        return None;
    }
    let max_wr = c.max_srq_wr.get().min(SrqTable::MAX_ENTRIES);
    Some((max_wr, c.max_srq_sge.get().min(wqe::MAX_SGE)))
}

/// The SRQ limits `query_device` reports: `(max_srq, max_srq_wr, max_srq_sge)`, zero without
/// SRQs.
pub(crate) fn device_limits(dev: &Device<'_>) -> (u32, u32, u32) {
    match limits(dev) {
        Some((max_wr, max_sge)) => (dev.config.raw.max_srq.get(), max_wr, max_sge),
        None => (0, 0, 0),
    }
}

/// Checks what the consumer asks for: at least one receive, a limit below the size, both
/// within the device's limits. Returns the sizes the SRQ gets (at least one SGE a receive).
fn check(dev: &Device<'_>, attr: &SrqAttr) -> Result<SrqAttr> {
    let (max_wr, max_sge) = limits(dev).ok_or(EOPNOTSUPP)?;
    if attr.max_wr == 0
        || attr.max_wr > max_wr
        || attr.max_sge > max_sge
        || attr.srq_limit >= attr.max_wr
    {
        return Err(EINVAL);
    }
    Ok(SrqAttr {
        max_sge: attr.max_sge.max(1),
        ..*attr
    })
}

/// Creates an SRQ of `pd`: with `udata` a process's, on the ring it names in its request; with
/// `xrc` an XRC SRQ (a process's, reporting to a ring CQ).
pub(crate) fn create(
    pd: &rdma::Pd<RdmaDev<'_>>,
    asked: &SrqAttr,
    xrc: Option<SrqXrc<'_, RdmaDev<'_>>>,
    udata: Option<&mut Udata<'_>>,
) -> Result<NewSrq<DevSrq>> {
    let dev = pd.device();
    dev.health.check()?;
    let attr = check(dev, asked)?;
    if let Some(xrc) = &xrc {
        if !xrcd::supported(dev) || udata.is_none() {
            return Err(EOPNOTSUPP);
        }
        // The device writes the SRQ's completions into its CQ's ring.
        if xrc.cq.guest.is_none() {
            return Err(EINVAL);
        }
    }
    let (ring, flags) = match udata {
        Some(udata) => {
            let mut cmd = abi::CreateSrqCmd::new_zeroed();
            udata.read_request(cmd.as_mut_bytes())?;
            rings::check_srq_cmd(
                &cmd,
                attr.max_wr,
                attr.max_sge,
                dev.config.raw.max_srq_wr.get(),
            )?;
            let ring = GuestRing::pin(dev, cmd.addr, cmd.depth, cmd.stride)?;
            (SrqRing::User(ring), abi::SRQ_F_USER)
        }
        None => {
            let ring = rings::alloc_srq_ring(dev, attr.max_wr, attr.max_sge)?;
            let ring = WorkRing::new(ring, KBox::new(RqBuf::new_zeroed(), GFP_KERNEL)?);
            let wrs = SrqTable::new(attr.max_wr)?;
            (
                SrqRing::Kernel {
                    ring: KBox::pin_init(
                        new_spinlock_irq!(ring, "virtio_rdma_srq_ring"),
                        GFP_KERNEL,
                    )?,
                    wrs: KBox::pin_init(new_spinlock_irq!(wrs, "virtio_rdma_srq_wrs"), GFP_KERNEL)?,
                },
                0,
            )
        }
    };
    let cmd = abi::CmdCreateSrq {
        ring: ring.with(GuestRing::lend),
        pdn: pd.pdn.into(),
        max_wr: attr.max_wr.into(),
        max_sge: attr.max_sge.into(),
        srq_limit: attr.srq_limit.into(),
        flags: flags.into(),
        reserved: 0.into(),
    };
    let rsp: Result<abi::RspCreateSrq> = match xrc {
        None => dev.ctrl.exec(abi::cmd::CREATE_SRQ, &cmd),
        Some(xrc) => dev.ctrl.exec(
            abi::cmd::CREATE_XRC_SRQ,
            &abi::CmdCreateXrcSrq {
                srq: cmd,
                xrcdn: xrc.xrcd.xrcdn.into(),
                cqn: xrc.cq.index().into(),
            },
        ),
    };
    let rsp = rsp.inspect_err(|&e| ring.with(|r| r.refused(e)))?;
    let srqn = rsp.srqn.get();
    let srq = DevSrq { srqn, attr, ring };
    // As for CQs and QPs: a number the device hands out twice (or out of range) must not lead
    // to the live SRQ that has it. The device then uses the ring under a number the driver
    // cannot destroy: it stays (dropped while lent, `rings.rs`).
    let srqs = &dev.ctrl.queues().handler().get_ref().srqs;
    if srqn == 0 || srqs.reserve(srqn).is_err() {
        dev_err!(
            dev.as_ref(),
            "CREATE_SRQ returned SRQ {}, which is not free or not a number of 1..={}\n",
            srqn,
            dev.config.raw.max_srq.get()
        );
        return Err(EPROTO);
    }
    Ok(NewSrq {
        data: srq,
        index: srqn,
        attr,
    })
}

/// Destroys an SRQ: its ring goes once the device confirms (or never had it).
pub(crate) fn destroy(srq: &Srq<'_>) -> Result {
    let dev = srq.device();
    let cmd = abi::CmdSrq {
        srqn: srq.srqn.into(),
        reserved: 0.into(),
    };
    match dev.ctrl.exec::<_, ()>(abi::cmd::DESTROY_SRQ, &cmd) {
        Ok(()) | Err(ENOENT) => {
            srq.release();
            Ok(())
        }
        // A QP still takes from it: the SRQ stays (the core counts its QPs, so only a device
        // that disagrees gets here).
        Err(EBUSY) => Err(EBUSY),
        Err(e) => {
            // The device may still use the ring: it stays until the device is reset.
            dev_err!(dev.as_ref(), "DESTROY_SRQ {}: {:?}\n", srq.srqn, e);
            Ok(())
        }
    }
}

/// Arms (or disarms, 0) the SRQ's limit; its size cannot change (the device does not offer
/// `IB_DEVICE_SRQ_RESIZE`).
pub(crate) fn modify(srq: &Srq<'_>, change: &SrqChange) -> Result {
    if change.max_wr.is_some() {
        return Err(EOPNOTSUPP);
    }
    let Some(limit) = change.srq_limit else {
        return Ok(());
    };
    if limit >= srq.attr.max_wr {
        return Err(EINVAL);
    }
    let dev = srq.device();
    dev.health.check()?;
    dev.ctrl.exec::<_, ()>(
        abi::cmd::MODIFY_SRQ,
        &abi::CmdModifySrq {
            srqn: srq.srqn.into(),
            srq_limit: limit.into(),
        },
    )
}

/// The SRQ's sizes, and its limit as the device has it (0 once the limit event came).
pub(crate) fn query(srq: &Srq<'_>) -> Result<SrqAttr> {
    let dev = srq.device();
    dev.health.check()?;
    let rsp: abi::RspQuerySrq = dev.ctrl.exec(
        abi::cmd::QUERY_SRQ,
        &abi::CmdSrq {
            srqn: srq.srqn.into(),
            reserved: 0.into(),
        },
    )?;
    let srq_limit = rsp.srq_limit.get();
    // The sizes are the driver's; a limit the SRQ could never reach is the device's error.
    if srq_limit >= srq.attr.max_wr {
        dev_err!(
            dev.as_ref(),
            "QUERY_SRQ {}: limit {} of an SRQ of {} receives\n",
            srq.srqn,
            srq_limit,
            srq.attr.max_wr
        );
        return Err(EPROTO);
    }
    Ok(SrqAttr {
        srq_limit,
        ..srq.attr
    })
}

/// Posts receives to a kernel SRQ. [`EIO`] once the device failed: an SRQ's receives complete
/// only when a QP takes them, and no QP will.
pub(crate) fn post_recv(srq: &Srq<'_>, wrs: &mut RecvWrs<'_>) -> Result {
    let dev = srq.device();
    dev.health.check()?;
    let SrqRing::Kernel { ring, wrs: table } = &srq.ring else {
        return Err(EINVAL);
    };
    let max_sge = srq.attr.max_sge;
    let encode = |wr: &RecvWr<'_>, buf: &mut RqBuf| {
        wr.sges()
            .and_then(|sges| wqe::encode_recv(buf, wr.wr_id(), sges, max_sge))
    };
    qp::post_to_ring(dev, ring, (&**table, false), wrs, encode)
}

/// The doorbell of a process's SRQ: the device reads the ring itself.
pub(crate) fn ring_doorbell(srq: &Srq<'_>) -> Result {
    let dev = srq.device();
    dev.health.check()?;
    match srq.ring {
        SrqRing::User(_) => qp::kick_notify(dev),
        SrqRing::Kernel { .. } => Err(EINVAL),
    }
}
