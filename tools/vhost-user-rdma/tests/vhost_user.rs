// SPDX-License-Identifier: GPL-2.0
//! End-to-end tests without QEMU: the backend serves a real vhost-user
//! socket in-process, and rust-vmm's `Frontend` drives it with guest memory
//! in a shared file. The control queue is driven by writing descriptors and
//! rings into that memory by hand, kicking, and reading the used ring.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use vhost::vhost_user::message::{VhostUserConfigFlags, VhostUserProtocolFeatures};
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vhost_user_backend::VhostUserBackend;
use vhost_user_rdma::abi::*;
use vhost_user_rdma::device::{self, DeviceError, RdmaDevice, FEATURES};
use vhost_user_rdma::limits::{Limits, Mac};
use vm_memory::{Bytes, FileOffset, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};
use vmm_sys_util::tempdir::TempDir;
use vmm_sys_util::tempfile::TempFile;

const MEM_SIZE: usize = 0x10_0000;
const QSIZE: u16 = 16;
const DESC: u64 = 0x0;
const AVAIL: u64 = 0x1000;
const USED: u64 = 0x2000;
const DATA: u64 = 0x1_0000;
const F_NEXT: u16 = 1;
const F_WRITE: u16 = 2;
const F_INDIRECT: u16 = 4;
const MAC: Mac = Mac([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);

fn limits() -> Limits {
    Limits::new(16, 32, 1024, MAC).expect("valid limits")
}

/// A backend thread, its device, and a connected frontend.
struct Harness {
    _dir: TempDir,
    socket: PathBuf,
    frontend: Option<Frontend>,
    dev: Arc<RdmaDevice>,
    thread: Option<JoinHandle<Result<(), DeviceError>>>,
}

fn connect(path: &Path) -> Frontend {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match Frontend::connect(path, 256) {
            Ok(f) => return f,
            Err(e) if Instant::now() > deadline => panic!("cannot connect: {e}"),
            Err(_) => thread::sleep(Duration::from_millis(10)),
        }
    }
}

impl Harness {
    fn start() -> Self {
        // Shown with `cargo test -- --nocapture`.
        let _ = env_logger::builder().is_test(true).try_init();
        let dir = TempDir::new_with_prefix("/tmp/vrdma-test").expect("tempdir");
        let socket = dir.as_path().join("vrdma0.sock");
        let (tx, rx) = mpsc::channel();
        let path = socket.clone();
        let thread = thread::spawn(move || {
            device::serve_with(&path, None, limits(), |dev| {
                let _ = tx.send(dev.clone());
            })
        });
        let dev = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("device started");
        let frontend = connect(&socket);
        Harness {
            _dir: dir,
            socket,
            frontend: Some(frontend),
            dev,
            thread: Some(thread),
        }
    }

    fn fe(&mut self) -> &mut Frontend {
        self.frontend.as_mut().expect("connected")
    }

    /// Features and protocol features, as QEMU negotiates them.
    fn handshake(&mut self) -> VhostUserProtocolFeatures {
        let fe = self.fe();
        fe.set_owner().expect("set_owner");
        let features = fe.get_features().expect("get_features");
        fe.set_features(features).expect("set_features");
        let proto = fe.get_protocol_features().expect("get_protocol_features");
        fe.set_protocol_features(proto)
            .expect("set_protocol_features");
        proto
    }

    /// Disconnects and checks a clean shutdown (socket file removed).
    fn finish(mut self) {
        drop(self.frontend.take());
        let thread = self.thread.take().expect("thread");
        let result = thread.join().expect("backend thread did not panic");
        assert!(result.is_ok(), "serve failed: {result:?}");
        assert!(!self.socket.exists(), "socket file removed");
    }
}

/// Guest memory plus a hand-driven split virtqueue (queue 0).
struct Guest {
    mem: GuestMemoryMmap,
    _file: TempFile,
    kick: EventFd,
    call: EventFd,
    next_avail: u16,
    used_seen: u16,
}

