// SPDX-License-Identifier: GPL-2.0
//! The RC requester and completer: a work request becomes packets with a
//! PSN each (cut at the path MTU), stays pending until the responder
//! acknowledges it (an ACK covering its last PSN, a READ's last response, an
//! atomic's ACK), and completes in order. A PSN sequence NAK or the
//! transport timer sends again from the oldest unacknowledged PSN (a READ
//! from its first missing response, asking only for the rest); an RNR NAK
//! waits its timer first. A READ's responses are placed where their PSNs
//! say, so one that comes late (a network that reorders) costs nothing;
//! the READ's last response, or a later READ's, past a hole asks for the
//! rest once. Retries count as IB says: `retry_cnt` for the
//! timer and sequence NAKs (7 is seven, not infinite: rxe differs there),
//! `rnr_retry` for RNR NAKs (7 is infinite); any progress restores both.

use std::collections::VecDeque;

use super::{ack_timeout_us, psn_add, psn_diff, rnr_delay_us, AtomicOp, Seen, Status};
use crate::packet::{
    segments, syndrome, AtomicEth, Message, Op, Opcode, Packet, Reth, Segment, Transport,
};
use zerocopy::big_endian::{U32, U64};

/// The QP attributes the requester works with.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// The responder's QP number.
    pub dest_qp: u32,
    /// Path MTU in bytes.
    pub mtu: u32,
    /// IB's local ACK timeout exponent (0: no timer).
    pub timeout: u8,
    /// Retransmissions after timeouts and sequence NAKs (0-7).
    pub retry_cnt: u8,
    /// Retransmissions after RNR NAKs (0-6; 7 is infinite).
    pub rnr_retry: u8,
}

/// A work request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// SEND.
    Send {
        /// The message.
        payload: Vec<u8>,
        /// Immediate data.
        imm: Option<u32>,
        /// SEND with Invalidate: the responder's rkey to invalidate.
        inv: Option<u32>,
    },
    /// RDMA WRITE.
    Write {
        /// Remote address.
        va: u64,
        /// Remote key.
        rkey: u32,
        /// The message.
        payload: Vec<u8>,
        /// RDMA WRITE with immediate: the data its receive completes with.
        imm: Option<u32>,
    },
    /// RDMA READ.
    Read {
        /// Remote address.
        va: u64,
        /// Remote key.
        rkey: u32,
        /// Bytes.
        len: u32,
    },
    /// An atomic read-modify-write of 8 bytes; its original value comes
    /// back.
    Atomic {
        /// Remote address.
        va: u64,
        /// Remote key.
        rkey: u32,
        /// What it does there.
        op: AtomicOp,
    },
    /// ATOMIC WRITE (IBA 1.5): 8 bytes stored at once.
    AtomicWrite {
        /// Remote address.
        va: u64,
        /// Remote key.
        rkey: u32,
        /// The bytes, in memory order.
        value: [u8; 8],
    },
    /// FLUSH (IBA 1.5) of a remote range or MR to a placement.
    Flush {
        /// Remote address.
        va: u64,
        /// Remote key.
        rkey: u32,
        /// Bytes (of a range; ignored for a whole MR).
        len: u32,
        /// FETH: selectivity level (bits 5-4), placement type (bits 3-0).
        feth: u32,
    },
}

/// A completed work request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The request's ID.
    pub wr_id: u64,
    /// How it ended.
    pub status: Status,
    /// A READ's data, an atomic's original value (8 bytes, little endian).
    pub data: Vec<u8>,
}

/// A request sent and not yet completed.
#[derive(Debug)]
struct Pending {
    wr_id: u64,
    req: Request,
    /// Its first PSN; a READ's responses take its PSNs from there.
    psn: u32,
    /// PSNs it takes (a READ: one per response packet).
    npsn: u32,
    /// A READ's data (sized at its first response); an atomic's original
    /// value once answered.
    got: Vec<u8>,
    /// A READ's responses taken, by position: they are placed where their
    /// PSN says, so a response that comes late is not lost.
    filled: Vec<bool>,
    /// A READ's first response not taken yet.
    first_missing: u32,
    /// Answered (a READ's last response, an atomic's ACK), to complete in
    /// order once the requests before it have.
    answered: bool,
}

