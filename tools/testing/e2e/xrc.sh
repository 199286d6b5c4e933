#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# XRC on virtio_rdma0 (lib/xrc.py). In the virtqueue mode the device offers
# none (no SRQs: ibv_open_xrcd fails with EOPNOTSUPP, no XRC capability);
# with queues in guest memory an XRC initiator QP reaches two XRC SRQs of
# one domain through one target QP (SEND by ibv_post_send and by the
# ibv_wr_* API, RDMA WRITE and READ with an MR of the SRQ's PD), each
# receive completing on its SRQ's CQ and naming the target QP; an SRQ that
# is not of the target's domain (a basic SRQ, another domain's, a destroyed
# one) fails the request with a remote invalid request error and nothing
# is written; an empty SRQ gets RNR retries exceeded; a domain in use cannot
# be closed. Then nothing of the process is left (rdma res show), nor
# leaked (the runner).
set -euo pipefail

source "$(dirname "$0")/lib/common.sh"

driver_up
gid=$(v4_gid_index)
step "ibv_devinfo: the XRC capability"
ibv_devinfo -v -d virtio_rdma0 | grep -E "max_srq:|XRC" | sed 's/^/  /' || true

step "XRC domains, SRQs and QPs"
python3 tools/testing/e2e/lib/xrc.py "$gid" || fail "xrc.py"

step "nothing left"
# Not every object type takes a "dev" filter: the device is picked by grep.
for res in qp srq cq mr pd; do
	out=$(rdma res show "$res") || fail "rdma res show $res"
	left=$(echo "$out" | grep "virtio_rdma0" | grep -c "comm python3" || true)
	[ "$left" = 0 ] || fail "$left ${res}s of the process are still listed"
done
# The core keeps target QPs itself (not the process's): none may be left.
out=$(rdma res show qp) || fail "rdma res show qp"
left=$(echo "$out" | grep "virtio_rdma0" | grep -c "XRC" || true)
[ "$left" = 0 ] || fail "$left XRC QPs are still listed"
modprobe -r virtio_rdma
