# SPDX-License-Identifier: GPL-2.0
# The body of the wire tests (wire-rxe.sh, wire-hosts.sh; sourced): this
# guest's virtio_rdma0 (either personality, its port on an uplink) and a peer
# host on the same network, whose RDMA device is $PEER_KIND: "rxe" (rxe0
# on its NIC) or "virtio" (virtio_rdma0 of another backend process).
#   The port's IB MTU follows eth0's MTU (1024 at 1500, 4096 at 9000:
#   run.sh --mtu, a test's "# mtu:" line), and a ping of eth0's MTU with
#   DF set crosses the link whole (jumbo frames through the uplinks).
#   Ethernet through the uplink: ping both ways (the guest's ARP, answered
#   from the wire, is also what teaches the backend its neighbour's MAC);
#   ibv_ud_pingpong with data checked, the peer as server and this guest
#   as client, then the other way round; then, each way, RC:
#   ibv_rc_pingpong (4 KiB messages, data checked), rping with its data
#   verified (rdma_cm: the CM's MADs are datagrams on the wire; SEND, RDMA
#   READ and WRITE), ib_write_bw, ib_read_bw and ib_atomic_bw;
#   ibv_uc_pingpong (UC: nothing acknowledged);
#   lib/wire_ops.py for what no stock tool posts (WRITE with immediate
#   data, COMPARE AND SWAP, ATOMIC WRITE, FLUSH, each checked at both ends;
#   the peer also sends hostile raw frames at this side's QP first, which
#   must not reach its memory); and NVMe over RDMA with the peer as the
#   target (fio with crc32c verify on this side). rdma_cm across the wire
#   is rping's in make check (perftest -R there added only minutes;
#   WIRE_FULL, below, runs it). Each side's counters show the packets went
#   over the wire.
#   With rxe as the peer, then a lossy network (below).
# WIRE_ONE_WAY=1 runs the RC steps with the peer serving only, and of
# them the pingpong, rping, ib_write_bw and ib_read_bw: what the rest adds
# is proven by wire-rxe.sh, against each half of this device alone.
# WIRE_FULL=1 (by hand: make check's minutes do not stretch to it) runs
# issue 43's whole list each way instead: perftest's ib_send, ib_write,
# ib_read and ib_atomic _bw and _lat, each also over rdma_cm (-R), and
# NVMe over RDMA with each side as the target, and NVMe over the lossy
# network (below); it overrides WIRE_ONE_WAY.
#   run.sh --personality net --peer-rdma rxe --timeout 2400 \
#     --peer "WIRE_FULL=1 bash tools/testing/e2e/wire-rxe.sh peer" \
#     -- "WIRE_FULL=1 bash tools/testing/e2e/wire-rxe.sh"
# (wire-hosts.sh: --hosts 2 instead of --peer-rdma rxe; the ID-42 device:
# --backend-args --rings instead of --personality net, its guest's NIC
# then the backend's).

ROLE=${1:-main}
[ -z "${WIRE_FULL:-}" ] || WIRE_ONE_WAY=
if [ "$ROLE" = main ] || [ "$PEER_KIND" = virtio ]; then
	dev=virtio_rdma0
	driver_up
else
	dev=rxe0
	modprobe rdma_rxe
	rdma link add rxe0 type rxe netdev eth0
	wait_for "rxe0's RoCEv2 GID of $MY_IP" v4_gid rxe0
fi
if [ "$ROLE" = main ]; then other=10.0.2.16; else other=10.0.2.15; fi
# Who serves in each direction.
ops=$(dirname "$0")/lib/wire_ops.py
there="the peer ($PEER_KIND) serves" here="this side serves"
gid=$(v4_gid_index $dev)

