// SPDX-License-Identifier: GPL-2.0

//! Abstractions for the RDMA (InfiniBand) core.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h).
//!
//! A driver implements [`Driver`] for the data it keeps per RDMA device and creates a
//! [`Registration`]: the RDMA core allocates the `struct ib_device` with the driver's data right
//! behind it ([`Device`]), the `ib_device_ops` table is built from the [`Driver`] implementation
//! (only the operations the driver implements are set), and the device is registered. Objects
//! that the core allocates for the driver (protection domains [`Pd`], completion queues [`Cq`],
//! shared receive queues [`Srq`], XRC domains [`Xrcd`]) embed their C structure the same way;
//! a [`CqRegistry`] finds the CQ a device signals. User memory regions pin their pages as a
//! [`Umem`]. A RoCE port is bound to its Ethernet interface, named by MAC address or handed
//! over by the bus ([`RocePort`]); the binding follows the interface as it comes and goes.

mod ah;
mod counters;
mod cq;
mod device;
mod gid;
mod mmap;
mod mr;
mod mw;
mod netdev;
mod pd;
mod qp;
mod registry;
mod restrack;
mod roce;
mod shared_mem;
mod srq;
mod ucontext;
mod umem;
mod xrcd;

pub use ah::Ah;
pub use counters::CounterDesc;
pub use cq::{Cq, CqInitAttr, CqNotify, CqRegistry, NewCq, Wc, WcSink};
pub use device::{Device, DeviceInfo, Driver, LinkLayer, NodeType, Registration, RocePort};
pub use gid::GidAttr;
pub use mmap::UserMmap;
pub use mr::{DmaTable, Mr, NewMr, Rereg, UserRange};
pub use mw::{Mw, MwType, NewMw};
pub use netdev::{NetDevice, PortNetdev};
pub use pd::Pd;
pub use qp::{
    NewQp, Qp, QpAttr, QpCap, QpEvent, QpInitAttr, QpRegistry, RecvWr, RecvWrs, RoceAv, SendOp,
    SendWr, SendWrs, Sge, WorkQueue,
};
pub use restrack::ResAttrs;
pub use shared_mem::SharedMem;
pub use srq::{NewSrq, Srq, SrqAttr, SrqChange, SrqRegistry, SrqXrc};
pub use ucontext::{Ucontext, Udata};
pub use umem::Umem;
pub use xrcd::Xrcd;

/// Port numbers of RDMA devices start at 1.
pub const FIRST_PORT: u32 = 1;
