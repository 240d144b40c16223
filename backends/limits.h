/* Limits of the operator contracts that kernels depend on, defined once. Macros only: ops/
 * validates against them, the CUDA/HIP kernels size their per-thread state by them, and the
 * OpenCL kernels get them from this file at build time. */
#ifndef RUDNN_LIMITS_H
#define RUDNN_LIMITS_H

/* Grouped sigmoid routing (rudnn_moe_route_sigmoid_grouped): a warp holds every group's score,
 * and each lane its share of the selected experts. */
#define RUDNN_MOE_GROUPED_MAX_EXPERTS 1024
#define RUDNN_MOE_GROUPED_MAX_GROUPS 128
#define RUDNN_MOE_GROUPED_MAX_TOP_K 64

#endif
