// SPDX-License-Identifier: GPL-2.0

//! Queue pairs, allocated by the RDMA core with room for the driver's part; their attributes;
//! and the work requests posted to them.

use super::{registry::Slots, Ah, Cq, Device, Driver, Mr, Pd, Srq, Udata, Xrcd};
use crate::{bindings, error::from_result, prelude::*, sync::new_spinlock_irq, types::Opaque};
use core::{marker::PhantomData, ops::Deref, ptr};

/// A QP's queue sizes (`struct ib_qp_cap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpCap {
    /// Send work requests outstanding at most.
    pub max_send_wr: u32,
    /// Receive work requests outstanding at most.
    pub max_recv_wr: u32,
    /// Scatter/gather entries per send work request.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive work request.
    pub max_recv_sge: u32,
    /// Bytes of inline data per send work request.
    pub max_inline_data: u32,
}

/// What the consumer asked for when creating a QP (`struct ib_qp_init_attr`).
#[derive(Clone, Copy, Debug)]
pub struct QpInitAttr {
    /// `enum ib_qp_type`.
    pub qp_type: u32,
    /// The queue sizes asked for.
    pub cap: QpCap,
    /// Every send work request completes with a completion (`IB_SIGNAL_ALL_WR`).
    pub sq_sig_all: bool,
    /// `enum ib_qp_create_flags`.
    pub create_flags: u32,
    /// The index of the shared receive queue the QP takes its receives from
    /// ([`Srq::index`]), if any.
    pub srq: Option<u32>,
    /// The port (GSI QPs).
    pub port_num: u32,
}

/// A QP the driver created: its part of the QP, its number and its actual queue sizes.
pub struct NewQp<D> {
    /// The driver's part of the QP.
    pub data: D,
    /// The QP number (also the QP's index in the driver's [`QpRegistry`]).
    pub qpn: u32,
    /// The queue sizes the QP has (at least those asked for).
    pub cap: QpCap,
}

/// A queue pair: C `struct ib_qp` followed by the driver's [`Driver::Qp`].
///
/// # Invariants
///
/// `ib` is a QP of a device whose driver is `T`, created by the driver (its PD and CQs, or an
/// XRC target QP's domain, are of that device), and `data` is initialised.
#[repr(C)]
pub struct Qp<T: Driver> {
    ib: Opaque<bindings::ib_qp>,
    data: T::Qp,
}

impl<T: Driver> Qp<T> {
    /// The size the core allocates for a QP (`size_ib_qp`).
    pub(crate) const SIZE: usize = {
        // The core allocates with kzalloc, which aligns to at least 8 bytes.
        assert!(core::mem::align_of::<Self>() <= 8);
        core::mem::size_of::<Self>()
    };

    pub(crate) fn as_raw(&self) -> *mut bindings::ib_qp {
        self.ib.get()
    }

    /// Returns the device the QP belongs to.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: By the type invariant `ib` is a QP of a device of driver `T`, which outlives
        // its QPs.
        unsafe { Device::from_raw((*self.as_raw()).device) }
    }

    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: By the type invariant `ib` is valid; `qp_num` is set at creation.
        unsafe { (*self.as_raw()).qp_num }
    }

    /// Whether a process created the QP (through uverbs).
    pub fn is_user(&self) -> bool {
        // SAFETY: By the type invariant `ib` is valid; the core sets `uobject` before creating
        // a user QP and never changes it.
        !unsafe { (*self.as_raw()).uobject }.is_null()
    }

    /// The shared receive queue the QP takes its receives from, if any.
    pub fn srq(&self) -> Option<&Srq<T>> {
        // SAFETY: By the type invariant `ib` is valid; the core sets `srq` before creating the
        // QP, never changes it, and keeps the SRQ (a use count that refuses its destruction)
        // until the QP is destroyed; it is an SRQ of the QP's device, so of driver `T`.
        unsafe {
            let srq = (*self.as_raw()).srq;
            (!srq.is_null()).then(|| &*srq.cast::<Srq<T>>())
        }
    }
}

/// One of the two work queues of a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkQueue {
    /// The send queue.
    Send,
    /// The receive queue.
    Recv,
}

