// SPDX-License-Identifier: GPL-2.0
/*
 * The extended verbs through the project's provider (run by verbs-ex.sh, in
 * both data-path modes): CQs from ibv_create_cq_ex polled with
 * start_poll/next_poll/end_poll, every wc_read_* value checked; RC QPs from
 * ibv_create_qp_ex whose ibv_wr_* batches send, send with immediate,
 * write, write with immediate, read, fetch-and-add and compare-and-swap
 * with SGE lists and inline data, the data moved checked byte for byte; a
 * UD pair addressed with wr_set_ud_addr; ibv_poll_cq and ibv_post_send on
 * the same objects. Then the errors: send operations the device cannot do
 * and completion fields it cannot report fail with EOPNOTSUPP, and a batch
 * with too many SGEs, too much inline data, more requests than the ring
 * holds, or aborted, posts nothing of itself.
 */
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "uverbs_test.h"

#define BUF_LEN (64 * 1024)
#define QKEY 0x11111111
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid;

/* What the wc_read_* accessors said of one completion. */
struct cqe {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t vendor_err, byte_len, imm, qp_num, src_qp, slid;
	unsigned int wc_flags;
	uint8_t sl, dlid_path_bits;
};

static void read_cqe(struct ibv_cq_ex *cq, struct cqe *e)
{
	e->wr_id = cq->wr_id;
	e->status = cq->status;
	e->opcode = ibv_wc_read_opcode(cq);
	e->vendor_err = ibv_wc_read_vendor_err(cq);
	e->byte_len = ibv_wc_read_byte_len(cq);
	e->wc_flags = ibv_wc_read_wc_flags(cq);
	e->imm = e->wc_flags & IBV_WC_WITH_IMM ?
		 ntohl(ibv_wc_read_imm_data(cq)) : 0;
	e->qp_num = ibv_wc_read_qp_num(cq);
	e->src_qp = ibv_wc_read_src_qp(cq);
	e->slid = ibv_wc_read_slid(cq);
	e->sl = ibv_wc_read_sl(cq);
	e->dlid_path_bits = ibv_wc_read_dlid_path_bits(cq);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/*
 * Up to @n completions of @cq within @secs seconds, through start_poll,
 * next_poll and end_poll; returns how many came.
 */
static int poll_ex(struct ibv_cq_ex *cq, struct cqe *e, int n, double secs)
{
	struct ibv_poll_cq_attr attr = {};
	double end = now() + secs;
	int got = 0, ret;

	while (got < n && now() < end) {
		ret = ibv_start_poll(cq, &attr);
		if (ret == ENOENT) {
			usleep(1000);
			continue;
		}
		if (ret)
			check(0, "ibv_start_poll: 0 or ENOENT");
		do
			read_cqe(cq, &e[got++]);
		while (got < n && !(ret = ibv_next_poll(cq)));
		if (got < n && ret != ENOENT)
			check(0, "ibv_next_poll: 0 or ENOENT");
		ibv_end_poll(cq);
	}
	return got;
}

static void expect(const struct cqe *e, uint64_t wr_id, enum ibv_wc_opcode op,
		   uint32_t byte_len, unsigned int flags, uint32_t imm,
		   uint32_t qp_num, uint32_t src_qp, const char *what)
{
	char m[256];

	snprintf(m, sizeof(m),
		 "%s: wr_id %llu status %d opcode %d byte_len %u flags %#x imm %#x qp %u src %u vendor_err %u slid %u sl %u dlid_path_bits %u",
		 what, (unsigned long long)e->wr_id, e->status, e->opcode,
		 e->byte_len, e->wc_flags, e->imm, e->qp_num, e->src_qp,
		 e->vendor_err, e->slid, e->sl, e->dlid_path_bits);
	check(e->wr_id == wr_id && e->status == IBV_WC_SUCCESS &&
	      e->opcode == op && e->byte_len == byte_len &&
	      e->wc_flags == flags && e->imm == imm && e->qp_num == qp_num &&
	      e->src_qp == src_qp && !e->vendor_err && !e->slid && !e->sl &&
	      !e->dlid_path_bits, m);
}

static struct ibv_cq_ex *cq_ex(uint64_t wc_flags)
{
	struct ibv_cq_init_attr_ex a = { .cqe = 64, .wc_flags = wc_flags };

	return ibv_create_cq_ex(ctx, &a);
}

static struct ibv_qp *qp_ex(enum ibv_qp_type type, struct ibv_cq_ex *cq,
			    uint64_t ops)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = ibv_cq_ex_to_cq(cq),
		.recv_cq = ibv_cq_ex_to_cq(cq),
		.cap = { .max_send_wr = 16, .max_recv_wr = 16,
			 .max_send_sge = 4, .max_recv_sge = 4,
			 .max_inline_data = 64 },
		.qp_type = type,
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = ops,
	};

	return ibv_create_qp_ex(ctx, &a);
}

