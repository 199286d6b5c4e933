// SPDX-License-Identifier: GPL-2.0
//! Asynchronous events: what the device must tell the driver outside any
//! completion (a responder QP moved to error by a remote peer's request, a
//! completion lost to a CQ overrun), written into the event queue.
//!
//! The driver keeps the event queue filled with buffers; an event that
//! finds none is lost, and logged.

use std::fmt;

use log::error;
use vhost_user_backend::VringT;
use vm_memory::GuestAddressSpace;
use zerocopy::little_endian::U32;
use zerocopy::IntoBytes;

use crate::abi::{
    VirtioRdmaEvent, VIRTIO_RDMA_EVENT_CQ_ERR, VIRTIO_RDMA_EVENT_QP_ACCESS_ERR,
    VIRTIO_RDMA_EVENT_QP_FATAL, VIRTIO_RDMA_EVENT_QP_REQ_ERR,
};
use crate::ctrl::Ctrl;
use crate::vring::RecordError;

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
}

impl Event {
    fn record(self) -> VirtioRdmaEvent {
        let (t, element) = match self {
            Event::CqErr(n) => (VIRTIO_RDMA_EVENT_CQ_ERR, n),
            Event::QpFatal(n) => (VIRTIO_RDMA_EVENT_QP_FATAL, n),
            Event::QpReqErr(n) => (VIRTIO_RDMA_EVENT_QP_REQ_ERR, n),
            Event::QpAccessErr(n) => (VIRTIO_RDMA_EVENT_QP_ACCESS_ERR, n),
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
        }
    }
}

/// Reports `event` to `ctrl`'s driver.
pub fn post(ctrl: &Ctrl, event: Event) {
    let Some(vring) = ctrl.event_vring() else {
        return;
    };
    let guard = ctrl.mem().memory();
    let bad = |why: fmt::Arguments<'_>| ctrl.guest_warn(format_args!("event queue: {why}"));
    match vring.put_record(&guard, event.record().as_bytes(), &bad) {
        Ok(()) => {
            if vring.needs_notification().unwrap_or(true) {
                if let Err(e) = vring.signal_used_queue() {
                    error!("{}: event {event}: cannot signal: {e}", ctrl.name());
                }
            }
        }
        Err(RecordError::NoBuffer) => ctrl.guest_warn(format_args!(
            "event {event} lost: the driver left no event buffer"
        )),
        Err(e) => error!("{}: event {event} lost: {e}", ctrl.name()),
    }
}
