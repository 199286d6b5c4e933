#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# make check: every test layer, each test counted once.
#   0. style: rustfmt of every Rust file, checkpatch of the C files (kernel
#      and rdma-core provider) and of the QEMU patches (QEMU's), clippy
#      of tools/ (the kernel's
#      Rust is linted by building with CLIPPY=1: tools/build/kernel.sh CLIPPY=1)
#   1. cargo tests of tools/ (the device backend), in the sysroot, and a
#      short run of each of its fuzz targets
#   2. KUnit under QEMU (a TCG guest), parsed by the kernel's kunit.py
#   3. the runner's own contract (exit status, timeout, and that a kernel
#      WARN, a kmemleak report or a failing peer guest fails a run)
#   4. end-to-end tests in fresh guests (tools/testing/e2e/*.sh) on the
#      debug kernel: any WARN/lockdep/KASAN/kmemleak report fails the test
# Ends with one line: "N passed, N failed".
source "$(dirname "$0")/../build/lib.sh"
set +e # a failing test is counted, not fatal
RUN="$TOP/tools/testing/vm/run.sh"
logs="$VRDMA_CACHE/check-logs"
rm -rf "$logs"
mkdir -p "$logs"
passed=0 failed=0 failures=()

result() { # NAME STATUS
	if [ "$2" = 0 ]; then
		passed=$((passed + 1)); printf '  ok    %s\n' "$1"
	else
		failed=$((failed + 1)); failures+=("$1"); printf '  FAIL  %s\n' "$1"
	fi
}

echo "== style (rustfmt, clippy)"
# Kernel-side Rust of the overlay, with the kernel's own rustfmt settings.
krs=$(cd "$TOP" && find rust drivers samples -name '*.rs' | sort)
in_sysroot bash -c "cd '$TOP' && rustfmt --edition 2021 --check \
	--config-path '$(kernel_dir)/src/.rustfmt.toml' $(echo $krs)" >"$logs/rustfmt-kernel.log" 2>&1
result "rustfmt: kernel Rust ($(echo $krs | wc -w) files)" $?
# The C files of the overlay, the test modules and programs, and the rdma-core provider
# (rdma-core follows the kernel's style), with the kernel's checkpatch.
cfiles=$(cd "$TOP" && find rust drivers include samples tools/testing/kmod tools/testing/e2e tools/rdma-core -name '*.[ch]' | sort)
in_sysroot bash -c "cd '$TOP' && perl '$(kernel_dir)/src/scripts/checkpatch.pl' --no-tree --quiet \
	-f $(echo $cfiles)" >"$logs/checkpatch.log" 2>&1
result "checkpatch: C files ($(echo $cfiles | wc -w))" $?
# The QEMU patches, as qemu-devel would check them: QEMU's checkpatch on each
# (errors fail; patch 1's warning about imported Linux headers is expected).
qemu_src="$(dirname "$(dirname "$(qemu_bin)")")/src"
for p in "$TOP"/tools/qemu/patches/*.patch; do
	in_sysroot perl "$qemu_src/scripts/checkpatch.pl" --no-signoff --quiet "$p" \
		>"$logs/checkpatch-qemu-$(basename "$p" .patch).log" 2>&1
	result "checkpatch (QEMU's): $(basename "$p")" $?
done
for manifest in "$TOP"/tools/*/Cargo.toml; do
	crate=$(basename "$(dirname "$manifest")")
	in_sysroot cargo fmt --manifest-path "$manifest" --check >"$logs/rustfmt-$crate.log" 2>&1
	result "rustfmt: $crate" $?
	in_sysroot cargo clippy --locked --manifest-path "$manifest" --all-targets \
		--target-dir "$VRDMA_CACHE/cargo-target" -j"$JOBS" -- -D warnings \
		>"$logs/clippy-$crate.log" 2>&1
	result "clippy: $crate" $?
done

echo "== cargo tests (tools/)"
for manifest in "$TOP"/tools/*/Cargo.toml; do
	crate=$(basename "$(dirname "$manifest")")
	log="$logs/cargo-$crate.log"
	in_sysroot cargo test --locked --manifest-path "$manifest" \
		--target-dir "$VRDMA_CACHE/cargo-target" -j"$JOBS" >"$log" 2>&1
	rc=$?
	n=0
	while read -r name verdict; do
		n=$((n + 1))
		[ "$verdict" = ok ] && result "cargo $crate: $name" 0 || result "cargo $crate: $name" 1
	done < <(sed -n 's/^test \(.*\) \.\.\. \(ok\|FAILED\|ignored\)$/\1 \2/p' "$log" | grep -v ' ignored$')
	# A build failure or a crashed test binary reports no test lines.
	if [ $rc != 0 ] || [ $n = 0 ]; then result "cargo $crate: build and run (see $log)" 1; fi
done
# Fuzzing of the backend's guest-facing parsers: a short run of each
# cargo-fuzz target (tools/vhost-user-rdma/fuzz/run.sh; corpora kept).
for target in ctrl_command work_request; do
	in_sysroot "$TOP/tools/vhost-user-rdma/fuzz/run.sh" 20 "$target" \
		>"$logs/fuzz-$target.log" 2>&1
	result "fuzz vhost-user-rdma: $target (20 s)" $?
done

echo "== KUnit (under QEMU, parsed by kunit.py)"
kunit_out="$logs/kunit"
modules=$(sed 's/#.*//' "$TOP/tools/testing/kunit.modules" | xargs)
"$RUN" --timeout 900 --out "$kunit_out" --append "kunit.enable=1 log_buf_len=16M" -- \
	"rc=0; ${modules:+modprobe -a $modules || rc=\$?; }dmesg >/mnt/run/kunit.log; exit \$rc" \
	>"$logs/kunit-guest.log" 2>&1
