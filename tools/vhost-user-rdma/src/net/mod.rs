// SPDX-License-Identifier: GPL-2.0
//! The net personality (`--net`): the device presented as a virtio-net
//! device (virtio ID 1) that also carries the RoCE queues of the ID-42
//! protocol, as `Documentation/infiniband/virtio_rdma_net.rst` designs it.
//!
//! Queues: receiveq1 ([`RXQ`]), transmitq1 ([`TXQ`]), the net controlq
//! ([`CTRLQ`]), then from [`ROCE_BASE`] on the RoCE part in the ID-42
//! layout (control queue, CQ queues, QP pairs, event, notify and
//! completion-event queues). Only this module and [`Limits::roce_base`]
//! know the shift: the RoCE machinery (`ctrl`, `engine`, `cq`) gets its
//! vrings and indexes relative to it, and runs unchanged.
//!
//! Ethernet: no offloads, no mergeable buffers, one queue pair; a frame
//! from the transmit queue ([`tx`]) goes through the process's switch
//! ([`switch`]) into other devices' receive queues ([`rx`]). The control
//! queue ([`ctrl`]) answers what a stock Linux virtio_net asks.
//!
//! What is offered and what the config says is what a stock virtio_net
//! needs to bring an interface up; the RoCE part is used only by a driver
//! that acks [`VIRTIO_NET_F_ROCE`].
//!
//! The same port serves an ID-42 device's NIC when the backend is asked
//! to ([`nic`]): then its receive and transmit queues are another
//! frontend's, QEMU's stock virtio-net.

pub mod ctrl;
pub mod flood;
pub mod nic;
pub mod rx;
pub mod switch;
pub mod tx;
pub mod uplink;

use flood::FloodLimit;

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use log::debug;
use virtio_bindings::bindings::virtio_net::{
    VIRTIO_NET_F_CTRL_RX, VIRTIO_NET_F_CTRL_VQ, VIRTIO_NET_F_MAC, VIRTIO_NET_F_MTU,
    VIRTIO_NET_F_STATUS, VIRTIO_NET_S_LINK_UP,
};
use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::abi::{VIRTIO_NET_F_ROCE, VIRTIO_RDMA_CONFIG_SPACE_SIZE, VIRTIO_RDMA_F_RINGS};
use crate::device::{self, RdmaDevice};
use crate::limits::{self, Limits, Mac};
use crate::vring::RdmaVring;

/// receiveq1.
pub const RXQ: usize = 0;
/// transmitq1.
pub const TXQ: usize = 1;
/// The net control queue (at 2N, N = 1 queue pair).
pub const CTRLQ: usize = 2;
/// The first RoCE queue (B = 2N + 1 of the design): the RoCE control
/// queue; the ID-42 layout follows, shifted by this.
pub const ROCE_BASE: usize = 3;

/// Features the net personality offers: the transport's as on ID 42, a
/// MAC, an MTU (the port's, `--mtu`), a link status, the control queue
/// with RX mode commands, and the RoCE queues. Never an ID-42 bit: those
/// numbers mean other things here (`VIRTIO_RDMA_F_RINGS`, bit 0, is
/// `VIRTIO_NET_F_CSUM`). No offload, no MRG_RXBUF, no MQ: a frame is at
/// most the MTU and a VLAN-tagged Ethernet header, in one buffer (a
/// chain of pages when the MTU is above 1500: Linux's big packets).
pub const FEATURES: u64 = device::FEATURES
    | (1 << VIRTIO_NET_F_MAC)
    | (1 << VIRTIO_NET_F_MTU)
    | (1 << VIRTIO_NET_F_STATUS)
    | (1 << VIRTIO_NET_F_CTRL_VQ)
    | (1 << VIRTIO_NET_F_CTRL_RX)
    | (1 << VIRTIO_NET_F_ROCE);

/// Feature bits 24..=49: the transport's (ring layout, VERSION_1, ...),
/// which mean the same on every device type.
const TRANSPORT_FEATURES: u64 = ((1 << 50) - 1) & !((1 << 24) - 1);

/// What the RoCE part negotiated, in ID-42 terms, from what the driver
/// acked on the net device: the transport bits as acked, and the rings
/// mode if it acked [`VIRTIO_NET_F_ROCE`] (which implies it). ROCE requires
/// the control queue; a driver that acks it without `CTRL_VQ` gets no RoCE
/// (its queue numbering would not be the one the device serves).
pub fn roce_features(acked: u64) -> u64 {
    let roce = acked & (1 << VIRTIO_NET_F_ROCE) != 0 && acked & (1 << VIRTIO_NET_F_CTRL_VQ) != 0;
    (acked & TRANSPORT_FEATURES) | if roce { 1 << VIRTIO_RDMA_F_RINGS } else { 0 }
}

