// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests of virtio_rdma's kernel verbs, against the real device: the
 * suite finds the RDMA device that virtio_rdma registered and drives it
 * through the RDMA core's verbs API, as a kernel ULP would. Load it after
 * virtio_rdma (tools/testing/kunit.modules).
 */

#include <kunit/test.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/device.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/rtnetlink.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>
#include <rdma/restrack.h>

static struct ib_device *vrdma_dev;

static int vrdma_test_add(struct ib_device *ibdev)
{
	struct device *parent = ibdev->dev.parent;

	if (!vrdma_dev && parent && parent->driver &&
	    !strcmp(parent->driver->name, "virtio_rdma"))
		vrdma_dev = ibdev;
	return 0;
}

static void vrdma_test_remove(struct ib_device *ibdev, void *client_data)
{
	if (ibdev == vrdma_dev)
		vrdma_dev = NULL;
}

static struct ib_client vrdma_test_client = {
	.name = "virtio_rdma_verbs_test",
	.add = vrdma_test_add,
	.remove = vrdma_test_remove,
	/*
	 * A kverbs client: the core adds it only to devices with every verb a
	 * kernel ULP needs (ib_device_check_mandatory), so a device missing
	 * one fails every case with "no virtio_rdma device".
	 */
};

static int vrdma_suite_init(struct kunit_suite *suite)
{
	return ib_register_client(&vrdma_test_client);
}

static void vrdma_suite_exit(struct kunit_suite *suite)
{
	ib_unregister_client(&vrdma_test_client);
}

static struct ib_device *get_dev(struct kunit *test)
{
	KUNIT_ASSERT_NOT_NULL_MSG(test, vrdma_dev, "no virtio_rdma device");
	return vrdma_dev;
}

static void comp_handler(struct ib_cq *cq, void *ctx)
{
}

static struct ib_cq *create_cq(struct ib_device *dev, int cqe)
{
	struct ib_cq_init_attr attr = { .cqe = cqe };

	return ib_create_cq(dev, comp_handler, NULL, NULL, &attr);
}

static void device_attributes(struct kunit *test)
{
	struct ib_device *dev = get_dev(test);
	struct ib_port_attr port;

	KUNIT_EXPECT_EQ(test, dev->node_type, RDMA_NODE_IB_CA);
	KUNIT_EXPECT_EQ(test, rdma_end_port(dev), 1);
	KUNIT_EXPECT_TRUE(test, rdma_protocol_roce_udp_encap(dev, 1));
	KUNIT_EXPECT_GT(test, dev->attrs.max_cq, 0);
	KUNIT_EXPECT_GT(test, dev->attrs.max_cqe, 0);
	KUNIT_EXPECT_TRUE(test, dev->attrs.page_size_cap & SZ_4K);
	KUNIT_ASSERT_EQ(test, ib_query_port(dev, 1, &port), 0);
	KUNIT_EXPECT_GT(test, port.gid_tbl_len, 0);
	KUNIT_EXPECT_EQ(test, port.pkey_tbl_len, 1);
	KUNIT_EXPECT_EQ(test, ib_query_port(dev, 2, &port), -EINVAL);
}

static void pd_alloc_dealloc(struct kunit *test)
{
	struct ib_device *dev = get_dev(test);
	struct ib_pd *pd[8];
	int i;

	for (i = 0; i < ARRAY_SIZE(pd); i++) {
		pd[i] = ib_alloc_pd(dev, 0);
		KUNIT_ASSERT_FALSE(test, IS_ERR(pd[i]));
		/* Kernel PDs carry an lkey for DMA addresses (GET_DMA_MR). */
		KUNIT_EXPECT_NE(test, pd[i]->local_dma_lkey, 0);
	}
	for (i = 0; i < ARRAY_SIZE(pd); i++)
		ib_dealloc_pd(pd[i]);
}

static void cq_create_poll_arm(struct kunit *test)
{
	struct ib_device *dev = get_dev(test);
	struct ib_wc wc[4];
	struct ib_cq *cq;

	cq = create_cq(dev, 16);
	KUNIT_ASSERT_FALSE(test, IS_ERR(cq));
	KUNIT_EXPECT_GE(test, cq->cqe, 16);
	/* Nothing completed: polling finds nothing, arming reports nothing missed. */
	KUNIT_EXPECT_EQ(test, ib_poll_cq(cq, ARRAY_SIZE(wc), wc), 0);
	KUNIT_EXPECT_EQ(test, ib_req_notify_cq(cq, IB_CQ_NEXT_COMP |
					       IB_CQ_REPORT_MISSED_EVENTS), 0);
	KUNIT_EXPECT_EQ(test, ib_req_notify_cq(cq, IB_CQ_SOLICITED), 0);
	KUNIT_EXPECT_EQ(test, ib_poll_cq(cq, ARRAY_SIZE(wc), wc), 0);
	ib_destroy_cq(cq);
}

static void cq_bad_sizes(struct kunit *test)
{
	struct ib_device *dev = get_dev(test);
	struct ib_cq *cq;

	cq = create_cq(dev, dev->attrs.max_cqe + 1);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(cq), -EINVAL);
	if (!IS_ERR(cq))
		ib_destroy_cq(cq);
	cq = create_cq(dev, dev->attrs.max_cqe);
	KUNIT_ASSERT_FALSE(test, IS_ERR(cq));
	KUNIT_EXPECT_EQ(test, cq->cqe, dev->attrs.max_cqe);
	ib_destroy_cq(cq);
}

/* Every CQ of the device at once, then one more; all come back for reuse. */
static void cq_exhaustion_and_reuse(struct kunit *test)
{
	struct ib_device *dev = get_dev(test);
	/* Kernel ULPs (ib_mad's GSI CQ) hold some of the device's CQs. */
	int n = dev->attrs.max_cq - rdma_restrack_count(dev, RDMA_RESTRACK_CQ, false);
	struct ib_cq **cqs, *extra;
	int i, round;

	KUNIT_ASSERT_GT(test, n, 0);
	cqs = kunit_kcalloc(test, n, sizeof(*cqs), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, cqs);
	for (round = 0; round < 3; round++) {
		for (i = 0; i < n; i++) {
			cqs[i] = create_cq(dev, 64);
			KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(cqs[i]),
					       "round %d, CQ %d of %d: %ld", round,
					       i, n, PTR_ERR(cqs[i]));
		}
		extra = create_cq(dev, 64);
		KUNIT_EXPECT_TRUE(test, IS_ERR(extra));
		if (!IS_ERR(extra))
			ib_destroy_cq(extra);
		for (i = 0; i < n; i++)
			ib_destroy_cq(cqs[i]);
	}
}

