// SPDX-License-Identifier: GPL-2.0
//! QUERY_DEVICE and RESET, driven over a real vhost-user socket: the
//! config structure by command; RESET destroying every object and giving
//! back, used with length 0 and signalled, every buffer the device holds
//! (those still available and those it took and kept: an SQ element
//! stalled on RNR or moving in chunks, a receive a message in chunks
//! fills), in virtqueue and ring mode; what a peer and the old keys
//! reach afterwards; a RESET that is not exactly one; two in a row.

mod support;

use std::mem::size_of;
use std::thread;
use std::time::{Duration, Instant};

use support::rings::*;
use support::*;
use vhost::vhost_user::message::VhostUserConfigFlags;
use vhost::vhost_user::VhostUserFrontend;
use vhost_user_rdma::abi::*;
use vhost_user_rdma::ib::*;
use vm_memory::{Bytes, GuestAddress};
use zerocopy::{FromZeros, IntoBytes};

/// The config space as GET_CONFIG reads it.
fn config_space(d: &mut Dev) -> Vec<u8> {
    let fe = d.fe.as_mut().expect("connected");
    let (_, cfg) = fe
        .get_config(0, 256, VhostUserConfigFlags::empty(), &[0u8; 256])
        .expect("get_config");
    cfg
}

#[test]
fn query_device_answers_the_config_space() {
    let cfg_len = size_of::<VirtioRdmaConfig>();
    for mut d in [Dev::start(), start()] {
        let space = config_space(&mut d);
        let (st, body) = query_device(&mut d, cfg_len);
        assert_eq!(st, VIRTIO_RDMA_S_OK);
        assert_eq!(body, space[..cfg_len], "the bytes config space holds");
        // More room than the structure: still the structure.
        let (st, body) = query_device(&mut d, cfg_len + 64);
        assert_eq!((st, body.len()), (VIRTIO_RDMA_S_OK, cfg_len));
        // Too little room for the response body: INVALID, as for every
        // command.
        let (st, body) = query_device(&mut d, cfg_len - 1);
        assert_eq!((st, body.len()), (VIRTIO_RDMA_S_INVALID, 0));
        d.finish();
    }
}

/// Makes the driver's side of queue `q` ask for no interrupt for a long
/// while (EVENT_IDX's used_event far ahead).
fn suppress(d: &Dev, q: usize) {
    assert!(d.event_idx, "EVENT_IDX negotiated");
    let vq = &d.vqs[q];
    let used_event = vq.avail() + 4 + 2 * u64::from(QSIZE);
    d.mem
        .write_obj(vq.used_seen.wrapping_add(1000), GuestAddress(used_event))
        .expect("used_event");
}

/// Waits up to 5 s for `cond`; whether it held.
fn wait_for(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !cond() {
        if Instant::now() > deadline {
            return false;
        }
        thread::yield_now();
    }
    true
}

/// Asserts that queue `q` of `d` gave back exactly `n` buffers, all
/// unwritten, and interrupted the driver for them.
fn returned(d: &mut Dev, q: usize, n: usize) {
    let used = d.take_used(q);
    assert_eq!(used.len(), n, "queue {q}: {used:?}");
    assert!(used.iter().all(|&(_, len)| len == 0), "queue {q}: {used:?}");
    assert!(
        wait_for(|| d.interrupts(q) > 0),
        "queue {q} gave buffers back without an interrupt"
    );
}

/// ADD_GID of `gid` at index 0 (what `Dev::start` does).
fn add_gid(d: &mut Dev, gid: [u8; 16]) {
    let mut req = gid.to_vec();
    req.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
    d.ok(VIRTIO_RDMA_CMD_ADD_GID, &req, 0);
}

fn write_wr(wr_id: u64, addr: u64, rkey: u32, src: (u64, u32, u32)) -> Vec<u8> {
    wqe(
        wr_id,
        IB_WR_RDMA_WRITE,
        IB_SEND_SIGNALED,
        0,
        &rdma(addr, rkey),
        &[src],
    )
}

