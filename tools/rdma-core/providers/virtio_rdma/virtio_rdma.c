// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma-core provider for virtio_rdma, the driver of the virtio RDMA device
 * (virtio device ID 42).
 *
 * The device is matched by the modalias of its virtio device. Control verbs
 * go through the kernel's uverbs commands: device and port queries, PDs,
 * memory registration (the kernel pins the pages and gives the device their
 * page table; no physical or DMA address is ever seen here), CQs, QPs and
 * AHs.
 *
 * Each QP has a send and a receive ring, each CQ a completion ring. Work
 * rings hold elements in the device's format (<linux/virtio_rdma.h>) that
 * post_send/post_recv write and publish with a producer index; a CQ's slots
 * hold completions with a sequence number written last, which poll_cq reads
 * without a system call. Where the rings live depends on the kernel:
 *
 * Queues in guest memory (the context's caps has VIRTIO_RDMA_CAP_RINGS): the
 * provider allocates the rings (a struct virtio_rdma_ring_record, then the
 * slots) and names them in CREATE_CQ / CREATE_QP; the kernel pins them and
 * the device itself reads the work requests and writes the completions.
 * A post rings the doorbell (a uverbs POST_SEND/POST_RECV without work
 * requests) only when the ring's record asks for it, and arming is a store
 * into the CQ's record: no system call on the data path. No kernel sees
 * the completions either, so this provider checks each one as the kernel
 * driver checks its own (wr_table.h): elements carry tokens, not wr_ids; a
 * completion must name a request outstanding on a queue of a QP of this
 * process that reports to that CQ, or the poll fails with EIO and the CQ
 * reports no more; a success that does not fit its request becomes a
 * general error.
 *
 * Rings mapped from the kernel (otherwise; struct virtio_rdma_uring): every
 * post rings the doorbell, and the kernel copies the new elements out of
 * the ring, checks them and hands them to the device; it moves every
 * completion the device reports into the CQ's ring. Arming is uverbs
 * REQ_NOTIFY_CQ.
 *
 * The extended verbs (ibv_create_cq_ex, ibv_create_qp_ex with
 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) work in both modes. A CQ's start_poll /
 * next_poll take completions as poll_cq does, and the wc_read_* accessors
 * return what poll_cq would have put into an ibv_wc; the device reports no
 * completion timestamp, VLAN or flow tag, so asking for those fails with
 * EOPNOTSUPP. The ibv_wr_* builders write each request into the next free
 * slot of the send ring with the same helpers ibv_post_send uses, under the
 * ring's lock from wr_start on; wr_complete publishes the batch as one post,
 * and an error found while building it (a full ring, too many SGEs, inline
 * data too long) withdraws the whole batch and is what wr_complete returns.
 * Send operations the device does not offer (TSO, flush, atomic write, and
 * those a QP's type does not have) fail ibv_create_qp_ex with EOPNOTSUPP.
 *
 * XRC (ring mode only, as SRQs): domains, XRC SRQs (ibv_create_srq_ex),
 * XRC_SEND QPs (ring QPs without a receive ring, whose every request but
 * the local ones names the remote SRQ) and XRC_RECV QPs (no rings: nothing
 * is posted to them). An XRC SRQ's receive completes on the SRQ's CQ
 * naming the XRC_RECV QP that took it, which may be another process's: the
 * completion is checked by its token, which names the SRQ (wr_table.h).
 */

#include <config.h>

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ccan/minmax.h>
#include <infiniband/driver.h>
#include <infiniband/verbs.h>
#include <linux/virtio_rdma.h>
#include <util/util.h>

#include "virtio_rdma-abi.h"
#include "wr_table.h"

struct vrdma_device {
	struct verbs_device ibv_dev;
};

/*
 * What a QP number a completion reports is replaced with once its QP is
 * destroyed (not a QP number: those are 24 bits).
 */
#define VRDMA_QPN_GONE UINT32_MAX

struct vrdma_context {
	struct verbs_context ibv_ctx;
	uint64_t caps;
	/*
	 * Ring mode, to check the completions the device writes: the QPs by
	 * number (entries set and cleared under the QP's CQs' locks), and the
	 * XRC SRQs by number (under the SRQ's CQ's lock), which a completion
	 * names by its token, not by its QP (wr_table.h).
	 */
	struct vrdma_num_table qps;
	struct vrdma_num_table xrc_srqs;
};

/*
 * A ring: a record, then depth slots of stride bytes. Either mapped from the
 * kernel, whose record is struct virtio_rdma_uring_ctrl (producer and
 * consumer only, native endian), or allocated here for the device (own),
 * whose record is struct virtio_rdma_ring_record (little endian). rec points
 * at either: the layouts agree on producer and consumer.
 */
struct vrdma_ring {
	void *buf;
	size_t length;
	bool own;
	struct virtio_rdma_ring_record *rec;
	uint8_t *slots;
	uint32_t depth;
	uint32_t stride;
	uint32_t producer;		/* next slot to write */
	pthread_spinlock_t lock;
};

static_assert(offsetof(struct virtio_rdma_uring_ctrl, producer) ==
	      offsetof(struct virtio_rdma_ring_record, producer), "record");
static_assert(offsetof(struct virtio_rdma_uring_ctrl, consumer) ==
	      offsetof(struct virtio_rdma_ring_record, consumer), "record");
static_assert(sizeof(struct virtio_rdma_ring_record) <= VIRTIO_RDMA_RING_SLOTS,
	      "record");
/* Both kinds of CQ ring are polled as slots of struct virtio_rdma_ring_cqe. */
static_assert(sizeof(struct virtio_rdma_ucqe) ==
	      sizeof(struct virtio_rdma_ring_cqe), "cqe");
static_assert(offsetof(struct virtio_rdma_ucqe, seq) ==
	      offsetof(struct virtio_rdma_ring_cqe, seq), "cqe");

/*
 * Without rings: a QP of the CQ was reset while the ring held completions
 * of it up to number @until (exclusive).
 */
struct vrdma_cq_reset {
	uint32_t qpn;
	uint32_t until;
};

#define VRDMA_CQ_RESETS 16

struct vrdma_cq {
	struct verbs_cq vcq;		/* ibv_cq, or ibv_cq_ex */
	struct vrdma_ring ring;		/* its producer is unused */
	uint32_t consumer;		/* next completion to read */
	bool broken;			/* ring mode: the device lied to it */
	/*
	 * Without rings (the kernel writes the ring): completions a reset QP
	 * left in it, its past, which polls drop (as libmlx5 cleans its CQs
	 * of a QP it resets; in ring mode the QP's tables drop them).
	 */
	struct vrdma_cq_reset resets[VRDMA_CQ_RESETS];
	unsigned int nresets;
	/* ibv_cq_ex, between start_poll and end_poll (under ring.lock): */
	uint32_t poll_start;		/* consumer at start_poll */
	struct ibv_wc wc;		/* the completion the accessors read */
};

struct vrdma_qp {
	struct verbs_qp vqp;		/* ibv_qp, and ibv_qp_ex if asked for */
	struct vrdma_ring sq;
	struct vrdma_ring rq;
	uint32_t max_inline;
	uint32_t max_send_wr;	/* the granted caps: at most so many outstanding */
	uint32_t max_recv_wr;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	/* Ring mode: the requests outstanding on the rings (wr_table.h). */
	struct vrdma_wr_table swrs;
	struct vrdma_wr_table rwrs;	/* none with an SRQ */
	bool sig_all;			/* every send request is signaled */
	/* The ibv_wr_* batch, from wr_start on (under sq.lock): */
	uint32_t wr_start;		/* sq.producer at wr_start */
	uint32_t wr_tail;		/* swrs.tail at wr_start */
	int wr_err;			/* the first error, or 0 */
	struct virtio_rdma_sq_req *wr_req;	/* the request being built */
	/*
	 * The request being built lacks what its QP's type needs: a UD one
	 * its address, an XRC_SEND one (not local) its SRQ's number.
	 */
	bool wr_need_addr;
};

/*
 * Ring mode: a shared receive queue, a receive ring the device reads. An
 * XRC SRQ (vsrq.srq_type) has its number and CQ in vsrq.
 */
struct vrdma_srq {
	struct verbs_srq vsrq;
	struct vrdma_ring ring;
	uint32_t max_sge;
	struct vrdma_srq_table wrs;	/* under ring.lock */
};

struct vrdma_ah {
	struct ibv_ah ibv_ah;
	struct virtio_rdma_av av;
};

static struct vrdma_context *to_vctx(struct ibv_context *ctx)
{
	return container_of(ctx, struct vrdma_context, ibv_ctx.context);
}

static struct vrdma_cq *to_vcq(struct ibv_cq *cq)
{
	return container_of(cq, struct vrdma_cq, vcq.cq);
}

static struct vrdma_cq *to_vcq_ex(struct ibv_cq_ex *cq)
{
	return container_of(cq, struct vrdma_cq, vcq.cq_ex);
}

static struct vrdma_srq *to_vsrq(struct ibv_srq *srq)
{
	return container_of(srq, struct vrdma_srq, vsrq.srq);
}

static struct vrdma_qp *to_vqp(struct ibv_qp *qp)
{
	return container_of(qp, struct vrdma_qp, vqp.qp);
}

static struct vrdma_qp *to_vqp_ex(struct ibv_qp_ex *qp)
{
	return container_of(qp, struct vrdma_qp, vqp.qp_ex);
}

/*
 * Ring mode: the QP numbered @qpn, or NULL (lock-free for the poller, who
 * holds the locks of the CQs that QP reports to: struct vrdma_num_table).
 */
static struct vrdma_qp *vrdma_find_qp(struct vrdma_context *ctx, uint32_t qpn)
{
	return vrdma_num_table_find(&ctx->qps, qpn);
}

/* Ring mode: the XRC SRQ numbered @srqn, or NULL (as vrdma_find_qp). */
static struct vrdma_srq *vrdma_find_xrc_srq(struct vrdma_context *ctx,
					    uint32_t srqn)
{
	return vrdma_num_table_find(&ctx->xrc_srqs, srqn);
}

/*
 * A word of a ring's record or slots that the other side writes or reads:
 * acquire and release order against the slots' contents.
 */
static uint32_t vrdma_load(const struct vrdma_ring *ring, uint32_t *p)
{
	uint32_t v = __atomic_load_n(p, __ATOMIC_ACQUIRE);

	return ring->own ? le32toh(v) : v;
}

static void vrdma_store(const struct vrdma_ring *ring, uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, ring->own ? htole32(v) : v, __ATOMIC_RELEASE);
}

static const struct verbs_match_ent hca_table[] = {
	/* The virtio-rdma device (ID 42) */
	VERBS_MODALIAS_MATCH("virtio:d0000002Av*", NULL),
	/*
	 * The RoCE half of a virtio-net device: its parent is virtio_net's
	 * auxiliary device, which has no modalias file, so by name.
	 */
	VERBS_NAME_MATCH("virtio_rdma", NULL),
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

/*
 * The kernel changes the MR's PD and rights in place (the keys stay), or for
 * new memory registers the MR's replacement and then deregisters the MR (the
 * keys change, the handle stays): the protocol document's "Reregistration".
 */
static int vrdma_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
			  void *addr, size_t length, int access)
{
	struct ib_uverbs_rereg_mr_resp resp;
	struct ibv_rereg_mr cmd;
	int ret;

	ret = ibv_cmd_rereg_mr(vmr, flags, addr, length, (uintptr_t)addr,
			       access, pd, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (ret)
		errno = ret;
	return ret;
}

static struct ibv_mw *vrdma_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ib_uverbs_alloc_mw_resp resp;
	struct ibv_alloc_mw cmd;
	struct ibv_mw *mw;
	int ret;

	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return NULL;
	ret = ibv_cmd_alloc_mw(pd, type, mw, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (ret) {
		free(mw);
		errno = ret;
		return NULL;
	}
	return mw;
}

static int vrdma_dealloc_mw(struct ibv_mw *mw)
{
	int ret;

	ret = ibv_cmd_dealloc_mw(mw);
	if (ret)
		return ret;
	free(mw);
	return 0;
}

static int vrdma_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
			   struct ibv_send_wr **bad_wr);

/*
 * ibv_bind_mw (type 1): a BIND_MW request with the window's next rkey,
 * which the window carries from now on (an error completion leaves the
 * caller to undo that, as with rxe).
 */
static int vrdma_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
			 struct ibv_mw_bind *mw_bind)
{
	struct ibv_send_wr wr = {}, *bad;
	int ret;

	wr.opcode = IBV_WR_BIND_MW;
	wr.wr_id = mw_bind->wr_id;
	wr.send_flags = mw_bind->send_flags;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = mw_bind->bind_info;
	ret = vrdma_post_send(qp, &wr, &bad);
	if (ret)
		return ret;
	mw->rkey = wr.bind_mw.rkey;
	return 0;
}

static void vrdma_init_ring(struct vrdma_ring *ring, void *buf, size_t length,
			    bool own, size_t slots, uint32_t depth,
			    uint32_t stride)
{
	ring->buf = buf;
	ring->length = length;
	ring->own = own;
	ring->rec = buf;
	ring->slots = (uint8_t *)buf + slots;
	ring->depth = depth;
	ring->stride = stride;
	ring->producer = 0;
	pthread_spin_init(&ring->lock, PTHREAD_PROCESS_PRIVATE);
}

