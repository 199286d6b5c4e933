// SPDX-License-Identifier: GPL-2.0
//! RDMA WRITE and SEND between two devices beside memcpy of the same bytes.
//!
//! Two devices of one process (two guests), each with its own guest memory
//! file, served in-process over vhost-user sockets (the tests' support); an
//! RC QP on the first connected to one on the second, a DMA MR on each. For
//! each message size a measurement posts a batch of eight messages with
//! one kick (only the last signaled; for SEND, eight receives posted first)
//! and busy-polls for the completions; the reference copies the same bytes
//! as many times from the first memory file's mapping to the second's. Each
//! is repeated and the median taken. Then the work-request rate of 64-byte
//! WRITEs and SENDs, batches back to back for a second.
//!
//! Prints a table; with `VRDMA_BENCH_CSV` set, also writes it there as CSV
//! (`make bench` collects it). Timing never fails the run; wrong data or a
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
/// Messages per measurement (the SQ holds eight).
const BATCH: usize = 8;
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

/// Polls CQ `cq` of `d` until `n` completions came; checks them.
fn spin(d: &mut Dev, cq: u32, n: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = 0;
    while got < n {
        for wc in d.poll(cq) {
            assert_eq!(wc.status(), IB_WC_SUCCESS, "{what}: {wc:?}");
            got += 1;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {got} of {n} completions"
        );
        std::hint::spin_loop();
    }
}

/// One batch of `op`s of `size` bytes, posted and completed.
fn batch(p: &mut CrossPair, wr_id: &mut u64, op: Op, size: usize) -> Duration {
    let start = Instant::now();
    if op == Op::Send {
        for _ in 0..BATCH {
            *wr_id += 1;
            p.y.recv(p.qy, *wr_id, &[(DST, size as u32, p.ky)]);
        }
    }
    let wqes: Vec<Vec<u8>> = (0..BATCH)
        .map(|i| {
            let flags = if i + 1 == BATCH { IB_SEND_SIGNALED } else { 0 };
            *wr_id += 1;
            let sge = [(SRC, size as u32, p.kx)];
            match op {
                Op::Write => wqe(*wr_id, IB_WR_RDMA_WRITE, flags, 0, &rdma(DST, p.ky), &sge),
                Op::Send => wqe(*wr_id, IB_WR_SEND, flags, 0, &[], &sge),
            }
        })
        .collect();
    p.x.send_all(p.qx, &wqes);
    spin(&mut p.x, p.cx, 1, op.name());
    if op == Op::Send {
        spin(&mut p.y, p.cy, BATCH, "receive");
    }
    start.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn mib_per_s(bytes: usize, t: Duration) -> f64 {
    bytes as f64 / t.as_secs_f64() / f64::from(1 << 20)
}

/// Repetitions of a size: enough that each size moves about 512 MiB.
fn reps(size: usize) -> usize {
    ((512 << 20) / (size * BATCH)).clamp(21, 2001) | 1
}

fn main() {
    let mut p = cross_rc_pair(Dev::start_with_mem(MEM), Dev::start_with_mem(MEM), 7);
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

    println!("RDMA WRITE and SEND (RC, device to device, {BATCH} per measurement, median)");
    println!("vs memcpy between the two guest memories");
    println!(
        "{:>6} {:>8} {:>14} {:>14} {:>7}",
        "op", "bytes", "backend MiB/s", "memcpy MiB/s", "ratio"
    );
    for op in [Op::Write, Op::Send] {
        for size in SIZES {
            let n = reps(size);
            p.y.fill(DST, &vec![0u8; size]);
            for _ in 0..3 {
                batch(&mut p, &mut wr_id, op, size);
            }
            assert!(
                p.y.read(DST, size) == p.x.read(SRC, size),
                "{} of {size} bytes: wrong data",
                op.name()
            );
            let backend = median(
                (0..n)
                    .map(|_| batch(&mut p, &mut wr_id, op, size))
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

    println!("work requests per second, 64 bytes, batches of {BATCH} back to back");
    let mut rates = String::from("op,bytes,wr_per_s\n");
    for op in [Op::Write, Op::Send] {
        let (start, mut wrs) = (Instant::now(), 0);
        while start.elapsed() < Duration::from_secs(1) {
            batch(&mut p, &mut wr_id, op, 64);
            wrs += BATCH;
        }
        let rate = wrs as f64 / start.elapsed().as_secs_f64();
        println!("{:>6} {rate:>12.0}", op.name());
        rates += &format!("{},64,{rate:.0}\n", op.name());
    }

    if let Ok(path) = std::env::var("VRDMA_BENCH_CSV") {
        let mut f = std::fs::File::create(&path).expect("CSV file");
        f.write_all(csv.as_bytes()).expect("CSV");
        let rates_path = path.replace(".csv", "-rate.csv");
        std::fs::write(rates_path, rates).expect("rate CSV");
    }
    p.x.finish();
    p.y.finish();
}