/* A full-size CQ created and destroyed many times: its buffers come back. */
static void cq_churn(struct kunit *test)
{
	struct ib_device *dev = get_dev(test);
	struct ib_cq *cq;
	int i;

	for (i = 0; i < 20; i++) {
		cq = create_cq(dev, dev->attrs.max_cqe);
		KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(cq), "iteration %d: %ld", i,
				       PTR_ERR(cq));
		ib_destroy_cq(cq);
	}
}

/* Two connected QPs of one device, each with its CQ and a 4 KiB buffer. */
struct qp_pair {
	struct ib_device *dev;
	struct ib_pd *pd;
	struct ib_cq *cq[2];
	struct ib_qp *qp[2];
	struct ib_ah *ah;
	struct ib_mr *mr;
	struct page *pages[2];
	struct scatterlist sgl[2];
	bool sg_mapped;
	union ib_gid gid;
	u8 *buf[2];
	u64 dma[2];
	struct completion armed_done;
	/* Asynchronous events (hard-IRQ context): the last one of each QP/CQ, or -1. */
	int qp_event[2];
	int cq_event[2];
	struct completion event_done;
};

#define BUF_LEN 4096
#define UD_QKEY 0x11111111
#define POLL_MS 3000

static void pair_comp_handler(struct ib_cq *cq, void *ctx)
{
	struct qp_pair *p = ctx;

	complete(&p->armed_done);
}

/* The QPs' and CQs' event handler: records the last event of each. */
static void pair_event(struct ib_event *event, void *ctx)
{
	struct qp_pair *p = ctx;
	bool cq = event->event == IB_EVENT_CQ_ERR;
	int i;

	for (i = 0; i < 2; i++) {
		if (cq && event->element.cq == p->cq[i])
			WRITE_ONCE(p->cq_event[i], event->event);
		if (!cq && event->element.qp == p->qp[i])
			WRITE_ONCE(p->qp_event[i], event->event);
	}
	complete(&p->event_done);
}

static void pair_release(void *data)
{
	struct qp_pair *p = data;
	int i;

	if (!IS_ERR_OR_NULL(p->ah))
		rdma_destroy_ah(p->ah, RDMA_DESTROY_AH_SLEEPABLE);
	if (!IS_ERR_OR_NULL(p->mr))
		ib_dereg_mr(p->mr);
	if (p->sg_mapped)
		ib_dma_unmap_sg(p->dev, p->sgl, 2, DMA_BIDIRECTIONAL);
	for (i = 0; i < 2; i++) {
		if (p->pages[i])
			__free_page(p->pages[i]);
	}
	for (i = 0; i < 2; i++) {
		if (!IS_ERR_OR_NULL(p->qp[i]))
			ib_destroy_qp(p->qp[i]);
	}
	for (i = 0; i < 2; i++) {
		if (!IS_ERR_OR_NULL(p->cq[i]))
			ib_destroy_cq(p->cq[i]);
		if (p->dma[i])
			ib_dma_unmap_single(p->dev, p->dma[i], BUF_LEN,
					    DMA_BIDIRECTIONAL);
		kfree(p->buf[i]);
	}
	if (!IS_ERR_OR_NULL(p->pd))
		ib_dealloc_pd(p->pd);
}

/* Waits until the port's GID 0 (link-local, from eth0) is there. */
static int wait_gid(struct ib_device *dev, union ib_gid *gid)
{
	int i;

	for (i = 0; i < 100; i++) {
		if (!rdma_query_gid(dev, 1, 0, gid) &&
		    memchr_inv(gid, 0, sizeof(*gid)))
			return 0;
		msleep(50);
	}
	return -ETIMEDOUT;
}

static int modify(struct ib_qp *qp, struct ib_qp_attr *attr, int mask)
{
	return ib_modify_qp(qp, attr, mask);
}

