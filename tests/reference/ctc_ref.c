/* FP64 reference of the CTC loss: see ctc_ref.h. */
#include "ctc_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* log(exp(a) + exp(b)), -inf when both are -inf. */
static double lse(double a, double b)
{
    if (a == -INFINITY)
        return b;
    if (b == -INFINITY)
        return a;
    const double m = a > b ? a : b;
    return m + log(exp(a - m) + exp(b - m));
}

static int labels_valid(int64_t C, int64_t L, const int64_t *target, int64_t blank)
{
    for (int64_t i = 0; i < L; i++)
        if (target[i] < 0 || target[i] >= C || target[i] == blank)
            return 0;
    return 1;
}

static void fill(double *grad, int64_t n, double v)
{
    for (int64_t i = 0; grad && i < n; i++)
        grad[i] = v;
}

double ctc_ref_sample(int64_t T, int64_t C, const double *lp, int64_t L, const int64_t *target, int64_t blank,
                      double *grad, int *oom)
{
    if (!labels_valid(C, L, target, blank)) {
        fill(grad, T * C, NAN);
        return NAN;
    }
    if (T == 0)
        return L == 0 ? 0.0 : INFINITY;
    const int64_t Ls = 2 * L + 1; /* extended labels */
    int64_t *ext = malloc(sizeof(int64_t) * (size_t)Ls);
    double *alpha = malloc(sizeof(double) * (size_t)(T * Ls)), *beta = malloc(sizeof(double) * (size_t)(T * Ls));
    if (!ext || !alpha || !beta) {
        free(ext), free(alpha), free(beta);
        if (oom)
            *oom = 1;
        return NAN;
    }
    for (int64_t s = 0; s < Ls; s++)
        ext[s] = s % 2 ? target[(s - 1) / 2] : blank;

    /* alpha, forward */
    for (int64_t s = 0; s < Ls; s++)
        alpha[s] = s < 2 ? lp[ext[s]] : -INFINITY;
    for (int64_t t = 1; t < T; t++)
        for (int64_t s = 0; s < Ls; s++) {
            const double *prev = alpha + (t - 1) * Ls;
            double a = prev[s];
            if (s >= 1)
                a = lse(a, prev[s - 1]);
            if (s >= 2 && s % 2 == 1 && ext[s] != ext[s - 2])
                a = lse(a, prev[s - 2]);
            alpha[t * Ls + s] = a == -INFINITY ? -INFINITY : a + lp[t * C + ext[s]];
        }
    const double *last = alpha + (T - 1) * Ls;
    const double logp = Ls > 1 ? lse(last[Ls - 1], last[Ls - 2]) : last[Ls - 1];
    const double loss = -logp;

    if (grad) {
        if (logp == -INFINITY) {
            fill(grad, T * C, NAN); /* no alignment: the posterior is 0 / 0 */
        } else {
            /* beta, backward */
            for (int64_t s = 0; s < Ls; s++)
                beta[(T - 1) * Ls + s] = s >= Ls - 2 ? lp[(T - 1) * C + ext[s]] : -INFINITY;
            for (int64_t t = T - 2; t >= 0; t--)
                for (int64_t s = 0; s < Ls; s++) {
                    const double *next = beta + (t + 1) * Ls;
                    double b = next[s];
                    if (s + 1 < Ls)
                        b = lse(b, next[s + 1]);
                    if (s + 2 < Ls && s % 2 == 1 && ext[s] != ext[s + 2])
                        b = lse(b, next[s + 2]);
                    beta[t * Ls + s] = b == -INFINITY ? -INFINITY : b + lp[t * C + ext[s]];
                }
            /* gamma and the gradient */
            for (int64_t t = 0; t < T; t++) {
                for (int64_t c = 0; c < C; c++)
                    grad[t * C + c] = 0.0; /* gamma accumulates here first */
                for (int64_t s = 0; s < Ls; s++) {
                    const double ab = alpha[t * Ls + s] + beta[t * Ls + s];
                    if (ab == -INFINITY)
                        continue;
                    grad[t * C + ext[s]] += exp(ab - lp[t * C + ext[s]] - logp);
                }
                for (int64_t c = 0; c < C; c++)
                    grad[t * C + c] = exp(lp[t * C + c]) - grad[t * C + c];
            }
        }
    }
    free(ext), free(alpha), free(beta);
    return loss;
}

