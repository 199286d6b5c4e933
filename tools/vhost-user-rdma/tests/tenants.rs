// SPDX-License-Identifier: GPL-2.0
//! Tenants: several devices of one backend process, each the device of a
//! guest that must not reach another. A QP answers only its connected peer
//! at the expected PSN; a GID belongs to one device (and to the addresses
//! the operator pinned); keys vary; MRs and page tables are bounded per
//! device; a reset destroys every object of the device. Each refusal is
//! counted on the refusing device.

mod support;

use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use vhost_user_rdma::abi::*;
use vhost_user_rdma::fabric;
use vhost_user_rdma::ib::*;
use vhost_user_rdma::limits::Pinned;
use vhost_user_rdma::stats::Counter;

use support::*;

/// Guest memory the victim exposes (through its DMA MR).
const TARGET: u64 = DATA + 0x8_0000;
/// Where the victim's receive would land.
const INBOX: u64 = DATA + 0x9_0000;

/// Three guests: `x` (the victim's real peer, QP `p`), `y` (the victim,
/// QP `v`, remote-access key `vkey`) and `z` (the attacker).
struct Scene {
    x: Dev,
    y: Dev,
    z: Dev,
    cx: u32,
    cy: u32,
    cz: u32,
    px: u32,
    pz: u32,
    kx: u32,
    kz: u32,
    vkey: u32,
    p: u32,
    v: u32,
}

fn scene(qp_type: u8) -> Scene {
    let (mut x, mut y, mut z) = (Dev::start(), Dev::start(), Dev::start());
    let (px, py, pz) = (x.create_pd(), y.create_pd(), z.create_pd());
    let (cx, cy, cz) = (x.create_cq(12), y.create_cq(12), z.create_cq(12));
    let (kx, vkey, kz) = (x.dma_mr(px, ALL), y.dma_mr(py, ALL), z.dma_mr(pz, ALL));
    let p = x.create_qp(px, qp_type, cx, false);
    let v = y.create_qp(py, qp_type, cy, false);
    let (gx, gy) = (x.gid, y.gid);
    if qp_type == IB_QPT_RC {
        x.rc_up(p, gy, v, ALL, 0);
        y.rc_up(v, gx, p, ALL, 0);
    } else {
        x.uc_up(p, gy, v, ALL);
        y.uc_up(v, gx, p, ALL);
    }
    Scene {
        x,
        y,
        z,
        cx,
        cy,
        cz,
        px,
        pz,
        kx,
        kz,
        vkey,
        p,
        v,
    }
}

/// One attack: opcode, opcode part, `ex`, local length.
type Attack = (u8, Vec<u8>, u32, u32);

fn attacks(vkey: u32) -> Vec<(&'static str, Attack)> {
    let mrn = vkey >> 8;
    let mut all = vec![
        ("WRITE", (IB_WR_RDMA_WRITE, rdma(TARGET, vkey), 0, 64)),
        ("READ", (IB_WR_RDMA_READ, rdma(TARGET, vkey), 0, 64)),
        (
            "FETCH_ADD",
            (
                IB_WR_ATOMIC_FETCH_AND_ADD,
                atomic_wr(TARGET, 1, 0, vkey),
                0,
                8,
            ),
        ),
        (
            "CMP_SWAP",
            (
                IB_WR_ATOMIC_CMP_AND_SWP,
                atomic_wr(TARGET, 0x1111_1111_1111_1111, 7, vkey),
                0,
                8,
            ),
        ),
        ("SEND", (IB_WR_SEND, Vec::new(), 0, 64)),
        ("SEND_WITH_INV", (IB_WR_SEND_WITH_INV, Vec::new(), vkey, 64)),
        (
            "WRITE_WITH_IMM",
            (IB_WR_RDMA_WRITE_WITH_IMM, rdma(TARGET, vkey), 9, 64),
        ),
    ];
    // Guessed neighbours of the key: other key bytes, other MR numbers.
    for guess in [vkey ^ 1, vkey ^ 0x80, ((mrn + 1) << 8) | (vkey & 0xff)] {
        all.push((
            "WRITE, guessed key",
            (IB_WR_RDMA_WRITE, rdma(TARGET, guess), 0, 64),
        ));
    }
    all
}

