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

# rdma_cm's part (address and route resolution, its MADs on the kernel's
# GSI QP) is the same in both data paths: with queues in guest memory
# (which alone have SRQs) perftest runs without -R only, to save the CI's
# time; rping below still connects through rdma_cm there.
cm_modes=('' -R)
max_srq=$(ibv_devinfo -v -d $dev | awk '$1 == "max_srq:" { print $2 }')
[ "${max_srq:-0}" = 0 ] || cm_modes=('')
for rdma_cm in "${cm_modes[@]}"; do
	# -x: the GID index; with -R rdma_cm resolves the address itself.
	opts="-d $dev -x $gid -F $rdma_cm"
	for t in ib_send_bw ib_write_bw ib_read_bw ib_atomic_bw ib_send_lat ib_write_lat; do
		# Over rdma_cm one tool: the CM's part is the same for all.
		[ -z "$rdma_cm" ] || [ $t = ib_send_bw ] || continue
		pair "$t $rdma_cm" $t $opts -n 200 -p $port -- $t $opts -n 200 -p $port $addr
	done
done

pair "rping" rping -s -a $addr -p $port -C 100 -- rping -c -a $addr -p $port -C 100 -V -v
grep -q "ping data: rdma-ping-99" /tmp/client.log || fail "rping: the client did not verify 100 pings"

step "nothing of the clients is left"
res=$(user_qps "$dev")
[ -z "$res" ] || fail "QPs of user processes remain: $res"
echo "PASS"
