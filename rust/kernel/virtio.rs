// SPDX-License-Identifier: GPL-2.0

//! Abstractions for the virtio bus.
//!
//! C headers: [`include/linux/virtio.h`](srctree/include/linux/virtio.h),
//! [`include/linux/virtio_config.h`](srctree/include/linux/virtio_config.h).
//!
//! A virtio driver implements [`Driver`] and registers it with [`module_virtio_driver!`]. Its
//! `probe` receives a [`Device<Core>`](Device) on which it negotiates nothing by hand (the
//! driver's [`Driver::FEATURES`] are offered by the core), reads the device's config space with
//! [`Device::config_read`], creates its virtqueues with [`Device::find_vqs`] and tells the device
//! it is ready with [`Device::device_ready`].
//!
//! Virtqueues ([`Virtqueue`]) carry buffers the driver lends to the device: each buffer is a
//! [`KBox`] of a plain-bytes type ([`DmaBuf`]) whose first bytes the device reads and whose next
//! bytes the device writes. Each queue carries one buffer type, chosen when it is created
//! ([`VqInfo::new`]) and checked when it is locked ([`Virtqueue::lock`]), so that queues of one
//! device can carry different buffers (commands on one, completions on another). The box is the
//! token of the request; the device gives it back with [`VirtqueueGuard::get_buf`], usually from
//! the queue's callback ([`VqHandler::callback`]), which runs in hard-IRQ context.
//!
//! Teardown follows the order the virtio core requires: when the driver is unbound, the
//! abstraction calls [`Driver::unbind`] (the device still works then), resets the device, and
//! when the driver's data is dropped, [`Virtqueues`] gives back every buffer the device did not
//! use (`virtqueue_detach_unused_buf`) and deletes the virtqueues (`del_vqs`) before its memory
//! is freed.
//!
//! A device that cannot go on (it set `DEVICE_NEEDS_RESET`, see [`Device::needs_reset`], and
//! tells the driver through [`Driver::config_changed`]) is brought back with
//! [`Device::schedule_reset`]: later, in process context, the driver's data goes as on unbind
//! and the device is reset and probed again, the driver staying bound.
//!
//! Queues can also be borrowed from another driver that owns the device: the RoCE queues of a
//! virtio-net device ([`net_roce`]). Such a set works as one the driver found, but dropping it
//! neither resets the device nor deletes the queues (they are the owner's).

#[cfg(all(CONFIG_AUXILIARY_BUS, CONFIG_RUST_INFINIBAND_ABSTRACTIONS))]
pub mod net_roce;

use crate::{
    bindings, device,
    device_id::RawDeviceId,
    driver,
    error::{from_result, to_result},
    prelude::*,
    sync::{aref::ARef, new_spinlock_irq, Arc, SpinLockIrq, SpinLockIrqGuard},
    types::Opaque,
    workqueue::{self, impl_has_work, new_work, Work, WorkItem},
    ThisModule,
};
use core::{
    any::TypeId,
    ffi::c_void,
    marker::PhantomData,
    mem::offset_of,
    ptr::{addr_of_mut, NonNull},
    sync::atomic::{AtomicPtr, Ordering},
};
use zerocopy::{FromBytes, IntoBytes};

/// Matches any vendor in a [`DeviceId`] (`VIRTIO_DEV_ANY_ID`).
pub const DEV_ANY_ID: u32 = bindings::VIRTIO_DEV_ANY_ID;

/// Device status bit: the guest has found a driver for the device (`VIRTIO_CONFIG_S_DRIVER`).
const STATUS_DRIVER: u8 = bindings::VIRTIO_CONFIG_S_DRIVER as u8;

/// Device status bit: the driver is ready (`VIRTIO_CONFIG_S_DRIVER_OK`).
const STATUS_DRIVER_OK: u8 = bindings::VIRTIO_CONFIG_S_DRIVER_OK as u8;

/// Device status bit: the device cannot go on until it is reset
/// (`VIRTIO_CONFIG_S_NEEDS_RESET`).
const STATUS_NEEDS_RESET: u8 = bindings::VIRTIO_CONFIG_S_NEEDS_RESET as u8;

/// An adapter for the registration of virtio drivers.
pub struct Adapter<T: Driver>(T);

// SAFETY:
// - `bindings::virtio_driver` is a C type declared as `repr(C)`.
// - `T::Data` is the type of the driver's device private data.
// - `struct virtio_driver` embeds a `struct device_driver`.
// - `DEVICE_DRIVER_OFFSET` is the correct byte offset to the embedded `struct device_driver`.
unsafe impl<T: Driver> driver::DriverLayout for Adapter<T> {
    type DriverType = bindings::virtio_driver;
    type DriverData<'bound> = T::Data<'bound>;
    const DEVICE_DRIVER_OFFSET: usize = offset_of!(Self::DriverType, driver);
}

// SAFETY: A call to `unregister` for a given instance of `DriverType` is guaranteed to be valid if
// a preceding call to `register` has been successful.
unsafe impl<T: Driver> driver::RegistrationOps for Adapter<T> {
    unsafe fn register(
        vdrv: &Opaque<Self::DriverType>,
        name: &'static CStr,
        module: &'static ThisModule,
    ) -> Result {
        let features = T::FEATURES;
        let nfeatures = u32::try_from(features.len())?;

        // SAFETY: It's safe to set the fields of `struct virtio_driver` on initialization; every
        // pointer stored here refers to `'static` data.
        unsafe {
            (*vdrv.get()).driver.name = name.as_char_ptr();
            (*vdrv.get()).id_table = T::ID_TABLE.as_ptr();
            (*vdrv.get()).feature_table = features.as_ptr();
            (*vdrv.get()).feature_table_size = nfeatures;
            (*vdrv.get()).probe = Some(Self::probe_callback);
            (*vdrv.get()).remove = Some(Self::remove_callback);
            (*vdrv.get()).config_changed = Some(Self::config_changed_callback);
            (*vdrv.get()).reset_prepare = Some(Self::reset_prepare_callback);
            (*vdrv.get()).reset_done = Some(Self::reset_done_callback);
        }

        // SAFETY: `vdrv` is guaranteed to be a valid `DriverType`.
        to_result(unsafe { bindings::__register_virtio_driver(vdrv.get(), module.as_ptr()) })
    }

    unsafe fn unregister(vdrv: &Opaque<Self::DriverType>) {
        // SAFETY: `vdrv` is guaranteed to be a valid `DriverType`.
        unsafe { bindings::unregister_virtio_driver(vdrv.get()) }
    }
}

