// SPDX-License-Identifier: GPL-2.0

//! User contexts (a process's use of a device through uverbs) and the driver-specific data a
//! user verb carries in and out (`struct ib_udata`).

use super::{Device, Driver};
use crate::{
    bindings,
    error::from_result,
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
    types::Opaque,
    uaccess::{UserPtr, UserSlice},
};
use core::{marker::PhantomData, ops::Deref};

/// The driver-specific part of a user verb: what the process's provider library sent
/// (`inbuf`/`inlen`) and room for the driver's answer (`outbuf`/`outlen`), both in user memory.
/// Everything read here is untrusted.
///
/// # Invariants
///
/// `raw` is a valid `ib_udata` of the user verb being executed, for `'a`.
pub struct Udata<'a> {
    raw: *mut bindings::ib_udata,
    _p: PhantomData<&'a mut bindings::ib_udata>,
}

/// Request bytes past what the driver understands are read (to check they are zero) in chunks
/// of this size.
const TAIL_CHUNK: usize = 64;

impl Udata<'_> {
    /// Wraps the `ib_udata` of a user verb.
    ///
    /// # Safety
    ///
    /// `raw` must be the valid `ib_udata` of the user verb being executed, for the returned
    /// lifetime.
    pub(crate) unsafe fn from_raw<'a>(raw: *mut bindings::ib_udata) -> Udata<'a> {
        // INVARIANT: Function safety requirement.
        Udata {
            raw,
            _p: PhantomData,
        }
    }

    /// Wraps the `ib_udata` of a user verb, or `None` for a null one (a kernel caller).
    ///
    /// # Safety
    ///
    /// `raw` must be null or the valid `ib_udata` of the user verb being executed, for the
    /// returned lifetime.
    pub(crate) unsafe fn from_raw_opt<'a>(raw: *mut bindings::ib_udata) -> Option<Udata<'a>> {
        // SAFETY: A non-null `raw` is valid for `'a` (function safety requirement).
        (!raw.is_null()).then(|| unsafe { Self::from_raw(raw) })
    }

    /// Bytes the provider sent.
    pub fn in_len(&self) -> usize {
        // SAFETY: By the type invariant `raw` is valid.
        unsafe { (*self.raw).inlen }
    }

    /// Bytes of room for the answer.
    pub fn out_len(&self) -> usize {
        // SAFETY: By the type invariant `raw` is valid.
        unsafe { (*self.raw).outlen }
    }

    /// Reads the request into `out`, which is the request structure the driver knows. A shorter
    /// request fails with [`EINVAL`]; a longer one (a newer provider) is accepted only if the
    /// bytes past `out` are zero, else it fails with [`EOPNOTSUPP`], so that no request the
    /// driver does not understand is half-obeyed.
    pub fn read_request(&mut self, out: &mut [u8]) -> Result {
        let len = self.in_len();
        if len < out.len() {
            return Err(EINVAL);
        }
        // SAFETY: By the type invariant `raw` is valid; `inbuf` is a user address, which
        // `UserSlice` only ever accesses with the user-copy functions.
        let inbuf = unsafe { (*self.raw).inbuf };
        let mut reader = UserSlice::new(UserPtr::from_ptr(inbuf.cast_mut()), len).reader();
        reader.read_slice(out)?;
        let mut chunk = [0u8; TAIL_CHUNK];
        while !reader.is_empty() {
            let n = reader.len().min(TAIL_CHUNK);
            reader.read_slice(&mut chunk[..n])?;
            if chunk[..n].iter().any(|&b| b != 0) {
                return Err(EOPNOTSUPP);
            }
        }
        Ok(())
    }

    /// Writes the answer `data`; a provider that left less room (an older one) gets the part
    /// that fits, as the verbs ABI's convention for growing responses is.
    pub fn write_response(&mut self, data: &[u8]) -> Result {
        let len = self.out_len().min(data.len());
        // SAFETY: By the type invariant `raw` is valid; `outbuf` is a user address, accessed
        // with the user-copy functions only.
        let outbuf = unsafe { (*self.raw).outbuf };
        UserSlice::new(UserPtr::from_ptr(outbuf), len)
            .writer()
            .write_slice(&data[..len])
    }
}

/// A user context: C `struct ib_ucontext` followed by the driver's [`Driver::Ucontext`]. The
/// core creates one when a process opens the device through uverbs and destroys it when the
/// process closes it (or exits), after every object the process created.
///
/// # Invariants
///
/// `ib` is a user context of a device whose driver is `T`, and `data` and `life` are
/// initialised.
#[repr(C)]
pub struct Ucontext<T: Driver> {
    ib: Opaque<bindings::ib_ucontext>,
    data: T::Ucontext,
    life: Arc<Life>,
}

