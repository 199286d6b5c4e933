"""Two guests as two tenants of one backend (used by tenants.sh, reboot.sh).

Each role runs in one guest with rdma-core's pyverbs on virtio_rdma0 and
talks to the other guest over TCP (JSON lines) to exchange what a verbs
application exchanges: QPN, PSN, GID, rkey and address.

usage: tenant.py victim PEER_IP GID_INDEX      (main: the victim and its
                                                real peer, both here)
       tenant.py attacker GID_INDEX            (peer: told everything by
                                                the victim, gets nothing in)
       tenant.py reboot-victim PEER_IP GID_INDEX FLAG
                                               (main, first boot: memory the
                                                peer may write; FLAG written
                                                once it did; then waits for
                                                the reboot)
       tenant.py reboot-check PEER_IP GID_INDEX (main, second boot)
       tenant.py reboot-peer GID_INDEX          (peer)
Exits non-zero on the first unmet expectation.
"""

import json
import random
import socket
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE

DEV = "virtio_rdma0"
PORT = 18700
SIZE = 4096
ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
          e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC)


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", flush=True)
        sys.exit(1)
    print(f"ok: {what}", flush=True)


def pattern(seed):
    return bytes((i * 31 + seed) & 0xff for i in range(SIZE))


class Verbs:
    """A context, PD, CQ and one remote-access MR of SIZE bytes (and a
    second, the inbox, for receives)."""

    def __init__(self, gid_index):
        self.ctx = Context(name=DEV)
        self.gid_index = gid_index
        self.gid = self.ctx.query_gid(1, gid_index).gid
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 64)
        self.mr = MR(self.pd, SIZE, ACCESS)
        self.inbox = MR(self.pd, SIZE, ACCESS)

    def qp(self):
        cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)
        return QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq, cap=cap))

    def connect(self, qp, gid, qpn, rq_psn, sq_psn):
        """INIT -> RTR -> RTS towards (gid, qpn)."""
        a = QPAttr(port_num=1)
        a.qp_access_flags = ACCESS
        gr = GlobalRoute(dgid=GID(gid), sgid_index=self.gid_index, hop_limit=64)
        a.ah_attr = AHAttr(port_num=1, is_global=1, gr=gr)
        a.dest_qp_num = qpn
        a.rq_psn = rq_psn
        a.sq_psn = sq_psn
        a.max_dest_rd_atomic = 1
        a.max_rd_atomic = 1
        a.min_rnr_timer = 12
        a.timeout = 14
        a.retry_cnt = 7
        a.rnr_retry = 7
        qp.to_rts(a)

    def post(self, qp, opcode, rkey=0, addr=0, length=64, compare_add=0, swap=0, imm=0):
        sge = SGE(self.inbox.buf, length, self.inbox.lkey)
        wr = SendWR(wr_id=opcode, opcode=opcode, num_sge=1, sg=[sge], imm_data=imm)
        if opcode in (e.IBV_WR_ATOMIC_CMP_AND_SWP, e.IBV_WR_ATOMIC_FETCH_AND_ADD):
            wr.set_wr_atomic(rkey, addr, compare_add, swap)
        elif opcode != e.IBV_WR_SEND:
            wr.set_wr_rdma(rkey, addr)
        qp.post_send(wr)

    def recv(self, qp, wr_id):
        qp.post_recv(RecvWR(wr_id=wr_id, num_sge=1, sg=[SGE(self.inbox.buf, SIZE, self.inbox.lkey)]))

    def poll(self, seconds=20):
        """The next completion, or None after `seconds`."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            n, wcs = self.cq.poll()
            if n:
                return wcs[0]
            time.sleep(0.005)
        return None

    def drain(self, seconds=1):
        """Completions arriving within `seconds`."""
        out = []
        while True:
            wc = self.poll(seconds)
            if wc is None:
                return out
            out.append(wc)


class Line:
    """JSON lines over one TCP connection."""

    def __init__(self, sock):
        self.sock = sock
        self.f = sock.makefile("rw")

    def send(self, **kw):
        self.f.write(json.dumps(kw) + "\n")
        self.f.flush()

    def recv(self):
        line = self.f.readline()
        check(line, "the other guest answered")
        return json.loads(line)


def dial(host, seconds=240):
    deadline = time.time() + seconds
    while True:
        try:
            return Line(socket.create_connection((host, PORT), timeout=300))
        except OSError:
            if time.time() > deadline:
                check(False, f"{host}:{PORT} listens")
            time.sleep(1)


def listen():
    srv = socket.create_server(("", PORT))
    srv.settimeout(600)
    return srv


def accept(srv):
    conn, _ = srv.accept()
    conn.settimeout(300)
    return Line(conn)


def psn():
    return random.randrange(1 << 24)


def victim(peer_ip, gid_index):
    v = Verbs(int(gid_index))
    v.mr.write(pattern(1), SIZE)
    qv, qr = v.qp(), v.qp()
    pv, pr = psn(), psn()
    # The victim's real peer is a QP of this guest, through its own GID.
    v.connect(qv, v.gid, qr.qp_num, rq_psn=pr, sq_psn=pv)
    v.connect(qr, v.gid, qv.qp_num, rq_psn=pv, sq_psn=pr)
    v.recv(qv, 500)
    line = dial(peer_ip)
    line.send(gid=v.gid, qpn=qv.qp_num, psn=pr, rkey=v.mr.rkey, addr=v.mr.buf,
              neighbours=sorted({qr.qp_num, qv.qp_num + 1, qv.qp_num + 2}),
              existing=[qv.qp_num, qr.qp_num])
    got = line.recv()
    check(got["refused"] == got["tried"] > 0,
          f"all {got['tried']} attacks failed at the attacker, "
          f"{got['at_qps']} of them at QPs of this guest")
    check(v.mr.read(SIZE, 0) == pattern(1), "the victim's MR is unchanged")
    attr, _ = qv.query(e.IBV_QP_STATE)
    check(attr.qp_state == e.IBV_QPS_RTS, "the victim's QP is still in RTS")
    check(not v.drain(1), "nothing completed on the victim (its receive is still posted)")
    # The attacker now tries to take this guest's address.
    line.send(collide=True)
    got = line.recv()
    check(got["gid_refused"], "the attacker's guest could not take this guest's GID")
    # The real peer, through this guest's GID (which still names this guest).
    v.inbox.write(pattern(7), SIZE)
    v.post(qr, e.IBV_WR_SEND, length=64)
    kinds = sorted((wc.opcode, wc.status) for wc in (v.poll(), v.poll()))
    check(kinds == [(e.IBV_WC_SEND, 0), (e.IBV_WC_RECV, 0)],
          f"the real peer's SEND is received ({kinds})")
    v.post(qr, e.IBV_WR_RDMA_WRITE, rkey=v.mr.rkey, addr=v.mr.buf, length=64)
    wc = v.poll()
    check(wc is not None and wc.status == 0, "the real peer's WRITE completes")
    check(v.mr.read(64, 0) == pattern(7)[:64], "the real peer's WRITE landed")
    line.send(done=True)


def attack_one(a, info, name, opcode, qpn, rkey, want_psn, tally):
    qp = a.qp()
    a.connect(qp, info["gid"], qpn, rq_psn=0, sq_psn=want_psn)
    a.post(qp, opcode, rkey=rkey, addr=info["addr"], length=8 if "ATOMIC" in name else 64,
           compare_add=1, swap=2, imm=5)
    wc = a.poll()
    status = None if wc is None else wc.status
    print(f"  {name} to QP {qpn} key {rkey:#x}: status {status}", flush=True)
    a.drain(0.2)
    qp.close()
    tally.append(qpn in info["existing"])
    return status is not None and status != e.IBV_WC_SUCCESS


def attacker(gid_index):
    a = Verbs(int(gid_index))
    srv = listen()
    line = accept(srv)
    info = line.recv()
    qpn, rkey, psn_ = info["qpn"], info["rkey"], info["psn"]
    ops = [("RDMA_WRITE", e.IBV_WR_RDMA_WRITE), ("RDMA_READ", e.IBV_WR_RDMA_READ),
           ("ATOMIC_CMP_AND_SWP", e.IBV_WR_ATOMIC_CMP_AND_SWP),
           ("ATOMIC_FETCH_AND_ADD", e.IBV_WR_ATOMIC_FETCH_AND_ADD),
           ("SEND", e.IBV_WR_SEND), ("RDMA_WRITE_WITH_IMM", e.IBV_WR_RDMA_WRITE_WITH_IMM)]
    tally = []
    results = [attack_one(a, info, n, op, qpn, rkey, psn_, tally) for n, op in ops]
    # Guessed neighbours: other key bytes and MR numbers, other QPNs.
    for guess in (rkey ^ 1, rkey ^ 0x80, rkey + 0x100):
        results.append(attack_one(a, info, "RDMA_WRITE (guessed key)", e.IBV_WR_RDMA_WRITE,
                                  qpn, guess, psn_, tally))
    for n in info["neighbours"]:
        results.append(attack_one(a, info, "RDMA_WRITE (neighbour QP)", e.IBV_WR_RDMA_WRITE,
                                  n, rkey, psn_, tally))
    line.send(tried=len(results), refused=sum(results), at_qps=sum(tally))
    check(all(results), "every attack failed")
    check(line.recv().get("collide"), "the victim asks for the GID collision")
    line.send(gid_refused=collide(info["gid"]))
    check(line.recv().get("done"), "the victim is done")


def collide(gid):
    """Gives eth0 the victim's IPv4 address for a moment: the device must
    not take the victim's GID. True if it did not."""
    import subprocess
    ip = ".".join(str(int(gid[i:i + 2], 16)) for i in (30, 32, 35, 37))
    subprocess.run(["ip", "addr", "add", f"{ip}/32", "dev", "eth0"], check=True)
    time.sleep(3)
    ctx = Context(name=DEV)
    gids = []
    for i in range(ctx.query_port(1).gid_tbl_len):
        try:
            gids.append(ctx.query_gid(1, i).gid)
        except Exception:  # an empty entry
            pass
    subprocess.run(["ip", "addr", "del", f"{ip}/32", "dev", "eth0"], check=True)
    print(f"  with {ip} on eth0, GIDs: {[g for g in gids if g.strip('0:')]}", flush=True)
    return gid not in gids


