/* What other ops/ files need of the MoE family's objects; ops/moe.c owns their layout. */
#ifndef RUDNN_OPS_MOE_INTERNAL_H
#define RUDNN_OPS_MOE_INTERNAL_H

#include "core/internal.h"
#include "rudnn/moe.h"

/* A dispatched object's shape and device arrays, with its routing plan's. */
typedef struct rudnn_dispatched_info {
    rudnn_context_t context;
    rudnn_dtype_t dtype;        /* of the dispatched rows */
    rudnn_dtype_t weight_dtype; /* of the routing weights (the logits dtype) */
    int64_t tokens, hidden, rows; /* rows = tokens x top_k */
    int32_t top_k, experts;
    rudnn_mem_ref_t positions; /* U32 [tokens x top_k]: the dispatched row of each (token, slot) */
    rudnn_mem_ref_t weights;   /* [tokens, top_k] in weight_dtype */
} rudnn_dispatched_info_t;

void rudnn_dispatched_info(rudnn_dispatched_t d, rudnn_dispatched_info_t *info);

/* What ops/moe_train.c reads of SwiGLU experts: their context, dtype, shape and weights. */
typedef struct rudnn_swiglu_experts_info {
    rudnn_context_t context;
    rudnn_dtype_t dtype;
    int64_t experts, inter, hidden;
    const rudnn_tensor_t *gate, *up, *down; /* [E, I, H], [E, I, H], [E, H, I]: owned by the experts */
} rudnn_swiglu_experts_info_t;

void rudnn_swiglu_experts_info(rudnn_swiglu_experts_t x, rudnn_swiglu_experts_info_t *info);

#endif
