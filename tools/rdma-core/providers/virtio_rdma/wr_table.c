// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * Work request tables of the virtio_rdma provider (see wr_table.h).
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "wr_table.h"

/* A start position no one can guess (0 if the kernel cannot say). */
static uint32_t vrdma_random_start(void)
{
	uint32_t start = 0;

	if (getrandom(&start, sizeof(start), GRND_NONBLOCK) != sizeof(start))
		start = 0;
	return start;
}

int vrdma_wr_table_init(struct vrdma_wr_table *t, uint32_t depth,
			enum vrdma_wr_tag tag)
{
	uint32_t start = vrdma_random_start();

	if (!depth || (depth & (depth - 1)))
		return EINVAL;
	t->e = calloc(depth, sizeof(*t->e));
	if (!t->e)
		return ENOMEM;
	t->depth = depth;
	t->limit = depth;
	t->head = start;
	t->tail = start;
	t->discard_from = start;
	t->discard_to = start;
	t->tag = tag;
	return 0;
}

void vrdma_wr_table_free(struct vrdma_wr_table *t)
{
	free(t->e);
	t->e = NULL;
}

static struct vrdma_posted *entry(const struct vrdma_wr_table *t, uint32_t pos)
{
	return &t->e[pos & (t->depth - 1)];
}

/*
 * At most @limit requests outstanding (1..depth): the queue's granted cap,
 * which IB lets a consumer fill and no more, though the ring is a power of
 * two and may hold more.
 */
void vrdma_wr_table_limit(struct vrdma_wr_table *t, uint32_t limit)
{
	if (limit && limit < t->depth)
		t->limit = limit;
}

/* Poster's side: whether as many requests are outstanding as may be. */
bool vrdma_wr_table_full(const struct vrdma_wr_table *t)
{
	uint32_t head = __atomic_load_n(&t->head, __ATOMIC_ACQUIRE);

	return t->tail - head >= t->limit;
}

/* The token the next request posted gets. */
uint64_t vrdma_wr_table_next(const struct vrdma_wr_table *t)
{
	return (uint64_t)t->tag << 32 | t->tail;
}

/* Records the next request (the table is not full). */
void vrdma_wr_table_post(struct vrdma_wr_table *t,
			 const struct vrdma_posted *posted)
{
	*entry(t, t->tail) = *posted;
	/* The entry before the position: the completer reads it after. */
	__atomic_store_n(&t->tail, t->tail + 1, __ATOMIC_RELEASE);
}

/*
 * The request posted last, to finish its record (ibv_wr_* sets the data
 * after the operation); NULL if none is outstanding.
 */
struct vrdma_posted *vrdma_wr_table_last(struct vrdma_wr_table *t)
{
	if (t->tail == __atomic_load_n(&t->head, __ATOMIC_ACQUIRE))
		return NULL;
	return entry(t, t->tail - 1);
}

/*
 * Forgets the requests posted from position @tail on: they were withdrawn
 * before the device could see them.
 */
void vrdma_wr_table_unpost_to(struct vrdma_wr_table *t, uint32_t tail)
{
	__atomic_store_n(&t->tail, tail, __ATOMIC_RELEASE);
}

/*
 * Completer's side: takes the request @token names out of the table into
 * *@posted. A receive must be the oldest; a send retires the unsignaled
 * requests before it. An @error completion (the QP is in error, and
 * flushes in order) that skips requests first gives them back one by one,
 * oldest first, as VRDMA_WR_FLUSHED_BEFORE (unsignaled sends only retire):
 * requests a failed device had taken but not completed are flushed so.
 */
enum vrdma_wr_result vrdma_wr_table_complete(struct vrdma_wr_table *t,
					     uint64_t token, bool error,
					     struct vrdma_posted *posted)
{
	uint32_t tail = __atomic_load_n(&t->tail, __ATOMIC_ACQUIRE);
	uint32_t pos = (uint32_t)token, ahead, i;
	bool skipped = false;

	if (token >> 40 || vrdma_token_tag(token) != t->tag)
		return VRDMA_WR_NOT_OUTSTANDING;
	ahead = pos - t->head;
	if (ahead >= tail - t->head) {
		if (pos - t->discard_from < t->discard_to - t->discard_from)
			return VRDMA_WR_DISCARDED;
		return VRDMA_WR_NOT_OUTSTANDING;
	}
	for (; ahead && error; ahead--) {
		struct vrdma_posted *e = entry(t, t->head);

		__atomic_store_n(&t->head, t->head + 1, __ATOMIC_RELEASE);
		if (e->signaled || t->tag == VRDMA_TAG_RECV) {
			*posted = *e;
			return VRDMA_WR_FLUSHED_BEFORE;
		}
	}
	if (t->tag == VRDMA_TAG_RECV && ahead)
		return VRDMA_WR_OUT_OF_ORDER;
	for (i = 0; i < ahead; i++)
		skipped |= entry(t, t->head + i)->signaled;
	*posted = *entry(t, pos);
	/* The entries up to pos are the poster's again. */
	__atomic_store_n(&t->head, pos + 1, __ATOMIC_RELEASE);
	return skipped ? VRDMA_WR_SKIPS_SIGNALED : VRDMA_WR_OK;
}

/*
 * Discards every outstanding request (the QP was reset: the device dropped
 * them without completions). Both sides' locks held.
 */
void vrdma_wr_table_reset(struct vrdma_wr_table *t)
{
	t->discard_from = t->head;
	t->discard_to = t->tail;
	__atomic_store_n(&t->head, t->tail, __ATOMIC_RELEASE);
}

