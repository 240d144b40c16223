/* Fault cases of the CTC loss (rudnn/ctc.h): rudnn_ctc_loss with workspace NULL (the queue's pool:
 * the lengths table, and with the gradient every step's alpha row), without and with the gradient,
 * the three dtypes, I32 and I64 targets, grad_loss given and NULL, zero_infinity. Its allocations:
 * the host copy of the lengths table, the pooled workspace (from a cold queue), the program build
 * (from a cold context). rudnn_ctc_loss_workspace_size allocates nothing (argument checks and
 * arithmetic; no program is built) and is not walked.
 *
 * log_probs [T 6, N 3, C 5] hold log_softmax rows; the samples: repeated labels (which need a blank
 * between them), an input shorter than T, an empty target, and (zero_infinity) a target too long
 * for its input. Every successful call's loss and gradient are checked against an FP64 reference
 * computed here (the alpha-beta recursions in log space, in double) within the FP32 rounding of the
 * log-space sums and the dtype's rounding; then compared byte for byte with the fault-free run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_case.h"
#include <rudnn/ctc.h>

#define T 6
#define N 3
#define C 5
#define S 3
#define L (2 * S + 1)

typedef struct ctc_def {
    rudnn_dtype_t dt, target_dt;
    int grad, grad_loss, zero_infinity;
    int64_t blank;
    int64_t input_lengths[N], target_lengths[N];
    int64_t targets[N][S];
} ctc_def_t;

static const ctc_def_t defs[] = {
    /* loss only, f32, i64 targets */
    {RUDNN_F32, RUDNN_I64, 0, 0, 0, 0, {6, 4, 2}, {3, 2, 0}, {{1, 1, 3}, {2, 4, 0}, {0, 0, 0}}},
    /* gradient, f16, i32 targets, grad_loss, blank 2 */
    {RUDNN_F16, RUDNN_I32, 1, 1, 0, 2, {6, 5, 3}, {3, 1, 2}, {{1, 3, 3}, {4, 0, 0}, {0, 1, 0}}},
    /* gradient, bf16, i64 targets, grad_loss NULL, zero_infinity: sample 2 cannot align */
    {RUDNN_BF16, RUDNN_I64, 1, 0, 1, 0, {6, 3, 2}, {2, 1, 2}, {{4, 2, 0}, {3, 0, 0}, {2, 2, 0}}},
};

typedef struct ctc_state {
    fault_env_t env;
    const ctc_def_t *def;
    rudnn_ctc_options_t opts;
    rudnn_tensor_t lp, targets, grad_loss; /* inputs */
    rudnn_tensor_t loss, grad;             /* outputs */
    rudnn_ctc_args_t args;
    double lpv[T][N][C], gl[N];
    double ref_loss[N], ref_grad[T][N][C];
} ctc_state_t;

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

static double lae(double a, double b)
{
    if (a == -INFINITY)
        return b;
    if (b == -INFINITY)
        return a;
    const double m = a > b ? a : b;
    return m + log1p(exp(-fabs(a - b)));
}

/* Sample n by the alpha-beta recursions (targets valid: the cases hold no bad label). */
static void reference_sample(ctc_state_t *s, int n)
{
    const ctc_def_t *d = s->def;
    const int64_t Tn = d->input_lengths[n], Sn = d->target_lengths[n], Ln = 2 * Sn + 1;
    int64_t lab[L];
    for (int64_t k = 0; k < Ln; k++)
        lab[k] = k & 1 ? d->targets[n][(k - 1) / 2] : d->blank;
    double alpha[T][L], beta[T][L], nll;
    for (int t = 0; t < T; t++)
        for (int k = 0; k < L; k++)
            alpha[t][k] = beta[t][k] = -INFINITY;
    if (Tn == 0) {
        nll = Sn == 0 ? 0.0 : INFINITY;
    } else {
        for (int64_t k = 0; k < Ln && k < 2; k++)
            alpha[0][k] = s->lpv[0][n][lab[k]];
        for (int64_t t = 1; t < Tn; t++)
            for (int64_t k = 0; k < Ln; k++) {
                double a = alpha[t - 1][k];
                if (k >= 1)
                    a = lae(a, alpha[t - 1][k - 1]);
                if ((k & 1) && k >= 2 && lab[k] != lab[k - 2])
                    a = lae(a, alpha[t - 1][k - 2]);
                alpha[t][k] = a + s->lpv[t][n][lab[k]];
            }
        nll = -(Ln > 1 ? lae(alpha[Tn - 1][Ln - 1], alpha[Tn - 1][Ln - 2]) : alpha[Tn - 1][Ln - 1]);
        for (int64_t t = Tn - 1; t >= 0; t--)
            for (int64_t k = 0; k < Ln; k++) {
                double b;
                if (t == Tn - 1) {
                    b = k >= Ln - 2 ? 0.0 : -INFINITY;
                } else {
                    b = beta[t + 1][k];
                    if (k + 1 < Ln)
                        b = lae(b, beta[t + 1][k + 1]);
                    if ((k & 1) && k + 2 < Ln && lab[k] != lab[k + 2])
                        b = lae(b, beta[t + 1][k + 2]);
                }
                beta[t][k] = b + s->lpv[t][n][lab[k]];
            }
    }
    const int zero = d->zero_infinity && isinf(nll);
    s->ref_loss[n] = zero ? 0.0 : nll;
    const double g = d->grad_loss ? s->gl[n] : 1.0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < C; c++) {
            if (t >= Tn || zero) {
                s->ref_grad[t][n][c] = 0.0;
                continue;
            }
            double lg = -INFINITY;
            for (int64_t k = 0; k < Ln; k++)
                if (lab[k] == c)
                    lg = lae(lg, alpha[t][k] + beta[t][k]);
            const double l = s->lpv[t][n][c];
            s->ref_grad[t][n][c] = isinf(nll) ? NAN : (exp(l) - exp(lg + nll - l)) * g;
        }
}

