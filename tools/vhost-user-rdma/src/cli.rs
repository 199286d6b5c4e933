// SPDX-License-Identifier: GPL-2.0
//! Command line.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;

use clap::Parser;
use log::LevelFilter;

use crate::cpus::Cpus;
use crate::hostile;
use crate::limits::{self, ConfigOverride, Limits, LimitsError, Mac, Pinned, Rings};
use crate::net::uplink::UplinkSpec;

/// vhost-user backend for the virtio-rdma device (virtio device ID 42).
///
/// Each --socket is one independent device; one process serves them all.
/// Start QEMU with `-device vhost-user-rdma-pci,chardev=...`: QEMU asks the
/// backend for the number of virtqueues (2 + max_cq + 2 * max_qp, at most
/// 256; --print-num-queues prints it). With --net every device is instead a
/// virtio-net device carrying the RoCE queues (QEMU's `net=on`): an
/// Ethernet interface with the --mac, switched to the other --net devices
/// of this process, and 3 more virtqueues before the RoCE ones. The process exits when every frontend
/// has disconnected, or on SIGTERM/SIGINT; socket files are removed. SIGUSR1
/// logs each device's objects and counters. A later option overrides an
/// earlier one, except the per-device ones (--socket, --mac, --ip, --max-mr,
/// --max-mr-pages, --socket-max-qp, --socket-max-cq, --cpus, --mtu), which are given once
/// for every device or once per --socket, in the same order.
#[derive(Debug, Parser)]
#[command(name = "vhost-user-rdma", version, args_override_self = true)]
pub struct Cli {
    /// vhost-user socket to listen on (repeat for several devices).
    #[arg(
        long = "socket",
        value_name = "PATH",
        required_unless_present = "print_num_queues"
    )]
    pub sockets: Vec<PathBuf>,

    /// Queue pairs per device (one SQ and one RQ virtqueue each).
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub max_qp: u32,

    /// Completion queues per device (one virtqueue each).
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub max_cq: u32,

    /// Largest virtqueue size (a power of two); also max_qp_wr and max_cqe.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub queue_size: u32,

    /// MAC of the paired virtio-net function, reported in config space: one
    /// per --socket, in the same order (each guest's RDMA port pairs with its
    /// own NIC, and its link-local GID is derived from it). With --net, the
    /// device's own Ethernet MAC: the switch delivers to it, and it is the
    /// only source MAC the device's frames may carry.
    #[arg(long = "mac", value_name = "XX:XX:XX:XX:XX:XX")]
    pub macs: Vec<Mac>,

    /// Addresses this device's guest may use as GIDs (comma separated; the
    /// link-local GID of its --mac is always allowed), or `any`: any GID no
    /// other device holds. One per --socket, in order. Required with
    /// several --socket (each device a tenant): `--ip any` once lets every
    /// device take any address; a lone device takes any by default.
    #[arg(long = "ip", value_name = "ADDR[,ADDR...]|any", value_parser = parse_ips)]
    pub ips: Vec<Option<Vec<IpAddr>>>,

    /// QPs of a device, instead of --max-qp (so also its virtqueues). Once,
    /// or once per --socket.
    #[arg(long = "socket-max-qp", value_name = "N")]
    pub socket_max_qps: Vec<u32>,

    /// CQs of a device, instead of --max-cq. Once, or once per --socket.
    #[arg(long = "socket-max-cq", value_name = "N")]
    pub socket_max_cqs: Vec<u32>,

    /// MRs per device (also reported as max_mr). Once, or once per --socket.
    #[arg(long = "max-mr", value_name = "N")]
    pub max_mrs: Vec<u32>,

    /// Page-table entries (4 KiB pages registered, counted with
    /// repetition) the MRs of a device may hold together; each costs the
    /// backend 8 bytes. Default: 8 per page of the guest's memory, at least
    /// 262144. Once, or once per --socket.
    #[arg(long = "max-mr-pages", value_name = "N")]
    pub max_mr_pages: Vec<u64>,

    /// Log level: off, error, warn, info, debug, trace. RUST_LOG (env_logger
    /// syntax) refines it, e.g. RUST_LOG=vhost_user_rdma::engine=debug.
    #[arg(long, value_name = "LEVEL", default_value = "info")]
    pub log_level: LevelFilter,

    /// Report config field FIELD as VALUE (decimal or 0x hex) while serving the
    /// real limits: for testing a driver against a device with a bad config.
    /// Repeatable; FIELD is a field of struct virtio_rdma_config. With
    /// DEVICE (0 for the first --socket) only that device reports it.
    /// Not with --net (its config space is virtio-net's).
    #[arg(
        long = "config-override",
        value_name = "[DEVICE:]FIELD=VALUE",
        conflicts_with = "net"
    )]
    pub config_overrides: Vec<ConfigOverride>,

    /// Make every device of this process lie to its guest, for testing a
    /// driver against a broken or malicious device; never in production.
    /// KIND: `completions` (every Nth completion corrupted, see
    /// --hostile-every), `handles` (every Nth CREATE_CQ and CREATE_QP
    /// answers another live object's number), `events` (a made-up event after every control
    /// command). Each lie is counted (hostile_* counters).
    #[arg(long, value_name = "KIND[,KIND...]")]
    pub hostile: Option<hostile::Kinds>,

    /// With --hostile: corrupt every Nth completion, and answer every Nth
    /// CREATE_CQ and every Nth CREATE_QP with another's number (N >= 1).
    #[arg(
        long,
        value_name = "N",
        default_value = "4",
        value_parser = parse_every,
        requires = "hostile"
    )]
    pub hostile_every: NonZeroU32,

    /// Offer queues in guest memory (VIRTIO_RDMA_F_RINGS): QPs and CQs whose
    /// rings the device reads and writes in guest memory, besides the
    /// virtqueue ones.
    #[arg(long)]
    pub rings: bool,

    /// With --rings: ring QPs (and ring CQs) of each device.
    #[arg(long, value_name = "N", default_value_t = limits::MAX_RING_OBJECTS, requires = "rings")]
    pub ring_max_qp: u32,

    /// With --rings: shared receive queues of each device (0: none).
    #[arg(long, value_name = "N", default_value_t = limits::DEFAULT_MAX_SRQ, requires = "rings")]
    pub max_srq: u32,

    /// With --rings: XRC domains of each device (0: no XRC; none with
    /// --max-srq 0).
    #[arg(long, value_name = "N", default_value_t = limits::DEFAULT_MAX_XRCD, requires = "rings")]
    pub max_xrcd: u32,

    /// With --rings: completion-event virtqueues (interrupt vectors).
    #[arg(long, value_name = "N", default_value_t = 2, requires = "rings")]
    pub comp_vqs: u32,

    /// With --rings: how long the device keeps polling rings that have gone
    /// idle before it asks to be notified, in microseconds. 0: at once (it
    /// still polls while each pass finds work). Spinning pays only with a
    /// host core to spare: on a host whose cores run the guests, it takes
    /// their time.
    #[arg(long, value_name = "US", default_value_t = 0, requires = "rings")]
    pub poll_us: u32,

    /// Present every device as virtio-net (virtio ID 1, QEMU's `net=on`)
    /// with VIRTIO_NET_F_ROCE: receiveq, transmitq and controlq, then the
    /// RoCE queues in the ID-42 layout (3 + the ID-42 count, at most 256).
    /// Needs --rings (the RoCE part is the rings mode).
    #[arg(long, requires = "rings")]
    pub net: bool,

    /// Threads serving each device: its QPs are split among them (QP n on
    /// thread n % N), so that the queues of one guest's QPs are served at
    /// once. Default: half the CPUs the backend may run on, or of the
    /// device's --cpus (at least 1, at most 64), the other half left to the
    /// guests whose vCPUs post and poll.
    #[arg(long, value_name = "N")]
    pub threads: Option<u32>,

    /// CPUs the threads of a device run on, as a list such as 0-3,8: the
    /// CPUs of the tenant whose QEMU connects to its socket (pinned there
    /// too), so that what its guest asks of the device is done on that
    /// tenant's CPUs, not its neighbours'. Once for every device, or once
    /// per --socket. Default: wherever the process may run.
    #[arg(long = "cpus", value_name = "LIST", value_parser = Cpus::parse)]
    pub cpus: Vec<Cpus>,

    /// A fault drill: the link between QPs loses and reorders RC, UC and
    /// XRC packets and duplicates messages, as KIND=PERCENT[,...] with
    /// kinds drop (requests and answers), drop-request, drop-answer, dup
    /// and reorder. The
    /// transport (go-back-N on a sequence-error NAK, retransmission on
    /// each QP's timeout and retry_cnt) recovers; for tests and drills,
    /// never in production.
    #[arg(long = "link-faults", value_name = "KIND=PERCENT[,...]")]
    pub link_faults: Option<crate::link::Faults>,

    /// Serve every device's counters and objects in Prometheus' text
    /// format at http://ADDR/metrics (e.g. 127.0.0.1:9870; the host's
    /// operator's, not the guests': bind it where only the host reaches).
    #[arg(long = "metrics", value_name = "ADDR:PORT")]
    pub metrics: Option<std::net::SocketAddr>,

    /// The guest's NIC, served by this backend: a vhost-user socket for
    /// QEMU's `-netdev vhost-user` under `-device virtio-net-pci` with the
    /// device's --mac. The ID-42 device's RDMA port and the guest's
    /// Ethernet are then one port, as on a RoCE NIC: on the process's
    /// switch, or with --uplink on a host network. Once per --socket, in
    /// the same order; not with --net (that device is the NIC); needs
    /// --rings.
    #[arg(long = "nic-socket", value_name = "PATH", conflicts_with = "net")]
    pub nic_sockets: Vec<PathBuf>,

    /// With --net or --nic-socket: the device's port on a host network, `tap:NAME` (a TAP
    /// device, made if it does not exist; attach it to a bridge or OVS as
    /// a VM's TAP). The guest's Ethernet and the RoCEv2 frames of its QPs
    /// whose peers are not devices of this process go out there, with the
    /// guest's MAC and IP. Once per --socket; a device without one is on
    /// the process's switch.
    #[arg(long = "uplink", value_name = "tap:NAME")]
    pub uplinks: Vec<UplinkSpec>,

    /// The port's Ethernet MTU (1280..=9000, default 1500): with --net the
    /// MTU its virtio-net offers (VIRTIO_NET_F_MTU) and the largest frame
    /// it sends and takes; for every device the IB MTU of its RDMA port,
    /// the largest whose RoCEv2 packets fit (1024 for 1500, 4096 for
    /// 9000). Give an uplink's TAP and bridge the same MTU. Once, or once
    /// per --socket.
    #[arg(long = "mtu", value_name = "BYTES")]
    pub mtus: Vec<u16>,

    /// Print the number of virtqueues for these limits and exit.
    #[arg(long)]
    pub print_num_queues: bool,
}