impl<T: Driver> Adapter<T> {
    extern "C" fn probe_callback(vdev: *mut bindings::virtio_device) -> c_int {
        // SAFETY: The virtio core only ever calls the probe callback with a valid pointer to a
        // `struct virtio_device`.
        //
        // INVARIANT: `vdev` is valid for the duration of `probe_callback()`.
        let vdev = unsafe { &*vdev.cast::<Device<device::CoreInternal<'_>>>() };

        from_result(|| {
            let data = T::probe(vdev);

            vdev.as_ref().set_drvdata(data)?;
            Ok(0)
        })
    }

    extern "C" fn remove_callback(vdev: *mut bindings::virtio_device) {
        // SAFETY: The virtio core only ever calls the remove callback with a valid pointer to a
        // `struct virtio_device`.
        //
        // INVARIANT: `vdev` is valid for the duration of `remove_callback()`.
        let vdev = unsafe { &*vdev.cast::<Device<device::CoreInternal<'_>>>() };

        // A reset that failed to probe the device again left it without data (see
        // `reset_done_callback`).
        if let Some(data) = Self::data(vdev) {
            T::unbind(vdev, data);
        }

        // The virtio core requires the device to be reset when `remove` returns. The driver's
        // data (and with it its `Virtqueues`) is dropped after this: the device no longer uses
        // any buffer by then.
        vdev.reset_device();
    }

    /// The driver's data of `vdev`, if it has any.
    fn data<'b, Ctx: device::DeviceContext>(vdev: &'b Device<Ctx>) -> Option<Pin<&'b T::Data<'b>>> {
        let dev: &device::Device<Ctx> = vdev.as_ref();
        // SAFETY: `dev` is a valid device.
        let ptr = unsafe { bindings::dev_get_drvdata(dev.as_raw()) };
        if ptr.is_null() {
            return None;
        }
        // SAFETY: The callbacks of this adapter run while `T` is bound to the device, so a
        // non-null driver data pointer is the `Pin<KBox<T::Data<'_>>>` `probe_callback` or
        // `reset_done_callback` stored; it is taken (and the pointer cleared) only by
        // `reset_prepare_callback` and the driver core's unbind, with which no other callback of
        // the device runs, so it outlives the returned reference.
        Some(unsafe { Pin::new_unchecked(&*ptr.cast::<T::Data<'b>>()) })
    }

    extern "C" fn config_changed_callback(vdev: *mut bindings::virtio_device) {
        // SAFETY: The virtio core calls this with a valid device, only while its config change
        // reports are enabled: after `probe` succeeded and before `remove` or `reset_prepare`
        // (which disable them first, serialised with this callback by the core's `config_lock`),
        // so the device is bound to this driver.
        let vdev = unsafe { &*vdev.cast::<Device<device::Bound>>() };
        if let Some(data) = Self::data(vdev) {
            T::config_changed(vdev, data);
        }
    }

    extern "C" fn reset_prepare_callback(vdev: *mut bindings::virtio_device) -> c_int {
        // SAFETY: The virtio core calls this with a valid device bound to this driver, from
        // `virtio_device_reset_prepare()`, which the bus abstraction calls with the device lock
        // held (`ResetWork`; the PCI transport's function reset calls it under the PCI
        // function's lock, as for every virtio driver).
        //
        // INVARIANT: `vdev` is valid for the duration of `reset_prepare_callback()`.
        let vdev = unsafe { &*vdev.cast::<Device<device::CoreInternal<'_>>>() };
        // The driver's data goes as on unbind: the driver is told, the device is reset (no
        // buffer in use, no callback running), then the data is dropped.
        if let Some(data) = Self::data(vdev) {
            T::unbind(vdev, data);
        }
        vdev.reset_device();
        // SAFETY: The driver data, if any, is the `Pin<KBox<T::Data<'_>>>` stored by this
        // adapter; the reference `Self::data` gave is gone.
        drop(unsafe { vdev.as_ref().drvdata_obtain::<T::Data<'_>>() });
        0
    }

    /// Probes the device again, as at bind: the core has reset it, negotiated the features
    /// again and sets `DRIVER_OK` after this unless the driver did. On failure the device stays
    /// bound without data, and `FAILED`: the driver's callbacks find no data (`Self::data`), and
    /// unbinding resets the device.
    extern "C" fn reset_done_callback(vdev: *mut bindings::virtio_device) -> c_int {
        Self::probe_callback(vdev)
    }
}

/// Declares a kernel module that exposes a single virtio driver.
///
/// # Examples
///
/// ```ignore
/// kernel::module_virtio_driver! {
///     type: MyDriver,
///     name: "my_virtio_driver",
///     authors: ["Author"],
///     description: "My virtio driver",
///     license: "GPL v2",
/// }
/// ```
#[macro_export]
macro_rules! module_virtio_driver {
    ($($f:tt)*) => {
        $crate::module_driver!(<T>, $crate::virtio::Adapter<T>, { $($f)* });
    };
}

/// Abstraction for `bindings::virtio_device_id`: a virtio device ID and vendor to match.
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct DeviceId(bindings::virtio_device_id);

impl DeviceId {
    /// Matches devices of type `device` (e.g. `bindings::VIRTIO_ID_NET`) of any vendor.
    pub const fn new(device: u32) -> Self {
        Self(bindings::virtio_device_id {
            device,
            vendor: DEV_ANY_ID,
        })
    }

    /// Matches devices of type `device` from `vendor` only.
    pub const fn with_vendor(device: u32, vendor: u32) -> Self {
        Self(bindings::virtio_device_id { device, vendor })
    }

    /// The device type this ID matches.
    pub const fn device(&self) -> u32 {
        self.0.device
    }
}

// SAFETY: `DeviceId` is a `#[repr(transparent)]` wrapper of `virtio_device_id` and does not add
// additional invariants, so it's safe to transmute to `RawType`.
unsafe impl RawDeviceId for DeviceId {
    type RawType = bindings::virtio_device_id;
}

/// IdTable type for virtio drivers. `struct virtio_device_id` has no driver data, so the table
/// carries none (`()`).
pub type IdTable = &'static dyn kernel::device_id::IdTable<DeviceId, ()>;

/// Creates a virtio [`IdTable`] with its alias for modpost.
///
/// # Examples
///
/// ```ignore
/// kernel::virtio_device_table!(
///     VIRTIO_TABLE,
///     [kernel::virtio::DeviceId::new(bindings::VIRTIO_ID_RDMA)]
/// );
/// ```
#[macro_export]
macro_rules! virtio_device_table {
    ($table_name:ident, [$($id:expr),* $(,)?]) => {
        $crate::module_device_table!(
            "virtio", $crate::virtio::DeviceId, $table_name, @none, [$($id),*]
        );
    };
}

/// The virtio driver trait.
///
/// Drivers must implement this trait in order to get a virtio driver registered.
pub trait Driver {
    /// The type of the driver's bus device private data.
    type Data<'bound>: Send + 'bound;

    /// The table of device ids supported by the driver.
    const ID_TABLE: IdTable;

    /// The feature bits the driver supports; the core negotiates them with the device before
    /// `probe`. Transport features (such as `VIRTIO_F_VERSION_1`) need not be listed.
    const FEATURES: &'static [u32] = &[];

    /// Virtio driver probe.
    ///
    /// Called when a device matches the driver. Feature negotiation is complete; the device is
    /// not live until [`Device::device_ready`] (the core makes it so after `probe` if the driver
    /// did not).
    fn probe<'bound>(
        dev: &'bound Device<device::Core<'_>>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound;

    /// Virtio driver unbind.
    ///
    /// Called when the device is unbound from the driver, while the device still works (for
    /// instance to send the device final commands). The abstraction resets the device after
    /// this returns and then drops the driver's data. Implementing this callback is optional.
    fn unbind<'bound>(dev: &'bound Device<device::Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        let _ = (dev, this);
    }

    /// The device's config space or status changed (a config interrupt).
    ///
    /// Runs in atomic context, possibly hard-IRQ: must not sleep. Never concurrently with
    /// `probe` or `unbind`. Implementing this callback is optional.
    fn config_changed<'bound>(dev: &'bound Device<device::Bound>, this: Pin<&Self::Data<'bound>>) {
        let _ = (dev, this);
    }
}

/// The virtio device representation.
///
/// This structure represents the Rust abstraction for a C `struct virtio_device`. The
/// implementation abstracts the usage of an already existing C `struct virtio_device` within Rust
/// code that we get passed from the C side.
///
/// # Invariants
///
/// A [`Device`] instance represents a valid `struct virtio_device` created by the C portion of
/// the kernel.
#[repr(transparent)]
pub struct Device<Ctx: device::DeviceContext = device::Normal>(
    Opaque<bindings::virtio_device>,
    PhantomData<Ctx>,
);

impl<Ctx: device::DeviceContext> Device<Ctx> {
    fn as_raw(&self) -> *mut bindings::virtio_device {
        self.0.get()
    }

    /// Returns the device type (the virtio device ID, e.g. 42 for RDMA).
    pub fn device_id(&self) -> u32 {
        // SAFETY: By the type invariant `self.as_raw()` is a valid pointer to a
        // `struct virtio_device`; `id` is set before the device is registered.
        unsafe { (*self.as_raw()).id.device }
    }

    /// Returns the device's vendor ID.
    pub fn vendor_id(&self) -> u32 {
        // SAFETY: By the type invariant `self.as_raw()` is a valid pointer to a
        // `struct virtio_device`; `id` is set before the device is registered.
        unsafe { (*self.as_raw()).id.vendor }
    }

    /// Returns the device's index on the virtio bus (the `N` of `virtioN`).
    pub fn index(&self) -> i32 {
        // SAFETY: By the type invariant `self.as_raw()` is a valid pointer to a
        // `struct virtio_device`; `index` is set before the device is registered.
        unsafe { (*self.as_raw()).index }
    }

    /// Returns whether feature bit `fbit` was negotiated with the device.
    ///
    /// Unlike C's `virtio_has_feature`, asking for a device feature the driver did not offer is
    /// not a bug: the answer is simply `false`.
    pub fn has_feature(&self, fbit: u32) -> bool {
        // SAFETY: By the type invariant `self.as_raw()` is a valid pointer to a
        // `struct virtio_device`; testing a bit of the negotiated features has no precondition.
        unsafe { bindings::__virtio_test_bit(self.as_raw(), fbit) }
    }

    /// Returns the device that maps memory for this virtio device: its transport's device (the
    /// PCI function of virtio-pci), which the virtio core uses for its own rings too.
    pub fn dma_device(&self) -> Option<&device::Device> {
        // SAFETY: By the type invariant `self.as_raw()` is a valid pointer to a
        // `struct virtio_device`; its parent is set before the device is registered.
        let parent = unsafe { (*self.as_raw()).dev.parent };
        if parent.is_null() {
            return None;
        }
        // SAFETY: `parent` is a valid device, and stays so while `self` does: a device holds a
        // reference to its parent.
        Some(unsafe { device::Device::from_raw(parent) })
    }

    /// Returns whether the device set `DEVICE_NEEDS_RESET`: it cannot go on until it is reset.
    pub fn needs_reset(&self) -> bool {
        self.status() & STATUS_NEEDS_RESET != 0
    }

    /// Returns the device status byte (`VIRTIO_CONFIG_S_*`).
    fn status(&self) -> u8 {
        // SAFETY: By the type invariant `self.as_raw()` is a valid pointer to a
        // `struct virtio_device` whose transport provides `get_status`.
        unsafe { bindings::virtio_get_status(self.as_raw()) }
    }
}

impl Device<device::Bound> {
    /// Reads a `T` from the device's config space at byte `offset`.
    ///
    /// The read is repeated until the device's config generation is stable, so the value is
    /// consistent. `T` is plain bytes; fields of virtio devices are little-endian (use
    /// `zerocopy::little_endian` field types). A range that does not lie within the config space
    /// the transport allows is refused with `EINVAL` (some transports stop such a read with
    /// `BUG_ON`, or have no config accessor at all). May sleep (the core says so for every
    /// transport), so not from [`Driver::config_changed`].
    pub fn config_read<T: FromBytes + IntoBytes>(&self, offset: usize) -> Result<T> {
        let mut value = T::new_zeroed();
        let len = core::mem::size_of::<T>();
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        // The core adds offsets in `unsigned int`.
        u32::try_from(end)?;
        // SAFETY: By the type invariant `self.as_raw()` is a valid pointer to a
        // `struct virtio_device`, whose `config` ops the transport set.
        if end > unsafe { bindings::virtio_config_size(self.as_raw()) } {
            return Err(EINVAL);
        }

        // SAFETY: By the type invariant `self.as_raw()` is a valid pointer to a
        // `struct virtio_device`; `offset..end` lies within what its transport allows (checked
        // above; a transport without config space reports a size of 0, so `get` is not NULL
        // here); `value` is valid for writes of `len` bytes and any byte pattern is a valid `T`
        // (`T: FromBytes`). `offset` fits `unsigned int` as `end` does.
        unsafe {
            bindings::virtio_cread_bytes(
                self.as_raw(),
                offset as u32,
                value.as_mut_bytes().as_mut_ptr().cast(),
                len,
            )
        };
        Ok(value)
    }
}

impl Device<device::Bound> {
    /// Has the device reset and its driver set up again, soon, in process context: the driver's
    /// data goes as on unbind ([`Driver::unbind`], a reset, the data dropped), then the core
    /// negotiates the features again and the driver's [`Driver::probe`] runs; the driver stays
    /// bound (if that probe fails, it stays bound without data, and the device is `FAILED`).
    /// Nothing happens if the driver is unbound by then. Any context; fails only if memory
    /// for the request cannot be had.
    pub fn schedule_reset(&self) -> Result {
        let dev: &Device = self;
        let work = Arc::pin_init(
            pin_init!(ResetWork {
                dev: dev.into(),
                work <- new_work!("virtio::ResetWork::work"),
            }),
            GFP_ATOMIC,
        )?;
        // A reset can take long: it unregisters what the driver registered, which waits for
        // the users of that.
        let _ = workqueue::system_long().enqueue(work);
        Ok(())
    }
}

/// A request to reset a device and set its driver up again ([`Device::schedule_reset`]).
///
/// Not generic on purpose: the work runs code of the kernel, not of the driver's module, until
/// it holds the device lock and has found a driver bound, which keeps the module loaded.
#[pin_data]
struct ResetWork {
    dev: ARef<Device>,
    #[pin]
    work: Work<ResetWork>,
}

impl_has_work! {
    impl HasWork<Self> for ResetWork { self.work }
}

impl WorkItem for ResetWork {
    type Pointer = Arc<ResetWork>;

    fn run(this: Arc<ResetWork>) {
        let raw = this.dev.as_raw();
        // SAFETY: `raw` is a valid device (we hold a reference); its `dev.mutex` is the device
        // lock, which serialises this with the driver core's probe and unbind.
        let lock = unsafe { addr_of_mut!((*raw).dev.mutex) };
        // SAFETY: `lock` is the device's valid, initialised mutex.
        unsafe { bindings::mutex_lock(lock) };
        // SAFETY: `raw` is valid and its driver is only set or cleared under the device lock.
        if unsafe { !(*raw).dev.driver.is_null() } {
            // SAFETY: `raw` is valid and bound, and the device lock is held. The core calls the
            // driver's `reset_prepare`/`reset_done` (this adapter's, for a Rust driver), or
            // returns `-EOPNOTSUPP` for a driver without them.
            let mut ret = unsafe { bindings::virtio_device_reset_prepare(raw) };
            if ret == 0 {
                // SAFETY: As above, after a successful `reset_prepare`.
                ret = unsafe { bindings::virtio_device_reset_done(raw) };
            }
            if ret != 0 {
                let dev: &device::Device = this.dev.as_ref();
                dev_err!(dev, "reset and setup again failed: {}\n", ret);
            }
        }
        // SAFETY: Locked above.
        unsafe { bindings::mutex_unlock(lock) };
    }
}

impl Device<device::Core<'_>> {
    /// Tells the device the driver is ready (`DRIVER_OK`): from now on the device may use the
    /// virtqueues and call their callbacks.
    ///
    /// Calling it again once the device is ready does nothing (C's `virtio_device_ready` would
    /// treat that as a bug).
    pub fn device_ready(&self) {
        if self.status() & STATUS_DRIVER_OK != 0 {
            return;
        }
        // SAFETY: By the type invariant `self.as_raw()` is a valid pointer to a
        // `struct virtio_device`; in a bus callback (`Core`) the driver owns the device status,
        // which does not have `DRIVER_OK` yet.
        unsafe { bindings::virtio_device_ready(self.as_raw()) }
    }

    /// Resets the device: it stops using every virtqueue, and no callback runs after this
    /// returns.
    pub fn reset_device(&self) {
        // SAFETY: By the type invariant `self.as_raw()` is a valid pointer to a
        // `struct virtio_device`; in a bus callback (`Core`) the driver owns the device status.
        unsafe { bindings::virtio_reset_device(self.as_raw()) };
        // A reset alone does not wait for callbacks already running on another CPU (only some
        // transports, and only with VIRTIO_HARDEN_NOTIFICATION, synchronise in it).
        // SAFETY: As above; this sleeps, which a bus callback may.
        unsafe { bindings::virtio_synchronize_cbs(self.as_raw()) };
    }

    /// Finds (creates) the device's virtqueues, one per entry of `infos`, in order.
    ///
    /// Every queue with [`VqInfo::callback`] set calls `H::callback` when the device has used a
    /// buffer. A device has at most one [`Virtqueues`] at a time ([`EBUSY`] otherwise). Fails
    /// (as the transport does, typically [`ENOENT`] or [`EINVAL`]) if the device has fewer queues.
    pub fn find_vqs<'a, H: VqHandler>(
        &'a self,
        infos: &[VqInfo],
        handler: impl PinInit<H, Error>,
    ) -> Result<Pin<KBox<Virtqueues<'a, H>>>> {
        let dev: &'a Device = self;
        let raw = self.as_raw();
        let n = u32::try_from(infos.len())?;
        if n == 0 {
            return Err(EINVAL);
        }

        // SAFETY: By the type invariant `raw` is valid; `priv_` belongs to the bound driver.
        if unsafe { !priv_of(raw).load(Ordering::Acquire).is_null() } {
            return Err(EBUSY);
        }

        let mut set = KBox::pin_init(
            try_pin_init!(Virtqueues {
                dev,
                origin: Origin::Found,
                queues: KVec::new(),
                found: false,
                handler <- handler,
            }),
            GFP_KERNEL,
        )?;

        let mut vqs_info = KVec::with_capacity(infos.len(), GFP_KERNEL)?;
        for info in infos {
            vqs_info.push(
                bindings::virtqueue_info {
                    name: info.name.as_char_ptr(),
                    callback: if info.callback {
                        Some(vq_callback::<H>)
                    } else {
                        None
                    },
                    ctx: false,
                },
                GFP_KERNEL,
            )?;
        }
        let mut vqs = KVec::from_elem(core::ptr::null_mut(), infos.len(), GFP_KERNEL)?;

        // SAFETY: `raw` is a valid device in probe context; `vqs` and `vqs_info` have `n`
        // elements; every name is a `'static` C string (the virtqueues keep a pointer to it).
        to_result(unsafe {
            bindings::virtio_find_vqs(
                raw,
                n,
                vqs.as_mut_ptr(),
                vqs_info.as_mut_ptr(),
                core::ptr::null_mut(),
            )
        })?;

        let this = set.as_mut().project();
        *this.found = true;
        for (index, (vq, info)) in (0u32..).zip(vqs.iter().zip(infos)) {
            let vq = NonNull::new(*vq).ok_or(ENOENT)?;
            this.queues
                .push(Virtqueue::new(vq, index, info)?, GFP_KERNEL)?;
        }

        // Publish the set to the callbacks only now that it is complete: until then a callback
        // finds no set and returns (no buffer has been added, so none is due anyway).
        let ptr: *const Virtqueues<'a, H> = &*set;
        // The release pairs with the callback's acquire: a callback that finds the set sees it
        // complete.
        // SAFETY: `raw` is valid; `set` is pinned, so `ptr` stays valid until `set` is dropped,
        // whose destructor clears `priv_` after deleting the virtqueues.
        unsafe { priv_of(raw).store(ptr.cast_mut().cast(), Ordering::Release) };

        Ok(set)
    }
}

// SAFETY: `virtio::Device` is a transparent wrapper of `struct virtio_device`.
// The offset is guaranteed to point to a valid device field inside `virtio::Device`.
unsafe impl<Ctx: device::DeviceContext> device::AsBusDevice<Ctx> for Device<Ctx> {
    const OFFSET: usize = offset_of!(bindings::virtio_device, dev);
}

// SAFETY: `Device` is a transparent wrapper of a type that doesn't depend on `Device`'s generic
// argument.
kernel::impl_device_context_deref!(unsafe { Device });
kernel::impl_device_context_into_aref!(Device);

// SAFETY: Instances of `Device` are always reference-counted.
unsafe impl crate::sync::aref::AlwaysRefCounted for Device {
    fn inc_ref(&self) {
        // SAFETY: The existence of a shared reference guarantees that the refcount is non-zero.
        unsafe { bindings::get_device(self.as_ref().as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // CAST: `Self` a transparent wrapper of `bindings::virtio_device`.
        let vdev: *mut bindings::virtio_device = obj.cast().as_ptr();

        // SAFETY: By the type invariant of `Self`, `vdev` is a pointer to a valid
        // `struct virtio_device`.
        let dev = unsafe { addr_of_mut!((*vdev).dev) };

        // SAFETY: The safety requirements guarantee that the refcount is non-zero.
        unsafe { bindings::put_device(dev) }
    }
}

impl<Ctx: device::DeviceContext> AsRef<device::Device<Ctx>> for Device<Ctx> {
    fn as_ref(&self) -> &device::Device<Ctx> {
        // SAFETY: By the type invariant of `Self`, `self.as_raw()` is a pointer to a valid
        // `struct virtio_device`.
        let dev = unsafe { addr_of_mut!((*self.as_raw()).dev) };

        // SAFETY: `dev` points to a valid `struct device`.
        unsafe { device::Device::from_raw(dev) }
    }
}

// SAFETY: A `Device` is always reference-counted and can be released from any thread.
unsafe impl Send for Device {}

// SAFETY: `Device` can be shared among threads because all methods of `Device`
// (i.e. `Device<Normal>) are thread safe.
unsafe impl Sync for Device {}

// SAFETY: Same as `Device<Normal>` -- the underlying `struct virtio_device` is the same; `Bound`
// is a zero-sized type-state marker that does not affect thread safety.
unsafe impl Sync for Device<device::Bound> {}

/// Memory a driver can lend to a device through a [`Virtqueue`].
///
/// A plain-bytes type: the device may write any bytes into it, and the driver may send any of
/// its bytes. It lives in a [`KBox`] (kmalloc memory, which the DMA API can map) while the
/// device owns it.
pub trait DmaBuf: FromBytes + IntoBytes + Send + 'static {}

impl<T: FromBytes + IntoBytes + Send + 'static> DmaBuf for T {}

/// Handles the used-buffer notifications of a device's virtqueues.
pub trait VqHandler: Send + Sync {
    /// Called when the device has used buffers of `vq`, in hard-IRQ context: must not sleep.
    ///
    /// Typically takes [`Virtqueue::lock`] and collects buffers with
    /// [`VirtqueueGuard::get_buf`].
    fn callback(&self, vq: &Virtqueue);
}

/// The buffer type of a virtqueue: what [`Virtqueue::lock`] checks, and how the buffers the
/// device still holds at teardown are freed.
#[derive(Clone, Copy)]
struct BufType {
    id: TypeId,
    /// Frees a token of the queue.
    ///
    /// # Safety
    ///
    /// The argument must be a token of a queue of this buffer type, given back by the device.
    free: unsafe fn(*mut c_void),
}

impl BufType {
    fn of<B: DmaBuf>() -> Self {
        /// # Safety
        ///
        /// `token` must be a `KBox<B>` leaked with [`KBox::into_raw`].
        unsafe fn free<B: DmaBuf>(token: *mut c_void) {
            // SAFETY: `token` is a leaked `KBox<B>` (function safety requirement).
            drop(unsafe { KBox::from_raw(token.cast::<B>()) });
        }
        Self {
            id: TypeId::of::<B>(),
            free: free::<B>,
        }
    }
}

/// Describes one virtqueue for [`Device::find_vqs`].
#[derive(Clone, Copy)]
pub struct VqInfo {
    name: &'static CStr,
    callback: bool,
    buf: BufType,
}

impl VqInfo {
    /// A queue named `name` (shown in interrupt names and debug output) that carries buffers of
    /// type `B`; with `callback`, it notifies [`VqHandler::callback`] of used buffers.
    pub fn new<B: DmaBuf>(name: &'static CStr, callback: bool) -> Self {
        Self {
            name,
            callback,
            buf: BufType::of::<B>(),
        }
    }
}

/// The device's `priv_` (where the bus abstraction publishes a device's [`Virtqueues`] set to
/// its callbacks), accessed atomically: a callback on another CPU reads it while the set is
/// published and cleared.
///
/// # Safety
///
/// `raw` is a valid `struct virtio_device` whose `priv_` is only accessed through this
/// function while it lives.
unsafe fn priv_of<'a>(raw: *mut bindings::virtio_device) -> &'a AtomicPtr<c_void> {
    // SAFETY: `priv_` is a pointer-sized, pointer-aligned field of a valid device (function
    // safety requirement), only ever accessed atomically.
    unsafe { AtomicPtr::from_ptr(addr_of_mut!((*raw).priv_)) }
}

/// The callback of every virtqueue of a [`Virtqueues<H>`] set.
///
/// # Safety
///
/// Only called by the virtio core, with a valid `vq` whose device's `priv_` is null or points to
/// the `Virtqueues<'_, H>` whose queues include `vq`.
unsafe extern "C" fn vq_callback<H: VqHandler>(vq: *mut bindings::virtqueue) {
    // SAFETY: `vq` is valid (function safety requirement) and so is its device.
    let set = unsafe { priv_of((*vq).vdev).load(Ordering::Acquire) };
    if set.is_null() {
        return;
    }
    // SAFETY: A non-null `priv_` points to the pinned `Virtqueues<'_, H>` that created `vq`
    // (function safety requirement); it is cleared before that set is freed.
    let set = unsafe { &*set.cast::<Virtqueues<'_, H>>() };
    // SAFETY: `vq` is valid.
    let index = unsafe { (*vq).index };
    if let Some(queue) = set.queues.get(index as usize) {
        set.handler.callback(queue);
    }
}

/// The virtqueues of a device, created by [`Device::find_vqs`] or borrowed from the driver that
/// owns the device ([`net_roce`]), with their callback handler.
///
/// Dropping a set the driver found resets the device if the driver has not already (the bus
/// abstraction does so when the driver is unbound), gives back (drops) every buffer the device
/// still holds, and deletes the virtqueues. Dropping a borrowed set stops its callbacks and gives
/// back the buffers the device has used; those it still holds stay lent to it (never freed: only
/// a reset of the whole device, which is the owner's, could take them back).
///
/// # Invariants
///
/// When `found` is true, the virtqueues exist and `queues` holds (a prefix of) them: the device's
/// first ones for [`Origin::Found`], the borrowed ones (from the first) for [`Origin::Borrowed`],
/// whose callbacks call this set's handler while it lives.
#[pin_data(PinnedDrop)]
pub struct Virtqueues<'a, H: VqHandler> {
    dev: &'a Device,
    origin: Origin,
    queues: KVec<Pin<KBox<Virtqueue>>>,
    found: bool,
    #[pin]
    handler: H,
}

impl<'a, H: VqHandler> Virtqueues<'a, H> {
    /// Returns the queue at `index` (in the order given to [`Device::find_vqs`]).
    pub fn get(&self, index: usize) -> Option<&Virtqueue> {
        self.queues.get(index).map(|q| &**q)
    }

    /// Returns the number of queues.
    pub fn len(&self) -> usize {
        self.queues.len()
    }

    /// Returns `true` if the set has no queues (never the case for a set that exists).
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    /// Returns the callback handler.
    pub fn handler(&self) -> Pin<&H> {
        // SAFETY: `handler` is structurally pinned and `self` is only reachable pinned.
        unsafe { Pin::new_unchecked(&self.handler) }
    }
}

/// Where the queues of a [`Virtqueues`] set come from.
enum Origin {
    /// [`Device::find_vqs`]: the set's own.
    Found,
    /// Borrowed from virtio_net ([`net_roce`]): the queues, and their callback, are lent.
    #[cfg(all(CONFIG_AUXILIARY_BUS, CONFIG_RUST_INFINIBAND_ABSTRACTIONS))]
    Borrowed(net_roce::Lease),
}

#[pinned_drop]
impl<H: VqHandler> PinnedDrop for Virtqueues<'_, H> {
    fn drop(self: Pin<&mut Self>) {
        #[cfg(all(CONFIG_AUXILIARY_BUS, CONFIG_RUST_INFINIBAND_ABSTRACTIONS))]
        if let Origin::Borrowed(lease) = &self.origin {
            if self.found {
                lease.give_back(self.dev, &self.queues);
            }
            return;
        }
        let raw = self.dev.as_raw();
        if self.found {
            // While the driver is bound the device status has the DRIVER bit; after the bus
            // abstraction's reset in `remove` (and the core's re-acknowledgement) it does not.
            if self.dev.status() & STATUS_DRIVER != 0 {
                // SAFETY: `raw` is a valid device that is still bound to this driver; the drop
                // happens in process context, where synchronising may sleep.
                unsafe {
                    bindings::virtio_reset_device(raw);
                    bindings::virtio_synchronize_cbs(raw);
                }
            }
            for queue in self.queues.iter() {
                let mut state = queue.state.lock();
                state.dead = true;
                loop {
                    // SAFETY: By the type invariant of `Virtqueue` the queue is valid; its lock
                    // is held and the device is reset, so no buffer is in use.
                    let token = unsafe { bindings::virtqueue_detach_unused_buf(queue.as_raw()) };
                    if token.is_null() {
                        break;
                    }
                    // SAFETY: By the type invariant of `Virtqueue` every token of the queue has
                    // the queue's buffer type.
                    unsafe { (queue.buf.free)(token) };
                }
            }
            // SAFETY: By the type invariant the virtqueues exist; the device is reset, so no
            // callback runs any more and none of their buffers is in use.
            unsafe { bindings::virtio_del_vqs(raw) };
        }
        // SAFETY: `raw` is valid; the virtqueues (and their callbacks) are gone.
        unsafe { priv_of(raw).store(core::ptr::null_mut(), Ordering::Release) };
    }
}

struct VqState {
    /// The device was reset: nothing may be added, and unused buffers may be detached.
    dead: bool,
    /// The driver lends the device nothing more ([`Virtqueue::close`]); the device still runs.
    closed: bool,
}

/// A virtqueue, carrying buffers of the type given when it was created (see [`DmaBuf`]).
///
/// The queue's operations are serialised by its lock ([`Virtqueue::lock`]), which may be taken
/// from any context, the queue's callback included.
///
/// # Invariants
///
/// `vq` is a valid virtqueue of the device of the [`Virtqueues`] set that owns `self`; every
/// buffer (token) the device holds on it is a `KBox<B>` leaked with [`KBox::into_raw`], `B`
/// being the type `buf` describes.
#[pin_data]
pub struct Virtqueue {
    vq: NonNull<bindings::virtqueue>,
    /// Its index in its set.
    index: u32,
    /// Whether its used buffers call the set's handler.
    callback: bool,
    buf: BufType,
    #[pin]
    state: SpinLockIrq<VqState>,
}

// SAFETY: The virtqueue may be used from any thread: every operation on it takes its lock,
// except those the virtio core allows concurrently (`notify`, reading the size and index); the
// buffers it owns are `Send` (`DmaBuf`).
unsafe impl Send for Virtqueue {}

// SAFETY: See `Send`: shared access is serialised by `state`.
unsafe impl Sync for Virtqueue {}

impl Virtqueue {
    /// The queue `vq`, the `index`th of its set, described by `info`.
    ///
    /// The caller makes it part of a set (`Virtqueues`) of `vq`'s device, which establishes the
    /// type invariant; until then it carries no buffer.
    fn new(vq: NonNull<bindings::virtqueue>, index: u32, info: &VqInfo) -> Result<Pin<KBox<Self>>> {
        KBox::pin_init(
            pin_init!(Virtqueue {
                vq,
                index,
                callback: info.callback,
                buf: info.buf,
                state <- new_spinlock_irq!(
                    VqState {
                        dead: false,
                        closed: false,
                    },
                    "virtqueue"
                ),
            }),
            GFP_KERNEL,
        )
    }

    fn as_raw(&self) -> *mut bindings::virtqueue {
        self.vq.as_ptr()
    }

    /// Returns the queue's index in its set: its index on the device for a set the driver found
    /// ([`Device::find_vqs`]), counted from the first borrowed queue for a borrowed one.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Returns the size of the queue's ring (number of descriptors).
    pub fn size(&self) -> u32 {
        // SAFETY: By the type invariant `vq` is valid.
        unsafe { bindings::virtqueue_get_vring_size(self.as_raw()) }
    }

    /// Returns whether the queue is broken (the device misbehaved or was removed).
    pub fn is_broken(&self) -> bool {
        // SAFETY: By the type invariant `vq` is valid.
        unsafe { bindings::virtqueue_is_broken(self.as_raw()) }
    }

    /// Notifies the device of new buffers, the second half of
    /// [`VirtqueueGuard::kick_prepare`]; needs no lock. Returns `false` if the queue is broken.
    ///
    /// A device may also define a queue it only watches for notifications (a doorbell), to which
    /// no buffer is ever added: notifying it is a kick and nothing more.
    pub fn notify(&self) -> bool {
        // SAFETY: By the type invariant `vq` is valid; `virtqueue_notify` needs no
        // serialisation.
        unsafe { bindings::virtqueue_notify(self.as_raw()) }
    }

    /// Lends the device nothing more on this queue: adding fails with [`EIO`] from now on, while
    /// the buffers the device gives back can still be taken. For a driver that stops a device it
    /// cannot reset (a borrowed set): a queue whose callback lends every buffer straight back
    /// then ends up holding none.
    pub fn close(&self) {
        self.state.lock().closed = true;
    }

    /// Locks the queue for adding and collecting buffers of type `B`, which must be the queue's
    /// buffer type ([`EINVAL`] otherwise).
    pub fn lock<B: DmaBuf>(&self) -> Result<VirtqueueGuard<'_, B>> {
        if self.buf.id != TypeId::of::<B>() {
            return Err(EINVAL);
        }
        // INVARIANT: `B` is the queue's buffer type (checked above).
        Ok(VirtqueueGuard {
            vq: self,
            state: self.state.lock(),
            _buf: PhantomData,
        })
    }
}

/// Exclusive access to a [`Virtqueue`] whose buffers are `B`, from [`Virtqueue::lock`].
///
/// # Invariants
///
/// `B` is the buffer type of `vq`.
pub struct VirtqueueGuard<'a, B: DmaBuf> {
    vq: &'a Virtqueue,
    _buf: PhantomData<KBox<B>>,
    state: SpinLockIrqGuard<'a, VqState>,
}

impl<B: DmaBuf> VirtqueueGuard<'_, B> {
    /// Lends `buf` to the device: its first `out_len` bytes for the device to read, the next
    /// `in_len` bytes for the device to write.
    ///
    /// The queue's lock is held, so nothing here may sleep: the ring allocates (indirect
    /// descriptors) with `GFP_ATOMIC` and falls back to direct descriptors if that fails.
    ///
    /// The device gives the box back through [`Self::get_buf`] (or, after a reset, when the
    /// [`Virtqueues`] set is dropped). On failure the box is returned with the error:
    /// [`ENOSPC`] when the ring is full, [`EIO`] after the device was reset or the queue closed
    /// ([`Virtqueue::close`]), [`EINVAL`] when the
    /// lengths do not fit in `B` or are both zero.
    pub fn add(
        &mut self,
        buf: KBox<B>,
        out_len: usize,
        in_len: usize,
    ) -> core::result::Result<(), (Error, KBox<B>)> {
        if self.state.dead || self.state.closed {
            return Err((EIO, buf));
        }
        match out_len.checked_add(in_len) {
            Some(total) if total > 0 && total <= core::mem::size_of::<B>() => {}
            _ => return Err((EINVAL, buf)),
        }
        let (Ok(out32), Ok(in32)) = (u32::try_from(out_len), u32::try_from(in_len)) else {
            return Err((EINVAL, buf));
        };

        let ptr = KBox::into_raw(buf);
        let bytes = ptr.cast::<u8>();
        let mut sg_out: bindings::scatterlist = pin_init::zeroed();
        let mut sg_in: bindings::scatterlist = pin_init::zeroed();
        let mut sgs: [*mut bindings::scatterlist; 2] = [core::ptr::null_mut(); 2];
        let mut nsgs = 0;
        if out_len > 0 {
            // SAFETY: `bytes` points to `size_of::<B>()` bytes of kmalloc memory (a `KBox`), of
            // which the first `out_len` are in bounds.
            unsafe { bindings::sg_init_one(&mut sg_out, bytes.cast(), out32) };
            sgs[nsgs] = &mut sg_out;
            nsgs += 1;
        }
        if in_len > 0 {
            // SAFETY: As above; `out_len + in_len <= size_of::<B>()`.
            unsafe { bindings::sg_init_one(&mut sg_in, bytes.add(out_len).cast(), in32) };
            sgs[nsgs] = &mut sg_in;
        }

        // SAFETY: By the type invariant `vq` is valid and the lock serialises this call with the
        // queue's other operations; the scatterlists describe memory of the leaked box, which
        // stays allocated until the token (`ptr`) comes back from `get_buf` or
        // `detach_unused_buf`. `B: FromBytes` makes any bytes the device writes valid.
        let ret = unsafe {
            bindings::virtqueue_add_sgs(
                self.vq.as_raw(),
                sgs.as_mut_ptr(),
                u32::from(out_len > 0),
                u32::from(in_len > 0),
                ptr.cast(),
                GFP_ATOMIC.as_raw(),
            )
        };
        if ret < 0 {
            // SAFETY: The device did not take the buffer: `ptr` is still the leaked box.
            return Err((Error::from_errno(ret), unsafe { KBox::from_raw(ptr) }));
        }
        Ok(())
    }

