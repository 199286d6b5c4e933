// SPDX-License-Identifier: GPL-2.0
//! Device limits and the config space built from them.
//!
//! Every number the device reports to the guest lives here, so that the
//! config space, the control commands and the command line agree.

use std::fmt;
use std::net::IpAddr;

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::IntoBytes;

use crate::abi::{self, VirtioRdmaConfig};
use crate::cpus::Cpus;
use crate::hostile;
use crate::link;
use crate::net::uplink::UplinkSpec;

/// vhost-user carries the vring index in 8 bits.
pub const MAX_VRINGS: u32 = 256;
/// Largest vring size virtio allows (split rings).
pub const MAX_QUEUE_SIZE: u32 = 32768;
/// Most threads (lanes) per device.
pub const MAX_THREADS: u32 = 64;
/// Scatter/gather entries per work request.
pub const MAX_SGE: u32 = 32;
/// Memory regions per device.
pub const MAX_MR: u32 = 65536;
/// Protection domains per device.
pub const MAX_PD: u32 = 65536;
/// Largest memory region (4 GiB).
pub const MAX_MR_SIZE: u64 = 1 << 32;
/// Supported page sizes: one bit per size; 4 KiB only.
pub const PAGE_SIZE_CAP: u64 = 0x1000;
/// `IB_DEVICE_SYS_IMAGE_GUID`.
pub const IB_DEVICE_SYS_IMAGE_GUID: u64 = 1 << 11;
/// `IB_DEVICE_RC_RNR_NAK_GEN`.
pub const IB_DEVICE_RC_RNR_NAK_GEN: u64 = 1 << 12;
/// `IB_DEVICE_MEM_MGT_EXTENSIONS`.
pub const IB_DEVICE_MEM_MGT_EXTENSIONS: u64 = 1 << 21;
/// `IB_DEVICE_MEM_WINDOW`.
pub const IB_DEVICE_MEM_WINDOW: u64 = 1 << 17;
/// `IB_DEVICE_MEM_WINDOW_TYPE_2B`.
pub const IB_DEVICE_MEM_WINDOW_TYPE_2B: u64 = 1 << 24;
/// `IB_DEVICE_FLUSH_GLOBAL`.
pub const IB_DEVICE_FLUSH_GLOBAL: u64 = 1 << 38;
/// `IB_DEVICE_ATOMIC_WRITE`.
pub const IB_DEVICE_ATOMIC_WRITE: u64 = 1 << 40;
/// Capabilities reported in `device_cap_flags`.
pub const DEVICE_CAP_FLAGS: u64 = IB_DEVICE_SYS_IMAGE_GUID
    | IB_DEVICE_RC_RNR_NAK_GEN
    | IB_DEVICE_MEM_MGT_EXTENSIONS
    | IB_DEVICE_MEM_WINDOW
    | IB_DEVICE_MEM_WINDOW_TYPE_2B
    | IB_DEVICE_FLUSH_GLOBAL
    | IB_DEVICE_ATOMIC_WRITE;
/// PCI vendor ID of virtio devices (Red Hat).
pub const VENDOR_ID: u32 = 0x1af4;
/// Vendor part ID: the virtio device ID.
pub const VENDOR_PART_ID: u32 = 42;
/// Hardware version.
pub const HW_VER: u32 = 1;
/// Outstanding RDMA reads/atomics per QP, as responder and as initiator:
/// rxe's (`RXE_MAX_QP_RD_ATOM`), because a peer's is what a QP connected
/// to it is given (perftest sets `max_rd_atomic` to the remote's
/// `max_dest_rd_atomic`), and a smaller limit would refuse the RTS of a QP
/// connected to rxe.
pub const MAX_QP_RD_ATOM: u32 = 128;
/// Fast-registration page list length.
pub const MAX_FAST_REG_PAGE_LIST_LEN: u32 = 512;
/// Bytes of inline data per send WR.
pub const MAX_INLINE_DATA: u32 = 64;
/// Address handles (kept by the driver; bounded for sanity).
pub const MAX_AH: u32 = 65536;
/// Partition keys per port (the default key only).
pub const MAX_PKEYS: u16 = 1;
/// Local CA ack delay (as rxe).
pub const LOCAL_CA_ACK_DELAY: u8 = 15;
/// Number of ports.
pub const PHYS_PORT_CNT: u32 = 1;
/// GID table entries per port.
pub const GID_TBL_LEN: u32 = 16;
/// P_Key table entries per port.
pub const PKEY_TBL_LEN: u16 = 1;
/// The default partition key, at P_Key index 0.
pub const DEFAULT_PKEY: u16 = 0xffff;
/// Largest message.
pub const MAX_MSG_SZ: u32 = 1 << 31;

/// `enum ib_port_state`: IB_PORT_ACTIVE.
pub const IB_PORT_ACTIVE: u8 = 4;
/// `enum ib_mtu`: IB_MTU_1024 (fits a 1500-byte Ethernet frame with RoCEv2 headers).
pub const IB_MTU_1024: u8 = 3;
/// `enum ib_mtu`: IB_MTU_4096, the largest.
pub const IB_MTU_4096: u8 = 5;
/// The port's Ethernet MTU by default (`--mtu`).
pub const DEFAULT_MTU: u16 = 1500;
/// Smallest Ethernet MTU a device takes: IPv6's minimum, which still
/// carries 1024-byte RoCE packets.
pub const MIN_MTU: u16 = 1280;
/// Largest Ethernet MTU a device takes (jumbo frames).
pub const MAX_MTU: u16 = 9000;
/// Bytes of a RoCEv2 packet around its payload within the Ethernet MTU, at
/// most: IPv6 (40), UDP (8), BTH (12), the largest extension headers a
/// packet with payload carries (RETH 16 and ImmDt 4) and the ICRC (4).
/// (rxe subtracts 80, the guest's driver and rdma_cm 96, `iboe_get_mtu`,
/// and report the smaller of theirs and the device's: all agree at 1500
/// and 9000, 1024 and 4096.)
pub const ROCE_OVERHEAD: u16 = 84;
/// `enum ib_port_phys_state`: LINK_UP.
pub const IB_PORT_PHYS_STATE_LINK_UP: u8 = 5;
/// `enum ib_port_width`: 1X.
pub const IB_WIDTH_1X: u8 = 1;
/// `enum ib_port_speed`: SDR (rxe's default).
pub const IB_SPEED_SDR: u16 = 1;
/// `IB_PORT_CM_SUP`: the port supports connection management (as rxe).
pub const IB_PORT_CM_SUP: u32 = 1 << 16;

