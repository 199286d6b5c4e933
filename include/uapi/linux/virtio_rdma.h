/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-3-Clause) */
/*
 * virtio-rdma device ABI: what the driver and the device (virtio device
 * ID 42) exchange through config space and virtqueues.
 *
 * This header is the single source of the ABI. The protocol document
 * (Documentation/infiniband/virtio_rdma.rst) describes it in prose; the
 * vhost-user backend (tools/vhost-user-rdma) checks its own definitions
 * against this file at build time.
 *
 * All fields are little-endian. Structures have explicit padding and sizes
 * that are multiples of 8 bytes; their sizes are part of the ABI.
 */
#ifndef _UAPI_LINUX_VIRTIO_RDMA_H
#define _UAPI_LINUX_VIRTIO_RDMA_H

#include <linux/types.h>

/*
 * Config space. The device's config space is 256 bytes (the most a
 * vhost-user GET_CONFIG message carries); bytes past this structure are
 * reserved and read as zero. VIRTIO_RDMA_CMD_QUERY_DEVICE returns the same
 * structure, byte for byte.
 */
struct virtio_rdma_config {
	__le32 phys_port_cnt;
	__le32 vendor_id;
	__le64 sys_image_guid;		/* network byte order */
	__le32 vendor_part_id;
	__le32 hw_ver;
	__le64 max_mr_size;
	__le64 page_size_cap;
	__le64 device_cap_flags;	/* enum ib_device_cap_flags */
	__le32 max_qp;
	__le32 max_qp_wr;
	__le32 max_send_sge;
	__le32 max_recv_sge;
	__le32 max_sge_rd;
	__le32 max_cq;
	__le32 max_cqe;
	__le32 max_mr;
	__le32 max_pd;
	__le32 max_qp_rd_atom;
	__le32 max_res_rd_atom;
	__le32 max_qp_init_rd_atom;
	__le32 max_mw;
	__le32 max_mcast_grp;
	__le32 max_mcast_qp_attach;
	__le32 max_total_mcast_qp_attach;
	__le32 max_ah;
	__le32 max_fast_reg_page_list_len;
	__le32 max_pi_fast_reg_page_list_len;
	__le32 max_inline_data;
	__le16 max_pkeys;
	__u8 local_ca_ack_delay;
	__u8 atomic_cap;		/* enum virtio_rdma_atomic_cap */
	__u8 mac[6];			/* the paired Ethernet function */
	__u8 reserved[6];
	/* VIRTIO_RDMA_F_RINGS (zero without it): */
	__le32 max_ring_qp;		/* QPs with rings, qpn max_qp.. */
	__le32 max_ring_cq;		/* CQs with rings, cqn max_cq.. */
	__le32 num_comp_vqs;		/* completion-event virtqueues */
	__le32 max_srq;			/* shared receive queues (0: none) */
	__le32 max_srq_wr;		/* receives an SRQ holds */
	__le32 max_srq_sge;		/* SGEs of an SRQ's receive */
	__le32 max_xrcd;		/* XRC domains (0: no XRC; needs SRQs) */
	__le32 reserved1;
};

#define VIRTIO_RDMA_CONFIG_SPACE_SIZE	256

/* Limits the driver accepts from config (RFC: 1..16384 each). */
#define VIRTIO_RDMA_MAX_CQ_LIMIT	16384
#define VIRTIO_RDMA_MAX_QP_LIMIT	16384

enum virtio_rdma_atomic_cap {
	VIRTIO_RDMA_ATOMIC_NONE = 0,
	VIRTIO_RDMA_ATOMIC_HCA = 1,
	VIRTIO_RDMA_ATOMIC_GLOB = 2,
};

/*
 * Feature bits.
 *
 * VIRTIO_RDMA_F_RINGS: queues in guest memory. Besides the virtqueue QPs
 * and CQs below, the device offers max_ring_qp QPs and max_ring_cq CQs
 * whose work and completion rings (struct virtio_rdma_ring) live in guest
 * memory: the device reads work requests from the rings and writes
 * completions into them; a producer notifies only when the device asked for
 * it, and the device raises an event only for an armed CQ, on one of
 * num_comp_vqs completion-event virtqueues.
 */
#define VIRTIO_RDMA_F_RINGS		0

/*
 * Virtqueues: the control queue, then one queue per CQ, then an (SQ, RQ)
 * pair per QP, then the event queue: 2 + max_cq + 2 * max_qp in all. With
 * VIRTIO_RDMA_F_RINGS the notification queue and num_comp_vqs
 * completion-event queues follow.
 */
#define VIRTIO_RDMA_CTRL_VQ		0
#define VIRTIO_RDMA_CQ_VQ(cqn)		(1 + (cqn))
#define VIRTIO_RDMA_SQ_VQ(max_cq, qpn)	(1 + (max_cq) + 2 * (qpn))
#define VIRTIO_RDMA_RQ_VQ(max_cq, qpn)	(2 + (max_cq) + 2 * (qpn))
#define VIRTIO_RDMA_EVENT_VQ(max_cq, max_qp) (1 + (max_cq) + 2 * (max_qp))
#define VIRTIO_RDMA_NOTIFY_VQ(max_cq, max_qp) (2 + (max_cq) + 2 * (max_qp))
#define VIRTIO_RDMA_COMP_VQ(max_cq, max_qp, n) (3 + (max_cq) + 2 * (max_qp) + (n))

/*
 * Control queue. Each request is a device-readable part (header, then the
 * command's request body) followed by a device-writable part (response
 * header, then the command's response body).
 */
