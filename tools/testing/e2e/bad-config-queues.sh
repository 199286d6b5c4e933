#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A device whose config is inconsistent with its virtqueues (max_qp 100 asks
# for 2 + 32 + 200 queues; the device has 66) makes probe fail cleanly once
# the transport refuses the queues: a message, no RDMA device, the device
# left unbound, and nothing for the debug kernel to report.
# backend-args: --config-override max_qp=100
# modes: virtqueues
set -euo pipefail
source "$(dirname "$0")/lib/bad-config.sh"
expect_probe_failure "cannot set up 234 virtqueues (2 + max_cq 32 + 2 \* max_qp 100)"
