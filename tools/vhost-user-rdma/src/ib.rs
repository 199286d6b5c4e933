// SPDX-License-Identifier: GPL-2.0
//! Verbs values from `<rdma/ib_verbs.h>` that the device protocol carries
//! (QP types and states, attribute masks, access flags, work request and
//! completion opcodes, completion status and flags). They are part of the
//! kernel's stable user ABI, so the device may rely on them.

#![allow(missing_docs)]

// enum ib_qp_type
pub const IB_QPT_GSI: u8 = 1;
pub const IB_QPT_RC: u8 = 2;
pub const IB_QPT_UC: u8 = 3;
pub const IB_QPT_UD: u8 = 4;
pub const IB_QPT_XRC_INI: u8 = 9;
pub const IB_QPT_XRC_TGT: u8 = 10;

// enum ib_qp_state
pub const IB_QPS_RESET: u8 = 0;
pub const IB_QPS_INIT: u8 = 1;
pub const IB_QPS_RTR: u8 = 2;
pub const IB_QPS_RTS: u8 = 3;
pub const IB_QPS_SQD: u8 = 4;
pub const IB_QPS_SQE: u8 = 5;
pub const IB_QPS_ERR: u8 = 6;

// enum ib_qp_attr_mask
pub const IB_QP_STATE: u32 = 1;
pub const IB_QP_CUR_STATE: u32 = 1 << 1;
pub const IB_QP_EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
pub const IB_QP_ACCESS_FLAGS: u32 = 1 << 3;
pub const IB_QP_PKEY_INDEX: u32 = 1 << 4;
pub const IB_QP_PORT: u32 = 1 << 5;
pub const IB_QP_QKEY: u32 = 1 << 6;
pub const IB_QP_AV: u32 = 1 << 7;
pub const IB_QP_PATH_MTU: u32 = 1 << 8;
pub const IB_QP_TIMEOUT: u32 = 1 << 9;
pub const IB_QP_RETRY_CNT: u32 = 1 << 10;
pub const IB_QP_RNR_RETRY: u32 = 1 << 11;
pub const IB_QP_RQ_PSN: u32 = 1 << 12;
pub const IB_QP_MAX_QP_RD_ATOMIC: u32 = 1 << 13;
pub const IB_QP_ALT_PATH: u32 = 1 << 14;
pub const IB_QP_MIN_RNR_TIMER: u32 = 1 << 15;
pub const IB_QP_SQ_PSN: u32 = 1 << 16;
pub const IB_QP_MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
pub const IB_QP_PATH_MIG_STATE: u32 = 1 << 18;
pub const IB_QP_CAP: u32 = 1 << 19;
pub const IB_QP_DEST_QPN: u32 = 1 << 20;

// enum ib_access_flags
pub const IB_ACCESS_LOCAL_WRITE: u32 = 1;
pub const IB_ACCESS_REMOTE_WRITE: u32 = 1 << 1;
pub const IB_ACCESS_REMOTE_READ: u32 = 1 << 2;
pub const IB_ACCESS_REMOTE_ATOMIC: u32 = 1 << 3;
pub const IB_ACCESS_MW_BIND: u32 = 1 << 4;
pub const IB_ZERO_BASED: u32 = 1 << 5;
pub const IB_ACCESS_FLUSH_GLOBAL: u32 = 1 << 8;
pub const IB_ACCESS_FLUSH_PERSISTENT: u32 = 1 << 9;
/// Access bits the device implements for MRs: FLUSH to global visibility,
/// not to persistence (guest memory is no persistent memory).
pub const ACCESS_SUPPORTED: u32 = IB_ACCESS_LOCAL_WRITE
    | IB_ACCESS_REMOTE_WRITE
    | IB_ACCESS_REMOTE_READ
    | IB_ACCESS_REMOTE_ATOMIC
    | IB_ACCESS_MW_BIND
    | IB_ACCESS_FLUSH_GLOBAL;
/// Access bits a QP may grant its peer: the MRs' and both FLUSH placements
/// (IBA 1.5; as rxe accepts them): a persistent FLUSH then fails at the
/// MR, which cannot grant it.
pub const QP_ACCESS_SUPPORTED: u32 =
    ACCESS_SUPPORTED | IB_ACCESS_FLUSH_GLOBAL | IB_ACCESS_FLUSH_PERSISTENT;
/// Access bits a window may be bound with.
pub const MW_ACCESS_SUPPORTED: u32 =
    IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC | IB_ZERO_BASED;
