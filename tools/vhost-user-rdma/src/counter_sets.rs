// SPDX-License-Identifier: GPL-2.0
//! Counter sets: ALLOC_COUNTER_SET, DEALLOC_COUNTER_SET, BIND_COUNTER_SET
//! and QUERY_COUNTERS of a set.
//!
//! A set holds the 19 port counters of `enum virtio_rdma_counter`. What a
//! QP bound to one does counts there *instead of* in the device's own port
//! counters ([`Stats`](crate::stats::Stats)), so that the port's counters
//! and every set's together count each event once (the kernel adds them up,
//! as for mlx5's q counters). The device's other counters (GIDs refused,
//! quota, suppressed logs, hostile lies) are the operator's and stay
//! device-wide.
//!
//! The device's table of live sets is part of its objects (`ctrl::State`):
//! a device reset frees every set. A QP holds an `Arc` of its set, so the
//! data path counts with an atomic add and no lookup; which sink a count
//! goes to is decided in one place, [`Stats::of`](crate::stats::Stats::of).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use log::debug;
use zerocopy::little_endian::U32;
use zerocopy::IntoBytes;

use crate::abi::*;
use crate::ctrl::{CmdResult, Ctrl};
use crate::resources::HandleTable;
use crate::stats::Counter;

/// One counter set: the port counters of the QPs bound to it.
#[derive(Debug)]
pub struct CounterSet {
    /// Its number (from 1), as the guest names it.
    id: u32,
    values: [AtomicU64; VIRTIO_RDMA_NUM_COUNTERS],
}

impl CounterSet {
    /// A zeroed set numbered `id`.
    pub fn new(id: u32) -> Self {
        CounterSet {
            id,
            values: Default::default(),
        }
    }

    /// Its number.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Adds `n` to port counter `c`; a counter that is not a port counter
    /// has no place here (the caller, `Tally`, never passes one).
    pub fn add(&self, c: Counter, n: u64) {
        if let Some(v) = self.values.get(c as usize) {
            v.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// The counters as QUERY_COUNTERS returns them.
    pub fn values(&self) -> [u64; VIRTIO_RDMA_NUM_COUNTERS] {
        std::array::from_fn(|i| self.values[i].load(Ordering::Relaxed))
    }
}

/// The live counter sets of one device.
#[derive(Debug)]
pub struct CounterSets {
    handles: HandleTable,
    sets: BTreeMap<u32, Arc<CounterSet>>,
}

impl CounterSets {
    /// An empty table of at most `capacity` sets.
    pub fn new(capacity: u32) -> Self {
        CounterSets {
            handles: HandleTable::new(capacity),
            sets: BTreeMap::new(),
        }
    }

    /// A new zeroed set, `None` when `capacity` are live.
    pub fn alloc(&mut self) -> Option<Arc<CounterSet>> {
        let id = self.handles.alloc()?;
        let set = Arc::new(CounterSet::new(id));
        self.sets.insert(id, set.clone());
        Some(set)
    }

    /// Set `id`, if it is live.
    pub fn get(&self, id: u32) -> Option<&Arc<CounterSet>> {
        self.sets.get(&id)
    }

    /// Frees set `id`; false if it was not live. A QP still holding it
    /// would count into a set nobody can read: the caller checks first.
    pub fn free(&mut self, id: u32) -> bool {
        self.sets.remove(&id).is_some() && self.handles.free(id)
    }

    /// Live sets.
    pub fn len(&self) -> usize {
        self.sets.len()
    }

    /// Whether no set is live.
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }
}

impl Ctrl {
    fn set_warn(&self, cmd: &str, why: std::fmt::Arguments<'_>, status: u8) -> u8 {
        self.guest_warn(format_args!("{cmd}: {why}"));
        status
    }

    /// The counters of set `id` (QUERY_COUNTERS with a set).
    pub(crate) fn counter_set_values(
        &self,
        id: u32,
    ) -> Result<[u64; VIRTIO_RDMA_NUM_COUNTERS], u8> {
        match self.lock().counter_sets.get(id) {
            Some(set) => Ok(set.values()),
            None => Err(self.set_warn(
                "QUERY_COUNTERS",
                format_args!("counter set {id} does not exist"),
                VIRTIO_RDMA_S_NOT_FOUND,
            )),
        }
    }

