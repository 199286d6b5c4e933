#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# NVMe over Fabrics (RDMA) on virtio_rdma0, host and target in one guest:
# an nvmet target with a file-backed namespace listening on eth0's address,
# `nvme connect -t rdma` to it (rdma_cm over the device's GSI QP, RC queues,
# fast registration, SEND_WITH_INV, RDMA READ/WRITE by the target), fio with
# crc32c verification (random 4 KiB and sequential 128 KiB writes, each read
# back and checked), `rdma res show` listing the host's QPs, CQs, MRs and
# PDs, disconnect, then the driver unloaded under the still listening
# target. The target asks for shared receive queues (nvmet-rdma use_srq=1):
# with queues in guest memory its queues take their receives from one SRQ
# per completion vector (kernel SRQs); without, the device has none and
# nvmet falls back to a receive queue per QP. The runner fails the test on
# any kernel WARN/lockdep/KASAN report or kmemleak leak. FIO_RAND and
# FIO_SEQ set fio's sizes (lossy-link.sh runs less over its lossy link).
# guest: own (nvmet stays configured and pinned: see the end)
# modes: net (the RoCE half of the net personality always has its queues
# in guest memory: nvme-rdma@net runs the ring mode's kernel SRQs too, so a
# separate ring-mode run would only repeat it; lossy-link.sh runs this test
# with virtqueues, over a link that loses packets)
set -euo pipefail

ADDR=10.0.2.15 PORT=4420 NQN=nqn.2026-11.org.virtio-rdma:e2e
source "$(dirname "$0")/lib/common.sh"
diagnose() {
	rdma res show qp 2>/dev/null | head -20
	tail -20 /mnt/run/backend.log
}

step "load the driver and the NVMe-oF modules"
driver_up
# ib_mad and rdma_cm attach only to devices with every kernel verb.
[ -e /sys/class/infiniband_mad/umad0 ] || fail "ib_mad did not attach to virtio_rdma0 (no umad0)"
grep -q virtio_rdma0 /sys/class/infiniband_mad/umad0/ibdev || fail "umad0 is not virtio_rdma0's"
modprobe -a nvmet nvme-rdma
modprobe nvmet-rdma use_srq=1
[ ! -d /sys/module/rdma_rxe ] || fail "rdma_rxe is loaded: the test must use virtio_rdma0 alone"

step "nvmet target: file-backed namespace on tmpfs, rdma port $ADDR:$PORT"
nvmet_subsystem "$NQN" 160M
nvmet_port 1 rdma "$PORT" "$NQN"

