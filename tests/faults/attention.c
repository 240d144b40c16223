/* Fault cases of dense attention: rudnn_attention with each explicit strategy that runs here
 * (Fallback takes its score workspace from the queue's pool; FlashUnit needs none), F32,
 * q [2, 4, 7, 16], k and v [2, 2, 9, 16] (GQA 2), a BOOL mask, an F32 bias, causal, lse.
 * Autotune is left out: its first call times every candidate and the winner's result need not be
 * bit-identical to the static choice's, which the walk compares against.
 *
 * rudnn_attention_backward (below the forward's cases) with workspace NULL (the FP32 Delta from the
 * queue's pool): its allocations are the pooled workspace (from a cold queue) and the backward
 * program's build (from a cold context). out and lse come from the library's forward (FlashUnit),
 * run in setup (its allocations are not the walk's). Two problems: F32 with the forward's mask,
 * bias and causal; F16 with softcap, a window, Dv != D and GQA 4. The successful call's dq, dk, dv
 * are checked against an FP64 reference computed here from the tensors as the device holds them
 * (the header's formulas with the given out and lse), within the FP32 rounding of the sums (with
 * exp's amplification of the score's error) and the dtype's rounding; then compared byte for byte
 * with the fault-free run. rudnn_attention_backward_workspace_size allocates nothing and is not
 * walked. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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

/* ---- the backward ---------------------------------------------------------------------------- */

typedef struct backward_def {
    rudnn_dtype_t dt;
    int64_t b, hq, hkv, sq, skv, d, dv;
    int mask, bias, causal;
    float softcap, scale;
    int64_t window_left;
} backward_def_t;

static const backward_def_t backward_defs[] = {
    {RUDNN_F32, B, HQ, HKV, SQ, SKV, D, D, 1, 1, 1, 0.0f, 0.0f, RUDNN_ATTENTION_NO_WINDOW},
    {RUDNN_F16, 1, 4, 1, 6, 5, 8, 12, 0, 0, 0, 3.0f, 0.4f, 2},
};

#define BWD_MAX 2048

typedef struct backward_state {
    fault_env_t env;
    const backward_def_t *def;
    rudnn_tensor_t q, k, v, mask, bias, out, lse, dout; /* inputs */
    rudnn_tensor_t dq, dk, dv;                          /* outputs */
    rudnn_attention_options_t options;
    rudnn_attention_backward_args_t args;
    double ref[3][BWD_MAX], err[3][BWD_MAX]; /* dq, dk, dv and each element's error bound */
} backward_state_t;

static rudnn_status_t read_f32(const fault_env_t *env, const rudnn_tensor_t *t, float *out)
{
    const size_t n = (size_t)rudnn_tensor_numel(t), bytes = rudnn_tensor_bytes(t);
    void *raw = malloc(bytes ? bytes : 1);
    if (!raw)
        return RUDNN_STATUS_ALLOC_FAILED;
    rudnn_status_t st = rudnn_tensor_read(env->queue, t, raw, bytes);
    if (!st)
        rudnn_convert_to_f32(t->dtype, raw, out, n);
    free(raw);
    return st;
}

/* dq, dk, dv in FP64 from what the device holds (attention.h's formulas with the given out and lse),
 * and per element a bound of its FP32 evaluation's error: the dot products' rounding, exp's
 * amplification of the score's absolute error, the cancellation of dout . v - Delta. */
