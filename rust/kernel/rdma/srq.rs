// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues, allocated by the RDMA core with room for the driver's part.
//!
//! An SRQ holds receives that any QP created with it takes from (`ib_qp_init_attr.srq`); the
//! core counts those QPs and refuses to destroy an SRQ that still has one. Kernel consumers
//! post receives with `ib_post_srq_recv`; a process writes them into memory it shares with the
//! driver and rings the doorbell (uverbs `post_srq_recv` without requests), as for a QP.
//!
//! An XRC SRQ belongs to an XRC domain instead of to QPs: initiators name it per message, and
//! its receive completions go to a CQ of its own ([`SrqXrc`]).

use super::{qp::RecvWrs, registry::Slots, Cq, Device, Driver, Pd, Udata, Xrcd};
use crate::{bindings, error::from_result, prelude::*, sync::new_spinlock_irq, types::Opaque};
use core::{marker::PhantomData, ops::Deref, ptr};

/// The sizes and limit of an SRQ (`struct ib_srq_attr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrqAttr {
    /// Receives the SRQ holds at most.
    pub max_wr: u32,
    /// Scatter/gather entries per receive.
    pub max_sge: u32,
    /// The limit: when fewer receives are left, the consumer gets
    /// `IB_EVENT_SRQ_LIMIT_REACHED` once (0: not armed).
    pub srq_limit: u32,
}

/// What `ib_modify_srq` asks to change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqChange {
    /// A new size (`IB_SRQ_MAX_WR`), which only devices with `IB_DEVICE_SRQ_RESIZE` offer.
    pub max_wr: Option<u32>,
    /// A new limit (`IB_SRQ_LIMIT`): arms the limit event (0 disarms it).
    pub srq_limit: Option<u32>,
}

/// What makes an SRQ an XRC SRQ: its domain and the CQ its receive completions go to.
pub struct SrqXrc<'a, T: Driver> {
    /// The XRC domain.
    pub xrcd: &'a Xrcd<T>,
    /// The CQ of the SRQ's receive completions.
    pub cq: &'a Cq<T>,
}

/// An SRQ the driver created: its part, its index in the driver's [`SrqRegistry`] and its
/// actual sizes (at least those asked for).
pub struct NewSrq<D> {
    /// The driver's part of the SRQ.
    pub data: D,
    /// The SRQ's index (the device's number for it).
    pub index: u32,
    /// The sizes the SRQ has.
    pub attr: SrqAttr,
}

/// A shared receive queue: C `struct ib_srq` followed by the driver's [`Driver::Srq`].
///
/// # Invariants
///
/// `ib` is a basic or XRC SRQ of a device whose driver is `T`, created by the driver (its PD,
/// and an XRC SRQ's domain and CQ, are of that device), `index` is the index the driver gave
/// it, and `data` is initialised.
#[repr(C)]
pub struct Srq<T: Driver> {
    ib: Opaque<bindings::ib_srq>,
    index: u32,
    data: T::Srq,
}

impl<T: Driver> Srq<T> {
    /// The size the core allocates for an SRQ (`size_ib_srq`).
    pub(crate) const SIZE: usize = {
        // The core allocates with kzalloc, which aligns to at least 8 bytes.
        assert!(core::mem::align_of::<Self>() <= 8);
        core::mem::size_of::<Self>()
    };

    pub(crate) fn as_raw(&self) -> *mut bindings::ib_srq {
        self.ib.get()
    }

