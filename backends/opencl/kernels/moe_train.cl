/* rudnn OpenCL kernels of MoE first-order training (include/rudnn/moe_train.h has the formulas).
 * Three programs, picked with -DMOE_TRAIN_PART:
 *   1  router  -DRUDNN_DTYPE (logits, grad_logits), -DRUDNN_IDX (indices: 0 U32, 1 I32, 2 I64),
 *              -DMAX_TOP_K (the local arrays' length): router_weights, router_backward
 *   2  rows    -DRUDNN_DTYPE (dispatched rows), -DRUDNN_WDTYPE (routing weights):
 *              combine_backward (serial, plane), dispatch_backward
 *   3  experts -DRUDNN_DTYPE (tokens, weights, the rows' gradients): train_gate_up, train_down,
 *              train_dact, train_dx, train_dw_gate_up, train_dw_down (one work-item an output)
 * act_t / LOAD_A / STORE_A / ROUND_A, w_t / LOAD_W, group_sum, group_max and expert_of_row come
 * from common.cl. Parts 1 and 2: one work-group a token row. Every kernel takes group0, the first
 * group of this launch (the host splits long launches). Sums are FP32, in a fixed order; each
 * output is rounded once. */

/* sigmoid, the stable form (no overflow of exp for either sign): the router's scores, the experts'
 * silu derivative. */
float sigmoid_of(float x)
{
    if (x >= 0.0f) {
        return 1.0f / (1.0f + exp(-x));
    }
    const float e = exp(x);
    return e / (1.0f + e);
}

#if MOE_TRAIN_PART == 1

#if RUDNN_IDX == 0
#define idx_t uint
#elif RUDNN_IDX == 1
#define idx_t int
#else
#define idx_t long
#endif

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

/* ================================================================================
 * Part 3: the SwiGLU experts' training forward and backward (rudnn/moe_train.h: g, u, a, dg, du).
 * One work-item an output element, its sum in index order (rows ascending for the weight
 * gradients): deterministic. Row r belongs to expert expert_of_row(offsets, r) (common.cl).
 * ================================================================================ */
#elif MOE_TRAIN_PART == 3

/* This work-item's output: (group0 + group) * L + lid; the launch is rounded up to whole groups. */
ulong item_of(ulong group0)
{
    return (group0 + get_group_id(0)) * get_local_size(0) + get_local_id(0);
}

/* silu as the forward of rudnn/moe.h writes it */
float silu_of(float g)
{
    return g / (1.0f + exp(-g));
}

/* reserve[r] = (g, u); act[r, i] = silu(g) u, in the weights' dtype. Items: rows x inter. */
__kernel void rudnn_train_gate_up(const __global act_t *tokens, ulong tokens_off, const __global uint *offsets,
                                  ulong offsets_off, const __global act_t *gate, ulong gate_off,
                                  const __global act_t *up, ulong up_off, __global float *reserve, ulong reserve_off,
                                  __global act_t *act, ulong act_off, ulong group0, uint rows, uint experts,
                                  uint hidden, uint inter)
{
    const ulong id = item_of(group0);
    if (id >= (ulong)rows * inter) {
        return;
    }
    const uint r = (uint)(id / inter), i = (uint)(id % inter);
    const uint e = expert_of_row(offsets + offsets_off, experts, r);
    const __global act_t *x = tokens + tokens_off + (ulong)r * hidden;
    const ulong w = ((ulong)e * inter + i) * hidden;
    const __global act_t *gw = gate + gate_off + w;
    const __global act_t *uw = up + up_off + w;
    float g = 0.0f, u = 0.0f;
    for (uint h = 0; h < hidden; h++) {
        const float xv = LOAD_A(x, h);
        g = g + xv * LOAD_A(gw, h);
        u = u + xv * LOAD_A(uw, h);
    }
    __global float *res = reserve + reserve_off + (ulong)r * 2u * inter;
    res[i] = g;
    res[inter + i] = u;
    STORE_A(act + act_off + (ulong)r * inter, i, silu_of(g) * u);
}

/* out[r, h] = sum_i act[r, i] down[e, h, i]. Items: rows x hidden. */
__kernel void rudnn_train_down(const __global act_t *act, ulong act_off, const __global uint *offsets,
                               ulong offsets_off, const __global act_t *down, ulong down_off, __global act_t *out,
                               ulong out_off, ulong group0, uint rows, uint experts, uint hidden, uint inter)
{
    const ulong id = item_of(group0);
    if (id >= (ulong)rows * hidden) {
        return;
    }
    const uint r = (uint)(id / hidden), h = (uint)(id % hidden);
    const uint e = expert_of_row(offsets + offsets_off, experts, r);
    const __global act_t *a = act + act_off + (ulong)r * inter;
    const __global act_t *dn = down + down_off + ((ulong)e * hidden + h) * inter;
    float acc = 0.0f;
    for (uint i = 0; i < inter; i++) {
        acc = acc + LOAD_A(a, i) * LOAD_A(dn, i);
    }
    STORE_A(out + out_off + (ulong)r * hidden, h, acc);
}

/* work[r] = (dg, du): da = sum_h dy[r, h] down[e, h, i], dg = da u s (1 + g (1 - s)), du = da silu(g),
 * with 1 - s taken as sigmoid(-g). Items: rows x inter. */
