// SPDX-License-Identifier: GPL-2.0

//! Completion queues, allocated by the RDMA core with room for the driver's part, and the
//! registry through which a driver finds the CQ a device signals.

use super::{registry::Slots, Device, Driver, Qp, Ucontext, Udata};
use crate::{bindings, error::from_result, prelude::*, sync::new_spinlock_irq, types::Opaque};
use core::{marker::PhantomData, ops::Deref, ptr};

/// What the consumer asked for when creating a CQ (`struct ib_cq_init_attr`).
#[derive(Clone, Copy, Debug)]
pub struct CqInitAttr {
    /// The number of completions the CQ must hold at least.
    pub cqe: u32,
    /// The completion vector (interrupt) the consumer wants.
    pub comp_vector: u32,
    /// `enum ib_cq_creation_flags`.
    pub flags: u32,
}

/// A CQ the driver created: its part of the CQ, how many completions it holds, and the index
/// under which the driver's [`CqRegistry`] finds it.
pub struct NewCq<D> {
    /// The driver's part of the CQ.
    pub data: D,
    /// The number of completions the CQ holds (at least what was asked for).
    pub depth: u32,
    /// The CQ's index in the driver's [`CqRegistry`] (the device's CQ number).
    pub index: u32,
}

/// How a consumer arms a CQ (`enum ib_cq_notify_flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqNotify(u32);

impl CqNotify {
    /// Notify on the next solicited (or error) completion only.
    pub fn solicited_only(self) -> bool {
        self.0 & bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
            == bindings::ib_cq_notify_flags_IB_CQ_SOLICITED
    }

    /// The consumer wants to know whether completions arrived before the CQ was armed
    /// (`IB_CQ_REPORT_MISSED_EVENTS`).
    pub fn report_missed_events(self) -> bool {
        self.0 & bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0
    }
}

/// A completion queue: C `struct ib_cq` followed by the driver's [`Driver::Cq`].
///
/// # Invariants
///
/// `ib` is a CQ of a device whose driver is `T`, and `index` and `data` are initialised.
#[repr(C)]
pub struct Cq<T: Driver> {
    ib: Opaque<bindings::ib_cq>,
    index: u32,
    data: T::Cq,
}

impl<T: Driver> Cq<T> {
    /// The size the core allocates for a CQ (`size_ib_cq`).
    pub(crate) const SIZE: usize = {
        // The core allocates with kzalloc, which aligns to at least 8 bytes.
        assert!(core::mem::align_of::<Self>() <= 8);
        core::mem::size_of::<Self>()
    };

    fn as_raw(&self) -> *mut bindings::ib_cq {
        self.ib.get()
    }

    /// Returns the device the CQ belongs to.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: By the type invariant `ib` is a CQ of a device whose driver is `T`; the
        // device outlives its CQs.
        unsafe { Device::from_raw((*self.as_raw()).device) }
    }

    /// The CQ's index in the driver's [`CqRegistry`].
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Calls the consumer's completion handler. Any context: consumers' handlers may run in
    /// hard-IRQ context (they typically schedule their polling).
    pub fn completion_event(&self) {
        // `ib_alloc_cq` sets `comp_handler` only once `create_cq` has returned (uverbs and
        // `ib_create_cq` set it before), so a completion may race with that one store: read it
        // once, as C's READ_ONCE would. `cq_context` is set before `create_cq` and never again.
        // SAFETY: By the type invariant `ib` is a valid CQ; `comp_handler` is a pointer-sized,
        // aligned field that the core stores once.
        unsafe {
            let ib = self.as_raw();
            let handler = core::ptr::read_volatile(&raw const (*ib).comp_handler);
            if let Some(handler) = handler {
                handler(ib, (*ib).cq_context);
            }
        }
    }
}

