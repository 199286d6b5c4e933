// SPDX-License-Identifier: GPL-2.0
//! Queue pairs: what CREATE_QP fixed, the attributes MODIFY_QP set, and the
//! IB state machine with its per-transition attribute masks (as the
//! kernel's `ib_modify_qp_is_ok` checks them for RC, UC, UD, GSI, XRC_INI
//! and XRC_TGT QPs).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use crate::abi::VirtioRdmaCqReq;
use crate::abi::{VirtioRdmaQpAttr, VIRTIO_RDMA_S_BAD_STATE, VIRTIO_RDMA_S_INVALID};
use crate::counter_sets::CounterSet;
use crate::ib::*;
use crate::limits;
use crate::ring::WorkRing;
use crate::srq::SrqLink;
use crate::transport::requester::Requester;
use crate::transport::responder::Responder;
pub use crate::transport::rnr_delay_us;
use crate::transport::PSN_MASK;
use crate::wqe::{RecvWqe, SendWqe};

/// The CQ number of a CQ a QP does not have (an XRC_INI QP's recv CQ,
/// an XRC_TGT QP's two): no CQ has it, so nothing is ever written there
/// and DESTROY_CQ finds no QP holding a real CQ through it.
pub const NO_CQ: u32 = u32::MAX;

/// What CREATE_QP fixed.
#[derive(Clone, Copy, Debug)]
pub struct QpCaps {
    /// SQ depth.
    pub max_send_wr: u32,
    /// SGEs per SQ element.
    pub max_send_sge: u32,
    /// RQ depth.
    pub max_recv_wr: u32,
    /// SGEs per RQ element.
    pub max_recv_sge: u32,
    /// Inline bytes per SQ element.
    pub max_inline_data: u32,
}

/// Why an SQ element waits to be sent again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// The responder RNR NAK'd it: it goes again after the NAK's timer, or
    /// as soon as a receive is posted there; `rnr_retry` counts (7 is
    /// infinite).
    Rnr,
    /// Nothing answered it (it or its answer was lost, or no responder took
    /// it): it goes again, with the same PSN, when the transport timer
    /// (`timeout`) runs out; `retry_cnt` counts (7 is seven).
    Unanswered,
}

/// An SQ element waiting to be sent again.
#[derive(Debug)]
pub struct Resend {
    /// Head of its descriptor chain (returned to the used ring when done).
    pub head: u16,
    /// The parsed element.
    pub wqe: SendWqe,
    /// What it waits for.
    pub why: Why,
    /// Retries left; for RNR, [`RNR_RETRY_INFINITE`] never runs out.
    pub retries_left: u8,
    /// When the next timed retry is due; never (`None`) for a QP whose
    /// `timeout` is 0, which IB defines as infinite.
    pub next_try: Option<Instant>,
}

/// An RC/UC message larger than one chunk (over a lossy link, than one
/// packet), moving a chunk per step (see `engine/transfer.rs`); the SQ
/// does not advance until it is done.
#[derive(Debug)]
pub struct Transfer {
    /// Head of the element's descriptor chain.
    pub head: u16,
    /// The element.
    pub wqe: SendWqe,
    /// Bytes the requester knows arrived (acknowledged; a READ's, placed).
    pub done: u64,
    /// Bytes the responder took (of a SEND or WRITE): beyond `done` when
    /// an answer was lost; taken again they are duplicates.
    pub taken: u64,
    /// How far chunks were sent (counted as sent) so far.
    pub tried_to: u64,
    /// Retries left after a timeout or a sequence-error NAK; `None`: the
    /// QP's `retry_cnt` (the count starts over when the message moves on).
    pub retries_left: Option<u8>,
    /// Bytes of the message.
    pub total: u64,
    /// The responder's receive this message fills (SEND, WRITE_WITH_IMM):
    /// the token of the one it holds for it, and its completion once the
    /// message ends (with whether it was solicited).
    pub recv: Option<(u64, VirtioRdmaCqReq, bool)>,
}

/// A receive a responder QP took from its RQ for a message that moves in
/// chunks. It is used before any other receive: by the next message if
/// that one is abandoned (its requester reset, flushed or destroyed), as an
/// IB responder reuses the receive of a message that never completed.
#[derive(Debug)]
pub struct HeldRecv {
    /// Head of its descriptor chain.
    pub head: u16,
    /// The parsed element.
    pub wqe: RecvWqe,
    /// Names it for the transfer that filled it.
    pub token: u64,
    /// The CQ its completion goes to (the QP's recv CQ, or for a target
    /// QP the XRC SRQ's it came from).
    pub cqn: u32,
    /// The PD its lkeys are checked against.
    pub pdn: u32,
    /// The XRC SRQ it came from (a target QP takes from several).
    pub xrc_srqn: Option<u32>,
}

