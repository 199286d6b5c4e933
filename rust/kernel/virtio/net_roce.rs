// SPDX-License-Identifier: GPL-2.0

//! The RoCE half of a virtio-net device (`VIRTIO_NET_F_ROCE`).
//!
//! C header: [`include/linux/virtio_net_roce.h`](srctree/include/linux/virtio_net_roce.h).
//!
//! virtio_net owns the device and every virtqueue of it. When the RoCE feature is negotiated it
//! creates the auxiliary device `virtio_net.roce.<index>`, which hands an RDMA driver the RoCE
//! queues, the virtio device and the Ethernet interface of the same function. The RDMA driver
//! binds that device with [`kernel::auxiliary`](crate::auxiliary), wraps it in a [`RoceDevice`]
//! and borrows the queues as a [`Virtqueues`] set ([`RoceDevice::borrow_queues`]): one set at a
//! time per device, whose drop stops its callbacks and gives back what the device has used,
//! but neither resets the device nor deletes the queues.

use super::{Device, Origin, Virtqueue, Virtqueues, VqHandler, VqInfo};
use crate::{
    auxiliary, bindings, container_of, device, devres, prelude::*, rdma::NetDevice, str::CStr,
};
use core::{
    ffi::c_void,
    ptr::NonNull,
    sync::atomic::{AtomicBool, Ordering},
};

/// The module that creates the auxiliary devices (virtio_net's `KBUILD_MODNAME`).
pub const AUX_MODNAME: &CStr = c"virtio_net";

/// The name of the auxiliary devices (`VIRTIO_NET_ROCE_ADEV_NAME`).
pub const AUX_NAME: &CStr = c"roce";

/// How many RoCE devices can lend their queues at once: one flag per auxiliary device id (the
/// index of the virtio device, `virtio<N>`).
const MAX_LENT: usize = 256;

/// Whether the queues of the RoCE device of each id are lent to a [`Virtqueues`] set: a second
/// set would receive the first one's buffers.
static LENT: [AtomicBool; MAX_LENT] = [const { AtomicBool::new(false) }; MAX_LENT];

/// The RoCE half of a virtio-net device, as its bound RDMA driver sees it.
///
/// # Invariants
///
/// `raw` is the `struct virtio_net_roce` that embeds the auxiliary device `adev`, valid for `'a`
/// (the auxiliary device is bound to the RDMA driver for `'a`, and virtio_net deletes it before
/// it tears down the queues, the netdev or its binding to the virtio device).
pub struct RoceDevice<'a> {
    raw: NonNull<bindings::virtio_net_roce>,
    adev: &'a auxiliary::Device<device::Bound>,
}

impl<'a> RoceDevice<'a> {
    /// The RoCE device of the auxiliary device `adev`; [`ENODEV`] if its name is not
    /// `virtio_net.roce.<index>`.
    ///
    /// # Safety
    ///
    /// `adev` must be embedded in a `struct virtio_net_roce`, as virtio_net creates them. A driver
    /// whose ID table matches only [`AUX_MODNAME`].[`AUX_NAME`] gets no other device as long as
    /// no other module adds auxiliary devices under virtio_net's name: the name is all that can
    /// be checked here (`struct virtio_net_roce` has no type tag).
    pub unsafe fn new(adev: &'a auxiliary::Device<device::Bound>) -> Result<Self> {
        let dev: &device::Device<device::Bound> = adev.as_ref();
        // The bus prefixes the name with the module that added the device: only virtio_net names
        // its devices `virtio_net.*`.
        let prefix = b"virtio_net.roce.";
        if !dev.name().to_bytes().starts_with(prefix) {
            return Err(ENODEV);
        }
        // SAFETY: `dev` is the `struct device` of an auxiliary device embedded in a
        // `struct virtio_net_roce` as `adev.dev` (function safety requirement).
        let raw = unsafe { container_of!(dev.as_raw(), bindings::virtio_net_roce, adev.dev) };
        // INVARIANT: `raw` embeds `adev`, which is bound for `'a`.
        Ok(Self {
            raw: NonNull::new(raw).ok_or(ENODEV)?,
            adev,
        })
    }

    fn raw(&self) -> *mut bindings::virtio_net_roce {
        self.raw.as_ptr()
    }

