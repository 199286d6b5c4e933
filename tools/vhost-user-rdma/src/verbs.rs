// SPDX-License-Identifier: GPL-2.0
//! Control commands that create, change and destroy CQs, MRs, QPs and
//! SRQs (an XRC SRQ's and an XRC initiator's checks included; the XRC
//! domain commands are `xrcd.rs`).
//! Each checks every argument before it changes anything; a failed command
//! has no effect.

use std::sync::Arc;

use log::{debug, error};
use vm_memory::{GuestAddressSpace, GuestMemoryBackend, GuestMemoryRegion};
use zerocopy::little_endian::U32;
use zerocopy::IntoBytes;

use crate::abi::*;
use crate::cq::Cq;
use crate::ctrl::{CmdResult, Ctrl};
use crate::engine;
use crate::fabric::Fabric;
use crate::ib::*;
use crate::limits;
use crate::mr::{self, Mr, MrKind, PageMap};
use crate::mw::Mw;
use crate::qp::{self, Qp, QpCaps, QpRings, NO_CQ};
use crate::ring::{self, CqRing, RingMap, WorkRing};
use crate::srq::{self, Srq};
use crate::stats::Counter;
use crate::wqe;
use crate::xrcd::XrcSrq;

/// Largest page table of a user MR (max_mr_size in pages).
const MAX_USER_MR_PAGES: u64 = limits::MAX_MR_SIZE / VIRTIO_RDMA_PAGE_SIZE as u64;

/// A page table as MAP_MR_SG and REG_USER_MR carry it.
struct PageTableReq {
    iova: u64,
    length: u64,
    /// Guest-physical address of the table.
    table: u64,
    npages: u32,
}

fn mr_rsp(mrn: u32, key: u32) -> Vec<u8> {
    VirtioRdmaRspCreateMr {
        mrn: U32::new(mrn),
        lkey: U32::new(key),
        rkey: U32::new(key),
        reserved: U32::new(0),
    }
    .as_bytes()
    .to_vec()
}

impl Ctrl {
    fn bad(&self, cmd: &str, why: std::fmt::Arguments<'_>, status: u8) -> u8 {
        self.guest_warn(format_args!("{cmd}: {why}"));
        status
    }

    pub(crate) fn create_cq(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdCreateCq = self.parse("CREATE_CQ", body)?;
        let cqe = req.cqe.get();
        let max = u32::from(self.limits().queue_size());
        if cqe == 0 || cqe > max {
            return Err(self.bad(
                "CREATE_CQ",
                format_args!("cqe {cqe} outside 1..={max}"),
                VIRTIO_RDMA_S_INVALID,
            ));
        }
        let cq = Cq {
            cqe,
            armed: 0,
            ring: None,
        };
        self.insert_cq("CREATE_CQ", 0..self.limits().max_cq(), cq)
    }

    /// Gives `cq` the first free number of `range`.
    fn insert_cq(&self, cmd: &str, range: std::ops::Range<u32>, cq: Cq) -> CmdResult {
        let mut st = self.lock();
        let Some(cqn) = range.clone().find(|&n| !st.cq_exists(n)) else {
            return Err(self.bad(cmd, format_args!("no free CQ"), VIRTIO_RDMA_S_NO_RESOURCE));
        };
        debug!("{}: {cmd} cqe {} -> cqn {cqn}", self.name(), cq.cqe);
        st.cqs.insert(cqn, cq);
        Ok(VirtioRdmaRspCreateCq {
            cqn: U32::new(cqn),
            reserved: U32::new(0),
        }
        .as_bytes()
        .to_vec())
    }

    pub(crate) fn create_cq_ring(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdCreateCqRing = self.parse("CREATE_CQ_RING", body)?;
        let comp_vqs = self.limits().rings().map_or(0, |r| r.comp_vqs);
        let vq = req.comp_vq.get();
        if vq >= comp_vqs {
            return Err(self.bad(
                "CREATE_CQ_RING",
                format_args!("completion-event queue {vq} of {comp_vqs}"),
                VIRTIO_RDMA_S_INVALID,
            ));
        }
        let map = {
            let guard = self.mem().memory();
            RingMap::load(&guard, &req.ring, 1, CqRing::STRIDE)
        }
        .map_err(|r| self.bad("CREATE_CQ_RING", format_args!("{}", r.why), r.status))?;
        if map.stride() != CqRing::STRIDE {
            return Err(self.bad(
                "CREATE_CQ_RING",
                format_args!("stride {} is not {}", map.stride(), CqRing::STRIDE),
                VIRTIO_RDMA_S_INVALID,
            ));
        }
        let cq = Cq {
            cqe: map.depth(),
            armed: 0,
            ring: Some(Arc::new(CqRing::new(map, vq))),
        };
        let first = self.limits().max_cq();
        self.insert_cq("CREATE_CQ_RING", first..self.limits().cq_count(), cq)
    }