/// A connected QP's link to its peer on the network
/// (`engine/wire/connected.rs`): for RC, IB's requester and responder on
/// packets (`transport/`) and the SQ elements the requester carries; for
/// UC, its sender and receiver. Each half is made when the QP first sends
/// or receives there.
#[derive(Debug, Default)]
pub struct WireConn {
    /// Made at the first send (in RTS, where `sq_psn` is final).
    pub requester: Option<Requester>,
    /// Made at the first request received (in RTR or RTS).
    pub responder: Option<Responder>,
    /// SQ elements posted and not completed, oldest first, under the ID
    /// the requester knows each by: (ID, head, element, payload bytes).
    pub posted: VecDeque<(u64, u16, SendWqe, u64)>,
    /// The next ID.
    pub next_id: u64,
    /// Payload bytes the posted elements hold (gathered copies).
    pub buffered: u64,
    /// UC: made at the first send (in RTS).
    pub uc_sender: Option<crate::transport::uc::Sender>,
    /// UC: made at the first packet received (in RTR or RTS).
    pub uc_receiver: Option<crate::transport::uc::Receiver>,
}

/// The rings of a QP whose queues are in guest memory.
#[derive(Debug, Clone)]
pub struct QpRings {
    /// Send queue.
    pub sq: Arc<WorkRing>,
    /// Receive queue; `None` for a QP with an SRQ.
    pub rq: Option<Arc<WorkRing>>,
    /// The rings belong to a process: only what a process may post runs.
    pub user: bool,
}

/// One queue pair.
#[derive(Debug)]
pub struct Qp {
    /// Protection domain.
    pub pdn: u32,
    /// `enum ib_qp_type`: GSI, RC, UC, UD, XRC_INI or XRC_TGT.
    pub qp_type: u8,
    /// Every SQ element generates a completion.
    pub sq_sig_all: bool,
    /// Capacities.
    pub caps: QpCaps,
    /// CQ of SQ completions.
    pub send_cqn: u32,
    /// CQ of RQ completions.
    pub recv_cqn: u32,
    /// Current attributes (`qp_state` is the state).
    pub attr: VirtioRdmaQpAttr,
    /// The SQ element waiting to be sent again, if any.
    pub resend: Option<Resend>,
    /// Responder resources: the original values of the last atomics it
    /// executed, by PSN, to answer a duplicate without running it again.
    pub atomic_replies: VecDeque<(u32, u64)>,
    /// The SQ element moving in chunks, if any.
    pub transfer: Option<Transfer>,
    /// The receive a message moving in chunks fills, if any.
    pub held_recv: Option<HeldRecv>,
    /// Its rings, if its queues are in guest memory (else virtqueues).
    pub rings: Option<QpRings>,
    /// The SRQ its receives come from, if any (it then has no RQ).
    pub srq: Option<SrqLink>,
    /// The counter set it counts in (BIND_COUNTER_SET), if any; else the
    /// port's own counters.
    pub counters: Option<Arc<CounterSet>>,
    /// An XRC_TGT QP's domain (`xrcd.rs`).
    pub xrcdn: Option<u32>,
    /// A connected QP's link to its peer on the network, if the peer is there.
    pub wire: Option<Box<WireConn>>,
    /// Requests a UC responder dropped for their key since the QP last
    /// left RESET (`MAX_BAD_KEYS` moves it to error).
    pub bad_keys: u32,
}

impl Qp {
    /// A QP in RESET.
    pub fn new(pdn: u32, qp_type: u8, sq_sig_all: bool, caps: QpCaps, cqs: (u32, u32)) -> Self {
        let attr = VirtioRdmaQpAttr {
            port_num: 1,
            path_mtu: limits::IB_MTU_1024,
            ..Default::default()
        };
        Qp {
            pdn,
            qp_type,
            sq_sig_all,
            caps,
            send_cqn: cqs.0,
            recv_cqn: cqs.1,
            attr,
            resend: None,
            atomic_replies: VecDeque::new(),
            transfer: None,
            held_recv: None,
            rings: None,
            srq: None,
            counters: None,
            xrcdn: None,
            wire: None,
            bad_keys: 0,
        }
    }

