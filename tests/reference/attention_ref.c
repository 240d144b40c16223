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
