#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The inside half of run.sh: PID 1 of the run's namespace, in the sysroot.
# Starts the device backend, then QEMU, then reports the guest's status.
# usage: guest.sh MODE TIMEOUT KMEMLEAK SHARE BZIMAGE QEMU BACKEND APPEND
#                 [BACKEND-ARGS [NUM-QUEUES [PEER [REBOOT [OWN-CPUS [PEER-RDMA [MTU]]]]]]]
# With PEER=1 a second guest (the peer) runs $SHARE/peer/cmd beside the
# main one: one backend process serves both devices, and the two guests'
# NICs share a link of their own (no slirp) — 10.0.2.15 and 10.0.2.16,
# each device pinned to its guest's addresses (--ip). With REBOOT=1 the
# main guest may reboot (QEMU without -no-reboot; see init.sh). With
# OWN-CPUS=1 each guest is a tenant with CPUs of its own, as on a cloud
# host: the CPUs this may use split evenly among the guests (the main
# guest's first), its QEMU pinned there with a vCPU per CPU up to two (not
# two vCPUs on one: a guest whose lock holder waits for its other vCPU's
# time slice swings tenfold), and its device's threads too (the backend's
# --cpus).
# With PEER-RDMA=rxe the peer has no virtio-rdma device: its NIC is QEMU's
# virtio-net on TAP vr1, the main guest's device's uplink is TAP vr0 (the
# backend's --uplink), both on bridge br0 of a network namespace this
# makes for the run. With PEER-RDMA=remote the peer's device is served by
# a second backend process (another host), its uplink TAP vr1 on the same
# bridge; the test's backend kill and restart reach the first one only.
# The main guest can kill and restart the backend (as a crash and an
# operator's restart): it writes "kill" or "start" to /mnt/run/backend.ctl
# and waits for /mnt/run/backend.state to say "killed" or "started"
# (e2e/lib/common.sh: backend_kill, backend_start). QEMU reconnects to a
# restarted backend by itself (reconnect-ms). The (first) backend serves its
# metrics on a port of the run's loopback (--metrics); "scrape" has the
# runner read them over HTTP into /mnt/run/metrics.txt (backend_scrape), as
# the host's operator would.
set -uo pipefail
mode=$1 timeout=$2 kmemleak=$3 share=$4 bzimage=$5 qemu=$6 backend=$7 extra=$8
# Extra backend options, split on spaces (e.g. --config-override FIELD=VALUE).
read -r -a BACKEND_ARGS <<<"${9:-}"
num_queues=${10:-} peer=${11:-0} reboot=${12:-0} own_cpus=${13:-0} peer_rdma=${14:-virtio}
# The Ethernet MTU of the run (run.sh --mtu; empty: QEMU's and Linux's 1500).
mtu=${15:-}
# The main guest's ID-42 devices (run.sh --devices), all of its backend.
main_devices=${16:-1}
# Whether the guests meet on a network (rather than in one backend).
wired=0
[ "$peer_rdma" = virtio ] || wired=1
if [ $wired = 1 ] && [ -z "${VRDMA_NETNS:-}" ]; then
	# A network of the run's own: a bridge, a TAP for each guest.
	VRDMA_NETNS=1 exec unshare --net -- "$0" "$@"
fi
if [ $wired = 1 ]; then
	ip -batch - <<-EOF || { echo "error: cannot make the run's network (bridge, TAPs)" >&2; exit 2; }
		link set lo up
		link add br0 type bridge
		link set br0 up
		tuntap add vr0 mode tap
		tuntap add vr1 mode tap
		link set vr0 mtu ${mtu:-1500} master br0 up
		link set vr1 mtu ${mtu:-1500} master br0 up
	EOF
	# A switch forwards frames as they are. With br_netfilter loaded on
	# the host (it is here), the bridge would check IP headers and drop a
	# frame whose IP length lies before the device could see and count it.
	for f in /proc/sys/net/bridge/bridge-nf-call-ip{,6}tables /proc/sys/net/bridge/bridge-nf-call-arptables; do
		[ ! -e "$f" ] || echo 0 >"$f"
	done