impl Pending {
    fn last_psn(&self) -> u32 {
        psn_add(self.psn, self.npsn - 1)
    }

    /// Whether an ACK alone completes it (READs and atomics wait for their
    /// responses).
    fn acked_by_ack(&self) -> bool {
        matches!(self.req, Request::Send { .. } | Request::Write { .. })
    }

    /// Whether an empty READ response completes it: the answer IBA 1.5
    /// gives ATOMIC WRITE and FLUSH (rxe's too).
    fn acked_by_empty_response(&self) -> bool {
        matches!(
            self.req,
            Request::AtomicWrite { .. } | Request::Flush { .. }
        )
    }
}

/// Packets between AckReqs within a long message (the last packet of
/// every message asks too).
const ACK_REQ_EVERY: u32 = 64;

/// PSNs in flight at most: what one loss costs to send again.
const WINDOW: u32 = 128;

/// Timeouts in a row double the transport timer up to 2^this times.
const MAX_BACKOFF: u8 = 3;

/// The requester's side of one RC QP.
#[derive(Debug)]
pub struct Requester {
    cfg: Config,
    next_psn: u32,
    /// The oldest PSN not acknowledged yet.
    una: u32,
    /// PSNs before this were sent at least once.
    sent_to: u32,
    pending: VecDeque<Pending>,
    retries_left: u8,
    rnr_left: u8,
    /// Transport timeouts since the last progress or sequence NAK: each
    /// doubles the next wait (up to 2^[`MAX_BACKOFF`] times the timeout).
    /// Its own count, not what `retries_left` lost: a NAK (which also costs
    /// a retry) proves the responder alive, so the waiting starts over.
    timeouts_in_a_row: u8,
    /// When the transport timer runs out (µs), if it runs.
    deadline: Option<u64>,
    /// When an RNR wait ends and sending resumes from `rnr_psn`.
    rnr_until: Option<(u64, u32)>,
    /// The QP is in error: nothing more is sent.
    error: bool,
    /// The PSN of the sequence NAK last answered, until progress: the same
    /// NAK again (duplicated on the way) is not answered twice.
    nak_psn: Option<u32>,
    /// The head READ's rest was asked for again after a gap in its
    /// responses: until it completes or the timer runs out, a gap asks
    /// nothing more (the old responses still on their way interleave with
    /// the new ones, and each would ask again: a storm of replays).
    read_asked_again: bool,
    /// The PSN a run-out transport timer sent again alone, until an ACK
    /// says what became of it and what followed it.
    probe: Option<u32>,
    seen: Seen,
}

fn rc(op: Op) -> Opcode {
    Opcode {
        transport: Transport::Rc,
        op,
    }
}

impl Requester {
    /// A requester whose first PSN is `psn`.
    pub fn new(cfg: Config, psn: u32) -> Self {
        Requester {
            cfg,
            next_psn: psn_add(psn, 0),
            una: psn_add(psn, 0),
            sent_to: psn_add(psn, 0),
            pending: VecDeque::new(),
            retries_left: cfg.retry_cnt.min(7),
            rnr_left: cfg.rnr_retry.min(7),
            timeouts_in_a_row: 0,
            deadline: None,
            rnr_until: None,
            error: false,
            nak_psn: None,
            read_asked_again: false,
            probe: None,
            seen: Seen::default(),
        }
    }

    /// What it saw since this was last called.
    pub fn take_seen(&mut self) -> Seen {
        std::mem::take(&mut self.seen)
    }

    /// Whether the QP went to error.
    pub fn in_error(&self) -> bool {
        self.error
    }

    /// Requests sent and not completed.
    pub fn outstanding(&self) -> usize {
        self.pending.len()
    }

    /// When [`Requester::on_timer`] has something to do, if ever.
    pub fn next_deadline(&self) -> Option<u64> {
        match self.rnr_until {
            Some((t, _)) => Some(t),
            None => self.deadline,
        }
    }

