// SPDX-License-Identifier: GPL-2.0
//! Rust mirror of `include/uapi/linux/virtio_rdma.h`.
//!
//! Every structure is `#[repr(C)]` built from byte-aligned little-endian
//! fields (zerocopy's `little_endian` types), so it has no implicit padding
//! and converts to and from guest bytes without `unsafe`. `build.rs` checks
//! the size and the offset and size of every member, and the value of every
//! constant, against the C header; a mismatch fails the build.

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Size of a member, for the generated layout checks.
pub const fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
    core::mem::size_of::<F>()
}

/// Config space size (bytes past [`VirtioRdmaConfig`] read as zero).
pub const VIRTIO_RDMA_CONFIG_SPACE_SIZE: usize = 256;
/// Largest `max_cq` the driver accepts.
pub const VIRTIO_RDMA_MAX_CQ_LIMIT: u32 = 16384;
/// Largest `max_qp` the driver accepts.
pub const VIRTIO_RDMA_MAX_QP_LIMIT: u32 = 16384;

/// `enum virtio_rdma_atomic_cap`.
pub const VIRTIO_RDMA_ATOMIC_NONE: u8 = 0;
/// Atomicity between QPs of this device.
pub const VIRTIO_RDMA_ATOMIC_HCA: u8 = 1;
/// Atomicity with every other agent.
pub const VIRTIO_RDMA_ATOMIC_GLOB: u8 = 2;

/// Index of the control virtqueue.
pub const VIRTIO_RDMA_CTRL_VQ: u16 = 0;

/// `VIRTIO_RDMA_CQ_VQ`: the virtqueue of CQ `cqn`.
pub const fn virtio_rdma_cq_vq(cqn: u32) -> u32 {
    1 + cqn
}

/// `VIRTIO_RDMA_SQ_VQ`: the send queue of QP `qpn`.
pub const fn virtio_rdma_sq_vq(max_cq: u32, qpn: u32) -> u32 {
    1 + max_cq + 2 * qpn
}

/// `VIRTIO_RDMA_RQ_VQ`: the receive queue of QP `qpn`.
pub const fn virtio_rdma_rq_vq(max_cq: u32, qpn: u32) -> u32 {
    2 + max_cq + 2 * qpn
}

/// `VIRTIO_RDMA_EVENT_VQ`: the event queue, the last one without
/// [`VIRTIO_RDMA_F_RINGS`].
pub const fn virtio_rdma_event_vq(max_cq: u32, max_qp: u32) -> u32 {
    1 + max_cq + 2 * max_qp
}

/// `VIRTIO_RDMA_NOTIFY_VQ`: the notification queue (rings).
pub const fn virtio_rdma_notify_vq(max_cq: u32, max_qp: u32) -> u32 {
    2 + max_cq + 2 * max_qp
}

/// `VIRTIO_RDMA_COMP_VQ`: completion-event queue `n` (rings).
pub const fn virtio_rdma_comp_vq(max_cq: u32, max_qp: u32, n: u32) -> u32 {
    3 + max_cq + 2 * max_qp + n
}

