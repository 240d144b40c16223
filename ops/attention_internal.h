/* What the attention ops share (ops/attention.c, the forward; ops/attention_backward.c): the
 * arguments and the forward's checks, which the backward runs on the forward's tensors. */
#ifndef RUDNN_OPS_ATTENTION_INTERNAL_H
#define RUDNN_OPS_ATTENTION_INTERNAL_H

#include "rudnn/attention.h"
#include "validate.h"

typedef struct attn_args {
    rudnn_queue_t queue;
    const rudnn_tensor_t *q, *k, *v, *mask, *bias, *out, *lse;
    const rudnn_attention_options_t *options;
    rudnn_attention_strategy_t strategy;
} attn_args_t;

/* Every check of rudnn_attention before a kernel is chosen; fills plan. out may be NULL when
 * out_required is 0 (resolve, workspace_size). */
rudnn_status_t rudnn_attention_validate(const char *op, const attn_args_t *a, int out_required,
                                        rudnn_attention_plan_t *plan);

#endif
