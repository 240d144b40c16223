/* Fault cases of paged attention (rudnn/paged_attention.h). One schedule: page size 4, 8 pages,
 * sequence 0 of 5 tokens on pages {6, 1} with queries at positions 3 and 4, sequence 1 of 3 tokens
 * on page {3} with a query at position 2; Hq 4, Hkv 2, D = Dv = 8 (MLA: H 4, R 8, P 4). The calls
 * and their allocations:
 *   host plan (the plan, the page stamps, the append check's rows, the device image on the host);
 *   device plan (the plan, a pool node and its device block);
 *   split workspace (the object and its device buffer);
 *   attention with a split workspace, bf16, and MLA, f32 (program builds on a cold context);
 *   append into a cache buffer shared through rudnn_buffer_retain (the copy's buffer). */
#include <stdio.h>
#include <string.h>

#include "fault_case.h"
#include <rudnn/paged_attention.h>

#define PS 4
#define PAGES 8
#define Q 3
#define HQ 4
#define HKV 2
#define D 8
#define P 4

enum { V_HOST_PLAN, V_PLAN, V_SPLIT_WS, V_ATTEND, V_MLA, V_APPEND };

static const int64_t lengths[2] = {5, 3};
static const int64_t table_offsets[3] = {0, 2, 3};
static const int32_t tables[3] = {6, 1, 3};
static const int64_t seq_ids[Q] = {0, 0, 1};
static const int64_t positions[Q] = {3, 4, 2};
static const rudnn_paged_schedule_t schedule = {PS, PAGES, 2, lengths, table_offsets, tables, Q, seq_ids, positions};

typedef struct paged_state {
    fault_env_t env;
    rudnn_paged_host_plan_t host;
    rudnn_paged_plan_t plan;
    rudnn_paged_split_workspace_t ws;
    rudnn_tensor_t q, qp, k, kp, v, knew, vnew, out; /* out: the only output tensor */
    rudnn_tensor_t k_out, v_out;                    /* what append returns */
    void *made;                                     /* the handle the call made, or FAULT_NO_HANDLE */
} paged_state_t;

static rudnn_status_t setup(void *s, const fault_env_t *env)
{
    paged_state_t *p = s;
    p->env = *env;
    const int mla = env->variant == V_MLA;
    const rudnn_dtype_t dt = mla ? RUDNN_F32 : RUDNN_BF16;
    const int64_t dq[3] = {Q, HQ, D}, dqp[3] = {Q, HQ, P}, dk[4] = {PAGES, PS, mla ? 1 : HKV, D},
                  dkp[4] = {PAGES, PS, 1, P}, dnew[3] = {Q, HKV, D};
    rudnn_status_t rc = fault_float_tensor(env, dt, 3, dq, 81, &p->q);
    if (!rc)
        rc = fault_float_tensor(env, dt, 4, dk, 82, &p->k);
    if (!rc && mla)
        rc = fault_float_tensor(env, dt, 3, dqp, 83, &p->qp);
    if (!rc && mla)
        rc = fault_float_tensor(env, dt, 4, dkp, 84, &p->kp);
    if (!rc && !mla)
        rc = fault_float_tensor(env, dt, 4, dk, 85, &p->v);
    if (!rc && env->variant == V_APPEND)
        rc = fault_float_tensor(env, dt, 3, dnew, 86, &p->knew);
    if (!rc && env->variant == V_APPEND)
        rc = fault_float_tensor(env, dt, 3, dnew, 87, &p->vnew);
    if (!rc)
        rc = fault_out_tensor(env, dt, 3, dq, &p->out);
    if (!rc && env->variant != V_HOST_PLAN)
        rc = rudnn_paged_host_plan_create(&schedule, &p->host);
    if (!rc && env->variant >= V_ATTEND)
        rc = rudnn_paged_plan_create(env->queue, p->host, &p->plan);
    if (!rc && env->variant == V_ATTEND)
        rc = rudnn_paged_split_workspace_create(env->queue, Q, HQ, D, 3, &p->ws);
    if (!rc && env->variant == V_APPEND) { /* shared: the append must copy, never write, these */
        rudnn_buffer_retain(p->k.buffer);
        rudnn_buffer_retain(p->v.buffer);
    }
    return rc;
}

static rudnn_status_t prepare(void *s)
{
    paged_state_t *p = s;
    p->made = FAULT_NO_HANDLE;
    p->k_out.buffer = p->v_out.buffer = FAULT_NO_HANDLE;
    return fault_fill_sentinel(&p->env, &p->out);
}

