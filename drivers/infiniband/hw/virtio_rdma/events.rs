// SPDX-License-Identifier: GPL-2.0

//! The device's notifications that are not completions: asynchronous events (errors that no
//! completion carries: a responder QP moved to error by a peer's bad request, completions lost
//! to a CQ overrun) on the event queue, and, with queues in guest memory
//! (`VIRTIO_RDMA_F_RINGS`), completion events (an armed CQ with a ring has completions) on the
//! completion-event queues.
//!
//! The driver keeps each of these queues filled with device-writable buffers, allocated once at
//! probe ([`fill`]), and its callback always enabled. The callback (hard-IRQ context, [`drain`])
//! checks each element, lends the buffer straight back, and then, with no queue lock held, hands
//! the element to the consumer of the CQ or QP it names.

use kernel::{
    prelude::*,
    rdma::{CqRegistry, QpEvent, QpRegistry, SrqRegistry},
    virtio::{DmaBuf, Virtqueue},
};
use zerocopy::FromZeros;

use crate::{abi, config::QueueLayout, cq, device::RdmaDev};

/// The buffer of one event: what the device writes.
pub(crate) type EventBuf = abi::Event;

const EVENT_LEN: usize = core::mem::size_of::<EventBuf>();

/// The buffer of one completion event: what the device writes.
pub(crate) type CompEventBuf = abi::CompEvent;

const COMP_EVENT_LEN: usize = core::mem::size_of::<CompEventBuf>();

/// Most buffers lent to the device per queue (fewer if the queue is smaller).
const MAX_EVENT_BUFS: u32 = 256;

/// Elements taken off a queue per lock hold.
const BATCH: usize = 16;

/// A checked event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// Completions of this CQ were lost.
    CqError(u32),
    /// An event of this QP.
    Qp(u32, QpEvent),
    /// Fewer receives than its armed limit are left in this shared receive queue.
    SrqLimit(u32),
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
        abi::event::QP_LAST_WQE_REACHED => Event::Qp(n, QpEvent::LastWqeReached),
        abi::event::SRQ_LIMIT_REACHED => Event::SrqLimit(n),
        _ => return None,
    })
}

/// Decodes the completion event the device wrote into `buf`, `len` bytes by its account: the
/// number of the CQ it names, if that is a CQ with a ring of `layout`. `None` if the length is
/// not the protocol's or the number is not of such a CQ.
pub(crate) fn decode_comp(layout: &QueueLayout, buf: &CompEventBuf, len: u32) -> Option<u32> {
    if len as usize != COMP_EVENT_LEN {
        return None;
    }
    let cqn = buf.cqn.get();
    layout.is_ring_cq(cqn).then_some(cqn)
}

/// Lends `queue` its device-writable buffers of `B`, as many as it holds up to a bound; called
/// once the device is ready.
pub(crate) fn fill<B: DmaBuf + FromZeros>(queue: &Virtqueue) -> Result {
    let count = queue.size().min(MAX_EVENT_BUFS);
    // Allocate first: nothing may sleep once the queue is locked.
    let mut bufs = KVec::with_capacity(count as usize, GFP_KERNEL)?;
    for _ in 0..count {
        bufs.push(KBox::new(B::new_zeroed(), GFP_KERNEL)?, GFP_KERNEL)?;
    }
    let mut q = queue.lock::<B>()?;
    for buf in bufs {
        q.add(buf, 0, core::mem::size_of::<B>())
            .map_err(|(e, _)| e)?;
    }
    let notify = q.kick_prepare();
    drop(q);
    if notify {
        queue.notify();
    }
    Ok(())
}

