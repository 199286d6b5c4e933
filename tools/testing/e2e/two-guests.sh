#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Two guests, one backend process: each guest's virtio_rdma0 is a device of
# the same vhost-user-rdma process (two sockets, a MAC each), and their NICs
# share a link of their own. Traffic between the guests goes from one
# guest's memory to the other's inside the backend. This guest (10.0.2.15)
# runs the clients; the peer (10.0.2.16, this script with "peer") the
# servers, one step after the other:
#   ibv_rc_pingpong with data checked (-c), perftest's write bandwidth
#   (whose bytes the host's operator sees moving in the backend's metrics,
#   read over HTTP by the runner), rping with verification (rdma_cm), and
#   NVMe over RDMA:
#   an nvmet target in the peer taking its receives from kernel SRQs
#   (use_srq=1), `nvme connect -t rdma` here with an I/O queue per CPU on
#   the core's pooled CQs, spread over the completion-event queues, fio
#   with crc32c verification (random 4 KiB and sequential 128 KiB writes),
#   then the peer's driver unloaded under its listening target.
# A client retries until its server listens (a refused connection reaches no
# server). The run fails if either guest fails or reports a kernel problem.
# peer: bash tools/testing/e2e/two-guests.sh peer
# modes: net (run over the virtio-net personality, whose RoCE half has
# queues in guest memory: this is the ring mode's NVMe/RDMA; to keep make
# check in its budget the ID-42 device's traffic between two guests is left
# to tenants.sh (pingpongs between two guests on one backend, in the
# virtqueue mode), its NVMe over RDMA and perftest to lossy-link.sh
# (lib/nvme-rdma.sh, lib/verbs-clients.sh), in one guest)
set -euo pipefail

source "$(dirname "$0")/lib/common.sh"

ROLE=${1:-main}
PEER=10.0.2.16 NQN=nqn.2026-11.org.virtio-rdma:two-guests NVME_PORT=4420
dev=virtio_rdma0
diagnose() {
	rdma res show qp link $dev/1 2>/dev/null | head -20
	ip neigh show dev eth0 || true
}

driver_up
gid=$(v4_gid_index)
echo "$ROLE: $MY_IP, $dev GID index $gid ($(cat /sys/class/infiniband/$dev/ports/1/gids/"$gid"))"
[ "$ROLE" = main ] && wait_for "the peer answers on the link" ping -c 1 -W 1 "$PEER"

pair_step "ibv_rc_pingpong" ibv_rc_pingpong -d $dev -g "$gid" -n 200 -s 8192 -c -p $port -- \
	ibv_rc_pingpong -d $dev -g "$gid" -n 200 -s 8192 -c -p $port $PEER
# UD, READ, atomics and perftest over rdma_cm between two guests are
# wire-hosts' and wire-rxe's (the same device, its port on a wire); here
# the path inside one backend.
# The host's operator sees it (the backend's --metrics, read over HTTP):
# 100 WRITEs of 64 KiB from this guest's device (vrdma0) into the peer's
# (vrdma1), on top of what came before.
if [ "$ROLE" = main ]; then
	sent=$(metric sent_bytes vrdma0) rcvd=$(metric rcvd_bytes vrdma1)
	[ -n "$sent" ] && [ -n "$rcvd" ] || fail "no byte counters of vrdma0 and vrdma1 in the backend's metrics"
fi
pair_step "ib_write_bw" ib_write_bw -d $dev -x "$gid" -F -n 100 -p $port -- \
	ib_write_bw -d $dev -x "$gid" -F -n 100 -p $port $PEER
if [ "$ROLE" = main ]; then
	step "the backend's metrics: the bytes moved"
	moved=$(($(metric sent_bytes vrdma0) - sent)) taken=$(($(metric rcvd_bytes vrdma1) - rcvd))
	echo "  vrdma0 sent $moved bytes, vrdma1 took $taken"
	[ "$moved" -ge $((100 * 65536)) ] && [ "$taken" -ge $((100 * 65536)) ] ||
		fail "the metrics do not show 100 WRITEs of 64 KiB moving"
fi
pair_step "rping" rping -s -a $PEER -p $port -C 100 -- rping -c -a $PEER -p $port -C 100 -V -v
if [ "$ROLE" = main ]; then
	grep -q "ping data: rdma-ping-99" /tmp/client.log || fail "rping: the client did not verify 100 pings"
fi

modprobe -a nvmet nvme-rdma
modprobe nvmet-rdma use_srq=1
if [ "$ROLE" = peer ]; then
	step "nvmet target on $MY_IP:$NVME_PORT"
	nvmet_subsystem "$NQN" 64M
	nvmet_port 1 rdma "$NVME_PORT" "$NQN"
	nvmet_srq_check 300
	peer_wait_done
	# As nvme-rdma.sh: unload under the listening target, not configfs teardown.
	modprobe -r virtio_rdma || fail "virtio_rdma does not unload under nvmet"
	echo "PASS (peer)"
	exit 0
fi

step "nvme connect -t rdma -a $PEER"
ADDR=$PEER PORT=$NVME_PORT NVME_RETRY=240 nvme_connect_rdma "$NQN"
echo "$NVME_CTRL: $(cat "/sys/class/nvme/$NVME_CTRL/address")"
nvme_host_check
ns=$NVME_NS
step "fio: 8 MiB of random 4 KiB and 8 MiB of sequential 128 KiB writes to the peer's namespace, verified (crc32c)"
fio --eta=never --name=rand4k --filename="$ns" --ioengine=libaio --direct=1 --iodepth=16 \
	--rw=randwrite --bs=4k --size=8M --verify=crc32c --do_verify=1 \
	--verify_fatal=1 --verify_state_save=0 --output=/tmp/fio.txt || { cat /tmp/fio.txt; fail "fio"; }
grep -E "WRITE:|READ:" /tmp/fio.txt
fio --eta=never --name=seq128k --filename="$ns" --ioengine=libaio --direct=1 --iodepth=8 \
	--rw=write --bs=128k --size=8M --verify=crc32c --do_verify=1 \
	--verify_fatal=1 --verify_state_save=0 --output=/tmp/fio.txt || { cat /tmp/fio.txt; fail "fio"; }
grep -E "WRITE:|READ:" /tmp/fio.txt
nvme disconnect -n "$NQN" || fail "nvme disconnect failed"
main_done

step "nothing of the clients is left"
res=$(user_qps "$dev")
[ -z "$res" ] || fail "QPs of user processes remain: $res"
echo "PASS: two guests, one backend: verbs clients, rping and NVMe/RDMA between them"
