#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Queues in guest memory (VIRTIO_RDMA_F_RINGS, the backend's --rings): user
# QPs and CQs whose rings the provider allocates and the device reads and
# writes. The device reports its ring QPs and CQs in max_qp/max_cq;
# rdma-core's clients run over rings with their data checked (polling, and
# ibv_rc_pingpong -e sleeping on completion events, i.e. arming in the CQ's
# record and the device's completion-event queue); a process that makes
# CQs and QPs on rings of its own and corrupts them every way it can
# (lib/uverbs_hostile_rings.c: producers too far ahead or moving backwards,
# forbidden and random elements, scribbled flags, a bogus CQ consumer, a
# garbage arm word, random CQ slots) gets errnos, error completions and
# async events on those QPs and CQs only, while another process's
# ibv_rc_pingpong pairs keep passing their data check beside it
# (rings-doorbells.sh counts the doorbells); a polling ib_write_lat takes
# almost no interrupt of virtio_rdma0's; rping (rdma_cm, its MADs on the
# kernel's QP 1) keeps working beside them; 2048 ring QPs and CQs are made
# and destroyed in one process, and ib_write_bw -q 256 carries traffic on
# 256 QPs at once.
# backend-args: --rings --poll-us 200
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

driver_up
dev=virtio_rdma0 gid=$(v4_gid_index)

step "the ring QPs and CQs are counted"
max_qp=$(ibv_devinfo -v -d $dev | awk '$1 == "max_qp:" { print $2 }')
max_cq=$(ibv_devinfo -v -d $dev | awk '$1 == "max_cq:" { print $2 }')
echo "  max_qp $max_qp max_cq $max_cq"
[ "$max_qp" -ge 16384 ] && [ "$max_cq" -ge 16384 ] || fail "max_qp $max_qp, max_cq $max_cq"

pair "ibv_rc_pingpong (polling)" ibv_rc_pingpong -d $dev -g $gid -n 200 -c -p $port -- \
	ibv_rc_pingpong -d $dev -g $gid -n 200 -c -p $port localhost
pair "ibv_rc_pingpong -e (completion events)" ibv_rc_pingpong -d $dev -g $gid -n 200 -c -e -p $port -- \
	ibv_rc_pingpong -d $dev -g $gid -n 200 -c -e -p $port localhost
pair "ibv_ud_pingpong" ibv_ud_pingpong -d $dev -g $gid -n 100 -c -s 1024 -p $port -- \
	ibv_ud_pingpong -d $dev -g $gid -n 100 -c -s 1024 -p $port localhost
step "a hostile process on rings of its own, another process's QPs beside it"
# The bystander: ibv_rc_pingpong pairs (data checked), one after another
# until the hostile program has ended. Its first pair ends before that
# program starts (the loop works), the next ones run while it does.
bystander() {
	local p=19000 n=0 s
	while :; do
		timeout 120 ibv_rc_pingpong -d $dev -g $gid -n 500 -c -p $p >/tmp/bystander-server.log 2>&1 &
		s=$!
		# Until it listens (at most 30 s: the hostile process loads the guest).
		for _ in $(seq 300); do
			ss -Hltn "sport = :$p" 2>/dev/null | grep -q . && break
			kill -0 $s 2>/dev/null || break
			sleep 0.1
		done
		timeout 120 ibv_rc_pingpong -d $dev -g $gid -n 500 -c -p $p localhost \
			>/tmp/bystander-client.log 2>&1 || { wait $s || true; return 1; }
		wait $s || return 1
		n=$((n + 1))
		echo $n >/tmp/bystander.count
		[ ! -e /tmp/hostile.done ] || return 0
		p=$((p + 1))
	done
}
rm -f /tmp/hostile.done /tmp/bystander.count
bystander &
bpid=$!
for _ in $(seq 600); do
	[ -s /tmp/bystander.count ] || ! kill -0 $bpid 2>/dev/null && break
	sleep 0.2
done
[ -s /tmp/bystander.count ] || fail "the bystander's first ibv_rc_pingpong pair did not end"
hrc=0
/mnt/run/bin/uverbs_hostile_rings || hrc=$?
touch /tmp/hostile.done
brc=0
wait $bpid || brc=$?
[ $hrc = 0 ] || fail "hostile rings"
if [ $brc != 0 ]; then
	sed 's/^/  bystander client: /' /tmp/bystander-client.log | tail -20
	sed 's/^/  bystander server: /' /tmp/bystander-server.log | tail -20
	fail "the bystander's ibv_rc_pingpong failed beside the hostile process"
fi
n=$(cat /tmp/bystander.count)
[ "$n" -ge 2 ] || fail "only $n bystander pair(s): none ran beside the hostile process"
echo "  the bystander: $n ibv_rc_pingpong pairs of 500 iterations, data checked, all passed"

# perftest's bandwidth tools on rings are rdma-core-suite@rings' (verbs)
# and wire-rxe's (the net personality's rings), not repeated here.

# Interrupts of virtio_rdma0's own vectors (the guest's other virtio
# devices, 9p above all, interrupt while the tools load); without a CQ
# armed, none should come per round trip.
step "a polling ib_write_lat takes no interrupt per completion"
vdev=$(basename "$(readlink -f /sys/class/infiniband/$dev/device)")
irqs() { grep -E "$vdev-|$vdev\$" /proc/interrupts || true; }
irqs >/tmp/irq.before
n=2000
PAIR_QUIET=1 pair "ib_write_lat" ib_write_lat -d $dev -x $gid -F -n $n -p $port -- \
	ib_write_lat -d $dev -x $gid -F -n $n -p $port localhost
grep -E "^ *[0-9]+ +[0-9]+" /tmp/client.log | tail -1 | sed 's/^/  /'
irqs >/tmp/irq.after
# Per vector: the sum over CPUs after minus before.
delta=$(paste /tmp/irq.before /tmp/irq.after |
	awk '{ n = NF / 2; b = 0; a = 0; for (i = 2; i <= n && $i ~ /^[0-9]+$/; i++) b += $i;
		for (i = n + 2; i <= NF && $i ~ /^[0-9]+$/; i++) a += $i;
		if (a > b) printf "    %s: %d\n", $n, a - b > "/dev/stderr"; s += a - b } END { print s + 0 }')
echo "  interrupts of $vdev during $n round trips: $delta"
[ "$delta" -lt $((n / 4)) ] || fail "$delta interrupts for $n round trips"

step "2048 ring QPs and CQs in one process, created and destroyed"
python3 tools/testing/e2e/lib/rings_scale.py 2048 || fail "2048 QPs and CQs"
opts="-d $dev -x $gid -F -q 256 -t 4 -s 4096 -n 20"
pair "ib_write_bw -q 256 (256 RC QPs carrying traffic at once)" ib_write_bw $opts -p $port -- \
	ib_write_bw $opts -p $port localhost

pair "rping (rdma_cm; its MADs on the kernel's QP 1)" rping -s -a $MY_IP -p $port -C 50 -- \
	rping -c -a $MY_IP -p $port -C 50 -V -v
