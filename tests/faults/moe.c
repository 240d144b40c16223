/* Fault cases of the MoE family: routing (softmax, grouped sigmoid), dispatch, combine, the
 * experts object, the forward on dispatched rows with each strategy that runs here, the forward on
 * rows grouped by counts, and the two one-call forwards. T 8 tokens, E 8 experts, top-2, H 16,
 * I 32; F32 (F16 for TensorCore). */
#include <stdio.h>

#include "fault_case.h"

#define T 8
#define E 8
#define K 2
#define H 16
#define I 32

typedef struct moe_state {
    fault_env_t env;
    rudnn_tensor_t logits, bias, input, gate, up, down, rows_in; /* rows_in: combine's expert output */
    rudnn_tensor_t nums; /* expert_token_nums I64 [E] of rows_in (forward_grouped) */
    rudnn_tensor_t expert_out, output; /* outputs */
    rudnn_routing_plan_t plan;         /* made by setup for the later steps */
    rudnn_dispatched_t dispatched;
    rudnn_swiglu_experts_t experts;
    void *made; /* the handle the call made, or FAULT_NO_HANDLE */
} moe_state_t;

static const rudnn_routing_options_t softmax_options = {.top_k = K, .renormalize = 1};
static const rudnn_grouped_routing_options_t grouped_options = {
    .top_k = K, .groups = 2, .selected_groups = 1, .group_top_two = 1, .renormalize = 1, .scale = 2.5f};

static rudnn_status_t setup(void *s, const fault_env_t *env)
{
    moe_state_t *m = s;
    m->env = *env;
    const int64_t logits[2] = {T, E}, bias[1] = {E}, input[2] = {T, H}, gu[3] = {E, I, H}, down[3] = {E, H, I},
                  rows[2] = {T * K, H};
    /* the TensorCore kernels take 16-bit weights; the other cases run in F32 */
    const rudnn_dtype_t dt = env->variant == RUDNN_MOE_TENSOR_CORE ? RUDNN_F16 : RUDNN_F32;
    rudnn_status_t st = fault_float_tensor(env, dt, 2, logits, 11, &m->logits);
    if (!st)
        st = fault_f32_tensor(env, 1, bias, 12, &m->bias);
    if (!st)
        st = fault_float_tensor(env, dt, 2, input, 13, &m->input);
    if (!st)
        st = fault_float_tensor(env, dt, 3, gu, 14, &m->gate);
    if (!st)
        st = fault_float_tensor(env, dt, 3, gu, 15, &m->up);
    if (!st)
        st = fault_float_tensor(env, dt, 3, down, 16, &m->down);
    if (!st)
        st = fault_float_tensor(env, dt, 2, rows, 17, &m->rows_in);
    if (!st) {
        static const int64_t counts[E] = {3, 0, 2, 4, 0, 1, 3, 2}; /* 15 of the 16 rows */
        const int64_t n[1] = {E};
        rudnn_buffer_t b = NULL;
        st = fault_buffer(env, sizeof counts, counts, &b);
        if (!st)
            st = rudnn_tensor_init(&m->nums, b, 0, RUDNN_I64, 1, n);
    }
    if (!st)
        st = fault_out_tensor(env, dt, 2, rows, &m->expert_out);
    if (!st)
        st = fault_out_tensor(env, dt, 2, input, &m->output);
    if (!st)
        st = rudnn_moe_route(env->queue, &m->logits, &softmax_options, &m->plan);
    if (!st)
        st = rudnn_moe_dispatch(env->queue, m->plan, &m->input, &m->dispatched);
    if (!st)
        st = rudnn_swiglu_experts_create(env->ctx, &m->gate, &m->up, &m->down, &m->experts);
    if (!st && env->variant != RUDNN_MOE_SCALAR) { /* a strategy that does not run here is skipped */
        rudnn_moe_strategy_t resolved;
        st = rudnn_swiglu_experts_resolve(m->experts, (rudnn_moe_strategy_t)env->variant, &resolved);
    }
    return st;
}

static rudnn_status_t prepare(void *s)
{
    moe_state_t *m = s;
    m->made = FAULT_NO_HANDLE;
    rudnn_status_t st = fault_fill_sentinel(&m->env, &m->expert_out);
    return st ? st : fault_fill_sentinel(&m->env, &m->output);
}

