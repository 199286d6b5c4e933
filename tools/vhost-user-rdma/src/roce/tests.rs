// SPDX-License-Identifier: GPL-2.0
//! Frames encoded and decoded again, frames a router changed (the ICRC
//! holds), and frames a hostile sender made (each refused, with why).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use zerocopy::big_endian::{U32, U64};

use super::*;
use crate::packet::{Deth, Op, Opcode, Reth, Transport};

fn v4() -> Endpoints {
    Endpoints {
        src_mac: [0x52, 0x54, 0, 0, 0, 1],
        dst_mac: [0x52, 0x54, 0, 0, 0, 2],
        src_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        dst_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        src_port: source_port(17),
        traffic_class: 0,
        hop_limit: 64,
        flow_label: 0,
    }
}

fn v6() -> Endpoints {
    Endpoints {
        src_ip: IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
        dst_ip: IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)),
        traffic_class: 0x68,
        flow_label: 0x1_2345,
        ..v4()
    }
}

/// An RC WRITE FIRST with 1024 bytes of payload.
fn write_first() -> Packet {
    let mut p = Packet::new(
        Opcode {
            transport: Transport::Rc,
            op: Op::WriteFirst,
        },
        0x11,
        0xff_fffe,
    );
    p.reth = Some(Reth {
        va: U64::new(0x7f00_1234_5000),
        rkey: U32::new(0xabcd),
        dma_len: U32::new(4096),
    });
    p.payload = (0..1024).map(|i| (i * 7) as u8).collect();
    p
}

/// A UD SEND ONLY of 5 bytes (3 pad bytes).
fn ud_send() -> Packet {
    let mut p = Packet::new(
        Opcode {
            transport: Transport::Ud,
            op: Op::SendOnly,
        },
        1,
        7,
    );
    p.deth = Some(Deth {
        qkey: U32::new(0x8001_0000),
        reserved: 0,
        src_qp: [0, 0, 0x12],
    });
    p.ack_req = true;
    p.payload = b"hello".to_vec();
    p
}

fn frame(ep: &Endpoints, p: &Packet) -> Vec<u8> {
    let mut out = Vec::new();
    encode(ep, p, &mut out).expect("encode");
    out
}

#[test]
fn frames_decode_to_what_was_encoded() {
    for ep in [v4(), v6()] {
        for p in [write_first(), ud_send()] {
            let f = frame(&ep, &p);
            assert_eq!(decode(&f), Ok((ep, p.clone())), "{ep:?}");
        }
    }
    // Headers: Ethernet, IP, UDP, BTH, RETH, payload, ICRC.
    assert_eq!(
        frame(&v4(), &write_first()).len(),
        14 + 20 + 8 + 12 + 16 + 1024 + 4
    );
    assert_eq!(frame(&v6(), &ud_send()).len(), 14 + 40 + 8 + 12 + 8 + 8 + 4);
}

#[test]
fn what_routers_change_leaves_the_icrc_right() {
    let mut f = frame(&v4(), &write_first());
    // TTL and TOS change on the way (the IPv4 checksum with them), and so
    // may the UDP checksum and the BTH's reserved byte.
    f[ETH_LEN + 8] = 3;
    f[ETH_LEN + 1] = 0xb8;
    f[ETH_LEN + 10..ETH_LEN + 12].copy_from_slice(&[0x12, 0x34]);
    f[ETH_LEN + 20 + 6] = 0x55;
    f[ETH_LEN + 28 + 4] = 0x80;
    let (ep, p) = decode(&f).expect("still a frame");
    assert_eq!((ep.hop_limit, ep.traffic_class), (3, 0xb8));
    assert_eq!(p, write_first());
    let mut f = frame(&v6(), &ud_send());
    f[ETH_LEN + 1] = 0x3f; // traffic class and flow label
    f[ETH_LEN + 7] = 1; // hop limit
    assert!(decode(&f).is_ok());
}

#[test]
fn a_changed_byte_fails_the_icrc() {
    let good = frame(&v4(), &write_first());
    // Anything else: the source address, the PSN, the payload, the ICRC.
    for at in [
        ETH_LEN + 12,
        ETH_LEN + 28 + 11,
        good.len() - 100,
        good.len() - 1,
    ] {
        let mut f = good.clone();
        f[at] ^= 0x01;
        assert!(
            matches!(decode(&f), Err(Refused::Icrc { .. })),
            "byte {at}: {:?}",
            decode(&f)
        );
    }
}

#[test]
fn hostile_frames_are_refused_with_why() {
    let good = frame(&v4(), &ud_send());
    let cut = |n: usize| good[..n].to_vec();
    let with = |at: usize, b: u8| {
        let mut f = good.clone();
        f[at] = b;
        f
    };
    // Too short at every layer.
    for n in [
        0,
        10,
        ETH_LEN + 10,
        ETH_LEN + 24,
        ETH_LEN + 28 + 8,
        good.len() - 1,
    ] {
        assert!(decode(&cut(n)).is_err(), "{n} bytes");
    }
    assert!(matches!(decode(&with(12, 0x81)), Err(Refused::NotRoce(_))));
    // Not UDP; another port; a fragment; options.
    assert!(matches!(
        decode(&with(ETH_LEN + 9, 6)),
        Err(Refused::NotRoce(_))
    ));
    assert!(matches!(
        decode(&with(ETH_LEN + 23, 0xb8)),
        Err(Refused::NotRoce(_))
    ));
    assert!(matches!(
        decode(&with(ETH_LEN + 6, 0x20)),
        Err(Refused::Unsupported(_))
    ));
    assert!(decode(&with(ETH_LEN, 0x46)).is_err());
    // An IP or UDP length that disagrees with the frame, or is shorter
    // than the IP header (found by the fuzz target).
    let mut short = with(ETH_LEN + 3, 10);
    short[ETH_LEN + 2] = 0;
    assert!(matches!(decode(&short), Err(Refused::Headers(_))));
    assert!(matches!(
        decode(&with(ETH_LEN + 3, 0xff)),
        Err(Refused::Headers(_))
    ));
    assert!(matches!(
        decode(&with(ETH_LEN + 25, 0x10)),
        Err(Refused::Headers(_))
    ));
    // Ethernet padding after the datagram is not part of it.
    let mut padded = good.clone();
    padded.extend_from_slice(&[0; 9]);
    assert_eq!(decode(&padded).map(|(_, p)| p), Ok(ud_send()));
}

#[test]
fn a_well_formed_frame_of_a_bad_packet_is_refused() {
    // Its ICRC right, its TVer 1.
    let mut p = frame(&v4(), &ud_send());
    p[ETH_LEN + 28 + 1] |= 1;
    let end = p.len() - ICRC_LEN;
    let icrc = icrc(&p[ETH_LEN..end]).to_le_bytes();
    p[end..].copy_from_slice(&icrc);
    assert_eq!(decode(&p), Err(Refused::Packet(Malformed::Version(1))));
}

#[test]
fn source_ports_are_in_rxe_range_and_spread() {
    let ports: std::collections::BTreeSet<u16> = (0..64).map(source_port).collect();
    assert!(ports.iter().all(|&p| p >= 0xc000));
    assert!(ports.len() > 48, "{} distinct of 64", ports.len());
}

#[test]
fn two_families_do_not_make_a_frame() {
    let ep = Endpoints {
        dst_ip: v6().dst_ip,
        ..v4()
    };
    assert!(matches!(
        encode(&ep, &ud_send(), &mut Vec::new()),
        Err(Refused::Encode(_))
    ));
}
