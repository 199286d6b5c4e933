// SPDX-License-Identifier: GPL-2.0
//! Objects and the data path over real vhost-user sockets, in-process: each
//! test device is a backend thread serving a socket, driven by rust-vmm's
//! `Frontend` with guest memory in a file and split rings written by hand
//! (one control queue, the CQ queues pre-filled with CQE buffers, SQ/RQ
//! queues fed one element per descriptor). Two devices in one test share
//! the process, so delivery between them is guest memory to guest memory.
//! The device driver is `support/` (shared with the benchmarks).

mod support;

use std::thread;
use std::time::{Duration, Instant};

use vhost_user_rdma::abi::*;
use vhost_user_rdma::ib::*;
use virtio_bindings::bindings::virtio_ring::VIRTIO_RING_F_EVENT_IDX;
use vm_memory::{Bytes, GuestAddress};
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

use support::*;

#[test]
fn rc_send_recv_imm_inline_unsignaled() {
    let RcPair {
        mut d,
        cq,
        a,
        b,
        key,
    } = rc_pair(ALL, ALL, 0);
    // SEND of 3000 bytes from two SGEs crossing a page into two receive SGEs.
    let src = pattern(3000, 7);
    d.fill(DATA + 0xf00, &src[..1000]);
    d.fill(DATA + 0x3000, &src[1000..]);
    d.recv(
        b,
        11,
        &[(DATA + 0x10_0ff0, 100, key), (DATA + 0x10_2000, 4000, key)],
    );
    d.send(
        a,
        &wqe(
            1,
            IB_WR_SEND,
            IB_SEND_SIGNALED,
            0,
            &[],
            &[(DATA + 0xf00, 1000, key), (DATA + 0x3000, 2000, key)],
        ),
    );
    let wcs = d.wait(cq, 2);
    let recv = wcs
        .iter()
        .find(|w| w.wr_id() == 11)
        .expect("recv completion");
    let sent = wcs
        .iter()
        .find(|w| w.wr_id() == 1)
        .expect("send completion");
    assert_eq!(
        (recv.status(), recv.opcode(), recv.byte_len()),
        (IB_WC_SUCCESS, IB_WC_RECV, 3000)
    );
    assert_eq!((recv.0.qp_num.get(), recv.0.src_qp.get()), (b, a));
    assert_eq!((sent.status(), sent.opcode()), (IB_WC_SUCCESS, IB_WC_SEND));
    let mut got = d.read(DATA + 0x10_0ff0, 100);
    got.extend(d.read(DATA + 0x10_2000, 2900));
    assert_eq!(got, src);
    assert_eq!(
        d.read(DATA + 0x10_2000 + 2900, 4),
        vec![0; 4],
        "nothing past the message"
    );

    // SEND_WITH_IMM: immediate data as the guest wrote it.
    d.recv(b, 12, &[(DATA + 0x20_0000, 64, key)]);
    d.fill(DATA, b"hello");
    d.send(
        a,
        &wqe(
            2,
            IB_WR_SEND_WITH_IMM,
            IB_SEND_SIGNALED,
            0x1234_5678,
            &[],
            &[(DATA, 5, key)],
        ),
    );
    let wcs = d.wait(cq, 2);
    let recv = wcs.iter().find(|w| w.wr_id() == 12).expect("recv");
    assert_eq!(recv.0.wc_flags.get() & IB_WC_WITH_IMM, IB_WC_WITH_IMM);
    assert_eq!((recv.0.ex.get(), recv.byte_len()), (0x1234_5678, 5));
    assert_eq!(d.read(DATA + 0x20_0000, 5), b"hello");

    // Inline SEND: payload inside the element.
    d.recv(b, 13, &[(DATA + 0x20_1000, 64, key)]);
    let mut w = wqe(
        3,
        IB_WR_SEND,
        IB_SEND_SIGNALED | IB_SEND_INLINE,
        0,
        &[],
        &[],
    );
    w[20..24].copy_from_slice(&11u32.to_le_bytes());
    w.extend_from_slice(b"inline data");
    d.send(a, &w);
    let wcs = d.wait(cq, 2);
    assert!(wcs.iter().all(|w| w.status() == IB_WC_SUCCESS));
    assert_eq!(d.read(DATA + 0x20_1000, 11), b"inline data");

    // Unsignaled: the receiver completes, the sender does not.
    d.recv(b, 14, &[(DATA + 0x20_2000, 64, key)]);
    d.send(a, &wqe(4, IB_WR_SEND, 0, 0, &[], &[(DATA, 5, key)]));
    let wcs = d.wait(cq, 1);
    assert_eq!(wcs[0].wr_id(), 14);
    d.quiet(cq);
    d.finish();
}

#[test]
fn rc_write_read_atomics() {
    let RcPair {
        mut d,
        cq,
        a,
        b,
        key,
    } = rc_pair(ALL, ALL, 0);
    let src = pattern(5000, 3);
    d.fill(DATA, &src);
    // WRITE.
    d.send(
        a,
        &wqe(
            1,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &rdma(DATA + 0x10_0100, key),
            &[(DATA, 5000, key)],
        ),
    );
    let wc = d.wait(cq, 1)[0];
    assert_eq!(
        (wc.wr_id(), wc.status(), wc.opcode(), wc.byte_len()),
        (1, 0, IB_WC_RDMA_WRITE, 5000)
    );
    assert_eq!(d.read(DATA + 0x10_0100, 5000), src);
    // WRITE_WITH_IMM consumes a receive and reports the immediate.
    d.recv(b, 20, &[]);
    d.send(
        a,
        &wqe(
            2,
            IB_WR_RDMA_WRITE_WITH_IMM,
            IB_SEND_SIGNALED,
            99,
            &rdma(DATA + 0x18_0000, key),
            &[(DATA, 10, key)],
        ),
    );
    let wcs = d.wait(cq, 2);
    let r = wcs.iter().find(|w| w.wr_id() == 20).expect("recv");
    assert_eq!(
        (r.opcode(), r.byte_len(), r.0.ex.get()),
        (IB_WC_RECV_RDMA_WITH_IMM, 10, 99)
    );
    assert_eq!(d.read(DATA + 0x18_0000, 10), src[..10]);
    // READ.
    d.fill(DATA + 0x30_0000, b"remote bytes");
    d.send(
        a,
        &wqe(
            3,
            IB_WR_RDMA_READ,
            IB_SEND_SIGNALED,
            0,
            &rdma(DATA + 0x30_0000, key),
            &[(DATA + 0x31_0000, 6, key), (DATA + 0x31_1000, 6, key)],
        ),
    );
    let wc = d.wait(cq, 1)[0];
    assert_eq!(
        (wc.status(), wc.opcode(), wc.byte_len()),
        (0, IB_WC_RDMA_READ, 12)
    );
    assert_eq!(
        [d.read(DATA + 0x31_0000, 6), d.read(DATA + 0x31_1000, 6)].concat(),
        b"remote bytes"
    );
    // Atomics.
    let t = DATA + 0x32_0008;
    d.fill(t, &5u64.to_le_bytes());
    let res = DATA + 0x33_0000;
    d.send(
        a,
        &wqe(
            4,
            IB_WR_ATOMIC_CMP_AND_SWP,
            IB_SEND_SIGNALED,
            0,
            &atomic_wr(t, 5, 77, key),
            &[(res, 8, key)],
        ),
    );
    let wc = d.wait(cq, 1)[0];
    assert_eq!((wc.status(), wc.opcode()), (0, IB_WC_COMP_SWAP));
    assert_eq!(d.read(res, 8), 5u64.to_le_bytes());
    assert_eq!(d.read(t, 8), 77u64.to_le_bytes());
    d.send(
        a,
        &wqe(
            5,
            IB_WR_ATOMIC_CMP_AND_SWP,
            IB_SEND_SIGNALED,
            0,
            &atomic_wr(t, 5, 1, key),
            &[(res, 8, key)],
        ),
    );
    d.wait(cq, 1);
    assert_eq!(d.read(t, 8), 77u64.to_le_bytes(), "no swap on mismatch");
    assert_eq!(d.read(res, 8), 77u64.to_le_bytes());
    d.send(
        a,
        &wqe(
            6,
            IB_WR_ATOMIC_FETCH_AND_ADD,
            IB_SEND_SIGNALED,
            0,
            &atomic_wr(t, 3, 0, key),
            &[(res, 8, key)],
        ),
    );
    let wc = d.wait(cq, 1)[0];
    assert_eq!((wc.status(), wc.opcode()), (0, IB_WC_FETCH_ADD));
    assert_eq!(d.read(t, 8), 80u64.to_le_bytes());
    assert_eq!(d.read(res, 8), 77u64.to_le_bytes());
    // Misaligned atomic: invalid request.
    d.send(
        a,
        &wqe(
            7,
            IB_WR_ATOMIC_FETCH_AND_ADD,
            IB_SEND_SIGNALED,
            0,
            &atomic_wr(t + 4, 3, 0, key),
            &[(res, 8, key)],
        ),
    );
    assert_eq!(d.wait(cq, 1)[0].status(), IB_WC_REM_INV_REQ_ERR);
    assert_eq!(d.qp_state(a), IB_QPS_ERR);
    d.finish();
}

fn reg_wr(
    mrn: u32,
    key: u32,
    access: u32,
    npages: u32,
    iova: u64,
    length: u64,
    pages: u64,
) -> Vec<u8> {
    VirtioRdmaSqReg {
        mrn: U32::new(mrn),
        key: U32::new(key),
        access: U32::new(access),
        npages: U32::new(npages),
        iova: U64::new(iova),
        length: U64::new(length),
        pages: U64::new(pages),
    }
    .as_bytes()
    .to_vec()
}

#[test]
fn fast_reg_local_inv_send_with_inv() {
    let RcPair {
        mut d,
        cq,
        a,
        b,
        key,
    } = rc_pair(ALL, ALL, 0);
    let pd = 1;
    let r = d.ok(
        VIRTIO_RDMA_CMD_CREATE_MR,
        &[pair(pd, 0), pair(4, 0)].concat(),
        16,
    );
    let (mrn, key0) = (le32(&r, 0), le32(&r, 4));
    assert_eq!(key0 >> 8, mrn, "the key names the MR");
    // Page table: iova 0x7000_0800, 0x1000 bytes over two scattered pages.
    let table = DATA + 0x38_0000;
    d.fill(
        table,
        &[(DATA + 0x5000).to_le_bytes(), (DATA + 0x2000).to_le_bytes()].concat(),
    );
    let rkey = (mrn << 8) | 0x42;
    let access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE;
    d.send(
        a,
        &wqe(
            1,
            IB_WR_REG_MR,
            IB_SEND_SIGNALED,
            0,
            &reg_wr(mrn, rkey, access, 2, 0x7000_0800, 0x1000, table),
            &[],
        ),
    );
    let wc = d.wait(cq, 1)[0];
    assert_eq!((wc.status(), wc.opcode()), (IB_WC_SUCCESS, IB_WC_REG_MR));
    // The old key no longer works; the new one maps the scattered pages.
    let src = pattern(0x1000, 9);
    d.fill(DATA + 0x10_0000, &src);
    d.send(
        b,
        &wqe(
            2,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &rdma(0x7000_0800, rkey),
            &[(DATA + 0x10_0000, 0x1000, key)],
        ),
    );
    assert_eq!(d.wait(cq, 1)[0].status(), IB_WC_SUCCESS);
    assert_eq!(d.read(DATA + 0x5800, 0x800), src[..0x800]);
    assert_eq!(d.read(DATA + 0x2000, 0x800), src[0x800..]);
    // SEND_WITH_INV invalidates it on the receiver.
    d.recv(a, 30, &[(DATA + 0x11_0000, 16, key)]);
    d.send(
        b,
        &wqe(
            3,
            IB_WR_SEND_WITH_INV,
            IB_SEND_SIGNALED,
            rkey,
            &[],
            &[(DATA, 4, key)],
        ),
    );
    let wcs = d.wait(cq, 2);
    let r = wcs.iter().find(|w| w.wr_id() == 30).expect("recv");
    assert_eq!(
        r.0.wc_flags.get() & IB_WC_WITH_INVALIDATE,
        IB_WC_WITH_INVALIDATE
    );
    assert_eq!(r.0.ex.get(), rkey);
    // Re-register from the table MAP_MR_SG staged, key 0x43.
    let mut m = pair(mrn, 2);
    m.extend_from_slice(&0x7000_0800u64.to_le_bytes());
    m.extend_from_slice(&0x1000u64.to_le_bytes());
    m.extend_from_slice(&table.to_le_bytes());
    assert_eq!(le32(&d.ok(VIRTIO_RDMA_CMD_MAP_MR_SG, &m, 8), 0), 2);
    let rkey2 = (mrn << 8) | 0x43;
    d.send(
        a,
        &wqe(
            4,
            IB_WR_REG_MR,
            IB_SEND_SIGNALED,
            0,
            &reg_wr(mrn, rkey2, access, 0, 0x7000_0800, 0x1000, 0),
            &[],
        ),
    );
    assert_eq!(d.wait(cq, 1)[0].status(), IB_WC_SUCCESS);
    d.send(
        b,
        &wqe(
            5,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &rdma(0x7000_0800, rkey2),
            &[(DATA, 8, key)],
        ),
    );
    assert_eq!(d.wait(cq, 1)[0].status(), IB_WC_SUCCESS);
    // LOCAL_INV, then the key is refused.
    d.send(
        a,
        &wqe(6, IB_WR_LOCAL_INV, IB_SEND_SIGNALED, rkey2, &[], &[]),
    );
    let wc = d.wait(cq, 1)[0];
    assert_eq!((wc.status(), wc.opcode()), (IB_WC_SUCCESS, IB_WC_LOCAL_INV));
    d.send(
        b,
        &wqe(
            7,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &rdma(0x7000_0800, rkey2),
            &[(DATA, 8, key)],
        ),
    );
    let wcs = d.wait(cq, 1);
    assert_eq!((wcs[0].wr_id(), wcs[0].status()), (7, IB_WC_REM_ACCESS_ERR));
    assert_eq!(d.qp_state(b), IB_QPS_ERR);
    d.finish();
}

