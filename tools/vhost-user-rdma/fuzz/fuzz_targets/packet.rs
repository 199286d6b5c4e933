// SPDX-License-Identifier: GPL-2.0
//! Packets from the network: see `vhost_user_rdma::fuzzing::packet`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vhost_user_rdma::fuzzing;

mod seeds;

fuzz_target!(
    init: seeds::write("packet", fuzzing::packet_seeds()),
    |data: &[u8]| {
        fuzzing::packet(data);
    }
);
