/* MoE first-order training: the contracts of the router's selected weights and their backward and of
 * the combine and dispatch backward, and the dispatch to the backend's kernels. No GPU API here. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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

static rudnn_status_t selected_weights(const char *op, rudnn_queue_t queue, const rudnn_tensor_t *logits,
                                       const rudnn_tensor_t *indices, const rudnn_router_weight_options_t *options,
                                       const rudnn_tensor_t *weights)
{
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

rudnn_status_t rudnn_moe_selected_router_weights(rudnn_queue_t queue, const rudnn_tensor_t *logits,
                                                 const rudnn_tensor_t *indices,
                                                 const rudnn_router_weight_options_t *options,
                                                 const rudnn_tensor_t *weights)
{
    rudnn_clear_error();
    return selected_weights("moe_selected_router_weights", queue, logits, indices, options, weights);
}

static rudnn_status_t selected_backward(const char *op, rudnn_queue_t queue, const rudnn_tensor_t *logits,
                                        const rudnn_tensor_t *indices, const rudnn_tensor_t *grad_weights,
                                        const rudnn_router_weight_options_t *options,
                                        const rudnn_tensor_t *grad_logits)
{
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

rudnn_status_t rudnn_moe_selected_router_backward(rudnn_queue_t queue, const rudnn_tensor_t *logits,
                                                  const rudnn_tensor_t *indices, const rudnn_tensor_t *grad_weights,
                                                  const rudnn_router_weight_options_t *options,
                                                  const rudnn_tensor_t *grad_logits)
{
    rudnn_clear_error();
    return selected_backward("moe_selected_router_backward", queue, logits, indices, grad_weights, options,
                             grad_logits);
}

/* ---- the router training plan ---- */

struct rudnn_router_training_plan {
    rudnn_context_t context;
    rudnn_routing_plan_t routing; /* the kept indices and the recomputed F32 weights */
    rudnn_tensor_t logits;        /* the caller's: its buffer held */
    rudnn_router_weight_options_t options;
};