/// Feature bit: queues in guest memory.
pub const VIRTIO_RDMA_F_RINGS: u32 = 0;
/// virtio-net feature bit (device ID 1, not 42): the net device also
/// carries the RoCE queues of this protocol, in the [`VIRTIO_RDMA_F_RINGS`]
/// mode, from the queue after the net control queue on. Not in
/// `virtio_rdma.h` (it is a net bit); see
/// `Documentation/infiniband/virtio_rdma_net.rst` for why 58.
pub const VIRTIO_NET_F_ROCE: u32 = 58;
/// Where a ring's slots start, after its record.
pub const VIRTIO_RDMA_RING_SLOTS: u32 = 64;
/// Record flag: the device asks to be notified of new work.
pub const VIRTIO_RDMA_RING_F_NOTIFY: u32 = 1;
/// `enum virtio_rdma_cq_arm`: not armed.
pub const VIRTIO_RDMA_CQ_ARM_NONE: u32 = 0;
/// Armed for the next completion.
pub const VIRTIO_RDMA_CQ_ARM_NEXT: u32 = 1;
/// Armed for the next solicited or failed completion.
pub const VIRTIO_RDMA_CQ_ARM_SOLICITED: u32 = 2;
/// CREATE_QP_RING flag: the rings belong to a process.
pub const VIRTIO_RDMA_QP_RING_F_USER: u32 = 1;
/// Control command: create a CQ whose ring is in guest memory.
pub const VIRTIO_RDMA_CMD_CREATE_CQ_RING: u32 = 20;
/// Control command: create a QP whose rings are in guest memory.
pub const VIRTIO_RDMA_CMD_CREATE_QP_RING: u32 = 21;
/// Control command: give a ring CQ a new ring.
pub const VIRTIO_RDMA_CMD_RESIZE_CQ_RING: u32 = 22;
/// Control command: allocate a memory window.
pub const VIRTIO_RDMA_CMD_ALLOC_MW: u32 = 23;
/// Control command: deallocate a memory window.
pub const VIRTIO_RDMA_CMD_DEALLOC_MW: u32 = 24;
/// Control command: create a shared receive queue (rings).
pub const VIRTIO_RDMA_CMD_CREATE_SRQ: u32 = 25;
/// Control command: arm or disarm an SRQ's limit.
pub const VIRTIO_RDMA_CMD_MODIFY_SRQ: u32 = 26;
/// Control command: an SRQ's size and limit.
pub const VIRTIO_RDMA_CMD_QUERY_SRQ: u32 = 27;
/// Control command: destroy an SRQ.
pub const VIRTIO_RDMA_CMD_DESTROY_SRQ: u32 = 28;
/// Control command: allocate a counter set.
pub const VIRTIO_RDMA_CMD_ALLOC_COUNTER_SET: u32 = 29;
/// Control command: free a counter set.
pub const VIRTIO_RDMA_CMD_DEALLOC_COUNTER_SET: u32 = 30;
/// Control command: bind a QP to a counter set (or back to the port's).
pub const VIRTIO_RDMA_CMD_BIND_COUNTER_SET: u32 = 31;
/// Control command: allocate an XRC domain (`max_xrcd` > 0).
pub const VIRTIO_RDMA_CMD_ALLOC_XRCD: u32 = 32;
/// Control command: free an XRC domain.
pub const VIRTIO_RDMA_CMD_DEALLOC_XRCD: u32 = 33;
/// Control command: create an XRC SRQ (an SRQ of a domain, with its CQ).
pub const VIRTIO_RDMA_CMD_CREATE_XRC_SRQ: u32 = 34;
/// Control command: create an XRC target QP.
pub const VIRTIO_RDMA_CMD_CREATE_XRC_TGT_QP: u32 = 35;
/// Control command: the device's `struct virtio_rdma_config` (no request
/// body), as its config space holds it.
pub const VIRTIO_RDMA_CMD_QUERY_DEVICE: u32 = 36;
/// Control command: destroy every object and return every buffer the
/// device holds on its other queues (no request body).
pub const VIRTIO_RDMA_CMD_RESET: u32 = 37;
/// Control command: change a user MR's PD and rights in place.
pub const VIRTIO_RDMA_CMD_MODIFY_MR: u32 = 38;
/// CREATE_SRQ flag: the ring belongs to a process.
pub const VIRTIO_RDMA_SRQ_F_USER: u32 = 1;

/// `struct virtio_rdma_cmd_create_srq`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdCreateSrq {
    pub ring: VirtioRdmaRing,
    pub pdn: U32,
    pub max_wr: U32,
    pub max_sge: U32,
    pub srq_limit: U32,
    pub flags: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_rsp_create_srq`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaRspCreateSrq {
    pub srqn: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_cmd_modify_srq`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdModifySrq {
    pub srqn: U32,
    pub srq_limit: U32,
}

/// `struct virtio_rdma_cmd_query_srq`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdQuerySrq {
    pub srqn: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_rsp_query_srq`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaRspQuerySrq {
    pub max_wr: U32,
    pub max_sge: U32,
    pub srq_limit: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_cmd_destroy_srq`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdDestroySrq {
    pub srqn: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_rsp_alloc_xrcd`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaRspAllocXrcd {
    pub xrcdn: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_cmd_dealloc_xrcd`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdDeallocXrcd {
    pub xrcdn: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_cmd_create_xrc_srq`: CREATE_SRQ's request, then the
/// domain and the ring CQ of its receive completions.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdCreateXrcSrq {
    pub srq: VirtioRdmaCmdCreateSrq,
    pub xrcdn: U32,
    pub cqn: U32,
}

/// `struct virtio_rdma_cmd_create_xrc_tgt_qp`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdCreateXrcTgtQp {
    pub xrcdn: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_cmd_alloc_mw`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdAllocMw {
    pub pdn: U32,
    pub mw_type: u8,
    pub reserved: [u8; 3],
}

/// `struct virtio_rdma_rsp_alloc_mw`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaRspAllocMw {
    pub mwn: U32,
    pub rkey: U32,
}

/// `struct virtio_rdma_cmd_dealloc_mw`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdDeallocMw {
    pub mwn: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_ring`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaRing {
    pub pages: U64,
    pub npages: U32,
    pub depth: U32,
    pub stride: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_ring_record`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaRingRecord {
    pub producer: U32,
    pub consumer: U32,
    pub flags: U32,
    pub arm: U32,
    pub reserved: [U32; 12],
}

/// `struct virtio_rdma_ring_cqe`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaRingCqe {
    pub cqe: VirtioRdmaCqReq,
    pub seq: U32,
    pub reserved: [U32; 3],
}

