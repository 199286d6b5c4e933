// SPDX-License-Identifier: GPL-2.0
//! Storm control: how many broadcast and multicast frames one port may
//! send. Every other port of the switch (or the whole network behind an
//! uplink) takes each of them, so a guest sending them in a loop would
//! load every tenant's receive path; unicast reaches one port and is not
//! limited. A port may send [`BURST`] at once and [`RATE`] a second
//! after that (a token bucket); what is over is dropped and counted
//! (`net_flood_limited`), as a switch's storm control does.

use std::time::Instant;

/// Group-addressed frames a port may send at once (ARP for as many
/// neighbours, a burst of IPv6 neighbour discovery).
pub const BURST: u32 = 100;
/// Group-addressed frames a second a port may send after its burst (a
/// busy host's ARP and ND take a few a second).
pub const RATE: u32 = 1000;

/// One port's bucket.
#[derive(Debug)]
pub struct FloodLimit {
    /// Frames it may still send, in thousandths of a frame.
    milli_tokens: u64,
    /// When it was last filled.
    filled: Option<Instant>,
}

impl Default for FloodLimit {
    fn default() -> Self {
        FloodLimit {
            milli_tokens: u64::from(BURST) * 1000,
            filled: None,
        }
    }
}

impl FloodLimit {
    /// Whether a group-addressed frame may go at `now` (taking a token).
    pub fn allow(&mut self, now: Instant) -> bool {
        let full = u64::from(BURST) * 1000;
        // Another thread's earlier `now` does not move the clock back.
        let now = self.filled.map_or(now, |then| then.max(now));
        if let Some(then) = self.filled {
            // RATE frames a second: RATE thousandths of a frame a
            // millisecond, RATE / 1000 a microsecond.
            let us = now.saturating_duration_since(then).as_micros();
            let gained = u64::try_from(us * u128::from(RATE) / 1000).unwrap_or(u64::MAX);
            self.milli_tokens = self.milli_tokens.saturating_add(gained).min(full);
        }
        self.filled = Some(now);
        if self.milli_tokens < 1000 {
            return false;
        }
        self.milli_tokens -= 1000;
        true
    }
}

/// Whether `frame` (from its destination MAC on) is for a group address
/// (broadcast or multicast: the I/G bit).
pub fn is_group(frame: &[u8]) -> bool {
    frame.first().is_some_and(|b| b & 1 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_burst_then_the_rate() {
        let t0 = Instant::now();
        let mut f = FloodLimit::default();
        let sent = (0..BURST * 3).filter(|_| f.allow(t0)).count();
        assert_eq!(sent, BURST as usize, "the burst, at one instant");
        // 10 ms later: RATE / 100 more.
        let t1 = t0 + Duration::from_millis(10);
        let more = (0..BURST).filter(|_| f.allow(t1)).count();
        assert_eq!(more, (RATE / 100) as usize);
        // Fractions add up: 1 ms at a time gives one frame a millisecond.
        let mut got = 0;
        for ms in 1..=20 {
            if f.allow(t1 + Duration::from_millis(ms)) {
                got += 1;
            }
        }
        assert_eq!(got, 20 * RATE as usize / 1000);
        // A quiet minute fills it up to the burst, no more.
        let later = t1 + Duration::from_secs(60);
        assert_eq!(
            (0..BURST * 3).filter(|_| f.allow(later)).count(),
            BURST as usize
        );
        // Time going backwards (another thread's earlier `now`) gives nothing.
        assert!(!f.allow(t0));
    }

    #[test]
    fn group_addresses() {
        assert!(is_group(&[0xff; 6]));
        assert!(is_group(&[0x33, 0x33, 0, 0, 0, 1]));
        assert!(is_group(&[0x01, 0x00, 0x5e, 0, 0, 1]));
        assert!(!is_group(&[0x52, 0x54, 0, 0x12, 0x34, 0x56]));
        assert!(!is_group(&[]));
    }
}
