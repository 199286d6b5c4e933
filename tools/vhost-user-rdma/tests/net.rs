// SPDX-License-Identifier: GPL-2.0
//! The net personality (`--net`) over real vhost-user sockets: several
//! devices of one process switched to each other (unicast, broadcast, what
//! is dropped and counted), the net control queue, the config space and
//! features a stock virtio_net reads, and the RoCE part behind them.

mod support;

use std::sync::{RwLock, RwLockReadGuard};
use std::thread;
use std::time::{Duration, Instant};

use support::rings::ring;
use support::*;
use vhost::vhost_user::message::VhostUserConfigFlags;
use vhost::vhost_user::VhostUserFrontend;
use vhost::VhostBackend;
use vhost_user_rdma::abi::*;
use vhost_user_rdma::ib::*;
use vhost_user_rdma::limits::{Limits, IB_MTU_1024, IB_MTU_4096};
use vhost_user_rdma::net::flood;
use vhost_user_rdma::stats::Counter;
use zerocopy::little_endian::U32;
use zerocopy::{FromBytes, FromZeros, IntoBytes};

const BROADCAST: [u8; 6] = [0xff; 6];
/// A receive buffer as Linux posts it without offloads (12 + 1518).
const RX_BUF: usize = NET_HDR + 1518;
/// The header a receiver gets: all zero but num_buffers (le16 1).
const RX_HDR: [u8; NET_HDR] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0];

/// Lets a frame that should not arrive have its chance to.
fn settle() {
    thread::sleep(Duration::from_millis(50));
}

/// Asserts that nothing was delivered into `d`'s receive queue.
fn nothing_received(d: &mut Dev) {
    assert_eq!(d.take_used(NET_RXQ), vec![], "nothing delivered");
    assert_eq!(d.dev.ctrl().stats().get(Counter::NetRxFrames), 0);
}

/// The tests of this file share one switch: a broadcast reaches every
/// device of the process. The test that broadcasts runs alone (write); the
/// others, which never broadcast, together (read).
static SWITCH: RwLock<()> = RwLock::new(());

fn shared() -> RwLockReadGuard<'static, ()> {
    SWITCH.read().unwrap_or_else(|e| e.into_inner())
}

fn count(d: &Dev, c: Counter) -> u64 {
    d.dev.ctrl().stats().get(c)
}

#[test]
fn unicast_reaches_the_device_with_that_mac_only() {
    let _switch = shared();
    let (mut a, mut b, mut c) = (Dev::start_net(0), Dev::start_net(0), Dev::start_net(0));
    let head = b.net_rx_buf(RX_BUF);
    c.net_rx_buf(RX_BUF);
    b.interrupts(NET_RXQ);
    let frame = eth_frame(b.mac(), a.mac(), 100);
    let tx = a.net_send(&frame);
    let used = b.wait_used(NET_RXQ);
    assert_eq!(used, vec![(u32::from(head), (NET_HDR + 100) as u32)]);
    let got = b.net_rx_bytes(used[0].0, used[0].1);
    assert_eq!(got[..NET_HDR], RX_HDR, "virtio_net_hdr_v1, num_buffers 1");
    assert_eq!(got[NET_HDR..], frame[..], "the frame, byte for byte");
    b.wait_interrupt(NET_RXQ);
    assert_eq!(
        a.wait_used(NET_TXQ),
        vec![(u32::from(tx), 0)],
        "tx returned"
    );
    a.wait_count(Counter::NetTxFrames, 1);
    assert_eq!(count(&a, Counter::NetTxBytes), 100);
    assert_eq!(count(&b, Counter::NetRxFrames), 1);
    assert_eq!(count(&b, Counter::NetRxBytes), 100);
    settle();
    nothing_received(&mut c);
    nothing_received(&mut a);
    for d in [a, b, c] {
        d.finish();
    }
}

