// SPDX-License-Identifier: GPL-2.0
//! The RC responder: it executes a request packet only at the PSN it
//! expects and in its message's order; a packet from its past is a
//! duplicate, answered without touching memory again (an ACK for a SEND or
//! WRITE, asked for or not; the READ's responses read anew from the
//! request; an atomic's saved result: an atomic never runs twice); a
//! packet from its future means something was lost, NAK'd once with a PSN
//! sequence error until the expected one comes. Memory, keys and receives
//! are the caller's ([`Target`]); this module decides what may reach them.

use std::collections::VecDeque;

use super::{ack, psn_add, psn_diff, AtomicOp, Seen};
use crate::packet::{segments, syndrome, Message, Op, Opcode, Packet, Transport};

/// Why the target refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No receive is posted (SEND): RNR NAK.
    NoReceive,
    /// Key, bounds or rights: remote access NAK.
    Access,
    /// The receive is too small or the request malformed: invalid
    /// request NAK.
    Invalid,
    /// The responder could not carry it out (a SEND with Invalidate whose
    /// rkey it cannot invalidate): remote operational error NAK.
    Operation,
}

/// One SEND packet's part of its message.
#[derive(Clone, Copy, Debug)]
pub struct SendPart<'a> {
    /// The message's first packet: it takes a receive.
    pub first: bool,
    /// Its last: the receive completes.
    pub last: bool,
    /// Where `data` goes in the message.
    pub offset: u64,
    /// The packet's payload.
    pub data: &'a [u8],
    /// Immediate data (a last packet's).
    pub imm: Option<u32>,
    /// Solicited event (a last packet's).
    pub solicited: bool,
    /// SEND with Invalidate: the rkey to invalidate (a last packet's).
    pub invalidate: Option<u32>,
}

