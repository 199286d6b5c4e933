#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Builds the guest kernel: Debian's linux-source-7.3 (7.3.4), the patch
# series in patches/, the overlay (this repository's kernel-tree files) and
# the config fragments in kernel/configs/.
#
# The tree and its build directory are cached under a key of the patches,
# the fragments, this script and the sysroot, so a changed patch or fragment
# never reuses a stale tree. The overlay is synced into the tree on every
# run (only changed files are touched) and the build is incremental.
# Prints the cache directory: bzImage in build/, modules in modules/.
source "$(dirname "$0")/lib.sh"

KERNEL_VERSION=7.3.4
OVERLAY_DIRS="Documentation drivers include kernel rust samples"
FRAGMENTS=$KERNEL_FRAGMENTS
MAKE_ARGS="LLVM=-22 BINDGEN=/usr/local/bin/bindgen"

dest=$(kernel_dir)

if [ "${1:-}" != --inside ]; then
	"$BUILD/sysroot.sh" >/dev/null
	mkdir -p "$VRDMA_CACHE"
	# One kernel build at a time on this machine (2 cores, shared cache).
	exec 9>"$VRDMA_CACHE/.kernel-build.lock"
	flock -n 9 || { log "kernel: waiting for another kernel build to finish"; flock 9; }
	in_sysroot "$BUILD/kernel.sh" --inside "$@" >&2
	# Trees of other keys are stale (their inputs changed): free their space.
	for d in "$VRDMA_CACHE"/linux-*; do
		[ "$d" = "$dest" ] || [ ! -d "$d" ] || { log "kernel: removing stale ${d##*/}"; rm -rf "$d"; }
	done
	echo "$dest"
	exit 0
fi
shift

# --- from here on we run inside the sysroot ---
src="$dest/src" out="$dest/build"

if [ ! -e "$dest/.src-done" ]; then
	rm -rf "$dest"
	mkdir -p "$dest"
	log "kernel: unpacking linux-source-7.3"
	tar -xf /usr/src/linux-source-7.3.tar.xz -C "$dest"
	mv "$dest/linux-source-7.3" "$src"
	v=$(make -s -C "$src" kernelversion)
	[ "$v" = "$KERNEL_VERSION" ] ||
		die "linux-source-7.3 is $v, expected $KERNEL_VERSION: update the pin in sysroot.packages and KERNEL_VERSION"
	for p in "$TOP"/patches/*.patch; do
		[ -e "$p" ] || continue
		log "kernel: applying ${p##*/}"
		patch -d "$src" -p1 -s --no-backup-if-mismatch <"$p" || die "${p##*/} does not apply to $KERNEL_VERSION"
	done
	touch "$dest/.src-done"
fi

# Sync the overlay. rsync --checksum leaves unchanged files (and their
# mtimes) alone, so make rebuilds only what changed. Files that left the
# overlay since the last sync are removed from the tree.
manifest="$dest/overlay.manifest"
(cd "$TOP" && for d in $OVERLAY_DIRS; do [ ! -d "$d" ] || find "$d" -type f; done | LC_ALL=C sort) >"$manifest.new"
if [ -f "$manifest" ]; then
	LC_ALL=C comm -23 "$manifest" "$manifest.new" | while read -r f; do
		log "kernel: removing $f (left the overlay)"
		rm -f "$src/$f"
	done
fi
(cd "$TOP" && rsync -rc --files-from="$manifest.new" . "$src/")
mv "$manifest.new" "$manifest"

mkdir -p "$out"
if [ ! -e "$out/.config-done" ]; then
	log "kernel: configuring (x86_64_defconfig + kvm_guest.config + $FRAGMENTS)"
	make -s -C "$src" O="$out" $MAKE_ARGS x86_64_defconfig >/dev/null
	(cd "$out" && "$src/scripts/kconfig/merge_config.sh" -m -O "$out" .config \
		"$src/kernel/configs/kvm_guest.config" $(printf "$src/%s " $FRAGMENTS) >/dev/null)
	make -s -C "$src" O="$out" $MAKE_ARGS olddefconfig >/dev/null
	# Every fragment line must have survived olddefconfig (a dependency that
	# silently drops CONFIG_RUST would otherwise go unnoticed).
	bad=0
	for f in $FRAGMENTS; do
		while read -r line; do
			case "$line" in
			CONFIG_*=n) grep -qx "# ${line%=n} is not set" "$out/.config" || { echo "  $line" >&2; bad=1; } ;;
			CONFIG_*) grep -qx "$line" "$out/.config" || { echo "  $line" >&2; bad=1; } ;;
			esac
		done <"$src/$f"
	done
	[ $bad = 0 ] || die "the options above did not take effect in $out/.config"
	touch "$out/.config-done"
fi

log "kernel: make -j$JOBS (incremental)"
make -s -C "$src" O="$out" $MAKE_ARGS -j"$JOBS" bzImage modules "$@" >"$dest/make.log" 2>&1 ||
	{ grep -E "error|Error" "$dest/make.log" | head -40 >&2; die "kernel build failed: $dest/make.log"; }
rm -rf "$dest/modules.tmp"
make -s -C "$src" O="$out" $MAKE_ARGS INSTALL_MOD_PATH="$dest/modules.tmp" modules_install >/dev/null
rm -rf "$dest/modules"
mv "$dest/modules.tmp" "$dest/modules"
log "kernel: ready ($(make -s -C "$src" O="$out" kernelrelease))"