#[test]
fn broadcast_and_multicast_reach_every_other_device() {
    let _alone = SWITCH.write().unwrap_or_else(|e| e.into_inner());
    let (mut a, mut b, mut c) = (Dev::start_net(0), Dev::start_net(0), Dev::start_net(0));
    for d in [&mut a, &mut b, &mut c] {
        d.net_rx_buf(RX_BUF);
        d.net_rx_buf(RX_BUF);
    }
    let bcast = eth_frame(BROADCAST, a.mac(), 60);
    let mcast = eth_frame([0x01, 0x00, 0x5e, 0, 0, 1], a.mac(), 90);
    a.net_send(&bcast);
    a.net_send(&mcast);
    a.wait_count(Counter::NetTxFrames, 2);
    for d in [&mut b, &mut c] {
        d.wait_count(Counter::NetRxFrames, 2);
        let used = d.take_used(NET_RXQ);
        assert_eq!(used.len(), 2, "{used:?}");
        let got: Vec<Vec<u8>> = used
            .iter()
            .map(|&(id, len)| d.net_rx_bytes(id, len))
            .collect();
        assert_eq!(got[0][NET_HDR..], bcast[..]);
        assert_eq!(got[1][NET_HDR..], mcast[..]);
    }
    settle();
    nothing_received(&mut a);
    for d in [a, b, c] {
        d.finish();
    }
}

#[test]
fn a_broadcast_storm_is_cut_to_the_ports_rate() {
    let _alone = SWITCH.write().unwrap_or_else(|e| e.into_inner());
    let (mut a, b) = (Dev::start_net(0), Dev::start_net(0));
    let bcast = eth_frame(BROADCAST, a.mac(), 60);
    // Three bursts' worth, as fast as the transmit queue takes them (four
    // chains at a time: each batch is used before the next is written).
    let total = u64::from(3 * flood::BURST);
    let start = Instant::now();
    let mut sent = 0;
    while sent < total {
        let batch = (total - sent).min(u64::from(QSIZE / NET_CHAIN));
        for _ in 0..batch {
            a.net_send(&bcast);
        }
        let mut used = 0;
        while used < batch {
            used += a.wait_used(NET_TXQ).len() as u64;
        }
        sent += batch;
    }
    let elapsed = start.elapsed();
    let (went, limited) = (
        count(&a, Counter::NetTxFrames),
        count(&a, Counter::NetFloodLimited),
    );
    assert_eq!(went + limited, total, "each frame went or was limited");
    assert_eq!(count(&a, Counter::NetTxDropped), limited);
    // The burst, then RATE a second of the time it took (and one for a
    // fraction), whatever that time was.
    let most = u64::from(flood::BURST)
        + (elapsed.as_micros() * u128::from(flood::RATE) / 1_000_000) as u64
        + 1;
    assert!(
        went >= u64::from(flood::BURST) && went <= most,
        "{went} of {total} went in {elapsed:?}"
    );
    // Each one that went reached the other port (which had no buffer).
    b.wait_count(Counter::NetRxDropped, went);
    settle();
    assert_eq!(count(&b, Counter::NetRxDropped), went);
    // Unicast is not limited: it goes with the bucket empty.
    a.net_send(&eth_frame(b.mac(), a.mac(), 70));
    a.wait_count(Counter::NetTxFrames, went + 1);
    b.wait_count(Counter::NetRxDropped, went + 1);
    a.finish();
    b.finish();
}

#[test]
fn a_spoofed_source_is_dropped_and_counted() {
    let _switch = shared();
    let (mut a, mut b) = (Dev::start_net(0), Dev::start_net(0));
    b.net_rx_buf(RX_BUF);
    // B's own MAC as the source: A would pass for B.
    let tx = a.net_send(&eth_frame(b.mac(), b.mac(), 64));
    assert_eq!(a.wait_used(NET_TXQ), vec![(u32::from(tx), 0)]);
    a.wait_count(Counter::NetSpoofed, 1);
    assert_eq!(count(&a, Counter::NetTxDropped), 1);
    // A broadcast from a made-up source neither.
    a.net_send(&eth_frame(BROADCAST, [2, 0, 0, 0, 0, 0x77], 64));
    a.wait_count(Counter::NetSpoofed, 2);
    assert_eq!(count(&a, Counter::NetTxFrames), 0);
    settle();
    nothing_received(&mut b);
    a.finish();
    b.finish();
}

