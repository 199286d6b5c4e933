// SPDX-License-Identifier: GPL-2.0

//! Hardware counters of a port (`struct rdma_hw_stats`): what `rdma statistic` and the port's
//! sysfs `hw_counters` show.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! A driver names its counters once, as a static table of [`CounterDesc`]
//! ([`Driver::PORT_COUNTERS`]), and reads them when asked ([`Driver::get_hw_stats`]). The core
//! allocates the values per port, caches them for a few jiffies and serialises the reads.

use super::device::{Device, Driver};
use crate::{
    bindings,
    error::from_result,
    ffi::{c_int, c_ulong},
    prelude::*,
    str::CStr,
};
use core::ptr;

/// The description of one counter (`struct rdma_stat_desc`): its name.
///
/// # Invariants
///
/// `self.0.name` points to a `'static` NUL-terminated string.
#[repr(transparent)]
pub struct CounterDesc(bindings::rdma_stat_desc);

// SAFETY: A `CounterDesc` only points to a `'static` string and is never changed.
unsafe impl Sync for CounterDesc {}

impl CounterDesc {
    /// A counter named `name` (the name `rdma statistic` and sysfs show).
    pub const fn new(name: &'static CStr) -> Self {
        // INVARIANT: `name` is `'static`.
        Self(bindings::rdma_stat_desc {
            name: crate::str::as_char_ptr_in_const_context(name),
            flags: 0,
            priv_: ptr::null(),
        })
    }

    /// The counter's name.
    pub fn name(&self) -> &'static CStr {
        // SAFETY: By the type invariant `name` points to a `'static` NUL-terminated string.
        unsafe { CStr::from_char_ptr(self.0.name) }
    }
}

/// `alloc_hw_port_stats` of the operations: one value per entry of [`Driver::PORT_COUNTERS`].
///
/// # Safety
///
/// Called by the RDMA core only, on a device of driver `T`.
pub(super) unsafe extern "C" fn alloc_hw_port_stats_callback<T: Driver>(
    _ib: *mut bindings::ib_device,
    _port: u32,
) -> *mut bindings::rdma_hw_stats {
    let descs: &'static [CounterDesc] = T::PORT_COUNTERS;
    let Ok(num) = c_int::try_from(descs.len()) else {
        return ptr::null_mut();
    };
    // SAFETY: `descs` is a `'static` array of `num` descriptors (`CounterDesc` is a transparent
    // `rdma_stat_desc`) and so outlives the statistics the core keeps for the device.
    unsafe {
        bindings::rdma_alloc_hw_stats_struct(
            descs.as_ptr().cast(),
            num,
            // A small constant (10): no truncation.
            bindings::RDMA_HW_STATS_DEFAULT_LIFESPAN as c_ulong,
        )
    }
}

/// `get_hw_stats` of the operations: reads every counter of the port.
///
/// # Safety
///
/// Called by the RDMA core only, on a device of driver `T`, with statistics allocated by
/// [`alloc_hw_port_stats_callback`] for it and their lock held.
pub(super) unsafe extern "C" fn get_hw_stats_callback<T: Driver>(
    ib: *mut bindings::ib_device,
    stats: *mut bindings::rdma_hw_stats,
    port: u32,
    _index: c_int,
) -> c_int {
    from_result(|| {
        // SAFETY: `stats` is valid and, under its lock, ours to write (function safety
        // requirement); it holds `num_counters` values.
        let values = unsafe {
            let num = usize::try_from((*stats).num_counters).unwrap_or(0);
            (*stats).value.as_mut_slice(num)
        };
        let num = values.len().min(T::PORT_COUNTERS.len());
        // SAFETY: `ib` is a device of driver `T` (function safety requirement).
        T::get_hw_stats(unsafe { Device::from_raw(ib) }, port, &mut values[..num])?;
        // All of them were updated.
        Ok(c_int::try_from(values.len())?)
    })
}
