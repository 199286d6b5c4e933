#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The extended verbs through the project's provider, default data path (the
# kernel's mapped rings, a write() doorbell per post): lib/uverbs_verbs_ex.c
# makes CQs with ibv_create_cq_ex and RC and UD QPs with ibv_create_qp_ex,
# posts batches of send, send with immediate, write, write with immediate,
# read, fetch-and-add and compare-and-swap with SGE lists and inline data
# through ibv_wr_*, polls them with start_poll/next_poll/end_poll and checks
# every wc_read_* value and the data moved; ibv_post_send and ibv_poll_cq
# work on the same objects; send operations and completion fields the
# device lacks fail with EOPNOTSUPP; a batch with too many SGEs, too much
# inline data or more requests than the ring holds fails in wr_complete and
# posts nothing, as does wr_abort. Then perftest (ib_write_bw, ib_send_bw,
# ib_read_bw, ib_write_lat) posting with ibv_wr_*: it takes that path only
# for devices it knows, so an LD_PRELOAD shim (lib/perftest_wr_api.c)
# presents the device to it as an hns (with --no_ddp, else it asks
# mlx5dv about out-of-order receives) and counts its wr_complete
# calls; that perftest alone still takes ibv_post_send is checked too.
# modes: virtqueues (the ring mode's ibv_wr_* path runs in xrc@rings; left
# out of the ring pass to keep make check in its budget: restore when it fits)
set -euo pipefail
source "$(dirname "$0")/lib/verbs-ex.sh"
