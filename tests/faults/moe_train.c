/* Fault cases of MoE training (rudnn/moe_train.h): the router's selected weights and their backward,
 * each with softmax scoring renormalized and with sigmoid scoring (scale 2.5, not renormalized); the
 * combine backward with each strategy and the dispatch backward, on tokens that setup routes (softmax
 * top-2, renormalized) and dispatches; the SwiGLU experts' training forward (Scalar, its workspace from the
 * queue's pool, and Auto with the caller's workspace) and backward (the same two), on those tokens.
 * T 5 tokens, E 8 experts, top-2, H 16, I 32 (the experts); F32 logits, I32 indices (row 2 selects expert 2
 * twice: a repeated index is valid), F32 rows and weights. The router, combine and dispatch ops take no
 * workspace: their allocations are the plugin's (the program build from a cold context); a warm call that
 * allocates nothing is checked with every allocation failing. The experts' calls without a workspace also
 * take a pool block (a cold queue's first). The router training plan: rudnn_routing_plan_into_training of a
 * plan setup routes (softmax top-2) from the same logits (softmax renormalized, sigmoid, f16 logits), alone
 * and followed by rudnn_router_training_plan_backward through the plan made: the host objects, the routing's
 * pool block and the router program; a failed call must leave *training as it was. */
#include <stdio.h>

#include "fault_case.h"
#include <rudnn/moe_train.h>

#define T 5
#define E 8
#define K 2
#define H 16
#define INTER 32

enum { V_SOFTMAX, V_SIGMOID };

typedef struct train_state {
    fault_env_t env;
    rudnn_tensor_t logits, indices, grad_weights;
    rudnn_tensor_t weights, grad_logits; /* outputs */
    rudnn_router_weight_options_t options;
} train_state_t;

static rudnn_status_t setup(void *s, const fault_env_t *env)
{
    train_state_t *m = s;
    m->env = *env;
    static const int32_t idx[T * K] = {0, 3, 7, 1, 2, 2, 5, 4, 6, 0};
    const int64_t logits[2] = {T, E}, selected[2] = {T, K};
    rudnn_status_t st = fault_f32_tensor(env, 2, logits, 81, &m->logits);
    if (!st)
        st = fault_f32_tensor(env, 2, selected, 82, &m->grad_weights);
    if (!st) {
        rudnn_buffer_t b = NULL;
        st = fault_buffer(env, sizeof idx, idx, &b);
        if (!st)
            st = rudnn_tensor_init(&m->indices, b, 0, RUDNN_I32, 2, selected);
    }
    if (!st)
        st = fault_out_tensor(env, RUDNN_F32, 2, selected, &m->weights);
    if (!st)
        st = fault_out_tensor(env, RUDNN_F32, 2, logits, &m->grad_logits);
    static const rudnn_router_weight_options_t softmax = {.scoring = RUDNN_ROUTER_SOFTMAX, .renormalize = 1,
                                                          .scale = 1.0f};
    static const rudnn_router_weight_options_t sigmoid = {.scoring = RUDNN_ROUTER_SIGMOID, .renormalize = 0,
                                                          .scale = 2.5f};
    m->options = env->variant == V_SIGMOID ? sigmoid : softmax;
    return st;
}

static rudnn_status_t prepare(void *s)
{
    train_state_t *m = s;
    rudnn_status_t st = fault_fill_sentinel(&m->env, &m->weights);
    return st ? st : fault_fill_sentinel(&m->env, &m->grad_logits);
}

static rudnn_status_t weights_call(void *s)
{
    train_state_t *m = s;
    return rudnn_moe_selected_router_weights(m->env.queue, &m->logits, &m->indices, &m->options, &m->weights);
}

static rudnn_status_t backward_call(void *s)
{
    train_state_t *m = s;
    return rudnn_moe_selected_router_backward(m->env.queue, &m->logits, &m->indices, &m->grad_weights, &m->options,
                                              &m->grad_logits);
}

/* Both outputs, whichever op ran: the other one must stay untouched too. */
static int unchanged(void *s, char *why, size_t cap)
{
    train_state_t *m = s;
    return fault_is_sentinel(&m->env, &m->weights, "weights", why, cap) &&
           fault_is_sentinel(&m->env, &m->grad_logits, "grad_logits", why, cap);
}

