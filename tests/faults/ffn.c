/* Fault cases of FFN / MoeFFN (rudnn/ffn.h): rudnn_ffn in each scenario, its allocations being the
 * pooled workspace (a pool node on the host and the device block), the host copy of expert_tokens
 * (the expert form) and the plugin's (program builds from a cold context). x [2, 3, 8] (M 6), K1 8,
 * K2 8 (N1 16 for the gated activations), E 2 with expert_tokens {2, 3} as counts (row 5 is left
 * alone), biases where the scenario has them:
 *   F32 gelu, no expert_tokens, biases;
 *   F16 swiglu, experts, HIGH_PERFORMANCE without bias1 (h in F16), bias2;
 *   W8A8 silu, experts, per-channel scale and deq scales (F32), int32 biases;
 *   W4A16 (BF16 x, I4 weights) geglu, experts, per-group antiquant scales with offsets, no biases;
 *   the F16 experts case again with a workspace the caller gives: no pool, the expert_tokens copy
 *   alone once warm.
 * rudnn_ffn_workspace_size allocates nothing (argument checks and arithmetic; the OpenCL plugin has
 * no gemm_workspace entry), so it is not walked. */
#include <stdio.h>
#include <string.h>

#include "fault_case.h"
#include <rudnn/ffn.h>

#define NE 2
#define K1 8
#define K2 8

enum { V_F32, V_F16_EXPERTS, V_W8A8_EXPERTS, V_W4A16_EXPERTS, V_F16_EXPERTS_WORKSPACE };

enum { T_X, T_W1, T_W2, T_TOK, T_B1, T_B2, T_SC, T_OF, T_D1, T_D2, T_AS1, T_AO1, T_AS2, T_AO2, T_COUNT };

typedef struct ffn_state {
    fault_env_t env;
    rudnn_tensor_t t[T_COUNT];
    rudnn_tensor_t y;  /* output */
    rudnn_buffer_t ws; /* the caller's workspace (V_F16_EXPERTS_WORKSPACE) */
    size_t ws_bytes;
    rudnn_ffn_args_t a;
} ffn_state_t;

/* A tensor over bytes given by the case (integer dtypes). */
static rudnn_status_t raw_tensor(const fault_env_t *env, rudnn_dtype_t dt, int rank, const int64_t *dims,
                                 const void *data, size_t bytes, rudnn_tensor_t *t)
{
    rudnn_buffer_t b = NULL;
    rudnn_status_t st = fault_buffer(env, bytes, data, &b);
    if (st)
        return st;
    st = rudnn_tensor_init(t, b, 0, dt, rank, dims);
    if (st)
        rudnn_buffer_destroy(b);
    return st;
}

/* n int8 values of a small pattern (-4..4), as bytes. */
static void int8_pattern(int8_t *v, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (int8_t)((int)((i * 7 + seed) % 9) - 4);
}

static rudnn_status_t setup_f32(ffn_state_t *f, const fault_env_t *env)
{
    const int64_t x[3] = {2, 3, K1}, w1[2] = {K1, K2}, w2[2] = {K2, K1}, b1[1] = {K2}, b2[1] = {K1};
    rudnn_status_t st = fault_f32_tensor(env, 3, x, 31, &f->t[T_X]);
    if (!st)
        st = fault_f32_tensor(env, 2, w1, 32, &f->t[T_W1]);
    if (!st)
        st = fault_f32_tensor(env, 2, w2, 33, &f->t[T_W2]);
    if (!st)
        st = fault_f32_tensor(env, 1, b1, 34, &f->t[T_B1]);
    if (!st)
        st = fault_f32_tensor(env, 1, b2, 35, &f->t[T_B2]);
    if (!st)
        st = fault_out_tensor(env, RUDNN_F32, 3, x, &f->y);
    f->a.activation = RUDNN_FFN_GELU;
    return st;
}

static rudnn_status_t tokens(ffn_state_t *f, const fault_env_t *env)
{
    static const int64_t counts[NE] = {2, 3}; /* 5 of the 6 rows */
    const int64_t n[1] = {NE};
    return raw_tensor(env, RUDNN_I64, 1, n, counts, sizeof counts, &f->t[T_TOK]);
}

