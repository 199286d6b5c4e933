#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The runner's own test of shared guests: leaves a task hung in D state
# (samples/hung_task: the second reader of its debugfs file waits on a mutex
# that the first holds for minutes), with the detector's timeout lowered to
# 2 s for the test; the verdict must be 98 (the hung-task report) though the
# test itself exits 0.
set -e
t=/proc/sys/kernel/hung_task_timeout_secs
old=$(cat $t)
modprobe hung_task_tests
cat /sys/kernel/debug/hung_task/mutex >/dev/null &
holder=$!
sleep 1
cat /sys/kernel/debug/hung_task/mutex >/dev/null &
waiter=$!
echo 2 >$t
for _ in $(seq 40); do
	dmesg | grep -q "INFO: task cat:$waiter blocked" && break
	sleep 1
done
echo "$old" >$t
# The holder sleeps interruptibly: killing it releases the mutex, and the
# waiter, killed while it waited, returns as soon as it has it.
kill "$holder" "$waiter"
wait || true
