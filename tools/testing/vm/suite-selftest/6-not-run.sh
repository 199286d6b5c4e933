#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The runner's own test of shared guests: must not run in the guest that
# 3-warn-and-pin left changed.
echo "ran in a changed guest"
