#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Hostile userspace against virtio_rdma0's user data path: a process that
# maps the rings where and how it was not told to, writes garbage into a
# send ring and rings the doorbell itself, posts with a key it does not own
# and destroys objects still in use (lib/uverbs_hostile.c: each gets its
# errno or an error completion on that QP only, and other QPs keep working);
# then perftest processes killed mid-traffic, after which `rdma res show`
# lists nothing of them. The runner fails the test on any kernel report or
# leak once the processes are gone.
# modes: virtqueues (the mode with queues in guest memory has its own:
# lib/uverbs_hostile_rings.c in rings.sh)
set -euo pipefail

source "$(dirname "$0")/lib/common.sh"

driver_up

step "the hostile process"
/mnt/run/bin/uverbs_hostile || fail "hostile userspace"

# Objects of perftest's processes, by kind (QPs are listed by link, the
# others by device; kernel objects show "[ULP]" as comm).
user_objects() {
	local where="dev virtio_rdma0"
	[ "$1" != qp ] || where="link virtio_rdma0/1"
	res_count "comm ib_" "$1" $where
}

step "perftest killed mid-traffic"
for t in ib_write_bw ib_send_bw; do
	$t -d virtio_rdma0 -x 1 -F -n 1000000 -p 18600 >/tmp/server.log 2>&1 &
	server=$!
	sleep 1
	$t -d virtio_rdma0 -x 1 -F -n 1000000 -p 18600 10.0.2.15 >/tmp/client.log 2>&1 &
	client=$!
	# Traffic flows once both have their QPs (two user QPs listed).
	two_qps() { [ "$(user_objects qp)" -ge 2 ]; }
	wait_for "$t's QPs" two_qps
	sleep 2
	echo "$t: $(user_objects qp) QPs, $(user_objects mr) MRs, $(user_objects cq) CQs of its processes"
	kill -9 "$client" "$server"
	wait "$client" "$server" 2>/dev/null || true
	none_left() { [ "$(user_objects qp)" = 0 ] && [ "$(user_objects mr)" = 0 ] &&
		[ "$(user_objects cq)" = 0 ] && [ "$(user_objects pd)" = 0 ]; }
	wait_for "$t's objects to go" none_left
done
modprobe -r virtio_rdma || fail "virtio_rdma does not unload"
echo "PASS: hostile userspace"
