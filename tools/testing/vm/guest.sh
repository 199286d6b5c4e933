#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The inside half of run.sh: PID 1 of the run's namespace, in the sysroot.
# Starts the device backend, then QEMU, then reports the guest's status.
# usage: guest.sh MODE TIMEOUT KMEMLEAK SHARE BZIMAGE QEMU BACKEND APPEND [BACKEND-ARGS [NUM-QUEUES]]
set -uo pipefail
mode=$1 timeout=$2 kmemleak=$3 share=$4 bzimage=$5 qemu=$6 backend=$7 extra=$8
# Extra backend options, split on spaces (e.g. --config-override FIELD=VALUE).
read -r -a BACKEND_ARGS <<<"${9:-}"

MAC=52:54:00:12:34:56
LIMITS=(--max-qp 16 --max-cq 32 --mac "$MAC")

rundir=/tmp/vrdma
mkdir -p "$rundir"
sock=$rundir/vrdma0.sock
"$backend" --socket "$sock" "${LIMITS[@]}" "${BACKEND_ARGS[@]}" 2>"$share/backend.log" &
backend_pid=$!
for _ in $(seq 100); do
	[ -S "$sock" ] && break
	kill -0 $backend_pid 2>/dev/null || break
	sleep 0.1
done
if [ ! -S "$sock" ]; then
	echo "error: the device backend did not start:" >&2
	cat "$share/backend.log" >&2
	exit 2
fi

# A real KVM only: this machine's /dev/kvm is a PVM hypervisor under which
# the guest hangs in early boot, so it is never used.
accel=tcg
if [ -e /sys/module/kvm_intel ] || [ -e /sys/module/kvm_amd ]; then accel=kvm; fi

append="console=ttyS0 root=root rootfstype=9p ro"
append+=" rootflags=trans=virtio,version=9p2000.L,cache=loose"
append+=" init=/opt/tools/testing/vm/init.sh panic=-1 kasan_multi_shot"
append+=" vrdma.mode=$mode vrdma.kmemleak=$kmemleak"
[ "$mode" = shell ] || append+=" quiet"
# KUnit suites run only where a run asks for them (--append kunit.enable=1).
[[ "$extra" == *kunit.enable=* ]] || append+=" kunit.enable=0"
append+=" $extra"

# la57=off: with 5-level paging, KASAN reported wild accesses from timer
# interrupts during early boot in some runs (seen under TCG, not our code).
args=(
	-L /usr/share/qemu -L /usr/share/seabios
	-machine q35,accel=$accel,memory-backend=mem -cpu max,la57=off -smp 2 -m 2G
	-object memory-backend-memfd,id=mem,size=2G,share=on
	-kernel "$bzimage" -append "$append" -no-reboot
	-display none -vga none -monitor none
	-fsdev local,id=root,path=/,security_model=none,readonly=on
	-device virtio-9p-pci,fsdev=root,mount_tag=root
	-fsdev "local,id=run,path=$share,security_model=none"
	-device virtio-9p-pci,fsdev=run,mount_tag=run
	-netdev user,id=net0
	-device "virtio-net-pci,netdev=net0,mac=$MAC,romfile="
	-chardev "socket,id=vrdma0,path=$sock"
	-device "vhost-user-rdma-pci,chardev=vrdma0${10:+,num-queues=${10}}"
)

if [ "$mode" = shell ]; then
	"$qemu" "${args[@]}" -serial mon:stdio
	rc=$?
else
	# sysrq prints its power-off lines whatever the console level: drop them.
	timeout -k 5 "$timeout" "$qemu" "${args[@]}" -serial stdio </dev/null | tr -d '\r' |
		sed -u -E '/^\[ *[0-9.]+\] (sysrq: Power Off|reboot: Power down)$/d'
	rc=${PIPESTATUS[0]}
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
exit "$(cat "$share/status")"
