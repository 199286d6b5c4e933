// SPDX-License-Identifier: GPL-2.0
//! Where a device's threads run (`--cpus`): a CPU list as the kernel writes
//! one (`0-3,8`), checked against the CPUs this process may use.
//!
//! A cloud host gives each tenant CPUs of its own, its QEMU pinned there.
//! A device whose threads run on the same CPUs does what its guest asks of
//! it on that tenant's CPUs, not its neighbours': a guest that floods its
//! device then slows only itself. This places the threads; it does not
//! account for them: their CPU time stays the backend process's in its
//! cgroup (vhost's kernel workers, threads of their QEMU since Linux 6.4,
//! are charged to its cgroup; a backend thread in a tenant's cgroup would
//! need a cgroup v2 threaded subtree shared with the QEMUs). A device's
//! threads are all started by the thread that serves its socket, and Linux
//! threads inherit their creator's affinity, so pinning that one thread
//! first pins them all.

use std::fmt;
use std::io;

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// A non-empty set of CPUs.
///
/// # Invariants
/// At least one CPU is in the set.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Cpus(CpuSet);

impl fmt::Debug for Cpus {
    /// As a list: the raw set is 1024 bits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cpus({self})")
    }
}

impl Cpus {
    /// Parses a list of CPU numbers and ranges, comma separated (`0-3,8`).
    pub fn parse(s: &str) -> Result<Cpus, String> {
        let mut set = CpuSet::new();
        for part in s.split(',') {
            let (first, last) = match part.split_once('-') {
                Some((a, b)) => (cpu_number(a)?, cpu_number(b)?),
                None => (cpu_number(part)?, cpu_number(part)?),
            };
            if first > last {
                return Err(format!("`{part}`: a range goes from low to high"));
            }
            for cpu in first..=last {
                set.set(cpu).map_err(|_| too_high(cpu))?;
            }
        }
        // `split` yields at least one part, and each part added a CPU or
        // returned an error.
        Ok(Cpus(set))
    }

    /// The CPUs the calling thread may run on (at start-up: the process's).
    pub fn allowed() -> io::Result<Cpus> {
        let set = sched_getaffinity(Pid::from_raw(0)).map_err(io::Error::from)?;
        // The kernel never lets a thread have an empty affinity.
        Ok(Cpus(set))
    }

    /// How many CPUs are in the set.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Never: the set is not empty (see the type's invariants).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Whether every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &Cpus) -> bool {
        self.iter().all(|cpu| other.0.is_set(cpu).unwrap_or(false))
    }

    /// Restricts the calling thread, and the threads it starts from now on,
    /// to these CPUs.
    pub fn pin_current_thread(&self) -> io::Result<()> {
        sched_setaffinity(Pid::from_raw(0), &self.0).map_err(io::Error::from)
    }

    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..CpuSet::count()).filter(|&cpu| self.0.is_set(cpu).unwrap_or(false))
    }
}

fn cpu_number(s: &str) -> Result<usize, String> {
    s.trim()
        .parse()
        .map_err(|e| format!("`{s}`: not a CPU number ({e})"))
}

fn too_high(cpu: usize) -> String {
    format!("CPU {cpu}: at most {} CPUs are supported", CpuSet::count())
}

impl fmt::Display for Cpus {
    /// The kernel's list form, ranges merged: `0-3,8`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut cpus = self.iter().peekable();
        let mut first = true;
        while let Some(start) = cpus.next() {
            let mut end = start;
            while cpus.peek() == Some(&(end + 1)) {
                end += 1;
                cpus.next();
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if end == start {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_ranges() {
        let c = Cpus::parse("0-3,8").expect("list");
        assert_eq!(c.len(), 5);
        assert_eq!(c.to_string(), "0-3,8");
        assert_eq!(Cpus::parse("3,1,2").expect("list").to_string(), "1-3");
        assert_eq!(Cpus::parse("5").expect("one").to_string(), "5");
        assert_eq!(Cpus::parse("2-2").expect("one").len(), 1);
        assert!(Cpus::parse("0-1")
            .expect("two")
            .is_subset(&Cpus::parse("0-3").expect("four")));
        assert!(!Cpus::parse("0,4")
            .expect("two")
            .is_subset(&Cpus::parse("0-3").expect("four")));
    }

    #[test]
    fn bad_lists() {
        for bad in ["", "a", "1,", "-1", "3-1", "1-", "0-99999", "99999"] {
            assert!(Cpus::parse(bad).is_err(), "`{bad}` accepted");
        }
    }

    #[test]
    fn the_kernels_list_reads_back() {
        let allowed = Cpus::allowed().expect("affinity");
        assert_eq!(Cpus::parse(&allowed.to_string()), Ok(allowed));
    }
}
