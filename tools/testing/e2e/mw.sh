#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Memory windows on virtio_rdma0 (lib/mw.py): a type 1 window bound by
# ibv_bind_mw and a type 2 window bound by a BIND_MW work request are each
# reached by RDMA WRITEs of the peer QP inside their binding only (past its
# end, or through the MR's own rkey, is a remote access error); LOCAL_INV
# ends a type 2 window, and destroying the QP it is bound to frees it; an
# MR with a window bound cannot be deregistered (EBUSY) until the window
# goes. Then nothing of the process is left (rdma res show), nor leaked
# (the runner).
# modes: virtqueues (with queues in guest memory a BIND_MW or LOCAL_INV is
# a ring element like any other, and rdma-core's suite, which runs in that
# mode, binds, uses and invalidates type 1 and type 2 windows: test_mw_*;
# what this test adds, the windows' bounds and EBUSY, is the device's and
# the driver's in either mode)
set -euo pipefail

source "$(dirname "$0")/lib/common.sh"

driver_up
gid=$(v4_gid_index)

step "binding, using and ending windows"
python3 tools/testing/e2e/lib/mw.py "$gid" || fail "mw.py"

step "nothing left"
left=$(res_count "comm python3" mr dev virtio_rdma0)
[ "$left" = 0 ] || fail "$left MRs of the process are still listed"
modprobe -r virtio_rdma
