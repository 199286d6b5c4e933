// SPDX-License-Identifier: GPL-2.0
/*
 * A device that lies in the completions it writes into a process's CQ rings
 * (used by hostile-user-completions.sh: the backend's --rings --hostile
 * completions). With queues in guest memory the kernel never sees a user
 * completion: the provider must check each one itself, as the driver does
 * for its own CQs. Round after round, QP A sends 64 bytes to QP B, which
 * takes its receive from an SRQ; A's CQ is polled with ibv_poll_cq, B's with
 * ibv_start_poll (an extended CQ). Every completion the program is given
 * must be exactly one of its own requests (its wr_id, the QP, the opcode,
 * the length) - or a general error for a request of its own (a success that
 * does not fit the request) - or the poll fails with EIO (a completion that
 * names no outstanding request: the CQ reports no more). After a lie the
 * objects are made anew. Exits non-zero on the first completion the
 * provider should not have passed on, or if it caught too few lies.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "uverbs_test.h"

#define ROUNDS 60
#define MSG 64
#define WAIT_MS 10000

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static uint8_t *buf;
static union ibv_gid gid;

/* The objects of one attempt. */
struct pair {
	struct ibv_cq *cq_a;
	struct ibv_cq_ex *cq_b;
	struct ibv_srq *srq;
	struct ibv_qp *a, *b;
};

/* What the rounds saw. */
static unsigned int good, refused, misfits;

static void make_pair(struct pair *p)
{
	struct ibv_cq_init_attr_ex cq_attr = { .cqe = 16 };
	struct ibv_srq_init_attr srq_attr = {
		.attr = { .max_wr = 8, .max_sge = 1 },
	};
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = 8, .max_recv_wr = 8,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	p->cq_a = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	p->cq_b = ibv_create_cq_ex(ctx, &cq_attr);
	p->srq = ibv_create_srq(pd, &srq_attr);
	check(p->cq_a && p->cq_b && p->srq, "two CQs (one extended) and an SRQ");
	attr.send_cq = attr.recv_cq = p->cq_a;
	p->a = ibv_create_qp(pd, &attr);
	attr.send_cq = attr.recv_cq = ibv_cq_ex_to_cq(p->cq_b);
	attr.srq = p->srq;
	attr.cap.max_recv_wr = 0;
	p->b = ibv_create_qp(pd, &attr);
	check(p->a && p->b && !connect_qp(p->a, p->b->qp_num, &gid) &&
	      !connect_qp(p->b, p->a->qp_num, &gid), "QPs A and B connected (B on the SRQ)");
}

static void destroy_pair(struct pair *p)
{
	check(!ibv_destroy_qp(p->a) && !ibv_destroy_qp(p->b) &&
	      !ibv_destroy_srq(p->srq) && !ibv_destroy_cq(p->cq_a) &&
	      !ibv_destroy_cq(ibv_cq_ex_to_cq(p->cq_b)), "the objects destroyed");
}

/* What one completion should be. */
struct want {
	uint64_t wr_id;
	uint32_t qp_num;
	enum ibv_wc_opcode opcode;
};

/*
 * Judges completion @wc against @w: 1 if it is the request's success, 0 if
 * it is the request's general error (a success that did not fit), and the
 * program ends if it is anything else.
 */
static int judge(const char *cq, const struct ibv_wc *wc, const struct want *w)
{
	char what[256];

	snprintf(what, sizeof(what),
		 "%s: wr_id %#llx status %d opcode %d len %u qp %u: a request of ours (want wr_id %#llx opcode %d len %d qp %u)",
		 cq, (unsigned long long)wc->wr_id, wc->status, wc->opcode,
		 wc->byte_len, wc->qp_num, (unsigned long long)w->wr_id,
		 w->opcode, MSG, w->qp_num);
	if (wc->wr_id == w->wr_id && wc->qp_num == w->qp_num &&
	    wc->status == IBV_WC_GENERAL_ERR)
		return 0;
	/* A send's length is undefined (IB); a receive's is the message's. */
	if (wc->wr_id != w->wr_id || wc->qp_num != w->qp_num ||
	    wc->status != IBV_WC_SUCCESS || wc->opcode != w->opcode ||
	    (w->opcode == IBV_WC_RECV && wc->byte_len != MSG))
		check(0, what);
	return 1;
}