enum virtio_rdma_ctrl_cmd {
	VIRTIO_RDMA_CMD_QUERY_PORT = 1,
	VIRTIO_RDMA_CMD_CREATE_CQ = 2,
	VIRTIO_RDMA_CMD_DESTROY_CQ = 3,
	VIRTIO_RDMA_CMD_CREATE_PD = 4,
	VIRTIO_RDMA_CMD_DESTROY_PD = 5,
	VIRTIO_RDMA_CMD_GET_DMA_MR = 6,
	VIRTIO_RDMA_CMD_CREATE_MR = 7,
	VIRTIO_RDMA_CMD_MAP_MR_SG = 8,
	VIRTIO_RDMA_CMD_REG_USER_MR = 9,
	VIRTIO_RDMA_CMD_DEREG_MR = 10,
	VIRTIO_RDMA_CMD_CREATE_QP = 11,
	VIRTIO_RDMA_CMD_MODIFY_QP = 12,
	VIRTIO_RDMA_CMD_QUERY_QP = 13,
	VIRTIO_RDMA_CMD_DESTROY_QP = 14,
	VIRTIO_RDMA_CMD_QUERY_PKEY = 15,
	VIRTIO_RDMA_CMD_ADD_GID = 16,
	VIRTIO_RDMA_CMD_DEL_GID = 17,
	VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ = 18,
	VIRTIO_RDMA_CMD_QUERY_COUNTERS = 19,
	VIRTIO_RDMA_CMD_CREATE_CQ_RING = 20,	/* VIRTIO_RDMA_F_RINGS */
	VIRTIO_RDMA_CMD_CREATE_QP_RING = 21,	/* VIRTIO_RDMA_F_RINGS */
	VIRTIO_RDMA_CMD_RESIZE_CQ_RING = 22,	/* VIRTIO_RDMA_F_RINGS */
	VIRTIO_RDMA_CMD_ALLOC_MW = 23,
	VIRTIO_RDMA_CMD_DEALLOC_MW = 24,
	VIRTIO_RDMA_CMD_CREATE_SRQ = 25,	/* VIRTIO_RDMA_F_RINGS */
	VIRTIO_RDMA_CMD_MODIFY_SRQ = 26,	/* VIRTIO_RDMA_F_RINGS */
	VIRTIO_RDMA_CMD_QUERY_SRQ = 27,		/* VIRTIO_RDMA_F_RINGS */
	VIRTIO_RDMA_CMD_DESTROY_SRQ = 28,	/* VIRTIO_RDMA_F_RINGS */
	VIRTIO_RDMA_CMD_ALLOC_COUNTER_SET = 29,
	VIRTIO_RDMA_CMD_DEALLOC_COUNTER_SET = 30,
	VIRTIO_RDMA_CMD_BIND_COUNTER_SET = 31,
	VIRTIO_RDMA_CMD_ALLOC_XRCD = 32,	/* max_xrcd > 0 */
	VIRTIO_RDMA_CMD_DEALLOC_XRCD = 33,	/* max_xrcd > 0 */
	VIRTIO_RDMA_CMD_CREATE_XRC_SRQ = 34,	/* max_xrcd > 0 */
	VIRTIO_RDMA_CMD_CREATE_XRC_TGT_QP = 35,	/* max_xrcd > 0 */
	VIRTIO_RDMA_CMD_QUERY_DEVICE = 36,	/* rsp: struct virtio_rdma_config */
	VIRTIO_RDMA_CMD_RESET = 37,		/* no request or response body */
	VIRTIO_RDMA_CMD_MODIFY_MR = 38,		/* no response body */
};

struct virtio_rdma_ctrl_hdr {
	__le32 cmd;			/* enum virtio_rdma_ctrl_cmd */
	__le32 reserved;
};

/* Control command status, the first byte of every response. */
enum virtio_rdma_status {
	VIRTIO_RDMA_S_OK = 0,
	VIRTIO_RDMA_S_UNSUPPORTED = 1,	/* unknown command */
	VIRTIO_RDMA_S_INVALID = 2,	/* malformed request or bad argument */
	VIRTIO_RDMA_S_NO_RESOURCE = 3,	/* a device limit is reached */
	VIRTIO_RDMA_S_NOT_FOUND = 4,	/* no object has that handle */
	VIRTIO_RDMA_S_BUSY = 5,		/* the object is still in use */
	VIRTIO_RDMA_S_FAULT = 6,	/* a guest address is not mapped */
	VIRTIO_RDMA_S_BAD_STATE = 7,	/* transition not allowed */
};

struct virtio_rdma_ctrl_rsp_hdr {
	__u8 status;			/* enum virtio_rdma_status */
	__u8 reserved[7];
};

/*
 * Control command bodies. PD and MR handles (pdn, mrn) are nonzero; 0 never
 * names one. CQ and QP numbers are virtqueue slots (VIRTIO_RDMA_CQ_VQ,
 * VIRTIO_RDMA_SQ_VQ): cqn is 0..max_cq-1, qpn is 1..max_qp-1, where qpn 1
 * is only ever the GSI QP of port 1 and qpn 0 (IB's SMI QP, which RoCE
 * does not have) is never used. Port numbers start at 1. A command without a request body
 * (CREATE_PD) reads only the header; one without a response body
 * (DESTROY_PD, ADD_GID, DEL_GID) writes only the response header.
 */

/* VIRTIO_RDMA_CMD_QUERY_PORT request. */
struct virtio_rdma_cmd_query_port {
	__u8 port;
	__u8 reserved[7];
};

/*
 * VIRTIO_RDMA_CMD_QUERY_PORT response: the RFC's rsp_query_port with
 * explicit padding. Values use the enums of <rdma/ib_verbs.h>.
 */
