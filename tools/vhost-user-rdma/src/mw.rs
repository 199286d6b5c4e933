// SPDX-License-Identifier: GPL-2.0
//! Memory windows: a range of an MR that a remote peer reaches with the
//! window's own rkey, bound and unbound by work requests (BIND_MW, and for
//! type 2 LOCAL_INV and SEND_WITH_INV) rather than by commands.
//!
//! A window's handle comes from the MR handle space, so that the handle of
//! an rkey names either an MR or a window, never both. The rules are IB's
//! (C10-72..75, o10-36.2.2, o10-37.2.26/30/40), as rxe implements them:
//! a type 1 window is bound and rebound at will (length 0 unbinds it) and
//! is reachable from any QP of its PD; a type 2 window is bound only when
//! free, to one QP, through which alone it is reachable, and is freed by
//! invalidation.

use crate::ib::*;
use crate::mr::{Mr, MrKind};

/// A window's binding: which part of which MR, with which rights.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The MR bound to.
    pub mrn: u32,
    /// Type 2: the QP bound to (the only one that reaches the window).
    pub qpn: Option<u32>,
    /// First byte, as an address in the MR.
    pub addr: u64,
    /// Bytes.
    pub length: u64,
    /// Remote rights, and `IB_ZERO_BASED` (remote addresses count from 0).
    pub access: u32,
}

/// One memory window.
#[derive(Clone, Debug)]
pub struct Mw {
    /// Owning protection domain.
    pub pdn: u32,
    /// `IB_MW_TYPE_1` or `IB_MW_TYPE_2`.
    pub mw_type: u8,
    /// Consumer key byte (low 8 bits of the rkey).
    pub key: u8,
    /// Current binding, if any.
    pub bound: Option<Binding>,
}

/// A BIND_MW work request, as the device reads it.
#[derive(Clone, Debug)]
pub struct BindReq {
    /// The window's current rkey.
    pub mw_rkey: u32,
    /// Its rkey once bound (same handle, consumer's key byte).
    pub new_rkey: u32,
    /// lkey of the MR to bind to (ignored when `length` is 0).
    pub mr_lkey: u32,
    /// Window start, an address in the MR (zero-based windows too).
    pub addr: u64,
    /// Window length; 0 unbinds a type 1 window.
    pub length: u64,
    /// Rights of the window (`MW_ACCESS_SUPPORTED`).
    pub access: u32,
}

impl Mw {
    /// A new, unbound window of `pdn`.
    pub fn new(pdn: u32, mw_type: u8, key: u8) -> Self {
        Mw {
            pdn,
            mw_type,
            key,
            bound: None,
        }
    }

