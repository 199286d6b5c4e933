// SPDX-License-Identifier: GPL-2.0

//! Memory regions: each is a device MR named by its MR number; its keys are
//! `(mrn << 8) | key` (`include/uapi/linux/virtio_rdma.h`).

use kernel::{
    new_spinlock_irq,
    prelude::*,
    rdma::{self, DmaTable, NewMr},
    sync::SpinLockIrq,
};

use crate::{abi, verbs::RdmaDev};

/// The page size of MR page tables (`VIRTIO_RDMA_PAGE_SIZE`).
const PAGE_SIZE: u32 = 1 << 12;

/// The page table of a fast-registration MR, which REG_MR work requests point the device at.
pub(crate) struct PageTable {
    pub(crate) table: DmaTable,
    /// Pages set by the last mapping.
    pub(crate) npages: u32,
}

/// The driver's part of an MR.
pub(crate) struct Mr {
    pub(crate) mrn: u32,
    /// The page table of a fast-registration MR.
    pub(crate) pages: Option<Pin<KBox<SpinLockIrq<PageTable>>>>,
}

type Device<'a> = rdma::Device<RdmaDev<'a>>;

/// Checks the keys the device gave MR `mrn`: both must name it.
pub(crate) fn check_keys(rsp: &abi::RspCreateMr) -> Result<NewMr<Mr>> {
    let (mrn, lkey, rkey) = (rsp.mrn.get(), rsp.lkey.get(), rsp.rkey.get());
    if abi::key_mrn(lkey) != mrn || abi::key_mrn(rkey) != mrn {
        return Err(EPROTO);
    }
    Ok(NewMr {
        data: Mr { mrn, pages: None },
        lkey,
        rkey,
    })
}

/// Creates a fast-registration MR of PD `pdn` for up to `max_num_sg` pages.
pub(crate) fn alloc(dev: &Device<'_>, pdn: u32, max_num_sg: u32) -> Result<NewMr<Mr>> {
    let max = dev.config.raw.max_fast_reg_page_list_len.get();
    if max_num_sg == 0 || max_num_sg > max {
        return Err(EINVAL);
    }
    let table = DmaTable::new(dev, max_num_sg as usize)?;
    let pages = KBox::pin_init(
        new_spinlock_irq!(PageTable { table, npages: 0 }, "virtio_rdma_mr_pages"),
        GFP_KERNEL,
    )?;
    let rsp: abi::RspCreateMr = dev.ctrl.exec(
        abi::cmd::CREATE_MR,
        &abi::CmdCreateMr {
            pdn: pdn.into(),
            access_flags: 0.into(),
            max_num_sg: max_num_sg.into(),
            reserved: 0.into(),
        },
    )?;
    let mut new = check_keys(&rsp).inspect_err(|_| {
        dev_err!(
            dev.as_ref(),
            "CREATE_MR: keys do not name MR {}\n",
            rsp.mrn.get()
        );
        dereg(
            dev,
            Mr {
                mrn: rsp.mrn.get(),
                pages: None,
            },
        );
    })?;
    new.data.pages = Some(pages);
    Ok(new)
}

/// Starts mapping a fast-registration MR: its pages must be the device's page size.
pub(crate) fn map_start(mr: &rdma::Mr<RdmaDev<'_>>) -> Result {
    let pages = mr.pages.as_ref().ok_or(EINVAL)?;
    if mr.page_size() != PAGE_SIZE {
        return Err(EINVAL);
    }
    pages.lock().npages = 0;
    Ok(())
}

/// Adds a page to the MR being mapped.
pub(crate) fn set_page(mr: &rdma::Mr<RdmaDev<'_>>, addr: u64) -> Result {
    let pages = mr.pages.as_ref().ok_or(EINVAL)?;
    let mut p = pages.lock();
    let n = p.npages;
    p.table.set(n as usize, addr).map_err(|_| ENOMEM)?;
    p.npages = n + 1;
    Ok(())
}

/// The REG_MR element of fast-registration MR `mr` with `key` and `access`, its page table made
/// visible to the device.
pub(crate) fn reg_element(mr: &rdma::Mr<RdmaDev<'_>>, key: u32, access: u32) -> Result<abi::SqReg> {
    let pages = mr.pages.as_ref().ok_or(EINVAL)?;
    let p = pages.lock();
    p.table.sync_for_device();
    Ok(abi::SqReg {
        mrn: mr.mrn.into(),
        key: key.into(),
        access: access.into(),
        npages: p.npages.into(),
        iova: mr.iova().into(),
        length: mr.length().into(),
        pages: p.table.dma_addr().into(),
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
        dereg(
            dev,
            Mr {
                mrn: rsp.mrn.get(),
                pages: None,
            },
        );
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
