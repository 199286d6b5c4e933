// SPDX-License-Identifier: GPL-2.0
//! A requester and a responder over a link that loses, duplicates and
//! reorders packets, with a simulated clock: what IB promises must hold.

use super::requester::{Completion, Config, Request, Requester};
use super::responder::{Refusal, Responder, SendPart, Target};
use super::*;
use crate::packet::{syndrome, Op, Opcode, Packet, Reth, Transport};

/// xorshift64*: a reproducible coin for the link's faults.
struct Coin(u64);

impl Coin {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// True `percent` times in a hundred.
    fn percent(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// A link: each packet is lost, doubled or held back (delivered after the
/// next ones) as the percentages say; every packet passes through its
/// bytes (emitted and parsed).
struct Link {
    coin: Coin,
    drop: u64,
    dup: u64,
    hold: u64,
    held: Vec<Packet>,
}

impl Link {
    fn new(seed: u64, drop: u64, dup: u64, hold: u64) -> Self {
        Link {
            coin: Coin(seed | 1),
            drop,
            dup,
            hold,
            held: Vec::new(),
        }
    }

    fn carry(&mut self, sent: Vec<Packet>) -> Vec<Packet> {
        let mut out = Vec::new();
        for p in sent {
            let mut bytes = Vec::new();
            p.emit(&mut bytes).expect("well formed");
            let p = Packet::parse(&bytes).expect("parses back");
            if self.coin.percent(self.drop) {
                continue;
            }
            if self.coin.percent(self.dup) {
                out.push(p.clone());
            }
            if self.coin.percent(self.hold) {
                self.held.push(p);
                continue;
            }
            out.push(p);
        }
        // What was held back comes after the packets sent since.
        if !self.held.is_empty() && self.coin.percent(50) {
            out.append(&mut self.held);
        }
        out
    }
}

/// The responder's memory (addresses 0 to `MEM`) and receives, counting
/// every byte written.
struct Mem {
    bytes: Vec<u8>,
    writes: Vec<u8>,
    received: Vec<Vec<u8>>,
    receives: u32,
    rnr_first: u32,
    atomics: u32,
    /// The rkeys SENDs with Invalidate named, as they completed.
    invalidated: Vec<u32>,
    /// Receives WRITEs with immediate completed: length, immediate data.
    write_imms: Vec<(u32, u32)>,
    /// FLUSHes executed.
    flushes: u32,
}

const RKEY: u32 = 0x1234;
const MEM: usize = 0x50_0000;

impl Default for Mem {
    fn default() -> Self {
        Mem {
            bytes: (0..MEM).map(|i| (i % 251) as u8).collect(),
            writes: vec![0; MEM],
            received: Vec::new(),
            receives: 0,
            rnr_first: 0,
            atomics: 0,
            invalidated: Vec::new(),
            write_imms: Vec::new(),
            flushes: 0,
        }
    }
}

/// The range of `len` bytes at `va` in the memory.
fn span(va: u64, len: usize) -> Result<std::ops::Range<usize>, Refusal> {
    let start = usize::try_from(va).map_err(|_| Refusal::Access)?;
    let end = start
        .checked_add(len)
        .filter(|&e| e <= MEM)
        .ok_or(Refusal::Access)?;
    Ok(start..end)
}

impl Target for Mem {
    fn receive(&mut self, part: SendPart<'_>) -> Result<(), Refusal> {
        let (first, offset, data) = (part.first, part.offset, part.data);
        if first {
            if self.rnr_first > 0 {
                self.rnr_first -= 1;
                return Err(Refusal::NoReceive);
            }
            if self.receives == 0 {
                return Err(Refusal::NoReceive);
            }
            self.receives -= 1;
            self.received.push(Vec::new());
        }
        let m = self.received.last_mut().ok_or(Refusal::Invalid)?;
        assert_eq!(m.len() as u64, offset, "in order, once");
        m.extend_from_slice(data);
        if part.last {
            self.invalidated.extend(part.invalidate);
        }
        Ok(())
    }

    fn write(&mut self, va: u64, rkey: u32, data: &[u8]) -> Result<(), Refusal> {
        if rkey != RKEY {
            return Err(Refusal::Access);
        }
        let r = span(va, data.len())?;
        self.bytes[r.clone()].copy_from_slice(data);
        for n in &mut self.writes[r] {
            *n = n.saturating_add(1);
        }
        Ok(())
    }

    fn read(&mut self, va: u64, rkey: u32, len: u32) -> Result<Vec<u8>, Refusal> {
        if rkey != RKEY {
            return Err(Refusal::Access);
        }
        Ok(self.bytes[span(va, len as usize)?].to_vec())
    }

    fn write_imm(&mut self, len: u32, imm: u32, _: bool) -> Result<(), Refusal> {
        if self.rnr_first > 0 {
            self.rnr_first -= 1;
            return Err(Refusal::NoReceive);
        }
        if self.receives == 0 {
            return Err(Refusal::NoReceive);
        }
        self.receives -= 1;
        self.write_imms.push((len, imm));
        Ok(())
    }

    fn atomic(&mut self, va: u64, rkey: u32, op: AtomicOp) -> Result<u64, Refusal> {
        if rkey != RKEY {
            return Err(Refusal::Access);
        }
        self.atomics += 1;
        let old = u64::from_le_bytes(self.read(va, rkey, 8)?.try_into().expect("8 bytes"));
        let new = match op {
            AtomicOp::FetchAdd { add } => old.wrapping_add(add),
            AtomicOp::CompareSwap { compare, swap } if old == compare => swap,
            AtomicOp::CompareSwap { .. } => old,
        };
        self.write(va, rkey, &new.to_le_bytes())?;
        Ok(old)
    }

    fn atomic_write(&mut self, va: u64, rkey: u32, value: [u8; 8]) -> Result<(), Refusal> {
        self.atomics += 1;
        self.write(va, rkey, &value)
    }

    fn flush(&mut self, va: u64, rkey: u32, len: u32, _: u32) -> Result<(), Refusal> {
        if rkey != RKEY {
            return Err(Refusal::Access);
        }
        span(va, len as usize)?;
        self.flushes += 1;
        Ok(())
    }
}

struct Run {
    req: Requester,
    resp: Responder,
    mem: Mem,
    there: Link,
    back: Link,
    now: u64,
    done: Vec<Completion>,
    /// Packets sent by the requester.
    sent: usize,
}

impl Run {
    fn new(cfg: Config, psn: u32, there: Link, back: Link) -> Self {
        Run {
            req: Requester::new(cfg, psn),
            resp: Responder::new(1, cfg.mtu, psn, 1),
            mem: Mem::default(),
            there,
            back,
            now: 0,
            done: Vec::new(),
            sent: 0,
        }
    }

    fn post(&mut self, wr_id: u64, r: Request) {
        let mut out = Vec::new();
        self.req.post(wr_id, r, self.now, &mut out, &mut self.done);
        self.deliver(out);
    }

    fn deliver(&mut self, mut out: Vec<Packet>) {
        // Back and forth until nothing moves; then time passes.
        while !out.is_empty() {
            self.sent += out.len();
            let mut answers = Vec::new();
            for p in self.there.carry(std::mem::take(&mut out)) {
                self.resp.on_packet(&p, &mut self.mem, &mut answers);
            }
            for p in self.back.carry(answers) {
                self.req.on_packet(&p, self.now, &mut out, &mut self.done);
            }
        }
    }

    /// Runs until `n` completions or `limit` µs of simulated time.
    fn until(&mut self, n: usize, limit: u64) {
        while self.done.len() < n && self.now < limit {
            let Some(t) = self.req.next_deadline() else {
                // Held-back packets still in the links.
                let (a, b) = (
                    std::mem::take(&mut self.there.held),
                    std::mem::take(&mut self.back.held),
                );
                if a.is_empty() && b.is_empty() {
                    break;
                }
                let mut answers = Vec::new();
                for p in a {
                    self.resp.on_packet(&p, &mut self.mem, &mut answers);
                }
                let mut out = Vec::new();
                for p in b.into_iter().chain(self.back.carry(answers)) {
                    self.req.on_packet(&p, self.now, &mut out, &mut self.done);
                }
                self.deliver(out);
                continue;
            };
            self.now = self.now.max(t);
            let mut out = Vec::new();
            self.req.on_timer(self.now, &mut out, &mut self.done);
            self.deliver(out);
        }
    }
}

fn cfg(retry_cnt: u8, rnr_retry: u8) -> Config {
    Config {
        dest_qp: 2,
        mtu: 1024,
        timeout: 10,
        retry_cnt,
        rnr_retry,
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect()
}

#[test]
fn psns_compare_within_half_the_space() {
    assert_eq!(psn_add(PSN_MASK, 1), 0);
    assert_eq!(psn_add(PSN_MASK - 1, 3), 1);
    assert_eq!(psn_diff(0, PSN_MASK), 1);
    assert_eq!(psn_diff(PSN_MASK, 0), -1);
    assert_eq!(psn_diff(5, 5), 0);
    assert_eq!(psn_diff(1 << 23, 0), -(1 << 23));
    assert_eq!(psn_diff((1 << 23) - 1, 0), (1 << 23) - 1);
    assert_eq!(ack_timeout_us(0), None);
    assert_eq!(ack_timeout_us(14), Some(67_108));
}

#[test]
fn a_lossy_link_delivers_every_message_once_and_intact() {
    for seed in 1..=3 {
        // 10 % lost, some doubled and reordered, each way; PSNs wrap.
        let mut r = Run::new(
            cfg(7, 7),
            PSN_MASK - 300,
            Link::new(seed, 10, 5, 5),
            Link::new(seed * 31, 10, 5, 5),
        );
        r.mem.receives = 4;
        let mib = pattern(1 << 20, seed as u8);
        r.post(
            1,
            Request::Write {
                va: 0x10_0000,
                rkey: RKEY,
                payload: mib.clone(),
                imm: None,
            },
        );
        r.post(
            2,
            Request::Send {
                payload: pattern(300_000, 9),
                imm: Some(7),
                inv: None,
            },
        );
        r.post(
            3,
            Request::Read {
                va: 0x10_0000,
                rkey: RKEY,
                len: 1 << 20,
            },
        );
        r.post(
            4,
            Request::Atomic {
                va: 0x40_0000,
                rkey: RKEY,
                op: AtomicOp::FetchAdd { add: 5 },
            },
        );
        r.post(
            5,
            Request::Atomic {
                va: 0x40_0000,
                rkey: RKEY,
                op: AtomicOp::FetchAdd { add: 5 },
            },
        );
        r.until(5, 600_000_000);
        let ids: Vec<_> = r.done.iter().map(|c| (c.wr_id, c.status)).collect();
        assert_eq!(
            ids,
            (1..=5).map(|i| (i, Status::Success)).collect::<Vec<_>>(),
            "seed {seed}: in order, all done"
        );
        let w = 0x10_0000..0x10_0000 + mib.len();
        assert!(
            r.mem.bytes[w.clone()] == mib[..],
            "seed {seed}: the WRITE is intact"
        );
        assert!(
            r.mem.writes[w].iter().all(|&n| n == 1),
            "seed {seed}: no byte twice"
        );
        // The atomic cell once per atomic.
        assert!(
            r.mem.writes[0x40_0000..0x40_0008].iter().all(|&n| n == 2),
            "seed {seed}"
        );
        assert_eq!(
            r.mem.received,
            [pattern(300_000, 9)],
            "seed {seed}: the SEND once"
        );
        assert!(r.done[2].data == mib, "seed {seed}: the READ intact");
        assert_eq!(r.mem.atomics, 2, "seed {seed}: each atomic ran once");
        // The first saw the cell's old contents, the second the first's sum.
        let first = u64::from_le_bytes(r.done[3].data.clone().try_into().expect("8"));
        let second = u64::from_le_bytes(r.done[4].data.clone().try_into().expect("8"));
        assert_eq!(second, first.wrapping_add(5), "seed {seed}");
        assert!(
            r.sent > 1024 + 293 + 3,
            "seed {seed}: packets were sent again"
        );
        // And the counters saw it: what was sent again, the gaps, the
        // duplicates.
        let (asked, answered) = (r.req.take_seen(), r.resp.take_seen());
        assert!(asked.resent > 0, "seed {seed}: {asked:?}");
        assert!(answered.out_of_sequence > 0, "seed {seed}: {answered:?}");
        assert!(answered.duplicates > 0, "seed {seed}: {answered:?}");
        assert_eq!(r.req.take_seen(), Seen::default(), "taken once");
    }
}

#[test]
fn an_rnr_nak_waits_its_timer_then_succeeds() {
    let mut r = Run::new(cfg(7, 3), 0, Link::new(1, 0, 0, 0), Link::new(2, 0, 0, 0));
    r.mem.receives = 1;
    r.mem.rnr_first = 2;
    r.post(
        1,
        Request::Send {
            payload: b"hello".to_vec(),
            imm: None,
            inv: None,
        },
    );
    assert!(r.done.is_empty(), "RNR NAK'd");
    r.until(1, 10_000_000);
    assert_eq!(r.done[0].status, Status::Success);
    // Two waits of min_rnr_timer 1 (10 µs each).
    assert_eq!(r.now, 20);
    assert_eq!(r.req.take_seen().rnr_naks, 2);
    assert_eq!(r.resp.take_seen().rnr_naks, 2);
    assert_eq!(r.mem.received, [b"hello".to_vec()]);

    // rnr_retry 3: the fourth RNR NAK ends it.
    let mut r = Run::new(cfg(7, 3), 0, Link::new(1, 0, 0, 0), Link::new(2, 0, 0, 0));
    r.mem.rnr_first = 100;
    r.post(
        1,
        Request::Send {
            payload: b"x".to_vec(),
            imm: None,
            inv: None,
        },
    );
    r.until(1, 10_000_000);
    assert_eq!(r.done[0].status, Status::RnrRetryExceeded);
    assert_eq!(r.now, 30);
}

#[test]
fn a_peer_that_never_answers_ends_in_retry_exceeded() {
    for retry_cnt in [0u8, 3, 7] {
        let mut r = Run::new(
            cfg(retry_cnt, 7),
            0,
            Link::new(1, 100, 0, 0),
            Link::new(2, 0, 0, 0),
        );
        r.post(
            1,
            Request::Write {
                va: 0,
                rkey: RKEY,
                payload: vec![1; 10],
                imm: None,
            },
        );
        r.post(
            2,
            Request::Send {
                payload: vec![2; 10],
                imm: None,
                inv: None,
            },
        );
        r.until(2, u64::MAX / 4);
        assert_eq!(
            r.done.iter().map(|c| c.status).collect::<Vec<_>>(),
            [Status::RetryExceeded, Status::Flushed],
            "retry_cnt {retry_cnt}"
        );
        // Both sent once, then the oldest alone retry_cnt times (7 is
        // seven, not forever), each after the transport timer (4.096 µs *
        // 2^10), doubled for each timeout in a row up to eight times: a
        // timeout sends one packet again, not the window.
        assert_eq!(r.sent, 2 + retry_cnt as usize);
        let t = ack_timeout_us(10).expect("timer");
        let waited: u64 = (0..=retry_cnt).map(|k| t << k.min(3)).sum();
        assert_eq!(r.now, waited);
        assert!(r.req.in_error());
    }
}

#[test]
fn a_nak_fails_the_request_and_flushes_the_rest() {
    let mut r = Run::new(cfg(7, 7), 0, Link::new(1, 0, 0, 0), Link::new(2, 0, 0, 0));
    r.post(
        1,
        Request::Write {
            va: 0,
            rkey: RKEY,
            payload: vec![1; 10],
            imm: None,
        },
    );
    r.post(
        2,
        Request::Write {
            va: 0,
            rkey: 0xbad,
            payload: vec![1; 10],
            imm: None,
        },
    );
    r.post(
        3,
        Request::Send {
            payload: vec![1],
            imm: None,
            inv: None,
        },
    );
    r.until(3, 1_000_000);
    assert_eq!(
        r.done.iter().map(|c| c.status).collect::<Vec<_>>(),
        [Status::Success, Status::RemoteAccess, Status::Flushed]
    );
    assert!(r.resp.in_error());
}

/// SEND with Invalidate: its rkey rides in the last packet's IETH and
/// reaches the target with the message's end, once.
#[test]
fn a_send_with_invalidate_carries_its_rkey_to_the_end() {
    let mut r = Run::new(cfg(7, 7), 0, Link::new(1, 0, 0, 0), Link::new(2, 0, 0, 0));
    r.mem.receives = 1;
    r.post(
        1,
        Request::Send {
            payload: vec![7; 2500],
            imm: None,
            inv: Some(0xabcd),
        },
    );
    r.until(1, 10_000_000);
    assert_eq!(r.done[0].status, Status::Success);
    assert_eq!(r.mem.received, [vec![7; 2500]]);
    assert_eq!(r.mem.invalidated, [0xabcd]);
}

/// The IBA 1.5 and immediate-data requests rxe speaks, over a lossy link:
/// a WRITE with immediate data lands once and completes one receive with
/// its length and data (after an RNR NAK for want of one); COMPARE AND
/// SWAP runs once each (the second sees the first's swap and fails its
/// compare); ATOMIC WRITE stores its bytes; FLUSH is answered by an empty
/// READ response, and none of them runs twice under duplicates.
#[test]
fn write_with_imm_compare_swap_atomic_write_and_flush_arrive_once() {
    for seed in 1..=3 {
        let mut r = Run::new(
            cfg(7, 7),
            PSN_MASK - 2,
            Link::new(seed, 10, 10, 5),
            Link::new(seed * 17, 10, 10, 5),
        );
        r.mem.receives = 1;
        r.mem.rnr_first = 1;
        let data = pattern(5000, seed as u8);
        r.post(
            1,
            Request::Write {
                va: 0x1000,
                rkey: RKEY,
                payload: data.clone(),
                imm: Some(0xfeed),
            },
        );
        let cell = 0x40_0000u64;
        r.mem.bytes[cell as usize..cell as usize + 8].copy_from_slice(&3u64.to_le_bytes());
        for id in [2, 3] {
            r.post(
                id,
                Request::Atomic {
                    va: cell,
                    rkey: RKEY,
                    op: AtomicOp::CompareSwap {
                        compare: 3,
                        swap: 9,
                    },
                },
            );
        }
        r.post(
            4,
            Request::AtomicWrite {
                va: 0x40_0010,
                rkey: RKEY,
                value: *b"8 bytes!",
            },
        );
        r.post(
            5,
            Request::Flush {
                va: 0x1000,
                rkey: RKEY,
                len: 5000,
                feth: 1,
            },
        );
        r.until(5, 600_000_000);
        let ids: Vec<_> = r.done.iter().map(|c| (c.wr_id, c.status)).collect();
        assert_eq!(
            ids,
            (1..=5).map(|i| (i, Status::Success)).collect::<Vec<_>>(),
            "seed {seed}"
        );
        assert!(
            r.mem.bytes[0x1000..0x1000 + 5000] == data[..],
            "seed {seed}"
        );
        assert_eq!(
            r.mem.write_imms,
            [(5000, 0xfeed)],
            "seed {seed}: one receive"
        );
        let orig = |c: &Completion| u64::from_le_bytes(c.data.clone().try_into().expect("8"));
        assert_eq!(orig(&r.done[1]), 3, "seed {seed}: the first swaps");
        assert_eq!(orig(&r.done[2]), 9, "seed {seed}: the second sees it");
        assert_eq!(&r.mem.bytes[0x40_0010..0x40_0018], b"8 bytes!");
        // Two atomics and one ATOMIC WRITE, each once; one FLUSH.
        assert_eq!(r.mem.atomics, 3, "seed {seed}");
        assert_eq!(r.mem.flushes, 1, "seed {seed}");
        assert!(r.done[3].data.is_empty() && r.done[4].data.is_empty());
    }
}

/// A FLUSH the responder refuses (a key it does not know) fails with a
/// remote access error, and an ATOMIC WRITE of other than 8 bytes is an
/// invalid request.
#[test]
fn a_refused_flush_and_a_malformed_atomic_write_fail() {
    let mut r = Run::new(cfg(7, 7), 0, Link::new(1, 0, 0, 0), Link::new(2, 0, 0, 0));
    r.post(
        1,
        Request::Flush {
            va: 0,
            rkey: 0xbad,
            len: 8,
            feth: 1,
        },
    );
    r.until(1, 1_000_000);
    assert_eq!(r.done[0].status, Status::RemoteAccess);

    let mut resp = Responder::new(1, 1024, 0, 1);
    let mut mem = Mem::default();
    let mut p = Packet::new(
        crate::packet::Opcode {
            transport: crate::packet::Transport::Rc,
            op: crate::packet::Op::AtomicWrite,
        },
        1,
        0,
    );
    p.reth = Some(crate::packet::Reth {
        va: 0.into(),
        rkey: RKEY.into(),
        dma_len: 4.into(),
    });
    p.payload = vec![1; 4];
    let mut out = Vec::new();
    resp.on_packet(&p, &mut mem, &mut out);
    assert_eq!(
        out[0].aeth.map(|a| a.syndrome),
        Some(crate::packet::syndrome::NAK_INVALID_REQUEST)
    );
    assert_eq!(mem.atomics, 0);
}

/// A READ's responses are placed where their PSNs say: one that comes
/// late costs nothing. One lost is asked for again when the READ's last
/// response shows the hole, once: the responses of the first answer still
/// on their way, interleaved with those of the second, ask nothing more
/// (each asking again would make the responder replay the READ once more,
/// a storm that never ends on a slow peer).
#[test]
fn a_read_takes_late_responses_and_asks_again_once_for_lost_ones() {
    let mut req = Requester::new(cfg(7, 7), 100);
    let mut resp = Responder::new(1, 1024, 100, 1);
    let mut mem = Mem::default();
    let (mut out, mut done) = (Vec::new(), Vec::new());
    let read = |va| Request::Read {
        va,
        rkey: RKEY,
        len: 8 * 1024,
    };
    req.post(1, read(0x1000), 0, &mut out, &mut done);
    req.post(2, read(0x8000), 0, &mut out, &mut done);
    let mut first = Vec::new();
    for p in out.drain(..) {
        resp.on_packet(&p, &mut mem, &mut first);
    }
    assert_eq!(first.len(), 16);
    // The second READ's third response comes late, its sixth is lost; the
    // first READ's third is lost.
    let mut order: Vec<&Packet> = first[..8].iter().filter(|p| p.psn != 102).collect();
    order.extend([&first[8], &first[9], &first[11], &first[10], &first[12]]);
    order.extend(&first[14..]);
    let mut asked = Vec::new();
    for p in order {
        req.on_packet(p, 1, &mut asked, &mut done);
    }
    assert_eq!(asked.len(), 1, "the first READ's rest asked for, once");
    assert_eq!(asked[0].psn, 102);
    assert!(done.is_empty());
    let mut second = Vec::new();
    resp.on_packet(&asked[0], &mut mem, &mut second);
    assert_eq!(second.len(), 6, "responses 102 to 107 again");
    // New responses and old copies interleave.
    let mut more = Vec::new();
    for (new, old) in second.iter().zip(first[3..].iter()) {
        req.on_packet(new, 2, &mut more, &mut done);
        req.on_packet(old, 2, &mut more, &mut done);
    }
    assert!(more.is_empty(), "asked again: {more:?}");
    assert_eq!(done.len(), 1, "the first READ");
    // The second one's hole: its transport timer asks for its rest.
    let t = req.next_deadline().expect("the timer runs");
    req.on_timer(t, &mut more, &mut done);
    assert_eq!(more.len(), 1, "asked again from the hole");
    assert_eq!(more[0].psn, 113);
    let mut third = Vec::new();
    resp.on_packet(&more[0], &mut mem, &mut third);
    for p in &third {
        req.on_packet(p, t + 1, &mut out, &mut done);
    }
    let ids: Vec<_> = done.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(ids, [(1, Status::Success), (2, Status::Success)]);
    assert!(done[0].data == mem.bytes[0x1000..0x1000 + 8 * 1024]);
    assert!(done[1].data == mem.bytes[0x8000..0x8000 + 8 * 1024]);
    assert_eq!(req.take_seen().resent, 2);
}

/// A READ whose responses all came while one before it still waits asks
/// for nothing when the requester sends again (go-back-N after a NAK).
#[test]
fn a_read_complete_behind_another_is_not_asked_again() {
    let mut req = Requester::new(cfg(7, 7), 0);
    let mut resp = Responder::new(1, 1024, 0, 1);
    let mut mem = Mem::default();
    let (mut out, mut done) = (Vec::new(), Vec::new());
    for (id, va) in [(1, 0x1000), (2, 0x4000), (3, 0x8000)] {
        let read = Request::Read {
            va,
            rkey: RKEY,
            len: 2048,
        };
        req.post(id, read, 0, &mut out, &mut done);
    }
    let mut answers = Vec::new();
    for p in out.drain(..) {
        resp.on_packet(&p, &mut mem, &mut answers);
    }
    assert_eq!(answers.len(), 6);
    // The first READ's last response is lost; the second READ's come; a
    // sequence NAK of PSN 1 sends again from there.
    for p in [&answers[0], &answers[2], &answers[3]] {
        req.on_packet(p, 1, &mut out, &mut done);
    }
    out.clear();
    let nak = super::ack(2, 1, crate::packet::syndrome::NAK_PSN_SEQ_ERR, 0);
    req.on_packet(&nak, 2, &mut out, &mut done);
    let asked: Vec<_> = out
        .iter()
        .map(|p| (p.psn, p.reth.map(|r| r.dma_len.get())))
        .collect();
    assert_eq!(
        asked,
        [(1, Some(1024)), (4, Some(2048))],
        "READ 1's rest, READ 3"
    );
    let mut again = Vec::new();
    for p in out.drain(..) {
        resp.on_packet(&p, &mut mem, &mut again);
    }
    for r in again {
        req.on_packet(&r, 3, &mut out, &mut done);
    }
    let ids: Vec<_> = done.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(
        ids,
        [
            (1, Status::Success),
            (2, Status::Success),
            (3, Status::Success)
        ]
    );
}

/// A duplicate SEND or WRITE packet is acknowledged as far as the
/// responder got, whether it asks or not (IBA C9-105, as rxe does): rxe
/// replaying after a sequence NAK takes another NAK only after an ACK.
#[test]
fn a_duplicate_write_is_acknowledged_unasked() {
    let mut mem = Mem::default();
    let mut r = Responder::new(9, 1024, 100, 0);
    let packet = |op, psn| {
        let mut p = Packet::new(
            Opcode {
                transport: Transport::Rc,
                op,
            },
            7,
            psn,
        );
        p.payload = vec![0xab; 1024];
        p
    };
    let mut first = packet(Op::WriteFirst, 100);
    first.reth = Some(Reth {
        va: 0x1000.into(),
        rkey: RKEY.into(),
        dma_len: 4096.into(),
    });
    let mut out = Vec::new();
    r.on_packet(&first, &mut mem, &mut out);
    r.on_packet(&packet(Op::WriteMiddle, 101), &mut mem, &mut out);
    assert!(out.is_empty(), "nothing asked for an answer: {out:?}");
    // The requester replays from the message's start.
    r.on_packet(&first, &mut mem, &mut out);
    let acked: Vec<_> = out
        .iter()
        .map(|p| (p.opcode.op, p.psn, p.aeth.map(|a| a.syndrome)))
        .collect();
    assert_eq!(acked, [(Op::Acknowledge, 101, Some(syndrome::ACK))]);
    assert_eq!(mem.writes[0x1000], 1, "written once");
    assert_eq!(r.expected_psn(), 102);
}

/// The transport timer doubles for timeouts in a row only: a sequence NAK
/// between them (the responder is alive) starts the waiting over, though
/// it costs a retry as well.
#[test]
fn a_sequence_nak_starts_the_backoff_over() {
    let mut req = Requester::new(cfg(7, 7), 100);
    let (mut out, mut done) = (Vec::new(), Vec::new());
    let write = Request::Write {
        va: 0,
        rkey: RKEY,
        payload: vec![1; 4096],
        imm: None,
    };
    req.post(1, write, 0, &mut out, &mut done);
    out.clear();
    let psns = |out: &[Packet]| out.iter().map(|p| p.psn).collect::<Vec<_>>();
    let t = ack_timeout_us(10).expect("timer");
    // Two timeouts in a row: the second twice the timeout after the first.
    req.on_timer(t, &mut out, &mut done);
    req.on_timer(3 * t - 1, &mut out, &mut done);
    assert_eq!(psns(&out), [100]);
    req.on_timer(3 * t, &mut out, &mut done);
    assert_eq!(psns(&out), [100, 100]);
    out.clear();
    // The responder lost its place: a sequence NAK of 100, everything
    // again from there, and the timer as new.
    let now = 3 * t + 1;
    req.on_packet(
        &ack(7, 100, syndrome::NAK_PSN_SEQ_ERR, 0),
        now,
        &mut out,
        &mut done,
    );
    assert_eq!(psns(&out), [100, 101, 102, 103]);
    out.clear();
    req.on_timer(now + t, &mut out, &mut done);
    assert_eq!(psns(&out), [100], "one timeout after the NAK");
    out.clear();
    // The first timeout of a new row: twice the timeout, not the eight
    // times that three retries spent would have made it.
    req.on_timer(now + 3 * t - 1, &mut out, &mut done);
    assert!(out.is_empty(), "{out:?}");
    req.on_timer(now + 3 * t, &mut out, &mut done);
    assert_eq!(psns(&out), [100]);
    assert!(done.is_empty());
}

/// After the transport timer ran out, the ACK its probe brings back says
/// what to send: an ACK past the probe means the responder was slow, not
/// deaf, and what followed the probe is still on its way, so nothing is
/// sent again (sending the window again made a slow rxe slower still, busy
/// with duplicates it ACKs one by one, until RETRY_EXC_ERR); an ACK of the
/// probe itself means what followed it was lost: go-back-N from there.
#[test]
fn the_ack_of_a_timeouts_probe_says_whether_to_go_back() {
    let mut req = Requester::new(cfg(7, 7), 100);
    let (mut out, mut done) = (Vec::new(), Vec::new());
    for wr_id in [1, 2] {
        let write = Request::Write {
            va: 0,
            rkey: RKEY,
            payload: vec![wr_id as u8; 4096],
            imm: None,
        };
        req.post(wr_id, write, 0, &mut out, &mut done);
    }
    let psns = |out: &[Packet]| out.iter().map(|p| p.psn).collect::<Vec<_>>();
    assert_eq!(psns(&out), (100..108).collect::<Vec<_>>());
    out.clear();
    let t = ack_timeout_us(10).expect("timer");
    req.on_timer(t, &mut out, &mut done);
    assert_eq!(psns(&out), [100], "the oldest packet, asking for an ACK");
    assert!(out[0].ack_req);
    out.clear();
    // A slow responder: it had taken everything up to 105.
    req.on_packet(&ack(7, 105, syndrome::ACK, 1), t + 1, &mut out, &mut done);
    assert_eq!(done.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [1]);
    assert!(out.is_empty(), "106 and 107 are on their way: {out:?}");
    // They were not: the timer again, and the responder takes its probe
    // as new.
    req.on_timer(3 * t, &mut out, &mut done);
    assert_eq!(psns(&out), [106]);
    out.clear();
    req.on_packet(
        &ack(7, 106, syndrome::ACK, 1),
        3 * t + 1,
        &mut out,
        &mut done,
    );
    assert_eq!(psns(&out), [107], "go-back-N after the probe");
    req.on_packet(
        &ack(7, 107, syndrome::ACK, 2),
        3 * t + 2,
        &mut out,
        &mut done,
    );
    assert_eq!(done.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [1, 2]);
}
