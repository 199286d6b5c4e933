// SPDX-License-Identifier: GPL-2.0
//! RC reliability as IB defines it (IBA vol. 1, 9.7), on [`Packet`]s: the
//! [`requester`] forms a work request's packets, keeps them until they are
//! acknowledged, and retransmits on a NAK, an RNR NAK's timer or its
//! transport timer; the [`responder`] admits only the PSN it expects,
//! answers duplicates without touching memory twice (replaying READ and
//! atomic results from its resources) and answers with ACKs, NAKs and
//! responses. [`uc`] is UC's unacknowledged half of the same rules.
//!
//! Both are plain state machines: time is a number of microseconds the
//! caller passes in, and packets go out through a vector, so that the same
//! logic serves a link between two QPs of this process and the wire, and
//! the tests can lose, duplicate and reorder packets at will. Between QPs
//! of this process the engine carries whole messages, one in flight per QP
//! (`engine/message.rs`), and keeps the same rules at that grain: the
//! timer and `retry_cnt` for what nothing answered, duplicates answered
//! without executing twice (`engine/responder.rs`). These state machines,
//! with their window of packets, are what a wire needs.
//!
//! [`Packet`]: crate::packet::Packet

use crate::packet::{Aeth, Op, Opcode, Packet, Transport};

pub mod requester;
pub mod responder;
#[cfg(test)]
mod tests;
pub mod uc;

/// PSNs and QP numbers are 24 bits.
pub const PSN_MASK: u32 = (1 << 24) - 1;

/// `psn + n`, modulo 2^24.
pub fn psn_add(psn: u32, n: u32) -> u32 {
    psn.wrapping_add(n) & PSN_MASK
}

/// How far `a` is after `b` in the PSN space (negative if before): the
/// half of the space ahead of `b` is its future, the half behind its past
/// (IBA 9.7.4.1.2).
pub fn psn_diff(a: u32, b: u32) -> i32 {
    let d = a.wrapping_sub(b) & PSN_MASK;
    if d >= 1 << 23 {
        d as i32 - (1 << 24)
    } else {
        d as i32
    }
}

/// How a work request ended, as its completion says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Done.
    Success,
    /// The responder NAK'd it as an invalid request.
    RemoteInvalidRequest,
    /// The responder NAK'd its key, bounds or rights.
    RemoteAccess,
    /// The responder could not carry it out.
    RemoteOperation,
    /// The transport timer ran out `retry_cnt` + 1 times.
    RetryExceeded,
    /// RNR NAKs came `rnr_retry` + 1 times.
    RnrRetryExceeded,
    /// Not executed: the QP went to error before it.
    Flushed,
}

/// An atomic's operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    /// FETCH AND ADD.
    FetchAdd {
        /// Addend.
        add: u64,
    },
    /// COMPARE AND SWAP: `swap` stored if the cell holds `compare`.
    CompareSwap {
        /// The value expected.
        compare: u64,
        /// The value stored.
        swap: u64,
    },
}

/// What a state machine saw that a device counts, since the caller last
/// took it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// Responder: requests after a gap in the PSNs, dropped.
    pub out_of_sequence: u32,
    /// Responder: requests from the past, answered again without touching
    /// memory.
    pub duplicates: u32,
    /// RNR NAKs the responder sent, or the requester got.
    pub rnr_naks: u32,
    /// Requester: packets sent again.
    pub resent: u32,
}

/// The transport timer of a QP's `timeout` (IBA's local ACK timeout):
/// 4.096 µs × 2^timeout, in microseconds; `None` for 0, which IB defines as
/// infinite.
pub fn ack_timeout_us(timeout: u8) -> Option<u64> {
    (timeout != 0).then(|| (4096u64 << timeout.min(31)) / 1000)
}

/// The RNR NAK delay IB encodes in `min_rnr_timer`, in microseconds.
pub fn rnr_delay_us(min_rnr_timer: u8) -> u64 {
    const TABLE: [u64; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840,
        5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122_880, 163_840, 245_760,
        327_680, 491_520,
    ];
    TABLE[usize::from(min_rnr_timer & 31)]
}

/// An RC ACK (or NAK: `syn`) of `psn` to QP `dest_qp`, with MSN `msn`.
pub(crate) fn ack(dest_qp: u32, psn: u32, syn: u8, msn: u32) -> Packet {
    let mut p = Packet::new(
        Opcode {
            transport: Transport::Rc,
            op: Op::Acknowledge,
        },
        dest_qp,
        psn,
    );
    let m = msn.to_be_bytes();
    p.aeth = Some(Aeth {
        syndrome: syn,
        msn: [m[1], m[2], m[3]],
    });
    p
}
