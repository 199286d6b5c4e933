// SPDX-License-Identifier: GPL-2.0

//! Memory regions: each is a device MR named by its MR number; its keys are
//! `(mrn << 8) | key` (`include/uapi/linux/virtio_rdma.h`). The device learns the pages of an
//! MR from a page table of DMA addresses: user MRs hand it one at registration (the pages stay
//! pinned until deregistration), fast-registration MRs with each REG_MR work request.

use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{
    bindings, new_spinlock_irq,
    prelude::*,
    rdma::{self, DmaTable, NewMr, Rereg, ResAttrs, Umem, UserRange},
    sync::{Arc, SpinLockIrq},
};

use crate::{abi, ctrl, device::RdmaDev, mw};

/// The page size of MR page tables (`VIRTIO_RDMA_PAGE_SIZE`).
const PAGE_SIZE: u32 = abi::PAGE_SIZE;

/// Pages a user MR's page table may have: the table is one kmalloc allocation (4 MiB).
const MAX_TABLE_PAGES: u64 = (4 << 20) / 8;

/// The largest MR the driver registers (the device may allow more): one page less than a full
/// table, as an MR that does not start on a page boundary spans one page more.
pub(crate) fn max_mr_size(dev: &Device<'_>) -> u64 {
    dev.config
        .raw
        .max_mr_size
        .get()
        .min((MAX_TABLE_PAGES - 1) * u64::from(PAGE_SIZE))
}

/// The page table of a fast-registration MR, which REG_MR work requests point the device at.
pub(crate) struct PageTable {
    pub(crate) table: DmaTable,
    /// Pages set by the last mapping.
    pub(crate) npages: u32,
}

/// What a user MR is over: what reregistering it keeps unless told otherwise.
pub(crate) struct UserMr {
    /// The pinned pages, released after the device has deregistered the MR; shared with the
    /// MR's replacement by a reregistration that keeps the translation.
    umem: Arc<Umem>,
    /// The address work requests give the first byte.
    iova: u64,
    length: u64,
    /// Access rights (`enum ib_access_flags`), as the device was given them; MODIFY_MR
    /// changes them in place, under the reregistration verb (which holds the MR for writing,
    /// so no other reregistration reads them meanwhile).
    access: AtomicU32,
}

impl UserMr {
    fn new(umem: Arc<Umem>, iova: u64, length: u64, access: u32) -> Self {
        Self {
            umem,
            iova,
            length,
            access: AtomicU32::new(access),
        }
    }

    fn access(&self) -> u32 {
        self.access.load(Ordering::Relaxed)
    }
}

/// The driver's part of an MR.
pub(crate) struct Mr {
    pub(crate) mrn: u32,
    /// The page table of a fast-registration MR.
    pub(crate) pages: Option<Pin<KBox<SpinLockIrq<PageTable>>>>,
    /// A user MR's pages and attributes.
    user: Option<UserMr>,
    /// The page table REG_USER_MR lent, which the device copies during the command: held only
    /// by an MR kept because the device did not answer the command (`kept.rs`).
    _lent_table: Option<DmaTable>,
}

impl Mr {
    /// Adds what `rdma res show mr -dd` prints of the driver's view: the device's handle and
    /// the kind of MR (all of memory, pinned user pages, fast registration).
    pub(crate) fn fill_res(&self, attrs: &mut ResAttrs<'_>) -> Result {
        attrs.put_u32(c"mrn", self.mrn)?;
        let kind = match (&self.user, &self.pages) {
            (Some(_), _) => c"user",
            (None, Some(_)) => c"fast_reg",
            (None, None) => c"dma",
        };
        attrs.put_str(c"kind", kind)
    }

    /// An MR the device knows by `mrn` and nothing else yet.
    fn bare(mrn: u32) -> Self {
        Self {
            mrn,
            pages: None,
            user: None,
            _lent_table: None,
        }
    }
}

type Device<'a> = rdma::Device<RdmaDev<'a>>;

/// Checks the keys the device gave MR `mrn`: both must name it.
pub(crate) fn check_keys(rsp: &abi::RspCreateMr) -> Result<NewMr<Mr>> {
    let (mrn, lkey, rkey) = (rsp.mrn.get(), rsp.lkey.get(), rsp.rkey.get());
    if abi::key_mrn(lkey) != mrn || abi::key_mrn(rkey) != mrn {
        return Err(EPROTO);
    }
    Ok(NewMr {
        data: Mr::bare(mrn),
        lkey,
        rkey,
    })
}

/// The MR the device created with `cmd`, holding what the command lent it (`user`, `pages`),
/// if its keys name it; else the device's MR is deregistered again (keeping what it lent if
/// the device does not confirm) and the command fails.
fn accept(
    dev: &Device<'_>,
    cmd: &str,
    rsp: &abi::RspCreateMr,
    user: Option<UserMr>,
    pages: Option<Pin<KBox<SpinLockIrq<PageTable>>>>,
) -> Result<NewMr<Mr>> {
    let mr = Mr {
        user,
        pages,
        ..Mr::bare(rsp.mrn.get())
    };
    match check_keys(rsp) {
        Ok(mut new) => {
            new.data = mr;
            Ok(new)
        }
        Err(e) => {
            dev_err!(
                dev.as_ref(),
                "{}: keys {:#x}/{:#x} do not name MR {}\n",
                cmd,
                rsp.lkey.get(),
                rsp.rkey.get(),
                rsp.mrn.get()
            );
            // A device that will not let it go (BUSY) still holds it: kept as for a failure.
            if let Err((_, mr)) = dereg(dev, mr) {
                dev.kept_mrs.keep(mr);
            }
            Err(e)
        }
    }
}

