// SPDX-License-Identifier: GPL-2.0

//! Memory regions. Unlike PDs and CQs, the driver allocates them: the abstraction boxes the
//! driver's part behind the C `struct ib_mr` and frees both on deregistration.

use super::{device::DmaRefs, Device, Driver, Pd};
use crate::{bindings, prelude::*, types::Opaque};
use core::{mem::MaybeUninit, ops::Deref, ptr::NonNull};

/// An MR the driver created: its part of the MR and the keys the device gave it.
pub struct NewMr<D> {
    /// The driver's part of the MR.
    pub data: D,
    /// The local key.
    pub lkey: u32,
    /// The remote key.
    pub rkey: u32,
}

/// What a reregistration ([`Driver::rereg_user_mr`]) made of a user MR.
pub enum Rereg<D> {
    /// The device changed the MR itself (PD, rights): handle and keys stay; the core moves the
    /// MR to its new PD.
    InPlace,
    /// A replacement with keys of its own, which the core puts under the MR's handle before it
    /// deregisters the MR.
    Replaced(NewMr<D>),
}

/// A memory region: C `struct ib_mr` followed by the driver's [`Driver::Mr`].
///
/// # Invariants
///
/// `ib` is an MR of a device whose driver is `T`; the object was allocated by this module as a
/// `KBox<Mr<T>>`.
#[repr(C)]
pub struct Mr<T: Driver> {
    ib: Opaque<bindings::ib_mr>,
    data: T::Mr,
}

impl<T: Driver> Mr<T> {
    fn raw(&self) -> &bindings::ib_mr {
        // SAFETY: By the type invariant `ib` is a valid MR. Its fields change only while the
        // consumer owns it exclusively (mapping, key updates), not during a driver operation
        // on it.
        unsafe { &*self.ib.get() }
    }

    /// The local key.
    pub fn lkey(&self) -> u32 {
        self.raw().lkey
    }

    /// The remote key.
    pub fn rkey(&self) -> u32 {
        self.raw().rkey
    }

    /// The address the MR's first byte has (set at registration of a user MR, by mapping a
    /// fast-registration MR).
    pub fn iova(&self) -> u64 {
        self.raw().iova
    }

    /// The MR's length in bytes (set at registration of a user MR, by mapping a
    /// fast-registration MR).
    pub fn length(&self) -> u64 {
        self.raw().length
    }

    /// The size of the pages the MR is mapped with.
    pub fn page_size(&self) -> u32 {
        self.raw().page_size
    }
}

impl<T: Driver> Deref for Mr<T> {
    type Target = T::Mr;

    fn deref(&self) -> &T::Mr {
        &self.data
    }
}

/// `get_dma_mr` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a live PD of a device of driver `T`.
pub(crate) unsafe extern "C" fn get_dma_mr_callback<T: Driver>(
    pd: *mut bindings::ib_pd,
    access: c_int,
) -> *mut bindings::ib_mr {
    // SAFETY: `pd` is a live `Pd<T>` (function safety requirement).
    let pd = unsafe { &*pd.cast::<Pd<T>>() };
    let Ok(access) = u32::try_from(access) else {
        return EINVAL.to_ptr();
    };
    // Allocate first, so that an allocation failure needs no undoing on the device.
    let slot = match KBox::<Mr<T>>::new_uninit(GFP_KERNEL) {
        Ok(slot) => slot,
        Err(e) => return Error::from(e).to_ptr(),
    };
    let new = match T::get_dma_mr(pd, access) {
        Ok(new) => new,
        Err(e) => return e.to_ptr(),
    };
    box_mr::<T>(slot, new, None)
}