impl Guest {
    fn new(fe: &mut Frontend, queue: usize) -> Self {
        let file = TempFile::new_with_prefix("/tmp/vrdma-mem").expect("tempfile");
        file.as_file()
            .set_len(MEM_SIZE as u64)
            .expect("size guest memory");
        let fd = file.as_file().try_clone().expect("dup memory fd");
        let mem = GuestMemoryMmap::<()>::from_ranges_with_files(&[(
            GuestAddress(0),
            MEM_SIZE,
            Some(FileOffset::new(fd, 0)),
        )])
        .expect("map guest memory");
        let host = mem.get_host_address(GuestAddress(0)).expect("host address") as u64;
        let region = VhostUserMemoryRegionInfo::from_guest_region(
            mem.find_region(GuestAddress(0)).expect("region"),
        )
        .expect("region info");
        fe.set_mem_table(&[region]).expect("set_mem_table");
        let kick = EventFd::new(EFD_NONBLOCK).expect("kick");
        let call = EventFd::new(EFD_NONBLOCK).expect("call");
        let guest = Guest {
            mem,
            _file: file,
            kick,
            call,
            next_avail: 0,
            used_seen: 0,
        };
        guest.setup_queue(fe, queue, host);
        guest
    }

    fn setup_queue(&self, fe: &mut Frontend, queue: usize, host: u64) {
        fe.set_vring_num(queue, QSIZE).expect("set_vring_num");
        let cfg = VringConfigData {
            queue_max_size: QSIZE,
            queue_size: QSIZE,
            flags: 0,
            desc_table_addr: host + DESC,
            used_ring_addr: host + USED,
            avail_ring_addr: host + AVAIL,
            log_addr: None,
        };
        fe.set_vring_addr(queue, &cfg).expect("set_vring_addr");
        fe.set_vring_base(queue, 0).expect("set_vring_base");
        fe.set_vring_call(queue, &self.call)
            .expect("set_vring_call");
        fe.set_vring_kick(queue, &self.kick)
            .expect("set_vring_kick");
        fe.set_vring_enable(queue, true).expect("set_vring_enable");
    }

    fn write_desc(&self, table: u64, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
        let base = GuestAddress(table + 16 * u64::from(i));
        let mut d = [0u8; 16];
        d[0..8].copy_from_slice(&addr.to_le_bytes());
        d[8..12].copy_from_slice(&len.to_le_bytes());
        d[12..14].copy_from_slice(&flags.to_le_bytes());
        d[14..16].copy_from_slice(&next.to_le_bytes());
        self.mem.write_slice(&d, base).expect("write descriptor");
    }

    /// Submits one chain: `readable` buffers (contents), then writable
    /// buffers of the given sizes. `bad_addr` replaces the first readable
    /// buffer's address. With `indirect`, the chain sits in an indirect
    /// table. Returns (used length, writable bytes concatenated).
    fn submit_ex(
        &mut self,
        readable: &[&[u8]],
        writable: &[u32],
        bad_addr: Option<u64>,
        indirect: bool,
    ) -> (u32, Vec<u8>) {
        let n = readable.len() + writable.len();
        assert!(n > 0 && n <= usize::from(QSIZE));
        let table = if indirect { DATA + 0x8000 } else { DESC };
        let mut addr = DATA;
        let mut wbufs = Vec::new();
        let mut i: u16 = 0;
        for (k, buf) in readable.iter().enumerate() {
            self.mem.write_slice(buf, GuestAddress(addr)).expect("fill");
            let a = if k == 0 {
                bad_addr.unwrap_or(addr)
            } else {
                addr
            };
            let last = usize::from(i) + 1 == n;
            let flags = if last { 0 } else { F_NEXT };
            self.write_desc(table, i, a, buf.len() as u32, flags, i + 1);
            addr += 0x400;
            i += 1;
        }
        for len in writable {
            self.mem
                .write_slice(&vec![0xeeu8; *len as usize], GuestAddress(addr))
                .expect("poison");
            let last = usize::from(i) + 1 == n;
            let flags = F_WRITE | if last { 0 } else { F_NEXT };
            self.write_desc(table, i, addr, *len, flags, i + 1);
            wbufs.push((addr, *len));
            addr += 0x400;
            i += 1;
        }
        if indirect {
            self.write_desc(DESC, 0, table, 16 * n as u32, F_INDIRECT, 0);
        }
        // avail ring: ring[next % size] = head 0, then idx.
        let slot = AVAIL + 4 + 2 * u64::from(self.next_avail % QSIZE);
        self.mem
            .write_obj(0u16, GuestAddress(slot))
            .expect("avail slot");
        self.next_avail = self.next_avail.wrapping_add(1);
        // used_event (EVENT_IDX): interrupt once the next entry is used.
        let used_event = AVAIL + 4 + 2 * u64::from(QSIZE);
        self.mem
            .write_obj(self.used_seen, GuestAddress(used_event))
            .expect("used_event");
        self.mem
            .write_obj(self.next_avail, GuestAddress(AVAIL + 2))
            .expect("avail idx");
        self.kick.write(1).expect("kick");

        // Wait for the interrupt, then for the used entry.
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.call.read().is_err() {
            assert!(Instant::now() < deadline, "no interrupt from the device");
            thread::sleep(Duration::from_millis(1));
        }
        let used_idx: u16 = self.mem.read_obj(GuestAddress(USED + 2)).expect("used idx");
        assert_eq!(used_idx, self.used_seen.wrapping_add(1), "one chain used");
        let elem = USED + 4 + 8 * u64::from(self.used_seen % QSIZE);
        let id: u32 = self.mem.read_obj(GuestAddress(elem)).expect("used id");
        let len: u32 = self.mem.read_obj(GuestAddress(elem + 4)).expect("used len");
        assert_eq!(id, 0, "used id is the head");
        self.used_seen = used_idx;
        let mut out = Vec::new();
        for (a, l) in wbufs {
            let mut b = vec![0u8; l as usize];
            self.mem
                .read_slice(&mut b, GuestAddress(a))
                .expect("read rsp");
            out.extend_from_slice(&b);
        }
        (len, out)
    }

