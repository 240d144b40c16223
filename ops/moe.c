/* MoE on one device: contracts, plans, strategy resolution and dispatch to the
 * backend kernels. No GPU API here. */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pool.h"
#include "moe_internal.h"
#include "rudnn/moe.h"
#include "validate.h"


/* ---- objects ----------------------------------------------------------------- */

struct rudnn_routing_plan {
    atomic_int refs; /* the caller's, plus one per dispatched object using it */
    rudnn_context_t context;
    rudnn_dtype_t dtype;
    int64_t tokens;
    int32_t experts;
    int32_t top_k;
    rudnn_buffer_t mem;    /* indices [T, k] U32, then the weights [T, k] at weights_offset */
    size_t weights_offset; /* bytes */
};

struct rudnn_dispatched {
    rudnn_context_t context;
    rudnn_routing_plan_t plan; /* holds a reference: weights are needed by combine */
    rudnn_dtype_t dtype;
    int64_t hidden;
    int64_t rows;
    rudnn_buffer_t tokens;
    rudnn_buffer_t counts;
    rudnn_buffer_t offsets;
    rudnn_buffer_t positions;
    rudnn_buffer_t row_token;
};

struct rudnn_swiglu_experts {
    rudnn_context_t context;
    rudnn_tensor_t gate, up, down;
    rudnn_dtype_t dtype;
    int64_t experts, inter, hidden;
    /* the candidate named by rudnn_swiglu_experts_set_kernel, or -1; atomic because set_kernel
     * may run while other threads run forwards of the same experts (each reads it once) */
    atomic_int pinned;
};

/* Device memory for plans and dispatched tokens (core/buffer.c). */
static rudnn_status_t moe_alloc(rudnn_queue_t queue, size_t bytes, rudnn_buffer_t *out)
{
    return rudnn_buffer_from_pool(queue, bytes, out);
}

static void moe_free(rudnn_buffer_t b)
{
    if (b)
        rudnn_buffer_release(b); /* back to the pool (core/buffer.c) */
}

static void view_at(rudnn_tensor_t *t, rudnn_buffer_t b, size_t offset, rudnn_dtype_t dtype, int rank, int64_t d0,
                    int64_t d1)
{
    int64_t dims[2] = {d0, d1};
    rudnn_tensor_init(t, b, offset, dtype, rank, dims);
}

static void view(rudnn_tensor_t *t, rudnn_buffer_t b, rudnn_dtype_t dtype, int rank, int64_t d0, int64_t d1)
{
    view_at(t, b, 0, dtype, rank, d0, d1);
}

/* ---- routing ------------------------------------------------------------------- */

static rudnn_status_t check_logits(const char *op, rudnn_queue_t queue, const rudnn_tensor_t *logits)
{
    TRY(rudnn_check_tensor(op, "logits", queue, logits, 2));
    if (logits->rank != 2) {
        char s[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: logits has shape %s, expected [tokens, experts]",
                               op, rudnn_shape_str(logits, s, sizeof s));
    }
    TRY(rudnn_check_float_dtype(op, "logits", logits));
    if (logits->dims[1] < 1)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: logits has 0 experts (last axis), expected >= 1",
                               op);
    if (logits->dims[1] > INT32_MAX || logits->dims[0] > INT32_MAX)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: logits dims exceed %d", op, INT32_MAX);
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_routing_plan_create(const char *op, rudnn_queue_t queue, int64_t tokens, int32_t experts,
                                         int32_t top_k, rudnn_dtype_t weight_dtype, rudnn_routing_plan_t *out)
{
    if ((uint64_t)tokens * (uint64_t)top_k > UINT32_MAX)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED,
                               "%s: tokens x top_k = %lld x %d exceeds the u32 row indices of dispatch (%u)",
                               op, (long long)tokens, top_k, UINT32_MAX);
    rudnn_routing_plan_t p = rudnn_host_calloc(1, sizeof *p);
    if (!p)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory", op);
    atomic_init(&p->refs, 1);
    rudnn_live_object(+1);
    p->context = queue->context;
    p->dtype = weight_dtype;
    p->tokens = tokens;
    p->experts = experts;
    p->top_k = top_k;
    size_t pairs = (size_t)p->tokens * (size_t)top_k;
    /* one block for both (one pool round trip per routing call); weights 256-byte aligned */
    p->weights_offset = (pairs * 4 + 255) & ~(size_t)255;
    rudnn_status_t st = moe_alloc(queue, p->weights_offset + pairs * rudnn_dtype_size(p->dtype), &p->mem);
    if (st) {
        rudnn_error_prefix(op);
        rudnn_routing_plan_destroy(p);
        return st;
    }
    *out = p;
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t plan_create(const char *op, rudnn_queue_t queue, const rudnn_tensor_t *logits, int top_k,
                                  rudnn_routing_plan_t *out)
{
    return rudnn_routing_plan_create(op, queue, logits->dims[0], (int32_t)logits->dims[1], top_k, logits->dtype,
                                     out);
}

void rudnn_routing_plan_retain(rudnn_routing_plan_t p) { atomic_fetch_add(&p->refs, 1); }

void rudnn_routing_plan_info(rudnn_routing_plan_t p, rudnn_routing_plan_info_t *info)
{
    *info = (rudnn_routing_plan_info_t){.context = p->context, .weight_dtype = p->dtype, .tokens = p->tokens,
                                        .experts = p->experts, .top_k = p->top_k};
}

static const rudnn_moe_kernels_t *moe_kernels(rudnn_queue_t queue) { return RUDNN_FAMILY_TABLE(queue->context->backend, moe); }

static rudnn_status_t no_kernel(const char *op, rudnn_queue_t queue, const char *what)
{
    return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: backend '%s' has no %s kernel", op,
                           queue->context->backend->name, what);
}

/* Creates the plan and runs the routing kernel (grouped: the sigmoid one with bias). */
static rudnn_status_t route_run(const char *op, rudnn_queue_t queue, const rudnn_tensor_t *logits,
                                const rudnn_tensor_t *bias, rudnn_route_kernel_plan_t kp, int grouped,
                                rudnn_routing_plan_t *plan)
{
    const rudnn_moe_kernels_t *k = moe_kernels(queue);
    if (!k || (grouped ? !k->route_sigmoid_grouped : !k->route_softmax))
        return no_kernel(op, queue, grouped ? "grouped sigmoid routing" : "softmax routing");
    rudnn_routing_plan_t p = NULL;
    TRY(plan_create(op, queue, logits, kp.top_k, &p));
    if (p->tokens > 0) {
        kp.dtype = p->dtype;
        kp.tokens = p->tokens;
        kp.experts = p->experts;
        rudnn_mem_ref_t indices = {p->mem->mem, 0}, weights = {p->mem->mem, p->weights_offset};
        rudnn_status_t st = grouped ? k->route_sigmoid_grouped(queue->handle, &kp, rudnn_mem_of(logits),
                                                               rudnn_mem_of(bias), indices, weights)
                                    : k->route_softmax(queue->handle, &kp, rudnn_mem_of(logits), indices, weights);
        if (st) {
            rudnn_routing_plan_destroy(p);
            return rudnn_kernel_status(op, st);
        }
    }
    *plan = p;
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t route_softmax(rudnn_queue_t queue, const rudnn_tensor_t *logits,
                                    const rudnn_routing_options_t *options, rudnn_routing_plan_t *plan)
{
    const char *op = "moe_route";
    TRY(rudnn_check_queue(op, queue));
    TRY(rudnn_check_arg(op, "options", options));
    TRY(rudnn_check_arg(op, "plan", plan));
    TRY(check_logits(op, queue, logits));
    int64_t experts = logits->dims[1];
    if (options->top_k < 1 || options->top_k > experts)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: top_k = %d, expected 1 <= top_k <= experts (%lld)",
                               op, options->top_k, (long long)experts);
    rudnn_route_kernel_plan_t kp = {.top_k = options->top_k, .renormalize = options->renormalize != 0};
    return route_run(op, queue, logits, NULL, kp, 0, plan);
}

