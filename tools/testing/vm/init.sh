#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# PID 1 of a test guest. The root filesystem is the build sysroot over
# virtio-9p (read-only); the runner's share is mounted at /mnt/run and holds
# what to run and receives the verdicts, and the list of rdma-core providers
# (Debian's and the project's, which libibverbs finds through
# /etc/libibverbs.d). Mounts: fstab beside this file. The checkout is at /opt
# ($VRDMA_SRC); commands run there. Two ways to run:
#
# - one command ("cmd"): its exit status goes to "status". With
#   vrdma.reboot=1 (run.sh --reboot) the command may end with status 99 to
#   have the guest reboot at once, leaving its processes and objects as a
#   crash or a reset would; the command then runs again in the new boot,
#   with VRDMA_BOOT one higher (1 in the first boot);
# - a suite ("suite", one test script per line, run by run.sh --suite):
#   the tests run one after the other in this guest, each as if in a guest
#   of its own: an empty kernel log, its own checker verdict, and afterwards
#   its processes killed, its modules unloaded, /tmp emptied and the
#   network set up again. Each test's verdict, duration, output and kernel
#   log go to results/NAME/. A test after which the guest is not as it was
#   (a module that cannot be unloaded, other state) ends the suite early
#   ("dirty" names it), and the runner gives the rest a fresh guest.
#
# After a command or test the kernel log is searched for reports of the
# debug checkers (WARN, BUG, lockdep, KASAN, sleeping in atomic, a task hung
# in D state, an RCU stall, and with kmemleak=1 on the command line, kmemleak): any report fails it.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERM=${TERM:-linux} LANG=C.UTF-8 VRDMA_SRC=/opt

# Every program started costs a fifth of a second under TCG with KASAN, so
# the set-up starts as few as it can: two mounts, one ip.
mount -t proc proc /proc # mount -a needs it to see what is mounted
mount -a -T /opt/tools/testing/vm/fstab
echo vrdma-guest >/proc/sys/kernel/hostname
# Every hung task is reported, however many earlier tests of a shared guest
# had (the kernel stops after 10 by default).
[ ! -e /proc/sys/kernel/hung_task_warnings ] || echo -1 >/proc/sys/kernel/hung_task_warnings

read -r -a cmdline </proc/cmdline
# param NAME: the value of vrdma.NAME= on the kernel command line.
param() {
	local w
	for w in "${cmdline[@]}"; do
		[ "${w%%=*}" = "vrdma.$1" ] && echo "${w#*=}"
	done
}

# Networking: slirp's address plan (10.0.2.0/24, gateway .2); the runner
# gives a two-guest run's peer 10.0.2.16 (vrdma.ip).
net_up() {
	ip -force -batch - 2>/dev/null <<-EOF
		link set lo up
		link set eth0 up
		addr replace $(param ip)/24 dev eth0
		route replace default via 10.0.2.2
	EOF
}
net_up

kmemleak=$(param kmemleak)
mode=$(param mode)
# Boots of this run so far, this one included (kept in the share).
VRDMA_BOOT=$(($(cat /mnt/run/boots 2>/dev/null || echo 0) + 1))
echo "$VRDMA_BOOT" >/mnt/run/boots
export VRDMA_BOOT

# checker_reports [FILE]: the debug checkers' reports in FILE (a saved
# kernel log) or in the kernel log: lockdep, KASAN, UBSAN, WARN/BUG, the
# hung-task detector (a task in D state for hung_task_timeout_secs) and RCU
# stalls.
checker_reports() {
	local pattern='WARNING:|BUG:|Oops|general protection fault|KASAN|possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|sleeping function called from invalid context|UBSAN:|kernel BUG|INFO: task [^ ]*:[0-9]+ blocked|rcu: INFO: rcu_'
	if [ -n "${1:-}" ]; then
		grep -E -A30 "$pattern" "$1"
	else
		dmesg | grep -E -A30 "$pattern"
	fi | head -200
}

# kmemleak_scan ENDED: kmemleak reports objects unreferenced across scans
# and older than 5 s, so the scans wait until 6 s after ENDED ($SECONDS when
# the command ended).
kmemleak_scan() {
	local wait=$((6 - (SECONDS - $1)))
	[ $wait -le 0 ] || sleep $wait
	echo scan >/sys/kernel/debug/kmemleak
	echo scan >/sys/kernel/debug/kmemleak
}
# kmemleak_verdict ENDED: prints the leaks found since the last "clear" and
# fails if there are any.
kmemleak_verdict() {
	[ "$kmemleak" = 1 ] && [ -e /sys/kernel/debug/kmemleak ] || return 0
	kmemleak_scan "$1"
	local leaks
	leaks=$(cat /sys/kernel/debug/kmemleak)
	[ -n "$leaks" ] || return 0
	echo "==== kmemleak found leaks (this fails the run) ===="
	echo "$leaks" | head -100
	return 1
}
kmemleak_clear() {
	[ "$kmemleak" = 1 ] && [ -e /sys/kernel/debug/kmemleak ] || return 0
	echo clear >/sys/kernel/debug/kmemleak
}

