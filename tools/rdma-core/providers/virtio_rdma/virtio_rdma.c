// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma-core provider for virtio_rdma, the driver of the virtio RDMA device
 * (virtio device ID 42).
 *
 * The device is matched by the modalias of its virtio device. Everything
 * here goes through the kernel's uverbs commands: device and port queries,
 * protection domains and memory registration (the kernel pins the pages and
 * gives the device their page table; no physical or DMA address is ever
 * seen here). User CQs and QPs are not offered by the kernel yet (the
 * context's caps say so), and their verbs fail with EOPNOTSUPP.
 */

#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include <infiniband/driver.h>
#include <infiniband/verbs.h>

#include "virtio_rdma-abi.h"

struct vrdma_device {
	struct verbs_device ibv_dev;
};

struct vrdma_context {
	struct verbs_context ibv_ctx;
	uint64_t caps;
};

static const struct verbs_match_ent hca_table[] = {
	VERBS_MODALIAS_MATCH("virtio:d0000002Av*", NULL),
	{},
};

static int vrdma_query_device(struct ibv_context *context,
			      const struct ibv_query_device_ex_input *input,
			      struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);

	return ibv_cmd_query_device_any(context, input, attr, attr_size, &resp,
					&resp_size);
}

static int vrdma_query_port(struct ibv_context *context, uint8_t port,
			    struct ibv_port_attr *attr)
{
	struct ibv_query_port cmd;

	return ibv_cmd_query_port(context, port, attr, &cmd, sizeof(cmd));
}

static struct ibv_pd *vrdma_alloc_pd(struct ibv_context *context)
{
	struct ib_uverbs_alloc_pd_resp resp;
	struct ibv_alloc_pd cmd;
	struct ibv_pd *pd;
	int ret;

	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibv_cmd_alloc_pd(context, pd, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (ret) {
		free(pd);
		errno = ret;
		return NULL;
	}
	return pd;
}

static int vrdma_dealloc_pd(struct ibv_pd *pd)
{
	int ret;

	ret = ibv_cmd_dealloc_pd(pd);
	if (ret)
		return ret;
	free(pd);
	return 0;
}

static struct ibv_mr *vrdma_reg_mr(struct ibv_pd *pd, void *addr,
				   size_t length, uint64_t hca_va, int access)
{
	struct ib_uverbs_reg_mr_resp resp;
	struct ibv_reg_mr cmd;
	struct verbs_mr *vmr;
	int ret;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibv_cmd_reg_mr(pd, addr, length, hca_va, access, vmr, &cmd,
			     sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(vmr);
		errno = ret;
		return NULL;
	}
	return &vmr->ibv_mr;
}

static int vrdma_dereg_mr(struct verbs_mr *vmr)
{
	int ret;

	ret = ibv_cmd_dereg_mr(vmr);
	if (ret)
		return ret;
	free(vmr);
	return 0;
}

static void vrdma_free_context(struct ibv_context *ibctx)
{
	struct vrdma_context *ctx =
		container_of(ibctx, struct vrdma_context, ibv_ctx.context);

	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
}

static const struct verbs_context_ops vrdma_ctx_ops = {
	.query_device_ex = vrdma_query_device,
	.query_port = vrdma_query_port,
	.alloc_pd = vrdma_alloc_pd,
	.dealloc_pd = vrdma_dealloc_pd,
	.reg_mr = vrdma_reg_mr,
	.dereg_mr = vrdma_dereg_mr,
	.free_context = vrdma_free_context,
};

static struct verbs_context *vrdma_alloc_context(struct ibv_device *ibdev,
						 int cmd_fd,
						 void *private_data)
{
	struct uvrdma_alloc_ucontext_resp resp = {};
	struct uvrdma_alloc_ucontext cmd = {};
	struct vrdma_context *ctx;

	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, ibv_ctx,
					   RDMA_DRIVER_UNKNOWN);
	if (!ctx)
		return NULL;

	if (ibv_cmd_get_context(&ctx->ibv_ctx, &cmd.ibv_cmd, sizeof(cmd),
				&resp.ibv_resp, sizeof(resp))) {
		verbs_uninit_context(&ctx->ibv_ctx);
		free(ctx);
		return NULL;
	}
	ctx->caps = resp.caps;
	verbs_set_ops(&ctx->ibv_ctx, &vrdma_ctx_ops);
	return &ctx->ibv_ctx;
}

static struct verbs_device *vrdma_device_alloc(struct verbs_sysfs_dev *sysfs_dev)
{
	struct vrdma_device *dev;

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;
	return &dev->ibv_dev;
}

static void vrdma_uninit_device(struct verbs_device *verbs_device)
{
	free(container_of(verbs_device, struct vrdma_device, ibv_dev));
}

static const struct verbs_device_ops vrdma_dev_ops = {
	.name = "virtio_rdma",
	.match_min_abi_version = VIRTIO_RDMA_UVERBS_ABI_VERSION,
	.match_max_abi_version = VIRTIO_RDMA_UVERBS_ABI_VERSION,
	.match_table = hca_table,
	.alloc_device = vrdma_device_alloc,
	.uninit_device = vrdma_uninit_device,
	.alloc_context = vrdma_alloc_context,
};
PROVIDER_DRIVER(virtio_rdma, vrdma_dev_ops);
