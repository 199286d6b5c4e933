#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The runner's own test of shared guests: an RCU stall report in the kernel
# log must fail the test in whose time it appears (98). A real stall needs a
# CPU held for rcu_cpu_stall_timeout (21 s) with preemption off, which would
# leave the guest without it; the report's first line, written to the kernel
# log as the kernel writes it, stands in for one.
echo "<3>rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:" >/dev/kmsg
