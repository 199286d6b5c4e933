// SPDX-License-Identifier: GPL-2.0
//! Shared receive queues, driven over a real vhost-user socket: QPs taking
//! receives from one SRQ ring, the SRQ's PD, its limit event, the "last WQE
//! reached" event, senders stalled on RNR woken by SRQ posts, and what the
//! SRQ commands refuse.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use support::rings::*;
use support::*;
use vhost_user_rdma::abi::*;
use vhost_user_rdma::ib::*;
use vhost_user_rdma::limits::Rings;
use zerocopy::{FromZeros, IntoBytes};

/// Stride of an SRQ slot with one SGE.
const STRIDE: u32 = 32;

/// CREATE_SRQ of `max_wr` one-SGE receives on ring number `i` (depth 8);
/// (status, srqn, ring).
fn try_srq(d: &mut Dev, pdn: u32, i: u64, max_wr: u32, limit: u32) -> (u8, u32, Ring) {
    let (r, desc) = ring(d, i, 8, STRIDE);
    let req = VirtioRdmaCmdCreateSrq {
        ring: desc,
        pdn: pdn.into(),
        max_wr: max_wr.into(),
        max_sge: 1.into(),
        srq_limit: limit.into(),
        flags: 0.into(),
        reserved: 0.into(),
    };
    let (st, rsp) = d.cmd(VIRTIO_RDMA_CMD_CREATE_SRQ, req.as_bytes(), 8);
    let srqn = if st == VIRTIO_RDMA_S_OK {
        le32(&rsp, 0)
    } else {
        0
    };
    (st, srqn, r)
}

fn srq(d: &mut Dev, pdn: u32, i: u64, limit: u32) -> (u32, Ring) {
    let (st, srqn, r) = try_srq(d, pdn, i, 8, limit);
    assert_eq!(st, VIRTIO_RDMA_S_OK, "CREATE_SRQ");
    (srqn, r)
}

/// A QP request taking its receives from `srqn`.
fn qp_req(pdn: u32, t: u8, send_cq: u32, recv_cq: u32, srqn: u32) -> VirtioRdmaCmdCreateQp {
    let mut q = VirtioRdmaCmdCreateQp::new_zeroed();
    q.pdn = pdn.into();
    q.qp_type = t;
    q.max_send_wr = 8.into();
    q.max_send_sge = 1.into();
    q.send_cqn = send_cq.into();
    q.recv_cqn = recv_cq.into();
    q.srqn = srqn.into();
    q
}

/// CREATE_QP_RING of an RC QP with SRQ `srqn` (no RQ ring) and its SQ on
/// ring number `i`; (status, qpn).
fn try_srq_qp(d: &mut Dev, pdn: u32, cqs: (u32, u32), i: u64, srqn: u32) -> (u8, u32) {
    let (_, sq) = ring(d, i, 8, 256);
    let req = VirtioRdmaCmdCreateQpRing {
        qp: qp_req(pdn, IB_QPT_RC, cqs.0, cqs.1, srqn),
        sq,
        rq: VirtioRdmaRing::new_zeroed(),
        flags: 0.into(),
        reserved: 0.into(),
    };
    let (st, rsp) = d.cmd(VIRTIO_RDMA_CMD_CREATE_QP_RING, req.as_bytes(), 8);
    (
        st,
        if st == VIRTIO_RDMA_S_OK {
            le32(&rsp, 0)
        } else {
            0
        },
    )
}

fn srq_qp(d: &mut Dev, pdn: u32, cqs: (u32, u32), i: u64, srqn: u32) -> u32 {
    let (st, qpn) = try_srq_qp(d, pdn, cqs, i, srqn);
    assert_eq!(st, VIRTIO_RDMA_S_OK, "CREATE_QP_RING with an SRQ");
    qpn
}

fn srq_cmd(d: &mut Dev, cmd: u32, srqn: u32, arg: u32, rsp: usize) -> (u8, Vec<u8>) {
    d.cmd(cmd, &pair(srqn, arg), rsp)
}

