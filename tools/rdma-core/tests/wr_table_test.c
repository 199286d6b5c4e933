// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * Unit tests of the provider's work request tables (providers/virtio_rdma/
 * wr_table.c), run on the host by make check (cargo layer): each prints
 * "test NAME ... ok" or "... FAILED".
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "wr_table.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Whether the test running, or any test, failed an expectation. */
static bool test_failed, failed;

static void expect(bool ok, int line, const char *what)
{
	if (!ok) {
		printf("  %s:%d: %s\n", __FILE__, line, what);
		test_failed = true;
	}
}

#define EXPECT(cond) expect(cond, __LINE__, #cond)

static struct vrdma_posted req(uint64_t wr_id, bool signaled)
{
	struct vrdma_posted p = { .wr_id = wr_id, .len = 100, .signaled = signaled };

	return p;
}

/* Posts @wr_id (signaled or not); returns its token. */
static uint64_t post(struct vrdma_wr_table *t, uint64_t wr_id, bool signaled)
{
	struct vrdma_posted p = req(wr_id, signaled);
	uint64_t token = vrdma_wr_table_next(t);

	vrdma_wr_table_post(t, &p);
	return token;
}

static void tokens_name_requests_in_order(void)
{
	struct vrdma_wr_table t;
	struct vrdma_posted p;
	uint64_t a, b;

	EXPECT(!vrdma_wr_table_init(&t, 4, VRDMA_TAG_SEND));
	a = post(&t, 0xaaaa, true);
	b = post(&t, 0xbbbb, true);
	/* A token is the tag and a position, never the wr_id. */
	EXPECT(a >> 32 == VRDMA_TAG_SEND && (uint32_t)b == (uint32_t)a + 1);
	EXPECT(vrdma_wr_table_complete(&t, a, false, &p) == VRDMA_WR_OK &&
	       p.wr_id == 0xaaaa);
	EXPECT(vrdma_wr_table_complete(&t, b, false, &p) == VRDMA_WR_OK &&
	       p.wr_id == 0xbbbb);
	/* Each completes once. */
	EXPECT(vrdma_wr_table_complete(&t, b, false, &p) == VRDMA_WR_NOT_OUTSTANDING);
	vrdma_wr_table_free(&t);
}

/* A QP's granted cap below the ring's power-of-two depth is what fills it. */
static void the_granted_cap_fills_the_table(void)
{
	struct vrdma_wr_table t;

	EXPECT(!vrdma_wr_table_init(&t, 4, VRDMA_TAG_RECV));
	vrdma_wr_table_limit(&t, 3);
	post(&t, 1, true);
	post(&t, 2, true);
	EXPECT(!vrdma_wr_table_full(&t));
	post(&t, 3, true);
	EXPECT(vrdma_wr_table_full(&t));
	/* A limit of 0 or above the depth leaves the depth. */
	vrdma_wr_table_limit(&t, 0);
	vrdma_wr_table_limit(&t, 9);
	EXPECT(t.limit == 3);
	vrdma_wr_table_free(&t);
}

static void full_table_and_withdrawn_batch(void)
{
	struct vrdma_wr_table t;
	struct vrdma_posted p;
	uint32_t tail;
	uint64_t a;

	EXPECT(!vrdma_wr_table_init(&t, 2, VRDMA_TAG_RECV));
	a = post(&t, 1, true);
	tail = t.tail;
	post(&t, 2, true);
	EXPECT(vrdma_wr_table_full(&t));
	/* An ibv_wr_* batch withdrawn: its requests are forgotten. */
	vrdma_wr_table_unpost_to(&t, tail);
	EXPECT(!vrdma_wr_table_full(&t));
	EXPECT((uint32_t)vrdma_wr_table_next(&t) == (uint32_t)a + 1);
	post(&t, 4, true);
	EXPECT(vrdma_wr_table_complete(&t, a, false, &p) == VRDMA_WR_OK && p.wr_id == 1);
	EXPECT(vrdma_wr_table_complete(&t, a + 1, false, &p) == VRDMA_WR_OK && p.wr_id == 4);
	vrdma_wr_table_free(&t);
	/* Positions index the entries modulo a power of two. */
	EXPECT(vrdma_wr_table_init(&t, 3, VRDMA_TAG_RECV) == EINVAL);
}

