// SPDX-License-Identifier: GPL-2.0
//! Hostile-device mode (`--hostile`, `src/hostile.rs`) over a real
//! vhost-user socket: each kind of lie reaches the guest as documented, and
//! is counted. The guest side reads the rings raw here: `support`'s
//! pollers assert the lengths an honest device writes.

mod support;

use std::mem::size_of;
use std::num::NonZeroU32;
use std::thread;
use std::time::{Duration, Instant};

use vhost_user_rdma::abi::*;
use vhost_user_rdma::hostile::{self, Kinds};
use vhost_user_rdma::ib::*;
use vhost_user_rdma::stats::Counter;
use vm_memory::{Bytes, GuestAddress};
use zerocopy::FromBytes;

use support::*;

/// A test device lying about `kinds` (completions: one in `every`).
fn hostile_dev(kinds: &str, every: u32) -> Dev {
    let kinds: Kinds = kinds.parse().expect("kinds");
    let every = NonZeroU32::new(every).expect("every >= 1");
    Dev::start_with(MEM_SIZE, |l| {
        l.with_hostile(Some(hostile::Config { kinds, every }))
    })
}

/// One used entry of a CQ as the device returned it: its used length and
/// the CQE bytes in its buffer (whatever the length says).
#[derive(Debug)]
struct Raw {
    len: u32,
    cqe: VirtioRdmaCqReq,
}

/// Waits for `n` used entries on CQ `cqn` (reposting their buffers).
fn wait_raw(d: &mut Dev, cqn: u32, n: usize) -> Vec<Raw> {
    let q = Dev::cq_q(cqn);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut out = Vec::new();
    while out.len() < n {
        for (id, len) in d.take_used(q) {
            let mut b = [0u8; CQE_LEN];
            let buf = d.vqs[q].buf(id as u16);
            d.mem.read_slice(&mut b, GuestAddress(buf)).expect("cqe");
            let cqe = VirtioRdmaCqReq::read_from_bytes(&b).expect("cqe");
            out.push(Raw { len, cqe });
            d.post(q, &[0u8; 64], true);
        }
        assert!(Instant::now() < deadline, "{} of {n}: {out:?}", out.len());
        thread::sleep(Duration::from_micros(200));
    }
    thread::sleep(Duration::from_millis(20));
    assert!(d.take_used(q).is_empty(), "more than {n} entries");
    out
}

/// (wr_id, status, opcode, byte_len, qp_num) of a CQE.
fn fields(c: &VirtioRdmaCqReq) -> (u64, u8, u8, u32, u32) {
    (
        c.wr_id.get(),
        c.status,
        c.opcode,
        c.byte_len.get(),
        c.qp_num.get(),
    )
}

/// A signaled 8-byte RDMA WRITE `wr_id` from `p.a` to `p.b`'s memory.
fn write(p: &mut RcPair, wr_id: u64) {
    let w = wqe(
        wr_id,
        IB_WR_RDMA_WRITE,
        IB_SEND_SIGNALED,
        0,
        &rdma(DATA + 0x1000, p.key),
        &[(DATA, 8, p.key)],
    );
    p.d.send(p.a, &w);
}

const FULL: u32 = CQE_LEN as u32;

