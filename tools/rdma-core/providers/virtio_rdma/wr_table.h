/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * Work request tables of the virtio_rdma provider: what the process keeps of
 * each request outstanding on a ring in guest memory, so that a completion
 * the device writes into a CQ ring is checked before anyone believes it (the
 * protocol's "Completion rings": the consumer MUST check every completion).
 *
 * The device never carries the process's wr_id. Posting records the request
 * and writes a token into the element instead: the queue's tag and the
 * request's position in posting order (for an SRQ, whose receives complete
 * in any order, an entry's index and generation). A completion must name a
 * token of a request still outstanding on the queue it completes, and gets
 * its wr_id from the table. Positions start at a random value per table, so
 * that one QP's token does not pass for another's.
 *
 * The same rules as the kernel driver's (wr_table.rs): elements complete in
 * order, so a receive completion names the oldest receive and a send
 * completion retires the unsignaled requests before it; one that skips a
 * signaled request, or names a request not outstanding, is a device error.
 * Completions of requests a QP reset discarded are dropped quietly. An error
 * completion that skips requests flushes them first (a QP in error flushes
 * everything in order; a device that failed may have lost one it had taken).
 *
 * Locking: a QP's table is posted to under its ring's lock and completed
 * under its CQ's lock; head and tail are the only words both sides touch
 * (each written by one side, read by the other with acquire order). A reset
 * holds both. An SRQ's table is used under the SRQ ring's lock only.
 */
#ifndef VRDMA_WR_TABLE_H
#define VRDMA_WR_TABLE_H

#include <stdbool.h>
#include <stdint.h>

/* The tag in bits 32..39 of a token: which kind of queue it is of. */
enum vrdma_wr_tag {
	VRDMA_TAG_SEND = 1,
	VRDMA_TAG_RECV = 2,
	VRDMA_TAG_SRQ = 3,
};

/* What a table keeps of one outstanding request. */
struct vrdma_posted {
	uint64_t wr_id;		/* the process's */
	uint32_t len;		/* the most a successful completion may report */
	uint8_t opcode;		/* enum ibv_wc_opcode of its success */
	bool signaled;		/* a send that asked for a completion */
};

/* Why a completion's token was refused. */
enum vrdma_wr_result {
	VRDMA_WR_OK,
	VRDMA_WR_NOT_OUTSTANDING,	/* names no request outstanding */
	VRDMA_WR_OUT_OF_ORDER,		/* a receive that is not the oldest */
	VRDMA_WR_SKIPS_SIGNALED,	/* retires a signaled request unreported */
	VRDMA_WR_DISCARDED,		/* a request a QP reset discarded */
	VRDMA_WR_FLUSHED_BEFORE,	/* a request an error completion skipped */
};

/* The outstanding requests of a send or receive queue, in posting order. */
struct vrdma_wr_table {
	struct vrdma_posted *e;	/* depth entries; position p at p % depth */
	uint32_t depth;		/* a power of two */
	uint32_t head;		/* the oldest outstanding position */
	uint32_t tail;		/* the next position */
	uint32_t discard_from;	/* positions the last reset discarded */
	uint32_t discard_to;
	enum vrdma_wr_tag tag;
};

/* The outstanding receives of an SRQ, which complete in any order. */
struct vrdma_srq_table {
	struct vrdma_posted *e;
	uint16_t *generation;
	bool *outstanding;
	uint16_t *free;		/* indices not outstanding, a stack */
	uint32_t nfree;
	uint32_t depth;		/* at most VRDMA_SRQ_TABLE_MAX */
};

#define VRDMA_SRQ_TABLE_MAX (1u << 16)

int vrdma_wr_table_init(struct vrdma_wr_table *t, uint32_t depth,
			enum vrdma_wr_tag tag);
void vrdma_wr_table_free(struct vrdma_wr_table *t);
bool vrdma_wr_table_full(const struct vrdma_wr_table *t);
uint64_t vrdma_wr_table_next(const struct vrdma_wr_table *t);
void vrdma_wr_table_post(struct vrdma_wr_table *t,
			 const struct vrdma_posted *posted);
void vrdma_wr_table_unpost_to(struct vrdma_wr_table *t, uint32_t tail);
struct vrdma_posted *vrdma_wr_table_last(struct vrdma_wr_table *t);
enum vrdma_wr_result vrdma_wr_table_complete(struct vrdma_wr_table *t,
					     uint64_t token, bool error,
					     struct vrdma_posted *posted);
void vrdma_wr_table_reset(struct vrdma_wr_table *t);

int vrdma_srq_table_init(struct vrdma_srq_table *t, uint32_t depth);
void vrdma_srq_table_free(struct vrdma_srq_table *t);
bool vrdma_srq_table_full(const struct vrdma_srq_table *t);
uint64_t vrdma_srq_table_post(struct vrdma_srq_table *t,
			      const struct vrdma_posted *posted);
enum vrdma_wr_result vrdma_srq_table_complete(struct vrdma_srq_table *t,
					      uint64_t token,
					      struct vrdma_posted *posted);

#endif
