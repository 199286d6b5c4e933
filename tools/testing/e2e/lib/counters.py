# SPDX-License-Identifier: GPL-2.0
"""An RDMA WRITE with a key the responder never gave out, between two RC QPs
of virtio_rdma0 in one process (used by counters.sh): the requester's
completion says IBV_WC_REM_ACCESS_ERR, and nothing else completes.

usage: counters.py GID_INDEX
Exits non-zero on the first unmet expectation.
"""

import sys

import pyverbs.enums as e

from tenant import Verbs, check


def main():
    v = Verbs(int(sys.argv[1]))
    a, b = v.qp(), v.qp()
    v.connect(a, v.gid, b.qp_num, rq_psn=0, sq_psn=0)
    v.connect(b, v.gid, a.qp_num, rq_psn=0, sq_psn=0)
    v.post(a, e.IBV_WR_RDMA_WRITE, rkey=v.mr.rkey ^ 0x80, addr=v.mr.buf, length=64)
    wc = v.poll()
    status = None if wc is None else wc.status
    check(status == e.IBV_WC_REM_ACCESS_ERR, f"a WRITE with a bad key: status {status}")
    check(not v.drain(0.5), "nothing else completes")


if __name__ == "__main__":
    main()
