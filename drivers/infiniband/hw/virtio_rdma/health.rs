// SPDX-License-Identifier: GPL-2.0

//! Device failure: a device that breaks the protocol on the data path is not believed again.
//!
//! A completion that names no outstanding request, has the wrong size or comes for a queue
//! that does not report to its CQ means that the device lost track of the work requests (or
//! lies about them): some request will never complete, and kernel consumers wait for every
//! completion they are owed (rdma_cm's IDs, `ib_drain_qp`). So the first such completion
//! fails the device, once: its consumers get `IB_EVENT_DEVICE_FATAL`; from then on every
//! request outstanding on a kernel QP, and every request posted later, completes with
//! `IB_WC_WR_FLUSH_ERR` out of the driver's tables (`wr_table.rs`), never the device; user
//! QPs' doorbells and new objects fail with `EIO`. Control commands still go to the device,
//! so that it releases what it holds (and confirms before memory is freed).

use core::sync::atomic::{AtomicBool, Ordering};

use kernel::{prelude::*, rdma};

use crate::verbs::RdmaDev;

type Device<'a> = rdma::Device<RdmaDev<'a>>;

/// Whether the device failed.
pub(crate) struct Health {
    failed: AtomicBool,
}

impl Health {
    pub(crate) fn new() -> Self {
        Self {
            failed: AtomicBool::new(false),
        }
    }

    /// The device failed: nothing it reports is believed.
    pub(crate) fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// [`EIO`] once the device failed (for the verbs that create objects).
    pub(crate) fn check(&self) -> Result {
        if self.failed() {
            Err(EIO)
        } else {
            Ok(())
        }
    }
}

/// Fails `dev` (the first call only; returns whether it was this one), saying `why`, and
/// tells its consumers. The caller then has every armed kernel CQ's consumer poll
/// (`cq::kick_all`), which flushes the requests outstanding on its QPs, once it holds no queue or
/// registry lock. Any context.
pub(crate) fn fail(dev: &Device<'_>, why: core::fmt::Arguments<'_>) -> bool {
    if dev.health.failed.swap(true, Ordering::AcqRel) {
        return false;
    }
    dev_err!(
        dev.as_ref(),
        "device failed: {}; outstanding work requests are flushed, new objects refused\n",
        why
    );
    dev.fatal_event();
    true
}
