#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The net personality (issue 19, Documentation/infiniband/virtio_rdma_net.rst),
# two guests on one backend (--net): each guest has one virtio function only,
# a virtio-net device (ID 1, PCI class Ethernet) whose queues the backend
# serves, and no QEMU NIC. virtio_net (patch 6/7) negotiates
# VIRTIO_NET_F_ROCE and creates the auxiliary device virtio_net.roce.<N>;
# Ethernet works as on any virtio-net (ping, TCP with the bytes checked,
# broadcasts; a guest cannot send as another: the backend's switch drops
# frames whose source MAC is not the sender's). virtio_rdma binds the
# auxiliary device: virtio_rdma0's port is that function's own eth0, and
# rdma-core's tools run over it (ibv_devinfo, ibv_rc_pingpong between the
# guests). Then, in the main guest, every order of taking the two drivers
# away and back: the RDMA driver unbound and bound again (Ethernet stays),
# virtio_net unbound under it (the RDMA device goes first) and bound again
# (both come back, the RDMA driver by itself), the module removed and
# loaded again; traffic between the guests after all of it. The runner's
# kmemleak scan and kernel-log checks then say nothing was left behind.
# perftest, rping and NVMe over RDMA over this personality:
# two-guests@net.
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
# The features the driver took: MTU (3), MAC (5), STATUS (16), CTRL_VQ
# (17), CTRL_RX (18), VERSION_1 (32) and ROCE (58).
features=$(cat /sys/bus/virtio/devices/$vdev/features)
for bit in 3 5 16 17 18 32 58; do
	[ "${features:$bit:1}" = 1 ] || fail "feature bit $bit not negotiated: $features"
done
ip -brief link show eth0
[ "$(cat /sys/class/net/eth0/operstate)" = up ] || fail "eth0 is not up"
adev=virtio_net.roce.${vdev#virtio}
[ -e /sys/bus/auxiliary/devices/$adev ] || fail "virtio_net did not create $adev: $(ls /sys/bus/auxiliary/devices)"
rdma link show | grep . && fail "an RDMA link exists before virtio_rdma is loaded"

dev=virtio_rdma0
link() { rdma link show $dev/1 2>/dev/null | sed 's/ *$//'; }
on_eth0() { [ "$(link)" = "link $dev/1 state ACTIVE physical_state LINK_UP netdev eth0" ]; }
# rdma_up: virtio_rdma0 is bound to $adev, its port to eth0, with the GID of
# this guest's address.
rdma_up() {
	wait_for "$dev on eth0" on_eth0
	wait_for "the RoCEv2 GID of $MY_IP" v4_gid
	[ "$(basename "$(readlink -f /sys/class/infiniband/$dev/device)")" = "$adev" ] ||
		fail "$dev is not the RDMA device of $adev: $(readlink -f /sys/class/infiniband/$dev/device)"
}
rdma_gone() { local out; out=$(rdma link show) && [ -z "$out" ]; }

step "$ROLE: virtio_rdma binds $adev"
driver_up
rdma_up
echo "rdma link show: $(link)"
[ "$(basename "$(readlink /sys/bus/auxiliary/devices/$adev/driver)")" = virtio_rdma.virtio_rdma ] ||
	fail "$adev is not bound to virtio_rdma.virtio_rdma"
ibv_devinfo -d $dev >/tmp/devinfo.txt || fail "ibv_devinfo -d $dev"
grep -E "hca_id|transport|state|link_layer" /tmp/devinfo.txt
grep -q "link_layer:.*Ethernet" /tmp/devinfo.txt || fail "ibv_devinfo: the port is not Ethernet"
grep -q "state:.*PORT_ACTIVE" /tmp/devinfo.txt || fail "ibv_devinfo: the port is not active"
gid=$(v4_gid_index)

if [ "$ROLE" = peer ]; then
	step "peer: TCP and raw-frame listener"
	timeout 300 python3 tools/testing/e2e/lib/net_link.py peer || fail "the peer's listener failed"
	pair_step "ibv_rc_pingpong" ibv_rc_pingpong -d $dev -g "$gid" -n 100 -s 4096 -c -p $port -- -
	# The main guest takes its drivers away and back meanwhile.
	pair_step "ibv_rc_pingpong after the rebinds" \
		ibv_rc_pingpong -d $dev -g "$gid" -n 100 -s 4096 -c -p $port -- -
	echo "PASS (peer)"
	exit 0
fi

step "ping $PEER"
wait_for "the peer answers on the link" ping -c 1 -W 1 "$PEER"
ping -c 5 -i 0.2 -W 2 "$PEER" | tail -2
step "TCP, broadcasts and an impersonation attempt"
python3 tools/testing/e2e/lib/net_link.py main "$PEER" "$PEER_MAC" || fail "Ethernet between the guests"
ip -s link show eth0 | sed -n '3,6p'
pair_step "ibv_rc_pingpong" - -- ibv_rc_pingpong -d $dev -g "$gid" -n 100 -s 4096 -c -p $port $PEER

step "the RDMA driver goes, Ethernet stays; it comes back"
echo "$adev" >/sys/bus/auxiliary/drivers/virtio_rdma.virtio_rdma/unbind
wait_for "$dev to go" rdma_gone
ping -c 2 -W 2 "$PEER" >/dev/null || fail "Ethernet went with the RDMA driver"
echo "$adev" >/sys/bus/auxiliary/drivers/virtio_rdma.virtio_rdma/bind
rdma_up
echo "unbound and bound again: $(link)"

step "virtio_net goes under the RDMA driver; both come back"
echo "$vdev" >/sys/bus/virtio/drivers/virtio_net/unbind
wait_for "$dev to go with virtio_net" rdma_gone
[ ! -e /sys/class/net/eth0 ] || fail "eth0 is still there"
[ ! -e /sys/bus/auxiliary/devices/$adev ] || fail "$adev is still there"
echo "$vdev" >/sys/bus/virtio/drivers/virtio_net/bind
wait_for "eth0 to come back" test -e /sys/class/net/eth0
ip link set eth0 up
ip addr add "$MY_IP/24" dev eth0
rdma_up
echo "virtio_net unbound and bound again: $(link)"

step "the module goes and comes back"
modprobe -r virtio_rdma
wait_for "$dev to go with the module" rdma_gone
ping -c 2 -W 2 "$PEER" >/dev/null || fail "Ethernet went with the module"
modprobe virtio_rdma
rdma_up
gid=$(v4_gid_index)
echo "reloaded: $(link)"

pair_step "ibv_rc_pingpong after the rebinds" - -- \
	ibv_rc_pingpong -d $dev -g "$gid" -n 100 -s 4096 -c -p $port $PEER
echo PASS