/// An Ethernet MAC address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mac(pub [u8; 6]);

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

impl std::str::FromStr for Mac {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() != 6 {
            return Err(format!(
                "`{s}` is not a MAC address (want XX:XX:XX:XX:XX:XX)"
            ));
        }
        let mut mac = [0u8; 6];
        for (byte, part) in mac.iter_mut().zip(parts) {
            if part.len() != 2 {
                return Err(format!(
                    "`{s}` is not a MAC address (want XX:XX:XX:XX:XX:XX)"
                ));
            }
            *byte = u8::from_str_radix(part, 16)
                .map_err(|_| format!("`{s}` is not a MAC address (bad hex `{part}`)"))?;
        }
        Ok(Mac(mac))
    }
}

/// Why a set of limits cannot be served.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum LimitsError {
    /// max_qp is 0.
    #[error("--max-qp must be at least 1")]
    NoQp,
    /// max_cq is 0.
    #[error("--max-cq must be at least 1")]
    NoCq,
    /// Too many virtqueues for vhost-user.
    #[error(
        "2 + max_cq ({max_cq}) + 2 * max_qp ({max_qp}) = {total} virtqueues, but vhost-user \
         addresses at most {MAX_VRINGS} virtqueues per device"
    )]
    TooManyQueues {
        /// Requested CQs.
        max_cq: u32,
        /// Requested QPs.
        max_qp: u32,
        /// Resulting queue count.
        total: u64,
    },
    /// --threads out of range.
    #[error("--threads {0} must be between 1 and {MAX_THREADS}")]
    Threads(u32),
    /// --cpus names CPUs the process may not run on.
    #[error("--cpus {cpus}: this process may run only on CPUs {allowed}")]
    CpusNotAllowed {
        /// The list given.
        cpus: String,
        /// The process's affinity.
        allowed: String,
    },
    /// More than MAX_OVERRIDES --config-override.
    #[error("at most {MAX_OVERRIDES} --config-override, got {0}")]
    TooManyOverrides(usize),
    /// Queue size not a power of two in range.
    #[error("--queue-size {0} must be a power of two between 2 and {MAX_QUEUE_SIZE}")]
    QueueSize(u32),
    /// A --config-override for a device this process does not serve.
    #[error(
        "--config-override for device {device}, but {sockets} --socket given (0 is the first)"
    )]
    OverrideDevice {
        /// The device index given.
        device: usize,
        /// Sockets given.
        sockets: usize,
    },
    /// Several devices, but not one MAC each.
    #[error("{sockets} --socket and {macs} --mac: give one --mac per --socket")]
    MacPerSocket {
        /// Sockets given.
        sockets: usize,
        /// MACs given.
        macs: usize,
    },
    /// Several devices (tenants), not each with its addresses pinned.
    #[error(
        "{sockets} devices share this backend and {ips} --ip given: pin each device's \
         addresses with --ip ADDR[,ADDR...] once per --socket, in the same order, or say \
         that any address goes with --ip any (once for every device, or per device); \
         otherwise one guest could take another's address and receive its connections"
    )]
    Unpinned {
        /// Sockets given.
        sockets: usize,
        /// --ip given.
        ips: usize,
    },
    /// Two devices with one MAC (and so one link-local GID).
    #[error("--mac {0} is given twice: each device needs its own")]
    SameMac(Mac),
    /// More pinned addresses than a device holds.
    #[error("at most {MAX_PINNED} addresses per --ip, got {0}")]
    TooManyPinned(usize),
    /// A per-device option given neither once nor once per socket.
    #[error(
        "{option} given {given} times for {sockets} --socket: give it once, or once per --socket"
    )]
    PerSocket {
        /// The option.
        option: &'static str,
        /// How often it was given.
        given: usize,
        /// Sockets given.
        sockets: usize,
    },
    /// Ring limits out of range.
    #[error(
        "--ring-max-qp (ring QPs, and as many ring CQs) must be 1..={MAX_RING_OBJECTS} and \
         --comp-vqs 1..={MAX_COMP_VQS}, got {qp} QPs, {cq} CQs, {vqs} queues"
    )]
    Rings {
        /// Ring QPs asked for.
        qp: u32,
        /// Ring CQs asked for.
        cq: u32,
        /// Completion-event queues asked for.
        vqs: u32,
    },
    /// max_mr outside what a key can name.
    #[error("--max-mr must be 1..={MAX_MR}, got {0}")]
    MaxMr(u32),
    /// max_srq out of range.
    #[error("--max-srq must be 0..={MAX_RING_OBJECTS}, got {0}")]
    MaxSrq(u32),
    /// max_xrcd out of range.
    #[error("--max-xrcd must be 0..={MAX_XRCD}, got {0}")]
    MaxXrcd(u32),
    /// Counter sets out of range.
    #[error("counter sets must be 1..={MAX_COUNTER_SETS}, got {0}")]
    MaxCounterSets(u32),
    /// The net personality without queues in guest memory: its RoCE part
    /// is the rings mode (VIRTIO_NET_F_ROCE implies it).
    #[error("--net needs --rings: VIRTIO_NET_F_ROCE implies the rings mode")]
    NetWithoutRings,
    /// An uplink for an ID-42 device whose guest's Ethernet is QEMU's
    /// (no --nic-socket).
    #[error(
        "--uplink needs --net or --nic-socket: the guest's Ethernet must go out the port \
         its RoCE frames do"
    )]
    UplinkWithoutNet,
    /// A NIC of the backend's for the net personality, which is one.
    #[error("--nic-socket is for the ID-42 device: with --net the device is the guest's NIC")]
    NicWithNet,
    /// A NIC of the backend's without the rings mode.
    #[error("--nic-socket needs --rings: the port takes RoCEv2 frames for the rings mode's QPs")]
    NicWithoutRings,
    /// One socket path for two frontends (devices or NICs).
    #[error("{} is given twice: each device and each NIC needs a socket of its own", .0.display())]
    SameSocket(std::path::PathBuf),
    /// Two devices on one uplink.
    #[error("--uplink {0} given to two devices")]
    SameUplink(UplinkSpec),
    /// An Ethernet MTU out of range.
    #[error("--mtu must be {MIN_MTU}..={MAX_MTU}, got {0}")]
    Mtu(u16),
    /// The net personality's queues and the RoCE part's together are too
    /// many for vhost-user.
    #[error(
        "{net} net virtqueues + {roce} RoCE virtqueues = {total} virtqueues, but vhost-user \
         addresses at most {MAX_VRINGS} virtqueues per device: lower --max-qp, --max-cq or \
         --comp-vqs"
    )]
    NetTooManyQueues {
        /// Queues of the net part (receiveq, transmitq, controlq).
        net: usize,
        /// Queues of the RoCE part.
        roce: usize,
        /// Their sum.
        total: usize,
    },
}

