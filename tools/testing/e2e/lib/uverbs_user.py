# SPDX-License-Identifier: GPL-2.0
"""User verbs on virtio_rdma0 from a real process (used by ibv-devinfo.sh).

Through rdma-core (pyverbs, which loads the project's provider): the device
and port as the kernel reports them, a PD, a memory registration of user
pages, a CQ. Through raw uverbs commands on /dev/infiniband/uverbs0:
GET_CONTEXT with the driver's (empty) request, with garbage in it, and with
too little room for the driver's response; mmap of a context that has no
rings (every offset fails with EINVAL); extended QUERY_DEVICE with and
without provider data (data the driver does not know is refused). Exits non-zero on the first unmet
expectation.

usage: uverbs_user.py MAX_QP MAX_CQ MAX_QP_WR MAX_CQE
       uverbs_user.py hold FLAG [GONE]
                                   (a context, a PD, MRs, a CQ and a QP, held
                                    until killed; FLAG is written once they
                                    exist; with GONE, until the device goes)
"""

import ctypes
import errno
import mmap
import os
import struct
import sys
import time

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr

DEV = "virtio_rdma0"
UVERBS = "/dev/infiniband/uverbs0"


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}")
        sys.exit(1)
    print(f"ok: {what}")


def through_rdma_core(max_qp, max_cq, max_qp_wr, max_cqe):
    with Context(name=DEV) as ctx:
        attr = ctx.query_device()
        check(attr.max_qp == max_qp, f"max_qp {attr.max_qp} is the device's {max_qp}")
        check(attr.max_cq == max_cq, f"max_cq {attr.max_cq} is the device's {max_cq}")
        check(attr.max_qp_wr == max_qp_wr, f"max_qp_wr {attr.max_qp_wr}")
        check(attr.max_cqe == max_cqe, f"max_cqe {attr.max_cqe}")
        check(attr.phys_port_cnt == 1, "one port")
        port = ctx.query_port(1)
        check(port.state == e.IBV_PORT_ACTIVE, "port 1 active")
        check(port.link_layer == e.IBV_LINK_LAYER_ETHERNET, "port 1 is Ethernet (RoCE)")
        with PD(ctx) as pd:
            access = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
            with MR(pd, 3 * 4096 + 100, access) as mr:
                check(mr.lkey != 0 and mr.lkey == mr.rkey, f"user MR registered, key {mr.lkey:#x}")
                mr.write(b"virtio-rdma" * 10, 110)
                check(mr.read(11, 0) == b"virtio-rdma", "the registered pages hold the data")
            with CQ(ctx, 16) as cq:
                check(cq.cqe >= 16, f"user CQ of {cq.cqe} entries")
            # Memory windows (mw.sh binds them): an MR they can bind to registers;
            # on-demand paging is not supported (not invalid).
            check(attr.max_mw > 0, f"{attr.max_mw} memory windows")
            MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_MW_BIND).close()
            check(True, "an MR with IBV_ACCESS_MW_BIND registers")
            try:
                MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_ON_DEMAND).close()
                check(False, "an MR with IBV_ACCESS_ON_DEMAND is refused")
            except PyverbsRDMAError as err:
                check(err.error_code == errno.EOPNOTSUPP,
                      f"an MR with IBV_ACCESS_ON_DEMAND: {os.strerror(err.error_code)}")


# include/uapi/rdma/ib_user_verbs.h: the write() command interface.
IB_USER_VERBS_CMD_GET_CONTEXT = 0
CORE_RESP = 8      # struct ib_uverbs_get_context_resp
DRIVER_RESP = 8    # struct virtio_rdma_alloc_ucontext_resp
CAP_USER_QP = 1    # VIRTIO_RDMA_CAP_USER_QP
CAP_RINGS = 2      # VIRTIO_RDMA_CAP_RINGS


