// SPDX-License-Identifier: GPL-2.0
//! Large RDMA WRITE throughput inside the backend beside plain memcpy.
//!
//! One device served in-process over a vhost-user socket (the tests'
//! support), two RC QPs connected to each other, one DMA MR. For each size,
//! a measurement posts a batch of WRITEs of that size from one QP to the
//! other (only the last signaled) and busy-polls for its completion; the
//! reference copies the same bytes as many times with `copy_from_slice`
//! between the same two buffers of guest memory (a shared file mapping,
//! as the backend sees it). Each is repeated and the median taken.
//! Prints size, backend MiB/s, memcpy MiB/s and their ratio. Timing never
//! fails the run; wrong data or a failed completion does.

#[path = "../tests/support/mod.rs"]
mod support;

use std::hint::black_box;
use std::time::{Duration, Instant};

use vhost_user_rdma::ib::*;
use vm_memory::{GuestAddress, GuestMemoryBackend};

use support::*;

/// Guest memory: rings and buffers, then source and destination.
const MEM: usize = 32 << 20;
const SRC: u64 = DATA;
const DST: u64 = DATA + (16 << 20);
/// WRITEs per measurement (the SQ holds 16).
const BATCH: usize = 8;
const SIZES: [(usize, &str); 4] = [
    (4 << 10, "4 KiB"),
    (64 << 10, "64 KiB"),
    (1 << 20, "1 MiB"),
    (8 << 20, "8 MiB"),
];

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn mib_per_s(bytes: usize, t: Duration) -> f64 {
    bytes as f64 / t.as_secs_f64() / f64::from(1 << 20)
}

/// Repetitions of a size: enough that each size moves about 1 GiB.
fn reps(size: usize) -> usize {
    ((1 << 30) / (size * BATCH)).clamp(21, 2001) | 1
}

/// One batch of WRITEs, posted and completed.
fn write_batch(p: &mut RcPair, size: usize, wr_id: &mut u64) -> Duration {
    let start = Instant::now();
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
    let deadline = start + Duration::from_secs(30);
    let wcs = loop {
        let wcs = p.d.poll(p.cq);
        if !wcs.is_empty() {
            break wcs;
        }
        assert!(Instant::now() < deadline, "no completion for WRITE {wr_id}");
        std::hint::spin_loop();
    };
    let elapsed = start.elapsed();
    assert_eq!(wcs.len(), 1, "{wcs:?}");
    assert_eq!(
        (wcs[0].wr_id(), wcs[0].status(), wcs[0].byte_len()),
        (*wr_id, IB_WC_SUCCESS, size as u32),
        "{wcs:?}"
    );
    elapsed
}

fn main() {
    let d = Dev::start_with_mem(MEM);
    let mut p = rc_pair_on(d, ALL, ALL, 0);
    let max = SIZES[SIZES.len() - 1].0;
    p.d.fill(SRC, &pattern(max, 3));
    let host = |addr: u64| {
        p.d.mem
            .get_host_address(GuestAddress(addr))
            .expect("host address")
    };
    let (src_ptr, dst_ptr) = (host(SRC), host(DST));

    println!("RDMA WRITE (RC, {BATCH} per measurement, median) vs copy_from_slice, same memory");
    println!(
        "{:>8} {:>14} {:>14} {:>7}",
        "size", "backend MiB/s", "memcpy MiB/s", "ratio"
    );
    let mut wr_id = 0;
    for (size, name) in SIZES {
        let n = reps(size);
        p.d.fill(DST, &vec![0u8; size]);
        for _ in 0..3 {
            write_batch(&mut p, size, &mut wr_id);
        }
        assert!(
            p.d.read(DST, size) == p.d.read(SRC, size),
            "WRITE of {name}: wrong data"
        );
        let backend = median(
            (0..n)
                .map(|_| write_batch(&mut p, size, &mut wr_id))
                .collect(),
        );

        // SAFETY: both ranges lie inside the guest memory mapping (checked
        // by get_host_address and the sizes above), do not overlap, and the
        // backend is idle: its last WRITE completed above.
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
        println!("{name:>8} {b:>14.0} {m:>14.0} {:>7.2}", b / m);
    }
    p.d.finish();
}
