// SPDX-License-Identifier: GPL-2.0
//! A device's QPs served by several threads (`--threads`, `src/lane.rs`):
//! what QPs of different lanes share stays consistent while both lanes
//! run at once.

mod support;

use std::collections::BTreeSet;

use support::*;
use vhost_user_rdma::ib::*;
use vm_memory::{Bytes, GuestAddress};

/// Two RC pairs of one device on two lanes (QPs `n`, `n + 2` and `n + 1`,
/// `n + 3`), completing into one CQ, fetch-and-add the same word of the
/// device's memory: every add lands (the word ends at the number of adds)
/// and each returns a value no other returned.
#[test]
fn atomics_of_two_lanes_on_one_word_lose_no_update() {
    const ROUNDS: usize = 400;
    const PER_QP: usize = 8;
    let mut d = Dev::start();
    let pd = d.create_pd();
    let cq = d.create_cq(2 * PER_QP as u16);
    let key = d.dma_mr(pd, ALL);
    let qps: Vec<u32> = (0..4)
        .map(|_| d.create_qp(pd, IB_QPT_RC, cq, false))
        .collect();
    let dev = d.dev.clone();
    let lane = |qpn| dev.ctrl().lanes().index_of(qpn);
    assert_eq!(dev.ctrl().lanes().count(), 2);
    let (a, b) = (qps[0], qps[1]);
    assert_ne!(lane(a), lane(b), "two lanes");
    let gid = d.gid;
    for (x, y) in [(qps[0], qps[2]), (qps[1], qps[3])] {
        assert_eq!(lane(x), lane(y));
        d.rc_up(x, gid, y, ALL, 7);
        d.rc_up(y, gid, x, ALL, 7);
    }
    let word = DATA;
    d.mem
        .write_slice(&0u64.to_le_bytes(), GuestAddress(word))
        .expect("word");
    let results = DATA + 0x1000;
    let mut seen = BTreeSet::new();
    for round in 0..ROUNDS {
        for (i, qp) in [a, b].into_iter().enumerate() {
            let wqes: Vec<Vec<u8>> = (0..PER_QP)
                .map(|k| {
                    let slot = results + 8 * (i * PER_QP + k) as u64;
                    wqe(
                        (round * 2 * PER_QP + i * PER_QP + k) as u64,
                        IB_WR_ATOMIC_FETCH_AND_ADD,
                        IB_SEND_SIGNALED,
                        0,
                        &atomic_wr(word, 1, 0, key),
                        &[(slot, 8, key)],
                    )
                })
                .collect();
            d.send_all(qp, &wqes);
        }
        let wcs = d.wait(cq, 2 * PER_QP);
        assert!(
            wcs.iter().all(|wc| wc.status() == IB_WC_SUCCESS),
            "round {round}: {wcs:?}"
        );
        for slot in 0..2 * PER_QP {
            let old = d.read(results + 8 * slot as u64, 8);
            let old = u64::from_le_bytes(old.try_into().expect("8 bytes"));
            assert!(seen.insert(old), "round {round}: {old} returned twice");
        }
    }
    let total = (ROUNDS * 2 * PER_QP) as u64;
    assert_eq!(d.read(word, 8), total.to_le_bytes(), "adds lost");
    assert_eq!(seen, (0..total).collect::<BTreeSet<_>>());
    d.finish();
}
