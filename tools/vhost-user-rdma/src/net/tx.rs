// SPDX-License-Identifier: GPL-2.0
//! The transmit queue: each chain is one frame behind a
//! `struct virtio_net_hdr_v1`, copied out of the guest into one buffer on
//! the stack, checked, returned to the driver, and handed to the switch.
//!
//! A chain is returned (used length 0) whatever happens to its frame, so
//! a bad frame costs the guest that frame only. What is refused: a chain
//! with a device-writable part or longer than a header and the longest
//! frame, a header asking for GSO (none was offered), a frame shorter
//! than an Ethernet header or longer than the port's MTU and 18 bytes
//! (1518 at 1500), and a source MAC
//! other than the device's (tenants must not impersonate each other).

use std::fmt;
use std::io;

use virtio_queue::DescriptorChain;
use vm_memory::{Bytes, GuestAddressSpace, GuestMemoryMmap};
use zerocopy::{FromBytes, IntoBytes};

use super::{switch, FrameBuf, NetPort, VirtioNetHdr, HDR_LEN, MAX_FRAME, MIN_FRAME};
use crate::device::RdmaDevice;
use crate::stats::Counter;
use crate::vring::RdmaVring;

/// Serves every available chain of the transmit queue.
pub fn process(dev: &RdmaDevice, port: &NetPort, vring: &RdmaVring) -> io::Result<()> {
    let ctrl = dev.ctrl();
    // The queue's frontend's memory (an ID-42 device's NIC has its own).
    let mem = vring.mem().memory();
    let mem: &GuestMemoryMmap = &mem;
    // The one frame buffer of the hot path, reused for every chain.
    let mut buf: FrameBuf = [0; HDR_LEN + MAX_FRAME];
    // A chain is returned (used length 0) whatever happens to its frame:
    // the frame is in `buf` once read.
    vring.serve_chains(mem, |chain| {
        let head = chain.head_index();
        let frame = match read_chain(mem, chain, &mut buf, port.max_frame())
            .and_then(|len| check(port, &buf, len))
        {
            Ok(frame) => frame,
            Err(why) => {
                ctrl.stats().inc(Counter::NetTxDropped);
                match why {
                    Refused::Spoofed => ctrl.stats().inc(Counter::NetSpoofed),
                    why => {
                        ctrl.guest_warn(format_args!("transmit chain {head}: {why}; frame dropped"))
                    }
                }
                return 0;
            }
        };
        // Storm control, for the switch's ports and the network alike.
        if !port.may_send(&buf[HDR_LEN..HDR_LEN + frame]) {
            ctrl.stats().inc(Counter::NetTxDropped);
            ctrl.stats().inc(Counter::NetFloodLimited);
            return 0;
        }
        // The receivers' header over the sender's: no offloads, one buffer.
        let hdr = VirtioNetHdr {
            num_buffers: 1.into(),
            ..VirtioNetHdr::default()
        };
        if let Some(up) = dev.uplink() {
            // On a network: the frame goes out as it is.
            match up.send(&buf[HDR_LEN..HDR_LEN + frame]) {
                Ok(()) => {
                    ctrl.stats().inc(Counter::NetTxFrames);
                    ctrl.stats().add(Counter::NetTxBytes, frame as u64);
                }
                Err(_) => ctrl.stats().inc(Counter::NetTxDropped),
            }
            return 0;
        }
        buf[..HDR_LEN].copy_from_slice(hdr.as_bytes());
        if switch::forward(dev, &buf[..HDR_LEN + frame]) {
            ctrl.stats().inc(Counter::NetTxFrames);
            ctrl.stats().add(Counter::NetTxBytes, frame as u64);
        }
        0
    })
}

/// Why a transmitted chain was not forwarded.
#[derive(Debug)]
enum Refused {
    /// Part of the chain is device-writable.
    Writable,
    /// More bytes than a header and the port's longest frame.
    TooLong(u64, usize),
    /// A descriptor could not be read.
    Memory(String),
    /// Shorter than a header and an Ethernet header.
    TooShort(usize),
    /// The header asks for GSO.
    Gso(u8),
    /// The source MAC is not the device's (counted, not logged: a guest
    /// could make every frame one).
    Spoofed,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Writable => f.write_str("a device-writable descriptor"),
            Refused::TooLong(n, max) => write!(
                f,
                "{n} bytes, more than a {HDR_LEN}-byte header and a {max}-byte frame (the MTU's)"
            ),
            Refused::Memory(e) => write!(f, "cannot read it ({e})"),
            Refused::TooShort(n) => write!(
                f,
                "{n} bytes, less than a {HDR_LEN}-byte header and a {MIN_FRAME}-byte frame"
            ),
            Refused::Gso(t) => write!(f, "gso_type {t}, but no GSO was offered"),
            Refused::Spoofed => f.write_str("source MAC is not the device's"),
        }
    }
}

/// Copies the chain's bytes into `buf`: how many. Reads no descriptor
/// once the chain proved too long or writable, so a guest's lengths never
/// size a copy.
fn read_chain(
    mem: &GuestMemoryMmap,
    chain: DescriptorChain<&GuestMemoryMmap>,
    buf: &mut FrameBuf,
    max_frame: usize,
) -> Result<usize, Refused> {
    // Frames up to the port's MTU only, whatever room the buffer has.
    let buf = &mut buf[..HDR_LEN + max_frame];
    let mut len = 0usize;
    for d in chain {
        if d.is_write_only() {
            return Err(Refused::Writable);
        }
        let n = d.len() as usize;
        let Some(to) = buf.get_mut(len..len + n) else {
            return Err(Refused::TooLong(len as u64 + u64::from(d.len()), max_frame));
        };
        mem.read_slice(to, d.addr())
            .map_err(|e| Refused::Memory(format!("buffer at {:#x}: {e}", d.addr().0)))?;
        len += n;
    }
    Ok(len)
}

/// Checks the header and frame of a chain of `len` bytes in `buf`: the
/// frame's length.
fn check(port: &NetPort, buf: &FrameBuf, len: usize) -> Result<usize, Refused> {
    if len < HDR_LEN + MIN_FRAME {
        return Err(Refused::TooShort(len));
    }
    let (hdr, frame) = buf[..len].split_at(HDR_LEN);
    let hdr = VirtioNetHdr::read_from_bytes(hdr).map_err(|_| Refused::TooShort(len))?;
    if hdr.gso_type != 0 {
        return Err(Refused::Gso(hdr.gso_type));
    }
    if frame[6..12] != port.mac().0 {
        return Err(Refused::Spoofed);
    }
    Ok(frame.len())
}
