// SPDX-License-Identifier: GPL-2.0
//! Hostile-device mode (`--hostile KIND[,KIND...]`): the device lies to its
//! guest on purpose, the ways a broken or malicious device could, so that a
//! guest driver which must not trust its device (a confidential-computing
//! guest's) can be tested end to end. For testing drivers only; never in
//! production.
//!
//! The lies, each counted in the device's [`Stats`]:
//!
//! - `completions`: every Nth completion the device posts (to any of its
//!   CQs; `--hostile-every N`) is corrupted, cycling through [`CQE_LIES`]:
//!   a `wr_id` never posted, a successful status with `byte_len` u32::MAX,
//!   the opcode of the other direction, a QP number that does not report to
//!   the CQ, a used length one byte short of the CQE, the completion twice,
//!   and the `wr_id` of the CQ's previous completion.
//! - `handles`: every Nth CREATE_CQ and every Nth CREATE_QP (each kind
//!   counted on its own) answers with the number of another live object of
//!   the same kind, if there is one. The new object is still
//!   created, under its real number, and lives until that number is
//!   destroyed or the device resets.
//! - `events`: after every control command the device posts a made-up
//!   event, cycling through [`EVENT_LIES`]: an unknown type, QP_FATAL and
//!   CQ_ERR naming objects the device never created, and one whose used
//!   length is short.
//!
//! The device calls in at two points only: [`Hostile::post_completion`]
//! from `cq::post`, which every completion passes through (requester,
//! responder and flush), and [`Hostile::answered`] from `Ctrl::execute`,
//! which every control command's answer passes through. Without the mode
//! the device holds no [`Hostile`] and each point is one branch on an
//! `Option`.

use std::fmt;
use std::num::NonZeroU32;
use std::sync::{Mutex, MutexGuard};

use log::debug;
use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, IntoBytes};

use crate::abi::{
    VirtioRdmaCqReq, VirtioRdmaCtrlHdr, VirtioRdmaEvent, VirtioRdmaRspCreateCq,
    VirtioRdmaRspCreateQp, VIRTIO_RDMA_CMD_CREATE_CQ, VIRTIO_RDMA_CMD_CREATE_CQ_RING,
    VIRTIO_RDMA_CMD_CREATE_QP, VIRTIO_RDMA_CMD_CREATE_QP_RING, VIRTIO_RDMA_EVENT_CQ_ERR,
    VIRTIO_RDMA_EVENT_QP_FATAL,
};
use crate::ctrl::{CmdResult, Ctrl};
use crate::event;
use crate::ib::{IB_WC_RECV, IB_WC_SEND, IB_WC_SUCCESS};
use crate::resources::ByHandle;
use crate::stats::{Counter, Stats};

/// Bytes of a CQE, as the used ring reports a genuine one.
pub const CQE_LEN: u32 = core::mem::size_of::<VirtioRdmaCqReq>() as u32;
/// What lie (a) adds to a `wr_id`.
pub const UNPOSTED_WR_ID_OFFSET: u64 = 0x1_0000_0000;
/// What lie (d) XORs into a QP number.
pub const FOREIGN_QPN_MASK: u32 = 0x00ff_0000;
/// The event type no protocol version defines.
pub const UNKNOWN_EVENT_TYPE: u32 = 0xdead;
/// The QP and CQ number the made-up events name (larger than any this
/// device creates).
pub const NEVER_CREATED: u32 = 0x00fe_dcba;
/// The used length of the short made-up event.
pub const SHORT_EVENT_LEN: u32 = 4;

/// What a hostile device lies about.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Kinds {
    /// Every Nth completion is corrupted.
    pub completions: bool,
    /// CREATE_CQ and CREATE_QP answer another object's number.
    pub handles: bool,
    /// A made-up event follows every control command.
    pub events: bool,
}

/// The kinds' names, as `--hostile` takes them.
const KIND_NAMES: [&str; 3] = ["completions", "handles", "events"];

impl Kinds {
    fn flag(&mut self, name: &str) -> Option<&mut bool> {
        match name {
            "completions" => Some(&mut self.completions),
            "handles" => Some(&mut self.handles),
            "events" => Some(&mut self.events),
            _ => None,
        }
    }
}

impl std::str::FromStr for Kinds {
    type Err = String;