/// An attacker on `z` (and one on `x`, the victim's real peer's own
/// device) that knows the victim's QPN, GID and key connects a QP of its
/// own to the victim and tries every operation: nothing reaches the
/// victim, whose QP stays in RTS and whose real peer still works.
#[test]
fn a_qp_answers_only_its_connected_peer() {
    let mut s = scene(IB_QPT_RC);
    s.y.fill(TARGET, &[0x11; 64]);
    s.y.recv(s.v, 500, &[(INBOX, 64, s.vkey)]);
    s.z.fill(DATA, &pattern(64, 3));
    s.x.fill(DATA, &pattern(64, 5));
    let gy = s.y.gid;
    let mut tried = 0;
    for (name, (op, wr, ex, len)) in attacks(s.vkey) {
        // From z: its first QP even has the number of the real peer `p`.
        let a = s.z.create_qp(s.pz, IB_QPT_RC, s.cz, false);
        s.z.rc_up(a, gy, s.v, ALL, 0);
        s.z.send(
            a,
            &wqe(1, op, IB_SEND_SIGNALED, ex, &wr, &[(DATA, len, s.kz)]),
        );
        let wc = s.z.wait(s.cz, 1)[0];
        assert_eq!(wc.status(), IB_WC_RETRY_EXC_ERR, "{name} from z");
        s.z.quiet(s.cz);
        s.z.ok(VIRTIO_RDMA_CMD_DESTROY_QP, &pair(a, 0), 0);
        // From x, beside the real peer.
        let b = s.x.create_qp(s.px, IB_QPT_RC, s.cx, false);
        s.x.rc_up(b, gy, s.v, ALL, 0);
        s.x.send(
            b,
            &wqe(2, op, IB_SEND_SIGNALED, ex, &wr, &[(DATA, len, s.kx)]),
        );
        assert_eq!(
            s.x.wait(s.cx, 1)[0].status(),
            IB_WC_RETRY_EXC_ERR,
            "{name} from x"
        );
        s.x.quiet(s.cx);
        s.x.ok(VIRTIO_RDMA_CMD_DESTROY_QP, &pair(b, 0), 0);
        tried += 2;
        assert_eq!(s.y.read(TARGET, 64), [0x11; 64], "{name}: victim memory");
        assert_eq!(s.y.qp_state(s.v), IB_QPS_RTS, "{name}: victim QP");
        s.y.quiet(s.cy);
    }
    let stats = s.y.dev.ctrl().stats();
    // Each attempt went once and again at each of its 7 timeouts.
    assert_eq!(
        stats.get(Counter::NotPeer),
        tried * 8,
        "each drop counted by the victim"
    );
    assert_eq!(s.z.dev.ctrl().stats().get(Counter::NotPeer), 0);
    // The real peer still gets through: its SEND takes the receive the
    // attackers could not, then it writes.
    s.x.send(
        s.p,
        &wqe(3, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 64, s.kx)]),
    );
    assert_eq!(s.x.wait(s.cx, 1)[0].status(), IB_WC_SUCCESS);
    let r = s.y.wait(s.cy, 1)[0];
    assert_eq!(
        (r.wr_id(), r.status(), r.byte_len()),
        (500, IB_WC_SUCCESS, 64)
    );
    assert_eq!(s.y.read(INBOX, 64), pattern(64, 5));
    s.x.send(
        s.p,
        &wqe(
            4,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &rdma(TARGET, s.vkey),
            &[(DATA, 64, s.kx)],
        ),
    );
    assert_eq!(s.x.wait(s.cx, 1)[0].status(), IB_WC_SUCCESS);
    assert_eq!(s.y.read(TARGET, 64), pattern(64, 5));
    s.x.finish();
    s.y.finish();
    s.z.finish();
}