/// An asynchronous error of a QP that no completion reports, for the QP's consumer
/// (`enum ib_event_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpEvent {
    /// The QP moved to error for a reason of its own (`IB_EVENT_QP_FATAL`), e.g. a completion
    /// of it was lost.
    Fatal,
    /// As responder, the QP received an invalid request and moved to error
    /// (`IB_EVENT_QP_REQ_ERR`).
    RequestError,
    /// As responder, the QP saw a remote access violation and moved to error
    /// (`IB_EVENT_QP_ACCESS_ERR`).
    AccessError,
    /// A QP with a shared receive queue is in error and takes no more receives from it
    /// (`IB_EVENT_QP_LAST_WQE_REACHED`).
    LastWqeReached,
}

impl QpEvent {
    fn raw(self) -> bindings::ib_event_type {
        match self {
            Self::Fatal => bindings::ib_event_type_IB_EVENT_QP_FATAL,
            Self::RequestError => bindings::ib_event_type_IB_EVENT_QP_REQ_ERR,
            Self::AccessError => bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR,
            Self::LastWqeReached => bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
        }
    }
}

impl<T: Driver> Qp<T> {
    /// Reports `event` to the QP's event handler, if it has one. Any context: consumers' QP
    /// event handlers may run in hard-IRQ context (as with drivers that dispatch them from
    /// their event-queue interrupt).
    fn event(&self, event: QpEvent) {
        // SAFETY: By the type invariant `ib` is a valid QP; the core sets `event_handler`,
        // `qp_context` and `device` before calling `create_qp` and does not change them
        // afterwards. The event lives for the handler's call.
        unsafe {
            let ib = self.as_raw();
            if let Some(handler) = (*ib).event_handler {
                let mut ev: bindings::ib_event = pin_init::zeroed();
                ev.device = (*ib).device;
                ev.element.qp = ib;
                ev.event = event.raw();
                handler(&mut ev, (*ib).qp_context);
            }
        }
    }
}

impl<T: Driver> Deref for Qp<T> {
    type Target = T::Qp;

    fn deref(&self) -> &T::Qp {
        &self.data
    }
}

/// The QPs of a device, by QP number: lets a driver find the QP a completion names.
///
/// The abstraction adds a QP when [`Driver::create_qp`] succeeds and removes it before
/// [`Driver::destroy_qp`] runs, so every QP found here is alive.
///
/// # Invariants
///
/// Every object in `slots` is the `ib_qp` of a live [`Qp<T>`] whose number is its index.
#[pin_data]
pub struct QpRegistry<T: Driver> {
    #[pin]
    slots: Slots<bindings::ib_qp>,
    _driver: PhantomData<T>,
}

// SAFETY: The pointers are only dereferenced under the lock, to Qps that are alive (type
// invariant); `Qp<T>` may be used from any thread (`T::Qp: Send + Sync`).
unsafe impl<T: Driver> Send for QpRegistry<T> {}
// SAFETY: See `Send`; all access goes through the lock.
unsafe impl<T: Driver> Sync for QpRegistry<T> {}

impl<T: Driver> QpRegistry<T> {
    /// A registry for QP numbers `0..count`.
    pub fn new(count: u32) -> impl PinInit<Self, Error> {
        let slots = KVec::from_elem(ptr::null_mut(), count as usize, GFP_KERNEL);
        try_pin_init!(Self {
            slots <- Slots::new(new_spinlock_irq!(slots?, "rdma_qp_registry")),
            _driver: PhantomData,
        })
    }

    /// Runs `f` on QP `qpn`, if it exists. `f` runs under a spinlock with interrupts off: it
    /// must not sleep. Any context.
    pub fn with<R>(&self, qpn: u32, f: impl FnOnce(&Qp<T>) -> R) -> Option<R> {
        self.slots.with(qpn, |qp| {
            // SAFETY: The object is a live `Qp<T>` (type invariant), which stays alive while the
            // slots' lock is held: it is removed (under the lock) before it is destroyed.
            f(unsafe { &*qp.cast::<Qp<T>>() })
        })
    }

    /// Runs `f` on every QP, by number. `f` runs under a spinlock with interrupts off: it must
    /// not sleep. Any context.
    pub fn each(&self, mut f: impl FnMut(&Qp<T>)) {
        self.slots.each(|qp| {
            // SAFETY: The object is a live `Qp<T>` (type invariant), which stays alive while the
            // slots' lock is held: it is removed (under the lock) before it is destroyed.
            f(unsafe { &*qp.cast::<Qp<T>>() })
        })
    }