fi
guests=1
[ "$peer" = 1 ] && guests=2
# cpus_of INDEX: guest INDEX's CPUs (a list for taskset and --cpus).
cpus_of() {
	python3 - "$1" "$guests" <<-'PY'
		import os, sys
		i, n = int(sys.argv[1]), int(sys.argv[2])
		cpus = sorted(os.sched_getaffinity(0))
		own = cpus[i * len(cpus) // n:(i + 1) * len(cpus) // n]
		print(",".join(map(str, own)))
	PY
}
pins=()
if [ "$own_cpus" = 1 ]; then
	for ((i = 0; i < guests; i++)); do
		pins[i]=$(cpus_of $i)
		[ -n "${pins[i]}" ] || { echo "error: $guests guests need a CPU each, $(nproc) here" >&2; exit 2; }
	done
fi
# The backend's --net presents each device as virtio-net with RoCE (one
# function: QEMU's vhost-user-rdma-pci with net=on) instead of an ID-42
# device beside a QEMU NIC; the guests' Ethernet then goes through the
# backend too (Documentation/infiniband/virtio_rdma_net.rst).
net_personality=0
for a in "${BACKEND_ARGS[@]}"; do [ "$a" = --net ] && net_personality=1; done
# On a network an ID-42 device's NIC is the backend's too (--nic-socket:
# QEMU's virtio-net-pci on -netdev vhost-user), so that its RDMA port and
# its guest's Ethernet are one port on the uplink, as the net personality's.
backend_nic=0
[ $wired = 1 ] && [ $net_personality = 0 ] && backend_nic=1

mac() { echo "52:54:00:12:34:5$((6 + $1))"; }
rundir=/tmp/vrdma
mkdir -p "$rundir"
# device_args INDEX: the backend options of guest INDEX's device.
device_args() {
	local i=$1
	dev_args=(--socket "$rundir/vrdma$i.sock" --mac "$(mac "$i")")
	# Two guests are two tenants: each device takes only its guest's
	# address (and its MAC's link-local GID), as an operator would pin them.
	[ $guests = 1 ] || dev_args+=(--ip "10.0.2.$((15 + i))")
	[ -z "${pins[i]:-}" ] || dev_args+=(--cpus "${pins[i]}")
	[ $wired = 0 ] || dev_args+=(--uplink "tap:vr$i")
	[ $backend_nic = 0 ] || dev_args+=(--nic-socket "$rundir/vnic$i.sock")
}
# The first backend serves the main guest's device, and the peer's unless
# the peer is on another host (or is rxe).
devices=()
served=1
[ "$peer_rdma" = virtio ] && served=$guests
for ((i = 0; i < served; i++)); do
	device_args $i
	devices+=("${dev_args[@]}")
done
# More devices of the main guest: sockets and MACs of their own, any
# address each (one guest's devices are one tenant).
for ((k = 1; k < main_devices; k++)); do
	devices+=(--socket "$rundir/vrdma0-$k.sock" --mac "52:54:00:12:35:0$k")
done
[ "$main_devices" = 1 ] || devices+=(--ip any)
# run_backend LOG SOCKET ARGS...: starts a backend (its pid in $last_pid)
# and waits for its last socket; false if it did not come up.
run_backend() {
	local log=$1 sock=$2
	shift 2
	"$backend" "$@" --max-qp 16 --max-cq 32 "${BACKEND_ARGS[@]}" 2>>"$log" &
	last_pid=$!
	for _ in $(seq 100); do
		[ -S "$sock" ] && return 0
		kill -0 $last_pid 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
# The first backend's metrics port: one free on the run's loopback.
metrics=127.0.0.1:$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# start_backend: starts the (first) backend; false if it did not come up.
start_backend() {
	# The last socket the backend makes.
	local last=$rundir/vrdma$((served - 1)).sock
	[ "$main_devices" = 1 ] || last=$rundir/vrdma0-$((main_devices - 1)).sock
	rm -f "$rundir"/vrdma0*.sock "$last"
	run_backend "$share/backend.log" "$last" "${devices[@]}" --metrics "$metrics" || return 1
	backend_pid=$last_pid
}
if ! start_backend; then
	echo "error: the device backend did not start:" >&2
	cat "$share/backend.log" >&2
	exit 2
fi
# start_remote_backend: the other host's backend, for the peer's device
# (PEER-RDMA=remote); false if it did not come up. Like the first, it
# exits when its QEMU goes, so booting again starts it again.
start_remote_backend() {
	[ "$peer_rdma" = remote ] || return 0
	[ -z "${remote_pid:-}" ] || kill -KILL "$remote_pid" 2>/dev/null
	rm -f "$rundir/vrdma1.sock"
	device_args 1
	run_backend "$share/peer/backend.log" "$rundir/vrdma1.sock" "${dev_args[@]}" || return 1
	remote_pid=$last_pid
}
if ! start_remote_backend; then
	echo "error: the second host's backend did not start:" >&2
	cat "$share/peer/backend.log" >&2
	exit 2
fi
# The guest's requests to kill or restart the backend (see the header).
(
	while sleep 0.2; do
		[ -s "$share/backend.ctl" ] || continue
		req=$(cat "$share/backend.ctl")
		rm -f "$share/backend.ctl"
		case "$req" in
		kill)
			echo "--- killed (SIGKILL) by the test at $(date +%T) ---" >>"$share/backend.log"
			kill -KILL "$backend_pid" 2>/dev/null
			# Gone once it is a zombie (the first one is not our child).
			while [ -e "/proc/$backend_pid" ] &&
				! grep -q '^[0-9]* ([^)]*) Z' "/proc/$backend_pid/stat" 2>/dev/null; do
				sleep 0.05
			done
			echo killed >"$share/backend.state" ;;
		start)
			echo "--- restarted by the test at $(date +%T) ---" >>"$share/backend.log"
			if start_backend; then
				echo started >"$share/backend.state"
			else
				echo failed >"$share/backend.state"
			fi ;;
		scrape)
			if python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
				"http://$metrics/metrics" >"$share/metrics.txt" 2>>"$share/backend.log"; then
				echo scraped >"$share/backend.state"
			else
				echo failed >"$share/backend.state"
			fi ;;
		esac
	done
) &

