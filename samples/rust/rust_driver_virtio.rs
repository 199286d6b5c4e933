// SPDX-License-Identifier: GPL-2.0

//! Rust virtio driver sample.
//!
//! Binds to the virtio-rdma device (virtio device ID 42), prints the first fields of its config
//! space and the negotiated transport features, creates its first virtqueue, makes the device
//! live and counts the used-buffer notifications it receives (none: the sample lends the device
//! no buffers). Load it instead of `virtio_rdma` to see the bare abstraction at work.

use kernel::{
    bindings,
    device::Core,
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
    virtio::{self, Virtqueue, Virtqueues, VqHandler, VqInfo},
};

kernel::virtio_device_table!(
    VIRTIO_TABLE,
    [virtio::DeviceId::new(bindings::VIRTIO_ID_RDMA)]
);

/// Counts the notifications of the sample's queue.
struct Counter {
    calls: Atomic<u32>,
}

/// The buffers of the sample's queue.
type SampleBuf = [u8; 64];

impl VqHandler for Counter {
    fn callback(&self, vq: &Virtqueue) {
        self.calls.fetch_add(1, Relaxed);
        // Give back whatever the device used (nothing, as the sample adds no buffers).
        if let Ok(mut q) = vq.lock::<SampleBuf>() {
            while q.get_buf().is_some() {}
        }
    }
}

struct SampleData<'a> {
    vqs: Pin<KBox<Virtqueues<'a, Counter>>>,
}

struct SampleDriver;

impl virtio::Driver for SampleDriver {
    type Data<'bound> = SampleData<'bound>;

    const ID_TABLE: virtio::IdTable = &VIRTIO_TABLE;

    fn probe<'bound>(
        dev: &'bound virtio::Device<Core<'_>>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        // The first two fields of every virtio-rdma config space.
        let ports: zerocopy::byteorder::little_endian::U32 = dev.config_read(0)?;
        let vendor: zerocopy::byteorder::little_endian::U32 = dev.config_read(4)?;
        dev_info!(
            dev,
            "virtio device {:#x} (index {}): phys_port_cnt {}, vendor_id {:#x}, VERSION_1 {}\n",
            dev.device_id(),
            dev.index(),
            ports.get(),
            vendor.get(),
            dev.has_feature(bindings::VIRTIO_F_VERSION_1)
        );

        let vqs = dev.find_vqs(
            &[VqInfo::new::<SampleBuf>(c"sample", true)],
            Ok::<_, Error>(Counter {
                calls: Atomic::new(0),
            }),
        )?;
        dev.device_ready();
        if let Some(vq) = vqs.get(0) {
            dev_info!(dev, "virtqueue {}: {} descriptors\n", vq.index(), vq.size());
        }
        Ok(SampleData { vqs })
    }

    fn unbind<'bound>(dev: &'bound virtio::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        dev_info!(
            dev,
            "unbinding after {} notifications\n",
            this.vqs.handler().calls.load(Relaxed)
        );
    }
}

kernel::module_virtio_driver! {
    type: SampleDriver,
    name: "rust_driver_virtio",
    authors: ["virtio-rdma developers"],
    description: "Rust virtio driver sample",
    license: "GPL",
}