    /// Reports `event` to the consumer of QP `qpn`; returns `false` if there is no such QP. Any
    /// context; the handler runs under the registry's lock, so the QP cannot be destroyed
    /// meanwhile.
    pub fn event(&self, qpn: u32, event: QpEvent) -> bool {
        self.with(qpn, |qp| qp.event(event)).is_some()
    }

    /// Reserves `qpn` for a Qp being created: a driver whose device names the number of a new
    /// Qp reserves it before it touches anything the number leads to, so that a device that
    /// hands out a number twice cannot make it act on the live Qp that has it. [`EBUSY`] if a
    /// Qp has it or is being created with it, [`EINVAL`] if out of range. The reservation
    /// ends when the Qp is added (once the driver's create succeeds) or with
    /// [`Self::release`]. A driver that reserves must reserve every number it creates.
    pub fn reserve(&self, qpn: u32) -> Result {
        self.slots.reserve(qpn)
    }

    /// Ends the reservation of `qpn` (the Qp could not be created).
    pub fn release(&self, qpn: u32) {
        self.slots.release(qpn)
    }

    /// Adds `qp` at its number (free or reserved); [`EBUSY`] if another Qp has it, [`EINVAL`]
    /// if out of range.
    fn insert(&self, qp: &Qp<T>) -> Result {
        // INVARIANT: `qp` is alive and is removed before it is destroyed.
        self.slots.insert(qp.qp_num(), qp.as_raw())
    }

    /// Removes `qp`, if it is registered.
    fn remove(&self, qp: &Qp<T>) {
        self.slots.remove(qp.qp_num(), qp.as_raw())
    }
}

/// Attributes of a QP to modify (`struct ib_qp_attr`), of which the mask given with it says
/// which are set.
#[repr(transparent)]
pub struct QpAttr(bindings::ib_qp_attr);

impl QpAttr {
    /// The plain fields.
    pub fn raw(&self) -> &bindings::ib_qp_attr {
        &self.0
    }

    /// The primary path's address vector, if it is a RoCE one.
    pub fn ah(&self) -> Option<RoceAv> {
        RoceAv::from_attr(&self.0.ah_attr)
    }
}

/// A RoCE address vector: the global route and the destination MAC (`struct rdma_ah_attr`).
#[derive(Clone, Copy, Debug)]
pub struct RoceAv {
    /// The destination GID, in network byte order.
    pub dgid: [u8; 16],
    /// IPv6 flow label.
    pub flow_label: u32,
    /// Index of the source GID in the port's table.
    pub sgid_index: u8,
    /// Hop limit (TTL).
    pub hop_limit: u8,
    /// Traffic class (DSCP/ECN).
    pub traffic_class: u8,
    /// Service level.
    pub sl: u8,
    /// Static rate (`enum ib_rate`).
    pub static_rate: u8,
    /// The port.
    pub port_num: u32,
    /// The destination MAC (resolved by the core).
    pub dmac: [u8; 6],
}

impl RoceAv {
    pub(crate) fn from_attr(ah: &bindings::rdma_ah_attr) -> Option<Self> {
        if ah.type_ != bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE {
            return None;
        }
        Some(Self {
            // SAFETY: Every member of `union ib_gid` is plain bytes covering the same 16 bytes.
            dgid: unsafe { ah.grh.dgid.raw },
            flow_label: ah.grh.flow_label,
            sgid_index: ah.grh.sgid_index,
            hop_limit: ah.grh.hop_limit,
            traffic_class: ah.grh.traffic_class,
            sl: ah.sl,
            static_rate: ah.static_rate,
            port_num: ah.port_num,
            // SAFETY: A RoCE address vector (checked above) uses the `roce` member.
            dmac: unsafe { ah.__bindgen_anon_1.roce.dmac },
        })
    }