    /// Sends work request `req` (`wr_id`) at time `now` (as far as the
    /// window lets it: the rest goes as acknowledgements come). On a QP in
    /// error it completes flushed at once.
    pub fn post(
        &mut self,
        wr_id: u64,
        req: Request,
        now: u64,
        out: &mut Vec<Packet>,
        done: &mut Vec<Completion>,
    ) {
        if self.error {
            done.push(Completion {
                wr_id,
                status: Status::Flushed,
                data: Vec::new(),
            });
            return;
        }
        let psn = self.next_psn;
        let npsn = match &req {
            Request::Send { payload, .. } | Request::Write { payload, .. } => {
                segments_of(&req, payload.len() as u64, self.cfg.mtu).count() as u32
            }
            Request::Read { len, .. } => {
                u64::from(*len).div_ceil(u64::from(self.cfg.mtu)).max(1) as u32
            }
            Request::Atomic { .. } | Request::AtomicWrite { .. } | Request::Flush { .. } => 1,
        };
        self.next_psn = psn_add(psn, npsn);
        self.pending.push_back(Pending {
            wr_id,
            req,
            psn,
            npsn,
            got: Vec::new(),
            filled: Vec::new(),
            first_missing: 0,
            answered: false,
        });
        // An RNR wait holds back what comes after; the wait sends it.
        if self.rnr_until.is_none() {
            self.pump(self.sent_to, out);
            self.deadline.get_or_insert(now + self.timeout());
        }
    }

    /// Sends the pending packets from PSN `from` up to the window's end.
    fn pump(&mut self, from: u32, out: &mut Vec<Packet>) {
        let mut end = psn_add(self.una, WINDOW);
        if psn_diff(end, self.next_psn) > 0 {
            end = self.next_psn;
        }
        for i in 0..self.pending.len() {
            self.emit(i, from, end, out);
        }
        if psn_diff(end, self.sent_to) > 0 {
            self.sent_to = end;
        }
    }

    fn timeout(&self) -> u64 {
        ack_timeout_us(self.cfg.timeout).unwrap_or(u64::MAX / 2)
    }

    /// The packets of pending request `i` with PSNs in `[from, end)`; a
    /// READ's request if its first missing response is in there.
    fn emit(&self, i: usize, from: u32, end: u32, out: &mut Vec<Packet>) {
        let p = &self.pending[i];
        let in_range = |psn: u32| psn_diff(psn, from) >= 0 && psn_diff(psn, end) < 0;
        let dest = self.cfg.dest_qp;
        match &p.req {
            Request::Send { payload, .. } | Request::Write { payload, .. } => {
                let segs = segments_of(&p.req, payload.len() as u64, self.cfg.mtu);
                for (n, s) in segs.enumerate() {
                    let psn = psn_add(p.psn, n as u32);
                    if !in_range(psn) {
                        continue;
                    }
                    let mut pkt = message_packet(&p.req, Transport::Rc, dest, psn, s);
                    pkt.ack_req = pkt.opcode.shape().last || (n as u32 + 1) % ACK_REQ_EVERY == 0;
                    out.push(pkt);
                }
            }
            Request::Read { va, rkey, len } => {
                // The rest of the data, from the first missing response on
                // (none for a READ whose responses all came, waiting for
                // those before it to complete).
                let have = p.first_missing;
                let at = psn_add(p.psn, have);
                if have >= p.npsn || !in_range(at) {
                    return;
                }
                let done = u64::from(have) * u64::from(self.cfg.mtu);
                let mut pkt = Packet::new(rc(Op::ReadRequest), dest, at);
                pkt.ack_req = true;
                let rest = u64::from(*len).saturating_sub(done) as u32;
                pkt.reth = Some(reth(va + done, *rkey, rest));
                out.push(pkt);
            }
            // One packet each, asking for its answer.
            _ if !in_range(p.psn) => {}
            Request::Atomic { va, rkey, op } => {
                let (op, swap_add, compare) = match *op {
                    AtomicOp::FetchAdd { add } => (Op::FetchAdd, add, 0),
                    AtomicOp::CompareSwap { compare, swap } => (Op::CompareSwap, swap, compare),
                };
                let mut pkt = Packet::new(rc(op), dest, p.psn);
                pkt.ack_req = true;
                pkt.atomic_eth = Some(AtomicEth {
                    va: U64::new(*va),
                    rkey: U32::new(*rkey),
                    swap_add: U64::new(swap_add),
                    compare: U64::new(compare),
                });
                out.push(pkt);
            }
            Request::AtomicWrite { va, rkey, value } => {
                let mut pkt = Packet::new(rc(Op::AtomicWrite), dest, p.psn);
                pkt.ack_req = true;
                pkt.reth = Some(reth(*va, *rkey, 8));
                pkt.payload = value.to_vec();
                out.push(pkt);
            }
            Request::Flush {
                va,
                rkey,
                len,
                feth,
            } => {
                let mut pkt = Packet::new(rc(Op::Flush), dest, p.psn);
                pkt.ack_req = true;
                pkt.reth = Some(reth(*va, *rkey, *len));
                pkt.feth = Some(*feth);
                out.push(pkt);
            }
        }
    }

