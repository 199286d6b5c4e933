#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# make run's demonstration: what works so far, in a fresh guest.
set -uo pipefail
step() { printf '\n$ %s\n' "$*"; "$@"; }
echo "guest kernel $(uname -r)"
step ip -color=never -br addr show eth0
echo
echo "virtio devices (ID 0x002a is virtio-rdma):"
driver_of() { if [ -e "$1/driver" ]; then basename "$(readlink "$1/driver")"; else echo none; fi; }
for d in /sys/bus/virtio/devices/*; do
	printf '  %s  device %s  driver %s\n' "${d##*/}" "$(cat "$d/device")" "$(driver_of "$d")"
done
for d in /sys/bus/virtio/devices/*; do
	[ "$(cat "$d/device")" = 0x002a ] || continue
	pci=$(basename "$(readlink -f "$d/..")")
	step lspci -nn -s "$pci"
	lspci -vv -s "$pci" | grep -E "MSI-X|Vector table"
done
step modprobe virtio_rdma
dmesg | grep -E "virtio_rdma " | sed 's/^\[[^]]*\] /  /'
for d in /sys/bus/virtio/devices/*; do
	[ "$(cat "$d/device")" = 0x002a ] || continue
	echo "  ${d##*/} is bound to: $(driver_of "$d")"
done
echo
echo "not yet: ib_device registration (rdma link show, ibv_devinfo, pingpong)"
