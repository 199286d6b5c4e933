// SPDX-License-Identifier: GPL-2.0
//! The data path's packet: what a RoCEv2 packet carries after its UDP
//! header (IBA vol. 1, ch. 9; annex A17 for RoCEv2), without the ICRC,
//! which belongs to the wire's framing. A packet is its Base Transport
//! Header, the extension headers its opcode calls for (RETH, AETH,
//! AtomicETH, AtomicAckETH, ImmDt, IETH, DETH, FETH) and its payload.
//!
//! [`Packet`] is the parsed form the requester builds and the responder
//! and completer read; [`Packet::emit`] writes the bytes a peer on the wire
//! reads and [`Packet::parse`] reads them back, refusing anything a
//! conforming sender would not send (a packet from the network is hostile
//! input). [`segments`] cuts a message into packets at the path MTU.
//!
//! Header layouts are big endian, as on the wire.

use zerocopy::big_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Transport service of an opcode (its top three bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
}

impl Transport {
    fn base(self) -> u8 {
        match self {
            Transport::Rc => 0x00,
            Transport::Uc => 0x20,
            Transport::Ud => 0x60,
        }
    }
}

/// The operation of an opcode (its low five bits), IBA table 38 and the
/// IBA 1.5 additions (FLUSH, ATOMIC WRITE).
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    SendFirst = 0x00,
    SendMiddle = 0x01,
    SendLast = 0x02,
    SendLastImm = 0x03,
    SendOnly = 0x04,
    SendOnlyImm = 0x05,
    WriteFirst = 0x06,
    WriteMiddle = 0x07,
    WriteLast = 0x08,
    WriteLastImm = 0x09,
    WriteOnly = 0x0a,
    WriteOnlyImm = 0x0b,
    ReadRequest = 0x0c,
    ReadResponseFirst = 0x0d,
    ReadResponseMiddle = 0x0e,
    ReadResponseLast = 0x0f,
    ReadResponseOnly = 0x10,
    Acknowledge = 0x11,
    AtomicAcknowledge = 0x12,
    CompareSwap = 0x13,
    FetchAdd = 0x14,
    SendLastInv = 0x16,
    SendOnlyInv = 0x17,
    Flush = 0x1c,
    AtomicWrite = 0x1d,
}

/// Which headers and payload an opcode's packets carry, and where in its
/// message a packet stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// RETH (remote address, key, length).
    pub reth: bool,
    /// AETH (syndrome, MSN).
    pub aeth: bool,
    /// AtomicETH.
    pub atomic_eth: bool,
    /// AtomicAckETH.
    pub atomic_ack_eth: bool,
    /// Immediate data.
    pub imm: bool,
    /// IETH (the rkey to invalidate).
    pub ieth: bool,
    /// DETH (Q_Key, source QP): every UD packet.
    pub deth: bool,
    /// FETH (FLUSH placement and selectivity).
    pub feth: bool,
    /// May carry a payload.
    pub payload: bool,
    /// First packet of a message.
    pub first: bool,
    /// Last packet of a message.
    pub last: bool,
    /// A request (requester to responder); else a response.
    pub request: bool,
}

impl Op {
    const ALL: [Op; 25] = [
        Op::SendFirst,
        Op::SendMiddle,
        Op::SendLast,
        Op::SendLastImm,
        Op::SendOnly,
        Op::SendOnlyImm,
        Op::WriteFirst,
        Op::WriteMiddle,
        Op::WriteLast,
        Op::WriteLastImm,
        Op::WriteOnly,
        Op::WriteOnlyImm,
        Op::ReadRequest,
        Op::ReadResponseFirst,
        Op::ReadResponseMiddle,
        Op::ReadResponseLast,
        Op::ReadResponseOnly,
        Op::Acknowledge,
        Op::AtomicAcknowledge,
        Op::CompareSwap,
        Op::FetchAdd,
        Op::SendLastInv,
        Op::SendOnlyInv,
        Op::Flush,
        Op::AtomicWrite,
    ];

    /// The operation whose code is `code`.
    pub fn from_code(code: u8) -> Option<Op> {
        Op::ALL.into_iter().find(|op| *op as u8 == code)
    }