#[test]
fn unknown_and_own_unicast_are_dropped_not_flooded() {
    let _switch = shared();
    let (mut a, mut b) = (Dev::start_net(0), Dev::start_net(0));
    a.net_rx_buf(RX_BUF);
    b.net_rx_buf(RX_BUF);
    a.net_send(&eth_frame([2, 0x99, 0x99, 0x99, 0x99, 0x99], a.mac(), 64));
    a.wait_count(Counter::NetTxDropped, 1);
    let own = a.mac();
    a.net_send(&eth_frame(own, own, 64));
    a.wait_count(Counter::NetTxDropped, 2);
    assert_eq!(count(&a, Counter::NetTxFrames), 0);
    assert_eq!(count(&a, Counter::NetSpoofed), 0);
    settle();
    nothing_received(&mut a);
    nothing_received(&mut b);
    a.finish();
    b.finish();
}

#[test]
fn no_receive_buffer_drops_the_frame_not_the_sender() {
    let _switch = shared();
    let (mut a, mut b) = (Dev::start_net(0), Dev::start_net(0));
    let tx = a.net_send(&eth_frame(b.mac(), a.mac(), 80));
    assert_eq!(a.wait_used(NET_TXQ), vec![(u32::from(tx), 0)]);
    b.wait_count(Counter::NetRxDropped, 1);
    // The next frame takes the next buffer; the dropped one is gone.
    b.net_rx_buf(RX_BUF);
    let second = eth_frame(b.mac(), a.mac(), 81);
    a.net_send(&second);
    let used = b.wait_used(NET_RXQ);
    assert_eq!(used.len(), 1);
    assert_eq!(b.net_rx_bytes(used[0].0, used[0].1)[NET_HDR..], second[..]);
    assert_eq!(count(&b, Counter::NetRxDropped), 1);
    a.finish();
    b.finish();
}

#[test]
fn bad_transmit_chains_are_returned_empty_and_counted() {
    let _switch = shared();
    let (mut a, mut b) = (Dev::start_net(0), Dev::start_net(0));
    b.net_rx_buf(RX_BUF);
    let ok = eth_frame(b.mac(), a.mac(), 1518);
    let with_hdr = |f: &[u8]| [&[0u8; NET_HDR][..], f].concat();
    let too_long = with_hdr(&eth_frame(b.mac(), a.mac(), 1519));
    let too_short = with_hdr(&eth_frame(b.mac(), a.mac(), 13));
    let mut gso = with_hdr(&ok);
    gso[1] = 1;
    let long = with_hdr(&ok);
    let small = with_hdr(&eth_frame(b.mac(), a.mac(), 64));
    let cases: [&[(&[u8], bool)]; 5] = [
        &[(&too_long, false)],
        // The longest frame and one byte more, in two descriptors.
        &[(&long, false), (&[0], false)],
        &[(&too_short, false)],
        &[(&gso, false)],
        // A device-writable part after a good frame.
        &[(&small, false), (&[0; 8], true)],
    ];
    for (i, parts) in cases.iter().enumerate() {
        let head = a.net_post(NET_TXQ, parts);
        assert_eq!(a.wait_used(NET_TXQ), vec![(u32::from(head), 0)], "case {i}");
        a.wait_count(Counter::NetTxDropped, i as u64 + 1);
    }
    settle();
    nothing_received(&mut b);
    // The longest frame itself passes, across two descriptors.
    let (h, f) = long.split_at(NET_HDR + 700);
    a.net_post(NET_TXQ, &[(h, false), (f, false)]);
    let used = b.wait_used(NET_RXQ);
    assert_eq!(used[0].1 as usize, NET_HDR + 1518);
    assert_eq!(b.net_rx_bytes(used[0].0, used[0].1)[NET_HDR..], ok[..]);
    assert_eq!(count(&a, Counter::NetTxDropped), cases.len() as u64);
    a.finish();
    b.finish();
}

#[test]
fn a_too_small_receive_buffer_is_returned_empty() {
    let _switch = shared();
    let (mut a, mut b) = (Dev::start_net(0), Dev::start_net(0));
    let head = b.net_rx_buf(NET_HDR + 50);
    a.net_send(&eth_frame(b.mac(), a.mac(), 100));
    assert_eq!(b.wait_used(NET_RXQ), vec![(u32::from(head), 0)]);
    b.wait_count(Counter::NetRxDropped, 1);
    // A buffer the driver cannot write to neither.
    let head = b.net_post(NET_RXQ, &[(&[0; RX_BUF], false)]);
    a.net_send(&eth_frame(b.mac(), a.mac(), 100));
    assert_eq!(b.wait_used(NET_RXQ), vec![(u32::from(head), 0)]);
    b.wait_count(Counter::NetRxDropped, 2);
    assert_eq!(count(&b, Counter::NetRxFrames), 0);
    a.finish();
    b.finish();
}