static int vrdma_map_ring(int cmd_fd, struct vrdma_ring *ring,
			  const struct virtio_rdma_uring *u, size_t elem_len)
{
	uint64_t slots_end;
	void *map;

	/* The kernel's layout, checked before anything is written there. */
	slots_end = u->slots + (uint64_t)u->depth * u->stride;
	if (!u->depth || (u->depth & (u->depth - 1)) || u->stride < elem_len ||
	    u->slots < sizeof(struct virtio_rdma_uring_ctrl) ||
	    slots_end > u->length)
		return EPROTO;
	map = mmap(NULL, u->length, PROT_READ | PROT_WRITE, MAP_SHARED, cmd_fd,
		   u->offset);
	if (map == MAP_FAILED)
		return errno;
	vrdma_init_ring(ring, map, u->length, false, u->slots, u->depth,
			u->stride);
	return 0;
}

/*
 * Ring mode: a zeroed, page-aligned ring for the device, of at least
 * @entries (and at least one) slots of @stride bytes, a power of two.
 */
static int vrdma_alloc_ring(struct vrdma_ring *ring, uint32_t entries,
			    uint64_t stride)
{
	uint64_t page = sysconf(_SC_PAGESIZE);
	uint64_t depth, len;
	void *buf;
	int ret;

	if (entries > INT32_MAX || stride > UINT32_MAX)
		return EINVAL;
	depth = roundup_pow_of_two(max_t(uint32_t, entries, 1));
	len = (VIRTIO_RDMA_RING_SLOTS + depth * stride + page - 1) & ~(page - 1);
	if (len != (size_t)len)
		return ENOMEM;
	ret = posix_memalign(&buf, page, len);
	if (ret)
		return ret;
	memset(buf, 0, len);
	/* A child must not take (copy on write) pages the device uses. */
	if (ibv_dontfork_range(buf, len)) {
		ret = errno ? errno : ENOMEM;
		free(buf);
		return ret;
	}
	vrdma_init_ring(ring, buf, len, true, VIRTIO_RDMA_RING_SLOTS, depth,
			stride);
	return 0;
}

/*
 * Only once the kernel destroyed the queue (or never made it): until then
 * the device may use a ring of ours.
 */
static void vrdma_free_ring_mem(void *buf, size_t length, bool own)
{
	if (own) {
		ibv_dofork_range(buf, length);
		free(buf);
	} else {
		munmap(buf, length);
	}
}

static void vrdma_free_ring(struct vrdma_ring *ring)
{
	if (!ring->buf)
		return;
	vrdma_free_ring_mem(ring->buf, ring->length, ring->own);
	pthread_spin_destroy(&ring->lock);
	ring->buf = NULL;
}

static void vrdma_cq_ex_ops(struct vrdma_cq *cq);

/*
 * What the completion of an extended CQ can carry: no timestamp, VLAN,
 * flow tag or tag matching (the device reports none of them).
 */
#define VRDMA_CQ_WC_FLAGS IBV_WC_STANDARD_FLAGS

/*
 * A CQ for ibv_create_cq (@ex false: only @attr's cqe, channel and
 * comp_vector) or ibv_create_cq_ex.
 */
static struct vrdma_cq *vrdma_create_cq_any(struct ibv_context *context,
					    struct ibv_cq_init_attr_ex *attr,
					    bool ex)
{
	struct uvrdma_create_cq_ex_resp resp = {};
	struct uvrdma_create_cq_ex cmd = {};
	size_t cmd_size = sizeof(cmd.ibv_cmd);	/* no request data */
	struct vrdma_cq *cq;
	int ret;

	if (ex && (attr->wc_flags & ~(uint64_t)VRDMA_CQ_WC_FLAGS ||
		   attr->comp_mask & ~IBV_CQ_INIT_ATTR_MASK_FLAGS ||
		   (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS &&
		    attr->flags & ~IBV_CREATE_CQ_ATTR_SINGLE_THREADED))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	if (to_vctx(context)->caps & VIRTIO_RDMA_CAP_RINGS) {
		/* A negative cqe is refused as too large. */
		ret = vrdma_alloc_ring(&cq->ring, attr->cqe,
				       sizeof(struct virtio_rdma_ring_cqe));
		if (ret)
			goto err_free;
		cmd.addr = (uintptr_t)cq->ring.buf;
		cmd.depth = cq->ring.depth;
		cmd_size = sizeof(cmd);
	}
	ret = ibv_cmd_create_cq_ex(context, attr, &cq->vcq, &cmd.ibv_cmd,
				   cmd_size, &resp.ibv_resp, sizeof(resp), 0);
	if (ret)
		goto err_ring;
	if (!cq->ring.own) {
		ret = vrdma_map_ring(context->cmd_fd, &cq->ring, &resp.ring,
				     sizeof(struct virtio_rdma_ucqe));
		if (ret) {
			ibv_cmd_destroy_cq(&cq->vcq.cq);
			goto err_free;
		}
	}
	if (ex)
		vrdma_cq_ex_ops(cq);
	return cq;

err_ring:
	vrdma_free_ring(&cq->ring);
err_free:
	free(cq);
	errno = ret;
	return NULL;
}

static struct ibv_cq *vrdma_create_cq(struct ibv_context *context, int cqe,
				      struct ibv_comp_channel *channel,
				      int comp_vector)
{
	struct ibv_cq_init_attr_ex attr = {
		.cqe = cqe,
		.channel = channel,
		.comp_vector = comp_vector,
	};
	struct vrdma_cq *cq = vrdma_create_cq_any(context, &attr, false);

	return cq ? &cq->vcq.cq : NULL;
}

static struct ibv_cq_ex *vrdma_create_cq_ex(struct ibv_context *context,
					    struct ibv_cq_init_attr_ex *attr)
{
	struct vrdma_cq *cq = vrdma_create_cq_any(context, attr, true);

	return cq ? &cq->vcq.cq_ex : NULL;
}

static int vrdma_destroy_cq(struct ibv_cq *ibcq)
{
	struct vrdma_cq *cq = to_vcq(ibcq);
	int ret;

	ret = ibv_cmd_destroy_cq(ibcq);
	if (ret)
		return ret;
	vrdma_free_ring(&cq->ring);
	free(cq);
	return 0;
}

/* enum ib_wc_flags (the kernel's, as the device reports them) */
#define VRDMA_WC_GRH		(1 << 0)
#define VRDMA_WC_WITH_IMM	(1 << 1)
#define VRDMA_WC_WITH_INVALIDATE (1 << 2)

static void vrdma_wc(const struct virtio_rdma_cq_req *c, struct ibv_wc *wc)
{
	uint32_t flags = le32toh(c->wc_flags);

	memset(wc, 0, sizeof(*wc));
	wc->wr_id = le64toh(c->wr_id);
	wc->status = c->status;
	wc->opcode = c->opcode;
	wc->vendor_err = le32toh(c->vendor_err);
	wc->byte_len = le32toh(c->byte_len);
	wc->qp_num = le32toh(c->qp_num);
	wc->src_qp = le32toh(c->src_qp);
	wc->pkey_index = le16toh(c->pkey_index);
	wc->sl = c->sl;
	wc->dlid_path_bits = c->dlid_path_bits;
	if (flags & VRDMA_WC_GRH)
		wc->wc_flags |= IBV_WC_GRH;
	if (flags & VRDMA_WC_WITH_IMM) {
		wc->wc_flags |= IBV_WC_WITH_IMM;
		wc->imm_data = le32toh(c->ex);
	}
	if (flags & VRDMA_WC_WITH_INVALIDATE) {
		wc->wc_flags |= IBV_WC_WITH_INV;
		wc->invalidated_rkey = le32toh(c->ex);
	}
}

/* The slot @index of @ring. */
static void *vrdma_slot(struct vrdma_ring *ring, uint32_t index)
{
	return ring->slots + (size_t)(index & (ring->depth - 1)) * ring->stride;
}

/* What to do with a completion the device wrote (vrdma_cq_check). */
enum vrdma_cqe_verdict {
	VRDMA_CQE_REPORT,	/* report it (as checked) */
	VRDMA_CQE_DROP,		/* a request of a QP destroyed or reset since */
	VRDMA_CQE_BEFORE,	/* report a request it skipped, flushed; keep it */
	VRDMA_CQE_LIE,		/* it cannot be true: the CQ is broken */
};

/*
 * Ring mode: a completion the device wrote that cannot be true. The request
 * it should have completed will not complete: this CQ reports nothing more
 * (as the kernel driver fails the device when its own CQs are lied to).
 */
static enum vrdma_cqe_verdict vrdma_cq_lied(struct vrdma_cq *cq, uint32_t qpn,
					    uint64_t token, const char *what)
{
	struct ibv_cq *ibcq = &cq->vcq.cq;

	cq->broken = true;
	verbs_err(verbs_get_ctx(ibcq->context),
		  "CQ %u: a completion for QP %u (token %#llx) %s: the device lied; the CQ reports no more completions\n",
		  ibcq->handle, qpn, (unsigned long long)token, what);
	return VRDMA_CQE_LIE;
}

/*
 * The CQ of @qp that completions of its receives (@recv) or sends go to;
 * NULL for the receives of an XRC_SEND QP, which has no receive queue (a
 * recv_cq given at its creation is not used, as in the kernel).
 */
static struct ibv_cq *vrdma_qp_cq(struct vrdma_qp *qp, bool recv)
{
	if (!recv)
		return qp->vqp.qp.send_cq;
	return qp->vqp.qp.qp_type == IBV_QPT_XRC_SEND ? NULL :
	       qp->vqp.qp.recv_cq;
}

/*
 * Ring mode: takes the receive @token names out of @srq's table (under the
 * SRQ ring's lock, against the poster).
 */
static enum vrdma_wr_result vrdma_srq_complete(struct vrdma_srq *srq,
					       uint64_t token,
					       struct vrdma_posted *posted)
{
	enum vrdma_wr_result r;

	pthread_spin_lock(&srq->ring.lock);
	r = vrdma_srq_table_complete(&srq->wrs, token, posted);
	pthread_spin_unlock(&srq->ring.lock);
	return r;
}

/*
 * Ring mode: checks the device's completion @c against what was posted and
 * completes @wc with what the process gave (the kernel driver's rules, and
 * the protocol's "Work request semantics").
 */
static enum vrdma_cqe_verdict vrdma_cq_check(struct vrdma_cq *cq,
					     const struct virtio_rdma_cq_req *c,
					     struct ibv_wc *wc)
{
	struct vrdma_context *ctx = to_vctx(cq->vcq.cq.context);
	uint32_t qpn = le32toh(c->qp_num);
	uint64_t token = le64toh(c->wr_id);
	/* Receive opcodes have IBV_WC_RECV's bit, flushed ones too. */
	bool recv = c->opcode & IBV_WC_RECV;
	bool error = c->status != IBV_WC_SUCCESS;
	struct vrdma_posted posted;
	enum vrdma_wr_result r;
	struct vrdma_srq *srq;
	struct vrdma_qp *qp;
	bool fits;

	if (qpn == VRDMA_QPN_GONE)
		return VRDMA_CQE_DROP;
	if (vrdma_token_tag(token) == VRDMA_TAG_XRC_SRQ) {
		/*
		 * An XRC SRQ's receive names the target QP that took it,
		 * perhaps another process's: the token names the SRQ, which
		 * reports to its own CQ. The QP number is reported as is.
		 */
		srq = vrdma_find_xrc_srq(ctx, vrdma_token_srqn(token));
		if (!srq)
			return vrdma_cq_lied(cq, qpn, token,
					     "names no XRC SRQ of this process");
		if (!recv || srq->vsrq.cq != &cq->vcq.cq)
			return vrdma_cq_lied(cq, qpn, token,
					     "is of a queue that does not report to this CQ");
		r = vrdma_srq_complete(srq, token, &posted);
		goto checked;
	}
	qp = vrdma_find_qp(ctx, qpn);
	if (!qp)
		return vrdma_cq_lied(cq, qpn, token, "names no QP of this process");
	if (vrdma_qp_cq(qp, recv) != &cq->vcq.cq)
		return vrdma_cq_lied(cq, qpn, token,
				     "is of a queue that does not report to this CQ");
	if (!recv)
		r = vrdma_wr_table_complete(&qp->swrs, token, error, &posted);
	else if (qp->vqp.qp.srq)
		r = vrdma_srq_complete(to_vsrq(qp->vqp.qp.srq), token, &posted);
	else
		r = vrdma_wr_table_complete(&qp->rwrs, token, error, &posted);
checked:
	switch (r) {
	case VRDMA_WR_OK:
		break;
	case VRDMA_WR_DISCARDED:
		return VRDMA_CQE_DROP;
	case VRDMA_WR_FLUSHED_BEFORE:
		wc->wr_id = posted.wr_id;
		wc->status = IBV_WC_WR_FLUSH_ERR;
		wc->opcode = recv ? IBV_WC_RECV : posted.opcode;
		wc->byte_len = 0;
		wc->wc_flags = 0;
		return VRDMA_CQE_BEFORE;
	case VRDMA_WR_OUT_OF_ORDER:
		return vrdma_cq_lied(cq, qpn, token,
				     "is of a receive that is not the oldest");
	case VRDMA_WR_SKIPS_SIGNALED:
		return vrdma_cq_lied(cq, qpn, token,
				     "skips a signaled request");
	default:
		return vrdma_cq_lied(cq, qpn, token,
				     "names no outstanding request");
	}
	/*
	 * A success must be of the request's operation (a receive's may be
	 * a write with immediate) and within its buffers; an error status must
	 * be one there is. Else the request completes as a general error.
	 */
	if (c->status == IBV_WC_SUCCESS)
		fits = c->opcode == IBV_WC_RECV_RDMA_WITH_IMM ? recv :
		       c->opcode == posted.opcode &&
		       le32toh(c->byte_len) <= posted.len;
	else
		fits = c->status <= IBV_WC_GENERAL_ERR;
	wc->wr_id = posted.wr_id;
	if (!fits)
		wc->status = IBV_WC_GENERAL_ERR;
	if (!recv)
		wc->opcode = posted.opcode;
	if (wc->status != IBV_WC_SUCCESS) {
		wc->byte_len = 0;
		if (recv)
			wc->opcode = IBV_WC_RECV;
	}
	return VRDMA_CQE_REPORT;
}

/*
 * Takes the next completion into @wc (under the ring's lock): 1 if there
 * is one, 0 if not, -EIO if the device lied on this CQ. The slot is copied
 * once before anything of it is used: in ring mode the device writes the
 * slots, and nothing read from one is used as an index or a pointer until
 * checked.
 */
/*
 * Without rings: whether completion @c, in the consumer's slot, is the past
 * of a QP since reset (its slot is before the reset's end).
 */
static bool vrdma_cq_past(const struct vrdma_cq *cq,
			  const struct virtio_rdma_cq_req *c)
{
	uint32_t qpn = le32toh(c->qp_num);
	unsigned int i;

	for (i = 0; i < cq->nresets; i++)
		if (cq->resets[i].qpn == qpn &&
		    (int32_t)(cq->resets[i].until - cq->consumer) > 0)
			return true;
	return false;
}

/*
 * Without rings, QP @qpn just reset: its completions the kernel has put
 * into @cq's ring are its past. Records older ones have run out of are
 * forgotten first; with no room left the past is polled as before.
 * Under the CQ's lock.
 */
static void vrdma_cq_forget_qp(struct vrdma_cq *cq, uint32_t qpn)
{
	struct vrdma_ring *ring = &cq->ring;
	uint32_t n = cq->consumer, i;
	unsigned int k = 0;

	for (i = 0; i < ring->depth; i++, n++) {
		struct virtio_rdma_ring_cqe *u = vrdma_slot(ring, n);

		if (vrdma_load(ring, &u->seq) != n + 1)
			break;
	}
	if (n == cq->consumer)
		return;
	for (i = 0; i < cq->nresets; i++)
		if ((int32_t)(cq->resets[i].until - cq->consumer) > 0)
			cq->resets[k++] = cq->resets[i];
	cq->nresets = k;
	if (k < VRDMA_CQ_RESETS)
		cq->resets[cq->nresets++] = (struct vrdma_cq_reset){
			.qpn = qpn, .until = n };
}

static int vrdma_cq_take(struct vrdma_cq *cq, struct ibv_wc *wc)
{
	struct vrdma_ring *ring = &cq->ring;
	struct virtio_rdma_ring_cqe *u;
	struct virtio_rdma_cq_req c;

	for (;;) {
		if (cq->broken)
			return -EIO;
		u = vrdma_slot(ring, cq->consumer);
		/* The completion is there once its sequence number is. */
		if (vrdma_load(ring, &u->seq) != cq->consumer + 1)
			return 0;
		c = u->cqe;
		vrdma_wc(&c, wc);
		if (!ring->own) {
			/* Whether it is past is a question of its own slot. */
			bool past = cq->nresets && vrdma_cq_past(cq, &c);

			cq->consumer++;
			if (past)
				continue;
			return 1;
		}
		switch (vrdma_cq_check(cq, &c, wc)) {
		case VRDMA_CQE_REPORT:
			cq->consumer++;
			return 1;
		case VRDMA_CQE_BEFORE:
			return 1;
		case VRDMA_CQE_DROP:
			cq->consumer++;
			break;
		case VRDMA_CQE_LIE:
			return -EIO;
		}
	}
}

/*
 * After reading the slots up to the consumer: the other side may then
 * rewrite them.
 */
static void vrdma_cq_release(struct vrdma_cq *cq)
{
	vrdma_store(&cq->ring, &cq->ring.rec->consumer, cq->consumer);
}

/*
 * Ring mode, after a resize: the completions not polled yet, from the
 * consumer up to the @produced the old ring received, go from @old into
 * the CQ's new ring, each in the slot of its number, its sequence number
 * last (the device writes the next ones into other slots meanwhile). A slot
 * whose sequence number is not its own ends the copy: the device's count is
 * not trusted further than the ring shows.
 */
static void vrdma_cq_move(struct vrdma_cq *cq, struct vrdma_ring *old,
			  uint32_t produced)
{
	uint32_t depth = min_t(uint32_t, old->depth, cq->ring.depth);
	uint32_t n, left = produced - cq->consumer;
	struct virtio_rdma_ring_cqe *from, *to;

	left = min_t(uint32_t, left, depth);
	for (n = cq->consumer; left; n++, left--) {
		from = vrdma_slot(old, n);
		to = vrdma_slot(&cq->ring, n);
		if (vrdma_load(old, &from->seq) != n + 1)
			break;
		to->cqe = from->cqe;
		vrdma_store(&cq->ring, &to->seq, n + 1);
	}
}

/*
 * ibv_resize_cq. Completion numbers go on across it (the user ABI's
 * RESIZE_CQ), so the consumer stays. Without rings in guest memory the
 * kernel has copied the completions not polled into the new ring it maps;
 * with them this process gives the new ring, the device writes the next
 * completions there, and those not polled come over from the old one here.
 * Under the CQ's lock: no poll sees a ring in between.
 */
static int vrdma_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct vrdma_cq *cq = to_vcq(ibcq);
	struct uvrdma_resize_cq_resp resp = {};
	struct uvrdma_resize_cq cmd = {};
	size_t cmd_size = sizeof(cmd.ibv_cmd);	/* no request data */
	struct vrdma_ring new = {}, old;
	int ret;

	if (cqe <= 0)
		return EINVAL;
	pthread_spin_lock(&cq->ring.lock);
	if (cq->ring.own) {
		ret = vrdma_alloc_ring(&new, cqe,
				       sizeof(struct virtio_rdma_ring_cqe));
		if (ret)
			goto out;
		/* What is not polled must fit: the device counts from here. */
		vrdma_store(&new, &new.rec->consumer, cq->consumer);
		cmd.addr = (uintptr_t)new.buf;
		cmd.depth = new.depth;
		cmd_size = sizeof(cmd);
	}
	ret = ibv_cmd_resize_cq(ibcq, cqe, &cmd.ibv_cmd, cmd_size,
				&resp.ibv_resp, sizeof(resp));
	if (ret) {
		vrdma_free_ring(&new);
		goto out;
	}
	if (!cq->ring.own) {
		/*
		 * The kernel fills the new ring now: if it cannot be mapped,
		 * this CQ gets no more completions (as rxe's).
		 */
		ret = vrdma_map_ring(ibcq->context->cmd_fd, &new, &resp.ring,
				     sizeof(struct virtio_rdma_ucqe));
		if (ret)
			goto out;
	}
	old = cq->ring;
	cq->ring.buf = new.buf;
	cq->ring.length = new.length;
	cq->ring.rec = new.rec;
	cq->ring.slots = new.slots;
	cq->ring.depth = new.depth;
	cq->ring.stride = new.stride;
	pthread_spin_destroy(&new.lock);
	if (cq->ring.own)
		vrdma_cq_move(cq, &old, resp.produced);
	vrdma_free_ring_mem(old.buf, old.length, old.own);
out:
	pthread_spin_unlock(&cq->ring.lock);
	return ret;
}