    /// Sends again from PSN `from` (the oldest unacknowledged one, or a
    /// NAK's), as far as the window goes.
    fn resend_from(&mut self, from: u32, now: u64, out: &mut Vec<Packet>) {
        // Nothing before the oldest unacknowledged PSN needs sending again,
        // and nothing after it may be skipped: a READ's missing responses
        // stay missing whatever a later NAK says.
        let from = if psn_diff(from, self.una) > 0 {
            self.una
        } else {
            from
        };
        self.probe = None;
        let (before, sent_to) = (out.len(), self.sent_to);
        self.pump(from, out);
        let again = out[before..]
            .iter()
            .filter(|p| psn_diff(p.psn, sent_to) < 0)
            .count();
        self.seen.resent += again as u32;
        self.deadline = Some(now + self.timeout());
    }

    /// Completes the requests an acknowledgement of `psn` covers (SENDs
    /// and WRITEs up to `psn`, or before it if `before`): true if any did.
    fn retire(&mut self, psn: u32, before: bool, done: &mut Vec<Completion>) -> bool {
        let mut any = false;
        while let Some(p) = self.pending.front() {
            let d = psn_diff(psn, p.last_psn());
            if !p.acked_by_ack() || d < 0 || (before && d == 0) {
                break;
            }
            let p = self.pending.pop_front().expect("front exists");
            self.una = psn_add(p.last_psn(), 1);
            done.push(Completion {
                wr_id: p.wr_id,
                status: Status::Success,
                data: Vec::new(),
            });
            any = true;
        }
        any
    }

    /// An acknowledgement of PSN `psn` (and all before it): the oldest
    /// unacknowledged PSN moves past it, within the head request too.
    fn acked(&mut self, psn: u32) -> bool {
        let Some(p) = self.pending.front() else {
            return false;
        };
        // Only a SEND's or WRITE's packets are acknowledged one by one.
        if !p.acked_by_ack() || psn_diff(psn, self.una) < 0 {
            return false;
        }
        self.una = psn_add(psn, 1);
        true
    }

    fn progress(&mut self, now: u64) {
        self.nak_psn = None;
        self.probe = None;
        self.retries_left = self.cfg.retry_cnt.min(7);
        self.rnr_left = self.cfg.rnr_retry.min(7);
        self.timeouts_in_a_row = 0;
        self.deadline = (!self.pending.is_empty()).then(|| now + self.timeout());
    }

    /// The head request fails with `status`; the rest are flushed and the
    /// QP is in error.
    fn fail(&mut self, status: Status, done: &mut Vec<Completion>) {
        for (n, p) in self.pending.drain(..).enumerate() {
            done.push(Completion {
                wr_id: p.wr_id,
                status: if n == 0 { status } else { Status::Flushed },
                data: Vec::new(),
            });
        }
        self.error = true;
        self.deadline = None;
        self.rnr_until = None;
    }