/// QUERY_SRQ: (max_wr, max_sge, limit).
fn query_srq(d: &mut Dev, srqn: u32) -> (u32, u32, u32) {
    let (st, r) = srq_cmd(d, VIRTIO_RDMA_CMD_QUERY_SRQ, srqn, 0, 16);
    assert_eq!(st, VIRTIO_RDMA_S_OK, "QUERY_SRQ");
    (le32(&r, 0), le32(&r, 4), le32(&r, 8))
}

/// A SEND of `len` bytes at `src`.
fn send(wr_id: u64, src: u64, len: u32, key: u32) -> Vec<u8> {
    wqe(
        wr_id,
        IB_WR_SEND,
        IB_SEND_SIGNALED,
        0,
        &[],
        &[(src, len, key)],
    )
}

/// A device with rings: a PD with a DMA MR, ring CQ 0 for the senders'
/// completions, and `n` responder CQs.
struct Setup {
    d: Dev,
    pd: u32,
    key: u32,
    send_cq: (u32, Ring),
    recv_cqs: Vec<(u32, Ring)>,
}

fn setup(n: u64) -> Setup {
    let mut d = start();
    let pd = d.create_pd();
    let key = d.dma_mr(pd, ALL);
    let send_cq = ring_cq(&mut d, 0, 16, 0);
    let recv_cqs = (0..n).map(|i| ring_cq(&mut d, 1 + i, 16, 1)).collect();
    Setup {
        d,
        pd,
        key,
        send_cq,
        recv_cqs,
    }
}

/// A virtqueue RC sender connected to `dest` (and `dest` to it).
fn sender(s: &mut Setup, dest: u32, rnr_retry: u8) -> u32 {
    let cq = s.send_cq.0;
    let b = s.d.create_qp(s.pd, IB_QPT_RC, cq, false);
    let gid = s.d.gid;
    s.d.rc_up(b, gid, dest, ALL, rnr_retry);
    s.d.rc_up(dest, gid, b, ALL, 0);
    b
}

/// Waits until the event queue has given `n` events.
fn wait_events(d: &mut Dev, n: usize) -> Vec<(u32, u32)> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = Vec::new();
    while got.len() < n {
        got.extend(d.events());
        assert!(Instant::now() < deadline, "events: {got:?}");
        thread::sleep(Duration::from_millis(1));
    }
    got
}

#[test]
fn qps_sharing_an_srq_take_its_receives_in_order() {
    let mut s = setup(2);
    let (srqn, mut r) = srq(&mut s.d, s.pd, 10, 0);
    let cqs: Vec<u32> = s.recv_cqs.iter().map(|c| c.0).collect();
    let a1 = srq_qp(&mut s.d, s.pd, (cqs[0], cqs[0]), 11, srqn);
    let a2 = srq_qp(&mut s.d, s.pd, (cqs[1], cqs[1]), 12, srqn);
    let b1 = sender(&mut s, a1, 0);
    let b2 = sender(&mut s, a2, 0);
    let key = s.key;
    for i in 0..3u64 {
        let elem = recv_elem(100 + i, &[(DATA + 0x1000 * (1 + i), 256, key)]);
        produce(&s.d, &mut r, &elem);
    }
    let msgs: Vec<Vec<u8>> = (0..3).map(|i| pattern(64 + i, i as u8)).collect();
    for (i, m) in msgs.iter().enumerate() {
        s.d.fill(DATA + 0x100 * i as u64, m);
    }
    // b1 -> a1, b2 -> a2, b1 -> a1: each takes the SRQ's next receive.
    for (i, &b) in [b1, b2, b1].iter().enumerate() {
        let len = msgs[i].len() as u32;
        s.d.send(b, &send(i as u64, DATA + 0x100 * i as u64, len, key));
        let c = wait(&s.d, &mut s.send_cq.1, 1);
        assert_eq!(c[0].status, IB_WC_SUCCESS, "send {i}");
    }
    let on1 = wait(&s.d, &mut s.recv_cqs[0].1, 2);
    let on2 = wait(&s.d, &mut s.recv_cqs[1].1, 1);
    let got = |c: &VirtioRdmaCqReq| (c.wr_id.get(), c.qp_num.get(), c.byte_len.get());
    assert_eq!(got(&on1[0]), (100, a1, 64));
    assert_eq!(got(&on2[0]), (101, a2, 65));
    assert_eq!(got(&on1[1]), (102, a1, 66));
    assert!(on1.iter().chain(&on2).all(|c| c.opcode == IB_WC_RECV));
    for (i, m) in msgs.iter().enumerate() {
        assert_eq!(&s.d.read(DATA + 0x1000 * (1 + i as u64), m.len()), m);
    }
    s.d.finish();
}

