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

// Generated by build.rs: layout and value checks against the C header.
include!(concat!(env!("OUT_DIR"), "/abi_check.rs"));

// The config structure fits the config space.
const _: () = assert!(core::mem::size_of::<VirtioRdmaConfig>() <= VIRTIO_RDMA_CONFIG_SPACE_SIZE);
