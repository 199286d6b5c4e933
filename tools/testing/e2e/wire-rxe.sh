#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# On the wire with Linux's rxe as the peer (issue 43): this guest's
# virtio_rdma0 is the net personality, whose port the backend puts on a
# host network (--uplink: a TAP on a bridge); the peer guest is another
# host on that bridge, with QEMU's own virtio-net and rxe0 on it (run.sh
# --peer-rdma rxe). Nothing of the peer is the backend's: what reaches it
# are RoCEv2 frames with this guest's MAC and IP, which rxe checks (ICRC,
# addresses, P_Key, Q_Key) before its QPs see them.
#   Ethernet through the uplink: ping both ways (the guest's ARP, answered
#   from the wire, is also what teaches the backend its neighbour's MAC);
#   ibv_ud_pingpong with data checked, rxe as server and virtio-rdma as
#   client, then the other way round; then, each way, RC: ibv_rc_pingpong
#   (4 KiB messages, data checked), rping with its data verified (rdma_cm:
#   the CM's MADs are datagrams on the wire; SEND, RDMA READ and WRITE),
#   ib_write_bw, ib_read_bw, ib_atomic_bw and ib_send_lat; each side's
#   counters show the packets went over the wire (rxe counts what it sent
#   and received).
# Not yet: perftest over rdma_cm (-R: its client crashes in librdmacm when
# a connect is rejected because the peer's server is not listening yet,
# and this script cannot see the peer's listener), NVMe over RDMA, UC,
# and a lossy link (netem in the rxe guest).
# peer: bash tools/testing/e2e/wire-rxe.sh peer
# peer-rdma: rxe
# backend-args: --net --rings
set -euo pipefail

source "$(dirname "$0")/lib/common.sh"

ROLE=${1:-main}
if [ "$ROLE" = main ]; then
	dev=virtio_rdma0 other=10.0.2.16
	driver_up
else
	dev=rxe0 other=10.0.2.15
	modprobe rdma_rxe
	rdma link add rxe0 type rxe netdev eth0
	wait_for "rxe0's RoCEv2 GID of $MY_IP" v4_gid rxe0
fi
gid=$(v4_gid_index $dev)
diagnose() {
	rdma res show qp link $dev/1 2>/dev/null | head -20
	ip neigh show dev eth0 || true
	rdma statistic show link $dev/1 2>/dev/null || true
}
echo "$ROLE: $MY_IP, $dev GID index $gid ($(cat /sys/class/infiniband/$dev/ports/1/gids/"$gid"))"

step "ping $other"
wait_for "$other answers on the link" ping -c 1 -W 1 "$other"
ping -c 3 -i 0.2 "$other" >/dev/null || fail "ping $other"

# other_role: the role whose half a reversed step runs here.
other_role() { if [ "$ROLE" = main ]; then echo peer; else echo main; fi; }

pair_step "ibv_ud_pingpong, rxe serves" ibv_ud_pingpong -d $dev -g "$gid" -n 200 -s 1024 -c -p $port -- \
	ibv_ud_pingpong -d $dev -g "$gid" -n 200 -s 1024 -c -p $port 10.0.2.16
# The other way round: the server here, the client on the peer.
ROLE=$(other_role) pair_step "ibv_ud_pingpong, virtio-rdma serves" \
	ibv_ud_pingpong -d $dev -g "$gid" -n 200 -s 1024 -c -p $port -- \
	ibv_ud_pingpong -d $dev -g "$gid" -n 200 -s 1024 -c -p $port 10.0.2.15

for dir in 0 1; do
	# rxe serves, then virtio-rdma does.
	if [ $dir = 0 ]; then r=$ROLE srv=10.0.2.16 who="rxe serves"; else r=$(other_role) srv=10.0.2.15 who="virtio-rdma serves"; fi
	ROLE=$r pair_step "ibv_rc_pingpong, $who" ibv_rc_pingpong -d $dev -g "$gid" -n 200 -s 4096 -c -p $port -- \
		ibv_rc_pingpong -d $dev -g "$gid" -n 200 -s 4096 -c -p $port $srv
	ROLE=$r pair_step "rping, $who" rping -s -a $srv -p $port -C 50 -- rping -c -a $srv -p $port -C 50 -V -v
	for t in ib_write_bw ib_read_bw ib_atomic_bw; do
		ROLE=$r pair_step "$t, $who" $t -d $dev -x "$gid" -F -n 200 -p $port -- \
			$t -d $dev -x "$gid" -F -n 200 -p $port $srv
	done
	ROLE=$r pair_step "ib_send_lat, $who" ib_send_lat -d $dev -x "$gid" -F -n 200 -p $port -- \
		ib_send_lat -d $dev -x "$gid" -F -n 200 -p $port $srv
done

step "counters"
rdma statistic show link $dev/1 |
	awk '{ for (i = 1; i < NF; i++) if ($i ~ /^(sent|rcvd)_pkts$/) print "  " $i, $(i + 1) }'
if [ "$ROLE" = peer ]; then
	# rxe counts only what went over its netdev: at least 2 × 200 round
	# trips of a datagram each way, whatever else (RC, MADs) on top.
	sent=$(cat /sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts)
	rcvd=$(cat /sys/class/infiniband/rxe0/ports/1/hw_counters/rcvd_pkts)
	[ "$sent" -ge 400 ] && [ "$rcvd" -ge 400 ] || fail "rxe0 sent $sent and received $rcvd packets, not 400 each"
fi
echo "wire-rxe: ok"
