// SPDX-License-Identifier: GPL-2.0
//! The net control queue: `{u8 class, u8 cmd, data...}` readable, a `u8`
//! ack (`VIRTIO_NET_OK`/`VIRTIO_NET_ERR`) writable.
//!
//! Only what the offered features allow is accepted: the RX class's
//! PROMISC and ALLMULTI (`VIRTIO_NET_F_CTRL_RX`) and the MAC class's
//! MAC_TABLE_SET (always with a control queue); the rest is answered ERR
//! (`CTRL_RX_EXTRA`, `CTRL_MAC_ADDR`, `CTRL_VLAN`, `MQ`, ... are not
//! offered). The switch does not filter, so the modes and tables are
//! checked and acknowledged, not applied: a device receives what is
//! addressed to it and every group frame.
//!
//! Linux's virtio_net busy-waits for each answer (with no timeout, often
//! under RTNL): every chain gets one, however malformed.

use std::io::{self, Read, Write};

use virtio_bindings::bindings::virtio_net::{
    VIRTIO_NET_CTRL_MAC, VIRTIO_NET_CTRL_MAC_TABLE_SET, VIRTIO_NET_CTRL_RX,
    VIRTIO_NET_CTRL_RX_ALLMULTI, VIRTIO_NET_CTRL_RX_PROMISC, VIRTIO_NET_ERR, VIRTIO_NET_OK,
};
use virtio_queue::DescriptorChain;
use vm_memory::{GuestAddressSpace, GuestMemoryMmap};

use super::NetPort;
use crate::ctrl::Ctrl;
use crate::vring::RdmaVring;

/// Longest request read: a header and two MAC tables of 5000 entries
/// together (Linux sends every unicast and multicast address it has);
/// longer ones are answered ERR unread.
pub const MAX_REQUEST_LEN: usize = 2 + 8 + 6 * 5000;

const OK: u8 = VIRTIO_NET_OK as u8;
const ERR: u8 = VIRTIO_NET_ERR as u8;

/// Serves every available chain of the net control queue.
pub fn process(port: &NetPort, ctrl: &Ctrl, vring: &RdmaVring) -> io::Result<()> {
    let mem = vring.mem().memory();
    let mem: &GuestMemoryMmap = &mem;
    vring.serve_chains(mem, |chain| handle_chain(port, ctrl, chain, mem))
}

/// Runs one chain; the bytes written to its writable part (1, or 0 when
/// there is no room for the ack).
fn handle_chain(
    port: &NetPort,
    ctrl: &Ctrl,
    chain: DescriptorChain<&GuestMemoryMmap>,
    mem: &GuestMemoryMmap,
) -> u32 {
    let head = chain.head_index();
    let mut writer = match chain.clone().writer(mem) {
        Ok(w) if w.available_bytes() > 0 => w,
        Ok(_) | Err(_) => {
            ctrl.guest_warn(format_args!(
                "net control chain {head}: no device-writable byte for the ack"
            ));
            return 0;
        }
    };
    let ack = match read_request(chain, mem) {
        Ok(request) => execute(port, &request),
        Err(why) => {
            ctrl.guest_warn(format_args!("net control chain {head}: {why}"));
            ERR
        }
    };
    if ack != OK {
        ctrl.guest_warn(format_args!("net control chain {head}: answered ERR"));
    }
    if let Err(e) = writer.write_all(&[ack]) {
        ctrl.guest_warn(format_args!(
            "net control chain {head}: cannot write the ack ({e})"
        ));
    }
    u32::try_from(writer.bytes_written()).unwrap_or(u32::MAX)
}

/// The readable part of a chain, if it can be read and is not too long.
fn read_request(
    chain: DescriptorChain<&GuestMemoryMmap>,
    mem: &GuestMemoryMmap,
) -> Result<Vec<u8>, String> {
    let mut reader = chain
        .reader(mem)
        .map_err(|e| format!("bad device-readable part ({e})"))?;
    let len = reader.available_bytes();
    if len > MAX_REQUEST_LEN {
        return Err(format!("request of {len} bytes exceeds {MAX_REQUEST_LEN}"));
    }
    let mut buf = vec![0u8; len];
    reader
        .read_exact(&mut buf)
        .map_err(|e| format!("cannot read the request ({e})"))?;
    Ok(buf)
}

/// Runs one request: the ack.
fn execute(port: &NetPort, request: &[u8]) -> u8 {
    let [class, cmd, data @ ..] = request else {
        return ERR;
    };
    let (class, cmd) = (u32::from(*class), u32::from(*cmd));
    match class {
        VIRTIO_NET_CTRL_RX => rx_mode(port, cmd, data),
        VIRTIO_NET_CTRL_MAC if cmd == VIRTIO_NET_CTRL_MAC_TABLE_SET => mac_table_set(data),
        _ => ERR,
    }
}

/// `VIRTIO_NET_CTRL_RX_PROMISC`/`ALLMULTI`: one byte, on or off.
fn rx_mode(port: &NetPort, cmd: u32, data: &[u8]) -> u8 {
    let [on] = data else { return ERR };
    let flag = match cmd {
        VIRTIO_NET_CTRL_RX_PROMISC => &port.promisc,
        VIRTIO_NET_CTRL_RX_ALLMULTI => &port.allmulti,
        _ => return ERR,
    };
    flag.store(*on != 0, std::sync::atomic::Ordering::Relaxed);
    OK
}

/// `VIRTIO_NET_CTRL_MAC_TABLE_SET`: a unicast and a multicast table, each
/// `le32 entries` and that many MACs, and nothing after.
fn mac_table_set(data: &[u8]) -> u8 {
    let mut rest = data;
    for _ in 0..2 {
        let Some((n, tail)) = rest.split_first_chunk::<4>() else {
            return ERR;
        };
        let bytes = usize::try_from(u32::from_le_bytes(*n))
            .ok()
            .and_then(|n| n.checked_mul(6));
        let Some(table) = bytes.and_then(|b| tail.get(b..)) else {
            return ERR;
        };
        rest = table;
    }
    if rest.is_empty() {
        OK
    } else {
        ERR
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::Mac;

    #[test]
    fn commands() {
        let p = NetPort::new(Mac([2, 0, 0, 0, 0, 1]), 1500);
        assert_eq!(execute(&p, &[0, 0, 1]), OK);
        assert_eq!(p.rx_mode(), (true, false));
        assert_eq!(execute(&p, &[0, 1, 1]), OK);
        assert_eq!(execute(&p, &[0, 0, 0]), OK);
        assert_eq!(p.rx_mode(), (false, true));
        assert_eq!(execute(&p, &[0, 2, 1]), ERR, "CTRL_RX_EXTRA not offered");
        assert_eq!(execute(&p, &[0, 0]), ERR, "no value");
        assert_eq!(execute(&p, &[0]), ERR);
        assert_eq!(execute(&p, &[]), ERR);
        let mut t = vec![1, 0];
        t.extend_from_slice(&1u32.to_le_bytes());
        t.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
        t.extend_from_slice(&2u32.to_le_bytes());
        t.extend_from_slice(&[0x33; 12]);
        assert_eq!(execute(&p, &t), OK);
        assert_eq!(execute(&p, &t[..t.len() - 1]), ERR, "short table");
        t.push(0);
        assert_eq!(execute(&p, &t), ERR, "bytes after");
        let mut huge = vec![1, 0];
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(execute(&p, &huge), ERR);
        assert_eq!(execute(&p, &[1, 1, 2, 0, 0, 0, 0, 1]), ERR, "ADDR_SET");
        assert_eq!(execute(&p, &[4, 0]), ERR, "MQ not offered");
    }
}
