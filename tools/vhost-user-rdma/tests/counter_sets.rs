// SPDX-License-Identifier: GPL-2.0
//! Counter sets over real vhost-user sockets: ALLOC_COUNTER_SET,
//! DEALLOC_COUNTER_SET, BIND_COUNTER_SET and QUERY_COUNTERS of a set, with
//! each error status; and that what a bound QP does counts in its set
//! instead of the port's counters, so that the port's and every set's
//! together count each event once.

mod support;

use std::mem::size_of;

use vhost_user_rdma::abi::*;
use vhost_user_rdma::ib::*;
use zerocopy::FromBytes;

use support::*;

/// Response body of QUERY_COUNTERS.
const RSP: usize = size_of::<VirtioRdmaRspQueryCounters>();
/// Where UD receives land.
const INBOX: u64 = DATA + 0x9_0000;

/// QUERY_COUNTERS of port 1: counter set `set`, or (0) the port's own.
fn counters(d: &mut Dev, set: u32) -> Vec<u64> {
    let rsp = d.ok(VIRTIO_RDMA_CMD_QUERY_COUNTERS, &pair(1, set), RSP);
    VirtioRdmaRspQueryCounters::read_from_bytes(&rsp)
        .expect("a whole response")
        .value
        .iter()
        .map(|v| v.get())
        .collect()
}

/// Status of QUERY_COUNTERS of `port`, `set`.
fn query_status(d: &mut Dev, port: u32, set: u32) -> u8 {
    d.cmd(VIRTIO_RDMA_CMD_QUERY_COUNTERS, &pair(port, set), RSP)
        .0
}

/// ALLOC_COUNTER_SET on port 1: the new set.
fn alloc(d: &mut Dev) -> u32 {
    le32(&d.ok(VIRTIO_RDMA_CMD_ALLOC_COUNTER_SET, &pair(1, 0), 8), 0)
}

/// Status of BIND_COUNTER_SET.
fn bind(d: &mut Dev, qpn: u32, set: u32) -> u8 {
    d.cmd(VIRTIO_RDMA_CMD_BIND_COUNTER_SET, &pair(qpn, set), 0)
        .0
}

/// Status of DEALLOC_COUNTER_SET.
fn dealloc(d: &mut Dev, set: u32) -> u8 {
    d.cmd(VIRTIO_RDMA_CMD_DEALLOC_COUNTER_SET, &pair(set, 0), 0)
        .0
}

fn zeros() -> Vec<u64> {
    vec![0; VIRTIO_RDMA_NUM_COUNTERS]
}

fn sum(a: &[u64], b: &[u64]) -> Vec<u64> {
    a.iter().zip(b).map(|(a, b)| a + b).collect()
}

#[test]
fn commands_check_ports_sets_qps_and_the_limit() {
    let mut d = Dev::start_with(MEM_SIZE, |l| l.with_max_counter_sets(2).expect("limits"));
    for port in [0, 2] {
        let (st, _) = d.cmd(VIRTIO_RDMA_CMD_ALLOC_COUNTER_SET, &pair(port, 0), 8);
        assert_eq!(st, VIRTIO_RDMA_S_INVALID, "port {port}");
    }
    let (s1, s2) = (alloc(&mut d), alloc(&mut d));
    assert_eq!((s1, s2), (1, 2), "numbered from 1");
    let (st, _) = d.cmd(VIRTIO_RDMA_CMD_ALLOC_COUNTER_SET, &pair(1, 0), 8);
    assert_eq!(st, VIRTIO_RDMA_S_NO_RESOURCE, "past the device's limit");
    assert_eq!(counters(&mut d, s1), zeros(), "a new set is zeroed");
    assert_eq!(query_status(&mut d, 1, 3), VIRTIO_RDMA_S_NOT_FOUND);
    assert_eq!(query_status(&mut d, 2, s1), VIRTIO_RDMA_S_INVALID);
    let (st, _) = d.cmd(VIRTIO_RDMA_CMD_BIND_COUNTER_SET, &[1, 0, 0, 0], 0);
    assert_eq!(st, VIRTIO_RDMA_S_INVALID, "a short request");

    let pd = d.create_pd();
    let cq = d.create_cq(4);
    let qp = d.create_qp(pd, IB_QPT_RC, cq, false);
    assert_eq!(bind(&mut d, qp, 3), VIRTIO_RDMA_S_NOT_FOUND, "no set 3");
    for other in [0, qp + 1, 1000, u32::MAX] {
        assert_eq!(
            bind(&mut d, other, s1),
            VIRTIO_RDMA_S_NOT_FOUND,
            "QP {other}"
        );
    }
    assert_eq!(bind(&mut d, qp, s1), VIRTIO_RDMA_S_OK);
    assert_eq!(
        dealloc(&mut d, s1),
        VIRTIO_RDMA_S_BUSY,
        "a QP is bound to it"
    );
    for other in [0, 3, u32::MAX] {
        assert_eq!(
            dealloc(&mut d, other),
            VIRTIO_RDMA_S_NOT_FOUND,
            "set {other}"
        );
    }
    // A QP is bound to one set at a time: moving it frees the old one.
    assert_eq!(bind(&mut d, qp, s2), VIRTIO_RDMA_S_OK);
    assert_eq!(dealloc(&mut d, s1), VIRTIO_RDMA_S_OK);
    assert_eq!(query_status(&mut d, 1, s1), VIRTIO_RDMA_S_NOT_FOUND);
    assert_eq!(dealloc(&mut d, s2), VIRTIO_RDMA_S_BUSY);
    // Set 0: back to the port's counters.
    assert_eq!(bind(&mut d, qp, 0), VIRTIO_RDMA_S_OK);
    assert_eq!(dealloc(&mut d, s2), VIRTIO_RDMA_S_OK);
    // A destroyed QP is bound to nothing.
    let s = alloc(&mut d);
    assert_eq!(bind(&mut d, qp, s), VIRTIO_RDMA_S_OK);
    d.ok(VIRTIO_RDMA_CMD_DESTROY_QP, &pair(qp, 0), 0);
    assert_eq!(dealloc(&mut d, s), VIRTIO_RDMA_S_OK);
    assert_eq!(dealloc(&mut d, s), VIRTIO_RDMA_S_NOT_FOUND, "freed once");
    d.finish();
}

