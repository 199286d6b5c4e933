// SPDX-License-Identifier: GPL-2.0
//! Entry points for the fuzz targets in `fuzz/` (cargo feature `fuzzing`;
//! not part of the backend's API otherwise).
//!
//! Each entry point takes the fuzzer's bytes, feeds them to the parsers a
//! guest reaches (or, [`packet`], a network), and checks what the device
//! promises about any input: no panic, a response that fits the room the
//! guest gave, a status it knows.
//! [`ctrl_seeds`] and [`work_request_seeds`] are valid encodings the fuzz
//! targets start from (written out by the targets themselves, see
//! `fuzz/run.sh`).

use vm_memory::{Bytes, GuestAddress, GuestAddressSpace, GuestMemoryAtomic, GuestMemoryMmap};
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromZeros, IntoBytes};

use crate::abi::*;
use crate::ctrl::{Ctrl, RSP_HDR_LEN};
use crate::ib::*;
use crate::limits::{Limits, Mac, Rings, MAX_INLINE_DATA, MAX_SGE};
use crate::mr;
use crate::packet::{Aeth, AtomicEth, Deth, Opcode, Packet, Reth};
use crate::ring::CqRing;
use crate::roce;
use crate::wqe;

mod data_path;
pub use data_path::{data_path, data_path_seeds};

/// Guest memory of a fuzzed device.
const MEM_SIZE: usize = 1 << 20;
/// Where [`work_request`]'s setup puts the user MR's page table.
const TABLE: u64 = 0x8_0000;

/// A device with empty tables over fresh guest memory, offering a few
/// rings, SRQs and XRC domains (and the driver took them), so that every
/// command is reachable.
fn device() -> Ctrl {
    let mem =
        GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), MEM_SIZE)]).expect("guest memory");
    let rings = Rings::new(4, 4, 1, 0)
        .and_then(|r| r.with_max_srq(4))
        .and_then(|r| r.with_max_xrcd(2))
        .expect("rings");
    let limits = Limits::new(8, 4, 16, Mac([0x52, 0x54, 0, 0, 0, 1]))
        .and_then(|l| l.with_rings(Some(rings)))
        .expect("limits");
    let ctrl = Ctrl::new("fuzz", limits, GuestMemoryAtomic::new(mem))
        .expect("device")
        .with_fixed_key_byte(0);
    ctrl.set_acked_features(1 << VIRTIO_RDMA_F_RINGS);
    ctrl
}

/// Takes `n` bytes (fewer at the end of the input).
fn take<'a>(data: &mut &'a [u8], n: usize) -> &'a [u8] {
    let (a, b) = data.split_at(n.min(data.len()));
    *data = b;
    a
}

fn take_u16(data: &mut &[u8]) -> u16 {
    let b = take(data, 2);
    u16::from_le_bytes([
        b.first().copied().unwrap_or(0),
        b.get(1).copied().unwrap_or(0),
    ])
}

/// Runs one request and checks the response's shape.
fn execute_checked(ctrl: &Ctrl, request: &[u8], room: usize) -> Vec<u8> {
    let rsp = ctrl.execute(request, room);
    assert!(
        rsp.len() <= room,
        "response of {} bytes for room {room}",
        rsp.len()
    );
    if room < RSP_HDR_LEN {
        assert!(rsp.is_empty(), "response without room for it");
    } else {
        assert!(rsp.len() >= RSP_HDR_LEN, "response without a status");
        assert!(
            rsp[0] <= VIRTIO_RDMA_S_BAD_STATE,
            "unknown status {}",
            rsp[0]
        );
        if rsp[0] != VIRTIO_RDMA_S_OK {
            assert_eq!(rsp.len(), RSP_HDR_LEN, "failed command with a body");
        }
    }
    rsp
}

