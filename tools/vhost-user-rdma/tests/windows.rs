// SPDX-License-Identifier: GPL-2.0
//! Memory windows over a real vhost-user socket (see `data_path.rs` for the
//! set-up): allocation, binding by work request, remote access through a
//! window's rkey within its binding only, invalidation, and what a bound
//! window keeps alive; MODIFY_MR, which changes a user MR's PD and rights
//! in place unless a window is bound to it.

mod support;

use support::*;
use vhost_user_rdma::abi::*;
use vhost_user_rdma::ib::*;
use zerocopy::little_endian::U32;
use zerocopy::IntoBytes;

/// The user MR's address, length and the guest page it lies on.
const IOVA: u64 = 0x1000_0000;
const PAGE: u64 = DATA + 0x6_0000;
const RW: u32 = IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE;

/// Posts `el` on `qpn` and returns its completion's (status, opcode).
fn run(d: &mut Dev, cq: u32, qpn: u32, el: &[u8]) -> (u8, u8) {
    d.send(qpn, el);
    let wc = d.wait(cq, 1).remove(0);
    (wc.status(), wc.opcode())
}

/// An RDMA WRITE of 16 bytes from `DATA` (DMA MR `key`) to `addr`, `rkey`.
fn write(wr_id: u64, addr: u64, rkey: u32, key: u32) -> Vec<u8> {
    wqe(
        wr_id,
        IB_WR_RDMA_WRITE,
        IB_SEND_SIGNALED,
        0,
        &rdma(addr, rkey),
        &[(DATA, 16, key)],
    )
}

#[test]
fn windows_reach_only_what_they_are_bound_to() {
    let mut d = Dev::start();
    let pd = d.create_pd();
    let cq = d.create_cq(12);
    let key = d.dma_mr(pd, ALL);
    let qps: Vec<u32> = (0..4)
        .map(|_| d.create_qp(pd, IB_QPT_RC, cq, false))
        .collect();
    let gid = d.gid;
    for (x, y) in [(0, 1), (1, 0), (2, 3), (3, 2)] {
        d.rc_up(qps[x], gid, qps[y], ALL, 0);
    }
    let [a, b, c, e] = [qps[0], qps[1], qps[2], qps[3]];
    // 0x800 bytes at IOVA over PAGE, windows may be bound to it.
    let table = DATA + 0x7_0000;
    d.fill(table, &PAGE.to_le_bytes());
    let (st, r) = reg_user_mr(&mut d, pd, ALL | IB_ACCESS_MW_BIND, 0x800, IOVA, table, 1);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    let (mrn, mr_key) = (le32(&r, 0), le32(&r, 4));
    d.fill(DATA, &pattern(16, 3));

    assert_eq!(alloc_mw(&mut d, pd, 3).0, VIRTIO_RDMA_S_INVALID, "type 3");
    assert_eq!(alloc_mw(&mut d, 999, 2).0, VIRTIO_RDMA_S_NOT_FOUND, "no PD");
    let (st, w2, w2_key) = alloc_mw(&mut d, pd, IB_MW_TYPE_2);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    assert_eq!(w2_key >> 8, w2, "a window's rkey names it");
    assert_ne!(w2, mrn, "windows and MRs share one handle space");

    // Type 2, bound on b (the responder of a's requests): reachable from a
    // within its binding, and no longer once invalidated.
    let w2_bound = next_key(w2_key);
    let el = bind_wr(1, w2_key, w2_bound, mr_key, IOVA + 0x100, 0x100, RW);
    assert_eq!(run(&mut d, cq, b, &el), (IB_WC_SUCCESS, IB_WC_BIND_MW));
    assert_eq!(
        run(&mut d, cq, a, &write(2, IOVA + 0x1f0, w2_bound, key)).0,
        IB_WC_SUCCESS
    );
    assert_eq!(d.read(PAGE + 0x1f0, 16), pattern(16, 3));
    let (st, _) = d.cmd(VIRTIO_RDMA_CMD_DEREG_MR, &pair(mrn, 0), 0);
    assert_eq!(
        st, VIRTIO_RDMA_S_BUSY,
        "DEREG_MR of an MR with a window bound"
    );
    let el = wqe(3, IB_WR_LOCAL_INV, IB_SEND_SIGNALED, w2_bound, &[], &[]);
    assert_eq!(run(&mut d, cq, b, &el), (IB_WC_SUCCESS, IB_WC_LOCAL_INV));
    let st = run(&mut d, cq, a, &write(4, IOVA + 0x100, w2_bound, key)).0;
    assert_eq!(st, IB_WC_REM_ACCESS_ERR, "through an invalidated window");

    // Type 1, bound on e: reachable from c (any QP of its PD), not past its
    // end, not once unbound. Type 2, now free, bound on c: not reachable
    // through e, the responder of c's requests.
    let (st, w1, w1_key) = alloc_mw(&mut d, pd, IB_MW_TYPE_1);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    let w1_bound = next_key(w1_key);
    let el = bind_wr(5, w1_key, w1_bound, mr_key, IOVA, 0x80, RW);
    assert_eq!(run(&mut d, cq, e, &el), (IB_WC_SUCCESS, IB_WC_BIND_MW));
    let w2_again = next_key(w2_bound);
    let el = bind_wr(6, w2_bound, w2_again, mr_key, IOVA, 0x800, RW);
    assert_eq!(
        run(&mut d, cq, c, &el).0,
        IB_WC_SUCCESS,
        "rebinding a freed type 2"
    );
    d.fill(DATA, &pattern(16, 4));
    assert_eq!(
        run(&mut d, cq, c, &write(7, IOVA + 0x70, w1_bound, key)).0,
        IB_WC_SUCCESS
    );
    assert_eq!(d.read(PAGE + 0x70, 16), pattern(16, 4));
    let el = bind_wr(8, w1_bound, w1_bound, 0, 0, 0, 0);
    assert_eq!(run(&mut d, cq, e, &el).0, IB_WC_SUCCESS, "unbinding type 1");
    let st = run(&mut d, cq, c, &write(9, IOVA + 0x70, w2_again, key)).0;
    assert_eq!(
        st, IB_WC_REM_ACCESS_ERR,
        "a type 2 window through another QP"
    );
    assert_eq!(d.read(PAGE + 0x70, 16), pattern(16, 4), "nothing written");

    // Destroying c frees the window bound to it: the MR may go.
    d.ok(VIRTIO_RDMA_CMD_DESTROY_QP, &pair(c, 0), 0);
    d.ok(VIRTIO_RDMA_CMD_DEREG_MR, &pair(mrn, 0), 0);
    d.ok(VIRTIO_RDMA_CMD_DEALLOC_MW, &pair(w1, 0), 0);
    d.ok(VIRTIO_RDMA_CMD_DEALLOC_MW, &pair(w2, 0), 0);
    let (st, _) = d.cmd(VIRTIO_RDMA_CMD_DEALLOC_MW, &pair(w2, 0), 0);
    assert_eq!(st, VIRTIO_RDMA_S_NOT_FOUND);
    d.quiet(cq);
    d.finish();
}

