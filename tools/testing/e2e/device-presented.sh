#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The guest's virtio core enumerates the virtio-rdma device (ID 42) behind
# vhost-user-rdma-pci, with one MSI-X vector per virtqueue plus config.
# modes: virtqueues (the ring mode changes only the counts, which rings.sh
# checks; left out of the ring pass to keep make check in its budget)
set -euo pipefail
found=""
for d in /sys/bus/virtio/devices/*; do
	[ "$(cat "$d/device")" = 0x002a ] && found=$d
done
[ -n "$found" ] || { echo "no virtio device with ID 0x002a"; ls -l /sys/bus/virtio/devices/; exit 1; }
echo "virtio device 0x002a at $found (vendor $(cat "$found/vendor"))"

# The PCI function behind it: Red Hat's virtio vendor, modern device 0x1040+42.
pci=$(basename "$(readlink -f "$found/..")")
[ "$(cat /sys/bus/pci/devices/$pci/vendor)" = 0x1af4 ]
[ "$(cat /sys/bus/pci/devices/$pci/device)" = 0x106a ]
msix=$(lspci -vv -s "$pci" | sed -n 's/.*MSI-X: Enable.*Count=\([0-9]*\).*/\1/p')
echo "MSI-X vectors: $msix"
# 1 control + 32 CQ + 2*16 QP + 1 event queues (the runner's limits) + 1 config
# vector; with queues in guest memory (the backend's --rings) also the
# notification queue and the 2 completion-event queues.
# The driver negotiates VIRTIO_RDMA_F_RINGS (feature bit 0) when offered.
modprobe virtio_rdma
for _ in $(seq 50); do [ -e "$found/driver" ] && break; sleep 0.2; done
drv=""
[ ! -e "$found/driver" ] || drv=$(basename "$(readlink -f "$found/driver")")
[ "$drv" = virtio_rdma ] || { echo "virtio_rdma did not bind the device (driver: ${drv:-none})"; exit 1; }
echo "bound by $drv"
want=67
[ "$(cut -c1 "$found/features")" = 0 ] || want=70
[ "$msix" = $want ] || { echo "expected $want MSI-X vectors"; lspci -vv -s "$pci"; exit 1; }