/// Fuzz target `ctrl_command`: a sequence of records against one fresh
/// device. A record is a tag byte, then for an even tag a control request
/// (room: one byte, times 4; length: u16; the request bytes) and for an
/// odd tag a write to guest memory (offset: u16, times 16; length: one
/// byte; the bytes) so that page tables can be found there. Returns the
/// status of every request.
pub fn ctrl_command(mut data: &[u8]) -> Vec<u8> {
    let ctrl = device();
    let mut statuses = Vec::new();
    let mem = GuestMemoryMmap::clone(&ctrl.mem().memory());
    while let Some((&tag, rest)) = data.split_first() {
        data = rest;
        if tag & 1 == 0 {
            let room = usize::from(take(&mut data, 1).first().copied().unwrap_or(0)) * 4;
            let len = usize::from(take_u16(&mut data));
            let request = take(&mut data, len);
            let rsp = execute_checked(&ctrl, request, room);
            statuses.push(rsp.first().copied().unwrap_or(u8::MAX));
        } else {
            let at = u64::from(take_u16(&mut data)) * 16;
            let len = usize::from(take(&mut data, 1).first().copied().unwrap_or(0));
            let bytes = take(&mut data, len);
            // Past the end of guest memory: not the device's concern.
            let _ = mem.write_slice(bytes, GuestAddress(at));
        }
    }
    statuses
}

/// Keys of the MRs [`work_request`] sets up.
struct Keys {
    pdn: u32,
}

/// A device with a PD, a DMA MR, a user MR over two pages and a fast-reg
/// MR: what SGEs and REG_MR/LOCAL_INV elements of a QP can refer to.
fn wr_device() -> (Ctrl, Keys) {
    let ctrl = device();
    let ok = |cmd: u32, body: &[u8], rsp: usize| -> Vec<u8> {
        let out = ctrl.execute(&request(cmd, body), RSP_HDR_LEN + rsp);
        assert_eq!(out[0], VIRTIO_RDMA_S_OK, "setup command {cmd}");
        out[RSP_HDR_LEN..].to_vec()
    };
    let le32 = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let pdn = le32(&ok(VIRTIO_RDMA_CMD_CREATE_PD, &[], 8));
    let access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ;
    ok(VIRTIO_RDMA_CMD_GET_DMA_MR, &pair(pdn, access), 16);
    let mem = ctrl.mem().memory();
    let table: Vec<u8> = [0x1000u64, 0x3000]
        .iter()
        .flat_map(|p| p.to_le_bytes())
        .collect();
    mem.write_slice(&table, GuestAddress(TABLE)).expect("table");
    let mut reg = VirtioRdmaCmdRegUserMr::new_zeroed();
    reg.pdn = U32::new(pdn);
    reg.access_flags = U32::new(access);
    reg.iova = U64::new(0x7000_0100);
    reg.length = U64::new(0x1800);
    reg.pages = U64::new(TABLE);
    reg.npages = U32::new(2);
    ok(VIRTIO_RDMA_CMD_REG_USER_MR, reg.as_bytes(), 16);
    let mut fr = VirtioRdmaCmdCreateMr::new_zeroed();
    fr.pdn = U32::new(pdn);
    fr.max_num_sg = U32::new(4);
    ok(VIRTIO_RDMA_CMD_CREATE_MR, fr.as_bytes(), 16);
    (ctrl, Keys { pdn })
}