    pub(crate) fn resize_cq_ring(&self, body: &[u8]) -> CmdResult {
        const CMD: &str = "RESIZE_CQ_RING";
        let req: VirtioRdmaCmdResizeCqRing = self.parse(CMD, body)?;
        let cqn = req.cqn.get();
        let Some(old) = self.lock().cq(cqn).and_then(|cq| cq.ring.clone()) else {
            return Err(self.bad(
                CMD,
                format_args!("cqn {cqn} is not a ring CQ"),
                VIRTIO_RDMA_S_NOT_FOUND,
            ));
        };
        let guard = self.mem().memory();
        let map = RingMap::load(&guard, &req.ring, 1, CqRing::STRIDE)
            .map_err(|r| self.bad(CMD, format_args!("{}", r.why), r.status))?;
        if map.stride() != CqRing::STRIDE {
            return Err(self.bad(
                CMD,
                format_args!("stride {} is not {}", map.stride(), CqRing::STRIDE),
                VIRTIO_RDMA_S_INVALID,
            ));
        }
        // No completion is written meanwhile: a control command holds the
        // whole fabric (fabric.rs). Sends already posted to a QP completing
        // here complete here (each at most once): whether the device ran
        // them before this command must not decide the answer.
        let coming = self.lock().sends_coming(cqn, &guard);
        let new = old.resized(&guard, map, coming).map_err(|why| {
            self.bad(CMD, format_args!("cqn {cqn}: {why}"), VIRTIO_RDMA_S_INVALID)
        })?;
        let produced = new.produced();
        let mut st = self.lock();
        let Some(cq) = st.cqs.get_mut(cqn) else {
            return Err(VIRTIO_RDMA_S_NOT_FOUND);
        };
        debug!(
            "{}: {CMD} cqn {cqn}: {} -> {} slots",
            self.name(),
            cq.cqe,
            new.depth()
        );
        cq.cqe = new.depth();
        cq.ring = Some(Arc::new(new));
        Ok(VirtioRdmaRspResizeCqRing {
            produced: U32::new(produced),
            reserved: U32::new(0),
        }
        .as_bytes()
        .to_vec())
    }

    pub(crate) fn destroy_cq(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdDestroyCq = self.parse("DESTROY_CQ", body)?;
        let cqn = req.cqn.get();
        {
            let mut st = self.lock();
            if !st.cq_exists(cqn) {
                return Err(self.bad(
                    "DESTROY_CQ",
                    format_args!("cqn {cqn} does not exist"),
                    VIRTIO_RDMA_S_NOT_FOUND,
                ));
            }
            if st
                .qps
                .values()
                .any(|q| q.send_cqn == cqn || q.recv_cqn == cqn)
                || st.srqs.reports_to(cqn)
            {
                return Err(self.bad(
                    "DESTROY_CQ",
                    format_args!("cqn {cqn} is used by a QP or an XRC SRQ"),
                    VIRTIO_RDMA_S_BUSY,
                ));
            }
            st.cqs.remove(cqn);
        }
        self.comp_waiting().retain(|(_, c)| *c != cqn);
        // Hand back the CQE buffers the driver left, unwritten.
        if let Some(v) = self.cq_vring(cqn) {
            engine::return_all(self, v);
        }
        debug!("{}: DESTROY_CQ cqn {cqn}", self.name());
        Ok(Vec::new())
    }

    fn check_pd_access(&self, cmd: &str, pdn: u32, access: u32) -> Result<(), u8> {
        if !self.lock().pds.contains(pdn) {
            return Err(self.bad(
                cmd,
                format_args!("pdn {pdn} does not exist"),
                VIRTIO_RDMA_S_NOT_FOUND,
            ));
        }
        if !mr::access_ok(access) {
            return Err(self.bad(
                cmd,
                format_args!("access flags {access:#x} not supported or inconsistent"),
                VIRTIO_RDMA_S_INVALID,
            ));
        }
        Ok(())
    }

    /// Page-table entries all MRs of this device may hold (see
    /// [`Limits::mr_pages_for`](crate::limits::Limits::mr_pages_for)).
    fn mr_page_budget(&self) -> u64 {
        let guest: u64 = self.mem().memory().iter().map(|r| r.len()).sum();
        self.limits().mr_pages_for(guest)
    }

    /// Fails with NO_RESOURCE (counted) if one more MR with `cost`
    /// page-table entries would exceed the device's quotas. Checked before
    /// a page table is read, so that an oversized one costs nothing.
    fn check_mr_quota(&self, cmd: &str, cost: u64) -> Result<(), u8> {
        let budget = self.mr_page_budget();
        let (count, held) = {
            let st = self.lock();
            (st.mrs.len(), st.mr_pages)
        };
        let max = self.limits().max_mr() as usize;
        let why = if count >= max {
            format!("all {max} MRs are in use")
        } else if held.saturating_add(cost) > budget {
            format!("{cost} more page-table entries exceed the quota ({held} of {budget} held)")
        } else {
            return Ok(());
        };
        self.stats().inc(Counter::OverQuota);
        Err(self.bad(cmd, format_args!("{why}"), VIRTIO_RDMA_S_NO_RESOURCE))
    }

