// SPDX-License-Identifier: GPL-2.0
//! Control commands: parse a request, act on the device's tables, build the
//! response.
//!
//! [`Ctrl::execute`] works on plain bytes (the device-readable part of a
//! chain, and the room in its device-writable part), so it is independent
//! of virtqueues; `ctrlq` moves the bytes. Nothing the guest sends can make
//! it panic: every length, port, index and handle is checked, and a bad
//! request gets a status, never a side effect.

use std::collections::BTreeSet;
use std::fmt;
use std::io;
use std::net::Ipv6Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use vm_memory::{GuestAddressSpace, GuestMemoryMmap};
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::abi::*;
use crate::counter_sets::CounterSets;
use crate::cq::Cq;
use crate::device::RdmaDevice;
use crate::fabric::{self, DataPath, Fabric, Route};
use crate::hostile::Hostile;
use crate::lane::Lanes;
use crate::limits::{self, Limits};
use crate::mr::MrTable;
use crate::qp::{Qp, QpRings, Resend};
use crate::ratelimit::{RateLimit, Verdict};
use crate::resources::{ByHandle, GidEntry, GidTable, HandleTable};
use crate::ring::WorkRing;
use crate::srq::SrqTable;
use crate::stats::{Counter, Stats};
use crate::vring::{Mem, RdmaVring};

/// Size of the response header.
pub const RSP_HDR_LEN: usize = core::mem::size_of::<VirtioRdmaCtrlRspHdr>();
/// Largest device-readable part accepted for one control request.
pub const MAX_REQUEST_LEN: usize = 64 * 1024;
/// `enum ib_gid_type`: the largest value (IB_GID_TYPE_ROCE_UDP_ENCAP).
const MAX_GID_TYPE: u32 = 2;

/// The objects of one device.
#[derive(Debug)]
pub struct State {
    pub(crate) pds: HandleTable,
    pub(crate) gids: GidTable,
    pub(crate) mrs: MrTable,
    /// By cqn, below the device's CQ count.
    pub(crate) cqs: ByHandle<Cq>,
    /// By qpn, below the device's QP count (0 is never used).
    pub(crate) qps: ByHandle<Qp>,
    /// Page-table entries the MRs hold (user MRs: their pages; fast-reg
    /// MRs: twice their capacity, for the staged and the current table).
    pub(crate) mr_pages: u64,
    /// Each QP's route, by qpn (`fabric.rs`).
    pub(crate) routes: ByHandle<Route>,
    /// Shared receive queues, by srqn.
    pub(crate) srqs: SrqTable,
    /// Counter sets, by number (a reset frees them with the rest).
    pub(crate) counter_sets: CounterSets,
    /// XRC domains, by number (`xrcd.rs`).
    pub(crate) xrcds: HandleTable,
    /// QPs waiting on RNR ([`State::set_resend`]): the device's loop looks
    /// for due timers through every QP only while there are any.
    resends: usize,
    /// Where the search for the next ring QP number starts: after the
    /// last one handed out ([`State::free_ring_qpn`]).
    next_ring_qpn: u32,
}

impl State {
    fn new(limits: &Limits) -> Self {
        State {
            pds: HandleTable::new(limits::MAX_PD),
            gids: GidTable::new(limits::GID_TBL_LEN as usize),
            mrs: MrTable::new(limits.max_mr()),
            cqs: ByHandle::with_slots(limits.cq_count()),
            qps: ByHandle::with_slots(limits.qp_count()),
            mr_pages: 0,
            routes: ByHandle::with_slots(limits.qp_count()),
            srqs: SrqTable::new(limits.max_srq()),
            counter_sets: CounterSets::new(limits.max_counter_sets()),
            xrcds: HandleTable::new(limits.max_xrcd()),
            resends: 0,
            next_ring_qpn: 0,
        }
    }

