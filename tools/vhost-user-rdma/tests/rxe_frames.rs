// SPDX-License-Identifier: GPL-2.0
//! The codec against Linux rxe: frames rxe sent (captured by
//! `tools/testing/rxe-frames/capture.sh`: RC and UD pingpongs over IPv4 and
//! IPv6, RDMA WRITE with and without immediate data, READ, atomics, ACKs,
//! rdma_cm's MADs) decode with their ICRC checked, and encoding what was
//! decoded gives rxe's bytes back from the UDP header on (the IP header's
//! identification and flags are the sender's own choice).

use vhost_user_rdma::packet::{Op, Transport};
use vhost_user_rdma::roce::{self, ETH_LEN};

/// (step, opcode byte, frame) of each line of the capture.
fn frames() -> Vec<(String, u8, Vec<u8>)> {
    include_str!("data/rxe-frames.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut f = l.split_whitespace();
            let step = f.next().expect("step").to_string();
            let op = f
                .next()
                .and_then(|o| o.strip_prefix("opcode=0x"))
                .expect("opcode");
            let op = u8::from_str_radix(op, 16).expect("opcode hex");
            let hex = f.next().expect("frame");
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
                .collect();
            (step, op, bytes)
        })
        .collect()
}

#[test]
fn rxe_frames_decode_and_encode_back() {
    let frames = frames();
    let mut ops = std::collections::BTreeSet::new();
    let (mut v4, mut v6) = (0, 0);
    for (step, op, frame) in &frames {
        let (ep, p) =
            roce::decode(frame).unwrap_or_else(|e| panic!("{step} opcode {op:#04x}: {e}"));
        assert_eq!(p.opcode.byte(), *op, "{step}");
        ops.insert((p.opcode.transport == Transport::Ud, p.opcode.op as u8));
        if ep.src_ip.is_ipv4() {
            v4 += 1;
        } else {
            v6 += 1;
        }
        let mut again = Vec::new();
        roce::encode(&ep, &p, &mut again).expect("encode");
        let ip_len = if ep.src_ip.is_ipv4() { 20 } else { 40 };
        let udp = ETH_LEN + ip_len;
        let datagram_end = udp + usize::from(u16::from_be_bytes([frame[udp + 4], frame[udp + 5]]));
        assert_eq!(
            again[udp..again.len() - roce::ICRC_LEN],
            frame[udp..datagram_end - roce::ICRC_LEN],
            "{step} opcode {op:#04x}: UDP header and packet"
        );
        if ep.src_ip.is_ipv6() {
            // No identification in IPv6: the whole frame, ICRC included.
            assert_eq!(again[..], frame[..datagram_end], "{step}");
        }
    }
    // What the capture holds: both families, and the operations the
    // steps make (each would be missing if its step had failed).
    assert!(v4 > 0 && v6 > 0, "IPv4 {v4}, IPv6 {v6} frames");
    for (ud, op) in [
        (false, Op::SendFirst),
        (false, Op::SendLast),
        (false, Op::SendOnly),
        (false, Op::WriteFirst),
        (false, Op::WriteMiddle),
        (false, Op::WriteLast),
        (false, Op::WriteOnlyImm),
        (false, Op::ReadRequest),
        (false, Op::ReadResponseFirst),
        (false, Op::ReadResponseLast),
        (false, Op::Acknowledge),
        (false, Op::AtomicAcknowledge),
        (true, Op::SendOnly),
    ] {
        assert!(
            ops.contains(&(ud, op as u8)),
            "no {op:?} (UD {ud}) captured"
        );
    }
}

#[test]
fn a_changed_rxe_frame_is_refused() {
    for (step, _, frame) in frames().iter().take(8) {
        let mut f = frame.clone();
        let last = f.len() - 1;
        f[last] ^= 0x80;
        assert!(roce::decode(&f).is_err(), "{step}: a changed ICRC taken");
    }
}
