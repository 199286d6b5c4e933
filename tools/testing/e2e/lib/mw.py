# SPDX-License-Identifier: GPL-2.0
"""Memory windows on virtio_rdma0 (mw.sh): type 1 bound by ibv_bind_mw and
type 2 by a BIND_MW work request, each reached by RDMA from the peer QP
within its binding only; a type 2 window dies by LOCAL_INV and with the QP
it is bound to; an MR with a window bound to it cannot be deregistered.

usage: mw.py GID-INDEX
"""

import errno
import sys
import time

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR, MW, MWBind, MWBindInfo
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR

import rc

DEV = "virtio_rdma0"
PAGE = 4096
LW = e.IBV_ACCESS_LOCAL_WRITE
REMOTE = e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
IBV_DEVICE_MEM_WINDOW = 1 << 17
IBV_DEVICE_MEM_WINDOW_TYPE_2B = 1 << 24


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", flush=True)
        sys.exit(1)
    print(f"ok: {what}", flush=True)


def pattern(seed, n):
    return bytes((i * 31 + seed) & 0xFF for i in range(n))


def next_rkey(rkey):
    """The rkey a bind gives a window (ibv_inc_rkey: next key byte)."""
    return (rkey & ~0xFF) | ((rkey + 1) & 0xFF)


