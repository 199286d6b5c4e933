#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# make bench: every benchmark on the release kernel, then the tables and
# plots of the run (report.py) in one results folder.
#
#   all.sh [OUT]     OUT: the results folder (default bench-results/ in the
#                    checkout; its CSV and PNG files are replaced)
#
# BENCH_ONLY=PATTERN (make bench BENCH_ONLY=...) runs only the stages whose
# names match the extended regex PATTERN ("backend" is the cargo bench),
# e.g. BENCH_ONLY="two hosts": their CSV files replace those of the last
# run, the others stay, and the tables and plots are drawn from them all
# (run.txt says which run wrote which files; each plot's title names its
# own run).
#
# In order: the backend alone (cargo bench: device to device beside memcpy,
# and the fairness bench), perftest on virtio_rdma0 beside rxe and NVMe-oF
# over RDMA beside TCP in one guest, perftest again with the device's queues
# in guest memory (the backend's --rings), perftest and NVMe-oF between two
# guests, perftest between two guests of the net personality (virtio_rdma0
# on the RoCE queues of each guest's one virtio-net function, rxe on its
# Ethernet: the question "why not rxe over virtio-net?" on one device),
# perftest and NVMe-oF between two hosts (two backends, each guest's port on
# an uplink, one link between them: virtio_rdma0 beside rxe0 over the same
# link, RDMA beside TCP), at MTU 1500 and with jumbo frames (9000, as an
# operator sets a storage network; run.sh --mtu), and
# a guest's bandwidth beside another guest's flood, on shared CPUs and with
# CPUs of its own (run.sh --own-cpus). Each guest is fresh. A
# benchmark that cannot run fails the run; a number never does.
source "$(dirname "$0")/../../build/lib.sh"

out=$(realpath -m "${1:-$TOP/bench-results}")
case $out in "$TOP"/*) ;; *) die "the results folder must be inside the checkout ($TOP)" ;; esac
mkdir -p "$out"
only=${BENCH_ONLY:-}
# picked NAME: whether the stage NAME runs.
picked() { [ -z "$only" ] || [[ $1 =~ $only ]]; }
if [ -z "$only" ]; then
	rm -f "$out"/*.csv "$out"/*.png "$out"/results.md "$out"/run.txt
else
	rm -f "$out"/*.png "$out"/results.md
fi
export KERNEL=release

accel=TCG # as guest.sh decides
if [ -e /sys/module/kvm_intel ] || [ -e /sys/module/kvm_amd ]; then accel=KVM; fi
{
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), guest kernel $(make -s -C "$(kernel_dir)/build" kernelrelease 2>/dev/null || echo '?') (release config), $accel guests of 2 vCPUs"
	echo "host: $(nproc) cores ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), $(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM, Linux $(uname -r)"
	echo "checkout: $(git -C "$TOP" describe --always --dirty 2>/dev/null || echo '?')"
} >>"$out/run.txt"

if picked backend; then
	log "bench: the backend alone (cargo bench)"
	in_sysroot env VRDMA_BENCH_CSV="$out/backend.csv" cargo bench --locked \
		--manifest-path "$TOP/tools/vhost-user-rdma/Cargo.toml" \
		--target-dir "$VRDMA_CACHE/cargo-target" -j1 || die "cargo bench failed"
fi

# guest NAME [run.sh options] -- CMD: one benchmark run; its CSV files land
# in $out.
guest() {
	local name=$1 tmp
	shift
	picked "$name" || return 0
	tmp=$(mktemp -d /tmp/vrdma-bench.XXXXXX)
	log "bench: $name"
	"$TOP/tools/testing/vm/run.sh" --out "$tmp" "$@" || { rm -rf "$tmp"; die "bench $name failed"; }
	cp "$tmp"/*.csv "$out"/ 2>/dev/null || true
	# A partial run says which files are its own (report.py: plot titles).
	[ -z "$only" ] || (cd "$tmp" && echo "  $name wrote:" *.csv) >>"$out/run.txt"
	rm -rf "$tmp"
}
guest "perftest, one guest" --timeout 2400 -- bash tools/testing/bench/perftest.sh
guest "NVMe-oF, one guest" --timeout 1800 -- bash tools/testing/bench/nvme-of.sh
guest "perftest, one guest, queues in guest memory" --timeout 2400 --backend-args "--rings" \
	-- bash tools/testing/bench/perftest.sh same rings
guest "perftest, two guests" --timeout 3000 --peer "bash tools/testing/bench/perftest.sh peer" \
	-- bash tools/testing/bench/perftest.sh main
guest "perftest, two guests of the net personality" --timeout 3000 --personality net \
	--peer "bash tools/testing/bench/perftest.sh peer net" -- bash tools/testing/bench/perftest.sh main net
guest "perftest, two hosts" --timeout 3000 --personality net --hosts 2 \
	--peer "bash tools/testing/bench/perftest.sh peer wire" -- bash tools/testing/bench/perftest.sh main wire
guest "NVMe-oF, two hosts" --timeout 1800 --personality net --hosts 2 \
	--peer "bash tools/testing/bench/nvme-of.sh peer wire" -- bash tools/testing/bench/nvme-of.sh main wire
guest "perftest, two hosts, jumbo frames" --timeout 3000 --personality net --hosts 2 --mtu 9000 \
	--peer "bash tools/testing/bench/perftest.sh peer wire" -- bash tools/testing/bench/perftest.sh main wire
guest "NVMe-oF, two hosts, jumbo frames" --timeout 1800 --personality net --hosts 2 --mtu 9000 \
	--peer "bash tools/testing/bench/nvme-of.sh peer wire" -- bash tools/testing/bench/nvme-of.sh main wire
guest "NVMe-oF, two guests" --timeout 1800 --peer "bash tools/testing/bench/nvme-of.sh peer" \
	-- bash tools/testing/bench/nvme-of.sh main
guest "a tenant beside a flood" --timeout 1800 --peer "bash tools/testing/bench/flood.sh peer" \
	-- bash tools/testing/bench/flood.sh main
guest "a tenant beside a flood, each on CPUs of its own" --timeout 1800 --own-cpus \
	--peer "bash tools/testing/bench/flood.sh peer" -- bash tools/testing/bench/flood.sh main flood-own-cpus

command -v gnuplot >/dev/null || die "gnuplot is missing on the host: make deps installs it"
python3 "$TOP/tools/testing/bench/report.py" "$out"
log "bench: results in $out (results.md, *.csv, *.png)"
