/* The MoE family's kernel table (hal/moe.h): routing in moe_route.cu, dispatch and combine in
 * moe_permute.cu, the SwiGLU expert candidates in moe_experts.cu, the expert-parallel combine in
 * ep_combine.cu. */
#include <string.h>

#include "rdg_internal.h"

/* A table inside a host function: a namespace-scope const would be promoted to device memory by
 * HIP's compiler. */
static rudnn_moe_kernels_t make_moe_table(void)
{
    rudnn_moe_kernels_t table;
    memset(&table, 0, sizeof table);
    table.route_softmax = rdg_moe_route_softmax;
    table.route_sigmoid_grouped = rdg_moe_route_sigmoid_grouped;
    table.dispatch_plan = rdg_moe_dispatch_plan;
    table.dispatch_gather = rdg_moe_dispatch_gather;
    table.combine = rdg_moe_combine;
    table.experts_candidates = rdg_moe_experts_candidates(&table.experts_candidate_count);
    table.experts_check = rdg_moe_experts_check;
    table.experts_workspace = nullptr; /* act [rows, inter] for every candidate */
    table.experts_run = rdg_moe_experts_run;
    table.ep_combine_norm = rdg_ep_combine_norm;
    table.struct_size = (uint32_t)sizeof table;
    return table;
}

const rudnn_moe_kernels_t *rdg_moe_table(void)
{
    /* filled once: C++ initialises a function's static under its own lock */
    static rudnn_moe_kernels_t table = make_moe_table();
    return &table;
}
