// SPDX-License-Identifier: GPL-2.0
//! Test support shared by `tests/data_path.rs` and the benchmarks:
//! a device served over a real vhost-user socket in-process, driven by
//! rust-vmm's `Frontend` with guest memory in a file and split rings
//! written by hand (one control queue, the CQ queues pre-filled with CQE
//! buffers, SQ/RQ queues fed one element per descriptor).
// Each including crate uses a different part.
#![allow(dead_code)]

pub mod rings;

use std::mem::size_of;
use std::path::PathBuf;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vhost_user_rdma::abi::*;
use vhost_user_rdma::device::{self, DeviceError, RdmaDevice};
use vhost_user_rdma::ib::*;
use vhost_user_rdma::limits::{Limits, Mac};
use virtio_bindings::bindings::virtio_ring::VIRTIO_RING_F_EVENT_IDX;
use vm_memory::{Bytes, FileOffset, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};
use vmm_sys_util::tempdir::TempDir;
use vmm_sys_util::tempfile::TempFile;
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

/// Guest memory size of [`Dev::start`].
pub const MEM_SIZE: usize = 0x80_0000;
/// Guest memory size of a NIC's frontend ([`Dev::start_on`]).
pub const NIC_MEM_SIZE: usize = 0x60_0000;
pub const QSIZE: u16 = 16;
pub const MAX_QP: u32 = 8;
pub const MAX_CQ: u32 = 4;
pub const RINGS: u64 = 0x1_0000;
pub const BUFS: u64 = 0x4_0000;
pub const SLOT: u64 = 0x400;
/// Guest memory the tests use for payloads (what MRs map).
pub const DATA: u64 = 0x20_0000;
pub const F_NEXT: u16 = 1;
pub const F_WRITE: u16 = 2;
pub const CQE_LEN: usize = 48;

pub static NEXT_ID: AtomicU32 = AtomicU32::new(1);

/// Threads (lanes) of a test device: two, so that QPs of one device
/// (odd and even numbers) are served by two threads at once.
pub const THREADS: u32 = 2;

pub fn limits(mac: u8) -> Limits {
    Limits::new(
        MAX_QP,
        MAX_CQ,
        u32::from(QSIZE),
        Mac([0x52, 0x54, 0, 0, 0, mac]),
    )
    .and_then(|l| l.with_threads(THREADS))
    .expect("limits")
}

/// Connects a frontend to `socket` as QEMU would: `nq` vrings of
/// [`QSIZE`], all enabled, over a guest memory of `mem_size` bytes in a
/// file of its own; the virtio features in `refused` not negotiated.
fn connect(socket: &std::path::Path, nq: usize, mem_size: usize, refused: u64) -> Connection {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut fe = loop {
        match Frontend::connect(socket, 256) {
            Ok(f) => break f,
            Err(e) if Instant::now() > deadline => panic!("connect: {e}"),
            Err(_) => thread::sleep(Duration::from_millis(5)),
        }
    };
    fe.set_owner().expect("owner");
    let f = fe.get_features().expect("features") & !refused;
    fe.set_features(f).expect("set features");
    let event_idx = f & (1 << VIRTIO_RING_F_EVENT_IDX) != 0;
    let p = fe.get_protocol_features().expect("proto");
    fe.set_protocol_features(p).expect("set proto");

    let file = TempFile::new_with_prefix("/tmp/vrdma-dpmem").expect("tempfile");
    file.as_file().set_len(mem_size as u64).expect("size");
    let fd = file.as_file().try_clone().expect("dup");
    let mem = GuestMemoryMmap::<()>::from_ranges_with_files(&[(
        GuestAddress(0),
        mem_size,
        Some(FileOffset::new(fd, 0)),
    )])
    .expect("map");
    let host = mem.get_host_address(GuestAddress(0)).expect("host") as u64;
    let region = VhostUserMemoryRegionInfo::from_guest_region(
        mem.find_region(GuestAddress(0)).expect("region"),
    )
    .expect("region info");
    fe.set_mem_table(&[region]).expect("mem table");
    let mut vqs = Vec::new();
    for index in 0..nq {
        let vq = Vq {
            index,
            next_avail: 0,
            used_seen: 0,
            kick: EventFd::new(EFD_NONBLOCK).expect("kick"),
            call: EventFd::new(EFD_NONBLOCK).expect("call"),
        };
        fe.set_vring_num(index, QSIZE).expect("num");
        let cfg = VringConfigData {
            queue_max_size: QSIZE,
            queue_size: QSIZE,
            flags: 0,
            desc_table_addr: host + vq.desc(),
            used_ring_addr: host + vq.used(),
            avail_ring_addr: host + vq.avail(),
            log_addr: None,
        };
        fe.set_vring_addr(index, &cfg).expect("addr");
        fe.set_vring_base(index, 0).expect("base");
        fe.set_vring_call(index, &vq.call).expect("call");
        fe.set_vring_kick(index, &vq.kick).expect("kick");
        fe.set_vring_enable(index, true).expect("enable");
        vqs.push(vq);
    }
    // None of those messages waits for a reply, so the backend may still
    // be setting up vrings when the first command runs (an event posted
    // then would find the event queue not ready). One that waits orders
    // them all first.
    fe.get_features().expect("features");
    Connection {
        fe,
        mem,
        file,
        vqs,
        event_idx,
    }
}

/// A frontend [`connect`] set up: its connection, guest memory (and the
/// file behind it), vrings, and whether EVENT_IDX was negotiated.
struct Connection {
    fe: Frontend,
    mem: GuestMemoryMmap,
    file: TempFile,
    vqs: Vec<Vq>,
    event_idx: bool,
}

/// One hand-driven split virtqueue.
pub struct Vq {
    pub index: usize,
    pub next_avail: u16,
    pub used_seen: u16,
    pub kick: EventFd,
    pub call: EventFd,
}

