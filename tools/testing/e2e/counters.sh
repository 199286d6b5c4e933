#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# virtio_rdma0's port counters (QUERY_COUNTERS): rdma statistic and sysfs
# hw_counters name every counter of the protocol and agree; ib_write_bw
# between two QPs of the device moves sent/received packets and bytes by
# what it wrote; an RDMA WRITE with a bad key counts one rem_access_err.
# modes: virtqueues (the device counts in the engine both modes share;
# ring-mode traffic is counted by the same code)
set -euo pipefail

source "$(dirname "$0")/lib/common.sh"

hw=/sys/class/infiniband/virtio_rdma0/ports/1/hw_counters
names="sent_pkts sent_bytes rcvd_pkts rcvd_bytes rnr_naks_sent rnr_naks_rcvd
	dropped_not_peer dropped_bad_psn dropped_bad_qkey loc_len_err loc_qp_op_err
	loc_prot_err wr_flush_err rem_inv_req_err rem_access_err rem_op_err
	retry_exc_err rnr_retry_exc_err other_err"
# stat NAME: the counter as rdma statistic shows it.
stat() {
	rdma statistic show link virtio_rdma0/1 |
		awk -v n="$1" '{ for (i = 1; i < NF; i++) if ($i == n) { print $(i + 1); exit } }'
}
# hw NAME: the counter as sysfs shows it (the core keeps a read for a few
# jiffies; wait that out).
hw() { sleep 0.1; cat "$hw/$1"; }

driver_up
gid=$(v4_gid_index)

step "every counter is there"
for n in $names; do
	[ -e "$hw/$n" ] || fail "no hw_counters/$n"
	[ -n "$(stat "$n")" ] || fail "rdma statistic shows no $n"
done
[ "$(ls "$hw" | grep -vc lifespan)" = 19 ] || fail "hw_counters: $(ls "$hw" | xargs)"

step "ib_write_bw moves the packet and byte counters"
s_pkts=$(hw sent_pkts) s_bytes=$(hw sent_bytes) r_pkts=$(hw rcvd_pkts) r_bytes=$(hw rcvd_bytes)
opts="-d virtio_rdma0 -x $gid -F -s 65536 -n 200"
pair "ib_write_bw" ib_write_bw $opts -p "$port" -- ib_write_bw $opts -p "$port" "$MY_IP"
d_sbytes=$(($(hw sent_bytes) - s_bytes)) d_rbytes=$(($(hw rcvd_bytes) - r_bytes))
d_spkts=$(($(hw sent_pkts) - s_pkts)) d_rpkts=$(($(hw rcvd_pkts) - r_pkts))
echo "  sent $d_spkts packets $d_sbytes bytes, received $d_rpkts packets $d_rbytes bytes"
[ "$d_sbytes" -ge $((200 * 65536)) ] || fail "sent_bytes grew by $d_sbytes"
# Both QPs are this device's: what one sent, the other took.
[ "$d_rbytes" = "$d_sbytes" ] || fail "received $d_rbytes bytes of $d_sbytes sent"
[ "$d_rpkts" = "$d_spkts" ] || fail "received $d_rpkts packets of $d_spkts sent"
# At most 4096 bytes a packet: a 64 KiB message is at least 16.
[ "$d_spkts" -ge $((200 * 16)) ] || fail "sent_pkts grew by $d_spkts"
[ "$(stat sent_bytes)" = "$(hw sent_bytes)" ] || fail "rdma statistic and sysfs disagree"

step "a WRITE with a bad key counts one rem_access_err"
errs=$(hw rem_access_err) flushed=$(hw wr_flush_err)
python3 "$(dirname "$0")/lib/counters.py" "$gid" || fail "counters.py"
[ $(($(hw rem_access_err) - errs)) = 1 ] || fail "rem_access_err: $errs -> $(hw rem_access_err)"
[ "$(hw wr_flush_err)" = "$flushed" ] || fail "wr_flush_err moved"

rdma statistic show link virtio_rdma0/1 | fold -w 100 | sed 's/^/  /'
echo "PASS"
