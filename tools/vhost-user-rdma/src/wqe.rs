// SPDX-License-Identifier: GPL-2.0
//! SQ and RQ elements: parsing the bytes of one descriptor chain into a
//! work request, bounded by the QP's capacities.

use smallvec::SmallVec;
use zerocopy::{FromBytes, FromZeros};

use crate::abi::{
    VirtioRdmaRqReq, VirtioRdmaSge, VirtioRdmaSqAtomic, VirtioRdmaSqBind, VirtioRdmaSqFlush,
    VirtioRdmaSqRdma, VirtioRdmaSqReg, VirtioRdmaSqReq, VirtioRdmaSqUd, VirtioRdmaSqXrc,
};
use crate::ib::*;
use crate::mw::BindReq;

/// Header size of an SQ element.
pub const SQ_HDR_LEN: usize = core::mem::size_of::<VirtioRdmaSqReq>();
/// Header size of an RQ element.
pub const RQ_HDR_LEN: usize = core::mem::size_of::<VirtioRdmaRqReq>();
/// Size of one SGE.
pub const SGE_LEN: usize = core::mem::size_of::<VirtioRdmaSge>();

/// A gather or scatter list: kept inline up to four entries, so that a
/// work request costs no heap allocation in the common case.
pub type Sges = SmallVec<[Sge; 4]>;
/// Inline data of a send: kept inline up to 64 bytes.
pub type Inline = SmallVec<[u8; 64]>;

/// One scatter/gather element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sge {
    /// IOVA (guest-physical for the DMA MR).
    pub addr: u64,
    /// Bytes.
    pub length: u32,
    /// Local key.
    pub lkey: u32,
}

/// A parsed SQ element.
#[derive(Clone, Debug)]
pub struct SendWqe {
    /// Consumer's ID.
    pub wr_id: u64,
    /// `enum ib_wr_opcode`.
    pub opcode: u8,
    /// `enum ib_send_flags`.
    pub send_flags: u32,
    /// Immediate data (as the guest wrote it) or rkey to invalidate.
    pub ex: u32,
    /// The opcode-specific part, raw.
    pub wr: [u8; 40],
    /// Gather list.
    pub sges: Sges,
    /// Inline payload (IB_SEND_INLINE).
    pub inline: Inline,
}

/// A parsed RQ element.
#[derive(Clone, Debug)]
pub struct RecvWqe {
    /// Consumer's ID.
    pub wr_id: u64,
    /// Scatter list.
    pub sges: Sges,
}

/// A malformed element: its wr_id (0 if unreadable) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed {
    /// The element's wr_id, as far as it could be read.
    pub wr_id: u64,
    /// What was wrong.
    pub why: String,
}

/// The wr_id of a (possibly malformed) element: its first 8 bytes, or 0.
pub(crate) fn wr_id_of(bytes: &[u8]) -> u64 {
    bytes
        .get(..8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0)
}

fn sges(bytes: &[u8], n: usize) -> Sges {
    bytes
        .chunks_exact(SGE_LEN)
        .take(n)
        .filter_map(|c| VirtioRdmaSge::read_from_bytes(c).ok())
        .map(|s| Sge {
            addr: s.addr.get(),
            length: s.length.get(),
            lkey: s.lkey.get(),
        })
        .collect()
}

/// Whether `opcode` is one the device executes.
pub fn known_opcode(opcode: u8) -> bool {
    matches!(
        opcode,
        IB_WR_RDMA_WRITE
            | IB_WR_RDMA_WRITE_WITH_IMM
            | IB_WR_SEND
            | IB_WR_SEND_WITH_IMM
            | IB_WR_RDMA_READ
            | IB_WR_ATOMIC_CMP_AND_SWP
            | IB_WR_ATOMIC_FETCH_AND_ADD
            | IB_WR_LOCAL_INV
            | IB_WR_BIND_MW
            | IB_WR_SEND_WITH_INV
            | IB_WR_REG_MR
            | IB_WR_FLUSH
            | IB_WR_ATOMIC_WRITE
    )
}

