/* rudnn OpenCL kernels of MoE first-order training (include/rudnn/moe_train.h has the formulas).
 * Two programs, picked with -DMOE_TRAIN_PART:
 *   1  router  -DRUDNN_DTYPE (logits, grad_logits), -DRUDNN_IDX (indices: 0 U32, 1 I32, 2 I64),
 *              -DMAX_TOP_K (the local arrays' length): router_weights, router_backward
 *   2  rows    -DRUDNN_DTYPE (dispatched rows), -DRUDNN_WDTYPE (routing weights):
 *              combine_backward (serial, plane), dispatch_backward
 * act_t / LOAD_A / STORE_A, w_t / LOAD_W, group_sum and group_max come from common.cl. One
 * work-group a token row; every kernel takes group0, the first row of this launch (the host
 * splits long launches). Sums are FP32, in a fixed order; each output is rounded once. */

#if MOE_TRAIN_PART == 1

#if RUDNN_IDX == 0
#define idx_t uint
#elif RUDNN_IDX == 1
#define idx_t int
#else
#define idx_t long
#endif

/* p of one logit under sigmoid scoring: the stable form (no overflow of exp for either sign). */
float sigmoid_of(float x)
{
    if (x >= 0.0f) {
        return 1.0f / (1.0f + exp(-x));
    }
    const float e = exp(x);
    return e / (1.0f + e);
}

/* The row's selected expert ids into ids[0..k) (0 where out of range) and whether any is outside
 * [0, experts): that row's outputs are then NaN. Every work-item reads all k ids for the answer (no
 * shared flag); ids is ready for all after the barrier. */