#[test]
fn the_limit_fires_once_and_reads_0_after() {
    let mut s = setup(1);
    s.d.fill_events(4, 8);
    let (srqn, mut r) = srq(&mut s.d, s.pd, 10, 2);
    assert_eq!(query_srq(&mut s.d, srqn), (8, 1, 2));
    let cq = s.recv_cqs[0].0;
    let a = srq_qp(&mut s.d, s.pd, (cq, cq), 11, srqn);
    let b = sender(&mut s, a, 0);
    let key = s.key;
    for i in 0..3 {
        produce(&s.d, &mut r, &recv_elem(i, &[(DATA + 0x1000, 256, key)]));
    }
    let mut events = Vec::new();
    for i in 0..3 {
        s.d.send(b, &send(i, DATA, 8, key));
        wait(&s.d, &mut s.send_cq.1, 1);
        wait(&s.d, &mut s.recv_cqs[0].1, 1);
        events.push(s.d.events());
    }
    // 2 left: not below; 1 left: below, once; 0 left: disarmed.
    let limit = (VIRTIO_RDMA_EVENT_SRQ_LIMIT_REACHED, srqn);
    assert_eq!(events, vec![vec![], vec![limit], vec![]]);
    assert_eq!(query_srq(&mut s.d, srqn).2, 0, "disarmed");
    let modify = |d: &mut Dev, limit| srq_cmd(d, VIRTIO_RDMA_CMD_MODIFY_SRQ, srqn, limit, 0).0;
    assert_eq!(
        modify(&mut s.d, 8),
        VIRTIO_RDMA_S_INVALID,
        "not below max_wr"
    );
    assert_eq!(modify(&mut s.d, 1), VIRTIO_RDMA_S_OK);
    assert_eq!(query_srq(&mut s.d, srqn).2, 1);
    // Armed again: the next take that leaves fewer than 1 fires.
    produce(&s.d, &mut r, &recv_elem(9, &[(DATA + 0x1000, 256, key)]));
    s.d.send(b, &send(9, DATA, 8, key));
    wait(&s.d, &mut s.recv_cqs[0].1, 1);
    assert_eq!(wait_events(&mut s.d, 1), vec![limit]);
    assert_eq!(
        modify(&mut s.d, 99),
        VIRTIO_RDMA_S_INVALID,
        "nothing changes"
    );
    assert_eq!(
        srq_cmd(&mut s.d, VIRTIO_RDMA_CMD_MODIFY_SRQ, srqn + 1, 0, 0).0,
        VIRTIO_RDMA_S_NOT_FOUND
    );
    s.d.finish();
}