impl<T: Driver> Cq<T> {
    /// Reports `IB_EVENT_CQ_ERR` (completions were lost) to the consumer's event handler, if it
    /// gave one. Any context, as [`Self::completion_event`].
    pub fn error_event(&self) {
        // SAFETY: By the type invariant `ib` is a valid CQ; the core sets `event_handler`,
        // `cq_context` and `device` before calling `create_cq` and does not change them
        // afterwards. The event lives for the handler's call.
        unsafe {
            let ib = self.as_raw();
            if let Some(handler) = (*ib).event_handler {
                let mut event: bindings::ib_event = pin_init::zeroed();
                event.device = (*ib).device;
                event.element.cq = ib;
                event.event = bindings::ib_event_type_IB_EVENT_CQ_ERR;
                handler(&mut event, (*ib).cq_context);
            }
        }
    }
}

impl<T: Driver> Deref for Cq<T> {
    type Target = T::Cq;

    fn deref(&self) -> &T::Cq {
        &self.data
    }
}

/// The CQs of a device, by index: lets a driver find, from a device notification (for instance
/// a virtqueue callback in hard-IRQ context), the CQ whose consumer it must notify.
///
/// The abstraction adds a CQ when [`Driver::create_cq`] succeeds and removes it before
/// [`Driver::destroy_cq`] runs, so every CQ found here is alive.
///
/// # Invariants
///
/// Every object in `slots` is the `ib_cq` of a live [`Cq<T>`] whose index is its index.
#[pin_data]
pub struct CqRegistry<T: Driver> {
    #[pin]
    slots: Slots<bindings::ib_cq>,
    _driver: PhantomData<T>,
}

// SAFETY: The pointers are only dereferenced under the lock, to Cqs that are alive (type
// invariant); `Cq<T>` may be used from any thread (`T::Cq: Send + Sync`).
unsafe impl<T: Driver> Send for CqRegistry<T> {}
// SAFETY: See `Send`; all access goes through the lock.
unsafe impl<T: Driver> Sync for CqRegistry<T> {}

impl<T: Driver> CqRegistry<T> {
    /// A registry for CQ indices `0..count`.
    pub fn new(count: u32) -> impl PinInit<Self, Error> {
        let slots = KVec::from_elem(ptr::null_mut(), count as usize, GFP_KERNEL);
        try_pin_init!(Self {
            slots <- Slots::new(new_spinlock_irq!(slots?, "rdma_cq_registry")),
            _driver: PhantomData,
        })
    }

    /// Runs `f` on the CQ at `index`, if there is one. `f` runs under a spinlock with interrupts
    /// off: it must not sleep. Any context.
    pub fn with<R>(&self, index: u32, f: impl FnOnce(&Cq<T>) -> R) -> Option<R> {
        self.slots.with(index, |cq| {
            // SAFETY: The object is a live `Cq<T>` (type invariant), which stays alive while the
            // slots' lock is held: it is removed (under the lock) before it is destroyed.
            f(unsafe { &*cq.cast::<Cq<T>>() })
        })
    }

    /// Runs `f` on every CQ, by index. `f` runs under a spinlock with interrupts off: it must
    /// not sleep. Any context.
    pub fn each(&self, mut f: impl FnMut(&Cq<T>)) {
        self.slots.each(|cq| {
            // SAFETY: The object is a live `Cq<T>` (type invariant), which stays alive while the
            // slots' lock is held: it is removed (under the lock) before it is destroyed.
            f(unsafe { &*cq.cast::<Cq<T>>() })
        })
    }

    /// Calls the completion handler of the CQ at `index`; returns `false` if there is no CQ
    /// there. Any context.
    pub fn completion_event(&self, index: u32) -> bool {
        self.with(index, |cq| cq.completion_event()).is_some()
    }

    /// Reports to the consumer of the CQ at `index` that completions were lost
    /// (`IB_EVENT_CQ_ERR`); returns `false` if there is no CQ there. Any context; the handler
    /// runs under the registry's lock, so the CQ cannot be destroyed meanwhile.
    pub fn error_event(&self, index: u32) -> bool {
        self.with(index, |cq| cq.error_event()).is_some()
    }

