// SPDX-License-Identifier: GPL-2.0

//! The device ABI of `include/uapi/linux/virtio_rdma.h` as plain-bytes Rust types.
//!
//! The header is the single source of the ABI. Its structures are mirrored here with
//! little-endian field types so that the driver can read and write them without `unsafe`; every
//! mirror is checked against the header's bindings at compile time (size and the offset of every
//! field), so a change to the header that is not made here too fails the build.

// The mirrors carry every field of the ABI, including those the driver does not read (yet).
#![allow(dead_code, reason = "wire structures mirror the ABI field by field")]

use kernel::bindings;
use zerocopy::byteorder::little_endian::{U16, U32, U64};
use zerocopy_derive::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Checks at compile time that `$ours` has the size of `$theirs` and the same offset for every
/// listed field.
macro_rules! same_layout {
    ($ours:ty, $theirs:ty, [$($field:ident),* $(,)?]) => {
        const _: () = {
            assert!(core::mem::size_of::<$ours>() == core::mem::size_of::<$theirs>());
            $(
                assert!(
                    core::mem::offset_of!($ours, $field) == core::mem::offset_of!($theirs, $field)
                );
            )*
        };
    };
}

/// `struct virtio_rdma_config`: the device's config space.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct Config {
    pub(crate) phys_port_cnt: U32,
    pub(crate) vendor_id: U32,
    pub(crate) sys_image_guid: U64,
    pub(crate) vendor_part_id: U32,
    pub(crate) hw_ver: U32,
    pub(crate) max_mr_size: U64,
    pub(crate) page_size_cap: U64,
    pub(crate) device_cap_flags: U64,
    pub(crate) max_qp: U32,
    pub(crate) max_qp_wr: U32,
    pub(crate) max_send_sge: U32,
    pub(crate) max_recv_sge: U32,
    pub(crate) max_sge_rd: U32,
    pub(crate) max_cq: U32,
    pub(crate) max_cqe: U32,
    pub(crate) max_mr: U32,
    pub(crate) max_pd: U32,
    pub(crate) max_qp_rd_atom: U32,
    pub(crate) max_res_rd_atom: U32,
    pub(crate) max_qp_init_rd_atom: U32,
    pub(crate) max_mw: U32,
    pub(crate) max_mcast_grp: U32,
    pub(crate) max_mcast_qp_attach: U32,
    pub(crate) max_total_mcast_qp_attach: U32,
    pub(crate) max_ah: U32,
    pub(crate) max_fast_reg_page_list_len: U32,
    pub(crate) max_pi_fast_reg_page_list_len: U32,
    pub(crate) max_inline_data: U32,
    pub(crate) max_pkeys: U16,
    pub(crate) local_ca_ack_delay: u8,
    pub(crate) atomic_cap: u8,
    pub(crate) mac: [u8; 6],
    pub(crate) reserved: [u8; 6],
    /// With [`F_RINGS`] only (read as zero without it).
    pub(crate) max_ring_qp: U32,
    pub(crate) max_ring_cq: U32,
    pub(crate) num_comp_vqs: U32,
    pub(crate) max_srq: U32,
    pub(crate) max_srq_wr: U32,
    pub(crate) max_srq_sge: U32,
    pub(crate) max_xrcd: U32,
    pub(crate) reserved1: U32,
}

same_layout!(
    Config,
    bindings::virtio_rdma_config,
    [
        phys_port_cnt,
        vendor_id,
        sys_image_guid,
        vendor_part_id,
        hw_ver,
        max_mr_size,
        page_size_cap,
        device_cap_flags,
        max_qp,
        max_qp_wr,
        max_send_sge,
        max_recv_sge,
        max_sge_rd,
        max_cq,
        max_cqe,
        max_mr,
        max_pd,
        max_qp_rd_atom,
        max_res_rd_atom,
        max_qp_init_rd_atom,
        max_mw,
        max_mcast_grp,
        max_mcast_qp_attach,
        max_total_mcast_qp_attach,
        max_ah,
        max_fast_reg_page_list_len,
        max_pi_fast_reg_page_list_len,
        max_inline_data,
        max_pkeys,
        local_ca_ack_delay,
        atomic_cap,
        mac,
        reserved,
        max_ring_qp,
        max_ring_cq,
        num_comp_vqs,
        max_srq,
        max_srq_wr,
        max_srq_sge,
        max_xrcd,
        reserved1,
    ]
);

/// Where the config fields of [`F_RINGS`] start: the bytes before are every device's.
pub(crate) const CONFIG_RINGS_OFFSET: usize = core::mem::offset_of!(Config, max_ring_qp);
/// How many bytes of config the fields of [`F_RINGS`] take.
pub(crate) const CONFIG_RINGS_LEN: usize = core::mem::size_of::<Config>() - CONFIG_RINGS_OFFSET;

/// `VIRTIO_RDMA_F_RINGS`: queues in guest memory.
pub(crate) const F_RINGS: u32 = bindings::VIRTIO_RDMA_F_RINGS;

/// Size of the device's config space (`VIRTIO_RDMA_CONFIG_SPACE_SIZE`).
pub(crate) const CONFIG_SPACE_SIZE: usize = bindings::VIRTIO_RDMA_CONFIG_SPACE_SIZE as usize;
const _: () = assert!(core::mem::size_of::<Config>() <= CONFIG_SPACE_SIZE);

