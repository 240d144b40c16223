/* The MoE training family's kernel table (ops/moe_train.c checks and plans; include/rudnn/moe_train.h
 * has the contract). Included through backends/backend.h. */
#ifndef RUDNN_HAL_MOE_TRAIN_H
#define RUDNN_HAL_MOE_TRAIN_H

#include "moe.h" /* rudnn_moe_rows_plan_t */
#include "table.h"

/* One call of the router's weights or their backward: rows x experts logits, rows x top_k indices,
 * all contiguous. */
typedef struct rudnn_router_train_plan {
    rudnn_dtype_t dtype;       /* of logits and grad_logits: F32, F16 or BF16 */
    rudnn_dtype_t index_dtype; /* U32, I32 or I64 */
    int64_t rows;              /* >= 1 (ops/ skips empty calls) */
    int32_t experts;           /* >= 1 */
    int32_t top_k;             /* 1 ..= min(experts, RUDNN_MOE_TRAIN_MAX_TOP_K) */
    int32_t sigmoid;           /* 0: softmax over the row, 1: sigmoid of each logit */
    int32_t renormalize;
    float scale; /* finite, > 0 */
} rudnn_router_train_plan_t;

typedef struct rudnn_moe_train_kernels {
    uint32_t struct_size; /* sizeof(rudnn_moe_train_kernels_t) the plugin was built with */
    /* weights F32 [rows, top_k] */
    rudnn_status_t (*router_weights)(void *queue, const rudnn_router_train_plan_t *plan, rudnn_mem_ref_t logits,
                                     rudnn_mem_ref_t indices, rudnn_mem_ref_t weights);
    /* grad_weights F32 [rows, top_k]; grad_logits [rows, experts] in plan->dtype, every element written */
    rudnn_status_t (*router_backward)(void *queue, const rudnn_router_train_plan_t *plan, rudnn_mem_ref_t logits,
                                      rudnn_mem_ref_t indices, rudnn_mem_ref_t grad_weights,
                                      rudnn_mem_ref_t grad_logits);
    /* plan: dtype of the rows, weight_dtype of the weights, tokens >= 1, top_k, hidden, rows.
     * grad_expert[positions[t*k + j], :] = weights[t, j] * grad_out[t, :];
     * grad_weights F32 [t, j] = sum_h grad_out[t, h] * expert_out[positions[t*k + j], h] (plane: a work-group
     * tree a token; else one work-item a sum, h ascending) */
    rudnn_status_t (*combine_backward)(void *queue, const rudnn_moe_rows_plan_t *plan, int plane,
                                       rudnn_mem_ref_t expert_out, rudnn_mem_ref_t positions, rudnn_mem_ref_t weights,
                                       rudnn_mem_ref_t grad_out, rudnn_mem_ref_t grad_expert,
                                       rudnn_mem_ref_t grad_weights);
    /* grad_input[t, :] = sum_j grad_rows[positions[t*k + j], :] (FP32, slot order) */
    rudnn_status_t (*dispatch_backward)(void *queue, const rudnn_moe_rows_plan_t *plan, rudnn_mem_ref_t grad_rows,
                                        rudnn_mem_ref_t positions, rudnn_mem_ref_t grad_input);
    /* Entries appended later are optional: read them through RUDNN_KERNEL_ENTRY. */

    /* SwiGLU experts' training, Scalar (plan: dtype, experts, hidden, inter, rows >= 1; align unused).
     * tokens [rows, hidden] in dtype; offsets U32 [experts + 1]: expert e owns rows offsets[e] ..
     * offsets[e + 1]. reserve F32 [rows, 2 inter] = (g, u); act [rows, inter] in dtype (scratch) =
     * silu(g) u; out [rows, hidden] = act down^T. Sums in index order. */
    rudnn_status_t (*experts_forward_train)(void *queue, const rudnn_moe_rows_plan_t *plan, rudnn_mem_ref_t tokens,
                                            rudnn_mem_ref_t offsets, rudnn_mem_ref_t gate, rudnn_mem_ref_t up,
                                            rudnn_mem_ref_t down, rudnn_mem_ref_t reserve, rudnn_mem_ref_t act,
                                            rudnn_mem_ref_t out);
    /* work F32 [rows, 2 inter] (scratch: dg, du); grad_tokens [rows, hidden] in dtype; grad_gate, grad_up
     * F32 [experts, inter, hidden]; grad_down F32 [experts, hidden, inter] (zeros for an expert without
     * rows). The formulas of rudnn_swiglu_experts_backward; sums in index order, rows ascending. */
    rudnn_status_t (*experts_backward)(void *queue, const rudnn_moe_rows_plan_t *plan, rudnn_mem_ref_t tokens,
                                       rudnn_mem_ref_t offsets, rudnn_mem_ref_t gate, rudnn_mem_ref_t up,
                                       rudnn_mem_ref_t down, rudnn_mem_ref_t reserve, rudnn_mem_ref_t grad_out,
                                       rudnn_mem_ref_t work, rudnn_mem_ref_t grad_tokens, rudnn_mem_ref_t grad_gate,
                                       rudnn_mem_ref_t grad_up, rudnn_mem_ref_t grad_down);
} rudnn_moe_train_kernels_t;

/* A table shorter than this is refused (the family is then absent on that backend). */
#define rudnn_moe_train_kernels_min_size RUDNN_TABLE_END(rudnn_moe_train_kernels_t, dispatch_backward)

#endif
