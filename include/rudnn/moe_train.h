/* MoE first-order training: the router's weights for a fixed selection of experts and their
 * gradient with respect to the logits (the guide's selected_router_weights and
 * selected_router_backward), the backward of combine and dispatch (rudnn/moe.h), and the SwiGLU
 * experts' forward with a reserve and their backward.
 *
 *   logits [T, E] + indices [T, k] -> selected_router_weights -> weights [T, k] (F32)
 *   logits + indices + grad_weights [T, k] -> selected_router_backward -> grad_logits [T, E]
 *   dispatched rows [T*k, H] -> swiglu_experts_forward_dispatched_training -> expert_output, reserve
 *   grad_output [T, H] -> combine_backward -> d expert_output [T*k, H], grad_weights [T, k] (F32)
 *   d expert_output + reserve -> swiglu_experts_backward -> d rows [T*k, H], d gate, d up, d down (F32)
 *   d dispatched rows [T*k, H] -> dispatch_backward -> d input [T, H]
 *
 * The selection is fixed: nothing here differentiates the top-k or group choice, or a selection
 * bias. The indices are usually a routing plan's (rudnn_routing_plan_indices) but may be any.
 * Bad arguments return a status, set rudnn_last_error() and write nothing. */
#ifndef RUDNN_MOE_TRAIN_H
#define RUDNN_MOE_TRAIN_H

#include "rudnn/core.h"
#include "rudnn/moe.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a logit becomes a score p. */
typedef enum rudnn_router_scoring {
    RUDNN_ROUTER_SOFTMAX = 0, /* p[e] = softmax over the row's E logits (FP32, max-subtracted) */
    RUDNN_ROUTER_SIGMOID = 1  /* p[e] = sigmoid(logit[e]) (FP32, the stable form) */
} rudnn_router_scoring_t;

typedef struct rudnn_router_weight_options {
    rudnn_router_scoring_t scoring;
    int renormalize; /* divide the selected scores by their sum (a repeated index counted each time) */
    float scale;     /* finite, > 0; multiplies the weights last */
} rudnn_router_weight_options_t;

/* The most experts a row selects (top_k = indices' last dim). */
#define RUDNN_MOE_TRAIN_MAX_TOP_K 64

/* weights[t, j] = scale * p[t, i] / (renormalize ? sum over j' of p[t, indices[t, j']] : 1), with
 * i = indices[t, j].
 * logits: F32/F16/BF16 [T, E], contiguous, T >= 0, E >= 1. indices: U32/I32/I64 [T, k], contiguous,
 * 1 <= k <= min(E, RUDNN_MOE_TRAIN_MAX_TOP_K). weights: F32 [T, k], contiguous, disjoint from both
 * inputs. All on the queue's context.
 * A repeated index is gathered again (a weight of its own, counted again in the sum). An index
 * outside [0, E) makes its row's k weights NaN: nothing is read out of bounds and the call does
 * not synchronise with the host. Non-finite logits propagate through the formula (NaN or inf in
 * their row). */
RUDNN_API rudnn_status_t rudnn_moe_selected_router_weights(rudnn_queue_t queue, const rudnn_tensor_t *logits,
                                                           const rudnn_tensor_t *indices,
                                                           const rudnn_router_weight_options_t *options,
                                                           const rudnn_tensor_t *weights);

/* grad_logits = d(sum over t, j of grad_weights[t, j] * weights[t, j]) / d logits, for the weights
 * rudnn_moe_selected_router_weights gives with the same logits, indices and options; every
 * occurrence of a repeated index adds its share. grad_weights: F32 [T, k], contiguous.
 * grad_logits: [T, E] in the logits dtype, contiguous, disjoint from every input; every element is
 * written (zero where the logit does not reach a weight: with sigmoid scoring, or softmax
 * renormalized, the experts the row did not select). Computed in FP32, rounded once.
 * An index outside [0, E) makes its row of grad_logits NaN (no out-of-bounds read, no host sync). */
RUDNN_API rudnn_status_t rudnn_moe_selected_router_backward(rudnn_queue_t queue, const rudnn_tensor_t *logits,
                                                            const rudnn_tensor_t *indices,
                                                            const rudnn_tensor_t *grad_weights,
                                                            const rudnn_router_weight_options_t *options,
                                                            const rudnn_tensor_t *grad_logits);