    /// Writes this address vector into `ah` as a RoCE one with a global route, as a query of
    /// a QP returns it; `ah`'s source GID attribute (a reference the core manages) is left
    /// alone.
    pub fn write_attr(&self, ah: &mut bindings::rdma_ah_attr) {
        ah.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        ah.ah_flags = bindings::ib_ah_flags_IB_AH_GRH as u8;
        ah.port_num = self.port_num;
        ah.sl = self.sl;
        ah.static_rate = self.static_rate;
        ah.grh.dgid = bindings::ib_gid { raw: self.dgid };
        ah.grh.flow_label = self.flow_label;
        ah.grh.sgid_index = self.sgid_index;
        ah.grh.hop_limit = self.hop_limit;
        ah.grh.traffic_class = self.traffic_class;
        ah.__bindgen_anon_1 = bindings::rdma_ah_attr__bindgen_ty_1 {
            roce: bindings::roce_ah_attr { dmac: self.dmac },
        };
    }
}

/// A scatter/gather entry of a work request (`struct ib_sge`).
pub type Sge = bindings::ib_sge;

/// The payload part of a send work request, by opcode.
#[derive(Clone, Copy, Debug)]
pub enum SendOp {
    /// A SEND (with immediate data or invalidation as the opcode says).
    Send,
    /// An RDMA WRITE or READ: the remote address and key.
    Rdma {
        /// Remote address.
        remote_addr: u64,
        /// Remote key.
        rkey: u32,
    },
    /// An atomic operation.
    Atomic {
        /// Remote address (8-byte aligned).
        remote_addr: u64,
        /// Compare (CMP_AND_SWP) or add (FETCH_AND_ADD) operand.
        compare_add: u64,
        /// Swap operand.
        swap: u64,
        /// Remote key.
        rkey: u32,
    },
    /// A local invalidation of the rkey in [`SendWr::ex`].
    LocalInv,
    /// A fast registration (see [`SendWr::reg`]).
    Reg,
    /// An opcode this abstraction does not describe (yet): the driver refuses it.
    Other,
}

/// A send work request (`struct ib_send_wr` and the request it is part of) posted to a QP of a
/// device of driver `T`.
///
/// # Invariants
///
/// `wr` is a valid work request, part of the structure its opcode implies, valid for `'a`,
/// posted to a QP of a device of driver `T` (so the objects it names, its AH and its MR, are
/// that driver's).
pub struct SendWr<'a, T: Driver> {
    wr: &'a bindings::ib_send_wr,
    /// The type of the QP the request is posted to (which decides the request's structure).
    qp_type: u32,
    _driver: PhantomData<T>,
}

impl<'a, T: Driver> SendWr<'a, T> {
    /// The consumer's identifier of the request.
    pub fn wr_id(&self) -> u64 {
        // SAFETY: Both members of the union are 8 bytes of plain data (a pointer or an
        // integer); the value is passed through as is.
        unsafe { self.wr.__bindgen_anon_1.wr_id }
    }

    /// `enum ib_wr_opcode`.
    pub fn opcode(&self) -> u32 {
        self.wr.opcode
    }

    /// `enum ib_send_flags`.
    pub fn send_flags(&self) -> u32 {
        self.wr.send_flags as u32
    }

    /// Immediate data (network byte order, as is) or the rkey to invalidate.
    pub fn ex(&self) -> u32 {
        // SAFETY: Both members of the union are a plain `u32`.
        unsafe { self.wr.ex.invalidate_rkey }
    }