struct virtio_rdma_rsp_query_port {
	__u8 state;			/* enum ib_port_state */
	__u8 max_mtu;			/* enum ib_mtu */
	__u8 active_mtu;		/* enum ib_mtu */
	__u8 phys_state;		/* enum ib_port_phys_state */
	__le32 phys_mtu;		/* bytes */
	__le32 gid_tbl_len;
	__le32 port_cap_flags;		/* enum ib_port_capability_mask_bits */
	__le32 max_msg_sz;
	__le32 bad_pkey_cntr;
	__le32 qkey_viol_cntr;
	__le16 pkey_tbl_len;
	__u8 active_width;		/* enum ib_port_width */
	__u8 reserved0;
	__le16 active_speed;		/* enum ib_port_speed */
	__u8 reserved[6];
};

/* VIRTIO_RDMA_CMD_CREATE_PD response (no request body). */
struct virtio_rdma_rsp_create_pd {
	__le32 pdn;
	__le32 reserved;
};

/* VIRTIO_RDMA_CMD_DESTROY_PD request (no response body). */
struct virtio_rdma_cmd_destroy_pd {
	__le32 pdn;
	__le32 reserved;
};

/* VIRTIO_RDMA_CMD_QUERY_PKEY request. */
struct virtio_rdma_cmd_query_pkey {
	__le32 port;
	__le16 index;
	__le16 reserved;
};

/* VIRTIO_RDMA_CMD_QUERY_PKEY response. */
struct virtio_rdma_rsp_query_pkey {
	__le16 pkey;
	__le16 reserved[3];
};

/* VIRTIO_RDMA_CMD_ADD_GID request (no response body). */
struct virtio_rdma_cmd_add_gid {
	__u8 gid[16];			/* network byte order */
	__le32 gid_type;		/* enum ib_gid_type */
	__le16 index;			/* < gid_tbl_len of the port */
	__le16 reserved0;
	__le32 port_num;
	__le32 reserved1;
};

/* VIRTIO_RDMA_CMD_DEL_GID request (no response body). */
struct virtio_rdma_cmd_del_gid {
	__le16 index;
	__le16 reserved;
	__le32 port;
};

/*
 * Verbs values carried below use the kernel's enums: enum ib_qp_type,
 * ib_qp_state, ib_qp_attr_mask, ib_access_flags, ib_wr_opcode,
 * ib_send_flags, ib_wc_status, ib_wc_opcode, ib_wc_flags and ib_mtu of
 * <rdma/ib_verbs.h>, which are stable (shared with userspace verbs).
 */

/* Memory regions map guest memory in pages of this size. */
#define VIRTIO_RDMA_PAGE_SHIFT		12
#define VIRTIO_RDMA_PAGE_SIZE		(1 << VIRTIO_RDMA_PAGE_SHIFT)

/*
 * MR keys: lkey == rkey == (mrn << 8) | key, the low byte being the
 * consumer-owned key that a REG_MR work request may change. The device
 * returns the initial key with the key byte 0.
 */
#define VIRTIO_RDMA_KEY_MRN(key)	((key) >> 8)

/* VIRTIO_RDMA_CMD_CREATE_CQ request. */
struct virtio_rdma_cmd_create_cq {
	__le32 cqe;			/* 1..max_cqe */
	__le32 reserved;
};

/* VIRTIO_RDMA_CMD_CREATE_CQ response. */
struct virtio_rdma_rsp_create_cq {
	__le32 cqn;			/* virtqueue VIRTIO_RDMA_CQ_VQ(cqn) */
	__le32 reserved;
};

/* VIRTIO_RDMA_CMD_DESTROY_CQ request (no response body). */
struct virtio_rdma_cmd_destroy_cq {
	__le32 cqn;
	__le32 reserved;
};

/* VIRTIO_RDMA_CMD_GET_DMA_MR request: an MR over all of guest memory. */
struct virtio_rdma_cmd_get_dma_mr {
	__le32 pdn;
	__le32 access_flags;		/* enum ib_access_flags */
};

/*
 * Response of GET_DMA_MR, CREATE_MR and REG_USER_MR.
 */
struct virtio_rdma_rsp_create_mr {
	__le32 mrn;
	__le32 lkey;
	__le32 rkey;
	__le32 reserved;
};

/*
 * VIRTIO_RDMA_CMD_CREATE_MR request: a fast-registration MR
 * (IB_MR_TYPE_MEM_REG), invalid until a REG_MR work request maps it.
 */
struct virtio_rdma_cmd_create_mr {
	__le32 pdn;
	__le32 access_flags;		/* checked, else ignored: REG_MR sets it */
	__le32 max_num_sg;		/* 1..max_fast_reg_page_list_len */
	__le32 reserved;
};

/*
 * VIRTIO_RDMA_CMD_MAP_MR_SG request: stage a page table in a fast-reg MR
 * for the next REG_MR work request that carries no page table of its own.
 * pages is the guest-physical address of npages __le64 page addresses,
 * each VIRTIO_RDMA_PAGE_SIZE aligned; the MR's first byte is at offset
 * (iova % VIRTIO_RDMA_PAGE_SIZE) of the first page.
 */
struct virtio_rdma_cmd_map_mr_sg {
	__le32 mrn;
	__le32 npages;			/* 1..max_num_sg of the MR */
	__le64 iova;
	__le64 length;
	__le64 pages;			/* guest-physical */
};

/* VIRTIO_RDMA_CMD_MAP_MR_SG response. */
struct virtio_rdma_rsp_map_mr_sg {
	__le32 npages;			/* pages mapped */
	__le32 reserved;
};

/*
 * VIRTIO_RDMA_CMD_REG_USER_MR request: an MR over pinned pages. The page
 * table has exactly the pages [iova, iova + length) covers, the first byte
 * being at offset (iova % VIRTIO_RDMA_PAGE_SIZE) of the first page.
 */
