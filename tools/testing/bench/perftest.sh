#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Verbs from userspace, virtio_rdma0 beside rxe (soft RoCE, the peer: the
# kernel's RDMA over the guest's virtio-net eth0), in one guest and one run:
# perftest's WRITE/SEND/READ bandwidth and SEND/WRITE latency over a range
# of message sizes, server and client on the same device addressed by the
# RoCEv2 GID of 10.0.2.15, then a table of both with their ratio. Numbers
# vary with the host; only the ratios mean something. The guest runs the
# debug kernel (KASAN, lockdep) under TCG, which slows both; rxe's traffic
# to its own address goes over the loopback interface. It never fails on a
# number.
set -euo pipefail
source "$(dirname "$0")/../e2e/lib/common.sh"

ITERS=500
ADDR=10.0.2.15

driver_up
modprobe rdma_rxe
rdma link add rxe0 type rxe netdev eth0
# gid_index DEV: the index of DEV's RoCEv2 GID of $ADDR.
gid_index() {
	local g
	for g in /sys/class/infiniband/$1/ports/1/gids/*; do
		if [ "$(cat "$g")" = 0000:0000:0000:0000:0000:ffff:0a00:020f ] &&
			[ "$(cat "${g/gids/gid_attrs/types}" 2>/dev/null)" = "RoCE v2" ]; then
			basename "$g"
			return 0
		fi
	done
	return 1
}
wait_for "rxe0's RoCEv2 GID of $ADDR" gid_index rxe0 >/dev/null

# TEST SIZES FIELD: perftest's average (bandwidth in MiB/s, or latency in
# usec) is column FIELD of the line that starts with the message size.
CASES="ib_write_bw 64,4096,65536 4
ib_send_bw 64,4096,65536 4
ib_read_bw 64,4096,65536 4
ib_send_lat 2,4096 6
ib_write_lat 2,4096 6"

# run DEV TEST SIZE FIELD: prints the result.
run() {
	local opts="-d $1 -x $(gid_index "$1") -F -n $ITERS -s $3"
	PAIR_QUIET=1 pair "$2 on $1" "$2" $opts -p "$port" -- "$2" $opts -p "$port" "$ADDR"
	awk -v s="$3" -v f="$4" '$1 == s { print $f; exit }' /tmp/client.log
}

echo "perftest, $ITERS iterations, same guest (debug kernel, TCG); bandwidth MiB/s, latency usec"
printf '%-13s %7s %14s %10s %12s\n' test bytes virtio_rdma0 rxe0 "virtio/rxe"
while read -r t sizes field; do
	for s in ${sizes//,/ }; do
		v=$(run virtio_rdma0 "$t" "$s" "$field")
		r=$(run rxe0 "$t" "$s" "$field")
		# Bandwidth: higher is better; latency: the ratio is rxe's over ours,
		# so above 1 means virtio_rdma0 is faster either way.
		case $t in
		*_lat) ratio=$(awk -v a="$r" -v b="$v" 'BEGIN { printf "%.2f", a / b }') ;;
		*) ratio=$(awk -v a="$v" -v b="$r" 'BEGIN { printf "%.2f", a / b }') ;;
		esac
		printf '%-13s %7s %14s %10s %12s\n' "$t" "$s" "$v" "$r" "$ratio"
	done
done <<<"$CASES"
echo "(virtio/rxe: above 1 means virtio_rdma0 is faster; for latency it is rxe's time over ours)"
rdma link delete rxe0