static int vrdma_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc)
{
	struct vrdma_cq *cq = to_vcq(ibcq);
	uint32_t start;
	int n, ret = 0;

	pthread_spin_lock(&cq->ring.lock);
	start = cq->consumer;
	for (n = 0; n < ne; n++) {
		ret = vrdma_cq_take(cq, &wc[n]);
		if (ret <= 0)
			break;
	}
	if (cq->consumer != start)
		vrdma_cq_release(cq);
	pthread_spin_unlock(&cq->ring.lock);
	/* What was taken before a lie is reported; the lie on the next call. */
	return n ? n : ret;
}

/* ibv_cq_ex: the completion taken becomes the current one. */
static int vrdma_cq_ex_take(struct vrdma_cq *cq)
{
	int ret = vrdma_cq_take(cq, &cq->wc);

	if (ret <= 0)
		return ret ? -ret : ENOENT;
	cq->vcq.cq_ex.wr_id = cq->wc.wr_id;
	cq->vcq.cq_ex.status = cq->wc.status;
	return 0;
}

/* Holds the CQ's lock until end_poll, unless there is nothing (ENOENT). */
static int vrdma_start_poll(struct ibv_cq_ex *ibcq,
			    struct ibv_poll_cq_attr *attr)
{
	struct vrdma_cq *cq = to_vcq_ex(ibcq);
	int ret;

	if (attr->comp_mask)
		return EINVAL;
	pthread_spin_lock(&cq->ring.lock);
	cq->poll_start = cq->consumer;
	ret = vrdma_cq_ex_take(cq);
	if (ret) {
		/* Completions dropped on the way are taken all the same. */
		if (cq->consumer != cq->poll_start)
			vrdma_cq_release(cq);
		pthread_spin_unlock(&cq->ring.lock);
	}
	return ret;
}

static int vrdma_next_poll(struct ibv_cq_ex *ibcq)
{
	return vrdma_cq_ex_take(to_vcq_ex(ibcq));
}

static void vrdma_end_poll(struct ibv_cq_ex *ibcq)
{
	struct vrdma_cq *cq = to_vcq_ex(ibcq);

	if (cq->consumer != cq->poll_start)
		vrdma_cq_release(cq);
	pthread_spin_unlock(&cq->ring.lock);
}

static enum ibv_wc_opcode vrdma_wc_read_opcode(struct ibv_cq_ex *ibcq)
{
	return to_vcq_ex(ibcq)->wc.opcode;
}

static uint32_t vrdma_wc_read_vendor_err(struct ibv_cq_ex *ibcq)
{
	return to_vcq_ex(ibcq)->wc.vendor_err;
}

static uint32_t vrdma_wc_read_byte_len(struct ibv_cq_ex *ibcq)
{
	return to_vcq_ex(ibcq)->wc.byte_len;
}

/* The immediate data, or the invalidated rkey (they share the field). */
static __be32 vrdma_wc_read_imm_data(struct ibv_cq_ex *ibcq)
{
	return to_vcq_ex(ibcq)->wc.imm_data;
}

static uint32_t vrdma_wc_read_qp_num(struct ibv_cq_ex *ibcq)
{
	return to_vcq_ex(ibcq)->wc.qp_num;
}

static uint32_t vrdma_wc_read_src_qp(struct ibv_cq_ex *ibcq)
{
	return to_vcq_ex(ibcq)->wc.src_qp;
}

static unsigned int vrdma_wc_read_wc_flags(struct ibv_cq_ex *ibcq)
{
	return to_vcq_ex(ibcq)->wc.wc_flags;
}

static uint32_t vrdma_wc_read_slid(struct ibv_cq_ex *ibcq)
{
	return to_vcq_ex(ibcq)->wc.slid;
}

static uint8_t vrdma_wc_read_sl(struct ibv_cq_ex *ibcq)
{
	return to_vcq_ex(ibcq)->wc.sl;
}

static uint8_t vrdma_wc_read_dlid_path_bits(struct ibv_cq_ex *ibcq)
{
	return to_vcq_ex(ibcq)->wc.dlid_path_bits;
}

static void vrdma_cq_ex_ops(struct vrdma_cq *cq)
{
	struct ibv_cq_ex *c = &cq->vcq.cq_ex;

	c->start_poll = vrdma_start_poll;
	c->next_poll = vrdma_next_poll;
	c->end_poll = vrdma_end_poll;
	c->read_opcode = vrdma_wc_read_opcode;
	c->read_vendor_err = vrdma_wc_read_vendor_err;
	c->read_byte_len = vrdma_wc_read_byte_len;
	c->read_imm_data = vrdma_wc_read_imm_data;
	c->read_qp_num = vrdma_wc_read_qp_num;
	c->read_src_qp = vrdma_wc_read_src_qp;
	c->read_wc_flags = vrdma_wc_read_wc_flags;
	c->read_slid = vrdma_wc_read_slid;
	c->read_sl = vrdma_wc_read_sl;
	c->read_dlid_path_bits = vrdma_wc_read_dlid_path_bits;
}

static int vrdma_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct vrdma_cq *cq = to_vcq(ibcq);
	uint32_t none = htole32(VIRTIO_RDMA_CQ_ARM_NONE);
	uint32_t *arm;

	if (!cq->ring.own)
		return ibv_cmd_req_notify_cq(ibcq, solicited_only);
	/* Not into a ring a resize is replacing (the arming moves with it). */
	pthread_spin_lock(&cq->ring.lock);
	arm = &cq->ring.rec->arm;
	if (!solicited_only)
		vrdma_store(&cq->ring, arm, VIRTIO_RDMA_CQ_ARM_NEXT);
	else	/* as in IB, this does not weaken an arm for the next one */
		__atomic_compare_exchange_n(arm, &none,
					    htole32(VIRTIO_RDMA_CQ_ARM_SOLICITED),
					    false, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED);
	pthread_spin_unlock(&cq->ring.lock);
	/*
	 * The device reads arm after a full barrier once it wrote a
	 * completion; this one orders the store before the caller's next
	 * poll, so a completion either raises an event or is polled.
	 */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return 0;
}