#[test]
fn a_bind_that_breaks_a_rule_fails_with_mw_bind_err() {
    let mut d = Dev::start();
    let pd = d.create_pd();
    let cq = d.create_cq(12);
    let a = d.create_qp(pd, IB_QPT_RC, cq, false);
    let b = d.create_qp(pd, IB_QPT_RC, cq, false);
    let gid = d.gid;
    d.rc_up(a, gid, b, ALL, 0);
    d.rc_up(b, gid, a, ALL, 0);
    let table = DATA + 0x7_0000;
    d.fill(table, &PAGE.to_le_bytes());
    // The MR lacks IB_ACCESS_MW_BIND (C10-73).
    let (st, r) = reg_user_mr(&mut d, pd, ALL, 0x800, IOVA, table, 1);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    let mr_key = le32(&r, 4);
    let (st, _, w_key) = alloc_mw(&mut d, pd, IB_MW_TYPE_2);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    let el = bind_wr(1, w_key, next_key(w_key), mr_key, IOVA, 0x100, RW);
    assert_eq!(run(&mut d, cq, a, &el).0, IB_WC_MW_BIND_ERR);
    d.quiet(cq);
    d.finish();
}

/// MODIFY_MR request bytes.
fn modify_mr(mrn: u32, pdn: u32, access: u32, reserved: u32) -> Vec<u8> {
    VirtioRdmaCmdModifyMr {
        mrn: U32::new(mrn),
        pdn: U32::new(pdn),
        access_flags: U32::new(access),
        reserved: U32::new(reserved),
    }
    .as_bytes()
    .to_vec()
}

/// Two new RC QPs of `pd`, connected: (requester, responder).
fn pair_of(d: &mut Dev, pd: u32, cq: u32) -> (u32, u32) {
    let a = d.create_qp(pd, IB_QPT_RC, cq, false);
    let b = d.create_qp(pd, IB_QPT_RC, cq, false);
    let gid = d.gid;
    d.rc_up(a, gid, b, ALL, 0);
    d.rc_up(b, gid, a, ALL, 0);
    (a, b)
}

