#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# On the wire with Linux's rxe as the peer (issue 43; lib/wire.sh): this guest's
# virtio_rdma0 is the net personality, whose port the backend puts on a
# host network (--uplink: a TAP on a bridge); the peer guest is another
# host on that bridge, with QEMU's own virtio-net and rxe0 on it (run.sh
# --peer-rdma rxe). Nothing of the peer is the backend's: what reaches it
# are RoCEv2 frames with this guest's MAC and IP, which rxe checks (ICRC,
# addresses, P_Key, Q_Key) before its QPs see them.
# peer: bash tools/testing/e2e/wire-rxe.sh peer
# peer-rdma: rxe
# backend-args: --net --rings
set -euo pipefail

source "$(dirname "$0")/lib/common.sh"

PEER_KIND=rxe
source "$(dirname "$0")/lib/wire.sh"
echo "wire-rxe: ok"
