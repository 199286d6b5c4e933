#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Creates the Debian trixie sysroot (toolchain + guest userspace) in the cache,
# keyed by this script and sysroot.packages. Prints its path.
source "$(dirname "$0")/lib.sh"

BINDGEN_VERSION=0.72.1
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

dest=$(sysroot_dir)
if [ -d "$dest" ]; then echo "$dest"; exit 0; fi

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
# The Rust toolchain's own dependencies (libstd-rust-dev, ...) must come from
# backports too: raise that source package family to trixie's priority.
cat >"$tmp/etc/apt/preferences.d/rust-backports" <<EOS
Package: src:rustc src:cargo
Pin: release n=trixie-backports
Pin-Priority: 500
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
# Check every pin first so a vanished version is reported by name.
specs=() missing=()
while read -r spec suite; do
	case "$spec" in ''|'#'*) continue ;; esac
	name=${spec%%=*}
	if [ "$spec" != "$name" ]; then
		want=${spec#*=}
		if ! run apt-cache madison "$name" | awk -F'|' -v v="$want" \
			'{gsub(/ /, "", $2)} $2 == v && $3 ~ /Packages$/ {f=1} END {exit !f}'; then
			missing+=("$name=$want ($suite)")
		fi
	fi
	# apt takes either an exact version or a suite, not both.
	if [ "$spec" != "$name" ]; then specs+=("$spec"); else specs+=("$name/$suite"); fi
done < <(sed 's/#.*//' "$BUILD/sysroot.packages")
if [ ${#missing[@]} -gt 0 ]; then
	printf 'error: the Debian registry no longer serves these pinned packages:\n' >&2
	printf '  %s\n' "${missing[@]}" >&2
	printf 'Pick the version it serves now (chroot %s apt-cache policy NAME),\n' "$tmp" >&2
	printf 'update tools/build/sysroot.packages, and check the build still works.\n' >&2
	exit 1
fi
log "sysroot: installing ${#specs[@]} packages"
run apt-get install -y -qq --no-install-recommends "${specs[@]}" >"$VRDMA_CACHE/apt.log" 2>&1 ||
	die "apt-get install failed, see $VRDMA_CACHE/apt.log"
run update-ca-certificates >/dev/null

# bindgen < 0.72.1 mis-handles libclang >= 22 (make rustavailable warns), and
# trixie ships 0.71.1, so bindgen-cli comes from crates.io at a pinned version.
log "sysroot: cargo install bindgen-cli $BINDGEN_VERSION"
run env CARGO_HOME=/root/.cargo cargo install --locked --root /usr/local \
	bindgen-cli --version "$BINDGEN_VERSION" >"$VRDMA_CACHE/bindgen.log" 2>&1 ||
	die "cargo install bindgen-cli failed, see $VRDMA_CACHE/bindgen.log"
rm -rf "$tmp/root/.cargo/registry"

# Mount points the guest runner needs (trixie is merged-/usr).
mkdir -p "$tmp/usr/lib/modules" "$tmp/mnt/run"
run apt-get clean
umount "$tmp/proc"
trap - EXIT
mv "$tmp" "$dest"
log "sysroot: ready at $dest"
echo "$dest"
