// SPDX-License-Identifier: GPL-2.0
/*
 * A hostile process against queues in guest memory (used by rings.sh, the
 * device offering VIRTIO_RDMA_F_RINGS). Next to a pair of QPs made through
 * rdma-core (the provider's rings), it creates CQs and QPs with raw uverbs
 * commands on rings of its own: rings the kernel must refuse (misaligned,
 * not a power of two, too small a stride, memory it cannot pin), then rings
 * it corrupts every way a process can: a producer far past the ring,
 * elements only the kernel may post (REG_MR with a guest-physical page
 * table, LOCAL_INV of an MR), more SGEs than the QP has, random bytes, a key it does
 * not own. Each gets its errno or an error completion on that QP only, the
 * memory the forged page table names is unchanged, and the provider's QPs
 * keep working. Exits non-zero on the first unmet expectation.
 */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/* Raw CREATE_CQ of @cqe entries on the ring @addr of @depth; errno or 0. */
static int raw_cq(uint64_t addr, uint32_t depth, uint32_t cqe, uint32_t *handle)
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
	req.cmd.cqe = cqe;
	req.cmd.comp_channel = -1;
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

/* Raw CREATE_QP (RC, 1 SGE, 64 inline bytes) on rings; errno or 0. */
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
		rc = raw_cq(cqs[i].addr, cqs[i].depth, cqs[i].cqe, &cq_handle);
		snprintf(what, sizeof(what), "CREATE_CQ on %s: errno %d (want %d)",
			 cqs[i].what, rc, cqs[i].err);
		check(rc == cqs[i].err, what);
	}
	check(raw_cq((uintptr_t)cq_ring, CQ_DEPTH, 16, &cq_handle) == 0,
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
	check(buf[PAGE] == 0x22 && buf[2 * PAGE - 1] == 0x22,
	      "the page the forged page table named is unchanged");
	memset(buf, 0x33, 64);
	check(provider_write(qa, cq, mr, buf, buf + PAGE) == 0 && buf[PAGE] == 0x33,
	      "the provider's QPs still work");
	printf("PASS: hostile rings\n");
	return 0;
}