/// `struct virtio_net_hdr_v1` (VERSION_1 is always negotiated, so this is
/// every frame's header, also `num_buffers` without MRG_RXBUF).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioNetHdr {
    /// `VIRTIO_NET_HDR_F_*`.
    pub flags: u8,
    /// `VIRTIO_NET_HDR_GSO_*`: none, as no GSO is offered.
    pub gso_type: u8,
    /// Ethernet + IP + TCP/UDP header length (GSO).
    pub hdr_len: U16,
    /// GSO segment size.
    pub gso_size: U16,
    /// Checksum offload: where to start.
    pub csum_start: U16,
    /// Checksum offload: where to store, from `csum_start`.
    pub csum_offset: U16,
    /// Buffers the frame took (always one here).
    pub num_buffers: U16,
}

/// Bytes of [`VirtioNetHdr`].
pub const HDR_LEN: usize = size_of::<VirtioNetHdr>();
/// Shortest Ethernet frame taken: a header (the guest pads to 60 itself).
pub const MIN_FRAME: usize = 14;
/// Bytes of an Ethernet frame beyond its payload (the MTU): the header
/// with a VLAN tag (no FCS: neither virtio-net nor a TAP carries it).
pub const FRAME_OVERHEAD: usize = 18;
/// Longest Ethernet frame of any port: the largest MTU, a VLAN tag, the
/// header. A port's own is [`NetPort::max_frame`] (1518 at the default
/// 1500, Linux's `GOOD_PACKET_LEN`).
pub const MAX_FRAME: usize = limits::MAX_MTU as usize + FRAME_OVERHEAD;
/// A frame with its virtio header, as it sits in a chain.
pub type FrameBuf = [u8; HDR_LEN + MAX_FRAME];

const _: () = assert!(HDR_LEN == 12);

/// `struct virtio_net_config` (virtio spec 1.4) with the RoCE part's
/// fields at 28.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioNetConfig {
    /// The device's MAC (`VIRTIO_NET_F_MAC`).
    pub mac: [u8; 6],
    /// `VIRTIO_NET_S_*` (`VIRTIO_NET_F_STATUS`).
    pub status: U16,
    /// Queue pairs (read with MQ or RSS only).
    pub max_virtqueue_pairs: U16,
    /// MTU (`VIRTIO_NET_F_MTU`).
    pub mtu: U16,
    /// Speed in Mb/s (`VIRTIO_NET_F_SPEED_DUPLEX`).
    pub speed: U32,
    /// Duplex (`VIRTIO_NET_F_SPEED_DUPLEX`).
    pub duplex: u8,
    /// RSS: key size.
    pub rss_max_key_size: u8,
    /// RSS: indirection table length.
    pub rss_max_indirection_table_length: U16,
    /// RSS/hash report: hash types.
    pub supported_hash_types: U32,
    /// Tunnel offloads (the specification's, not Linux 7.3's yet).
    pub supported_tunnel_types: U32,
    /// Queues of the RoCE part, from [`ROCE_BASE`] (`VIRTIO_NET_F_ROCE`).
    pub roce_num_vqs: U16,
    /// Zero.
    pub reserved: U16,
}

const _: () = assert!(size_of::<VirtioNetConfig>() == 32);
const _: () = assert!(std::mem::offset_of!(VirtioNetConfig, mtu) == 10);
const _: () = assert!(std::mem::offset_of!(VirtioNetConfig, supported_tunnel_types) == 24);
const _: () = assert!(std::mem::offset_of!(VirtioNetConfig, roce_num_vqs) == 28);

/// The net personality's config space: [`VirtioNetConfig`], then zeroes
/// (the same 256 bytes as ID 42's, so QEMU's front end does not change).
pub fn config_space(limits: &Limits) -> [u8; VIRTIO_RDMA_CONFIG_SPACE_SIZE] {
    let roce = u16::try_from(limits.roce_queues()).unwrap_or(u16::MAX);
    let cfg = VirtioNetConfig {
        mac: limits.mac().0,
        status: U16::new(VIRTIO_NET_S_LINK_UP as u16),
        max_virtqueue_pairs: U16::new(1),
        mtu: U16::new(limits.mtu()),
        speed: U32::new(0),
        duplex: 0,
        rss_max_key_size: 0,
        rss_max_indirection_table_length: U16::new(0),
        supported_hash_types: U32::new(0),
        supported_tunnel_types: U32::new(0),
        roce_num_vqs: U16::new(roce),
        reserved: U16::new(0),
    };
    let mut space = [0u8; VIRTIO_RDMA_CONFIG_SPACE_SIZE];
    let bytes = cfg.as_bytes();
    space[..bytes.len()].copy_from_slice(bytes);
    space
}