#[test]
fn every_completion_lies_a_to_g_in_order() {
    let mut p = rc_pair_on(hostile_dev("completions", 1), ALL, ALL, 0);
    let (cq, a) = (p.cq, p.a);
    let genuine = |wr_id| (wr_id, IB_WC_SUCCESS, IB_WC_RDMA_WRITE, 8, a);
    let mut got = Vec::new();
    for wr_id in 1..=7 {
        write(&mut p, wr_id);
        got.push(wait_raw(&mut p.d, cq, if wr_id == 6 { 2 } else { 1 }));
    }
    let one = |i: usize| {
        assert_eq!(got[i].len(), 1);
        (got[i][0].len, fields(&got[i][0].cqe))
    };
    // (a) a wr_id never posted.
    let mut a_lie = genuine(1);
    a_lie.0 += 0x1_0000_0000;
    assert_eq!(one(0), (FULL, a_lie));
    // (b) success with byte_len u32::MAX.
    let mut b_lie = genuine(2);
    b_lie.3 = u32::MAX;
    assert_eq!(one(1), (FULL, b_lie));
    // (c) a send-side completion with the receive opcode.
    let mut c_lie = genuine(3);
    c_lie.2 = IB_WC_RECV;
    assert_eq!(one(2), (FULL, c_lie));
    // (d) a QP that does not report to this CQ.
    let mut d_lie = genuine(4);
    d_lie.4 ^= 0x00ff_0000;
    assert_eq!(one(3), (FULL, d_lie));
    // (e) the genuine CQE, its used length one byte short.
    assert_eq!(one(4), (FULL - 1, genuine(5)));
    // (f) the genuine completion twice.
    let dup: Vec<_> = got[5].iter().map(|r| (r.len, fields(&r.cqe))).collect();
    assert_eq!(dup, [(FULL, genuine(6)), (FULL, genuine(6))]);
    // (g) the previous completion's wr_id.
    assert_eq!(one(6), (FULL, genuine(6)));
    // Then (a) again.
    write(&mut p, 8);
    let again = wait_raw(&mut p.d, cq, 1);
    assert_eq!(again[0].cqe.wr_id.get(), 8 + 0x1_0000_0000);
    let stats = p.d.dev.ctrl().stats();
    assert_eq!(stats.get(Counter::HostileCompletions), 8);
    assert!(
        stats.to_string().contains("hostile_completions=8"),
        "{stats}"
    );
    p.d.finish();
}

/// One completion in two lies, whoever posts it: the requester, the
/// responder (a receive) and a flush.
#[test]
fn every_nth_completion_lies_on_every_path() {
    let mut p = rc_pair_on(hostile_dev("completions", 2), ALL, ALL, 0);
    let (cq, a, b, key) = (p.cq, p.a, p.b, p.key);
    write(&mut p, 1);
    let c1 = wait_raw(&mut p.d, cq, 1);
    assert_eq!(
        fields(&c1[0].cqe),
        (1, IB_WC_SUCCESS, IB_WC_RDMA_WRITE, 8, a)
    );
    write(&mut p, 2);
    let c2 = wait_raw(&mut p.d, cq, 1);
    assert_eq!(c2[0].cqe.wr_id.get(), 2 + 0x1_0000_0000, "(a)");
    // A SEND: the responder's receive completion comes first (genuine),
    // then the requester's (b).
    p.d.recv(b, 30, &[(DATA + 0x2000, 8, key)]);
    let w = wqe(3, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 8, key)]);
    p.d.send(a, &w);
    let c34 = wait_raw(&mut p.d, cq, 2);
    assert_eq!(fields(&c34[0].cqe), (30, IB_WC_SUCCESS, IB_WC_RECV, 8, b));
    assert_eq!(
        fields(&c34[1].cqe),
        (3, IB_WC_SUCCESS, IB_WC_SEND, u32::MAX, a),
        "(b)"
    );
    // Flushed receives: the second is (c), receive-side, so IB_WC_SEND.
    p.d.recv(b, 40, &[(DATA, 8, key)]);
    p.d.recv(b, 41, &[(DATA, 8, key)]);
    p.d.move_to_err(b);
    let c56 = wait_raw(&mut p.d, cq, 2);
    assert_eq!(
        (fields(&c56[0].cqe).0, c56[0].cqe.status, c56[0].cqe.opcode),
        (40, IB_WC_WR_FLUSH_ERR, IB_WC_RECV)
    );
    assert_eq!(
        (fields(&c56[1].cqe).0, c56[1].cqe.status, c56[1].cqe.opcode),
        (41, IB_WC_WR_FLUSH_ERR, IB_WC_SEND),
        "(c)"
    );
    assert_eq!(p.d.dev.ctrl().stats().get(Counter::HostileCompletions), 3);
    p.d.finish();
}

