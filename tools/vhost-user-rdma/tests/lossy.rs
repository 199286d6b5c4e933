// SPDX-License-Identifier: GPL-2.0
//! RC over a link that loses packets and duplicates messages
//! (`--link-faults`): the responder takes a message up to a gap and NAKs
//! what follows it, the requester goes back to the gap; it sends again
//! what nothing answered when its transport timer runs out, `retry_cnt`
//! times; the responder answers a duplicate
//! without executing it twice. Every message arrives exactly once and
//! whole; a request nobody answers ends in RETRY_EXC_ERR after its retries
//! and the time they take; `timeout` 0 waits forever, as IB defines it.

mod support;

use std::time::{Duration, Instant};

use vhost_user_rdma::ib::*;
use vhost_user_rdma::link::Faults;
use vhost_user_rdma::stats::Counter;

use support::*;

/// A device of 16 MiB whose link has `faults`.
fn lossy(faults: &str) -> Dev {
    let f: Faults = faults.parse().expect("faults");
    Dev::start_with(16 << 20, |l| l.with_link_faults(Some(f)))
}

fn sent_and_taken(d: &Dev) -> (u64, u64) {
    let s = d.dev.ctrl().stats();
    (s.get(Counter::SentPkts), s.get(Counter::RcvdPkts))
}

/// SENDs, WRITE_WITH_IMMs, WRITEs and READs of up to 1 MiB with a tenth
/// of packets and of answers lost, a tenth of packets overtaken by the
/// next and a tenth of requests duplicated:
/// each arrives whole, each SEND and WRITE_WITH_IMM takes exactly the one
/// receive posted for it (a duplicate takes none), in order.
#[test]
fn messages_arrive_once_and_whole_over_a_lossy_link() {
    let RcPair {
        mut d,
        cq,
        a,
        b,
        key,
    } = rc_pair_on(lossy("drop=10,dup=10,reorder=10"), ALL, ALL, 7);
    const BIG: usize = 1 << 20;
    let (src, dst) = (DATA, DATA + (4 << 20));
    // Two receive buffers, used in turn.
    let bufs = [DATA + (8 << 20), DATA + (10 << 20)];
    let mut next_recv = 1000u64;
    d.recv(b, next_recv, &[(bufs[0], BIG as u32, key)]);
    let mut id = 0u64;
    for round in 0..6u8 {
        for len in [64usize, 4096, 200_000, BIG] {
            let data = pattern(len, round.wrapping_mul(7).wrapping_add(len as u8));
            d.fill(src, &data);
            for op in [
                IB_WR_SEND,
                IB_WR_RDMA_WRITE_WITH_IMM,
                IB_WR_RDMA_WRITE,
                IB_WR_RDMA_READ,
            ] {
                id += 1;
                let takes_recv = matches!(op, IB_WR_SEND | IB_WR_RDMA_WRITE_WITH_IMM);
                // The receive after this one, posted before the message:
                // a duplicate taking a receive would take it.
                let buf = bufs[(next_recv % 2) as usize];
                if takes_recv {
                    d.fill(bufs[((next_recv + 1) % 2) as usize], &[0; 64]);
                    d.recv(
                        b,
                        next_recv + 1,
                        &[(bufs[((next_recv + 1) % 2) as usize], BIG as u32, key)],
                    );
                }
                d.fill(dst, &vec![0; len]);
                let (wr, sges) = match op {
                    // READ: the destination's bytes back into the source.
                    IB_WR_RDMA_READ => {
                        d.fill(dst, &data);
                        d.fill(src, &vec![0; len]);
                        (rdma(dst, key), [(src, len as u32, key)])
                    }
                    IB_WR_SEND => (Vec::new(), [(src, len as u32, key)]),
                    _ => (rdma(dst, key), [(src, len as u32, key)]),
                };
                d.send(a, &wqe(id, op, IB_SEND_SIGNALED, 5, &wr, &sges));
                let wcs = d.wait(cq, if takes_recv { 2 } else { 1 });
                let s = wcs.iter().find(|w| w.wr_id() == id).expect("send");
                assert_eq!(s.status(), IB_WC_SUCCESS, "{op} of {len}: {wcs:?}");
                if takes_recv {
                    let r = wcs.iter().find(|w| w.wr_id() != id).expect("recv");
                    assert_eq!(
                        (r.wr_id(), r.status(), r.byte_len()),
                        (next_recv, IB_WC_SUCCESS, len as u32),
                        "{op} of {len}: the receive posted for it"
                    );
                    next_recv += 1;
                }
                let got = match op {
                    IB_WR_SEND => d.read(buf, len),
                    IB_WR_RDMA_READ => d.read(src, len),
                    _ => d.read(dst, len),
                };
                assert!(got == data, "{op} of {len}: data");
                if op == IB_WR_RDMA_READ {
                    d.fill(src, &data);
                }
            }
        }
    }
    d.quiet(cq);
    // The link lost and duplicated some: more was sent than taken.
    let (sent, taken) = sent_and_taken(&d);
    assert!(sent > taken, "sent {sent}, taken {taken}: nothing was lost");
    // Packets after a gap inside a message: the responder NAK'd them and
    // the requester went back to the gap (go-back-N, not the whole
    // message again).
    let out_of_sequence = d.dev.ctrl().stats().get(Counter::BadPsn);
    assert!(out_of_sequence > 0, "no gap inside a message");
    d.finish();
}

