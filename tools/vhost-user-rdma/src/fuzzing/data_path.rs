// SPDX-License-Identifier: GPL-2.0
//! Fuzz target `data_path`: two devices of the fabric with real vrings in
//! guest memory, connected RC, UC and UD QPs, and work requests the
//! fuzzer writes into their SQs and RQs, executed by the engine as a kick
//! would (copies, atomics, UD with its GRH, delivery from one device to
//! the other, RNR retries, flushes).
//!
//! Records may also be frames from the network to `b` (RoCEv2, as its
//! uplink's reader hands them to `engine::wire`): requests of any opcode
//! and headers to its RC and UD QPs, from its RC QP's peer address or
//! another.
//!
//! The oracle, besides "no panic": device `b` (the responder, which has no
//! DMA MR) changes only its used rings, the device-writable buffers its
//! driver posted (CQEs, events) and its one remote-access MR's pages. So no
//! request of `a`'s, however malformed or misdirected, writes `b`'s memory
//! outside what `b` registered.

use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};

use vhost_user_backend::VringT;
use vm_memory::{Bytes, GuestAddress, GuestMemoryAtomic, GuestMemoryMmap};
use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromZeros, IntoBytes};

use crate::abi::*;
use crate::device::RdmaDevice;
use crate::engine;
use crate::fabric;
use crate::ib::*;
use crate::limits::{Limits, Mac};
use crate::vring::{RdmaVring, VringHub};

use super::{pair, request};

/// Guest memory of each device.
const MEM: usize = 0x10_0000;
/// Queue size of every vring.
const QSIZE: u16 = 16;
/// Vring `i`: descriptors at `RINGS + i * 0x400`, avail ring at +0x100,
/// used ring at +0x200.
const RINGS: u64 = 0x1_0000;
/// Buffer of slot `s` of vring `i`: `BUFS + (i * QSIZE + s) * SLOT`.
const BUFS: u64 = 0x2_0000;
const SLOT: u64 = 0x400;
/// The pages of `b`'s remote-access user MR (iova [`MR_IOVA`], 3 pages).
const MR_PAGES: [u64; 3] = [0x9_0000, 0xb_3000, 0xa_1000];
const MR_IOVA: u64 = 0x7000_0800;
const MR_LEN: u64 = 0x2000;
/// `b`'s second user MR: 48 pages at [`MR2_PAGES`], iova [`MR2_IOVA`],
/// for messages larger than a chunk.
const MR2_PAGES: u64 = 0xc_0000;
const MR2_LEN: u64 = 48 * 0x1000;
const MR2_IOVA: u64 = 0x1_0000_0000;
/// Where `a`'s payloads live (its DMA MR covers all its memory).
const A_DATA: u64 = 0xc_0000;
const QKEY: u32 = 0x1111;
/// QPs of each device: RC, UC, UD; `a`'s N talks to `b`'s N.
const QPS: [(u32, u8); 3] = [(2, IB_QPT_RC), (3, IB_QPT_UC), (4, IB_QPT_UD)];
const CQN: u32 = 0;

fn limits(mac: u8) -> Limits {
    Limits::new(5, 1, u32::from(QSIZE), Mac([0x52, 0x54, 0, 0, 0xf0, mac])).expect("limits")
}

fn gid(n: u8) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[..2].copy_from_slice(&[0xfd, 0x00]);
    g[15] = n;
    g
}

/// One device of the target, its memory and the driver's view of its
/// rings (next avail index per vring).
struct Side {
    dev: Arc<RdmaDevice>,
    mem: GuestMemoryMmap,
    avail: Vec<u16>,
}

impl Side {
    fn new(name: &str, mac: u8) -> Side {
        Self::on(name, mac, None)
    }

    /// A device on `uplink` (an uplink over a socket).
    fn on(name: &str, mac: u8, uplink: Option<crate::net::uplink::Uplink>) -> Side {
        let mem = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), MEM)]).expect("memory");
        let atomic = GuestMemoryAtomic::new(mem.clone());
        let l = limits(mac);
        let mut dev = RdmaDevice::on(name, l, atomic.clone(), uplink).expect("device");
        dev.fix_key_byte(0);
        let dev = Arc::new(dev);
        let hub = VringHub::new(1).expect("hub");
        let vrings: Vec<RdmaVring> = hub.collect(|| {
            (0..l.num_queues())
                .map(|_| RdmaVring::new(atomic.clone(), QSIZE).expect("vring"))
                .collect()
        });
        for (i, v) in vrings.iter().enumerate() {
            let base = RINGS + i as u64 * 0x400;
            v.set_queue_size(QSIZE);
            v.set_queue_info(base, base + 0x100, base + 0x200)
                .expect("queue info");
            v.set_queue_ready(true);
            v.set_enabled(true);
        }
        dev.ctrl().set_vrings(vrings);
        fabric::register(&dev);
        Side {
            dev,
            mem,
            avail: vec![0; l.num_queues()],
        }
    }

    fn ok(&self, cmd: u32, body: &[u8]) -> Vec<u8> {
        let out = self.dev.ctrl().execute(&request(cmd, body), 8 + 96);
        assert_eq!(out[0], VIRTIO_RDMA_S_OK, "setup command {cmd}");
        out[8..].to_vec()
    }

    /// Makes `bytes` available on vring `q` in its next slot; `writable`:
    /// a device-writable buffer of `bytes.len()` bytes instead.
    fn post(&mut self, q: usize, bytes: &[u8], writable: bool) {
        let idx = self.avail[q];
        let slot = idx % QSIZE;
        let buf = BUFS + (q as u64 * u64::from(QSIZE) + u64::from(slot)) * SLOT;
        let len = bytes.len().min(SLOT as usize);
        if !writable {
            let _ = self.mem.write_slice(&bytes[..len], GuestAddress(buf));
        }
        let ring = RINGS + q as u64 * 0x400;
        let mut d = [0u8; 16];
        d[..8].copy_from_slice(&buf.to_le_bytes());
        d[8..12].copy_from_slice(&(len as u32).to_le_bytes());
        d[12..14].copy_from_slice(&(if writable { 2u16 } else { 0 }).to_le_bytes());
        let _ = self
            .mem
            .write_slice(&d, GuestAddress(ring + u64::from(slot) * 16));
        let _ = self.mem.write_slice(
            &slot.to_le_bytes(),
            GuestAddress(ring + 0x100 + 4 + u64::from(slot) * 2),
        );
        let idx = idx.wrapping_add(1);
        let _ = self
            .mem
            .write_slice(&idx.to_le_bytes(), GuestAddress(ring + 0x102));
        self.avail[q] = idx;
    }

    /// Posts `n` CQE (or event) buffers on vring `q`.
    fn fill(&mut self, q: usize, n: u16) {
        for _ in 0..n {
            self.post(q, &[0u8; 64], true);
        }
    }

    /// Ranges of guest memory the device may write: used rings and the
    /// buffers of the CQ and event vrings.
    fn device_writable(&self) -> Vec<Range<u64>> {
        let n = self.avail.len() as u64;
        let mut out: Vec<Range<u64>> = (0..n)
            .map(|i| RINGS + i * 0x400 + 0x200..RINGS + i * 0x400 + 0x300)
            .collect();
        for q in [virtio_rdma_cq_vq(CQN) as u64, n - 1] {
            let start = BUFS + q * u64::from(QSIZE) * SLOT;
            out.push(start..start + u64::from(QSIZE) * SLOT);
        }
        out
    }
}

/// One pair at a time: the fabric is process-wide and a GID belongs to
/// one device, so pairs (of tests running in parallel) must not overlap.
static ONE_PAIR: Mutex<()> = Mutex::new(());

