#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# ibv_resize_cq on virtio_rdma0 (lib/resize_cq.py): a user CQ grows and
# shrinks with completions it has not polled, which come out afterwards in
# order and complete; it then holds as many as it says; a size below what
# is waiting or above max_cqe fails with EINVAL and leaves it working; an
# arming made before a resize fires after it; resizes leave no mapping or
# pinned page behind. Then nothing of the process is left (rdma res show),
# nor leaked (the runner).
set -euo pipefail

source "$(dirname "$0")/lib/common.sh"

driver_up
gid=$(v4_gid_index)

step "resizing a CQ"
python3 tools/testing/e2e/lib/resize_cq.py "$gid" || fail "resize_cq.py"

step "nothing left"
left=$(res_count "comm python3" cq dev virtio_rdma0)
[ "$left" = 0 ] || fail "$left CQs of the process are still listed"
modprobe -r virtio_rdma
