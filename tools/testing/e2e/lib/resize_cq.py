# SPDX-License-Identifier: GPL-2.0
"""ibv_resize_cq on virtio_rdma0 (resize-cq.sh): a user CQ grows and
shrinks with completions it has not polled, which come out afterwards in
order; it then holds what it says (more completions than it first could,
none lost); what IB forbids (fewer entries than are waiting, more than the
device's max_cqe) fails with EINVAL and leaves the CQ working; an arming
made before a resize fires after it; twenty resizes leave no mapping or
pinned page behind.

usage: resize_cq.py GID-INDEX
"""

import errno
import faulthandler
import sys
import time

import pyverbs.enums as e
from pyverbs.cq import CQ, CompChannel
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR

import rc

DEV = "virtio_rdma0"
RW = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
SLOTS = 64


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", flush=True)
        sys.exit(1)
    print(f"ok: {what}", flush=True)


class Writer:
    """An RC QP `a` connected to `b` of the same device, whose sends
    complete on `cq`: each write puts its wr_id into its own 8-byte slot of
    `dst`, so the test sees when a write has landed without polling."""

    def __init__(self, ctx, gid_index, pd, cq, other_cq):
        self.src = MR(pd, 8 * SLOTS, RW)
        self.dst = MR(pd, 8 * SLOTS, RW)
        cap = QPCap(max_send_wr=SLOTS, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
        self.a = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=other_cq, cap=cap))
        self.b = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=other_cq, rcq=other_cq,
                                   cap=cap))
        rc.connect_pair(ctx, gid_index, self.a, self.b, RW)
        self.next = 1

    def write(self, n):
        """Posts `n` signaled writes (the next wr_ids) and waits until the
        last one has landed, and a while more for its completion; returns
        their wr_ids."""
        ids = list(range(self.next, self.next + n))
        self.next += n
        for i in ids:
            slot = (i % SLOTS) * 8
            self.src.write(i.to_bytes(8, "little"), 8, slot)
            wr = SendWR(wr_id=i, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                        sg=[SGE(self.src.buf + slot, 8, self.src.lkey)],
                        send_flags=e.IBV_SEND_SIGNALED)
            wr.set_wr_rdma(self.dst.rkey, self.dst.buf + slot)
            self.a.post_send(wr)
        last = ids[-1]
        deadline = time.time() + 30
        while self.dst.read(8, (last % SLOTS) * 8) != last.to_bytes(8, "little"):
            check(time.time() < deadline, f"write {last} landed within 30 s")
            time.sleep(0.01)
        # The completion follows the data: the device writes it, and in the
        # virtqueue mode the driver's interrupt moves it into the ring.
        time.sleep(1)
        return ids

    def close(self):
        for o in (self.a, self.b, self.src, self.dst):
            o.close()


def poll_all(cq, n):
    """The first `n` completions of `cq` (waiting up to 30 s for them)."""
    got = []
    deadline = time.time() + 30
    while len(got) < n and time.time() < deadline:
        k, wcs = cq.poll(n - len(got))
        got += wcs[:k]
        if not k:
            time.sleep(0.005)
    return got


def drains(cq, ids, what):
    """Polls `cq` for the completions of `ids`: all of them, in order,
    successful, and nothing more."""
    got = poll_all(cq, len(ids))
    check([w.wr_id for w in got] == ids and all(w.status == e.IBV_WC_SUCCESS for w in got),
          f"{what}: completions {ids[0]}..{ids[-1]} in order, successful "
          f"(got {len(got)}: {[w.wr_id for w in got][:8]}...)")
    k, _ = cq.poll(1)
    check(k == 0, f"{what}: nothing more")


def resize_fails(cq, cqe, what):
    try:
        cq.resize(cqe)
    except PyverbsRDMAError as err:
        check(err.error_code == errno.EINVAL,
              f"{what}: {errno.errorcode.get(err.error_code, err.error_code)} (want EINVAL)")
        return
    check(False, f"{what}: refused")


def uverbs_maps():
    """The mappings of this process's uverbs file (the kernel's rings)."""
    with open("/proc/self/maps") as f:
        return sum("/dev/infiniband/uverbs" in line for line in f)


def vm_pin():
    """The pages this process has pinned (VmPin, kB): rings in guest memory."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmPin:"))


def main():
    gid_index = int(sys.argv[1])
    ctx = Context(name=DEV)
    max_cqe = ctx.query_device().max_cqe
    pd = PD(ctx)
    cq, other = CQ(ctx, 4), CQ(ctx, 4)
    w = Writer(ctx, gid_index, pd, cq, other)
    check(cq.cqe >= 4, f"a CQ of 4 entries holds {cq.cqe}")

    # Three waiting: a size of two cannot hold them, nor can the device
    # give more than max_cqe.
    ids = w.write(3)
    resize_fails(cq, 2, "resize to 2 with 3 completions waiting")
    resize_fails(cq, max_cqe + 1, f"resize past max_cqe ({max_cqe})")
    cq.resize(SLOTS)
    check(cq.cqe >= SLOTS, f"resized to {SLOTS}: it holds {cq.cqe}")
    drains(cq, ids, "grown with 3 waiting")

    # It holds what it says: 40 completions without a poll (the CQ of 4
    # would have overrun and lost them).
    drains(cq, w.write(40), "40 completions in the grown CQ")

    # Shrunk with completions waiting, then grown again, twenty times over.
    maps, pinned = uverbs_maps(), vm_pin()
    for i in range(10):
        ids = w.write(5)
        cq.resize(8)
        check(8 <= cq.cqe < SLOTS, f"round {i}: shrunk to 8: it holds {cq.cqe}")
        ids += w.write(2)
        cq.resize(SLOTS)
        drains(cq, ids, f"round {i}: shrunk and grown with 5, then 7 waiting")
    check(uverbs_maps() == maps, f"twenty resizes: {uverbs_maps()} uverbs mappings, "
          f"as before ({maps})")
    check(vm_pin() == pinned, f"twenty resizes: {vm_pin()} kB pinned, as before ({pinned})")

    # Still a working CQ, of the same QP.
    drains(cq, w.write(3), "after the resizes")
    w.close()

    # An arming made before a resize fires for the first completion after
    # it (with rings in guest memory the arming is in the ring, and moves).
    ch = CompChannel(ctx)
    acq = CQ(ctx, 4, None, ch, 0)
    w = Writer(ctx, gid_index, pd, acq, other)
    acq.req_notify()
    acq.resize(16)
    ids = w.write(1)
    # ibv_get_cq_event blocks holding the interpreter: faulthandler's own
    # thread ends the process (status 1, the waiting line in its traceback)
    # if no event comes.
    print("armed before the resize: waiting up to 30 s for the event", flush=True)
    faulthandler.dump_traceback_later(30, exit=True)
    ch.get_cq_event(acq)
    faulthandler.cancel_dump_traceback_later()
    acq.ack_events(1)
    check(True, "armed before the resize: the completion after it raised an event")
    drains(acq, ids, "armed before the resize")
    w.close()
    for o in (cq, acq, ch, other, pd, ctx):
        o.close()


if __name__ == "__main__":
    main()
