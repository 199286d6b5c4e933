// SPDX-License-Identifier: GPL-2.0

//! Work request tables: what the driver remembers of each outstanding work request, so that
//! the device never carries a consumer's `wr_id`.
//!
//! A kernel consumer's `wr_id` is often a pointer (`wr_cqe`, whose `done` function the RDMA core
//! calls): a device that could choose it could choose the function. So each work queue of a QP
//! has a [`WrTable`], a ring in posting order. Posting records the request and puts a *token*
//! (the queue's tag and the request's free-running position in the ring) into the element's
//! `wr_id` field; a
//! completion must name a token of a request still outstanding on the queue its CQ serves,
//! and gets back the consumer's `wr_id` from the table, never from the device.
//!
//! The device executes and completes the elements of a queue in order (the protocol's rule,
//! as IB's): a receive completion names the oldest receive; a send completion may name a
//! later request, which retires the unsignaled ones before it. A completion that names a
//! signaled request it skips, or a token that is not outstanding, is a device error.
//!
//! A shared receive queue serves many QPs, and one of them may hold a receive for a message
//! that goes on while another completes a later one: its table ([`SrqTable`]) lets receives
//! complete in any order, each once.
//!
//! Pure, so that KUnit can test it; the QP keeps one table per work queue under a lock of its
//! own, taken last (nothing else is locked inside it).

use kernel::{bindings, prelude::*};

/// What the driver keeps of one outstanding work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Posted {
    /// The consumer's `wr_id`.
    pub(crate) wr_id: u64,
    /// Bytes the request's scatter list or inline data holds: the most a successful
    /// completion may report (a receive's room, a send's message, a READ's destination).
    pub(crate) len: u32,
    /// The `ib_wc_opcode` its successful completion must carry (`IB_WC_RECV` for receives,
    /// which may also complete as `IB_WC_RECV_RDMA_WITH_IMM`).
    pub(crate) opcode: u8,
    /// The request asked for a completion (send requests; receives always complete).
    pub(crate) signaled: bool,
}

impl Posted {
    /// An empty entry (of a slot never posted).
    const EMPTY: Self = Self {
        wr_id: 0,
        len: 0,
        opcode: 0,
        signaled: false,
    };
}

/// Why a completion was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BadToken {
    /// The token names no request posted and outstanding.
    NotOutstanding,
    /// A receive completion that is not for the oldest receive.
    OutOfOrder,
    /// The completion skips a signaled request that has had no completion (that request is
    /// retired all the same: its completion will not come).
    SkipsSignaled,
    /// The token names a request discarded when the QP was reset: quietly dropped, as a NIC
    /// cleans a reset QP's completions from its CQ.
    Discarded,
}

/// The `ib_wc_opcode` a successful completion of a send request with `ib_wr_opcode` `wr`
/// carries.
pub(crate) fn wc_opcode(wr: u32) -> u8 {
    let wc = match wr {
        bindings::ib_wr_opcode_IB_WR_RDMA_WRITE
        | bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM => {
            bindings::ib_wc_opcode_IB_WC_RDMA_WRITE
        }
        bindings::ib_wr_opcode_IB_WR_RDMA_READ => bindings::ib_wc_opcode_IB_WC_RDMA_READ,
        bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP => bindings::ib_wc_opcode_IB_WC_COMP_SWAP,
        bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => bindings::ib_wc_opcode_IB_WC_FETCH_ADD,
        bindings::ib_wr_opcode_IB_WR_LOCAL_INV => bindings::ib_wc_opcode_IB_WC_LOCAL_INV,
        bindings::ib_wr_opcode_IB_WR_BIND_MW => bindings::ib_wc_opcode_IB_WC_BIND_MW,
        bindings::ib_wr_opcode_IB_WR_REG_MR => bindings::ib_wc_opcode_IB_WC_REG_MR,
        bindings::ib_wr_opcode_IB_WR_ATOMIC_WRITE => bindings::ib_wc_opcode_IB_WC_ATOMIC_WRITE,
        bindings::ib_wr_opcode_IB_WR_FLUSH => bindings::ib_wc_opcode_IB_WC_FLUSH,
        _ => bindings::ib_wc_opcode_IB_WC_SEND,
    };
    // Every `ib_wc_opcode` of a send fits a byte (the device's field).
    wc as u8
}

