// SPDX-License-Identifier: GPL-2.0
//! Work requests executed between two devices with real vrings: see
//! `vhost_user_rdma::fuzzing::data_path` for the input format and oracle.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vhost_user_rdma::fuzzing;

mod seeds;

fuzz_target!(
    init: seeds::write("data_path", fuzzing::data_path_seeds()),
    |data: &[u8]| {
        fuzzing::data_path(data);
    }
);