/// `{le32 entries; entries * 6 bytes}`.
fn mac_table(macs: &[[u8; 6]]) -> Vec<u8> {
    let mut t = (macs.len() as u32).to_le_bytes().to_vec();
    for m in macs {
        t.extend_from_slice(m);
    }
    t
}

#[test]
fn the_net_control_queue_answers_what_virtio_net_sends() {
    let _switch = shared();
    const OK: u8 = 0;
    const ERR: u8 = 1;
    let mut d = Dev::start_net(0);
    let port = d.dev.clone();
    let mode = || port.net().expect("net device").rx_mode();
    // VIRTIO_NET_CTRL_RX: PROMISC, ALLMULTI.
    assert_eq!(d.net_ctrl(0, 0, &[1]), OK);
    assert_eq!(mode(), (true, false));
    assert_eq!(d.net_ctrl(0, 1, &[1]), OK);
    assert_eq!(d.net_ctrl(0, 0, &[0]), OK);
    assert_eq!(mode(), (false, true));
    assert_eq!(
        d.net_ctrl(0, 2, &[1]),
        ERR,
        "ALLUNI: CTRL_RX_EXTRA not offered"
    );
    assert_eq!(d.net_ctrl(0, 0, &[]), ERR, "no on/off byte");
    // VIRTIO_NET_CTRL_MAC: MAC_TABLE_SET with exact lengths.
    let uc = mac_table(&[d.mac()]);
    let mc = mac_table(&[[1, 0, 0x5e, 0, 0, 1], [0x33, 0x33, 0, 0, 0, 1]]);
    assert_eq!(d.net_ctrl(1, 0, &[uc.clone(), mc.clone()].concat()), OK);
    assert_eq!(
        d.net_ctrl(1, 0, &[mac_table(&[]), mac_table(&[])].concat()),
        OK
    );
    let short = [uc.clone(), mc[..mc.len() - 1].to_vec()].concat();
    assert_eq!(
        d.net_ctrl(1, 0, &short),
        ERR,
        "a table shorter than its count"
    );
    let extra = [uc.clone(), mc.clone(), vec![0]].concat();
    assert_eq!(d.net_ctrl(1, 0, &extra), ERR, "bytes after the tables");
    assert_eq!(d.net_ctrl(1, 0, &uc), ERR, "one table");
    assert_eq!(d.net_ctrl(1, 1, &d.mac()), ERR, "ADDR_SET: not offered");
    // Other classes: VLAN, ANNOUNCE, MQ, GUEST_OFFLOADS, the seed's 6.
    for class in [2, 3, 4, 5, 6, 10, 255] {
        assert_eq!(d.net_ctrl(class, 0, &[0; 8]), ERR, "class {class}");
    }
    // Malformed chains: a header cut short, no readable part at all, no
    // room for the ack (answered with used length 0).
    assert_eq!(
        d.net_ctrl_chain(&[(&[0], false), (&[0xee], true)]),
        (1, ERR)
    );
    assert_eq!(d.net_ctrl_chain(&[(&[0xee], true)]), (1, ERR));
    assert_eq!(d.net_ctrl_chain(&[(&[0, 0, 1], false)]).0, 0);
    // Still answering.
    assert_eq!(d.net_ctrl(0, 1, &[0]), OK);
    assert_eq!(mode(), (false, false));
    d.finish();
}

#[test]
fn reset_forgets_the_rx_mode_and_keeps_the_counters() {
    let _switch = shared();
    let (mut a, b) = (Dev::start_net(0), Dev::start_net(0));
    assert_eq!(a.net_ctrl(0, 0, &[1]), 0);
    a.net_send(&eth_frame(b.mac(), a.mac(), 64));
    b.wait_count(Counter::NetRxDropped, 1);
    a.reset();
    assert_eq!(a.dev.net().expect("net").rx_mode(), (false, false));
    assert_eq!(count(&a, Counter::NetTxFrames), 1);
    a.finish();
    b.finish();
}