#[test]
fn an_srq_goes_only_after_its_qps_and_with_a_reset() {
    let mut s = setup(1);
    let (srqn, _) = srq(&mut s.d, s.pd, 10, 0);
    let cq = s.recv_cqs[0].0;
    let a = srq_qp(&mut s.d, s.pd, (cq, cq), 11, srqn);
    let destroy = |d: &mut Dev| srq_cmd(d, VIRTIO_RDMA_CMD_DESTROY_SRQ, srqn, 0, 0).0;
    assert_eq!(destroy(&mut s.d), VIRTIO_RDMA_S_BUSY);
    let (st, _) = s.d.cmd(VIRTIO_RDMA_CMD_DESTROY_PD, &pair(s.pd, 0), 0);
    assert_eq!(st, VIRTIO_RDMA_S_BUSY, "the SRQ's PD stays");
    s.d.ok(VIRTIO_RDMA_CMD_DESTROY_QP, &pair(a, 0), 0);
    assert_eq!(destroy(&mut s.d), VIRTIO_RDMA_S_OK);
    assert_eq!(destroy(&mut s.d), VIRTIO_RDMA_S_NOT_FOUND);
    // A device reset destroys SRQs with everything else.
    let pd = s.pd;
    let (srqn, _) = srq(&mut s.d, pd, 10, 0);
    s.d.reset();
    let (st, _) = srq_cmd(&mut s.d, VIRTIO_RDMA_CMD_QUERY_SRQ, srqn, 0, 16);
    assert_eq!(st, VIRTIO_RDMA_S_NOT_FOUND);
    s.d.finish();
}

#[test]
fn srq_and_qp_requests_are_checked() {
    let mut s = setup(1);
    let (pd, cq) = (s.pd, s.recv_cqs[0].0);
    // CREATE_SRQ: unknown PD, sizes, limit, flags.
    assert_eq!(
        try_srq(&mut s.d, pd + 1, 10, 8, 0).0,
        VIRTIO_RDMA_S_NOT_FOUND
    );
    assert_eq!(try_srq(&mut s.d, pd, 10, 0, 0).0, VIRTIO_RDMA_S_INVALID);
    assert_eq!(
        try_srq(&mut s.d, pd, 10, 9, 0).0,
        VIRTIO_RDMA_S_INVALID,
        "depth"
    );
    assert_eq!(
        try_srq(&mut s.d, pd, 10, 8, 8).0,
        VIRTIO_RDMA_S_INVALID,
        "limit"
    );
    let (_, desc) = ring(&s.d, 10, 8, STRIDE);
    let mut req = VirtioRdmaCmdCreateSrq {
        ring: desc,
        pdn: pd.into(),
        max_wr: 8.into(),
        max_sge: 2.into(),
        srq_limit: 0.into(),
        flags: 0.into(),
        reserved: 0.into(),
    };
    let create = |d: &mut Dev, r: &VirtioRdmaCmdCreateSrq| {
        d.cmd(VIRTIO_RDMA_CMD_CREATE_SRQ, r.as_bytes(), 8).0
    };
    assert_eq!(create(&mut s.d, &req), VIRTIO_RDMA_S_INVALID, "stride");
    req.max_sge = 1.into();
    req.flags = 2.into();
    assert_eq!(create(&mut s.d, &req), VIRTIO_RDMA_S_INVALID, "flags");
    req.flags = VIRTIO_RDMA_SRQ_F_USER.into();
    assert_eq!(create(&mut s.d, &req), VIRTIO_RDMA_S_OK);
    let srqn = 1;
    assert_eq!(query_srq(&mut s.d, srqn), (8, 1, 0));
    // CREATE_QP with an srqn: not on GSI, not with an RQ, not unknown.
    let create_qp = |d: &mut Dev, q: &VirtioRdmaCmdCreateQp| {
        d.cmd(VIRTIO_RDMA_CMD_CREATE_QP, q.as_bytes(), 8).0
    };
    let gsi = qp_req(pd, IB_QPT_GSI, cq, cq, srqn);
    assert_eq!(create_qp(&mut s.d, &gsi), VIRTIO_RDMA_S_INVALID, "GSI");
    let mut rq = qp_req(pd, IB_QPT_RC, cq, cq, srqn);
    rq.max_recv_wr = 1.into();
    assert_eq!(create_qp(&mut s.d, &rq), VIRTIO_RDMA_S_INVALID, "RQ");
    rq.max_recv_wr = 0.into();
    rq.max_recv_sge = 1.into();
    assert_eq!(create_qp(&mut s.d, &rq), VIRTIO_RDMA_S_INVALID, "RQ SGEs");
    let unknown = qp_req(pd, IB_QPT_UD, cq, cq, srqn + 1);
    assert_eq!(create_qp(&mut s.d, &unknown), VIRTIO_RDMA_S_NOT_FOUND);
    let ok = qp_req(pd, IB_QPT_UD, cq, cq, srqn);
    assert_eq!(create_qp(&mut s.d, &ok), VIRTIO_RDMA_S_OK, "a virtqueue QP");
    // CREATE_QP_RING with an srqn: its rq must be all zero.
    let (_, sq) = ring(&s.d, 11, 8, 256);
    let (_, rq_desc) = ring(&s.d, 12, 8, 64);
    let req = VirtioRdmaCmdCreateQpRing {
        qp: qp_req(pd, IB_QPT_RC, cq, cq, srqn),
        sq,
        rq: rq_desc,
        flags: 0.into(),
        reserved: 0.into(),
    };
    let (st, _) = s.d.cmd(VIRTIO_RDMA_CMD_CREATE_QP_RING, req.as_bytes(), 8);
    assert_eq!(st, VIRTIO_RDMA_S_INVALID, "an RQ ring");
    assert_eq!(
        try_srq_qp(&mut s.d, pd, (cq, cq), 11, srqn + 1).0,
        VIRTIO_RDMA_S_NOT_FOUND
    );
    assert_eq!(
        try_srq_qp(&mut s.d, pd, (cq, cq), 11, srqn).0,
        VIRTIO_RDMA_S_OK
    );
    s.d.finish();
}