    fn submit(&mut self, readable: &[&[u8]], writable: &[u32]) -> (u32, Vec<u8>) {
        self.submit_ex(readable, writable, None, false)
    }

    /// A request in one readable buffer, response room in one writable one;
    /// returns (status, body) after checking the used length and that the
    /// unused tail is untouched.
    fn command(&mut self, cmd: u32, body: &[u8], rsp_body: usize) -> (u8, Vec<u8>) {
        let req = [hdr(cmd), body.to_vec()].concat();
        let room = 8 + rsp_body as u32;
        let (len, out) = self.submit(&[&req], &[room]);
        let status = out[0];
        assert_eq!(
            &out[1..8],
            &[0u8; 7],
            "reserved bytes of the response header"
        );
        let expect_len = if status == VIRTIO_RDMA_S_OK { room } else { 8 };
        assert_eq!(len, expect_len, "used length for cmd {cmd} status {status}");
        assert!(
            out[len as usize..].iter().all(|b| *b == 0xee),
            "bytes past the used length are untouched"
        );
        (status, out[8..len as usize].to_vec())
    }
}

fn hdr(cmd: u32) -> Vec<u8> {
    [cmd.to_le_bytes(), [0; 4]].concat()
}

fn add_gid_req(gid: [u8; 16], gid_type: u32, index: u16, port: u32) -> Vec<u8> {
    let mut b = gid.to_vec();
    b.extend_from_slice(&gid_type.to_le_bytes());
    b.extend_from_slice(&index.to_le_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(&port.to_le_bytes());
    b.extend_from_slice(&[0; 4]);
    b
}

fn del_gid_req(index: u16, port: u32) -> Vec<u8> {
    [&index.to_le_bytes()[..], &[0, 0], &port.to_le_bytes()].concat()
}

fn u32le(v: u32) -> Vec<u8> {
    [v.to_le_bytes(), [0; 4]].concat()
}

#[test]
fn handshake_features_and_queue_count() {
    let mut h = Harness::start();
    let fe = h.fe();
    fe.set_owner().expect("set_owner");
    let features = fe.get_features().expect("get_features");
    assert_eq!(features, FEATURES);
    assert_eq!(features, (1 << 32) | (1 << 29) | (1 << 28) | (1 << 30));
    fe.set_features(features).expect("set_features");
    let proto = fe.get_protocol_features().expect("get_protocol_features");
    for f in [
        VhostUserProtocolFeatures::MQ,
        VhostUserProtocolFeatures::CONFIG,
        VhostUserProtocolFeatures::REPLY_ACK,
    ] {
        assert!(proto.contains(f), "protocol feature {f:?} offered");
    }
    fe.set_protocol_features(proto)
        .expect("set_protocol_features");
    assert_eq!(fe.get_queue_num().expect("get_queue_num"), 66);
    h.finish();
}

/// QEMU's front end asks the queue count before it creates its queues:
/// the feature handshake and GET_QUEUE_NUM without SET_OWNER, then the
/// whole handshake again on the same connection.
#[test]
fn queue_count_probe_before_owner() {
    let mut h = Harness::start();
    let fe = h.fe();
    fe.get_features().expect("get_features");
    let proto = fe.get_protocol_features().expect("get_protocol_features");
    fe.set_protocol_features(proto)
        .expect("set_protocol_features");
    assert_eq!(fe.get_queue_num().expect("get_queue_num"), 66);
    let proto = h.handshake();
    assert!(proto.contains(VhostUserProtocolFeatures::MQ));
    assert_eq!(fe_queue_num(&mut h), 66);
    h.finish();
}

#[test]
fn config_space_values() {
    let mut h = Harness::start();
    h.handshake();
    let fe = h.fe();
    let (_, cfg) = fe
        .get_config(0, 256, VhostUserConfigFlags::empty(), &[0u8; 256])
        .expect("get_config");
    assert_eq!(cfg.len(), 256);
    let le32 = |off: usize| u32::from_le_bytes(cfg[off..off + 4].try_into().expect("4 bytes"));
    let le64 = |off: usize| u64::from_le_bytes(cfg[off..off + 8].try_into().expect("8 bytes"));
    // Offsets as in include/uapi/linux/virtio_rdma.h.
    assert_eq!(le32(0), 1, "phys_port_cnt");
    assert_eq!(le32(4), 0x1af4, "vendor_id");
    assert_eq!(
        &cfg[8..16],
        &[0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56],
        "guid"
    );
    assert_eq!(le32(16), 42, "vendor_part_id");
    assert_eq!(le32(20), 1, "hw_ver");
    assert_eq!(le64(24), 1 << 32, "max_mr_size");
    assert_eq!(le64(32), 0x1000, "page_size_cap");
    let caps = le64(40);
    assert_ne!(caps & (1 << 21), 0, "IB_DEVICE_MEM_MGT_EXTENSIONS");
    assert_ne!(caps & (1 << 12), 0, "IB_DEVICE_RC_RNR_NAK_GEN");
    assert_eq!(le32(48), 16, "max_qp");
    assert_eq!(le32(52), 1024, "max_qp_wr");
    assert_eq!(le32(56), 32, "max_send_sge");
    assert_eq!(le32(60), 32, "max_recv_sge");
    assert_eq!(le32(64), 32, "max_sge_rd");
    assert_eq!(le32(68), 32, "max_cq");
    assert_eq!(le32(72), 1024, "max_cqe");
    assert_eq!(le32(76), 65536, "max_mr");
    assert_eq!(le32(80), 65536, "max_pd");
    assert_eq!(le32(84), 128, "max_qp_rd_atom");
    assert_eq!(le32(92), 128, "max_qp_init_rd_atom");
    assert_eq!(le32(116), 512, "max_fast_reg_page_list_len");
    assert_eq!(le32(124), 64, "max_inline_data");
    assert_eq!(&cfg[128..130], &[1, 0], "max_pkeys");
    assert_eq!(cfg[131], VIRTIO_RDMA_ATOMIC_HCA, "atomic_cap");
    assert_eq!(&cfg[132..138], &MAC.0, "mac");
    assert!(
        cfg[138..].iter().all(|b| *b == 0),
        "reserved and tail are zero"
    );

    // A window inside the space.
    let (_, part) = fe
        .get_config(132, 6, VhostUserConfigFlags::empty(), &[0u8; 6])
        .expect("get_config window");
    assert_eq!(part, MAC.0);
    // Out of range: the backend answers with an empty payload, which
    // vhost-user defines as an error. (rust-vmm's Frontend then waits for a
    // payload that never comes, so this is checked on the device directly;
    // QEMU reads the size from the reply header.)
    for (offset, size) in [
        (250, 8),
        (256, 1),
        (0, 257),
        (0, 0),
        (u32::MAX, 2),
        (1, u32::MAX),
    ] {
        assert!(
            VhostUserBackend::get_config(&*h.dev, offset, size).is_empty(),
            "config read of {size} at {offset} refused"
        );
    }
    assert_eq!(VhostUserBackend::get_config(&*h.dev, 255, 1), vec![0]);
    let fe = h.fe();
    // Writes are ignored: config stays the same.
    fe.set_config(48, VhostUserConfigFlags::empty(), &[9, 9, 9, 9])
        .expect("set_config is acknowledged");
    let (_, again) = fe
        .get_config(0, 256, VhostUserConfigFlags::empty(), &[0u8; 256])
        .expect("get_config after write");
    assert_eq!(again, cfg);
    h.finish();
}

#[test]
fn control_queue_commands() {
    let mut h = Harness::start();
    h.handshake();
    let mut g = Guest::new(h.fe(), 0);

    // CREATE_PD twice, byte for byte.
    let req = hdr(VIRTIO_RDMA_CMD_CREATE_PD);
    let (len, out) = g.submit(&[&req], &[16]);
    assert_eq!(len, 16);
    assert_eq!(out, [0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
    let (st, body) = g.command(VIRTIO_RDMA_CMD_CREATE_PD, &[], 8);
    assert_eq!((st, body), (VIRTIO_RDMA_S_OK, u32le(2)));
    assert_eq!(h.dev.ctrl().pd_count(), 2);

    // DESTROY_PD 1, then again.
    let (st, body) = g.command(VIRTIO_RDMA_CMD_DESTROY_PD, &u32le(1), 0);
    assert_eq!((st, body.len()), (VIRTIO_RDMA_S_OK, 0));
    let (st, _) = g.command(VIRTIO_RDMA_CMD_DESTROY_PD, &u32le(1), 0);
    assert_eq!(st, VIRTIO_RDMA_S_NOT_FOUND);
    assert_eq!(h.dev.ctrl().pd_count(), 1);

    // QUERY_PORT, request split over two readable descriptors and the
    // response over three writable ones (5 + 20 + 23 bytes).
    let port_req = [1u8, 0, 0, 0, 0, 0, 0, 0];
    let (len, out) = g.submit(&[&hdr(VIRTIO_RDMA_CMD_QUERY_PORT), &port_req], &[5, 20, 23]);
    assert_eq!(len, 48);
    #[rustfmt::skip]
    let expect: [u8; 48] = [
        0, 0, 0, 0, 0, 0, 0, 0,         // status OK
        4, 3, 3, 5,                     // ACTIVE, MTU_1024 x2, LINK_UP
        0x00, 0x04, 0, 0,               // phys_mtu 1024
        16, 0, 0, 0,                    // gid_tbl_len
        0, 0, 1, 0,                     // port_cap_flags IB_PORT_CM_SUP
        0, 0, 0, 0x80,                  // max_msg_sz 1 << 31
        0, 0, 0, 0, 0, 0, 0, 0,         // bad_pkey_cntr, qkey_viol_cntr
        1, 0, 1, 0,                     // pkey_tbl_len, 1X, reserved0
        1, 0, 0, 0, 0, 0, 0, 0,         // SDR, reserved
    ];
    assert_eq!(out, expect);

    // Same request through an indirect descriptor table.
    let req = [hdr(VIRTIO_RDMA_CMD_QUERY_PORT), port_req.to_vec()].concat();
    let (len, out) = g.submit_ex(&[&req], &[48], None, true);
    assert_eq!((len, out.as_slice()), (48, &expect[..]));

    // QUERY_PKEY.
    let (st, body) = g.command(VIRTIO_RDMA_CMD_QUERY_PKEY, &[1, 0, 0, 0, 0, 0, 0, 0], 8);
    assert_eq!(
        (st, body),
        (VIRTIO_RDMA_S_OK, vec![0xff, 0xff, 0, 0, 0, 0, 0, 0])
    );

    // ADD_GID / DEL_GID.
    let gid = [
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0x12, 0x34, 0x56,
    ];
    let (st, _) = g.command(VIRTIO_RDMA_CMD_ADD_GID, &add_gid_req(gid, 2, 3, 1), 0);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    let entry = h.dev.ctrl().gid(3).expect("GID stored at index 3");
    assert_eq!((entry.gid, entry.gid_type), (gid, 2));
    let (st, _) = g.command(VIRTIO_RDMA_CMD_DEL_GID, &del_gid_req(3, 1), 0);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    assert_eq!(h.dev.ctrl().gid(3), None);
    let (st, _) = g.command(VIRTIO_RDMA_CMD_DEL_GID, &del_gid_req(3, 1), 0);
    assert_eq!(st, VIRTIO_RDMA_S_NOT_FOUND);
    h.finish();
}

#[test]
fn control_queue_malformed_requests() {
    let mut h = Harness::start();
    h.handshake();
    let mut g = Guest::new(h.fe(), 0);
    let gid = [1u8; 16];
    // (name, request bytes, response room, expected status)
    let table: Vec<(&str, Vec<u8>, u32, u8)> = vec![
        ("short header", vec![4, 0, 0, 0], 8, VIRTIO_RDMA_S_INVALID),
        ("unknown command", hdr(99), 8, VIRTIO_RDMA_S_UNSUPPORTED),
        ("command 0", hdr(0), 8, VIRTIO_RDMA_S_UNSUPPORTED),
        (
            "CREATE_QP without a body",
            hdr(VIRTIO_RDMA_CMD_CREATE_QP),
            64,
            VIRTIO_RDMA_S_INVALID,
        ),
        (
            "QUERY_PORT no body",
            hdr(VIRTIO_RDMA_CMD_QUERY_PORT),
            48,
            VIRTIO_RDMA_S_INVALID,
        ),
        (
            "QUERY_PORT port 2",
            [
                hdr(VIRTIO_RDMA_CMD_QUERY_PORT),
                vec![2, 0, 0, 0, 0, 0, 0, 0],
            ]
            .concat(),
            48,
            VIRTIO_RDMA_S_INVALID,
        ),
        (
            "QUERY_PORT no room for body",
            [
                hdr(VIRTIO_RDMA_CMD_QUERY_PORT),
                vec![1, 0, 0, 0, 0, 0, 0, 0],
            ]
            .concat(),
            47,
            VIRTIO_RDMA_S_INVALID,
        ),
        (
            "CREATE_PD no room",
            hdr(VIRTIO_RDMA_CMD_CREATE_PD),
            12,
            VIRTIO_RDMA_S_INVALID,
        ),
        (
            "DESTROY_PD missing",
            [hdr(VIRTIO_RDMA_CMD_DESTROY_PD), u32le(12345)].concat(),
            8,
            VIRTIO_RDMA_S_NOT_FOUND,
        ),
        (
            "DESTROY_PD pdn 0",
            [hdr(VIRTIO_RDMA_CMD_DESTROY_PD), u32le(0)].concat(),
            8,
            VIRTIO_RDMA_S_NOT_FOUND,
        ),
        (
            "DESTROY_PD short body",
            [hdr(VIRTIO_RDMA_CMD_DESTROY_PD), vec![1, 0]].concat(),
            8,
            VIRTIO_RDMA_S_INVALID,
        ),
        (
            "ADD_GID index 16",
            [hdr(VIRTIO_RDMA_CMD_ADD_GID), add_gid_req(gid, 1, 16, 1)].concat(),
            8,
            VIRTIO_RDMA_S_INVALID,
        ),
        (
            "ADD_GID index 0xffff",
            [hdr(VIRTIO_RDMA_CMD_ADD_GID), add_gid_req(gid, 1, 0xffff, 1)].concat(),
            8,
            VIRTIO_RDMA_S_INVALID,
        ),
        (
            "ADD_GID port 0",
            [hdr(VIRTIO_RDMA_CMD_ADD_GID), add_gid_req(gid, 1, 0, 0)].concat(),
            8,
            VIRTIO_RDMA_S_INVALID,
        ),
        (
            "ADD_GID bad type",
            [hdr(VIRTIO_RDMA_CMD_ADD_GID), add_gid_req(gid, 7, 0, 1)].concat(),
            8,
            VIRTIO_RDMA_S_INVALID,
        ),
        (
            "ADD_GID short body",
            [hdr(VIRTIO_RDMA_CMD_ADD_GID), gid.to_vec()].concat(),
            8,
            VIRTIO_RDMA_S_INVALID,
        ),
        (
            "DEL_GID index 16",
            [hdr(VIRTIO_RDMA_CMD_DEL_GID), del_gid_req(16, 1)].concat(),
            8,
            VIRTIO_RDMA_S_INVALID,
        ),
        (
            "DEL_GID empty slot",
            [hdr(VIRTIO_RDMA_CMD_DEL_GID), del_gid_req(5, 1)].concat(),
            8,
            VIRTIO_RDMA_S_NOT_FOUND,
        ),
        (
            "QUERY_PKEY index 1",
            [
                hdr(VIRTIO_RDMA_CMD_QUERY_PKEY),
                vec![1, 0, 0, 0, 1, 0, 0, 0],
            ]
            .concat(),
            16,
            VIRTIO_RDMA_S_INVALID,
        ),
    ];
    for (name, req, room, status) in &table {
        let (len, out) = g.submit(&[req], &[*room]);
        assert_eq!(len, 8, "{name}: used length");
        assert_eq!(&out[..8], &[*status, 0, 0, 0, 0, 0, 0, 0], "{name}: status");
        assert!(
            out[8..].iter().all(|b| *b == 0xee),
            "{name}: body untouched"
        );
    }
    assert_eq!(
        h.dev.ctrl().pd_count(),
        0,
        "no PD leaked by a failed CREATE_PD"
    );
    for i in 0..16 {
        assert_eq!(h.dev.ctrl().gid(i), None, "GID table untouched");
    }

    // No writable descriptor at all: nothing written, chain still used.
    let (len, out) = g.submit(&[&hdr(VIRTIO_RDMA_CMD_CREATE_PD)], &[]);
    assert_eq!((len, out.len()), (0, 0));
    // Writable part too small for a status.
    let (len, out) = g.submit(&[&hdr(VIRTIO_RDMA_CMD_CREATE_PD)], &[4]);
    assert_eq!((len, out), (0, vec![0xee; 4]));
    // No readable part.
    let (len, out) = g.submit(&[], &[8]);
    assert_eq!(
        (len, out),
        (8, vec![VIRTIO_RDMA_S_INVALID, 0, 0, 0, 0, 0, 0, 0])
    );
    // Readable buffer outside guest memory.
    let (len, out) = g.submit_ex(
        &[&hdr(VIRTIO_RDMA_CMD_CREATE_PD)],
        &[16],
        Some(1 << 40),
        false,
    );
    assert_eq!(len, 8);
    assert_eq!(out[0], VIRTIO_RDMA_S_INVALID);
    assert_eq!(h.dev.ctrl().pd_count(), 0);

    // The device still works.
    let (st, body) = g.command(VIRTIO_RDMA_CMD_CREATE_PD, &[], 8);
    assert_eq!((st, body), (VIRTIO_RDMA_S_OK, u32le(1)));
    h.finish();
}

#[test]
fn high_vring_indices_are_served() {
    // Vrings 64 and up (here the event queue, index 65, the last) must not upset the
    // library or the event loop; the control queue keeps working.
    let mut h = Harness::start();
    h.handshake();
    let mut g = Guest::new(h.fe(), 0);
    let kick = EventFd::new(EFD_NONBLOCK).expect("kick");
    let call = EventFd::new(EFD_NONBLOCK).expect("call");
    let fe = h.fe();
    fe.set_vring_num(65, QSIZE).expect("set_vring_num 65");
    let host = g.mem.get_host_address(GuestAddress(0)).expect("host") as u64;
    let cfg = VringConfigData {
        queue_max_size: QSIZE,
        queue_size: QSIZE,
        flags: 0,
        desc_table_addr: host + 0x4000,
        used_ring_addr: host + 0x6000,
        avail_ring_addr: host + 0x5000,
        log_addr: None,
    };
    fe.set_vring_addr(65, &cfg).expect("set_vring_addr 65");
    fe.set_vring_call(65, &call).expect("set_vring_call 65");
    fe.set_vring_kick(65, &kick).expect("set_vring_kick 65");
    fe.set_vring_enable(65, true).expect("set_vring_enable 65");
    kick.write(1).expect("kick 65");
    let (st, body) = g.command(VIRTIO_RDMA_CMD_CREATE_PD, &[], 8);
    assert_eq!((st, body), (VIRTIO_RDMA_S_OK, u32le(1)));
    assert!(fe_queue_num(&mut h) == 66);
    h.finish();
}

fn fe_queue_num(h: &mut Harness) -> u64 {
    h.fe().get_queue_num().expect("get_queue_num")
}

#[test]
fn device_reset_forgets_objects() {
    let mut h = Harness::start();
    h.handshake();
    let mut g = Guest::new(h.fe(), 0);
    let (st, _) = g.command(VIRTIO_RDMA_CMD_CREATE_PD, &[], 8);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    assert_eq!(h.dev.ctrl().pd_count(), 1);
    h.fe().reset_device().expect("reset_device");
    // RESET_DEVICE is not acknowledged: wait for the backend to act on it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while h.dev.ctrl().pd_count() != 0 {
        assert!(Instant::now() < deadline, "device reset forgot the PD");
        thread::sleep(Duration::from_millis(1));
    }
    h.finish();
}
