// SPDX-License-Identifier: GPL-2.0

//! Hardware counters of a port (`struct rdma_hw_stats`): what `rdma statistic` and the port's
//! sysfs `hw_counters` show.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! A driver names its counters once, as a static table of [`CounterDesc`]
//! ([`Driver::PORT_COUNTERS`]), and reads them when asked ([`Driver::get_hw_stats`]). The core
//! allocates the values per port, caches them for a few jiffies and serialises the reads.
//!
//! QPs can also count apart (`rdma statistic qp`, C header
//! [`include/rdma/rdma_counter.h`](srctree/include/rdma/rdma_counter.h)): the core binds QPs to
//! a counter, by hand or automatically by QP type or process, and shows a port's counters as
//! the port's own plus every counter's. A driver that offers it keeps *counter sets* in its
//! device, numbered from 1, in which a bound QP counts instead of the port
//! ([`Driver::counter_bind_qp`] and the operations after it); a counter's values have the
//! port's layout ([`Driver::PORT_COUNTERS`]).

use super::{
    device::{Device, Driver},
    qp::Qp,
};
use crate::{
    bindings,
    error::from_result,
    ffi::{c_int, c_ulong},
    prelude::*,
    str::CStr,
};
use core::{num::NonZeroU32, ptr};

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

/// Statistics of one value per entry of [`Driver::PORT_COUNTERS`] (null without memory).
fn alloc_stats<T: Driver>() -> *mut bindings::rdma_hw_stats {
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

/// `alloc_hw_port_stats` of the operations: one value per entry of [`Driver::PORT_COUNTERS`].
///
/// # Safety
///
/// Called by the RDMA core only, on a device of driver `T`.
pub(super) unsafe extern "C" fn alloc_hw_port_stats_callback<T: Driver>(
    _ib: *mut bindings::ib_device,
    _port: u32,
) -> *mut bindings::rdma_hw_stats {
    alloc_stats::<T>()
}

/// The values of `stats`, as many as [`Driver::PORT_COUNTERS`] names at most.
///
/// # Safety
///
/// `stats` is valid, allocated by [`alloc_stats`], and its values are the caller's to write
/// for `'a`.
unsafe fn values_of<'a, T: Driver>(stats: *mut bindings::rdma_hw_stats) -> &'a mut [u64] {
    // SAFETY: `stats` is valid and its `num_counters` values are ours to write (function
    // safety requirement).
    let values = unsafe {
        let num = usize::try_from((*stats).num_counters).unwrap_or(0);
        (*stats).value.as_mut_slice(num)
    };
    let num = values.len().min(T::PORT_COUNTERS.len());
    &mut values[..num]
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
        // SAFETY: `stats` was allocated by `alloc_stats` and, under its lock, is ours to write
        // (function safety requirement).
        let values = unsafe { values_of::<T>(stats) };
        // SAFETY: `ib` is a device of driver `T` (function safety requirement).
        T::get_hw_stats(unsafe { Device::from_raw(ib) }, port, values)?;
        // All of them were updated.
        Ok(c_int::try_from(values.len())?)
    })
}

/// The device's counter set of `counter`, if it has one yet (`rdma_counter.id`).
///
/// # Safety
///
/// `counter` is valid.
unsafe fn set_of(counter: *mut bindings::rdma_counter) -> Option<NonZeroU32> {
    // SAFETY: `counter` is valid (function safety requirement); `id` changes only in
    // `counter_bind_qp_callback`, under the counter's lock, which the core holds around each
    // operation on a counter that may still change it.
    NonZeroU32::new(unsafe { (*counter).id })
}

/// `counter_init` of the operations: nothing to initialise (the core calls it on every
/// counter it allocates, and zeroes the counter first).
///
/// # Safety
///
/// Called by the RDMA core only.
pub(super) unsafe extern "C" fn counter_init_callback(_counter: *mut bindings::rdma_counter) {}

/// `counter_alloc_stats` of the operations: a counter's values have the port's layout.
///
/// # Safety
///
/// Called by the RDMA core only, with a counter of a device of driver `T`.
pub(super) unsafe extern "C" fn counter_alloc_stats_callback<T: Driver>(
    _counter: *mut bindings::rdma_counter,
) -> *mut bindings::rdma_hw_stats {
    alloc_stats::<T>()
}

