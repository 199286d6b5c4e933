// SPDX-License-Identifier: GPL-2.0
//! XRC, driven over a real vhost-user socket: domains, XRC SRQs reporting
//! to their own CQ, an XRC_INI QP's messages reaching the XRC SRQ each
//! names through its XRC_TGT peer (rkeys and receives of the SRQ's PD,
//! completions naming the target), the requests that fail with
//! REM_INV_REQ_ERR and move nothing, RNR, what the commands refuse, and
//! where the target's work counts.

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
/// Where the target side's memory (what its SRQ's keys reach) lies.
const TGT_DATA: u64 = DATA + 0x10_0000;

/// ALLOC_XRCD: (status, xrcdn).
fn try_alloc_xrcd(d: &mut Dev) -> (u8, u32) {
    let (st, rsp) = d.cmd(VIRTIO_RDMA_CMD_ALLOC_XRCD, &[], 8);
    (
        st,
        if st == VIRTIO_RDMA_S_OK {
            le32(&rsp, 0)
        } else {
            0
        },
    )
}

fn alloc_xrcd(d: &mut Dev) -> u32 {
    let (st, n) = try_alloc_xrcd(d);
    assert_eq!(st, VIRTIO_RDMA_S_OK, "ALLOC_XRCD");
    n
}

/// CREATE_SRQ's request for an SRQ of 8 one-SGE receives on ring `i`.
fn srq_req(d: &Dev, pdn: u32, i: u64, limit: u32) -> (VirtioRdmaCmdCreateSrq, Ring) {
    let (r, desc) = ring(d, i, 8, STRIDE);
    let req = VirtioRdmaCmdCreateSrq {
        ring: desc,
        pdn: pdn.into(),
        max_wr: 8.into(),
        max_sge: 1.into(),
        srq_limit: limit.into(),
        flags: 0.into(),
        reserved: 0.into(),
    };
    (req, r)
}

/// CREATE_XRC_SRQ of domain `xrcdn` reporting to `cqn`: (status, srqn, ring).
fn try_xrc_srq(d: &mut Dev, pdn: u32, xrcdn: u32, cqn: u32, i: u64) -> (u8, u32, Ring) {
    let (srq, r) = srq_req(d, pdn, i, 0);
    xrc_srq_of(d, srq, xrcdn, cqn, r)
}

fn xrc_srq_of(
    d: &mut Dev,
    srq: VirtioRdmaCmdCreateSrq,
    xrcdn: u32,
    cqn: u32,
    r: Ring,
) -> (u8, u32, Ring) {
    let req = VirtioRdmaCmdCreateXrcSrq {
        srq,
        xrcdn: xrcdn.into(),
        cqn: cqn.into(),
    };
    let (st, rsp) = d.cmd(VIRTIO_RDMA_CMD_CREATE_XRC_SRQ, req.as_bytes(), 8);
    let srqn = if st == VIRTIO_RDMA_S_OK {
        le32(&rsp, 0)
    } else {
        0
    };
    (st, srqn, r)
}

/// CREATE_XRC_TGT_QP: (status, qpn).
fn try_tgt(d: &mut Dev, xrcdn: u32) -> (u8, u32) {
    let (st, rsp) = d.cmd(VIRTIO_RDMA_CMD_CREATE_XRC_TGT_QP, &pair(xrcdn, 0), 8);
    (
        st,
        if st == VIRTIO_RDMA_S_OK {
            le32(&rsp, 0)
        } else {
            0
        },
    )
}

/// An XRC_INI QP's CREATE_QP request.
fn ini_req(pdn: u32, send_cq: u32) -> VirtioRdmaCmdCreateQp {
    let mut q = VirtioRdmaCmdCreateQp::new_zeroed();
    q.pdn = pdn.into();
    q.qp_type = IB_QPT_XRC_INI;
    q.max_send_wr = 8.into();
    q.max_send_sge = 1.into();
    q.send_cqn = send_cq.into();
    q
}

/// CREATE_QP_RING of `q` with its SQ on ring `i`: (status, qpn, SQ ring).
fn try_ring_qp(d: &mut Dev, q: VirtioRdmaCmdCreateQp, i: u64) -> (u8, u32, Ring) {
    let (r, sq) = ring(d, i, 8, 256);
    let req = VirtioRdmaCmdCreateQpRing {
        qp: q,
        sq,
        rq: VirtioRdmaRing::new_zeroed(),
        flags: 0.into(),
        reserved: 0.into(),
    };
    let (st, rsp) = d.cmd(VIRTIO_RDMA_CMD_CREATE_QP_RING, req.as_bytes(), 8);
    let qpn = if st == VIRTIO_RDMA_S_OK {
        le32(&rsp, 0)
    } else {
        0
    };
    (st, qpn, r)
}