/// Which work queue a table serves: the tag in the upper half of its tokens, so that a token
/// of one queue does not pass for one of the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Queue {
    Send = 1,
    Recv = 2,
}

/// The tag of a shared receive queue's tokens ([`SrqTable`]), beside [`Queue`]'s.
const SRQ_TAG: u64 = 3;

/// A table that records posted requests and hands out their tokens (under a lock, which gives
/// mutable access to what is `Unpin`).
pub(crate) trait PostTable: Unpin {
    /// Records a request; returns its token, or `None` when the table is full.
    fn post(&mut self, posted: Posted) -> Option<u64>;
    /// Forgets the request posted last (its element could not be handed to the device).
    fn unpost(&mut self);
}

impl PostTable for WrTable {
    fn post(&mut self, posted: Posted) -> Option<u64> {
        WrTable::post(self, posted)
    }

    fn unpost(&mut self) {
        WrTable::unpost(self)
    }
}

/// One entry of an [`SrqTable`].
#[derive(Clone, Copy)]
struct SrqEntry {
    posted: Posted,
    /// Bumped at each post, so that a stale token of the slot is refused.
    generation: u16,
    outstanding: bool,
}

/// The outstanding receives of a shared receive queue, which complete in any order.
///
/// A token is the queue's tag, the entry's generation and the entry's index
/// (`SRQ_TAG << 32 | generation << 16 | index`), so at most 65536 entries.
///
/// # Invariants
///
/// `free` holds the indices of the entries that are not outstanding, each once; `last` is the
/// index of the entry posted last, if it is still outstanding and was not completed since.
pub(crate) struct SrqTable {
    entries: KVec<SrqEntry>,
    free: KVec<u16>,
    last: Option<u16>,
}

impl SrqTable {
    /// The most entries a table has (the index is 16 bits of the token).
    pub(crate) const MAX_ENTRIES: u32 = 1 << 16;

    /// A table for at most `depth` outstanding receives ([`EINVAL`] above
    /// [`Self::MAX_ENTRIES`]).
    pub(crate) fn new(depth: u32) -> Result<Self> {
        if depth > Self::MAX_ENTRIES {
            return Err(EINVAL);
        }
        let mut entries = KVec::with_capacity(depth as usize, GFP_KERNEL)?;
        let mut free = KVec::with_capacity(depth as usize, GFP_KERNEL)?;
        for i in 0..depth {
            entries.push(
                SrqEntry {
                    posted: Posted::EMPTY,
                    generation: 0,
                    outstanding: false,
                },
                GFP_KERNEL,
            )?;
            // Popped from the end: entry 0 first.
            free.push((depth - 1 - i) as u16, GFP_KERNEL)?;
        }
        Ok(Self {
            entries,
            free,
            last: None,
        })
    }

    /// How many receives are outstanding.
    pub(crate) fn outstanding(&self) -> u32 {
        (self.entries.len() - self.free.len()) as u32
    }

    /// Takes the receive `token` names out of the table, as its completion.
    pub(crate) fn complete(&mut self, token: u64) -> core::result::Result<Posted, BadToken> {
        if token >> 32 != SRQ_TAG {
            return Err(BadToken::NotOutstanding);
        }
        let index = token as u16;
        let generation = (token >> 16) as u16;
        let entry = self
            .entries
            .get_mut(usize::from(index))
            .filter(|e| e.outstanding && e.generation == generation)
            .ok_or(BadToken::NotOutstanding)?;
        entry.outstanding = false;
        let posted = entry.posted;
        // Room was reserved for every entry: this cannot fail.
        self.free
            .push_within_capacity(index)
            .map_err(|_| BadToken::NotOutstanding)?;
        if self.last == Some(index) {
            self.last = None;
        }
        Ok(posted)
    }
}

impl PostTable for SrqTable {
    fn post(&mut self, posted: Posted) -> Option<u64> {
        let index = self.free.pop()?;
        let entry = &mut self.entries[usize::from(index)];
        entry.generation = entry.generation.wrapping_add(1);
        entry.posted = posted;
        entry.outstanding = true;
        self.last = Some(index);
        Some(SRQ_TAG << 32 | u64::from(entry.generation) << 16 | u64::from(index))
    }

    fn unpost(&mut self) {
        if let Some(index) = self.last.take() {
            self.entries[usize::from(index)].outstanding = false;
            // `index` was taken from `free`, whose room stays reserved.
            let _ = self.free.push_within_capacity(index);
        }
    }
}