static rudnn_status_t setup_f16_experts(ffn_state_t *f, const fault_env_t *env)
{
    const int64_t x[3] = {2, 3, K1}, w1[3] = {NE, K1, 2 * K2}, w2[3] = {NE, K2, K1}, b2[2] = {NE, K1};
    rudnn_status_t st = fault_float_tensor(env, RUDNN_F16, 3, x, 41, &f->t[T_X]);
    if (!st)
        st = fault_float_tensor(env, RUDNN_F16, 3, w1, 42, &f->t[T_W1]);
    if (!st)
        st = fault_float_tensor(env, RUDNN_F16, 3, w2, 43, &f->t[T_W2]);
    if (!st)
        st = fault_float_tensor(env, RUDNN_F16, 2, b2, 44, &f->t[T_B2]);
    if (!st)
        st = tokens(f, env);
    if (!st)
        st = fault_out_tensor(env, RUDNN_F16, 3, x, &f->y);
    f->a.activation = RUDNN_FFN_SWIGLU;
    f->a.precision = RUDNN_FFN_HIGH_PERFORMANCE;
    return st;
}

static rudnn_status_t setup_w8a8_experts(ffn_state_t *f, const fault_env_t *env)
{
    const int64_t x[3] = {2, 3, K1}, w1[3] = {NE, K1, K2}, w2[3] = {NE, K2, K1}, b1[2] = {NE, K2},
                  b2[2] = {NE, K1}, pc1[2] = {NE, K2}, pc2[2] = {NE, K1}, one[1] = {NE};
    int8_t xv[2 * 3 * K1], w1v[NE * K1 * K2], w2v[NE * K2 * K1];
    int32_t b1v[NE * K2], b2v[NE * K1];
    int8_pattern(xv, sizeof xv, 1);
    int8_pattern(w1v, sizeof w1v, 2);
    int8_pattern(w2v, sizeof w2v, 3);
    for (int i = 0; i < NE * K2; i++)
        b1v[i] = i * 5 - 30;
    for (int i = 0; i < NE * K1; i++)
        b2v[i] = 17 - i * 3;
    rudnn_status_t st = raw_tensor(env, RUDNN_I8, 3, x, xv, sizeof xv, &f->t[T_X]);
    if (!st)
        st = raw_tensor(env, RUDNN_I8, 3, w1, w1v, sizeof w1v, &f->t[T_W1]);
    if (!st)
        st = raw_tensor(env, RUDNN_I8, 3, w2, w2v, sizeof w2v, &f->t[T_W2]);
    if (!st)
        st = raw_tensor(env, RUDNN_I32, 2, b1, b1v, sizeof b1v, &f->t[T_B1]);
    if (!st)
        st = raw_tensor(env, RUDNN_I32, 2, b2, b2v, sizeof b2v, &f->t[T_B2]);
    if (!st)
        st = fault_f32_tensor(env, 2, pc1, 51, &f->t[T_SC]);
    if (!st)
        st = fault_f32_tensor(env, 1, one, 52, &f->t[T_OF]);
    if (!st)
        st = fault_f32_tensor(env, 2, pc1, 53, &f->t[T_D1]);
    if (!st)
        st = fault_f32_tensor(env, 2, pc2, 54, &f->t[T_D2]);
    if (!st)
        st = tokens(f, env);
    if (!st)
        st = fault_out_tensor(env, RUDNN_F16, 3, x, &f->y);
    f->a.activation = RUDNN_FFN_SILU;
    return st;
}

static rudnn_status_t setup_w4a16_experts(ffn_state_t *f, const fault_env_t *env)
{
    /* I4 dims count values: [E, K, N] holds E K N / 2 bytes; groups 2 of K1, 4 of K2 */
    const int64_t x[3] = {2, 3, K1}, w1[3] = {NE, K1, 2 * K2}, w2[3] = {NE, K2, K1}, s1[3] = {NE, 2, 2 * K2},
                  s2[3] = {NE, 4, K1};
    uint8_t w1v[NE * K1 * 2 * K2 / 2], w2v[NE * K2 * K1 / 2];
    for (size_t i = 0; i < sizeof w1v; i++)
        w1v[i] = (uint8_t)(i * 37 + 11);
    for (size_t i = 0; i < sizeof w2v; i++)
        w2v[i] = (uint8_t)(i * 53 + 5);
    rudnn_status_t st = fault_float_tensor(env, RUDNN_BF16, 3, x, 61, &f->t[T_X]);
    if (!st)
        st = raw_tensor(env, RUDNN_I4, 3, w1, w1v, sizeof w1v, &f->t[T_W1]);
    if (!st)
        st = raw_tensor(env, RUDNN_I4, 3, w2, w2v, sizeof w2v, &f->t[T_W2]);
    if (!st)
        st = fault_float_tensor(env, RUDNN_BF16, 3, s1, 62, &f->t[T_AS1]);
    if (!st)
        st = fault_float_tensor(env, RUDNN_BF16, 3, s1, 63, &f->t[T_AO1]);
    if (!st)
        st = fault_float_tensor(env, RUDNN_BF16, 3, s2, 64, &f->t[T_AS2]);
    if (!st)
        st = fault_float_tensor(env, RUDNN_BF16, 3, s2, 65, &f->t[T_AO2]);
    if (!st)
        st = tokens(f, env);
    if (!st)
        st = fault_out_tensor(env, RUDNN_BF16, 3, x, &f->y);
    f->a.activation = RUDNN_FFN_GEGLU;
    return st;
}

