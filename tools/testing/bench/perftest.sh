#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Verbs from userspace, virtio_rdma0 beside rxe (soft RoCE, the peer: the
# kernel's RDMA over the guest's virtio-net eth0), in one run: perftest's
# WRITE/SEND/READ bandwidth and SEND/WRITE latency over a range of message
# sizes, then a table of both with their ratio.
#   perftest.sh           server and client in one guest on the same device,
#                         addressed by the RoCEv2 GID of 10.0.2.15; rxe's
#                         traffic to its own address goes over loopback;
#   perftest.sh main|peer two guests (run.sh --peer): servers in the peer,
#                         clients and the table here; virtio_rdma0 traffic
#                         crosses the backend from one guest's memory to the
#                         other's, rxe's crosses both virtio-nets and QEMU's
#                         datagram link between them.
# Numbers vary with the host; only the ratios mean something. The guests
# run the debug kernel (KASAN, lockdep) under TCG, which slows both. It never
# fails on a number.
set -euo pipefail
source "$(dirname "$0")/../e2e/lib/common.sh"

ROLE=${1:-same}
ITERS=500
server_addr=$MY_IP
[ "$ROLE" = same ] || server_addr=10.0.2.16

driver_up
modprobe rdma_rxe
rdma link add rxe0 type rxe netdev eth0
wait_for "rxe0's RoCEv2 GID of $MY_IP" v4_gid rxe0
[ "$ROLE" != main ] || wait_for "the peer answers on the link" ping -c 1 -W 1 "$server_addr"

# TEST SIZES FIELD: perftest's average (bandwidth in MiB/s, or latency in
# usec) is column FIELD of the line that starts with the message size.
CASES="ib_write_bw 64,4096,65536 4
ib_send_bw 64,4096,65536 4
ib_read_bw 64,4096,65536 4
ib_send_lat 2,4096 6
ib_write_lat 2,4096 6"

# run DEV TEST SIZE FIELD: prints the result (nothing in the peer).
run() {
	local opts="-d $1 -x $(v4_gid_index "$1") -F -n $ITERS -s $3"
	if [ "$ROLE" = same ]; then
		PAIR_QUIET=1 pair "$2 on $1" "$2" $opts -p "$port" -- "$2" $opts -p "$port" "$server_addr"
	else
		PAIR_QUIET=1 pair_step "$2 on $1" "$2" $opts -p "$port" -- "$2" $opts -p "$port" "$server_addr"
	fi
	[ "$ROLE" = peer ] || awk -v s="$3" -v f="$4" '$1 == s { print $f; exit }' /tmp/client.log
}

where="same guest"
[ "$ROLE" = same ] || where="two guests (server in the peer)"
[ "$ROLE" = peer ] || {
	echo "perftest, $ITERS iterations, $where (debug kernel, TCG); bandwidth MiB/s, latency usec"
	printf '%-13s %7s %14s %10s %12s\n' test bytes virtio_rdma0 rxe0 "virtio/rxe"
}
while read -r t sizes field; do
	for s in ${sizes//,/ }; do
		v=$(run virtio_rdma0 "$t" "$s" "$field")
		r=$(run rxe0 "$t" "$s" "$field")
		[ "$ROLE" != peer ] || continue
		# Bandwidth: higher is better; latency: the ratio is rxe's over ours,
		# so above 1 means virtio_rdma0 is faster either way.
		case $t in
		*_lat) ratio=$(awk -v a="$r" -v b="$v" 'BEGIN { printf "%.2f", a / b }') ;;
		*) ratio=$(awk -v a="$v" -v b="$r" 'BEGIN { printf "%.2f", a / b }') ;;
		esac
		printf '%-13s %7s %14s %10s %12s\n' "$t" "$s" "$v" "$r" "$ratio"
	done
done <<<"$CASES"
[ "$ROLE" = peer ] ||
	echo "(virtio/rxe: above 1 means virtio_rdma0 is faster; for latency it is rxe's time over ours)"
rdma link delete rxe0
