// SPDX-License-Identifier: GPL-2.0
//! The vhost-user device: features, config space, vrings, and the loop that
//! serves one frontend on one socket.
//!
//! A device is the ID-42 virtio-rdma device, or with `--net` the net
//! personality (`net/`): a virtio-net device whose own queues come first
//! and whose RoCE part is the ID-42 device from [`Limits::roce_base`] on.
//! This file only dispatches between the two. An ID-42 device may have
//! its guest's NIC served here too (`--nic-socket`, `net/nic.rs`): a
//! second frontend, a stock virtio-net, whose port is the RDMA port's.

use std::io;
use std::path::Path;
use std::sync::Arc;

use log::{debug, info, warn};
use vhost::vhost_user::message::{VhostUserProtocolFeatures, VhostUserVirtioFeatures};
use vhost_user_backend::{VhostUserBackend, VhostUserDaemon};
use virtio_bindings::bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::bindings::virtio_ring::{
    VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC,
};
use vm_memory::{GuestMemoryAtomic, GuestMemoryMmap};
use vmm_sys_util::epoll::EventSet;

use crate::abi::{self, VIRTIO_RDMA_CONFIG_SPACE_SIZE};
use crate::cpus::Cpus;
use crate::cq;
use crate::ctrl::Ctrl;
use crate::ctrlq;
use crate::engine;
use crate::fabric;
use crate::limits::Limits;
use crate::net::uplink::Uplink;
use crate::net::{self, switch, NetPort};
use crate::vring::{Mem, RdmaVring, VringHub};
use crate::worker::Worker;

/// Virtio features offered.
pub const FEATURES: u64 = (1 << VIRTIO_F_VERSION_1)
    | (1 << VIRTIO_RING_F_EVENT_IDX)
    | (1 << VIRTIO_RING_F_INDIRECT_DESC)
    | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits();

/// vhost-user protocol features offered: MQ (QEMU requires it and reads the
/// queue count), CONFIG (GET_CONFIG), REPLY_ACK, RESET_DEVICE.
pub fn protocol_features() -> VhostUserProtocolFeatures {
    VhostUserProtocolFeatures::MQ
        | VhostUserProtocolFeatures::CONFIG
        | VhostUserProtocolFeatures::REPLY_ACK
        | VhostUserProtocolFeatures::RESET_DEVICE
}

/// Errors that end a device.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// Setting up the device failed.
    #[error("{0}: cannot set up the device: {1}")]
    Setup(String, io::Error),
    /// vhost-user-backend failed.
    #[error("{0}: vhost-user: {1}")]
    Daemon(String, vhost_user_backend::Error),
}

/// One virtio-rdma device.
pub struct RdmaDevice {
    name: String,
    limits: Limits,
    config: [u8; VIRTIO_RDMA_CONFIG_SPACE_SIZE],
    ctrl: Ctrl,
    mem: Mem,
    /// The Ethernet side: the net personality's, or the ID-42 device's
    /// NIC when this backend serves it; `None` on an ID-42 device whose
    /// guest's NIC is QEMU's.
    net: Option<NetPort>,
    /// The port's host network (`--uplink`), if it has one: then not the
    /// process's switch.
    uplink: Option<Arc<Uplink>>,
}

impl RdmaDevice {
    /// A device named `name` (for logs) serving `limits` over `mem`, on
    /// the uplink they name, if any.
    pub fn new(name: &str, limits: Limits, mem: Mem) -> io::Result<Self> {
        let uplink = limits.uplink().map(Uplink::open).transpose()?;
        Self::on(name, limits, mem, uplink)
    }

    /// [`RdmaDevice::new`] on `uplink` (tests: an uplink over a socket).
    pub fn on(name: &str, limits: Limits, mem: Mem, uplink: Option<Uplink>) -> io::Result<Self> {
        let ctrl = Ctrl::new(name, limits, mem.clone())?;
        let config = if limits.net() {
            net::config_space(&limits)
        } else {
            limits.config_space()
        };
        let net = limits.has_port().then(|| {
            ctrl.stats().show_net();
            NetPort::new(limits.mac(), limits.mtu())
        });
        Ok(RdmaDevice {
            name: name.to_string(),
            limits,
            config,
            ctrl,
            mem,
            net,
            uplink: uplink.map(Arc::new),
        })
    }

    /// Key byte `key` for every new MR (see [`Ctrl::with_fixed_key_byte`]).
    #[cfg(feature = "fuzzing")]
    pub(crate) fn fix_key_byte(&mut self, key: u8) {
        self.ctrl.fix_key_byte(key);
    }

