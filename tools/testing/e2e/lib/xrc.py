# SPDX-License-Identifier: GPL-2.0
"""XRC (eXtended Reliable Connected) on virtio_rdma0, through rdma-core.

Without queues in guest memory the device offers no SRQs and so no XRC:
max_srq is 0, IBV_DEVICE_XRC is not set and ibv_open_xrcd fails with
EOPNOTSUPP. With them, in one process, over the port's RoCE GID: an XRC
domain with XRC SRQs A and B (each with a CQ of its own, receives posted),
one XRC_SEND QP connected to one XRC_RECV QP.

* A SEND to A, then to B, through ibv_post_send (qp_type.xrc.remote_srqn)
  and through the ibv_wr_* API (ibv_wr_set_xrc_srqn): each lands in the
  SRQ it names, completes on that SRQ's CQ naming the XRC_RECV QP, and no
  other CQ hears of it.
* RDMA WRITE and READ through the target with an rkey of the SRQ's PD (not
  the sender's) move the data; an rkey of the sender's PD is refused
  (IBV_WC_REM_ACCESS_ERR).
* remote_srqn naming a basic SRQ, an XRC SRQ of another domain, or a
  destroyed XRC SRQ fails with IBV_WC_REM_INV_REQ_ERR and writes nothing.
* A SEND to an empty XRC SRQ with rnr_retry 1 ends in
  IBV_WC_RNR_RETRY_EXC_ERR.
* ibv_close_xrcd fails with EBUSY while an XRC SRQ, then while an XRC_RECV
  QP, of the domain exists; then everything is destroyed.

After each failure the sender's QP is in ERR: both QPs are reset and
connected again.

usage: xrc.py GID-INDEX
"""

import errno
import os
import sys
import time

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPEx, QPInitAttrEx
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr, SrqInitAttrEx
from pyverbs.wr import SGE, RecvWR, SendWR
from pyverbs.xrcd import XRCD, XRCDInitAttr

import rc

DEV = "virtio_rdma0"
SLOT = 64
SLOTS = 8
LW = e.IBV_ACCESS_LOCAL_WRITE
REMOTE = LW | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
MARK = b"\xee" * SLOT


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", flush=True)
        sys.exit(1)
    print(f"ok: {what}", flush=True)


def step(what):
    print(f"-- {what}", flush=True)


def poll(cq, n=1, seconds=20):
    """The next `n` completions of `cq` as (wr_id, status, opcode, qp_num, byte_len)."""
    got = []
    deadline = time.time() + seconds
    while len(got) < n and time.time() < deadline:
        k, wcs = cq.poll(num_entries=n - len(got))
        got += [(w.wr_id, w.status, w.opcode, w.qp_num, w.byte_len) for w in wcs[:k]]
        if k == 0:
            time.sleep(0.005)
    check(len(got) == n, f"{n} completion(s) within {seconds} s (got {got})")
    return got


def quiet(cqs, what, seconds=0.3):
    """None of `cqs` reports a completion (within `seconds`)."""
    time.sleep(seconds)
    for cq in cqs:
        n, wcs = cq.poll()
        check(n == 0, f"{what} (got {[(w.wr_id, w.status, w.qp_num) for w in wcs[:n]]})")


def open_xrcd(ctx):
    """A domain of this process only (fd -1): closing it is refused while
    it has SRQs or QPs (with a file, a close only drops a reference)."""
    return XRCD(ctx, XRCDInitAttr(e.IBV_XRCD_INIT_ATTR_FD | e.IBV_XRCD_INIT_ATTR_OFLAGS,
                                  os.O_CREAT, -1))


def xrc_srq_attr(pd, xrcd, cq, attr_cls=SrqInitAttrEx):
    attr = attr_cls(max_wr=SLOTS, max_sge=1)
    attr.srq_type = e.IBV_SRQT_XRC
    attr.pd = pd
    SrqInitAttrEx.xrcd.__set__(attr, xrcd)
    attr.cq = cq
    attr.comp_mask = (e.IBV_SRQ_INIT_ATTR_TYPE | e.IBV_SRQ_INIT_ATTR_PD |
                      e.IBV_SRQ_INIT_ATTR_CQ | e.IBV_SRQ_INIT_ATTR_XRCD)
    return attr