/// Bits a bind may carry that mean nothing for a window (local access is
/// the MR's): ignored, as rxe and rdma-core's own tests (which bind with
/// local write) expect.
pub const MW_ACCESS_IGNORED: u32 = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_MW_BIND;

// enum ib_uverbs_flush_type, enum ib_uverbs_flush_level
pub const IB_FLUSH_GLOBAL: u8 = 1;
pub const IB_FLUSH_PERSISTENT: u8 = 1 << 1;
pub const IB_FLUSH_RANGE: u8 = 0;
pub const IB_FLUSH_MR: u8 = 1;

// enum ib_mw_type
pub const IB_MW_TYPE_1: u8 = 1;
pub const IB_MW_TYPE_2: u8 = 2;

// enum ib_wr_opcode
pub const IB_WR_RDMA_WRITE: u8 = 0;
pub const IB_WR_RDMA_WRITE_WITH_IMM: u8 = 1;
pub const IB_WR_SEND: u8 = 2;
pub const IB_WR_SEND_WITH_IMM: u8 = 3;
pub const IB_WR_RDMA_READ: u8 = 4;
pub const IB_WR_ATOMIC_CMP_AND_SWP: u8 = 5;
pub const IB_WR_ATOMIC_FETCH_AND_ADD: u8 = 6;
pub const IB_WR_LOCAL_INV: u8 = 7;
pub const IB_WR_BIND_MW: u8 = 8;
pub const IB_WR_SEND_WITH_INV: u8 = 9;
pub const IB_WR_FLUSH: u8 = 14;
pub const IB_WR_ATOMIC_WRITE: u8 = 15;
pub const IB_WR_REG_MR: u8 = 0x20;

// enum ib_send_flags
pub const IB_SEND_FENCE: u32 = 1;
pub const IB_SEND_SIGNALED: u32 = 1 << 1;
pub const IB_SEND_SOLICITED: u32 = 1 << 2;
pub const IB_SEND_INLINE: u32 = 1 << 3;

// enum ib_wc_status
pub const IB_WC_SUCCESS: u8 = 0;
pub const IB_WC_LOC_LEN_ERR: u8 = 1;
pub const IB_WC_LOC_QP_OP_ERR: u8 = 2;
pub const IB_WC_LOC_PROT_ERR: u8 = 4;
pub const IB_WC_WR_FLUSH_ERR: u8 = 5;
pub const IB_WC_MW_BIND_ERR: u8 = 6;
pub const IB_WC_REM_INV_REQ_ERR: u8 = 9;
pub const IB_WC_REM_ACCESS_ERR: u8 = 10;
pub const IB_WC_REM_OP_ERR: u8 = 11;
pub const IB_WC_RETRY_EXC_ERR: u8 = 12;
pub const IB_WC_RNR_RETRY_EXC_ERR: u8 = 13;
pub const IB_WC_GENERAL_ERR: u8 = 21;

// enum ib_wc_opcode
pub const IB_WC_SEND: u8 = 0;
pub const IB_WC_RDMA_WRITE: u8 = 1;
pub const IB_WC_RDMA_READ: u8 = 2;
pub const IB_WC_COMP_SWAP: u8 = 3;
pub const IB_WC_FETCH_ADD: u8 = 4;
pub const IB_WC_BIND_MW: u8 = 5;
pub const IB_WC_LOCAL_INV: u8 = 6;
pub const IB_WC_FLUSH: u8 = 8;
pub const IB_WC_ATOMIC_WRITE: u8 = 9;
pub const IB_WC_REG_MR: u8 = 10;
pub const IB_WC_RECV: u8 = 1 << 7;
pub const IB_WC_RECV_RDMA_WITH_IMM: u8 = (1 << 7) + 1;

// enum ib_wc_flags
pub const IB_WC_GRH: u32 = 1;
pub const IB_WC_WITH_IMM: u32 = 1 << 1;
pub const IB_WC_WITH_INVALIDATE: u32 = 1 << 2;
pub const IB_WC_WITH_SMAC: u32 = 1 << 4;
pub const IB_WC_WITH_NETWORK_HDR_TYPE: u32 = 1 << 6;

// enum rdma_network_type
pub const RDMA_NETWORK_IPV4: u8 = 2;
pub const RDMA_NETWORK_IPV6: u8 = 3;

/// Bytes of the GRH at the start of every UD/GSI receive buffer.
pub const GRH_LEN: usize = 40;
/// The Q_Key bit that makes a UD send use the QP's own Q_Key.
pub const QKEY_PRIVILEGED: u32 = 0x8000_0000;
/// rnr_retry value meaning "retry forever".
pub const RNR_RETRY_INFINITE: u8 = 7;
