// SPDX-License-Identifier: GPL-2.0

//! Pinned user memory (`struct ib_umem`): the pages behind a user memory region.
//!
//! C header: [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h).

use super::{device::DmaRefs, Device, Driver};
use crate::{
    bindings,
    error::{from_err_ptr, to_result},
    prelude::*,
};
use core::{mem::MaybeUninit, ptr::NonNull};

/// User memory of the calling process, pinned and mapped for a device's DMA.
///
/// The pages stay pinned and mapped until the object is dropped, which may be after the device
/// went away: the object keeps what unmapping needs.
///
/// # Invariants
///
/// `raw` is a umem returned by `ib_umem_get_va`, owned by this object and not released yet;
/// `_refs` keeps its device's `ib_device` and DMA device allocated.
pub struct Umem {
    raw: NonNull<bindings::ib_umem>,
    /// Pinned for writing (`FOLL_WRITE`): the kernel may write into the pages.
    writable: bool,
    _refs: DmaRefs,
}

// SAFETY: A umem is plain pinned memory and a scatter list; it may be released from any task
// (the core takes its own reference on the owning mm).
unsafe impl Send for Umem {}
// SAFETY: Shared access reads the scatter list, which does not change once pinned, and copies
// to or from the pinned pages through it (user memory, to which no Rust reference exists).
unsafe impl Sync for Umem {}

impl Umem {
    /// Pins `[addr, addr + len)` of the calling process's memory with access rights `access`
    /// (`enum ib_access_flags`) and maps it for `dev`'s DMA. Must be called in the process
    /// whose memory it is (a user verb's context); may sleep.
    pub fn get<T: Driver>(dev: &Device<T>, addr: u64, len: u64, access: u32) -> Result<Self> {
        let addr = usize::try_from(addr).map_err(|_| EINVAL)?;
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        let access = c_int::try_from(access).map_err(|_| EINVAL)?;
        // SAFETY: `dev.as_raw()` is a valid device; the core checks the range against the
        // calling process's address space itself.
        let raw = from_err_ptr(unsafe {
            bindings::ib_umem_get_va(dev.as_raw(), addr as c_ulong, len, access)
        })?;
        // What `ib_access_writable` asks `FOLL_WRITE` for.
        let writable = access as u32
            & (bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE
                | bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE
                | bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC
                | bindings::ib_access_flags_IB_ACCESS_MW_BIND)
            != 0;
        // INVARIANT: A successful `ib_umem_get_va` returns an owned, non-null umem.
        Ok(Self {
            raw: NonNull::new(raw).ok_or(ENOMEM)?,
            writable,
            _refs: dev.dma_refs(),
        })
    }

    /// Checks that the pages can be kept by a reregistration that changes the access rights to
    /// `access` (`enum ib_access_flags`) only: [`EACCES`] if the new rights let the device write
    /// pages that were pinned for reading (they must be pinned again: a change of translation).
    pub fn check_rereg_access(&self, access: u32) -> Result {
        let access = c_int::try_from(access).map_err(|_| EINVAL)?;
        // SAFETY: By the type invariant `raw` is a live umem; the call only reads it.
        to_result(unsafe {
            bindings::ib_umem_check_rereg(
                self.as_raw(),
                bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS as c_int,
                access,
            )
        })
    }

    fn as_raw(&self) -> *mut bindings::ib_umem {
        self.raw.as_ptr()
    }

    /// Makes `iova` the address of the memory's first byte, as seen by work requests, and
    /// checks that the memory can be described in blocks of `pgsz` bytes (a power of two)
    /// with `iova` at the same offset in its block as the memory's first byte. [`EINVAL`]
    /// otherwise.
    pub fn set_iova(&mut self, pgsz: usize, iova: u64) -> Result {
        if !pgsz.is_power_of_two() {
            return Err(EINVAL);
        }
        let raw = self.as_raw();
        // SAFETY: By the type invariant `raw` is a live umem; `&mut self` is exclusive.
        let best = unsafe { bindings::ib_umem_find_best_pgsz(raw, pgsz as c_ulong, iova) };
        if best as usize != pgsz {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// The number of blocks of `pgsz` bytes that cover the memory (at its IOVA).
    pub fn num_dma_blocks(&self, pgsz: usize) -> usize {
        // SAFETY: By the type invariant `raw` is a live umem.
        unsafe { bindings::ib_umem_num_dma_blocks(self.as_raw(), pgsz as c_ulong) }
    }

    /// The number of bytes pinned.
    pub fn len(&self) -> usize {
        // SAFETY: By the type invariant `raw` is a live umem.
        unsafe { (*self.as_raw()).length }
    }

    /// Whether no byte is pinned (never: the core refuses empty ranges).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies the memory at `offset` into `dst`; [`EINVAL`] if it lies outside. The process
    /// may change the bytes meanwhile: what is read is only bytes. Any context.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result {
        // SAFETY: By the type invariant `raw` is a live umem; `dst` is valid for `dst.len()`
        // bytes of writes. The core checks the range and copies through atomic mappings.
        to_result(unsafe {
            bindings::ib_umem_copy_from(dst.as_mut_ptr().cast(), self.as_raw(), offset, dst.len())
        })
    }

    /// Copies `src` into the memory at `offset`; [`EINVAL`] if it does not fit (nothing or
    /// part of it may have been copied then), [`EPERM`] if the pages were not pinned for
    /// writing (they may be a file's or shared copy-on-write). Any context.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result {
        if !self.writable {
            return Err(EPERM);
        }
        let end = offset.checked_add(src.len()).ok_or(EINVAL)?;
        if end > self.len() {
            return Err(EINVAL);
        }
        let raw = self.as_raw();
        // SAFETY: By the type invariant `raw` is a live umem whose scatter list stays valid;
        // `src` is valid for `src.len()` bytes of reads; the range is within the pages (checked
        // above), starting `ib_umem_offset` into the first, which were pinned for writing
        // (checked above). The copy maps each page atomically; no Rust reference to the pages
        // exists.
        let copied = unsafe {
            let sgt = &raw mut (*raw).sgt_append.sgt;
            let skip = offset + bindings::ib_umem_offset(raw) as usize;
            bindings::sg_pcopy_from_buffer(
                (*sgt).sgl,
                (*sgt).orig_nents,
                src.as_ptr().cast(),
                src.len(),
                skip as bindings::off_t,
            )
        };
        if copied != src.len() {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// Calls `f` with the DMA address of each block of `pgsz` bytes, in order (`pgsz` as
    /// given to [`Umem::set_iova`]). Stops at the first error `f` returns.
    pub fn for_each_dma_block(&self, pgsz: usize, mut f: impl FnMut(u64) -> Result) -> Result {
        let mut iter = MaybeUninit::<bindings::ib_block_iter>::zeroed();
        let iter = iter.as_mut_ptr();
        // SAFETY: By the type invariant `raw` is a live umem whose scatter list is mapped;
        // `iter` is valid for writes and lives for the whole walk.
        unsafe { bindings::__rdma_umem_block_iter_start(iter, self.as_raw(), pgsz as c_ulong) };
        // SAFETY: `iter` was started above on this umem, which outlives the walk.
        while unsafe { bindings::__rdma_umem_block_iter_next(iter) } {
            // SAFETY: `iter` holds a current block (`next` returned true).
            f(unsafe { bindings::rdma_block_iter_dma_address(iter) })?;
        }
        Ok(())
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: By the type invariant `raw` is owned and released only here, and `_refs` (dropped
        // after this) keeps the devices it unmaps from allocated.
        unsafe { bindings::ib_umem_release(self.as_raw()) };
    }
}
