#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Per-QP counters (counter sets: ALLOC/DEALLOC/BIND_COUNTER_SET): a QP
# bound to a counter (rdma statistic qp bind) counts what it does there
# instead of in the port's own counters. The core shows the port (rdma
# statistic and sysfs hw_counters alike) as its own counters plus every
# counter's, so a device that counted a bound QP in both would show it
# twice: bound, the writer's bytes move its counter and the port's total by
# exactly what it wrote; a second QP in the same counter adds what it
# received, once; unbound, the counter is freed, its counts stay in the
# port's total, and the QPs count in the port again. In auto mode (rdma
# statistic qp set ... auto type on) new QPs get a counter by themselves.
# modes: virtqueues (counting is the engine's, the same in both modes)
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

link=virtio_rdma0/1
hw=/sys/class/infiniband/virtio_rdma0/ports/1/hw_counters
size=4096
# total NAME: the port's counter as rdma statistic shows it (its own plus
# every counter's), checked against sysfs, which shows the same (the core
# keeps a read for a few jiffies: wait that out).
total() {
	local t
	sleep 0.1
	t=$(rdma statistic show link $link |
		awk -v n="$1" '{ for (i = 1; i < NF; i++) if ($i == n) { print $(i + 1); exit } }')
	[ "$t" = "$(cat "$hw/$1")" ] || fail "$1: rdma statistic says $t, sysfs $(cat "$hw/$1")"
	echo "$t"
}
# cset FIELD LQPN: FIELD (cntn, or a counter's name) of the counter QP LQPN
# is bound to; empty if it is bound to none.
cset() {
	rdma -j statistic qp show link $link | python3 -c '
import json, sys
field, lqpn = sys.argv[1], int(sys.argv[2])
def find(o):
    if isinstance(o, dict):
        if lqpn in o.get("lqpn", []):
            return o
        for v in o.values():
            r = find(v)
            if r is not None:
                return r
    elif isinstance(o, list):
        for v in o:
            r = find(v)
            if r is not None:
                return r
def value(o):
    if isinstance(o, dict):
        if field in o:
            return o[field]
        for v in o.values():
            r = value(v)
            if r is not None:
                return r
c = find(json.load(sys.stdin))
print("" if c is None else value(c))' "$1" "$2"
}
diagnose() { rdma statistic qp show link $link; rdma statistic qp mode link $link; }

driver_up
gid=$(v4_gid_index)

step "two QPs of a process"
coproc QPS { python3 "$(dirname "$0")/lib/qp_counters.py" "$gid" 2>&1; }
read -r qa qb <&"${QPS[0]}" || fail "qp_counters.py did not start"
echo "  writer QP $qa, reader QP $qb"
# writes N: QP A writes N times into QP B's memory.
writes() {
	echo "write $1" >&"${QPS[1]}"
	read -r answer <&"${QPS[0]}" || true
	[ "$answer" = done ] || fail "writes: $answer"
}

step "the writer bound to a counter counts there only"
rdma statistic qp bind link $link lqpn "$qa" || fail "rdma statistic qp bind lqpn $qa"
c=$(cset cntn "$qa")
[ -n "$c" ] || fail "QP $qa is bound to no counter"
echo "  QP $qa in counter $c"
t_sent=$(total sent_bytes) t_rcvd=$(total rcvd_bytes)
c_sent=$(cset sent_bytes "$qa") c_rcvd=$(cset rcvd_bytes "$qa")
writes 20
d_c_sent=$(($(cset sent_bytes "$qa") - c_sent)) d_c_rcvd=$(($(cset rcvd_bytes "$qa") - c_rcvd))
d_t_sent=$(($(total sent_bytes) - t_sent)) d_t_rcvd=$(($(total rcvd_bytes) - t_rcvd))
echo "  counter: sent $d_c_sent received $d_c_rcvd; the port's total: sent $d_t_sent received $d_t_rcvd"
[ "$d_c_sent" = $((20 * size)) ] || fail "the counter's sent_bytes grew by $d_c_sent"
[ "$d_c_rcvd" = 0 ] || fail "the counter's rcvd_bytes grew by $d_c_rcvd (the reader is not bound)"
[ "$d_t_sent" = $((20 * size)) ] || fail "the port's sent_bytes grew by $d_t_sent (twice: counted in the port too)"
[ "$d_t_rcvd" = $((20 * size)) ] || fail "the port's rcvd_bytes grew by $d_t_rcvd"
[ "$(cset sent_pkts "$qa")" -ge 20 ] || fail "the counter's sent_pkts: $(cset sent_pkts "$qa")"

