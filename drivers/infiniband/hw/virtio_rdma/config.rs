// SPDX-License-Identifier: GPL-2.0

//! Reading and validating the device's config space, and the virtqueue layout it implies.
//!
//! The device reports its limits in config space. The driver accepts any values the protocol
//! allows and refuses (fails probe with `EINVAL` and a message naming the field) anything that
//! it cannot honour or that is inconsistent; it never trusts a value it has not checked.

use kernel::fmt;

use kernel::{device, prelude::*, virtio};

use crate::abi::{self, Config};

/// Supported page sizes must include 4 KiB (the page size of memory registrations).
const PAGE_SIZE_4K: u64 = 1 << 12;

/// What is wrong with a config space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConfigError {
    /// `phys_port_cnt` is not 1.
    PortCount(u32),
    /// `max_cq` is outside `1..=VIRTIO_RDMA_MAX_CQ_LIMIT`.
    MaxCq(u32),
    /// `max_qp` is outside `1..=VIRTIO_RDMA_MAX_QP_LIMIT`.
    MaxQp(u32),
    /// `page_size_cap` lacks 4 KiB.
    PageSize(u64),
    /// A limit that must be at least 1 is 0.
    Zero(&'static str),
    /// `atomic_cap` is not an `enum virtio_rdma_atomic_cap` value.
    AtomicCap(u8),
    /// `mac` is not a unicast Ethernet address (zero, or the multicast bit set).
    Mac([u8; 6]),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::PortCount(n) => write!(f, "phys_port_cnt is {n}, the driver supports 1"),
            Self::MaxCq(n) => write!(f, "max_cq is {n}, must be 1..={}", abi::MAX_CQ_LIMIT),
            Self::MaxQp(n) => write!(f, "max_qp is {n}, must be 1..={}", abi::MAX_QP_LIMIT),
            Self::PageSize(cap) => write!(f, "page_size_cap {cap:#x} lacks 4 KiB"),
            Self::Zero(field) => write!(f, "{field} is 0"),
            Self::AtomicCap(v) => write!(f, "atomic_cap is {v}, must be 0..={}", abi::ATOMIC_GLOB),
            Self::Mac(m) => write!(
                f,
                "mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x} is not a unicast address",
                m[0], m[1], m[2], m[3], m[4], m[5]
            ),
        }
    }
}

/// The virtqueue layout of a device: the control queue, one queue per CQ, then an (SQ, RQ) pair
/// per QP, then the event queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueueLayout {
    max_cq: u32,
    max_qp: u32,
}

impl QueueLayout {
    /// The layout for `max_cq` CQs and `max_qp` QPs; `None` if either is out of the protocol's
    /// range.
    pub(crate) fn new(max_cq: u32, max_qp: u32) -> Option<Self> {
        if !(1..=abi::MAX_CQ_LIMIT).contains(&max_cq) || !(1..=abi::MAX_QP_LIMIT).contains(&max_qp)
        {
            return None;
        }
        Some(Self { max_cq, max_qp })
    }

    /// The number of CQs.
    pub(crate) fn max_cq(&self) -> u32 {
        self.max_cq
    }

    /// The number of QPs (QP numbers `0..max_qp`).
    pub(crate) fn max_qp(&self) -> u32 {
        self.max_qp
    }

    /// Number of virtqueues: `2 + max_cq + 2 * max_qp` (at most 49154, no overflow).
    pub(crate) fn num_queues(&self) -> u32 {
        self.event() + 1
    }

    /// Index of the event queue (`VIRTIO_RDMA_EVENT_VQ`), the last one.
    pub(crate) fn event(&self) -> u32 {
        1 + self.max_cq + 2 * self.max_qp
    }

    /// Index of the control queue (`VIRTIO_RDMA_CTRL_VQ`).
    #[cfg_attr(not(CONFIG_KUNIT), expect(dead_code))]
    pub(crate) fn ctrl(&self) -> u32 {
        abi::CTRL_VQ
    }

    /// Index of CQ `cqn`'s queue (`VIRTIO_RDMA_CQ_VQ`), `None` if there is no such CQ.
    #[cfg_attr(not(CONFIG_KUNIT), expect(dead_code))]
    pub(crate) fn cq(&self, cqn: u32) -> Option<u32> {
        (cqn < self.max_cq).then(|| 1 + cqn)
    }

    /// Index of QP `qpn`'s send queue (`VIRTIO_RDMA_SQ_VQ`), `None` if there is no such QP.
    #[cfg_attr(not(CONFIG_KUNIT), expect(dead_code))]
    pub(crate) fn sq(&self, qpn: u32) -> Option<u32> {
        (qpn < self.max_qp).then(|| 1 + self.max_cq + 2 * qpn)
    }

    /// Index of QP `qpn`'s receive queue (`VIRTIO_RDMA_RQ_VQ`), `None` if there is no such QP.
    #[cfg_attr(not(CONFIG_KUNIT), expect(dead_code))]
    pub(crate) fn rq(&self, qpn: u32) -> Option<u32> {
        (qpn < self.max_qp).then(|| 2 + self.max_cq + 2 * qpn)
    }

