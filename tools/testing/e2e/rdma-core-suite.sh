#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rdma-core's own test suite (pyverbs' tests, what upstream runs against rxe
# before taking a patch) on virtio_rdma0 and, with SUITE_PEER=rxe, then on
# rxe0 bound to the same guest's eth0, both through lib/rdma_core_suite.py,
# which records every test's outcome. The test fails when virtio_rdma0
# passes fewer tests than rxe0 (if it ran), when a test fails or errors
# other than lib/rdma-core-suite.expected
# says (the known gaps, each with its reason), when one listed as passing in
# this mode does not, or when one skips that the list does not name as a
# skip of this mode (each skip there says why the device lacks the feature).
# The mode is the device's: with queues in guest memory (max_srq > 0) the
# list's @rings lines apply, else its @virtqueues ones.
# timeout: 1500
# modes: rings (the mode with queues in guest memory passes the most, SRQ
# and XRC with it; a virtqueue-mode run, about 8 minutes of make check on a
# slow machine, proves the same verbs again; run.sh runs it by hand)
set -euo pipefail

source "$(dirname "$0")/lib/common.sh"
MODULES="test_device test_pd test_mr test_cq test_cq_events test_qp test_qpex test_atomic
test_srq test_addr test_rdmacm test_shared_pd"
EXPECTED=tools/testing/e2e/lib/rdma-core-suite.expected
SUITE=tools/testing/e2e/lib/rdma_core_suite.py

driver_up
max_srq=$(ibv_devinfo -v -d virtio_rdma0 | sed -n 's/^[[:space:]]*max_srq:[[:space:]]*\([0-9]*\).*/\1/p')
mode=virtqueues
[ "${max_srq:-0}" = 0 ] || mode=rings
echo "queue mode: $mode"

# Debian ships the suite with most modules gzipped: a private copy, unpacked.
rm -rf /tmp/pyverbs-tests
cp -r /usr/share/doc/rdma-core/tests /tmp/pyverbs-tests
gunzip -f /tmp/pyverbs-tests/*.gz

# suite DEV OUT: the modules on DEV, addressed by its RoCEv2 GID of eth0's
# IPv4 address; the summary of each run on the test's output.
suite() {
	local gid
	gid=$(v4_gid_index "$1") || fail "$1 has no RoCEv2 GID of $MY_IP"
	step "rdma-core's suite on $1 (GID index $gid)"
	# shellcheck disable=SC2086 # the module list is words
	timeout 900 python3 "$SUITE" run /tmp/pyverbs-tests "$2" --dev "$1" --gid "$gid" $MODULES \
		>"/tmp/suite-$1.log" 2>&1 || true
	[ -s "$2" ] || { tail -30 "/tmp/suite-$1.log"; fail "the suite on $1 recorded nothing"; }
	grep -E "^(Ran|OK|FAILED)|tests: \{" "/tmp/suite-$1.log" | sed 's/^/  /'
}
suite virtio_rdma0 /tmp/suite-virtio.json

# rxe's run (SUITE_PEER=rxe, by hand: run.sh -- "SUITE_PEER=rxe bash
# tools/testing/e2e/rdma-core-suite.sh") is the comparison with the peer;
# make check leaves it out: EXPECTED pins every outcome of ours, and rxe
# (the pinned kernel's) does not change between runs.
peer=-
if [ "${SUITE_PEER:-}" = rxe ]; then
	modprobe rdma_rxe
	rdma link add rxe0 type rxe netdev eth0
	wait_for "rxe0's RoCEv2 GID of $MY_IP" v4_gid rxe0
	suite rxe0 /tmp/suite-rxe.json
	rdma link delete rxe0
	modprobe -r rdma_rxe
	peer=/tmp/suite-rxe.json
fi

# Every outcome of both runs, kept with the run's output (run.sh --out).
cp /tmp/suite-virtio.json /tmp/suite-rxe.json /mnt/run/ 2>/dev/null || true
step "verdict ($mode)"
python3 "$SUITE" verdict /tmp/suite-virtio.json "$peer" "$EXPECTED" "$mode" ||
	{ grep -E "^(FAIL|ERROR):" /tmp/suite-virtio_rdma0.log | head -40; fail "rdma-core's suite"; }
modprobe -r virtio_rdma
