#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rdma-core's own clients run over virtio_rdma0 through the project's
# provider, server and client in one guest on the same device, addressed by
# its RoCEv2 GID (index 1, the GID of 10.0.2.15): ibv_rc_pingpong and
# ibv_ud_pingpong, perftest's send/write/read/atomic bandwidth and send/write
# latency tests with the out-of-band TCP exchange (and ib_send_bw with
# rdma_cm, -R), and
# rping. Each pair must exit 0 with its data checked by the client where the
# tool can (ibv_*_pingpong -c, rping -V compares every ping it reads back). The runner
# fails the test on any kernel report or leak once the processes are gone.
# Not a test of its own: lossy-link.sh runs it over a link that loses,
# duplicates and reorders packets, which a perfect link would only repeat
# (with queues in guest memory rdma-core's clients are rings.sh's, and
# perftest, rping and the pingpongs between two guests two-guests@net's).
set -euo pipefail

source "$(dirname "$0")/common.sh"

driver_up
dev=virtio_rdma0 gid=1 addr=10.0.2.15

pair "ibv_rc_pingpong" ibv_rc_pingpong -d $dev -g $gid -n 100 -c -p $port -- \
	ibv_rc_pingpong -d $dev -g $gid -n 100 -c -p $port localhost
pair "ibv_ud_pingpong" ibv_ud_pingpong -d $dev -g $gid -n 100 -c -s 1024 -p $port -- \
	ibv_ud_pingpong -d $dev -g $gid -n 100 -c -s 1024 -p $port localhost

opts="-d $dev -x $gid -F"
for t in ib_send_bw ib_write_bw ib_read_bw ib_atomic_bw ib_send_lat ib_write_lat; do
	pair "$t" $t $opts -n 200 -p $port -- $t $opts -n 200 -p $port $addr
done
# Over rdma_cm (-R) one tool: the CM's part (address and route resolution,
# its MADs on the kernel's GSI QP) is the same for all.
pair "ib_send_bw -R" ib_send_bw $opts -R -n 200 -p $port -- ib_send_bw $opts -R -n 200 -p $port $addr

pair "rping" rping -s -a $addr -p $port -C 100 -- rping -c -a $addr -p $port -C 100 -V -v
grep -q "ping data: rdma-ping-99" /tmp/client.log || fail "rping: the client did not verify 100 pings"

step "nothing of the clients is left"
res=$(user_qps "$dev")
[ -z "$res" ] || fail "QPs of user processes remain: $res"
echo "PASS"
