// SPDX-License-Identifier: GPL-2.0
/*
 * A hostile process against queues in guest memory (used by rings.sh, the
 * device offering VIRTIO_RDMA_F_RINGS). Next to a pair of QPs made through
 * rdma-core (the provider's rings), it creates CQs and QPs with raw uverbs
 * commands on rings of its own: rings the kernel must refuse (misaligned,
 * not a power of two, too small a stride, memory it cannot pin), then rings
 * it corrupts every way a process can, each on a fresh raw QP (and, where
 * the CQ is what breaks, a fresh raw CQ) connected to a fresh provider QP:
 *  - send rings: a producer far past the ring, a producer moving backwards,
 *    elements only the kernel may post (REG_MR with a guest-physical page
 *    table, LOCAL_INV of an MR), more SGEs than the QP has, random bytes, a
 *    key it does not own; receive rings: random bytes, a producer far past;
 *    each an error completion on that QP only;
 *  - the record's flags (the device's word) scribbled: the device never
 *    reads it, so the QP still works once the doorbell is rung;
 *  - a CQ's consumer made bogus: the ring looks full, the completion is
 *    lost, IBV_EVENT_CQ_ERR on that CQ and the QP in error (its peer's send
 *    fails), nothing else;
 *  - a CQ's arm set to garbage: no completion event, the completion still
 *    arrives (and an arming with NEXT still raises one);
 *  - a CQ's slots filled with random bytes: the genuine completions still
 *    arrive with the right seq.
 * The memory the forged page table names is unchanged, and the provider's
 * QPs keep working. Exits non-zero on the first unmet expectation.
 */
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <linux/virtio_rdma.h>
#include <rdma/virtio_rdma-abi.h>

#include "uverbs_test.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define PAGE 4096
#define DEPTH 8
#define SQ_STRIDE 128
#define RQ_STRIDE 32
#define CQ_DEPTH 16
#define CQE sizeof(struct virtio_rdma_ring_cqe)
/* enum ib_wr_opcode (kernel-only, so not in the user headers) */
#define KERNEL_WR_REG_MR 0x20

static struct ibv_context *ctx;

/* Page-aligned, zeroed memory of @len bytes (a ring). */
static void *ring_mem(size_t len)
{
	void *p = aligned_alloc(PAGE, (len + PAGE - 1) / PAGE * PAGE);

	if (p)
		memset(p, 0, (len + PAGE - 1) / PAGE * PAGE);
	return p;
}

/*
 * Raw CREATE_CQ of @cqe entries on the ring @addr of @depth, its completion
 * events on @channel (-1: none); errno or 0. Its user handle (what its events
 * name) is @addr.
 */
static int raw_cq(uint64_t addr, uint32_t depth, uint32_t cqe, int channel, uint32_t *handle)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_create_cq cmd;
		struct virtio_rdma_create_cq_cmd drv;
	} req;
	struct {
		struct ib_uverbs_create_cq_resp core;
		uint8_t drv[64];
	} resp;

	memset(&req, 0, sizeof(req));
	memset(&resp, 0, sizeof(resp));
	req.hdr.command = IB_USER_VERBS_CMD_CREATE_CQ;
	req.hdr.in_words = sizeof(req) / 4;
	req.hdr.out_words = sizeof(resp) / 4;
	req.cmd.response = (uintptr_t)&resp;
	req.cmd.user_handle = addr;
	req.cmd.cqe = cqe;
	req.cmd.comp_channel = channel;
	req.drv.addr = addr;
	req.drv.depth = depth;
	if (write(ctx->cmd_fd, &req, sizeof(req)) != (ssize_t)sizeof(req))
		return errno;
	*handle = resp.core.cq_handle;
	return 0;
}

struct raw_qp {
	uint32_t handle, qpn;
	uint8_t *sq, *rq;
};

/*
 * Raw CREATE_QP (RC, 1 SGE, 64 inline bytes) on rings; errno or 0. Its user
 * handle (what its events name) is its SQ ring's address.
 */
static int raw_qp(uint32_t pd, uint32_t cq, const struct virtio_rdma_create_qp_cmd *drv,
		  struct raw_qp *qp)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_create_qp cmd;
		struct virtio_rdma_create_qp_cmd drv;
	} req;
	struct {
		struct ib_uverbs_create_qp_resp core;
		uint8_t drv[64];
	} resp;

	memset(&req, 0, sizeof(req));
	memset(&resp, 0, sizeof(resp));
	req.hdr.command = IB_USER_VERBS_CMD_CREATE_QP;
	req.hdr.in_words = sizeof(req) / 4;
	req.hdr.out_words = sizeof(resp) / 4;
	req.cmd.response = (uintptr_t)&resp;
	req.cmd.user_handle = drv->sq_addr;
	req.cmd.pd_handle = pd;
	req.cmd.send_cq_handle = cq;
	req.cmd.recv_cq_handle = cq;
	req.cmd.max_send_wr = DEPTH;
	req.cmd.max_recv_wr = DEPTH;
	req.cmd.max_send_sge = 1;
	req.cmd.max_recv_sge = 1;
	req.cmd.max_inline_data = 64;
	req.cmd.qp_type = IB_UVERBS_QPT_RC;
	req.drv = *drv;
	if (write(ctx->cmd_fd, &req, sizeof(req)) != (ssize_t)sizeof(req))
		return errno;
	qp->handle = resp.core.qp_handle;
	qp->qpn = resp.core.qpn;
	qp->sq = (uint8_t *)(uintptr_t)drv->sq_addr;
	qp->rq = (uint8_t *)(uintptr_t)drv->rq_addr;
	return 0;
}

