// SPDX-License-Identifier: GPL-2.0

//! Driver for the virtio RDMA device (virtio device ID 42).
//!
//! The device ABI is `include/uapi/linux/virtio_rdma.h`. At probe the driver reads and checks
//! the device's config space (`config.rs`), creates its virtqueues (the control queue, one per
//! CQ, an SQ/RQ pair per QP, the event queue; with `VIRTIO_RDMA_F_RINGS`, queues in guest
//! memory for user CQs and QPs (`rings.rs`), the notification queue and the completion-event
//! queues), sets DRIVER_OK, fills the event and completion-event queues (`events.rs`) and
//! registers the RDMA device `virtio_rdma%d`:
//! one RoCEv2 port, bound to the Ethernet interface whose MAC the config names. Its verbs
//! (`verbs.rs`) are control commands (`ctrl.rs`).
//!
//! On unbind the RDMA device is unregistered first (that still needs the control queue), then
//! the device is reset, the buffers it still holds are taken back and the virtqueues deleted;
//! memory it kept after a destroy it did not confirm goes last (`kept.rs`).
//! A device that needs a reset (its backend went away) is failed at once and, once it is back,
//! reset and probed again as on unbind and probe (`health.rs`).

use kernel::{
    bindings,
    device::{Bound, Core},
    prelude::*,
    rdma::{self, DeviceInfo, NodeType},
    virtio::{self, VqInfo},
};

mod abi;
mod ah;
mod config;
mod counter_sets;
mod cq;
mod ctrl;
mod device;
mod events;
mod health;
mod kept;
mod kernel_rings;
mod mr;
mod mw;
mod port;
mod qp;
mod queues;
mod rings;
mod srq;
mod ucontext;
mod uring;
mod verbs;
mod wqe;
mod wr_table;
mod xrcd;

use config::QueueKind;
use ctrl::Ctrl;
use device::RdmaDev;
use health::Health;
use kept::Kept;

kernel::virtio_device_table!(
    VIRTIO_TABLE,
    [virtio::DeviceId::new(bindings::VIRTIO_ID_RDMA)]
);

/// The driver's data of one virtio device: its registered RDMA device.
struct VirtioRdma<'a> {
    ib: rdma::Registration<RdmaDev<'a>>,
}

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

impl<'a> VirtioRdma<'a> {
    fn new(dev: &'a virtio::Device<Core<'_>>) -> Result<Self> {
        let config = config::read(dev)?;
        let layout = config.layout;
        let nvqs = layout.num_queues();

        let mut infos = KVec::with_capacity(nvqs as usize, GFP_KERNEL)?;
        for index in 0..nvqs {
            let kind = layout.kind(index).ok_or(EINVAL)?;
            infos.push(queue_info(kind), GFP_KERNEL)?;
        }
        let vqs = dev
            .find_vqs(
                &infos,
                queues::Handler::new(layout, config.raw.max_srq.get()),
            )
            .inspect_err(|e| {
                let (max_cq, max_qp) = (config.raw.max_cq.get(), config.raw.max_qp.get());
                // The ring queues only when they were negotiated (zero otherwise).
                match config.raw.num_comp_vqs.get() {
                    0 => dev_err!(
                        dev,
                        "cannot set up {} virtqueues (2 + max_cq {} + 2 * max_qp {}): {:?}\n",
                        nvqs,
                        max_cq,
                        max_qp,
                        e
                    ),
                    comp => dev_err!(
                        dev,
                        "cannot set up {} virtqueues (2 + max_cq {} + 2 * max_qp {} + 1 + \
                         num_comp_vqs {}): {:?}\n",
                        nvqs,
                        max_cq,
                        max_qp,
                        comp,
                        e
                    ),
                }
            })?;
        let ctrl = Ctrl::new(dev, vqs)?;
        dev.device_ready();
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
            nvqs,
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
            roce_mac: Some(mac),
        };
        let bound: &virtio::Device<Bound> = dev;
        let dma = dev.dma_device().ok_or(ENODEV)?;
        let ib = rdma::Registration::new(
            bound.as_ref(),
            dma,
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
        dev_info!(
            ib.device().as_ref(),
            "registered; port 1 pairs with the netdev of MAC {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}\n",
            mac[0],
            mac[1],
            mac[2],
            mac[3],
            mac[4],
            mac[5]
        );
        Ok(Self { ib })
    }
}

struct VirtioRdmaDriver;

impl virtio::Driver for VirtioRdmaDriver {
    type Data<'bound> = VirtioRdma<'bound>;

    const ID_TABLE: virtio::IdTable = &VIRTIO_TABLE;

    const FEATURES: &'static [u32] = &[abi::F_RINGS];

    fn probe<'bound>(
        dev: &'bound virtio::Device<Core<'_>>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        VirtioRdma::new(dev)
    }

    fn unbind<'bound>(dev: &'bound virtio::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        dev_dbg!(dev, "unbinding\n");
        // Users of the RDMA device are gone when this returns; the control queue still works.
        this.ib.unregister();
    }

    fn config_changed<'bound>(dev: &'bound virtio::Device<Bound>, this: Pin<&Self::Data<'bound>>) {
        health::config_changed(this.ib.device(), dev);
    }
}

kernel::module_virtio_driver! {
    type: VirtioRdmaDriver,
    name: "virtio_rdma",
    authors: ["virtio-rdma developers"],
    description: "virtio RDMA device driver",
    license: "GPL",
}