# The IB MTU a port on eth0 reports: the largest that fits eth0's MTU less
# 96 bytes of headers, as the kernel's iboe_get_mtu takes it (the device
# itself allows 84; the driver reports the smaller).
eth_mtu=$(cat /sys/class/net/eth0/mtu)
# WIRE_MTU: the MTU the run was given (the device's virtio-net must offer it).
[ -z "${WIRE_MTU:-}" ] || [ "$eth_mtu" = "$WIRE_MTU" ] || fail "eth0's MTU is $eth_mtu, not the run's $WIRE_MTU"
ib_mtu=4096
while [ $((ib_mtu + 96)) -gt "$eth_mtu" ] && [ $ib_mtu -gt 256 ]; do ib_mtu=$((ib_mtu / 2)); done
step "MTU: eth0 $eth_mtu, so $dev's port $ib_mtu"
ibv_devinfo -d $dev >/tmp/devinfo.txt
got=$(awk '$1 == "active_mtu:" { print $2; exit }' /tmp/devinfo.txt)
[ "$got" = $ib_mtu ] || fail "$dev's active_mtu is $got, not $ib_mtu (eth0's MTU $eth_mtu)"
# A frame of the whole MTU, not to be fragmented, each way.
wait_for "the other host answers a ping of $eth_mtu bytes" \
	ping -c 1 -W 2 -M do -s $((eth_mtu - 28)) $other
diagnose() {
	rdma res show qp link $dev/1 2>/dev/null | head -20
	ip neigh show dev eth0 || true
	rdma statistic show link $dev/1 2>/dev/null || true
}
echo "$ROLE: $MY_IP, $dev GID index $gid ($(cat /sys/class/infiniband/$dev/ports/1/gids/"$gid"))"

step "ping $other"
wait_for "$other answers on the link" ping -c 1 -W 1 "$other"
ping -c 3 -i 0.2 "$other" >/dev/null || fail "ping $other"

# cm_step NAME SERVER... -- CLIENT...: a pair_step whose client connects
# through rdma_cm (perftest -R). Its client crashes in librdmacm when a
# connect is rejected because nobody listens yet, and this side cannot see
# the other's listener: the server's side says when it listens (a TCP
# connection to port 9998 of its host, $srv).
cm_step() {
	local name=$1 spid i
	shift
	local server=()
	while [ "$1" != -- ]; do server+=("$1"); shift; done
	shift
	if [ "$ROLE" = peer ]; then
		step "$name (server)"
		timeout 300 "${server[@]}" >/tmp/server.log 2>&1 &
		spid=$!
		for i in $(seq 600); do
			rdma res show cm_id src-port "$port" 2>/dev/null | grep -q "state LISTEN" && break
			sleep 0.2
		done
		# The IB CM listener comes a moment after rdma_cm lists its ID
		# (see pair in common.sh).
		sleep 1
		timeout 120 python3 -c 'import socket; socket.create_server(("", 9998)).accept()' ||
			fail "$name: the client never asked whether the server listens"
		if ! wait "$spid"; then
			sed 's/^/  server: /' /tmp/server.log | tail -20
			fail "$name: server failed"
		fi
		sed 's/^/  server: /' /tmp/server.log | tail -4
	else
		step "$name (client)"
		for i in $(seq 600); do
			(echo >"/dev/tcp/$srv/9998") 2>/dev/null && break
			sleep 0.2
		done
		if ! timeout 120 "$@" >/tmp/client.log 2>&1; then
			sed 's/^/  client: /' /tmp/client.log | tail -20
			fail "$name: client failed"
		fi
		sed 's/^/  client: /' /tmp/client.log | tail -6
	fi
	port=$((port + 1))
}

# nvme_step WHO N: NVMe over RDMA, the target (NQN and port of direction
# N) on the serving side ($srv), the host on the other: connect, 2 MiB of
# random 4 KiB writes verified (crc32c), disconnect.
nvme_step() {
	local who=$1 nqn=nqn.2026-12.org.virtio-rdma:wire$2 svc=$((4420 + $2))
	modprobe -a nvmet nvmet-rdma nvme-rdma
	if [ "$ROLE" = peer ]; then
		step "NVMe/RDMA target, $who"
		nvmet_subsystem "$nqn" 16M
		nvmet_port $((10 + $2)) rdma "$svc" "$nqn"
		timeout 600 python3 -c 'import socket; socket.create_server(("", 9997)).accept()' ||
			fail "NVMe/RDMA, $who: the host never said it was done"
		return
	fi
	step "NVMe/RDMA host, $who: fio, crc32c verified"
	ADDR=$srv PORT=$svc NVME_RETRY=240 nvme_connect_rdma "$nqn"
	fio --eta=never --name=rand4k --filename="$NVME_NS" --ioengine=libaio --direct=1 \
		--iodepth=16 --rw=randwrite --bs=4k --size=2M --verify=crc32c --do_verify=1 \
		--verify_fatal=1 --verify_state_save=0 --output=/tmp/fio.txt || { cat /tmp/fio.txt; fail "fio"; }
	grep -E "WRITE:|READ:" /tmp/fio.txt
	nvme disconnect -n "$nqn" || fail "nvme disconnect failed"
	echo >"/dev/tcp/$srv/9997" || fail "cannot tell the target that we are done"
}