static int unchanged(void *s, char *why, size_t cap)
{
    moe_state_t *m = s;
    if (m->made != FAULT_NO_HANDLE) {
        snprintf(why, cap, "the output handle was written by a call that failed");
        return 0;
    }
    return fault_is_sentinel(&m->env, &m->expert_out, "expert_output", why, cap) &&
           fault_is_sentinel(&m->env, &m->output, "output", why, cap);
}

static void teardown(void *s)
{
    moe_state_t *m = s;
    rudnn_swiglu_experts_destroy(m->experts);
    rudnn_dispatched_destroy(m->dispatched);
    rudnn_routing_plan_destroy(m->plan);
    rudnn_tensor_t *all[] = {&m->logits, &m->bias, &m->input, &m->gate, &m->up, &m->down, &m->rows_in,
                             &m->nums, &m->expert_out, &m->output};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        fault_drop_tensor(all[i]);
}

/* ---- results: the outputs the call wrote, or the views of the object it made ---- */

static rudnn_status_t plan_bytes(moe_state_t *m, rudnn_routing_plan_t plan, uint8_t **bytes, size_t *size)
{
    rudnn_tensor_t v;
    rudnn_status_t st = rudnn_routing_plan_indices(plan, &v);
    if (!st)
        st = fault_append_tensor(&m->env, &v, bytes, size);
    if (!st)
        st = rudnn_routing_plan_weights(plan, &v);
    if (!st)
        st = fault_append_tensor(&m->env, &v, bytes, size);
    return st;
}

static rudnn_status_t route_result(void *s, uint8_t **bytes, size_t *size)
{
    moe_state_t *m = s;
    *bytes = NULL;
    *size = 0;
    return plan_bytes(m, m->made, bytes, size);
}

static rudnn_status_t dispatch_result(void *s, uint8_t **bytes, size_t *size)
{
    moe_state_t *m = s;
    rudnn_dispatched_t d = m->made;
    rudnn_status_t (*views[])(rudnn_dispatched_t, rudnn_tensor_t *) = {
        rudnn_dispatched_tokens, rudnn_dispatched_counts, rudnn_dispatched_offsets, rudnn_dispatched_positions};
    *bytes = NULL;
    *size = 0;
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    for (size_t i = 0; !st && i < sizeof views / sizeof views[0]; i++) {
        rudnn_tensor_t v;
        st = views[i](d, &v);
        if (!st)
            st = fault_append_tensor(&m->env, &v, bytes, size);
    }
    return st;
}

static rudnn_status_t experts_result(void *s, uint8_t **bytes, size_t *size)
{
    moe_state_t *m = s;
    int count = 0;
    *bytes = NULL;
    *size = 0;
    return rudnn_swiglu_experts_kernel_count(m->made, &count); /* the object answers */
}

static rudnn_status_t expert_out_result(void *s, uint8_t **bytes, size_t *size)
{
    moe_state_t *m = s;
    *bytes = NULL;
    *size = 0;
    return fault_append_tensor(&m->env, &m->expert_out, bytes, size);
}

static rudnn_status_t output_result(void *s, uint8_t **bytes, size_t *size)
{
    moe_state_t *m = s;
    *bytes = NULL;
    *size = 0;
    return fault_append_tensor(&m->env, &m->output, bytes, size);
}

static void no_undo(void *s) { (void)s; }
static void plan_undo(void *s) { rudnn_routing_plan_destroy(((moe_state_t *)s)->made); }
static void dispatched_undo(void *s) { rudnn_dispatched_destroy(((moe_state_t *)s)->made); }
static void experts_undo(void *s) { rudnn_swiglu_experts_destroy(((moe_state_t *)s)->made); }

/* ---- the calls ---- */

static rudnn_status_t route(void *s)
{
    moe_state_t *m = s;
    return rudnn_moe_route(m->env.queue, &m->logits, &softmax_options, (rudnn_routing_plan_t *)&m->made);
}

static rudnn_status_t route_grouped(void *s)
{
    moe_state_t *m = s;
    return rudnn_moe_route_sigmoid_grouped(m->env.queue, &m->logits, &m->bias, &grouped_options,
                                           (rudnn_routing_plan_t *)&m->made);
}

static rudnn_status_t dispatch(void *s)
{
    moe_state_t *m = s;
    return rudnn_moe_dispatch(m->env.queue, m->plan, &m->input, (rudnn_dispatched_t *)&m->made);
}

