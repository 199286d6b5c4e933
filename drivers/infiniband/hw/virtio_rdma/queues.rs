// SPDX-License-Identifier: GPL-2.0

//! The notifications of the device's virtqueues (hard-IRQ context): control commands coming
//! back wake their caller (`ctrl.rs`); completions arriving on a CQ's queue notify the CQ's
//! consumer if it armed the CQ (`cq.rs`); asynchronous events reach the consumer of the CQ,
//! QP or SRQ they name (`events.rs`); with rings, completion events reach the consumer of the
//! CQ they name (`events.rs`). Send and receive queues, and the notification queue, do not
//! notify.

use kernel::{
    prelude::*,
    rdma::{CqRegistry, QpRegistry, SrqRegistry},
    virtio::{Virtqueue, VqHandler},
};

use crate::{
    config::{QueueKind, QueueLayout},
    cq,
    ctrl::CtrlDone,
    device::RdmaDev,
    events,
};

/// Handles the notifications of every virtqueue of one device.
#[pin_data]
pub(crate) struct Handler<'a> {
    layout: QueueLayout,
    /// The control command in flight.
    #[pin]
    pub(crate) ctrl: CtrlDone,
    /// The device's CQs, by CQ number (those with rings too).
    #[pin]
    pub(crate) cqs: CqRegistry<RdmaDev<'a>>,
    /// The device's QPs, by QP number (to find the QP a completion or an event names; those
    /// with rings too).
    #[pin]
    pub(crate) qps: QpRegistry<RdmaDev<'a>>,
    /// The device's shared receive queues, by SRQ number (to find the SRQ an event names).
    #[pin]
    pub(crate) srqs: SrqRegistry<RdmaDev<'a>>,
}

impl Handler<'_> {
    /// The handler of the queues of `layout`, on a device of `max_srq` SRQs.
    pub(crate) fn new(layout: QueueLayout, max_srq: u32) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            layout,
            ctrl <- CtrlDone::new(),
            cqs <- CqRegistry::new(layout.total_cq()),
            qps <- QpRegistry::new(layout.total_qp()),
            // SRQ numbers are 1..=max_srq (checked by `config::validate`: no overflow).
            srqs <- SrqRegistry::new(if max_srq == 0 { 0 } else { max_srq + 1 }),
        })
    }
}

impl VqHandler for Handler<'_> {
    fn callback(&self, vq: &Virtqueue) {
        match self.layout.kind(vq.index()) {
            Some(QueueKind::Ctrl) => self.ctrl.used(vq),
            Some(QueueKind::Cq(cqn)) => cq::completion_event(&self.cqs, &self.qps, cqn, vq),
            Some(QueueKind::Event) => events::callback(
                events::Objects {
                    cqs: &self.cqs,
                    qps: &self.qps,
                    srqs: &self.srqs,
                },
                vq,
            ),
            Some(QueueKind::Comp(_)) => events::comp_callback(&self.layout, &self.cqs, vq),
            // Send and receive queues and the notification queue are set up without a callback.
            Some(QueueKind::Sq(_) | QueueKind::Rq(_) | QueueKind::Notify) | None => {}
        }
    }
}
