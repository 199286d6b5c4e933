// SPDX-License-Identifier: GPL-2.0
//! Queues in guest memory (`VIRTIO_RDMA_F_RINGS`), driven over a real
//! vhost-user socket: work rings the device polls and asks doorbells for,
//! completion rings it writes, armed CQs' events, and what a process may
//! not post.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use support::rings::*;
use support::*;
use vhost_user_rdma::abi::*;
use vhost_user_rdma::ib::*;
use vhost_user_rdma::limits::Rings;
use vm_memory::{Bytes, GuestAddress};
use zerocopy::{FromZeros, IntoBytes};

/// CREATE_QP_RING with rings `i` and `i + 1`; (status, qpn, SQ, RQ).
fn try_ring_qp(d: &mut Dev, pdn: u32, cq: u32, i: u64, flags: u32) -> (u8, u32, Ring, Ring) {
    try_ring_qp_with(d, pdn, cq, i, flags, |_| {})
}

/// As [`try_ring_qp`], the QP's request changed by `change` first.
fn try_ring_qp_with(
    d: &mut Dev,
    pdn: u32,
    cq: u32,
    i: u64,
    flags: u32,
    change: impl FnOnce(&mut VirtioRdmaCmdCreateQp),
) -> (u8, u32, Ring, Ring) {
    let (sq, sq_desc) = ring(d, i, 8, 256);
    let (rq, rq_desc) = ring(d, i + 1, 8, 128);
    let mut q = VirtioRdmaCmdCreateQp::new_zeroed();
    q.pdn = pdn.into();
    q.qp_type = IB_QPT_RC;
    q.max_send_wr = 8.into();
    q.max_send_sge = 4.into();
    q.send_cqn = cq.into();
    q.max_recv_wr = 8.into();
    q.max_recv_sge = 4.into();
    q.recv_cqn = cq.into();
    q.max_inline_data = 64.into();
    change(&mut q);
    let req = VirtioRdmaCmdCreateQpRing {
        qp: q,
        sq: sq_desc,
        rq: rq_desc,
        flags: flags.into(),
        reserved: 0.into(),
    };
    let (st, rsp) = d.cmd(VIRTIO_RDMA_CMD_CREATE_QP_RING, req.as_bytes(), 8);
    let qpn = if st == VIRTIO_RDMA_S_OK {
        le32(&rsp, 0)
    } else {
        0
    };
    (st, qpn, sq, rq)
}

fn ring_qp(d: &mut Dev, pdn: u32, cq: u32, i: u64, flags: u32) -> (u32, Ring, Ring) {
    let (st, qpn, sq, rq) = try_ring_qp(d, pdn, cq, i, flags);
    assert_eq!(st, VIRTIO_RDMA_S_OK, "CREATE_QP_RING");
    (qpn, sq, rq)
}

/// A signaled 8-byte RDMA WRITE within the DMA MR `key`.
fn small_write(wr_id: u64, key: u32) -> Vec<u8> {
    wqe(
        wr_id,
        IB_WR_RDMA_WRITE,
        IB_SEND_SIGNALED,
        0,
        &rdma(DATA + 0x3000, key),
        &[(DATA, 8, key)],
    )
}

/// Two ring QPs of one device connected to each other, one ring CQ.
struct Pair {
    d: Dev,
    key: u32,
    cqn: u32,
    cq: Ring,
    a: (u32, Ring, Ring),
    b: (u32, Ring, Ring),
}

fn pair_with(flags: u32) -> Pair {
    let mut d = start();
    let pd = d.create_pd();
    let key = d.dma_mr(pd, ALL);
    let (cqn, cq) = ring_cq(&mut d, 0, 16, 1);
    let a = ring_qp(&mut d, pd, cqn, 1, flags);
    let b = ring_qp(&mut d, pd, cqn, 3, flags);
    let gid = d.gid;
    d.rc_up(a.0, gid, b.0, ALL, 0);
    d.rc_up(b.0, gid, a.0, ALL, 0);
    Pair {
        d,
        key,
        cqn,
        cq,
        a,
        b,
    }
}

