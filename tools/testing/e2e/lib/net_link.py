#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The Ethernet half of the net personality, between two guests.

peer: listens on TCP port 5201 and on eth0 for raw frames of ethertype
0x88b5 (IEEE local experimental), and answers the main guest's requests:
"sha N" (N bytes follow; answers their SHA-256), "frames" (answers the
payloads and source MACs of the raw frames it has seen), "bye".

main: connects (retrying while nobody listens), sends random bytes and
checks the peer's digest of them (TCP through the device's transmit and
receive queues and the backend's switch), then broadcasts raw frames
with its own source MAC and with the peer's (a guest impersonating
another), and checks that the peer saw the first and none of the second.
"""
import hashlib
import json
import os
import socket
import sys
import time

ETH_P = 0x88B5
PORT = 5201


def mac_of(ifname):
    with open(f"/sys/class/net/{ifname}/address") as f:
        return bytes.fromhex(f.read().strip().replace(":", ""))


def recv_exact(conn, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = conn.recv(min(1 << 20, n - len(buf)))
        if not chunk:
            raise EOFError("connection closed")
        buf += chunk
    return bytes(buf)


def recv_line(conn):
    line = bytearray()
    while not line.endswith(b"\n"):
        c = conn.recv(1)
        if not c:
            raise EOFError("connection closed")
        line += c
    return line.decode().strip()


def peer():
    raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P))
    raw.bind(("eth0", ETH_P))
    raw.setblocking(False)
    seen = []
    srv = socket.create_server(("", PORT))
    srv.settimeout(300)
    conn, addr = srv.accept()
    print(f"peer: connection from {addr[0]}")
    while True:
        req = recv_line(conn)
        if req.startswith("sha "):
            n = int(req.split()[1])
            digest = hashlib.sha256(recv_exact(conn, n)).hexdigest()
            conn.sendall(digest.encode() + b"\n")
        elif req == "frames":
            deadline = time.time() + 2
            while time.time() < deadline:
                try:
                    frame = raw.recv(2048)
                except BlockingIOError:
                    time.sleep(0.05)
                    continue
                seen.append({"src": frame[6:12].hex(), "payload": frame[14:30].rstrip(b"\0").decode(errors="replace")})
            conn.sendall(json.dumps(seen).encode() + b"\n")
        elif req == "bye":
            print(f"peer: {len(seen)} raw frames seen")
            return 0
        else:
            print(f"peer: unknown request {req!r}")
            return 1


def main(peer_ip, peer_mac):
    deadline = time.time() + 240
    while True:
        try:
            conn = socket.create_connection((peer_ip, PORT), timeout=60)
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.5)
    data = os.urandom(8 << 20)
    t = time.time()
    conn.sendall(f"sha {len(data)}\n".encode() + data)
    got = recv_line(conn)
    dt = time.time() - t
    want = hashlib.sha256(data).hexdigest()
    if got != want:
        print(f"FAIL: the peer's digest of 8 MiB is {got}, want {want}")
        return 1
    print(f"main: 8 MiB over TCP, digest matches ({len(data) / dt / 1e6:.1f} MB/s)")

    own = mac_of("eth0")
    spoofed = bytes.fromhex(peer_mac.replace(":", ""))
    raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    raw.bind(("eth0", 0))
    bcast = b"\xff" * 6
    for i in range(3):
        for src, word in ((own, b"genuine"), (spoofed, b"spoofed")):
            payload = word + b"-%d" % i
            raw.send(bcast + src + ETH_P.to_bytes(2, "big") + payload.ljust(46, b"\0"))
    conn.sendall(b"frames\n")
    seen = json.loads(recv_line(conn))
    conn.sendall(b"bye\n")
    genuine = [f for f in seen if f["payload"].startswith("genuine")]
    spoof = [f for f in seen if f["payload"].startswith("spoofed")]
    print(f"main: the peer saw {len(genuine)} genuine and {len(spoof)} spoofed frames")
    if len(genuine) != 3 or any(f["src"] != own.hex() for f in genuine):
        print(f"FAIL: the peer did not get the 3 genuine broadcasts: {seen}")
        return 1
    if spoof:
        print(f"FAIL: frames with the peer's own MAC as source reached it: {spoof}")
        return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "peer":
        sys.exit(peer())
    sys.exit(main(sys.argv[2], sys.argv[3]))