/* ---- the router training plan (the guide's RoutingPlan::into_training) ------------------------- */

typedef struct rudnn_router_training_plan *rudnn_router_training_plan_t;

/* Keeps plan's selection (a copy of its indices) and recomputes its weights from logits with options,
 * as rudnn_moe_selected_router_weights (F32). logits: F32/F16/BF16 [T, E] with the plan's T and E, on
 * the queue's context (usually the logits the plan was routed from); the plan's top_k at most
 * RUDNN_MOE_TRAIN_MAX_TOP_K. The training plan keeps logits' buffer alive and reads logits again in
 * backward: their values must not change before then. plan stays the caller's (unchanged). */
RUDNN_API rudnn_status_t rudnn_routing_plan_into_training(rudnn_queue_t queue, rudnn_routing_plan_t plan,
                                                          const rudnn_tensor_t *logits,
                                                          const rudnn_router_weight_options_t *options,
                                                          rudnn_router_training_plan_t *training);

/* The routing plan to dispatch with (rudnn_moe_dispatch, then combine and combine_backward): the kept
 * indices and the recomputed weights, F32. A new reference: release it with rudnn_routing_plan_destroy. */
RUDNN_API rudnn_status_t rudnn_router_training_plan_routing(rudnn_router_training_plan_t training,
                                                            rudnn_routing_plan_t *routing);

/* grad_logits [T, E] (the logits' dtype) for grad_weights F32 [T, k]: rudnn_moe_selected_router_backward
 * on the kept logits, indices and options (its contract: grad_logits disjoint from logits, every element
 * written); grad_logits must not meet the training plan's own indices or weights either. */
RUDNN_API rudnn_status_t rudnn_router_training_plan_backward(rudnn_queue_t queue,
                                                             rudnn_router_training_plan_t training,
                                                             const rudnn_tensor_t *grad_weights,
                                                             const rudnn_tensor_t *grad_logits);

RUDNN_API void rudnn_router_training_plan_destroy(rudnn_router_training_plan_t training);

/* ---- combine and dispatch backward ---------------------------------------------------------- */

/* How combine_backward sums each grad_weights element over the hidden axis. */
typedef enum rudnn_combine_grad_strategy {
    RUDNN_COMBINE_GRAD_SERIAL = 0, /* one work-item a (token, slot), h ascending (the default) */
    RUDNN_COMBINE_GRAD_PLANE = 1   /* a work-group a token, each sum a fixed tree over its items */
} rudnn_combine_grad_strategy_t;

/* The backward of rudnn_moe_combine(dispatched, expert_output) -> output, for grad_output = dL/d output:
 *   grad_expert_output[positions[t, j], :] = weight[t, j] * grad_output[t, :]   (rounded once)
 *   grad_weights[t, j] = sum over h of grad_output[t, h] * expert_output[positions[t, j], h]   (FP32)
 * with the dispatched tokens' routing plan's weights and positions (rudnn/moe.h).
 * expert_output, grad_expert_output: [T*k, H] in the dispatched dtype; grad_output [T, H] in the
 * dispatched dtype; grad_weights F32 [T, k] (what rudnn_moe_selected_router_backward takes).
 * All contiguous; the outputs disjoint from every input and from each other. Both strategies are
 * deterministic; they differ in the order of the sums' additions. */
RUDNN_API rudnn_status_t rudnn_moe_combine_backward(rudnn_queue_t queue, rudnn_dispatched_t dispatched,
                                                    const rudnn_tensor_t *expert_output,
                                                    const rudnn_tensor_t *grad_output,
                                                    rudnn_combine_grad_strategy_t strategy,
                                                    const rudnn_tensor_t *grad_expert_output,
                                                    const rudnn_tensor_t *grad_weights);

/* The backward of rudnn_moe_dispatch: grad_input[t, :] = sum over j of grad_rows[positions[t, j], :],
 * in slot order, in FP32, rounded once (no routing weight: combine_backward applied it).
 * grad_rows [T*k, H] and grad_input [T, H] in the dispatched dtype, contiguous, disjoint. */
RUDNN_API rudnn_status_t rudnn_moe_dispatch_backward(rudnn_queue_t queue, rudnn_dispatched_t dispatched,
                                                     const rudnn_tensor_t *grad_rows,
                                                     const rudnn_tensor_t *grad_input);

