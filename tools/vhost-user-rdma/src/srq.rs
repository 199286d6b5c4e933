// SPDX-License-Identifier: GPL-2.0
//! Shared receive queues (`VIRTIO_RDMA_F_RINGS`): one work ring of
//! receives in guest memory that serves every QP created with its number.
//!
//! A QP with an SRQ has no RQ of its own: a message for it takes the SRQ's
//! next receive, whose lkeys are checked against the SRQ's PD (the receive
//! is the SRQ owner's, whichever QP takes it), and completes on the QP's
//! recv CQ naming the QP. The SRQ's limit, once armed, fires one
//! `SRQ_LIMIT_REACHED` event when a take leaves fewer receives than it,
//! and disarms. An SRQ lives while QPs were created with it: its PD and
//! size are fixed for its life, so a QP keeps a copy ([`SrqLink`]).
//!
//! An XRC SRQ (`xrcd.rs`) is one of an XRC domain: no QP is created with
//! it; the target QPs of its domain take its receives for the messages
//! that name it, and complete them on its own CQ.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::ring::WorkRing;
use crate::wqe;
use crate::xrcd::XrcSrq;

/// One shared receive queue.
#[derive(Debug)]
pub struct Srq {
    /// Its receives, in guest memory.
    pub ring: Arc<WorkRing>,
    /// Protection domain of its receives' lkeys.
    pub pdn: u32,
    /// Receives it holds.
    pub max_wr: u32,
    /// SGEs of each receive.
    pub max_sge: u32,
    /// Armed limit; 0: not armed.
    pub limit: u32,
    /// QPs created with it (it cannot go before them).
    pub qps: u32,
    /// The ring belongs to a process (`VIRTIO_RDMA_SRQ_F_USER`).
    pub user: bool,
    /// Its domain and CQ, if it is an XRC SRQ.
    pub xrc: Option<XrcSrq>,
}

/// What a QP keeps of its SRQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqLink {
    /// The SRQ's number.
    pub srqn: u32,
    /// The SRQ's PD: the one its receives' lkeys are checked against.
    pub pdn: u32,
}

/// Why a request is refused: a message for the guest's log line.
pub type Refusal = &'static str;

/// Checks the numbers of a CREATE_SRQ: `max_wr` in `1..=caps.0` and at
/// most `depth`, `max_sge` at most `caps.1`, `limit` 0 or below `max_wr`.
pub fn check_create(
    max_wr: u32,
    max_sge: u32,
    limit: u32,
    depth: u32,
    caps: (u32, u32),
) -> Result<(), Refusal> {
    if max_wr == 0 || max_wr > caps.0 {
        return Err("max_wr is not in 1..=max_srq_wr");
    }
    if max_wr > depth {
        return Err("max_wr exceeds the ring's depth");
    }
    if max_sge > caps.1 {
        return Err("max_sge exceeds max_srq_sge");
    }
    check_limit(limit, max_wr)
}

/// A limit for an SRQ of `max_wr` receives: 0 (disarmed) or below it.
pub fn check_limit(limit: u32, max_wr: u32) -> Result<(), Refusal> {
    if limit >= max_wr && limit != 0 {
        return Err("srq_limit is not below max_wr");
    }
    Ok(())
}

/// Bytes of a slot holding a receive of `max_sge` SGEs.
pub fn stride_for(max_sge: u32) -> u32 {
    (wqe::RQ_HDR_LEN as u32).saturating_add(max_sge.saturating_mul(wqe::SGE_LEN as u32))
}

impl Srq {
    /// After a receive was taken, `left` remaining: whether the armed limit
    /// fires (it then disarms, so it fires once per arming).
    pub fn took(&mut self, left: u32) -> bool {
        if self.limit != 0 && left < self.limit {
            self.limit = 0;
            return true;
        }
        false
    }

    /// What a QP created with it keeps, as SRQ `srqn`.
    pub fn link(&self, srqn: u32) -> SrqLink {
        SrqLink {
            srqn,
            pdn: self.pdn,
        }
    }
}

/// The SRQs of a device, numbered `1..=max`. Only live SRQs are stored:
/// the ring poller walks them on every pass.
#[derive(Debug)]
pub struct SrqTable {
    srqs: BTreeMap<u32, Srq>,
    max: u32,
    /// The last number handed out (0: none yet).
    last: u32,
}

impl SrqTable {
    /// An empty table of `max` SRQs.
    pub fn new(max: u32) -> Self {
        SrqTable {
            srqs: BTreeMap::new(),
            max,
            last: 0,
        }
    }

    /// Adds `srq` under the first free number after the last handed out,
    /// going round (as ring QP numbers, `State::free_ring_qpn`); `None` if
    /// none is free.
    pub fn insert(&mut self, srq: Srq) -> Option<u32> {
        let after = self.last.min(self.max);
        let n = (after + 1..=self.max)
            .chain(1..=after)
            .find(|n| !self.srqs.contains_key(n))?;
        self.srqs.insert(n, srq);
        self.last = n;
        Some(n)
    }

    /// SRQ `srqn`.
    pub fn get(&self, srqn: u32) -> Option<&Srq> {
        self.srqs.get(&srqn)
    }

    /// SRQ `srqn`, mutable.
    pub fn get_mut(&mut self, srqn: u32) -> Option<&mut Srq> {
        self.srqs.get_mut(&srqn)
    }

    /// Takes SRQ `srqn` out.
    pub fn remove(&mut self, srqn: u32) -> Option<Srq> {
        self.srqs.remove(&srqn)
    }

