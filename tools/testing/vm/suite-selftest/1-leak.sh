#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The runner's own test of shared guests (check.sh, runner layer): leaks
# (the kmemleak sample module) and leaves a process, that module and a file
# behind; the verdict must be 97 (kmemleak), and 2-pass must see none of it.
set -e
modprobe kmemleak-test
echo marker >/tmp/left-by-1-leak
sleep 1000 &