static rudnn_status_t result(void *s, uint8_t **bytes, size_t *size)
{
    train_state_t *m = s;
    *bytes = NULL;
    *size = 0;
    rudnn_status_t st = fault_append_tensor(&m->env, &m->weights, bytes, size);
    return st ? st : fault_append_tensor(&m->env, &m->grad_logits, bytes, size);
}

static void undo(void *s) { (void)s; }

static void teardown(void *s)
{
    train_state_t *m = s;
    rudnn_tensor_t *all[] = {&m->logits, &m->indices, &m->grad_weights, &m->weights, &m->grad_logits};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        fault_drop_tensor(all[i]);
}

/* ---- combine and dispatch backward ---- */

typedef struct rows_state {
    fault_env_t env;
    rudnn_tensor_t logits, input, expert_output, grad_output, grad_rows;
    rudnn_tensor_t grad_expert_output, grad_weights, grad_input; /* outputs */
    rudnn_routing_plan_t plan; /* made by setup: the calls read the positions and weights through these */
    rudnn_dispatched_t dispatched;
} rows_state_t;

static rudnn_status_t rows_setup(void *s, const fault_env_t *env)
{
    rows_state_t *m = s;
    m->env = *env;
    static const rudnn_routing_options_t route = {.top_k = K, .renormalize = 1};
    const int64_t logits[2] = {T, E}, tokens[2] = {T, H}, rows[2] = {T * K, H}, selected[2] = {T, K};
    rudnn_status_t st = fault_f32_tensor(env, 2, logits, 91, &m->logits);
    if (!st)
        st = fault_f32_tensor(env, 2, tokens, 92, &m->input);
    if (!st)
        st = fault_f32_tensor(env, 2, rows, 93, &m->expert_output);
    if (!st)
        st = fault_f32_tensor(env, 2, tokens, 94, &m->grad_output);
    if (!st)
        st = fault_f32_tensor(env, 2, rows, 95, &m->grad_rows);
    if (!st)
        st = fault_out_tensor(env, RUDNN_F32, 2, rows, &m->grad_expert_output);
    if (!st)
        st = fault_out_tensor(env, RUDNN_F32, 2, selected, &m->grad_weights);
    if (!st)
        st = fault_out_tensor(env, RUDNN_F32, 2, tokens, &m->grad_input);
    if (!st)
        st = rudnn_moe_route(env->queue, &m->logits, &route, &m->plan);
    if (!st)
        st = rudnn_moe_dispatch(env->queue, m->plan, &m->input, &m->dispatched);
    return st;
}

static rudnn_status_t rows_prepare(void *s)
{
    rows_state_t *m = s;
    rudnn_status_t st = fault_fill_sentinel(&m->env, &m->grad_expert_output);
    if (!st)
        st = fault_fill_sentinel(&m->env, &m->grad_weights);
    return st ? st : fault_fill_sentinel(&m->env, &m->grad_input);
}

static rudnn_status_t combine_backward_call(void *s)
{
    rows_state_t *m = s;
    return rudnn_moe_combine_backward(m->env.queue, m->dispatched, &m->expert_output, &m->grad_output,
                                      (rudnn_combine_grad_strategy_t)m->env.variant, &m->grad_expert_output,
                                      &m->grad_weights);
}

static rudnn_status_t dispatch_backward_call(void *s)
{
    rows_state_t *m = s;
    return rudnn_moe_dispatch_backward(m->env.queue, m->dispatched, &m->grad_rows, &m->grad_input);
}

/* Every output, whichever op ran: the other op's must stay untouched too. */
static int rows_unchanged(void *s, char *why, size_t cap)
{
    rows_state_t *m = s;
    return fault_is_sentinel(&m->env, &m->grad_expert_output, "grad_expert_output", why, cap) &&
           fault_is_sentinel(&m->env, &m->grad_weights, "grad_weights", why, cap) &&
           fault_is_sentinel(&m->env, &m->grad_input, "grad_input", why, cap);
}

