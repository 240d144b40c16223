/* Fault cases of dense attention: rudnn_attention with each explicit strategy that runs here
 * (Fallback takes its score workspace from the queue's pool; FlashUnit needs none), F32,
 * q [2, 4, 7, 16], k and v [2, 2, 9, 16] (GQA 2), a BOOL mask, an F32 bias, causal, lse.
 * Autotune is left out: its first call times every candidate and the winner's result need not be
 * bit-identical to the static choice's, which the walk compares against. */
#include <stdio.h>
#include <string.h>

#include "fault_case.h"

#define B 2
#define HQ 4
#define HKV 2
#define SQ 7
#define SKV 9
#define D 16

typedef struct attention_state {
    fault_env_t env;
    rudnn_tensor_t q, k, v, mask, bias;
    rudnn_tensor_t out, lse; /* outputs */
    rudnn_attention_options_t options;
} attention_state_t;

static rudnn_status_t setup(void *s, const fault_env_t *env)
{
    attention_state_t *a = s;
    a->env = *env;
    const int64_t dq[4] = {B, HQ, SQ, D}, dkv[4] = {B, HKV, SKV, D}, ds[4] = {B, 1, SQ, SKV}, dl[3] = {B, HQ, SQ};
    uint8_t mask[B * SQ * SKV];
    for (size_t i = 0; i < sizeof mask; i++)
        mask[i] = i % 5 == 0;
    rudnn_buffer_t mb = NULL;
    rudnn_status_t st = fault_f32_tensor(env, 4, dq, 21, &a->q);
    if (!st)
        st = fault_f32_tensor(env, 4, dkv, 22, &a->k);
    if (!st)
        st = fault_f32_tensor(env, 4, dkv, 23, &a->v);
    if (!st)
        st = fault_f32_tensor(env, 4, ds, 24, &a->bias);
    if (!st)
        st = fault_buffer(env, sizeof mask, mask, &mb);
    if (!st)
        st = rudnn_tensor_init(&a->mask, mb, 0, RUDNN_BOOL, 4, ds);
    if (!st)
        st = fault_out_tensor(env, RUDNN_F32, 4, dq, &a->out);
    if (!st)
        st = fault_out_tensor(env, RUDNN_F32, 3, dl, &a->lse);
    rudnn_attention_options_init(&a->options);
    a->options.causal = 1;
    if (!st) { /* a strategy this backend has no kernel of is skipped (NOT_SUPPORTED) */
        rudnn_attention_choice_t choice;
        st = rudnn_attention_resolve(env->queue, &a->q, &a->k, &a->v, &a->mask, &a->bias, &a->options,
                                     (rudnn_attention_strategy_t)env->variant, &a->out, &a->lse, &choice);
    }
    return st;
}

static rudnn_status_t prepare(void *s)
{
    attention_state_t *a = s;
    rudnn_status_t st = fault_fill_sentinel(&a->env, &a->out);
    return st ? st : fault_fill_sentinel(&a->env, &a->lse);
}

static rudnn_status_t call(void *s)
{
    attention_state_t *a = s;
    return rudnn_attention(a->env.queue, &a->q, &a->k, &a->v, &a->mask, &a->bias, &a->options,
                           (rudnn_attention_strategy_t)a->env.variant, NULL, 0, &a->out, &a->lse);
}

static int unchanged(void *s, char *why, size_t cap)
{
    attention_state_t *a = s;
    return fault_is_sentinel(&a->env, &a->out, "out", why, cap) && fault_is_sentinel(&a->env, &a->lse, "lse", why, cap);
}

static rudnn_status_t result(void *s, uint8_t **bytes, size_t *size)
{
    attention_state_t *a = s;
    *bytes = NULL;
    *size = 0;
    rudnn_status_t st = fault_append_tensor(&a->env, &a->out, bytes, size);
    return st ? st : fault_append_tensor(&a->env, &a->lse, bytes, size);
}

static void undo(void *s) { (void)s; }

static void teardown(void *s)
{
    attention_state_t *a = s;
    rudnn_tensor_t *all[] = {&a->q, &a->k, &a->v, &a->mask, &a->bias, &a->out, &a->lse};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        fault_drop_tensor(all[i]);
}

#define ATTENTION_CASE(label, strategy)                                                                        \
    {"attention", sizeof(attention_state_t), FAULT_COLD_CONTEXT | FAULT_COLD_QUEUE | FAULT_WARM, setup, prepare, \
     call, unchanged, result, undo, teardown, label, strategy}

static const fault_case_t cases[] = {
    ATTENTION_CASE("attention (Fallback)", RUDNN_ATTENTION_FALLBACK),
    ATTENTION_CASE("attention (FlashUnit)", RUDNN_ATTENTION_FLASH_UNIT),
    ATTENTION_CASE("attention (FlashBlackboxAccelerated)", RUDNN_ATTENTION_FLASH_ACCELERATED),
};

const fault_family_t fault_family_attention = {"attention", cases, sizeof cases / sizeof cases[0]};
