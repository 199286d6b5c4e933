// SPDX-License-Identifier: GPL-2.0
//! RDMA WRITE and SEND between two devices beside memcpy of the same bytes.
//!
//! Two devices of one process (two guests), each with its own guest memory
//! file, served in-process over vhost-user sockets (the tests' support); an
//! RC QP on the first connected to one on the second, a DMA MR on each.
//! Messages go in batches of eight with one kick (only the last signaled;
//! for SEND, eight receives posted first). A bandwidth measurement keeps
//! the send queue full, as perftest's `--tx-depth` does: two batches in
//! flight (the queue's sixteen slots), the next posted as soon as the
//! oldest completed, for about 64 MiB; the reference copies the same bytes
//! from the first memory file's mapping to the second's, in eights. Each
//! is repeated and the median taken. Then the work-request rate of 64-byte
//! WRITEs and SENDs for a second each way: one batch at a time (each
//! batch waits for the last: the device sleeps and is woken per batch,
//! which bounds this rate by a thread wake-up), and with the queue kept
//! full (what the engine does per work request). Last, the 64-byte WRITE
//! rate over four QP pairs between devices of one and of two threads
//! each (`--threads`; half the QPs on each thread).
//!
//! Prints a table; with `VRDMA_BENCH_CSV` set, also writes it there as CSV
//! (`make bench` collects it). `VRDMA_BENCH_ONLY=bandwidth`, `rate` or
//! `threads` runs one part (to profile it). Timing never fails the run; wrong data or a
//! failed completion does.

#[path = "../tests/support/mod.rs"]
mod support;

use std::hint::black_box;
use std::io::Write;
use std::time::{Duration, Instant};

use vhost_user_rdma::ib::*;
use vm_memory::{GuestAddress, GuestMemoryBackend};

use support::*;

/// Guest memory of each device: rings and buffers, then the payloads.
const MEM: usize = 24 << 20;
const SRC: u64 = DATA;
const DST: u64 = DATA + (8 << 20);
/// Messages per batch (one kick).
const BATCH: usize = 8;
/// Batches in flight when the queue is kept full: the SQ and RQ vrings have
/// sixteen slots.
const DEPTH: usize = 2;
const SIZES: [usize; 10] = [
    64,
    256,
    1 << 10,
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    8 << 20,
];

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Write,
    Send,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Write => "WRITE",
            Op::Send => "SEND",
        }
    }
}

/// Completions of CQ `cq` of `d` so far, each checked.
fn reap(d: &mut Dev, cq: u32, what: &str) -> usize {
    let wcs = d.poll(cq);
    for wc in &wcs {
        assert_eq!(wc.status(), IB_WC_SUCCESS, "{what}: {wc:?}");
    }
    wcs.len()
}

/// One batch of `op`s of `size` bytes from `src` (address, lkey) (a WRITE
/// to `dst`, address and rkey), only the last signaled.
fn batch(wr_id: &mut u64, op: Op, size: usize, src: (u64, u32), dst: (u64, u32)) -> Vec<Vec<u8>> {
    (0..BATCH)
        .map(|i| {
            let flags = if i + 1 == BATCH { IB_SEND_SIGNALED } else { 0 };
            *wr_id += 1;
            let sge = [(src.0, size as u32, src.1)];
            match op {
                Op::Write => wqe(
                    *wr_id,
                    IB_WR_RDMA_WRITE,
                    flags,
                    0,
                    &rdma(dst.0, dst.1),
                    &sge,
                ),
                Op::Send => wqe(*wr_id, IB_WR_SEND, flags, 0, &[], &sge),
            }
        })
        .collect()
}

/// Posts one batch of `op`s of `size` bytes (and, for SEND, its receives).
fn post(p: &mut CrossPair, wr_id: &mut u64, op: Op, size: usize) {
    if op == Op::Send {
        for _ in 0..BATCH {
            *wr_id += 1;
            p.y.recv(p.qy, *wr_id, &[(DST, size as u32, p.ky)]);
        }
    }
    let wqes = batch(wr_id, op, size, (SRC, p.kx), (DST, p.ky));
    p.x.send_all(p.qx, &wqes);
}

/// `batches` batches of `op`s of `size` bytes, at most `depth` in flight:
/// the next is posted once the oldest has completed (its signaled send and,
/// for SEND, its receives). The time from the first post to the last
/// completion.
fn stream(
    p: &mut CrossPair,
    wr_id: &mut u64,
    op: Op,
    size: usize,
    batches: usize,
    depth: usize,
) -> Duration {
    let start = Instant::now();
    let deadline = start + Duration::from_secs(60);
    let (mut posted, mut sent, mut received) = (0, 0, 0);
    let recvs = |n: usize| if op == Op::Send { n * BATCH } else { 0 };
    while sent < batches || received < recvs(batches) {
        // A batch's slots are free again once it completed on both sides.
        let done = if op == Op::Send {
            sent.min(received / BATCH)
        } else {
            sent
        };
        while posted < batches && posted < done + depth {
            post(p, wr_id, op, size);
            posted += 1;
        }
        sent += reap(&mut p.x, p.cx, op.name());
        if op == Op::Send {
            received += reap(&mut p.y, p.cy, "receive");
        }
        assert!(
            Instant::now() < deadline,
            "{}: {sent} of {batches} batches completed, {received} receives",
            op.name()
        );
        std::hint::spin_loop();
    }
    start.elapsed()
}

