// SPDX-License-Identifier: GPL-2.0
//! The uplink: a net-personality device's port on a host network, a TAP
//! device (`--uplink tap:NAME`) that the operator attaches to a bridge or
//! an OVS switch as one attaches a VM's TAP.
//!
//! A device with an uplink is not in the process's switch: its guest's
//! Ethernet goes out the TAP as it is ([`Uplink::send`]), and whatever the
//! network sends it comes back to it ([`Uplink::spawn_reader`]), so the
//! guest's ARP, ND and IP traffic share the port with its RoCE frames, as
//! on a RoCE NIC. The reader takes frames to the device's MAC and group
//! frames only (a bridge floods unknown unicast to every port); RoCEv2
//! frames go to the RDMA engine if the guest's driver runs the RoCE part
//! (`engine::wire`), every other frame to the guest's receive queue.
//!
//! The RDMA engine sends its own frames ([`Uplink::send`] too), with the
//! guest's MAC and IP as their source and the destination's MAC from the
//! port's neighbours: the IP-to-MAC pairs the port has seen arrive (ARP
//! senders, IP sources). The guest's kernel resolves a peer's address on
//! this same port before it connects a QP or makes an address handle (its
//! ARP request goes out, the reply comes in and is seen here), so the
//! backend needs no ARP of its own.

use std::collections::HashMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread;

use etherparse::{NetSlice, SlicedPacket};
use log::{debug, warn};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use parking_lot::RwLock;
use vmm_sys_util::ioctl::ioctl_with_mut_ref;
use vmm_sys_util::ioctl_iow_nr;

use crate::device::RdmaDevice;

/// `IFNAMSIZ`: an interface name and its NUL.
const IFNAMSIZ: usize = 16;

/// An interface name as the kernel takes it: 1 to 15 bytes, none of them
/// `/`, whitespace or NUL.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct IfName([u8; IFNAMSIZ]);

impl IfName {
    fn as_str(&self) -> &str {
        let len = self.0.iter().position(|&b| b == 0).unwrap_or(IFNAMSIZ);
        std::str::from_utf8(&self.0[..len]).unwrap_or("?")
    }
}

impl FromStr for IfName {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let ok = !s.is_empty()
            && s.len() < IFNAMSIZ
            && s != "."
            && s != ".."
            && !s
                .bytes()
                .any(|b| b == b'/' || b == b':' || b == 0 || b.is_ascii_whitespace());
        if !ok {
            return Err(format!(
                "'{s}' is not an interface name (1 to {} bytes, no '/', ':' or spaces)",
                IFNAMSIZ - 1
            ));
        }
        let mut name = [0; IFNAMSIZ];
        name[..s.len()].copy_from_slice(s.as_bytes());
        Ok(IfName(name))
    }
}

impl fmt::Display for IfName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for IfName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// What `--uplink` names: for now a TAP device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UplinkSpec {
    /// `tap:NAME`: the TAP device NAME (made if it does not exist, which
    /// needs CAP_NET_ADMIN; an operator's persistent TAP is opened as it is).
    Tap(IfName),
}

impl FromStr for UplinkSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            Some(("tap", name)) => Ok(UplinkSpec::Tap(name.parse()?)),
            _ => Err(format!("'{s}': an uplink is tap:NAME")),
        }
    }
}

impl fmt::Display for UplinkSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UplinkSpec::Tap(name) => write!(f, "tap:{name}"),
        }
    }
}

/// `struct ifreq` with the `ifr_flags` member (40 bytes on 64-bit Linux).
#[repr(C)]
struct IfReq {
    name: [u8; IFNAMSIZ],
    flags: u16,
    _rest: [u8; 22],
}

const IFF_TAP: u16 = 0x0002;
const IFF_NO_PI: u16 = 0x1000;
ioctl_iow_nr!(TUNSETIFF, b'T' as u32, 202, std::os::raw::c_int);

/// Frames the reader takes in a row before it looks at the timers.
const READ_BUDGET: usize = 256;

/// Neighbours kept at most: a sender on the link cannot grow the table
/// without bound (a new address then replaces an arbitrary old one).
const MAX_NEIGHBOURS: usize = 1024;

/// The IP-to-MAC pairs a port has seen arrive.
#[derive(Debug, Default)]
pub struct Neighbours(RwLock<HashMap<IpAddr, [u8; 6]>>);

impl Neighbours {
    /// The MAC `ip` was seen with, if any.
    pub fn get(&self, ip: &IpAddr) -> Option<[u8; 6]> {
        self.0.read().get(ip).copied()
    }