/*
 * Ring mode: the bytes of a slot for a @hdr then @num_sge SGEs or
 * @inline_len bytes of inline data. A QP has at least one SGE each way (the
 * kernel raises 0 to 1).
 */
static uint64_t vrdma_stride(size_t hdr, uint32_t num_sge, uint32_t inline_len)
{
	uint64_t body = (uint64_t)max_t(uint32_t, num_sge, 1) *
			sizeof(struct virtio_rdma_sge);

	body = max_t(uint64_t, body, inline_len);
	return (hdr + body + 7) & ~7ULL;
}

/*
 * Ring mode: the QP's rings, for the caps asked; no receive ring for a QP
 * with an SRQ (@srq).
 */
static int vrdma_alloc_qp_rings(struct vrdma_qp *qp,
				const struct ibv_qp_cap *cap, bool srq)
{
	int ret;

	ret = vrdma_alloc_ring(&qp->sq, cap->max_send_wr,
			       vrdma_stride(sizeof(struct virtio_rdma_sq_req),
					    cap->max_send_sge,
					    cap->max_inline_data));
	if (ret || srq)
		return ret;
	return vrdma_alloc_ring(&qp->rq, cap->max_recv_wr,
				vrdma_stride(sizeof(struct virtio_rdma_rq_req),
					     cap->max_recv_sge, 0));
}

/*
 * Ring mode: whether the caps the kernel granted fit the rings made for the
 * caps asked (the kernel may raise them).
 */
static bool vrdma_caps_fit(const struct vrdma_qp *qp,
			   const struct ibv_qp_cap *cap)
{
	/* A QP with an SRQ has no receive queue: the kernel grants none. */
	if (!qp->rq.buf)
		return cap->max_send_wr <= qp->sq.depth &&
		       !cap->max_recv_wr &&
		       vrdma_stride(sizeof(struct virtio_rdma_sq_req),
				    cap->max_send_sge,
				    cap->max_inline_data) <= qp->sq.stride;
	return cap->max_send_wr <= qp->sq.depth &&
	       cap->max_recv_wr <= qp->rq.depth &&
	       vrdma_stride(sizeof(struct virtio_rdma_sq_req), cap->max_send_sge,
			    cap->max_inline_data) <= qp->sq.stride &&
	       vrdma_stride(sizeof(struct virtio_rdma_rq_req), cap->max_recv_sge,
			    0) <= qp->rq.stride;
}

/* The send operations of ibv_wr_* the device takes from a process. */
#define VRDMA_UD_SEND_OPS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)
#define VRDMA_UC_SEND_OPS (VRDMA_UD_SEND_OPS | IBV_QP_EX_WITH_RDMA_WRITE | \
			   IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)
#define VRDMA_RC_SEND_OPS (VRDMA_UC_SEND_OPS | IBV_QP_EX_WITH_RDMA_READ | \
			   IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | \
			   IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | \
			   IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | \
			   IBV_QP_EX_WITH_SEND_WITH_INV | \
			   IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_FLUSH)

static void vrdma_qp_ex_ops(struct vrdma_qp *qp);

/* Whether the send operations @attr asks for are ones the device takes. */
static bool vrdma_send_ops_ok(const struct ibv_qp_init_attr_ex *attr)
{
	uint64_t ops;

	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		return true;
	switch (attr->qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_XRC_SEND:	/* RC's, each to the SRQ it names */
		ops = VRDMA_RC_SEND_OPS;
		break;
	case IBV_QPT_UC:
		ops = VRDMA_UC_SEND_OPS;
		break;
	case IBV_QPT_UD:
		ops = VRDMA_UD_SEND_OPS;
		break;
	default:
		return false;
	}
	return !(attr->send_ops_flags & ~ops);
}

/* @qp's send CQ and receive CQ (the send CQ again if it has none). */
static void vrdma_qp_cqs(struct ibv_qp *qp, struct vrdma_cq **s,
			 struct vrdma_cq **r)
{
	struct ibv_cq *recv_cq = vrdma_qp_cq(to_vqp(qp), true);

	*s = to_vcq(qp->send_cq);
	*r = recv_cq ? to_vcq(recv_cq) : *s;
}

/*
 * Ring mode: the locks of @qp's CQs (one if they are the same, else in
 * address order), under which its entry in the QP table and its tables'
 * completing side change.
 */
static void vrdma_lock_cqs(struct ibv_qp *qp)
{
	struct vrdma_cq *s, *r;

	vrdma_qp_cqs(qp, &s, &r);

	if (s == r) {
		pthread_spin_lock(&s->ring.lock);
	} else if (s < r) {
		pthread_spin_lock(&s->ring.lock);
		pthread_spin_lock(&r->ring.lock);
	} else {
		pthread_spin_lock(&r->ring.lock);
		pthread_spin_lock(&s->ring.lock);
	}
}

static void vrdma_unlock_cqs(struct ibv_qp *qp)
{
	struct vrdma_cq *s, *r;

	vrdma_qp_cqs(qp, &s, &r);
	pthread_spin_unlock(&s->ring.lock);
	if (s != r)
		pthread_spin_unlock(&r->ring.lock);
}

/*
 * Whether completion @c is of QP @qpn. Not one whose token is an XRC SRQ's:
 * that names a target QP, whatever process's (vrdma_cq_check).
 */
static bool vrdma_cqe_of_qp(const struct virtio_rdma_cq_req *c, uint32_t qpn)
{
	return le32toh(c->qp_num) == qpn &&
	       vrdma_token_tag(le64toh(c->wr_id)) != VRDMA_TAG_XRC_SRQ;
}

/* Whether completion @c is of the XRC SRQ numbered @srqn. */
static bool vrdma_cqe_of_xrc_srq(const struct virtio_rdma_cq_req *c,
				 uint32_t srqn)
{
	uint64_t token = le64toh(c->wr_id);

	return vrdma_token_tag(token) == VRDMA_TAG_XRC_SRQ &&
	       vrdma_token_srqn(token) == srqn;
}

/*
 * Ring mode, a QP or XRC SRQ destroyed (no completion of it comes any
 * more): its completions not polled yet in @cq (those @of says are of
 * object @id) are marked as a gone QP's, so that they are dropped and not
 * taken for a lie. Under the CQ's lock.
 */
static void vrdma_cq_clean(struct vrdma_cq *cq,
			   bool (*of)(const struct virtio_rdma_cq_req *c,
				      uint32_t id),
			   uint32_t id)
{
	struct vrdma_ring *ring = &cq->ring;
	struct virtio_rdma_ring_cqe *u;
	uint32_t i, n = cq->consumer;

	/* The device writes no slot the consumer has not passed yet. */
	for (i = 0; i < ring->depth; i++, n++) {
		u = vrdma_slot(ring, n);
		if (vrdma_load(ring, &u->seq) != n + 1)
			break;
		if (of(&u->cqe, id))
			u->cqe.qp_num = htole32(VRDMA_QPN_GONE);
	}
}

/* Ring mode: @qp (or NULL: @ibqp is gone) as the QP numbered @qpn. */
static int vrdma_set_qp(struct ibv_qp *ibqp, struct vrdma_qp *qp)
{
	struct vrdma_context *ctx = to_vctx(ibqp->context);
	void **entry = vrdma_num_table_entry(&ctx->qps, ibqp->qp_num);
	struct vrdma_cq *s, *r;

	if (!entry)
		return ENOMEM;
	vrdma_qp_cqs(ibqp, &s, &r);
	vrdma_lock_cqs(ibqp);
	if (qp) {
		vrdma_num_table_set(entry, qp);
	} else {
		vrdma_num_table_clear(entry, to_vqp(ibqp));
		vrdma_cq_clean(s, vrdma_cqe_of_qp, ibqp->qp_num);
		if (r != s)
			vrdma_cq_clean(r, vrdma_cqe_of_qp, ibqp->qp_num);
	}
	vrdma_unlock_cqs(ibqp);
	return 0;
}

static void vrdma_qp_tables_free(struct vrdma_qp *qp)
{
	vrdma_wr_table_free(&qp->swrs);
	vrdma_wr_table_free(&qp->rwrs);
}

/*
 * Ring mode: the QP's request tables, as deep as its rings, and its entry
 * in the context's QP table.
 */
static int vrdma_qp_tables(struct vrdma_qp *qp)
{
	int ret;

	ret = vrdma_wr_table_init(&qp->swrs, qp->sq.depth, VRDMA_TAG_SEND);
	if (!ret)
		vrdma_wr_table_limit(&qp->swrs, qp->max_send_wr);
	if (!ret && qp->rq.buf) {
		ret = vrdma_wr_table_init(&qp->rwrs, qp->rq.depth,
					  VRDMA_TAG_RECV);
		if (!ret)
			vrdma_wr_table_limit(&qp->rwrs, qp->max_recv_wr);
	}
	if (!ret)
		ret = vrdma_set_qp(&qp->vqp.qp, qp);
	if (ret)
		vrdma_qp_tables_free(qp);
	return ret;
}

static bool vrdma_xrc_qp_type(enum ibv_qp_type type)
{
	return type == IBV_QPT_XRC_SEND || type == IBV_QPT_XRC_RECV;
}

/*
 * The kernel's CREATE_QP of @qp, with the driver's request @drv (NULL: none)
 * and answer *@drv_resp. XRC QPs go by the extended command, the one the
 * kernel driver's XRC support is written against (both reach the kernel's
 * one QP handler); the others keep the basic one.
 */
static int vrdma_cmd_create_qp(struct ibv_context *context,
			       struct vrdma_qp *qp,
			       struct ibv_qp_init_attr_ex *attr,
			       const struct virtio_rdma_create_qp_cmd *drv,
			       struct virtio_rdma_create_qp_resp *drv_resp)
{
	struct uvrdma_create_qp_ex_resp resp_ex = {};
	struct uvrdma_create_qp_resp resp = {};
	struct uvrdma_create_qp_ex cmd_ex = {};
	struct uvrdma_create_qp cmd = {};
	struct ibv_qp_init_attr_ex basic;
	int ret;

	if (vrdma_xrc_qp_type(attr->qp_type)) {
		if (drv)
			cmd_ex.drv_payload = *drv;
		ret = ibv_cmd_create_qp_ex2(context, &qp->vqp, attr,
					    &cmd_ex.ibv_cmd,
					    drv ? sizeof(cmd_ex) :
						  sizeof(cmd_ex.ibv_cmd),
					    &resp_ex.ibv_resp, sizeof(resp_ex));
		*drv_resp = resp_ex.drv_payload;
		return ret;
	}
	if (drv)
		cmd.drv_payload = *drv;
	/*
	 * The basic command takes no create flags, not even none: without any
	 * (vrdma_qp_attr_ok allows only that) the bit is dropped here. The
	 * kernel's answer, the granted caps, goes back into @attr.
	 */
	basic = *attr;
	basic.comp_mask &= ~IBV_QP_INIT_ATTR_CREATE_FLAGS;
	ret = ibv_cmd_create_qp_ex(context, &qp->vqp, &basic, &cmd.ibv_cmd,
				   drv ? sizeof(cmd) : sizeof(cmd.ibv_cmd),
				   &resp.ibv_resp, sizeof(resp));
	attr->cap = basic.cap;
	*drv_resp = resp.drv_payload;
	return ret;
}

/*
 * Whether @attr asks for a QP this provider can make: EINVAL for one IB
 * does not define (no PD, or an XRC_RECV QP without its domain), EOPNOTSUPP
 * for one the device does not offer. XRC needs SRQs, which only rings in
 * guest memory (@rings) have.
 */
static int vrdma_qp_attr_ok(const struct ibv_qp_init_attr_ex *attr,
			    bool rings)
{
	uint32_t need = attr->qp_type == IBV_QPT_XRC_RECV ?
			IBV_QP_INIT_ATTR_XRCD : IBV_QP_INIT_ATTR_PD;

	if (!(attr->comp_mask & need))
		return EINVAL;
	if (attr->comp_mask & ~(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |
				IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
				IBV_QP_INIT_ATTR_CREATE_FLAGS) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
	     attr->create_flags) ||
	    !vrdma_send_ops_ok(attr))
		return EOPNOTSUPP;
	if ((attr->srq || vrdma_xrc_qp_type(attr->qp_type)) && !rings)
		return EOPNOTSUPP;
	return 0;
}

/*
 * A QP for ibv_create_qp (comp_mask PD only) or ibv_create_qp_ex; on
 * success attr->cap holds the caps the kernel granted. An XRC_SEND QP is a
 * ring QP without a receive ring; an XRC_RECV QP has no rings at all (it
 * takes its receives from the XRC SRQ each message names, and sends only
 * responses): the kernel gets no request data for it.
 */
static struct ibv_qp *vrdma_create_qp_ex(struct ibv_context *context,
					 struct ibv_qp_init_attr_ex *attr)
{
	bool rings = to_vctx(context)->caps & VIRTIO_RDMA_CAP_RINGS;
	bool tgt = attr->qp_type == IBV_QPT_XRC_RECV;
	struct virtio_rdma_create_qp_resp resp = {};
	struct virtio_rdma_create_qp_cmd cmd = {};
	struct vrdma_qp *qp;
	int ret;