/// Most addresses an operator can pin to one device (`--ip`).
pub const MAX_PINNED: usize = 8;
/// Page-table entries a device may hold per page of its guest's memory,
/// when the operator sets no `--max-mr-pages`: registering every page of
/// the guest eight times over (page tables of 1/64 of the guest's RAM).
pub const MR_PAGES_PER_GUEST_PAGE: u64 = 8;
/// The least page-table budget a device gets (1 GiB worth of 4 KiB pages),
/// whatever its guest's memory.
pub const MIN_MR_PAGES: u64 = 1 << 18;

/// Most `--config-override`s one device takes.
pub const MAX_OVERRIDES: usize = 8;

/// A config space field reported with a value the device does not honour
/// (`--config-override [DEVICE:]FIELD=VALUE`): for testing how a driver
/// copes with a device whose config is bad or inconsistent. The device
/// itself keeps serving its real limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfigOverride {
    /// The device (index of its --socket) it is for; `None`: every device.
    device: Option<usize>,
    offset: usize,
    len: usize,
    value: u64,
}

impl ConfigOverride {
    /// The device it is for, if only one.
    pub fn device(&self) -> Option<usize> {
        self.device
    }

    /// Whether device `i` reports it.
    pub fn applies_to(&self, i: usize) -> bool {
        self.device.is_none_or(|d| d == i)
    }
}

/// The integer fields of `struct virtio_rdma_config`: name, offset, size.
fn config_fields() -> Vec<(&'static str, usize, usize)> {
    let c = <VirtioRdmaConfig as zerocopy::FromZeros>::new_zeroed();
    macro_rules! fields {
        ($($f:ident),* $(,)?) => {
            vec![$((
                stringify!($f),
                std::mem::offset_of!(VirtioRdmaConfig, $f),
                std::mem::size_of_val(&c.$f),
            )),*]
        };
    }
    fields!(
        phys_port_cnt,
        vendor_id,
        sys_image_guid,
        vendor_part_id,
        hw_ver,
        max_mr_size,
        page_size_cap,
        device_cap_flags,
        max_qp,
        max_qp_wr,
        max_send_sge,
        max_recv_sge,
        max_sge_rd,
        max_cq,
        max_cqe,
        max_mr,
        max_pd,
        max_qp_rd_atom,
        max_res_rd_atom,
        max_qp_init_rd_atom,
        max_mw,
        max_mcast_grp,
        max_mcast_qp_attach,
        max_total_mcast_qp_attach,
        max_ah,
        max_fast_reg_page_list_len,
        max_pi_fast_reg_page_list_len,
        max_inline_data,
        max_pkeys,
        local_ca_ack_delay,
        atomic_cap,
    )
}

impl std::str::FromStr for ConfigOverride {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        // A device's index first, if the override is for one device only.
        let (device, s) = match s.split_once(':') {
            Some((i, rest)) => (
                Some(i.parse::<usize>().map_err(|_| {
                    format!("'{i}' is not a device's index (0 is the first --socket)")
                })?),
                rest,
            ),
            None => (None, s),
        };
        let (name, value) = s
            .split_once('=')
            .ok_or_else(|| format!("'{s}' is not FIELD=VALUE"))?;
        let fields = config_fields();
        let &(_, offset, len) = fields.iter().find(|f| f.0 == name).ok_or_else(|| {
            let names: Vec<&str> = fields.iter().map(|f| f.0).collect();
            format!(
                "unknown config field '{name}' (one of: {})",
                names.join(", ")
            )
        })?;
        let value = match value.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => value.parse::<u64>(),
        }
        .map_err(|e| format!("'{value}': {e}"))?;
        if len < 8 && value >> (8 * len) != 0 {
            return Err(format!("{value:#x} does not fit {name} ({len} bytes)"));
        }
        Ok(ConfigOverride {
            device,
            offset,
            len,
            value,
        })
    }
}

/// The GIDs an operator allows one device (`--ip`): the GIDs of these
/// addresses (IPv4 as IPv4-mapped) and the link-local GID of its MAC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pinned {
    gids: [[u8; 16]; MAX_PINNED],
    len: usize,
}

