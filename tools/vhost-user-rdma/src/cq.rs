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
//!
//! A ring CQ (`VIRTIO_RDMA_F_RINGS`, `ring.rs`) has no virtqueue: its
//! completions go into its ring in guest memory, and the device raises an
//! event on its completion-event queue only when the driver armed it in the
//! ring's record. An event that finds no buffer there waits (one per CQ)
//! until the driver adds buffers and kicks that queue.

use std::sync::Arc;

use vm_memory::GuestAddressSpace;
use zerocopy::IntoBytes;

use crate::abi::{
    VirtioRdmaCompEvent, VirtioRdmaCqReq, VIRTIO_RDMA_NOTIFY_NEXT_COMPLETION,
    VIRTIO_RDMA_NOTIFY_SOLICITED,
};
use crate::ctrl::Ctrl;
use crate::hostile;
use crate::ring::{CqRing, PushError};
use crate::stats::Counter;
use crate::vring::RecordError;

/// One completion queue.
#[derive(Clone, Debug, Default)]
pub struct Cq {
    /// Entries the driver asked for.
    pub cqe: u32,
    /// `VIRTIO_RDMA_NOTIFY_*` flags set by REQ_NOTIFY_CQ, cleared when they
    /// fire.
    pub armed: u32,
    /// Its ring, if it is in guest memory (else its virtqueue).
    pub ring: Option<Arc<CqRing>>,
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
    /// The CQ's ring in guest memory is full (or its consumer is bogus:
    /// only its owner's completions are lost).
    #[error("CQ {0} overrun: its ring is full")]
    RingFull(u32),
    /// The used ring could not be updated.
    #[error("CQ {0}: {1}")]
    Ring(u32, String),
}

/// Writes `cqe` to CQ `cqn` of `ctrl`'s device and signals the driver if
/// the ring or the arm state asks for it. `solicited`: the completion is
/// for a solicited message. Every completion of the device (requester,
/// responder, flush) is posted here.
pub fn post(ctrl: &Ctrl, cqn: u32, cqe: &VirtioRdmaCqReq, solicited: bool) -> Result<(), CqError> {
    let counter = Counter::for_status(cqe.status);
    let (ring, set) = {
        let st = ctrl.lock();
        let Some(cq) = st.cq(cqn) else {
            return Err(CqError::NoCq(cqn));
        };
        // An error completion counts in the counter set of its QP (for an
        // SRQ's receive: the QP that took it) if it has one; a success
        // counts nothing and looks nothing up.
        let set = counter.and_then(|_| st.qp(cqe.qp_num.get())?.counters.clone());
        (cq.ring.clone(), set)
    };
    let count = || {
        if let Some(c) = counter {
            ctrl.stats().of(set.as_deref()).inc(c);
        }
    };
    if let Some(ring) = ring {
        return post_ring(ctrl, cqn, &ring, cqe, solicited, count);
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
    count();
    let force = ctrl.lock().cq_fire(cqn, |armed| {
        armed & VIRTIO_RDMA_NOTIFY_NEXT_COMPLETION != 0
            || (armed & VIRTIO_RDMA_NOTIFY_SOLICITED != 0 && (solicited || cqe.status != 0))
    });
    vring.used_grew(force);
    Ok(())
}

/// [`post`] for a ring CQ; `count` counts the completion once written.
fn post_ring(
    ctrl: &Ctrl,
    cqn: u32,
    ring: &CqRing,
    cqe: &VirtioRdmaCqReq,
    solicited: bool,
    count: impl FnOnce(),
) -> Result<(), CqError> {
    let guard = ctrl.mem().memory();
    // A slot has a fixed size: a hostile device's lie about a length is
    // told as the genuine completion here.
    let push = |c: &VirtioRdmaCqReq, _used_len: u32| {
        ring.push(&guard, c).map_err(|e| match e {
            PushError::Full => CqError::RingFull(cqn),
            PushError::Fault => CqError::Ring(cqn, "its ring cannot be written".into()),
        })
    };
    match ctrl.hostile() {
        None => push(cqe, hostile::CQE_LEN)?,
        Some(h) => h.post_completion(ctrl.stats(), cqn, cqe, push)?,
    }
    count();
    if ring.fire(&guard, solicited || cqe.status != 0) {
        comp_event(ctrl, ring.comp_vq(), cqn);
    }
    Ok(())
}

/// Tells the driver, on completion-event queue `vq`, that armed CQ `cqn`
/// has completions; without a buffer there, the event waits for one.
fn comp_event(ctrl: &Ctrl, vq: u32, cqn: u32) {
    // Held across the attempt: a kick of `vq` served meanwhile on another
    // thread would miss the event it is about to queue.
    let mut waiting = ctrl.comp_waiting();
    if !put_comp_event(ctrl, vq, cqn) {
        waiting.insert((vq, cqn));
    }
}

/// Puts one event into queue `vq`; whether it found a buffer.
fn put_comp_event(ctrl: &Ctrl, vq: u32, cqn: u32) -> bool {
    let Some(vring) = ctrl.comp_vring(vq) else {
        return true;
    };
    let event = VirtioRdmaCompEvent {
        cqn: cqn.into(),
        reserved: 0.into(),
    };
    let guard = ctrl.mem().memory();
    let bad = |why: std::fmt::Arguments<'_>| {
        ctrl.guest_warn(format_args!("completion event queue {vq}: {why}"))
    };
    match vring.put_record(&guard, event.as_bytes(), &bad) {
        Ok(()) => {
            vring.used_grew(false);
            true
        }
        Err(RecordError::NoBuffer) => false,
        Err(RecordError::Ring(e)) => {
            bad(format_args!("{e}"));
            true
        }
    }
}

/// Delivers the events waiting for buffers of queue `vq` (it was kicked).
pub fn comp_vq_kicked(ctrl: &Ctrl, vq: u32) {
    let mut waiting = ctrl.comp_waiting();
    let ours: Vec<u32> = waiting
        .iter()
        .filter(|(q, _)| *q == vq)
        .map(|(_, cqn)| *cqn)
        .collect();
    for cqn in ours {
        if !put_comp_event(ctrl, vq, cqn) {
            break;
        }
        waiting.remove(&(vq, cqn));
    }
}
