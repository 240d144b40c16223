/* MoE first-order training: the contracts of the router's selected weights and their backward and of
 * the combine and dispatch backward, and the dispatch to the backend's kernels. No GPU API here. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "moe_internal.h"
#include "rudnn/moe_train.h"
#include "validate.h"

static rudnn_status_t check_options(const char *op, const rudnn_router_weight_options_t *o)
{
    if (o->scoring != RUDNN_ROUTER_SOFTMAX && o->scoring != RUDNN_ROUTER_SIGMOID)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options->scoring = %d, expected RUDNN_ROUTER_SOFTMAX (0) "
                               "or RUDNN_ROUTER_SIGMOID (1)", op, (int)o->scoring);
    if (!isfinite(o->scale) || o->scale <= 0.0f)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options->scale = %g, expected finite and > 0", op,
                               (double)o->scale);
    return RUDNN_STATUS_SUCCESS;
}

/* A [rows, cols] tensor of exactly this dtype. */
static rudnn_status_t check_matrix(const char *op, const char *arg, rudnn_queue_t queue, const rudnn_tensor_t *t,
                                   int64_t rows, int64_t cols, const char *what)
{
    TRY(rudnn_check_tensor(op, arg, queue, t, 2));
    if (t->rank != 2 || t->dims[0] != rows || t->dims[1] != cols) {
        char s[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has shape %s, expected [%lld, %lld] (%s)", op, arg,
                               rudnn_shape_str(t, s, sizeof s), (long long)rows, (long long)cols, what);
    }
    return RUDNN_STATUS_SUCCESS;
}

/* logits, indices and options; fills the plan (rows may be 0). */
static rudnn_status_t check_inputs(const char *op, rudnn_queue_t queue, const rudnn_tensor_t *logits,
                                   const rudnn_tensor_t *indices, const rudnn_router_weight_options_t *options,
                                   rudnn_router_train_plan_t *plan)
{
    TRY(rudnn_check_queue(op, queue));
    TRY(rudnn_check_arg(op, "logits", logits));
    TRY(rudnn_check_arg(op, "indices", indices));
    TRY(rudnn_check_arg(op, "options", options));
    TRY(rudnn_check_tensor(op, "logits", queue, logits, 2));
    if (logits->rank != 2) {
        char s[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: logits has shape %s, expected [tokens, experts]", op,
                               rudnn_shape_str(logits, s, sizeof s));
    }
    TRY(rudnn_check_float_dtype(op, "logits", logits));
    if (logits->dims[1] < 1)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: logits has 0 experts (last axis), expected >= 1", op);
    if (logits->dims[1] > INT32_MAX)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: logits has %lld experts, at most %d supported", op,
                               (long long)logits->dims[1], INT32_MAX);
    TRY(rudnn_check_tensor(op, "indices", queue, indices, 2));
    if (indices->rank != 2 || indices->dims[0] != logits->dims[0]) {
        char s[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: indices has shape %s, expected [%lld, top_k] (the tokens "
                               "of logits)", op, rudnn_shape_str(indices, s, sizeof s), (long long)logits->dims[0]);
    }
    if (indices->dtype != RUDNN_U32 && indices->dtype != RUDNN_I32 && indices->dtype != RUDNN_I64)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: indices has dtype %s, expected U32, I32 or I64", op,
                               rudnn_dtype_name(indices->dtype));
    const int64_t experts = logits->dims[1], k = indices->dims[1];
    const int64_t kmax = experts < RUDNN_MOE_TRAIN_MAX_TOP_K ? experts : RUDNN_MOE_TRAIN_MAX_TOP_K;
    if (k < 1 || k > kmax)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: indices selects %lld experts a token (last axis), "
                               "expected 1 ..= min(experts %lld, %d)", op, (long long)k, (long long)experts,
                               RUDNN_MOE_TRAIN_MAX_TOP_K);
    TRY(check_options(op, options));
    plan->dtype = logits->dtype;
    plan->index_dtype = indices->dtype;
    plan->rows = logits->dims[0];
    plan->experts = (int32_t)experts;
    plan->top_k = (int32_t)k;
    plan->sigmoid = options->scoring == RUDNN_ROUTER_SIGMOID;
    plan->renormalize = options->renormalize != 0;
    plan->scale = options->scale;
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t kernels(const char *op, rudnn_queue_t queue, const rudnn_moe_train_kernels_t **k)
{
    *k = RUDNN_FAMILY_TABLE(queue->context->backend, moe_train);
    if (!*k)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: backend '%s' has no MoE training kernels", op,
                               queue->context->backend->name);
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_moe_selected_router_weights(rudnn_queue_t queue, const rudnn_tensor_t *logits,
                                                 const rudnn_tensor_t *indices,
                                                 const rudnn_router_weight_options_t *options,
                                                 const rudnn_tensor_t *weights)
{
    const char *op = "moe_selected_router_weights";
    rudnn_clear_error();
    rudnn_router_train_plan_t plan;
    TRY(check_inputs(op, queue, logits, indices, options, &plan));
    TRY(rudnn_check_arg(op, "weights", weights));
    TRY(check_matrix(op, "weights", queue, weights, plan.rows, plan.top_k, "one weight a selected expert"));
    TRY(rudnn_check_dtype(op, "weights", weights, RUDNN_F32, "the weights are f32"));
    TRY(rudnn_check_disjoint(op, "weights", weights, "logits", logits));
    TRY(rudnn_check_disjoint(op, "weights", weights, "indices", indices));
    const rudnn_moe_train_kernels_t *k;
    TRY(kernels(op, queue, &k));
    if (plan.rows == 0)
        return RUDNN_STATUS_SUCCESS;
    return rudnn_kernel_status(op, k->router_weights(queue->handle, &plan, rudnn_mem_of(logits), rudnn_mem_of(indices),
                                                     rudnn_mem_of(weights)));
}