#[test]
fn config_features_and_queue_count_are_virtio_nets() {
    let _switch = shared();
    let mut d = Dev::start_net(0);
    let roce = d.dev.ctrl().limits().roce_queues();
    let fe = d.fe.as_mut().expect("connected");
    let queues = fe.get_queue_num().expect("queue num") as usize;
    assert_eq!(queues, 3 + roce);
    assert_eq!(queues, d.vqs.len());
    let (_, cfg) = fe
        .get_config(0, 256, VhostUserConfigFlags::empty(), &[0u8; 256])
        .expect("get_config");
    assert_eq!(cfg.len(), 256);
    let features = fe.get_features().expect("features");
    let mac = d.mac();
    assert_eq!(cfg[0..6], mac, "mac");
    assert_eq!(cfg[6..8], [1, 0], "status: VIRTIO_NET_S_LINK_UP");
    assert_eq!(cfg[8..10], [1, 0], "max_virtqueue_pairs");
    assert_eq!(cfg[10..12], 1500u16.to_le_bytes(), "mtu");
    assert_eq!(cfg[12..28], [0; 16]);
    assert_eq!(
        usize::from(u16::from_le_bytes([cfg[28], cfg[29]])),
        queues - 3,
        "roce_num_vqs"
    );
    assert_eq!(cfg[30..], [0; 226], "reserved, then zeroes");
    // VERSION_1, EVENT_IDX, INDIRECT_DESC, PROTOCOL_FEATURES, MAC, MTU,
    // STATUS, CTRL_VQ, CTRL_RX, ROCE; nothing else (bit 0 would be CSUM).
    let want = (1 << 32)
        | (1 << 29)
        | (1 << 28)
        | (1 << 30)
        | (1 << 5)
        | (1 << 3)
        | (1 << 16)
        | (1 << 17)
        | (1 << 18)
        | (1 << VIRTIO_NET_F_ROCE);
    assert_eq!(features, want, "{features:#x}");
    assert_eq!(features & (1 << VIRTIO_RDMA_F_RINGS), 0);
    d.finish();
}

/// CREATE_CQ_RING on the RoCE control queue (vring 3): its status.
fn create_cq_ring(d: &mut Dev) -> u8 {
    let (_, desc) = ring(d, 0, 16, support::rings::CQE);
    let req = VirtioRdmaCmdCreateCqRing {
        ring: desc,
        comp_vq: 0.into(),
        reserved: 0.into(),
    };
    d.cmd_on(NET_ROCE, VIRTIO_RDMA_CMD_CREATE_CQ_RING, req.as_bytes(), 8)
        .0
}

#[test]
fn acking_roce_starts_the_roce_part_in_the_rings_mode() {
    let _switch = shared();
    let mut d = Dev::start_net(0);
    assert!(d.dev.ctrl().rings_acked(), "ROCE implies the rings mode");
    let (st, _) = d.cmd_on(NET_ROCE, VIRTIO_RDMA_CMD_CREATE_PD, &[], 8);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    assert_eq!(d.dev.ctrl().pd_count(), 1);
    let rsp = std::mem::size_of::<VirtioRdmaRspQueryPort>();
    let (st, port) = d.cmd_on(NET_ROCE, VIRTIO_RDMA_CMD_QUERY_PORT, &pair(1, 0), rsp);
    assert_eq!(st, VIRTIO_RDMA_S_OK);
    assert_eq!(port.len(), rsp);
    assert_eq!(create_cq_ring(&mut d), VIRTIO_RDMA_S_OK);
    d.finish();
}

#[test]
fn without_roce_the_roce_part_has_no_rings() {
    let _switch = shared();
    let mut d = Dev::start_net(1 << VIRTIO_NET_F_ROCE);
    assert!(!d.dev.ctrl().rings_acked());
    let (st, _) = d.cmd_on(NET_ROCE, VIRTIO_RDMA_CMD_CREATE_PD, &[], 8);
    assert_eq!(st, VIRTIO_RDMA_S_OK, "the control queue still answers");
    assert_eq!(create_cq_ring(&mut d), VIRTIO_RDMA_S_UNSUPPORTED);
    d.finish();
}

/// A net device of Ethernet MTU `mtu`.
fn start_net_mtu(mtu: u16) -> Dev {
    Dev::start_without(MEM_SIZE, |l| net(l).with_mtu(mtu).expect("mtu"), 0)
}

/// `frame` behind a virtio-net header (callers cut it into descriptors
/// of a slot each).
fn tx_parts(frame: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; NET_HDR];
    b.extend_from_slice(frame);
    b
}