#[test]
fn rnr_and_flush() {
    // rnr_retry 0: no receive posted fails at once.
    let RcPair {
        mut d,
        cq,
        a,
        b,
        key,
    } = rc_pair(ALL, ALL, 0);
    d.send(
        a,
        &wqe(1, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 8, key)]),
    );
    let wc = d.wait(cq, 1)[0];
    assert_eq!(wc.status(), IB_WC_RNR_RETRY_EXC_ERR);
    assert_eq!(d.qp_state(a), IB_QPS_ERR);
    // Elements posted to a QP in error are flushed; so are b's on ERR.
    d.send(
        a,
        &wqe(
            2,
            IB_WR_RDMA_WRITE,
            0,
            0,
            &rdma(DATA, key),
            &[(DATA, 8, key)],
        ),
    );
    let wc = d.wait(cq, 1)[0];
    assert_eq!(
        (wc.wr_id(), wc.status(), wc.opcode()),
        (2, IB_WC_WR_FLUSH_ERR, IB_WC_RDMA_WRITE)
    );
    d.recv(b, 40, &[(DATA, 8, key)]);
    d.recv(b, 41, &[(DATA, 8, key)]);
    d.quiet(cq);
    d.move_to_err(b);
    let wcs = d.wait(cq, 2);
    assert_eq!(
        wcs.iter()
            .map(|w| (w.wr_id(), w.status(), w.opcode()))
            .collect::<Vec<_>>(),
        vec![
            (40, IB_WC_WR_FLUSH_ERR, IB_WC_RECV),
            (41, IB_WC_WR_FLUSH_ERR, IB_WC_RECV)
        ]
    );
    // A receive posted to the QP in error (ib_drain_rq's marker) is flushed
    // too: the driver kicks only as avail_event asks (EVENT_IDX), and 41 was
    // posted without a kick, so the flush must have made avail_event current.
    d.recv(b, 42, &[(DATA, 8, key)]);
    let wc = d.wait(cq, 1)[0];
    assert_eq!(
        (wc.wr_id(), wc.status(), wc.opcode()),
        (42, IB_WC_WR_FLUSH_ERR, IB_WC_RECV)
    );
    d.finish();

    // rnr_retry 7: the send waits for a receive.
    let RcPair {
        mut d,
        cq,
        a,
        b,
        key,
    } = rc_pair(ALL, ALL, 7);
    d.fill(DATA, b"late");
    d.send(
        a,
        &wqe(1, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 4, key)]),
    );
    d.quiet(cq);
    d.recv(b, 50, &[(DATA + 0x1000, 8, key)]);
    let wcs = d.wait(cq, 2);
    assert!(wcs.iter().all(|w| w.status() == IB_WC_SUCCESS), "{wcs:?}");
    assert_eq!(d.read(DATA + 0x1000, 4), b"late");
    d.finish();

    // rnr_retry 2: two timed retries, then RNR_RETRY_EXC_ERR.
    let RcPair {
        mut d, cq, a, key, ..
    } = rc_pair(ALL, ALL, 2);
    d.send(
        a,
        &wqe(1, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 4, key)]),
    );
    assert_eq!(d.wait(cq, 1)[0].status(), IB_WC_RNR_RETRY_EXC_ERR);
    d.finish();
}

#[test]
fn uc_send_imm_write_write_imm() {
    let UcPair {
        mut d,
        cq,
        a,
        b,
        key,
    } = uc_pair(ALL, IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE);
    // SEND of 3000 bytes from two SGEs crossing a page into two receive SGEs.
    let src = pattern(3000, 11);
    d.fill(DATA + 0xf00, &src[..1000]);
    d.fill(DATA + 0x3000, &src[1000..]);
    d.recv(
        b,
        11,
        &[(DATA + 0x10_0ff0, 100, key), (DATA + 0x10_2000, 4000, key)],
    );
    d.send(
        a,
        &wqe(
            1,
            IB_WR_SEND,
            IB_SEND_SIGNALED,
            0,
            &[],
            &[(DATA + 0xf00, 1000, key), (DATA + 0x3000, 2000, key)],
        ),
    );
    let wcs = d.wait(cq, 2);
    let recv = wcs.iter().find(|w| w.wr_id() == 11).expect("recv");
    let sent = wcs.iter().find(|w| w.wr_id() == 1).expect("send");
    assert_eq!(
        (recv.status(), recv.opcode(), recv.byte_len()),
        (IB_WC_SUCCESS, IB_WC_RECV, 3000)
    );
    assert_eq!((recv.0.qp_num.get(), recv.0.src_qp.get()), (b, a));
    assert_eq!(recv.0.wc_flags.get() & IB_WC_WITH_IMM, 0);
    assert_eq!((sent.status(), sent.opcode()), (IB_WC_SUCCESS, IB_WC_SEND));
    let mut got = d.read(DATA + 0x10_0ff0, 100);
    got.extend(d.read(DATA + 0x10_2000, 2900));
    assert_eq!(got, src);
    assert_eq!(
        d.read(DATA + 0x10_2000 + 2900, 4),
        vec![0; 4],
        "nothing past the message"
    );

    // SEND_WITH_IMM, inline: immediate data as the guest wrote it.
    d.recv(b, 12, &[(DATA + 0x20_0000, 64, key)]);
    let mut w = wqe(
        2,
        IB_WR_SEND_WITH_IMM,
        IB_SEND_SIGNALED | IB_SEND_INLINE,
        0x8765_4321,
        &[],
        &[],
    );
    w[20..24].copy_from_slice(&9u32.to_le_bytes());
    w.extend_from_slice(b"uc inline");
    d.send(a, &w);
    let wcs = d.wait(cq, 2);
    let recv = wcs.iter().find(|w| w.wr_id() == 12).expect("recv");
    assert_eq!(
        (recv.status(), recv.opcode(), recv.byte_len()),
        (IB_WC_SUCCESS, IB_WC_RECV, 9)
    );
    assert_eq!(recv.0.wc_flags.get() & IB_WC_WITH_IMM, IB_WC_WITH_IMM);
    assert_eq!(recv.0.ex.get(), 0x8765_4321);
    let sent = wcs.iter().find(|w| w.wr_id() == 2).expect("send");
    assert_eq!((sent.status(), sent.opcode()), (IB_WC_SUCCESS, IB_WC_SEND));
    assert_eq!(d.read(DATA + 0x20_0000, 10), b"uc inline\0");

    // RDMA_WRITE of 5000 bytes: no receive consumed, no responder CQE.
    let src = pattern(5000, 5);
    d.fill(DATA + 0x4_0000, &src);
    d.recv(b, 13, &[(DATA + 0x20_1000, 64, key)]);
    d.send(
        a,
        &wqe(
            3,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &rdma(DATA + 0x30_0100, key),
            &[(DATA + 0x4_0000, 5000, key)],
        ),
    );
    let wc = d.wait(cq, 1)[0];
    assert_eq!(
        (wc.wr_id(), wc.status(), wc.opcode(), wc.byte_len()),
        (3, IB_WC_SUCCESS, IB_WC_RDMA_WRITE, 5000)
    );
    assert_eq!(d.read(DATA + 0x30_0100, 5000), src);
    assert_eq!(d.read(DATA + 0x30_0100 + 5000, 4), vec![0; 4]);
    d.quiet(cq);

    // RDMA_WRITE_WITH_IMM consumes receive 13 without scattering into it.
    d.send(
        a,
        &wqe(
            4,
            IB_WR_RDMA_WRITE_WITH_IMM,
            IB_SEND_SIGNALED,
            77,
            &rdma(DATA + 0x38_0000, key),
            &[(DATA + 0x4_0000, 300, key)],
        ),
    );
    let wcs = d.wait(cq, 2);
    let r = wcs.iter().find(|w| w.wr_id() == 13).expect("recv");
    assert_eq!(
        (r.status(), r.opcode(), r.byte_len(), r.0.ex.get()),
        (IB_WC_SUCCESS, IB_WC_RECV_RDMA_WITH_IMM, 300, 77)
    );
    assert_eq!(r.0.wc_flags.get() & IB_WC_WITH_IMM, IB_WC_WITH_IMM);
    assert_eq!((r.0.qp_num.get(), r.0.src_qp.get()), (b, a));
    let sent = wcs.iter().find(|w| w.wr_id() == 4).expect("write");
    assert_eq!(
        (sent.status(), sent.opcode()),
        (IB_WC_SUCCESS, IB_WC_RDMA_WRITE)
    );
    assert_eq!(d.read(DATA + 0x38_0000, 300), src[..300]);
    assert_eq!(d.read(DATA + 0x20_1000, 8), vec![0; 8], "receive untouched");
    assert_eq!((d.qp_state(a), d.qp_state(b)), (IB_QPS_RTS, IB_QPS_RTS));
    d.finish();
}

#[test]
fn uc_read_atomics_send_inv_are_not_uc_operations() {
    let UcPair {
        mut d,
        cq,
        a,
        b,
        key,
    } = uc_pair(ALL, ALL);
    let gid = d.gid;
    let t = DATA + 0x32_0008;
    d.fill(t, &5u64.to_le_bytes());
    d.fill(DATA + 0x30_0000, b"remote bytes");
    let res = DATA + 0x33_0000;
    d.fill(res, &[0xaa; 16]);
    let cases = [
        (
            IB_WR_RDMA_READ,
            IB_WC_RDMA_READ,
            0,
            rdma(DATA + 0x30_0000, key),
        ),
        (
            IB_WR_ATOMIC_CMP_AND_SWP,
            IB_WC_COMP_SWAP,
            0,
            atomic_wr(t, 5, 77, key),
        ),
        (
            IB_WR_ATOMIC_FETCH_AND_ADD,
            IB_WC_FETCH_ADD,
            0,
            atomic_wr(t, 3, 0, key),
        ),
        (IB_WR_SEND_WITH_INV, IB_WC_SEND, key, Vec::new()),
    ];
    for (i, (op, wc_op, ex, wr)) in cases.into_iter().enumerate() {
        let id = 100 + i as u64;
        d.recv(b, 200 + i as u64, &[(DATA + 0x34_0000, 64, key)]);
        d.send(a, &wqe(id, op, IB_SEND_SIGNALED, ex, &wr, &[(res, 8, key)]));
        let wcs = d.wait(cq, 1);
        assert_eq!(
            (wcs[0].wr_id(), wcs[0].status(), wcs[0].opcode()),
            (id, IB_WC_LOC_QP_OP_ERR, wc_op),
            "opcode {op} on UC"
        );
        assert_eq!(d.qp_state(a), IB_QPS_ERR, "opcode {op}: requester in error");
        assert_eq!(
            d.qp_state(b),
            IB_QPS_RTS,
            "opcode {op}: responder untouched"
        );
        // The responder's receive is still posted: b's ERR flushes it.
        d.move_to_err(b);
        let wcs = d.wait(cq, 1);
        assert_eq!(
            (wcs[0].wr_id(), wcs[0].status()),
            (200 + i as u64, IB_WC_WR_FLUSH_ERR)
        );
        d.quiet(cq);
        for q in [a, b] {
            let mut attr = VirtioRdmaQpAttr::new_zeroed();
            attr.qp_state = IB_QPS_RESET;
            assert_eq!(d.modify(q, IB_QP_STATE, attr), VIRTIO_RDMA_S_OK);
        }
        d.uc_up(a, gid, b, ALL);
        d.uc_up(b, gid, a, ALL);
    }
    assert_eq!(d.read(t, 8), 5u64.to_le_bytes(), "target untouched");
    assert_eq!(d.read(res, 16), vec![0xaa; 16], "local buffer untouched");
    assert_eq!(d.read(DATA + 0x34_0000, 8), vec![0; 8], "nothing received");
    d.finish();
}

