// SPDX-License-Identifier: GPL-2.0
//! Per-device counters: what the device moved (packets and bytes, RNR
//! NAKs, completion errors of each kind), which the guest reads as its port
//! counters (QUERY_COUNTERS, `enum virtio_rdma_counter`), and what guests
//! tried and the device refused (requests the responder dropped, also the
//! guest's; GIDs it would not take, registrations over quota, log lines
//! suppressed: the operator's).
//!
//! The counters belong to the device that did the refusing (a request
//! dropped by a victim's responder is counted on the victim's device),
//! are never reset while the process runs (a device reset does not clear
//! them: they describe the tenant, not its objects), and are logged when a
//! device resets, when its frontend disconnects, and on SIGUSR1.
//!
//! A device in hostile mode (`hostile.rs`) also counts the lies it told;
//! those counters are printed only by such a device. A device of the net
//! personality (`net/`) also counts its Ethernet frames, in the `net_*`
//! counters, printed only by such a device.
//!
//! What a QP bound to a counter set (`counter_sets.rs`) does counts in its
//! set instead of the port counters here: every count of a QP's action
//! goes through [`Stats::of`], which picks the sink.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::abi::VIRTIO_RDMA_NUM_COUNTERS;
use crate::counter_sets::CounterSet;
use crate::ib::*;

/// What is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// Packets of the requests this device sent (a message counts one per
    /// path MTU of payload, at least one; an RDMA READ's with its request),
    /// each time it sent them: after an RNR NAK or its transport timer too.
    SentPkts,
    /// Payload bytes of those requests.
    SentBytes,
    /// Packets of the requests this device's responder took.
    RcvdPkts,
    /// Payload bytes of those requests.
    RcvdBytes,
    /// Requests this device's responder NAK'd for want of a receive.
    RnrNaksSent,
    /// RNR NAKs this device's requests got (each one waits and retries).
    RnrNaksRcvd,
    /// An RC/UC request from a QP other than the responder QP's connected
    /// peer (its destination QPN and GID), dropped.
    NotPeer,
    /// An RC/UC request from the connected peer with a PSN other than the
    /// responder's expected one, dropped.
    BadPsn,
    /// A UD/GSI datagram whose Q_Key differs from the receiving QP's,
    /// dropped.
    BadQkey,
    /// A completion with this status (`IB_WC_*`) written to one of the
    /// device's CQs; `OtherErr` for error statuses not listed.
    LocLenErr,
    #[allow(missing_docs)]
    LocQpOpErr,
    #[allow(missing_docs)]
    LocProtErr,
    #[allow(missing_docs)]
    WrFlushErr,
    #[allow(missing_docs)]
    RemInvReqErr,
    #[allow(missing_docs)]
    RemAccessErr,
    #[allow(missing_docs)]
    RemOpErr,
    #[allow(missing_docs)]
    RetryExcErr,
    #[allow(missing_docs)]
    RnrRetryExcErr,
    #[allow(missing_docs)]
    OtherErr,
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
    /// Net personality: Ethernet frames the guest sent that the switch
    /// took (to a peer, or broadcast).
    NetTxFrames,
    /// Bytes of those frames (Ethernet header and payload).
    NetTxBytes,
    /// Net personality: frames written into the guest's receive queue.
    NetRxFrames,
    /// Bytes of those frames.
    NetRxBytes,
    /// Transmitted chains not forwarded: malformed, a bad header or
    /// length, a spoofed source, over storm control, or no device with
    /// the destination MAC.
    NetTxDropped,
    /// Frames for this device that were not delivered: no receive buffer,
    /// a bad one, or the receive queue not running.
    NetRxDropped,
    /// Transmitted frames whose source MAC was not the device's (also
    /// counted in `net_tx_dropped`).
    NetSpoofed,
    /// Broadcast and multicast frames over the port's storm control
    /// (`net/flood.rs`; also counted in `net_tx_dropped`).
    NetFloodLimited,
    /// Uplink: RoCEv2 packets the RDMA engine put on the wire.
    WireTxPkts,
    /// Uplink: RoCEv2 packets from the wire the RDMA engine took.
    WireRxPkts,
    /// Uplink: RoCEv2 packets the engine could not encode or the link
    /// refused.
    WireTxDropped,
    /// Uplink: RoCEv2 frames from the wire refused: malformed, a bad ICRC,
    /// not to the port's MAC or GIDs, another partition, or a transport
    /// not on the wire.
    WireRxDropped,
    /// Uplink: packets not sent for want of their destination's MAC (no
    /// frame from that IP seen on the link).
    WireNoNeighbour,
    /// Uplink: RC packets sent again (after a NAK, an RNR wait or the
    /// transport timer: something was lost or late on the wire).
    WireResent,
    /// Uplink: RC requests from the wire that were duplicates, answered
    /// again without touching memory.
    WireDuplicates,
}