/// The outstanding work requests of one work queue, in posting order.
///
/// # Invariants
///
/// `tail - head` (wrapping) is at most the number of entries, and `head_slot` is below it
/// (when there are entries); the requests outstanding are the positions `head..tail`, the
/// entry of position `head + i` at `(head_slot + i) % entries`.
pub(crate) struct WrTable {
    entries: KVec<Posted>,
    /// The oldest outstanding request.
    head: u32,
    /// Its entry.
    head_slot: usize,
    /// The next request's position.
    tail: u32,
    /// Positions `discarded.0..discarded.1` were discarded by the last reset.
    discarded: (u32, u32),
    queue: Queue,
}

impl WrTable {
    /// A table for at most `depth` outstanding requests of `queue`.
    pub(crate) fn new(depth: u32, queue: Queue) -> Result<Self> {
        let mut entries = KVec::with_capacity(depth as usize, GFP_KERNEL)?;
        for _ in 0..depth {
            entries.push(Posted::EMPTY, GFP_KERNEL)?;
        }
        Ok(Self {
            entries,
            head: 0,
            head_slot: 0,
            tail: 0,
            discarded: (0, 0),
            queue,
        })
    }

    fn token(&self, pos: u32) -> u64 {
        (self.queue as u64) << 32 | u64::from(pos)
    }

    /// How many requests are outstanding.
    pub(crate) fn outstanding(&self) -> u32 {
        self.tail.wrapping_sub(self.head)
    }

    /// `i` as an entry index (0 for a table of no entries, which has none to index).
    fn wrap(&self, i: usize) -> usize {
        i.checked_rem(self.entries.len()).unwrap_or(0)
    }

    /// The entry of position `pos`, at most one past the outstanding ones. (Positions wrap at
    /// 2^32, which the number of entries need not divide: entries are counted from `head`.)
    fn slot(&self, pos: u32) -> usize {
        self.wrap(self.head_slot + pos.wrapping_sub(self.head) as usize)
    }

    /// Records a request; returns its token, or `None` when the queue has as many requests
    /// outstanding as it may.
    pub(crate) fn post(&mut self, posted: Posted) -> Option<u64> {
        if self.outstanding() as usize >= self.entries.len() {
            return None;
        }
        let pos = self.tail;
        let slot = self.slot(pos);
        self.entries[slot] = posted;
        self.tail = pos.wrapping_add(1);
        Some(self.token(pos))
    }

    /// Forgets the request posted last (its element could not be lent to the device).
    pub(crate) fn unpost(&mut self) {
        if self.outstanding() > 0 {
            self.tail = self.tail.wrapping_sub(1);
        }
    }

    /// Takes the request `token` names out of the table, as its completion: a receive must be
    /// the oldest; a send retires the unsignaled requests before it.
    pub(crate) fn complete(&mut self, token: u64) -> core::result::Result<Posted, BadToken> {
        if token >> 32 != self.queue as u64 {
            return Err(BadToken::NotOutstanding);
        }
        let pos = token as u32;
        let ahead = pos.wrapping_sub(self.head);
        if ahead >= self.outstanding() {
            let (from, to) = self.discarded;
            return Err(if pos.wrapping_sub(from) < to.wrapping_sub(from) {
                BadToken::Discarded
            } else {
                BadToken::NotOutstanding
            });
        }
        if self.queue == Queue::Recv && ahead != 0 {
            return Err(BadToken::OutOfOrder);
        }
        let skipped =
            (0..ahead).any(|i| self.entries[self.slot(self.head.wrapping_add(i))].signaled);
        let slot = self.slot(pos);
        let posted = self.entries[slot];
        self.head = pos.wrapping_add(1);
        self.head_slot = self.wrap(slot + 1);
        if skipped {
            return Err(BadToken::SkipsSignaled);
        }
        Ok(posted)
    }

    /// Takes the oldest outstanding request out of the table (to flush it: the device failed).
    pub(crate) fn take_oldest(&mut self) -> Option<Posted> {
        if self.outstanding() == 0 {
            return None;
        }
        let posted = self.entries[self.head_slot];
        self.head = self.head.wrapping_add(1);
        self.head_slot = self.wrap(self.head_slot + 1);
        Some(posted)
    }

