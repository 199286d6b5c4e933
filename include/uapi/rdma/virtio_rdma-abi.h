/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-3-Clause) */
/*
 * virtio-rdma user ABI: the driver-specific data that the virtio_rdma driver
 * and its rdma-core provider exchange in user verbs (udata).
 *
 * The provider matches devices whose uverbs abi_version (sysfs) is
 * VIRTIO_RDMA_UVERBS_ABI_VERSION. Requests longer than the structure the
 * driver knows are accepted only if the extra bytes are zero; responses are
 * truncated to the room the provider gives (the verbs ABI's rules for
 * growing structures).
 *
 * No guest-physical or DMA address ever appears in this ABI or in memory a
 * process maps: user memory is named by user virtual addresses and the keys
 * of MRs the kernel registered (it pins the pages and gives the device their
 * page table), so a process can never aim the device at memory it did not
 * register. The rings a process maps hold only work requests in the device's
 * element format (include/uapi/linux/virtio_rdma.h), completions and two
 * indices; the virtqueues (whose descriptors hold DMA addresses) are never
 * mapped. At the doorbell the driver copies each new element out of the
 * ring into memory of its own, checks it (an opcode a process may post, SGE
 * count and inline length within the QP's limits) and only then lends the
 * copy to the device, which checks keys, PDs, access rights and bounds.
 * Completions reach a CQ's ring the other way: the device writes them into
 * the driver's buffers, the driver checks and copies them into the ring.
 *
 * All structures have explicit padding and sizes that are multiples of 8.
 */
#ifndef _UAPI_RDMA_VIRTIO_RDMA_ABI_H
#define _UAPI_RDMA_VIRTIO_RDMA_ABI_H

#include <linux/types.h>
#include <linux/virtio_rdma.h>

#define VIRTIO_RDMA_UVERBS_ABI_VERSION	1

/* caps: user CQs and QPs (with the rings below) and AHs */
#define VIRTIO_RDMA_CAP_USER_QP		(1ULL << 0)
/*
 * caps: queues in guest memory (the device's VIRTIO_RDMA_F_RINGS). The
 * process allocates the rings of its CQs and QPs (struct virtio_rdma_ring's
 * layout: a record, then slots) and names them in CREATE_CQ / CREATE_QP
 * (struct virtio_rdma_create_cq_cmd, struct virtio_rdma_create_qp_cmd); the
 * kernel pins them and hands their pages to the device, which reads work
 * requests from them and writes completions into them: no system call per
 * post or poll. The process rings the doorbell (uverbs POST_SEND or
 * POST_RECV with no work requests) only when the ring's record asks for it
 * (VIRTIO_RDMA_RING_F_NOTIFY), and arms a CQ by storing into its record
 * (uverbs REQ_NOTIFY_CQ is not used). The device checks every element (the
 * operations a process may post, SGE count, inline length, keys, PD,
 * bounds, access) and a bad one fails only that QP; the process checks the
 * completions it reads. The rings the responses describe are then unused.
 */
#define VIRTIO_RDMA_CAP_RINGS		(1ULL << 1)

/* GET_CONTEXT: no request data. caps says what the user data path offers. */
struct virtio_rdma_alloc_ucontext_resp {
	__aligned_u64 caps;
};

/*
 * A work queue ring of a user QP. The process maps `length` bytes at
 * `offset` of the uverbs file (MAP_SHARED, not executable). The mapping
 * starts with struct virtio_rdma_uring_ctrl; slot i (0 <= i < depth, depth a
 * power of two) is at slots + i * stride and holds one element exactly as
 * the device reads it: struct virtio_rdma_sq_req then its SGEs or inline
 * data (send ring), struct virtio_rdma_rq_req then its SGEs (receive ring).
 *
 * To post, the process writes elements into the slots producer, producer+1,
 * ... (modulo depth), then stores the new producer (a free-running count)
 * and rings the doorbell: uverbs POST_SEND or POST_RECV with no work
 * requests. The driver takes every element from its consumer up to the
 * producer, then stores the new consumer. A slot may be rewritten once the
 * consumer has passed it. The doorbell fails with EINVAL for a producer more
 * than depth ahead of the consumer or for an element the driver refuses (the
 * consumer then stops after it: the element is skipped), and with ENOMEM if
 * the device still holds as many elements as the QP may have outstanding
 * (the consumer stops before it).
 */
struct virtio_rdma_uring {
	__aligned_u64 offset;
	__u32 length;
	__u32 depth;
	__u32 stride;
	__u32 slots;
};

struct virtio_rdma_uring_ctrl {
	__u32 producer;			/* written by the process (a CQ: unused) */
	__u32 consumer;			/* written by the driver (a CQ: the process) */
};

