#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# virtio_rdma0's RoCE port follows its paired netdev (eth0, found by the MAC
# in config space): RoCEv2 GIDs for eth0's addresses, pushed to the device
# with ADD_GID/DEL_GID (seen in the backend's log) as addresses come and go;
# port state following eth0's link; the binding dropped when eth0 goes away
# and made again when it comes back, also when eth0 appears after the driver.
# modes: virtqueues (the port and its GIDs involve no queue: the ring
# mode would repeat it)
set -euo pipefail

source "$(dirname "$0")/lib/common.sh"

link() { rdma link show virtio_rdma0/1 2>/dev/null | sed 's/ *$//'; }
link_is() { [ "$(link)" = "link virtio_rdma0/1 $1" ]; }
gids=/sys/class/infiniband/virtio_rdma0/ports/1/gids
types=/sys/class/infiniband/virtio_rdma0/ports/1/gid_attrs/types
# has_gid GID: the GID is in the table, as RoCE v2.
has_gid() {
	local f
	for f in "$gids"/*; do
		[ "$(cat "$f")" = "$1" ] && [ "$(cat "$types/${f##*/}")" = "RoCE v2" ] && return 0
	done 2>/dev/null
	return 1
}
no_gid() { ! has_gid "$1"; }
# The backend's log of this test only: a shared guest's earlier tests
# logged their own ADD_GIDs there.
log_start=$(stat -c %s /mnt/run/backend.log)
backend_logged() { tail -c +$((log_start + 1)) /mnt/run/backend.log | grep -q "$1"; }

net=""
for d in /sys/bus/virtio/devices/*; do
	[ "$(cat "$d/device")" = 0x0001 ] && net=$(basename "$d")
done
[ -n "$net" ] || fail "no virtio-net device"
net_unbind() { echo "$net" >/sys/bus/virtio/drivers/virtio_net/unbind; }
net_bind() {
	echo "$net" >/sys/bus/virtio/drivers/virtio_net/bind
	wait_for "eth0 to come back" test -e /sys/class/net/eth0
	ip link set eth0 up
	ip addr add 10.0.2.15/24 dev eth0
}
linklocal=fe80:0000:0000:0000:5054:00ff:fe12:3456

modprobe virtio_rdma
wait_for "port ACTIVE on eth0" link_is "state ACTIVE physical_state LINK_UP netdev eth0"
echo "rdma link show: $(link)"
wait_for "GID of 10.0.2.15" has_gid "$(v4_gid_of 10.0.2.15)"
wait_for "link-local GID" has_gid $linklocal
echo "GIDs: $(cat "$gids"/* | grep -v '^0000:0000:0000:0000:0000:0000:0000:0000$' | tr '\n' ' ')"
backend_logged "ADD_GID port 1 index [0-9]* gid ::ffff:10.0.2.15 type 2" || fail "backend did not log the ADD_GID of 10.0.2.15"

# Addresses come and go.
ip addr add 10.0.3.5/24 dev eth0
wait_for "GID of a new address" has_gid "$(v4_gid_of 10.0.3.5)"
wait_for "the backend's ADD_GID" backend_logged "ADD_GID port 1 index [0-9]* gid ::ffff:10.0.3.5 type 2"
ip addr del 10.0.3.5/24 dev eth0
wait_for "GID of a removed address to go" no_gid "$(v4_gid_of 10.0.3.5)"
wait_for "the backend's DEL_GID" backend_logged "DEL_GID port 1 index [0-9]* gid ::ffff:10.0.3.5"
echo "address added and removed: ADD_GID/DEL_GID reached the device"

# The port follows eth0's link.
ip link set eth0 down
wait_for "port DOWN with eth0" link_is "state DOWN physical_state DISABLED netdev eth0"
ip link set eth0 up
wait_for "port ACTIVE again" link_is "state ACTIVE physical_state LINK_UP netdev eth0"
echo "link down/up followed"

# eth0 goes away and comes back.
net_unbind
wait_for "port unbound from the removed netdev" link_is "state DOWN physical_state DISABLED"
net_bind
wait_for "port bound to eth0 again" link_is "state ACTIVE physical_state LINK_UP netdev eth0"
wait_for "GID of 10.0.2.15 again" has_gid "$(v4_gid_of 10.0.2.15)"
echo "netdev removed and re-added: port rebound"

# eth0 appears after the driver.
rmmod virtio_rdma
net_unbind
modprobe virtio_rdma
wait_for "port without netdev" link_is "state DOWN physical_state DISABLED"
net_bind
wait_for "port bound to the late eth0" link_is "state ACTIVE physical_state LINK_UP netdev eth0"
wait_for "GID of 10.0.2.15 on the late eth0" has_gid "$(v4_gid_of 10.0.2.15)"
echo "netdev registered after the driver: port bound"

rmmod virtio_rdma
echo "ok"