#[test]
fn reset_returns_every_buffer_and_destroys_every_object() {
    let CrossPair {
        mut x,
        mut y,
        px,
        py,
        cx,
        cy,
        kx,
        ky,
        qx,
        qy,
    } = cross_rc_pair(Dev::start(), Dev::start(), 7);
    // More of every kind on X: a CQ no QP uses, a window, a user MR with
    // remote access, a counter set with the QP bound to it.
    let cx2 = x.create_cq(4);
    let (st, mwn, _) = alloc_mw(&mut x, px, IB_MW_TYPE_1);
    assert_eq!(st, VIRTIO_RDMA_S_OK, "ALLOC_MW");
    let table = DATA + 0x10_0000;
    x.fill(table, &(DATA + 0x8000).to_le_bytes());
    let (st, umr) = reg_user_mr(&mut x, px, ALL, 4096, 0x1000_0000, table, 1);
    assert_eq!(st, VIRTIO_RDMA_S_OK, "REG_USER_MR");
    let ukey = le32(&umr, 8);
    let set = le32(&x.ok(VIRTIO_RDMA_CMD_ALLOC_COUNTER_SET, &pair(1, 0), 8), 0);
    x.ok(VIRTIO_RDMA_CMD_BIND_COUNTER_SET, &pair(qx, set), 0);
    // A QP still in RESET with an element posted: it waits on its SQ.
    let idle = x.create_qp(px, IB_QPT_RC, cx, false);
    x.send(
        idle,
        &wqe(9, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 8, kx)]),
    );
    // Receives posted, event buffers lent (their interrupts suppressed:
    // RESET must signal whatever the driver asked).
    x.recv(qx, 20, &[(DATA + 0x1000, 64, kx)]);
    x.recv(qx, 21, &[(DATA + 0x2000, 64, kx)]);
    x.fill_events(4, 8);
    suppress(&x, Dev::event_q());
    // A SEND to Y, which has no receive: with rnr_retry 7 it waits for
    // one, and X keeps its element.
    x.send(
        qx,
        &wqe(1, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 8, kx)]),
    );
    let ctrl = x.dev.clone();
    assert!(
        wait_for(|| ctrl
            .ctrl()
            .lock()
            .qp(qx)
            .is_some_and(|q| q.resend.is_some())),
        "the SEND waits on RNR"
    );
    let queues = [
        (Dev::cq_q(cx), 12),
        (Dev::cq_q(cx2), 4),
        (Dev::sq_q(qx), 1),
        (Dev::rq_q(qx), 2),
        (Dev::sq_q(idle), 1),
        (Dev::event_q(), 4),
    ];
    for (q, _) in queues {
        assert!(x.take_used(q).is_empty(), "queue {q} before RESET");
        x.interrupts(q);
    }

    assert_eq!(rdma_reset(&mut x), VIRTIO_RDMA_S_OK);
    // Every buffer is back by the time RESET answers.
    for (q, n) in queues {
        returned(&mut x, q, n);
    }
    // Nothing of before names anything.
    assert!(!x.dev.ctrl().has_gid(&x.gid), "the GID is gone");
    let gone = [
        (VIRTIO_RDMA_CMD_QUERY_QP, pair(qx, 0), 96),
        (VIRTIO_RDMA_CMD_QUERY_QP, pair(idle, 0), 96),
        (VIRTIO_RDMA_CMD_DESTROY_CQ, pair(cx, 0), 0),
        (VIRTIO_RDMA_CMD_DESTROY_CQ, pair(cx2, 0), 0),
        (VIRTIO_RDMA_CMD_DEALLOC_MW, pair(mwn, 0), 0),
        (VIRTIO_RDMA_CMD_DEREG_MR, pair(kx >> 8, 0), 0),
        (VIRTIO_RDMA_CMD_DEREG_MR, pair(ukey >> 8, 0), 0),
        (VIRTIO_RDMA_CMD_DESTROY_PD, pair(px, 0), 0),
        (VIRTIO_RDMA_CMD_QUERY_COUNTERS, pair(1, set), 152),
    ];
    for (cmd, body, rsp) in gone {
        assert_eq!(x.cmd(cmd, &body, rsp).0, VIRTIO_RDMA_S_NOT_FOUND, "{cmd}");
    }

    // The driver starts again: same GID, new PD, CQ, MR and QP, connected
    // to a new QP of Y.
    let gx = x.gid;
    add_gid(&mut x, gx);
    let px2 = x.create_pd();
    let cx3 = x.create_cq(12);
    let kx2 = x.dma_mr(px2, ALL);
    for old in [kx, ukey, mwn << 8] {
        assert_ne!(kx2 >> 8, old >> 8, "a new MR takes no handle of before");
    }
    let qx2 = x.create_qp(px2, IB_QPT_RC, cx3, false);
    let qy2 = y.create_qp(py, IB_QPT_RC, cy, false);
    let gy = y.gid;
    x.rc_up(qx2, gy, qy2, ALL, 7);
    y.rc_up(qy2, gx, qx2, ALL, 7);
    let target = DATA + 0x4000;
    x.fill(target, &[0; 16]);
    y.fill(DATA, b"new owner writes");
    // Y's old QP, connected to X's old QP (whose number a new QP may have
    // again), reaches nothing: what it would get had that QP been
    // destroyed.
    y.send(qy, &write_wr(30, target, kx2, (DATA, 16, ky)));
    let wc = y.wait(cy, 1)[0];
    assert_eq!((wc.wr_id(), wc.status()), (30, IB_WC_RETRY_EXC_ERR));
    // The new connection works with the new key ...
    y.send(qy2, &write_wr(31, target, kx2, (DATA, 16, ky)));
    let wc = y.wait(cy, 1)[0];
    assert_eq!((wc.wr_id(), wc.status()), (31, IB_WC_SUCCESS));
    assert_eq!(x.read(target, 16), b"new owner writes");
    // ... and an old rkey fails as a deregistered MR's does.
    y.send(qy2, &write_wr(32, target, kx, (DATA, 16, ky)));
    let wc = y.wait(cy, 1)[0];
    assert_eq!((wc.wr_id(), wc.status()), (32, IB_WC_REM_ACCESS_ERR));
    x.quiet(cx3);
    x.finish();
    y.finish();
}