/// Fuzz target `work_request`: one SQ or RQ element for a QP whose
/// capacities come from the input. Byte 0: even for an SQ element, odd for
/// an RQ element; byte 1: max_sge; byte 2: max_inline_data; the rest: the
/// element. A parsed element's SGEs are then resolved against the MRs of
/// a small device, and REG_MR/LOCAL_INV are executed on it. Returns
/// whether the element parsed.
pub fn work_request(data: &[u8]) -> bool {
    let [kind, max_sge, max_inline, ref element @ ..] = *data else {
        return false;
    };
    let max_sge = u32::from(max_sge) % (MAX_SGE + 1);
    let max_inline = u32::from(max_inline) % (MAX_INLINE_DATA + 1);
    let wr_id = element
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .unwrap_or(0);
    let (ctrl, keys) = wr_device();
    if kind & 1 == 0 {
        let w = match wqe::parse_send(element, max_sge, max_inline) {
            Ok(w) => w,
            Err(m) => {
                assert_eq!(m.wr_id, wr_id);
                return false;
            }
        };
        assert_eq!(w.wr_id, wr_id);
        assert!(wqe::known_opcode(w.opcode));
        assert!(w.sges.len() <= max_sge as usize);
        assert!(w.inline.len() <= max_inline as usize);
        let _ = (
            w.rdma(),
            w.atomic(),
            w.ud(),
            w.reg(),
            w.bind(),
            w.xrc(),
            w.payload_len(),
        );
        let _ = (w.signaled(false), wqe::wc_opcode(w.opcode));
        let status = crate::engine::fuzz_local(&ctrl, keys.pdn, &w);
        if matches!(w.opcode, IB_WR_REG_MR | IB_WR_LOCAL_INV) {
            assert_eq!(
                ctrl.lock().mrs.get(3).map(|m| m.valid),
                Some(status == 0 && w.opcode == IB_WR_REG_MR)
            );
        }
    } else {
        let w = match wqe::parse_recv(element, max_sge) {
            Ok(w) => w,
            Err(m) => {
                assert_eq!(m.wr_id, wr_id);
                return false;
            }
        };
        assert_eq!(w.wr_id, wr_id);
        assert!(w.sges.len() <= max_sge as usize);
        let _ = crate::engine::fuzz_resolve(&ctrl, keys.pdn, &w.sges, IB_ACCESS_LOCAL_WRITE);
    }
    true
}

