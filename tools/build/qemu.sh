#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Builds QEMU from Debian's qemu source package plus tools/qemu/patches, in
# the cache, keyed by the patches, this script and the sysroot. Prints the
# path of qemu-system-x86_64 (a path inside the sysroot's view).
source "$(dirname "$0")/lib.sh"

# Trixie's qemu source, any Debian revision of upstream 10.0.13 (the
# qemu-system-data line of sysroot.packages names the same).
QEMU_ORIG=qemu_10.0.13+ds.orig.tar.xz

# The sysroot first: its resolved versions are part of the key.
[ "${1:-}" = --inside ] || "$BUILD/sysroot.sh" >/dev/null
bin=$(qemu_bin)
dest=${bin%/build/*}
if [ -x "$bin" ] && [ -e "$dest/.done" ]; then echo "$bin"; exit 0; fi

if [ "${1:-}" != --inside ]; then
	"$BUILD/sysroot.sh" >/dev/null
	in_sysroot "$BUILD/qemu.sh" --inside >&2
	[ -e "$dest/.done" ] || die "QEMU build did not complete"
	echo "$bin"
	exit 0
fi

# --- from here on we run inside the sysroot ---
# A new upstream version also needs tools/qemu/patches checked.
debian_source qemu/trixie "$QEMU_ORIG"
dl="$VRDMA_CACHE/downloads"

rm -rf "$dest"
mkdir -p "$dest"
log "qemu: unpacking and patching"
tar -xf "$dl/$QEMU_ORIG" -C "$dest"
mv "$dest"/qemu-* "$dest/src"
for p in "$TOP"/tools/qemu/patches/*.patch; do
	patch -d "$dest/src" -p1 -s --no-backup-if-mismatch <"$p" || die "patch $p does not apply"
done

# The +ds tarball carries no firmware blobs, but meson turns EDK2 unpacking on
# whenever it finds bzip2 (and then fails on the missing files): keep it off.
# This is a build adjustment for Debian's tarball, not part of our patch.
# Debian's SeaBIOS and option ROMs (qemu-system-data) are used at run time.
# No libfdt in the sysroot: x86 needs it only for the microvm machine.
sed -i 's/^    unpack_edk2_blobs = bzip2.found()$/    unpack_edk2_blobs = false/' "$dest/src/meson.build"
! grep -q "unpack_edk2_blobs = bzip2" "$dest/src/meson.build" || die "cannot turn EDK2 unpacking off"
mkdir -p "$dest/build"
cd "$dest/build"
log "qemu: configure"
../src/configure --target-list=x86_64-softmmu --disable-install-blobs \
	--disable-docs --disable-gtk --disable-sdl --disable-vnc --disable-spice \
	--disable-opengl --disable-user --disable-tools --disable-guest-agent \
	--enable-slirp --enable-vhost-user --enable-virtfs --disable-fdt \
	--disable-werror >"$dest/configure.log" 2>&1 || die "configure failed: $dest/configure.log"
log "qemu: build (ninja -j$JOBS)"
ninja -j"$JOBS" qemu-system-x86_64 >"$dest/build.log" 2>&1 || die "build failed: $dest/build.log"
touch "$dest/.done"
log "qemu: ready at $bin"