static void tokens_not_outstanding_are_refused(void)
{
	struct vrdma_wr_table t;
	struct vrdma_posted p;
	uint64_t a;

	EXPECT(!vrdma_wr_table_init(&t, 4, VRDMA_TAG_SEND));
	a = post(&t, 1, true);
	/* Beyond, a lap ahead, the other queue's, high bits set, garbage. */
	uint64_t bad[] = { a + 1, a + 4, a + 5, a + (1ull << 32), a | 1ull << 40,
			   0, ~0ull };
	for (unsigned int i = 0; i < ARRAY_SIZE(bad); i++)
		EXPECT(vrdma_wr_table_complete(&t, bad[i], false, &p) ==
		       VRDMA_WR_NOT_OUTSTANDING);
	EXPECT(vrdma_wr_table_complete(&t, a, false, &p) == VRDMA_WR_OK && p.wr_id == 1);
	vrdma_wr_table_free(&t);
}

static void sends_retire_unsignaled_and_refuse_skipping_signaled(void)
{
	struct vrdma_wr_table t;
	struct vrdma_posted p;
	uint64_t a, c, d;

	EXPECT(!vrdma_wr_table_init(&t, 8, VRDMA_TAG_SEND));
	a = post(&t, 1, false);
	post(&t, 2, false);
	c = post(&t, 3, true);
	post(&t, 4, true);
	d = post(&t, 5, true);
	EXPECT(vrdma_wr_table_complete(&t, c, false, &p) == VRDMA_WR_OK && p.wr_id == 3);
	/* The unsignaled ones went with it. */
	EXPECT(vrdma_wr_table_complete(&t, a, false, &p) == VRDMA_WR_NOT_OUTSTANDING);
	/* 5 skips signaled 4: a device error. */
	EXPECT(vrdma_wr_table_complete(&t, d, false, &p) == VRDMA_WR_SKIPS_SIGNALED);
	vrdma_wr_table_free(&t);
}

static void receives_complete_oldest_first(void)
{
	struct vrdma_wr_table t;
	struct vrdma_posted p;
	uint64_t a, b;

	EXPECT(!vrdma_wr_table_init(&t, 4, VRDMA_TAG_RECV));
	a = post(&t, 1, true);
	b = post(&t, 2, true);
	EXPECT(vrdma_wr_table_complete(&t, b, false, &p) == VRDMA_WR_OUT_OF_ORDER);
	EXPECT(vrdma_wr_table_complete(&t, a, false, &p) == VRDMA_WR_OK && p.wr_id == 1);
	EXPECT(vrdma_wr_table_complete(&t, b, false, &p) == VRDMA_WR_OK && p.wr_id == 2);
	vrdma_wr_table_free(&t);
}

static void an_error_flushes_what_it_skips_first(void)
{
	struct vrdma_wr_table t;
	struct vrdma_posted p;
	uint64_t d;

	/* Sends: the signaled ones skipped come back, oldest first. */
	EXPECT(!vrdma_wr_table_init(&t, 8, VRDMA_TAG_SEND));
	post(&t, 1, true);
	post(&t, 2, false);
	post(&t, 3, true);
	d = post(&t, 4, true);
	EXPECT(vrdma_wr_table_complete(&t, d, true, &p) == VRDMA_WR_FLUSHED_BEFORE &&
	       p.wr_id == 1);
	EXPECT(vrdma_wr_table_complete(&t, d, true, &p) == VRDMA_WR_FLUSHED_BEFORE &&
	       p.wr_id == 3);
	EXPECT(vrdma_wr_table_complete(&t, d, true, &p) == VRDMA_WR_OK && p.wr_id == 4);
	EXPECT(t.head == t.tail);
	vrdma_wr_table_free(&t);
	/* Receives: every one skipped. */
	EXPECT(!vrdma_wr_table_init(&t, 4, VRDMA_TAG_RECV));
	post(&t, 1, true);
	d = post(&t, 2, true);
	EXPECT(vrdma_wr_table_complete(&t, d, true, &p) == VRDMA_WR_FLUSHED_BEFORE &&
	       p.wr_id == 1);
	EXPECT(vrdma_wr_table_complete(&t, d, true, &p) == VRDMA_WR_OK && p.wr_id == 2);
	vrdma_wr_table_free(&t);
}

