// SPDX-License-Identifier: GPL-2.0
//! The receive side of a net port: one frame into one buffer of the
//! device's receive queue, in the guest memory of that queue's frontend.
//!
//! Without MRG_RXBUF a frame takes exactly one buffer (Linux posts
//! buffers of 12 + 1518 bytes, or chains of pages for an MTU above 1500),
//! so a buffer that cannot hold a frame of the port's MTU is the driver's
//! error: it is returned empty and the frame is dropped, rather than
//! spending every buffer of the queue on one frame. A frame longer than
//! the port's MTU allows (from a port of a larger MTU) is dropped before
//! it takes a buffer, as a switch drops it. With no buffer, the frame is
//! dropped too, as a NIC drops what it has no room for: the sender must
//! not wait on a receiver (another tenant).

use vhost_user_backend::VringT;
use virtio_queue::QueueT;
use vm_memory::GuestAddressSpace;

use super::{NetPort, HDR_LEN, RXQ};
use crate::ctrl::Ctrl;
use crate::stats::Counter;
use crate::vring::write_parts;

impl NetPort {
    /// Writes `hdr` (a [`super::VirtioNetHdr`]) and `frame` into the
    /// next buffer of the receive queue; `ctrl` is this device's control
    /// engine (its counters and warnings). Runs on the sender's
    /// thread: the used ring's interrupt goes out at the end of that
    /// thread's [`crate::vring::Pass`].
    pub(crate) fn deliver(&self, ctrl: &Ctrl, hdr: &[u8], frame: &[u8]) {
        let stats = ctrl.stats();
        let len = hdr.len() + frame.len();
        if len > HDR_LEN + self.max_frame {
            stats.inc(Counter::NetRxDropped);
            return;
        }
        let Some(vring) = self.vring(RXQ) else {
            stats.inc(Counter::NetRxDropped);
            return;
        };
        let _rx = self.rx.lock().unwrap_or_else(|e| e.into_inner());
        let mem = vring.mem().memory();
        let chain = {
            let mut state = vring.get_mut();
            if state.get_queue().ready() && state.is_enabled() {
                state.get_queue_mut().pop_descriptor_chain(&*mem)
            } else {
                None
            }
        };
        let Some(chain) = chain else {
            // No buffer, or the queue is not running.
            stats.inc(Counter::NetRxDropped);
            return;
        };
        let head = chain.head_index();
        let used = match write_parts(&mem, chain, &[hdr, frame]) {
            Ok(()) => u32::try_from(len).unwrap_or(u32::MAX),
            Err(e) => {
                ctrl.guest_warn(format_args!(
                    "receive buffer {head}: {e}; frame dropped, buffer returned empty"
                ));
                0
            }
        };
        if let Err(e) = vring.add_used(head, used) {
            ctrl.guest_warn(format_args!("receive queue: used ring: {e}"));
            stats.inc(Counter::NetRxDropped);
            return;
        }
        vring.used_grew(false);
        if used == 0 {
            stats.inc(Counter::NetRxDropped);
        } else {
            stats.inc(Counter::NetRxFrames);
            stats.add(Counter::NetRxBytes, frame.len() as u64);
        }
    }
}
