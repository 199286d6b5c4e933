// SPDX-License-Identifier: GPL-2.0
//! RoCEv2 frames (IBA vol. 1 annex A17): a [`Packet`] in UDP to port 4791,
//! in IPv4 or IPv6, in Ethernet, followed by its invariant CRC. This is
//! what an uplink sends and receives, and what Linux rxe and RoCE NICs
//! speak. The Ethernet, IP and UDP headers are etherparse's, the CRC-32
//! crc32fast's.
//!
//! The ICRC is the CRC-32 (IEEE, as Ethernet's) of 8 bytes of ones (a
//! masked LRH), the IP and UDP headers and the BTH with the fields a
//! router may change set to ones (IPv4 TOS, TTL and header checksum; IPv6
//! traffic class, flow label and hop limit; the UDP checksum; the BTH's
//! reserved byte after the P_Key), then the rest of the packet with its
//! pad; it goes on the wire least significant byte first. Linux rxe
//! (`rxe_icrc.c`) masks exactly these, and checks every packet it takes.
//!
//! A frame from the network is hostile: [`decode`] takes nothing but a
//! well-formed, unfragmented IPv4 (without options) or IPv6 (without
//! extension headers) UDP datagram to port 4791 whose lengths agree,
//! whose ICRC is right and whose packet parses; it says why otherwise.
//! VLAN tags are not taken (the uplink is untagged).

use std::net::IpAddr;

use etherparse::{
    EtherType, Ethernet2Header, Ethernet2HeaderSlice, IpDscp, IpEcn, IpNumber, Ipv4Header,
    Ipv4HeaderSlice, Ipv6FlowLabel, Ipv6Header, Ipv6HeaderSlice, UdpHeader, UdpHeaderSlice,
};

use crate::packet::{Malformed, Packet, BTH_LEN};

/// UDP destination port of RoCEv2.
pub const PORT: u16 = 4791;
/// Bytes of the ICRC.
pub const ICRC_LEN: usize = 4;
/// Bytes of an Ethernet header without VLAN tags.
pub const ETH_LEN: usize = 14;
/// Offset of the BTH's reserved byte (`resv8a`).
const BTH_RESV8A: usize = 4;

/// Who sends a frame to whom, as its Ethernet, IP and UDP headers say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoints {
    /// Ethernet source and destination.
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    /// IP source and destination (both of one family).
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    /// UDP source port: entropy for ECMP, chosen per QP ([`source_port`]).
    pub src_port: u16,
    /// IPv4 TOS or IPv6 traffic class (DSCP and ECN).
    pub traffic_class: u8,
    /// IPv4 TTL or IPv6 hop limit.
    pub hop_limit: u8,
    /// IPv6 flow label (20 bits); IPv4 has none.
    pub flow_label: u32,
}

