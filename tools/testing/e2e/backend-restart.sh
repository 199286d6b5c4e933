#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The device's backend dies, twice: under perftest, then under NVMe over
# RDMA, and comes back each time. QEMU marks the device DEVICE_NEEDS_RESET
# with a config interrupt when the backend's socket closes; the driver
# fails the device at once (a log line and IB_EVENT_DEVICE_FATAL within
# seconds, requests flushed: kernel ones through their CQs, user ones into
# their CQ rings; commands answered without the device), so perftest ends
# with an error and nvme-rdma's error recovery tears its queues down
# instead of waiting out timeouts: nothing hangs. When the backend is back
# (QEMU reconnects, a second config interrupt), the driver resets the
# device and registers it again: perftest runs on the new virtio_rdma0, and
# nvme-rdma reconnects by address (once the target in this guest, which
# loses its listener with the device, listens again) and the fio job that
# was running when the backend died completes, every block verified
# (crc32c). ibv_devinfo works again.
# guest: own (a backend of its own, killed and restarted)
# modes: virtqueues (left out of the ring pass to keep make check in its
# budget: restore when it fits, it is the only backend death over rings)
set -euo pipefail

ADDR=10.0.2.15 PORT=4420 NQN=nqn.2026-11.org.virtio-rdma:restart
source "$(dirname "$0")/lib/common.sh"
diagnose() {
	cat /sys/class/nvme/*/state 2>/dev/null || true
	tail -20 /mnt/run/backend.log
}
# seen N PATTERN: the kernel log has PATTERN at least N times.
seen() { [ "$(dmesg | grep -c -- "$2")" -ge "$1" ]; }
FAILED="device failed: the device needs a reset (its backend is gone)"
REGISTERED="registered; port 1 pairs"

# down N: kills the backend and checks the Nth failure is reported at once.
down() {
	ibv_asyncwatch -d virtio_rdma0 >/tmp/async.log 2>&1 &
	local watch=$! t0
	# It prints this once it has the device open (under fio that can take
	# more than a second; killed earlier, it could not open it at all).
	wait_for "ibv_asyncwatch to listen" grep -q "async event FD" /tmp/async.log
	backend_kill
	t0=$SECONDS
	wait_for "the driver to report the failed device" seen "$1" "$FAILED"
	echo "  device failed, seen after $((SECONDS - t0)) s"
	wait_for "IB_EVENT_DEVICE_FATAL in userspace" grep -q IBV_EVENT_DEVICE_FATAL /tmp/async.log
	echo "  IBV_EVENT_DEVICE_FATAL: seen by ibv_asyncwatch"
	kill $watch 2>/dev/null || true
	# Verbs answer at once, without the device: ibv_devinfo's port query fails.
	local s=$SECONDS rc=0
	timeout 20 ibv_devinfo -d virtio_rdma0 >/tmp/devinfo.txt 2>&1 || rc=$?
	[ $rc != 124 ] || fail "ibv_devinfo hung on the failed device"
	echo "  ibv_devinfo on the failed device: exit $rc after $((SECONDS - s)) s"
}
# up N: restarts the backend and waits for the Nth registration.
up() {
	backend_start
	local t0=$SECONDS
	back() { seen "$((1 + $1))" "$REGISTERED" && link_active; }
	for _ in $(seq 300); do back "$1" && break; sleep 0.2; done
	back "$1" || fail "virtio_rdma0 did not come back within 60 s"
	seen "$1" "the device is back: resetting it" || fail "no report of the reset"
	echo "  virtio_rdma0 back after $((SECONDS - t0)) s"
}

driver_up
dev=virtio_rdma0 gid=1 addr=$ADDR
opts="-d $dev -x $gid -F"

step "perftest runs, and a process waits for receives, when the backend dies"
# ib_send_bw's next doorbells fail (EIO); the waiting process never posts
# again, so only the driver flushing its receives into its CQ's ring ends
# its wait (lib/flush_wait.py).
timeout 300 ib_send_bw $opts -D 120 -p $port >/tmp/server.log 2>&1 &
spid=$!
sleep 1
timeout 300 ib_send_bw $opts -D 120 -p $port $addr >/tmp/client.log 2>&1 &
cpid=$!
port=$((port + 1))
sleep 5
kill -0 $spid 2>/dev/null && kill -0 $cpid 2>/dev/null || fail "ib_send_bw did not get going: $(tail -3 /tmp/client.log)"
rm -f /tmp/flush.flag
python3 "$(dirname "$0")/lib/flush_wait.py" /tmp/flush.flag 40 >/tmp/flush.log 2>&1 &
wpid=$!
wait_for "the waiting process's receives" test -s /tmp/flush.flag
down 1
rc=0
wait $wpid || rc=$?
sed 's/^/  waiter: /' /tmp/flush.log
[ $rc = 0 ] || fail "a process waiting for completions did not get its receives back, flushed"
gone() { ! kill -0 $1 2>/dev/null; }
wait_for "the ib_send_bw client to end" gone $cpid
wait_for "the ib_send_bw server to end (its receives flushed)" gone $spid
rc=0; wait $spid || rc=$?
crc=0; wait $cpid || crc=$?
echo "  ib_send_bw ended: server exit $rc, client exit $crc"
grep -h -i -m1 "error\|failed" /tmp/server.log /tmp/client.log | sed 's/^/  /' || true
[ $rc != 124 ] && [ $crc != 124 ] || fail "ib_send_bw ran into its timeout"

step "the backend restarts; the driver registers the device again"
up 1
pair "ib_send_bw on the new device" ib_send_bw $opts -n 200 -p $port -- ib_send_bw $opts -n 200 -p $port $addr

step "NVMe over RDMA on virtio_rdma0 (target and host in this guest)"
driver_up
modprobe -a nvmet nvmet-rdma nvme-rdma
nvmet_subsystem "$NQN" 96M
nvmet_port 1 rdma "$PORT" "$NQN"
# Reconnect every second, for up to two minutes.
nvme_connect_rdma "$NQN" --reconnect-delay=1 --ctrl-loss-tmo=120
ctrl=$NVME_CTRL ns=$NVME_NS

step "fio: 32 MiB of random 4 KiB writes, then all read back and verified"
fio --eta=never --name=restart --filename="$ns" --ioengine=libaio --direct=1 --iodepth=16 \
	--rw=randwrite --bs=4k --size=32M --verify=crc32c --do_verify=1 --verify_fatal=1 \
	--verify_state_save=0 --output=/tmp/fio.txt &
fio_pid=$!
sleep 3
kill -0 $fio_pid 2>/dev/null || fail "fio ended before the backend was killed (make the job longer)"

step "the backend dies (SIGKILL) under fio"
down 2
recovering() { grep -Eq "connecting|resetting" "/sys/class/nvme/$ctrl/state"; }
wait_for "nvme-rdma's error recovery" recovering
echo "  $ctrl: $(cat /sys/class/nvme/$ctrl/state)"
sleep 3
kill -0 $fio_pid 2>/dev/null || fail "fio ended while the backend was away: $(tail -5 /tmp/fio.txt)"

step "the backend restarts; the driver registers the device again"
up 2

step "the target listens again"
# nvmet-rdma gives up a listener whose RDMA device went away (its
# device-removal handler drops the listener's ID and nothing sets it up
# again); an operator re-enables the port, as here by linking its
# subsystem again. The host side needs nothing.
p=/sys/kernel/config/nvmet/ports/1/subsystems/$NQN
rm "$p"
ln -s "/sys/kernel/config/nvmet/subsystems/$NQN" "$p"

step "nvme-rdma reconnects and fio completes, verified"
live() { grep -q live "/sys/class/nvme/$ctrl/state"; }
for _ in $(seq 300); do live && break; sleep 0.2; done
live || fail "$ctrl did not reconnect within 60 s ($(cat /sys/class/nvme/$ctrl/state))"
echo "  $ctrl: live again"
rc=0
wait $fio_pid || rc=$?
[ $rc = 0 ] || { cat /tmp/fio.txt; fail "fio failed (exit $rc)"; }
grep -E "WRITE:|READ:|verify" /tmp/fio.txt || true
grep -q "err= 0" /tmp/fio.txt || { cat /tmp/fio.txt; fail "fio reported errors"; }
ibv_devinfo -d virtio_rdma0 | grep -q PORT_ACTIVE || fail "ibv_devinfo: port not active"
echo "  ibv_devinfo: virtio_rdma0 port 1 PORT_ACTIVE"

step "disconnect and unload"
nvme disconnect -n "$NQN" || fail "nvme disconnect failed"
modprobe -r nvme-rdma
# nvmet stays configured and pinned, as in lib/nvme-rdma.sh.
modprobe -r virtio_rdma || fail "virtio_rdma does not unload"
echo "PASS: the backend died twice (under perftest, under NVMe/RDMA fio) and came back; each time the device was failed at once, reset and registered again; perftest ran again, fio verified"
