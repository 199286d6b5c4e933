// SPDX-License-Identifier: GPL-2.0

//! Binding a RoCE port to its Ethernet interface, found by permanent MAC address or given.
//!
//! A netdevice notifier binds the port (`ib_device_set_netdev`) to its interface (the one whose
//! permanent address is the given MAC, or the given one) when that interface is registered
//! (also in another namespace, after a move), and unbinds it when the
//! interface goes away. Registering the notifier replays `NETDEV_REGISTER` for the interfaces
//! that already exist, so the order in which the RDMA device and the interface appear does not
//! matter. With the port bound, the RDMA core fills the GID table from the interface's
//! addresses and reports the port's state from its link.

use crate::{bindings, error::to_result, prelude::*, types::Opaque};
use core::{
    marker::PhantomPinned,
    ptr,
    sync::atomic::{AtomicBool, AtomicPtr, Ordering},
};

/// Length of an Ethernet MAC address.
pub(crate) const ETH_ALEN: usize = bindings::ETH_ALEN as usize;

/// Which interface is a port's.
#[derive(Clone, Copy)]
pub(crate) enum Target {
    /// The one whose permanent address this is.
    Mac([u8; ETH_ALEN]),
    /// This one: compared by address only, never dereferenced (the bus that handed it over
    /// deletes the RDMA device before the interface; should it not, the binding still only
    /// ever touches interfaces the notifier reports).
    Netdev(*mut bindings::net_device),
}

/// The binding of one RoCE port to its Ethernet interface.
///
/// # Invariants
///
/// `ib` is a valid `struct ib_device` (allocated, possibly registered) for as long as `self`
/// exists; while `started` is true, `nb` is on the netdevice notifier chain.
#[pin_data(PinnedDrop)]
pub(crate) struct Binding {
    #[pin]
    nb: Opaque<bindings::notifier_block>,
    ib: *mut bindings::ib_device,
    port: u32,
    target: Target,
    /// The interface the port is bound to (null if none); changed under RTNL only.
    bound: AtomicPtr<bindings::net_device>,
    started: AtomicBool,
    #[pin]
    _pin: PhantomPinned,
}

// SAFETY: The raw pointers refer to the RDMA device and a netdev, both usable from any thread;
// `bound` is only changed in notifier callbacks, which the netdev core serialises under RTNL.
unsafe impl Send for Binding {}
// SAFETY: See `Send`; shared access only reads `ib`, `port` and `target` (whose pointer is only
// compared).
unsafe impl Sync for Binding {}

impl Binding {
    /// Creates the binding of `port` of `ib` to the interface `target` names.
    ///
    /// # Safety
    ///
    /// `ib` must be a valid `struct ib_device` that outlives the binding.
    pub(crate) unsafe fn new(
        ib: *mut bindings::ib_device,
        port: u32,
        target: Target,
    ) -> impl PinInit<Self> {
        pin_init!(Self {
            nb <- Opaque::ffi_init(|slot: *mut bindings::notifier_block| {
                // SAFETY: `slot` is valid for writes.
                unsafe {
                    slot.write(bindings::notifier_block {
                        notifier_call: Some(Self::event),
                        next: ptr::null_mut(),
                        priority: 0,
                    })
                };
            }),
            ib,
            port,
            target,
            bound: AtomicPtr::new(ptr::null_mut()),
            started: AtomicBool::new(false),
            _pin: PhantomPinned,
        })
    }

    /// Starts following the interfaces: binds the port now if its interface exists.
    pub(crate) fn start(self: Pin<&Self>) -> Result {
        if self.started.load(Ordering::Acquire) {
            return Ok(());
        }
        // SAFETY: `nb` is pinned and stays on the chain until `stop` or drop removes it.
        to_result(unsafe { bindings::register_netdevice_notifier(self.nb.get()) })?;
        // INVARIANT: `nb` is now on the chain.
        self.started.store(true, Ordering::Release);
        Ok(())
    }