static rudnn_status_t rows_result(void *s, uint8_t **bytes, size_t *size)
{
    rows_state_t *m = s;
    *bytes = NULL;
    *size = 0;
    rudnn_status_t st = fault_append_tensor(&m->env, &m->grad_expert_output, bytes, size);
    if (!st)
        st = fault_append_tensor(&m->env, &m->grad_weights, bytes, size);
    return st ? st : fault_append_tensor(&m->env, &m->grad_input, bytes, size);
}

static void rows_teardown(void *s)
{
    rows_state_t *m = s;
    rudnn_dispatched_destroy(m->dispatched);
    rudnn_routing_plan_destroy(m->plan);
    rudnn_tensor_t *all[] = {&m->logits,    &m->input,              &m->expert_output, &m->grad_output,
                             &m->grad_rows, &m->grad_expert_output, &m->grad_weights,  &m->grad_input};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        fault_drop_tensor(all[i]);
}

/* ---- SwiGLU experts: training forward and backward ---- */

#define XV_CALLER_WORKSPACE 4 /* variant bit: the caller's workspace (else NULL: a pool block); the rest: strategy */

typedef struct experts_state {
    fault_env_t env;
    rudnn_tensor_t logits, input, gate, up, down, reserve, grad_expert_output; /* reserve: the backward's input */
    rudnn_tensor_t expert_output, reserve_out, grad_rows, grad_gate, grad_up, grad_down; /* outputs */
    rudnn_buffer_t workspace; /* XV_CALLER_WORKSPACE: workspace_bytes of it */
    size_t workspace_bytes;
    rudnn_routing_plan_t plan; /* made by setup */
    rudnn_dispatched_t dispatched;
    rudnn_swiglu_experts_t experts;
} experts_state_t;

static rudnn_status_t experts_setup(void *s, const fault_env_t *env)
{
    experts_state_t *m = s;
    m->env = *env;
    static const rudnn_routing_options_t route = {.top_k = K, .renormalize = 1};
    const int64_t logits[2] = {T, E}, tokens[2] = {T, H}, rows[2] = {T * K, H}, reserve[2] = {T * K, 2 * INTER},
                  gu[3] = {E, INTER, H}, down[3] = {E, H, INTER};
    rudnn_status_t st = fault_f32_tensor(env, 2, logits, 101, &m->logits);
    if (!st)
        st = fault_f32_tensor(env, 2, tokens, 102, &m->input);
    if (!st)
        st = fault_f32_tensor(env, 3, gu, 103, &m->gate);
    if (!st)
        st = fault_f32_tensor(env, 3, gu, 104, &m->up);
    if (!st)
        st = fault_f32_tensor(env, 3, down, 105, &m->down);
    if (!st)
        st = fault_f32_tensor(env, 2, reserve, 106, &m->reserve);
    if (!st)
        st = fault_f32_tensor(env, 2, rows, 107, &m->grad_expert_output);
    if (!st)
        st = fault_out_tensor(env, RUDNN_F32, 2, rows, &m->expert_output);
    if (!st)
        st = fault_out_tensor(env, RUDNN_F32, 2, reserve, &m->reserve_out);
    if (!st)
        st = fault_out_tensor(env, RUDNN_F32, 2, rows, &m->grad_rows);
    if (!st)
        st = fault_out_tensor(env, RUDNN_F32, 3, gu, &m->grad_gate);
    if (!st)
        st = fault_out_tensor(env, RUDNN_F32, 3, gu, &m->grad_up);
    if (!st)
        st = fault_out_tensor(env, RUDNN_F32, 3, down, &m->grad_down);
    if (!st)
        st = rudnn_moe_route(env->queue, &m->logits, &route, &m->plan);
    if (!st)
        st = rudnn_moe_dispatch(env->queue, m->plan, &m->input, &m->dispatched);
    if (!st)
        st = rudnn_swiglu_experts_create(env->ctx, &m->gate, &m->up, &m->down, &m->experts);
    if (!st && (env->variant & XV_CALLER_WORKSPACE)) {
        st = rudnn_swiglu_experts_training_workspace_size(m->experts, T * K, &m->workspace_bytes);
        if (!st)
            st = fault_buffer(env, m->workspace_bytes, NULL, &m->workspace);
    }
    return st;
}

