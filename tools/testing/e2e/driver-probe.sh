#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The virtio_rdma driver binds to the virtio-rdma device (ID 42): probe reads
# and checks config space, creates every virtqueue and registers
# virtio_rdma0, whose port 1 is ACTIVE on eth0 (its verbs are control
# commands: QUERY_PORT, ADD_GID, ...). Then 3 unload/load cycles, each of
# which must rebind the device and register it again (the runner fails the
# test on any WARN, lockdep, KASAN or kmemleak report; more cycles found
# nothing more and cost 6 s each under TCG).
# modes: virtqueues (probe and unload are the same with queues in guest
# memory but for the features taken: rings.sh, the ring pass's shared guest
# and every net-personality test probe that way)
set -euo pipefail

fail() { echo "FAIL: $*"; dmesg | tail -40; exit 1; }

dev=""
for d in /sys/bus/virtio/devices/*; do
	[ "$(cat "$d/device")" = 0x002a ] && dev=$d
done
[ -n "$dev" ] || fail "no virtio device with ID 0x002a"

bound_driver() { [ -e "$dev/driver" ] && basename "$(readlink -f "$dev/driver")" || echo none; }
registrations() { dmesg | grep -c "infiniband virtio_rdma0: registered" || true; }
expected="link virtio_rdma0/1 state ACTIVE physical_state LINK_UP netdev eth0"

modprobe virtio_rdma
[ "$(bound_driver)" = virtio_rdma ] || fail "$(basename "$dev") is bound to '$(bound_driver)', not virtio_rdma"
dmesg | grep "virtio_rdma" | sed 's/^\[[^]]*\] //'
link=$(rdma link show | sed 's/ *$//')
echo "rdma link show: $link"
[ "$link" = "$expected" ] || fail "expected '$expected'"

for i in $(seq 3); do
	rmmod virtio_rdma || fail "rmmod #$i"
	[ "$(bound_driver)" = none ] || fail "still bound after rmmod #$i"
	[ ! -e /sys/class/infiniband/virtio_rdma0 ] || fail "virtio_rdma0 left after rmmod #$i"
	modprobe virtio_rdma || fail "modprobe #$i"
	[ "$(bound_driver)" = virtio_rdma ] || fail "not rebound after modprobe #$i"
	[ "$(rdma link show | sed 's/ *$//')" = "$expected" ] || fail "cycle #$i: $(rdma link show)"
done
n=$(registrations)
[ "$n" = 4 ] || fail "expected 4 registrations, saw $n"
rmmod virtio_rdma
echo "4 registrations, 3 unload/load cycles: ok"