rudnn_status_t rudnn_moe_route(rudnn_queue_t queue, const rudnn_tensor_t *logits,
                               const rudnn_routing_options_t *options, rudnn_routing_plan_t *plan)
{
    rudnn_clear_error();
    return route_softmax(queue, logits, options, plan);
}

static rudnn_status_t check_grouped_options(const char *op, const rudnn_grouped_routing_options_t *o,
                                            int64_t experts)
{
    if (experts < 1 || experts > RUDNN_MOE_GROUPED_MAX_EXPERTS)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: logits has %lld experts, expected 1..%d", op,
                               (long long)experts, RUDNN_MOE_GROUPED_MAX_EXPERTS);
    if (o->groups < 1 || o->groups > RUDNN_MOE_GROUPED_MAX_GROUPS)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: groups = %d, expected 1..%d", op, o->groups,
                               RUDNN_MOE_GROUPED_MAX_GROUPS);
    if (experts % o->groups)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: experts (%lld) is not divisible by groups (%d)", op,
                               (long long)experts, o->groups);
    if (o->selected_groups < 1 || o->selected_groups > o->groups)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: selected_groups = %d, expected 1..groups (%d)", op,
                               o->selected_groups, o->groups);
    if (o->top_k < 1 || o->top_k > RUDNN_MOE_GROUPED_MAX_TOP_K)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: top_k = %d, expected 1..%d", op, o->top_k,
                               RUDNN_MOE_GROUPED_MAX_TOP_K);
    int64_t per_group = experts / o->groups;
    if (o->top_k > per_group * o->selected_groups)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               "%s: top_k = %d exceeds the experts in the selected groups (%d x %lld = %lld)", op,
                               o->top_k, o->selected_groups, (long long)per_group,
                               (long long)(per_group * o->selected_groups));
    if (o->group_top_two && per_group < 2)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               "%s: group_top_two needs >= 2 experts per group, groups have %lld", op,
                               (long long)per_group);
    if (!isfinite(o->scale) || !(o->scale > 0.0f))
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: scale = %g, expected a finite value > 0", op,
                               (double)o->scale);
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t route_grouped(rudnn_queue_t queue, const rudnn_tensor_t *logits,
                                    const rudnn_tensor_t *bias, const rudnn_grouped_routing_options_t *options,
                                    rudnn_routing_plan_t *plan)
{
    const char *op = "moe_route_sigmoid_grouped";
    TRY(rudnn_check_queue(op, queue));
    TRY(rudnn_check_arg(op, "options", options));
    TRY(rudnn_check_arg(op, "plan", plan));
    TRY(check_logits(op, queue, logits));
    int64_t experts = logits->dims[1];
    TRY(check_grouped_options(op, options, experts));
    if (bias) {
        TRY(rudnn_check_tensor(op, "bias", queue, bias, 1));
        TRY(rudnn_check_vector(op, "bias", bias, experts, "one correction per expert"));
        TRY(rudnn_check_dtype(op, "bias", bias, RUDNN_F32, "the selection bias is f32"));
    }
    rudnn_route_kernel_plan_t kp = {.top_k = options->top_k, .renormalize = options->renormalize != 0,
                                    .groups = options->groups, .selected_groups = options->selected_groups,
                                    .group_top_two = options->group_top_two != 0, .scale = options->scale};
    return route_run(op, queue, logits, bias, kp, 1, plan);
}

rudnn_status_t rudnn_moe_route_sigmoid_grouped(rudnn_queue_t queue, const rudnn_tensor_t *logits,
                                               const rudnn_tensor_t *bias,
                                               const rudnn_grouped_routing_options_t *options,
                                               rudnn_routing_plan_t *plan)
{
    rudnn_clear_error();
    return route_grouped(queue, logits, bias, options, plan);
}

void rudnn_routing_plan_destroy(rudnn_routing_plan_t p)
{
    if (!p || atomic_fetch_sub(&p->refs, 1) > 1)
        return;
    moe_free(p->mem);
    free(p);
    rudnn_live_object(-1);
}

rudnn_status_t rudnn_routing_plan_indices(rudnn_routing_plan_t p, rudnn_tensor_t *t)
{
    rudnn_clear_error();
    if (!p || !t)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "routing_plan_indices: %s is NULL", p ? "tensor" : "plan");
    view(t, p->mem, RUDNN_U32, 2, p->tokens, p->top_k);
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_routing_plan_weights(rudnn_routing_plan_t p, rudnn_tensor_t *t)
{
    rudnn_clear_error();
    if (!p || !t)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "routing_plan_weights: %s is NULL", p ? "tensor" : "plan");
    view_at(t, p->mem, p->weights_offset, p->dtype, 2, p->tokens, p->top_k);
    return RUDNN_STATUS_SUCCESS;
}

/* ---- dispatch and combine -------------------------------------------------------- */

static rudnn_moe_rows_plan_t rows_plan(rudnn_routing_plan_t p, rudnn_dtype_t dtype, int64_t hidden)
{
    rudnn_moe_rows_plan_t rp = {.dtype = dtype, .weight_dtype = p->dtype, .tokens = p->tokens,
                                .top_k = p->top_k, .experts = p->experts, .hidden = hidden,
                                .rows = p->tokens * p->top_k};
    return rp;
}