    /// Whether transport `t` defines this operation: UC only SENDs and
    /// RDMA WRITEs, UD only SEND ONLY (with immediate or not).
    pub fn defined_for(self, t: Transport) -> bool {
        use Op::*;
        match t {
            Transport::Rc => true,
            Transport::Uc => matches!(
                self,
                SendFirst
                    | SendMiddle
                    | SendLast
                    | SendLastImm
                    | SendOnly
                    | SendOnlyImm
                    | WriteFirst
                    | WriteMiddle
                    | WriteLast
                    | WriteLastImm
                    | WriteOnly
                    | WriteOnlyImm
            ),
            Transport::Ud => matches!(self, SendOnly | SendOnlyImm),
        }
    }

    /// The headers and payload of this operation's packets (on UD every
    /// packet also has a DETH: [`Opcode::shape`]).
    pub fn shape(self) -> Shape {
        use Op::*;
        let first = matches!(
            self,
            SendFirst
                | SendOnly
                | SendOnlyImm
                | SendOnlyInv
                | WriteFirst
                | WriteOnly
                | WriteOnlyImm
                | ReadResponseFirst
                | ReadResponseOnly
        ) || !self.in_message();
        let last = matches!(
            self,
            SendLast
                | SendLastImm
                | SendLastInv
                | SendOnly
                | SendOnlyImm
                | SendOnlyInv
                | WriteLast
                | WriteLastImm
                | WriteOnly
                | WriteOnlyImm
                | ReadResponseLast
                | ReadResponseOnly
        ) || !self.in_message();
        Shape {
            reth: matches!(
                self,
                WriteFirst | WriteOnly | WriteOnlyImm | ReadRequest | Flush | AtomicWrite
            ),
            aeth: matches!(
                self,
                ReadResponseFirst
                    | ReadResponseLast
                    | ReadResponseOnly
                    | Acknowledge
                    | AtomicAcknowledge
            ),
            atomic_eth: matches!(self, CompareSwap | FetchAdd),
            atomic_ack_eth: self == AtomicAcknowledge,
            imm: matches!(
                self,
                SendLastImm | SendOnlyImm | WriteLastImm | WriteOnlyImm
            ),
            ieth: matches!(self, SendLastInv | SendOnlyInv),
            deth: false,
            feth: self == Flush,
            payload: !matches!(
                self,
                ReadRequest | Acknowledge | AtomicAcknowledge | CompareSwap | FetchAdd | Flush
            ),
            first,
            last,
            request: !matches!(
                self,
                ReadResponseFirst
                    | ReadResponseMiddle
                    | ReadResponseLast
                    | ReadResponseOnly
                    | Acknowledge
                    | AtomicAcknowledge
            ),
        }
    }

    /// Whether it is a packet of a SEND, an RDMA WRITE or a READ response,
    /// messages that may span packets; the others are a message each.
    fn in_message(self) -> bool {
        use Op::*;
        matches!(
            self,
            SendFirst
                | SendMiddle
                | SendLast
                | SendLastImm
                | SendLastInv
                | WriteFirst
                | WriteMiddle
                | WriteLast
                | WriteLastImm
                | ReadResponseFirst
                | ReadResponseMiddle
                | ReadResponseLast
        ) || matches!(
            self,
            SendOnly | SendOnlyImm | SendOnlyInv | WriteOnly | WriteOnlyImm | ReadResponseOnly
        )
    }
}

/// A BTH opcode: a transport and an operation it defines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opcode {
    /// The transport service.
    pub transport: Transport,
    /// The operation.
    pub op: Op,
}

impl Opcode {
    /// The opcode of byte `b`, if the transport defines it.
    pub fn from_byte(b: u8) -> Option<Opcode> {
        let transport = match b & 0xe0 {
            0x00 => Transport::Rc,
            0x20 => Transport::Uc,
            0x60 => Transport::Ud,
            _ => return None,
        };
        let op = Op::from_code(b & 0x1f)?;
        op.defined_for(transport)
            .then_some(Opcode { transport, op })
    }

    /// Its byte.
    pub fn byte(self) -> u8 {
        self.transport.base() | self.op as u8
    }

    /// Its packets' headers and payload.
    pub fn shape(self) -> Shape {
        Shape {
            deth: self.transport == Transport::Ud,
            ..self.op.shape()
        }
    }
}