/// The operator's metrics (`--metrics`, `metrics.rs`) move with the
/// device's traffic and show what its guest holds.
#[test]
fn metrics_show_a_write_and_the_objects_behind_it() {
    let RcPair {
        mut d, cq, a, key, ..
    } = rc_pair(ALL, ALL, 0);
    let dev = d.dev.name().to_string();
    let scrape = |d: &Dev| vhost_user_rdma::metrics::render(std::slice::from_ref(&d.dev));
    let line = |what: &str, v: u64| format!("vhost_user_rdma_{what}{{device=\"{dev}\"}} {v}\n");
    let before = scrape(&d);
    assert!(before.contains(&line("sent_bytes_total", 0)), "{before}");
    d.send(
        a,
        &wqe(
            1,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &rdma(DATA + 0x2000, key),
            &[(DATA, 3000, key)],
        ),
    );
    assert_eq!(d.wait(cq, 1)[0].status(), IB_WC_SUCCESS);
    let after = scrape(&d);
    for (what, v) in [("sent_bytes_total", 3000), ("rcvd_bytes_total", 3000)] {
        assert!(after.contains(&line(what, v)), "no {what} {v} in {after}");
    }
    let objects = |kind: &str, v: u64| {
        format!("vhost_user_rdma_objects{{device=\"{dev}\",kind=\"{kind}\"}} {v}\n")
    };
    for (kind, v) in [("qp", 2), ("cq", 1)] {
        assert!(
            after.contains(&objects(kind, v)),
            "no {kind} {v} in {after}"
        );
    }
    d.finish();
}

#[test]
fn uc_key_guesses_end_the_connection() {
    use vhost_user_rdma::engine::MAX_BAD_KEYS;
    let UcPair {
        mut d,
        cq,
        a,
        b,
        key,
    } = uc_pair(ALL, IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE);
    d.fill_events(4, 8);
    // `len` bytes: above CHUNK a WRITE moves in chunks, checked there.
    let write_len = |d: &mut Dev, id: u64, rkey: u32, len: u32| {
        d.send(
            a,
            &wqe(
                id,
                IB_WR_RDMA_WRITE,
                IB_SEND_SIGNALED,
                0,
                &rdma(DATA + 0x2000, rkey),
                &[(DATA, len, key)],
            ),
        );
        let wc = d.wait(cq, 1)[0];
        // UC: the requester never learns of the responder's drop.
        assert_eq!((wc.wr_id(), wc.status()), (id, IB_WC_SUCCESS));
    };
    let write = |d: &mut Dev, id: u64, rkey: u32| write_len(d, id, rkey, 8);
    d.fill(DATA, b"guessed!");
    // A peer guessing keys: each one dropped, the responder carries on...
    let chunked = u32::try_from(vhost_user_rdma::engine::CHUNK).expect("chunk") + 8;
    for n in 1..MAX_BAD_KEYS {
        // Every other one would move in chunks: its key is checked (and
        // refused) first all the same.
        let len = if n % 2 == 0 { chunked } else { 8 };
        write_len(&mut d, u64::from(n), key ^ n, len);
        assert_eq!(d.qp_state(b), IB_QPS_RTS, "after {n} refused keys");
    }
    assert_eq!(d.read(DATA + 0x2000, 8), vec![0; 8], "nothing written");
    assert_eq!(d.events(), vec![]);
    // ... and takes what its peer may write ...
    write(&mut d, 100, key);
    assert_eq!(d.read(DATA + 0x2000, 8), b"guessed!");
    d.fill(DATA + 0x2000, &[0; 8]);
    // ... until the last guess, which moves it to error and tells its
    // consumer; its requester, UC, goes on.
    write(&mut d, 101, key ^ 0x77);
    assert_eq!(
        wait_events(&mut d, 1),
        vec![(VIRTIO_RDMA_EVENT_QP_ACCESS_ERR, b)]
    );
    assert_eq!((d.qp_state(a), d.qp_state(b)), (IB_QPS_RTS, IB_QPS_ERR));
    write(&mut d, 102, key);
    assert_eq!(
        d.read(DATA + 0x2000, 8),
        vec![0; 8],
        "nothing taken in error"
    );
    d.finish();
}

#[test]
fn uc_losses_fail_nobody() {
    let UcPair {
        mut d,
        cq,
        a,
        b,
        key,
    } = uc_pair(ALL, IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE);
    d.fill(DATA, b"first");
    d.fill(DATA + 0x100, b"second");
    // No receive posted: the SEND is lost; the requester succeeds, no RNR
    // wait, nothing on the responder, which stays in RTS.
    d.send(
        a,
        &wqe(1, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 5, key)]),
    );
    let wc = d.wait(cq, 1)[0];
    assert_eq!(
        (wc.wr_id(), wc.status(), wc.opcode(), wc.byte_len()),
        (1, IB_WC_SUCCESS, IB_WC_SEND, 5)
    );
    d.quiet(cq);
    assert_eq!((d.qp_state(a), d.qp_state(b)), (IB_QPS_RTS, IB_QPS_RTS));
    // A receive posted now gets the next message, not the lost one.
    d.recv(b, 50, &[(DATA + 0x1000, 16, key)]);
    d.quiet(cq);
    d.send(
        a,
        &wqe(
            2,
            IB_WR_SEND,
            IB_SEND_SIGNALED,
            0,
            &[],
            &[(DATA + 0x100, 6, key)],
        ),
    );
    let wcs = d.wait(cq, 2);
    let r = wcs.iter().find(|w| w.wr_id() == 50).expect("recv");
    assert_eq!((r.status(), r.byte_len()), (IB_WC_SUCCESS, 6));
    assert_eq!(d.read(DATA + 0x1000, 7), b"second\0");

    // WRITE_WITH_IMM without a receive: lost, nothing written.
    d.send(
        a,
        &wqe(
            3,
            IB_WR_RDMA_WRITE_WITH_IMM,
            IB_SEND_SIGNALED,
            5,
            &rdma(DATA + 0x2000, key),
            &[(DATA, 5, key)],
        ),
    );
    let wc = d.wait(cq, 1)[0];
    assert_eq!((wc.wr_id(), wc.status()), (3, IB_WC_SUCCESS));
    d.quiet(cq);
    assert_eq!(d.read(DATA + 0x2000, 5), vec![0; 5], "nothing written");

    // Remote access errors (an rkey of no MR, an MR without remote write):
    // the write is dropped, no receive is consumed, the responder stays in
    // RTS and the requester succeeds.
    let ro = d.dma_mr(1, IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ);
    for (id, rkey) in [(4, key ^ 0x5a), (5, ro)] {
        d.recv(b, 60 + id, &[(DATA + 0x3000, 16, key)]);
        d.send(
            a,
            &wqe(
                id,
                IB_WR_RDMA_WRITE_WITH_IMM,
                IB_SEND_SIGNALED,
                0,
                &rdma(DATA + 0x2000, rkey),
                &[(DATA, 5, key)],
            ),
        );
        let wc = d.wait(cq, 1)[0];
        assert_eq!((wc.wr_id(), wc.status()), (id, IB_WC_SUCCESS));
        d.quiet(cq);
        assert_eq!(d.read(DATA + 0x2000, 5), vec![0; 5], "nothing written");
        assert_eq!((d.qp_state(a), d.qp_state(b)), (IB_QPS_RTS, IB_QPS_RTS));
        // The receive was not consumed: a good write takes it now.
        d.send(
            a,
            &wqe(
                id + 10,
                IB_WR_RDMA_WRITE_WITH_IMM,
                IB_SEND_SIGNALED,
                0,
                &rdma(DATA + 0x2000 + 16 * id, key),
                &[(DATA, 5, key)],
            ),
        );
        let wcs = d.wait(cq, 2);
        let r = wcs.iter().find(|w| w.wr_id() == 60 + id).expect("recv");
        assert_eq!(
            (r.status(), r.opcode()),
            (IB_WC_SUCCESS, IB_WC_RECV_RDMA_WITH_IMM)
        );
        assert_eq!(d.read(DATA + 0x2000 + 16 * id, 5), b"first");
    }

    // A responder that is not there (GID of no device, or no UC QP in
    // RTR/RTS): lost after the local checks.
    let pd = 1;
    let c = d.create_qp(pd, IB_QPT_UC, cq, true);
    d.uc_up(c, [0x99; 16], b, ALL);
    d.send(c, &wqe(6, IB_WR_SEND, 0, 0, &[], &[(DATA, 5, key)]));
    let wc = d.wait(cq, 1)[0];
    assert_eq!((wc.wr_id(), wc.status(), wc.byte_len()), (6, 0, 5));
    let e = d.create_qp(pd, IB_QPT_UC, cq, true);
    let gid = d.gid;
    d.uc_up(e, gid, MAX_QP - 1, ALL);
    d.send(
        e,
        &wqe(
            7,
            IB_WR_RDMA_WRITE,
            0,
            0,
            &rdma(DATA, key),
            &[(DATA, 5, key)],
        ),
    );
    assert_eq!(d.wait(cq, 1)[0].status(), IB_WC_SUCCESS);
    assert_eq!(d.qp_state(e), IB_QPS_RTS);

    // A local error still fails the requester and moves it to error; the
    // responder's receive is not consumed.
    d.recv(b, 70, &[(DATA + 0x4000, 16, key)]);
    d.send(a, &wqe(8, IB_WR_SEND, 0, 0, &[], &[(DATA, 5, key ^ 0x5a)]));
    let wc = d.wait(cq, 1)[0];
    assert_eq!((wc.wr_id(), wc.status()), (8, IB_WC_LOC_PROT_ERR));
    assert_eq!((d.qp_state(a), d.qp_state(b)), (IB_QPS_ERR, IB_QPS_RTS));
    // So does one on the way to a missing responder.
    d.send(c, &wqe(9, IB_WR_SEND, 0, 0, &[], &[(DATA, 5, key ^ 0x5a)]));
    assert_eq!(d.wait(cq, 1)[0].status(), IB_WC_LOC_PROT_ERR);
    assert_eq!(d.qp_state(c), IB_QPS_ERR);
    d.move_to_err(b);
    let wc = d.wait(cq, 1)[0];
    assert_eq!((wc.wr_id(), wc.status()), (70, IB_WC_WR_FLUSH_ERR));
    d.finish();
}

#[test]
fn ud_send_recv_with_grh() {
    let mut d = Dev::start();
    let pd = d.create_pd();
    let cq = d.create_cq(12);
    let key = d.dma_mr(pd, IB_ACCESS_LOCAL_WRITE);
    let a = d.create_qp(pd, IB_QPT_UD, cq, true);
    let b = d.create_qp(pd, IB_QPT_UD, cq, false);
    d.ud_up(a, 0x1111, false);
    d.ud_up(b, 0x2222, false);
    let gid = d.gid;
    d.fill(DATA, b"datagram!");
    d.recv(b, 60, &[(DATA + 0x1000, 40 + 64, key)]);
    d.send(
        a,
        &wqe(
            1,
            IB_WR_SEND_WITH_IMM,
            0,
            5,
            &ud_wr(b, 0x2222, gid),
            &[(DATA, 9, key)],
        ),
    );
    let wcs = d.wait(cq, 2);
    let r = wcs.iter().find(|w| w.wr_id() == 60).expect("recv");
    assert_eq!(
        (r.status(), r.byte_len(), r.0.src_qp.get(), r.0.ex.get()),
        (0, 49, a, 5)
    );
    let flags = r.0.wc_flags.get();
    assert_eq!(
        flags & (IB_WC_GRH | IB_WC_WITH_IMM),
        IB_WC_GRH | IB_WC_WITH_IMM
    );
    assert_eq!(r.0.network_hdr_type, RDMA_NETWORK_IPV6);
    let g = d.read(DATA + 0x1000, 49);
    assert_eq!(g[0] >> 4, 6, "IPv6 GRH");
    assert_eq!(&g[8..24], &gid, "sgid");
    assert_eq!(&g[24..40], &gid, "dgid");
    assert_eq!(&g[40..], b"datagram!");
    // Wrong Q_Key, and no receive posted: dropped, the send still succeeds.
    d.send(
        a,
        &wqe(
            2,
            IB_WR_SEND,
            0,
            0,
            &ud_wr(b, 0x3333, gid),
            &[(DATA, 9, key)],
        ),
    );
    d.send(
        a,
        &wqe(
            3,
            IB_WR_SEND,
            0,
            0,
            &ud_wr(b, 0x2222, gid),
            &[(DATA, 9, key)],
        ),
    );
    let wcs = d.wait(cq, 2);
    assert_eq!(
        wcs.iter()
            .map(|w| (w.wr_id(), w.status()))
            .collect::<Vec<_>>(),
        vec![(2, 0), (3, 0)]
    );
    d.recv(b, 61, &[(DATA + 0x1000, 40, key)]);
    d.quiet(cq);
    // Receive too small for GRH + payload: receiver's LOC_LEN_ERR.
    d.send(
        a,
        &wqe(
            4,
            IB_WR_SEND,
            0,
            0,
            &ud_wr(b, 0x2222, gid),
            &[(DATA, 9, key)],
        ),
    );
    let wcs = d.wait(cq, 2);
    let r = wcs.iter().find(|w| w.wr_id() == 61).expect("recv");
    assert_eq!(r.status(), IB_WC_LOC_LEN_ERR);
    // RDMA on UD is not an operation.
    d.send(a, &wqe(5, IB_WR_RDMA_WRITE, 0, 0, &[], &[(DATA, 9, key)]));
    assert_eq!(d.wait(cq, 1)[0].status(), IB_WC_LOC_QP_OP_ERR);
    d.finish();
}

