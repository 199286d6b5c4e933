#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Creates the Debian trixie sysroot (toolchain + guest userspace) in the cache,
# keyed by this script and sysroot.packages. Prints its path.
source "$(dirname "$0")/lib.sh"

MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

dest=$(sysroot_dir)
# --summary: one line on stderr naming the versions the sysroot was built from.
summary() {
	[ "${1:-}" = --summary ] || return 0
	log "sysroot: $(awk '$1 ~ /^(rustc|clang-19|bindgen|linux-source-7.3|qemu-system-data|rdma-core|perftest)$/ {
		printf "%s%s %s", sep, $1, $2; sep = ", " }' "$dest/$RESOLVED") (all: $dest/$RESOLVED)"
}
if [ -d "$dest" ]; then summary "$@"; echo "$dest"; exit 0; fi

command -v debootstrap >/dev/null ||
	die "debootstrap is missing on the host: apt-get install debootstrap (make deps does it)"
[ "$(id -u)" = 0 ] || die "building the sysroot needs root (debootstrap, chroot)"

mkdir -p "$VRDMA_CACHE"
tmp="$dest.tmp"
rm -rf "$tmp"
log "sysroot: debootstrap trixie into $tmp"
debootstrap --variant=minbase trixie "$tmp" "$MIRROR" >"$VRDMA_CACHE/debootstrap.log" 2>&1 ||
	die "debootstrap failed, see $VRDMA_CACHE/debootstrap.log"

cat >"$tmp/etc/apt/sources.list" <<EOS
deb $MIRROR trixie main
deb $MIRROR trixie-backports main
deb-src $MIRROR trixie main
EOS
# Trust the host's extra CAs so HTTPS (crates.io) works inside the chroot.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
	mkdir -p "$tmp/usr/local/share/ca-certificates"
	cp /usr/local/share/ca-certificates/*.crt "$tmp/usr/local/share/ca-certificates/"
fi

run() { chroot "$tmp" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
	PATH=/usr/local/bin:/usr/bin:/usr/sbin:/bin:/sbin DEBIAN_FRONTEND=noninteractive "$@"; }
mount -t proc proc "$tmp/proc"
trap 'umount "$tmp/proc" 2>/dev/null || true' EXIT

run apt-get update -qq
# Resolve every line first, so that a version the registry stopped serving
# is reported by name before anything is installed.
resolve_packages run apt-cache >"$tmp.resolved"
if grep -q ' - ' "$tmp.resolved"; then
	printf 'error: the Debian registry serves no version these lines of sysroot.packages accept:\n' >&2
	awk '$2 == "-" { printf "  %s (%s, upstream version %s)\n", $1, $3, $4 }' "$tmp.resolved" >&2
	printf 'What it serves: chroot %s apt-cache policy NAME. Update tools/build/sysroot.packages\n' "$tmp" >&2
	printf 'and check that the build and make check still pass.\n' >&2
	exit 1
fi
specs=()
while read -r name version _; do specs+=("$name=$version"); done <"$tmp.resolved"
log "sysroot: installing ${#specs[@]} packages"
run apt-get install -y -qq --no-install-recommends "${specs[@]}" >"$VRDMA_CACHE/apt.log" 2>&1 ||
	die "apt-get install failed, see $VRDMA_CACHE/apt.log"
run update-ca-certificates >/dev/null
mkdir -p "$(dirname "$tmp/$RESOLVED")"
mv "$tmp.resolved" "$tmp/$RESOLVED"
# Everything installed, dependencies included: what "last seen working" means.
run dpkg-query -W -f '${Package} ${Version}\n' >"$(dirname "$tmp/$RESOLVED")/packages.installed"

# Mount points the guest runner needs (trixie is merged-/usr).
mkdir -p "$tmp/usr/lib/modules" "$tmp/mnt/run"
run apt-get clean
umount "$tmp/proc"
trap - EXIT
mv "$tmp" "$dest"
log "sysroot: ready at $dest"
summary "$@"
echo "$dest"