#[test]
fn modify_mr_changes_pd_and_rights_in_place() {
    let mut d = Dev::start();
    let (pd, pd2) = (d.create_pd(), d.create_pd());
    let cq = d.create_cq(12);
    let (key, key2) = (d.dma_mr(pd, ALL), d.dma_mr(pd2, ALL));
    let table = DATA + 0x7_0000;
    d.fill(table, &PAGE.to_le_bytes());
    let lw = IB_ACCESS_LOCAL_WRITE;
    let (st, r) = reg_user_mr(&mut d, pd, lw, 0x800, IOVA, table, 1);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    let (mrn, mr_key) = (le32(&r, 0), le32(&r, 4));
    d.fill(DATA, &pattern(16, 7));

    let (a, _) = pair_of(&mut d, pd, cq);
    let st = run(&mut d, cq, a, &write(1, IOVA, mr_key, key)).0;
    assert_eq!(st, IB_WC_REM_ACCESS_ERR, "local write only");
    d.ok(
        VIRTIO_RDMA_CMD_MODIFY_MR,
        &modify_mr(mrn, pd, lw | RW, 0),
        0,
    );
    let (a, _) = pair_of(&mut d, pd, cq);
    let st = run(&mut d, cq, a, &write(2, IOVA + 0x10, mr_key, key)).0;
    assert_eq!(st, IB_WC_SUCCESS, "remote write now, under the same key");
    assert_eq!(d.read(PAGE + 0x10, 16), pattern(16, 7));

    // Each refusal leaves the MR as it was.
    let dma_mrn = key >> 8;
    for (mrn, pdn, access, reserved, want, what) in [
        (999, pd, lw, 0, VIRTIO_RDMA_S_NOT_FOUND, "no such MR"),
        (mrn, 999, lw, 0, VIRTIO_RDMA_S_NOT_FOUND, "no such PD"),
        (
            mrn,
            pd,
            RW,
            0,
            VIRTIO_RDMA_S_INVALID,
            "remote write without local",
        ),
        (
            mrn,
            pd,
            lw | (1 << 30),
            0,
            VIRTIO_RDMA_S_INVALID,
            "unknown right",
        ),
        (mrn, pd, lw, 1, VIRTIO_RDMA_S_INVALID, "reserved"),
        (dma_mrn, pd, lw, 0, VIRTIO_RDMA_S_INVALID, "the DMA MR"),
    ] {
        let st = d.cmd(
            VIRTIO_RDMA_CMD_MODIFY_MR,
            &modify_mr(mrn, pdn, access, reserved),
            0,
        );
        assert_eq!(st.0, want, "{what}");
    }
    d.fill(DATA, &pattern(16, 8));
    let st = run(&mut d, cq, a, &write(3, IOVA + 0x20, mr_key, key)).0;
    assert_eq!(st, IB_WC_SUCCESS, "after the refusals");
    assert_eq!(d.read(PAGE + 0x20, 16), pattern(16, 8));

    // Another PD: its QPs reach the MR, the old PD's do not.
    d.ok(
        VIRTIO_RDMA_CMD_MODIFY_MR,
        &modify_mr(mrn, pd2, lw | RW, 0),
        0,
    );
    let st = run(&mut d, cq, a, &write(4, IOVA + 0x30, mr_key, key)).0;
    assert_eq!(st, IB_WC_REM_ACCESS_ERR, "a QP of the old PD");
    let (c, e) = pair_of(&mut d, pd2, cq);
    let st = run(&mut d, cq, c, &write(5, IOVA + 0x30, mr_key, key2)).0;
    assert_eq!(st, IB_WC_SUCCESS, "a QP of the new PD");
    assert_eq!(d.read(PAGE + 0x30, 16), pattern(16, 8));

    // A window bound to it keeps it as it is.
    d.ok(
        VIRTIO_RDMA_CMD_MODIFY_MR,
        &modify_mr(mrn, pd2, lw | RW | IB_ACCESS_MW_BIND, 0),
        0,
    );
    let (st, _, w_key) = alloc_mw(&mut d, pd2, IB_MW_TYPE_2);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    let bound = next_key(w_key);
    let el = bind_wr(6, w_key, bound, mr_key, IOVA, 0x100, RW);
    assert_eq!(run(&mut d, cq, e, &el), (IB_WC_SUCCESS, IB_WC_BIND_MW));
    let st = d.cmd(VIRTIO_RDMA_CMD_MODIFY_MR, &modify_mr(mrn, pd2, lw, 0), 0);
    assert_eq!(st.0, VIRTIO_RDMA_S_BUSY, "a window is bound");
    let st = run(&mut d, cq, c, &write(7, IOVA + 0x40, mr_key, key2)).0;
    assert_eq!(st, IB_WC_SUCCESS, "rights kept while bound");
    let el = wqe(8, IB_WR_LOCAL_INV, IB_SEND_SIGNALED, bound, &[], &[]);
    assert_eq!(run(&mut d, cq, e, &el), (IB_WC_SUCCESS, IB_WC_LOCAL_INV));
    d.ok(VIRTIO_RDMA_CMD_MODIFY_MR, &modify_mr(mrn, pd2, lw, 0), 0);
    let st = run(&mut d, cq, c, &write(9, IOVA + 0x50, mr_key, key2)).0;
    assert_eq!(st, IB_WC_REM_ACCESS_ERR, "rights taken away in place");
    d.quiet(cq);
    d.finish();
}