/// What a responder's requests reach: the QP's memory and receives.
pub trait Target {
    /// A SEND's bytes at `part.offset` of its message.
    fn receive(&mut self, part: SendPart<'_>) -> Result<(), Refusal>;
    /// An RDMA WRITE's bytes at `va` under `rkey`.
    fn write(&mut self, va: u64, rkey: u32, data: &[u8]) -> Result<(), Refusal>;
    /// The end of an RDMA WRITE with immediate data of `len` bytes: it
    /// takes a receive and completes it with `imm`.
    fn write_imm(&mut self, len: u32, imm: u32, solicited: bool) -> Result<(), Refusal>;
    /// `len` bytes at `va` under `rkey`, for a READ.
    fn read(&mut self, va: u64, rkey: u32, len: u32) -> Result<Vec<u8>, Refusal>;
    /// Atomic `op` on the 8 bytes at `va` under `rkey`: the original value.
    fn atomic(&mut self, va: u64, rkey: u32, op: AtomicOp) -> Result<u64, Refusal>;
    /// ATOMIC WRITE of `value` at `va` under `rkey`.
    fn atomic_write(&mut self, va: u64, rkey: u32, value: [u8; 8]) -> Result<(), Refusal>;
    /// FLUSH of `len` bytes at `va` under `rkey` (or of its whole MR),
    /// `feth` saying which.
    fn flush(&mut self, va: u64, rkey: u32, len: u32, feth: u32) -> Result<(), Refusal>;
}

/// A READ or atomic the responder executed, kept to answer its duplicate.
#[derive(Clone, Copy, Debug)]
enum Resource {
    /// A READ: its PSNs.
    Read { psn: u32, npsn: u32 },
    /// An atomic: its PSN and original value.
    Atomic { psn: u32, orig: u64 },
    /// An ATOMIC WRITE or FLUSH done: its PSN.
    Done { psn: u32 },
}

/// READs and atomics remembered (IB's responder resources, the QP's
/// `max_dest_rd_atomic` at most).
const RESOURCES: usize = crate::limits::MAX_QP_RD_ATOM as usize;

/// A message that spans packets, between its first and last.
#[derive(Clone, Copy, Debug)]
pub(super) enum Ongoing {
    /// A SEND: the next byte's offset.
    Send { offset: u64 },
    /// An RDMA WRITE: where the next byte goes, and the message's length.
    Write { va: u64, rkey: u32, len: u32 },
}

/// SEND or RDMA WRITE packet `pkt` in its message's order after
/// `ongoing` (RC or UC, at path MTU `mtu`): its bytes to `target`; what is
/// ongoing after it. FIRST or ONLY only outside a message, MIDDLE and LAST
/// only inside one of the same kind.
pub(super) fn message_part(
    pkt: &Packet,
    ongoing: Option<Ongoing>,
    mtu: u32,
    target: &mut impl Target,
) -> Result<Option<Ongoing>, Refusal> {
    let s = pkt.opcode.shape();
    // Every packet but a message's last carries exactly the path MTU.
    if !s.last && pkt.payload.len() != mtu as usize {
        return Err(Refusal::Invalid);
    }
    let at = pkt.payload.len() as u64;
    match (pkt.opcode.op, ongoing) {
        (Op::SendFirst | Op::SendOnly | Op::SendOnlyImm | Op::SendOnlyInv, None) => {
            send(pkt, 0, target)
        }
        (
            Op::SendMiddle | Op::SendLast | Op::SendLastImm | Op::SendLastInv,
            Some(Ongoing::Send { offset }),
        ) => send(pkt, offset, target),
        (Op::WriteFirst | Op::WriteOnly | Op::WriteOnlyImm, None) => match pkt.reth {
            Some(r) => write(pkt, r.va.get(), r.rkey.get(), r.dma_len.get(), target),
            None => Err(Refusal::Invalid),
        },
        (
            Op::WriteMiddle | Op::WriteLast | Op::WriteLastImm,
            Some(Ongoing::Write { va, rkey, len }),
        ) => write(pkt, va, rkey, len, target),
        _ => Err(Refusal::Invalid),
    }
    .map(|()| match ongoing {
        _ if s.last => None,
        Some(Ongoing::Send { offset }) => Some(Ongoing::Send {
            offset: offset + at,
        }),
        Some(Ongoing::Write { va, rkey, len }) => Some(Ongoing::Write {
            va: va + at,
            rkey,
            len,
        }),
        None => Some(match pkt.reth {
            Some(r) => Ongoing::Write {
                va: r.va.get() + at,
                rkey: r.rkey.get(),
                len: r.dma_len.get(),
            },
            None => Ongoing::Send { offset: at },
        }),
    })
}

fn send(pkt: &Packet, offset: u64, target: &mut impl Target) -> Result<(), Refusal> {
    let s = pkt.opcode.shape();
    target.receive(SendPart {
        first: s.first,
        last: s.last,
        offset,
        data: &pkt.payload,
        imm: pkt.imm,
        solicited: pkt.se,
        invalidate: pkt.ieth,
    })
}

/// An RDMA WRITE's packet, its data for `va` under `rkey`, of a message
/// of `len` bytes.
fn write(
    pkt: &Packet,
    va: u64,
    rkey: u32,
    len: u32,
    target: &mut impl Target,
) -> Result<(), Refusal> {
    target.write(va, rkey, &pkt.payload)?;
    // With immediate data it takes a receive at its end; an RNR NAK
    // brings this packet again, whose bytes land again, unchanged.
    if let (true, Some(imm)) = (pkt.opcode.shape().last, pkt.imm) {
        target.write_imm(len, imm, pkt.se)?;
    }
    Ok(())
}

/// The responder's side of one RC QP.
#[derive(Debug)]
pub struct Responder {
    /// The requester's QP number, answers' destination.
    dest_qp: u32,
    mtu: u32,
    /// The PSN it expects.
    epsn: u32,
    /// Messages completed, modulo 2^24.
    msn: u32,
    ongoing: Option<Ongoing>,
    resources: VecDeque<Resource>,
    /// A sequence NAK went for the gap before `epsn`: no second one.
    nak_sent: bool,
    /// The QP's `min_rnr_timer`, sent in RNR NAKs.
    min_rnr_timer: u8,
    /// An access or invalid-request NAK moved the QP to error.
    error: bool,
    seen: Seen,
}

fn rc(op: Op) -> Opcode {
    Opcode {
        transport: Transport::Rc,
        op,
    }
}

impl Responder {
    /// A responder expecting PSN `epsn` from QP `dest_qp`.
    pub fn new(dest_qp: u32, mtu: u32, epsn: u32, min_rnr_timer: u8) -> Self {
        Responder {
            dest_qp,
            mtu,
            epsn: psn_add(epsn, 0),
            msn: 0,
            ongoing: None,
            resources: VecDeque::new(),
            nak_sent: false,
            min_rnr_timer: min_rnr_timer & 0x1f,
            error: false,
            seen: Seen::default(),
        }
    }

