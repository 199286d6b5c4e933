# SPDX-License-Identifier: GPL-2.0
"""Shared receive queues on virtio_rdma0 (srq.sh), through rdma-core.

Without queues in guest memory the device offers none: max_srq is 0 and
ibv_create_srq fails with EOPNOTSUPP. With them: two RC QPs take their
receives from one SRQ, in the SRQ's order, each completion on the QP that
took it; the armed limit raises IBV_EVENT_SRQ_LIMIT_REACHED once and reads
0 after; a receive whose lkey is of another PD fails only the QP that took
it, which reports IBV_EVENT_QP_LAST_WQE_REACHED; a sender that found the SRQ
empty (RNR) gets through once a receive is posted.

usage: srq.py GID-INDEX
"""

import errno
import signal
import sys
import time

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

import rc

DEV = "virtio_rdma0"
SLOT = 64
SLOTS = 8
LW = e.IBV_ACCESS_LOCAL_WRITE


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", flush=True)
        sys.exit(1)
    print(f"ok: {what}", flush=True)


def poll(cq, n=1, seconds=20):
    """The next `n` completions of `cq` as (wr_id, status, qp_num, byte_len)."""
    got = []
    deadline = time.time() + seconds
    while len(got) < n and time.time() < deadline:
        k, wcs = cq.poll(num_entries=n - len(got))
        got += [(w.wr_id, w.status, w.qp_num, w.byte_len) for w in wcs[:k]]
        if k == 0:
            time.sleep(0.005)
    check(len(got) == n, f"{n} completion(s) within {seconds} s (got {got})")
    return got


def wait_event(ctx, want, seconds=20):
    """Takes async events until one of type `want` (the others are listed)."""
    signal.alarm(seconds)
    seen = []
    try:
        while True:
            ev = ctx.get_async_event()
            ev.ack()
            seen.append(ev.event_type)
            if ev.event_type == want:
                return seen
    except PyverbsRDMAError:
        check(False, f"async event {want} within {seconds} s (seen {seen})")
    finally:
        signal.alarm(0)
    return seen


