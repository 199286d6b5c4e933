// SPDX-License-Identifier: GPL-2.0

//! Driver attributes of tracked resources: what `rdma res show ... -dd` prints besides the
//! core's own fields.
//!
//! C header: [`include/rdma/restrack.h`](srctree/include/rdma/restrack.h)
//!
//! The core asks only about objects that are fully created and not being destroyed (it drains
//! its readers before the destroy verb runs), so the driver's data is there to read.

use super::{device::Driver, Cq, Mr, Qp};
use crate::{
    bindings,
    error::{from_result, to_result},
    ffi::c_int,
    prelude::*,
    str::CStr,
};
use core::marker::PhantomData;

/// The netlink message an object's driver attributes go into.
///
/// # Invariants
///
/// `msg` is the core's message under construction, valid for the lifetime `'a`.
pub struct ResAttrs<'a> {
    msg: *mut bindings::sk_buff,
    _msg: PhantomData<&'a mut bindings::sk_buff>,
}

impl ResAttrs<'_> {
    /// Adds attribute `name` with value `value`.
    pub fn put_u32(&mut self, name: &CStr, value: u32) -> Result {
        // SAFETY: By the type invariant `msg` is the message under construction; `name` is a
        // NUL-terminated string that the call copies.
        to_result(unsafe { bindings::rdma_nl_put_driver_u32(self.msg, name.as_char_ptr(), value) })
    }

    /// Adds attribute `name` with value `value`.
    pub fn put_u64(&mut self, name: &CStr, value: u64) -> Result {
        // SAFETY: As in `put_u32`.
        to_result(unsafe { bindings::rdma_nl_put_driver_u64(self.msg, name.as_char_ptr(), value) })
    }

    /// Adds attribute `name` with value `value`.
    pub fn put_str(&mut self, name: &CStr, value: &CStr) -> Result {
        // SAFETY: As in `put_u32`; `value` is NUL-terminated and copied too.
        to_result(unsafe {
            bindings::rdma_nl_put_driver_string(self.msg, name.as_char_ptr(), value.as_char_ptr())
        })
    }
}

/// Runs `fill` on the message `msg`, in the nest of driver attributes the core expects.
///
/// # Safety
///
/// `msg` is the core's message under construction, valid for the call.
unsafe fn fill_with(
    msg: *mut bindings::sk_buff,
    fill: impl FnOnce(&mut ResAttrs<'_>) -> Result,
) -> c_int {
    // SAFETY: `msg` is valid (function safety requirement).
    let nest = unsafe {
        bindings::nla_nest_start(
            msg,
            bindings::rdma_nldev_attr_RDMA_NLDEV_ATTR_DRIVER as c_int,
        )
    };
    if nest.is_null() {
        return EMSGSIZE.to_errno();
    }
    // INVARIANT: `msg` is valid for the call (function safety requirement), which outlives the
    // `ResAttrs`.
    let mut attrs = ResAttrs {
        msg,
        _msg: PhantomData,
    };
    let result = fill(&mut attrs);
    // SAFETY: `nest` was started in `msg` above and nothing outside it was added since.
    unsafe {
        match result {
            Ok(()) => bindings::nla_nest_end(msg, nest),
            Err(_) => bindings::nla_nest_cancel(msg, nest),
        }
    };
    from_result(|| result.map(|()| 0))
}

/// `fill_res_qp_entry` of the operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a live QP of driver `T` and its message.
pub(super) unsafe extern "C" fn fill_res_qp_callback<T: Driver>(
    msg: *mut bindings::sk_buff,
    qp: *mut bindings::ib_qp,
) -> c_int {
    // SAFETY: `qp` is a live `Qp<T>` and `msg` the message (function safety requirement).
    unsafe { fill_with(msg, |attrs| T::fill_res_qp(&*qp.cast::<Qp<T>>(), attrs)) }
}

/// `fill_res_cq_entry` of the operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a live CQ of driver `T` and its message.
pub(super) unsafe extern "C" fn fill_res_cq_callback<T: Driver>(
    msg: *mut bindings::sk_buff,
    cq: *mut bindings::ib_cq,
) -> c_int {
    // SAFETY: `cq` is a live `Cq<T>` and `msg` the message (function safety requirement).
    unsafe { fill_with(msg, |attrs| T::fill_res_cq(&*cq.cast::<Cq<T>>(), attrs)) }
}

/// `fill_res_mr_entry` of the operations.
///
/// # Safety
///
/// Called by the RDMA core only, with a live MR of driver `T` and its message.
pub(super) unsafe extern "C" fn fill_res_mr_callback<T: Driver>(
    msg: *mut bindings::sk_buff,
    mr: *mut bindings::ib_mr,
) -> c_int {
    // SAFETY: `mr` is a live `Mr<T>` (every MR of the device is one, `mr.rs`) and `msg` the
    // message (function safety requirement).
    unsafe { fill_with(msg, |attrs| T::fill_res_mr(&*mr.cast::<Mr<T>>(), attrs)) }
}