    /// Prepares to notify the device of new buffers; returns whether a notification is needed
    /// (then call [`Virtqueue::notify`], possibly after dropping the lock).
    pub fn kick_prepare(&mut self) -> bool {
        // SAFETY: By the type invariant `vq` is valid; the lock serialises the call.
        unsafe { bindings::virtqueue_kick_prepare(self.vq.as_raw()) }
    }

    /// Notifies the device of new buffers if it needs it. Returns `false` if the queue is
    /// broken.
    pub fn kick(&mut self) -> bool {
        // SAFETY: By the type invariant `vq` is valid; the lock serialises the call.
        unsafe { bindings::virtqueue_kick(self.vq.as_raw()) }
    }

    /// Takes back the next buffer the device has used, with the number of bytes the device says
    /// it wrote into it (not validated: check it against what the buffer can hold).
    pub fn get_buf(&mut self) -> Option<(KBox<B>, u32)> {
        let mut len = 0u32;
        // SAFETY: By the type invariant `vq` is valid; the lock serialises the call.
        let token = unsafe { bindings::virtqueue_get_buf(self.vq.as_raw(), &mut len) };
        if token.is_null() {
            return None;
        }
        // SAFETY: By the type invariants every token of the queue is a leaked `KBox<B>` (`B` is
        // the queue's buffer type), and the
        // device gave it back.
        Some((unsafe { KBox::from_raw(token.cast::<B>()) }, len))
    }