	ret = vrdma_qp_attr_ok(attr, rings);
	if (ret) {
		errno = ret;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	if (rings && !tgt) {
		ret = vrdma_alloc_qp_rings(qp, &attr->cap,
					   attr->srq ||
					   attr->qp_type == IBV_QPT_XRC_SEND);
		if (ret)
			goto err_rings;
		/* A QP without a receive ring names none: all zero. */
		cmd.sq_addr = (uintptr_t)qp->sq.buf;
		cmd.rq_addr = (uintptr_t)qp->rq.buf;
		cmd.sq_depth = qp->sq.depth;
		cmd.sq_stride = qp->sq.stride;
		cmd.rq_depth = qp->rq.depth;
		cmd.rq_stride = qp->rq.stride;
	}
	ret = vrdma_cmd_create_qp(context, qp, attr,
				  qp->sq.buf ? &cmd : NULL, &resp);
	if (ret)
		goto err_rings;
	qp->max_inline = attr->cap.max_inline_data;
	qp->max_send_wr = attr->cap.max_send_wr;
	qp->max_recv_wr = attr->cap.max_recv_wr;
	qp->max_send_sge = attr->cap.max_send_sge;
	qp->max_recv_sge = attr->cap.max_recv_sge;
	qp->sig_all = attr->sq_sig_all;
	if (tgt) {
		/* Nothing is posted to it and no completion names it as ours. */
		ret = 0;
	} else if (rings) {
		ret = vrdma_caps_fit(qp, &attr->cap) ? 0 : EPROTO;
		if (!ret)
			ret = vrdma_qp_tables(qp);
	} else {
		ret = vrdma_map_ring(context->cmd_fd, &qp->sq, &resp.sq,
				     sizeof(struct virtio_rdma_sq_req));
		if (!ret)
			ret = vrdma_map_ring(context->cmd_fd, &qp->rq,
					     &resp.rq,
					     sizeof(struct virtio_rdma_rq_req));
	}
	if (ret)
		goto err_destroy;
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
		vrdma_qp_ex_ops(qp);
	return &qp->vqp.qp;

err_destroy:
	/* If the QP lives on, so must the rings the device uses: leak them. */
	if (ibv_cmd_destroy_qp(&qp->vqp.qp) && rings)
		goto err_free;
err_rings:
	vrdma_free_ring(&qp->sq);
	vrdma_free_ring(&qp->rq);
err_free:
	free(qp);
	errno = ret;
	return NULL;
}

/*
 * ibv_open_qp: an XRC_RECV QP of a shared domain, made by this or another
 * process; as one this process created, it has no rings.
 */
static struct ibv_qp *vrdma_open_qp(struct ibv_context *context,
				    struct ibv_qp_open_attr *attr)
{
	struct ib_uverbs_create_qp_resp resp;
	struct ibv_open_qp cmd = {};
	struct vrdma_qp *qp;
	int ret;

	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibv_cmd_open_qp(context, &qp->vqp, sizeof(qp->vqp), attr, &cmd,
			      sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(qp);
		errno = ret;
		return NULL;
	}
	return &qp->vqp.qp;
}

static struct ibv_qp *vrdma_create_qp(struct ibv_pd *pd,
				      struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex attr_ex = {
		.qp_context = attr->qp_context,
		.send_cq = attr->send_cq,
		.recv_cq = attr->recv_cq,
		.srq = attr->srq,
		.cap = attr->cap,
		.qp_type = attr->qp_type,
		.sq_sig_all = attr->sq_sig_all,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = pd,
	};
	struct ibv_qp *qp = vrdma_create_qp_ex(pd->context, &attr_ex);

	if (qp)
		attr->cap = attr_ex.cap;
	return qp;
}

static int vrdma_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			  int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	struct ibv_query_qp cmd;

	return ibv_cmd_query_qp(qp, attr, attr_mask, init_attr, &cmd,
				sizeof(cmd));
}

static int vrdma_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
			   int attr_mask)
{
	struct vrdma_qp *qp = to_vqp(ibqp);
	struct ibv_modify_qp cmd = {};
	int ret;

	ret = ibv_cmd_modify_qp(ibqp, attr, attr_mask, &cmd, sizeof(cmd));
	if (ret || !(attr_mask & IBV_QP_STATE) ||
	    attr->qp_state != IBV_QPS_RESET || !ibqp->send_cq)
		return ret;
	if (!qp->sq.own) {
		/*
		 * The kernel dropped what was outstanding, and drops the
		 * completions of it still to come; those already in the CQs'
		 * rings are dropped as they are polled.
		 */
		struct vrdma_cq *s, *r;

		vrdma_qp_cqs(ibqp, &s, &r);
		vrdma_lock_cqs(ibqp);
		vrdma_cq_forget_qp(s, ibqp->qp_num);
		if (r != s)
			vrdma_cq_forget_qp(r, ibqp->qp_num);
		vrdma_unlock_cqs(ibqp);
		return 0;
	}
	/*
	 * Ring mode: the device dropped what was outstanding without
	 * completions; those in the CQs are dropped as they come.
	 */
	vrdma_lock_cqs(ibqp);
	pthread_spin_lock(&qp->sq.lock);
	vrdma_wr_table_reset(&qp->swrs);
	pthread_spin_unlock(&qp->sq.lock);
	if (qp->rq.buf) {
		pthread_spin_lock(&qp->rq.lock);
		vrdma_wr_table_reset(&qp->rwrs);
		pthread_spin_unlock(&qp->rq.lock);
	}
	vrdma_unlock_cqs(ibqp);
	return 0;
}

static int vrdma_destroy_qp(struct ibv_qp *ibqp)
{
	struct vrdma_qp *qp = to_vqp(ibqp);
	int ret;

	ret = ibv_cmd_destroy_qp(ibqp);
	if (ret)
		return ret;
	if (qp->sq.own) {
		/* Its entry exists: creating the QP made it. */
		vrdma_set_qp(ibqp, NULL);
		vrdma_qp_tables_free(qp);
	}
	vrdma_free_ring(&qp->sq);
	vrdma_free_ring(&qp->rq);
	free(qp);
	return 0;
}

/*
 * The doorbell: a uverbs @command (POST_SEND or POST_RECV of the QP, or
 * POST_SRQ_RECV of the SRQ, whose @handle it is) without work requests.
 * Returns 0 or the errno.
 */
static int vrdma_kick(struct ibv_context *context, uint32_t handle,
		      uint32_t command)
{
	struct ibv_post_send cmd = {};
	struct ib_uverbs_post_send_resp resp;

	/* The three commands share this layout up to wqe_size. */
	cmd.hdr.command = command;
	cmd.hdr.in_words = sizeof(cmd) / 4;
	cmd.hdr.out_words = sizeof(resp) / 4;
	cmd.response = (uintptr_t)&resp;
	cmd.qp_handle = handle;
	cmd.wqe_size = sizeof(struct ibv_send_wr);
	if (write(context->cmd_fd, &cmd, sizeof(cmd)) != sizeof(cmd))
		return errno;
	return 0;
}

/*
 * Kernel rings: publishes the ring's producer and rings the doorbell. On
 * failure the elements the kernel did not take are withdrawn (the producer
 * goes back to the kernel's consumer); returns the errno and, in *taken, how
 * many of the elements written since @start the kernel took (the failing
 * one included for EINVAL: the kernel skips an element it refuses).
 */
static int vrdma_doorbell(struct ibv_qp *ibqp, struct vrdma_ring *ring,
			  uint32_t command, uint32_t start, uint32_t *taken)
{
	uint32_t consumer;
	int ret;

	/* Elements before index: the kernel reads them after this store. */
	vrdma_store(ring, &ring->rec->producer, ring->producer);
	ret = vrdma_kick(ibqp->context, ibqp->handle, command);
	consumer = vrdma_load(ring, &ring->rec->consumer);
	*taken = consumer - start;
	if (ret) {
		ring->producer = consumer;
		vrdma_store(ring, &ring->rec->producer, consumer);
	}
	return ret;
}

/*
 * Ring mode: publishes the ring's producer to the device, which polls the
 * ring while it has work. Before it stops it sets NOTIFY, then (after a
 * full barrier) reads producer once more: with the store, a full barrier
 * and the read of flags here, either it sees the new producer or this sees
 * NOTIFY and rings the doorbell. The doorbell cannot fail work requests
 * (the device checks them, and may be reading them already), so its result
 * is not reported: a kick the device missed leaves NOTIFY set, and the next
 * post rings again.
 */
static void vrdma_publish(struct ibv_context *context, uint32_t handle,
			  struct vrdma_ring *ring, uint32_t command)
{
	vrdma_store(ring, &ring->rec->producer, ring->producer);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (vrdma_load(ring, &ring->rec->flags) & VIRTIO_RDMA_RING_F_NOTIFY)
		vrdma_kick(context, handle, command);
}

/*
 * The position, among the requests of a failed doorbell, of the one that
 * failed: the kernel's consumer passed a request it refused (EINVAL) and
 * stopped before one it could not take (any other error).
 */
static uint32_t vrdma_bad_index(int err, uint32_t taken)
{
	return err == EINVAL && taken ? taken - 1 : taken;
}

/*
 * The consumer is the other side's (the device's in ring mode): a bogus one
 * only makes the ring look full, and slots are indexed by our producer.
 */
static int vrdma_ring_full(struct vrdma_ring *ring)
{
	uint32_t consumer = vrdma_load(ring, &ring->rec->consumer);

	return ring->producer - consumer >= ring->depth;
}

static void vrdma_write_sges(struct virtio_rdma_sge *dst,
			     const struct ibv_sge *sg, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		dst[i].addr = htole64(sg[i].addr);
		dst[i].length = htole32(sg[i].length);
		dst[i].lkey = htole32(sg[i].lkey);
	}
}

/*
 * The builders of a send element, shared by ibv_post_send and ibv_wr_*:
 * the header, then what the operation needs (remote address, atomic
 * operands, UD address), then the data (SGEs or inline bytes).
 */
static struct virtio_rdma_sq_req *vrdma_sq_begin(uint8_t *slot,
						 uint64_t wr_id,
						 enum ibv_wr_opcode opcode,
						 unsigned int send_flags,
						 uint32_t ex)
{
	struct virtio_rdma_sq_req *req = (void *)slot;

	memset(req, 0, sizeof(*req));
	req->wr_id = htole64(wr_id);
	req->opcode = opcode;
	req->send_flags = htole32(send_flags);
	req->ex = htole32(ex);
	return req;
}

static void vrdma_sq_rdma(struct virtio_rdma_sq_req *req, uint32_t rkey,
			  uint64_t remote_addr)
{
	req->wr.rdma.remote_addr = htole64(remote_addr);
	req->wr.rdma.rkey = htole32(rkey);
}

static void vrdma_sq_atomic(struct virtio_rdma_sq_req *req, uint32_t rkey,
			    uint64_t remote_addr, uint64_t compare_add,
			    uint64_t swap)
{
	req->wr.atomic.remote_addr = htole64(remote_addr);
	req->wr.atomic.compare_add = htole64(compare_add);
	req->wr.atomic.swap = htole64(swap);
	req->wr.atomic.rkey = htole32(rkey);
}

/* ATOMIC WRITE: its 8 bytes travel in compare_add, in memory order. */
static void vrdma_sq_atomic_write(struct virtio_rdma_sq_req *req, uint32_t rkey,
				  uint64_t remote_addr, const void *bytes)
{
	req->wr.atomic.remote_addr = htole64(remote_addr);
	memcpy(&req->wr.atomic.compare_add, bytes, 8);
	req->wr.atomic.rkey = htole32(rkey);
}

static void vrdma_sq_flush(struct virtio_rdma_sq_req *req, uint32_t rkey,
			   uint64_t remote_addr, size_t len, uint8_t type,
			   uint8_t level)
{
	req->wr.flush.remote_addr = htole64(remote_addr);
	req->wr.flush.length = htole64(len);
	req->wr.flush.rkey = htole32(rkey);
	req->wr.flush.flush_type = type;
	req->wr.flush.flush_level = level;
}

static int vrdma_sq_ud(struct virtio_rdma_sq_req *req, struct ibv_ah *ibah,
		       uint32_t remote_qpn, uint32_t remote_qkey)
{
	if (!ibah)
		return EINVAL;
	req->wr.ud.remote_qpn = htole32(remote_qpn);
	req->wr.ud.remote_qkey = htole32(remote_qkey);
	req->wr.ud.av = container_of(ibah, struct vrdma_ah, ibv_ah)->av;
	return 0;
}

/*
 * The SRQ of the XRC target's domain that a request of an XRC_SEND QP is
 * for: after the rdma or atomic part, in every request but the local ones.
 */
static void vrdma_sq_xrc(struct virtio_rdma_sq_req *req, uint32_t remote_srqn)
{
	req->wr.xrc.remote_srqn = htole32(remote_srqn);
}

/* The operations that carry no XRC SRQ number: they do not leave the QP. */
static bool vrdma_local_op(enum ibv_wr_opcode opcode)
{
	return opcode == IBV_WR_BIND_MW || opcode == IBV_WR_LOCAL_INV;
}