/// A control request: header and body.
fn request(cmd: u32, body: &[u8]) -> Vec<u8> {
    let mut r = VirtioRdmaCtrlHdr::new_zeroed();
    r.cmd = U32::new(cmd);
    let mut out = r.as_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

fn pair(a: u32, b: u32) -> Vec<u8> {
    [a.to_le_bytes(), b.to_le_bytes()].concat()
}

/// One `ctrl_command` record for request (`cmd`, `body`) with `rsp` bytes
/// of response body.
fn record(cmd: u32, body: &[u8], rsp: usize) -> Vec<u8> {
    let req = request(cmd, body);
    let room = (RSP_HDR_LEN + rsp).div_ceil(4);
    let mut out = vec![0, u8::try_from(room).expect("room")];
    out.extend_from_slice(&u16::try_from(req.len()).expect("len").to_le_bytes());
    out.extend_from_slice(&req);
    out
}

/// Seeds of `ctrl_command`: every command once with a valid body, and a
/// sequence that builds a PD, CQ, MRs and an RC QP and walks it to RTS.
pub fn ctrl_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    let mut port = VirtioRdmaCmdQueryPort::new_zeroed();
    port.port = 1;
    seeds.push(record(VIRTIO_RDMA_CMD_QUERY_PORT, port.as_bytes(), 64));
    seeds.push(record(VIRTIO_RDMA_CMD_QUERY_PKEY, &pair(1, 0), 8));
    seeds.push(record(VIRTIO_RDMA_CMD_QUERY_COUNTERS, &pair(1, 0), 152));
    // Counter set 1: allocated, read, freed.
    let mut s = record(VIRTIO_RDMA_CMD_ALLOC_COUNTER_SET, &pair(1, 0), 8);
    s.extend(record(VIRTIO_RDMA_CMD_QUERY_COUNTERS, &pair(1, 1), 152));
    s.extend(record(VIRTIO_RDMA_CMD_DEALLOC_COUNTER_SET, &pair(1, 0), 0));
    seeds.push(s);
    let mut gid = VirtioRdmaCmdAddGid::new_zeroed();
    gid.gid = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    gid.port_num = U32::new(1);
    gid.gid_type = U32::new(2);
    let mut del = VirtioRdmaCmdDelGid::new_zeroed();
    del.port = U32::new(1);
    let mut s = record(VIRTIO_RDMA_CMD_ADD_GID, gid.as_bytes(), 0);
    s.extend(record(VIRTIO_RDMA_CMD_DEL_GID, del.as_bytes(), 0));
    seeds.push(s);

    // PD 1 (handles start at 1), CQ 0, MRs 1 (DMA), 2 (fast-reg), 3 (user).
    let mut s = record(VIRTIO_RDMA_CMD_ADD_GID, gid.as_bytes(), 0);
    s.extend(record(VIRTIO_RDMA_CMD_CREATE_PD, &[], 8));
    s.extend(record(VIRTIO_RDMA_CMD_CREATE_CQ, &pair(16, 0), 8));
    let base = s.clone();
    let pdn = 1;
    {
        let all = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ;
        s.extend(record(VIRTIO_RDMA_CMD_GET_DMA_MR, &pair(pdn, all), 16));
        let mut fr = VirtioRdmaCmdCreateMr::new_zeroed();
        fr.pdn = U32::new(pdn);
        fr.access_flags = U32::new(all);
        fr.max_num_sg = U32::new(4);
        s.extend(record(VIRTIO_RDMA_CMD_CREATE_MR, fr.as_bytes(), 16));
        // A page table at 0x8000 (written by an odd-tag record).
        let table: Vec<u8> = [0x1000u64, 0x2000]
            .iter()
            .flat_map(|p| p.to_le_bytes())
            .collect();
        s.push(1);
        s.extend_from_slice(&(0x8000u16 / 16).to_le_bytes());
        s.push(table.len() as u8);
        s.extend_from_slice(&table);
        let mut map = VirtioRdmaCmdMapMrSg::new_zeroed();
        map.mrn = U32::new(2);
        map.npages = U32::new(2);
        map.iova = U64::new(0x1234);
        map.length = U64::new(0x1000);
        map.pages = U64::new(0x8000);
        s.extend(record(VIRTIO_RDMA_CMD_MAP_MR_SG, map.as_bytes(), 8));
        let mut user = VirtioRdmaCmdRegUserMr::new_zeroed();
        user.pdn = U32::new(pdn);
        user.access_flags = U32::new(all);
        user.iova = U64::new(0x10_0800);
        user.length = U64::new(0x1000);
        user.pages = U64::new(0x8000);
        user.npages = U32::new(2);
        s.extend(record(VIRTIO_RDMA_CMD_REG_USER_MR, user.as_bytes(), 16));
        s.extend(record(VIRTIO_RDMA_CMD_DEREG_MR, &pair(1, 0), 0));
        let mw = VirtioRdmaCmdAllocMw {
            pdn: U32::new(pdn),
            mw_type: IB_MW_TYPE_2,
            reserved: [0; 3],
        };
        s.extend(record(VIRTIO_RDMA_CMD_ALLOC_MW, mw.as_bytes(), 8));
        s.extend(record(VIRTIO_RDMA_CMD_DEALLOC_MW, &pair(1, 0), 0));
    }
    seeds.push(s);

    // An RC QP (qpn 2) bound to counter set 1, walked RESET -> INIT -> RTR
    // -> RTS, queried, moved to ERR, destroyed; then the set, CQ, PD, and
    // notification requests.
    {
        let mut s = base.clone();
        let mut qp = VirtioRdmaCmdCreateQp::new_zeroed();
        qp.pdn = U32::new(pdn);
        qp.qp_type = IB_QPT_RC;
        qp.max_send_wr = U32::new(8);
        qp.max_send_sge = U32::new(4);
        qp.max_recv_wr = U32::new(8);
        qp.max_recv_sge = U32::new(4);
        qp.max_inline_data = U32::new(64);
        s.extend(record(VIRTIO_RDMA_CMD_CREATE_QP, qp.as_bytes(), 8));
        s.extend(record(VIRTIO_RDMA_CMD_ALLOC_COUNTER_SET, &pair(1, 0), 8));
        s.extend(record(VIRTIO_RDMA_CMD_BIND_COUNTER_SET, &pair(2, 1), 0));
        let mut a = VirtioRdmaQpAttr::new_zeroed();
        let modify = |s: &mut Vec<u8>, a: &VirtioRdmaQpAttr, mask: u32| {
            let m = VirtioRdmaCmdModifyQp {
                qpn: U32::new(2),
                attr_mask: U32::new(mask),
                attr: *a,
            };
            s.extend(record(VIRTIO_RDMA_CMD_MODIFY_QP, m.as_bytes(), 0));
        };
        a.qp_state = IB_QPS_INIT;
        a.port_num = 1;
        a.qp_access_flags = U32::new(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE);
        modify(
            &mut s,
            &a,
            IB_QP_STATE | IB_QP_PORT | IB_QP_PKEY_INDEX | IB_QP_ACCESS_FLAGS,
        );
        a.qp_state = IB_QPS_RTR;
        a.path_mtu = 3;
        a.dest_qp_num = U32::new(3);
        a.ah_attr.dgid = gid.gid;
        a.ah_attr.port_num = 1;
        modify(
            &mut s,
            &a,
            IB_QP_STATE
                | IB_QP_AV
                | IB_QP_PATH_MTU
                | IB_QP_DEST_QPN
                | IB_QP_RQ_PSN
                | IB_QP_MAX_DEST_RD_ATOMIC
                | IB_QP_MIN_RNR_TIMER,
        );
        a.qp_state = IB_QPS_RTS;
        a.timeout = 14;
        a.retry_cnt = 7;
        modify(
            &mut s,
            &a,
            IB_QP_STATE
                | IB_QP_TIMEOUT
                | IB_QP_RETRY_CNT
                | IB_QP_RNR_RETRY
                | IB_QP_SQ_PSN
                | IB_QP_MAX_QP_RD_ATOMIC,
        );
        s.extend(record(VIRTIO_RDMA_CMD_QUERY_QP, &pair(2, 0), 96));
        a.qp_state = IB_QPS_ERR;
        modify(&mut s, &a, IB_QP_STATE);
        s.extend(record(
            VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ,
            &pair(0, VIRTIO_RDMA_NOTIFY_NEXT_COMPLETION),
            0,
        ));
        s.extend(record(VIRTIO_RDMA_CMD_QUERY_COUNTERS, &pair(1, 1), 152));
        s.extend(record(VIRTIO_RDMA_CMD_DESTROY_QP, &pair(2, 0), 0));
        s.extend(record(VIRTIO_RDMA_CMD_DEALLOC_COUNTER_SET, &pair(1, 0), 0));
        s.extend(record(VIRTIO_RDMA_CMD_DESTROY_CQ, &pair(0, 0), 0));
        s.extend(record(VIRTIO_RDMA_CMD_DESTROY_PD, &pair(pdn, 0), 0));
        seeds.push(s);
    }
    seeds.push(xrc_seed(base.clone(), pdn, &gid.gid));
    let mut s = base;
    s.extend(record(VIRTIO_RDMA_CMD_DESTROY_CQ, &pair(0, 0), 0));
    seeds.push(s);
    seeds
}

