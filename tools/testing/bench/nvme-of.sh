#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# NVMe over Fabrics, RDMA on virtio_rdma0 beside TCP on virtio-net (the
# peer transport), in one run: one nvmet subsystem (a 256 MiB file on tmpfs)
# exported on both transports, the same fio jobs against each connection,
# and a table of both results with their ratio.
#   nvme-of.sh            host and target in one guest: TCP to its own
#                         address runs over the loopback interface, so it
#                         does not even pay for virtio-net, while RDMA goes
#                         through the device;
#   nvme-of.sh main|peer  two guests (run.sh --peer): the target in the
#                         peer, host, fio and the table here; TCP crosses
#                         both virtio-nets and QEMU's datagram link, RDMA
#                         the backend (guest memory to guest memory);
#   nvme-of.sh main|peer wire  two hosts (run.sh --personality net --hosts 2):
#                         both transports cross the two backends' uplinks
#                         and the link between them (into
#                         nvme-of-two-wire.csv, nvme-of-two-wire-mtuN.csv on
#                         a network of MTU N).
# Results: a table on stdout and /mnt/run/nvme-of-{same,two}.csv (job,
# transport, IOPS, MiB/s), which make bench turns into tables. Numbers vary
# with the host and its accelerator (TCG here); the ratios are the point.
# It never fails on a number.
set -euo pipefail
source "$(dirname "$0")/../e2e/lib/common.sh"

ROLE=${1:-same}
MODE=${2:-}
case $MODE in "" | wire) ;; *) fail "unknown mode $MODE (wire or none)" ;; esac
ADDR=$MY_IP NQN=nqn.2026-11.org.virtio-rdma:bench
[ "$ROLE" = same ] || ADDR=10.0.2.16
RUNTIME=${VRDMA_BENCH_RUNTIME:-10}

driver_up
modprobe -a nvmet nvmet-rdma nvmet-tcp nvme-rdma nvme-tcp
if [ "$ROLE" != main ]; then
	nvmet_subsystem "$NQN" 256M
	nvmet_port 1 rdma 4420 "$NQN"
	nvmet_port 2 tcp 4421 "$NQN"
fi
if [ "$ROLE" = peer ]; then
	peer_wait_done 1800
	modprobe -r virtio_rdma
	exit 0
fi

# JOB: name rw bs iodepth
JOBS="rand4k-read-qd1 randread 4k 1
rand4k-read-qd32 randread 4k 32
rand4k-write-qd1 randwrite 4k 1
rand4k-write-qd32 randwrite 4k 32
seq128k-read read 128k 8
seq128k-write write 128k 8"

# run_jobs TRANSPORT SVCID: connects, runs every job, prints "job iops MiB/s".
run_jobs() {
	local t=$1 svcid=$2 dev="" c
	local deadline=$((SECONDS + 240))
	# Two guests: retried until the peer's target listens.
	until nvme connect -t "$t" -a "$ADDR" -s "$svcid" -n "$NQN" >/dev/null 2>/tmp/connect.log; do
		[ $SECONDS -lt $deadline ] || { cat /tmp/connect.log; fail "nvme connect -t $t"; }
		sleep 2
	done
	for c in /sys/class/nvme/nvme*; do
		[ "$(cat "$c/subsysnqn")" = "$NQN" ] && [ "$(cat "$c/transport")" = "$t" ] && dev=$(basename "$c")
	done
	[ -n "$dev" ] || fail "no $t controller"
	wait_for "/dev/${dev}n1" test -b "/dev/${dev}n1"
	while read -r name rw bs depth; do
		fio --name="$name" --filename="/dev/${dev}n1" --ioengine=libaio --direct=1 \
			--rw="$rw" --bs="$bs" --iodepth="$depth" --size=256M --time_based \
			--runtime="$RUNTIME" --ramp_time=2 --output-format=json --output=/tmp/fio.json ||
			fail "fio $name over $t"
		python3 - "$name" <<'PY'
import json, sys
job = json.load(open("/tmp/fio.json"))["jobs"][0]
side = job["read"] if job["read"]["io_bytes"] else job["write"]
print(sys.argv[1], f'{side["iops"]:.0f}', f'{side["bw_bytes"] / 2**20:.2f}')
PY
	done <<<"$JOBS"
	nvme disconnect -n "$NQN" >/dev/null
}

run_jobs rdma 4420 >/tmp/bench-rdma.txt
run_jobs tcp 4421 >/tmp/bench-tcp.txt
where="target and host in one guest" csv=/mnt/run/nvme-of-same.csv
[ "$ROLE" = same ] || { main_done; where="target in the peer guest" csv=/mnt/run/nvme-of-two.csv; }
if [ -n "$MODE" ]; then
	where="target on the other host" csv=/mnt/run/nvme-of-two-$MODE.csv
	mtu=$(cat /sys/class/net/eth0/mtu)
	[ "$mtu" = 1500 ] || where="$where, MTU $mtu" csv=/mnt/run/nvme-of-two-$MODE-mtu$mtu.csv
fi
{
	echo "job,transport,iops,mib_s"
	sed 's/ /,rdma,/; s/ /,/' /tmp/bench-rdma.txt
	sed 's/ /,tcp,/; s/ /,/' /tmp/bench-tcp.txt
} >"$csv"
echo "NVMe-oF, fio ${RUNTIME} s per job, $where, kernel $(uname -r)"
printf '%-15s %12s %10s %12s %10s %8s\n' job "rdma IOPS" "rdma MiB/s" "tcp IOPS" "tcp MiB/s" "rdma/tcp"
paste -d ' ' /tmp/bench-rdma.txt /tmp/bench-tcp.txt | while read -r name ri rb _ ti tb; do
	printf '%-15s %12s %10s %12s %10s %8s\n' "$name" "$ri" "$rb" "$ti" "$tb" \
		"$(python3 -c "print(f'{$rb / $tb:.2f}' if $tb else '-')")"
done