struct virtio_rdma_cmd_reg_user_mr {
	__le32 pdn;
	__le32 access_flags;		/* enum ib_access_flags */
	__le64 length;			/* 1..max_mr_size */
	__le64 iova;			/* the address work requests use */
	__le64 pages;			/* guest-physical table of __le64 */
	__le32 npages;
	__le32 reserved;
};

/* VIRTIO_RDMA_CMD_DEREG_MR request (no response body). */
struct virtio_rdma_cmd_dereg_mr {
	__le32 mrn;
	__le32 reserved;
};

/*
 * VIRTIO_RDMA_CMD_MODIFY_MR request (no response body): user MR mrn moves
 * to PD pdn with rights access_flags, in place (its keys stay).
 */
struct virtio_rdma_cmd_modify_mr {
	__le32 mrn;
	__le32 pdn;
	__le32 access_flags;
	__le32 reserved;
};

/*
 * VIRTIO_RDMA_CMD_ALLOC_MW request: a memory window of PD pdn, unbound.
 * Its handle comes from the MR handle space (max_mr covers both).
 */
struct virtio_rdma_cmd_alloc_mw {
	__le32 pdn;
	__u8 mw_type;			/* IB_MW_TYPE_1 or IB_MW_TYPE_2 */
	__u8 reserved[3];
};

/* VIRTIO_RDMA_CMD_ALLOC_MW response. */
struct virtio_rdma_rsp_alloc_mw {
	__le32 mwn;
	__le32 rkey;			/* (mwn << 8) | key byte */
};

/* VIRTIO_RDMA_CMD_DEALLOC_MW request (no response body). */
struct virtio_rdma_cmd_dealloc_mw {
	__le32 mwn;
	__le32 reserved;
};

/* VIRTIO_RDMA_CMD_CREATE_QP request. */
struct virtio_rdma_cmd_create_qp {
	__le32 pdn;
	__u8 qp_type;			/* IB_QPT_GSI, IB_QPT_RC, IB_QPT_UC or IB_QPT_UD */
	__u8 sq_sig_all;		/* 1: every SQ element is signaled */
	__le16 reserved0;
	__le32 max_send_wr;
	__le32 max_send_sge;
	__le32 send_cqn;
	__le32 max_recv_wr;
	__le32 max_recv_sge;
	__le32 recv_cqn;
	__le32 max_inline_data;
	__le32 srqn;			/* 0, or the SRQ its receives come from */
};

/* VIRTIO_RDMA_CMD_CREATE_QP response. */
struct virtio_rdma_rsp_create_qp {
	__le32 qpn;			/* 1 for a GSI QP */
	__le32 reserved;
};

/*
 * Address vector (RoCE: always global). Used by MODIFY_QP for the path of
 * an RC QP and by every UD/GSI send element.
 */
struct virtio_rdma_av {
	__u8 dgid[16];			/* network byte order */
	__le32 flow_label;
	__u8 sgid_index;
	__u8 hop_limit;
	__u8 traffic_class;
	__u8 sl;
	__u8 dmac[6];
	__u8 static_rate;
	__u8 port_num;			/* 1 */
};

/* QP capabilities, as reported by QUERY_QP. */
struct virtio_rdma_qp_cap {
	__le32 max_send_wr;
	__le32 max_recv_wr;
	__le32 max_send_sge;
	__le32 max_recv_sge;
	__le32 max_inline_data;
	__le32 reserved;
};

/* QP attributes: the RFC's virtio_rdma_qp_attr without the alternate path. */
struct virtio_rdma_qp_attr {
	__u8 qp_state;			/* enum ib_qp_state */
	__u8 cur_qp_state;
	__u8 path_mtu;			/* enum ib_mtu */
	__u8 path_mig_state;
	__le32 qkey;
	__le32 rq_psn;
	__le32 sq_psn;
	__le32 dest_qp_num;
	__le32 qp_access_flags;		/* enum ib_access_flags */
	__le16 pkey_index;
	__u8 en_sqd_async_notify;
	__u8 sq_draining;
	__u8 max_rd_atomic;
	__u8 max_dest_rd_atomic;
	__u8 min_rnr_timer;
	__u8 port_num;
	__u8 timeout;
	__u8 retry_cnt;
	__u8 rnr_retry;
	__u8 reserved0;
	__le32 reserved1;
	struct virtio_rdma_av ah_attr;
	struct virtio_rdma_qp_cap cap;
};

/* VIRTIO_RDMA_CMD_MODIFY_QP request (no response body). */
struct virtio_rdma_cmd_modify_qp {
	__le32 qpn;
	__le32 attr_mask;		/* enum ib_qp_attr_mask */
	struct virtio_rdma_qp_attr attr;
};

/* VIRTIO_RDMA_CMD_QUERY_QP request. */
struct virtio_rdma_cmd_query_qp {
	__le32 qpn;
	__le32 attr_mask;		/* informative: all attributes are returned */
};

/* VIRTIO_RDMA_CMD_QUERY_QP response. */
struct virtio_rdma_rsp_query_qp {
	struct virtio_rdma_qp_attr attr;
};

/* VIRTIO_RDMA_CMD_DESTROY_QP request (no response body). */
struct virtio_rdma_cmd_destroy_qp {
	__le32 qpn;
	__le32 reserved;
};

/* VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ flags. */
#define VIRTIO_RDMA_NOTIFY_SOLICITED		(1 << 0)
#define VIRTIO_RDMA_NOTIFY_NEXT_COMPLETION	(1 << 1)

/* VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ request (no response body). */
struct virtio_rdma_cmd_req_notify_cq {
	__le32 cqn;
	__le32 flags;			/* VIRTIO_RDMA_NOTIFY_* */
};