/*
 * A slot of a CQ's ring: a completion the device reported, checked by the
 * driver (it names a QP of this CQ, a known status and opcode; flags the
 * device may set), then seq, written last: the slot holds completion number
 * seq - 1 (a free-running count) once seq reads as that. Fields as in
 * struct virtio_rdma_cq_req (opcode: enum ib_wc_opcode, wc_flags: enum
 * ib_wc_flags, ex: the immediate data as sent, or the invalidated rkey).
 */
struct virtio_rdma_ucqe {
	struct virtio_rdma_cq_req cqe;
	__u32 seq;
	__u32 reserved[3];
};

/*
 * CREATE_CQ request with VIRTIO_RDMA_CAP_RINGS: the ring, page aligned,
 * VIRTIO_RDMA_RING_SLOTS + depth * sizeof(struct virtio_rdma_ring_cqe)
 * bytes; depth a power of two, at least the CQ's cqe.
 */
struct virtio_rdma_create_cq_cmd {
	__aligned_u64 addr;
	__u32 depth;
	__u32 reserved;
};

/*
 * CREATE_QP request with VIRTIO_RDMA_CAP_RINGS: the SQ and RQ rings, each
 * page aligned, VIRTIO_RDMA_RING_SLOTS + depth * stride bytes; depth a
 * power of two, at least max_send_wr (max_recv_wr); stride 8-aligned and
 * room for the largest element the QP's caps allow.
 */
struct virtio_rdma_create_qp_cmd {
	__aligned_u64 sq_addr;
	__aligned_u64 rq_addr;
	__u32 sq_depth;
	__u32 sq_stride;
	__u32 rq_depth;
	__u32 rq_stride;
};

/*
 * CREATE_SRQ request (VIRTIO_RDMA_CAP_RINGS; a QP with an SRQ names no RQ
 * ring: rq_addr, rq_depth and rq_stride 0): the SRQ's ring, laid out as an
 * RQ ring; depth a power of two, at least max_wr; stride room for a receive
 * of max_sge entries. No answer. POST_SRQ_RECV without work requests is the
 * SRQ's doorbell.
 */
struct virtio_rdma_create_srq_cmd {
	__aligned_u64 addr;
	__u32 depth;
	__u32 stride;
	__u32 reserved;
	__u32 reserved1;
};

/*
 * CREATE_CQ without VIRTIO_RDMA_CAP_RINGS: no request data. The answer maps the CQ's ring, slots of
 * struct virtio_rdma_ucqe: the driver moves each completion into slot
 * producer % depth as it arrives (interrupt context, no system call), and
 * the process polls slot consumer % depth until its seq is consumer + 1,
 * reads it, and stores the new consumer so the driver may reuse the slot.
 * A completion that finds the ring full is lost and the CQ's async event
 * handler gets IB_EVENT_CQ_ERR (an overrun). Arming stays a system call
 * (uverbs REQ_NOTIFY_CQ).
 */
struct virtio_rdma_create_cq_resp {
	struct virtio_rdma_uring ring;
};

/*
 * RESIZE_CQ (ibv_resize_cq), whose cqe is the CQ's new size. Completion
 * numbers go on across it: completion n is in slot n % depth of whichever
 * ring holds it, with seq n + 1, and the process's consumer count does not
 * change. It fails with EINVAL if the completions the process has not
 * consumed do not fit in cqe, and leaves the CQ as it was on any failure.
 *
 * Without VIRTIO_RDMA_CAP_RINGS: no request data. The answer maps the new
 * ring (as CREATE_CQ's); the driver has copied the completions not consumed
 * into it, and its consumer is the old ring's. The process unmaps the old.
 *
 * With VIRTIO_RDMA_CAP_RINGS: the request names the new ring (as CREATE_CQ's
 * request), whose record's consumer the process has set to its count. The
 * answer's produced is the number of completions the old ring received:
 * those not consumed are still in the old ring (the process copies them
 * into the new one or reads them there), and the device writes the next
 * ones into the new ring. An arming carries over.
 */
struct virtio_rdma_resize_cq_cmd {
	__aligned_u64 addr;
	__u32 depth;
	__u32 reserved;
};

struct virtio_rdma_resize_cq_resp {
	struct virtio_rdma_uring ring;	/* without VIRTIO_RDMA_CAP_RINGS */
	__u32 produced;			/* with VIRTIO_RDMA_CAP_RINGS */
	__u32 reserved;
};

/* CREATE_QP answer (zero with VIRTIO_RDMA_CAP_RINGS). */
struct virtio_rdma_create_qp_resp {
	struct virtio_rdma_uring sq;
	struct virtio_rdma_uring rq;
};

/*
 * CREATE_AH: no request data. The answer is the address vector (destination
 * MAC resolved by the kernel) that UD send elements carry.
 */
struct virtio_rdma_create_ah_resp {
	struct virtio_rdma_av av;
};

#endif /* _UAPI_RDMA_VIRTIO_RDMA_ABI_H */