    /// Adds `mr` with a fresh random key byte (so that a key cannot be
    /// guessed from the MR number, as HCAs vary theirs), within quota.
    fn insert_mr(&self, cmd: &str, mut mr: Mr) -> CmdResult {
        let cost = mr.table_cost();
        self.check_mr_quota(cmd, cost)?;
        mr.key = match self.key_byte() {
            Ok(k) => k,
            Err(e) => {
                error!("{}: {cmd}: no random key byte: {e}", self.name());
                return Err(VIRTIO_RDMA_S_NO_RESOURCE);
            }
        };
        let key_byte = mr.key;
        let mut st = self.lock();
        let Some(mrn) = st.mrs.insert(mr) else {
            drop(st);
            self.stats().inc(Counter::OverQuota);
            return Err(self.bad(
                cmd,
                format_args!("all MRs are in use"),
                VIRTIO_RDMA_S_NO_RESOURCE,
            ));
        };
        st.mr_pages += cost;
        drop(st);
        let key = mr::make_key(mrn, key_byte);
        debug!("{}: {cmd} -> mrn {mrn} key {key:#x}", self.name());
        Ok(mr_rsp(mrn, key))
    }

    pub(crate) fn get_dma_mr(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdGetDmaMr = self.parse("GET_DMA_MR", body)?;
        let (pdn, access) = (req.pdn.get(), req.access_flags.get());
        self.check_pd_access("GET_DMA_MR", pdn, access)?;
        let mr = Mr {
            pdn,
            kind: MrKind::Dma,
            access,
            key: 0,
            valid: true,
            map: PageMap::default(),
            staged: None,
        };
        self.insert_mr("GET_DMA_MR", mr)
    }

    pub(crate) fn create_mr(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdCreateMr = self.parse("CREATE_MR", body)?;
        let (pdn, access, max) = (req.pdn.get(), req.access_flags.get(), req.max_num_sg.get());
        self.check_pd_access("CREATE_MR", pdn, access)?;
        if max == 0 || max > limits::MAX_FAST_REG_PAGE_LIST_LEN {
            return Err(self.bad(
                "CREATE_MR",
                format_args!(
                    "max_num_sg {max} outside 1..={}",
                    limits::MAX_FAST_REG_PAGE_LIST_LEN
                ),
                VIRTIO_RDMA_S_INVALID,
            ));
        }
        let mr = Mr {
            pdn,
            kind: MrKind::FastReg { max_pages: max },
            access: 0,
            key: 0,
            valid: false,
            map: PageMap::default(),
            staged: None,
        };
        self.insert_mr("CREATE_MR", mr)
    }

    /// Checks a page-table request and reads the table.
    fn page_map(
        &self,
        cmd: &str,
        t: PageTableReq,
        max_pages: u64,
        exact: bool,
    ) -> Result<PageMap, u8> {
        let PageTableReq {
            iova,
            length,
            table,
            npages,
        } = t;
        let need = mr::pages_needed(iova, length).filter(|_| length <= limits::MAX_MR_SIZE);
        let Some(need) = need.filter(|_| length > 0 && iova.checked_add(length).is_some()) else {
            return Err(self.bad(
                cmd,
                format_args!("length {length} at iova {iova:#x} is not a valid region"),
                VIRTIO_RDMA_S_INVALID,
            ));
        };
        let n = u64::from(npages);
        if n == 0 || n > max_pages || n < need || (exact && n != need) {
            return Err(self.bad(
                cmd,
                format_args!(
                    "{npages} pages for {length} bytes at iova {iova:#x} (need {need}, at most \
                 {max_pages})"
                ),
                VIRTIO_RDMA_S_INVALID,
            ));
        }
        let guard = self.mem().memory();
        let pages = mr::load_page_table(&guard, table, npages).map_err(|st| {
            self.bad(
                cmd,
                format_args!(
                "page table at {table:#x} has a page that is misaligned or outside guest memory"
            ),
                st,
            )
        })?;
        Ok(PageMap {
            iova,
            length,
            pages,
        })
    }

    pub(crate) fn map_mr_sg(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdMapMrSg = self.parse("MAP_MR_SG", body)?;
        let mrn = req.mrn.get();
        let max = match self.lock().mrs.get(mrn).map(|m| m.kind.clone()) {
            Some(MrKind::FastReg { max_pages }) => max_pages,
            Some(_) => {
                return Err(self.bad(
                    "MAP_MR_SG",
                    format_args!("mrn {mrn} is not a fast-registration MR"),
                    VIRTIO_RDMA_S_INVALID,
                ));
            }
            None => {
                return Err(self.bad(
                    "MAP_MR_SG",
                    format_args!("mrn {mrn} does not exist"),
                    VIRTIO_RDMA_S_NOT_FOUND,
                ));
            }
        };
        let (iova, length, npages) = (req.iova.get(), req.length.get(), req.npages.get());
        let t = PageTableReq {
            iova,
            length,
            table: req.pages.get(),
            npages,
        };
        let map = self.page_map("MAP_MR_SG", t, u64::from(max), false)?;
        if let Some(mr) = self.lock().mrs.get_mut(mrn) {
            mr.staged = Some(map);
        }
        Ok(VirtioRdmaRspMapMrSg {
            npages: U32::new(npages),
            reserved: U32::new(0),
        }
        .as_bytes()
        .to_vec())
    }