__kernel void rudnn_train_dact(const __global act_t *grad_out, ulong grad_out_off, const __global uint *offsets,
                               ulong offsets_off, const __global act_t *down, ulong down_off,
                               const __global float *reserve, ulong reserve_off, __global float *work,
                               ulong work_off, ulong group0, uint rows, uint experts, uint hidden, uint inter)
{
    const ulong id = item_of(group0);
    if (id >= (ulong)rows * inter) {
        return;
    }
    const uint r = (uint)(id / inter), i = (uint)(id % inter);
    const uint e = expert_of_row(offsets + offsets_off, experts, r);
    const __global act_t *dy = grad_out + grad_out_off + (ulong)r * hidden;
    const __global act_t *dn = down + down_off + (ulong)e * hidden * inter + i;
    float da = 0.0f;
    for (uint h = 0; h < hidden; h++) {
        da = da + LOAD_A(dy, h) * LOAD_A(dn, (ulong)h * inter);
    }
    const __global float *res = reserve + reserve_off + (ulong)r * 2u * inter;
    const float g = res[i], u = res[inter + i];
    const float s = sigmoid_of(g);
    __global float *wk = work + work_off + (ulong)r * 2u * inter;
    wk[i] = da * u * (s * (1.0f + g * sigmoid_of(-g)));
    wk[inter + i] = da * silu_of(g);
}

/* grad_tokens[r, h] = sum_i dg[r, i] gate[e, i, h] + du[r, i] up[e, i, h]. Items: rows x hidden. */
__kernel void rudnn_train_dx(const __global float *work, ulong work_off, const __global uint *offsets,
                             ulong offsets_off, const __global act_t *gate, ulong gate_off, const __global act_t *up,
                             ulong up_off, __global act_t *grad_tokens, ulong grad_tokens_off, ulong group0,
                             uint rows, uint experts, uint hidden, uint inter)
{
    const ulong id = item_of(group0);
    if (id >= (ulong)rows * hidden) {
        return;
    }
    const uint r = (uint)(id / hidden), h = (uint)(id % hidden);
    const uint e = expert_of_row(offsets + offsets_off, experts, r);
    const __global float *wk = work + work_off + (ulong)r * 2u * inter;
    const ulong w = (ulong)e * inter * hidden + h;
    const __global act_t *gw = gate + gate_off + w;
    const __global act_t *uw = up + up_off + w;
    float acc = 0.0f;
    for (uint i = 0; i < inter; i++) {
        acc = acc + wk[i] * LOAD_A(gw, (ulong)i * hidden);
        acc = acc + wk[inter + i] * LOAD_A(uw, (ulong)i * hidden);
    }
    STORE_A(grad_tokens + grad_tokens_off + (ulong)r * hidden, h, acc);
}

/* grad_gate[e, i, h] = sum over e's rows of dg[r, i] x[r, h]; grad_up likewise with du.
 * Items: experts x inter x hidden. */
__kernel void rudnn_train_dw_gate_up(const __global act_t *tokens, ulong tokens_off, const __global uint *offsets,
                                     ulong offsets_off, const __global float *work, ulong work_off,
                                     __global float *grad_gate, ulong grad_gate_off, __global float *grad_up,
                                     ulong grad_up_off, ulong group0, uint experts, uint hidden, uint inter)
{
    const ulong id = item_of(group0);
    const ulong per_expert = (ulong)inter * hidden;
    if (id >= (ulong)experts * per_expert) {
        return;
    }
    const uint e = (uint)(id / per_expert);
    const uint i = (uint)(id % per_expert / hidden), h = (uint)(id % hidden);
    const __global uint *off = offsets + offsets_off;
    float sg = 0.0f, su = 0.0f;
    for (uint r = off[e]; r < off[e + 1]; r++) {
        const float xv = LOAD_A(tokens + tokens_off + (ulong)r * hidden, h);
        const __global float *wk = work + work_off + (ulong)r * 2u * inter;
        sg = sg + wk[i] * xv;
        su = su + wk[inter + i] * xv;
    }
    grad_gate[grad_gate_off + id] = sg;
    grad_up[grad_up_off + id] = su;
}

/* grad_down[e, h, i] = sum over e's rows of dy[r, h] a[r, i], a = silu(g) u as the forward rounded it.
 * Items: experts x hidden x inter. */
__kernel void rudnn_train_dw_down(const __global act_t *grad_out, ulong grad_out_off, const __global uint *offsets,
                                  ulong offsets_off, const __global float *reserve, ulong reserve_off,
                                  __global float *grad_down, ulong grad_down_off, ulong group0, uint experts,
                                  uint hidden, uint inter)
{
    const ulong id = item_of(group0);
    const ulong per_expert = (ulong)hidden * inter;
    if (id >= (ulong)experts * per_expert) {
        return;
    }
    const uint e = (uint)(id / per_expert);
    const uint h = (uint)(id % per_expert / inter), i = (uint)(id % inter);
    const __global uint *off = offsets + offsets_off;
    float acc = 0.0f;
    for (uint r = off[e]; r < off[e + 1]; r++) {
        const __global float *res = reserve + reserve_off + (ulong)r * 2u * inter;
        const float a = ROUND_A(silu_of(res[i]) * res[inter + i]);
        acc = acc + LOAD_A(grad_out + grad_out_off + (ulong)r * hidden, h) * a;
    }
    grad_down[grad_down_off + id] = acc;
}

#else
#error "MOE_TRAIN_PART must be 1 (router), 2 (rows) or 3 (experts)"
#endif
