// SPDX-License-Identifier: GPL-2.0
//! Control requests (and guest-memory writes) against one fresh device:
//! see `vhost_user_rdma::fuzzing::ctrl_command` for the input format.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vhost_user_rdma::fuzzing;

mod seeds;

fuzz_target!(
    init: seeds::write("ctrl_command", fuzzing::ctrl_seeds()),
    |data: &[u8]| {
        fuzzing::ctrl_command(data);
    }
);