    pub(crate) fn reg_user_mr(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdRegUserMr = self.parse("REG_USER_MR", body)?;
        let (pdn, access) = (req.pdn.get(), req.access_flags.get());
        self.check_pd_access("REG_USER_MR", pdn, access)?;
        let t = PageTableReq {
            iova: req.iova.get(),
            length: req.length.get(),
            table: req.pages.get(),
            npages: req.npages.get(),
        };
        self.check_mr_quota("REG_USER_MR", u64::from(t.npages))?;
        let map = self.page_map("REG_USER_MR", t, MAX_USER_MR_PAGES, true)?;
        let mr = Mr {
            pdn,
            kind: MrKind::User,
            access,
            key: 0,
            valid: true,
            map,
            staged: None,
        };
        self.insert_mr("REG_USER_MR", mr)
    }

    pub(crate) fn dereg_mr(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdDeregMr = self.parse("DEREG_MR", body)?;
        let mrn = req.mrn.get();
        let removed = {
            let mut st = self.lock();
            if st.mrs.get(mrn).is_some() && st.mrs.has_windows(mrn) {
                drop(st);
                return Err(self.bad(
                    "DEREG_MR",
                    format_args!("mrn {mrn} has windows bound to it"),
                    VIRTIO_RDMA_S_BUSY,
                ));
            }
            let mr = st.mrs.remove(mrn);
            if let Some(mr) = &mr {
                st.mr_pages = st.mr_pages.saturating_sub(mr.table_cost());
            }
            mr
        };
        if removed.is_none() {
            return Err(self.bad(
                "DEREG_MR",
                format_args!("mrn {mrn} does not exist"),
                VIRTIO_RDMA_S_NOT_FOUND,
            ));
        }
        debug!("{}: DEREG_MR mrn {mrn}", self.name());
        Ok(Vec::new())
    }

    /// MODIFY_MR: user MR `mrn` moves to PD `pdn` with rights
    /// `access_flags`, keeping its keys and pages; all checked before
    /// anything changes, so a failure leaves the MR as it was.
    pub(crate) fn modify_mr(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdModifyMr = self.parse("MODIFY_MR", body)?;
        let (mrn, pdn, access) = (req.mrn.get(), req.pdn.get(), req.access_flags.get());
        if req.reserved.get() != 0 {
            return Err(self.bad(
                "MODIFY_MR",
                format_args!("reserved is {:#x}", req.reserved.get()),
                VIRTIO_RDMA_S_INVALID,
            ));
        }
        self.check_pd_access("MODIFY_MR", pdn, access)?;
        // No step of another lane checks the MR's rights between this and
        // its copy (`Ctrl::mr_gate`); taken before the state, as steps do.
        let _gate = self.mr_gate().write();
        let mut st = self.lock();
        let refusal = match st.mrs.get(mrn) {
            None => Some((VIRTIO_RDMA_S_NOT_FOUND, "does not exist")),
            Some(mr) if mr.kind != MrKind::User => Some((VIRTIO_RDMA_S_INVALID, "is no user MR")),
            // As DEREG_MR: a window bound to it keeps it as it is.
            Some(_) if st.mrs.has_windows(mrn) => {
                Some((VIRTIO_RDMA_S_BUSY, "has windows bound to it"))
            }
            // The PD went between the check and the lock.
            Some(_) if !st.pds.contains(pdn) => Some((VIRTIO_RDMA_S_NOT_FOUND, "lost its PD")),
            Some(_) => None,
        };
        if let Some((status, why)) = refusal {
            drop(st);
            return Err(self.bad("MODIFY_MR", format_args!("mrn {mrn} {why}"), status));
        }
        if let Some(mr) = st.mrs.get_mut(mrn) {
            mr.pdn = pdn;
            mr.access = access;
        }
        drop(st);
        debug!(
            "{}: MODIFY_MR mrn {mrn} pdn {pdn} access {access:#x}",
            self.name()
        );
        Ok(Vec::new())
    }

    pub(crate) fn alloc_mw(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdAllocMw = self.parse("ALLOC_MW", body)?;
        let (pdn, mw_type) = (req.pdn.get(), req.mw_type);
        if !matches!(mw_type, IB_MW_TYPE_1 | IB_MW_TYPE_2) {
            return Err(self.bad(
                "ALLOC_MW",
                format_args!("window type {mw_type} is neither 1 nor 2"),
                VIRTIO_RDMA_S_INVALID,
            ));
        }
        self.check_pd_access("ALLOC_MW", pdn, 0)?;
        let key = match self.key_byte() {
            Ok(k) => k,
            Err(e) => {
                error!("{}: ALLOC_MW: no random key byte: {e}", self.name());
                return Err(VIRTIO_RDMA_S_NO_RESOURCE);
            }
        };
        let max = self.limits().max_mw() as usize;
        let mut st = self.lock();
        let mwn = if st.mrs.mw_count() < max {
            st.mrs.insert_mw(Mw::new(pdn, mw_type, key))
        } else {
            None
        };
        drop(st);
        let Some(mwn) = mwn else {
            self.stats().inc(Counter::OverQuota);
            return Err(self.bad(
                "ALLOC_MW",
                format_args!("no window or MR handle is free"),
                VIRTIO_RDMA_S_NO_RESOURCE,
            ));
        };
        let rkey = mr::make_key(mwn, key);
        debug!(
            "{}: ALLOC_MW type {mw_type} -> mwn {mwn} rkey {rkey:#x}",
            self.name()
        );
        Ok(VirtioRdmaRspAllocMw {
            mwn: U32::new(mwn),
            rkey: U32::new(rkey),
        }
        .as_bytes()
        .to_vec())
    }