impl Vq {
    pub fn ring(&self) -> u64 {
        RINGS + self.index as u64 * 0x400
    }
    pub fn desc(&self) -> u64 {
        self.ring()
    }
    pub fn avail(&self) -> u64 {
        self.ring() + 0x100
    }
    pub fn used(&self) -> u64 {
        self.ring() + 0x200
    }
    pub fn buf(&self, slot: u16) -> u64 {
        BUFS + self.index as u64 * u64::from(QSIZE) * SLOT + u64::from(slot) * SLOT
    }
}

/// A completion as the device wrote it.
#[derive(Debug, Clone, Copy)]
pub struct Wc(pub VirtioRdmaCqReq);

impl Wc {
    pub fn wr_id(&self) -> u64 {
        self.0.wr_id.get()
    }
    pub fn status(&self) -> u8 {
        self.0.status
    }
    pub fn opcode(&self) -> u8 {
        self.0.opcode
    }
    pub fn byte_len(&self) -> u32 {
        self.0.byte_len.get()
    }
}

/// A device, its backend thread, guest memory and queues.
pub struct Dev {
    /// The directory of the device's sockets (the device's `Dev` owns it).
    pub _dir: Option<TempDir>,
    pub fe: Option<Frontend>,
    pub dev: Arc<RdmaDevice>,
    pub thread: Option<JoinHandle<Result<(), DeviceError>>>,
    pub mem: GuestMemoryMmap,
    pub _file: TempFile,
    pub vqs: Vec<Vq>,
    pub gid: [u8; 16],
    /// VIRTIO_RING_F_EVENT_IDX was negotiated.
    pub event_idx: bool,
}

impl Dev {
    pub fn start() -> Dev {
        Dev::start_with_mem(MEM_SIZE)
    }

    /// A device with `mem_size` bytes of guest memory.
    pub fn start_with_mem(mem_size: usize) -> Dev {
        Dev::start_with(mem_size, |l| l)
    }

    /// A device with `mem_size` bytes of guest memory and the test limits
    /// as `adjust` changes them.
    pub fn start_with(mem_size: usize, adjust: impl FnOnce(Limits) -> Limits) -> Dev {
        Dev::start_without(mem_size, adjust, 0)
    }

    /// [`Dev::start_with`], the virtio features in `refused` not
    /// negotiated.
    pub fn start_without(
        mem_size: usize,
        adjust: impl FnOnce(Limits) -> Limits,
        refused: u64,
    ) -> Dev {
        Dev::start_on(mem_size, adjust, refused, false).0
    }

    /// [`Dev::start_without`]; with `nic`, the device also serves its
    /// guest's NIC (`--nic-socket`), returned as a second `Dev` whose
    /// frontend and guest memory (of `NIC_MEM_SIZE` bytes, other than the
    /// device's) are the NIC's, its vrings [`NET_RXQ`] and [`NET_TXQ`].
    pub fn start_on(
        mem_size: usize,
        adjust: impl FnOnce(Limits) -> Limits,
        refused: u64,
        nic: bool,
    ) -> (Dev, Option<Dev>) {
        let _ = env_logger::builder().is_test(true).try_init();
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let dir = TempDir::new_with_prefix("/tmp/vrdma-dp").expect("tempdir");
        let socket: PathBuf = dir.as_path().join(format!("vrdma{id}.sock"));
        let nic_socket = dir.as_path().join(format!("vnic{id}.sock"));
        let (tx, rx) = mpsc::channel();
        let path = socket.clone();
        let lim = adjust(limits(id as u8));
        let nq = lim.num_queues();
        let nic_path = nic.then(|| nic_socket.clone());
        let thread = thread::spawn(move || {
            device::serve_with(&path, nic_path.as_deref(), lim, |dev| {
                let _ = tx.send(dev.clone());
            })
        });
        let dev = rx.recv_timeout(Duration::from_secs(10)).expect("started");
        let nic = nic.then(|| {
            let c = connect(&nic_socket, 2, NIC_MEM_SIZE, 0);
            Dev {
                _dir: None,
                fe: Some(c.fe),
                dev: dev.clone(),
                thread: None,
                mem: c.mem,
                _file: c.file,
                vqs: c.vqs,
                gid: [0; 16],
                event_idx: c.event_idx,
            }
        });
        let c = connect(&socket, nq, mem_size, refused);
        let gid = test_gid(id);
        let mut d = Dev {
            _dir: Some(dir),
            fe: Some(c.fe),
            dev,
            thread: Some(thread),
            mem: c.mem,
            _file: c.file,
            vqs: c.vqs,
            gid,
            event_idx: c.event_idx,
        };
        // The net personality's vring 0 is its receive queue: no ADD_GID.
        if !lim.net() {
            let mut req = gid.to_vec();
            req.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
            d.ok(VIRTIO_RDMA_CMD_ADD_GID, &req, 0);
        }
        (d, nic)
    }

    /// VHOST_USER_RESET_DEVICE, then what a frontend does to start the
    /// device again (features, vrings enabled).
    pub fn reset(&mut self) {
        let fe = self.fe.as_mut().expect("connected");
        fe.reset_device().expect("reset");
        let f = fe.get_features().expect("features");
        fe.set_features(f).expect("set features");
        for index in 0..self.vqs.len() {
            fe.set_vring_enable(index, true).expect("enable");
        }
    }

    pub fn write_desc(&self, q: usize, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
        let mut b = [0u8; 16];
        b[0..8].copy_from_slice(&addr.to_le_bytes());
        b[8..12].copy_from_slice(&len.to_le_bytes());
        b[12..14].copy_from_slice(&flags.to_le_bytes());
        b[14..16].copy_from_slice(&next.to_le_bytes());
        let at = self.vqs[q].desc() + 16 * u64::from(i);
        self.mem.write_slice(&b, GuestAddress(at)).expect("desc");
    }

    pub fn publish(&mut self, q: usize, head: u16) {
        self.publish_all(q, &[head]);
    }