#[test]
fn ring_qps_move_data_and_complete_into_the_ring() {
    let mut p = pair_with(VIRTIO_RDMA_QP_RING_F_USER);
    assert!(
        p.a.0 >= MAX_QP && p.cqn >= MAX_CQ,
        "ring numbers follow the virtqueue ones"
    );
    let (src, dst) = (DATA, DATA + 0x1000);
    let msg = pattern(300, 7);
    p.d.fill(src, &msg);
    produce(&p.d, &mut p.b.2, &recv_elem(11, &[(dst, 512, p.key)]));
    let send = wqe(
        22,
        IB_WR_SEND,
        IB_SEND_SIGNALED,
        0,
        &[],
        &[(src, 300, p.key)],
    );
    produce(&p.d, &mut p.a.1, &send);
    let got = wait(&p.d, &mut p.cq, 2);
    let by_id = |id: u64| {
        got.iter()
            .find(|c| c.wr_id.get() == id)
            .expect("completion")
    };
    assert_eq!(by_id(22).status, IB_WC_SUCCESS);
    assert_eq!(by_id(22).qp_num.get(), p.a.0);
    assert_eq!(
        (by_id(11).opcode, by_id(11).byte_len.get()),
        (IB_WC_RECV, 300)
    );
    assert_eq!(p.d.read(dst, 300), msg);
    // The device published how far it read.
    let consumer: u32 = p.d.mem.read_obj(p.a.1.field(4)).expect("consumer");
    assert_eq!(consumer, 1);

    let w = wqe(
        33,
        IB_WR_RDMA_WRITE,
        IB_SEND_SIGNALED,
        0,
        &rdma(dst + 0x800, p.key),
        &[(src, 64, p.key)],
    );
    produce(&p.d, &mut p.a.1, &w);
    let got = wait(&p.d, &mut p.cq, 1);
    assert_eq!((got[0].wr_id.get(), got[0].status), (33, IB_WC_SUCCESS));
    assert_eq!(p.d.read(dst + 0x800, 64), msg[..64]);
    p.d.finish();
}

#[test]
fn idle_rings_ask_for_a_doorbell_and_a_kick_serves_them() {
    let mut p = pair_with(0);
    // Idle past the polling window: every ring asks to be notified (and
    // keeps asking: a spurious wake-up only starts another window).
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut asked_since = None;
    loop {
        let asked = flags(&p.d, &p.a.1) & VIRTIO_RDMA_RING_F_NOTIFY != 0;
        let since = *asked_since.get_or_insert(Instant::now());
        if !asked {
            asked_since = None;
        } else if since.elapsed() > Duration::from_micros(3 * u64::from(POLL_US)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the device never asked for a doorbell"
        );
        thread::sleep(Duration::from_millis(5));
    }
    assert_ne!(flags(&p.d, &p.b.2) & VIRTIO_RDMA_RING_F_NOTIFY, 0, "RQ too");
    // A post without the doorbell waits: the device sleeps.
    let w = small_write(44, p.key);
    publish(&p.d, &mut p.a.1, &w);
    thread::sleep(Duration::from_millis(100));
    assert!(
        take(&p.d, &mut p.cq).is_empty(),
        "served without a doorbell"
    );
    // The doorbell: a kick of the notification queue, no buffer.
    p.d.vqs[notify_q()].kick.write(1).expect("kick");
    let got = wait(&p.d, &mut p.cq, 1);
    assert_eq!((got[0].wr_id.get(), got[0].status), (44, IB_WC_SUCCESS));
    assert_eq!(
        flags(&p.d, &p.a.1) & VIRTIO_RDMA_RING_F_NOTIFY,
        0,
        "polling again"
    );
    p.d.finish();
}

