// SPDX-License-Identifier: GPL-2.0
//! Per-device counters an operator reads to see what guests tried and the
//! device refused: requests the responder dropped, GIDs it would not take,
//! registrations over quota, log lines suppressed.
//!
//! The counters belong to the device that did the refusing (a request
//! dropped by a victim's responder is counted on the victim's device),
//! are never reset while the process runs (a device reset does not clear
//! them: they describe the tenant, not its objects), and are logged when a
//! device resets, when its frontend disconnects, and on SIGUSR1.
//!
//! A device in hostile mode (`hostile.rs`) also counts the lies it told;
//! those counters are printed only by such a device.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// What is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// An RC/UC request from a QP other than the responder QP's connected
    /// peer (its destination QPN and GID), dropped.
    NotPeer,
    /// An RC/UC request from the connected peer with a PSN other than the
    /// responder's expected one, dropped.
    BadPsn,
    /// A UD/GSI datagram whose Q_Key differs from the receiving QP's,
    /// dropped.
    BadQkey,
    /// ADD_GID refused: the GID is another device's, or not one the
    /// operator allowed.
    GidRefused,
    /// A registration refused because the device's quota is used up.
    OverQuota,
    /// Guest-triggered log lines not written (rate limit).
    LogsSuppressed,
    /// Hostile mode: completions corrupted.
    HostileCompletions,
    /// Hostile mode: CREATE_CQ/CREATE_QP answers naming another object.
    HostileHandles,
    /// Hostile mode: made-up events posted.
    HostileEvents,
}

impl Counter {
    /// Whether this counts lies of the hostile mode.
    fn is_hostile(self) -> bool {
        matches!(
            self,
            Counter::HostileCompletions | Counter::HostileHandles | Counter::HostileEvents
        )
    }
}

const COUNTERS: [(Counter, &str); 9] = [
    (Counter::NotPeer, "dropped_not_peer"),
    (Counter::BadPsn, "dropped_bad_psn"),
    (Counter::BadQkey, "dropped_bad_qkey"),
    (Counter::GidRefused, "gid_refused"),
    (Counter::OverQuota, "over_quota"),
    (Counter::LogsSuppressed, "logs_suppressed"),
    (Counter::HostileCompletions, "hostile_completions"),
    (Counter::HostileHandles, "hostile_handles"),
    (Counter::HostileEvents, "hostile_events"),
];

/// The counters of one device.
#[derive(Debug, Default)]
pub struct Stats {
    values: [AtomicU64; COUNTERS.len()],
    /// The device is hostile: print the hostile-mode counters too.
    hostile: bool,
}

impl Stats {
    /// Zeroed counters; `hostile`: of a device in hostile mode, whose
    /// lies are printed too.
    pub fn new(hostile: bool) -> Self {
        Stats {
            hostile,
            ..Stats::default()
        }
    }

    fn slot(c: Counter) -> usize {
        // COUNTERS lists every variant once.
        COUNTERS.iter().position(|(k, _)| *k == c).unwrap_or(0)
    }

    /// Adds `n` to counter `c`.
    pub fn add(&self, c: Counter, n: u64) {
        self.values[Self::slot(c)].fetch_add(n, Ordering::Relaxed);
    }

    /// Adds one to counter `c`.
    pub fn inc(&self, c: Counter) {
        self.add(c, 1);
    }

    /// The value of counter `c`.
    pub fn get(&self, c: Counter) -> u64 {
        self.values[Self::slot(c)].load(Ordering::Relaxed)
    }
}

impl fmt::Display for Stats {
    /// `name=value` pairs, space separated (the hostile-mode ones only for
    /// a hostile device).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = COUNTERS
            .iter()
            .filter(|(c, _)| self.hostile || !c.is_hostile());
        for (i, (c, name)) in shown.enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{name}={}", self.get(*c))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_prints() {
        let s = Stats::default();
        s.inc(Counter::NotPeer);
        s.add(Counter::LogsSuppressed, 5);
        assert_eq!(s.get(Counter::NotPeer), 1);
        assert_eq!(s.get(Counter::BadPsn), 0);
        let text = s.to_string();
        assert!(
            text.starts_with("dropped_not_peer=1 dropped_bad_psn=0"),
            "{text}"
        );
        assert!(text.ends_with("logs_suppressed=5"), "{text}");
        assert!(!text.contains("hostile"), "{text}");
        let h = Stats::new(true);
        h.add(Counter::HostileHandles, 2);
        let text = h.to_string();
        assert!(
            text.ends_with(
                "logs_suppressed=0 hostile_completions=0 hostile_handles=2 hostile_events=0"
            ),
            "{text}"
        );
    }
}