/* RESET -> INIT -> RTR -> RTS, towards dest_qpn on the same device. */
static int connect_qp(struct ib_qp *qp, u32 dest_qpn, union ib_gid *gid,
		      u8 rnr_retry)
{
	struct ib_qp_attr attr = {};
	int ret;

	attr.qp_state = IB_QPS_INIT;
	attr.pkey_index = 0;
	attr.port_num = 1;
	attr.qp_access_flags = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
			       IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC;
	ret = modify(qp, &attr, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT |
			  IB_QP_ACCESS_FLAGS);
	if (ret)
		return ret;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTR;
	attr.path_mtu = IB_MTU_1024;
	attr.dest_qp_num = dest_qpn;
	attr.rq_psn = 0;
	attr.max_dest_rd_atomic = 1;
	attr.min_rnr_timer = 1;
	attr.ah_attr.type = rdma_ah_find_type(qp->device, 1);
	rdma_ah_set_port_num(&attr.ah_attr, 1);
	rdma_ah_set_grh(&attr.ah_attr, gid, 0, 0, 64, 0);
	ret = modify(qp, &attr, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
			  IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			  IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	if (ret)
		return ret;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTS;
	attr.sq_psn = 0;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = rnr_retry;
	attr.max_rd_atomic = 1;
	return modify(qp, &attr, IB_QP_STATE | IB_QP_SQ_PSN | IB_QP_TIMEOUT |
			  IB_QP_RETRY_CNT | IB_QP_RNR_RETRY |
			  IB_QP_MAX_QP_RD_ATOMIC);
}

/* RESET -> INIT -> RTR -> RTS for a UD QP. */
static int ready_ud_qp(struct ib_qp *qp)
{
	struct ib_qp_attr attr = {};
	int ret;

	attr.qp_state = IB_QPS_INIT;
	attr.pkey_index = 0;
	attr.port_num = 1;
	attr.qkey = UD_QKEY;
	ret = modify(qp, &attr, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT |
			  IB_QP_QKEY);
	if (ret)
		return ret;
	attr.qp_state = IB_QPS_RTR;
	ret = modify(qp, &attr, IB_QP_STATE);
	if (ret)
		return ret;
	attr.qp_state = IB_QPS_RTS;
	attr.sq_psn = 0;
	return modify(qp, &attr, IB_QP_STATE | IB_QP_SQ_PSN);
}

/* Two QPs of type on the device, each with its own CQ of cqe entries. */
static struct qp_pair *pair_setup_cqe(struct kunit *test, enum ib_qp_type type,
				      u8 rnr_retry, int cqe)
{
	struct ib_device *dev = get_dev(test);
	struct ib_qp_init_attr init = {};
	struct qp_pair *p;
	int i;

	p = kunit_kzalloc(test, sizeof(*p), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, p);
	p->dev = dev;
	init_completion(&p->armed_done);
	init_completion(&p->event_done);
	for (i = 0; i < 2; i++) {
		p->qp_event[i] = -1;
		p->cq_event[i] = -1;
	}
	KUNIT_ASSERT_EQ(test, kunit_add_action_or_reset(test, pair_release, p), 0);
	KUNIT_ASSERT_EQ_MSG(test, wait_gid(dev, &p->gid), 0, "no GID on port 1");

	p->pd = ib_alloc_pd(dev, IB_PD_UNSAFE_GLOBAL_RKEY);
	KUNIT_ASSERT_FALSE(test, IS_ERR(p->pd));
	for (i = 0; i < 2; i++) {
		struct ib_cq_init_attr cq_attr = { .cqe = cqe };

		p->cq[i] = ib_create_cq(dev, pair_comp_handler, pair_event, p,
					&cq_attr);
		KUNIT_ASSERT_FALSE(test, IS_ERR(p->cq[i]));
		p->buf[i] = kzalloc(BUF_LEN, GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, p->buf[i]);
		p->dma[i] = ib_dma_map_single(dev, p->buf[i], BUF_LEN,
					      DMA_BIDIRECTIONAL);
		KUNIT_ASSERT_FALSE(test, ib_dma_mapping_error(dev, p->dma[i]));
	}
	for (i = 0; i < 2; i++) {
		init.send_cq = p->cq[i];
		init.recv_cq = p->cq[i];
		init.qp_type = type;
		init.sq_sig_type = IB_SIGNAL_REQ_WR;
		init.cap.max_send_wr = 32;
		init.cap.max_recv_wr = 32;
		init.cap.max_send_sge = 2;
		init.cap.max_recv_sge = 2;
		init.cap.max_inline_data = 64;
		init.event_handler = pair_event;
		init.qp_context = p;
		p->qp[i] = ib_create_qp(p->pd, &init);
		KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(p->qp[i]), "%ld",
				       PTR_ERR(p->qp[i]));
		KUNIT_EXPECT_GE(test, p->qp[i]->qp_num, 2);
	}
	for (i = 0; i < 2; i++) {
		if (type == IB_QPT_UD)
			KUNIT_ASSERT_EQ(test, ready_ud_qp(p->qp[i]), 0);
		else
			KUNIT_ASSERT_EQ(test, connect_qp(p->qp[i], p->qp[!i]->qp_num,
							 &p->gid, rnr_retry), 0);
	}
	return p;
}

static struct qp_pair *pair_setup(struct kunit *test, enum ib_qp_type type,
				  u8 rnr_retry)
{
	return pair_setup_cqe(test, type, rnr_retry, 64);
}

/* Waits up to POLL_MS for *slot to become an event; returns it, or -1. */
static int wait_async_event(struct qp_pair *p, int *slot)
{
	unsigned long end = jiffies + msecs_to_jiffies(POLL_MS);

	while (READ_ONCE(*slot) < 0 && time_before(jiffies, end))
		wait_for_completion_timeout(&p->event_done, msecs_to_jiffies(50));
	return READ_ONCE(*slot);
}

/* Polls one completion off cq, waiting for it up to POLL_MS. */
static int poll_one(struct ib_cq *cq, struct ib_wc *wc)
{
	int i, n;

	for (i = 0; i < POLL_MS; i++) {
		n = ib_poll_cq(cq, 1, wc);
		if (n)
			return n;
		usleep_range(500, 1000);
	}
	return 0;
}

static int post_recv(struct qp_pair *p, int side, u64 wr_id, u32 off, u32 len)
{
	struct ib_sge sge = {
		.addr = p->dma[side] + off,
		.length = len,
		.lkey = p->pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 };

	return ib_post_recv(p->qp[side], &wr, NULL);
}

static void sync_for_cpu(struct qp_pair *p, int side)
{
	ib_dma_sync_single_for_cpu(p->dev, p->dma[side], BUF_LEN,
				   DMA_BIDIRECTIONAL);
}

static void sync_for_device(struct qp_pair *p, int side)
{
	ib_dma_sync_single_for_device(p->dev, p->dma[side], BUF_LEN,
				      DMA_BIDIRECTIONAL);
}