/// Base Transport Header, 12 bytes.
#[allow(missing_docs)]
#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    Immutable,
    KnownLayout,
    Unaligned,
)]
pub struct Bth {
    pub opcode: u8,
    /// SE (bit 7), MigReq (bit 6), PadCnt (bits 5-4), TVer (bits 3-0).
    pub flags: u8,
    pub pkey: U16,
    /// FECN (bit 7) and BECN (bit 6) in RoCEv2; the rest reserved.
    pub resv8a: u8,
    pub dest_qp: [u8; 3],
    /// AckReq (bit 7); the rest reserved.
    pub ack_req: u8,
    pub psn: [u8; 3],
}

/// RDMA Extended Transport Header, 16 bytes.
#[allow(missing_docs)]
#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    Immutable,
    KnownLayout,
    Unaligned,
)]
pub struct Reth {
    pub va: U64,
    pub rkey: U32,
    pub dma_len: U32,
}

/// ACK Extended Transport Header, 4 bytes: syndrome and MSN.
#[allow(missing_docs)]
#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    Immutable,
    KnownLayout,
    Unaligned,
)]
pub struct Aeth {
    pub syndrome: u8,
    pub msn: [u8; 3],
}

/// Atomic Extended Transport Header, 28 bytes.
#[allow(missing_docs)]
#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    Immutable,
    KnownLayout,
    Unaligned,
)]
pub struct AtomicEth {
    pub va: U64,
    pub rkey: U32,
    pub swap_add: U64,
    pub compare: U64,
}

/// Datagram Extended Transport Header, 8 bytes.
#[allow(missing_docs)]
#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    Immutable,
    KnownLayout,
    Unaligned,
)]
pub struct Deth {
    pub qkey: U32,
    pub reserved: u8,
    pub src_qp: [u8; 3],
}

/// AETH syndromes (IBA 9.7.5.1): the top three bits say which kind.
pub mod syndrome {
    /// ACK with a credit count in the low five bits.
    pub const ACK: u8 = 0x00;
    /// RNR NAK with the RNR timer in the low five bits.
    pub const RNR_NAK: u8 = 0x20;
    /// NAK with a code in the low five bits.
    pub const NAK: u8 = 0x60;
    /// NAK codes.
    pub const NAK_PSN_SEQ_ERR: u8 = NAK;
    /// Invalid request.
    pub const NAK_INVALID_REQUEST: u8 = NAK | 1;
    /// Remote access error.
    pub const NAK_REMOTE_ACCESS: u8 = NAK | 2;
    /// Remote operational error.
    pub const NAK_REMOTE_OP: u8 = NAK | 3;
    /// Invalid RD request.
    pub const NAK_INVALID_RD_REQUEST: u8 = NAK | 4;
    /// The kind bits.
    pub const KIND: u8 = 0x60;
}

/// The payload: bytes from the network or for it. (Between two QPs of
/// this process the requester will hand a view of the sender's guest
/// memory instead; that form comes with the requester.)
pub type Payload = Vec<u8>;

/// A packet, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// The opcode.
    pub opcode: Opcode,
    /// Solicited event.
    pub se: bool,
    /// P_Key (0xffff, the default partition, for RoCEv2 peers).
    pub pkey: u16,
    /// Destination QP (24 bits).
    pub dest_qp: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number (24 bits).
    pub psn: u32,
    /// RETH, if the opcode has one.
    pub reth: Option<Reth>,
    /// AETH, if the opcode has one.
    pub aeth: Option<Aeth>,
    /// AtomicETH, if the opcode has one.
    pub atomic_eth: Option<AtomicEth>,
    /// AtomicAckETH's original remote data, if the opcode has it.
    pub atomic_ack: Option<u64>,
    /// Immediate data (as the sender wrote it, big endian on the wire).
    pub imm: Option<u32>,
    /// IETH's rkey.
    pub ieth: Option<u32>,
    /// DETH.
    pub deth: Option<Deth>,
    /// FETH: selectivity level (bits 5-4) and placement type (bits 3-0).
    pub feth: Option<u32>,
    /// The payload (without the pad bytes).
    pub payload: Payload,
}

/// Why bytes are not a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// Shorter than its headers, or than its pad count.
    Truncated,
    /// A transport version other than 0.
    Version(u8),
    /// An opcode no transport here defines.
    Opcode(u8),
    /// A payload where the opcode has none, or one unaligned to 4 bytes.
    Payload,
    /// The packet and its headers disagree (a header missing or extra).
    Headers,
}

