#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# make check: every test layer, each test counted once.
#   style   rustfmt of every Rust file, checkpatch of the C files (kernel
#           and rdma-core provider) and of the QEMU patches (QEMU's), clippy
#           of tools/ (the kernel's Rust is linted by building with CLIPPY=1:
#           tools/build/kernel.sh CLIPPY=1)
#   cargo   cargo tests of tools/ (the device backend), in the sysroot, a
#           short run of each of its fuzz targets, and the unit tests of the
#           provider's work request tables (tools/rdma-core/tests)
#   kunit   KUnit under QEMU (a TCG guest), parsed by the kernel's kunit.py
#   runner  the runner's own contract (exit status, timeout, and that a
#           kernel WARN, a kmemleak report or a failing peer guest fails a run)
#   e2e     end-to-end tests (tools/testing/e2e/*.sh) on the debug kernel:
#           any WARN/lockdep/KASAN/kmemleak report fails the test. Tests
#           that need their own backend options ("# backend-args:"), a peer
#           guest ("# peer:", and "# peer-rdma: rxe" or "# hosts: 2" for a
#           peer host with rxe or with its own backend on the main guest's
#           network), an MTU ("# mtu: 9000", run.sh --mtu), several
#           devices ("# devices: 3", run.sh --devices), a reboot
#           ("# reboot", run.sh --reboot) or say
#           "# guest: own" get a fresh guest each;
#           the others share guests (run.sh --suite), each still with its
#           own verdict, kernel log and leak check.
#   e2e-rings
#           the e2e suite again with the device's queues in guest memory
#           (the backend's --rings): every QP and CQ, the kernel's and the
#           processes', on rings. Results are named NAME@rings (TEST may
#           name one: TEST=srq@rings). A test about the virtqueue
#           mode itself, or one the ring mode would only repeat, says
#           "# modes: virtqueues" (and why) and is left out; one whose
#           backend-args ask for --rings already runs in this mode.
#   e2e-net the tests that say so ("# modes: ... net") again over the
#           virtio-net personality (the backend's --net --rings: a virtio-net
#           function whose RoCE half virtio_rdma binds through virtio_net's
#           auxiliary device). Results are named NAME@net. A test's
#           "# modes:" line lists the modes it runs in, of virtqueues, rings
#           and net; without one it runs in virtqueues and rings. Net implies
#           rings (its RoCE half always has queues in guest memory), so a
#           test runs in rings or net, not both.
#
# TEST="WORD..." runs only part: a word is a layer's name or an e2e test's
# name (a shell pattern: TEST='nvme-*'); e.g. TEST=rdma-link runs that test
# alone. Every line says how long it took, and the end gives each layer's
# wall time. VRDMA_BUDGET (minutes, default 85) is how long make check may
# run, counted from make's start (VRDMA_CHECK_T0) so that the builds count
# too: past it no further guest starts, and each test left out fails, saying
# so, rather than CI's limit (90 min) killing the run without a verdict.
# Ends with one line: "N passed, N failed".
source "$(dirname "$0")/../build/lib.sh"
set +e # a failing test is counted, not fatal
RUN="$TOP/tools/testing/vm/run.sh"
# Every backend of the suite serves each device with two threads (the
# backend's --threads; its default on a 2-core host is one), so that every
# test also runs a device's QPs on two threads at once.
LANES="--threads 2"
E2E="$TOP/tools/testing/e2e"
logs="$VRDMA_CACHE/check-logs"
rm -rf "$logs"
mkdir -p "$logs"
passed=0 failed=0 failures=()
t0=${VRDMA_CHECK_T0:-$(date +%s)}
budget=$((${VRDMA_BUDGET:-85} * 60))
read -r -a test_words <<<"${TEST:-}"

# Whether the registry has moved on from the cached sysroot: asked now, said
# at the end (tools/build/drift.sh; never a failure).
"$BUILD/drift.sh" >"$logs/drift.txt" 2>&1 &
drift_pid=$!

