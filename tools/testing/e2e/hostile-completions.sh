#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A device that lies about completions (the backend's --hostile mode): every
# third completion it posts names a request never posted, carries a length
# or an opcode its request cannot have, names a QP that does not report to
# the CQ, comes back a byte short, comes twice, or names a request completed
# already; after every control command it posts a garbage event. The driver
# takes none of it for true: the device never carries a consumer's wr_id
# (the driver's tables give it back), each kind of lie is reported, and
# nothing oopses or leaks: the clients are killed by their timeouts (a
# dropped completion leaves its consumer waiting) and the driver unloads.
# backend-args: --hostile completions,events --hostile-every 3
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

driver_up
dev=virtio_rdma0 gid=1 addr=10.0.2.15

# try NAME SERVER... -- CLIENT...: a pair whose outcome does not matter (lost
# completions leave it waiting until its timeout); only the kernel's does.
try() {
	local name=$1; shift
	local server=()
	while [ "$1" != -- ]; do server+=("$1"); shift; done
	shift
	step "$name"
	timeout 20 "${server[@]}" >/tmp/server.log 2>&1 &
	sleep 1
	local rc=0
	timeout 20 "$@" >/tmp/client.log 2>&1 || rc=$?
	wait || true
	echo "  client exit $rc"
	port=$((port + 1))
}

# Consumers in processes: their wr_ids pass through the driver's tables too.
# (Not rdma_cm: a kernel consumer waits for every completion it is owed, and
# ib_mad's that this device drops would keep rdma_cm's IDs alive for good.)
try "ibv_rc_pingpong" ibv_rc_pingpong -d $dev -g $gid -n 200 -p $port -- \
	ibv_rc_pingpong -d $dev -g $gid -n 200 -p $port localhost
try "ibv_ud_pingpong" ibv_ud_pingpong -d $dev -g $gid -n 200 -s 512 -p $port -- \
	ibv_ud_pingpong -d $dev -g $gid -n 200 -s 512 -p $port localhost
opts="-d $dev -x $gid -F"
try "ib_write_bw" ib_write_bw $opts -n 500 -p $port -- ib_write_bw $opts -n 500 -p $port $addr
try "ib_read_bw" ib_read_bw $opts -n 500 -p $port -- ib_read_bw $opts -n 500 -p $port $addr

step "each kind of lie was caught and reported"
log=$(dmesg)
expect() {
	grep -q -- "$2" <<<"$log" || fail "no report of $1 ('$2')"
	echo "  $1: reported"
}
expect "a short completion" "completion of 47 bytes, expected 48; dropped"
expect "a completion of no outstanding request" "completion with token .*NotOutstanding; dropped"
expect "a completion that does not fit its request" "does not fit its request .*reported as a general error"
expect "a completion for a QP the driver does not know" "which the driver does not know; dropped"
expect "a malformed event" "malformed event"
expect "an event naming nothing" "names no CQ or QP of the device"

step "the driver unloads"
pkill -KILL -f 'rping|pingpong|ib_write_bw|ib_read_bw' || true
sleep 1
timeout 120 rmmod virtio_rdma || fail "rmmod virtio_rdma: $?"
echo "PASS"