    /// Remembers who sent `frame`: an ARP packet's sender, an IP packet's
    /// source, with the frame's source MAC. Group and zero MACs, and
    /// unspecified or group IPs, teach nothing; nor does an ARP packet
    /// whose sender is not the frame's source.
    pub fn learn(&self, frame: &[u8]) {
        let Ok(p) = SlicedPacket::from_ethernet(frame) else {
            return;
        };
        let Some(src_mac) = frame.get(6..12).and_then(|m| <[u8; 6]>::try_from(m).ok()) else {
            return;
        };
        if src_mac[0] & 1 != 0 || src_mac == [0; 6] {
            return;
        }
        let ip = match p.net {
            Some(NetSlice::Ipv4(v4)) => IpAddr::from(v4.header().source()),
            Some(NetSlice::Ipv6(v6)) => IpAddr::from(v6.header().source()),
            Some(NetSlice::Arp(arp)) => {
                let Ok(a) = <[u8; 4]>::try_from(arp.sender_protocol_addr()) else {
                    return;
                };
                if arp.sender_hw_addr() != src_mac {
                    return;
                }
                IpAddr::from(a)
            }
            None => return,
        };
        if ip.is_unspecified() || ip.is_multicast() || self.get(&ip) == Some(src_mac) {
            return;
        }
        let mut n = self.0.write();
        if n.len() >= MAX_NEIGHBOURS && !n.contains_key(&ip) {
            if let Some(old) = n.keys().next().copied() {
                n.remove(&old);
            }
        }
        n.insert(ip, src_mac);
    }
}

/// One device's uplink: its TAP and its neighbours.
#[derive(Debug)]
pub struct Uplink {
    /// What it is, for logs (`tap:NAME`).
    name: String,
    /// The TAP (or, in tests, any descriptor that reads and writes one
    /// frame at a time).
    tap: File,
    neighbours: Neighbours,
    /// Tells the reader to end (the device stopped serving).
    stop: Arc<AtomicBool>,
    /// When the RDMA engine's earliest transport timer of this port's QPs
    /// runs out, in the engine's microseconds (`u64::MAX`: none); the
    /// reader wakes for it.
    timer: AtomicU64,
}