/* Raw MODIFY_QP; errno or 0. */
static int raw_modify(uint32_t handle, struct ib_uverbs_modify_qp *m, uint32_t mask)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_modify_qp cmd;
	} req;

	memset(&req, 0, sizeof(req));
	req.hdr.command = IB_USER_VERBS_CMD_MODIFY_QP;
	req.hdr.in_words = sizeof(req) / 4;
	req.cmd = *m;
	req.cmd.qp_handle = handle;
	req.cmd.attr_mask = mask;
	if (write(ctx->cmd_fd, &req, sizeof(req)) != (ssize_t)sizeof(req))
		return errno;
	return 0;
}

/* Raw QP @qp to RTS, connected to @remote at @gid. */
static int raw_connect(struct raw_qp *qp, uint32_t remote, union ibv_gid *gid)
{
	struct ib_uverbs_modify_qp m;

	memset(&m, 0, sizeof(m));
	m.qp_state = IBV_QPS_INIT;
	m.port_num = 1;
	m.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (raw_modify(qp->handle, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				       IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&m, 0, sizeof(m));
	m.qp_state = IBV_QPS_RTR;
	m.path_mtu = IBV_MTU_1024;
	m.dest_qp_num = remote;
	m.max_dest_rd_atomic = 1;
	m.min_rnr_timer = 12;
	m.dest.is_global = 1;
	memcpy(m.dest.dgid, gid->raw, 16);
	m.dest.sgid_index = GID_INDEX;
	m.dest.hop_limit = 1;
	m.dest.port_num = 1;
	if (raw_modify(qp->handle, &m, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&m, 0, sizeof(m));
	m.qp_state = IBV_QPS_RTS;
	m.timeout = 14;
	m.retry_cnt = 7;
	m.rnr_retry = 7;
	m.max_rd_atomic = 1;
	return raw_modify(qp->handle, &m, IBV_QP_STATE | IBV_QP_TIMEOUT |
					  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int raw_destroy_qp(uint32_t handle)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_destroy_qp cmd;
	} req;
	struct ib_uverbs_destroy_qp_resp resp;

	memset(&req, 0, sizeof(req));
	req.hdr.command = IB_USER_VERBS_CMD_DESTROY_QP;
	req.hdr.in_words = sizeof(req) / 4;
	req.hdr.out_words = sizeof(resp) / 4;
	req.cmd.response = (uintptr_t)&resp;
	req.cmd.qp_handle = handle;
	if (write(ctx->cmd_fd, &req, sizeof(req)) != (ssize_t)sizeof(req))
		return errno;
	return 0;
}

static int raw_destroy_cq(uint32_t handle)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_destroy_cq cmd;
	} req;
	struct ib_uverbs_destroy_cq_resp resp;

	memset(&req, 0, sizeof(req));
	req.hdr.command = IB_USER_VERBS_CMD_DESTROY_CQ;
	req.hdr.in_words = sizeof(req) / 4;
	req.hdr.out_words = sizeof(resp) / 4;
	req.cmd.response = (uintptr_t)&resp;
	req.cmd.cq_handle = handle;
	if (write(ctx->cmd_fd, &req, sizeof(req)) != (ssize_t)sizeof(req))
		return errno;
	return 0;
}

/* The state of raw QP @handle as the device reports it (QUERY_QP), or -1. */
static int raw_qp_state(uint32_t handle)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_query_qp cmd;
	} req;
	struct ib_uverbs_query_qp_resp resp;

	memset(&req, 0, sizeof(req));
	memset(&resp, 0, sizeof(resp));
	req.hdr.command = IB_USER_VERBS_CMD_QUERY_QP;
	req.hdr.in_words = sizeof(req) / 4;
	req.hdr.out_words = sizeof(resp) / 4;
	req.cmd.response = (uintptr_t)&resp;
	req.cmd.qp_handle = handle;
	req.cmd.attr_mask = IBV_QP_STATE;
	if (write(ctx->cmd_fd, &req, sizeof(req)) != (ssize_t)sizeof(req))
		return -1;
	return resp.qp_state;
}

/* The raw doorbell: uverbs POST_SEND without work requests. */
static int doorbell(uint32_t handle)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_post_send cmd;
	} req;
	struct ib_uverbs_post_send_resp resp;

	memset(&req, 0, sizeof(req));
	req.hdr.command = IB_USER_VERBS_CMD_POST_SEND;
	req.hdr.in_words = sizeof(req) / 4;
	req.hdr.out_words = sizeof(resp) / 4;
	req.cmd.response = (uintptr_t)&resp;
	req.cmd.qp_handle = handle;
	req.cmd.wqe_size = sizeof(struct ib_uverbs_send_wr);
	if (write(ctx->cmd_fd, &req, sizeof(req)) != (ssize_t)sizeof(req))
		return errno;
	return 0;
}

