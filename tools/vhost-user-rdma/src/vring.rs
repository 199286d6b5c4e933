// SPDX-License-Identifier: GPL-2.0
//! The vring type of the device: vhost-user-backend's [`VringRwLock`] that
//! also tells the device's own event loop when a vring's kick, readiness or
//! enablement changes.
//!
//! Why not vhost-user-backend's worker threads: in 0.24 they select vrings
//! by `u64` bitmasks indexed by the absolute vring index (`mask >> index`),
//! so vrings 64 and up cannot be placed on any thread (the shift overflows:
//! a panic in debug builds, aliasing onto vring `index % 64` in release).
//! This device has up to 256 vrings, so it returns no bitmask at all (the
//! library then starts no workers) and runs its own loop (`worker.rs`) over
//! every vring's kick eventfd.
//!
//! The library creates the vrings itself, in index order, inside
//! `VhostUserDaemon::new`; [`VringHub::collect`] runs that constructor with
//! a thread-local hub set, so that each new vring registers itself there.

use std::cell::RefCell;
use std::fmt;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use log::error;
use vhost_user_backend::{VringRwLock, VringStateGuard, VringStateMutGuard, VringT};
use virtio_queue::{DescriptorChain, Error as VirtQueError, QueueT};
use vm_memory::{Bytes, GuestAddress, GuestAddressSpace, GuestMemoryAtomic, GuestMemoryMmap};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

/// Guest memory as the device sees it.
pub type Mem = GuestMemoryAtomic<GuestMemoryMmap>;

thread_local! {
    static BUILDING: RefCell<Option<Arc<VringHub>>> = const { RefCell::new(None) };
    /// Whether this thread has a [`Pass`] open, and the vrings whose used
    /// rings grew during it, each with whether it must be signalled whatever
    /// the ring says (the list keeps its capacity from pass to pass).
    static PASS: RefCell<(bool, Vec<(RdmaVring, bool)>)> = const { RefCell::new((false, Vec::new())) };
}

/// Names vrings, so that a pass records each one once.
static NEXT_KEY: AtomicUsize = AtomicUsize::new(0);

/// One pass of a device's event loop over the vrings that were kicked or
/// are due. Used-ring updates made on this thread while it is open are
/// signalled when it ends, once per vring, and only if that ring's own
/// suppression (EVENT_IDX's used_event, or NO_INTERRUPT) asks for it or a
/// caller forced it: a pass that completes a batch of requests interrupts
/// the driver once, not once per element. Opening a pass inside another is
/// a no-op.
#[must_use = "used-ring updates are signalled when the pass is dropped"]
pub struct Pass {
    outer: bool,
}

impl Pass {
    /// Opens a pass on this thread.
    pub fn begin() -> Pass {
        let outer = PASS.with(|p| {
            let mut p = p.borrow_mut();
            !std::mem::replace(&mut p.0, true)
        });
        Pass { outer }
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        if !self.outer {
            return;
        }
        PASS.with(|p| {
            let mut p = p.borrow_mut();
            p.0 = false;
            // Signalling does not come back here: the borrow can stay.
            for (vring, force) in p.1.drain(..) {
                vring.signal_now(force);
            }
        });
    }
}

/// The vrings of one device, and the eventfds that say "a vring changed",
/// one for each thread serving the device.
#[derive(Debug)]
pub struct VringHub {
    vrings: Mutex<Vec<RdmaVring>>,
    changed: Arc<[EventFd]>,
}

impl VringHub {
    /// An empty hub for a device served by `threads` threads (at least one).
    pub fn new(threads: usize) -> io::Result<Arc<Self>> {
        let changed = (0..threads.max(1))
            .map(|_| EventFd::new(EFD_NONBLOCK))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Arc::new(VringHub {
            vrings: Mutex::new(Vec::new()),
            changed: changed.into(),
        }))
    }

    /// Runs `f` (which creates the vrings) with this hub collecting them.
    pub fn collect<R>(self: &Arc<Self>, f: impl FnOnce() -> R) -> R {
        struct Reset;
        impl Drop for Reset {
            fn drop(&mut self) {
                BUILDING.with(|b| *b.borrow_mut() = None);
            }
        }
        BUILDING.with(|b| *b.borrow_mut() = Some(self.clone()));
        let _reset = Reset;
        f()
    }

    /// The vrings collected so far, in index order.
    pub fn vrings(&self) -> Vec<RdmaVring> {
        self.vrings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Readable when a vring changed, for thread `thread` (modulo the
    /// count); consume it before rescanning.
    pub fn changed(&self, thread: usize) -> &EventFd {
        &self.changed[thread % self.changed.len()]
    }
}

/// A vring that reports changes to its hub.
#[derive(Clone)]
pub struct RdmaVring {
    inner: VringRwLock<Mem>,
    /// The memory `inner` reads its rings from (the same shared map).
    mem: Mem,
    changed: Option<Arc<[EventFd]>>,
    key: usize,
}

impl std::fmt::Debug for RdmaVring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RdmaVring").finish_non_exhaustive()
    }
}