/* The BIND_MW part: @mw (rkey now) to become @rkey, over @info. */
static void vrdma_sq_bind(struct virtio_rdma_sq_req *req,
			  const struct ibv_mw *mw, uint32_t rkey,
			  const struct ibv_mw_bind_info *info)
{
	req->wr.bind.addr = htole64(info->addr);
	req->wr.bind.length = htole64(info->length);
	req->wr.bind.mw_rkey = htole32(mw->rkey);
	req->wr.bind.new_rkey = htole32(rkey);
	/* Unbinding a type 1 window (length 0) names no MR. */
	req->wr.bind.mr_lkey = htole32(info->mr ? info->mr->lkey : 0);
	req->wr.bind.access = htole32(info->mw_access_flags);
}

/* The bytes of a send slot after the header, for SGEs or inline data. */
static size_t vrdma_sq_room(const struct vrdma_qp *qp)
{
	return qp->sq.stride - sizeof(struct virtio_rdma_sq_req);
}

/* The element's data: @n SGEs (replacing any data it had). */
static int vrdma_sq_sges(struct vrdma_qp *qp, struct virtio_rdma_sq_req *req,
			 const struct ibv_sge *sg, size_t n)
{
	if (n > qp->max_send_sge ||
	    n * sizeof(struct virtio_rdma_sge) > vrdma_sq_room(qp))
		return EINVAL;
	req->send_flags &= ~htole32(IBV_SEND_INLINE);
	req->inline_len = 0;
	req->num_sge = htole16(n);
	vrdma_write_sges((void *)(req + 1), sg, n);
	return 0;
}

/* The element's data: inline from now on, no byte of it yet. */
static void vrdma_sq_inline_start(struct virtio_rdma_sq_req *req)
{
	req->send_flags |= htole32(IBV_SEND_INLINE);
	req->num_sge = 0;
	req->inline_len = 0;
}

/* Appends @len bytes at @addr to the element's inline data. */
static int vrdma_sq_inline(struct vrdma_qp *qp, struct virtio_rdma_sq_req *req,
			   const void *addr, size_t len)
{
	size_t have = le32toh(req->inline_len);

	if (len > qp->max_inline - have || len > vrdma_sq_room(qp) - have)
		return EINVAL;
	memcpy((uint8_t *)(req + 1) + have, addr, len);
	req->inline_len = htole32(have + len);
	return 0;
}

/*
 * Writes @wr as a send element carrying @wr_id (the process's, or in ring
 * mode its token) into @slot; an errno if it cannot be one.
 */
static int vrdma_encode_send(struct vrdma_qp *qp, struct ibv_send_wr *wr,
			     uint8_t *slot, uint64_t wr_id)
{
	struct virtio_rdma_sq_req *req;
	uint32_t ex = 0;
	int i, ret;

	switch (wr->opcode) {
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		ex = wr->imm_data;
		break;
	case IBV_WR_LOCAL_INV:
	case IBV_WR_SEND_WITH_INV:
		ex = wr->invalidate_rkey;
		break;
	default:
		break;
	}
	req = vrdma_sq_begin(slot, wr_id, wr->opcode, wr->send_flags, ex);
	if (qp->vqp.qp.qp_type == IBV_QPT_UD) {
		ret = vrdma_sq_ud(req, wr->wr.ud.ah, wr->wr.ud.remote_qpn,
				  wr->wr.ud.remote_qkey);
		if (ret)
			return ret;
	} else {
		switch (wr->opcode) {
		case IBV_WR_RDMA_WRITE:
		case IBV_WR_RDMA_WRITE_WITH_IMM:
		case IBV_WR_RDMA_READ:
			vrdma_sq_rdma(req, wr->wr.rdma.rkey,
				      wr->wr.rdma.remote_addr);
			break;
		case IBV_WR_ATOMIC_CMP_AND_SWP:
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			vrdma_sq_atomic(req, wr->wr.atomic.rkey,
					wr->wr.atomic.remote_addr,
					wr->wr.atomic.compare_add,
					wr->wr.atomic.swap);
			break;
		case IBV_WR_SEND:
		case IBV_WR_SEND_WITH_IMM:
		case IBV_WR_SEND_WITH_INV:
			break;
		case IBV_WR_BIND_MW:
			if (!wr->bind_mw.mw)
				return EINVAL;
			vrdma_sq_bind(req, wr->bind_mw.mw, wr->bind_mw.rkey,
				      &wr->bind_mw.bind_info);
			/* fallthrough */
		case IBV_WR_LOCAL_INV:
			/* Local operations carry no data. */
			if (wr->send_flags & IBV_SEND_INLINE)
				return EINVAL;
			return vrdma_sq_sges(qp, req, NULL, 0);
		default:
			return EINVAL;
		}
	}
	/* The local operations returned above. */
	if (qp->vqp.qp.qp_type == IBV_QPT_XRC_SEND)
		vrdma_sq_xrc(req, wr->qp_type.xrc.remote_srqn);
	if (wr->num_sge < 0)
		return EINVAL;
	if (!(wr->send_flags & IBV_SEND_INLINE))
		return vrdma_sq_sges(qp, req, wr->sg_list, wr->num_sge);
	/* Inline data is gathered into the element itself. */
	vrdma_sq_inline_start(req);
	for (i = 0; i < wr->num_sge; i++) {
		ret = vrdma_sq_inline(qp, req,
				      (void *)(uintptr_t)wr->sg_list[i].addr,
				      wr->sg_list[i].length);
		if (ret)
			return ret;
	}
	return 0;
}

/* Whether @wr fits a receive element of at most @max_sge entries of @ring. */
static bool vrdma_recv_fits(const struct vrdma_ring *ring, uint32_t max_sge,
			    const struct ibv_recv_wr *wr)
{
	return wr->num_sge >= 0 && (uint32_t)wr->num_sge <= max_sge &&
	       sizeof(struct virtio_rdma_rq_req) +
			       wr->num_sge * sizeof(struct virtio_rdma_sge) <=
		       ring->stride;
}

/*
 * Writes @wr (which fits) as a receive element carrying @wr_id into the
 * next slot of @ring.
 */
static void vrdma_encode_recv(struct vrdma_ring *ring, struct ibv_recv_wr *wr,
			      uint64_t wr_id)
{
	struct virtio_rdma_rq_req *req = vrdma_slot(ring, ring->producer);

	memset(req, 0, sizeof(*req));
	req->wr_id = htole64(wr_id);
	req->num_sge = htole32(wr->num_sge);
	vrdma_write_sges((void *)(req + 1), wr->sg_list, wr->num_sge);
}

/*
 * Ends a post: publishes the elements written since @start. @ret is the
 * error that stopped writing (0 if none) and *pos the position of the
 * request it concerns; a failed doorbell of kernel rings replaces both.
 * Returns the post's errno.
 */
static int vrdma_post_end(struct ibv_qp *ibqp, struct vrdma_ring *ring,
			  uint32_t command, uint32_t start, int ret,
			  uint32_t *pos)
{
	uint32_t taken;
	int db;

	if (ring->producer == start)
		return ret;
	if (ring->own) {
		vrdma_publish(ibqp->context, ibqp->handle, ring, command);
		return ret;
	}
	db = vrdma_doorbell(ibqp, ring, command, start, &taken);
	if (!db)
		return ret;
	*pos = vrdma_bad_index(db, taken);
	return db;
}

/* The bytes of @n SGEs: the most a completion of their request reports. */
static uint32_t vrdma_sge_len(const struct ibv_sge *sg, int n)
{
	uint64_t len = 0;
	int i;

	for (i = 0; i < n; i++)
		len += sg[i].length;
	return min_t(uint64_t, len, UINT32_MAX);
}

/* The ibv_wc_opcode of a successful completion of a send @opcode. */
static uint8_t vrdma_wc_opcode(enum ibv_wr_opcode opcode)
{
	switch (opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	case IBV_WR_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	case IBV_WR_ATOMIC_WRITE:
		return IBV_WC_ATOMIC_WRITE;
	case IBV_WR_FLUSH:
		return IBV_WC_FLUSH;
	default:
		return IBV_WC_SEND;
	}
}

/*
 * Whether @ibqp's state lets it take send requests (RTS and after: SQD, SQE,
 * and ERR, which flushes them) or receives (any state but RESET), as IB and
 * rxe have it: EINVAL otherwise. libibverbs keeps ibqp->state as
 * ibv_modify_qp last set it.
 */
static int vrdma_post_state_ok(const struct ibv_qp *ibqp, bool send)
{
	if (send ? ibqp->state < IBV_QPS_RTS : ibqp->state == IBV_QPS_RESET)
		return EINVAL;
	return 0;
}

/* Ring mode: whether the send ring, or its table, has no room. */
static bool vrdma_sq_full(struct vrdma_qp *qp)
{
	return vrdma_ring_full(&qp->sq) ||
	       (qp->sq.own && vrdma_wr_table_full(&qp->swrs));
}

/*
 * Ring mode: records send request @wr_id, @opcode, @send_flags of @len
 * bytes, just written with the token vrdma_wr_table_next() gave.
 */
static void vrdma_sq_posted(struct vrdma_qp *qp, uint64_t wr_id,
			    enum ibv_wr_opcode opcode, unsigned int send_flags,
			    uint32_t len)
{
	struct vrdma_posted posted = {
		.wr_id = wr_id,
		.len = len,
		.opcode = vrdma_wc_opcode(opcode),
		.signaled = qp->sig_all || (send_flags & IBV_SEND_SIGNALED),
	};

	vrdma_wr_table_post(&qp->swrs, &posted);
}

static int vrdma_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
			   struct ibv_send_wr **bad_wr)
{
	struct vrdma_qp *qp = to_vqp(ibqp);
	struct vrdma_ring *ring = &qp->sq;
	struct ibv_send_wr *first = wr;
	uint32_t start, pos = 0;
	int ret = 0;

	/* An XRC_RECV QP sends nothing but responses: it has no send ring. */
	if (!ring->buf || vrdma_post_state_ok(ibqp, true)) {
		*bad_wr = wr;
		return EINVAL;
	}
	pthread_spin_lock(&ring->lock);
	start = ring->producer;
	for (; wr; wr = wr->next, pos++) {
		ret = vrdma_sq_full(qp) ? ENOMEM :
		      vrdma_encode_send(qp, wr, vrdma_slot(ring, ring->producer),
					ring->own ?
					vrdma_wr_table_next(&qp->swrs) :
					wr->wr_id);
		if (ret)
			break;
		if (ring->own)
			vrdma_sq_posted(qp, wr->wr_id, wr->opcode,
					wr->send_flags,
					vrdma_sge_len(wr->sg_list,
						      wr->num_sge));
		ring->producer++;
	}
	ret = vrdma_post_end(ibqp, ring, IB_USER_VERBS_CMD_POST_SEND, start,
			     ret, &pos);
	pthread_spin_unlock(&ring->lock);
	if (ret) {
		for (wr = first; pos; pos--)
			wr = wr->next;
		*bad_wr = wr;
	}
	return ret;
}

static int vrdma_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
			   struct ibv_recv_wr **bad_wr)
{
	struct vrdma_qp *qp = to_vqp(ibqp);
	struct vrdma_ring *ring = &qp->rq;
	struct ibv_recv_wr *first = wr;
	uint32_t start, pos = 0;
	int ret = 0;

	/*
	 * A QP with an SRQ takes its receives from there, an XRC_RECV QP from
	 * the XRC SRQ each message names; an XRC_SEND QP takes none.
	 */
	if (!ring->buf || vrdma_post_state_ok(ibqp, false)) {
		*bad_wr = wr;
		return EINVAL;
	}
	pthread_spin_lock(&ring->lock);
	start = ring->producer;
	for (; wr; wr = wr->next, pos++) {
		if (vrdma_ring_full(ring) ||
		    (ring->own && vrdma_wr_table_full(&qp->rwrs)))
			ret = ENOMEM;
		else if (!vrdma_recv_fits(ring, qp->max_recv_sge, wr))
			ret = EINVAL;
		if (ret)
			break;
		if (ring->own) {
			struct vrdma_posted posted = {
				.wr_id = wr->wr_id,
				.len = vrdma_sge_len(wr->sg_list, wr->num_sge),
				.opcode = IBV_WC_RECV,
			};

			vrdma_encode_recv(ring, wr,
					  vrdma_wr_table_next(&qp->rwrs));
			vrdma_wr_table_post(&qp->rwrs, &posted);
		} else {
			vrdma_encode_recv(ring, wr, wr->wr_id);
		}
		ring->producer++;
	}
	ret = vrdma_post_end(ibqp, ring, IB_USER_VERBS_CMD_POST_RECV, start,
			     ret, &pos);
	pthread_spin_unlock(&ring->lock);
	if (ret) {
		for (wr = first; pos; pos--)
			wr = wr->next;
		*bad_wr = wr;
	}
	return ret;
}

/*
 * The kernel's CREATE_SRQ (basic) or CREATE_XSRQ (XRC) of @srq for @attr,
 * with the same request: the SRQ's ring.
 */
static int vrdma_cmd_create_srq(struct ibv_context *context,
				struct vrdma_srq *srq,
				struct ibv_srq_init_attr_ex *attr, bool xrc)
{
	struct virtio_rdma_create_srq_cmd drv = {
		.addr = (uintptr_t)srq->ring.buf,
		.depth = srq->ring.depth,
		.stride = srq->ring.stride,
	};
	struct ibv_srq_init_attr basic = {
		.srq_context = attr->srq_context,
		.attr = attr->attr,
	};
	struct ib_uverbs_create_srq_resp resp = {};
	struct uvrdma_create_xsrq xcmd = {};
	struct uvrdma_create_srq cmd = {};
	int ret;