    /// Makes the elements at `heads` available with one update of the
    /// avail index and at most one kick.
    pub fn publish_all(&mut self, q: usize, heads: &[u16]) {
        let vq = &mut self.vqs[q];
        let old = vq.next_avail;
        for &head in heads {
            let slot = vq.avail() + 4 + 2 * u64::from(vq.next_avail % QSIZE);
            self.mem.write_obj(head, GuestAddress(slot)).expect("avail");
            vq.next_avail = vq.next_avail.wrapping_add(1);
        }
        // used_event: ask for every interrupt.
        let ue = vq.avail() + 4 + 2 * u64::from(QSIZE);
        self.mem
            .write_obj(vq.used_seen, GuestAddress(ue))
            .expect("used_event");
        self.mem
            .write_obj(vq.next_avail, GuestAddress(vq.avail() + 2))
            .expect("avail idx");
        if !self.event_idx {
            // Kick unless the device set VRING_USED_F_NO_NOTIFY.
            fence(Ordering::SeqCst);
            let flags: u16 = self
                .mem
                .read_obj(GuestAddress(vq.used()))
                .expect("used flags");
            if flags & 1 == 0 {
                vq.kick.write(1).expect("kick");
            }
            return;
        }
        // Kick as Linux does with VIRTIO_RING_F_EVENT_IDX: only when the
        // device's avail_event (after the used ring) asks for this index.
        // The new avail index must be visible before avail_event is read
        // (virtqueue_kick_prepare's virtio_mb): without the full barrier the
        // store can sit in this CPU's store buffer while the device, having
        // seen no new element, sets avail_event and sleeps; the stale
        // avail_event read here then skips the kick, and the queue stalls.
        fence(Ordering::SeqCst);
        let ae: u16 = self
            .mem
            .read_obj(GuestAddress(vq.used() + 4 + 8 * u64::from(QSIZE)))
            .expect("avail_event");
        if vq.next_avail.wrapping_sub(ae).wrapping_sub(1) < vq.next_avail.wrapping_sub(old) {
            vq.kick.write(1).expect("kick");
        }
    }

    /// Posts one single-descriptor element to queue `q`.
    pub fn post(&mut self, q: usize, bytes: &[u8], writable: bool) -> u16 {
        let slot = self.stage(q, 0, bytes, writable);
        self.publish(q, slot);
        slot
    }

    /// Writes element `n` after the next available one of queue `q`
    /// without publishing it; its descriptor index.
    fn stage(&mut self, q: usize, n: u16, bytes: &[u8], writable: bool) -> u16 {
        let slot = self.vqs[q].next_avail.wrapping_add(n) % QSIZE;
        let buf = self.vqs[q].buf(slot);
        assert!(bytes.len() as u64 <= SLOT);
        self.mem.write_slice(bytes, GuestAddress(buf)).expect("buf");
        let flags = if writable { F_WRITE } else { 0 };
        self.write_desc(q, slot, buf, bytes.len() as u32, flags, 0);
        slot
    }

    /// Posts `wqes` to the SQ of QP `qpn` together: one avail index update
    /// and at most one kick, so the device finds them all at once.
    pub fn send_all(&mut self, qpn: u32, wqes: &[Vec<u8>]) {
        let q = Dev::sq_q(qpn);
        let heads: Vec<u16> = (0..wqes.len())
            .map(|n| self.stage(q, n as u16, &wqes[n], false))
            .collect();
        self.publish_all(q, &heads);
    }

    /// Interrupts queue `q` raised since the last call.
    pub fn interrupts(&self, q: usize) -> u64 {
        self.vqs[q].call.read().unwrap_or(0)
    }

    pub fn used_idx(&self, q: usize) -> u16 {
        self.mem
            .read_obj(GuestAddress(self.vqs[q].used() + 2))
            .expect("used idx")
    }

    /// Used entries of queue `q` not seen yet: (id, len).
    pub fn take_used(&mut self, q: usize) -> Vec<(u32, u32)> {
        let idx = self.used_idx(q);
        let mut out = Vec::new();
        while self.vqs[q].used_seen != idx {
            let e = self.vqs[q].used() + 4 + 8 * u64::from(self.vqs[q].used_seen % QSIZE);
            let id: u32 = self.mem.read_obj(GuestAddress(e)).expect("id");
            let len: u32 = self.mem.read_obj(GuestAddress(e + 4)).expect("len");
            out.push((id, len));
            self.vqs[q].used_seen = self.vqs[q].used_seen.wrapping_add(1);
        }
        out
    }

    /// A control command; returns (status, response body).
    pub fn cmd(&mut self, cmd: u32, body: &[u8], rsp: usize) -> (u8, Vec<u8>) {
        let mut req = [cmd.to_le_bytes(), [0; 4]].concat();
        req.extend_from_slice(body);
        let (rbuf, wbuf) = (self.vqs[0].buf(0), self.vqs[0].buf(2));
        assert!(req.len() as u64 <= 2 * SLOT);
        self.mem.write_slice(&req, GuestAddress(rbuf)).expect("req");
        self.mem
            .write_slice(&vec![0xee; 8 + rsp], GuestAddress(wbuf))
            .expect("rsp");
        self.write_desc(0, 0, rbuf, req.len() as u32, F_NEXT, 1);
        self.write_desc(0, 1, wbuf, 8 + rsp as u32, F_WRITE, 0);
        let before = self.used_idx(0);
        self.publish(0, 0);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.used_idx(0) == before {
            assert!(
                Instant::now() < deadline,
                "control command {cmd} not answered"
            );
            thread::sleep(Duration::from_micros(200));
        }
        let used = self.take_used(0);
        let len = used[0].1 as usize;
        let mut out = vec![0u8; len];
        self.mem
            .read_slice(&mut out, GuestAddress(wbuf))
            .expect("read rsp");
        (out[0], out.get(8..).unwrap_or(&[]).to_vec())
    }

    pub fn ok(&mut self, cmd: u32, body: &[u8], rsp: usize) -> Vec<u8> {
        let (st, b) = self.cmd(cmd, body, rsp);
        assert_eq!(st, VIRTIO_RDMA_S_OK, "command {cmd} failed");
        b
    }

