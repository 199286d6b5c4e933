// SPDX-License-Identifier: GPL-2.0
//! `--cpus`: a device's threads run on its CPUs only. One device in this
//! binary, so that every `-lane` thread of the process is its.

mod support;

use std::fs;

use support::*;
use vhost_user_rdma::cpus::Cpus;

/// The CPU list (`Cpus_allowed_list`) of each `-lane` thread of this
/// process.
fn lane_cpus() -> Vec<String> {
    let mut out = Vec::new();
    for task in fs::read_dir("/proc/self/task").expect("tasks") {
        let dir = task.expect("task").path();
        let Ok(comm) = fs::read_to_string(dir.join("comm")) else {
            continue;
        };
        if !comm.contains("-lane") {
            continue;
        }
        let status = fs::read_to_string(dir.join("status")).expect("status");
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list");
        out.push(list.trim().to_string());
    }
    out
}

#[test]
fn a_device_serves_from_its_cpus_only() {
    let allowed = Cpus::allowed().expect("affinity").to_string();
    // The last CPU this process may use: on a host with more than one, a
    // set the lanes would not have without --cpus.
    let last = allowed
        .rsplit([',', '-'])
        .next()
        .expect("a CPU")
        .to_string();
    let cpus = Cpus::parse(&last).expect("cpus");
    let mut dev = Dev::start_with(MEM_SIZE, |l| l.with_cpus(Some(cpus)));
    let lanes = lane_cpus();
    assert_eq!(lanes.len(), THREADS as usize, "the device's lanes");
    assert!(
        lanes.iter().all(|l| *l == last),
        "lanes on {lanes:?}, not on CPU {last} (the process may use {allowed})"
    );
    // It still serves its guest.
    dev.create_pd();
}
