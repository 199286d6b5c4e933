#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A device that names a live object again (the backend's --hostile mode):
# every third CREATE_CQ and CREATE_QP (or CREATE_*_RING) answers with the number of a CQ or QP
# that is in use (ib_mad's CQ 0 and QP 1, the first of each). The driver
# refuses those creates (EPROTO) without touching the live object: it sends
# no DESTROY for it and lends no buffers to its queue, so the objects that
# had the number keep working (rdma_cm's MADs still go through ib_mad's QP 1
# and CQ 0), and the driver unloads with each of them destroyed once.
# With queues in guest memory a refused create leaves its rings with the
# device (it may have taken them) until the device is reset at unload: then
# they are freed, and kmemleak sees nothing.
# backend-args: --hostile handles --hostile-every 3
# modes: rings (the handle checks are the same in both modes; with queues
# in guest memory a refused create's rings are also at stake)
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

driver_up
addr=10.0.2.15

step "creates that name a live object are refused, the others work"
# ib_mad made the device's first CQ and QP; five more of each make the
# counts multiples of three, so rping's two CQs and two QPs are told the truth.
python3 "$(dirname "$0")/lib/hostile_handles.py" 5 || fail "pyverbs creates"
dmesg | grep -Eq "CREATE_CQ(_RING)? returned CQ [0-9]*, which is in use" ||
	fail "no report of a CQ number in use"
# With queues in guest memory the live QP named is the GSI QP, outside the
# ring QPs' numbers: refused as such.
dmesg | grep -Eq "CREATE_QP(_RING)? returned QP [0-9]*, (which is in use|not one of)" ||
	fail "no report of a QP number in use"

step "the live objects still work: rdma_cm through ib_mad's QP1"
timeout 30 rping -s -a $addr -p $port -C 3 >/tmp/server.log 2>&1 &
sleep 1
ok=0
timeout 30 rping -c -a $addr -p $port -C 3 -V -v >/tmp/client.log 2>&1 &&
	grep -q "ping data: rdma-ping-2" /tmp/client.log && ok=1
wait || true
[ $ok = 1 ] || fail "rping never connected: $(tail -3 /tmp/client.log)"
echo "  rping connected and verified 3 pings"

step "the driver unloads, destroying CQ 0 and QP 1 once"
timeout 120 rmmod virtio_rdma || fail "rmmod virtio_rdma: $?"
# (The lies leave the device with objects the driver never learnt of, which
# keep other CQs and PDs busy: their DESTROYs fail, as the device says.)
if dmesg | grep -E "DESTROY_CQ 0:|DESTROY_QP 1:|(CQ 0|QP 1): the device kept"; then
	fail "a live object was destroyed twice or lost its buffers"
fi
echo "PASS"
