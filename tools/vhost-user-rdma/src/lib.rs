// SPDX-License-Identifier: GPL-2.0
//! vhost-user backend for the virtio-rdma device (virtio device ID 42).
//!
//! The library holds the device model so that the tests can drive it over a
//! real vhost-user socket in-process; `main.rs` is only the command line.
//!
//! The protocol is `Documentation/infiniband/virtio_rdma.rst`; its layouts
//! are `include/uapi/linux/virtio_rdma.h` (mirrored in [`abi`], checked at
//! build time). Control commands: [`ctrl`] (dispatch, ports, PDs, GIDs) and
//! [`verbs`] (CQs, MRs, QPs), [`xrcd`] (XRC domains). Data path: [`engine`] executes SQ elements
//! ([`wqe`]) against MRs ([`mr`]) and QPs ([`qp`]), writes completions
//! ([`cq`]), and reaches other devices of the process through [`fabric`];
//! a device's QPs are split among its threads by [`lane`], which run on
//! the CPUs [`cpus`] gives them.
//! [`stats`] and [`counter_sets`] count what the device did; [`metrics`]
//! shows it to the operator over HTTP.
//! [`packet`] is the data path's packet as RoCEv2 carries it, [`roce`]
//! its frame on an Ethernet wire (headers and ICRC), and [`transport`]
//! RC's reliability on packets (requester and completer, responder),
//! which the engine is to run on next; [`link`] is the in-process link's
//! fault drill.
//! [`hostile`] is a test mode in which the device lies to its guest.
//! [`net`] is the second personality (`--net`): a virtio-net device (ID 1)
//! that carries the RoCE queues after its own
//! (`Documentation/infiniband/virtio_rdma_net.rst`).

pub mod abi;
pub mod cli;
pub mod counter_sets;
pub mod cpus;
pub mod cq;
pub mod ctrl;
pub mod ctrlq;
pub mod device;
pub mod engine;
pub mod event;
pub mod fabric;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod hostile;
pub mod ib;
pub mod lane;
pub mod limits;
pub mod link;
pub mod metrics;
pub mod mr;
pub mod mw;
pub mod net;
pub mod packet;
pub mod qp;
pub mod ratelimit;
pub mod resources;
pub mod ring;
pub mod roce;
pub mod srq;
pub mod stats;
pub mod transport;
pub mod verbs;
pub mod vring;
pub mod worker;
pub mod wqe;
pub mod xrcd;