    /// `enum ib_qp_state`.
    pub fn state(&self) -> u8 {
        self.attr.qp_state
    }

    /// Whether the QP may receive (RTR or RTS).
    pub fn can_receive(&self) -> bool {
        matches!(self.state(), IB_QPS_RTR | IB_QPS_RTS)
    }

    /// Whether this is a UD or GSI QP.
    pub fn is_ud(&self) -> bool {
        matches!(self.qp_type, IB_QPT_UD | IB_QPT_GSI)
    }

    /// Whether it takes receives from SRQ `srqn` (of domain `xrcdn` if an
    /// XRC SRQ): a QP created with it, or a target QP of its domain.
    pub fn takes_from(&self, srqn: u32, xrcdn: Option<u32>) -> bool {
        match xrcdn {
            Some(d) => self.xrcdn == Some(d),
            None => self.srq.is_some_and(|l| l.srqn == srqn),
        }
    }
}

/// (required, optional) attribute masks of a transition, `None` if the
/// transition is not allowed. The values are those of the kernel's
/// `qp_state_table` (drivers/infiniband/core/verbs.c) for the types and
/// states the device implements (no SQD).
fn masks(qp_type: u8, cur: u8, next: u8) -> Option<(u32, u32)> {
    // XRC's two halves are RC QPs, each without the other half's
    // attributes (the kernel's table): an initiator never responds (no
    // RDMA READ/atomic responder depth, no RNR timer), a target never
    // requests (no retry counts, no initiator depth).
    let (ini, tgt) = (qp_type == IB_QPT_XRC_INI, qp_type == IB_QPT_XRC_TGT);
    let responder = if ini {
        0
    } else {
        IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER
    };
    let requester = if tgt {
        0
    } else {
        IB_QP_RETRY_CNT | IB_QP_RNR_RETRY | IB_QP_MAX_QP_RD_ATOMIC
    };
    let rc = qp_type == IB_QPT_RC || ini || tgt;
    let uc = qp_type == IB_QPT_UC;
    let gsi = qp_type == IB_QPT_GSI;
    // What INIT accepts: RC and UC need access flags and a port, UD a Q_Key
    // and a port, GSI (port fixed) only a Q_Key.
    let init_attrs = if rc || uc {
        IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_ACCESS_FLAGS
    } else if gsi {
        IB_QP_PKEY_INDEX | IB_QP_QKEY
    } else {
        IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY
    };
    let ud_opt = IB_QP_PKEY_INDEX | IB_QP_QKEY;
    // UC has RC's path but no acknowledgements: none of RC's RDMA
    // READ/atomic depths, RNR timer, ACK timeout or retry counts.
    let uc_opt = IB_QP_CUR_STATE | IB_QP_ALT_PATH | IB_QP_ACCESS_FLAGS | IB_QP_PATH_MIG_STATE;
    Some(match (cur, next) {
        (_, IB_QPS_RESET) if cur <= IB_QPS_ERR => (0, 0),
        (_, IB_QPS_ERR) if cur <= IB_QPS_ERR => (0, 0),
        (IB_QPS_RESET, IB_QPS_INIT) => (init_attrs, 0),
        (IB_QPS_INIT, IB_QPS_INIT) => (0, init_attrs),
        (IB_QPS_INIT, IB_QPS_RTR) if rc => (
            IB_QP_AV | IB_QP_PATH_MTU | IB_QP_DEST_QPN | IB_QP_RQ_PSN | responder,
            IB_QP_ALT_PATH | IB_QP_ACCESS_FLAGS | IB_QP_PKEY_INDEX,
        ),
        (IB_QPS_INIT, IB_QPS_RTR) if uc => (
            IB_QP_AV | IB_QP_PATH_MTU | IB_QP_DEST_QPN | IB_QP_RQ_PSN,
            IB_QP_ALT_PATH | IB_QP_ACCESS_FLAGS | IB_QP_PKEY_INDEX,
        ),
        (IB_QPS_INIT, IB_QPS_RTR) => (0, ud_opt),
        (IB_QPS_RTR, IB_QPS_RTS) if rc => (
            IB_QP_TIMEOUT | IB_QP_SQ_PSN | requester,
            IB_QP_CUR_STATE
                | IB_QP_ALT_PATH
                | IB_QP_ACCESS_FLAGS
                | (responder & IB_QP_MIN_RNR_TIMER)
                | IB_QP_PATH_MIG_STATE,
        ),
        (IB_QPS_RTR, IB_QPS_RTS) if uc => (IB_QP_SQ_PSN, uc_opt),
        (IB_QPS_RTR, IB_QPS_RTS) => (IB_QP_SQ_PSN, IB_QP_CUR_STATE | IB_QP_QKEY),
        (IB_QPS_RTS, IB_QPS_RTS) if rc => (
            0,
            IB_QP_CUR_STATE
                | IB_QP_ACCESS_FLAGS
                | IB_QP_ALT_PATH
                | IB_QP_PATH_MIG_STATE
                | (responder & IB_QP_MIN_RNR_TIMER),
        ),
        (IB_QPS_RTS, IB_QPS_RTS) if uc => (0, uc_opt),
        (IB_QPS_RTS, IB_QPS_RTS) => (0, IB_QP_CUR_STATE | IB_QP_QKEY),
        (IB_QPS_SQE, IB_QPS_RTS) if uc => (0, IB_QP_CUR_STATE | IB_QP_ACCESS_FLAGS),
        (IB_QPS_SQE, IB_QPS_RTS) if !rc => (0, IB_QP_CUR_STATE | IB_QP_QKEY),
        _ => return None,
    })
}