impl Pinned {
    /// The GIDs of `addrs`.
    pub fn new(addrs: &[IpAddr]) -> Result<Self, LimitsError> {
        if addrs.len() > MAX_PINNED {
            return Err(LimitsError::TooManyPinned(addrs.len()));
        }
        let mut gids = [[0u8; 16]; MAX_PINNED];
        for (g, a) in gids.iter_mut().zip(addrs) {
            *g = match a {
                IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
                IpAddr::V6(v6) => v6.octets(),
            };
        }
        Ok(Pinned {
            gids,
            len: addrs.len(),
        })
    }

    fn contains(&self, gid: &[u8; 16]) -> bool {
        self.gids[..self.len].contains(gid)
    }
}

/// Most ring QPs (and, separately, ring CQs) a device may offer (what the
/// driver accepts, `VIRTIO_RDMA_MAX_QP_LIMIT`).
pub const MAX_RING_OBJECTS: u32 = abi::VIRTIO_RDMA_MAX_QP_LIMIT;
/// Most completion-event queues (one interrupt vector each).
pub const MAX_COMP_VQS: u32 = 16;
/// Shared receive queues a device with rings offers unless told otherwise.
pub const DEFAULT_MAX_SRQ: u32 = 1024;
/// XRC domains a device with SRQs offers unless told otherwise: a domain
/// is a number and a count of what uses it, so this only bounds the table;
/// a process opens one per XRC application (`ibv_open_xrcd`).
pub const DEFAULT_MAX_XRCD: u32 = 64;
/// Most XRC domains a device may offer.
pub const MAX_XRCD: u32 = MAX_RING_OBJECTS;
/// Counter sets (ALLOC_COUNTER_SET) a device keeps at most. Each costs the
/// host a few hundred bytes (19 counters and the table's entry), so this
/// bounds what a guest can make the backend allocate; 1024 is more than
/// the kernel's counter binding asks for (one set per QP type or process
/// in use).
pub const MAX_COUNTER_SETS: u32 = 1024;

/// Queues in guest memory (`VIRTIO_RDMA_F_RINGS`): how many, and how the
/// device polls them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rings {
    /// Ring QPs, numbered from `max_qp`.
    pub max_qp: u32,
    /// Ring CQs, numbered from `max_cq`.
    pub max_cq: u32,
    /// Completion-event virtqueues.
    pub comp_vqs: u32,
    /// How long the device keeps polling idle rings before it asks to be
    /// notified, in microseconds.
    pub poll_us: u32,
    /// Shared receive queues, numbered from 1 (0: none).
    pub max_srq: u32,
    /// XRC domains, numbered from 1 (0: no XRC; none without SRQs).
    pub max_xrcd: u32,
}

impl Rings {
    /// Validated ring limits.
    pub fn new(max_qp: u32, max_cq: u32, comp_vqs: u32, poll_us: u32) -> Result<Self, LimitsError> {
        let ok = |n: u32| (1..=MAX_RING_OBJECTS).contains(&n);
        if !ok(max_qp) || !ok(max_cq) || !(1..=MAX_COMP_VQS).contains(&comp_vqs) {
            return Err(LimitsError::Rings {
                qp: max_qp,
                cq: max_cq,
                vqs: comp_vqs,
            });
        }
        Ok(Rings {
            max_qp,
            max_cq,
            comp_vqs,
            poll_us,
            max_srq: DEFAULT_MAX_SRQ,
            max_xrcd: DEFAULT_MAX_XRCD,
        })
    }

    /// The same ring limits with `max_srq` shared receive queues.
    pub fn with_max_srq(mut self, max_srq: u32) -> Result<Self, LimitsError> {
        if max_srq > MAX_RING_OBJECTS {
            return Err(LimitsError::MaxSrq(max_srq));
        }
        self.max_srq = max_srq;
        Ok(self)
    }

    /// The same ring limits with `max_xrcd` XRC domains.
    pub fn with_max_xrcd(mut self, max_xrcd: u32) -> Result<Self, LimitsError> {
        if max_xrcd > MAX_XRCD {
            return Err(LimitsError::MaxXrcd(max_xrcd));
        }
        self.max_xrcd = max_xrcd;
        Ok(self)
    }
}

/// The limits one device serves, and what it allows its guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    max_qp: u32,
    max_cq: u32,
    queue_size: u16,
    mac: Mac,
    overrides: [Option<ConfigOverride>; MAX_OVERRIDES],
    max_mr: u32,
    max_mr_pages: Option<u64>,
    pinned: Option<Pinned>,
    hostile: Option<hostile::Config>,
    link_faults: Option<link::Faults>,
    rings: Option<Rings>,
    max_counter_sets: u32,
    /// The device is the net personality (virtio-net with the RoCE queues
    /// after its own): see `net/mod.rs`.
    net: bool,
    /// The ID-42 device's paired NIC is the backend's (`--nic-socket`,
    /// `net/nic.rs`): its port is the guest's Ethernet, as the net
    /// personality's is.
    nic: bool,
    /// Threads serving the device's queues (`lane.rs`).
    threads: u8,
    /// Where the device's threads run (`--cpus`); `None`: wherever the
    /// process may.
    cpus: Option<Cpus>,
    /// The port on a host network (`--uplink`); `None`:
    /// the process's switch only.
    uplink: Option<UplinkSpec>,
    /// The port's Ethernet MTU (`--mtu`): the net personality's frames,
    /// and the IB MTU of the RoCE part ([`Limits::ib_mtu`]).
    mtu: u16,
}