    pub fn create_pd(&mut self) -> u32 {
        le32(&self.ok(VIRTIO_RDMA_CMD_CREATE_PD, &[], 8), 0)
    }

    pub fn cq_q(cqn: u32) -> usize {
        virtio_rdma_cq_vq(cqn) as usize
    }
    pub fn sq_q(qpn: u32) -> usize {
        virtio_rdma_sq_vq(MAX_CQ, qpn) as usize
    }
    pub fn rq_q(qpn: u32) -> usize {
        virtio_rdma_rq_vq(MAX_CQ, qpn) as usize
    }
    pub fn event_q() -> usize {
        virtio_rdma_event_vq(MAX_CQ, MAX_QP) as usize
    }

    /// Lends `n` buffers of `len` bytes to the event queue.
    pub fn fill_events(&mut self, n: u16, len: usize) {
        for _ in 0..n {
            self.post(Dev::event_q(), &vec![0u8; len], true);
        }
    }

    /// Events written so far, as (type, element); used entries of length 0
    /// (buffers the device refused) are skipped.
    pub fn events(&mut self) -> Vec<(u32, u32)> {
        let q = Dev::event_q();
        let mut out = Vec::new();
        for (id, len) in self.take_used(q) {
            if len == 0 {
                continue;
            }
            assert_eq!(len as usize, size_of::<VirtioRdmaEvent>(), "event length");
            let mut b = [0u8; size_of::<VirtioRdmaEvent>()];
            self.mem
                .read_slice(&mut b, GuestAddress(self.vqs[q].buf(id as u16)))
                .expect("event");
            let e = VirtioRdmaEvent::read_from_bytes(&b).expect("event");
            out.push((e.event_type.get(), e.element.get()));
        }
        out
    }

    /// CREATE_CQ, and fills its queue with `bufs` CQE buffers.
    pub fn create_cq(&mut self, bufs: u16) -> u32 {
        let cqn = le32(&self.ok(VIRTIO_RDMA_CMD_CREATE_CQ, &pair(16, 0), 8), 0);
        for _ in 0..bufs {
            self.post(Dev::cq_q(cqn), &[0u8; 64], true);
        }
        cqn
    }

    /// Completions of CQ `cqn` so far (buffers are reposted).
    pub fn poll(&mut self, cqn: u32) -> Vec<Wc> {
        let q = Dev::cq_q(cqn);
        let mut out = Vec::new();
        for (id, len) in self.take_used(q) {
            if len == 0 {
                continue;
            }
            assert_eq!(len as usize, CQE_LEN, "CQE length");
            let mut b = [0u8; CQE_LEN];
            let buf = self.vqs[q].buf(id as u16);
            self.mem.read_slice(&mut b, GuestAddress(buf)).expect("cqe");
            out.push(Wc(VirtioRdmaCqReq::read_from_bytes(&b).expect("cqe")));
            self.post(q, &[0u8; 64], true);
        }
        out
    }

