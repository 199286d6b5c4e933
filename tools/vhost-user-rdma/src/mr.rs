// SPDX-License-Identifier: GPL-2.0
//! Memory regions: keys, PD, access rights, bounds, and the translation of
//! an (address, length) inside a region to guest-physical ranges through
//! its page table.
//!
//! Three kinds exist: the DMA MR (addresses are guest-physical, the whole
//! of guest memory), user MRs (a fixed page table from REG_USER_MR) and
//! fast-registration MRs (a page table set by each REG_MR work request,
//! valid until invalidated). Page tables hold 4 KiB guest pages; the MR's
//! first byte sits at `iova % 4096` in the first page (the IB convention
//! for both `ib_umem` and `ib_map_mr_sg`).

use smallvec::SmallVec;
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};

use crate::abi::{VIRTIO_RDMA_PAGE_SIZE, VIRTIO_RDMA_S_FAULT, VIRTIO_RDMA_S_INVALID};
use crate::ib;
use crate::mw::Mw;
use crate::resources::{ByHandle, HandleTable};

/// Guest-physical ranges (address, length): kept inline up to four, so
/// that translating a work request's buffers costs no heap allocation in
/// the common case.
pub type Ranges = SmallVec<[(u64, usize); 4]>;

/// Page size of MR page tables.
const PAGE: u64 = VIRTIO_RDMA_PAGE_SIZE as u64;
const PAGE_MASK: u64 = PAGE - 1;

/// The key of MR `mrn` with consumer key byte `key`.
pub fn make_key(mrn: u32, key: u8) -> u32 {
    (mrn << 8) | u32::from(key)
}

/// A random key byte for a new MR, from the operating system's generator.
pub fn fresh_key_byte() -> Result<u8, getrandom::Error> {
    let mut b = [0u8; 1];
    getrandom::fill(&mut b)?;
    Ok(b[0])
}

/// Pages a region of `length` bytes at `iova` touches.
pub fn pages_needed(iova: u64, length: u64) -> Option<u64> {
    (iova & PAGE_MASK)
        .checked_add(length)?
        .checked_add(PAGE_MASK)
        .map(|n| n / PAGE)
}

/// Whether `access` holds only supported bits and remote write/atomic come
/// with local write (as IB requires).
pub fn access_ok(access: u32) -> bool {
    let remote_w = ib::IB_ACCESS_REMOTE_WRITE | ib::IB_ACCESS_REMOTE_ATOMIC;
    access & !ib::ACCESS_SUPPORTED == 0
        && (access & remote_w == 0 || access & ib::IB_ACCESS_LOCAL_WRITE != 0)
}

/// Reads a page table of `npages` entries at guest-physical `table`;
/// every page must be aligned and lie in guest memory.
pub fn load_page_table(mem: &GuestMemoryMmap, table: u64, npages: u32) -> Result<Vec<u64>, u8> {
    let mut bytes = vec![0u8; npages as usize * 8];
    mem.read_slice(&mut bytes, GuestAddress(table))
        .map_err(|_| VIRTIO_RDMA_S_FAULT)?;
    let mut pages = Vec::with_capacity(npages as usize);
    for raw in bytes.chunks_exact(8) {
        let mut b = [0u8; 8];
        b.copy_from_slice(raw);
        let page = u64::from_le_bytes(b);
        if page & PAGE_MASK != 0 {
            return Err(VIRTIO_RDMA_S_INVALID);
        }
        if !mem.check_range(GuestAddress(page), PAGE as usize) {
            return Err(VIRTIO_RDMA_S_FAULT);
        }
        pages.push(page);
    }
    Ok(pages)
}

/// Appends guest-physical range `[addr, addr + len)` to `out`, extending
/// the last range instead when it ends at `addr`.
fn push_range(out: &mut Ranges, addr: u64, len: u64) {
    // Lengths are bounded by the maximum message size (u32).
    let len = len as usize;
    if let Some(last) = out.last_mut() {
        if last.0.checked_add(last.1 as u64) == Some(addr) {
            last.1 += len;
            return;
        }
    }
    out.push((addr, len));
}

/// What an MR maps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MrKind {
    /// All of guest memory; addresses are guest-physical.
    Dma,
    /// A page table fixed at registration.
    User,
    /// Mapped by REG_MR work requests, up to `max_pages` pages.
    FastReg {
        /// Page-table capacity.
        max_pages: u32,
    },
}

/// A page mapping: the region `[iova, iova + length)` over `pages`.
#[derive(Clone, Debug, Default)]
pub struct PageMap {
    /// Address the consumer uses for the first byte.
    pub iova: u64,
    /// Bytes mapped.
    pub length: u64,
    /// Guest-physical page addresses.
    pub pages: Vec<u64>,
}