/// Largest `max_cq` the driver accepts (`VIRTIO_RDMA_MAX_CQ_LIMIT`).
pub(crate) const MAX_CQ_LIMIT: u32 = bindings::VIRTIO_RDMA_MAX_CQ_LIMIT;
/// Largest `max_qp` the driver accepts (`VIRTIO_RDMA_MAX_QP_LIMIT`).
pub(crate) const MAX_QP_LIMIT: u32 = bindings::VIRTIO_RDMA_MAX_QP_LIMIT;
/// Index of the control virtqueue (`VIRTIO_RDMA_CTRL_VQ`).
pub(crate) const CTRL_VQ: u32 = bindings::VIRTIO_RDMA_CTRL_VQ;

/// `enum virtio_rdma_atomic_cap`: the largest value.
pub(crate) const ATOMIC_GLOB: u8 = bindings::virtio_rdma_atomic_cap_VIRTIO_RDMA_ATOMIC_GLOB as u8;

/// `enum virtio_rdma_ctrl_cmd`.
pub(crate) mod cmd {
    use kernel::bindings;

    pub(crate) const QUERY_PORT: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_QUERY_PORT;
    pub(crate) const CREATE_PD: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_CREATE_PD;
    pub(crate) const DESTROY_PD: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_DESTROY_PD;
    pub(crate) const CREATE_CQ: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_CREATE_CQ;
    pub(crate) const DESTROY_CQ: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_DESTROY_CQ;
    pub(crate) const CREATE_MR: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_CREATE_MR;
    pub(crate) const GET_DMA_MR: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_GET_DMA_MR;
    pub(crate) const REG_USER_MR: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_REG_USER_MR;
    pub(crate) const DEREG_MR: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_DEREG_MR;
    pub(crate) const CREATE_QP: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_CREATE_QP;
    pub(crate) const MODIFY_QP: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_MODIFY_QP;
    pub(crate) const QUERY_QP: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_QUERY_QP;
    pub(crate) const DESTROY_QP: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_DESTROY_QP;
    pub(crate) const QUERY_PKEY: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_QUERY_PKEY;
    pub(crate) const ADD_GID: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_ADD_GID;
    pub(crate) const DEL_GID: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_DEL_GID;
    pub(crate) const QUERY_COUNTERS: u32 =
        bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_QUERY_COUNTERS;
    pub(crate) const CREATE_CQ_RING: u32 =
        bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_CREATE_CQ_RING;
    pub(crate) const CREATE_QP_RING: u32 =
        bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_CREATE_QP_RING;
    pub(crate) const RESIZE_CQ_RING: u32 =
        bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_RESIZE_CQ_RING;
    pub(crate) const ALLOC_MW: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_ALLOC_MW;
    pub(crate) const DEALLOC_MW: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_DEALLOC_MW;
    pub(crate) const CREATE_SRQ: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_CREATE_SRQ;
    pub(crate) const MODIFY_SRQ: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_MODIFY_SRQ;
    pub(crate) const QUERY_SRQ: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_QUERY_SRQ;
    pub(crate) const DESTROY_SRQ: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_DESTROY_SRQ;
    pub(crate) const ALLOC_COUNTER_SET: u32 =
        bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_ALLOC_COUNTER_SET;
    pub(crate) const DEALLOC_COUNTER_SET: u32 =
        bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_DEALLOC_COUNTER_SET;
    pub(crate) const BIND_COUNTER_SET: u32 =
        bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_BIND_COUNTER_SET;
    pub(crate) const ALLOC_XRCD: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_ALLOC_XRCD;
    pub(crate) const DEALLOC_XRCD: u32 =
        bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_DEALLOC_XRCD;
    pub(crate) const CREATE_XRC_SRQ: u32 =
        bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_CREATE_XRC_SRQ;
    pub(crate) const CREATE_XRC_TGT_QP: u32 =
        bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_CREATE_XRC_TGT_QP;
    pub(crate) const QUERY_DEVICE: u32 =
        bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_QUERY_DEVICE;
    pub(crate) const RESET: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_RESET;
    pub(crate) const MODIFY_MR: u32 = bindings::virtio_rdma_ctrl_cmd_VIRTIO_RDMA_CMD_MODIFY_MR;
}

/// `enum virtio_rdma_status`.
pub(crate) mod status {
    use kernel::bindings;

    pub(crate) const OK: u8 = bindings::virtio_rdma_status_VIRTIO_RDMA_S_OK as u8;
    pub(crate) const UNSUPPORTED: u8 = bindings::virtio_rdma_status_VIRTIO_RDMA_S_UNSUPPORTED as u8;
    pub(crate) const INVALID: u8 = bindings::virtio_rdma_status_VIRTIO_RDMA_S_INVALID as u8;
    pub(crate) const NO_RESOURCE: u8 = bindings::virtio_rdma_status_VIRTIO_RDMA_S_NO_RESOURCE as u8;
    pub(crate) const NOT_FOUND: u8 = bindings::virtio_rdma_status_VIRTIO_RDMA_S_NOT_FOUND as u8;
    pub(crate) const BUSY: u8 = bindings::virtio_rdma_status_VIRTIO_RDMA_S_BUSY as u8;
    pub(crate) const FAULT: u8 = bindings::virtio_rdma_status_VIRTIO_RDMA_S_FAULT as u8;
    pub(crate) const BAD_STATE: u8 = bindings::virtio_rdma_status_VIRTIO_RDMA_S_BAD_STATE as u8;
}

/// `struct virtio_rdma_ctrl_hdr`: the head of every control request.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CtrlHdr {
    pub(crate) cmd: U32,
    pub(crate) reserved: U32,
}
same_layout!(CtrlHdr, bindings::virtio_rdma_ctrl_hdr, [cmd, reserved]);

/// `struct virtio_rdma_ctrl_rsp_hdr`: the head of every control response.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CtrlRspHdr {
    pub(crate) status: u8,
    pub(crate) reserved: [u8; 7],
}
same_layout!(
    CtrlRspHdr,
    bindings::virtio_rdma_ctrl_rsp_hdr,
    [status, reserved]
);

