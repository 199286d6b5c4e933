#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# verbs-ex.sh in the ring mode (the backend's --rings): the provider builds
# the ibv_wr_* batches in rings in the process's own memory, which the
# device reads, and start_poll reads the completions the device writes
# there; the doorbell only when the device stopped polling.
# backend-args: --rings --poll-us 200
set -euo pipefail
rings=1
source "$(dirname "$0")/lib/verbs-ex.sh"
