/* Fault cases of the gated delta rule (rudnn/gated_delta.h), every call with workspace NULL (the
 * queue's pool). Their allocations: the host bitmap of the state-index check and the host copy of the
 * varlen sequence table (varlen), the pooled workspace (a pool node on the host and the device block:
 * the sequence table, the chunked form's scratch) and the plugin's (program builds from a cold
 * context). H 2, K 8, V 4 (query_scale 1/sqrt(8)):
 *   chunked, varlen, F32: sequences of 5, 0 and 6 tokens packed in T 12 (token 11 past them), chunk 4,
 *     state pools of 5 rows, state_indices {3, 0, 4} (rows 1 and 2 left alone);
 *   chunked, fixed length, BF16: B 2, T 7, chunk 4 (a padded last chunk): the scratch alone;
 *   recurrent, varlen, F16: the varlen problem above with state_indices NULL (sequence i, row i);
 *   recurrent, fixed length, F32: B 2, T 3: no workspace, the program alone;
 *   rudnn_gated_delta_varlen_plan_create (the chunked varlen schedule above, chunk 4): the index
 *     bitmap, the table's host image, its block of the queue's pool and the upload;
 *   chunked, varlen, F32 through such a plan (made in setup): the scratch alone.
 * The *_workspace_size queries allocate only the bitmap of the index check (varlen) and fail with
 * the same message as the call, so they are not walked. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fault_case.h"
#include <rudnn/gated_delta.h>

#define H 2
#define K 8
#define V 4
#define N_SEQ 3
#define POOL 5

enum { V_CHUNK_VARLEN, V_CHUNK_FIXED, V_RECURRENT_VARLEN, V_RECURRENT_FIXED, V_PLAN_CREATE, V_CHUNK_PLAN };

typedef struct gdr_state {
    fault_env_t env;
    rudnn_tensor_t q, k, v, beta, decay, s_in;
    rudnn_tensor_t out, s_out; /* outputs */
    int chunked;
    int64_t cu[N_SEQ + 1];
    int32_t idx[N_SEQ];
    rudnn_gated_delta_varlen_t vl, vl_plan;
    const rudnn_gated_delta_varlen_t *varlen;
    rudnn_gated_delta_varlen_plan_t plan; /* V_CHUNK_PLAN's, made in setup */
    void *made;                           /* V_PLAN_CREATE's */
    rudnn_gated_delta_input_t in;
    rudnn_gated_delta_output_t o;
} gdr_state_t;