    /// A comma-separated list of kind names.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut kinds = Kinds::default();
        for name in s.split(',') {
            let flag = kinds.flag(name).ok_or_else(|| {
                format!(
                    "unknown hostile kind `{name}` (one of: {})",
                    KIND_NAMES.join(", ")
                )
            })?;
            *flag = true;
        }
        Ok(kinds)
    }
}

impl fmt::Display for Kinds {
    /// The kinds set, comma separated (as `--hostile` takes them).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = [self.completions, self.handles, self.events];
        let names: Vec<&str> = KIND_NAMES
            .iter()
            .zip(set)
            .filter_map(|(n, on)| on.then_some(*n))
            .collect();
        f.write_str(&names.join(","))
    }
}

/// The hostile mode of a device: what it lies about, and how often.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// The lies.
    pub kinds: Kinds,
    /// With `completions`: every `every`th completion is corrupted.
    pub every: NonZeroU32,
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kinds)?;
        if self.kinds.completions {
            write!(f, " (one completion in {} corrupted)", self.every)?;
        }
        Ok(())
    }
}

/// How a completion is corrupted; [`CQE_LIES`] gives their order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqeLie {
    /// (a) The genuine `wr_id` plus [`UNPOSTED_WR_ID_OFFSET`] (wrapping).
    UnpostedWrId,
    /// (b) Status success with `byte_len` u32::MAX.
    HugeByteLen,
    /// (c) The opcode of the other direction: IB_WC_RECV for a send-side
    /// completion, IB_WC_SEND for a receive-side one.
    WrongDirection,
    /// (d) `qp_num` XOR [`FOREIGN_QPN_MASK`].
    ForeignQp,
    /// (e) The genuine CQE, with a used length one byte short of it.
    ShortLength,
    /// (f) The genuine CQE in two used entries.
    Duplicate,
    /// (g) The `wr_id` of the previous completion posted on this CQ (0 if
    /// none).
    StaleWrId,
}

/// The completion lies, in the order they are told.
pub const CQE_LIES: [CqeLie; 7] = [
    CqeLie::UnpostedWrId,
    CqeLie::HugeByteLen,
    CqeLie::WrongDirection,
    CqeLie::ForeignQp,
    CqeLie::ShortLength,
    CqeLie::Duplicate,
    CqeLie::StaleWrId,
];

/// A made-up event; [`EVENT_LIES`] gives their order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventLie {
    /// Type [`UNKNOWN_EVENT_TYPE`], element 0.
    UnknownType,
    /// QP_FATAL naming QP [`NEVER_CREATED`].
    UnknownQp,
    /// CQ_ERR naming CQ [`NEVER_CREATED`].
    UnknownCq,
    /// A QP_FATAL record for QP [`NEVER_CREATED`] returned with used length
    /// [`SHORT_EVENT_LEN`].
    Short,
}

/// The event lies, in the order they are told.
pub const EVENT_LIES: [EventLie; 4] = [
    EventLie::UnknownType,
    EventLie::UnknownQp,
    EventLie::UnknownCq,
    EventLie::Short,
];

impl EventLie {
    /// The record written, and the used length it is returned with.
    fn record(self) -> (VirtioRdmaEvent, u32) {
        let full = core::mem::size_of::<VirtioRdmaEvent>() as u32;
        let (t, element, len) = match self {
            EventLie::UnknownType => (UNKNOWN_EVENT_TYPE, 0, full),
            EventLie::UnknownQp => (VIRTIO_RDMA_EVENT_QP_FATAL, NEVER_CREATED, full),
            EventLie::UnknownCq => (VIRTIO_RDMA_EVENT_CQ_ERR, NEVER_CREATED, full),
            EventLie::Short => (VIRTIO_RDMA_EVENT_QP_FATAL, NEVER_CREATED, SHORT_EVENT_LEN),
        };
        let record = VirtioRdmaEvent {
            event_type: U32::new(t),
            element: U32::new(element),
        };
        (record, len)
    }
}

/// Where the lies stand.
#[derive(Debug)]
struct Lies {
    /// Completions posted so far, on any CQ.
    posted: u64,
    /// Index in [`CQE_LIES`] of the next completion lie.
    next_cqe: usize,
    /// Index in [`EVENT_LIES`] of the next event lie.
    next_event: usize,
    /// CQs and QPs created so far.
    cq_creates: u64,
    qp_creates: u64,
    /// Per CQ number: the `wr_id` of the last completion posted there
    /// since the CQ was created (0: none).
    last_wr_id: Vec<u64>,
}