/// Why a record could not be written into a queue of device-writable
/// buffers (a CQ's or the event queue).
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The driver left no buffer available.
    #[error("no buffer available")]
    NoBuffer,
    /// The used ring could not be updated.
    #[error("used ring: {0}")]
    Ring(String),
}

impl RdmaVring {
    /// The guest memory the vring's rings and buffers are in (its
    /// frontend's: an ID-42 device's NIC is another frontend, with a
    /// memory map of its own).
    pub fn mem(&self) -> &Mem {
        &self.mem
    }

    /// Writes `record` into the next available buffer and returns that
    /// buffer in the used ring with the record's length. A buffer that is
    /// too small or not device-writable is returned with length 0 (told to
    /// `bad`) and the next one is tried. Does not signal.
    pub fn put_record(
        &self,
        mem: &GuestMemoryMmap,
        record: &[u8],
        bad: &dyn Fn(fmt::Arguments<'_>),
    ) -> Result<(), RecordError> {
        self.put_record_as(mem, record, record.len() as u32, bad)
    }

    /// [`RdmaVring::put_record`], returning the buffer with used length
    /// `used_len` whatever `record`'s (a hostile device's lie; otherwise
    /// `record.len()`).
    pub fn put_record_as(
        &self,
        mem: &GuestMemoryMmap,
        record: &[u8],
        used_len: u32,
        bad: &dyn Fn(fmt::Arguments<'_>),
    ) -> Result<(), RecordError> {
        loop {
            let chain = self.get_mut().get_queue_mut().pop_descriptor_chain(mem);
            let Some(chain) = chain else {
                return Err(RecordError::NoBuffer);
            };
            let head = chain.head_index();
            let written = write_chain(mem, chain, record);
            let len = match &written {
                Ok(()) => used_len,
                Err(e) => {
                    bad(format_args!("bad buffer {head}: {e}"));
                    0
                }
            };
            self.add_used(head, len)
                .map_err(|e| RecordError::Ring(e.to_string()))?;
            if written.is_ok() {
                return Ok(());
            }
        }
    }

    /// Serves every available chain of a queue of requests (a control or
    /// transmit queue): `serve` handles one chain and says how many bytes it
    /// wrote to its writable part, and the chain is returned with that
    /// length. Goes on until the driver has added nothing since the last
    /// look (notifications re-enabled).
    pub fn serve_chains(
        &self,
        mem: &GuestMemoryMmap,
        mut serve: impl FnMut(DescriptorChain<&GuestMemoryMmap>) -> u32,
    ) -> io::Result<()> {
        loop {
            self.disable_notification().map_err(io::Error::other)?;
            loop {
                let chain = self.get_mut().get_queue_mut().pop_descriptor_chain(mem);
                let Some(chain) = chain else { break };
                let head = chain.head_index();
                let used = serve(chain);
                self.add_used(head, used).map_err(io::Error::other)?;
                self.used_grew(false);
            }
            if !self.enable_notification().map_err(io::Error::other)? {
                return Ok(());
            }
        }
    }

    /// Tells the driver that the used ring grew, if the ring asks for it
    /// or `force`: at the end of this thread's open [`Pass`], or now when
    /// none is open.
    pub fn used_grew(&self, force: bool) {
        let deferred = PASS.with(|p| {
            let mut p = p.borrow_mut();
            let (open, grown) = &mut *p;
            if !*open {
                return false;
            }
            match grown.iter_mut().find(|(v, _)| v.key == self.key) {
                Some((_, f)) => *f |= force,
                None => grown.push((self.clone(), force)),
            }
            true
        });
        if !deferred {
            self.signal_now(force);
        }
    }

    /// Where the device's next used-ring entry goes: it moved if the
    /// device returned buffers since it was last read.
    pub fn next_used(&self) -> u16 {
        self.get_ref().get_queue().next_used()
    }

    fn signal_now(&self, force: bool) {
        // Always ask the ring, so that its EVENT_IDX bookkeeping stays right.
        let needs = self.needs_notification().unwrap_or(true);
        if needs || force {
            if let Err(e) = self.signal_used_queue() {
                error!("cannot signal a used ring: {e}");
            }
        }
    }

    fn notify(&self) {
        for changed in self.changed.iter().flat_map(|c| c.iter()) {
            if let Err(e) = changed.write(1) {
                error!("cannot wake the vring event loop: {e}");
            }
        }
    }
}

impl<'a> VringStateGuard<'a, Mem> for RdmaVring {
    type G = <VringRwLock<Mem> as VringStateGuard<'a, Mem>>::G;
}

impl<'a> VringStateMutGuard<'a, Mem> for RdmaVring {
    type G = <VringRwLock<Mem> as VringStateMutGuard<'a, Mem>>::G;
}

impl VringT<Mem> for RdmaVring {
    fn new(mem: Mem, max_queue_size: u16) -> Result<Self, VirtQueError> {
        let inner = VringRwLock::new(mem.clone(), max_queue_size)?;
        let hub = BUILDING.with(|b| b.borrow().clone());
        let vring = RdmaVring {
            inner,
            mem,
            changed: hub.as_ref().map(|h| h.changed.clone()),
            key: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
        };
        match hub {
            Some(hub) => hub
                .vrings
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(vring.clone()),
            None => error!("vring created outside VringHub::collect; it will not be served"),
        }
        Ok(vring)
    }

    fn get_ref(&self) -> <Self as VringStateGuard<'_, Mem>>::G {
        self.inner.get_ref()
    }

    fn get_mut(&self) -> <Self as VringStateMutGuard<'_, Mem>>::G {
        self.inner.get_mut()
    }

