# SPDX-License-Identifier: GPL-2.0
"""ibv_rereg_mr on virtio_rdma0 (rereg-mr.sh): one user MR changes its
rights, its memory and its PD, each seen by RDMA WRITEs between two RC QPs
of the device (which land or fail with the IB error of the key's new
state), and the reregistrations IB forbids fail with their errno and leave
the MR as it was.

usage: rereg_mr.py GID-INDEX
"""

import ctypes
import errno
import json
import mmap
import os
import subprocess
import sys
import time

import pyverbs.enums as e
from pyverbs import mem_alloc
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR

import rc

DEV = "virtio_rdma0"
PAGE = 4096
LW = e.IBV_ACCESS_LOCAL_WRITE
RW = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
TRANS = e.IBV_REREG_MR_CHANGE_TRANSLATION
CH_PD = e.IBV_REREG_MR_CHANGE_PD
ACCESS = e.IBV_REREG_MR_CHANGE_ACCESS


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", flush=True)
        sys.exit(1)
    print(f"ok: {what}", flush=True)


def pattern(seed, n):
    return bytes((i * 31 + seed) & 0xFF for i in range(n))


class Pair:
    """Two connected RC QPs of `pd`; `a` writes from its own source MR, or
    from an SGE it is given, into whatever key it is given."""

    def __init__(self, ctx, gid_index, pd):
        self.cq = CQ(ctx, 16)
        self.src = MR(pd, PAGE, LW)
        self.dst = MR(pd, PAGE, RW)
        cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
        init = QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq, cap=cap)
        self.a, self.b = QP(pd, init), QP(pd, init)
        rc.connect_pair(ctx, gid_index, self.a, self.b, RW)

    def write(self, rkey, addr, data=None, sge=None):
        """The status of an RDMA WRITE of `data` (from the source MR) or of
        `sge` to `addr` under `rkey`."""
        if sge is None:
            self.src.write(data, len(data))
            sge = SGE(self.src.buf, len(data), self.src.lkey)
        wr = SendWR(wr_id=1, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[sge],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(rkey, addr)
        self.a.post_send(wr)
        deadline = time.time() + 20
        while time.time() < deadline:
            n, wcs = self.cq.poll()
            if n:
                return wcs[0].status
            time.sleep(0.005)
        check(False, "a completion within 20 s")
        return None

    def close(self):
        for o in (self.a, self.b, self.src, self.dst, self.cq):
            o.close()


def mr_lengths():
    """The lengths of this process's MRs, as rdma res show lists them."""
    out = subprocess.run(["rdma", "-j", "res", "show", "mr", "dev", DEV],
                         capture_output=True, text=True, check=True).stdout
    return [m["mrlen"] for m in json.loads(out or "[]") if m.get("pid") == os.getpid()]


def vm_pin():
    """The pages this process has pinned (VmPin, kB)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmPin:"))


def rereg_fails(mr, code, what, flags, pd, still_works, addr=0, length=0, access=0):
    """A reregistration that must fail with `code`, after which the MR
    works as before (`still_works`)."""
    try:
        mr.rereg(flags, pd, addr, length, access)
    except PyverbsRDMAError as err:
        check(err.error_code == code,
              f"{what}: {errno.errorcode.get(err.error_code, err.error_code)} "
              f"(want {errno.errorcode[code]})")
        check(still_works(), f"{what}: the MR works as before")
        return
    check(False, f"{what}: refused")


def main():
    gid_index = int(sys.argv[1])
    ctx = Context(name=DEV)
    pd1, pd2 = PD(ctx), PD(ctx)
    buf1 = mem_alloc.posix_memalign(2 * PAGE, PAGE)
    buf2 = mem_alloc.posix_memalign(2 * PAGE, PAGE)
    mem_alloc.write(buf1, bytes(2 * PAGE), 2 * PAGE)
    mem_alloc.write(buf2, bytes(2 * PAGE), 2 * PAGE)
    mr = MR(pd1, 2 * PAGE, LW, address=buf1)
    check(mr_lengths() == [2 * PAGE], "rdma res show lists the MR, 8192 bytes")

    def fresh(pd, rkey, addr, data=None, sge=None):
        """The status of one WRITE by a new pair of `pd` (an error
        completion leaves a pair's QPs in the error state)."""
        p = Pair(ctx, gid_index, pd)
        try:
            return p.write(rkey, addr, data, sge)
        finally:
            p.close()

    data = pattern(1, 256)
    check(fresh(pd1, mr.rkey, buf1, data) == e.IBV_WC_REM_ACCESS_ERR,
          "local-write-only MR: a remote WRITE is refused (REM_ACCESS_ERR)")

    # Rights, in place (the device's MODIFY_MR): the keys stay.
    old = (mr.lkey, mr.rkey)
    mr.rereg(ACCESS, pd1, 0, 0, RW)
    check((mr.lkey, mr.rkey) == old, "rereg of the rights: in place, the same keys")
    check(fresh(pd1, mr.rkey, buf1 + 100, data) == e.IBV_WC_SUCCESS,
          "rights now remote write: the WRITE lands")
    check(mem_alloc.read(buf1, 256, 100) == data, "the data is in the MR's memory")
    mr.rereg(ACCESS, pd1, 0, 0, LW)
    check(fresh(pd1, mr.rkey, buf1 + 100, pattern(6, 256)) == e.IBV_WC_REM_ACCESS_ERR
          and mem_alloc.read(buf1, 256, 100) == data,
          "rights back to local write: the same rkey is refused (REM_ACCESS_ERR)")
    mr.rereg(ACCESS, pd1, 0, 0, RW)
    check((mr.lkey, mr.rkey) == old, "and remote write again: still the same keys")

    # Memory: buf2 + 100, 5000 bytes; buf1 is no longer the MR's.
    old = mr.rkey
    mr.rereg(TRANS, pd1, buf2 + 100, 5000, 0)
    check(mr_lengths() == [5000], "rdma res show: the MR is 5000 bytes now")
    data = pattern(2, 512)
    check(fresh(pd1, mr.rkey, buf2 + 4096, data) == e.IBV_WC_SUCCESS,
          "new translation: a WRITE into the new memory lands")
    check(mem_alloc.read(buf2, 512, 4096) == data, "the data is in the new memory")
    check(mem_alloc.read(buf1, 512, 4096) == bytes(512), "the old memory is untouched")
    check(fresh(pd1, mr.rkey, buf1, data) == e.IBV_WC_REM_ACCESS_ERR,
          "a WRITE to the old memory's address is out of bounds (REM_ACCESS_ERR)")
    was = mem_alloc.read(buf1, 512, 0)
    check(fresh(pd1, old, buf1, data) == e.IBV_WC_REM_ACCESS_ERR
          and mem_alloc.read(buf1, 512, 0) == was,
          "the old rkey (remote write over the old memory) is dead")
    check(fresh(pd1, mr.rkey, buf2 + 100 + 5000 - 100, data) == e.IBV_WC_REM_ACCESS_ERR,
          "a WRITE past the new end is out of bounds (REM_ACCESS_ERR)")

    # PD, in place: pd2's QPs may use it, pd1's may not, remotely or locally.
    old = mr.rkey
    mr.rereg(CH_PD, pd2, 0, 0, 0)
    check(mr.rkey == old, "rereg of the PD: in place, the same keys")
    data = pattern(3, 128)
    check(fresh(pd1, mr.rkey, buf2 + 200, data) == e.IBV_WC_REM_ACCESS_ERR,
          "moved to another PD: a QP of the old PD is refused (REM_ACCESS_ERR)")
    check(fresh(pd2, mr.rkey, buf2 + 200, data) == e.IBV_WC_SUCCESS,
          "moved to another PD: a QP of the new PD writes")
    p = Pair(ctx, gid_index, pd1)
    status = p.write(p.dst.rkey, p.dst.buf, sge=SGE(buf2 + 200, 128, mr.lkey))
    p.close()
    check(status == e.IBV_WC_LOC_PROT_ERR,
          "moved to another PD: its lkey in a QP of the old PD is LOC_PROT_ERR")
    p = Pair(ctx, gid_index, pd2)
    status = p.write(p.dst.rkey, p.dst.buf, sge=SGE(buf2 + 200, 128, mr.lkey))
    check(status == e.IBV_WC_SUCCESS and p.dst.read(128, 0) == data,
          "moved to another PD: its lkey in a QP of the new PD is read")
    p.close()

    # All three at once, back where it began.
    mr.rereg(TRANS | CH_PD | ACCESS, pd1, buf1, 2 * PAGE, RW)
    data = pattern(4, 64)
    check(fresh(pd1, mr.rkey, buf1 + 8000, data) == e.IBV_WC_SUCCESS
          and mem_alloc.read(buf1, 64, 8000) == data,
          "memory, PD and rights changed in one call: the WRITE lands")

    # A change of PD to its own PD changes nothing (the core drops it).
    keys = (mr.lkey, mr.rkey)
    mr.rereg(CH_PD, pd1, 0, 0, 0)
    check((mr.lkey, mr.rkey) == keys, "rereg to its own PD: the same keys")

    # What IB forbids: each fails, and the MR is as it was (remote write
    # over buf1 in pd1).
    def works():
        data = pattern(6, 32)
        return (fresh(pd1, mr.rkey, buf1 + 64, data) == e.IBV_WC_SUCCESS
                and mem_alloc.read(buf1, 32, 64) == data)

    rereg_fails(mr, errno.EOPNOTSUPP, "rights with on-demand paging (no ODP)",
                ACCESS, pd1, works, access=RW | e.IBV_ACCESS_ON_DEMAND)
    rereg_fails(mr, errno.EINVAL, "remote write without local write", ACCESS, pd1, works,
                access=e.IBV_ACCESS_REMOTE_WRITE)
    rereg_fails(mr, errno.EFAULT, "memory that is not mapped", TRANS, pd1, works,
                addr=PAGE, length=PAGE)
    rereg_fails(mr, errno.EINVAL, "memory longer than max_mr_size", TRANS, pd1, works,
                addr=buf1, length=1 << 40)

    # Pages pinned read-only cannot become writable without pinning them again.
    ro = mem_alloc.mmap(length=PAGE, prot=mmap.PROT_READ | mmap.PROT_WRITE,
                        flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    mem_alloc.write(ro, pattern(7, 64), 64)
    libc = ctypes.CDLL(None, use_errno=True)
    check(libc.mprotect(ctypes.c_void_p(ro), PAGE, mmap.PROT_READ) == 0, "mprotect read-only")
    rmr = MR(pd1, PAGE, 0, address=ro)

    def ro_works():
        p = Pair(ctx, gid_index, pd1)
        status = p.write(p.dst.rkey, p.dst.buf, sge=SGE(ro, 64, rmr.lkey))
        ok = status == e.IBV_WC_SUCCESS and p.dst.read(64, 0) == pattern(7, 64)
        p.close()
        return ok

    rereg_fails(rmr, errno.EACCES, "write rights on pages pinned read-only", ACCESS, pd1,
                ro_works, access=LW)
    rmr.close()

    # Many reregistrations, half of them pinning other pages, leave one MR
    # and no more pinned pages than before.
    pinned = vm_pin()
    for i in range(200):
        if i % 2:
            mr.rereg(ACCESS, pd1, 0, 0, LW if i % 4 == 1 else RW)
        else:
            mr.rereg(TRANS, pd1, buf1 if i % 4 else buf2, 2 * PAGE, 0)
    check(mr_lengths() == [2 * PAGE], "200 reregistrations later: one MR of this process")
    check(vm_pin() == pinned, f"200 reregistrations later: {pinned} kB pinned as before")
    check(works(), "and it works")

    mr.close()
    pd1.close()
    pd2.close()
    ctx.close()
    print("OK")


main()
