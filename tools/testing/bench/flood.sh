#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Fairness between two guests on one backend (run.sh --peer): this guest
# (main) measures ib_write_bw with 64 KiB messages between two QPs of its
# own virtio_rdma0, ten seconds at a time: alone (the peer idle); while the
# peer only burns its vCPUs (a busy loop each, as a flood's perftest client
# spins); and while the peer floods its own virtio_rdma0 with 4 MiB
# ib_write_bw messages between two QPs of its own. The three phases run in
# turn, three rounds (this host's numbers swing from run to run), and each
# phase's median counts. Prints the bandwidths and their ratios.
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
	# The main guest names each phase on port 9998: idle, burn, flood or
	# done; the answer is this device's sent_bytes and the time. The flood
	# moves to a new port each time (a killed server's port may still be
	# taken).
	pids=()
	quiet() {
		[ ${#pids[@]} = 0 ] || kill "${pids[@]}" 2>/dev/null || true
		wait 2>/dev/null || true
		pids=()
	}
	fport=18900
	while :; do
		phase=$(python3 - /sys/class/infiniband/virtio_rdma0/ports/1/hw_counters/sent_bytes <<-'PY'
			import socket, sys, time
			c, _ = socket.create_server(("", 9998)).accept()
			f = c.makefile("rw")
			phase = f.readline().strip()
			with open(sys.argv[1]) as sent:
			    f.write(f"{sent.read().strip()} {time.monotonic()}\n")
			f.close()
			c.close()
			print(phase)
		PY
		)
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
			sleep 1
			ib_write_bw $opts -s 4194304 -D 600 -p $fport "$MY_IP" >/tmp/fc.log 2>&1 &
			pids+=($!)
			fport=$((fport + 1))
			;;
		done) break ;;
		esac
	done
	echo "PASS (peer)"
	exit 0
fi

# bw: 64 KiB ib_write_bw between two QPs of this guest for ten seconds (a
# fixed count would last a fraction of one); prints MiB/s.
bw() {
	PAIR_QUIET=1 pair "ib_write_bw" ib_write_bw $opts -s 65536 -D 10 -p "$port" -- \
		ib_write_bw $opts -s 65536 -D 10 -p "$port" "$MY_IP"
	awk '$1 == 65536 { print $4; exit }' /tmp/client.log
}
# phase NAME: has the peer start phase NAME and gives it 5 s to get under
# way; the peer's answer (its bytes sent so far, its clock) in $peer_at.
phase() {
	peer_at=$(python3 - "$1" <<-'PY'
		import socket, sys, time
		while True:
		    try:
		        s = socket.create_connection(("10.0.2.16", 9998))
		        break
		    except OSError:
		        time.sleep(1)
		f = s.makefile("rw")
		f.write(sys.argv[1] + "\n")
		f.flush()
		print(f.readline().strip())
	PY
	)
	[ "$1" = done ] || sleep 5
}
# rate FROM TO: MiB/s between two of the peer's answers.
rate() { echo "$1 $2" | awk '{ printf "%.0f", ($3 - $1) / ($4 - $2) / 1048576 }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

wait_for "the peer answers on the link" ping -c 1 -W 1 10.0.2.16
alone=() burned=() flooded=() floods=()
echo "round,alone,burned,flooded,flood" >"/mnt/run/$NAME-rounds.csv"
phase idle
for round in $(seq $ROUNDS); do
	alone+=("$(bw)")
	phase burn
	burned+=("$(bw)")
	phase flood
	start=$peer_at
	flooded+=("$(bw)")
	# The flood's own rate, from its start to the next phase's.
	if [ "$round" = $ROUNDS ]; then phase done; else phase idle; fi
	floods+=("$(rate "$start" "$peer_at")")
	echo "$round,${alone[-1]},${burned[-1]},${flooded[-1]},${floods[-1]}" | tee -a "/mnt/run/$NAME-rounds.csv"
done
a=$(median "${alone[@]}") b=$(median "${burned[@]}") f=$(median "${flooded[@]}") r=$(median "${floods[@]}")
printf 'alone,burned,flooded,flood\n%s,%s,%s,%s\n' "$a" "$b" "$f" "$r" >"/mnt/run/$NAME.csv"
share() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b / a }'; }
echo "$NAME (medians of $ROUNDS rounds): victim 64 KiB ib_write_bw alone $a MiB/s; beside a guest" \
	"burning its vCPUs $b MiB/s (share $(share "$a" "$b")); beside a 4 MiB flood in the other guest" \
	"$f MiB/s (share $(share "$a" "$f"); flood/burn $(share "$b" "$f")); the flood itself $r MiB/s"
