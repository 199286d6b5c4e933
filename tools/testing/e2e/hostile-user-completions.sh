#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A device that lies in the completions it writes into a process's CQ rings
# (queues in guest memory: the kernel never sees them). The provider checks
# every completion against the requests it keeps (wr_table.c): a token no
# request of that queue has outstanding, a QP of no CQ of this process, the
# other direction's opcode, a duplicate or a stale completion makes the poll
# fail with EIO (the CQ reports no more), and a success that does not fit its
# request (too long) reaches the program as a general error of that request.
# lib/uverbs_lying_cqes.c checks that nothing else ever reaches it; the
# provider's reasons are in its log (VERBS_LOG_LEVEL). The kernel's own CQs
# take no completion here (no MAD reaches QP 1), so the device stays up.
# backend-args: --rings --hostile completions --hostile-every 3
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

driver_up

step "a process whose completions the device lies about"
rc=0
VERBS_LOG_LEVEL=3 VERBS_LOG_FILE=/tmp/verbs.log /mnt/run/bin/uverbs_lying_cqes >/tmp/lying.log 2>&1 || rc=$?
# What it printed, but the lines of every round.
grep -v "^ok: \(two CQs\|QPs A and B\|the objects\)" /tmp/lying.log || true
[ $rc = 0 ] || fail "lying completions (exit $rc; the provider's log: $(tail -3 /tmp/verbs.log))"

step "the provider said why"
for why in "names no outstanding request" "names no QP of this process"; do
	n=$(grep -c -- "$why" /tmp/verbs.log || true)
	echo "  \"$why\": $n"
	[ "$n" -gt 0 ] || fail "no completion refused because it $why"
done

step "the device did not fail (the lies were the process's to see)"
# Not `dmesg | grep -q ... && fail`: under pipefail dmesg's SIGPIPE when grep
# stops early would hide the very line looked for.
! dmesg | grep "device failed" >/dev/null || fail "the driver failed the device"
rdma link show virtio_rdma0/1 | grep -q "state ACTIVE" || fail "the port is not active"
echo PASS