/*
 * As connect_qp() of uverbs_test.h, with remote atomics allowed as well:
 * @qp to RTS, connected to QP @remote of this port.
 */
static void connect_rc(struct ibv_qp *qp, uint32_t remote)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};

	check(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
	      "RC QP to INIT, remote atomics allowed");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = remote;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = GID_INDEX;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	check(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV |
				     IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER), "RC QP to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	check(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
				     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC),
	      "RC QP to RTS");
}

static void connect_ud(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY,
	};

	check(!ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				     IBV_QP_PORT | IBV_QP_QKEY) &&
	      !ibv_modify_qp(qp, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR },
			     IBV_QP_STATE) &&
	      !ibv_modify_qp(qp, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS },
			     IBV_QP_STATE | IBV_QP_SQ_PSN),
	      "UD QP to RTS");
}

static void post_recv(struct ibv_qp *qp, uint64_t wr_id, struct ibv_sge *sg,
		      int n)
{
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = sg, .num_sge = n };
	struct ibv_recv_wr *bad;

	check(!ibv_post_recv(qp, &wr, &bad), "ibv_post_recv");
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

/*
 * After a failed or aborted batch: nothing of it reached the send queue.
 * A send of @wr_id then completes first on @cq, and the receive waiting on
 * the peer gets its byte_len @len.
 */
static void nothing_posted(struct ibv_qp_ex *qx, struct ibv_cq_ex *cq,
			   struct ibv_cq_ex *peer_cq, struct ibv_mr *mr,
			   uint8_t *a, uint64_t wr_id, uint32_t len,
			   const char *what)
{
	struct cqe e[2];
	char m[160];

	snprintf(m, sizeof(m), "%s: no completion of the failed batch", what);
	check(poll_ex(cq, e, 1, 0.3) == 0 && poll_ex(peer_cq, e, 1, 0.1) == 0, m);
	ibv_wr_start(qx);
	qx->wr_id = wr_id;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)a, len);
	check(ibv_wr_complete(qx) == 0, "a good batch after it");
	snprintf(m, sizeof(m), "%s: the next completions are the next batch's", what);
	check(poll_ex(cq, &e[0], 1, 5) == 1 && e[0].wr_id == wr_id &&
	      e[0].status == IBV_WC_SUCCESS &&
	      poll_ex(peer_cq, &e[1], 1, 5) == 1 && e[1].byte_len == len &&
	      e[1].status == IBV_WC_SUCCESS, m);
}