/* Points the args at the tensors set up (a tensor without a buffer is left out). */
static void link_args(ffn_state_t *f)
{
    const rudnn_tensor_t **p[T_COUNT] = {&f->a.x, &f->a.weight1, &f->a.weight2, &f->a.expert_tokens,
                                         &f->a.bias1, &f->a.bias2, &f->a.scale, &f->a.offset,
                                         &f->a.deq_scale1, &f->a.deq_scale2, &f->a.antiquant_scale1,
                                         &f->a.antiquant_offset1, &f->a.antiquant_scale2, &f->a.antiquant_offset2};
    for (int i = 0; i < T_COUNT; i++)
        *p[i] = f->t[i].buffer ? &f->t[i] : NULL;
}

static rudnn_status_t setup(void *s, const fault_env_t *env)
{
    ffn_state_t *f = s;
    f->env = *env;
    rudnn_status_t st;
    switch (env->variant) {
    case V_F32: st = setup_f32(f, env); break;
    case V_W8A8_EXPERTS: st = setup_w8a8_experts(f, env); break;
    case V_W4A16_EXPERTS: st = setup_w4a16_experts(f, env); break;
    default: st = setup_f16_experts(f, env); break;
    }
    if (st)
        return st;
    link_args(f);
    size_t need = 0;
    st = rudnn_ffn_workspace_size(env->queue, &f->a, &f->y, &need);
    if (!st && env->variant == V_F16_EXPERTS_WORKSPACE) {
        f->ws_bytes = need;
        st = rudnn_buffer_create(env->ctx, need, &f->ws);
    }
    return st;
}

static rudnn_status_t prepare(void *s)
{
    ffn_state_t *f = s;
    return fault_fill_sentinel(&f->env, &f->y);
}

static rudnn_status_t call(void *s)
{
    ffn_state_t *f = s;
    return rudnn_ffn(f->env.queue, &f->a, f->ws, f->ws_bytes, &f->y);
}

static int unchanged(void *s, char *why, size_t cap)
{
    ffn_state_t *f = s;
    return fault_is_sentinel(&f->env, &f->y, "y", why, cap);
}

static rudnn_status_t result(void *s, uint8_t **bytes, size_t *size)
{
    ffn_state_t *f = s;
    *bytes = NULL;
    *size = 0;
    return fault_append_tensor(&f->env, &f->y, bytes, size);
}

static void undo(void *s) { (void)s; }

static void teardown(void *s)
{
    ffn_state_t *f = s;
    for (int i = 0; i < T_COUNT; i++)
        fault_drop_tensor(&f->t[i]);
    fault_drop_tensor(&f->y);
    if (f->ws)
        rudnn_buffer_destroy(f->ws);
}

#define FFN_CASE(label, variant)                                                                               \
    {"ffn",   sizeof(ffn_state_t), FAULT_COLD_CONTEXT | FAULT_COLD_QUEUE | FAULT_WARM, setup, prepare, call, \
     unchanged, result, undo, teardown, label, variant}

static const fault_case_t cases[] = {
    FFN_CASE("ffn (f32 gelu, biases)", V_F32),
    FFN_CASE("ffn (f16 swiglu, experts)", V_F16_EXPERTS),
    FFN_CASE("ffn (w8a8 silu, experts, per channel)", V_W8A8_EXPERTS),
    FFN_CASE("ffn (w4a16 geglu, experts, per group)", V_W4A16_EXPERTS),
    FFN_CASE("ffn (f16 swiglu, experts, given workspace)", V_F16_EXPERTS_WORKSPACE),
};

const fault_family_t fault_family_ffn = {"ffn", cases, sizeof cases / sizeof cases[0]};