/// The kernel's masks for XRC (`qp_state_table`): an initiator takes no
/// responder attributes, a target no requester ones.
fn xrc_up(d: &mut Dev, qpn: u32, dest: u32, target: bool, rnr_retry: u8, rnr_timer: u8) {
    let mut a = VirtioRdmaQpAttr::new_zeroed();
    a.qp_state = IB_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = ALL.into();
    let init = IB_QP_STATE | IB_QP_PORT | IB_QP_PKEY_INDEX | IB_QP_ACCESS_FLAGS;
    assert_eq!(d.modify(qpn, init, a), VIRTIO_RDMA_S_OK, "INIT");
    a.qp_state = IB_QPS_RTR;
    a.path_mtu = 3;
    a.dest_qp_num = dest.into();
    a.ah_attr.dgid = d.gid;
    a.ah_attr.port_num = 1;
    a.min_rnr_timer = rnr_timer;
    let path = IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU | IB_QP_DEST_QPN | IB_QP_RQ_PSN;
    let responder = IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER;
    let rtr = if target { path | responder } else { path };
    assert_eq!(d.modify(qpn, rtr, a), VIRTIO_RDMA_S_OK, "RTR");
    a.qp_state = IB_QPS_RTS;
    // About 4 ms per unanswered try (as `Dev::rc_up`).
    a.timeout = 10;
    a.retry_cnt = 7;
    a.rnr_retry = rnr_retry;
    let requester = IB_QP_RETRY_CNT | IB_QP_RNR_RETRY | IB_QP_MAX_QP_RD_ATOMIC;
    let rts = IB_QP_STATE | IB_QP_TIMEOUT | IB_QP_SQ_PSN;
    let rts = if target { rts } else { rts | requester };
    assert_eq!(d.modify(qpn, rts, a), VIRTIO_RDMA_S_OK, "RTS");
}

/// `wr` of an XRC_INI QP's request: the operation's part, then `srqn`.
fn xrc_wr(op: &[u8], srqn: u32) -> Vec<u8> {
    let mut x = VirtioRdmaSqXrc::new_zeroed();
    x.op[..op.len()].copy_from_slice(op);
    x.remote_srqn = srqn.into();
    x.as_bytes().to_vec()
}

/// A signaled SEND of `len` bytes at `src` for SRQ `srqn`.
fn send(wr_id: u64, srqn: u32, src: u64, len: u32, key: u32) -> Vec<u8> {
    let wr = xrc_wr(&[], srqn);
    wqe(
        wr_id,
        IB_WR_SEND,
        IB_SEND_SIGNALED,
        0,
        &wr,
        &[(src, len, key)],
    )
}

/// A signaled RDMA op of `len` bytes between `local` and `remote` for
/// SRQ `srqn`.
fn rdma_op(op: u8, srqn: u32, local: (u64, u32), remote: (u64, u32), len: u32) -> Vec<u8> {
    let wr = xrc_wr(&rdma(remote.0, remote.1), srqn);
    wqe(7, op, IB_SEND_SIGNALED, 0, &wr, &[(local.0, len, local.1)])
}

