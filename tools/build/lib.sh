# SPDX-License-Identifier: GPL-2.0
# Shared helpers for the build scripts: where caches live, how they are keyed,
# and how a command runs inside the Debian trixie sysroot.
#
# Every cache is a directory named <stage>-<key>, where <key> hashes the files
# that define the stage (and the key of the stage below it). A stage is built
# in <name>.tmp and renamed when complete, so a half-built or stale cache is
# never reused.

set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD="$TOP/tools/build"
VRDMA_CACHE=${VRDMA_CACHE:-/var/cache/virtio-rdma}
JOBS=${JOBS:-3}

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# key ARG... : a short hash of the named files' (or directories') contents
# and names; an ARG of the form =TEXT stands for TEXT itself.
key() {
	local f
	for f in "$@"; do
		printf '%s\n' "${f#"$TOP"/}"
		if [ "${f#=}" != "$f" ]; then
			continue
		elif [ -d "$f" ]; then
			(cd "$f" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum)
		elif [ -f "$f" ]; then
			cat "$f"
		else
			echo "(absent)"
		fi
	done | sha256sum | cut -c1-16
}

sysroot_key() { key "$BUILD/sysroot.sh" "$BUILD/sysroot.packages"; }
sysroot_dir() { echo "$VRDMA_CACHE/sysroot-$(sysroot_key)"; }

qemu_key() { key "$BUILD/qemu.sh" "$TOP/tools/qemu/patches" "=$(sysroot_key)"; }
qemu_bin() { echo "$VRDMA_CACHE/qemu-$(qemu_key)/build/qemu-system-x86_64"; }

# KERNEL picks the guest kernel: "debug" (lockdep, KASAN, kmemleak: what the
# tests run on) or "release" (no checkers: what make bench runs on). Both are
# allnoconfig + the common fragment + the variant's fragment, each cached
# under its own key.
KERNEL=${KERNEL:-debug}
case "$KERNEL" in
debug | release) ;;
*) die "KERNEL=$KERNEL: the kernels are debug and release" ;;
esac
kernel_fragments() {
	echo kernel/configs/virtio_rdma.config "kernel/configs/virtio_rdma_$KERNEL.config"
}
# The overlay's Kconfig files are in the key too: a new option must meet
# allnoconfig, not the incremental syncconfig's defaults.
kernel_key() {
	key "$BUILD/kernel.sh" "$TOP/patches" $(printf "$TOP/%s " $(kernel_fragments)) \
		$(cd "$TOP" && find drivers rust samples -name 'Kconfig*' | LC_ALL=C sort | sed "s|^|$TOP/|") \
		"=$KERNEL" "=$(sysroot_key)"
}
kernel_dir() { echo "$VRDMA_CACHE/linux-$KERNEL-$(kernel_key)"; }

# The rdma-core provider (tools/rdma-core), built in Debian's rdma-core tree.
provider_key() {
	key "$BUILD/provider.sh" "$TOP/tools/rdma-core" "$TOP/include/uapi/rdma/virtio_rdma-abi.h" \
		"$TOP/include/uapi/linux/virtio_rdma.h" \
		"=$(sysroot_key)"
}
provider_lib() { echo "$VRDMA_CACHE/rdma-core-$(provider_key)/build/lib/libvirtio_rdma-rdmav34.so"; }

# debian_source PACKAGE=VERSION FILE: (inside the sysroot) makes sure the
# download cache holds FILE of Debian's source package PACKAGE=VERSION.
# The registry may answer 404 for the .dsc yet serve the tarballs, and apt
# complains about its sandbox: the file itself is what is checked.
debian_source() {
	local dl="$VRDMA_CACHE/downloads"
	mkdir -p "$dl"
	[ -f "$dl/$2" ] && return 0
	log "fetching Debian source $1"
	(cd "$dl" && apt-get source --download-only "$1" >"apt-source-${1%%=*}.log" 2>&1) || true
	[ -f "$dl/$2" ] ||
		die "Debian no longer serves $1 source ($dl/apt-source-${1%%=*}.log): update the pinned version in the build script that asked for it"
}

# The device backend is a cargo project; cargo keeps its own build correct.
backend_bin() { echo "$VRDMA_CACHE/cargo-target/release/vhost-user-rdma"; }

# in_sysroot [--binds "SRC:DST ..."] CMD... : run CMD inside the sysroot, in a
# private mount and PID namespace. The checkout and the cache appear at the
# same paths inside as outside. When CMD ends every process it started is
# killed and every mount it made disappears with the namespace.
in_sysroot() {
	local binds=""
	if [ "${1:-}" = --binds ]; then binds=$2; shift 2; fi
	local root
	root=$(sysroot_dir)
	[ -d "$root" ] || die "no sysroot at $root: run 'make setup'"
	unshare --mount --pid --fork --kill-child --propagation private -- \
		"$BUILD/chroot-exec.sh" "$root" "$TOP" "$VRDMA_CACHE" "$binds" "$@"
}
