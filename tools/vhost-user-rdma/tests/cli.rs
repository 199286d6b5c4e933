// SPDX-License-Identifier: GPL-2.0
//! The binary: argument checks, `--print-num-queues`, clean exit on
//! disconnect and on SIGTERM.

use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use vhost::vhost_user::Frontend;
use vhost::vhost_user::VhostUserFrontend;
use vhost::VhostBackend;
use vmm_sys_util::tempdir::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_vhost-user-rdma");

fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// Runs the backend with `bad` options after a socket: it must exit with a usage error (2)
/// saying `why`.
fn expect_usage_error(bad: &[&str], why: &str) {
    let out = Command::new(BIN)
        .args(["--socket", "/nonexistent/x.sock"])
        .args(bad)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{bad:?}: {err}");
    assert!(err.contains(why), "{bad:?}: {err}");
}

#[test]
fn print_num_queues() {
    let out = Command::new(BIN)
        .args(["--print-num-queues", "--max-qp", "16", "--max-cq", "32"])
        .output()
        .expect("run");
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "66\n");
    let out = Command::new(BIN)
        .args(["--print-num-queues", "--max-qp", "1", "--max-cq", "252"])
        .output()
        .expect("run");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "256\n");
}

#[test]
fn too_many_queues_is_refused() {
    let out = Command::new(BIN)
        .args([
            "--socket",
            "/nonexistent/x.sock",
            "--max-qp",
            "120",
            "--max-cq",
            "32",
        ])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("max_cq (32)") && err.contains("max_qp (120)") && err.contains("274"),
        "{err}"
    );
    // Each refused as a usage error (exit 2, with its reason) before any
    // socket is touched: a device that tried to serve would fail with 1.
    for (bad, why) in [
        (&["--max-qp", "0"][..], "--max-qp must be at least 1"),
        (&["--max-cq", "0"], "--max-cq must be at least 1"),
        (
            &["--queue-size", "1000"],
            "--queue-size 1000 must be a power of two",
        ),
        (&["--max-mr", "0"], "--max-mr must be"),
        (&["--ip", "10.0.2.15,fd00::1,any"], "`any`"),
        (
            &["--max-mr", "1", "--max-mr", "2"],
            "--max-mr given 2 times for 1 --socket",
        ),
        (&["--cpus", "3-1"], "a range goes from low to high"),
        (
            &["--cpus", "1023"],
            "--cpus 1023: this process may run only on CPUs",
        ),
    ] {
        expect_usage_error(bad, why);
    }
}

#[test]
fn several_sockets_need_a_mac_each() {
    let out = Command::new(BIN)
        .args([
            "--socket",
            "/nonexistent/a.sock",
            "--socket",
            "/nonexistent/b.sock",
        ])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("give one --mac per --socket"), "{err}");
}