int main(void)
{
	static const uint64_t bad_ops[] = {
		IBV_QP_EX_WITH_TSO,
	};
	const uint64_t rc_ops = IBV_QP_EX_WITH_SEND |
		IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE |
		IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
		IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
		IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
		IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_FLUSH;
	struct ibv_device **list;
	struct ibv_cq_ex *cqa, *cqb;
	struct ibv_qp *qa, *qb;
	struct ibv_qp_ex *xa;
	struct ibv_qp_attr qattr;
	struct ibv_qp_init_attr init;
	struct ibv_mr *ma, *mb;
	uint8_t *a, *b, expect_buf[256];
	struct cqe e[8];
	struct ibv_wc wc;
	unsigned int i;
	int n;

	list = ibv_get_device_list(NULL);
	check(list && list[0], "a device");
	for (i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "virtio_rdma0"))
			break;
	check(list[i] != NULL, "virtio_rdma0 is there");
	ctx = ibv_open_device(list[i]);
	check(ctx != NULL, "ibv_open_device");
	check(!ibv_query_gid(ctx, 1, GID_INDEX, &gid), "ibv_query_gid");
	pd = ibv_alloc_pd(ctx);
	check(pd != NULL, "ibv_alloc_pd");

	/* What the device cannot do is refused, not accepted and ignored. */
	errno = 0;
	check(!cq_ex(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) && errno == EOPNOTSUPP,
	      "create_cq_ex with completion timestamps: EOPNOTSUPP");
	errno = 0;
	check(!cq_ex(IBV_WC_EX_WITH_CVLAN) && errno == EOPNOTSUPP,
	      "create_cq_ex with VLANs: EOPNOTSUPP");
	cqa = cq_ex(IBV_WC_STANDARD_FLAGS);
	cqb = cq_ex(IBV_WC_STANDARD_FLAGS);
	check(cqa && cqb, "create_cq_ex with the standard wc_flags");
	for (i = 0; i < ARRAY_SIZE(bad_ops); i++) {
		char m[96];

		errno = 0;
		snprintf(m, sizeof(m),
			 "create_qp_ex with send_ops_flags %#llx: EOPNOTSUPP",
			 (unsigned long long)bad_ops[i]);
		check(!qp_ex(IBV_QPT_RC, cqa, IBV_QP_EX_WITH_SEND | bad_ops[i]) &&
		      errno == EOPNOTSUPP, m);
	}
	errno = 0;
	check(!qp_ex(IBV_QPT_UD, cqa, IBV_QP_EX_WITH_RDMA_WRITE) &&
	      errno == EOPNOTSUPP, "create_qp_ex of a UD QP with RDMA write: EOPNOTSUPP");

	qa = qp_ex(IBV_QPT_RC, cqa, rc_ops);
	qb = qp_ex(IBV_QPT_RC, cqb, rc_ops);
	check(qa && qb, "create_qp_ex of RC QPs with every operation the device has");
	xa = ibv_qp_to_qp_ex(qa);
	check(xa != NULL, "ibv_qp_to_qp_ex");
	check(!ibv_query_qp(qa, &qattr, IBV_QP_CAP, &init), "ibv_query_qp");
	printf("  caps: send_sge %u inline %u send_wr %u\n",
	       init.cap.max_send_sge, init.cap.max_inline_data,
	       init.cap.max_send_wr);
	connect_rc(qa, qb->qp_num);
	connect_rc(qb, qa->qp_num);

	a = aligned_alloc(4096, BUF_LEN);
	b = aligned_alloc(4096, BUF_LEN);
	check(a && b, "buffers");
	memset(a, 0, BUF_LEN);
	memset(b, 0, BUF_LEN);
	ma = ibv_reg_mr(pd, a, BUF_LEN, IBV_ACCESS_LOCAL_WRITE);
	mb = ibv_reg_mr(pd, b, BUF_LEN, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			IBV_ACCESS_REMOTE_ATOMIC);
	check(ma && mb, "ibv_reg_mr");
	fill(a, 16384, 1);
	fill(b + 12288, 128, 99);
	*(uint64_t *)(b + 24576) = 100;

	/* The receives: a send (2 SGEs), a send with immediate, a write with immediate. */
	post_recv(qb, 11, (struct ibv_sge[]){
		{ (uintptr_t)b, 128, mb->lkey },
		{ (uintptr_t)b + 1024, 128, mb->lkey } }, 2);
	post_recv(qb, 12, (struct ibv_sge[]){
		{ (uintptr_t)b + 2048, 64, mb->lkey } }, 1);
	post_recv(qb, 13, (struct ibv_sge[]){
		{ (uintptr_t)b + 3072, 64, mb->lkey } }, 1);

	ibv_wr_start(xa);
	xa->wr_id = 1;
	xa->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(xa);
	ibv_wr_set_sge_list(xa, 3, (struct ibv_sge[]){
		{ (uintptr_t)a, 100, ma->lkey },
		{ (uintptr_t)a + 200, 50, ma->lkey },
		{ (uintptr_t)a + 400, 30, ma->lkey } });
	xa->wr_id = 2;
	ibv_wr_send_imm(xa, htonl(0x12345678));
	ibv_wr_set_inline_data_list(xa, 2, (struct ibv_data_buf[]){
		{ "inline, ", 8 }, { a + 1000, 18 } });
	xa->wr_id = 3;
	xa->wr_flags = 0;		/* unsignaled: no completion */
	ibv_wr_rdma_write(xa, mb->rkey, (uintptr_t)b + 4096);
	ibv_wr_set_sge_list(xa, 2, (struct ibv_sge[]){
		{ (uintptr_t)a + 2000, 300, ma->lkey },
		{ (uintptr_t)a + 3000, 200, ma->lkey } });
	xa->wr_id = 4;
	xa->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write_imm(xa, mb->rkey, (uintptr_t)b + 8192,
			      htonl(0xabcdef01));
	ibv_wr_set_inline_data(xa, a + 5000, 40);
	xa->wr_id = 5;
	ibv_wr_rdma_read(xa, mb->rkey, (uintptr_t)b + 12288);
	ibv_wr_set_sge_list(xa, 2, (struct ibv_sge[]){
		{ (uintptr_t)a + 16384, 64, ma->lkey },
		{ (uintptr_t)a + 20480, 64, ma->lkey } });
	xa->wr_id = 6;
	ibv_wr_atomic_fetch_add(xa, mb->rkey, (uintptr_t)b + 24576, 23);
	ibv_wr_set_sge(xa, ma->lkey, (uintptr_t)a + 24576, 8);
	xa->wr_id = 7;
	ibv_wr_atomic_cmp_swp(xa, mb->rkey, (uintptr_t)b + 24576, 123, 777);
	ibv_wr_set_sge(xa, ma->lkey, (uintptr_t)a + 24584, 8);
	check(ibv_wr_complete(xa) == 0, "a batch of 7 requests: wr_complete");

	n = poll_ex(cqa, e, 7, 10);
	check(n == 6, "6 completions on the sender (the unsignaled write has none)");
	expect(&e[0], 1, IBV_WC_SEND, 180, 0, 0, qa->qp_num, 0, "send, 3 SGEs");
	expect(&e[1], 2, IBV_WC_SEND, 26, 0, 0, qa->qp_num, 0, "send_imm, inline list");
	expect(&e[2], 4, IBV_WC_RDMA_WRITE, 40, 0, 0, qa->qp_num, 0, "write_imm, inline");
	expect(&e[3], 5, IBV_WC_RDMA_READ, 128, 0, 0, qa->qp_num, 0, "read, 2 SGEs");
	expect(&e[4], 6, IBV_WC_FETCH_ADD, 8, 0, 0, qa->qp_num, 0, "fetch_add");
	expect(&e[5], 7, IBV_WC_COMP_SWAP, 8, 0, 0, qa->qp_num, 0, "cmp_swp");
	n = poll_ex(cqb, e, 4, 5);
	check(n == 3, "3 completions on the receiver");
	expect(&e[0], 11, IBV_WC_RECV, 180, 0, 0, qb->qp_num, qa->qp_num, "recv of the send");
	expect(&e[1], 12, IBV_WC_RECV, 26, IBV_WC_WITH_IMM, 0x12345678,
	       qb->qp_num, qa->qp_num, "recv of send_imm");
	expect(&e[2], 13, IBV_WC_RECV_RDMA_WITH_IMM, 40, IBV_WC_WITH_IMM,
	       0xabcdef01, qb->qp_num, qa->qp_num, "recv of write_imm");

	/* The data, where each request put it. */
	memcpy(expect_buf, a, 100);
	memcpy(expect_buf + 100, a + 200, 50);
	memcpy(expect_buf + 150, a + 400, 30);
	check(!memcmp(b, expect_buf, 128) && !memcmp(b + 1024, expect_buf + 128, 52),
	      "send: 3 SGEs gathered, scattered into 2");
	check(!memcmp(b + 2048, "inline, ", 8) && !memcmp(b + 2056, a + 1000, 18),
	      "send_imm: the inline data list");
	check(!memcmp(b + 4096, a + 2000, 300) && !memcmp(b + 4396, a + 3000, 200),
	      "write: 2 SGEs");
	check(!memcmp(b + 8192, a + 5000, 40), "write_imm: the inline data");
	check(!memcmp(a + 16384, b + 12288, 64) && !memcmp(a + 20480, b + 12352, 64),
	      "read: into 2 SGEs");
	check(*(uint64_t *)(a + 24576) == 100 && *(uint64_t *)(a + 24584) == 123 &&
	      *(uint64_t *)(b + 24576) == 777,
	      "fetch_add returned 100, cmp_swp 123, and the target holds 777");

	/* ibv_post_send and ibv_poll_cq on the same QP and extended CQ. */
	post_recv(qb, 21, (struct ibv_sge[]){ { (uintptr_t)b, 64, mb->lkey } }, 1);
	{
		struct ibv_sge sg = { (uintptr_t)a + 7000, 33, ma->lkey };
		struct ibv_send_wr wr = {
			.wr_id = 20, .sg_list = &sg, .num_sge = 1,
			.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
		}, *bad;

		check(!ibv_post_send(qa, &wr, &bad), "ibv_post_send on a QP of create_qp_ex");
	}
	for (i = 0, n = 0; i < 5000 && !n; i++) {
		n = ibv_poll_cq(ibv_cq_ex_to_cq(cqa), 1, &wc);
		if (!n)
			usleep(1000);
	}
	check(n == 1 && wc.wr_id == 20 && wc.status == IBV_WC_SUCCESS &&
	      wc.opcode == IBV_WC_SEND, "ibv_poll_cq on an extended CQ");
	n = poll_ex(cqb, e, 1, 5);
	check(n == 1 && e[0].wr_id == 21 && e[0].byte_len == 33 &&
	      !memcmp(b, a + 7000, 33), "its receive, through start_poll");

	/* Batches that fail while built post nothing of themselves. */
	post_recv(qb, 30, (struct ibv_sge[]){ { (uintptr_t)b, 4096, mb->lkey } }, 1);
	{
		struct ibv_sge sg[64];
		uint8_t big[1024];

		for (i = 0; i < 64; i++)
			sg[i] = (struct ibv_sge){ (uintptr_t)a + i * 16, 16, ma->lkey };
		ibv_wr_start(xa);
		xa->wr_id = 100;
		xa->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(xa);
		ibv_wr_set_sge(xa, ma->lkey, (uintptr_t)a, 10);
		xa->wr_id = 101;
		ibv_wr_rdma_write(xa, mb->rkey, (uintptr_t)b + 4096);
		ibv_wr_set_sge_list(xa, init.cap.max_send_sge + 1, sg);
		check(ibv_wr_complete(xa) == EINVAL,
		      "a batch with a request of max_send_sge + 1 SGEs: wr_complete EINVAL");
		nothing_posted(xa, cqa, cqb, ma, a, 102, 11, "too many SGEs");

		post_recv(qb, 31, (struct ibv_sge[]){ { (uintptr_t)b, 4096, mb->lkey } }, 1);
		memset(big, 0x5a, sizeof(big));
		ibv_wr_start(xa);
		xa->wr_id = 110;
		xa->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(xa);
		ibv_wr_set_sge(xa, ma->lkey, (uintptr_t)a, 10);
		ibv_wr_send(xa);
		ibv_wr_set_inline_data(xa, big, init.cap.max_inline_data + 1);
		check(ibv_wr_complete(xa) == EINVAL,
		      "a batch with max_inline_data + 1 bytes inline: wr_complete EINVAL");
		nothing_posted(xa, cqa, cqb, ma, a, 112, 12, "inline too long");

		post_recv(qb, 32, (struct ibv_sge[]){ { (uintptr_t)b, 4096, mb->lkey } }, 1);
		ibv_wr_start(xa);
		xa->wr_flags = 0;
		for (i = 0; i < 4096; i++) {
			xa->wr_id = 1000 + i;
			ibv_wr_rdma_write(xa, mb->rkey, (uintptr_t)b + 4096);
			ibv_wr_set_sge(xa, ma->lkey, (uintptr_t)a, 8);
		}
		check(ibv_wr_complete(xa) == ENOMEM,
		      "a batch of more requests than the send ring holds: wr_complete ENOMEM");
		nothing_posted(xa, cqa, cqb, ma, a, 120, 13, "queue full");

		post_recv(qb, 33, (struct ibv_sge[]){ { (uintptr_t)b, 4096, mb->lkey } }, 1);
		ibv_wr_start(xa);
		xa->wr_id = 130;
		xa->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(xa);
		ibv_wr_set_sge(xa, ma->lkey, (uintptr_t)a, 10);
		ibv_wr_abort(xa);
		nothing_posted(xa, cqa, cqb, ma, a, 131, 14, "wr_abort");
	}

	/* UD: wr_set_ud_addr, and the GRH a UD receive starts with. */
	{
		struct ibv_ah_attr ah_attr = {
			.is_global = 1, .port_num = 1,
			.grh = { .dgid = gid, .sgid_index = GID_INDEX, .hop_limit = 1 },
		};
		struct ibv_qp *ua = qp_ex(IBV_QPT_UD, cqa, IBV_QP_EX_WITH_SEND |
					  IBV_QP_EX_WITH_SEND_WITH_IMM);
		struct ibv_qp *ub = qp_ex(IBV_QPT_UD, cqb, IBV_QP_EX_WITH_SEND);
		struct ibv_qp_ex *xu;
		struct ibv_ah *ah;

		check(ua && ub, "create_qp_ex of UD QPs");
		connect_ud(ua);
		connect_ud(ub);
		ah = ibv_create_ah(pd, &ah_attr);
		check(ah != NULL, "ibv_create_ah");
		xu = ibv_qp_to_qp_ex(ua);
		post_recv(ub, 41, (struct ibv_sge[]){ { (uintptr_t)b, 1024, mb->lkey } }, 1);
		post_recv(ub, 42, (struct ibv_sge[]){ { (uintptr_t)b + 1024, 1024, mb->lkey } }, 1);
		memset(b, 0, 2048);
		ibv_wr_start(xu);
		xu->wr_id = 40;
		xu->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(xu);
		ibv_wr_set_ud_addr(xu, ah, ub->qp_num, QKEY);
		ibv_wr_set_sge(xu, ma->lkey, (uintptr_t)a + 9000, 200);
		xu->wr_id = 43;
		ibv_wr_send_imm(xu, htonl(0xfeed));
		ibv_wr_set_ud_addr(xu, ah, ub->qp_num, QKEY);
		ibv_wr_set_inline_data(xu, a + 9500, 50);
		check(ibv_wr_complete(xu) == 0, "UD batch: wr_complete");
		n = poll_ex(cqa, e, 2, 5);
		check(n == 2 && e[0].wr_id == 40 && e[0].status == IBV_WC_SUCCESS &&
		      e[1].wr_id == 43 && e[1].status == IBV_WC_SUCCESS,
		      "UD sends complete");
		n = poll_ex(cqb, e, 2, 5);
		check(n == 2, "2 UD receives");
		expect(&e[0], 41, IBV_WC_RECV, 40 + 200, IBV_WC_GRH, 0,
		       ub->qp_num, ua->qp_num, "UD recv");
		expect(&e[1], 42, IBV_WC_RECV, 40 + 50, IBV_WC_GRH | IBV_WC_WITH_IMM,
		       0xfeed, ub->qp_num, ua->qp_num, "UD recv with immediate");
		check(!memcmp(b + 40, a + 9000, 200) && !memcmp(b + 1024 + 40, a + 9500, 50),
		      "UD: the data after the GRH");
		/* A UD request without its address is refused, batch and all. */
		ibv_wr_start(xu);
		xu->wr_id = 44;
		ibv_wr_send(xu);
		ibv_wr_set_sge(xu, ma->lkey, (uintptr_t)a, 8);
		check(ibv_wr_complete(xu) == EINVAL, "a UD send without wr_set_ud_addr: EINVAL");
		check(poll_ex(cqa, e, 1, 0.3) == 0, "and nothing of it is posted");
		check(!ibv_destroy_ah(ah) && !ibv_destroy_qp(ua) && !ibv_destroy_qp(ub),
		      "UD objects destroyed");
	}

	check(!ibv_destroy_qp(qa) && !ibv_destroy_qp(qb) &&
	      !ibv_destroy_cq(ibv_cq_ex_to_cq(cqa)) &&
	      !ibv_destroy_cq(ibv_cq_ex_to_cq(cqb)) && !ibv_dereg_mr(ma) &&
	      !ibv_dereg_mr(mb) && !ibv_dealloc_pd(pd) && !ibv_close_device(ctx),
	      "everything destroyed");
	ibv_free_device_list(list);
	free(a);
	free(b);
	printf("PASS\n");
	return 0;
}