/// `struct virtio_rdma_cmd_query_port`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdQueryPort {
    pub(crate) port: u8,
    pub(crate) reserved: [u8; 7],
}
same_layout!(
    CmdQueryPort,
    bindings::virtio_rdma_cmd_query_port,
    [port, reserved]
);

/// `struct virtio_rdma_rsp_query_port`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct RspQueryPort {
    pub(crate) state: u8,
    pub(crate) max_mtu: u8,
    pub(crate) active_mtu: u8,
    pub(crate) phys_state: u8,
    pub(crate) phys_mtu: U32,
    pub(crate) gid_tbl_len: U32,
    pub(crate) port_cap_flags: U32,
    pub(crate) max_msg_sz: U32,
    pub(crate) bad_pkey_cntr: U32,
    pub(crate) qkey_viol_cntr: U32,
    pub(crate) pkey_tbl_len: U16,
    pub(crate) active_width: u8,
    pub(crate) reserved0: u8,
    pub(crate) active_speed: U16,
    pub(crate) reserved: [u8; 6],
}
same_layout!(
    RspQueryPort,
    bindings::virtio_rdma_rsp_query_port,
    [
        state,
        max_mtu,
        active_mtu,
        phys_state,
        phys_mtu,
        gid_tbl_len,
        port_cap_flags,
        max_msg_sz,
        bad_pkey_cntr,
        qkey_viol_cntr,
        pkey_tbl_len,
        active_width,
        reserved0,
        active_speed,
        reserved,
    ]
);

/// `struct virtio_rdma_rsp_create_pd`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct RspCreatePd {
    pub(crate) pdn: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    RspCreatePd,
    bindings::virtio_rdma_rsp_create_pd,
    [pdn, reserved]
);

/// `struct virtio_rdma_cmd_destroy_pd`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdDestroyPd {
    pub(crate) pdn: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    CmdDestroyPd,
    bindings::virtio_rdma_cmd_destroy_pd,
    [pdn, reserved]
);

/// `struct virtio_rdma_cmd_query_pkey`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdQueryPkey {
    pub(crate) port: U32,
    pub(crate) index: U16,
    pub(crate) reserved: U16,
}
same_layout!(
    CmdQueryPkey,
    bindings::virtio_rdma_cmd_query_pkey,
    [port, index, reserved]
);

/// `struct virtio_rdma_rsp_query_pkey`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct RspQueryPkey {
    pub(crate) pkey: U16,
    pub(crate) reserved: [U16; 3],
}
same_layout!(
    RspQueryPkey,
    bindings::virtio_rdma_rsp_query_pkey,
    [pkey, reserved]
);

/// `enum virtio_rdma_counter`: where each port counter sits in [`RspQueryCounters`].
pub(crate) mod counter {
    use kernel::bindings;

    pub(crate) const SENT_PKTS: usize =
        bindings::virtio_rdma_counter_VIRTIO_RDMA_CNT_SENT_PKTS as usize;
    pub(crate) const RCVD_BYTES: usize =
        bindings::virtio_rdma_counter_VIRTIO_RDMA_CNT_RCVD_BYTES as usize;
    pub(crate) const DROPPED_NOT_PEER: usize =
        bindings::virtio_rdma_counter_VIRTIO_RDMA_CNT_DROPPED_NOT_PEER as usize;
    pub(crate) const LOC_LEN_ERR: usize =
        bindings::virtio_rdma_counter_VIRTIO_RDMA_CNT_LOC_LEN_ERR as usize;
    pub(crate) const REM_ACCESS_ERR: usize =
        bindings::virtio_rdma_counter_VIRTIO_RDMA_CNT_REM_ACCESS_ERR as usize;
    pub(crate) const OTHER_ERR: usize =
        bindings::virtio_rdma_counter_VIRTIO_RDMA_CNT_OTHER_ERR as usize;
    /// How many there are.
    pub(crate) const NUM: usize = bindings::virtio_rdma_counter_VIRTIO_RDMA_NUM_COUNTERS as usize;
}

/// `struct virtio_rdma_cmd_query_counters`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdQueryCounters {
    pub(crate) port: U32,
    /// A counter set, or 0 for the port's own counters.
    pub(crate) set: U32,
}
same_layout!(
    CmdQueryCounters,
    bindings::virtio_rdma_cmd_query_counters,
    [port, set]
);

/// `struct virtio_rdma_rsp_query_counters`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct RspQueryCounters {
    pub(crate) value: [U64; counter::NUM],
}
same_layout!(
    RspQueryCounters,
    bindings::virtio_rdma_rsp_query_counters,
    [value]
);

/// `struct virtio_rdma_cmd_alloc_counter_set`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdAllocCounterSet {
    pub(crate) port: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    CmdAllocCounterSet,
    bindings::virtio_rdma_cmd_alloc_counter_set,
    [port, reserved]
);

/// `struct virtio_rdma_rsp_alloc_counter_set`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct RspAllocCounterSet {
    pub(crate) set: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    RspAllocCounterSet,
    bindings::virtio_rdma_rsp_alloc_counter_set,
    [set, reserved]
);

/// `struct virtio_rdma_cmd_dealloc_counter_set`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdDeallocCounterSet {
    pub(crate) set: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    CmdDeallocCounterSet,
    bindings::virtio_rdma_cmd_dealloc_counter_set,
    [set, reserved]
);