    /// Checks `req`, posted on QP `qpn` of PD `pdn`, against this window
    /// and `mr` (the valid MR its `mr_lkey` names, if any): the binding it
    /// makes (`None`: unbind), or why not.
    pub fn check_bind(
        &self,
        qpn: u32,
        pdn: u32,
        req: &BindReq,
        mr: Option<(u32, &Mr)>,
    ) -> Result<Option<Binding>, &'static str> {
        if req.new_rkey >> 8 != req.mw_rkey >> 8 {
            return Err("the new rkey names another window");
        }
        let access = req.access & !MW_ACCESS_IGNORED;
        if access & !MW_ACCESS_SUPPORTED != 0 {
            return Err("access flags a window cannot have");
        }
        match self.mw_type {
            IB_MW_TYPE_1 if access & IB_ZERO_BASED != 0 => {
                return Err("a type 1 window is not zero-based (o10-36.2.2)")
            }
            IB_MW_TYPE_2 if self.bound.is_some() => {
                return Err("a type 2 window is bound only when free (o10-37.2.30)")
            }
            IB_MW_TYPE_2 if req.length == 0 => {
                return Err("a type 2 window is freed by invalidation (o10-37.2.40)")
            }
            _ => {}
        }
        if self.pdn != pdn {
            return Err("the window is of another PD than the QP (C10-72)");
        }
        if req.length == 0 {
            return Ok(None);
        }
        let Some((mrn, mr)) = mr else {
            return Err("no valid MR has that lkey");
        };
        if mr.pdn != pdn {
            return Err("the MR is of another PD than the QP");
        }
        if mr.kind == MrKind::Dma {
            return Err("the DMA MR has no windows");
        }
        if mr.access & IB_ACCESS_MW_BIND == 0 {
            return Err("the MR was not registered with IB_ACCESS_MW_BIND (C10-73)");
        }
        let writes = IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC;
        if access & writes != 0 && mr.access & IB_ACCESS_LOCAL_WRITE == 0 {
            return Err("a writable window needs an MR with local write (C10-74)");
        }
        let end = req.addr.checked_add(req.length);
        let mr_end = mr.map.iova.checked_add(mr.map.length);
        if req.addr < mr.map.iova || end.is_none() || end > mr_end {
            return Err("the window does not lie within the MR (C10-75)");
        }
        Ok(Some(Binding {
            mrn,
            qpn: (self.mw_type == IB_MW_TYPE_2).then_some(qpn),
            addr: req.addr,
            length: req.length,
            access,
        }))
    }

    /// Whether a remote `access` of `[addr, addr + len)` through QP `qpn`
    /// of PD `pdn` may use this window: the MR address it starts at.
    pub fn reach(
        &self,
        qpn: u32,
        pdn: u32,
        addr: u64,
        len: u64,
        access: u32,
    ) -> Option<(u32, u64)> {
        let b = self.bound.as_ref()?;
        if self.pdn != pdn || b.qpn.is_some_and(|q| q != qpn) || b.access & access != access {
            return None;
        }
        let off = if b.access & IB_ZERO_BASED != 0 {
            addr
        } else {
            addr.checked_sub(b.addr)?
        };
        if off.checked_add(len)? > b.length {
            return None;
        }
        Some((b.mrn, b.addr + off))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mr::PageMap;

    fn mr(access: u32) -> Mr {
        Mr {
            pdn: 1,
            kind: MrKind::User,
            access,
            key: 0,
            valid: true,
            map: PageMap {
                iova: 0x1000,
                length: 0x2000,
                pages: vec![0x10_0000, 0x20_0000],
            },
            staged: None,
        }
    }

    fn req(addr: u64, length: u64, access: u32) -> BindReq {
        BindReq {
            mw_rkey: 0x305,
            new_rkey: 0x306,
            mr_lkey: 0x200,
            addr,
            length,
            access,
        }
    }

    const RW: u32 = IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE;

    #[test]
    fn binding_follows_ib_rules() {
        let lw = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_MW_BIND;
        let m = mr(lw);
        let w1 = Mw::new(1, IB_MW_TYPE_1, 5);
        let b = w1.check_bind(7, 1, &req(0x1800, 0x100, RW), Some((2, &m)));
        assert_eq!(b.map(|b| b.map(|b| (b.mrn, b.qpn))), Ok(Some((2, None))));
        // Each rule refuses on its own.
        let bad = |w: &Mw, pdn, r: BindReq, m: &Mr| w.check_bind(7, pdn, &r, Some((2, m))).is_err();
        assert!(bad(&w1, 2, req(0x1800, 0x100, RW), &m), "C10-72");
        assert!(
            bad(&w1, 1, req(0x1800, 0x100, RW), &mr(IB_ACCESS_LOCAL_WRITE)),
            "C10-73"
        );
        assert!(
            bad(&w1, 1, req(0x1800, 0x100, RW), &mr(IB_ACCESS_MW_BIND)),
            "C10-74"
        );
        assert!(bad(&w1, 1, req(0xfff, 0x100, RW), &m), "C10-75 below");
        assert!(bad(&w1, 1, req(0x2f01, 0x100, RW), &m), "C10-75 above");
        assert!(
            bad(&w1, 1, req(0x1800, 0x100, RW | IB_ZERO_BASED), &m),
            "o10-36.2.2"
        );
        assert!(
            bad(&w1, 1, req(0x1800, 0x100, RW | (1 << 12)), &m),
            "unknown bits"
        );
        // Local write means nothing for a window: accepted and dropped, as
        // rxe does and rdma-core's tests (which bind with it) expect.
        let b = w1.check_bind(
            7,
            1,
            &req(0x1800, 0x100, RW | IB_ACCESS_LOCAL_WRITE),
            Some((2, &m)),
        );
        assert_eq!(b.map(|b| b.map(|b| b.access)), Ok(Some(RW)));
        let mut other = req(0x1800, 0x100, RW);
        other.new_rkey = 0x406;
        assert!(bad(&w1, 1, other, &m), "another window's rkey");
        // Length 0 unbinds a type 1 window; a type 2 one is freed only by
        // invalidation, and is bound only while free.
        assert_eq!(w1.check_bind(7, 1, &req(0, 0, 0), None), Ok(None));
        let mut w2 = Mw::new(1, IB_MW_TYPE_2, 5);
        assert!(
            w2.check_bind(7, 1, &req(0, 0, 0), None).is_err(),
            "o10-37.2.40"
        );
        let b = w2.check_bind(7, 1, &req(0x1800, 0x100, RW), Some((2, &m)));
        w2.bound = b.expect("binds").clone();
        assert_eq!(w2.bound.as_ref().map(|b| b.qpn), Some(Some(7)));
        assert!(bad(&w2, 1, req(0x1800, 0x100, RW), &m), "o10-37.2.30");
    }

    #[test]
    fn a_window_is_reached_only_within_its_binding() {
        let mut w = Mw::new(1, IB_MW_TYPE_2, 5);
        assert_eq!(
            w.reach(7, 1, 0x1800, 8, IB_ACCESS_REMOTE_READ),
            None,
            "unbound"
        );
        w.bound = Some(Binding {
            mrn: 2,
            qpn: Some(7),
            addr: 0x1800,
            length: 0x100,
            access: IB_ACCESS_REMOTE_READ,
        });
        let read = IB_ACCESS_REMOTE_READ;
        assert_eq!(w.reach(7, 1, 0x1800, 0x100, read), Some((2, 0x1800)));
        assert_eq!(w.reach(7, 1, 0x17ff, 1, read), None, "below");
        assert_eq!(w.reach(7, 1, 0x18f8, 9, read), None, "past the end");
        assert_eq!(w.reach(8, 1, 0x1800, 8, read), None, "another QP");
        assert_eq!(w.reach(7, 2, 0x1800, 8, read), None, "another PD");
        assert_eq!(
            w.reach(7, 1, 0x1800, 8, IB_ACCESS_REMOTE_WRITE),
            None,
            "no right"
        );
        // Zero-based: addresses count from the window's start.
        if let Some(b) = w.bound.as_mut() {
            b.access |= IB_ZERO_BASED;
        }
        assert_eq!(w.reach(7, 1, 0x10, 8, read), Some((2, 0x1810)));
        assert_eq!(w.reach(7, 1, 0xf9, 8, read), None);
        assert_eq!(w.reach(7, 1, u64::MAX, 8, read), None);
    }
}