static rudnn_status_t dispatch(rudnn_queue_t queue, rudnn_routing_plan_t plan,
                               const rudnn_tensor_t *input, rudnn_dispatched_t *out)
{
    const char *op = "moe_dispatch";
    TRY(rudnn_check_queue(op, queue));
    TRY(rudnn_check_arg(op, "plan", plan));
    TRY(rudnn_check_arg(op, "dispatched", out));
    if (plan->context != queue->context)
        return rudnn_set_error(RUDNN_STATUS_DEVICE_MISMATCH, "%s: plan was made on another context than the queue",
                               op);
    TRY(rudnn_check_tensor(op, "input", queue, input, 2));
    TRY(rudnn_check_float_dtype(op, "input", input));
    if (input->rank != 2 || input->dims[0] != plan->tokens || input->dims[1] < 1) {
        char s[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE,
                               "%s: input has shape %s, expected [%lld, hidden >= 1] (tokens of the plan)", op,
                               rudnn_shape_str(input, s, sizeof s), (long long)plan->tokens);
    }
    const rudnn_moe_kernels_t *k = moe_kernels(queue);
    if (!k || !k->dispatch_plan || !k->dispatch_gather)
        return no_kernel(op, queue, "dispatch");

    rudnn_dispatched_t d = rudnn_host_calloc(1, sizeof *d);
    if (!d)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory", op);
    rudnn_live_object(+1);
    d->context = queue->context;
    d->dtype = input->dtype;
    d->hidden = input->dims[1];
    d->rows = plan->tokens * plan->top_k;
    atomic_fetch_add(&plan->refs, 1);
    d->plan = plan;
    size_t rows = (size_t)d->rows;
    rudnn_status_t st = moe_alloc(queue, rows * (size_t)d->hidden * rudnn_dtype_size(d->dtype),
                                  &d->tokens);
    if (!st)
        st = moe_alloc(queue, (size_t)plan->experts * 4, &d->counts);
    if (!st)
        st = moe_alloc(queue, ((size_t)plan->experts + 1) * 4, &d->offsets);
    if (!st)
        st = moe_alloc(queue, rows * 4, &d->positions);
    if (!st)
        st = moe_alloc(queue, rows * 4, &d->row_token);
    if (!st) {
        rudnn_moe_rows_plan_t rp = rows_plan(plan, d->dtype, d->hidden);
        if (rp.rows > 0) {
            st = k->dispatch_plan(queue->handle, &rp, (rudnn_mem_ref_t){plan->mem->mem, 0},
                                  (rudnn_mem_ref_t){d->counts->mem, 0}, (rudnn_mem_ref_t){d->offsets->mem, 0},
                                  (rudnn_mem_ref_t){d->positions->mem, 0}, (rudnn_mem_ref_t){d->row_token->mem, 0});
            if (!st)
                st = k->dispatch_gather(queue->handle, &rp, rudnn_mem_of(input),
                                        (rudnn_mem_ref_t){d->row_token->mem, 0}, (rudnn_mem_ref_t){d->tokens->mem, 0});
        } else { /* T = 0: every expert got no row */
            st = queue->context->backend->mem_fill(queue->handle, (rudnn_mem_ref_t){d->counts->mem, 0}, 0,
                                                   (size_t)plan->experts * 4);
            if (!st)
                st = queue->context->backend->mem_fill(queue->handle, (rudnn_mem_ref_t){d->offsets->mem, 0}, 0,
                                                       ((size_t)plan->experts + 1) * 4);
        }
    }
    if (st) {
        rudnn_kernel_status(op, st); /* names the op for allocation failures too */
        rudnn_dispatched_destroy(d);
        return st;
    }
    *out = d;
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_moe_dispatch(rudnn_queue_t queue, rudnn_routing_plan_t plan, const rudnn_tensor_t *input,
                                  rudnn_dispatched_t *dispatched)
{
    rudnn_clear_error();
    return dispatch(queue, plan, input, dispatched);
}

void rudnn_dispatched_destroy(rudnn_dispatched_t d)
{
    if (!d)
        return;
    moe_free(d->tokens);
    moe_free(d->counts);
    moe_free(d->offsets);
    moe_free(d->positions);
    moe_free(d->row_token);
    rudnn_routing_plan_destroy(d->plan);
    free(d);
    rudnn_live_object(-1);
}

static rudnn_status_t dispatched_view(const char *op, rudnn_dispatched_t d, rudnn_tensor_t *t)
{
    rudnn_clear_error();
    if (!d || !t)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is NULL", op, d ? "tensor" : "dispatched");
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_dispatched_tokens(rudnn_dispatched_t d, rudnn_tensor_t *t)
{
    TRY(dispatched_view("dispatched_tokens", d, t));
    view(t, d->tokens, d->dtype, 2, d->rows, d->hidden);
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_dispatched_counts(rudnn_dispatched_t d, rudnn_tensor_t *t)
{
    TRY(dispatched_view("dispatched_counts", d, t));
    view(t, d->counts, RUDNN_U32, 1, d->plan->experts, 0);
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_dispatched_offsets(rudnn_dispatched_t d, rudnn_tensor_t *t)
{
    TRY(dispatched_view("dispatched_offsets", d, t));
    view(t, d->offsets, RUDNN_U32, 1, (int64_t)d->plan->experts + 1, 0);
    return RUDNN_STATUS_SUCCESS;
}

const char *const rudnn_dispatched_array_names[RUDNN_DISPATCHED_ARRAYS] = {
    "the dispatched tokens",          "the dispatched counts",        "the dispatched expert offsets",
    "the dispatched positions",       "the dispatched row tokens",    "the routing plan's indices",
    "the routing plan's weights"};

void rudnn_dispatched_arrays(rudnn_dispatched_t d, rudnn_tensor_t views[RUDNN_DISPATCHED_ARRAYS])
{
    const rudnn_routing_plan_t p = d->plan;
    view(&views[0], d->tokens, d->dtype, 2, d->rows, d->hidden);
    view(&views[1], d->counts, RUDNN_U32, 1, p->experts, 0);
    view(&views[2], d->offsets, RUDNN_U32, 1, (int64_t)p->experts + 1, 0);
    view(&views[3], d->positions, RUDNN_U32, 2, p->tokens, p->top_k);
    view(&views[4], d->row_token, RUDNN_U32, 1, d->rows, 0);
    view(&views[5], p->mem, RUDNN_U32, 2, p->tokens, p->top_k);
    view_at(&views[6], p->mem, p->weights_offset, p->dtype, 2, p->tokens, p->top_k);
}

rudnn_status_t rudnn_check_off_dispatched(const char *op, const char *arg, const rudnn_tensor_t *t,
                                          rudnn_dispatched_t d)
{
    rudnn_tensor_t views[RUDNN_DISPATCHED_ARRAYS];
    rudnn_dispatched_arrays(d, views);
    for (int i = 0; i < RUDNN_DISPATCHED_ARRAYS; i++)
        TRY(rudnn_check_disjoint(op, arg, t, rudnn_dispatched_array_names[i], &views[i]));
    return RUDNN_STATUS_SUCCESS;
}

int rudnn_dispatched_arrays_append(rudnn_dispatched_t d, rudnn_tensor_t views[RUDNN_DISPATCHED_ARRAYS],
                                   const rudnn_tensor_t **tensors, const char **names, int n)
{
    rudnn_dispatched_arrays(d, views);
    for (int i = 0; i < RUDNN_DISPATCHED_ARRAYS; i++) {
        tensors[n + i] = &views[i];
        names[n + i] = rudnn_dispatched_array_names[i];
    }
    return n + RUDNN_DISPATCHED_ARRAYS;
}

rudnn_status_t rudnn_dispatched_positions(rudnn_dispatched_t d, rudnn_tensor_t *t)
{
    TRY(dispatched_view("dispatched_positions", d, t));
    view(t, d->positions, RUDNN_U32, 2, d->plan->tokens, d->plan->top_k);
    return RUDNN_STATUS_SUCCESS;
}

/* expert_output [rows, H] in the dispatched dtype. */
static rudnn_status_t check_expert_output(const char *op, rudnn_queue_t queue, rudnn_dispatched_t d,
                                          const rudnn_tensor_t *t)
{
    TRY(rudnn_check_tensor(op, "expert_output", queue, t, 2));
    if (t->rank != 2 || t->dims[0] != d->rows || t->dims[1] != d->hidden) {
        char s[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: expert_output has shape %s, expected [%lld, %lld] "
                               "(dispatched rows, hidden)", op, rudnn_shape_str(t, s, sizeof s),
                               (long long)d->rows, (long long)d->hidden);
    }
    if (t->dtype != d->dtype)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: expert_output has dtype %s, expected %s (dispatched dtype)",
                               op, rudnn_dtype_name(t->dtype), rudnn_dtype_name(d->dtype));
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t combine(rudnn_queue_t queue, rudnn_dispatched_t d, const rudnn_tensor_t *expert_output,
                              const rudnn_tensor_t *output)
{
    const char *op = "moe_combine";
    TRY(rudnn_check_queue(op, queue));
    TRY(rudnn_check_arg(op, "dispatched", d));
    if (d->context != queue->context)
        return rudnn_set_error(RUDNN_STATUS_DEVICE_MISMATCH,
                               "%s: dispatched tokens were made on another context than the queue", op);
    TRY(check_expert_output(op, queue, d, expert_output));
    TRY(rudnn_check_tensor(op, "output", queue, output, 2));
    if (output->rank != 2 || output->dims[0] != d->plan->tokens || output->dims[1] != d->hidden) {
        char s[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: output has shape %s, expected [%lld, %lld] (tokens, hidden)",
                               op, rudnn_shape_str(output, s, sizeof s), (long long)d->plan->tokens,
                               (long long)d->hidden);
    }
    if (output->dtype != d->dtype)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: output has dtype %s, expected %s (dispatched dtype)", op,
                               rudnn_dtype_name(output->dtype), rudnn_dtype_name(d->dtype));
    TRY(rudnn_check_overlap(op, "output", output, "expert_output", expert_output));
    if (output->buffer == expert_output->buffer && output->offset == expert_output->offset &&
        rudnn_tensor_bytes(output) > 0)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: output must not alias expert_output", op);
    TRY(rudnn_check_off_dispatched(op, "output", output, d));
    const rudnn_moe_kernels_t *k = moe_kernels(queue);
    if (!k || !k->combine)
        return no_kernel(op, queue, "combine");
    rudnn_moe_rows_plan_t rp = rows_plan(d->plan, d->dtype, d->hidden);
    if (rp.tokens == 0)
        return RUDNN_STATUS_SUCCESS;
    return rudnn_kernel_status(op, k->combine(queue->handle, &rp, rudnn_mem_of(expert_output),
                                              (rudnn_mem_ref_t){d->positions->mem, 0},
                                              (rudnn_mem_ref_t){d->plan->mem->mem, d->plan->weights_offset},
                                              rudnn_mem_of(output)));
}

void rudnn_dispatched_info(rudnn_dispatched_t d, rudnn_dispatched_info_t *info)
{
    const rudnn_routing_plan_t p = d->plan;
    *info = (rudnn_dispatched_info_t){.context = d->context, .dtype = d->dtype, .weight_dtype = p->dtype,
                                      .tokens = p->tokens, .hidden = d->hidden, .rows = d->rows,
                                      .top_k = p->top_k, .experts = p->experts,
                                      .positions = {d->positions->mem, 0},
                                      .weights = {p->mem->mem, p->weights_offset}};
}

void rudnn_swiglu_experts_info(rudnn_swiglu_experts_t x, rudnn_swiglu_experts_info_t *info)
{
    *info = (rudnn_swiglu_experts_info_t){.context = x->context, .dtype = x->dtype, .experts = x->experts,
                                          .inter = x->inter, .hidden = x->hidden, .gate = &x->gate, .up = &x->up,
                                          .down = &x->down};
}

rudnn_status_t rudnn_moe_combine(rudnn_queue_t queue, rudnn_dispatched_t d, const rudnn_tensor_t *expert_output,
                                 const rudnn_tensor_t *output)
{
    rudnn_clear_error();
    return combine(queue, d, expert_output, output);
}

/* ---- SwiGLU experts ------------------------------------------------------------------ */

static rudnn_status_t check_weight(const char *op, const char *arg, rudnn_context_t ctx, const rudnn_tensor_t *t)
{
    if (!t)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is NULL", op, arg);
    if (!t->buffer)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s has no buffer", op, arg);
    if (t->buffer->context != ctx)
        return rudnn_set_error(RUDNN_STATUS_DEVICE_MISMATCH, "%s: %s is on another context/device", op, arg);
    /* the remaining checks need a queue only for its context */
    struct rudnn_queue probe = {.context = ctx};
    TRY(rudnn_check_tensor(op, arg, &probe, t, 3));
    if (t->rank != 3) {
        char s[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has shape %s, expected rank 3", op, arg,
                               rudnn_shape_str(t, s, sizeof s));
    }
    return rudnn_check_float_dtype(op, arg, t);
}

rudnn_status_t rudnn_swiglu_experts_create(rudnn_context_t ctx, const rudnn_tensor_t *gate, const rudnn_tensor_t *up,
                                           const rudnn_tensor_t *down, rudnn_swiglu_experts_t *experts)
{
    const char *op = "swiglu_experts_create";
    rudnn_clear_error();
    TRY(rudnn_check_arg(op, "context", ctx));
    TRY(rudnn_check_arg(op, "experts", experts));
    TRY(check_weight(op, "gate", ctx, gate));
    TRY(check_weight(op, "up", ctx, up));
    TRY(check_weight(op, "down", ctx, down));
    int64_t e = gate->dims[0], i = gate->dims[1], h = gate->dims[2];
    if (e < 1 || i < 1 || h < 1) {
        char s[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: gate has shape %s, expected [experts, inter, hidden] >= 1",
                               op, rudnn_shape_str(gate, s, sizeof s));
    }
    TRY(rudnn_check_like(op, "up", up, "gate", gate));
    if (down->dims[0] != e || down->dims[1] != h || down->dims[2] != i) {
        char s[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: down has shape %s, expected [%lld, %lld, %lld] "
                               "([experts, hidden, inter] of gate)", op, rudnn_shape_str(down, s, sizeof s),
                               (long long)e, (long long)h, (long long)i);
    }
    if (down->dtype != gate->dtype)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: down has dtype %s, expected %s (dtype of gate)", op,
                               rudnn_dtype_name(down->dtype), rudnn_dtype_name(gate->dtype));
    if (e > INT32_MAX)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: %lld experts exceed %d", op, (long long)e, INT32_MAX);
    rudnn_swiglu_experts_t x = rudnn_host_calloc(1, sizeof *x);
    if (!x)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory", op);
    /* the weights' buffers and the context stay alive as long as the experts */
    rudnn_context_retain(ctx);
    rudnn_buffer_hold(gate->buffer);
    rudnn_buffer_hold(up->buffer);
    rudnn_buffer_hold(down->buffer);
    rudnn_live_object(+1);
    x->context = ctx;
    x->gate = *gate;
    x->up = *up;
    x->down = *down;
    x->dtype = gate->dtype;
    x->experts = e;
    x->inter = i;
    x->hidden = h;
    atomic_init(&x->pinned, -1);
    *experts = x;
    return RUDNN_STATUS_SUCCESS;
}

void rudnn_swiglu_experts_destroy(rudnn_swiglu_experts_t experts)
{
    if (!experts)
        return;
    rudnn_context_t ctx = experts->context;
    rudnn_buffer_release(experts->gate.buffer);
    rudnn_buffer_release(experts->up.buffer);
    rudnn_buffer_release(experts->down.buffer);
    free(experts);
    rudnn_live_object(-1);
    rudnn_context_release(ctx);
}

/* ---- which expert kernel runs ---------------------------------------------------------------
 * The backend lists its expert kernels as candidates, most preferred first (hal/table.h); this is
 * the one place that picks among them. What rudnn_swiglu_experts_choose reports is what the
 * forward with the same arguments runs: the backend runs the candidate picked here or fails. */

/* Largest power of two (<= 256) dividing offset: device allocations are 256-byte aligned. */
static uint32_t offset_align(size_t offset)
{
    uint32_t a = 256;
    while (a > 1 && offset % a)
        a >>= 1;
    return a;
}

/* The kernel plan of the weights for rows dispatched rows (rows 0: not known yet); expert_output
 * NULL stands for a pooled block (256-byte aligned), as are the dispatched tokens and the act
 * workspace (pooled, or the caller's workspace buffer at offset 0). */
static rudnn_moe_rows_plan_t experts_plan(rudnn_swiglu_experts_t x, int64_t rows, const rudnn_tensor_t *expert_output)
{
    uint32_t align = offset_align(x->gate.offset);
    const size_t offsets[3] = {x->up.offset, x->down.offset, expert_output ? expert_output->offset : 0};
    for (int i = 0; i < 3; i++) {
        uint32_t a = offset_align(offsets[i]);
        align = a < align ? a : align;
    }
    rudnn_moe_rows_plan_t rp = {.dtype = x->dtype, .weight_dtype = x->dtype, .experts = (int32_t)x->experts,
                                .hidden = x->hidden, .inter = x->inter, .rows = rows, .align = align};
    return rp;
}

static const char *strategy_name(rudnn_moe_strategy_t s)
{
    return s == RUDNN_MOE_SCALAR ? "Scalar" : s == RUDNN_MOE_TENSOR_CORE ? "TensorCore" : "Auto";
}

/* Appends "; <what>: <why>" (or "<what>: <why>" first) to the reason of choice. */
static void add_reason(rudnn_moe_choice_t *choice, const char *what, const char *why)
{
    size_t n = strlen(choice->reason);
    if (n + 3 < sizeof choice->reason)
        snprintf(choice->reason + n, sizeof choice->reason - n, "%s%s: %s", n ? "; " : "", what, why);
}

/* Records candidate i of k as the choice, and why. */
static void pick(const rudnn_moe_kernels_t *k, uint32_t i, const char *why, uint32_t *picked,
                 rudnn_moe_choice_t *choice)
{
    *picked = i;
    choice->strategy = (rudnn_moe_strategy_t)k->experts_candidates[i].strategy;
    choice->kernel = k->experts_candidates[i].name;
    add_reason(choice, choice->kernel, why);
}

static rudnn_status_t experts_kernels(const char *op, rudnn_swiglu_experts_t x, const rudnn_moe_kernels_t **k)
{
    *k = RUDNN_FAMILY_TABLE(x->context->backend, moe);
    if (!*k || !(*k)->experts_candidate_count)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: backend '%s' has no expert kernels", op,
                               x->context->backend->name);
    return RUDNN_STATUS_SUCCESS;
}

/* Picks the candidate for requested on plan rp: the kernel named by swiglu_experts_set_kernel,
 * else, among the candidates of the requested strategy (Auto: all) that run, the first the
 * backend prefers on this device, or the first that runs when it prefers none. */
static rudnn_status_t choose(const char *op, rudnn_swiglu_experts_t x, const rudnn_moe_rows_plan_t *rp,
                             rudnn_moe_strategy_t requested, uint32_t *picked, rudnn_moe_choice_t *choice)
{
    memset(choice, 0, sizeof *choice);
    if (requested != RUDNN_MOE_SCALAR && requested != RUDNN_MOE_AUTO && requested != RUDNN_MOE_TENSOR_CORE)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: strategy %d is not a rudnn_moe_strategy_t", op,
                               (int)requested);
    const rudnn_moe_kernels_t *k;
    TRY(experts_kernels(op, x, &k));
    const char *backend = x->context->backend->name;
    rudnn_candidate_verdict_t v;
    const int pinned = atomic_load(&x->pinned); /* once: set_kernel may change it meanwhile */
    if (pinned >= 0) {
        const rudnn_kernel_candidate_t *c = &k->experts_candidates[pinned];
        if (requested != RUDNN_MOE_AUTO && c->strategy != (int)requested)
            return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: kernel '%s' (swiglu_experts_set_kernel) is a %s "
                                   "kernel, the call asks for %s", op, c->name,
                                   strategy_name((rudnn_moe_strategy_t)c->strategy), strategy_name(requested));
        memset(&v, 0, sizeof v);
        k->experts_check(x->context->device, rp, (uint32_t)pinned, &v);
        if (!v.runs)
            return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: kernel '%s' (swiglu_experts_set_kernel) cannot "
                                   "run on backend '%s' with %s weights [%lld experts, inter %lld, hidden %lld]: %s",
                                   op, c->name, backend, rudnn_dtype_name(x->dtype), (long long)x->experts,
                                   (long long)x->inter, (long long)x->hidden, v.why);
        pick(k, (uint32_t)pinned, "named by swiglu_experts_set_kernel", picked, choice);
        return RUDNN_STATUS_SUCCESS;
    }
    int64_t first_runs = -1;
    for (uint32_t i = 0; i < k->experts_candidate_count; i++) {
        const rudnn_kernel_candidate_t *c = &k->experts_candidates[i];
        if ((c->flags & RUDNN_CANDIDATE_NAMED_ONLY) || (requested != RUDNN_MOE_AUTO && c->strategy != (int)requested))
            continue;
        memset(&v, 0, sizeof v);
        k->experts_check(x->context->device, rp, i, &v);
        if (v.runs && first_runs < 0)
            first_runs = i;
        if (!v.runs || !v.preferred) {
            add_reason(choice, c->name, v.why[0] ? v.why : "passed over, no reason given");
            continue;
        }
        pick(k, i, "chosen", picked, choice);
        return RUDNN_STATUS_SUCCESS;
    }
    if (first_runs >= 0) {
        pick(k, (uint32_t)first_runs, "chosen, the first that runs (none is preferred here)", picked, choice);
        return RUDNN_STATUS_SUCCESS;
    }
    return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: %s strategy on backend '%s' with %s weights: no kernel "
                           "runs here (%s)", op, strategy_name(requested), backend, rudnn_dtype_name(x->dtype),
                           choice->reason[0] ? choice->reason : "the backend offers none of this strategy");
}