#[test]
fn an_armed_cq_raises_one_event_on_its_queue() {
    let mut p = pair_with(0);
    let q = comp_q(1);
    p.d.post(q, &[0u8; 8], true);
    p.d.post(q, &[0u8; 8], true);
    let write = |id: u64| small_write(id, p.key);
    // Not armed: a completion, no event.
    produce(&p.d, &mut p.a.1, &write(1));
    wait(&p.d, &mut p.cq, 1);
    thread::sleep(Duration::from_millis(20));
    assert!(p.d.take_used(q).is_empty(), "event without arming");
    // Armed: one event naming the CQ, and the arm is spent.
    p.d.mem
        .write_obj(VIRTIO_RDMA_CQ_ARM_NEXT, p.cq.field(12))
        .expect("arm");
    produce(&p.d, &mut p.a.1, &write(2));
    wait(&p.d, &mut p.cq, 1);
    let deadline = Instant::now() + Duration::from_secs(5);
    let used = loop {
        let u = p.d.take_used(q);
        if !u.is_empty() {
            break u;
        }
        assert!(Instant::now() < deadline, "no completion event");
        thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(used.len(), 1);
    assert_eq!(
        used[0].1 as usize,
        core::mem::size_of::<VirtioRdmaCompEvent>()
    );
    let ev = p.d.read(p.d.vqs[q].buf(used[0].0 as u16), 8);
    assert_eq!(le32(&ev, 0), p.cqn);
    let arm: u32 = p.d.mem.read_obj(p.cq.field(12)).expect("arm");
    assert_eq!(arm, VIRTIO_RDMA_CQ_ARM_NONE);
    produce(&p.d, &mut p.a.1, &write(3));
    wait(&p.d, &mut p.cq, 1);
    thread::sleep(Duration::from_millis(20));
    assert!(p.d.take_used(q).is_empty(), "a spent arm fired again");
    assert!(
        p.d.take_used(comp_q(0)).is_empty(),
        "event on another queue"
    );
    p.d.finish();
}

#[test]
fn a_process_ring_runs_only_what_a_process_may_post() {
    let mut p = pair_with(VIRTIO_RDMA_QP_RING_F_USER);
    // LOCAL_INV of a fast-registration MR of its PD: the kernel's to post
    // (a kernel QP's would succeed).
    let req = VirtioRdmaCmdCreateMr {
        pdn: 1.into(),
        access_flags: 0.into(),
        max_num_sg: 4.into(),
        reserved: 0.into(),
    };
    let fr = le32(&p.d.ok(VIRTIO_RDMA_CMD_CREATE_MR, req.as_bytes(), 16), 4);
    let inv = wqe(55, IB_WR_LOCAL_INV, IB_SEND_SIGNALED, fr, &[], &[]);
    produce(&p.d, &mut p.a.1, &inv);
    let got = wait(&p.d, &mut p.cq, 1);
    assert_eq!(
        (got[0].wr_id.get(), got[0].status),
        (55, IB_WC_LOC_QP_OP_ERR)
    );
    assert_eq!(p.d.qp_state(p.a.0), IB_QPS_ERR);
    // The MR still works for the other QP.
    let w = small_write(66, p.key);
    let mut b = p.b;
    produce(&p.d, &mut b.1, &w);
    let got = wait(&p.d, &mut p.cq, 1);
    // Its peer is in error: a remote error, but not a protection fault.
    assert_eq!(got[0].wr_id.get(), 66);
    assert_ne!(got[0].status, IB_WC_LOC_PROT_ERR);
    p.d.finish();
}

#[test]
fn a_process_binds_and_invalidates_its_windows() {
    let mut p = pair_with(VIRTIO_RDMA_QP_RING_F_USER);
    // 0x800 bytes at 0x1000_0000 over one page, windows may be bound to it.
    let (iova, page, table) = (0x1000_0000, DATA + 0x6_0000, DATA + 0x7_0000);
    p.d.fill(table, &page.to_le_bytes());
    let access = ALL | IB_ACCESS_MW_BIND;
    let (st, r) = reg_user_mr(&mut p.d, 1, access, 0x800, iova, table, 1);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    let (st, _, w) = alloc_mw(&mut p.d, 1, IB_MW_TYPE_2);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    let (bound, rw) = (next_key(w), IB_ACCESS_REMOTE_WRITE);
    // Bound on a, reached by b (a's peer), until a invalidates it.
    let el = bind_wr(1, w, bound, le32(&r, 4), iova, 0x800, rw);
    produce(&p.d, &mut p.a.1, &el);
    let got = wait(&p.d, &mut p.cq, 1);
    assert_eq!(
        (got[0].status, got[0].opcode),
        (IB_WC_SUCCESS, IB_WC_BIND_MW)
    );
    let write = |id| {
        let to = rdma(iova + 8, bound);
        wqe(
            id,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &to,
            &[(DATA, 8, p.key)],
        )
    };
    let mut b = p.b;
    produce(&p.d, &mut b.1, &write(2));
    assert_eq!(wait(&p.d, &mut p.cq, 1)[0].status, IB_WC_SUCCESS);
    let inv = wqe(3, IB_WR_LOCAL_INV, IB_SEND_SIGNALED, bound, &[], &[]);
    produce(&p.d, &mut p.a.1, &inv);
    assert_eq!(wait(&p.d, &mut p.cq, 1)[0].status, IB_WC_SUCCESS);
    produce(&p.d, &mut b.1, &write(4));
    assert_eq!(wait(&p.d, &mut p.cq, 1)[0].status, IB_WC_REM_ACCESS_ERR);
    p.d.finish();
}

#[test]
fn a_producer_beyond_the_ring_fails_only_its_qp() {
    let mut p = pair_with(VIRTIO_RDMA_QP_RING_F_USER);
    p.d.mem
        .store(100u32, p.a.1.field(0), std::sync::atomic::Ordering::SeqCst)
        .expect("producer");
    // The device may have stopped polling since the QP was set up (on a
    // loaded host the test can take longer than its polling window).
    doorbell_if_asked(&p.d, &p.a.1);
    let got = wait(&p.d, &mut p.cq, 1);
    assert_eq!(got[0].status, IB_WC_LOC_QP_OP_ERR);
    assert_eq!(got[0].qp_num.get(), p.a.0);
    assert_eq!(p.d.qp_state(p.a.0), IB_QPS_ERR);
    assert_eq!(p.d.qp_state(p.b.0), IB_QPS_RTS);
    p.d.finish();
}

#[test]
fn ring_descriptions_and_objects_are_checked() {
    let mut d = start();
    let pd = d.create_pd();
    let vq_cq = d.create_cq(4);
    let (cqn, _) = ring_cq(&mut d, 0, 16, 0);
    // A ring QP needs ring CQs.
    let (st, ..) = try_ring_qp(&mut d, pd, vq_cq, 1, 0);
    assert_eq!(st, VIRTIO_RDMA_S_INVALID);
    // Unknown flags.
    let (st, ..) = try_ring_qp(&mut d, pd, cqn, 1, 2);
    assert_eq!(st, VIRTIO_RDMA_S_INVALID);
    // Sizes whose slots no ring could hold (once an overflow: the fuzzer's).
    let huge = [
        |q: &mut VirtioRdmaCmdCreateQp| q.max_inline_data = u32::MAX.into(),
        |q: &mut VirtioRdmaCmdCreateQp| q.max_send_sge = u32::MAX.into(),
        |q: &mut VirtioRdmaCmdCreateQp| q.max_recv_sge = u32::MAX.into(),
    ];
    for change in huge {
        let (st, ..) = try_ring_qp_with(&mut d, pd, cqn, 1, 0, change);
        assert_eq!(st, VIRTIO_RDMA_S_INVALID);
    }
    // A completion-event queue the device does not have.
    let (_, desc) = ring(&d, 5, 16, CQE);
    let req = VirtioRdmaCmdCreateCqRing {
        ring: desc,
        comp_vq: 2.into(),
        reserved: 0.into(),
    };
    assert_eq!(
        d.cmd(VIRTIO_RDMA_CMD_CREATE_CQ_RING, req.as_bytes(), 8).0,
        VIRTIO_RDMA_S_INVALID
    );
    // A CQ ring whose slots are not completions.
    let (_, desc) = ring(&d, 6, 16, 128);
    let req = VirtioRdmaCmdCreateCqRing {
        ring: desc,
        comp_vq: 0.into(),
        reserved: 0.into(),
    };
    assert_eq!(
        d.cmd(VIRTIO_RDMA_CMD_CREATE_CQ_RING, req.as_bytes(), 8).0,
        VIRTIO_RDMA_S_INVALID
    );
    d.finish();
}

#[test]
fn ring_qp_numbers_go_round_before_one_comes_back() {
    let mut d = start();
    let pd = d.create_pd();
    let (cqn, _) = ring_cq(&mut d, 0, 16, 0);
    let destroy = |d: &mut Dev, qpn: u32| d.ok(VIRTIO_RDMA_CMD_DESTROY_QP, &pair(qpn, 0), 0);
    let (first, ..) = ring_qp(&mut d, pd, cqn, 1, 0);
    destroy(&mut d, first);
    // Created and destroyed one after the other, each QP has a number of
    // its own until the numbers run out: none is the one just freed.
    let count = d.dev.ctrl().limits().qp_count() - d.dev.ctrl().limits().max_qp();
    let mut seen = vec![first];
    for _ in 1..count {
        let (qpn, ..) = ring_qp(&mut d, pd, cqn, 1, 0);
        assert!(!seen.contains(&qpn), "QP {qpn} came back after {seen:?}");
        seen.push(qpn);
        destroy(&mut d, qpn);
    }
    // Then round again, to the first.
    let (again, ..) = ring_qp(&mut d, pd, cqn, 1, 0);
    assert_eq!(again, first);
    // With one number held, the next skips it.
    let (next, ..) = ring_qp(&mut d, pd, cqn, 1, 0);
    assert_eq!(next, seen[1]);
    destroy(&mut d, next);
    d.finish();
}

#[test]
fn ring_commands_need_the_feature() {
    // Offered but not acked.
    let mut d = Dev::start_without(
        MEM_SIZE,
        |l| {
            l.with_rings(Some(Rings::new(16, 8, 2, POLL_US).expect("rings")))
                .expect("limits")
        },
        1 << VIRTIO_RDMA_F_RINGS,
    );
    let (_, desc) = ring(&d, 0, 16, CQE);
    let req = VirtioRdmaCmdCreateCqRing {
        ring: desc,
        comp_vq: 0.into(),
        reserved: 0.into(),
    };
    assert_eq!(
        d.cmd(VIRTIO_RDMA_CMD_CREATE_CQ_RING, req.as_bytes(), 8).0,
        VIRTIO_RDMA_S_UNSUPPORTED
    );
    d.finish();
    // Not offered.
    let d = Dev::start();
    let f = d.dev.ctrl().rings_acked();
    assert!(!f);
    d.finish();
}

#[test]
fn virtqueue_qps_may_complete_into_ring_cqs() {
    // The GSI QP keeps its virtqueues and reports to the kernel's ring CQs.
    let mut d = start();
    let pd = d.create_pd();
    let key = d.dma_mr(pd, ALL);
    let (cqn, mut cq) = ring_cq(&mut d, 0, 16, 0);
    let a = d.create_qp(pd, IB_QPT_RC, cqn, false);
    let b = d.create_qp(pd, IB_QPT_RC, cqn, false);
    assert!(a < MAX_QP && b < MAX_QP, "virtqueue QPs");
    let gid = d.gid;
    d.rc_up(a, gid, b, ALL, 0);
    d.rc_up(b, gid, a, ALL, 0);
    let (src, dst) = (DATA, DATA + 0x1000);
    let msg = pattern(100, 3);
    d.fill(src, &msg);
    d.recv(b, 5, &[(dst, 128, key)]);
    let send = wqe(6, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(src, 100, key)]);
    d.send(a, &send);
    let got = wait(&d, &mut cq, 2);
    let ids: Vec<(u64, u32)> = got
        .iter()
        .map(|c| (c.wr_id.get(), c.qp_num.get()))
        .collect();
    assert!(ids.contains(&(6, a)) && ids.contains(&(5, b)), "{ids:?}");
    assert_eq!(d.read(dst, 100), msg);
    d.finish();
}

