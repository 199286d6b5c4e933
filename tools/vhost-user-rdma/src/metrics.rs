// SPDX-License-Identifier: GPL-2.0
//! The operator's view (`--metrics ADDR`): every device's counters and what
//! its guest holds, in Prometheus' text format over HTTP on a TCP address
//! of the host: `curl http://127.0.0.1:9870/metrics`, or a Prometheus
//! server scraping it as it scrapes a node exporter.
//!
//! Each counter of the log's list (`stats.rs`) is a counter family,
//! `vhost_user_rdma_NAME_total`, with one series per device (label
//! `device`: the name its log lines carry, its socket's file name); the
//! objects a device's guest holds are the gauge `vhost_user_rdma_objects`
//! (labels `device` and `kind`: pd, mr, mr_page, mw, cq, qp, srq, gid,
//! counter_set, xrcd).
//!
//! One thread answers one request at a time, read with a deadline and a
//! size bound (a client that says nothing, or too much, is dropped). A
//! scrape reads the counters (atomics) and takes each device's state lock
//! once, briefly: no data path waits on it. The HTTP is the least a GET of
//! one path needs, written here: the backend has no HTTP library, and
//! taking one in for this would be more code than it replaces.

use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use log::{debug, info};

use crate::device::RdmaDevice;
use crate::{fabric, stats};

/// What every metric's name starts with.
const PREFIX: &str = "vhost_user_rdma";
/// The most bytes of a request read.
const MAX_REQUEST: u64 = 8192;
/// How long a client may take to send its request or take the answer.
const TIMEOUT: Duration = Duration::from_secs(2);

/// Listens on `addr` and answers on a thread of its own; the address it
/// listens on (the port the system chose, for port 0).
pub fn spawn(addr: SocketAddr) -> io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    thread::Builder::new()
        .name("metrics".to_string())
        .spawn(move || {
            for stream in listener.incoming() {
                let answered = stream.and_then(answer);
                if let Err(e) = answered {
                    debug!("metrics: {e}");
                }
            }
        })?;
    info!("metrics: http://{local}/metrics");
    Ok(local)
}

/// Reads one request from `stream` and answers it.
fn answer(mut stream: TcpStream) -> io::Result<()> {
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    let mut request = BufReader::new((&stream).take(MAX_REQUEST));
    let mut first = String::new();
    request.read_line(&mut first)?;
    // The rest of the head, to its empty line (a GET has no body); what
    // comes of it does not change the answer.
    let mut line = String::new();
    while !first.trim_end().is_empty()
        && request.read_line(&mut line).is_ok_and(|n| n > 0)
        && !line.trim_end().is_empty()
    {
        line.clear();
    }
    let mut words = first.split_whitespace();
    let (status, body) = match (words.next(), words.next()) {
        (Some("GET"), Some("/metrics")) => ("200 OK", render(&fabric::devices(&fabric::lock()))),
        (Some("GET"), Some(_)) => ("404 Not Found", "metrics are at /metrics\n".to_string()),
        (Some(_), Some(_)) => ("405 Method Not Allowed", "GET only\n".to_string()),
        _ => ("400 Bad Request", "not an HTTP request\n".to_string()),
    };
    write!(
        stream,
        "HTTP/1.0 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// `s` as a label value: backslash, double quote and newline escaped.
fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One scrape of `devices`, in Prometheus' text format.
pub fn render(devices: &[Arc<RdmaDevice>]) -> String {
    let mut out = String::new();
    let names: Vec<String> = devices.iter().map(|d| label(d.name())).collect();
    // Writing to a String does not fail.
    let _ = writeln!(out, "# HELP {PREFIX}_devices Devices this backend serves.");
    let _ = writeln!(out, "# TYPE {PREFIX}_devices gauge");
    let _ = writeln!(out, "{PREFIX}_devices {}", devices.len());
    // A family per counter, a series per device (an empty family for none).
    for (c, name) in stats::counters().filter(|_| !devices.is_empty()) {
        let _ = writeln!(out, "# TYPE {PREFIX}_{name}_total counter");
        for (dev, d) in names.iter().zip(devices) {
            let value = d.ctrl().stats().get(c);
            let _ = writeln!(out, "{PREFIX}_{name}_total{{device=\"{dev}\"}} {value}");
        }
    }
    let _ = writeln!(
        out,
        "# HELP {PREFIX}_objects Objects the device's guest holds (mr_page: page-table entries of its MRs)."
    );
    let _ = writeln!(out, "# TYPE {PREFIX}_objects gauge");
    for (dev, d) in names.iter().zip(devices) {
        for (kind, n) in d.ctrl().objects() {
            let _ = writeln!(
                out,
                "{PREFIX}_objects{{device=\"{dev}\",kind=\"{kind}\"}} {n}"
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label("vm1"), "vm1");
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn no_devices_is_a_valid_scrape() {
        assert_eq!(
            render(&[]),
            "# HELP vhost_user_rdma_devices Devices this backend serves.\n\
             # TYPE vhost_user_rdma_devices gauge\n\
             vhost_user_rdma_devices 0\n\
             # HELP vhost_user_rdma_objects Objects the device's guest holds (mr_page: \
             page-table entries of its MRs).\n\
             # TYPE vhost_user_rdma_objects gauge\n"
        );
    }
}