/// `struct virtio_rdma_cmd_create_cq_ring`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdCreateCqRing {
    pub ring: VirtioRdmaRing,
    pub comp_vq: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_cmd_resize_cq_ring`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdResizeCqRing {
    pub ring: VirtioRdmaRing,
    pub cqn: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_rsp_resize_cq_ring`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaRspResizeCqRing {
    pub produced: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_cmd_create_qp_ring`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdCreateQpRing {
    pub qp: VirtioRdmaCmdCreateQp,
    pub sq: VirtioRdmaRing,
    pub rq: VirtioRdmaRing,
    pub flags: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_comp_event`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCompEvent {
    pub cqn: U32,
    pub reserved: U32,
}

/// `enum virtio_rdma_event_type` (the values of `enum ib_event_type`):
/// a completion of CQ `element` was lost.
pub const VIRTIO_RDMA_EVENT_CQ_ERR: u32 = 0;
/// QP `element` moved to error without a completion saying why.
pub const VIRTIO_RDMA_EVENT_QP_FATAL: u32 = 1;
/// Responder QP `element` moved to error on an invalid request.
pub const VIRTIO_RDMA_EVENT_QP_REQ_ERR: u32 = 2;
/// Responder QP `element` moved to error on a remote access violation.
pub const VIRTIO_RDMA_EVENT_QP_ACCESS_ERR: u32 = 3;
/// A receive taken left fewer receives in SRQ `element` than its limit.
pub const VIRTIO_RDMA_EVENT_SRQ_LIMIT_REACHED: u32 = 15;
/// QP `element`, which takes receives from an SRQ, entered ERR.
pub const VIRTIO_RDMA_EVENT_QP_LAST_WQE_REACHED: u32 = 16;

/// `enum virtio_rdma_ctrl_cmd`.
pub const VIRTIO_RDMA_CMD_QUERY_PORT: u32 = 1;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CMD_CREATE_CQ: u32 = 2;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CMD_DESTROY_CQ: u32 = 3;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CMD_CREATE_PD: u32 = 4;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CMD_DESTROY_PD: u32 = 5;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CMD_GET_DMA_MR: u32 = 6;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CMD_CREATE_MR: u32 = 7;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CMD_MAP_MR_SG: u32 = 8;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CMD_REG_USER_MR: u32 = 9;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CMD_DEREG_MR: u32 = 10;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CMD_CREATE_QP: u32 = 11;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CMD_MODIFY_QP: u32 = 12;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CMD_QUERY_QP: u32 = 13;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CMD_DESTROY_QP: u32 = 14;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CMD_QUERY_PKEY: u32 = 15;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CMD_ADD_GID: u32 = 16;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CMD_DEL_GID: u32 = 17;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CMD_REQ_NOTIFY_CQ: u32 = 18;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CMD_QUERY_COUNTERS: u32 = 19;

/// `enum virtio_rdma_status`: success.
pub const VIRTIO_RDMA_S_OK: u8 = 0;
/// Unknown command.
pub const VIRTIO_RDMA_S_UNSUPPORTED: u8 = 1;
/// Malformed request or bad argument.
pub const VIRTIO_RDMA_S_INVALID: u8 = 2;
/// A device limit is reached.
pub const VIRTIO_RDMA_S_NO_RESOURCE: u8 = 3;
/// No object has that handle.
pub const VIRTIO_RDMA_S_NOT_FOUND: u8 = 4;
/// The object is still in use.
pub const VIRTIO_RDMA_S_BUSY: u8 = 5;
/// A guest address is not mapped.
pub const VIRTIO_RDMA_S_FAULT: u8 = 6;
/// Transition not allowed.
pub const VIRTIO_RDMA_S_BAD_STATE: u8 = 7;

/// `struct virtio_rdma_config`: the device's read-only config space.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaConfig {
    pub phys_port_cnt: U32,
    pub vendor_id: U32,
    pub sys_image_guid: U64,
    pub vendor_part_id: U32,
    pub hw_ver: U32,
    pub max_mr_size: U64,
    pub page_size_cap: U64,
    pub device_cap_flags: U64,
    pub max_qp: U32,
    pub max_qp_wr: U32,
    pub max_send_sge: U32,
    pub max_recv_sge: U32,
    pub max_sge_rd: U32,
    pub max_cq: U32,
    pub max_cqe: U32,
    pub max_mr: U32,
    pub max_pd: U32,
    pub max_qp_rd_atom: U32,
    pub max_res_rd_atom: U32,
    pub max_qp_init_rd_atom: U32,
    pub max_mw: U32,
    pub max_mcast_grp: U32,
    pub max_mcast_qp_attach: U32,
    pub max_total_mcast_qp_attach: U32,
    pub max_ah: U32,
    pub max_fast_reg_page_list_len: U32,
    pub max_pi_fast_reg_page_list_len: U32,
    pub max_inline_data: U32,
    pub max_pkeys: U16,
    pub local_ca_ack_delay: u8,
    pub atomic_cap: u8,
    pub mac: [u8; 6],
    pub reserved: [u8; 6],
    pub max_ring_qp: U32,
    pub max_ring_cq: U32,
    pub num_comp_vqs: U32,
    pub max_srq: U32,
    pub max_srq_wr: U32,
    pub max_srq_sge: U32,
    pub max_xrcd: U32,
    pub reserved1: U32,
}

