// SPDX-License-Identifier: GPL-2.0

//! Starting the RDMA device, whichever front end found it (`id42.rs`, `net.rs`): the queues its
//! layout asks for, the event and completion-event queues filled, the RDMA device registered.

use kernel::{
    device::{self, Bound},
    prelude::*,
    rdma::{self, DeviceInfo, NodeType, RocePort},
    virtio::VqInfo,
};

use crate::{
    config::{DeviceConfig, QueueKind, QueueLayout},
    cq,
    ctrl::{self, Ctrl},
    device::RdmaDev,
    events,
    health::Health,
    kept::Kept,
    port, wqe,
};

/// How each virtqueue is set up: its name (the core keeps a pointer to it), its buffers, and
/// whether the device's used buffers call back (control, completion, event and
/// completion-event queues do). The notification queue is only kicked: it never carries a
/// buffer, so its buffer type is the empty one.
fn queue_info(kind: QueueKind) -> VqInfo {
    match kind {
        QueueKind::Ctrl => VqInfo::new::<ctrl::CtrlBuf>(c"ctrl", true),
        QueueKind::Cq(_) => VqInfo::new::<cq::CqeBuf>(c"cq", true),
        QueueKind::Sq(_) => VqInfo::new::<wqe::SqBuf>(c"sq", false),
        QueueKind::Rq(_) => VqInfo::new::<wqe::RqBuf>(c"rq", false),
        QueueKind::Event => VqInfo::new::<events::EventBuf>(c"event", true),
        QueueKind::Notify => VqInfo::new::<()>(c"notify", false),
        QueueKind::Comp(_) => VqInfo::new::<events::CompEventBuf>(c"comp", true),
    }
}

/// The description of every queue of `layout`, in order.
pub(crate) fn queue_infos(layout: &QueueLayout) -> Result<KVec<VqInfo>> {
    let nvqs = layout.num_queues();
    let mut infos = KVec::with_capacity(nvqs as usize, GFP_KERNEL)?;
    for index in 0..nvqs {
        let kind = layout.kind(index).ok_or(EINVAL)?;
        infos.push(queue_info(kind), GFP_KERNEL)?;
    }
    Ok(infos)
}

/// The description of the control queue alone (queue 0), to run the first commands on.
pub(crate) fn ctrl_info() -> VqInfo {
    // Polled (`ctrl::exec_polled`): no callback yet.
    VqInfo::new::<ctrl::CtrlBuf>(c"ctrl", false)
}

/// Where a front end found the device.
pub(crate) struct Found<'a> {
    /// The device the RDMA device is a child of (the virtio device, or the auxiliary device).
    pub(crate) parent: &'a device::Device<Bound>,
    /// The device that maps memory for it (the virtio transport's).
    pub(crate) dma: &'a device::Device,
    /// The Ethernet interface of its port.
    pub(crate) port: RocePort<'a>,
}

/// Fills the event and completion-event queues of a device whose queues `ctrl` holds (the
/// device is ready), and registers its RDMA device.
pub(crate) fn start<'a>(
    found: Found<'a>,
    config: DeviceConfig,
    ctrl: Ctrl<'a>,
) -> Result<rdma::Registration<RdmaDev<'a>>> {
    let dev = found.parent;
    let layout = config.layout;
    let events = ctrl.queues().get(layout.event() as usize).ok_or(EINVAL)?;
    events::fill::<events::EventBuf>(events)
        .inspect_err(|e| dev_err!(dev, "cannot fill the event queue: {:?}\n", e))?;
    let num_comp_vqs = layout.rings().map_or(0, |r| r.num_comp_vqs);
    for n in 0..num_comp_vqs {
        let comp = layout.comp(n).and_then(|i| ctrl.queues().get(i as usize));
        events::fill::<events::CompEventBuf>(comp.ok_or(EINVAL)?).inspect_err(|e| {
            dev_err!(dev, "cannot fill completion-event queue {}: {:?}\n", n, e)
        })?;
    }

    let c = &config.raw;
    dev_info!(
        dev,
        "virtio-rdma device: {} virtqueues, max_qp {} max_cq {} max_qp_wr {} max_cqe {} max_mr {} max_pd {}\n",
        layout.num_queues(),
        c.max_qp.get(),
        c.max_cq.get(),
        c.max_qp_wr.get(),
        c.max_cqe.get(),
        c.max_mr.get(),
        c.max_pd.get()
    );
    if let Some(r) = layout.rings() {
        dev_info!(
            dev,
            "queues in guest memory: max_ring_qp {} max_ring_cq {} num_comp_vqs {}\n",
            r.max_ring_qp,
            r.max_ring_cq,
            r.num_comp_vqs
        );
    }
    if c.max_srq.get() > 0 {
        dev_info!(
            dev,
            "shared receive queues: max_srq {} max_srq_wr {} max_srq_sge {}\n",
            c.max_srq.get(),
            c.max_srq_wr.get(),
            c.max_srq_sge.get()
        );
    }

    let mac = c.mac;
    let info = DeviceInfo {
        name: c"virtio_rdma%d",
        node_type: NodeType::Ca,
        phys_port_cnt: 1,
        // A user CQ with a ring names its completion-event queue by its vector.
        num_comp_vectors: num_comp_vqs.max(1),
        node_guid: port::node_guid(mac),
        roce: Some(found.port),
    };
    let ib = rdma::Registration::new(
        dev,
        found.dma,
        &info,
        Ok(RdmaDev {
            config,
            ctrl,
            health: Health::new(),
            kept_rings: Kept::new()?,
            kept_mrs: Kept::new()?,
        }),
    )
    .inspect_err(|e| dev_err!(dev, "cannot register the RDMA device: {:?}\n", e))?;
    match found.port {
        RocePort::Mac(m) => dev_info!(
            ib.device().as_ref(),
            "registered; port 1 pairs with the netdev of MAC {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}\n",
            m[0],
            m[1],
            m[2],
            m[3],
            m[4],
            m[5]
        ),
        RocePort::Netdev(_) => dev_info!(
            ib.device().as_ref(),
            "registered; port 1 is the virtio-net function's own netdev\n"
        ),
    }
    Ok(ib)
}