/// Jumbo frames: a port of MTU 7000 offers it in its config, sends and
/// takes frames of 7000 bytes and a header (receive buffers chained, as
/// Linux's big packets), a port of 1500 refuses to send more than 1518
/// bytes and never receives a frame beyond its MTU (dropped and counted,
/// its buffer left alone).
#[test]
fn a_port_sends_and_takes_frames_up_to_its_mtu() {
    let _switch = shared();
    let (mut a, mut b, mut c) = (start_net_mtu(7000), start_net_mtu(7000), Dev::start_net(0));
    let fe = b.fe.as_mut().expect("connected");
    let (_, cfg) = fe
        .get_config(0, 256, VhostUserConfigFlags::empty(), &[0u8; 256])
        .expect("get_config");
    assert_eq!(cfg[10..12], 7000u16.to_le_bytes(), "mtu");

    // 7014 bytes from A to B: four chained receive buffers of a slot each.
    let slot = NET_SLOT as usize;
    let rx = vec![0xee; slot];
    let head = b.net_post(
        NET_RXQ,
        &[(&rx, true), (&rx, true), (&rx, true), (&rx, true)],
    );
    let big = eth_frame(b.mac(), a.mac(), 7014);
    let t = tx_parts(&big);
    let parts: Vec<(&[u8], bool)> = t.chunks(slot).map(|p| (p, false)).collect();
    a.net_post(NET_TXQ, &parts);
    let used = b.wait_used(NET_RXQ);
    assert_eq!(used, vec![(u32::from(head), (NET_HDR + 7014) as u32)]);
    let got: Vec<u8> = (0..4)
        .flat_map(|i| b.read(Dev::net_buf(NET_RXQ, head + i), slot))
        .take(NET_HDR + 7014)
        .collect();
    assert_eq!(got[..NET_HDR], RX_HDR);
    assert_eq!(got[NET_HDR..], big[..], "the jumbo frame, byte for byte");

    // One byte more than A's MTU allows is not sent.
    let t = tx_parts(&eth_frame(b.mac(), a.mac(), 7019));
    let parts: Vec<(&[u8], bool)> = t.chunks(slot).map(|p| (p, false)).collect();
    a.net_post(NET_TXQ, &parts);
    a.wait_count(Counter::NetTxDropped, 1);

    // C (1500) takes 1518 bytes, but not A's 1519: a switch drops it.
    let head = c.net_post(NET_RXQ, &[(&rx, true)]);
    let t = tx_parts(&eth_frame(c.mac(), a.mac(), 1519));
    let parts: Vec<(&[u8], bool)> = t.chunks(slot).map(|p| (p, false)).collect();
    a.net_post(NET_TXQ, &parts);
    c.wait_count(Counter::NetRxDropped, 1);
    assert_eq!(
        c.take_used(NET_RXQ),
        vec![],
        "the buffer stays the driver's"
    );
    a.net_send(&eth_frame(c.mac(), a.mac(), 1518));
    assert_eq!(
        c.wait_used(NET_RXQ),
        vec![(u32::from(head), (NET_HDR + 1518) as u32)]
    );
    // And C sends no more than 1518 either.
    let t = tx_parts(&eth_frame(a.mac(), c.mac(), 1519));
    let parts: Vec<(&[u8], bool)> = t.chunks(slot).map(|p| (p, false)).collect();
    c.net_post(NET_TXQ, &parts);
    c.wait_count(Counter::NetTxDropped, 1);
    assert_eq!(count(&c, Counter::NetTxFrames), 0);
    for d in [a, b, c] {
        d.finish();
    }
}

