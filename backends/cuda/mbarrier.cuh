/* mbarrier helpers for sm_90 device code (shared-memory addresses as from __cvta_generic_to_shared):
 * the TMA-fed GEMMs (moe_experts_tma.cu, ffn_wgmma_w4.cu), the attention kernels and the bulk
 * normalization kernel (norm_bulk.cuh)
 * count their asynchronous copies and consumers with them. */
#ifndef RUDNN_MBARRIER_CUH
#define RUDNN_MBARRIER_CUH

#include "gpu_compat.h"

namespace {

#if RUDNN_HAS_CLUSTERS && !RDG_HIP

__device__ __forceinline__ void mbar_init(uint32_t bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

/* makes this thread's mbarrier inits visible to the cluster (and the async proxy) before use */
__device__ __forceinline__ void mbar_fence_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/* the full / empty barrier pairs of a ring of stages (barrier s at full0 + 8 s and empty0 + 8 s),
 * from one thread, fenced for use: full counts its producer's arrivals, empty its consumers' */
__device__ __forceinline__ void mbar_init_ring(uint32_t full0, uint32_t empty0, int stages, int full_count,
                                               int empty_count)
{
    for (int s = 0; s < stages; s++) {
        mbar_init(full0 + 8 * s, full_count);
        mbar_init(empty0 + 8 * s, empty_count);
    }
    mbar_fence_init();
}

/* one arrival that also expects bytes of asynchronous copies (complete_tx) in this phase */
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, int bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/* bytes (a multiple of 16) from 16-byte aligned global src into shared dst by the async proxy,
 * counted (complete_tx) on bar. Earlier generic-proxy reads of dst need a fence.proxy.async first. */
__device__ __forceinline__ void bulk_copy_g2s(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}

/* waits until the phase with this parity has completed */
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "wait_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra wait_%=;\n"
                 "}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}

#endif

} // namespace

#endif
