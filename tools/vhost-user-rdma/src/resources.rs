// SPDX-License-Identifier: GPL-2.0
//! Bounded tables of guest-visible objects: handle allocation and the GID
//! table.

use std::collections::{HashSet, VecDeque};

/// Allocates nonzero handles `1..=capacity`, reusing freed ones oldest first
/// (so that a stale handle is not handed out again at once). Handles
/// [retired](HandleTable::retire_all) together come back only after every
/// other.
#[derive(Debug)]
pub struct HandleTable {
    capacity: u32,
    next_fresh: u32,
    free: VecDeque<u32>,
    used: HashSet<u32>,
    /// Handles in use when the table was last emptied, lowest first.
    retired: VecDeque<u32>,
}

impl HandleTable {
    /// An empty table of `capacity` handles.
    pub fn new(capacity: u32) -> Self {
        HandleTable {
            capacity,
            next_fresh: 1,
            free: VecDeque::new(),
            used: HashSet::new(),
            retired: VecDeque::new(),
        }
    }

    /// A free handle, or `None` when all are in use.
    pub fn alloc(&mut self) -> Option<u32> {
        let handle = match self.free.pop_front() {
            Some(h) => h,
            None if self.next_fresh <= self.capacity => {
                let h = self.next_fresh;
                self.next_fresh += 1;
                h
            }
            None => self.retired.pop_front()?,
        };
        self.used.insert(handle);
        Some(handle)
    }

    /// Releases `handle`; false if it was not allocated.
    pub fn free(&mut self, handle: u32) -> bool {
        if self.used.remove(&handle) {
            self.free.push_back(handle);
            true
        } else {
            false
        }
    }

    /// Frees every handle (a reset), to be handed out again only once no
    /// other is left: a handle of the objects of before names a new object
    /// as late as the table allows.
    pub fn retire_all(&mut self) {
        let mut old: Vec<u32> = self.used.drain().collect();
        old.sort_unstable();
        self.retired.extend(old);
    }

    /// Whether `handle` is allocated.
    pub fn contains(&self, handle: u32) -> bool {
        self.used.contains(&handle)
    }

    /// Handles in use.
    pub fn len(&self) -> usize {
        self.used.len()
    }

    /// Whether no handle is in use.
    pub fn is_empty(&self) -> bool {
        self.used.is_empty()
    }
}

/// Objects by handle: a vector indexed by handle (handles are small and
/// dense: handed out by a [`HandleTable`], or numbers below a device limit),
/// so that finding one on the data path costs an index rather than a hash.
#[derive(Debug)]
pub struct ByHandle<T> {
    slots: Vec<Option<T>>,
    len: usize,
}

impl<T> Default for ByHandle<T> {
    fn default() -> Self {
        ByHandle {
            slots: Vec::new(),
            len: 0,
        }
    }
}

impl<T> ByHandle<T> {
    /// A table whose handles `0..slots` start free (numbers a device hands
    /// out itself below its limit: [`ByHandle::first_free`]).
    pub fn with_slots(slots: u32) -> Self {
        ByHandle {
            slots: (0..slots).map(|_| None).collect(),
            len: 0,
        }
    }

    /// The lowest handle in `range` whose slot exists and is free.
    pub fn first_free(&self, range: std::ops::Range<u32>) -> Option<u32> {
        range
            .into_iter()
            .take_while(|&h| (h as usize) < self.slots.len())
            .find(|&h| self.slots[h as usize].is_none())
    }

    /// Puts `v` at `handle`; what was there before.
    pub fn insert(&mut self, handle: u32, v: T) -> Option<T> {
        let i = handle as usize;
        if i >= self.slots.len() {
            self.slots.resize_with(i + 1, || None);
        }
        let old = self.slots[i].replace(v);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    /// The object at `handle`.
    pub fn get(&self, handle: u32) -> Option<&T> {
        self.slots.get(handle as usize)?.as_ref()
    }

    /// The object at `handle`, mutable.
    pub fn get_mut(&mut self, handle: u32) -> Option<&mut T> {
        self.slots.get_mut(handle as usize)?.as_mut()
    }

    /// Takes the object at `handle` out.
    pub fn remove(&mut self, handle: u32) -> Option<T> {
        let old = self.slots.get_mut(handle as usize)?.take();
        if old.is_some() {
            self.len -= 1;
        }
        old
    }

    /// Whether an object is at `handle`.
    pub fn contains(&self, handle: u32) -> bool {
        self.get(handle).is_some()
    }

    /// Drops every object.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.len = 0;
    }