/// Why bytes are not a RoCEv2 frame this device takes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Not IPv4 or IPv6 over untagged Ethernet, not UDP, not to port 4791.
    #[error("not RoCEv2: {0}")]
    NotRoce(&'static str),
    /// Its headers are cut short, or their lengths disagree.
    #[error("headers: {0}")]
    Headers(String),
    /// A fragment, IPv4 options or IPv6 extension headers.
    #[error("unsupported: {0}")]
    Unsupported(&'static str),
    /// The ICRC it carries is not the one its bytes have.
    #[error("ICRC {carried:#010x}, computed {computed:#010x}")]
    Icrc {
        /// The ICRC in the frame.
        carried: u32,
        /// The ICRC of its bytes.
        computed: u32,
    },
    /// What follows the UDP header is not a packet.
    #[error("packet: {0:?}")]
    Packet(Malformed),
    /// Encoding: the endpoints' addresses are of two families, or the
    /// packet does not fit in one IP datagram.
    #[error("cannot encode: {0}")]
    Encode(&'static str),
}

/// UDP source port of QP `qpn`'s packets: in 0xC000..=0xFFFF, as rxe
/// picks them, spread by a multiplicative hash of the QP number.
pub fn source_port(qpn: u32) -> u16 {
    0xc000 | (qpn.wrapping_mul(0x61c8_8647) >> 18) as u16
}

/// Appends the frame carrying `packet` from `ep.src_*` to `ep.dst_*` to
/// `out`: headers, packet, ICRC.
pub fn encode(ep: &Endpoints, packet: &Packet, out: &mut Vec<u8>) -> Result<(), Refused> {
    let mut body = Vec::with_capacity(BTH_LEN + 28 + packet.payload.len() + 3 + ICRC_LEN);
    packet.emit(&mut body).map_err(Refused::Packet)?;
    let udp_len = u16::try_from(UdpHeader::LEN + body.len() + ICRC_LEN)
        .map_err(|_| Refused::Encode("larger than an IP datagram"))?;
    let udp = UdpHeader {
        source_port: ep.src_port,
        destination_port: PORT,
        length: udp_len,
        // RoCEv2 leaves it zero (the ICRC protects the packet); rxe too.
        checksum: 0,
    };
    let start = out.len();
    let ip: Vec<u8> = match (ep.src_ip, ep.dst_ip) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut h =
                Ipv4Header::new(udp_len, ep.hop_limit, IpNumber::UDP, s.octets(), d.octets())
                    .map_err(|_| Refused::Encode("larger than an IP datagram"))?;
            h.dscp = IpDscp::try_new(ep.traffic_class >> 2).unwrap_or(IpDscp::ZERO);
            h.ecn = IpEcn::try_new(ep.traffic_class & 3).unwrap_or(IpEcn::ZERO);
            h.dont_fragment = true;
            h.header_checksum = h.calc_header_checksum();
            h.to_bytes().to_vec()
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => Ipv6Header {
            traffic_class: ep.traffic_class,
            flow_label: Ipv6FlowLabel::try_new(ep.flow_label & 0xf_ffff)
                .unwrap_or(Ipv6FlowLabel::ZERO),
            payload_length: udp_len,
            next_header: IpNumber::UDP,
            hop_limit: ep.hop_limit,
            source: s.octets(),
            destination: d.octets(),
        }
        .to_bytes()
        .to_vec(),
        _ => return Err(Refused::Encode("source and destination of two IP families")),
    };
    let eth = Ethernet2Header {
        source: ep.src_mac,
        destination: ep.dst_mac,
        ether_type: if ep.src_ip.is_ipv4() {
            EtherType::IPV4
        } else {
            EtherType::IPV6
        },
    };
    out.extend_from_slice(&eth.to_bytes());
    out.extend_from_slice(&ip);
    out.extend_from_slice(&udp.to_bytes());
    out.extend_from_slice(&body);
    let icrc = icrc(&out[start + ETH_LEN..]);
    out.extend_from_slice(&icrc.to_le_bytes());
    Ok(())
}

/// The ICRC of `datagram`: an IP header without options or extension
/// headers, then UDP, BTH and the rest of the packet (without the ICRC).
fn icrc(datagram: &[u8]) -> u32 {
    let ip_len = if datagram.first().is_some_and(|b| b >> 4 == 4) {
        Ipv4Header::MIN_LEN
    } else {
        Ipv6Header::LEN
    };
    let fixed = ip_len + UdpHeader::LEN + BTH_LEN;
    let Some(head) = datagram.get(..fixed) else {
        return 0;
    };
    let mut masked = [0u8; Ipv6Header::LEN + UdpHeader::LEN + BTH_LEN];
    let m = &mut masked[..fixed];
    m.copy_from_slice(head);
    if ip_len == Ipv4Header::MIN_LEN {
        m[1] = 0xff; // TOS
        m[8] = 0xff; // TTL
        m[10..12].fill(0xff); // header checksum
    } else {
        m[0] |= 0x0f; // traffic class, high nibble
        m[1..4].fill(0xff); // traffic class, low nibble; flow label
        m[7] = 0xff; // hop limit
    }
    m[ip_len + 6..ip_len + 8].fill(0xff); // UDP checksum
    m[ip_len + UdpHeader::LEN + BTH_RESV8A] = 0xff;
    let mut h = crc32fast::Hasher::new();
    h.update(&[0xff; 8]);
    h.update(m);
    h.update(&datagram[fixed..]);
    h.finalize()
}

/// What [`decode`] takes from either IP header.
struct IpFields {
    src: IpAddr,
    dst: IpAddr,
    traffic_class: u8,
    hop_limit: u8,
    flow_label: u32,
}

/// Reads a frame: who sent it to whom, and its packet.
pub fn decode(frame: &[u8]) -> Result<(Endpoints, Packet), Refused> {
    let eth = Ethernet2HeaderSlice::from_slice(frame)
        .map_err(|e| Refused::Headers(format!("Ethernet: {e}")))?;
    let after_eth = &frame[ETH_LEN..];
    let (ip, datagram, udp_at) = match eth.ether_type() {
        EtherType::IPV4 => {
            let ip = Ipv4HeaderSlice::from_slice(after_eth)
                .map_err(|e| Refused::Headers(format!("IPv4: {e}")))?;
            if ip.ihl() != 5 {
                return Err(Refused::Unsupported("IPv4 options"));
            }
            if ip.is_fragmenting_payload() {
                return Err(Refused::Unsupported("an IPv4 fragment"));
            }
            if ip.protocol() != IpNumber::UDP {
                return Err(Refused::NotRoce("not UDP"));
            }
            let total = usize::from(ip.total_len());
            let datagram = after_eth.get(..total).ok_or_else(|| {
                Refused::Headers(format!("IPv4 total length {total} beyond the frame"))
            })?;
            let ip_fields = IpFields {
                src: IpAddr::from(ip.source()),
                dst: IpAddr::from(ip.destination()),
                traffic_class: after_eth[1],
                hop_limit: ip.ttl(),
                flow_label: 0,
            };
            (ip_fields, datagram, Ipv4Header::MIN_LEN)
        }
        EtherType::IPV6 => {
            let ip = Ipv6HeaderSlice::from_slice(after_eth)
                .map_err(|e| Refused::Headers(format!("IPv6: {e}")))?;
            if ip.next_header() != IpNumber::UDP {
                return Err(Refused::Unsupported("IPv6 extension headers, or not UDP"));
            }
            let total = Ipv6Header::LEN + usize::from(ip.payload_length());
            let datagram = after_eth.get(..total).ok_or_else(|| {
                Refused::Headers(format!("IPv6 payload length beyond the frame ({total})"))
            })?;
            let ip_fields = IpFields {
                src: IpAddr::from(ip.source()),
                dst: IpAddr::from(ip.destination()),
                traffic_class: ip.traffic_class(),
                hop_limit: ip.hop_limit(),
                flow_label: ip.flow_label().value(),
            };
            (ip_fields, datagram, Ipv6Header::LEN)
        }
        _ => return Err(Refused::NotRoce("neither IPv4 nor IPv6")),
    };
    let after_ip = datagram.get(udp_at..).ok_or_else(|| {
        Refused::Headers(format!("IP length {} below its header", datagram.len()))
    })?;
    let udp =
        UdpHeaderSlice::from_slice(after_ip).map_err(|e| Refused::Headers(format!("UDP: {e}")))?;
    if udp.destination_port() != PORT {
        return Err(Refused::NotRoce("not to UDP port 4791"));
    }
    if usize::from(udp.length()) != datagram.len() - udp_at {
        return Err(Refused::Headers(format!(
            "UDP length {} in an IP payload of {}",
            udp.length(),
            datagram.len() - udp_at
        )));
    }
    let ep = Endpoints {
        src_mac: eth.source(),
        dst_mac: eth.destination(),
        src_ip: ip.src,
        dst_ip: ip.dst,
        src_port: udp.source_port(),
        traffic_class: ip.traffic_class,
        hop_limit: ip.hop_limit,
        flow_label: ip.flow_label,
    };
    let body = &datagram[udp_at + UdpHeader::LEN..];
    let Some(split) = body.len().checked_sub(ICRC_LEN).filter(|&n| n >= BTH_LEN) else {
        return Err(Refused::Packet(Malformed::Truncated));
    };
    let (packet, carried) = body.split_at(split);
    let carried = u32::from_le_bytes([carried[0], carried[1], carried[2], carried[3]]);
    let computed = icrc(&datagram[..datagram.len() - ICRC_LEN]);
    if carried != computed {
        return Err(Refused::Icrc { carried, computed });
    }
    let packet = Packet::parse(packet).map_err(Refused::Packet)?;
    Ok((ep, packet))
}

#[cfg(test)]
mod tests;
