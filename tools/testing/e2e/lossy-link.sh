#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The kernel's and rdma-core's users over a link that loses, reorders and
# duplicates packets: the backend's fault drill (--link-faults) drops 1 %
# of RC request packets and 1 % of answers, lets 1 % of packets be
# overtaken by the next and duplicates 1 % of requests. The responder NAKs
# a packet after a gap and the requester goes back to it, the transport
# sends again what nothing answered when the QP's timer runs out, and the
# responder answers a duplicate without executing it twice. verbs-clients
# (the pingpongs with their data checked, perftest, rping -V) and nvme-rdma
# (lib/nvme-rdma.sh: host and target in this guest, fio with crc32c
# verification, a smaller volume: every lost last packet or answer stalls
# its queue for rdma_cm's transport timer, about half a second) must pass
# as they would on a perfect link (which is why lib/verbs-clients.sh and
# lib/nvme-rdma.sh run here only); the device's counters must show that
# the link did lose packets (sent more than taken).
# backend-args: --link-faults drop=1,dup=1,reorder=1
# guest: own
# modes: virtqueues (the link is the backend's, the same in every mode)
set -euo pipefail
here=$(dirname "$0")
source "$here/lib/common.sh"

hw=/sys/class/infiniband/virtio_rdma0/ports/1/hw_counters

step "verbs-clients over the lossy link"
bash "$here/lib/verbs-clients.sh"

# Every QP of these tests is this device's: what it took, it also sent.
sleep 0.1
sent=$(cat $hw/sent_pkts) taken=$(cat $hw/rcvd_pkts)
echo "  sent $sent packets, the responders took $taken"
[ "$sent" -gt "$taken" ] || fail "nothing was lost: sent $sent, taken $taken"

step "nvme-rdma over the lossy link"
FIO_RAND=2M FIO_SEQ=8M bash "$here/lib/nvme-rdma.sh"
echo "PASS: verbs-clients and nvme-rdma over a link losing and duplicating 1 % of messages"