#[test]
fn cross_device_rc_and_gsi() {
    let CrossPair {
        mut x,
        mut y,
        px,
        py,
        cx,
        cy,
        kx,
        ky,
        qx,
        qy,
    } = cross_rc_pair(Dev::start(), Dev::start(), 0);
    let gy = y.gid;
    let src = pattern(9000, 1);
    x.fill(DATA, &src);
    y.recv(qy, 70, &[(DATA + 0x1_0000, 9000, ky)]);
    x.send(
        qx,
        &wqe(1, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 9000, kx)]),
    );
    assert_eq!(x.wait(cx, 1)[0].status(), IB_WC_SUCCESS);
    let r = y.wait(cy, 1)[0];
    assert_eq!((r.wr_id(), r.status(), r.byte_len()), (70, 0, 9000));
    assert_eq!(y.read(DATA + 0x1_0000, 9000), src);
    // WRITE into y, READ back from y.
    x.send(
        qx,
        &wqe(
            2,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &rdma(DATA + 0x8_0000, ky),
            &[(DATA + 100, 300, kx)],
        ),
    );
    assert_eq!(x.wait(cx, 1)[0].status(), 0);
    assert_eq!(y.read(DATA + 0x8_0000, 300), src[100..400]);
    y.fill(DATA + 0x9_0000, b"from y");
    x.send(
        qx,
        &wqe(
            3,
            IB_WR_RDMA_READ,
            IB_SEND_SIGNALED,
            0,
            &rdma(DATA + 0x9_0000, ky),
            &[(DATA + 0x5_0000, 6, kx)],
        ),
    );
    assert_eq!(x.wait(cx, 1)[0].status(), 0);
    assert_eq!(x.read(DATA + 0x5_0000, 6), b"from y");
    // GSI: QP1 of each device, routed by the destination GID.
    let g1x = x.create_qp(px, IB_QPT_GSI, cx, true);
    let g1y = y.create_qp(py, IB_QPT_GSI, cy, true);
    assert_eq!((g1x, g1y), (1, 1));
    x.ud_up(1, 0x8001_0000, true);
    y.ud_up(1, 0x8001_0000, true);
    y.recv(1, 80, &[(DATA + 0xa_0000, 40 + 256, ky)]);
    let mad = pattern(256, 42);
    x.fill(DATA + 0x6_0000, &mad);
    x.send(
        1,
        &wqe(
            4,
            IB_WR_SEND,
            0,
            0,
            &ud_wr(1, 0x8001_0000, gy),
            &[(DATA + 0x6_0000, 256, kx)],
        ),
    );
    assert_eq!(x.wait(cx, 1)[0].status(), 0);
    let r = y.wait(cy, 1)[0];
    assert_eq!(
        (r.wr_id(), r.status(), r.byte_len(), r.0.src_qp.get()),
        (80, 0, 296, 1)
    );
    assert_eq!(&r.0.smac, &[0x52, 0x54, 0, 0, 0, x.gid[15]]);
    assert_eq!(y.read(DATA + 0xa_0000 + 40, 256), mad);
    x.finish();
    y.finish();
}

/// A guest attacks another guest's memory through the device that serves
/// both: the responder (device `y`) checks the attacker's (`x`'s) rkeys,
/// PDs and ranges against its own MRs, and nothing outside a valid MR of the
/// QP's PD changes.
#[test]
fn cross_device_access_is_checked_by_the_responder() {
    let mut x = Dev::start();
    let mut y = Dev::start();
    let px = x.create_pd();
    let (py, py2) = (y.create_pd(), y.create_pd());
    let (cx, cy) = (x.create_cq(12), y.create_cq(12));
    let kx = x.dma_mr(px, ALL);
    let key_pd2 = y.dma_mr(py2, ALL);
    // y's user MR: 0x800 bytes at iova 0x1000_0000 over the page at DATA + 0x6_0000.
    let table = DATA + 0x7_0000;
    y.fill(table, &(DATA + 0x6_0000).to_le_bytes());
    let (st, r) = reg_user_mr(&mut y, py, ALL, 0x800, 0x1000_0000, table, 1);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    let ukey = le32(&r, 4);
    x.fill(DATA, &pattern(0x1000, 7));
    let (gx, gy) = (x.gid, y.gid);
    let cases = [
        (
            "WRITE with a key of another PD",
            IB_WR_RDMA_WRITE,
            DATA + 0x8_0000,
            key_pd2,
            8,
        ),
        (
            "READ with a key of another PD",
            IB_WR_RDMA_READ,
            DATA + 0x8_0000,
            key_pd2,
            8,
        ),
        (
            "WRITE past the user MR",
            IB_WR_RDMA_WRITE,
            0x1000_0000 + 0x7f8,
            ukey,
            16,
        ),
        (
            "WRITE before the user MR",
            IB_WR_RDMA_WRITE,
            0x0fff_fff8,
            ukey,
            16,
        ),
        (
            "READ with a key y does not have",
            IB_WR_RDMA_READ,
            DATA,
            0x00de_ad00,
            8,
        ),
        (
            "WRITE with the attacker's own key (y's of that number, if any)",
            IB_WR_RDMA_WRITE,
            DATA + 0x8_0000,
            kx,
            8,
        ),
        (
            "a valid WRITE",
            IB_WR_RDMA_WRITE,
            0x1000_0000 + 0x100,
            ukey,
            64,
        ),
    ];
    for (name, op, raddr, rkey, len) in cases {
        let a = x.create_qp(px, IB_QPT_RC, cx, false);
        let b = y.create_qp(py, IB_QPT_RC, cy, false);
        x.rc_up(a, gy, b, ALL, 0);
        y.rc_up(b, gx, a, ALL, 0);
        let page = y.read(DATA + 0x6_0000, 0x1000);
        let other = y.read(DATA + 0x8_0000, 0x100);
        x.send(
            a,
            &wqe(
                1,
                op,
                IB_SEND_SIGNALED,
                0,
                &rdma(raddr, rkey),
                &[(DATA, len, kx)],
            ),
        );
        let st = x.wait(cx, 1)[0].status();
        assert_eq!(
            y.read(DATA + 0x8_0000, 0x100),
            other,
            "{name}: other PD's memory"
        );
        if name == "a valid WRITE" {
            assert_eq!(st, IB_WC_SUCCESS, "{name}");
            let mut want = page.clone();
            want[0x100..0x100 + len as usize].copy_from_slice(&pattern(0x1000, 7)[..len as usize]);
            assert_eq!(
                y.read(DATA + 0x6_0000, 0x1000),
                want,
                "{name}: exactly the bytes written"
            );
        } else {
            assert_eq!(st, IB_WC_REM_ACCESS_ERR, "{name}");
            assert_eq!(x.qp_state(a), IB_QPS_ERR, "{name}: requester QP in error");
            assert_eq!(
                y.read(DATA + 0x6_0000, 0x1000),
                page,
                "{name}: user MR untouched"
            );
        }
        x.quiet(cx);
        y.quiet(cy);
        x.ok(VIRTIO_RDMA_CMD_DESTROY_QP, &pair(a, 0), 0);
        y.ok(VIRTIO_RDMA_CMD_DESTROY_QP, &pair(b, 0), 0);
    }
    x.finish();
    y.finish();
}

/// Reregistration (the protocol document's "Reregistration") is REG_USER_MR
/// of the replacement over the same pages, then DEREG_MR of the original:
/// the device takes a page another MR holds, the two get different numbers
/// and keys, and once the original is gone its rkey fails while the
/// replacement's lands.
#[test]
fn reregistration_is_reg_then_dereg() {
    let mut d = Dev::start();
    let pd = d.create_pd();
    let cq = d.create_cq(12);
    let key = d.dma_mr(pd, ALL);
    let a = d.create_qp(pd, IB_QPT_RC, cq, false);
    let b = d.create_qp(pd, IB_QPT_RC, cq, false);
    let gid = d.gid;
    d.rc_up(a, gid, b, ALL, 0);
    d.rc_up(b, gid, a, ALL, 0);
    // 0x800 bytes at iova 0x1000_0000 over the page at DATA + 0x6_0000.
    let table = DATA + 0x7_0000;
    d.fill(table, &(DATA + 0x6_0000).to_le_bytes());
    let reg = |d: &mut Dev| {
        let (st, r) = reg_user_mr(d, pd, ALL, 0x800, 0x1000_0000, table, 1);
        assert_eq!(
            st, VIRTIO_RDMA_S_OK,
            "REG_USER_MR over a page another MR holds"
        );
        (le32(&r, 0), le32(&r, 8))
    };
    let (old_mrn, old_rkey) = reg(&mut d);
    let (new_mrn, new_rkey) = reg(&mut d);
    assert_ne!(old_mrn, new_mrn);
    assert_ne!(old_rkey, new_rkey);
    d.ok(VIRTIO_RDMA_CMD_DEREG_MR, &pair(old_mrn, 0), 0);
    d.fill(DATA, &pattern(64, 9));
    let write = |d: &mut Dev, id: u64, rkey: u32| {
        let el = wqe(
            id,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &rdma(0x1000_0000 + 0x100, rkey),
            &[(DATA, 64, key)],
        );
        d.send(a, &el);
        d.wait(cq, 1)[0].status()
    };
    assert_eq!(write(&mut d, 1, new_rkey), IB_WC_SUCCESS);
    assert_eq!(d.read(DATA + 0x6_0100, 64), pattern(64, 9));
    assert_eq!(write(&mut d, 2, old_rkey), IB_WC_REM_ACCESS_ERR);
    d.quiet(cq);
    d.finish();
}

