# SPDX-License-Identifier: GPL-2.0
"""The RC operations no stock tool posts across hosts (wire.sh): RDMA WRITE
with immediate data (three packets at a 1024-byte MTU), COMPARE AND SWAP,
and IBA 1.5's ATOMIC WRITE and FLUSH, from a client to a server on another
host, each side on its own RDMA device (virtio_rdma0 or rxe0).

  wire_ops.py serve DEV GID_INDEX PORT [--hostile]
  wire_ops.py client DEV GID_INDEX SERVER PORT [--hostile]

The two exchange QP number, PSN, GID, address and rkey over TCP; the
client posts the four through ibv_wr_* and checks its completions and the
swap's original value; the server checks its receive (the immediate data
and the WRITE's length) and every byte that landed in its memory, and
tells the client. Exit 0 on both sides means all of it held.

With --hostile the client is also a hostile sender on the link: before its
requests it writes raw frames at the server's QP through a packet socket
(a WRITE and 200 16-MiB READs from a forged source address, a WRITE with a
wrong ICRC, one cut short, one to a QP that does not exist, one to
another address, one with an opcode no transport has), aimed at bytes of
the server's MR that nothing else writes. The server then checks that
those bytes are untouched, that its device counted the forged requests as
not from its QP's peer (dropped_not_peer), and the requests after them
work as ever. Last, the client guesses keys over a UC connection: RDMA
WRITEs with wrong rkeys, which UC drops without a NAK; a virtio_rdma
server's UC QP stays in RTS for 15 and moves to error on the 16th (the
device's bound on a connection's refused keys)."""

import json
import random
import socket
import struct
import sys
import time
import zlib

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPEx, QPInitAttr, QPInitAttrEx
from pyverbs.wr import RecvWR, SendWR, SGE

IMM = 0x1234ABCD
SWAP = 0x1122334455667788
ATOMIC_WRITE = b"ATOMICWR"
WRITE_AT, WRITE_LEN = 64, 3000  # three packets at a 1024-byte MTU
ORIG_AT = 3072  # the client's: where the swap's original value lands
HOSTILE_AT, HOSTILE_LEN = 3200, 256  # the server's: what only attackers aim at
FORGED_READS = 200
KEY_GUESSES = 16  # the device's MAX_BAD_KEYS (engine/responder.rs)
ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
          | e.IBV_ACCESS_REMOTE_ATOMIC | e.IBV_ACCESS_FLUSH_GLOBAL)
OPS = (e.IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | e.IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
       | e.IBV_QP_EX_WITH_ATOMIC_WRITE | e.IBV_QP_EX_WITH_FLUSH)


def pattern(n):
    return bytes((i * 7 + 3) & 0xFF for i in range(n))


def poll(cq, n, what):
    """`n` completions of `cq`, all successful, within 30 s."""
    got, deadline = [], time.monotonic() + 30
    while len(got) < n:
        if time.monotonic() > deadline:
            sys.exit(f"{what}: {len(got)} of {n} completions in 30 s")
        _, wcs = cq.poll()
        got += wcs
    for wc in got:
        if wc.status != e.IBV_WC_SUCCESS:
            sys.exit(f"{what}: wr_id {wc.wr_id} ended with status {wc.status}")
    return got


def roce_frame(src_mac, dst_mac, src_ip, dst_ip, packet):
    """An Ethernet frame of RoCEv2 `packet` (BTH onwards, padded to 4
    bytes) with its ICRC, as IBA Annex A17 computes it."""
    udp_len = 8 + len(packet) + 4
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, 0, 0x4000, 64, 17, 0,
                               socket.inet_aton(src_ip), socket.inet_aton(dst_ip)))
    csum = sum(struct.unpack("!10H", bytes(ip)))
    while csum > 0xFFFF:
        csum = (csum & 0xFFFF) + (csum >> 16)
    ip[10:12] = struct.pack("!H", ~csum & 0xFFFF)
    udp = struct.pack("!HHHH", 0xC000, 4791, udp_len, 0)
    masked = bytearray(bytes(ip) + udp + packet[:12])
    masked[1] = masked[8] = 0xFF  # TOS, TTL
    masked[10:12] = b"\xff\xff"  # IP checksum
    masked[26:28] = b"\xff\xff"  # UDP checksum
    masked[28 + 4] = 0xFF  # BTH reserved byte
    icrc = zlib.crc32(b"\xff" * 8 + bytes(masked) + packet[12:])
    eth = dst_mac + src_mac + b"\x08\x00"
    return eth + bytes(ip) + udp + packet + icrc.to_bytes(4, "little")