/// The RDMA port's IB MTU follows the Ethernet MTU (`--mtu`): QUERY_PORT
/// says it, and no QP may have a larger path MTU (its frames would not
/// fit the link).
#[test]
fn the_ib_mtu_is_the_largest_the_ethernet_mtu_carries() {
    let _switch = shared();
    for (mtu, ib) in [
        (1500, IB_MTU_1024),
        (4200, IB_MTU_4096),
        (9000, IB_MTU_4096),
        (3000, 4),
    ] {
        let mut d = Dev::start_with(MEM_SIZE, |l| l.with_mtu(mtu).expect("mtu"));
        let port = d.ok(VIRTIO_RDMA_CMD_QUERY_PORT, &pair(1, 0), 48);
        let port = VirtioRdmaRspQueryPort::read_from_bytes(&port[..40]).expect("port");
        assert_eq!((port.max_mtu, port.active_mtu), (ib, ib), "--mtu {mtu}");
        assert_eq!(port.phys_mtu.get(), 256 << (ib - 1));
        let pd = d.create_pd();
        let cq = d.create_cq(4);
        let qp = d.create_qp(pd, IB_QPT_RC, cq, false);
        let mut a = VirtioRdmaQpAttr::new_zeroed();
        a.qp_state = IB_QPS_INIT;
        a.port_num = 1;
        let init = IB_QP_STATE | IB_QP_PORT | IB_QP_PKEY_INDEX | IB_QP_ACCESS_FLAGS;
        assert_eq!(d.modify(qp, init, a), VIRTIO_RDMA_S_OK);
        a.qp_state = IB_QPS_RTR;
        a.dest_qp_num = U32::new(qp);
        a.ah_attr.port_num = 1;
        let rtr = RC_RTR;
        if ib < IB_MTU_4096 {
            a.path_mtu = ib + 1;
            assert_eq!(d.modify(qp, rtr, a), VIRTIO_RDMA_S_INVALID, "--mtu {mtu}");
        }
        a.path_mtu = ib;
        assert_eq!(d.modify(qp, rtr, a), VIRTIO_RDMA_S_OK, "--mtu {mtu}");
        d.finish();
    }
    assert!(Limits::new(1, 1, 2, vhost_user_rdma::cli::DEFAULT_MAC)
        .and_then(|l| l.with_mtu(1279))
        .is_err());
}

/// An ID-42 device whose guest's NIC the backend serves (`--nic-socket`):
/// the NIC is the device's port, on the switch like a net device's, but
/// its queues are another frontend's, in that frontend's own guest
/// memory. Frames go both ways byte for byte (read from and written to
/// the NIC's memory, not the RDMA device's), and the RDMA device's own
/// queues answer as before.
#[test]
fn an_id42_devices_nic_is_its_port_in_its_own_memory() {
    let _switch = shared();
    let nic_limits = |l: Limits| {
        l.with_rings(Some(
            vhost_user_rdma::limits::Rings::new(2, 2, 1, 0).expect("rings"),
        ))
        .and_then(|l| l.with_nic(true))
        .expect("nic limits")
    };
    let (mut d, nic) = Dev::start_on(MEM_SIZE, nic_limits, 0, true);
    let mut nic = nic.expect("the NIC's frontend");
    let mut b = Dev::start_net(0);
    b.net_rx_buf(RX_BUF);
    let head = nic.net_rx_buf(RX_BUF);
    // The NIC sends from its own memory (the device's, at the same
    // addresses, holds zeroes: read there, the frame would be refused as
    // spoofed).
    let out = eth_frame(b.mac(), nic.mac(), 300);
    let tx = nic.net_send(&out);
    assert_eq!(nic.wait_used(NET_TXQ), vec![(u32::from(tx), 0)]);
    let used = b.wait_used(NET_RXQ);
    assert_eq!(b.net_rx_bytes(used[0].0, used[0].1)[NET_HDR..], out[..]);
    assert_eq!(
        count(&d, Counter::NetTxFrames),
        1,
        "the device's port counts"
    );
    assert_eq!(count(&d, Counter::NetSpoofed), 0);
    // And receives into its own memory.
    let back = eth_frame(nic.mac(), b.mac(), 200);
    b.net_send(&back);
    let used = nic.wait_used(NET_RXQ);
    assert_eq!(used, vec![(u32::from(head), (NET_HDR + 200) as u32)]);
    let got = nic.net_rx_bytes(used[0].0, used[0].1);
    assert_eq!(got[..NET_HDR], RX_HDR);
    assert_eq!(got[NET_HDR..], back[..], "the frame, in the NIC's memory");
    assert_eq!(
        d.read(Dev::net_buf(NET_RXQ, head), NET_HDR + 200),
        vec![0; NET_HDR + 200],
        "nothing in the RDMA device's memory"
    );
    nic.wait_interrupt(NET_RXQ);
    // The RDMA device is the ID-42 one, its control queue vring 0.
    let pd = d.create_pd();
    assert_ne!(pd, 0);
    nic.finish();
    d.finish();
    b.finish();
}
