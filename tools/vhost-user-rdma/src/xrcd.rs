// SPDX-License-Identifier: GPL-2.0
//! XRC (IB's eXtended Reliable Connected transport): domains, XRC SRQs and
//! XRC target QPs, and the rule that ties a message to an XRC SRQ.
//!
//! An XRC domain groups XRC SRQs and XRC_TGT QPs. An XRC_INI QP is an RC
//! QP with a send ring only; each of its remote work requests names (in
//! `wr.xrc.remote_srqn`) the SRQ of the remote domain its message is for.
//! The XRC_TGT QP it is connected to has no queues, CQs or PD of its own:
//! per message, the named SRQ stands in for its PD and receive queue, and
//! the SRQ's own CQ for its recv CQ ([`target`]). A message naming
//! anything but an XRC SRQ of the target's domain fails at the initiator
//! with `IB_WC_REM_INV_REQ_ERR` (IB's invalid XRC extended header).
//!
//! The device's domains are a [`HandleTable`](crate::resources::HandleTable)
//! of `ctrl::State` (numbered from 1, freed by a reset with the rest); what
//! uses a domain records its number, so DEALLOC_XRCD looks for users
//! instead of keeping counts that could drift.

use log::debug;
use zerocopy::little_endian::U32;
use zerocopy::IntoBytes;

use crate::abi::*;
use crate::ctrl::{CmdResult, Ctrl};
use crate::ib::{IB_QPT_XRC_INI, IB_QPT_XRC_TGT};
use crate::qp::{Qp, QpCaps, NO_CQ};
use crate::srq::{Refusal, SrqLink, SrqTable};

/// What makes an SRQ an XRC SRQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XrcSrq {
    /// Its domain.
    pub xrcdn: u32,
    /// The ring CQ its receive completions go to (a target QP has none).
    pub cqn: u32,
}

/// The XRC SRQ a message from an XRC_INI QP is for, as its target QP
/// uses it in place of a PD, receive queue and recv CQ of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    /// The SRQ's number.
    pub srqn: u32,
    /// The SRQ's PD: its receives' lkeys, and the message's rkeys.
    pub pdn: u32,
    /// The SRQ's CQ.
    pub cqn: u32,
}

impl Target {
    /// The SRQ as a QP with an SRQ keeps it.
    pub fn link(&self) -> SrqLink {
        SrqLink {
            srqn: self.srqn,
            pdn: self.pdn,
        }
    }
}

/// The SRQ `srqn` a message to a target QP of domain `xrcdn` names: it
/// must be an XRC SRQ of that domain.
pub fn target(srqs: &SrqTable, xrcdn: u32, srqn: u32) -> Result<Target, Refusal> {
    let srq = srqs.get(srqn).ok_or("no such SRQ")?;
    let xrc = srq.xrc.ok_or("a basic SRQ, not an XRC SRQ")?;
    if xrc.xrcdn != xrcdn {
        return Err("an XRC SRQ of another domain");
    }
    Ok(Target {
        srqn,
        pdn: srq.pdn,
        cqn: xrc.cqn,
    })
}

/// The QP type that answers requests of a QP of type `requester`: an
/// XRC_INI QP talks to an XRC_TGT QP, every other type to its own.
pub fn responder_type(requester: u8) -> u8 {
    match requester {
        IB_QPT_XRC_INI => IB_QPT_XRC_TGT,
        t => t,
    }
}

impl Ctrl {
    /// Whether the XRC commands are served: the driver took the rings
    /// (SRQs are only there) and the device offers domains.
    pub(crate) fn xrc_enabled(&self) -> bool {
        self.rings_acked() && self.limits().max_xrcd() > 0
    }

    fn xrc_refuse(&self, cmd: &str, why: std::fmt::Arguments<'_>, status: u8) -> u8 {
        self.guest_warn(format_args!("{cmd}: {why}"));
        status
    }

    /// NOT_FOUND (and a warning) unless domain `xrcdn` exists.
    fn check_xrcd(&self, cmd: &str, xrcdn: u32) -> Result<(), u8> {
        if self.lock().xrcds.contains(xrcdn) {
            return Ok(());
        }
        Err(self.xrc_refuse(
            cmd,
            format_args!("XRC domain {xrcdn} does not exist"),
            VIRTIO_RDMA_S_NOT_FOUND,
        ))
    }

    pub(crate) fn alloc_xrcd(&self) -> CmdResult {
        const CMD: &str = "ALLOC_XRCD";
        let Some(xrcdn) = self.lock().xrcds.alloc() else {
            let max = self.limits().max_xrcd();
            return Err(self.xrc_refuse(
                CMD,
                format_args!("all {max} XRC domains are in use"),
                VIRTIO_RDMA_S_NO_RESOURCE,
            ));
        };
        debug!("{}: {CMD} -> xrcdn {xrcdn}", self.name());
        Ok(VirtioRdmaRspAllocXrcd {
            xrcdn: U32::new(xrcdn),
            reserved: U32::new(0),
        }
        .as_bytes()
        .to_vec())
    }

