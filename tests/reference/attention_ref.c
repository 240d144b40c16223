/* FP64 reference of dense attention; the order of operations is the contract's (rudnn/attention.h,
 * DESIGN.md 8): scale, softcap, mask, causal/window, bias, softmax, times V. */
#include <math.h>
#include <stdlib.h>

#include "attention_ref.h"

int attn_ref_visible(const attn_ref_problem_t *p, int64_t i, int64_t j)
{
    const int64_t o = p->seq_kv - p->seq_q; /* bottom-right: the last query meets the last key */
    if (p->causal && j > i + o)
        return 0;
    if (p->window_left >= 0 && j < i + o - p->window_left)
        return 0;
    if (p->window_right >= 0 && j > i + o + p->window_right)
        return 0;
    return 1;
}

/* Index of element (b, h, i, j) of a [nb, nh, Sq, Skv] array that broadcasts dims of size 1. */
static int64_t scores_index(const attn_ref_problem_t *p, int64_t nb, int64_t nh, int64_t b, int64_t h, int64_t i,
                            int64_t j)
{
    return (((nb == 1 ? 0 : b) * nh + (nh == 1 ? 0 : h)) * p->seq_q + i) * p->seq_kv + j;
}

void attn_ref_forward(const attn_ref_problem_t *p, double *out, double *lse)
{
    const int64_t group = p->heads_q / p->heads_kv, skv = p->seq_kv, d = p->head_dim, dv = p->head_dim_v;
    double *s = malloc(sizeof(double) * (size_t)(skv ? skv : 1));
    if (!s)
        abort();
    for (int64_t b = 0; b < p->batch; b++) {
        for (int64_t h = 0; h < p->heads_q; h++) {
            const int64_t hk = h / group;
            const float *kb = p->k + (b * p->heads_kv + hk) * skv * d;
            const float *vb = p->v + (b * p->heads_kv + hk) * skv * dv;
            for (int64_t i = 0; i < p->seq_q; i++) {
                const float *qi = p->q + ((b * p->heads_q + h) * p->seq_q + i) * d;
                double *oi = out + ((b * p->heads_q + h) * p->seq_q + i) * dv;
                double max = -INFINITY;
                for (int64_t j = 0; j < skv; j++) {
                    double dot = 0;
                    for (int64_t x = 0; x < d; x++)
                        dot += (double)qi[x] * (double)kb[j * d + x];
                    double sc = dot * p->scale;
                    if (p->softcap > 0)
                        sc = p->softcap * tanh(sc / p->softcap);
                    if (p->mask && p->mask[scores_index(p, p->mask_b, p->mask_h, b, h, i, j)])
                        sc = -INFINITY;
                    if (!attn_ref_visible(p, i, j))
                        sc = -INFINITY;
                    if (p->bias)
                        sc += (double)p->bias[scores_index(p, p->bias_b, p->bias_h, b, h, i, j)];
                    s[j] = sc;
                    if (sc > max)
                        max = sc;
                }
                for (int64_t x = 0; x < dv; x++)
                    oi[x] = 0;
                if (max == -INFINITY) { /* fully masked */
                    if (lse)
                        lse[(b * p->heads_q + h) * p->seq_q + i] = -INFINITY;
                    continue;
                }
                double sum = 0;
                for (int64_t j = 0; j < skv; j++) {
                    double e = exp(s[j] - max);
                    sum += e;
                    for (int64_t x = 0; x < dv; x++)
                        oi[x] += e * (double)vb[j * dv + x];
                }
                for (int64_t x = 0; x < dv; x++)
                    oi[x] /= sum;
                if (lse)
                    lse[(b * p->heads_q + h) * p->seq_q + i] = max + log(sum);
            }
        }
    }
    free(s);
}

/* Scores of row (b, h, i) as the forward computes them (s[j], -inf where not visible) and the
 * softcap's slope ds/du at each (1 without a softcap); returns the row's maximum. */