/// The Ethernet side of one device: its MAC, its own vrings, the
/// lock that orders deliveries into its receive queue, and the RX mode
/// its driver set.
#[derive(Debug)]
pub struct NetPort {
    mac: Mac,
    /// Longest frame the port sends and takes: its MTU and
    /// [`FRAME_OVERHEAD`].
    max_frame: usize,
    /// receiveq, transmitq and (the net personality's) controlq, set once:
    /// at start, or by the NIC's frontend (`nic.rs`).
    vrings: OnceLock<Vec<RdmaVring>>,
    /// Held while a frame goes into the receive queue: frames come from
    /// every other device's thread, and a buffer taken must be the one
    /// returned.
    rx: Mutex<()>,
    /// `VIRTIO_NET_CTRL_RX_PROMISC` as the driver set it (recorded only:
    /// the switch delivers what is addressed to the device whatever it says).
    promisc: AtomicBool,
    /// `VIRTIO_NET_CTRL_RX_ALLMULTI` (recorded only, likewise).
    allmulti: AtomicBool,
    /// The broadcast and multicast frames it may still send.
    flood: Mutex<FloodLimit>,
}

impl NetPort {
    /// The port of a device with MAC `mac` and Ethernet MTU `mtu` (at
    /// most [`limits::MAX_MTU`]: frames are read into a [`FrameBuf`]).
    pub fn new(mac: Mac, mtu: u16) -> Self {
        NetPort {
            mac,
            max_frame: usize::from(mtu.min(limits::MAX_MTU)) + FRAME_OVERHEAD,
            vrings: OnceLock::new(),
            rx: Mutex::new(()),
            promisc: AtomicBool::new(false),
            allmulti: AtomicBool::new(false),
            flood: Mutex::new(FloodLimit::default()),
        }
    }

    /// The device's MAC: the only source its frames may have, and the
    /// address the switch delivers to.
    pub fn mac(&self) -> Mac {
        self.mac
    }

    /// Longest frame (without the virtio header) the port sends and
    /// takes; a longer one is dropped, as a switch drops what exceeds a
    /// port's MTU.
    pub fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// Whether the port may send `frame` (from its destination MAC on)
    /// now: unicast always, a group-addressed frame within its storm
    /// control ([`flood`]).
    pub fn may_send(&self, frame: &[u8]) -> bool {
        !flood::is_group(frame)
            || self
                .flood
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .allow(Instant::now())
    }

    /// Gives the port its vrings (receiveq, transmitq and, for the net
    /// personality, controlq).
    pub fn set_vrings(&self, vrings: Vec<RdmaVring>) {
        let _ = self.vrings.set(vrings);
    }

    fn vring(&self, index: usize) -> Option<&RdmaVring> {
        self.vrings.get().and_then(|v| v.get(index))
    }

    /// The RX mode the driver set: (promiscuous, all-multicast).
    pub fn rx_mode(&self) -> (bool, bool) {
        (
            self.promisc.load(Ordering::Relaxed),
            self.allmulti.load(Ordering::Relaxed),
        )
    }

    /// Forgets what the driver set (device reset). Counters stay, as the
    /// RoCE part's do.
    pub fn reset(&self) {
        self.promisc.store(false, Ordering::Relaxed);
        self.allmulti.store(false, Ordering::Relaxed);
    }
}

/// Serves net vring `index` (below [`ROCE_BASE`]) of `dev` after a kick.
pub fn process_queue(
    dev: &RdmaDevice,
    port: &NetPort,
    index: usize,
    vring: &RdmaVring,
) -> io::Result<()> {
    match index {
        TXQ => tx::process(dev, port, vring),
        CTRLQ => ctrl::process(port, dev.ctrl(), vring),
        _ => {
            // New receive buffers: they are taken when frames come.
            debug!("{}: receive queue kicked", dev.name());
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use virtio_bindings::bindings::virtio_config::VIRTIO_F_VERSION_1;

    #[test]
    fn features_never_carry_id42_bits() {
        assert_eq!(FEATURES & (1 << VIRTIO_RDMA_F_RINGS), 0, "bit 0 is CSUM");
        assert_ne!(FEATURES & (1 << 58), 0);
        let acked = FEATURES;
        assert_eq!(
            roce_features(acked),
            (1 << VIRTIO_F_VERSION_1) | (acked & TRANSPORT_FEATURES) | (1 << VIRTIO_RDMA_F_RINGS)
        );
        assert_eq!(roce_features(acked & !(1 << VIRTIO_NET_F_ROCE)) & 1, 0);
        assert_eq!(roce_features(acked & !(1 << VIRTIO_NET_F_CTRL_VQ)) & 1, 0);
        // A net bit that is an ID-42 number elsewhere does not leak.
        assert_eq!(roce_features(1 << VIRTIO_NET_F_MAC), 0);
    }
}