/// Two tenants, neither pinned to its addresses: the backend does not
/// start, and says what to add.
#[test]
fn several_devices_must_pin_their_addresses() {
    let out = Command::new(BIN)
        .args([
            "--socket",
            "/nonexistent/a.sock",
            "--socket",
            "/nonexistent/b.sock",
        ])
        .args(["--mac", "02:00:00:00:00:01", "--mac", "02:00:00:00:00:02"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("pin each device's addresses with --ip"),
        "{err}"
    );
}

#[test]
fn exits_cleanly_after_disconnect() {
    let dir = TempDir::new_with_prefix("/tmp/vrdma-cli").expect("tempdir");
    let a = dir.as_path().join("a.sock");
    let b = dir.as_path().join("b.sock");
    let mut child = Command::new(BIN)
        .arg("--socket")
        .arg(&a)
        .arg("--socket")
        .arg(&b)
        .args(["--mac", "02:00:00:00:00:01", "--mac", "02:00:00:00:00:02"])
        .args(["--ip", "10.0.2.15", "--ip", "10.0.2.16"])
        .args(["--max-qp", "2", "--max-cq", "2", "--log-level", "debug"])
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    wait_for(&a);
    wait_for(&b);
    for s in [&a, &b] {
        let fe = Frontend::connect(s, 8).expect("connect");
        fe.set_owner().expect("set_owner");
        drop(fe);
    }
    let status = child.wait().expect("wait");
    assert!(status.success(), "exit status {status}");
    assert!(!a.exists() && !b.exists(), "socket files removed");
}

/// A device whose guest's NIC is the backend's (`--nic-socket`): the
/// process ends when the device's frontend goes, whether the NIC's came
/// and went or never connected (a QEMU without that netdev), and removes
/// both sockets.
#[test]
fn exits_after_disconnect_with_a_nic() {
    for nic_connects in [true, false] {
        let dir = TempDir::new_with_prefix("/tmp/vrdma-cli").expect("tempdir");
        let a = dir.as_path().join("a.sock");
        let nic = dir.as_path().join("nic.sock");
        let mut child = Command::new(BIN)
            .arg("--socket")
            .arg(&a)
            .arg("--nic-socket")
            .arg(&nic)
            .args(["--rings", "--max-qp", "2", "--max-cq", "2"])
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        wait_for(&a);
        assert!(nic.exists(), "the NIC's socket listens before the device's");
        let mut order = vec![&a];
        if nic_connects {
            order.insert(0, &nic);
        }
        for s in order {
            let fe = Frontend::connect(s, 8).expect("connect");
            fe.set_owner().expect("set_owner");
            drop(fe);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "still running 10 s after its frontends left (NIC connected: {nic_connects})"
                );
            }
            thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "exit status {status}");
        assert!(!a.exists() && !nic.exists(), "socket files removed");
    }
}

#[test]
fn exits_cleanly_on_sigterm() {
    let dir = TempDir::new_with_prefix("/tmp/vrdma-cli").expect("tempdir");
    let a = dir.as_path().join("a.sock");
    let mut child = Command::new(BIN)
        .arg("--socket")
        .arg(&a)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    wait_for(&a);
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = child.wait().expect("wait");
    assert!(status.success(), "exit status {status}");
    assert!(!a.exists(), "socket file removed");
}

/// One HTTP exchange with `addr`: `request` sent, the whole answer back.
fn http(addr: &str, request: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.write_all(request).expect("send");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("answer");
    answer
}

/// The backend with `args` and `--metrics` on a port of 127.0.0.1 that
/// was free a moment ago; the address.
fn with_metrics(args: &[&std::ffi::OsStr]) -> (std::process::Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let addr = format!("127.0.0.1:{port}");
    let child = Command::new(BIN)
        .args(args)
        .args(["--metrics", &addr])
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    (child, addr)
}