static rudnn_status_t setup(void *p, const fault_env_t *env)
{
    ctc_state_t *s = p;
    s->env = *env;
    s->def = &defs[env->variant];
    const ctc_def_t *d = s->def;
    rudnn_ctc_options_init(&s->opts);
    s->opts.blank = d->blank;
    s->opts.zero_infinity = d->zero_infinity;
    /* log_softmax rows of a fixed pattern, rounded to the dtype */
    float lp[T * N * C];
    for (int r = 0; r < T * N; r++) {
        double a[C], m = -INFINITY, z = 0;
        for (int c = 0; c < C; c++)
            a[c] = 1.5 * sin(0.7 * (r * C + c) + env->variant), m = a[c] > m ? a[c] : m;
        for (int c = 0; c < C; c++)
            z += exp(a[c] - m);
        for (int c = 0; c < C; c++)
            lp[r * C + c] = (float)(a[c] - m - log(z));
    }
    uint16_t raw16[T * N * C];
    const size_t es = rudnn_dtype_size(d->dt);
    const void *raw = lp;
    if (d->dt != RUDNN_F32) {
        rudnn_convert_from_f32(d->dt, lp, raw16, T * N * C);
        raw = raw16;
    }
    const int64_t dlp[3] = {T, N, C}, dt[2] = {N, S}, dn[1] = {N};
    rudnn_buffer_t b = NULL;
    rudnn_status_t st = fault_buffer(env, T * N * C * es, raw, &b);
    if (!st)
        st = rudnn_tensor_init(&s->lp, b, 0, d->dt, 3, dlp);
    if (!st) {
        int64_t t64[N * S];
        int32_t t32[N * S];
        for (int i = 0; i < N * S; i++)
            t64[i] = d->targets[i / S][i % S], t32[i] = (int32_t)t64[i];
        b = NULL;
        st = fault_buffer(env, N * S * rudnn_dtype_size(d->target_dt), d->target_dt == RUDNN_I64 ? (void *)t64 : t32,
                          &b);
        if (!st)
            st = rudnn_tensor_init(&s->targets, b, 0, d->target_dt, 2, dt);
    }
    if (!st && d->grad_loss) {
        const float g[N] = {0.5f, -1.25f, 2.0f};
        b = NULL;
        st = fault_buffer(env, sizeof g, g, &b);
        if (!st)
            st = rudnn_tensor_init(&s->grad_loss, b, 0, RUDNN_F32, 1, dn);
        for (int n = 0; n < N; n++)
            s->gl[n] = g[n];
    }
    if (!st)
        st = fault_out_tensor(env, RUDNN_F32, 1, dn, &s->loss);
    if (!st && d->grad)
        st = fault_out_tensor(env, d->dt, 3, dlp, &s->grad);
    if (st)
        return st;
    float back[T * N * C];
    st = read_f32(env, &s->lp, back);
    if (st)
        return st;
    for (int i = 0; i < T * N * C; i++)
        s->lpv[i / (N * C)][i / C % N][i % C] = back[i];
    for (int n = 0; n < N; n++)
        reference_sample(s, n);
    s->args.log_probs = &s->lp;
    s->args.targets = &s->targets;
    s->args.input_lengths = d->input_lengths;
    s->args.target_lengths = d->target_lengths;
    s->args.grad_loss = d->grad_loss ? &s->grad_loss : NULL;
    s->args.loss = &s->loss;
    s->args.grad_log_probs = d->grad ? &s->grad : NULL;
    /* a backend without CTC kernels answers NOT_SUPPORTED (the case is then skipped); the query
     * allocates nothing */
    size_t bytes;
    return rudnn_ctc_loss_workspace_size(env->queue, &s->args, &s->opts, &bytes);
}