/// Guest memory of the devices whose messages move in chunks.
const BIG_MEM: usize = 16 << 20;
/// Each of the four SGEs of a 32 MiB message (128 chunks).
const PART: u32 = 8 << 20;

/// A cross-device RC pair moving one 32 MiB SEND from X to Y, into a
/// receive of Y.
fn big_send() -> CrossPair {
    let mut p = cross_rc_pair(
        Dev::start_with_mem(BIG_MEM),
        Dev::start_with_mem(BIG_MEM),
        7,
    );
    p.y.recv(p.qy, 50, &[(DATA, PART, p.ky); 4]);
    p.x.send(
        p.qx,
        &wqe(
            1,
            IB_WR_SEND,
            IB_SEND_SIGNALED,
            0,
            &[],
            &[(DATA, PART, p.kx); 4],
        ),
    );
    p
}

#[test]
fn reset_mid_message_returns_the_receive_it_fills() {
    for _ in 0..8 {
        let mut p = big_send();
        let (dev, qy) = (p.y.dev.clone(), p.qy);
        let holds = || {
            dev.ctrl()
                .lock()
                .qp(qy)
                .is_some_and(|q| q.held_recv.is_some())
        };
        if !wait_for(holds) {
            // The message ended before it was seen moving: again.
            continue;
        }
        assert_eq!(rdma_reset(&mut p.y), VIRTIO_RDMA_S_OK);
        let used = wait_used(&mut p.y, Dev::rq_q(qy), 1);
        assert_eq!(used.len(), 1);
        let wc = p.x.wait(p.cx, 1)[0];
        if wc.status() == IB_WC_SUCCESS {
            // RESET came after the message: again.
            continue;
        }
        // Cut off: the receive came back unwritten, no completion.
        assert_eq!(used[0].1, 0);
        assert_eq!(wc.status(), IB_WC_RETRY_EXC_ERR);
        returned(&mut p.y, Dev::cq_q(p.cy), 12);
        p.x.finish();
        p.y.finish();
        return;
    }
    panic!("RESET never came while a message moved");
}

