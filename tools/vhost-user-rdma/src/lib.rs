// SPDX-License-Identifier: GPL-2.0
//! vhost-user backend for the virtio-rdma device (virtio device ID 42).
//!
//! The library holds the device model so that the tests can drive it over a
//! real vhost-user socket in-process; `main.rs` is only the command line.

pub mod abi;
pub mod cli;
pub mod ctrl;
pub mod ctrlq;
pub mod device;
pub mod limits;
pub mod resources;
pub mod vring;
pub mod worker;