/// Two devices and the guard that keeps other pairs out; fields drop in
/// order, so the devices are gone before the next pair starts.
struct Pair {
    a: Side,
    b: Side,
    _one: MutexGuard<'static, ()>,
}

/// The two devices, set up: PD 1, CQ 0 with buffers, the events queue
/// filled, QPs connected pairwise, `a` with a DMA MR, `b` with two user
/// MRs, the RC and UD QPs bound to counter set 1.
fn setup() -> Pair {
    let one = ONE_PAIR.lock().unwrap_or_else(|e| e.into_inner());
    let mut a = Side::new("fuzz-a", 1);
    let mut b = Side::new("fuzz-b", 2);
    for (s, n) in [(&mut a, 1u8), (&mut b, 2)] {
        let mut g = VirtioRdmaCmdAddGid::new_zeroed();
        g.gid = gid(n);
        g.gid_type = U32::new(2);
        g.port_num = U32::new(1);
        s.ok(VIRTIO_RDMA_CMD_ADD_GID, g.as_bytes());
        s.ok(VIRTIO_RDMA_CMD_CREATE_PD, &[]);
        s.ok(VIRTIO_RDMA_CMD_CREATE_CQ, &pair(u32::from(QSIZE), 0));
        s.fill(virtio_rdma_cq_vq(CQN) as usize, QSIZE);
        let ev = s.avail.len() - 1;
        s.fill(ev, 4);
    }
    let all = IB_ACCESS_LOCAL_WRITE
        | IB_ACCESS_REMOTE_WRITE
        | IB_ACCESS_REMOTE_READ
        | IB_ACCESS_REMOTE_ATOMIC
        | IB_ACCESS_FLUSH_GLOBAL;
    a.ok(VIRTIO_RDMA_CMD_GET_DMA_MR, &pair(1, all));
    let payload: Vec<u8> = (0..0x1000u32).map(|i| (i * 7 + 3) as u8).collect();
    a.mem
        .write_slice(&payload, GuestAddress(A_DATA))
        .expect("payload");
    let table: Vec<u8> = MR_PAGES.iter().flat_map(|p| p.to_le_bytes()).collect();
    b.mem
        .write_slice(&table, GuestAddress(0x8_0000))
        .expect("table");
    let mut reg = VirtioRdmaCmdRegUserMr::new_zeroed();
    reg.pdn = U32::new(1);
    reg.access_flags = U32::new(all);
    reg.iova = U64::new(MR_IOVA);
    reg.length = U64::new(MR_LEN);
    reg.pages = U64::new(0x8_0000);
    reg.npages = U32::new(3);
    b.ok(VIRTIO_RDMA_CMD_REG_USER_MR, reg.as_bytes());
    let table2: Vec<u8> = (0..MR2_LEN / 0x1000)
        .flat_map(|i| (MR2_PAGES + i * 0x1000).to_le_bytes())
        .collect();
    b.mem
        .write_slice(&table2, GuestAddress(0x8_1000))
        .expect("table");
    reg.iova = U64::new(MR2_IOVA);
    reg.length = U64::new(MR2_LEN);
    reg.pages = U64::new(0x8_1000);
    reg.npages = U32::new((MR2_LEN / 0x1000) as u32);
    b.ok(VIRTIO_RDMA_CMD_REG_USER_MR, reg.as_bytes());
    for (qpn, t) in QPS {
        for (s, peer) in [(&a, 2u8), (&b, 1)] {
            let mut c = VirtioRdmaCmdCreateQp::new_zeroed();
            c.pdn = U32::new(1);
            c.qp_type = t;
            c.max_send_wr = U32::new(u32::from(QSIZE));
            c.max_recv_wr = U32::new(u32::from(QSIZE));
            c.max_send_sge = U32::new(4);
            c.max_recv_sge = U32::new(4);
            c.max_inline_data = U32::new(64);
            c.send_cqn = U32::new(CQN);
            c.recv_cqn = U32::new(CQN);
            let r = s.ok(VIRTIO_RDMA_CMD_CREATE_QP, c.as_bytes());
            assert_eq!(r[..4], qpn.to_le_bytes(), "qpn");
            connect(s, qpn, t, gid(peer), 0);
        }
    }
    // The RC and UD QPs count in counter set 1, the UC QPs in the port's
    // counters: both ways of counting run.
    for s in [&a, &b] {
        s.ok(VIRTIO_RDMA_CMD_ALLOC_COUNTER_SET, &pair(1, 0));
        for (qpn, t) in QPS {
            if t != IB_QPT_UC {
                s.ok(VIRTIO_RDMA_CMD_BIND_COUNTER_SET, &pair(qpn, 1));
            }
        }
    }
    Pair { a, b, _one: one }
}

fn connect(s: &Side, qpn: u32, t: u8, dgid: [u8; 16], sq_psn: u32) {
    connect_timed(s, qpn, t, dgid, sq_psn, 0);
}

/// [`connect`], with the transport timer of `timeout` and three retries
/// (0: no timer, no retry).
fn connect_timed(s: &Side, qpn: u32, t: u8, dgid: [u8; 16], sq_psn: u32, timeout: u8) {
    let modify = |mask: u32, a: &VirtioRdmaQpAttr| {
        let m = VirtioRdmaCmdModifyQp {
            qpn: U32::new(qpn),
            attr_mask: U32::new(mask),
            attr: *a,
        };
        s.ok(VIRTIO_RDMA_CMD_MODIFY_QP, m.as_bytes());
    };
    let mut a = VirtioRdmaQpAttr::new_zeroed();
    a.port_num = 1;
    a.qp_access_flags = U32::new(
        IB_ACCESS_REMOTE_WRITE
            | IB_ACCESS_REMOTE_READ
            | IB_ACCESS_REMOTE_ATOMIC
            | IB_ACCESS_FLUSH_GLOBAL,
    );
    a.qkey = U32::new(QKEY);
    a.path_mtu = 3;
    a.dest_qp_num = U32::new(qpn);
    a.ah_attr.dgid = dgid;
    a.ah_attr.port_num = 1;
    a.min_rnr_timer = 1;
    a.rnr_retry = 1;
    a.timeout = timeout;
    a.retry_cnt = if timeout == 0 { 0 } else { 3 };
    a.sq_psn = U32::new(sq_psn);
    let base = IB_QP_STATE | IB_QP_PKEY_INDEX;
    let (init, rtr, rts) = match t {
        IB_QPT_UD => (
            base | IB_QP_PORT | IB_QP_QKEY,
            IB_QP_STATE,
            IB_QP_STATE | IB_QP_SQ_PSN,
        ),
        IB_QPT_UC => (
            base | IB_QP_PORT | IB_QP_ACCESS_FLAGS,
            IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU | IB_QP_DEST_QPN | IB_QP_RQ_PSN,
            IB_QP_STATE | IB_QP_SQ_PSN,
        ),
        _ => (
            base | IB_QP_PORT | IB_QP_ACCESS_FLAGS,
            IB_QP_STATE
                | IB_QP_AV
                | IB_QP_PATH_MTU
                | IB_QP_DEST_QPN
                | IB_QP_RQ_PSN
                | IB_QP_MAX_DEST_RD_ATOMIC
                | IB_QP_MIN_RNR_TIMER,
            IB_QP_STATE
                | IB_QP_TIMEOUT
                | IB_QP_RETRY_CNT
                | IB_QP_RNR_RETRY
                | IB_QP_SQ_PSN
                | IB_QP_MAX_QP_RD_ATOMIC,
        ),
    };
    for (state, mask) in [(IB_QPS_INIT, init), (IB_QPS_RTR, rtr), (IB_QPS_RTS, rts)] {
        a.qp_state = state;
        modify(mask, &a);
    }
}

