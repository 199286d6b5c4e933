#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# On the wire between two hosts' backends (issue 43; lib/wire.sh): this
# guest's virtio_rdma0 and the peer's are both the net personality, served
# by two backend processes (run.sh --hosts 2), each device's port on an
# uplink (a TAP) on one bridge: they meet only as RoCEv2 frames, so both
# ends of every connection are the backend's wire transport (requester
# and responder on packets, engine/wire/), neither its in-memory path.
# peer: bash tools/testing/e2e/wire-hosts.sh peer
# hosts: 2
# backend-args: --net --rings
set -euo pipefail

source "$(dirname "$0")/lib/common.sh"

PEER_KIND=virtio
# The other way round and NVMe: see wire-rxe.sh (and make check's budget).
WIRE_ONE_WAY=1
source "$(dirname "$0")/lib/wire.sh"
echo "wire-hosts: ok"
