// SPDX-License-Identifier: GPL-2.0
/*
 * A hostile process against virtio_rdma0's user data path (used by
 * user-hostile.sh). It sets up two connected RC QPs through rdma-core (the
 * project's provider), then bypasses the provider: it maps the rings at
 * offsets, lengths and protections the kernel did not hand out, writes
 * garbage into a QP's send ring and rings the doorbell itself, posts work
 * requests in the kernel's form, posts with a key it does not own, and
 * destroys objects still in use. Every case must get its clear error (an
 * errno, or an error completion on that QP only) and the other QP must keep
 * working. Exits non-zero on the first unmet expectation.
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
#define DEPTH 8
/* enum ib_wr_opcode (kernel-only, so not in the user headers) */
#define KERNEL_WR_REG_MR 0x20

struct ring_map {
	uint8_t *addr;
	size_t len;
	unsigned long long offset;
};

/* The uverbs mappings of this process (the provider's rings), by address. */
static int uverbs_maps(struct ring_map *maps, int max)
{
	unsigned long long start, end, offset;
	char line[512];
	int n = 0;
	FILE *f;

	f = fopen("/proc/self/maps", "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f) && n < max) {
		if (!strstr(line, "/dev/infiniband/uverbs"))
			continue;
		if (sscanf(line, "%llx-%llx %*s %llx", &start, &end, &offset) != 3)
			continue;
		maps[n].addr = (uint8_t *)(uintptr_t)start;
		maps[n].len = end - start;
		maps[n].offset = offset;
		n++;
	}
	fclose(f);
	return n;
}

static int try_mmap(int fd, size_t len, int prot, int flags, off_t offset)
{
	void *p = mmap(NULL, len, prot, flags, fd, offset);

	if (p == MAP_FAILED)
		return errno;
	munmap(p, len);
	return 0;
}

/* The raw doorbell: uverbs POST_SEND/POST_RECV without work requests. */
static int doorbell(struct ibv_qp *qp, uint32_t command, uint32_t wr_count)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_post_send cmd;
		struct ib_uverbs_send_wr wr;
	} req;
	struct ib_uverbs_post_send_resp resp;
	size_t len = sizeof(req.hdr) + sizeof(req.cmd) +
		     (wr_count ? sizeof(req.wr) : 0);

	memset(&req, 0, sizeof(req));
	req.hdr.command = command;
	req.hdr.in_words = len / 4;
	req.hdr.out_words = sizeof(resp) / 4;
	req.cmd.response = (uintptr_t)&resp;
	req.cmd.qp_handle = qp->handle;
	req.cmd.wr_count = wr_count;
	req.cmd.wqe_size = sizeof(req.wr);
	req.wr.opcode = IB_UVERBS_WR_SEND;
	if (write(qp->context->cmd_fd, &req, len) != (ssize_t)len)
		return errno;
	return 0;
}

/*
 * Raw uverbs CREATE_CQ of 16 entries with @drv (@drv_len bytes) as the
 * driver's request and @out_len bytes of room for the answer in @resp;
 * returns the errno or 0.
 */
static int raw_create_cq(struct ibv_context *ctx, const void *drv, size_t drv_len,
			 uint8_t *resp, size_t out_len)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_create_cq cmd;
		uint8_t drv[64];
	} req;
	size_t len = sizeof(req.hdr) + sizeof(req.cmd) + drv_len;

	memset(&req, 0, sizeof(req));
	req.hdr.command = IB_USER_VERBS_CMD_CREATE_CQ;
	req.hdr.in_words = len / 4;
	req.hdr.out_words = out_len / 4;
	req.cmd.response = (uintptr_t)resp;
	req.cmd.cqe = 16;
	req.cmd.comp_channel = -1;
	memcpy(req.drv, drv, drv_len);
	if (write(ctx->cmd_fd, &req, len) != (ssize_t)len)
		return errno;
	return 0;
}

static struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr attr = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = DEPTH, .max_recv_wr = DEPTH,
			 .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = 64 },
		.qp_type = IBV_QPT_RC,
	};

	return ibv_create_qp(pd, &attr);
}

/* Waits for one completion; returns 0 and fills wc, or -1 after ~10 s. */
static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (int i = 0; i < 10000; i++) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n < 0 ? -1 : 0;
		usleep(1000);
	}
	return -1;
}

