/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * The driver-specific command and response layouts of virtio_rdma, built
 * from the kernel's user ABI header, <rdma/virtio_rdma-abi.h>.
 */
#ifndef __VIRTIO_RDMA_ABI_H
#define __VIRTIO_RDMA_ABI_H

#include <infiniband/kern-abi.h>
#include <rdma/virtio_rdma-abi.h>
#include <kernel-abi/virtio_rdma-abi.h>

DECLARE_DRV_CMD(uvrdma_alloc_ucontext, IB_USER_VERBS_CMD_GET_CONTEXT,
		empty, virtio_rdma_alloc_ucontext_resp);
DECLARE_DRV_CMD(uvrdma_create_cq_ex, IB_USER_VERBS_EX_CMD_CREATE_CQ,
		virtio_rdma_create_cq_cmd, virtio_rdma_create_cq_resp);
DECLARE_DRV_CMD(uvrdma_resize_cq, IB_USER_VERBS_CMD_RESIZE_CQ,
		virtio_rdma_resize_cq_cmd, virtio_rdma_resize_cq_resp);
DECLARE_DRV_CMD(uvrdma_create_qp, IB_USER_VERBS_CMD_CREATE_QP,
		virtio_rdma_create_qp_cmd, virtio_rdma_create_qp_resp);
DECLARE_DRV_CMD(uvrdma_create_qp_ex, IB_USER_VERBS_EX_CMD_CREATE_QP,
		virtio_rdma_create_qp_cmd, virtio_rdma_create_qp_resp);
DECLARE_DRV_CMD(uvrdma_create_ah, IB_USER_VERBS_CMD_CREATE_AH,
		empty, virtio_rdma_create_ah_resp);
DECLARE_DRV_CMD(uvrdma_create_srq, IB_USER_VERBS_CMD_CREATE_SRQ,
		virtio_rdma_create_srq_cmd, empty);
/* An XRC SRQ: the same request as a basic SRQ's. */
DECLARE_DRV_CMD(uvrdma_create_xsrq, IB_USER_VERBS_CMD_CREATE_XSRQ,
		virtio_rdma_create_srq_cmd, empty);

#endif /* __VIRTIO_RDMA_ABI_H */