    /// Waits for `n` completions on CQ `cqn`.
    pub fn wait(&mut self, cqn: u32, n: usize) -> Vec<Wc> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut out = Vec::new();
        while out.len() < n {
            out.extend(self.poll(cqn));
            assert!(
                Instant::now() < deadline,
                "{} of {n} completions on CQ {cqn}: {out:?}",
                out.len()
            );
            thread::sleep(Duration::from_micros(200));
        }
        out
    }

    /// Asserts that no completion arrives on CQ `cqn` for a while.
    pub fn quiet(&mut self, cqn: u32) {
        thread::sleep(Duration::from_millis(50));
        let got = self.poll(cqn);
        assert!(got.is_empty(), "unexpected completions {got:?}");
    }

    pub fn dma_mr(&mut self, pdn: u32, access: u32) -> u32 {
        let r = self.ok(VIRTIO_RDMA_CMD_GET_DMA_MR, &pair(pdn, access), 16);
        le32(&r, 4)
    }

    pub fn create_qp(&mut self, pdn: u32, t: u8, cq: u32, sig_all: bool) -> u32 {
        let mut req = VirtioRdmaCmdCreateQp::new_zeroed();
        req.pdn = U32::new(pdn);
        req.qp_type = t;
        req.sq_sig_all = u8::from(sig_all);
        req.max_send_wr = U32::new(8);
        req.max_send_sge = U32::new(4);
        req.send_cqn = U32::new(cq);
        req.max_recv_wr = U32::new(8);
        req.max_recv_sge = U32::new(4);
        req.recv_cqn = U32::new(cq);
        req.max_inline_data = U32::new(64);
        le32(&self.ok(VIRTIO_RDMA_CMD_CREATE_QP, req.as_bytes(), 8), 0)
    }

    pub fn modify(&mut self, qpn: u32, mask: u32, attr: VirtioRdmaQpAttr) -> u8 {
        let req = VirtioRdmaCmdModifyQp {
            qpn: U32::new(qpn),
            attr_mask: U32::new(mask),
            attr,
        };
        self.cmd(VIRTIO_RDMA_CMD_MODIFY_QP, req.as_bytes(), 0).0
    }

    /// RESET -> INIT -> RTR -> RTS for an RC QP connected to (`gid`, `dest`).
    pub fn rc_up(&mut self, qpn: u32, gid: [u8; 16], dest: u32, access: u32, rnr_retry: u8) {
        self.rc_up_psn(qpn, gid, dest, access, rnr_retry, (0, 0));
    }

    /// [`Dev::rc_up`] with (SQ PSN, RQ PSN) `psns`.
    pub fn rc_up_psn(
        &mut self,
        qpn: u32,
        gid: [u8; 16],
        dest: u32,
        access: u32,
        rnr_retry: u8,
        psns: (u32, u32),
    ) {
        // 4.096 µs × 2^10: about 4 ms per unanswered try, so that the
        // tests whose requests nobody takes end in RETRY_EXC_ERR quickly.
        self.rc_up_timed(qpn, gid, dest, access, rnr_retry, psns, (10, 7));
    }

    /// [`Dev::rc_up_psn`] with the transport timer's (`timeout`,
    /// `retry_cnt`).
    #[allow(clippy::too_many_arguments)]
    pub fn rc_up_timed(
        &mut self,
        qpn: u32,
        gid: [u8; 16],
        dest: u32,
        access: u32,
        rnr_retry: u8,
        psns: (u32, u32),
        (timeout, retry_cnt): (u8, u8),
    ) {
        let mut a = VirtioRdmaQpAttr::new_zeroed();
        a.qp_state = IB_QPS_INIT;
        a.port_num = 1;
        a.qp_access_flags = U32::new(access);
        let init = IB_QP_STATE | IB_QP_PORT | IB_QP_PKEY_INDEX | IB_QP_ACCESS_FLAGS;
        assert_eq!(self.modify(qpn, init, a), VIRTIO_RDMA_S_OK);
        a.qp_state = IB_QPS_RTR;
        a.path_mtu = 3;
        a.dest_qp_num = U32::new(dest);
        a.ah_attr.dgid = gid;
        a.ah_attr.port_num = 1;
        a.min_rnr_timer = 1;
        a.rq_psn = U32::new(psns.1);
        assert_eq!(self.modify(qpn, RC_RTR, a), VIRTIO_RDMA_S_OK);
        a.qp_state = IB_QPS_RTS;
        a.rnr_retry = rnr_retry;
        a.timeout = timeout;
        a.retry_cnt = retry_cnt;
        a.sq_psn = U32::new(psns.0);
        let rts = IB_QP_STATE
            | IB_QP_TIMEOUT
            | IB_QP_RETRY_CNT
            | IB_QP_RNR_RETRY
            | IB_QP_SQ_PSN
            | IB_QP_MAX_QP_RD_ATOMIC;
        assert_eq!(self.modify(qpn, rts, a), VIRTIO_RDMA_S_OK);
    }

    /// RESET -> INIT -> RTR -> RTS for a UC QP connected to (`gid`,
    /// `dest`): RC's path attributes without its RNR, retry and
    /// RDMA READ/atomic ones.
    pub fn uc_up(&mut self, qpn: u32, gid: [u8; 16], dest: u32, access: u32) {
        let mut a = VirtioRdmaQpAttr::new_zeroed();
        a.qp_state = IB_QPS_INIT;
        a.port_num = 1;
        a.qp_access_flags = U32::new(access);
        let init = IB_QP_STATE | IB_QP_PORT | IB_QP_PKEY_INDEX | IB_QP_ACCESS_FLAGS;
        assert_eq!(self.modify(qpn, init, a), VIRTIO_RDMA_S_OK);
        a.qp_state = IB_QPS_RTR;
        a.path_mtu = 3;
        a.dest_qp_num = U32::new(dest);
        a.ah_attr.dgid = gid;
        a.ah_attr.port_num = 1;
        let rtr = IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU | IB_QP_DEST_QPN | IB_QP_RQ_PSN;
        assert_eq!(self.modify(qpn, rtr, a), VIRTIO_RDMA_S_OK);
        a.qp_state = IB_QPS_RTS;
        assert_eq!(
            self.modify(qpn, IB_QP_STATE | IB_QP_SQ_PSN, a),
            VIRTIO_RDMA_S_OK
        );
    }

    /// RESET -> RTS for a UD (or GSI) QP with Q_Key `qkey`.
    pub fn ud_up(&mut self, qpn: u32, qkey: u32, gsi: bool) {
        let mut a = VirtioRdmaQpAttr::new_zeroed();
        a.qp_state = IB_QPS_INIT;
        a.port_num = 1;
        a.qkey = U32::new(qkey);
        let port = if gsi { 0 } else { IB_QP_PORT };
        let init = IB_QP_STATE | port | IB_QP_PKEY_INDEX | IB_QP_QKEY;
        assert_eq!(self.modify(qpn, init, a), VIRTIO_RDMA_S_OK);
        a.qp_state = IB_QPS_RTR;
        assert_eq!(self.modify(qpn, IB_QP_STATE, a), VIRTIO_RDMA_S_OK);
        a.qp_state = IB_QPS_RTS;
        assert_eq!(
            self.modify(qpn, IB_QP_STATE | IB_QP_SQ_PSN, a),
            VIRTIO_RDMA_S_OK
        );
    }

    pub fn move_to_err(&mut self, qpn: u32) {
        let mut a = VirtioRdmaQpAttr::new_zeroed();
        a.qp_state = IB_QPS_ERR;
        assert_eq!(self.modify(qpn, IB_QP_STATE, a), VIRTIO_RDMA_S_OK);
    }

    /// QUERY_QP: the QP's attributes.
    pub fn query(&mut self, qpn: u32) -> VirtioRdmaQpAttr {
        let r = self.ok(VIRTIO_RDMA_CMD_QUERY_QP, &pair(qpn, 0), 96);
        VirtioRdmaQpAttr::read_from_prefix(&r).expect("attr").0
    }

    pub fn qp_state(&mut self, qpn: u32) -> u8 {
        let r = self.ok(VIRTIO_RDMA_CMD_QUERY_QP, &pair(qpn, 0), 96);
        r[0]
    }

    pub fn send(&mut self, qpn: u32, wqe: &[u8]) {
        self.post(Dev::sq_q(qpn), wqe, false);
    }

    pub fn recv(&mut self, qpn: u32, wr_id: u64, sges: &[(u64, u32, u32)]) {
        let mut b = VirtioRdmaRqReq {
            wr_id: U64::new(wr_id),
            num_sge: U32::new(sges.len() as u32),
            reserved: U32::new(0),
        }
        .as_bytes()
        .to_vec();
        b.extend(sge_bytes(sges));
        self.post(Dev::rq_q(qpn), &b, false);
    }

    pub fn fill(&self, addr: u64, bytes: &[u8]) {
        self.mem
            .write_slice(bytes, GuestAddress(addr))
            .expect("fill");
    }

    pub fn read(&self, addr: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        self.mem
            .read_slice(&mut b, GuestAddress(addr))
            .expect("read");
        b
    }

    pub fn finish(mut self) {
        drop(self.fe.take());
        if let Some(t) = self.thread.take() {
            let r = t.join().expect("backend thread did not panic");
            assert!(r.is_ok(), "serve failed: {r:?}");
        }
    }
}

