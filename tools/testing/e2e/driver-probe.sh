#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The virtio_rdma driver binds to the virtio-rdma device (ID 42): probe reads
# and checks config space, creates every virtqueue, queries port 1 and creates
# and destroys a PD over the control queue. Then 20 unload/load cycles, each
# of which must rebind the device and repeat the control-path round trips
# (the runner fails the test on any WARN, lockdep, KASAN or kmemleak report).
set -euo pipefail

fail() { echo "FAIL: $*"; dmesg | tail -40; exit 1; }

dev=""
for d in /sys/bus/virtio/devices/*; do
	[ "$(cat "$d/device")" = 0x002a ] && dev=$d
done
[ -n "$dev" ] || fail "no virtio device with ID 0x002a"

bound_driver() { [ -e "$dev/driver" ] && basename "$(readlink -f "$dev/driver")" || echo none; }
probes() { dmesg | grep -c "virtio_rdma .*control path works" || true; }

modprobe virtio_rdma
[ "$(bound_driver)" = virtio_rdma ] || fail "$(basename "$dev") is bound to '$(bound_driver)', not virtio_rdma"
log=$(dmesg)
port=$(grep "virtio_rdma .*: port 1: " <<<"$log" | tail -1) || fail "no QUERY_PORT result in the kernel log"
echo "QUERY_PORT: ${port#*] }"
grep "virtio_rdma .*control path works" <<<"$log" | tail -1 | sed 's/^\[[^]]*\] //'
grep -q "virtio_rdma .*: port 1: state 4 " <<<"$log" || fail "port 1 is not ACTIVE (state 4)"

for i in $(seq 20); do
	rmmod virtio_rdma || fail "rmmod #$i"
	[ "$(bound_driver)" = none ] || fail "still bound after rmmod #$i"
	modprobe virtio_rdma || fail "modprobe #$i"
	[ "$(bound_driver)" = virtio_rdma ] || fail "not rebound after modprobe #$i"
done
n=$(probes)
[ "$n" = 21 ] || fail "expected 21 successful probes, saw $n"
rmmod virtio_rdma
echo "21 probes, 20 unload/load cycles: ok"
