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
 *
 * A token is 64 bits (the element's wr_id, which the completion returns):
 *
 *   QP send or receive queue:  bits 0..31 the position, 32..39 the tag
 *                              (SEND, RECV), 40..63 zero;
 *   basic SRQ:                 bits 0..15 the entry's index, 16..31 its
 *                              generation, 32..39 the tag (SRQ), 40..63 zero;
 *   XRC SRQ:                   as a basic SRQ's, with the tag XRC_SRQ and
 *                              bits 40..63 the SRQ's number.
 *
 * An XRC SRQ's receive completes naming the XRC target QP that took it,
 * which may be another process's (domains are shared): not a QP of this
 * process's QP table. Its token is what names the SRQ, by number, in the
 * process's table of XRC SRQs (struct vrdma_num_table).
 */
#ifndef VRDMA_WR_TABLE_H
#define VRDMA_WR_TABLE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* The tag in bits 32..39 of a token: which kind of queue it is of. */
enum vrdma_wr_tag {
	VRDMA_TAG_SEND = 1,
	VRDMA_TAG_RECV = 2,
	VRDMA_TAG_SRQ = 3,
	VRDMA_TAG_XRC_SRQ = 4,
};

/* QP and SRQ numbers are 24 bits. */
#define VRDMA_NUM_BITS 24

static inline uint32_t vrdma_token_tag(uint64_t token)
{
	return (token >> 32) & 0xff;
}

/* The SRQ number an XRC SRQ's token carries (0 in the others posted). */
static inline uint32_t vrdma_token_srqn(uint64_t token)
{
	return token >> 40;
}

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
	uint32_t limit;		/* outstanding at most: the QP's granted cap */
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
	uint64_t id;		/* the tag and number of every token */
};

#define VRDMA_SRQ_TABLE_MAX (1u << 16)

/*
 * Objects by number (QPs, XRC SRQs), for the poller to find what a
 * completion names: 4096 chunks of 4096 entries. Chunks are added under the
 * mutex and kept until the table goes; an entry is set and cleared under
 * the lock of each CQ its object reports to, which the poller holds while
 * it reads the entry without a lock.
 */
#define VRDMA_NUM_CHUNK_SHIFT 12
#define VRDMA_NUM_CHUNK (1u << VRDMA_NUM_CHUNK_SHIFT)
#define VRDMA_NUM_CHUNKS (1u << (VRDMA_NUM_BITS - VRDMA_NUM_CHUNK_SHIFT))

struct vrdma_num_table {
	pthread_mutex_t mutex;
	void **chunk[VRDMA_NUM_CHUNKS];
};

int vrdma_wr_table_init(struct vrdma_wr_table *t, uint32_t depth,
			enum vrdma_wr_tag tag);
void vrdma_wr_table_free(struct vrdma_wr_table *t);
void vrdma_wr_table_limit(struct vrdma_wr_table *t, uint32_t limit);
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

int vrdma_srq_table_init(struct vrdma_srq_table *t, uint32_t depth,
			 enum vrdma_wr_tag tag, uint32_t srqn);
void vrdma_srq_table_free(struct vrdma_srq_table *t);
bool vrdma_srq_table_full(const struct vrdma_srq_table *t);
uint64_t vrdma_srq_table_post(struct vrdma_srq_table *t,
			      const struct vrdma_posted *posted);
enum vrdma_wr_result vrdma_srq_table_complete(struct vrdma_srq_table *t,
					      uint64_t token,
					      struct vrdma_posted *posted);

void vrdma_num_table_init(struct vrdma_num_table *t);
void vrdma_num_table_free(struct vrdma_num_table *t);
void *vrdma_num_table_find(struct vrdma_num_table *t, uint32_t n);
void **vrdma_num_table_entry(struct vrdma_num_table *t, uint32_t n);
void vrdma_num_table_set(void **entry, void *obj);
void vrdma_num_table_clear(void **entry, void *obj);

#endif
