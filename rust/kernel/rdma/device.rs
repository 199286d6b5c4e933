// SPDX-License-Identifier: GPL-2.0

//! RDMA devices: the driver's operations, allocation and registration.

use super::{
    ah::{self, Ah},
    counters::{self, CounterDesc},
    cq::{self, CqInitAttr, CqNotify, CqRegistry, NewCq, WcSink},
    mmap,
    mr::{self, Mr, NewMr, Rereg},
    mw::{self, MwType, NewMw},
    netdev::PortNetdev,
    pd,
    qp::{self, NewQp, QpAttr, QpInitAttr, QpRegistry, RecvWrs, RoceAv, SendWrs, WorkQueue},
    restrack::{self, ResAttrs},
    roce,
    srq::{self, NewSrq, Srq, SrqAttr, SrqChange, SrqRegistry, SrqXrc},
    ucontext::{self, Ucontext, Udata},
    xrcd::{self, Xrcd},
    Cq, GidAttr, Pd, Qp,
};
use crate::{
    bindings, device,
    error::{from_result, to_result, VTABLE_DEFAULT_ERROR},
    module::{this_module, ModuleMetadata},
    prelude::*,
    str::CStr,
    sync::aref::ARef,
    types::Opaque,
};
use core::{
    num::NonZeroU32,
    ops::Deref,
    ptr::{self, NonNull},
    sync::atomic::{AtomicBool, Ordering},
};

/// The node type of an RDMA device (`enum rdma_node_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum NodeType {
    /// An InfiniBand (or RoCE) channel adapter.
    Ca = bindings::RDMA_NODE_IB_CA,
}

/// The link layer of a port (`enum rdma_link_layer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum LinkLayer {
    /// InfiniBand.
    Infiniband = bindings::rdma_link_layer_IB_LINK_LAYER_INFINIBAND,
    /// Ethernet (RoCE).
    Ethernet = bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET,
}

/// The operations of an RDMA device, implemented by its driver for the data it keeps per device.
///
/// The RDMA core calls them in process context unless a method says otherwise. Operations a
/// driver does not implement are left unset in the device's `ib_device_ops`: the core then
/// treats the device as not usable by kernel ULPs until every mandatory verb is there
/// (`kverbs_provider`), and refuses the corresponding user verbs.
#[vtable]
pub trait Driver: Sized + Send + Sync {
    /// The module that owns the device (the core holds a reference while user contexts exist).
    type OwnerModule: ModuleMetadata;

    /// The version of the driver's user ABI (`ib_device_ops.uverbs_abi_ver`, which providers
    /// read from sysfs to decide whether they can drive the device).
    const UVERBS_ABI_VERSION: u32 = 0;

    /// The driver's part of a user context ([`Ucontext`](super::Ucontext)).
    type Ucontext: Send + Sync;

    /// The names of each port's hardware counters (`rdma statistic`, sysfs `hw_counters`), in
    /// the order [`Driver::get_hw_stats`] reads them.
    const PORT_COUNTERS: &'static [CounterDesc] = &[];