/// UC: an attacker's messages are lost (its work requests succeed, as on
/// UC they must) and counted; the victim and its peer are untouched.
#[test]
fn uc_answers_only_its_connected_peer() {
    let mut s = scene(IB_QPT_UC);
    s.y.fill(TARGET, &[0x22; 64]);
    s.y.recv(s.v, 600, &[(INBOX, 64, s.vkey)]);
    let a = s.z.create_qp(s.pz, IB_QPT_UC, s.cz, false);
    let gy = s.y.gid;
    s.z.uc_up(a, gy, s.v, ALL);
    for op in [IB_WR_RDMA_WRITE, IB_WR_SEND, IB_WR_RDMA_WRITE_WITH_IMM] {
        let wr = if op == IB_WR_SEND {
            Vec::new()
        } else {
            rdma(TARGET, s.vkey)
        };
        s.z.send(
            a,
            &wqe(1, op, IB_SEND_SIGNALED, 0, &wr, &[(DATA, 64, s.kz)]),
        );
        assert_eq!(s.z.wait(s.cz, 1)[0].status(), IB_WC_SUCCESS, "UC: op {op}");
    }
    assert_eq!(s.y.read(TARGET, 64), [0x22; 64]);
    assert_eq!(s.y.dev.ctrl().stats().get(Counter::NotPeer), 3);
    s.y.quiet(s.cy);
    s.x.send(
        s.p,
        &wqe(2, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 64, s.kx)]),
    );
    assert_eq!(s.x.wait(s.cx, 1)[0].status(), IB_WC_SUCCESS);
    assert_eq!(s.y.wait(s.cy, 1)[0].wr_id(), 600);
    s.x.finish();
    s.y.finish();
    s.z.finish();
}

/// PSNs: a request is taken only at the responder's expected PSN, and
/// both ends move by the packets each request takes.
#[test]
fn psns_must_match_and_advance() {
    let mut x = Dev::start();
    let mut y = Dev::start();
    let (px, py) = (x.create_pd(), y.create_pd());
    let (cx, cy) = (x.create_cq(12), y.create_cq(12));
    let (kx, ky) = (x.dma_mr(px, ALL), y.dma_mr(py, ALL));
    let (gx, gy) = (x.gid, y.gid);
    let p = x.create_qp(px, IB_QPT_RC, cx, false);
    let v = y.create_qp(py, IB_QPT_RC, cy, false);
    x.rc_up_psn(p, gy, v, ALL, 0, (100, 7));
    y.rc_up_psn(v, gx, p, ALL, 0, (7, 100));
    x.fill(DATA, &pattern(4096, 1));
    y.recv(v, 1, &[(INBOX, 4096, ky)]);
    // 3000 bytes: three 1024-byte packets.
    x.send(
        p,
        &wqe(1, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 3000, kx)]),
    );
    assert_eq!(x.wait(cx, 1)[0].status(), IB_WC_SUCCESS);
    assert_eq!(y.wait(cy, 1)[0].byte_len(), 3000);
    let steps: [(u8, Vec<u8>, u32, u32); 3] = [
        (IB_WR_RDMA_WRITE, rdma(TARGET, ky), 1, 104),
        (IB_WR_RDMA_READ, rdma(TARGET, ky), 4096, 108),
        (
            IB_WR_ATOMIC_FETCH_AND_ADD,
            atomic_wr(TARGET, 1, 0, ky),
            8,
            109,
        ),
    ];
    assert_eq!(x.query(p).sq_psn.get(), 103);
    assert_eq!(y.query(v).rq_psn.get(), 103);
    for (op, wr, len, psn) in steps {
        x.send(p, &wqe(2, op, IB_SEND_SIGNALED, 0, &wr, &[(DATA, len, kx)]));
        assert_eq!(x.wait(cx, 1)[0].status(), IB_WC_SUCCESS, "op {op}");
        assert_eq!(
            (x.query(p).sq_psn.get(), y.query(v).rq_psn.get()),
            (psn, psn),
            "op {op}"
        );
    }
    // One ahead of what the responder expects: dropped and counted at
    // every try, the responder untouched.
    let p2 = x.create_qp(px, IB_QPT_RC, cx, false);
    let v2 = y.create_qp(py, IB_QPT_RC, cy, false);
    x.rc_up_psn(p2, gy, v2, ALL, 0, (7, 0));
    y.rc_up_psn(v2, gx, p2, ALL, 0, (0, 6));
    y.recv(v2, 2, &[(INBOX, 64, ky)]);
    x.send(
        p2,
        &wqe(3, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 64, kx)]),
    );
    assert_eq!(x.wait(cx, 1)[0].status(), IB_WC_RETRY_EXC_ERR);
    assert_eq!(y.dev.ctrl().stats().get(Counter::BadPsn), 8);
    assert_eq!(y.qp_state(v2), IB_QPS_RTS);
    y.quiet(cy);
    // One behind: a duplicate of a request it took, answered again and
    // not executed again: the SEND succeeds and takes no receive.
    let p3 = x.create_qp(px, IB_QPT_RC, cx, false);
    let v3 = y.create_qp(py, IB_QPT_RC, cy, false);
    x.rc_up_psn(p3, gy, v3, ALL, 0, (5, 0));
    y.rc_up_psn(v3, gx, p3, ALL, 0, (0, 6));
    y.recv(v3, 4, &[(INBOX, 64, ky)]);
    y.fill(INBOX, &[0; 64]);
    x.fill(DATA, &[0x5a; 64]);
    x.send(
        p3,
        &wqe(5, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 64, kx)]),
    );
    assert_eq!(x.wait(cx, 1)[0].status(), IB_WC_SUCCESS);
    assert_eq!(y.read(INBOX, 64), [0; 64], "a duplicate reached memory");
    assert_eq!(y.query(v3).rq_psn.get(), 6, "the expected PSN moved");
    assert_eq!(
        x.query(p3).sq_psn.get(),
        6,
        "the answer moved the requester on"
    );
    y.quiet(cy);
    x.finish();
    y.finish();
}

