// SPDX-License-Identifier: GPL-2.0
//! The link a device's requests and their answers cross, as the operator
//! may make it misbehave (`--link-faults`): between QPs of this process
//! nothing is ever lost, so without faults nothing would exercise what the
//! transport does when a network loses or duplicates packets. A fault
//! drill turns them on for every RC, UC and XRC message a device sends.
//!
//! A fault hits a packet. A message of one packet (and the answer to it)
//! is lost or duplicated whole. An RC message of more packets moves in
//! chunks while the link has faults (`engine/transfer.rs`), and a chunk is
//! delivered up to the first packet the link loses: the responder takes
//! the packets before the gap and nothing after it (go-back-N), answers a
//! packet after the gap with a sequence-error NAK naming the PSN it
//! expects, and the requester goes again from there; a lost last packet or
//! a lost answer leaves it to the transport timer. A READ's response
//! packets are answers. UC messages of more packets are lost whole (at the
//! request rate). The link carries one message per QP at a time (a
//! requester sends its next message when the last is answered), so no
//! message overtakes another: reordering within a message is a gap and
//! then a duplicate, which is what it costs go-back-N (`reorder`: a
//! packet overtaken by the next).

use std::fmt;
use std::str::FromStr;

/// What the link does to messages, each in parts per million.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// A request is lost: the responder never sees it.
    pub drop_request: u32,
    /// An answer is lost: the responder executed the request, the
    /// requester hears nothing.
    pub drop_answer: u32,
    /// A request arrives twice.
    pub duplicate: u32,
    /// A packet of a message arrives after the one behind it.
    pub reorder: u32,
}

/// Where a burst of packets stops being taken in order (go-back-N).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gap {
    /// Packets taken before it.
    pub taken: u32,
    /// Whether a packet after it reached the receiver (which then NAKs
    /// the sequence error, or for READ responses asks again at once).
    pub seen_after: bool,
}

const MILLION: u32 = 1_000_000;

impl Faults {
    fn hit(ppm: u32) -> bool {
        ppm > 0 && rand::random_ratio(ppm.min(MILLION), MILLION)
    }

    /// Whether this request is lost.
    pub fn drops_request(&self) -> bool {
        Self::hit(self.drop_request)
    }

    /// Whether this answer is lost.
    pub fn drops_answer(&self) -> bool {
        Self::hit(self.drop_answer)
    }

    /// Where the link breaks the order of `packets` request packets, if
    /// it does.
    pub fn request_gap(&self, packets: u32) -> Option<Gap> {
        self.gap(self.drop_request, packets)
    }

    /// Where the link breaks the order of `packets` answer packets (a
    /// READ's responses), if it does.
    pub fn answer_gap(&self, packets: u32) -> Option<Gap> {
        self.gap(self.drop_answer, packets)
    }

    /// Packet `i` lost: `i` taken, a later one seen if there is one.
    /// Packet `i` overtaken by `i + 1`: the receiver sees `i + 1` out of
    /// sequence, then takes `i`; `i + 1` is gone.
    fn gap(&self, drop: u32, packets: u32) -> Option<Gap> {
        if drop == 0 && self.reorder == 0 {
            return None;
        }
        (0..packets).find_map(|i| {
            if Self::hit(drop) {
                Some(Gap {
                    taken: i,
                    seen_after: i + 1 < packets,
                })
            } else if i + 1 < packets && Self::hit(self.reorder) {
                Some(Gap {
                    taken: i + 1,
                    seen_after: true,
                })
            } else {
                None
            }
        })
    }

    /// Whether this request arrives twice.
    pub fn duplicates(&self) -> bool {
        Self::hit(self.duplicate)
    }
}

/// Parses `KIND=PERCENT[,KIND=PERCENT...]`; kinds `drop` (requests and
/// answers alike), `drop-request`, `drop-answer`, `dup`, `reorder`.
impl FromStr for Faults {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut f = Faults::default();
        for part in s.split(',') {
            let (kind, pct) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: KIND=PERCENT expected"))?;
            let pct: f64 = pct
                .trim_end_matches('%')
                .parse()
                .map_err(|e| format!("`{part}`: {e}"))?;
            if !(0.0..=100.0).contains(&pct) {
                return Err(format!("`{part}`: a percentage from 0 to 100"));
            }
            let ppm = (pct * 10_000.0).round() as u32;
            match kind {
                "drop" => {
                    f.drop_request = ppm;
                    f.drop_answer = ppm;
                }
                "drop-request" => f.drop_request = ppm,
                "drop-answer" => f.drop_answer = ppm,
                "dup" => f.duplicate = ppm,
                "reorder" => f.reorder = ppm,
                _ => {
                    return Err(format!(
                        "`{kind}`: no such fault (drop, drop-request, drop-answer, dup, reorder)"
                    ))
                }
            }
        }
        Ok(f)
    }
}

impl fmt::Display for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pct = |ppm: u32| f64::from(ppm) / 10_000.0;
        write!(
            f,
            "drop-request={}%,drop-answer={}%,dup={}%,reorder={}%",
            pct(self.drop_request),
            pct(self.drop_answer),
            pct(self.duplicate),
            pct(self.reorder)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_percentages() {
        let f: Faults = "drop=1,dup=0.5%".parse().expect("valid");
        assert_eq!(
            f,
            Faults {
                drop_request: 10_000,
                drop_answer: 10_000,
                duplicate: 5_000,
                reorder: 0,
            }
        );
        assert!("drop=101".parse::<Faults>().is_err());
        assert!("lose=1".parse::<Faults>().is_err());
        assert!("drop".parse::<Faults>().is_err());
    }

    #[test]
    fn hits_about_as_often_as_asked() {
        let f: Faults = "drop-request=10".parse().expect("valid");
        let n = (0..100_000).filter(|_| f.drops_request()).count();
        assert!((8_000..12_000).contains(&n), "{n} of 100000 at 10 %");
        assert!(!(0..10_000).any(|_| f.drops_answer() || f.duplicates()));
        // Per packet: one of 10 lost in about 1 - 0.9^10 = 65 %.
        let n = (0..10_000).filter(|_| f.request_gap(10).is_some()).count();
        assert!((6_000..7_000).contains(&n), "{n} of 10000 at 10 %");
        assert_eq!(f.answer_gap(1000), None);
    }

    #[test]
    fn a_reordered_packet_takes_the_one_it_overtook_first() {
        let f: Faults = "reorder=100".parse().expect("valid");
        // Packet 0 is overtaken by 1: 1 is seen, then 0 taken, 1 gone.
        let gap = Gap {
            taken: 1,
            seen_after: true,
        };
        assert_eq!(f.request_gap(4), Some(gap));
        // The last packet has nothing behind it to overtake it.
        assert_eq!(f.request_gap(1), None);
        let f: Faults = "drop-request=100".parse().expect("valid");
        let lost_last = Gap {
            taken: 0,
            seen_after: false,
        };
        assert_eq!(f.request_gap(1), Some(lost_last));
    }
}
