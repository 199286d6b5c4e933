// SPDX-License-Identifier: GPL-2.0
//! The ID-42 device's NIC served by the backend (`--nic-socket`): a
//! second vhost-user frontend, QEMU's stock `virtio-net-pci` on
//! `-netdev vhost-user`, whose receive and transmit queues are the
//! device's port ([`NetPort`]).
//!
//! Why: on a network, a RoCE port and its guest's Ethernet must be one
//! port. The guest's kernel resolves a peer's MAC by ARP on the netdev its
//! RDMA port is bound to, peers answer to that netdev's MAC and IP, and
//! the device's RoCEv2 frames must leave with them. With QEMU's own NIC
//! the ID-42 device could only reach devices of this process; with this
//! one its port is on the switch or the uplink exactly as the net
//! personality's is (the port's paths, `rx.rs`, `tx.rs`, `uplink.rs`,
//! do not tell them apart).
//!
//! QEMU keeps what is virtio-net's own: the config space (MAC, status,
//! the MTU of its `host_mtu`, which must be the backend's `--mtu`) and
//! the control queue. The backend serves receiveq1 and transmitq1 and
//! offers the ring and MTU features; no offload, no mergeable buffers,
//! one queue pair, as the net personality.
//!
//! Like the device's own socket, the NIC's serves one QEMU connection; a
//! restarted backend serves both again, and QEMU's `reconnect-ms` finds
//! them.

use std::io;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use vhost::vhost_user::message::VhostUserProtocolFeatures;
use vhost_user_backend::{VhostUserBackend, VhostUserDaemon};
use virtio_bindings::bindings::virtio_net::VIRTIO_NET_F_MTU;
use vm_memory::{GuestMemoryAtomic, GuestMemoryMmap};
use vmm_sys_util::epoll::EventSet;
use vmm_sys_util::event::{
    new_event_consumer_and_notifier, EventConsumer, EventFlag, EventNotifier,
};

use super::{tx, NetPort, RXQ, TXQ};
use crate::device::{self, RdmaDevice};
use crate::vring::{Pass, RdmaVring, VringHub};

/// Virtio features offered: the transport's, as the device's, and the
/// MTU (QEMU offers it, with its `host_mtu`, only if the backend does).
pub const FEATURES: u64 = device::FEATURES | (1 << VIRTIO_NET_F_MTU);

/// receiveq1 and transmitq1 (QEMU serves the control queue itself).
const QUEUES: usize = 2;

/// The largest queue QEMU's virtio-net may ask for (its
/// `rx_queue_size` and `tx_queue_size` are at most 1024), whatever the
/// RDMA device's `--queue-size`.
const MAX_QUEUE_SIZE: usize = 1024;

/// How long [`spawn`] waits for the NIC's socket to be listened on.
const LISTEN_WAIT: Duration = Duration::from_secs(5);

/// The NIC's vhost-user backend: the device whose port it is.
struct NicBackend {
    dev: Arc<RdmaDevice>,
    /// Ends the library's worker thread (it serves both queues) when the
    /// daemon is done: without one it would wait for kicks forever, and
    /// the daemon's drop with it.
    exit: (EventConsumer, EventNotifier),
}

impl NicBackend {
    fn port(&self) -> Option<&NetPort> {
        self.dev.net()
    }
}

impl VhostUserBackend for NicBackend {
    type Bitmap = ();
    type Vring = RdmaVring;

    fn num_queues(&self) -> usize {
        QUEUES
    }

    fn max_queue_size(&self) -> usize {
        MAX_QUEUE_SIZE
    }

    fn features(&self) -> u64 {
        FEATURES
    }

    fn acked_features(&self, features: u64) {
        debug!(
            "{}: NIC driver acked features {features:#x}",
            self.dev.name()
        );
    }

    fn protocol_features(&self) -> VhostUserProtocolFeatures {
        // No MQ (one queue pair), no CONFIG (QEMU's virtio-net keeps its
        // config space for a vhost-user peer).
        VhostUserProtocolFeatures::REPLY_ACK
    }

    fn reset_device(&self) {
        if let Some(port) = self.port() {
            port.reset();
        }
    }

    fn set_event_idx(&self, enabled: bool) {
        debug!("{}: NIC EVENT_IDX {enabled}", self.dev.name());
    }

