#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Verbs from userspace, virtio_rdma0 beside rxe (soft RoCE, the peer: the
# kernel's RDMA over the guest's virtio-net eth0), in one run: perftest's
# WRITE/READ/SEND bandwidth and WRITE/SEND latency for every power of two
# from 2 bytes to 1 MiB, and WRITE bandwidth over 4 QPs (-q 4).
#   perftest.sh           server and client in one guest on the same device,
#                         addressed by the RoCEv2 GID of 10.0.2.15; rxe's
#                         traffic to its own address goes over loopback;
#                         then what one 2-byte WRITE round trip costs the
#                         guest: interrupts and system calls per message;
#   perftest.sh main|peer two guests (run.sh --peer): servers in the peer,
#                         clients and the results here; virtio_rdma0 traffic
#                         crosses the backend from one guest's memory to the
#                         other's, rxe's crosses both virtio-nets and QEMU's
#                         datagram link between them;
#   perftest.sh same rings  one guest whose backend runs with --rings (queues
#                         in guest memory): the same tests, into
#                         perftest-same-rings.csv and cost-rings.csv;
#   perftest.sh main|peer net  two guests of the net personality (run.sh
#                         --personality net): one virtio-net function each,
#                         virtio_rdma0 on its RoCE queues beside rxe on its
#                         Ethernet (eth0), the backend's switch between
#                         them: into perftest-two-net.csv.
#   perftest.sh main|peer wire  two hosts (run.sh --personality net --hosts 2):
#                         each guest's backend in a network namespace of
#                         its own, their uplinks on one bridge. rxe0 first
#                         (before virtio_rdma is loaded its port takes no
#                         RoCE frames, so they reach eth0), then
#                         virtio_rdma0, over the same link: into
#                         perftest-two-wire.csv (perftest-two-wire-mtuN.csv
#                         on a network of MTU N, run.sh --mtu).
# Results: a table on stdout and /mnt/run/perftest-{same,two}.csv (test,
# bytes, device, value, unit), which make bench turns into tables and
# plots. VRDMA_BENCH_SIZES overrides the sizes. Numbers vary with the host
# and its accelerator (TCG here); the ratios are the point. It never fails
# on a number.
set -euo pipefail
source "$(dirname "$0")/../e2e/lib/common.sh"

ROLE=${1:-same}
MODE=${2:-virtqueues}
server_addr=$MY_IP
[ "$ROLE" = same ] || server_addr=10.0.2.16
SIZES=${VRDMA_BENCH_SIZES:-$(for i in $(seq 1 20); do printf '%s ' $((1 << i)); done)}
where=same
[ "$ROLE" = same ] || where=two
suffix=
case $MODE in
virtqueues) ;;
rings) suffix=-rings ;;
net) suffix=-net ;;
wire)
	# A jumbo network (run.sh --mtu) has results of its own.
	suffix=-wire
	mtu=$(cat /sys/class/net/eth0/mtu)
	[ "$mtu" = 1500 ] || suffix=-wire-mtu$mtu
	;;
*) fail "unknown mode $MODE (virtqueues, rings, net or wire)" ;;
esac
[ "$MODE" != wire ] || [ "$ROLE" != same ] || fail "the mode wire needs two hosts (main or peer)"
csv=/mnt/run/perftest-$where$suffix.csv