impl Uplink {
    /// Opens the uplink `spec` names.
    pub fn open(spec: UplinkSpec) -> io::Result<Self> {
        let UplinkSpec::Tap(name) = spec;
        // Non-blocking: the reader takes what waits, then sleeps in poll.
        let tap = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open("/dev/net/tun")
            .map_err(|e| io::Error::new(e.kind(), format!("/dev/net/tun: {e}")))?;
        let mut req = IfReq {
            name: name.0,
            flags: IFF_TAP | IFF_NO_PI,
            _rest: [0; 22],
        };
        // SAFETY: TUNSETIFF reads and writes one `struct ifreq`, which
        // `req` is (same size and layout for the name and flags it uses),
        // on a descriptor of /dev/net/tun this function owns.
        let ret = unsafe { ioctl_with_mut_ref(&tap, TUNSETIFF(), &mut req) };
        if ret < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("TAP {name}: {e}")));
        }
        Ok(Self::over(spec.to_string(), tap))
    }

    /// An uplink `name` over `frames`, a descriptor that reads and writes
    /// whole frames, non-blocking (a TAP, or in tests one end of a
    /// datagram socket pair).
    pub fn over(name: String, frames: File) -> Self {
        Uplink {
            name,
            tap: frames,
            neighbours: Neighbours::default(),
            stop: Arc::new(AtomicBool::new(false)),
            timer: AtomicU64::new(u64::MAX),
        }
    }

    /// Remembers who sent `frame` ([`Neighbours::learn`]): the reader
    /// does for every frame it takes.
    pub fn learn(&self, frame: &[u8]) {
        self.neighbours.learn(frame);
    }

    /// Puts `frame` (Ethernet header on) on the network. A TAP whose link
    /// is down, or a full queue, loses it as a wire would.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        (&self.tap).write(frame).map(|_| ())
    }

    /// The MAC the port has seen `ip` use, if any.
    pub fn neighbour(&self, ip: &IpAddr) -> Option<[u8; 6]> {
        self.neighbours.get(ip)
    }

    /// Has the reader run the engine's timers at `at` (µs of the engine's
    /// clock) if that is earlier than what it waits for.
    pub fn arm(&self, at: u64) {
        self.timer.fetch_min(at, Ordering::Relaxed);
    }

    /// Starts the thread that reads the TAP and hands each frame to
    /// `dev` ([`RdmaDevice::from_uplink`]) until [`Uplink::stop`] or until
    /// the device is gone; between frames it runs the engine's transport
    /// timers when the one armed ([`Uplink::arm`]) is due.
    pub fn spawn_reader(self: &Arc<Self>, dev: Weak<RdmaDevice>) -> io::Result<()> {
        let up = Arc::downgrade(self);
        let stop = self.stop.clone();
        stop.store(false, Ordering::Relaxed);
        let name = format!("vrdma-up-{}", self.name);
        thread::Builder::new().name(name).spawn(move || {
            // Room for the largest frame any MTU gives, and to spare: a
            // frame beyond the port's MTU is seen (and dropped) rather
            // than cut.
            let mut buf = vec![0u8; 65536];
            while !stop.load(Ordering::Relaxed) {
                let (Some(up), Some(dev)) = (up.upgrade(), dev.upgrade()) else {
                    break;
                };
                // Frames first, as many as wait (up to a budget): what
                // arrived may answer what a timer would send again.
                let mut frames = 0;
                while frames < READ_BUDGET {
                    match (&up.tap).read(&mut buf) {
                        Ok(n) => {
                            frames += 1;
                            up.neighbours.learn(&buf[..n]);
                            dev.from_uplink(&buf[..n]);
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => {
                            warn!("uplink {}: read: {e}; reader stops", up.name);
                            return;
                        }
                    }
                }
                // Then the engine's transport timers, if due.
                let now = crate::engine::wire::now_us();
                if up.timer.load(Ordering::Relaxed) <= now {
                    up.timer.store(u64::MAX, Ordering::Relaxed);
                    crate::engine::wire::tick(&dev);
                }
                if frames == READ_BUDGET {
                    continue;
                }
                // Sleep until a frame, the armed timer, or 200 ms (to see
                // the stop flag).
                let now = crate::engine::wire::now_us();
                let timer = up.timer.load(Ordering::Relaxed);
                let wait_ms = timer.saturating_sub(now).div_ceil(1000).min(200) as u16;
                let fd = up.tap.as_raw_fd();
                // SAFETY: `fd` is the TAP's, which `up` keeps open while
                // the borrow lives.
                let bfd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
                let mut fds = [PollFd::new(bfd, PollFlags::POLLIN)];
                match poll(&mut fds, PollTimeout::from(wait_ms)) {
                    Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                    Err(e) => {
                        warn!("uplink {}: poll: {e}; reader stops", up.name);
                        break;
                    }
                }
            }
            debug!("uplink reader ends");
        })?;
        Ok(())
    }

    /// Ends the reader (within 200 ms).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!("tap0".parse::<IfName>().is_ok());
        assert!("".parse::<IfName>().is_err());
        assert!("a-name-too-long-".parse::<IfName>().is_err());
        assert!("a/b".parse::<IfName>().is_err());
        assert!("a b".parse::<IfName>().is_err());
        assert_eq!(
            "tap:vr0".parse::<UplinkSpec>().unwrap().to_string(),
            "tap:vr0"
        );
        assert!("vr0".parse::<UplinkSpec>().is_err());
        assert!("af_packet:eth0".parse::<UplinkSpec>().is_err());
    }

    /// An Ethernet frame from `mac` carrying `payload` of `ethertype`.
    fn eth(mac: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&mac);
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    fn arp(sender_mac: [u8; 6], sender_ip: [u8; 4]) -> Vec<u8> {
        let mut a = vec![0, 1, 8, 0, 6, 4, 0, 2];
        a.extend_from_slice(&sender_mac);
        a.extend_from_slice(&sender_ip);
        a.extend_from_slice(&[0; 10]);
        a
    }

    fn ipv4_udp(src: [u8; 4]) -> Vec<u8> {
        let mut out = Vec::new();
        etherparse::PacketBuilder::ipv4(src, [10, 0, 2, 15], 64)
            .udp(1, 2)
            .write(&mut out, b"x")
            .expect("build");
        out
    }

    #[test]
    fn neighbours_are_learnt_from_arp_and_ip_sources() {
        let n = Neighbours::default();
        let m1 = [0x52, 0, 0, 0, 0, 1];
        let m2 = [0x52, 0, 0, 0, 0, 2];
        n.learn(&eth(m1, 0x0806, &arp(m1, [10, 0, 2, 16])));
        assert_eq!(n.get(&"10.0.2.16".parse().unwrap()), Some(m1));
        n.learn(&eth(m2, 0x0800, &ipv4_udp([10, 0, 2, 17])));
        assert_eq!(n.get(&"10.0.2.17".parse().unwrap()), Some(m2));
        // A moved address follows its latest sender.
        n.learn(&eth(m2, 0x0800, &ipv4_udp([10, 0, 2, 16])));
        assert_eq!(n.get(&"10.0.2.16".parse().unwrap()), Some(m2));
    }

    #[test]
    fn neighbours_refuse_what_teaches_nothing() {
        let n = Neighbours::default();
        let m1 = [0x52, 0, 0, 0, 0, 1];
        // ARP whose sender is not the frame's source.
        n.learn(&eth(
            [0x52, 0, 0, 0, 0, 9],
            0x0806,
            &arp(m1, [10, 0, 2, 16]),
        ));
        // A group source MAC, an unspecified source IP, a cut frame.
        n.learn(&eth(
            [0x01, 0, 0x5e, 0, 0, 1],
            0x0800,
            &ipv4_udp([10, 0, 2, 18]),
        ));
        n.learn(&eth(m1, 0x0800, &ipv4_udp([0, 0, 0, 0])));
        n.learn(&eth(m1, 0x0800, &ipv4_udp([10, 0, 2, 19])[..10]));
        assert!(n.0.read().is_empty());
    }

    #[test]
    fn neighbours_are_bounded() {
        let n = Neighbours::default();
        let m1 = [0x52, 0, 0, 0, 0, 1];
        for i in 0..(MAX_NEIGHBOURS as u32 + 100) {
            let ip = (0x0a00_0000 + i).to_be_bytes();
            n.learn(&eth(m1, 0x0800, &ipv4_udp(ip)));
        }
        assert_eq!(n.0.read().len(), MAX_NEIGHBOURS);
    }
}