rudnn_status_t rudnn_swiglu_experts_kernel_count(rudnn_swiglu_experts_t x, int *count)
{
    const char *op = "swiglu_experts_kernel_count";
    rudnn_clear_error();
    if (!x || !count)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is NULL", op, x ? "count" : "experts");
    const rudnn_moe_kernels_t *k;
    TRY(experts_kernels(op, x, &k));
    *count = (int)k->experts_candidate_count;
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_swiglu_experts_kernel_info(rudnn_swiglu_experts_t x, int index, const char **name,
                                                rudnn_moe_strategy_t *strategy)
{
    const char *op = "swiglu_experts_kernel_info";
    rudnn_clear_error();
    if (!x || !name || !strategy)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is NULL", op,
                               !x ? "experts" : !name ? "name" : "strategy");
    const rudnn_moe_kernels_t *k;
    TRY(experts_kernels(op, x, &k));
    if (index < 0 || (uint32_t)index >= k->experts_candidate_count)
        return rudnn_set_error(RUDNN_STATUS_OUT_OF_BOUNDS, "%s: index %d, backend '%s' has %u expert kernels", op,
                               index, x->context->backend->name, k->experts_candidate_count);
    *name = k->experts_candidates[index].name;
    *strategy = (rudnn_moe_strategy_t)k->experts_candidates[index].strategy;
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_swiglu_experts_set_kernel(rudnn_swiglu_experts_t x, const char *name)
{
    const char *op = "swiglu_experts_set_kernel";
    rudnn_clear_error();
    if (!x)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: experts is NULL", op);
    if (!name) {
        atomic_store(&x->pinned, -1);
        return RUDNN_STATUS_SUCCESS;
    }
    const rudnn_moe_kernels_t *k;
    TRY(experts_kernels(op, x, &k));
    char known[256] = "";
    for (uint32_t i = 0; i < k->experts_candidate_count; i++) {
        if (strcmp(k->experts_candidates[i].name, name) == 0) {
            atomic_store(&x->pinned, (int)i);
            return RUDNN_STATUS_SUCCESS;
        }
        size_t n = strlen(known);
        snprintf(known + n, sizeof known - n, "%s%s", n ? ", " : "", k->experts_candidates[i].name);
    }
    return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: backend '%s' has no expert kernel '%s' (it has: %s)", op,
                           x->context->backend->name, name, known);
}