/* ---- SwiGLU experts: training ---------------------------------------------------------------- */

/* Workspace bytes of forward_dispatched_training and of backward for rows dispatched rows (rows >= 0):
 * rows * inter * 8 (the backward's FP32 dgate and dup of each row). */
RUDNN_API rudnn_status_t rudnn_swiglu_experts_training_workspace_size(rudnn_swiglu_experts_t experts, int64_t rows,
                                                                      size_t *bytes);

/* The forward of rudnn_swiglu_experts_forward_dispatched that keeps what the backward needs. For each
 * dispatched row r (R = T*k rows, x = the dispatched tokens) of expert e:
 *   g[r, i] = sum over h of x[r, h] gate[e, i, h],   u[r, i] = sum over h of x[r, h] up[e, i, h]   (FP32)
 *   reserve[r, :] = (g[r, 0 .. I), u[r, 0 .. I))
 *   a[r, i] = silu(g[r, i]) u[r, i], rounded to the weights' dtype   (silu(g) = g / (1 + exp(-g)))
 *   expert_output[r, h] = sum over i of a[r, i] down[e, h, i]   (FP32, rounded once)
 * Sums run in index order, so expert_output agrees with forward_dispatched's to FP32 summation order.
 * expert_output: [R, H] in the weights' dtype (as forward_dispatched's). reserve: F32 [R, 2 I],
 * contiguous. Both disjoint from each other, from the weights, the dispatched tokens and the
 * workspace. strategy: RUDNN_MOE_SCALAR or RUDNN_MOE_AUTO (Scalar); RUDNN_MOE_TENSOR_CORE is
 * NOT_SUPPORTED (no backend has matrix-unit training kernels yet). workspace: at least
 * rudnn_swiglu_experts_training_workspace_size bytes, or NULL (the context's pool). */
RUDNN_API rudnn_status_t rudnn_swiglu_experts_forward_dispatched_training(
    rudnn_queue_t queue, rudnn_swiglu_experts_t experts, rudnn_dispatched_t dispatched,
    rudnn_moe_strategy_t strategy, rudnn_buffer_t workspace, size_t workspace_bytes,
    const rudnn_tensor_t *reserve, const rudnn_tensor_t *expert_output);

/* The backward of forward_dispatched_training for grad_expert_output = dL/d expert_output, from its
 * reserve (same experts and dispatched tokens, both unchanged since). For each row r of expert e, in
 * FP32, with s = sigmoid(g[r, i]):
 *   da[r, i] = sum over h of grad_expert_output[r, h] down[e, h, i]
 *   dg[r, i] = da u s (1 + g (1 - s)),   du[r, i] = da silu(g)   (the rounding of a passed straight)
 *   grad_rows[r, h] = sum over i of dg[r, i] gate[e, i, h] + du[r, i] up[e, i, h]   (rounded once)
 *   grad_gate[e, i, h] = sum over e's rows r of dg[r, i] x[r, h];  grad_up the same with du
 *   grad_down[e, h, i] = sum over e's rows r of grad_expert_output[r, h] a[r, i]   (a as rounded)
 * Every sum runs in index order (rows ascending): the results are deterministic. The weight
 * gradients are written, not accumulated: an expert that received no row gets zeros.
 * grad_expert_output, grad_rows: [R, H] in the weights' dtype. grad_gate, grad_up: F32 [E, I, H];
 * grad_down: F32 [E, H, I]. All contiguous; the outputs disjoint from each other and from every
 * input (reserve, grad_expert_output, the weights, the dispatched tokens, the workspace).
 * strategy and workspace as for forward_dispatched_training (the backward's strategy need not be the
 * forward's). Then rudnn_moe_dispatch_backward(grad_rows) gives the tokens' gradient. */
RUDNN_API rudnn_status_t rudnn_swiglu_experts_backward(
    rudnn_queue_t queue, rudnn_swiglu_experts_t experts, rudnn_dispatched_t dispatched,
    const rudnn_tensor_t *reserve, const rudnn_tensor_t *grad_expert_output, rudnn_moe_strategy_t strategy,
    rudnn_buffer_t workspace, size_t workspace_bytes, const rudnn_tensor_t *grad_rows,
    const rudnn_tensor_t *grad_gate, const rudnn_tensor_t *grad_up, const rudnn_tensor_t *grad_down);

#ifdef __cplusplus
}
#endif

#endif
