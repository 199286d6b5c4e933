// SPDX-License-Identifier: GPL-2.0

//! Driver for the virtio RDMA device (virtio device ID 42).
//!
//! The device ABI is `include/uapi/linux/virtio_rdma.h`. At probe the driver reads and checks
//! the device's config space, creates its virtqueues (the control queue, one per CQ, an SQ/RQ
//! pair per QP), sets DRIVER_OK and checks that the control path works (QUERY_PORT of
//! port 1, CREATE_PD/DESTROY_PD). On unbind the device is reset, the buffers it still holds are
//! taken back and the virtqueues deleted, in that order.

use kernel::{
    bindings,
    device::{self, Core},
    prelude::*,
    virtio::{self, VqInfo},
};

mod abi;
mod config;
mod ctrl;

use config::{DeviceConfig, QueueKind};
use ctrl::Ctrl;

kernel::virtio_device_table!(
    VIRTIO_TABLE,
    [virtio::DeviceId::new(bindings::VIRTIO_ID_RDMA)]
);

/// The driver's data of one device.
struct VirtioRdma<'a> {
    config: DeviceConfig,
    ctrl: Ctrl<'a>,
}

/// Names of the virtqueues (the core keeps a pointer to each).
fn queue_info(kind: QueueKind) -> VqInfo {
    match kind {
        QueueKind::Ctrl => VqInfo {
            name: c"ctrl",
            callback: true,
        },
        QueueKind::Cq(_) => VqInfo {
            name: c"cq",
            callback: true,
        },
        QueueKind::Sq(_) => VqInfo {
            name: c"sq",
            callback: false,
        },
        QueueKind::Rq(_) => VqInfo {
            name: c"rq",
            callback: false,
        },
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
            .find_vqs(&infos, ctrl::Handler::new())
            .inspect_err(|e| {
                dev_err!(
                    dev,
                    "cannot set up {} virtqueues (1 + max_cq {} + 2 * max_qp {}): {:?}\n",
                    nvqs,
                    config.raw.max_cq.get(),
                    config.raw.max_qp.get(),
                    e
                );
            })?;
        let ctrl = Ctrl::new(dev, vqs)?;
        dev.device_ready();

        let this = Self { config, ctrl };
        this.check_control_path(dev)?;
        Ok(this)
    }

    /// Exercises the control path: queries port 1, creates and destroys a PD.
    fn check_control_path(&self, dev: &virtio::Device<device::Bound>) -> Result {
        let port: abi::RspQueryPort = self.ctrl.exec(
            abi::cmd::QUERY_PORT,
            &abi::CmdQueryPort {
                port: 1,
                reserved: [0; 7],
            },
        )?;
        dev_info!(
            dev,
            "port 1: state {} phys_state {} active_mtu {} max_mtu {} gid_tbl_len {} pkey_tbl_len {} max_msg_sz {} cap_flags {:#x}\n",
            port.state,
            port.phys_state,
            port.active_mtu,
            port.max_mtu,
            port.gid_tbl_len.get(),
            port.pkey_tbl_len.get(),
            port.max_msg_sz.get(),
            port.port_cap_flags.get()
        );

        let pd: abi::RspCreatePd = self.ctrl.exec(abi::cmd::CREATE_PD, &())?;
        let pdn = pd.pdn.get();
        if pdn == 0 {
            dev_err!(dev, "CREATE_PD returned handle 0\n");
            return Err(EPROTO);
        }
        self.ctrl.exec::<_, ()>(
            abi::cmd::DESTROY_PD,
            &abi::CmdDestroyPd {
                pdn: pdn.into(),
                reserved: 0.into(),
            },
        )?;
        dev_info!(
            dev,
            "control path works: created and destroyed PD {}\n",
            pdn
        );
        Ok(())
    }
}

struct VirtioRdmaDriver;

impl virtio::Driver for VirtioRdmaDriver {
    type Data<'bound> = VirtioRdma<'bound>;

    const ID_TABLE: virtio::IdTable = &VIRTIO_TABLE;

    fn probe<'bound>(
        dev: &'bound virtio::Device<Core<'_>>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        let this = VirtioRdma::new(dev)?;
        let c = &this.config.raw;
        dev_info!(
            dev,
            "virtio-rdma device: {} virtqueues, max_qp {} max_cq {} max_qp_wr {} max_cqe {} max_mr {} max_pd {}\n",
            this.config.layout.num_queues(),
            c.max_qp.get(),
            c.max_cq.get(),
            c.max_qp_wr.get(),
            c.max_cqe.get(),
            c.max_mr.get(),
            c.max_pd.get()
        );
        Ok(this)
    }

    fn unbind<'bound>(dev: &'bound virtio::Device<Core<'_>>, _this: Pin<&Self::Data<'bound>>) {
        dev_dbg!(dev, "unbinding\n");
    }
}

kernel::module_virtio_driver! {
    type: VirtioRdmaDriver,
    name: "virtio_rdma",
    authors: ["virtio-rdma developers"],
    description: "virtio RDMA device driver",
    license: "GPL",
}