    /// Returns the device the SRQ belongs to.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: By the type invariant `ib` is an SRQ of a device of driver `T`, which outlives
        // its SRQs.
        unsafe { Device::from_raw((*self.as_raw()).device) }
    }

    /// The SRQ's index in the driver's [`SrqRegistry`].
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Whether a process created the SRQ (through uverbs).
    pub fn is_user(&self) -> bool {
        // SAFETY: By the type invariant `ib` is valid; the core sets `uobject` before creating
        // the SRQ and never changes it.
        !unsafe { (*self.as_raw()).uobject }.is_null()
    }

    /// Reports `IB_EVENT_SRQ_LIMIT_REACHED` to the consumer's event handler, if it gave one.
    /// Any context: consumers' handlers may run in hard-IRQ context.
    pub fn limit_event(&self) {
        // SAFETY: By the type invariant `ib` is a valid SRQ; the core sets `event_handler`,
        // `srq_context` and `device` before calling `create_srq` and does not change them
        // afterwards. The event lives for the handler's call.
        unsafe {
            let ib = self.as_raw();
            if let Some(handler) = (*ib).event_handler {
                let mut ev: bindings::ib_event = pin_init::zeroed();
                ev.device = (*ib).device;
                ev.element.srq = ib;
                ev.event = bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED;
                handler(&mut ev, (*ib).srq_context);
            }
        }
    }
}

impl<T: Driver> Deref for Srq<T> {
    type Target = T::Srq;

    fn deref(&self) -> &T::Srq {
        &self.data
    }
}

/// The SRQs of a device, by index: lets a driver find the SRQ a device event names.
///
/// The abstraction adds an SRQ when [`Driver::create_srq`] succeeds and removes it once
/// [`Driver::destroy_srq`] succeeded, so every SRQ found here is alive.
///
/// # Invariants
///
/// Every object in `slots` is the `ib_srq` of a live [`Srq<T>`] whose index is its index.
#[pin_data]
pub struct SrqRegistry<T: Driver> {
    #[pin]
    slots: Slots<bindings::ib_srq>,
    _driver: PhantomData<T>,
}

// SAFETY: The pointers are only dereferenced under the lock, to SRQs that are alive (type
// invariant); `Srq<T>` may be used from any thread (`T::Srq: Send + Sync`).
unsafe impl<T: Driver> Send for SrqRegistry<T> {}
// SAFETY: See `Send`; all access goes through the lock.
unsafe impl<T: Driver> Sync for SrqRegistry<T> {}

impl<T: Driver> SrqRegistry<T> {
    /// A registry for SRQ indices `0..count`.
    pub fn new(count: u32) -> impl PinInit<Self, Error> {
        let slots = KVec::from_elem(ptr::null_mut(), count as usize, GFP_KERNEL);
        try_pin_init!(Self {
            slots <- Slots::new(new_spinlock_irq!(slots?, "rdma_srq_registry")),
            _driver: PhantomData,
        })
    }

    /// Runs `f` on the SRQ at `index`, if there is one. `f` runs under a spinlock with
    /// interrupts off: it must not sleep. Any context.
    pub fn with<R>(&self, index: u32, f: impl FnOnce(&Srq<T>) -> R) -> Option<R> {
        self.slots.with(index, |srq| {
            // SAFETY: The object is a live `Srq<T>` (type invariant), which stays alive while
            // the slots' lock is held: it is removed (under the lock) before it is freed.
            f(unsafe { &*srq.cast::<Srq<T>>() })
        })
    }

    /// Reserves `index` for an SRQ being created (see
    /// [`CqRegistry::reserve`](super::CqRegistry::reserve)): [`EBUSY`] if an SRQ has it or is
    /// being created with it, [`EINVAL`] if out of range. The reservation ends when the SRQ
    /// is added or with [`Self::release`].
    pub fn reserve(&self, index: u32) -> Result {
        self.slots.reserve(index)
    }

    /// Ends the reservation of `index` (the SRQ could not be created).
    pub fn release(&self, index: u32) {
        self.slots.release(index)
    }

    fn insert(&self, srq: &Srq<T>) -> Result {
        // INVARIANT: `srq` is alive and is removed before it is freed.
        self.slots.insert(srq.index, srq.as_raw())
    }

    fn remove(&self, srq: &Srq<T>) {
        self.slots.remove(srq.index, srq.as_raw())
    }
}

