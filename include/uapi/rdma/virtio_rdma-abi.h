/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-3-Clause) */
/*
 * virtio-rdma user ABI: the driver-specific data that the virtio_rdma driver
 * and its rdma-core provider exchange in user verbs (udata).
 *
 * The provider matches devices whose uverbs abi_version (sysfs) is
 * VIRTIO_RDMA_UVERBS_ABI_VERSION. Requests longer than the structure the
 * driver knows are accepted only if the extra bytes are zero; responses are
 * truncated to the room the provider gives (the verbs ABI's rules for
 * growing structures).
 *
 * No guest-physical or DMA address ever appears in this ABI: user memory is
 * named by user virtual addresses and the keys of MRs the kernel registered
 * (it pins the pages and gives the device their page table), so a process
 * can never aim the device at memory it did not register.
 *
 * All structures have explicit padding and sizes that are multiples of 8.
 */
#ifndef _UAPI_RDMA_VIRTIO_RDMA_ABI_H
#define _UAPI_RDMA_VIRTIO_RDMA_ABI_H

#include <linux/types.h>

#define VIRTIO_RDMA_UVERBS_ABI_VERSION	1

/*
 * GET_CONTEXT: no request data. caps says what the user data path offers;
 * version 1 defines none (user CQs and QPs are not offered yet).
 */
struct virtio_rdma_alloc_ucontext_resp {
	__aligned_u64 caps;
};

#endif /* _UAPI_RDMA_VIRTIO_RDMA_ABI_H */