/// UD: a datagram with the wrong Q_Key is dropped and counted; one with
/// the right Q_Key carries the sender's own GID, which it cannot forge.
#[test]
fn ud_checks_the_qkey_and_reports_the_true_source() {
    let mut y = Dev::start();
    let mut z = Dev::start();
    let (py, pz) = (y.create_pd(), z.create_pd());
    let (cy, cz) = (y.create_cq(12), z.create_cq(12));
    let (ky, kz) = (y.dma_mr(py, ALL), z.dma_mr(pz, ALL));
    let v = y.create_qp(py, IB_QPT_UD, cy, false);
    let a = z.create_qp(pz, IB_QPT_UD, cz, false);
    y.ud_up(v, 0x1234, false);
    z.ud_up(a, 0x9999, false);
    y.recv(v, 1, &[(INBOX, 40 + 64, ky)]);
    let gy = y.gid;
    z.send(
        a,
        &wqe(
            1,
            IB_WR_SEND,
            IB_SEND_SIGNALED,
            0,
            &ud_wr(v, 0x4321, gy),
            &[(DATA, 64, kz)],
        ),
    );
    assert_eq!(
        z.wait(cz, 1)[0].status(),
        IB_WC_SUCCESS,
        "UD: lost, not failed"
    );
    y.quiet(cy);
    assert_eq!(y.dev.ctrl().stats().get(Counter::BadQkey), 1);
    z.send(
        a,
        &wqe(
            2,
            IB_WR_SEND,
            IB_SEND_SIGNALED,
            0,
            &ud_wr(v, 0x1234, gy),
            &[(DATA, 64, kz)],
        ),
    );
    assert_eq!(z.wait(cz, 1)[0].status(), IB_WC_SUCCESS);
    let r = y.wait(cy, 1)[0];
    assert_eq!(
        (r.wr_id(), r.status(), r.0.src_qp.get()),
        (1, IB_WC_SUCCESS, a)
    );
    // The GRH's source GID (IPv6 header bytes 8..24) is z's.
    assert_eq!(y.read(INBOX + 8, 16), z.gid);
    y.finish();
    z.finish();
}

fn add_gid(d: &mut Dev, index: u16, gid: [u8; 16]) -> u8 {
    let mut req = gid.to_vec();
    req.extend_from_slice(&2u32.to_le_bytes());
    req.extend_from_slice(&index.to_le_bytes());
    req.extend_from_slice(&[0, 0]);
    req.extend_from_slice(&1u32.to_le_bytes());
    req.extend_from_slice(&[0; 4]);
    d.cmd(VIRTIO_RDMA_CMD_ADD_GID, &req, 0).0
}

