// SPDX-License-Identifier: GPL-2.0
//! The switch: every net-personality device of this process, known by its
//! configured MAC, and the forwarding of one frame between them.
//!
//! Each device's guests are a tenant, so the switch forwards only what is
//! addressed to a device: a unicast frame to the device with that MAC,
//! broadcast and multicast to every other device. Unknown unicast is
//! dropped, not flooded (flooding would show one tenant's traffic to
//! every other), and so is a frame to the sender's own MAC. A device
//! cannot learn another address: sources are checked against the MAC
//! before a frame gets here (`tx.rs`), and the driver cannot change its
//! MAC (`VIRTIO_NET_F_CTRL_MAC_ADDR` is not offered).
//!
//! A device joins when it starts to serve ([`attach`]) and leaves when its
//! [`Attachment`] is dropped (its frontend went away).

use std::io;
use std::sync::{Arc, Weak};

use parking_lot::RwLock;

use super::HDR_LEN;
use crate::device::RdmaDevice;
use crate::limits::Mac;
use crate::stats::Counter;

static PORTS: RwLock<Vec<(Mac, Weak<RdmaDevice>)>> = RwLock::new(Vec::new());

/// A device's place in the switch; dropping it takes the device out.
#[derive(Debug)]
pub struct Attachment {
    dev: Weak<RdmaDevice>,
}

impl Drop for Attachment {
    fn drop(&mut self) {
        PORTS
            .write()
            .retain(|(_, d)| !Weak::ptr_eq(d, &self.dev) && d.strong_count() > 0);
    }
}

/// Puts `dev` in the switch under `mac`. Refused if a live device has that
/// MAC already: frames to it would have two destinations.
pub fn attach(dev: &Arc<RdmaDevice>, mac: Mac) -> io::Result<Attachment> {
    let mut ports = PORTS.write();
    ports.retain(|(_, d)| d.strong_count() > 0);
    if ports.iter().any(|(m, _)| *m == mac) {
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("MAC {mac} is another net device's of this process"),
        ));
    }
    let weak = Arc::downgrade(dev);
    ports.push((mac, weak.clone()));
    Ok(Attachment { dev: weak })
}

/// Forwards the frame in `record` (a virtio header for the receiver, then
/// the frame) from `src` (whose source MAC was checked): to the device
/// with its destination MAC, or to every other device for a group
/// address. Whether the switch took it (`false`: unknown or own unicast,
/// counted as `src`'s transmit drop).
pub fn forward(src: &RdmaDevice, record: &[u8]) -> bool {
    let Some(dst) = record.get(HDR_LEN..HDR_LEN + 6) else {
        return false;
    };
    let is_src = |d: &Weak<RdmaDevice>| std::ptr::eq(d.as_ptr(), src);
    // Deliveries happen under the read lock: they take no switch lock, and
    // the list does not change under a frame (a device leaving waits).
    let ports = PORTS.read();
    if dst[0] & 1 != 0 {
        // Broadcast and multicast: every other device.
        for (_, d) in ports.iter().filter(|(_, d)| !is_src(d)) {
            if let Some(dev) = d.upgrade() {
                dev.deliver(record);
            }
        }
        return true;
    }
    let to = ports
        .iter()
        .find(|(m, d)| m.0 == dst && !is_src(d))
        .and_then(|(_, d)| d.upgrade());
    match to {
        Some(dev) => {
            dev.deliver(record);
            true
        }
        None => {
            src.ctrl().stats().inc(Counter::NetTxDropped);
            false
        }
    }
}