/// After a command that would have registered an MR failed with `err`: if the device may have
/// carried it out (`ctrl::may_be_done`), it may reach what the command lent (`mr`, of no
/// number), which is kept until the device is reset.
fn unanswered(dev: &Device<'_>, err: Error, mr: Mr) -> Error {
    if ctrl::may_be_done(err) {
        dev.kept_mrs.keep(mr);
    }
    err
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
    let cmd = abi::CmdCreateMr {
        pdn: pdn.into(),
        access_flags: 0.into(),
        max_num_sg: max_num_sg.into(),
        reserved: 0.into(),
    };
    match dev
        .ctrl
        .exec::<_, abi::RspCreateMr>(abi::cmd::CREATE_MR, &cmd)
    {
        Ok(rsp) => accept(dev, "CREATE_MR", &rsp, None, Some(pages)),
        Err(e) => {
            let mr = Mr {
                pages: Some(pages),
                ..Mr::bare(0)
            };
            Err(unanswered(dev, e, mr))
        }
    }
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
    accept(dev, "GET_DMA_MR", &rsp, None, None)
}

/// The page table of `umem` (whose IOVA is set for `PAGE_SIZE` pages): a table of the DMA
/// address of each page, in order, made visible to the device; and its number of pages. What
/// REG_USER_MR and the rings of user CQs and QPs (`rings.rs`) hand the device.
pub(crate) fn page_table(dev: &Device<'_>, umem: &Umem) -> Result<(DmaTable, u32)> {
    let page = PAGE_SIZE as usize;
    let npages = umem.num_dma_blocks(page);
    if npages as u64 > MAX_TABLE_PAGES {
        return Err(EINVAL);
    }
    let mut table = DmaTable::new(dev, npages)?;
    let mut n = 0;
    umem.for_each_dma_block(page, |addr| {
        table.set(n, addr)?;
        n += 1;
        Ok(())
    })?;
    if n != npages {
        return Err(EINVAL);
    }
    table.sync_for_device();
    Ok((table, u32::try_from(npages).map_err(|_| EINVAL)?))
}

/// The access rights a user MR is registered with for `access` (`enum ib_access_flags`) on a
/// device with memory windows if `windows`: [`EOPNOTSUPP`] for rights the device does not
/// have.
fn user_access(access: u32, windows: bool) -> Result<u32> {
    // No on-demand paging, and memory windows (which binding needs) only where the device has
    // them: not supported, as opposed to invalid.
    let mut unsupported = bindings::ib_access_flags_IB_ACCESS_ON_DEMAND;
    if !windows {
        unsupported |= bindings::ib_access_flags_IB_ACCESS_MW_BIND;
    }
    if access & unsupported != 0 {
        return Err(EOPNOTSUPP);
    }
    // Optional flags (relaxed ordering, which perftest asks for) are hints a device without
    // them ignores, as the core allows: the device protocol does not define them.
    Ok(access & !bindings::ib_access_flags_IB_ACCESS_OPTIONAL)
}

/// Pins user memory `[start, start + length)` of the calling process for an MR at `iova`.
fn pin(dev: &Device<'_>, range: UserRange, access: u32) -> Result<Arc<Umem>> {
    if range.length == 0 || range.length > max_mr_size(dev) {
        return Err(EINVAL);
    }
    let mut umem = Umem::get(dev, range.start, range.length, access)?;
    umem.set_iova(PAGE_SIZE as usize, range.virt_addr)?;
    Ok(Arc::new(umem, GFP_KERNEL)?)
}

/// Registers pinned memory `user` as an MR of PD `pdn`: hands the device a page table of its
/// DMA addresses, which the device copies during the command.
fn reg_pinned(dev: &Device<'_>, pdn: u32, user: UserMr) -> Result<NewMr<Mr>> {
    let (table, npages) = page_table(dev, &user.umem)?;
    let cmd = abi::CmdRegUserMr {
        pdn: pdn.into(),
        access_flags: user.access().into(),
        length: user.length.into(),
        iova: user.iova.into(),
        pages: table.dma_addr().into(),
        npages: npages.into(),
        reserved: 0.into(),
    };
    match dev
        .ctrl
        .exec::<_, abi::RspCreateMr>(abi::cmd::REG_USER_MR, &cmd)
    {
        // The device copied the table during the command: it goes now.
        Ok(rsp) => accept(dev, "REG_USER_MR", &rsp, Some(user), None),
        Err(e) => {
            let mr = Mr {
                user: Some(user),
                _lent_table: Some(table),
                ..Mr::bare(0)
            };
            Err(unanswered(dev, e, mr))
        }
    }
}