    pub(crate) fn dealloc_xrcd(&self, body: &[u8]) -> CmdResult {
        const CMD: &str = "DEALLOC_XRCD";
        let req: VirtioRdmaCmdDeallocXrcd = self.parse(CMD, body)?;
        let xrcdn = req.xrcdn.get();
        let mut st = self.lock();
        if !st.xrcds.contains(xrcdn) {
            drop(st);
            return Err(self.xrc_refuse(
                CMD,
                format_args!("XRC domain {xrcdn} does not exist"),
                VIRTIO_RDMA_S_NOT_FOUND,
            ));
        }
        let used = st.srqs.uses_xrcd(xrcdn) || st.qps.values().any(|q| q.xrcdn == Some(xrcdn));
        if used {
            drop(st);
            return Err(self.xrc_refuse(
                CMD,
                format_args!("XRC domain {xrcdn} has XRC SRQs or XRC_TGT QPs"),
                VIRTIO_RDMA_S_BUSY,
            ));
        }
        st.xrcds.free(xrcdn);
        drop(st);
        debug!("{}: {CMD} xrcdn {xrcdn}", self.name());
        Ok(Vec::new())
    }

    /// CREATE_SRQ's request and checks (shared), for a domain and a ring CQ.
    pub(crate) fn create_xrc_srq(&self, body: &[u8]) -> CmdResult {
        const CMD: &str = "CREATE_XRC_SRQ";
        let req: VirtioRdmaCmdCreateXrcSrq = self.parse(CMD, body)?;
        let (xrcdn, cqn) = (req.xrcdn.get(), req.cqn.get());
        self.check_xrcd(CMD, xrcdn)?;
        let ring_cq = self.lock().cq(cqn).map(|cq| cq.ring.is_some());
        match ring_cq {
            None => {
                return Err(self.xrc_refuse(
                    CMD,
                    format_args!("cqn {cqn} does not exist"),
                    VIRTIO_RDMA_S_NOT_FOUND,
                ));
            }
            // Its completions name a process's QP: they go to a ring.
            Some(false) => {
                return Err(self.xrc_refuse(
                    CMD,
                    format_args!("cqn {cqn} is not a ring CQ"),
                    VIRTIO_RDMA_S_INVALID,
                ));
            }
            Some(true) => {}
        }
        self.insert_srq(CMD, &req.srq, Some(XrcSrq { xrcdn, cqn }))
    }

    pub(crate) fn create_xrc_tgt_qp(&self, body: &[u8]) -> CmdResult {
        const CMD: &str = "CREATE_XRC_TGT_QP";
        let req: VirtioRdmaCmdCreateXrcTgtQp = self.parse(CMD, body)?;
        let xrcdn = req.xrcdn.get();
        self.check_xrcd(CMD, xrcdn)?;
        let mut st = self.lock();
        let Some(qpn) = st.free_ring_qpn(self.limits().max_qp()) else {
            drop(st);
            return Err(self.xrc_refuse(
                CMD,
                format_args!("no free QP number"),
                VIRTIO_RDMA_S_NO_RESOURCE,
            ));
        };
        // No queues, no CQs, no PD: per message, the XRC SRQ it names
        // stands in for them.
        let caps = QpCaps {
            max_send_wr: 0,
            max_send_sge: 0,
            max_recv_wr: 0,
            max_recv_sge: 0,
            max_inline_data: 0,
        };
        let mut qp = Qp::new(0, IB_QPT_XRC_TGT, false, caps, (NO_CQ, NO_CQ));
        qp.xrcdn = Some(xrcdn);
        st.qps.insert(qpn, qp);
        drop(st);
        debug!("{}: {CMD} xrcdn {xrcdn} -> qpn {qpn}", self.name());
        Ok(VirtioRdmaRspCreateQp {
            qpn: U32::new(qpn),
            reserved: U32::new(0),
        }
        .as_bytes()
        .to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::srq::{test_srq, Srq};

    fn srq(pdn: u32, xrc: Option<XrcSrq>) -> Srq {
        test_srq(pdn, 0, xrc)
    }

    #[test]
    fn a_message_reaches_only_an_xrc_srq_of_the_targets_domain() {
        let mut t = SrqTable::new(4);
        let basic = t.insert(srq(1, None)).expect("srq");
        let mine = XrcSrq { xrcdn: 2, cqn: 7 };
        let other = XrcSrq { xrcdn: 3, cqn: 8 };
        let a = t.insert(srq(5, Some(mine))).expect("srq");
        let b = t.insert(srq(6, Some(other))).expect("srq");
        assert_eq!(
            target(&t, 2, a),
            Ok(Target {
                srqn: a,
                pdn: 5,
                cqn: 7
            })
        );
        assert!(target(&t, 2, b).is_err(), "another domain's");
        assert!(target(&t, 2, basic).is_err(), "a basic SRQ");
        assert!(target(&t, 2, 0).is_err() && target(&t, 2, 99).is_err());
        assert!(t.uses_xrcd(2) && t.uses_xrcd(3) && !t.uses_xrcd(1));
        assert!(t.reports_to(7) && !t.reports_to(1));
        assert_eq!(responder_type(IB_QPT_XRC_INI), IB_QPT_XRC_TGT);
        assert_eq!(responder_type(crate::ib::IB_QPT_RC), crate::ib::IB_QPT_RC);
    }
}