/// Whether a user context still exists, shared with the [`UserMmap`]s made in it: removing an
/// mmap entry goes through its context, and nothing stops a driver from keeping one longer
/// than the context (a bug, but not one that may touch freed memory).
///
/// [`UserMmap`]: super::UserMmap
#[pin_data]
pub(crate) struct Life {
    /// True until the context is deallocated; held while an entry is removed through it.
    #[pin]
    pub(crate) alive: Mutex<bool>,
}

impl<T: Driver> Ucontext<T> {
    /// The size the core allocates for a user context (`size_ib_ucontext`).
    pub(crate) const SIZE: usize = {
        // The core allocates with kzalloc, which aligns to at least 8 bytes.
        assert!(core::mem::align_of::<Self>() <= 8);
        core::mem::size_of::<Self>()
    };

    pub(crate) fn as_raw(&self) -> *mut bindings::ib_ucontext {
        self.ib.get()
    }

    /// Creates a reference to a user context from a pointer the core holds.
    ///
    /// # Safety
    ///
    /// `uctx` must be a user context of a device of driver `T` that stays alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(uctx: *mut bindings::ib_ucontext) -> &'a Self {
        // SAFETY: `ib` is at offset 0 of the `repr(C)` `Ucontext<T>` (function safety
        // requirement).
        unsafe { &*uctx.cast::<Self>() }
    }

    /// The context's liveness, for the mmap entries made in it.
    pub(crate) fn life(&self) -> &Arc<Life> {
        &self.life
    }

    /// Returns the device the context belongs to.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: By the type invariant `ib` is a context of a device whose driver is `T`; the
        // device outlives its contexts.
        unsafe { Device::from_raw((*self.ib.get()).device) }
    }
}

impl<T: Driver> Deref for Ucontext<T> {
    type Target = T::Ucontext;

    fn deref(&self) -> &T::Ucontext {
        &self.data
    }
}

/// `alloc_ucontext` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a zeroed context of `Ucontext::<T>::SIZE` bytes whose
/// `device` is a device of driver `T`, and the `ib_udata` of the user verb.
pub(crate) unsafe extern "C" fn alloc_ucontext_callback<T: Driver>(
    uctx: *mut bindings::ib_ucontext,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `uctx` is valid and belongs to a device of driver `T` (function safety
        // requirement).
        let dev = unsafe { Device::<T>::from_raw((*uctx).device) };
        // SAFETY: `udata` is the verb's valid `ib_udata` (function safety requirement).
        let mut udata = unsafe { Udata::from_raw(udata) };
        let life = Arc::pin_init(
            pin_init!(Life {
                alive <- new_mutex!(true, "rdma_ucontext_life"),
            }),
            GFP_KERNEL,
        )?;
        let data = T::alloc_ucontext(dev, &mut udata)?;
        let uctx = uctx.cast::<Ucontext<T>>();
        // SAFETY: The core allocated `Ucontext::<T>::SIZE` bytes for `uctx`; `data` and `life`
        // are not initialised yet, so nothing is overwritten that needs dropping.
        // INVARIANT: From here `data` and `life` are initialised.
        unsafe {
            (&raw mut (*uctx).data).write(data);
            (&raw mut (*uctx).life).write(life);
        }
        Ok(0)
    })
}

/// `dealloc_ucontext` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a context for which [`alloc_ucontext_callback`] succeeded
/// and that is not used any more.
pub(crate) unsafe extern "C" fn dealloc_ucontext_callback<T: Driver>(
    uctx: *mut bindings::ib_ucontext,
) {
    let uctx = uctx.cast::<Ucontext<T>>();
    // SAFETY: `uctx` is valid (function safety requirement) and belongs to a device of driver
    // `T`.
    let dev = unsafe { Device::<T>::from_raw((*(*uctx).ib.get()).device) };
    // SAFETY: `data` was initialised by `alloc_ucontext_callback` and is moved out exactly once:
    // the core frees the memory after this returns and never calls back for this context.
    let data = unsafe { (&raw const (*uctx).data).read() };
    T::dealloc_ucontext(dev, data);
    // SAFETY: As for `data`.
    let life = unsafe { (&raw const (*uctx).life).read() };
    // From here a `UserMmap` still alive leaves its entry alone (the core warns of it and
    // frees the context after this returns).
    *life.alive.lock() = false;
}

/// `disassociate_ucontext` of the device's operations: the device is going away while a process
/// still holds a context. Nothing of the device is mapped into processes (a [`UserMmap`] is
/// plain kernel pages, which stay with the mappings), so there is nothing to revoke; the core
/// then destroys the context's objects and the context as usual, and the process's further
/// verbs fail with `EIO`. Offering it lets the driver be unbound (and unloaded) while
/// processes hold contexts, instead of waiting for them.
///
/// [`UserMmap`]: super::UserMmap
///
/// # Safety
///
/// Called by the RDMA core only.
pub(crate) unsafe extern "C" fn disassociate_ucontext_callback(_uctx: *mut bindings::ib_ucontext) {}
