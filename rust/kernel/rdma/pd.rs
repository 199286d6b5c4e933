// SPDX-License-Identifier: GPL-2.0

//! Protection domains, allocated by the RDMA core with room for the driver's part.

use super::{Device, Driver, Ucontext};
use crate::{bindings, error::from_result, prelude::*, types::Opaque};
use core::ops::Deref;

/// A protection domain: C `struct ib_pd` followed by the driver's [`Driver::Pd`].
///
/// The core allocates it (`size_ib_pd` of the device's operations is the size of this type),
/// the driver's [`Driver::alloc_pd`] fills in the driver's part and [`Driver::dealloc_pd`] gets
/// it back before the core frees the memory.
///
/// # Invariants
///
/// `ib` is a PD of a device whose driver is `T`, and `data` is initialised.
#[repr(C)]
pub struct Pd<T: Driver> {
    ib: Opaque<bindings::ib_pd>,
    data: T::Pd,
}

impl<T: Driver> Pd<T> {
    /// The size the core allocates for a PD (`size_ib_pd`).
    pub(crate) const SIZE: usize = {
        // The core allocates with kzalloc, which aligns to at least 8 bytes.
        assert!(core::mem::align_of::<Self>() <= 8);
        core::mem::size_of::<Self>()
    };

    /// Returns the device the PD belongs to.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: By the type invariant `ib` is a PD of a device whose driver is `T`; the
        // device outlives its PDs.
        unsafe { Device::from_raw((*self.ib.get()).device) }
    }

    /// Returns the user context of a PD a process allocated; `None` for a kernel PD.
    pub fn ucontext(&self) -> Option<&Ucontext<T>> {
        // SAFETY: By the type invariant `ib` is a valid PD. uverbs sets `uobject` (and the
        // object's `context`) before `alloc_pd` and never changes them; kernel PDs have none.
        // The context outlives every object created in it.
        unsafe {
            let uobj = (*self.ib.get()).uobject;
            if uobj.is_null() || (*uobj).context.is_null() {
                return None;
            }
            Some(Ucontext::from_raw((*uobj).context))
        }
    }
}

impl<T: Driver> Deref for Pd<T> {
    type Target = T::Pd;

    fn deref(&self) -> &T::Pd {
        &self.data
    }
}

/// `alloc_pd` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a zeroed PD of `Pd::<T>::SIZE` bytes whose `device` is a
/// device of driver `T`.
pub(crate) unsafe extern "C" fn alloc_pd_callback<T: Driver>(
    pd: *mut bindings::ib_pd,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `pd` is valid and belongs to a device of driver `T` (function safety
        // requirement).
        let dev = unsafe { Device::<T>::from_raw((*pd).device) };
        let data = T::alloc_pd(dev)?;
        let pd = pd.cast::<Pd<T>>();
        // SAFETY: The core allocated `Pd::<T>::SIZE` bytes for `pd`; `data` is not initialised
        // yet, so nothing is overwritten that needs dropping.
        // INVARIANT: From here `data` is initialised.
        unsafe { (&raw mut (*pd).data).write(data) };
        Ok(0)
    })
}

/// `dealloc_pd` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a PD for which [`alloc_pd_callback`] succeeded and that
/// is not used any more.
pub(crate) unsafe extern "C" fn dealloc_pd_callback<T: Driver>(
    pd: *mut bindings::ib_pd,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    let pd = pd.cast::<Pd<T>>();
    // SAFETY: `pd` is valid (function safety requirement) and belongs to a device of driver `T`.
    let dev = unsafe { Device::<T>::from_raw((*(*pd).ib.get()).device) };
    // SAFETY: `data` was initialised by `alloc_pd_callback` and is moved out exactly once: the
    // core frees the memory after this returns and never calls back for this PD.
    let data = unsafe { (&raw const (*pd).data).read() };
    T::dealloc_pd(dev, data);
    0
}