impl Limits {
    /// Validates the limits.
    pub fn new(max_qp: u32, max_cq: u32, queue_size: u32, mac: Mac) -> Result<Self, LimitsError> {
        if max_qp == 0 {
            return Err(LimitsError::NoQp);
        }
        if max_cq == 0 {
            return Err(LimitsError::NoCq);
        }
        // Control, CQs, SQ/RQ pairs, event queue.
        let total = 2 + u64::from(max_cq) + 2 * u64::from(max_qp);
        if total > u64::from(MAX_VRINGS) {
            return Err(LimitsError::TooManyQueues {
                max_cq,
                max_qp,
                total,
            });
        }
        if !(2..=MAX_QUEUE_SIZE).contains(&queue_size) || !queue_size.is_power_of_two() {
            return Err(LimitsError::QueueSize(queue_size));
        }
        let queue_size =
            u16::try_from(queue_size).map_err(|_| LimitsError::QueueSize(queue_size))?;
        Ok(Limits {
            max_qp,
            max_cq,
            queue_size,
            mac,
            overrides: [None; MAX_OVERRIDES],
            max_mr: MAX_MR,
            max_mr_pages: None,
            pinned: None,
            hostile: None,
            link_faults: None,
            rings: None,
            max_counter_sets: MAX_COUNTER_SETS,
            net: false,
            nic: false,
            threads: 1,
            cpus: None,
            uplink: None,
            mtu: DEFAULT_MTU,
        })
    }

    /// The same limits served by `threads` threads (lanes of QPs, see
    /// `lane.rs`).
    pub fn with_threads(mut self, threads: u32) -> Result<Self, LimitsError> {
        if !(1..=MAX_THREADS).contains(&threads) {
            return Err(LimitsError::Threads(threads));
        }
        self.threads = threads as u8;
        Ok(self)
    }

    /// Threads serving the device (at least one).
    pub fn threads(&self) -> usize {
        usize::from(self.threads)
    }

    /// The same limits on a device whose threads run on `cpus` (`None`:
    /// wherever the process may).
    pub fn with_cpus(mut self, cpus: Option<Cpus>) -> Self {
        self.cpus = cpus;
        self
    }

    /// The CPUs the device's threads run on, if it has its own.
    pub fn cpus(&self) -> Option<&Cpus> {
        self.cpus.as_ref()
    }

    /// The same limits with at most `max_mr` MRs.
    pub fn with_max_mr(mut self, max_mr: u32) -> Result<Self, LimitsError> {
        if max_mr == 0 || max_mr > MAX_MR {
            return Err(LimitsError::MaxMr(max_mr));
        }
        self.max_mr = max_mr;
        Ok(self)
    }

    /// The same limits with at most `max` counter sets (tests reach the
    /// limit with fewer).
    pub fn with_max_counter_sets(mut self, max: u32) -> Result<Self, LimitsError> {
        if max == 0 || max > MAX_COUNTER_SETS {
            return Err(LimitsError::MaxCounterSets(max));
        }
        self.max_counter_sets = max;
        Ok(self)
    }

    /// Counter sets a device keeps at most (numbered 1..=this).
    pub fn max_counter_sets(&self) -> u32 {
        self.max_counter_sets
    }

    /// The same limits with a page-table budget of `pages` entries (`None`:
    /// derived from the guest's memory, see [`Limits::mr_pages_for`]).
    pub fn with_max_mr_pages(mut self, pages: Option<u64>) -> Self {
        self.max_mr_pages = pages;
        self
    }

    /// The same limits, allowing only the GIDs `pinned` names (`None`: any
    /// GID no other device holds).
    pub fn with_pinned(mut self, pinned: Option<Pinned>) -> Self {
        self.pinned = pinned;
        self
    }

    /// The same limits on a device that lies to its guest as `hostile`
    /// says (`None`: an honest device). For testing drivers only.
    pub fn with_hostile(mut self, hostile: Option<hostile::Config>) -> Self {
        self.hostile = hostile;
        self
    }

    /// The same limits on a device whose requests and their answers cross
    /// a link with `faults` (`None`: a link that loses nothing). For fault
    /// drills and tests.
    pub fn with_link_faults(mut self, faults: Option<link::Faults>) -> Self {
        self.link_faults = faults;
        self
    }

    /// The same limits offering queues in guest memory as `rings` says
    /// (`None`: virtqueues only).
    pub fn with_rings(mut self, rings: Option<Rings>) -> Result<Self, LimitsError> {
        self.rings = rings;
        self.check_queues()
    }

    /// The same limits as the net personality (`net`) or as the ID-42
    /// device. The net personality needs rings (its RoCE part is the rings
    /// mode).
    pub fn with_net(mut self, net: bool) -> Result<Self, LimitsError> {
        if net && self.rings.is_none() {
            return Err(LimitsError::NetWithoutRings);
        }
        if net && self.nic {
            return Err(LimitsError::NicWithNet);
        }
        self.net = net;
        self.check_queues()
    }

    /// The same limits with the ID-42 device's paired NIC served by this
    /// backend (`--nic-socket`) or by QEMU. The port then carries the
    /// guest's Ethernet, on the process's switch or the uplink; it takes
    /// RoCEv2 frames for the rings mode's QPs, so it needs rings.
    pub fn with_nic(mut self, nic: bool) -> Result<Self, LimitsError> {
        if nic && self.net {
            return Err(LimitsError::NicWithNet);
        }
        if nic && self.rings.is_none() {
            return Err(LimitsError::NicWithoutRings);
        }
        self.nic = nic;
        Ok(self)
    }

    /// Whether the ID-42 device's NIC is this backend's.
    pub fn nic(&self) -> bool {
        self.nic
    }

    /// Whether the device has an Ethernet port of the backend's: the net
    /// personality's, or the ID-42 device's NIC.
    pub fn has_port(&self) -> bool {
        self.net || self.nic
    }

    /// Whether the device is the net personality.
    pub fn net(&self) -> bool {
        self.net
    }

