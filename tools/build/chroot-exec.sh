#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Runs as PID 1 of a fresh mount+PID namespace (see in_sysroot in lib.sh):
# mounts what a build or a guest run needs into the sysroot and chroots.
# usage: chroot-exec.sh ROOT TOP CACHE "SRC:DST ..." CMD...
set -euo pipefail
root=$1 top=$2 cache=$3 binds=$4
shift 4

mount --rbind /dev "$root/dev"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
mkdir -p "$root$top" "$root$cache"
mount --bind "$top" "$root$top"
mount --bind "$cache" "$root$cache"
for b in $binds; do
	mkdir -p "$root${b#*:}"
	mount --bind "${b%%:*}" "$root${b#*:}"
done

export HOME=/root PATH=/usr/local/bin:/usr/bin:/usr/sbin:/bin:/sbin
export CARGO_HOME="$cache/cargo" LANG=C.UTF-8
cd "$top"
exec chroot "$root" /usr/bin/env -C "$PWD" "$@"