# virtio_up: virtio_rdma0 up, and presented as the mode says.
virtio_up() {
	driver_up
	# The device offers queues in guest memory only when its backend was
	# told to. (A file, not a pipe into grep -q, which would end dmesg
	# early under pipefail; and no process substitution: the guest has no
	# /dev/fd.)
	dmesg >/tmp/dmesg.txt
	if grep -q "virtio_rdma.*queues in guest memory" /tmp/dmesg.txt; then
		[ "$MODE" != virtqueues ] || fail "the device has queues in guest memory: run with the mode rings"
	else
		[ "$MODE" = virtqueues ] || fail "the device has no queues in guest memory (backend without --rings)"
	fi
	# The net personality's RDMA device is its virtio-net function's RoCE part.
	local parent
	parent=$(basename "$(readlink -f /sys/class/infiniband/virtio_rdma0/device)")
	case $MODE,$parent in
	net,virtio_net.roce.* | wire,virtio_net.roce.* | virtqueues,virtio[0-9]* | rings,virtio[0-9]*) ;;
	*) fail "virtio_rdma0 hangs off $parent, not what the mode $MODE presents" ;;
	esac
}
# On the wire rxe0 runs alone first: once virtio_rdma0 is up, RoCE frames
# to this port are the device's.
[ "$MODE" = wire ] || virtio_up
modprobe rdma_rxe
rdma link add rxe0 type rxe netdev eth0
wait_for "rxe0's RoCEv2 GID of $MY_IP" v4_gid rxe0
[ "$ROLE" != main ] || wait_for "the peer answers on the link" ping -c 1 -W 1 "$server_addr"

# iters TEST SIZE: bandwidth tests move about 64 MiB (100..1000 messages),
# latency tests 8 MiB (50..500 round trips), so that large messages do
# not take minutes over rxe.
iters() {
	local budget=$((64 << 20)) lo=100 hi=1000
	case $1 in *_lat) budget=$((8 << 20)) lo=50 hi=500 ;; esac
	local n=$((budget / $2))
	[ $n -ge $lo ] || n=$lo
	[ $n -le $hi ] || n=$hi
	echo $n
}

# run DEV TEST SIZE [OPTS...]: runs one test and sets $result to the result
# of the line of SIZE (empty in the peer): latency tests' average (usec,
# column 6); bandwidth from the message rate (Mpps, column 5: six decimals,
# where the MiB/s column has two, too few for small messages). Not in a
# subshell: $port must move on.
run() {
	local dev=$1 t=$2 s=$3
	shift 3
	local opts="-d $dev -x $(v4_gid_index "$dev") -F -n $(iters "$t" "$s") -s $s $*"
	if [ "$ROLE" = same ]; then
		PAIR_QUIET=1 pair "$t on $dev" "$t" $opts -p "$port" -- "$t" $opts -p "$port" "$server_addr"
	else
		PAIR_QUIET=1 pair_step "$t on $dev" "$t" $opts -p "$port" -- "$t" $opts -p "$port" "$server_addr"
	fi
	result=
	[ "$ROLE" = peer ] || case $t in
	*_lat) result=$(awk -v s="$s" '$1 == s { print $6; exit }' /tmp/client.log) ;;
	*) result=$(awk -v s="$s" '$1 == s { printf "%.3f\n", $5 * 1e6 * s / 1048576; exit }' /tmp/client.log) ;;
	esac
	[ "$ROLE" = peer ] || [ -n "$result" ] || fail "$t on $dev: no result for $s bytes"
}

# row TEST SIZE OPTS: both devices, one table row and two CSV lines.
row() {
	local t=$1 s=$2 name=$1 unit=MiB/s
	shift 2
	[ $# -eq 0 ] || name="$t$(echo "$*" | tr -d ' ')"
	case $t in *_lat) unit=usec ;; esac
	local v r ratio
	if [ "$PASS" = rxe ]; then
		run rxe0 "$t" "$s" "$@"
		rxe_result["$name $s"]=$result
		return 0
	fi
	run virtio_rdma0 "$t" "$s" "$@"
	v=$result
	if [ "$PASS" = virtio ]; then
		r=${rxe_result["$name $s"]:-}
	else
		run rxe0 "$t" "$s" "$@"
		r=$result
	fi
	[ "$ROLE" != peer ] || return 0
	# Above 1: virtio_rdma0 is faster (for latency, rxe's time over ours).
	case $t in
	*_lat) ratio=$(awk -v a="$r" -v b="$v" 'BEGIN { printf "%.2f", a / b }') ;;
	*) ratio=$(awk -v a="$v" -v b="$r" 'BEGIN { printf "%.2f", a / b }') ;;
	esac
	printf '%-16s %8s %14s %10s %12s\n' "$name" "$s" "$v" "$r" "$ratio"
	printf '%s,%s,virtio_rdma0,%s,%s\n%s,%s,rxe0,%s,%s\n' \
		"$name" "$s" "$v" "$unit" "$name" "$s" "$r" "$unit" >>"$csv"
}

