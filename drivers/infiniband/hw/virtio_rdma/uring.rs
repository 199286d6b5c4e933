// SPDX-License-Identifier: GPL-2.0

//! The rings a process shares with the driver (`struct virtio_rdma_uring` in
//! `include/uapi/rdma/virtio_rdma-abi.h`).
//!
//! Work queues ([`Uring`]): a process writes work requests, already in the device's element
//! format, into a ring it maps, advances the ring's producer index and rings the doorbell (a
//! uverbs post without requests). The driver then copies each new element out of the ring into
//! one of the QP's own element buffers, checks the copy (`wqe.rs`) and lends it to the device
//! like a kernel post (`qp.rs`). The device never sees the ring, and nothing the process
//! changes after the copy reaches the device.
//!
//! Completion queues ([`CqRing`]): the other way round. The driver copies each completion the
//! device wrote into its own buffer, once checked (`cq.rs`), into the next slot with a sequence
//! number written last; the process polls the slots without a system call.

use core::{
    marker::PhantomData,
    sync::atomic::{AtomicU32, Ordering},
};

use kernel::{
    prelude::*,
    rdma::{Ucontext, UserMmap},
};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

use crate::{abi, cq::CqeBuf, device::RdmaDev};

/// Where the slots start in the mapping: after the indices, on their own cache line.
const SLOTS: usize = 64;
const _: () = assert!(core::mem::size_of::<abi::UringCtrl>() <= SLOTS);

const PRODUCER: usize = core::mem::offset_of!(abi::UringCtrl, producer);
const CONSUMER: usize = core::mem::offset_of!(abi::UringCtrl, consumer);

/// The mapped memory of a ring: the indices, then `depth` slots of one `E` each.
struct Slots<E> {
    map: UserMmap,
    depth: u32,
    _elem: PhantomData<E>,
}

impl<E> Slots<E> {
    const STRIDE: usize = core::mem::size_of::<E>();

    /// Room for at least `entries` slots (a power of two), mapped by the process of `uctx`.
    fn new(uctx: &Ucontext<RdmaDev<'_>>, entries: u32) -> Result<Self> {
        let depth = entries.max(1).checked_next_power_of_two().ok_or(EINVAL)?;
        let len = (depth as usize)
            .checked_mul(Self::STRIDE)
            .and_then(|n| n.checked_add(SLOTS))
            .ok_or(EINVAL)?;
        Ok(Self {
            map: UserMmap::new(uctx, len)?,
            depth,
            _elem: PhantomData,
        })
    }

    /// What the provider needs to map and use the ring.
    fn describe(&self) -> Result<abi::Uring> {
        Ok(abi::Uring {
            offset: self.map.offset(),
            length: u32::try_from(self.map.len()).map_err(|_| EINVAL)?,
            depth: self.depth,
            stride: Self::STRIDE as u32,
            slots: SLOTS as u32,
        })
    }

    /// The offset in the mapping of slot `index` (a free-running count).
    fn offset(&self, index: u32) -> usize {
        SLOTS + (index & (self.depth - 1)) as usize * Self::STRIDE
    }
}

/// One ring of a user QP, of elements of type `B`.
pub(crate) struct Uring<B> {
    slots: Slots<B>,
    /// The next slot the driver takes. Changed only under the QP's lock of this work queue.
    consumer: AtomicU32,
}

impl<B: FromBytes + IntoBytes> Uring<B> {
    /// A ring for at least `entries` elements, mapped by the process of `uctx`.
    pub(crate) fn new(uctx: &Ucontext<RdmaDev<'_>>, entries: u32) -> Result<Self> {
        Ok(Self {
            slots: Slots::new(uctx, entries)?,
            consumer: AtomicU32::new(0),
        })
    }

    /// What the provider needs to map and use the ring.
    pub(crate) fn describe(&self) -> Result<abi::Uring> {
        self.slots.describe()
    }