/// FETCH_AND_ADD with a fifth of answers lost and a fifth of requests
/// duplicated: each runs exactly once (the sum is the count) and each
/// returns the value before it.
#[test]
fn an_atomic_runs_once_under_duplicates_and_lost_answers() {
    let RcPair {
        mut d, cq, a, key, ..
    } = rc_pair_on(lossy("drop-answer=20,dup=20"), ALL, ALL, 7);
    let (target, result) = (DATA, DATA + 0x1000);
    d.fill(target, &[0; 8]);
    for i in 0..200u64 {
        d.send(
            a,
            &wqe(
                i,
                IB_WR_ATOMIC_FETCH_AND_ADD,
                IB_SEND_SIGNALED,
                0,
                &atomic_wr(target, 1, 0, key),
                &[(result, 8, key)],
            ),
        );
        let wc = d.wait(cq, 1)[0];
        assert_eq!((wc.wr_id(), wc.status()), (i, IB_WC_SUCCESS));
        assert_eq!(d.read(result, 8), i.to_le_bytes(), "original of {i}");
    }
    assert_eq!(d.read(target, 8), 200u64.to_le_bytes(), "each ran once");
    let (sent, taken) = sent_and_taken(&d);
    assert!(sent > taken, "sent {sent}, taken {taken}: nothing was lost");
    d.finish();
}

/// Two RC QPs of one device whose link has `faults`, connected with SQ
/// PSN `psn` and the transport timer's (`timeout`, `retry_cnt`): (device,
/// CQ, QP a, QP b, key).
fn lossy_pair(faults: &str, psn: u32, timer: (u8, u8)) -> (Dev, u32, u32, u32, u32) {
    let mut d = lossy(faults);
    let pd = d.create_pd();
    let cq = d.create_cq(12);
    let key = d.dma_mr(pd, ALL);
    let a = d.create_qp(pd, IB_QPT_RC, cq, false);
    let b = d.create_qp(pd, IB_QPT_RC, cq, false);
    let gid = d.gid;
    d.rc_up_timed(a, gid, b, ALL, 7, (psn, 0), timer);
    d.rc_up_timed(b, gid, a, ALL, 7, (0, psn), timer);
    (d, cq, a, b, key)
}

/// A SEND from a QP whose link loses every request, connected with
/// (`timeout`, `retry_cnt`) to a QP that never hears it.
fn unheard(timeout: u8, retry_cnt: u8) -> (Dev, u32, u32) {
    let (mut d, cq, a, b, key) = lossy_pair("drop-request=100", 0, (timeout, retry_cnt));
    let send = wqe(1, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 64, key)]);
    d.recv(b, 2, &[(DATA + 0x1000, 64, key)]);
    d.send(a, &send);
    (d, cq, a)
}

