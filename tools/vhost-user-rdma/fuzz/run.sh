#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Builds and runs every fuzz target of the backend for SECONDS (default 30)
# each; exits non-zero if a target crashes (or cannot be built).
#
# usage: run.sh [SECONDS] [TARGET...]
#
# A crash is a panic, a sanitizer report, an input that runs over 10 s, or
# one allocation over 128 MiB: one guest request must not cost the backend
# more than that (the largest legitimate one, a 1 Mi-page user MR table, is
# 8 MiB).
#
# cargo-fuzz wants nightly features: RUSTC_BOOTSTRAP=1 lets the stable
# toolchain accept them. cargo-fuzz itself is taken from PATH or installed
# once into $VRDMA_CACHE/cargo-fuzz. Builds go to $VRDMA_CACHE/fuzz-target,
# the corpora (seeded by the targets themselves, see fuzz_targets/seeds.rs)
# grow in $VRDMA_CACHE/fuzz-corpus/TARGET, crash inputs land in
# $VRDMA_CACHE/fuzz-artifacts/TARGET. Reproduce one with
#   cargo fuzz run --fuzz-dir tools/vhost-user-rdma/fuzz TARGET FILE
set -euo pipefail

FUZZ=$(cd "$(dirname "$0")" && pwd)
CACHE=${VRDMA_CACHE:-/var/cache/virtio-rdma}
# 0.13.1: the newest whose locked dependencies build with Rust 1.85 (0.13.2
# takes cargo_metadata 0.23, which asks 1.86).
CARGO_FUZZ_VERSION=0.13.1
SECONDS_EACH=${1:-30}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(ctrl_command work_request data_path packet)

export RUSTC_BOOTSTRAP=1 CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1}
export PATH="$CACHE/cargo-fuzz/bin:$PATH"
if ! cargo fuzz --version >/dev/null 2>&1; then
	echo "run.sh: installing cargo-fuzz $CARGO_FUZZ_VERSION into $CACHE/cargo-fuzz" >&2
	cargo install --locked --quiet --version "$CARGO_FUZZ_VERSION" \
		--root "$CACHE/cargo-fuzz" -j1 cargo-fuzz
fi

# -a: debug assertions (and so overflow checks) in the fuzzed code.
# AddressSanitizer where the toolchain ships its runtime (rustup's does,
# Debian's rustc does not; there the malloc limit is not enforced either,
# only the RSS limit).
opts=(--fuzz-dir "$FUZZ" --target-dir "$CACHE/fuzz-target" -a)
rtlib="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/lib"
if ! compgen -G "$rtlib/librustc-*_rt.asan.a" >/dev/null; then
	echo "run.sh: no AddressSanitizer runtime in $rtlib: building without a sanitizer" >&2
	opts+=(-s none)
fi
if ! cargo fuzz build "${opts[@]}"; then
	echo "== fuzz: build FAILED"
	exit 1
fi

status=0
for t in "${TARGETS[@]}"; do
	corpus="$CACHE/fuzz-corpus/$t" artifacts="$CACHE/fuzz-artifacts/$t/"
	mkdir -p "$corpus" "$artifacts"
	echo "== fuzz $t for ${SECONDS_EACH}s (corpus $corpus)"
	if VRDMA_FUZZ_SEEDS="$corpus" cargo fuzz run "${opts[@]}" "$t" "$corpus" -- \
		-max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=1024 -malloc_limit_mb=128 \
		-artifact_prefix="$artifacts" -print_final_stats=1; then
		echo "== fuzz $t: no crash"
	else
		echo "== fuzz $t: CRASH (input in $artifacts)"
		status=1
	fi
done
exit $status