    /// Adds `cq` at its index; [`EBUSY`] if the slot is taken, [`EINVAL`] if out of range.
    /// Reserves `index` for a Cq being created: a driver whose device names the index of a new
    /// Cq reserves it before it touches anything the index leads to, so that a device that
    /// hands out a index twice cannot make it act on the live Cq that has it. [`EBUSY`] if a
    /// Cq has it or is being created with it, [`EINVAL`] if out of range. The reservation
    /// ends when the Cq is added (once the driver's create succeeds) or with
    /// [`Self::release`]. A driver that reserves must reserve every index it creates.
    pub fn reserve(&self, index: u32) -> Result {
        self.slots.reserve(index)
    }

    /// Ends the reservation of `index` (the Cq could not be created).
    pub fn release(&self, index: u32) {
        self.slots.release(index)
    }

    /// Adds `cq` at its index (free or reserved); [`EBUSY`] if another Cq has it, [`EINVAL`]
    /// if out of range.
    fn insert(&self, cq: &Cq<T>) -> Result {
        // INVARIANT: `cq` is alive and is removed before it is destroyed.
        self.slots.insert(cq.index, cq.as_raw())
    }

    /// Removes `cq`, if it is registered.
    fn remove(&self, cq: &Cq<T>) {
        self.slots.remove(cq.index, cq.as_raw())
    }
}

/// `create_cq` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a zeroed CQ of `Cq::<T>::SIZE` bytes whose `device` is a
/// device of driver `T`, and valid `attr`.
pub(crate) unsafe extern "C" fn create_cq_callback<T: Driver>(
    cq: *mut bindings::ib_cq,
    attr: *const bindings::ib_cq_init_attr,
    attrs: *mut bindings::uverbs_attr_bundle,
) -> c_int {
    from_result(|| {
        // SAFETY: `cq` and `attr` are valid and `cq` belongs to a device of driver `T`
        // (function safety requirement).
        let (dev, attr) = unsafe { (Device::<T>::from_raw((*cq).device), &*attr) };
        let attr = CqInitAttr {
            cqe: attr.cqe,
            comp_vector: attr.comp_vector,
            flags: attr.flags,
        };
        // A user CQ (uverbs passes the verb's attributes): its context and the provider's udata.
        let mut user = if attrs.is_null() {
            None
        } else {
            // SAFETY: A non-null `attrs` is the valid attribute bundle of the user verb being
            // executed (function safety requirement); uverbs sets its `context` (a context of
            // this device, alive for the verb) before calling the driver.
            unsafe {
                let hdr = &raw mut (*attrs).__bindgen_anon_1.hdr;
                Some((
                    Ucontext::<T>::from_raw((*hdr).context),
                    Udata::from_raw(&raw mut (*hdr).driver_udata),
                ))
            }
        };
        let new = T::create_cq(dev, &attr, user.as_mut().map(|(ctx, udata)| (*ctx, udata)))?;
        let depth = c_int::try_from(new.depth);
        let obj = cq.cast::<Cq<T>>();
        // SAFETY: The core allocated `Cq::<T>::SIZE` bytes for `cq`; `index` and `data` are not
        // initialised yet, so nothing that needs dropping is overwritten.
        // INVARIANT: From here `index` and `data` are initialised.
        let obj = unsafe {
            (&raw mut (*obj).index).write(new.index);
            (&raw mut (*obj).data).write(new.data);
            &*obj
        };
        let registered = match depth {
            Ok(depth) => {
                // SAFETY: `cq` is valid; the core reads `cqe` only after this returns.
                unsafe { (*cq).cqe = depth };
                T::cq_registry(dev).insert(obj)
            }
            Err(_) => Err(EINVAL),
        };
        if let Err(e) = registered {
            T::destroy_cq(dev, obj);
            // A reservation the driver made for it goes with it.
            T::cq_registry(dev).release(obj.index);
            // SAFETY: `data` was initialised above and is not used again: the core frees the CQ
            // when this fails.
            unsafe { ptr::drop_in_place(&raw mut (*cq.cast::<Cq<T>>()).data) };
            return Err(e);
        }
        Ok(0)
    })
}

