// SPDX-License-Identifier: GPL-2.0

//! Address handles, allocated by the RDMA core with room for the driver's part.

use super::{qp::RoceAv, Device, Driver, Pd, Udata};
use crate::{bindings, error::from_result, prelude::*, types::Opaque};
use core::{ops::Deref, ptr};

/// An address handle: C `struct ib_ah` followed by the driver's [`Driver::Ah`].
///
/// # Invariants
///
/// `ib` is an AH of a device whose driver is `T`, and `data` is initialised.
#[repr(C)]
pub struct Ah<T: Driver> {
    ib: Opaque<bindings::ib_ah>,
    data: T::Ah,
}

impl<T: Driver> Ah<T> {
    /// The size the core allocates for an AH (`size_ib_ah`).
    pub(crate) const SIZE: usize = {
        // The core allocates with kzalloc, which aligns to at least 8 bytes.
        assert!(core::mem::align_of::<Self>() <= 8);
        core::mem::size_of::<Self>()
    };

    /// Returns the device the AH belongs to.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: By the type invariant `ib` is an AH of a device of driver `T`, which outlives
        // its AHs.
        unsafe { Device::from_raw((*self.ib.get()).device) }
    }
}

impl<T: Driver> Deref for Ah<T> {
    type Target = T::Ah;

    fn deref(&self) -> &T::Ah {
        &self.data
    }
}

/// `create_ah` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a zeroed AH of `Ah::<T>::SIZE` bytes whose `pd` is a PD
/// of a device of driver `T`, a valid `init`, and a null `udata` (a kernel AH) or the user
/// verb's.
pub(crate) unsafe extern "C" fn create_ah_callback<T: Driver>(
    ah: *mut bindings::ib_ah,
    init: *mut bindings::rdma_ah_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `ah` and `init` are valid, `init.ah_attr` too, and the AH's PD is a live
        // `Pd<T>` (function safety requirement).
        let (pd, init) = unsafe { (&*(*ah).pd.cast::<Pd<T>>(), &*init) };
        // SAFETY: See above.
        let av = RoceAv::from_attr(unsafe { &*init.ah_attr }).ok_or(EINVAL)?;
        let sleepable = init.flags & bindings::rdma_create_ah_flags_RDMA_CREATE_AH_SLEEPABLE != 0;
        // SAFETY: `udata` is null (a kernel AH) or the valid udata of the user verb being
        // executed (function safety requirement).
        let mut udata = unsafe { Udata::from_raw_opt(udata) };
        let data = T::create_ah(pd, &av, sleepable, udata.as_mut())?;
        // SAFETY: The core allocated `Ah::<T>::SIZE` bytes for `ah`; `data` is not initialised
        // yet, so nothing that needs dropping is overwritten.
        // INVARIANT: From here `data` is initialised.
        unsafe { (&raw mut (*ah.cast::<Ah<T>>()).data).write(data) };
        Ok(0)
    })
}

/// `destroy_ah` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with an AH for which [`create_ah_callback`] succeeded and that
/// is not used any more.
pub(crate) unsafe extern "C" fn destroy_ah_callback<T: Driver>(
    ah: *mut bindings::ib_ah,
    _flags: u32,
) -> c_int {
    // SAFETY: `data` is initialised and dropped exactly once: the core frees the AH after this
    // returns and never calls back for it.
    unsafe { ptr::drop_in_place(&raw mut (*ah.cast::<Ah<T>>()).data) };
    0
}