/// `--metrics`: every device's counters and objects, in Prometheus' text
/// format, to an HTTP GET; other requests get their error, and a client
/// that says nothing holds nobody up. (The counters moving under traffic:
/// tests/data_path.rs.)
#[test]
fn metrics_are_served_over_http() {
    let dir = TempDir::new_with_prefix("/tmp/vrdma-cli").expect("tempdir");
    let (a, b) = (
        dir.as_path().join("vm1.sock"),
        dir.as_path().join("vm2.sock"),
    );
    let (mut child, addr) = with_metrics(&[
        "--socket".as_ref(),
        a.as_ref(),
        "--socket".as_ref(),
        b.as_ref(),
        "--mac".as_ref(),
        "52:54:00:00:00:01".as_ref(),
        "--mac".as_ref(),
        "52:54:00:00:00:02".as_ref(),
        "--ip".as_ref(),
        "any".as_ref(),
    ]);
    wait_for(&a);
    wait_for(&b);
    // A client that connects and says nothing is dropped after a while;
    // the next is answered meanwhile or after.
    let _silent = std::net::TcpStream::connect(&addr).expect("connect");
    let got = http(&addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    assert!(got.starts_with("HTTP/1.0 200 OK\r\n"), "{got}");
    assert!(
        got.contains("Content-Type: text/plain; version=0.0.4"),
        "{got}"
    );
    for line in [
        "vhost_user_rdma_devices 2\n",
        "# TYPE vhost_user_rdma_sent_bytes_total counter\n",
        "vhost_user_rdma_sent_bytes_total{device=\"vm1\"} 0\n",
        "vhost_user_rdma_sent_bytes_total{device=\"vm2\"} 0\n",
        "vhost_user_rdma_dropped_not_peer_total{device=\"vm2\"} 0\n",
        "vhost_user_rdma_objects{device=\"vm1\",kind=\"qp\"} 0\n",
        "vhost_user_rdma_objects{device=\"vm2\",kind=\"mr_page\"} 0\n",
    ] {
        assert!(got.contains(line), "no {line:?} in {got}");
    }
    // Content-Length is the body's.
    let (head, body) = got.split_once("\r\n\r\n").expect("a head and a body");
    assert!(
        head.contains(&format!("Content-Length: {}\r\n", body.len())),
        "{head}"
    );
}

#[test]
fn metrics_answer_only_a_get_of_metrics() {
    let dir = TempDir::new_with_prefix("/tmp/vrdma-cli").expect("tempdir");
    let a = dir.as_path().join("a.sock");
    let (mut child, addr) = with_metrics(&["--socket".as_ref(), a.as_ref()]);
    wait_for(&a);
    let answers: Vec<String> = [
        &b"GET / HTTP/1.0\r\n\r\n"[..],
        b"POST /metrics HTTP/1.0\r\n\r\n",
        b"\r\n",
    ]
    .iter()
    .map(|r| http(&addr, r))
    .collect();
    // Taken: the address is in use.
    let second = Command::new(BIN)
        .args(["--socket", "/tmp/vrdma-cli-unused.sock", "--metrics", &addr])
        .output()
        .expect("run");
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    assert!(answers[0].starts_with("HTTP/1.0 404 "), "{}", answers[0]);
    assert!(answers[1].starts_with("HTTP/1.0 405 "), "{}", answers[1]);
    assert!(answers[2].starts_with("HTTP/1.0 400 "), "{}", answers[2]);
    assert_eq!(second.status.code(), Some(1));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains(&format!("--metrics {addr}")), "{err}");
}