#[test]
fn srq_receives_are_checked_against_the_srqs_pd() {
    let mut s = setup(1);
    // The SRQ is of another PD than the QP: its receives use its keys.
    let srq_pd = s.d.create_pd();
    let srq_key = s.d.dma_mr(srq_pd, ALL);
    let (srqn, mut r) = srq(&mut s.d, srq_pd, 10, 0);
    let cq = s.recv_cqs[0].0;
    let a = srq_qp(&mut s.d, s.pd, (cq, cq), 11, srqn);
    let b = sender(&mut s, a, 0);
    let key = s.key;
    produce(&s.d, &mut r, &recv_elem(1, &[(DATA + 0x1000, 64, srq_key)]));
    produce(&s.d, &mut r, &recv_elem(2, &[(DATA + 0x2000, 64, key)]));
    s.d.send(b, &send(1, DATA, 8, key));
    let c = wait(&s.d, &mut s.recv_cqs[0].1, 1);
    assert_eq!(
        (c[0].wr_id.get(), c[0].status),
        (1, IB_WC_SUCCESS),
        "SRQ's PD"
    );
    assert_eq!(wait(&s.d, &mut s.send_cq.1, 1)[0].status, IB_WC_SUCCESS);
    // The QP's own PD's key is another PD's for the SRQ's receive.
    s.d.send(b, &send(2, DATA, 8, key));
    let c = wait(&s.d, &mut s.recv_cqs[0].1, 1);
    assert_eq!((c[0].wr_id.get(), c[0].status), (2, IB_WC_LOC_PROT_ERR));
    assert_eq!(c[0].qp_num.get(), a);
    assert_eq!(wait(&s.d, &mut s.send_cq.1, 1)[0].status, IB_WC_REM_OP_ERR);
    s.d.finish();
}