/// The callback of a queue [`fill`] filled with buffers of `B` (hard-IRQ context): `decode`s
/// what the device wrote into each used buffer (with the length it reports), lends the buffer
/// straight back, and then hands what was decoded to `deliver` without the queue's lock: the
/// registries' locks are taken inside queue locks elsewhere (a CQ's completion event), never
/// the other way round.
pub(crate) fn drain<B: DmaBuf, E: Copy + Default>(
    vq: &Virtqueue,
    decode: impl Fn(&B, u32) -> E,
    mut deliver: impl FnMut(E),
) {
    loop {
        let mut got = [E::default(); BATCH];
        let mut n = 0;
        {
            let Ok(mut q) = vq.lock::<B>() else {
                return;
            };
            while n < BATCH {
                let Some((buf, len)) = q.get_buf() else {
                    break;
                };
                got[n] = decode(&buf, len);
                n += 1;
                if q.add(buf, 0, core::mem::size_of::<B>()).is_err() {
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
        for &element in &got[..n] {
            deliver(element);
        }
        if n < BATCH {
            return;
        }
    }
}

/// The event queue's callback (hard-IRQ context).
pub(crate) fn callback(objects: Objects<'_, '_>, vq: &Virtqueue) {
    drain(
        vq,
        |buf: &EventBuf, len| (decode(buf, len), len),
        |(event, len)| dispatch(objects, vq, event, len),
    );
}

/// The registries an event may name an object of.
#[derive(Clone, Copy)]
pub(crate) struct Objects<'r, 'a> {
    pub(crate) cqs: &'r CqRegistry<RdmaDev<'a>>,
    pub(crate) qps: &'r QpRegistry<RdmaDev<'a>>,
    pub(crate) srqs: &'r SrqRegistry<RdmaDev<'a>>,
}

/// The callback of a completion-event queue (hard-IRQ context): calls the completion handler
/// of the CQ each event names, a kernel CQ's only if its consumer armed it (`cq::ring_event`;
/// the consumer of a user CQ, uverbs, tells the process through its completion channel). An event that is malformed or names no CQ number with a ring is
/// dropped, reported once; one for a number no CQ has (any more) is dropped quietly: the CQ's
/// last event may cross its destruction.
pub(crate) fn comp_callback(layout: &QueueLayout, cqs: &CqRegistry<RdmaDev<'_>>, vq: &Virtqueue) {
    drain(
        vq,
        |buf: &CompEventBuf, len| (decode_comp(layout, buf, len), buf.cqn.get(), len),
        |(cqn, raw_cqn, len)| {
            match cqn {
            // Only CQs with rings have such numbers.
            Some(cqn) => cq::ring_event(cqs, cqn),
            None => kernel::pr_warn_once!(
                "virtio_rdma: completion-event queue {}: event of {} bytes for CQ {}, which is no CQ with a ring; dropped\n",
                vq.index(),
                len,
                raw_cqn
            ),
        }
        },
    );
}

/// Hands one event to its consumer, or reports (once) why it cannot.
fn dispatch(objects: Objects<'_, '_>, vq: &Virtqueue, event: Option<Event>, len: u32) {
    let delivered = match event {
        Some(Event::CqError(cqn)) => objects.cqs.error_event(cqn),
        Some(Event::Qp(qpn, ev)) => objects.qps.event(qpn, ev),
        Some(Event::SrqLimit(srqn)) => objects.srqs.with(srqn, |srq| srq.limit_event()).is_some(),
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
            "virtio_rdma: event {:?} names no CQ, QP or SRQ of the device; ignored\n",
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
        assert_eq!(
            decode(&ev(abi::event::QP_LAST_WQE_REACHED, 7), 8),
            Some(Event::Qp(7, QpEvent::LastWqeReached))
        );
        assert_eq!(
            decode(&ev(abi::event::SRQ_LIMIT_REACHED, 1), 8),
            Some(Event::SrqLimit(1))
        );
    }

    fn comp(cqn: u32) -> CompEventBuf {
        CompEventBuf {
            cqn: cqn.into(),
            reserved: 0.into(),
        }
    }

    #[test]
    fn decodes_completion_events_of_ring_cqs_only() {
        let rings = crate::config::Rings {
            max_ring_cq: 4,
            max_ring_qp: 2,
            num_comp_vqs: 1,
        };
        let layout = QueueLayout::new(8, 4).and_then(|l| l.with_rings(rings));
        assert!(layout.is_some());
        let Some(layout) = layout else { return };
        // Ring CQs are 8..12.
        assert_eq!(decode_comp(&layout, &comp(8), 8), Some(8));
        assert_eq!(decode_comp(&layout, &comp(11), 8), Some(11));
        // A CQ with a virtqueue, or no CQ at all.
        assert_eq!(decode_comp(&layout, &comp(0), 8), None);
        assert_eq!(decode_comp(&layout, &comp(7), 8), None);
        assert_eq!(decode_comp(&layout, &comp(12), 8), None);
        assert_eq!(decode_comp(&layout, &comp(u32::MAX), 8), None);
        // The length must be exact.
        for len in [0, 4, 7, 9, 16, u32::MAX] {
            assert_eq!(decode_comp(&layout, &comp(8), len), None);
        }
        // A device without rings has no ring CQ.
        let plain = QueueLayout::new(8, 4);
        assert_eq!(plain.and_then(|l| decode_comp(&l, &comp(8), 8)), None);
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