double ctc_ref_brute(int64_t T, int64_t C, const double *lp, int64_t L, const int64_t *target, int64_t blank,
                     double *grad)
{
    if (!labels_valid(C, L, target, blank)) {
        fill(grad, T * C, NAN);
        return NAN;
    }
    uint64_t paths = 1;
    for (int64_t t = 0; t < T; t++) {
        paths *= (uint64_t)C;
        if (T > 12 || paths > (1u << 24)) {
            fill(grad, T * C, NAN);
            return NAN;
        }
    }
    int64_t path[12], out[12];
    double gamma[12 * 16];
    const int keep = grad && C <= 16;
    if (grad && !keep) {
        fill(grad, T * C, NAN);
        return NAN;
    }
    memset(gamma, 0, sizeof gamma);
    double total = 0.0;
    for (uint64_t k = 0; k < paths; k++) {
        uint64_t r = k;
        for (int64_t t = 0; t < T; t++) {
            path[t] = (int64_t)(r % (uint64_t)C);
            r /= (uint64_t)C;
        }
        /* collapse: merge repeats, drop blanks */
        int64_t n = 0;
        for (int64_t t = 0; t < T; t++)
            if (path[t] != blank && (t == 0 || path[t] != path[t - 1]))
                out[n++] = path[t];
        int match = n == L;
        for (int64_t i = 0; match && i < L; i++)
            match = out[i] == target[i];
        if (!match)
            continue;
        double logprob = 0.0;
        for (int64_t t = 0; t < T; t++)
            logprob += lp[t * C + path[t]];
        const double p = exp(logprob);
        total += p;
        for (int64_t t = 0; keep && t < T; t++)
            gamma[t * C + path[t]] += p;
    }
    if (keep) {
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < C; c++)
                grad[t * C + c] = total > 0 ? exp(lp[t * C + c]) - gamma[t * C + c] / total : NAN;
    }
    return -log(total); /* total 0: +inf */
}

int ctc_ref_batch(int64_t T, int64_t N, int64_t C, int64_t S, const double *lp, const int64_t *targets,
                  const int64_t *input_lengths, const int64_t *target_lengths, int64_t blank, int zero_infinity,
                  const double *grad_loss, double *loss, double *grad)
{
    double *x = malloc(sizeof(double) * (size_t)(T * C + 1)), *g = malloc(sizeof(double) * (size_t)(T * C + 1));
    if (!x || !g) {
        free(x), free(g);
        return -1;
    }
    int oom = 0;
    for (int64_t n = 0; n < N && !oom; n++) {
        const int64_t Tn = input_lengths[n];
        for (int64_t t = 0; t < Tn; t++) /* sample n's rows, [Tn][C] */
            for (int64_t c = 0; c < C; c++)
                x[t * C + c] = lp[(t * N + n) * C + c];
        double l = ctc_ref_sample(Tn, C, x, target_lengths[n], targets + n * S, blank, grad ? g : NULL, &oom);
        const int zero = zero_infinity && isinf(l);
        loss[n] = zero ? 0.0 : l;
        if (!grad)
            continue;
        const double gl = grad_loss ? grad_loss[n] : 1.0;
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < C; c++)
                grad[(t * N + n) * C + c] = t >= Tn || zero ? 0.0 : gl * g[t * C + c];
    }
    free(x), free(g);
    return oom ? -1 : 0;
}

void ctc_ref_log_softmax(int64_t n, const double *a, double *out)
{
    double m = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        m = a[i] > m ? a[i] : m;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += exp(a[i] - m);
    const double lsum = m + log(sum);
    for (int64_t i = 0; i < n; i++)
        out[i] = a[i] - lsum;
}
