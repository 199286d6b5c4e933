# SPDX-License-Identifier: GPL-2.0
# The body of verbs-ex.sh, which make check runs in both data-path modes
# (virtqueues: the kernel's rings and doorbell; --rings: rings in the
# process's memory); see its header.

source "$(dirname "$0")/lib/common.sh"

driver_up
dev=virtio_rdma0 gid=$(v4_gid_index)

step "create_cq_ex, create_qp_ex and ibv_wr_* (lib/uverbs_verbs_ex.c)"
/mnt/run/bin/uverbs_verbs_ex | sed 's/^/  /'
[ "${PIPESTATUS[0]}" = 0 ] || fail "the extended verbs"

# wr_api_pair NAME ENV -- TOOL ARGS...: a perftest pair (client on localhost)
# under the shim, ENV added to both sides; the client's counts end up in
# /tmp/wr_api.client.
wr_api_pair() {
	local name=$1 env=$2
	shift 3
	rm -f /tmp/wr_api.client /tmp/wr_api.server
	pair "$name" env LD_PRELOAD=/mnt/run/bin/perftest_wr_api.so WR_API_LOG=/tmp/wr_api.server $env "$@" -p $port -- \
		env LD_PRELOAD=/mnt/run/bin/perftest_wr_api.so WR_API_LOG=/tmp/wr_api.client $env "$@" -p $port localhost
	echo "  client: $(cat /tmp/wr_api.client 2>/dev/null), server: $(cat /tmp/wr_api.server 2>/dev/null)"
}

# perftest picks ibv_wr_* only for devices it knows by vendor_part_id
# (mlx5, EFA, HNS): without --use_old_post_send it still posts with
# ibv_post_send here, and says so ("ibv_wr* API : OFF"). Seen through the
# shim that only counts:
n=200
opts="-d $dev -x $gid -F -n $n"
wr_api_pair "ib_write_bw as perftest picks its post path for virtio_rdma" WR_API_KEEP_ID=1 -- ib_write_bw $opts
grep -q "ibv_wr\* API *: OFF" /tmp/client.log && grep -qx "qps 0 wr_complete 0 failed 0" /tmp/wr_api.client ||
	fail "perftest took ibv_wr_* by itself: the shim is no longer needed, drop it"

# With the device presented as an hns (HiSilicon) to perftest alone, it
# creates its QPs with ibv_create_qp_ex and posts every message with
# ibv_wr_*. --no_ddp: else perftest asks mlx5dv_query_device about
# out-of-order receives for any RC QP of that path, and fails on another
# provider. -I 64: the device's inline limit (perftest's default may be
# larger).
for t in "ib_write_bw -I 64" "ib_send_bw -I 64" ib_read_bw "ib_write_lat -I 64"; do
	# shellcheck disable=SC2086
	wr_api_pair "$t, posting with ibv_wr_*" "" -- $t $opts --no_ddp
	grep -q "ibv_wr\* API *: ON" /tmp/client.log || fail "$t: perftest did not take its ibv_wr_* path"
	read -r _ qps _ ncomp _ failed </tmp/wr_api.client || fail "$t: no counts from the shim"
	[ "$qps" -ge 1 ] && [ "$ncomp" -ge "$n" ] && [ "$failed" = 0 ] ||
		fail "$t: $qps extended QPs, $ncomp wr_complete, $failed failed (want >= 1, >= $n, 0)"
done

step "nothing of the clients is left"
res=$(user_qps "$dev")
[ -z "$res" ] || fail "QPs of user processes remain: $res"
echo "PASS"
