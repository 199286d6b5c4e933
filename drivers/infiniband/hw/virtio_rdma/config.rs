// SPDX-License-Identifier: GPL-2.0

//! Reading and validating the device's config space, and the virtqueue layout it implies.
//!
//! The device reports its limits in config space. The driver accepts any values the protocol
//! allows and refuses (fails probe with `EINVAL` and a message naming the field) anything that
//! it cannot honour or that is inconsistent; it never trusts a value it has not checked.

use kernel::fmt;

use kernel::{device, prelude::*, virtio};
use zerocopy::{FromZeros, IntoBytes};

use crate::abi::{self, Config};

/// Supported page sizes must include 4 KiB (the page size of memory registrations).
const PAGE_SIZE_4K: u64 = 1 << 12;

/// Most completion-event virtqueues the driver accepts (and completion vectors it reports).
pub(crate) const MAX_COMP_VQS: u32 = 16;

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
    /// `max_ring_cq` is above `VIRTIO_RDMA_MAX_CQ_LIMIT`.
    MaxRingCq(u32),
    /// `max_ring_qp` is above `VIRTIO_RDMA_MAX_QP_LIMIT`.
    MaxRingQp(u32),
    /// `num_comp_vqs` is outside `1..=MAX_COMP_VQS`.
    CompVqs(u32),
    /// `max_srq` is above `VIRTIO_RDMA_MAX_QP_LIMIT` (no more SRQs than QPs).
    MaxSrq(u32),
    /// `max_xrcd` is above `VIRTIO_RDMA_MAX_QP_LIMIT` (no more domains than QPs).
    MaxXrcd(u32),
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
            Self::MaxRingCq(n) => {
                write!(f, "max_ring_cq is {n}, must be 0..={}", abi::MAX_CQ_LIMIT)
            }
            Self::MaxRingQp(n) => {
                write!(f, "max_ring_qp is {n}, must be 0..={}", abi::MAX_QP_LIMIT)
            }
            Self::CompVqs(n) => write!(f, "num_comp_vqs is {n}, must be 1..={MAX_COMP_VQS}"),
            Self::MaxSrq(n) => write!(f, "max_srq is {n}, must be 0..={}", abi::MAX_QP_LIMIT),
            Self::MaxXrcd(n) => write!(f, "max_xrcd is {n}, must be 0..={}", abi::MAX_QP_LIMIT),
        }
    }
}

/// What a device with queues in guest memory (`VIRTIO_RDMA_F_RINGS`) offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rings {
    /// CQs with rings: CQ numbers `max_cq..max_cq + max_ring_cq`.
    pub(crate) max_ring_cq: u32,
    /// QPs with rings: QP numbers `max_qp..max_qp + max_ring_qp`.
    pub(crate) max_ring_qp: u32,
    /// Completion-event queues.
    pub(crate) num_comp_vqs: u32,
}

impl Rings {
    /// The ring limits `raw` reports, checked.
    fn check(raw: &Config) -> Result<Self, ConfigError> {
        let max_ring_cq = raw.max_ring_cq.get();
        if max_ring_cq > abi::MAX_CQ_LIMIT {
            return Err(ConfigError::MaxRingCq(max_ring_cq));
        }
        let max_ring_qp = raw.max_ring_qp.get();
        if max_ring_qp > abi::MAX_QP_LIMIT {
            return Err(ConfigError::MaxRingQp(max_ring_qp));
        }
        let num_comp_vqs = raw.num_comp_vqs.get();
        if !(1..=MAX_COMP_VQS).contains(&num_comp_vqs) {
            return Err(ConfigError::CompVqs(num_comp_vqs));
        }
        Ok(Self {
            max_ring_cq,
            max_ring_qp,
            num_comp_vqs,
        })
    }
}

/// The virtqueue layout of a device: the control queue, one queue per CQ, then an (SQ, RQ) pair
/// per QP, then the event queue; with rings, then the notification queue and the
/// completion-event queues. Also the ranges of CQ and QP numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueueLayout {
    max_cq: u32,
    max_qp: u32,
    rings: Option<Rings>,
}