/// `destroy_cq` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a CQ for which [`create_cq_callback`] succeeded and that
/// is not used any more.
pub(crate) unsafe extern "C" fn destroy_cq_callback<T: Driver>(
    cq: *mut bindings::ib_cq,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: `cq` is a live `Cq<T>` (function safety requirement).
    let obj = unsafe { &*cq.cast::<Cq<T>>() };
    let dev = obj.device();
    T::cq_registry(dev).remove(obj);
    T::destroy_cq(dev, obj);
    // SAFETY: `data` is initialised and dropped exactly once: the core frees the CQ after this
    // returns and never calls back for it.
    unsafe { ptr::drop_in_place(&raw mut (*cq.cast::<Cq<T>>()).data) };
    0
}

// `resize_user_cq_callback` finds the verb's attribute bundle at its `driver_udata`.
const _: () = assert!(
    core::mem::offset_of!(
        bindings::uverbs_attr_bundle__bindgen_ty_1__bindgen_ty_1,
        driver_udata
    ) == 0
);

/// `resize_user_cq` of the device's operations.
///
/// # Safety
///
/// Called by uverbs only (a user verb, in the calling process's context), with a live user CQ
/// of driver `T`, held for reading for the verb, and the `driver_udata` of the verb's attribute
/// bundle as `udata`.
pub(crate) unsafe extern "C" fn resize_user_cq_callback<T: Driver>(
    cq: *mut bindings::ib_cq,
    cqe: c_uint,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        if udata.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: `cq` is a live `Cq<T>` (function safety requirement).
        let obj = unsafe { &*cq.cast::<Cq<T>>() };
        // SAFETY: `udata` is the `driver_udata` of the verb's attribute bundle (function safety
        // requirement), whose header also holds the verb's context: uverbs sets it (a context
        // of this CQ's device, alive for the verb) before calling the driver.
        let uctx = unsafe {
            // `driver_udata` is the bundle's first member (checked below).
            let bundle = udata.cast::<bindings::uverbs_attr_bundle>();
            let context = (*bundle).__bindgen_anon_1.hdr.context;
            if context.is_null() {
                return Err(EINVAL);
            }
            Ucontext::<T>::from_raw(context)
        };
        // SAFETY: `udata` is the verb's valid udata (function safety requirement).
        let mut udata = unsafe { Udata::from_raw(udata) };
        let depth = T::resize_user_cq(obj, uctx, cqe, &mut udata)?;
        // The CQ is resized now: a depth past `c_int` is told as the most it can say.
        let depth = c_int::try_from(depth).unwrap_or(c_int::MAX);
        // SAFETY: `cq` is valid. uverbs reads `cqe` for its answer after this returns; a second
        // resize of the CQ may store it at the same time (the core holds the CQ only for
        // reading), so the store is a single aligned one, as C's WRITE_ONCE.
        unsafe { ptr::write_volatile(&raw mut (*cq).cqe, depth) };
        Ok(0)
    })
}

/// `poll_cq` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a live CQ of driver `T` and room for `num` completions
/// at `wc`.
pub(crate) unsafe extern "C" fn poll_cq_callback<T: Driver>(
    cq: *mut bindings::ib_cq,
    num: c_int,
    wc: *mut bindings::ib_wc,
) -> c_int {
    let Ok(capacity) = usize::try_from(num) else {
        return EINVAL.to_errno();
    };
    // SAFETY: `cq` is a live `Cq<T>` (function safety requirement).
    let obj = unsafe { &*cq.cast::<Cq<T>>() };
    let mut sink = WcSink {
        wc,
        capacity,
        len: 0,
        _driver: PhantomData,
    };
    match T::poll_cq(obj, &mut sink) {
        // At most `num` (`c_int`) completions were written.
        Ok(()) => sink.len as c_int,
        Err(e) => e.to_errno(),
    }
}