static rudnn_status_t experts_prepare(void *s)
{
    experts_state_t *m = s;
    const rudnn_tensor_t *outs[6] = {&m->expert_output, &m->reserve_out, &m->grad_rows,
                                     &m->grad_gate,     &m->grad_up,     &m->grad_down};
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    for (int i = 0; !st && i < 6; i++)
        st = fault_fill_sentinel(&m->env, outs[i]);
    return st;
}

static rudnn_moe_strategy_t experts_strategy(const experts_state_t *m)
{
    return (rudnn_moe_strategy_t)(m->env.variant & ~XV_CALLER_WORKSPACE);
}

static rudnn_status_t forward_training_call(void *s)
{
    experts_state_t *m = s;
    return rudnn_swiglu_experts_forward_dispatched_training(m->env.queue, m->experts, m->dispatched,
                                                            experts_strategy(m), m->workspace, m->workspace_bytes,
                                                            &m->reserve_out, &m->expert_output);
}

static rudnn_status_t experts_backward_call(void *s)
{
    experts_state_t *m = s;
    return rudnn_swiglu_experts_backward(m->env.queue, m->experts, m->dispatched, &m->reserve,
                                         &m->grad_expert_output, experts_strategy(m), m->workspace,
                                         m->workspace_bytes, &m->grad_rows, &m->grad_gate, &m->grad_up,
                                         &m->grad_down);
}

/* Every output of both ops, whichever ran: the other op's must stay untouched too. */
static int experts_unchanged(void *s, char *why, size_t cap)
{
    experts_state_t *m = s;
    return fault_is_sentinel(&m->env, &m->expert_output, "expert_output", why, cap) &&
           fault_is_sentinel(&m->env, &m->reserve_out, "reserve", why, cap) &&
           fault_is_sentinel(&m->env, &m->grad_rows, "grad_rows", why, cap) &&
           fault_is_sentinel(&m->env, &m->grad_gate, "grad_gate", why, cap) &&
           fault_is_sentinel(&m->env, &m->grad_up, "grad_up", why, cap) &&
           fault_is_sentinel(&m->env, &m->grad_down, "grad_down", why, cap);
}

static rudnn_status_t experts_result(void *s, uint8_t **bytes, size_t *size)
{
    experts_state_t *m = s;
    const rudnn_tensor_t *outs[6] = {&m->expert_output, &m->reserve_out, &m->grad_rows,
                                     &m->grad_gate,     &m->grad_up,     &m->grad_down};
    *bytes = NULL;
    *size = 0;
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    for (int i = 0; !st && i < 6; i++)
        st = fault_append_tensor(&m->env, outs[i], bytes, size);
    return st;
}

static void experts_teardown(void *s)
{
    experts_state_t *m = s;
    rudnn_swiglu_experts_destroy(m->experts);
    rudnn_dispatched_destroy(m->dispatched);
    rudnn_routing_plan_destroy(m->plan);
    if (m->workspace)
        rudnn_buffer_destroy(m->workspace);
    rudnn_tensor_t *all[] = {&m->logits, &m->input, &m->gate, &m->up, &m->down, &m->reserve,
                             &m->grad_expert_output, &m->expert_output, &m->reserve_out, &m->grad_rows,
                             &m->grad_gate, &m->grad_up, &m->grad_down};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        fault_drop_tensor(all[i]);
}

/* ---- the router training plan: into_training, then its backward ---- */

/* variant bits: sigmoid scoring (scale 2.5, not renormalized; else softmax renormalized), f16 logits (else
 * f32), the backward through the made training plan after into_training (TV_BACKWARD) */
#define TV_SIGMOID 1
#define TV_F16 2
#define TV_BACKWARD 4

typedef struct tplan_state {
    fault_env_t env;
    rudnn_tensor_t logits, grad_weights;
    rudnn_tensor_t grad_logits; /* output (TV_BACKWARD) */
    rudnn_router_weight_options_t options;
    rudnn_routing_plan_t plan; /* made by setup from logits (softmax top-2, renormalized) */
    void *made;                /* the training plan the call made, or FAULT_NO_HANDLE */
} tplan_state_t;