/*
 * Port counters (VIRTIO_RDMA_CMD_QUERY_COUNTERS), the index of each in the
 * response. A message counts its packets as RoCEv2 would carry it (one per
 * path MTU of payload, at least one; an RDMA READ's payload with its
 * request): sent where its request leaves, received where a responder takes
 * it. Completion errors count the completions of each status the device
 * wrote to the port's CQs. Counters only grow; a device reset does not
 * clear them.
 */
enum virtio_rdma_counter {
	VIRTIO_RDMA_CNT_SENT_PKTS = 0,
	VIRTIO_RDMA_CNT_SENT_BYTES = 1,
	VIRTIO_RDMA_CNT_RCVD_PKTS = 2,
	VIRTIO_RDMA_CNT_RCVD_BYTES = 3,
	VIRTIO_RDMA_CNT_RNR_NAKS_SENT = 4,	/* no receive was posted */
	VIRTIO_RDMA_CNT_RNR_NAKS_RCVD = 5,	/* and the request waits to retry */
	VIRTIO_RDMA_CNT_DROPPED_NOT_PEER = 6,	/* RC/UC: not the connected peer */
	VIRTIO_RDMA_CNT_DROPPED_BAD_PSN = 7,	/* RC/UC: not the expected PSN */
	VIRTIO_RDMA_CNT_DROPPED_BAD_QKEY = 8,	/* UD/GSI: wrong Q_Key */
	VIRTIO_RDMA_CNT_LOC_LEN_ERR = 9,
	VIRTIO_RDMA_CNT_LOC_QP_OP_ERR = 10,
	VIRTIO_RDMA_CNT_LOC_PROT_ERR = 11,
	VIRTIO_RDMA_CNT_WR_FLUSH_ERR = 12,
	VIRTIO_RDMA_CNT_REM_INV_REQ_ERR = 13,
	VIRTIO_RDMA_CNT_REM_ACCESS_ERR = 14,
	VIRTIO_RDMA_CNT_REM_OP_ERR = 15,
	VIRTIO_RDMA_CNT_RETRY_EXC_ERR = 16,
	VIRTIO_RDMA_CNT_RNR_RETRY_EXC_ERR = 17,
	VIRTIO_RDMA_CNT_OTHER_ERR = 18,		/* any other error status */
	VIRTIO_RDMA_NUM_COUNTERS = 19,
};

/*
 * VIRTIO_RDMA_CMD_QUERY_COUNTERS request: the counters of counter set @set
 * (VIRTIO_RDMA_CMD_ALLOC_COUNTER_SET), or with @set 0 the port's own: what
 * no QP bound to a set counted.
 */
struct virtio_rdma_cmd_query_counters {
	__le32 port;
	__le32 set;
};

/* VIRTIO_RDMA_CMD_QUERY_COUNTERS response. */
struct virtio_rdma_rsp_query_counters {
	__le64 value[VIRTIO_RDMA_NUM_COUNTERS];	/* enum virtio_rdma_counter */
};

/*
 * Counter sets: a QP bound to one counts what it does there instead of in
 * the port's own counters. VIRTIO_RDMA_CMD_ALLOC_COUNTER_SET request: a new
 * set, zeroed, of port @port.
 */
struct virtio_rdma_cmd_alloc_counter_set {
	__le32 port;
	__le32 reserved;
};

/* VIRTIO_RDMA_CMD_ALLOC_COUNTER_SET response. */
struct virtio_rdma_rsp_alloc_counter_set {
	__le32 set;			/* 1 .. */
	__le32 reserved;
};

/* VIRTIO_RDMA_CMD_DEALLOC_COUNTER_SET request (no QP may be bound to it). */
struct virtio_rdma_cmd_dealloc_counter_set {
	__le32 set;
	__le32 reserved;
};

/*
 * VIRTIO_RDMA_CMD_BIND_COUNTER_SET request: QP @qpn counts in set @set from
 * now on (0: in the port's own counters again).
 */
struct virtio_rdma_cmd_bind_counter_set {
	__le32 qpn;
	__le32 set;
};

/*
 * Send queue element: one device-readable buffer (descriptor chain) of
 * struct virtio_rdma_sq_req, then num_sge struct virtio_rdma_sge, then
 * inline_len bytes of inline data (IB_SEND_INLINE, num_sge 0).
 */
struct virtio_rdma_sq_rdma {
	__le64 remote_addr;
	__le32 rkey;
	__le32 reserved;
};

struct virtio_rdma_sq_atomic {
	__le64 remote_addr;		/* 8-byte aligned */
	__le64 compare_add;
	__le64 swap;
	__le32 rkey;
	__le32 reserved;
};

/*
 * FLUSH (IBA 1.5): flush_type is enum ib_uverbs_flush_type (placement:
 * global, persistent), flush_level enum ib_uverbs_flush_level (range, whole
 * MR).
 */
struct virtio_rdma_sq_flush {
	__le64 remote_addr;
	__le64 length;
	__le32 rkey;
	__u8 flush_type;
	__u8 flush_level;
	__le16 reserved;
};

struct virtio_rdma_sq_ud {
	__le32 remote_qpn;
	__le32 remote_qkey;
	struct virtio_rdma_av av;
};

/*
 * IB_WR_REG_MR: map fast-reg MR mrn with key byte (key & 0xff) and access.
 * pages/npages: a page table as in MAP_MR_SG; npages 0 uses the table
 * staged by MAP_MR_SG.
 */
struct virtio_rdma_sq_reg {
	__le32 mrn;
	__le32 key;
	__le32 access;			/* enum ib_access_flags */
	__le32 npages;
	__le64 iova;
	__le64 length;
	__le64 pages;			/* guest-physical */
};