rudnn_status_t rudnn_swiglu_experts_choose(rudnn_swiglu_experts_t x, rudnn_dispatched_t dispatched,
                                           const rudnn_tensor_t *expert_output, rudnn_moe_strategy_t requested,
                                           rudnn_moe_choice_t *choice)
{
    const char *op = "swiglu_experts_choose";
    rudnn_clear_error();
    if (!x || !choice)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is NULL", op, x ? "choice" : "experts");
    rudnn_moe_rows_plan_t rp = experts_plan(x, dispatched ? dispatched->rows : 0, expert_output);
    uint32_t picked;
    return choose(op, x, &rp, requested, &picked, choice);
}

rudnn_status_t rudnn_swiglu_experts_resolve(rudnn_swiglu_experts_t x, rudnn_moe_strategy_t requested,
                                            rudnn_moe_strategy_t *resolved)
{
    const char *op = "swiglu_experts_resolve";
    rudnn_clear_error();
    if (!x || !resolved)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is NULL", op, x ? "resolved" : "experts");
    rudnn_moe_rows_plan_t rp = experts_plan(x, 0, NULL);
    rudnn_moe_choice_t choice;
    uint32_t picked;
    TRY(choose(op, x, &rp, requested, &picked, &choice));
    *resolved = choice.strategy;
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t workspace_bytes(const char *op, rudnn_swiglu_experts_t x, const rudnn_moe_rows_plan_t *rp,
                                      uint32_t picked, size_t *bytes)
{
    const rudnn_moe_kernels_t *k;
    TRY(experts_kernels(op, x, &k));
    /* every candidate stages act [rows, inter] in the dtype; a backend whose candidate needs more
     * (CLBlast's F32 staging) says so */
    size_t act;
    if (rp->rows < 0 || __builtin_mul_overflow((uint64_t)rp->rows, (uint64_t)rp->inter, &act) ||
        __builtin_mul_overflow(act, rudnn_dtype_size(rp->dtype), &act))
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: the act workspace [rows %lld, inter %lld] in %s "
                               "exceeds the address space", op, (long long)rp->rows, (long long)rp->inter,
                               rudnn_dtype_name(rp->dtype));
    *bytes = act;
    if (!k->experts_workspace)
        return RUDNN_STATUS_SUCCESS;
    return rudnn_kernel_status(op, k->experts_workspace(x->context->device, rp, picked, bytes));
}

