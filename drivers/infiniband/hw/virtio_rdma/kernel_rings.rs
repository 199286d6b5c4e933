// SPDX-License-Identifier: GPL-2.0

//! The kernel's side of the rings of kernel QPs and CQs (`VIRTIO_RDMA_F_RINGS`).
//!
//! A kernel QP's work rings and a kernel CQ's completion ring are DMA-coherent memory the
//! driver allocates (`rings.rs`, [`GuestRing::alloc`]). The driver writes elements into a work
//! ring's slots and publishes them by storing the producer (release order), then, after a full
//! barrier, rings the doorbell only if the device asked for one in the record. It takes a
//! completion from a completion ring once the slot's sequence number says it holds it (read
//! with acquire order), stores how many it took as the consumer, and arms the ring by a store.
//! The verbs built on them are in `qp.rs` and `cq.rs`; what the device writes is checked there
//! as a virtqueue completion is.

use core::{
    mem::{offset_of, size_of},
    sync::atomic::{fence, Ordering},
};

use kernel::{prelude::*, rdma::SharedMem};
use zerocopy::{FromBytes, Immutable, IntoBytes};

use crate::{abi, rings::GuestRing};

const PRODUCER: usize = offset_of!(abi::RingRecord, producer);
const CONSUMER: usize = offset_of!(abi::RingRecord, consumer);
const FLAGS: usize = offset_of!(abi::RingRecord, flags);
const ARM: usize = offset_of!(abi::RingRecord, arm);
const SLOTS: usize = abi::RING_SLOTS as usize;
const SEQ: usize = offset_of!(abi::RingCqe, seq);
const CQE_LEN: usize = size_of::<abi::CqReq>();

/// The byte offset of slot `index` (any count; taken modulo the depth, a power of two).
fn slot(ring: &GuestRing, index: u32) -> usize {
    let depth = ring.depth();
    let i = (index & depth.wrapping_sub(1)) as usize;
    SLOTS + i * ring.stride() as usize
}

/// The kernel memory of `ring`: rings of kernel queues are made by [`GuestRing::alloc`].
fn mem(ring: &GuestRing) -> Result<&SharedMem> {
    ring.shared().ok_or(EINVAL)
}

/// A work ring of a kernel QP, its producer count and a buffer to build an element in. Kept
/// under the work queue's lock.
pub(crate) struct WorkRing<B> {
    ring: GuestRing,
    /// Elements written so far (free-running).
    producer: u32,
    /// Where an element is built before it is copied into its slot.
    pub(crate) scratch: KBox<B>,
}

impl<B: IntoBytes + Immutable> WorkRing<B> {
    /// A work ring over `ring`, a kernel ring ([`GuestRing::alloc`]), building elements in
    /// `scratch`.
    pub(crate) fn new(ring: GuestRing, scratch: KBox<B>) -> Self {
        Self {
            ring,
            producer: 0,
            scratch,
        }
    }

    /// The ring, as the device knows it.
    pub(crate) fn ring(&self) -> &GuestRing {
        &self.ring
    }

    /// Whether a slot is free: the device has read all but fewer than the depth of the
    /// elements written. A device that reports a consumer past the producer has no room.
    pub(crate) fn has_room(&self) -> bool {
        let Ok(consumer) = mem(&self.ring).and_then(|m| m.load_acquire(CONSUMER)) else {
            return false;
        };
        self.producer.wrapping_sub(consumer) < self.ring.depth()
    }

    /// Checks that the first `len` bytes of the scratch element can go into the next slot:
    /// [`ENOMEM`] without room, [`EINVAL`] for an element longer than a slot. Checked before
    /// the request is recorded, so that [`WorkRing::push`] cannot fail on a request the
    /// consumer would then be told failed (and the device might complete).
    pub(crate) fn can_push(&self, len: usize) -> Result {
        if !self.has_room() {
            return Err(ENOMEM);
        }
        if len > self.ring.stride() as usize || len > self.scratch.as_bytes().len() {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// Copies the first `len` bytes of the scratch element, checked by
    /// [`WorkRing::can_push`] under the same lock, into the next slot (not yet published: see
    /// [`WorkRing::publish`]).
    pub(crate) fn push(&mut self, len: usize) -> Result {
        let bytes = self.scratch.as_bytes().get(..len).ok_or(EINVAL)?;
        let off = slot(&self.ring, self.producer);
        self.ring.shared_mut().ok_or(EINVAL)?.write(off, bytes)?;
        self.producer = self.producer.wrapping_add(1);
        Ok(())
    }

    /// Publishes the elements pushed so far; returns whether the device asked for a doorbell.
    pub(crate) fn publish(&self) -> bool {
        let Ok(m) = mem(&self.ring) else {
            return false;
        };
        if m.store_release(PRODUCER, self.producer).is_err() {
            return false;
        }
        // Orders the producer store before the flags load; the device sets NOTIFY, then
        // re-reads the producer (the protocol's doorbell handshake).
        fence(Ordering::SeqCst);
        m.load_acquire(FLAGS)
            .is_ok_and(|f| f & abi::RING_F_NOTIFY != 0)
    }
}

/// The completion ring of a kernel CQ and the count of completions taken from it. Kept under
/// the CQ's lock.
pub(crate) struct CompRing {
    ring: GuestRing,
    /// Completions taken (free-running): the next is completion `next + 1` by its sequence.
    next: u32,
}

impl CompRing {
    /// A completion ring over `ring`, a kernel ring ([`GuestRing::alloc`]).
    pub(crate) fn new(ring: GuestRing) -> Self {
        Self { ring, next: 0 }
    }

    /// The ring, as the device knows it.
    pub(crate) fn ring(&self) -> &GuestRing {
        &self.ring
    }

    /// The next completion, if the device has written it: its slot's sequence number is the
    /// one expected (anything else, garbage included, means not yet).
    pub(crate) fn peek(&self) -> Option<abi::CqReq> {
        let m = mem(&self.ring).ok()?;
        let off = slot(&self.ring, self.next);
        // Acquire: the completion's bytes were written before its sequence number.
        let seq = m.load_acquire(off + SEQ).ok()?;
        if seq != self.next.wrapping_add(1) {
            return None;
        }
        let mut buf = [0u8; CQE_LEN];
        m.read(off, &mut buf).ok()?;
        abi::CqReq::read_from_bytes(&buf).ok()
    }

    /// Takes the completion [`CompRing::peek`] returned; the device learns of it by
    /// [`CompRing::give_back`].
    pub(crate) fn take(&mut self) {
        self.next = self.next.wrapping_add(1);
    }

    /// Tells the device which slots it may write again.
    pub(crate) fn give_back(&self) {
        if let Ok(m) = mem(&self.ring) {
            let _ = m.store_release(CONSUMER, self.next);
        }
    }

    /// Arms the ring for the next completion (solicited or in error only, if `solicited`);
    /// returns whether a completion is already there (the device may have written it before
    /// it could see the arm).
    pub(crate) fn arm(&self, solicited: bool) -> bool {
        let Ok(m) = mem(&self.ring) else {
            return false;
        };
        let how = if solicited {
            abi::cq_arm::SOLICITED
        } else {
            abi::cq_arm::NEXT
        };
        let _ = m.store_release(ARM, how);
        // The arm store before the second look; the device writes a completion, then reads
        // arm (the protocol's arming handshake).
        fence(Ordering::SeqCst);
        self.peek().is_some()
    }
}
