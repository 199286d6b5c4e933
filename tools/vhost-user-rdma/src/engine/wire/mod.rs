// SPDX-License-Identifier: GPL-2.0
//! The engine's packets on a network: RoCEv2 frames ([`crate::roce`])
//! through the device's uplink (`net/uplink.rs`), to and from peers that
//! are not devices of this process (another host's backend, Linux rxe, a
//! RoCE NIC).
//!
//! Datagrams (UD and GSI, so also the connection manager's MADs) go both
//! ways, here; RC and UC connections run IB's transports on packets
//! ([`connected`]). XRC packets from the wire are refused and counted.
//!
//! A frame from the wire is hostile: it is decoded with its ICRC checked,
//! must be addressed to the device's MAC and one of its GIDs, carry the
//! default P_Key, and is then what a datagram from a QP of this process
//! is: taken only by a UD QP with its Q_Key and a receive posted.

use std::net::{IpAddr, Ipv6Addr};
use std::sync::Arc;

use log::debug;
use vm_memory::GuestAddressSpace;

use super::message::{Frame, Payload, Remote, Request};
use super::{responder, CHUNK};
use crate::ctrl::Ctrl;
use crate::device::RdmaDevice;
use crate::fabric;
use crate::ib::IB_QPT_UD;
use crate::net::uplink::Uplink;
use crate::packet::{Deth, Op, Opcode, Packet, Transport};
use crate::roce::{self, Endpoints, Refused};
use crate::stats::Counter;

mod connected;

pub(in crate::engine) use connected::{
    flush as flush_connected, holds_enough, on_wire, post as post_connected,
};
pub use connected::{now_us, tick};

/// The default partition's P_Key, full membership: the only one RoCEv2
/// peers use.
const DEFAULT_PKEY: u16 = 0xffff;

/// The hop limit of a datagram whose address vector says 0 (IP would
/// drop it at once): Linux's default TTL.
const DEFAULT_HOP_LIMIT: u8 = 64;

/// The immediate data of an element's `ex` as a packet carries it. It is
/// four bytes the application gave in network order (`__be32`): the
/// element holds them as they were in memory, `ex` being those bytes read
/// as a little-endian number, and the wire carries them as they are (rxe
/// copies them, never converts them).
pub(crate) fn imm_to_wire(ex: u32) -> u32 {
    u32::from_be_bytes(ex.to_le_bytes())
}

/// The `ex` of a completion of immediate data `imm` from the wire (see
/// [`imm_to_wire`]).
pub(crate) fn imm_from_wire(imm: u32) -> u32 {
    u32::from_le_bytes(imm.to_be_bytes())
}

