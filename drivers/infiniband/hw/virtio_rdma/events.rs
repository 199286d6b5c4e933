// SPDX-License-Identifier: GPL-2.0

//! Asynchronous events: the device's reports of errors that no completion carries (a responder
//! QP moved to error by a peer's bad request, completions lost to a CQ overrun).
//!
//! The driver keeps the event queue (the last virtqueue) filled with event buffers, allocated
//! once at probe, and its callback always enabled. The callback (hard-IRQ context) checks each
//! event, lends the buffer straight back, and then, with no queue lock held, hands the event to
//! the consumer of the CQ or QP it names.

use kernel::{
    prelude::*,
    rdma::{CqRegistry, QpEvent, QpRegistry},
    virtio::Virtqueue,
};
use zerocopy::FromZeros;

use crate::{abi, verbs::RdmaDev};

/// The buffer of one event: what the device writes.
pub(crate) type EventBuf = abi::Event;

const EVENT_LEN: usize = core::mem::size_of::<EventBuf>();

/// Most event buffers lent to the device (fewer if the queue is smaller).
const MAX_EVENT_BUFS: u32 = 256;

/// Events taken off the queue per lock hold.
const BATCH: usize = 16;

/// A checked event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// Completions of this CQ were lost.
    CqError(u32),
    /// An error of this QP.
    Qp(u32, QpEvent),
}

/// Decodes the event the device wrote into `buf`, `len` bytes by its account; `None` if the
/// length or the type is not the protocol's.
pub(crate) fn decode(buf: &EventBuf, len: u32) -> Option<Event> {
    if len as usize != EVENT_LEN {
        return None;
    }
    let n = buf.element.get();
    Some(match buf.event_type.get() {
        abi::event::CQ_ERR => Event::CqError(n),
        abi::event::QP_FATAL => Event::Qp(n, QpEvent::Fatal),
        abi::event::QP_REQ_ERR => Event::Qp(n, QpEvent::RequestError),
        abi::event::QP_ACCESS_ERR => Event::Qp(n, QpEvent::AccessError),
        _ => return None,
    })
}

/// Lends the event queue its buffers; called once the device is ready.
pub(crate) fn fill(queue: &Virtqueue) -> Result {
    let count = queue.size().min(MAX_EVENT_BUFS);
    // Allocate first: nothing may sleep once the queue is locked.
    let mut bufs = KVec::with_capacity(count as usize, GFP_KERNEL)?;
    for _ in 0..count {
        bufs.push(KBox::new(EventBuf::new_zeroed(), GFP_KERNEL)?, GFP_KERNEL)?;
    }
    let mut q = queue.lock::<EventBuf>()?;
    for buf in bufs {
        q.add(buf, 0, EVENT_LEN).map_err(|(e, _)| e)?;
    }
    let notify = q.kick_prepare();
    drop(q);
    if notify {
        queue.notify();
    }
    Ok(())
}

/// The event queue's callback (hard-IRQ context).
pub(crate) fn callback(
    cqs: &CqRegistry<RdmaDev<'_>>,
    qps: &QpRegistry<RdmaDev<'_>>,
    vq: &Virtqueue,
) {
    loop {
        // (event, or None for a malformed one; the used length)
        let mut got = [(None, 0u32); BATCH];
        let mut n = 0;
        {
            let Ok(mut q) = vq.lock::<EventBuf>() else {
                return;
            };
            while n < BATCH {
                let Some((buf, len)) = q.get_buf() else {
                    break;
                };
                got[n] = (decode(&buf, len), len);
                n += 1;
                if q.add(buf, 0, EVENT_LEN).is_err() {
                    // Only after a reset: the buffer is freed, nothing is lost that matters.
                    continue;
                }
            }
            let notify = n > 0 && q.kick_prepare();
            drop(q);
            if notify {
                vq.notify();
            }
        }
        // Dispatch without the queue's lock: the registries' locks are taken inside queue locks
        // elsewhere (a CQ's completion event), never the other way round.
        for &(event, len) in &got[..n] {
            dispatch(cqs, qps, vq, event, len);
        }
        if n < BATCH {
            return;
        }
    }
}

/// Hands one event to its consumer, or reports (once) why it cannot.
fn dispatch(
    cqs: &CqRegistry<RdmaDev<'_>>,
    qps: &QpRegistry<RdmaDev<'_>>,
    vq: &Virtqueue,
    event: Option<Event>,
    len: u32,
) {
    let delivered = match event {
        Some(Event::CqError(cqn)) => cqs.error_event(cqn),
        Some(Event::Qp(qpn, ev)) => qps.event(qpn, ev),
        None => {
            kernel::pr_warn_once!(
                "virtio_rdma: event queue {}: malformed event ({} bytes); ignored\n",
                vq.index(),
                len
            );
            return;
        }
    };
    if !delivered {
        kernel::pr_warn_once!(
            "virtio_rdma: event {:?} names no CQ or QP of the device; ignored\n",
            event
        );
    }
}

#[kunit_tests(virtio_rdma_events)]
mod tests {
    use super::*;

    fn ev(event_type: u32, element: u32) -> EventBuf {
        EventBuf {
            event_type: event_type.into(),
            element: element.into(),
        }
    }

    #[test]
    fn decodes_every_event_type() {
        assert_eq!(
            decode(&ev(abi::event::CQ_ERR, 3), 8),
            Some(Event::CqError(3))
        );
        assert_eq!(
            decode(&ev(abi::event::QP_FATAL, 2), 8),
            Some(Event::Qp(2, QpEvent::Fatal))
        );
        assert_eq!(
            decode(&ev(abi::event::QP_REQ_ERR, 5), 8),
            Some(Event::Qp(5, QpEvent::RequestError))
        );
        assert_eq!(
            decode(&ev(abi::event::QP_ACCESS_ERR, u32::MAX), 8),
            Some(Event::Qp(u32::MAX, QpEvent::AccessError))
        );
    }

    #[test]
    fn refuses_unknown_types_and_bad_lengths() {
        assert_eq!(decode(&ev(4, 1), 8), None);
        assert_eq!(decode(&ev(u32::MAX, 1), 8), None);
        assert_eq!(decode(&ev(abi::event::QP_FATAL, 1), 0), None);
        assert_eq!(decode(&ev(abi::event::QP_FATAL, 1), 4), None);
        assert_eq!(decode(&ev(abi::event::QP_FATAL, 1), 9), None);
        assert_eq!(decode(&ev(abi::event::QP_FATAL, 1), u32::MAX), None);
    }
}