impl Counter {
    /// The counter of completions with error status `status`, `None` for
    /// success.
    pub fn for_status(status: u8) -> Option<Counter> {
        Some(match status {
            IB_WC_SUCCESS => return None,
            IB_WC_LOC_LEN_ERR => Counter::LocLenErr,
            IB_WC_LOC_QP_OP_ERR => Counter::LocQpOpErr,
            IB_WC_LOC_PROT_ERR => Counter::LocProtErr,
            IB_WC_WR_FLUSH_ERR => Counter::WrFlushErr,
            IB_WC_REM_INV_REQ_ERR => Counter::RemInvReqErr,
            IB_WC_REM_ACCESS_ERR => Counter::RemAccessErr,
            IB_WC_REM_OP_ERR => Counter::RemOpErr,
            IB_WC_RETRY_EXC_ERR => Counter::RetryExcErr,
            IB_WC_RNR_RETRY_EXC_ERR => Counter::RnrRetryExcErr,
            _ => Counter::OtherErr,
        })
    }

    /// Whether this is one of the port counters of QUERY_COUNTERS (the
    /// ones a counter set holds).
    pub fn is_port(self) -> bool {
        (self as usize) < PORT
    }

    /// Whether this counts lies of the hostile mode.
    fn is_hostile(self) -> bool {
        matches!(
            self,
            Counter::HostileCompletions | Counter::HostileHandles | Counter::HostileEvents
        )
    }

    /// Whether this counts the Ethernet of the net personality.
    fn is_net(self) -> bool {
        (self as usize) >= Counter::NetTxFrames as usize
    }
}

const COUNTERS: [(Counter, &str); 40] = [
    (Counter::SentPkts, "sent_pkts"),
    (Counter::SentBytes, "sent_bytes"),
    (Counter::RcvdPkts, "rcvd_pkts"),
    (Counter::RcvdBytes, "rcvd_bytes"),
    (Counter::RnrNaksSent, "rnr_naks_sent"),
    (Counter::RnrNaksRcvd, "rnr_naks_rcvd"),
    (Counter::NotPeer, "dropped_not_peer"),
    (Counter::BadPsn, "dropped_bad_psn"),
    (Counter::BadQkey, "dropped_bad_qkey"),
    (Counter::LocLenErr, "loc_len_err"),
    (Counter::LocQpOpErr, "loc_qp_op_err"),
    (Counter::LocProtErr, "loc_prot_err"),
    (Counter::WrFlushErr, "wr_flush_err"),
    (Counter::RemInvReqErr, "rem_inv_req_err"),
    (Counter::RemAccessErr, "rem_access_err"),
    (Counter::RemOpErr, "rem_op_err"),
    (Counter::RetryExcErr, "retry_exc_err"),
    (Counter::RnrRetryExcErr, "rnr_retry_exc_err"),
    (Counter::OtherErr, "other_err"),
    (Counter::GidRefused, "gid_refused"),
    (Counter::OverQuota, "over_quota"),
    (Counter::LogsSuppressed, "logs_suppressed"),
    (Counter::HostileCompletions, "hostile_completions"),
    (Counter::HostileHandles, "hostile_handles"),
    (Counter::HostileEvents, "hostile_events"),
    (Counter::NetTxFrames, "net_tx_frames"),
    (Counter::NetTxBytes, "net_tx_bytes"),
    (Counter::NetRxFrames, "net_rx_frames"),
    (Counter::NetRxBytes, "net_rx_bytes"),
    (Counter::NetTxDropped, "net_tx_dropped"),
    (Counter::NetRxDropped, "net_rx_dropped"),
    (Counter::NetSpoofed, "net_spoofed"),
    (Counter::NetFloodLimited, "net_flood_limited"),
    (Counter::WireTxPkts, "wire_tx_pkts"),
    (Counter::WireRxPkts, "wire_rx_pkts"),
    (Counter::WireTxDropped, "wire_tx_dropped"),
    (Counter::WireRxDropped, "wire_rx_dropped"),
    (Counter::WireNoNeighbour, "wire_no_neighbour"),
    (Counter::WireResent, "wire_resent"),
    (Counter::WireDuplicates, "wire_duplicates"),
];

