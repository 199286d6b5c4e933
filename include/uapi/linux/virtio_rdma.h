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
 * reserved and read as zero.
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
 * Virtqueues: the control queue, then one queue per CQ, then an (SQ, RQ)
 * pair per QP.
 */
#define VIRTIO_RDMA_CTRL_VQ		0
#define VIRTIO_RDMA_CQ_VQ(cqn)		(1 + (cqn))
#define VIRTIO_RDMA_SQ_VQ(max_cq, qpn)	(1 + (max_cq) + 2 * (qpn))
#define VIRTIO_RDMA_RQ_VQ(max_cq, qpn)	(2 + (max_cq) + 2 * (qpn))

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
 * Control command bodies. Handles (pdn, ...) are nonzero; 0 never names an
 * object. Port numbers start at 1. A command without a request body
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

#endif /* _UAPI_LINUX_VIRTIO_RDMA_H */