static struct virtio_rdma_ring_record *record(uint8_t *ring)
{
	return (void *)ring;
}

/* Publishes @producer on @ring and rings the doorbell as the protocol says. */
static void publish(struct raw_qp *qp, uint32_t producer)
{
	__atomic_store_n(&record(qp->sq)->producer, htole32(producer), __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (le32toh(__atomic_load_n(&record(qp->sq)->flags, __ATOMIC_ACQUIRE)) &
	    VIRTIO_RDMA_RING_F_NOTIFY)
		check(doorbell(qp->handle) == 0, "the doorbell");
}

/* Slot @i of the send ring, zeroed, as a send element. */
static struct virtio_rdma_sq_req *slot(struct raw_qp *qp, uint32_t i)
{
	uint8_t *s = qp->sq + VIRTIO_RDMA_RING_SLOTS + (i % DEPTH) * SQ_STRIDE;

	memset(s, 0, SQ_STRIDE);
	return (void *)s;
}

/*
 * The next completion of the raw CQ ring @cq (counting in *@next) within
 * @ms milliseconds, or -1.
 */
static int raw_poll(uint8_t *cq, uint32_t *next, struct virtio_rdma_cq_req *c, int ms)
{
	for (int i = 0; i < ms; i++) {
		struct virtio_rdma_ring_cqe *s = (void *)(cq + VIRTIO_RDMA_RING_SLOTS +
							   (*next % CQ_DEPTH) * sizeof(*s));

		if (le32toh(__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE)) == *next + 1) {
			*c = s->cqe;
			*next += 1;
			__atomic_store_n(&record(cq)->consumer, htole32(*next),
					 __ATOMIC_RELEASE);
			return 0;
		}
		usleep(1000);
	}
	return -1;
}

static struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr attr = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = DEPTH, .max_recv_wr = DEPTH,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	return ibv_create_qp(pd, &attr);
}

/* One RDMA WRITE of 64 bytes from @src to @dst over the provider's QP @qp. */
static int provider_write(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr,
			  uint8_t *src, uint8_t *dst)
{
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = 64, .lkey = mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 7, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = (uintptr_t)dst, .rkey = mr->rkey },
	}, *bad;
	struct ibv_wc wc;

	if (ibv_post_send(qp, &wr, &bad))
		return -1;
	for (int i = 0; i < 10000; i++) {
		int n = ibv_poll_cq(cq, 1, &wc);

		if (n)
			return n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7 ? 0 : -1;
		usleep(1000);
	}
	return -1;
}

/* The provider's QP @qp sends 8 bytes (wr_id 9); 0 if it is posted. */
static int peer_send(struct ibv_qp *qp, struct ibv_mr *mr, uint8_t *src)
{
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = 8, .lkey = mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 9, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	return ibv_post_send(qp, &wr, &bad);
}

/* What the cases on fresh objects share. */
struct env {
	struct ibv_pd *pd;
	struct ibv_cq *cq;	/* the provider's, of its QPs */
	struct ibv_qp *qa, *qb;	/* the provider's pair: must keep working */
	struct ibv_mr *mr;	/* over buf */
	uint8_t *buf;
	struct ibv_mr *dmr;	/* over data: the raw QPs' RDMA WRITEs */
	uint8_t *data;		/* a page: source at 0, destination at 2048 */
	union ibv_gid gid;
};

/* A fresh raw CQ on a ring of its own (events on @channel, or -1). */
static uint8_t *new_raw_cq(int channel, uint32_t *handle)
{
	uint8_t *ring = ring_mem(VIRTIO_RDMA_RING_SLOTS + CQ_DEPTH * CQE);

	check(ring && raw_cq((uintptr_t)ring, CQ_DEPTH, 16, channel, handle) == 0,
	      "a fresh raw CQ on a ring of its own");
	return ring;
}

/*
 * A raw QP @q on fresh rings, reporting to raw CQ @cq_handle, connected to
 * a fresh provider QP *@peer.
 */
static void raw_pair(struct env *e, uint32_t cq_handle, struct raw_qp *q, struct ibv_qp **peer)
{
	struct virtio_rdma_create_qp_cmd drv = {
		.sq_depth = DEPTH, .sq_stride = SQ_STRIDE,
		.rq_depth = DEPTH, .rq_stride = RQ_STRIDE,
	};

	drv.sq_addr = (uintptr_t)ring_mem(VIRTIO_RDMA_RING_SLOTS + DEPTH * SQ_STRIDE);
	drv.rq_addr = (uintptr_t)ring_mem(VIRTIO_RDMA_RING_SLOTS + DEPTH * RQ_STRIDE);
	*peer = create_qp(e->pd, e->cq);
	check(*peer && drv.sq_addr && drv.rq_addr &&
	      raw_qp(e->pd->handle, cq_handle, &drv, q) == 0 &&
	      raw_connect(q, (*peer)->qp_num, &e->gid) == 0 &&
	      connect_qp(*peer, q->qpn, &e->gid) == 0, "a raw QP on its rings, connected");
}