def xrc_srq(ctx, pd, xrcd, cq):
    return SRQ(ctx, xrc_srq_attr(pd, xrcd, cq))


# pyverbs closes an XRCD's SRQs and QPs before the XRCD itself, so that
# closing it never meets them. To see the kernel refuse (EBUSY), these
# attributes hide the domain from pyverbs' bookkeeping (it reads the domain
# through the `xrcd` property); the C attribute still names it.
class UntrackedSrqAttr(SrqInitAttrEx):
    @property
    def xrcd(self):
        return None


class UntrackedQPAttr(QPInitAttrEx):
    @property
    def xrcd(self):
        return None


def tgt_qp(ctx, xrcd, attr_cls=QPInitAttrEx):
    return QP(ctx, attr_cls(qp_type=e.IBV_QPT_XRC_RECV,
                            comp_mask=e.IBV_QP_INIT_ATTR_XRCD, xrcd=xrcd))


def connect(ctx, gid_index, ini, tgt, rnr_retry=7):
    """Resets `ini` (XRC_SEND) and `tgt` (XRC_RECV) and moves both to RTS,
    each the other's peer; the target's RNR timer is 1 (0.01 ms), so that
    an RNR wait is short."""
    rc.connect_pair(ctx, gid_index, tgt, ini, REMOTE, reset=True, min_rnr_timer=1,
                    rnr_retry=rnr_retry)