/// The hostile mode of one device.
#[derive(Debug)]
pub struct Hostile {
    config: Config,
    lies: Mutex<Lies>,
}

impl Hostile {
    /// The hostile mode `config` of a device with `max_cq` CQs.
    pub fn new(config: Config, max_cq: u32) -> Self {
        Hostile {
            config,
            lies: Mutex::new(Lies {
                posted: 0,
                next_cqe: 0,
                next_event: 0,
                cq_creates: 0,
                qp_creates: 0,
                last_wr_id: vec![0; max_cq as usize],
            }),
        }
    }

    /// What this device lies about.
    pub fn config(&self) -> Config {
        self.config
    }

    fn lock(&self) -> MutexGuard<'_, Lies> {
        // Every update is a few plain stores: a panic cannot leave the
        // state inconsistent.
        self.lies.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Posts completion `genuine` to CQ `cqn` through `write` (which writes
    /// a CQE into the next buffer and returns it with the given used
    /// length), corrupted if it is the Nth. An error of the first write is
    /// returned (nothing was posted, and the completion does not count); a
    /// duplicate that finds no second buffer is dropped.
    pub fn post_completion<E: fmt::Display>(
        &self,
        stats: &Stats,
        cqn: u32,
        genuine: &VirtioRdmaCqReq,
        mut write: impl FnMut(&VirtioRdmaCqReq, u32) -> Result<(), E>,
    ) -> Result<(), E> {
        if !self.config.kinds.completions {
            return write(genuine, CQE_LEN);
        }
        let mut lies = self.lock();
        let n = lies.posted + 1;
        let every = u64::from(self.config.every.get());
        let lie = (n % every == 0).then(|| CQE_LIES[lies.next_cqe % CQE_LIES.len()]);
        let last = lies.last_wr_id.get(cqn as usize).copied().unwrap_or(0);
        let (cqe, len) = match lie {
            Some(lie) => corrupt(lie, genuine, last),
            None => (*genuine, CQE_LEN),
        };
        write(&cqe, len)?;
        lies.posted = n;
        if let Some(slot) = lies.last_wr_id.get_mut(cqn as usize) {
            *slot = cqe.wr_id.get();
        }
        let Some(lie) = lie else {
            return Ok(());
        };
        lies.next_cqe = (lies.next_cqe + 1) % CQE_LIES.len();
        if lie == CqeLie::Duplicate {
            if let Err(e) = write(&cqe, len) {
                debug!("CQ {cqn}: duplicate completion not posted: {e}");
                return Ok(());
            }
        }
        debug!("CQ {cqn}: hostile completion {lie:?}");
        stats.inc(Counter::HostileCompletions);
        Ok(())
    }

    /// Tells the lies about control command `request`, answered `result`:
    /// another object's number for a new CQ or QP (`handles`), a made-up
    /// event (`events`).
    pub(crate) fn answered(&self, ctrl: &Ctrl, request: &[u8], result: &mut CmdResult) {
        let cmd = VirtioRdmaCtrlHdr::read_from_prefix(request).map(|(h, _)| h.cmd.get());
        if let (Ok(cmd), Ok(body)) = (cmd, result.as_mut()) {
            match cmd {
                VIRTIO_RDMA_CMD_CREATE_CQ | VIRTIO_RDMA_CMD_CREATE_CQ_RING => {
                    self.created_cq(ctrl, body)
                }
                VIRTIO_RDMA_CMD_CREATE_QP | VIRTIO_RDMA_CMD_CREATE_QP_RING => {
                    self.created_qp(ctrl, body)
                }
                _ => {}
            }
        }
        if self.config.kinds.events {
            self.post_event(ctrl);
        }
    }

    /// Whether the `n`th create of a kind lies.
    fn nth(&self, n: u64) -> bool {
        self.config.kinds.handles && n % u64::from(self.config.every.get()) == 0
    }

    /// CREATE_CQ's answer `body`: the new CQ has no completions yet; names
    /// another live CQ instead of it with `handles`, if it is the Nth.
    fn created_cq(&self, ctrl: &Ctrl, body: &mut [u8]) {
        let Ok((mut rsp, _)) = VirtioRdmaRspCreateCq::read_from_prefix(body) else {
            return;
        };
        let cqn = rsp.cqn.get();
        let n = {
            let mut lies = self.lock();
            if let Some(slot) = lies.last_wr_id.get_mut(cqn as usize) {
                *slot = 0;
            }
            lies.cq_creates += 1;
            lies.cq_creates
        };
        if !self.nth(n) {
            return;
        }
        let other = first_other(&ctrl.lock().cqs, cqn);
        if let Some(other) = other {
            rsp.cqn = U32::new(other);
            rename(ctrl, body, rsp.as_bytes(), "CQ", cqn, other);
        }
    }

    /// CREATE_QP's answer `body`: names another live QP with `handles`, if
    /// it is the Nth.
    fn created_qp(&self, ctrl: &Ctrl, body: &mut [u8]) {
        let Ok((mut rsp, _)) = VirtioRdmaRspCreateQp::read_from_prefix(body) else {
            return;
        };
        let n = {
            let mut lies = self.lock();
            lies.qp_creates += 1;
            lies.qp_creates
        };
        if !self.nth(n) {
            return;
        }
        let qpn = rsp.qpn.get();
        let other = first_other(&ctrl.lock().qps, qpn);
        if let Some(other) = other {
            rsp.qpn = U32::new(other);
            rename(ctrl, body, rsp.as_bytes(), "QP", qpn, other);
        }
    }

    /// Posts the next made-up event; the cycle moves on only when one is
    /// delivered.
    fn post_event(&self, ctrl: &Ctrl) {
        let mut lies = self.lock();
        let lie = EVENT_LIES[lies.next_event % EVENT_LIES.len()];
        let (record, len) = lie.record();
        match event::post_made_up(ctrl, &record, len) {
            Ok(()) => {
                lies.next_event = (lies.next_event + 1) % EVENT_LIES.len();
                debug!("{}: hostile event {lie:?}", ctrl.name());
                ctrl.stats().inc(Counter::HostileEvents);
            }
            Err(e) => debug!("{}: hostile event {lie:?} not posted: {e}", ctrl.name()),
        }
    }
}

/// `genuine` as lie `lie` tells it, and its used length; `last` is the
/// `wr_id` of the CQ's previous completion.
fn corrupt(lie: CqeLie, genuine: &VirtioRdmaCqReq, last: u64) -> (VirtioRdmaCqReq, u32) {
    let mut c = *genuine;
    let mut len = CQE_LEN;
    match lie {
        CqeLie::UnpostedWrId => {
            c.wr_id = U64::new(genuine.wr_id.get().wrapping_add(UNPOSTED_WR_ID_OFFSET));
        }
        CqeLie::HugeByteLen => {
            c.status = IB_WC_SUCCESS;
            c.byte_len = U32::new(u32::MAX);
        }
        CqeLie::WrongDirection => {
            // Receive-side opcodes have IB_WC_RECV's bit set.
            c.opcode = if genuine.opcode & IB_WC_RECV != 0 {
                IB_WC_SEND
            } else {
                IB_WC_RECV
            };
        }
        CqeLie::ForeignQp => c.qp_num = U32::new(genuine.qp_num.get() ^ FOREIGN_QPN_MASK),
        CqeLie::ShortLength => len -= 1,
        CqeLie::Duplicate => {}
        CqeLie::StaleWrId => c.wr_id = U64::new(last),
    }
    (c, len)
}

/// The lowest number of a live object in `table` other than `own`.
fn first_other<T>(table: &ByHandle<T>, own: u32) -> Option<u32> {
    table.iter().map(|(n, _)| n).find(|&n| n != own)
}

/// Replaces the start of answer `body` with `rsp` (the answer naming
/// `other` instead of the new `kind` `own`), and counts the lie.
fn rename(ctrl: &Ctrl, body: &mut [u8], rsp: &[u8], kind: &str, own: u32, other: u32) {
    if let Some(head) = body.get_mut(..rsp.len()) {
        head.copy_from_slice(rsp);
        debug!(
            "{}: hostile answer: new {kind} {own} answered as {other}",
            ctrl.name()
        );
        ctrl.stats().inc(Counter::HostileHandles);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ib::{IB_WC_RDMA_WRITE, IB_WC_RECV_RDMA_WITH_IMM, IB_WC_WR_FLUSH_ERR};

    #[test]
    fn kinds_parse_and_print() {
        let k: Kinds = "events,completions".parse().expect("parses");
        assert_eq!(
            k,
            Kinds {
                completions: true,
                handles: false,
                events: true
            }
        );
        assert_eq!(k.to_string(), "completions,events");
        let err = "handles,bogus".parse::<Kinds>().expect_err("refused");
        assert!(err.contains("`bogus`") && err.contains("completions, handles, events"));
        assert!("".parse::<Kinds>().is_err());
        assert!("completions,".parse::<Kinds>().is_err());
    }

    fn genuine(opcode: u8) -> VirtioRdmaCqReq {
        VirtioRdmaCqReq {
            wr_id: U64::new(0xffff_ffff_0000_0007),
            status: IB_WC_WR_FLUSH_ERR,
            opcode,
            byte_len: U32::new(12),
            qp_num: U32::new(3),
            ..Default::default()
        }
    }

    #[test]
    fn each_completion_lie() {
        let g = genuine(IB_WC_RDMA_WRITE);
        let lie = |l| corrupt(l, &g, 5);
        let (c, len) = lie(CqeLie::UnpostedWrId);
        assert_eq!((c.wr_id.get(), len), (0x7, CQE_LEN), "wraps");
        let (c, _) = lie(CqeLie::HugeByteLen);
        assert_eq!((c.status, c.byte_len.get()), (IB_WC_SUCCESS, u32::MAX));
        assert_eq!(lie(CqeLie::WrongDirection).0.opcode, IB_WC_RECV);
        let r = genuine(IB_WC_RECV_RDMA_WITH_IMM);
        assert_eq!(corrupt(CqeLie::WrongDirection, &r, 0).0.opcode, IB_WC_SEND);
        assert_eq!(lie(CqeLie::ForeignQp).0.qp_num.get(), 0x00ff_0003);
        let (c, len) = lie(CqeLie::ShortLength);
        assert_eq!((c.as_bytes(), len), (g.as_bytes(), CQE_LEN - 1));
        assert_eq!(lie(CqeLie::Duplicate).0.as_bytes(), g.as_bytes());
        assert_eq!(lie(CqeLie::StaleWrId).0.wr_id.get(), 5);
    }

    #[test]
    fn every_nth_completion_lies_in_order() {
        let every = NonZeroU32::new(2).expect("non-zero");
        let kinds = Kinds {
            completions: true,
            ..Kinds::default()
        };
        let h = Hostile::new(Config { kinds, every }, 2);
        let stats = Stats::new(true);
        let mut written = Vec::new();
        for i in 1..=16u64 {
            let mut c = genuine(IB_WC_RDMA_WRITE);
            c.wr_id = U64::new(i);
            let r: Result<(), String> = h.post_completion(&stats, 1, &c, |c, len| {
                written.push((c.wr_id.get(), len));
                Ok(())
            });
            assert!(r.is_ok());
        }
        // 16 completions, the even ones lie: a..g, then a again; f twice.
        assert_eq!(written.len(), 17);
        assert_eq!(written[1], (2 + UNPOSTED_WR_ID_OFFSET, CQE_LEN));
        assert_eq!(written[9], (10, CQE_LEN - 1));
        assert_eq!((written[11], written[12]), ((12, CQE_LEN), (12, CQE_LEN)));
        assert_eq!(written[14], (13, CQE_LEN), "g: the previous wr_id");
        assert_eq!(written[16], (16 + UNPOSTED_WR_ID_OFFSET, CQE_LEN));
        assert_eq!(stats.get(Counter::HostileCompletions), 8);
        // A failed write posts nothing and does not count: the 17th is
        // genuine, the 18th (after a failed one) lies (b).
        let mut seen = Vec::new();
        let mut post = |fail: bool| {
            let c = genuine(IB_WC_RDMA_WRITE);
            h.post_completion(&stats, 1, &c, |c, _| {
                if fail {
                    return Err("full");
                }
                seen.push(c.byte_len.get());
                Ok(())
            })
        };
        assert_eq!(post(false), Ok(()));
        assert_eq!(post(true), Err("full"));
        assert_eq!(post(false), Ok(()));
        assert_eq!(seen, [12, u32::MAX]);
        assert_eq!(stats.get(Counter::HostileCompletions), 9);
    }
}
