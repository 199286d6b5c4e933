// SPDX-License-Identifier: GPL-2.0

//! Encoding work requests into the device's send and receive queue elements
//! (`struct virtio_rdma_sq_req` / `virtio_rdma_rq_req`, then the scatter/gather entries or the
//! inline data), and checking the elements a process wrote into a user QP's ring (`uring.rs`).
//! Pure, so that KUnit can test it; `qp.rs` lends the buffers to the device.

use kernel::{
    bindings,
    prelude::*,
    rdma::{QpCap, SendOp, Sge},
};
use zerocopy::{FromBytes, FromZeros, IntoBytes};
use zerocopy_derive::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::{
    abi,
    wr_table::{self, Posted},
};

/// Scatter/gather entries per work request the driver supports (at most).
pub(crate) const MAX_SGE: u32 = 16;

const SQ_REQ_LEN: usize = core::mem::size_of::<abi::SqReq>();
const RQ_REQ_LEN: usize = core::mem::size_of::<abi::RqReq>();
const SGE_LEN: usize = core::mem::size_of::<abi::Sge>();

/// Size of a send queue element buffer: the request with `MAX_SGE` entries, or inline data.
const SQ_BUF_LEN: usize = 512;
const _: () = assert!(SQ_REQ_LEN + MAX_SGE as usize * SGE_LEN <= SQ_BUF_LEN);

/// Inline data a send request carries at most.
pub(crate) const MAX_INLINE: u32 = (SQ_BUF_LEN - SQ_REQ_LEN) as u32;

/// A send queue element (lent to the device, which reads it).
#[repr(C)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct SqBuf {
    bytes: [u8; SQ_BUF_LEN],
}

/// A receive queue element (lent to the device, which reads it).
#[repr(C)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct RqBuf {
    bytes: [u8; RQ_REQ_LEN + MAX_SGE as usize * SGE_LEN],
}

/// A send request, apart from its data.
#[derive(Clone, Copy)]
pub(crate) struct SendDesc {
    pub(crate) wr_id: u64,
    /// `enum ib_wr_opcode`.
    pub(crate) opcode: u32,
    /// `enum ib_send_flags`.
    pub(crate) send_flags: u32,
    /// Immediate data or the rkey to invalidate.
    pub(crate) ex: u32,
    pub(crate) op: SendOp,
    /// The destination of a UD/GSI send: remote QP number, Q_Key, address vector.
    pub(crate) ud: Option<(u32, u32, abi::Av)>,
    /// The registration a REG_MR request makes.
    pub(crate) reg: Option<abi::SqReg>,
}

/// Writes the request header of `desc` into `buf`.
fn header(buf: &mut [u8], desc: &SendDesc, num_sge: usize, inline_len: usize) -> Result {
    let mut req = abi::SqReq::new_zeroed();
    req.wr_id.set(desc.wr_id);
    req.opcode = u8::try_from(desc.opcode).map_err(|_| EINVAL)?;
    req.num_sge.set(u16::try_from(num_sge).map_err(|_| EINVAL)?);
    req.send_flags.set(desc.send_flags);
    req.ex.set(desc.ex);
    req.inline_len
        .set(u32::try_from(inline_len).map_err(|_| EINVAL)?);
    match desc.op {
        SendOp::Send => {
            if let Some((remote_qpn, remote_qkey, av)) = desc.ud {
                let ud = abi::SqUd {
                    remote_qpn: remote_qpn.into(),
                    remote_qkey: remote_qkey.into(),
                    av,
                };
                req.wr[..core::mem::size_of::<abi::SqUd>()].copy_from_slice(ud.as_bytes());
            }
        }
        SendOp::Rdma { remote_addr, rkey } => {
            let rdma = abi::SqRdma {
                remote_addr: remote_addr.into(),
                rkey: rkey.into(),
                reserved: 0.into(),
            };
            req.wr[..core::mem::size_of::<abi::SqRdma>()].copy_from_slice(rdma.as_bytes());
        }
        SendOp::Atomic {
            remote_addr,
            compare_add,
            swap,
            rkey,
        } => {
            let atomic = abi::SqAtomic {
                remote_addr: remote_addr.into(),
                compare_add: compare_add.into(),
                swap: swap.into(),
                rkey: rkey.into(),
                reserved: 0.into(),
            };
            req.wr[..core::mem::size_of::<abi::SqAtomic>()].copy_from_slice(atomic.as_bytes());
        }
        // The rkey to invalidate is in `ex`.
        SendOp::LocalInv => {}
        SendOp::Reg => {
            let reg = desc.reg.ok_or(EINVAL)?;
            req.wr[..core::mem::size_of::<abi::SqReg>()].copy_from_slice(reg.as_bytes());
        }
        SendOp::Other => return Err(EOPNOTSUPP),
    }
    buf.get_mut(..SQ_REQ_LEN)
        .ok_or(EINVAL)?
        .copy_from_slice(req.as_bytes());
    Ok(())
}

