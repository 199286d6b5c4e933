// SPDX-License-Identifier: GPL-2.0

//! The slots behind [`CqRegistry`](super::CqRegistry) and [`QpRegistry`](super::QpRegistry):
//! pointers to a device's objects of one kind by their device-given index, under an IRQ-safe
//! spinlock, so that a driver can find the object a device notification names in any context.
//!
//! An index comes from the device, which a driver must not trust: a device may hand out an
//! index that a live object has. So a driver reserves the index of an object it is creating
//! ([`Slots::reserve`]) before it touches anything the index leads to; a second object with
//! the same index is refused there, before it can act on the first.

use crate::{prelude::*, sync::SpinLockIrq};
use core::ptr;

/// Object pointers by index.
///
/// # Invariants
///
/// Every slot is null, [`Self::RESERVED`], or a pointer its owner (the typed registry) put
/// there with [`Self::insert`] and takes out with [`Self::remove`] before the object goes.
#[pin_data]
pub(crate) struct Slots<O> {
    #[pin]
    slots: SpinLockIrq<KVec<*mut O>>,
}

impl<O> Slots<O> {
    /// What a reserved slot holds: never the address of an object (no allocation is at a
    /// dangling address), and never handed out.
    const RESERVED: *mut O = ptr::dangling_mut();

    /// Slots in `slots`, a lock over null pointers that the owner initialises (each owner its
    /// own lock class: one registry's lock may be taken inside another's).
    pub(crate) fn new(slots: impl PinInit<SpinLockIrq<KVec<*mut O>>>) -> impl PinInit<Self> {
        pin_init!(Self { slots <- slots })
    }

    /// Runs `f` on the object at `index`, if there is one, under the lock: the owner removes an
    /// object under the same lock before it goes, so it stays alive while `f` runs.
    pub(crate) fn with<R>(&self, index: u32, f: impl FnOnce(*mut O) -> R) -> Option<R> {
        let slots = self.slots.lock();
        let obj = *slots.get(index as usize)?;
        if obj.is_null() || obj == Self::RESERVED {
            return None;
        }
        Some(f(obj))
    }

    /// Runs `f` on every object, in index order, under the lock (see [`Self::with`]).
    pub(crate) fn each(&self, mut f: impl FnMut(*mut O)) {
        let slots = self.slots.lock();
        for &obj in slots.iter() {
            if !obj.is_null() && obj != Self::RESERVED {
                f(obj);
            }
        }
    }

    /// Reserves `index` for an object being created; [`EBUSY`] if an object has it or is being
    /// created with it, [`EINVAL`] if out of range.
    pub(crate) fn reserve(&self, index: u32) -> Result {
        let mut slots = self.slots.lock();
        let slot = slots.get_mut(index as usize).ok_or(EINVAL)?;
        if !slot.is_null() {
            return Err(EBUSY);
        }
        *slot = Self::RESERVED;
        Ok(())
    }

    /// Ends the reservation of `index`, if it is reserved.
    pub(crate) fn release(&self, index: u32) {
        let mut slots = self.slots.lock();
        if let Some(slot) = slots.get_mut(index as usize) {
            if *slot == Self::RESERVED {
                *slot = ptr::null_mut();
            }
        }
    }

    /// Puts `obj` at `index`, free or reserved; [`EBUSY`] if another object has it, [`EINVAL`]
    /// if out of range.
    pub(crate) fn insert(&self, index: u32, obj: *mut O) -> Result {
        let mut slots = self.slots.lock();
        let slot = slots.get_mut(index as usize).ok_or(EINVAL)?;
        if !slot.is_null() && *slot != Self::RESERVED {
            return Err(EBUSY);
        }
        *slot = obj;
        Ok(())
    }

    /// Takes `obj` out of `index`, if it is there.
    pub(crate) fn remove(&self, index: u32, obj: *mut O) {
        let mut slots = self.slots.lock();
        if let Some(slot) = slots.get_mut(index as usize) {
            if *slot == obj {
                *slot = ptr::null_mut();
            }
        }
    }
}
