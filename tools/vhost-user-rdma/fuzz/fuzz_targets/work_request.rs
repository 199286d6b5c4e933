// SPDX-License-Identifier: GPL-2.0
//! One SQ or RQ element for a QP of fuzzed capacities: see
//! `vhost_user_rdma::fuzzing::work_request` for the input format.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vhost_user_rdma::fuzzing;

mod seeds;

fuzz_target!(
    init: seeds::write("work_request", fuzzing::work_request_seeds()),
    |data: &[u8]| {
        fuzzing::work_request(data);
    }
);