/// The port counters of QUERY_COUNTERS, in `enum virtio_rdma_counter`
/// order: the first `VIRTIO_RDMA_NUM_COUNTERS` of [`COUNTERS`].
const PORT: usize = VIRTIO_RDMA_NUM_COUNTERS;

/// The counters of one device.
#[derive(Debug)]
pub struct Stats {
    values: [AtomicU64; COUNTERS.len()],
    /// The device is hostile: print the hostile-mode counters too.
    hostile: bool,
    /// The device is the net personality: print the net counters too. Set
    /// after creation ([`Stats::show_net`]): the counters are made with the
    /// control engine, which does not know the personality.
    net: AtomicBool,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            values: std::array::from_fn(|_| AtomicU64::new(0)),
            hostile: false,
            net: AtomicBool::new(false),
        }
    }
}

/// Every counter, named as the log names it, in the log's order.
pub fn counters() -> impl Iterator<Item = (Counter, &'static str)> {
    COUNTERS.iter().copied()
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

    /// Prints the net counters too (a device of the net personality).
    pub fn show_net(&self) {
        self.net.store(true, Ordering::Relaxed);
    }

    fn slot(c: Counter) -> usize {
        // COUNTERS lists the variants in declaration order.
        c as usize
    }

    /// Adds `n` to counter `c`.
    pub fn add(&self, c: Counter, n: u64) {
        self.values[Self::slot(c)].fetch_add(n, Ordering::Relaxed);
    }

    /// Adds one to counter `c`.
    pub fn inc(&self, c: Counter) {
        self.add(c, 1);
    }

    /// Where a QP's counts go: `set`, the counter set the QP is bound to,
    /// for the port counters, and these device counters for the rest (and
    /// for everything when `set` is `None`).
    pub fn of<'a>(&'a self, set: Option<&'a CounterSet>) -> Tally<'a> {
        Tally { stats: self, set }
    }

    /// The value of counter `c`.
    pub fn get(&self, c: Counter) -> u64 {
        self.values[Self::slot(c)].load(Ordering::Relaxed)
    }

    /// The port counters as QUERY_COUNTERS returns them.
    pub fn port_counters(&self) -> [u64; PORT] {
        std::array::from_fn(|i| self.values[i].load(Ordering::Relaxed))
    }
}

/// The counters a QP's action counts in ([`Stats::of`]): the port
/// counters of its counter set if it is bound to one, else the device's.
#[derive(Clone, Copy, Debug)]
pub struct Tally<'a> {
    stats: &'a Stats,
    set: Option<&'a CounterSet>,
}

impl Tally<'_> {
    /// Adds `n` to counter `c`.
    pub fn add(self, c: Counter, n: u64) {
        match self.set {
            Some(set) if c.is_port() => set.add(c, n),
            _ => self.stats.add(c, n),
        }
    }

    /// Adds one to counter `c`.
    pub fn inc(self, c: Counter) {
        self.add(c, 1);
    }

    /// Counts a message of `pkts` packets and `bytes` payload bytes the QP
    /// sent.
    pub fn sent(self, pkts: u32, bytes: u64) {
        self.add(Counter::SentPkts, pkts.into());
        self.add(Counter::SentBytes, bytes);
    }

    /// Counts a message of `pkts` packets and `bytes` payload bytes the
    /// QP's responder took.
    pub fn rcvd(self, pkts: u32, bytes: u64) {
        self.add(Counter::RcvdPkts, pkts.into());
        self.add(Counter::RcvdBytes, bytes);
    }
}

impl fmt::Display for Stats {
    /// `name=value` pairs, space separated (the hostile-mode ones only for
    /// a hostile device, the net ones only for the net personality).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let net = self.net.load(Ordering::Relaxed);
        let shown = COUNTERS
            .iter()
            .filter(|(c, _)| self.hostile || !c.is_hostile())
            .filter(|(c, _)| net || !c.is_net());
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
    use crate::abi::*;