    /// Enables the used-buffer callback; returns `false` if buffers were used meanwhile (collect
    /// them, as the callback may not run for them).
    pub fn enable_cb(&mut self) -> bool {
        // SAFETY: By the type invariant `vq` is valid; the lock serialises the call.
        unsafe { bindings::virtqueue_enable_cb(self.vq.as_raw()) }
    }

    /// Disables the used-buffer callback (a hint to the device).
    pub fn disable_cb(&mut self) {
        // SAFETY: By the type invariant `vq` is valid; the lock serialises the call.
        unsafe { bindings::virtqueue_disable_cb(self.vq.as_raw()) }
    }

    /// Takes back a buffer the device never used. Only possible after the device was reset
    /// (when the [`Virtqueues`] set is dropped, or with [`Virtqueues::reset`]); `None` before.
    pub fn detach_unused_buf(&mut self) -> Option<KBox<B>> {
        if !self.state.dead {
            return None;
        }
        // SAFETY: By the type invariant `vq` is valid; the lock serialises the call; the device
        // was reset (`dead`), so it no longer accesses any buffer.
        let token = unsafe { bindings::virtqueue_detach_unused_buf(self.vq.as_raw()) };
        if token.is_null() {
            return None;
        }
        // SAFETY: By the type invariants every token of the queue is a leaked `KBox<B>` (`B` is
        // the queue's buffer type).
        Some(unsafe { KBox::from_raw(token.cast::<B>()) })
    }
}

