# SPDX-License-Identifier: GPL-2.0
"""A process that only waits for completions sees them end when the device fails.

Through rdma-core (pyverbs, with the project's provider): a UD QP on
virtio_rdma0 with receives posted that nothing will ever match; FLAG is
written once they are. The process then only polls its CQ (the ring the
driver fills), never posting again, so nothing it does can tell it that the
device failed: the driver must complete the receives itself, flushed, into
the ring. Then it posts one receive more, as a process that goes on
posting does: the post fails with an errno, or the receive comes back
flushed (a QP in error completes what is posted to it); it must not vanish.
Exits 0 once every receive came back with IBV_WC_WR_FLUSH_ERR in posting
order and the late one ended so, 1 on anything else or after SECONDS.

usage: flush_wait.py FLAG SECONDS
"""

import sys
import time

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR

DEV = "virtio_rdma0"
RECVS = 8
SLOT = 1024


def main():
    flag, seconds = sys.argv[1], float(sys.argv[2])
    ctx = Context(name=DEV)
    pd = PD(ctx)
    cq = CQ(ctx, 2 * RECVS)
    mr = MR(pd, RECVS * SLOT, e.IBV_ACCESS_LOCAL_WRITE)
    cap = QPCap(max_send_wr=1, max_recv_wr=RECVS, max_send_sge=1, max_recv_sge=1)
    attr = QPAttr(port_num=1)
    attr.qkey = 0x11111111
    # With attributes, pyverbs takes a UD QP through INIT and RTR to RTS.
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq, cap=cap), attr)
    for i in range(RECVS):
        sge = SGE(mr.buf + i * SLOT, SLOT, mr.lkey)
        qp.post_recv(RecvWR(wr_id=100 + i, num_sge=1, sg=[sge]))
    with open(flag, "w") as f:
        f.write(f"{qp.qp_num}\n")

    got = []
    end = time.monotonic() + seconds
    while len(got) < RECVS and time.monotonic() < end:
        n, wcs = cq.poll(num_entries=RECVS)
        got += [(wc.wr_id, wc.status) for wc in wcs[:n]]
        if n == 0:
            time.sleep(0.05)
    want = [(100 + i, e.IBV_WC_WR_FLUSH_ERR) for i in range(RECVS)]
    print(f"completions: {got}")
    if got != want:
        print(f"expected {RECVS} receives flushed in order: {want}")
        return 1
    print(f"all {RECVS} receives came back flushed, in order")

    sge = SGE(mr.buf, SLOT, mr.lkey)
    try:
        qp.post_recv(RecvWR(wr_id=200, num_sge=1, sg=[sge]))
    except PyverbsRDMAError as err:
        print(f"a receive posted after the failure: refused ({err})")
        return 0
    late = []
    end = time.monotonic() + 10
    while not late and time.monotonic() < end:
        n, wcs = cq.poll(num_entries=1)
        late = [(wc.wr_id, wc.status) for wc in wcs[:n]]
        if n == 0:
            time.sleep(0.05)
    if late != [(200, e.IBV_WC_WR_FLUSH_ERR)]:
        print(f"a receive posted after the failure: {late or 'no completion in 10 s'}")
        return 1
    print("a receive posted after the failure came back flushed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