/*
 * Slot @i of @q's send ring: a valid, signaled RDMA WRITE of 64 bytes of
 * @fill into e->data + 2048 (cleared first).
 */
static void put_write(struct env *e, struct raw_qp *q, uint32_t i, uint64_t wr_id, uint8_t fill)
{
	struct virtio_rdma_sq_req *req = slot(q, i);
	struct virtio_rdma_sge *sge = (void *)(req + 1);

	memset(e->data, fill, 64);
	memset(e->data + 2048, 0, 64);
	req->wr_id = htole64(wr_id);
	req->opcode = IBV_WR_RDMA_WRITE;
	req->send_flags = htole32(IBV_SEND_SIGNALED);
	req->num_sge = htole16(1);
	req->wr.rdma.remote_addr = htole64((uintptr_t)e->data + 2048);
	req->wr.rdma.rkey = htole32(e->dmr->rkey);
	sge->addr = htole64((uintptr_t)e->data);
	sge->length = htole32(64);
	sge->lkey = htole32(e->dmr->lkey);
}

/* Whether put_write()'s WRITE of @fill landed. */
static int written(struct env *e, uint8_t fill)
{
	return e->data[2048] == fill && e->data[2048 + 63] == fill;
}

/*
 * The next completion of the raw CQ ring @cq (counting in *@next) is
 * @status for @q's element @wr_id (0: any wr_id).
 */
static void expect(uint8_t *cq, uint32_t *next, struct raw_qp *q, uint64_t wr_id, int status,
		   const char *what)
{
	struct virtio_rdma_cq_req c;
	int rc = raw_poll(cq, next, &c, 10000);
	char msg[300];

	snprintf(msg, sizeof(msg), "%s: status %d, wr_id %llu on QP %u (want %d, %llu on %u)",
		 what, rc ? -1 : c.status,
		 rc ? 0ULL : (unsigned long long)le64toh(c.wr_id),
		 rc ? 0 : le32toh(c.qp_num), status, (unsigned long long)wr_id, q->qpn);
	check(!rc && c.status == status && le32toh(c.qp_num) == q->qpn &&
	      (!wr_id || le64toh(c.wr_id) == wr_id), msg);
}

/* The provider's next completion on e->cq within 10 s: its status, or -1. */
static int provider_wc(struct env *e)
{
	struct ibv_wc wc;

	for (int t = 0; t < 10000; t++) {
		int n = ibv_poll_cq(e->cq, 1, &wc);

		if (n)
			return n == 1 ? (int)wc.status : -1;
		usleep(1000);
	}
	return -1;
}

/*
 * The async events read so far. None is acked: a raw object's events name
 * its user handle, not an ibv object that ibv_ack_async_event could count in.
 */
static struct {
	enum ibv_event_type type;
	uint64_t element;
} events[64];
static unsigned int nevents;

/* Whether async event @type on the object of user handle @element came, waiting up to @ms. */
static int async_event(enum ibv_event_type type, uint64_t element, int ms)
{
	struct timespec t0, now;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
		struct ibv_async_event ev;
		int left;

		for (unsigned int i = 0; i < nevents; i++)
			if (events[i].type == type && events[i].element == element)
				return 1;
		clock_gettime(CLOCK_MONOTONIC, &now);
		left = ms - (int)((now.tv_sec - t0.tv_sec) * 1000 +
				  (now.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0 || poll(&p, 1, left) <= 0 || ibv_get_async_event(ctx, &ev))
			return 0;
		if (nevents == ARRAY_SIZE(events))
			continue;
		events[nevents].type = ev.event_type;
		events[nevents].element = ev.event_type == IBV_EVENT_CQ_ERR ?
					  (uintptr_t)ev.element.cq : (uintptr_t)ev.element.qp;
		printf("   (async event \"%s\" on %#llx)\n", ibv_event_type_str(ev.event_type),
		       (unsigned long long)events[nevents].element);
		nevents++;
	}
}

/*
 * A send producer moving backwards: after one element taken (the device's
 * consumer at 1), producer 0 is 2^32 - 1 elements ahead, more than the
 * ring's depth, so the ring breaks: an error completion, the QP in error.
 */
static void backward_producer(struct env *e, uint32_t cq_handle, uint8_t *cq, uint32_t *next)
{
	struct virtio_rdma_cq_req c;
	struct ibv_qp *peer;
	struct raw_qp q;

	raw_pair(e, cq_handle, &q, &peer);
	put_write(e, &q, 0, 200, 0x44);
	publish(&q, 1);
	expect(cq, next, &q, 200, IBV_WC_SUCCESS, "a valid RDMA WRITE before it");
	check(written(e, 0x44), "... its data landed");
	publish(&q, 0);
	expect(cq, next, &q, 0, IBV_WC_LOC_QP_OP_ERR, "a producer moving backwards (1 to 0)");
	check(raw_qp_state(q.handle) == IBV_QPS_ERR, "... the QP is in error");
	/* Its flushes, if any. */
	while (!raw_poll(cq, next, &c, 200) && c.status == IBV_WC_WR_FLUSH_ERR)
		;
	check(raw_destroy_qp(q.handle) == 0 && !ibv_destroy_qp(peer),
	      "... the QP and its peer destroyed");
}

