// SPDX-License-Identifier: GPL-2.0
//! Queues in guest memory (`VIRTIO_RDMA_F_RINGS`): the rings a ring QP's
//! work requests are read from and a ring CQ's completions are written into.
//!
//! A ring is guest memory named by a page table (`struct virtio_rdma_ring`):
//! a record of indices and flags, then `depth` slots of `stride` bytes. Its
//! pages are checked once, when the queue is created; every access after
//! that goes through [`RingMap`], which bounds offsets by the ring and
//! splits them at page boundaries, so nothing the guest later writes into
//! the ring (indices, elements) can aim the device outside it. The guest
//! changes the ring concurrently: indices are read and written atomically,
//! an element is copied out before it is parsed, and a producer index more
//! than `depth` ahead breaks the ring (its QP fails, nothing else).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use parking_lot::Mutex;
use smallvec::SmallVec;
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, VolatileMemory};
use zerocopy::IntoBytes;

use crate::abi::{
    VirtioRdmaCqReq, VirtioRdmaRing, VirtioRdmaRingCqe, VirtioRdmaRingRecord,
    VIRTIO_RDMA_CQ_ARM_NEXT, VIRTIO_RDMA_CQ_ARM_NONE, VIRTIO_RDMA_CQ_ARM_SOLICITED,
    VIRTIO_RDMA_PAGE_SIZE, VIRTIO_RDMA_RING_F_NOTIFY, VIRTIO_RDMA_RING_SLOTS,
    VIRTIO_RDMA_S_INVALID,
};
use crate::limits::MAX_QUEUE_SIZE;
use crate::mr;

const PAGE: u64 = VIRTIO_RDMA_PAGE_SIZE as u64;
const PRODUCER: u64 = core::mem::offset_of!(VirtioRdmaRingRecord, producer) as u64;
const CONSUMER: u64 = core::mem::offset_of!(VirtioRdmaRingRecord, consumer) as u64;
const FLAGS: u64 = core::mem::offset_of!(VirtioRdmaRingRecord, flags) as u64;
const ARM: u64 = core::mem::offset_of!(VirtioRdmaRingRecord, arm) as u64;
const SEQ: u64 = core::mem::offset_of!(VirtioRdmaRingCqe, seq) as u64;
const _: () =
    assert!(core::mem::size_of::<VirtioRdmaRingRecord>() as u32 <= VIRTIO_RDMA_RING_SLOTS);

/// Largest slot: one page (a work element is at most a header, 32 SGEs and
/// 64 bytes of inline data).
pub const MAX_STRIDE: u32 = VIRTIO_RDMA_PAGE_SIZE;

/// An element copied out of a work ring (inline up to 512 bytes).
pub type Element = SmallVec<[u8; 512]>;

/// Why a ring description is refused (a message for the guest's log line).
#[derive(Debug)]
pub struct Refused {
    /// The command's status.
    pub status: u8,
    /// What is wrong.
    pub why: String,
}

/// The checked pages of one ring.
#[derive(Debug)]
pub struct RingMap {
    pages: Vec<u64>,
    depth: u32,
    stride: u32,
}

