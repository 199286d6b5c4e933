#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The doorbell of queues in guest memory (VIRTIO_RDMA_F_RINGS): a process
# makes a system call for its posts only when the device stopped polling its
# rings and asked for one (VIRTIO_RDMA_RING_F_NOTIFY in the ring's record).
# The device here keeps polling for 2 s after the rings go idle, so that how
# often it falls asleep does not depend on how busy the host is: a busy
# ib_write_bw then rings a handful of doorbells for 4000 messages, where a
# provider that ignored NOTIFY (or a device that never cleared it) would
# ring one per post. Counted on the uverbs file only, under strace.
# backend-args: --rings --poll-us 2000000
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

driver_up
dev=virtio_rdma0 gid=$(v4_gid_index)

n=4000
opts="-d $dev -x $gid -F -s 64 -n $n"
pair "ib_write_bw -s 64 -n $n, the client under strace" ib_write_bw $opts -p $port -- \
	strace -f -y -e trace=openat,write -o /tmp/strace.log ib_write_bw $opts -p $port localhost
# -y names each descriptor's file: the uverbs file must show up as opened,
# or the count below would see nothing whatever the provider does.
grep -q 'openat(.*"/dev/infiniband/uverbs[0-9]*".* = [0-9]*</dev/infiniband/uverbs' /tmp/strace.log ||
	fail "strace did not show the client opening its uverbs file"
doorbells=$(grep -c '^[0-9 ]*write([0-9]*</dev/infiniband/uverbs' /tmp/strace.log || true)
echo "  write() calls of the client on its uverbs file: $doorbells for $n messages"
[ "$doorbells" -lt $((n / 40)) ] || fail "$doorbells doorbells for $n messages"