    /// The scatter/gather list; [`EINVAL`] if the consumer gave a negative count.
    pub fn sges(&self) -> Result<&'a [Sge]> {
        let n = usize::try_from(self.wr.num_sge).map_err(|_| EINVAL)?;
        if n == 0 {
            return Ok(&[]);
        }
        // SAFETY: By the verbs contract `sg_list` points to `num_sge` entries valid for the
        // call (`'a`).
        Ok(unsafe { core::slice::from_raw_parts(self.wr.sg_list, n) })
    }

    /// The opcode's payload.
    pub fn op(&self) -> SendOp {
        let wr: *const bindings::ib_send_wr = self.wr;
        match self.opcode() {
            bindings::ib_wr_opcode_IB_WR_SEND
            | bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM
            | bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV => SendOp::Send,
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE
            | bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
            | bindings::ib_wr_opcode_IB_WR_RDMA_READ => {
                // SAFETY: By the type invariant a request with an RDMA opcode is the `wr` of an
                // `ib_rdma_wr` (first member).
                let rdma = unsafe { &*wr.cast::<bindings::ib_rdma_wr>() };
                SendOp::Rdma {
                    remote_addr: rdma.remote_addr,
                    rkey: rdma.rkey,
                }
            }
            bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
            | bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
                // SAFETY: By the type invariant a request with an atomic opcode is the `wr` of
                // an `ib_atomic_wr` (first member).
                let atomic = unsafe { &*wr.cast::<bindings::ib_atomic_wr>() };
                SendOp::Atomic {
                    remote_addr: atomic.remote_addr,
                    compare_add: atomic.compare_add,
                    swap: atomic.swap,
                    rkey: atomic.rkey,
                }
            }
            bindings::ib_wr_opcode_IB_WR_LOCAL_INV => SendOp::LocalInv,
            bindings::ib_wr_opcode_IB_WR_REG_MR => SendOp::Reg,
            _ => SendOp::Other,
        }
    }

    /// The MR, key and access rights (`enum ib_access_flags`) of a REG_MR request; `None` for
    /// other opcodes.
    pub fn reg(&self) -> Option<(&'a Mr<T>, u32, u32)> {
        if self.opcode() != bindings::ib_wr_opcode_IB_WR_REG_MR {
            return None;
        }
        let wr: *const bindings::ib_send_wr = self.wr;
        // SAFETY: By the type invariant a REG_MR request is the `wr` of an `ib_reg_wr` (first
        // member).
        let reg = unsafe { &*wr.cast::<bindings::ib_reg_wr>() };
        if reg.mr.is_null() {
            return None;
        }
        // SAFETY: By the verbs contract the MR is a live fast-registration MR of the QP's
        // device, which is of driver `T` (type invariant), valid for the call.
        let mr = unsafe { &*reg.mr.cast::<Mr<T>>() };
        Some((mr, reg.key, reg.access as u32))
    }

    /// The destination of a request posted to a UD or GSI QP: its address handle, QP number
    /// and Q_Key. `None` on other QPs.
    pub fn ud(&self) -> Option<(&'a Ah<T>, u32, u32)> {
        if !matches!(
            self.qp_type,
            bindings::ib_qp_type_IB_QPT_UD | bindings::ib_qp_type_IB_QPT_GSI
        ) {
            return None;
        }
        let wr: *const bindings::ib_send_wr = self.wr;
        // SAFETY: By the type invariant a request posted to a UD/GSI QP is the `wr` of an
        // `ib_ud_wr` (first member).
        let ud = unsafe { &*wr.cast::<bindings::ib_ud_wr>() };
        if ud.ah.is_null() {
            return None;
        }
        // SAFETY: By the verbs contract the AH is a live AH of the QP's device, which is of
        // driver `T` (type invariant), valid for the call.
        let ah = unsafe { &*ud.ah.cast::<Ah<T>>() };
        Some((ah, ud.remote_qpn, ud.remote_qkey))
    }

    /// Copies the data of an inline request (`IB_SEND_INLINE`, whose entries are kernel
    /// virtual addresses) into `out`; returns its length, or [`EINVAL`] if it does not fit.
    pub fn copy_inline(&self, out: &mut [u8]) -> Result<usize> {
        if self.send_flags() & bindings::ib_send_flags_IB_SEND_INLINE as u32 == 0 {
            return Err(EINVAL);
        }
        let mut len = 0usize;
        for sge in self.sges()? {
            let n = sge.length as usize;
            let dst = out
                .get_mut(len..len.checked_add(n).ok_or(EINVAL)?)
                .ok_or(EINVAL)?;
            // SAFETY: By the verbs contract the entries of an inline kernel request are kernel
            // virtual addresses of `length` readable bytes, valid for the call.
            let src = unsafe { core::slice::from_raw_parts(sge.addr as usize as *const u8, n) };
            dst.copy_from_slice(src);
            len += n;
        }
        Ok(len)
    }
}

/// The send work requests of one `post_send` call to a QP of a device of driver `T`. The
/// abstraction reports the request the driver failed on as the consumer's `bad_wr`.
///
/// # Invariants
///
/// `next` starts a valid chain of requests posted to a QP of a device of driver `T`.
pub struct SendWrs<'a, T: Driver> {
    next: *const bindings::ib_send_wr,
    current: *const bindings::ib_send_wr,
    qp_type: u32,
    _wr: PhantomData<(&'a bindings::ib_send_wr, T)>,
}