/// Writes `sges` from `offset` of `buf`; returns the end.
fn write_sges(buf: &mut [u8], offset: usize, sges: &[Sge]) -> Result<usize> {
    let mut at = offset;
    for sge in sges {
        let wire = abi::Sge {
            addr: sge.addr.into(),
            length: sge.length.into(),
            lkey: sge.lkey.into(),
        };
        buf.get_mut(at..at + SGE_LEN)
            .ok_or(EINVAL)?
            .copy_from_slice(wire.as_bytes());
        at += SGE_LEN;
    }
    Ok(at)
}

/// Encodes a send request with a scatter/gather list of at most `max_sge` entries; returns the
/// element's length.
pub(crate) fn encode_send(
    buf: &mut SqBuf,
    desc: &SendDesc,
    sges: &[Sge],
    max_sge: u32,
) -> Result<usize> {
    if sges.len() > max_sge as usize {
        return Err(EINVAL);
    }
    header(&mut buf.bytes, desc, sges.len(), 0)?;
    write_sges(&mut buf.bytes, SQ_REQ_LEN, sges)
}

/// Encodes an inline send request whose data `fill` copies into the slice it gets (at most
/// `max_inline` bytes) and whose length it returns; returns the element's length.
pub(crate) fn encode_send_inline(
    buf: &mut SqBuf,
    desc: &SendDesc,
    max_inline: u32,
    fill: impl FnOnce(&mut [u8]) -> Result<usize>,
) -> Result<usize> {
    let room = &mut buf.bytes[SQ_REQ_LEN..SQ_REQ_LEN + max_inline.min(MAX_INLINE) as usize];
    let room_len = room.len();
    let len = fill(room)?;
    if len > room_len {
        return Err(EINVAL);
    }
    header(&mut buf.bytes, desc, 0, len)?;
    Ok(SQ_REQ_LEN + len)
}

/// Encodes a receive request with at most `max_sge` entries; returns the element's length.
pub(crate) fn encode_recv(
    buf: &mut RqBuf,
    wr_id: u64,
    sges: &[Sge],
    max_sge: u32,
) -> Result<usize> {
    if sges.len() > max_sge as usize {
        return Err(EINVAL);
    }
    let req = abi::RqReq {
        wr_id: wr_id.into(),
        num_sge: u32::try_from(sges.len()).map_err(|_| EINVAL)?.into(),
        reserved: 0.into(),
    };
    buf.bytes[..RQ_REQ_LEN].copy_from_slice(req.as_bytes());
    write_sges(&mut buf.bytes, RQ_REQ_LEN, sges)
}

/// Total length of the `num_sge` entries from `offset` of `bytes` (saturating).
fn sge_bytes(bytes: &[u8], offset: usize, num_sge: usize) -> u32 {
    (0..num_sge)
        .filter_map(|i| abi::Sge::read_from_prefix(bytes.get(offset + i * SGE_LEN..)?).ok())
        .fold(0u32, |sum, (sge, _)| sum.saturating_add(sge.length.get()))
}