step "nvme connect -t rdma"
nvme_connect_rdma "$NQN"
dev=$NVME_CTRL ns=$NVME_NS
[ "$(cat "/sys/class/nvme/$dev/transport")" = rdma ] || fail "$dev is not an RDMA controller"
echo "$dev: $(cat "/sys/class/nvme/$dev/address"), queues: $(ls -d /sys/class/nvme/$dev/* | wc -l) attrs"
# The controller's queues are RC QPs of virtio_rdma0 (host and target side).
nqp=$(res_count "type RC" qp link virtio_rdma0/1)
echo "RC QPs on virtio_rdma0: $nqp"
[ "$nqp" -ge 4 ] || fail "expected the NVMe queues as RC QPs on virtio_rdma0, found $nqp"
# nvme-rdma opens an I/O queue per CPU; each takes a CQ of the core's pool
# (ib_core's), which has one per completion vector and CPU: with queues in
# guest memory their events come on as many completion-event queues.
vectors=$(dmesg | sed -n 's/.*virtio_rdma.*queues in guest memory:.* num_comp_vqs \([0-9]*\).*/\1/p' | tail -1)
ioq=$(dmesg | sed -n "s/.*nvme $dev: creating \([0-9]*\) I\/O queues.*/\1/p" | tail -1)
echo "I/O queues of $dev: ${ioq:-?} (CPUs $(nproc), completion vectors ${vectors:-1})"
[ "${ioq:-0}" = "$(nproc)" ] || fail "$dev has ${ioq:-no} I/O queues for $(nproc) CPUs"
if [ -n "$vectors" ]; then
	want=$((vectors < $(nproc) ? vectors : $(nproc)))
	# Only CQs that name their queue count (a CQ without the attribute is none).
	used=$(rdma -j -dd res show cq | python3 -c '
import json, sys
print(len({c["drv_comp_vq"] for c in json.load(sys.stdin)
           if c.get("ifname") == "virtio_rdma0" and c.get("comm") == "ib_core"
           and "drv_comp_vq" in c}))')
	echo "completion-event queues of the pooled CQs: $used"
	[ "$used" = "$want" ] || fail "the pooled CQs use $used completion-event queues, not $want"
fi
# The core's resource tracking lists what the NVMe ULPs created on the device:
# their PDs and the host's fast-registration MRs under the ULPs' names, the
# RC QPs they made through rdma_cm, and the core's pooled CQs serving them
# (besides ib_mad's).
while read -r res filter obj comm min; do
	n=$(res_count "comm \[$comm\]" "$res" "$filter" "$obj")
	echo "rdma res show $res: $n of [$comm]"
	[ "$n" -ge "$min" ] || { rdma res show "$res" "$filter" "$obj" || true; fail "rdma res show $res: fewer than $min of [$comm]"; }
done <<EOF
qp link virtio_rdma0/1 rdma_cm 4
cq dev virtio_rdma0 ib_core 2
mr dev virtio_rdma0 nvme_rdma 2
pd dev virtio_rdma0 nvme_rdma 1
pd dev virtio_rdma0 nvmet_rdma 1
EOF
max_srq=$(ibv_devinfo -v -d virtio_rdma0 | sed -n 's/^[[:space:]]*max_srq:[[:space:]]*\([0-9]*\).*/\1/p')
srqs=$(res_count "comm \[nvmet_rdma\]" srq dev virtio_rdma0)
echo "max_srq ${max_srq:-?}: nvmet's SRQs on virtio_rdma0: $srqs"
if [ "${max_srq:-0}" -gt 0 ]; then
	[ "$srqs" -ge 1 ] || { rdma res show srq || true; fail "nvmet-rdma made no SRQ (use_srq=1)"; }
else
	[ "$srqs" = 0 ] || fail "SRQs listed on a device without them"
fi

step "fio: ${FIO_RAND:-32M} of random 4 KiB writes, verified (crc32c)"
fio --eta=never --name=rand4k --filename="$ns" --ioengine=libaio --direct=1 --iodepth=16 \
	--rw=randwrite --bs=4k --size=${FIO_RAND:-32M} --verify=crc32c --do_verify=1 \
	--verify_fatal=1 --verify_state_save=0 --output=/tmp/fio-rand.txt || { cat /tmp/fio-rand.txt; fail "fio random 4k"; }
grep -E "WRITE:|READ:" /tmp/fio-rand.txt
step "fio: ${FIO_SEQ:-128M} of sequential 128 KiB writes, verified (crc32c)"
fio --eta=never --name=seq128k --filename="$ns" --ioengine=libaio --direct=1 --iodepth=8 \
	--rw=write --bs=128k --size=${FIO_SEQ:-128M} --verify=crc32c --do_verify=1 \
	--verify_fatal=1 --verify_state_save=0 --output=/tmp/fio-seq.txt || { cat /tmp/fio-seq.txt; fail "fio sequential 128k"; }
grep -E "WRITE:|READ:" /tmp/fio-seq.txt

step "disconnect, then remove the device under the listening target"
nvme disconnect -n "$NQN" || fail "nvme disconnect failed"
modprobe -r nvme-rdma
left=$(res_count "type RC" qp link virtio_rdma0/1)
[ "$left" = 0 ] || fail "$left RC QPs left on virtio_rdma0 after disconnect"
# The target still listens on virtio_rdma0: unloading the driver unregisters
# the device under a live rdma_cm listener (nvmet_rdma's device removal).
# The nvmet configfs teardown is left out on purpose: removing the port
# takes nvmet_config_sem and then rdma_cm's handler_mutex, while an I/O
# queue's Connect that arrives before the CM's RTU is executed inside
# rdma_cm's handler (handler_mutex, then nvmet_config_sem) -- lockdep reports
# that inversion in nvmet-rdma whichever RDMA device carries it, whenever
# the data path beats the CM's workqueues, as this device's does. So nvmet
# stays pinned, and the test has a guest of its own (the header says so).
modprobe -r virtio_rdma || fail "virtio_rdma does not unload under nvmet"
[ ! -e /sys/class/infiniband/virtio_rdma0 ] || fail "virtio_rdma0 still registered"
echo "PASS: NVMe/RDMA over virtio_rdma0: connect, fio verify (4k random, 128k sequential), disconnect, device removed under the target"