/// Bytes of a BTH.
pub const BTH_LEN: usize = 12;

/// The 24 bits of a QP number or a PSN.
const U24_MASK: u32 = 0xff_ffff;

fn u24(b: [u8; 3]) -> u32 {
    u32::from_be_bytes([0, b[0], b[1], b[2]])
}

fn to_u24(v: u32) -> [u8; 3] {
    let b = (v & U24_MASK).to_be_bytes();
    [b[1], b[2], b[3]]
}

/// Takes a `T` off the front of `rest`.
fn take<T: FromBytes + KnownLayout + Immutable + Copy>(rest: &mut &[u8]) -> Result<T, Malformed> {
    let (v, tail) = T::read_from_prefix(rest).map_err(|_| Malformed::Truncated)?;
    *rest = tail;
    Ok(v)
}

impl Packet {
    /// A packet of `opcode` to `dest_qp` with `psn` and no extension
    /// headers or payload yet.
    pub fn new(opcode: Opcode, dest_qp: u32, psn: u32) -> Self {
        Packet {
            opcode,
            se: false,
            pkey: 0xffff,
            dest_qp: dest_qp & U24_MASK,
            ack_req: false,
            psn: psn & U24_MASK,
            reth: None,
            aeth: None,
            atomic_eth: None,
            atomic_ack: None,
            imm: None,
            ieth: None,
            deth: None,
            feth: None,
            payload: Payload::new(),
        }
    }

    /// Whether its headers are exactly those its opcode calls for, and it
    /// has a payload only if the opcode carries one.
    pub fn well_formed(&self) -> bool {
        let s = self.opcode.shape();
        s.reth == self.reth.is_some()
            && s.aeth == self.aeth.is_some()
            && s.atomic_eth == self.atomic_eth.is_some()
            && s.atomic_ack_eth == self.atomic_ack.is_some()
            && s.imm == self.imm.is_some()
            && s.ieth == self.ieth.is_some()
            && s.deth == self.deth.is_some()
            && s.feth == self.feth.is_some()
            && (s.payload || self.payload.is_empty())
    }

    /// Appends its bytes (BTH, extension headers in IBA's order, payload,
    /// pad to 4 bytes) to `out`; [`Malformed::Headers`] if it is not
    /// [`well_formed`](Packet::well_formed).
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<(), Malformed> {
        if !self.well_formed() {
            return Err(Malformed::Headers);
        }
        let pad = (4 - self.payload.len() % 4) % 4;
        let bth = Bth {
            opcode: self.opcode.byte(),
            flags: (u8::from(self.se) << 7) | ((pad as u8) << 4),
            pkey: U16::new(self.pkey),
            resv8a: 0,
            dest_qp: to_u24(self.dest_qp),
            ack_req: u8::from(self.ack_req) << 7,
            psn: to_u24(self.psn),
        };
        out.extend_from_slice(bth.as_bytes());
        // IBA 9.2: RDETH, DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt,
        // IETH; FETH (IBA 1.5) comes before the RETH of its FLUSH (as rxe
        // sends and reads it).
        if let Some(d) = &self.deth {
            out.extend_from_slice(d.as_bytes());
        }
        if let Some(f) = self.feth {
            out.extend_from_slice(&f.to_be_bytes());
        }
        if let Some(r) = &self.reth {
            out.extend_from_slice(r.as_bytes());
        }
        if let Some(a) = &self.atomic_eth {
            out.extend_from_slice(a.as_bytes());
        }
        if let Some(a) = &self.aeth {
            out.extend_from_slice(a.as_bytes());
        }
        if let Some(o) = self.atomic_ack {
            out.extend_from_slice(&o.to_be_bytes());
        }
        if let Some(i) = self.imm {
            out.extend_from_slice(&i.to_be_bytes());
        }
        if let Some(k) = self.ieth {
            out.extend_from_slice(&k.to_be_bytes());
        }
        out.extend_from_slice(&self.payload);
        out.extend(std::iter::repeat_n(0, pad));
        Ok(())
    }