    /// The elements the process announced and the driver has not taken yet: the first slot and
    /// the count. [`EINVAL`] if the process claims more than the ring holds.
    pub(crate) fn pending(&self) -> Result<(u32, u32)> {
        let producer = self.slots.map.read_u32(PRODUCER)?;
        let consumer = self.consumer.load(Ordering::Relaxed);
        let count = producer.wrapping_sub(consumer);
        if count > self.slots.depth {
            return Err(EINVAL);
        }
        Ok((consumer, count))
    }

    /// Copies the element in slot `index` (a free-running count) into `elem`.
    pub(crate) fn read(&self, index: u32, elem: &mut B) -> Result {
        self.slots
            .map
            .read(self.slots.offset(index), elem.as_mut_bytes())
    }

    /// Records that the driver took every element before `index`, for the process to see.
    pub(crate) fn set_consumer(&self, index: u32) -> Result {
        self.consumer.store(index, Ordering::Relaxed);
        self.slots.map.write_u32(CONSUMER, index)
    }
}

/// The completion ring of a user CQ: the driver produces, the process consumes.
pub(crate) struct CqRing {
    slots: Slots<abi::Ucqe>,
    /// The next slot the driver fills. Changed only under the lock of the CQ's queue.
    producer: AtomicU32,
}

impl CqRing {
    const SEQ: usize = core::mem::offset_of!(abi::Ucqe, seq);

    /// A ring for at least `entries` completions, mapped by the process of `uctx`.
    pub(crate) fn new(uctx: &Ucontext<RdmaDev<'_>>, entries: u32) -> Result<Self> {
        Ok(Self {
            slots: Slots::new(uctx, entries)?,
            producer: AtomicU32::new(0),
        })
    }

    /// What the provider needs to map and poll the ring.
    pub(crate) fn describe(&self) -> Result<abi::Uring> {
        self.slots.describe()
    }

    /// Takes over from `old`, the ring this one replaces (a resize): the completions the
    /// process has not consumed are copied into the slots of the same numbers here, the
    /// process's consumer index with them, and the numbering goes on. [`EINVAL`] if more than
    /// `max` were not consumed (or the process's consumer index says more than `old` holds).
    pub(crate) fn take_over(&mut self, old: &CqRing, max: u32) -> Result {
        let producer = old.producer.load(Ordering::Relaxed);
        let consumer = old.slots.map.read_u32(CONSUMER)?;
        let pending = producer.wrapping_sub(consumer);
        if pending > max || pending > old.slots.depth || pending > self.slots.depth {
            return Err(EINVAL);
        }
        let mut cqe = abi::Ucqe::new_zeroed();
        for i in 0..pending {
            let n = consumer.wrapping_add(i);
            old.slots
                .map
                .read(old.slots.offset(n), cqe.as_mut_bytes())?;
            // Whatever the process wrote over it meanwhile: the slot holds completion `n`.
            cqe.seq = n.wrapping_add(1);
            self.slots.map.write(self.slots.offset(n), cqe.as_bytes())?;
        }
        self.slots.map.write_u32(CONSUMER, consumer)?;
        self.producer.store(producer, Ordering::Relaxed);
        Ok(())
    }

    /// Whether the next slot is free: the process has consumed what was there. Its consumer
    /// index is untrusted; a bogus one only makes the ring look full (an overrun).
    pub(crate) fn has_room(&self) -> bool {
        let producer = self.producer.load(Ordering::Relaxed);
        match self.slots.map.read_u32(CONSUMER) {
            Ok(consumer) => producer.wrapping_sub(consumer) < self.slots.depth,
            Err(_) => false,
        }
    }

    /// Writes `cqe` into the next slot, then its sequence number (which is all the process
    /// polls: the ring's producer index is not kept). Any context.
    pub(crate) fn push(&self, cqe: &CqeBuf) -> Result {
        let producer = self.producer.load(Ordering::Relaxed);
        let slot = self.slots.offset(producer);
        self.slots.map.write(slot, cqe.as_bytes())?;
        // The sequence number last, after the completion (release order).
        let next = producer.wrapping_add(1);
        self.slots.map.write_u32(slot + Self::SEQ, next)?;
        self.producer.store(next, Ordering::Relaxed);
        Ok(())
    }
}