rudnn_status_t rudnn_routing_plan_into_training(rudnn_queue_t queue, rudnn_routing_plan_t plan,
                                                const rudnn_tensor_t *logits,
                                                const rudnn_router_weight_options_t *options,
                                                rudnn_router_training_plan_t *training)
{
    const char *op = "routing_plan_into_training";
    rudnn_clear_error();
    TRY(rudnn_check_queue(op, queue));
    TRY(rudnn_check_arg(op, "plan", plan));
    TRY(rudnn_check_arg(op, "logits", logits));
    TRY(rudnn_check_arg(op, "options", options));
    TRY(rudnn_check_arg(op, "training", training));
    rudnn_routing_plan_info_t info;
    rudnn_routing_plan_info(plan, &info);
    if (info.context != queue->context)
        return rudnn_set_error(RUDNN_STATUS_DEVICE_MISMATCH, "%s: plan was made on another context than the queue", op);
    TRY(rudnn_check_tensor(op, "logits", queue, logits, 2));
    if (logits->rank != 2 || logits->dims[0] != info.tokens || logits->dims[1] != info.experts) {
        char sh[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: logits has shape %s, expected [%lld, %d] (the plan's "
                               "tokens and experts)", op, rudnn_shape_str(logits, sh, sizeof sh),
                               (long long)info.tokens, info.experts);
    }
    if (info.top_k > RUDNN_MOE_TRAIN_MAX_TOP_K)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: the plan selects %d experts a token, at most %d "
                               "supported (RUDNN_MOE_TRAIN_MAX_TOP_K)", op, info.top_k, RUDNN_MOE_TRAIN_MAX_TOP_K);
    TRY(rudnn_check_float_dtype(op, "logits", logits));
    TRY(check_options(op, options));
    const rudnn_moe_train_kernels_t *k;
    TRY(kernels(op, queue, &k));

    rudnn_router_training_plan_t t = rudnn_host_calloc(1, sizeof *t);
    if (!t)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory", op);
    rudnn_status_t st = rudnn_routing_plan_create(op, queue, info.tokens, info.experts, info.top_k, RUDNN_F32,
                                                  &t->routing);
    if (st) {
        free(t);
        return st;
    }
    rudnn_tensor_t from, to, weights;
    rudnn_routing_plan_indices(plan, &from);
    rudnn_routing_plan_indices(t->routing, &to);
    rudnn_routing_plan_weights(t->routing, &weights);
    const size_t bytes = rudnn_tensor_bytes(&to);
    st = bytes ? rudnn_buffer_copy(queue, to.buffer, to.offset, from.buffer, from.offset, bytes) : RUDNN_STATUS_SUCCESS;
    if (st)
        rudnn_error_prefix(op);
    if (!st)
        st = selected_weights(op, queue, logits, &to, options, &weights);
    if (st) {
        rudnn_routing_plan_destroy(t->routing);
        free(t);
        return st;
    }
    rudnn_context_retain(queue->context);
    rudnn_buffer_hold(logits->buffer);
    rudnn_live_object(+1);
    t->context = queue->context;
    t->logits = *logits;
    t->options = *options;
    *training = t;
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_router_training_plan_routing(rudnn_router_training_plan_t training,
                                                  rudnn_routing_plan_t *routing)
{
    const char *op = "router_training_plan_routing";
    rudnn_clear_error();
    TRY(rudnn_check_arg(op, "training", training));
    TRY(rudnn_check_arg(op, "routing", routing));
    rudnn_routing_plan_retain(training->routing);
    *routing = training->routing;
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_router_training_plan_backward(rudnn_queue_t queue, rudnn_router_training_plan_t training,
                                                   const rudnn_tensor_t *grad_weights,
                                                   const rudnn_tensor_t *grad_logits)
{
    const char *op = "router_training_plan_backward";
    rudnn_clear_error();
    TRY(rudnn_check_queue(op, queue));
    TRY(rudnn_check_arg(op, "training", training));
    if (training->context != queue->context)
        return rudnn_set_error(RUDNN_STATUS_DEVICE_MISMATCH, "%s: training was made on another context than the queue",
                               op);
    rudnn_tensor_t indices, weights;
    rudnn_routing_plan_indices(training->routing, &indices);
    rudnn_routing_plan_weights(training->routing, &weights);
    if (grad_logits && grad_logits->buffer)
        TRY(rudnn_check_disjoint(op, "grad_logits", grad_logits, "the training plan's weights", &weights));
    return selected_backward(op, queue, &training->logits, &indices, grad_weights, &training->options, grad_logits);
}

void rudnn_router_training_plan_destroy(rudnn_router_training_plan_t training)
{
    if (!training)
        return;
    rudnn_context_t ctx = training->context;
    rudnn_routing_plan_destroy(training->routing);
    rudnn_buffer_release(training->logits.buffer);
    free(training);
    rudnn_live_object(-1);
    rudnn_context_release(ctx);
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
    TRY(rudnn_check_off_dispatched(op, "grad_expert_output", grad_expert_output, dispatched));
    TRY(rudnn_check_off_dispatched(op, "grad_weights", grad_weights, dispatched));
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
    TRY(rudnn_check_off_dispatched(op, "grad_input", grad_input, dispatched));
    const rudnn_moe_train_kernels_t *k;
    TRY(kernels(op, queue, &k));
    if (info.tokens == 0)
        return RUDNN_STATUS_SUCCESS;
    const rudnn_moe_rows_plan_t rp = rows_plan(&info);
    return rudnn_kernel_status(op, k->dispatch_backward(queue->handle, &rp, rudnn_mem_of(grad_rows), info.positions,
                                                        rudnn_mem_of(grad_input)));
}

/* ---- SwiGLU experts: training ---- */

#define TRAINING_SIZE_QUERY "rudnn_swiglu_experts_training_workspace_size"

/* rows * inter * 8: the backward's FP32 (dg, du) of each row, which covers the forward's act. */
static rudnn_status_t training_bytes(const char *op, int64_t rows, int64_t inter, size_t *bytes)
{
    if (rows < 0)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: rows = %lld, expected >= 0", op, (long long)rows);
    if (rows > 0 && (uint64_t)inter > (uint64_t)(SIZE_MAX / 8) / (uint64_t)rows)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: rows %lld x inter %lld x 8 bytes overflows size_t", op,
                               (long long)rows, (long long)inter);
    *bytes = (size_t)rows * (size_t)inter * 8u;
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_swiglu_experts_training_workspace_size(rudnn_swiglu_experts_t experts, int64_t rows,
                                                            size_t *bytes)
{
    const char *op = "swiglu_experts_training_workspace_size";
    rudnn_clear_error();
    TRY(rudnn_check_arg(op, "experts", experts));
    TRY(rudnn_check_arg(op, "bytes", bytes));
    rudnn_swiglu_experts_info_t x;
    rudnn_swiglu_experts_info(experts, &x);
    return training_bytes(op, rows, x.inter, bytes);
}

/* What both training calls share: the experts and dispatched tokens (context, shape, dtype), views of
 * the tokens and their expert offsets, the strategy, the plan and the workspace need. */
typedef struct training_call {
    rudnn_swiglu_experts_info_t x;
    rudnn_dispatched_info_t d;
    rudnn_tensor_t tokens, offsets; /* views of the dispatched object's */
    rudnn_moe_rows_plan_t plan;
    size_t need;
} training_call_t;

static rudnn_status_t check_training(const char *op, rudnn_queue_t queue, rudnn_swiglu_experts_t experts,
                                     rudnn_dispatched_t dispatched, rudnn_moe_strategy_t strategy,
                                     training_call_t *c)
{
    TRY(check_dispatched(op, queue, dispatched, &c->d));
    TRY(rudnn_check_arg(op, "experts", experts));
    rudnn_swiglu_experts_info(experts, &c->x);
    if (c->x.context != queue->context)
        return rudnn_set_error(RUDNN_STATUS_DEVICE_MISMATCH, "%s: experts are on another context than the queue", op);
    if (c->d.experts != c->x.experts)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: routing chose among %d experts, the weights hold %lld", op,
                               c->d.experts, (long long)c->x.experts);
    if (c->d.hidden != c->x.hidden)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: dispatched tokens have hidden %lld, the weights %lld", op,
                               (long long)c->d.hidden, (long long)c->x.hidden);
    if (c->d.dtype != c->x.dtype)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: dispatched tokens are %s, the weights %s (must match)", op,
                               rudnn_dtype_name(c->d.dtype), rudnn_dtype_name(c->x.dtype));
    if (strategy != RUDNN_MOE_SCALAR && strategy != RUDNN_MOE_AUTO && strategy != RUDNN_MOE_TENSOR_CORE)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: strategy = %d, expected RUDNN_MOE_SCALAR (0), "
                               "RUDNN_MOE_AUTO (1) or RUDNN_MOE_TENSOR_CORE (2)", op, (int)strategy);
    if (c->d.rows > UINT32_MAX || c->x.inter > UINT32_MAX || c->x.hidden > UINT32_MAX)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: rows %lld, inter %lld and hidden %lld must each fit "
                               "32 bits", op, (long long)c->d.rows, (long long)c->x.inter, (long long)c->x.hidden);
    TRY(training_bytes(op, c->d.rows, c->x.inter, &c->need));
    rudnn_dispatched_tokens(dispatched, &c->tokens);
    rudnn_dispatched_offsets(dispatched, &c->offsets);
    c->plan = (rudnn_moe_rows_plan_t){.dtype = c->d.dtype, .weight_dtype = c->d.weight_dtype, .tokens = c->d.tokens,
                                      .top_k = c->d.top_k, .experts = c->d.experts, .hidden = c->d.hidden,
                                      .inter = c->x.inter, .rows = c->d.rows};
    return RUDNN_STATUS_SUCCESS;
}

