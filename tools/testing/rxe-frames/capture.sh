#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Captures RoCEv2 frames as Linux rxe sends them, for the backend's codec
# tests (tools/vhost-user-rdma/tests/data/rxe-frames.txt): two guests on a
# link of their own, each with rxe on its eth0 (10.0.2.15 and .16, and
# fd02::15 and ::16), run rdma-core's and perftest's clients against each
# other (RC and UD pingpongs over IPv4 and IPv6, RDMA WRITE, READ and
# atomics, rping's connection over rdma_cm), while a packet socket in the
# main guest records every UDP 4791 frame on eth0, both ways.
#
#   capture.sh [OUT-FILE]
#
# Not part of make check: the vectors it made are committed, and this
# says how (the rxe peer, not our encoder, decides what is right).
set -euo pipefail
top=$(cd "$(dirname "$0")/../../.." && pwd)
out_file=${1:-$top/tools/vhost-user-rdma/tests/data/rxe-frames.txt}
run=$(mktemp -d)
trap 'rm -rf "$run"' EXIT
"$top/tools/testing/vm/run.sh" --out "$run" --timeout 900 \
	--peer "bash tools/testing/rxe-frames/guest.sh peer" -- \
	bash tools/testing/rxe-frames/guest.sh main
{
	echo "# RoCEv2 frames sent by Linux rxe ($(uname -r) host, guest kernel"
	echo "# $(sed -n 's/^kernel: //p' "$run/frames.txt" | head -1)), captured by"
	echo "# tools/testing/rxe-frames/capture.sh: one frame a line, hex, after"
	echo "# what it is (the step and the BTH opcode)."
	grep -v '^kernel: ' "$run/frames.txt"
} >"$out_file"
echo "capture.sh: $(grep -vc '^#' "$out_file") frames in $out_file"
