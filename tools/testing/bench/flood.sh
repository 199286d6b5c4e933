#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Fairness between two guests on one backend (run.sh --peer): this guest
# (main) measures ib_write_bw with 64 KiB messages between two QPs of its
# own virtio_rdma0 three times: alone; while the peer guest only burns its
# two vCPUs (two busy loops, as a flood's perftest server and client spin);
# and while the peer floods its own virtio_rdma0 with 4 MiB ib_write_bw
# messages between two QPs of its own. Prints the bandwidths and their
# ratios. The guests share the host's cores with each other and with the
# backend (TCG): on a host with few cores the share a flood leaves also
# measures how they share the CPUs; the burn measures only that (two busy
# vCPUs), so flood / burn is what the flood costs beyond them: its share of
# the device, and the backend thread it keeps busy on the same host cores.
# It never fails on a number.
#   flood.sh main|peer
set -euo pipefail
source "$(dirname "$0")/../e2e/lib/common.sh"

ROLE=${1:-main}
driver_up
gid=$(v4_gid_index)
opts="-d virtio_rdma0 -x $gid -F"

if [ "$ROLE" = peer ]; then
	# Each phase starts when the main guest connects to 9998: the burn,
	# then the flood; it ends when it says it is done (9999).
	next() { python3 -c 'import socket; socket.create_server(("", 9998)).accept()'; }
	next
	burners=()
	for _ in 1 2; do
		bash -c 'while :; do :; done' &
		burners+=($!)
	done
	next
	kill "${burners[@]}"
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
# phase: starts the peer's next phase and gives it 5 s to get under way.
phase() {
	until echo >/dev/tcp/10.0.2.16/9998; do sleep 1; done 2>/dev/null
	sleep 5
}
wait_for "the peer answers on the link" ping -c 1 -W 1 10.0.2.16
alone=$(bw)
phase
burned=$(bw)
phase
flooded=$(bw)
main_done
printf 'alone,burned,flooded\n%s,%s,%s\n' "$alone" "$burned" "$flooded" >/mnt/run/flood.csv
share() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b / a }'; }
echo "flood: victim 64 KiB ib_write_bw alone $alone MiB/s; beside a guest burning its vCPUs $burned MiB/s" \
	"(share $(share "$alone" "$burned")); beside a 4 MiB flood in the other guest $flooded MiB/s" \
	"(share $(share "$alone" "$flooded"); flood/burn $(share "$burned" "$flooded"))"
