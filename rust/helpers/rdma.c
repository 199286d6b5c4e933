// SPDX-License-Identifier: GPL-2.0

/*
 * Wrappers of the RDMA core's static inline functions for kernel::rdma
 * (rust/kernel/rdma.rs).
 */

#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>

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

#endif /* CONFIG_RUST_INFINIBAND_ABSTRACTIONS */
