// SPDX-License-Identifier: GPL-2.0
//! Lanes: a device's QPs split among its worker threads (`--threads`).
//!
//! QP `n` belongs to lane `n % lanes`; each lane has its own thread
//! (`worker.rs`), which serves the kicks and rings of its QPs' queues and
//! the passes of its busy SQs, and its own data-path lock (`fabric.rs`).
//! A step of an RC/UC QP holds its own lane's lock and its destination
//! QP's lane's (on the peer device), so a connected pair still runs one
//! step at a time, while QPs of other lanes of the same device run on
//! other threads. What those may share (CQs, SRQs, MRs, the device's
//! memory for atomics) has a lock or an atomic order of its own.
//!
//! A lane's thread also runs its QPs' RNR timers. Lane 0's serves
//! everything that is not a QP's: the control queue, CQ and event vrings,
//! the doorbells, the SRQs' rings and the net personality's queues.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use log::warn;
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use crate::fabric::DataPath;

/// One lane of a device.
#[derive(Debug)]
pub struct Lane {
    /// Held by the data-path steps of the lane's QPs, and of their peers
    /// (`fabric.rs`).
    data_path: DataPath,
    /// SQs to serve again (see `engine.rs`, fairness).
    scheduled: Mutex<BTreeSet<u32>>,
    /// Wakes the lane's thread: SQs were scheduled, or its rings must be
    /// polled again.
    wake: EventFd,
    /// When a ring of the lane last had work (only the lane's thread
    /// polls them: see `Ctrl::poll_rings`).
    last_ring_work: Mutex<Instant>,
    /// The lane's rings sleep: each asks the driver to notify.
    asleep: AtomicBool,
    /// A doorbell rang since the lane's thread last looked.
    doorbell: AtomicBool,
}

impl Lane {
    fn new() -> std::io::Result<Lane> {
        Ok(Lane {
            data_path: DataPath::default(),
            scheduled: Mutex::new(BTreeSet::new()),
            wake: EventFd::new(EFD_NONBLOCK)?,
            last_ring_work: Mutex::new(Instant::now()),
            asleep: AtomicBool::new(false),
            doorbell: AtomicBool::new(false),
        })
    }

    /// The lane's data-path lock.
    pub fn data_path(&self) -> &DataPath {
        &self.data_path
    }

    /// Readable when the lane's thread has work it was not kicked for.
    pub fn wake(&self) -> &EventFd {
        &self.wake
    }

    /// Wakes the lane's thread.
    pub fn wake_up(&self) {
        if let Err(e) = self.wake.write(1) {
            warn!("cannot wake a device's lane: {e}");
        }
    }

    /// Adds QP `qpn`'s SQ to the ones served again after this round.
    pub fn requeue_sq(&self, qpn: u32) {
        self.scheduled().insert(qpn);
    }

    /// Whether SQs are scheduled.
    pub fn has_scheduled(&self) -> bool {
        !self.scheduled().is_empty()
    }

    /// The SQs scheduled so far (and none from then on).
    pub fn take_scheduled(&self) -> BTreeSet<u32> {
        std::mem::take(&mut *self.scheduled())
    }

    fn scheduled(&self) -> std::sync::MutexGuard<'_, BTreeSet<u32>> {
        self.scheduled.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// When a ring of the lane last had work.
    pub fn last_ring_work(&self) -> std::sync::MutexGuard<'_, Instant> {
        self.last_ring_work
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the lane's rings sleep.
    pub fn asleep(&self) -> bool {
        self.asleep.load(Ordering::SeqCst)
    }

    /// Puts the lane's rings to sleep (they asked for doorbells), unless
    /// a doorbell rang meanwhile; whether they sleep. The lane's thread
    /// only.
    pub fn fall_asleep(&self) -> bool {
        self.asleep.store(true, Ordering::SeqCst);
        // A doorbell that saw the lane awake did not wake its thread.
        if self.doorbell.load(Ordering::SeqCst) {
            self.asleep.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Whether a doorbell rang since the last call, and if so whether the
    /// lane's rings slept (they are awake again). The lane's thread only.
    pub fn take_doorbell(&self) -> Option<bool> {
        if !self.doorbell.swap(false, Ordering::SeqCst) {
            return None;
        }
        Some(self.asleep.swap(false, Ordering::SeqCst))
    }

    /// A doorbell (from any thread): the lane's thread polls its rings
    /// again, woken if they sleep. Takes no lock (a control command rings
    /// it holding the whole fabric, which a polling lane may wait for).
    pub fn ring_doorbell(&self) {
        self.doorbell.store(true, Ordering::SeqCst);
        if self.asleep.load(Ordering::SeqCst) {
            self.wake_up();
        }
    }
}

/// The lanes of a device: at least one.
#[derive(Debug)]
pub struct Lanes(Box<[Lane]>);

impl Lanes {
    /// `n` lanes (at least one).
    pub fn new(n: usize) -> std::io::Result<Lanes> {
        let lanes = (0..n.max(1))
            .map(|_| Lane::new())
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Lanes(lanes.into_boxed_slice()))
    }

    /// How many there are.
    pub fn count(&self) -> usize {
        self.0.len()
    }

    /// The index of QP `qpn`'s lane.
    pub fn index_of(&self, qpn: u32) -> usize {
        qpn as usize % self.0.len()
    }

    /// QP `qpn`'s lane.
    pub fn of(&self, qpn: u32) -> &Lane {
        &self.0[self.index_of(qpn)]
    }

    /// Lane `index` (taken modulo the count: every index names a lane).
    pub fn get(&self, index: usize) -> &Lane {
        &self.0[index % self.0.len()]
    }

    /// Every lane, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Lane> {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qps_go_round_the_lanes_and_each_lane_schedules_its_own() {
        let lanes = Lanes::new(3).unwrap();
        assert_eq!(lanes.count(), 3);
        assert_eq!(
            (0..7).map(|q| lanes.index_of(q)).collect::<Vec<_>>(),
            [0, 1, 2, 0, 1, 2, 0]
        );
        lanes.of(4).requeue_sq(4);
        assert!(lanes.get(1).has_scheduled());
        assert!(!lanes.get(0).has_scheduled() && !lanes.get(2).has_scheduled());
        assert_eq!(
            lanes
                .get(1)
                .take_scheduled()
                .into_iter()
                .collect::<Vec<_>>(),
            [4]
        );
        assert!(!lanes.get(1).has_scheduled());
        assert_eq!(Lanes::new(0).unwrap().count(), 1);
    }

    /// A doorbell is never lost: one that rings while the lane falls
    /// asleep keeps it awake, one that rings while it sleeps wakes its
    /// thread, and the thread sees each once.
    #[test]
    fn a_doorbell_keeps_or_wakes_a_lane() {
        let lane = Lane::new().unwrap();
        assert_eq!(lane.take_doorbell(), None);
        // Rung while polling, before the lane decides to sleep.
        lane.ring_doorbell();
        assert!(!lane.fall_asleep(), "a doorbell rang: stays awake");
        assert!(!lane.asleep());
        assert!(lane.wake().read().is_err(), "no wake-up needed");
        assert_eq!(lane.take_doorbell(), Some(false));
        // Rung while asleep: the thread is woken.
        assert!(lane.fall_asleep());
        assert!(lane.asleep());
        lane.ring_doorbell();
        assert_eq!(lane.wake().read().ok(), Some(1), "woken");
        assert_eq!(lane.take_doorbell(), Some(true));
        assert!(!lane.asleep());
        assert_eq!(lane.take_doorbell(), None);
    }
}