/// The GID `Dev::start` gives device `id`: fe80::`id`.
pub fn test_gid(id: u32) -> [u8; 16] {
    let mut gid = [0u8; 16];
    gid[..2].copy_from_slice(&[0xfe, 0x80]);
    gid[12..].copy_from_slice(&id.to_be_bytes());
    gid
}

/// REG_USER_MR: (status, response body).
pub fn reg_user_mr(
    d: &mut Dev,
    pdn: u32,
    access: u32,
    length: u64,
    iova: u64,
    table: u64,
    npages: u32,
) -> (u8, Vec<u8>) {
    let req = VirtioRdmaCmdRegUserMr {
        pdn: U32::new(pdn),
        access_flags: U32::new(access),
        length: U64::new(length),
        iova: U64::new(iova),
        pages: U64::new(table),
        npages: U32::new(npages),
        reserved: U32::new(0),
    };
    d.cmd(VIRTIO_RDMA_CMD_REG_USER_MR, req.as_bytes(), 16)
}

pub fn le32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}

pub fn pair(a: u32, b: u32) -> Vec<u8> {
    [a.to_le_bytes(), b.to_le_bytes()].concat()
}

pub fn sge_bytes(sges: &[(u64, u32, u32)]) -> Vec<u8> {
    let mut b = Vec::new();
    for &(addr, length, lkey) in sges {
        b.extend_from_slice(
            VirtioRdmaSge {
                addr: U64::new(addr),
                length: U32::new(length),
                lkey: U32::new(lkey),
            }
            .as_bytes(),
        );
    }
    b
}

/// An SQ element.
pub fn wqe(
    wr_id: u64,
    opcode: u8,
    flags: u32,
    ex: u32,
    wr: &[u8],
    sges: &[(u64, u32, u32)],
) -> Vec<u8> {
    let mut h = VirtioRdmaSqReq::new_zeroed();
    h.wr_id = U64::new(wr_id);
    h.opcode = opcode;
    h.num_sge = U16::new(sges.len() as u16);
    h.send_flags = U32::new(flags);
    h.ex = U32::new(ex);
    h.wr[..wr.len()].copy_from_slice(wr);
    let mut b = h.as_bytes().to_vec();
    b.extend(sge_bytes(sges));
    b
}

/// ALLOC_MW: (status, window handle, rkey).
pub fn alloc_mw(d: &mut Dev, pdn: u32, mw_type: u8) -> (u8, u32, u32) {
    let req = VirtioRdmaCmdAllocMw {
        pdn: U32::new(pdn),
        mw_type,
        reserved: [0; 3],
    };
    let (st, r) = d.cmd(VIRTIO_RDMA_CMD_ALLOC_MW, req.as_bytes(), 8);
    if st != VIRTIO_RDMA_S_OK {
        return (st, 0, 0);
    }
    (st, le32(&r, 0), le32(&r, 4))
}

/// A signaled BIND_MW element: window `mw_rkey` (to become `new_rkey`)
/// over `[addr, addr + length)` of MR `mr_lkey`.
pub fn bind_wr(
    wr_id: u64,
    mw_rkey: u32,
    new_rkey: u32,
    mr_lkey: u32,
    addr: u64,
    length: u64,
    access: u32,
) -> Vec<u8> {
    let b = VirtioRdmaSqBind {
        addr: U64::new(addr),
        length: U64::new(length),
        mw_rkey: U32::new(mw_rkey),
        new_rkey: U32::new(new_rkey),
        mr_lkey: U32::new(mr_lkey),
        access: U32::new(access),
        reserved: U64::new(0),
    };
    wqe(wr_id, IB_WR_BIND_MW, IB_SEND_SIGNALED, 0, b.as_bytes(), &[])
}