/// `struct virtio_rdma_ctrl_hdr`: first bytes of every control request.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCtrlHdr {
    pub cmd: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_ctrl_rsp_hdr`: first bytes of every response.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCtrlRspHdr {
    pub status: u8,
    pub reserved: [u8; 7],
}

/// `struct virtio_rdma_cmd_query_port`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdQueryPort {
    pub port: u8,
    pub reserved: [u8; 7],
}

/// `struct virtio_rdma_rsp_query_port`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaRspQueryPort {
    pub state: u8,
    pub max_mtu: u8,
    pub active_mtu: u8,
    pub phys_state: u8,
    pub phys_mtu: U32,
    pub gid_tbl_len: U32,
    pub port_cap_flags: U32,
    pub max_msg_sz: U32,
    pub bad_pkey_cntr: U32,
    pub qkey_viol_cntr: U32,
    pub pkey_tbl_len: U16,
    pub active_width: u8,
    pub reserved0: u8,
    pub active_speed: U16,
    pub reserved: [u8; 6],
}

/// `struct virtio_rdma_rsp_create_pd`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaRspCreatePd {
    pub pdn: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_cmd_destroy_pd`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdDestroyPd {
    pub pdn: U32,
    pub reserved: U32,
}

/// `enum virtio_rdma_counter`: where each port counter sits in
/// [`VirtioRdmaRspQueryCounters`] (the others in between as listed there).
pub const VIRTIO_RDMA_CNT_SENT_PKTS: usize = 0;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CNT_SENT_BYTES: usize = 1;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CNT_RCVD_PKTS: usize = 2;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CNT_RCVD_BYTES: usize = 3;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CNT_RNR_NAKS_SENT: usize = 4;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CNT_RNR_NAKS_RCVD: usize = 5;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CNT_DROPPED_NOT_PEER: usize = 6;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CNT_DROPPED_BAD_PSN: usize = 7;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CNT_DROPPED_BAD_QKEY: usize = 8;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CNT_LOC_LEN_ERR: usize = 9;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CNT_LOC_QP_OP_ERR: usize = 10;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CNT_LOC_PROT_ERR: usize = 11;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CNT_WR_FLUSH_ERR: usize = 12;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CNT_REM_INV_REQ_ERR: usize = 13;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CNT_REM_ACCESS_ERR: usize = 14;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CNT_REM_OP_ERR: usize = 15;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CNT_RETRY_EXC_ERR: usize = 16;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CNT_RNR_RETRY_EXC_ERR: usize = 17;
#[allow(missing_docs)]
pub const VIRTIO_RDMA_CNT_OTHER_ERR: usize = 18;
/// How many port counters QUERY_COUNTERS returns.
pub const VIRTIO_RDMA_NUM_COUNTERS: usize = 19;