    /// What the tables hold: each kind of object (as the metrics name it)
    /// and how many.
    fn objects(&self) -> [(&'static str, u64); 10] {
        let n = |len: usize| len as u64;
        [
            ("pd", n(self.pds.len())),
            ("mr", n(self.mrs.len())),
            ("mr_page", self.mr_pages),
            ("mw", n(self.mrs.mw_count())),
            ("cq", n(self.cqs.len())),
            ("qp", n(self.qps.len())),
            ("srq", n(self.srqs.len())),
            ("gid", n(self.gids.len())),
            ("counter_set", n(self.counter_sets.len())),
            ("xrcd", n(self.xrcds.len())),
        ]
    }

    /// What the tables hold, for log lines.
    fn census(&self) -> String {
        let [pd, mr, pages, mw, cq, qp, srq, gid, sets, xrcd] = self.objects().map(|(_, n)| n);
        format!(
            "{pd} PDs, {mr} MRs ({pages} page-table entries), {mw} windows, {cq} CQs, {qp} QPs, \
             {srq} SRQs, {gid} GIDs, {sets} counter sets, {xrcd} XRC domains"
        )
    }

    /// Whether CQ `cqn` exists.
    pub fn cq_exists(&self, cqn: u32) -> bool {
        self.cq(cqn).is_some()
    }

    /// CQ `cqn`.
    pub fn cq(&self, cqn: u32) -> Option<&Cq> {
        self.cqs.get(cqn)
    }

    /// Clears CQ `cqn`'s arm flags if `fire(flags)`; returns whether it fired.
    pub fn cq_fire(&mut self, cqn: u32, fire: impl Fn(u32) -> bool) -> bool {
        match self.cqs.get_mut(cqn) {
            Some(cq) if fire(cq.armed) => {
                cq.armed = 0;
                true
            }
            _ => false,
        }
    }

    /// QP `qpn`.
    pub fn qp(&self, qpn: u32) -> Option<&Qp> {
        self.qps.get(qpn)
    }

    /// Completions CQ `cqn` may still get from sends already posted to the
    /// rings of QPs completing there: one each at most (an unsignaled one
    /// gets none, so this is an upper bound), the one in flight included.
    pub fn sends_coming(&self, cqn: u32, mem: &GuestMemoryMmap) -> u32 {
        self.qps
            .values()
            .filter(|q| q.send_cqn == cqn)
            .filter_map(|q| {
                let queued = q.rings.as_ref()?.sq.pending(mem).unwrap_or(0);
                let flying = u32::from(q.resend.is_some() || q.transfer.is_some());
                Some(queued.saturating_add(flying))
            })
            .fold(0, u32::saturating_add)
    }

    /// QP `qpn`, mutable.
    pub fn qp_mut(&mut self, qpn: u32) -> Option<&mut Qp> {
        self.qps.get_mut(qpn)
    }

    /// Takes QP `qpn` out of the table (its RNR wait, if any, with it).
    pub(crate) fn remove_qp(&mut self, qpn: u32) -> Option<Qp> {
        let q = self.qps.remove(qpn)?;
        if q.resend.is_some() {
            self.resends = self.resends.saturating_sub(1);
        }
        Some(q)
    }

    /// Makes QP `qpn` wait on RNR (it waits on nothing else: an SQ step
    /// runs only when it does not).
    pub(crate) fn set_resend(&mut self, qpn: u32, wait: Resend) {
        if let Some(q) = self.qp_mut(qpn) {
            if q.resend.replace(wait).is_none() {
                self.resends += 1;
            }
        }
    }

    /// Ends QP `qpn`'s RNR wait, if it has one.
    pub(crate) fn take_resend(&mut self, qpn: u32) -> Option<Resend> {
        let wait = self.qp_mut(qpn)?.resend.take()?;
        self.resends = self.resends.saturating_sub(1);
        Some(wait)
    }

    /// Whether any QP waits on RNR.
    pub(crate) fn resending(&self) -> bool {
        self.resends > 0
    }

    /// A free ring QP number (ring QPs are numbered from `max_qp`, the
    /// virtqueue QPs' count): the first free one after the last handed
    /// out, going round. A number comes back only after every other free
    /// one has been handed out since: a process that still holds a
    /// destroyed QP's number (rdma-core's provider marks that QP's
    /// unpolled completions by it) does not meet it on a new QP of
    /// another thread in the meantime.
    pub(crate) fn free_ring_qpn(&mut self, max_qp: u32) -> Option<u32> {
        let start = self.next_ring_qpn.max(max_qp);
        let n = self
            .qps
            .first_free(start..u32::MAX)
            .or_else(|| self.qps.first_free(max_qp..start))?;
        self.next_ring_qpn = n + 1;
        Some(n)
    }

    /// Whether GID index `index` of port 1 is set.
    pub fn gid_ok(&self, index: u8) -> bool {
        self.gids.get(usize::from(index)).is_some()
    }
}

/// One device's objects and control commands, and the handles the data
/// path needs (guest memory, vrings).
#[derive(Debug)]
pub struct Ctrl {
    name: String,
    limits: Limits,
    state: Mutex<State>,
    mem: Mem,
    vrings: OnceLock<Vec<RdmaVring>>,
    stats: Stats,
    log_limit: RateLimit,
    /// The device's QPs split among its threads: their data-path locks,
    /// scheduled SQs and ring polling (`lane.rs`).
    lanes: Lanes,
    /// Held shared by a step while it copies to or from this device's MRs,
    /// exclusively while a work request changes them (fast-reg, local or
    /// remote invalidate, window binding): steps of other lanes run at
    /// once, and an MR's change must not slip between another step's check
    /// of it and its copy.
    mr_gate: parking_lot::RwLock<()>,
    /// Key bytes are random unless a fuzz target fixes them.
    fixed_key_byte: Option<u8>,
    /// The lies of a hostile device (`--hostile`); `None` for an honest one.
    hostile: Option<Hostile>,
    /// What its link does to messages (`--link-faults`), if anything.
    link_faults: Option<crate::link::Faults>,
    /// The device this is the control engine of, once registered.
    device: OnceLock<Weak<RdmaDevice>>,
    /// The driver acked `VIRTIO_RDMA_F_RINGS`.
    rings_acked: AtomicBool,
    /// The QPs whose queues are rings, which the device polls.
    ring_qps: Mutex<Vec<(u32, QpRings)>>,
    /// Completion events waiting for a buffer: (queue, cqn).
    comp_waiting: Mutex<BTreeSet<(u32, u32)>>,
}

/// A failed command: the status for the guest.
pub(crate) type CmdResult = Result<Vec<u8>, u8>;

/// Name and response-body size of a command, `None` if unknown.
fn command_info(cmd: u32) -> Option<(&'static str, usize)> {
    use core::mem::size_of;
    Some(match cmd {
        VIRTIO_RDMA_CMD_QUERY_PORT => ("QUERY_PORT", size_of::<VirtioRdmaRspQueryPort>()),
        VIRTIO_RDMA_CMD_CREATE_CQ => ("CREATE_CQ", size_of::<VirtioRdmaRspCreateCq>()),
        VIRTIO_RDMA_CMD_DESTROY_CQ => ("DESTROY_CQ", 0),
        VIRTIO_RDMA_CMD_CREATE_PD => ("CREATE_PD", size_of::<VirtioRdmaRspCreatePd>()),
        VIRTIO_RDMA_CMD_DESTROY_PD => ("DESTROY_PD", 0),
        VIRTIO_RDMA_CMD_GET_DMA_MR => ("GET_DMA_MR", size_of::<VirtioRdmaRspCreateMr>()),
        VIRTIO_RDMA_CMD_CREATE_MR => ("CREATE_MR", size_of::<VirtioRdmaRspCreateMr>()),
        VIRTIO_RDMA_CMD_MAP_MR_SG => ("MAP_MR_SG", size_of::<VirtioRdmaRspMapMrSg>()),
        VIRTIO_RDMA_CMD_REG_USER_MR => ("REG_USER_MR", size_of::<VirtioRdmaRspCreateMr>()),
        VIRTIO_RDMA_CMD_DEREG_MR => ("DEREG_MR", 0),
        VIRTIO_RDMA_CMD_MODIFY_MR => ("MODIFY_MR", 0),
        VIRTIO_RDMA_CMD_CREATE_QP => ("CREATE_QP", size_of::<VirtioRdmaRspCreateQp>()),
        VIRTIO_RDMA_CMD_MODIFY_QP => ("MODIFY_QP", 0),
        VIRTIO_RDMA_CMD_QUERY_QP => ("QUERY_QP", size_of::<VirtioRdmaRspQueryQp>()),
        VIRTIO_RDMA_CMD_DESTROY_QP => ("DESTROY_QP", 0),
        VIRTIO_RDMA_CMD_QUERY_PKEY => ("QUERY_PKEY", size_of::<VirtioRdmaRspQueryPkey>()),
        VIRTIO_RDMA_CMD_ADD_GID => ("ADD_GID", 0),
        VIRTIO_RDMA_CMD_DEL_GID => ("DEL_GID", 0),
        VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ => ("REQ_NOTIFY_CQ", 0),
        VIRTIO_RDMA_CMD_QUERY_COUNTERS => {
            ("QUERY_COUNTERS", size_of::<VirtioRdmaRspQueryCounters>())
        }
        VIRTIO_RDMA_CMD_CREATE_CQ_RING => ("CREATE_CQ_RING", size_of::<VirtioRdmaRspCreateCq>()),
        VIRTIO_RDMA_CMD_CREATE_QP_RING => ("CREATE_QP_RING", size_of::<VirtioRdmaRspCreateQp>()),
        VIRTIO_RDMA_CMD_RESIZE_CQ_RING => {
            ("RESIZE_CQ_RING", size_of::<VirtioRdmaRspResizeCqRing>())
        }
        VIRTIO_RDMA_CMD_ALLOC_MW => ("ALLOC_MW", size_of::<VirtioRdmaRspAllocMw>()),
        VIRTIO_RDMA_CMD_DEALLOC_MW => ("DEALLOC_MW", 0),
        VIRTIO_RDMA_CMD_CREATE_SRQ => ("CREATE_SRQ", size_of::<VirtioRdmaRspCreateSrq>()),
        VIRTIO_RDMA_CMD_MODIFY_SRQ => ("MODIFY_SRQ", 0),
        VIRTIO_RDMA_CMD_QUERY_SRQ => ("QUERY_SRQ", size_of::<VirtioRdmaRspQuerySrq>()),
        VIRTIO_RDMA_CMD_DESTROY_SRQ => ("DESTROY_SRQ", 0),
        VIRTIO_RDMA_CMD_ALLOC_COUNTER_SET => (
            "ALLOC_COUNTER_SET",
            size_of::<VirtioRdmaRspAllocCounterSet>(),
        ),
        VIRTIO_RDMA_CMD_DEALLOC_COUNTER_SET => ("DEALLOC_COUNTER_SET", 0),
        VIRTIO_RDMA_CMD_BIND_COUNTER_SET => ("BIND_COUNTER_SET", 0),
        VIRTIO_RDMA_CMD_ALLOC_XRCD => ("ALLOC_XRCD", size_of::<VirtioRdmaRspAllocXrcd>()),
        VIRTIO_RDMA_CMD_DEALLOC_XRCD => ("DEALLOC_XRCD", 0),
        VIRTIO_RDMA_CMD_CREATE_XRC_SRQ => ("CREATE_XRC_SRQ", size_of::<VirtioRdmaRspCreateSrq>()),
        VIRTIO_RDMA_CMD_CREATE_XRC_TGT_QP => {
            ("CREATE_XRC_TGT_QP", size_of::<VirtioRdmaRspCreateQp>())
        }
        VIRTIO_RDMA_CMD_QUERY_DEVICE => ("QUERY_DEVICE", size_of::<VirtioRdmaConfig>()),
        VIRTIO_RDMA_CMD_RESET => ("RESET", 0),
        _ => return None,
    })
}

impl Ctrl {
    /// A device with empty tables; `name` prefixes its log lines.
    pub fn new(name: &str, limits: Limits, mem: Mem) -> io::Result<Self> {
        Ok(Ctrl {
            name: name.to_string(),
            limits,
            state: Mutex::new(State::new(&limits)),
            mem,
            vrings: OnceLock::new(),
            stats: Stats::new(limits.hostile().is_some()),
            log_limit: RateLimit::default(),
            lanes: Lanes::new(limits.threads())?,
            mr_gate: parking_lot::RwLock::new(()),
            fixed_key_byte: None,
            hostile: limits
                .hostile()
                .map(|config| Hostile::new(config, limits.max_cq())),
            link_faults: limits.link_faults(),
            device: OnceLock::new(),
            rings_acked: AtomicBool::new(false),
            ring_qps: Mutex::new(Vec::new()),
            comp_waiting: Mutex::new(BTreeSet::new()),
        })
    }