    pub(crate) fn dealloc_mw(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdDeallocMw = self.parse("DEALLOC_MW", body)?;
        let mwn = req.mwn.get();
        // A bound window goes with its binding (IB's Deallocate MW).
        if self.lock().mrs.remove_mw(mwn).is_none() {
            return Err(self.bad(
                "DEALLOC_MW",
                format_args!("mwn {mwn} does not exist"),
                VIRTIO_RDMA_S_NOT_FOUND,
            ));
        }
        debug!("{}: DEALLOC_MW mwn {mwn}", self.name());
        Ok(Vec::new())
    }

    pub(crate) fn create_qp(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdCreateQp = self.parse("CREATE_QP", body)?;
        self.insert_qp("CREATE_QP", &req, None)
    }

    /// Checks a QP's request and gives it a number: a virtqueue QP's below
    /// `max_qp`, a ring QP's (`rings`) from there.
    fn insert_qp(
        &self,
        cmd: &str,
        req: &VirtioRdmaCmdCreateQp,
        rings: Option<QpRings>,
    ) -> CmdResult {
        let caps = QpCaps {
            max_send_wr: req.max_send_wr.get(),
            max_send_sge: req.max_send_sge.get(),
            max_recv_wr: req.max_recv_wr.get(),
            max_recv_sge: req.max_recv_sge.get(),
            max_inline_data: req.max_inline_data.get(),
        };
        let qs = u32::from(self.limits().queue_size());
        let (pdn, qp_type) = (req.pdn.get(), req.qp_type);
        // An XRC initiator only sends, from a process's ring: it has no
        // receive queue, SRQ or recv CQ (its `recv_cqn` is ignored).
        let ini = qp_type == IB_QPT_XRC_INI;
        if ini {
            let receives = caps.max_recv_wr != 0 || caps.max_recv_sge != 0 || req.srqn.get() != 0;
            if rings.is_none() || !self.xrc_enabled() || receives {
                return Err(self.bad(
                    cmd,
                    format_args!(
                        "an XRC_INI QP needs rings, XRC and no receives (srqn {}, {caps:?})",
                        req.srqn.get()
                    ),
                    VIRTIO_RDMA_S_INVALID,
                ));
            }
        }
        let send_cqn = req.send_cqn.get();
        // (An initiator's is checked as its send CQ, and kept as NO_CQ.)
        let recv_cqn = if ini { send_cqn } else { req.recv_cqn.get() };
        let mut st = self.lock();
        if !st.pds.contains(pdn) {
            return Err(self.bad(
                cmd,
                format_args!("pdn {pdn} does not exist"),
                VIRTIO_RDMA_S_NOT_FOUND,
            ));
        }
        let (Some(scq), Some(rcq)) = (st.cq(send_cqn), st.cq(recv_cqn)) else {
            return Err(self.bad(
                cmd,
                format_args!("CQ {send_cqn} or {recv_cqn} does not exist"),
                VIRTIO_RDMA_S_NOT_FOUND,
            ));
        };
        // A ring QP completes into rings: no kernel on its data path. A
        // virtqueue QP may complete into either (the GSI QP keeps its
        // virtqueues and reports to the kernel's ring CQs).
        if rings.is_some() && (scq.ring.is_none() || rcq.ring.is_none()) {
            return Err(self.bad(
                cmd,
                format_args!("CQ {send_cqn} or {recv_cqn} is not a ring CQ"),
                VIRTIO_RDMA_S_INVALID,
            ));
        }
        // A QP with an SRQ has no RQ of its own (and the GSI QP is the
        // kernel's, with its own receives).
        let srqn = req.srqn.get();
        let srq = match srqn {
            0 => None,
            _ if qp_type == IB_QPT_GSI || caps.max_recv_wr != 0 || caps.max_recv_sge != 0 => {
                return Err(self.bad(
                    cmd,
                    format_args!("srqn {srqn} on a GSI QP or one with an RQ ({caps:?})"),
                    VIRTIO_RDMA_S_INVALID,
                ));
            }
            _ => match st.srqs.get(srqn) {
                None => {
                    return Err(self.bad(
                        cmd,
                        format_args!("srqn {srqn} does not exist"),
                        VIRTIO_RDMA_S_NOT_FOUND,
                    ));
                }
                // Only its domain's target QPs take an XRC SRQ's receives.
                Some(s) if s.xrc.is_some() => {
                    return Err(self.bad(
                        cmd,
                        format_args!("srqn {srqn} is an XRC SRQ"),
                        VIRTIO_RDMA_S_INVALID,
                    ));
                }
                Some(s) => Some(s.link(srqn)),
            },
        };
        let bad_caps = caps.max_send_wr == 0
            || caps.max_send_wr > qs
            || caps.max_recv_wr > qs
            || caps.max_send_sge > limits::MAX_SGE
            || caps.max_recv_sge > limits::MAX_SGE
            || caps.max_inline_data > limits::MAX_INLINE_DATA
            || req.sq_sig_all > 1;
        let known = matches!(qp_type, IB_QPT_GSI | IB_QPT_RC | IB_QPT_UC | IB_QPT_UD) || ini;
        if bad_caps || !known {
            return Err(self.bad(
                cmd,
                format_args!("type {qp_type} or capacities {caps:?} not supported"),
                VIRTIO_RDMA_S_INVALID,
            ));
        }
        let max_qp = self.limits().max_qp();
        let qpn = match (&rings, qp_type) {
            (None, IB_QPT_GSI) => st.qps.first_free(1..2),
            (None, _) => st.qps.first_free(2..max_qp),
            // The GSI QP is the kernel's, on a virtqueue.
            (Some(_), IB_QPT_GSI) => None,
            (Some(_), _) => st.free_ring_qpn(max_qp),
        };
        let Some(qpn) = qpn else {
            return Err(self.bad(
                cmd,
                format_args!("no free QP number for type {qp_type}"),
                VIRTIO_RDMA_S_NO_RESOURCE,
            ));
        };
        let recv_cqn = if ini { NO_CQ } else { recv_cqn };
        let mut qp = Qp::new(
            pdn,
            qp_type,
            req.sq_sig_all == 1,
            caps,
            (send_cqn, recv_cqn),
        );
        qp.rings = rings.clone();
        qp.srq = srq;
        if let Some(s) = srq.and_then(|l| st.srqs.get_mut(l.srqn)) {
            s.qps += 1;
        }
        st.qps.insert(qpn, qp);
        drop(st);
        if let Some(r) = rings {
            self.ring_qps_mut().push((qpn, r));
            // Its rings ask for no doorbell yet: poll until they do.
            self.wake_rings();
        }
        debug!("{}: {cmd} type {qp_type} -> qpn {qpn}", self.name());
        Ok(VirtioRdmaRspCreateQp {
            qpn: U32::new(qpn),
            reserved: U32::new(0),
        }
        .as_bytes()
        .to_vec())
    }