/// `struct virtio_rdma_cmd_query_counters`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdQueryCounters {
    pub port: U32,
    /// Counter set; 0: the port's own counters.
    pub set: U32,
}

/// `struct virtio_rdma_rsp_query_counters`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaRspQueryCounters {
    pub value: [U64; VIRTIO_RDMA_NUM_COUNTERS],
}

/// `struct virtio_rdma_cmd_alloc_counter_set`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdAllocCounterSet {
    pub port: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_rsp_alloc_counter_set`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaRspAllocCounterSet {
    /// The new set's number, from 1.
    pub set: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_cmd_dealloc_counter_set`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdDeallocCounterSet {
    pub set: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_cmd_bind_counter_set`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdBindCounterSet {
    pub qpn: U32,
    /// Counter set; 0: the port's own counters again.
    pub set: U32,
}

/// `struct virtio_rdma_cmd_query_pkey`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdQueryPkey {
    pub port: U32,
    pub index: U16,
    pub reserved: U16,
}

/// `struct virtio_rdma_rsp_query_pkey`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaRspQueryPkey {
    pub pkey: U16,
    pub reserved: [U16; 3],
}

/// `struct virtio_rdma_cmd_add_gid`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdAddGid {
    pub gid: [u8; 16],
    pub gid_type: U32,
    pub index: U16,
    pub reserved0: U16,
    pub port_num: U32,
    pub reserved1: U32,
}

/// `struct virtio_rdma_cmd_del_gid`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdDelGid {
    pub index: U16,
    pub reserved: U16,
    pub port: U32,
}

/// Page size of MR page tables (log2).
pub const VIRTIO_RDMA_PAGE_SHIFT: u32 = 12;
/// Page size of MR page tables.
pub const VIRTIO_RDMA_PAGE_SIZE: u32 = 1 << VIRTIO_RDMA_PAGE_SHIFT;
/// REQ_NOTIFY_CQ: signal the next solicited (or error) completion.
pub const VIRTIO_RDMA_NOTIFY_SOLICITED: u32 = 1 << 0;
/// REQ_NOTIFY_CQ: signal the next completion.
pub const VIRTIO_RDMA_NOTIFY_NEXT_COMPLETION: u32 = 1 << 1;

/// `struct virtio_rdma_cmd_create_cq`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdCreateCq {
    pub cqe: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_rsp_create_cq`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaRspCreateCq {
    pub cqn: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_cmd_destroy_cq`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdDestroyCq {
    pub cqn: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_cmd_get_dma_mr`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdGetDmaMr {
    pub pdn: U32,
    pub access_flags: U32,
}

/// `struct virtio_rdma_rsp_create_mr`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaRspCreateMr {
    pub mrn: U32,
    pub lkey: U32,
    pub rkey: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_cmd_create_mr`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdCreateMr {
    pub pdn: U32,
    pub access_flags: U32,
    pub max_num_sg: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_cmd_map_mr_sg`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdMapMrSg {
    pub mrn: U32,
    pub npages: U32,
    pub iova: U64,
    pub length: U64,
    pub pages: U64,
}

/// `struct virtio_rdma_rsp_map_mr_sg`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaRspMapMrSg {
    pub npages: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_cmd_reg_user_mr`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdRegUserMr {
    pub pdn: U32,
    pub access_flags: U32,
    pub length: U64,
    pub iova: U64,
    pub pages: U64,
    pub npages: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_cmd_dereg_mr`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdDeregMr {
    pub mrn: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_cmd_modify_mr`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdModifyMr {
    pub mrn: U32,
    pub pdn: U32,
    pub access_flags: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_cmd_create_qp`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdCreateQp {
    pub pdn: U32,
    pub qp_type: u8,
    pub sq_sig_all: u8,
    pub reserved0: U16,
    pub max_send_wr: U32,
    pub max_send_sge: U32,
    pub send_cqn: U32,
    pub max_recv_wr: U32,
    pub max_recv_sge: U32,
    pub recv_cqn: U32,
    pub max_inline_data: U32,
    pub srqn: U32,
}

/// `struct virtio_rdma_rsp_create_qp`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaRspCreateQp {
    pub qpn: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_av`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaAv {
    pub dgid: [u8; 16],
    pub flow_label: U32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub sl: u8,
    pub dmac: [u8; 6],
    pub static_rate: u8,
    pub port_num: u8,
}

/// `struct virtio_rdma_qp_cap`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaQpCap {
    pub max_send_wr: U32,
    pub max_recv_wr: U32,
    pub max_send_sge: U32,
    pub max_recv_sge: U32,
    pub max_inline_data: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_qp_attr`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaQpAttr {
    pub qp_state: u8,
    pub cur_qp_state: u8,
    pub path_mtu: u8,
    pub path_mig_state: u8,
    pub qkey: U32,
    pub rq_psn: U32,
    pub sq_psn: U32,
    pub dest_qp_num: U32,
    pub qp_access_flags: U32,
    pub pkey_index: U16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub reserved0: u8,
    pub reserved1: U32,
    pub ah_attr: VirtioRdmaAv,
    pub cap: VirtioRdmaQpCap,
}

/// `struct virtio_rdma_cmd_modify_qp`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdModifyQp {
    pub qpn: U32,
    pub attr_mask: U32,
    pub attr: VirtioRdmaQpAttr,
}

/// `struct virtio_rdma_cmd_query_qp`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdQueryQp {
    pub qpn: U32,
    pub attr_mask: U32,
}

/// `struct virtio_rdma_rsp_query_qp`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaRspQueryQp {
    pub attr: VirtioRdmaQpAttr,
}

