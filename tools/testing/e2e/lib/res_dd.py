# SPDX-License-Identifier: GPL-2.0
"""The driver's view of a process's objects in `rdma res show -dd` (used by
ibv-devinfo.sh while lib/uverbs_user.py holds a QP, a CQ and 4 MRs): each
QP, CQ and MR of virtio_rdma0 carries the driver's attributes, and they
say what the objects are.

usage: res_dd.py QPN    (the holder's QP)
Exits non-zero on the first unmet expectation.
"""

import json
import subprocess
import sys

from tenant import check


def res(kind):
    out = subprocess.run(["rdma", "-j", "-dd", "res", "show", kind], check=True,
                         capture_output=True, text=True).stdout
    return [o for o in json.loads(out) if o["ifname"] == "virtio_rdma0"]


def main():
    qpn = int(sys.argv[1])
    qps = {q["lqpn"]: q for q in res("qp")}
    user, gsi = qps.get(qpn, {}), qps.get(1, {})
    # With queues in guest memory the process's QP and CQ have rings in its
    # memory ("guest"), the kernel's CQs rings in the kernel's
    # ("guest-kernel"); the GSI QP keeps its virtqueues either way.
    rings = user.get("drv_rings") == "guest"
    if rings:
        check(user.get("drv_sq_depth", 0) >= 4 and user.get("drv_rq_depth", 0) >= 4,
              f"the holder's QP {qpn}, on rings: {user}")
    else:
        check(user.get("drv_rings") == "user" and user.get("drv_sq_outstanding") == 0
              and user.get("drv_rq_outstanding") == 0
              and user.get("drv_sq_vq") not in (None, user.get("drv_rq_vq")),
              f"the holder's QP {qpn}: {user}")
    check(gsi.get("drv_rings") == "kernel" and gsi.get("drv_rq_outstanding", 0) > 0,
          f"ib_mad's GSI QP, its receives posted: {gsi}")
    all_cqs = res("cq")
    cqs = [c for c in all_cqs if c.get("comm") == "python3"]
    check(len(cqs) == 1 and cqs[0].get("drv_rings") == ("guest" if rings else "user")
          and cqs[0].get("drv_depth", 0) >= 16
          and user.get("drv_send_cqn") == user.get("drv_recv_cqn"),
          f"the holder's CQ: {cqs}")
    kernel = [c.get("drv_rings") for c in all_cqs if c.get("comm") != "python3"]
    check(kernel and set(kernel) == {"guest-kernel" if rings else "kernel"},
          f"the kernel's CQs (ib_mad's): {kernel}")
    mrs = [m for m in res("mr") if m.get("comm") == "python3"]
    check(len(mrs) == 4 and all(m.get("drv_kind") == "user" for m in mrs)
          and len({m.get("drv_mrn") for m in mrs}) == 4,
          f"the holder's MRs: {[(m.get('drv_mrn'), m.get('drv_kind')) for m in mrs]}")


if __name__ == "__main__":
    main()
