#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Builds the C programs of the e2e tests (tools/testing/e2e/lib/*.c) in the
# sysroot, at the host's speed: a debug guest under TCG took 5-14 s to
# compile each one, in every test that ran it. Cached under a key of this
# script, the sources, the project's uapi headers and the sysroot. Prints
# the directory; run.sh gives a guest its copy at /mnt/run/bin.
source "$(dirname "$0")/lib.sh"

# The key is taken here, outside, once: the inside is handed the directory.
if [ "${1:-}" != --inside ]; then
	dest=$(e2e_programs_dir)
	if [ -d "$dest" ]; then echo "$dest"; exit 0; fi
	in_sysroot "$BUILD/e2e-programs.sh" --inside "$dest" >&2
	[ -d "$dest" ] || die "e2e programs build did not complete"
	echo "$dest"
	exit 0
fi

# --- from here on we run inside the sysroot ---
dest=$2
lib=$TOP/tools/testing/e2e/lib
rm -rf "$dest.tmp"
mkdir -p "$dest.tmp"
log "e2e programs: cc tools/testing/e2e/lib/*.c"
cflags=(-O1 -Wall -Werror -I "$TOP/include/uapi")
for p in uverbs_hostile uverbs_hostile_rings uverbs_lying_cqes uverbs_verbs_ex; do
	cc "${cflags[@]}" -o "$dest.tmp/$p" "$lib/$p.c" -libverbs || die "cannot build $lib/$p.c"
done
# An LD_PRELOAD shim (verbs-ex.sh).
cc "${cflags[@]}" -shared -fPIC -o "$dest.tmp/perftest_wr_api.so" "$lib/perftest_wr_api.c" -ldl ||
	die "cannot build $lib/perftest_wr_api.c"
mv "$dest.tmp" "$dest"