rudnn_status_t rudnn_swiglu_experts_workspace_size(rudnn_swiglu_experts_t x, int64_t rows,
                                                   rudnn_moe_strategy_t strategy, size_t *bytes)
{
    const char *op = "swiglu_experts_workspace_size";
    rudnn_clear_error();
    if (!x || !bytes)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is NULL", op, x ? "bytes" : "experts");
    if (rows < 0)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: rows = %lld, expected >= 0", op, (long long)rows);
    rudnn_moe_rows_plan_t rp = experts_plan(x, rows, NULL);
    rudnn_moe_choice_t choice;
    uint32_t picked;
    TRY(choose(op, x, &rp, strategy, &picked, &choice));
    return workspace_bytes(op, x, &rp, picked, bytes);
}

/* Bytes [begin, end) of buffer b, which the call writes, must not meet the weights of x: every
 * row reads them all while the output is written. */
static rudnn_status_t check_off_weights(const char *op, const char *arg, rudnn_swiglu_experts_t x, rudnn_buffer_t b,
                                        size_t begin, size_t end)
{
    const rudnn_tensor_t *weights[3] = {&x->gate, &x->up, &x->down};
    static const char *const names[3] = {"gate", "up", "down"};
    for (int i = 0; i < 3; i++) {
        const rudnn_tensor_t *w = weights[i];
        if (b == w->buffer && begin < end && begin < w->offset + rudnn_tensor_bytes(w) && w->offset < end)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s overlaps the %s weights", op, arg, names[i]);
    }
    return RUDNN_STATUS_SUCCESS;
}

/* What both forwards check once their operands are known: the candidate for rp (choose), its
 * workspace need, and the caller's workspace: its context and size, and that it meets neither
 * expert_output, the weights nor rows (the tokens a grouped forward reads; NULL for dispatched
 * tokens, which are pooled). */
static rudnn_status_t experts_prepare(const char *op, rudnn_queue_t queue, rudnn_swiglu_experts_t x,
                                      const rudnn_moe_rows_plan_t *rp, rudnn_moe_strategy_t strategy,
                                      rudnn_buffer_t workspace, size_t workspace_size,
                                      const rudnn_tensor_t *expert_output, const rudnn_tensor_t *rows,
                                      uint32_t *picked, size_t *need)
{
    rudnn_moe_choice_t choice;
    TRY(choose(op, x, rp, strategy, picked, &choice));
    *need = 0;
    TRY(workspace_bytes(op, x, rp, *picked, need));
    if (workspace) {
        if (workspace->context != queue->context)
            return rudnn_set_error(RUDNN_STATUS_DEVICE_MISMATCH, "%s: workspace is on another context", op);
        if (workspace_size < *need || workspace_size > workspace->size)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: workspace_bytes = %zu (buffer %zu bytes), need %zu "
                                   "for kernel %s (rudnn_swiglu_experts_workspace_size)", op, workspace_size,
                                   workspace->size, *need, choice.kernel);
        if (workspace == expert_output->buffer && expert_output->offset < workspace_size &&
            rudnn_tensor_bytes(expert_output) > 0)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                                   "%s: expert_output overlaps the first workspace_bytes of workspace", op);
        if (rows && workspace == rows->buffer && rows->offset < workspace_size && rudnn_tensor_bytes(rows) > 0)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: rows overlaps the first workspace_bytes of "
                                   "workspace (the kernel writes it while it reads rows)", op);
        TRY(check_off_weights(op, "workspace", x, workspace, 0, workspace_size));
    }
    return RUDNN_STATUS_SUCCESS;
}

/* Runs candidate picked on run (rows >= 1): the act workspace is the caller's or a pooled block of
 * need bytes. */
static rudnn_status_t experts_launch(const char *op, rudnn_queue_t queue, rudnn_swiglu_experts_t x,
                                     const rudnn_moe_rows_plan_t *run, uint32_t picked, size_t need,
                                     rudnn_buffer_t workspace, rudnn_mem_ref_t tokens, rudnn_mem_ref_t offsets,
                                     const rudnn_tensor_t *expert_output)
{
    const rudnn_moe_kernels_t *k = RUDNN_FAMILY_TABLE(queue->context->backend, moe);
    void *act;
    TRY(rudnn_scratch_begin(op, queue, workspace, need, &act));
    rudnn_status_t st = k->experts_run(queue->handle, run, picked, tokens, offsets, rudnn_mem_of(&x->gate),
                                       rudnn_mem_of(&x->up), rudnn_mem_of(&x->down), (rudnn_mem_ref_t){act, 0},
                                       rudnn_mem_of(expert_output));
    rudnn_scratch_end(queue, workspace, act, need);
    return rudnn_kernel_status(op, st);
}