impl RingMap {
    /// Checks `ring` (slots of `min_stride..=MAX_STRIDE` bytes, at most
    /// [`MAX_QUEUE_SIZE`] of them, exactly the pages they need) and reads its
    /// page table from `mem`.
    pub fn load(
        mem: &GuestMemoryMmap,
        ring: &VirtioRdmaRing,
        min_depth: u32,
        min_stride: u32,
    ) -> Result<Self, Refused> {
        let (depth, stride, npages) = (ring.depth.get(), ring.stride.get(), ring.npages.get());
        let invalid = |why: String| Refused {
            status: VIRTIO_RDMA_S_INVALID,
            why,
        };
        if !depth.is_power_of_two() || depth < min_depth.max(1) || depth > MAX_QUEUE_SIZE {
            return Err(invalid(format!(
                "ring depth {depth} is not a power of two in {min_depth}..={MAX_QUEUE_SIZE}"
            )));
        }
        if stride % 8 != 0 || stride < min_stride || stride > MAX_STRIDE {
            return Err(invalid(format!(
                "ring stride {stride} is not a multiple of 8 in {min_stride}..={MAX_STRIDE}"
            )));
        }
        let bytes = u64::from(VIRTIO_RDMA_RING_SLOTS) + u64::from(depth) * u64::from(stride);
        let need = bytes.div_ceil(PAGE);
        if u64::from(npages) != need {
            return Err(invalid(format!(
                "ring of {bytes} bytes in {npages} pages (needs {need})"
            )));
        }
        let pages =
            mr::load_page_table(mem, ring.pages.get(), npages).map_err(|status| Refused {
                status,
                why: "ring page table has a page that is misaligned or outside guest memory".into(),
            })?;
        Ok(RingMap {
            pages,
            depth,
            stride,
        })
    }

    /// Slots of the ring.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// Bytes a slot.
    pub fn stride(&self) -> u32 {
        self.stride
    }

    /// Offset of slot `index` (a free-running count).
    fn slot(&self, index: u32) -> u64 {
        u64::from(VIRTIO_RDMA_RING_SLOTS)
            + u64::from(index & (self.depth - 1)) * u64::from(self.stride)
    }

    /// Guest address of ring byte `off` and the bytes left in its page.
    fn at(&self, off: u64) -> Option<(GuestAddress, usize)> {
        let page = *self.pages.get(usize::try_from(off / PAGE).ok()?)?;
        let within = off % PAGE;
        Some((GuestAddress(page + within), (PAGE - within) as usize))
    }

    /// Copies ring bytes `[off, off + buf.len())` into `buf`.
    fn read(&self, mem: &GuestMemoryMmap, mut off: u64, buf: &mut [u8]) -> bool {
        let mut done = 0;
        while done < buf.len() {
            let Some((addr, room)) = self.at(off) else {
                return false;
            };
            let n = room.min(buf.len() - done);
            if mem.read_slice(&mut buf[done..done + n], addr).is_err() {
                return false;
            }
            done += n;
            off += n as u64;
        }
        true
    }

    /// Copies `buf` into ring bytes `[off, off + buf.len())`.
    fn write(&self, mem: &GuestMemoryMmap, mut off: u64, buf: &[u8]) -> bool {
        let mut done = 0;
        while done < buf.len() {
            let Some((addr, room)) = self.at(off) else {
                return false;
            };
            let n = room.min(buf.len() - done);
            if mem.write_slice(&buf[done..done + n], addr).is_err() {
                return false;
            }
            done += n;
            off += n as u64;
        }
        true
    }

    /// Reads record field `field` (sequentially consistent: the doorbell
    /// and arm protocols pair a store with a load on each side).
    fn get(&self, mem: &GuestMemoryMmap, field: u64) -> Option<u32> {
        let (addr, _) = self.at(field)?;
        mem.load::<u32>(addr, Ordering::SeqCst)
            .ok()
            .map(u32::from_le)
    }

