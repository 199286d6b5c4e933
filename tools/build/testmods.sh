#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Builds the out-of-tree test modules (tools/testing/kmod) against the
# cached kernel and installs them with its modules (lib/modules/*/extra), so
# that a guest can modprobe them. Kbuild's own tracking keeps the build
# correct; the kernel build replaces the modules directory, so this runs after
# every kernel build (make build does).
source "$(dirname "$0")/lib.sh"
if [ "${1:-}" != --inside ]; then
	in_sysroot "$BUILD/testmods.sh" --inside "$(kernel_dir)" >&2
	exit 0
fi
dir=$2
[ -f "$dir/build/Module.symvers" ] || die "no kernel build at $dir: run tools/build/kernel.sh"
exec 9>"$VRDMA_CACHE/.kernel-build.lock"
flock 9
log "test modules: make M=tools/testing/kmod"
args=(-s -C "$dir/src" O="$dir/build" LLVM=$KERNEL_LLVM M="$TOP/tools/testing/kmod" MO="$dir/kmod-build")
mkdir -p "$dir/kmod-build"
make "${args[@]}" -j"$JOBS" modules >"$dir/kmod.log" 2>&1 ||
	{ cat "$dir/kmod.log" >&2; die "test module build failed: $dir/kmod.log"; }
rm -rf "$dir/modules/lib/modules/"*/extra
make "${args[@]}" INSTALL_MOD_PATH="$dir/modules" INSTALL_MOD_DIR=extra modules_install >>"$dir/kmod.log" 2>&1 ||
	{ cat "$dir/kmod.log" >&2; die "test module install failed: $dir/kmod.log"; }
