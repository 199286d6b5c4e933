// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests of virtio_rdma's kernel verbs, against the real device: the
 * suite finds the RDMA device that virtio_rdma registered and drives it
 * through the RDMA core's verbs API, as a kernel ULP would. Load it after
 * virtio_rdma (tools/testing/kunit.modules).
 */

#include <kunit/test.h>
#include <linux/device.h>
#include <linux/module.h>
#include <rdma/ib_verbs.h>

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
	/* The device is tested before every verb a ULP needs is there. */
	.no_kverbs_req = 1,
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
	int n = dev->attrs.max_cq, i, round;
	struct ib_cq **cqs, *extra;

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

static struct kunit_case vrdma_verbs_cases[] = {
	KUNIT_CASE(device_attributes),
	KUNIT_CASE(pd_alloc_dealloc),
	KUNIT_CASE(cq_create_poll_arm),
	KUNIT_CASE(cq_bad_sizes),
	KUNIT_CASE(cq_exhaustion_and_reuse),
	KUNIT_CASE(cq_churn),
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