    /// Replaces record field `field` with `new` if it holds `old`, in one
    /// atomic step (a value the driver stores meanwhile is not overwritten);
    /// whether it did.
    fn exchange(&self, mem: &GuestMemoryMmap, field: u64, old: u32, new: u32) -> bool {
        let Some((addr, _)) = self.at(field) else {
            return false;
        };
        let Ok(slice) = mem.get_slice(addr, 4) else {
            return false;
        };
        slice.get_atomic_ref::<AtomicU32>(0).is_ok_and(|a| {
            a.compare_exchange(old.to_le(), new.to_le(), Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        })
    }

    /// Writes record field `field` (sequentially consistent).
    fn set(&self, mem: &GuestMemoryMmap, field: u64, value: u32) -> bool {
        match self.at(field) {
            Some((addr, _)) => mem.store(value.to_le(), addr, Ordering::SeqCst).is_ok(),
            None => false,
        }
    }
}

/// A ring the driver produces work requests into (an SQ or RQ).
#[derive(Debug)]
pub struct WorkRing {
    map: RingMap,
    /// The next slot the device reads; stored into the record after each.
    /// Locked across a pop: an SRQ's ring is popped by the steps of every
    /// QP that takes from it, which may run on several threads (lanes).
    consumer: Mutex<u32>,
    /// The producer index the poller last saw (an RQ's new receives).
    seen: AtomicU32,
    /// The producer index was bogus once: the ring yields nothing more.
    broken: AtomicBool,
}

impl WorkRing {
    /// The work ring `map` describes, empty (indices 0).
    pub fn new(map: RingMap) -> Self {
        WorkRing {
            map,
            consumer: Mutex::new(0),
            seen: AtomicU32::new(0),
            broken: AtomicBool::new(false),
        }
    }

    /// The driver's producer index, `None` once the ring is broken.
    fn producer(&self, mem: &GuestMemoryMmap) -> Option<u32> {
        if self.broken.load(Ordering::Relaxed) {
            return None;
        }
        self.map.get(mem, PRODUCER)
    }

    /// Copies out the next element (at most `max` bytes of its slot) and
    /// passes it (the slot is the driver's again). A producer more than
    /// `depth` ahead, or a record the device cannot read, breaks the ring:
    /// that call yields an empty element (which no parser accepts, so the QP
    /// fails with an error completion) and later ones nothing.
    pub fn pop(&self, mem: &GuestMemoryMmap, max: usize) -> Option<Element> {
        let mut elem = Element::new();
        self.pop_into(mem, max, &mut elem).then_some(elem)
    }

    /// [`WorkRing::pop`] into `elem` (the data path reuses one buffer
    /// rather than moving a 512-byte element around); whether it took one.
    pub fn pop_into(&self, mem: &GuestMemoryMmap, max: usize, elem: &mut Element) -> bool {
        elem.clear();
        if self.broken.load(Ordering::Relaxed) {
            return false;
        }
        let mut consumer_at = self.consumer.lock();
        let consumer = *consumer_at;
        let Some(producer) = self.map.get(mem, PRODUCER) else {
            self.broken.store(true, Ordering::Relaxed);
            return true;
        };
        let pending = producer.wrapping_sub(consumer);
        if pending == 0 {
            return false;
        }
        if pending > self.map.depth {
            self.broken.store(true, Ordering::Relaxed);
            return true;
        }
        elem.resize(max.min(self.map.stride as usize), 0);
        if !self.map.read(mem, self.map.slot(consumer), elem) {
            self.broken.store(true, Ordering::Relaxed);
            elem.clear();
            return true;
        }
        let next = consumer.wrapping_add(1);
        *consumer_at = next;
        self.map.set(mem, CONSUMER, next);
        true
    }

    /// Whether elements are waiting (or a bogus producer is, which `pop`
    /// then reports).
    pub fn has_work(&self, mem: &GuestMemoryMmap) -> bool {
        self.producer(mem)
            .is_some_and(|p| p != *self.consumer.lock())
    }

    /// Elements posted and not taken yet; `None` once the ring is broken
    /// or its record cannot be read.
    pub fn pending(&self, mem: &GuestMemoryMmap) -> Option<u32> {
        self.producer(mem)
            .map(|p| p.wrapping_sub(*self.consumer.lock()))
    }

    /// Whether the producer moved since the last call (new receives).
    pub fn moved(&self, mem: &GuestMemoryMmap) -> bool {
        match self.producer(mem) {
            Some(p) => self.seen.swap(p, Ordering::Relaxed) != p,
            None => false,
        }
    }

    /// Slots of the ring.
    pub fn depth(&self) -> u32 {
        self.map.depth
    }

