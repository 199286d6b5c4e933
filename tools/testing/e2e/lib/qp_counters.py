# SPDX-License-Identifier: GPL-2.0
"""Two RC QPs of virtio_rdma0 in one process that write when told (used by
qp-counters.sh, which binds them to counters meanwhile): prints
"QPN_A QPN_B", then for each line "write N" on stdin posts N RDMA WRITEs of
SIZE bytes from A into B's memory, each completed, and prints "done"; ends
at "quit" or end of input.

usage: qp_counters.py GID_INDEX
Exits non-zero on the first unmet expectation.
"""

import sys

import pyverbs.enums as e

from tenant import SIZE, Verbs, check


def main():
    v = Verbs(int(sys.argv[1]))
    a, b = v.qp(), v.qp()
    v.connect(a, v.gid, b.qp_num, rq_psn=0, sq_psn=0)
    v.connect(b, v.gid, a.qp_num, rq_psn=0, sq_psn=0)
    print(a.qp_num, b.qp_num, flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[:1] != ["write"]:
            break
        for _ in range(int(words[1])):
            v.post(a, e.IBV_WR_RDMA_WRITE, rkey=v.mr.rkey, addr=v.mr.buf, length=SIZE)
            wc = v.poll()
            status = None if wc is None else wc.status
            # Silent when it holds: the caller reads one line per command.
            if status != e.IBV_WC_SUCCESS:
                check(False, f"an RDMA WRITE: status {status}")
        print("done", flush=True)


if __name__ == "__main__":
    main()