    /// What it saw since this was last called.
    pub fn take_seen(&mut self) -> Seen {
        std::mem::take(&mut self.seen)
    }

    /// The PSN it expects next.
    pub fn expected_psn(&self) -> u32 {
        self.epsn
    }

    /// Whether a NAK moved the QP to error.
    pub fn in_error(&self) -> bool {
        self.error
    }

    fn ack(&self, psn: u32, syn: u8) -> Packet {
        ack(self.dest_qp, psn, syn, self.msn)
    }

    /// Takes request packet `pkt` (already found to be for this QP, from
    /// its connected peer); answers go to `out`.
    pub fn on_packet(&mut self, pkt: &Packet, target: &mut impl Target, out: &mut Vec<Packet>) {
        let s = pkt.opcode.shape();
        if self.error || pkt.opcode.transport != Transport::Rc || !s.request {
            return;
        }
        let d = psn_diff(pkt.psn, self.epsn);
        if d > 0 {
            self.seen.out_of_sequence += 1;
            if !self.nak_sent {
                self.nak_sent = true;
                out.push(self.ack(self.epsn, syndrome::NAK_PSN_SEQ_ERR));
            }
            return;
        }
        if d < 0 {
            self.seen.duplicates += 1;
            return self.duplicate(pkt, target, out);
        }
        self.nak_sent = false;
        let result = match (pkt.opcode.op, self.ongoing) {
            (Op::ReadRequest, None) => return self.read(pkt, target, out, true),
            (Op::FetchAdd | Op::CompareSwap, None) => return self.atomic(pkt, target, out),
            (Op::AtomicWrite | Op::Flush, None) => return self.placement(pkt, target, out),
            _ => message_part(pkt, self.ongoing, self.mtu, target),
        };
        match result {
            Ok(ongoing) => {
                self.ongoing = ongoing;
                self.epsn = psn_add(self.epsn, 1);
                if s.last {
                    self.msn = psn_add(self.msn, 1);
                }
                if pkt.ack_req {
                    out.push(self.ack(pkt.psn, syndrome::ACK));
                }
            }
            Err(why) => self.refuse(pkt.psn, why, out),
        }
    }

    fn refuse(&mut self, psn: u32, why: Refusal, out: &mut Vec<Packet>) {
        let syn = match why {
            // The requester sends the message again after the timer.
            Refusal::NoReceive => syndrome::RNR_NAK | self.min_rnr_timer,
            Refusal::Access => syndrome::NAK_REMOTE_ACCESS,
            Refusal::Invalid => syndrome::NAK_INVALID_REQUEST,
            Refusal::Operation => syndrome::NAK_REMOTE_OP,
        };
        if why == Refusal::NoReceive {
            self.seen.rnr_naks += 1;
        } else {
            self.error = true;
        }
        out.push(self.ack(psn, syn));
    }

    /// A READ request at the expected PSN (`new`) or a duplicate one: its
    /// responses, read now.
    fn read(&mut self, pkt: &Packet, target: &mut impl Target, out: &mut Vec<Packet>, new: bool) {
        let Some(r) = pkt.reth else {
            return self.refuse(pkt.psn, Refusal::Invalid, out);
        };
        let len = r.dma_len.get();
        let data = match target.read(r.va.get(), r.rkey.get(), len) {
            Ok(d) => d,
            Err(why) => return self.refuse(pkt.psn, why, out),
        };
        let segs: Vec<_> = segments(Message::ReadResponse, u64::from(len), self.mtu).collect();
        let npsn = segs.len() as u32;
        if new {
            self.epsn = psn_add(self.epsn, npsn);
            self.msn = psn_add(self.msn, 1);
            self.remember(Resource::Read { psn: pkt.psn, npsn });
        }
        for (n, seg) in segs.into_iter().enumerate() {
            let mut p = Packet::new(rc(seg.op), self.dest_qp, psn_add(pkt.psn, n as u32));
            if p.opcode.shape().aeth {
                p = Packet {
                    aeth: self.ack(0, syndrome::ACK).aeth,
                    ..p
                };
            }
            let at = seg.offset as usize;
            p.payload = data[at..at + seg.len as usize].to_vec();
            out.push(p);
        }
    }