impl<H: VqHandler> Virtqueues<'_, H> {
    /// Resets the device: it stops using the queues, no callback runs after this returns, and
    /// the buffers it did not use can be taken back with [`VirtqueueGuard::detach_unused_buf`].
    /// Nothing can be added afterwards. A borrowed set cannot reset the device, which is not
    /// its driver's ([`EPERM`]).
    pub fn reset(&self) -> Result {
        if !matches!(self.origin, Origin::Found) {
            return Err(EPERM);
        }
        // SAFETY: `self.dev` is bound to the driver that owns this set (it found the queues).
        unsafe { bindings::virtio_reset_device(self.dev.as_raw()) };
        for queue in self.queues.iter() {
            queue.state.lock().dead = true;
        }
        Ok(())
    }
}

#[macros::kunit_tests(rust_virtio)]
mod tests {
    //! `config_read` against a stand-in transport with a config space shorter than the reads
    //! (QEMU's virtio-pci capability is 4 KiB, so no real device here can be that short).

    use super::*;
    use core::{ffi::c_uint, sync::atomic::AtomicBool};

    /// The stand-in transport's config space.
    const CONFIG: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

    /// Set when `get` was asked for bytes past `CONFIG` (where virtio-pci has its `BUG_ON`).
    static OVERRUN: AtomicBool = AtomicBool::new(false);

