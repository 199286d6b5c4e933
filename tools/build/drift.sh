#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Says whether the Debian registry still serves what the cached sysroot was
# built from, and what a fresh machine's make setup would get instead: the
# registry keeps one Rust in trixie-backports at a time, point releases
# change Debian revisions, and a warm cache hides both. Prints one line and
# exits 0 whatever it finds (drift is news, not a failure of the change
# under test); make check prints that line just before its last.
#
# usage: drift.sh [RESOLVED]
#   RESOLVED: a recorded set to compare ("name version suite" lines; default
#   the cached sysroot's, $(sysroot_resolved))
source "$(dirname "$0")/lib.sh"

recorded=${1:-$(sysroot_resolved)}
[ -f "$recorded" ] || { echo "registry: no recorded sysroot versions ($recorded): run make setup"; exit 0; }

if [ "${2:-}" != --inside ]; then
	# Inside the sysroot: its own apt reads the registry as the build did.
	in_sysroot --binds "$(dirname "$(readlink -f "$recorded")"):/mnt/recorded" \
		"$BUILD/drift.sh" "/mnt/recorded/$(basename "$recorded")" --inside
	exit 0
fi

# --- from here on we run inside the sysroot, in a private apt state ---
st=/tmp/drift-apt
mkdir -p "$st/lists/partial" "$st/cache/archives/partial"
grep '^deb ' /etc/apt/sources.list >"$st/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$st/sources.list" -o Dir::Etc::SourceParts=/nonexistent
	-o "Dir::State::Lists=$st/lists" -o "Dir::Cache=$st/cache" -o Debug::NoLocking=1)
if ! err=$(apt-get "${apt_opts[@]}" -qq update 2>&1); then
	echo "registry: not reachable, drift unknown ($(echo "$err" | tail -1))"
	exit 0
fi
now=$(resolve_packages apt-cache "${apt_opts[@]}")
gone=() moved=()
while read -r name version suite want; do
	old=$(awk -v n="$name" '$1 == n { print $2 }' "$recorded")
	if [ "$version" = - ]; then
		gone+=("$name ${old:-?} (no ${want/any/version} in $suite now)")
	elif [ "$version" != "$old" ]; then
		moved+=("$name ${old:-(none)} -> $version")
	fi
done <<<"$now"
if [ ${#gone[@]} = 0 ] && [ ${#moved[@]} = 0 ]; then
	echo "registry: a fresh machine's make setup would get the cached sysroot's versions ($(wc -l <<<"$now") packages)"
	exit 0
fi
msg="REGISTRY DRIFT: the cached sysroot no longer matches what a fresh machine would get:"
[ ${#gone[@]} = 0 ] || msg+=" make setup would FAIL there, the registry serves no accepted version of $(IFS=,; echo "${gone[*]}" | sed 's/,/, /g');"
[ ${#moved[@]} = 0 ] || msg+=" it would take $(IFS=,; echo "${moved[*]}" | sed 's/,/, /g');"
echo "$msg update tools/build/sysroot.packages and run make check on an empty VRDMA_CACHE"
