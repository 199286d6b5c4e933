#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Builds a guest kernel ($KERNEL: debug, the default, or release):
# Debian's linux-source-7.3 (7.3.4 when last built), the patch series in patches/, the
# overlay (this repository's kernel-tree files) and a configuration of
# allnoconfig + kernel/configs/virtio_rdma.config + the variant's fragment
# (virtio_rdma_debug.config or virtio_rdma_release.config).
#
# The tree and its build directory are cached under a key of the patches,
# the fragments, this script and the sysroot, so a changed patch or fragment
# never reuses a stale tree. The overlay is synced into the tree on every
# run (only changed files are touched) and the build is incremental.
# Prints the cache directory: bzImage in build/, modules in modules/.
source "$(dirname "$0")/lib.sh"

# Debian backports' 7.3 series: its stable updates are taken (the series must
# still apply without fuzz), another series is not.
KERNEL_SERIES=7.3
OVERLAY_DIRS="Documentation drivers include kernel rust samples"
FRAGMENTS=$(kernel_fragments)
MAKE_ARGS="LLVM=$KERNEL_LLVM"

# The sysroot first: its resolved versions are part of the key.
[ "${1:-}" = --inside ] || "$BUILD/sysroot.sh" >/dev/null
dest=$(kernel_dir)

if [ "${1:-}" != --inside ]; then
	"$BUILD/sysroot.sh" >/dev/null
	mkdir -p "$VRDMA_CACHE"
	# One kernel build at a time on this machine (2 cores, shared cache).
	exec 9>"$VRDMA_CACHE/.kernel-build.lock"
	flock -n 9 || { log "kernel: waiting for another kernel build to finish"; flock 9; }
	in_sysroot "$BUILD/kernel.sh" --inside "$@" >&2
	# Trees of this variant under other keys are stale (their inputs
	# changed), as are trees of the days before variants: free their space.
	for d in "$VRDMA_CACHE"/linux-*; do
		[[ "${d##*/}" =~ ^linux-($KERNEL-)?[0-9a-f]{16}$ ]] || continue
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
	case "$v" in
	"$KERNEL_SERIES" | "$KERNEL_SERIES".*) log "kernel: Linux $v" ;;
	*) die "linux-source-$KERNEL_SERIES is Linux $v" ;;
	esac
	# No fuzz: the series must apply exactly, as git am would apply it.
	for p in "$TOP"/patches/*.patch; do
		[ -e "$p" ] || continue
		log "kernel: applying ${p##*/}"
		patch -d "$src" -p1 -s -F0 --no-backup-if-mismatch <"$p" ||
			die "${p##*/} does not apply to Linux $v without fuzz"
	done
	touch "$dest/.src-done"
fi

# Sync the overlay. rsync --checksum leaves unchanged files (and their
# mtimes) alone, so make rebuilds only what changed. Files that left the
# overlay since the last sync are removed from the tree.
manifest="$dest/overlay.manifest"
(cd "$TOP" && for d in $OVERLAY_DIRS; do [ ! -d "$d" ] || find "$d" -type f; done | LC_ALL=C sort) >"$manifest.new"
# Whether the last build completed is decided before the sync: a build
# interrupted after the sync must not look complete to the next run.
built=""
[ -e "$dest/.build-done" ] && built=1
rm -f "$dest/.build-done"
changed=""
if [ -f "$manifest" ]; then
	changed=$(LC_ALL=C comm -23 "$manifest" "$manifest.new")
	for f in $changed; do
		log "kernel: removing $f (left the overlay)"
		rm -f "$src/$f"
	done
fi
changed+=$(cd "$TOP" && rsync -rci --files-from="$manifest.new" . "$src/")
mv "$manifest.new" "$manifest"

# Nothing changed since a build that completed: make would only walk the
# tree (most of a minute), so the last build stands. A failed or
# interrupted build leaves no .build-done, and extra make arguments
# (CLIPPY=1) always build.
if [ -z "$changed" ] && [ -n "$built" ] && [ $# = 0 ]; then
	touch "$dest/.build-done"
	log "kernel: $KERNEL up to date"
	exit 0
fi

mkdir -p "$out"
if [ ! -e "$out/.config-done" ]; then
	log "kernel: configuring $KERNEL (allnoconfig + $FRAGMENTS)"
	# allnoconfig with the fragments as its fixed answers: every option they
	# do not name, including those they make visible, is off unless it has
	# no prompt. The minimal base is the point: build and boot time.
	cat $(printf "$src/%s " $FRAGMENTS) >"$out/fragments.config"
	make -s -C "$src" O="$out" $MAKE_ARGS KCONFIG_ALLCONFIG="$out/fragments.config" \
		allnoconfig >/dev/null
	# Every fragment line must have survived the configuration (a dependency that
	# silently drops CONFIG_RUST would otherwise go unnoticed). An "=n" line
	# holds when the option is not set at all.
	bad=0
	for f in $FRAGMENTS; do
		while read -r line; do
			case "$line" in
			CONFIG_*=n) ! grep -qE "^${line%=n}=" "$out/.config" || { echo "  $line" >&2; bad=1; } ;;
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
touch "$dest/.build-done"
log "kernel: ready ($(make -s -C "$src" O="$out" kernelrelease))"
