// SPDX-License-Identifier: GPL-2.0
//! Rate limiting of the log lines a guest can cause, so that a guest
//! sending malformed requests in a loop cannot flood the host's log: at
//! most [`BURST`] lines per [`INTERVAL`] per device (the kernel's
//! `printk_ratelimit` defaults), then a count of what was suppressed.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Length of one window.
pub const INTERVAL: Duration = Duration::from_secs(5);
/// Lines allowed per window.
pub const BURST: u32 = 10;

#[derive(Debug)]
struct Window {
    start: Option<Instant>,
    printed: u32,
    suppressed: u64,
}

/// One device's limiter.
#[derive(Debug)]
pub struct RateLimit {
    window: Mutex<Window>,
}

/// The verdict for one line.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Write it; `suppressed` lines were dropped since the last one written.
    Print {
        /// Lines dropped before this one.
        suppressed: u64,
    },
    /// Drop it.
    Suppress,
}

impl Default for RateLimit {
    fn default() -> Self {
        RateLimit {
            window: Mutex::new(Window {
                start: None,
                printed: 0,
                suppressed: 0,
            }),
        }
    }
}

impl RateLimit {
    /// Whether a line may be written at `now`.
    pub fn check(&self, now: Instant) -> Verdict {
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let expired = w
            .start
            .is_none_or(|s| now.saturating_duration_since(s) >= INTERVAL);
        if expired {
            w.start = Some(now);
            w.printed = 0;
        }
        if w.printed < BURST {
            w.printed += 1;
            let suppressed = std::mem::take(&mut w.suppressed);
            Verdict::Print { suppressed }
        } else {
            w.suppressed += 1;
            Verdict::Suppress
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_suppress_then_report() {
        let r = RateLimit::default();
        let t0 = Instant::now();
        for _ in 0..BURST {
            assert_eq!(r.check(t0), Verdict::Print { suppressed: 0 });
        }
        for _ in 0..7 {
            assert_eq!(r.check(t0 + Duration::from_secs(1)), Verdict::Suppress);
        }
        assert_eq!(r.check(t0 + INTERVAL), Verdict::Print { suppressed: 7 });
        assert_eq!(r.check(t0 + INTERVAL), Verdict::Print { suppressed: 0 });
    }
}
