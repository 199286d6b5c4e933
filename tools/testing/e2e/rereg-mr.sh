#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# ibv_rereg_mr on virtio_rdma0 (lib/rereg_mr.py): a user MR's rights,
# memory and PD change, alone and at once, and RDMA WRITEs between two RC
# QPs of the device land or fail as the MR's new state says (rights and PD
# change in place under the same keys; new memory gets new keys and the old
# are dead); what IB forbids (write rights on pages pinned read-only,
# on-demand paging, remote write without local write, unmapped or
# oversized memory) fails with its errno and leaves the MR working. Then
# nothing of the process is left (rdma res show), nor leaked (the runner).
# modes: virtqueues (an MR is a control command's, the same in both modes)
set -euo pipefail

source "$(dirname "$0")/lib/common.sh"

driver_up
gid=$(v4_gid_index)

step "reregistering one MR"
python3 tools/testing/e2e/lib/rereg_mr.py "$gid" || fail "rereg_mr.py"

step "nothing left"
left=$(res_count "comm python3" mr dev virtio_rdma0)
[ "$left" = 0 ] || fail "$left MRs of the process are still listed"
modprobe -r virtio_rdma