/// `--hostile-every`: a whole number of at least 1.
fn parse_every(s: &str) -> Result<NonZeroU32, String> {
    let n: u32 = s.parse().map_err(|e| format!("`{s}`: {e}"))?;
    NonZeroU32::new(n).ok_or_else(|| "N must be at least 1 (1: every completion lies)".to_string())
}

/// `any`, or a comma-separated list of IP addresses.
fn parse_ips(s: &str) -> Result<Option<Vec<IpAddr>>, String> {
    if s == "any" {
        return Ok(None);
    }
    s.split(',')
        .map(|a| a.parse().map_err(|e| format!("`{a}`: {e}")))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The value of a per-device option for device `i` of `sockets`: none
/// given, one for all, or one per socket.
fn per_socket<T: Clone>(
    option: &'static str,
    values: &[T],
    i: usize,
    sockets: usize,
) -> Result<Option<T>, LimitsError> {
    match values.len() {
        0 => Ok(None),
        1 => Ok(values.first().cloned()),
        n if n == sockets => Ok(values.get(i).cloned()),
        given => Err(LimitsError::PerSocket {
            option,
            given,
            sockets,
        }),
    }
}

/// Whether an option given once per socket or not at all (`values`, for
/// `sockets` sockets) is given.
fn one_each<T>(option: &'static str, values: &[T], sockets: usize) -> Result<bool, LimitsError> {
    match values.len() {
        0 => Ok(false),
        n if n == sockets => Ok(true),
        given => Err(LimitsError::PerSocket {
            option,
            given,
            sockets,
        }),
    }
}

/// Threads for a device that may run on `cpus` CPUs.
fn default_threads(cpus: usize) -> u32 {
    let cpus = u32::try_from(cpus).unwrap_or(u32::MAX);
    (cpus / 2).clamp(1, limits::MAX_THREADS)
}

/// `cpus` if this process may run on all of them.
fn allowed(cpus: Cpus) -> Result<Cpus, LimitsError> {
    match Cpus::allowed() {
        Ok(all) if !cpus.is_subset(&all) => Err(LimitsError::CpusNotAllowed {
            cpus: cpus.to_string(),
            allowed: all.to_string(),
        }),
        // Unreadable: pinning the device's thread will say why.
        _ => Ok(cpus),
    }
}

/// The MAC a lone device pairs with when no --mac is given.
pub const DEFAULT_MAC: Mac = Mac([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);

impl Cli {
    /// The socket of the `i`-th device's NIC (`--nic-socket`), if the
    /// backend serves it ([`Cli::devices`] checked there is one each).
    pub fn nic_socket(&self, i: usize) -> Option<PathBuf> {
        self.nic_sockets.get(i).cloned()
    }

    /// The hostile mode every device gets, if --hostile is given.
    pub fn hostile(&self) -> Option<hostile::Config> {
        self.hostile.map(|kinds| hostile::Config {
            kinds,
            every: self.hostile_every,
        })
    }

    /// The queues in guest memory each device offers, if --rings.
    pub fn rings(&self) -> Result<Option<Rings>, LimitsError> {
        self.rings
            .then(|| {
                Rings::new(
                    self.ring_max_qp,
                    self.ring_max_qp,
                    self.comp_vqs,
                    self.poll_us,
                )
                .and_then(|r| r.with_max_srq(self.max_srq))
                .and_then(|r| r.with_max_xrcd(self.max_xrcd))
            })
            .transpose()
    }

    /// Threads per device: --threads, else what the host can give: half
    /// the CPUs of this process's affinity (the guests' vCPUs want the
    /// rest: on a 2-core host running them, two threads per device moved
    /// 0.7 times the work requests of one, `benches/transfer.rs`).
    pub fn threads(&self) -> u32 {
        self.threads.unwrap_or_else(|| {
            default_threads(std::thread::available_parallelism().map_or(1, |n| n.get()))
        })
    }

    /// The validated device limits (the first device's: its MAC and config
    /// overrides).
    pub fn limits(&self) -> Result<Limits, LimitsError> {
        let mac = self.macs.first().copied().unwrap_or(DEFAULT_MAC);
        self.base_limits(0, self.max_qp, self.max_cq, mac)
    }

    /// Device `i`'s limits from the options every device shares, with its
    /// QP and CQ counts, MAC and config overrides.
    fn base_limits(
        &self,
        i: usize,
        max_qp: u32,
        max_cq: u32,
        mac: Mac,
    ) -> Result<Limits, LimitsError> {
        let overrides: Vec<ConfigOverride> = self
            .config_overrides
            .iter()
            .filter(|o| o.applies_to(i))
            .copied()
            .collect();
        Limits::new(max_qp, max_cq, self.queue_size, mac)?
            .with_threads(self.threads())?
            .with_overrides(&overrides)?
            .with_rings(self.rings()?)?
            .with_net(self.net)
    }

    /// Each socket with its device's limits: the i-th --mac for the i-th
    /// --socket. Two devices of one process sharing a MAC would share their
    /// link-local GID, so several sockets need a MAC each.
    pub fn devices(&self) -> Result<Vec<(PathBuf, Limits)>, LimitsError> {
        self.limits()?;
        let several = self.sockets.len() > 1 || self.macs.len() > 1;
        if several && self.macs.len() != self.sockets.len() {
            return Err(LimitsError::MacPerSocket {
                sockets: self.sockets.len(),
                macs: self.macs.len(),
            });
        }
        for (i, a) in self.macs.iter().enumerate() {
            if self.macs[..i].contains(a) {
                return Err(LimitsError::SameMac(*a));
            }
        }
        let all = self.sockets.iter().chain(&self.nic_sockets);
        for (i, path) in all.clone().enumerate() {
            if all.clone().take(i).any(|p| p == path) {
                return Err(LimitsError::SameSocket(path.clone()));
            }
        }
        let n = self.sockets.len();
        if let Some(device) = self
            .config_overrides
            .iter()
            .filter_map(|o| o.device())
            .find(|&d| d >= n)
        {
            return Err(LimitsError::OverrideDevice { device, sockets: n });
        }
        // Several devices are several tenants: each must be held to its own
        // addresses, or the operator must say that any goes (`--ip any`,
        // which may be given once for all). One pinned list for several
        // devices would have them fight over it.
        let any_for_all = self.ips.len() == 1 && self.ips[0].is_none();
        if n > 1 && self.ips.len() != n && !any_for_all {
            return Err(LimitsError::Unpinned {
                sockets: n,
                ips: self.ips.len(),
            });
        }
        let mut out = Vec::new();
        for (i, s) in self.sockets.iter().enumerate() {
            let mac = self.macs.get(i).copied().unwrap_or(DEFAULT_MAC);
            let max_qp = per_socket("--socket-max-qp", &self.socket_max_qps, i, n)?;
            let max_cq = per_socket("--socket-max-cq", &self.socket_max_cqs, i, n)?;
            let mut l = self.base_limits(
                i,
                max_qp.unwrap_or(self.max_qp),
                max_cq.unwrap_or(self.max_cq),
                mac,
            )?;
            if let Some(ips) = per_socket("--ip", &self.ips, i, n)?.flatten() {
                l = l.with_pinned(Some(Pinned::new(&ips)?));
            }
            if let Some(max) = per_socket("--max-mr", &self.max_mrs, i, n)? {
                l = l.with_max_mr(max)?;
            }
            if let Some(mtu) = per_socket("--mtu", &self.mtus, i, n)? {
                l = l.with_mtu(mtu)?;
            }
            if let Some(cpus) = per_socket("--cpus", &self.cpus, i, n)? {
                l = l.with_cpus(Some(allowed(cpus)?));
                if self.threads.is_none() {
                    l = l.with_threads(default_threads(cpus.len()))?;
                }
            }
            // One each: a NIC is one guest's.
            if one_each("--nic-socket", &self.nic_sockets, n)? {
                l = l.with_nic(true)?;
            }
            // One each: a TAP is one port.
            if one_each("--uplink", &self.uplinks, n)? {
                if self.uplinks[..i].contains(&self.uplinks[i]) {
                    return Err(LimitsError::SameUplink(self.uplinks[i]));
                }
                l = l.with_uplink(Some(self.uplinks[i]))?;
            }
            let pages = per_socket("--max-mr-pages", &self.max_mr_pages, i, n)?;
            let l = l
                .with_max_mr_pages(pages)
                .with_hostile(self.hostile())
                .with_link_faults(self.link_faults);
            out.push((s.clone(), l));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_runner_line() {
        let cli = Cli::try_parse_from([
            "vhost-user-rdma",
            "--socket",
            "/tmp/a.sock",
            "--max-qp",
            "16",
            "--max-cq",
            "32",
            "--mac",
            "52:54:00:12:34:56",
        ])
        .expect("runner command line parses");
        assert_eq!(cli.sockets, vec![PathBuf::from("/tmp/a.sock")]);
        let limits = cli.limits().expect("valid limits");
        assert_eq!(limits.num_queues(), 66);
        assert_eq!(limits.queue_size(), 1024);
        assert_eq!(cli.log_level, LevelFilter::Info);
    }

    /// What `of` says of each of two devices given `extra` options.
    fn two_devices<T>(extra: &[&str], of: impl Fn(&Limits) -> T) -> Result<Vec<T>, LimitsError> {
        let mut args = vec!["x"];
        args.extend_from_slice(&TWO);
        args.extend_from_slice(&ANY);
        args.extend_from_slice(extra);
        let devices = Cli::try_parse_from(args).expect("parses").devices()?;
        Ok(devices.iter().map(|(_, l)| of(l)).collect())
    }

    /// Every device gets --threads threads, half the host's CPUs by
    /// default, between 1 and 64.
    #[test]
    fn threads() {
        let threads = |extra: &[&str]| two_devices(extra, Limits::threads);
        let all = std::thread::available_parallelism().map_or(1, |n| n.get());
        let default = default_threads(all) as usize;
        assert_eq!(threads(&[]), Ok(vec![default, default]));
        assert_eq!(
            [0, 1, 2, 3, 8, 200].map(default_threads),
            [1, 1, 1, 1, 4, 64],
            "half the CPUs, 1 to 64"
        );
        assert_eq!(threads(&["--threads", "3"]), Ok(vec![3, 3]));
        assert_eq!(
            threads(&["--threads", "2", "--socket-max-qp", "4"]),
            Ok(vec![2, 2])
        );
        assert_eq!(threads(&["--threads", "0"]), Err(LimitsError::Threads(0)));
        assert_eq!(threads(&["--threads", "65"]), Err(LimitsError::Threads(65)));
    }

    #[test]
    fn cpus() {
        let devices =
            |extra: &[&str]| two_devices(extra, |l| (l.cpus().map(|c| c.to_string()), l.threads()));
        let allowed = Cpus::allowed().expect("affinity").to_string();
        // The first CPU this process may use, and one it may not.
        let first = allowed.split([',', '-']).next().expect("a CPU").to_string();
        let one = Some(first.clone());
        assert_eq!(
            devices(&["--cpus", &first]),
            Ok(vec![(one.clone(), 1), (one.clone(), 1)])
        );
        assert_eq!(
            devices(&["--cpus", &first, "--cpus", &allowed]),
            Ok(vec![
                (one.clone(), 1),
                (
                    Some(allowed.clone()),
                    default_threads(Cpus::parse(&allowed).expect("cpus").len()) as usize
                )
            ]),
            "one list per socket; threads: half of each list"
        );
        assert_eq!(
            devices(&["--cpus", &first, "--threads", "3"]),
            Ok(vec![(one.clone(), 3), (one, 3)])
        );
        assert!(matches!(
            devices(&["--cpus", &first, "--cpus", &first, "--cpus", &first]),
            Err(LimitsError::PerSocket {
                option: "--cpus",
                given: 3,
                sockets: 2
            })
        ));
        assert_eq!(
            devices(&["--cpus", "1023"]),
            Err(LimitsError::CpusNotAllowed {
                cpus: "1023".into(),
                allowed: allowed.clone()
            }),
            "a CPU this process may not use (1023 on this host)"
        );
        assert!(Cli::try_parse_from(["x", "--socket", "a", "--cpus", "3-1"]).is_err());
    }

    /// XRC domains are offered with SRQs (64 unless told), as many as
    /// `--max-xrcd` says, none without SRQs.
    #[test]
    fn max_xrcd() {
        let xrcd = |extra: &[&str]| {
            let mut args = vec!["x", "--socket", "a", "--rings"];
            args.extend_from_slice(extra);
            Cli::try_parse_from(args)
                .expect("parses")
                .limits()
                .map(|l| l.config().max_xrcd.get())
        };
        assert_eq!(xrcd(&[]), Ok(limits::DEFAULT_MAX_XRCD));
        assert_eq!(xrcd(&["--max-xrcd", "3"]), Ok(3));
        assert_eq!(xrcd(&["--max-xrcd", "3", "--max-srq", "0"]), Ok(0));
        assert_eq!(
            xrcd(&["--max-xrcd", "16385"]),
            Err(LimitsError::MaxXrcd(16385))
        );
        let no_rings = ["x", "--socket", "a", "--max-xrcd", "3"];
        assert!(Cli::try_parse_from(no_rings).is_err(), "needs --rings");
    }

    #[test]
    fn several_sockets_and_print() {
        let cli = Cli::try_parse_from([
            "x", "--socket", "a", "--socket", "b", "--max-qp", "1", "--max-cq", "1",
        ])
        .expect("parses");
        assert_eq!(cli.sockets.len(), 2);
        assert!(Cli::try_parse_from(["x"]).is_err(), "a socket is required");
        let cli = Cli::try_parse_from(["x", "--print-num-queues"]).expect("parses");
        assert!(cli.print_num_queues);
        assert!(Cli::try_parse_from(["x", "--socket", "a", "--mac", "zz"]).is_err());
        assert!(Cli::try_parse_from(["x", "--socket", "a", "--log-level", "loud"]).is_err());
    }

    #[test]
    fn one_mac_per_socket() {
        let devices = |args: &[&str]| {
            let cli = Cli::try_parse_from(["x"].iter().chain(args)).expect("parses");
            cli.devices().map(|d| {
                d.iter()
                    .map(|(s, l)| (s.display().to_string(), l.mac().to_string()))
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(
            devices(&["--socket", "a"]),
            Ok(vec![("a".into(), "52:54:00:12:34:56".into())])
        );
        assert_eq!(
            devices(&[&TWO[..], &ANY].concat()),
            Ok(vec![
                ("a".into(), "02:00:00:00:00:01".into()),
                ("b".into(), "02:00:00:00:00:02".into())
            ])
        );
        assert!(matches!(
            devices(&["--socket", "a", "--socket", "b"]),
            Err(LimitsError::MacPerSocket {
                sockets: 2,
                macs: 0
            })
        ));
        assert!(matches!(
            devices(&[
                "--socket",
                "a",
                "--socket",
                "b",
                "--mac",
                "02:00:00:00:00:01"
            ]),
            Err(LimitsError::MacPerSocket {
                sockets: 2,
                macs: 1
            })
        ));
        assert!(matches!(
            devices(&[
                "--socket",
                "a",
                "--mac",
                "02:00:00:00:00:01",
                "--mac",
                "02:00:00:00:00:02"
            ]),
            Err(LimitsError::MacPerSocket {
                sockets: 1,
                macs: 2
            })
        ));
        assert!(matches!(
            devices(&[
                "--socket",
                "a",
                "--socket",
                "b",
                "--mac",
                "02:00:00:00:00:01",
                "--mac",
                "02:00:00:00:00:01"
            ]),
            Err(LimitsError::SameMac(_))
        ));
    }

    /// Any address goes (for every device).
    const ANY: [&str; 2] = ["--ip", "any"];

    /// Several devices are tenants: each is pinned to its addresses, or
    /// the operator says that any goes; a lone device takes any.
    #[test]
    fn several_devices_pin_their_addresses() {
        let devices = |more: &[&str]| {
            Cli::try_parse_from(["x"].iter().chain(&TWO).chain(more))
                .expect("parses")
                .devices()
                .map(|d| d.len())
        };
        assert_eq!(
            devices(&[]),
            Err(LimitsError::Unpinned { sockets: 2, ips: 0 })
        );
        assert_eq!(
            devices(&["--ip", "10.0.2.15"]),
            Err(LimitsError::Unpinned { sockets: 2, ips: 1 }),
            "one list for two"
        );
        assert_eq!(devices(&["--ip", "10.0.2.15", "--ip", "10.0.2.16"]), Ok(2));
        assert_eq!(devices(&["--ip", "10.0.2.15", "--ip", "any"]), Ok(2));
        assert_eq!(devices(&ANY), Ok(2), "said once for all");
        let message = devices(&[]).map_err(|e| e.to_string()).unwrap_err();
        assert!(message.contains("--ip"), "{message}");
        let lone = Cli::try_parse_from(["x", "--socket", "a"]).expect("parses");
        assert_eq!(lone.devices().map(|d| d.len()), Ok(1));
    }

    #[test]
    fn config_overrides_for_one_device() {
        let devices = |more: &[&str]| {
            Cli::try_parse_from(["x"].iter().chain(&TWO).chain(&ANY).chain(more))
                .map_err(|e| e.to_string())
                .and_then(|c| c.devices().map_err(|e| e.to_string()))
        };
        let ports = |d: &[(PathBuf, Limits)]| -> Vec<u8> {
            d.iter().map(|(_, l)| l.config_space()[0]).collect()
        };
        let both = devices(&["--config-override", "phys_port_cnt=2"]).expect("valid");
        assert_eq!(ports(&both), [2, 2], "for every device");
        let second = devices(&["--config-override", "1:phys_port_cnt=3"]).expect("valid");
        assert_eq!(ports(&second), [1, 3], "for the second only");
        let mixed = [
            "--config-override",
            "0:phys_port_cnt=4",
            "--config-override",
            "max_qp=9",
        ];
        let mixed = devices(&mixed).expect("valid");
        assert_eq!(ports(&mixed), [4, 1]);
        let max_qp = std::mem::offset_of!(crate::abi::VirtioRdmaConfig, max_qp);
        for (_, l) in &mixed {
            assert_eq!(l.config_space()[max_qp], 9);
            assert_eq!(l.max_qp(), 16, "the device serves its real limits");
        }
        let none = devices(&["--config-override", "2:phys_port_cnt=2"]).unwrap_err();
        assert!(none.contains("device 2, but 2 --socket"), "{none}");
        let bad = devices(&["--config-override", "one:phys_port_cnt=2"]).unwrap_err();
        assert!(bad.contains("not a device's index"), "{bad}");
    }

    /// Two devices, each with its MAC.
    const TWO: [&str; 8] = [
        "--socket",
        "a",
        "--socket",
        "b",
        "--mac",
        "02:00:00:00:00:01",
        "--mac",
        "02:00:00:00:00:02",
    ];

    #[test]
    fn per_device_options() {
        let devices = |args: &[&str]| {
            let cli = Cli::try_parse_from(["x"].iter().chain(args)).expect("parses");
            cli.devices()
        };
        // Any address for both, unless the test pins them.
        let with = |more: &[&str]| {
            let ips: &[&str] = if more.contains(&"--ip") { &[] } else { &ANY };
            devices(&[&TWO[..], ips, more].concat())
        };
        let d = with(&["--ip", "10.0.2.15", "--ip", "any", "--max-mr", "100"]).expect("valid");
        let mapped = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 2, 16];
        assert!(!d[0].1.gid_allowed(&mapped), "a is pinned to 10.0.2.15");
        assert!(d[1].1.gid_allowed(&mapped), "b takes any");
        assert_eq!((d[0].1.max_mr(), d[1].1.max_mr()), (100, 100), "once: all");
        let d = with(&["--max-mr-pages", "5", "--max-mr-pages", "6"]).expect("valid");
        assert_eq!(
            (d[0].1.mr_pages_for(1 << 30), d[1].1.mr_pages_for(0)),
            (5, 6)
        );
        assert!(matches!(
            with(&["--ip", "10.0.2.15"]),
            Err(LimitsError::Unpinned { ips: 1, .. })
        ));
        assert!(matches!(
            with(&["--max-mr", "1", "--max-mr", "2", "--max-mr", "3"]),
            Err(LimitsError::PerSocket { given: 3, .. })
        ));
        assert!(matches!(
            with(&["--max-mr", "0"]),
            Err(LimitsError::MaxMr(0))
        ));
        assert!(Cli::try_parse_from(["x", "--socket", "a", "--ip", "10.0.2"]).is_err());
        let d = with(&[
            "--max-qp",
            "16",
            "--socket-max-qp",
            "4",
            "--socket-max-qp",
            "8",
        ])
        .expect("valid");
        assert_eq!((d[0].1.max_qp(), d[1].1.max_qp()), (4, 8));
        assert_eq!(
            (d[0].1.max_cq(), d[1].1.max_cq()),
            (32, 32),
            "--max-cq's default"
        );
        let d = with(&["--socket-max-cq", "2"]).expect("valid");
        assert_eq!((d[0].1.max_qp(), d[1].1.max_cq()), (16, 2), "once: all");
        assert!(matches!(
            with(&["--socket-max-qp", "200"]),
            Err(LimitsError::TooManyQueues { .. })
        ));
        let one = devices(&["--socket", "a", "--ip", "10.0.2.15,fd00::1"]).expect("valid");
        let mut own = mapped;
        own[15] = 15;
        assert!(one[0].1.gid_allowed(&own) && !one[0].1.gid_allowed(&mapped));
    }

    #[test]
    fn hostile_mode_reaches_every_device() {
        let parse = |args: &[&str]| Cli::try_parse_from(["x", "--socket", "a"].iter().chain(args));
        let cli = parse(&[]).expect("parses");
        assert_eq!(cli.hostile(), None, "off by default");
        let devices = cli.devices().expect("valid");
        assert!(devices.iter().all(|(_, l)| l.hostile().is_none()));
        let cli = parse(&[
            "--socket",
            "b",
            "--mac",
            "02:00:00:00:00:01",
            "--mac",
            "02:00:00:00:00:02",
            "--ip",
            "any",
            "--socket-max-qp",
            "2",
            "--hostile",
            "completions,handles",
        ])
        .expect("parses");
        let want = hostile::Config {
            kinds: "handles,completions".parse().expect("kinds"),
            every: NonZeroU32::new(4).expect("non-zero"),
        };
        assert_eq!(cli.hostile(), Some(want), "every 4 by default");
        let devices = cli.devices().expect("valid");
        assert!(devices.iter().all(|(_, l)| l.hostile() == Some(want)));
        let cli = parse(&["--hostile", "events", "--hostile-every", "1"]).expect("parses");
        assert_eq!(cli.hostile().map(|h| h.every.get()), Some(1));
        assert!(parse(&["--hostile", "bogus"]).is_err());
        assert!(parse(&["--hostile", "events", "--hostile-every", "0"]).is_err());
        assert!(parse(&["--hostile-every", "3"]).is_err(), "needs --hostile");
    }

    #[test]
    fn net_personality() {
        let parse = |args: &[&str]| Cli::try_parse_from(["x", "--socket", "a"].iter().chain(args));
        assert!(parse(&["--net"]).is_err(), "needs --rings");
        assert!(
            parse(&["--net", "--rings", "--config-override", "max_qp=1"]).is_err(),
            "its config is virtio-net's"
        );
        let cli = parse(&["--net", "--rings", "--max-qp", "4", "--max-cq", "4"]).expect("parses");
        let l = cli.limits().expect("valid");
        assert!(l.net());
        assert_eq!(l.roce_base(), 3);
        assert_eq!(l.num_queues(), 3 + l.roce_queues());
        assert_eq!(l.roce_queues(), 2 + 4 + 8 + 1 + 2);
        // 3 + 2 + 120 + 2 * 64 + 3 = 256 fits; one CQ more does not.
        let fits = ["--net", "--rings", "--max-qp", "64", "--max-cq", "120"];
        assert_eq!(
            parse(&fits)
                .expect("parses")
                .limits()
                .map(|l| l.num_queues()),
            Ok(256)
        );
        let over = ["--net", "--rings", "--max-qp", "64", "--max-cq", "121"];
        assert_eq!(
            parse(&over).expect("parses").devices().map(|_| ()),
            Err(LimitsError::NetTooManyQueues {
                net: 3,
                roce: 254,
                total: 257
            })
        );
    }

    /// `--nic-socket`: the ID-42 device's NIC is the backend's, one per
    /// device, with rings; its port may then have an uplink.
    #[test]
    fn nic_sockets() {
        let parse =
            |more: &[&str]| Cli::try_parse_from(["x"].iter().chain(&TWO).chain(&ANY).chain(more));
        let nics = ["--nic-socket", "na", "--nic-socket", "nb"];
        let cli = parse(
            &[
                &nics[..],
                &["--rings", "--uplink", "tap:t0", "--uplink", "tap:t1"],
            ]
            .concat(),
        )
        .expect("parses");
        let d = cli.devices().expect("valid");
        assert!(d
            .iter()
            .all(|(_, l)| l.nic() && !l.net() && l.uplink().is_some()));
        assert_eq!(d[0].1.roce_base(), 0, "the ID-42 layout");
        assert_eq!(
            (cli.nic_socket(0), cli.nic_socket(1)),
            (Some("na".into()), Some("nb".into()))
        );
        let no_nic = parse(&["--rings"]).expect("parses");
        assert_eq!(no_nic.nic_socket(0), None);
        assert!(no_nic
            .devices()
            .expect("valid")
            .iter()
            .all(|(_, l)| !l.nic()));
        assert_eq!(
            parse(&nics).expect("parses").devices().map(|_| ()),
            Err(LimitsError::NicWithoutRings)
        );
        for same in [
            ["--nic-socket", "na", "--nic-socket", "na"],
            ["--nic-socket", "a", "--nic-socket", "nb"],
        ] {
            assert!(
                matches!(
                    parse(&[&same[..], &["--rings"]].concat())
                        .expect("parses")
                        .devices(),
                    Err(LimitsError::SameSocket(_))
                ),
                "{same:?}"
            );
        }
        assert!(matches!(
            parse(&["--rings", "--nic-socket", "na"])
                .expect("parses")
                .devices(),
            Err(LimitsError::PerSocket {
                option: "--nic-socket",
                ..
            })
        ));
        assert!(
            parse(&[&nics[..], &["--rings", "--net"]].concat()).is_err(),
            "the net personality is a NIC"
        );
        assert_eq!(
            parse(&["--rings", "--uplink", "tap:t0", "--uplink", "tap:t1"])
                .expect("parses")
                .devices()
                .map(|_| ()),
            Err(LimitsError::UplinkWithoutNet),
            "QEMU's NIC cannot share the uplink"
        );
    }

    #[test]
    fn later_limit_overrides_earlier() {
        let cli = Cli::try_parse_from([
            "x", "--socket", "a", "--max-qp", "16", "--max-cq", "32", "--max-qp", "4", "--max-cq",
            "8", "--socket", "b",
        ])
        .expect("parses");
        assert_eq!((cli.max_qp, cli.max_cq), (4, 8));
        assert_eq!(cli.sockets.len(), 2, "--socket still accumulates");
        assert_eq!(cli.limits().map(|l| l.num_queues()).ok(), Some(18));
    }
}