/// `reg_user_mr` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only (a user verb, in the calling process's context), with a live
/// PD of a device of driver `T`.
pub(crate) unsafe extern "C" fn reg_user_mr_callback<T: Driver>(
    pd: *mut bindings::ib_pd,
    start: u64,
    length: u64,
    virt_addr: u64,
    access: c_int,
    dmah: *mut bindings::ib_dmah,
    _udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_mr {
    // DMA handles (TPH steering hints) are not supported.
    if !dmah.is_null() {
        return EOPNOTSUPP.to_ptr();
    }
    let Ok(access) = u32::try_from(access) else {
        return EINVAL.to_ptr();
    };
    // SAFETY: `pd` is a live `Pd<T>` (function safety requirement).
    let pd = unsafe { &*pd.cast::<Pd<T>>() };
    let slot = match KBox::<Mr<T>>::new_uninit(GFP_KERNEL) {
        Ok(slot) => slot,
        Err(e) => return Error::from(e).to_ptr(),
    };
    match T::reg_user_mr(pd, start, length, virt_addr, access) {
        // The core's ioctl path sets neither address nor length.
        Ok(new) => box_mr::<T>(slot, new, Some((virt_addr, length))),
        Err(e) => e.to_ptr(),
    }
}

/// The user memory a reregistration moves an MR to (`IB_MR_REREG_TRANS`).
#[derive(Clone, Copy, Debug)]
pub struct UserRange {
    /// The first byte, in the calling process's address space.
    pub start: u64,
    /// The length in bytes.
    pub length: u64,
    /// The address work requests give the first byte.
    pub virt_addr: u64,
}

/// `rereg_user_mr` of the device's operations: the driver changes the MR in place (NULL for
/// the core, which then moves the MR to its new PD) or registers its replacement, which the
/// core puts under the MR's handle before it deregisters the MR ([`Driver::dereg_mr`]). A
/// reregistration that changes nothing (the core drops a change of PD to the MR's own) returns
/// NULL too: the MR stays as it is.
///
/// # Safety
///
/// Called by the RDMA core only (a user verb, in the calling process's context), with a live
/// user MR and a live PD of one device of driver `T`; the verb holds the MR's object for
/// writing, so no other verb uses or destroys it meanwhile.
pub(crate) unsafe extern "C" fn rereg_user_mr_callback<T: Driver>(
    mr: *mut bindings::ib_mr,
    flags: c_int,
    start: u64,
    length: u64,
    virt_addr: u64,
    access: c_int,
    pd: *mut bindings::ib_pd,
    _udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_mr {
    let Ok(flags) = u32::try_from(flags) else {
        return EINVAL.to_ptr();
    };
    if flags & !bindings::ib_mr_rereg_flags_IB_MR_REREG_SUPPORTED != 0 {
        return EOPNOTSUPP.to_ptr();
    }
    if flags == 0 {
        return core::ptr::null_mut();
    }
    let trans = (flags & bindings::ib_mr_rereg_flags_IB_MR_REREG_TRANS != 0).then_some(UserRange {
        start,
        length,
        virt_addr,
    });
    let access = if flags & bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS != 0 {
        match u32::try_from(access) {
            Ok(a) => Some(a),
            Err(_) => return EINVAL.to_ptr(),
        }
    } else {
        None
    };
    // SAFETY: `mr` is an MR and `pd` a PD of a device of driver `T`, both live (function
    // safety requirement). Every MR of such a device was boxed by `box_mr` as an `Mr<T>`
    // (type invariant), which is `repr(C)` with the `ib_mr` first, and every PD is a `Pd<T>`
    // likewise; the references are shared, as anything else (`rdma res show`) may only read.
    let (mr, pd) = unsafe { (&*mr.cast::<Mr<T>>(), &*pd.cast::<Pd<T>>()) };
    // The core sets neither address nor length of a replacement.
    let range = match trans {
        Some(r) => (r.virt_addr, r.length),
        None => (mr.iova(), mr.length()),
    };
    let slot = match KBox::<Mr<T>>::new_uninit(GFP_KERNEL) {
        Ok(slot) => slot,
        Err(e) => return Error::from(e).to_ptr(),
    };
    match T::rereg_user_mr(mr, pd, trans, access) {
        Ok(Rereg::Replaced(new)) => box_mr::<T>(slot, new, Some(range)),
        // The core changes the MR's PD (and, with a translation, its address and length).
        Ok(Rereg::InPlace) => core::ptr::null_mut(),
        Err(e) => e.to_ptr(),
    }
}

/// Boxes a new MR and returns its `ib_mr` for the core; a user MR's address and length are
/// `range`.
fn box_mr<T: Driver>(
    slot: KBox<MaybeUninit<Mr<T>>>,
    new: NewMr<T::Mr>,
    range: Option<(u64, u64)>,
) -> *mut bindings::ib_mr {
    let ib = Opaque::<bindings::ib_mr>::zeroed();
    // SAFETY: `ib` is a zeroed, valid `struct ib_mr`, not shared yet; the core fills in the
    // rest (device, PD, type).
    unsafe {
        (*ib.get()).lkey = new.lkey;
        (*ib.get()).rkey = new.rkey;
        if let Some((iova, length)) = range {
            (*ib.get()).iova = iova;
            (*ib.get()).length = length;
        }
    }
    // INVARIANT: The MR is boxed here and its `ib_mr` belongs to the PD's device (the core sets
    // `device` and `pd` after this returns).
    let mr = KBox::write(slot, Mr { ib, data: new.data });
    KBox::into_raw(mr).cast()
}

/// `alloc_mr` of the device's operations: fast-registration MRs only.
///
/// # Safety
///
/// Called by the RDMA core only, with a live PD of a device of driver `T`.
pub(crate) unsafe extern "C" fn alloc_mr_callback<T: Driver>(
    pd: *mut bindings::ib_pd,
    mr_type: bindings::ib_mr_type,
    max_num_sg: u32,
) -> *mut bindings::ib_mr {
    if mr_type != bindings::ib_mr_type_IB_MR_TYPE_MEM_REG {
        return EINVAL.to_ptr();
    }
    // SAFETY: `pd` is a live `Pd<T>` (function safety requirement).
    let pd = unsafe { &*pd.cast::<Pd<T>>() };
    let slot = match KBox::<Mr<T>>::new_uninit(GFP_KERNEL) {
        Ok(slot) => slot,
        Err(e) => return Error::from(e).to_ptr(),
    };
    match T::alloc_mr(pd, max_num_sg) {
        Ok(new) => box_mr::<T>(slot, new, None),
        Err(e) => e.to_ptr(),
    }
}

/// `map_mr_sg` of the device's operations: the core's `ib_sg_to_pages` walks the list and
/// hands each page to [`Driver::mr_set_page`].
///
/// # Safety
///
/// Called by the RDMA core only, with a fast-registration MR of driver `T` and a valid
/// scatterlist.
pub(crate) unsafe extern "C" fn map_mr_sg_callback<T: Driver>(
    mr: *mut bindings::ib_mr,
    sg: *mut bindings::scatterlist,
    nents: c_int,
    offset: *mut c_uint,
) -> c_int {
    // SAFETY: `mr` is a live `Mr<T>` (function safety requirement).
    let obj = unsafe { &*mr.cast::<Mr<T>>() };
    if let Err(e) = T::map_mr_sg_start(obj) {
        return e.to_errno();
    }
    // SAFETY: The arguments are valid (function safety requirement); `set_page_callback`
    // matches the callback type.
    unsafe { bindings::ib_sg_to_pages(mr, sg, nents, offset, Some(set_page_callback::<T>)) }
}

/// The page callback of `ib_sg_to_pages`.
///
/// # Safety
///
/// Called by `ib_sg_to_pages` only, from [`map_mr_sg_callback`] of a live `Mr<T>`.
unsafe extern "C" fn set_page_callback<T: Driver>(mr: *mut bindings::ib_mr, addr: u64) -> c_int {
    // SAFETY: `mr` is a live `Mr<T>` (function safety requirement).
    let obj = unsafe { &*mr.cast::<Mr<T>>() };
    match T::mr_set_page(obj, addr) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// A table of 64-bit little-endian words in kernel memory that the device reads by DMA address
/// (the page table of a fast-registration MR).
///
/// It may outlive its device: it keeps what unmapping needs.
///
/// # Invariants
///
/// `words` points to `len` words of kmalloc memory owned by the table, mapped for the device
/// (to-device) at `dma` on `ib`'s DMA device; `_refs` keeps `ib` and its DMA device allocated.
pub struct DmaTable {
    words: NonNull<u64>,
    len: usize,
    cap: usize,
    dma: u64,
    ib: *mut bindings::ib_device,
    _refs: DmaRefs,
}

// SAFETY: The table owns its memory; the device pointer is only used to unmap it.
unsafe impl Send for DmaTable {}
// SAFETY: Shared access reads nothing but the address and length.
unsafe impl Sync for DmaTable {}

impl DmaTable {
    const DIR: bindings::dma_data_direction = bindings::dma_data_direction::DMA_TO_DEVICE;

    /// A zeroed table of `len` words for `dev`'s device to read.
    pub fn new<T: Driver>(dev: &Device<T>, len: usize) -> Result<Self> {
        let bytes = len.checked_mul(8).ok_or(EINVAL)?;
        if bytes == 0 {
            return Err(EINVAL);
        }
        let mut words = KVec::<u64>::from_elem(0, len, GFP_KERNEL)?;
        let ptr = words.as_mut_ptr();
        let ib = dev.as_raw();
        // SAFETY: `ib` is a registered-or-registering device; `ptr` is `bytes` of kmalloc memory.
        let dma = unsafe { bindings::ib_dma_map_single(ib, ptr.cast(), bytes, Self::DIR) };
        // SAFETY: `ib` is valid.
        if unsafe { bindings::ib_dma_mapping_error(ib, dma) } != 0 {
            return Err(ENOMEM);
        }
        let (raw, _, cap) = words.into_raw_parts();
        // INVARIANT: The memory is leaked from `words` (freed in `drop`) and mapped at `dma`.
        Ok(Self {
            // A `KVec` pointer is never null.
            words: NonNull::new(raw).ok_or(ENOMEM)?,
            len,
            cap,
            dma,
            ib,
            _refs: dev.dma_refs(),
        })
    }

    /// The table's DMA address.
    pub fn dma_addr(&self) -> u64 {
        self.dma
    }

    /// The number of words.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table has no words (never: tables have at least one).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sets word `i` (little-endian, as devices read it); [`EINVAL`] out of range.
    pub fn set(&mut self, i: usize, value: u64) -> Result {
        if i >= self.len {
            return Err(EINVAL);
        }
        // SAFETY: By the type invariant `words` has `len > i` words; `&mut self` is exclusive.
        unsafe { self.words.as_ptr().add(i).write(value.to_le()) };
        Ok(())
    }

    /// Makes the CPU's writes visible to the device.
    pub fn sync_for_device(&self) {
        // SAFETY: By the type invariant the table is mapped at `dma` on `ib`'s DMA device.
        unsafe {
            bindings::ib_dma_sync_single_for_device(self.ib, self.dma, self.len * 8, Self::DIR)
        };
    }
}

impl Drop for DmaTable {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the table is mapped at `dma` on `ib`, which `_refs`
        // (dropped after this) keeps allocated with its DMA device, and its memory was leaked
        // from a `KVec<u64>` of length `len` and capacity `cap`.
        unsafe {
            bindings::ib_dma_unmap_single(self.ib, self.dma, self.len * 8, Self::DIR);
            drop(KVec::from_raw_parts(
                self.words.as_ptr(),
                self.len,
                self.cap,
            ));
        }
    }
}

/// `dereg_mr` of the device's operations.
///
/// # Safety
///
/// Called by the RDMA core only, with an MR created by this module that is not used any more.
pub(crate) unsafe extern "C" fn dereg_mr_callback<T: Driver>(
    mr: *mut bindings::ib_mr,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    let mr = mr.cast::<Mr<T>>();
    // SAFETY: `mr` is a live `KBox<Mr<T>>` leaked by `box_mr` (type invariant); the core set
    // `device` to the MR's device, of driver `T`, which outlives it.
    let dev = unsafe { Device::<T>::from_raw((*(*mr).ib.get()).device) };
    // SAFETY: `data` is initialised (type invariant); it is moved out here and either written
    // back below or never read again.
    let data = unsafe { (&raw const (*mr).data).read() };
    match T::dereg_mr(dev, data) {
        Ok(()) => {
            // SAFETY: `mr` came from `KBox::into_raw` (type invariant) and the core gives it
            // back exactly once, on success; `data` was moved out, so the box is freed as
            // uninitialised memory.
            drop(unsafe { KBox::from_raw(mr.cast::<MaybeUninit<Mr<T>>>()) });
            0
        }
        Err((err, data)) => {
            // SAFETY: `data` was moved out above and not dropped: the MR is whole again and
            // stays registered, as the core expects after an error.
            unsafe { (&raw mut (*mr).data).write(data) };
            err.to_errno()
        }
    }
}
