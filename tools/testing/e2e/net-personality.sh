#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The net personality (issue 19, Documentation/infiniband/virtio_rdma_net.rst)
# with Linux's own virtio_net, two guests on one backend (--net): each guest
# has one virtio function only, a virtio-net device (ID 1, PCI class
# Ethernet) whose queues the backend serves, and no QEMU NIC. The stock
# driver does not know VIRTIO_NET_F_ROCE, so the RoCE half stays unused and
# no RDMA device appears; Ethernet must work as on any virtio-net: ping, TCP
# with the bytes checked, broadcasts, and a guest cannot send as another
# (the backend's switch drops frames whose source MAC is not the sender's).
# peer: bash tools/testing/e2e/net-personality.sh peer
# backend-args: --net --rings
set -euo pipefail

source "$(dirname "$0")/lib/common.sh"

ROLE=${1:-main}
PEER=10.0.2.16 PEER_MAC=52:54:00:12:34:57

step "$ROLE: the one virtio function is a virtio-net device"
vdev=$(basename "$(readlink -f /sys/class/net/eth0/device)")
[ "$(cat /sys/bus/virtio/devices/$vdev/device)" = 0x0001 ] || fail "eth0's virtio device is not virtio-net"
[ "$(basename "$(readlink /sys/bus/virtio/devices/$vdev/driver)")" = virtio_net ] || fail "eth0 is not bound to virtio_net"
pci=$(basename "$(readlink -f /sys/bus/virtio/devices/$vdev/..)")
echo "eth0: $vdev on $pci ($(cat /sys/bus/pci/devices/$pci/vendor):$(cat /sys/bus/pci/devices/$pci/device), class $(cat /sys/bus/pci/devices/$pci/class))"
[ "$(cat /sys/bus/pci/devices/$pci/class)" = 0x020000 ] || fail "the function is not an Ethernet controller"
for d in /sys/bus/virtio/devices/*; do
	case "$(cat "$d/device")" in
	0x0001) [ "$(basename "$d")" = "$vdev" ] || fail "a second virtio-net device: $d" ;;
	0x002a) fail "a virtio-rdma (ID 42) device is present: $d" ;;
	esac
done
# The features the driver took: MAC (5), STATUS (16), CTRL_VQ (17),
# CTRL_RX (18), VERSION_1 (32); ROCE (58) is not Linux's to take yet.
features=$(cat /sys/bus/virtio/devices/$vdev/features)
for bit in 5 16 17 18 32; do
	[ "${features:$bit:1}" = 1 ] || fail "feature bit $bit not negotiated: $features"
done
[ "${features:58:1}" = 0 ] || fail "the stock virtio_net took bit 58: $features"
ip -brief link show eth0
[ "$(cat /sys/class/net/eth0/operstate)" = up ] || fail "eth0 is not up"
rdma link show | grep . && fail "an RDMA link exists without a RoCE driver"

if [ "$ROLE" = peer ]; then
	step "peer: TCP and raw-frame listener"
	timeout 300 python3 tools/testing/e2e/lib/net_link.py peer || fail "the peer's listener failed"
	echo "PASS (peer)"
	exit 0
fi

step "ping $PEER"
wait_for "the peer answers on the link" ping -c 1 -W 1 "$PEER"
ping -c 5 -i 0.2 -W 2 "$PEER" | tail -2
step "TCP, broadcasts and an impersonation attempt"
python3 tools/testing/e2e/lib/net_link.py main "$PEER" "$PEER_MAC" || fail "Ethernet between the guests"
ip -s link show eth0 | sed -n '3,6p'
echo PASS