static rudnn_status_t prepare(void *p)
{
    ctc_state_t *s = p;
    rudnn_status_t st = fault_fill_sentinel(&s->env, &s->loss);
    return st || !s->grad.buffer ? st : fault_fill_sentinel(&s->env, &s->grad);
}

static rudnn_status_t call(void *p)
{
    ctc_state_t *s = p;
    return rudnn_ctc_loss(s->env.queue, &s->args, &s->opts, NULL, 0);
}

static int unchanged(void *p, char *why, size_t cap)
{
    ctc_state_t *s = p;
    return fault_is_sentinel(&s->env, &s->loss, "loss", why, cap) &&
           (!s->grad.buffer || fault_is_sentinel(&s->env, &s->grad, "grad_log_probs", why, cap));
}

/* got against want: NaN and infinities exactly, else within tol. */
static int close_to(double got, double want, double tol)
{
    if (isnan(want) || isinf(want))
        return isnan(want) ? isnan(got) : got == want;
    return fabs(got - want) <= tol;
}

static rudnn_status_t result(void *p, uint8_t **bytes, size_t *size)
{
    ctc_state_t *s = p;
    *bytes = NULL;
    *size = 0;
    float loss[N], grad[T * N * C];
    rudnn_status_t st = read_f32(&s->env, &s->loss, loss);
    if (!st && s->grad.buffer)
        st = read_f32(&s->env, &s->grad, grad);
    if (st)
        return st;
    /* the log-space sums' FP32 error grows with the steps and the magnitudes they add: per sample,
     * 8 ulps a step of the largest log-probability the recursions read, summed over the steps */
    double rel[N];
    for (int n = 0; n < N; n++) {
        double A = 0;
        for (int t = 0; t < s->def->input_lengths[n]; t++) {
            double m = 0;
            for (int c = 0; c < C; c++)
                m = fabs(s->lpv[t][n][c]) > m ? fabs(s->lpv[t][n][c]) : m;
            A += m;
        }
        rel[n] = 8 * 0x1p-23 * (double)(s->def->input_lengths[n] + 1) * (A + (double)s->def->input_lengths[n] + 1);
    }
    const double eps = s->def->dt == RUDNN_F32 ? 0.0 : s->def->dt == RUDNN_F16 ? 0x1p-11 : 0x1p-8;
    for (int n = 0; n < N; n++)
        if (!close_to(loss[n], s->ref_loss[n], rel[n])) {
            printf("faults ctc: loss[%d] = %.9g, expected %.9g\n", n, (double)loss[n], s->ref_loss[n]);
            return RUDNN_STATUS_INTERNAL;
        }
    for (int i = 0; s->grad.buffer && i < T * N * C; i++) {
        const int t = i / (N * C), n = i / C % N, c = i % C;
        const double want = s->ref_grad[t][n][c], g = s->def->grad_loss ? fabs(s->gl[n]) : 1.0;
        const double tol = g * (rel[n] * 3 * (exp(s->lpv[t][n][c]) + 1) + 0x1p-21) + eps * fabs(want) + 1e-30;
        if (!close_to(grad[i], want, tol)) {
            printf("faults ctc: grad_log_probs[%d, %d, %d] = %.9g, expected %.9g\n", t, n, c, (double)grad[i], want);
            return RUDNN_STATUS_INTERNAL;
        }
    }
    st = fault_append_tensor(&s->env, &s->loss, bytes, size);
    return st || !s->grad.buffer ? st : fault_append_tensor(&s->env, &s->grad, bytes, size);
}

static void undo(void *p) { (void)p; }

static void teardown(void *p)
{
    ctc_state_t *s = p;
    rudnn_tensor_t *all[] = {&s->lp, &s->targets, &s->grad_loss, &s->loss, &s->grad};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        fault_drop_tensor(all[i]);
}

#define CTC_CASE(label, def)                                                                                   \
    {"ctc_loss", sizeof(ctc_state_t), FAULT_COLD_CONTEXT | FAULT_COLD_QUEUE | FAULT_WARM, setup, prepare, call, \
     unchanged, result, undo, teardown, label, def}

static const fault_case_t cases[] = {
    CTC_CASE("ctc_loss (loss only, f32, i64, pool)", 0),
    CTC_CASE("ctc_loss (grad, f16, i32, grad_loss, pool)", 1),
    CTC_CASE("ctc_loss (grad, bf16, zero_infinity, pool)", 2),
};

const fault_family_t fault_family_ctc = {"ctc", cases, sizeof cases / sizeof cases[0]};
