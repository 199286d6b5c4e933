// SPDX-License-Identifier: GPL-2.0

//! The front end of the virtio-rdma device (virtio device ID 42).
//!
//! At probe the driver reads and checks the device's config space (`config.rs`), creates its
//! virtqueues (the control queue, one per CQ, an SQ/RQ pair per QP, the event queue; with
//! `VIRTIO_RDMA_F_RINGS`, the notification queue and the completion-event queues), sets
//! DRIVER_OK and starts the RDMA device (`setup.rs`), whose port is bound to the Ethernet
//! interface whose MAC the config names.
//!
//! On unbind the RDMA device is unregistered first (that still needs the control queue), then
//! the device is reset, the buffers it still holds are taken back and the virtqueues deleted;
//! memory it kept after a destroy it did not confirm goes last (`kept.rs`).
//! A device that needs a reset (its backend went away) is failed at once and, once it is back,
//! reset and probed again as on unbind and probe (`health.rs`).

use kernel::{
    device::{self, Bound, Core},
    prelude::*,
    rdma::{self, RocePort},
    virtio,
};

use crate::{
    abi, config,
    ctrl::Ctrl,
    device::RdmaDev,
    health, queues,
    setup::{self, Found},
};

/// The driver's data of one virtio device: its registered RDMA device.
pub(crate) struct VirtioRdma<'a> {
    ib: rdma::Registration<RdmaDev<'a>>,
}

impl<'a> VirtioRdma<'a> {
    fn new(dev: &'a virtio::Device<Core<'_>>) -> Result<Self> {
        let config = config::read(dev)?;
        let layout = config.layout;
        let infos = setup::queue_infos(&layout)?;
        let vqs = dev
            .find_vqs(
                &infos,
                queues::Handler::new(layout, config.raw.max_srq.get()),
            )
            .inspect_err(|e| {
                let (max_cq, max_qp) = (config.raw.max_cq.get(), config.raw.max_qp.get());
                // The ring queues only when they were negotiated (zero otherwise).
                match config.raw.num_comp_vqs.get() {
                    0 => dev_err!(
                        dev,
                        "cannot set up {} virtqueues (2 + max_cq {} + 2 * max_qp {}): {:?}\n",
                        infos.len(),
                        max_cq,
                        max_qp,
                        e
                    ),
                    comp => dev_err!(
                        dev,
                        "cannot set up {} virtqueues (2 + max_cq {} + 2 * max_qp {} + 1 + \
                         num_comp_vqs {}): {:?}\n",
                        infos.len(),
                        max_cq,
                        max_qp,
                        comp,
                        e
                    ),
                }
            })?;
        let bound: &'a virtio::Device<Bound> = dev;
        let parent: &'a device::Device<Bound> = bound.as_ref();
        let ctrl = Ctrl::new(parent, vqs)?;
        dev.device_ready();
        let found = Found {
            parent,
            dma: bound.dma_device().ok_or(ENODEV)?,
            port: RocePort::Mac(config.raw.mac),
        };
        Ok(Self {
            ib: setup::start(found, config, ctrl)?,
        })
    }
}

/// The driver of the virtio-rdma device.
pub(crate) struct Id42Driver;

impl virtio::Driver for Id42Driver {
    type Data<'bound> = VirtioRdma<'bound>;

    const ID_TABLE: virtio::IdTable = &crate::VIRTIO_TABLE;

    const FEATURES: &'static [u32] = &[abi::F_RINGS];

    fn probe<'bound>(
        dev: &'bound virtio::Device<Core<'_>>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        VirtioRdma::new(dev)
    }

    fn unbind<'bound>(dev: &'bound virtio::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        dev_dbg!(dev, "unbinding\n");
        // Users of the RDMA device are gone when this returns; the control queue still works.
        this.ib.unregister();
    }

    fn config_changed<'bound>(dev: &'bound virtio::Device<Bound>, this: Pin<&Self::Data<'bound>>) {
        health::config_changed(this.ib.device(), dev);
    }
}
