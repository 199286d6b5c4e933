// SPDX-License-Identifier: GPL-2.0
//! `vhost-user-rdma`: parses the command line, then serves one device per
//! socket, each on its own thread, until every frontend has disconnected or
//! SIGTERM/SIGINT arrives. Exits 0 in both cases, with the socket files
//! removed; 1 if a device failed; 2 on a bad command line.

use std::path::PathBuf;
use std::process::ExitCode;
use std::thread;

use clap::Parser;
use log::{error, info, warn};
use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1};
use signal_hook::iterator::Signals;

use vhost_user_rdma::cli::Cli;
use vhost_user_rdma::{device, fabric, metrics};

fn usage_error(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("vhost-user-rdma: {e}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    env_logger::Builder::new()
        .filter_level(cli.log_level)
        .parse_env("RUST_LOG")
        .target(env_logger::Target::Stderr)
        .init();

    if cli.print_num_queues {
        return match cli.limits() {
            Ok(limits) => {
                println!("{}", limits.num_queues());
                ExitCode::SUCCESS
            }
            Err(e) => usage_error(e),
        };
    }
    let devices = match cli.devices() {
        Ok(d) => d,
        Err(e) => return usage_error(e),
    };

    if let Some(h) = cli.hostile() {
        warn!(
            "HOSTILE DEVICE MODE (--hostile {h}): by the operator's choice, every device of \
             this process lies to its guest; for testing guest drivers only, never in production"
        );
    }

    if let Some(f) = cli.link_faults {
        warn!(
            "LINK FAULT DRILL (--link-faults {f}): every device's link loses packets and \
             duplicates messages; for testing, never in production"
        );
    }

    let sockets = cli
        .sockets
        .iter()
        .chain(&cli.nic_sockets)
        .cloned()
        .collect();
    if let Err(e) = watch_signals(sockets) {
        error!("cannot install signal handlers: {e}");
        return ExitCode::FAILURE;
    }

    if let Some(addr) = cli.metrics {
        if let Err(e) = metrics::spawn(addr) {
            error!("--metrics {addr}: {e}");
            return ExitCode::FAILURE;
        }
    }

    let mut threads = Vec::new();
    for (i, (socket, limits)) in devices.into_iter().enumerate() {
        let nic = cli.nic_socket(i);
        let spawned = thread::Builder::new()
            .name("vrdma-dev".to_string())
            .spawn(move || device::serve(&socket, nic.as_deref(), limits));
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => {
                error!("cannot start a device thread: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let mut ok = true;
    for t in threads {
        match t.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                error!("{e}");
                ok = false;
            }
            Err(_) => {
                error!("a device thread panicked");
                ok = false;
            }
        }
    }
    if ok {
        info!("all frontends disconnected; exiting");
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// On SIGTERM/SIGINT: remove the socket files and exit 0. On SIGUSR1: log
/// every device's objects and counters.
fn watch_signals(sockets: Vec<PathBuf>) -> std::io::Result<()> {
    let mut signals = Signals::new([SIGTERM, SIGINT, SIGUSR1])?;
    thread::Builder::new()
        .name("signals".to_string())
        .spawn(move || {
            for sig in signals.forever() {
                if sig == SIGUSR1 {
                    for dev in fabric::devices(&fabric::lock()) {
                        dev.ctrl().log_stats();
                    }
                    continue;
                }
                info!("signal {sig}: removing sockets and exiting");
                for s in &sockets {
                    let _ = std::fs::remove_file(s);
                }
                std::process::exit(0);
            }
        })?;
    Ok(())
}
