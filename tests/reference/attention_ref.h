/* Plain-C FP64 host reference of dense attention (rudnn/attention.h), the whole contract: GQA,
 * softcap, mask, causal and window (bottom-right aligned), bias, fully masked rows, lse.
 * Inputs are float arrays that already hold values of the op's dtype, in the logical layouts
 * (contiguous [B, H, S, D]); the test harness builds them from whatever strides it gives the op. */
#ifndef RUDNN_TESTS_ATTENTION_REF_H
#define RUDNN_TESTS_ATTENTION_REF_H

#include <stdint.h>

typedef struct attn_ref_problem {
    int64_t batch, heads_q, heads_kv, seq_q, seq_kv, head_dim, head_dim_v;
    const float *q; /* [B, Hq, Sq, D] */
    const float *k; /* [B, Hkv, Skv, D] */
    const float *v; /* [B, Hkv, Skv, Dv] */
    /* optional: [mask_b, mask_h, Sq, Skv], mask_b 1 or B, mask_h 1 or Hq (1 broadcasts) */
    const uint8_t *mask;
    int64_t mask_b, mask_h;
    const float *bias; /* optional, [bias_b, bias_h, Sq, Skv] as the mask */
    int64_t bias_b, bias_h;
    double scale;   /* already resolved (the op's default is 1 / sqrt(D)) */
    double softcap; /* 0: none */
    int causal;
    int64_t window_left, window_right; /* -1: no limit */
} attn_ref_problem_t;

/* out [B, Hq, Sq, Dv] and lse [B, Hq, Sq] (lse may be NULL). A fully masked row (no key in its
 * range, every key masked, or Skv 0) gives zeros and lse -inf. */
void attn_ref_forward(const attn_ref_problem_t *p, double *out, double *lse);

/* Whether query i may see key j by the causal and window options (mask and bias aside). */
int attn_ref_visible(const attn_ref_problem_t *p, int64_t i, int64_t j);

/* The backward (rudnn/attention.h, "backward"): the gradients of L = sum(dout * out) with respect
 * to q, k and v, out the forward of the same problem, recomputed here in FP64 (not the op's):
 *   P = exp(s - lse),  Delta_i = dout_i . out_i,  dS = P (dout v^T - Delta),
 *   dq = scale dU k,  dk = scale dU^T q,  dv = P^T dout,
 * dU = dS, times 1 - tanh^2(scale (q . k) / softcap) under a softcap; with grouped-query
 * attention dk and dv sum over the query heads of each key head. A fully masked row contributes
 * nothing (its dq row is 0). dout [B, Hq, Sq, Dv] in the logical layout; dq [B, Hq, Sq, D],
 * dk [B, Hkv, Skv, D], dv [B, Hkv, Skv, Dv], every element written (Sq 0: dk, dv zeros; Skv 0:
 * dq zeros). */
void attn_ref_backward(const attn_ref_problem_t *p, const float *dout, double *dq, double *dk, double *dv);

#endif
