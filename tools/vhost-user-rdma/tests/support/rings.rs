// SPDX-License-Identifier: GPL-2.0
//! Queues in guest memory (`VIRTIO_RDMA_F_RINGS`) as a driver lays them
//! out: work and CQ rings with their page tables, producing into them and
//! taking completions out, for `tests/rings.rs` and `tests/srq.rs`.

use std::thread;
use std::time::{Duration, Instant};

use vhost_user_rdma::abi::*;
use vhost_user_rdma::limits::Rings;
use vm_memory::{Bytes, GuestAddress};
use zerocopy::{FromBytes, IntoBytes};

use super::*;

/// Where the tests put ring page tables, then ring pages.
pub const TABLES: u64 = 0x60_0000;
pub const RING_PAGES: u64 = 0x61_0000;
pub const PAGE: u64 = 4096;
pub const CQE: u32 = core::mem::size_of::<VirtioRdmaRingCqe>() as u32;
pub const POLL_US: u32 = 20_000;
pub const SEQ: u64 = core::mem::offset_of!(VirtioRdmaRingCqe, seq) as u64;

/// A device offering rings (2 completion-event queues, 20 ms of polling).
pub fn start() -> Dev {
    Dev::start_with(MEM_SIZE, |l| {
        l.with_rings(Some(Rings::new(16, 8, 2, POLL_US).expect("rings")))
            .expect("limits")
    })
}

/// A ring in the test's guest memory.
#[derive(Clone, Copy)]
pub struct Ring {
    /// Guest address of its record (its pages are contiguous).
    pub base: u64,
    pub depth: u32,
    pub stride: u32,
    /// Slots produced (work) or consumed (CQ) so far.
    pub next: u32,
}

impl Ring {
    pub fn slot(&self, n: u32) -> u64 {
        self.base + 64 + u64::from(n % self.depth) * u64::from(self.stride)
    }
    pub fn field(&self, off: u64) -> GuestAddress {
        GuestAddress(self.base + off)
    }
}

/// Allocates ring number `i` of `depth` slots of `stride` bytes and its
/// page table; its description.
pub fn ring(d: &Dev, i: u64, depth: u32, stride: u32) -> (Ring, VirtioRdmaRing) {
    let base = RING_PAGES + i * 16 * PAGE;
    let bytes = 64 + u64::from(depth) * u64::from(stride);
    let n = bytes.div_ceil(PAGE);
    assert!(n <= 16);
    d.fill(base, &vec![0u8; (n * PAGE) as usize]);
    let table = TABLES + i * 0x100;
    for p in 0..n {
        d.fill(table + 8 * p, &(base + p * PAGE).to_le_bytes());
    }
    let desc = VirtioRdmaRing {
        pages: table.into(),
        npages: (n as u32).into(),
        depth: depth.into(),
        stride: stride.into(),
        reserved: 0.into(),
    };
    let r = Ring {
        base,
        depth,
        stride,
        next: 0,
    };
    (r, desc)
}

/// A ring CQ of `depth` completions on completion-event queue `vq`.
pub fn ring_cq(d: &mut Dev, i: u64, depth: u32, vq: u32) -> (u32, Ring) {
    let (r, desc) = ring(d, i, depth, CQE);
    let req = VirtioRdmaCmdCreateCqRing {
        ring: desc,
        comp_vq: vq.into(),
        reserved: 0.into(),
    };
    let cqn = le32(&d.ok(VIRTIO_RDMA_CMD_CREATE_CQ_RING, req.as_bytes(), 8), 0);
    (cqn, r)
}

/// Writes `elem` into the next slot of work ring `r` and publishes it,
/// ringing the doorbell if the ring asks for it (as a driver does).
pub fn produce(d: &Dev, r: &mut Ring, elem: &[u8]) {
    publish(d, r, elem);
    doorbell_if_asked(d, r);
}

/// Rings the doorbell if ring `r` asks for it (the device stopped polling
/// it), as a driver does after moving a producer.
pub fn doorbell_if_asked(d: &Dev, r: &Ring) {
    if flags(d, r) & VIRTIO_RDMA_RING_F_NOTIFY != 0 {
        d.vqs[notify_q()].kick.write(1).expect("kick");
    }
}

/// [`produce`] without the doorbell.
pub fn publish(d: &Dev, r: &mut Ring, elem: &[u8]) {
    assert!(elem.len() <= r.stride as usize);
    d.fill(r.slot(r.next), elem);
    r.next = r.next.wrapping_add(1);
    d.mem
        .store(r.next, r.field(0), std::sync::atomic::Ordering::SeqCst)
        .expect("producer");
}

/// A receive element.
pub fn recv_elem(wr_id: u64, sges: &[(u64, u32, u32)]) -> Vec<u8> {
    let mut b = VirtioRdmaRqReq {
        wr_id: wr_id.into(),
        num_sge: (sges.len() as u32).into(),
        reserved: 0.into(),
    }
    .as_bytes()
    .to_vec();
    b.extend(sge_bytes(sges));
    b
}

/// The completions the device wrote into CQ ring `r` since the last call.
pub fn take(d: &Dev, r: &mut Ring) -> Vec<VirtioRdmaCqReq> {
    let mut out = Vec::new();
    loop {
        let slot = r.slot(r.next);
        let seq: u32 = d.mem.read_obj(GuestAddress(slot + SEQ)).expect("seq");
        if seq != r.next.wrapping_add(1) {
            break;
        }
        let b = d.read(slot, CQE_LEN);
        out.push(VirtioRdmaCqReq::read_from_bytes(&b).expect("cqe"));
        r.next = r.next.wrapping_add(1);
        d.mem.write_obj(r.next, r.field(4)).expect("consumer");
    }
    out
}

/// Waits for `n` completions in CQ ring `r`.
pub fn wait(d: &Dev, r: &mut Ring, n: usize) -> Vec<VirtioRdmaCqReq> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = Vec::new();
    while got.len() < n {
        got.extend(take(d, r));
        assert!(
            Instant::now() < deadline,
            "{} of {n} completions",
            got.len()
        );
        thread::sleep(Duration::from_millis(1));
    }
    got
}

pub fn flags(d: &Dev, r: &Ring) -> u32 {
    d.mem
        .load(r.field(8), std::sync::atomic::Ordering::SeqCst)
        .expect("flags")
}

pub fn notify_q() -> usize {
    virtio_rdma_notify_vq(MAX_CQ, MAX_QP) as usize
}

pub fn comp_q(n: u32) -> usize {
    virtio_rdma_comp_vq(MAX_CQ, MAX_QP, n) as usize
}