def reboot_victim(peer_ip, gid_index, flag):
    v = Verbs(int(gid_index))
    v.mr.write(pattern(1), SIZE)
    qp = v.qp()
    line = dial(peer_ip)
    mine = psn()
    line.send(gid=v.gid, qpn=qp.qp_num, psn=mine, rkey=v.mr.rkey, addr=v.mr.buf)
    peer = line.recv()
    v.connect(qp, peer["gid"], peer["qpn"], rq_psn=peer["psn"], sq_psn=mine)
    line.send(ready=True)
    check(line.recv().get("written"), "the peer wrote")
    check(v.mr.read(SIZE, 0) == pattern(2), "the peer's WRITE landed before the reboot")
    with open(flag, "w") as f:
        f.write(f"{v.mr.rkey:#x}\n")
    # Hold everything until the reboot takes it away.
    time.sleep(3600)


def reboot_check(peer_ip, gid_index):
    line = dial(peer_ip)
    line.send(rebooted=True)
    got = line.recv()
    check(got["old_key_refused"], f"the old QP and key are dead (status {got['status']})")
    # New objects work with the peer again.
    reboot_victim_again(line, int(gid_index))


def reboot_victim_again(line, gid_index):
    v = Verbs(gid_index)
    v.mr.write(pattern(1), SIZE)
    qp = v.qp()
    mine = psn()
    line.send(gid=v.gid, qpn=qp.qp_num, psn=mine, rkey=v.mr.rkey, addr=v.mr.buf)
    peer = line.recv()
    v.connect(qp, peer["gid"], peer["qpn"], rq_psn=peer["psn"], sq_psn=mine)
    line.send(ready=True)
    check(line.recv().get("written"), "the peer wrote")
    check(v.mr.read(SIZE, 0) == pattern(2), "the peer's WRITE landed after the reboot")