static rudnn_status_t call(void *s)
{
    paged_state_t *p = s;
    rudnn_status_t st;
    switch (p->env.variant) {
    case V_HOST_PLAN:
        return rudnn_paged_host_plan_create(&schedule, (rudnn_paged_host_plan_t *)&p->made);
    case V_PLAN:
        return rudnn_paged_plan_create(p->env.queue, p->host, (rudnn_paged_plan_t *)&p->made);
    case V_SPLIT_WS:
        return rudnn_paged_split_workspace_create(p->env.queue, Q, HQ, D, 0, (rudnn_paged_split_workspace_t *)&p->made);
    case V_ATTEND:
        return rudnn_paged_attention_with_workspace(p->plan, p->ws, &p->q, &p->k, &p->v, 0.3f, 1, &p->out);
    case V_MLA:
        return rudnn_paged_mla(p->plan, &p->q, &p->qp, &p->k, &p->kp, 0.3f, 0, &p->out);
    default:
        st = rudnn_paged_append(p->plan, &p->knew, &p->vnew, &p->k, &p->v, &p->k_out, &p->v_out);
        if (!st)
            p->made = p->k_out.buffer;
        return st;
    }
}

static int unchanged(void *s, char *why, size_t cap)
{
    paged_state_t *p = s;
    if (p->made != FAULT_NO_HANDLE || p->k_out.buffer != FAULT_NO_HANDLE) {
        snprintf(why, cap, "the output handle was written by a call that failed");
        return 0;
    }
    return fault_is_sentinel(&p->env, &p->out, "out", why, cap);
}

/* Attention and MLA: the output. Append: the copies (the shared originals never change). */
static rudnn_status_t result(void *s, uint8_t **bytes, size_t *size)
{
    paged_state_t *p = s;
    *bytes = NULL;
    *size = 0;
    if (p->env.variant == V_ATTEND || p->env.variant == V_MLA)
        return fault_append_tensor(&p->env, &p->out, bytes, size);
    if (p->env.variant != V_APPEND)
        return RUDNN_STATUS_SUCCESS;
    rudnn_status_t st = fault_append_tensor(&p->env, &p->k_out, bytes, size);
    if (!st)
        st = fault_append_tensor(&p->env, &p->v_out, bytes, size);
    if (!st)
        st = fault_append_tensor(&p->env, &p->k, bytes, size);
    return st ? st : fault_append_tensor(&p->env, &p->v, bytes, size);
}

static void undo(void *s)
{
    paged_state_t *p = s;
    if (p->made == FAULT_NO_HANDLE)
        return;
    switch (p->env.variant) {
    case V_HOST_PLAN:
        rudnn_paged_host_plan_destroy(p->made);
        break;
    case V_PLAN:
        rudnn_paged_plan_destroy(p->made);
        break;
    case V_SPLIT_WS:
        rudnn_paged_split_workspace_destroy(p->made);
        break;
    case V_APPEND:
        rudnn_buffer_destroy(p->k_out.buffer);
        rudnn_buffer_destroy(p->v_out.buffer);
        break;
    default:
        break;
    }
    p->made = FAULT_NO_HANDLE;
}

static void teardown(void *s)
{
    paged_state_t *p = s;
    undo(p);
    if (p->env.variant == V_APPEND) { /* the references setup added */
        rudnn_buffer_destroy(p->k.buffer);
        rudnn_buffer_destroy(p->v.buffer);
    }
    rudnn_paged_split_workspace_destroy(p->ws);
    rudnn_paged_plan_destroy(p->plan);
    rudnn_paged_host_plan_destroy(p->host);
    rudnn_tensor_t *all[] = {&p->q, &p->qp, &p->k, &p->kp, &p->v, &p->knew, &p->vnew, &p->out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        fault_drop_tensor(all[i]);
}

#define PAGED_CASE(op, label, variant)                                                                       \
    {op,     sizeof(paged_state_t), FAULT_COLD_CONTEXT | FAULT_COLD_QUEUE | FAULT_WARM, setup, prepare, call, \
     unchanged, result, undo, teardown, label, variant}

static const fault_case_t cases[] = {
    PAGED_CASE("rudnn_paged_host_plan_create", "paged_host_plan_create", V_HOST_PLAN),
    PAGED_CASE("rudnn_paged_plan_create", "paged_plan_create (pool)", V_PLAN),
    PAGED_CASE("rudnn_paged_split_workspace_create", "paged_split_workspace_create (splits 0)", V_SPLIT_WS),
    PAGED_CASE("rudnn_paged_attention_with_workspace", "paged_attention_with_workspace (bf16, 3 splits)", V_ATTEND),
    PAGED_CASE("rudnn_paged_mla", "paged_mla (f32)", V_MLA),
    PAGED_CASE("rudnn_paged_append", "paged_append (copy on write)", V_APPEND),
};

const fault_family_t fault_family_paged_attention = {"paged_attention", cases, sizeof cases / sizeof cases[0]};
