// SPDX-License-Identifier: GPL-2.0
/*
 * LD_PRELOAD shim that makes perftest post with ibv_wr_* (verbs-ex.sh).
 *
 * perftest (25.01, Debian trixie's) takes its ibv_wr_* path only on devices
 * it knows by vendor_part_id (ConnectX-4 and later, EFA, HNS) and falls
 * back to ibv_post_send on any other, whatever --use_old_post_send says.
 * This shim reports virtio_rdma's vendor_part_id to perftest as a HiSilicon
 * hns device's (0xa222; a ConnectX part ID would also make perftest call
 * mlx5dv_*, which fail on another provider); perftest then creates its QPs
 * with ibv_create_qp_ex and posts with ibv_wr_*. It also counts, through ibv_qp_to_qp_ex, the
 * QPs perftest took as extended and its wr_complete calls, and writes both
 * to the file named by $WR_API_LOG at exit, so the test can tell which
 * path was taken. With $WR_API_KEEP_ID set it only counts: perftest then
 * sees the device as it is.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <infiniband/verbs.h>

#define HNS_PART_ID 0xa222

static int (*real_complete)(struct ibv_qp_ex *qp);
static unsigned long qps, completes, failed;

int ibv_query_device(struct ibv_context *context,
		     struct ibv_device_attr *attr)
{
	int (*real)(struct ibv_context *c, struct ibv_device_attr *a);
	int ret;

	real = dlsym(RTLD_NEXT, "ibv_query_device");
	if (!real)
		abort();
	ret = real(context, attr);
	if (!ret && !getenv("WR_API_KEEP_ID"))
		attr->vendor_part_id = HNS_PART_ID;
	return ret;
}

static int count_complete(struct ibv_qp_ex *qp)
{
	int ret = real_complete(qp);

	__atomic_add_fetch(ret ? &failed : &completes, 1, __ATOMIC_RELAXED);
	return ret;
}

struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct ibv_qp_ex *(*real)(struct ibv_qp *q);
	struct ibv_qp_ex *qpx;

	real = dlsym(RTLD_NEXT, "ibv_qp_to_qp_ex");
	if (!real)
		abort();
	qpx = real(qp);
	if (qpx && qpx->wr_complete && qpx->wr_complete != count_complete) {
		real_complete = qpx->wr_complete;
		qpx->wr_complete = count_complete;
		qps++;
	}
	return qpx;
}

__attribute__((destructor)) static void report(void)
{
	const char *path = getenv("WR_API_LOG");
	FILE *f;

	if (!path)
		return;
	f = fopen(path, "a");
	if (!f)
		return;
	fprintf(f, "qps %lu wr_complete %lu failed %lu\n", qps, completes,
		failed);
	fclose(f);
}