	if (xrc) {
		xcmd.drv_payload = drv;
		return ibv_cmd_create_srq_ex(context, &srq->vsrq, attr,
					     &xcmd.ibv_cmd, sizeof(xcmd),
					     &resp, sizeof(resp));
	}
	cmd.drv_payload = drv;
	ret = ibv_cmd_create_srq(attr->pd, &srq->vsrq.srq, &basic,
				 &cmd.ibv_cmd, sizeof(cmd), &resp,
				 sizeof(resp));
	attr->attr = basic.attr;
	return ret;
}

/*
 * Ring mode: @srq, an XRC SRQ, as the XRC SRQ of its number, or (@gone)
 * not any more; under its CQ's lock, the poller's (struct vrdma_num_table).
 */
static int vrdma_set_xrc_srq(struct vrdma_srq *srq, bool gone)
{
	struct vrdma_context *ctx = to_vctx(srq->vsrq.srq.context);
	struct vrdma_cq *cq = to_vcq(srq->vsrq.cq);
	void **entry = vrdma_num_table_entry(&ctx->xrc_srqs,
					     srq->vsrq.srq_num);

	if (!entry)
		return ENOMEM;
	pthread_spin_lock(&cq->ring.lock);
	if (!gone) {
		vrdma_num_table_set(entry, srq);
	} else {
		vrdma_num_table_clear(entry, srq);
		vrdma_cq_clean(cq, vrdma_cqe_of_xrc_srq, srq->vsrq.srq_num);
	}
	pthread_spin_unlock(&cq->ring.lock);
	return 0;
}

/*
 * Ring mode: an SRQ is a receive ring of ours that the device reads; its
 * doorbell is POST_SRQ_RECV without work requests, rung only when the
 * ring's record asks (as a QP's). An XRC SRQ is one of a domain whose
 * receive completions go to its own CQ, a ring CQ (as every CQ here); its
 * tokens carry its number, by which the poller finds it (wr_table.h).
 */
static struct vrdma_srq *vrdma_create_srq_any(struct ibv_context *context,
					      struct ibv_srq_init_attr_ex *attr)
{
	enum ibv_srq_type type = attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE ?
				 attr->srq_type : IBV_SRQT_BASIC;
	bool xrc = type == IBV_SRQT_XRC;
	struct vrdma_srq *srq;
	int ret;

	if (!(to_vctx(context)->caps & VIRTIO_RDMA_CAP_RINGS) ||
	    (type != IBV_SRQT_BASIC && !xrc)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) ||
	    (xrc && (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) ||
		     !(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ)))) {
		errno = EINVAL;
		return NULL;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq) {
		errno = ENOMEM;
		return NULL;
	}
	ret = vrdma_alloc_ring(&srq->ring, attr->attr.max_wr,
			       vrdma_stride(sizeof(struct virtio_rdma_rq_req),
					    attr->attr.max_sge, 0));
	if (ret)
		goto err_free;
	ret = vrdma_cmd_create_srq(context, srq, attr, xrc);
	if (ret)
		goto err_ring;
	/* ibv_create_srq sets these itself; ibv_create_srq_ex does not. */
	srq->vsrq.srq.srq_context = attr->srq_context;
	srq->vsrq.srq.pd = attr->pd;
	/* The kernel grants what was asked, or more SGEs than the ring holds. */
	if (attr->attr.max_wr > srq->ring.depth ||
	    vrdma_stride(sizeof(struct virtio_rdma_rq_req), attr->attr.max_sge,
			 0) > srq->ring.stride) {
		ret = EPROTO;
		goto err_destroy;
	}
	srq->max_sge = attr->attr.max_sge;
	/* SRQ numbers are 24 bits: the kernel's answer is checked. */
	if (xrc && srq->vsrq.srq_num >> VRDMA_NUM_BITS) {
		ret = EPROTO;
		goto err_destroy;
	}
	ret = vrdma_srq_table_init(&srq->wrs, srq->ring.depth,
				   xrc ? VRDMA_TAG_XRC_SRQ : VRDMA_TAG_SRQ,
				   xrc ? srq->vsrq.srq_num : 0);
	if (ret)
		goto err_destroy;
	if (xrc) {
		ret = vrdma_set_xrc_srq(srq, false);
		if (ret) {
			vrdma_srq_table_free(&srq->wrs);
			goto err_destroy;
		}
	}
	return srq;

err_destroy:
	/* If the SRQ lives on, so must its ring: leak it. */
	if (ibv_cmd_destroy_srq(&srq->vsrq.srq))
		goto err_free;
err_ring:
	vrdma_free_ring(&srq->ring);
err_free:
	free(srq);
	errno = ret;
	return NULL;
}

static struct ibv_srq *vrdma_create_srq(struct ibv_pd *pd,
					struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex attr_ex = {
		.srq_context = attr->srq_context,
		.attr = attr->attr,
		.comp_mask = IBV_SRQ_INIT_ATTR_PD,
		.pd = pd,
	};
	struct vrdma_srq *srq = vrdma_create_srq_any(pd->context, &attr_ex);

	if (!srq)
		return NULL;
	attr->attr = attr_ex.attr;
	return &srq->vsrq.srq;
}

static struct ibv_srq *vrdma_create_srq_ex(struct ibv_context *context,
					   struct ibv_srq_init_attr_ex *attr)
{
	struct vrdma_srq *srq = vrdma_create_srq_any(context, attr);

	return srq ? &srq->vsrq.srq : NULL;
}

/* Only an XRC SRQ's number is known here (the one messages name). */
static int vrdma_get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num)
{
	struct vrdma_srq *srq = to_vsrq(ibsrq);

	if (srq->vsrq.srq_type != IBV_SRQT_XRC)
		return EINVAL;
	*srq_num = srq->vsrq.srq_num;
	return 0;
}

static int vrdma_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr,
			    int attr_mask)
{
	struct ibv_modify_srq cmd;

	return ibv_cmd_modify_srq(srq, attr, attr_mask, &cmd, sizeof(cmd));
}

static int vrdma_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	struct ibv_query_srq cmd;

	return ibv_cmd_query_srq(srq, attr, &cmd, sizeof(cmd));
}

static int vrdma_destroy_srq(struct ibv_srq *ibsrq)
{
	struct vrdma_srq *srq = to_vsrq(ibsrq);
	int ret;

	ret = ibv_cmd_destroy_srq(ibsrq);
	if (ret)
		return ret;
	/* Its entry exists: creating the SRQ made it. */
	if (srq->vsrq.srq_type == IBV_SRQT_XRC)
		vrdma_set_xrc_srq(srq, true);
	vrdma_srq_table_free(&srq->wrs);
	vrdma_free_ring(&srq->ring);
	free(srq);
	return 0;
}

static int vrdma_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			       struct ibv_recv_wr **bad_wr)
{
	struct vrdma_srq *srq = to_vsrq(ibsrq);
	struct vrdma_ring *ring = &srq->ring;
	uint32_t start;
	int ret = 0;

	pthread_spin_lock(&ring->lock);
	start = ring->producer;
	for (; wr; wr = wr->next) {
		struct vrdma_posted posted = {
			.wr_id = wr->wr_id,
			.len = vrdma_sge_len(wr->sg_list, wr->num_sge),
			.opcode = IBV_WC_RECV,
		};

		if (vrdma_ring_full(ring) || vrdma_srq_table_full(&srq->wrs))
			ret = ENOMEM;
		else if (!vrdma_recv_fits(ring, srq->max_sge, wr))
			ret = EINVAL;
		if (ret) {
			*bad_wr = wr;
			break;
		}
		vrdma_encode_recv(ring, wr,
				  vrdma_srq_table_post(&srq->wrs, &posted));
		ring->producer++;
	}
	if (ring->producer != start)
		vrdma_publish(ibsrq->context, ibsrq->handle, ring,
			      IB_USER_VERBS_CMD_POST_SRQ_RECV);
	pthread_spin_unlock(&ring->lock);
	return ret;
}

/*
 * ibv_wr_*: a batch of send requests, built in the send ring's free slots
 * from wr_start on (the ring's lock held) and published by wr_complete as
 * one post. The first error stops building and withdraws the whole batch.
 */
static void vrdma_wr_start(struct ibv_qp_ex *ibqp)
{
	struct vrdma_qp *qp = to_vqp_ex(ibqp);

	pthread_spin_lock(&qp->sq.lock);
	qp->wr_start = qp->sq.producer;
	qp->wr_tail = qp->swrs.tail;
	qp->wr_err = 0;
	qp->wr_req = NULL;
	qp->wr_need_addr = false;
}

static void vrdma_wr_fail(struct vrdma_qp *qp, int err)
{
	if (!qp->wr_err)
		qp->wr_err = err;
	qp->wr_req = NULL;
}

/*
 * A new request of @opcode in the next free slot, with the wr_id and
 * wr_flags the caller set (inline or not is its data setter's choice).
 */
static struct virtio_rdma_sq_req *vrdma_wr_new(struct ibv_qp_ex *ibqp,
					       enum ibv_wr_opcode opcode,
					       uint32_t ex)
{
	struct vrdma_qp *qp = to_vqp_ex(ibqp);
	struct vrdma_ring *ring = &qp->sq;

	if (qp->wr_err)
		return NULL;
	if (qp->wr_need_addr) {
		vrdma_wr_fail(qp, EINVAL);
		return NULL;
	}
	if (vrdma_sq_full(qp)) {
		vrdma_wr_fail(qp, ENOMEM);
		return NULL;
	}
	qp->wr_req = vrdma_sq_begin(vrdma_slot(ring, ring->producer),
				    ring->own ? vrdma_wr_table_next(&qp->swrs) :
				    ibqp->wr_id, opcode,
				    ibqp->wr_flags & ~IBV_SEND_INLINE, ex);
	/* Its length is known once its data is set (vrdma_wr_data_len). */
	if (ring->own)
		vrdma_sq_posted(qp, ibqp->wr_id, opcode, ibqp->wr_flags, 0);
	ring->producer++;
	switch (qp->vqp.qp.qp_type) {
	case IBV_QPT_UD:
		qp->wr_need_addr = true;
		break;
	case IBV_QPT_XRC_SEND:
		qp->wr_need_addr = !vrdma_local_op(opcode);
		break;
	default:
		break;
	}
	return qp->wr_req;
}

static void vrdma_wr_send(struct ibv_qp_ex *ibqp)
{
	vrdma_wr_new(ibqp, IBV_WR_SEND, 0);
}

static void vrdma_wr_send_imm(struct ibv_qp_ex *ibqp, __be32 imm_data)
{
	vrdma_wr_new(ibqp, IBV_WR_SEND_WITH_IMM, (uint32_t)imm_data);
}

static void vrdma_wr_rdma_write(struct ibv_qp_ex *ibqp, uint32_t rkey,
				uint64_t remote_addr)
{
	struct virtio_rdma_sq_req *req = vrdma_wr_new(ibqp, IBV_WR_RDMA_WRITE, 0);

	if (req)
		vrdma_sq_rdma(req, rkey, remote_addr);
}

static void vrdma_wr_rdma_write_imm(struct ibv_qp_ex *ibqp, uint32_t rkey,
				    uint64_t remote_addr, __be32 imm_data)
{
	struct virtio_rdma_sq_req *req;

	req = vrdma_wr_new(ibqp, IBV_WR_RDMA_WRITE_WITH_IMM,
			   (uint32_t)imm_data);
	if (req)
		vrdma_sq_rdma(req, rkey, remote_addr);
}

static void vrdma_wr_rdma_read(struct ibv_qp_ex *ibqp, uint32_t rkey,
			       uint64_t remote_addr)
{
	struct virtio_rdma_sq_req *req = vrdma_wr_new(ibqp, IBV_WR_RDMA_READ, 0);

	if (req)
		vrdma_sq_rdma(req, rkey, remote_addr);
}

static void vrdma_wr_atomic_cmp_swp(struct ibv_qp_ex *ibqp, uint32_t rkey,
				    uint64_t remote_addr, uint64_t compare,
				    uint64_t swap)
{
	struct virtio_rdma_sq_req *req;

	req = vrdma_wr_new(ibqp, IBV_WR_ATOMIC_CMP_AND_SWP, 0);
	if (req)
		vrdma_sq_atomic(req, rkey, remote_addr, compare, swap);
}

static void vrdma_wr_atomic_fetch_add(struct ibv_qp_ex *ibqp, uint32_t rkey,
				      uint64_t remote_addr, uint64_t add)
{
	struct virtio_rdma_sq_req *req;

	req = vrdma_wr_new(ibqp, IBV_WR_ATOMIC_FETCH_AND_ADD, 0);
	if (req)
		vrdma_sq_atomic(req, rkey, remote_addr, add, 0);
}

static void vrdma_wr_atomic_write(struct ibv_qp_ex *ibqp, uint32_t rkey,
				  uint64_t remote_addr, const void *atomic_wr)
{
	struct virtio_rdma_sq_req *req;

	req = vrdma_wr_new(ibqp, IBV_WR_ATOMIC_WRITE, 0);
	if (req)
		vrdma_sq_atomic_write(req, rkey, remote_addr, atomic_wr);
}