impl QueueLayout {
    /// The layout for `max_cq` CQs and `max_qp` QPs; `None` if either is out of the protocol's
    /// range.
    pub(crate) fn new(max_cq: u32, max_qp: u32) -> Option<Self> {
        if !(1..=abi::MAX_CQ_LIMIT).contains(&max_cq) || !(1..=abi::MAX_QP_LIMIT).contains(&max_qp)
        {
            return None;
        }
        Some(Self {
            max_cq,
            max_qp,
            rings: None,
        })
    }

    /// The layout with the queues and numbers of `rings` too; `None` if a count is out of the
    /// range [`Rings`] allows.
    pub(crate) fn with_rings(self, rings: Rings) -> Option<Self> {
        if rings.max_ring_cq > abi::MAX_CQ_LIMIT
            || rings.max_ring_qp > abi::MAX_QP_LIMIT
            || !(1..=MAX_COMP_VQS).contains(&rings.num_comp_vqs)
        {
            return None;
        }
        Some(Self {
            rings: Some(rings),
            ..self
        })
    }

    /// What the device offers of queues in guest memory, if it does.
    pub(crate) fn rings(&self) -> Option<&Rings> {
        self.rings.as_ref()
    }

    /// The number of CQs with a virtqueue (CQ numbers `0..max_cq`).
    pub(crate) fn max_cq(&self) -> u32 {
        self.max_cq
    }

    /// The number of QPs with virtqueues (QP numbers `0..max_qp`).
    pub(crate) fn max_qp(&self) -> u32 {
        self.max_qp
    }

    /// The number of CQs of every kind: CQ numbers are below it (at most 32768, no overflow).
    pub(crate) fn total_cq(&self) -> u32 {
        self.max_cq + self.rings.map_or(0, |r| r.max_ring_cq)
    }

    /// The number of QPs of every kind: QP numbers are below it (at most 32768, no overflow).
    pub(crate) fn total_qp(&self) -> u32 {
        self.max_qp + self.rings.map_or(0, |r| r.max_ring_qp)
    }

    /// How many CQs consumers may have: with rings every CQ has one, so the CQs with rings.
    pub(crate) fn usable_cq(&self) -> u32 {
        self.rings.map_or(self.max_cq, |r| r.max_ring_cq)
    }

    /// How many QPs consumers may have: with rings every QP but the GSI QP has them, so the
    /// QPs with rings and the GSI QP.
    pub(crate) fn usable_qp(&self) -> u32 {
        self.rings
            .map_or(self.max_qp, |r| r.max_ring_qp.saturating_add(1))
    }

    /// Whether `cqn` is the number of a CQ with a ring.
    pub(crate) fn is_ring_cq(&self, cqn: u32) -> bool {
        (self.max_cq..self.total_cq()).contains(&cqn)
    }

    /// Whether `qpn` is the number of a QP with rings.
    pub(crate) fn is_ring_qp(&self, qpn: u32) -> bool {
        (self.max_qp..self.total_qp()).contains(&qpn)
    }

    /// Number of virtqueues: `2 + max_cq + 2 * max_qp`, with rings `1 + num_comp_vqs` more (at
    /// most 49171, no overflow).
    pub(crate) fn num_queues(&self) -> u32 {
        match self.rings {
            None => self.event() + 1,
            Some(r) => self.event() + 2 + r.num_comp_vqs,
        }
    }

    /// Index of the event queue (`VIRTIO_RDMA_EVENT_VQ`).
    pub(crate) fn event(&self) -> u32 {
        1 + self.max_cq + 2 * self.max_qp
    }

    /// Index of the notification queue (`VIRTIO_RDMA_NOTIFY_VQ`), if the device has rings.
    pub(crate) fn notify(&self) -> Option<u32> {
        self.rings.map(|_| self.event() + 1)
    }

    /// Index of completion-event queue `n` (`VIRTIO_RDMA_COMP_VQ`), `None` if there is no such
    /// queue.
    pub(crate) fn comp(&self, n: u32) -> Option<u32> {
        let rings = self.rings?;
        (n < rings.num_comp_vqs).then(|| self.event() + 2 + n)
    }

    /// Index of the control queue (`VIRTIO_RDMA_CTRL_VQ`).
    #[cfg_attr(not(CONFIG_KUNIT), expect(dead_code))]
    pub(crate) fn ctrl(&self) -> u32 {
        abi::CTRL_VQ
    }

    /// Index of CQ `cqn`'s queue (`VIRTIO_RDMA_CQ_VQ`), `None` if there is no such CQ with a
    /// virtqueue.
    pub(crate) fn cq(&self, cqn: u32) -> Option<u32> {
        (cqn < self.max_cq).then(|| 1 + cqn)
    }

