/* Mixture of experts on one device: routing, dispatch, SwiGLU experts, combine.
 *
 *   logits [T, E] -> route (softmax top-k, or grouped sigmoid) -> routing plan
 *   input [T, H] + plan -> dispatch -> rows grouped by expert [T*k, H]
 *   dispatched rows -> SwiGLU experts -> expert output [T*k, H]
 *   expert output + plan -> combine (weighted, token order restored) -> [T, H]
 *
 * Plans and dispatched tokens are opaque objects owning device memory taken from
 * the queue's workspace pool (no allocation per call once warm). They may outlive that
 * queue (it is then kept until they go; see rudnn_context_destroy in rudnn/core.h), and
 * experts keep their weight buffers and context. The views they hand out stay valid until
 * they are destroyed.
 * Bad arguments return a status, set rudnn_last_error() and write nothing. */
#ifndef RUDNN_MOE_H
#define RUDNN_MOE_H

#include "rudnn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rudnn_routing_plan *rudnn_routing_plan_t;
typedef struct rudnn_dispatched *rudnn_dispatched_t;
typedef struct rudnn_swiglu_experts *rudnn_swiglu_experts_t;

/* ---- routing -------------------------------------------------------------- */

typedef struct rudnn_routing_options {
    int top_k;       /* 1 <= top_k <= E */
    int renormalize; /* divide the selected weights by their sum */
} rudnn_routing_options_t;

/* FP32 softmax over all E experts, then top-k (ties to the lower expert id).
 * logits: F32/F16/BF16 [T, E] (T may be 0). Weights are in the logits dtype.
 * A row with NaN or +inf, or all -inf, gets NaN weights; its experts are still
 * chosen deterministically (NaN ranks below every number, ties to lower ids). */
RUDNN_API rudnn_status_t rudnn_moe_route(rudnn_queue_t queue, const rudnn_tensor_t *logits,
                                         const rudnn_routing_options_t *options,
                                         rudnn_routing_plan_t *plan);

typedef struct rudnn_grouped_routing_options {
    int top_k;           /* 1..64, at most the experts of the selected groups */
    int groups;          /* 1..128, divides E */
    int selected_groups; /* 1..groups */
    int group_top_two;   /* group score = sum of its two largest scores (needs >= 2 experts/group) */
    int renormalize;     /* divide the selected sigmoid scores by their sum */
    float scale;         /* finite, > 0; multiplies the weights */
} rudnn_grouped_routing_options_t;

/* DeepSeek-V3 style: p = sigmoid(x), s = p + bias (selection only); groups
 * ranked by max s (or top-two sum), selected_groups chosen greedily, then top_k
 * experts by s inside them; weight = p (renormalized) * scale. E in 1..1024.
 * bias: F32 [E] or NULL. Ties go to the lower group / expert id. */
RUDNN_API rudnn_status_t rudnn_moe_route_sigmoid_grouped(rudnn_queue_t queue,
                                                         const rudnn_tensor_t *logits,
                                                         const rudnn_tensor_t *bias,
                                                         const rudnn_grouped_routing_options_t *options,
                                                         rudnn_routing_plan_t *plan);

RUDNN_API void rudnn_routing_plan_destroy(rudnn_routing_plan_t plan);
/* Views of the plan's device tensors: expert indices [T, top_k] U32 and
 * weights [T, top_k] in the logits dtype. */
RUDNN_API rudnn_status_t rudnn_routing_plan_indices(rudnn_routing_plan_t plan, rudnn_tensor_t *indices);
RUDNN_API rudnn_status_t rudnn_routing_plan_weights(rudnn_routing_plan_t plan, rudnn_tensor_t *weights);

/* ---- dispatch and combine ---------------------------------------------------- */

/* Groups the rows of input [T, H] (F32/F16/BF16) by expert; every selected
 * (token, slot) pair is kept (no capacity drop). Within an expert, rows are in
 * (token, slot) order, so the result is deterministic. */
RUDNN_API rudnn_status_t rudnn_moe_dispatch(rudnn_queue_t queue, rudnn_routing_plan_t plan,
                                            const rudnn_tensor_t *input, rudnn_dispatched_t *dispatched);