/// Checks MODIFY_QP on `qp` and applies it; returns (old, new) state.
/// `port_mtu` is the port's IB MTU (`enum ib_mtu`), the largest path MTU
/// (a larger one would make frames its link does not take);
/// `gid_ok(index)` says whether the port's GID table holds that entry.
/// Nothing changes when the command fails.
pub fn modify(
    qp: &mut Qp,
    mask: u32,
    a: &VirtioRdmaQpAttr,
    port_mtu: u8,
    gid_ok: impl Fn(u8) -> bool,
) -> Result<(u8, u8), u8> {
    let cur = qp.state();
    if mask & IB_QP_CUR_STATE != 0 && a.cur_qp_state != cur {
        return Err(VIRTIO_RDMA_S_BAD_STATE);
    }
    let next = if mask & IB_QP_STATE != 0 {
        a.qp_state
    } else {
        cur
    };
    if next > IB_QPS_ERR {
        return Err(VIRTIO_RDMA_S_INVALID);
    }
    let Some((req, opt)) = masks(qp.qp_type, cur, next) else {
        return Err(VIRTIO_RDMA_S_BAD_STATE);
    };
    let attrs = mask & !(IB_QP_STATE | IB_QP_CUR_STATE);
    if attrs & req != req || attrs & !(req | opt) != 0 {
        return Err(VIRTIO_RDMA_S_INVALID);
    }
    // Values.
    let bad = (mask & IB_QP_PORT != 0 && u32::from(a.port_num) != limits::PHYS_PORT_CNT)
        || (mask & IB_QP_PKEY_INDEX != 0 && a.pkey_index.get() >= limits::PKEY_TBL_LEN)
        || (mask & IB_QP_ACCESS_FLAGS != 0 && a.qp_access_flags.get() & !QP_ACCESS_SUPPORTED != 0)
        || (mask & IB_QP_PATH_MTU != 0 && !(1..=port_mtu).contains(&a.path_mtu))
        || (mask & IB_QP_DEST_QPN != 0 && a.dest_qp_num.get() >= 1 << 24)
        || (mask & IB_QP_RQ_PSN != 0 && a.rq_psn.get() >= 1 << 24)
        || (mask & IB_QP_SQ_PSN != 0 && a.sq_psn.get() >= 1 << 24)
        || (mask & IB_QP_MAX_QP_RD_ATOMIC != 0
            && u32::from(a.max_rd_atomic) > limits::MAX_QP_RD_ATOM)
        || (mask & IB_QP_MAX_DEST_RD_ATOMIC != 0
            && u32::from(a.max_dest_rd_atomic) > limits::MAX_QP_RD_ATOM)
        || (mask & IB_QP_MIN_RNR_TIMER != 0 && a.min_rnr_timer > 31)
        || (mask & IB_QP_TIMEOUT != 0 && a.timeout > 31)
        || (mask & IB_QP_RETRY_CNT != 0 && a.retry_cnt > 7)
        || (mask & IB_QP_RNR_RETRY != 0 && a.rnr_retry > 7)
        || (mask & IB_QP_ALT_PATH != 0)
        || (mask & IB_QP_AV != 0
            && (u32::from(a.ah_attr.port_num) > limits::PHYS_PORT_CNT
                || !gid_ok(a.ah_attr.sgid_index)));
    if bad {
        return Err(VIRTIO_RDMA_S_INVALID);
    }
    let s = &mut qp.attr;
    if mask & IB_QP_PORT != 0 {
        s.port_num = a.port_num;
    }
    if mask & IB_QP_PKEY_INDEX != 0 {
        s.pkey_index = a.pkey_index;
    }
    if mask & IB_QP_QKEY != 0 {
        s.qkey = a.qkey;
    }
    if mask & IB_QP_ACCESS_FLAGS != 0 {
        s.qp_access_flags = a.qp_access_flags;
    }
    if mask & IB_QP_AV != 0 {
        s.ah_attr = a.ah_attr;
    }
    if mask & IB_QP_PATH_MTU != 0 {
        s.path_mtu = a.path_mtu;
    }
    if mask & IB_QP_DEST_QPN != 0 {
        s.dest_qp_num = a.dest_qp_num;
    }
    if mask & IB_QP_RQ_PSN != 0 {
        s.rq_psn = a.rq_psn;
    }
    if mask & IB_QP_SQ_PSN != 0 {
        s.sq_psn = a.sq_psn;
    }
    if mask & IB_QP_MAX_QP_RD_ATOMIC != 0 {
        s.max_rd_atomic = a.max_rd_atomic;
    }
    if mask & IB_QP_MAX_DEST_RD_ATOMIC != 0 {
        s.max_dest_rd_atomic = a.max_dest_rd_atomic;
    }
    if mask & IB_QP_MIN_RNR_TIMER != 0 {
        s.min_rnr_timer = a.min_rnr_timer;
    }
    if mask & IB_QP_TIMEOUT != 0 {
        s.timeout = a.timeout;
    }
    if mask & IB_QP_RETRY_CNT != 0 {
        s.retry_cnt = a.retry_cnt;
    }
    if mask & IB_QP_RNR_RETRY != 0 {
        s.rnr_retry = a.rnr_retry;
    }
    if mask & IB_QP_PATH_MIG_STATE != 0 {
        s.path_mig_state = a.path_mig_state;
    }
    s.qp_state = next;
    s.cur_qp_state = next;
    Ok((cur, next))
}

