# SPDX-License-Identifier: GPL-2.0
"""CQs and QPs on virtio_rdma0 of a device that answers some creates with
the number of a live object (hostile-handles.sh).

Creates COUNT CQs and then COUNT QPs, one after the other; each must
either work or fail with EPROTO (the driver refusing a number in use), and
for each kind some must fail and some work. A QP that was created is taken
to INIT. Exits non-zero on the first unmet expectation.

usage: hostile_handles.py COUNT
"""

import errno
import sys

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr


def attempt(what, make):
    """The object `make` creates, or None if it failed with EPROTO."""
    try:
        obj = make()
    except PyverbsRDMAError as err:
        if err.error_code != errno.EPROTO:
            sys.exit(f"FAIL: {what}: {err} (expected success or EPROTO)")
        print(f"{what}: refused (EPROTO)")
        return None
    print(f"{what}: created")
    return obj


def main():
    count = int(sys.argv[1])
    ctx = Context(name="virtio_rdma0")
    pd = PD(ctx)
    cqs = [attempt(f"CQ {i}", lambda: CQ(ctx, 16)) for i in range(count)]
    live = [cq for cq in cqs if cq is not None]
    if len(live) in (0, len(cqs)):
        sys.exit(f"FAIL: {len(live)} of {len(cqs)} CQs created: the device did not lie")
    cq = live[0]
    init = QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                      cap=QPCap(max_send_wr=4, max_recv_wr=4))
    qps = [attempt(f"QP {i}", lambda: QP(pd, init)) for i in range(count)]
    made = [qp for qp in qps if qp is not None]
    if len(made) in (0, len(qps)):
        sys.exit(f"FAIL: {len(made)} of {len(qps)} QPs created: the device did not lie")
    for qp in made:
        attr = QPAttr(qp_state=e.IBV_QPS_INIT)
        attr.pkey_index = 0
        attr.port_num = 1
        attr.qp_access_flags = 0
        qp.to_init(attr)
        print(f"QP {qp.qp_num}: INIT")
    for qp in made:
        qp.close()
    for c in live:
        c.close()
    pd.close()
    ctx.close()
    print("OK")


main()