static rudnn_status_t tplan_setup(void *s, const fault_env_t *env)
{
    tplan_state_t *m = s;
    m->env = *env;
    static const rudnn_routing_options_t route = {.top_k = K, .renormalize = 1};
    const int64_t logits[2] = {T, E}, selected[2] = {T, K};
    const rudnn_dtype_t dt = env->variant & TV_F16 ? RUDNN_F16 : RUDNN_F32;
    rudnn_status_t st = fault_float_tensor(env, dt, 2, logits, 111, &m->logits);
    if (!st)
        st = fault_f32_tensor(env, 2, selected, 112, &m->grad_weights);
    if (!st)
        st = fault_out_tensor(env, dt, 2, logits, &m->grad_logits);
    if (!st)
        st = rudnn_moe_route(env->queue, &m->logits, &route, &m->plan);
    static const rudnn_router_weight_options_t softmax = {.scoring = RUDNN_ROUTER_SOFTMAX, .renormalize = 1,
                                                          .scale = 1.0f};
    static const rudnn_router_weight_options_t sigmoid = {.scoring = RUDNN_ROUTER_SIGMOID, .renormalize = 0,
                                                          .scale = 2.5f};
    m->options = env->variant & TV_SIGMOID ? sigmoid : softmax;
    return st;
}

static rudnn_status_t tplan_prepare(void *s)
{
    tplan_state_t *m = s;
    m->made = FAULT_NO_HANDLE;
    return fault_fill_sentinel(&m->env, &m->grad_logits);
}

/* into_training; with TV_BACKWARD then the backward through the training plan made (on its failure the
 * training plan is destroyed here, so that a failed call leaves the handle as it was). The backward's
 * program is the one into_training ran, so on OpenCL every counted allocation is into_training's: an
 * allocation the backward made would fail it, and its message would not name this case's op. */
static rudnn_status_t into_training_call(void *s)
{
    tplan_state_t *m = s;
    rudnn_status_t st = rudnn_routing_plan_into_training(m->env.queue, m->plan, &m->logits, &m->options,
                                                         (rudnn_router_training_plan_t *)&m->made);
    if (st || !(m->env.variant & TV_BACKWARD))
        return st;
    st = rudnn_router_training_plan_backward(m->env.queue, m->made, &m->grad_weights, &m->grad_logits);
    if (st) {
        rudnn_router_training_plan_destroy(m->made);
        m->made = FAULT_NO_HANDLE;
    }
    return st;
}

static int tplan_unchanged(void *s, char *why, size_t cap)
{
    tplan_state_t *m = s;
    if (m->made != FAULT_NO_HANDLE) {
        snprintf(why, cap, "*training was written by a call that failed");
        return 0;
    }
    return fault_is_sentinel(&m->env, &m->grad_logits, "grad_logits", why, cap);
}

/* The routing of the training plan made (its indices and weights), then grad_logits (TV_BACKWARD). */
static rudnn_status_t tplan_result(void *s, uint8_t **bytes, size_t *size)
{
    tplan_state_t *m = s;
    *bytes = NULL;
    *size = 0;
    rudnn_routing_plan_t routing = NULL;
    rudnn_tensor_t v;
    rudnn_status_t st = rudnn_router_training_plan_routing(m->made, &routing);
    if (!st)
        st = rudnn_routing_plan_indices(routing, &v);
    if (!st)
        st = fault_append_tensor(&m->env, &v, bytes, size);
    if (!st)
        st = rudnn_routing_plan_weights(routing, &v);
    if (!st)
        st = fault_append_tensor(&m->env, &v, bytes, size);
    rudnn_routing_plan_destroy(routing);
    if (!st && (m->env.variant & TV_BACKWARD))
        st = fault_append_tensor(&m->env, &m->grad_logits, bytes, size);
    return st;
}

static void tplan_undo(void *s)
{
    tplan_state_t *m = s;
    if (m->made != FAULT_NO_HANDLE)
        rudnn_router_training_plan_destroy(m->made);
    m->made = FAULT_NO_HANDLE;
}

