// SPDX-License-Identifier: GPL-2.0

//! Memory windows: a process's only (uverbs), each a device window named by its handle, from
//! the MRs' handle space. The driver allocates and frees them (ALLOC_MW, DEALLOC_MW); the
//! process binds and invalidates them with work requests, which the device checks (the
//! protocol document's "ALLOC_MW, DEALLOC_MW").

use kernel::{
    bindings,
    prelude::*,
    rdma::{self, MwType, NewMw},
};

use crate::{abi, device::RdmaDev};

type Device<'a> = rdma::Device<RdmaDev<'a>>;

/// The driver's part of a window: its device handle.
pub(crate) struct Mw {
    mwn: u32,
}

/// Whether the device offers memory windows.
pub(crate) fn supported(dev: &Device<'_>) -> bool {
    let c = &dev.config.raw;
    let flag = bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW as u64;
    c.device_cap_flags.get() & flag != 0 && c.max_mw.get() > 0
}

/// Checks the device's answer to ALLOC_MW: a handle, and an rkey that names it.
fn check_rsp(rsp: &abi::RspAllocMw) -> Result<(u32, u32)> {
    let (mwn, rkey) = (rsp.mwn.get(), rsp.rkey.get());
    if mwn == 0 || abi::key_mrn(rkey) != mwn {
        return Err(EPROTO);
    }
    Ok((mwn, rkey))
}

/// Allocates a window of type `mw_type` in PD `pdn`.
pub(crate) fn alloc(dev: &Device<'_>, pdn: u32, mw_type: MwType) -> Result<NewMw<Mw>> {
    if !supported(dev) {
        return Err(EOPNOTSUPP);
    }
    let cmd = abi::CmdAllocMw {
        pdn: pdn.into(),
        mw_type: mw_type.raw(),
        reserved: [0; 3],
    };
    let rsp = dev
        .ctrl
        .exec::<_, abi::RspAllocMw>(abi::cmd::ALLOC_MW, &cmd)?;
    match check_rsp(&rsp) {
        Ok((mwn, rkey)) => Ok(NewMw {
            data: Mw { mwn },
            rkey,
        }),
        Err(e) => {
            dev_err!(
                dev.as_ref(),
                "ALLOC_MW: rkey {:#x} does not name window {}\n",
                rsp.rkey.get(),
                rsp.mwn.get()
            );
            // Whatever the device made, it is not handed out.
            dealloc(dev, Mw { mwn: rsp.mwn.get() });
            Err(e)
        }
    }
}

/// Frees a window (the device unbinds a bound one first).
pub(crate) fn dealloc(dev: &Device<'_>, mw: Mw) {
    let cmd = abi::CmdDeallocMw {
        mwn: mw.mwn.into(),
        reserved: 0.into(),
    };
    match dev.ctrl.exec::<_, ()>(abi::cmd::DEALLOC_MW, &cmd) {
        Ok(()) | Err(ENOENT) => {}
        // A window holds no memory of the guest: only the device's handle stays in use.
        Err(e) => dev_err!(dev.as_ref(), "DEALLOC_MW {}: {:?}\n", mw.mwn, e),
    }
}

#[kunit_tests(virtio_rdma_mw)]
mod tests {
    use super::*;
    use zerocopy::FromZeros;

    #[test]
    fn a_window_rkey_must_name_it() {
        let rsp = |mwn: u32, rkey: u32| {
            let mut r = abi::RspAllocMw::new_zeroed();
            r.mwn.set(mwn);
            r.rkey.set(rkey);
            r
        };
        assert_eq!(check_rsp(&rsp(7, 0x7a5)).ok(), Some((7, 0x7a5)));
        assert_eq!(check_rsp(&rsp(7, 0x8a5)).err(), Some(EPROTO));
        assert_eq!(check_rsp(&rsp(0, 0x0a5)).err(), Some(EPROTO));
    }
}
