#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The queue count is the backend's: QEMU is started without num-queues and
# asks the backend (VHOST_USER_GET_QUEUE_NUM). With limits other than the
# runner's, the guest sees that backend's count: 1 control + 8 CQ + 2*4 QP
# + 1 event = 18 virtqueues, 19 MSI-X vectors with config; the driver sets
# them all up and rdma-core sees the limits.
# backend-args: --max-qp 4 --max-cq 8
# modes: virtqueues
set -euo pipefail

source "$(dirname "$0")/lib/common.sh"

found=""
for d in /sys/bus/virtio/devices/*; do
	[ "$(cat "$d/device")" = 0x002a ] && found=$d
done
[ -n "$found" ] || fail "no virtio device with ID 0x002a"
pci=$(basename "$(readlink -f "$found/..")")
msix=$(lspci -vv -s "$pci" | sed -n 's/.*MSI-X: Enable.*Count=\([0-9]*\).*/\1/p')
echo "MSI-X vectors: $msix"
[ "$msix" = 19 ] || { lspci -vv -s "$pci"; fail "expected 19 MSI-X vectors"; }

driver_up
dmesg | grep "virtio-rdma device:"
dmesg | grep -q "virtio-rdma device: 18 virtqueues, max_qp 4 max_cq 8 " ||
	fail "the driver did not set up the backend's 18 virtqueues"
ibv_devinfo -v -d virtio_rdma0 >/tmp/devinfo.txt
grep -E "max_qp:|max_cq:" /tmp/devinfo.txt
grep -Eq "max_qp:[[:space:]]+4$" /tmp/devinfo.txt || fail "ibv_devinfo: max_qp is not 4"
grep -Eq "max_cq:[[:space:]]+8$" /tmp/devinfo.txt || fail "ibv_devinfo: max_cq is not 8"