# other_role: the role whose half a reversed step runs here.
other_role() { if [ "$ROLE" = main ]; then echo peer; else echo main; fi; }

pair_step "ibv_ud_pingpong, $there" ibv_ud_pingpong -d $dev -g "$gid" -n 200 -s 1024 -c -p $port -- \
	ibv_ud_pingpong -d $dev -g "$gid" -n 200 -s 1024 -c -p $port 10.0.2.16
# The other way round: the server here, the client on the peer.
ROLE=$(other_role) pair_step "ibv_ud_pingpong, $here" \
	ibv_ud_pingpong -d $dev -g "$gid" -n 200 -s 1024 -c -p $port -- \
	ibv_ud_pingpong -d $dev -g "$gid" -n 200 -s 1024 -c -p $port 10.0.2.15

dirs="0 1"
[ -z "${WIRE_ONE_WAY:-}" ] || dirs=0
for dir in $dirs; do
	# The peer serves, then this side does.
	if [ $dir = 0 ]; then r=$ROLE srv=10.0.2.16 who=$there; else r=$(other_role) srv=10.0.2.15 who=$here; fi
	ROLE=$r pair_step "ibv_rc_pingpong, $who" ibv_rc_pingpong -d $dev -g "$gid" -n 200 -s 4096 -c -p $port -- \
		ibv_rc_pingpong -d $dev -g "$gid" -n 200 -s 4096 -c -p $port $srv
	ROLE=$r pair_step "rping, $who" rping -s -a $srv -p $port -C 50 -- rping -c -a $srv -p $port -C 50 -V -v
	# 50 messages of 64 KiB (800 packets) each: what more would add is
	# minutes of make check, not coverage.
	tools="ib_write_bw ib_read_bw ib_atomic_bw"
	[ -z "${WIRE_ONE_WAY:-}" ] || tools="ib_write_bw ib_read_bw"
	[ -z "${WIRE_FULL:-}" ] || tools="ib_send_bw ib_write_bw ib_read_bw ib_atomic_bw
		ib_send_lat ib_write_lat ib_read_lat ib_atomic_lat"
	for t in $tools; do
		ROLE=$r pair_step "$t, $who" $t -d $dev -x "$gid" -F -n 50 -p $port -- \
			$t -d $dev -x "$gid" -F -n 50 -p $port $srv
		# perftest takes the port's MTU as its path MTU.
		[ "$r" != main ] || grep -qE "Mtu *: *$ib_mtu\[B\]" /tmp/client.log ||
			fail "$t did not run at the port's MTU $ib_mtu: $(grep -E "Mtu *:" /tmp/client.log)"
		[ -n "${WIRE_FULL:-}" ] || continue
		ROLE=$r cm_step "$t -R, $who" $t -d $dev -F -R -n 50 -p $port -- \
			$t -d $dev -F -R -n 50 -p $port $srv
	done
	# Two of this device (WIRE_ONE_WAY): the tools above; the rest is
	# what wire-rxe proves against rxe, each half of this device alone.
	[ -z "${WIRE_ONE_WAY:-}" ] || continue
	ROLE=$r pair_step "ibv_uc_pingpong, $who" ibv_uc_pingpong -d $dev -g "$gid" -n 200 -s 4096 -c -p $port -- \
		ibv_uc_pingpong -d $dev -g "$gid" -n 200 -s 4096 -c -p $port $srv
	# The other way, the client (the peer) is also a hostile sender on
	# the link, aiming raw frames at this side's QP and memory.
	hostile=
	[ $dir = 0 ] || hostile=--hostile
	ROLE=$r pair_step "WRITE with immediate, COMPARE AND SWAP, ATOMIC WRITE, FLUSH${hostile:+, a hostile sender}, $who" \
		python3 "$ops" serve $dev "$gid" $port $hostile -- python3 "$ops" client $dev "$gid" $srv $port $hostile
	# NVMe with the host on this side (the guest as a cloud's initiator);
	# this device as the target is two-guests@net's and lossy-link's, and
	# across the wire WIRE_FULL's.
	[ $dir = 0 ] || [ -n "${WIRE_FULL:-}" ] || continue
	ROLE=$r nvme_step "$who" $dir
