// SPDX-License-Identifier: GPL-2.0

//! The notifications of the device's virtqueues (hard-IRQ context): control commands coming
//! back wake their caller (`ctrl.rs`); completions arriving on a CQ's queue notify the CQ's
//! consumer if it armed the CQ (`cq.rs`); asynchronous events reach the consumer of the CQ or
//! QP they name (`events.rs`); with rings, completion events reach the consumer of the CQ they
//! name (`events.rs`). Send and receive queues, and the notification queue, do not notify.

use kernel::{
    prelude::*,
    rdma::{CqRegistry, QpRegistry},
    virtio::{Virtqueue, VqHandler},
};

use crate::{
    config::{QueueKind, QueueLayout},
    cq,
    ctrl::CtrlDone,
    events,
    verbs::RdmaDev,
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
}

impl Handler<'_> {
    /// The handler of the queues of `layout`.
    pub(crate) fn new(layout: QueueLayout) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            layout,
            ctrl <- CtrlDone::new(),
            cqs <- CqRegistry::new(layout.total_cq()),
            qps <- QpRegistry::new(layout.total_qp()),
        })
    }
}

impl VqHandler for Handler<'_> {
    fn callback(&self, vq: &Virtqueue) {
        match self.layout.kind(vq.index()) {
            Some(QueueKind::Ctrl) => self.ctrl.used(vq),
            Some(QueueKind::Cq(cqn)) => cq::completion_event(&self.cqs, &self.qps, cqn, vq),
            Some(QueueKind::Event) => events::callback(&self.cqs, &self.qps, vq),
            Some(QueueKind::Comp(_)) => events::comp_callback(&self.layout, &self.cqs, vq),
            // Send and receive queues and the notification queue are set up without a callback.
            Some(QueueKind::Sq(_) | QueueKind::Rq(_) | QueueKind::Notify) | None => {}
        }
    }
}
