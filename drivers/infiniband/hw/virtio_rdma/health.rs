// SPDX-License-Identifier: GPL-2.0

//! Device failure: a device that breaks the protocol, or that needs a reset, is not believed
//! again; a device that needs a reset is reset and set up again once it is back.
//!
//! A completion that names no outstanding request, has the wrong size or comes for a queue
//! that does not report to its CQ means that the device lost track of the work requests (or
//! lies about them): some request will never complete, and kernel consumers wait for every
//! completion they are owed (rdma_cm's IDs, `ib_drain_qp`). So the first such completion
//! fails the device, once: its consumers get `IB_EVENT_DEVICE_FATAL`; from then on every
//! request outstanding on a kernel QP, and every request posted later, completes with
//! `IB_WC_WR_FLUSH_ERR` out of the driver's tables (`wr_table.rs`), never the device; user
//! QPs' doorbells and new objects fail with `EIO` (once the device stopped, a doorbell of a
//! process's rings in guest memory also flushes what it posted into its CQ's ring). Control commands still go to the device,
//! so that it releases what it holds (and confirms before memory is freed).
//!
//! A device that sets `DEVICE_NEEDS_RESET` (its backend went away) has stopped: it touches no
//! memory of the guest and answers no command until it is reset. It fails as above, and its
//! control commands end at once without being sent (`ctrl.rs`): those that release an object
//! succeed (the device holds nothing any more), the others fail with `EIO`. When the device
//! is back (its backend reconnected; it says so with a second config interrupt), the driver
//! has the bus reset it and probe it again (`virtio::Device::schedule_reset`): the RDMA device
//! is unregistered (kernel consumers release it; rdma_cm's consumers, NVMe over RDMA among
//! them, reconnect to the new one by address) and a new one is registered.

use core::sync::atomic::{AtomicBool, Ordering};

use kernel::{device::Bound, prelude::*, rdma, virtio};

use crate::{cq, device::RdmaDev};

type Device<'a> = rdma::Device<RdmaDev<'a>>;

/// Whether the device failed.
pub(crate) struct Health {
    failed: AtomicBool,
    /// The device needs a reset: it does not run commands.
    stopped: AtomicBool,
    /// The reset of a stopped device was asked for.
    reset: AtomicBool,
}

impl Health {
    pub(crate) fn new() -> Self {
        Self {
            failed: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            reset: AtomicBool::new(false),
        }
    }

    /// The device failed: nothing it reports is believed.
    pub(crate) fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// The device needs a reset: it runs no command, holds no object and uses no memory.
    pub(crate) fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
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

/// A config interrupt: the first that finds the device needing a reset stops and fails it; the
/// next says that the device is back (the protocol document's "Device failure"), and has it
/// reset and set up again, once. Atomic context (config reads may sleep: none here).
pub(crate) fn config_changed(dev: &Device<'_>, vdev: &virtio::Device<Bound>) {
    if !vdev.needs_reset() {
        return;
    }
    if !dev.health.stopped.swap(true, Ordering::AcqRel) {
        // Commands in flight end now; none is sent from here on.
        dev.ctrl.stop();
        fail(
            dev,
            format_args!("the device needs a reset (its backend is gone)"),
        );
        // Also when the device had failed before: only now are the processes' rings the
        // driver's to flush (`cq::kick_all`).
        cq::kick_all(&dev.ctrl.queues().handler().get_ref().cqs);
        return;
    }
    if !dev.health.reset.swap(true, Ordering::AcqRel) {
        dev_info!(
            vdev,
            "the device is back: resetting it and setting it up again\n"
        );
        if let Err(e) = vdev.schedule_reset() {
            dev_err!(vdev, "cannot schedule the reset: {:?}\n", e);
            dev.health.reset.store(false, Ordering::Release);
        }
    }
}