/// Parses an SQ element, bounded by the QP's `max_sge` and `max_inline`.
pub fn parse_send(bytes: &[u8], max_sge: u32, max_inline: u32) -> Result<SendWqe, Malformed> {
    let wr_id = wr_id_of(bytes);
    let bad = |why: String| Malformed { wr_id, why };
    let Ok((hdr, rest)) = VirtioRdmaSqReq::read_from_prefix(bytes) else {
        return Err(bad(format!(
            "element of {} bytes is shorter than its {SQ_HDR_LEN}-byte header",
            bytes.len()
        )));
    };
    let num_sge = usize::from(hdr.num_sge.get());
    let inline_len = hdr.inline_len.get();
    let flags = hdr.send_flags.get();
    if !known_opcode(hdr.opcode) {
        return Err(bad(format!("unknown opcode {:#x}", hdr.opcode)));
    }
    if num_sge > max_sge as usize {
        return Err(bad(format!("num_sge {num_sge} above the QP's {max_sge}")));
    }
    if flags & IB_SEND_INLINE == 0 && inline_len != 0 {
        return Err(bad("inline_len without IB_SEND_INLINE".into()));
    }
    if flags & IB_SEND_INLINE != 0 && (inline_len > max_inline || num_sge != 0) {
        return Err(bad(format!(
            "inline element of {inline_len} bytes with {num_sge} SGEs (QP allows {max_inline} \
             inline bytes and no SGEs)"
        )));
    }
    let need = num_sge * SGE_LEN + inline_len as usize;
    if rest.len() < need {
        return Err(bad(format!(
            "element has {} bytes after the header, its SGEs and inline data need {need}",
            rest.len()
        )));
    }
    let inline_start = num_sge * SGE_LEN;
    Ok(SendWqe {
        wr_id,
        opcode: hdr.opcode,
        send_flags: flags,
        ex: hdr.ex.get(),
        wr: hdr.wr,
        sges: sges(rest, num_sge),
        inline: Inline::from_slice(&rest[inline_start..inline_start + inline_len as usize]),
    })
}

/// The send flags a process may use.
const USER_SEND_FLAGS: u32 = IB_SEND_FENCE | IB_SEND_SIGNALED | IB_SEND_SOLICITED | IB_SEND_INLINE;
/// The bit of a controlled Q_Key (IBA 10.2.4): only the kernel sends with one.
const CONTROLLED_QKEY: u32 = 1 << 31;

/// Checks that a process may post `w` on a QP (UD if `ud`): sends (the only
/// operation of UD), RDMA WRITE/READ, atomics, window binding and
/// invalidation, no controlled Q_Key. Registration is the kernel's: a
/// REG_MR element carries guest-physical addresses.
pub fn check_user(w: &SendWqe, ud: bool) -> Result<(), String> {
    let send = matches!(w.opcode, IB_WR_SEND | IB_WR_SEND_WITH_IMM);
    let other = matches!(
        w.opcode,
        IB_WR_RDMA_WRITE
            | IB_WR_RDMA_WRITE_WITH_IMM
            | IB_WR_RDMA_READ
            | IB_WR_ATOMIC_CMP_AND_SWP
            | IB_WR_ATOMIC_FETCH_AND_ADD
            | IB_WR_BIND_MW
            | IB_WR_LOCAL_INV
            | IB_WR_SEND_WITH_INV
            | IB_WR_FLUSH
            | IB_WR_ATOMIC_WRITE
    );
    if !(send || (!ud && other)) {
        return Err(format!(
            "opcode {:#x} is not for a process to post",
            w.opcode
        ));
    }
    if w.send_flags & !USER_SEND_FLAGS != 0 {
        return Err(format!(
            "send flags {:#x} are not for a process",
            w.send_flags
        ));
    }
    if ud && w.ud().remote_qkey.get() & CONTROLLED_QKEY != 0 {
        return Err("a controlled Q_Key is the kernel's".into());
    }
    Ok(())
}

/// Parses an RQ element, bounded by the QP's `max_sge`.
pub fn parse_recv(bytes: &[u8], max_sge: u32) -> Result<RecvWqe, Malformed> {
    let wr_id = wr_id_of(bytes);
    let bad = |why: String| Malformed { wr_id, why };
    let Ok((hdr, rest)) = VirtioRdmaRqReq::read_from_prefix(bytes) else {
        return Err(bad(format!(
            "element of {} bytes is shorter than its {RQ_HDR_LEN}-byte header",
            bytes.len()
        )));
    };
    let n = hdr.num_sge.get();
    if n > max_sge {
        return Err(bad(format!("num_sge {n} above the QP's {max_sge}")));
    }
    let n = n as usize;
    if rest.len() < n * SGE_LEN {
        return Err(bad(format!("{n} SGEs need {} bytes", n * SGE_LEN)));
    }
    Ok(RecvWqe {
        wr_id,
        sges: sges(rest, n),
    })
}

impl SendWqe {
    /// The RDMA part.
    pub fn rdma(&self) -> VirtioRdmaSqRdma {
        VirtioRdmaSqRdma::read_from_prefix(&self.wr)
            .map(|(v, _)| v)
            .unwrap_or_default()
    }

    /// The atomic part.
    pub fn atomic(&self) -> VirtioRdmaSqAtomic {
        VirtioRdmaSqAtomic::read_from_prefix(&self.wr)
            .map(|(v, _)| v)
            .unwrap_or_default()
    }

    /// The FLUSH part.
    pub fn flush(&self) -> VirtioRdmaSqFlush {
        VirtioRdmaSqFlush::read_from_prefix(&self.wr)
            .map(|(v, _)| v)
            .unwrap_or_default()
    }