    /// The same device with key byte `key` for every new MR: a fuzz target
    /// must be deterministic (and its seeds name keys).
    #[cfg(feature = "fuzzing")]
    pub(crate) fn with_fixed_key_byte(mut self, key: u8) -> Self {
        self.fix_key_byte(key);
        self
    }

    /// [`Ctrl::with_fixed_key_byte`] in place.
    #[cfg(feature = "fuzzing")]
    pub(crate) fn fix_key_byte(&mut self, key: u8) {
        self.fixed_key_byte = Some(key);
    }

    /// The key byte of a new MR.
    pub(crate) fn key_byte(&self) -> Result<u8, getrandom::Error> {
        match self.fixed_key_byte {
            Some(k) => Ok(k),
            None => crate::mr::fresh_key_byte(),
        }
    }

    /// Has the device's loop serve QP `qpn`'s SQ (again) soon, after what
    /// it is doing: a QP reached RTS with elements posted, or an RNR wait
    /// ended (on whatever thread: the QP's lane is woken).
    pub fn schedule_sq(&self, qpn: u32) {
        let lane = self.lanes.of(qpn);
        lane.requeue_sq(qpn);
        lane.wake_up();
    }

    /// [`Ctrl::schedule_sq`] from the QP's own lane's loop (a pass that
    /// used its budget), which looks at its set before it sleeps: no
    /// wake-up (two system calls per pass) is needed.
    pub fn requeue_sq(&self, qpn: u32) {
        self.lanes.of(qpn).requeue_sq(qpn);
    }