rudnn_status_t rudnn_moe_selected_router_backward(rudnn_queue_t queue, const rudnn_tensor_t *logits,
                                                  const rudnn_tensor_t *indices, const rudnn_tensor_t *grad_weights,
                                                  const rudnn_router_weight_options_t *options,
                                                  const rudnn_tensor_t *grad_logits)
{
    const char *op = "moe_selected_router_backward";
    rudnn_clear_error();
    rudnn_router_train_plan_t plan;
    TRY(check_inputs(op, queue, logits, indices, options, &plan));
    TRY(rudnn_check_arg(op, "grad_weights", grad_weights));
    TRY(rudnn_check_arg(op, "grad_logits", grad_logits));
    TRY(check_matrix(op, "grad_weights", queue, grad_weights, plan.rows, plan.top_k,
                     "one gradient a selected expert"));
    TRY(rudnn_check_dtype(op, "grad_weights", grad_weights, RUDNN_F32, "the weights' gradients are f32"));
    TRY(check_matrix(op, "grad_logits", queue, grad_logits, plan.rows, plan.experts, "the shape of logits"));
    TRY(rudnn_check_dtype(op, "grad_logits", grad_logits, plan.dtype, "the dtype of logits"));
    TRY(rudnn_check_disjoint(op, "grad_logits", grad_logits, "logits", logits));
    TRY(rudnn_check_disjoint(op, "grad_logits", grad_logits, "indices", indices));
    TRY(rudnn_check_disjoint(op, "grad_logits", grad_logits, "grad_weights", grad_weights));
    const rudnn_moe_train_kernels_t *k;
    TRY(kernels(op, queue, &k));
    if (plan.rows == 0)
        return RUDNN_STATUS_SUCCESS;
    return rudnn_kernel_status(op, k->router_backward(queue->handle, &plan, rudnn_mem_of(logits),
                                                      rudnn_mem_of(indices), rudnn_mem_of(grad_weights),
                                                      rudnn_mem_of(grad_logits)));
}

/* ---- combine and dispatch backward ---- */

/* The queue, the dispatched tokens (on the queue's context) and their shape. */
static rudnn_status_t check_dispatched(const char *op, rudnn_queue_t queue, rudnn_dispatched_t d,
                                       rudnn_dispatched_info_t *info)
{
    TRY(rudnn_check_queue(op, queue));
    TRY(rudnn_check_arg(op, "dispatched", d));
    rudnn_dispatched_info(d, info);
    if (info->context != queue->context)
        return rudnn_set_error(RUDNN_STATUS_DEVICE_MISMATCH,
                               "%s: dispatched tokens were made on another context than the queue", op);
    return RUDNN_STATUS_SUCCESS;
}

/* A [rows, cols] tensor in the dispatched dtype. */
static rudnn_status_t check_rows(const char *op, const char *arg, rudnn_queue_t queue, const rudnn_tensor_t *t,
                                 const rudnn_dispatched_info_t *info, int64_t rows, const char *what)
{
    TRY(rudnn_check_arg(op, arg, t));
    TRY(check_matrix(op, arg, queue, t, rows, info->hidden, what));
    if (t->dtype != info->dtype)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: %s has dtype %s, expected %s (the dispatched dtype)", op,
                               arg, rudnn_dtype_name(t->dtype), rudnn_dtype_name(info->dtype));
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_moe_rows_plan_t rows_plan(const rudnn_dispatched_info_t *info)
{
    rudnn_moe_rows_plan_t rp = {.dtype = info->dtype, .weight_dtype = info->weight_dtype, .tokens = info->tokens,
                                .top_k = info->top_k, .experts = info->experts, .hidden = info->hidden,
                                .rows = info->rows};
    return rp;
}