    /// Adds the driver's attributes of `qp` to what `rdma res show qp -dd` prints.
    fn fill_res_qp(_qp: &Qp<Self>, _attrs: &mut ResAttrs<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Adds the driver's attributes of `cq` to what `rdma res show cq -dd` prints.
    fn fill_res_cq(_cq: &Cq<Self>, _attrs: &mut ResAttrs<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Adds the driver's attributes of `mr` to what `rdma res show mr -dd` prints.
    fn fill_res_mr(_mr: &Mr<Self>, _attrs: &mut ResAttrs<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Reads the hardware counters of `port` into `values`, one per entry of
    /// [`Driver::PORT_COUNTERS`]. May sleep. Without this operation (or without counters) the
    /// ports have none.
    fn get_hw_stats(_dev: &Device<Self>, _port: u32, _values: &mut [u64]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Binds `qp` to the device's counter set `set`, or, when the core's counter has none yet
    /// (`None`), to a new one made for `port`; returns the set's number. From then on the QP
    /// counts in that set instead of in the port's counters (which [`Driver::get_hw_stats`]
    /// reads): the core shows a port's counters as its own plus every set's. With this
    /// operation the driver must also offer the other counter-set operations below, and
    /// [`Driver::PORT_COUNTERS`] (a set's values have the port's layout).
    fn counter_bind_qp(_qp: &Qp<Self>, _set: Option<NonZeroU32>, _port: u32) -> Result<NonZeroU32> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// `qp`, bound to counter set `set`, counts in the port's counters again.
    fn counter_unbind_qp(_qp: &Qp<Self>, _set: NonZeroU32, _port: u32) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Frees counter set `set`, to which no QP is bound any more.
    fn counter_dealloc(_dev: &Device<Self>, _set: NonZeroU32) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Reads counter set `set` of `port` into `values`, one per entry of
    /// [`Driver::PORT_COUNTERS`]. May sleep.
    fn counter_update_stats(
        _dev: &Device<Self>,
        _set: NonZeroU32,
        _port: u32,
        _values: &mut [u64],
    ) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// A process opens the device through uverbs: creates the driver's part of its context.
    /// `udata` carries the provider's request and room for the driver's answer. Without this
    /// operation the device has no uverbs interface at all.
    fn alloc_ucontext(_dev: &Device<Self>, _udata: &mut Udata<'_>) -> Result<Self::Ucontext> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Releases the driver's part of a user context; every object of the context is gone. By
    /// default the driver's part is just dropped.
    fn dealloc_ucontext(_dev: &Device<Self>, _ctx: Self::Ucontext) {}

    /// The driver's part of a protection domain ([`Pd`](super::Pd)).
    type Pd: Send + Sync;

    /// Fills in the device's attributes (`ibv_query_device`).
    fn query_device(dev: &Device<Self>, attr: &mut bindings::ib_device_attr) -> Result;

    /// Fills in the attributes of `port`; `attr` is zeroed by the core.
    fn query_port(dev: &Device<Self>, port: u32, attr: &mut bindings::ib_port_attr) -> Result;

    /// Fills in the attributes of `port` that never change (capabilities, table sizes).
    fn get_port_immutable(
        dev: &Device<Self>,
        port: u32,
        immutable: &mut bindings::ib_port_immutable,
    ) -> Result;

    /// Returns the link layer of `port`.
    fn get_link_layer(_dev: &Device<Self>, _port: u32) -> LinkLayer {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Returns the P_Key at `index` of `port`'s P_Key table.
    fn query_pkey(_dev: &Device<Self>, _port: u32, _index: u16) -> Result<u16> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// The core added an entry to a port's GID table (RoCE).
    fn add_gid(_dev: &Device<Self>, _attr: &GidAttr) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// The core removed an entry from a port's GID table (RoCE).
    fn del_gid(_dev: &Device<Self>, _attr: &GidAttr) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Allocates the driver's part of a protection domain.
    fn alloc_pd(dev: &Device<Self>) -> Result<Self::Pd>;

    /// Releases the driver's part of a protection domain. The core frees the PD whatever
    /// happens: a device that fails to destroy it can only be reported.
    fn dealloc_pd(dev: &Device<Self>, pd: Self::Pd);

    /// The driver's part of a memory region ([`Mr`](super::Mr)).
    type Mr: Send + Sync;

    /// Creates an MR of `pd` over all memory, addressed by DMA address, with access rights
    /// `access` (`enum ib_access_flags`).
    fn get_dma_mr(pd: &Pd<Self>, access: u32) -> Result<NewMr<Self::Mr>>;

    /// Creates a fast-registration MR of `pd` for up to `max_num_sg` pages; it is invalid until
    /// mapped ([`Driver::map_mr_sg_start`], [`Driver::mr_set_page`]) and registered by a REG_MR
    /// work request.
    fn alloc_mr(pd: &Pd<Self>, max_num_sg: u32) -> Result<NewMr<Self::Mr>>;

    /// Registers user memory `[start, start + length)` of the calling process as an MR of
    /// `pd` that work requests address as `[virt_addr, virt_addr + length)`, with access
    /// rights `access` (`enum ib_access_flags`). Runs in the process's context (a user verb):
    /// pin the pages with [`Umem::get`](super::Umem::get).
    fn reg_user_mr(
        _pd: &Pd<Self>,
        _start: u64,
        _length: u64,
        _virt_addr: u64,
        _access: u32,
    ) -> Result<NewMr<Self::Mr>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Reregisters user MR `mr` ([`Driver::reg_user_mr`]) as of `pd` (the MR's own PD unless
    /// the verb changes it), over `trans` if given (else the same pinned pages at the same
    /// address), with access rights `access` if given (else the same): either in place
    /// ([`Rereg::InPlace`]: the MR keeps its handle and keys), or by registering a replacement
    /// ([`Rereg::Replaced`]), which the core puts under the MR's handle before it deregisters
    /// `mr` ([`Driver::dereg_mr`]). On an error `mr` stays as it was. Runs in the process's
    /// context (a user verb), which holds the MR for writing: no other verb uses it meanwhile.
    fn rereg_user_mr(
        _mr: &Mr<Self>,
        _pd: &Pd<Self>,
        _trans: Option<super::UserRange>,
        _access: Option<u32>,
    ) -> Result<Rereg<Self::Mr>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Starts mapping a fast-registration MR (the core then calls [`Driver::mr_set_page`] per
    /// page, and sets the MR's IOVA and length). Any context: must not sleep.
    fn map_mr_sg_start(mr: &Mr<Self>) -> Result;

    /// Adds the page at DMA address `addr` to the MR being mapped. Any context.
    fn mr_set_page(mr: &Mr<Self>, addr: u64) -> Result;

    /// Deregisters an MR. An error that gives the MR's part back (the device refused: memory
    /// windows are bound to it) leaves the MR registered, and the verb fails with it; the core
    /// may try again later. Otherwise the MR is gone whatever happened: a device that failed to
    /// deregister it can only be reported.
    fn dereg_mr(dev: &Device<Self>, mr: Self::Mr) -> core::result::Result<(), (Error, Self::Mr)>;

    /// The driver's part of a memory window ([`Mw`](super::Mw)).
    type Mw: Send + Sync;

    /// Allocates a memory window of `pd` (a process's: only processes have windows). Runs in
    /// the process's context (a user verb).
    fn alloc_mw(_pd: &Pd<Self>, _mw_type: MwType) -> Result<NewMw<Self::Mw>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Deallocates a memory window (a bound one is unbound first). The core frees it whatever
    /// happens: a device that fails to can only be reported.
    fn dealloc_mw(_dev: &Device<Self>, _mw: Self::Mw) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// The driver's part of a shared receive queue ([`Srq`]).
    type Srq: Send + Sync;

    /// The registry of the device's SRQs (see [`SrqRegistry`]).
    fn srq_registry(_dev: &Device<Self>) -> &SrqRegistry<Self> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates the driver's part of a shared receive queue of `pd` with at least the sizes in
    /// `attr` and its limit: a kernel one, or with `udata` a process's, whose receives the
    /// process writes into memory it shares with the driver and announces with
    /// [`Driver::ring_srq_doorbell`]. With `xrc`, an XRC SRQ of that domain, whose receive
    /// completions go to that CQ (a driver without [`Driver::alloc_xrcd`] never gets one).
    /// The driver reserves the index it returns (see [`SrqRegistry::reserve`]); an XRC SRQ's
    /// index is also its number, which initiators name.
    fn create_srq(
        _pd: &Pd<Self>,
        _attr: &SrqAttr,
        _xrc: Option<SrqXrc<'_, Self>>,
        _udata: Option<&mut Udata<'_>>,
    ) -> Result<NewSrq<Self::Srq>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Destroys a shared receive queue no QP uses any more: when this returns `Ok`, the device
    /// no longer uses it, and the abstraction removes it from the registry and drops its data.
    /// On an error the SRQ stays as it was.
    fn destroy_srq(_srq: &Srq<Self>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Changes an SRQ's size or limit.
    fn modify_srq(_srq: &Srq<Self>, _change: &SrqChange) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Reports an SRQ's sizes and its limit as it is now.
    fn query_srq(_srq: &Srq<Self>) -> Result<SrqAttr> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Posts receives to a kernel SRQ, as [`Driver::post_recv`] does to a QP. Any context:
    /// must not sleep.
    fn post_srq_recv(_srq: &Srq<Self>, _wrs: &mut RecvWrs<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// The process of a user SRQ wrote receives into its ring and asks the driver to tell the
    /// device (uverbs `post_srq_recv` without requests). Must not sleep; everything in the
    /// ring is untrusted.
    fn ring_srq_doorbell(_srq: &Srq<Self>) -> Result {
        Err(EOPNOTSUPP)
    }

    /// The driver's part of a completion queue ([`Cq`](super::Cq)).
    type Cq: Send + Sync;

    /// The registry of the device's CQs (see [`CqRegistry`]).
    fn cq_registry(dev: &Device<Self>) -> &CqRegistry<Self>;

    /// Creates the driver's part of a completion queue: a kernel one, or with `user` one a
    /// process created through uverbs (its context, and the provider's request with room for
    /// the answer).
    fn create_cq(
        dev: &Device<Self>,
        attr: &CqInitAttr,
        user: Option<(&Ucontext<Self>, &mut Udata<'_>)>,
    ) -> Result<NewCq<Self::Cq>>;

    /// Destroys a completion queue: when this returns, the device no longer writes to its
    /// memory. The abstraction has removed it from the registry and drops its data afterwards.
    fn destroy_cq(dev: &Device<Self>, cq: &Cq<Self>);

    /// Resizes user CQ `cq` to hold at least `cqe` completions (`ibv_resize_cq`): `uctx` is
    /// the CQ's user context, `udata` the provider's request with room for the answer. Returns
    /// the number of completions the CQ holds now; on an error the CQ stays as it was. Runs in
    /// the process's context (a user verb). The core holds the CQ only for reading: two
    /// resizes of one CQ may run at once, and the driver serialises them.
    fn resize_user_cq(
        _cq: &Cq<Self>,
        _uctx: &Ucontext<Self>,
        _cqe: u32,
        _udata: &mut Udata<'_>,
    ) -> Result<u32> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Reaps up to the sink's capacity of completions. May run in any context, hard IRQ
    /// included: must not sleep.
    fn poll_cq(cq: &Cq<Self>, sink: &mut WcSink<'_, Self>) -> Result;

    /// Arms the CQ: the consumer's completion handler runs for the next completion (or the next
    /// solicited one). Returns `true` if completions may have arrived before arming and
    /// `flags` asked to know (`IB_CQ_REPORT_MISSED_EVENTS`). Any context: must not sleep.
    fn req_notify_cq(cq: &Cq<Self>, flags: CqNotify) -> Result<bool>;

    /// The driver's part of a queue pair ([`Qp`](super::Qp)).
    type Qp: Send + Sync;

    /// The registry of the device's QPs (see [`QpRegistry`]).
    fn qp_registry(dev: &Device<Self>) -> &QpRegistry<Self>;

    /// Creates the driver's part of a queue pair of `pd` whose send and receive completions go
    /// to `send_cq` and `recv_cq`: a kernel one, or with `udata` a user one (of the user context
    /// of `pd`), whose work requests the process writes into memory it shares with the driver
    /// ([`UserMmap`](super::UserMmap)) and then announces with [`Driver::ring_doorbell`].
    /// Only an XRC initiator QP (`IB_QPT_XRC_INI`, which receives nothing) has no `recv_cq`.
    fn create_qp(
        pd: &Pd<Self>,
        attr: &QpInitAttr,
        send_cq: &Cq<Self>,
        recv_cq: Option<&Cq<Self>>,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<NewQp<Self::Qp>>;

    /// The driver's part of an XRC domain ([`Xrcd`]).
    type Xrcd: Send + Sync;

    /// Allocates the driver's part of an XRC domain. A driver with this operation offers XRC:
    /// it also implements [`Driver::dealloc_xrcd`] and [`Driver::create_xrc_tgt_qp`], and
    /// XRC SRQs in [`Driver::create_srq`].
    fn alloc_xrcd(_dev: &Device<Self>) -> Result<Self::Xrcd> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Releases the driver's part of an XRC domain nothing uses any more. The core frees the
    /// domain whatever happens: a device that fails to free it can only be reported.
    fn dealloc_xrcd(_dev: &Device<Self>, _xrcd: Self::Xrcd) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates the driver's part of an XRC target QP of `xrcd`: no queues, no CQs, no PD. It
    /// takes the receives of its messages from the domain's XRC SRQs that initiators name.
    /// The core creates it for a process but keeps it itself (processes open it by number),
    /// so there is no user data.
    fn create_xrc_tgt_qp(_xrcd: &Xrcd<Self>, _attr: &QpInitAttr) -> Result<NewQp<Self::Qp>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Destroys a queue pair: when this returns the device no longer uses its queues. The
    /// abstraction has removed it from the registry and drops its data afterwards.
    fn destroy_qp(qp: &Qp<Self>);

    /// Modifies the attributes of a QP that `mask` (`enum ib_qp_attr_mask`) names.
    fn modify_qp(qp: &Qp<Self>, attr: &QpAttr, mask: u32) -> Result;

    /// Fills in a QP's attributes and creation attributes.
    fn query_qp(
        qp: &Qp<Self>,
        attr: &mut bindings::ib_qp_attr,
        init: &mut bindings::ib_qp_init_attr,
    ) -> Result;

    /// Posts send work requests, in order; on failure the abstraction reports the request the
    /// iterator yielded last as the one that failed (or the first, if none was taken). Any
    /// context: must not sleep.
    fn post_send(qp: &Qp<Self>, wrs: &mut SendWrs<'_, Self>) -> Result;

    /// Posts receive work requests, as [`Driver::post_send`] does send ones.
    fn post_recv(qp: &Qp<Self>, wrs: &mut RecvWrs<'_>) -> Result;

    /// The process of a user QP wrote work requests into its send (or receive) ring and asks
    /// the driver to hand them to the device (uverbs `post_send`/`post_recv` without requests,
    /// as rxe's provider does). Runs in the process's context; must not sleep (the same
    /// locks as posting). Everything in the ring is untrusted.
    fn ring_doorbell(_qp: &Qp<Self>, _queue: WorkQueue) -> Result {
        Err(EOPNOTSUPP)
    }

    /// The driver's part of an address handle ([`Ah`](super::Ah)).
    type Ah: Send + Sync;

    /// Creates the driver's part of an address handle of `pd` for `av`. Unless `sleepable`,
    /// this runs in atomic context: it must not sleep. With `udata`, a process created it
    /// through uverbs (and the driver may answer its provider).
    fn create_ah(
        pd: &Pd<Self>,
        av: &RoceAv,
        sleepable: bool,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<Self::Ah>;
}

/// An RDMA device of driver `T`: C `struct ib_device` followed by the driver's data.
///
/// It is created and registered by [`Registration`]; the driver sees it in its [`Driver`]
/// operations and reaches its own data through `Deref`.
///
/// # Invariants
///
/// `ib` was allocated by `_ib_alloc_device` with room for `Self`, its operations are those of
/// `T`, and `data` is initialised.
#[repr(C)]
pub struct Device<T: Driver> {
    ib: Opaque<bindings::ib_device>,
    data: T,
}

impl<T: Driver> Device<T> {
    /// The size `_ib_alloc_device` allocates.
    const SIZE: usize = {
        // The core allocates with kzalloc, which aligns to at least 8 bytes.
        assert!(core::mem::align_of::<Self>() <= 8);
        core::mem::size_of::<Self>()
    };

    /// Creates a reference to the device from a pointer the core passed to an operation.
    ///
    /// # Safety
    ///
    /// `ib` must be the `ib_device` of a [`Device<T>`] that stays alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ib: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: `ib` is at offset 0 of the `repr(C)` `Device<T>` that contains it (function
        // safety requirement).
        unsafe { &*ib.cast::<Self>() }
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::ib_device {
        self.ib.get()
    }

    /// Tells the device's consumers that it failed (`IB_EVENT_DEVICE_FATAL`): ULPs stop using
    /// it (and may reconnect elsewhere). Any context: the core queues the event for its
    /// handlers.
    pub fn fatal_event(&self) {
        let mut event: bindings::ib_event = pin_init::zeroed();
        event.device = self.as_raw();
        event.event = bindings::ib_event_type_IB_EVENT_DEVICE_FATAL;
        event.element.port_num = super::FIRST_PORT;
        // SAFETY: By the type invariant `self.as_raw()` is a valid, registered `ib_device`;
        // `event` lives for the call (the core copies what it queues).
        unsafe { bindings::ib_dispatch_event(&event) };
    }

    /// Returns a reference to the network device bound to `port`, if any.
    pub fn port_netdev(&self, port: u32) -> Option<PortNetdev> {
        // SAFETY: By the type invariant `self.as_raw()` is a valid `ib_device`.
        unsafe { PortNetdev::get(self.as_raw(), port) }
    }

    /// Returns the speed (`enum ib_port_speed`) and width (`enum ib_port_width`) of an Ethernet
    /// port, derived from its netdev's link speed.
    pub fn eth_speed(&self, port: u32) -> Result<(u16, u8)> {
        let mut speed = 0u16;
        let mut width = 0u8;
        // SAFETY: By the type invariant `self.as_raw()` is a valid `ib_device`; the outputs are
        // valid for writes.
        to_result(unsafe {
            bindings::ib_get_eth_speed(self.as_raw(), port, &mut speed, &mut width)
        })?;
        Ok((speed, width))
    }
}

impl<T: Driver> Deref for Device<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.data
    }
}

/// References that keep a device's `ib_device` and its DMA device allocated, for an object
/// that unmaps DMA memory with them when it is dropped, however long that is after the device
/// was unregistered (unmapping needs both structures, not a registered device).
pub(crate) struct DmaRefs {
    _ib: ARef<device::Device>,
    _dma: Option<ARef<device::Device>>,
}

impl<T: Driver> Device<T> {
    /// References to the device's `ib_device` and DMA device (see [`DmaRefs`]).
    pub(crate) fn dma_refs(&self) -> DmaRefs {
        let ib: &device::Device = self.as_ref();
        // SAFETY: By the type invariant `self.as_raw()` is a valid `ib_device`; its DMA device
        // is set when it is registered and is then a valid device.
        let dma = unsafe { (*self.as_raw()).dma_device };
        let dma = NonNull::new(dma).map(|d| {
            // SAFETY: A non-null `dma_device` is a valid device (see above).
            let d: &device::Device = unsafe { device::Device::from_raw(d.as_ptr()) };
            ARef::from(d)
        });
        DmaRefs {
            _ib: ARef::from(ib),
            _dma: dma,
        }
    }
}

impl<T: Driver> AsRef<device::Device> for Device<T> {
    fn as_ref(&self) -> &device::Device {
        // SAFETY: By the type invariant the `ib_device`, and so its `struct device`, is valid
        // and initialised at allocation.
        unsafe { device::Device::from_raw(&raw mut (*self.as_raw()).__bindgen_anon_1.dev) }
    }
}

/// What [`Registration::new`] needs to know about a device besides its operations.
pub struct DeviceInfo<'a> {
    /// Name pattern of the device, e.g. `c"virtio_rdma%d"`.
    pub name: &'a CStr,
    /// Node type.
    pub node_type: NodeType,
    /// Number of ports (numbered from [`FIRST_PORT`](super::FIRST_PORT)).
    pub phys_port_cnt: u32,
    /// Number of completion vectors (at least 1).
    pub num_comp_vectors: u32,
    /// Node GUID, in network byte order.
    pub node_guid: u64,
    /// The Ethernet interface of a RoCE device's first port: the port is bound to it whenever
    /// it exists.
    pub roce: Option<RocePort<'a>>,
}

/// How a RoCE port finds its Ethernet interface.
#[derive(Clone, Copy)]
pub enum RocePort<'a> {
    /// The interface whose permanent MAC address this is (a device whose bus does not say; the
    /// first such interface in any namespace wins).
    Mac([u8; 6]),
    /// This very interface, as the bus handed it over (the netdev of the same function). Only
    /// its identity is kept: the port is bound while it is registered.
    Netdev(&'a super::NetDevice),
}

/// A registered RDMA device of driver `T`.
///
/// [`Registration::new`] allocates the device, initialises the driver's data, sets up the
/// operations and registers the device. [`Registration::unregister`] (or dropping the
/// registration) unregisters it: the core waits until no operation runs and no user holds
/// the device; dropping then drops the driver's data and frees the device.
///
/// # Invariants
///
/// `dev` is a device allocated with `_ib_alloc_device` and initialised as a [`Device<T>`], owned
/// by this object; while `registered` is true it is registered with the RDMA core.
pub struct Registration<T: Driver> {
    dev: NonNull<Device<T>>,
    roce: Option<Pin<KBox<roce::Binding>>>,
    registered: AtomicBool,
}

// SAFETY: The device may be used and dropped from any thread: its data is `Send + Sync` (bound
// of `Driver`) and the RDMA core's own state is thread-safe.
unsafe impl<T: Driver> Send for Registration<T> {}
// SAFETY: Shared access gives `&Device<T>` (whose data is `Sync`) and `unregister`, which is
// idempotent and atomic.
unsafe impl<T: Driver> Sync for Registration<T> {}

impl<T: Driver> Registration<T> {
    /// Allocates an RDMA device for driver data `data`, child of `parent`, using `dma_device`
    /// for DMA mappings, and registers it.
    pub fn new(
        parent: &device::Device<device::Bound>,
        dma_device: &device::Device,
        info: &DeviceInfo<'_>,
        data: impl PinInit<T, Error>,
    ) -> Result<Self> {
        let size = Device::<T>::SIZE;
        // SAFETY: `size` covers the `ib_device` at the start of a `Device<T>`; `init_net` is the
        // initial network namespace, which lives forever.
        let raw = unsafe { bindings::_ib_alloc_device(size, &raw mut bindings::init_net) };
        let dev = NonNull::new(raw).ok_or(ENOMEM)?.cast::<Device<T>>();

        // SAFETY: `raw` has room for a `Device<T>`; `data` is not initialised. On failure
        // `__init` leaves nothing initialised, so only the device is freed.
        let slot = unsafe { &raw mut (*dev.as_ptr()).data };
        // SAFETY: `slot` is valid for writes and pinned: the device is never moved.
        if let Err(e) = unsafe { data.__init(slot) } {
            // SAFETY: `raw` was allocated by `_ib_alloc_device` and was never registered.
            unsafe { bindings::ib_dealloc_device(raw) };
            return Err(e);
        }
        // INVARIANT: The device is allocated and its data initialised; from here `Drop` cleans
        // up whatever fails.
        let mut this = Self {
            dev,
            roce: None,
            registered: AtomicBool::new(false),
        };

        let ops = ops::<T>();
        // SAFETY: `raw` is a valid, unregistered device owned by `this`; nothing else uses it.
        unsafe {
            (*raw).node_type = info.node_type as u8;
            (*raw).phys_port_cnt = info.phys_port_cnt;
            (*raw).num_comp_vectors = c_int::try_from(info.num_comp_vectors.max(1))?;
            (*raw).node_guid = info.node_guid;
            (*raw).__bindgen_anon_1.dev.parent = parent.as_raw();
            bindings::ib_set_device_ops(raw, &ops);
            if T::HAS_ALLOC_UCONTEXT {
                // The uverbs write commands a device must opt in to: posting (a user QP's
                // doorbell, see `Driver::ring_doorbell`), polling and arming CQs.
                (*raw).uverbs_cmd_mask |= [
                    bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND,
                    bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_RECV,
                    bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POLL_CQ,
                    bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ,
                ]
                .iter()
                .fold(0u64, |mask, &cmd| mask | 1 << cmd);
            }
        }

        if let Some(port) = info.roce {
            let target = match port {
                RocePort::Mac(mac) => roce::Target::Mac(mac),
                RocePort::Netdev(ndev) => roce::Target::Netdev(ndev.as_raw()),
            };
            // SAFETY: `raw` is valid and outlives the binding, which `Drop` stops and drops
            // before freeing the device.
            let init = unsafe { roce::Binding::new(raw, super::FIRST_PORT, target) };
            let binding = KBox::pin_init(init, GFP_KERNEL)?;
            binding.as_ref().start()?;
            this.roce = Some(binding);
        }

        // SAFETY: `raw` is an initialised, unregistered device; `info.name` is a valid C string
        // and `dma_device` a valid device that has DMA parameters (it is a bus device).
        to_result(unsafe {
            bindings::ib_register_device(raw, info.name.as_char_ptr(), dma_device.as_raw())
        })?;
        // INVARIANT: The device is registered.
        this.registered.store(true, Ordering::Release);
        Ok(this)
    }

    /// Returns the registered device.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: By the type invariant `dev` is an initialised `Device<T>` owned by `self`.
        unsafe { self.dev.as_ref() }
    }

    /// Unregisters the device: when this returns no operation of `T` runs any more and none will
    /// be called. Does nothing if the device is not registered (any more).
    pub fn unregister(&self) {
        if self.registered.swap(false, Ordering::AcqRel) {
            // SAFETY: The device was registered (type invariant) and is unregistered only once.
            unsafe { bindings::ib_unregister_device(self.device().as_raw()) };
        }
        if let Some(roce) = &self.roce {
            roce.stop();
        }
    }
}

impl<T: Driver> Drop for Registration<T> {
    fn drop(&mut self) {
        self.unregister();
        self.roce = None;
        let raw = self.device().as_raw();
        // SAFETY: The device is not registered any more, so no operation of `T` runs or will run:
        // the data can be dropped; `ib_dealloc_device` then frees the device (once the last
        // reference to its `struct device` is gone) without calling back into `T`.
        unsafe {
            ptr::drop_in_place(&raw mut (*self.dev.as_ptr()).data);
            bindings::ib_dealloc_device(raw);
        }
    }
}

/// `query_device` of the operations.
///
/// # Safety
///
/// Called by the RDMA core only, on a device of driver `T`, with valid arguments (`udata` null
/// or the user verb's).
unsafe extern "C" fn query_device_callback<T: Driver>(
    ib: *mut bindings::ib_device,
    attr: *mut bindings::ib_device_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `udata` is null or the user verb's (function safety requirement).
        if let Some(mut udata) = unsafe { Udata::from_raw_opt(udata) } {
            // No driver data is defined for query_device: refuse what this driver does not know.
            udata.read_request(&mut [])?;
        }
        // SAFETY: `ib` is a device of driver `T` and `attr` is valid for writes (function safety
        // requirement).
        unsafe { T::query_device(Device::from_raw(ib), &mut *attr) }?;
        Ok(0)
    })
}

/// `query_port` of the operations.
///
/// # Safety
///
/// Called by the RDMA core only, on a device of driver `T`, with valid arguments.
unsafe extern "C" fn query_port_callback<T: Driver>(
    ib: *mut bindings::ib_device,
    port: u32,
    attr: *mut bindings::ib_port_attr,
) -> c_int {
    // SAFETY: `ib` is a device of driver `T` and `attr` is valid for writes (function safety
    // requirement).
    from_result(|| unsafe { T::query_port(Device::from_raw(ib), port, &mut *attr).map(|()| 0) })
}

/// `get_port_immutable` of the operations.
///
/// # Safety
///
/// Called by the RDMA core only, on a device of driver `T`, with valid arguments.
unsafe extern "C" fn get_port_immutable_callback<T: Driver>(
    ib: *mut bindings::ib_device,
    port: u32,
    immutable: *mut bindings::ib_port_immutable,
) -> c_int {
    // SAFETY: `ib` is a device of driver `T` and `immutable` is valid for writes (function
    // safety requirement).
    from_result(|| unsafe {
        T::get_port_immutable(Device::from_raw(ib), port, &mut *immutable).map(|()| 0)
    })
}

/// `get_link_layer` of the operations.
///
/// # Safety
///
/// Called by the RDMA core only, on a device of driver `T`.
unsafe extern "C" fn get_link_layer_callback<T: Driver>(
    ib: *mut bindings::ib_device,
    port: u32,
) -> bindings::rdma_link_layer {
    // SAFETY: `ib` is a device of driver `T` (function safety requirement).
    unsafe { T::get_link_layer(Device::from_raw(ib), port) as bindings::rdma_link_layer }
}

/// `query_pkey` of the operations.
///
/// # Safety
///
/// Called by the RDMA core only, on a device of driver `T`, with valid arguments.
unsafe extern "C" fn query_pkey_callback<T: Driver>(
    ib: *mut bindings::ib_device,
    port: u32,
    index: u16,
    pkey: *mut u16,
) -> c_int {
    from_result(|| {
        // SAFETY: `ib` is a device of driver `T` (function safety requirement).
        let value = T::query_pkey(unsafe { Device::from_raw(ib) }, port, index)?;
        // SAFETY: `pkey` is valid for writes (function safety requirement).
        unsafe { pkey.write(value) };
        Ok(0)
    })
}

/// `add_gid` of the operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a valid GID entry of a device of driver `T`.
unsafe extern "C" fn add_gid_callback<T: Driver>(
    attr: *const bindings::ib_gid_attr,
    _context: *mut *mut c_void,
) -> c_int {
    // SAFETY: `attr` is valid for the call and its `device` is a device of driver `T`
    // (function safety requirement).
    from_result(|| unsafe {
        T::add_gid(Device::from_raw((*attr).device), GidAttr::from_raw(attr)).map(|()| 0)
    })
}

/// `del_gid` of the operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a valid GID entry of a device of driver `T`.
unsafe extern "C" fn del_gid_callback<T: Driver>(
    attr: *const bindings::ib_gid_attr,
    _context: *mut *mut c_void,
) -> c_int {
    // SAFETY: `attr` is valid for the call and its `device` is a device of driver `T`
    // (function safety requirement).
    from_result(|| unsafe {
        T::del_gid(Device::from_raw((*attr).device), GidAttr::from_raw(attr)).map(|()| 0)
    })
}

/// Builds the `ib_device_ops` of driver `T` (the core copies it into the device).
fn ops<T: Driver>() -> bindings::ib_device_ops {
    let mut ops = bindings::ib_device_ops {
        owner: this_module::<T::OwnerModule>().as_ptr(),
        driver_id: bindings::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
        query_device: Some(query_device_callback::<T>),
        query_port: Some(query_port_callback::<T>),
        get_port_immutable: Some(get_port_immutable_callback::<T>),
        alloc_pd: Some(pd::alloc_pd_callback::<T>),
        dealloc_pd: Some(pd::dealloc_pd_callback::<T>),
        size_ib_pd: pd::Pd::<T>::SIZE,
        get_dma_mr: Some(mr::get_dma_mr_callback::<T>),
        dereg_mr: Some(mr::dereg_mr_callback::<T>),
        alloc_mr: Some(mr::alloc_mr_callback::<T>),
        map_mr_sg: Some(mr::map_mr_sg_callback::<T>),
        create_cq: Some(cq::create_cq_callback::<T>),
        destroy_cq: Some(cq::destroy_cq_callback::<T>),
        poll_cq: Some(cq::poll_cq_callback::<T>),
        req_notify_cq: Some(cq::req_notify_cq_callback::<T>),
        size_ib_cq: Cq::<T>::SIZE,
        create_qp: Some(qp::create_qp_callback::<T>),
        destroy_qp: Some(qp::destroy_qp_callback::<T>),
        modify_qp: Some(qp::modify_qp_callback::<T>),
        query_qp: Some(qp::query_qp_callback::<T>),
        post_send: Some(qp::post_send_callback::<T>),
        post_recv: Some(qp::post_recv_callback::<T>),
        size_ib_qp: Qp::<T>::SIZE,
        create_ah: Some(ah::create_ah_callback::<T>),
        destroy_ah: Some(ah::destroy_ah_callback::<T>),
        size_ib_ah: Ah::<T>::SIZE,
        ..Default::default()
    };
    if T::HAS_ALLOC_UCONTEXT {
        ops.uverbs_abi_ver = T::UVERBS_ABI_VERSION;
        ops.alloc_ucontext = Some(ucontext::alloc_ucontext_callback::<T>);
        ops.dealloc_ucontext = Some(ucontext::dealloc_ucontext_callback::<T>);
        ops.size_ib_ucontext = Ucontext::<T>::SIZE;
        // A user AH is created by the same callback, which passes the verb's udata on.
        ops.create_user_ah = Some(ah::create_ah_callback::<T>);
        ops.disassociate_ucontext = Some(ucontext::disassociate_ucontext_callback);
        ops.mmap = Some(mmap::mmap_callback);
        ops.mmap_free = Some(mmap::mmap_free_callback);
    }
    if T::HAS_REG_USER_MR {
        ops.reg_user_mr = Some(mr::reg_user_mr_callback::<T>);
    }
    if T::HAS_REREG_USER_MR {
        ops.rereg_user_mr = Some(mr::rereg_user_mr_callback::<T>);
    }
    if T::HAS_ALLOC_MW {
        ops.alloc_mw = Some(mw::alloc_mw_callback::<T>);
        ops.dealloc_mw = Some(mw::dealloc_mw_callback::<T>);
        ops.size_ib_mw = mw::Mw::<T>::SIZE;
    }
    if T::HAS_CREATE_SRQ {
        ops.create_srq = Some(srq::create_srq_callback::<T>);
        ops.destroy_srq = Some(srq::destroy_srq_callback::<T>);
        ops.modify_srq = Some(srq::modify_srq_callback::<T>);
        ops.query_srq = Some(srq::query_srq_callback::<T>);
        ops.post_srq_recv = Some(srq::post_srq_recv_callback::<T>);
        ops.size_ib_srq = Srq::<T>::SIZE;
    }
    if T::HAS_ALLOC_XRCD {
        ops.alloc_xrcd = Some(xrcd::alloc_xrcd_callback::<T>);
        ops.dealloc_xrcd = Some(xrcd::dealloc_xrcd_callback::<T>);
        ops.size_ib_xrcd = Xrcd::<T>::SIZE;
    }
    if T::HAS_RESIZE_USER_CQ {
        ops.resize_user_cq = Some(cq::resize_user_cq_callback::<T>);
    }
    if T::HAS_GET_LINK_LAYER {
        ops.get_link_layer = Some(get_link_layer_callback::<T>);
    }
    if T::HAS_QUERY_PKEY {
        ops.query_pkey = Some(query_pkey_callback::<T>);
    }
    if T::HAS_ADD_GID {
        ops.add_gid = Some(add_gid_callback::<T>);
    }
    if T::HAS_DEL_GID {
        ops.del_gid = Some(del_gid_callback::<T>);
    }
    if T::HAS_FILL_RES_QP {
        ops.fill_res_qp_entry = Some(restrack::fill_res_qp_callback::<T>);
    }
    if T::HAS_FILL_RES_CQ {
        ops.fill_res_cq_entry = Some(restrack::fill_res_cq_callback::<T>);
    }
    if T::HAS_FILL_RES_MR {
        ops.fill_res_mr_entry = Some(restrack::fill_res_mr_callback::<T>);
    }
    if T::HAS_GET_HW_STATS && !T::PORT_COUNTERS.is_empty() {
        ops.alloc_hw_port_stats = Some(counters::alloc_hw_port_stats_callback::<T>);
        ops.get_hw_stats = Some(counters::get_hw_stats_callback::<T>);
        // Counter sets only beside the port's counters: the core adds theirs to the port's.
        if T::HAS_COUNTER_BIND_QP {
            ops.counter_init = Some(counters::counter_init_callback);
            ops.counter_alloc_stats = Some(counters::counter_alloc_stats_callback::<T>);
            ops.counter_bind_qp = Some(counters::counter_bind_qp_callback::<T>);
            ops.counter_unbind_qp = Some(counters::counter_unbind_qp_callback::<T>);
            ops.counter_dealloc = Some(counters::counter_dealloc_callback::<T>);
            ops.counter_update_stats = Some(counters::counter_update_stats_callback::<T>);
            // The core allocates counters with room for the driver's part: there is none.
            ops.size_rdma_counter = core::mem::size_of::<bindings::rdma_counter>();
        }
    }
    ops
}