/// RESIZE_CQ_RING of CQ `cqn` onto ring `i` of `depth` slots, whose record
/// holds the consumer count `consumer`; (status, produced, the new ring).
fn resize(d: &mut Dev, cqn: u32, i: u64, depth: u32, consumer: u32) -> (u8, u32, Ring) {
    let (mut r, desc) = ring(d, i, depth, CQE);
    d.mem.write_obj(consumer, r.field(4)).expect("consumer");
    r.next = consumer;
    let req = VirtioRdmaCmdResizeCqRing {
        ring: desc,
        cqn: cqn.into(),
        reserved: 0.into(),
    };
    let (status, rsp) = d.cmd(VIRTIO_RDMA_CMD_RESIZE_CQ_RING, req.as_bytes(), 8);
    let produced = if status == VIRTIO_RDMA_S_OK {
        le32(&rsp, 0)
    } else {
        0
    };
    (status, produced, r)
}

#[test]
fn a_resized_cq_ring_numbers_on_in_its_new_ring() {
    let mut p = pair_with(0);
    let write = |id: u64| small_write(id, p.key);
    produce(&p.d, &mut p.a.1, &write(1));
    assert_eq!(wait(&p.d, &mut p.cq, 1)[0].wr_id.get(), 1);
    // Two more written, not consumed: completions 1 and 2 of the old ring.
    produce(&p.d, &mut p.a.1, &write(2));
    produce(&p.d, &mut p.a.1, &write(3));
    let deadline = Instant::now() + Duration::from_secs(10);
    while p
        .d
        .mem
        .read_obj::<u32>(GuestAddress(p.cq.slot(2) + SEQ))
        .expect("seq")
        != 3
    {
        assert!(Instant::now() < deadline, "completion 2 never written");
        thread::sleep(Duration::from_millis(1));
    }
    p.d.mem
        .write_obj(VIRTIO_RDMA_CQ_ARM_NEXT, p.cq.field(12))
        .expect("arm");

    // Two completions not consumed do not fit in one slot: refused, the CQ
    // stays on its ring, still armed.
    let (status, _, _) = resize(&mut p.d, p.cqn, 5, 1, 1);
    assert_eq!(status, VIRTIO_RDMA_S_INVALID);
    let arm: u32 = p.d.mem.read_obj(p.cq.field(12)).expect("arm");
    assert_eq!(arm, VIRTIO_RDMA_CQ_ARM_NEXT);
    // Not a ring CQ, or no CQ at all.
    let vq_cq = p.d.create_cq(4);
    assert_eq!(resize(&mut p.d, vq_cq, 5, 4, 0).0, VIRTIO_RDMA_S_NOT_FOUND);
    assert_eq!(
        resize(&mut p.d, MAX_CQ + 7, 5, 4, 0).0,
        VIRTIO_RDMA_S_NOT_FOUND
    );

    let (status, produced, mut new) = resize(&mut p.d, p.cqn, 6, 4, 1);
    assert_eq!((status, produced), (VIRTIO_RDMA_S_OK, 3));
    // The arming moved with the CQ.
    let (old_arm, new_arm): (u32, u32) = (
        p.d.mem.read_obj(p.cq.field(12)).expect("arm"),
        p.d.mem.read_obj(new.field(12)).expect("arm"),
    );
    assert_eq!(
        (old_arm, new_arm),
        (VIRTIO_RDMA_CQ_ARM_NONE, VIRTIO_RDMA_CQ_ARM_NEXT)
    );
    // What was not consumed is still in the old ring, in order.
    let old: Vec<u64> = take(&p.d, &mut p.cq)
        .iter()
        .map(|c| c.wr_id.get())
        .collect();
    assert_eq!(old, [2, 3]);
    // The next completion is number 3: slot 3 of the new ring, which is
    // where the process's count already points.
    let q = comp_q(1);
    p.d.post(q, &[0u8; 8], true);
    produce(&p.d, &mut p.a.1, &write(4));
    new.next = 3;
    let got = wait(&p.d, &mut new, 1);
    assert_eq!((got[0].wr_id.get(), got[0].status), (4, IB_WC_SUCCESS));
    let seq: u32 =
        p.d.mem
            .read_obj(GuestAddress(p.cq.slot(3) + SEQ))
            .expect("seq");
    assert_eq!(seq, 0, "a completion went to the old ring");
    let deadline = Instant::now() + Duration::from_secs(5);
    while p.d.take_used(q).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the moved arming raised no event"
        );
        thread::sleep(Duration::from_millis(1));
    }
    p.d.finish();
}