RUDNN_API void rudnn_dispatched_destroy(rudnn_dispatched_t dispatched);
/* tokens [T*top_k, H] (input dtype), rows of expert e at offsets[e] .. offsets[e+1]. */
RUDNN_API rudnn_status_t rudnn_dispatched_tokens(rudnn_dispatched_t dispatched, rudnn_tensor_t *tokens);
/* counts [E] U32 and offsets [E + 1] U32 (exclusive prefix sum of counts). */
RUDNN_API rudnn_status_t rudnn_dispatched_counts(rudnn_dispatched_t dispatched, rudnn_tensor_t *counts);
RUDNN_API rudnn_status_t rudnn_dispatched_offsets(rudnn_dispatched_t dispatched, rudnn_tensor_t *offsets);
/* positions [T, top_k] U32: the dispatched row of each (token, slot); restores token order. */
RUDNN_API rudnn_status_t rudnn_dispatched_positions(rudnn_dispatched_t dispatched,
                                                    rudnn_tensor_t *positions);

/* output[t] = sum_j weight[t, j] * expert_output[position[t, j]] (FP32 sum);
 * expert_output [T*top_k, H] and output [T, H] in the dispatched dtype. */
RUDNN_API rudnn_status_t rudnn_moe_combine(rudnn_queue_t queue, rudnn_dispatched_t dispatched,
                                           const rudnn_tensor_t *expert_output,
                                           const rudnn_tensor_t *output);

/* ---- SwiGLU experts -------------------------------------------------------------- */

typedef enum rudnn_moe_strategy {
    RUDNN_MOE_SCALAR = 0,      /* portable kernels, every backend */
    RUDNN_MOE_AUTO = 1,        /* TensorCore where supported and faster, else Scalar */
    RUDNN_MOE_TENSOR_CORE = 2, /* fp16/bf16 GEMM path: CUDA matrix units; OpenCL CLBlast
                                * (synchronises the queue once per forward) */
} rudnn_moe_strategy_t;

/* gate [E, I, H], up [E, I, H], down [E, H, I]: same float dtype and context,
 * no bias. The object refers to the caller's buffers and keeps them (and the
 * context) alive until it is destroyed; it is reused across batches. */
RUDNN_API rudnn_status_t rudnn_swiglu_experts_create(rudnn_context_t context,
                                                     const rudnn_tensor_t *gate,
                                                     const rudnn_tensor_t *up,
                                                     const rudnn_tensor_t *down,
                                                     rudnn_swiglu_experts_t *experts);
RUDNN_API void rudnn_swiglu_experts_destroy(rudnn_swiglu_experts_t experts);

/* Which strategy a request resolves to on this context (Auto resolved), or
 * NOT_SUPPORTED with the reason when an explicit strategy cannot run. It answers
 * for 256-byte-aligned forward operands (pooled ones are); rudnn_swiglu_experts_choose
 * answers for given ones. */
RUDNN_API rudnn_status_t rudnn_swiglu_experts_resolve(rudnn_swiglu_experts_t experts,
                                                      rudnn_moe_strategy_t requested,
                                                      rudnn_moe_strategy_t *resolved);

/* ---- which kernel runs ----------------------------------------------------------------
 * A backend offers its expert kernels by name ("moe.wgmma_tma", "moe.scalar", ...), most
 * preferred first; Auto takes the first that runs and is faster here, Scalar and TensorCore
 * the first of that strategy that runs. rudnn_last_kernel() names the one that ran. */

typedef struct rudnn_moe_choice {
    rudnn_moe_strategy_t strategy; /* the strategy that runs (Auto resolved) */
    const char *kernel;            /* the kernel that runs, as rudnn_last_kernel() names it */
    char reason[512];              /* why: the kernels passed over and the reason for each */
} rudnn_moe_choice_t;

/* What forward_dispatched(experts, dispatched, requested, ..., expert_output) runs: exactly that
 * kernel, or the same NOT_SUPPORTED. dispatched and expert_output may be NULL (any rows; an
 * output at a 256-byte-aligned offset). */
RUDNN_API rudnn_status_t rudnn_swiglu_experts_choose(rudnn_swiglu_experts_t experts,
                                                     rudnn_dispatched_t dispatched,
                                                     const rudnn_tensor_t *expert_output,
                                                     rudnn_moe_strategy_t requested,
                                                     rudnn_moe_choice_t *choice);

/* The backend's expert kernels: count, then name and strategy of each, most preferred first.
 * Some run only when named (comparison paths such as the CUDA plugin's cuBLAS GEMMs). */