    /// Whether no request is outstanding.
    pub(crate) fn is_empty(&self) -> bool {
        self.outstanding() == 0
    }

    /// Discards every outstanding request (the QP was reset: the device dropped them without
    /// completions).
    pub(crate) fn reset(&mut self) {
        self.discarded = (self.head, self.tail);
        if !self.entries.is_empty() {
            self.head_slot = self.slot(self.tail);
        }
        self.head = self.tail;
    }
}

#[kunit_tests(virtio_rdma_wr_table)]
mod tests {
    use super::*;

    const S: u64 = (Queue::Send as u64) << 32;
    const R: u64 = (Queue::Recv as u64) << 32;

    fn req(wr_id: u64, signaled: bool) -> Posted {
        Posted {
            wr_id,
            len: 100,
            opcode: bindings::ib_wc_opcode_IB_WC_SEND as u8,
            signaled,
        }
    }

    #[test]
    fn tokens_name_requests_in_order() -> Result {
        let mut t = WrTable::new(4, Queue::Send)?;
        let a = t.post(req(0xaaaa, true)).ok_or(ENOMEM)?;
        let b = t.post(req(0xbbbb, true)).ok_or(ENOMEM)?;
        // The token is the queue and a position, not the consumer's wr_id.
        assert_eq!((a, b), (S, S + 1));
        assert_eq!(t.complete(a).map(|p| p.wr_id), Ok(0xaaaa));
        assert_eq!(t.complete(b).map(|p| p.wr_id), Ok(0xbbbb));
        // Each completes once.
        assert_eq!(t.complete(b), Err(BadToken::NotOutstanding));
        Ok(())
    }

    #[test]
    fn full_table_refuses_and_unpost_gives_back() -> Result {
        let mut t = WrTable::new(2, Queue::Recv)?;
        assert!(t.post(req(1, true)).is_some());
        assert!(t.post(req(2, true)).is_some());
        assert_eq!(t.post(req(3, true)), None);
        t.unpost();
        assert_eq!(t.post(req(4, true)), Some(R + 1));
        assert_eq!(t.complete(R).map(|p| p.wr_id), Ok(1));
        assert_eq!(t.complete(R + 1).map(|p| p.wr_id), Ok(4));
        // No entries: nothing can be posted or completed.
        let mut none = WrTable::new(0, Queue::Send)?;
        assert_eq!(none.post(req(1, true)), None);
        assert_eq!(none.complete(S), Err(BadToken::NotOutstanding));
        Ok(())
    }

    #[test]
    fn tokens_not_outstanding_are_refused() -> Result {
        let mut t = WrTable::new(4, Queue::Send)?;
        t.post(req(1, true)).ok_or(ENOMEM)?;
        // Beyond what was posted, a lap ahead, the other queue's, without a queue, garbage.
        for token in [S + 1, S + 4, S + 5, R, 0, 1 << 40, u64::MAX] {
            assert_eq!(t.complete(token), Err(BadToken::NotOutstanding));
        }
        assert_eq!(t.complete(S).map(|p| p.wr_id), Ok(1));
        Ok(())
    }

    #[test]
    fn sends_retire_unsignaled_requests_before_them() -> Result {
        let mut t = WrTable::new(8, Queue::Send)?;
        for (id, signaled) in [(1, false), (2, false), (3, true), (4, true), (5, true)] {
            t.post(req(id, signaled)).ok_or(ENOMEM)?;
        }
        // 1 and 2 asked for no completion: 3's retires them.
        assert_eq!(t.complete(S + 2).map(|p| p.wr_id), Ok(3));
        // Skipping 4, which asked for one, is the device's error; 4 is gone all the same.
        assert_eq!(t.complete(S + 4), Err(BadToken::SkipsSignaled));
        assert_eq!(t.complete(S + 3), Err(BadToken::NotOutstanding));
        // Receives complete oldest first.
        let mut r = WrTable::new(4, Queue::Recv)?;
        r.post(req(7, true)).ok_or(ENOMEM)?;
        r.post(req(8, true)).ok_or(ENOMEM)?;
        assert_eq!(r.complete(R + 1), Err(BadToken::OutOfOrder));
        assert_eq!(r.complete(R).map(|p| p.wr_id), Ok(7));
        Ok(())
    }

