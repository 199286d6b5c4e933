// SPDX-License-Identifier: GPL-2.0
//! UC on packets (IBA 9.7.5, 9.8): the same messages as RC, cut at the
//! path MTU with a PSN each, but nothing is acknowledged and nothing sent
//! again. The [`Sender`] sends a message's packets and is done with it;
//! the [`Receiver`] takes a message's packets only in order, and after a
//! gap in the PSNs drops what is left of the message it was in, until
//! the next FIRST or ONLY packet starts one (as rxe does). A message that
//! cannot be taken (no receive, a key refused) is dropped the same way:
//! UC has no NAK, and the QP stays where it is.

use super::requester::{message_packet, segments_of, Request};
use super::responder::{message_part, Ongoing, Target};
use super::{psn_add, Seen};
use crate::packet::{Packet, Transport};

/// The sending side of one UC QP.
#[derive(Debug)]
pub struct Sender {
    dest_qp: u32,
    mtu: u32,
    next_psn: u32,
}

impl Sender {
    /// A sender to QP `dest_qp` at path MTU `mtu` whose first PSN is `psn`.
    pub fn new(dest_qp: u32, mtu: u32, psn: u32) -> Self {
        Sender {
            dest_qp,
            mtu,
            next_psn: psn_add(psn, 0),
        }
    }

    /// The packets of SEND or WRITE `req` into `out`; false (nothing
    /// sent) for a request UC does not carry.
    pub fn send(&mut self, req: &Request, out: &mut Vec<Packet>) -> bool {
        let len = match req {
            Request::Send { payload, .. } | Request::Write { payload, .. } => payload.len(),
            _ => return false,
        };
        for seg in segments_of(req, len as u64, self.mtu) {
            let psn = self.next_psn;
            self.next_psn = psn_add(psn, 1);
            out.push(message_packet(req, Transport::Uc, self.dest_qp, psn, seg));
        }
        true
    }
}

/// The receiving side of one UC QP.
#[derive(Debug)]
pub struct Receiver {
    mtu: u32,
    /// The PSN it expects.
    epsn: u32,
    ongoing: Option<Ongoing>,
    seen: Seen,
}

impl Receiver {
    /// A receiver at path MTU `mtu` expecting PSN `epsn`.
    pub fn new(mtu: u32, epsn: u32) -> Self {
        Receiver {
            mtu,
            epsn: psn_add(epsn, 0),
            ongoing: None,
            seen: Seen::default(),
        }
    }

    /// What it saw since this was last called (gaps as out of sequence).
    pub fn take_seen(&mut self) -> Seen {
        std::mem::take(&mut self.seen)
    }