    /// The same limits with the port on `uplink` (a port of the
    /// backend's only: its guest's Ethernet must share it with its RoCE).
    pub fn with_uplink(mut self, uplink: Option<UplinkSpec>) -> Result<Self, LimitsError> {
        if uplink.is_some() && !self.has_port() {
            return Err(LimitsError::UplinkWithoutNet);
        }
        self.uplink = uplink;
        Ok(self)
    }

    /// The port's uplink, if any.
    pub fn uplink(&self) -> Option<UplinkSpec> {
        self.uplink
    }

    /// The same limits with a port of Ethernet MTU `mtu` (`--mtu`;
    /// [`MIN_MTU`]..=[`MAX_MTU`]).
    pub fn with_mtu(mut self, mtu: u16) -> Result<Self, LimitsError> {
        if !(MIN_MTU..=MAX_MTU).contains(&mtu) {
            return Err(LimitsError::Mtu(mtu));
        }
        self.mtu = mtu;
        Ok(self)
    }

    /// The port's Ethernet MTU.
    pub fn mtu(&self) -> u16 {
        self.mtu
    }

    /// The port's IB MTU (`enum ib_mtu`): the largest whose RoCEv2 packets
    /// fit the Ethernet MTU, 1024 for 1500, 4096 for 9000. The device's
    /// max_mtu and active_mtu, and the largest path MTU a QP may have,
    /// so that none of its frames is larger than its link takes.
    pub fn ib_mtu(&self) -> u8 {
        let room = self.mtu.saturating_sub(ROCE_OVERHEAD);
        // 256 << (m - 1) bytes for IB MTU m.
        (1..=IB_MTU_4096)
            .rev()
            .find(|&m| 256u16 << (m - 1) <= room)
            .unwrap_or(1)
    }

    /// These limits if vhost-user can number all their queues.
    fn check_queues(self) -> Result<Self, LimitsError> {
        let total = self.num_queues();
        if total <= MAX_VRINGS as usize {
            return Ok(self);
        }
        Err(if self.net {
            LimitsError::NetTooManyQueues {
                net: self.roce_base(),
                roce: self.roce_queues(),
                total,
            }
        } else {
            LimitsError::TooManyQueues {
                max_cq: self.max_cq,
                max_qp: self.max_qp,
                total: total as u64,
            }
        })
    }

    /// The queues in guest memory the device offers, if any.
    pub fn rings(&self) -> Option<Rings> {
        self.rings
    }

    /// QP numbers in use: virtqueue QPs, then ring QPs.
    pub fn qp_count(&self) -> u32 {
        self.max_qp + self.rings.map_or(0, |r| r.max_qp)
    }

    /// CQ numbers in use: virtqueue CQs, then ring CQs.
    pub fn cq_count(&self) -> u32 {
        self.max_cq + self.rings.map_or(0, |r| r.max_cq)
    }

    /// Index of the notification queue (rings), from [`Limits::roce_base`].
    pub fn notify_vq(&self) -> Option<usize> {
        self.rings
            .map(|_| abi::virtio_rdma_notify_vq(self.max_cq, self.max_qp) as usize)
    }

    /// The completion-event queue an index (from [`Limits::roce_base`])
    /// names, if it is one.
    pub fn comp_vq_of(&self, index: usize) -> Option<u32> {
        let first = abi::virtio_rdma_comp_vq(self.max_cq, self.max_qp, 0) as usize;
        let n = self.rings?.comp_vqs as usize;
        (first..first + n)
            .contains(&index)
            .then(|| (index - first) as u32)
    }

    /// The device's hostile mode, if it has one.
    pub fn hostile(&self) -> Option<hostile::Config> {
        self.hostile
    }

    /// The faults of the device's link, if it has any.
    pub fn link_faults(&self) -> Option<link::Faults> {
        self.link_faults
    }

    /// MRs a device may hold.
    pub fn max_mr(&self) -> u32 {
        self.max_mr
    }

    /// Shared receive queues (rings only; numbered 1..=max_srq).
    pub fn max_srq(&self) -> u32 {
        self.rings.map_or(0, |r| r.max_srq)
    }

    /// XRC domains (numbered 1..=max_xrcd): XRC SRQs are SRQs, so none
    /// without them.
    pub fn max_xrcd(&self) -> u32 {
        match self.rings {
            Some(r) if r.max_srq > 0 => r.max_xrcd,
            _ => 0,
        }
    }

    /// Receives an SRQ holds, and SGEs of each (0 without SRQs). An SRQ is
    /// always a ring in guest memory, never a virtqueue, so its depth is the
    /// rings' bound, not the virtqueue size (which QEMU caps at 1024; rxe
    /// offers 2^20, and rdma-core's tests ask for 2000).
    pub fn srq_caps(&self) -> (u32, u32) {
        if self.max_srq() == 0 {
            return (0, 0);
        }
        (MAX_QUEUE_SIZE, MAX_SGE)
    }

    /// Memory windows a device may hold: windows take their handles from
    /// the MRs' (one key space), so MRs and windows together stay within
    /// `max_mr`.
    pub fn max_mw(&self) -> u32 {
        self.max_mr
    }

    /// Page-table entries all MRs of a device may hold together, for a
    /// guest of `guest_bytes` of memory: what the operator set, else
    /// [`MR_PAGES_PER_GUEST_PAGE`] per guest page, at least
    /// [`MIN_MR_PAGES`]. Each entry costs the host 8 bytes, so this bounds
    /// what a guest can make the backend allocate.
    pub fn mr_pages_for(&self, guest_bytes: u64) -> u64 {
        self.max_mr_pages.unwrap_or_else(|| {
            (guest_bytes / u64::from(abi::VIRTIO_RDMA_PAGE_SIZE))
                .saturating_mul(MR_PAGES_PER_GUEST_PAGE)
                .max(MIN_MR_PAGES)
        })
    }