/// Registers user memory `[start, start + length)` of the calling process as an MR of PD
/// `pdn` at `iova`: pins it and hands the device a page table of its DMA addresses.
pub(crate) fn reg_user(
    dev: &Device<'_>,
    pdn: u32,
    start: u64,
    length: u64,
    iova: u64,
    access: u32,
) -> Result<NewMr<Mr>> {
    let access = user_access(access, mw::supported(dev))?;
    let range = UserRange {
        start,
        length,
        virt_addr: iova,
    };
    let umem = pin(dev, range, access)?;
    reg_pinned(dev, pdn, UserMr::new(umem, iova, length, access))
}

/// Reregisters user MR `old` as of PD `pdn`, over `trans` if given, else over the same pinned
/// pages; with rights `access` if given, else the same. A change of PD or rights alone is made
/// in place with MODIFY_MR (the MR keeps its keys, as IB applications expect); a change of
/// translation, or any change on a device without MODIFY_MR, registers a replacement with keys
/// of its own, which the core swaps in before it deregisters `old` (the protocol document's
/// "Reregistration"). On an error `old` is as it was.
pub(crate) fn rereg_user(
    dev: &Device<'_>,
    old: &Mr,
    pdn: u32,
    trans: Option<UserRange>,
    access: Option<u32>,
) -> Result<Rereg<Mr>> {
    let cur = old.user.as_ref().ok_or(EINVAL)?;
    let access = match access {
        Some(a) => user_access(a, mw::supported(dev))?,
        None => cur.access(),
    };
    let user = match trans {
        Some(range) => UserMr::new(
            pin(dev, range, access)?,
            range.virt_addr,
            range.length,
            access,
        ),
        None => {
            // The same pages, which were pinned for reading only if the rights then did not
            // let the device write: rights that do need them pinned again.
            cur.umem.check_rereg_access(access)?;
            match modify(dev, old.mrn, pdn, access) {
                Ok(()) => {
                    cur.access.store(access, Ordering::Relaxed);
                    return Ok(Rereg::InPlace);
                }
                // A device that predates MODIFY_MR: a replacement over the same pages.
                Err(EOPNOTSUPP) => UserMr::new(cur.umem.clone(), cur.iova, cur.length, access),
                Err(e) => return Err(e),
            }
        }
    };
    reg_pinned(dev, pdn, user).map(Rereg::Replaced)
}

/// MODIFY_MR: the device moves MR `mrn` to PD `pdn` with rights `access`, keeping its keys and
/// pages. [`EOPNOTSUPP`] from a device without the command; [`EBUSY`] while windows are bound
/// to the MR. A device that does not answer may or may not have made the change (the verb
/// fails; the MR's keys still name it, under one set of rights or the other).
fn modify(dev: &Device<'_>, mrn: u32, pdn: u32, access: u32) -> Result {
    let cmd = abi::CmdModifyMr {
        mrn: mrn.into(),
        pdn: pdn.into(),
        access_flags: access.into(),
        reserved: 0.into(),
    };
    dev.ctrl.exec::<_, ()>(abi::cmd::MODIFY_MR, &cmd)
}

/// Deregisters an MR on the device. Unless the device confirms that the MR is gone (or says it
/// never had it), it may still reach the MR's pages and page table, so they are kept (pinned,
/// allocated) until the device is reset rather than handed back to their owners (`kept.rs`).
pub(crate) fn dereg(dev: &Device<'_>, mr: Mr) -> core::result::Result<(), (Error, Mr)> {
    let cmd = abi::CmdDeregMr {
        mrn: mr.mrn.into(),
        reserved: 0.into(),
    };
    match dev.ctrl.exec::<_, ()>(abi::cmd::DEREG_MR, &cmd) {
        Ok(()) | Err(ENOENT) => {}
        // Windows are bound to it: it stays, and the verb fails (as IB's Deregister MR).
        Err(EBUSY) => return Err((EBUSY, mr)),
        Err(e) => {
            dev_err!(
                dev.as_ref(),
                "DEREG_MR {}: {:?}; its memory stays pinned until the device is reset\n",
                mr.mrn,
                e
            );
            dev.kept_mrs.keep(mr);
        }
    }
    Ok(())
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

    #[test]
    fn user_access_refuses_what_the_device_lacks() {
        let lw = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
        let rw = lw | bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
        let bind = lw | bindings::ib_access_flags_IB_ACCESS_MW_BIND;
        assert_eq!(user_access(rw, false).ok(), Some(rw));
        assert_eq!(
            user_access(
                rw | bindings::ib_access_flags_IB_ACCESS_RELAXED_ORDERING,
                false
            )
            .ok(),
            Some(rw)
        );
        assert_eq!(user_access(bind, false).err(), Some(EOPNOTSUPP));
        assert_eq!(user_access(bind, true).ok(), Some(bind));
        assert_eq!(
            user_access(bindings::ib_access_flags_IB_ACCESS_ON_DEMAND, true).err(),
            Some(EOPNOTSUPP)
        );
    }
}