static void rc_send_recv(struct kunit *test)
{
	struct qp_pair *p = pair_setup(test, IB_QPT_RC, 7);
	struct ib_sge sge = { .addr = p->dma[0], .length = 1000,
			      .lkey = p->pd->local_dma_lkey };
	struct ib_send_wr wr = { .wr_id = 0x5e4d, .sg_list = &sge,
				 .num_sge = 1, .opcode = IB_WR_SEND,
				 .send_flags = IB_SEND_SIGNALED };
	struct ib_wc wc;
	int i;

	for (i = 0; i < BUF_LEN; i++)
		p->buf[0][i] = i * 7 + 3;
	sync_for_device(p, 0);
	KUNIT_ASSERT_EQ(test, post_recv(p, 1, 0x7ec, 0, BUF_LEN), 0);
	KUNIT_ASSERT_EQ(test, ib_post_send(p->qp[0], &wr, NULL), 0);

	KUNIT_ASSERT_EQ(test, poll_one(p->cq[0], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, wc.opcode, IB_WC_SEND);
	KUNIT_EXPECT_EQ(test, wc.wr_id, 0x5e4d);
	KUNIT_EXPECT_PTR_EQ(test, wc.qp, p->qp[0]);

	KUNIT_ASSERT_EQ(test, poll_one(p->cq[1], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, wc.opcode, IB_WC_RECV);
	KUNIT_EXPECT_EQ(test, wc.wr_id, 0x7ec);
	KUNIT_EXPECT_EQ(test, wc.byte_len, 1000);
	KUNIT_EXPECT_PTR_EQ(test, wc.qp, p->qp[1]);
	sync_for_cpu(p, 1);
	KUNIT_EXPECT_EQ(test, memcmp(p->buf[0], p->buf[1], 1000), 0);
}

static void rc_send_inline_imm_and_event(struct kunit *test)
{
	struct qp_pair *p = pair_setup(test, IB_QPT_RC, 7);
	static const char msg[] = "inline data, 33 bytes long.....";
	struct ib_sge sge = { .addr = (uintptr_t)msg, .length = sizeof(msg) };
	struct ib_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				 .opcode = IB_WR_SEND_WITH_IMM,
				 .send_flags = IB_SEND_SIGNALED | IB_SEND_INLINE,
				 .ex.imm_data = cpu_to_be32(0x12345678) };
	struct ib_wc wc;

	KUNIT_ASSERT_EQ(test, post_recv(p, 1, 2, 0, BUF_LEN), 0);
	/* Armed: the receive's completion calls the handler. */
	KUNIT_ASSERT_EQ(test, ib_req_notify_cq(p->cq[1], IB_CQ_NEXT_COMP), 0);
	KUNIT_ASSERT_EQ(test, ib_post_send(p->qp[0], &wr, NULL), 0);
	KUNIT_EXPECT_NE(test, wait_for_completion_timeout(&p->armed_done,
							  msecs_to_jiffies(POLL_MS)), 0);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[1], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, wc.opcode, IB_WC_RECV);
	KUNIT_EXPECT_EQ(test, wc.byte_len, sizeof(msg));
	KUNIT_EXPECT_TRUE(test, wc.wc_flags & IB_WC_WITH_IMM);
	KUNIT_EXPECT_EQ(test, be32_to_cpu(wc.ex.imm_data), 0x12345678);
	sync_for_cpu(p, 1);
	KUNIT_EXPECT_EQ(test, memcmp(p->buf[1], msg, sizeof(msg)), 0);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[0], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
}

static void rc_write_read(struct kunit *test)
{
	struct qp_pair *p = pair_setup(test, IB_QPT_RC, 7);
	struct ib_sge sge = { .lkey = p->pd->local_dma_lkey };
	struct ib_rdma_wr wr = {
		.wr = { .sg_list = &sge, .num_sge = 1,
			.send_flags = IB_SEND_SIGNALED },
		.rkey = p->pd->unsafe_global_rkey,
	};
	struct ib_wc wc;
	int i;

	for (i = 0; i < BUF_LEN; i++)
		p->buf[0][i] = i ^ 0x5a;
	sync_for_device(p, 0);

	/* WRITE 2000 bytes into B at offset 100. */
	sge.addr = p->dma[0];
	sge.length = 2000;
	wr.wr.wr_id = 10;
	wr.wr.opcode = IB_WR_RDMA_WRITE;
	wr.remote_addr = p->dma[1] + 100;
	KUNIT_ASSERT_EQ(test, ib_post_send(p->qp[0], &wr.wr, NULL), 0);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[0], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, wc.opcode, IB_WC_RDMA_WRITE);
	sync_for_cpu(p, 1);
	KUNIT_EXPECT_EQ(test, memcmp(p->buf[1] + 100, p->buf[0], 2000), 0);
	KUNIT_EXPECT_EQ(test, p->buf[1][99], 0);

	/* WRITE_WITH_IMM consumes a receive of B. */
	KUNIT_ASSERT_EQ(test, post_recv(p, 1, 11, 0, 0), 0);
	wr.wr.wr_id = 12;
	wr.wr.opcode = IB_WR_RDMA_WRITE_WITH_IMM;
	wr.wr.ex.imm_data = cpu_to_be32(77);
	sge.length = 16;
	KUNIT_ASSERT_EQ(test, ib_post_send(p->qp[0], &wr.wr, NULL), 0);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[1], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, wc.opcode, IB_WC_RECV_RDMA_WITH_IMM);
	KUNIT_EXPECT_EQ(test, wc.wr_id, 11);
	KUNIT_EXPECT_EQ(test, be32_to_cpu(wc.ex.imm_data), 77);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[0], &wc), 1);

	/* READ B's bytes 1000..3000 into A at 2048 (after a clear). */
	memset(p->buf[0], 0, BUF_LEN);
	sync_for_device(p, 0);
	sge.addr = p->dma[0] + 2048;
	sge.length = 2000;
	wr.wr.wr_id = 13;
	wr.wr.opcode = IB_WR_RDMA_READ;
	wr.remote_addr = p->dma[1] + 1000;
	KUNIT_ASSERT_EQ(test, ib_post_send(p->qp[0], &wr.wr, NULL), 0);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[0], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, wc.opcode, IB_WC_RDMA_READ);
	KUNIT_EXPECT_EQ(test, wc.byte_len, 2000);
	sync_for_cpu(p, 0);
	KUNIT_EXPECT_EQ(test, memcmp(p->buf[0] + 2048, p->buf[1] + 1000, 2000), 0);
}

struct port_events {
	struct ib_event_handler handler;
	struct completion down, up;
};

static void port_event(struct ib_event_handler *handler, struct ib_event *event)
{
	struct port_events *ev = container_of(handler, struct port_events, handler);

	if (event->element.port_num != 1)
		return;
	if (event->event == IB_EVENT_PORT_ERR)
		complete(&ev->down);
	else if (event->event == IB_EVENT_PORT_ACTIVE)
		complete(&ev->up);
}

static int set_link(struct net_device *ndev, bool up)
{
	unsigned int flags;
	int ret;

	rtnl_lock();
	flags = netif_get_flags(ndev);
	ret = dev_change_flags(ndev, up ? flags | IFF_UP : flags & ~IFF_UP, NULL);
	rtnl_unlock();
	return ret;
}

