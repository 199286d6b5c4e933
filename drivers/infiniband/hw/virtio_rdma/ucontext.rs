// SPDX-License-Identifier: GPL-2.0

//! User contexts: what a process gets when it opens the device through uverbs.
//!
//! The user ABI is `include/uapi/rdma/virtio_rdma-abi.h`. Opening the device takes no request
//! data; the answer says which parts of the user data path the driver offers: user CQs and QPs
//! with rings the driver maps (`uring.rs`), or with `VIRTIO_RDMA_F_RINGS` rings in the
//! process's own memory that the device uses (`rings.rs`), and AHs.

use kernel::{
    prelude::*,
    rdma::{Device, Udata},
};
use zerocopy::IntoBytes;

use crate::{abi, device::RdmaDev};

/// The driver's part of a user context.
pub(crate) struct UserContext;

/// Opens a user context: checks the (empty) request and answers with the capabilities.
pub(crate) fn alloc(dev: &Device<RdmaDev<'_>>, udata: &mut Udata<'_>) -> Result<UserContext> {
    // No request data is defined: anything non-zero is a request this driver does not know.
    udata.read_request(&mut [])?;
    let mut caps = abi::CAP_USER_QP;
    if dev.config.layout.rings().is_some() {
        caps |= abi::CAP_RINGS;
    }
    let resp = abi::AllocUcontextResp { caps };
    udata.write_response(resp.as_bytes())?;
    Ok(UserContext)
}