    /// Takes packet `pkt` (already found to be for this QP, from its
    /// connected peer).
    pub fn on_packet(&mut self, pkt: &Packet, target: &mut impl Target) {
        let s = pkt.opcode.shape();
        if pkt.opcode.transport != Transport::Uc || !s.request {
            return;
        }
        if pkt.psn != self.epsn {
            // Something was lost (or comes late): the message in progress
            // cannot complete; a new one may start here.
            self.seen.out_of_sequence += 1;
            self.ongoing = None;
        }
        self.epsn = psn_add(pkt.psn, 1);
        // Outside a message only a FIRST or ONLY packet is taken (the rest
        // of a message dropped is refused there), and a new message
        // abandons one whose end never came.
        let ongoing = if s.first { None } else { self.ongoing };
        self.ongoing = message_part(pkt, ongoing, self.mtu, target).unwrap_or(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::responder::{Refusal, SendPart};
    use crate::transport::AtomicOp;

    /// Receives (as many as `receives`) and the bytes WRITEs put at 0..64 KiB.
    #[derive(Default)]
    struct Mem {
        receives: u32,
        /// Messages completed.
        done: Vec<Vec<u8>>,
        /// The message being filled.
        filling: Option<Vec<u8>>,
        bytes: Vec<u8>,
        imms: Vec<u32>,
    }

    impl Target for Mem {
        fn receive(&mut self, part: SendPart<'_>) -> Result<(), Refusal> {
            if part.first && self.filling.is_none() {
                if self.receives == 0 {
                    return Err(Refusal::NoReceive);
                }
                self.receives -= 1;
            }
            let m = self.filling.get_or_insert_with(Vec::new);
            if part.first {
                // A receive a dropped message held is used again.
                m.clear();
            }
            assert_eq!(m.len() as u64, part.offset, "in order");
            m.extend_from_slice(part.data);
            if part.last {
                self.done.extend(self.filling.take());
            }
            Ok(())
        }
        fn write(&mut self, va: u64, _: u32, data: &[u8]) -> Result<(), Refusal> {
            let at = va as usize;
            self.bytes.resize(self.bytes.len().max(at + data.len()), 0);
            self.bytes[at..at + data.len()].copy_from_slice(data);
            Ok(())
        }
        fn write_imm(&mut self, _: u32, imm: u32, _: bool) -> Result<(), Refusal> {
            self.imms.push(imm);
            Ok(())
        }
        fn read(&mut self, _: u64, _: u32, _: u32) -> Result<Vec<u8>, Refusal> {
            unreachable!("UC has no READ")
        }
        fn atomic(&mut self, _: u64, _: u32, _: AtomicOp) -> Result<u64, Refusal> {
            unreachable!("UC has no atomics")
        }
        fn atomic_write(&mut self, _: u64, _: u32, _: [u8; 8]) -> Result<(), Refusal> {
            unreachable!("UC has no ATOMIC WRITE")
        }
        fn flush(&mut self, _: u64, _: u32, _: u32, _: u32) -> Result<(), Refusal> {
            unreachable!("UC has no FLUSH")
        }
    }

    fn send(len: usize, seed: u8) -> Request {
        Request::Send {
            payload: (0..len).map(|i| (i as u8).wrapping_add(seed)).collect(),
            imm: None,
            inv: None,
        }
    }

    /// In order, every message arrives; a packet lost in the middle of a
    /// message loses that message only (its receive serves the next one),
    /// whatever the PSNs wrap; a WRITE with immediate data completes a
    /// receive's worth of immediate data; a READ is not UC's.
    #[test]
    fn a_gap_loses_its_message_and_no_other() {
        let mut tx = Sender::new(9, 1024, super::super::PSN_MASK - 1);
        let mut rx = Receiver::new(1024, super::super::PSN_MASK - 1);
        let mut mem = Mem {
            receives: 2,
            ..Mem::default()
        };
        let mut out = Vec::new();
        assert!(tx.send(&send(3000, 1), &mut out));
        assert_eq!(out.len(), 3);
        assert!(out.iter().all(|p| p.opcode.transport == Transport::Uc));
        assert_eq!(out[2].psn, 0, "wrapped");
        // The middle packet is lost.
        out.remove(1);
        for p in out.drain(..) {
            rx.on_packet(&p, &mut mem);
        }
        assert!(mem.done.is_empty(), "the message with a gap is gone");
        assert_eq!(rx.take_seen().out_of_sequence, 1);
        assert!(tx.send(&send(2500, 2), &mut out));
        let write = Request::Write {
            va: 100,
            rkey: 1,
            payload: vec![7; 1500],
            imm: Some(0xab),
        };
        assert!(tx.send(&write, &mut out));
        for p in out.drain(..) {
            rx.on_packet(&p, &mut mem);
        }
        assert_eq!(mem.done, [send_payload(2500, 2)], "the next one whole");
        assert_eq!(mem.receives, 1, "on the receive the lost one had");
        assert_eq!(mem.bytes[100..], [7; 1500]);
        assert_eq!(mem.imms, [0xab]);
        let read = Request::Read {
            va: 0,
            rkey: 1,
            len: 8,
        };
        assert!(!tx.send(&read, &mut out) && out.is_empty());
    }

    /// A message with no receive to take is dropped whole: its later
    /// packets do not start another one.
    #[test]
    fn a_message_without_a_receive_is_dropped_whole() {
        let mut tx = Sender::new(9, 1024, 5);
        let mut rx = Receiver::new(1024, 5);
        let mut mem = Mem::default();
        let mut out = Vec::new();
        tx.send(&send(3000, 1), &mut out);
        for p in out.drain(..) {
            rx.on_packet(&p, &mut mem);
        }
        mem.receives = 1;
        tx.send(&send(10, 3), &mut out);
        for p in out.drain(..) {
            rx.on_packet(&p, &mut mem);
        }
        assert_eq!(mem.done, [send_payload(10, 3)]);
        assert_eq!(rx.take_seen(), Seen::default(), "nothing out of sequence");
    }

    fn send_payload(len: usize, seed: u8) -> Vec<u8> {
        match send(len, seed) {
            Request::Send { payload, .. } => payload,
            _ => unreachable!(),
        }
    }
}