    fn add_used(&self, desc_index: u16, len: u32) -> Result<(), VirtQueError> {
        self.inner.add_used(desc_index, len)
    }

    fn signal_used_queue(&self) -> io::Result<()> {
        self.inner.signal_used_queue()
    }

    /// Also `Err(InvalidAvailRingIndex)` when the driver's avail index is
    /// more than a queue's worth ahead of the device's: virtio-queue then
    /// takes nothing, so a caller told "more arrived" would loop forever
    /// (a hostile or broken driver must not wedge the device's thread).
    fn enable_notification(&self) -> Result<bool, VirtQueError> {
        if !self.inner.enable_notification()? {
            return Ok(false);
        }
        let mem = self.mem.memory();
        let state = self.inner.get_ref();
        let queue = state.get_queue();
        let avail = queue.avail_idx(&*mem, Ordering::Acquire)?;
        if avail.0.wrapping_sub(queue.next_avail()) > queue.size() {
            return Err(VirtQueError::InvalidAvailRingIndex);
        }
        Ok(true)
    }

    fn disable_notification(&self) -> Result<(), VirtQueError> {
        self.inner.disable_notification()
    }

    fn needs_notification(&self) -> Result<bool, VirtQueError> {
        self.inner.needs_notification()
    }

    fn set_enabled(&self, enabled: bool) {
        self.inner.set_enabled(enabled);
        self.notify();
    }

    fn set_queue_info(
        &self,
        desc_table: u64,
        avail_ring: u64,
        used_ring: u64,
    ) -> Result<(), VirtQueError> {
        self.inner.set_queue_info(desc_table, avail_ring, used_ring)
    }

    fn queue_next_avail(&self) -> u16 {
        self.inner.queue_next_avail()
    }

    fn set_queue_next_avail(&self, base: u16) {
        self.inner.set_queue_next_avail(base)
    }

    fn set_queue_next_used(&self, idx: u16) {
        self.inner.set_queue_next_used(idx)
    }

    fn queue_used_idx(&self) -> Result<u16, VirtQueError> {
        self.inner.queue_used_idx()
    }

    fn set_queue_size(&self, num: u16) {
        self.inner.set_queue_size(num)
    }

    fn set_queue_event_idx(&self, enabled: bool) {
        self.inner.set_queue_event_idx(enabled)
    }

    fn set_queue_ready(&self, ready: bool) {
        self.inner.set_queue_ready(ready);
        self.notify();
    }

    fn set_kick(&self, file: Option<File>) {
        self.inner.set_kick(file);
        self.notify();
    }

    fn read_kick(&self) -> io::Result<bool> {
        self.inner.read_kick()
    }

    fn set_call(&self, file: Option<File>) {
        self.inner.set_call(file)
    }

    fn set_err(&self, file: Option<File>) {
        self.inner.set_err(file)
    }
}

/// Writes `record` into the device-writable buffers of `chain`, in order:
/// what virtio-queue's `Writer` does, without the list of buffers it
/// allocates for every chain (one per completion on the data path).
pub(crate) fn write_chain(
    mem: &GuestMemoryMmap,
    chain: DescriptorChain<&GuestMemoryMmap>,
    record: &[u8],
) -> Result<(), String> {
    write_parts(mem, chain, &[record])
}

/// [`write_chain`] of a record given in `parts` (a header and a frame
/// that sit apart), as if they were one: no copy to join them.
pub(crate) fn write_parts(
    mem: &GuestMemoryMmap,
    chain: DescriptorChain<&GuestMemoryMmap>,
    parts: &[&[u8]],
) -> Result<(), String> {
    let need: usize = parts.iter().map(|p| p.len()).sum();
    let mut rest = parts.iter().copied();
    let mut left: &[u8] = rest.next().unwrap_or(&[]);
    let mut room = 0u64;
    for d in chain.writable() {
        let (mut at, mut space) = (d.addr(), d.len() as usize);
        loop {
            while left.is_empty() {
                match rest.next() {
                    Some(p) => left = p,
                    None => return Ok(()),
                }
            }
            if space == 0 {
                break;
            }
            let n = left.len().min(space);
            mem.write_slice(&left[..n], at)
                .map_err(|e| format!("buffer at {:#x}: {e}", at.0))?;
            left = &left[n..];
            space -= n;
            // Within the buffer just written: no overflow.
            at = GuestAddress(at.0.wrapping_add(n as u64));
        }
        room += u64::from(d.len());
    }
    Err(format!("{room} bytes, need {need}"))
}
