// SPDX-License-Identifier: GPL-2.0

//! Abstractions for the RDMA (InfiniBand) core.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h).
//!
//! This module is where the safe wrappers of the RDMA core live: allocation and registration of
//! an `ib_device` embedded in a driver structure, an `ib_device_ops` table built from a
//! `#[vtable]` trait, and the verbs objects the core allocates for drivers. It currently provides
//! the constants shared by RDMA drivers; the device and object wrappers follow.

/// Port numbers of RDMA devices start at 1.
pub const FIRST_PORT: u32 = 1;