static void tplan_teardown(void *s)
{
    tplan_state_t *m = s;
    rudnn_routing_plan_destroy(m->plan);
    rudnn_tensor_t *all[] = {&m->logits, &m->grad_weights, &m->grad_logits};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        fault_drop_tensor(all[i]);
}

#define TRAIN_CASE(op, call, label, variant)                                                                     \
    {op,     sizeof(train_state_t), FAULT_COLD_CONTEXT | FAULT_COLD_QUEUE | FAULT_WARM, setup, prepare, call, \
     unchanged, result, undo, teardown, label, variant}

#define ROWS_CASE(op, call, label, variant)                                                                    \
    {op,   sizeof(rows_state_t), FAULT_COLD_CONTEXT | FAULT_COLD_QUEUE | FAULT_WARM, rows_setup, rows_prepare, \
     call, rows_unchanged, rows_result, undo, rows_teardown, label, variant}

#define TPLAN_CASE(label, variant)                                                                             \
    {"routing_plan_into_training", sizeof(tplan_state_t), FAULT_COLD_CONTEXT | FAULT_COLD_QUEUE | FAULT_WARM,     \
     tplan_setup, tplan_prepare, into_training_call, tplan_unchanged, tplan_result, tplan_undo, tplan_teardown,  \
     label, variant}

#define EXPERTS_CASE(op, call, label, variant)                                                                  \
    {op,              sizeof(experts_state_t), FAULT_COLD_CONTEXT | FAULT_COLD_QUEUE | FAULT_WARM, experts_setup, \
     experts_prepare, call, experts_unchanged, experts_result, undo, experts_teardown, label, variant}

/* The messages name the op without the rudnn_ prefix (ops/moe_train.c), as in the moe family. */
static const fault_case_t cases[] = {
    TRAIN_CASE("moe_selected_router_weights", weights_call, "selected_router_weights (softmax, renormalize)",
               V_SOFTMAX),
    TRAIN_CASE("moe_selected_router_weights", weights_call, "selected_router_weights (sigmoid)", V_SIGMOID),
    TRAIN_CASE("moe_selected_router_backward", backward_call, "selected_router_backward (softmax, renormalize)",
               V_SOFTMAX),
    TRAIN_CASE("moe_selected_router_backward", backward_call, "selected_router_backward (sigmoid)", V_SIGMOID),
    ROWS_CASE("moe_combine_backward", combine_backward_call, "combine_backward (serial)", RUDNN_COMBINE_GRAD_SERIAL),
    ROWS_CASE("moe_combine_backward", combine_backward_call, "combine_backward (plane)", RUDNN_COMBINE_GRAD_PLANE),
    ROWS_CASE("moe_dispatch_backward", dispatch_backward_call, "dispatch_backward", 0),
    /* pool: a NULL workspace (a block of the queue's pool); workspace: the caller's */
    EXPERTS_CASE("swiglu_experts_forward_dispatched_training", forward_training_call,
                 "experts_forward_training (Scalar, pool)", RUDNN_MOE_SCALAR),
    EXPERTS_CASE("swiglu_experts_forward_dispatched_training", forward_training_call,
                 "experts_forward_training (Auto, workspace)", XV_CALLER_WORKSPACE | RUDNN_MOE_AUTO),
    EXPERTS_CASE("swiglu_experts_backward", experts_backward_call, "experts_backward (Scalar, pool)",
                 RUDNN_MOE_SCALAR),
    EXPERTS_CASE("swiglu_experts_backward", experts_backward_call, "experts_backward (Auto, workspace)",
                 XV_CALLER_WORKSPACE | RUDNN_MOE_AUTO),
    TPLAN_CASE("into_training (softmax, renormalize)", 0),
    TPLAN_CASE("into_training (sigmoid)", TV_SIGMOID),
    TPLAN_CASE("into_training (f16 logits)", TV_F16),
    TPLAN_CASE("into_training, backward (softmax, renormalize)", TV_BACKWARD),
    TPLAN_CASE("into_training, backward (sigmoid, f16 logits)", TV_BACKWARD | TV_SIGMOID | TV_F16),
};

const fault_family_t fault_family_moe_train = {"moe_train", cases, sizeof cases / sizeof cases[0]};