/* The paired netdev going down and up reaches consumers as port events. */
static void port_events_follow_link(struct kunit *test)
{
	struct ib_device *dev = get_dev(test);
	struct net_device *ndev = ib_device_get_netdev(dev, 1);
	struct port_events *ev;
	struct ib_port_attr attr;

	KUNIT_ASSERT_NOT_NULL_MSG(test, ndev, "port 1 has no netdev");
	ev = kunit_kzalloc(test, sizeof(*ev), GFP_KERNEL);
	if (!ev)
		dev_put(ndev);
	KUNIT_ASSERT_NOT_NULL(test, ev);
	init_completion(&ev->down);
	init_completion(&ev->up);
	INIT_IB_EVENT_HANDLER(&ev->handler, dev, port_event);
	ib_register_event_handler(&ev->handler);

	KUNIT_EXPECT_EQ(test, set_link(ndev, false), 0);
	KUNIT_EXPECT_NE(test, wait_for_completion_timeout(&ev->down, 5 * HZ), 0);
	KUNIT_EXPECT_EQ(test, ib_query_port(dev, 1, &attr), 0);
	KUNIT_EXPECT_EQ(test, attr.state, IB_PORT_DOWN);
	KUNIT_EXPECT_EQ(test, set_link(ndev, true), 0);
	KUNIT_EXPECT_NE(test, wait_for_completion_timeout(&ev->up, 5 * HZ), 0);
	KUNIT_EXPECT_EQ(test, ib_query_port(dev, 1, &attr), 0);
	KUNIT_EXPECT_EQ(test, attr.state, IB_PORT_ACTIVE);

	ib_unregister_event_handler(&ev->handler);
	dev_put(ndev);
}

/* ib_mad attached: the port's GSI QP (QP1) is a real QP of the device. */
static void gsi_qp_attached(struct kunit *test)
{
	struct ib_device *dev = get_dev(test);

	KUNIT_EXPECT_TRUE(test, dev->kverbs_provider);
	KUNIT_EXPECT_GE(test, rdma_restrack_count(dev, RDMA_RESTRACK_QP, false), 1);
	KUNIT_EXPECT_TRUE(test, rdma_cap_ib_mad(dev, 1));
	KUNIT_EXPECT_TRUE(test, rdma_cap_ib_cm(dev, 1));
}

static void register_mr_access(struct kunit *test, struct qp_pair *p,
			       u64 wr_id, int access);

/* CMP_AND_SWP and FETCH_AND_ADD on B's memory, old values returned to A. */
static void rc_atomics(struct kunit *test)
{
	struct qp_pair *p = pair_setup(test, IB_QPT_RC, 7);
	struct ib_sge sge = { .addr = p->dma[0] + 64, .length = 8,
			      .lkey = p->pd->local_dma_lkey };
	struct ib_atomic_wr wr = {
		.wr = { .sg_list = &sge, .num_sge = 1,
			.send_flags = IB_SEND_SIGNALED },
		.remote_addr = p->dma[1] + 256,
		/* The core's global rkey grants remote read and write only. */
		.rkey = p->pd->unsafe_global_rkey,
	};
	u64 *remote = (u64 *)(p->buf[1] + 256), *local = (u64 *)(p->buf[0] + 64);
	struct scatterlist sg;
	struct ib_wc wc;

	if (p->dev->attrs.atomic_cap == IB_ATOMIC_NONE)
		kunit_skip(test, "the device offers no atomics");
	*remote = 1000;
	sync_for_device(p, 1);

	/* Without remote atomic access: refused, and the QP is lost. */
	wr.wr.wr_id = 20;
	wr.wr.opcode = IB_WR_ATOMIC_FETCH_AND_ADD;
	wr.compare_add = 1;
	KUNIT_ASSERT_EQ(test, ib_post_send(p->qp[0], &wr.wr, NULL), 0);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[0], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_REM_ACCESS_ERR);
	sync_for_cpu(p, 1);
	KUNIT_EXPECT_EQ(test, *remote, 1000);

	/* A fresh pair; B's buffer fast-registered with remote atomic access. */
	p = pair_setup(test, IB_QPT_RC, 7);
	remote = (u64 *)(p->buf[1] + 256);
	local = (u64 *)(p->buf[0] + 64);
	sge.addr = p->dma[0] + 64;
	sge.lkey = p->pd->local_dma_lkey;
	*remote = 1000;
	sync_for_device(p, 1);
	sg_init_table(&sg, 1);
	sg_dma_address(&sg) = p->dma[1];
	sg_dma_len(&sg) = BUF_LEN;
	p->mr = ib_alloc_mr(p->pd, IB_MR_TYPE_MEM_REG, 1);
	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(p->mr), "%ld", PTR_ERR(p->mr));
	KUNIT_ASSERT_EQ(test, ib_map_mr_sg(p->mr, &sg, 1, NULL, PAGE_SIZE), 1);
	register_mr_access(test, p, 19, IB_ACCESS_LOCAL_WRITE |
			   IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC);
	wr.rkey = p->mr->rkey;
	wr.remote_addr = p->mr->iova + 256;

	/* Compare matches: swapped, old value back. */
	wr.wr.wr_id = 21;
	wr.wr.opcode = IB_WR_ATOMIC_CMP_AND_SWP;
	wr.compare_add = 1000;
	wr.swap = 0x1122334455667788ULL;
	KUNIT_ASSERT_EQ(test, ib_post_send(p->qp[0], &wr.wr, NULL), 0);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[0], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, wc.opcode, IB_WC_COMP_SWAP);
	KUNIT_EXPECT_EQ(test, wc.wr_id, 21);
	sync_for_cpu(p, 0);
	sync_for_cpu(p, 1);
	KUNIT_EXPECT_EQ(test, *local, 1000);
	KUNIT_EXPECT_EQ(test, *remote, 0x1122334455667788ULL);

	/* Compare does not match: memory unchanged, current value back. */
	wr.wr.wr_id = 22;
	wr.compare_add = 5;
	wr.swap = 6;
	KUNIT_ASSERT_EQ(test, ib_post_send(p->qp[0], &wr.wr, NULL), 0);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[0], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	sync_for_cpu(p, 0);
	sync_for_cpu(p, 1);
	KUNIT_EXPECT_EQ(test, *local, 0x1122334455667788ULL);
	KUNIT_EXPECT_EQ(test, *remote, 0x1122334455667788ULL);

	/* FETCH_AND_ADD: the sum stays, the old value comes back. */
	wr.wr.wr_id = 23;
	wr.wr.opcode = IB_WR_ATOMIC_FETCH_AND_ADD;
	wr.compare_add = 0x10;
	KUNIT_ASSERT_EQ(test, ib_post_send(p->qp[0], &wr.wr, NULL), 0);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[0], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, wc.opcode, IB_WC_FETCH_ADD);
	sync_for_cpu(p, 0);
	sync_for_cpu(p, 1);
	KUNIT_EXPECT_EQ(test, *local, 0x1122334455667788ULL);
	KUNIT_EXPECT_EQ(test, *remote, 0x1122334455667798ULL);

	/* Misaligned target: a remote error, the QP goes to error. */
	wr.wr.wr_id = 24;
	wr.remote_addr = p->mr->iova + 257;
	KUNIT_ASSERT_EQ(test, ib_post_send(p->qp[0], &wr.wr, NULL), 0);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[0], &wc), 1);
	KUNIT_EXPECT_NE(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, wc.wr_id, 24);
}

