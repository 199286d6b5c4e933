#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# PID 1 of a test guest. The root filesystem is the build sysroot over
# virtio-9p (read-only); the runner's share is mounted at /mnt/run and holds
# the command to run ("cmd") and receives its exit status ("status"). The
# checkout is at /opt ($VRDMA_SRC); the command runs there.
#
# After the command, the kernel log is searched for reports of the debug
# checkers (WARN, BUG, lockdep, KASAN, sleeping in atomic, and with
# kmemleak=1 on the command line, kmemleak): any report fails the run.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERM=${TERM:-linux} LANG=C.UTF-8 VRDMA_SRC=/opt

mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
for d in /tmp /run /var/tmp /dev/shm /root; do mount -t tmpfs tmpfs "$d"; done
mount -t debugfs debugfs /sys/kernel/debug
mount -t configfs configfs /sys/kernel/config
mount -t 9p -o trans=virtio,version=9p2000.L,cache=none run /mnt/run
mkdir -p /run/lock /var/tmp
hostname vrdma-guest

param() { sed -n "s/.*\bvrdma.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }

# Networking: slirp's address plan (10.0.2.0/24, gateway .2); the runner
# gives a two-guest run's peer 10.0.2.16 (vrdma.ip).
ip link set lo up
ip link set eth0 up 2>/dev/null &&
	ip addr add "$(param ip)/24" dev eth0 &&
	ip route add default via 10.0.2.2

# The project's rdma-core provider (tools/rdma-core), brought by the runner:
# libibverbs finds providers through /etc/libibverbs.d, so the guest sees
# Debian's list there plus ours.
if [ -f /mnt/run/provider/libvirtio_rdma-rdmav34.so ]; then
	mkdir -p /run/libibverbs.d
	cp /etc/libibverbs.d/*.driver /run/libibverbs.d/
	echo "driver /mnt/run/provider/libvirtio_rdma" >/run/libibverbs.d/virtio_rdma.driver
	mount --bind /run/libibverbs.d /etc/libibverbs.d
fi

kmemleak=$(param kmemleak)
mode=$(param mode)

checker_reports() {
	dmesg | grep -E -A30 \
		'WARNING:|BUG:|Oops|general protection fault|KASAN|possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|sleeping function called from invalid context|UBSAN:|kernel BUG' |
		head -200
}

if [ "$kmemleak" = 1 ] && [ -e /sys/kernel/debug/kmemleak ]; then
	# Forget what booting allocated: only the command's leaks count.
	echo clear >/sys/kernel/debug/kmemleak
fi
dmesg_before=$(checker_reports)

if [ "$mode" = shell ]; then
	echo "virtio-rdma test guest: modules of $(uname -r) in /usr/lib/modules; exit the shell to power off"
	setsid -c bash -l </dev/ttyS0 >/dev/ttyS0 2>&1
	status=$?
else
	cd "$VRDMA_SRC"
	bash /mnt/run/cmd </dev/null
	status=$?
fi

reports=$(checker_reports)
if [ "$reports" != "$dmesg_before" ]; then
	echo "==== kernel reported a problem (this fails the run) ===="
	echo "$reports"
	[ $status = 0 ] && status=98
fi
if [ "$kmemleak" = 1 ] && [ -e /sys/kernel/debug/kmemleak ]; then
	# kmemleak reports objects unreferenced across scans and older than 5 s.
	sleep 6
	echo scan >/sys/kernel/debug/kmemleak
	echo scan >/sys/kernel/debug/kmemleak
	leaks=$(cat /sys/kernel/debug/kmemleak)
	if [ -n "$leaks" ]; then
		echo "==== kmemleak found leaks (this fails the run) ===="
		echo "$leaks" | head -100
		[ $status = 0 ] && status=97
	fi
fi

echo "$status" >/mnt/run/status
sync
umount /mnt/run
echo o >/proc/sysrq-trigger
sleep 10