static double row_scores(const attn_ref_problem_t *p, int64_t b, int64_t h, int64_t i, double *s, double *slope)
{
    const int64_t group = p->heads_q / p->heads_kv, skv = p->seq_kv, d = p->head_dim;
    const float *kb = p->k + (b * p->heads_kv + h / group) * skv * d;
    const float *qi = p->q + ((b * p->heads_q + h) * p->seq_q + i) * d;
    double max = -INFINITY;
    for (int64_t j = 0; j < skv; j++) {
        double dot = 0;
        for (int64_t x = 0; x < d; x++)
            dot += (double)qi[x] * (double)kb[j * d + x];
        double sc = dot * p->scale;
        slope[j] = 1.0;
        if (p->softcap > 0) {
            const double t = tanh(sc / p->softcap);
            sc = p->softcap * t;
            slope[j] = 1.0 - t * t;
        }
        if (p->mask && p->mask[scores_index(p, p->mask_b, p->mask_h, b, h, i, j)])
            sc = -INFINITY;
        if (!attn_ref_visible(p, i, j))
            sc = -INFINITY;
        if (p->bias)
            sc += (double)p->bias[scores_index(p, p->bias_b, p->bias_h, b, h, i, j)];
        s[j] = sc;
        if (sc > max)
            max = sc;
    }
    return max;
}

void attn_ref_backward(const attn_ref_problem_t *p, const float *dout, double *dq, double *dk, double *dv)
{
    const int64_t group = p->heads_q / p->heads_kv, skv = p->seq_kv, d = p->head_dim, dvd = p->head_dim_v;
    const size_t n = (size_t)(skv ? skv : 1);
    double *s = malloc(sizeof(double) * n), *slope = malloc(sizeof(double) * n);
    double *prob = malloc(sizeof(double) * n), *o = malloc(sizeof(double) * (size_t)dvd);
    if (!s || !slope || !prob || !o)
        abort();
    const int64_t nq = p->batch * p->heads_q * p->seq_q * d, nk = p->batch * p->heads_kv * skv * d;
    const int64_t nv = p->batch * p->heads_kv * skv * dvd;
    for (int64_t x = 0; x < nq; x++)
        dq[x] = 0;
    for (int64_t x = 0; x < nk; x++)
        dk[x] = 0;
    for (int64_t x = 0; x < nv; x++)
        dv[x] = 0;
    for (int64_t b = 0; b < p->batch; b++) {
        for (int64_t h = 0; h < p->heads_q; h++) {
            const int64_t hk = h / group;
            const float *kb = p->k + (b * p->heads_kv + hk) * skv * d;
            const float *vb = p->v + (b * p->heads_kv + hk) * skv * dvd;
            double *dkb = dk + (b * p->heads_kv + hk) * skv * d;
            double *dvb = dv + (b * p->heads_kv + hk) * skv * dvd;
            for (int64_t i = 0; i < p->seq_q; i++) {
                const int64_t row = (b * p->heads_q + h) * p->seq_q + i;
                const float *qi = p->q + row * d;
                const float *doi = dout + row * dvd;
                double *dqi = dq + row * d;
                const double max = row_scores(p, b, h, i, s, slope);
                if (max == -INFINITY)
                    continue; /* fully masked: out 0, lse -inf, no gradient */
                double sum = 0;
                for (int64_t j = 0; j < skv; j++)
                    sum += exp(s[j] - max);
                const double lse = max + log(sum);
                for (int64_t x = 0; x < dvd; x++)
                    o[x] = 0;
                for (int64_t j = 0; j < skv; j++) {
                    prob[j] = exp(s[j] - lse);
                    for (int64_t x = 0; x < dvd; x++)
                        o[x] += prob[j] * (double)vb[j * dvd + x];
                }
                double delta = 0;
                for (int64_t x = 0; x < dvd; x++)
                    delta += (double)doi[x] * o[x];
                for (int64_t j = 0; j < skv; j++) {
                    if (prob[j] == 0 && s[j] == -INFINITY)
                        continue;
                    double dp = 0;
                    for (int64_t x = 0; x < dvd; x++)
                        dp += (double)doi[x] * (double)vb[j * dvd + x];
                    const double du = prob[j] * (dp - delta) * slope[j];
                    for (int64_t x = 0; x < d; x++) {
                        dqi[x] += p->scale * du * (double)kb[j * d + x];
                        dkb[j * d + x] += p->scale * du * (double)qi[x];
                    }
                    for (int64_t x = 0; x < dvd; x++)
                        dvb[j * dvd + x] += prob[j] * (double)doi[x];
                }
            }
        }
    }
    free(s), free(slope), free(prob), free(o);
}