static void rc_bad_lkey_and_flush(struct kunit *test)
{
	struct qp_pair *p = pair_setup(test, IB_QPT_RC, 7);
	struct ib_sge sge = { .addr = p->dma[0], .length = 64,
			      .lkey = 0xdead00 };
	struct ib_send_wr wr = { .wr_id = 20, .sg_list = &sge, .num_sge = 1,
				 .opcode = IB_WR_SEND,
				 .send_flags = IB_SEND_SIGNALED };
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	struct ib_wc wc;
	int i;

	KUNIT_ASSERT_EQ(test, ib_post_send(p->qp[0], &wr, NULL), 0);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[0], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_LOC_PROT_ERR);
	KUNIT_EXPECT_EQ(test, wc.wr_id, 20);

	/* Receives outstanding when a QP goes to error are flushed. */
	for (i = 0; i < 3; i++)
		KUNIT_ASSERT_EQ(test, post_recv(p, 1, 30 + i, 0, 64), 0);
	KUNIT_ASSERT_EQ(test, ib_modify_qp(p->qp[1], &attr, IB_QP_STATE), 0);
	for (i = 0; i < 3; i++) {
		KUNIT_ASSERT_EQ(test, poll_one(p->cq[1], &wc), 1);
		KUNIT_EXPECT_EQ(test, wc.status, IB_WC_WR_FLUSH_ERR);
		KUNIT_EXPECT_EQ(test, wc.wr_id, 30 + i);
	}
}

static void rc_remote_access_error(struct kunit *test)
{
	struct qp_pair *p = pair_setup(test, IB_QPT_RC, 7);
	struct ib_sge sge = { .addr = p->dma[0], .length = 64,
			      .lkey = p->pd->local_dma_lkey };
	struct ib_rdma_wr wr = {
		.wr = { .wr_id = 40, .sg_list = &sge, .num_sge = 1,
			.opcode = IB_WR_RDMA_WRITE,
			.send_flags = IB_SEND_SIGNALED },
		.remote_addr = p->dma[1],
		.rkey = 0xbad000,
	};
	struct ib_wc wc;

	KUNIT_ASSERT_EQ(test, ib_post_send(p->qp[0], &wr.wr, NULL), 0);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[0], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_REM_ACCESS_ERR);
	KUNIT_EXPECT_EQ(test, wc.wr_id, 40);

	/*
	 * The responder consumed no receive, so only an asynchronous event tells
	 * its consumer that it moved to error; the requester learnt it from the
	 * completion and gets no event.
	 */
	KUNIT_EXPECT_EQ(test, wait_async_event(p, &p->qp_event[1]),
			IB_EVENT_QP_ACCESS_ERR);
	KUNIT_EXPECT_EQ(test, READ_ONCE(p->qp_event[0]), -1);
}

/* A misaligned atomic is an invalid request for the responder. */
static void rc_atomic_request_error(struct kunit *test)
{
	struct qp_pair *p = pair_setup(test, IB_QPT_RC, 7);
	struct ib_sge sge = { .addr = p->dma[0], .length = 8,
			      .lkey = p->pd->local_dma_lkey };
	struct ib_atomic_wr wr = {
		.wr = { .wr_id = 45, .sg_list = &sge, .num_sge = 1,
			.opcode = IB_WR_ATOMIC_FETCH_AND_ADD,
			.send_flags = IB_SEND_SIGNALED },
		.remote_addr = p->dma[1] + 4,
		.compare_add = 1,
		.rkey = p->pd->unsafe_global_rkey,
	};
	struct ib_wc wc;

	KUNIT_ASSERT_EQ(test, ib_post_send(p->qp[0], &wr.wr, NULL), 0);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[0], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_REM_INV_REQ_ERR);
	KUNIT_EXPECT_EQ(test, wait_async_event(p, &p->qp_event[1]),
			IB_EVENT_QP_REQ_ERR);
	KUNIT_EXPECT_EQ(test, READ_ONCE(p->qp_event[0]), -1);
}

/*
 * A CQ of one entry that is never polled overruns on the second completion:
 * the CQ's consumer gets IB_EVENT_CQ_ERR and the QP's IB_EVENT_QP_FATAL.
 */
static void cq_overrun_events(struct kunit *test)
{
	struct qp_pair *p = pair_setup_cqe(test, IB_QPT_RC, 7, 1);
	struct ib_sge sge = { .addr = p->dma[0], .length = 8,
			      .lkey = p->pd->local_dma_lkey };
	struct ib_rdma_wr wr = {
		.wr = { .sg_list = &sge, .num_sge = 1,
			.opcode = IB_WR_RDMA_WRITE,
			.send_flags = IB_SEND_SIGNALED },
		.remote_addr = p->dma[1],
		.rkey = p->pd->unsafe_global_rkey,
	};
	int i;

	for (i = 0; i < 2; i++) {
		wr.wr.wr_id = 60 + i;
		KUNIT_ASSERT_EQ(test, ib_post_send(p->qp[0], &wr.wr, NULL), 0);
	}
	KUNIT_EXPECT_EQ(test, wait_async_event(p, &p->cq_event[0]), IB_EVENT_CQ_ERR);
	KUNIT_EXPECT_EQ(test, wait_async_event(p, &p->qp_event[0]), IB_EVENT_QP_FATAL);
	KUNIT_EXPECT_EQ(test, READ_ONCE(p->qp_event[1]), -1);
	KUNIT_EXPECT_EQ(test, READ_ONCE(p->cq_event[1]), -1);
}