# A real KVM only: this machine's /dev/kvm is a PVM hypervisor under which
# the guest hangs in early boot, so it is never used.
accel=tcg
if [ -e /sys/module/kvm_intel ] || [ -e /sys/module/kvm_amd ]; then accel=kvm; fi

append="console=ttyS0 root=root rootfstype=9p ro"
append+=" rootflags=trans=virtio,version=9p2000.L,cache=loose"
append+=" init=/opt/tools/testing/vm/init.sh panic=-1 kasan_multi_shot"
append+=" vrdma.mode=$mode"
# tsc=reliable: no clocksource watchdog. Under TCG a guest's TSC is the
# host's clock, one for every vCPU, so there is nothing to watch; and a
# guest that hung before init (12-07) had its vCPUs in multi_cpu_stop and
# the watchdog's cross-CPU skew check (watchdog_check_skew), as if that
# check had met the stop_machine of the tsc-early to tsc switch. A likely
# cause, not a proven one; no speed difference either way (measured).
append+=" tsc=reliable"
# A guest that may reboot keeps its boot messages: one whose second boot
# hung showed nothing after "sysrq: Resetting".
[ "$mode" = shell ] || [ "$reboot" = 1 ] || append+=" quiet"
# KUnit suites run only where a run asks for them (--append kunit.enable=1).
[[ "$extra" == *kunit.enable=* ]] || append+=" kunit.enable=0"
append+=" $extra"