/// The bytes of `mem` outside `allowed`.
fn outside(mem: &GuestMemoryMmap, allowed: &[Range<u64>]) -> Vec<u8> {
    let mut all = vec![0u8; MEM];
    mem.read_slice(&mut all, GuestAddress(0)).expect("read");
    for r in allowed {
        let (s, e) = (r.start as usize, (r.end as usize).min(MEM));
        all[s..e].fill(0);
    }
    all
}

/// Fuzz target `data_path`: records of a tag byte, a length byte and that
/// many bytes. Tag bit 4: the bytes are a frame from the network to `b`.
/// Else bit 0: device (`a` or `b`); bits 1-2: the QP (RC, UC, UD; 3 is the
/// event and CQ buffers being refilled); bit 3: SQ or RQ. The bytes are
/// one element, made available on that queue and kicked; after each record
/// due RNR retries run. Returns the number of records run.
pub fn data_path(data: &[u8]) -> usize {
    run(data).0
}

/// The records run, and the pair as they left it.
type Ran = (usize, Pair);

/// [`data_path`], returning the devices as the records left them.
fn run(mut data: &[u8]) -> Ran {
    let Pair {
        mut a,
        mut b,
        _one: one,
    } = setup();
    let mut allowed = b.device_writable();
    // Exactly the MR's bytes: it starts at offset iova % 4096 of its first
    // page and ends MR_LEN bytes later.
    let mut at = MR_IOVA % 0x1000;
    let mut left = MR_LEN;
    for &p in &MR_PAGES {
        let n = (0x1000 - at).min(left);
        allowed.push(p + at..p + at + n);
        left -= n;
        at = 0;
    }
    allowed.push(MR2_PAGES..MR2_PAGES + MR2_LEN);
    let mut n = 0;
    while let [tag, len, rest @ ..] = data {
        let len = usize::from(*len).min(rest.len());
        let (element, tail) = rest.split_at(len);
        data = tail;
        n += 1;
        if tag & WIRE != 0 {
            let before = outside(&b.mem, &allowed);
            engine::wire::received(&b.dev, element);
            assert!(
                outside(&b.mem, &allowed) == before,
                "record {n} (a frame) wrote b's memory outside its MR and device-writable buffers"
            );
            continue;
        }
        let side = if tag & 1 == 0 { &mut a } else { &mut b };
        let which = usize::from((tag >> 1) & 3);
        if which == 3 {
            side.fill(virtio_rdma_cq_vq(CQN) as usize, 4);
            let ev = side.avail.len() - 1;
            side.fill(ev, 1);
            continue;
        }
        let qpn = QPS[which].0;
        let sq = tag & 8 == 0;
        let q = if sq {
            virtio_rdma_sq_vq(1, qpn)
        } else {
            virtio_rdma_rq_vq(1, qpn)
        } as usize;
        side.post(q, element, false);
        let before = outside(&b.mem, &allowed);
        let side = if tag & 1 == 0 { &a } else { &b };
        if sq {
            engine::sq_kicked(side.dev.ctrl(), qpn);
        } else {
            engine::rq_kicked(side.dev.ctrl(), qpn);
        }
        // What the devices' loops would do next: due RNR retries, SQs
        // scheduled for another pass.
        for _ in 0..4 {
            for s in [&a, &b] {
                for lane in 0..s.dev.ctrl().lanes().count() {
                    engine::tick(s.dev.ctrl(), lane);
                    engine::run_scheduled(s.dev.ctrl(), lane);
                }
            }
        }
        assert!(
            outside(&b.mem, &allowed) == before,
            "record {n} (tag {tag:#x}) wrote b's memory outside its MR and device-writable buffers"
        );
    }
    (n, Pair { a, b, _one: one })
}

/// Tag bit of a record that is a frame from the network to `b`.
const WIRE: u8 = 0x10;

/// A frame from `a`'s address to `b` carrying `p`.
fn frame(p: &crate::packet::Packet) -> Vec<u8> {
    frame_to(p, crate::engine::wire::ip_of(&gid(2)))
}

/// A frame from `a`'s address to `b`'s MAC and `dst_ip`, carrying `p`.
fn frame_to(p: &crate::packet::Packet, dst_ip: std::net::IpAddr) -> Vec<u8> {
    use crate::engine::wire::ip_of;
    let ep = crate::roce::Endpoints {
        src_mac: [0x52, 0x54, 0, 0, 0xf0, 1],
        dst_mac: limits(2).mac().0,
        src_ip: ip_of(&gid(1)),
        dst_ip,
        src_port: crate::roce::source_port(2),
        traffic_class: 0,
        hop_limit: 64,
        flow_label: 0,
    };
    let mut out = Vec::new();
    crate::roce::encode(&ep, p, &mut out).expect("a seed frame");
    out
}

/// Seed records of frames to `b`: after a receive on its RC and its UD
/// QP, a SEND, a WRITE into its MR, a READ and a FETCH AND ADD there to
/// its RC QP, a UD SEND, and a frame whose ICRC is wrong.
fn wire_seed(bkey: u32, recv: impl Fn(u8) -> Vec<u8>) -> Vec<u8> {
    use crate::packet::{AtomicEth, Deth, Op, Opcode, Packet, Reth, Transport};
    use zerocopy::big_endian;
    let rc = |op, psn| {
        Packet::new(
            Opcode {
                transport: Transport::Rc,
                op,
            },
            2,
            psn,
        )
    };
    let reth = |va: u64, len: u32| Reth {
        va: big_endian::U64::new(va),
        rkey: big_endian::U32::new(bkey),
        dma_len: big_endian::U32::new(len),
    };
    let mut send = rc(Op::SendOnly, 0);
    send.payload = b"a SEND from the wire".to_vec();
    send.ack_req = true;
    let mut write = rc(Op::WriteOnly, 1);
    write.reth = Some(reth(MR_IOVA + 0x40, 16));
    write.payload = vec![0x5a; 16];
    let mut read = rc(Op::ReadRequest, 2);
    read.reth = Some(reth(MR_IOVA, 64));
    let mut add = rc(Op::FetchAdd, 3);
    add.atomic_eth = Some(AtomicEth {
        va: big_endian::U64::new(MR_IOVA + 0x1000),
        rkey: big_endian::U32::new(bkey),
        swap_add: big_endian::U64::new(1),
        compare: big_endian::U64::new(0),
    });
    // IBA 1.5's and the immediate-data requests.
    let mut write_imm = rc(Op::WriteOnlyImm, 4);
    write_imm.reth = Some(reth(MR_IOVA + 0x60, 8));
    write_imm.imm = Some(0x99);
    write_imm.payload = vec![0xa5; 8];
    let mut swap = rc(Op::CompareSwap, 5);
    swap.atomic_eth = Some(AtomicEth {
        va: big_endian::U64::new(MR_IOVA + 0x1000),
        rkey: big_endian::U32::new(bkey),
        swap_add: big_endian::U64::new(7),
        compare: big_endian::U64::new(1),
    });
    let mut atomic_write = rc(Op::AtomicWrite, 6);
    atomic_write.reth = Some(reth(MR_IOVA + 0x1008, 8));
    atomic_write.payload = b"8 bytes!".to_vec();
    let mut flush = rc(Op::Flush, 7);
    flush.reth = Some(reth(MR_IOVA, 64));
    flush.feth = Some(u32::from(IB_FLUSH_GLOBAL));
    let mut ud = Packet::new(
        Opcode {
            transport: Transport::Ud,
            op: Op::SendOnly,
        },
        4,
        0,
    );
    ud.deth = Some(Deth {
        qkey: QKEY.into(),
        reserved: 0,
        src_qp: [0, 0, 4],
    });
    ud.payload = b"a datagram".to_vec();
    let mut s = recv(0);
    s.extend(recv(0));
    s.extend(recv(2));
    for p in [
        &send,
        &write,
        &read,
        &add,
        &write_imm,
        &swap,
        &atomic_write,
        &flush,
        &ud,
    ] {
        s.extend(rec(WIRE, &frame(p)));
    }
    let mut bad = frame(&send);
    if let Some(last) = bad.last_mut() {
        *last ^= 1;
    }
    s.extend(rec(WIRE, &bad));
    s
}