static rudnn_status_t setup(void *s, const fault_env_t *env)
{
    gdr_state_t *g = s;
    g->env = *env;
    const int with_plan = env->variant == V_PLAN_CREATE || env->variant == V_CHUNK_PLAN;
    const int varlen = env->variant == V_CHUNK_VARLEN || env->variant == V_RECURRENT_VARLEN || with_plan;
    g->chunked = env->variant == V_CHUNK_VARLEN || env->variant == V_CHUNK_FIXED || with_plan;
    const rudnn_dtype_t dt = env->variant == V_CHUNK_FIXED      ? RUDNN_BF16
                             : env->variant == V_RECURRENT_VARLEN ? RUDNN_F16
                                                                  : RUDNN_F32;
    const int64_t B = varlen ? 1 : 2, T = varlen ? 12 : g->chunked ? 7 : 3, rows = varlen ? POOL : B;
    const int64_t qk[4] = {B, H, T, K}, vo[4] = {B, H, T, V}, bt[3] = {B, H, T}, st[4] = {rows, H, K, V};
    rudnn_status_t rc = fault_float_tensor(env, dt, 4, qk, 71, &g->q);
    if (!rc)
        rc = fault_float_tensor(env, dt, 4, qk, 72, &g->k);
    if (!rc)
        rc = fault_float_tensor(env, dt, 4, vo, 73, &g->v);
    if (!rc)
        rc = fault_float_tensor(env, dt, 3, bt, 74, &g->beta);
    if (!rc)
        rc = fault_f32_tensor(env, 3, bt, 75, &g->decay); /* |log_decay| <= 0.75 over 12 tokens at most */
    if (!rc)
        rc = fault_f32_tensor(env, 4, st, 76, &g->s_in);
    if (!rc)
        rc = fault_out_tensor(env, dt, 4, vo, &g->out);
    if (!rc)
        rc = fault_out_tensor(env, RUDNN_F32, 4, st, &g->s_out);
    if (rc)
        return rc;
    static const int64_t cu[N_SEQ + 1] = {0, 5, 5, 11};
    static const int32_t idx[N_SEQ] = {3, 0, 4};
    memcpy(g->cu, cu, sizeof cu);
    memcpy(g->idx, idx, sizeof idx);
    g->vl = (rudnn_gated_delta_varlen_t){.sequences = N_SEQ, .cu_seqlens = g->cu,
                                         .state_indices = env->variant == V_RECURRENT_VARLEN ? NULL : g->idx};
    g->varlen = varlen ? &g->vl : NULL;
    if (env->variant == V_CHUNK_PLAN) {
        rc = rudnn_gated_delta_varlen_plan_create(env->queue, &g->vl, 4, &g->plan);
        if (rc)
            return rc;
        g->vl_plan = (rudnn_gated_delta_varlen_t){.plan = g->plan};
        g->varlen = &g->vl_plan;
    }
    g->in = (rudnn_gated_delta_input_t){.query = &g->q, .key = &g->k, .value = &g->v, .beta = &g->beta,
                                        .log_decay = &g->decay, .initial_state = &g->s_in,
                                        .query_scale = 1.0f / sqrtf((float)K)};
    g->o = (rudnn_gated_delta_output_t){.output = &g->out, .final_state = &g->s_out};
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t prepare(void *s)
{
    gdr_state_t *g = s;
    g->made = FAULT_NO_HANDLE;
    rudnn_status_t st = fault_fill_sentinel(&g->env, &g->out);
    return st ? st : fault_fill_sentinel(&g->env, &g->s_out);
}

static rudnn_status_t call(void *s)
{
    gdr_state_t *g = s;
    if (g->env.variant == V_PLAN_CREATE)
        return rudnn_gated_delta_varlen_plan_create(g->env.queue, &g->vl, 4,
                                                    (rudnn_gated_delta_varlen_plan_t *)&g->made);
    if (g->chunked)
        return rudnn_chunk_gated_delta_rule(g->env.queue, &g->in, g->varlen, 4, NULL, 0, &g->o);
    return rudnn_gated_delta_rule(g->env.queue, &g->in, g->varlen, NULL, 0, &g->o);
}

static int unchanged(void *s, char *why, size_t cap)
{
    gdr_state_t *g = s;
    if (g->made != FAULT_NO_HANDLE) {
        snprintf(why, cap, "the plan handle was written by a call that failed");
        return 0;
    }
    return fault_is_sentinel(&g->env, &g->out, "output", why, cap) &&
           fault_is_sentinel(&g->env, &g->s_out, "final_state", why, cap);
}

static rudnn_status_t result(void *s, uint8_t **bytes, size_t *size)
{
    gdr_state_t *g = s;
    *bytes = NULL;
    *size = 0;
    if (g->env.variant == V_PLAN_CREATE) /* what the plan serves is checked by the next case */
        return RUDNN_STATUS_SUCCESS;
    rudnn_status_t st = fault_append_tensor(&g->env, &g->out, bytes, size);
    return st ? st : fault_append_tensor(&g->env, &g->s_out, bytes, size);
}

static void undo(void *s)
{
    gdr_state_t *g = s;
    if (g->made != FAULT_NO_HANDLE)
        rudnn_gated_delta_varlen_plan_destroy(g->made);
    g->made = FAULT_NO_HANDLE;
}

static void teardown(void *s)
{
    gdr_state_t *g = s;
    rudnn_gated_delta_varlen_plan_destroy(g->plan);
    rudnn_tensor_t *all[] = {&g->q, &g->k, &g->v, &g->beta, &g->decay, &g->s_in, &g->out, &g->s_out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        fault_drop_tensor(all[i]);
}

#define GDR_CASE(op, label, variant)                                                                           \
    {op,     sizeof(gdr_state_t), FAULT_COLD_CONTEXT | FAULT_COLD_QUEUE | FAULT_WARM, setup, prepare, call, \
     unchanged, result, undo, teardown, label, variant}

static const fault_case_t cases[] = {
    GDR_CASE("rudnn_chunk_gated_delta_rule", "chunk_gated_delta_rule (varlen, f32, pool)", V_CHUNK_VARLEN),
    GDR_CASE("rudnn_chunk_gated_delta_rule", "chunk_gated_delta_rule (fixed, bf16, pool)", V_CHUNK_FIXED),
    GDR_CASE("rudnn_gated_delta_rule", "gated_delta_rule (varlen, f16, pool)", V_RECURRENT_VARLEN),
    GDR_CASE("rudnn_gated_delta_rule", "gated_delta_rule (fixed, f32)", V_RECURRENT_FIXED),
    GDR_CASE("rudnn_gated_delta_varlen_plan_create", "gated_delta_varlen_plan_create (chunk 4)", V_PLAN_CREATE),
    GDR_CASE("rudnn_chunk_gated_delta_rule", "chunk_gated_delta_rule (varlen plan, f32, pool)", V_CHUNK_PLAN),
};

const fault_family_t fault_family_gated_delta = {"gated_delta", cases, sizeof cases / sizeof cases[0]};