static void rc_rnr_retry_exceeded(struct kunit *test)
{
	struct qp_pair *p = pair_setup(test, IB_QPT_RC, 0);
	struct ib_sge sge = { .addr = p->dma[0], .length = 64,
			      .lkey = p->pd->local_dma_lkey };
	struct ib_send_wr wr = { .wr_id = 50, .sg_list = &sge, .num_sge = 1,
				 .opcode = IB_WR_SEND,
				 .send_flags = IB_SEND_SIGNALED };
	struct ib_wc wc;

	/* No receive posted and no RNR retries. */
	KUNIT_ASSERT_EQ(test, ib_post_send(p->qp[0], &wr, NULL), 0);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[0], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_RNR_RETRY_EXC_ERR);
}

/* The request that fails is the one reported as bad; those before it run. */
static void post_reports_bad_wr(struct kunit *test)
{
	struct qp_pair *p = pair_setup(test, IB_QPT_RC, 7);
	struct ib_sge sge[3] = {};
	struct ib_rdma_wr wr[2] = {};
	const struct ib_send_wr *bad = NULL;
	struct ib_wc wc;
	int i;

	for (i = 0; i < 3; i++) {
		sge[i].addr = p->dma[0];
		sge[i].length = 8;
		sge[i].lkey = p->pd->local_dma_lkey;
	}
	for (i = 0; i < 2; i++) {
		wr[i].wr.wr_id = 60 + i;
		wr[i].wr.opcode = IB_WR_RDMA_WRITE;
		wr[i].wr.send_flags = IB_SEND_SIGNALED;
		wr[i].wr.sg_list = sge;
		wr[i].remote_addr = p->dma[1];
		wr[i].rkey = p->pd->unsafe_global_rkey;
	}
	wr[0].wr.num_sge = 1;
	wr[0].wr.next = &wr[1].wr;
	wr[1].wr.num_sge = 3;	/* more than max_send_sge */
	KUNIT_EXPECT_EQ(test, ib_post_send(p->qp[0], &wr[0].wr, &bad), -EINVAL);
	KUNIT_EXPECT_PTR_EQ(test, bad, &wr[1].wr);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[0], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.wr_id, 60);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, ib_poll_cq(p->cq[0], 1, &wc), 0);
}

/* UD: a datagram to the other QP through an address handle, GRH first. */
static void ud_send_recv(struct kunit *test)
{
	struct qp_pair *p = pair_setup(test, IB_QPT_UD, 0);
	struct rdma_ah_attr ah_attr = {};
	struct ib_sge sge = { .addr = p->dma[0], .length = 300,
			      .lkey = p->pd->local_dma_lkey };
	struct ib_ud_wr wr = {
		.wr = { .wr_id = 70, .sg_list = &sge, .num_sge = 1,
			.opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED },
		.remote_qkey = UD_QKEY,
	};
	struct ib_wc wc;
	int i;

	ah_attr.type = rdma_ah_find_type(p->dev, 1);
	rdma_ah_set_port_num(&ah_attr, 1);
	rdma_ah_set_grh(&ah_attr, &p->gid, 0, 0, 64, 0);
	rdma_get_ll_mac((struct in6_addr *)p->gid.raw, ah_attr.roce.dmac);
	p->ah = rdma_create_ah(p->pd, &ah_attr, RDMA_CREATE_AH_SLEEPABLE);
	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(p->ah), "%ld", PTR_ERR(p->ah));

	for (i = 0; i < 300; i++)
		p->buf[0][i] = 255 - i;
	sync_for_device(p, 0);
	KUNIT_ASSERT_EQ(test, post_recv(p, 1, 71, 0, 40 + 1024), 0);
	wr.ah = p->ah;
	wr.remote_qpn = p->qp[1]->qp_num;
	KUNIT_ASSERT_EQ(test, ib_post_send(p->qp[0], &wr.wr, NULL), 0);

	KUNIT_ASSERT_EQ(test, poll_one(p->cq[0], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, wc.wr_id, 70);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[1], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, wc.opcode, IB_WC_RECV);
	KUNIT_EXPECT_EQ(test, wc.wr_id, 71);
	KUNIT_EXPECT_EQ(test, wc.byte_len, 40 + 300);
	KUNIT_EXPECT_TRUE(test, wc.wc_flags & IB_WC_GRH);
	KUNIT_EXPECT_EQ(test, wc.src_qp, p->qp[0]->qp_num);
	sync_for_cpu(p, 1);
	KUNIT_EXPECT_EQ(test, memcmp(p->buf[1] + 40, p->buf[0], 300), 0);

	/* A send without an address handle is refused, not sent anywhere. */
	wr.ah = NULL;
	KUNIT_EXPECT_EQ(test, ib_post_send(p->qp[0], &wr.wr, NULL), -EINVAL);
}

/* Posts a REG_MR of p->mr on B with a new key; waits for its completion. */
static void register_mr_access(struct kunit *test, struct qp_pair *p,
			       u64 wr_id, int access)
{
	struct ib_reg_wr reg = {
		.wr = { .wr_id = wr_id, .opcode = IB_WR_REG_MR,
			.send_flags = IB_SEND_SIGNALED },
		.mr = p->mr,
		.access = access,
	};
	struct ib_wc wc;

	ib_update_fast_reg_key(p->mr, ib_inc_rkey(p->mr->rkey));
	reg.key = p->mr->rkey;
	KUNIT_ASSERT_EQ(test, ib_post_send(p->qp[1], &reg.wr, NULL), 0);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[1], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, wc.opcode, IB_WC_REG_MR);
	KUNIT_EXPECT_EQ(test, wc.wr_id, wr_id);
}

static void register_mr(struct kunit *test, struct qp_pair *p, u64 wr_id)
{
	register_mr_access(test, p, wr_id,
			   IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE);
}

