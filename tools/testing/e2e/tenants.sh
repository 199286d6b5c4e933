#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Two guests as two tenants of one backend process (lib/tenant.py). This
# guest (10.0.2.15) is the victim: a QP connected to its real peer, a QP of
# its own guest, and a remote-access MR. The peer guest (10.0.2.16) is the
# attacker: told the victim's GID, QPN, expected PSN, rkey and address, it
# connects QPs of its own to the victim and tries RDMA WRITE, READ, both
# atomics, SEND and WRITE_WITH_IMM, then guessed keys and neighbouring QPs:
# every attempt fails at the attacker (the responder drops requests that are
# not from its connected peer), the victim's MR is unchanged, its QP stays
# in RTS and its posted receive untouched. Then the attacker puts this
# guest's address on its own NIC: its device does not get this guest's GID,
# and this guest's traffic to its own GID still reaches this guest (the real
# peer's SEND and WRITE). Last, this guest's port counters and, once
# unloading the driver resets the device, the backend's log of that reset
# count every attempt (and each of its retries) at one of this guest's QPs
# as dropped. The guests
# run as a cloud host places tenants (run.sh --own-cpus): each QEMU and its
# device's backend threads on CPUs of their own, which the backend's log
# must show.
# peer: bash tools/testing/e2e/tenants.sh peer
# own-cpus
# modes: virtqueues (the tenant rules are the responder's, the same for ring
# QPs; left out of the ring pass to keep make check in its budget: restore
# when it fits, it is the only two-guest RDMA traffic over rings)
set -euo pipefail

source "$(dirname "$0")/lib/common.sh"

ROLE=${1:-main}
driver_up
gid=$(v4_gid_index)
if [ "$ROLE" = peer ]; then
	step "the attacker"
	python3 tools/testing/e2e/lib/tenant.py attacker "$gid" || fail "the attacker's expectations"
	echo "PASS (peer)"
	exit 0
fi

step "each tenant's device on CPUs of its own"
# The backend logs the CPUs a device's threads have, as the kernel says.
python3 - /mnt/run/backend.log <<'PY' || fail "the two devices' threads do not have CPUs of their own"
import re, sys
cpus = {}
for line in open(sys.argv[1]):
    m = re.search(r"(vrdma[01]): serving .*; lanes \d+ on CPUs ([0-9,-]+)\)$", line)
    if m:
        cpus[m[1]] = {c for part in m[2].split(",")
                      for c in range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1)}
print("  ", {dev: sorted(c) for dev, c in sorted(cpus.items())})
sys.exit(len(cpus) != 2 or not all(cpus.values()) or bool(cpus["vrdma0"] & cpus["vrdma1"]))
PY
wait_for "the peer answers on the link" ping -c 1 -W 1 10.0.2.16
step "the victim"
python3 tools/testing/e2e/lib/tenant.py victim 10.0.2.16 "$gid" | tee /tmp/victim.log ||
	fail "the victim's expectations"
# Attacks at QPs that exist here are dropped by their responder and
# counted; those at QP numbers nobody has find no responder at all.
tried=$(sed -n 's/^ok: all [0-9]* attacks failed at the attacker, \([0-9]*\) of them at QPs of this guest$/\1/p' \
	/tmp/victim.log)
# Each attack went once and again at each of its retry_cnt (7, lib/tenant.py)
# timeouts: eight drops.
[ -z "$tried" ] || tried=$((tried * 8))

step "the guest sees the drops among its port counters"
seen=$(cat /sys/class/infiniband/virtio_rdma0/ports/1/hw_counters/dropped_not_peer)
echo "  virtio_rdma0: dropped_not_peer $seen"
[ -n "$tried" ] && [ "$seen" = "$tried" ] || fail "the port counts $seen drops for ${tried:-?} tries at its QPs"

step "the backend counted the drops"
modprobe -r virtio_rdma
# The device reset of the unbind logs the device's counters.
dropped() {
	sed -n 's/.*vrdma0: device reset; destroyed.*dropped_not_peer=\([0-9]*\).*/\1/p' \
		/mnt/run/backend.log | tail -1
}
reset_logged() { [ -n "$(dropped)" ]; }
wait_for "the backend's reset line" reset_logged
n=$(dropped)
echo "  vrdma0: dropped_not_peer=$n, tries at its QPs $tried"
[ -n "$tried" ] && [ "$n" = "$tried" ] || fail "the backend counted $n drops for ${tried:-?} tries at its QPs"
grep -q "vrdma1: ADD_GID: ::ffff:10.0.2.15 is not an address this device may use" /mnt/run/backend.log ||
	fail "the backend did not log the refused GID"
echo PASS