static void vrdma_wr_flush(struct ibv_qp_ex *ibqp, uint32_t rkey,
			   uint64_t remote_addr, size_t len, uint8_t type,
			   uint8_t level)
{
	struct virtio_rdma_sq_req *req = vrdma_wr_new(ibqp, IBV_WR_FLUSH, 0);

	if (req)
		vrdma_sq_flush(req, rkey, remote_addr, len, type, level);
}

/* The request being built, for a setter; a setter before any is an error. */
static void vrdma_wr_bind_mw(struct ibv_qp_ex *ibqp, struct ibv_mw *mw,
			     uint32_t rkey,
			     const struct ibv_mw_bind_info *info)
{
	struct virtio_rdma_sq_req *req = vrdma_wr_new(ibqp, IBV_WR_BIND_MW, 0);

	if (req)
		vrdma_sq_bind(req, mw, rkey, info);
}

static void vrdma_wr_local_inv(struct ibv_qp_ex *ibqp, uint32_t invalidate_rkey)
{
	vrdma_wr_new(ibqp, IBV_WR_LOCAL_INV, invalidate_rkey);
}

static void vrdma_wr_send_inv(struct ibv_qp_ex *ibqp, uint32_t invalidate_rkey)
{
	vrdma_wr_new(ibqp, IBV_WR_SEND_WITH_INV, invalidate_rkey);
}

/* Ring mode: the request being built holds @len bytes. */
static void vrdma_wr_data_len(struct vrdma_qp *qp, uint32_t len)
{
	struct vrdma_posted *posted;

	if (!qp->sq.own)
		return;
	posted = vrdma_wr_table_last(&qp->swrs);
	if (posted)
		posted->len = len;
}

static struct virtio_rdma_sq_req *vrdma_wr_cur(struct vrdma_qp *qp)
{
	if (!qp->wr_req)
		vrdma_wr_fail(qp, EINVAL);
	return qp->wr_req;
}

static void vrdma_wr_set_ud_addr(struct ibv_qp_ex *ibqp, struct ibv_ah *ah,
				 uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct vrdma_qp *qp = to_vqp_ex(ibqp);
	struct virtio_rdma_sq_req *req = vrdma_wr_cur(qp);
	int ret;

	if (!req)
		return;
	ret = vrdma_sq_ud(req, ah, remote_qpn, remote_qkey);
	if (ret)
		vrdma_wr_fail(qp, ret);
	else
		qp->wr_need_addr = false;
}

/*
 * ibv_wr_set_xrc_srqn. A local operation has no such field (its part of
 * the element reaches to its end): naming an SRQ for one is an error.
 */
static void vrdma_wr_set_xrc_srqn(struct ibv_qp_ex *ibqp, uint32_t remote_srqn)
{
	struct vrdma_qp *qp = to_vqp_ex(ibqp);
	struct virtio_rdma_sq_req *req = vrdma_wr_cur(qp);

	if (!req)
		return;
	if (vrdma_local_op(req->opcode)) {
		vrdma_wr_fail(qp, EINVAL);
		return;
	}
	vrdma_sq_xrc(req, remote_srqn);
	qp->wr_need_addr = false;
}

static void vrdma_wr_set_sge_list(struct ibv_qp_ex *ibqp, size_t num_sge,
				  const struct ibv_sge *sg_list)
{
	struct vrdma_qp *qp = to_vqp_ex(ibqp);
	struct virtio_rdma_sq_req *req = vrdma_wr_cur(qp);
	int ret;

	if (!req)
		return;
	ret = vrdma_sq_sges(qp, req, sg_list, num_sge);
	if (ret)
		vrdma_wr_fail(qp, ret);
	else
		vrdma_wr_data_len(qp, vrdma_sge_len(sg_list, num_sge));
}

static void vrdma_wr_set_sge(struct ibv_qp_ex *ibqp, uint32_t lkey,
			     uint64_t addr, uint32_t length)
{
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	vrdma_wr_set_sge_list(ibqp, 1, &sge);
}

static void vrdma_wr_set_inline_data_list(struct ibv_qp_ex *ibqp,
					  size_t num_buf,
					  const struct ibv_data_buf *buf_list)
{
	struct vrdma_qp *qp = to_vqp_ex(ibqp);
	struct virtio_rdma_sq_req *req = vrdma_wr_cur(qp);
	size_t i;
	int ret;

	if (!req)
		return;
	vrdma_sq_inline_start(req);
	for (i = 0; i < num_buf; i++) {
		ret = vrdma_sq_inline(qp, req, buf_list[i].addr,
				      buf_list[i].length);
		if (ret) {
			vrdma_wr_fail(qp, ret);
			return;
		}
	}
	vrdma_wr_data_len(qp, le32toh(req->inline_len));
}

static void vrdma_wr_set_inline_data(struct ibv_qp_ex *ibqp, void *addr,
				     size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	vrdma_wr_set_inline_data_list(ibqp, 1, &buf);
}

/* Withdraws the requests built since wr_start. */
static void vrdma_wr_abort(struct ibv_qp_ex *ibqp)
{
	struct vrdma_qp *qp = to_vqp_ex(ibqp);

	qp->sq.producer = qp->wr_start;
	if (qp->sq.own)
		vrdma_wr_table_unpost_to(&qp->swrs, qp->wr_tail);
	pthread_spin_unlock(&qp->sq.lock);
}

static int vrdma_wr_complete(struct ibv_qp_ex *ibqp)
{
	struct vrdma_qp *qp = to_vqp_ex(ibqp);
	struct vrdma_ring *ring = &qp->sq;
	int ret = qp->wr_err;
	uint32_t pos = 0;

	if (!ret && qp->wr_need_addr)
		ret = EINVAL;
	if (!ret)
		ret = vrdma_post_state_ok(&qp->vqp.qp, true);
	if (ret) {
		ring->producer = qp->wr_start;
		if (ring->own)
			vrdma_wr_table_unpost_to(&qp->swrs, qp->wr_tail);
	} else
		ret = vrdma_post_end(&qp->vqp.qp, ring,
				     IB_USER_VERBS_CMD_POST_SEND, qp->wr_start,
				     0, &pos);
	pthread_spin_unlock(&ring->lock);
	return ret;
}

static void vrdma_qp_ex_ops(struct vrdma_qp *qp)
{
	struct ibv_qp_ex *q = &qp->vqp.qp_ex;
	enum ibv_qp_type type = qp->vqp.qp.qp_type;

	q->wr_start = vrdma_wr_start;
	q->wr_complete = vrdma_wr_complete;
	q->wr_abort = vrdma_wr_abort;
	q->wr_send = vrdma_wr_send;
	q->wr_send_imm = vrdma_wr_send_imm;
	if (type != IBV_QPT_UD) {
		q->wr_rdma_write = vrdma_wr_rdma_write;
		q->wr_rdma_write_imm = vrdma_wr_rdma_write_imm;
	}
	if (type == IBV_QPT_RC || type == IBV_QPT_XRC_SEND) {
		q->wr_rdma_read = vrdma_wr_rdma_read;
		q->wr_atomic_cmp_swp = vrdma_wr_atomic_cmp_swp;
		q->wr_atomic_fetch_add = vrdma_wr_atomic_fetch_add;
		q->wr_bind_mw = vrdma_wr_bind_mw;
		q->wr_local_inv = vrdma_wr_local_inv;
		q->wr_send_inv = vrdma_wr_send_inv;
		q->wr_atomic_write = vrdma_wr_atomic_write;
		q->wr_flush = vrdma_wr_flush;
	}
	if (type == IBV_QPT_UD)
		q->wr_set_ud_addr = vrdma_wr_set_ud_addr;
	if (type == IBV_QPT_XRC_SEND)
		q->wr_set_xrc_srqn = vrdma_wr_set_xrc_srqn;
	q->wr_set_sge = vrdma_wr_set_sge;
	q->wr_set_sge_list = vrdma_wr_set_sge_list;
	q->wr_set_inline_data = vrdma_wr_set_inline_data;
	q->wr_set_inline_data_list = vrdma_wr_set_inline_data_list;
	qp->vqp.comp_mask |= VERBS_QP_EX;
}

static struct ibv_ah *vrdma_create_ah(struct ibv_pd *pd,
				      struct ibv_ah_attr *attr)
{
	struct uvrdma_create_ah_resp resp = {};
	struct vrdma_ah *ah;
	int ret;

	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibv_cmd_create_ah(pd, &ah->ibv_ah, attr, &resp.ibv_resp,
				sizeof(resp));
	if (ret) {
		free(ah);
		errno = ret;
		return NULL;
	}
	ah->av = resp.av;
	return &ah->ibv_ah;
}

static int vrdma_destroy_ah(struct ibv_ah *ibah)
{
	int ret;

	ret = ibv_cmd_destroy_ah(ibah);
	if (ret)
		return ret;
	free(container_of(ibah, struct vrdma_ah, ibv_ah));
	return 0;
}

/*
 * ibv_open_xrcd: a domain of the kernel's (shared through a file, or the
 * process's own with fd -1), which the device sees as one.
 */
static struct ibv_xrcd *vrdma_open_xrcd(struct ibv_context *context,
					struct ibv_xrcd_init_attr *attr)
{
	struct ib_uverbs_open_xrcd_resp resp;
	struct ibv_open_xrcd cmd = {};
	struct verbs_xrcd *xrcd;
	int ret;

	xrcd = calloc(1, sizeof(*xrcd));
	if (!xrcd) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibv_cmd_open_xrcd(context, xrcd, sizeof(*xrcd), attr, &cmd,
				sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(xrcd);
		errno = ret;
		return NULL;
	}
	return &xrcd->xrcd;
}

/* EBUSY while an XRC SRQ or XRC_RECV QP of the domain exists (the kernel's). */
static int vrdma_close_xrcd(struct ibv_xrcd *ibxrcd)
{
	struct verbs_xrcd *xrcd = container_of(ibxrcd, struct verbs_xrcd, xrcd);
	int ret;

	ret = ibv_cmd_close_xrcd(xrcd);
	if (ret)
		return ret;
	free(xrcd);
	return 0;
}

static void vrdma_free_context(struct ibv_context *ibctx)
{
	struct vrdma_context *ctx = to_vctx(ibctx);

	vrdma_num_table_free(&ctx->qps);
	vrdma_num_table_free(&ctx->xrc_srqs);
	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
}

static const struct verbs_context_ops vrdma_ctx_ops = {
	.query_device_ex = vrdma_query_device,
	.query_port = vrdma_query_port,
	.alloc_pd = vrdma_alloc_pd,
	.dealloc_pd = vrdma_dealloc_pd,
	.reg_mr = vrdma_reg_mr,
	.rereg_mr = vrdma_rereg_mr,
	.dereg_mr = vrdma_dereg_mr,
	.free_context = vrdma_free_context,
};

/* The verbs of the user data path, when the kernel offers it. */
static const struct verbs_context_ops vrdma_user_qp_ops = {
	.create_cq = vrdma_create_cq,
	.create_cq_ex = vrdma_create_cq_ex,
	.resize_cq = vrdma_resize_cq,
	.destroy_cq = vrdma_destroy_cq,
	.poll_cq = vrdma_poll_cq,
	.req_notify_cq = vrdma_req_notify_cq,
	.create_qp = vrdma_create_qp,
	.create_qp_ex = vrdma_create_qp_ex,
	.query_qp = vrdma_query_qp,
	.modify_qp = vrdma_modify_qp,
	.destroy_qp = vrdma_destroy_qp,
	.post_send = vrdma_post_send,
	.post_recv = vrdma_post_recv,
	.create_ah = vrdma_create_ah,
	.destroy_ah = vrdma_destroy_ah,
	/* Windows are bound and invalidated by work requests. */
	.alloc_mw = vrdma_alloc_mw,
	.dealloc_mw = vrdma_dealloc_mw,
	.bind_mw = vrdma_bind_mw,
};

/*
 * Shared receive queues and XRC (whose receive queues are SRQs), with
 * rings in guest memory; without them these verbs fail with EOPNOTSUPP.
 * The XRC QPs come through create_qp_ex, which refuses them then.
 */
static const struct verbs_context_ops vrdma_srq_ops = {
	.create_srq = vrdma_create_srq,
	.create_srq_ex = vrdma_create_srq_ex,
	.get_srq_num = vrdma_get_srq_num,
	.modify_srq = vrdma_modify_srq,
	.query_srq = vrdma_query_srq,
	.destroy_srq = vrdma_destroy_srq,
	.post_srq_recv = vrdma_post_srq_recv,
	.open_xrcd = vrdma_open_xrcd,
	.close_xrcd = vrdma_close_xrcd,
	.open_qp = vrdma_open_qp,
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
	vrdma_num_table_init(&ctx->qps);
	vrdma_num_table_init(&ctx->xrc_srqs);
	verbs_set_ops(&ctx->ibv_ctx, &vrdma_ctx_ops);
	/* Rings in guest memory are user CQs and QPs too. */
	if (ctx->caps & (VIRTIO_RDMA_CAP_USER_QP | VIRTIO_RDMA_CAP_RINGS))
		verbs_set_ops(&ctx->ibv_ctx, &vrdma_user_qp_ops);
	if (ctx->caps & VIRTIO_RDMA_CAP_RINGS)
		verbs_set_ops(&ctx->ibv_ctx, &vrdma_srq_ops);
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