/* The strategy that runs (after every argument check): Scalar for Scalar and Auto. */
static rudnn_status_t training_strategy(const char *op, rudnn_moe_strategy_t strategy)
{
    if (strategy == RUDNN_MOE_TENSOR_CORE)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: no backend has TensorCore training kernels for SwiGLU "
                               "experts yet; ask for RUDNN_MOE_SCALAR or RUDNN_MOE_AUTO", op);
    return RUDNN_STATUS_SUCCESS;
}

/* out disjoint from every tensor of ins. */
static rudnn_status_t check_apart(const char *op, const char *out_name, const rudnn_tensor_t *out,
                                  const rudnn_tensor_t *const *ins, const char *const *in_names, int n)
{
    for (int i = 0; i < n; i++)
        TRY(rudnn_check_disjoint(op, out_name, out, in_names[i], ins[i]));
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t check_reserve(const char *op, rudnn_queue_t queue, const rudnn_tensor_t *reserve,
                                    const training_call_t *c)
{
    TRY(rudnn_check_arg(op, "reserve", reserve));
    TRY(check_matrix(op, "reserve", queue, reserve, c->d.rows, 2 * c->x.inter, "dispatched rows, 2 x inter"));
    return rudnn_check_dtype(op, "reserve", reserve, RUDNN_F32, "the reserve holds FP32 g and u");
}

/* An FP32 weight gradient of shape [E, a, b]. */
static rudnn_status_t check_weight_grad(const char *op, const char *arg, rudnn_queue_t queue, const rudnn_tensor_t *t,
                                        int64_t experts, int64_t a, int64_t b, const char *what)
{
    TRY(rudnn_check_arg(op, arg, t));
    TRY(rudnn_check_tensor(op, arg, queue, t, 3));
    if (t->rank != 3 || t->dims[0] != experts || t->dims[1] != a || t->dims[2] != b) {
        char s[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has shape %s, expected [%lld, %lld, %lld] (%s)", op,
                               arg, rudnn_shape_str(t, s, sizeof s), (long long)experts, (long long)a, (long long)b,
                               what);
    }
    return rudnn_check_dtype(op, arg, t, RUDNN_F32, "weight gradients are f32");
}

rudnn_status_t rudnn_swiglu_experts_forward_dispatched_training(rudnn_queue_t queue, rudnn_swiglu_experts_t experts,
                                                                rudnn_dispatched_t dispatched,
                                                                rudnn_moe_strategy_t strategy,
                                                                rudnn_buffer_t workspace, size_t workspace_bytes,
                                                                const rudnn_tensor_t *reserve,
                                                                const rudnn_tensor_t *expert_output)
{
    const char *op = "swiglu_experts_forward_dispatched_training";
    rudnn_clear_error();
    training_call_t c;
    TRY(check_training(op, queue, experts, dispatched, strategy, &c));
    TRY(check_reserve(op, queue, reserve, &c));
    TRY(check_rows(op, "expert_output", queue, expert_output, &c.d, c.d.rows, "dispatched rows, hidden"));
    const rudnn_tensor_t *ins[3] = {c.x.gate, c.x.up, c.x.down};
    const char *const in_names[3] = {"the gate weights", "the up weights", "the down weights"};
    TRY(check_apart(op, "reserve", reserve, ins, in_names, 3));
    TRY(check_apart(op, "expert_output", expert_output, ins, in_names, 3));
    TRY(rudnn_check_off_dispatched(op, "reserve", reserve, dispatched));
    TRY(rudnn_check_off_dispatched(op, "expert_output", expert_output, dispatched));
    TRY(rudnn_check_disjoint(op, "expert_output", expert_output, "reserve", reserve));
    rudnn_tensor_t arrays[RUDNN_DISPATCHED_ARRAYS];
    const rudnn_tensor_t *all[5 + RUDNN_DISPATCHED_ARRAYS] = {reserve, expert_output, c.x.gate, c.x.up, c.x.down};
    const char *all_names[5 + RUDNN_DISPATCHED_ARRAYS] = {"reserve", "expert_output", "the gate weights",
                                                          "the up weights", "the down weights"};
    const int n = rudnn_dispatched_arrays_append(dispatched, arrays, all, all_names, 5);
    TRY(rudnn_check_workspace(op, queue, workspace, workspace_bytes, c.need, TRAINING_SIZE_QUERY, all, all_names, n));
    TRY(training_strategy(op, strategy));
    const rudnn_moe_train_kernels_t *k;
    TRY(kernels(op, queue, &k));
    if (!RUDNN_KERNEL_ENTRY(k, experts_forward_train))
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: backend '%s' has no SwiGLU experts training kernels",
                               op, queue->context->backend->name);
    if (c.d.rows == 0)
        return RUDNN_STATUS_SUCCESS;
    void *act;
    TRY(rudnn_scratch_begin(op, queue, workspace, c.need, &act));
    const rudnn_status_t st = k->experts_forward_train(
        queue->handle, &c.plan, rudnn_mem_of(&c.tokens), rudnn_mem_of(&c.offsets), rudnn_mem_of(c.x.gate),
        rudnn_mem_of(c.x.up), rudnn_mem_of(c.x.down), rudnn_mem_of(reserve), (rudnn_mem_ref_t){act, 0},
        rudnn_mem_of(expert_output));
    rudnn_scratch_end(queue, workspace, act, c.need);
    return rudnn_kernel_status(op, st);
}