/*
 * The record's flags scribbled: the word is the device's (NOTIFY asks for a
 * doorbell), which it only writes, so a lie there costs the process at most
 * a doorbell it skips; rung, the element completes.
 */
static void scribbled_flags(struct env *e, uint32_t cq_handle, uint8_t *cq, uint32_t *next,
			    uint32_t flags)
{
	struct ibv_qp *peer;
	struct raw_qp q;
	char what[100];

	raw_pair(e, cq_handle, &q, &peer);
	__atomic_store_n(&record(q.sq)->flags, htole32(flags), __ATOMIC_RELEASE);
	__atomic_store_n(&record(q.rq)->flags, htole32(flags), __ATOMIC_RELEASE);
	put_write(e, &q, 0, 300 + (flags & 1), 0x55);
	__atomic_store_n(&record(q.sq)->producer, htole32(1), __ATOMIC_RELEASE);
	check(doorbell(q.handle) == 0, "the doorbell");
	snprintf(what, sizeof(what), "flags %#x in its rings' records, an RDMA WRITE", flags);
	expect(cq, next, &q, 300 + (flags & 1), IBV_WC_SUCCESS, what);
	check(written(e, 0x55), "... its data landed");
	check(raw_destroy_qp(q.handle) == 0 && !ibv_destroy_qp(peer),
	      "... the QP and its peer destroyed");
}

/*
 * A CQ's consumer made bogus: ahead of the device's count, the ring looks
 * full, so the next completion is lost: CQ_ERR on that CQ, the QP in error
 * (QP_FATAL), a send of its peer into it fails; the WRITE itself was done.
 */
static void bogus_consumer(struct env *e)
{
	uint32_t cq_handle;
	struct ibv_qp *peer;
	struct raw_qp q;
	uint8_t *cq = new_raw_cq(-1, &cq_handle);
	struct virtio_rdma_ring_cqe *s0 = (void *)(cq + VIRTIO_RDMA_RING_SLOTS);
	int st;
	char what[100];

	raw_pair(e, cq_handle, &q, &peer);
	__atomic_store_n(&record(cq)->consumer, htole32(0xdeadbeef), __ATOMIC_RELEASE);
	put_write(e, &q, 0, 400, 0x66);
	publish(&q, 1);
	check(async_event(IBV_EVENT_CQ_ERR, (uintptr_t)cq, 10000),
	      "a bogus CQ consumer: IBV_EVENT_CQ_ERR on that CQ");
	check(async_event(IBV_EVENT_QP_FATAL, (uintptr_t)q.sq, 10000),
	      "... IBV_EVENT_QP_FATAL on its QP");
	check(raw_qp_state(q.handle) == IBV_QPS_ERR, "... the QP is in error");
	check(written(e, 0x66), "... the WRITE was done (only its completion was lost)");
	check(le32toh(__atomic_load_n(&s0->seq, __ATOMIC_ACQUIRE)) == 0,
	      "... and nothing was written into its ring");
	check(peer_send(peer, e->mr, e->buf) == 0, "its peer sends into it");
	st = provider_wc(e);
	snprintf(what, sizeof(what), "... the peer's send fails: status %d (want %d)", st,
		 IBV_WC_RETRY_EXC_ERR);
	check(st == IBV_WC_RETRY_EXC_ERR, what);
	check(raw_destroy_qp(q.handle) == 0 && !ibv_destroy_qp(peer) &&
	      raw_destroy_cq(cq_handle) == 0, "... the QP, its peer and the CQ destroyed");
	memset(e->buf, 0x44, 64);
	check(provider_write(e->qa, e->cq, e->mr, e->buf, e->buf + 64) == 0 &&
	      e->buf[64] == 0x44, "the provider's QPs still work");
}

/*
 * A CQ's arm set to garbage: the device raises an event only for NEXT or
 * SOLICITED (compare-and-exchange to 0), so none comes and the word stays;
 * the completion still arrives. Then armed with NEXT, an event does come
 * (the channel works, so the silence before meant something).
 */