rudnn_status_t rudnn_moe_combine_backward(rudnn_queue_t queue, rudnn_dispatched_t dispatched,
                                          const rudnn_tensor_t *expert_output, const rudnn_tensor_t *grad_output,
                                          rudnn_combine_grad_strategy_t strategy,
                                          const rudnn_tensor_t *grad_expert_output, const rudnn_tensor_t *grad_weights)
{
    const char *op = "moe_combine_backward";
    rudnn_clear_error();
    rudnn_dispatched_info_t info;
    TRY(check_dispatched(op, queue, dispatched, &info));
    TRY(check_rows(op, "expert_output", queue, expert_output, &info, info.rows, "dispatched rows, hidden"));
    TRY(check_rows(op, "grad_output", queue, grad_output, &info, info.tokens, "tokens, hidden"));
    if (strategy != RUDNN_COMBINE_GRAD_SERIAL && strategy != RUDNN_COMBINE_GRAD_PLANE)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: strategy = %d, expected RUDNN_COMBINE_GRAD_SERIAL (0) or "
                               "RUDNN_COMBINE_GRAD_PLANE (1)", op, (int)strategy);
    TRY(check_rows(op, "grad_expert_output", queue, grad_expert_output, &info, info.rows,
                   "dispatched rows, hidden"));
    TRY(rudnn_check_arg(op, "grad_weights", grad_weights));
    TRY(check_matrix(op, "grad_weights", queue, grad_weights, info.tokens, info.top_k, "tokens, top_k"));
    TRY(rudnn_check_dtype(op, "grad_weights", grad_weights, RUDNN_F32, "the weights' gradients are f32"));
    const rudnn_tensor_t *outs[2] = {grad_expert_output, grad_weights}, *ins[2] = {expert_output, grad_output};
    const char *out_names[2] = {"grad_expert_output", "grad_weights"}, *in_names[2] = {"expert_output",
                                                                                        "grad_output"};
    for (int o = 0; o < 2; o++)
        for (int i = 0; i < 2; i++)
            TRY(rudnn_check_disjoint(op, out_names[o], outs[o], in_names[i], ins[i]));
    TRY(rudnn_check_disjoint(op, "grad_expert_output", grad_expert_output, "grad_weights", grad_weights));
    const rudnn_moe_train_kernels_t *k;
    TRY(kernels(op, queue, &k));
    if (info.tokens == 0)
        return RUDNN_STATUS_SUCCESS;
    const rudnn_moe_rows_plan_t rp = rows_plan(&info);
    return rudnn_kernel_status(op, k->combine_backward(queue->handle, &rp, strategy == RUDNN_COMBINE_GRAD_PLANE,
                                                       rudnn_mem_of(expert_output), info.positions, info.weights,
                                                       rudnn_mem_of(grad_output), rudnn_mem_of(grad_expert_output),
                                                       rudnn_mem_of(grad_weights)));
}

rudnn_status_t rudnn_moe_dispatch_backward(rudnn_queue_t queue, rudnn_dispatched_t dispatched,
                                           const rudnn_tensor_t *grad_rows, const rudnn_tensor_t *grad_input)
{
    const char *op = "moe_dispatch_backward";
    rudnn_clear_error();
    rudnn_dispatched_info_t info;
    TRY(check_dispatched(op, queue, dispatched, &info));
    TRY(check_rows(op, "grad_rows", queue, grad_rows, &info, info.rows, "dispatched rows, hidden"));
    TRY(check_rows(op, "grad_input", queue, grad_input, &info, info.tokens, "tokens, hidden"));
    TRY(rudnn_check_disjoint(op, "grad_input", grad_input, "grad_rows", grad_rows));
    const rudnn_moe_train_kernels_t *k;
    TRY(kernels(op, queue, &k));
    if (info.tokens == 0)
        return RUDNN_STATUS_SUCCESS;
    const rudnn_moe_rows_plan_t rp = rows_plan(&info);
    return rudnn_kernel_status(op, k->dispatch_backward(queue->handle, &rp, rudnn_mem_of(grad_rows), info.positions,
                                                        rudnn_mem_of(grad_input)));
}