/*
 * Waits for the completion @w on A's CQ (@a) or B's (@b): 1 for it, 0 for
 * its general error, -1 when the provider refused a lie (EIO).
 */
static int take(struct pair *p, bool b, const struct want *w)
{
	struct ibv_poll_cq_attr pattr = {};
	struct ibv_wc wc;
	int n, i;

	for (i = 0; i < WAIT_MS; i++) {
		if (!b) {
			n = ibv_poll_cq(p->cq_a, 1, &wc);
			if (n < 0)
				return -1;
		} else {
			struct ibv_cq_ex *cq = p->cq_b;

			n = ibv_start_poll(cq, &pattr);
			if (n && n != ENOENT) {
				if (n != EIO)
					check(0, "ibv_start_poll fails with EIO or ENOENT");
				return -1;
			}
			n = !n;
			if (n) {
				memset(&wc, 0, sizeof(wc));
				wc.wr_id = cq->wr_id;
				wc.status = cq->status;
				wc.opcode = ibv_wc_read_opcode(cq);
				wc.byte_len = ibv_wc_read_byte_len(cq);
				wc.qp_num = ibv_wc_read_qp_num(cq);
				ibv_end_poll(cq);
			}
		}
		if (n)
			return judge(b ? "B" : "A", &wc, w);
		usleep(1000);
	}
	check(0, "a completion within 10 s");
	return -1;
}

/* One round: B's receive, A's send; whether both came back true. */
static bool round_trip(struct pair *p, unsigned int r)
{
	struct ibv_sge rs = { .addr = (uintptr_t)buf + 4096, .length = 4096,
			      .lkey = mr->lkey };
	struct ibv_sge ss = { .addr = (uintptr_t)buf, .length = MSG, .lkey = mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 0xb0000000ull + r, .sg_list = &rs,
				   .num_sge = 1 }, *bad_r;
	struct ibv_send_wr swr = { .wr_id = 0xa0000000ull + r, .sg_list = &ss,
				   .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED }, *bad_s;
	struct want wa = { swr.wr_id, p->a->qp_num, IBV_WC_SEND };
	struct want wb = { rwr.wr_id, p->b->qp_num, IBV_WC_RECV };
	int ra, rb;

	if (ibv_post_srq_recv(p->srq, &rwr, &bad_r) || ibv_post_send(p->a, &swr, &bad_s))
		check(0, "a receive and a send posted");
	ra = take(p, false, &wa);
	rb = take(p, true, &wb);
	if (ra < 0 || rb < 0)
		refused++;
	else if (!ra || !rb)
		misfits++;
	else
		good++;
	return ra == 1 && rb == 1;
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct pair p;
	char what[200];

	check(list && list[0], "a device");
	ctx = ibv_open_device(list[0]);
	check(ctx != NULL, "the device opened");
	pd = ibv_alloc_pd(ctx);
	buf = aligned_alloc(4096, 2 * 4096);
	mr = pd && buf ? ibv_reg_mr(pd, buf, 2 * 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
	check(mr && !ibv_query_gid(ctx, 1, GID_INDEX, &gid), "PD, MR, GID");
	make_pair(&p);
	for (unsigned int r = 0; r < ROUNDS; r++) {
		if (round_trip(&p, r))
			continue;
		/* A lie: the objects are made anew (their requests are lost). */
		destroy_pair(&p);
		make_pair(&p);
	}
	destroy_pair(&p);
	snprintf(what, sizeof(what),
		 "%u rounds: %u true, %u lies refused (EIO), %u successes that did not fit (general error)",
		 ROUNDS, good, refused, misfits);
	/*
	 * One completion in three is a lie, six kinds in seven visible in a
	 * ring (the short-length lie is not): most rounds meet one.
	 */
	check(good >= 5 && refused >= ROUNDS / 4 && misfits >= 1, what);
	printf("PASS: lying completions\n");
	return 0;
}