    pub(crate) fn create_qp_ring(&self, body: &[u8]) -> CmdResult {
        const CMD: &str = "CREATE_QP_RING";
        let req: VirtioRdmaCmdCreateQpRing = self.parse(CMD, body)?;
        let flags = req.flags.get();
        if flags & !VIRTIO_RDMA_QP_RING_F_USER != 0 {
            return Err(self.bad(
                CMD,
                format_args!("flags {flags:#x} not understood"),
                VIRTIO_RDMA_S_INVALID,
            ));
        }
        let q = &req.qp;
        let sge = |n: u32| n.saturating_mul(wqe::SGE_LEN as u32);
        // Sizes the guest chose: saturated, and refused by RingMap::load.
        let sq_stride = (wqe::SQ_HDR_LEN as u32)
            .saturating_add(sge(q.max_send_sge.get()).max(q.max_inline_data.get()));
        let rq_stride = (wqe::RQ_HDR_LEN as u32).saturating_add(sge(q.max_recv_sge.get()));
        // A QP with an SRQ takes its receives there, an XRC initiator takes
        // none: neither has an RQ ring.
        let has_rq = q.srqn.get() == 0 && q.qp_type != IB_QPT_XRC_INI;
        if !has_rq && req.rq.as_bytes().iter().any(|&b| b != 0) {
            return Err(self.bad(
                CMD,
                format_args!("a QP with an SRQ, or an XRC_INI QP, has an RQ ring"),
                VIRTIO_RDMA_S_INVALID,
            ));
        }
        let (sq, rq) = {
            let guard = self.mem().memory();
            let sq = RingMap::load(&guard, &req.sq, q.max_send_wr.get(), sq_stride);
            let rq = has_rq.then(|| RingMap::load(&guard, &req.rq, q.max_recv_wr.get(), rq_stride));
            (sq, rq.transpose())
        };
        let refused = |r: ring::Refused| self.bad(CMD, format_args!("{}", r.why), r.status);
        let rings = QpRings {
            sq: Arc::new(WorkRing::new(sq.map_err(refused)?)),
            rq: rq.map_err(refused)?.map(|m| Arc::new(WorkRing::new(m))),
            user: flags & VIRTIO_RDMA_QP_RING_F_USER != 0,
        };
        self.insert_qp(CMD, q, Some(rings))
    }