rc=$?
if [ $rc != 0 ] || [ ! -s "$kunit_out/kunit.log" ]; then
	result "KUnit guest run (see $logs/kunit-guest.log)" 1
else
	kunit_py="$(kernel_dir)/src/tools/testing/kunit/kunit.py"
	kt="$TOP/tools/testing/kunit-results.py"
	n=0 parse_rc=0
	python3 "$kt" split "$kunit_out/kunit.log" "$kunit_out/docs" || parse_rc=1
	for doc in "$kunit_out"/docs/doc-*.log; do
		[ -e "$doc" ] || continue
		in_sysroot python3 "$kunit_py" parse --json="${doc%.log}.json" "$doc" \
			>>"$logs/kunit-summary.log" 2>&1 || parse_rc=1
		while read -r verdict name; do
			n=$((n + 1))
			# a skipped case (e.g. a doctest needing hardware) is not a failure
			result "kunit: $name" "$([ "$verdict" = PASS ] || [ "$verdict" = SKIP ] && echo 0 || echo 1)"
		done < <(python3 "$kt" cases "${doc%.log}.json" 2>/dev/null)
	done
	if [ $n = 0 ] || [ $parse_rc != 0 ]; then
		result "kunit.py parse (see $logs/kunit-summary.log)" 1
	fi
	grep -o "Testing complete.*" "$logs/kunit-summary.log" | sed 's/^/  /'
fi

echo "== runner contract"
"$RUN" --timeout 300 -- 'exit 3' >"$logs/runner-status.log" 2>&1
result "runner: guest command's exit status (3) comes back" "$([ $? = 3 ] && echo 0 || echo 1)"
"$RUN" --timeout 40 -- 'sleep 1000' >"$logs/runner-timeout.log" 2>&1
rc=$?
grep -q "did not finish within" "$logs/runner-timeout.log" && [ $rc = 124 ]
result "runner: a hung guest is killed with a clear message" $?
# The checkers must be able to fail a test: provoke a WARN (lkdtm) and a leak
# (the kmemleak sample module) and expect the runner's verdicts.
"$RUN" --timeout 300 -- 'modprobe lkdtm && echo WARNING >/sys/kernel/debug/provoke-crash/DIRECT' \
	>"$logs/runner-warn.log" 2>&1
result "runner: a kernel WARN fails the run (98)" "$([ $? = 98 ] && echo 0 || echo 1)"
"$RUN" --kmemleak --timeout 300 -- 'modprobe kmemleak-test' >"$logs/runner-kmemleak.log" 2>&1
result "runner: a kmemleak report fails the run (97)" "$([ $? = 97 ] && echo 0 || echo 1)"
# QEMU refuses a num-queues the backend cannot serve, at start, saying so.
"$RUN" --timeout 120 --num-queues 70 -- true >"$logs/runner-num-queues.log" 2>&1
rc=$?
grep -q "maximum number of queues supported by the backend is 66" "$logs/runner-num-queues.log" &&
	[ $rc != 0 ]
result "qemu: num-queues above the backend's is refused at start" $?
# A two-guest run fails when the peer's command fails, though the main's passed.
"$RUN" --timeout 300 --peer 'exit 3' -- true >"$logs/runner-peer.log" 2>&1
rc=$?
grep -q "the peer guest failed" "$logs/runner-peer.log" && [ $rc = 3 ]
result "runner: a failing peer guest fails the run (3)" $?
leftover=$(pgrep -f "vrdma-run|vhost-user-rdma --socket" || true)
result "runner: no process left behind" "$([ -z "$leftover" ] && echo 0 || echo 1)"

echo "== end-to-end (debug kernel, one fresh guest each)"
for t in "$TOP"/tools/testing/e2e/*.sh; do
	name=$(basename "$t" .sh)
	# A test may ask for backend options with a "# backend-args: ..." line.
	bargs=$(sed -n 's/^# backend-args: //p' "$t" | head -1)
	# A "# peer: CMD" line runs CMD in a second guest beside it (run.sh --peer).
	peer=$(sed -n 's/^# peer: //p' "$t" | head -1)
	"$RUN" --kmemleak --timeout 900 --backend-args "$bargs" ${peer:+--peer "$peer"} \
		--out "$logs/e2e-$name" -- "bash tools/testing/e2e/$name.sh" >"$logs/e2e-$name.log" 2>&1
	result "e2e: $name" $?
done

echo
if [ $failed -gt 0 ]; then
	echo "failed:"
	printf '  %s\n' "${failures[@]}"
	echo "logs: $logs"
fi
echo "$passed passed, $failed failed"
[ $failed = 0 ]