def peer_write(p, line):
    """One exchange with the victim; the peer writes pattern 2 into its MR.
    Returns the QP and what the victim said."""
    info = line.recv()
    qp = p.qp()
    mine = psn()
    line.send(gid=p.gid, qpn=qp.qp_num, psn=mine)
    p.connect(qp, info["gid"], info["qpn"], rq_psn=info["psn"], sq_psn=mine)
    check(line.recv().get("ready"), "the victim is ready")
    p.inbox.write(pattern(2), SIZE)
    p.post(qp, e.IBV_WR_RDMA_WRITE, rkey=info["rkey"], addr=info["addr"], length=SIZE)
    wc = p.poll()
    check(wc is not None and wc.status == 0, "the WRITE into the victim's MR completes")
    line.send(written=True)
    return qp, info


def reboot_peer(gid_index):
    p = Verbs(int(gid_index))
    srv = listen()
    qp, info = peer_write(p, accept(srv))
    line = accept(srv)
    check(line.recv().get("rebooted"), "the victim rebooted")
    # The old QP, key and address, as an attacker that kept them would use.
    p.inbox.write(pattern(3), SIZE)
    p.post(qp, e.IBV_WR_RDMA_WRITE, rkey=info["rkey"], addr=info["addr"], length=SIZE)
    wc = p.poll()
    status = None if wc is None else wc.status
    line.send(old_key_refused=status is not None and status != 0, status=status)
    check(status is not None and status != 0, f"the old key is refused (status {status})")
    peer_write(p, line)


def main():
    role, args = sys.argv[1], sys.argv[2:]
    {"victim": victim, "attacker": attacker, "reboot-victim": reboot_victim,
     "reboot-check": reboot_check, "reboot-peer": reboot_peer}[role](*args)


if __name__ == "__main__":
    main()
