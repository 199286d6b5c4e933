#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Builds the rdma-core provider of virtio_rdma (tools/rdma-core) against the
# rdma-core the guest runs: Debian's rdma-core 56.1 source (private provider
# ABI 34, driver.h), with our provider and the kernel's user ABI header
# (include/uapi/rdma/virtio_rdma-abi.h) added to its tree the way a provider
# is added upstream. Cached under a key of this script, the provider, the
# header and the sysroot. Prints the path of libvirtio_rdma-rdmav34.so.
source "$(dirname "$0")/lib.sh"

RDMA_CORE_ORIG=rdma-core_56.1.orig.tar.gz

# The sysroot first: its resolved versions are part of the key.
[ "${1:-}" = --inside ] || "$BUILD/sysroot.sh" >/dev/null
lib=$(provider_lib)
dest=${lib%/build/*}
if [ -f "$lib" ] && [ -e "$dest/.done" ]; then echo "$lib"; exit 0; fi

if [ "${1:-}" != --inside ]; then
	"$BUILD/sysroot.sh" >/dev/null
	in_sysroot "$BUILD/provider.sh" --inside >&2
	[ -e "$dest/.done" ] || die "provider build did not complete"
	echo "$lib"
	exit 0
fi

# --- from here on we run inside the sysroot ---
# Trixie's rdma-core source, upstream 56.1 (the rdma-core pin in
# sysroot.packages), any Debian revision.
debian_source rdma-core/trixie "$RDMA_CORE_ORIG"
dl="$VRDMA_CACHE/downloads"

rm -rf "$dest"
mkdir -p "$dest"
log "provider: unpacking rdma-core and adding providers/virtio_rdma"
tar -xzf "$dl/$RDMA_CORE_ORIG" -C "$dest"
mv "$dest"/rdma-core-* "$dest/src"
src="$dest/src"
cp -r "$TOP/tools/rdma-core/providers/virtio_rdma" "$src/providers/"
cp "$TOP/include/uapi/rdma/virtio_rdma-abi.h" "$src/kernel-headers/rdma/"
# The device's element format, which the provider writes into its rings.
cp "$TOP/include/uapi/linux/virtio_rdma.h" "$src/kernel-headers/linux/"
# Register the headers and the provider as upstream's lists do.
sed -i 's|^  rdma/vmw_pvrdma-abi.h$|&\n  rdma/virtio_rdma-abi.h|' "$src/kernel-headers/CMakeLists.txt"
sed -i 's|^  linux/vfio.h$|&\n  linux/virtio_rdma.h|' "$src/kernel-headers/CMakeLists.txt"
sed -i 's|^add_subdirectory(providers/vmw_pvrdma)$|&\nadd_subdirectory(providers/virtio_rdma)|' "$src/CMakeLists.txt"
[ "$(grep -c 'rdma/virtio_rdma-abi.h' "$src/kernel-headers/CMakeLists.txt")" = 2 ] &&
	grep -q 'linux/virtio_rdma.h' "$src/kernel-headers/CMakeLists.txt" &&
	grep -q 'providers/virtio_rdma' "$src/CMakeLists.txt" ||
	die "cannot add the provider to rdma-core's build lists"

log "provider: cmake + ninja"
cmake -S "$src" -B "$dest/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DNO_MAN_PAGES=1 -DNO_PYVERBS=1 -DENABLE_STATIC=0 >"$dest/build.log" 2>&1 ||
	die "rdma-core configure failed: $dest/build.log"
ninja -C "$dest/build" -j"$JOBS" virtio_rdma-rdmav34 >>"$dest/build.log" 2>&1 ||
	die "provider build failed: $dest/build.log"
touch "$dest/.done"