/* A send element written by hand into slot @index of the send ring. */
static void put_send(struct ring_map *sq, const struct virtio_rdma_uring *u,
		     uint32_t index, uint8_t opcode, uint16_t num_sge,
		     uint32_t inline_len, uint64_t addr, uint32_t lkey)
{
	uint8_t *slot = sq->addr + u->slots + (index % u->depth) * u->stride;
	struct virtio_rdma_sq_req *req = (void *)slot;
	struct virtio_rdma_sge *sge = (void *)(req + 1);

	memset(slot, 0, u->stride);
	req->wr_id = htole64(0x1000 + index);
	req->opcode = opcode;
	req->num_sge = htole16(num_sge);
	req->send_flags = htole32(IBV_SEND_SIGNALED |
				  (inline_len ? IBV_SEND_INLINE : 0));
	req->inline_len = htole32(inline_len);
	if (num_sge) {
		sge->addr = htole64(addr);
		sge->length = htole32(64);
		sge->lkey = htole32(lkey);
	}
}

/* The mapping of @after that is not in @before (the newest ring). */
static struct ring_map *new_map(struct ring_map *before, int nb,
				struct ring_map *after, int na, int nth)
{
	for (int i = 0; i < na; i++) {
		int seen = 0;

		for (int j = 0; j < nb; j++)
			seen |= before[j].offset == after[i].offset;
		if (!seen && nth-- == 0)
			return &after[i];
	}
	return NULL;
}

/* A connected pair of RC QPs. */
static void pair(struct ibv_pd *pd, struct ibv_cq *cq, union ibv_gid *gid,
		 struct ibv_qp **a, struct ibv_qp **b)
{
	*a = create_qp(pd, cq);
	*b = create_qp(pd, cq);
	check(*a && *b, "two QPs");
	check(!connect_qp(*a, (*b)->qp_num, gid) &&
	      !connect_qp(*b, (*a)->qp_num, gid), "... connected to each other (RTS)");
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ring_map before[16], after[16], *sq, *ring, cqr;
	struct ibv_qp *qa, *qb, *qc, *qd, *qe;
	struct virtio_rdma_uring_ctrl *ctrl;
	struct virtio_rdma_uring u;
	struct ibv_context *ctx;
	union ibv_gid gid;
	struct ibv_async_event ev;
	struct ibv_wc wc;
	struct ibv_cq *cq;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	int nb, na, rc, fd;
	uint8_t *buf;