/// An odd-tag record: `bytes` written to guest memory at `at`.
fn mem_record(at: u16, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![1];
    out.extend_from_slice(&(at / 16).to_le_bytes());
    out.push(u8::try_from(bytes.len()).expect("short"));
    out.extend_from_slice(bytes);
    out
}

/// A one-page ring of `depth` slots of `stride` bytes whose page table
/// (at `table`) names page `page`.
fn one_page_ring(
    s: &mut Vec<u8>,
    table: u16,
    page: u64,
    depth: u32,
    stride: u32,
) -> VirtioRdmaRing {
    s.extend(mem_record(table, &page.to_le_bytes()));
    VirtioRdmaRing {
        pages: U64::new(u64::from(table)),
        npages: U32::new(1),
        depth: U32::new(depth),
        stride: U32::new(stride),
        reserved: U32::new(0),
    }
}

/// XRC on top of `base` (PD `pdn`, GID `gid`): a domain, a ring CQ, an XRC
/// SRQ reporting to it, a target QP and an initiator QP (qpns 8 and 9, the
/// first ring QP numbers), each initiator work request naming the SRQ;
/// then all of it taken down again.
fn xrc_seed(mut s: Vec<u8>, pdn: u32, gid: &[u8; 16]) -> Vec<u8> {
    let cq_ring = one_page_ring(&mut s, 0x9000, 0xa000, 8, CqRing::STRIDE);
    let cq = VirtioRdmaCmdCreateCqRing {
        ring: cq_ring,
        comp_vq: U32::new(0),
        reserved: U32::new(0),
    };
    // Ring CQs are numbered after the virtqueue CQs (max_cq is 4).
    let cqn = 4;
    s.extend(record(VIRTIO_RDMA_CMD_CREATE_CQ_RING, cq.as_bytes(), 8));
    s.extend(record(VIRTIO_RDMA_CMD_ALLOC_XRCD, &[], 8));
    let srq_ring = one_page_ring(&mut s, 0x9100, 0xb000, 8, 32);
    let srq = VirtioRdmaCmdCreateXrcSrq {
        srq: VirtioRdmaCmdCreateSrq {
            ring: srq_ring,
            pdn: U32::new(pdn),
            max_wr: U32::new(8),
            max_sge: U32::new(1),
            srq_limit: U32::new(2),
            flags: U32::new(0),
            reserved: U32::new(0),
        },
        xrcdn: U32::new(1),
        cqn: U32::new(cqn),
    };
    s.extend(record(VIRTIO_RDMA_CMD_CREATE_XRC_SRQ, srq.as_bytes(), 8));
    s.extend(record(VIRTIO_RDMA_CMD_CREATE_XRC_TGT_QP, &pair(1, 0), 8));
    let sq = one_page_ring(&mut s, 0x9200, 0xc000, 8, 80);
    let mut ini = VirtioRdmaCmdCreateQpRing::new_zeroed();
    ini.qp.pdn = U32::new(pdn);
    ini.qp.qp_type = IB_QPT_XRC_INI;
    ini.qp.max_send_wr = U32::new(8);
    ini.qp.max_send_sge = U32::new(1);
    ini.qp.send_cqn = U32::new(cqn);
    ini.sq = sq;
    s.extend(record(VIRTIO_RDMA_CMD_CREATE_QP_RING, ini.as_bytes(), 8));
    // The initiator connects to the target, which answers it.
    for (qpn, dest) in [(8, 9), (9, 8)] {
        let mut a = VirtioRdmaQpAttr::new_zeroed();
        let mut modify = |a: &VirtioRdmaQpAttr, mask: u32| {
            let m = VirtioRdmaCmdModifyQp {
                qpn: U32::new(qpn),
                attr_mask: U32::new(mask),
                attr: *a,
            };
            s.extend(record(VIRTIO_RDMA_CMD_MODIFY_QP, m.as_bytes(), 0));
        };
        a.qp_state = IB_QPS_INIT;
        a.port_num = 1;
        modify(
            &a,
            IB_QP_STATE | IB_QP_PORT | IB_QP_PKEY_INDEX | IB_QP_ACCESS_FLAGS,
        );
        a.qp_state = IB_QPS_RTR;
        a.path_mtu = 3;
        a.dest_qp_num = U32::new(dest);
        a.ah_attr.dgid = *gid;
        a.ah_attr.port_num = 1;
        let path = IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU | IB_QP_DEST_QPN | IB_QP_RQ_PSN;
        let target = IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER;
        modify(&a, if qpn == 8 { path | target } else { path });
    }
    s.extend(record(VIRTIO_RDMA_CMD_QUERY_QP, &pair(8, 0), 96));
    s.extend(record(VIRTIO_RDMA_CMD_DESTROY_QP, &pair(9, 0), 0));
    s.extend(record(VIRTIO_RDMA_CMD_DESTROY_QP, &pair(8, 0), 0));
    s.extend(record(VIRTIO_RDMA_CMD_DESTROY_SRQ, &pair(1, 0), 0));
    s.extend(record(VIRTIO_RDMA_CMD_DEALLOC_XRCD, &pair(1, 0), 0));
    s.extend(record(VIRTIO_RDMA_CMD_DESTROY_CQ, &pair(cqn, 0), 0));
    s
}