    pub(crate) fn alloc_counter_set(&self, body: &[u8]) -> CmdResult {
        const CMD: &str = "ALLOC_COUNTER_SET";
        let req: VirtioRdmaCmdAllocCounterSet = self.parse(CMD, body)?;
        self.check_port(CMD, req.port.get())?;
        let Some(set) = self.lock().counter_sets.alloc() else {
            let max = self.limits().max_counter_sets();
            return Err(self.set_warn(
                CMD,
                format_args!("all {max} counter sets are in use"),
                VIRTIO_RDMA_S_NO_RESOURCE,
            ));
        };
        debug!("{}: {CMD} -> set {}", self.name(), set.id());
        let rsp = VirtioRdmaRspAllocCounterSet {
            set: U32::new(set.id()),
            reserved: U32::new(0),
        };
        Ok(rsp.as_bytes().to_vec())
    }

    pub(crate) fn dealloc_counter_set(&self, body: &[u8]) -> CmdResult {
        const CMD: &str = "DEALLOC_COUNTER_SET";
        let req: VirtioRdmaCmdDeallocCounterSet = self.parse(CMD, body)?;
        let id = req.set.get();
        let mut st = self.lock();
        if st.counter_sets.get(id).is_none() {
            return Err(self.set_warn(
                CMD,
                format_args!("counter set {id} does not exist"),
                VIRTIO_RDMA_S_NOT_FOUND,
            ));
        }
        if let Some((qpn, _)) = st
            .qps
            .iter()
            .find(|(_, q)| q.counters.as_ref().is_some_and(|s| s.id() == id))
        {
            return Err(self.set_warn(
                CMD,
                format_args!("QP {qpn} is bound to counter set {id}"),
                VIRTIO_RDMA_S_BUSY,
            ));
        }
        st.counter_sets.free(id);
        drop(st);
        debug!("{}: {CMD} set {id}", self.name());
        Ok(Vec::new())
    }

    pub(crate) fn bind_counter_set(&self, body: &[u8]) -> CmdResult {
        const CMD: &str = "BIND_COUNTER_SET";
        let req: VirtioRdmaCmdBindCounterSet = self.parse(CMD, body)?;
        let (qpn, id) = (req.qpn.get(), req.set.get());
        let mut st = self.lock();
        let set = match id {
            0 => None,
            _ => match st.counter_sets.get(id) {
                Some(s) => Some(s.clone()),
                None => {
                    return Err(self.set_warn(
                        CMD,
                        format_args!("counter set {id} does not exist"),
                        VIRTIO_RDMA_S_NOT_FOUND,
                    ));
                }
            },
        };
        let Some(qp) = st.qp_mut(qpn) else {
            return Err(self.set_warn(
                CMD,
                format_args!("qpn {qpn} does not exist"),
                VIRTIO_RDMA_S_NOT_FOUND,
            ));
        };
        // From the next count on: what the QP counted so far stays where
        // it was counted.
        qp.counters = set;
        drop(st);
        debug!("{}: {CMD} qpn {qpn} set {id}", self.name());
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_are_bounded_numbered_from_one_and_reused() {
        let mut t = CounterSets::new(2);
        let a = t.alloc().expect("first");
        let b = t.alloc().expect("second");
        assert_eq!((a.id(), b.id()), (1, 2));
        assert!(t.alloc().is_none(), "at the limit");
        assert!(t.free(1));
        assert!(!t.free(1));
        assert!(!t.free(0));
        assert!(t.get(1).is_none());
        let c = t.alloc().expect("a freed number again");
        assert_eq!(c.id(), 1);
        assert!(c.values().iter().all(|&v| v == 0), "a new set is zeroed");
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn a_set_holds_only_port_counters() {
        let s = CounterSet::new(1);
        s.add(Counter::SentBytes, 5);
        s.add(Counter::OtherErr, 1);
        // Not a port counter: nowhere to go, and no panic.
        s.add(Counter::LogsSuppressed, 7);
        let v = s.values();
        assert_eq!(v[VIRTIO_RDMA_CNT_SENT_BYTES], 5);
        assert_eq!(v[VIRTIO_RDMA_CNT_OTHER_ERR], 1);
        assert_eq!(v.iter().sum::<u64>(), 6);
    }
}