/*
 * An SRQ's table: @tag VRDMA_TAG_SRQ (a basic SRQ, @srqn 0: its number is
 * not needed) or VRDMA_TAG_XRC_SRQ (an XRC SRQ, whose tokens carry its
 * number @srqn).
 */
int vrdma_srq_table_init(struct vrdma_srq_table *t, uint32_t depth,
			 enum vrdma_wr_tag tag, uint32_t srqn)
{
	uint16_t start = vrdma_random_start();
	uint32_t i;

	if (!depth || depth > VRDMA_SRQ_TABLE_MAX || srqn >> VRDMA_NUM_BITS ||
	    (tag != VRDMA_TAG_XRC_SRQ && (tag != VRDMA_TAG_SRQ || srqn)))
		return EINVAL;
	t->e = calloc(depth, sizeof(*t->e));
	t->generation = calloc(depth, sizeof(*t->generation));
	t->outstanding = calloc(depth, sizeof(*t->outstanding));
	t->free = calloc(depth, sizeof(*t->free));
	if (!t->e || !t->generation || !t->outstanding || !t->free) {
		vrdma_srq_table_free(t);
		return ENOMEM;
	}
	/* Popped from the end: entry 0 first. */
	for (i = 0; i < depth; i++) {
		t->free[i] = depth - 1 - i;
		t->generation[i] = start;
	}
	t->nfree = depth;
	t->depth = depth;
	t->id = (uint64_t)srqn << 40 | (uint64_t)tag << 32;
	return 0;
}

void vrdma_srq_table_free(struct vrdma_srq_table *t)
{
	free(t->e);
	free(t->generation);
	free(t->outstanding);
	free(t->free);
	t->e = NULL;
	t->generation = NULL;
	t->outstanding = NULL;
	t->free = NULL;
}

bool vrdma_srq_table_full(const struct vrdma_srq_table *t)
{
	return !t->nfree;
}

/* Records a receive (the table is not full); returns its token. */
uint64_t vrdma_srq_table_post(struct vrdma_srq_table *t,
			      const struct vrdma_posted *posted)
{
	uint16_t i = t->free[--t->nfree];

	t->generation[i]++;
	t->e[i] = *posted;
	t->outstanding[i] = true;
	return t->id | (uint64_t)t->generation[i] << 16 | i;
}

/* Takes the receive @token names out of the table into *@posted. */
enum vrdma_wr_result vrdma_srq_table_complete(struct vrdma_srq_table *t,
					      uint64_t token,
					      struct vrdma_posted *posted)
{
	uint32_t i = token & 0xffff;

	/* The tag and SRQ number (bits 32..63) first: another SRQ's token. */
	if ((token & ~0xffffffffull) != t->id ||
	    i >= t->depth || !t->outstanding[i] ||
	    t->generation[i] != (uint16_t)(token >> 16))
		return VRDMA_WR_NOT_OUTSTANDING;
	t->outstanding[i] = false;
	*posted = t->e[i];
	t->free[t->nfree++] = i;
	return VRDMA_WR_OK;
}

void vrdma_num_table_init(struct vrdma_num_table *t)
{
	memset(t->chunk, 0, sizeof(t->chunk));
	pthread_mutex_init(&t->mutex, NULL);
}

void vrdma_num_table_free(struct vrdma_num_table *t)
{
	size_t i;

	for (i = 0; i < VRDMA_NUM_CHUNKS; i++)
		free(t->chunk[i]);
	pthread_mutex_destroy(&t->mutex);
}

/*
 * The object numbered @n, or NULL; @n is what a device wrote, so anything.
 * Lock-free: a chunk, once published, stays until the table goes, and an
 * entry changes only under locks the caller holds (see the structure).
 */
void *vrdma_num_table_find(struct vrdma_num_table *t, uint32_t n)
{
	void **chunk;

	if (n >> VRDMA_NUM_BITS)
		return NULL;
	chunk = __atomic_load_n(&t->chunk[n >> VRDMA_NUM_CHUNK_SHIFT],
				__ATOMIC_ACQUIRE);
	if (!chunk)
		return NULL;
	return __atomic_load_n(&chunk[n & (VRDMA_NUM_CHUNK - 1)],
			       __ATOMIC_ACQUIRE);
}

/*
 * The entry for @n, its chunk made if need be: NULL without memory or for
 * a number of more than 24 bits. Made before the locks under which the
 * entry is set are taken (they are spinlocks).
 */
void **vrdma_num_table_entry(struct vrdma_num_table *t, uint32_t n)
{
	void ***chunk;
	void **entries;

	if (n >> VRDMA_NUM_BITS)
		return NULL;
	chunk = &t->chunk[n >> VRDMA_NUM_CHUNK_SHIFT];
	pthread_mutex_lock(&t->mutex);
	entries = *chunk;
	if (!entries) {
		entries = calloc(VRDMA_NUM_CHUNK, sizeof(*entries));
		__atomic_store_n(chunk, entries, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&t->mutex);
	return entries ? &entries[n & (VRDMA_NUM_CHUNK - 1)] : NULL;
}

/* @obj as its entry's object: what a poller finds from now on. */
void vrdma_num_table_set(void **entry, void *obj)
{
	__atomic_store_n(entry, obj, __ATOMIC_RELEASE);
}

/*
 * Clears @entry if it still holds @obj: once the kernel destroyed the
 * object, its number may already be another's that was created meanwhile.
 */
void vrdma_num_table_clear(void **entry, void *obj)
{
	__atomic_compare_exchange_n(entry, &obj, NULL, false, __ATOMIC_RELEASE,
				    __ATOMIC_RELAXED);
}
