#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Shared receive queues on virtio_rdma0 (lib/srq.py). In the virtqueue mode
# the device offers none (max_srq 0, ibv_create_srq: EOPNOTSUPP); with
# queues in guest memory two RC QPs take receives from one SRQ in its
# order, the armed limit raises IBV_EVENT_SRQ_LIMIT_REACHED once, a receive
# with a foreign lkey fails only the QP that took it (which then reports
# IBV_EVENT_QP_LAST_WQE_REACHED), and an RNR-waiting sender gets through
# once a receive is posted. Then nothing of the process is left.
set -euo pipefail

source "$(dirname "$0")/lib/common.sh"

driver_up
gid=$(v4_gid_index)
step "ibv_devinfo: the device's SRQ limits"
ibv_devinfo -v -d virtio_rdma0 | grep -E "max_srq" | sed 's/^/  /'

step "shared receive queues"
python3 tools/testing/e2e/lib/srq.py "$gid" || fail "srq.py"

step "nothing left"
left=$(res_count "comm python3" qp link virtio_rdma0/1)
[ "$left" = 0 ] || fail "$left QPs of the process are still listed"
modprobe -r virtio_rdma