/// (name, responder QP access, SQ element, requester status, responder's
/// receive status if a receive is posted)
type Case = (&'static str, u32, Vec<u8>, u8, Option<u8>);

#[test]
fn hostile_work_requests() {
    let mut d = Dev::start();
    let pd = d.create_pd();
    let pd2 = d.create_pd();
    let cq = d.create_cq(12);
    let key = d.dma_mr(pd, ALL);
    let key_lw = d.dma_mr(pd, IB_ACCESS_LOCAL_WRITE);
    let key_pd2 = d.dma_mr(pd2, ALL);
    // A user MR of 0x800 bytes at iova 0x1000_0000 over one page.
    let table = DATA + 0x7_0000;
    d.fill(table, &(DATA + 0x6_0000).to_le_bytes());
    let (st, r) = reg_user_mr(&mut d, pd, ALL, 0x800, 0x1000_0000, table, 1);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    let ukey = le32(&r, 4);
    let gid = d.gid;
    let ok = IB_WC_SUCCESS;
    // (name, b's QP access, SQ element for a, a's status, b's receive (status) if any)
    let mut short = wqe(99, IB_WR_SEND, 0, 0, &[], &[]);
    short.truncate(20);
    let cases: Vec<Case> = vec![
        (
            "bad lkey",
            ALL,
            wqe(1, IB_WR_SEND, 0, 0, &[], &[(DATA, 8, 0x00de_ad00)]),
            IB_WC_LOC_PROT_ERR,
            None,
        ),
        (
            "lkey of another PD",
            ALL,
            wqe(1, IB_WR_SEND, 0, 0, &[], &[(DATA, 8, key_pd2)]),
            IB_WC_LOC_PROT_ERR,
            None,
        ),
        (
            "SGE past the user MR",
            ALL,
            wqe(1, IB_WR_SEND, 0, 0, &[], &[(0x1000_0000, 0x801, ukey)]),
            IB_WC_LOC_PROT_ERR,
            None,
        ),
        (
            "SGE before the user MR",
            ALL,
            wqe(1, IB_WR_SEND, 0, 0, &[], &[(0x0fff_ffff, 2, ukey)]),
            IB_WC_LOC_PROT_ERR,
            None,
        ),
        (
            "WRITE, QP without REMOTE_WRITE",
            IB_ACCESS_REMOTE_READ,
            wqe(
                1,
                IB_WR_RDMA_WRITE,
                0,
                0,
                &rdma(DATA, key),
                &[(DATA, 8, key)],
            ),
            IB_WC_REM_ACCESS_ERR,
            None,
        ),
        (
            "WRITE, MR without REMOTE_WRITE",
            ALL,
            wqe(
                1,
                IB_WR_RDMA_WRITE,
                0,
                0,
                &rdma(DATA, key_lw),
                &[(DATA, 8, key)],
            ),
            IB_WC_REM_ACCESS_ERR,
            None,
        ),
        (
            "WRITE past the remote MR",
            ALL,
            wqe(
                1,
                IB_WR_RDMA_WRITE,
                0,
                0,
                &rdma(0x1000_0000, ukey),
                &[(DATA, 0x801, key)],
            ),
            IB_WC_REM_ACCESS_ERR,
            None,
        ),
        (
            "READ with a bad rkey",
            ALL,
            wqe(
                1,
                IB_WR_RDMA_READ,
                0,
                0,
                &rdma(DATA, 0x0077_7700),
                &[(DATA, 8, key)],
            ),
            IB_WC_REM_ACCESS_ERR,
            None,
        ),
        (
            "READ outside guest memory",
            ALL,
            wqe(
                1,
                IB_WR_RDMA_READ,
                0,
                0,
                &rdma(1 << 40, key),
                &[(DATA, 8, key)],
            ),
            IB_WC_REM_ACCESS_ERR,
            None,
        ),
        (
            "READ with a stale key byte",
            ALL,
            wqe(
                1,
                IB_WR_RDMA_READ,
                0,
                0,
                &rdma(DATA, key),
                &[(DATA, 8, ukey & !0xff | 0xff)],
            ),
            IB_WC_LOC_PROT_ERR,
            None,
        ),
        (
            "receive too small",
            ALL,
            wqe(1, IB_WR_SEND, 0, 0, &[], &[(DATA, 64, key)]),
            IB_WC_REM_INV_REQ_ERR,
            Some(IB_WC_LOC_LEN_ERR),
        ),
        (
            "num_sge above max",
            ALL,
            wqe(1, IB_WR_SEND, 0, 0, &[], &[(DATA, 1, key); 5]),
            IB_WC_LOC_QP_OP_ERR,
            None,
        ),
        ("element too short", ALL, short, IB_WC_LOC_QP_OP_ERR, None),
        (
            "garbage opcode",
            ALL,
            wqe(1, 0x77, 0, 0, &[], &[]),
            IB_WC_LOC_QP_OP_ERR,
            None,
        ),
        (
            "LOCAL_INV of a DMA MR",
            ALL,
            wqe(1, IB_WR_LOCAL_INV, 0, key, &[], &[]),
            IB_WC_LOC_QP_OP_ERR,
            None,
        ),
        (
            "REG_MR of a user MR",
            ALL,
            wqe(
                1,
                IB_WR_REG_MR,
                0,
                0,
                &reg_wr(ukey >> 8, ukey, 0, 1, 0, 8, table),
                &[],
            ),
            IB_WC_LOC_QP_OP_ERR,
            None,
        ),
        (
            "atomic with 4-byte SGE",
            ALL,
            wqe(
                1,
                IB_WR_ATOMIC_FETCH_AND_ADD,
                0,
                0,
                &atomic_wr(DATA, 1, 0, key),
                &[(DATA + 8, 4, key)],
            ),
            IB_WC_LOC_LEN_ERR,
            None,
        ),
    ];
    for (name, b_access, w, status, recv) in cases {
        let a = d.create_qp(pd, IB_QPT_RC, cq, false);
        let b = d.create_qp(pd, IB_QPT_RC, cq, false);
        d.rc_up(a, gid, b, ALL, 0);
        d.rc_up(b, gid, a, b_access, 0);
        if recv.is_some() {
            d.recv(b, 500, &[(DATA + 0x1000, 16, key)]);
        }
        let before = d.read(DATA + 0x6_0000, 0x1000);
        d.send(a, &w);
        let n = 1 + usize::from(recv.is_some());
        let wcs = d.wait(cq, n);
        let sent = wcs
            .iter()
            .find(|w| w.0.qp_num.get() == a)
            .expect("sender completion");
        let expect_id = if name == "element too short" { 99 } else { 1 };
        assert_eq!((sent.wr_id(), sent.status()), (expect_id, status), "{name}");
        assert_ne!(status, ok);
        if let Some(rs) = recv {
            let r = wcs
                .iter()
                .find(|w| w.0.qp_num.get() == b)
                .expect("receiver completion");
            assert_eq!((r.wr_id(), r.status()), (500, rs), "{name}: receiver");
            assert_eq!(d.qp_state(b), IB_QPS_ERR, "{name}: receiver QP in error");
        }
        assert_eq!(d.qp_state(a), IB_QPS_ERR, "{name}: QP in error");
        assert_eq!(
            d.read(DATA + 0x6_0000, 0x1000),
            before,
            "{name}: user MR untouched"
        );
        d.quiet(cq);
        for q in [a, b] {
            d.ok(VIRTIO_RDMA_CMD_DESTROY_QP, &pair(q, 0), 0);
        }
    }
    d.finish();
}

/// A device with `event_bufs` event buffers lent and an RC pair on a CQ
/// without CQE buffers, whose QP `a` has posted a (signaled) WRITE: its
/// completion overruns the CQ. Returns (device, cq, a).
fn overrun(event_bufs: u16) -> (Dev, u32, u32) {
    let mut d = Dev::start();
    d.fill_events(event_bufs, 8);
    let pd = d.create_pd();
    let cq = d.create_cq(0);
    let key = d.dma_mr(pd, ALL);
    let a = d.create_qp(pd, IB_QPT_RC, cq, true);
    let b = d.create_qp(pd, IB_QPT_RC, cq, true);
    let gid = d.gid;
    d.rc_up(a, gid, b, ALL, 0);
    d.rc_up(b, gid, a, ALL, 0);
    d.send(
        a,
        &wqe(
            1,
            IB_WR_RDMA_WRITE,
            0,
            0,
            &rdma(DATA + 0x1000, key),
            &[(DATA, 8, key)],
        ),
    );
    (d, cq, a)
}

/// Waits until `n` events have arrived.
fn wait_events(d: &mut Dev, n: usize) -> Vec<(u32, u32)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut out = Vec::new();
    while out.len() < n {
        out.extend(d.events());
        assert!(Instant::now() < deadline, "events so far: {out:?}");
        thread::sleep(Duration::from_millis(1));
    }
    out
}

