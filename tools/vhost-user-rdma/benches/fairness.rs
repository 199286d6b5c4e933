// SPDX-License-Identifier: GPL-2.0
//! Fairness between guests: what a flooding device costs another.
//!
//! Two devices of one process (two guests), served in-process over
//! vhost-user sockets (the tests' support), each with two RC QPs connected
//! to each other and a DMA MR. The victim measures its RDMA WRITE
//! throughput with 64 KiB messages, batches of 8 with the last signaled,
//! for two seconds, and the latency of single 64-byte WRITEs (median and
//! 99th percentile of 2000): alone, then while the other device writes as
//! fast as it can with messages of 64 KiB, then of 4 MiB. Prints MiB/s,
//! the share of its lone throughput the victim keeps, and the latencies.
//! On a machine with few cores the throughput share mostly says how the
//! four busy threads (two device loops, two polling clients) and the
//! memory bandwidth are shared; the latency says how long the victim
//! waits for the flooder's hold of the fabric lock. Timing never fails the
//! run; a failed completion does.

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use vhost_user_rdma::ib::*;

use support::*;

const MEM: usize = 48 << 20;
const SRC: u64 = DATA;
const DST: u64 = DATA + (16 << 20);
const BATCH: usize = 8;
const VICTIM_SIZE: usize = 64 << 10;
const RUN: Duration = Duration::from_secs(2);

/// One batch of `BATCH` WRITEs of `size` bytes, posted and completed.
fn batch(p: &mut RcPair, size: usize, wr_id: &mut u64) {
    for i in 0..BATCH {
        let flags = if i + 1 == BATCH { IB_SEND_SIGNALED } else { 0 };
        *wr_id += 1;
        let w = wqe(
            *wr_id,
            IB_WR_RDMA_WRITE,
            flags,
            0,
            &rdma(DST, p.key),
            &[(SRC, size as u32, p.key)],
        );
        p.d.send(p.a, &w);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let wcs = p.d.poll(p.cq);
        if let Some(wc) = wcs.first() {
            assert_eq!(wc.status(), IB_WC_SUCCESS, "WRITE {wr_id}");
            return;
        }
        assert!(Instant::now() < deadline, "no completion for WRITE {wr_id}");
        std::hint::spin_loop();
    }
}

/// Median and 99th percentile of single 64-byte WRITEs, in µs.
fn victim_latency(p: &mut RcPair, wr_id: &mut u64) -> (f64, f64) {
    let mut t: Vec<Duration> = (0..2000)
        .map(|_| {
            *wr_id += 1;
            let start = Instant::now();
            let w = wqe(
                *wr_id,
                IB_WR_RDMA_WRITE,
                IB_SEND_SIGNALED,
                0,
                &rdma(DST, p.key),
                &[(SRC, 64, p.key)],
            );
            p.d.send(p.a, &w);
            loop {
                if let Some(wc) = p.d.poll(p.cq).first() {
                    assert_eq!(wc.status(), IB_WC_SUCCESS, "WRITE {wr_id}");
                    break;
                }
                std::hint::spin_loop();
            }
            start.elapsed()
        })
        .collect();
    t.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (us(t[t.len() / 2]), us(t[t.len() * 99 / 100]))
}

/// The victim's MiB/s over [`RUN`].
fn victim_rate(p: &mut RcPair, wr_id: &mut u64) -> f64 {
    let start = Instant::now();
    let mut bytes = 0usize;
    while start.elapsed() < RUN {
        batch(p, VICTIM_SIZE, wr_id);
        bytes += BATCH * VICTIM_SIZE;
    }
    bytes as f64 / start.elapsed().as_secs_f64() / f64::from(1 << 20)
}

fn main() {
    let access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE;
    // One thread per device (the backend's default on a 2-core host; the
    // tests' devices have two).
    let start = || Dev::start_with(MEM, |l| l.with_threads(1).expect("threads"));
    let mut victim = rc_pair_on(start(), access, access, 0);
    let mut flooder = rc_pair_on(start(), access, access, 0);
    let mut id = 0;
    batch(&mut victim, VICTIM_SIZE, &mut id); // warm up
    let alone = victim_rate(&mut victim, &mut id);
    let (m, p99) = victim_latency(&mut victim, &mut id);
    println!(
        "fairness: victim alone: 64 KiB WRITEs {alone:.0} MiB/s; 64 B WRITE latency {m:.1} µs median, {p99:.1} µs p99"
    );
    for (size, name) in [(64 << 10, "64 KiB"), (4 << 20, "4 MiB")] {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let handle = thread::spawn(move || {
            let mut fid = 0;
            let mut moved = 0usize;
            let start = Instant::now();
            while !stop2.load(Ordering::Relaxed) {
                batch(&mut flooder, size, &mut fid);
                moved += BATCH * size;
            }
            let rate = moved as f64 / start.elapsed().as_secs_f64() / f64::from(1 << 20);
            (flooder, rate)
        });
        thread::sleep(Duration::from_millis(200));
        let shared = victim_rate(&mut victim, &mut id);
        let (m, p99) = victim_latency(&mut victim, &mut id);
        stop.store(true, Ordering::Relaxed);
        let (f, frate) = handle.join().expect("flooder");
        flooder = f;
        println!(
            "fairness: with a {name} flood ({frate:.0} MiB/s): victim {shared:.0} MiB/s ({:.2} of alone); latency {m:.1} µs median, {p99:.1} µs p99",
            shared / alone
        );
    }
    victim.d.finish();
    flooder.d.finish();
}