    /// Name used in log lines.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The control-command engine.
    pub fn ctrl(&self) -> &Ctrl {
        &self.ctrl
    }

    /// The Ethernet side, if the device has a port of the backend's (the
    /// net personality, or an ID-42 device with `--nic-socket`).
    pub fn net(&self) -> Option<&NetPort> {
        self.net.as_ref()
    }

    /// Hands the device its vrings, in index order: the net part's to its
    /// port, and the RoCE part's (from [`Limits::roce_base`], renumbered
    /// from 0) to the control engine, which so never sees the shift.
    pub fn set_vrings(&self, mut vrings: Vec<RdmaVring>) {
        let roce = vrings.split_off(self.limits.roce_base().min(vrings.len()));
        // An ID-42 device's NIC gets its own from its own frontend.
        if let (Some(port), true) = (&self.net, self.limits.net()) {
            port.set_vrings(vrings);
        }
        self.ctrl.set_vrings(roce);
    }

    /// The port's uplink, if it is on one.
    pub fn uplink(&self) -> Option<&Arc<Uplink>> {
        self.uplink.as_ref()
    }

    /// Takes `frame`, from the network on the uplink: a RoCEv2 frame to one
    /// of the RoCE part's GIDs (its driver adds them when it binds) to the
    /// RDMA engine, anything else to the guest's receive queue if it is to
    /// the port's MAC or a group. A bridge floods frames for unknown MACs to every port; this
    /// port's guest sees none of another's.
    pub fn from_uplink(self: &Arc<Self>, frame: &[u8]) {
        let Some(port) = &self.net else {
            return;
        };
        let Some(dst) = frame.get(..6) else {
            return;
        };
        let to_port = dst == port.mac().0;
        if !to_port && dst[0] & 1 == 0 {
            return;
        }
        // Longer than the port's MTU allows: dropped, RoCEv2 or not, as a
        // switch port drops it.
        if frame.len() > port.max_frame() {
            self.ctrl.stats().inc(crate::stats::Counter::NetRxDropped);
            return;
        }
        if to_port && self.ctrl.rings_acked() && engine::wire::received(self, frame) {
            return;
        }
        let hdr = net::VirtioNetHdr {
            num_buffers: 1.into(),
            ..net::VirtioNetHdr::default()
        };
        // Header and frame go into the guest's buffer as they are, never
        // joined in a record of the largest frame's size first.
        port.deliver(&self.ctrl, zerocopy::IntoBytes::as_bytes(&hdr), frame);
    }

    /// Delivers `record` (a virtio-net header and an Ethernet frame) into
    /// this device's receive queue (the switch's call; a no-op without a
    /// port).
    pub fn deliver(&self, record: &[u8]) {
        if let Some(port) = &self.net {
            let (hdr, frame) = record.split_at(record.len().min(net::HDR_LEN));
            port.deliver(&self.ctrl, hdr, frame);
        }
    }

    /// Serves vring `index` after a kick.
    pub fn process_queue(&self, index: usize, vring: &RdmaVring) -> io::Result<()> {
        let base = self.limits.roce_base();
        match &self.net {
            Some(port) if index < base => net::process_queue(self, port, index, vring),
            _ => self.process_roce_queue(index - base, vring),
        }
    }

    /// Serves vring `index` of the RoCE part (counted from its control
    /// queue) after a kick.
    fn process_roce_queue(&self, index: usize, vring: &RdmaVring) -> io::Result<()> {
        let max_cq = self.limits.max_cq() as usize;
        if index == usize::from(abi::VIRTIO_RDMA_CTRL_VQ) {
            return ctrlq::process(&self.ctrl, vring, &self.mem);
        }
        if index <= max_cq {
            // CQ vrings: new CQE buffers are taken when completions come.
            debug!("{}: CQ vring {index} kicked", self.name);
            return Ok(());
        }
        if Some(index) == self.limits.notify_vq() {
            // A doorbell: the rings are polled again.
            self.ctrl.wake_rings();
            return Ok(());
        }
        if let Some(n) = self.limits.comp_vq_of(index) {
            // New buffers: events waiting for one go out.
            cq::comp_vq_kicked(&self.ctrl, n);
            return Ok(());
        }
        if index >= self.limits.event_vq() {
            // Event buffers are taken when events come.
            debug!("{}: event vring kicked", self.name);
            return Ok(());
        }
        let slot = index - 1 - max_cq;
        let qpn = (slot / 2) as u32;
        if slot % 2 == 0 {
            engine::sq_kicked(&self.ctrl, qpn);
        } else {
            engine::rq_kicked(&self.ctrl, qpn);
        }
        Ok(())
    }