impl<'a, T: Driver> Iterator for SendWrs<'a, T> {
    type Item = SendWr<'a, T>;

    fn next(&mut self) -> Option<SendWr<'a, T>> {
        if self.next.is_null() {
            return None;
        }
        self.current = self.next;
        // SAFETY: By the verbs contract the chain consists of valid requests (each part of the
        // structure its opcode implies), valid for the call.
        let wr = unsafe { &*self.current };
        self.next = wr.next;
        // INVARIANT: See above; the chain is posted to a QP of driver `T` (type invariant).
        Some(SendWr {
            wr,
            qp_type: self.qp_type,
            _driver: PhantomData,
        })
    }
}

/// A receive work request (`struct ib_recv_wr`).
pub struct RecvWr<'a> {
    wr: &'a bindings::ib_recv_wr,
}

impl<'a> RecvWr<'a> {
    /// The consumer's identifier of the request.
    pub fn wr_id(&self) -> u64 {
        // SAFETY: Both members of the union are 8 bytes of plain data.
        unsafe { self.wr.__bindgen_anon_1.wr_id }
    }

    /// The scatter/gather list; [`EINVAL`] if the consumer gave a negative count.
    pub fn sges(&self) -> Result<&'a [Sge]> {
        let n = usize::try_from(self.wr.num_sge).map_err(|_| EINVAL)?;
        if n == 0 {
            return Ok(&[]);
        }
        // SAFETY: By the verbs contract `sg_list` points to `num_sge` entries valid for the
        // call (`'a`).
        Ok(unsafe { core::slice::from_raw_parts(self.wr.sg_list, n) })
    }
}

/// The receive work requests of one `post_recv` call.
pub struct RecvWrs<'a> {
    next: *const bindings::ib_recv_wr,
    current: *const bindings::ib_recv_wr,
    _wr: PhantomData<&'a bindings::ib_recv_wr>,
}

impl RecvWrs<'_> {
    /// The requests of the chain that starts at `wr` (none if it is null).
    ///
    /// # Safety
    ///
    /// `wr` is null or the first of a chain of valid requests that outlives the iterator.
    pub(crate) unsafe fn new(wr: *const bindings::ib_recv_wr) -> Self {
        Self {
            next: wr,
            current: wr,
            _wr: PhantomData,
        }
    }

    /// The request yielded last (the first, before any), to report as the one that failed.
    pub(crate) fn current(&self) -> *const bindings::ib_recv_wr {
        self.current
    }
}

impl<'a> Iterator for RecvWrs<'a> {
    type Item = RecvWr<'a>;

    fn next(&mut self) -> Option<RecvWr<'a>> {
        if self.next.is_null() {
            return None;
        }
        self.current = self.next;
        // SAFETY: By the verbs contract the chain consists of valid requests.
        let wr = unsafe { &*self.current };
        self.next = wr.next;
        Some(RecvWr { wr })
    }
}