static void garbage_arm(struct env *e)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ib_uverbs_comp_event_desc desc;
	uint32_t cq_handle, next = 0;
	struct ibv_qp *peer;
	struct pollfd p;
	struct raw_qp q;
	uint8_t *cq;

	check(ch != NULL, "a completion channel");
	cq = new_raw_cq(ch->fd, &cq_handle);
	raw_pair(e, cq_handle, &q, &peer);
	__atomic_store_n(&record(cq)->arm, htole32(0xdeadbeef), __ATOMIC_SEQ_CST);
	put_write(e, &q, 0, 500, 0x77);
	publish(&q, 1);
	expect(cq, &next, &q, 500, IBV_WC_SUCCESS, "arm 0xdeadbeef in its CQ's record, an RDMA WRITE");
	check(written(e, 0x77), "... its data landed");
	p = (struct pollfd){ .fd = ch->fd, .events = POLLIN };
	check(poll(&p, 1, 1000) == 0, "... no completion event");
	check(le32toh(__atomic_load_n(&record(cq)->arm, __ATOMIC_SEQ_CST)) == 0xdeadbeef,
	      "... the arm word left as it was");
	__atomic_store_n(&record(cq)->arm, htole32(VIRTIO_RDMA_CQ_ARM_NEXT), __ATOMIC_SEQ_CST);
	put_write(e, &q, 1, 501, 0x78);
	publish(&q, 2);
	expect(cq, &next, &q, 501, IBV_WC_SUCCESS, "armed with NEXT, an RDMA WRITE");
	check(poll(&p, 1, 10000) == 1 && read(ch->fd, &desc, sizeof(desc)) == sizeof(desc) &&
	      desc.cq_handle == (uintptr_t)cq, "... a completion event on its CQ");
	check(le32toh(__atomic_load_n(&record(cq)->arm, __ATOMIC_SEQ_CST)) == 0, "... disarmed");
	check(raw_destroy_qp(q.handle) == 0 && !ibv_destroy_qp(peer) &&
	      raw_destroy_cq(cq_handle) == 0 && !ibv_destroy_comp_channel(ch),
	      "... the QP, its peer, the CQ and the channel destroyed");
}

/*
 * A CQ's slots filled with random bytes (the device only writes them): each
 * genuine completion still arrives whole, with the seq it should have.
 */