def main():
    gid_index = int(sys.argv[1])
    ctx = Context(name=DEV)
    attr = ctx.query_device()
    xrc = bool(attr.device_cap_flags & e.IBV_DEVICE_XRC)
    if attr.max_srq == 0 or not xrc:
        step(f"no XRC: max_srq {attr.max_srq}, IBV_DEVICE_XRC {xrc}")
        try:
            open_xrcd(ctx)
            check(False, "ibv_open_xrcd fails on a device without XRC")
        except PyverbsRDMAError as err:
            check(err.error_code == errno.EOPNOTSUPP,
                  f"no XRC: ibv_open_xrcd fails with EOPNOTSUPP: {err}")
        return 0
    check(attr.max_srq_wr >= SLOTS, f"XRC: max_srq {attr.max_srq}, max_srq_wr {attr.max_srq_wr}")

    step("an XRC domain, XRC SRQs A and B (each its own CQ), an XRC_SEND and an XRC_RECV QP")
    pd_t = PD(ctx)          # the SRQs' (target's) PD
    pd_s = PD(ctx)          # the sender's PD
    xrcd = open_xrcd(ctx)
    cq_a, cq_b, cq_e, cq_s = CQ(ctx, 32), CQ(ctx, 32), CQ(ctx, 32), CQ(ctx, 32)
    srq_a = xrc_srq(ctx, pd_t, xrcd, cq_a)
    srq_b = xrc_srq(ctx, pd_t, xrcd, cq_b)
    srq_e = xrc_srq(ctx, pd_t, xrcd, cq_e)      # stays empty (RNR)
    na, nb, ne = srq_a.get_srq_num(), srq_b.get_srq_num(), srq_e.get_srq_num()
    check(len({na, nb, ne}) == 3 and 0 < min(na, nb, ne),
          f"ibv_get_srq_num: A {na}, B {nb}, empty {ne}")
    # Another domain's XRC SRQ, which this domain's target must not reach.
    xrcd2 = open_xrcd(ctx)
    cq_x = CQ(ctx, 32)
    srq_x = xrc_srq(ctx, pd_t, xrcd2, cq_x)
    nx = srq_x.get_srq_num()

    buf_a = MR(pd_t, SLOTS * SLOT, LW)
    buf_b = MR(pd_t, SLOTS * SLOT, LW)
    buf_x = MR(pd_t, SLOTS * SLOT, LW)
    target = MR(pd_t, SLOT, REMOTE)             # RDMA through the target
    foreign = MR(pd_s, SLOT, REMOTE)            # the sender's PD, not the SRQ's
    src = MR(pd_s, SLOT, LW)

    ini = QPEx(ctx, QPInitAttrEx(
        qp_type=e.IBV_QPT_XRC_SEND, pd=pd_s, scq=cq_s,
        cap=QPCap(max_send_wr=8, max_recv_wr=0, max_send_sge=1, max_recv_sge=0),
        comp_mask=e.IBV_QP_INIT_ATTR_PD | e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
        send_ops_flags=e.IBV_QP_EX_WITH_SEND | e.IBV_QP_EX_WITH_RDMA_WRITE |
        e.IBV_QP_EX_WITH_RDMA_READ))
    tgt = tgt_qp(ctx, xrcd)
    connect(ctx, gid_index, ini, tgt)
    check(True, f"XRC_SEND QP {ini.qp_num} connected to XRC_RECV QP {tgt.qp_num}")
    qattr, _ = tgt.query(e.IBV_QP_STATE)
    check(qattr.qp_state == e.IBV_QPS_RTS, f"the XRC_RECV QP queries as RTS ({qattr.qp_state})")

    def post_recv(srq, mr, wr_id, slot):
        mr.write(MARK, SLOT, slot * SLOT)
        srq.post_recv(RecvWR(wr_id=wr_id, num_sge=1,
                             sg=[SGE(mr.buf + slot * SLOT, SLOT, mr.lkey)]))

    def post_send(srqn, text, wr_id, opcode=e.IBV_WR_SEND, remote=None):
        """Through ibv_post_send, with qp_type.xrc.remote_srqn."""
        data = text.encode()
        src.write(data, len(data))
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1,
                    sg=[SGE(src.buf, len(data), src.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        if remote is not None:
            wr.set_wr_rdma(remote.rkey, remote.buf)
        wr.set_qp_type_xrc(srqn)
        ini.post_send(wr)
        return data

    def wr_post(srqn, text, wr_id, op="send", remote=None, length=None):
        """Through the ibv_wr_* API, with ibv_wr_set_xrc_srqn."""
        data = text.encode()
        src.write(data, len(data))
        ini.wr_start()
        ini.wr_id = wr_id
        ini.wr_flags = e.IBV_SEND_SIGNALED
        if op == "send":
            ini.wr_send()
        elif op == "read":
            ini.wr_rdma_read(remote.rkey, remote.buf)
        else:
            ini.wr_rdma_write(remote.rkey, remote.buf)
        ini.wr_set_xrc_srqn(srqn)
        ini.wr_set_sge(SGE(src.buf, length or len(data), src.lkey))
        ini.wr_complete()
        return data

    def sent(wr_id, opcode, what):
        (got_id, status, got_op, qpn, _), = poll(cq_s)
        check((got_id, status, got_op, qpn) == (wr_id, e.IBV_WC_SUCCESS, opcode, ini.qp_num),
              f"{what}: the sender's completion (status {status}, opcode {got_op})")

    def received(cq, mr, wr_id, slot, data, what):
        (got_id, status, got_op, qpn, length), = poll(cq)
        check((got_id, status, got_op, qpn, length) ==
              (wr_id, e.IBV_WC_SUCCESS, e.IBV_WC_RECV, tgt.qp_num, len(data)),
              f"{what}: receive {got_id} on the SRQ's CQ, naming XRC_RECV QP {qpn}, "
              f"{length} bytes (status {status})")
        check(mr.read(len(data), slot * SLOT) == data, f"{what}: the data is in the receive's buffer")

    def refused(status, what, reconnect=True):
        (_, got, _, _, _), = poll(cq_s)
        check(got == status, f"{what}: the sender's completion has status {got} (want {status})")
        if reconnect:
            connect(ctx, gid_index, ini, tgt)

    for i in range(4):
        post_recv(srq_a, buf_a, 100 + i, i)
        post_recv(srq_b, buf_b, 200 + i, i)
        post_recv(srq_x, buf_x, 300 + i, i)

    step("SEND to SRQ A, then SRQ B, through ibv_post_send")
    data = post_send(na, "to SRQ A by ibv_post_send", 1)
    sent(1, e.IBV_WC_SEND, "SEND to A")
    received(cq_a, buf_a, 100, 0, data, "SEND to A")
    quiet([cq_b, cq_e, cq_x], "SEND to A: no completion on another SRQ's CQ")
    data = post_send(nb, "to SRQ B by ibv_post_send", 2)
    sent(2, e.IBV_WC_SEND, "SEND to B")
    received(cq_b, buf_b, 200, 0, data, "SEND to B")
    quiet([cq_a, cq_e, cq_x], "SEND to B: no completion on another SRQ's CQ")

    step("SEND to SRQ A, then SRQ B, through ibv_wr_* (ibv_wr_set_xrc_srqn)")
    data = wr_post(na, "to SRQ A by ibv_wr_send", 3)
    sent(3, e.IBV_WC_SEND, "ibv_wr_send to A")
    received(cq_a, buf_a, 101, 1, data, "ibv_wr_send to A")
    data = wr_post(nb, "to SRQ B by ibv_wr_send", 4)
    sent(4, e.IBV_WC_SEND, "ibv_wr_send to B")
    received(cq_b, buf_b, 201, 1, data, "ibv_wr_send to B")
    quiet([cq_a, cq_b, cq_e, cq_x], "no other completion")

    step("RDMA WRITE and READ through the target, rkeys of the SRQ's PD")
    target.write(MARK, SLOT)
    data = post_send(na, "written through the XRC target", 5, e.IBV_WR_RDMA_WRITE, target)
    sent(5, e.IBV_WC_RDMA_WRITE, "RDMA WRITE naming SRQ A")
    check(target.read(len(data), 0) == data, "RDMA WRITE: the data is in the target's MR")
    data = wr_post(nb, "X" * len(data), 6, "write", target)
    sent(6, e.IBV_WC_RDMA_WRITE, "ibv_wr_rdma_write naming SRQ B")
    check(target.read(len(data), 0) == data, "ibv_wr_rdma_write: the data is in the target's MR")
    target.write(b"read back through the XRC target", 32)
    wr_post(na, "-" * 32, 7, "read", target)
    sent(7, e.IBV_WC_RDMA_READ, "ibv_wr_rdma_read naming SRQ A")
    check(src.read(32, 0) == b"read back through the XRC target",
          "RDMA READ: the target's data is in the sender's buffer")
    quiet([cq_a, cq_b], "RDMA operations take no receive")

    step("an rkey of the sender's PD, not the SRQ's: refused")
    foreign.write(MARK, SLOT)
    post_send(na, "not into the sender's PD", 8, e.IBV_WR_RDMA_WRITE, foreign)
    refused(e.IBV_WC_REM_ACCESS_ERR, "RDMA WRITE with an rkey of another PD")
    check(foreign.read(SLOT, 0) == MARK, "nothing written into the foreign MR")

    step("remote_srqn naming an XRC SRQ of another domain")
    post_send(nx, "to another domain's SRQ", 9)
    refused(e.IBV_WC_REM_INV_REQ_ERR, "SEND to another domain's XRC SRQ")
    quiet([cq_x, cq_a, cq_b], "nothing received by any SRQ")
    check(buf_x.read(SLOT, 0) == MARK, "the other domain's receive buffer is untouched")

    step("remote_srqn naming a basic SRQ")
    # Only an XRC SRQ's number is told to a process. SRQs are numbered
    # lowest free first (the protocol), so a basic SRQ created right after
    # an XRC SRQ is destroyed takes that one's number.
    probe = xrc_srq(ctx, pd_t, xrcd, cq_e)
    nbasic = probe.get_srq_num()
    probe.close()
    basic = SRQ(pd_t, SrqInitAttr(SrqAttr(max_wr=4, max_sge=1)))
    gone = xrc_srq(ctx, pd_t, xrcd, cq_e)
    ngone = gone.get_srq_num()
    check(ngone != nbasic, f"the basic SRQ took number {nbasic} (the next XRC SRQ got {ngone})")
    buf_basic = MR(pd_t, SLOT, LW)
    post_recv(basic, buf_basic, 400, 0)
    post_send(nbasic, "to a basic SRQ", 10)
    refused(e.IBV_WC_REM_INV_REQ_ERR, "SEND to a basic SRQ")
    check(buf_basic.read(SLOT, 0) == MARK, "the basic SRQ's receive buffer is untouched")
    quiet([cq_a, cq_b, cq_e], "nothing received by any SRQ")

    step("remote_srqn naming a destroyed XRC SRQ")
    gone.close()
    post_send(ngone, "to a destroyed SRQ", 11)
    refused(e.IBV_WC_REM_INV_REQ_ERR, "SEND to a destroyed XRC SRQ")
    quiet([cq_a, cq_b, cq_e], "nothing received by any SRQ")

    step("the XRC pair still works after the failures")
    data = post_send(na, "after the failures", 12)
    sent(12, e.IBV_WC_SEND, "SEND to A")
    received(cq_a, buf_a, 102, 2, data, "SEND to A")

    step("an empty XRC SRQ: RNR retries exceeded (rnr_retry 1)")
    connect(ctx, gid_index, ini, tgt, rnr_retry=1)
    post_send(ne, "to an empty SRQ", 13)
    refused(e.IBV_WC_RNR_RETRY_EXC_ERR, "SEND to an empty XRC SRQ", reconnect=False)
    quiet([cq_e], "nothing completes on the empty SRQ's CQ")

    step("ibv_post_send and ibv_post_recv on the XRC_RECV QP: refused")
    try:
        tgt.post_send(SendWR(wr_id=1, num_sge=1, sg=[SGE(src.buf, 1, src.lkey)]))
        check(False, "ibv_post_send on an XRC_RECV QP fails")
    except PyverbsRDMAError as err:
        check(err.error_code == errno.EINVAL, f"ibv_post_send on an XRC_RECV QP: {err}")
    try:
        tgt.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(src.buf, 1, src.lkey)]))
        check(False, "ibv_post_recv on an XRC_RECV QP fails")
    except PyverbsRDMAError as err:
        check(err.error_code == errno.EINVAL, f"ibv_post_recv on an XRC_RECV QP: {err}")

    step("ibv_close_xrcd while an XRC SRQ, then an XRC_RECV QP, of it exists: EBUSY")
    xrcd3 = open_xrcd(ctx)
    cq3 = CQ(ctx, 8)
    srq3 = SRQ(ctx, xrc_srq_attr(pd_t, xrcd3, cq3, UntrackedSrqAttr))
    try:
        xrcd3.close()
        check(False, "ibv_close_xrcd fails while an XRC SRQ of the domain exists "
              "(did pyverbs close the SRQ first? see UntrackedSrqAttr)")
    except PyverbsRDMAError as err:
        check(err.error_code == errno.EBUSY, f"ibv_close_xrcd with an XRC SRQ: {err}")
    srq3.close()
    tgt3 = tgt_qp(ctx, xrcd3, UntrackedQPAttr)
    try:
        xrcd3.close()
        check(False, "ibv_close_xrcd fails while an XRC_RECV QP of the domain exists")
    except PyverbsRDMAError as err:
        check(err.error_code == errno.EBUSY, f"ibv_close_xrcd with an XRC_RECV QP: {err}")
    tgt3.close()
    xrcd3.close()
    check(True, "ibv_close_xrcd once its SRQ and QP are gone")

    step("everything destroyed")
    for obj in (ini, tgt, srq_a, srq_b, srq_e, srq_x, basic):
        obj.close()
    xrcd.close()
    xrcd2.close()
    check(True, "QPs, SRQs and domains destroyed")
    for obj in (buf_a, buf_b, buf_x, buf_basic, target, foreign, src,
                cq_a, cq_b, cq_e, cq_s, cq_x, cq3, pd_s, pd_t):
        obj.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