/// A record.
fn rec(tag: u8, element: &[u8]) -> Vec<u8> {
    let mut out = vec![tag, u8::try_from(element.len()).expect("short element")];
    out.extend_from_slice(element);
    out
}

fn sq_element(opcode: u8, wr: &[u8], sges: &[(u64, u32, u32)]) -> Vec<u8> {
    let mut h = VirtioRdmaSqReq::new_zeroed();
    h.wr_id = U64::new(0x77);
    h.opcode = opcode;
    h.num_sge = zerocopy::little_endian::U16::new(sges.len() as u16);
    h.send_flags = U32::new(IB_SEND_SIGNALED);
    h.wr[..wr.len()].copy_from_slice(wr);
    let mut b = h.as_bytes().to_vec();
    for &(addr, length, lkey) in sges {
        let s = VirtioRdmaSge {
            addr: U64::new(addr),
            length: U32::new(length),
            lkey: U32::new(lkey),
        };
        b.extend_from_slice(s.as_bytes());
    }
    b
}

fn rq_element(sges: &[(u64, u32, u32)]) -> Vec<u8> {
    let mut h = VirtioRdmaRqReq::new_zeroed();
    h.wr_id = U64::new(0x88);
    h.num_sge = U32::new(sges.len() as u32);
    let mut b = h.as_bytes().to_vec();
    for &(addr, length, lkey) in sges {
        let s = VirtioRdmaSge {
            addr: U64::new(addr),
            length: U32::new(length),
            lkey: U32::new(lkey),
        };
        b.extend_from_slice(s.as_bytes());
    }
    b
}