# In a suite a leak is the test's during which (or during whose cleanup)
# the object was allocated. The suite scans once, after its last test: a
# scan takes two passes of 8 s under TCG with KASAN, and attributing by
# allocation time gives the same verdicts as a scan after each test (an
# object can stay referenced from stale memory and show up unreferenced
# only later anyway). A guest killed before the end is a failed run, so a
# leak it did not get to scan for cannot pass unseen.
# suite_starts holds each test's start in jiffies, suite_names its name.
# Read in one sweep (awk): bash's read seeks back after each line, and a
# seek in /proc/timer_list regenerates it, shifted as timers come and go,
# so the "jiffies:" line could be missed.
jiffies() {
	awk '$1 == "jiffies:" { print $2; exit }' /proc/timer_list
}
# leak_found BLOCK: files one leak report with the test it belongs to:
# appended to its kmemleak.log, and a test that had passed fails (97).
leak_found() {
	local block=$1 j i owner="" d
	[[ "$block" =~ jiffies\ ([0-9]+) ]] || return 0
	j=${BASH_REMATCH[1]}
	for i in "${!suite_starts[@]}"; do
		[[ ${suite_starts[$i]} =~ ^[0-9]+$ ]] && [ "$j" -ge "${suite_starts[$i]}" ] &&
			owner=${suite_names[$i]}
	done
	if [ -z "$owner" ]; then
		echo "$block" >>/mnt/run/boot-leaks.log # booting's: kept, not judged
		return 0
	fi
	d=/mnt/run/results/$owner
	[ -s "$d/kmemleak.log" ] || echo "==== kmemleak found leaks (this fails the test) ====" >"$d/kmemleak.log"
	echo "$block" >>"$d/kmemleak.log"
	if [ -e "$d/status" ] && [ "$(<"$d/status")" = 0 ]; then
		echo "==== kmemleak: an object allocated during this test was found leaked after it (this fails it) ====" >>"$d/output.log"
		echo 97 >"$d/status"
		echo "$owner: status 97 (kmemleak, found after the suite)"
	fi
}
# suite_leaks ENDED: scans, files every leak found with its test and adds
# the reports to that test's output.
suite_leaks() {
	[ "$kmemleak" = 1 ] && [ -e /sys/kernel/debug/kmemleak ] || return 0
	kmemleak_scan "$1"
	local line block="" d
	while IFS= read -r line; do
		if [[ "$line" == "unreferenced object "* ]] && [ -n "$block" ]; then
			leak_found "$block"
			block=""
		fi
		block+="$line"$'\n'
	done </sys/kernel/debug/kmemleak
	[ -z "$block" ] || leak_found "$block"
	for d in /mnt/run/results/*; do
		[ ! -e "$d/kmemleak.log" ] || head -100 "$d/kmemleak.log" >>"$d/output.log"
	done
}

# What a test may change and must leave as it found it (after the cleanup
# below): loaded modules, RDMA devices, addresses, routes and links, mounts,
# and the kernel's own state: a taint (a WARN taints) or lockdep switched
# off by its first report would make every later test run unchecked.
fingerprint() {
	lsmod | awk 'NR > 1 { print $1 }' | sort
	ls /sys/class/infiniband 2>/dev/null
	# (not the addresses SLAAC adds whenever slirp's router advertisement
	# arrives: they come and go with no test's doing)
	ip -o addr show | grep -v " dynamic" | awk '{ print $2, $4 }'
	ip -o link show | awk '{ print $2, $3, $5 }'
	ip -4 route show
	awk '{ print $2, $3 }' /proc/mounts | sort
	echo "tainted $(</proc/sys/kernel/tainted)"
	grep -s "debug_locks:" /proc/lockdep_stats
}

# new_modules: the modules loaded now that were not when the suite began.
# (No process substitution in this file: the guest has no /dev/fd.)
new_modules() {
	local m
	for m in $(lsmod | awk 'NR > 1 { print $1 }'); do
		case " $modules_before " in *" $m "*) ;; *) echo "$m" ;; esac
	done
}

# no_processes: true once no process but this one (PID 1) is left; kernel
# threads have no executable.
no_processes() {
	local p
	for p in /proc/[0-9]*; do
		[ "${p#/proc/}" = 1 ] || [ ! -e "$p/exe" ] || return 1
	done
}

# cleanup: undoes what a test may leave behind: processes (this is PID 1:
# kill -1 reaches every other process; they are waited for, up to 10 s),
# modules loaded since the suite began (dependents first, a few passes), the
# tmpfs mounts (fresh ones), the network setup.
cleanup() {
	local pass m
	kill -KILL -1 2>/dev/null
	for pass in {1..50}; do
		no_processes && break
		sleep 0.2
	done
	for pass in 1 2 3 4; do
		for m in $(new_modules); do
			modprobe -r "$m" 2>/dev/null
		done
	done
	umount -l /tmp /dev/shm /root /var/tmp /run
	mount -a -t tmpfs -T /opt/tools/testing/vm/fstab
	net_up
}

# suite_test NAME SCRIPT: one test of a suite (see the head of this file).
# The verdict: the test's own status; else 98 for a checker's report in the
# kernel log, 97 for a leak, 96 for modules it left that cannot be unloaded.
suite_test() {
	local name=$1 script=$2 d=/mnt/run/results/$1 status start left reports now
	mkdir -p "$d"
	echo "$name" >/mnt/run/current
	suite_names+=("$name")
	suite_starts+=("$(jiffies)")
	start=$SECONDS
	(cd "$VRDMA_SRC" && timeout -k 10 "$test_timeout" bash "$script" </dev/null) >"$d/output.log" 2>&1
	status=$?
	[ $status = 124 ] && echo "==== did not finish within ${test_timeout}s: killed ====" >>"$d/output.log"
	cleanup
	left=$(echo $(new_modules))
	# Read and clear the log in one go: whatever the test or its cleanup
	# made the kernel print is judged here, and nothing of it reaches the
	# next test.
	dmesg -c >"$d/dmesg.log"
	reports=$(checker_reports "$d/dmesg.log")
	if [ -n "$reports" ]; then
		printf '%s\n%s\n' "==== kernel reported a problem (this fails the test) ====" "$reports" >>"$d/output.log"
		status=98
	fi
	if [ -n "$left" ]; then
		echo "==== modules that cannot be unloaded after the test (this fails it): $left ====" >>"$d/output.log"
		[ $status = 0 ] && status=96
	fi
	echo $((SECONDS - start)) >"$d/seconds"
	echo "$status" >"$d/status"
	echo "$name: status $status ($(cat "$d/seconds") s)"
	rm -f /mnt/run/current
	now=$(fingerprint)
	if [ "$now" != "$fingerprint_before" ]; then
		echo "$name" >/mnt/run/dirty
		echo "$fingerprint_before" >"$d/fingerprint.before"
		echo "$now" >"$d/fingerprint.after"
		diff "$d/fingerprint.before" "$d/fingerprint.after" >"$d/dirty.diff"
		return 1
	fi
}

if [ "$mode" = shell ]; then
	echo "virtio-rdma test guest: modules of $(uname -r) in /usr/lib/modules; exit the shell to power off"
	setsid -c bash -l </dev/ttyS0 >/dev/ttyS0 2>&1
	status=0
elif [ -f /mnt/run/suite ]; then
	test_timeout=$(param test_timeout)
	: "${test_timeout:=900}"
	modules_before=$(echo $(lsmod | awk 'NR > 1 { print $1 }'))
	fingerprint_before=$(fingerprint)
	# Booting's log and leaks are kept, not judged (as for a single command).
	dmesg -c >/mnt/run/boot-dmesg.log
	kmemleak_clear
	suite_names=() suite_starts=()
	while read -r script; do
		suite_test "$(basename "$script" .sh)" "$script" || break
	done </mnt/run/suite
	# Leaks that surface only after the last test ran.
	suite_leaks $SECONDS
	status=0
else
	kmemleak_clear # forget what booting allocated: only the command's leaks count
	dmesg_before=$(checker_reports)
	cd "$VRDMA_SRC"
	bash /mnt/run/cmd </dev/null
	status=$?
	ended=$SECONDS
	reports=$(checker_reports)
	if [ "$reports" != "$dmesg_before" ]; then
		echo "==== kernel reported a problem (this fails the run) ===="
		echo "$reports"
		{ [ $status = 0 ] || [ $status = 99 ]; } && status=98
	fi
	if [ $status = 99 ] && [ "$(param reboot)" = 1 ]; then
		# The kernel's reports so far are judged; what the command left
		# is not: the reboot is the point.
		echo "==== boot $VRDMA_BOOT: the command asks for a reboot ===="
		sync
		umount -l /mnt/run
		echo b >/proc/sysrq-trigger
		sleep 10
	fi
	[ $status = 99 ] && status=1 # a reboot nobody allowed
	kmemleak_verdict $ended || { [ $status = 0 ] && status=97; }
fi

echo "$status" >/mnt/run/status
sync
umount /mnt/run
echo o >/proc/sysrq-trigger
# Never return: init's exit panics the kernel ("Attempted to kill init"), a
# trace that reads like a crash. The power-off can take the root file
# system away first, so sleep itself may fail to start.
while :; do sleep 1 2>/dev/null; done
