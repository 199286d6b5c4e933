// SPDX-License-Identifier: GPL-2.0

//! Counters: the port's own, and counter sets, in which a QP bound to one counts instead of
//! the port (the protocol document's "ALLOC_COUNTER_SET, DEALLOC_COUNTER_SET,
//! BIND_COUNTER_SET"). The RDMA core binds QPs to counters (`rdma statistic qp`), asks for a
//! set when a counter has none yet, and frees it with the counter's last QP; it shows a port's
//! counters as the port's own plus every counter's, so the device counts each event once.

use core::num::NonZeroU32;

use kernel::{prelude::*, rdma};

use crate::{abi, device::RdmaDev};

type Device<'a> = rdma::Device<RdmaDev<'a>>;
type Qp<'a> = rdma::Qp<RdmaDev<'a>>;

/// Reads the counters of `port`, or of its counter set `set`, into `values` (one per entry of
/// `port::COUNTERS`).
pub(crate) fn query(
    dev: &Device<'_>,
    port: u32,
    set: Option<NonZeroU32>,
    values: &mut [u64],
) -> Result {
    let rsp: abi::RspQueryCounters = dev.ctrl.exec(
        abi::cmd::QUERY_COUNTERS,
        &abi::CmdQueryCounters {
            port: port.into(),
            set: set.map_or(0, NonZeroU32::get).into(),
        },
    )?;
    // Counters are plain numbers: any value the device reports is one.
    for (value, reported) in values.iter_mut().zip(rsp.value.iter()) {
        *value = reported.get();
    }
    Ok(())
}

/// QP `qpn` counts in `set` (0: in the port's own counters).
fn bind_qpn(dev: &Device<'_>, qpn: u32, set: u32) -> Result {
    dev.ctrl.exec::<_, ()>(
        abi::cmd::BIND_COUNTER_SET,
        &abi::CmdBindCounterSet {
            qpn: qpn.into(),
            set: set.into(),
        },
    )
}

/// Binds `qp` to `set`, or to a new set of `port` if the core's counter has none yet; returns
/// the set.
pub(crate) fn bind(qp: &Qp<'_>, set: Option<NonZeroU32>, port: u32) -> Result<NonZeroU32> {
    let dev = qp.device();
    if let Some(set) = set {
        bind_qpn(dev, qp.qp_num(), set.get())?;
        return Ok(set);
    }
    let rsp: abi::RspAllocCounterSet = dev.ctrl.exec(
        abi::cmd::ALLOC_COUNTER_SET,
        &abi::CmdAllocCounterSet {
            port: port.into(),
            reserved: 0.into(),
        },
    )?;
    // Set 0 is the port's own counters: a device that answers it is broken.
    let new = NonZeroU32::new(rsp.set.get()).ok_or(EPROTO)?;
    if let Err(e) = bind_qpn(dev, qp.qp_num(), new.get()) {
        // The core forgets a counter whose first binding failed: so does the device.
        let _ = dealloc(dev, new);
        return Err(e);
    }
    Ok(new)
}

/// `qp` counts in the port's own counters again.
pub(crate) fn unbind(qp: &Qp<'_>) -> Result {
    let dev = qp.device();
    match bind_qpn(dev, qp.qp_num(), 0) {
        // A failed device counts nothing any more: the QP is unbound (the core unbinds a QP it
        // destroys whatever the answer, and then frees the counter).
        Err(_) if dev.health.stopped() => Ok(()),
        r => r,
    }
}

/// Frees counter set `set`, to which no QP is bound any more.
pub(crate) fn dealloc(dev: &Device<'_>, set: NonZeroU32) -> Result {
    dev.ctrl.exec::<_, ()>(
        abi::cmd::DEALLOC_COUNTER_SET,
        &abi::CmdDeallocCounterSet {
            set: set.get().into(),
            reserved: 0.into(),
        },
    )
}