# guest_args INDEX: QEMU's arguments for guest INDEX (0 main, 1 peer) in
# $args, and what runs QEMU (taskset on its own CPUs, or nothing) in $pin.
# la57=off: with 5-level paging, KASAN reported wild accesses from
# timer interrupts during early boot in some runs (seen under TCG, not our
# code).
guest_args() {
	local i=$1 dir=$share net=(-netdev user,id=net0) noreboot=(-no-reboot)
	local rdma="vhost-user-rdma-pci,chardev=vrdma0${num_queues:+,num-queues=$num_queues}"
	local own="" smp=2
	pin=()
	if [ -n "${pins[i]:-}" ]; then
		pin=(taskset -c "${pins[i]}")
		# A vCPU per CPU, at most the usual two.
		smp=$(($(tr -cd , <<<"${pins[i]}" | wc -c) + 1))
		[ "$smp" -le 2 ] || smp=2
	fi
	# VRDMA_PEER_APPEND: kernel parameters of the peer alone (the runner's
	# own tests make it hang in early boot with them).
	[ "$i" = 1 ] && dir=$share/peer && own=${VRDMA_PEER_APPEND:+ $VRDMA_PEER_APPEND}
	[ "$i" = 0 ] && [ "$reboot" = 1 ] && noreboot=()
	if [ $guests = 2 ]; then
		# A link of their own: each guest's NIC sends its frames to the
		# other's datagram socket.
		net=(-netdev "dgram,id=net0,local.type=unix,local.path=$rundir/net$i,remote.type=unix,remote.path=$rundir/net$((1 - i))")
	fi
	if [ $backend_nic = 1 ]; then
		# The NIC's queues are the backend's (its MTU the backend's --mtu).
		net=(-chardev "socket,id=vnic0,path=$rundir/vnic$i.sock,reconnect-ms=500"
			-netdev "vhost-user,id=net0,chardev=vnic0")
	fi
	net+=(-device "virtio-net-pci,netdev=net0,mac=$(mac "$i"),romfile=${mtu:+,host_mtu=$mtu}")
	if [ $net_personality = 1 ]; then
		# No QEMU NIC (not even the machine's default one): the one
		# function is the backend's virtio-net.
		net=(-nic none)
		rdma+=",net=on"
	fi
	local rdma_dev=(-chardev "socket,id=vrdma0,path=$rundir/vrdma$i.sock,reconnect-ms=500" -device "$rdma")
	for ((k = 1; k < main_devices; k++)); do
		rdma_dev+=(-chardev "socket,id=vrdma0-$k,path=$rundir/vrdma0-$k.sock,reconnect-ms=500"
			-device "${rdma/chardev=vrdma0/chardev=vrdma0-$k}")
	done
	local leaks=$kmemleak
	if [ "$i" = 1 ] && [ "$peer_rdma" = rxe ]; then
		# A host with rxe: QEMU's NIC on its TAP, no virtio-rdma. Its
		# kernel's leaks would be rxe's, not ours: no kmemleak scan
		# (about 25 s under TCG).
		net=(-netdev "tap,id=net0,ifname=vr1,script=no,downscript=no"
			-device "virtio-net-pci,netdev=net0,mac=$(mac "$i"),romfile=${mtu:+,host_mtu=$mtu}")
		rdma_dev=()
		leaks=0
	fi
	args=(
		-L /usr/share/qemu -L /usr/share/seabios
		# Nothing a test uses, but ACPI code a debug kernel interprets
		# slowly under TCG: the SMBus, SATA, vmport and SMM devices and
		# the ACPI PCI hot-plug methods of every slot (a boot to the
		# command took 46 s with them on an AMD host, 25 s without).
		-machine q35,accel=$accel,memory-backend=mem,smbus=off,sata=off,vmport=off,smm=off
		-global ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off
		# 1 GiB: every kmemleak scan reads KASAN's shadow of all of it
		# (a pass took 9.3 s at 2 GiB, 5.6 s at 1 GiB); the largest
		# test (an NVMe target's 160 MiB on tmpfs) needs far less.
		-cpu max,la57=off -smp $smp -m 1G
		-object memory-backend-memfd,id=mem,size=1G,share=on
		-kernel "$bzimage" -append "$append vrdma.kmemleak=$leaks vrdma.ip=10.0.2.$((15 + i)) vrdma.reboot=$reboot$own"
		"${noreboot[@]}"
		-display none -vga none
		-monitor "unix:$rundir/mon$i.sock,server=on,wait=off"
		-fsdev local,id=root,path=/,security_model=none,readonly=on
		-device virtio-9p-pci,fsdev=root,mount_tag=root
		-fsdev "local,id=run,path=$dir,security_model=none"
		-device virtio-9p-pci,fsdev=run,mount_tag=run
		"${net[@]}"
		"${rdma_dev[@]}"
	)
}