    /// The link-local GID of the paired NIC (fe80::/64 with the MAC's
    /// modified EUI-64, as the kernel derives its default GID).
    pub fn link_local_gid(&self) -> [u8; 16] {
        let mut gid = [0u8; 16];
        gid[..2].copy_from_slice(&[0xfe, 0x80]);
        gid[8..].copy_from_slice(&self.sys_image_guid());
        gid
    }

    /// Whether the operator lets this device hold `gid`.
    pub fn gid_allowed(&self, gid: &[u8; 16]) -> bool {
        match &self.pinned {
            None => true,
            Some(p) => p.contains(gid) || *gid == self.link_local_gid(),
        }
    }

    /// The same limits, with config fields reported as `overrides` say.
    pub fn with_overrides(mut self, overrides: &[ConfigOverride]) -> Result<Self, LimitsError> {
        if overrides.len() > MAX_OVERRIDES {
            return Err(LimitsError::TooManyOverrides(overrides.len()));
        }
        for (slot, o) in self.overrides.iter_mut().zip(overrides) {
            *slot = Some(*o);
        }
        Ok(self)
    }

    /// The same limits, paired with the NIC of MAC `mac`.
    pub fn with_mac(mut self, mac: Mac) -> Self {
        self.mac = mac;
        self
    }

    /// QPs.
    pub fn max_qp(&self) -> u32 {
        self.max_qp
    }

    /// CQs.
    pub fn max_cq(&self) -> u32 {
        self.max_cq
    }

    /// Largest vring size.
    pub fn queue_size(&self) -> u16 {
        self.queue_size
    }

    /// The paired Ethernet function's MAC.
    pub fn mac(&self) -> Mac {
        self.mac
    }

    /// Virtqueues of the device: the net personality's own (see
    /// [`Limits::roce_base`]), then the RoCE part's.
    pub fn num_queues(&self) -> usize {
        self.roce_base() + self.roce_queues()
    }

    /// Index of the first RoCE queue (its control queue): 0 on the ID-42
    /// device, after receiveq, transmitq and controlq on the net
    /// personality. Every RoCE index ([`Limits::event_vq`],
    /// [`Limits::notify_vq`], ...) counts from here.
    pub fn roce_base(&self) -> usize {
        if self.net {
            crate::net::ROCE_BASE
        } else {
            0
        }
    }

    /// Virtqueues of the RoCE part: control, one per CQ, an (SQ, RQ) pair
    /// per QP, events; with rings, the notification and the
    /// completion-event queues.
    pub fn roce_queues(&self) -> usize {
        let base = 1 + abi::virtio_rdma_event_vq(self.max_cq, self.max_qp) as usize;
        base + self.rings.map_or(0, |r| 1 + r.comp_vqs as usize)
    }

    /// Index of the event queue, from [`Limits::roce_base`].
    pub fn event_vq(&self) -> usize {
        abi::virtio_rdma_event_vq(self.max_cq, self.max_qp) as usize
    }