/// `struct virtio_rdma_cmd_bind_counter_set`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdBindCounterSet {
    pub(crate) qpn: U32,
    /// 0: the port's own counters.
    pub(crate) set: U32,
}
same_layout!(
    CmdBindCounterSet,
    bindings::virtio_rdma_cmd_bind_counter_set,
    [qpn, set]
);

/// `struct virtio_rdma_cmd_add_gid`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdAddGid {
    pub(crate) gid: [u8; 16],
    pub(crate) gid_type: U32,
    pub(crate) index: U16,
    pub(crate) reserved0: U16,
    pub(crate) port_num: U32,
    pub(crate) reserved1: U32,
}
same_layout!(
    CmdAddGid,
    bindings::virtio_rdma_cmd_add_gid,
    [gid, gid_type, index, reserved0, port_num, reserved1]
);

/// `struct virtio_rdma_cmd_del_gid`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdDelGid {
    pub(crate) index: U16,
    pub(crate) reserved: U16,
    pub(crate) port: U32,
}
same_layout!(
    CmdDelGid,
    bindings::virtio_rdma_cmd_del_gid,
    [index, reserved, port]
);

/// `struct virtio_rdma_cmd_create_cq`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdCreateCq {
    pub(crate) cqe: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    CmdCreateCq,
    bindings::virtio_rdma_cmd_create_cq,
    [cqe, reserved]
);

/// `struct virtio_rdma_rsp_create_cq`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct RspCreateCq {
    pub(crate) cqn: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    RspCreateCq,
    bindings::virtio_rdma_rsp_create_cq,
    [cqn, reserved]
);

/// `struct virtio_rdma_cmd_destroy_cq`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdDestroyCq {
    pub(crate) cqn: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    CmdDestroyCq,
    bindings::virtio_rdma_cmd_destroy_cq,
    [cqn, reserved]
);

/// `struct virtio_rdma_cq_req`: one completion, written by the device into a CQ buffer.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CqReq {
    pub(crate) wr_id: U64,
    pub(crate) status: u8,
    pub(crate) opcode: u8,
    pub(crate) sl: u8,
    pub(crate) port_num: u8,
    pub(crate) vendor_err: U32,
    pub(crate) byte_len: U32,
    pub(crate) ex: U32,
    pub(crate) qp_num: U32,
    pub(crate) src_qp: U32,
    pub(crate) wc_flags: U32,
    pub(crate) pkey_index: U16,
    pub(crate) dlid_path_bits: u8,
    pub(crate) network_hdr_type: u8,
    pub(crate) smac: [u8; 6],
    pub(crate) vlan_id: U16,
}
same_layout!(
    CqReq,
    bindings::virtio_rdma_cq_req,
    [
        wr_id,
        status,
        opcode,
        sl,
        port_num,
        vendor_err,
        byte_len,
        ex,
        qp_num,
        src_qp,
        wc_flags,
        pkey_index,
        dlid_path_bits,
        network_hdr_type,
        smac,
        vlan_id,
    ]
);

/// `struct virtio_rdma_cmd_get_dma_mr`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdGetDmaMr {
    pub(crate) pdn: U32,
    pub(crate) access_flags: U32,
}
same_layout!(
    CmdGetDmaMr,
    bindings::virtio_rdma_cmd_get_dma_mr,
    [pdn, access_flags]
);

/// `struct virtio_rdma_rsp_create_mr`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct RspCreateMr {
    pub(crate) mrn: U32,
    pub(crate) lkey: U32,
    pub(crate) rkey: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    RspCreateMr,
    bindings::virtio_rdma_rsp_create_mr,
    [mrn, lkey, rkey, reserved]
);

/// `struct virtio_rdma_cmd_dereg_mr`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdDeregMr {
    pub(crate) mrn: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    CmdDeregMr,
    bindings::virtio_rdma_cmd_dereg_mr,
    [mrn, reserved]
);

/// `struct virtio_rdma_cmd_modify_mr`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdModifyMr {
    pub(crate) mrn: U32,
    pub(crate) pdn: U32,
    pub(crate) access_flags: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    CmdModifyMr,
    bindings::virtio_rdma_cmd_modify_mr,
    [mrn, pdn, access_flags, reserved]
);

/// `struct virtio_rdma_cmd_alloc_mw`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdAllocMw {
    pub(crate) pdn: U32,
    pub(crate) mw_type: u8,
    pub(crate) reserved: [u8; 3],
}
same_layout!(
    CmdAllocMw,
    bindings::virtio_rdma_cmd_alloc_mw,
    [pdn, mw_type, reserved]
);

/// `struct virtio_rdma_rsp_alloc_mw`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct RspAllocMw {
    pub(crate) mwn: U32,
    pub(crate) rkey: U32,
}
same_layout!(RspAllocMw, bindings::virtio_rdma_rsp_alloc_mw, [mwn, rkey]);

/// `struct virtio_rdma_cmd_dealloc_mw`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdDeallocMw {
    pub(crate) mwn: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    CmdDeallocMw,
    bindings::virtio_rdma_cmd_dealloc_mw,
    [mwn, reserved]
);

/// `VIRTIO_RDMA_SRQ_F_USER`: the SRQ's ring belongs to a process.
pub(crate) const SRQ_F_USER: u32 = bindings::VIRTIO_RDMA_SRQ_F_USER;

/// `struct virtio_rdma_cmd_create_srq`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdCreateSrq {
    pub(crate) ring: Ring,
    pub(crate) pdn: U32,
    pub(crate) max_wr: U32,
    pub(crate) max_sge: U32,
    pub(crate) srq_limit: U32,
    pub(crate) flags: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    CmdCreateSrq,
    bindings::virtio_rdma_cmd_create_srq,
    [ring, pdn, max_wr, max_sge, srq_limit, flags, reserved]
);

