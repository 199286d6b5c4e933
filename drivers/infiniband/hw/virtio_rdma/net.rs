// SPDX-License-Identifier: GPL-2.0

//! The front end of the RoCE half of a virtio-net device (`VIRTIO_NET_F_ROCE`,
//! `Documentation/infiniband/virtio_rdma_net.rst`).
//!
//! virtio_net owns the function. When the feature is negotiated it creates the auxiliary device
//! `virtio_net.roce.<index>`, which hands over the RoCE queues (the ID-42 layout, always in the
//! rings mode), the virtio device and its netdev. At probe the driver borrows the control queue
//! alone and, polling for the answers, sends RESET (whatever an earlier driver left goes) and
//! QUERY_DEVICE (the configuration, for which the net config space has no room); checks the
//! configuration against the number of queues; borrows every RoCE queue; and starts the RDMA
//! device (`setup.rs`), whose port is that netdev, no MAC lookup.
//!
//! The function cannot be reset for the RDMA device alone (it would take Ethernet down). On
//! unbind the RDMA device is unregistered first, then every queue but the control queue is
//! closed and RESET sent: the device destroys what is left and gives back every buffer, which
//! the callbacks and then the borrowed set free. If RESET fails, the device may still use what
//! it was lent: the buffers stay lent and the memory `kept.rs` holds is leaked, never freed.

use kernel::{
    auxiliary,
    device::{self, Bound, Core},
    prelude::*,
    rdma::{self, RocePort},
    virtio::net_roce::RoceDevice,
};

use crate::{
    abi,
    config::{self, DeviceConfig},
    ctrl::{self, Ctrl},
    device::RdmaDev,
    queues,
    setup::{self, Found},
};

type Device<'a> = rdma::Device<RdmaDev<'a>>;

/// The driver's data of one RoCE device: its registered RDMA device.
pub(crate) struct NetRdma<'a> {
    ib: rdma::Registration<RdmaDev<'a>>,
}

impl<'a> NetRdma<'a> {
    fn new(adev: &'a auxiliary::Device<Core<'_>>) -> Result<Self> {
        let bound: &'a auxiliary::Device<Bound> = adev;
        let parent: &'a device::Device<Bound> = bound.as_ref();
        // SAFETY: The driver's ID table (`AUX_TABLE`) matches only `virtio_net.roce` devices,
        // which virtio_net creates embedded in a `struct virtio_net_roce` (patch 6/7); no other
        // module adds auxiliary devices under virtio_net's name.
        let roce = unsafe { RoceDevice::new(bound) }?;
        let config = query(parent, &roce)?;
        let layout = config.layout;
        let infos = setup::queue_infos(&layout)?;
        let vqs = roce
            .borrow_queues(
                &infos,
                queues::Handler::new(layout, config.raw.max_srq.get()),
            )
            .inspect_err(|e| dev_err!(parent, "cannot borrow the RoCE queues: {:?}\n", e))?;
        let ctrl = Ctrl::new(parent, vqs)?;
        let found = Found {
            parent,
            dma: roce.virtio_device().dma_device().ok_or(ENODEV)?,
            port: RocePort::Netdev(roce.netdev()),
        };
        Ok(Self {
            ib: setup::start(found, config, ctrl)?,
        })
    }
}

/// Resets the RoCE device and reads its configuration, on its control queue alone.
fn query(dev: &device::Device, roce: &RoceDevice<'_>) -> Result<DeviceConfig> {
    let set = roce
        .borrow_queues(&[setup::ctrl_info()], Ok(ctrl::Polled))
        .inspect_err(|e| dev_err!(dev, "cannot borrow the RoCE control queue: {:?}\n", e))?;
    let vq = set.get(abi::CTRL_VQ as usize).ok_or(ENODEV)?;
    ctrl::exec_polled::<_, ()>(dev, vq, abi::cmd::RESET, &())
        .inspect_err(|e| dev_err!(dev, "RESET failed: {:?}\n", e))?;
    let raw: abi::Config = ctrl::exec_polled(dev, vq, abi::cmd::QUERY_DEVICE, &())
        .inspect_err(|e| dev_err!(dev, "QUERY_DEVICE failed: {:?}\n", e))?;
    config::check_queried(dev, &raw, roce.num_queues())
}

/// Stops the device of an unregistered RDMA device without a virtio reset (see the module
/// documentation).
fn stop(dev: &Device<'_>) {
    let queues = dev.ctrl.queues();
    for index in 0..queues.len() {
        if index != abi::CTRL_VQ as usize {
            if let Some(vq) = queues.get(index) {
                vq.close();
            }
        }
    }
    if let Err(e) = dev.ctrl.exec::<_, ()>(abi::cmd::RESET, &()) {
        dev_err!(
            dev.as_ref(),
            "RESET failed ({:?}): what the device was lent stays lent\n",
            e
        );
        dev.kept_rings.leak();
        dev.kept_mrs.leak();
    }
}

/// The driver of the RoCE half of virtio-net devices.
pub(crate) struct NetDriver;

impl auxiliary::Driver for NetDriver {
    type IdInfo = ();
    type Data<'bound> = NetRdma<'bound>;

    const ID_TABLE: auxiliary::IdTable<Self::IdInfo> = &crate::AUX_TABLE;

    fn probe<'bound>(
        adev: &'bound auxiliary::Device<Core<'_>>,
        _info: &'bound Self::IdInfo,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        NetRdma::new(adev)
    }

    fn unbind<'bound>(adev: &'bound auxiliary::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        dev_dbg!(adev, "unbinding\n");
        // Users of the RDMA device are gone when this returns; the control queue still works.
        this.ib.unregister();
        stop(this.ib.device());
    }
}