/// `create_srq` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a zeroed SRQ of `Srq::<T>::SIZE` bytes whose `device` and
/// `pd` (and, for an XRC SRQ, `ext.xrc.xrcd` and `ext.cq`) are of a device of driver `T`, valid
/// `init`, and a null `udata` (a kernel SRQ) or the user verb's.
pub(crate) unsafe extern "C" fn create_srq_callback<T: Driver>(
    srq: *mut bindings::ib_srq,
    init: *mut bindings::ib_srq_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `udata` is null or the user verb's (function safety requirement).
        let mut udata = unsafe { Udata::from_raw_opt(udata) };
        // SAFETY: `srq` and `init` are valid (function safety requirement).
        let (raw, init) = unsafe { (&mut *srq, &mut *init) };
        if raw.pd.is_null() {
            return Err(EINVAL);
        }
        let xrc = match init.srq_type {
            bindings::ib_srq_type_IB_SRQT_BASIC => None,
            // The core sets an XRC SRQ's domain and CQ (both checked non-null here) before
            // calling, and holds references to them for the SRQ's lifetime.
            bindings::ib_srq_type_IB_SRQT_XRC if T::HAS_ALLOC_XRCD => {
                // SAFETY: `ext.xrc` is the member of the union the core set for an XRC SRQ.
                let xrcd = unsafe { raw.ext.__bindgen_anon_1.xrc.xrcd };
                if xrcd.is_null() || raw.ext.cq.is_null() {
                    return Err(EINVAL);
                }
                // SAFETY: The domain and the CQ are live objects of a device of driver `T`
                // (function safety requirement: the core allocated them through this
                // driver's operations) and outlive the SRQ.
                Some(unsafe {
                    SrqXrc {
                        xrcd: Xrcd::from_raw(xrcd),
                        cq: &*raw.ext.cq.cast::<Cq<T>>(),
                    }
                })
            }
            // Tag-matching SRQs, and XRC ones of a driver without domains.
            _ => return Err(EOPNOTSUPP),
        };
        // SAFETY: The PD is a live object of a device of driver `T` (function safety
        // requirement); the core holds a reference to it for the SRQ's lifetime.
        let pd = unsafe { &*raw.pd.cast::<Pd<T>>() };
        let asked = SrqAttr {
            max_wr: init.attr.max_wr,
            max_sge: init.attr.max_sge,
            srq_limit: init.attr.srq_limit,
        };
        let is_xrc = xrc.is_some();
        let new = T::create_srq(pd, &asked, xrc, udata.as_mut())?;
        if is_xrc {
            // What uverbs answers the process, and initiators name.
            raw.ext.__bindgen_anon_1.xrc.srq_num = new.index;
        }
        init.attr.max_wr = new.attr.max_wr;
        init.attr.max_sge = new.attr.max_sge;
        let obj = srq.cast::<Srq<T>>();
        // SAFETY: The core allocated `Srq::<T>::SIZE` bytes for `srq`; `index` and `data` are
        // not initialised yet, so nothing that needs dropping is overwritten.
        // INVARIANT: From here `index` and `data` are initialised.
        let obj = unsafe {
            (&raw mut (*obj).index).write(new.index);
            (&raw mut (*obj).data).write(new.data);
            &*obj
        };
        let registry = T::srq_registry(pd.device());
        if let Err(e) = registry.insert(obj) {
            // Undone as far as the device goes; a device that cannot destroy what it just
            // created keeps it, as a failed destroy does.
            let _ = T::destroy_srq(obj);
            registry.release(new.index);
            // SAFETY: `data` was initialised above and is not used again: the core frees the
            // SRQ when this fails.
            unsafe { ptr::drop_in_place(&raw mut (*srq.cast::<Srq<T>>()).data) };
            return Err(e);
        }
        Ok(0)
    })
}