# An early-boot hang: under TCG a guest now and then stops before its init
# runs (seen twice in some thousand boots: a quiet console, the device never
# reset). Each guest must reach init (which counts its boot in "boots")
# within boot_limit seconds; if one does not, its vCPUs' registers go to the
# log, the guests are killed and booted once more with a fresh backend.
# A boot to init takes 15-40 s here (two guests at once, a loaded host).
boot_limit=${VRDMA_BOOT_LIMIT:-120}
sysmap=${bzimage%/arch/x86/boot/bzImage}/System.map
# stop_hung INDEX [quiet]: shows where guest INDEX's vCPUs are, from its
# monitor (three looks a second apart, RIP resolved against System.map, then
# the general registers; not with quiet), and has QEMU quit.
stop_hung() {
	python3 - "$rundir/mon$1.sock" "$sysmap" "${2:-}" <<-'PY' || pkill -KILL -f "^$qemu .*$rundir/mon$1.sock"
		import bisect, re, socket, sys, time
		syms = []
		try:
		    for line in open(sys.argv[2]):
		        addr, kind, name = line.split()[:3]
		        if kind in "tTwW":
		            syms.append((int(addr, 16), name))
		except OSError:
		    pass
		syms.sort()
		keys = [a for a, _ in syms]
		def where(rip):
		    at = int(rip, 16)
		    i = bisect.bisect_right(keys, at) - 1
		    return f"{syms[i][1]}+{at - keys[i]:#x}" if i >= 0 else "?"
		s = socket.socket(socket.AF_UNIX)
		s.settimeout(5)
		s.connect(sys.argv[1])
		def command(c):
		    s.sendall(c.encode() + b"\n")
		    out = b""
		    while not out.rstrip().endswith(b"(qemu)") or c.encode() not in out:
		        out += s.recv(65536)
		    return out.decode(errors="replace").replace("\r", "")
		command("")
		for look in range(0 if sys.argv[3] == "quiet" else 3):
		    regs = command("info registers -a")
		    print(f"look {look + 1}:", ", ".join(f"{rip} {where(rip)}" for rip in re.findall(r"RIP=([0-9a-f]+)", regs)))
		    time.sleep(1)
		for line in regs.splitlines() if sys.argv[3] != "quiet" else []:
		    if re.match(r"(CPU#|RAX|RSI|R8 |R12|RIP|CR0)", line):
		        print(line)
		s.sendall(b"quit\n")
		time.sleep(1)
	PY
}
# boots_file INDEX: where guest INDEX counts its boots.
boots_file() { if [ "$1" = 1 ]; then echo "$share/peer/boots"; else echo "$share/boots"; fi; }
# qemu_running INDEX: whether guest INDEX's QEMU runs.
qemu_running() { pgrep -f "^$qemu .*$rundir/mon$1.sock" >/dev/null; }
# watch_boot: stops the guests and leaves boot-hung in $rundir if one of
# them does not reach init in time (or the peer's QEMU ended before): the
# hung one shown, the other (which may be waiting for it) stopped too, so
# that both boot again.
watch_boot() {
	local t i
	for ((t = 0; t < boot_limit; t++)); do
		sleep 1
		for ((i = 0; i < guests; i++)); do
			[ -s "$(boots_file "$i")" ] && continue
			# A peer whose QEMU ended before init will not get
			# there: no need to wait out the limit. (The main
			# guest's QEMU ending ends the run's wait for it.)
			[ "$i" = 0 ] || [ $t -lt 5 ] || qemu_running "$i" || break 2
			continue 2
		done
		return 0
	done
	touch "$rundir/boot-hung"
	for ((i = 0; i < guests; i++)); do
		if [ -s "$(boots_file "$i")" ]; then
			echo "error: guest $i reached init; stopped, to boot both again" >&2
			stop_hung "$i" quiet >&2
		elif ! qemu_running "$i"; then
			# Not hung: its QEMU is gone (its exit and output are in
			# its console, the main guest's in the log).
			echo "error: guest $i's QEMU ended before init (its console says why)" >&2
		else
			echo "error: guest $i did not reach init within ${boot_limit}s; its vCPUs:" >&2
			stop_hung "$i" >&2
		fi
	done
}
# backend_request REQ: has the backend killed or restarted (see the header).
backend_request() {
	local want=$2
	rm -f "$share/backend.state"
	echo "$1" >"$share/backend.ctl"
	for _ in $(seq 300); do
		[ "$(cat "$share/backend.state" 2>/dev/null)" = "$want" ] && return 0
		sleep 0.1
	done
	return 1
}

