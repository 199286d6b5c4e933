// SPDX-License-Identifier: GPL-2.0

//! GID table entries as the RDMA core hands them to drivers.

use crate::{bindings, types::Opaque};

/// An entry of a port's GID table (`struct ib_gid_attr`), as passed to
/// [`Driver::add_gid`](super::Driver::add_gid) and [`Driver::del_gid`](super::Driver::del_gid).
///
/// # Invariants
///
/// The wrapped `struct ib_gid_attr` is valid and not changed while the reference is held.
#[repr(transparent)]
pub struct GidAttr(Opaque<bindings::ib_gid_attr>);

impl GidAttr {
    /// Creates a reference from a pointer the RDMA core passed to a driver operation.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a valid `struct ib_gid_attr` that stays valid and unchanged for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *const bindings::ib_gid_attr) -> &'a Self {
        // SAFETY: `GidAttr` is a transparent wrapper of `struct ib_gid_attr`; the pointer is
        // valid for `'a` (function safety requirement).
        unsafe { &*ptr.cast::<Self>() }
    }

    fn raw(&self) -> &bindings::ib_gid_attr {
        // SAFETY: By the type invariant the structure is valid and not changed meanwhile.
        unsafe { &*self.0.get() }
    }

    /// The GID, in network byte order.
    pub fn gid(&self) -> [u8; 16] {
        // SAFETY: Every member of `union ib_gid` is plain bytes; `raw` covers all 16 of them.
        unsafe { self.raw().gid.raw }
    }

    /// The GID type (`enum ib_gid_type`: RoCE v1, RoCE v2 (`IB_GID_TYPE_ROCE_UDP_ENCAP`), IB).
    pub fn gid_type(&self) -> u32 {
        self.raw().gid_type
    }

    /// The entry's index in the port's GID table.
    pub fn index(&self) -> u16 {
        self.raw().index
    }

    /// The port the entry belongs to.
    pub fn port(&self) -> u32 {
        self.raw().port_num
    }
}
