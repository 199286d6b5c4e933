#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Userspace reaches virtio_rdma0 through uverbs and rdma-core: the device
# has a uverbs interface of the driver's user ABI version, rdma-core's own
# tools (ibv_devices, ibv_devinfo -v) list it through the project's provider
# with the limits the device reported, and a process can open it, allocate
# a PD, register memory and create a CQ (pyverbs), while garbage in the
# driver's udata and mappings of rings that do not exist are refused
# (lib/uverbs_user.py), `rdma res show -dd` shows the driver's view of a
# process's QP, CQ and MRs (lib/res_dd.py), and a process killed while it holds a
# context, a PD and MRs leaves nothing behind, and the driver unloads while
# a process holds a context with a QP and a CQ (disassociation). The runner
# fails the test on any kernel report or leak once the processes are gone.
# modes: virtqueues (the ring mode changes only max_qp/max_cq, which rings.sh
# checks; left out of the ring pass to keep make check in its budget)
set -euo pipefail

source "$(dirname "$0")/lib/common.sh"

driver_up

uv=/sys/class/infiniband/virtio_rdma0/device/infiniband_verbs
[ -d "$uv" ] || fail "virtio_rdma0 has no uverbs interface"
uverbs=$(ls "$uv")
[ "$(cat "$uv/$uverbs/abi_version")" = 1 ] || fail "uverbs abi_version is $(cat "$uv/$uverbs/abi_version"), expected 1"
[ -c "/dev/infiniband/$uverbs" ] || fail "no /dev/infiniband/$uverbs"
echo "virtio_rdma0: $uverbs, user ABI version 1"

# The limits the driver read from the device's config space at probe.
line=$(dmesg | grep -o "virtio-rdma device: .*" | tail -1)
lim() { sed -n "s/.* $1 \([0-9]*\).*/\1/p" <<<"$line"; }
max_qp=$(lim max_qp) max_cq=$(lim max_cq) max_qp_wr=$(lim max_qp_wr) max_cqe=$(lim max_cqe)
# With queues in guest memory every QP but the GSI QP, and every CQ, has rings.
rings=$(dmesg | grep -o "queues in guest memory: .*" | tail -1 || true) comp_vqs=0
if [ -n "$rings" ]; then
	line=$rings
	max_qp=$(($(lim max_ring_qp) + 1)) max_cq=$(lim max_ring_cq) comp_vqs=$(lim num_comp_vqs)
fi
echo "device: max_qp $max_qp max_cq $max_cq max_qp_wr $max_qp_wr max_cqe $max_cqe"

ibv_devices | tee /tmp/devices.txt
grep -q "virtio_rdma0" /tmp/devices.txt || fail "ibv_devices does not list virtio_rdma0"
ibv_devinfo -v -d virtio_rdma0 >/tmp/devinfo.txt 2>&1 || { cat /tmp/devinfo.txt; fail "ibv_devinfo -v failed"; }
grep -E "hca_id|transport|max_qp:|max_cq:|max_qp_wr|max_cqe:|state:|link_layer|GID\[" /tmp/devinfo.txt
expect() { grep -Eq "$1" /tmp/devinfo.txt || { cat /tmp/devinfo.txt; fail "ibv_devinfo: no '$1'"; }; }
expect "hca_id:[[:space:]]+virtio_rdma0"
expect "vendor_part_id:[[:space:]]+42$"
expect "max_qp:[[:space:]]+$max_qp$"
expect "max_cq:[[:space:]]+$max_cq$"
expect "max_qp_wr:[[:space:]]+$max_qp_wr$"
expect "max_cqe:[[:space:]]+$max_cqe$"
expect "state:[[:space:]]+PORT_ACTIVE"
expect "link_layer:[[:space:]]+Ethernet"
expect "GID\[ *[0-9]+\]:[[:space:]]+::ffff:10.0.2.15, RoCE v2"

python3 tools/testing/e2e/lib/uverbs_user.py "$max_qp" "$max_cq" "$max_qp_wr" "$max_cqe" "$comp_vqs" ||
	fail "user verbs"

# User objects are listed with their process ("comm python3"); kernel ones
# with the ULP in brackets.
user_objects() { res_count "comm python3" "$1" dev virtio_rdma0; }
none_left() { [ "$(user_objects pd)" = 0 ] && [ "$(user_objects mr)" = 0 ]; }
none_left || { rdma res show pd dev virtio_rdma0; rdma res show mr dev virtio_rdma0; fail "user objects left"; }

# A process killed while it holds a context, a PD and MRs leaves nothing.
python3 tools/testing/e2e/lib/uverbs_user.py hold /tmp/holding &
holder=$!
wait_for "the holder's MRs" test -s /tmp/holding
echo "holder's MR keys: $(cat /tmp/holding); rdma res show: $(user_objects mr) MRs, $(user_objects pd) PD"
[ "$(user_objects mr)" = 4 ] || { rdma res show mr dev virtio_rdma0; fail "the holder's 4 MRs are not listed"; }
# With -dd each object also shows the driver's view of it.
python3 tools/testing/e2e/lib/res_dd.py "$(sed -n 's/.* qp \([0-9]*\)$/\1/p' /tmp/holding)" ||
	fail "rdma res show -dd"
kill -9 "$holder"
wait "$holder" 2>/dev/null || true
wait_for "the killed process's PD and MRs to go" none_left

# A process holding a context (a QP and a CQ with their rings mapped, a PD,
# MRs) does not pin the driver: unloading it disassociates the context, the
# process's verbs then fail with EIO, and it exits normally.
python3 tools/testing/e2e/lib/uverbs_user.py hold /tmp/holding2 /tmp/gone &
holder=$!
wait_for "the second holder's objects" test -s /tmp/holding2
echo "holder: $(cat /tmp/holding2)"
modprobe -r virtio_rdma || fail "virtio_rdma does not unload while a process holds a context"
wait_for "the holder to see the device gone" test -s /tmp/gone
wait "$holder" || fail "the holder did not exit normally"
[ "$(cat /tmp/gone)" = 5 ] || fail "the holder's verbs failed with errno $(cat /tmp/gone), expected EIO (5)"
echo "unloaded under a live context; the holder's verbs then failed with EIO"
echo "PASS: uverbs and rdma-core on virtio_rdma0: ibv_devinfo -v, PD, user MR, hostile udata"