int load_selection(const __global idx_t *idx, uint experts, uint top_k, __local int *ids)
{
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    int invalid = 0;
    for (uint j = 0; j < top_k; j++) {
        const long i = (long)idx[j];
        const int out = i < 0 || i >= (long)experts;
        invalid |= out;
        if (j % L == lid) {
            ids[j] = out ? 0 : (int)i;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    return invalid;
}

/* Softmax statistics of the row (max, then the sum of exp(x - max)); every work-item gets both. */
void softmax_stats(const __global act_t *x, uint experts, __local float *scratch, float *m, float *sum)
{
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    float v = -INFINITY;
    for (uint i = lid; i < experts; i += L) {
        v = fmax(v, LOAD_A(x, i));
    }
    *m = group_max(v, scratch);
    float acc = 0.0f;
    for (uint i = lid; i < experts; i += L) {
        acc = acc + exp(LOAD_A(x, i) - *m);
    }
    *sum = group_sum(acc, scratch);
}

/* p of expert i: one expression for both kernels and every use, so that they agree bit for bit. */
float score_of(const __global act_t *x, int i, uint sigmoid_scoring, float m, float sum)
{
    return sigmoid_scoring ? sigmoid_of(LOAD_A(x, i)) : exp(LOAD_A(x, i) - m) / sum;
}

/* sel[0..k) = the selected experts' scores. Softmax renormalized is the softmax over the selected
 * logits alone (the row's denominator cancels): taken that way, from their own max, so that
 * selected logits far below the row's max do not underflow to 0 / 0. Ends with a barrier. */
void selected_scores(const __global act_t *x, uint experts, uint top_k, __local const int *ids,
                     uint sigmoid_scoring, uint renormalize, __local float *scratch, __local float *sel,
                     float *m, float *sum)
{
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    *m = 0.0f;
    *sum = 1.0f;
    if (!sigmoid_scoring && renormalize) {
        float v = -INFINITY;
        for (uint j = lid; j < top_k; j += L) {
            v = fmax(v, LOAD_A(x, ids[j]));
        }
        *m = group_max(v, scratch);
        for (uint j = lid; j < top_k; j += L) {
            sel[j] = exp(LOAD_A(x, ids[j]) - *m);
        }
    } else {
        if (!sigmoid_scoring) {
            softmax_stats(x, experts, scratch, m, sum);
        }
        for (uint j = lid; j < top_k; j += L) {
            sel[j] = score_of(x, ids[j], sigmoid_scoring, *m, *sum);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

__kernel void rudnn_router_weights(const __global act_t *logits, ulong logits_off,
                                   const __global idx_t *indices, ulong indices_off,
                                   __global float *weights, ulong weights_off, ulong group0, uint experts,
                                   uint top_k, uint sigmoid_scoring, uint renormalize, float scale,
                                   __local float *scratch)
{
    __local int ids[MAX_TOP_K];
    __local float sel[MAX_TOP_K];
    const uint lid = get_local_id(0);
    const ulong t = group0 + get_group_id(0);
    const __global act_t *x = logits + logits_off + t * experts;
    __global float *w = weights + weights_off + t * top_k;

    const int invalid = load_selection(indices + indices_off + t * top_k, experts, top_k, ids);
    float m, sum;
    selected_scores(x, experts, top_k, ids, sigmoid_scoring, renormalize, scratch, sel, &m, &sum);
    if (lid == 0) {
        float total = 0.0f; /* in slot order */
        for (uint j = 0; j < top_k; j++) {
            total = total + sel[j];
        }
        for (uint j = 0; j < top_k; j++) {
            const float p = renormalize ? sel[j] / total : sel[j];
            w[j] = invalid ? NAN : scale * p;
        }
    }
}

/* grad_logits[e] = D p[e] + sum over the occurrences j of e of c[j] (D only for softmax without
 * renormalization, where every logit reaches every weight through the softmax's denominator):
 *   softmax:            c[j] = s g[j] p[j],              D = -s sum_j g[j] p[j]
 *   softmax, renorm:    q[j] = p[j] / P, A = sum_j g[j] q[j],  c[j] = s (g[j] - A) q[j]
 *   sigmoid:            c[j] = s g[j] p[j] (1 - p[j])
 *   sigmoid, renorm:    q[j] = p[j] / S, A = sum_j g[j] q[j],  c[j] = s (g[j] - A) q[j] (1 - p[j])
 * (1 - p[j] taken as sigmoid(-x): no cancellation where p[j] is near 1). Renormalized, every
 * product is formed from q (at most 1) rather than from p: g p may be subnormal where S is tiny
 * (sigmoid scores near 1e-27), and dividing such a product by S would scale its lost digits up.
 * with p[j] the score of the j-th selected expert (P, S: their sum, a repeat counted each time; for
 * softmax renormalized, selected_scores' exp(x - the selected max), whose ratios are the same). */
__kernel void rudnn_router_backward(const __global act_t *logits, ulong logits_off,
                                    const __global idx_t *indices, ulong indices_off,
                                    const __global float *grad_weights, ulong grad_weights_off,
                                    __global act_t *grad_logits, ulong grad_logits_off, ulong group0,
                                    uint experts, uint top_k, uint sigmoid_scoring, uint renormalize, float scale,
                                    __local float *scratch)
{
    __local int ids[MAX_TOP_K];
    __local float sel[MAX_TOP_K];
    __local float coef[MAX_TOP_K];
    __local float dense;
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    const ulong t = group0 + get_group_id(0);
    const __global act_t *x = logits + logits_off + t * experts;
    const __global float *g = grad_weights + grad_weights_off + t * top_k;
    __global act_t *gx = grad_logits + grad_logits_off + t * experts;

    const int invalid = load_selection(indices + indices_off + t * top_k, experts, top_k, ids);
    float m, sum;
    selected_scores(x, experts, top_k, ids, sigmoid_scoring, renormalize, scratch, sel, &m, &sum);
    if (lid == 0) {
        float total = 0.0f, dot = 0.0f; /* sum of p, then sum of g p (g q renormalized): slot order */
        for (uint j = 0; j < top_k; j++) {
            total = total + sel[j];
        }
        for (uint j = 0; j < top_k; j++) {
            dot = dot + g[j] * (renormalize ? sel[j] / total : sel[j]);
        }
        for (uint j = 0; j < top_k; j++) {
            const float p = sel[j];
            float c;
            if (!renormalize) {
                c = scale * g[j] * (sigmoid_scoring ? p * sigmoid_of(-LOAD_A(x, ids[j])) : p);
            } else {
                const float q = p / total;
                c = scale * (g[j] - dot) * (sigmoid_scoring ? q * sigmoid_of(-LOAD_A(x, ids[j])) : q);
            }
            coef[j] = c;
        }
        dense = !sigmoid_scoring && !renormalize ? -scale * dot : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const int with_dense = !sigmoid_scoring && !renormalize;
    for (uint e = lid; e < experts; e += L) {
        float v = with_dense ? dense * score_of(x, (int)e, 0u, m, sum) : 0.0f;
        for (uint j = 0; j < top_k; j++) {
            if (ids[j] == (int)e) {
                v = v + coef[j];
            }
        }
        STORE_A(gx, e, invalid ? NAN : v);
    }
}

/* ================================================================================
 * Part 2: the backward of combine and dispatch. positions[t*k + j] is the dispatched row of
 * (token t, slot j): every row appears once, so each kernel writes each output element once.
 * ================================================================================ */
#elif MOE_TRAIN_PART == 2

/* grad_expert[positions[t, j], :] = w[t, j] * grad_out[t, :]; with plane == 0 work-item j computes
 * grad_weights[t, j] alone, h ascending; with plane != 0 the group sums each j over its items (a
 * fixed tree: deterministic for a given local size). */
__kernel void rudnn_combine_backward(const __global act_t *expert_out, ulong expert_out_off,
                                     const __global uint *positions, ulong positions_off,
                                     const __global w_t *weights, ulong weights_off,
                                     const __global act_t *grad_out, ulong grad_out_off,
                                     __global act_t *grad_expert, ulong grad_expert_off,
                                     __global float *grad_weights, ulong grad_weights_off, ulong group0,
                                     uint top_k, uint hidden, uint plane, __local float *scratch)
{
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    const ulong t = group0 + get_group_id(0);
    const __global uint *pos = positions + positions_off + t * top_k;
    const __global w_t *w = weights + weights_off + t * top_k;
    const __global act_t *g = grad_out + grad_out_off + t * hidden;
    const __global act_t *eo = expert_out + expert_out_off;
    __global act_t *ge = grad_expert + grad_expert_off;
    __global float *gw = grad_weights + grad_weights_off + t * top_k;

    for (uint j = 0; j < top_k; j++) {
        const float wj = LOAD_W(w, j);
        __global act_t *row = ge + (ulong)pos[j] * hidden;
        for (uint h = lid; h < hidden; h += L) {
            STORE_A(row, h, wj * LOAD_A(g, h));
        }
    }
    if (plane) {
        for (uint j = 0; j < top_k; j++) {
            const __global act_t *row = eo + (ulong)pos[j] * hidden;
            float acc = 0.0f;
            for (uint h = lid; h < hidden; h += L) {
                acc = acc + LOAD_A(g, h) * LOAD_A(row, h);
            }
            acc = group_sum(acc, scratch);
            if (lid == 0) {
                gw[j] = acc;
            }
        }
    } else {
        for (uint j = lid; j < top_k; j += L) {
            const __global act_t *row = eo + (ulong)pos[j] * hidden;
            float acc = 0.0f;
            for (uint h = 0; h < hidden; h++) {
                acc = acc + LOAD_A(g, h) * LOAD_A(row, h);
            }
            gw[j] = acc;
        }
    }
}

/* grad_input[t, h] = sum_j grad_rows[positions[t, j], h], slot order. */
__kernel void rudnn_dispatch_backward(const __global act_t *grad_rows, ulong grad_rows_off,
                                      const __global uint *positions, ulong positions_off,
                                      __global act_t *grad_input, ulong grad_input_off, ulong group0, uint top_k,
                                      uint hidden)
{
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    const ulong t = group0 + get_group_id(0);
    const __global uint *pos = positions + positions_off + t * top_k;
    const __global act_t *gr = grad_rows + grad_rows_off;
    __global act_t *gi = grad_input + grad_input_off + t * hidden;
    for (uint h = lid; h < hidden; h += L) {
        float acc = LOAD_A(gr + (ulong)pos[0] * hidden, h);
        for (uint j = 1; j < top_k; j++) {
            acc = acc + LOAD_A(gr + (ulong)pos[j] * hidden, h);
        }
        STORE_A(gi, h, acc);
    }
}

#else
#error "MOE_TRAIN_PART must be 1 (router) or 2 (rows)"
#endif