/// `struct virtio_rdma_rsp_create_srq`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct RspCreateSrq {
    pub(crate) srqn: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    RspCreateSrq,
    bindings::virtio_rdma_rsp_create_srq,
    [srqn, reserved]
);

/// `struct virtio_rdma_rsp_alloc_xrcd`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct RspAllocXrcd {
    pub(crate) xrcdn: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    RspAllocXrcd,
    bindings::virtio_rdma_rsp_alloc_xrcd,
    [xrcdn, reserved]
);

/// `struct virtio_rdma_cmd_dealloc_xrcd`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdDeallocXrcd {
    pub(crate) xrcdn: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    CmdDeallocXrcd,
    bindings::virtio_rdma_cmd_dealloc_xrcd,
    [xrcdn, reserved]
);

/// `struct virtio_rdma_cmd_create_xrc_srq`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdCreateXrcSrq {
    pub(crate) srq: CmdCreateSrq,
    pub(crate) xrcdn: U32,
    pub(crate) cqn: U32,
}
same_layout!(
    CmdCreateXrcSrq,
    bindings::virtio_rdma_cmd_create_xrc_srq,
    [srq, xrcdn, cqn]
);

/// `struct virtio_rdma_cmd_create_xrc_tgt_qp`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdCreateXrcTgtQp {
    pub(crate) xrcdn: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    CmdCreateXrcTgtQp,
    bindings::virtio_rdma_cmd_create_xrc_tgt_qp,
    [xrcdn, reserved]
);

/// `struct virtio_rdma_cmd_modify_srq`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdModifySrq {
    pub(crate) srqn: U32,
    pub(crate) srq_limit: U32,
}
same_layout!(
    CmdModifySrq,
    bindings::virtio_rdma_cmd_modify_srq,
    [srqn, srq_limit]
);

/// `struct virtio_rdma_cmd_query_srq` and `struct virtio_rdma_cmd_destroy_srq`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdSrq {
    pub(crate) srqn: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    CmdSrq,
    bindings::virtio_rdma_cmd_query_srq,
    [srqn, reserved]
);
same_layout!(
    CmdSrq,
    bindings::virtio_rdma_cmd_destroy_srq,
    [srqn, reserved]
);

/// `struct virtio_rdma_rsp_query_srq`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct RspQuerySrq {
    pub(crate) max_wr: U32,
    pub(crate) max_sge: U32,
    pub(crate) srq_limit: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    RspQuerySrq,
    bindings::virtio_rdma_rsp_query_srq,
    [max_wr, max_sge, srq_limit, reserved]
);

/// The MR number a key names (`VIRTIO_RDMA_KEY_MRN`).
pub(crate) fn key_mrn(key: u32) -> u32 {
    key >> 8
}

/// `struct virtio_rdma_cmd_create_qp`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdCreateQp {
    pub(crate) pdn: U32,
    pub(crate) qp_type: u8,
    pub(crate) sq_sig_all: u8,
    pub(crate) reserved0: U16,
    pub(crate) max_send_wr: U32,
    pub(crate) max_send_sge: U32,
    pub(crate) send_cqn: U32,
    pub(crate) max_recv_wr: U32,
    pub(crate) max_recv_sge: U32,
    pub(crate) recv_cqn: U32,
    pub(crate) max_inline_data: U32,
    pub(crate) srqn: U32,
}
same_layout!(
    CmdCreateQp,
    bindings::virtio_rdma_cmd_create_qp,
    [
        pdn,
        qp_type,
        sq_sig_all,
        reserved0,
        max_send_wr,
        max_send_sge,
        send_cqn,
        max_recv_wr,
        max_recv_sge,
        recv_cqn,
        max_inline_data,
        srqn,
    ]
);

/// `struct virtio_rdma_rsp_create_qp`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct RspCreateQp {
    pub(crate) qpn: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    RspCreateQp,
    bindings::virtio_rdma_rsp_create_qp,
    [qpn, reserved]
);

/// `struct virtio_rdma_av`.
#[repr(C)]
#[derive(Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct Av {
    pub(crate) dgid: [u8; 16],
    pub(crate) flow_label: U32,
    pub(crate) sgid_index: u8,
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
    pub(crate) sl: u8,
    pub(crate) dmac: [u8; 6],
    pub(crate) static_rate: u8,
    pub(crate) port_num: u8,
}
same_layout!(
    Av,
    bindings::virtio_rdma_av,
    [
        dgid,
        flow_label,
        sgid_index,
        hop_limit,
        traffic_class,
        sl,
        dmac,
        static_rate,
        port_num
    ]
);

/// `struct virtio_rdma_qp_cap`.
#[repr(C)]
#[derive(Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct QpCap {
    pub(crate) max_send_wr: U32,
    pub(crate) max_recv_wr: U32,
    pub(crate) max_send_sge: U32,
    pub(crate) max_recv_sge: U32,
    pub(crate) max_inline_data: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    QpCap,
    bindings::virtio_rdma_qp_cap,
    [
        max_send_wr,
        max_recv_wr,
        max_send_sge,
        max_recv_sge,
        max_inline_data,
        reserved
    ]
);

