// SPDX-License-Identifier: GPL-2.0

//! Memory windows, allocated by the RDMA core with room for the driver's part.
//!
//! Only processes have windows (uverbs): a window is bound and invalidated by work requests
//! the process posts, so the driver's part is what the device needs to free it.

use super::{Device, Driver, Pd};
use crate::{bindings, error::from_result, prelude::*, types::Opaque};
use core::ops::Deref;

/// The type of a memory window (IB's type 1, bound by a verb; type 2, bound by a work request
/// to one QP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MwType {
    /// Type 1.
    One,
    /// Type 2 (2B: bound to a QP, not to a PD only).
    Two,
}

impl MwType {
    /// The `enum ib_mw_type` value.
    pub fn raw(self) -> u8 {
        match self {
            MwType::One => bindings::ib_mw_type_IB_MW_TYPE_1 as u8,
            MwType::Two => bindings::ib_mw_type_IB_MW_TYPE_2 as u8,
        }
    }
}

/// A window the driver allocated: its part and the rkey the device gave it.
pub struct NewMw<D> {
    /// The driver's part of the window.
    pub data: D,
    /// The window's remote key.
    pub rkey: u32,
}

/// A memory window: C `struct ib_mw` followed by the driver's [`Driver::Mw`].
///
/// The core allocates it (`size_ib_mw` of the device's operations is the size of this type),
/// [`Driver::alloc_mw`] fills in the driver's part and [`Driver::dealloc_mw`] gets it back
/// before the core frees the memory.
///
/// # Invariants
///
/// `ib` is a window of a device whose driver is `T`, with a PD of that device, and `data` is
/// initialised.
#[repr(C)]
pub struct Mw<T: Driver> {
    ib: Opaque<bindings::ib_mw>,
    data: T::Mw,
}

impl<T: Driver> Mw<T> {
    /// The size the core allocates for a window (`size_ib_mw`).
    pub(crate) const SIZE: usize = {
        // The core allocates with kzalloc, which aligns to at least 8 bytes.
        assert!(core::mem::align_of::<Self>() <= 8);
        core::mem::size_of::<Self>()
    };

    /// The window's remote key.
    pub fn rkey(&self) -> u32 {
        // SAFETY: By the type invariant `ib` is a valid window; the core sets `rkey` from what
        // `alloc_mw` returned and changes it only through the process's binds, which the
        // kernel does not see.
        unsafe { (*self.ib.get()).rkey }
    }
}

impl<T: Driver> Deref for Mw<T> {
    type Target = T::Mw;

    fn deref(&self) -> &T::Mw {
        &self.data
    }
}

/// `alloc_mw` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a zeroed window of `Mw::<T>::SIZE` bytes whose `device`
/// is a device of driver `T` and whose `pd` a live PD of it.
pub(crate) unsafe extern "C" fn alloc_mw_callback<T: Driver>(
    mw: *mut bindings::ib_mw,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `mw` is valid and its `pd` a live PD of a device of driver `T`, allocated
        // as a `Pd<T>` (function safety requirement).
        let (pd, raw_type) = unsafe { (&*(*mw).pd.cast::<Pd<T>>(), (*mw).type_) };
        let mw_type = match raw_type {
            bindings::ib_mw_type_IB_MW_TYPE_1 => MwType::One,
            bindings::ib_mw_type_IB_MW_TYPE_2 => MwType::Two,
            _ => return Err(EINVAL),
        };
        let new = T::alloc_mw(pd, mw_type)?;
        let mw = mw.cast::<Mw<T>>();
        // SAFETY: The core allocated `Mw::<T>::SIZE` bytes for `mw`; `data` is not initialised
        // yet, so nothing is overwritten that needs dropping; the core reads `rkey` only after
        // this returns.
        // INVARIANT: From here `data` is initialised.
        unsafe {
            (&raw mut (*mw).data).write(new.data);
            (*(*mw).ib.get()).rkey = new.rkey;
        }
        Ok(0)
    })
}

/// `dealloc_mw` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a window for which [`alloc_mw_callback`] succeeded and
/// that is not used any more.
pub(crate) unsafe extern "C" fn dealloc_mw_callback<T: Driver>(mw: *mut bindings::ib_mw) -> c_int {
    let mw = mw.cast::<Mw<T>>();
    // SAFETY: `mw` is valid (function safety requirement) and belongs to a device of driver `T`.
    let dev = unsafe { Device::<T>::from_raw((*(*mw).ib.get()).device) };
    // SAFETY: `data` was initialised by `alloc_mw_callback` and is moved out exactly once: the
    // core frees the memory after this returns 0 and never calls back for this window.
    let data = unsafe { (&raw const (*mw).data).read() };
    T::dealloc_mw(dev, data);
    0
}