    /// Reads a packet from `bytes` (what followed the UDP header, without
    /// the ICRC): every header its opcode calls for, then the payload less
    /// its pad bytes.
    pub fn parse(bytes: &[u8]) -> Result<Packet, Malformed> {
        let mut rest = bytes;
        let bth: Bth = take(&mut rest)?;
        let tver = bth.flags & 0x0f;
        if tver != 0 {
            return Err(Malformed::Version(tver));
        }
        let opcode = Opcode::from_byte(bth.opcode).ok_or(Malformed::Opcode(bth.opcode))?;
        let s = opcode.shape();
        let mut p = Packet {
            se: bth.flags & 0x80 != 0,
            pkey: bth.pkey.get(),
            ack_req: bth.ack_req & 0x80 != 0,
            ..Packet::new(opcode, u24(bth.dest_qp), u24(bth.psn))
        };
        if s.deth {
            p.deth = Some(take(&mut rest)?);
        }
        if s.feth {
            p.feth = Some(take::<U32>(&mut rest)?.get());
        }
        if s.reth {
            p.reth = Some(take(&mut rest)?);
        }
        if s.atomic_eth {
            p.atomic_eth = Some(take(&mut rest)?);
        }
        if s.aeth {
            p.aeth = Some(take(&mut rest)?);
        }
        if s.atomic_ack_eth {
            p.atomic_ack = Some(take::<U64>(&mut rest)?.get());
        }
        if s.imm {
            p.imm = Some(take::<U32>(&mut rest)?.get());
        }
        if s.ieth {
            p.ieth = Some(take::<U32>(&mut rest)?.get());
        }
        let pad = usize::from((bth.flags >> 4) & 3);
        let len = rest.len().checked_sub(pad).ok_or(Malformed::Truncated)?;
        // A payload ends padded to 4 bytes, and only opcodes with one have it.
        if rest.len() % 4 != 0 || (!s.payload && !rest.is_empty()) {
            return Err(Malformed::Payload);
        }
        p.payload = rest[..len].to_vec();
        Ok(p)
    }
}

/// One packet of a message: its operation, and the part of the message's
/// bytes it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// The packet's operation.
    pub op: Op,
    /// Offset of its payload in the message.
    pub offset: u64,
    /// Bytes of payload.
    pub len: u32,
}

/// The kinds of message [`segments`] cuts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message {
    /// SEND; with immediate data or an rkey to invalidate on its last packet.
    Send {
        /// With immediate data.
        imm: bool,
        /// With invalidate.
        inv: bool,
    },
    /// RDMA WRITE, with immediate data or not.
    Write {
        /// With immediate data.
        imm: bool,
    },
    /// An RDMA READ's response.
    ReadResponse,
}