    /// Index of QP `qpn`'s send queue (`VIRTIO_RDMA_SQ_VQ`), `None` if there is no such QP with
    /// virtqueues.
    pub(crate) fn sq(&self, qpn: u32) -> Option<u32> {
        (qpn < self.max_qp).then(|| 1 + self.max_cq + 2 * qpn)
    }

    /// Index of QP `qpn`'s receive queue (`VIRTIO_RDMA_RQ_VQ`), `None` if there is no such QP
    /// with virtqueues.
    pub(crate) fn rq(&self, qpn: u32) -> Option<u32> {
        (qpn < self.max_qp).then(|| 2 + self.max_cq + 2 * qpn)
    }

    /// What queue `index` is.
    pub(crate) fn kind(&self, index: u32) -> Option<QueueKind> {
        let cq_end = 1 + self.max_cq;
        let event = self.event();
        match index {
            0 => Some(QueueKind::Ctrl),
            i if i < cq_end => Some(QueueKind::Cq(i - 1)),
            i if i < event => {
                let qpn = (i - cq_end) / 2;
                Some(if (i - cq_end) % 2 == 0 {
                    QueueKind::Sq(qpn)
                } else {
                    QueueKind::Rq(qpn)
                })
            }
            i if i == event => Some(QueueKind::Event),
            i if Some(i) == self.notify() => Some(QueueKind::Notify),
            i if i < self.num_queues() => Some(QueueKind::Comp(i - event - 2)),
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
    /// The notification queue (rings): kicked, never given buffers.
    Notify,
    /// A completion-event queue (rings).
    Comp(u32),
}

/// A validated config space.
#[derive(Clone, Copy)]
pub(crate) struct DeviceConfig {
    /// The raw fields (all checked by [`validate`]; those of `VIRTIO_RDMA_F_RINGS` zero unless
    /// it was negotiated).
    pub(crate) raw: Config,
    /// The virtqueue layout they imply.
    pub(crate) layout: QueueLayout,
}

/// Checks a config space of a device with which `VIRTIO_RDMA_F_RINGS` was negotiated (`rings`)
/// or not (the fields of the feature are then ignored, and zeroed); pure, so that it can be
/// unit-tested.
pub(crate) fn validate(raw: &Config, rings: bool) -> Result<DeviceConfig, ConfigError> {
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
    let mut layout = QueueLayout::new(max_cq, max_qp).ok_or(ConfigError::MaxCq(max_cq))?;
    let mut raw = *raw;
    if rings {
        let r = Rings::check(&raw)?;
        layout = layout
            .with_rings(r)
            .ok_or(ConfigError::CompVqs(r.num_comp_vqs))?;
        check_srq(&raw)?;
    } else {
        raw.max_ring_qp.set(0);
        raw.max_ring_cq.set(0);
        raw.num_comp_vqs.set(0);
        raw.max_srq.set(0);
    }
    if raw.max_srq.get() == 0 {
        // No SRQs: their sizes mean nothing, and XRC (whose receives are SRQs') is not there.
        raw.max_srq_wr.set(0);
        raw.max_srq_sge.set(0);
        raw.max_xrcd.set(0);
    }
    Ok(DeviceConfig { raw, layout })
}

/// Checks the SRQ limits of a device with rings: a device that offers SRQs offers receives in
/// them.
fn check_srq(raw: &Config) -> Result<(), ConfigError> {
    let max_srq = raw.max_srq.get();
    if max_srq > abi::MAX_QP_LIMIT {
        return Err(ConfigError::MaxSrq(max_srq));
    }
    if max_srq > 0 {
        if raw.max_srq_wr.get() == 0 {
            return Err(ConfigError::Zero("max_srq_wr"));
        }
        if raw.max_srq_sge.get() == 0 {
            return Err(ConfigError::Zero("max_srq_sge"));
        }
    }
    let max_xrcd = raw.max_xrcd.get();
    if max_xrcd > abi::MAX_QP_LIMIT {
        return Err(ConfigError::MaxXrcd(max_xrcd));
    }
    Ok(())
}

/// Reads and validates the config space of `dev`; a bad config fails with `EINVAL` and says why.
/// The fields of `VIRTIO_RDMA_F_RINGS` are read only if it was negotiated: a device without it
/// need not have them.
pub(crate) fn read(dev: &virtio::Device<device::Bound>) -> Result<DeviceConfig> {
    const BASE: usize = abi::CONFIG_RINGS_OFFSET;
    let rings = dev.has_feature(abi::F_RINGS);
    let mut raw = Config::new_zeroed();
    let (base, ext) = raw.as_mut_bytes().split_at_mut(BASE);
    base.copy_from_slice(&dev.config_read::<[u8; BASE]>(0)?);
    if rings {
        ext.copy_from_slice(&dev.config_read::<[u8; abi::CONFIG_RINGS_LEN]>(BASE)?);
    }
    validate(&raw, rings).map_err(|e| {
        dev_err!(dev, "unusable config space: {}\n", e);
        EINVAL
    })
}

/// Validates the config a QUERY_DEVICE command answered for the RoCE half of a virtio-net
/// device (which is always in the rings mode), whose layout must be the `num_queues` RoCE queues
/// it has; a bad one fails with `EINVAL` and says why.
pub(crate) fn check_queried(
    dev: &device::Device,
    raw: &Config,
    num_queues: u32,
) -> Result<DeviceConfig> {
    let config = validate(raw, true).map_err(|e| {
        dev_err!(dev, "unusable configuration: {}\n", e);
        EINVAL
    })?;
    let implied = config.layout.num_queues();
    if implied != num_queues {
        dev_err!(
            dev,
            "the configuration implies {} RoCE queues, the device has {}\n",
            implied,
            num_queues
        );
        return Err(EINVAL);
    }
    Ok(config)
}

#[kunit_tests(virtio_rdma_config)]
mod tests {
    use super::*;

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
        let cfg = validate(&good(), false);
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
        assert!(validate(&c, false).is_ok());
        c.max_cq.set(16384);
        c.max_qp.set(16384);
        assert!(validate(&c, false).is_ok());
        c.page_size_cap.set(0xffff_f000);
        assert!(validate(&c, false).is_ok());
    }

    #[test]
    fn rejects_bad_port_count() {
        let mut c = good();
        c.phys_port_cnt.set(0);
        assert_eq!(validate(&c, false).err(), Some(ConfigError::PortCount(0)));
        c.phys_port_cnt.set(2);
        assert_eq!(validate(&c, false).err(), Some(ConfigError::PortCount(2)));
    }

    #[test]
    fn rejects_out_of_range_cq_qp() {
        let mut c = good();
        c.max_cq.set(0);
        assert_eq!(validate(&c, false).err(), Some(ConfigError::MaxCq(0)));
        c.max_cq.set(16385);
        assert_eq!(validate(&c, false).err(), Some(ConfigError::MaxCq(16385)));
        c.max_cq.set(u32::MAX);
        assert_eq!(
            validate(&c, false).err(),
            Some(ConfigError::MaxCq(u32::MAX))
        );
        let mut c = good();
        c.max_qp.set(0);
        assert_eq!(validate(&c, false).err(), Some(ConfigError::MaxQp(0)));
        c.max_qp.set(u32::MAX);
        assert_eq!(
            validate(&c, false).err(),
            Some(ConfigError::MaxQp(u32::MAX))
        );
    }

    #[test]
    fn rejects_missing_4k_pages() {
        let mut c = good();
        c.page_size_cap.set(0x2000);
        assert_eq!(
            validate(&c, false).err(),
            Some(ConfigError::PageSize(0x2000))
        );
        c.page_size_cap.set(0);
        assert_eq!(validate(&c, false).err(), Some(ConfigError::PageSize(0)));
    }

    #[test]
    fn rejects_zero_limits_and_bad_atomic_cap() {
        let mut c = good();
        c.max_qp_wr.set(0);
        assert_eq!(
            validate(&c, false).err(),
            Some(ConfigError::Zero("max_qp_wr"))
        );
        let mut c = good();
        c.max_pd.set(0);
        assert_eq!(validate(&c, false).err(), Some(ConfigError::Zero("max_pd")));
        let mut c = good();
        c.atomic_cap = 3;
        assert_eq!(validate(&c, false).err(), Some(ConfigError::AtomicCap(3)));
        let mut c = good();
        c.mac = [0; 6];
        assert_eq!(validate(&c, false).err(), Some(ConfigError::Mac([0; 6])));
        c.mac = [0x01, 0, 0x5e, 0, 0, 1];
        assert_eq!(
            validate(&c, false).err(),
            Some(ConfigError::Mac([0x01, 0, 0x5e, 0, 0, 1]))
        );
        // An all-zero config space (e.g. a device that reports nothing) is refused, not trusted.
        assert!(validate(&Config::new_zeroed(), false).is_err());
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

    /// The reference config with rings: 8 ring QPs, 16 ring CQs, 2 completion-event queues.
    fn with_rings() -> Config {
        let mut c = good();
        c.max_ring_qp.set(8);
        c.max_ring_cq.set(16);
        c.num_comp_vqs.set(2);
        c
    }

    #[test]
    fn ring_fields_count_only_when_negotiated() {
        // Not negotiated: whatever the fields say is ignored, and zeroed.
        let mut c = with_rings();
        c.num_comp_vqs.set(0);
        c.max_ring_qp.set(u32::MAX);
        let cfg = validate(&c, false);
        assert!(cfg.is_ok());
        if let Ok(cfg) = cfg {
            assert_eq!(cfg.layout.rings(), None);
            assert_eq!(cfg.layout.num_queues(), 66);
            assert_eq!(cfg.raw.max_ring_qp.get(), 0);
            assert_eq!(cfg.layout.total_qp(), 16);
            assert_eq!(cfg.layout.usable_qp(), 16);
            assert_eq!(cfg.layout.usable_cq(), 32);
        }
        // Negotiated: checked.
        assert_eq!(
            validate(&c, true).err(),
            Some(ConfigError::MaxRingQp(u32::MAX))
        );
        let cfg = validate(&with_rings(), true);
        assert!(cfg.is_ok());
        if let Ok(cfg) = cfg {
            assert_eq!(
                cfg.layout.rings(),
                Some(&Rings {
                    max_ring_cq: 16,
                    max_ring_qp: 8,
                    num_comp_vqs: 2
                })
            );
            assert_eq!(cfg.layout.num_queues(), 69);
            assert_eq!(cfg.layout.total_cq(), 48);
            assert_eq!(cfg.layout.total_qp(), 24);
            // Every CQ and QP but the GSI QP has rings.
            assert_eq!(cfg.layout.usable_cq(), 16);
            assert_eq!(cfg.layout.usable_qp(), 9);
        }
    }

    #[test]
    fn srq_limits_are_checked_with_rings_and_ignored_without() {
        let mut c = with_rings();
        c.max_srq.set(64);
        c.max_srq_wr.set(1024);
        c.max_srq_sge.set(4);
        let cfg = validate(&c, true);
        assert!(cfg.is_ok());
        if let Ok(cfg) = cfg {
            assert_eq!(cfg.raw.max_srq.get(), 64);
            assert_eq!(cfg.raw.max_srq_wr.get(), 1024);
        }
        // Without rings there are no SRQs, whatever the fields say.
        let cfg = validate(&c, false);
        assert!(cfg.is_ok());
        if let Ok(cfg) = cfg {
            assert_eq!(cfg.raw.max_srq.get(), 0);
            assert_eq!(cfg.raw.max_srq_wr.get(), 0);
        }
        c.max_xrcd.set(16385);
        assert_eq!(validate(&c, true).err(), Some(ConfigError::MaxXrcd(16385)));
        c.max_xrcd.set(8);
        assert!(validate(&c, true).is_ok_and(|cfg| cfg.raw.max_xrcd.get() == 8));
        // XRC without SRQs (or without rings) is not there.
        assert!(validate(&c, false).is_ok_and(|cfg| cfg.raw.max_xrcd.get() == 0));
        c.max_srq.set(0);
        assert!(validate(&c, true).is_ok_and(|cfg| cfg.raw.max_xrcd.get() == 0));
        c.max_srq.set(16385);
        assert_eq!(validate(&c, true).err(), Some(ConfigError::MaxSrq(16385)));
        c.max_srq.set(1);
        c.max_srq_wr.set(0);
        assert_eq!(
            validate(&c, true).err(),
            Some(ConfigError::Zero("max_srq_wr"))
        );
        c.max_srq_wr.set(1);
        c.max_srq_sge.set(0);
        assert_eq!(
            validate(&c, true).err(),
            Some(ConfigError::Zero("max_srq_sge"))
        );
    }

    #[test]
    fn rejects_bad_ring_limits() {
        let mut c = with_rings();
        c.max_ring_cq.set(16385);
        assert_eq!(
            validate(&c, true).err(),
            Some(ConfigError::MaxRingCq(16385))
        );
        let mut c = with_rings();
        c.max_ring_qp.set(16385);
        assert_eq!(
            validate(&c, true).err(),
            Some(ConfigError::MaxRingQp(16385))
        );
        for n in [0, 17, u32::MAX] {
            let mut c = with_rings();
            c.num_comp_vqs.set(n);
            assert_eq!(validate(&c, true).err(), Some(ConfigError::CompVqs(n)));
        }
        // The largest counts: the sums and the queue count do not overflow.
        let mut c = with_rings();
        c.max_cq.set(16384);
        c.max_qp.set(16384);
        c.max_ring_cq.set(16384);
        c.max_ring_qp.set(16384);
        c.num_comp_vqs.set(16);
        let cfg = validate(&c, true);
        assert!(cfg.is_ok());
        if let Ok(cfg) = cfg {
            assert_eq!(cfg.layout.total_cq(), 32768);
            assert_eq!(cfg.layout.total_qp(), 32768);
            assert_eq!(cfg.layout.num_queues(), 49171);
            assert_eq!(cfg.layout.kind(49154), Some(QueueKind::Notify));
            assert_eq!(cfg.layout.kind(49155), Some(QueueKind::Comp(0)));
            assert_eq!(cfg.layout.kind(49170), Some(QueueKind::Comp(15)));
            assert_eq!(cfg.layout.kind(49171), None);
        }
        // No ring objects at all is consistent (if useless).
        let mut c = with_rings();
        c.max_ring_cq.set(0);
        c.max_ring_qp.set(0);
        assert!(validate(&c, true).is_ok());
    }

    #[test]
    fn ring_queue_layout_matches_the_header() {
        let rings = Rings {
            max_ring_cq: 16,
            max_ring_qp: 8,
            num_comp_vqs: 2,
        };
        let l = QueueLayout::new(32, 16).and_then(|l| l.with_rings(rings));
        assert!(l.is_some());
        let Some(l) = l else { return };
        // VIRTIO_RDMA_EVENT_VQ, VIRTIO_RDMA_NOTIFY_VQ, VIRTIO_RDMA_COMP_VQ of (32, 16).
        assert_eq!(l.event(), 65);
        assert_eq!(l.notify(), Some(66));
        assert_eq!(l.comp(0), Some(67));
        assert_eq!(l.comp(1), Some(68));
        assert_eq!(l.comp(2), None);
        assert_eq!(l.kind(65), Some(QueueKind::Event));
        assert_eq!(l.kind(66), Some(QueueKind::Notify));
        assert_eq!(l.kind(67), Some(QueueKind::Comp(0)));
        assert_eq!(l.kind(68), Some(QueueKind::Comp(1)));
        assert_eq!(l.kind(69), None);
        assert_eq!(l.kind(64), Some(QueueKind::Rq(15)));
        // Ring CQ numbers follow the virtqueue CQs', ring QP numbers the virtqueue QPs'.
        assert!(!l.is_ring_cq(31));
        assert!(l.is_ring_cq(32));
        assert!(l.is_ring_cq(47));
        assert!(!l.is_ring_cq(48));
        assert!(!l.is_ring_qp(15));
        assert!(l.is_ring_qp(16));
        assert!(l.is_ring_qp(23));
        assert!(!l.is_ring_qp(24));
        // Ring objects have no virtqueues.
        assert_eq!(l.cq(32), None);
        assert_eq!(l.sq(16), None);
        // Without rings: neither queues nor numbers.
        let plain = QueueLayout::new(32, 16);
        assert_eq!(plain.and_then(|l| l.notify()), None);
        assert_eq!(plain.and_then(|l| l.comp(0)), None);
        assert_eq!(plain.and_then(|l| l.kind(66)), None);
        assert_eq!(plain.map(|l| l.is_ring_cq(32)), Some(false));
        // with_rings checks what it is given.
        let bad = Rings {
            num_comp_vqs: 0,
            ..rings
        };
        assert_eq!(QueueLayout::new(1, 1).and_then(|l| l.with_rings(bad)), None);
    }
}