/// A GID belongs to one device: another's is refused until it lets go; a
/// pinned device takes only its operator's addresses.
#[test]
fn a_gid_belongs_to_one_device() {
    let mut x = Dev::start();
    let mut y = Dev::start();
    let gy = y.gid;
    assert_eq!(add_gid(&mut x, 1, gy), VIRTIO_RDMA_S_BUSY, "y's GID");
    assert_eq!(x.dev.ctrl().stats().get(Counter::GidRefused), 1);
    let gx = x.gid;
    assert_eq!(add_gid(&mut x, 2, gx), VIRTIO_RDMA_S_OK, "its own, again");
    // DEL_GID of index 0, port 1.
    y.ok(VIRTIO_RDMA_CMD_DEL_GID, &[0, 0, 0, 0, 1, 0, 0, 0], 0);
    assert_eq!(add_gid(&mut x, 1, gy), VIRTIO_RDMA_S_OK, "free now");
    assert_eq!(add_gid(&mut y, 0, gy), VIRTIO_RDMA_S_BUSY, "x's now");

    let v4: IpAddr = "10.0.2.15".parse().expect("ip");
    let mut w = Dev::start_with(MEM_SIZE, |l| {
        // The test GID Dev::start adds, and one IPv4 address.
        let own = IpAddr::V6(Ipv6Addr::from(test_gid(u32::from(l.mac().0[5]))));
        l.with_pinned(Some(Pinned::new(&[own, v4]).expect("pinned")))
    });
    let mapped = |last: u8| {
        let mut g = [0u8; 16];
        g[10..].copy_from_slice(&[0xff, 0xff, 10, 0, 2, last]);
        g
    };
    assert_eq!(add_gid(&mut w, 1, mapped(15)), VIRTIO_RDMA_S_OK);
    assert_eq!(
        add_gid(&mut w, 2, mapped(16)),
        VIRTIO_RDMA_S_INVALID,
        "not pinned"
    );
    let ll = w.dev.ctrl().limits().link_local_gid();
    assert_eq!(
        add_gid(&mut w, 3, ll),
        VIRTIO_RDMA_S_OK,
        "its MAC's link-local GID"
    );
    assert_eq!(w.dev.ctrl().stats().get(Counter::GidRefused), 1);
    x.finish();
    y.finish();
    w.finish();
}

/// Key bytes are drawn at random: MRs registered in a row do not share one
/// (the chance that 32 do is 2^-248).
#[test]
fn keys_vary() {
    let mut d = Dev::start();
    let pd = d.create_pd();
    let keys: Vec<u32> = (0..32).map(|_| d.dma_mr(pd, ALL)).collect();
    let mut bytes: Vec<u32> = keys.iter().map(|k| k & 0xff).collect();
    bytes.sort_unstable();
    bytes.dedup();
    assert!(bytes.len() > 1, "key bytes {keys:x?}");
    d.finish();
}

/// MRs and page-table entries are bounded per device; a refusal costs
/// nothing, is counted, and leaves other devices alone.
#[test]
fn mr_quotas_are_per_device() {
    let mut d = Dev::start_with(MEM_SIZE, |l| {
        l.with_max_mr(4)
            .expect("max_mr")
            .with_max_mr_pages(Some(10))
    });
    let pd = d.create_pd();
    let table = DATA + 0x10_0000;
    let pages: Vec<u8> = (0..8u64)
        .flat_map(|i| (DATA + i * 0x1000).to_le_bytes())
        .collect();
    d.fill(table, &pages);
    let user = |d: &mut Dev, n: u32| reg_user_mr(d, pd, ALL, u64::from(n) * 4096, 0, table, n);
    let (st, r8) = user(&mut d, 8);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    assert_eq!(user(&mut d, 4).0, VIRTIO_RDMA_S_NO_RESOURCE, "8 + 4 > 10");
    assert_eq!(user(&mut d, 2).0, VIRTIO_RDMA_S_OK, "8 + 2");
    let fast = |d: &mut Dev, n: u32| {
        d.cmd(
            VIRTIO_RDMA_CMD_CREATE_MR,
            &[pair(pd, 0), pair(n, 0)].concat(),
            16,
        )
        .0
    };
    assert_eq!(
        fast(&mut d, 1),
        VIRTIO_RDMA_S_NO_RESOURCE,
        "a fast-reg MR costs 2 per page"
    );
    d.ok(VIRTIO_RDMA_CMD_DEREG_MR, &pair(le32(&r8, 0), 0), 0);
    assert_eq!(fast(&mut d, 4), VIRTIO_RDMA_S_OK, "2 + 8");
    d.dma_mr(pd, ALL);
    d.dma_mr(pd, ALL);
    let (st, _) = d.cmd(VIRTIO_RDMA_CMD_GET_DMA_MR, &pair(pd, ALL), 16);
    assert_eq!(st, VIRTIO_RDMA_S_NO_RESOURCE, "a fifth MR");
    assert_eq!(d.dev.ctrl().stats().get(Counter::OverQuota), 3);
    let mut e = Dev::start();
    let pe = e.create_pd();
    e.fill(table, &pages);
    assert_eq!(
        reg_user_mr(&mut e, pe, ALL, 8 * 4096, 0, table, 8).0,
        VIRTIO_RDMA_S_OK
    );
    d.finish();
    e.finish();
}