/// `req_notify_cq` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a live CQ of driver `T`.
pub(crate) unsafe extern "C" fn req_notify_cq_callback<T: Driver>(
    cq: *mut bindings::ib_cq,
    flags: bindings::ib_cq_notify_flags,
) -> c_int {
    // SAFETY: `cq` is a live `Cq<T>` (function safety requirement).
    let obj = unsafe { &*cq.cast::<Cq<T>>() };
    match T::req_notify_cq(obj, CqNotify(flags)) {
        Ok(missed) => c_int::from(missed),
        Err(e) => e.to_errno(),
    }
}

/// Where [`Driver::poll_cq`] writes the completions it reaps: the consumer's `ib_wc` array.
///
/// # Invariants
///
/// `wc` has room for `capacity` completions, of which the first `len` are written.
pub struct WcSink<'a, T: Driver> {
    wc: *mut bindings::ib_wc,
    capacity: usize,
    len: usize,
    _driver: PhantomData<&'a T>,
}

impl<T: Driver> WcSink<'_, T> {
    /// Whether no more completions fit.
    pub fn is_full(&self) -> bool {
        self.len >= self.capacity
    }

    /// The number of completions written.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes `wc` as the next completion; [`ENOSPC`] if full.
    pub fn push(&mut self, wc: &Wc<'_, T>) -> Result {
        if self.is_full() {
            return Err(ENOSPC);
        }
        let mut raw: bindings::ib_wc = pin_init::zeroed();
        raw.__bindgen_anon_1.wr_id = wc.wr_id;
        raw.status = wc.status;
        raw.opcode = wc.opcode;
        raw.vendor_err = wc.vendor_err;
        raw.byte_len = wc.byte_len;
        raw.qp = wc.qp.as_raw();
        raw.ex.invalidate_rkey = wc.ex;
        raw.src_qp = wc.src_qp;
        raw.wc_flags = wc.wc_flags as c_int;
        raw.pkey_index = wc.pkey_index;
        raw.sl = wc.sl;
        raw.port_num = wc.port_num;
        raw.smac = wc.smac;
        raw.vlan_id = wc.vlan_id;
        raw.network_hdr_type = wc.network_hdr_type;
        // SAFETY: By the type invariant `wc` has room for `capacity > len` completions.
        unsafe { self.wc.add(self.len).write(raw) };
        self.len += 1;
        Ok(())
    }
}

/// A work completion (`struct ib_wc`), as a driver reports it from [`Driver::poll_cq`].
pub struct Wc<'a, T: Driver> {
    /// The QP the completed request was posted to (of the CQ's device).
    pub qp: &'a Qp<T>,
    /// The consumer's identifier of the request.
    pub wr_id: u64,
    /// `enum ib_wc_status`.
    pub status: u32,
    /// `enum ib_wc_opcode`.
    pub opcode: u32,
    /// Vendor error (device-specific detail of an error).
    pub vendor_err: u32,
    /// Bytes transferred (receives, READs, atomics).
    pub byte_len: u32,
    /// Immediate data (network byte order, as is) or the invalidated rkey.
    pub ex: u32,
    /// The sender's QP number (UD/GSI receives).
    pub src_qp: u32,
    /// `enum ib_wc_flags`.
    pub wc_flags: u32,
    /// P_Key index (GSI).
    pub pkey_index: u16,
    /// Service level.
    pub sl: u8,
    /// The port.
    pub port_num: u32,
    /// The sender's MAC (UD/GSI receives with `IB_WC_WITH_SMAC`).
    pub smac: [u8; 6],
    /// VLAN (with `IB_WC_WITH_VLAN`).
    pub vlan_id: u16,
    /// `enum rdma_network_type` (with `IB_WC_WITH_NETWORK_HDR_TYPE`).
    pub network_hdr_type: u8,
}
