# SPDX-License-Identifier: GPL-2.0
"""Many QPs and CQs in guest memory (used by rings.sh).

Through rdma-core (pyverbs, the project's provider in its rings mode): N CQs
and N RC QPs, one QP on each CQ, created in one process, each QP moved to
INIT; `rdma res show` counts them (the device has far fewer virtqueues);
then all destroyed, and `rdma res show` lists none of them. Exits non-zero
on the first unmet expectation.

usage: rings_scale.py N
"""

import subprocess
import sys
import time

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr

DEV = "virtio_rdma0"
INIT_MASK = (e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT |
             e.IBV_QP_ACCESS_FLAGS)


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}")
        sys.exit(1)
    print(f"ok: {what}")


def count(kind):
    """This process's objects of `kind` in `rdma res show`."""
    where = ["link", f"{DEV}/1"] if kind == "qp" else ["dev", DEV]
    out = subprocess.run(["rdma", "res", "show", kind, *where],
                         capture_output=True, text=True, check=False).stdout
    return sum(1 for line in out.splitlines() if "comm python3" in line)


def main():
    n = int(sys.argv[1])
    with Context(name=DEV) as ctx:
        pd = PD(ctx)
        start = time.monotonic()
        cqs, qps = [], []
        for _ in range(n):
            cq = CQ(ctx, 4)
            cap = QPCap(max_send_wr=2, max_recv_wr=2, max_send_sge=1, max_recv_sge=1)
            qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
            attr = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
            attr.pkey_index = 0
            attr.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE
            qp.modify(attr, INIT_MASK)
            cqs.append(cq)
            qps.append(qp)
        made = time.monotonic() - start
        check(len({q.qp_num for q in qps}) == n, f"{n} QPs with distinct numbers, in INIT")
        check(count("qp") == n and count("cq") == n,
              f"rdma res show lists {n} QPs and {n} CQs ({made:.1f} s to make)")
        start = time.monotonic()
        for qp in qps:
            qp.close()
        for cq in cqs:
            cq.close()
        gone = time.monotonic() - start
        check(count("qp") == 0 and count("cq") == 0,
              f"all destroyed, none listed ({gone:.1f} s)")
        pd.close()


if __name__ == "__main__":
    main()