/// `counter_bind_qp` of the operations: binds `qp` to the counter's set, made first if the
/// counter has none yet, and records the binding in the QP (`ib_qp.counter`, which the core
/// reads to unbind it).
///
/// # Safety
///
/// Called by the RDMA core only, with the counter's lock held, a counter of a device of driver
/// `T` and a live QP of that device that is bound to no counter.
pub(super) unsafe extern "C" fn counter_bind_qp_callback<T: Driver>(
    counter: *mut bindings::rdma_counter,
    qp: *mut bindings::ib_qp,
    port: u32,
) -> c_int {
    from_result(|| {
        // SAFETY: `counter` is valid (function safety requirement).
        let set = unsafe { set_of(counter) };
        // SAFETY: Every QP of a device of driver `T` is a `Qp<T>` (`qp.rs`), live here
        // (function safety requirement).
        let qp_ref = unsafe { &*qp.cast::<Qp<T>>() };
        let bound = T::counter_bind_qp(qp_ref, set, port)?;
        // SAFETY: `counter` and `qp` are valid and the counter's lock is held (function safety
        // requirement): the core reads `id` and `qp->counter` only under it or after binding.
        unsafe {
            (*counter).id = bound.get();
            (*qp).counter = counter;
        }
        Ok(0)
    })
}

/// `counter_unbind_qp` of the operations: `qp` counts in the port again.
///
/// # Safety
///
/// Called by the RDMA core only, with the lock of the QP's counter held and a live QP of a
/// device of driver `T`.
pub(super) unsafe extern "C" fn counter_unbind_qp_callback<T: Driver>(
    qp: *mut bindings::ib_qp,
    port: u32,
) -> c_int {
    from_result(|| {
        // SAFETY: `qp` is valid (function safety requirement).
        let counter = unsafe { (*qp).counter };
        if counter.is_null() {
            return Ok(0);
        }
        // SAFETY: A QP's counter is valid while the QP is bound to it.
        if let Some(set) = unsafe { set_of(counter) } {
            // SAFETY: Every QP of a device of driver `T` is a live `Qp<T>` here (function
            // safety requirement).
            T::counter_unbind_qp(unsafe { &*qp.cast::<Qp<T>>() }, set, port)?;
        }
        // SAFETY: `qp` is valid and the counter's lock is held (function safety requirement).
        unsafe { (*qp).counter = ptr::null_mut() };
        Ok(0)
    })
}

/// `counter_dealloc` of the operations: the counter's last QP is gone; so is its set.
///
/// # Safety
///
/// Called by the RDMA core only, with a counter of a device of driver `T` that no QP is bound
/// to any more.
pub(super) unsafe extern "C" fn counter_dealloc_callback<T: Driver>(
    counter: *mut bindings::rdma_counter,
) -> c_int {
    from_result(|| {
        // SAFETY: `counter` is valid (function safety requirement).
        let (set, ib) = unsafe { (set_of(counter), (*counter).device) };
        if let Some(set) = set {
            // SAFETY: `ib` is a device of driver `T` (function safety requirement).
            T::counter_dealloc(unsafe { Device::from_raw(ib) }, set)?;
        }
        Ok(0)
    })
}

/// `counter_update_stats` of the operations: reads the counter's set into its values.
///
/// # Safety
///
/// Called by the RDMA core only, with the counter's lock held and a counter of a device of
/// driver `T` whose statistics [`counter_alloc_stats_callback`] allocated.
pub(super) unsafe extern "C" fn counter_update_stats_callback<T: Driver>(
    counter: *mut bindings::rdma_counter,
) -> c_int {
    from_result(|| {
        // SAFETY: `counter` is valid (function safety requirement).
        let (set, ib, port, stats) = unsafe {
            (
                set_of(counter),
                (*counter).device,
                (*counter).port,
                (*counter).stats,
            )
        };
        let Some(set) = set else {
            return Ok(0);
        };
        // SAFETY: `stats` was allocated by `alloc_stats` and is ours to write under the
        // counter's lock (function safety requirement).
        let values = unsafe { values_of::<T>(stats) };
        // SAFETY: `ib` is a device of driver `T` (function safety requirement).
        T::counter_update_stats(unsafe { Device::from_raw(ib) }, set, port, values)?;
        Ok(0)
    })
}