RUDNN_API rudnn_status_t rudnn_swiglu_experts_kernel_count(rudnn_swiglu_experts_t experts, int *count);
RUDNN_API rudnn_status_t rudnn_swiglu_experts_kernel_info(rudnn_swiglu_experts_t experts, int index,
                                                          const char **name,
                                                          rudnn_moe_strategy_t *strategy);

/* Names the kernel every later call on these experts runs (NULL: choose by strategy again). A
 * call whose strategy is not the kernel's (Auto accepts any), or that the kernel cannot run,
 * returns NOT_SUPPORTED saying why; it never runs another kernel. May be called while other
 * threads run forwards of the same experts: each call reads the setting once, so it runs the
 * kernel named before or the one named after. An unknown name is BAD_PARAM listing the known
 * ones. */
RUDNN_API rudnn_status_t rudnn_swiglu_experts_set_kernel(rudnn_swiglu_experts_t experts,
                                                         const char *name);

/* Workspace for forward_dispatched on rows dispatched rows. */
RUDNN_API rudnn_status_t rudnn_swiglu_experts_workspace_size(rudnn_swiglu_experts_t experts,
                                                             int64_t rows,
                                                             rudnn_moe_strategy_t strategy,
                                                             size_t *bytes);

/* expert_output[r] = (silu(x_r gate_e^T) * (x_r up_e^T)) down_e^T for each
 * dispatched row r of expert e; FP32 accumulation, the hidden activation is
 * rounded to the weight dtype. expert_output: [T*top_k, H] in the weight dtype
 * (the dispatched tokens must have that dtype too). workspace may be NULL (the
 * context's pool is used). */
RUDNN_API rudnn_status_t rudnn_swiglu_experts_forward_dispatched(
    rudnn_queue_t queue, rudnn_swiglu_experts_t experts, rudnn_dispatched_t dispatched,
    rudnn_moe_strategy_t strategy, rudnn_buffer_t workspace, size_t workspace_bytes,
    const rudnn_tensor_t *expert_output);

/* expert_output[r] = SwiGLU expert e of rows[r] (as forward_dispatched computes it) for rows
 * grouped by expert: the first counts[0] rows go to expert 0, the next counts[1] to expert 1, ...
 * expert_token_nums: I64 [E] (E the experts' count) on the queue's context, as counts (each >= 0),
 * or as running totals when totals != 0 (non-decreasing, >= 0): the forms rudnn_ep_dispatch
 * writes (rudnn/ep.h; with a TP group its two halves of expand_x are not contiguous: run each on
 * its own). rows [R, H] and expert_output [R, H] in the weight dtype, disjoint, R >= the sum of
 * the counts; rows past the sum are neither read nor written (R = 0 or a sum of 0: nothing runs).
 * Reads the counts to the host (one synchronisation of the queue). The kernel is chosen among the
 * same candidates by the same rule as forward_dispatched (rows' offset counts for alignment);
 * workspace as there, of rudnn_swiglu_experts_workspace_size(rows = the sum) bytes, or NULL. */
RUDNN_API rudnn_status_t rudnn_swiglu_experts_forward_grouped(
    rudnn_queue_t queue, rudnn_swiglu_experts_t experts, const rudnn_tensor_t *rows,
    const rudnn_tensor_t *expert_token_nums, int totals, rudnn_moe_strategy_t strategy,
    rudnn_buffer_t workspace, size_t workspace_bytes, const rudnn_tensor_t *expert_output);

/* One call: route (softmax top-k), dispatch, experts (Scalar), combine. */
RUDNN_API rudnn_status_t rudnn_swiglu_experts_forward(rudnn_queue_t queue,
                                                      rudnn_swiglu_experts_t experts,
                                                      const rudnn_tensor_t *input,
                                                      const rudnn_tensor_t *logits,
                                                      const rudnn_routing_options_t *options,
                                                      const rudnn_tensor_t *output);

/* One call with grouped sigmoid routing and a strategy. */
RUDNN_API rudnn_status_t rudnn_swiglu_experts_forward_sigmoid_grouped(
    rudnn_queue_t queue, rudnn_swiglu_experts_t experts, const rudnn_tensor_t *input,
    const rudnn_tensor_t *logits, const rudnn_tensor_t *bias,
    const rudnn_grouped_routing_options_t *options, rudnn_moe_strategy_t strategy,
    const rudnn_tensor_t *output);

#ifdef __cplusplus
}
#endif
#endif