/// Seeds of `data_path`: receives on `b`, then from `a` every RC operation
/// into `b`'s MR, UC SEND and WRITE, and a UD SEND.
pub fn data_path_seeds() -> Vec<Vec<u8>> {
    // Key byte 0 under the fuzzing feature: MR 1 of each device.
    let (akey, bkey) = (crate::mr::make_key(1, 0), crate::mr::make_key(1, 0));
    let recv = |qp: u8| {
        rec(
            1 | (qp << 1) | 8,
            &rq_element(&[(MR_IOVA + 0x100, 0x800, bkey)]),
        )
    };
    let rdma = |addr: u64| {
        VirtioRdmaSqRdma {
            remote_addr: U64::new(addr),
            rkey: U32::new(bkey),
            reserved: U32::new(0),
        }
        .as_bytes()
        .to_vec()
    };
    let mut at = VirtioRdmaSqAtomic::new_zeroed();
    at.remote_addr = U64::new(MR_IOVA + 0x1000);
    at.rkey = U32::new(bkey);
    at.compare_add = U64::new(5);
    let mut ud = VirtioRdmaSqUd::new_zeroed();
    ud.remote_qpn = U32::new(4);
    ud.remote_qkey = U32::new(QKEY);
    ud.av.dgid = gid(2);
    ud.av.port_num = 1;
    let src = [(A_DATA, 0x600, akey)];
    let src16 = [(A_DATA, 16, akey)];
    let mut s = Vec::new();
    s.extend(recv(0));
    s.extend(rec(0, &sq_element(IB_WR_SEND, &[], &src)));
    s.extend(rec(
        0,
        &sq_element(IB_WR_RDMA_WRITE, &rdma(MR_IOVA + 0x7f0), &src),
    ));
    s.extend(rec(0, &sq_element(IB_WR_RDMA_READ, &rdma(MR_IOVA), &src)));
    s.extend(rec(
        0,
        &sq_element(
            IB_WR_ATOMIC_FETCH_AND_ADD,
            at.as_bytes(),
            &[(A_DATA, 8, akey)],
        ),
    ));
    let mut uc = recv(1);
    uc.extend(rec(2, &sq_element(IB_WR_SEND, &[], &src)));
    // The MR's last 16 bytes, then 16 bytes of which 8 lie past its end
    // (lost: UC drops a write that fails its checks).
    let end = MR_IOVA + MR_LEN;
    uc.extend(rec(
        2,
        &sq_element(IB_WR_RDMA_WRITE, &rdma(end - 16), &src16),
    ));
    uc.extend(rec(
        2,
        &sq_element(IB_WR_RDMA_WRITE, &rdma(end - 8), &src16),
    ));
    let mut u = recv(2);
    u.extend(rec(
        4,
        &sq_element(IB_WR_SEND, ud.as_bytes(), &[(A_DATA, 512, akey)]),
    ));
    let mut refill = s.clone();
    refill.extend(rec(6, &[]));
    let wire = wire_seed(bkey, recv);
    vec![s, uc, u, refill, wire]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One pass of an SQ executes `SQ_BUDGET` elements and schedules the
    /// QP for the rest.
    #[test]
    fn an_sq_pass_is_bounded() {
        let Pair { ref mut a, .. } = setup();
        let key = crate::mr::make_key(1, 0);
        let mut wr = VirtioRdmaSqRdma::new_zeroed();
        wr.remote_addr = U64::new(MR_IOVA);
        wr.rkey = U32::new(key);
        let n = 12;
        assert!(n > engine::SQ_BUDGET);
        for _ in 0..n {
            let e = sq_element(IB_WR_RDMA_WRITE, wr.as_bytes(), &[(A_DATA, 64, key)]);
            a.post(virtio_rdma_sq_vq(1, 2) as usize, &e, false);
        }
        let done = |a: &Side| {
            let used = RINGS + u64::from(virtio_rdma_cq_vq(CQN)) * 0x400 + 0x200;
            let mut idx = [0u8; 2];
            a.mem
                .read_slice(&mut idx, GuestAddress(used + 2))
                .expect("used idx");
            usize::from(u16::from_le_bytes(idx))
        };
        engine::sq_kicked(a.dev.ctrl(), 2);
        assert_eq!(done(a), engine::SQ_BUDGET, "one pass");
        assert!(
            a.dev.ctrl().lanes().of(2).take_scheduled().contains(&2),
            "the rest scheduled"
        );
        engine::sq_kicked(a.dev.ctrl(), 2);
        assert_eq!(done(a), n, "the next pass");
    }

    use zerocopy::FromBytes;

    /// The completions `s`'s CQ holds, in order.
    fn completions(s: &Side) -> Vec<VirtioRdmaCqReq> {
        let q = u64::from(virtio_rdma_cq_vq(CQN));
        let used = RINGS + q * 0x400 + 0x200;
        let mut idx = [0u8; 2];
        s.mem
            .read_slice(&mut idx, GuestAddress(used + 2))
            .expect("idx");
        (0..u16::from_le_bytes(idx))
            .map(|i| {
                let mut e = [0u8; 8];
                let at = used + 4 + u64::from(i % QSIZE) * 8;
                s.mem.read_slice(&mut e, GuestAddress(at)).expect("elem");
                let id = u64::from(u32::from_le_bytes([e[0], e[1], e[2], e[3]]));
                let mut c = [0u8; 48];
                let buf = BUFS + (q * u64::from(QSIZE) + id) * SLOT;
                s.mem.read_slice(&mut c, GuestAddress(buf)).expect("cqe");
                VirtioRdmaCqReq::read_from_bytes(&c).expect("cqe")
            })
            .collect()
    }

    fn status_of(c: &[VirtioRdmaCqReq]) -> Vec<(u64, u8)> {
        c.iter().map(|c| (c.wr_id.get(), c.status)).collect()
    }

    /// `b`'s QP 2 receives into MR2 (`wr_id` 0x88, the whole MR) and then
    /// a small one into MR 1 (`wr_id` 0x99).
    fn two_receives(b: &mut Side) {
        let big = crate::mr::make_key(2, 0);
        b.post(
            virtio_rdma_rq_vq(1, 2) as usize,
            &rq_element(&[(MR2_IOVA, MR2_LEN as u32, big)]),
            false,
        );
        let mut small = rq_element(&[(MR_IOVA, 16, crate::mr::make_key(1, 0))]);
        small[..8].copy_from_slice(&0x99u64.to_le_bytes());
        b.post(virtio_rdma_rq_vq(1, 2) as usize, &small, false);
    }

    /// `a` posts a message of 3 chunks (from its DMA MR) on QP 2: SEND, or
    /// WRITE into MR2.
    fn post_big(a: &mut Side, opcode: u8) -> u64 {
        let n = 3 * crate::engine::CHUNK;
        let data: Vec<u8> = (0..n).map(|i| (i * 13 + 1) as u8).collect();
        a.mem
            .write_slice(&data, GuestAddress(A_DATA))
            .expect("data");
        let mut wr = VirtioRdmaSqRdma::new_zeroed();
        wr.remote_addr = U64::new(MR2_IOVA);
        wr.rkey = U32::new(crate::mr::make_key(2, 0));
        let key = crate::mr::make_key(1, 0);
        let e = sq_element(opcode, wr.as_bytes(), &[(A_DATA, n as u32, key)]);
        a.post(virtio_rdma_sq_vq(1, 2) as usize, &e, false);
        n
    }

    fn to_err(s: &Side, qpn: u32) {
        let mut a = VirtioRdmaQpAttr::new_zeroed();
        a.qp_state = IB_QPS_ERR;
        let m = VirtioRdmaCmdModifyQp {
            qpn: U32::new(qpn),
            attr_mask: U32::new(IB_QP_STATE),
            attr: a,
        };
        s.ok(VIRTIO_RDMA_CMD_MODIFY_QP, m.as_bytes());
    }

    /// A driver that moves its avail index more than a queue's worth past
    /// the device's: virtio-queue takes nothing from such a ring, and the
    /// loops that take "more arrived" from a re-enabled notification (the
    /// flush of a QP in error, the SQ's) must stop rather than spin.
    #[test]
    fn an_overrun_ring_does_not_wedge_the_device() {
        // A wedged device spins holding the pair: fail the whole binary
        // rather than hang the suite.
        let (done, wedged) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            overrun_ring();
            let _ = done.send(());
        });
        match wedged.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(()) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("see its panic above"),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                eprintln!("an overrun ring wedged the device for 60 s");
                std::process::abort();
            }
        }
    }

    fn overrun_ring() {
        let Pair { ref mut a, .. } = setup();
        to_err(a, 2);
        let key = crate::mr::make_key(1, 0);
        for _ in 0..=QSIZE {
            a.post(
                virtio_rdma_rq_vq(1, 2) as usize,
                &rq_element(&[(A_DATA, 64, key)]),
                false,
            );
        }
        let mut wr = VirtioRdmaSqRdma::new_zeroed();
        wr.remote_addr = U64::new(MR_IOVA);
        for _ in 0..=QSIZE {
            let e = sq_element(IB_WR_RDMA_WRITE, wr.as_bytes(), &[(A_DATA, 64, key)]);
            a.post(virtio_rdma_sq_vq(1, 2) as usize, &e, false);
        }
        engine::rq_kicked(a.dev.ctrl(), 2);
        assert_eq!(engine::sq_kicked(a.dev.ctrl(), 2), 0, "nothing taken");
        assert!(completions(a).is_empty(), "nothing completed");
    }

    /// A WRITE_WITH_IMM whose target MR is deregistered after its first
    /// chunk ends there: the chunk moved stays, nothing after it is
    /// written, the requester gets REM_ACCESS_ERR, the responder moves to
    /// error and reports it, its held receive flushed first.
    #[test]
    fn a_chunked_write_stops_at_a_deregistration() {
        let Pair {
            ref mut a,
            ref mut b,
            ..
        } = setup();
        two_receives(b);
        let n = post_big(a, IB_WR_RDMA_WRITE_WITH_IMM);
        assert!(crate::engine::fuzz_step(a.dev.ctrl(), 2), "admitted");
        assert!(crate::engine::fuzz_step(a.dev.ctrl(), 2), "chunk 1");
        b.ok(VIRTIO_RDMA_CMD_DEREG_MR, &pair(2, 0));
        assert!(
            !crate::engine::fuzz_step(a.dev.ctrl(), 2),
            "chunk 2 refused"
        );
        assert_eq!(status_of(&completions(a)), [(0x77, IB_WC_REM_ACCESS_ERR)]);
        let mut got = vec![0u8; n as usize];
        b.mem
            .read_slice(&mut got, GuestAddress(MR2_PAGES))
            .expect("read");
        let c = crate::engine::CHUNK as usize;
        let want: Vec<u8> = (0..c as u64).map(|i| (i * 13 + 1) as u8).collect();
        assert_eq!(got[..c], want[..], "the first chunk arrived");
        assert!(
            got[c..].iter().all(|&x| x == 0),
            "nothing after the deregistration"
        );
        assert_eq!(
            status_of(&completions(b)),
            [(0x88, IB_WC_WR_FLUSH_ERR), (0x99, IB_WC_WR_FLUSH_ERR)]
        );
        // The responder QP moved to error and said why on its event queue.
        assert_eq!(
            b.dev.ctrl().lock().qp(2).map(|q| q.state()),
            Some(IB_QPS_ERR)
        );
        let ev = b.avail.len() as u64 - 1;
        let used = RINGS + ev * 0x400 + 0x200;
        let mut rec = [0u8; 6];
        b.mem
            .read_slice(&mut rec, GuestAddress(used + 2))
            .expect("used");
        assert_eq!(u16::from_le_bytes([rec[0], rec[1]]), 1, "one event");
        let id = u64::from(u32::from_le_bytes([rec[2], rec[3], rec[4], rec[5]]));
        let mut e = [0u8; 8];
        let buf = BUFS + (ev * u64::from(QSIZE) + id) * SLOT;
        b.mem.read_slice(&mut e, GuestAddress(buf)).expect("event");
        let word = |i: usize| u32::from_le_bytes([e[i], e[i + 1], e[i + 2], e[i + 3]]);
        assert_eq!((word(0), word(4)), (VIRTIO_RDMA_EVENT_QP_ACCESS_ERR, 2));
    }

    /// Flushing the responder while a SEND fills its first receive
    /// completes that receive first, then the next; the requester's next
    /// chunk finds no receive and fails as an unanswered RC request.
    #[test]
    fn a_flush_completes_the_held_receive_first() {
        let Pair {
            ref mut a,
            ref mut b,
            ..
        } = setup();
        two_receives(b);
        post_big(a, IB_WR_SEND);
        assert!(crate::engine::fuzz_step(a.dev.ctrl(), 2), "admitted");
        assert!(crate::engine::fuzz_step(a.dev.ctrl(), 2), "chunk 1");
        to_err(b, 2);
        assert_eq!(
            status_of(&completions(b)),
            [(0x88, IB_WC_WR_FLUSH_ERR), (0x99, IB_WC_WR_FLUSH_ERR)],
            "in RQ order"
        );
        assert!(!crate::engine::fuzz_step(a.dev.ctrl(), 2));
        assert_eq!(status_of(&completions(a)), [(0x77, IB_WC_RETRY_EXC_ERR)]);
    }

    /// A SEND abandoned after its first chunk (its requester flushed)
    /// leaves its receive to the next message, which completes it.
    #[test]
    fn an_abandoned_message_leaves_its_receive_to_the_next() {
        let Pair {
            ref mut a,
            ref mut b,
            ..
        } = setup();
        two_receives(b);
        post_big(a, IB_WR_SEND);
        assert!(crate::engine::fuzz_step(a.dev.ctrl(), 2), "admitted");
        assert!(crate::engine::fuzz_step(a.dev.ctrl(), 2), "chunk 1");
        to_err(a, 2);
        assert_eq!(status_of(&completions(a)), [(0x77, IB_WC_WR_FLUSH_ERR)]);
        // A new requester QP 2 on a, connected at the PSN b expects now.
        let expected = b.dev.ctrl().lock().qp(2).map(|q| q.attr.rq_psn.get());
        let mut attr = VirtioRdmaQpAttr::new_zeroed();
        attr.qp_state = IB_QPS_RESET;
        let m = VirtioRdmaCmdModifyQp {
            qpn: U32::new(2),
            attr_mask: U32::new(IB_QP_STATE),
            attr,
        };
        a.ok(VIRTIO_RDMA_CMD_MODIFY_QP, m.as_bytes());
        connect(a, 2, IB_QPT_RC, gid(2), expected.expect("b's QP"));
        let key = crate::mr::make_key(1, 0);
        let e = sq_element(IB_WR_SEND, &[], &[(A_DATA, 16, key)]);
        a.post(virtio_rdma_sq_vq(1, 2) as usize, &e, false);
        assert!(crate::engine::fuzz_step(a.dev.ctrl(), 2));
        let got = completions(b);
        assert_eq!(status_of(&got), [(0x88, IB_WC_SUCCESS)], "the held receive");
        assert_eq!(got[0].byte_len.get(), 16);
    }

    #[test]
    fn seeds_move_data_and_stay_inside() {
        let _ = env_logger::builder().is_test(true).try_init();
        let seeds = data_path_seeds();
        for s in &seeds {
            assert!(data_path(s) > 0);
        }
        data_path(&[]);
        // The first seed's SEND landed in b's MR (iova + 0x100 is offset
        // 0x900 of its first page), its WRITE at iova + 0x7f0, and the
        // fetch-and-add added 5 to the (zero) word at iova + 0x1000.
        let (_, Pair { ref b, .. }) = run(&seeds[0]);
        let mut got = [0u8; 16];
        b.mem
            .read_slice(&mut got, GuestAddress(MR_PAGES[0] + 0x900))
            .expect("read");
        let want: Vec<u8> = (0..16u32).map(|i| (i * 7 + 3) as u8).collect();
        assert_eq!(got[..], want[..], "the SEND's payload");
        let mut word = [0u8; 8];
        b.mem
            .read_slice(&mut word, GuestAddress(MR_PAGES[1] + 0x800))
            .expect("read");
        assert_eq!(u64::from_le_bytes(word), 5, "the fetch-and-add");
    }

    /// The wire seed: frames from `b`'s RC peer's address reach its QPs as
    /// requests do (the receives complete, the WRITE and the atomic land
    /// in its MR), and the frame with a wrong ICRC is counted and dropped.
    #[test]
    fn frames_from_the_wire_reach_b() {
        let seed = data_path_seeds().pop().expect("the wire seed");
        let (_, pair) = run(&seed);
        let b = &pair.b;
        let recvs: Vec<_> = completions(b)
            .iter()
            .filter(|c| c.opcode == IB_WC_RECV)
            .map(|c| (c.qp_num.get(), c.status, c.byte_len.get()))
            .collect();
        assert_eq!(
            recvs,
            [(2, IB_WC_SUCCESS, 20), (4, IB_WC_SUCCESS, 40 + 10)],
            "the SEND and the datagram"
        );
        let imms: Vec<_> = completions(b)
            .iter()
            .filter(|c| c.opcode == IB_WC_RECV_RDMA_WITH_IMM)
            .map(|c| (c.qp_num.get(), c.status, c.byte_len.get(), c.ex.get()))
            .collect();
        // The frame's immediate bytes 00 00 00 99, in the CQE as they came.
        assert_eq!(
            imms,
            [(2, IB_WC_SUCCESS, 8, u32::from_le_bytes([0, 0, 0, 0x99]))],
            "the WRITE with immediate"
        );
        let mut w = [0u8; 0x28];
        b.mem
            .read_slice(&mut w, GuestAddress(MR_PAGES[0] + 0x800 + 0x40))
            .expect("read");
        assert_eq!(w[..16], [0x5a; 16], "the WRITE");
        assert_eq!(w[0x20..], [0xa5; 8], "the WRITE with immediate's bytes");
        let mut word = [0u8; 16];
        b.mem
            .read_slice(&mut word, GuestAddress(MR_PAGES[1] + 0x800))
            .expect("read");
        // The fetch-and-add made it 1, the compare-and-swap 7.
        assert_eq!(word[..8], 7u64.to_le_bytes(), "the atomics");
        assert_eq!(&word[8..], b"8 bytes!", "the ATOMIC WRITE");
        let stats = b.dev.ctrl().stats();
        assert_eq!(stats.get(crate::stats::Counter::WireRxPkts), 9);
        // The FLUSH was granted: a refused one is a NAK, and the QP in error.
        let ok = b.dev.ctrl().lock().qp(2).map(|q| q.can_receive());
        assert_eq!(ok, Some(true), "QP 2 still works");
        assert_eq!(stats.get(crate::stats::Counter::WireRxDropped), 1);
    }

    /// A RoCEv2 frame to an address of the guest that is not one of the
    /// port's GIDs is not the device's (a NIC offloads RoCE for its GIDs
    /// only): it goes to the guest's own stack, where rxe on the same
    /// netdev may take it, and the device neither takes nor counts it.
    #[test]
    fn a_frame_to_another_address_is_the_guests() {
        use crate::packet::{Op, Opcode, Packet, Transport};
        let Pair { ref b, .. } = setup();
        let mut send = Packet::new(
            Opcode {
                transport: Transport::Rc,
                op: Op::SendOnly,
            },
            2,
            0,
        );
        send.payload = b"to another address".to_vec();
        let other = "fd00::77".parse().expect("an address");
        assert!(!engine::wire::received(&b.dev, &frame_to(&send, other)));
        let stats = b.dev.ctrl().stats();
        assert_eq!(stats.get(crate::stats::Counter::WireRxPkts), 0);
        assert_eq!(stats.get(crate::stats::Counter::WireRxDropped), 0);
        assert!(engine::wire::received(&b.dev, &frame(&send)), "to b's GID");
    }

    /// A UC QP whose peer is on the wire: its SEND leaves as UC packets
    /// cut at the path MTU and completes at once (nothing acknowledges
    /// UC); of the peer's messages, one that lost a packet on the way is
    /// dropped and the next arrives whole, in the receive the dropped one
    /// had begun to fill; nothing moves the QP to error.
    #[test]
    fn a_uc_qp_on_the_wire_drops_a_message_with_a_gap() {
        use crate::engine::wire::ip_of;
        use crate::packet::Transport;
        use crate::transport::requester::Request;
        use crate::transport::uc;

        let _one = ONE_PAIR.lock().unwrap_or_else(|e| e.into_inner());
        let (mut a, theirs, qpn, peer_mac) = on_the_wire(IB_QPT_UC);
        let key = crate::mr::make_key(1, 0);
        let payload: Vec<u8> = (0..3000u32).map(|i| (i * 11) as u8).collect();
        a.mem
            .write_slice(&payload, GuestAddress(A_DATA))
            .expect("payload");
        a.post(
            virtio_rdma_sq_vq(1, qpn) as usize,
            &sq_element(IB_WR_SEND, &[], &[(A_DATA, 3000, key)]),
            false,
        );
        engine::sq_kicked(a.dev.ctrl(), qpn);
        let mut rx = uc::Receiver::new(1024, 0x10);
        let mut peer_mem = Peer::default();
        for f in frames(&theirs) {
            let (_, p) = crate::roce::decode(&f).expect("a RoCEv2 frame");
            assert_eq!(p.opcode.transport, Transport::Uc);
            rx.on_packet(&p, &mut peer_mem);
        }
        assert_eq!(peer_mem.0, [payload], "the SEND, whole, once");
        assert_eq!(status_of(&completions(&a)), [(0x77, IB_WC_SUCCESS)]);

        // One receive, 4 KiB at A_DATA + 0x1000.
        a.post(
            virtio_rdma_rq_vq(1, qpn) as usize,
            &rq_element(&[(A_DATA + 0x1000, 4096, key)]),
            false,
        );
        engine::rq_kicked(a.dev.ctrl(), qpn);
        let mut tx = uc::Sender::new(qpn, 1024, 0);
        let send = |len: usize, seed: u8| Request::Send {
            payload: (0..len).map(|i| (i as u8) ^ seed).collect(),
            imm: None,
            inv: None,
        };
        let mut out = Vec::new();
        tx.send(&send(3000, 0x5a), &mut out);
        out.remove(1);
        tx.send(&send(1500, 0xa5), &mut out);
        let peer = ip_of(&gid(9));
        for p in &out {
            engine::wire::received(&a.dev, &from_peer(peer, peer_mac, p));
        }
        let recvs: Vec<_> = completions(&a)
            .iter()
            .filter(|c| c.opcode == IB_WC_RECV)
            .map(|c| (c.status, c.byte_len.get()))
            .collect();
        assert_eq!(recvs, [(IB_WC_SUCCESS, 1500)], "only the second message");
        let mut got = vec![0u8; 1500];
        a.mem
            .read_slice(&mut got, GuestAddress(A_DATA + 0x1000))
            .expect("read");
        assert!(got.iter().enumerate().all(|(i, b)| *b == (i as u8) ^ 0xa5));
        let state = a.dev.ctrl().lock().qp(qpn).map(|q| q.can_receive());
        assert_eq!(state, Some(true), "the QP still takes packets");
        let stats = a.dev.ctrl().stats();
        assert_eq!(stats.get(crate::stats::Counter::BadPsn), 1, "the gap");
    }

    /// Every frame waiting on `sock`.
    fn frames(sock: &std::os::unix::net::UnixDatagram) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = [0u8; 2048];
        while let Ok(n) = sock.recv(&mut buf) {
            out.push(buf[..n].to_vec());
        }
        out
    }

    /// The remote peer's side: received messages.
    #[derive(Default)]
    struct Peer(Vec<Vec<u8>>);

    use crate::transport::responder::Refusal;
    use crate::transport::AtomicOp;

    impl crate::transport::responder::Target for Peer {
        fn receive(
            &mut self,
            part: crate::transport::responder::SendPart<'_>,
        ) -> Result<(), crate::transport::responder::Refusal> {
            if part.first {
                self.0.push(Vec::new());
            }
            if let Some(m) = self.0.last_mut() {
                m.extend_from_slice(part.data);
            }
            Ok(())
        }
        fn write(
            &mut self,
            _: u64,
            _: u32,
            _: &[u8],
        ) -> Result<(), crate::transport::responder::Refusal> {
            Err(crate::transport::responder::Refusal::Access)
        }
        fn read(
            &mut self,
            _: u64,
            _: u32,
            _: u32,
        ) -> Result<Vec<u8>, crate::transport::responder::Refusal> {
            Err(crate::transport::responder::Refusal::Access)
        }
        fn write_imm(&mut self, _: u32, _: u32, _: bool) -> Result<(), Refusal> {
            Err(Refusal::NoReceive)
        }
        fn atomic(&mut self, _: u64, _: u32, _: AtomicOp) -> Result<u64, Refusal> {
            Err(Refusal::Access)
        }
        fn atomic_write(&mut self, _: u64, _: u32, _: [u8; 8]) -> Result<(), Refusal> {
            Err(Refusal::Access)
        }
        fn flush(&mut self, _: u64, _: u32, _: u32, _: u32) -> Result<(), Refusal> {
            Err(Refusal::Access)
        }
    }

    /// Device `a` (gid(1)) on an uplink that is a socket pair, with a PD,
    /// a CQ, its DMA MR and a connected QP of type `t` whose peer is
    /// gid(9), QP 7, at PSN 0x10 with transport timeout 1 (8 µs); the
    /// peer's MAC learnt. The other end of the pair, the QP number and the
    /// peer's MAC.
    fn on_the_wire(t: u8) -> (Side, std::os::unix::net::UnixDatagram, u32, [u8; 6]) {
        use std::os::unix::net::UnixDatagram;
        let (ours, theirs) = UnixDatagram::pair().expect("socket pair");
        ours.set_nonblocking(true).expect("non-blocking");
        theirs.set_nonblocking(true).expect("non-blocking");
        let up = crate::net::uplink::Uplink::over(
            "test".into(),
            std::fs::File::from(std::os::fd::OwnedFd::from(ours)),
        );
        let a = Side::on("wire-a", 1, Some(up));
        let mut g = VirtioRdmaCmdAddGid::new_zeroed();
        g.gid = gid(1);
        g.gid_type = U32::new(2);
        g.port_num = U32::new(1);
        a.ok(VIRTIO_RDMA_CMD_ADD_GID, g.as_bytes());
        a.ok(VIRTIO_RDMA_CMD_CREATE_PD, &[]);
        a.ok(VIRTIO_RDMA_CMD_CREATE_CQ, &pair(u32::from(QSIZE), 0));
        let mut a = a;
        a.fill(virtio_rdma_cq_vq(CQN) as usize, QSIZE);
        a.ok(VIRTIO_RDMA_CMD_GET_DMA_MR, &pair(1, IB_ACCESS_LOCAL_WRITE));
        let mut c = VirtioRdmaCmdCreateQp::new_zeroed();
        c.pdn = U32::new(1);
        c.qp_type = t;
        c.max_send_wr = U32::new(u32::from(QSIZE));
        c.max_recv_wr = U32::new(u32::from(QSIZE));
        c.max_send_sge = U32::new(4);
        c.max_recv_sge = U32::new(4);
        c.send_cqn = U32::new(CQN);
        c.recv_cqn = U32::new(CQN);
        let qpn = u32::from_le_bytes(
            a.ok(VIRTIO_RDMA_CMD_CREATE_QP, c.as_bytes())[..4]
                .try_into()
                .expect("qpn"),
        );
        connect_timed(&a, qpn, t, gid(9), 0x10, 1);
        let peer_mac = [0x02, 0, 0, 0, 0, 9];
        // What the peer's address was seen to come from (an IPv6 packet).
        let mut hello = Vec::new();
        etherparse::PacketBuilder::ethernet2(peer_mac, limits(1).mac().0)
            .ipv6(gid(9), gid(1), 64)
            .udp(1, 2)
            .write(&mut hello, b"hi")
            .expect("frame");
        a.dev.uplink().expect("uplink").learn(&hello);
        (a, theirs, qpn, peer_mac)
    }

    /// The frame of packet `p` from the peer at `from` to `a`.
    fn from_peer(from: std::net::IpAddr, peer_mac: [u8; 6], p: &crate::packet::Packet) -> Vec<u8> {
        let ep = crate::roce::Endpoints {
            src_mac: peer_mac,
            dst_mac: limits(1).mac().0,
            src_ip: from,
            dst_ip: crate::engine::wire::ip_of(&gid(1)),
            src_port: crate::roce::source_port(7),
            traffic_class: 0,
            hop_limit: 64,
            flow_label: 0,
        };
        let mut f = Vec::new();
        crate::roce::encode(&ep, p, &mut f).expect("encode");
        f
    }

    /// A frame from the wire longer than the port's MTU allows (1500 here)
    /// is dropped as the port's, RoCEv2 or not, before the transport sees
    /// it; one of the whole MTU reaches the transport.
    #[test]
    fn a_frame_beyond_the_ports_mtu_is_dropped_at_the_port() {
        use crate::packet::{Op, Opcode, Packet, Transport};
        use crate::stats::Counter;
        // Its GID is the wire pair's: one at a time (a GID is one device's).
        let _one = ONE_PAIR.lock().unwrap_or_else(|e| e.into_inner());
        let (ours, _theirs) = std::os::unix::net::UnixDatagram::pair().expect("socket pair");
        let up = crate::net::uplink::Uplink::over(
            "mtu".into(),
            std::fs::File::from(std::os::fd::OwnedFd::from(ours)),
        );
        let rings = crate::limits::Rings::new(2, 2, 1, 0).expect("rings");
        let l = limits(1)
            .with_rings(Some(rings))
            .and_then(|l| l.with_net(true))
            .expect("net limits");
        let mem = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), MEM)]).expect("memory");
        let dev = Arc::new(
            RdmaDevice::on("mtu", l, GuestMemoryAtomic::new(mem), Some(up)).expect("device"),
        );
        dev.ctrl().set_acked_features(1 << VIRTIO_RDMA_F_RINGS);
        let mut g = VirtioRdmaCmdAddGid::new_zeroed();
        g.gid = gid(1);
        g.gid_type = U32::new(2);
        g.port_num = U32::new(1);
        let out = dev
            .ctrl()
            .execute(&request(VIRTIO_RDMA_CMD_ADD_GID, g.as_bytes()), 8);
        assert_eq!(out[0], VIRTIO_RDMA_S_OK);
        let frame_of = |payload: usize| {
            let mut p = Packet::new(
                Opcode {
                    transport: Transport::Rc,
                    op: Op::SendOnly,
                },
                2,
                0x10,
            );
            p.payload = vec![7; payload];
            from_peer(crate::engine::wire::ip_of(&gid(9)), [2, 0, 0, 0, 0, 9], &p)
        };
        let stats = dev.ctrl().stats();
        let seen = || stats.get(Counter::WireRxPkts) + stats.get(Counter::WireRxDropped);
        // Ethernet (14), IPv6 (40), UDP (8), BTH (12) and ICRC (4) around
        // the payload: 1518 bytes with 1440 of it.
        let big = frame_of(1444);
        assert_eq!(big.len(), 1522);
        dev.from_uplink(&big);
        assert_eq!(stats.get(Counter::NetRxDropped), 1);
        assert_eq!(seen(), 0, "the transport never saw it");
        let fits = frame_of(1440);
        assert_eq!(fits.len(), 1518);
        dev.from_uplink(&fits);
        assert_eq!(stats.get(Counter::NetRxDropped), 1);
        assert_eq!(seen(), 1, "the transport saw it");
    }

    /// An RC QP whose peer is on the wire (a device on an uplink, over a
    /// socket here): its SENDs leave as RoCEv2 frames cut at the path MTU,
    /// from its MAC and GID to the MAC its port learnt for the peer's
    /// address; the peer's ACKs (IB's responder on the other end) complete
    /// them; a frame the link loses goes again on the transport timer, and
    /// answers from another address are not taken.
    #[test]
    fn an_rc_qp_on_the_wire_runs_ibs_transport() {
        use crate::engine::wire::ip_of;
        use crate::roce::decode;

        let _one = ONE_PAIR.lock().unwrap_or_else(|e| e.into_inner());
        let (mut a, theirs, qpn, peer_mac) = on_the_wire(IB_QPT_RC);
        let (me, peer) = (ip_of(&gid(1)), ip_of(&gid(9)));

        let key = crate::mr::make_key(1, 0);
        let payload: Vec<u8> = (0..3000u32).map(|i| (i * 13) as u8).collect();
        a.mem
            .write_slice(&payload, GuestAddress(A_DATA))
            .expect("payload");
        let sq = virtio_rdma_sq_vq(1, qpn) as usize;
        a.post(
            sq,
            &sq_element(IB_WR_SEND, &[], &[(A_DATA, 3000, key)]),
            false,
        );
        engine::sq_kicked(a.dev.ctrl(), qpn);
        let sent = frames(&theirs);
        assert_eq!(sent.len(), 3, "3000 bytes at a 1024-byte path MTU");

        // The peer: IB's responder, answering what it is sent.
        let mut responder = crate::transport::responder::Responder::new(qpn, 1024, 0x10, 0);
        let mut peer_mem = Peer::default();
        let answer = |a: &Side,
                      from: std::net::IpAddr,
                      sent: Vec<Vec<u8>>,
                      r: &mut crate::transport::responder::Responder,
                      m: &mut Peer| {
            let mut out = Vec::new();
            for f in sent {
                let (ep, p) = decode(&f).expect("a RoCEv2 frame");
                assert_eq!((ep.src_ip, ep.dst_ip, ep.dst_mac), (me, peer, peer_mac));
                assert_eq!(ep.src_mac, limits(1).mac().0);
                r.on_packet(&p, m, &mut out);
            }
            for p in out {
                engine::wire::received(&a.dev, &from_peer(from, peer_mac, &p));
            }
        };
        // An ACK from another address: not the QP's peer, not taken.
        answer(
            &a,
            ip_of(&gid(8)),
            sent.clone(),
            &mut crate::transport::responder::Responder::new(qpn, 1024, 0x10, 0),
            &mut Peer::default(),
        );
        assert!(
            completions(&a).is_empty(),
            "an ACK from another host completed the SEND"
        );
        answer(&a, peer, sent, &mut responder, &mut peer_mem);
        assert_eq!(peer_mem.0.len(), 1, "the message, once");
        assert_eq!(peer_mem.0[0], payload, "whole");
        assert_eq!(status_of(&completions(&a)), [(0x77, IB_WC_SUCCESS)]);

        // The next one is lost on the way: the timer sends it again.
        a.post(
            sq,
            &sq_element(IB_WR_SEND, &[], &[(A_DATA, 100, key)]),
            false,
        );
        engine::sq_kicked(a.dev.ctrl(), qpn);
        assert_eq!(frames(&theirs).len(), 1, "sent, and lost");
        std::thread::sleep(std::time::Duration::from_millis(2));
        engine::wire::tick(&a.dev);
        let again = frames(&theirs);
        assert_eq!(again.len(), 1, "sent again");
        answer(&a, peer, again, &mut responder, &mut peer_mem);
        assert_eq!(peer_mem.0.len(), 2);
        assert_eq!(peer_mem.0[1], payload[..100]);
        assert_eq!(
            status_of(&completions(&a)),
            [(0x77, IB_WC_SUCCESS), (0x77, IB_WC_SUCCESS)]
        );
    }
}