    #[test]
    fn counters_are_listed_in_order() {
        for (i, (c, _)) in COUNTERS.iter().enumerate() {
            assert_eq!(*c as usize, i, "{c:?}");
        }
        // The guest's port counters, as `enum virtio_rdma_counter` numbers them.
        let port: Vec<_> = COUNTERS[..PORT].iter().map(|(_, name)| *name).collect();
        assert_eq!(port[VIRTIO_RDMA_CNT_SENT_PKTS], "sent_pkts");
        assert_eq!(port[VIRTIO_RDMA_CNT_RCVD_BYTES], "rcvd_bytes");
        assert_eq!(port[VIRTIO_RDMA_CNT_RNR_NAKS_RCVD], "rnr_naks_rcvd");
        assert_eq!(port[VIRTIO_RDMA_CNT_DROPPED_BAD_QKEY], "dropped_bad_qkey");
        assert_eq!(port[VIRTIO_RDMA_CNT_LOC_LEN_ERR], "loc_len_err");
        assert_eq!(port[VIRTIO_RDMA_CNT_REM_ACCESS_ERR], "rem_access_err");
        assert_eq!(port[VIRTIO_RDMA_CNT_OTHER_ERR], "other_err");
        assert_eq!(port.len(), VIRTIO_RDMA_CNT_OTHER_ERR + 1);
        let s = Stats::default();
        s.add(Counter::RcvdBytes, 7);
        s.inc(Counter::for_status(IB_WC_REM_ACCESS_ERR).unwrap());
        s.inc(Counter::for_status(IB_WC_GENERAL_ERR).unwrap());
        s.inc(Counter::GidRefused);
        let v = s.port_counters();
        assert_eq!(v[VIRTIO_RDMA_CNT_RCVD_BYTES], 7);
        assert_eq!(v[VIRTIO_RDMA_CNT_REM_ACCESS_ERR], 1);
        assert_eq!(v[VIRTIO_RDMA_CNT_OTHER_ERR], 1);
        assert_eq!(v.iter().sum::<u64>(), 9);
        assert_eq!(Counter::for_status(IB_WC_SUCCESS), None);
    }

    #[test]
    fn a_bound_qp_counts_port_counters_in_its_set_only() {
        let s = Stats::default();
        let set = CounterSet::new(1);
        let bound = s.of(Some(&set));
        bound.sent(2, 100);
        bound.inc(Counter::WrFlushErr);
        // The operator's counters stay the device's.
        bound.inc(Counter::OverQuota);
        s.of(None).rcvd(1, 8);
        let v = set.values();
        assert_eq!(v[VIRTIO_RDMA_CNT_SENT_PKTS], 2);
        assert_eq!(v[VIRTIO_RDMA_CNT_SENT_BYTES], 100);
        assert_eq!(v[VIRTIO_RDMA_CNT_WR_FLUSH_ERR], 1);
        assert_eq!(v.iter().sum::<u64>(), 103);
        let p = s.port_counters();
        assert_eq!(p[VIRTIO_RDMA_CNT_RCVD_BYTES], 8);
        assert_eq!(p.iter().sum::<u64>(), 9, "{p:?}");
        assert_eq!(s.get(Counter::OverQuota), 1);
        assert!(Counter::OtherErr.is_port() && !Counter::GidRefused.is_port());
    }

    #[test]
    fn counts_and_prints() {
        let s = Stats::default();
        s.inc(Counter::NotPeer);
        s.add(Counter::LogsSuppressed, 5);
        assert_eq!(s.get(Counter::NotPeer), 1);
        assert_eq!(s.get(Counter::BadPsn), 0);
        let text = s.to_string();
        assert!(
            text.contains(" dropped_not_peer=1 dropped_bad_psn=0 "),
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
        let n = Stats::new(false);
        n.show_net();
        n.add(Counter::NetRxBytes, 60);
        let text = n.to_string();
        assert!(
            text.ends_with(
                "logs_suppressed=0 net_tx_frames=0 net_tx_bytes=0 net_rx_frames=0 \
                 net_rx_bytes=60 net_tx_dropped=0 net_rx_dropped=0 net_spoofed=0 \
                 net_flood_limited=0 wire_tx_pkts=0 wire_rx_pkts=0 wire_tx_dropped=0 wire_rx_dropped=0 \
                 wire_no_neighbour=0 wire_resent=0 wire_duplicates=0"
            ),
            "{text}"
        );
    }
}
