// SPDX-License-Identifier: GPL-2.0

/*
 * Wrappers of the RDMA core's static inline functions for kernel::rdma
 * (rust/kernel/rdma.rs), and of the netdevice ones its RoCE port binding
 * uses.
 */

#include <linux/netdevice.h>
#include <net/netlink.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>
#include <rdma/iter.h>

#ifdef CONFIG_RUST_INFINIBAND_ABSTRACTIONS

__rust_helper int rust_helper_ib_umem_offset(struct ib_umem *umem)
{
	return ib_umem_offset(umem);
}

__rust_helper size_t rust_helper_ib_umem_num_dma_blocks(struct ib_umem *umem,
							 unsigned long pgsz)
{
	return ib_umem_num_dma_blocks(umem, pgsz);
}

__rust_helper struct ib_umem *rust_helper_ib_umem_get_va(struct ib_device *device,
							unsigned long addr,
							size_t size, int access)
{
	return ib_umem_get_va(device, addr, size, access);
}

__rust_helper void
rust_helper___rdma_umem_block_iter_start(struct ib_block_iter *biter,
					 struct ib_umem *umem,
					 unsigned long pgsz)
{
	__rdma_umem_block_iter_start(biter, umem, pgsz);
}

__rust_helper bool
rust_helper___rdma_umem_block_iter_next(struct ib_block_iter *biter)
{
	return __rdma_umem_block_iter_next(biter);
}

__rust_helper u64
rust_helper_rdma_block_iter_dma_address(struct ib_block_iter *biter)
{
	return rdma_block_iter_dma_address(biter);
}

__rust_helper u64 rust_helper_ib_dma_map_single(struct ib_device *dev,
						void *cpu_addr, size_t size,
						enum dma_data_direction direction)
{
	return ib_dma_map_single(dev, cpu_addr, size, direction);
}

__rust_helper void rust_helper_ib_dma_unmap_single(struct ib_device *dev,
						   u64 addr, size_t size,
						   enum dma_data_direction direction)
{
	ib_dma_unmap_single(dev, addr, size, direction);
}

__rust_helper int rust_helper_ib_dma_mapping_error(struct ib_device *dev,
						   u64 dma_addr)
{
	return ib_dma_mapping_error(dev, dma_addr);
}

__rust_helper void
rust_helper_ib_dma_sync_single_for_device(struct ib_device *dev, u64 addr,
					  size_t size,
					  enum dma_data_direction dir)
{
	ib_dma_sync_single_for_device(dev, addr, size, dir);
}

__rust_helper enum ib_port_state
rust_helper_ib_get_curr_port_state(struct net_device *ndev)
{
	return ib_get_curr_port_state(ndev);
}

__rust_helper enum ib_mtu rust_helper_iboe_get_mtu(int mtu)
{
	return iboe_get_mtu(mtu);
}

__rust_helper struct net_device *
rust_helper_netdev_notifier_info_to_dev(const struct netdev_notifier_info *info)
{
	return netdev_notifier_info_to_dev(info);
}

__rust_helper void rust_helper_dev_put(struct net_device *dev)
{
	dev_put(dev);
}

/* The nest of a resource's driver attributes (rdma res show -dd). */
__rust_helper struct nlattr *rust_helper_nla_nest_start(struct sk_buff *skb,
							int attrtype)
{
	return nla_nest_start(skb, attrtype);
}

__rust_helper void rust_helper_nla_nest_end(struct sk_buff *skb,
					    struct nlattr *start)
{
	nla_nest_end(skb, start);
}

__rust_helper void rust_helper_nla_nest_cancel(struct sk_buff *skb,
					       struct nlattr *start)
{
	nla_nest_cancel(skb, start);
}

#endif /* CONFIG_RUST_INFINIBAND_ABSTRACTIONS */