static rudnn_status_t backward_reference(backward_state_t *s)
{
    const backward_def_t *d = s->def;
    static float q[BWD_MAX], k[BWD_MAX], v[BWD_MAX], out[BWD_MAX], dout[BWD_MAX], lse[BWD_MAX], bias[BWD_MAX];
    static uint8_t mask[BWD_MAX];
    rudnn_status_t st = read_f32(&s->env, &s->q, q);
    if (!st)
        st = read_f32(&s->env, &s->k, k);
    if (!st)
        st = read_f32(&s->env, &s->v, v);
    if (!st)
        st = read_f32(&s->env, &s->out, out);
    if (!st)
        st = read_f32(&s->env, &s->dout, dout);
    if (!st)
        st = rudnn_tensor_read(s->env.queue, &s->lse, lse, rudnn_tensor_bytes(&s->lse));
    if (!st && d->bias)
        st = read_f32(&s->env, &s->bias, bias);
    if (!st && d->mask)
        st = rudnn_tensor_read(s->env.queue, &s->mask, mask, rudnn_tensor_bytes(&s->mask));
    if (st)
        return st;
    memset(s->ref, 0, sizeof s->ref);
    memset(s->err, 0, sizeof s->err);
    const double e32 = 0x1p-23, scale = d->scale != 0.0f ? d->scale : 1.0 / sqrt((double)d->d);
    const int64_t g = d->hq / d->hkv, o = d->skv - d->sq;
    for (int64_t b = 0; b < d->b; b++)
        for (int64_t h = 0; h < d->hq; h++)
            for (int64_t i = 0; i < d->sq; i++) {
                const int64_t row = (b * d->hq + h) * d->sq + i, hk = h / g;
                const double l = lse[row];
                if (l == -INFINITY)
                    continue;
                const float *qr = q + row * d->d, *dor = dout + row * d->dv, *orow = out + row * d->dv;
                double delta = 0, delta_mag = 0;
                for (int64_t e = 0; e < d->dv; e++)
                    delta += (double)dor[e] * orow[e], delta_mag += fabs((double)dor[e] * orow[e]);
                for (int64_t j = 0; j < d->skv; j++) {
                    if (d->causal && j > i + o)
                        continue;
                    if (d->window_left >= 0 && j < i + o - d->window_left)
                        continue;
                    if (d->mask && mask[(b * d->sq + i) * d->skv + j])
                        continue;
                    const int64_t key = (b * d->hkv + hk) * d->skv + j;
                    const float *kr = k + key * d->d, *vr = v + key * d->dv;
                    double dot = 0, dot_mag = 0, dp = 0, dp_mag = 0;
                    for (int64_t e = 0; e < d->d; e++)
                        dot += (double)qr[e] * kr[e], dot_mag += fabs((double)qr[e] * kr[e]);
                    for (int64_t e = 0; e < d->dv; e++)
                        dp += (double)dor[e] * vr[e], dp_mag += fabs((double)dor[e] * vr[e]);
                    double sc = dot * scale, slope = 1;
                    if (d->softcap > 0) {
                        const double t = tanh(sc / d->softcap);
                        sc = d->softcap * t, slope = 1 - t * t;
                    }
                    double bv = 0;
                    if (d->bias)
                        bv = bias[((b * d->hq + h) * d->sq + i) * d->skv + j], sc += bv;
                    const double p = exp(sc - l);
                    /* the score's absolute error, which exp turns into P's relative one */
                    const double amp =
                        e32 * ((d->d + 4) * dot_mag * fabs(scale) + 4 * (fabs(sc) + fabs(bv) + fabs(l)) + 8);
                    const double diff = dp - delta, diff_err = e32 * (d->dv + 4) * (dp_mag + delta_mag);
                    const double du = p * diff * slope, du_err = p * slope * (diff_err + fabs(diff) * (amp + 4 * e32));
                    for (int64_t e = 0; e < d->d; e++) {
                        const double tq = scale * du * kr[e], tk = scale * du * qr[e];
                        s->ref[0][row * d->d + e] += tq;
                        s->err[0][row * d->d + e] += fabs(scale * kr[e]) * du_err + fabs(tq) * (d->skv + 4) * e32;
                        s->ref[1][key * d->d + e] += tk;
                        s->err[1][key * d->d + e] += fabs(scale * qr[e]) * du_err + fabs(tk) * (d->sq * g + 4) * e32;
                    }
                    for (int64_t e = 0; e < d->dv; e++) {
                        const double tv = p * dor[e];
                        s->ref[2][key * d->dv + e] += tv;
                        s->err[2][key * d->dv + e] += fabs(tv) * (amp + (d->sq * g + 4) * e32);
                    }
                }
            }
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t backward_setup(void *p, const fault_env_t *env)
{
    backward_state_t *s = p;
    s->env = *env;
    s->def = &backward_defs[env->variant];
    const backward_def_t *d = s->def;
    const int64_t dq[4] = {d->b, d->hq, d->sq, d->d}, dk[4] = {d->b, d->hkv, d->skv, d->d};
    const int64_t dv[4] = {d->b, d->hkv, d->skv, d->dv}, dout[4] = {d->b, d->hq, d->sq, d->dv};
    const int64_t dm[4] = {d->b, 1, d->sq, d->skv}, db[4] = {d->b, d->hq, d->sq, d->skv}, dl[3] = {d->b, d->hq, d->sq};
    if (d->b * d->hq * d->sq * d->skv > BWD_MAX || d->b * d->hq * d->sq * (d->d > d->dv ? d->d : d->dv) > BWD_MAX)
        return RUDNN_STATUS_INTERNAL;
    rudnn_attention_options_init(&s->options);
    s->options.causal = d->causal;
    s->options.softcap = d->softcap;
    s->options.scale = d->scale;
    s->options.window_left = d->window_left;
    rudnn_status_t st = fault_float_tensor(env, d->dt, 4, dq, 31, &s->q);
    if (!st)
        st = fault_float_tensor(env, d->dt, 4, dk, 32, &s->k);
    if (!st)
        st = fault_float_tensor(env, d->dt, 4, dv, 33, &s->v);
    if (!st)
        st = fault_float_tensor(env, d->dt, 4, dout, 34, &s->dout);
    if (!st && d->bias)
        st = fault_f32_tensor(env, 4, db, 35, &s->bias);
    if (!st && d->mask) {
        uint8_t mask[BWD_MAX];
        for (int64_t i = 0; i < d->b * d->sq * d->skv; i++)
            mask[i] = i % 5 == 0;
        rudnn_buffer_t mb = NULL;
        st = fault_buffer(env, (size_t)(d->b * d->sq * d->skv), mask, &mb);
        if (!st)
            st = rudnn_tensor_init(&s->mask, mb, 0, RUDNN_BOOL, 4, dm);
    }
    if (!st)
        st = fault_out_tensor(env, d->dt, 4, dout, &s->out);
    if (!st)
        st = fault_out_tensor(env, RUDNN_F32, 3, dl, &s->lse);
    if (!st)
        st = fault_out_tensor(env, d->dt, 4, dq, &s->dq);
    if (!st)
        st = fault_out_tensor(env, d->dt, 4, dk, &s->dk);
    if (!st)
        st = fault_out_tensor(env, d->dt, 4, dv, &s->dv);
    if (st)
        return st;
    s->args = (rudnn_attention_backward_args_t){&s->q,   &s->k,    &s->v,  d->mask ? &s->mask : NULL,
                                                d->bias ? &s->bias : NULL, &s->out, &s->lse, &s->dout,
                                                &s->dq, &s->dk, &s->dv};
    /* a backend without the backward answers NOT_SUPPORTED (the case is then skipped); the query
     * allocates nothing */
    size_t bytes;
    st = rudnn_attention_backward_workspace_size(env->queue, &s->args, &s->options, &bytes);
    if (!st) /* the forward gives out and lse, as a user gets them */
        st = rudnn_attention(env->queue, &s->q, &s->k, &s->v, d->mask ? &s->mask : NULL, d->bias ? &s->bias : NULL,
                             &s->options, RUDNN_ATTENTION_FLASH_UNIT, NULL, 0, &s->out, &s->lse);
    return st ? st : backward_reference(s);
}

static rudnn_status_t backward_prepare(void *p)
{
    backward_state_t *s = p;
    rudnn_status_t st = fault_fill_sentinel(&s->env, &s->dq);
    if (!st)
        st = fault_fill_sentinel(&s->env, &s->dk);
    return st ? st : fault_fill_sentinel(&s->env, &s->dv);
}

static rudnn_status_t backward_call(void *p)
{
    backward_state_t *s = p;
    return rudnn_attention_backward(s->env.queue, &s->args, &s->options, NULL, 0);
}

static int backward_unchanged(void *p, char *why, size_t cap)
{
    backward_state_t *s = p;
    return fault_is_sentinel(&s->env, &s->dq, "dq", why, cap) && fault_is_sentinel(&s->env, &s->dk, "dk", why, cap) &&
           fault_is_sentinel(&s->env, &s->dv, "dv", why, cap);
}

static rudnn_status_t backward_result(void *p, uint8_t **bytes, size_t *size)
{
    backward_state_t *s = p;
    *bytes = NULL;
    *size = 0;
    static float got[BWD_MAX];
    const rudnn_tensor_t *outs[3] = {&s->dq, &s->dk, &s->dv};
    static const char *const names[3] = {"dq", "dk", "dv"};
    const double eps = s->def->dt == RUDNN_F32 ? 0.0 : s->def->dt == RUDNN_F16 ? 0x1p-11 : 0x1p-8;
    for (int w = 0; w < 3; w++) {
        rudnn_status_t st = read_f32(&s->env, outs[w], got);
        if (st)
            return st;
        const size_t n = (size_t)rudnn_tensor_numel(outs[w]);
        for (size_t i = 0; i < n; i++) {
            const double want = s->ref[w][i], tol = 2 * s->err[w][i] + eps * fabs(want) + 1e-30;
            if (!(fabs((double)got[i] - want) <= tol)) {
                printf("faults attention: attention_backward %s element %zu of %zu: %.9g, expected %.9g (within "
                       "%.3g)\n", names[w], i, n, (double)got[i], want, tol);
                return RUDNN_STATUS_INTERNAL;
            }
        }
    }
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    for (int w = 0; !st && w < 3; w++)
        st = fault_append_tensor(&s->env, outs[w], bytes, size);
    return st;
}

static void backward_teardown(void *p)
{
    backward_state_t *s = p;
    rudnn_tensor_t *all[] = {&s->q, &s->k, &s->v, &s->mask, &s->bias, &s->out, &s->lse, &s->dout,
                             &s->dq, &s->dk, &s->dv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        fault_drop_tensor(all[i]);
}

#define BACKWARD_CASE(label, variant)                                                                        \
    {"attention_backward", sizeof(backward_state_t), FAULT_COLD_CONTEXT | FAULT_COLD_QUEUE | FAULT_WARM,      \
     backward_setup, backward_prepare, backward_call, backward_unchanged, backward_result, undo,              \
     backward_teardown, label, variant}

static const fault_case_t cases[] = {
    ATTENTION_CASE("attention (Fallback)", RUDNN_ATTENTION_FALLBACK),
    ATTENTION_CASE("attention (FlashUnit)", RUDNN_ATTENTION_FLASH_UNIT),
    ATTENTION_CASE("attention (FlashBlackboxAccelerated)", RUDNN_ATTENTION_FLASH_ACCELERATED),
    BACKWARD_CASE("attention_backward (f32, mask, bias, causal)", 0),
    BACKWARD_CASE("attention_backward (f16, softcap, window, GQA 4)", 1),
};

const fault_family_t fault_family_attention = {"attention", cases, sizeof cases / sizeof cases[0]};