/* A writes buf[0] at offset 2048 of B's fast-registered MR (across its pages). */
static enum ib_wc_status write_to_mr(struct kunit *test, struct qp_pair *p)
{
	struct ib_sge sge = { .addr = p->dma[0], .length = BUF_LEN,
			      .lkey = p->pd->local_dma_lkey };
	struct ib_rdma_wr wr = {
		.wr = { .wr_id = 81, .sg_list = &sge, .num_sge = 1,
			.opcode = IB_WR_RDMA_WRITE,
			.send_flags = IB_SEND_SIGNALED },
		.remote_addr = p->mr->iova + 2048,
		.rkey = p->mr->rkey,
	};
	struct ib_wc wc = {};

	KUNIT_EXPECT_EQ(test, ib_post_send(p->qp[0], &wr.wr, NULL), 0);
	KUNIT_EXPECT_EQ(test, poll_one(p->cq[0], &wc), 1);
	return wc.status;
}

/*
 * Fast registration: an MR over two separate pages, registered by a REG_MR
 * work request, written through its rkey, invalidated by SEND_WITH_INV and,
 * once registered again, by LOCAL_INV.
 */
static void rc_fast_reg_and_invalidate(struct kunit *test)
{
	struct qp_pair *p = pair_setup(test, IB_QPT_RC, 7);
	struct ib_send_wr inv = { .wr_id = 82, .opcode = IB_WR_SEND_WITH_INV,
				  .send_flags = IB_SEND_SIGNALED };
	struct ib_wc wc;
	u8 *page0, *page1;
	int i;

	KUNIT_EXPECT_TRUE(test, p->dev->attrs.device_cap_flags &
				IB_DEVICE_MEM_MGT_EXTENSIONS);
	for (i = 0; i < 2; i++) {
		p->pages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		KUNIT_ASSERT_NOT_NULL(test, p->pages[i]);
	}
	sg_init_table(p->sgl, 2);
	sg_set_page(&p->sgl[0], p->pages[0], PAGE_SIZE, 0);
	sg_set_page(&p->sgl[1], p->pages[1], PAGE_SIZE, 0);
	KUNIT_ASSERT_EQ(test, ib_dma_map_sg(p->dev, p->sgl, 2, DMA_BIDIRECTIONAL), 2);
	p->sg_mapped = true;

	p->mr = ib_alloc_mr(p->pd, IB_MR_TYPE_MEM_REG, 4);
	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(p->mr), "%ld", PTR_ERR(p->mr));
	KUNIT_ASSERT_EQ(test, ib_map_mr_sg(p->mr, p->sgl, 2, NULL, PAGE_SIZE), 2);
	KUNIT_EXPECT_EQ(test, p->mr->length, 2 * PAGE_SIZE);
	register_mr(test, p, 80);

	for (i = 0; i < BUF_LEN; i++)
		p->buf[0][i] = i * 13;
	sync_for_device(p, 0);
	KUNIT_EXPECT_EQ(test, write_to_mr(test, p), IB_WC_SUCCESS);
	dma_sync_sg_for_cpu(p->dev->dma_device, p->sgl, 2, DMA_BIDIRECTIONAL);
	page0 = page_address(p->pages[0]);
	page1 = page_address(p->pages[1]);
	KUNIT_EXPECT_EQ(test, memcmp(page0 + 2048, p->buf[0], 2048), 0);
	KUNIT_EXPECT_EQ(test, memcmp(page1, p->buf[0] + 2048, 2048), 0);
	KUNIT_EXPECT_EQ(test, page0[2047], 0);

	/* SEND_WITH_INV invalidates the rkey at B; B's completion says which. */
	KUNIT_ASSERT_EQ(test, post_recv(p, 1, 83, 0, BUF_LEN), 0);
	inv.ex.invalidate_rkey = p->mr->rkey;
	KUNIT_ASSERT_EQ(test, ib_post_send(p->qp[0], &inv, NULL), 0);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[0], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[1], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_TRUE(test, wc.wc_flags & IB_WC_WITH_INVALIDATE);
	KUNIT_EXPECT_EQ(test, wc.ex.invalidate_rkey, p->mr->rkey);

	/* Registered again, then invalidated locally: the rkey no longer works. */
	register_mr(test, p, 84);
	inv.wr_id = 85;
	inv.opcode = IB_WR_LOCAL_INV;
	inv.ex.invalidate_rkey = p->mr->rkey;
	KUNIT_ASSERT_EQ(test, ib_post_send(p->qp[1], &inv, NULL), 0);
	KUNIT_ASSERT_EQ(test, poll_one(p->cq[1], &wc), 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, wc.opcode, IB_WC_LOCAL_INV);
	KUNIT_EXPECT_EQ(test, write_to_mr(test, p), IB_WC_REM_ACCESS_ERR);
}

static struct kunit_case vrdma_verbs_cases[] = {
	KUNIT_CASE(device_attributes),
	KUNIT_CASE(pd_alloc_dealloc),
	KUNIT_CASE(cq_create_poll_arm),
	KUNIT_CASE(cq_bad_sizes),
	KUNIT_CASE(cq_exhaustion_and_reuse),
	KUNIT_CASE(cq_churn),
	KUNIT_CASE(rc_send_recv),
	KUNIT_CASE(rc_send_inline_imm_and_event),
	KUNIT_CASE(gsi_qp_attached),
	KUNIT_CASE(rc_write_read),
	KUNIT_CASE(rc_atomics),
	KUNIT_CASE(rc_bad_lkey_and_flush),
	KUNIT_CASE(rc_remote_access_error),
	KUNIT_CASE(rc_atomic_request_error),
	KUNIT_CASE(cq_overrun_events),
	KUNIT_CASE(rc_rnr_retry_exceeded),
	KUNIT_CASE(post_reports_bad_wr),
	KUNIT_CASE(ud_send_recv),
	KUNIT_CASE(rc_fast_reg_and_invalidate),
	/* Last: it takes eth0 down and up, which renews the port's GIDs. */
	KUNIT_CASE(port_events_follow_link),
	{}
};

static struct kunit_suite vrdma_verbs_suite = {
	.name = "virtio_rdma_verbs",
	.suite_init = vrdma_suite_init,
	.suite_exit = vrdma_suite_exit,
	.test_cases = vrdma_verbs_cases,
};
kunit_test_suite(vrdma_verbs_suite);

MODULE_DESCRIPTION("KUnit tests of virtio_rdma's kernel verbs, on the real device");
MODULE_LICENSE("GPL");