    /// Every SRQ, with its number.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Srq)> {
        self.srqs.iter().map(|(&n, s)| (n, s))
    }

    /// SRQs held.
    pub fn len(&self) -> usize {
        self.srqs.len()
    }

    /// Whether no SRQ is held.
    pub fn is_empty(&self) -> bool {
        self.srqs.is_empty()
    }

    /// Whether an SRQ has its receives in PD `pdn`.
    pub fn uses_pd(&self, pdn: u32) -> bool {
        self.iter().any(|(_, s)| s.pdn == pdn)
    }

    /// Whether an XRC SRQ is of domain `xrcdn`.
    pub fn uses_xrcd(&self, xrcdn: u32) -> bool {
        self.iter()
            .any(|(_, s)| s.xrc.is_some_and(|x| x.xrcdn == xrcdn))
    }

    /// Whether an XRC SRQ reports its receive completions to CQ `cqn`.
    pub fn reports_to(&self, cqn: u32) -> bool {
        self.iter()
            .any(|(_, s)| s.xrc.is_some_and(|x| x.cqn == cqn))
    }
}

/// A small SRQ over a ring in memory of its own, for unit tests here and in
/// `xrcd.rs`.
#[cfg(test)]
pub(crate) fn test_srq(pdn: u32, limit: u32, xrc: Option<XrcSrq>) -> Srq {
    use crate::abi::VirtioRdmaRing;
    use crate::ring::RingMap;
    use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

    let mem = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), 0x10000)]).expect("memory");
    mem.write_obj(0x1000u64, GuestAddress(0)).expect("table");
    let ring = VirtioRdmaRing {
        pages: 0.into(),
        npages: 1.into(),
        depth: 4.into(),
        stride: 64.into(),
        reserved: 0.into(),
    };
    let map = RingMap::load(&mem, &ring, 4, 64).expect("ring");
    Srq {
        ring: Arc::new(WorkRing::new(map)),
        pdn,
        max_wr: 4,
        max_sge: 2,
        limit,
        qps: 0,
        user: false,
        xrc,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn srq(pdn: u32, limit: u32) -> Srq {
        test_srq(pdn, limit, None)
    }

    #[test]
    fn create_and_limit_numbers_are_checked() {
        let caps = (16, 4);
        assert_eq!(check_create(4, 2, 3, 4, caps), Ok(()));
        assert_eq!(check_create(4, 0, 0, 8, caps), Ok(()), "no SGE, no limit");
        assert!(check_create(0, 2, 0, 4, caps).is_err(), "no receive");
        assert!(check_create(17, 2, 0, 32, caps).is_err(), "over max_srq_wr");
        assert!(check_create(8, 2, 0, 4, caps).is_err(), "over the depth");
        assert!(check_create(4, 5, 0, 4, caps).is_err(), "over max_srq_sge");
        assert!(check_create(4, 2, 4, 4, caps).is_err(), "limit not below");
        assert_eq!(check_limit(0, 1), Ok(()), "0 disarms");
        assert!(check_limit(1, 1).is_err());
        assert_eq!(stride_for(2), 16 + 2 * 16);
        assert_eq!(stride_for(u32::MAX), u32::MAX, "no overflow");
    }

    #[test]
    fn the_limit_fires_once_per_arming() {
        let mut s = srq(1, 2);
        assert!(!s.took(3), "still at the limit or above");
        assert!(!s.took(2));
        assert!(s.took(1), "below the limit");
        assert_eq!(s.limit, 0, "disarmed");
        assert!(!s.took(0), "once");
        s.limit = 3;
        assert!(s.took(0), "armed again");
        let mut off = srq(1, 0);
        assert!(!off.took(0), "never armed");
    }

    #[test]
    fn numbers_go_round_from_1() {
        let mut t = SrqTable::new(3);
        assert_eq!(t.insert(srq(1, 0)), Some(1));
        assert_eq!(t.insert(srq(1, 0)), Some(2));
        assert!(t.remove(1).is_some() && t.remove(2).is_some());
        // 1 and 2 are free, but 3 comes first, then round to 1.
        assert_eq!(t.insert(srq(1, 0)), Some(3));
        assert_eq!(t.insert(srq(1, 0)), Some(1));
        assert_eq!(t.insert(srq(1, 0)), Some(2));
        assert_eq!(t.insert(srq(1, 0)), None, "full");
        assert!(t.remove(2).is_some());
        assert_eq!(t.insert(srq(1, 0)), Some(2), "the only free one");
    }

    #[test]
    fn numbers_are_from_1_and_bounded() {
        let mut t = SrqTable::new(2);
        assert!(t.is_empty() && t.get(0).is_none());
        assert_eq!(t.insert(srq(1, 0)), Some(1));
        assert_eq!(t.insert(srq(2, 0)), Some(2));
        assert_eq!(t.insert(srq(1, 0)).map(|_| ()), None, "full");
        assert!(t.uses_pd(2) && !t.uses_pd(3));
        assert_eq!(t.remove(1).map(|s| s.pdn), Some(1));
        assert!(t.remove(1).is_none() && t.remove(0).is_none() && t.remove(9).is_none());
        assert_eq!(t.insert(srq(3, 0)), Some(1), "the free one");
        assert_eq!(t.len(), 2);
        assert_eq!(
            t.get(1).map(|s| s.link(1)),
            Some(SrqLink { srqn: 1, pdn: 3 })
        );
        assert!(t.get_mut(0).is_none() && t.get_mut(3).is_none());
    }
}