/// The IP address a RoCEv2 GID stands for: IPv4-mapped GIDs are IPv4.
pub(crate) fn ip_of(gid: &[u8; 16]) -> IpAddr {
    let v6 = Ipv6Addr::from(*gid);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

/// The GID of an IP address (IPv4 mapped into IPv6).
pub(crate) fn gid_of(ip: &IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// The IPv4 TTL or IPv6 hop limit of an address vector's `hop_limit`.
fn hop_limit(av: u8) -> u8 {
    match av {
        0 => DEFAULT_HOP_LIMIT,
        h => h,
    }
}

/// Puts `p` on `up` from and to `ep`, counted as sent or as dropped: the
/// one way the engine's packets leave.
fn send_packet(ctrl: &Ctrl, up: &Uplink, ep: &Endpoints, p: &Packet, frame: &mut Vec<u8>) {
    frame.clear();
    match roce::encode(ep, p, frame).map_err(|e| e.to_string()) {
        Ok(()) => match up.send(frame) {
            Ok(()) => return ctrl.stats().inc(Counter::WireTxPkts),
            Err(e) => debug!("{}: to {}: uplink: {e}; lost", ctrl.name(), ep.dst_ip),
        },
        Err(e) => debug!("{}: to {}: {e}; lost", ctrl.name(), ep.dst_ip),
    }
    ctrl.stats().inc(Counter::WireTxDropped);
}

/// The MAC frames to `ip` go to: a multicast group's own, or the
/// neighbour the uplink has seen with it.
fn dest_mac(up: &Uplink, ip: &IpAddr) -> Option<[u8; 6]> {
    match ip {
        IpAddr::V4(v4) if v4.is_multicast() => {
            let o = v4.octets();
            Some([0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]])
        }
        IpAddr::V6(v6) if v6.is_multicast() => {
            let o = v6.octets();
            Some([0x33, 0x33, o[12], o[13], o[14], o[15]])
        }
        _ => up.neighbour(ip),
    }
}

/// Sends datagram `m` (a UD or GSI SEND of `ctrl`'s device) out `up`.
/// Unreliable: without a known MAC for its destination, or if the link
/// refuses it, it is lost (and counted), as a NIC loses it.
pub(super) fn send_datagram(ctrl: &Ctrl, up: &Uplink, m: &Request<'_>) {
    let stats = ctrl.stats();
    let (src_ip, dst_ip) = (ip_of(&m.src_gid), ip_of(&m.dest_gid));
    let Some(dst_mac) = dest_mac(up, &dst_ip) else {
        stats.inc(Counter::WireNoNeighbour);
        debug!("{}: datagram to {dst_ip}: no MAC known; lost", ctrl.name());
        return;
    };
    let mut p = Packet::new(
        Opcode {
            transport: Transport::Ud,
            op: m.op,
        },
        m.dest_qp,
        m.psn,
    );
    p.se = m.se;
    p.imm = m.imm.map(imm_to_wire);
    let q = m.src_qp.to_be_bytes();
    p.deth = Some(Deth {
        qkey: m.qkey.unwrap_or(0).into(),
        reserved: 0,
        src_qp: [q[1], q[2], q[3]],
    });
    p.payload = m.payload.to_vec();
    let ep = Endpoints {
        src_mac: ctrl.limits().mac().0,
        dst_mac,
        src_ip,
        dst_ip,
        src_port: roce::source_port(m.src_qp),
        traffic_class: m.frame.traffic_class,
        hop_limit: hop_limit(m.frame.hop_limit),
        flow_label: m.frame.flow_label,
    };
    let mut frame = Vec::with_capacity(roce::ETH_LEN + 80 + p.payload.len());
    send_packet(ctrl, up, &ep, &p, &mut frame);
}

/// Takes `frame`, from `dev`'s uplink, if it is RoCEv2 to one of the
/// port's GIDs: whether it was (`false`: a frame for the guest's network
/// stack). A RoCEv2 frame the device does not accept is dropped and
/// counted.
pub fn received(dev: &Arc<RdmaDevice>, frame: &[u8]) -> bool {
    let ctrl = dev.ctrl();
    let (ep, p) = match roce::decode(frame) {
        Ok(x) => x,
        Err(Refused::NotRoce(_)) => return false,
        Err(e) => {
            refuse(ctrl, format_args!("{e}"));
            return true;
        }
    };
    if ep.dst_mac != ctrl.limits().mac().0 {
        refuse(
            ctrl,
            format_args!("to MAC {:02x?}, not the port's", ep.dst_mac),
        );
        return true;
    }
    if p.pkey != DEFAULT_PKEY {
        refuse(ctrl, format_args!("P_Key {:#06x}", p.pkey));
        return true;
    }
    // A NIC takes RoCEv2 only for its GIDs; a frame to another address of
    // the guest (or any, before the RDMA driver has added GIDs) is the
    // guest's network stack's: Linux's rxe on the same netdev, or an ICMP
    // error.
    let dgid = gid_of(&ep.dst_ip);
    if !ctrl.has_gid(&dgid) {
        return false;
    }
    match (p.opcode.transport, p.opcode.op, p.deth) {
        (Transport::Ud, Op::SendOnly | Op::SendOnlyImm, Some(deth)) => {
            let src_qp = u32::from_be_bytes([0, deth.src_qp[0], deth.src_qp[1], deth.src_qp[2]]);
            let m = Request {
                src_gid: gid_of(&ep.src_ip),
                src_qp,
                qp_type: IB_QPT_UD,
                dest_gid: dgid,
                dest_qp: p.dest_qp,
                op: p.opcode.op,
                psn: p.psn,
                npsn: 1,
                len: p.payload.len() as u64,
                se: p.se,
                remote: Remote::default(),
                imm: p.imm.map(imm_from_wire),
                ieth: None,
                compare_add: 0,
                swap: 0,
                flush: (0, 0),
                xrc_srqn: None,
                qkey: Some(deth.qkey.get()),
                frame: Frame {
                    traffic_class: ep.traffic_class,
                    flow_label: ep.flow_label,
                    hop_limit: ep.hop_limit,
                    sl: 0,
                    smac: ep.src_mac,
                },
                payload: Payload::Inline(&p.payload),
                whole_up_to: CHUNK,
            };
            ctrl.stats().inc(Counter::WireRxPkts);
            // A datagram step: the whole fabric, as for one of this
            // process's (its receiver's QP, SRQ and CQ).
            let fabric = fabric::lock_datagram();
            let mem = ctrl.mem().memory();
            responder::datagram(&fabric, dev.clone(), &mem, &m);
        }
        (Transport::Rc | Transport::Uc, ..) => connected::received(dev, &ep, &p),
        (t, op, _) => refuse(
            ctrl,
            format_args!("{op:?} of {t:?}: XRC does not go on the wire yet"),
        ),
    }
    true
}

fn refuse(ctrl: &Ctrl, why: std::fmt::Arguments<'_>) {
    ctrl.stats().inc(Counter::WireRxDropped);
    debug!("{}: frame from the uplink dropped: {why}", ctrl.name());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gids_and_ips() {
        let ip: IpAddr = "10.0.2.15".parse().unwrap();
        let gid = gid_of(&ip);
        assert_eq!(&gid[..12], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]);
        assert_eq!(ip_of(&gid), ip);
        let ip6: IpAddr = "fe80::5054:ff:fe12:3456".parse().unwrap();
        assert_eq!(ip_of(&gid_of(&ip6)), ip6);
    }
}
