// SPDX-License-Identifier: GPL-2.0

//! Ethernet interfaces as RDMA drivers see them: one a bus handed to the driver
//! ([`NetDevice`], e.g. the netdev of the virtio-net function that carries a RoCE device), and
//! the one bound to a RoCE port while the driver answers queries ([`PortNetdev`]).

use crate::{bindings, types::Opaque};
use core::ptr::NonNull;

/// A network device (`struct net_device`), as a bus hands it to an RDMA driver to name the
/// Ethernet interface of its RoCE port.
///
/// Only its identity is used (to bind the port, see
/// [`RocePort::Netdev`](super::RocePort::Netdev)): nothing is read through it.
///
/// # Invariants
///
/// A reference to a [`NetDevice`] points to a valid `struct net_device`.
#[repr(transparent)]
pub struct NetDevice(Opaque<bindings::net_device>);

impl NetDevice {
    /// Creates a reference to the netdev `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must be a valid `struct net_device` for the lifetime `'a`.
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::net_device) -> &'a Self {
        // SAFETY: `NetDevice` is a transparent wrapper of `struct net_device`; `ptr` is valid for
        // `'a` (function safety requirement).
        unsafe { &*ptr.cast::<Self>() }
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }
}

/// A reference to the network device bound to a port, taken with `ib_device_get_netdev`.
///
/// # Invariants
///
/// `ndev` is a valid `struct net_device` on which this object holds a reference (`dev_hold`).
pub struct PortNetdev {
    ndev: NonNull<bindings::net_device>,
}

impl PortNetdev {
    /// Takes a reference to the netdev bound to `port` of `ib`, if there is one.
    ///
    /// # Safety
    ///
    /// `ib` must be a valid `struct ib_device`.
    pub(crate) unsafe fn get(ib: *mut bindings::ib_device, port: u32) -> Option<Self> {
        // SAFETY: `ib` is valid (function safety requirement); the core checks `port`.
        let ndev = unsafe { bindings::ib_device_get_netdev(ib, port) };
        // INVARIANT: `ib_device_get_netdev` returns the netdev with a reference held.
        NonNull::new(ndev).map(|ndev| Self { ndev })
    }

    fn raw(&self) -> *mut bindings::net_device {
        self.ndev.as_ptr()
    }

    /// The port state the interface's link gives (`IB_PORT_ACTIVE` when it is up and has a
    /// carrier, `IB_PORT_DOWN` otherwise).
    pub fn port_state(&self) -> bindings::ib_port_state {
        // SAFETY: By the type invariant the netdev is valid.
        unsafe { bindings::ib_get_curr_port_state(self.raw()) }
    }

    /// The interface's MTU.
    pub fn mtu(&self) -> u32 {
        // SAFETY: By the type invariant the netdev is valid; `mtu` is read as the C core does,
        // without a lock (it changes under RTNL, a torn value cannot occur for an `int`).
        unsafe { core::ptr::read_volatile(&raw const (*self.raw()).mtu) }
    }

    /// The largest RoCE MTU (`enum ib_mtu`) that fits the interface's MTU after the RoCE
    /// headers.
    pub fn roce_mtu(&self) -> bindings::ib_mtu {
        let mtu = i32::try_from(self.mtu()).unwrap_or(i32::MAX);
        // SAFETY: `iboe_get_mtu` is a pure function of its argument.
        unsafe { bindings::iboe_get_mtu(mtu) }
    }

    /// The interface's index (`ifindex`).
    pub fn ifindex(&self) -> i32 {
        // SAFETY: By the type invariant the netdev is valid; `ifindex` is set at registration.
        unsafe { (*self.raw()).ifindex }
    }
}

impl Drop for PortNetdev {
    fn drop(&mut self) {
        // SAFETY: By the type invariant this object holds a reference to the netdev.
        unsafe { bindings::dev_put(self.raw()) };
    }
}