/// Traffic of x's QP to y's that counts the same every run: a SEND of
/// 2500 bytes into a posted receive (3 packets of the 1024-byte path MTU),
/// an RDMA READ of 8 bytes, an RDMA WRITE with a key y never gave out
/// (REM_ACCESS_ERR at x; y's QP moves to error), and a receive y posts
/// then (flushed).
fn traffic(p: &mut CrossPair) {
    let (qx, qy, kx, ky) = (p.qx, p.qy, p.kx, p.ky);
    p.y.recv(qy, 2, &[(DATA, 4096, ky)]);
    p.x.send(
        qx,
        &wqe(1, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 2500, kx)]),
    );
    assert_eq!(p.x.wait(p.cx, 1)[0].status(), IB_WC_SUCCESS);
    assert_eq!(p.y.wait(p.cy, 1)[0].byte_len(), 2500);
    let read = rdma(DATA, ky);
    p.x.send(
        qx,
        &wqe(
            3,
            IB_WR_RDMA_READ,
            IB_SEND_SIGNALED,
            0,
            &read,
            &[(DATA, 8, kx)],
        ),
    );
    assert_eq!(p.x.wait(p.cx, 1)[0].status(), IB_WC_SUCCESS);
    let bad = rdma(DATA, ky ^ 0x8000);
    p.x.send(
        qx,
        &wqe(
            4,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &bad,
            &[(DATA, 8, kx)],
        ),
    );
    assert_eq!(p.x.wait(p.cx, 1)[0].status(), IB_WC_REM_ACCESS_ERR);
    p.y.recv(qy, 5, &[(DATA, 8, ky)]);
    assert_eq!(p.y.wait(p.cy, 1)[0].status(), IB_WC_WR_FLUSH_ERR);
}

#[test]
fn a_bound_qp_counts_in_its_set_instead_of_the_port() {
    // Unbound: what each port counts.
    let mut p = cross_rc_pair(Dev::start(), Dev::start(), 7);
    traffic(&mut p);
    let (px, py) = (counters(&mut p.x, 0), counters(&mut p.y, 0));
    assert_eq!(px[VIRTIO_RDMA_CNT_SENT_PKTS], 3 + 1 + 1, "{px:?}");
    assert_eq!(py[VIRTIO_RDMA_CNT_RCVD_BYTES], 2500 + 8 + 8, "{py:?}");
    assert_eq!(px[VIRTIO_RDMA_CNT_REM_ACCESS_ERR], 1, "{px:?}");
    assert_eq!(py[VIRTIO_RDMA_CNT_WR_FLUSH_ERR], 1, "{py:?}");
    p.x.finish();
    p.y.finish();

    // Both QPs bound: the same traffic counts in their sets, and nothing
    // of it in the ports' own counters; the sum is what the ports counted.
    let mut p = cross_rc_pair(Dev::start(), Dev::start(), 7);
    let (sx, sy) = (alloc(&mut p.x), alloc(&mut p.y));
    assert_eq!(bind(&mut p.x, p.qx, sx), VIRTIO_RDMA_S_OK);
    assert_eq!(bind(&mut p.y, p.qy, sy), VIRTIO_RDMA_S_OK);
    traffic(&mut p);
    let (bx, by) = (counters(&mut p.x, sx), counters(&mut p.y, sy));
    let (ox, oy) = (counters(&mut p.x, 0), counters(&mut p.y, 0));
    assert_eq!(ox, zeros(), "x's port counted a bound QP's traffic");
    assert_eq!(oy, zeros(), "y's port counted a bound QP's traffic");
    assert_eq!(sum(&ox, &bx), px, "x: port + set");
    assert_eq!(sum(&oy, &by), py, "y: port + set");
    p.x.finish();
    p.y.finish();
}