def main():
    gid_index = int(sys.argv[1])
    signal.signal(signal.SIGALRM, lambda *_: None)
    ctx = Context(name=DEV)
    pd = PD(ctx)
    attr = ctx.query_device()
    if attr.max_srq == 0:
        try:
            SRQ(pd, SrqInitAttr(SrqAttr(max_wr=4, max_sge=1)))
            check(False, "ibv_create_srq fails on a device without SRQs")
        except PyverbsRDMAError as err:
            check(err.error_code == errno.EOPNOTSUPP,
                  f"no SRQs without rings: max_srq 0, ibv_create_srq: {err}")
        return 0
    check(attr.max_srq_wr >= SLOTS and attr.max_srq_sge >= 1,
          f"max_srq {attr.max_srq}, max_srq_wr {attr.max_srq_wr}, "
          f"max_srq_sge {attr.max_srq_sge}")

    srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=SLOTS, max_sge=1, srq_limit=0)))
    q = srq.query()
    check(q.max_wr >= SLOTS and q.srq_limit == 0,
          f"query: max_wr {q.max_wr}, limit {q.srq_limit}")
    buf = MR(pd, SLOTS * SLOT, LW)
    src = MR(pd, SLOT, LW)
    cq_a, cq_b = CQ(ctx, 32), CQ(ctx, 32)
    # The responders share the SRQ; the requesters have queues of their own.
    shared = QPCap(max_send_wr=4, max_recv_wr=0, max_send_sge=1, max_recv_sge=0)
    own = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    a1, a2 = (QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq_a, rcq=cq_a,
                                srq=srq, cap=shared)) for _ in range(2))
    b1, b2 = (QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq_b, rcq=cq_b,
                                cap=own)) for _ in range(2))
    rc.connect_pair(ctx, gid_index, a1, b1, LW)
    rc.connect_pair(ctx, gid_index, a2, b2, LW)

    def post(wr_id, slot, mr=buf):
        srq.post_recv(RecvWR(wr_id=wr_id, num_sge=1,
                             sg=[SGE(mr.buf + slot * SLOT, SLOT, mr.lkey)]))

    def send(qp, text, wr_id=1):
        data = text.encode()
        src.write(data, len(data))
        qp.post_send(SendWR(wr_id=wr_id, opcode=e.IBV_WR_SEND, num_sge=1,
                            sg=[SGE(src.buf, len(data), src.lkey)],
                            send_flags=e.IBV_SEND_SIGNALED))
        return data

    for i in range(6):
        post(100 + i, i)
    srq.modify(SrqAttr(srq_limit=3), e.IBV_SRQ_LIMIT)
    check(srq.query().srq_limit == 3, "the limit is armed at 3")

    # Four messages, alternately to a1 and a2: receives 100..103 in order.
    sent = []
    for i, (b, a) in enumerate(((b1, a1), (b2, a2), (b1, a1), (b2, a2))):
        sent.append((send(b, f"message {i} via QP {b.qp_num}"), a.qp_num))
        (_, status, _, _), = poll(cq_b)
        check(status == e.IBV_WC_SUCCESS, f"send {i} completed")
    got = poll(cq_a, 4)
    for i, (wr_id, status, qpn, length) in enumerate(got):
        data, want_qpn = sent[i]
        check((wr_id, status, qpn, length) == (100 + i, e.IBV_WC_SUCCESS, want_qpn, len(data)),
              f"receive {wr_id} of the SRQ completed on QP {qpn} with {length} bytes")
        check(buf.read(len(data), i * SLOT) == data, f"slot {i} holds message {i}")

    # Two receives left, fewer than the limit of 3.
    seen = wait_event(ctx, e.IBV_EVENT_SRQ_LIMIT_REACHED)
    check(True, f"IBV_EVENT_SRQ_LIMIT_REACHED (events {seen})")
    check(srq.query().srq_limit == 0, "the limit reads 0 once reached")

    # Take the two left, so that the SRQ is empty.
    for i in (4, 5):
        send(b1, f"message {i}")
        poll(cq_b)
    poll(cq_a, 2)

    # An RNR wait: b2's message finds no receive until one is posted.
    send(b2, "after an RNR wait")
    time.sleep(0.5)
    n, _ = cq_a.poll()
    check(n == 0, "no receive in the SRQ: the message waits (RNR)")
    post(200, 0)
    (wr_id, status, qpn, _), = poll(cq_a)
    check((wr_id, status, qpn) == (200, e.IBV_WC_SUCCESS, a2.qp_num),
          "posted to the SRQ, the waiting message arrives on a2")
    poll(cq_b)

    # A receive whose lkey is of another PD: a1, which takes it, fails alone.
    pd2 = PD(ctx)
    foreign = MR(pd2, SLOT, LW)
    post(300, 0, foreign)
    send(b1, "into a foreign MR")
    (wr_id, status, qpn, _), = poll(cq_a)
    check(wr_id == 300 and qpn == a1.qp_num and status != e.IBV_WC_SUCCESS,
          f"the receive with a foreign lkey failed on a1 (status {status})")
    (_, status, _, _), = poll(cq_b)
    check(status != e.IBV_WC_SUCCESS, f"b1's send failed (status {status})")
    seen = wait_event(ctx, e.IBV_EVENT_QP_LAST_WQE_REACHED)
    check(True, f"IBV_EVENT_QP_LAST_WQE_REACHED for the failed QP (events {seen})")

    # a2 still takes receives.
    post(400, 1)
    data = send(b2, "a2 still works")
    (wr_id, status, qpn, length), = poll(cq_a)
    check((wr_id, status, qpn, length) == (400, e.IBV_WC_SUCCESS, a2.qp_num, len(data)),
          "a2 still receives through the SRQ")
    poll(cq_b)

    # Moving a2 to ERR: its last WQE is reached too.
    a2.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
    wait_event(ctx, e.IBV_EVENT_QP_LAST_WQE_REACHED)
    check(True, "IBV_EVENT_QP_LAST_WQE_REACHED when a2 is moved to ERR")

    for obj in (a1, a2, b1, b2, srq, foreign, pd2):
        obj.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
