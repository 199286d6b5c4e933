// SPDX-License-Identifier: GPL-2.0

//! Memory a user context shares with its process (`struct rdma_user_mmap_entry`): zeroed
//! kernel pages that the process maps through the device's uverbs file at the offset the driver
//! hands its provider, for instance the rings a provider writes work requests into.
//!
//! The abstraction implements the device's `mmap` and `mmap_free` operations itself: a mapping
//! must be shared, cover exactly one entry and not be executable; the pages are inserted one by
//! one (each mapping holds its own page references, so pages outlive the entry while mapped).
//! What the process writes there is untrusted and may change at any time: the kernel only
//! reads it with [`UserMmap::read`] / [`UserMmap::read_u32`], which copy a snapshot.

use super::{ucontext::Life, Driver, Ucontext};
use crate::{
    bindings,
    error::from_result,
    mm::virt::VmaNew,
    page::{Page, PAGE_SHIFT, PAGE_SIZE},
    prelude::*,
    sync::{
        barrier::{smp_mb, Read, Write},
        Arc,
    },
    types::Opaque,
};
use core::{ops::Range, ptr::NonNull};

/// An mmap entry and the pages it maps. The RDMA core owns it once inserted and gives it back
/// through `mmap_free` when the driver has removed it and no `mmap` is using it.
#[repr(C)]
struct Entry {
    rdma: Opaque<bindings::rdma_user_mmap_entry>,
    pages: KVec<Page>,
}

/// Pages of a user context that its process may map, owned by the driver object they belong to
/// (a QP's rings, say). Dropping it removes the entry: no new mapping can be made, existing ones
/// keep their pages, and the core frees the entry once no `mmap` is using it.
///
/// It may outlive its context (a driver bug): the entry then stays, with its pages. Dropping it
/// sleeps (removing an entry takes the context's mutexes).
///
/// # Invariants
///
/// `entry` is an [`Entry`] inserted into the mmap table of the user context `life` tells of and
/// not removed yet, so the core keeps it alive; its `pages` are never changed after insertion.
pub struct UserMmap {
    entry: NonNull<Entry>,
    life: Arc<Life>,
}

// SAFETY: The entry is only read after insertion (pages never change); the core's part is
// protected by the core's own locking. Removal happens once, in `drop`.
unsafe impl Send for UserMmap {}
// SAFETY: See `Send`: shared access only reads.
unsafe impl Sync for UserMmap {}

impl UserMmap {
    /// Allocates `len` bytes (rounded up to pages) of zeroed memory that the process of `uctx`
    /// may map at [`Self::offset`].
    pub fn new<T: Driver>(uctx: &Ucontext<T>, len: usize) -> Result<Self> {
        let npages = len.div_ceil(PAGE_SIZE);
        if npages == 0 {
            return Err(EINVAL);
        }
        let mut pages = KVec::with_capacity(npages, GFP_KERNEL)?;
        for _ in 0..npages {
            pages.push(
                Page::alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO)?,
                GFP_KERNEL,
            )?;
        }
        let entry = KBox::new(
            Entry {
                rdma: Opaque::zeroed(),
                pages,
            },
            GFP_KERNEL,
        )?;
        let raw = KBox::into_raw(entry);
        // SAFETY: `uctx` is a live user context; `raw` is a valid, zeroed entry that the core
        // owns from here until it calls `mmap_free`, unless insertion fails.
        let ret = unsafe {
            bindings::rdma_user_mmap_entry_insert(
                uctx.as_raw(),
                (*raw).rdma.get(),
                npages * PAGE_SIZE,
            )
        };
        if ret != 0 {
            // SAFETY: Insertion failed, so the core never saw the entry: it is still ours.
            drop(unsafe { KBox::from_raw(raw) });
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: The entry was inserted; its pages are not touched again.
        Ok(Self {
            // SAFETY: `raw` comes from `KBox::into_raw`, so it is not null.
            entry: unsafe { NonNull::new_unchecked(raw) },
            life: uctx.life().clone(),
        })
    }

    fn entry(&self) -> &Entry {
        // SAFETY: By the type invariant the entry is alive until `self` is dropped.
        unsafe { self.entry.as_ref() }
    }

    /// The offset at which the process maps the memory (`mmap`'s `offset` argument).
    pub fn offset(&self) -> u64 {
        // SAFETY: By the type invariant the entry was inserted, which set `start_pgoff`; it does
        // not change afterwards.
        let pgoff = unsafe { (*self.entry().rdma.get()).start_pgoff };
        (pgoff as u64) << PAGE_SHIFT
    }

    /// The length of the mapping (whole pages).
    pub fn len(&self) -> usize {
        self.entry().pages.len() * PAGE_SIZE
    }

    /// Whether the memory is empty (never: an entry has at least one page).
    pub fn is_empty(&self) -> bool {
        self.entry().pages.is_empty()
    }

    /// Runs `f` on each piece of `[offset, offset + len)` that lies within one page, with a
    /// pointer to the piece (mapped for the call, valid for the piece's length) and the piece's
    /// range within `0..len`; [`EINVAL`] if out of bounds. The process may access the memory
    /// concurrently: `f` must use volatile accesses (as `READ_ONCE`/`WRITE_ONCE` do).
    fn for_each_piece(
        &self,
        offset: usize,
        len: usize,
        mut f: impl FnMut(*mut u8, Range<usize>),
    ) -> Result {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > self.len() {
            return Err(EINVAL);
        }
        let mut done = 0;
        while done < len {
            let pos = offset + done;
            let (index, start) = (pos / PAGE_SIZE, pos % PAGE_SIZE);
            let n = (PAGE_SIZE - start).min(len - done);
            let page = self.entry().pages.get(index).ok_or(EINVAL)?;
            // SAFETY: The page belongs to the entry, which is alive; the mapping lasts until the
            // matching `kunmap_local` below.
            let base = unsafe { bindings::kmap_local_page(page.as_ptr()) }.cast::<u8>();
            // `start + n <= PAGE_SIZE`: the piece lies within the mapped page.
            f(base.wrapping_add(start), done..done + n);
            // SAFETY: `base` was mapped above by this thread, and nothing mapped since is still
            // mapped (`f` cannot leave a local mapping behind).
            unsafe { bindings::kunmap_local(base.cast()) };
            done += n;
        }
        Ok(())
    }

