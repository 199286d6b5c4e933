#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The runner's own test of shared guests: passes only if nothing of the
# test before it reached it (its kernel log, process, module, file).
set -e
fail() { echo "FAIL: $*"; exit 1; }
! dmesg | grep -q "kmemleak" || fail "the kernel log holds an earlier test's lines"
! pgrep -x sleep >/dev/null || fail "an earlier test's process is alive"
! lsmod | grep -q "^kmemleak_test" || fail "an earlier test's module is loaded"
[ ! -e /tmp/left-by-1-leak ] || fail "an earlier test's file is in /tmp"
echo PASS