/*
 * IB_WR_BIND_MW: bind the window whose rkey is mw_rkey to
 * [addr, addr + length) of the MR whose lkey is mr_lkey, with rights
 * access (remote ones, and IB_ZERO_BASED); the window's rkey becomes
 * new_rkey (same handle, the consumer's key byte). length 0 unbinds a
 * type 1 window.
 */
struct virtio_rdma_sq_bind {
	__le64 addr;
	__le64 length;
	__le32 mw_rkey;
	__le32 new_rkey;
	__le32 mr_lkey;
	__le32 access;			/* enum ib_access_flags */
	__le64 reserved;
};

/*
 * Any request on an XRC_INI QP: the SRQ (of the remote XRC domain) the
 * message is for, after the operation's own fields (rdma and atomic end
 * before byte 32; sends have none).
 */
struct virtio_rdma_sq_xrc {
	__u8 op[32];			/* rdma or atomic, as for RC */
	__le32 remote_srqn;
	__le32 reserved;
};

union virtio_rdma_sq_wr {
	struct virtio_rdma_sq_rdma rdma;	/* RDMA_WRITE*, RDMA_READ */
	struct virtio_rdma_sq_atomic atomic;	/* ATOMIC_*, ATOMIC_WRITE */
	struct virtio_rdma_sq_flush flush;	/* FLUSH */
	struct virtio_rdma_sq_ud ud;		/* any send on a UD/GSI QP */
	struct virtio_rdma_sq_reg reg;		/* REG_MR */
	struct virtio_rdma_sq_bind bind;	/* BIND_MW */
	struct virtio_rdma_sq_xrc xrc;		/* remote_srqn, XRC_INI QPs */
	__u8 raw[40];
};

struct virtio_rdma_sq_req {
	__le64 wr_id;
	__u8 opcode;			/* enum ib_wr_opcode */
	__u8 reserved0;
	__le16 num_sge;
	__le32 send_flags;		/* enum ib_send_flags */
	__le32 ex;			/* imm_data (big endian) or invalidate_rkey */
	__le32 inline_len;
	union virtio_rdma_sq_wr wr;
};

/* Scatter/gather element of SQ and RQ elements. */
struct virtio_rdma_sge {
	__le64 addr;			/* IOVA of the MR (GPA for a DMA MR) */
	__le32 length;
	__le32 lkey;
};

/*
 * Receive queue element: one device-readable buffer of struct
 * virtio_rdma_rq_req then num_sge struct virtio_rdma_sge.
 */
struct virtio_rdma_rq_req {
	__le64 wr_id;
	__le32 num_sge;
	__le32 reserved;
};

/*
 * Completion queue element: the driver fills each CQ's virtqueue with
 * device-writable buffers of at least this size; the device writes one
 * completion into each and returns it in the used ring with its length.
 */
struct virtio_rdma_cq_req {
	__le64 wr_id;
	__u8 status;			/* enum ib_wc_status */
	__u8 opcode;			/* enum ib_wc_opcode */
	__u8 sl;
	__u8 port_num;
	__le32 vendor_err;
	__le32 byte_len;
	__le32 ex;			/* imm_data (big endian) or invalidated rkey */
	__le32 qp_num;
	__le32 src_qp;
	__le32 wc_flags;		/* enum ib_wc_flags */
	__le16 pkey_index;
	__u8 dlid_path_bits;
	__u8 network_hdr_type;		/* enum rdma_network_type */
	__u8 smac[6];
	__le16 vlan_id;
};

/*
 * Queues in guest memory (VIRTIO_RDMA_F_RINGS).
 *
 * A ring is guest memory described by a page table: pages is the
 * guest-physical address of npages __le64 page addresses, each
 * VIRTIO_RDMA_PAGE_SIZE aligned, and the ring's bytes are those pages in
 * order, from the first byte of the first. It starts with a record (struct
 * virtio_rdma_ring_record); slot i (0 <= i < depth, depth a power of two) is
 * at VIRTIO_RDMA_RING_SLOTS + i * stride. npages covers exactly the record
 * and the slots. The device uses a ring from the command that creates its
 * queue until the command that destroys it (or a device reset) completes.
 *
 * Work rings (SQ, RQ): slot i holds one element exactly as a virtqueue QP's
 * element: struct virtio_rdma_sq_req then its SGEs or inline data (SQ),
 * struct virtio_rdma_rq_req then its SGEs (RQ). The driver writes elements
 * into slots producer, producer + 1, ... (mod depth), then stores the new
 * producer (a free-running count) with release order. The device reads each
 * element, then stores its consumer: a slot may be rewritten once the
 * consumer has passed it. A producer more than depth ahead of the consumer,
 * or an element the device refuses, completes in error (IB_WC_LOC_QP_OP_ERR
 * for the SQ, IB_WC_LOC_LEN_ERR for the RQ) and moves the QP to error; only
 * that QP.
 *
 * Doorbells: the device polls a work ring while it has work and for a while
 * after. Before it stops, it sets VIRTIO_RDMA_RING_F_NOTIFY in flags, then
 * (after a full barrier) reads producer once more. After storing producer,
 * the driver issues a full barrier and reads flags: if NOTIFY is set it
 * notifies the notification virtqueue (a kick: no buffer is ever added to
 * it). On a kick the device clears NOTIFY of every work ring that has work.
 *
 * Completion rings (CQ): slot i holds struct virtio_rdma_ring_cqe. The
 * device writes completion number n into slot n % depth, the completion
 * first and seq = n + 1 last (release order): the driver polls a slot until
 * seq says it holds the completion it expects. The driver stores in consumer
 * the count of completions it took; a completion that finds the ring full
 * (n - consumer >= depth) is lost: the device reports
 * VIRTIO_RDMA_EVENT_CQ_ERR and moves the QP to error.
 *
 * Arming: the driver stores VIRTIO_RDMA_CQ_ARM_NEXT or
 * VIRTIO_RDMA_CQ_ARM_SOLICITED in arm, then polls the ring once more. After
 * writing a completion, the device (after a full barrier) reads arm; if it
 * is NEXT, or SOLICITED and the completion is solicited or in error, it
 * replaces that value with 0 by compare-and-exchange and puts struct
 * virtio_rdma_comp_event naming the CQ on the CQ's completion-event
 * virtqueue. With no buffer there, the event waits
 * in the device until the driver adds one (at most one per CQ waits).
 */