static void scribbled_cq_slots(struct env *e)
{
	uint32_t cq_handle, next = 0;
	struct ibv_qp *peer;
	struct raw_qp q;
	uint8_t *cq = new_raw_cq(-1, &cq_handle);

	raw_pair(e, cq_handle, &q, &peer);
	srandom(4242);
	for (uint32_t b = VIRTIO_RDMA_RING_SLOTS; b < VIRTIO_RDMA_RING_SLOTS + CQ_DEPTH * CQE; b++)
		cq[b] = random();
	/* No slot may already look like the completion due there. */
	for (uint32_t i = 0; i < CQ_DEPTH; i++) {
		struct virtio_rdma_ring_cqe *s = (void *)(cq + VIRTIO_RDMA_RING_SLOTS + i * CQE);

		if (le32toh(s->seq) == i + 1)
			s->seq = htole32(i + 2);
	}
	for (uint32_t i = 0; i < 2; i++) {
		struct virtio_rdma_ring_cqe *s = (void *)(cq + VIRTIO_RDMA_RING_SLOTS + i * CQE);

		put_write(e, &q, i, 600 + i, 0x80 + i);
		publish(&q, i + 1);
		expect(cq, &next, &q, 600 + i, IBV_WC_SUCCESS,
		       "random bytes in its CQ's slots, an RDMA WRITE");
		check(written(e, 0x80 + i) && le32toh(s->seq) == i + 1 &&
		      s->cqe.opcode == IBV_WC_RDMA_WRITE, "... its data landed, seq and opcode right");
	}
	check(raw_destroy_qp(q.handle) == 0 && !ibv_destroy_qp(peer) &&
	      raw_destroy_cq(cq_handle) == 0, "... the QP, its peer and the CQ destroyed");
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct virtio_rdma_create_qp_cmd good, bad;
	uint32_t cq_handle, next = 0;
	struct virtio_rdma_cq_req c;
	struct ibv_qp *qa, *qb;
	uint8_t *buf, *cq_ring;
	union ibv_gid gid;
	struct ibv_cq *cq;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	char what[200];
	int rc;

	check(list && list[0], "a device");
	ctx = ibv_open_device(list[0]);
	check(ctx && !strcmp(ibv_get_device_name(list[0]), "virtio_rdma0"),
	      "virtio_rdma0 opened");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	buf = ring_mem(2 * PAGE);
	mr = buf ? ibv_reg_mr(pd, buf, 2 * PAGE, IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_REMOTE_WRITE) : NULL;
	check(pd && cq && mr, "PD, CQ (the provider's ring) and MR");
	check(!ibv_query_gid(ctx, 1, GID_INDEX, &gid), "GID 1");
	qa = create_qp(pd, cq);
	qb = create_qp(pd, cq);
	check(qa && qb && !connect_qp(qa, qb->qp_num, &gid) &&
	      !connect_qp(qb, qa->qp_num, &gid), "two provider QPs, connected (RTS)");
	memset(buf, 0x11, 64);
	check(provider_write(qa, cq, mr, buf, buf + PAGE) == 0 && buf[PAGE] == 0x11,
	      "an RDMA WRITE between them, on the provider's rings");

	/* -- CQ rings the kernel refuses -- */
	cq_ring = ring_mem(VIRTIO_RDMA_RING_SLOTS + CQ_DEPTH * 64);
	void *ro = mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct { const char *what; uint64_t addr; uint32_t depth, cqe; int err; } cqs[] = {
		{ "a misaligned ring", (uintptr_t)cq_ring + 8, CQ_DEPTH, 16, EINVAL },
		{ "a depth not a power of two", (uintptr_t)cq_ring, 12, 8, EINVAL },
		{ "a depth below the CQ's entries", (uintptr_t)cq_ring, 8, 16, EINVAL },
		{ "a ring in no mapping", 0x10000, CQ_DEPTH, 16, EFAULT },
		{ "a read-only ring (the device writes it)", (uintptr_t)ro, CQ_DEPTH, 16, EFAULT },
	};
	for (unsigned int i = 0; i < ARRAY_SIZE(cqs); i++) {
		rc = raw_cq(cqs[i].addr, cqs[i].depth, cqs[i].cqe, -1, &cq_handle);
		snprintf(what, sizeof(what), "CREATE_CQ on %s: errno %d (want %d)",
			 cqs[i].what, rc, cqs[i].err);
		check(rc == cqs[i].err, what);
	}
	check(raw_cq((uintptr_t)cq_ring, CQ_DEPTH, 16, -1, &cq_handle) == 0,
	      "CREATE_CQ on a ring of its own");

	/* -- QP rings the kernel refuses -- */
	good.sq_depth = DEPTH;
	good.sq_stride = SQ_STRIDE;
	good.rq_depth = DEPTH;
	good.rq_stride = RQ_STRIDE;
	struct { const char *what; int field; uint32_t value; int err; } qps[] = {
		{ "an SQ stride not 8-aligned", 0, SQ_STRIDE + 4, EINVAL },
		{ "an SQ stride too small for an SGE and 64 inline bytes", 0, 96, EINVAL },
		{ "an RQ depth below max_recv_wr", 1, DEPTH / 2, EINVAL },
		{ "a misaligned SQ", 2, 8, EINVAL },
		{ "an SQ in no mapping", 3, 0, EFAULT },
	};
	for (unsigned int i = 0; i < ARRAY_SIZE(qps); i++) {
		struct raw_qp q;

		good.sq_addr = (uintptr_t)ring_mem(VIRTIO_RDMA_RING_SLOTS + DEPTH * SQ_STRIDE);
		good.rq_addr = (uintptr_t)ring_mem(VIRTIO_RDMA_RING_SLOTS + DEPTH * RQ_STRIDE);
		bad = good;
		switch (qps[i].field) {
		case 0:
			bad.sq_stride = qps[i].value;
			break;
		case 1:
			bad.rq_depth = qps[i].value;
			break;
		case 2:
			bad.sq_addr += qps[i].value;
			break;
		case 3:
			bad.sq_addr = 0x10000;
			break;
		}
		rc = raw_qp(pd->handle, cq_handle, &bad, &q);
		snprintf(what, sizeof(what), "CREATE_QP with %s: errno %d (want %d)",
			 qps[i].what, rc, qps[i].err);
		check(rc == qps[i].err, what);
	}

	/*
	 * -- rings it corrupts: each case on a fresh QP connected to a fresh
	 * provider QP; an error completion for that QP, nothing else moves --
	 */
	uint64_t victim = (uintptr_t)(buf + PAGE);
	struct { const char *what; int kind; int status; } corrupt[] = {
		{ "REG_MR with a forged guest-physical page table (the kernel's)",
		  0, IBV_WC_LOC_QP_OP_ERR },
		{ "LOCAL_INV of its own MR (a process invalidates only windows)", 1,
		  IBV_WC_LOC_QP_OP_ERR },
		{ "more SGEs than the QP has", 2, IBV_WC_LOC_QP_OP_ERR },
		{ "a producer far past the ring", 3, IBV_WC_LOC_QP_OP_ERR },
		{ "random bytes in every slot", 4, IBV_WC_LOC_QP_OP_ERR },
		{ "an lkey it does not own", 5, IBV_WC_LOC_PROT_ERR },
		{ "random bytes in every receive slot", 6, IBV_WC_LOC_QP_OP_ERR },
		{ "a receive producer far past the ring", 7, IBV_WC_LOC_QP_OP_ERR },
	};
	memset(buf + PAGE, 0x22, PAGE);
	for (unsigned int i = 0; i < ARRAY_SIZE(corrupt); i++) {
		struct virtio_rdma_sq_req *req;
		struct virtio_rdma_sge *sge;
		struct ibv_qp *peer = create_qp(pd, cq);
		struct raw_qp q;

		good.sq_addr = (uintptr_t)ring_mem(VIRTIO_RDMA_RING_SLOTS + DEPTH * SQ_STRIDE);
		good.rq_addr = (uintptr_t)ring_mem(VIRTIO_RDMA_RING_SLOTS + DEPTH * RQ_STRIDE);
		check(peer && raw_qp(pd->handle, cq_handle, &good, &q) == 0 &&
		      raw_connect(&q, peer->qp_num, &gid) == 0 &&
		      connect_qp(peer, q.qpn, &gid) == 0, "a raw QP on its rings, connected");
		req = slot(&q, 0);
		sge = (void *)(req + 1);
		req->wr_id = htole64(100 + i);
		req->send_flags = htole32(IBV_SEND_SIGNALED);
		switch (corrupt[i].kind) {
		case 0:
			/* Page table at guest-physical 0, mapping the victim page. */
			req->opcode = KERNEL_WR_REG_MR;
			req->wr.reg.mrn = htole32(mr->lkey >> 8);
			req->wr.reg.access = htole32(IBV_ACCESS_REMOTE_WRITE |
						     IBV_ACCESS_LOCAL_WRITE);
			req->wr.reg.npages = htole32(1);
			req->wr.reg.iova = htole64(victim);
			req->wr.reg.length = htole64(PAGE);
			req->wr.reg.pages = 0;
			publish(&q, 1);
			break;
		case 1:
			req->opcode = IBV_WR_LOCAL_INV;
			req->ex = htole32(mr->lkey);
			publish(&q, 1);
			break;
		case 2:
			req->opcode = IBV_WR_SEND;
			req->num_sge = htole16(2);
			publish(&q, 1);
			break;
		case 3:
			publish(&q, 1000);
			break;
		case 4:
			srandom(42 + i);
			for (uint32_t b = VIRTIO_RDMA_RING_SLOTS;
			     b < VIRTIO_RDMA_RING_SLOTS + DEPTH * SQ_STRIDE; b++)
				q.sq[b] = random();
			/* Not a valid opcode for a process (RDMA WRITE is 0). */
			for (uint32_t s = 0; s < DEPTH; s++)
				q.sq[VIRTIO_RDMA_RING_SLOTS + s * SQ_STRIDE + 8] = 0xee;
			publish(&q, DEPTH);
			break;
		case 5:
			req->opcode = IBV_WR_RDMA_WRITE;
			req->num_sge = htole16(1);
			req->wr.rdma.remote_addr = htole64(victim);
			req->wr.rdma.rkey = htole32(mr->rkey);
			sge->addr = htole64((uintptr_t)buf);
			sge->length = htole32(64);
			sge->lkey = htole32(mr->lkey ^ 0x5a5a00);
			publish(&q, 1);
			break;
		case 6:
			srandom(42 + i);
			for (uint32_t b = VIRTIO_RDMA_RING_SLOTS;
			     b < VIRTIO_RDMA_RING_SLOTS + DEPTH * RQ_STRIDE; b++)
				q.rq[b] = random();
			/* More SGEs than any receive may have. */
			for (uint32_t s = 0; s < DEPTH; s++)
				memset(q.rq + VIRTIO_RDMA_RING_SLOTS + s * RQ_STRIDE + 8, 0xee, 4);
			__atomic_store_n(&record(q.rq)->producer, htole32(DEPTH), __ATOMIC_RELEASE);
			check(peer_send(peer, mr, buf) == 0, "the peer sends into it");
			break;
		case 7:
			__atomic_store_n(&record(q.rq)->producer, htole32(1000), __ATOMIC_RELEASE);
			check(peer_send(peer, mr, buf) == 0, "the peer sends into it");
			break;
		}
		rc = raw_poll(cq_ring, &next, &c, 10000);
		snprintf(what, sizeof(what), "%s: status %d on QP %u (want %d on %u)",
			 corrupt[i].what, rc ? -1 : c.status, rc ? 0 : le32toh(c.qp_num),
			 corrupt[i].status, q.qpn);
		check(!rc && c.status == corrupt[i].status && le32toh(c.qp_num) == q.qpn, what);
		/* The rest of that ring, flushed (random bytes: up to DEPTH). */
		while (!raw_poll(cq_ring, &next, &c, 200) && c.status == IBV_WC_WR_FLUSH_ERR)
			;
		/* The peer's send into a broken receive ring ends, in error. */
		if (corrupt[i].kind >= 6) {
			struct ibv_wc wc;
			int n = 0;

			for (int t = 0; t < 10000 && !n; t++) {
				n = ibv_poll_cq(cq, 1, &wc);
				if (!n)
					usleep(1000);
			}
			snprintf(what, sizeof(what), "... the peer's send ended: status %d",
				 n == 1 ? (int)wc.status : -1);
			check(n == 1 && wc.status != IBV_WC_SUCCESS, what);
		}
		check(raw_destroy_qp(q.handle) == 0 && !ibv_destroy_qp(peer),
		      "... the QP and its peer destroyed");
	}

	/* -- more corruption, each on fresh objects (see the functions) -- */
	struct env e = { .pd = pd, .cq = cq, .qa = qa, .qb = qb, .mr = mr, .buf = buf,
			 .gid = gid };

	e.data = ring_mem(PAGE);
	e.dmr = e.data ? ibv_reg_mr(pd, e.data, PAGE, IBV_ACCESS_LOCAL_WRITE |
				    IBV_ACCESS_REMOTE_WRITE) : NULL;
	check(e.dmr != NULL, "an MR for the raw QPs' RDMA WRITEs");
	backward_producer(&e, cq_handle, cq_ring, &next);
	scribbled_flags(&e, cq_handle, cq_ring, &next, 0xffffffff);
	scribbled_flags(&e, cq_handle, cq_ring, &next, 0);
	bogus_consumer(&e);
	garbage_arm(&e);
	scribbled_cq_slots(&e);

	check(buf[PAGE] == 0x22 && buf[2 * PAGE - 1] == 0x22,
	      "the page the forged page table named is unchanged");
	memset(buf, 0x33, 64);
	check(provider_write(qa, cq, mr, buf, buf + PAGE) == 0 && buf[PAGE] == 0x33,
	      "the provider's QPs still work");
	printf("PASS: hostile rings\n");
	return 0;
}