/// QUERY_COUNTERS of port 1, counter set `set` (0: the port's own).
fn counters(d: &mut Dev, set: u32) -> Vec<u64> {
    let rsp = d.ok(VIRTIO_RDMA_CMD_QUERY_COUNTERS, &pair(1, set), 152);
    rsp.chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
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

/// A device with XRC: the initiator side's PD (with a DMA MR), the target
/// side's PD (with a DMA MR: the XRC SRQ's), a domain, a ring CQ for the
/// initiator and one for the XRC SRQ, the SRQ, and an XRC_INI QP
/// connected to an XRC_TGT QP of the domain.
struct Xrc {
    d: Dev,
    pd: u32,
    key: u32,
    srq_pd: u32,
    srq_key: u32,
    xrcd: u32,
    send_cq: (u32, Ring),
    srq_cq: (u32, Ring),
    srqn: u32,
    srq: Ring,
    ini: u32,
    sq: Ring,
    tgt: u32,
}

fn setup(rnr_retry: u8) -> Xrc {
    let mut d = start();
    let pd = d.create_pd();
    let key = d.dma_mr(pd, ALL);
    let srq_pd = d.create_pd();
    let srq_key = d.dma_mr(srq_pd, ALL);
    let xrcd = alloc_xrcd(&mut d);
    let send_cq = ring_cq(&mut d, 0, 16, 0);
    let srq_cq = ring_cq(&mut d, 1, 16, 1);
    let (st, srqn, srq) = try_xrc_srq(&mut d, srq_pd, xrcd, srq_cq.0, 2);
    assert_eq!(st, VIRTIO_RDMA_S_OK, "CREATE_XRC_SRQ");
    let (st, tgt) = try_tgt(&mut d, xrcd);
    assert_eq!(st, VIRTIO_RDMA_S_OK, "CREATE_XRC_TGT_QP");
    let (st, ini, sq) = try_ring_qp(&mut d, ini_req(pd, send_cq.0), 3);
    assert_eq!(st, VIRTIO_RDMA_S_OK, "CREATE_QP_RING of an XRC_INI QP");
    xrc_up(&mut d, tgt, ini, true, 0, 1);
    xrc_up(&mut d, ini, tgt, false, rnr_retry, 0);
    Xrc {
        d,
        pd,
        key,
        srq_pd,
        srq_key,
        xrcd,
        send_cq,
        srq_cq,
        srqn,
        srq,
        ini,
        sq,
        tgt,
    }
}

impl Xrc {
    /// Posts `elem` on the initiator's SQ.
    fn post(&mut self, elem: &[u8]) {
        produce(&self.d, &mut self.sq, elem);
    }

    /// Posts a receive into the XRC SRQ, `len` bytes at `addr` of `key`.
    fn recv(&mut self, wr_id: u64, addr: u64, len: u32, key: u32) {
        produce(
            &self.d,
            &mut self.srq,
            &recv_elem(wr_id, &[(addr, len, key)]),
        );
    }

    /// The initiator's next completion: (wr_id, status).
    fn sent(&mut self) -> (u64, u8) {
        let c = wait(&self.d, &mut self.send_cq.1, 1);
        (c[0].wr_id.get(), c[0].status)
    }
}

#[test]
fn an_ini_send_takes_the_named_xrc_srqs_receive_and_completes_on_its_cq() {
    let mut x = setup(0);
    x.d.fill_events(4, 8);
    // Limit 2: the take that leaves 1 fires it, as for any SRQ.
    let m = VirtioRdmaCmdModifySrq {
        srqn: x.srqn.into(),
        srq_limit: 2.into(),
    };
    x.d.ok(VIRTIO_RDMA_CMD_MODIFY_SRQ, m.as_bytes(), 0);
    let msg = pattern(100, 3);
    x.d.fill(DATA, &msg);
    let srq_key = x.srq_key;
    x.recv(41, TGT_DATA, 256, srq_key);
    x.recv(42, TGT_DATA + 0x1000, 256, srq_key);
    let (key, srqn) = (x.key, x.srqn);
    x.post(&send(1, srqn, DATA, 100, key));
    assert_eq!(x.sent(), (1, IB_WC_SUCCESS));
    let c = wait(&x.d, &mut x.srq_cq.1, 1);
    let got = (c[0].wr_id.get(), c[0].status, c[0].opcode);
    assert_eq!(got, (41, IB_WC_SUCCESS, IB_WC_RECV));
    assert_eq!(c[0].qp_num.get(), x.tgt, "names the target QP");
    assert_eq!((c[0].src_qp.get(), c[0].byte_len.get()), (x.ini, 100));
    assert_eq!(x.d.read(TGT_DATA, 100), msg);
    assert_eq!(
        wait_events(&mut x.d, 1),
        vec![(VIRTIO_RDMA_EVENT_SRQ_LIMIT_REACHED, srqn)]
    );
    assert!(take(&x.d, &mut x.send_cq.1).is_empty(), "nothing else");
    x.d.finish();
}

/// A message larger than a chunk fills the receive it took, held by the
/// target between chunks, and completes on the SRQ's CQ.
#[test]
fn a_large_send_moves_in_chunks_into_the_xrc_srqs_receive() {
    let mut x = setup(0);
    let len = 300 << 10;
    let msg = pattern(len, 7);
    x.d.fill(DATA, &msg);
    let (key, srq_key, srqn) = (x.key, x.srq_key, x.srqn);
    x.recv(3, TGT_DATA, len as u32, srq_key);
    x.post(&send(1, srqn, DATA, len as u32, key));
    assert_eq!(x.sent(), (1, IB_WC_SUCCESS));
    let c = wait(&x.d, &mut x.srq_cq.1, 1);
    let got = (c[0].wr_id.get(), c[0].status, c[0].qp_num.get());
    assert_eq!(got, (3, IB_WC_SUCCESS, x.tgt));
    assert_eq!(c[0].byte_len.get(), len as u32);
    assert!(x.d.read(TGT_DATA, len) == msg, "the whole message");
    x.d.finish();
}

#[test]
fn rkeys_and_receives_are_those_of_the_xrc_srqs_pd() {
    let mut x = setup(0);
    let (key, srq_key, srqn) = (x.key, x.srq_key, x.srqn);
    let msg = pattern(64, 9);
    x.d.fill(DATA, &msg);
    // WRITE and READ with the SRQ's PD's rkey.
    x.post(&rdma_op(
        IB_WR_RDMA_WRITE,
        srqn,
        (DATA, key),
        (TGT_DATA, srq_key),
        64,
    ));
    assert_eq!(x.sent(), (7, IB_WC_SUCCESS));
    assert_eq!(x.d.read(TGT_DATA, 64), msg);
    x.d.fill(TGT_DATA + 0x100, &pattern(32, 1));
    x.post(&rdma_op(
        IB_WR_RDMA_READ,
        srqn,
        (DATA + 0x800, key),
        (TGT_DATA + 0x100, srq_key),
        32,
    ));
    assert_eq!(x.sent(), (7, IB_WC_SUCCESS));
    assert_eq!(x.d.read(DATA + 0x800, 32), pattern(32, 1));
    // A receive naming another PD's key fails at the target.
    x.recv(5, TGT_DATA + 0x2000, 64, key);
    x.post(&send(2, srqn, DATA, 8, key));
    assert_eq!(x.sent(), (2, IB_WC_REM_OP_ERR));
    let c = wait(&x.d, &mut x.srq_cq.1, 1);
    assert_eq!((c[0].wr_id.get(), c[0].status), (5, IB_WC_LOC_PROT_ERR));
    assert_eq!(c[0].qp_num.get(), x.tgt);
    // An rkey of the initiator's PD is another PD's for the target.
    let mut y = setup(0);
    let (key, srqn) = (y.key, y.srqn);
    y.d.fill(TGT_DATA, &[0xee; 16]);
    y.post(&rdma_op(
        IB_WR_RDMA_WRITE,
        srqn,
        (DATA, key),
        (TGT_DATA, key),
        16,
    ));
    assert_eq!(y.sent(), (7, IB_WC_REM_ACCESS_ERR));
    assert_eq!(y.d.read(TGT_DATA, 16), vec![0xee; 16], "nothing written");
    assert_eq!(y.d.qp_state(y.tgt), IB_QPS_ERR);
    x.d.finish();
    y.d.finish();
}

#[test]
fn a_request_naming_no_xrc_srq_of_the_targets_domain_fails_and_moves_nothing() {
    let mut x = setup(0);
    let (key, srq_key) = (x.key, x.srq_key);
    // A basic SRQ and an XRC SRQ of another domain, each with a receive.
    let (basic_req, mut basic_ring) = srq_req(&x.d, x.srq_pd, 4, 0);
    let rsp = x.d.ok(VIRTIO_RDMA_CMD_CREATE_SRQ, basic_req.as_bytes(), 8);
    let basic = le32(&rsp, 0);
    let other_xrcd = alloc_xrcd(&mut x.d);
    let cq = x.srq_cq.0;
    let (st, other, mut other_ring) = try_xrc_srq(&mut x.d, x.srq_pd, other_xrcd, cq, 5);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    let elem = recv_elem(9, &[(TGT_DATA, 64, srq_key)]);
    produce(&x.d, &mut basic_ring, &elem);
    produce(&x.d, &mut other_ring, &elem);
    x.recv(10, TGT_DATA, 64, srq_key);
    // One destroyed, naming it afterwards.
    let (st, gone, _) = try_xrc_srq(&mut x.d, x.srq_pd, x.xrcd, cq, 6);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    x.d.ok(VIRTIO_RDMA_CMD_DESTROY_SRQ, &pair(gone, 0), 0);
    x.d.fill(TGT_DATA, &[0x5a; 64]);
    x.d.fill(DATA, &[1; 64]);
    let tgt = x.tgt;
    for (i, bad) in [basic, other, gone, 999].into_iter().enumerate() {
        // A fresh initiator each time: the failure moves it to ERR.
        let (st, ini, mut sq) = try_ring_qp(&mut x.d, ini_req(x.pd, x.send_cq.0), 7 + i as u64);
        assert_eq!(st, VIRTIO_RDMA_S_OK);
        x.d.move_to_err(tgt);
        let mut a = VirtioRdmaQpAttr::new_zeroed();
        a.qp_state = IB_QPS_RESET;
        assert_eq!(x.d.modify(tgt, IB_QP_STATE, a), VIRTIO_RDMA_S_OK);
        xrc_up(&mut x.d, tgt, ini, true, 0, 1);
        xrc_up(&mut x.d, ini, tgt, false, 0, 0);
        let op = if i % 2 == 0 {
            send(i as u64, bad, DATA, 64, key)
        } else {
            rdma_op(IB_WR_RDMA_WRITE, bad, (DATA, key), (TGT_DATA, srq_key), 64)
        };
        produce(&x.d, &mut sq, &op);
        let c = wait(&x.d, &mut x.send_cq.1, 1);
        assert_eq!(c[0].status, IB_WC_REM_INV_REQ_ERR, "srqn {bad}");
        assert_eq!(x.d.qp_state(ini), IB_QPS_ERR, "srqn {bad}");
        assert_eq!(x.d.qp_state(tgt), IB_QPS_RTS, "the target goes on");
    }
    thread::sleep(Duration::from_millis(50));
    assert!(take(&x.d, &mut x.srq_cq.1).is_empty(), "no receive taken");
    assert_eq!(x.d.read(TGT_DATA, 64), vec![0x5a; 64], "nothing written");
    // The receives are all still there: the good SRQ's serves a message.
    let (st, ini, mut sq) = try_ring_qp(&mut x.d, ini_req(x.pd, x.send_cq.0), 12);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    x.d.move_to_err(tgt);
    let mut a = VirtioRdmaQpAttr::new_zeroed();
    a.qp_state = IB_QPS_RESET;
    assert_eq!(x.d.modify(tgt, IB_QP_STATE, a), VIRTIO_RDMA_S_OK);
    xrc_up(&mut x.d, tgt, ini, true, 0, 1);
    xrc_up(&mut x.d, ini, tgt, false, 0, 0);
    produce(&x.d, &mut sq, &send(20, x.srqn, DATA, 8, key));
    assert_eq!(wait(&x.d, &mut x.send_cq.1, 1)[0].status, IB_WC_SUCCESS);
    assert_eq!(wait(&x.d, &mut x.srq_cq.1, 1)[0].wr_id.get(), 10);
    x.d.finish();
}

#[test]
fn a_target_answers_only_its_connected_initiator() {
    let mut x = setup(0);
    let (key, srq_key, srqn) = (x.key, x.srq_key, x.srqn);
    x.recv(1, TGT_DATA, 64, srq_key);
    // A second initiator whose path names the target, which is not
    // connected to it.
    let (st, stranger, mut sq) = try_ring_qp(&mut x.d, ini_req(x.pd, x.send_cq.0), 4);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    xrc_up(&mut x.d, stranger, x.tgt, false, 0, 0);
    let before = counters(&mut x.d, 0)[VIRTIO_RDMA_CNT_DROPPED_NOT_PEER];
    produce(&x.d, &mut sq, &send(3, srqn, DATA, 8, key));
    let c = wait(&x.d, &mut x.send_cq.1, 1);
    assert_eq!((c[0].wr_id.get(), c[0].status), (3, IB_WC_RETRY_EXC_ERR));
    let after = counters(&mut x.d, 0)[VIRTIO_RDMA_CNT_DROPPED_NOT_PEER];
    // Sent once and at each of its 7 timeouts: dropped and counted each time.
    assert_eq!(after, before + 8, "dropped and counted as for RC");
    // An RC QP is of another transport: nothing answers it either.
    let rc = x.d.create_qp(x.pd, IB_QPT_RC, x.send_cq.0, true);
    let (gid, tgt) = (x.d.gid, x.tgt);
    x.d.rc_up(rc, gid, tgt, ALL, 0);
    x.d.send(rc, &send(4, srqn, DATA, 8, key));
    let c = wait(&x.d, &mut x.send_cq.1, 1);
    assert_eq!((c[0].wr_id.get(), c[0].status), (4, IB_WC_RETRY_EXC_ERR));
    thread::sleep(Duration::from_millis(50));
    assert!(take(&x.d, &mut x.srq_cq.1).is_empty(), "no receive taken");
    // Its own initiator takes the receive.
    x.post(&send(5, srqn, DATA, 8, key));
    assert_eq!(x.sent(), (5, IB_WC_SUCCESS));
    assert_eq!(wait(&x.d, &mut x.srq_cq.1, 1)[0].wr_id.get(), 1);
    x.d.finish();
}

#[test]
fn an_empty_xrc_srq_rnr_naks_and_a_post_to_it_resumes_the_initiator() {
    let mut x = setup(7);
    // The target's RNR timer: 655 ms, far beyond what a woken sender takes.
    let mut attr = VirtioRdmaQpAttr::new_zeroed();
    attr.min_rnr_timer = 0;
    let tgt = x.tgt;
    assert_eq!(x.d.modify(tgt, IB_QP_MIN_RNR_TIMER, attr), VIRTIO_RDMA_S_OK);
    let (key, srq_key, srqn) = (x.key, x.srq_key, x.srqn);
    let mut took = Vec::new();
    for round in 0..3u64 {
        x.post(&send(5 + round, srqn, DATA, 8, key));
        thread::sleep(Duration::from_millis(100));
        assert!(take(&x.d, &mut x.send_cq.1).is_empty(), "no receive yet");
        let naks = counters(&mut x.d, 0)[VIRTIO_RDMA_CNT_RNR_NAKS_SENT];
        assert!(naks > round, "RNR NAK'd ({naks})");
        let posted = Instant::now();
        x.recv(100 + round, TGT_DATA, 64, srq_key);
        assert_eq!(x.sent(), (5 + round, IB_WC_SUCCESS));
        took.push(posted.elapsed());
        let c = wait(&x.d, &mut x.srq_cq.1, 1);
        assert_eq!((c[0].wr_id.get(), c[0].qp_num.get()), (100 + round, tgt));
        if took.last().is_some_and(|t| *t < Duration::from_millis(300)) {
            break;
        }
    }
    assert!(
        took.iter().any(|t| *t < Duration::from_millis(300)),
        "woken by the post, not by the RNR timer ({took:?})"
    );
    x.d.finish();
}

#[test]
fn a_target_in_err_takes_nothing_and_reports_no_last_wqe() {
    let mut x = setup(0);
    x.d.fill_events(4, 8);
    let (key, srq_key, srqn, tgt) = (x.key, x.srq_key, x.srqn, x.tgt);
    x.recv(1, TGT_DATA, 64, srq_key);
    x.d.move_to_err(tgt);
    x.post(&send(2, srqn, DATA, 8, key));
    assert_eq!(x.sent(), (2, IB_WC_RETRY_EXC_ERR));
    thread::sleep(Duration::from_millis(50));
    assert_eq!(x.d.events(), vec![], "no LAST_WQE_REACHED");
    assert!(take(&x.d, &mut x.srq_cq.1).is_empty(), "nothing taken");
    x.d.finish();
}

#[test]
fn what_a_target_does_counts_in_its_counter_set() {
    let mut x = setup(0);
    let (key, srq_key, srqn, tgt) = (x.key, x.srq_key, x.srqn, x.tgt);
    let set = le32(
        &x.d.ok(VIRTIO_RDMA_CMD_ALLOC_COUNTER_SET, &pair(1, 0), 8),
        0,
    );
    x.d.ok(VIRTIO_RDMA_CMD_BIND_COUNTER_SET, &pair(tgt, set), 0);
    x.recv(1, TGT_DATA, 64, srq_key);
    x.recv(2, TGT_DATA, 64, key);
    x.post(&send(1, srqn, DATA, 8, key));
    assert_eq!(x.sent(), (1, IB_WC_SUCCESS));
    x.post(&send(2, srqn, DATA, 8, key));
    assert_eq!(x.sent(), (2, IB_WC_REM_OP_ERR));
    wait(&x.d, &mut x.srq_cq.1, 2);
    let (v, port) = (counters(&mut x.d, set), counters(&mut x.d, 0));
    assert_eq!(v[VIRTIO_RDMA_CNT_RCVD_PKTS], 2, "{v:?}");
    assert_eq!(v[VIRTIO_RDMA_CNT_RCVD_BYTES], 16, "{v:?}");
    assert_eq!(v[VIRTIO_RDMA_CNT_LOC_PROT_ERR], 1, "{v:?}");
    assert_eq!(v.iter().sum::<u64>(), 2 + 16 + 1, "{v:?}");
    assert_eq!(port[VIRTIO_RDMA_CNT_SENT_PKTS], 2, "the initiator's");
    assert_eq!(port[VIRTIO_RDMA_CNT_RCVD_PKTS], 0, "{port:?}");
    assert_eq!(port[VIRTIO_RDMA_CNT_LOC_PROT_ERR], 0, "{port:?}");
    x.d.finish();
}

#[test]
fn a_domain_goes_only_after_its_xrc_srqs_and_targets() {
    let mut x = setup(0);
    let dealloc = |d: &mut Dev, n: u32| d.cmd(VIRTIO_RDMA_CMD_DEALLOC_XRCD, &pair(n, 0), 0).0;
    assert_eq!(x.xrcd, 1, "numbered from 1");
    assert_eq!(dealloc(&mut x.d, 99), VIRTIO_RDMA_S_NOT_FOUND);
    assert_eq!(dealloc(&mut x.d, x.xrcd), VIRTIO_RDMA_S_BUSY);
    // An XRC SRQ goes while its domain's target is connected.
    let srqn = x.srqn;
    x.d.ok(VIRTIO_RDMA_CMD_DESTROY_SRQ, &pair(srqn, 0), 0);
    assert_eq!(
        dealloc(&mut x.d, x.xrcd),
        VIRTIO_RDMA_S_BUSY,
        "the target QP"
    );
    let (ini, tgt) = (x.ini, x.tgt);
    x.d.ok(VIRTIO_RDMA_CMD_DESTROY_QP, &pair(tgt, 0), 0);
    x.d.ok(VIRTIO_RDMA_CMD_DESTROY_QP, &pair(ini, 0), 0);
    assert_eq!(dealloc(&mut x.d, x.xrcd), VIRTIO_RDMA_S_OK);
    assert_eq!(dealloc(&mut x.d, x.xrcd), VIRTIO_RDMA_S_NOT_FOUND);
    // BUSY with only an XRC SRQ of it.
    let n = alloc_xrcd(&mut x.d);
    let cq = x.srq_cq.0;
    let (st, srqn, _) = try_xrc_srq(&mut x.d, x.srq_pd, n, cq, 4);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    assert_eq!(dealloc(&mut x.d, n), VIRTIO_RDMA_S_BUSY, "the XRC SRQ");
    x.d.ok(VIRTIO_RDMA_CMD_DESTROY_SRQ, &pair(srqn, 0), 0);
    assert_eq!(dealloc(&mut x.d, n), VIRTIO_RDMA_S_OK);
    x.d.finish();
}

#[test]
fn xrc_srq_requests_are_checked_and_hold_their_cq() {
    let mut x = setup(0);
    let (pd, xrcd, cq) = (x.srq_pd, x.xrcd, x.srq_cq.0);
    let vq_cq = x.d.create_cq(4);
    let create = |d: &mut Dev, xrcd, cq| try_xrc_srq(d, pd, xrcd, cq, 4).0;
    assert_eq!(create(&mut x.d, xrcd + 5, cq), VIRTIO_RDMA_S_NOT_FOUND);
    assert_eq!(create(&mut x.d, xrcd, 999), VIRTIO_RDMA_S_NOT_FOUND);
    assert_eq!(create(&mut x.d, xrcd, vq_cq), VIRTIO_RDMA_S_INVALID);
    // CREATE_SRQ's own checks.
    let (mut srq, r) = srq_req(&x.d, pd + 9, 4, 0);
    assert_eq!(
        xrc_srq_of(&mut x.d, srq, xrcd, cq, r).0,
        VIRTIO_RDMA_S_NOT_FOUND
    );
    srq.pdn = pd.into();
    srq.max_wr = 0.into();
    assert_eq!(
        xrc_srq_of(&mut x.d, srq, xrcd, cq, r).0,
        VIRTIO_RDMA_S_INVALID
    );
    // No QP is created with an XRC SRQ.
    let mut q = VirtioRdmaCmdCreateQp::new_zeroed();
    q.pdn = x.pd.into();
    q.qp_type = IB_QPT_RC;
    q.max_send_wr = 8.into();
    q.max_send_sge = 1.into();
    q.send_cqn = cq.into();
    q.recv_cqn = cq.into();
    q.srqn = x.srqn.into();
    let (st, _) = x.d.cmd(VIRTIO_RDMA_CMD_CREATE_QP, q.as_bytes(), 8);
    assert_eq!(st, VIRTIO_RDMA_S_INVALID, "CREATE_QP");
    assert_eq!(try_ring_qp(&mut x.d, q, 5).0, VIRTIO_RDMA_S_INVALID);
    // Its CQ stays while it reports there.
    let destroy_cq = |d: &mut Dev| d.cmd(VIRTIO_RDMA_CMD_DESTROY_CQ, &pair(cq, 0), 0).0;
    assert_eq!(destroy_cq(&mut x.d), VIRTIO_RDMA_S_BUSY);
    let srqn = x.srqn;
    x.d.ok(VIRTIO_RDMA_CMD_DESTROY_SRQ, &pair(srqn, 0), 0);
    assert_eq!(destroy_cq(&mut x.d), VIRTIO_RDMA_S_OK);
    x.d.finish();
}

#[test]
fn xrc_qp_requests_are_checked() {
    let mut x = setup(0);
    let (pd, cq) = (x.pd, x.send_cq.0);
    // An initiator has a send ring only.
    let mut q = ini_req(pd, cq);
    q.recv_cqn = 999.into();
    assert_eq!(
        try_ring_qp(&mut x.d, q, 4).0,
        VIRTIO_RDMA_S_OK,
        "recv_cqn ignored"
    );
    for field in 0..3 {
        let mut q = ini_req(pd, cq);
        match field {
            0 => q.max_recv_wr = 1.into(),
            1 => q.max_recv_sge = 1.into(),
            _ => q.srqn = x.srqn.into(),
        }
        assert_eq!(
            try_ring_qp(&mut x.d, q, 5).0,
            VIRTIO_RDMA_S_INVALID,
            "{field}"
        );
    }
    let (_, sq) = ring(&x.d, 6, 8, 256);
    let (_, rq) = ring(&x.d, 7, 8, 64);
    let req = VirtioRdmaCmdCreateQpRing {
        qp: ini_req(pd, cq),
        sq,
        rq,
        flags: 0.into(),
        reserved: 0.into(),
    };
    let (st, _) = x.d.cmd(VIRTIO_RDMA_CMD_CREATE_QP_RING, req.as_bytes(), 8);
    assert_eq!(st, VIRTIO_RDMA_S_INVALID, "an RQ ring");
    let vq_cq = x.d.create_cq(4);
    let (st, _) =
        x.d.cmd(VIRTIO_RDMA_CMD_CREATE_QP, ini_req(pd, vq_cq).as_bytes(), 8);
    assert_eq!(st, VIRTIO_RDMA_S_INVALID, "a virtqueue XRC_INI QP");
    // A target: of a domain, numbered as a ring QP, in RESET.
    assert_eq!(try_tgt(&mut x.d, 77).0, VIRTIO_RDMA_S_NOT_FOUND);
    let (st, tgt) = try_tgt(&mut x.d, x.xrcd);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    assert!(tgt >= MAX_QP, "a ring QP number ({tgt})");
    assert_eq!(x.d.qp_state(tgt), IB_QPS_RESET);
    x.d.finish();
}

#[test]
fn a_reset_frees_domains_xrc_srqs_and_targets() {
    let mut x = setup(0);
    let (srqn, tgt) = (x.srqn, x.tgt);
    let _ = try_alloc_xrcd(&mut x.d);
    x.d.reset();
    let (st, _) = x.d.cmd(VIRTIO_RDMA_CMD_QUERY_SRQ, &pair(srqn, 0), 16);
    assert_eq!(st, VIRTIO_RDMA_S_NOT_FOUND);
    let (st, _) = x.d.cmd(VIRTIO_RDMA_CMD_QUERY_QP, &pair(tgt, 0), 96);
    assert_eq!(st, VIRTIO_RDMA_S_NOT_FOUND);
    let (st, _) = x.d.cmd(VIRTIO_RDMA_CMD_DEALLOC_XRCD, &pair(1, 0), 0);
    assert_eq!(st, VIRTIO_RDMA_S_NOT_FOUND);
    assert_eq!(try_alloc_xrcd(&mut x.d), (VIRTIO_RDMA_S_OK, 1), "all free");
    x.d.finish();
}

#[test]
fn domains_and_targets_are_bounded() {
    let mut d = Dev::start_with(MEM_SIZE, |l| {
        let r = Rings::new(2, 8, 2, POLL_US)
            .and_then(|r| r.with_max_xrcd(2))
            .expect("rings");
        l.with_rings(Some(r)).expect("limits")
    });
    assert_eq!(d.dev.ctrl().limits().config().max_xrcd.get(), 2);
    assert_eq!(try_alloc_xrcd(&mut d), (VIRTIO_RDMA_S_OK, 1));
    assert_eq!(try_alloc_xrcd(&mut d), (VIRTIO_RDMA_S_OK, 2));
    assert_eq!(try_alloc_xrcd(&mut d).0, VIRTIO_RDMA_S_NO_RESOURCE);
    // Targets take ring QP numbers: two of them.
    assert_eq!(try_tgt(&mut d, 1), (VIRTIO_RDMA_S_OK, MAX_QP));
    assert_eq!(try_tgt(&mut d, 2), (VIRTIO_RDMA_S_OK, MAX_QP + 1));
    assert_eq!(try_tgt(&mut d, 1).0, VIRTIO_RDMA_S_NO_RESOURCE);
    d.finish();
}

#[test]
fn xrc_commands_are_unsupported_without_domains() {
    let cmds = |d: &mut Dev| -> Vec<u8> {
        let (srq, _) = srq_req(d, 1, 4, 0);
        let x = VirtioRdmaCmdCreateXrcSrq {
            srq,
            xrcdn: 1.into(),
            cqn: 0.into(),
        };
        vec![
            d.cmd(VIRTIO_RDMA_CMD_ALLOC_XRCD, &[], 8).0,
            d.cmd(VIRTIO_RDMA_CMD_DEALLOC_XRCD, &pair(1, 0), 0).0,
            d.cmd(VIRTIO_RDMA_CMD_CREATE_XRC_SRQ, x.as_bytes(), 8).0,
            d.cmd(VIRTIO_RDMA_CMD_CREATE_XRC_TGT_QP, &pair(1, 0), 8).0,
        ]
    };
    let unsupported = vec![VIRTIO_RDMA_S_UNSUPPORTED; 4];
    let with = |rings: Rings| {
        Dev::start_with(MEM_SIZE, move |l| {
            l.with_rings(Some(rings)).expect("limits")
        })
    };
    let rings = Rings::new(16, 8, 2, POLL_US).expect("rings");
    for (why, r) in [
        ("max_xrcd 0", rings.with_max_xrcd(0)),
        ("no SRQs", rings.with_max_srq(0)),
    ] {
        let mut d = with(r.expect("rings"));
        assert_eq!(d.dev.ctrl().limits().config().max_xrcd.get(), 0, "{why}");
        assert_eq!(cmds(&mut d), unsupported, "{why}");
        let pd = d.create_pd();
        let cq = ring_cq(&mut d, 0, 16, 0).0;
        let (st, _, _) = try_ring_qp(&mut d, ini_req(pd, cq), 1);
        assert_eq!(st, VIRTIO_RDMA_S_INVALID, "{why}: no XRC_INI QP");
        d.finish();
    }
    // The rings offered, not taken by the driver.
    let mut d = Dev::start_without(
        MEM_SIZE,
        |l| l.with_rings(Some(rings)).expect("limits"),
        1 << VIRTIO_RDMA_F_RINGS,
    );
    assert_eq!(d.dev.ctrl().limits().config().max_xrcd.get(), 64);
    assert_eq!(cmds(&mut d), unsupported, "rings not negotiated");
    d.finish();
    let d = Dev::start();
    assert_eq!(d.dev.ctrl().limits().config().max_xrcd.get(), 0, "no rings");
    d.finish();
}