	check(list && list[0], "a device");
	ctx = ibv_open_device(list[0]);
	check(ctx && !strcmp(ibv_get_device_name(list[0]), "virtio_rdma0"),
	      "virtio_rdma0 opened");
	fd = ctx->cmd_fd;
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	buf = aligned_alloc(4096, 4096);
	mr = buf ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_REMOTE_WRITE) : NULL;
	check(pd && cq && mr, "PD, CQ and MR");
	check(!ibv_query_gid(ctx, 1, GID_INDEX, &gid), "GID 1");

	nb = uverbs_maps(before, 16);
	check(nb == 1, "the CQ's ring, mapped by the provider");
	cqr = before[0];
	pair(pd, cq, &gid, &qa, &qb);
	pair(pd, cq, &gid, &qc, &qd);
	na = uverbs_maps(after, 16);
	check(na == nb + 8, "each QP has two rings, mapped by the provider");
	/* QP A's send ring is the first ring created (lowest offset). */
	sq = NULL;
	for (int k = 0; (ring = new_map(before, nb, after, na, k)); k++)
		if (!sq || ring->offset < sq->offset)
			sq = ring;

	/* -- mmap at offsets, lengths and protections not handed out -- */
	size_t page = sysconf(_SC_PAGESIZE);
	int rw = PROT_READ | PROT_WRITE;

	check(try_mmap(fd, sq->len, rw, MAP_SHARED, sq->offset) == 0,
	      "a ring maps again at its offset and length");
	check(try_mmap(fd, sq->len, rw, MAP_SHARED, sq->offset + page) == EINVAL,
	      "mmap inside a ring (not at its offset): EINVAL");
	check(try_mmap(fd, sq->len - page, rw, MAP_SHARED, sq->offset) == EINVAL,
	      "mmap shorter than the ring: EINVAL");
	check(try_mmap(fd, sq->len + page, rw, MAP_SHARED, sq->offset) == EINVAL,
	      "mmap longer than the ring: EINVAL");
	check(try_mmap(fd, sq->len, rw, MAP_PRIVATE, sq->offset) == EINVAL,
	      "private mapping: EINVAL");
	check(try_mmap(fd, sq->len, rw | PROT_EXEC, MAP_SHARED, sq->offset) == EINVAL,
	      "executable mapping: EINVAL");
	check(try_mmap(fd, page, PROT_READ, MAP_SHARED, 1ULL << 40) == EINVAL,
	      "mmap far past any ring: EINVAL");

	/*
	 * -- garbage in QP A's send ring, doorbell rung by hand --
	 * The driver's layout for this QP (the provider got it in the
	 * CREATE_QP answer): DEPTH slots of 512-byte send elements after the
	 * 64-byte indices.
	 */
	ctrl = (void *)sq->addr;
	u.depth = DEPTH;
	u.stride = 512;
	u.slots = 64;
	check(ctrl->producer == 0 && ctrl->consumer == 0 &&
	      sq->len >= u.slots + DEPTH * u.stride, "A's send ring, empty");

	ctrl->producer = DEPTH + 1;
	rc = doorbell(qa, IB_USER_VERBS_CMD_POST_SEND, 0);
	check(rc == EINVAL && ctrl->consumer == 0,
	      "producer more than the ring ahead: EINVAL, nothing taken");

	struct { const char *what; uint8_t op; uint16_t sge; uint32_t inl; } bad[] = {
		{ "REG_MR (the kernel's; it carries guest-physical pages)", KERNEL_WR_REG_MR, 1, 0 },
		{ "an unknown opcode", 0xee, 1, 0 },
		{ "more SGEs than the QP has", IB_UVERBS_WR_SEND, 2, 0 },
		{ "more inline data than the QP has", IB_UVERBS_WR_SEND, 0, 65 },
	};
	for (unsigned int i = 0; i < ARRAY_SIZE(bad); i++) {
		uint32_t at = ctrl->consumer;
		char what[160];

		put_send(sq, &u, at, bad[i].op, bad[i].sge, bad[i].inl,
			 (uintptr_t)buf, mr->lkey);
		ctrl->producer = at + 1;
		rc = doorbell(qa, IB_USER_VERBS_CMD_POST_SEND, 0);
		snprintf(what, sizeof(what),
			 "%s: EINVAL, the element skipped (errno %d)", bad[i].what, rc);
		check(rc == EINVAL && ctrl->consumer == at + 1, what);
	}
	{
		uint32_t at = ctrl->consumer;

		/* Random bytes in every slot, and a forged consumer. */
		srandom(42);
		for (uint32_t i = u.slots; i < u.slots + DEPTH * u.stride; i++)
			sq->addr[i] = random();
		ctrl->producer = at + DEPTH;
		ctrl->consumer = 12345;
		rc = doorbell(qa, IB_USER_VERBS_CMD_POST_SEND, 0);
		check(rc == EINVAL && ctrl->consumer == at + 1,
		      "random elements: refused; the consumer is the kernel's own");
		ctrl->producer = ctrl->consumer;
	}
	check(doorbell(qa, IB_USER_VERBS_CMD_POST_SEND, 1) == EINVAL,
	      "work requests in the kernel's form on a user QP: EINVAL");
	check(ibv_poll_cq(cq, 1, &wc) == 0, "none of it reached the device");

	/* A well-formed element with a key A does not own: an error completion. */
	{
		uint32_t at = ctrl->consumer;

		put_send(sq, &u, at, IB_UVERBS_WR_SEND, 1, 0, (uintptr_t)buf,
			 mr->lkey ^ 0x5a5a00);
		ctrl->producer = at + 1;
		check(doorbell(qa, IB_USER_VERBS_CMD_POST_SEND, 0) == 0,
		      "a send element with a foreign lkey is taken");
		check(wait_wc(cq, &wc) == 0 && wc.status == IBV_WC_LOC_PROT_ERR &&
		      wc.qp_num == qa->qp_num && wc.wr_id == 0x1000 + at,
		      "... and completes with LOC_PROT_ERR on QP A");
	}

	/* Other QPs are unaffected: C writes into memory D's peer owns. */
	{
		struct ibv_sge sge = { (uintptr_t)buf + 2048, 64, mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = 7, .sg_list = &sge, .num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { (uintptr_t)buf, mr->rkey },
		}, *bad_wr;

		memset(buf, 0, 64);
		memset(buf + 2048, 0x3c, 64);
		rc = ibv_post_send(qc, &wr, &bad_wr);
		while (rc == 0 && wait_wc(cq, &wc) == 0 && wc.qp_num != qc->qp_num)
			; /* A's flushes, if any */
		check(rc == 0 && wc.qp_num == qc->qp_num && wc.status == IBV_WC_SUCCESS &&
		      buf[0] == 0x3c && buf[63] == 0x3c,
		      "QP C's RDMA WRITE to D succeeds, data in place");
	}

	/*
	 * -- the CQ's ring: garbage in it is the process's own; a forged
	 * consumer makes it look full: an overrun --
	 */
	{
		struct virtio_rdma_uring_ctrl *cctrl = (void *)cqr.addr;
		uint32_t consumer = cctrl->consumer;
		struct ibv_sge sge = { (uintptr_t)buf + 2048, 8, mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = 8, .sg_list = &sge, .num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { (uintptr_t)buf, mr->rkey },
		}, *bad_wr;

		/* Slots past the consumer and the driver's index: scribbled. */
		memset(cqr.addr + 64 + (consumer % 64) * 64, 0xff,
		       cqr.len - 64 - (consumer % 64) * 64);
		cctrl->producer = 0xdeadbeef;
		check(ibv_post_send(qc, &wr, &bad_wr) == 0 && wait_wc(cq, &wc) == 0 &&
		      wc.wr_id == 8 && wc.status == IBV_WC_SUCCESS,
		      "scribbled CQ ring: the next completion still arrives intact");
		cctrl->consumer = cctrl->consumer + 0x80000000u;
		wr.wr_id = 9;
		check(ibv_post_send(qc, &wr, &bad_wr) == 0, "a WRITE with the CQ consumer forged");
		check(ibv_get_async_event(ctx, &ev) == 0 && ev.event_type == IBV_EVENT_CQ_ERR &&
		      ev.element.cq == cq, "... its completion is lost as an overrun: IBV_EVENT_CQ_ERR");
		ibv_ack_async_event(&ev);
		check(ibv_poll_cq(cq, 1, &wc) == 0, "... and nothing is in the ring");
		cctrl->consumer = cctrl->consumer - 0x80000000u;
		wr.wr_id = 10;
		check(ibv_post_send(qc, &wr, &bad_wr) == 0 && wait_wc(cq, &wc) == 0 &&
		      wc.wr_id == 10 && wc.status == IBV_WC_SUCCESS,
		      "consumer restored: the next completion arrives");
	}

	/* -- the driver's part of a user verb (udata), here CREATE_CQ's -- */
	{
		size_t core = sizeof(struct ib_uverbs_create_cq_resp);
		size_t drv = sizeof(struct virtio_rdma_create_cq_resp);
		uint8_t garbage[16], zeroes[16] = { 0 }, resp[128];

		memset(garbage, 0xff, sizeof(garbage));
		check(raw_create_cq(ctx, garbage, 16, resp, core + drv) == EOPNOTSUPP,
		      "CREATE_CQ with a driver request the driver does not know: EOPNOTSUPP");
		check(raw_create_cq(ctx, zeroes, 16, resp, core + drv) == 0,
		      "CREATE_CQ with a longer request of zeroes (a newer provider): accepted");
		memset(resp, 0xee, sizeof(resp));
		check(raw_create_cq(ctx, NULL, 0, resp, core) == 0 && resp[core] == 0xee,
		      "CREATE_CQ with no room for the driver's answer: created, nothing written past the room");
		memset(resp, 0xee, sizeof(resp));
		check(raw_create_cq(ctx, NULL, 0, resp, core + 8) == 0 &&
		      resp[core + 8] == 0xee,
		      "CREATE_CQ with room for part of the answer: the part that fits");
		/* These CQs go with the context. */
	}

	/* -- destroying objects still in use -- */
	check(ibv_destroy_cq(cq) == EBUSY, "destroying the CQ of live QPs: EBUSY");
	check(ibv_dealloc_pd(pd) == EBUSY, "deallocating the PD of live QPs: EBUSY");
	nb = uverbs_maps(before, 16);
	qe = create_qp(pd, cq);
	na = uverbs_maps(after, 16);
	ring = new_map(before, nb, after, na, 0);
	check(qe && ring, "QP E with its rings");
	{
		size_t len = ring->len;
		uint8_t *again = mmap(NULL, len, rw, MAP_SHARED, fd, ring->offset);

		check(again != MAP_FAILED, "a second mapping of one of E's rings");
		check(ibv_destroy_qp(qe) == 0, "QP E destroyed while a ring is mapped twice");
		memset(again, 0xa5, len);
		check(again[100] == 0xa5, "the orphaned mapping stays plain memory");
		check(try_mmap(fd, len, rw, MAP_SHARED, ring->offset) == EINVAL,
		      "the destroyed QP's ring cannot be mapped any more");
		munmap(again, len);
	}
	check(!ibv_destroy_qp(qa) && !ibv_destroy_qp(qb) && !ibv_destroy_qp(qc) &&
	      !ibv_destroy_qp(qd) && !ibv_dereg_mr(mr) && !ibv_destroy_cq(cq) &&
	      !ibv_dealloc_pd(pd), "everything else destroyed");
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