/// QUERY_COUNTERS of port 1, counter set `set` (0: the port's own).
fn counters(d: &mut Dev, set: u32) -> Vec<u64> {
    let rsp = d.ok(VIRTIO_RDMA_CMD_QUERY_COUNTERS, &pair(1, set), 152);
    rsp.chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

/// An SRQ's receive counts on the QP that took it: in that QP's counter
/// set if it is bound to one, in the port's if not.
#[test]
fn an_srq_receive_counts_on_the_qp_that_took_it() {
    let mut s = setup(2);
    let srq_pd = s.d.create_pd();
    let srq_key = s.d.dma_mr(srq_pd, ALL);
    let (srqn, mut r) = srq(&mut s.d, srq_pd, 10, 0);
    let cqs: Vec<u32> = s.recv_cqs.iter().map(|c| c.0).collect();
    let a1 = srq_qp(&mut s.d, s.pd, (cqs[0], cqs[0]), 11, srqn);
    let a2 = srq_qp(&mut s.d, s.pd, (cqs[1], cqs[1]), 12, srqn);
    let b1 = sender(&mut s, a1, 0);
    let b2 = sender(&mut s, a2, 0);
    let set = le32(
        &s.d.ok(VIRTIO_RDMA_CMD_ALLOC_COUNTER_SET, &pair(1, 0), 8),
        0,
    );
    s.d.ok(VIRTIO_RDMA_CMD_BIND_COUNTER_SET, &pair(a1, set), 0);
    let key = s.key;
    // The first receive names a key of the QPs' PD, not the SRQ's: the
    // message a1 takes it for fails there.
    produce(&s.d, &mut r, &recv_elem(1, &[(DATA + 0x1000, 64, key)]));
    produce(&s.d, &mut r, &recv_elem(2, &[(DATA + 0x2000, 64, srq_key)]));
    s.d.send(b1, &send(1, DATA, 8, key));
    let c = wait(&s.d, &mut s.recv_cqs[0].1, 1);
    assert_eq!((c[0].qp_num.get(), c[0].status), (a1, IB_WC_LOC_PROT_ERR));
    assert_eq!(wait(&s.d, &mut s.send_cq.1, 1)[0].status, IB_WC_REM_OP_ERR);
    s.d.send(b2, &send(2, DATA, 8, key));
    let c = wait(&s.d, &mut s.recv_cqs[1].1, 1);
    assert_eq!((c[0].qp_num.get(), c[0].status), (a2, IB_WC_SUCCESS));
    assert_eq!(wait(&s.d, &mut s.send_cq.1, 1)[0].status, IB_WC_SUCCESS);
    let (v, port) = (counters(&mut s.d, set), counters(&mut s.d, 0));
    assert_eq!(v[VIRTIO_RDMA_CNT_RCVD_PKTS], 1, "{v:?}");
    assert_eq!(v[VIRTIO_RDMA_CNT_RCVD_BYTES], 8, "{v:?}");
    assert_eq!(v[VIRTIO_RDMA_CNT_LOC_PROT_ERR], 1, "{v:?}");
    assert_eq!(v.iter().sum::<u64>(), 1 + 8 + 1, "{v:?}");
    // a2's receive, and both unbound senders, are the port's.
    assert_eq!(port[VIRTIO_RDMA_CNT_RCVD_PKTS], 1, "{port:?}");
    assert_eq!(port[VIRTIO_RDMA_CNT_SENT_PKTS], 2, "{port:?}");
    assert_eq!(port[VIRTIO_RDMA_CNT_REM_OP_ERR], 1, "{port:?}");
    assert_eq!(port[VIRTIO_RDMA_CNT_LOC_PROT_ERR], 0, "{port:?}");
    s.d.finish();
}

#[test]
fn a_qp_with_an_srq_entering_err_reports_its_last_wqe_once() {
    let mut s = setup(2);
    s.d.fill_events(4, 8);
    let (srqn, mut r) = srq(&mut s.d, s.pd, 10, 0);
    let cqs: Vec<u32> = s.recv_cqs.iter().map(|c| c.0).collect();
    let a1 = srq_qp(&mut s.d, s.pd, (cqs[0], cqs[0]), 11, srqn);
    let a2 = srq_qp(&mut s.d, s.pd, (cqs[1], cqs[1]), 12, srqn);
    let b2 = sender(&mut s, a2, 0);
    let key = s.key;
    produce(&s.d, &mut r, &recv_elem(7, &[(DATA + 0x1000, 64, key)]));
    s.d.move_to_err(a1);
    assert_eq!(
        wait_events(&mut s.d, 1),
        vec![(VIRTIO_RDMA_EVENT_QP_LAST_WQE_REACHED, a1)]
    );
    s.d.move_to_err(a1);
    thread::sleep(Duration::from_millis(50));
    assert_eq!(s.d.events(), vec![], "once");
    assert!(
        take(&s.d, &mut s.recv_cqs[0].1).is_empty(),
        "nothing flushed"
    );
    // The receive stayed for the SRQ's other QP.
    s.d.send(b2, &send(1, DATA, 8, key));
    let c = wait(&s.d, &mut s.recv_cqs[1].1, 1);
    assert_eq!((c[0].wr_id.get(), c[0].qp_num.get()), (7, a2));
    s.d.finish();
}

#[test]
fn a_post_to_the_srq_resumes_a_sender_stalled_on_rnr() {
    let mut s = setup(1);
    let (srqn, mut r) = srq(&mut s.d, s.pd, 10, 0);
    let cq = s.recv_cqs[0].0;
    let a = srq_qp(&mut s.d, s.pd, (cq, cq), 11, srqn);
    let b = sender(&mut s, a, 7);
    // The responder's RNR timer: 655 ms, far beyond what a woken sender
    // takes.
    let mut attr = VirtioRdmaQpAttr::new_zeroed();
    attr.min_rnr_timer = 0;
    assert_eq!(s.d.modify(a, IB_QP_MIN_RNR_TIMER, attr), VIRTIO_RDMA_S_OK);
    let key = s.key;
    // Each round stalls a send, then posts its receive. A sender only the
    // timer wakes takes at least 555 ms from the post; a busy machine may
    // make one woken sender slow, not three in a row.
    let mut took = Vec::new();
    for round in 0..3u64 {
        s.d.send(b, &send(5 + round, DATA, 8, key));
        // Stalled, and the device idle long enough to ask for doorbells.
        thread::sleep(Duration::from_millis(100));
        assert!(take(&s.d, &mut s.send_cq.1).is_empty(), "no receive yet");
        let posted = Instant::now();
        produce(
            &s.d,
            &mut r,
            &recv_elem(100 + round, &[(DATA + 0x1000, 64, key)]),
        );
        let c = wait(&s.d, &mut s.send_cq.1, 1);
        took.push(posted.elapsed());
        assert_eq!((c[0].wr_id.get(), c[0].status), (5 + round, IB_WC_SUCCESS));
        let got = wait(&s.d, &mut s.recv_cqs[0].1, 1);
        assert_eq!(got[0].wr_id.get(), 100 + round);
        if took.last().is_some_and(|t| *t < Duration::from_millis(300)) {
            break;
        }
    }
    assert!(
        took.iter().any(|t| *t < Duration::from_millis(300)),
        "woken by the post, not by the RNR timer ({took:?})"
    );
    s.d.finish();
}

#[test]
fn srq_commands_need_the_rings() {
    let mut d = Dev::start_without(
        MEM_SIZE,
        |l| {
            l.with_rings(Some(Rings::new(16, 8, 2, POLL_US).expect("rings")))
                .expect("limits")
        },
        1 << VIRTIO_RDMA_F_RINGS,
    );
    let pd = d.create_pd();
    assert_eq!(try_srq(&mut d, pd, 10, 8, 0).0, VIRTIO_RDMA_S_UNSUPPORTED);
    for cmd in [
        VIRTIO_RDMA_CMD_MODIFY_SRQ,
        VIRTIO_RDMA_CMD_QUERY_SRQ,
        VIRTIO_RDMA_CMD_DESTROY_SRQ,
    ] {
        assert_eq!(d.cmd(cmd, &pair(1, 0), 16).0, VIRTIO_RDMA_S_UNSUPPORTED);
    }
    let cfg = d.dev.ctrl().limits().config();
    let caps = (
        cfg.max_srq.get(),
        cfg.max_srq_wr.get(),
        cfg.max_srq_sge.get(),
    );
    // An SRQ is a ring, so its depth is the rings' bound, not the queues'.
    assert_eq!(caps, (1024, 32768, 32), "offered");
    d.finish();
    let d = Dev::start();
    let cfg = d.dev.ctrl().limits().config();
    let caps = (
        cfg.max_srq.get(),
        cfg.max_srq_wr.get(),
        cfg.max_srq_sge.get(),
    );
    assert_eq!(caps, (0, 0, 0), "not offered without rings");
    d.finish();
}
