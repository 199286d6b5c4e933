// SPDX-License-Identifier: GPL-2.0
//! Completion queues: writing a completion into the next CQE buffer of the
//! CQ's virtqueue, and interrupting the driver when it asked for it.
//!
//! Notification: the driver arms a CQ for "next completion" the way it
//! enables any virtqueue callback (used_event with EVENT_IDX, the
//! NO_INTERRUPT flag without), so the device signals whenever the ring's own
//! suppression says so. REQ_NOTIFY_CQ adds what a ring cannot express: a
//! one-shot interrupt on the next (SOLICITED: next solicited or failed)
//! completion even while the driver suppresses interrupts.

use vm_memory::GuestAddressSpace;
use zerocopy::IntoBytes;

use crate::abi::{
    VirtioRdmaCqReq, VIRTIO_RDMA_NOTIFY_NEXT_COMPLETION, VIRTIO_RDMA_NOTIFY_SOLICITED,
};
use crate::ctrl::Ctrl;
use crate::hostile;
use crate::stats::Counter;
use crate::vring::RecordError;

/// One completion queue.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cq {
    /// Entries the driver asked for.
    pub cqe: u32,
    /// `VIRTIO_RDMA_NOTIFY_*` flags set by REQ_NOTIFY_CQ, cleared when they
    /// fire.
    pub armed: u32,
}

/// Why a completion could not be written.
#[derive(Debug, thiserror::Error)]
pub enum CqError {
    /// No CQ with that number.
    #[error("CQ {0} does not exist")]
    NoCq(u32),
    /// The driver left no CQE buffer in the CQ's virtqueue.
    #[error("CQ {0} overrun: no CQE buffer available")]
    Overrun(u32),
    /// The used ring could not be updated.
    #[error("CQ {0}: {1}")]
    Ring(u32, String),
}

/// Writes `cqe` to CQ `cqn` of `ctrl`'s device and signals the driver if
/// the ring or the arm state asks for it. `solicited`: the completion is
/// for a solicited message. Every completion of the device (requester,
/// responder, flush) is posted here.
pub fn post(ctrl: &Ctrl, cqn: u32, cqe: &VirtioRdmaCqReq, solicited: bool) -> Result<(), CqError> {
    if !ctrl.lock().cq_exists(cqn) {
        return Err(CqError::NoCq(cqn));
    }
    let Some(vring) = ctrl.cq_vring(cqn) else {
        return Err(CqError::NoCq(cqn));
    };
    let guard = ctrl.mem().memory();
    let bad = |why: std::fmt::Arguments<'_>| ctrl.guest_warn(format_args!("CQ {cqn}: {why}"));
    let write = |c: &VirtioRdmaCqReq, used_len: u32| {
        vring
            .put_record_as(&guard, c.as_bytes(), used_len, &bad)
            .map_err(|e| match e {
                RecordError::NoBuffer => CqError::Overrun(cqn),
                RecordError::Ring(e) => CqError::Ring(cqn, e),
            })
    };
    // Every completion of the device passes here: a hostile one lies here.
    match ctrl.hostile() {
        None => write(cqe, hostile::CQE_LEN)?,
        Some(h) => h.post_completion(ctrl.stats(), cqn, cqe, write)?,
    }
    // The guest's completion error counters count what happened, not a lie.
    if let Some(c) = Counter::for_status(cqe.status) {
        ctrl.stats().inc(c);
    }
    let force = ctrl.lock().cq_fire(cqn, |armed| {
        armed & VIRTIO_RDMA_NOTIFY_NEXT_COMPLETION != 0
            || (armed & VIRTIO_RDMA_NOTIFY_SOLICITED != 0 && (solicited || cqe.status != 0))
    });
    vring.used_grew(force);
    Ok(())
}