/// A request nobody answers is sent `retry_cnt` more times, a transport
/// timer (4.096 µs × 2^timeout) apart, then fails with RETRY_EXC_ERR; 7
/// means seven (rxe makes 7 infinite; IB does not).
#[test]
fn an_unanswered_request_ends_after_retry_cnt_timeouts() {
    for (timeout, retry_cnt) in [(14u8, 2u8), (10, 7), (12, 0)] {
        let t0 = Instant::now();
        let (mut d, cq, _) = unheard(timeout, retry_cnt);
        let wc = d.wait(cq, 1)[0];
        let took = t0.elapsed();
        assert_eq!((wc.wr_id(), wc.status()), (1, IB_WC_RETRY_EXC_ERR));
        let tries = u64::from(retry_cnt) + 1;
        assert_eq!(sent_and_taken(&d), (tries, 0), "timeout {timeout}");
        // Each try waited its timer out (never less).
        let timer = Duration::from_nanos(4096 << timeout);
        assert!(took >= timer * tries as u32, "{took:?} for {tries} tries");
        d.quiet(cq);
        d.finish();
    }
}

/// A SEND of one chunk (many packets) whose answers the link all loses:
/// the responder takes it whole and completes its receive once; the
/// requester, never answered, sends it `retry_cnt` more times (duplicates
/// that take nothing), then fails with RETRY_EXC_ERR.
#[test]
fn a_message_never_acknowledged_ends_after_retry_cnt_timeouts() {
    let (mut d, cq, a, b, key) = lossy_pair("drop-answer=100", 0, (10, 3));
    const LEN: usize = vhost_user_rdma::engine::CHUNK as usize - 4096;
    let data = pattern(LEN, 5);
    d.fill(DATA, &data);
    d.recv(b, 2, &[(DATA + (4 << 20), LEN as u32, key)]);
    d.recv(b, 3, &[(DATA + (5 << 20), LEN as u32, key)]);
    let send = wqe(
        1,
        IB_WR_SEND,
        IB_SEND_SIGNALED,
        0,
        &[],
        &[(DATA, LEN as u32, key)],
    );
    d.send(a, &send);
    let wcs = d.wait(cq, 2);
    let status = |id: u64| wcs.iter().find(|w| w.wr_id() == id).map(|w| w.status());
    assert_eq!(status(2), Some(IB_WC_SUCCESS), "{wcs:?}");
    assert_eq!(status(1), Some(IB_WC_RETRY_EXC_ERR), "{wcs:?}");
    assert!(d.read(DATA + (4 << 20), LEN) == data);
    d.quiet(cq);
    // No duplicate took the second receive.
    assert!(d.read(DATA + (5 << 20), 64) == [0; 64]);
    assert_eq!(sent_and_taken(&d).0, 4 * LEN.div_ceil(1024) as u64);
    d.finish();
}

/// `timeout` 0: no transport timer; the request waits for an answer
/// until the QP leaves RTS.
#[test]
fn timeout_zero_waits_forever() {
    let (mut d, cq, a) = unheard(0, 7);
    std::thread::sleep(Duration::from_millis(300));
    assert!(d.poll(cq).is_empty(), "completed with no timer");
    assert_eq!(sent_and_taken(&d), (1, 0), "sent again with no timer");
    d.move_to_err(a);
    let wc = d.wait(cq, 1)[0];
    assert_eq!((wc.wr_id(), wc.status()), (1, IB_WC_WR_FLUSH_ERR));
    d.finish();
}

/// PSNs wrap at 2^24 on both sides, through a 1 MiB WRITE (1024 packets)
/// and small SENDs over a lossy link.
#[test]
fn psns_wrap_at_2_pow_24() {
    let first = (1 << 24) - 5;
    let (mut d, cq, a, b, key) = lossy_pair("drop=10,dup=10,reorder=10", first, (10, 7));
    let data = pattern(1 << 20, 9);
    d.fill(DATA, &data);
    d.send(
        a,
        &wqe(
            1,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &rdma(DATA + (4 << 20), key),
            &[(DATA, 1 << 20, key)],
        ),
    );
    assert_eq!(d.wait(cq, 1)[0].status(), IB_WC_SUCCESS);
    assert!(d.read(DATA + (4 << 20), 1 << 20) == data);
    for i in 0..10 {
        d.recv(b, 100 + i, &[(DATA + 0x1000, 64, key)]);
        d.send(
            a,
            &wqe(i, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 64, key)]),
        );
        assert!(d.wait(cq, 2).iter().all(|w| w.status() == IB_WC_SUCCESS));
    }
    let end = (first + 1024 + 10) % (1 << 24);
    assert_eq!(end, 1029);
    assert_eq!(d.query(a).sq_psn.get(), end);
    assert_eq!(d.query(b).rq_psn.get(), end);
    d.finish();
}