/// `destroy_srq` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with an SRQ for which [`create_srq_callback`] succeeded and
/// that no QP uses any more.
pub(crate) unsafe extern "C" fn destroy_srq_callback<T: Driver>(
    srq: *mut bindings::ib_srq,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `srq` is a live `Srq<T>` (function safety requirement).
        let obj = unsafe { &*srq.cast::<Srq<T>>() };
        // On failure the SRQ stays as it was (the core keeps it and reports the error).
        T::destroy_srq(obj)?;
        T::srq_registry(obj.device()).remove(obj);
        // SAFETY: `data` is initialised and dropped exactly once: the core frees the SRQ after
        // this returns 0 and never calls back for it.
        unsafe { ptr::drop_in_place(&raw mut (*srq.cast::<Srq<T>>()).data) };
        Ok(0)
    })
}

/// `modify_srq` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a live SRQ of driver `T`, valid `attr`, and a null
/// `udata` or the user verb's.
pub(crate) unsafe extern "C" fn modify_srq_callback<T: Driver>(
    srq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
    mask: bindings::ib_srq_attr_mask,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `udata` is null or the user verb's (function safety requirement).
        if let Some(mut udata) = unsafe { Udata::from_raw_opt(udata) } {
            // No driver data is defined for modify_srq: refuse what this driver does not know.
            udata.read_request(&mut [])?;
        }
        if mask
            & !(bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR | bindings::ib_srq_attr_mask_IB_SRQ_LIMIT)
            != 0
        {
            return Err(EINVAL);
        }
        // SAFETY: `srq` is a live `Srq<T>` and `attr` valid for the call (function safety
        // requirement).
        let (obj, attr) = unsafe { (&*srq.cast::<Srq<T>>(), &*attr) };
        let change = SrqChange {
            max_wr: (mask & bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR != 0).then_some(attr.max_wr),
            srq_limit: (mask & bindings::ib_srq_attr_mask_IB_SRQ_LIMIT != 0)
                .then_some(attr.srq_limit),
        };
        T::modify_srq(obj, &change)?;
        Ok(0)
    })
}

/// `query_srq` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a live SRQ of driver `T` and a valid `attr`.
pub(crate) unsafe extern "C" fn query_srq_callback<T: Driver>(
    srq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
) -> c_int {
    from_result(|| {
        // SAFETY: `srq` is a live `Srq<T>` and `attr` valid for writes (function safety
        // requirement).
        let (obj, attr) = unsafe { (&*srq.cast::<Srq<T>>(), &mut *attr) };
        let now = T::query_srq(obj)?;
        attr.max_wr = now.max_wr;
        attr.max_sge = now.max_sge;
        attr.srq_limit = now.srq_limit;
        Ok(0)
    })
}

/// `post_srq_recv` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a live SRQ of driver `T`, a valid chain of requests (or
/// none, for a user SRQ's doorbell) and a valid `bad`.
pub(crate) unsafe extern "C" fn post_srq_recv_callback<T: Driver>(
    srq: *mut bindings::ib_srq,
    wr: *const bindings::ib_recv_wr,
    bad: *mut *const bindings::ib_recv_wr,
) -> c_int {
    // SAFETY: `srq` is a live `Srq<T>` (function safety requirement).
    let obj = unsafe { &*srq.cast::<Srq<T>>() };
    // SAFETY: `wr` is null or a valid chain (function safety requirement).
    let mut wrs = unsafe { RecvWrs::new(wr) };
    // A process posts through its ring: uverbs without requests is its doorbell. Requests in
    // kernel form are refused (see `qp::user_post`).
    let result = match (obj.is_user(), wr.is_null()) {
        (true, true) => T::ring_srq_doorbell(obj),
        (true, false) => Err(EINVAL),
        (false, _) => T::post_srq_recv(obj, &mut wrs),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            // SAFETY: `bad` is valid for writes (function safety requirement).
            unsafe { bad.write(wrs.current()) };
            e.to_errno()
        }
    }
}