def rc_request(opcode, qpn, psn, va, rkey, length, payload=b""):
    """An RC request with a RETH: BTH (AckReq set), RETH, payload."""
    bth = struct.pack("!BBHI", opcode, 0, 0xFFFF, qpn & 0xFFFFFF) + struct.pack("!I", 0x80000000 | psn)
    return bth + struct.pack("!QII", va, rkey, length) + payload


def wrong_icrc(frame):
    return frame[:-1] + bytes([frame[-1] ^ 1])


def hostile(sock, peer, psn):
    """Raw frames at the server's QP from this host's NIC; none of them
    may reach the server's memory."""
    srv_ip, my_ip = sock.getpeername()[0], sock.getsockname()[0]
    my_mac = bytes.fromhex(open("/sys/class/net/eth0/address").read().strip().replace(":", ""))
    srv_mac = None
    for line in open("/proc/net/arp").read().splitlines()[1:]:
        f = line.split()
        if f[0] == srv_ip:
            srv_mac = bytes.fromhex(f[3].replace(":", ""))
    if srv_mac is None:
        sys.exit(f"no ARP entry for {srv_ip}")
    va, rkey, qpn = peer["va"] + HOSTILE_AT, peer["rkey"], peer["qpn"]
    write = rc_request(0x0A, qpn, psn, va, rkey, 64, b"\xee" * 64)  # RDMA WRITE ONLY
    frames = [
        roce_frame(my_mac, srv_mac, "10.0.2.99", srv_ip, write),  # forged source
        wrong_icrc(roce_frame(my_mac, srv_mac, my_ip, srv_ip, write)),
        roce_frame(my_mac, srv_mac, my_ip, srv_ip, write)[:60],  # cut short
        roce_frame(my_mac, srv_mac, my_ip, srv_ip,
                   rc_request(0x0A, qpn + 1000, psn, va, rkey, 64, b"\xee" * 64)),  # no such QP
        roce_frame(my_mac, srv_mac, my_ip, "10.0.2.77", write),  # not the server's address
        roce_frame(my_mac, srv_mac, my_ip, srv_ip, bytes([0xFF]) + write[1:]),  # no such opcode
    ]
    # A READ flood from the forged source: 16 MiB each, none answered.
    frames += [roce_frame(my_mac, srv_mac, "10.0.2.99", srv_ip,
                          rc_request(0x0C, qpn, (psn + i) & 0xFFFFFF, va, rkey, 16 << 20))
               for i in range(FORGED_READS)]
    raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    raw.bind(("eth0", 0))
    for f in frames:
        raw.send(f)
    time.sleep(1)
    print(f"client: {len(frames)} hostile frames sent")


def not_peer(dev):
    try:
        return int(open(f"/sys/class/infiniband/{dev}/ports/1/hw_counters/dropped_not_peer").read())
    except OSError:
        return None


def connect(qp, gid_index, peer):
    attr = QPAttr(port_num=1)
    attr.qp_access_flags = ACCESS
    gr = GlobalRoute(dgid=GID(peer["gid"]), sgid_index=gid_index, hop_limit=64)
    attr.ah_attr = AHAttr(port_num=1, is_global=1, gr=gr)
    attr.path_mtu = e.IBV_MTU_1024
    attr.dest_qp_num = peer["qpn"]
    attr.rq_psn = peer["psn"]
    attr.sq_psn = peer["my_psn"]
    attr.max_dest_rd_atomic = attr.max_rd_atomic = 4
    attr.min_rnr_timer, attr.timeout, attr.retry_cnt, attr.rnr_retry = 12, 14, 7, 7
    qp.to_rts(attr)


def uc_qp(ctx, pd):
    """A UC QP with a CQ of its own, and its first PSN."""
    cq = CQ(ctx, 32)
    cap = QPCap(max_send_wr=32, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
    return QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UC, scq=cq, rcq=cq, cap=cap)), cq, random.getrandbits(24)