/// An element of a work queue, as the work request table sees it.
pub(crate) trait WorkElement {
    /// What the driver keeps of the request encoded (or checked) in this element, for a QP
    /// that signals every send request if `sig_all`; `None` if the element is malformed.
    fn posted(&self, sig_all: bool) -> Option<Posted>;

    /// Puts `token` where the element's `wr_id` is: the device sees only the token.
    fn set_token(&mut self, token: u64);
}

impl WorkElement for SqBuf {
    fn posted(&self, sig_all: bool) -> Option<Posted> {
        let (req, _) = abi::SqReq::read_from_prefix(&self.bytes).ok()?;
        let flags = req.send_flags.get();
        let len = if flags & SEND_INLINE != 0 {
            req.inline_len.get()
        } else {
            let num_sge = usize::from(req.num_sge.get()).min(MAX_SGE as usize);
            sge_bytes(&self.bytes, SQ_REQ_LEN, num_sge)
        };
        Some(Posted {
            wr_id: req.wr_id.get(),
            len,
            opcode: wr_table::wc_opcode(req.opcode.into()),
            signaled: sig_all || flags & bindings::ib_send_flags_IB_SEND_SIGNALED as u32 != 0,
        })
    }

    fn set_token(&mut self, token: u64) {
        self.bytes[..8].copy_from_slice(&token.to_le_bytes());
    }
}

impl WorkElement for RqBuf {
    fn posted(&self, _sig_all: bool) -> Option<Posted> {
        let (req, _) = abi::RqReq::read_from_prefix(&self.bytes).ok()?;
        let num_sge = usize::try_from(req.num_sge.get())
            .ok()?
            .min(MAX_SGE as usize);
        Some(Posted {
            wr_id: req.wr_id.get(),
            len: sge_bytes(&self.bytes, RQ_REQ_LEN, num_sge),
            opcode: bindings::ib_wc_opcode_IB_WC_RECV as u8,
            signaled: true,
        })
    }

    fn set_token(&mut self, token: u64) {
        self.bytes[..8].copy_from_slice(&token.to_le_bytes());
    }
}

/// `IB_SEND_*` flags a process may set in its send elements.
const USER_SEND_FLAGS: u32 = (bindings::ib_send_flags_IB_SEND_FENCE
    | bindings::ib_send_flags_IB_SEND_SIGNALED
    | bindings::ib_send_flags_IB_SEND_SOLICITED
    | bindings::ib_send_flags_IB_SEND_INLINE) as u32;

const SEND_INLINE: u32 = bindings::ib_send_flags_IB_SEND_INLINE as u32;

/// The bit of a controlled Q_Key (IBA 10.2.4).
const CONTROLLED_QKEY: u32 = 1 << 31;