    /// The device's lanes (`lane.rs`).
    pub fn lanes(&self) -> &Lanes {
        &self.lanes
    }

    /// The device's MR gate (see the field).
    pub(crate) fn mr_gate(&self) -> &parking_lot::RwLock<()> {
        &self.mr_gate
    }

    /// The data-path lock of QP `qpn`'s lane (see `fabric.rs`).
    pub fn data_path(&self, qpn: u32) -> &DataPath {
        self.lanes.of(qpn).data_path()
    }

    /// The device this is the control engine of, if it is registered and alive.
    pub fn device(&self) -> Option<Arc<RdmaDevice>> {
        self.device.get().and_then(Weak::upgrade)
    }

    /// Remembers the device this is the control engine of (`fabric::register`).
    pub fn set_device(&self, dev: Weak<RdmaDevice>) {
        let _ = self.device.set(dev);
    }

    /// The device's counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The device's hostile mode, if the operator asked for one.
    pub fn hostile(&self) -> Option<&Hostile> {
        self.hostile.as_ref()
    }

    /// The faults of the device's link, if the operator asked for any.
    pub fn link_faults(&self) -> Option<&crate::link::Faults> {
        self.link_faults.as_ref()
    }

    /// Logs a warning the guest caused (a malformed or refused request),
    /// rate limited per device so that no guest can flood the host's log.
    pub fn guest_warn(&self, why: fmt::Arguments<'_>) {
        if !log::log_enabled!(log::Level::Warn) {
            return;
        }
        match self.log_limit.check(Instant::now()) {
            Verdict::Print { suppressed } => {
                if suppressed > 0 {
                    warn!("{}: {suppressed} similar messages suppressed", self.name);
                }
                warn!("{}: {why}", self.name);
            }
            Verdict::Suppress => self.stats.inc(Counter::LogsSuppressed),
        }
    }

    /// Gives the data path the device's vrings (once, at start).
    pub fn set_vrings(&self, vrings: Vec<RdmaVring>) {
        let _ = self.vrings.set(vrings);
    }

    /// Forgets every object (device reset): from here on no key, QP,
    /// counter set or GID of the old objects names anything, for this
    /// guest or another. The port's own counters stay.
    pub fn reset(&self) {
        let _fabric = fabric::lock();
        let destroyed = self.forget_all();
        self.rings_acked.store(false, Ordering::Relaxed);
        info!(
            "{}: device reset; destroyed {destroyed}; counters: {}",
            self.name, self.stats
        );
    }

    /// Empties the object tables (the caller holds the whole fabric);
    /// returns what they held, for the log. Takes the device's locks one
    /// at a time.
    fn forget_all(&self) -> String {
        let destroyed = {
            let mut st = self.lock();
            let mut old = std::mem::replace(&mut *st, State::new(&self.limits));
            let destroyed = old.census();
            // MR and window handles of before come back last: an old key
            // names no new MR while the table has handles it never used.
            let mut mrs = std::mem::replace(&mut old.mrs, MrTable::new(0));
            mrs.retire_all();
            st.mrs = mrs;
            destroyed
        };
        self.ring_qps_mut().clear();
        self.comp_waiting().clear();
        // SQs scheduled for another pass are gone with their QPs.
        for lane in self.lanes.iter() {
            lane.take_scheduled();
        }
        destroyed
    }

    /// RESET: what a device reset does to the objects, keeping the
    /// negotiated features, and every buffer the device holds on a queue
    /// other than the control queue returned with used length 0, each
    /// queue signalled. Runs holding the whole fabric (`execute`), so no
    /// data-path step of any device is under way.
    fn reset_command(&self, body: &[u8]) -> CmdResult {
        if !body.is_empty() {
            // Destructive: a request that is not exactly RESET's is refused.
            self.guest_warn(format_args!(
                "RESET: {} bytes after the header; RESET has no request body",
                body.len()
            ));
            return Err(VIRTIO_RDMA_S_INVALID);
        }
        let vrings: &[RdmaVring] = self.vrings.get().map_or(&[], Vec::as_slice);
        let ctrl_vq = usize::from(VIRTIO_RDMA_CTRL_VQ);
        let marks: Vec<u16> = vrings.iter().map(RdmaVring::next_used).collect();
        // Each QP as DESTROY_QP: the elements only its state still names
        // (an SQ element stalled on RNR or moving in chunks, a receive a
        // message in chunks fills) and those left on its queues go back
        // unwritten, in queue order; its rings are passed.
        let qpns: Vec<u32> = {
            let st = self.lock();
            st.qps.iter().map(|(n, _)| n).collect()
        };
        for qpn in qpns {
            crate::engine::discard(self, qpn);
        }
        let destroyed = self.forget_all();
        // What is still available: CQE, event and completion-event
        // buffers, and elements on the queues of slots without a QP.
        for (index, vring) in vrings.iter().enumerate() {
            if index != ctrl_vq {
                crate::engine::return_available(self, vring);
            }
        }
        // The driver frees these buffers once RESET answers: tell it of
        // every queue that gave some back, whatever its suppression says.
        let mut returned = 0;
        for (index, (vring, mark)) in vrings.iter().zip(marks).enumerate() {
            let n = vring.next_used().wrapping_sub(mark);
            if index != ctrl_vq && n != 0 {
                returned += usize::from(n);
                vring.used_grew(true);
            }
        }
        info!(
            "{}: RESET; destroyed {destroyed}; returned {returned} buffers",
            self.name
        );
        Ok(Vec::new())
    }

    /// QUERY_DEVICE: the config structure, the bytes a config-space read
    /// gives.
    fn query_device(&self) -> CmdResult {
        let space = self.limits.config_space();
        let len = core::mem::size_of::<VirtioRdmaConfig>();
        Ok(space.get(..len).unwrap_or(&space[..]).to_vec())
    }

    /// Logs what the device holds and its counters.
    pub fn log_stats(&self) {
        info!(
            "{}: holds {}; counters: {}",
            self.name,
            self.lock().census(),
            self.stats
        );
    }

