#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Three ID-42 devices in one guest (run.sh --devices 3), one backend
# serving each with a config of its own, and the driver loaded once:
# - device 0 (eth0's) has limits other than the runner's: QEMU is started
#   without num-queues and asks the backend (VHOST_USER_GET_QUEUE_NUM), so
#   the guest sees that device's count: 1 control + 8 CQ + 2*4 QP + 1 event
#   = 18 virtqueues, 19 MSI-X vectors with config; the driver sets them all
#   up and rdma-core sees the limits.
# - device 1 says it has two ports (the driver supports one): probe
#   refuses the config before any queue exists.
# - device 2 says max_qp 100, which asks for 2 + 32 + 200 queues; it has
#   66 (67 vectors): probe fails once the transport refuses the queues.
# A refused device is left unbound with a message naming what is wrong and
# no RDMA device, beside the one that works; the module unloads cleanly,
# and the debug kernel has nothing to report.
# devices: 3
# backend-args: --socket-max-qp 4 --socket-max-qp 16 --socket-max-qp 16 --socket-max-cq 8 --socket-max-cq 32 --socket-max-cq 32 --config-override 1:phys_port_cnt=2 --config-override 2:max_qp=100
# modes: virtqueues (the queue counts are of virtqueues; probe refuses the
# bad configs before any ring exists)
set -euo pipefail

source "$(dirname "$0")/lib/common.sh"

# msix DEV: the MSI-X vectors of virtio device DEV's PCI function.
msix() {
	lspci -vv -s "$(basename "$(readlink -f "$1/..")")" |
		sed -n 's/.*MSI-X: Enable.*Count=\([0-9]*\).*/\1/p'
}
devs=() counts=()
for d in /sys/bus/virtio/devices/*; do
	[ "$(cat "$d/device")" = 0x002a ] || continue
	devs+=("$d")
	counts+=("$(msix "$d")")
done
echo "ID-42 devices: ${devs[*]##*/}, MSI-X vectors: ${counts[*]}"
[ "$(printf '%s\n' "${counts[@]}" | sort -n | xargs)" = "19 67 67" ] ||
	fail "expected three ID-42 devices with 19, 67 and 67 MSI-X vectors (the backend's queue counts)"

driver_up
dmesg | grep "virtio_rdma\|virtio-rdma device:" | sed 's/^\[[^]]*\] //'
bound=()
for i in "${!devs[@]}"; do
	[ -e "${devs[$i]}/driver" ] && bound+=("${counts[$i]}")
done
[ "${bound[*]}" = 19 ] || fail "bound: the devices with ${bound[*]:-no} MSI-X vectors, not the one with 19 alone"
[ "$(ls /sys/class/infiniband/)" = virtio_rdma0 ] ||
	fail "RDMA devices: $(ls /sys/class/infiniband/ | xargs), not virtio_rdma0 alone"
for m in "unusable config space: phys_port_cnt is 2, the driver supports 1" \
	"cannot set up 234 virtqueues (2 + max_cq 32 + 2 \* max_qp 100)"; do
	dmesg | grep -q "virtio_rdma .*$m" || fail "no '$m' in the kernel log"
done
[ "$(dmesg | grep -c "probe with driver virtio_rdma failed")" = 2 ] ||
	fail "not two failed probes"

step "the working device: the backend's queue count and limits"
dmesg | grep -q "virtio-rdma device: 18 virtqueues, max_qp 4 max_cq 8 " ||
	fail "the driver did not set up the backend's 18 virtqueues"
ibv_devinfo -v -d virtio_rdma0 >/tmp/devinfo.txt
grep -E "max_qp:|max_cq:" /tmp/devinfo.txt
grep -Eq "max_qp:[[:space:]]+4$" /tmp/devinfo.txt || fail "ibv_devinfo: max_qp is not 4"
grep -Eq "max_cq:[[:space:]]+8$" /tmp/devinfo.txt || fail "ibv_devinfo: max_cq is not 8"
rmmod virtio_rdma
echo "device-configs: ok"