/// Bytes per packet of `enum ib_mtu` `mtu` (256 << (mtu - 1)).
pub fn mtu_bytes(mtu: u8) -> u64 {
    256 << (mtu.clamp(1, 5) - 1)
}

/// PSNs a request of `opcode` moving `len` bytes takes, as on the wire:
/// one per packet of the path MTU (at least one) for SENDs, RDMA writes and
/// the response of an RDMA read, one for an atomic, an ATOMIC WRITE or a
/// FLUSH.
pub fn packets(opcode: u8, len: u64, mtu: u8) -> u32 {
    if matches!(
        opcode,
        IB_WR_ATOMIC_CMP_AND_SWP | IB_WR_ATOMIC_FETCH_AND_ADD | IB_WR_ATOMIC_WRITE | IB_WR_FLUSH
    ) {
        return 1;
    }
    let n = len.div_ceil(mtu_bytes(mtu)).max(1);
    u32::try_from(n & u64::from(PSN_MASK)).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::little_endian::U32;

    /// [`super::modify`] on a port of IB MTU 1024 (a 1500-byte Ethernet).
    fn modify(
        qp: &mut Qp,
        mask: u32,
        a: &VirtioRdmaQpAttr,
        gid_ok: impl Fn(u8) -> bool,
    ) -> Result<(u8, u8), u8> {
        super::modify(qp, mask, a, limits::IB_MTU_1024, gid_ok)
    }

    fn qp(t: u8) -> Qp {
        let caps = QpCaps {
            max_send_wr: 4,
            max_send_sge: 1,
            max_recv_wr: 4,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        Qp::new(1, t, false, caps, (0, 0))
    }

    fn to(state: u8) -> VirtioRdmaQpAttr {
        VirtioRdmaQpAttr {
            qp_state: state,
            port_num: 1,
            path_mtu: 3,
            ..Default::default()
        }
    }

    /// A QP's access flags say what remote peers may do; unlike an MR's,
    /// remote write without local write is fine (rdma_cm's passive side
    /// asks for exactly that).
    #[test]
    fn qp_access_flags_are_not_mr_access_flags() {
        let init = |access: u32| {
            let mut a = to(IB_QPS_INIT);
            a.qp_access_flags = U32::new(access);
            modify(
                &mut qp(IB_QPT_RC),
                IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_ACCESS_FLAGS,
                &a,
                |_| true,
            )
        };
        let remote = IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC;
        assert_eq!(init(remote), Ok((IB_QPS_RESET, IB_QPS_INIT)));
        assert_eq!(init(0), Ok((IB_QPS_RESET, IB_QPS_INIT)));
        assert_eq!(init(1 << 30), Err(VIRTIO_RDMA_S_INVALID));
    }

    #[test]
    fn psns_count_packets() {
        assert_eq!(packets(IB_WR_SEND, 0, limits::IB_MTU_1024), 1);
        assert_eq!(packets(IB_WR_SEND, 1024, limits::IB_MTU_1024), 1);
        assert_eq!(packets(IB_WR_RDMA_WRITE, 1025, limits::IB_MTU_1024), 2);
        assert_eq!(packets(IB_WR_RDMA_READ, 4096, 1), 16);
        assert_eq!(packets(IB_WR_ATOMIC_FETCH_AND_ADD, 8, 1), 1);
    }

    #[test]
    fn rc_walk() {
        let mut q = qp(IB_QPT_RC);
        let ok = |_| true;
        // RESET -> RTR is not a transition.
        assert_eq!(
            modify(&mut q, IB_QP_STATE, &to(IB_QPS_RTR), ok),
            Err(VIRTIO_RDMA_S_BAD_STATE)
        );
        // INIT needs access flags, port and P_Key index.
        assert_eq!(
            modify(&mut q, IB_QP_STATE | IB_QP_PORT, &to(IB_QPS_INIT), ok),
            Err(VIRTIO_RDMA_S_INVALID)
        );
        let init = IB_QP_STATE | IB_QP_PORT | IB_QP_PKEY_INDEX | IB_QP_ACCESS_FLAGS;
        assert_eq!(modify(&mut q, init, &to(IB_QPS_INIT), ok), Ok((0, 1)));
        // A Q_Key is not an RC attribute.
        assert_eq!(
            modify(&mut q, IB_QP_QKEY, &to(IB_QPS_INIT), ok),
            Err(VIRTIO_RDMA_S_INVALID)
        );
        let rtr = IB_QP_STATE
            | IB_QP_AV
            | IB_QP_PATH_MTU
            | IB_QP_DEST_QPN
            | IB_QP_RQ_PSN
            | IB_QP_MAX_DEST_RD_ATOMIC
            | IB_QP_MIN_RNR_TIMER;
        let mut a = to(IB_QPS_RTR);
        a.dest_qp_num = U32::new(1 << 24);
        assert_eq!(modify(&mut q, rtr, &a, ok), Err(VIRTIO_RDMA_S_INVALID));
        assert_eq!(modify(&mut q, rtr, &to(IB_QPS_RTR), |_| false), Err(2));
        assert_eq!(modify(&mut q, rtr, &to(IB_QPS_RTR), ok), Ok((1, 2)));
        let rts = IB_QP_STATE
            | IB_QP_TIMEOUT
            | IB_QP_RETRY_CNT
            | IB_QP_RNR_RETRY
            | IB_QP_SQ_PSN
            | IB_QP_MAX_QP_RD_ATOMIC;
        assert_eq!(modify(&mut q, rts, &to(IB_QPS_RTS), ok), Ok((2, 3)));
        assert_eq!(modify(&mut q, IB_QP_STATE, &to(IB_QPS_ERR), ok), Ok((3, 6)));
        assert_eq!(
            modify(&mut q, IB_QP_STATE, &to(IB_QPS_RTS), ok),
            Err(VIRTIO_RDMA_S_BAD_STATE)
        );
        assert_eq!(
            modify(&mut q, IB_QP_STATE, &to(IB_QPS_RESET), ok),
            Ok((6, 0))
        );
        assert_eq!(
            modify(&mut q, IB_QP_STATE, &to(9), ok),
            Err(VIRTIO_RDMA_S_INVALID)
        );
    }

    /// The kernel's table: an XRC initiator takes no responder
    /// attributes, a target no requester ones.
    #[test]
    fn xrc_masks() {
        let ok = |_| true;
        let init = IB_QP_STATE | IB_QP_PORT | IB_QP_PKEY_INDEX | IB_QP_ACCESS_FLAGS;
        let path = IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU | IB_QP_DEST_QPN | IB_QP_RQ_PSN;
        let responder = IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER;
        let requester = IB_QP_RETRY_CNT | IB_QP_RNR_RETRY | IB_QP_MAX_QP_RD_ATOMIC;
        let rts = IB_QP_STATE | IB_QP_TIMEOUT | IB_QP_SQ_PSN;
        let mut i = qp(IB_QPT_XRC_INI);
        assert_eq!(modify(&mut i, init, &to(IB_QPS_INIT), ok), Ok((0, 1)));
        assert_eq!(
            modify(&mut i, path | responder, &to(IB_QPS_RTR), ok),
            Err(VIRTIO_RDMA_S_INVALID)
        );
        assert_eq!(modify(&mut i, path, &to(IB_QPS_RTR), ok), Ok((1, 2)));
        assert_eq!(
            modify(&mut i, rts, &to(IB_QPS_RTS), ok),
            Err(VIRTIO_RDMA_S_INVALID),
            "needs the requester attributes"
        );
        assert_eq!(
            modify(&mut i, rts | requester, &to(IB_QPS_RTS), ok),
            Ok((2, 3))
        );
        assert_eq!(
            modify(&mut i, IB_QP_MIN_RNR_TIMER, &to(IB_QPS_RTS), ok),
            Err(VIRTIO_RDMA_S_INVALID)
        );
        let mut t = qp(IB_QPT_XRC_TGT);
        assert_eq!(modify(&mut t, init, &to(IB_QPS_INIT), ok), Ok((0, 1)));
        assert_eq!(
            modify(&mut t, path, &to(IB_QPS_RTR), ok),
            Err(VIRTIO_RDMA_S_INVALID),
            "needs the responder attributes"
        );
        assert_eq!(
            modify(&mut t, path | responder, &to(IB_QPS_RTR), ok),
            Ok((1, 2))
        );
        assert_eq!(
            modify(&mut t, rts | requester, &to(IB_QPS_RTS), ok),
            Err(VIRTIO_RDMA_S_INVALID)
        );
        assert_eq!(
            modify(&mut t, rts | IB_QP_MIN_RNR_TIMER, &to(IB_QPS_RTS), ok),
            Ok((2, 3))
        );
    }

    #[test]
    fn ud_and_gsi_masks() {
        let ok = |_| true;
        let mut q = qp(IB_QPT_UD);
        let init = IB_QP_STATE | IB_QP_PORT | IB_QP_PKEY_INDEX | IB_QP_QKEY;
        assert_eq!(modify(&mut q, init, &to(IB_QPS_INIT), ok), Ok((0, 1)));
        assert_eq!(modify(&mut q, IB_QP_STATE, &to(IB_QPS_RTR), ok), Ok((1, 2)));
        assert_eq!(
            modify(&mut q, IB_QP_STATE, &to(IB_QPS_RTS), ok),
            Err(VIRTIO_RDMA_S_INVALID),
            "RTS needs the SQ PSN"
        );
        let mut g = qp(IB_QPT_GSI);
        assert_eq!(modify(&mut g, init, &to(IB_QPS_INIT), ok), Err(2));
        let init = IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_QKEY;
        assert_eq!(modify(&mut g, init, &to(IB_QPS_INIT), ok), Ok((0, 1)));
    }

    #[test]
    fn uc_masks() {
        let ok = |_| true;
        let mut q = qp(IB_QPT_UC);
        // INIT: RC's attributes, not UD's Q_Key.
        let init = IB_QP_STATE | IB_QP_PORT | IB_QP_PKEY_INDEX | IB_QP_ACCESS_FLAGS;
        assert_eq!(
            modify(&mut q, init & !IB_QP_ACCESS_FLAGS, &to(IB_QPS_INIT), ok),
            Err(VIRTIO_RDMA_S_INVALID),
            "INIT needs access flags"
        );
        assert_eq!(
            modify(&mut q, init | IB_QP_QKEY, &to(IB_QPS_INIT), ok),
            Err(VIRTIO_RDMA_S_INVALID),
            "a Q_Key is not a UC attribute"
        );
        assert_eq!(modify(&mut q, init, &to(IB_QPS_INIT), ok), Ok((0, 1)));
        assert_eq!(
            modify(
                &mut q,
                IB_QP_STATE | IB_QP_ACCESS_FLAGS,
                &to(IB_QPS_INIT),
                ok
            ),
            Ok((1, 1))
        );
        // RTR: the path and PSN, none of RC's read/atomic or RNR attributes.
        let rtr = IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU | IB_QP_DEST_QPN | IB_QP_RQ_PSN;
        assert_eq!(
            modify(&mut q, rtr & !IB_QP_RQ_PSN, &to(IB_QPS_RTR), ok),
            Err(VIRTIO_RDMA_S_INVALID),
            "RTR needs the RQ PSN"
        );
        for rc_only in [IB_QP_MAX_DEST_RD_ATOMIC, IB_QP_MIN_RNR_TIMER, IB_QP_QKEY] {
            assert_eq!(
                modify(&mut q, rtr | rc_only, &to(IB_QPS_RTR), ok),
                Err(VIRTIO_RDMA_S_INVALID),
                "mask {rc_only:#x} on UC INIT -> RTR"
            );
        }
        let opt = IB_QP_ACCESS_FLAGS | IB_QP_PKEY_INDEX;
        assert_eq!(modify(&mut q, rtr | opt, &to(IB_QPS_RTR), ok), Ok((1, 2)));
        // RTS: only the SQ PSN.
        assert_eq!(
            modify(&mut q, IB_QP_STATE, &to(IB_QPS_RTS), ok),
            Err(VIRTIO_RDMA_S_INVALID),
            "RTS needs the SQ PSN"
        );
        let rts = IB_QP_STATE | IB_QP_SQ_PSN;
        for rc_only in [
            IB_QP_TIMEOUT,
            IB_QP_RETRY_CNT,
            IB_QP_RNR_RETRY,
            IB_QP_MAX_QP_RD_ATOMIC,
            IB_QP_MIN_RNR_TIMER,
        ] {
            assert_eq!(
                modify(&mut q, rts | rc_only, &to(IB_QPS_RTS), ok),
                Err(VIRTIO_RDMA_S_INVALID),
                "mask {rc_only:#x} on UC RTR -> RTS"
            );
        }
        let mut a = to(IB_QPS_RTS);
        a.cur_qp_state = IB_QPS_RTR;
        let opt = IB_QP_CUR_STATE | IB_QP_ACCESS_FLAGS | IB_QP_PATH_MIG_STATE;
        assert_eq!(modify(&mut q, rts | opt, &a, ok), Ok((2, 3)));
        // RTS -> RTS: access flags and migration state, no RNR timer.
        let mut a = to(IB_QPS_RTS);
        let access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE;
        a.qp_access_flags = U32::new(access);
        assert_eq!(
            modify(&mut q, IB_QP_STATE | IB_QP_ACCESS_FLAGS, &a, ok),
            Ok((3, 3))
        );
        assert_eq!(q.attr.qp_access_flags.get(), access);
        assert_eq!(
            modify(
                &mut q,
                IB_QP_STATE | IB_QP_MIN_RNR_TIMER,
                &to(IB_QPS_RTS),
                ok
            ),
            Err(VIRTIO_RDMA_S_INVALID)
        );
        assert_eq!(
            modify(&mut q, IB_QP_STATE, &to(IB_QPS_SQD), ok),
            Err(VIRTIO_RDMA_S_BAD_STATE),
            "SQD is not implemented"
        );
        // SQE -> RTS takes access flags (UD's Q_Key is not one); RC has no
        // SQE state.
        q.attr.qp_state = IB_QPS_SQE;
        assert_eq!(
            modify(&mut q, IB_QP_STATE | IB_QP_QKEY, &to(IB_QPS_RTS), ok),
            Err(VIRTIO_RDMA_S_INVALID)
        );
        assert_eq!(
            modify(
                &mut q,
                IB_QP_STATE | IB_QP_ACCESS_FLAGS,
                &to(IB_QPS_RTS),
                ok
            ),
            Ok((5, 3))
        );
        let mut r = qp(IB_QPT_RC);
        r.attr.qp_state = IB_QPS_SQE;
        assert_eq!(
            modify(&mut r, IB_QP_STATE, &to(IB_QPS_RTS), ok),
            Err(VIRTIO_RDMA_S_BAD_STATE)
        );
        assert_eq!(modify(&mut q, IB_QP_STATE, &to(IB_QPS_ERR), ok), Ok((3, 6)));
        assert_eq!(
            modify(&mut q, IB_QP_STATE, &to(IB_QPS_RESET), ok),
            Ok((6, 0))
        );
        assert!(!q.is_ud(), "UC is connected");
    }
}