/// Sends posted to a QP completing into a ring CQ and not run yet count
/// against a shrink as the completions they will be: the answer does not
/// depend on whether the device's loop ran them before the command
/// (rdma-core's test_resize_cq posts six sends and at once shrinks to 1).
#[test]
fn a_cq_ring_shrink_leaves_room_for_sends_already_posted() {
    let mut p = pair_with(0);
    // A QP not yet ready to send: its ring holds what is posted.
    let pd = p.d.create_pd();
    let (c, mut sq, _) = ring_qp(&mut p.d, pd, p.cqn, 5, 0);
    for id in 1..=3 {
        publish(&p.d, &mut sq, &small_write(id, p.key));
    }
    let (status, _, _) = resize(&mut p.d, p.cqn, 7, 2, 0);
    assert_eq!(
        status, VIRTIO_RDMA_S_INVALID,
        "3 sends of QP {c} in 2 slots"
    );
    let (status, _, _) = resize(&mut p.d, p.cqn, 8, 4, 0);
    assert_eq!(status, VIRTIO_RDMA_S_OK, "3 sends in 4 slots");
    p.d.finish();
}

/// Two ring RC pairs of one device on its two lanes (QPs `n`, `n + 2` and
/// `n + 1`, `n + 3`: two threads poll and serve them) complete into one
/// ring CQ at once: every completion arrives once, whole (its QP is the
/// one its wr_id was posted on), none is lost.
#[test]
fn two_lanes_complete_into_one_ring_cq_and_lose_nothing() {
    const ROUNDS: u64 = 300;
    let mut d = start();
    let pd = d.create_pd();
    let key = d.dma_mr(pd, ALL);
    let (cqn, mut cq) = ring_cq(&mut d, 0, 64, 1);
    let mut qps: Vec<(u32, Ring, Ring)> = (0..4)
        .map(|i| ring_qp(&mut d, pd, cqn, 1 + 2 * i, 0))
        .collect();
    let dev = d.dev.clone();
    let lane = |qpn| dev.ctrl().lanes().index_of(qpn);
    assert_ne!(lane(qps[0].0), lane(qps[1].0), "two lanes");
    let gid = d.gid;
    for (x, y) in [(0, 2), (1, 3)] {
        let (qx, qy) = (qps[x].0, qps[y].0);
        assert_eq!(lane(qx), lane(qy));
        d.rc_up(qx, gid, qy, ALL, 0);
        d.rc_up(qy, gid, qx, ALL, 0);
    }
    let mut seen = std::collections::BTreeSet::new();
    for round in 0..ROUNDS {
        for q in 0..2 {
            for k in 0..8 {
                let wr_id = (round * 2 + q) * 8 + k;
                produce(&d, &mut qps[q as usize].1, &small_write(wr_id, key));
            }
        }
        for c in wait(&d, &mut cq, 16) {
            let wr_id = c.wr_id.get();
            assert_eq!(c.status, IB_WC_SUCCESS, "round {round}: {c:?}");
            assert_eq!(
                c.qp_num.get(),
                qps[(wr_id / 8 % 2) as usize].0,
                "round {round}: wr_id {wr_id} on another QP"
            );
            assert!(seen.insert(wr_id), "round {round}: wr_id {wr_id} twice");
        }
    }
    assert_eq!(seen.len() as u64, ROUNDS * 16);
    assert!(take(&d, &mut cq).is_empty(), "completions no WR asked for");
    d.finish();
}