/// One memory region.
#[derive(Clone, Debug)]
pub struct Mr {
    /// Owning protection domain.
    pub pdn: u32,
    /// Kind.
    pub kind: MrKind,
    /// `enum ib_access_flags`.
    pub access: u32,
    /// Consumer key byte (low 8 bits of lkey/rkey).
    pub key: u8,
    /// Usable (fast-reg MRs: registered and not invalidated).
    pub valid: bool,
    /// The current mapping (unused for the DMA MR).
    pub map: PageMap,
    /// Fast-reg: the table staged by MAP_MR_SG.
    pub staged: Option<PageMap>,
}

/// Why a translation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Outside the region.
    Bounds,
}

impl Mr {
    /// Guest-physical ranges for `[addr, addr + len)`: one per run of
    /// guest-physically contiguous pages (the whole range for the DMA MR),
    /// so that a copy is one memcpy per run, not one per page.
    pub fn translate(&self, addr: u64, len: u64) -> Result<Ranges, Fault> {
        let mut out = Ranges::new();
        self.translate_into(addr, len, &mut out)?;
        Ok(out)
    }

    /// [`Mr::translate`], appending to `out` (merged with its last range
    /// when contiguous with it). On error `out` may hold part of the range.
    pub fn translate_into(&self, addr: u64, len: u64, out: &mut Ranges) -> Result<(), Fault> {
        if len == 0 {
            return Ok(());
        }
        let end = addr.checked_add(len).ok_or(Fault::Bounds)?;
        if self.kind == MrKind::Dma {
            push_range(out, addr, len);
            return Ok(());
        }
        let map = &self.map;
        let map_end = map.iova.checked_add(map.length).ok_or(Fault::Bounds)?;
        if addr < map.iova || end > map_end {
            return Err(Fault::Bounds);
        }
        let mut off = (map.iova & PAGE_MASK) + (addr - map.iova);
        let mut left = len;
        while left > 0 {
            let page = usize::try_from(off / PAGE).map_err(|_| Fault::Bounds)?;
            let in_page = off & PAGE_MASK;
            let n = (PAGE - in_page).min(left);
            let base = *map.pages.get(page).ok_or(Fault::Bounds)?;
            push_range(out, base + in_page, n);
            off += n;
            left -= n;
        }
        Ok(())
    }

    /// Page-table entries this MR holds against its device's quota: a
    /// user MR its table; a fast-registration MR twice its capacity (the
    /// table MAP_MR_SG stages and the one a REG_MR work request maps).
    pub fn table_cost(&self) -> u64 {
        match self.kind {
            MrKind::Dma => 0,
            MrKind::User => self.map.pages.len() as u64,
            MrKind::FastReg { max_pages } => 2 * u64::from(max_pages),
        }
    }

    /// lkey/rkey of this MR.
    pub fn key_of(&self, mrn: u32) -> u32 {
        make_key(mrn, self.key)
    }
}

/// The MRs and memory windows of one device: one handle space, so that
/// the handle of a key names one or the other.
#[derive(Debug)]
pub struct MrTable {
    handles: HandleTable,
    mrs: ByHandle<Mr>,
    windows: ByHandle<Mw>,
}

impl MrTable {
    /// An empty table of `capacity` MRs. Handles stay below 2^24 so that
    /// they fit a key.
    pub fn new(capacity: u32) -> Self {
        MrTable {
            handles: HandleTable::new(capacity.min((1 << 24) - 1)),
            mrs: ByHandle::default(),
            windows: ByHandle::default(),
        }
    }

    /// Adds `mr`; its handle, or `None` when the table is full.
    pub fn insert(&mut self, mr: Mr) -> Option<u32> {
        let mrn = self.handles.alloc()?;
        self.mrs.insert(mrn, mr);
        Some(mrn)
    }

    /// Forgets every MR and window (a reset). Their handles are handed out
    /// again after every other (see [`HandleTable::retire_all`]): a key
    /// of before does not name a new MR or window while the table has
    /// handles it never used.
    pub fn retire_all(&mut self) {
        self.mrs.clear();
        self.windows.clear();
        self.handles.retire_all();
    }

    /// MR `mrn`.
    pub fn get(&self, mrn: u32) -> Option<&Mr> {
        self.mrs.get(mrn)
    }

    /// MR `mrn`, mutable.
    pub fn get_mut(&mut self, mrn: u32) -> Option<&mut Mr> {
        self.mrs.get_mut(mrn)
    }

    /// Removes MR `mrn`.
    pub fn remove(&mut self, mrn: u32) -> Option<Mr> {
        let mr = self.mrs.remove(mrn)?;
        self.handles.free(mrn);
        Some(mr)
    }

    /// The valid MR whose key is `key` (handle and key byte both match).
    pub fn by_key(&self, key: u32) -> Option<&Mr> {
        self.mrs
            .get(key >> 8)
            .filter(|mr| mr.valid && mr.key == (key & 0xff) as u8)
    }

    /// Whether any MR or window belongs to `pdn`.
    pub fn uses_pd(&self, pdn: u32) -> bool {
        self.mrs.values().any(|mr| mr.pdn == pdn) || self.windows.values().any(|w| w.pdn == pdn)
    }