/// `struct virtio_rdma_qp_attr`.
#[repr(C)]
#[derive(Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct QpAttr {
    pub(crate) qp_state: u8,
    pub(crate) cur_qp_state: u8,
    pub(crate) path_mtu: u8,
    pub(crate) path_mig_state: u8,
    pub(crate) qkey: U32,
    pub(crate) rq_psn: U32,
    pub(crate) sq_psn: U32,
    pub(crate) dest_qp_num: U32,
    pub(crate) qp_access_flags: U32,
    pub(crate) pkey_index: U16,
    pub(crate) en_sqd_async_notify: u8,
    pub(crate) sq_draining: u8,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) port_num: u8,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) reserved0: u8,
    pub(crate) reserved1: U32,
    pub(crate) ah_attr: Av,
    pub(crate) cap: QpCap,
}
same_layout!(
    QpAttr,
    bindings::virtio_rdma_qp_attr,
    [
        qp_state,
        cur_qp_state,
        path_mtu,
        path_mig_state,
        qkey,
        rq_psn,
        sq_psn,
        dest_qp_num,
        qp_access_flags,
        pkey_index,
        en_sqd_async_notify,
        sq_draining,
        max_rd_atomic,
        max_dest_rd_atomic,
        min_rnr_timer,
        port_num,
        timeout,
        retry_cnt,
        rnr_retry,
        reserved0,
        reserved1,
        ah_attr,
        cap,
    ]
);

/// `struct virtio_rdma_cmd_modify_qp`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdModifyQp {
    pub(crate) qpn: U32,
    pub(crate) attr_mask: U32,
    pub(crate) attr: QpAttr,
}
same_layout!(
    CmdModifyQp,
    bindings::virtio_rdma_cmd_modify_qp,
    [qpn, attr_mask, attr]
);

/// `struct virtio_rdma_cmd_query_qp`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdQueryQp {
    pub(crate) qpn: U32,
    pub(crate) attr_mask: U32,
}
same_layout!(
    CmdQueryQp,
    bindings::virtio_rdma_cmd_query_qp,
    [qpn, attr_mask]
);

/// `struct virtio_rdma_rsp_query_qp`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct RspQueryQp {
    pub(crate) attr: QpAttr,
}
same_layout!(RspQueryQp, bindings::virtio_rdma_rsp_query_qp, [attr]);

/// `struct virtio_rdma_cmd_destroy_qp`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdDestroyQp {
    pub(crate) qpn: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    CmdDestroyQp,
    bindings::virtio_rdma_cmd_destroy_qp,
    [qpn, reserved]
);

/// `struct virtio_rdma_sq_req` (the union `wr` as its raw bytes).
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct SqReq {
    pub(crate) wr_id: U64,
    pub(crate) opcode: u8,
    pub(crate) reserved0: u8,
    pub(crate) num_sge: U16,
    pub(crate) send_flags: U32,
    pub(crate) ex: U32,
    pub(crate) inline_len: U32,
    pub(crate) wr: [u8; 40],
}
same_layout!(
    SqReq,
    bindings::virtio_rdma_sq_req,
    [wr_id, opcode, reserved0, num_sge, send_flags, ex, inline_len, wr]
);

/// `struct virtio_rdma_sq_rdma`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct SqRdma {
    pub(crate) remote_addr: U64,
    pub(crate) rkey: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    SqRdma,
    bindings::virtio_rdma_sq_rdma,
    [remote_addr, rkey, reserved]
);

/// `struct virtio_rdma_sq_atomic`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct SqAtomic {
    pub(crate) remote_addr: U64,
    pub(crate) compare_add: U64,
    pub(crate) swap: U64,
    pub(crate) rkey: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    SqAtomic,
    bindings::virtio_rdma_sq_atomic,
    [remote_addr, compare_add, swap, rkey, reserved]
);

/// `struct virtio_rdma_sge`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct Sge {
    pub(crate) addr: U64,
    pub(crate) length: U32,
    pub(crate) lkey: U32,
}
same_layout!(Sge, bindings::virtio_rdma_sge, [addr, length, lkey]);

/// `struct virtio_rdma_rq_req`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct RqReq {
    pub(crate) wr_id: U64,
    pub(crate) num_sge: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    RqReq,
    bindings::virtio_rdma_rq_req,
    [wr_id, num_sge, reserved]
);

/// `struct virtio_rdma_sq_ud`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct SqUd {
    pub(crate) remote_qpn: U32,
    pub(crate) remote_qkey: U32,
    pub(crate) av: Av,
}
same_layout!(
    SqUd,
    bindings::virtio_rdma_sq_ud,
    [remote_qpn, remote_qkey, av]
);

/// `struct virtio_rdma_cmd_create_mr`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdCreateMr {
    pub(crate) pdn: U32,
    pub(crate) access_flags: U32,
    pub(crate) max_num_sg: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    CmdCreateMr,
    bindings::virtio_rdma_cmd_create_mr,
    [pdn, access_flags, max_num_sg, reserved]
);

/// `struct virtio_rdma_cmd_reg_user_mr`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdRegUserMr {
    pub(crate) pdn: U32,
    pub(crate) access_flags: U32,
    pub(crate) length: U64,
    pub(crate) iova: U64,
    pub(crate) pages: U64,
    pub(crate) npages: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    CmdRegUserMr,
    bindings::virtio_rdma_cmd_reg_user_mr,
    [pdn, access_flags, length, iova, pages, npages, reserved]
);

/// `struct virtio_rdma_sq_reg`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct SqReg {
    pub(crate) mrn: U32,
    pub(crate) key: U32,
    pub(crate) access: U32,
    pub(crate) npages: U32,
    pub(crate) iova: U64,
    pub(crate) length: U64,
    pub(crate) pages: U64,
}
same_layout!(
    SqReg,
    bindings::virtio_rdma_sq_reg,
    [mrn, key, access, npages, iova, length, pages]
);

/// `VIRTIO_RDMA_PAGE_SIZE`: the page size of the page tables the device reads.
pub(crate) const PAGE_SIZE: u32 = bindings::VIRTIO_RDMA_PAGE_SIZE;