/// `create_qp` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a zeroed QP of `Qp::<T>::SIZE` bytes whose `device`, `pd`
/// and CQs (an XRC target QP: `init.xrcd`) are of a device of driver `T`, valid `init`, and a
/// null `udata` (a kernel QP, or an XRC target QP) or the user verb's (for a QP of a user PD).
pub(crate) unsafe extern "C" fn create_qp_callback<T: Driver>(
    qp: *mut bindings::ib_qp,
    init: *mut bindings::ib_qp_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `udata` is null (a kernel QP) or the user verb's (function safety
        // requirement).
        let mut udata = unsafe { Udata::from_raw_opt(udata) };
        // SAFETY: `qp` and `init` are valid (function safety requirement).
        let (raw, init) = unsafe { (&mut *qp, &mut *init) };
        let attr = QpInitAttr {
            qp_type: init.qp_type,
            cap: QpCap {
                max_send_wr: init.cap.max_send_wr,
                max_recv_wr: init.cap.max_recv_wr,
                max_send_sge: init.cap.max_send_sge,
                max_recv_sge: init.cap.max_recv_sge,
                max_inline_data: init.cap.max_inline_data,
            },
            sq_sig_all: init.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
            create_flags: init.create_flags,
            srq: (!init.srq.is_null()).then(|| {
                // SAFETY: A non-null `srq` is a live SRQ of a device of driver `T` (function
                // safety requirement), whose index was set when it was created.
                unsafe { (*init.srq.cast::<Srq<T>>()).index() }
            }),
            port_num: init.port_num,
        };
        let new = if init.qp_type == bindings::ib_qp_type_IB_QPT_XRC_TGT {
            // The core keeps target QPs itself (processes open them by number): no PD, no
            // CQs, no user data, only the domain.
            if !T::HAS_ALLOC_XRCD {
                return Err(EOPNOTSUPP);
            }
            if init.xrcd.is_null() || udata.is_some() {
                return Err(EINVAL);
            }
            // SAFETY: The domain is a live object of a device of driver `T` (function safety
            // requirement); the core holds a reference to it for the QP's lifetime.
            T::create_xrc_tgt_qp(unsafe { Xrcd::from_raw(init.xrcd) }, &attr)?
        } else {
            // Only an XRC initiator QP, which receives nothing, has no receive CQ.
            let no_recv_cq_ok = init.qp_type == bindings::ib_qp_type_IB_QPT_XRC_INI;
            if raw.pd.is_null()
                || init.send_cq.is_null()
                || (init.recv_cq.is_null() && !no_recv_cq_ok)
            {
                return Err(EINVAL);
            }
            // SAFETY: The PD and CQs are live objects of a device of driver `T` (function
            // safety requirement); the core holds references to them for the QP's lifetime.
            let (pd, send_cq, recv_cq) = unsafe {
                (
                    &*raw.pd.cast::<Pd<T>>(),
                    &*init.send_cq.cast::<Cq<T>>(),
                    init.recv_cq.cast::<Cq<T>>().as_ref(),
                )
            };
            T::create_qp(pd, &attr, send_cq, recv_cq, udata.as_mut())?
        };
        raw.qp_num = new.qpn;
        init.cap.max_send_wr = new.cap.max_send_wr;
        init.cap.max_recv_wr = new.cap.max_recv_wr;
        init.cap.max_send_sge = new.cap.max_send_sge;
        init.cap.max_recv_sge = new.cap.max_recv_sge;
        init.cap.max_inline_data = new.cap.max_inline_data;
        let obj = qp.cast::<Qp<T>>();
        // SAFETY: The core allocated `Qp::<T>::SIZE` bytes for `qp`; `data` is not initialised
        // yet, so nothing that needs dropping is overwritten.
        // INVARIANT: From here `data` is initialised.
        let obj = unsafe {
            (&raw mut (*obj).data).write(new.data);
            &*obj
        };
        let registry = T::qp_registry(obj.device());
        if let Err(e) = registry.insert(obj) {
            T::destroy_qp(obj);
            // A reservation the driver made for it goes with it.
            registry.release(new.qpn);
            // SAFETY: `data` was initialised above and is not used again: the core frees the QP
            // when this fails.
            unsafe { ptr::drop_in_place(&raw mut (*qp.cast::<Qp<T>>()).data) };
            return Err(e);
        }
        Ok(0)
    })
}

/// `destroy_qp` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a QP for which [`create_qp_callback`] succeeded and that
/// is not used any more.
pub(crate) unsafe extern "C" fn destroy_qp_callback<T: Driver>(
    qp: *mut bindings::ib_qp,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    // SAFETY: `qp` is a live `Qp<T>` (function safety requirement).
    let obj = unsafe { &*qp.cast::<Qp<T>>() };
    T::qp_registry(obj.device()).remove(obj);
    T::destroy_qp(obj);
    // SAFETY: `data` is initialised and dropped exactly once: the core frees the QP after this
    // returns and never calls back for it.
    unsafe { ptr::drop_in_place(&raw mut (*qp.cast::<Qp<T>>()).data) };
    0
}

