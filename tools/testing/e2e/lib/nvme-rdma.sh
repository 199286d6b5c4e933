#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# NVMe over Fabrics (RDMA) on virtio_rdma0, host and target in one guest
# (run by lossy-link.sh, with virtqueues, over a link that loses packets):
# an nvmet target with a file-backed namespace listening on eth0's address,
# `nvme connect -t rdma` to it (rdma_cm over the device's GSI QP, RC queues,
# fast registration, SEND_WITH_INV, RDMA READ/WRITE by the target), fio with
# crc32c verification (random 4 KiB and sequential 128 KiB writes, each read
# back and checked), `rdma res show` listing the host's and the target's
# QPs, CQs, MRs and PDs, disconnect, then the driver unloaded under the
# still listening target. The target asks for shared receive queues
# (nvmet-rdma use_srq=1); with virtqueues the device has none and nvmet
# falls back to a receive queue per QP. The ring mode's NVMe/RDMA (kernel
# SRQs, completion-event queues) is two-guests@net's, between two guests.
# The runner fails the test on any kernel WARN/lockdep/KASAN report or
# kmemleak leak. FIO_RAND and FIO_SEQ set fio's sizes. It leaves nvmet
# configured and pinned (see the end): its caller has a guest of its own.
set -euo pipefail

ADDR=10.0.2.15 PORT=4420 NQN=nqn.2026-11.org.virtio-rdma:e2e
source "$(dirname "$0")/common.sh"
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
ns=$NVME_NS
nvme_host_check
n=$(res_count "comm \[nvmet_rdma\]" pd dev virtio_rdma0)
echo "rdma res show pd: $n of [nvmet_rdma]"
[ "$n" -ge 1 ] || fail "rdma res show pd: no PD of [nvmet_rdma]"
nvmet_srq_check

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