    /// The virtio-net device. Its driver is virtio_net: the RDMA driver may read its features
    /// and map memory with its DMA device, but not reset it.
    pub fn virtio_device(&self) -> &'a Device {
        // SAFETY: By the type invariant `raw` is valid for `'a`, and so is the virtio device it
        // names (virtio_net's, bound while the auxiliary device exists). `Device` is a
        // transparent wrapper of `struct virtio_device`.
        unsafe { &*(*self.raw()).vdev.cast::<Device>() }
    }

    /// The Ethernet interface of the same function.
    pub fn netdev(&self) -> &'a NetDevice {
        // SAFETY: By the type invariant `raw` is valid for `'a`; virtio_net unregisters the
        // netdev only after it deleted the auxiliary device.
        unsafe { NetDevice::from_raw((*self.raw()).netdev) }
    }

    /// The number of RoCE queues.
    pub fn num_queues(&self) -> u32 {
        // SAFETY: By the type invariant `raw` is valid; `num_vqs` does not change.
        unsafe { (*self.raw()).num_vqs }
    }

    /// Borrows the first `infos.len()` RoCE queues, described by `infos` as for
    /// [`Device::find_vqs`], with `handler` for their callbacks.
    ///
    /// Fails with [`EINVAL`] for more queues than there are (or none), [`EBUSY`] while another
    /// set borrows them or while the device still holds a buffer an earlier set lent it (one it
    /// has given back is dropped: the earlier set left it leaked), and [`EIO`] if a queue is
    /// broken.
    pub fn borrow_queues<H: VqHandler>(
        &self,
        infos: &[VqInfo],
        handler: impl PinInit<H, Error>,
    ) -> Result<Pin<KBox<Virtqueues<'a, H>>>> {
        let count = u32::try_from(infos.len())?;
        if count == 0 || count > self.num_queues() {
            return Err(EINVAL);
        }
        let raw = self.raw();
        // SAFETY: By the type invariant `raw` is valid; the op does not change.
        let set_callback = unsafe { (*raw).set_callback }.ok_or(ENODEV)?;
        let lease = Lease::take(self.raw, self.adev.id())?;
        // Leaking the set (`mem::forget`) is safe, so its drop cannot be all that stops the
        // callbacks: when the driver unbinds, this guard clears them too.
        devres::register(
            self.adev.as_ref(),
            CallbackGuard { raw: self.raw },
            GFP_KERNEL,
        )?;
        let mut set = KBox::pin_init(
            try_pin_init!(Virtqueues {
                dev: self.virtio_device(),
                origin: Origin::Borrowed(lease),
                queues: KVec::new(),
                // The queues exist; they are pushed (a prefix) below.
                found: true,
                handler <- handler,
            }),
            GFP_KERNEL,
        )?;

        let this = set.as_mut().project();
        for (index, info) in (0u32..).zip(infos) {
            // SAFETY: By the type invariant `raw` is valid; `vqs` has `num_vqs` entries, of which
            // `index < count <= num_vqs`.
            let vq = unsafe { *(*raw).vqs.add(index as usize) };
            let vq = NonNull::new(vq).ok_or(ENOENT)?;
            // SAFETY: `vq` is a valid virtqueue of the device; no set uses it (the lease), so
            // nothing else operates on it meanwhile.
            unsafe {
                if bindings::virtqueue_is_broken(vq.as_ptr()) {
                    return Err(EIO);
                }
                // Buffers an earlier set left lent (it could not take them back) that the
                // device has given back since, e.g. after a RESET: that set is gone and left
                // them leaked, so they are dropped unread and stay leaked.
                let mut len = 0u32;
                while !bindings::virtqueue_get_buf(vq.as_ptr(), &mut len).is_null() {}
                // Buffers the device still holds: this set could be handed them, as buffers of
                // its own type.
                if (*vq.as_ptr()).num_free != bindings::virtqueue_get_vring_size(vq.as_ptr()) {
                    return Err(EBUSY);
                }
                // All RoCE queues share virtio_net's callback: the queues without one are
                // spared the interrupts.
                if info.callback {
                    bindings::virtqueue_enable_cb(vq.as_ptr());
                } else {
                    bindings::virtqueue_disable_cb(vq.as_ptr());
                }
            }
            this.queues
                .push(Virtqueue::new(vq, index, info)?, GFP_KERNEL)?;
        }

        // Only now that the set is complete do the callbacks reach it.
        let ptr: *const Virtqueues<'a, H> = &*set;
        // SAFETY: `raw` is valid; `set` is pinned, so `ptr` stays valid until `set` is dropped,
        // whose destructor clears the callback first (`Lease::give_back`), and a set that is
        // leaked instead stays valid; its handler's borrows last as long as the binding (`'a`),
        // at whose end the `CallbackGuard` clears the callback. `borrowed_callback` matches the
        // queues' buffer types through `set`.
        unsafe { set_callback(raw, Some(borrowed_callback::<H>), ptr.cast_mut().cast()) };
        Ok(set)
    }
}