#define VIRTIO_RDMA_RING_SLOTS		64

struct virtio_rdma_ring {
	__le64 pages;			/* guest-physical table of __le64 */
	__le32 npages;
	__le32 depth;			/* slots: a power of two */
	__le32 stride;			/* bytes a slot: 8-aligned */
	__le32 reserved;
};

#define VIRTIO_RDMA_RING_F_NOTIFY	(1 << 0)

enum virtio_rdma_cq_arm {
	VIRTIO_RDMA_CQ_ARM_NONE = 0,
	VIRTIO_RDMA_CQ_ARM_NEXT = 1,
	VIRTIO_RDMA_CQ_ARM_SOLICITED = 2,
};

/* The first bytes of a ring, each field naturally aligned (atomic access). */
struct virtio_rdma_ring_record {
	__le32 producer;		/* work: the driver's; CQ: unused */
	__le32 consumer;		/* work: the device's; CQ: the driver's */
	__le32 flags;			/* work: VIRTIO_RDMA_RING_F_*, the device's */
	__le32 arm;			/* CQ: enum virtio_rdma_cq_arm */
	__le32 reserved[12];
};

/* A slot of a completion ring: the completion, then its sequence number. */
struct virtio_rdma_ring_cqe {
	struct virtio_rdma_cq_req cqe;
	__le32 seq;
	__le32 reserved[3];
};

/*
 * VIRTIO_RDMA_CMD_CREATE_CQ_RING request: a CQ of ring.depth completions
 * (1..max_cqe rounded up to a power of two), stride sizeof(struct
 * virtio_rdma_ring_cqe), whose events go to completion-event virtqueue
 * comp_vq (< num_comp_vqs). Response: struct virtio_rdma_rsp_create_cq, cqn
 * from max_cq up. DESTROY_CQ destroys it.
 */
struct virtio_rdma_cmd_create_cq_ring {
	struct virtio_rdma_ring ring;
	__le32 comp_vq;
	__le32 reserved;
};

/*
 * VIRTIO_RDMA_CMD_RESIZE_CQ_RING request: ring CQ cqn's completions go to
 * ring from now on (same stride, depth as for CREATE_CQ_RING). Completion
 * numbering goes on: completion n goes to slot n % ring.depth of the new
 * ring, and the response says how many completions the old ring received
 * (produced). The new ring's consumer is the driver's (it stores its count
 * there before the command); the device fails the command with INVALID if
 * the completions not consumed (produced - consumer) would not fit. An
 * arming stored in the old ring carries over to the new one. Once the
 * command succeeded the device no longer uses the old ring; a failed one
 * leaves the CQ on its old ring.
 */
struct virtio_rdma_cmd_resize_cq_ring {
	struct virtio_rdma_ring ring;
	__le32 cqn;
	__le32 reserved;
};

struct virtio_rdma_rsp_resize_cq_ring {
	__le32 produced;
	__le32 reserved;
};

/*
 * VIRTIO_RDMA_CMD_CREATE_QP_RING request: a QP as CREATE_QP makes one, whose
 * SQ and RQ are rings. Both CQs must be ring CQs; each ring's depth is at
 * least its max_*_wr and its stride holds the largest element the QP's
 * limits allow. VIRTIO_RDMA_QP_RING_F_USER: the rings belong to a process,
 * which may post only what a process may (sends, RDMA READ/WRITE and
 * atomics; no REG_MR or LOCAL_INV, whose elements carry guest-physical
 * addresses or act on kernel MRs; no controlled Q_Key): the device refuses
 * the rest. Response: struct virtio_rdma_rsp_create_qp, qpn from max_qp up.
 * MODIFY_QP, QUERY_QP and DESTROY_QP act on it as on any QP.
 */
#define VIRTIO_RDMA_QP_RING_F_USER	(1 << 0)

struct virtio_rdma_cmd_create_qp_ring {
	struct virtio_rdma_cmd_create_qp qp;
	struct virtio_rdma_ring sq;
	struct virtio_rdma_ring rq;
	__le32 flags;			/* VIRTIO_RDMA_QP_RING_F_* */
	__le32 reserved;
};

/* An element of a completion-event virtqueue: an armed CQ has completions. */
struct virtio_rdma_comp_event {
	__le32 cqn;
	__le32 reserved;
};

/*
 * Asynchronous events: what the device cannot report in a completion. The
 * driver keeps the event queue filled with device-writable buffers of at
 * least this size; the device writes one event into the next buffer and
 * returns it in the used ring with its length. With no buffer available the
 * event is lost.
 */