    /// Passes every element posted so far unread (the QP was reset or
    /// destroyed).
    pub fn skip_all(&self, mem: &GuestMemoryMmap) {
        let mut consumer = self.consumer.lock();
        match self.producer(mem) {
            Some(p) if p.wrapping_sub(*consumer) <= self.map.depth => {
                *consumer = p;
                self.map.set(mem, CONSUMER, p);
            }
            _ => {}
        }
    }

    /// Asks the driver to notify new work (`on`), or tells it the device is
    /// polling. The caller checks for work that raced with asking.
    pub fn ask_notify(&self, mem: &GuestMemoryMmap, on: bool) {
        let flags = if on { VIRTIO_RDMA_RING_F_NOTIFY } else { 0 };
        self.map.set(mem, FLAGS, flags);
    }
}

/// Why a completion could not be written into a CQ ring.
#[derive(Debug, PartialEq, Eq)]
pub enum PushError {
    /// The driver has not consumed enough: the ring is full.
    Full,
    /// The ring's memory cannot be written.
    Fault,
}

/// A ring the device writes completions into.
#[derive(Debug)]
pub struct CqRing {
    map: RingMap,
    /// Completions written so far (the next one's number). Locked across a
    /// push: the QPs completing into one CQ may run on several threads.
    produced: Mutex<u32>,
    /// The completion-event queue of its events.
    comp_vq: u32,
}

impl CqRing {
    /// Slot size of a CQ ring.
    pub const STRIDE: u32 = core::mem::size_of::<VirtioRdmaRingCqe>() as u32;

    /// The completion ring `map` describes, whose events go to `comp_vq`.
    pub fn new(map: RingMap, comp_vq: u32) -> Self {
        CqRing {
            map,
            produced: Mutex::new(0),
            comp_vq,
        }
    }

    /// The completion-event queue of its events.
    pub fn comp_vq(&self) -> u32 {
        self.comp_vq
    }

    /// Writes `cqe` into the next slot, its sequence number last. The
    /// driver's consumer index is untrusted: a bogus one only makes the ring
    /// look full.
    pub fn push(&self, mem: &GuestMemoryMmap, cqe: &VirtioRdmaCqReq) -> Result<(), PushError> {
        let mut produced = self.produced.lock();
        let n = *produced;
        let consumer = self.map.get(mem, CONSUMER).ok_or(PushError::Fault)?;
        if n.wrapping_sub(consumer) >= self.map.depth {
            return Err(PushError::Full);
        }
        let slot = self.map.slot(n);
        if !self.map.write(mem, slot, cqe.as_bytes()) {
            return Err(PushError::Fault);
        }
        // The sequence number after the completion (a SeqCst store orders
        // the plain writes before it).
        if !self.map.set(mem, slot + SEQ, n.wrapping_add(1)) {
            return Err(PushError::Fault);
        }
        *produced = n.wrapping_add(1);
        Ok(())
    }

    /// The ring that takes over from this one (RESIZE_CQ_RING): `map`,
    /// with the numbering going on (completion n in slot n % its depth) and
    /// an arming of this ring moved over. Refused, and this ring left as it
    /// was, if the completions not consumed (the new record's consumer says
    /// how far the driver got) and the `coming` ones of work already posted
    /// would not fit, or a record cannot be reached.
    pub fn resized(
        &self,
        mem: &GuestMemoryMmap,
        map: RingMap,
        coming: u32,
    ) -> Result<CqRing, String> {
        let produced = *self.produced.lock();
        let consumer = map
            .get(mem, CONSUMER)
            .ok_or("the new ring's record cannot be read")?;
        let pending = produced.wrapping_sub(consumer);
        if pending.saturating_add(coming) > map.depth {
            return Err(format!(
                "{pending} completions not consumed (produced {produced}, consumer {consumer}) \
                 and {coming} of work posted do not fit in {} slots",
                map.depth
            ));
        }
        let arm = self
            .map
            .get(mem, ARM)
            .ok_or("the old ring's record cannot be read")?;
        if arm != VIRTIO_RDMA_CQ_ARM_NONE {
            // Into the new record first: a failure leaves the old one armed.
            if !map.set(mem, ARM, arm) {
                return Err("the new ring's record cannot be written".into());
            }
            self.map.exchange(mem, ARM, arm, VIRTIO_RDMA_CQ_ARM_NONE);
        }
        Ok(CqRing {
            map,
            produced: Mutex::new(produced),
            comp_vq: self.comp_vq,
        })
    }

