// SPDX-License-Identifier: GPL-2.0

//! XRC domains, allocated by the RDMA core with room for the driver's part.
//!
//! An XRC domain groups XRC shared receive queues and XRC target QPs (IB's eXtended Reliable
//! Connected transport): an initiator QP names, per message, the SRQ of the remote domain the
//! message is for. Processes share a domain through a file (`ibv_open_xrcd`); the core keeps
//! that sharing and the domain's target QPs, and counts what uses the domain: it is freed
//! only when nothing does.

use super::{Device, Driver};
use crate::{bindings, error::from_result, prelude::*, types::Opaque};
use core::ops::Deref;

/// An XRC domain: C `struct ib_xrcd` followed by the driver's [`Driver::Xrcd`].
///
/// # Invariants
///
/// `ib` is an XRC domain of a device whose driver is `T`, and `data` is initialised.
#[repr(C)]
pub struct Xrcd<T: Driver> {
    ib: Opaque<bindings::ib_xrcd>,
    data: T::Xrcd,
}

impl<T: Driver> Xrcd<T> {
    /// The size the core allocates for a domain (`size_ib_xrcd`).
    pub(crate) const SIZE: usize = {
        // The core allocates with kzalloc, which aligns to at least 8 bytes.
        assert!(core::mem::align_of::<Self>() <= 8);
        core::mem::size_of::<Self>()
    };

    /// Returns the domain at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` is a live XRC domain of a device of driver `T`, for which [`alloc_xrcd_callback`]
    /// succeeded, and stays alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_xrcd) -> &'a Self {
        // SAFETY: `Xrcd<T>` starts with the `ib_xrcd` (`repr(C)`) and `data` is initialised
        // (function safety requirement).
        unsafe { &*ptr.cast::<Self>() }
    }

    /// Returns the device the domain belongs to.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: By the type invariant `ib` is a domain of a device of driver `T`, which
        // outlives its domains.
        unsafe { Device::from_raw((*self.ib.get()).device) }
    }
}

impl<T: Driver> Deref for Xrcd<T> {
    type Target = T::Xrcd;

    fn deref(&self) -> &T::Xrcd {
        &self.data
    }
}

/// `alloc_xrcd` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a zeroed domain of `Xrcd::<T>::SIZE` bytes whose `device`
/// is a device of driver `T`.
pub(crate) unsafe extern "C" fn alloc_xrcd_callback<T: Driver>(
    xrcd: *mut bindings::ib_xrcd,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `xrcd` is valid and belongs to a device of driver `T` (function safety
        // requirement).
        let dev = unsafe { Device::<T>::from_raw((*xrcd).device) };
        let data = T::alloc_xrcd(dev)?;
        let obj = xrcd.cast::<Xrcd<T>>();
        // SAFETY: The core allocated `Xrcd::<T>::SIZE` bytes for `xrcd`; `data` is not
        // initialised yet, so nothing is overwritten that needs dropping.
        // INVARIANT: From here `data` is initialised.
        unsafe { (&raw mut (*obj).data).write(data) };
        Ok(0)
    })
}

/// `dealloc_xrcd` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a domain for which [`alloc_xrcd_callback`] succeeded and
/// that nothing uses any more.
pub(crate) unsafe extern "C" fn dealloc_xrcd_callback<T: Driver>(
    xrcd: *mut bindings::ib_xrcd,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    let obj = xrcd.cast::<Xrcd<T>>();
    // SAFETY: `xrcd` is valid (function safety requirement) and belongs to a device of driver
    // `T`.
    let dev = unsafe { Device::<T>::from_raw((*xrcd).device) };
    // SAFETY: `data` was initialised by `alloc_xrcd_callback` and is moved out exactly once:
    // returning 0 makes the core free the memory without calling back for this domain.
    let data = unsafe { (&raw const (*obj).data).read() };
    T::dealloc_xrcd(dev, data);
    0
}