#[test]
fn set_zero_sends_later_traffic_back_to_the_port() {
    // Two QPs of one device: a bound, b not.
    let RcPair {
        mut d,
        cq,
        a,
        b,
        key,
    } = rc_pair(ALL, ALL, 7);
    let s = alloc(&mut d);
    assert_eq!(bind(&mut d, a, s), VIRTIO_RDMA_S_OK);
    // A SEND before b has a receive: RNR NAKs, then one packet.
    let send = |wr_id| {
        wqe(
            wr_id,
            IB_WR_SEND,
            IB_SEND_SIGNALED,
            0,
            &[],
            &[(DATA, 100, key)],
        )
    };
    d.send(a, &send(1));
    d.quiet(cq);
    d.recv(b, 2, &[(DATA + 0x1000, 100, key)]);
    let wcs = d.wait(cq, 2);
    assert!(wcs.iter().all(|w| w.status() == IB_WC_SUCCESS), "{wcs:?}");
    let (set, port) = (counters(&mut d, s), counters(&mut d, 0));
    // What a sent (each time: the RNR NAK'd ones too) and the RNR NAKs it
    // got in the set, what b took (once) and the RNR NAKs it sent in the
    // port's.
    let naks = set[VIRTIO_RDMA_CNT_RNR_NAKS_RCVD];
    assert!(naks >= 1, "{set:?}");
    assert_eq!(set[VIRTIO_RDMA_CNT_SENT_PKTS], naks + 1, "{set:?}");
    assert_eq!(set[VIRTIO_RDMA_CNT_SENT_BYTES], 100 * (naks + 1), "{set:?}");
    assert_eq!(port[VIRTIO_RDMA_CNT_RCVD_PKTS], 1, "{port:?}");
    assert_eq!(port[VIRTIO_RDMA_CNT_RCVD_BYTES], 100, "{port:?}");
    assert_eq!(port[VIRTIO_RDMA_CNT_RNR_NAKS_SENT], naks, "{port:?}");
    assert_eq!(set.iter().sum::<u64>(), 102 * (naks + 1) - 1, "{set:?}");
    assert_eq!(port.iter().sum::<u64>(), naks + 1 + 100, "{port:?}");

    // Set 0: the next SEND counts in the port's; the set keeps its own.
    assert_eq!(bind(&mut d, a, 0), VIRTIO_RDMA_S_OK);
    d.recv(b, 4, &[(DATA + 0x1000, 100, key)]);
    d.send(a, &send(3));
    d.wait(cq, 2);
    assert_eq!(counters(&mut d, s), set, "the set after unbinding");
    let now = counters(&mut d, 0);
    assert_eq!(now[VIRTIO_RDMA_CNT_SENT_PKTS], 1, "{now:?}");
    assert_eq!(now[VIRTIO_RDMA_CNT_RCVD_PKTS], 2, "{now:?}");
    assert_eq!(dealloc(&mut d, s), VIRTIO_RDMA_S_OK);
    d.finish();
}