    fn update_memory(&self, _mem: GuestMemoryAtomic<GuestMemoryMmap>) -> io::Result<()> {
        // Shared with the library, replaced in place (each vring reads it).
        Ok(())
    }

    fn exit_event(&self, _thread_index: usize) -> Option<(EventConsumer, EventNotifier)> {
        let (consumer, notifier) = &self.exit;
        match (consumer.try_clone(), notifier.try_clone()) {
            (Ok(c), Ok(n)) => Some((c, n)),
            (Err(e), _) | (_, Err(e)) => {
                warn!("{}: NIC: no exit event: {e}", self.dev.name());
                None
            }
        }
    }

    fn handle_event(
        &self,
        device_event: u16,
        _evset: EventSet,
        vrings: &[RdmaVring],
        _thread_id: usize,
    ) -> io::Result<()> {
        let Some(port) = self.port() else {
            return Ok(());
        };
        // One interrupt per batch of frames sent.
        let _pass = Pass::begin();
        match (usize::from(device_event), vrings.get(TXQ)) {
            (TXQ, Some(vring)) => {
                // Not returned: an error ends the library's one worker
                // thread, and with it the NIC (a guest's bad ring must
                // cost that guest its frames, not its NIC for good).
                if let Err(e) = tx::process(&self.dev, port, vring) {
                    self.dev
                        .ctrl()
                        .guest_warn(format_args!("NIC transmit queue: {e}"));
                }
            }
            // New receive buffers: taken when frames come.
            (RXQ, _) => {}
            (other, _) => warn!("{}: NIC: unexpected event {other}", self.dev.name()),
        }
        Ok(())
    }
}

/// The thread serving a device's NIC, and its socket.
pub struct Nic {
    thread: JoinHandle<()>,
    socket: PathBuf,
}

impl Nic {
    /// Ends the NIC's service once its frontend has disconnected: waits
    /// for that, or, if none ever connected, ends the wait for one.
    pub fn end(self) {
        if !self.thread.is_finished() {
            // A connection that closes at once: the daemon's accept, if it
            // still waits, returns it and its serve then ends. Connected
            // to a QEMU, it accepts no more: this one goes nowhere.
            let _ = UnixStream::connect(&self.socket);
        }
        if self.thread.join().is_err() {
            warn!("the NIC thread panicked");
        }
    }
}

/// Serves `dev`'s NIC on `socket` on a thread of its own, until its
/// frontend disconnects: the socket is listened on when this returns.
/// `dev` must have a port (`Limits::nic`).
pub fn spawn(dev: &Arc<RdmaDevice>, socket: &Path) -> io::Result<Nic> {
    let Some(port) = dev.net() else {
        return Err(io::Error::other("the device has no port for a NIC"));
    };
    let mem = GuestMemoryAtomic::new(GuestMemoryMmap::new());
    let hub = VringHub::new(1)?;
    let backend = Arc::new(NicBackend {
        dev: dev.clone(),
        exit: new_event_consumer_and_notifier(EventFlag::NONBLOCK)?,
    });
    let name = format!("{}-nic", dev.name());
    let mut daemon = hub
        .collect(|| VhostUserDaemon::new(name.clone(), backend, mem))
        .map_err(|e| io::Error::other(format!("{name}: {e}")))?;
    port.set_vrings(hub.vrings());
    match std::fs::remove_file(socket) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let path = socket.to_path_buf();
    let thread = thread::Builder::new()
        .name("vrdma-nic".to_string())
        .spawn(move || {
            info!(
                "{name}: serving the guest's NIC (virtio-net receiveq, transmitq) on {}",
                path.display()
            );
            match daemon.serve(&path) {
                Ok(()) => info!("{name}: NIC frontend disconnected"),
                Err(e) => warn!("{name}: NIC: {e}"),
            }
        })?;
    // Listening before the device's own socket is: a QEMU started when
    // that appears finds both.
    let start = Instant::now();
    while !socket.exists() {
        if thread.is_finished() || start.elapsed() > LISTEN_WAIT {
            return Err(io::Error::other(format!(
                "{}: the NIC's socket did not come up",
                socket.display()
            )));
        }
        thread::sleep(Duration::from_millis(5));
    }
    Ok(Nic {
        thread,
        socket: socket.to_path_buf(),
    })
}