/// Starts the backend on a fresh socket with `env` and `args`, sends it
/// `signals` one after the other, then SIGTERM; returns its stderr.
fn stderr_after(env: &[(&str, &str)], args: &[&str], signals: &[&str]) -> String {
    let dir = TempDir::new_with_prefix("/tmp/vrdma-cli").expect("tempdir");
    let a = dir.as_path().join("a.sock");
    let child = Command::new(BIN)
        .arg("--socket")
        .arg(&a)
        .args(args)
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    wait_for(&a);
    for &sig in signals.iter().chain(&["-TERM"]) {
        let sent = Command::new("kill")
            .args([sig, &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success());
        thread::sleep(Duration::from_millis(200));
    }
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "exit status {}", out.status);
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn rust_log_refines_the_log_level() {
    let quiet = stderr_after(&[], &["--log-level", "off"], &[]);
    assert!(!quiet.contains("serving"), "{quiet}");
    let refined = stderr_after(
        &[("RUST_LOG", "vhost_user_rdma::device=info")],
        &["--log-level", "off"],
        &[],
    );
    assert!(refined.contains("a: serving virtio-rdma"), "{refined}");
}

#[test]
fn sigusr1_logs_each_devices_counters() {
    let err = stderr_after(&[], &[], &["-USR1"]);
    assert!(
        err.contains("a: holds 0 PDs, 0 MRs (0 page-table entries), 0 windows, 0 CQs, 0 QPs, 0 SRQs, 0 GIDs, 0 counter sets, 0 XRC domains; counters: sent_pkts=0"),
        "{err}"
    );
}

/// `--hostile` takes known kinds only, `--hostile-every` at least 1 and
/// only with `--hostile`; a hostile backend says so loudly and prints its
/// lie counters, an honest one neither.
#[test]
fn hostile_mode_options() {
    for (bad, why) in [
        (
            &["--hostile", "bogus"][..],
            "unknown hostile kind `bogus` (one of: completions, handles, events)",
        ),
        (&["--hostile", "completions,"], "unknown hostile kind ``"),
        (
            &["--hostile", "completions", "--hostile-every", "0"],
            "N must be at least 1",
        ),
        (&["--hostile-every", "2"], "--hostile <KIND[,KIND...]>"),
    ] {
        expect_usage_error(bad, why);
    }
    let err = stderr_after(
        &[],
        &["--hostile", "events,handles", "--hostile-every", "1"],
        &["-USR1"],
    );
    assert!(
        err.contains("HOSTILE DEVICE MODE (--hostile handles,events)")
            && err.contains("never in production"),
        "{err}"
    );
    assert!(
        err.contains("logs_suppressed=0 hostile_completions=0 hostile_handles=0 hostile_events=0"),
        "{err}"
    );
    let honest = stderr_after(&[], &[], &["-USR1"]);
    assert!(
        honest.contains("logs_suppressed=0") && !honest.to_lowercase().contains("hostile"),
        "{honest}"
    );
}

/// QEMU asks each socket's device for its queue count: per-socket limits
/// give each its own.
#[test]
fn per_socket_limits_reach_each_frontend() {
    let dir = TempDir::new_with_prefix("/tmp/vrdma-cli").expect("tempdir");
    let a = dir.as_path().join("a.sock");
    let b = dir.as_path().join("b.sock");
    let mut child = Command::new(BIN)
        .arg("--socket")
        .arg(&a)
        .arg("--socket")
        .arg(&b)
        .args(["--mac", "02:00:00:00:00:01", "--mac", "02:00:00:00:00:02"])
        .args(["--ip", "any"])
        .args(["--max-qp", "16", "--max-cq", "32"])
        .args(["--socket-max-qp", "2", "--socket-max-qp", "16"])
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    wait_for(&a);
    wait_for(&b);
    let mut counts = Vec::new();
    for s in [&a, &b] {
        let mut fe = Frontend::connect(s, 1).expect("connect");
        fe.set_owner().expect("set_owner");
        let f = fe.get_features().expect("features");
        fe.set_features(f).expect("set features");
        let p = fe.get_protocol_features().expect("protocol features");
        fe.set_protocol_features(p).expect("set protocol features");
        counts.push(fe.get_queue_num().expect("queue num"));
    }
    // Control, CQs, SQ/RQ pairs, events.
    assert_eq!(counts, [2 + 32 + 2 * 2, 2 + 32 + 2 * 16]);
    let status = child.wait().expect("wait");
    assert!(status.success(), "exit status {status}");
}

/// `--net` needs `--rings` (VIRTIO_NET_F_ROCE implies the rings mode) and
/// takes no `--config-override`; its queue count has the 3 net queues in
/// front; it says what it serves, and SIGUSR1 shows its net counters.
#[test]
fn net_personality_options() {
    expect_usage_error(&["--net"], "--rings");
    expect_usage_error(
        &["--net", "--rings", "--config-override", "max_qp=1"],
        "--config-override",
    );
    let out = Command::new(BIN)
        .args(["--print-num-queues", "--net", "--rings"])
        .args(["--max-qp", "16", "--max-cq", "32", "--comp-vqs", "2"])
        .output()
        .expect("run");
    assert!(out.status.success());
    // 3 + (66 + notify + 2 completion-event queues).
    assert_eq!(String::from_utf8_lossy(&out.stdout), "72\n");
    expect_usage_error(
        &["--net", "--rings", "--max-qp", "64", "--max-cq", "121"],
        "3 net virtqueues + 254 RoCE virtqueues = 257 virtqueues",
    );
    let err = stderr_after(&[], &["--net", "--rings"], &["-USR1"]);
    assert!(
        err.contains("a: serving virtio-net+roce")
            && err.contains("receiveq, transmitq, net controlq, RoCE from 3: control"),
        "{err}"
    );
    assert!(err.contains(" net_tx_frames=0 "), "{err}");
}