    /// Takes a response from the responder at time `now`.
    pub fn on_packet(
        &mut self,
        pkt: &Packet,
        now: u64,
        out: &mut Vec<Packet>,
        done: &mut Vec<Completion>,
    ) {
        if self.error || pkt.opcode.transport != Transport::Rc || pkt.opcode.op.shape().request {
            return;
        }
        let psn = pkt.psn;
        // A response to something not pending (late, duplicated) says nothing.
        let Some(head) = self.pending.front() else {
            return;
        };
        if psn_diff(psn, head.psn) < -1 || psn_diff(psn, self.next_psn) >= 0 {
            return;
        }
        match pkt.opcode.op {
            Op::Acknowledge => {
                let Some(aeth) = pkt.aeth else { return };
                match aeth.syndrome & syndrome::KIND {
                    syndrome::ACK => {
                        let retired = self.retire(psn, false, done);
                        if retired | self.acked(psn) {
                            let probe = self.probe;
                            self.progress(now);
                            match probe {
                                // The responder took the timer's probe as
                                // new: what followed it was lost, go back.
                                Some(p) if p == psn => self.resend_from(self.una, now, out),
                                // The window moved (an ACK past a probe: the
                                // responder was slow, not deaf, and what
                                // followed the probe is still on its way):
                                // what it now lets go.
                                _ if self.rnr_until.is_none() => self.pump(self.sent_to, out),
                                _ => {}
                            }
                        }
                        // An ACK of a request after a READ or atomic still
                        // unanswered means its responses were lost: ask
                        // again (a duplicate's ACK of the READ's own last
                        // PSN says nothing new).
                        if let Some(p) = self.pending.front() {
                            if !p.acked_by_ack() && psn_diff(psn, p.last_psn()) > 0 {
                                self.resend_from(p.psn, now, out);
                            }
                        }
                    }
                    syndrome::RNR_NAK => {
                        // The same RNR NAK again (duplicated on the way).
                        if self.rnr_until.is_some_and(|(_, p)| p == psn) {
                            return;
                        }
                        self.retire(psn, true, done);
                        self.seen.rnr_naks += 1;
                        if self.rnr_left == 0 {
                            return self.fail(Status::RnrRetryExceeded, done);
                        }
                        if self.cfg.rnr_retry < 7 {
                            self.rnr_left -= 1;
                        }
                        let wait = rnr_delay_us(aeth.syndrome & 0x1f);
                        self.rnr_until = Some((now + wait, psn));
                        // The responder answered: timeouts start over.
                        self.timeouts_in_a_row = 0;
                        self.deadline = None;
                    }
                    _ => {
                        // A NAK acknowledges what came before its PSN:
                        // progress, if that is more than was known.
                        let before = psn_add(psn, super::PSN_MASK);
                        if self.retire(psn, true, done) | self.acked(before) {
                            self.progress(now);
                        }
                        let status = match aeth.syndrome {
                            syndrome::NAK_PSN_SEQ_ERR => {
                                if self.nak_psn == Some(psn) {
                                    return;
                                }
                                self.nak_psn = Some(psn);
                                if self.retries_left == 0 {
                                    return self.fail(Status::RetryExceeded, done);
                                }
                                self.retries_left -= 1;
                                self.timeouts_in_a_row = 0;
                                return self.resend_from(psn, now, out);
                            }
                            syndrome::NAK_REMOTE_ACCESS => Status::RemoteAccess,
                            syndrome::NAK_REMOTE_OP => Status::RemoteOperation,
                            _ => Status::RemoteInvalidRequest,
                        };
                        self.fail(status, done);
                    }
                }
            }
            Op::ReadResponseFirst
            | Op::ReadResponseMiddle
            | Op::ReadResponseLast
            | Op::ReadResponseOnly => self.read_response(pkt, now, out, done),
            Op::AtomicAcknowledge => {
                // Implicitly acknowledges what came before it.
                self.retire(psn, true, done);
                let orig = pkt.atomic_ack.unwrap_or(0);
                let Some(p) = self.pending.iter_mut().find(|p| p.psn == psn) else {
                    return;
                };
                if !matches!(p.req, Request::Atomic { .. }) || p.answered {
                    return;
                }
                p.got = orig.to_le_bytes().to_vec();
                p.answered = true;
                self.complete_answered(done);
                self.progress(now);
                self.pump(self.sent_to, out);
            }
            _ => {}
        }
    }

