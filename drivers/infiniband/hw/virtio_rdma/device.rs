// SPDX-License-Identifier: GPL-2.0

//! The driver's data of one RDMA device: what every verb (`verbs.rs`) and every queue's
//! handler reaches through the `ib_device`.

use kernel::sync::Arc;

use crate::{
    config::DeviceConfig, ctrl::Ctrl, health::Health, kept::Kept, mr::Mr, rings::KeptRing,
};

/// The driver's data of one RDMA device.
pub(crate) struct RdmaDev<'a> {
    /// The device's validated config space.
    pub(crate) config: DeviceConfig,
    /// The control queue.
    pub(crate) ctrl: Ctrl<'a>,
    /// Whether the device failed (`health.rs`).
    pub(crate) health: Health,
    /// Rings and MRs the device may still use after their objects went (`kept.rs`); freed
    /// with this, after the device is reset.
    pub(crate) kept_rings: Arc<Kept<KeptRing>>,
    pub(crate) kept_mrs: Arc<Kept<Mr>>,
}
