#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Builds the vhost-user device backend (tools/vhost-user-rdma) with the
# sysroot's cargo; cargo's own tracking keeps the build correct.
source "$(dirname "$0")/lib.sh"
if [ "${1:-}" != --inside ]; then
	"$BUILD/sysroot.sh" >/dev/null
	in_sysroot "$BUILD/backend.sh" --inside >&2
	backend_bin
	exit 0
fi
log "backend: cargo build --release"
cargo build -q --release --locked --manifest-path "$TOP/tools/vhost-user-rdma/Cargo.toml" \
	--target-dir "$VRDMA_CACHE/cargo-target" -j"$JOBS"