/// `VIRTIO_RDMA_RING_SLOTS`: where a ring's slots start, after its record.
pub(crate) const RING_SLOTS: u32 = bindings::VIRTIO_RDMA_RING_SLOTS;

/// `VIRTIO_RDMA_RING_F_NOTIFY`: the device asks for a kick after the next producer store.
pub(crate) const RING_F_NOTIFY: u32 = bindings::VIRTIO_RDMA_RING_F_NOTIFY;

/// `enum virtio_rdma_cq_arm`.
pub(crate) mod cq_arm {
    use kernel::bindings;

    pub(crate) const NONE: u32 = bindings::virtio_rdma_cq_arm_VIRTIO_RDMA_CQ_ARM_NONE;
    pub(crate) const NEXT: u32 = bindings::virtio_rdma_cq_arm_VIRTIO_RDMA_CQ_ARM_NEXT;
    pub(crate) const SOLICITED: u32 = bindings::virtio_rdma_cq_arm_VIRTIO_RDMA_CQ_ARM_SOLICITED;
}

/// `struct virtio_rdma_ring`: a queue in guest memory, by its page table.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct Ring {
    pub(crate) pages: U64,
    pub(crate) npages: U32,
    pub(crate) depth: U32,
    pub(crate) stride: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    Ring,
    bindings::virtio_rdma_ring,
    [pages, npages, depth, stride, reserved]
);

/// `struct virtio_rdma_ring_record`: the first bytes of a ring.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct RingRecord {
    pub(crate) producer: U32,
    pub(crate) consumer: U32,
    pub(crate) flags: U32,
    pub(crate) arm: U32,
    pub(crate) reserved: [U32; 12],
}
same_layout!(
    RingRecord,
    bindings::virtio_rdma_ring_record,
    [producer, consumer, flags, arm, reserved]
);
const _: () = assert!(core::mem::size_of::<RingRecord>() <= RING_SLOTS as usize);

/// `struct virtio_rdma_ring_cqe`: a slot of a completion ring.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct RingCqe {
    pub(crate) cqe: CqReq,
    pub(crate) seq: U32,
    pub(crate) reserved: [U32; 3],
}
same_layout!(
    RingCqe,
    bindings::virtio_rdma_ring_cqe,
    [cqe, seq, reserved]
);

/// `struct virtio_rdma_cmd_create_cq_ring`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdCreateCqRing {
    pub(crate) ring: Ring,
    pub(crate) comp_vq: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    CmdCreateCqRing,
    bindings::virtio_rdma_cmd_create_cq_ring,
    [ring, comp_vq, reserved]
);

/// `struct virtio_rdma_cmd_resize_cq_ring`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdResizeCqRing {
    pub(crate) ring: Ring,
    pub(crate) cqn: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    CmdResizeCqRing,
    bindings::virtio_rdma_cmd_resize_cq_ring,
    [ring, cqn, reserved]
);

/// `struct virtio_rdma_rsp_resize_cq_ring`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct RspResizeCqRing {
    pub(crate) produced: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    RspResizeCqRing,
    bindings::virtio_rdma_rsp_resize_cq_ring,
    [produced, reserved]
);

/// `VIRTIO_RDMA_QP_RING_F_USER`: the rings of a QP belong to a process.
pub(crate) const QP_RING_F_USER: u32 = bindings::VIRTIO_RDMA_QP_RING_F_USER;

/// `struct virtio_rdma_cmd_create_qp_ring`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CmdCreateQpRing {
    pub(crate) qp: CmdCreateQp,
    pub(crate) sq: Ring,
    pub(crate) rq: Ring,
    pub(crate) flags: U32,
    pub(crate) reserved: U32,
}
same_layout!(
    CmdCreateQpRing,
    bindings::virtio_rdma_cmd_create_qp_ring,
    [qp, sq, rq, flags, reserved]
);

/// `struct virtio_rdma_comp_event`: an armed CQ with rings has completions.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CompEvent {
    pub(crate) cqn: U32,
    pub(crate) reserved: U32,
}
same_layout!(CompEvent, bindings::virtio_rdma_comp_event, [cqn, reserved]);

/// `struct virtio_rdma_event`: one asynchronous event, written by the device into an event
/// buffer.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct Event {
    pub(crate) event_type: U32,
    pub(crate) element: U32,
}
same_layout!(Event, bindings::virtio_rdma_event, [event_type, element]);

/// `enum virtio_rdma_event_type`.
pub(crate) mod event {
    use kernel::bindings;

    pub(crate) const CQ_ERR: u32 = bindings::virtio_rdma_event_type_VIRTIO_RDMA_EVENT_CQ_ERR;
    pub(crate) const QP_FATAL: u32 = bindings::virtio_rdma_event_type_VIRTIO_RDMA_EVENT_QP_FATAL;
    pub(crate) const QP_REQ_ERR: u32 =
        bindings::virtio_rdma_event_type_VIRTIO_RDMA_EVENT_QP_REQ_ERR;
    pub(crate) const QP_ACCESS_ERR: u32 =
        bindings::virtio_rdma_event_type_VIRTIO_RDMA_EVENT_QP_ACCESS_ERR;
    pub(crate) const SRQ_LIMIT_REACHED: u32 =
        bindings::virtio_rdma_event_type_VIRTIO_RDMA_EVENT_SRQ_LIMIT_REACHED;
    pub(crate) const QP_LAST_WQE_REACHED: u32 =
        bindings::virtio_rdma_event_type_VIRTIO_RDMA_EVENT_QP_LAST_WQE_REACHED;