    /// The objects.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().flatten()
    }

    /// The objects with their handles, lowest handle first.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        // Handles fit in u32: they were u32s when put.
        (0u32..)
            .zip(&self.slots)
            .filter_map(|(h, v)| v.as_ref().map(|v| (h, v)))
    }

    /// The objects, mutable.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.slots.iter_mut().flatten()
    }

    /// Objects held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// One GID table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GidEntry {
    /// The GID, network byte order.
    pub gid: [u8; 16],
    /// `enum ib_gid_type`.
    pub gid_type: u32,
}

/// The GID table of one port.
#[derive(Debug)]
pub struct GidTable {
    entries: Vec<Option<GidEntry>>,
}

impl GidTable {
    /// An empty table of `len` entries.
    pub fn new(len: usize) -> Self {
        GidTable {
            entries: vec![None; len],
        }
    }

    /// Sets entry `index`; false if out of range.
    pub fn set(&mut self, index: usize, entry: GidEntry) -> bool {
        match self.entries.get_mut(index) {
            Some(slot) => {
                *slot = Some(entry);
                true
            }
            None => false,
        }
    }

    /// Clears entry `index`; returns the old entry (`None` if out of range or empty).
    pub fn clear(&mut self, index: usize) -> Option<GidEntry> {
        self.entries.get_mut(index).and_then(Option::take)
    }

    /// Index of the entry holding `gid`.
    pub fn find(&self, gid: &[u8; 16]) -> Option<usize> {
        self.entries
            .iter()
            .position(|e| e.is_some_and(|e| e.gid == *gid))
    }

    /// Entries set.
    pub fn len(&self) -> usize {
        self.entries.iter().flatten().count()
    }

    /// Whether no entry is set.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entry `index`, if set.
    pub fn get(&self, index: usize) -> Option<GidEntry> {
        self.entries.get(index).copied().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_handle_finds_what_was_put() {
        let mut m = ByHandle::default();
        assert!(m.is_empty() && m.get(0).is_none() && m.get(u32::MAX).is_none());
        assert_eq!(m.insert(5, "five"), None);
        assert_eq!(m.insert(2, "two"), None);
        assert_eq!(m.insert(5, "FIVE"), Some("five"));
        assert_eq!((m.len(), m.get(5), m.get(3)), (2, Some(&"FIVE"), None));
        assert!(m.contains(2) && !m.contains(6));
        assert_eq!(m.remove(2), Some("two"));
        assert_eq!((m.remove(2), m.remove(9)), (None, None));
        assert_eq!(m.values().copied().collect::<Vec<_>>(), ["FIVE"]);
        assert_eq!(m.iter().collect::<Vec<_>>(), [(5, &"FIVE")]);
        m.clear();
        assert!(m.is_empty() && m.get(5).is_none());
    }

    #[test]
    fn by_handle_with_slots_finds_free_ones_inside() {
        let mut m = ByHandle::with_slots(4);
        assert_eq!((m.first_free(2..9), m.first_free(4..9)), (Some(2), None));
        m.insert(2, ());
        m.insert(3, ());
        assert_eq!((m.first_free(2..9), m.first_free(0..2)), (None, Some(0)));
        assert_eq!(m.first_free(1..1), None);
    }

    #[test]
    fn handles_bounded_and_reused_fifo() {
        let mut t = HandleTable::new(3);
        assert_eq!(
            (t.alloc(), t.alloc(), t.alloc(), t.alloc()),
            (Some(1), Some(2), Some(3), None)
        );
        assert!(t.free(2));
        assert!(!t.free(2));
        assert!(!t.free(0));
        assert!(t.free(1));
        assert_eq!(t.alloc(), Some(2));
        assert_eq!(t.alloc(), Some(1));
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn retired_handles_come_back_last() {
        let mut t = HandleTable::new(5);
        assert_eq!(
            (t.alloc(), t.alloc(), t.alloc()),
            (Some(1), Some(2), Some(3))
        );
        assert!(t.free(2));
        t.retire_all();
        assert!(t.is_empty() && !t.contains(1));
        // Freed before, then never used, then those retired.
        let order: Vec<_> = (0..6).map(|_| t.alloc()).collect();
        assert_eq!(order, [Some(2), Some(4), Some(5), Some(1), Some(3), None]);
    }

    #[test]
    fn gid_table_bounds() {
        let mut g = GidTable::new(2);
        let e = GidEntry {
            gid: [1; 16],
            gid_type: 1,
        };
        assert!(g.set(1, e));
        assert!(!g.set(2, e));
        assert_eq!(g.get(1), Some(e));
        assert_eq!(g.clear(1), Some(e));
        assert_eq!(g.clear(1), None);
        assert_eq!(g.clear(5), None);
    }
}