    /// System image GUID: the MAC's modified EUI-64, in network byte order.
    pub fn sys_image_guid(&self) -> [u8; 8] {
        let m = self.mac.0;
        [m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]]
    }

    /// The config structure.
    pub fn config(&self) -> VirtioRdmaConfig {
        let qs = u32::from(self.queue_size);
        VirtioRdmaConfig {
            phys_port_cnt: U32::new(PHYS_PORT_CNT),
            vendor_id: U32::new(VENDOR_ID),
            sys_image_guid: U64::from_bytes(self.sys_image_guid()),
            vendor_part_id: U32::new(VENDOR_PART_ID),
            hw_ver: U32::new(HW_VER),
            max_mr_size: U64::new(MAX_MR_SIZE),
            page_size_cap: U64::new(PAGE_SIZE_CAP),
            device_cap_flags: U64::new(DEVICE_CAP_FLAGS),
            max_qp: U32::new(self.max_qp),
            max_qp_wr: U32::new(qs),
            max_send_sge: U32::new(MAX_SGE),
            max_recv_sge: U32::new(MAX_SGE),
            max_sge_rd: U32::new(MAX_SGE),
            max_cq: U32::new(self.max_cq),
            max_cqe: U32::new(qs),
            max_mr: U32::new(self.max_mr),
            max_pd: U32::new(MAX_PD),
            max_qp_rd_atom: U32::new(MAX_QP_RD_ATOM),
            max_res_rd_atom: U32::new(MAX_QP_RD_ATOM * self.max_qp),
            max_qp_init_rd_atom: U32::new(MAX_QP_RD_ATOM),
            max_mw: U32::new(self.max_mw()),
            max_mcast_grp: U32::new(0),
            max_mcast_qp_attach: U32::new(0),
            max_total_mcast_qp_attach: U32::new(0),
            max_ah: U32::new(MAX_AH),
            max_fast_reg_page_list_len: U32::new(MAX_FAST_REG_PAGE_LIST_LEN),
            max_pi_fast_reg_page_list_len: U32::new(0),
            max_inline_data: U32::new(MAX_INLINE_DATA),
            max_pkeys: U16::new(MAX_PKEYS),
            local_ca_ack_delay: LOCAL_CA_ACK_DELAY,
            atomic_cap: abi::VIRTIO_RDMA_ATOMIC_HCA,
            mac: self.mac.0,
            reserved: [0; 6],
            max_ring_qp: U32::new(self.rings.map_or(0, |r| r.max_qp)),
            max_ring_cq: U32::new(self.rings.map_or(0, |r| r.max_cq)),
            num_comp_vqs: U32::new(self.rings.map_or(0, |r| r.comp_vqs)),
            max_srq: U32::new(self.max_srq()),
            max_srq_wr: U32::new(self.srq_caps().0),
            max_srq_sge: U32::new(self.srq_caps().1),
            max_xrcd: U32::new(self.max_xrcd()),
            reserved1: U32::new(0),
        }
    }

    /// The whole config space: the config structure, then zeroes.
    pub fn config_space(&self) -> [u8; abi::VIRTIO_RDMA_CONFIG_SPACE_SIZE] {
        let mut space = [0u8; abi::VIRTIO_RDMA_CONFIG_SPACE_SIZE];
        let cfg = self.config();
        let bytes = cfg.as_bytes();
        space[..bytes.len()].copy_from_slice(bytes);
        for o in self.overrides.iter().flatten() {
            space[o.offset..o.offset + o.len].copy_from_slice(&o.value.to_le_bytes()[..o.len]);
        }
        space
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: Mac = Mac([0x52, 0x54, 0, 0x12, 0x34, 0x56]);

    #[test]
    fn queue_count_bound() {
        assert_eq!(
            Limits::new(16, 32, 1024, MAC).map(|l| l.num_queues()),
            Ok(66)
        );
        assert_eq!(
            Limits::new(1, 252, 1024, MAC).map(|l| l.num_queues()),
            Ok(256)
        );
        assert_eq!(
            Limits::new(1, 253, 1024, MAC),
            Err(LimitsError::TooManyQueues {
                max_cq: 253,
                max_qp: 1,
                total: 257
            })
        );
        assert_eq!(Limits::new(0, 1, 1024, MAC), Err(LimitsError::NoQp));
        assert_eq!(Limits::new(1, 0, 1024, MAC), Err(LimitsError::NoCq));
        assert_eq!(
            Limits::new(1, 1, 1000, MAC),
            Err(LimitsError::QueueSize(1000))
        );
        assert_eq!(
            Limits::new(1, 1, 65536, MAC),
            Err(LimitsError::QueueSize(65536))
        );
        let msg = LimitsError::TooManyQueues {
            max_cq: 254,
            max_qp: 1,
            total: 257,
        }
        .to_string();
        assert!(msg.contains("max_cq (254)") && msg.contains("max_qp (1)") && msg.contains("257"));
    }

    #[test]
    fn pinned_gids_and_quotas() {
        let l = Limits::new(1, 1, 2, MAC).expect("valid");
        let any = [9u8; 16];
        assert!(l.gid_allowed(&any), "nothing pinned: any GID");
        let v4: IpAddr = "10.0.2.15".parse().expect("ip");
        let v6: IpAddr = "fd00::5".parse().expect("ip");
        let p = l.with_pinned(Some(Pinned::new(&[v4, v6]).expect("pinned")));
        let mapped = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 2, 15];
        assert!(p.gid_allowed(&mapped));
        assert!(p.gid_allowed(
            &"fd00::5"
                .parse::<std::net::Ipv6Addr>()
                .expect("v6")
                .octets()
        ));
        let ll: std::net::Ipv6Addr = "fe80::5054:ff:fe12:3456".parse().expect("ll");
        assert_eq!(p.link_local_gid(), ll.octets());
        assert!(p.gid_allowed(&ll.octets()), "the MAC's link-local GID");
        assert!(!p.gid_allowed(&any));
        let mut other = mapped;
        other[15] = 16;
        assert!(!p.gid_allowed(&other), "another guest's address");
        assert!(Pinned::new(&[v4; MAX_PINNED + 1]).is_err());
        assert_eq!(l.mr_pages_for(1 << 30), (1 << 18) * MR_PAGES_PER_GUEST_PAGE);
        assert_eq!(l.mr_pages_for(1 << 20), MIN_MR_PAGES);
        assert_eq!(l.with_max_mr_pages(Some(5)).mr_pages_for(1 << 30), 5);
        assert_eq!(l.with_max_mr(0), Err(LimitsError::MaxMr(0)));
        assert_eq!(
            l.with_max_mr(MAX_MR + 1),
            Err(LimitsError::MaxMr(MAX_MR + 1))
        );
        let small = l.with_max_mr(7).expect("valid");
        let off = std::mem::offset_of!(VirtioRdmaConfig, max_mr);
        assert_eq!(
            &small.config_space()[off..off + 4],
            &[7, 0, 0, 0],
            "config says it"
        );
    }

    #[test]
    fn mac_parse() {
        assert_eq!("52:54:00:12:34:56".parse::<Mac>(), Ok(MAC));
        assert_eq!(MAC.to_string(), "52:54:00:12:34:56");
        assert!("52:54:00:12:34".parse::<Mac>().is_err());
        assert!("52:54:00:12:34:5g".parse::<Mac>().is_err());
        assert!("52:54:00:12:34:567".parse::<Mac>().is_err());
    }

    #[test]
    fn config_overrides() {
        let o: ConfigOverride = "phys_port_cnt=2".parse().expect("parses");
        let l = Limits::new(16, 32, 1024, MAC)
            .and_then(|l| l.with_overrides(&[o, "max_cq=0x0".parse().expect("hex")]))
            .expect("valid");
        let space = l.config_space();
        assert_eq!(&space[0..4], &[2, 0, 0, 0]);
        let max_cq = std::mem::offset_of!(VirtioRdmaConfig, max_cq);
        assert_eq!(&space[max_cq..max_cq + 4], &[0, 0, 0, 0]);
        // The device still serves its real queues.
        assert_eq!(l.num_queues(), 66);
        assert!("atomic_cap=256".parse::<ConfigOverride>().is_err());
        assert!("nonsense=1".parse::<ConfigOverride>().is_err());
        assert!("max_qp".parse::<ConfigOverride>().is_err());
        assert!("max_qp=-1".parse::<ConfigOverride>().is_err());
        let many = vec![o; MAX_OVERRIDES + 1];
        assert!(Limits::new(1, 1, 2, MAC)
            .and_then(|l| l.with_overrides(&many))
            .is_err());
    }
}