step "the reader in the same counter adds what it receives"
rdma statistic qp bind link $link lqpn "$qb" cntn "$c" || fail "rdma statistic qp bind lqpn $qb cntn $c"
[ "$(cset cntn "$qb")" = "$c" ] || fail "QP $qb is in counter '$(cset cntn "$qb")', not $c"
t_rcvd=$(total rcvd_bytes) c_rcvd=$(cset rcvd_bytes "$qa")
writes 10
[ $(($(cset rcvd_bytes "$qa") - c_rcvd)) = $((10 * size)) ] || fail "the counter's rcvd_bytes: $c_rcvd -> $(cset rcvd_bytes "$qa")"
[ $(($(total rcvd_bytes) - t_rcvd)) = $((10 * size)) ] || fail "the port's rcvd_bytes: $t_rcvd -> $(total rcvd_bytes) (counted twice?)"

step "unbound, the counter is freed and its counts stay in the port's total"
t_sent=$(total sent_bytes) t_rcvd=$(total rcvd_bytes)
rdma statistic qp unbind link $link cntn "$c" lqpn "$qa" || fail "unbind QP $qa"
rdma statistic qp unbind link $link cntn "$c" lqpn "$qb" || fail "unbind QP $qb"
[ -z "$(cset cntn "$qa")$(cset cntn "$qb")" ] || fail "a QP is still bound"
[ "$(total sent_bytes)" = "$t_sent" ] && [ "$(total rcvd_bytes)" = "$t_rcvd" ] ||
	fail "the port's total moved when the counter went: sent $t_sent -> $(total sent_bytes), received $t_rcvd -> $(total rcvd_bytes)"
writes 5
[ $(($(total sent_bytes) - t_sent)) = $((5 * size)) ] && [ $(($(total rcvd_bytes) - t_rcvd)) = $((5 * size)) ] ||
	fail "unbound, the port's total: sent $t_sent -> $(total sent_bytes), received $t_rcvd -> $(total rcvd_bytes)"
echo "quit" >&"${QPS[1]}"
wait "$QPS_PID" || fail "qp_counters.py"

step "auto mode: new QPs get a counter by themselves"
rdma statistic qp set link $link auto type on || fail "rdma statistic qp set auto type on"
coproc QPS { python3 "$(dirname "$0")/lib/qp_counters.py" "$gid" 2>&1; }
read -r qa qb <&"${QPS[0]}" || fail "qp_counters.py did not start"
c=$(cset cntn "$qa")
[ -n "$c" ] && [ "$(cset cntn "$qb")" = "$c" ] || fail "auto mode: QPs $qa $qb in counters '$c' '$(cset cntn "$qb")'"
echo "  QPs $qa and $qb (both RC) in counter $c"
writes 4
[ "$(cset sent_bytes "$qa")" = $((4 * size)) ] && [ "$(cset rcvd_bytes "$qa")" = $((4 * size)) ] ||
	fail "auto counter: sent $(cset sent_bytes "$qa") received $(cset rcvd_bytes "$qa")"
rdma statistic qp show link $link | sed 's/^/  /'
echo "quit" >&"${QPS[1]}"
wait "$QPS_PID" || fail "qp_counters.py"
rdma statistic qp set link $link auto off || fail "rdma statistic qp set auto off"
echo "PASS"