/// `modify_qp` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a live QP of driver `T`, valid `attr`, and a null `udata`
/// or the user verb's.
pub(crate) unsafe extern "C" fn modify_qp_callback<T: Driver>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    mask: c_int,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `udata` is null or the user verb's (function safety requirement).
        if let Some(mut udata) = unsafe { Udata::from_raw_opt(udata) } {
            // No driver data is defined for modify_qp: refuse what this driver does not know.
            udata.read_request(&mut [])?;
        }
        // SAFETY: `qp` is a live `Qp<T>` and `attr` valid for the call (function safety
        // requirement); `QpAttr` is a transparent wrapper of `ib_qp_attr`.
        let (obj, attr) = unsafe { (&*qp.cast::<Qp<T>>(), &*attr.cast::<QpAttr>()) };
        T::modify_qp(obj, attr, mask as u32)?;
        Ok(0)
    })
}

/// `query_qp` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a live QP of driver `T` and valid outputs.
pub(crate) unsafe extern "C" fn query_qp_callback<T: Driver>(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    _mask: c_int,
    init: *mut bindings::ib_qp_init_attr,
) -> c_int {
    from_result(|| {
        // SAFETY: `qp` is a live `Qp<T>`, `attr` and `init` are valid for writes (function
        // safety requirement).
        let (obj, attr, init) = unsafe { (&*qp.cast::<Qp<T>>(), &mut *attr, &mut *init) };
        T::query_qp(obj, attr, init)?;
        Ok(0)
    })
}

/// `post_send` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a live QP of driver `T`, a valid chain of requests and
/// a valid `bad`.
pub(crate) unsafe extern "C" fn post_send_callback<T: Driver>(
    qp: *mut bindings::ib_qp,
    wr: *const bindings::ib_send_wr,
    bad: *mut *const bindings::ib_send_wr,
) -> c_int {
    // SAFETY: `qp` is a live `Qp<T>` (function safety requirement).
    let obj = unsafe { &*qp.cast::<Qp<T>>() };
    if obj.is_user() {
        return user_post(obj, WorkQueue::Send, wr.is_null(), || {
            // SAFETY: `bad` is valid for writes (function safety requirement).
            unsafe { bad.write(wr) }
        });
    }
    // INVARIANT: The chain is posted to `obj`, a QP of driver `T`.
    let mut wrs = SendWrs::<T> {
        next: wr,
        current: wr,
        // SAFETY: `qp` is valid; `qp_type` is set before the QP is created.
        qp_type: unsafe { (*qp).qp_type },
        _wr: PhantomData,
    };
    match T::post_send(obj, &mut wrs) {
        Ok(()) => 0,
        Err(e) => {
            // SAFETY: `bad` is valid for writes (function safety requirement).
            unsafe { bad.write(wrs.current) };
            e.to_errno()
        }
    }
}

/// `post_recv` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a live QP of driver `T`, a valid chain of requests and
/// a valid `bad`.
pub(crate) unsafe extern "C" fn post_recv_callback<T: Driver>(
    qp: *mut bindings::ib_qp,
    wr: *const bindings::ib_recv_wr,
    bad: *mut *const bindings::ib_recv_wr,
) -> c_int {
    // SAFETY: `qp` is a live `Qp<T>` (function safety requirement).
    let obj = unsafe { &*qp.cast::<Qp<T>>() };
    if obj.is_user() {
        return user_post(obj, WorkQueue::Recv, wr.is_null(), || {
            // SAFETY: `bad` is valid for writes (function safety requirement).
            unsafe { bad.write(wr) }
        });
    }
    // SAFETY: `wr` is a valid chain (function safety requirement).
    let mut wrs = unsafe { RecvWrs::new(wr) };
    match T::post_recv(obj, &mut wrs) {
        Ok(()) => 0,
        Err(e) => {
            // SAFETY: `bad` is valid for writes (function safety requirement).
            unsafe { bad.write(wrs.current) };
            e.to_errno()
        }
    }
}

/// A post to a user QP: uverbs without requests is the process's doorbell. Requests in kernel
/// form are refused: they would name user memory by address in fields the driver reads as
/// kernel memory (inline data), and the process's rings are the only way in.
fn user_post<T: Driver>(
    qp: &Qp<T>,
    queue: WorkQueue,
    no_wr: bool,
    set_bad: impl FnOnce(),
) -> c_int {
    let result = if no_wr {
        T::ring_doorbell(qp, queue)
    } else {
        Err(EINVAL)
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            set_bad();
            e.to_errno()
        }
    }
}