static rudnn_status_t combine(void *s)
{
    moe_state_t *m = s;
    return rudnn_moe_combine(m->env.queue, m->dispatched, &m->rows_in, &m->output);
}

static rudnn_status_t experts_create(void *s)
{
    moe_state_t *m = s;
    return rudnn_swiglu_experts_create(m->env.ctx, &m->gate, &m->up, &m->down, (rudnn_swiglu_experts_t *)&m->made);
}

static rudnn_status_t forward_dispatched(void *s)
{
    moe_state_t *m = s;
    return rudnn_swiglu_experts_forward_dispatched(m->env.queue, m->experts, m->dispatched,
                                                   (rudnn_moe_strategy_t)m->env.variant, NULL, 0, &m->expert_out);
}

static rudnn_status_t forward_rows_grouped(void *s)
{
    moe_state_t *m = s;
    return rudnn_swiglu_experts_forward_grouped(m->env.queue, m->experts, &m->rows_in, &m->nums, 0,
                                                (rudnn_moe_strategy_t)m->env.variant, NULL, 0, &m->expert_out);
}

static rudnn_status_t forward(void *s)
{
    moe_state_t *m = s;
    return rudnn_swiglu_experts_forward(m->env.queue, m->experts, &m->input, &m->logits, &softmax_options,
                                        &m->output);
}

static rudnn_status_t forward_grouped(void *s)
{
    moe_state_t *m = s;
    return rudnn_swiglu_experts_forward_sigmoid_grouped(m->env.queue, m->experts, &m->input, &m->logits, &m->bias,
                                                        &grouped_options, (rudnn_moe_strategy_t)m->env.variant,
                                                        &m->output);
}

#define ALL_STATES (FAULT_COLD_CONTEXT | FAULT_COLD_QUEUE | FAULT_WARM)
#define MOE_CASE(op, call, result, undo, label, variant)                                                          {op, sizeof(moe_state_t), ALL_STATES, setup, prepare, call, unchanged, result, undo, teardown, label, variant}

static const fault_case_t cases[] = {
    MOE_CASE("moe_route", route, route_result, plan_undo, NULL, RUDNN_MOE_SCALAR),
    MOE_CASE("moe_route_sigmoid_grouped", route_grouped, route_result, plan_undo, NULL, RUDNN_MOE_SCALAR),
    MOE_CASE("moe_dispatch", dispatch, dispatch_result, dispatched_undo, NULL, RUDNN_MOE_SCALAR),
    MOE_CASE("moe_combine", combine, output_result, no_undo, NULL, RUDNN_MOE_SCALAR),
    MOE_CASE("swiglu_experts_create", experts_create, experts_result, experts_undo, NULL, RUDNN_MOE_SCALAR),
    MOE_CASE("swiglu_experts_forward_dispatched", forward_dispatched, expert_out_result, no_undo,
             "swiglu_experts_forward_dispatched (Scalar)", RUDNN_MOE_SCALAR),
    MOE_CASE("swiglu_experts_forward_dispatched", forward_dispatched, expert_out_result, no_undo,
             "swiglu_experts_forward_dispatched (Auto)", RUDNN_MOE_AUTO),
    MOE_CASE("swiglu_experts_forward_dispatched", forward_dispatched, expert_out_result, no_undo,
             "swiglu_experts_forward_dispatched (TensorCore)", RUDNN_MOE_TENSOR_CORE),
    MOE_CASE("swiglu_experts_forward_grouped", forward_rows_grouped, expert_out_result, no_undo,
             "swiglu_experts_forward_grouped (Scalar)", RUDNN_MOE_SCALAR),
    MOE_CASE("swiglu_experts_forward_grouped", forward_rows_grouped, expert_out_result, no_undo,
             "swiglu_experts_forward_grouped (TensorCore)", RUDNN_MOE_TENSOR_CORE),
    MOE_CASE("swiglu_experts_forward", forward, output_result, no_undo, NULL, RUDNN_MOE_SCALAR),
    MOE_CASE("swiglu_experts_forward_sigmoid_grouped", forward_grouped, output_result, no_undo,
             "swiglu_experts_forward_sigmoid_grouped (Auto)", RUDNN_MOE_AUTO),
};

const fault_family_t fault_family_moe = {"moe", cases, sizeof cases / sizeof cases[0]};