    /// Stops following the interfaces and unbinds the port. Does nothing if not started.
    pub(crate) fn stop(&self) {
        if !self.started.swap(false, Ordering::AcqRel) {
            return;
        }
        // SAFETY: `nb` is on the chain (it was started). Unregistering replays
        // `NETDEV_UNREGISTER` of every interface to it, which unbinds the port.
        unsafe { bindings::unregister_netdevice_notifier(self.nb.get()) };
    }

    /// Returns whether `ndev` is the interface of this port.
    ///
    /// # Safety
    ///
    /// `ndev` must be a valid netdev.
    unsafe fn is_ours(&self, ndev: *mut bindings::net_device) -> bool {
        let mac = match self.target {
            Target::Netdev(ours) => return ptr::eq(ours, ndev),
            Target::Mac(mac) => mac,
        };
        // SAFETY: `ndev` is valid (function safety requirement); `type_`, `addr_len` and
        // `perm_addr` are set before the netdev is registered and do not change afterwards.
        let ndev = unsafe { &*ndev };
        u32::from(ndev.type_) == bindings::ARPHRD_ETHER
            && usize::from(ndev.addr_len) == ETH_ALEN
            && ndev.perm_addr[..ETH_ALEN] == mac
    }

    /// Binds the port to `ndev`, or unbinds it if `ndev` is null.
    fn set_netdev(&self, ndev: *mut bindings::net_device) {
        // SAFETY: `self.ib` is valid (type invariant); `ndev` is null or a registered netdev
        // (not unregistering: unbinding happens on `NETDEV_UNREGISTER` before that completes).
        let ret = unsafe { bindings::ib_device_set_netdev(self.ib, ndev, self.port) };
        if ret == 0 {
            self.bound.store(ndev, Ordering::Relaxed);
        } else {
            // SAFETY: `self.ib` is valid; its `struct device` is initialised at allocation.
            let dev: &crate::device::Device = unsafe {
                crate::device::Device::from_raw(&raw mut (*self.ib).__bindgen_anon_1.dev)
            };
            dev_warn!(
                dev,
                "cannot bind port {} to its netdev: {:?}\n",
                self.port,
                Error::from_errno(ret)
            );
        }
    }

    /// The netdevice notifier.
    ///
    /// # Safety
    ///
    /// Called by the netdev core only, under RTNL, with `nb` the `nb` of a pinned [`Binding`]
    /// and `ptr` a `struct netdev_notifier_info`.
    unsafe extern "C" fn event(
        nb: *mut bindings::notifier_block,
        event: c_ulong,
        ptr: *mut c_void,
    ) -> c_int {
        // SAFETY: `nb` is the `nb` field of a `Binding` (function safety requirement).
        let this = unsafe { &*crate::container_of!(Opaque::cast_from(nb).cast_mut(), Self, nb) };
        // SAFETY: `ptr` is a `struct netdev_notifier_info` (function safety requirement).
        let ndev = unsafe { bindings::netdev_notifier_info_to_dev(ptr.cast()) };
        let bound = this.bound.load(Ordering::Relaxed);
        let Ok(event) = u32::try_from(event) else {
            return bindings::NOTIFY_DONE as c_int;
        };
        match event {
            bindings::netdev_cmd_NETDEV_REGISTER if bound.is_null() => {
                // SAFETY: `ndev` is the valid netdev the event is about.
                if unsafe { this.is_ours(ndev) } {
                    this.set_netdev(ndev);
                }
            }
            bindings::netdev_cmd_NETDEV_UNREGISTER if bound == ndev => {
                this.set_netdev(ptr::null_mut())
            }
            _ => {}
        }
        bindings::NOTIFY_DONE as c_int
    }
}

#[pinned_drop]
impl PinnedDrop for Binding {
    fn drop(self: Pin<&mut Self>) {
        self.stop();
    }
}