static rudnn_status_t forward_dispatched(rudnn_queue_t queue, rudnn_swiglu_experts_t x, rudnn_dispatched_t d,
                                         rudnn_moe_strategy_t strategy, rudnn_buffer_t workspace,
                                         size_t workspace_size, const rudnn_tensor_t *expert_output)
{
    const char *op = "swiglu_experts_forward_dispatched";
    TRY(rudnn_check_queue(op, queue));
    TRY(rudnn_check_arg(op, "experts", x));
    TRY(rudnn_check_arg(op, "dispatched", d));
    if (x->context != queue->context || d->context != queue->context)
        return rudnn_set_error(RUDNN_STATUS_DEVICE_MISMATCH, "%s: %s on another context than the queue", op,
                               x->context != queue->context ? "experts are" : "dispatched tokens are");
    if (d->plan->experts != x->experts)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: routing chose among %d experts, the weights hold %lld",
                               op, d->plan->experts, (long long)x->experts);
    if (d->hidden != x->hidden)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: dispatched tokens have hidden %lld, the weights %lld",
                               op, (long long)d->hidden, (long long)x->hidden);
    if (d->dtype != x->dtype)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: dispatched tokens are %s, the weights %s (must match)",
                               op, rudnn_dtype_name(d->dtype), rudnn_dtype_name(x->dtype));
    TRY(check_expert_output(op, queue, d, expert_output));
    TRY(check_off_weights(op, "expert_output", x, expert_output->buffer, expert_output->offset,
                          expert_output->offset + rudnn_tensor_bytes(expert_output)));
    TRY(rudnn_check_off_dispatched(op, "expert_output", expert_output, d));
    rudnn_moe_rows_plan_t rp = experts_plan(x, d->rows, expert_output);
    uint32_t picked;
    size_t need;
    TRY(experts_prepare(op, queue, x, &rp, strategy, workspace, workspace_size, expert_output, NULL, &picked,
                        &need));
    rudnn_tensor_t arrays[RUDNN_DISPATCHED_ARRAYS];
    const rudnn_tensor_t *on_d[RUDNN_DISPATCHED_ARRAYS];
    const char *on_d_names[RUDNN_DISPATCHED_ARRAYS];
    const int n = rudnn_dispatched_arrays_append(d, arrays, on_d, on_d_names, 0);
    TRY(rudnn_check_workspace(op, queue, workspace, workspace_size, need, "rudnn_swiglu_experts_workspace_size",
                              on_d, on_d_names, n)); /* experts_prepare checked its context and size */
    if (d->rows == 0)
        return RUDNN_STATUS_SUCCESS;
    rudnn_moe_rows_plan_t run = rows_plan(d->plan, d->dtype, d->hidden);
    run.inter = x->inter;
    run.align = rp.align;
    return experts_launch(op, queue, x, &run, picked, need, workspace, (rudnn_mem_ref_t){d->tokens->mem, 0},
                          (rudnn_mem_ref_t){d->offsets->mem, 0}, expert_output);
}

rudnn_status_t rudnn_swiglu_experts_forward_dispatched(rudnn_queue_t queue, rudnn_swiglu_experts_t experts,
                                                       rudnn_dispatched_t dispatched, rudnn_moe_strategy_t strategy,
                                                       rudnn_buffer_t workspace, size_t workspace_bytes_,
                                                       const rudnn_tensor_t *expert_output)
{
    rudnn_clear_error();
    return forward_dispatched(queue, experts, dispatched, strategy, workspace, workspace_bytes_, expert_output);
}

/* The row ranges of expert_token_nums (I64 [E] on the host: counts, or running totals) as the
 * offsets [E + 1] experts_run takes, after checking them against the R rows of rows. */
static rudnn_status_t grouped_offsets(const char *op, const int64_t *nums, int64_t experts, int totals, int64_t R,
                                      uint32_t *offsets, int64_t *sum)
{
    const char *form = totals ? "running totals" : "counts";
    int64_t at = 0; /* rows of experts 0 .. e */
    offsets[0] = 0;
    for (int64_t e = 0; e < experts; e++) {
        const int64_t v = nums[e];
        if (totals && e == 0 && v < 0)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: expert_token_nums[0] = %lld, expected a running "
                                   "total >= 0", op, (long long)v);
        if (totals && v < at)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: expert_token_nums[%lld] = %lld is below "
                                   "expert_token_nums[%lld] = %lld; running totals (totals != 0) must not "
                                   "decrease", op, (long long)e, (long long)v, (long long)(e - 1),
                                   (long long)at);
        if (!totals && v < 0)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: expert_token_nums[%lld] = %lld, expected a count "
                                   ">= 0", op, (long long)e, (long long)v);
        if (totals ? v > R : v > R - at) /* at <= R: no overflow */
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: expert_token_nums (%s) reach past the %lld rows of "
                                   "rows at expert %lld (%s %lld); expected a sum <= the rows of rows", op, form,
                                   (long long)R, (long long)e, totals ? "total" : "count", (long long)v);
        at = totals ? v : at + v;
        if (at > UINT32_MAX)
            return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: expert_token_nums sum to %lld rows or more, "
                                   "past the u32 row offsets of the expert kernels (%u)", op, (long long)at,
                                   UINT32_MAX);
        offsets[e + 1] = (uint32_t)at;
    }
    *sum = at;
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t forward_grouped(rudnn_queue_t queue, rudnn_swiglu_experts_t x, const rudnn_tensor_t *rows,
                                      const rudnn_tensor_t *nums, int totals, rudnn_moe_strategy_t strategy,
                                      rudnn_buffer_t workspace, size_t workspace_size,
                                      const rudnn_tensor_t *expert_output)
{
    const char *op = "swiglu_experts_forward_grouped";
    TRY(rudnn_check_queue(op, queue));
    TRY(rudnn_check_arg(op, "experts", x));
    if (x->context != queue->context)
        return rudnn_set_error(RUDNN_STATUS_DEVICE_MISMATCH, "%s: experts are on another context than the queue", op);
    TRY(rudnn_check_tensor(op, "rows", queue, rows, 2));
    if (rows->rank != 2 || rows->dims[1] != x->hidden) {
        char s[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: rows has shape %s, expected [rows, %lld] (hidden of "
                               "the weights)", op, rudnn_shape_str(rows, s, sizeof s), (long long)x->hidden);
    }
    if (rows->dtype != x->dtype)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: rows has dtype %s, expected %s (dtype of the weights)",
                               op, rudnn_dtype_name(rows->dtype), rudnn_dtype_name(x->dtype));
    TRY(rudnn_check_tensor(op, "expert_output", queue, expert_output, 2));
    TRY(rudnn_check_like(op, "expert_output", expert_output, "rows", rows));
    TRY(rudnn_check_tensor(op, "expert_token_nums", queue, nums, 1));
    TRY(rudnn_check_dtype(op, "expert_token_nums", nums, RUDNN_I64, "rows per expert"));
    TRY(rudnn_check_vector(op, "expert_token_nums", nums, x->experts, "one per expert of the weights"));
    TRY(rudnn_check_disjoint(op, "expert_output", expert_output, "rows", rows));
    TRY(rudnn_check_disjoint(op, "expert_output", expert_output, "expert_token_nums", nums));
    TRY(check_off_weights(op, "expert_output", x, expert_output->buffer, expert_output->offset,
                          expert_output->offset + rudnn_tensor_bytes(expert_output)));
    /* the strategy and the pinned kernel, for any rows, before the counts cost a synchronisation */
    rudnn_moe_rows_plan_t rp = experts_plan(x, 0, expert_output);
    const uint32_t rows_align = offset_align(rows->offset);
    rp.align = rows_align < rp.align ? rows_align : rp.align;
    rudnn_moe_choice_t choice;
    uint32_t picked;
    TRY(choose(op, x, &rp, strategy, &picked, &choice));

    const int64_t E = x->experts;
    int64_t *host = rudnn_host_malloc((size_t)E * sizeof(int64_t) + ((size_t)E + 1) * sizeof(uint32_t));
    if (!host)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (expert_token_nums)", op);
    uint32_t *offsets = (uint32_t *)(host + E);
    const size_t offsets_bytes = ((size_t)E + 1) * sizeof(uint32_t);
    int64_t sum = 0;
    size_t need = 0;
    void *om = NULL;
    rudnn_status_t st = rudnn_kernel_status(
        op, queue->context->backend->mem_read(queue->handle, rudnn_mem_of(nums), host, (size_t)E * sizeof(int64_t)));
    if (!st)
        st = grouped_offsets(op, host, E, totals, rows->dims[0], offsets, &sum);
    if (!st) {
        rp.rows = sum;
        st = experts_prepare(op, queue, x, &rp, strategy, workspace, workspace_size, expert_output, rows, &picked,
                             &need);
    }
    if (!st && sum > 0)
        st = rudnn_kernel_status(op, rudnn_pool_acquire(queue, offsets_bytes, &om));
    if (!st && sum > 0)
        st = rudnn_kernel_status(op, queue->context->backend->mem_write(queue->handle, (rudnn_mem_ref_t){om, 0},
                                                                         offsets, offsets_bytes));
    if (!st && sum > 0) {
        rudnn_moe_rows_plan_t run = rp;
        run.weight_dtype = x->dtype;
        run.tokens = sum;
        run.top_k = 1;
        st = experts_launch(op, queue, x, &run, picked, need, workspace, rudnn_mem_of(rows),
                            (rudnn_mem_ref_t){om, 0}, expert_output);
    }
    if (om) /* stream order makes the block safe to hand to later work on this queue */
        rudnn_pool_release(queue, om, offsets_bytes);
    free(host);
    return st;
}

