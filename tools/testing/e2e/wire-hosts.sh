#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# On the wire between two hosts' backends (issue 43; lib/wire.sh): this
# guest's virtio_rdma0 and the peer's are both the ID-42 device, served
# by two backend processes (run.sh --hosts 2), each device's port on an
# uplink (a TAP) on one bridge: they meet only as RoCEv2 frames, so both
# ends of every connection are the backend's wire transport (requester
# and responder on packets, engine/wire/), neither its in-memory path.
# Each guest's NIC is its backend's too (--nic-socket: QEMU's stock
# virtio-net-pci on -netdev vhost-user), so that the RDMA port and eth0
# are one port: eth0's ARP is what the port learns its neighbours from,
# and the RoCEv2 frames leave with eth0's MAC and IP. (wire-rxe.sh puts
# the net personality on the wire, whose one function is both.)
# Jumbo frames, as an operator would set them between hosts: a 9000-byte
# MTU on both guests' Ethernet, the backends' ports and the link, so the
# ports' IB MTU is 4096 (wire-rxe.sh runs at 1500 and 1024).
# peer: bash tools/testing/e2e/wire-hosts.sh peer
# hosts: 2
# mtu: 9000
# backend-args: --rings
set -euo pipefail

source "$(dirname "$0")/lib/common.sh"

PEER_KIND=virtio
# The MTU this test asked the runner for (its "# mtu:" line).
WIRE_MTU=$(sed -n 's/^# mtu: //p' "$0")
# The other way round and NVMe: see wire-rxe.sh (and make check's budget).
WIRE_ONE_WAY=1
source "$(dirname "$0")/lib/wire.sh"
echo "wire-hosts: ok"