/// An SQ element.
fn send_element(opcode: u8, flags: u32, wr: &[u8], sges: &[(u64, u32, u32)]) -> Vec<u8> {
    let mut h = VirtioRdmaSqReq::new_zeroed();
    h.wr_id = U64::new(0x1122_3344);
    h.opcode = opcode;
    h.num_sge = U16::new(sges.len() as u16);
    h.send_flags = U32::new(flags);
    h.wr[..wr.len()].copy_from_slice(wr);
    let mut b = h.as_bytes().to_vec();
    for &(addr, length, lkey) in sges {
        let sge = VirtioRdmaSge {
            addr: U64::new(addr),
            length: U32::new(length),
            lkey: U32::new(lkey),
        };
        b.extend_from_slice(sge.as_bytes());
    }
    b
}

/// Seeds of `work_request`: SQ elements of every opcode and RQ elements,
/// referring to the MRs `work_request`'s device has.
pub fn work_request_seeds() -> Vec<Vec<u8>> {
    let caps = |kind: u8, mut e: Vec<u8>| {
        let mut out = vec![kind, 4, 64];
        out.append(&mut e);
        out
    };
    let (dma, user, fr) = (mr::make_key(1, 0), mr::make_key(2, 0), mr::make_key(3, 0));
    let sges = [(0x2000, 100, dma), (0x7000_0100, 0x1000, user), (0, 0, fr)];
    let rdma = VirtioRdmaSqRdma {
        remote_addr: U64::new(0x7000_0200),
        rkey: U32::new(user),
        reserved: U32::new(0),
    };
    let mut seeds = Vec::new();
    for op in [
        IB_WR_SEND,
        IB_WR_SEND_WITH_IMM,
        IB_WR_RDMA_WRITE,
        IB_WR_RDMA_WRITE_WITH_IMM,
        IB_WR_RDMA_READ,
        IB_WR_SEND_WITH_INV,
    ] {
        seeds.push(caps(
            0,
            send_element(op, IB_SEND_SIGNALED, rdma.as_bytes(), &sges),
        ));
    }
    let mut at = VirtioRdmaSqAtomic::new_zeroed();
    at.remote_addr = U64::new(0x2008);
    at.rkey = U32::new(dma);
    at.compare_add = U64::new(1);
    for op in [IB_WR_ATOMIC_CMP_AND_SWP, IB_WR_ATOMIC_FETCH_AND_ADD] {
        seeds.push(caps(
            0,
            send_element(op, 0, at.as_bytes(), &[(0x3000, 8, dma)]),
        ));
    }
    // An XRC_INI QP's RDMA WRITE: the RDMA part, then the SRQ it names.
    let mut xrc = VirtioRdmaSqXrc::new_zeroed();
    xrc.op[..16].copy_from_slice(rdma.as_bytes());
    xrc.remote_srqn = U32::new(1);
    seeds.push(caps(
        0,
        send_element(IB_WR_RDMA_WRITE, IB_SEND_SIGNALED, xrc.as_bytes(), &sges),
    ));
    let mut ud = VirtioRdmaSqUd::new_zeroed();
    ud.remote_qpn = U32::new(3);
    ud.remote_qkey = U32::new(0x1111);
    ud.av.port_num = 1;
    seeds.push(caps(
        0,
        send_element(IB_WR_SEND, 0, ud.as_bytes(), &sges[..1]),
    ));
    let mut inline = send_element(IB_WR_SEND, IB_SEND_INLINE, &[], &[]);
    inline[20..24].copy_from_slice(&5u32.to_le_bytes());
    inline.extend_from_slice(b"hello");
    seeds.push(caps(0, inline));
    // REG_MR of the fast-reg MR (mrn 3) over the table the device holds,
    // then LOCAL_INV of its key.
    let mut reg = VirtioRdmaSqReg::new_zeroed();
    reg.mrn = U32::new(3);
    reg.key = U32::new(mr::make_key(3, 7));
    reg.access = U32::new(IB_ACCESS_LOCAL_WRITE);
    reg.iova = U64::new(0x100);
    reg.length = U64::new(0x1000);
    reg.pages = U64::new(TABLE);
    reg.npages = U32::new(2);
    seeds.push(caps(0, send_element(IB_WR_REG_MR, 0, reg.as_bytes(), &[])));
    let mut inv = send_element(IB_WR_LOCAL_INV, 0, &[], &[]);
    inv[16..20].copy_from_slice(&mr::make_key(3, 7).to_le_bytes());
    seeds.push(caps(0, inv));
    let mut recv = VirtioRdmaRqReq::new_zeroed();
    recv.wr_id = U64::new(9);
    recv.num_sge = U32::new(2);
    let mut r = recv.as_bytes().to_vec();
    for &(addr, length, lkey) in &sges[..2] {
        let sge = VirtioRdmaSge {
            addr: U64::new(addr),
            length: U32::new(length),
            lkey: U32::new(lkey),
        };
        r.extend_from_slice(sge.as_bytes());
    }
    seeds.push(caps(1, r));
    seeds
}