/// VHOST_USER_RESET_DEVICE (what QEMU sends when the guest resets the
/// device: reboot, driver unbind) destroys every object: another guest's
/// requests with the old QPN and key find nothing, the GID is free, and
/// the device starts over (QP1 can be created again).
#[test]
fn reset_destroys_every_object() {
    let mut s = scene(IB_QPT_RC);
    s.y.fill(TARGET, &[0x33; 64]);
    let g1 = s.y.create_qp(1, IB_QPT_GSI, s.cy, true);
    assert_eq!(g1, 1);
    s.y.reset();
    let c = s.y.dev.ctrl();
    assert_eq!((c.mr_count(), c.pd_count(), c.gid(0)), (0, 0, None));
    s.x.send(
        s.p,
        &wqe(
            1,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &rdma(TARGET, s.vkey),
            &[(DATA, 64, s.kx)],
        ),
    );
    assert_eq!(s.x.wait(s.cx, 1)[0].status(), IB_WC_RETRY_EXC_ERR);
    assert_eq!(s.y.read(TARGET, 64), [0x33; 64]);
    let gy = s.y.gid;
    assert_eq!(
        add_gid(&mut s.z, 1, gy),
        VIRTIO_RDMA_S_OK,
        "y's old GID is free"
    );
    let pd = s.y.create_pd();
    let cq = s.y.create_cq(4);
    assert_eq!(s.y.create_qp(pd, IB_QPT_GSI, cq, true), 1, "QP1 again");
    s.x.finish();
    s.y.finish();
    s.z.finish();
}

/// A loopback RC pair on `d` (two QPs of its own connected to each
/// other): (CQ, QP a, key).
fn own_pair(d: &mut Dev) -> (u32, u32, u32) {
    let (cq, a, _, key) = own_rc_pair(d, ALL, ALL, 0);
    (cq, a, key)
}

/// A signaled 64-byte RDMA WRITE within `d`'s loopback pair.
fn own_write(d: &mut Dev, (_, a, key): (u32, u32, u32)) {
    d.send(
        a,
        &wqe(
            7,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &rdma(DATA + 0x1000, key),
            &[(DATA, 64, key)],
        ),
    );
}

/// Asserts that a WRITE within `d`'s loopback pair `own` waits while
/// `held` is held (`what`), and completes once it is released.
fn waits_for(held: fabric::Fabric, d: &mut Dev, own: (u32, u32, u32), what: &str) {
    own_write(d, own);
    thread::sleep(Duration::from_millis(300));
    assert!(d.poll(own.0).is_empty(), "the device moved during {what}");
    drop(held);
    assert_eq!(d.wait(own.0, 1)[0].status(), IB_WC_SUCCESS);
}

#[test]
fn a_step_holds_only_the_devices_it_touches() {
    let CrossPair {
        mut x, mut y, qx, ..
    } = cross_rc_pair(Dev::start(), Dev::start(), 0);
    let own_x = own_pair(&mut x);
    let own_y = own_pair(&mut y);
    // While a step of x's own QPs is under way, y's own traffic moves.
    let held = fabric::for_qp(x.dev.ctrl(), own_x.1);
    own_write(&mut y, own_y);
    assert_eq!(y.wait(own_y.0, 1)[0].status(), IB_WC_SUCCESS);
    drop(held);
    // A step between x and y holds y too: y's own traffic waits for it.
    let held = fabric::for_qp(x.dev.ctrl(), qx);
    waits_for(held, &mut y, own_y, "a step of its peer");
    // And so does a control command (it holds the whole fabric).
    waits_for(fabric::lock(), &mut y, own_y, "a control command");
    x.finish();
    y.finish();
}

