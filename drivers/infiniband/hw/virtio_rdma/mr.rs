// SPDX-License-Identifier: GPL-2.0

//! Memory regions: each is a device MR named by its MR number; its keys are
//! `(mrn << 8) | key` (`include/uapi/linux/virtio_rdma.h`).

use kernel::{
    prelude::*,
    rdma::{self, NewMr},
};

use crate::{abi, verbs::RdmaDev};

/// The driver's part of an MR.
pub(crate) struct Mr {
    mrn: u32,
}

type Device<'a> = rdma::Device<RdmaDev<'a>>;

/// Checks the keys the device gave MR `mrn`: both must name it.
pub(crate) fn check_keys(rsp: &abi::RspCreateMr) -> Result<NewMr<Mr>> {
    let (mrn, lkey, rkey) = (rsp.mrn.get(), rsp.lkey.get(), rsp.rkey.get());
    if abi::key_mrn(lkey) != mrn || abi::key_mrn(rkey) != mrn {
        return Err(EPROTO);
    }
    Ok(NewMr {
        data: Mr { mrn },
        lkey,
        rkey,
    })
}

/// Creates the DMA MR of PD `pdn`: all memory, by DMA address.
pub(crate) fn get_dma(dev: &Device<'_>, pdn: u32, access: u32) -> Result<NewMr<Mr>> {
    let rsp: abi::RspCreateMr = dev.ctrl.exec(
        abi::cmd::GET_DMA_MR,
        &abi::CmdGetDmaMr {
            pdn: pdn.into(),
            access_flags: access.into(),
        },
    )?;
    check_keys(&rsp).inspect_err(|_| {
        dev_err!(
            dev.as_ref(),
            "GET_DMA_MR: keys {:#x}/{:#x} do not name MR {}\n",
            rsp.lkey.get(),
            rsp.rkey.get(),
            rsp.mrn.get()
        );
        dereg(dev, Mr { mrn: rsp.mrn.get() });
    })
}

/// Deregisters an MR on the device.
pub(crate) fn dereg(dev: &Device<'_>, mr: Mr) {
    let cmd = abi::CmdDeregMr {
        mrn: mr.mrn.into(),
        reserved: 0.into(),
    };
    if let Err(e) = dev.ctrl.exec::<_, ()>(abi::cmd::DEREG_MR, &cmd) {
        dev_err!(dev.as_ref(), "DEREG_MR {}: {:?}\n", mr.mrn, e);
    }
}

#[kunit_tests(virtio_rdma_mr)]
mod tests {
    use super::*;
    use zerocopy::FromZeros;

    fn rsp(mrn: u32, lkey: u32, rkey: u32) -> abi::RspCreateMr {
        let mut r = abi::RspCreateMr::new_zeroed();
        r.mrn.set(mrn);
        r.lkey.set(lkey);
        r.rkey.set(rkey);
        r
    }

    #[test]
    fn keys_must_name_the_mr() {
        assert!(check_keys(&rsp(5, 0x500, 0x500)).is_ok());
        assert!(check_keys(&rsp(5, 0x5ab, 0x5ab)).is_ok());
        assert_eq!(check_keys(&rsp(5, 0x600, 0x500)).err(), Some(EPROTO));
        assert_eq!(check_keys(&rsp(5, 0x500, 0x400)).err(), Some(EPROTO));
        assert_eq!(
            check_keys(&rsp(0xff_ffff, 0xffff_ff00, 0xffff_ff00)).err(),
            None
        );
        assert_eq!(check_keys(&rsp(0x100_0000, 0, 0)).err(), Some(EPROTO));
    }
}