    /// What queue `index` is.
    pub(crate) fn kind(&self, index: u32) -> Option<QueueKind> {
        let cq_end = 1 + self.max_cq;
        match index {
            0 => Some(QueueKind::Ctrl),
            i if i < cq_end => Some(QueueKind::Cq(i - 1)),
            i if i == self.event() => Some(QueueKind::Event),
            i if i < self.event() => {
                let qpn = (i - cq_end) / 2;
                Some(if (i - cq_end) % 2 == 0 {
                    QueueKind::Sq(qpn)
                } else {
                    QueueKind::Rq(qpn)
                })
            }
            _ => None,
        }
    }
}

/// The role of a virtqueue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueKind {
    /// The control queue.
    Ctrl,
    /// The queue of a CQ.
    Cq(u32),
    /// The send queue of a QP.
    Sq(u32),
    /// The receive queue of a QP.
    Rq(u32),
    /// The event queue.
    Event,
}

/// A validated config space.
#[derive(Clone, Copy)]
pub(crate) struct DeviceConfig {
    /// The raw fields (all checked by [`validate`]).
    pub(crate) raw: Config,
    /// The virtqueue layout they imply.
    pub(crate) layout: QueueLayout,
}

/// Checks a config space; pure, so that it can be unit-tested.
pub(crate) fn validate(raw: &Config) -> Result<DeviceConfig, ConfigError> {
    let ports = raw.phys_port_cnt.get();
    if ports != 1 {
        return Err(ConfigError::PortCount(ports));
    }
    let max_cq = raw.max_cq.get();
    if !(1..=abi::MAX_CQ_LIMIT).contains(&max_cq) {
        return Err(ConfigError::MaxCq(max_cq));
    }
    let max_qp = raw.max_qp.get();
    if !(1..=abi::MAX_QP_LIMIT).contains(&max_qp) {
        return Err(ConfigError::MaxQp(max_qp));
    }
    let cap = raw.page_size_cap.get();
    if cap & PAGE_SIZE_4K == 0 {
        return Err(ConfigError::PageSize(cap));
    }
    for (name, value) in [
        ("max_qp_wr", raw.max_qp_wr.get()),
        ("max_cqe", raw.max_cqe.get()),
        ("max_send_sge", raw.max_send_sge.get()),
        ("max_recv_sge", raw.max_recv_sge.get()),
        ("max_pd", raw.max_pd.get()),
        ("max_mr", raw.max_mr.get()),
    ] {
        if value == 0 {
            return Err(ConfigError::Zero(name));
        }
    }
    if raw.max_mr_size.get() == 0 {
        return Err(ConfigError::Zero("max_mr_size"));
    }
    if raw.max_pkeys.get() == 0 {
        return Err(ConfigError::Zero("max_pkeys"));
    }
    if raw.atomic_cap > abi::ATOMIC_GLOB {
        return Err(ConfigError::AtomicCap(raw.atomic_cap));
    }
    // The MAC names the paired Ethernet function (the RoCE netdev), found by its address.
    if raw.mac == [0; 6] || raw.mac[0] & 1 != 0 {
        return Err(ConfigError::Mac(raw.mac));
    }
    let layout = QueueLayout::new(max_cq, max_qp).ok_or(ConfigError::MaxCq(max_cq))?;
    Ok(DeviceConfig { raw: *raw, layout })
}

/// Reads and validates the config space of `dev`; a bad config fails with `EINVAL` and says why.
pub(crate) fn read(dev: &virtio::Device<device::Bound>) -> Result<DeviceConfig> {
    let raw: Config = dev.config_read(0)?;
    validate(&raw).map_err(|e| {
        dev_err!(dev, "unusable config space: {}\n", e);
        EINVAL
    })
}

#[kunit_tests(virtio_rdma_config)]
mod tests {
    use super::*;
    use zerocopy::FromZeros;

    /// The config the reference backend reports (16 QPs, 32 CQs).
    fn good() -> Config {
        let mut c = Config::new_zeroed();
        c.phys_port_cnt.set(1);
        c.max_cq.set(32);
        c.max_qp.set(16);
        c.page_size_cap.set(0x1000);
        c.mac = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
        c.max_qp_wr.set(1024);
        c.max_cqe.set(1024);
        c.max_send_sge.set(32);
        c.max_recv_sge.set(32);
        c.max_pd.set(65536);
        c.max_mr.set(65536);
        c.max_mr_size.set(1 << 32);
        c.max_pkeys.set(1);
        c
    }

    #[test]
    fn accepts_reference_config() {
        let cfg = validate(&good());
        assert!(cfg.is_ok());
        if let Ok(cfg) = cfg {
            assert_eq!(cfg.layout.num_queues(), 66);
        }
    }

    #[test]
    fn accepts_smallest_and_largest_limits() {
        let mut c = good();
        c.max_cq.set(1);
        c.max_qp.set(1);
        assert!(validate(&c).is_ok());
        c.max_cq.set(16384);
        c.max_qp.set(16384);
        assert!(validate(&c).is_ok());
        c.page_size_cap.set(0xffff_f000);
        assert!(validate(&c).is_ok());
    }