rudnn_status_t rudnn_swiglu_experts_forward_grouped(rudnn_queue_t queue, rudnn_swiglu_experts_t experts,
                                                    const rudnn_tensor_t *rows, const rudnn_tensor_t *expert_token_nums,
                                                    int totals, rudnn_moe_strategy_t strategy,
                                                    rudnn_buffer_t workspace, size_t workspace_bytes_,
                                                    const rudnn_tensor_t *expert_output)
{
    rudnn_clear_error();
    return forward_grouped(queue, experts, rows, expert_token_nums, totals, strategy, workspace, workspace_bytes_,
                           expert_output);
}

/* Checks the one-call output against the input before any work is queued. */
static rudnn_status_t check_forward_io(const char *op, rudnn_queue_t queue, rudnn_swiglu_experts_t x,
                                       const rudnn_tensor_t *input, const rudnn_tensor_t *output)
{
    TRY(rudnn_check_queue(op, queue));
    TRY(rudnn_check_arg(op, "experts", x));
    if (x->context != queue->context)
        return rudnn_set_error(RUDNN_STATUS_DEVICE_MISMATCH, "%s: experts are on another context than the queue", op);
    TRY(rudnn_check_tensor(op, "input", queue, input, 2));
    if (input->rank != 2 || input->dims[1] != x->hidden) {
        char s[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: input has shape %s, expected [tokens, %lld] (hidden of "
                               "the weights)", op, rudnn_shape_str(input, s, sizeof s), (long long)x->hidden);
    }
    if (input->dtype != x->dtype)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: input has dtype %s, expected %s (dtype of the weights)",
                               op, rudnn_dtype_name(input->dtype), rudnn_dtype_name(x->dtype));
    TRY(rudnn_check_tensor(op, "output", queue, output, 2));
    TRY(rudnn_check_like(op, "output", output, "input", input));
    TRY(rudnn_check_overlap(op, "output", output, "input", input));
    return check_off_weights(op, "output", x, output->buffer, output->offset,
                             output->offset + rudnn_tensor_bytes(output));
}

static rudnn_status_t check_logits_tokens(const char *op, const rudnn_tensor_t *logits, const rudnn_tensor_t *input,
                                          rudnn_swiglu_experts_t x)
{
    if (logits->dims[0] != input->dims[0] || logits->dims[1] != x->experts) {
        char s[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: logits has shape %s, expected [%lld, %lld] (tokens of "
                               "input, experts of the weights)", op, rudnn_shape_str(logits, s, sizeof s),
                               (long long)input->dims[0], (long long)x->experts);
    }
    return RUDNN_STATUS_SUCCESS;
}

/* dispatch -> experts -> combine on an existing plan; temporaries from the queue's pool. */
static rudnn_status_t forward_from_plan(const char *op, rudnn_queue_t queue, rudnn_swiglu_experts_t x,
                                        rudnn_routing_plan_t plan, const rudnn_tensor_t *input,
                                        rudnn_moe_strategy_t strategy, const rudnn_tensor_t *output)
{
    rudnn_dispatched_t d = NULL;
    rudnn_buffer_t expert_out = NULL;
    rudnn_status_t st = dispatch(queue, plan, input, &d);
    if (!st)
        st = moe_alloc(queue, (size_t)d->rows * (size_t)x->hidden * rudnn_dtype_size(x->dtype),
                       &expert_out);
    if (!st) {
        rudnn_tensor_t eo;
        view(&eo, expert_out, x->dtype, 2, d->rows, x->hidden);
        st = forward_dispatched(queue, x, d, strategy, NULL, 0, &eo);
        if (!st)
            st = combine(queue, d, &eo, output);
    }
    moe_free(expert_out);
    rudnn_dispatched_destroy(d);
    if (st)
        rudnn_error_prefix(op);
    return st;
}

/* The checks both one-call forms make before any work is queued. */
static rudnn_status_t check_one_call(const char *op, rudnn_queue_t queue, rudnn_swiglu_experts_t experts,
                                     const rudnn_tensor_t *input, const rudnn_tensor_t *logits,
                                     rudnn_moe_strategy_t strategy, const rudnn_tensor_t *output)
{
    TRY(check_forward_io(op, queue, experts, input, output));
    TRY(check_logits(op, queue, logits));
    TRY(check_logits_tokens(op, logits, input, experts));
    TRY(rudnn_check_overlap(op, "output", output, "logits", logits));
    rudnn_moe_rows_plan_t rp = experts_plan(experts, 0, NULL);
    rudnn_moe_choice_t choice;
    uint32_t picked;
    return choose(op, experts, &rp, strategy, &picked, &choice);
}

/* Finishes a one-call form after its routing step (status route_st), and frees the plan. */
static rudnn_status_t forward_routed(const char *op, rudnn_queue_t queue, rudnn_swiglu_experts_t experts,
                                     rudnn_status_t route_st, rudnn_routing_plan_t plan,
                                     const rudnn_tensor_t *input, rudnn_moe_strategy_t strategy,
                                     const rudnn_tensor_t *output)
{
    if (route_st) {
        rudnn_error_prefix(op);
        return route_st;
    }
    rudnn_status_t st = forward_from_plan(op, queue, experts, plan, input, strategy, output);
    rudnn_routing_plan_destroy(plan);
    return st;
}

rudnn_status_t rudnn_swiglu_experts_forward(rudnn_queue_t queue, rudnn_swiglu_experts_t experts,
                                            const rudnn_tensor_t *input, const rudnn_tensor_t *logits,
                                            const rudnn_routing_options_t *options, const rudnn_tensor_t *output)
{
    const char *op = "swiglu_experts_forward";
    rudnn_clear_error();
    TRY(check_one_call(op, queue, experts, input, logits, RUDNN_MOE_SCALAR, output));
    rudnn_routing_plan_t plan = NULL;
    rudnn_status_t st = route_softmax(queue, logits, options, &plan);
    return forward_routed(op, queue, experts, st, plan, input, RUDNN_MOE_SCALAR, output);
}

rudnn_status_t rudnn_swiglu_experts_forward_sigmoid_grouped(rudnn_queue_t queue, rudnn_swiglu_experts_t experts,
                                                            const rudnn_tensor_t *input, const rudnn_tensor_t *logits,
                                                            const rudnn_tensor_t *bias,
                                                            const rudnn_grouped_routing_options_t *options,
                                                            rudnn_moe_strategy_t strategy,
                                                            const rudnn_tensor_t *output)
{
    const char *op = "swiglu_experts_forward_sigmoid_grouped";
    rudnn_clear_error();
    TRY(check_one_call(op, queue, experts, input, logits, strategy, output));
    if (bias) { /* routing checks the rest of it */
        TRY(rudnn_check_tensor(op, "bias", queue, bias, 1));
        TRY(rudnn_check_overlap(op, "output", output, "bias", bias));
    }
    rudnn_routing_plan_t plan = NULL;
    rudnn_status_t st = route_grouped(queue, logits, bias, options, &plan);
    return forward_routed(op, queue, experts, st, plan, input, strategy, output);
}