if [ "$ROLE" != peer ]; then
	echo "test,bytes,device,value,unit" >"$csv"
	echo "perftest, $([ "$ROLE" = same ] && echo "one guest" || echo "two guests (servers in the peer)"), virtio_rdma0 on $MODE, kernel $(uname -r); bandwidth MiB/s, latency usec"
	printf '%-16s %8s %14s %10s %12s\n' test bytes virtio_rdma0 rxe0 "virtio/rxe"
fi
# rows: every test, every size. PASS: both devices a row (""), or on the
# wire rxe0's whole pass first ("rxe"), then virtio_rdma0's ("virtio"),
# whose rows take rxe0's results of the first.
rows() {
	local t s
	for t in ib_write_bw ib_read_bw ib_send_bw ib_write_lat ib_send_lat; do
		for s in $SIZES; do row "$t" "$s"; done
	done
	for s in 4096 65536; do row ib_write_bw "$s" -q 4; done
}
declare -A rxe_result
if [ "$MODE" = wire ]; then
	PASS=rxe rows
	rdma link delete rxe0
	virtio_up
	PASS=virtio rows
else
	PASS="" rows
fi
[ "$ROLE" = peer ] ||
	echo "(virtio/rxe: above 1 means virtio_rdma0 is faster; for latency it is rxe's time over ours)"

# cost DEV: interrupts (all of the device's vectors; for rxe those of
# virtio-net) and client system calls per 2-byte ib_write_lat round trip.
cost() {
	local dev=$1 n=2000 irqs before after calls
	case $dev in
	virtio_rdma0) irqs=$(basename "$(readlink -f /sys/class/infiniband/virtio_rdma0/device)") ;;
	*) irqs=$(basename "$(readlink -f /sys/class/net/eth0/device)") ;;
	esac
	# The first line names the CPUs; each vector's counts follow its number.
	sum() { awk -v d="$irqs-" 'NR == 1 { cpus = NF } $NF ~ "^"d { for (i = 2; i <= cpus + 1; i++) s += $i } END { print s + 0 }' /proc/interrupts; }
	local opts="-d $dev -x $(v4_gid_index "$dev") -F -n $n -s 2"
	before=$(sum)
	PAIR_QUIET=1 pair "cost on $dev" ib_write_lat $opts -p "$port" -- \
		strace -f -c -o /tmp/strace.txt ib_write_lat $opts -p "$port" "$server_addr"
	after=$(sum)
	# strace -c's last line: % time, seconds, usecs/call, calls, [errors,] total.
	calls=$(awk '$NF == "total" { print $4 }' /tmp/strace.txt)
	local irq_per sys_per
	irq_per=$(awk -v a="$after" -v b="$before" -v n="$n" 'BEGIN { printf "%.3f", (a - b) / n }')
	sys_per=$(awk -v c="$calls" -v n="$n" 'BEGIN { printf "%.3f", c / n }')
	printf '%-14s %18s %22s\n' "$dev" "$irq_per" "$sys_per"
	echo "$dev,$irq_per,$sys_per" >>/mnt/run/cost$suffix.csv
}
if [ "$ROLE" = same ]; then
	echo "what one 2-byte ib_write_lat round trip costs (both sides in this guest; system calls: the client's)"
	printf '%-14s %18s %22s\n' device "interrupts/message" "system calls/message"
	echo "device,interrupts_per_msg,syscalls_per_msg" >/mnt/run/cost$suffix.csv
	cost virtio_rdma0
	cost rxe0
fi
[ "$MODE" = wire ] || rdma link delete rxe0