    #[test]
    fn positions_wrap() -> Result {
        // Three entries: 2^32 positions are not a whole number of laps.
        let mut t = WrTable::new(3, Queue::Recv)?;
        t.head = u32::MAX - 1;
        t.tail = u32::MAX - 1;
        for id in 0..3 {
            t.post(req(id, true)).ok_or(ENOMEM)?;
        }
        assert_eq!(
            t.complete(R + u64::from(u32::MAX - 1)).map(|p| p.wr_id),
            Ok(0)
        );
        assert_eq!(t.complete(R + u64::from(u32::MAX)).map(|p| p.wr_id), Ok(1));
        assert_eq!(t.complete(R).map(|p| p.wr_id), Ok(2));
        Ok(())
    }

    #[test]
    fn reset_discards_quietly() -> Result {
        let mut t = WrTable::new(4, Queue::Send)?;
        t.post(req(1, true)).ok_or(ENOMEM)?;
        t.post(req(2, true)).ok_or(ENOMEM)?;
        t.reset();
        assert_eq!(t.complete(S + 1), Err(BadToken::Discarded));
        // New requests take new positions; the table has its whole room again.
        for id in 3..7 {
            assert!(t.post(req(id, true)).is_some());
        }
        assert_eq!(t.post(req(7, true)), None);
        assert_eq!(t.complete(S + 2).map(|p| p.wr_id), Ok(3));
        Ok(())
    }

    #[test]
    fn srq_receives_complete_in_any_order_each_once() -> Result {
        let mut t = SrqTable::new(3)?;
        let a = t.post(req(1, true)).ok_or(ENOMEM)?;
        let b = t.post(req(2, true)).ok_or(ENOMEM)?;
        let c = t.post(req(3, true)).ok_or(ENOMEM)?;
        assert_eq!(t.post(req(4, true)), None);
        // Another QP's later receive completes first.
        assert_eq!(t.complete(b).map(|p| p.wr_id), Ok(2));
        assert_eq!(t.complete(b), Err(BadToken::NotOutstanding));
        assert_eq!(t.complete(a).map(|p| p.wr_id), Ok(1));
        // A slot used again has a new generation: its old token is dead.
        let d = t.post(req(5, true)).ok_or(ENOMEM)?;
        assert_ne!(d, a);
        assert_ne!(d, b);
        assert_eq!(t.complete(a), Err(BadToken::NotOutstanding));
        assert_eq!(t.complete(b), Err(BadToken::NotOutstanding));
        // Other queues' tokens, an index out of range, garbage.
        for token in [S, R, SRQ_TAG << 32 | 7, u64::MAX] {
            assert_eq!(t.complete(token), Err(BadToken::NotOutstanding));
        }
        assert_eq!(t.complete(c).map(|p| p.wr_id), Ok(3));
        assert_eq!(t.complete(d).map(|p| p.wr_id), Ok(5));
        assert_eq!(t.outstanding(), 0);
        Ok(())
    }

    #[test]
    fn srq_unpost_gives_the_entry_back() -> Result {
        let mut t = SrqTable::new(1)?;
        let a = t.post(req(1, true)).ok_or(ENOMEM)?;
        t.unpost();
        assert_eq!(t.outstanding(), 0);
        assert_eq!(t.complete(a), Err(BadToken::NotOutstanding));
        let b = t.post(req(2, true)).ok_or(ENOMEM)?;
        assert_eq!(t.complete(b).map(|p| p.wr_id), Ok(2));
        assert!(SrqTable::new(SrqTable::MAX_ENTRIES + 1).is_err());
        Ok(())
    }

    #[test]
    fn send_opcodes_complete_as_their_kind() {
        assert_eq!(
            wc_opcode(bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM),
            bindings::ib_wc_opcode_IB_WC_RDMA_WRITE as u8
        );
        assert_eq!(
            wc_opcode(bindings::ib_wr_opcode_IB_WR_SEND_WITH_INV),
            bindings::ib_wc_opcode_IB_WC_SEND as u8
        );
        assert_eq!(
            wc_opcode(bindings::ib_wr_opcode_IB_WR_REG_MR),
            bindings::ib_wc_opcode_IB_WC_REG_MR as u8
        );
        assert_eq!(
            wc_opcode(bindings::ib_wr_opcode_IB_WR_BIND_MW),
            bindings::ib_wc_opcode_IB_WC_BIND_MW as u8
        );
    }
}
