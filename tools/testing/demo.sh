#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# make run's demonstration: what works so far, in a fresh guest.
set -uo pipefail
step() { printf '\n$ %s\n' "$*"; "$@"; }
echo "guest kernel $(uname -r)"
step ip -br addr show eth0
echo
echo "virtio devices (ID 0x002a is virtio-rdma):"
for d in /sys/bus/virtio/devices/*; do
	printf '  %s  device %s  driver %s\n' "${d##*/}" "$(cat "$d/device")" \
		"$(basename "$(readlink "$d/driver" 2>/dev/null)" 2>/dev/null || echo none)"
done
for d in /sys/bus/virtio/devices/*; do
	[ "$(cat "$d/device")" = 0x002a ] || continue
	pci=$(basename "$(readlink -f "$d/..")")
	step lspci -nn -s "$pci"
	lspci -vv -s "$pci" | grep -E "MSI-X|Vector table"
done
