// SPDX-License-Identifier: GPL-2.0

//! Driver for the virtio RDMA device, in either of its two personalities.
//!
//! The device ABI is `include/uapi/linux/virtio_rdma.h`. The device is found by one of two thin
//! front ends: the virtio-rdma device itself (virtio device ID 42, `id42.rs`), or the RoCE half
//! of a virtio-net device that negotiated `VIRTIO_NET_F_ROCE`, which virtio_net hands over as an
//! auxiliary device (`net.rs`). Either gives the core its validated configuration (`config.rs`)
//! and its queues; the core starts the RDMA device `virtio_rdma%d` (`setup.rs`) with one RoCEv2
//! port bound to its Ethernet interface. Its verbs (`verbs.rs`) are control commands
//! (`ctrl.rs`) and elements on data queues (`qp.rs`, `cq.rs`) or rings in guest memory
//! (`rings.rs`); the queues' notifications are dispatched by `queues.rs`.

use kernel::{
    auxiliary, bindings, driver, prelude::*, virtio, virtio::net_roce, InPlaceModule, ThisModule,
};

mod abi;
mod ah;
mod config;
mod counter_sets;
mod cq;
mod ctrl;
mod device;
mod events;
mod health;
mod id42;
mod kept;
mod kernel_rings;
mod mr;
mod mw;
mod net;
mod port;
mod qp;
mod queues;
mod rings;
mod setup;
mod srq;
mod ucontext;
mod uring;
mod verbs;
mod wqe;
mod wr_table;
mod xrcd;

// The device tables stay at the crate root: modpost reads the module's name from their symbols.
kernel::virtio_device_table!(
    VIRTIO_TABLE,
    [virtio::DeviceId::new(bindings::VIRTIO_ID_RDMA)]
);

kernel::auxiliary_device_table!(
    AUX_TABLE,
    <net::NetDriver as auxiliary::Driver>::IdInfo,
    [(
        auxiliary::DeviceId::new(net_roce::AUX_MODNAME, net_roce::AUX_NAME),
        ()
    )]
);

/// The module: one driver per front end.
#[pin_data]
struct VirtioRdmaModule {
    #[pin]
    id42: driver::Registration<virtio::Adapter<id42::Id42Driver>>,
    #[pin]
    net: driver::Registration<auxiliary::Adapter<net::NetDriver>>,
}

impl InPlaceModule for VirtioRdmaModule {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            id42 <- driver::Registration::new(c"virtio_rdma", module),
            // On the auxiliary bus the driver is "virtio_rdma.virtio_rdma" (the bus names a
            // driver "<module>.<name>", and the Rust abstraction passes the name for both).
            net <- driver::Registration::new(c"virtio_rdma", module),
        })
    }
}

module! {
    type: VirtioRdmaModule,
    name: "virtio_rdma",
    authors: ["virtio-rdma developers"],
    description: "virtio RDMA device driver",
    license: "GPL",
}
