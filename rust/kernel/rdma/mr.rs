// SPDX-License-Identifier: GPL-2.0

//! Memory regions. Unlike PDs and CQs, the driver allocates them: the abstraction boxes the
//! driver's part behind the C `struct ib_mr` and frees both on deregistration.

use super::{Device, Driver, Pd};
use crate::{bindings, prelude::*, types::Opaque};
use core::ops::Deref;

/// An MR the driver created: its part of the MR and the keys the device gave it.
pub struct NewMr<D> {
    /// The driver's part of the MR.
    pub data: D,
    /// The local key.
    pub lkey: u32,
    /// The remote key.
    pub rkey: u32,
}

/// A memory region: C `struct ib_mr` followed by the driver's [`Driver::Mr`].
///
/// # Invariants
///
/// `ib` is an MR of a device whose driver is `T`; the object was allocated by this module as a
/// `KBox<Mr<T>>`.
#[repr(C)]
pub struct Mr<T: Driver> {
    ib: Opaque<bindings::ib_mr>,
    data: T::Mr,
}

impl<T: Driver> Mr<T> {
    /// The local key.
    pub fn lkey(&self) -> u32 {
        // SAFETY: By the type invariant `ib` is a valid MR; `lkey` changes only in the driver's
        // own fast-registration path.
        unsafe { (*self.ib.get()).lkey }
    }
}

impl<T: Driver> Deref for Mr<T> {
    type Target = T::Mr;

    fn deref(&self) -> &T::Mr {
        &self.data
    }
}

/// `get_dma_mr` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a live PD of a device of driver `T`.
pub(crate) unsafe extern "C" fn get_dma_mr_callback<T: Driver>(
    pd: *mut bindings::ib_pd,
    access: c_int,
) -> *mut bindings::ib_mr {
    // SAFETY: `pd` is a live `Pd<T>` (function safety requirement).
    let pd = unsafe { &*pd.cast::<Pd<T>>() };
    let Ok(access) = u32::try_from(access) else {
        return EINVAL.to_ptr();
    };
    // Allocate first, so that an allocation failure needs no undoing on the device.
    let slot = match KBox::<Mr<T>>::new_uninit(GFP_KERNEL) {
        Ok(slot) => slot,
        Err(e) => return Error::from(e).to_ptr(),
    };
    let new = match T::get_dma_mr(pd, access) {
        Ok(new) => new,
        Err(e) => return e.to_ptr(),
    };
    let ib = Opaque::<bindings::ib_mr>::zeroed();
    // SAFETY: `ib` is a zeroed, valid `struct ib_mr`; the core fills in the rest.
    unsafe {
        (*ib.get()).lkey = new.lkey;
        (*ib.get()).rkey = new.rkey;
    }
    // INVARIANT: The MR is boxed here and its `ib_mr` belongs to the PD's device (the core sets
    // `device` and `pd` after this returns).
    let mr = KBox::write(slot, Mr { ib, data: new.data });
    KBox::into_raw(mr).cast()
}

/// `dereg_mr` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with an MR created by this module that is not used any more.
pub(crate) unsafe extern "C" fn dereg_mr_callback<T: Driver>(
    mr: *mut bindings::ib_mr,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: `mr` is a `KBox<Mr<T>>` leaked by `get_dma_mr_callback` (type invariant), given
    // back exactly once.
    let mr = unsafe { KBox::from_raw(mr.cast::<Mr<T>>()) };
    // SAFETY: The core set `device` to the MR's device, of driver `T`, which outlives it.
    let dev = unsafe { Device::<T>::from_raw((*mr.ib.get()).device) };
    let Mr { data, .. } = KBox::into_inner(mr);
    T::dereg_mr(dev, data);
    0
}