/// Requests dropped as not for a QP count on the QP addressed: an RC
/// request from a QP that is not the peer, and a UD datagram with the
/// wrong Q_Key (whose right-keyed successor the QP takes, counted there
/// too).
#[test]
fn drops_count_on_the_qp_addressed() {
    let mut p = cross_rc_pair(Dev::start(), Dev::start(), 0);
    let sy = alloc(&mut p.y);
    assert_eq!(bind(&mut p.y, p.qy, sy), VIRTIO_RDMA_S_OK);
    // An unbound intruder on x connects to y's QP, whose peer it is not.
    let intruder = p.x.create_qp(p.px, IB_QPT_RC, p.cx, false);
    let gy = p.y.gid;
    p.x.rc_up(intruder, gy, p.qy, ALL, 0);
    p.x.send(
        intruder,
        &wqe(1, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 8, p.kx)]),
    );
    assert_eq!(p.x.wait(p.cx, 1)[0].status(), IB_WC_RETRY_EXC_ERR);
    // Sent once and again at each of its retry_cnt (7) timeouts, dropped
    // every time.
    let set = counters(&mut p.y, sy);
    assert_eq!(set[VIRTIO_RDMA_CNT_DROPPED_NOT_PEER], 8, "{set:?}");
    assert_eq!(set.iter().sum::<u64>(), 8, "{set:?}");
    assert_eq!(counters(&mut p.y, 0), zeros());
    // The intruder is unbound: what it sent and how it failed are x's port's.
    let px = counters(&mut p.x, 0);
    assert_eq!(px[VIRTIO_RDMA_CNT_SENT_PKTS], 8, "{px:?}");
    assert_eq!(px[VIRTIO_RDMA_CNT_RETRY_EXC_ERR], 1, "{px:?}");
    p.x.finish();

    // UD: y's QP v bound, z's sender not.
    let mut y = p.y;
    let mut z = Dev::start();
    let (py, pz) = (p.py, z.create_pd());
    let cz = z.create_cq(12);
    let kz = z.dma_mr(pz, ALL);
    let v = y.create_qp(py, IB_QPT_UD, p.cy, false);
    let u = z.create_qp(pz, IB_QPT_UD, cz, false);
    y.ud_up(v, 0x1234, false);
    z.ud_up(u, 0x9999, false);
    let sv = alloc(&mut y);
    assert_eq!(bind(&mut y, v, sv), VIRTIO_RDMA_S_OK);
    y.recv(v, 1, &[(INBOX, 40 + 64, p.ky)]);
    let gy = y.gid;
    for (wr_id, qkey) in [(1, 0x4321), (2, 0x1234)] {
        z.send(
            u,
            &wqe(
                wr_id,
                IB_WR_SEND,
                IB_SEND_SIGNALED,
                0,
                &ud_wr(v, qkey, gy),
                &[(DATA, 64, kz)],
            ),
        );
        assert_eq!(z.wait(cz, 1)[0].status(), IB_WC_SUCCESS);
    }
    assert_eq!(y.wait(p.cy, 1)[0].byte_len(), 40 + 64);
    let set = counters(&mut y, sv);
    assert_eq!(set[VIRTIO_RDMA_CNT_DROPPED_BAD_QKEY], 1, "{set:?}");
    assert_eq!(set[VIRTIO_RDMA_CNT_RCVD_PKTS], 1, "{set:?}");
    assert_eq!(set[VIRTIO_RDMA_CNT_RCVD_BYTES], 64, "{set:?}");
    assert_eq!(set.iter().sum::<u64>(), 1 + 1 + 64, "{set:?}");
    assert_eq!(counters(&mut y, 0), zeros(), "nothing in y's port");
    let pz = counters(&mut z, 0);
    assert_eq!(pz[VIRTIO_RDMA_CNT_SENT_PKTS], 2, "{pz:?}");
    y.finish();
    z.finish();
}

#[test]
fn a_reset_frees_every_set_and_keeps_the_ports_counters() {
    let RcPair {
        mut d,
        cq,
        a,
        b,
        key,
    } = rc_pair(ALL, ALL, 7);
    let s = alloc(&mut d);
    let t = alloc(&mut d);
    assert_eq!(bind(&mut d, a, s), VIRTIO_RDMA_S_OK);
    d.recv(b, 1, &[(DATA + 0x1000, 100, key)]);
    d.send(
        a,
        &wqe(2, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 100, key)]),
    );
    d.wait(cq, 2);
    assert_eq!(counters(&mut d, s)[VIRTIO_RDMA_CNT_SENT_BYTES], 100);
    let port = counters(&mut d, 0);
    assert_eq!(port[VIRTIO_RDMA_CNT_RCVD_BYTES], 100, "{port:?}");
    d.reset();
    for set in [s, t] {
        assert_eq!(query_status(&mut d, 1, set), VIRTIO_RDMA_S_NOT_FOUND);
        assert_eq!(dealloc(&mut d, set), VIRTIO_RDMA_S_NOT_FOUND);
    }
    assert_eq!(counters(&mut d, 0), port, "the port's own counters stay");
    assert_eq!(alloc(&mut d), 1, "numbering starts again");
    d.finish();
}