done

# A lossy network (PEER_KIND rxe): netem on the rxe guest's NIC loses 1 %
# of what rxe sends (its requests, ACKs and READ responses) and holds back
# a tenth of it by a millisecond (reordering). perftest (WRITE, READ) with
# the peer serving: this side's requests recover from lost and late ACKs
# and READ responses, which rxe's counters show (our packets it saw twice,
# sequence NAKs). Then rxe WRITEs to this side (ib_write_bw), whose
# requests this side's counters show arriving after a gap. Smaller than
# the others: rxe's go-back-N takes a second sequence NAK only after an ACK
# and otherwise waits for its transport timer (67 ms for perftest), so a
# tenth of its packets late costs rxe even against itself (100 64-KiB
# WRITEs, rxe to rxe: 187 s; rxe to this side: 99 s). WIRE_FULL adds NVMe
# with rxe's target and the host here (2 MiB verified in ~20 s on 12-07).
# Not here: NVMe with the host on rxe over this network (connected, and its
# fio had not finished when the test's 15 minutes ran out, on 12-06).
if [ "$PEER_KIND" = rxe ] && [ -z "${WIRE_ONE_WAY:-}" ]; then
	hw=/sys/class/infiniband/$dev/ports/1/hw_counters
	if [ "$ROLE" = peer ]; then
		step "netem on eth0: loss 1 %, a tenth of the packets 1 ms late"
		tc qdisc add dev eth0 root netem loss 1% delay 1ms reorder 90% || fail "tc netem"
		tc qdisc show dev eth0
		recovered() { echo $(($(cat $hw/rcvd_seq_err) + $(cat $hw/duplicate_request) + $(cat $hw/completer_retry_err))); }
	else
		# rxe's requests that came after a gap.
		recovered() { cat $hw/dropped_bad_psn; }
	fi
	before=$(recovered)
	r=$ROLE srv=10.0.2.16 who="lossy network, $there"
	for t in ib_write_bw ib_read_bw; do
		ROLE=$r pair_step "$t, $who" $t -d $dev -x "$gid" -F -n 50 -p $port -- \
			$t -d $dev -x "$gid" -F -n 50 -p $port $srv
	done
	mid=$(recovered)
	r=$(other_role) srv=10.0.2.15 who="lossy network, $here"
	ROLE=$r pair_step "ib_write_bw 4 KiB, $who" ib_write_bw -d $dev -x "$gid" -F -n 200 -s 4096 -p $port -- \
		ib_write_bw -d $dev -x "$gid" -F -n 200 -s 4096 -p $port $srv
	after=$(recovered)
	# rxe: sequence NAKs it got, our packets it saw twice, its own timer;
	# this device: rxe's requests after a gap.
	echo "  packets lost and recovered, as $dev counts them: $((mid - before)) with rxe serving, $((after - mid)) with this side serving"
	# WIRE_FULL: NVMe over this network, rxe's nvmet the target, the host
	# here: the target's RDMA READs and WRITEs are rxe's requests over the
	# loss, recovered by its transport timer (rdma_cm's: about a second).
	[ -z "${WIRE_FULL:-}" ] || srv=10.0.2.16 nvme_step "lossy network, $there" 2
	if [ "$ROLE" = peer ]; then
		[ "$mid" -gt "$before" ] || fail "rxe's counters show no recovery of its answers to this side"
		tc qdisc del dev eth0 root
	else
		[ "$after" -gt "$mid" ] || fail "$dev's counters show none of rxe's requests after a gap"
	fi
fi

step "counters"
rdma statistic show link $dev/1 |
	awk '{ for (i = 1; i < NF; i++) if ($i ~ /^(sent|rcvd)_pkts$/) print "  " $i, $(i + 1) }'
# Every packet of this port went over the wire (its peer is in no backend
# of this one): at least 2 × 200 datagrams each way, whatever else (RC,
# MADs) on top. rxe counts what went over its netdev.
hw=/sys/class/infiniband/$dev/ports/1/hw_counters
sent=$(cat $hw/sent_pkts) rcvd=$(cat $hw/rcvd_pkts)
[ "$sent" -ge 400 ] && [ "$rcvd" -ge 400 ] || fail "$dev sent $sent and received $rcvd packets, not 400 each"