    pub(crate) fn modify_qp(&self, fabric: &Fabric, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdModifyQp = self.parse("MODIFY_QP", body)?;
        let (qpn, mask) = (req.qpn.get(), req.attr_mask.get());
        let (old, new) = {
            let mut st = self.lock();
            let gids: Vec<bool> = (0..=u8::MAX).map(|i| st.gid_ok(i)).collect();
            let Some(qp) = st.qp_mut(qpn) else {
                return Err(self.bad(
                    "MODIFY_QP",
                    format_args!("qpn {qpn} does not exist"),
                    VIRTIO_RDMA_S_NOT_FOUND,
                ));
            };
            let port_mtu = self.limits().ib_mtu();
            qp::modify(qp, mask, &req.attr, port_mtu, |i| gids[usize::from(i)]).map_err(
                |status| {
                    self.bad(
                        "MODIFY_QP",
                        format_args!(
                            "qpn {qpn}: state {} -> {} with mask {mask:#x} refused",
                            qp.state(),
                            req.attr.qp_state
                        ),
                        status,
                    )
                },
            )?
        };
        debug!("{}: MODIFY_QP qpn {qpn}: {old} -> {new}", self.name());
        match new {
            IB_QPS_ERR if old != IB_QPS_ERR => engine::entered_error(fabric, self, qpn),
            IB_QPS_ERR => engine::flush(fabric, self, qpn),
            IB_QPS_RESET if old != IB_QPS_RESET => engine::discard(self, qpn),
            // Elements posted before RTS: served by the device's loop.
            IB_QPS_RTS => self.schedule_sq(qpn),
            _ => {}
        }
        Ok(Vec::new())
    }

    pub(crate) fn query_qp(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdQueryQp = self.parse("QUERY_QP", body)?;
        let qpn = req.qpn.get();
        let st = self.lock();
        let Some(qp) = st.qp(qpn) else {
            return Err(self.bad(
                "QUERY_QP",
                format_args!("qpn {qpn} does not exist"),
                VIRTIO_RDMA_S_NOT_FOUND,
            ));
        };
        let mut attr = qp.attr;
        attr.cur_qp_state = attr.qp_state;
        attr.cap = VirtioRdmaQpCap {
            max_send_wr: U32::new(qp.caps.max_send_wr),
            max_recv_wr: U32::new(qp.caps.max_recv_wr),
            max_send_sge: U32::new(qp.caps.max_send_sge),
            max_recv_sge: U32::new(qp.caps.max_recv_sge),
            max_inline_data: U32::new(qp.caps.max_inline_data),
            reserved: U32::new(0),
        };
        Ok(VirtioRdmaRspQueryQp { attr }.as_bytes().to_vec())
    }

    pub(crate) fn destroy_qp(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdDestroyQp = self.parse("DESTROY_QP", body)?;
        let qpn = req.qpn.get();
        if self.lock().qp(qpn).is_none() {
            return Err(self.bad(
                "DESTROY_QP",
                format_args!("qpn {qpn} does not exist"),
                VIRTIO_RDMA_S_NOT_FOUND,
            ));
        }
        // Outstanding elements go back to the driver without completions
        // (as IB's destroy: the consumer drains first if it cares).
        engine::discard(self, qpn);
        let mut st = self.lock();
        let srq = st.remove_qp(qpn).and_then(|q| q.srq);
        if let Some(s) = srq.and_then(|l| st.srqs.get_mut(l.srqn)) {
            s.qps = s.qps.saturating_sub(1);
        }
        st.mrs.unbind_qp(qpn);
        drop(st);
        self.ring_qps_mut().retain(|(n, _)| *n != qpn);
        debug!("{}: DESTROY_QP qpn {qpn}", self.name());
        Ok(Vec::new())
    }

    pub(crate) fn create_srq(&self, body: &[u8]) -> CmdResult {
        const CMD: &str = "CREATE_SRQ";
        let req: VirtioRdmaCmdCreateSrq = self.parse(CMD, body)?;
        self.insert_srq(CMD, &req, None)
    }

    /// Checks an SRQ's request (CREATE_SRQ's, also inside CREATE_XRC_SRQ's)
    /// and adds it, an XRC SRQ if `xrc` says of what.
    pub(crate) fn insert_srq(
        &self,
        cmd: &str,
        req: &VirtioRdmaCmdCreateSrq,
        xrc: Option<XrcSrq>,
    ) -> CmdResult {
        let (pdn, flags) = (req.pdn.get(), req.flags.get());
        let (max_wr, max_sge, limit) = (req.max_wr.get(), req.max_sge.get(), req.srq_limit.get());
        if !self.lock().pds.contains(pdn) {
            return Err(self.bad(
                cmd,
                format_args!("pdn {pdn} does not exist"),
                VIRTIO_RDMA_S_NOT_FOUND,
            ));
        }
        if flags & !VIRTIO_RDMA_SRQ_F_USER != 0 {
            return Err(self.bad(
                cmd,
                format_args!("flags {flags:#x} not understood"),
                VIRTIO_RDMA_S_INVALID,
            ));
        }
        let caps = self.limits().srq_caps();
        srq::check_create(max_wr, max_sge, limit, req.ring.depth.get(), caps).map_err(|why| {
            self.bad(
                cmd,
                format_args!("max_wr {max_wr} max_sge {max_sge} limit {limit}: {why}"),
                VIRTIO_RDMA_S_INVALID,
            )
        })?;
        let map = {
            let guard = self.mem().memory();
            RingMap::load(&guard, &req.ring, max_wr, srq::stride_for(max_sge))
        }
        .map_err(|r| self.bad(cmd, format_args!("{}", r.why), r.status))?;
        let srq = Srq {
            ring: Arc::new(WorkRing::new(map)),
            pdn,
            max_wr,
            max_sge,
            limit,
            qps: 0,
            user: flags & VIRTIO_RDMA_SRQ_F_USER != 0,
            xrc,
        };
        let Some(srqn) = self.lock().srqs.insert(srq) else {
            return Err(self.bad(
                cmd,
                format_args!("all {} SRQs are in use", self.limits().max_srq()),
                VIRTIO_RDMA_S_NO_RESOURCE,
            ));
        };
        // Its ring asks for no doorbell yet: poll until it does.
        self.wake_rings();
        debug!(
            "{}: {cmd} pdn {pdn} max_wr {max_wr} -> srqn {srqn}",
            self.name()
        );
        Ok(VirtioRdmaRspCreateSrq {
            srqn: U32::new(srqn),
            reserved: U32::new(0),
        }
        .as_bytes()
        .to_vec())
    }

