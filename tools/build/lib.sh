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
# The kernel's LLVM: the one rustc is built on (sysroot.packages), so that
# clang, lld, libclang (bindgen) and rustc agree.
KERNEL_LLVM=-19

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

qemu_key() { key "$BUILD/qemu.sh" "$TOP/tools/qemu/patches" "=$(sysroot_id)"; }
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
		"=$KERNEL" "=$(sysroot_id)"
}
kernel_dir() { echo "$VRDMA_CACHE/linux-$KERNEL-$(kernel_key)"; }

# The rdma-core provider (tools/rdma-core), built in Debian's rdma-core tree.
provider_key() {
	key "$BUILD/provider.sh" "$TOP/tools/rdma-core" "$TOP/include/uapi/rdma/virtio_rdma-abi.h" \
		"$TOP/include/uapi/linux/virtio_rdma.h" \
		"=$(sysroot_id)"
}
provider_lib() { echo "$VRDMA_CACHE/rdma-core-$(provider_key)/build/lib/libvirtio_rdma-rdmav34.so"; }

# The e2e tests' C programs (tools/build/e2e-programs.sh).
e2e_programs_key() {
	key "$BUILD/e2e-programs.sh" "$TOP"/tools/testing/e2e/lib/*.c "$TOP/include/uapi" "=$(sysroot_id)"
}
e2e_programs_dir() { echo "$VRDMA_CACHE/e2e-programs-$(e2e_programs_key)"; }

# debian_source PACKAGE/SUITE FILE: (inside the sysroot) makes sure the
# download cache holds FILE (an upstream tarball: the upstream version is in
# its name, the Debian revision is not) of Debian's source package PACKAGE as
# SUITE serves it.
# The registry may answer 404 for the .dsc yet serve the tarballs, and apt
# complains about its sandbox: the file itself is what is checked.
debian_source() {
	local dl="$VRDMA_CACHE/downloads"
	mkdir -p "$dl"
	[ -f "$dl/$2" ] && return 0
	log "fetching Debian source $1"
	(cd "$dl" && apt-get source --download-only "$1" >"apt-source-${1%%[=/]*}.log" 2>&1) || true
	[ -f "$dl/$2" ] ||
		die "Debian no longer serves $1 source ($dl/apt-source-${1%%[=/]*}.log): update the upstream version in the build script that asked for it"
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

# The versions the sysroot was built from, recorded inside it.
RESOLVED=var/lib/virtio-rdma/packages.resolved
sysroot_resolved() { echo "$(sysroot_dir)/$RESOLVED"; }
# What the stages built with the sysroot are keyed by: its inputs and the
# versions they resolved to when it was built.
sysroot_id() { key "=$(sysroot_key)" "$(sysroot_resolved)"; }

# resolve_packages APT-CACHE-CMD... : resolves sysroot.packages (or the file
# VRDMA_PACKAGES names: drift.sh's own test) against the
# registry that APT-CACHE-CMD (apt-cache with its options) reads. Prints one
# line per package, "name version suite", or "name - suite UPSTREAM" when the
# suite serves no version that the line accepts (see sysroot.packages).
resolve_packages() {
	local spec suite name want
	while read -r spec suite; do
		case "$spec" in '' | '#'*) continue ;; esac
		name=${spec%%=*} want=""
		[ "$spec" = "$name" ] || want=${spec#*=}
		"$@" madison "$name" 2>/dev/null | awk -F'|' -v n="$name" -v s="$suite" -v w="$want" '
			function upstream(v) { sub(/^[0-9]+:/, "", v); if (v ~ /-/) sub(/-[^-]*$/, "", v); return v }
			function accepts(v,   u) {
				if (w == "") return 1
				u = upstream(v)
				return u == w || index(u, w "+") == 1 || index(u, w "~") == 1
			}
			{ gsub(/ /, "", $2) }
			!found && $3 ~ (" " s "/") && $3 ~ /Packages *$/ && accepts($2) { print n, $2, s; found = 1 }
			END { if (!found) print n, "-", s, (w == "" ? "any" : w) }'
	done < <(sed 's/#.*//' "${VRDMA_PACKAGES:-$BUILD/sysroot.packages}")
}
