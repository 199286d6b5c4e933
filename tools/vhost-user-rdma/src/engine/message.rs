// SPDX-License-Identifier: GPL-2.0
//! A request as it travels from the requester to the responder, and the
//! responder's answer: what the packets of one message carry (IBA 9.2–9.5),
//! so that the responder works from the message and its own device's
//! state only, never from the requester's work request or memory.
//!
//! Between two QPs of this process a message goes whole (its packets'
//! headers and its payload as a view of the sender's guest memory: one
//! copy, into the responder's); the requester counts the PSNs its packets
//! take. On a wire each would be cut into [`crate::packet::Packet`]s.

use std::time::Duration;

use super::transfer::Started;
use super::Slices;
use crate::ib::{IB_WC_REM_ACCESS_ERR, IB_WC_REM_INV_REQ_ERR, IB_WC_REM_OP_ERR};
use crate::packet::Op;

/// The payload: the sender's guest memory or a work request's inline
/// bytes.
pub(super) enum Payload<'m> {
    Guest(Slices<'m>),
    Inline(&'m [u8]),
}

impl Payload<'_> {
    pub(super) fn len(&self) -> usize {
        match self {
            Payload::Guest(s) => super::total(s),
            Payload::Inline(b) => b.len(),
        }
    }

    /// The bytes, copied out (for a packet on the wire).
    pub(super) fn to_vec(&self) -> Vec<u8> {
        match self {
            Payload::Guest(s) => {
                let mut v = Vec::with_capacity(self.len());
                for part in s.iter() {
                    let start = v.len();
                    v.resize(start + part.len(), 0);
                    part.copy_to(&mut v[start..]);
                }
                v
            }
            Payload::Inline(b) => b.to_vec(),
        }
    }

    pub(super) fn copy_to(&self, dst: &Slices<'_>) {
        match self {
            Payload::Guest(s) => super::copy(s, dst),
            Payload::Inline(b) => super::write_bytes(b, dst),
        }
    }
}

/// RETH (and FLUSH's range): remote address, key, length.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Remote {
    pub va: u64,
    pub rkey: u32,
    pub len: u64,
}

/// One message of an RC, UC or XRC QP.
pub(super) struct Request<'m> {
    /// The sender's source GID (GRH) and QP number (known between QPs of
    /// this process; a wire carries only the GID).
    pub src_gid: [u8; 16],
    pub src_qp: u32,
    /// The sender's QP type (the opcode's transport).
    pub qp_type: u8,
    /// The destination GID (GRH) and QP number (BTH).
    pub dest_gid: [u8; 16],
    pub dest_qp: u32,
    /// The operation, as its only packet would name it.
    pub op: Op,
    /// The PSN of its first packet and how many PSNs it takes (a READ: its
    /// responses').
    pub psn: u32,
    pub npsn: u32,
    /// Its length: the payload's, a READ's (as RETH's DMA length), what
    /// the counters count.
    pub len: u64,
    /// Solicited event.
    pub se: bool,
    /// RETH, AtomicETH's address and key, FLUSH's range.
    pub remote: Remote,
    /// ImmDt.
    pub imm: Option<u32>,
    /// IETH: the rkey to invalidate.
    pub ieth: Option<u32>,
    /// AtomicETH's compare (or add, or ATOMIC WRITE's data) and swap.
    pub compare_add: u64,
    pub swap: u64,
    /// FETH: placement type and selectivity level.
    pub flush: (u8, u8),
    /// XRCETH: the XRC SRQ a request of an XRC_INI QP names.
    pub xrc_srqn: Option<u32>,
    /// DETH's Q_Key (a UD or GSI datagram; its source QP is `src_qp`).
    pub qkey: Option<u32>,
    /// What the frame's other headers carry that a datagram's receiver
    /// sees (its GRH, the completion's SL and source MAC).
    pub frame: Frame,
    /// SEND and WRITE payload.
    pub payload: Payload<'m>,
    /// The longest SEND, WRITE or READ that moves in one step; longer ones
    /// move in chunks (`transfer.rs`): [`super::CHUNK`], or one packet over
    /// a link that loses packets, so that a loss costs go-back-N from the
    /// packet and not the whole message (`link.rs`). The in-process link's
    /// business, not a header's.
    pub whole_up_to: u64,
}

/// The Ethernet, IP and UDP headers' part of a message a UD receiver
/// sees.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Frame {
    pub traffic_class: u8,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub sl: u8,
    pub smac: [u8; 6],
}

/// IB's NAK codes a responder answers with (IBA 9.7.5.2.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Nak {
    /// Invalid request: REM_INV_REQ_ERR at the requester.
    InvalidRequest,
    /// Remote access error: REM_ACCESS_ERR.
    RemoteAccess,
    /// Remote operational error: REM_OP_ERR.
    RemoteOperation,
}

impl Nak {
    /// The requester's completion status for it.
    pub(super) fn status(self) -> u8 {
        match self {
            Nak::InvalidRequest => IB_WC_REM_INV_REQ_ERR,
            Nak::RemoteAccess => IB_WC_REM_ACCESS_ERR,
            Nak::RemoteOperation => IB_WC_REM_OP_ERR,
        }
    }
}

/// What comes back for a request.
pub(super) enum Response<'p> {
    /// Acknowledged (SEND, WRITE, ATOMIC WRITE, FLUSH).
    Ack,
    /// NAK'd: the requester's work request fails with the NAK's status.
    Nak(Nak),
    /// RNR NAK: no receive was posted; send again after this time.
    Rnr(Duration),
    /// A READ's response: the responder's memory, read from in place.
    Read(Slices<'p>),
    /// An atomic's acknowledgement with the original value.
    Atomic(u64),
    /// Taken whole and moving in chunks (`transfer.rs`).
    Moving(Started),
    /// Dropped without an answer (UC, which never answers, or a responder
    /// that takes nothing from this sender): an RC requester's transport
    /// retries run out.
    Dropped(String),
}
