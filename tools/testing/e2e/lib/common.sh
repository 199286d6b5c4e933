# SPDX-License-Identifier: GPL-2.0
# Shared by the end-to-end tests (sourced, not run on its own).

# fail MESSAGE: the test fails, leaving the device's state in the log; a test
# may define diagnose() to add its own.
fail() {
	echo "FAIL: $*"
	rdma link show || true
	if declare -F diagnose >/dev/null; then diagnose || true; fi
	dmesg | tail -40
	exit 1
}
# step NAME: a step's heading, with the guest's uptime, which says where a
# test's minutes go (make check's budget).
step() { echo "== $* [at $(cut -d. -f1 /proc/uptime) s]"; }
# wait_for DESCRIPTION COMMAND...: polls COMMAND for up to 20 s.
wait_for() {
	local what=$1; shift
	for _ in $(seq 100); do "$@" && return 0; sleep 0.2; done
	fail "timed out waiting for: $what"
}
# res_count PATTERN OBJECT [ARG...]: how many lines of `rdma res show OBJECT
# ARG...` match PATTERN. When rdma itself fails this prints its failure
# instead of a number, so that no count, and no "nothing left", comes from a
# command that printed nothing: any comparison with it fails.
res_count() {
	local pattern=$1 out
	shift
	if out=$(rdma res show "$@" 2>&1); then
		grep -c -- "$pattern" <<<"$out" || true
	else
		echo "(rdma res show $* failed: $out)"
	fi
}
# user_qps DEV: the lines of `rdma res show qp` for DEV's port 1 that are user
# processes' QPs (a kernel ULP's say "comm [ULP]"), or rdma's failure.
user_qps() {
	local out
	out=$(rdma res show qp link "$1/1" 2>&1) || { echo "(rdma res show qp failed: $out)"; return; }
	grep -v "comm \[" <<<"$out" || true
}
link_active() { rdma link show virtio_rdma0/1 2>/dev/null | grep -q "state ACTIVE"; }
# This guest's IPv4 address: 10.0.2.15, or 10.0.2.16 for a two-guest run's peer.
MY_IP=$(sed -n 's/.*\bvrdma.ip=\([^ ]*\).*/\1/p' /proc/cmdline)
# The RoCEv2 GID of IPv4 address $1, as sysfs prints it.
v4_gid_of() {
	local a b c d
	IFS=. read -r a b c d <<<"$1"
	printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n' "$a" "$b" "$c" "$d"
}
# v4_gid_index [DEV]: the index of the RoCEv2 GID of eth0's IPv4 address
# in DEV's (virtio_rdma0's) port 1 table; fails if there is none.
v4_gid_index() {
	local g want
	want=$(v4_gid_of "$MY_IP")
	for g in /sys/class/infiniband/"${1:-virtio_rdma0}"/ports/1/gids/*; do
		if [ "$(cat "$g")" = "$want" ] &&
			[ "$(cat "${g/gids/gid_attrs/types}" 2>/dev/null)" = "RoCE v2" ]; then
			basename "$g"
			return 0
		fi
	done 2>/dev/null
	return 1
}
# v4_gid [DEV]: that GID is in the table.
v4_gid() { v4_gid_index "$@" >/dev/null; }
# nvmet_subsystem NQN SIZE: an nvmet subsystem open to any host, with one
# namespace backed by a SIZE file on tmpfs.
nvmet_subsystem() {
	local s=/sys/kernel/config/nvmet/subsystems/$1 img=/tmp/${1##*:}.img
	truncate -s "$2" "$img"
	mkdir "$s"
	echo 1 >"$s/attr_allow_any_host"
	mkdir "$s/namespaces/1"
	echo "$img" >"$s/namespaces/1/device_path"
	echo 1 >"$s/namespaces/1/enable"
}
# nvmet_port ID TRTYPE SVCID NQN: exports subsystem NQN on eth0's address
# ($MY_IP) over TRTYPE (rdma, tcp) at SVCID.
nvmet_port() {
	local p=/sys/kernel/config/nvmet/ports/$1
	mkdir "$p"
	echo "$2" >"$p/addr_trtype"
	echo ipv4 >"$p/addr_adrfam"
	echo "$MY_IP" >"$p/addr_traddr"
	echo "$3" >"$p/addr_trsvcid"
	ln -s "/sys/kernel/config/nvmet/subsystems/$4" "$p/subsystems/$4"
}
# nvme_connect_rdma NQN [OPTION...]: connects to NQN over RDMA at
# $ADDR:$PORT (a new host identity, the options added) and sets NVME_CTRL to
# its controller and NVME_NS to its namespace's block device, once present.
# With NVME_RETRY=SECONDS it connects again every 2 s while that fails (a
# target in another guest may not listen yet).
nvme_connect_rdma() {
	local nqn=$1 hostid c deadline=$((SECONDS + ${NVME_RETRY:-0}))
	shift
	hostid=$(cat /proc/sys/kernel/random/uuid)
	until nvme connect -t rdma -a "$ADDR" -s "$PORT" -n "$nqn" "$@" \
		--hostnqn "nqn.2014-08.org.nvmexpress:uuid:$hostid" --hostid "$hostid" 2>/tmp/connect.log; do
		[ $SECONDS -lt $deadline ] || { cat /tmp/connect.log; fail "nvme connect failed"; }
		sleep 2
	done
	NVME_CTRL=""
	for c in /sys/class/nvme/nvme*; do
		[ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$nqn" ] && NVME_CTRL=$(basename "$c")
	done
	[ -n "$NVME_CTRL" ] || fail "no controller of $nqn"
	NVME_NS=/dev/${NVME_CTRL}n1
	wait_for "$NVME_NS" test -b "$NVME_NS"
}
# nvme_host_check: what an NVMe/RDMA host ($NVME_CTRL, connected) made on
# virtio_rdma0. nvme-rdma opens an I/O queue per CPU, each an RC QP through
# rdma_cm with a CQ of the core's pool (ib_core's: one per completion vector
# and CPU; with queues in guest memory their events come on as many
# completion-event queues); the host's fast-registration MRs and its PD are
# listed under its name.
nvme_host_check() {
	local ctrl=$NVME_CTRL vectors ioq want used res filter obj comm min n
	[ "$(cat "/sys/class/nvme/$ctrl/transport")" = rdma ] || fail "$ctrl is not an RDMA controller"
	vectors=$(dmesg | sed -n 's/.*virtio_rdma.*queues in guest memory:.* num_comp_vqs \([0-9]*\).*/\1/p' | tail -1)
	ioq=$(dmesg | sed -n "s/.*nvme $ctrl: creating \([0-9]*\) I\/O queues.*/\1/p" | tail -1)
	echo "I/O queues of $ctrl: ${ioq:-?} (CPUs $(nproc), completion vectors ${vectors:-1})"
	[ "${ioq:-0}" = "$(nproc)" ] || fail "$ctrl has ${ioq:-no} I/O queues for $(nproc) CPUs"
	if [ -n "$vectors" ]; then
		want=$((vectors < $(nproc) ? vectors : $(nproc)))
		# Only CQs that name their queue (a CQ without the attribute is none).
		used=$(rdma -j -dd res show cq | python3 -c '
import json, sys
print(len({c["drv_comp_vq"] for c in json.load(sys.stdin)
           if c.get("ifname") == "virtio_rdma0" and c.get("comm") == "ib_core"
           and "drv_comp_vq" in c}))')
		echo "completion-event queues of the pooled CQs: $used"
		[ "$used" = "$want" ] || fail "the pooled CQs use $used completion-event queues, not $want"
	fi
	while read -r res filter obj comm min; do
		n=$(res_count "comm \[$comm\]" "$res" "$filter" "$obj")
		echo "rdma res show $res: $n of [$comm]"
		[ "$n" -ge "$min" ] || { rdma res show "$res" "$filter" "$obj" || true; fail "rdma res show $res: fewer than $min of [$comm]"; }
	done <<-EOF
		qp link virtio_rdma0/1 rdma_cm $((1 + $(nproc)))
		cq dev virtio_rdma0 ib_core 2
		mr dev virtio_rdma0 nvme_rdma 2
		pd dev virtio_rdma0 nvme_rdma 1
	EOF
}
# nvmet_srq_check [WAIT]: nvmet-rdma, loaded with use_srq=1 and serving a
# host, takes its queues' receives from SRQs (one per completion vector)
# when virtio_rdma0 has them (queues in guest memory), and has none
# otherwise. nvmet makes them when a host's first queue connects: WAIT
# seconds at most for that (a host in another guest).
nvmet_srq_check() {
	local max_srq srqs t
	max_srq=$(ibv_devinfo -v -d virtio_rdma0 | sed -n 's/^[[:space:]]*max_srq:[[:space:]]*\([0-9]*\).*/\1/p')
	for ((t = 0; t < ${1:-0} * 2; t++)); do
		[ "${max_srq:-0}" -gt 0 ] && [ "$(res_count "comm \[nvmet_rdma\]" srq dev virtio_rdma0)" = 0 ] || break
		sleep 0.5
	done
	srqs=$(res_count "comm \[nvmet_rdma\]" srq dev virtio_rdma0)
	echo "max_srq ${max_srq:-?}: nvmet's SRQs on virtio_rdma0: $srqs"
	if [ "${max_srq:-0}" -gt 0 ]; then
		[ "$srqs" -ge 1 ] || { rdma res show srq || true; fail "nvmet-rdma made no SRQ (use_srq=1)"; }
	else
		[ "$srqs" = 0 ] || fail "SRQs listed on a device without them"
	fi
}
# backend_kill, backend_start: the runner kills the device backend (SIGKILL,
# as a crash) or starts it again (vm/guest.sh), and says when it has.
backend_ctl() {
	rm -f /mnt/run/backend.state
	echo "$1" >/mnt/run/backend.ctl
	for _ in $(seq 100); do
		[ -s /mnt/run/backend.state ] && break
		sleep 0.2
	done
	[ "$(cat /mnt/run/backend.state 2>/dev/null)" = "$2" ] || fail "the runner did not $1 the backend"
}
backend_kill() { backend_ctl kill killed; }
backend_start() { backend_ctl start started; }
# backend_scrape: the backend's metrics (its --metrics, read by the runner
# over HTTP from the host's side) on stdout.
backend_scrape() {
	backend_ctl scrape scraped
	cat /mnt/run/metrics.txt
}
# metric NAME DEVICE: the value of counter NAME of the backend's DEVICE
# (its socket's name: vrdma0 is this guest's, vrdma1 the peer's).
metric() {
	backend_scrape | awk -v m="vhost_user_rdma_$1_total{device=\"$2\"}" '$1 == m { print $2 }'
}
# driver_up: loads virtio_rdma and waits until its port is usable.
driver_up() {
	modprobe virtio_rdma
	wait_for "virtio_rdma0 port ACTIVE" link_active
	wait_for "the RoCEv2 GID of $MY_IP" v4_gid
}
# pair NAME SERVER_CMD... -- CLIENT_CMD...: runs a server in the background,
# then its client; both must succeed within 120 s. Their output stays in
# /tmp/server.log and /tmp/client.log (the client's tail is shown unless
# PAIR_QUIET is set). $port is a fresh TCP port for each pair: callers pass
# it to both sides, and it moves on afterwards.
port=18515
pair() {
	local name=$1; shift
	local server=() client=()
	while [ "$1" != -- ]; do server+=("$1"); shift; done
	shift
	client=("$@")
	[ -n "${PAIR_QUIET:-}" ] || step "$name"
	timeout 120 "${server[@]}" >/tmp/server.log 2>&1 &
	local spid=$!
	# Until the server listens on $port: a TCP port (the pingpongs' and
	# perftest's exchange) or an RDMA CM one (rping, perftest -R), which
	# rdma_cm lists among its IDs; at most 10 s. A client that came too
	# early would be rejected (and perftest -R's crashes on that path).
	local i
	for i in $(seq 100); do
		ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
		if rdma res show cm_id src-port "$port" 2>/dev/null | grep -q "state LISTEN"; then
			# rdma_cm lists the device's listening ID (and calls it
			# LISTEN) before it creates the IB CM listener a REQ
			# meets: a client in that window is rejected (reason 8,
			# invalid service ID; seen twice in lossy-link, where
			# perftest -R then crashed). Let the server finish.
			sleep 1
			break
		fi
		sleep 0.1
	done
	local rc=0
	timeout 120 "${client[@]}" >/tmp/client.log 2>&1 || rc=$?
	local src=0
	wait "$spid" || src=$?
	[ -n "${PAIR_QUIET:-}" ] || sed 's/^/  client: /' /tmp/client.log | tail -8
	if [ "$rc" != 0 ] || [ "$src" != 0 ]; then
		sed 's/^/  client: /' /tmp/client.log | tail -20
		sed 's/^/  server: /' /tmp/server.log | tail -20
		fail "$name: client exit $rc, server exit $src"
	fi
	port=$((port + 1))
}

# Two-guest runs (run.sh --peer): the peer (10.0.2.16) runs each step's
# server, the main guest (10.0.2.15) its client, in the same order.
# on_peer NAME SERVER...: the peer's half of a step.
on_peer() {
	local name=$1; shift
	[ -n "${PAIR_QUIET:-}" ] || step "$name (server)"
	local rc=0
	timeout 300 "$@" >/tmp/server.log 2>&1 || rc=$?
	if [ $rc != 0 ]; then
		sed 's/^/  server: /' /tmp/server.log | tail -20
		fail "$name: server exit $rc"
	fi
	[ -n "${PAIR_QUIET:-}" ] || sed 's/^/  server: /' /tmp/server.log | tail -4
}
# What a client says when nobody listens yet (the peer's server has not
# started): a refused TCP connection (the pingpongs' and perftest's
# exchange), an rdma_cm connect rejected for want of a listener (rping:
# RDMA_CM_EVENT_REJECTED; perftest -R: "Unexpected CM event ... 8", 8 being
# RDMA_CM_EVENT_REJECTED). Seen from each client run against a port where
# nothing listens.
NOT_LISTENING="Couldn't connect to|RDMA_CM_EVENT_REJECTED|Unexpected CM event .* 8\$"
# on_main NAME CLIENT...: this guest's half. The client runs again only while
# its failure says that nobody listens yet; any other failure fails the step
# at once, so that a real error cannot hide behind a retry that then works.
on_main() {
	local name=$1; shift
	[ -n "${PAIR_QUIET:-}" ] || step "$name (client)"
	local deadline=$((SECONDS + 240)) rc
	while :; do
		rc=0
		timeout 120 "$@" >/tmp/client.log 2>&1 || rc=$?
		[ $rc != 0 ] || break
		if [ $SECONDS -ge $deadline ] || ! grep -E "$NOT_LISTENING" /tmp/client.log >/dev/null; then
			sed 's/^/  client: /' /tmp/client.log | tail -20
			fail "$name: client exit $rc"
		fi
		sleep 0.5
	done
	[ -n "${PAIR_QUIET:-}" ] || sed 's/^/  client: /' /tmp/client.log | tail -6
}
# pair_step NAME SERVER... -- CLIENT...: one step of a two-guest run, the
# half of this guest's $ROLE: "peer" runs the server, "main" the client.
pair_step() {
	local name=$1; shift
	local server=()
	while [ "$1" != -- ]; do server+=("$1"); shift; done
	shift
	if [ "$ROLE" = peer ]; then on_peer "$name" "${server[@]}"; else on_main "$name" "$@"; fi
	port=$((port + 1))
}
# The peer serves until the main guest says it is done (a TCP connection to
# the peer's port 9999): for servers that do not end with their client.
peer_wait_done() {
	timeout "${1:-600}" python3 -c 'import socket; socket.create_server(("", 9999)).accept()' ||
		fail "the main guest never said it was done"
}
main_done() { echo >/dev/tcp/10.0.2.16/9999 || fail "cannot tell the peer that we are done"; }
