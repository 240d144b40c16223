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

/* Views of every device array a dispatched object owns or reads (its tokens, counts, expert offsets,
 * positions, row tokens, and its routing plan's indices and weights), named for messages: no output
 * or workspace of a call on the object may lie on them. */
#define RUDNN_DISPATCHED_ARRAYS 7
extern const char *const rudnn_dispatched_array_names[RUDNN_DISPATCHED_ARRAYS];
void rudnn_dispatched_arrays(rudnn_dispatched_t d, rudnn_tensor_t views[RUDNN_DISPATCHED_ARRAYS]);

/* BAD_PARAM naming arg and the array when t overlaps one of the dispatched object's arrays. */
rudnn_status_t rudnn_check_off_dispatched(const char *op, const char *arg, const rudnn_tensor_t *t,
                                          rudnn_dispatched_t d);
/* Appends the n-th onward entries of a rudnn_check_workspace list: fills views with the dispatched object's
 * arrays, points tensors[n + i] at views[i] and names[n + i] at its name; returns n + RUDNN_DISPATCHED_ARRAYS.
 * A workspace must meet none of them. */
int rudnn_dispatched_arrays_append(rudnn_dispatched_t d, rudnn_tensor_t views[RUDNN_DISPATCHED_ARRAYS],
                                   const rudnn_tensor_t **tensors, const char **names, int n);

/* A routing plan's shape. */
typedef struct rudnn_routing_plan_info {
    rudnn_context_t context;
    rudnn_dtype_t weight_dtype;
    int64_t tokens;
    int32_t experts, top_k;
} rudnn_routing_plan_info_t;

void rudnn_routing_plan_info(rudnn_routing_plan_t p, rudnn_routing_plan_info_t *info);
/* One more reference (rudnn_routing_plan_destroy drops one). */
void rudnn_routing_plan_retain(rudnn_routing_plan_t p);

/* A routing plan of this shape whose indices and weights (weight_dtype) the caller fills: one pool
 * block on queue, the indices U32 [tokens, top_k] then the weights (rudnn_routing_plan_indices and
 * _weights give their views). */
rudnn_status_t rudnn_routing_plan_create(const char *op, rudnn_queue_t queue, int64_t tokens, int32_t experts,
                                         int32_t top_k, rudnn_dtype_t weight_dtype, rudnn_routing_plan_t *out);

/* What ops/moe_train.c reads of SwiGLU experts: their context, dtype, shape and weights. */
typedef struct rudnn_swiglu_experts_info {
    rudnn_context_t context;
    rudnn_dtype_t dtype;
    int64_t experts, inter, hidden;
    const rudnn_tensor_t *gate, *up, *down; /* [E, I, H], [E, I, H], [E, H, I]: owned by the experts */
} rudnn_swiglu_experts_info_t;

void rudnn_swiglu_experts_info(rudnn_swiglu_experts_t x, rudnn_swiglu_experts_info_t *info);

#endif