/// `struct virtio_rdma_cmd_destroy_qp`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdDestroyQp {
    pub qpn: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_cmd_req_notify_cq`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCmdReqNotifyCq {
    pub cqn: U32,
    pub flags: U32,
}

/// `struct virtio_rdma_sq_rdma`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaSqRdma {
    pub remote_addr: U64,
    pub rkey: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_sq_atomic`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaSqAtomic {
    pub remote_addr: U64,
    pub compare_add: U64,
    pub swap: U64,
    pub rkey: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_sq_flush`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaSqFlush {
    pub remote_addr: U64,
    pub length: U64,
    pub rkey: U32,
    pub flush_type: u8,
    pub flush_level: u8,
    pub reserved: U16,
}

/// `struct virtio_rdma_sq_ud`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaSqUd {
    pub remote_qpn: U32,
    pub remote_qkey: U32,
    pub av: VirtioRdmaAv,
}

/// `struct virtio_rdma_sq_reg`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaSqReg {
    pub mrn: U32,
    pub key: U32,
    pub access: U32,
    pub npages: U32,
    pub iova: U64,
    pub length: U64,
    pub pages: U64,
}

/// `struct virtio_rdma_sq_bind`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaSqBind {
    pub addr: U64,
    pub length: U64,
    pub mw_rkey: U32,
    pub new_rkey: U32,
    pub mr_lkey: U32,
    pub access: U32,
    pub reserved: U64,
}

/// `struct virtio_rdma_sq_req`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaSqReq {
    pub wr_id: U64,
    pub opcode: u8,
    pub reserved0: u8,
    pub num_sge: U16,
    pub send_flags: U32,
    pub ex: U32,
    pub inline_len: U32,
    pub wr: [u8; 40],
}

/// `struct virtio_rdma_sq_xrc`: what every remote operation of an XRC_INI
/// QP carries in `wr`, after its RDMA or atomic part.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaSqXrc {
    pub op: [u8; 32],
    pub remote_srqn: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_sge`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaSge {
    pub addr: U64,
    pub length: U32,
    pub lkey: U32,
}

/// `struct virtio_rdma_rq_req`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaRqReq {
    pub wr_id: U64,
    pub num_sge: U32,
    pub reserved: U32,
}

/// `struct virtio_rdma_cq_req`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaCqReq {
    pub wr_id: U64,
    pub status: u8,
    pub opcode: u8,
    pub sl: u8,
    pub port_num: u8,
    pub vendor_err: U32,
    pub byte_len: U32,
    pub ex: U32,
    pub qp_num: U32,
    pub src_qp: U32,
    pub wc_flags: U32,
    pub pkey_index: U16,
    pub dlid_path_bits: u8,
    pub network_hdr_type: u8,
    pub smac: [u8; 6],
    pub vlan_id: U16,
}

/// `struct virtio_rdma_event`.
#[allow(missing_docs)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned)]
pub struct VirtioRdmaEvent {
    pub event_type: U32,
    pub element: U32,
}

// Generated by build.rs: layout and value checks against the C header.
include!(concat!(env!("OUT_DIR"), "/abi_check.rs"));

// The config structure fits the config space.
const _: () = assert!(core::mem::size_of::<VirtioRdmaConfig>() <= VIRTIO_RDMA_CONFIG_SPACE_SIZE);
