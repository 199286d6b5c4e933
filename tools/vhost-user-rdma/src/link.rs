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
//! then a duplicate, which is what it costs go-back-N.

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

    /// The first of `packets` request packets the link loses, if any.
    pub fn first_request_lost(&self, packets: u32) -> Option<u32> {
        Self::first_hit(self.drop_request, packets)
    }

    /// The first of `packets` answer packets (a READ's responses) the
    /// link loses, if any.
    pub fn first_answer_lost(&self, packets: u32) -> Option<u32> {
        Self::first_hit(self.drop_answer, packets)
    }

    fn first_hit(ppm: u32, packets: u32) -> Option<u32> {
        if ppm == 0 {
            return None;
        }
        (0..packets).find(|_| Self::hit(ppm))
    }

    /// Whether this request arrives twice.
    pub fn duplicates(&self) -> bool {
        Self::hit(self.duplicate)
    }
}

/// Parses `KIND=PERCENT[,KIND=PERCENT...]`; kinds `drop` (requests and
/// answers alike), `drop-request`, `drop-answer`, `dup`.
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
                _ => {
                    return Err(format!(
                        "`{kind}`: no such fault (drop, drop-request, drop-answer, dup)"
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
            "drop-request={}%,drop-answer={}%,dup={}%",
            pct(self.drop_request),
            pct(self.drop_answer),
            pct(self.duplicate)
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
                duplicate: 5_000
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
        // Per packet: the first of 10 lost in about 1 - 0.9^10 = 65 %.
        let n = (0..10_000)
            .filter(|_| f.first_request_lost(10).is_some())
            .count();
        assert!((6_000..7_000).contains(&n), "{n} of 10000 at 10 %");
        assert_eq!(f.first_answer_lost(1000), None);
    }
}