    /// The lane (`lane.rs`) whose thread serves vring `index`: a QP's SQ
    /// and RQ its QP's, every other vring lane 0.
    pub fn vring_lane(&self, index: usize) -> usize {
        let max_cq = self.limits.max_cq() as usize;
        let first_qp = self.limits.roce_base() + 1 + max_cq;
        let qps = 2 * self.limits.max_qp() as usize;
        match index.checked_sub(first_qp) {
            Some(slot) if slot < qps => self.ctrl.lanes().index_of((slot / 2) as u32),
            _ => 0,
        }
    }

    /// Polls the rings in guest memory of lane `lane`'s QPs once; whether
    /// the lane still polls them (else it waits for a doorbell).
    pub fn poll_rings(&self, lane: usize) -> bool {
        self.ctrl.poll_rings(lane, |qpn, sq, rq| {
            if rq {
                engine::rq_kicked(&self.ctrl, qpn);
            }
            if sq {
                engine::sq_kicked(&self.ctrl, qpn);
            }
        })
    }

    /// Runs lane `lane`'s due timers (RNR retries); returns when its next
    /// one is due.
    pub fn tick(&self, lane: usize) -> Option<std::time::Duration> {
        engine::tick(&self.ctrl, lane)
    }

    /// When lane `lane`'s next timer is due, if any.
    pub fn next_timer(&self, lane: usize) -> Option<std::time::Duration> {
        engine::next_timer(&self.ctrl, lane)
    }
}

impl VhostUserBackend for RdmaDevice {
    type Bitmap = ();
    type Vring = RdmaVring;

    fn num_queues(&self) -> usize {
        self.limits.num_queues()
    }

    fn max_queue_size(&self) -> usize {
        usize::from(self.limits.queue_size())
    }

    fn features(&self) -> u64 {
        if self.limits.net() {
            return net::FEATURES;
        }
        let rings = self
            .limits
            .rings()
            .map_or(0, |_| 1 << abi::VIRTIO_RDMA_F_RINGS);
        FEATURES | rings
    }

    fn acked_features(&self, features: u64) {
        debug!("{}: driver acked features {features:#x}", self.name);
        if self.limits.net() {
            // The RoCE part sees what it would on ID 42: the rings mode if
            // VIRTIO_NET_F_ROCE was acked, else no feature of its own.
            self.ctrl.set_acked_features(net::roce_features(features));
        } else {
            self.ctrl.set_acked_features(features);
        }
    }

    fn protocol_features(&self) -> VhostUserProtocolFeatures {
        protocol_features()
    }

    fn reset_device(&self) {
        self.ctrl.reset();
        // An ID-42 device's NIC is another function: its driver resets it.
        if let (Some(port), true) = (&self.net, self.limits.net()) {
            port.reset();
        }
    }

    fn set_event_idx(&self, enabled: bool) {
        // vhost-user-backend has set it on every vring already: each ring's
        // needs_notification (vring.rs, once per pass) and its
        // enable_notification (avail_event) follow it.
        debug!("{}: EVENT_IDX {enabled}", self.name);
    }

    fn get_config(&self, offset: u32, size: u32) -> Vec<u8> {
        let range = usize::try_from(offset).ok().and_then(|start| {
            let end = start.checked_add(usize::try_from(size).ok()?)?;
            (size > 0 && end <= self.config.len()).then_some(start..end)
        });
        match range {
            Some(r) => self.config[r].to_vec(),
            None => {
                self.ctrl.guest_warn(format_args!(
                    "config read of {size} bytes at offset {offset} is outside the \
                     {}-byte config space",
                    self.config.len()
                ));
                Vec::new()
            }
        }
    }

    fn set_config(&self, offset: u32, buf: &[u8]) -> io::Result<()> {
        // The config space is read-only. Failing the message would make
        // vhost-user-backend drop the whole connection, so the write is
        // ignored instead.
        self.ctrl.guest_warn(format_args!(
            "driver wrote {} bytes of read-only config space at offset {offset}; ignored",
            buf.len()
        ));
        Ok(())
    }

    fn update_memory(&self, _mem: GuestMemoryAtomic<GuestMemoryMmap>) -> io::Result<()> {
        // The same GuestMemoryAtomic is shared with the library; it has been
        // replaced in place.
        debug!("{}: guest memory table updated", self.name);
        Ok(())
    }