static void a_reset_discards_quietly(void)
{
	struct vrdma_wr_table t;
	struct vrdma_posted p;
	uint64_t a, b, c;

	EXPECT(!vrdma_wr_table_init(&t, 4, VRDMA_TAG_RECV));
	a = post(&t, 1, true);
	b = post(&t, 2, true);
	vrdma_wr_table_reset(&t);
	EXPECT(vrdma_wr_table_complete(&t, a, false, &p) == VRDMA_WR_DISCARDED);
	EXPECT(vrdma_wr_table_complete(&t, b, false, &p) == VRDMA_WR_DISCARDED);
	c = post(&t, 3, true);
	EXPECT(vrdma_wr_table_complete(&t, c, false, &p) == VRDMA_WR_OK && p.wr_id == 3);
	EXPECT(vrdma_wr_table_complete(&t, c + 1, false, &p) == VRDMA_WR_NOT_OUTSTANDING);
	vrdma_wr_table_free(&t);
}

static void srq_receives_complete_in_any_order_once(void)
{
	struct vrdma_posted p, r1 = req(1, true), r2 = req(2, true);
	struct vrdma_srq_table t;
	uint64_t a, b;

	EXPECT(!vrdma_srq_table_init(&t, 2, VRDMA_TAG_SRQ, 0));
	a = vrdma_srq_table_post(&t, &r1);
	b = vrdma_srq_table_post(&t, &r2);
	EXPECT(vrdma_srq_table_full(&t));
	EXPECT(vrdma_srq_table_complete(&t, b, &p) == VRDMA_WR_OK && p.wr_id == 2);
	EXPECT(vrdma_srq_table_complete(&t, b, &p) == VRDMA_WR_NOT_OUTSTANDING);
	/* The entry again, a new generation: the old token is stale. */
	b = vrdma_srq_table_post(&t, &r1);
	EXPECT(vrdma_srq_table_complete(&t, b - (1 << 16), &p) == VRDMA_WR_NOT_OUTSTANDING);
	EXPECT(vrdma_srq_table_complete(&t, a, &p) == VRDMA_WR_OK && p.wr_id == 1);
	EXPECT(vrdma_srq_table_complete(&t, b, &p) == VRDMA_WR_OK);
	/* Another queue's tag, an index past the table. */
	EXPECT(vrdma_srq_table_complete(&t, (uint64_t)VRDMA_TAG_RECV << 32, &p) ==
	       VRDMA_WR_NOT_OUTSTANDING);
	EXPECT(vrdma_srq_table_complete(&t, (uint64_t)VRDMA_TAG_SRQ << 32 | 7, &p) ==
	       VRDMA_WR_NOT_OUTSTANDING);
	vrdma_srq_table_free(&t);
	EXPECT(vrdma_srq_table_init(&t, VRDMA_SRQ_TABLE_MAX + 1, VRDMA_TAG_SRQ, 0) != 0);
}