rudnn_status_t rudnn_swiglu_experts_backward(rudnn_queue_t queue, rudnn_swiglu_experts_t experts,
                                             rudnn_dispatched_t dispatched, const rudnn_tensor_t *reserve,
                                             const rudnn_tensor_t *grad_expert_output, rudnn_moe_strategy_t strategy,
                                             rudnn_buffer_t workspace, size_t workspace_bytes,
                                             const rudnn_tensor_t *grad_rows, const rudnn_tensor_t *grad_gate,
                                             const rudnn_tensor_t *grad_up, const rudnn_tensor_t *grad_down)
{
    const char *op = "swiglu_experts_backward";
    rudnn_clear_error();
    training_call_t c;
    TRY(check_training(op, queue, experts, dispatched, strategy, &c));
    TRY(check_reserve(op, queue, reserve, &c));
    TRY(check_rows(op, "grad_expert_output", queue, grad_expert_output, &c.d, c.d.rows, "dispatched rows, hidden"));
    TRY(check_rows(op, "grad_rows", queue, grad_rows, &c.d, c.d.rows, "dispatched rows, hidden"));
    const int64_t E = c.x.experts, I = c.x.inter, H = c.x.hidden;
    TRY(check_weight_grad(op, "grad_gate", queue, grad_gate, E, I, H, "the gate weights' shape"));
    TRY(check_weight_grad(op, "grad_up", queue, grad_up, E, I, H, "the up weights' shape"));
    TRY(check_weight_grad(op, "grad_down", queue, grad_down, E, H, I, "the down weights' shape"));
    const rudnn_tensor_t *ins[5] = {reserve, grad_expert_output, c.x.gate, c.x.up, c.x.down};
    const char *const in_names[5] = {"reserve", "grad_expert_output", "the gate weights", "the up weights",
                                     "the down weights"};
    const rudnn_tensor_t *outs[4] = {grad_rows, grad_gate, grad_up, grad_down};
    const char *const out_names[4] = {"grad_rows", "grad_gate", "grad_up", "grad_down"};
    for (int o = 0; o < 4; o++) {
        TRY(check_apart(op, out_names[o], outs[o], ins, in_names, 5));
        TRY(rudnn_check_off_dispatched(op, out_names[o], outs[o], dispatched));
        TRY(check_apart(op, out_names[o], outs[o], outs + o + 1, out_names + o + 1, 3 - o));
    }
    rudnn_tensor_t arrays[RUDNN_DISPATCHED_ARRAYS];
    const rudnn_tensor_t *all[9 + RUDNN_DISPATCHED_ARRAYS] = {grad_rows, grad_gate, grad_up, grad_down, reserve,
                                                              grad_expert_output, c.x.gate, c.x.up, c.x.down};
    const char *all_names[9 + RUDNN_DISPATCHED_ARRAYS] = {"grad_rows", "grad_gate", "grad_up", "grad_down",
                                                          "reserve", "grad_expert_output", "the gate weights",
                                                          "the up weights", "the down weights"};
    const int n = rudnn_dispatched_arrays_append(dispatched, arrays, all, all_names, 9);
    TRY(rudnn_check_workspace(op, queue, workspace, workspace_bytes, c.need, TRAINING_SIZE_QUERY, all, all_names, n));
    TRY(training_strategy(op, strategy));
    const rudnn_moe_train_kernels_t *k;
    TRY(kernels(op, queue, &k));
    if (!RUDNN_KERNEL_ENTRY(k, experts_backward))
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: backend '%s' has no SwiGLU experts training kernels",
                               op, queue->context->backend->name);
    if (c.d.rows == 0) { /* no expert has a row: every weight gradient is 0 */
        for (int o = 1; o < 4; o++)
            TRY(rudnn_kernel_status(op, rudnn_buffer_fill(queue, outs[o]->buffer, outs[o]->offset, 0,
                                                          rudnn_tensor_bytes(outs[o]))));
        return RUDNN_STATUS_SUCCESS;
    }
    void *work;
    TRY(rudnn_scratch_begin(op, queue, workspace, c.need, &work));
    const rudnn_status_t st = k->experts_backward(
        queue->handle, &c.plan, rudnn_mem_of(&c.tokens), rudnn_mem_of(&c.offsets), rudnn_mem_of(c.x.gate),
        rudnn_mem_of(c.x.up), rudnn_mem_of(c.x.down), rudnn_mem_of(reserve), rudnn_mem_of(grad_expert_output),
        (rudnn_mem_ref_t){work, 0}, rudnn_mem_of(grad_rows), rudnn_mem_of(grad_gate), rudnn_mem_of(grad_up),
        rudnn_mem_of(grad_down));
    rudnn_scratch_end(queue, workspace, work, c.need);
    return rudnn_kernel_status(op, st);
}
