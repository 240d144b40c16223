/* mbarrier helpers for sm_90 device code (shared-memory addresses as from __cvta_generic_to_shared):
 * the TMA-fed MoE GEMM (moe_experts_tma.cu) and the bulk normalization kernel (norm_bulk.cuh)
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

/* one arrival that also expects bytes of asynchronous copies (complete_tx) in this phase */
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, int bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
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