#[test]
fn reset_mid_message_returns_the_element_moving() {
    for _ in 0..8 {
        let mut p = big_send();
        let (dev, qx) = (p.x.dev.clone(), p.qx);
        let moving = || {
            dev.ctrl()
                .lock()
                .qp(qx)
                .is_some_and(|q| q.transfer.is_some())
        };
        if !wait_for(moving) {
            continue;
        }
        assert_eq!(rdma_reset(&mut p.x), VIRTIO_RDMA_S_OK);
        let cq = p.x.take_used(Dev::cq_q(p.cx));
        if cq.iter().any(|&(_, len)| len != 0) {
            // The message completed before RESET ran: again.
            continue;
        }
        // The element moving came back unwritten, and no CQE buffer was
        // written.
        assert_eq!(cq.len(), 12, "{cq:?}");
        returned(&mut p.x, Dev::sq_q(qx), 1);
        p.x.finish();
        p.y.finish();
        return;
    }
    panic!("RESET never came while a message moved");
}

/// CREATE_SRQ of 8 one-SGE receives on ring `i`: (srqn, ring).
fn create_srq(d: &mut Dev, pdn: u32, i: u64) -> (u32, Ring) {
    let (r, desc) = ring(d, i, 8, 32);
    let req = srq_req(desc, pdn);
    (
        le32(&d.ok(VIRTIO_RDMA_CMD_CREATE_SRQ, req.as_bytes(), 8), 0),
        r,
    )
}

fn srq_req(ring: VirtioRdmaRing, pdn: u32) -> VirtioRdmaCmdCreateSrq {
    VirtioRdmaCmdCreateSrq {
        ring,
        pdn: pdn.into(),
        max_wr: 8.into(),
        max_sge: 1.into(),
        srq_limit: 0.into(),
        flags: 0.into(),
        reserved: 0.into(),
    }
}

/// CREATE_QP_RING of an RC QP taking its receives from `srqn`, its SQ on
/// ring `i`: its status.
fn ring_qp(d: &mut Dev, pdn: u32, cqn: u32, srqn: u32, i: u64) -> u8 {
    let (_, sq) = ring(d, i, 8, 256);
    let mut q = VirtioRdmaCmdCreateQp::new_zeroed();
    q.pdn = pdn.into();
    q.qp_type = IB_QPT_RC;
    q.max_send_wr = 8.into();
    q.max_send_sge = 1.into();
    q.send_cqn = cqn.into();
    q.recv_cqn = cqn.into();
    q.srqn = srqn.into();
    let req = VirtioRdmaCmdCreateQpRing {
        qp: q,
        sq,
        rq: VirtioRdmaRing::new_zeroed(),
        flags: 0.into(),
        reserved: 0.into(),
    };
    d.cmd(VIRTIO_RDMA_CMD_CREATE_QP_RING, req.as_bytes(), 8).0
}

