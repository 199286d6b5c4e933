// SPDX-License-Identifier: GPL-2.0

//! XRC domains (the protocol document's "XRC domains"): each a device domain named by its
//! handle. The core shares a domain between processes and counts its SRQs and target QPs; the
//! driver only allocates and frees it (ALLOC_XRCD, DEALLOC_XRCD). XRC SRQs are made in
//! `srq.rs`, target QPs in `qp.rs`; initiator QPs are ring QPs without a receive ring.

use kernel::{prelude::*, rdma};

use crate::{abi, device::RdmaDev};

type Device<'a> = rdma::Device<RdmaDev<'a>>;

/// The driver's part of an XRC domain: its device handle.
pub(crate) struct Xrcd {
    pub(crate) xrcdn: u32,
}

/// Whether the device offers XRC (only with SRQs, which only rings have: `config.rs`).
pub(crate) fn supported(dev: &Device<'_>) -> bool {
    dev.config.raw.max_xrcd.get() > 0
}

/// Allocates a domain.
pub(crate) fn alloc(dev: &Device<'_>) -> Result<Xrcd> {
    if !supported(dev) {
        return Err(EOPNOTSUPP);
    }
    dev.health.check()?;
    let rsp: abi::RspAllocXrcd = dev.ctrl.exec(abi::cmd::ALLOC_XRCD, &())?;
    let xrcdn = rsp.xrcdn.get();
    if xrcdn == 0 {
        dev_err!(dev.as_ref(), "ALLOC_XRCD returned handle 0\n");
        return Err(EPROTO);
    }
    Ok(Xrcd { xrcdn })
}

/// Frees a domain nothing uses any more. The core frees it whatever the device answers; a
/// failed device holds nothing, so that answer is fine (`health.rs`).
pub(crate) fn dealloc(dev: &Device<'_>, xrcd: Xrcd) {
    let cmd = abi::CmdDeallocXrcd {
        xrcdn: xrcd.xrcdn.into(),
        reserved: 0.into(),
    };
    if let Err(e) = dev.ctrl.exec::<_, ()>(abi::cmd::DEALLOC_XRCD, &cmd) {
        dev_err!(dev.as_ref(), "DEALLOC_XRCD {}: {:?}\n", xrcd.xrcdn, e);
    }
}