    #[test]
    fn rejects_bad_port_count() {
        let mut c = good();
        c.phys_port_cnt.set(0);
        assert_eq!(validate(&c).err(), Some(ConfigError::PortCount(0)));
        c.phys_port_cnt.set(2);
        assert_eq!(validate(&c).err(), Some(ConfigError::PortCount(2)));
    }

    #[test]
    fn rejects_out_of_range_cq_qp() {
        let mut c = good();
        c.max_cq.set(0);
        assert_eq!(validate(&c).err(), Some(ConfigError::MaxCq(0)));
        c.max_cq.set(16385);
        assert_eq!(validate(&c).err(), Some(ConfigError::MaxCq(16385)));
        c.max_cq.set(u32::MAX);
        assert_eq!(validate(&c).err(), Some(ConfigError::MaxCq(u32::MAX)));
        let mut c = good();
        c.max_qp.set(0);
        assert_eq!(validate(&c).err(), Some(ConfigError::MaxQp(0)));
        c.max_qp.set(u32::MAX);
        assert_eq!(validate(&c).err(), Some(ConfigError::MaxQp(u32::MAX)));
    }

    #[test]
    fn rejects_missing_4k_pages() {
        let mut c = good();
        c.page_size_cap.set(0x2000);
        assert_eq!(validate(&c).err(), Some(ConfigError::PageSize(0x2000)));
        c.page_size_cap.set(0);
        assert_eq!(validate(&c).err(), Some(ConfigError::PageSize(0)));
    }

    #[test]
    fn rejects_zero_limits_and_bad_atomic_cap() {
        let mut c = good();
        c.max_qp_wr.set(0);
        assert_eq!(validate(&c).err(), Some(ConfigError::Zero("max_qp_wr")));
        let mut c = good();
        c.max_pd.set(0);
        assert_eq!(validate(&c).err(), Some(ConfigError::Zero("max_pd")));
        let mut c = good();
        c.atomic_cap = 3;
        assert_eq!(validate(&c).err(), Some(ConfigError::AtomicCap(3)));
        let mut c = good();
        c.mac = [0; 6];
        assert_eq!(validate(&c).err(), Some(ConfigError::Mac([0; 6])));
        c.mac = [0x01, 0, 0x5e, 0, 0, 1];
        assert_eq!(
            validate(&c).err(),
            Some(ConfigError::Mac([0x01, 0, 0x5e, 0, 0, 1]))
        );
        // An all-zero config space (e.g. a device that reports nothing) is refused, not trusted.
        assert!(validate(&Config::new_zeroed()).is_err());
    }

    #[test]
    fn queue_layout_matches_the_header() {
        let l = QueueLayout::new(32, 16);
        assert!(l.is_some());
        let Some(l) = l else { return };
        assert_eq!(l.ctrl(), 0);
        assert_eq!(l.cq(0), Some(1));
        assert_eq!(l.cq(31), Some(32));
        assert_eq!(l.cq(32), None);
        assert_eq!(l.sq(0), Some(33));
        assert_eq!(l.rq(0), Some(34));
        assert_eq!(l.sq(15), Some(63));
        assert_eq!(l.rq(15), Some(64));
        assert_eq!(l.sq(16), None);
        assert_eq!(l.event(), 65);
        assert_eq!(l.num_queues(), 66);
        assert_eq!(l.kind(0), Some(QueueKind::Ctrl));
        assert_eq!(l.kind(1), Some(QueueKind::Cq(0)));
        assert_eq!(l.kind(32), Some(QueueKind::Cq(31)));
        assert_eq!(l.kind(33), Some(QueueKind::Sq(0)));
        assert_eq!(l.kind(34), Some(QueueKind::Rq(0)));
        assert_eq!(l.kind(64), Some(QueueKind::Rq(15)));
        assert_eq!(l.kind(65), Some(QueueKind::Event));
        assert_eq!(l.kind(66), None);
    }

    #[test]
    fn queue_layout_limits() {
        assert!(QueueLayout::new(0, 1).is_none());
        assert!(QueueLayout::new(1, 0).is_none());
        assert!(QueueLayout::new(16385, 1).is_none());
        let l = QueueLayout::new(1, 1);
        assert_eq!(l.map(|l| l.num_queues()), Some(5));
        assert_eq!(l.and_then(|l| l.kind(3)), Some(QueueKind::Rq(0)));
        assert_eq!(l.and_then(|l| l.kind(4)), Some(QueueKind::Event));
        let l = QueueLayout::new(16384, 16384);
        assert_eq!(l.map(|l| l.num_queues()), Some(49154));
        assert_eq!(l.and_then(|l| l.rq(16383)), Some(49152));
        assert_eq!(l.and_then(|l| l.kind(49152)), Some(QueueKind::Rq(16383)));
        assert_eq!(l.and_then(|l| l.kind(49153)), Some(QueueKind::Event));
    }
}
