#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# One guest's part of capture.sh: "main" (10.0.2.15) records frames and
# runs the clients, "peer" (10.0.2.16) runs the servers.
set -euo pipefail
source "$(dirname "$0")/../e2e/lib/common.sh"
ROLE=$1
PEER=10.0.2.16 PEER6=fd02::16
dev=rxe0
modprobe rdma_rxe
rdma link add $dev type rxe netdev eth0
ip -6 addr add "fd02::${MY_IP##*.}/64" dev eth0 nodad
gid_of() {
	local g
	for g in /sys/class/infiniband/$dev/ports/1/gids/*; do
		if [ "$(cat "$g")" = "$1" ] &&
			[ "$(cat "${g/gids/gid_attrs/types}" 2>/dev/null)" = "RoCE v2" ]; then
			basename "$g"
			return 0
		fi
	done
	return 1
}
wait_for "the IPv4 GID" gid_of "$(v4_gid_of "$MY_IP")"
wait_for "the IPv6 GID" gid_of "fd02:0000:0000:0000:0000:0000:0000:00${MY_IP##*.}"
g4=$(gid_of "$(v4_gid_of "$MY_IP")")
g6=$(gid_of "fd02:0000:0000:0000:0000:0000:0000:00${MY_IP##*.}")

# Each step: NAME PORT SERVER-ARGS... -- CLIENT-ARGS... (the client gets
# the server's address last).
steps=(
	"rc4 18515 ibv_rc_pingpong -d $dev -g $g4 -m 1024 -s 2501 -n 2 -p 18515"
	"rc6 18516 ibv_rc_pingpong -d $dev -g $g6 -m 1024 -s 5 -n 2 -p 18516"
	"ud4 18517 ibv_ud_pingpong -d $dev -g $g4 -s 5 -n 2 -p 18517"
	"write 18518 ib_write_bw -d $dev -x $g4 -F -n 5 -s 3000 -m 1024 -p 18518"
	"read 18519 ib_read_bw -d $dev -x $g4 -F -n 5 -s 3000 -m 1024 -p 18519"
	"atomic 18520 ib_atomic_bw -d $dev -x $g4 -F -n 5 -p 18520"
	"imm 18521 ib_write_bw -d $dev -x $g4 -F -n 5 -s 64 --write_with_imm -p 18521"
)

if [ "$ROLE" = peer ]; then
	for s in "${steps[@]}"; do
		read -r name port cmd <<<"$s"
		echo "== server $name"
		timeout 120 $cmd || echo "server $name: exit $?"
	done
	rping -s -a "$MY_IP" -C 2 -v || echo "rping server: exit $?"
	exit 0
fi

wait_for "the peer answers on the link" ping -c 1 -W 1 "$PEER"
ping -6 -c 1 -W 2 "$PEER6" >/dev/null || true
# Record: every frame to or from UDP 4791 on eth0, with the step it
# belongs to (the step's name is in /tmp/step when it is seen).
python3 - <<'PY' &
import socket, struct, os, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind(("eth0", 0))
s.settimeout(1.0)
out = open("/mnt/run/frames.txt", "w")
out.write("kernel: " + os.uname().release + "\n")
seen = {}
while not os.path.exists("/tmp/stop"):
    try:
        f = s.recv(65535)
    except socket.timeout:
        continue
    et = struct.unpack("!H", f[12:14])[0]
    if et == 0x0800:
        if f[23] != 17:
            continue
        ip_len = (f[14] & 15) * 4
    elif et == 0x86DD:
        if f[20] != 17:
            continue
        ip_len = 40
    else:
        continue
    udp = 14 + ip_len
    if struct.unpack("!H", f[udp + 2:udp + 4])[0] != 4791:
        continue
    step = open("/tmp/step").read().strip() if os.path.exists("/tmp/step") else "?"
    opcode = f[udp + 8]
    # A few of each kind are enough.
    key = (step, opcode)
    seen[key] = seen.get(key, 0) + 1
    if seen[key] > 3:
        continue
    out.write("%s opcode=0x%02x %s\n" % (step, opcode, f.hex()))
    out.flush()
PY
sniffer=$!
sleep 2
for s in "${steps[@]}"; do
	read -r name port cmd <<<"$s"
	echo "$name" >/tmp/step
	echo "== client $name"
	ok=0
	for _ in $(seq 60); do
		# The exchange over IPv4 TCP; the GID index picks the RDMA family.
		if timeout 120 $cmd "$PEER"; then ok=1; break; fi
		sleep 1
	done
	[ $ok = 1 ] || echo "client $name: FAILED (its frames are missing)"
done
echo rping >/tmp/step
for _ in $(seq 30); do rping -c -a "$PEER" -C 2 -v && break; sleep 1; done
sleep 1
touch /tmp/stop
wait $sniffer
echo "frames: $(grep -vc '^kernel' /mnt/run/frames.txt)"