/// Window or MR key `rkey` with its next key byte.
pub fn next_key(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

pub fn rdma(addr: u64, rkey: u32) -> Vec<u8> {
    VirtioRdmaSqRdma {
        remote_addr: U64::new(addr),
        rkey: U32::new(rkey),
        reserved: U32::new(0),
    }
    .as_bytes()
    .to_vec()
}

pub fn atomic_wr(addr: u64, compare_add: u64, swap: u64, rkey: u32) -> Vec<u8> {
    VirtioRdmaSqAtomic {
        remote_addr: U64::new(addr),
        compare_add: U64::new(compare_add),
        swap: U64::new(swap),
        rkey: U32::new(rkey),
        reserved: U32::new(0),
    }
    .as_bytes()
    .to_vec()
}

pub fn ud_wr(qpn: u32, qkey: u32, dgid: [u8; 16]) -> Vec<u8> {
    let mut u = VirtioRdmaSqUd::new_zeroed();
    u.remote_qpn = U32::new(qpn);
    u.remote_qkey = U32::new(qkey);
    u.av.dgid = dgid;
    u.av.port_num = 1;
    u.av.hop_limit = 64;
    u.as_bytes().to_vec()
}

pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

pub const ALL: u32 = IB_ACCESS_LOCAL_WRITE
    | IB_ACCESS_REMOTE_WRITE
    | IB_ACCESS_REMOTE_READ
    | IB_ACCESS_REMOTE_ATOMIC;

/// Two RC QPs on one device, connected to each other, DMA MR with `access`.
pub struct RcPair {
    pub d: Dev,
    pub cq: u32,
    pub a: u32,
    pub b: u32,
    pub key: u32,
}

pub fn rc_pair(access: u32, qp_access: u32, rnr_retry: u8) -> RcPair {
    rc_pair_on(Dev::start(), access, qp_access, rnr_retry)
}

/// [`rc_pair`] on device `d`.
pub fn rc_pair_on(mut d: Dev, access: u32, qp_access: u32, rnr_retry: u8) -> RcPair {
    let (cq, a, b, key) = own_rc_pair(&mut d, access, qp_access, rnr_retry);
    RcPair { d, cq, a, b, key }
}

/// What [`rc_pair_on`] makes, on a device the caller keeps: (CQ, QP a,
/// QP b, key).
pub fn own_rc_pair(
    d: &mut Dev,
    access: u32,
    qp_access: u32,
    rnr_retry: u8,
) -> (u32, u32, u32, u32) {
    own_rc_pair_with_cq(d, 12, access, qp_access, rnr_retry)
}

/// [`own_rc_pair`] with a CQ of `bufs` buffers.
pub fn own_rc_pair_with_cq(
    d: &mut Dev,
    bufs: u16,
    access: u32,
    qp_access: u32,
    rnr_retry: u8,
) -> (u32, u32, u32, u32) {
    let pd = d.create_pd();
    let cq = d.create_cq(bufs);
    let key = d.dma_mr(pd, access);
    let a = d.create_qp(pd, IB_QPT_RC, cq, false);
    let b = d.create_qp(pd, IB_QPT_RC, cq, false);
    let gid = d.gid;
    d.rc_up(a, gid, b, qp_access, rnr_retry);
    d.rc_up(b, gid, a, qp_access, rnr_retry);
    (cq, a, b, key)
}

/// Two devices (two guests), each with a PD, a CQ of 12 buffers and a DMA
/// MR of `ALL` access, and an RC QP on each connected to the other.
pub struct CrossPair {
    pub x: Dev,
    pub y: Dev,
    pub px: u32,
    pub py: u32,
    pub cx: u32,
    pub cy: u32,
    pub kx: u32,
    pub ky: u32,
    pub qx: u32,
    pub qy: u32,
}

/// [`CrossPair`] of `x` and `y`, both QPs with `rnr_retry`.
pub fn cross_rc_pair(mut x: Dev, mut y: Dev, rnr_retry: u8) -> CrossPair {
    let (px, py) = (x.create_pd(), y.create_pd());
    let (cx, cy) = (x.create_cq(12), y.create_cq(12));
    let (kx, ky) = (x.dma_mr(px, ALL), y.dma_mr(py, ALL));
    let qx = x.create_qp(px, IB_QPT_RC, cx, false);
    let qy = y.create_qp(py, IB_QPT_RC, cy, false);
    let (gx, gy) = (x.gid, y.gid);
    x.rc_up(qx, gy, qy, ALL, rnr_retry);
    y.rc_up(qy, gx, qx, ALL, rnr_retry);
    CrossPair {
        x,
        y,
        px,
        py,
        cx,
        cy,
        kx,
        ky,
        qx,
        qy,
    }
}

/// Two UC QPs on one device, connected to each other (the fields of
/// [`RcPair`]).
pub type UcPair = RcPair;

/// Two UC QPs on a new device, DMA MR with `access`, QP access `qp_access`.
pub fn uc_pair(access: u32, qp_access: u32) -> UcPair {
    let mut d = Dev::start();
    let pd = d.create_pd();
    let cq = d.create_cq(12);
    let key = d.dma_mr(pd, access);
    let a = d.create_qp(pd, IB_QPT_UC, cq, false);
    let b = d.create_qp(pd, IB_QPT_UC, cq, false);
    let gid = d.gid;
    d.uc_up(a, gid, b, qp_access);
    d.uc_up(b, gid, a, qp_access);
    RcPair { d, cq, a, b, key }
}

/// RESET (`tests/reset.rs`): its status.
pub fn rdma_reset(d: &mut Dev) -> u8 {
    d.cmd(VIRTIO_RDMA_CMD_RESET, &[], 0).0
}

/// QUERY_DEVICE with room for `room` response bytes: (status, body).
pub fn query_device(d: &mut Dev, room: usize) -> (u8, Vec<u8>) {
    d.cmd(VIRTIO_RDMA_CMD_QUERY_DEVICE, &[], room)
}

/// Waits until queue `q` has returned `n` buffers; those (id, len).
pub fn wait_used(d: &mut Dev, q: usize, n: usize) -> Vec<(u32, u32)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = Vec::new();
    while got.len() < n {
        got.extend(d.take_used(q));
        assert!(Instant::now() < deadline, "queue {q}: {got:?}, want {n}");
        thread::sleep(Duration::from_micros(200));
    }
    got
}

// The net personality (`--net`), for `tests/net.rs`: vring 0 receiveq,
// 1 transmitq, 2 the net controlq, the RoCE part from 3.

/// The net personality's receive, transmit and control queues, and its
/// first RoCE queue (the RoCE control queue).
pub const NET_RXQ: usize = 0;
pub const NET_TXQ: usize = 1;
pub const NET_CTRLQ: usize = 2;
pub const NET_ROCE: usize = 3;
/// Bytes of `struct virtio_net_hdr_v1`.
pub const NET_HDR: usize = 12;
/// MODIFY_QP's mask for an RC QP's INIT -> RTR: every attribute IB
/// requires there.
pub const RC_RTR: u32 = IB_QP_STATE
    | IB_QP_AV
    | IB_QP_PATH_MTU
    | IB_QP_DEST_QPN
    | IB_QP_RQ_PSN
    | IB_QP_MAX_DEST_RD_ATOMIC
    | IB_QP_MIN_RNR_TIMER;

/// Guest memory of the net queues' buffers: one `NET_SLOT` per descriptor.
pub const NET_BUFS: u64 = 0x40_0000;
pub const NET_SLOT: u64 = 0x800;
/// Descriptors per chain the net helpers reserve (QSIZE / this chains may
/// be outstanding on one queue).
pub const NET_CHAIN: u16 = 4;

/// The test limits as a net-personality device's (rings: 2 QPs, 2 CQs, one
/// completion-event queue).
pub fn net(l: Limits) -> Limits {
    l.with_rings(Some(
        vhost_user_rdma::limits::Rings::new(2, 2, 1, 0).expect("rings"),
    ))
    .and_then(|l| l.with_net(true))
    .expect("net limits")
}

