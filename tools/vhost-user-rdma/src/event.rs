// SPDX-License-Identifier: GPL-2.0
//! Asynchronous events: what the device must tell the driver outside any
//! completion (a responder QP moved to error by a remote peer's request, a
//! completion lost to a CQ overrun, an SRQ running low, a QP with an SRQ
//! done with its receives), written into the event queue.
//!
//! The driver keeps the event queue filled with buffers; an event that
//! finds none is lost, and logged.

use std::fmt;

use log::error;
use vm_memory::GuestAddressSpace;
use zerocopy::little_endian::U32;
use zerocopy::IntoBytes;

use crate::abi::{
    VirtioRdmaEvent, VIRTIO_RDMA_EVENT_CQ_ERR, VIRTIO_RDMA_EVENT_QP_ACCESS_ERR,
    VIRTIO_RDMA_EVENT_QP_FATAL, VIRTIO_RDMA_EVENT_QP_LAST_WQE_REACHED,
    VIRTIO_RDMA_EVENT_QP_REQ_ERR, VIRTIO_RDMA_EVENT_SRQ_LIMIT_REACHED,
};
use crate::ctrl::Ctrl;
use crate::vring::{RdmaVring, RecordError};

/// One asynchronous event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A completion of this CQ was lost (overrun).
    CqErr(u32),
    /// This QP moved to error and no completion says why (its CQ overran).
    QpFatal(u32),
    /// This responder QP moved to error on an invalid request.
    QpReqErr(u32),
    /// This responder QP moved to error on a remote access violation.
    QpAccessErr(u32),
    /// A receive taken left fewer receives in this SRQ than its limit.
    SrqLimitReached(u32),
    /// This QP, which takes receives from an SRQ, entered ERR: its receive
    /// completions are all out.
    QpLastWqeReached(u32),
}

impl Event {
    fn record(self) -> VirtioRdmaEvent {
        let (t, element) = match self {
            Event::CqErr(n) => (VIRTIO_RDMA_EVENT_CQ_ERR, n),
            Event::QpFatal(n) => (VIRTIO_RDMA_EVENT_QP_FATAL, n),
            Event::QpReqErr(n) => (VIRTIO_RDMA_EVENT_QP_REQ_ERR, n),
            Event::QpAccessErr(n) => (VIRTIO_RDMA_EVENT_QP_ACCESS_ERR, n),
            Event::SrqLimitReached(n) => (VIRTIO_RDMA_EVENT_SRQ_LIMIT_REACHED, n),
            Event::QpLastWqeReached(n) => (VIRTIO_RDMA_EVENT_QP_LAST_WQE_REACHED, n),
        };
        VirtioRdmaEvent {
            event_type: U32::new(t),
            element: U32::new(element),
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Event::CqErr(n) => write!(f, "CQ {n} error (overrun)"),
            Event::QpFatal(n) => write!(f, "QP {n} fatal error"),
            Event::QpReqErr(n) => write!(f, "QP {n} invalid request error"),
            Event::QpAccessErr(n) => write!(f, "QP {n} access error"),
            Event::SrqLimitReached(n) => write!(f, "SRQ {n} limit reached"),
            Event::QpLastWqeReached(n) => write!(f, "QP {n} last WQE reached"),
        }
    }
}

/// Reports `event` to `ctrl`'s driver.
pub fn post(ctrl: &Ctrl, event: Event) {
    let Some(vring) = ctrl.event_vring() else {
        return;
    };
    let record = event.record();
    match put(ctrl, vring, record.as_bytes(), RECORD_LEN) {
        Ok(()) => {}
        Err(RecordError::NoBuffer) => ctrl.guest_warn(format_args!(
            "event {event} lost: the driver left no event buffer"
        )),
        Err(e) => error!("{}: event {event} lost: {e}", ctrl.name()),
    }
}

/// Posts an event a hostile device made up (`hostile.rs`): `record`,
/// returned in the used ring with length `used_len`. Fails with
/// [`RecordError::NoBuffer`] if there is no event buffer (or no event
/// queue yet).
pub(crate) fn post_made_up(
    ctrl: &Ctrl,
    record: &VirtioRdmaEvent,
    used_len: u32,
) -> Result<(), RecordError> {
    let vring = ctrl.event_vring().ok_or(RecordError::NoBuffer)?;
    put(ctrl, vring, record.as_bytes(), used_len)
}

/// Bytes of an event record.
const RECORD_LEN: u32 = core::mem::size_of::<VirtioRdmaEvent>() as u32;

/// Writes `record` into the next event buffer with used length
/// `used_len`, and signals the driver if the ring asks for it.
fn put(ctrl: &Ctrl, vring: &RdmaVring, record: &[u8], used_len: u32) -> Result<(), RecordError> {
    let guard = ctrl.mem().memory();
    let bad = |why: fmt::Arguments<'_>| ctrl.guest_warn(format_args!("event queue: {why}"));
    vring.put_record_as(&guard, record, used_len, &bad)?;
    vring.used_grew(false);
    Ok(())
}