    /// Copies `dst.len()` bytes from `offset` into `dst`; [`EINVAL`] if out of bounds. The
    /// process may be writing meanwhile: each byte read is one the process wrote at some point,
    /// and `dst` is the snapshot to validate.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result {
        self.for_each_piece(offset, dst.len(), |p, range| {
            for (i, b) in dst[range].iter_mut().enumerate() {
                // SAFETY: `p` is valid for the piece's length (`for_each_piece`).
                *b = unsafe { p.add(i).read_volatile() };
            }
        })
    }

    /// Copies `src` to `offset`, for the process to read; [`EINVAL`] if out of bounds. Any
    /// context.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result {
        self.for_each_piece(offset, src.len(), |p, range| {
            for (i, b) in src[range].iter().enumerate() {
                // SAFETY: `p` is valid for the piece's length (`for_each_piece`).
                unsafe { p.add(i).write_volatile(*b) };
            }
        })
    }

    /// Reads the little-endian `u32` at `offset` (4-byte aligned) once, before any later read
    /// of the memory (acquire order: what the process wrote before storing the value is seen).
    pub fn read_u32(&self, offset: usize) -> Result<u32> {
        if offset % 4 != 0 {
            return Err(EINVAL);
        }
        let mut v = 0u32;
        // An aligned word never crosses a page: one piece of 4 bytes, 4-byte aligned.
        self.for_each_piece(offset, 4, |p, _| {
            // SAFETY: `p` is valid for 4 bytes (`for_each_piece`) and aligned (checked above;
            // pages are page-aligned).
            v = unsafe { p.cast::<u32>().read_volatile() };
        })?;
        smp_mb(Read);
        Ok(u32::from_le(v))
    }

    /// Writes `value` little-endian at `offset` (4-byte aligned), for the process to read,
    /// after every earlier write to the memory (release order: a process that reads the value
    /// with acquire order sees them).
    pub fn write_u32(&self, offset: usize, value: u32) -> Result {
        if offset % 4 != 0 {
            return Err(EINVAL);
        }
        smp_mb(Write);
        self.for_each_piece(offset, 4, |p, _| {
            // SAFETY: As in `read_u32`.
            unsafe { p.cast::<u32>().write_volatile(value.to_le()) };
        })
    }
}

impl Drop for UserMmap {
    fn drop(&mut self) {
        let alive = self.life.alive.lock();
        if *alive {
            // SAFETY: By the type invariant the entry is inserted and not removed yet; it is
            // removed exactly once, here, and not touched afterwards (the core frees it). Its
            // context exists: it is deallocated only after `alive` is cleared, under the lock
            // held here.
            unsafe { bindings::rdma_user_mmap_entry_remove(self.entry().rdma.get()) };
        }
        // Otherwise the context is gone, with the table the entry is in: the entry keeps its
        // table reference and is never freed, which the core reports (WARN) when it frees the
        // context.
    }
}

/// `mmap` of the device's operations: maps the entry the offset names, if the mapping covers it
/// exactly, is shared and is not executable.
///
/// # Safety
///
/// Called by the RDMA core only (uverbs' `mmap`), with a live user context of a device of
/// driver `T` and a VMA being set up.
pub(crate) unsafe extern "C" fn mmap_callback(
    uctx: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
) -> c_int {
    // SAFETY: `uctx` and `vma` are valid (function safety requirement); the core checks the
    // mapping is shared and exactly as long as the entry, and takes a reference on it.
    let entry = unsafe { bindings::rdma_user_mmap_entry_get(uctx, vma) };
    if entry.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: Every entry of this device's contexts is the first field of an `Entry`
    // (`UserMmap::new` is the only inserter); the reference taken above keeps it alive.
    let pages = unsafe { &(*entry.cast::<Entry>()).pages };
    // SAFETY: The VMA is being set up by the mmap hook for the duration of this call.
    let vma_new = unsafe { VmaNew::from_raw(vma) };
    let ret = from_result(|| {
        vma_new.try_clear_mayexec()?;
        vma_new.set_dontexpand();
        vma_new.set_dontcopy();
        let map = vma_new.set_mixedmap();
        let mut addr = map.start();
        for page in pages.iter() {
            map.vm_insert_page(addr, page)?;
            addr += PAGE_SIZE;
        }
        Ok(0)
    });
    // SAFETY: Drops the reference taken by `rdma_user_mmap_entry_get`; the inserted pages hold
    // their own references.
    unsafe { bindings::rdma_user_mmap_entry_put(entry) };
    ret
}

/// `mmap_free` of the device's operations: the entry is removed and no longer used.
///
/// # Safety
///
/// Called by the RDMA core only, with an entry inserted by [`UserMmap::new`] whose last
/// reference is gone.
pub(crate) unsafe extern "C" fn mmap_free_callback(entry: *mut bindings::rdma_user_mmap_entry) {
    // SAFETY: The entry is the first field of an `Entry` leaked by `UserMmap::new` (function
    // safety requirement); the core is done with it, so it is ours to free.
    drop(unsafe { KBox::from_raw(entry.cast::<Entry>()) });
}