/// A QP aimed at another guest's QP that is not connected to it never
/// holds that QP's lane: its requests are only dropped there, so the
/// victim's traffic with its real peer goes on while the intruder's step
/// is under way.
#[test]
fn an_intruder_never_holds_its_victims_lane() {
    let CrossPair {
        mut x,
        y,
        cx,
        kx,
        ky,
        qx,
        qy,
        ..
    } = cross_rc_pair(Dev::start(), Dev::start(), 0);
    let mut z = Dev::start();
    let pz = z.create_pd();
    let cz = z.create_cq(4);
    let intruder = z.create_qp(pz, IB_QPT_RC, cz, false);
    let gy = y.gid;
    z.rc_up(intruder, gy, qy, ALL, 0);
    let held = fabric::for_qp(z.dev.ctrl(), intruder);
    x.send(
        qx,
        &wqe(
            1,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &rdma(DATA + 0x1000, ky),
            &[(DATA, 64, kx)],
        ),
    );
    assert_eq!(x.wait(cx, 1)[0].status(), IB_WC_SUCCESS);
    drop(held);
    x.finish();
    y.finish();
    z.finish();
}

#[test]
fn a_pass_hands_its_locks_to_a_waiting_thread() {
    let CrossPair { x, mut y, qx, .. } = cross_rc_pair(Dev::start(), Dev::start(), 0);
    let own_y = own_pair(&mut y).1;
    // A pass between x and y holds both devices; a step of y's own QP
    // asks for y meanwhile.
    let mut held = fabric::for_qp(x.dev.ctrl(), qx);
    let got = Arc::new(AtomicBool::new(false));
    let waiter = {
        let (dev, got) = (y.dev.clone(), got.clone());
        thread::spawn(move || {
            let f = fabric::for_qp(dev.ctrl(), own_y);
            got.store(true, Ordering::SeqCst);
            drop(f);
        })
    };
    // Between its steps the pass lets the waiter in, and goes on.
    for _ in 0..200 {
        held = fabric::pass_on(held, x.dev.ctrl(), qx);
        if got.load(Ordering::SeqCst) {
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    assert!(
        got.load(Ordering::SeqCst),
        "a thread waiting for the fabric did not get it between two steps"
    );
    drop(held);
    waiter.join().expect("waiter");
    x.finish();
    y.finish();
}

#[test]
fn a_receive_retries_only_the_sender_connected_to_it() {
    // y's QP sends to z's, which has no receive: it waits on RNR. x's QP
    // names y's as its destination, but y's is not connected to it.
    let (mut x, mut y, mut z) = (Dev::start(), Dev::start(), Dev::start());
    let (px, py, pz) = (x.create_pd(), y.create_pd(), z.create_pd());
    let (cx, cy, cz) = (x.create_cq(12), y.create_cq(12), z.create_cq(12));
    let (kx, ky, kz) = (x.dma_mr(px, ALL), y.dma_mr(py, ALL), z.dma_mr(pz, ALL));
    let qx = x.create_qp(px, IB_QPT_RC, cx, false);
    let qy = y.create_qp(py, IB_QPT_RC, cy, false);
    let qz = z.create_qp(pz, IB_QPT_RC, cz, false);
    let (gy, gz) = (y.gid, z.gid);
    y.rc_up(qy, gz, qz, ALL, 7);
    z.rc_up(qz, gy, qy, ALL, 7);
    x.rc_up(qx, gy, qy, ALL, 7);
    y.send(
        qy,
        &wqe(1, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 8, ky)]),
    );
    y.quiet(cy);
    // A receive at x is nothing to y's sender.
    x.recv(qx, 2, &[(DATA, 8, kx)]);
    y.quiet(cy);
    // Its own responder's receive is.
    z.recv(qz, 3, &[(DATA, 8, kz)]);
    assert_eq!(y.wait(cy, 1)[0].status(), IB_WC_SUCCESS);
    assert_eq!(z.wait(cz, 1)[0].status(), IB_WC_SUCCESS);
    x.finish();
    y.finish();
    z.finish();
}