#[test]
fn create_answers_name_another_live_object() {
    let mut d = hostile_dev("handles", 1);
    let create_cq = |d: &mut Dev| le32(&d.ok(VIRTIO_RDMA_CMD_CREATE_CQ, &pair(16, 0), 8), 0);
    assert_eq!(create_cq(&mut d), 0, "no other CQ: the truth");
    assert_eq!(create_cq(&mut d), 0, "the first CQ's number");
    let stats = d.dev.ctrl().stats();
    assert_eq!(stats.get(Counter::HostileHandles), 1);
    // The second CQ exists under its real number, 1.
    let destroy_cq = |d: &mut Dev, n| d.cmd(VIRTIO_RDMA_CMD_DESTROY_CQ, &pair(n, 0), 0).0;
    assert_eq!(destroy_cq(&mut d, 1), VIRTIO_RDMA_S_OK);
    assert_eq!(destroy_cq(&mut d, 1), VIRTIO_RDMA_S_NOT_FOUND);
    assert_eq!(create_cq(&mut d), 0, "CQ 1 again, named 0");

    let pd = d.create_pd();
    assert_eq!(d.create_qp(pd, IB_QPT_RC, 0, false), 2, "no other QP");
    assert_eq!(d.create_qp(pd, IB_QPT_UD, 1, false), 2, "QP 3, named 2");
    assert_eq!(d.dev.ctrl().stats().get(Counter::HostileHandles), 3);
    assert_eq!(d.query(3).qp_state, IB_QPS_RESET, "QP 3 lives");
    let destroy_qp = |d: &mut Dev, n| d.cmd(VIRTIO_RDMA_CMD_DESTROY_QP, &pair(n, 0), 0).0;
    assert_eq!(destroy_qp(&mut d, 3), VIRTIO_RDMA_S_OK);
    assert_eq!(destroy_qp(&mut d, 3), VIRTIO_RDMA_S_NOT_FOUND);
    assert_eq!(destroy_qp(&mut d, 2), VIRTIO_RDMA_S_OK);
    assert_eq!(d.create_qp(pd, IB_QPT_RC, 0, false), 2, "alone again");
    d.finish();
}

#[test]
fn every_nth_create_of_each_kind_lies() {
    let mut d = hostile_dev("handles", 2);
    let create_cq = |d: &mut Dev| le32(&d.ok(VIRTIO_RDMA_CMD_CREATE_CQ, &pair(16, 0), 8), 0);
    let cqs: Vec<u32> = (0..4).map(|_| create_cq(&mut d)).collect();
    // The 2nd and 4th name CQ 0; the 3rd is truly CQ 2 (CQ 1 took the 2nd's).
    assert_eq!(cqs, [0, 0, 2, 0]);
    let pd = d.create_pd();
    let qps: Vec<u32> = (0..3)
        .map(|_| d.create_qp(pd, IB_QPT_RC, 0, false))
        .collect();
    // QPs count on their own: the 2nd lies, the 1st and 3rd do not.
    assert_eq!(qps, [2, 2, 4]);
    assert_eq!(d.dev.ctrl().stats().get(Counter::HostileHandles), 3);
    d.finish();
}

/// Used entries of the event queue: (used length, type, element).
fn raw_events(d: &mut Dev) -> Vec<(u32, u32, u32)> {
    let q = Dev::event_q();
    let mut out = Vec::new();
    for (id, len) in d.take_used(q) {
        let mut b = [0u8; size_of::<VirtioRdmaEvent>()];
        d.mem
            .read_slice(&mut b, GuestAddress(d.vqs[q].buf(id as u16)))
            .expect("event");
        let e = VirtioRdmaEvent::read_from_bytes(&b).expect("event");
        out.push((len, e.event_type.get(), e.element.get()));
    }
    out
}

#[test]
fn made_up_events_follow_control_commands() {
    // Dev::start's ADD_GID finds no event buffer: nothing is posted, and
    // the cycle starts with the first event delivered.
    let mut d = hostile_dev("events", 4);
    d.fill_events(8, 8);
    assert!(raw_events(&mut d).is_empty(), "no event without a command");
    let mut got = Vec::new();
    d.create_pd();
    got.extend(raw_events(&mut d));
    d.create_pd();
    got.extend(raw_events(&mut d));
    // A failed command is executed too.
    let (st, _) = d.cmd(VIRTIO_RDMA_CMD_DESTROY_PD, &pair(999, 0), 0);
    assert_eq!(st, VIRTIO_RDMA_S_NOT_FOUND);
    got.extend(raw_events(&mut d));
    d.create_cq(0);
    got.extend(raw_events(&mut d));
    d.create_pd();
    got.extend(raw_events(&mut d));
    assert_eq!(
        got,
        [
            (8, 0xdead, 0),
            (8, VIRTIO_RDMA_EVENT_QP_FATAL, 0x00fe_dcba),
            (8, VIRTIO_RDMA_EVENT_CQ_ERR, 0x00fe_dcba),
            (4, VIRTIO_RDMA_EVENT_QP_FATAL, 0x00fe_dcba),
            (8, 0xdead, 0),
        ]
    );
    assert_eq!(d.dev.ctrl().stats().get(Counter::HostileEvents), 5);
    d.finish();
}
