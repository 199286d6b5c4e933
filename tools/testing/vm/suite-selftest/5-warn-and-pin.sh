#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The runner's own test of shared guests: provokes a kernel WARN (which
# taints the kernel) and leaves nvmet pinned (a configfs subsystem holds
# the module). The verdict must be 98 (a checker report), the output must
# name the module left, and the guest must end after this test.
set -e
modprobe nvmet
mkdir /sys/kernel/config/nvmet/subsystems/held-by-3
modprobe lkdtm
echo WARNING >/sys/kernel/debug/provoke-crash/DIRECT