    /// COMPARE AND SWAP, FETCH AND ADD: executed once, its original value
    /// kept for a duplicate.
    fn atomic(&mut self, pkt: &Packet, target: &mut impl Target, out: &mut Vec<Packet>) {
        let Some(a) = pkt.atomic_eth else {
            return self.refuse(pkt.psn, Refusal::Invalid, out);
        };
        let op = match pkt.opcode.op {
            Op::CompareSwap => AtomicOp::CompareSwap {
                compare: a.compare.get(),
                swap: a.swap_add.get(),
            },
            _ => AtomicOp::FetchAdd {
                add: a.swap_add.get(),
            },
        };
        match target.atomic(a.va.get(), a.rkey.get(), op) {
            Ok(orig) => {
                self.epsn = psn_add(self.epsn, 1);
                self.msn = psn_add(self.msn, 1);
                self.remember(Resource::Atomic { psn: pkt.psn, orig });
                out.push(self.atomic_ack(pkt.psn, orig));
            }
            Err(why) => self.refuse(pkt.psn, why, out),
        }
    }

    /// ATOMIC WRITE (RETH and 8 bytes) or FLUSH (RETH and FETH): done
    /// once, answered with an empty READ response (IBA 1.5, as rxe).
    fn placement(&mut self, pkt: &Packet, target: &mut impl Target, out: &mut Vec<Packet>) {
        let Some(r) = pkt.reth else {
            return self.refuse(pkt.psn, Refusal::Invalid, out);
        };
        let (va, rkey) = (r.va.get(), r.rkey.get());
        let result = match (pkt.opcode.op, pkt.feth) {
            (Op::AtomicWrite, _) => match <[u8; 8]>::try_from(&pkt.payload[..]) {
                Ok(value) if r.dma_len.get() == 8 => target.atomic_write(va, rkey, value),
                _ => Err(Refusal::Invalid),
            },
            (_, Some(feth)) => target.flush(va, rkey, r.dma_len.get(), feth),
            _ => Err(Refusal::Invalid),
        };
        match result {
            Ok(()) => {
                self.epsn = psn_add(self.epsn, 1);
                self.msn = psn_add(self.msn, 1);
                self.remember(Resource::Done { psn: pkt.psn });
                out.push(self.empty_response(pkt.psn));
            }
            Err(why) => self.refuse(pkt.psn, why, out),
        }
    }

    fn empty_response(&self, psn: u32) -> Packet {
        let mut p = self.ack(psn, syndrome::ACK);
        p.opcode = rc(Op::ReadResponseOnly);
        p
    }

    fn atomic_ack(&self, psn: u32, orig: u64) -> Packet {
        let mut p = self.ack(psn, syndrome::ACK);
        p.opcode = rc(Op::AtomicAcknowledge);
        p.atomic_ack = Some(orig);
        p
    }

    fn remember(&mut self, r: Resource) {
        if self.resources.len() == RESOURCES {
            self.resources.pop_front();
        }
        self.resources.push_back(r);
    }

    /// A packet from the past: nothing reaches memory twice.
    fn duplicate(&mut self, pkt: &Packet, target: &mut impl Target, out: &mut Vec<Packet>) {
        match pkt.opcode.op {
            Op::ReadRequest => {
                // The request (or its rest) within a READ still remembered.
                let known = self.resources.iter().any(|r| match *r {
                    Resource::Read { psn, npsn } => {
                        let d = psn_diff(pkt.psn, psn);
                        d >= 0 && (d as u32) < npsn
                    }
                    _ => false,
                });
                if known {
                    self.read(pkt, target, out, false);
                }
            }
            Op::FetchAdd | Op::CompareSwap => {
                let orig = self.resources.iter().find_map(|r| match *r {
                    Resource::Atomic { psn, orig } if psn == pkt.psn => Some(orig),
                    _ => None,
                });
                if let Some(orig) = orig {
                    out.push(self.atomic_ack(pkt.psn, orig));
                }
            }
            Op::AtomicWrite | Op::Flush => {
                let done = self
                    .resources
                    .iter()
                    .any(|r| matches!(*r, Resource::Done { psn } if psn == pkt.psn));
                if done {
                    out.push(self.empty_response(pkt.psn));
                }
            }
            // A SEND's or WRITE's: acknowledged again, as far as it got,
            // asked or not (IBA C9-105; rxe does the same). A requester
            // that replays after a sequence NAK learns from it where this
            // side is; rxe takes a second sequence NAK only after an ACK,
            // and else waits for its transport timer.
            _ => out.push(self.ack(psn_add(self.epsn, super::PSN_MASK), syndrome::ACK)),
        }
    }
}