    /// The stand-in transport's `get`: copies `len` bytes of `CONFIG` from `offset` to `buf`.
    ///
    /// # Safety
    ///
    /// `buf` must be valid for writes of `len` bytes (the virtio core's contract for `get`).
    unsafe extern "C" fn get(
        _vdev: *mut bindings::virtio_device,
        offset: c_uint,
        buf: *mut c_void,
        len: c_uint,
    ) {
        let (offset, len) = (offset as usize, len as usize);
        match CONFIG.get(offset..offset.saturating_add(len)) {
            // SAFETY: The caller passes a buffer valid for writes of `len` bytes.
            Some(src) => unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), buf.cast(), len) },
            None => OVERRUN.store(true, Ordering::Relaxed),
        }
    }

    /// The stand-in transport's `get_config_size`.
    ///
    /// # Safety
    ///
    /// None beyond the op's signature: the device is not used.
    unsafe extern "C" fn size(_vdev: *mut bindings::virtio_device) -> usize {
        CONFIG.len()
    }

    /// The `get_config_size` of a transport without config space.
    ///
    /// # Safety
    ///
    /// None beyond the op's signature: the device is not used.
    unsafe extern "C" fn no_size(_vdev: *mut bindings::virtio_device) -> usize {
        0
    }

    /// Calls `f` with a device whose transport has `ops`.
    fn with_device(
        ops: bindings::virtio_config_ops,
        f: impl FnOnce(&Device<device::Bound>),
    ) -> Result {
        OVERRUN.store(false, Ordering::Relaxed);
        // SAFETY: All-zero is a valid `struct virtio_device` for what `config_read` uses: only
        // `config`, set below.
        let zeroed: bindings::virtio_device = unsafe { core::mem::zeroed() };
        let mut vdev = KBox::new(zeroed, GFP_KERNEL)?;
        vdev.config = &ops;
        let raw: *mut bindings::virtio_device = &mut *vdev;
        // SAFETY: `Device` is a transparent wrapper of `struct virtio_device`; `raw` is valid
        // and its transport ops are set for as long as the reference lives (this call).
        f(unsafe { &*raw.cast::<Device<device::Bound>>() });
        Ok(())
    }

    fn ops(
        get: Option<
            unsafe extern "C" fn(*mut bindings::virtio_device, c_uint, *mut c_void, c_uint),
        >,
        size: unsafe extern "C" fn(*mut bindings::virtio_device) -> usize,
    ) -> bindings::virtio_config_ops {
        // SAFETY: All-zero is a valid `struct virtio_config_ops`: every op NULL, as C leaves the
        // ones it does not set.
        let mut ops: bindings::virtio_config_ops = unsafe { core::mem::zeroed() };
        ops.get = get;
        ops.get_config_size = Some(size);
        ops
    }

    #[test]
    fn reads_within_the_config_space() -> Result {
        with_device(ops(Some(get), size), |dev| {
            assert_eq!(dev.config_read::<[u8; 4]>(4), Ok([5, 6, 7, 8]));
            assert_eq!(dev.config_read::<[u8; 8]>(0), Ok(CONFIG));
            assert!(!OVERRUN.load(Ordering::Relaxed));
        })
    }

    #[test]
    fn reads_past_the_config_space_are_refused() -> Result {
        with_device(ops(Some(get), size), |dev| {
            assert_eq!(dev.config_read::<[u8; 4]>(6), Err(EINVAL));
            assert_eq!(dev.config_read::<[u8; 9]>(0), Err(EINVAL));
            assert_eq!(dev.config_read::<u8>(8), Err(EINVAL));
            assert_eq!(dev.config_read::<u32>(usize::MAX - 1), Err(EINVAL));
            assert!(!OVERRUN.load(Ordering::Relaxed));
        })
    }

    #[test]
    fn a_transport_without_config_space_is_never_read() -> Result {
        // virtio-pci's ops for a device without config space: `get` is NULL.
        with_device(ops(None, no_size), |dev| {
            assert_eq!(dev.config_read::<u8>(0), Err(EINVAL));
        })
    }
}