    /// The XRC part (an XRC_INI QP's remote operations).
    pub fn xrc(&self) -> VirtioRdmaSqXrc {
        VirtioRdmaSqXrc::read_from_prefix(&self.wr)
            .map(|(v, _)| v)
            .unwrap_or(VirtioRdmaSqXrc::new_zeroed())
    }

    /// The UD part.
    pub fn ud(&self) -> VirtioRdmaSqUd {
        VirtioRdmaSqUd::read_from_prefix(&self.wr)
            .map(|(v, _)| v)
            .unwrap_or_default()
    }

    /// The REG_MR part.
    pub fn reg(&self) -> VirtioRdmaSqReg {
        VirtioRdmaSqReg::read_from_prefix(&self.wr)
            .map(|(v, _)| v)
            .unwrap_or_default()
    }

    /// The BIND_MW part.
    pub fn bind(&self) -> BindReq {
        let b = VirtioRdmaSqBind::read_from_prefix(&self.wr)
            .map(|(v, _)| v)
            .unwrap_or_default();
        BindReq {
            mw_rkey: b.mw_rkey.get(),
            new_rkey: b.new_rkey.get(),
            mr_lkey: b.mr_lkey.get(),
            addr: b.addr.get(),
            length: b.length.get(),
            access: b.access.get(),
        }
    }

    /// Whether the element asks for a completion (or the QP does).
    pub fn signaled(&self, sq_sig_all: bool) -> bool {
        sq_sig_all || self.send_flags & IB_SEND_SIGNALED != 0
    }

    /// Payload length: inline bytes or the sum of the SGEs.
    pub fn payload_len(&self) -> u64 {
        if self.send_flags & IB_SEND_INLINE != 0 {
            self.inline.len() as u64
        } else {
            self.sges.iter().map(|s| u64::from(s.length)).sum()
        }
    }
}

/// The completion opcode of a send opcode.
pub fn wc_opcode(opcode: u8) -> u8 {
    match opcode {
        IB_WR_RDMA_WRITE | IB_WR_RDMA_WRITE_WITH_IMM => IB_WC_RDMA_WRITE,
        IB_WR_RDMA_READ => IB_WC_RDMA_READ,
        IB_WR_ATOMIC_CMP_AND_SWP => IB_WC_COMP_SWAP,
        IB_WR_ATOMIC_FETCH_AND_ADD => IB_WC_FETCH_ADD,
        IB_WR_LOCAL_INV => IB_WC_LOCAL_INV,
        IB_WR_BIND_MW => IB_WC_BIND_MW,
        IB_WR_REG_MR => IB_WC_REG_MR,
        IB_WR_FLUSH => IB_WC_FLUSH,
        IB_WR_ATOMIC_WRITE => IB_WC_ATOMIC_WRITE,
        _ => IB_WC_SEND,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(opcode: u8, num_sge: u16, flags: u32, inline_len: u32) -> Vec<u8> {
        let mut b = vec![0u8; SQ_HDR_LEN];
        b[..8].copy_from_slice(&77u64.to_le_bytes());
        b[8] = opcode;
        b[10..12].copy_from_slice(&num_sge.to_le_bytes());
        b[12..16].copy_from_slice(&flags.to_le_bytes());
        b[20..24].copy_from_slice(&inline_len.to_le_bytes());
        b
    }

    #[test]
    fn send_elements() {
        let mut b = hdr(IB_WR_SEND, 1, 0, 0);
        b.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 9, 0, 0, 0]);
        let w = parse_send(&b, 1, 0).expect("valid");
        assert_eq!(
            w.sges.to_vec(),
            vec![Sge {
                addr: 1,
                length: 5,
                lkey: 9
            }]
        );
        assert!(parse_send(&b, 0, 0).is_err(), "num_sge above max");
        assert_eq!(
            parse_send(&b[..SQ_HDR_LEN + 4], 1, 0)
                .map(|_| ())
                .unwrap_err()
                .wr_id,
            77
        );
        assert!(parse_send(&hdr(0x55, 0, 0, 0), 1, 0).is_err(), "opcode");
        assert_eq!(parse_send(&[1, 2], 1, 0).unwrap_err().wr_id, 0);
        let mut b = hdr(IB_WR_SEND, 0, IB_SEND_INLINE, 3);
        b.extend_from_slice(b"abc");
        assert_eq!(&parse_send(&b, 1, 8).expect("inline").inline[..], b"abc");
        assert!(parse_send(&b, 1, 2).is_err(), "inline above max");
        assert!(parse_send(&hdr(IB_WR_SEND, 0, 0, 3), 1, 8).is_err());
    }

    #[test]
    fn recv_elements() {
        let mut b = vec![0u8; RQ_HDR_LEN];
        b[8] = 2;
        assert!(parse_recv(&b, 2).is_err(), "SGEs missing");
        b.extend_from_slice(&[0u8; 32]);
        assert_eq!(parse_recv(&b, 2).expect("valid").sges.len(), 2);
        assert!(parse_recv(&b, 1).is_err());
    }
}