    /// Slots of the ring.
    pub fn depth(&self) -> u32 {
        self.map.depth
    }

    /// Completions written so far.
    pub fn produced(&self) -> u32 {
        *self.produced.lock()
    }

    /// After a completion: whether the CQ was armed for it (`solicited`: a
    /// solicited or failed one), disarming it if so.
    pub fn fire(&self, mem: &GuestMemoryMmap, solicited: bool) -> bool {
        let arm = self.map.get(mem, ARM);
        let fires = match arm {
            Some(VIRTIO_RDMA_CQ_ARM_NEXT) => true,
            Some(VIRTIO_RDMA_CQ_ARM_SOLICITED) => solicited,
            _ => false,
        };
        // Disarmed only if still armed as read: an arming stored since
        // stays for the next completion.
        fires && arm.is_some_and(|a| self.map.exchange(mem, ARM, a, VIRTIO_RDMA_CQ_ARM_NONE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vm_memory::GuestMemoryMmap;

    const BASE: u64 = 0x10000;

    fn mem() -> GuestMemoryMmap {
        GuestMemoryMmap::from_ranges(&[(GuestAddress(BASE), 16 * PAGE as usize)]).expect("mem")
    }

    /// A ring whose pages are given in reverse order (so that it is not
    /// contiguous in guest memory); its page table at BASE.
    fn ring(mem: &GuestMemoryMmap, depth: u32, stride: u32) -> VirtioRdmaRing {
        let bytes = 64 + u64::from(depth) * u64::from(stride);
        let n = bytes.div_ceil(PAGE) as u32;
        for i in 0..n {
            let page = BASE + (8 - u64::from(i)) * PAGE;
            mem.write_obj(page.to_le(), GuestAddress(BASE + 8 * u64::from(i)))
                .expect("table");
        }
        VirtioRdmaRing {
            pages: BASE.into(),
            npages: n.into(),
            depth: depth.into(),
            stride: stride.into(),
            reserved: 0.into(),
        }
    }

    #[test]
    fn ring_descriptions_are_checked() {
        let m = mem();
        let ok = ring(&m, 64, 128);
        assert!(RingMap::load(&m, &ok, 64, 64).is_ok());
        let mut r = ok;
        r.depth = 48.into();
        assert!(
            RingMap::load(&m, &r, 1, 64).is_err(),
            "depth not a power of two"
        );
        assert!(
            RingMap::load(&m, &ok, 128, 64).is_err(),
            "depth below the QP's"
        );
        let mut r = ok;
        r.stride = 132.into();
        assert!(
            RingMap::load(&m, &r, 1, 64).is_err(),
            "stride not 8-aligned"
        );
        assert!(
            RingMap::load(&m, &ok, 1, 256).is_err(),
            "stride below the QP's"
        );
        let mut r = ok;
        r.npages = 4.into();
        assert!(
            RingMap::load(&m, &r, 1, 64).is_err(),
            "npages not what it needs"
        );
        let mut r = ok;
        r.pages = (BASE + 20 * PAGE).into();
        assert!(
            RingMap::load(&m, &r, 1, 64).is_err(),
            "table outside memory"
        );
    }

    #[test]
    fn elements_are_read_across_pages_and_consumed() {
        let m = mem();
        // Stride 88: slot 45 is ring bytes 4024..4112, across the first two
        // pages (guest pages 8 and 7).
        let w = WorkRing::new(RingMap::load(&m, &ring(&m, 64, 88), 1, 8).expect("ring"));
        let (first, second) = (BASE + 8 * PAGE, BASE + 7 * PAGE);
        assert!(w.pop(&m, 88).is_none(), "empty ring");
        let elem: Vec<u8> = (0..88u8).collect();
        m.write_slice(&elem[..72], GuestAddress(first + 4024))
            .expect("slot head");
        m.write_slice(&elem[72..], GuestAddress(second))
            .expect("slot tail");
        *w.consumer.lock() = 45;
        m.write_obj(46u32, GuestAddress(first)).expect("producer");
        assert!(w.has_work(&m));
        let e = w.pop(&m, 88).expect("element");
        assert_eq!(&e[..], &elem[..]);
        let consumer: u32 = m
            .read_obj(GuestAddress(first + CONSUMER))
            .expect("consumer");
        assert_eq!(consumer, 46, "the consumer is published");
        assert!(w.pop(&m, 88).is_none());
        assert!(!w.has_work(&m));
    }

    #[test]
    fn a_producer_beyond_the_ring_breaks_it() {
        let m = mem();
        let w = WorkRing::new(RingMap::load(&m, &ring(&m, 4, 64), 1, 8).expect("ring"));
        m.write_obj(5u32, GuestAddress(BASE + 8 * PAGE))
            .expect("producer");
        assert!(w.has_work(&m));
        assert_eq!(w.pop(&m, 64).map(|e| e.len()), Some(0), "one empty element");
        assert!(w.pop(&m, 64).is_none(), "then nothing");
        assert!(!w.has_work(&m));
    }

    #[test]
    fn completions_carry_a_sequence_number_and_respect_the_consumer() {
        let m = mem();
        let rec = BASE + 8 * PAGE;
        let c = CqRing::new(
            RingMap::load(&m, &ring(&m, 2, CqRing::STRIDE), 1, CqRing::STRIDE).expect("ring"),
            0,
        );
        let cqe = VirtioRdmaCqReq {
            byte_len: 5.into(),
            ..Default::default()
        };
        assert_eq!(c.push(&m, &cqe), Ok(()));
        assert_eq!(c.push(&m, &cqe), Ok(()));
        assert_eq!(c.push(&m, &cqe), Err(PushError::Full), "two slots");
        let seq: u32 = m
            .read_obj(GuestAddress(rec + 64 + u64::from(CqRing::STRIDE) + SEQ))
            .expect("seq");
        assert_eq!(seq, 2, "slot 1 holds completion 1");
        m.write_obj(1u32, GuestAddress(rec + CONSUMER))
            .expect("consumer");
        assert_eq!(c.push(&m, &cqe), Ok(()), "room again");
        // A consumer ahead of the producer makes the ring look full.
        m.write_obj(100u32, GuestAddress(rec + CONSUMER))
            .expect("consumer");
        assert_eq!(c.push(&m, &cqe), Err(PushError::Full));
    }

    #[test]
    fn arming_fires_once() {
        let m = mem();
        let rec = BASE + 8 * PAGE;
        let c = CqRing::new(
            RingMap::load(&m, &ring(&m, 2, CqRing::STRIDE), 1, CqRing::STRIDE).expect("ring"),
            1,
        );
        assert!(!c.fire(&m, true), "not armed");
        m.write_obj(VIRTIO_RDMA_CQ_ARM_SOLICITED, GuestAddress(rec + ARM))
            .expect("arm");
        assert!(!c.fire(&m, false), "not solicited");
        assert!(c.fire(&m, true));
        assert!(!c.fire(&m, true), "disarmed");
        m.write_obj(VIRTIO_RDMA_CQ_ARM_NEXT, GuestAddress(rec + ARM))
            .expect("arm");
        assert!(c.fire(&m, false));
    }
}
