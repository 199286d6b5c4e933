#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A device that lies about completions (the backend's --hostile mode): the
# third completion it posts names a request never posted (the lies after it
# - lengths, opcodes, foreign QPs, short, duplicate and stale completions -
# are the KUnit tests' of cq.rs and wr_table.rs), and every control command
# is followed by a garbage event. The driver takes none of it for true: the
# device never carries a consumer's wr_id, so the lie names nothing; the
# device has lost track of a request, so the driver fails it
# (IB_EVENT_DEVICE_FATAL) and completes every request outstanding on a
# kernel QP itself, flushed. So rdma_cm's connection through ib_mad, which
# the lie hits, leaves nothing waiting for a completion that never comes;
# new objects are refused; garbage events are reported; and the driver
# unloads, with nothing for the debug kernel to report.
# backend-args: --hostile completions,events --hostile-every 3
# modes: virtqueues (with queues in guest memory the same checks hold the
# kernel's completions: KUnit's virtio_rdma_wr_table cases refuse tokens
# not outstanding; hostile-user-completions is the ring mode's, for a
# process)
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

driver_up
dev=virtio_rdma0 gid=1 addr=10.0.2.15
ibv_asyncwatch -d $dev >/tmp/async.log 2>&1 &

step "rping: rdma_cm's MADs through ib_mad's QP 1 meet the lie"
# The connection cannot be made (the device failed under it); the CM gives
# up after its retries, or the timeout ends rping. Either way no completion
# is owed any more, so nothing may stay behind waiting for one (rdma_cm
# destroys its IDs only once ib_mad's sends have completed).
timeout 30 rping -s -a $addr -p $port -C 20 >/tmp/server.log 2>&1 &
sleep 1
rc=0
timeout 30 rping -c -a $addr -p $port -C 20 -V -v >/tmp/client.log 2>&1 || rc=$?
echo "  client exit $rc: $(tail -1 /tmp/client.log)"
wait_for "every rping to exit" bash -c '! pgrep -x rping >/dev/null'
port=$((port + 1))

step "the lie was caught and the device failed"
log=$(dmesg)
expect() {
	grep -q -- "$2" <<<"$log" || fail "no report of $1 ('$2')"
	echo "  $1: reported"
}
expect "a completion of no outstanding request" "completion with token .*NotOutstanding; dropped"
expect "the device's failure" "device failed: CQ [0-9]*: a completion of no outstanding request"
expect "a malformed event" "malformed event"
expect "an event naming nothing" "names no CQ, QP or SRQ of the device"
wait_for "IB_EVENT_DEVICE_FATAL reaching userspace" grep -q "IBV_EVENT_DEVICE_FATAL" /tmp/async.log
echo "  IBV_EVENT_DEVICE_FATAL: seen by ibv_asyncwatch"

step "a failed device makes no new objects"
python3 - <<'EOF' || fail "a CQ was created on a failed device"
import errno, sys
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.pyverbs_error import PyverbsRDMAError
try:
    CQ(Context(name="virtio_rdma0"), 8)
except PyverbsRDMAError as err:
    print(f"  CQ: {err}")
    sys.exit(0 if err.error_code == errno.EIO else 1)
sys.exit(1)
EOF

step "the driver unloads"
kill %1 2>/dev/null || true
wait %1 2>/dev/null || true
timeout 120 rmmod virtio_rdma || fail "rmmod virtio_rdma: $?"
echo "PASS"