#[test]
fn reset_in_ring_mode() {
    let mut d = start();
    for round in 0..2 {
        let pd = d.create_pd();
        let key = d.dma_mr(pd, ALL);
        let (cqn, _) = ring_cq(&mut d, 0, 16, 0);
        let vcq = d.create_cq(4);
        d.fill_events(2, 8);
        for _ in 0..3 {
            d.post(comp_q(0), &[0u8; 8], true);
        }
        d.post(comp_q(1), &[0u8; 8], true);
        // An SRQ holding receives, a ring QP taking from it.
        let (srqn, mut srq) = create_srq(&mut d, pd, 1);
        for n in 0..2 {
            publish(&d, &mut srq, &recv_elem(n, &[(DATA, 64, key)]));
        }
        assert_eq!(ring_qp(&mut d, pd, cqn, srqn, 2), VIRTIO_RDMA_S_OK);
        // An XRC domain, its SRQ and a target QP.
        let xrcdn = le32(&d.ok(VIRTIO_RDMA_CMD_ALLOC_XRCD, &[], 8), 0);
        let (_, desc) = ring(&d, 3, 8, 32);
        let req = VirtioRdmaCmdCreateXrcSrq {
            srq: srq_req(desc, pd),
            xrcdn: xrcdn.into(),
            cqn: cqn.into(),
        };
        let xsrq = le32(&d.ok(VIRTIO_RDMA_CMD_CREATE_XRC_SRQ, req.as_bytes(), 8), 0);
        let tgt = le32(
            &d.ok(VIRTIO_RDMA_CMD_CREATE_XRC_TGT_QP, &pair(xrcdn, 0), 8),
            0,
        );

        assert_eq!(rdma_reset(&mut d), VIRTIO_RDMA_S_OK, "round {round}");
        returned(&mut d, comp_q(0), 3);
        returned(&mut d, comp_q(1), 1);
        returned(&mut d, Dev::cq_q(vcq), 4);
        returned(&mut d, Dev::event_q(), 2);
        let gone = [
            (VIRTIO_RDMA_CMD_QUERY_SRQ, pair(srqn, 0), 16),
            (VIRTIO_RDMA_CMD_QUERY_SRQ, pair(xsrq, 0), 16),
            (VIRTIO_RDMA_CMD_QUERY_QP, pair(tgt, 0), 96),
            (VIRTIO_RDMA_CMD_DEALLOC_XRCD, pair(xrcdn, 0), 0),
            (VIRTIO_RDMA_CMD_DESTROY_CQ, pair(cqn, 0), 0),
            (VIRTIO_RDMA_CMD_DESTROY_PD, pair(pd, 0), 0),
        ];
        for (cmd, body, rsp) in gone {
            assert_eq!(d.cmd(cmd, &body, rsp).0, VIRTIO_RDMA_S_NOT_FOUND, "{cmd}");
        }
        // The features stay negotiated: the next round creates rings
        // again (a device reset would have cleared them: UNSUPPORTED).
        let gid = d.gid;
        add_gid(&mut d, gid);
    }
    d.finish();
}

#[test]
fn reset_is_exactly_one_and_may_come_twice() {
    let mut d = Dev::start();
    let pd = d.create_pd();
    let cq = d.create_cq(3);
    // With a request body: INVALID, and nothing destroyed.
    assert_eq!(
        d.cmd(VIRTIO_RDMA_CMD_RESET, &[0; 8], 0).0,
        VIRTIO_RDMA_S_INVALID
    );
    assert!(d.take_used(Dev::cq_q(cq)).is_empty(), "buffers kept");
    assert_eq!(d.dev.ctrl().pd_count(), 1, "the PD lives");
    // Twice in a row; the second has nothing to give back.
    assert_eq!(rdma_reset(&mut d), VIRTIO_RDMA_S_OK);
    returned(&mut d, Dev::cq_q(cq), 3);
    assert_eq!(rdma_reset(&mut d), VIRTIO_RDMA_S_OK);
    assert!(d.take_used(Dev::cq_q(cq)).is_empty());
    assert_eq!(
        d.cmd(VIRTIO_RDMA_CMD_DESTROY_PD, &pair(pd, 0), 0).0,
        VIRTIO_RDMA_S_NOT_FOUND
    );
    // A fresh device's start works again.
    let gid = d.gid;
    add_gid(&mut d, gid);
    let pd = d.create_pd();
    let cq = d.create_cq(12);
    let key = d.dma_mr(pd, ALL);
    let a = d.create_qp(pd, IB_QPT_RC, cq, false);
    let b = d.create_qp(pd, IB_QPT_RC, cq, false);
    let gid = d.gid;
    d.rc_up(a, gid, b, ALL, 0);
    d.rc_up(b, gid, a, ALL, 0);
    d.fill(DATA, b"again");
    d.recv(b, 2, &[(DATA + 0x100, 8, key)]);
    d.send(
        a,
        &wqe(1, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 5, key)]),
    );
    let wcs = d.wait(cq, 2);
    assert!(wcs.iter().all(|w| w.status() == IB_WC_SUCCESS), "{wcs:?}");
    assert_eq!(d.read(DATA + 0x100, 5), b"again");
    d.finish();
}