#[test]
fn cq_overrun_moves_qp_to_error() {
    let (mut d, _, a) = overrun(0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while d.qp_state(a) != IB_QPS_ERR {
        assert!(
            Instant::now() < deadline,
            "QP not in error after a CQ overrun"
        );
        thread::sleep(Duration::from_millis(1));
    }
    // No event buffer was lent: the events are lost, nothing else happens.
    assert_eq!(d.events(), vec![]);
    d.finish();
}

#[test]
fn cq_overrun_reports_cq_and_qp_errors() {
    let (mut d, cq, a) = overrun(4);
    assert_eq!(
        wait_events(&mut d, 2),
        vec![
            (VIRTIO_RDMA_EVENT_CQ_ERR, cq),
            (VIRTIO_RDMA_EVENT_QP_FATAL, a)
        ]
    );
    assert_eq!(d.qp_state(a), IB_QPS_ERR);
    // The flush completions found no buffer either, and raised nothing more.
    thread::sleep(Duration::from_millis(50));
    assert_eq!(d.events(), vec![]);
    d.finish();
}

#[test]
fn responder_errors_raise_async_events() {
    // (what, work request for key, requester's status, responder's event);
    // `key + (100 << 8)` names no MR.
    type Wr = fn(u32) -> Vec<u8>;
    let cases: [(&str, Wr, u8, u32); 4] = [
        (
            "RDMA WRITE with a bad rkey",
            |key| {
                wqe(
                    1,
                    IB_WR_RDMA_WRITE,
                    IB_SEND_SIGNALED,
                    0,
                    &rdma(DATA + 0x1000, key + (100 << 8)),
                    &[(DATA, 8, key)],
                )
            },
            IB_WC_REM_ACCESS_ERR,
            VIRTIO_RDMA_EVENT_QP_ACCESS_ERR,
        ),
        (
            "RDMA READ with a bad rkey",
            |key| {
                wqe(
                    1,
                    IB_WR_RDMA_READ,
                    IB_SEND_SIGNALED,
                    0,
                    &rdma(DATA + 0x1000, key + (100 << 8)),
                    &[(DATA, 8, key)],
                )
            },
            IB_WC_REM_ACCESS_ERR,
            VIRTIO_RDMA_EVENT_QP_ACCESS_ERR,
        ),
        (
            "atomic with a bad rkey",
            |key| {
                wqe(
                    1,
                    IB_WR_ATOMIC_FETCH_AND_ADD,
                    IB_SEND_SIGNALED,
                    0,
                    &atomic_wr(DATA + 0x1000, 1, 0, key + (100 << 8)),
                    &[(DATA, 8, key)],
                )
            },
            IB_WC_REM_ACCESS_ERR,
            VIRTIO_RDMA_EVENT_QP_ACCESS_ERR,
        ),
        (
            "misaligned atomic",
            |key| {
                wqe(
                    1,
                    IB_WR_ATOMIC_FETCH_AND_ADD,
                    IB_SEND_SIGNALED,
                    0,
                    &atomic_wr(DATA + 0x1004, 1, 0, key),
                    &[(DATA, 8, key)],
                )
            },
            IB_WC_REM_INV_REQ_ERR,
            VIRTIO_RDMA_EVENT_QP_REQ_ERR,
        ),
    ];
    for (what, wr, status, event) in cases {
        let RcPair {
            mut d,
            cq,
            a,
            b,
            key,
        } = rc_pair(ALL, ALL, 0);
        d.fill_events(4, 8);
        d.send(a, &wr(key));
        let wc = d.wait(cq, 1)[0];
        assert_eq!(wc.status(), status, "{what}: requester's completion");
        // The responder learns of it only through the event; the requester
        // through its completion (no event).
        assert_eq!(wait_events(&mut d, 1), vec![(event, b)], "{what}");
        assert_eq!(d.qp_state(b), IB_QPS_ERR, "{what}: responder state");
        thread::sleep(Duration::from_millis(50));
        assert_eq!(d.events(), vec![], "{what}: a second event");
        d.finish();
    }
}

#[test]
fn event_buffer_too_small_is_returned_empty() {
    let RcPair {
        mut d, cq, a, key, ..
    } = rc_pair(ALL, ALL, 0);
    // A 4-byte buffer cannot hold an event: given back with length 0.
    d.fill_events(1, 4);
    d.fill_events(1, 8);
    d.send(
        a,
        &wqe(
            1,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &rdma(DATA + 0x1000, key + (100 << 8)),
            &[(DATA, 8, key)],
        ),
    );
    assert_eq!(d.wait(cq, 1)[0].status(), IB_WC_REM_ACCESS_ERR);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut used = Vec::new();
    while used.len() < 2 {
        used.extend(d.take_used(Dev::event_q()));
        assert!(Instant::now() < deadline, "event queue: {used:?}");
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(used, vec![(0, 0), (1, 8)]);
    d.finish();
}

#[test]
fn req_notify_cq_forces_one_interrupt() {
    let RcPair {
        mut d, cq, a, key, ..
    } = rc_pair(ALL, ALL, 0);
    let q = Dev::cq_q(cq);
    let quiet_ring = |d: &Dev| {
        // used_event far ahead: the ring itself asks for no interrupt.
        let ue = d.vqs[q].avail() + 4 + 2 * u64::from(QSIZE);
        d.mem
            .write_obj(d.vqs[q].used_seen.wrapping_add(100), GuestAddress(ue))
            .expect("used_event");
        while d.vqs[q].call.read().is_ok() {}
    };
    quiet_ring(&d);
    d.ok(
        VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ,
        &pair(cq, VIRTIO_RDMA_NOTIFY_NEXT_COMPLETION),
        0,
    );
    d.send(
        a,
        &wqe(
            1,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &rdma(DATA + 0x1000, key),
            &[(DATA, 8, key)],
        ),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while d.vqs[q].call.read().is_err() {
        assert!(Instant::now() < deadline, "armed CQ did not interrupt");
        thread::sleep(Duration::from_millis(1));
    }
    d.wait(cq, 1);
    // Not armed (one-shot): no interrupt.
    quiet_ring(&d);
    d.send(
        a,
        &wqe(
            2,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &rdma(DATA + 0x1000, key),
            &[(DATA, 8, key)],
        ),
    );
    let used = d.vqs[q].used_seen;
    while d.used_idx(q) == used {
        thread::sleep(Duration::from_millis(1));
    }
    assert!(d.vqs[q].call.read().is_err(), "interrupt without arming");
    d.wait(cq, 1);
    // SOLICITED fires only for a solicited (or failed) completion.
    let b = 3;
    d.recv(b, 1, &[(DATA + 0x2000, 64, key)]);
    quiet_ring(&d);
    d.ok(
        VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ,
        &pair(cq, VIRTIO_RDMA_NOTIFY_SOLICITED),
        0,
    );
    d.send(
        a,
        &wqe(3, IB_WR_SEND, IB_SEND_SOLICITED, 0, &[], &[(DATA, 8, key)]),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while d.vqs[q].call.read().is_err() {
        assert!(
            Instant::now() < deadline,
            "solicited completion did not interrupt"
        );
        thread::sleep(Duration::from_millis(1));
    }
    // The send was unsignaled: only the receive completes.
    assert_eq!(d.wait(cq, 1)[0].0.qp_num.get(), b);
    d.finish();
}

/// Completions made in one pass of the device's loop interrupt the driver
/// once. Without EVENT_IDX the ring asks for an interrupt after every used
/// element, so a device that signalled per completion would raise eight.
#[test]
fn one_pass_interrupts_once() {
    let d = Dev::start_without(MEM_SIZE, |l| l, 1 << VIRTIO_RING_F_EVENT_IDX);
    assert!(!d.event_idx);
    let RcPair {
        mut d, cq, a, key, ..
    } = rc_pair_on(d, ALL, ALL, 0);
    let q = Dev::cq_q(cq);
    d.interrupts(q);
    // Eight, the SQ budget of one pass, published with one kick.
    let wqes: Vec<Vec<u8>> = (1..=8)
        .map(|i| {
            wqe(
                i,
                IB_WR_RDMA_WRITE,
                IB_SEND_SIGNALED,
                0,
                &rdma(DATA + 0x1000, key),
                &[(DATA, 64, key)],
            )
        })
        .collect();
    d.send_all(a, &wqes);
    let wcs = d.wait(cq, 8);
    assert!(wcs.iter().all(|w| w.status() == IB_WC_SUCCESS), "{wcs:?}");
    assert_eq!(
        d.interrupts(q),
        1,
        "interrupts for eight completions of one pass"
    );
    d.finish();
}

#[test]
fn object_commands_and_malformed_requests() {
    let mut d = Dev::start();
    let pd = d.create_pd();
    // CQs: numbers are virtqueue slots from 0.
    let cq = d.create_cq(4);
    assert_eq!(cq, 0);
    let fast = le32(
        &d.ok(
            VIRTIO_RDMA_CMD_CREATE_MR,
            &[pair(pd, 0), pair(4, 0)].concat(),
            16,
        ),
        0,
    );
    let dma = d.dma_mr(pd, IB_ACCESS_LOCAL_WRITE) >> 8;
    let table = DATA;
    d.fill(
        table,
        &[(DATA + 0x1000).to_le_bytes(), (DATA + 0x3000).to_le_bytes()].concat(),
    );
    d.fill(DATA + 0x100, &(DATA + 0x1001).to_le_bytes());
    d.fill(DATA + 0x200, &(1u64 << 40).to_le_bytes());
    let (st, r) = reg_user_mr(
        &mut d,
        pd,
        IB_ACCESS_LOCAL_WRITE,
        0x1800,
        0x4000_0800,
        table,
        2,
    );
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    let umr = le32(&r, 0);
    assert_eq!(
        (le32(&r, 4) >> 8, le32(&r, 8)),
        (umr, le32(&r, 4)),
        "lkey == rkey == (mrn << 8) | key"
    );
    let qp = d.create_qp(pd, IB_QPT_UD, cq, false);
    assert_eq!(qp, 2, "first non-GSI QP");
    let gsi = d.create_qp(pd, IB_QPT_GSI, cq, false);
    assert_eq!(gsi, 1);
    let mut a = VirtioRdmaQpAttr::new_zeroed();
    a.qp_state = IB_QPS_INIT;
    a.port_num = 1;
    a.qkey = U32::new(0x55);
    assert_eq!(
        d.modify(
            qp,
            IB_QP_STATE | IB_QP_PORT | IB_QP_PKEY_INDEX | IB_QP_QKEY,
            a
        ),
        0
    );
    let q = d.ok(VIRTIO_RDMA_CMD_QUERY_QP, &pair(qp, 0), 96);
    let attr = VirtioRdmaQpAttr::read_from_bytes(&q).expect("attr");
    assert_eq!(
        (attr.qp_state, attr.qkey.get(), attr.port_num),
        (IB_QPS_INIT, 0x55, 1)
    );
    assert_eq!(
        (
            attr.cap.max_send_wr.get(),
            attr.cap.max_recv_sge.get(),
            attr.cap.max_inline_data.get()
        ),
        (8, 4, 64)
    );

    let map = |mrn: u32, npages: u32, iova: u64, len: u64, pages: u64| {
        [
            pair(mrn, npages),
            iova.to_le_bytes().to_vec(),
            len.to_le_bytes().to_vec(),
            pages.to_le_bytes().to_vec(),
        ]
        .concat()
    };
    let create_qp = |pdn: u32, t: u8, cqn: u32, wr: u32, sge: u32| {
        let mut r = VirtioRdmaCmdCreateQp::new_zeroed();
        r.pdn = U32::new(pdn);
        r.qp_type = t;
        r.max_send_wr = U32::new(wr);
        r.max_send_sge = U32::new(sge);
        r.send_cqn = U32::new(cqn);
        r.recv_cqn = U32::new(cqn);
        r.as_bytes().to_vec()
    };
    let modify = |qpn: u32, mask: u32, state: u8, cur: u8| {
        let mut a = VirtioRdmaQpAttr::new_zeroed();
        a.qp_state = state;
        a.cur_qp_state = cur;
        a.port_num = 1;
        a.ah_attr.sgid_index = 9;
        VirtioRdmaCmdModifyQp {
            qpn: U32::new(qpn),
            attr_mask: U32::new(mask),
            attr: a,
        }
        .as_bytes()
        .to_vec()
    };
    use VIRTIO_RDMA_S_BAD_STATE as BAD_STATE;
    use VIRTIO_RDMA_S_BUSY as BUSY;
    use VIRTIO_RDMA_S_FAULT as FAULT;
    use VIRTIO_RDMA_S_INVALID as INVALID;
    use VIRTIO_RDMA_S_NOT_FOUND as NOT_FOUND;
    let table_cases: Vec<(&str, u32, Vec<u8>, usize, u8)> = vec![
        (
            "CREATE_CQ cqe 0",
            VIRTIO_RDMA_CMD_CREATE_CQ,
            pair(0, 0),
            8,
            INVALID,
        ),
        (
            "CREATE_CQ cqe above max_cqe",
            VIRTIO_RDMA_CMD_CREATE_CQ,
            pair(17, 0),
            8,
            INVALID,
        ),
        (
            "CREATE_CQ short",
            VIRTIO_RDMA_CMD_CREATE_CQ,
            vec![1],
            8,
            INVALID,
        ),
        (
            "DESTROY_CQ unknown",
            VIRTIO_RDMA_CMD_DESTROY_CQ,
            pair(3, 0),
            0,
            NOT_FOUND,
        ),
        (
            "DESTROY_CQ past max_cq",
            VIRTIO_RDMA_CMD_DESTROY_CQ,
            pair(u32::MAX, 0),
            0,
            NOT_FOUND,
        ),
        (
            "DESTROY_CQ in use",
            VIRTIO_RDMA_CMD_DESTROY_CQ,
            pair(cq, 0),
            0,
            BUSY,
        ),
        (
            "GET_DMA_MR bad PD",
            VIRTIO_RDMA_CMD_GET_DMA_MR,
            pair(77, 1),
            16,
            NOT_FOUND,
        ),
        (
            "GET_DMA_MR remote write without local",
            VIRTIO_RDMA_CMD_GET_DMA_MR,
            pair(pd, IB_ACCESS_REMOTE_WRITE),
            16,
            INVALID,
        ),
        (
            "GET_DMA_MR unknown access bit",
            VIRTIO_RDMA_CMD_GET_DMA_MR,
            pair(pd, 1 << 20),
            16,
            INVALID,
        ),
        (
            "CREATE_MR max_num_sg 0",
            VIRTIO_RDMA_CMD_CREATE_MR,
            [pair(pd, 0), pair(0, 0)].concat(),
            16,
            INVALID,
        ),
        (
            "CREATE_MR max_num_sg 513",
            VIRTIO_RDMA_CMD_CREATE_MR,
            [pair(pd, 0), pair(513, 0)].concat(),
            16,
            INVALID,
        ),
        (
            "MAP_MR_SG of a DMA MR",
            VIRTIO_RDMA_CMD_MAP_MR_SG,
            map(dma, 1, 0, 8, table),
            8,
            INVALID,
        ),
        (
            "MAP_MR_SG unknown MR",
            VIRTIO_RDMA_CMD_MAP_MR_SG,
            map(999, 1, 0, 8, table),
            8,
            NOT_FOUND,
        ),
        (
            "MAP_MR_SG above max_num_sg",
            VIRTIO_RDMA_CMD_MAP_MR_SG,
            map(fast, 5, 0, 8, table),
            8,
            INVALID,
        ),
        (
            "MAP_MR_SG too few pages",
            VIRTIO_RDMA_CMD_MAP_MR_SG,
            map(fast, 1, 0xff0, 0x20, table),
            8,
            INVALID,
        ),
        (
            "MAP_MR_SG misaligned page",
            VIRTIO_RDMA_CMD_MAP_MR_SG,
            map(fast, 1, 0, 8, DATA + 0x100),
            8,
            INVALID,
        ),
        (
            "MAP_MR_SG page outside memory",
            VIRTIO_RDMA_CMD_MAP_MR_SG,
            map(fast, 1, 0, 8, DATA + 0x200),
            8,
            FAULT,
        ),
        (
            "MAP_MR_SG table outside memory",
            VIRTIO_RDMA_CMD_MAP_MR_SG,
            map(fast, 1, 0, 8, 1 << 40),
            8,
            FAULT,
        ),
        (
            "MAP_MR_SG length 0",
            VIRTIO_RDMA_CMD_MAP_MR_SG,
            map(fast, 1, 0, 0, table),
            8,
            INVALID,
        ),
        (
            "REG_USER_MR npages != pages touched",
            VIRTIO_RDMA_CMD_REG_USER_MR,
            VirtioRdmaCmdRegUserMr {
                pdn: U32::new(pd),
                access_flags: U32::new(0),
                length: U64::new(0x1000),
                iova: U64::new(0),
                pages: U64::new(table),
                npages: U32::new(2),
                reserved: U32::new(0),
            }
            .as_bytes()
            .to_vec(),
            16,
            INVALID,
        ),
        (
            "REG_USER_MR above max_mr_size",
            VIRTIO_RDMA_CMD_REG_USER_MR,
            VirtioRdmaCmdRegUserMr {
                pdn: U32::new(pd),
                access_flags: U32::new(0),
                length: U64::new(u64::MAX),
                iova: U64::new(0),
                pages: U64::new(table),
                npages: U32::new(2),
                reserved: U32::new(0),
            }
            .as_bytes()
            .to_vec(),
            16,
            INVALID,
        ),
        (
            "REG_USER_MR page outside memory",
            VIRTIO_RDMA_CMD_REG_USER_MR,
            VirtioRdmaCmdRegUserMr {
                pdn: U32::new(pd),
                access_flags: U32::new(0),
                length: U64::new(8),
                iova: U64::new(0),
                pages: U64::new(DATA + 0x200),
                npages: U32::new(1),
                reserved: U32::new(0),
            }
            .as_bytes()
            .to_vec(),
            16,
            FAULT,
        ),
        (
            "DEREG_MR unknown",
            VIRTIO_RDMA_CMD_DEREG_MR,
            pair(4242, 0),
            0,
            NOT_FOUND,
        ),
        (
            "DESTROY_PD with objects",
            VIRTIO_RDMA_CMD_DESTROY_PD,
            pair(pd, 0),
            0,
            BUSY,
        ),
        (
            "CREATE_QP RAW_PACKET",
            VIRTIO_RDMA_CMD_CREATE_QP,
            create_qp(pd, 8, cq, 4, 1),
            8,
            INVALID,
        ),
        (
            "CREATE_QP max_send_wr 0",
            VIRTIO_RDMA_CMD_CREATE_QP,
            create_qp(pd, IB_QPT_RC, cq, 0, 1),
            8,
            INVALID,
        ),
        (
            "CREATE_QP max_send_wr above queue",
            VIRTIO_RDMA_CMD_CREATE_QP,
            create_qp(pd, IB_QPT_RC, cq, 17, 1),
            8,
            INVALID,
        ),
        (
            "CREATE_QP 33 SGEs",
            VIRTIO_RDMA_CMD_CREATE_QP,
            create_qp(pd, IB_QPT_RC, cq, 4, 33),
            8,
            INVALID,
        ),
        (
            "CREATE_QP bad CQ",
            VIRTIO_RDMA_CMD_CREATE_QP,
            create_qp(pd, IB_QPT_RC, 3, 4, 1),
            8,
            NOT_FOUND,
        ),
        (
            "CREATE_QP bad PD",
            VIRTIO_RDMA_CMD_CREATE_QP,
            create_qp(99, IB_QPT_RC, cq, 4, 1),
            8,
            NOT_FOUND,
        ),
        (
            "CREATE_QP second GSI",
            VIRTIO_RDMA_CMD_CREATE_QP,
            create_qp(pd, IB_QPT_GSI, cq, 4, 1),
            8,
            VIRTIO_RDMA_S_NO_RESOURCE,
        ),
        (
            "MODIFY_QP unknown",
            VIRTIO_RDMA_CMD_MODIFY_QP,
            modify(6, IB_QP_STATE, IB_QPS_ERR, 0),
            0,
            NOT_FOUND,
        ),
        (
            "MODIFY_QP INIT -> RTS",
            VIRTIO_RDMA_CMD_MODIFY_QP,
            modify(qp, IB_QP_STATE | IB_QP_SQ_PSN, IB_QPS_RTS, 0),
            0,
            BAD_STATE,
        ),
        (
            "MODIFY_QP wrong cur_state",
            VIRTIO_RDMA_CMD_MODIFY_QP,
            modify(qp, IB_QP_STATE | IB_QP_CUR_STATE, IB_QPS_RTR, IB_QPS_RESET),
            0,
            BAD_STATE,
        ),
        (
            "MODIFY_QP state 7",
            VIRTIO_RDMA_CMD_MODIFY_QP,
            modify(qp, IB_QP_STATE, 7, 0),
            0,
            INVALID,
        ),
        (
            "MODIFY_QP RC attr on UD",
            VIRTIO_RDMA_CMD_MODIFY_QP,
            modify(qp, IB_QP_STATE | IB_QP_DEST_QPN, IB_QPS_RTR, 0),
            0,
            INVALID,
        ),
        (
            "MODIFY_QP short",
            VIRTIO_RDMA_CMD_MODIFY_QP,
            pair(qp, 1),
            0,
            INVALID,
        ),
        (
            "QUERY_QP unknown",
            VIRTIO_RDMA_CMD_QUERY_QP,
            pair(0, 0),
            96,
            NOT_FOUND,
        ),
        (
            "DESTROY_QP unknown",
            VIRTIO_RDMA_CMD_DESTROY_QP,
            pair(7, 0),
            0,
            NOT_FOUND,
        ),
        (
            "REQ_NOTIFY_CQ no flags",
            VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ,
            pair(cq, 0),
            0,
            INVALID,
        ),
        (
            "REQ_NOTIFY_CQ unknown flag",
            VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ,
            pair(cq, 4),
            0,
            INVALID,
        ),
        (
            "REQ_NOTIFY_CQ unknown CQ",
            VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ,
            pair(2, 1),
            0,
            NOT_FOUND,
        ),
    ];
    let mrs = d.dev.ctrl().mr_count();
    for (name, cmd, body, rsp, status) in table_cases {
        let (st, b) = d.cmd(cmd, &body, rsp);
        assert_eq!(st, status, "{name}");
        assert!(b.is_empty(), "{name}: no body on failure");
    }
    assert_eq!(
        d.dev.ctrl().mr_count(),
        mrs,
        "no MR leaked by failed commands"
    );
    assert_eq!(
        d.qp_state(qp),
        IB_QPS_INIT,
        "failed MODIFY_QPs changed nothing"
    );

    // Happy paths of the rest.
    assert_eq!(
        le32(
            &d.ok(
                VIRTIO_RDMA_CMD_MAP_MR_SG,
                &map(fast, 2, 0x800, 0x1000, table),
                8
            ),
            0
        ),
        2
    );
    d.ok(VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ, &pair(cq, 3), 0);
    let cq2 = d.create_cq(0);
    assert_eq!(cq2, 1);
    d.ok(VIRTIO_RDMA_CMD_DESTROY_CQ, &pair(cq2, 0), 0);
    for q in [qp, gsi] {
        d.ok(VIRTIO_RDMA_CMD_DESTROY_QP, &pair(q, 0), 0);
    }
    for m in [fast, dma, umr] {
        d.ok(VIRTIO_RDMA_CMD_DEREG_MR, &pair(m, 0), 0);
    }
    assert_eq!(
        d.cmd(VIRTIO_RDMA_CMD_DEREG_MR, &pair(umr, 0), 0).0,
        NOT_FOUND
    );
    d.ok(VIRTIO_RDMA_CMD_DESTROY_CQ, &pair(cq, 0), 0);
    d.ok(VIRTIO_RDMA_CMD_DESTROY_PD, &pair(pd, 0), 0);
    assert_eq!(d.dev.ctrl().mr_count(), 0);
    d.finish();
}

#[test]
fn random_elements_never_hurt_the_device() {
    let RcPair {
        mut d,
        cq,
        a,
        b,
        key,
    } = rc_pair(ALL, ALL, 0);
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..60u64 {
        let len = (next() % 200) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if len > 12 {
            // Mostly known opcodes, small SGE counts: reach deeper code.
            bytes[8] = [0, 1, 2, 3, 4, 5, 6, 7, 9, 0x20, 0x77][(next() % 11) as usize];
            bytes[10] = (next() % 6) as u8;
            bytes[11] = 0;
        }
        let qp = if round % 2 == 0 { a } else { b };
        let q = Dev::sq_q(qp);
        let before = d.used_idx(q);
        d.send(qp, &bytes);
        let deadline = Instant::now() + Duration::from_secs(10);
        while d.used_idx(q) == before {
            assert!(
                Instant::now() < deadline,
                "round {round}: element not returned"
            );
            thread::sleep(Duration::from_micros(200));
        }
        d.take_used(q);
        d.poll(cq);
        if round % 10 == 9 {
            // Fresh QPs now and then, so that more rounds execute.
            for x in [a, b] {
                let mut attr = VirtioRdmaQpAttr::new_zeroed();
                attr.qp_state = IB_QPS_RESET;
                assert_eq!(d.modify(x, IB_QP_STATE, attr), VIRTIO_RDMA_S_OK);
            }
            let gid = d.gid;
            d.rc_up(a, gid, b, ALL, 0);
            d.rc_up(b, gid, a, ALL, 0);
            d.recv(b, 1, &[(DATA, 64, key)]);
        }
    }
    // Still serving.
    let pd = d.create_pd();
    assert!(pd > 0);
    d.finish();
}

/// Regression (found while writing the `work_request` fuzz target; such an
/// element trips its 128 MiB allocation limit): an element's SGE lengths
/// were all translated to page ranges before any length check, so
/// 32 SGEs of 4 GiB cost 32 Mi ranges (512 MiB) per element, and RDMA
/// WRITE and READ had no message size limit at all. Now a gather list
/// stops at one byte past the largest message (and fails with
/// LOC_LEN_ERR), and a scatter list is translated only as far as the data
/// goes (as rxe walks it).
#[test]
fn sge_lists_cost_only_the_data_moved() {
    // Quota for the 2 GiB MR below (512 Ki entries; the default for this
    // small guest is 256 Ki).
    let mut d = Dev::start_with(MEM_SIZE, |l| l.with_max_mr_pages(Some(1 << 19)));
    let pd = d.create_pd();
    let cq = d.create_cq(12);
    let key = d.dma_mr(pd, ALL);
    // A 2 GiB user MR whose every page is the same guest page.
    let (table, npages) = (DATA + 0x10_0000, 1u32 << 19);
    let page = (DATA + 0x6_0000).to_le_bytes();
    d.fill(table, &page.repeat(npages as usize));
    let (st, r) = reg_user_mr(&mut d, pd, ALL, 1 << 31, 0, table, npages);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    let big = le32(&r, 4);
    let gid = d.gid;
    let pair = |d: &mut Dev| {
        let a = d.create_qp(pd, IB_QPT_RC, cq, false);
        let b = d.create_qp(pd, IB_QPT_RC, cq, false);
        d.rc_up(a, gid, b, ALL, 0);
        d.rc_up(b, gid, a, ALL, 0);
        (a, b)
    };
    let (a, b) = pair(&mut d);

    // A receive longer than guest memory, of which the message needs 8
    // bytes of the first SGE.
    d.recv(b, 10, &[(DATA + 0x1000, 64, key), (0, u32::MAX, key)]);
    d.fill(DATA, b"8 bytes!");
    d.send(
        a,
        &wqe(1, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 8, key)]),
    );
    let wcs = d.wait(cq, 2);
    assert!(wcs.iter().all(|w| w.status() == IB_WC_SUCCESS), "{wcs:?}");
    assert_eq!(d.read(DATA + 0x1000, 8), b"8 bytes!");

    // A 4 GiB WRITE (two 2 GiB SGEs over the user MR): too long.
    let two = [(0, 1 << 31, big), (0, 1 << 31, big)];
    d.send(
        a,
        &wqe(
            2,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &rdma(DATA, key),
            &two,
        ),
    );
    let wcs = d.wait(cq, 1);
    assert_eq!((wcs[0].wr_id(), wcs[0].status()), (2, IB_WC_LOC_LEN_ERR));

    // A 4 GiB READ into the same: too long.
    let (a, _b) = pair(&mut d);
    d.send(
        a,
        &wqe(
            3,
            IB_WR_RDMA_READ,
            IB_SEND_SIGNALED,
            0,
            &rdma(DATA, key),
            &two,
        ),
    );
    let wcs = d.wait(cq, 1);
    assert_eq!((wcs[0].wr_id(), wcs[0].status()), (3, IB_WC_LOC_LEN_ERR));
    d.finish();
}

/// An SQ runs in passes of `engine::SQ_BUDGET` elements, the rest
/// scheduled after the device's other queues: a full ring posted before
/// RTS (so no kick drains it element by element) completes entirely.
#[test]
fn a_full_sq_runs_in_budgeted_passes() {
    let mut d = Dev::start();
    let pd = d.create_pd();
    let cq = d.create_cq(16);
    let key = d.dma_mr(pd, ALL);
    let a = d.create_qp(pd, IB_QPT_RC, cq, false);
    let b = d.create_qp(pd, IB_QPT_RC, cq, false);
    let gid = d.gid;
    d.rc_up(b, gid, a, ALL, 0);
    let n = usize::from(QSIZE);
    assert!(n > vhost_user_rdma::engine::SQ_BUDGET);
    d.fill(DATA, &pattern(64 * n, 9));
    for i in 0..n as u64 {
        d.send(
            a,
            &wqe(
                i,
                IB_WR_RDMA_WRITE,
                IB_SEND_SIGNALED,
                0,
                &rdma(DATA + 0x10_0000 + 64 * i, key),
                &[(DATA + 64 * i, 64, key)],
            ),
        );
    }
    d.rc_up(a, gid, b, ALL, 0);
    let wcs = d.wait(cq, n);
    let ids: Vec<u64> = wcs.iter().map(|w| w.wr_id()).collect();
    assert_eq!(ids, (0..n as u64).collect::<Vec<_>>(), "in order");
    assert!(wcs.iter().all(|w| w.status() == IB_WC_SUCCESS));
    assert_eq!(d.read(DATA + 0x10_0000, 64 * n), pattern(64 * n, 9));
    d.finish();
}

/// A busy SQ does not keep the device's other queues waiting: its loop runs
/// passes back to back for a bounded number of steps, then looks for events
/// again. A control command posted while a full SQ of large WRITEs (many
/// chunks each) runs is answered before they have all completed.
#[test]
fn a_busy_sq_lets_a_control_command_through() {
    // Long enough that the harness, polling every 200 us, sees the first
    // completion well before the last (the last comes tens of ms later).
    const BIG: u32 = 8 << 20;
    let mut d = Dev::start_with_mem(24 << 20);
    // A buffer for every completion: none waits for the harness.
    let n = usize::from(QSIZE);
    let (cq, a, _, key) = own_rc_pair_with_cq(&mut d, QSIZE, ALL, ALL, 0);
    let steps = n as u64 * u64::from(BIG) / vhost_user_rdma::engine::CHUNK;
    assert!(steps >= 8 * 4 * vhost_user_rdma::engine::SQ_BUDGET as u64);
    let wqes: Vec<Vec<u8>> = (0..n as u64)
        .map(|i| {
            wqe(
                i,
                IB_WR_RDMA_WRITE,
                IB_SEND_SIGNALED,
                0,
                &rdma(DATA + (8 << 20), key),
                &[(DATA, BIG, key)],
            )
        })
        .collect();
    d.send_all(a, &wqes);
    // Once the first WRITE completed, the loop is in the SQ's passes.
    let mut done = d.wait(cq, 1).len();
    d.create_pd();
    done += d.poll(cq).len();
    assert!(
        done < n,
        "the control command waited for all {n} WRITEs ({steps} steps)"
    );
    let wcs = d.wait(cq, n - done);
    assert!(wcs.iter().all(|w| w.status() == IB_WC_SUCCESS), "{wcs:?}");
    d.finish();
}

/// Messages larger than a chunk (`engine::CHUNK`) move a chunk at a time:
/// SEND, SEND_WITH_IMM, WRITE, WRITE_WITH_IMM and READ of 1 MiB arrive
/// whole with the right completions, in order with a small message after
/// them.
#[test]
fn large_messages_move_in_chunks() {
    const BIG: u32 = 1 << 20;
    assert!(u64::from(BIG) >= 4 * vhost_user_rdma::engine::CHUNK);
    let RcPair {
        mut d,
        cq,
        a,
        b,
        key,
    } = rc_pair_on(Dev::start_with_mem(16 << 20), ALL, ALL, 7);
    let (src, dst) = (DATA, DATA + (4 << 20));
    let data = pattern(BIG as usize, 5);
    d.fill(src, &data);
    let clear = |d: &mut Dev| d.fill(dst, &vec![0; BIG as usize]);
    // SEND and SEND_WITH_IMM into one receive each.
    for (id, op) in [(1, IB_WR_SEND), (2, IB_WR_SEND_WITH_IMM)] {
        clear(&mut d);
        d.recv(b, 100 + id, &[(dst, BIG, key)]);
        d.send(
            a,
            &wqe(id, op, IB_SEND_SIGNALED, 9, &[], &[(src, BIG, key)]),
        );
        let wcs = d.wait(cq, 2);
        let r = wcs.iter().find(|w| w.wr_id() == 100 + id).expect("receive");
        let s = wcs.iter().find(|w| w.wr_id() == id).expect("send");
        assert_eq!((r.status(), r.byte_len()), (IB_WC_SUCCESS, BIG), "op {op}");
        assert_eq!((s.status(), s.byte_len()), (IB_WC_SUCCESS, BIG), "op {op}");
        assert_eq!(d.read(dst, BIG as usize), data, "op {op}");
    }
    // WRITE, WRITE_WITH_IMM (a receive completes after the data), READ
    // (back into the source's place), then a small SEND that must come
    // after them.
    clear(&mut d);
    d.send(
        a,
        &wqe(
            3,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &rdma(dst, key),
            &[(src, BIG, key)],
        ),
    );
    assert_eq!(d.wait(cq, 1)[0].status(), IB_WC_SUCCESS);
    assert_eq!(d.read(dst, BIG as usize), data);
    clear(&mut d);
    d.recv(b, 104, &[(DATA + 0x3000, 16, key)]);
    d.send(
        a,
        &wqe(
            4,
            IB_WR_RDMA_WRITE_WITH_IMM,
            IB_SEND_SIGNALED,
            7,
            &rdma(dst, key),
            &[(src, BIG, key)],
        ),
    );
    let wcs = d.wait(cq, 2);
    let r = wcs.iter().find(|w| w.wr_id() == 104).expect("receive");
    assert_eq!(
        (r.status(), r.opcode(), r.byte_len()),
        (0, IB_WC_RECV_RDMA_WITH_IMM, BIG)
    );
    assert_eq!(d.read(dst, BIG as usize), data);
    d.fill(src, &vec![0; BIG as usize]);
    d.recv(b, 105, &[(DATA + 0x3000, 16, key)]);
    d.send(
        a,
        &wqe(
            5,
            IB_WR_RDMA_READ,
            IB_SEND_SIGNALED,
            0,
            &rdma(dst, key),
            &[(src, BIG, key)],
        ),
    );
    d.send(
        a,
        &wqe(
            6,
            IB_WR_SEND,
            IB_SEND_SIGNALED,
            0,
            &[],
            &[(DATA + 0x3100, 4, key)],
        ),
    );
    let wcs = d.wait(cq, 3);
    let order: Vec<u64> = wcs
        .iter()
        .filter(|w| w.wr_id() < 100)
        .map(|w| w.wr_id())
        .collect();
    assert_eq!(
        order,
        [5, 6],
        "the small SEND completes after the large READ"
    );
    let rd = wcs.iter().find(|w| w.wr_id() == 5).expect("read");
    assert_eq!((rd.status(), rd.byte_len()), (IB_WC_SUCCESS, BIG));
    assert_eq!(
        d.read(src, BIG as usize),
        data,
        "READ brought the data back"
    );
    d.finish();
}

/// QUERY_COUNTERS of device `d`'s port 1.
fn counters(d: &mut Dev) -> Vec<u64> {
    let rsp = d.ok(
        VIRTIO_RDMA_CMD_QUERY_COUNTERS,
        &pair(1, 0),
        size_of::<VirtioRdmaRspQueryCounters>(),
    );
    VirtioRdmaRspQueryCounters::read_from_bytes(&rsp)
        .expect("a whole response")
        .value
        .iter()
        .map(|v| v.get())
        .collect()
}

#[test]
fn port_counters_count_what_moved() {
    let CrossPair {
        mut x,
        mut y,
        cx,
        cy,
        kx,
        ky,
        qx,
        qy,
        ..
    } = cross_rc_pair(Dev::start(), Dev::start(), 7);
    assert!(counters(&mut x).iter().all(|&v| v == 0));
    // A SEND of 2500 bytes before y posts a receive: RNR NAKs, then 3
    // packets of the 1024-byte path MTU once the receive is there.
    x.send(
        qx,
        &wqe(1, IB_WR_SEND, IB_SEND_SIGNALED, 0, &[], &[(DATA, 2500, kx)]),
    );
    x.quiet(cx);
    y.recv(qy, 2, &[(DATA, 4096, ky)]);
    assert_eq!(x.wait(cx, 1)[0].status(), IB_WC_SUCCESS);
    assert_eq!(y.wait(cy, 1)[0].byte_len(), 2500);
    // An RDMA READ of 8 bytes, then a WRITE with a key y never gave out.
    x.send(
        qx,
        &wqe(
            3,
            IB_WR_RDMA_READ,
            IB_SEND_SIGNALED,
            0,
            &rdma(DATA, ky),
            &[(DATA, 8, kx)],
        ),
    );
    assert_eq!(x.wait(cx, 1)[0].status(), IB_WC_SUCCESS);
    x.send(
        qx,
        &wqe(
            4,
            IB_WR_RDMA_WRITE,
            IB_SEND_SIGNALED,
            0,
            &rdma(DATA, ky ^ 0x8000),
            &[(DATA, 8, kx)],
        ),
    );
    assert_eq!(x.wait(cx, 1)[0].status(), IB_WC_REM_ACCESS_ERR);
    let (vx, vy) = (counters(&mut x), counters(&mut y));
    let naks = vy[VIRTIO_RDMA_CNT_RNR_NAKS_SENT];
    assert!(naks >= 1, "{vy:?}");
    // The SEND went naks + 1 times; y took it once.
    let sends = naks + 1;
    assert_eq!(vx[VIRTIO_RDMA_CNT_SENT_PKTS], 3 * sends + 1 + 1, "{vx:?}");
    assert_eq!(
        vx[VIRTIO_RDMA_CNT_SENT_BYTES],
        2500 * sends + 8 + 8,
        "{vx:?}"
    );
    assert_eq!(vy[VIRTIO_RDMA_CNT_RCVD_PKTS], 3 + 1 + 1, "{vy:?}");
    assert_eq!(vy[VIRTIO_RDMA_CNT_RCVD_BYTES], 2500 + 8 + 8, "{vy:?}");
    assert_eq!(vx[VIRTIO_RDMA_CNT_RCVD_PKTS], 0, "{vx:?}");
    assert_eq!(vy[VIRTIO_RDMA_CNT_SENT_PKTS], 0, "{vy:?}");
    assert_eq!(vx[VIRTIO_RDMA_CNT_RNR_NAKS_RCVD], naks, "{vx:?}");
    assert_eq!(vx[VIRTIO_RDMA_CNT_REM_ACCESS_ERR], 1, "{vx:?}");
    // Each error completion counts once, on the device whose CQ took it.
    let errors = |v: &[u64]| v[VIRTIO_RDMA_CNT_LOC_LEN_ERR..].iter().sum::<u64>();
    assert_eq!(errors(&vx), 1, "{vx:?}");
    assert_eq!(errors(&vy), 0, "{vy:?}");
    // y's QP went to error over the bad key: its next receive is flushed.
    y.recv(qy, 5, &[(DATA, 8, ky)]);
    assert_eq!(y.wait(cy, 1)[0].status(), IB_WC_WR_FLUSH_ERR);
    assert_eq!(counters(&mut y)[VIRTIO_RDMA_CNT_WR_FLUSH_ERR], 1);
    // Only port 1 exists.
    let (status, _) = x.cmd(
        VIRTIO_RDMA_CMD_QUERY_COUNTERS,
        &pair(2, 0),
        size_of::<VirtioRdmaRspQueryCounters>(),
    );
    assert_eq!(status, VIRTIO_RDMA_S_INVALID);
    x.finish();
    y.finish();
}

fn flush_wr(addr: u64, length: u64, rkey: u32, flush_type: u8, flush_level: u8) -> Vec<u8> {
    VirtioRdmaSqFlush {
        remote_addr: U64::new(addr),
        length: U64::new(length),
        rkey: U32::new(rkey),
        flush_type,
        flush_level,
        reserved: U16::new(0),
    }
    .as_bytes()
    .to_vec()
}

/// Posts `op` with `wr` on `p`'s QP a and returns its completion's
/// (status, opcode).
fn one(p: &mut RcPair, op: u8, wr: &[u8]) -> (u8, u8) {
    p.d.send(p.a, &wqe(1, op, IB_SEND_SIGNALED, 0, wr, &[]));
    let wc = p.d.wait(p.cq, 1)[0];
    (wc.status(), wc.opcode())
}

#[test]
fn atomic_write_and_flush() {
    const FG: u32 = IB_ACCESS_FLUSH_GLOBAL;
    const FP: u32 = IB_ACCESS_FLUSH_PERSISTENT;
    let t = DATA + 0x32_0008;
    let bytes = u64::from_le_bytes(*b"8 bytes!");
    let mut p = rc_pair(ALL | FG, ALL | FG | FP, 0);
    let key = p.key;
    p.d.fill(t, &[0; 16]);
    let aw = atomic_wr(t, bytes, 0, key);
    assert_eq!(
        one(&mut p, IB_WR_ATOMIC_WRITE, &aw),
        (IB_WC_SUCCESS, IB_WC_ATOMIC_WRITE)
    );
    assert_eq!(p.d.read(t, 16), [&b"8 bytes!"[..], &[0; 8]].concat());
    let fl = flush_wr(t, 8, key, IB_FLUSH_GLOBAL, IB_FLUSH_RANGE);
    assert_eq!(one(&mut p, IB_WR_FLUSH, &fl), (IB_WC_SUCCESS, IB_WC_FLUSH));
    // The whole MR: its range does not matter.
    let fl = flush_wr(0, 12_345_678, key, IB_FLUSH_GLOBAL, IB_FLUSH_MR);
    assert_eq!(one(&mut p, IB_WR_FLUSH, &fl), (IB_WC_SUCCESS, IB_WC_FLUSH));
    // Persistence no MR grants.
    let fl = flush_wr(t, 8, key, IB_FLUSH_PERSISTENT, IB_FLUSH_RANGE);
    assert_eq!(one(&mut p, IB_WR_FLUSH, &fl).0, IB_WC_REM_ACCESS_ERR);
    p.d.finish();

    // FLUSH rights: the MR's, the QP's; a known placement and level.
    for (mr, qp, ty, level, want) in [
        (
            ALL,
            ALL | FG,
            IB_FLUSH_GLOBAL,
            IB_FLUSH_RANGE,
            IB_WC_REM_ACCESS_ERR,
        ),
        (
            ALL | FG,
            ALL,
            IB_FLUSH_GLOBAL,
            IB_FLUSH_MR,
            IB_WC_REM_ACCESS_ERR,
        ),
        (ALL | FG, ALL | FG, 4, IB_FLUSH_RANGE, IB_WC_REM_INV_REQ_ERR),
        (ALL | FG, ALL | FG, 0, IB_FLUSH_RANGE, IB_WC_REM_INV_REQ_ERR),
        (
            ALL | FG,
            ALL | FG,
            IB_FLUSH_GLOBAL,
            2,
            IB_WC_REM_INV_REQ_ERR,
        ),
    ] {
        let mut p = rc_pair(mr, qp, 0);
        let fl = flush_wr(t, 8, p.key, ty, level);
        assert_eq!(
            one(&mut p, IB_WR_FLUSH, &fl).0,
            want,
            "{mr:#x} {qp:#x} {ty} {level}"
        );
        assert_eq!(p.d.qp_state(p.a), IB_QPS_ERR);
        p.d.finish();
    }
    // ATOMIC WRITE: aligned, with REMOTE_WRITE rights, carried bytes only.
    let mut p = rc_pair(ALL, ALL, 0);
    p.d.fill(t, &[0; 16]);
    let aw = atomic_wr(t + 4, bytes, 0, p.key);
    assert_eq!(
        one(&mut p, IB_WR_ATOMIC_WRITE, &aw).0,
        IB_WC_REM_INV_REQ_ERR
    );
    p.d.finish();
    let mut p = rc_pair(ALL & !IB_ACCESS_REMOTE_WRITE, ALL, 0);
    p.d.fill(t, &[0; 16]);
    let aw = atomic_wr(t, bytes, 0, p.key);
    assert_eq!(one(&mut p, IB_WR_ATOMIC_WRITE, &aw).0, IB_WC_REM_ACCESS_ERR);
    assert_eq!(p.d.read(t, 16), [0; 16], "nothing written");
    p.d.finish();
    let mut p = rc_pair(ALL, ALL, 0);
    let key = p.key;
    p.d.send(
        p.a,
        &wqe(
            1,
            IB_WR_ATOMIC_WRITE,
            IB_SEND_SIGNALED,
            0,
            &aw,
            &[(DATA, 8, key)],
        ),
    );
    assert_eq!(
        p.d.wait(p.cq, 1)[0].status(),
        IB_WC_LOC_QP_OP_ERR,
        "an SGE: the requester's own error, nothing sent"
    );
    p.d.finish();
    // No UC packet carries either.
    let mut p = uc_pair(ALL | FG, ALL | FG);
    let aw = atomic_wr(t, bytes, 0, p.key);
    assert_eq!(one(&mut p, IB_WR_ATOMIC_WRITE, &aw).0, IB_WC_LOC_QP_OP_ERR);
    p.d.finish();
}