    /// What the device's guest holds: each kind of object and how many
    /// (page-table entries of its MRs as `mr_page`).
    pub fn objects(&self) -> [(&'static str, u64); 10] {
        self.lock().objects()
    }

    /// Name for log lines.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The device's guest memory.
    pub fn mem(&self) -> &Mem {
        &self.mem
    }

    /// Vring `index`.
    pub fn vring(&self, index: usize) -> Option<&RdmaVring> {
        self.vrings.get().and_then(|v| v.get(index))
    }

    /// The virtqueue of CQ `cqn`.
    pub fn cq_vring(&self, cqn: u32) -> Option<&RdmaVring> {
        (cqn < self.limits.max_cq()).then_some(())?;
        self.vring(virtio_rdma_cq_vq(cqn) as usize)
    }

    /// The SQ virtqueue of QP `qpn`.
    pub fn sq_vring(&self, qpn: u32) -> Option<&RdmaVring> {
        (qpn < self.limits.max_qp()).then_some(())?;
        self.vring(virtio_rdma_sq_vq(self.limits.max_cq(), qpn) as usize)
    }

    /// The RQ virtqueue of QP `qpn`.
    pub fn rq_vring(&self, qpn: u32) -> Option<&RdmaVring> {
        (qpn < self.limits.max_qp()).then_some(())?;
        self.vring(virtio_rdma_rq_vq(self.limits.max_cq(), qpn) as usize)
    }

    /// Completion-event virtqueue `n` (rings).
    pub fn comp_vring(&self, n: u32) -> Option<&RdmaVring> {
        let rings = self.limits.rings()?;
        (n < rings.comp_vqs).then_some(())?;
        let index = virtio_rdma_comp_vq(self.limits.max_cq(), self.limits.max_qp(), n);
        self.vring(index as usize)
    }

    /// Records the features the driver acked.
    pub fn set_acked_features(&self, features: u64) {
        let rings = self.limits.rings().is_some() && features & (1 << VIRTIO_RDMA_F_RINGS) != 0;
        self.rings_acked.store(rings, Ordering::Relaxed);
    }

    /// Whether the driver may create ring QPs and CQs.
    pub fn rings_acked(&self) -> bool {
        self.rings_acked.load(Ordering::Relaxed)
    }

    /// The ring QPs (created and destroyed under the fabric lock).
    pub(crate) fn ring_qps_mut(&self) -> MutexGuard<'_, Vec<(u32, QpRings)>> {
        self.ring_qps.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Completion events waiting for a buffer.
    pub(crate) fn comp_waiting(&self) -> MutexGuard<'_, BTreeSet<(u32, u32)>> {
        self.comp_waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Polls the rings of lane `lane`'s QPs once (lane 0: also the
    /// SRQs'), unless they sleep: serves every SQ with work and every QP
    /// whose RQ, or SRQ, grew (`serve(qpn, sq, rq)`). After `poll` without
    /// work the rings go to sleep: each asks the driver to notify, then
    /// (the doorbell protocol's second half) is checked once more. Returns
    /// whether the lane still polls. Only lane `lane`'s thread calls this.
    pub fn poll_rings(&self, lane: usize, serve: impl Fn(u32, bool, bool)) -> bool {
        let Some(rings) = self.limits.rings() else {
            return false;
        };
        let l = self.lanes.get(lane);
        let mut last_work = l.last_ring_work();
        if let Some(slept) = l.take_doorbell() {
            if slept {
                debug!("{}: lane {lane}: doorbell, polling rings", self.name);
                self.ask_notify(lane, false);
            }
            *last_work = Instant::now();
        }
        if l.asleep() {
            return false;
        }
        let work = self.serve_rings(lane, &serve);
        let now = Instant::now();
        if work {
            *last_work = now;
            return true;
        }
        if now.duration_since(*last_work) < Duration::from_micros(u64::from(rings.poll_us)) {
            return true;
        }
        self.ask_notify(lane, true);
        if self.serve_rings(lane, &serve) || !l.fall_asleep() {
            self.ask_notify(lane, false);
            *last_work = now;
            return true;
        }
        debug!(
            "{}: lane {lane}: rings idle, asking for doorbells",
            self.name
        );
        false
    }

    /// A kick of the notification queue (one for the whole device), or a
    /// ring QP created: every lane polls its rings again, those asleep
    /// woken.
    pub fn wake_rings(&self) {
        for lane in self.lanes.iter() {
            lane.ring_doorbell();
        }
    }

    /// Whether ring QP `qpn` is polled by lane `lane`.
    fn polled_by(&self, qpn: u32, lane: usize) -> bool {
        self.lanes.index_of(qpn) == lane % self.lanes.count()
    }

    /// Sets or clears the NOTIFY flag of every ring lane `lane` polls.
    fn ask_notify(&self, lane: usize, on: bool) {
        let guard = self.mem.memory();
        for (_, r) in self
            .ring_qps_mut()
            .iter()
            .filter(|(n, _)| self.polled_by(*n, lane))
        {
            r.sq.ask_notify(&guard, on);
            if let Some(rq) = &r.rq {
                rq.ask_notify(&guard, on);
            }
        }
        if lane == 0 {
            for srq in self.srq_rings() {
                srq.ask_notify(&guard, on);
            }
        }
    }

    /// The rings of the SRQs.
    fn srq_rings(&self) -> Vec<Arc<WorkRing>> {
        self.lock()
            .srqs
            .iter()
            .map(|(_, s)| s.ring.clone())
            .collect()
    }

    /// One look at every ring lane `lane` polls; whether any had work.
    /// Receives posted to an SRQ are new receives for every QP that takes
    /// from it (each may have a sender stalled on RNR): lane 0 serves
    /// them, whatever the takers' lanes.
    fn serve_rings(&self, lane: usize, serve: &impl Fn(u32, bool, bool)) -> bool {
        let mut todo: Vec<(u32, bool, bool)> = {
            let guard = self.mem.memory();
            self.ring_qps_mut()
                .iter()
                .filter(|(n, _)| self.polled_by(*n, lane))
                .map(|(qpn, r)| {
                    let rq = r.rq.as_ref().is_some_and(|rq| rq.moved(&guard));
                    (*qpn, r.sq.has_work(&guard), rq)
                })
                .filter(|(_, sq, rq)| *sq || *rq)
                .collect()
        };
        if lane != 0 {
            for (qpn, sq, rq) in &todo {
                serve(*qpn, *sq, *rq);
            }
            return !todo.is_empty();
        }
        let grown: Vec<(u32, Option<u32>)> = {
            let guard = self.mem.memory();
            let st = self.lock();
            st.srqs
                .iter()
                .filter(|(_, s)| s.ring.moved(&guard))
                .map(|(n, s)| (n, s.xrc.map(|x| x.xrcdn)))
                .collect()
        };
        let grown = !grown.is_empty() && {
            let st = self.lock();
            // An XRC SRQ's takers are the target QPs of its domain.
            let takers = st.qps.iter().filter_map(|(n, q)| {
                let takes = grown.iter().any(|&(srqn, xrcdn)| q.takes_from(srqn, xrcdn));
                takes.then_some(n)
            });
            for qpn in takers {
                match todo.iter_mut().find(|t| t.0 == qpn) {
                    Some(t) => t.2 = true,
                    None => todo.push((qpn, false, true)),
                }
            }
            true
        };
        for (qpn, sq, rq) in &todo {
            serve(*qpn, *sq, *rq);
        }
        grown || !todo.is_empty()
    }

    /// The event virtqueue.
    pub fn event_vring(&self) -> Option<&RdmaVring> {
        self.vring(self.limits.event_vq())
    }

    /// Whether port 1's GID table holds `gid`.
    pub fn has_gid(&self, gid: &[u8; 16]) -> bool {
        self.lock().gids.find(gid).is_some()
    }

    /// Number of MRs registered.
    pub fn mr_count(&self) -> usize {
        self.lock().mrs.len()
    }

    /// Number of PDs in use.
    pub fn pd_count(&self) -> usize {
        self.lock().pds.len()
    }

    /// GID table entry of port 1.
    pub fn gid(&self, index: usize) -> Option<GidEntry> {
        self.lock().gids.get(index)
    }

    /// The object tables. Callers hold the fabric or this device's data
    /// path first (see `fabric.rs`), except for read-only peeks.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the tables
        // inconsistent (every update is a single call), so go on.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs one request: `request` is the device-readable part, `room` the
    /// size of the device-writable part. Returns the response bytes (at
    /// most `room`; empty if not even a status fits). A hostile device
    /// tells its lies about the answer here (see `hostile.rs`).
    pub fn execute(&self, request: &[u8], room: usize) -> Vec<u8> {
        if room < RSP_HDR_LEN {
            self.guest_warn(format_args!(
                "control request without room for a status ({room} writable bytes, need \
                 {RSP_HDR_LEN}); dropped"
            ));
            return Vec::new();
        }
        let fabric = fabric::lock();
        let mut result = self.run(&fabric, request, room - RSP_HDR_LEN);
        if let Some(h) = &self.hostile {
            h.answered(self, request, &mut result);
        }
        let (status, body) = match result {
            Ok(body) => (VIRTIO_RDMA_S_OK, body),
            Err(status) => (status, Vec::new()),
        };
        let hdr = VirtioRdmaCtrlRspHdr {
            status,
            reserved: [0; 7],
        };
        let mut out = Vec::with_capacity(RSP_HDR_LEN + body.len());
        out.extend_from_slice(hdr.as_bytes());
        out.extend_from_slice(&body);
        out
    }

    fn run(&self, fabric: &Fabric, request: &[u8], room: usize) -> CmdResult {
        let Ok((hdr, body)) = VirtioRdmaCtrlHdr::read_from_prefix(request) else {
            self.guest_warn(format_args!(
                "control request of {} bytes is shorter than its {}-byte header",
                request.len(),
                core::mem::size_of::<VirtioRdmaCtrlHdr>()
            ));
            return Err(VIRTIO_RDMA_S_INVALID);
        };
        let cmd = hdr.cmd.get();
        let Some((name, rsp_len)) = command_info(cmd) else {
            self.guest_warn(format_args!("unknown control command {cmd}"));
            return Err(VIRTIO_RDMA_S_UNSUPPORTED);
        };
        if room < rsp_len {
            self.guest_warn(format_args!(
                "{name}: response buffer has {room} bytes after the status, needs {rsp_len}"
            ));
            return Err(VIRTIO_RDMA_S_INVALID);
        }
        match cmd {
            VIRTIO_RDMA_CMD_QUERY_PORT => self.query_port(body),
            VIRTIO_RDMA_CMD_CREATE_PD => self.create_pd(),
            VIRTIO_RDMA_CMD_DESTROY_PD => self.destroy_pd(body),
            VIRTIO_RDMA_CMD_QUERY_PKEY => self.query_pkey(body),
            VIRTIO_RDMA_CMD_ADD_GID => self.add_gid(fabric, body),
            VIRTIO_RDMA_CMD_DEL_GID => self.del_gid(body),
            VIRTIO_RDMA_CMD_CREATE_CQ => self.create_cq(body),
            VIRTIO_RDMA_CMD_DESTROY_CQ => self.destroy_cq(body),
            VIRTIO_RDMA_CMD_GET_DMA_MR => self.get_dma_mr(body),
            VIRTIO_RDMA_CMD_CREATE_MR => self.create_mr(body),
            VIRTIO_RDMA_CMD_MAP_MR_SG => self.map_mr_sg(body),
            VIRTIO_RDMA_CMD_REG_USER_MR => self.reg_user_mr(body),
            VIRTIO_RDMA_CMD_DEREG_MR => self.dereg_mr(body),
            VIRTIO_RDMA_CMD_MODIFY_MR => self.modify_mr(body),
            VIRTIO_RDMA_CMD_CREATE_QP => self.create_qp(body),
            VIRTIO_RDMA_CMD_MODIFY_QP => self.modify_qp(fabric, body),
            VIRTIO_RDMA_CMD_QUERY_QP => self.query_qp(body),
            VIRTIO_RDMA_CMD_DESTROY_QP => self.destroy_qp(body),
            VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ => self.req_notify_cq(body),
            VIRTIO_RDMA_CMD_QUERY_COUNTERS => self.query_counters(body),
            VIRTIO_RDMA_CMD_ALLOC_MW => self.alloc_mw(body),
            VIRTIO_RDMA_CMD_DEALLOC_MW => self.dealloc_mw(body),
            VIRTIO_RDMA_CMD_ALLOC_COUNTER_SET => self.alloc_counter_set(body),
            VIRTIO_RDMA_CMD_DEALLOC_COUNTER_SET => self.dealloc_counter_set(body),
            VIRTIO_RDMA_CMD_BIND_COUNTER_SET => self.bind_counter_set(body),
            VIRTIO_RDMA_CMD_CREATE_CQ_RING if self.rings_acked() => self.create_cq_ring(body),
            VIRTIO_RDMA_CMD_CREATE_QP_RING if self.rings_acked() => self.create_qp_ring(body),
            VIRTIO_RDMA_CMD_RESIZE_CQ_RING if self.rings_acked() => self.resize_cq_ring(body),
            VIRTIO_RDMA_CMD_CREATE_SRQ if self.rings_acked() => self.create_srq(body),
            VIRTIO_RDMA_CMD_MODIFY_SRQ if self.rings_acked() => self.modify_srq(body),
            VIRTIO_RDMA_CMD_QUERY_SRQ if self.rings_acked() => self.query_srq(body),
            VIRTIO_RDMA_CMD_DESTROY_SRQ if self.rings_acked() => self.destroy_srq(body),
            VIRTIO_RDMA_CMD_ALLOC_XRCD if self.xrc_enabled() => self.alloc_xrcd(),
            VIRTIO_RDMA_CMD_DEALLOC_XRCD if self.xrc_enabled() => self.dealloc_xrcd(body),
            VIRTIO_RDMA_CMD_CREATE_XRC_SRQ if self.xrc_enabled() => self.create_xrc_srq(body),
            VIRTIO_RDMA_CMD_CREATE_XRC_TGT_QP if self.xrc_enabled() => self.create_xrc_tgt_qp(body),
            VIRTIO_RDMA_CMD_QUERY_DEVICE => self.query_device(),
            VIRTIO_RDMA_CMD_RESET => self.reset_command(body),
            _ => {
                self.guest_warn(format_args!("{name} is not implemented"));
                Err(VIRTIO_RDMA_S_UNSUPPORTED)
            }
        }
    }

    /// The request body as `T`, or INVALID if it is too short.
    pub(crate) fn parse<T: FromBytes + KnownLayout + Immutable>(
        &self,
        cmd: &str,
        body: &[u8],
    ) -> Result<T, u8> {
        T::read_from_prefix(body).map(|(v, _)| v).map_err(|_| {
            self.guest_warn(format_args!(
                "{cmd}: request body of {} bytes, needs {}",
                body.len(),
                core::mem::size_of::<T>()
            ));
            VIRTIO_RDMA_S_INVALID
        })
    }

    /// INVALID (and a warning) unless port `port` exists.
    pub(crate) fn check_port(&self, cmd: &str, port: u32) -> Result<(), u8> {
        if port == 0 || port > limits::PHYS_PORT_CNT {
            self.guest_warn(format_args!(
                "{cmd}: port {port} does not exist (ports are 1..={})",
                limits::PHYS_PORT_CNT
            ));
            return Err(VIRTIO_RDMA_S_INVALID);
        }
        Ok(())
    }

    fn query_port(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdQueryPort = self.parse("QUERY_PORT", body)?;
        self.check_port("QUERY_PORT", u32::from(req.port))?;
        // The port's IB MTU follows its Ethernet MTU (--mtu): no QP may
        // make frames larger than its link takes.
        let mtu = self.limits.ib_mtu();
        let rsp = VirtioRdmaRspQueryPort {
            state: limits::IB_PORT_ACTIVE,
            max_mtu: mtu,
            active_mtu: mtu,
            phys_state: limits::IB_PORT_PHYS_STATE_LINK_UP,
            phys_mtu: U32::new(crate::qp::mtu_bytes(mtu) as u32),
            gid_tbl_len: U32::new(limits::GID_TBL_LEN),
            port_cap_flags: U32::new(limits::IB_PORT_CM_SUP),
            max_msg_sz: U32::new(limits::MAX_MSG_SZ),
            bad_pkey_cntr: U32::new(0),
            qkey_viol_cntr: U32::new(0),
            pkey_tbl_len: U16::new(limits::PKEY_TBL_LEN),
            active_width: limits::IB_WIDTH_1X,
            reserved0: 0,
            active_speed: U16::new(limits::IB_SPEED_SDR),
            reserved: [0; 6],
        };
        debug!("{}: QUERY_PORT port {}", self.name, req.port);
        Ok(rsp.as_bytes().to_vec())
    }

    fn create_pd(&self) -> CmdResult {
        let Some(pdn) = self.lock().pds.alloc() else {
            self.guest_warn(format_args!(
                "CREATE_PD: all {} protection domains are in use",
                limits::MAX_PD
            ));
            return Err(VIRTIO_RDMA_S_NO_RESOURCE);
        };
        debug!("{}: CREATE_PD -> pdn {pdn}", self.name);
        let rsp = VirtioRdmaRspCreatePd {
            pdn: U32::new(pdn),
            reserved: U32::new(0),
        };
        Ok(rsp.as_bytes().to_vec())
    }

    fn destroy_pd(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdDestroyPd = self.parse("DESTROY_PD", body)?;
        let pdn = req.pdn.get();
        let mut st = self.lock();
        if st.pds.contains(pdn)
            && (st.mrs.uses_pd(pdn)
                || st.qps.values().any(|q| q.pdn == pdn)
                || st.srqs.uses_pd(pdn))
        {
            self.guest_warn(format_args!(
                "DESTROY_PD: pdn {pdn} still has MRs, QPs or SRQs"
            ));
            return Err(VIRTIO_RDMA_S_BUSY);
        }
        if !st.pds.free(pdn) {
            self.guest_warn(format_args!("DESTROY_PD: pdn {pdn} does not exist"));
            return Err(VIRTIO_RDMA_S_NOT_FOUND);
        }
        debug!("{}: DESTROY_PD pdn {pdn}", self.name);
        Ok(Vec::new())
    }

    fn query_pkey(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdQueryPkey = self.parse("QUERY_PKEY", body)?;
        self.check_port("QUERY_PKEY", req.port.get())?;
        let index = req.index.get();
        if u32::from(index) >= u32::from(limits::PKEY_TBL_LEN) {
            self.guest_warn(format_args!(
                "QUERY_PKEY: index {index} is past the P_Key table ({} entries)",
                limits::PKEY_TBL_LEN
            ));
            return Err(VIRTIO_RDMA_S_INVALID);
        }
        let rsp = VirtioRdmaRspQueryPkey {
            pkey: U16::new(limits::DEFAULT_PKEY),
            reserved: [U16::new(0); 3],
        };
        Ok(rsp.as_bytes().to_vec())
    }

    /// The port's own counters (set 0: what no QP bound to a set
    /// counted), or a counter set's.
    fn query_counters(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdQueryCounters = self.parse("QUERY_COUNTERS", body)?;
        self.check_port("QUERY_COUNTERS", req.port.get())?;
        let value = match req.set.get() {
            0 => self.stats.port_counters(),
            set => self.counter_set_values(set)?,
        };
        let rsp = VirtioRdmaRspQueryCounters {
            value: value.map(U64::new),
        };
        Ok(rsp.as_bytes().to_vec())
    }

    fn check_gid_index(&self, cmd: &str, index: u16) -> Result<usize, u8> {
        if u32::from(index) >= limits::GID_TBL_LEN {
            self.guest_warn(format_args!(
                "{cmd}: GID index {index} is past the GID table ({} entries)",
                limits::GID_TBL_LEN
            ));
            return Err(VIRTIO_RDMA_S_INVALID);
        }
        Ok(usize::from(index))
    }

    /// Sets a GID table entry. A GID belongs to one device of the fabric
    /// (it is how traffic finds its destination): one another device holds,
    /// or one the operator did not allow this device, is refused.
    fn add_gid(&self, fabric: &Fabric, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdAddGid = self.parse("ADD_GID", body)?;
        let port = req.port_num.get();
        self.check_port("ADD_GID", port)?;
        let index = self.check_gid_index("ADD_GID", req.index.get())?;
        let gid_type = req.gid_type.get();
        if gid_type > MAX_GID_TYPE {
            self.guest_warn(format_args!("ADD_GID: unknown GID type {gid_type}"));
            return Err(VIRTIO_RDMA_S_INVALID);
        }
        let shown = Ipv6Addr::from(req.gid);
        if !self.limits.gid_allowed(&req.gid) {
            self.stats.inc(Counter::GidRefused);
            self.guest_warn(format_args!(
                "ADD_GID: {shown} is not an address this device may use"
            ));
            return Err(VIRTIO_RDMA_S_INVALID);
        }
        let taken = fabric::devices(fabric)
            .iter()
            .any(|d| !std::ptr::eq(d.ctrl(), self) && d.ctrl().has_gid(&req.gid));
        if taken {
            self.stats.inc(Counter::GidRefused);
            self.guest_warn(format_args!("ADD_GID: {shown} belongs to another device"));
            return Err(VIRTIO_RDMA_S_BUSY);
        }
        let entry = GidEntry {
            gid: req.gid,
            gid_type,
        };
        if !self.lock().gids.set(index, entry) {
            return Err(VIRTIO_RDMA_S_INVALID);
        }
        info!(
            "{}: ADD_GID port {port} index {index} gid {shown} type {gid_type}",
            self.name
        );
        Ok(Vec::new())
    }

    fn del_gid(&self, body: &[u8]) -> CmdResult {
        let req: VirtioRdmaCmdDelGid = self.parse("DEL_GID", body)?;
        let port = req.port.get();
        self.check_port("DEL_GID", port)?;
        let index = self.check_gid_index("DEL_GID", req.index.get())?;
        match self.lock().gids.clear(index) {
            Some(old) => {
                info!(
                    "{}: DEL_GID port {port} index {index} gid {}",
                    self.name,
                    Ipv6Addr::from(old.gid)
                );
                Ok(Vec::new())
            }
            None => {
                self.guest_warn(format_args!(
                    "DEL_GID: port {port} index {index} holds no GID"
                ));
                Err(VIRTIO_RDMA_S_NOT_FOUND)
            }
        }
    }

    /// The limits this device serves.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ib::{IB_QPT_RC, IB_WR_SEND};
    use crate::limits::Mac;
    use crate::qp::QpCaps;

    fn resend() -> Resend {
        let mut b = vec![0u8; crate::wqe::SQ_HDR_LEN];
        b[8] = IB_WR_SEND;
        Resend {
            head: 0,
            wqe: crate::wqe::parse_send(&b, 0, 0).expect("a SEND without SGEs"),
            why: crate::qp::Why::Rnr,
            retries_left: 1,
            next_try: Some(Instant::now()),
        }
    }

    #[test]
    fn rnr_waits_are_counted_until_taken_or_their_qp_removed() {
        let limits = Limits::new(4, 4, 64, Mac([2, 0, 0, 0, 0, 1])).expect("limits");
        let mut st = State::new(&limits);
        let caps = QpCaps {
            max_send_wr: 1,
            max_send_sge: 1,
            max_recv_wr: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        for qpn in [2, 3] {
            st.qps
                .insert(qpn, Qp::new(1, IB_QPT_RC, false, caps, (0, 0)));
        }
        st.set_resend(2, resend());
        st.set_resend(2, resend());
        st.set_resend(3, resend());
        assert!(st.take_resend(2).is_some() && st.take_resend(2).is_none());
        assert!(st.resending());
        assert!(st.remove_qp(3).is_some() && st.remove_qp(3).is_none());
        assert!(!st.resending(), "a removed QP's wait is still counted");
    }
}