for attempt in 1 2; do
	rm -f "$rundir/boot-hung"
	if [ $guests = 2 ]; then
		guest_args 1
		(
			timeout -k 5 "$timeout" "${pin[@]}" "$qemu" "${args[@]}" -serial stdio </dev/null 2>&1 |
				tr -d '\r' >"$share/peer/console.log"
			exit "${PIPESTATUS[0]}"
		) &
		peer_pid=$!
	fi
	guest_args 0
	if [ "$mode" = shell ]; then
		"${pin[@]}" "$qemu" "${args[@]}" -serial mon:stdio
		rc=$?
		break
	fi
	watch_boot &
	watch_pid=$!
	# sysrq prints its power-off lines whatever the console level: drop them.
	timeout -k 5 "$timeout" "${pin[@]}" "$qemu" "${args[@]}" -serial stdio </dev/null | tr -d '\r' |
		sed -u -E '/^\[ *[0-9.]+\] (sysrq: Power Off|reboot: Power down)$/d'
	rc=${PIPESTATUS[0]}
	# After a hang the watcher stops every guest: the main one may have
	# ended because it stopped it, and the peer may be next.
	[ -e "$rundir/boot-hung" ] || kill "$watch_pid" 2>/dev/null
	wait "$watch_pid" 2>/dev/null
	[ -e "$rundir/boot-hung" ] && [ $attempt = 1 ] || break
	if [ $guests = 2 ]; then
		wait "$peer_pid"
		# The peer's first console (a QEMU that ended says why there).
		echo "--- QEMU exit $? ---" >>"$share/peer/console.log"
		mv "$share/peer/console.log" "$share/peer/console-boot1.log"
		# Shown whatever the second boot does: a peer that did not reach
		# init (hung, or its QEMU ended: not a hang) must not pass unseen.
		if [ ! -s "$share/peer/boots" ]; then
			echo "error: the peer's first boot, the last lines of its console (QEMU's exit status last):" >&2
			tail -30 "$share/peer/console-boot1.log" >&2
		fi
	fi
	echo "warning: booting the guests again (early-boot hang above)" >&2
	if ! backend_request kill killed || ! backend_request start started || ! start_remote_backend; then
		echo "error: the device backend did not restart:" >&2
		cat "$share/backend.log" "$share/peer/backend.log" 2>/dev/null >&2
		exit 2
	fi
done
if [ -e "$rundir/boot-hung" ]; then
	echo "error: the guest hung in early boot twice" >&2
	exit 124
fi
# The peer's command ends on its own once the main one is done with it;
# give it a minute more, then it counts as hung.
peer_rc=0
if [ $guests = 2 ]; then
	for _ in $(seq 60); do kill -0 "$peer_pid" 2>/dev/null || break; sleep 1; done
	if kill -0 "$peer_pid" 2>/dev/null; then
		echo "error: the peer guest did not finish a minute after the main one" >&2
		pkill -KILL -f "$rundir/mon1.sock"
	fi
	wait "$peer_pid"
	peer_rc=$?
fi
if [ $rc = 124 ] || [ $rc = 137 ]; then
	echo "error: the guest did not finish within ${timeout}s and was killed (hung?)" >&2
	exit 124
elif [ $rc != 0 ]; then
	echo "error: QEMU failed (exit $rc); backend log:" >&2
	cat "$share/backend.log" >&2
	exit 125
fi
if [ ! -s "$share/status" ]; then
	echo "error: the guest ended without reporting a status (kernel panic or init failure; see above)" >&2
	exit 125
fi
status=$(cat "$share/status")
if [ $guests = 2 ]; then
	peer_status=$(cat "$share/peer/status" 2>/dev/null)
	if [ "$peer_rc" != 0 ] || [ "$peer_status" != 0 ]; then
		echo "error: the peer guest failed (QEMU exit $peer_rc, status ${peer_status:-none}); its console:" >&2
		if [ -e "$share/peer/console-boot1.log" ]; then
			echo "--- first boot ---" >&2
			tail -30 "$share/peer/console-boot1.log" >&2
			echo "--- second boot ---" >&2
		fi
		tail -60 "$share/peer/console.log" >&2
		[ "$status" = 0 ] && status=${peer_status:-125}
	fi
fi
exit "$status"