    pub(crate) fn modify_srq(&self, body: &[u8]) -> CmdResult {
        const CMD: &str = "MODIFY_SRQ";
        let req: VirtioRdmaCmdModifySrq = self.parse(CMD, body)?;
        let (srqn, limit) = (req.srqn.get(), req.srq_limit.get());
        let mut st = self.lock();
        let Some(s) = st.srqs.get_mut(srqn) else {
            drop(st);
            return Err(self.bad(
                CMD,
                format_args!("srqn {srqn} does not exist"),
                VIRTIO_RDMA_S_NOT_FOUND,
            ));
        };
        if let Err(why) = srq::check_limit(limit, s.max_wr) {
            let max_wr = s.max_wr;
            drop(st);
            return Err(self.bad(
                CMD,
                format_args!("srqn {srqn}: limit {limit} of {max_wr}: {why}"),
                VIRTIO_RDMA_S_INVALID,
            ));
        }
        s.limit = limit;
        Ok(Vec::new())
    }

    pub(crate) fn query_srq(&self, body: &[u8]) -> CmdResult {
        const CMD: &str = "QUERY_SRQ";
        let req: VirtioRdmaCmdQuerySrq = self.parse(CMD, body)?;
        let srqn = req.srqn.get();
        let rsp = self.lock().srqs.get(srqn).map(|s| VirtioRdmaRspQuerySrq {
            max_wr: U32::new(s.max_wr),
            max_sge: U32::new(s.max_sge),
            srq_limit: U32::new(s.limit),
            reserved: U32::new(0),
        });
        let Some(rsp) = rsp else {
            return Err(self.bad(
                CMD,
                format_args!("srqn {srqn} does not exist"),
                VIRTIO_RDMA_S_NOT_FOUND,
            ));
        };
        Ok(rsp.as_bytes().to_vec())
    }

    pub(crate) fn destroy_srq(&self, body: &[u8]) -> CmdResult {
        const CMD: &str = "DESTROY_SRQ";
        let req: VirtioRdmaCmdDestroySrq = self.parse(CMD, body)?;
        let srqn = req.srqn.get();
        let mut st = self.lock();
        let users = st.srqs.get(srqn).map(|s| s.qps);
        match users {
            None => {
                drop(st);
                Err(self.bad(
                    CMD,
                    format_args!("srqn {srqn} does not exist"),
                    VIRTIO_RDMA_S_NOT_FOUND,
                ))
            }
            Some(n) if n > 0 => {
                drop(st);
                Err(self.bad(
                    CMD,
                    format_args!("srqn {srqn} is used by {n} QPs"),
                    VIRTIO_RDMA_S_BUSY,
                ))
            }
            // Receives left in it end with it, without completions.
            Some(_) => {
                st.srqs.remove(srqn);
                drop(st);
                debug!("{}: {CMD} srqn {srqn}", self.name());
                Ok(Vec::new())
            }
        }
    }

    pub(crate) fn req_notify_cq(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdReqNotifyCq = self.parse("REQ_NOTIFY_CQ", body)?;
        let (cqn, flags) = (req.cqn.get(), req.flags.get());
        let all = VIRTIO_RDMA_NOTIFY_SOLICITED | VIRTIO_RDMA_NOTIFY_NEXT_COMPLETION;
        if flags == 0 || flags & !all != 0 {
            return Err(self.bad(
                "REQ_NOTIFY_CQ",
                format_args!("flags {flags:#x} not understood"),
                VIRTIO_RDMA_S_INVALID,
            ));
        }
        let mut st = self.lock();
        let Some(cq) = st.cqs.get_mut(cqn) else {
            return Err(self.bad(
                "REQ_NOTIFY_CQ",
                format_args!("cqn {cqn} does not exist"),
                VIRTIO_RDMA_S_NOT_FOUND,
            ));
        };
        cq.armed |= flags;
        Ok(Vec::new())
    }
}
