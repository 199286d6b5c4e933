// SPDX-License-Identifier: GPL-2.0

//! Memory that a driver and its device share while both use it: DMA-coherent memory of an RDMA
//! device's DMA device, such as the work and completion rings of kernel queues.
//!
//! C header: [`include/linux/dma-mapping.h`](srctree/include/linux/dma-mapping.h).

use super::{device::DmaRefs, Device, Driver};
use crate::{
    alloc::flags::{GFP_KERNEL, __GFP_ZERO},
    bindings,
    prelude::*,
};
use core::{
    ptr::NonNull,
    sync::atomic::{AtomicU32, Ordering},
};

/// Zeroed DMA-coherent memory of an RDMA device, which the device may read and write at any
/// time while the object lives.
///
/// The CPU's side is a byte array with bounds-checked access: [`SharedMem::write`] (exclusive,
/// for bytes the driver owns until it publishes them), [`SharedMem::read`] (volatile: the device
/// may be writing the same bytes) and 32-bit atomics for the indices both sides exchange. As
/// with C's `READ_ONCE` on DMA memory, a volatile read that overlaps another CPU's atomic store
/// (or the device's write) yields some bytes, never undefined behaviour, under the kernel's
/// memory model. It may outlive its device: it keeps what freeing needs. It must be dropped
/// in process context (`dma_free_attrs` may sleep and warns with interrupts off).
///
/// # Invariants
///
/// `cpu` points to `len > 0` bytes returned by `dma_alloc_attrs` on `dma_dev` at `dma`, owned by
/// the object and page-aligned; `_refs` keeps `dma_dev` allocated.
pub struct SharedMem {
    cpu: NonNull<u8>,
    len: usize,
    dma: u64,
    dma_dev: NonNull<bindings::device>,
    _refs: DmaRefs,
}

// SAFETY: The memory is owned by the object; the device pointer is only used to free it.
unsafe impl Send for SharedMem {}
// SAFETY: Shared access only reads (volatile) or uses atomics; writes need `&mut self`.
unsafe impl Sync for SharedMem {}

impl SharedMem {
    /// Allocates `len` zeroed bytes (a whole number of pages, physically contiguous) that
    /// `dev`'s DMA device can use. `dev` must be registered (its DMA device is set then):
    /// [`EINVAL`] otherwise. May sleep.
    pub fn new<T: Driver>(dev: &Device<T>, len: usize) -> Result<Self> {
        if len == 0 {
            return Err(EINVAL);
        }
        // SAFETY: By the type invariant of `Device`, `as_raw()` is a valid `ib_device`.
        let dma_dev = NonNull::new(unsafe { (*dev.as_raw()).dma_device }).ok_or(EINVAL)?;
        let mut dma: bindings::dma_addr_t = 0;
        // SAFETY: `dma_dev` is a valid device (set at registration, kept by `dma_refs`); `dma`
        // is valid for writes.
        let cpu = unsafe {
            bindings::dma_alloc_attrs(
                dma_dev.as_ptr(),
                len,
                &mut dma,
                (GFP_KERNEL | __GFP_ZERO).as_raw(),
                0,
            )
        };
        // INVARIANT: A non-null result is `len` bytes of coherent memory at `dma`, page-aligned
        // (the DMA API allocates whole pages).
        Ok(Self {
            cpu: NonNull::new(cpu.cast()).ok_or(ENOMEM)?,
            len,
            dma,
            dma_dev,
            _refs: dev.dma_refs(),
        })
    }

    /// The device's address of the first byte.
    pub fn dma_addr(&self) -> u64 {
        self.dma
    }

    /// The number of bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no bytes (never: the memory has at least one).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `[offset, offset + n)` if it lies within the memory.
    fn range(&self, offset: usize, n: usize) -> Result<*mut u8> {
        let end = offset.checked_add(n).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        // SAFETY: `offset <= len`: within (or one past) the allocation (type invariant).
        Ok(unsafe { self.cpu.as_ptr().add(offset) })
    }

    /// Copies `src` into the memory at `offset`; [`EINVAL`] if it does not fit.
    pub fn write(&mut self, offset: usize, src: &[u8]) -> Result {
        let dst = self.range(offset, src.len())?;
        // SAFETY: `dst` is `src.len()` bytes of the allocation (checked); `&mut self` excludes
        // every other CPU access through this object, and `src` cannot overlap memory that
        // only this object hands out.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) };
        Ok(())
    }

    /// Copies the memory at `offset` into `dst`; [`EINVAL`] if it lies outside. The device may
    /// write the same bytes meanwhile: the copy is volatile, and what it reads is only bytes.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result {
        let src = self.range(offset, dst.len())?;
        for (i, b) in dst.iter_mut().enumerate() {
            // SAFETY: `src + i` is within the checked range; a volatile read of a byte the
            // device may change is how coherent memory is read.
            *b = unsafe { src.add(i).read_volatile() };
        }
        Ok(())
    }

    /// The 32-bit word at `offset` (4-aligned, within), as an atomic.
    fn word(&self, offset: usize) -> Result<&AtomicU32> {
        if offset % 4 != 0 {
            return Err(EINVAL);
        }
        let p = self.range(offset, 4)?;
        // SAFETY: `p` is 4 bytes of the allocation, 4-aligned (the allocation is page-aligned),
        // valid while `self` is. No `&mut self` access (`write`) can overlap this reference;
        // other CPU accesses through `&self` are atomics or volatile reads (see the type's
        // documentation).
        Ok(unsafe { AtomicU32::from_ptr(p.cast()) })
    }

    /// Loads the little-endian word at `offset` (4-aligned) with acquire order.
    pub fn load_acquire(&self, offset: usize) -> Result<u32> {
        Ok(u32::from_le(self.word(offset)?.load(Ordering::Acquire)))
    }

    /// Stores the little-endian word at `offset` (4-aligned) with release order.
    pub fn store_release(&self, offset: usize, value: u32) -> Result {
        self.word(offset)?.store(value.to_le(), Ordering::Release);
        Ok(())
    }
}

impl Drop for SharedMem {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the memory was allocated by `dma_alloc_attrs` on
        // `dma_dev` (kept allocated by `_refs`, dropped after this) with this length and
        // address, and is freed only here.
        unsafe {
            bindings::dma_free_attrs(
                self.dma_dev.as_ptr(),
                self.len,
                self.cpu.as_ptr().cast(),
                self.dma,
                0,
            )
        };
    }
}