/// The packets of a `len`-byte message at path MTU `mtu` bytes: one ONLY
/// packet if it fits one (an empty message too), else FIRST, MIDDLEs and
/// LAST, every packet but the last exactly `mtu` bytes (as peers check).
pub fn segments(msg: Message, len: u64, mtu: u32) -> impl Iterator<Item = Segment> {
    use Op::*;
    let mtu = u64::from(mtu.max(256));
    let n = len.div_ceil(mtu).max(1);
    let (only, first, middle, last) = match msg {
        Message::Send { imm: true, .. } => (SendOnlyImm, SendFirst, SendMiddle, SendLastImm),
        Message::Send { inv: true, .. } => (SendOnlyInv, SendFirst, SendMiddle, SendLastInv),
        Message::Send { .. } => (SendOnly, SendFirst, SendMiddle, SendLast),
        Message::Write { imm: true } => (WriteOnlyImm, WriteFirst, WriteMiddle, WriteLastImm),
        Message::Write { imm: false } => (WriteOnly, WriteFirst, WriteMiddle, WriteLast),
        Message::ReadResponse => (
            ReadResponseOnly,
            ReadResponseFirst,
            ReadResponseMiddle,
            ReadResponseLast,
        ),
    };
    (0..n).map(move |i| {
        let offset = i * mtu;
        let op = match (i, n) {
            (_, 1) => only,
            (0, _) => first,
            (i, n) if i + 1 == n => last,
            _ => middle,
        };
        // At most one MTU, so it fits a u32.
        let len = (len - offset).min(mtu) as u32;
        Segment { op, offset, len }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rc(op: Op) -> Opcode {
        Opcode {
            transport: Transport::Rc,
            op,
        }
    }

    /// A packet of `opcode` with every header its shape calls for.
    fn full(opcode: Opcode, payload: &[u8]) -> Packet {
        let s = opcode.shape();
        let mut p = Packet::new(opcode, 0x12_3456, 0xff_fffe);
        p.se = s.last && s.request;
        p.ack_req = s.last;
        p.reth = s.reth.then(|| Reth {
            va: U64::new(0x1122_3344_5566_7788),
            rkey: U32::new(0xabcd_ef01),
            dma_len: U32::new(4096),
        });
        p.aeth = s.aeth.then_some(Aeth {
            syndrome: syndrome::ACK | 31,
            msn: [1, 2, 3],
        });
        p.atomic_eth = s.atomic_eth.then(|| AtomicEth {
            va: U64::new(0x1000),
            rkey: U32::new(7),
            swap_add: U64::new(5),
            compare: U64::new(6),
        });
        p.atomic_ack = s.atomic_ack_eth.then_some(0xdead_beef_0000_0001);
        p.imm = s.imm.then_some(0x0102_0304);
        p.ieth = s.ieth.then_some(0x0000_0a0b);
        p.deth = s.deth.then(|| Deth {
            qkey: U32::new(0x8001_0000),
            reserved: 0,
            src_qp: [0, 0, 1],
        });
        p.feth = s.feth.then_some(0x11);
        if s.payload {
            p.payload = payload.to_vec();
        }
        p
    }

    #[test]
    fn every_opcode_round_trips_with_its_headers() {
        let mut seen = 0;
        for byte in 0..=u8::MAX {
            let Some(opcode) = Opcode::from_byte(byte) else {
                continue;
            };
            seen += 1;
            assert_eq!(opcode.byte(), byte);
            for payload in [&b""[..], b"a", b"abcd", b"abcdefg"] {
                let p = full(opcode, payload);
                let mut bytes = Vec::new();
                p.emit(&mut bytes).expect("well formed");
                assert_eq!(bytes.len() % 4, 0, "{opcode:?}: padded");
                assert_eq!(Packet::parse(&bytes), Ok(p), "{opcode:?} {payload:?}");
            }
        }
        // RC's 25, UC's 12, UD's 2.
        assert_eq!(seen, 25 + 12 + 2);
    }

    #[test]
    fn the_bth_sits_where_peers_read_it() {
        let mut p = full(rc(Op::WriteOnlyImm), b"xyz");
        p.pkey = 0xffff;
        let mut b = Vec::new();
        p.emit(&mut b).expect("well formed");
        // Opcode, SE and a pad of one byte, P_Key, destination QP, AckReq,
        // PSN.
        assert_eq!(
            &b[..BTH_LEN],
            &[0x0b, 0x90, 0xff, 0xff, 0, 0x12, 0x34, 0x56, 0x80, 0xff, 0xff, 0xfe]
        );
        // RETH, then the immediate data, then the payload and its pad.
        assert_eq!(
            &b[BTH_LEN..BTH_LEN + 8],
            &0x1122_3344_5566_7788u64.to_be_bytes()
        );
        assert_eq!(&b[BTH_LEN + 16..BTH_LEN + 20], &[1, 2, 3, 4]);
        assert_eq!(&b[BTH_LEN + 20..], b"xyz\0");
        assert_eq!(b.len(), BTH_LEN + 16 + 4 + 4);
    }

    /// A FLUSH carries its FETH right after the BTH and its RETH after
    /// that: where rxe (rxe_opcode.c, IB_OPCODE_RC_FLUSH) reads them. An
    /// ATOMIC WRITE is a RETH and its 8 bytes.
    #[test]
    fn a_flush_has_its_feth_before_its_reth() {
        let mut p = Packet::new(rc(Op::Flush), 5, 1);
        p.feth = Some(0x11);
        p.reth = Some(Reth {
            va: U64::new(0x1000),
            rkey: U32::new(0xabcd),
            dma_len: U32::new(64),
        });
        let mut b = Vec::new();
        p.emit(&mut b).expect("well formed");
        assert_eq!(&b[BTH_LEN..BTH_LEN + 4], &[0, 0, 0, 0x11], "FETH");
        assert_eq!(
            &b[BTH_LEN + 4..BTH_LEN + 12],
            &0x1000u64.to_be_bytes(),
            "RETH"
        );
        assert_eq!(b.len(), BTH_LEN + 4 + 16);
        assert_eq!(Packet::parse(&b), Ok(p));
        let mut w = Packet::new(rc(Op::AtomicWrite), 5, 2);
        w.reth = Some(Reth {
            va: U64::new(0x1008),
            rkey: U32::new(0xabcd),
            dma_len: U32::new(8),
        });
        w.payload = b"8 bytes!".to_vec();
        let mut b = Vec::new();
        w.emit(&mut b).expect("well formed");
        assert_eq!(&b[BTH_LEN + 16..], b"8 bytes!");
    }

    #[test]
    fn what_no_sender_sends_is_refused() {
        let mut good = Vec::new();
        full(rc(Op::SendOnly), b"data").emit(&mut good).expect("ok");
        // Every truncation of a packet with headers is refused or shorter.
        let mut read = Vec::new();
        full(rc(Op::ReadRequest), b"").emit(&mut read).expect("ok");
        for n in 0..read.len() {
            assert!(Packet::parse(&read[..n]).is_err(), "{n} bytes of a READ");
        }
        // Transport version.
        let mut b = good.clone();
        b[1] |= 1;
        assert_eq!(Packet::parse(&b), Err(Malformed::Version(1)));
        // Opcodes: UC has no READ, UD no WRITE, RD and reserved codes none here.
        for op in [0x2c, 0x66, 0x40, 0x15, 0x18, 0x1f, 0xe0] {
            b = good.clone();
            b[0] = op;
            assert_eq!(Packet::parse(&b), Err(Malformed::Opcode(op)), "{op:#x}");
        }
        // A pad count longer than the payload, a payload unaligned.
        b = Vec::new();
        full(rc(Op::SendOnly), b"").emit(&mut b).expect("ok");
        b[1] |= 3 << 4;
        assert_eq!(Packet::parse(&b), Err(Malformed::Truncated));
        b = good.clone();
        b.push(0);
        assert_eq!(Packet::parse(&b), Err(Malformed::Payload));
        // A payload on an opcode without one.
        let mut ack = Vec::new();
        full(rc(Op::Acknowledge), b"").emit(&mut ack).expect("ok");
        ack.extend_from_slice(b"more");
        assert_eq!(Packet::parse(&ack), Err(Malformed::Payload));
        // Emitting a packet that lacks a header its opcode needs.
        let mut p = full(rc(Op::WriteFirst), b"");
        p.reth = None;
        assert_eq!(p.emit(&mut Vec::new()), Err(Malformed::Headers));
    }

    #[test]
    fn messages_are_cut_at_the_mtu() {
        let w = Message::Write { imm: false };
        let one: Vec<_> = segments(w, 0, 1024).collect();
        assert_eq!(
            one,
            [Segment {
                op: Op::WriteOnly,
                offset: 0,
                len: 0
            }]
        );
        let s: Vec<_> = segments(
            Message::Send {
                imm: true,
                inv: false,
            },
            2500,
            1024,
        )
        .collect();
        let ops: Vec<_> = s.iter().map(|s| (s.op, s.offset, s.len)).collect();
        assert_eq!(
            ops,
            [
                (Op::SendFirst, 0, 1024),
                (Op::SendMiddle, 1024, 1024),
                (Op::SendLastImm, 2048, 452)
            ]
        );
        let mib: Vec<_> = segments(Message::ReadResponse, 1 << 20, 1024).collect();
        assert_eq!(mib.len(), 1024);
        assert_eq!(mib[0].op, Op::ReadResponseFirst);
        assert_eq!(mib[1023].op, Op::ReadResponseLast);
        assert!(mib.iter().all(|s| s.len == 1024));
        let exact: Vec<_> = segments(w, 2048, 1024).map(|s| s.op).collect();
        assert_eq!(exact, [Op::WriteFirst, Op::WriteLast]);
        // First and last as the opcodes' shapes say.
        for s in segments(
            Message::Send {
                imm: false,
                inv: true,
            },
            5000,
            4096,
        ) {
            let shape = s.op.shape();
            assert_eq!(shape.first, s.offset == 0);
            assert_eq!(shape.last, u64::from(s.len) + s.offset == 5000);
        }
    }
}