def get_context(driver_req, out_len, then=None):
    """GET_CONTEXT on a fresh fd, then then(fd) if given; returns (errno or 0,
    response bytes)."""
    resp = ctypes.create_string_buffer(b"\xee" * 64, 64)
    body = struct.pack("<Q", ctypes.addressof(resp)) + driver_req
    hdr = struct.pack("<IHH", IB_USER_VERBS_CMD_GET_CONTEXT, (8 + len(body)) // 4, out_len // 4)
    fd = os.open(UVERBS, os.O_RDWR)
    try:
        os.write(fd, hdr + body)
        rc = 0
        if then:
            then(fd)
    except OSError as ex:
        rc = ex.errno
    finally:
        os.close(fd)
    return rc, resp.raw


IB_USER_VERBS_CMD_FLAG_EXTENDED = 0x80000000
IB_USER_VERBS_EX_CMD_QUERY_DEVICE = 1


def ex_query_device(fd, driver_req):
    """Extended QUERY_DEVICE (which reaches the driver's query_device with
    the provider's data) on a context's fd; returns errno or 0."""
    resp = ctypes.create_string_buffer(512)
    hdr = struct.pack("<IHH", IB_USER_VERBS_CMD_FLAG_EXTENDED | IB_USER_VERBS_EX_CMD_QUERY_DEVICE,
                      1, len(resp) // 8)
    ex_hdr = struct.pack("<QHHI", ctypes.addressof(resp), len(driver_req) // 8, 0, 0)
    cmd = struct.pack("<II", 0, 0)  # comp_mask, reserved
    try:
        os.write(fd, hdr + ex_hdr + cmd + driver_req)
    except OSError as ex:
        return ex.errno
    return 0


def query_device_udata(fd):
    rc = ex_query_device(fd, b"")
    check(rc == 0, f"extended QUERY_DEVICE succeeds (errno {rc})")
    rc = ex_query_device(fd, b"\0" * 8)
    check(rc == 0, "QUERY_DEVICE with provider data of zeroes is accepted")
    rc = ex_query_device(fd, b"\xff" * 8)
    check(rc == errno.EOPNOTSUPP, f"QUERY_DEVICE with provider data the driver does not know is refused (errno {rc})")


def mmap_refused(fd):
    for offset, prot in ((0, mmap.PROT_READ | mmap.PROT_WRITE), (0, mmap.PROT_READ),
                         (7 * 4096, mmap.PROT_READ), (1 << 40, mmap.PROT_READ)):
        try:
            m = mmap.mmap(fd, 4096, mmap.MAP_SHARED, prot, offset=offset)
            m.close()
            check(False, f"mmap at offset {offset:#x} refused")
        except OSError as ex:
            check(ex.errno == errno.EINVAL, f"mmap at offset {offset:#x} refused (errno {ex.errno})")


def raw_uverbs(comp_vqs):
    """comp_vqs: the device's completion-event queues with queues in guest
    memory (0 without)."""
    rc, r = get_context(b"", CORE_RESP + DRIVER_RESP)
    check(rc == 0, f"GET_CONTEXT succeeds (errno {rc})")
    _, ncomp, caps = struct.unpack_from("<IIQ", r)
    check(ncomp == max(comp_vqs, 1), f"{max(comp_vqs, 1)} completion vector(s) ({ncomp})")
    want = CAP_USER_QP | (CAP_RINGS if comp_vqs else 0)
    check(caps == want, f"caps: user CQs, QPs and AHs{', rings' if comp_vqs else ''} ({caps:#x})")
    rc, _ = get_context(b"\0" * 16, CORE_RESP + DRIVER_RESP)
    check(rc == 0, "a longer request of zeroes is accepted (a newer provider)")
    rc, _ = get_context(b"\0" * 8 + b"\xff" * 8, CORE_RESP + DRIVER_RESP)
    check(rc == errno.EOPNOTSUPP, f"a request the driver does not know is refused (errno {rc})")
    rc, r = get_context(b"", CORE_RESP)
    check(rc == 0, "no room for the driver's response: the core part still comes")
    check(r[CORE_RESP:CORE_RESP + 8] == b"\xee" * 8, "nothing written past the room given")
    rc, _ = get_context(b"", CORE_RESP + DRIVER_RESP, mmap_refused)
    check(rc == 0, "the context stays usable after refused mappings")
    rc, _ = get_context(b"", CORE_RESP + DRIVER_RESP, query_device_udata)
    check(rc == 0, "QUERY_DEVICE checks")


def hold(flag, gone=None):
    """Holds a context, a PD, MRs, a CQ and a QP (the provider maps their
    rings) until killed or, with GONE, until the device goes away: then
    writes the errno its verbs fail with to GONE and exits."""
    ctx = Context(name=DEV)
    pd = PD(ctx)
    mrs = [MR(pd, 65536, e.IBV_ACCESS_LOCAL_WRITE) for _ in range(4)]
    cq = CQ(ctx, 16)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                           cap=QPCap(max_send_wr=4, max_recv_wr=4)))
    with open(flag, "w") as f:
        f.write(" ".join(f"{mr.lkey:#x}" for mr in mrs) + f" qp {qp.qp_num}")
    while True:
        time.sleep(0.2)
        if gone:
            try:
                ctx.query_port(1)
                PD(ctx).close()
            except PyverbsRDMAError as ex:
                with open(gone, "w") as f:
                    f.write(f"{ex.error_code}")
                return


if __name__ == "__main__":
    if sys.argv[1] == "hold":
        hold(*sys.argv[2:4])
        sys.exit(0)
    through_rdma_core(*(int(a) for a in sys.argv[1:5]))
    raw_uverbs(int(sys.argv[5]) if len(sys.argv) > 5 else 0)
