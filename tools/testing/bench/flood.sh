#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Fairness between two guests on one backend (run.sh --peer): this guest
# (main) measures ib_write_bw with 64 KiB messages between two QPs of its
# own virtio_rdma0, first alone, then while the peer guest floods its own
# virtio_rdma0 with 4 MiB ib_write_bw messages between two QPs of its own.
# Prints both bandwidths and their ratio. The two guests share the host's
# cores with each other and with the backend (TCG): on a host with few
# cores the ratio also measures how they share the CPUs, not only the
# device. It never fails on a number.
#   flood.sh main|peer
set -euo pipefail
source "$(dirname "$0")/../e2e/lib/common.sh"

ROLE=${1:-main}
driver_up
gid=$(v4_gid_index)
opts="-d virtio_rdma0 -x $gid -F"

if [ "$ROLE" = peer ]; then
	# Wait for "start", flood until "stop" (both TCP connections to 9998).
	python3 -c 'import socket; socket.create_server(("", 9998)).accept()'
	ib_write_bw $opts -s 4194304 -D 600 -p 18900 >/tmp/fs.log 2>&1 &
	sleep 1
	ib_write_bw $opts -s 4194304 -D 600 -p 18900 "$MY_IP" >/tmp/fc.log 2>&1 &
	peer_wait_done 900
	pkill ib_write_bw || true
	echo "PASS (peer)"
	exit 0
fi

# bw: 64 KiB ib_write_bw between two QPs of this guest; prints MiB/s.
bw() {
	PAIR_QUIET=1 pair "ib_write_bw" ib_write_bw $opts -s 65536 -n 3000 -p "$port" -- \
		ib_write_bw $opts -s 65536 -n 3000 -p "$port" "$MY_IP"
	port=$((port + 1))
	awk '$1 == 65536 { print $4; exit }' /tmp/client.log
}
wait_for "the peer answers on the link" ping -c 1 -W 1 10.0.2.16
alone=$(bw)
until echo >/dev/tcp/10.0.2.16/9998; do sleep 1; done 2>/dev/null
sleep 5 # the flood under way
flooded=$(bw)
main_done
printf 'alone,flooded\n%s,%s\n' "$alone" "$flooded" >/mnt/run/flood.csv
echo "flood: victim 64 KiB ib_write_bw alone $alone MiB/s, with a 4 MiB flood in the other guest $flooded MiB/s, ratio $(awk -v a="$alone" -v b="$flooded" 'BEGIN { printf "%.2f", b / a }')"