static void xrc_srq_tokens_carry_the_srq_number(void)
{
	struct vrdma_posted p, r1 = req(1, true), r2 = req(2, true);
	struct vrdma_srq_table x, y, b;
	uint64_t a, c, d;

	EXPECT(!vrdma_srq_table_init(&x, 4, VRDMA_TAG_XRC_SRQ, 0xabcdef));
	EXPECT(!vrdma_srq_table_init(&y, 4, VRDMA_TAG_XRC_SRQ, 0xabcdee));
	EXPECT(!vrdma_srq_table_init(&b, 4, VRDMA_TAG_SRQ, 0));
	a = vrdma_srq_table_post(&x, &r1);
	c = vrdma_srq_table_post(&y, &r2);
	d = vrdma_srq_table_post(&b, &r2);
	/* Bits 40..63 the number, above the tag; a basic SRQ's carry none. */
	EXPECT(vrdma_token_tag(a) == VRDMA_TAG_XRC_SRQ && vrdma_token_srqn(a) == 0xabcdef);
	EXPECT(vrdma_token_srqn(c) == 0xabcdee);
	EXPECT(vrdma_token_tag(d) == VRDMA_TAG_SRQ && vrdma_token_srqn(d) == 0);
	/* Another XRC SRQ's number, a basic SRQ's tag, the same entry. */
	EXPECT(vrdma_srq_table_complete(&x, c, &p) == VRDMA_WR_NOT_OUTSTANDING);
	EXPECT(vrdma_srq_table_complete(&x, (a & 0xffffffffffull) | 1ull << 40, &p) ==
	       VRDMA_WR_NOT_OUTSTANDING);
	EXPECT(vrdma_srq_table_complete(&x, (a & 0xffffffff) | (uint64_t)VRDMA_TAG_SRQ << 32, &p) ==
	       VRDMA_WR_NOT_OUTSTANDING);
	EXPECT(vrdma_srq_table_complete(&b, (d & 0xffffffffffull) | 1ull << 40, &p) ==
	       VRDMA_WR_NOT_OUTSTANDING);
	EXPECT(vrdma_srq_table_complete(&x, a, &p) == VRDMA_WR_OK && p.wr_id == 1);
	EXPECT(vrdma_srq_table_complete(&y, c, &p) == VRDMA_WR_OK && p.wr_id == 2);
	EXPECT(vrdma_srq_table_complete(&b, d, &p) == VRDMA_WR_OK && p.wr_id == 2);
	vrdma_srq_table_free(&x);
	vrdma_srq_table_free(&y);
	vrdma_srq_table_free(&b);
	/* Numbers are 24 bits; a basic SRQ's tokens carry none; no other tag. */
	EXPECT(vrdma_srq_table_init(&x, 4, VRDMA_TAG_XRC_SRQ, 1u << 24) == EINVAL);
	EXPECT(vrdma_srq_table_init(&x, 4, VRDMA_TAG_SRQ, 5) == EINVAL);
	EXPECT(vrdma_srq_table_init(&x, 4, VRDMA_TAG_RECV, 0) == EINVAL);
}

static void num_table_finds_by_number_within_24_bits(void)
{
	struct vrdma_num_table t;
	int a, b;
	void **e, **f;

	vrdma_num_table_init(&t);
	EXPECT(!vrdma_num_table_find(&t, 5));
	e = vrdma_num_table_entry(&t, 5);
	f = vrdma_num_table_entry(&t, 0xffffff);
	EXPECT(e && f);
	vrdma_num_table_set(e, &a);
	vrdma_num_table_set(f, &b);
	EXPECT(vrdma_num_table_find(&t, 5) == &a);
	EXPECT(vrdma_num_table_find(&t, 0xffffff) == &b);
	/* The next chunk, and numbers of more than 24 bits (a device's lie). */
	EXPECT(!vrdma_num_table_find(&t, 5 + VRDMA_NUM_CHUNK));
	EXPECT(!vrdma_num_table_find(&t, 1u << 24 | 5));
	EXPECT(!vrdma_num_table_find(&t, ~0u));
	EXPECT(!vrdma_num_table_entry(&t, 1u << 24));
	/* Clearing for another object (the number reused) leaves the entry. */
	vrdma_num_table_clear(e, &b);
	EXPECT(vrdma_num_table_find(&t, 5) == &a);
	vrdma_num_table_clear(e, &a);
	EXPECT(!vrdma_num_table_find(&t, 5));
	vrdma_num_table_free(&t);
}

static void run(void (*fn)(void), const char *name)
{
	test_failed = false;
	fn();
	printf("test %s ... %s\n", name, test_failed ? "FAILED" : "ok");
	failed |= test_failed;
}

#define RUN(fn) run(fn, #fn)

int main(void)
{
	/* Each verdict out before a sanitizer report can end the process. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	RUN(tokens_name_requests_in_order);
	RUN(full_table_and_withdrawn_batch);
	RUN(the_granted_cap_fills_the_table);
	RUN(tokens_not_outstanding_are_refused);
	RUN(sends_retire_unsignaled_and_refuse_skipping_signaled);
	RUN(receives_complete_oldest_first);
	RUN(an_error_flushes_what_it_skips_first);
	RUN(a_reset_discards_quietly);
	RUN(srq_receives_complete_in_any_order_once);
	RUN(xrc_srq_tokens_carry_the_srq_number);
	RUN(num_table_finds_by_number_within_24_bits);
	return failed;
}
