/* The MoE family's kernel table (hal/moe.h): routing in moe_route.cu, dispatch and combine in
 * moe_permute.cu, the SwiGLU experts in moe_experts.cu. */
#include "rdg_internal.h"

/* A table inside a host function: a namespace-scope const would be promoted to device memory by
 * HIP's compiler. */
const rudnn_moe_kernels_t *rdg_moe_table(void)
{
    static const rudnn_moe_kernels_t table = {
        (uint32_t)sizeof(rudnn_moe_kernels_t),
        rdg_moe_route_softmax,
        rdg_moe_route_sigmoid_grouped,
        rdg_moe_dispatch_plan,
        rdg_moe_dispatch_gather,
        rdg_moe_experts_scalar,
#if RDG_MOE_TENSOR_CORES
        rdg_moe_experts_tensor_core,
#else
        nullptr,
#endif
        rdg_moe_combine,
        nullptr, /* experts_tensor_core_workspace: the common size */
        nullptr, /* experts_tensor_core_auto: always where it runs */
    };
    return &table;
}
