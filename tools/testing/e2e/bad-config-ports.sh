#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A device whose config space is bad (two ports; the driver supports one)
# makes probe fail cleanly: a message naming the field, no RDMA device, the
# device left unbound, and nothing for the debug kernel to report.
# backend-args: --config-override phys_port_cnt=2
# modes: virtqueues (probe refuses the config before any queue exists)
set -euo pipefail
source "$(dirname "$0")/lib/bad-config.sh"
expect_probe_failure "unusable config space: phys_port_cnt is 2, the driver supports 1"
