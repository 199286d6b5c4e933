#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Fairness between two guests on one backend (run.sh --peer): this guest
# (main) measures ib_write_bw with 64 KiB messages between two QPs of its
# own virtio_rdma0, ten seconds at a time: alone (the peer idle); while the
# peer only burns its vCPUs (a busy loop each, as a flood's perftest client
# spins); and while the peer floods its own virtio_rdma0 with 4 MiB
# ib_write_bw messages between two QPs of its own. The three phases run in
# turn, three rounds (this host's numbers swing from run to run), and each
# phase's median counts (each column's own: a ratio of medians may mix
# rounds). Prints the bandwidths and their ratios.
# The guests share the host's cores with each other and with the backend
# (TCG): on a host with few cores the share a flood leaves also measures
# how they share the CPUs; the burn measures only that, so flood / burn is
# what the flood costs beyond it: its share of the device, and the backend
# thread it keeps busy on the same host cores. Under run.sh --own-cpus each
# guest and its device have CPUs of their own, as a cloud host places
# tenants: what the victim loses is then what the flood costs through the
# device. The peer answers each phase's start with its device's sent_bytes
# counter, so the flood's own rate is known too. The medians go to
# /mnt/run/NAME.csv, every round to /mnt/run/NAME-rounds.csv. It never
# fails on a number.
#   flood.sh main [NAME] | flood.sh peer
set -euo pipefail
source "$(dirname "$0")/../e2e/lib/common.sh"

ROLE=${1:-main} NAME=${2:-flood}
ROUNDS=3
driver_up
gid=$(v4_gid_index)
opts="-d virtio_rdma0 -x $gid -F"

if [ "$ROLE" = peer ]; then
	# The main guest sends each request on port 9998: a phase (idle, burn,
	# flood or done), or "mark", which changes nothing; every answer is
	# this device's sent_bytes and the time. The flood moves to a new port
	# each time (a killed server's port may still be taken).
	pids=()
	quiet() {
		[ ${#pids[@]} = 0 ] || kill "${pids[@]}" 2>/dev/null || true
		wait 2>/dev/null || true
		pids=()
	}
	fport=18900
	listening() { ss -Hltn "sport = :$1" | grep -q .; }
	while :; do
		phase=$(python3 - /sys/class/infiniband/virtio_rdma0/ports/1/hw_counters/sent_bytes <<-'PY'
			import socket, sys, time
			server = socket.create_server(("", 9998))
			server.settimeout(900)
			c, _ = server.accept()
			c.settimeout(30)
			f = c.makefile("rw")
			phase = f.readline().strip()
			with open(sys.argv[1]) as sent:
			    f.write(f"{sent.read().strip()} {time.monotonic()}\n")
			f.close()
			c.close()
			print(phase)
		PY
		) || fail "no request from the main guest"
		[ "$phase" = mark ] && continue
		quiet
		case $phase in
		burn)
			for _ in $(seq "$(nproc)"); do
				bash -c 'while :; do :; done' &
				pids+=($!)
			done
			;;
		flood)
			ib_write_bw $opts -s 4194304 -D 600 -p $fport >/tmp/fs.log 2>&1 &
			pids+=($!)
			wait_for "the flood's server" listening $fport
			ib_write_bw $opts -s 4194304 -D 600 -p $fport "$MY_IP" >/tmp/fc.log 2>&1 &
			pids+=($!)
			fport=$((fport + 1))
			;;
		idle) ;;
		done) break ;;
		*) fail "unknown request '$phase'" ;;
		esac
	done
	echo "PASS (peer)"
	exit 0
fi

# bw: 64 KiB ib_write_bw between two QPs of this guest for ten seconds (a
# fixed count would last a fraction of one); MiB/s in $BW. Not in a
# subshell: pair's failure must end the script with its reason, and the
# port it moves on must stay moved.
bw() {
	PAIR_QUIET=1 pair "ib_write_bw" ib_write_bw $opts -s 65536 -D 10 -p "$port" -- \
		ib_write_bw $opts -s 65536 -D 10 -p "$port" "$MY_IP"
	BW=$(awk '$1 == 65536 { print $4; exit }' /tmp/client.log)
	[ -n "$BW" ] || fail "no bandwidth in ib_write_bw's output: $(tail -3 /tmp/client.log)"
}
# ask REQ: sends REQ to the peer (a phase, or mark); its answer (bytes it
# sent so far, its clock) in $peer_at. Gives up after 300 s.
ask() {
	peer_at=$(python3 - "$1" <<-'PY'
		import socket, sys, time
		for _ in range(300):
		    try:
		        s = socket.create_connection(("10.0.2.16", 9998), timeout=30)
		        break
		    except OSError:
		        time.sleep(1)
		else:
		    sys.exit("the peer never listened on 9998")
		f = s.makefile("rw")
		f.write(sys.argv[1] + "\n")
		f.flush()
		print(f.readline().strip())
	PY
	) || fail "the peer did not answer '$1'"
	[ "$(wc -w <<<"$peer_at")" = 2 ] || fail "the peer answered '$1' with '$peer_at'"
}
# phase NAME: has the peer start phase NAME and gives it 5 s to get under
# way.
phase() {
	ask "$1"
	[ "$1" = done ] || sleep 5
}
# rate FROM TO: MiB/s between two of the peer's answers.
rate() { echo "$1 $2" | awk '{ t = $4 - $2; printf "%.0f", (t > 0 ? ($3 - $1) / t / 1048576 : 0) }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

wait_for "the peer answers on the link" ping -c 1 -W 1 10.0.2.16
alone=() burned=() flooded=() floods=()
echo "round,alone,burned,flooded,flood" >"/mnt/run/$NAME-rounds.csv"
phase idle
for round in $(seq $ROUNDS); do
	bw
	alone+=("$BW")
	phase burn
	bw
	burned+=("$BW")
	phase flood
	# The flood's own rate: from here, under way, to the next phase.
	ask mark
	start=$peer_at
	bw
	flooded+=("$BW")
	if [ "$round" = $ROUNDS ]; then phase done; else phase idle; fi
	floods+=("$(rate "$start" "$peer_at")")
	echo "$round,${alone[-1]},${burned[-1]},${flooded[-1]},${floods[-1]}" | tee -a "/mnt/run/$NAME-rounds.csv"
done
a=$(median "${alone[@]}") b=$(median "${burned[@]}") f=$(median "${flooded[@]}") r=$(median "${floods[@]}")
printf 'alone,burned,flooded,flood\n%s,%s,%s,%s\n' "$a" "$b" "$f" "$r" >"/mnt/run/$NAME.csv"
share() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "%.2f", b / a; else printf "-" }'; }
echo "$NAME (medians of $ROUNDS rounds, each column apart): victim 64 KiB ib_write_bw alone $a MiB/s;" \
	"beside a guest burning its vCPUs $b MiB/s (share $(share "$a" "$b")); beside a 4 MiB flood in" \
	"the other guest $f MiB/s (share $(share "$a" "$f"); flood/burn $(share "$b" "$f")); the flood" \
	"itself $r MiB/s"