/// Checks a send element a process wrote for a QP with limits `cap` (UD if `ud`); returns its
/// length. Only what a process may post passes: sends (the only operation of UD), RDMA
/// WRITE/READ, atomics (ATOMIC WRITE too), FLUSH, and binding and invalidating windows, with at most `cap`'s SGEs or
/// inline data. Memory registration is the kernel's (a REG_MR element carries guest-physical
/// addresses), and so are controlled Q_Keys. An invalidation reaches only keys of the QP's own
/// PD, which holds no fast-registration MR (only the kernel has those). Keys, addresses and
/// lengths are the device's to check: a bad one completes in error.
pub(crate) fn check_user_send(buf: &SqBuf, cap: &QpCap, ud: bool) -> Result<usize> {
    let (req, _) = abi::SqReq::read_from_prefix(&buf.bytes).map_err(|_| EINVAL)?;
    let opcode = u32::from(req.opcode);
    let send = matches!(
        opcode,
        bindings::ib_wr_opcode_IB_WR_SEND | bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM
    );
    let write = matches!(
        opcode,
        bindings::ib_wr_opcode_IB_WR_RDMA_WRITE | bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
    );
    let other = matches!(
        opcode,
        bindings::ib_wr_opcode_IB_WR_RDMA_READ
            | bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
            | bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD
            | bindings::ib_wr_opcode_IB_WR_BIND_MW
            | bindings::ib_wr_opcode_IB_WR_LOCAL_INV
            | bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV
            | bindings::ib_wr_opcode_IB_WR_ATOMIC_WRITE
            | bindings::ib_wr_opcode_IB_WR_FLUSH
    );
    if !(send || (!ud && (write || other))) {
        return Err(EINVAL);
    }
    if ud {
        // Q_Keys with the high bit set are controlled (the GSI QP's among them): only the
        // kernel may send with one.
        let (dest, _) = abi::SqUd::read_from_prefix(&req.wr).map_err(|_| EINVAL)?;
        if dest.remote_qkey.get() & CONTROLLED_QKEY != 0 {
            return Err(EINVAL);
        }
    }
    let flags = req.send_flags.get();
    if flags & !USER_SEND_FLAGS != 0 {
        return Err(EINVAL);
    }
    let num_sge = u32::from(req.num_sge.get());
    let inline_len = req.inline_len.get();
    if flags & SEND_INLINE != 0 {
        if num_sge != 0 || inline_len > cap.max_inline_data.min(MAX_INLINE) || !(send || write) {
            return Err(EINVAL);
        }
        Ok(SQ_REQ_LEN + inline_len as usize)
    } else {
        if inline_len != 0 || num_sge > cap.max_send_sge.min(MAX_SGE) {
            return Err(EINVAL);
        }
        Ok(SQ_REQ_LEN + num_sge as usize * SGE_LEN)
    }
}

/// Checks a receive element a process wrote for a QP with limits `cap`; returns its length.
pub(crate) fn check_user_recv(buf: &RqBuf, cap: &QpCap) -> Result<usize> {
    let (req, _) = abi::RqReq::read_from_prefix(&buf.bytes).map_err(|_| EINVAL)?;
    let num_sge = req.num_sge.get();
    if num_sge > cap.max_recv_sge.min(MAX_SGE) || req.reserved.get() != 0 {
        return Err(EINVAL);
    }
    Ok(RQ_REQ_LEN + num_sge as usize * SGE_LEN)
}

#[kunit_tests(virtio_rdma_wqe)]
mod tests {
    use super::*;

    fn sge(addr: u64, length: u32, lkey: u32) -> Sge {
        Sge { addr, length, lkey }
    }

    fn desc(opcode: u32, op: SendOp) -> SendDesc {
        SendDesc {
            wr_id: 0x1122_3344_5566_7788,
            opcode,
            send_flags: bindings::ib_send_flags_IB_SEND_SIGNALED as u32,
            ex: 0xdead_beef,
            op,
            ud: None,
            reg: None,
        }
    }

    #[test]
    fn ud_send_carries_its_destination() {
        let mut buf = SqBuf::new_zeroed();
        let av = abi::Av {
            dgid: [7; 16],
            ..Default::default()
        };
        let d = SendDesc {
            ud: Some((0x1234, 0x8001_0000, av)),
            ..desc(bindings::ib_wr_opcode_IB_WR_SEND, SendOp::Send)
        };
        assert_eq!(encode_send(&mut buf, &d, &[sge(1, 2, 3)], 1), Ok(80));
        assert_eq!(&buf.bytes[24..28], &0x1234u32.to_le_bytes());
        assert_eq!(&buf.bytes[28..32], &0x8001_0000u32.to_le_bytes());
        assert_eq!(&buf.bytes[32..48], &[7; 16]);
    }