/// An Ethernet frame of `len` bytes (at least 14): `dst`, `src`, an IPv4
/// ethertype, then a pattern.
pub fn eth_frame(dst: [u8; 6], src: [u8; 6], len: usize) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend(pattern(len.saturating_sub(14), len as u8));
    f.truncate(len);
    f
}

impl Dev {
    /// A net-personality device; the virtio features in `refused` are
    /// not negotiated.
    pub fn start_net(refused: u64) -> Dev {
        Dev::start_without(MEM_SIZE, net, refused)
    }

    /// The device's MAC (its net config's).
    pub fn mac(&self) -> [u8; 6] {
        self.dev.ctrl().limits().mac().0
    }

    /// Guest address of descriptor `desc`'s buffer on net queue `q`.
    pub fn net_buf(q: usize, desc: u16) -> u64 {
        NET_BUFS + (q as u64 * u64::from(QSIZE) + u64::from(desc)) * NET_SLOT
    }

    /// Posts one chain to net queue `q`: a descriptor per part, each
    /// (bytes, device-writable); a writable part's bytes are what the
    /// buffer holds before the device writes. Its head.
    pub fn net_post(&mut self, q: usize, parts: &[(&[u8], bool)]) -> u16 {
        assert!(!parts.is_empty() && parts.len() <= usize::from(NET_CHAIN));
        let head = (self.vqs[q].next_avail % (QSIZE / NET_CHAIN)) * NET_CHAIN;
        for (i, (bytes, writable)) in parts.iter().enumerate() {
            let desc = head + i as u16;
            let buf = Dev::net_buf(q, desc);
            assert!(bytes.len() as u64 <= NET_SLOT);
            self.fill(buf, bytes);
            let mut flags = if *writable { F_WRITE } else { 0 };
            if i + 1 < parts.len() {
                flags |= F_NEXT;
            }
            self.write_desc(q, desc, buf, bytes.len() as u32, flags, desc + 1);
        }
        self.publish(q, head);
        head
    }

    /// Transmits `frame` behind a zeroed virtio-net header.
    pub fn net_send(&mut self, frame: &[u8]) -> u16 {
        let mut b = vec![0u8; NET_HDR];
        b.extend_from_slice(frame);
        self.net_post(NET_TXQ, &[(&b, false)])
    }

    /// Lends the receive queue one buffer of `len` bytes.
    pub fn net_rx_buf(&mut self, len: usize) -> u16 {
        self.net_post(NET_RXQ, &[(&vec![0xee; len], true)])
    }

    /// Waits for queue `q`'s used ring to grow; the new entries.
    pub fn wait_used(&mut self, q: usize) -> Vec<(u32, u32)> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let used = self.take_used(q);
            if !used.is_empty() {
                return used;
            }
            assert!(Instant::now() < deadline, "queue {q}: nothing used");
            thread::sleep(Duration::from_micros(200));
        }
    }

    /// The bytes the device wrote into a (single-descriptor) receive
    /// buffer with head `id`, `len` of them.
    pub fn net_rx_bytes(&self, id: u32, len: u32) -> Vec<u8> {
        self.read(Dev::net_buf(NET_RXQ, id as u16), len as usize)
    }

    /// Waits until the device's counter `c` reaches `n`.
    pub fn wait_count(&self, c: vhost_user_rdma::stats::Counter, n: u64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let stats = self.dev.ctrl().stats();
        while stats.get(c) < n {
            assert!(
                Instant::now() < deadline,
                "{c:?} is {}, want {n}",
                stats.get(c)
            );
            thread::sleep(Duration::from_micros(200));
        }
    }

    /// Waits for an interrupt of queue `q`.
    pub fn wait_interrupt(&self, q: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.interrupts(q) == 0 {
            assert!(Instant::now() < deadline, "queue {q} not interrupted");
            thread::sleep(Duration::from_micros(200));
        }
    }

    /// A net control command as one chain of `parts` (see
    /// [`Dev::net_post`]); (used length, first byte of the last part).
    pub fn net_ctrl_chain(&mut self, parts: &[(&[u8], bool)]) -> (u32, u8) {
        let head = self.net_post(NET_CTRLQ, parts);
        let used = self.wait_used(NET_CTRLQ);
        assert_eq!(used, vec![(u32::from(head), used[0].1)]);
        let last = head + parts.len() as u16 - 1;
        let ack = self.read(Dev::net_buf(NET_CTRLQ, last), 1)[0];
        (used[0].1, ack)
    }

    /// A well-formed net control command: its ack.
    pub fn net_ctrl(&mut self, class: u8, cmd: u8, data: &[u8]) -> u8 {
        let mut req = vec![class, cmd];
        req.extend_from_slice(data);
        let (len, ack) = self.net_ctrl_chain(&[(&req, false), (&[0xee], true)]);
        assert_eq!(len, 1, "the ack byte written");
        ack
    }

    /// A control command on the control queue at vring `q` (the RoCE
    /// part's of a net device): (status, response body), as [`Dev::cmd`].
    pub fn cmd_on(&mut self, q: usize, cmd: u32, body: &[u8], rsp: usize) -> (u8, Vec<u8>) {
        let mut req = [cmd.to_le_bytes(), [0; 4]].concat();
        req.extend_from_slice(body);
        let (rbuf, wbuf) = (self.vqs[q].buf(0), self.vqs[q].buf(2));
        assert!(req.len() as u64 <= 2 * SLOT);
        self.fill(rbuf, &req);
        self.fill(wbuf, &vec![0xee; 8 + rsp]);
        self.write_desc(q, 0, rbuf, req.len() as u32, F_NEXT, 1);
        self.write_desc(q, 1, wbuf, 8 + rsp as u32, F_WRITE, 0);
        self.publish(q, 0);
        let used = self.wait_used(q);
        let out = self.read(wbuf, used[0].1 as usize);
        (out[0], out.get(8..).unwrap_or(&[]).to_vec())
    }
}