    fn queues_per_thread(&self) -> Vec<u64> {
        // No library worker threads: see vring.rs.
        Vec::new()
    }

    fn handle_event(
        &self,
        device_event: u16,
        _evset: EventSet,
        _vrings: &[RdmaVring],
        _thread_id: usize,
    ) -> io::Result<()> {
        warn!("{}: unexpected library event {device_event}", self.name);
        Ok(())
    }
}

/// Serves one frontend on `socket` until it disconnects. The socket file is
/// removed when this returns. With CPUs in `limits`, the calling thread is
/// pinned to them first, and so every thread the device starts.
/// With `nic` (`--nic-socket`), the guest's NIC is served on that socket
/// meanwhile (`net/nic.rs`), until its own frontend disconnects.
pub fn serve(socket: &Path, nic: Option<&Path>, limits: Limits) -> Result<(), DeviceError> {
    serve_with(socket, nic, limits, |_| {})
}

/// [`serve`], handing the device to `started` once it listens (for tests).
pub fn serve_with(
    socket: &Path,
    nic: Option<&Path>,
    limits: Limits,
    started: impl FnOnce(&Arc<RdmaDevice>),
) -> Result<(), DeviceError> {
    let name = socket
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| socket.display().to_string());
    let setup = |e| DeviceError::Setup(name.clone(), e);
    // Before the device starts a thread: they inherit it (see cpus.rs).
    if let Some(cpus) = limits.cpus() {
        cpus.pin_current_thread().map_err(setup)?;
    }
    let mem = GuestMemoryAtomic::new(GuestMemoryMmap::new());
    let dev = Arc::new(RdmaDevice::new(&name, limits, mem.clone()).map_err(setup)?);
    let hub = VringHub::new(limits.threads()).map_err(setup)?;
    let mut daemon = hub
        .collect(|| VhostUserDaemon::new(name.clone(), dev.clone(), mem))
        .map_err(|e| DeviceError::Daemon(name.clone(), e))?;
    let created = hub.vrings().len();
    if created != limits.num_queues() {
        return Err(setup(io::Error::other(format!(
            "{created} vrings created, expected {}",
            limits.num_queues()
        ))));
    }
    dev.set_vrings(hub.vrings());
    fabric::register(&dev);
    // In the switch while the frontend is served (dropped at return),
    // unless on an uplink: then on the network.
    let _attachment = match &dev.net {
        Some(port) if dev.uplink.is_none() => {
            Some(switch::attach(&dev, port.mac()).map_err(setup)?)
        }
        _ => None,
    };
    if let Some(up) = dev.uplink() {
        up.spawn_reader(Arc::downgrade(&dev)).map_err(setup)?;
    }
    let worker = Worker::spawn(dev.clone(), hub).map_err(setup)?;
    // Last: nothing after it fails and leaves its thread behind.
    let nic = match nic.map(|path| net::nic::spawn(&dev, path)).transpose() {
        Ok(nic) => nic,
        Err(e) => {
            worker.stop();
            if let Some(up) = dev.uplink() {
                up.stop();
            }
            return Err(setup(e));
        }
    };
    let roce = format!(
        "control, {} CQ, {} QP, event{}",
        limits.max_cq(),
        limits.max_qp(),
        limits.rings().map_or(String::new(), |r| format!(
            ", notify, {} completion-event",
            r.comp_vqs
        ))
    );
    let (kind, layout) = if dev.limits.net() {
        (
            "virtio-net+roce",
            format!(
                "receiveq, transmitq, net controlq, RoCE from {}: {roce}",
                limits.roce_base()
            ),
        )
    } else {
        ("virtio-rdma", roce)
    };
    info!(
        "{name}: serving {kind} on {} ({} virtqueues: {layout}; queue size {}; mac {}; \
         lanes {} on CPUs {})",
        socket.display(),
        limits.num_queues(),
        limits.queue_size(),
        limits.mac(),
        limits.threads(),
        // As the kernel has it: what the threads inherited.
        Cpus::allowed().map_or_else(|e| format!("? ({e})"), |c| c.to_string())
    );
    started(&dev);
    let result = daemon.serve(socket);
    if let Some(up) = dev.uplink() {
        up.stop();
    }
    worker.stop();
    info!("{name}: frontend disconnected");
    if let Some(nic) = nic {
        // Its QEMU disconnects it too, when it ends (or never connected).
        nic.end();
    }
    dev.ctrl().log_stats();
    result.map_err(|e| DeviceError::Daemon(name.clone(), e))
}