    // The protocol's values are the verbs' (`enum ib_event_type`).
    const _: () = {
        assert!(CQ_ERR == bindings::ib_event_type_IB_EVENT_CQ_ERR);
        assert!(QP_FATAL == bindings::ib_event_type_IB_EVENT_QP_FATAL);
        assert!(QP_REQ_ERR == bindings::ib_event_type_IB_EVENT_QP_REQ_ERR);
        assert!(QP_ACCESS_ERR == bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR);
        assert!(SRQ_LIMIT_REACHED == bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED);
        assert!(QP_LAST_WQE_REACHED == bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED);
    };
}

// The user ABI (`include/uapi/rdma/virtio_rdma-abi.h`): between the driver and a process of
// the same machine, so in the CPU's byte order.

/// `VIRTIO_RDMA_UVERBS_ABI_VERSION`: the version of the user ABI.
pub(crate) const UVERBS_ABI_VERSION: u32 = bindings::VIRTIO_RDMA_UVERBS_ABI_VERSION;

/// `VIRTIO_RDMA_CAP_USER_QP`: user CQs, QPs and AHs are offered.
pub(crate) const CAP_USER_QP: u64 = bindings::VIRTIO_RDMA_CAP_USER_QP as u64;

/// `VIRTIO_RDMA_CAP_RINGS`: user CQs and QPs have queues in the process's memory.
pub(crate) const CAP_RINGS: u64 = bindings::VIRTIO_RDMA_CAP_RINGS as u64;

/// `struct virtio_rdma_alloc_ucontext_resp`: the driver's answer to a process opening the
/// device.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct AllocUcontextResp {
    pub(crate) caps: u64,
}
same_layout!(
    AllocUcontextResp,
    bindings::virtio_rdma_alloc_ucontext_resp,
    [caps]
);

/// `struct virtio_rdma_uring`: where a user QP's ring is mapped and how it is laid out.
#[repr(C)]
#[derive(Clone, Copy, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct Uring {
    pub(crate) offset: u64,
    pub(crate) length: u32,
    pub(crate) depth: u32,
    pub(crate) stride: u32,
    pub(crate) slots: u32,
}
same_layout!(
    Uring,
    bindings::virtio_rdma_uring,
    [offset, length, depth, stride, slots]
);

/// `struct virtio_rdma_uring_ctrl`: the ring's indices, at the start of the mapping.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct UringCtrl {
    pub(crate) producer: u32,
    pub(crate) consumer: u32,
}
same_layout!(
    UringCtrl,
    bindings::virtio_rdma_uring_ctrl,
    [producer, consumer]
);

/// `struct virtio_rdma_create_qp_resp`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CreateQpResp {
    pub(crate) sq: Uring,
    pub(crate) rq: Uring,
}
same_layout!(CreateQpResp, bindings::virtio_rdma_create_qp_resp, [sq, rq]);

/// `struct virtio_rdma_ucqe`: a slot of a CQ's ring (the completion in the device's form).
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct Ucqe {
    pub(crate) cqe: CqReq,
    pub(crate) seq: u32,
    pub(crate) reserved: [u32; 3],
}
same_layout!(Ucqe, bindings::virtio_rdma_ucqe, [cqe, seq, reserved]);

/// `struct virtio_rdma_create_cq_resp`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CreateCqResp {
    pub(crate) ring: Uring,
}
same_layout!(CreateCqResp, bindings::virtio_rdma_create_cq_resp, [ring]);

/// `struct virtio_rdma_create_ah_resp`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CreateAhResp {
    pub(crate) av: Av,
}
same_layout!(CreateAhResp, bindings::virtio_rdma_create_ah_resp, [av]);

/// `struct virtio_rdma_create_cq_cmd`: the ring of a user CQ (with [`CAP_RINGS`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CreateCqCmd {
    pub(crate) addr: u64,
    pub(crate) depth: u32,
    pub(crate) reserved: u32,
}
same_layout!(
    CreateCqCmd,
    bindings::virtio_rdma_create_cq_cmd,
    [addr, depth, reserved]
);

/// `struct virtio_rdma_resize_cq_cmd`: the new ring of a user CQ (with [`CAP_RINGS`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct ResizeCqCmd {
    pub(crate) addr: u64,
    pub(crate) depth: u32,
    pub(crate) reserved: u32,
}
same_layout!(
    ResizeCqCmd,
    bindings::virtio_rdma_resize_cq_cmd,
    [addr, depth, reserved]
);

/// `struct virtio_rdma_resize_cq_resp`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct ResizeCqResp {
    pub(crate) ring: Uring,
    pub(crate) produced: u32,
    pub(crate) reserved: u32,
}
same_layout!(
    ResizeCqResp,
    bindings::virtio_rdma_resize_cq_resp,
    [ring, produced, reserved]
);

/// `struct virtio_rdma_create_qp_cmd`: the rings of a user QP (with [`CAP_RINGS`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CreateQpCmd {
    pub(crate) sq_addr: u64,
    pub(crate) rq_addr: u64,
    pub(crate) sq_depth: u32,
    pub(crate) sq_stride: u32,
    pub(crate) rq_depth: u32,
    pub(crate) rq_stride: u32,
}
same_layout!(
    CreateQpCmd,
    bindings::virtio_rdma_create_qp_cmd,
    [sq_addr, rq_addr, sq_depth, sq_stride, rq_depth, rq_stride]
);

/// `struct virtio_rdma_create_srq_cmd`.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct CreateSrqCmd {
    pub(crate) addr: u64,
    pub(crate) depth: u32,
    pub(crate) stride: u32,
    pub(crate) reserved: u32,
    pub(crate) reserved1: u32,
}
same_layout!(
    CreateSrqCmd,
    bindings::virtio_rdma_create_srq_cmd,
    [addr, depth, stride, reserved, reserved1]
);