/// The callback of the queues of a borrowed [`Virtqueues<H>`] set (hard-IRQ context).
///
/// # Safety
///
/// Only called by virtio_net, with a valid RoCE queue `vq` and the `data` given to
/// `set_callback`: a pinned `Virtqueues<'_, H>` that lives until the callback is cleared.
unsafe extern "C" fn borrowed_callback<H: VqHandler>(
    vq: *mut bindings::virtqueue,
    data: *mut c_void,
) {
    // SAFETY: `data` is the set (function safety requirement).
    let set = unsafe { &*data.cast::<Virtqueues<'_, H>>() };
    // SAFETY: `vq` is valid (function safety requirement).
    let raw = unsafe { (*vq).index };
    // The set's queues are the RoCE queues from the first: find `vq` among them.
    let first = set.queues.first().map(|q| {
        // SAFETY: By the type invariant of `Virtqueue` its `vq` is valid.
        unsafe { (*q.as_raw()).index }
    });
    let Some(index) = first.and_then(|first| raw.checked_sub(first)) else {
        return;
    };
    if let Some(queue) = set.queues.get(index as usize) {
        if queue.callback && queue.vq.as_ptr() == vq {
            set.handler.callback(queue);
        }
    }
}

/// Clears the callback of a RoCE device when dropped: at the latest when the RDMA driver unbinds
/// (a device-managed resource), so that no callback reaches a set that was leaked.
///
/// # Invariants
///
/// `raw` is a RoCE device whose auxiliary device was bound when this was registered on it, valid
/// until that binding ends (when this is dropped at the latest).
struct CallbackGuard {
    raw: NonNull<bindings::virtio_net_roce>,
}

// SAFETY: `set_callback` may be called from any thread.
unsafe impl Send for CallbackGuard {}

impl Drop for CallbackGuard {
    fn drop(&mut self) {
        // SAFETY: By the type invariant `raw` is valid.
        unsafe { clear_callback(self.raw) };
    }
}

/// Clears the callback of the RoCE device `raw`: once this returns no callback runs, and none
/// will until one is set again.
///
/// # Safety
///
/// `raw` must be a valid `struct virtio_net_roce`.
unsafe fn clear_callback(raw: NonNull<bindings::virtio_net_roce>) {
    let raw = raw.as_ptr();
    // SAFETY: `raw` is valid (function safety requirement).
    if let Some(set_callback) = unsafe { (*raw).set_callback } {
        // SAFETY: As above; clearing waits for a callback that is running.
        unsafe { set_callback(raw, None, core::ptr::null_mut()) };
    }
}

/// The claim of a borrowed set on the queues of one RoCE device, released when it drops.
///
/// # Invariants
///
/// `LENT[id]` is set for as long as this exists, and only this lease set it; `raw` is the RoCE
/// device of auxiliary device `id`, valid while the set that holds the lease lives.
pub(super) struct Lease {
    raw: NonNull<bindings::virtio_net_roce>,
    id: usize,
}

// SAFETY: The lease only names the RoCE device, whose `set_callback` may be called from any
// thread.
unsafe impl Send for Lease {}
// SAFETY: See `Send`; shared access reads only.
unsafe impl Sync for Lease {}

impl Lease {
    fn take(raw: NonNull<bindings::virtio_net_roce>, id: u32) -> Result<Self> {
        let id = usize::try_from(id)?;
        let flag = LENT.get(id).ok_or(ENOSPC)?;
        flag.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| EBUSY)?;
        // INVARIANT: This lease set `LENT[id]`.
        Ok(Self { raw, id })
    }

    /// Stops the callbacks of `queues` (a borrowed set of `dev` being dropped) and gives back
    /// the buffers the device has used; those it still holds stay lent (leaked), and are
    /// reported.
    pub(super) fn give_back(&self, dev: &Device, queues: &KVec<Pin<KBox<Virtqueue>>>) {
        // SAFETY: By the type invariant `raw` is valid.
        unsafe { clear_callback(self.raw) };
        let mut held = 0u32;
        for queue in queues.iter() {
            let mut state = queue.state.lock();
            // Nothing may be added any more (nor detached: the device still runs).
            state.closed = true;
            let vq = queue.as_raw();
            loop {
                let mut len = 0u32;
                // SAFETY: By the type invariant of `Virtqueue` the queue is valid; its lock is
                // held and no callback runs.
                let token = unsafe { bindings::virtqueue_get_buf(vq, &mut len) };
                if token.is_null() {
                    break;
                }
                // SAFETY: By the type invariant of `Virtqueue` every token of the queue has the
                // queue's buffer type; the device gave it back.
                unsafe { (queue.buf.free)(token) };
            }
            // SAFETY: As above.
            let (size, free) = unsafe { (bindings::virtqueue_get_vring_size(vq), (*vq).num_free) };
            held = held.saturating_add(size.saturating_sub(free));
        }
        if held > 0 {
            dev_warn!(
                dev.as_ref(),
                "the RoCE device kept {} descriptors of buffers it was lent: they stay lent until \
                 virtio_net resets it\n",
                held
            );
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(flag) = LENT.get(self.id) {
            flag.store(false, Ordering::Release);
        }
    }
}