def uc_connect(qp, gid_index, peer, psn):
    attr = QPAttr(port_num=1)
    attr.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
    gr = GlobalRoute(dgid=GID(peer["gid"]), sgid_index=gid_index, hop_limit=64)
    attr.ah_attr = AHAttr(port_num=1, is_global=1, gr=gr)
    attr.path_mtu = e.IBV_MTU_1024
    attr.dest_qp_num, attr.rq_psn, attr.sq_psn = peer["uc_qpn"], peer["uc_psn"], psn
    qp.to_rts(attr)


def guess_keys(qp, cq, mr, peer, f, n, first):
    """`n` UC WRITEs at the server's untouched bytes with wrong keys, then
    tells the server; its verdict."""
    for i in range(first, first + n):
        wr = SendWR(wr_id=i, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                    sg=[SGE(mr.buf, 64, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(peer["rkey"] ^ i, peer["va"] + HOSTILE_AT)
        qp.post_send(wr)
    poll(cq, n, "the client's UC WRITEs")  # UC: sent is done
    f.write(f"guessed {first + n - 1}\n")
    f.flush()
    return f.readline().strip()


def uc_state(qp):
    return qp.query(e.IBV_QP_STATE)[0].qp_state


def uc_guessed(f, uc, mr, dev):
    """The server's side of guess_keys: its UC QP stays in RTS until the
    client's last guess (virtio_rdma; rxe never moves it), and nothing is
    written."""
    for want in (KEY_GUESSES - 1, KEY_GUESSES):
        if f.readline().strip() != f"guessed {want}":
            sys.exit("the client did not guess")
        # The UC WRITEs were sent when their completions came; wait for
        # the state they should leave (RTS stays: a short wait).
        expect = e.IBV_QPS_ERR if want == KEY_GUESSES and dev.startswith("virtio") else e.IBV_QPS_RTS
        deadline = time.monotonic() + (10 if expect == e.IBV_QPS_ERR else 1)
        while uc_state(uc) != expect and time.monotonic() < deadline:
            time.sleep(0.1)
        bad = []
        if uc_state(uc) != expect:
            bad.append(f"after {want} wrong keys the UC QP is in state {uc_state(uc)}, not {expect}")
        if mr.read(HOSTILE_LEN, HOSTILE_AT) != bytes(HOSTILE_LEN):
            bad.append("a WRITE with a wrong key wrote")
        f.write(("ok" if not bad else "; ".join(bad)) + "\n")
        f.flush()
        if bad:
            sys.exit("server: " + "; ".join(bad))
    print(f"server: UC QP in RTS after {KEY_GUESSES - 1} wrong keys, in error after {KEY_GUESSES}")


def main():
    hostile_mode = "--hostile" in sys.argv
    if hostile_mode:
        sys.argv.remove("--hostile")
    role, dev, gid_index = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ctx = Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 16)
    mr = MR(pd, 4096, ACCESS)
    mr.write(bytes(4096), 4096)
    cap = QPCap(max_send_wr=8, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    qia = QPInitAttrEx(cap=cap, qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, pd=pd, send_ops_flags=OPS,
                       comp_mask=e.IBV_QP_INIT_ATTR_PD | e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
    qp = QPEx(ctx, qia)
    psn = random.getrandbits(24)
    me = {"qpn": qp.qp_num, "psn": psn, "gid": str(ctx.query_gid(1, gid_index)),
          "va": mr.buf, "rkey": mr.rkey}
    if hostile_mode:
        uc, ucq, uc_psn = uc_qp(ctx, pd)
        me.update(uc_qpn=uc.qp_num, uc_psn=uc_psn)
    if role == "serve":
        srv = socket.create_server(("", int(sys.argv[4])))
        sock = srv.accept()[0]
    else:
        try:
            sock = socket.create_connection((sys.argv[4], int(sys.argv[5])))
        except ConnectionRefusedError:
            # What on_main in common.sh retries on.
            sys.exit(f"Couldn't connect to {sys.argv[4]}:{sys.argv[5]}")
    f = sock.makefile("rw")
    f.write(json.dumps(me) + "\n")
    f.flush()
    peer = json.loads(f.readline())
    peer["my_psn"] = psn
    connect(qp, gid_index, peer)
    if hostile_mode:
        uc_connect(uc, gid_index, peer, uc_psn)

    if role == "serve":
        # The WRITE with immediate data takes this receive.
        qp.post_recv(RecvWR(wr_id=7, num_sge=1, sg=[SGE(mr.buf + 3584, 16, mr.lkey)]))
        dropped = not_peer(dev)
        f.write("ready\n")
        f.flush()
        if f.readline().strip() != "done":
            sys.exit("the client did not finish")
        wc = poll(cq, 1, "the server's receive")[0]
        bad = []
        if wc.opcode != e.IBV_WC_RECV_RDMA_WITH_IMM:
            bad.append(f"receive opcode {wc.opcode}")
        if socket.ntohl(wc.imm_data) != IMM or wc.byte_len != WRITE_LEN:
            bad.append(f"immediate {socket.ntohl(wc.imm_data):#x}, length {wc.byte_len}")
        if mr.read(WRITE_LEN, WRITE_AT) != pattern(WRITE_LEN):
            bad.append("the WRITE's bytes")
        if int.from_bytes(mr.read(8, 0), "little") != SWAP:
            bad.append(f"the swapped cell: {mr.read(8, 0).hex()}")
        if mr.read(8, 8) != ATOMIC_WRITE:
            bad.append(f"the ATOMIC WRITE's cell: {mr.read(8, 8)!r}")
        if mr.read(HOSTILE_LEN, HOSTILE_AT) != bytes(HOSTILE_LEN):
            bad.append("bytes no request of the client's aims at were written")
        if hostile_mode:
            forged = not_peer(dev) - dropped
            print(f"server: {forged} requests dropped as not from the QP's peer")
            if forged < 1 + FORGED_READS:
                bad.append(f"dropped_not_peer grew by {forged}, not {1 + FORGED_READS}")
        f.write(("ok" if not bad else "; ".join(bad)) + "\n")
        f.flush()
        if bad:
            sys.exit("server: " + "; ".join(bad))
        print("server: receive with immediate data, WRITE, swap and ATOMIC WRITE as sent")
        if hostile_mode:
            uc_guessed(f, uc, mr, dev)
        return

    if f.readline().strip() != "ready":
        sys.exit("the server is not ready")
    if hostile_mode:
        hostile(sock, peer, psn)
    mr.write(pattern(WRITE_LEN), WRITE_LEN)
    va, rkey = peer["va"], peer["rkey"]
    qp.wr_start()
    qp.wr_flags = e.IBV_SEND_SIGNALED
    qp.wr_id = 1
    qp.wr_rdma_write_imm(rkey, va + WRITE_AT, IMM)  # as rdma-core's tests pass it
    qp.wr_set_sge(SGE(mr.buf, WRITE_LEN, mr.lkey))
    qp.wr_id = 2
    qp.wr_atomic_cmp_swp(rkey, va, 0, SWAP)
    qp.wr_set_sge(SGE(mr.buf + ORIG_AT, 8, mr.lkey))
    qp.wr_id = 3
    qp.wr_atomic_write(rkey, va + 8, ATOMIC_WRITE)
    qp.wr_id = 4
    qp.wr_flush(rkey, va + WRITE_AT, WRITE_LEN, e.IBV_FLUSH_GLOBAL, e.IBV_FLUSH_RANGE)
    qp.wr_complete()
    wcs = poll(cq, 4, "the client's four requests")
    if [wc.wr_id for wc in wcs] != [1, 2, 3, 4]:
        sys.exit(f"completions out of order: {[wc.wr_id for wc in wcs]}")
    orig = int.from_bytes(mr.read(8, ORIG_AT), "little")
    if orig != 0:
        sys.exit(f"the swap's original value: {orig:#x}, not 0")
    f.write("done\n")
    f.flush()
    verdict = f.readline().strip()
    if verdict != "ok":
        sys.exit(f"server says: {verdict}")
    print("client: WRITE with immediate, COMPARE AND SWAP, ATOMIC WRITE, FLUSH completed")
    if hostile_mode:
        for n, first in ((KEY_GUESSES - 1, 1), (1, KEY_GUESSES)):
            verdict = guess_keys(uc, ucq, mr, peer, f, n, first)
            if verdict != "ok":
                sys.exit(f"server says: {verdict}")
        print(f"client: {KEY_GUESSES} UC WRITEs with wrong keys sent")


if __name__ == "__main__":
    main()