min_sec() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# result NAME STATUS [SECONDS]
# result NAME STATUS [SECONDS [LOG]]: counts and prints a verdict; a failure
# shows the end of LOG too, since CI keeps only what check.sh prints.
result() {
	local t=""
	[ -n "${3:-}" ] && t=" ($3 s)"
	if [ "$2" = 0 ]; then
		passed=$((passed + 1)); printf '  ok    %s%s\n' "$1" "$t"
	else
		failed=$((failed + 1)); failures+=("$1"); printf '  FAIL  %s%s\n' "$1" "$t"
		if [ -s "${4:-}" ]; then
			echo "        --- the last 40 lines of $4:"
			tail -40 "$4" | sed 's/^/        | /'
		fi
	fi
}
# timed [--log LOG] NAME CMD...: runs CMD; the result is its exit status,
# with its time (and on failure the end of LOG).
timed() {
	local log="" name s=$SECONDS
	if [ "$1" = --log ]; then log=$2; shift 2; fi
	name=$1
	shift
	"$@"
	result "$name" $? $((SECONDS - s)) "$log"
}

# Layers: what TEST selects, and each one's wall time.
layers=() layer_times=() layer_start=0
layer() { # NAME TITLE
	layer_end
	layers+=("$1")
	layer_start=$SECONDS
	echo "== $2"
}
layer_end() {
	[ ${#layers[@]} -gt ${#layer_times[@]} ] && layer_times+=($((SECONDS - layer_start)))
}
e2e_names=$(cd "$E2E" && ls *.sh | sed 's/\.sh$//')
want_layer() {
	local w
	[ ${#test_words[@]} = 0 ] && return 0
	for w in "${test_words[@]}"; do
		[ "$w" = "$1" ] && return 0
	done
	return 1
}
want_e2e() {
	local w
	[ ${#test_words[@]} = 0 ] && return 0
	for w in "${test_words[@]}"; do
		# shellcheck disable=SC2053 # a pattern on purpose
		[ "$w" = e2e ] || [[ "$1" == $w ]] && return 0
	done
	return 1
}
# want_e2e_in MODE NAME: whether the run of test NAME in MODE (rings, net) is
# asked for.
want_e2e_in() {
	local w
	[ ${#test_words[@]} = 0 ] && return 0
	for w in "${test_words[@]}"; do
		# shellcheck disable=SC2053 # a pattern on purpose
		[ "$w" = "e2e-$1" ] || [[ "$2@$1" == $w ]] && return 0
	done
	return 1
}
want_e2e_rings() { want_e2e_in rings "$1"; }
want_e2e_net() { want_e2e_in net "$1"; }
# modes_of FILE: the modes test FILE runs in (its "# modes:" line, without
# the reason in parentheses; virtqueues and rings if it has none).
modes_of() {
	local m
	m=$(sed -n 's/^# modes: \([a-z ]*\).*/\1/p' "$1" | head -1)
	echo " ${m:-virtqueues rings} "
}
for w in "${test_words[@]}"; do
	case " style cargo kunit runner e2e e2e-rings e2e-net " in *" $w "*) continue ;; esac
	for n in $e2e_names; do
		# shellcheck disable=SC2053
		[[ "$n" == $w ]] || [[ "$n@rings" == $w ]] || [[ "$n@net" == $w ]] && continue 2
	done
	die "TEST: '$w' names no layer (style cargo kunit runner e2e e2e-rings e2e-net) and no test in $E2E"
done

# in_budget WHAT...: false (and each WHAT fails, saying why) once make
# check has used its budget.
in_budget() {
	local used=$(($(date +%s) - t0)) what
	[ $used -lt $budget ] && return 0
	for what in "$@"; do
		result "$what: not run, make check used $(min_sec $used) of its budget of $(min_sec $budget)" 1
	done
	return 1
}
# limit SECONDS: SECONDS, or what is left of the budget if that is less (a
# guest is not let run past the budget; at least a minute).
limit() {
	local left=$((budget - ($(date +%s) - t0)))
	[ $left -lt 60 ] && left=60
	echo $(($1 < left ? $1 : left))
}

# expect_rc WANT LOG [PATTERN]: the last command's status was WANT (and LOG
# says PATTERN).
expect_rc() {
	local rc=$?
	[ "$rc" = "$1" ] && { [ -z "${3:-}" ] || grep -q "$3" "$2"; }
}

if want_layer style; then
	layer style "style (rustfmt, checkpatch, clippy)"
	# The drift line can say what it guards: against a recorded set with
	# versions the registry no longer serves, and a package list with a pin
	# it serves nothing for, it names both and still exits 0.
	s=$SECONDS
	drift_test="$VRDMA_CACHE/drift-test"
	mkdir -p "$drift_test"
	sed 's/^\(rustc\|cargo\) .*/\1 1.97.1+dfsg1-1~bpo13+1 trixie-backports/' "$(sysroot_resolved)" >"$drift_test/resolved"
	sed 's/^rustc=[^ ]* trixie$/rustc=1.97.1 trixie-backports/' "$BUILD/sysroot.packages" >"$drift_test/packages"
	VRDMA_PACKAGES="$drift_test/packages" "$BUILD/drift.sh" "$drift_test/resolved" >"$logs/drift-test.log" 2>&1
	expect_rc 0 "$logs/drift-test.log" "^REGISTRY DRIFT: .*make setup would FAIL there.* rustc 1.97.1+dfsg1-1~bpo13+1 (no 1.97.1 in trixie-backports now).* cargo 1.97.1+dfsg1-1~bpo13+1 -> 1.85.1"
	result "drift: a version the registry stopped serving is named, and does not fail make check" $? \
		$((SECONDS - s)) "$logs/drift-test.log"
	# Kernel-side Rust of the overlay, with the kernel's own rustfmt settings.
	krs=$(cd "$TOP" && find rust drivers samples -name '*.rs' | sort)
	timed --log "$logs/rustfmt-kernel.log" "rustfmt: kernel Rust ($(echo $krs | wc -w) files)" \
		in_sysroot bash -c "cd '$TOP' && rustfmt --edition 2021 --check \
		--config-path '$(kernel_dir)/src/.rustfmt.toml' $(echo $krs) >'$logs/rustfmt-kernel.log' 2>&1"
	# The C files of the overlay, the test modules and programs, and the
	# rdma-core provider (rdma-core follows the kernel's style), with the
	# kernel's checkpatch. rdma-core's verbs return positive errno values,
	# so the provider is not held to the kernel's negative ones.
	cfiles=$(cd "$TOP" && find rust drivers include samples tools/testing/kmod tools/testing/e2e -name '*.[ch]' | sort)
	timed --log "$logs/checkpatch.log" "checkpatch: C files ($(echo $cfiles | wc -w))" \
		in_sysroot bash -c "cd '$TOP' && perl '$(kernel_dir)/src/scripts/checkpatch.pl' --no-tree --quiet \
		-f $(echo $cfiles) >'$logs/checkpatch.log' 2>&1"
	cfiles=$(cd "$TOP" && find tools/rdma-core -name '*.[ch]' | sort)
	timed --log "$logs/checkpatch-provider.log" "checkpatch: rdma-core provider ($(echo $cfiles | wc -w) files)" \
		in_sysroot bash -c "cd '$TOP' && perl '$(kernel_dir)/src/scripts/checkpatch.pl' --no-tree --quiet \
		--ignore USE_NEGATIVE_ERRNO -f $(echo $cfiles) >'$logs/checkpatch-provider.log' 2>&1"
	# The QEMU patches, as qemu-devel would check them: QEMU's checkpatch on
	# each (errors fail; patch 1's warning about imported Linux headers is
	# expected).
	qemu_src="$(dirname "$(dirname "$(qemu_bin)")")/src"
	for p in "$TOP"/tools/qemu/patches/*.patch; do
		timed --log "$logs/checkpatch-qemu-$(basename "$p" .patch).log" "checkpatch (QEMU's): $(basename "$p")" \
			in_sysroot bash -c "perl '$qemu_src/scripts/checkpatch.pl' --no-signoff --quiet '$p' \
			>'$logs/checkpatch-qemu-$(basename "$p" .patch).log' 2>&1"
	done
	for manifest in "$TOP"/tools/*/Cargo.toml; do
		crate=$(basename "$(dirname "$manifest")")
		timed --log "$logs/rustfmt-$crate.log" "rustfmt: $crate" in_sysroot bash -c \
			"cargo fmt --manifest-path '$manifest' --check >'$logs/rustfmt-$crate.log' 2>&1"
		timed --log "$logs/clippy-$crate.log" "clippy: $crate" in_sysroot bash -c \
			"cargo clippy --locked --manifest-path '$manifest' --all-targets \
			--target-dir '$VRDMA_CACHE/cargo-target' -j$JOBS -- -D warnings \
			>'$logs/clippy-$crate.log' 2>&1"
	done
fi

if want_layer cargo; then
	layer cargo "cargo tests (tools/)"
	for manifest in "$TOP"/tools/*/Cargo.toml; do
		crate=$(basename "$(dirname "$manifest")")
		log="$logs/cargo-$crate.log"
		s=$SECONDS
		# --all-features: the fuzz targets' harness (feature fuzzing) has
		# tests of its own.
		in_sysroot cargo test --locked --all-features --manifest-path "$manifest" \
			--target-dir "$VRDMA_CACHE/cargo-target" -j"$JOBS" >"$log" 2>&1
		rc=$?
		echo "  ($crate: built and ran in $((SECONDS - s)) s)"
		n=0
		while read -r name verdict; do
			n=$((n + 1))
			[ "$verdict" = ok ] && result "cargo $crate: $name" 0 || result "cargo $crate: $name" 1
		done < <(sed -n 's/^test \(.*\) \.\.\. \(ok\|FAILED\|ignored\)$/\1 \2/p' "$log" | grep -v ' ignored$')
		# A build failure or a crashed test binary reports no test lines.
		if [ $rc != 0 ] || [ $n = 0 ]; then result "cargo $crate: build and run (see $log)" 1 "" "$log"; fi
	done
	# The provider's work request tables (pure C): unit tests on the host.
	log="$logs/provider-wr-table.log"
	# Sanitizer reports are fatal (-fno-sanitize-recover; ASan and LeakSanitizer
	# exit non-zero), and a non-zero exit fails the layer even after "ok" lines.
	in_sysroot bash -c "cd '$TOP' && cc -O1 -Wall -Werror -fsanitize=address,undefined \
		-fno-sanitize-recover=all \
		-I tools/rdma-core/providers/virtio_rdma -o /tmp/vrdma-wr-table-test \
		tools/rdma-core/tests/wr_table_test.c tools/rdma-core/providers/virtio_rdma/wr_table.c \
		&& /tmp/vrdma-wr-table-test" >"$log" 2>&1
	rc=$?
	n=0
	while read -r name verdict; do
		n=$((n + 1))
		[ "$verdict" = ok ] && result "provider wr_table: $name" 0 || result "provider wr_table: $name" 1
	done < <(sed -n 's/^test \(.*\) \.\.\. \(ok\|FAILED\)$/\1 \2/p' "$log")
	if [ $rc != 0 ] || [ $n = 0 ]; then result "provider wr_table: build and run (see $log)" 1 "" "$log"; fi
	# Fuzzing of the backend's parsers of what guests (and networks) send: a
	# short run of each cargo-fuzz target (tools/vhost-user-rdma/fuzz/run.sh).
	# The corpora are kept in the cache, so each run starts where the last
	# one stopped: 10 s each adds to what every earlier run found.
	for target in ctrl_command work_request data_path packet; do
		timed --log "$logs/fuzz-$target.log" "fuzz vhost-user-rdma: $target (10 s)" in_sysroot bash -c \
			"CARGO_BUILD_JOBS=$JOBS '$TOP/tools/vhost-user-rdma/fuzz/run.sh' 10 '$target' >'$logs/fuzz-$target.log' 2>&1"
	done
fi

if want_layer kunit && in_budget "KUnit"; then
	layer kunit "KUnit (under QEMU, parsed by kunit.py)"
	kunit_out="$logs/kunit"
	modules=$(sed 's/#.*//' "$TOP/tools/testing/kunit.modules" | xargs)
	s=$SECONDS
	"$RUN" --timeout "$(limit 900)" --out "$kunit_out" --append "kunit.enable=1 log_buf_len=16M" -- \
		"rc=0; ${modules:+modprobe -a $modules || rc=\$?; }dmesg >/mnt/run/kunit.log; exit \$rc" \
		>"$logs/kunit-guest.log" 2>&1
	rc=$?
	echo "  (the KUnit guest ran for $((SECONDS - s)) s)"
	if [ $rc != 0 ] || [ ! -s "$kunit_out/kunit.log" ]; then
		result "KUnit guest run (see $logs/kunit-guest.log)" 1 "" "$logs/kunit-guest.log"
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
			result "kunit.py parse (see $logs/kunit-summary.log)" 1 "" "$logs/kunit-summary.log"
		fi
		grep -o "Testing complete.*" "$logs/kunit-summary.log" | sed 's/^/  /'
	fi
fi

if want_layer runner && in_budget "runner contract"; then
	layer runner "runner contract"
	s=$SECONDS
	"$RUN" --timeout 300 -- 'exit 3' >"$logs/runner-status.log" 2>&1
	expect_rc 3 "$logs/runner-status.log"
	result "runner: guest command's exit status (3) comes back" $? $((SECONDS - s)) "$logs/runner-status.log"
	s=$SECONDS
	"$RUN" --timeout 20 -- 'sleep 1000' >"$logs/runner-timeout.log" 2>&1
	expect_rc 124 "$logs/runner-timeout.log" "did not finish within"
	result "runner: a hung guest is killed with a clear message" $? $((SECONDS - s)) "$logs/runner-timeout.log"
	# A guest that never reaches init.sh (init=/bin/cat waits on the console
	# for ever) stands for an early-boot hang: the runner shows where its
	# vCPUs are, boots it once more, and then gives up.
	s=$SECONDS
	VRDMA_BOOT_LIMIT=5 "$RUN" --timeout 300 --append init=/bin/cat -- true >"$logs/runner-boot-hang.log" 2>&1
	expect_rc 124 "$logs/runner-boot-hang.log" "hung in early boot twice" &&
		[ "$(grep -c "did not reach init within 5s" "$logs/runner-boot-hang.log")" = 2 ] &&
		grep -q "^look 3: ffffffff[0-9a-f]* [a-z_]" "$logs/runner-boot-hang.log"
	result "runner: a guest hung in early boot is shown, booted again, then failed" $? $((SECONDS - s)) "$logs/runner-boot-hang.log"
	# The same for the peer of two guests, while the main one waits for it:
	# both are stopped at the limit and booted again; before --timeout (300 s),
	# which a run still waiting for the hung peer would reach.
	s=$SECONDS
	# (30 s: the main guest, booting beside an idle one, reaches init in 15.)
	VRDMA_BOOT_LIMIT=30 VRDMA_PEER_APPEND=init=/bin/cat "$RUN" --timeout 300 --peer true -- 'sleep 600' \
		>"$logs/runner-peer-boot-hang.log" 2>&1
	expect_rc 124 "$logs/runner-peer-boot-hang.log" "hung in early boot twice" &&
		[ "$(grep -c "guest 1 did not reach init within 30s" "$logs/runner-peer-boot-hang.log")" = 2 ] &&
		[ $((SECONDS - s)) -lt 250 ]
	result "runner: a peer hung in early boot stops both guests, which boot again, then fail" $? \
		$((SECONDS - s)) "$logs/runner-peer-boot-hang.log"
	# The checkers must be able to fail a test: provoke a WARN (lkdtm) and a
	# leak (the kmemleak sample module) and expect the runner's verdicts.
	s=$SECONDS
	"$RUN" --timeout 300 -- 'modprobe lkdtm && echo WARNING >/sys/kernel/debug/provoke-crash/DIRECT' \
		>"$logs/runner-warn.log" 2>&1
	expect_rc 98 "$logs/runner-warn.log"
	result "runner: a kernel WARN fails the run (98)" $? $((SECONDS - s)) "$logs/runner-warn.log"
	s=$SECONDS
	"$RUN" --kmemleak --timeout 300 -- 'modprobe kmemleak-test' >"$logs/runner-kmemleak.log" 2>&1
	expect_rc 97 "$logs/runner-kmemleak.log"
	result "runner: a kmemleak report fails the run (97)" $? $((SECONDS - s)) "$logs/runner-kmemleak.log"
	# A shared guest keeps each test's verdict its own: a test that leaks
	# fails for it while the plain one after it passes and sees nothing of
	# it; a task hung in D state and an RCU stall report each fail the test
	# in whose time they appear; one that WARNs and leaves a module pinned fails for both, and the
	# guest (tainted now) stops after it: the test after it is not run
	# there. (tools/testing/vm/suite-selftest/)
	s=$SECONDS
	st="$TOP/tools/testing/vm/suite-selftest"
	(cd "$TOP" && ls tools/testing/vm/suite-selftest/*.sh) >"$logs/runner-suite.list"
	"$RUN" --kmemleak --timeout 600 --suite "$logs/runner-suite.list" --out "$logs/runner-suite" \
		>"$logs/runner-suite.log" 2>&1
	r="$logs/runner-suite/results"
	[ "$(cat "$r/1-leak/status" 2>/dev/null)" = 97 ] &&
		[ "$(cat "$r/2-pass/status" 2>/dev/null)" = 0 ] &&
		[ "$(cat "$r/3-hung-task/status" 2>/dev/null)" = 98 ] &&
		grep -q "INFO: task cat:[0-9]* blocked" "$r/3-hung-task/output.log" &&
		[ "$(cat "$r/4-rcu-stall/status" 2>/dev/null)" = 98 ] &&
		grep -q "rcu: INFO: rcu_preempt detected stalls" "$r/4-rcu-stall/output.log" &&
		[ "$(cat "$r/5-warn-and-pin/status" 2>/dev/null)" = 98 ] &&
		grep -q "cannot be unloaded after the test.*nvmet" "$r/5-warn-and-pin/output.log" &&
		[ ! -e "$r/6-not-run" ] &&
		[ "$(cat "$logs/runner-suite/dirty" 2>/dev/null)" = 5-warn-and-pin ]
	result "runner: a shared guest keeps each test's verdict (leak, hung task, RCU stall, WARN, module left) its own" $? \
		$((SECONDS - s)) "$logs/runner-suite.log"
	# QEMU refuses a num-queues the backend cannot serve, at start, saying so.
	s=$SECONDS
	"$RUN" --timeout 120 --num-queues 70 -- true >"$logs/runner-num-queues.log" 2>&1
	rc=$?
	grep -q "maximum number of queues supported by the backend is 66" "$logs/runner-num-queues.log" &&
		[ $rc != 0 ]
	result "qemu: num-queues above the backend's is refused at start" $? $((SECONDS - s)) \
		"$logs/runner-num-queues.log"
	# A two-guest run fails when the peer's command fails, though the main's
	# passed.
	s=$SECONDS
	"$RUN" --timeout 300 --peer 'exit 3' -- true >"$logs/runner-peer.log" 2>&1
	expect_rc 3 "$logs/runner-peer.log" "the peer guest failed"
	result "runner: a failing peer guest fails the run (3)" $? $((SECONDS - s)) "$logs/runner-peer.log"
	# --own-cpus gives each guest a CPU of its own at least: two guests on
	# one CPU are refused before anything boots.
	s=$SECONDS
	taskset -c "$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')" \
		"$RUN" --timeout 60 --own-cpus --peer true -- true >"$logs/runner-own-cpus.log" 2>&1
	expect_rc 2 "$logs/runner-own-cpus.log" "2 guests need a CPU each, 1 here"
	result "runner: --own-cpus with fewer CPUs than guests is refused (2)" $? $((SECONDS - s)) \
		"$logs/runner-own-cpus.log"
	leftover=$(pgrep -f "vrdma-run|vhost-user-rdma --socket" || true)
	result "runner: no process left behind" "$([ -z "$leftover" ] && echo 0 || echo 1)"
fi

# The mode of the e2e run under way: "" (virtqueues), "@rings" or "@net",
# which names its results, and the backend options it adds to every guest.
mode="" mode_args=""
# e2e_result NAME DIR: the verdict of test NAME from a suite's results DIR.
e2e_result() {
	cp "$2/$1/output.log" "$logs/e2e-$1$mode.log" 2>/dev/null
	result "e2e: $1$mode" "$(cat "$2/$1/status")" "$(cat "$2/$1/seconds" 2>/dev/null)" \
		"$logs/e2e-$1$mode.log"
}
# run_shared NAME...: the tests in as few guests as they allow.
run_shared() {
	local rest=("$@") next n k=0 out cur names
	while [ ${#rest[@]} -gt 0 ]; do
		names=("${rest[@]/#/e2e: }")
		in_budget "${names[@]/%/$mode}" || return
		k=$((k + 1))
		out="$logs/e2e${mode/@/-}-shared-$k"
		printf 'tools/testing/e2e/%s.sh\n' "${rest[@]}" >"$out.list"
		echo "  (shared guest $k${mode:+ $mode}: ${rest[*]})"
		"$RUN" --kmemleak --timeout "$(limit $((120 + 600 * ${#rest[@]})))" --suite "$out.list" \
			--backend-args "$LANES${mode_args:+ $mode_args}" --out "$out" >"$out.log" 2>&1
		cur=$(cat "$out/current" 2>/dev/null)
		next=()
		for n in "${rest[@]}"; do
			if [ -f "$out/results/$n/status" ]; then
				e2e_result "$n" "$out/results"
			elif [ "$n" = "$cur" ]; then
				cp "$out/results/$n/output.log" "$logs/e2e-$n$mode.log" 2>/dev/null
				result "e2e: $n$mode (the guest ended during it: $out.log)" 1 "" "$out.log"
			else
				next+=("$n")
			fi
		done
		[ -f "$out/dirty" ] && echo "  ($(cat "$out/dirty") left the guest changed ($out/results/$(cat "$out/dirty")/dirty.diff): the rest get a new guest)"
		if [ ${#next[@]} = ${#rest[@]} ]; then
			for n in "${next[@]}"; do result "e2e: $n$mode (the guest ran no test: $out.log)" 1; done
			return
		fi
		rest=("${next[@]}")
	done
}

# run_e2e WANT: the e2e tests that WANT (want_e2e or want_e2e_rings) selects,
# in the mode set in $mode and $mode_args.
run_e2e() {
	local want=$1 n t bargs tmo peer peer_rdma hosts mtu ndev reboot cpus s shared=()
	for n in $e2e_names; do
		$want "$n" || continue
		t="$E2E/$n.sh"
		# A test may ask for backend options with a "# backend-args: ..."
		# line, and a "# peer: CMD" line runs CMD in a second guest beside it
		# (run.sh --peer), a "# peer-rdma: rxe" line makes that guest a
		# host with rxe on the main guest's uplink (run.sh --peer-rdma), a
		# "# hosts: 2" line gives it a virtio-rdma device of a second
		# backend on that network (run.sh --hosts), a "# mtu: BYTES" line
		# sets the run's Ethernet MTU (run.sh --mtu), a "# devices: N" line
		# gives the guest N devices (run.sh --devices), a "# reboot" line lets
		# the guest reboot (run.sh --reboot), an "# own-cpus" line gives
		# each guest CPUs of its own (run.sh --own-cpus), a "# timeout:
		# SECONDS" line bounds its guest
		# (else 900 s); such a test, and one that says "# guest: own", gets
		# a guest of its own.
		bargs=$(sed -n 's/^# backend-args: //p' "$t" | head -1)
		tmo=$(sed -n 's/^# timeout: \([0-9]*\)$/\1/p' "$t" | head -1)
		peer=$(sed -n 's/^# peer: //p' "$t" | head -1)
		peer_rdma=$(sed -n 's/^# peer-rdma: //p' "$t" | head -1)
		hosts=$(sed -n 's/^# hosts: //p' "$t" | head -1)
		mtu=$(sed -n 's/^# mtu: \([0-9]*\)$/\1/p' "$t" | head -1)
		ndev=$(sed -n 's/^# devices: \([0-9]*\)$/\1/p' "$t" | head -1)
		reboot=""
		if grep -q '^# reboot$' "$t"; then reboot=--reboot; fi
		cpus=""
		if grep -q '^# own-cpus$' "$t"; then cpus=--own-cpus; fi
		case "$mode" in
		"") [[ "$(modes_of "$t")" == *" virtqueues "* ]] || continue ;;
		@rings)
			[[ "$(modes_of "$t")" == *" rings "* ]] || continue
			# It runs with rings (or the net personality) in the plain run already.
			[[ " $bargs " == *" --rings "* ]] && continue
			;;
		@net)
			[[ "$(modes_of "$t")" == *" net "* ]] || continue
			[[ " $bargs " == *" --net "* ]] && continue
			# --rings comes with the mode.
			bargs=$(echo " $bargs " | sed 's/ --rings / /; s/^ *//; s/ *$//')
			;;
		esac
		[ -z "$mode" ] || bargs="$bargs${bargs:+ }$mode_args"

		if [ -z "$bargs$peer$reboot$cpus$mtu$ndev" ] || { [ "$bargs" = "$mode_args" ] && [ -z "$peer$reboot$cpus$mtu$ndev" ]; }; then
			if ! grep -q '^# guest: own' "$t"; then
				shared+=("$n")
				continue
			fi
		fi
		in_budget "e2e: $n$mode" || continue
		s=$SECONDS
		"$RUN" --kmemleak --timeout "$(limit "${tmo:-900}")" --backend-args "$LANES${bargs:+ $bargs}" \
			${peer:+--peer "$peer"} ${peer_rdma:+--peer-rdma "$peer_rdma"} ${hosts:+--hosts "$hosts"} \
			${mtu:+--mtu "$mtu"} ${ndev:+--devices "$ndev"} $reboot $cpus --out "$logs/e2e-$n$mode" -- "bash tools/testing/e2e/$n.sh" >"$logs/e2e-$n$mode.log" 2>&1
		result "e2e: $n$mode (own guest)" $? $((SECONDS - s)) "$logs/e2e-$n$mode.log"
	done
	[ ${#shared[@]} = 0 ] || run_shared "${shared[@]}"
}

if want_layer e2e || [ -n "$(for n in $e2e_names; do want_e2e "$n" && echo "$n"; done)" ]; then
	layer e2e "end-to-end (debug kernel, kmemleak)"
	run_e2e want_e2e
fi
if [ -n "$(for n in $e2e_names; do want_e2e_rings "$n" && echo "$n"; done)" ]; then
	layer e2e-rings "end-to-end with queues in guest memory (backend --rings; debug kernel, kmemleak)"
	mode=@rings mode_args=--rings
	run_e2e want_e2e_rings
	mode="" mode_args=""
fi
if [ -n "$(for n in $e2e_names; do want_e2e_net "$n" && echo "$n"; done)" ]; then
	layer e2e-net "end-to-end over the virtio-net personality (backend --net --rings; debug kernel, kmemleak)"
	mode=@net mode_args="--net --rings"
	run_e2e want_e2e_net
	mode="" mode_args=""
fi
layer_end

echo
echo "== times"
for i in "${!layers[@]}"; do
	printf '  %-8s %s\n' "${layers[$i]}" "$(min_sec "${layer_times[$i]}")"
done
printf '  %-8s %s (make check from its start, builds included; budget %s)\n' total \
	"$(min_sec $(($(date +%s) - t0)))" "$(min_sec $budget)"
echo
# (Its status may be gone already: bash keeps only so many of a long
# run's children.)
wait $drift_pid 2>/dev/null
cat "$logs/drift.txt"
if [ $failed -gt 0 ]; then
	echo "failed:"
	printf '  %s\n' "${failures[@]}"
	echo "logs: $logs"
fi
echo "$passed passed, $failed failed"
[ $failed = 0 ]