/// `packet`: any bytes as a packet from the network ([`crate::packet`])
/// and as a whole RoCEv2 frame ([`crate::roce`]). Parsing never panics,
/// and what it accepts is emitted and parsed back unchanged (a frame's
/// packet and endpoints).
pub fn packet(data: &[u8]) {
    if let Ok(p) = Packet::parse(data) {
        let mut out = Vec::new();
        p.emit(&mut out).expect("a parsed packet is well formed");
        assert_eq!(Packet::parse(&out), Ok(p), "emitted and parsed back");
    }
    if let Ok((ep, p)) = roce::decode(data) {
        let mut out = Vec::new();
        roce::encode(&ep, &p, &mut out).expect("a decoded frame encodes");
        assert_eq!(roce::decode(&out), Ok((ep, p)), "encoded and decoded back");
    }
}

/// Seeds of `packet`: a packet of every operation RC defines, and UD's
/// SEND with immediate data, each with every header its opcode calls for,
/// bare and in an IPv4 and an IPv6 frame.
pub fn packet_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for byte in (0x00..0x20).chain([0x65]) {
        let Some(opcode) = Opcode::from_byte(byte) else {
            continue;
        };
        let s = opcode.shape();
        let mut p = Packet::new(opcode, 17, 0xff_ffff);
        p.reth = s.reth.then(Reth::default);
        p.aeth = s.aeth.then(Aeth::default);
        p.atomic_eth = s.atomic_eth.then(AtomicEth::default);
        p.atomic_ack = s.atomic_ack_eth.then_some(1);
        p.imm = s.imm.then_some(2);
        p.ieth = s.ieth.then_some(3);
        p.deth = s.deth.then(Deth::default);
        p.feth = s.feth.then_some(0x11);
        if s.payload {
            p.payload = b"payload".to_vec();
        }
        let mut bytes = Vec::new();
        if p.emit(&mut bytes).is_ok() {
            seeds.push(bytes);
        }
        // And in a frame, over IPv4 and over IPv6.
        for (src_ip, dst_ip) in [
            ([10, 0, 0, 1].into(), [10, 0, 0, 2].into()),
            (
                std::net::Ipv6Addr::LOCALHOST.into(),
                std::net::Ipv6Addr::UNSPECIFIED.into(),
            ),
        ] {
            let ep = roce::Endpoints {
                src_mac: [2, 0, 0, 0, 0, 1],
                dst_mac: [2, 0, 0, 0, 0, 2],
                src_ip,
                dst_ip,
                src_port: roce::source_port(17),
                traffic_class: 0,
                hop_limit: 64,
                flow_label: 0,
            };
            let mut frame = Vec::new();
            if roce::encode(&ep, &p, &mut frame).is_ok() {
                seeds.push(frame);
            }
        }
    }
    seeds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_run_clean() {
        let _ = env_logger::builder().is_test(true).try_init();
        for s in ctrl_seeds() {
            let st = ctrl_command(&s);
            assert!(st.iter().all(|&s| s == VIRTIO_RDMA_S_OK), "{st:?}");
        }
        for s in work_request_seeds() {
            assert!(work_request(&s), "{s:?}");
        }
        for s in packet_seeds() {
            assert!(
                Packet::parse(&s).is_ok() || roce::decode(&s).is_ok(),
                "{s:?}"
            );
            packet(&s);
        }
        assert_eq!(
            packet_seeds().len(),
            (25 + 1) * 3,
            "RC's operations and UD's SEND, bare and in two frames"
        );
        ctrl_command(&[]);
        work_request(&[]);
        packet(&[]);
    }
}