    /// Completes the answered requests at the head, in order.
    fn complete_answered(&mut self, done: &mut Vec<Completion>) {
        while self.pending.front().is_some_and(|p| p.answered) {
            self.read_asked_again = false;
            let p = self.pending.pop_front().expect("front exists");
            self.una = psn_add(p.last_psn(), 1);
            done.push(Completion {
                wr_id: p.wr_id,
                status: Status::Success,
                data: p.got,
            });
        }
        // A READ at the head (new there, or just given a response) may
        // hold responses past its first hole: what is unacknowledged
        // starts at that hole.
        if let Some(f) = self.pending.front() {
            if matches!(f.req, Request::Read { .. }) {
                let hole = psn_add(f.psn, f.first_missing);
                if psn_diff(hole, self.una) > 0 {
                    self.una = hole;
                }
            }
        }
    }

    fn read_response(
        &mut self,
        pkt: &Packet,
        now: u64,
        out: &mut Vec<Packet>,
        done: &mut Vec<Completion>,
    ) {
        self.retire(pkt.psn, true, done);
        if let Some(p) = self
            .pending
            .iter_mut()
            .find(|p| p.psn == pkt.psn && p.acked_by_empty_response())
        {
            // ATOMIC WRITE's and FLUSH's answer: one empty response.
            if pkt.opcode.op != Op::ReadResponseOnly || !pkt.payload.is_empty() || p.answered {
                return;
            }
            p.answered = true;
            self.complete_answered(done);
            self.progress(now);
            return self.pump(self.sent_to, out);
        }
        let mtu = self.cfg.mtu as usize;
        // The READ whose PSNs it has.
        let Some(i) = self.pending.iter().position(|p| {
            let k = psn_diff(pkt.psn, p.psn);
            matches!(p.req, Request::Read { .. }) && k >= 0 && (k as u32) < p.npsn
        }) else {
            return;
        };
        let p = &mut self.pending[i];
        let Request::Read { len, .. } = p.req else {
            return;
        };
        // Its place in the READ's data, and what it must carry there (a
        // responder answering a READ asked again from its middle may start
        // with a FIRST packet: only the end is checked).
        let (n, k) = (p.npsn as usize, psn_diff(pkt.psn, p.psn) as usize);
        let at = k * mtu;
        let expect = (len as usize).saturating_sub(at).min(mtu);
        if pkt.payload.len() != expect || pkt.opcode.op.shape().last != (k + 1 == n) {
            return;
        }
        if p.filled.is_empty() {
            p.filled = vec![false; n];
            p.got = vec![0; len as usize];
        }
        if p.filled[k] {
            return;
        }
        p.got[at..at + expect].copy_from_slice(&pkt.payload);
        p.filled[k] = true;
        while p.filled.get(p.first_missing as usize) == Some(&true) {
            p.first_missing += 1;
        }
        p.answered = p.first_missing as usize == n;
        // Its last response came, or a later READ's, and something before
        // it did not: lost, or late.
        let gap = !p.answered && (k + 1 == n || i > 0);
        self.complete_answered(done);
        self.progress(now);
        // The head READ's rest is asked for again at once, once until it
        // completes or the timer runs out (the responses of the first
        // answer still on their way must not each ask again: a storm of
        // replays).
        let head_gap = gap
            && self
                .pending
                .front()
                .is_some_and(|f| matches!(f.req, Request::Read { .. }) && !f.answered);
        if head_gap && !self.read_asked_again {
            self.read_asked_again = true;
            if self.retries_left == 0 {
                return self.fail(Status::RetryExceeded, done);
            }
            self.retries_left -= 1;
            let before = out.len();
            self.emit(0, self.una, psn_add(self.una, 1), out);
            self.seen.resent += (out.len() - before) as u32;
        }
        self.pump(self.sent_to, out);
    }

