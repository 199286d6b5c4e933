// SPDX-License-Identifier: GPL-2.0

/*
 * Wrappers of the virtio core's static inline functions and of the
 * transport operations drivers call through vdev->config, for
 * kernel::virtio (rust/kernel/virtio.rs).
 */

#include <linux/virtio.h>
#include <linux/virtio_config.h>

#ifdef CONFIG_RUST_VIRTIO_ABSTRACTIONS

__rust_helper bool rust_helper___virtio_test_bit(const struct virtio_device *vdev,
						 unsigned int fbit)
{
	return __virtio_test_bit(vdev, fbit);
}

__rust_helper int rust_helper_virtio_find_vqs(struct virtio_device *vdev,
					      unsigned int nvqs,
					      struct virtqueue *vqs[],
					      struct virtqueue_info vqs_info[],
					      struct irq_affinity *desc)
{
	return virtio_find_vqs(vdev, nvqs, vqs, vqs_info, desc);
}

__rust_helper void rust_helper_virtio_del_vqs(struct virtio_device *vdev)
{
	vdev->config->del_vqs(vdev);
}

__rust_helper void rust_helper_virtio_device_ready(struct virtio_device *vdev)
{
	virtio_device_ready(vdev);
}

__rust_helper u8 rust_helper_virtio_get_status(struct virtio_device *vdev)
{
	return vdev->config->get_status(vdev);
}

__rust_helper size_t rust_helper_virtio_config_size(struct virtio_device *vdev)
{
	return virtio_config_size(vdev);
}

__rust_helper void rust_helper_virtio_cread_bytes(struct virtio_device *vdev,
						  unsigned int offset,
						  void *buf, size_t len)
{
	virtio_cread_bytes(vdev, offset, buf, len);
}

__rust_helper void rust_helper_virtio_synchronize_cbs(struct virtio_device *vdev)
{
	virtio_synchronize_cbs(vdev);
}

#endif /* CONFIG_RUST_VIRTIO_ABSTRACTIONS */