    #[test]
    fn send_with_sges() {
        let mut buf = SqBuf::new_zeroed();
        let d = desc(bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM, SendOp::Send);
        let sges = [sge(0x1000, 100, 0x500), sge(0x2000, 28, 0x501)];
        assert_eq!(encode_send(&mut buf, &d, &sges, 2), Ok(64 + 32));
        let b = &buf.bytes;
        assert_eq!(&b[0..8], &0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(b[8], bindings::ib_wr_opcode_IB_WR_SEND_WITH_IMM as u8);
        assert_eq!(&b[10..12], &[2, 0]);
        assert_eq!(&b[16..20], &0xdead_beefu32.to_le_bytes());
        assert_eq!(&b[64..72], &0x1000u64.to_le_bytes());
        assert_eq!(&b[72..76], &100u32.to_le_bytes());
        assert_eq!(&b[76..80], &0x500u32.to_le_bytes());
        assert_eq!(&b[92..96], &0x501u32.to_le_bytes());
        // More entries than the QP has room for.
        assert_eq!(encode_send(&mut buf, &d, &sges, 1), Err(EINVAL));
    }

    #[test]
    fn rdma_and_atomic_payloads() {
        let mut buf = SqBuf::new_zeroed();
        let d = desc(
            bindings::ib_wr_opcode_IB_WR_RDMA_WRITE,
            SendOp::Rdma {
                remote_addr: 0xabcd_0000,
                rkey: 0x1234,
            },
        );
        assert_eq!(encode_send(&mut buf, &d, &[sge(1, 2, 3)], 4), Ok(80));
        assert_eq!(&buf.bytes[24..32], &0xabcd_0000u64.to_le_bytes());
        assert_eq!(&buf.bytes[32..36], &0x1234u32.to_le_bytes());
        let d = desc(
            bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP,
            SendOp::Atomic {
                remote_addr: 0x8000,
                compare_add: 7,
                swap: 9,
                rkey: 0x77,
            },
        );
        assert_eq!(encode_send(&mut buf, &d, &[sge(1, 8, 3)], 1), Ok(80));
        assert_eq!(&buf.bytes[24..32], &0x8000u64.to_le_bytes());
        assert_eq!(&buf.bytes[32..40], &7u64.to_le_bytes());
        assert_eq!(&buf.bytes[40..48], &9u64.to_le_bytes());
        assert_eq!(&buf.bytes[48..52], &0x77u32.to_le_bytes());
        // An opcode the driver does not describe is refused, not sent half-encoded.
        let d = desc(bindings::ib_wr_opcode_IB_WR_BIND_MW, SendOp::Other);
        assert_eq!(encode_send(&mut buf, &d, &[], 1), Err(EOPNOTSUPP));
        // A REG_MR without its registration too.
        let d = desc(bindings::ib_wr_opcode_IB_WR_REG_MR, SendOp::Reg);
        assert_eq!(encode_send(&mut buf, &d, &[], 1), Err(EINVAL));
        let reg = abi::SqReg {
            mrn: 9.into(),
            key: 0x42.into(),
            access: 6.into(),
            npages: 2.into(),
            iova: 0x1_0000.into(),
            length: 8192.into(),
            pages: 0xabc000.into(),
        };
        let d = SendDesc {
            reg: Some(reg),
            ..d
        };
        assert_eq!(encode_send(&mut buf, &d, &[], 1), Ok(64));
        assert_eq!(&buf.bytes[24..28], &9u32.to_le_bytes());
        assert_eq!(&buf.bytes[36..40], &2u32.to_le_bytes());
        assert_eq!(&buf.bytes[56..64], &0xabc000u64.to_le_bytes());
    }

    #[test]
    fn inline_data_is_bounded() {
        let mut buf = SqBuf::new_zeroed();
        let d = desc(bindings::ib_wr_opcode_IB_WR_SEND, SendOp::Send);
        let len = encode_send_inline(&mut buf, &d, 64, |room| {
            room[..5].copy_from_slice(b"hello");
            Ok(5)
        });
        assert_eq!(len, Ok(69));
        assert_eq!(&buf.bytes[20..24], &5u32.to_le_bytes());
        assert_eq!(&buf.bytes[10..12], &[0, 0]);
        assert_eq!(&buf.bytes[64..69], b"hello");
        // The room handed out is the QP's inline limit, never more than the buffer.
        let _ = encode_send_inline(&mut buf, &d, 64, |room| {
            assert_eq!(room.len(), 64);
            Ok(0)
        });
        let _ = encode_send_inline(&mut buf, &d, u32::MAX, |room| {
            assert_eq!(room.len(), MAX_INLINE as usize);
            Ok(0)
        });
    }

    #[test]
    fn receive_elements() {
        let mut buf = RqBuf::new_zeroed();
        let sges = [sge(0x3000, 4096, 0x600)];
        assert_eq!(encode_recv(&mut buf, 42, &sges, 1), Ok(32));
        assert_eq!(&buf.bytes[0..8], &42u64.to_le_bytes());
        assert_eq!(&buf.bytes[8..12], &1u32.to_le_bytes());
        assert_eq!(&buf.bytes[16..24], &0x3000u64.to_le_bytes());
        assert_eq!(
            encode_recv(&mut buf, 42, &[sges[0], sges[0]], 1),
            Err(EINVAL)
        );
        assert_eq!(encode_recv(&mut buf, 42, &[], 1), Ok(16));
    }

    #[test]
    fn posted_requests_are_what_was_encoded() {
        let mut buf = SqBuf::new_zeroed();
        let mut d = desc(
            bindings::ib_wr_opcode_IB_WR_RDMA_READ,
            SendOp::Rdma {
                remote_addr: 0,
                rkey: 1,
            },
        );
        d.send_flags = 0;
        let sges = [sge(0x1000, 100, 0x500), sge(0x2000, 28, 0x501)];
        assert_eq!(encode_send(&mut buf, &d, &sges, 2), Ok(96));
        let p = buf.posted(false);
        assert_eq!(
            p.map(|p| (p.wr_id, p.len, p.signaled)),
            Some((d.wr_id, 128, false))
        );
        assert_eq!(
            p.map(|p| p.opcode),
            Some(bindings::ib_wc_opcode_IB_WC_RDMA_READ as u8)
        );
        // The QP's sq_sig_all signals it.
        assert_eq!(buf.posted(true).map(|p| p.signaled), Some(true));
        // The device sees the token, not the wr_id.
        buf.set_token(0x1_0000_0007);
        assert_eq!(&buf.bytes[0..8], &0x1_0000_0007u64.to_le_bytes());
        // Inline data, as a consumer posts it (IB_SEND_INLINE in its flags).
        let mut d = desc(bindings::ib_wr_opcode_IB_WR_SEND, SendOp::Send);
        d.send_flags |= SEND_INLINE;
        let _ = encode_send_inline(&mut buf, &d, 64, |room| {
            room[..5].copy_from_slice(b"hello");
            Ok(5)
        });
        assert_eq!(
            buf.posted(false).map(|p| (p.len, p.signaled)),
            Some((5, true))
        );
        let mut rbuf = RqBuf::new_zeroed();
        assert_eq!(
            encode_recv(&mut rbuf, 42, &[sge(0x3000, 4096, 0x600)], 1),
            Ok(32)
        );
        assert_eq!(
            rbuf.posted(false).map(|p| (p.wr_id, p.len)),
            Some((42, 4096))
        );
    }

    const CAP: QpCap = QpCap {
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 2,
        max_recv_sge: 3,
        max_inline_data: 64,
    };

    /// A send element as a process would write it.
    fn user_send(opcode: u32, flags: u32, num_sge: u16, inline_len: u32) -> SqBuf {
        let mut buf = SqBuf::new_zeroed();
        let mut req = abi::SqReq::new_zeroed();
        req.opcode = opcode as u8;
        req.send_flags.set(flags);
        req.num_sge.set(num_sge);
        req.inline_len.set(inline_len);
        buf.bytes[..SQ_REQ_LEN].copy_from_slice(req.as_bytes());
        buf
    }

    #[test]
    fn user_send_elements_are_checked() {
        let signaled = bindings::ib_send_flags_IB_SEND_SIGNALED as u32;
        let inline = SEND_INLINE;
        let send = bindings::ib_wr_opcode_IB_WR_SEND;
        let write = bindings::ib_wr_opcode_IB_WR_RDMA_WRITE;
        let read = bindings::ib_wr_opcode_IB_WR_RDMA_READ;
        let check = |buf: &SqBuf, ud: bool| check_user_send(buf, &CAP, ud);
        // What rc_pingpong and perftest post.
        assert_eq!(
            check(&user_send(send, signaled, 1, 0), false),
            Ok(SQ_REQ_LEN + SGE_LEN)
        );
        assert_eq!(
            check(&user_send(read, 0, 2, 0), false),
            Ok(SQ_REQ_LEN + 2 * SGE_LEN)
        );
        assert_eq!(
            check(&user_send(write, inline, 0, 64), false),
            Ok(SQ_REQ_LEN + 64)
        );
        assert_eq!(
            check(&user_send(send, signaled, 1, 0), true),
            Ok(SQ_REQ_LEN + SGE_LEN)
        );
        // Windows (bound and invalidated by the process), ATOMIC WRITE and FLUSH (their
        // operands in the element): not on UD.
        for op in [
            bindings::ib_wr_opcode_IB_WR_BIND_MW,
            bindings::ib_wr_opcode_IB_WR_LOCAL_INV,
            bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV,
            bindings::ib_wr_opcode_IB_WR_ATOMIC_WRITE,
            bindings::ib_wr_opcode_IB_WR_FLUSH,
        ] {
            assert_eq!(check(&user_send(op, 0, 0, 0), false), Ok(SQ_REQ_LEN));
            assert_eq!(check(&user_send(op, 0, 0, 0), true), Err(EINVAL));
        }
        // Kernel-only operations, and anything but sends on UD.
        for op in [bindings::ib_wr_opcode_IB_WR_REG_MR, 0xff] {
            assert_eq!(check(&user_send(op, 0, 1, 0), false), Err(EINVAL));
        }
        assert_eq!(check(&user_send(write, 0, 1, 0), true), Err(EINVAL));
        // A UD send with a controlled Q_Key (the GSI QP's, say).
        let mut gsi = user_send(send, signaled, 1, 0);
        let ud = abi::SqUd {
            remote_qpn: 1.into(),
            remote_qkey: 0x8001_0000.into(),
            av: Default::default(),
        };
        let at = core::mem::offset_of!(abi::SqReq, wr);
        gsi.bytes[at..at + core::mem::size_of::<abi::SqUd>()].copy_from_slice(ud.as_bytes());
        assert_eq!(check(&gsi, true), Err(EINVAL));
        // Limits: SGEs, inline length, inline with SGEs or on a READ, unknown flags.
        assert_eq!(check(&user_send(send, 0, 3, 0), false), Err(EINVAL));
        assert_eq!(check(&user_send(send, inline, 0, 65), false), Err(EINVAL));
        assert_eq!(check(&user_send(send, inline, 1, 8), false), Err(EINVAL));
        assert_eq!(check(&user_send(read, inline, 0, 8), false), Err(EINVAL));
        assert_eq!(check(&user_send(send, 0, 1, 8), false), Err(EINVAL));
        assert_eq!(check(&user_send(send, 1 << 20, 1, 0), false), Err(EINVAL));
    }

    #[test]
    fn user_receive_elements_are_checked() {
        let mut buf = RqBuf::new_zeroed();
        let mut req = abi::RqReq::new_zeroed();
        req.num_sge.set(3);
        buf.bytes[..RQ_REQ_LEN].copy_from_slice(req.as_bytes());
        assert_eq!(check_user_recv(&buf, &CAP), Ok(RQ_REQ_LEN + 3 * SGE_LEN));
        req.num_sge.set(4);
        buf.bytes[..RQ_REQ_LEN].copy_from_slice(req.as_bytes());
        assert_eq!(check_user_recv(&buf, &CAP), Err(EINVAL));
        req.num_sge.set(u32::MAX);
        buf.bytes[..RQ_REQ_LEN].copy_from_slice(req.as_bytes());
        assert_eq!(check_user_recv(&buf, &CAP), Err(EINVAL));
    }
}