    /// Runs the timers at time `now`: an RNR wait that ended sends again;
    /// the transport timer, run out, sends again from the oldest
    /// unacknowledged PSN or, with no retry left, fails the request.
    pub fn on_timer(&mut self, now: u64, out: &mut Vec<Packet>, done: &mut Vec<Completion>) {
        if self.error {
            return;
        }
        if let Some((until, psn)) = self.rnr_until {
            if now >= until {
                self.rnr_until = None;
                self.resend_from(psn, now, out);
            }
            return;
        }
        if self.pending.is_empty() {
            self.deadline = None;
            return;
        }
        if self.deadline.is_some_and(|t| now >= t) {
            self.read_asked_again = false;
            if self.retries_left == 0 {
                return self.fail(Status::RetryExceeded, done);
            }
            self.retries_left -= 1;
            // Only the oldest unacknowledged packet, asking for an ACK:
            // nothing was heard for a whole timeout, so the path or the
            // responder is lost or slow, and the window sent again at once
            // would only add to a slow responder's backlog (a TCG guest's
            // rxe fell behind for good that way). Its ACK tells which: an
            // ACK of the probe itself sends the rest again (go-back-N), an
            // ACK past it only what the window newly lets go.
            let (end, before) = (psn_add(self.una, 1), out.len());
            for i in 0..self.pending.len() {
                self.emit(i, self.una, end, out);
            }
            self.seen.resent += (out.len() - before) as u32;
            if let Some(p) = out.last_mut() {
                p.ack_req = true;
                self.probe = Some(p.psn);
            }
            // Each timeout in a row waits twice as long, up to eight times
            // the timeout (IB's timeout is the least a requester waits): a
            // responder merely slow (rxe in a busy TCG guest) gets time to
            // answer before the retries run out.
            self.timeouts_in_a_row = self.timeouts_in_a_row.saturating_add(1);
            let shift = self.timeouts_in_a_row.min(MAX_BACKOFF);
            self.deadline = Some(now + (self.timeout() << shift));
        }
    }
}

fn reth(va: u64, rkey: u32, len: u32) -> Reth {
    Reth {
        va: U64::new(va),
        rkey: U32::new(rkey),
        dma_len: U32::new(len),
    }
}

/// The packet of segment `seg` of SEND or WRITE `req` on transport `t`
/// to QP `dest` with PSN `psn`: its part of the payload, the RETH in a
/// WRITE's first packet, immediate data or IETH in the last.
pub(super) fn message_packet(
    req: &Request,
    t: Transport,
    dest: u32,
    psn: u32,
    seg: Segment,
) -> Packet {
    let mut pkt = Packet::new(
        Opcode {
            transport: t,
            op: seg.op,
        },
        dest,
        psn,
    );
    let shape = pkt.opcode.shape();
    let whole = match req {
        Request::Send { payload, .. } | Request::Write { payload, .. } => &payload[..],
        _ => &[],
    };
    let at = seg.offset as usize;
    pkt.payload = whole[at..at + seg.len as usize].to_vec();
    match req {
        Request::Write { va, rkey, imm, .. } => {
            if shape.reth {
                pkt.reth = Some(reth(*va, *rkey, whole.len() as u32));
            }
            if shape.imm {
                pkt.imm = *imm;
            }
        }
        Request::Send { imm, inv, .. } => {
            if shape.imm {
                pkt.imm = *imm;
            }
            if shape.ieth {
                pkt.ieth = *inv;
            }
        }
        _ => {}
    }
    pkt
}

/// The segments of SEND or WRITE `req` of `len` bytes at path MTU `mtu`.
pub(super) fn segments_of(req: &Request, len: u64, mtu: u32) -> impl Iterator<Item = Segment> {
    let msg = match req {
        Request::Send { imm, inv, .. } => Message::Send {
            imm: imm.is_some(),
            inv: inv.is_some(),
        },
        Request::Write { imm, .. } => Message::Write { imm: imm.is_some() },
        _ => Message::Write { imm: false },
    };
    segments(msg, len, mtu)
}