/// CPU time the devices' event loops (threads `*-laneN`) have run so far
/// (`/proc/self/task/*/schedstat`, nanoseconds): what a work request costs
/// the device, apart from the harness that posts and polls it.
fn device_cpu() -> Duration {
    let mut ns = 0;
    for task in std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .flatten()
    {
        let path = task.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if !comm.contains("-lane") {
            continue;
        }
        let stat = std::fs::read_to_string(path.join("schedstat")).unwrap_or_default();
        ns += stat
            .split_whitespace()
            .next()
            .and_then(|t| t.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Duration::from_nanos(ns)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn mib_per_s(bytes: usize, t: Duration) -> f64 {
    bytes as f64 / t.as_secs_f64() / f64::from(1 << 20)
}

/// Repetitions of the reference copy of a size: enough that each size
/// moves about 512 MiB.
fn reps(size: usize) -> usize {
    ((512 << 20) / (size * BATCH)).clamp(21, 2001) | 1
}

/// Batches of one bandwidth measurement: about 64 MiB.
fn batches(size: usize) -> usize {
    ((64 << 20) / (size * BATCH)).clamp(16, 4096)
}

/// Bandwidth measurements of a size (the median is taken).
const RUNS: usize = 5;

/// QP pairs of the threads measurement (the test devices' CQ count).
const PAIRS: usize = 4;

/// 64-byte WRITEs per second of the clock and per second of the devices'
/// CPU over [`PAIRS`] RC pairs between two devices of `threads` threads
/// each (consecutive QPs: with two threads, half on each), every SQ kept
/// full, for about a second.
fn threads_rate(threads: u32) -> (f64, f64) {
    let start = || Dev::start_with(MEM_SIZE, |l| l.with_threads(threads).expect("threads"));
    let (mut x, mut y) = (start(), start());
    let (px, py) = (x.create_pd(), y.create_pd());
    let (kx, ky) = (x.dma_mr(px, ALL), y.dma_mr(py, ALL));
    let cy = y.create_cq(4);
    let (gx, gy) = (x.gid, y.gid);
    // (send CQ, QP on x, QP on y, batches in flight)
    let mut pairs: Vec<(u32, u32, u32, usize)> = (0..PAIRS)
        .map(|_| {
            let cq = x.create_cq(16);
            (
                cq,
                x.create_qp(px, IB_QPT_RC, cq, false),
                y.create_qp(py, IB_QPT_RC, cy, false),
                0,
            )
        })
        .collect();
    for &(_, qx, qy, _) in &pairs {
        x.rc_up(qx, gy, qy, ALL, 7);
        y.rc_up(qy, gx, qx, ALL, 7);
    }
    let mut wr_id = 0u64;
    let (begin, cpu, mut wrs) = (Instant::now(), device_cpu(), 0usize);
    while begin.elapsed() < Duration::from_secs(1) {
        for (cq, qx, _, in_flight) in pairs.iter_mut() {
            *in_flight -= reap(&mut x, *cq, "WRITE");
            while *in_flight < DEPTH {
                let wqes = batch(&mut wr_id, Op::Write, 64, (DATA, kx), (DATA + 4096, ky));
                x.send_all(*qx, &wqes);
                *in_flight += 1;
                wrs += BATCH;
            }
        }
        std::hint::spin_loop();
    }
    for (cq, _, _, in_flight) in pairs.iter_mut() {
        while *in_flight > 0 {
            *in_flight -= reap(&mut x, *cq, "WRITE");
        }
    }
    let (wall, cpu) = (begin.elapsed(), device_cpu() - cpu);
    x.finish();
    y.finish();
    (
        wrs as f64 / wall.as_secs_f64(),
        wrs as f64 / cpu.as_secs_f64(),
    )
}

fn main() {
    // One thread per device (the backend's default on a 2-core host; the
    // tests' devices have two): `threads_rate` compares.
    let start = || Dev::start_with(MEM, |l| l.with_threads(1).expect("threads"));
    let mut p = cross_rc_pair(start(), start(), 7);
    // Room for the receive completions of two batches of SENDs: the CQ's
    // whole vring.
    for _ in 0..4 {
        p.y.post(Dev::cq_q(p.cy), &[0u8; 64], true);
    }
    let mut wr_id = 0;
    let max = SIZES[SIZES.len() - 1];
    p.x.fill(SRC, &pattern(max, 3));
    let src_ptr =
        p.x.mem
            .get_host_address(GuestAddress(SRC))
            .expect("host address");
    let dst_ptr =
        p.y.mem
            .get_host_address(GuestAddress(DST))
            .expect("host address");
    let mut csv = String::from("op,bytes,backend_mib_s,memcpy_mib_s,ratio\n");

    println!(
        "RDMA WRITE and SEND (RC, device to device, {DEPTH} batches of {BATCH} in flight, median)"
    );
    println!("vs memcpy between the two guest memories");
    println!(
        "{:>6} {:>8} {:>14} {:>14} {:>7}",
        "op", "bytes", "backend MiB/s", "memcpy MiB/s", "ratio"
    );
    let only = std::env::var("VRDMA_BENCH_ONLY").unwrap_or_default();
    let runs = |part: &str| only.is_empty() || only == part;
    for op in [Op::Write, Op::Send] {
        for size in SIZES.into_iter().filter(|_| runs("bandwidth")) {
            let n = reps(size);
            p.y.fill(DST, &vec![0u8; size]);
            stream(&mut p, &mut wr_id, op, size, 3, DEPTH);
            assert!(
                p.y.read(DST, size) == p.x.read(SRC, size),
                "{} of {size} bytes: wrong data",
                op.name()
            );
            let b = batches(size);
            let backend = median(
                (0..RUNS)
                    .map(|_| stream(&mut p, &mut wr_id, op, size, b, DEPTH) / b as u32)
                    .collect(),
            );

            // SAFETY: both ranges lie inside their guest memory mappings
            // (checked by get_host_address and the sizes above), they are
            // different mappings, and the backend is idle: every message
            // completed above.
            let (src, dst) = unsafe {
                (
                    std::slice::from_raw_parts(src_ptr, size),
                    std::slice::from_raw_parts_mut(dst_ptr, size),
                )
            };
            let mut copy = || {
                let start = Instant::now();
                for _ in 0..BATCH {
                    black_box(&mut *dst).copy_from_slice(black_box(src));
                }
                start.elapsed()
            };
            for _ in 0..3 {
                copy();
            }
            let memcpy = median((0..n).map(|_| copy()).collect());
            let (b, m) = (
                mib_per_s(size * BATCH, backend),
                mib_per_s(size * BATCH, memcpy),
            );
            println!(
                "{:>6} {size:>8} {b:>14.0} {m:>14.0} {:>7.2}",
                op.name(),
                b / m
            );
            csv += &format!("{},{size},{b:.1},{m:.1},{:.3}\n", op.name(), b / m);
        }
    }

    println!("work requests per second, 64 bytes: one batch of {BATCH} at a time, and {DEPTH} in flight;");
    println!("per second of the clock, and per second of the devices' CPU time (per core)");
    let mut rates = String::from("op,bytes,in_flight,wr_per_s,wr_per_cpu_s\n");
    for op in [Op::Write, Op::Send] {
        for depth in [1, DEPTH].into_iter().filter(|_| runs("rate")) {
            let (start, cpu, mut wrs) = (Instant::now(), device_cpu(), 0);
            while start.elapsed() < Duration::from_secs(1) {
                stream(&mut p, &mut wr_id, op, 64, 64, depth);
                wrs += 64 * BATCH;
            }
            let rate = wrs as f64 / start.elapsed().as_secs_f64();
            let per_core = wrs as f64 / (device_cpu() - cpu).as_secs_f64();
            let in_flight = depth * BATCH;
            println!(
                "{:>6} {in_flight:>3} in flight {rate:>12.0} /s {per_core:>12.0} /CPU s",
                op.name()
            );
            rates += &format!("{},64,{in_flight},{rate:.0},{per_core:.0}\n", op.name());
        }
    }

    p.x.finish();
    p.y.finish();

    let mut by_threads = String::from("threads,wr_per_s,wr_per_cpu_s\n");
    if runs("threads") {
        println!("64-byte WRITEs over {PAIRS} QP pairs, every SQ full, by threads per device");
    }
    for threads in [1, 2].into_iter().filter(|_| runs("threads")) {
        let (rate, per_core) = threads_rate(threads);
        println!("{threads:>3} threads {rate:>12.0} /s {per_core:>12.0} /CPU s");
        by_threads += &format!("{threads},{rate:.0},{per_core:.0}\n");
    }

    if let Ok(path) = std::env::var("VRDMA_BENCH_CSV") {
        let mut f = std::fs::File::create(&path).expect("CSV file");
        f.write_all(csv.as_bytes()).expect("CSV");
        std::fs::write(path.replace(".csv", "-rate.csv"), rates).expect("rate CSV");
        std::fs::write(path.replace(".csv", "-threads.csv"), by_threads).expect("threads CSV");
    }
}