class Pair:
    """Two connected RC QPs of `pd` with one CQ; `a` writes from its source
    MR, `b` is the responder (and binds the windows a reaches)."""

    def __init__(self, ctx, gid_index, pd):
        self.cq = CQ(ctx, 16)
        self.src = MR(pd, PAGE, LW)
        cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
        init = QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq, cap=cap)
        self.a, self.b = QP(pd, init), QP(pd, init)
        rc.connect_pair(ctx, gid_index, self.a, self.b, LW | REMOTE)

    def wc(self):
        """The next completion (status, opcode)."""
        deadline = time.time() + 20
        while time.time() < deadline:
            n, wcs = self.cq.poll()
            if n:
                return wcs[0].status, wcs[0].opcode
            time.sleep(0.005)
        check(False, "a completion within 20 s")
        return None

    def write(self, rkey, addr, data):
        """The status of an RDMA WRITE of `data` to `addr` under `rkey`."""
        self.src.write(data, len(data))
        wr = SendWR(wr_id=1, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                    sg=[SGE(self.src.buf, len(data), self.src.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(rkey, addr)
        self.a.post_send(wr)
        return self.wc()[0]

    def post_b(self, wr):
        """Posts `wr` on b; its completion (status, opcode)."""
        self.b.post_send(wr)
        return self.wc()

    def close(self):
        for o in (self.a, self.b, self.src, self.cq):
            o.close()


def bind_type2(pair, mw, mr, addr, length, access):
    """Binds type 2 window `mw` on the pair's b with a BIND_MW request; its
    completion and the window's new rkey."""
    wr = SendWR(wr_id=2, opcode=e.IBV_WR_BIND_MW, send_flags=e.IBV_SEND_SIGNALED)
    wr.set_bind_wr(mw, MWBindInfo(mr, addr, length, access))
    return pair.post_b(wr), next_rkey(mw.rkey)


def main():
    gid_index = int(sys.argv[1])
    ctx = Context(name=DEV)
    attr = ctx.query_device()
    check(attr.max_mw > 0, f"{attr.max_mw} memory windows")
    flags = IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B
    check(attr.device_cap_flags & flags == flags, "device_cap_flags: MEM_WINDOW, TYPE_2B")
    pd = PD(ctx)
    # The target: local rights and window binding only; remote rights come
    # from the windows.
    mr = MR(pd, PAGE, LW | e.IBV_ACCESS_MW_BIND)
    mr.write(bytes(PAGE), PAGE)
    win = mr.buf + 256

    # Type 1, bound by ibv_bind_mw on b: a reaches its 512 bytes, not the
    # MR around them.
    p = Pair(ctx, gid_index, pd)
    mw1 = MW(pd, e.IBV_MW_TYPE_1)
    old = mw1.rkey
    p.b.bind_mw(mw1, MWBind(MWBindInfo(mr, win, 512, REMOTE), e.IBV_SEND_SIGNALED))
    check(p.wc() == (e.IBV_WC_SUCCESS, e.IBV_WC_BIND_MW), "type 1: ibv_bind_mw completes")
    check(mw1.rkey == next_rkey(old), f"type 1: rkey {old:#x} -> {mw1.rkey:#x}")
    check(p.write(mw1.rkey, win + 8, pattern(1, 64)) == e.IBV_WC_SUCCESS,
          "type 1: RDMA WRITE inside the window")
    check(mr.read(64, 264) == pattern(1, 64), "type 1: the bytes landed")
    check(p.write(mw1.rkey, win + 500, pattern(2, 16)) == e.IBV_WC_REM_ACCESS_ERR,
          "type 1: past the window's end: remote access error")
    check(mr.read(16, 756) == bytes(16), "type 1: nothing written past it")
    p.close()
    p = Pair(ctx, gid_index, pd)
    check(p.write(mr.rkey, win, pattern(3, 16)) == e.IBV_WC_REM_ACCESS_ERR,
          "the MR's own rkey grants no remote access")
    p.close()

    # An MR with a window bound to it stays; once the window is gone it goes.
    mr2 = MR(pd, PAGE, LW | e.IBV_ACCESS_MW_BIND)
    p = Pair(ctx, gid_index, pd)
    mw1b = MW(pd, e.IBV_MW_TYPE_1)
    p.b.bind_mw(mw1b, MWBind(MWBindInfo(mr2, mr2.buf, PAGE, REMOTE), e.IBV_SEND_SIGNALED))
    check(p.wc()[0] == e.IBV_WC_SUCCESS, "type 1 bound to a second MR")
    try:
        mr2.close()
        check(False, "deregistering an MR with a window bound fails")
    except PyverbsRDMAError as err:
        check(err.error_code == errno.EBUSY,
              f"deregistering an MR with a window bound: {errno.errorcode.get(err.error_code)}")
    mw1b.close()
    mr2.close()
    check(True, "the MR deregisters once its window is gone")

    # Type 2, bound by a BIND_MW request on b: reachable until b
    # invalidates it.
    mw2 = MW(pd, e.IBV_MW_TYPE_2)
    (st, op), key2 = bind_type2(p, mw2, mr, mr.buf, PAGE, REMOTE)
    check((st, op) == (e.IBV_WC_SUCCESS, e.IBV_WC_BIND_MW), "type 2: BIND_MW completes")
    check(p.write(key2, mr.buf + 1024, pattern(4, 32)) == e.IBV_WC_SUCCESS,
          "type 2: RDMA WRITE through its QP")
    check(mr.read(32, 1024) == pattern(4, 32), "type 2: the bytes landed")
    inv = SendWR(wr_id=3, opcode=e.IBV_WR_LOCAL_INV, send_flags=e.IBV_SEND_SIGNALED,
                 imm_data=key2)
    check(p.post_b(inv) == (e.IBV_WC_SUCCESS, e.IBV_WC_LOCAL_INV), "type 2: LOCAL_INV completes")
    check(p.write(key2, mr.buf + 1024, pattern(5, 32)) == e.IBV_WC_REM_ACCESS_ERR,
          "type 2: invalidated: remote access error")
    check(mr.read(32, 1024) == pattern(4, 32), "type 2: nothing written after it")
    p.close()

    # A type 2 window goes with the QP it is bound to: the MR may go then.
    mr3 = MR(pd, PAGE, LW | e.IBV_ACCESS_MW_BIND)
    p = Pair(ctx, gid_index, pd)
    mw3 = MW(pd, e.IBV_MW_TYPE_2)
    (st, _), _ = bind_type2(p, mw3, mr3, mr3.buf, PAGE, REMOTE)
    check(st == e.IBV_WC_SUCCESS, "type 2 bound to a third MR")
    p.close()
    mr3.close()
    check(True, "the MR deregisters once the window's QP is gone")

    for o in (mw3, mw2, mw1, mr, pd, ctx):
        o.close()


if __name__ == "__main__":
    main()