    /// Adds window `mw`; its handle, or `None` when the handle space is full.
    pub fn insert_mw(&mut self, mw: Mw) -> Option<u32> {
        let mwn = self.handles.alloc()?;
        self.windows.insert(mwn, mw);
        Some(mwn)
    }

    /// Window `mwn`.
    pub fn mw(&self, mwn: u32) -> Option<&Mw> {
        self.windows.get(mwn)
    }

    /// Window `mwn`, mutable.
    pub fn mw_mut(&mut self, mwn: u32) -> Option<&mut Mw> {
        self.windows.get_mut(mwn)
    }

    /// Removes window `mwn`.
    pub fn remove_mw(&mut self, mwn: u32) -> Option<Mw> {
        let mw = self.windows.remove(mwn)?;
        self.handles.free(mwn);
        Some(mw)
    }

    /// Windows allocated.
    pub fn mw_count(&self) -> usize {
        self.windows.len()
    }

    /// Whether a window is bound to MR `mrn` (which may then not go).
    pub fn has_windows(&self, mrn: u32) -> bool {
        self.windows
            .values()
            .any(|w| w.bound.as_ref().is_some_and(|b| b.mrn == mrn))
    }

    /// Frees the type 2 windows bound to QP `qpn` (it is going: a QP that
    /// later takes its number must not reach them).
    pub fn unbind_qp(&mut self, qpn: u32) {
        for w in self.windows.values_mut() {
            if w.bound.as_ref().is_some_and(|b| b.qpn == Some(qpn)) {
                w.bound = None;
            }
        }
    }

    /// Guest-physical ranges of a remote `access` of `[addr, addr + len)`
    /// with `rkey` through QP `qpn` of PD `pdn`: an MR of that PD granting
    /// the access, or a window bound for it (its MR still valid).
    pub fn remote(
        &self,
        rkey: u32,
        qpn: u32,
        pdn: u32,
        addr: u64,
        len: u64,
        access: u32,
    ) -> Option<Ranges> {
        // MRs first: the common case costs one lookup (handles are one space,
        // so a handle names an MR or a window, never both).
        let (mr, addr) = if self.mrs.contains(rkey >> 8) {
            let mr = self.by_key(rkey)?;
            if mr.pdn != pdn || mr.access & access != access {
                return None;
            }
            (mr, addr)
        } else {
            let w = self.windows.get(rkey >> 8)?;
            if w.key != (rkey & 0xff) as u8 {
                return None;
            }
            let (mrn, start) = w.reach(qpn, pdn, addr, len, access)?;
            (self.mrs.get(mrn).filter(|mr| mr.valid)?, start)
        };
        mr.translate(addr, len).ok()
    }

    /// MRs registered.
    pub fn len(&self) -> usize {
        self.mrs.len()
    }

    /// Whether no MR is registered.
    pub fn is_empty(&self) -> bool {
        self.mrs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(iova: u64, length: u64, pages: Vec<u64>) -> Mr {
        Mr {
            pdn: 1,
            kind: MrKind::User,
            access: 0,
            key: 0,
            valid: true,
            map: PageMap {
                iova,
                length,
                pages,
            },
            staged: None,
        }
    }

    #[test]
    fn translate_merges_contiguous_pages_and_checks_bounds() {
        let mr = user(0x7000_0ff0, 0x20, vec![0x5000, 0x9000]);
        assert_eq!(
            mr.translate(0x7000_0ff8, 0x10).map(|r| r.to_vec()),
            Ok(vec![(0x5ff8, 8), (0x9000, 8)])
        );
        assert_eq!(mr.translate(0x7000_0fef, 1), Err(Fault::Bounds));
        assert_eq!(mr.translate(0x7000_1000, 0x11), Err(Fault::Bounds));
        assert_eq!(mr.translate(u64::MAX, 2), Err(Fault::Bounds));
        assert_eq!(mr.translate(0, 0).map(|r| r.to_vec()), Ok(vec![]));
        // Contiguous pages make one range; a gap starts a new one.
        let mr = user(0x7000_0ff0, 0x2010, vec![0x5000, 0x6000, 0x9000]);
        assert_eq!(
            mr.translate(0x7000_0ff8, 0x2000).map(|r| r.to_vec()),
            Ok(vec![(0x5ff8, 0x1008), (0x9000, 0xff8)])
        );
    }

    #[test]
    fn keys_and_pages() {
        assert_eq!(make_key(3, 0x7f), 0x37f);
        assert_eq!(pages_needed(0xff0, 0x20), Some(2));
        assert_eq!(pages_needed(0, 0x1000), Some(1));
        assert_eq!(pages_needed(1, u64::MAX), None);
        assert!(access_ok(
            ib::IB_ACCESS_LOCAL_WRITE | ib::IB_ACCESS_REMOTE_WRITE
        ));
        assert!(!access_ok(ib::IB_ACCESS_REMOTE_WRITE));
        assert!(!access_ok(1 << 9));
    }
}