enum virtio_rdma_event_type {
	/* element is a cqn: a completion was lost (CQ overrun) */
	VIRTIO_RDMA_EVENT_CQ_ERR = 0,		/* IB_EVENT_CQ_ERR */
	/* element is a qpn: the QP moved to ERR without a completion saying why */
	VIRTIO_RDMA_EVENT_QP_FATAL = 1,		/* IB_EVENT_QP_FATAL */
	VIRTIO_RDMA_EVENT_QP_REQ_ERR = 2,	/* IB_EVENT_QP_REQ_ERR */
	VIRTIO_RDMA_EVENT_QP_ACCESS_ERR = 3,	/* IB_EVENT_QP_ACCESS_ERR */
	/* element is an srqn: fewer receives than its armed limit are left */
	VIRTIO_RDMA_EVENT_SRQ_LIMIT_REACHED = 15, /* IB_EVENT_SRQ_LIMIT_REACHED */
	/* element is a qpn of a QP with an SRQ: it entered ERR and takes no more */
	VIRTIO_RDMA_EVENT_QP_LAST_WQE_REACHED = 16, /* IB_EVENT_QP_LAST_WQE_REACHED */
};

struct virtio_rdma_event {
	__le32 event_type;		/* enum virtio_rdma_event_type */
	__le32 element;			/* cqn, qpn or srqn, as the type says */
};

/*
 * Shared receive queues (VIRTIO_RDMA_F_RINGS, max_srq > 0). An SRQ is a
 * work ring in guest memory (as an RQ ring: elements in the receive queue
 * format, stride and depth as for CREATE_QP_RING) whose receives serve
 * every QP created with its srqn. Such a QP has no RQ of its own
 * (max_recv_wr and max_recv_sge 0; CREATE_QP_RING's rq all zero); its
 * receive completions go to its own recv_cqn and name it. A receive's
 * lkeys are checked against the SRQ's PD.
 *
 * VIRTIO_RDMA_CMD_CREATE_SRQ request: max_wr (1..max_srq_wr, at most
 * ring.depth), max_sge (0..max_srq_sge), srq_limit (0: not armed, else below
 * max_wr). VIRTIO_RDMA_SRQ_F_USER: the ring belongs to a process (as
 * VIRTIO_RDMA_QP_RING_F_USER). Response: srqn, 1..max_srq.
 */
#define VIRTIO_RDMA_SRQ_F_USER		(1 << 0)

struct virtio_rdma_cmd_create_srq {
	struct virtio_rdma_ring ring;
	__le32 pdn;
	__le32 max_wr;
	__le32 max_sge;
	__le32 srq_limit;
	__le32 flags;			/* VIRTIO_RDMA_SRQ_F_* */
	__le32 reserved;
};

struct virtio_rdma_rsp_create_srq {
	__le32 srqn;
	__le32 reserved;
};

/*
 * VIRTIO_RDMA_CMD_MODIFY_SRQ request: arms the limit (srq_limit > 0 and
 * below max_wr) or disarms it (0). When a receive taken leaves fewer than
 * srq_limit receives in the SRQ, the device reports
 * VIRTIO_RDMA_EVENT_SRQ_LIMIT_REACHED once and disarms. The SRQ's size
 * cannot change (the device does not offer IB_DEVICE_SRQ_RESIZE).
 */
struct virtio_rdma_cmd_modify_srq {
	__le32 srqn;
	__le32 srq_limit;
};

/* VIRTIO_RDMA_CMD_QUERY_SRQ request: srqn. */
struct virtio_rdma_cmd_query_srq {
	__le32 srqn;
	__le32 reserved;
};

struct virtio_rdma_rsp_query_srq {
	__le32 max_wr;
	__le32 max_sge;
	__le32 srq_limit;		/* 0 once the limit event was reported */
	__le32 reserved;
};

/*
 * VIRTIO_RDMA_CMD_DESTROY_SRQ request: srqn; VIRTIO_RDMA_S_BUSY while a QP
 * still takes receives from it. Receives left in it end without completions.
 */
struct virtio_rdma_cmd_destroy_srq {
	__le32 srqn;
	__le32 reserved;
};

/*
 * XRC (eXtended Reliable Connected transport). An XRC domain groups XRC
 * SRQs and XRC target QPs: an XRC_INI QP (a send-only RC QP, created with
 * CREATE_QP_RING) names in each request the SRQ of the remote domain the
 * message is for (struct virtio_rdma_sq_xrc); the connected XRC_TGT QP
 * (no queues, no CQs, no PD) takes receives from that SRQ if it is of the
 * target's domain, and checks rkeys against that SRQ's PD.
 *
 * VIRTIO_RDMA_CMD_ALLOC_XRCD: no request body.
 */
struct virtio_rdma_rsp_alloc_xrcd {
	__le32 xrcdn;			/* 1 .. */
	__le32 reserved;
};

/*
 * VIRTIO_RDMA_CMD_DEALLOC_XRCD request (no XRC SRQ or XRC_TGT QP may be of
 * the domain).
 */
struct virtio_rdma_cmd_dealloc_xrcd {
	__le32 xrcdn;
	__le32 reserved;
};

/*
 * VIRTIO_RDMA_CMD_CREATE_XRC_SRQ request: an SRQ as CREATE_SRQ makes, of
 * domain @xrcdn, whose receive completions go to ring CQ @cqn (naming the
 * XRC_TGT QP that took the receive). Answered as CREATE_SRQ.
 */
struct virtio_rdma_cmd_create_xrc_srq {
	struct virtio_rdma_cmd_create_srq srq;
	__le32 xrcdn;
	__le32 cqn;
};

/*
 * VIRTIO_RDMA_CMD_CREATE_XRC_TGT_QP request: an XRC_TGT QP of domain
 * @xrcdn, in RESET, numbered as a ring QP. Answered as CREATE_QP.
 */
struct virtio_rdma_cmd_create_xrc_tgt_qp {
	__le32 xrcdn;
	__le32 reserved;
};

#endif /* _UAPI_LINUX_VIRTIO_RDMA_H */
