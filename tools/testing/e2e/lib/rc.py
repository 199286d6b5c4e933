# SPDX-License-Identifier: GPL-2.0
"""RC queue pairs of one device for the pyverbs tests (rereg_mr.py,
resize_cq.py, xrc.py): two QPs connected to each other by GID."""

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.qp import QPAttr


def connect_pair(ctx, gid_index, a, b, access, reset=False, min_rnr_timer=12, rnr_retry=7):
    """Moves `a` and `b` (RC, or an XRC_SEND and its XRC_RECV, same device)
    to RTS, each the other's peer through the port's GID `gid_index`,
    granting `access` to the peer; with `reset`, from RESET (QPs that were
    connected, or failed)."""
    gid = ctx.query_gid(1, gid_index)
    for qp, peer in ((a, b), (b, a)):
        if reset:
            qp.modify(QPAttr(qp_state=e.IBV_QPS_RESET), e.IBV_QP_STATE)
        attr = QPAttr(port_num=1)
        attr.qp_access_flags = access
        gr = GlobalRoute(dgid=GID(str(gid)), sgid_index=gid_index, hop_limit=64)
        attr.ah_attr = AHAttr(port_num=1, is_global=1, gr=gr)
        attr.dest_qp_num = peer.qp_num
        attr.rq_psn = attr.sq_psn = 0
        attr.max_dest_rd_atomic = attr.max_rd_atomic = 1
        attr.min_rnr_timer, attr.timeout, attr.retry_cnt = min_rnr_timer, 14, 7
        attr.rnr_retry = rnr_retry
        qp.to_rts(attr)
