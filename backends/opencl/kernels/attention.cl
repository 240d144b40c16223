/* rudnn OpenCL attention kernels (include/rudnn/attention.h has the contract, backends/hal/
 * attention.h the plan). OpenCL C 1.2; no extension is required: F16/BF16 are storage only,
 * read and written through common.cl's LOAD_A / STORE_A, and every score, softmax and
 * accumulation is FP32.
 *
 * The file holds three programs, picked with -DATT_PART:
 *   1  flash     -DRUDNN_DTYPE, -DATT_T (work-items per query row), -DATT_DV_MAX (Dv rounded
 *                up to 64, 128 or 256: the private accumulator is ATT_DV_MAX / ATT_T floats)
 *                rudnn_attention_flash: one fused online-softmax kernel
 *   2  fallback  -DRUDNN_DTYPE
 *                rudnn_attention_scores, rudnn_attention_softmax, rudnn_attention_pv: scores
 *                into an FP32 workspace [B * Hq * Sq, Skv], softmax in place, then P V
 *   3  backward  -DRUDNN_DTYPE, -DATT_DMAX (D and Dv rounded up to 64, 128 or 256)
 *                rudnn_attention_bwd_delta, _bwd_dq, _bwd_dkv: dq, dk, dv from dout, out and lse
 *
 * Scores, in the contract's order: s = (q . k) * scale; softcap; -inf where masked or outside
 * the row's window; + bias. A row with no visible key (every score -inf) gives zeros and lse
 * -inf: the softmax never subtracts an infinite maximum (no NaN).
 *
 * Arguments: buffers and element offsets are separate (no sub-buffers); strides are element
 * strides of dims (b, h, s) in a long4 (w unused); the key/feature dim is contiguous. Every
 * kernel takes group0, the first work-group of this launch (the host splits huge launches).
 * The program cache prepends kernels/common.cl (act_t, LOAD_A, STORE_A, bf16_to_f32,
 * group_max, group_sum, FP_CONTRACT OFF). */

#ifndef RUDNN_DTYPE
#error "RUDNN_DTYPE must be defined: 0 (F32), 1 (F16) or 2 (BF16)"
#endif
#ifndef ATT_PART
#error "ATT_PART must be defined: 1 (flash), 2 (fallback) or 3 (backward)"
#endif

/* bias_code: the bias storage (0 F32, 1 F16, 2 BF16) or ATT_NO_BIAS. */
#define ATT_NO_BIAS 3u

float att_load_bias(const __global uchar *bias, ulong i, uint code)
{
    if (code == 0u) {
        return ((const __global float *)bias)[i];
    }
    if (code == 1u) {
        return vload_half(i, (const __global half *)bias);
    }
    return bf16_to_f32(((const __global ushort *)bias)[i]);
}

/* The first and last key query i sees (hal/attention.h), before clamping to [0, Skv - 1];
 * lo > hi: none. o = Skv - Sq aligns the last query with the last key. */
long att_lo(long i, long o, long window_left)
{
    return window_left < 0 ? 0 : i + o - window_left;
}

long att_hi(long i, long o, long window_right, long seq_kv)
{
    return window_right < 0 ? seq_kv - 1 : i + o + window_right;
}

/* Whether key j (0 <= j < Skv) of a row is visible: inside [lo, hi] and not masked. mask_row is
 * the row's mask (read only when has_mask). */
int att_visible(long j, long lo, long hi, uint has_mask, const __global uchar *mask_row)
{
    return j >= lo && j <= hi && !(has_mask && mask_row[j] != 0);
}

/* A visible key's score from its dot product: scale, softcap, then the bias at bias_row + j. */
float att_finish(float dot, long j, float scale, float softcap, uint bias_code,
                 const __global uchar *bias, ulong bias_row)
{
    float s = dot * scale;
    if (softcap > 0.0f) {
        s = softcap * tanh(s / softcap);
    }
    if (bias_code != ATT_NO_BIAS) {
        s = s + att_load_bias(bias, bias_row + (ulong)j, bias_code);
    }
    return s;
}

/* (b, h, i) of a score row. */
void att_split_row(ulong row, long seq_q, uint heads_q, long *b, long *h, long *i)
{
    *i = (long)(row % (ulong)seq_q);
    const ulong bh = row / (ulong)seq_q;
    *h = (long)(bh % heads_q);
    *b = (long)(bh / heads_q);
}

/* ================================================================================
 * Part 1: flash. A work-group of rows * ATT_T work-items handles `rows` consecutive query rows of
 * one (b, h); work-item (r, t) = (lid / ATT_T, lid % ATT_T). The q rows are staged once in local
 * memory; the loop walks the key tiles of `keys` keys that the group's rows can see, staging
 * each K and V tile in local memory (coalesced: consecutive work-items read consecutive
 * features). Per tile, work-item (r, t) scores keys t, t + ATT_T, ... of row r into s_tile, the
 * row's ATT_T work-items combine their maxima and sums through red (a fixed order: the result
 * does not depend on timing), and each accumulates output columns t, t + ATT_T, ... of its row
 * in private FP32 registers, rescaled by exp(m_old - m_new) as the running maximum grows.
 * Local memory (floats): q_tile rows * D, k_tile keys * (D + 1) (padded: rows of a tile fall in
 * different banks), v_tile keys * Dv, s_tile rows * keys, red rows * ATT_T.
 * ================================================================================ */
#if ATT_PART == 1

#if !defined(ATT_T) || !defined(ATT_DV_MAX)
#error "the flash program needs ATT_T and ATT_DV_MAX (set by attention.c)"
#endif
#define ATT_ACC ((ATT_DV_MAX + ATT_T - 1) / ATT_T)

__kernel void rudnn_attention_flash(
    const __global act_t *q, ulong q_off, long4 q_st,
    const __global act_t *k, ulong k_off, long4 k_st,
    const __global act_t *v, ulong v_off, long4 v_st,
    const __global uchar *mask, ulong mask_off, long4 m_st, uint has_mask,
    const __global uchar *bias, ulong bias_off, long4 b_st, uint bias_code,
    __global act_t *out, ulong out_off, long4 o_st,
    __global float *lse, ulong lse_off, uint has_lse,
    ulong group0, uint heads_q, uint group_size, long seq_q, long seq_kv, uint D, uint Dv,
    float scale, float softcap, long window_left, long window_right, uint rows, uint keys,
    __local float *q_tile, __local float *k_tile, __local float *v_tile, __local float *s_tile,
    __local float *red)
{
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    const uint r = lid / ATT_T, t = lid % ATT_T;
    const ulong q_tiles = ((ulong)seq_q + rows - 1) / rows;
    const ulong g = group0 + get_group_id(0);
    const ulong bh = g / q_tiles;
    const long i0 = (long)(g % q_tiles) * rows;
    const long h = (long)(bh % heads_q), b = (long)(bh / heads_q);
    const long hk = h / group_size;
    const long i = i0 + r;
    const int row_ok = i < seq_q;
    const long o = seq_kv - seq_q;

    /* this group's q rows, converted once */
    const __global act_t *qb = q + q_off + b * q_st.x + h * q_st.y;
    for (uint e = lid; e < rows * D; e += L) {
        const uint rr = e / D, d = e - rr * D;
        const long ii = i0 + rr;
        q_tile[e] = ii < seq_q ? LOAD_A(qb, ii * q_st.z + d) : 0.0f;
    }

    /* keys any row of the group sees: lo and hi grow with i */
    const long i_last = min(i0 + (long)rows, seq_q) - 1;
    const long j_begin = max(att_lo(i0, o, window_left), 0L);
    const long j_end = min(att_hi(i_last, o, window_right, seq_kv), seq_kv - 1);
    const long lo = att_lo(i, o, window_left), hi = att_hi(i, o, window_right, seq_kv);
    const __global uchar *mask_row = mask + mask_off + b * m_st.x + h * m_st.y + i * m_st.z;
    const ulong bias_row = bias_off + (ulong)(b * b_st.x + h * b_st.y + i * b_st.z);

    const __global act_t *kb = k + k_off + b * k_st.x + hk * k_st.y;
    const __global act_t *vb = v + v_off + b * v_st.x + hk * v_st.y;
    const uint k_pitch = D + 1;
    __local const float *q_row = q_tile + r * D;
    __local float *s_row = s_tile + r * keys;
    __local const float *red_row = red + r * ATT_T;

    float m = -INFINITY, l = 0.0f;
    float acc[ATT_ACC];
    for (uint a = 0; a < ATT_ACC; a++) {
        acc[a] = 0.0f;
    }

    for (long j0 = (j_begin / keys) * keys; j0 <= j_end; j0 += keys) {
        barrier(CLK_LOCAL_MEM_FENCE); /* the q rows are in; the last tile's readers are done */
        for (uint e = lid; e < keys * D; e += L) {
            const uint jj = e / D, d = e - jj * D;
            const long j = j0 + jj;
            k_tile[jj * k_pitch + d] = j < seq_kv ? LOAD_A(kb, j * k_st.z + d) : 0.0f;
        }
        for (uint e = lid; e < keys * Dv; e += L) {
            const uint jj = e / Dv, c = e - jj * Dv;
            const long j = j0 + jj;
            v_tile[e] = j < seq_kv ? LOAD_A(vb, j * v_st.z + c) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        /* scores of this work-item's keys, and their maximum */
        float part = -INFINITY;
        for (uint jj = t; jj < keys; jj += ATT_T) {
            const long j = j0 + jj;
            float s = -INFINITY;
            if (row_ok && j < seq_kv && att_visible(j, lo, hi, has_mask, mask_row)) {
                __local const float *k_row = k_tile + jj * k_pitch;
                float dot = 0.0f;
                for (uint d = 0; d < D; d++) {
                    dot = fma(q_row[d], k_row[d], dot);
                }
                s = att_finish(dot, j, scale, softcap, bias_code, bias, bias_row);
            }
            s_row[jj] = s;
            part = fmax(part, s);
        }
        red[lid] = part;
        barrier(CLK_LOCAL_MEM_FENCE);
        float m_tile = -INFINITY;
        for (uint u = 0; u < ATT_T; u++) {
            m_tile = fmax(m_tile, red_row[u]);
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* red is reused for the sums */

        /* p = exp(s - m_new) in place; nothing seen yet (m_new -inf): every p is 0 */
        const float m_new = fmax(m, m_tile);
        const int none = m_new == -INFINITY;
        part = 0.0f;
        for (uint jj = t; jj < keys; jj += ATT_T) {
            const float p = none ? 0.0f : exp(s_row[jj] - m_new);
            s_row[jj] = p;
            part += p;
        }
        red[lid] = part;
        barrier(CLK_LOCAL_MEM_FENCE);
        float l_tile = 0.0f;
        for (uint u = 0; u < ATT_T; u++) {
            l_tile += red_row[u];
        }

        const float alpha = none ? 1.0f : exp(m - m_new); /* exp(-inf) = 0 for the first keys */
        l = l * alpha + l_tile;
        m = m_new;
        for (uint a = 0; a < ATT_ACC; a++) {
            acc[a] *= alpha;
        }
        for (uint jj = 0; jj < keys; jj++) {
            const float p = s_row[jj];
            __local const float *v_row = v_tile + jj * Dv;
            for (uint a = 0; a < ATT_ACC; a++) {
                const uint c = t + a * ATT_T;
                if (c < Dv) {
                    acc[a] = fma(p, v_row[c], acc[a]);
                }
            }
        }
    }

    if (!row_ok) {
        return;
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    __global act_t *ob = out + out_off + b * o_st.x + h * o_st.y + i * o_st.z;
    for (uint a = 0; a < ATT_ACC; a++) {
        const uint c = t + a * ATT_T;
        if (c < Dv) {
            STORE_A(ob, c, acc[a] * inv);
        }
    }
    if (has_lse && t == 0) {
        lse[lse_off + bh * (ulong)seq_q + (ulong)i] = l > 0.0f ? m + log(l) : -INFINITY;
    }
}

#endif /* ATT_PART == 1 */

/* ================================================================================
 * Part 2: fallback. One work-group per score row (b, h, i), row = (b * Hq + h) * Sq + i, in
 * every kernel; scores is the FP32 workspace [rows, Skv].
 * ================================================================================ */
#if ATT_PART == 2

/* scores[row, j]: the transformed score, -inf where key j is not visible. */
__kernel void rudnn_attention_scores(
    const __global act_t *q, ulong q_off, long4 q_st,
    const __global act_t *k, ulong k_off, long4 k_st,
    const __global uchar *mask, ulong mask_off, long4 m_st, uint has_mask,
    const __global uchar *bias, ulong bias_off, long4 b_st, uint bias_code,
    __global float *scores, ulong scores_off,
    ulong group0, uint heads_q, uint group_size, long seq_q, long seq_kv, uint D,
    float scale, float softcap, long window_left, long window_right, __local float *q_row)
{
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    const ulong row = group0 + get_group_id(0);
    long b, h, i;
    att_split_row(row, seq_q, heads_q, &b, &h, &i);
    const long hk = h / group_size;
    const long o = seq_kv - seq_q;

    const __global act_t *qr = q + q_off + b * q_st.x + h * q_st.y + i * q_st.z;
    for (uint d = lid; d < D; d += L) {
        q_row[d] = LOAD_A(qr, d);
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    const long lo = att_lo(i, o, window_left), hi = att_hi(i, o, window_right, seq_kv);
    const __global uchar *mask_row = mask + mask_off + b * m_st.x + h * m_st.y + i * m_st.z;
    const ulong bias_row = bias_off + (ulong)(b * b_st.x + h * b_st.y + i * b_st.z);
    const __global act_t *kb = k + k_off + b * k_st.x + hk * k_st.y;
    __global float *sr = scores + scores_off + row * (ulong)seq_kv;
    for (long j = lid; j < seq_kv; j += L) {
        float s = -INFINITY;
        if (att_visible(j, lo, hi, has_mask, mask_row)) {
            const __global act_t *kr = kb + j * k_st.z;
            float dot = 0.0f;
            for (uint d = 0; d < D; d++) {
                dot = fma(q_row[d], LOAD_A(kr, d), dot);
            }
            s = att_finish(dot, j, scale, softcap, bias_code, bias, bias_row);
        }
        sr[j] = s;
    }
}

/* The row's softmax in place (FP32, max-subtracted) and its lse; a row with no visible key
 * becomes all 0, lse -inf. scratch: local size floats. */
__kernel void rudnn_attention_softmax(__global float *scores, ulong scores_off,
                                      __global float *lse, ulong lse_off, uint has_lse,
                                      ulong group0, long seq_kv, __local float *scratch)
{
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    const ulong row = group0 + get_group_id(0);
    __global float *sr = scores + scores_off + row * (ulong)seq_kv;

    float m = -INFINITY;
    for (long j = lid; j < seq_kv; j += L) {
        m = fmax(m, sr[j]);
    }
    m = group_max(m, scratch);
    /* no visible key: every p is 0 (never exp(-inf - -inf)); the same for every work-item, but
     * the loops run on either way so that every work-item reaches group_sum's barriers */
    const int none = m == -INFINITY;
    float sum = 0.0f;
    for (long j = lid; j < seq_kv; j += L) {
        const float p = none ? 0.0f : exp(sr[j] - m);
        sr[j] = p;
        sum += p;
    }
    sum = group_sum(sum, scratch);
    const float inv = none ? 0.0f : 1.0f / sum;
    for (long j = lid; j < seq_kv; j += L) {
        sr[j] = sr[j] * inv;
    }
    if (has_lse && lid == 0) {
        lse[lse_off + row] = none ? -INFINITY : m + log(sum);
    }
}

/* out[b, h, i, c] = sum_j P[row, j] v[b, h / G, j, c]: work-items over c (coalesced V rows). */
__kernel void rudnn_attention_pv(const __global float *scores, ulong scores_off,
                                 const __global act_t *v, ulong v_off, long4 v_st,
                                 __global act_t *out, ulong out_off, long4 o_st,
                                 ulong group0, uint heads_q, uint group_size, long seq_q,
                                 long seq_kv, uint Dv)
{
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    const ulong row = group0 + get_group_id(0);
    long b, h, i;
    att_split_row(row, seq_q, heads_q, &b, &h, &i);
    const long hk = h / group_size;
    const __global float *pr = scores + scores_off + row * (ulong)seq_kv;
    const __global act_t *vb = v + v_off + b * v_st.x + hk * v_st.y;
    __global act_t *ob = out + out_off + b * o_st.x + h * o_st.y + i * o_st.z;
    for (uint c = lid; c < Dv; c += L) {
        float acc = 0.0f;
        for (long j = 0; j < seq_kv; j++) {
            acc = fma(pr[j], LOAD_A(vb, j * v_st.z + c), acc);
        }
        STORE_A(ob, c, acc);
    }
}

#endif /* ATT_PART == 2 */

/* ================================================================================
 * Part 3: backward (-DATT_DMAX: D and Dv rounded up to 64, 128 or 256, the private accumulators).
 * With P = exp(s - lse) (the forward's lse), Delta_i = dO_i . O_i, and per visible (i, j):
 *   dP = dO_i . v_j,  dS = P (dP - Delta_i),  dU = dS (1 - tanh^2(u / softcap)) (softcap; else dS),
 *   dq_i = scale sum_j dU k_j,   dk_j = scale sum_(h, i) dU q_i,   dv_j = sum_(h, i) P dO_i
 * (h over the query heads of key head j's group). Three kernels, every sum in a fixed order, no
 * atomics:
 *   rudnn_attention_bwd_delta  a work-item per query row: Delta into the FP32 workspace
 *   rudnn_attention_bwd_dq     a work-item per query row: its keys in order
 *   rudnn_attention_bwd_dkv    a work-item per (b, key head, key): the group's heads, then the
 *                              queries, in order
 * ================================================================================ */
#if ATT_PART == 3

#ifndef ATT_DMAX
#error "the backward program needs ATT_DMAX (set by attention_backward.c)"
#endif

/* att_finish's score, and ds / du (the softcap's slope; 1 without one). */
float att_score_slope(float dot, long j, float scale, float softcap, uint bias_code, const __global uchar *bias,
                      ulong bias_row, float *slope)
{
    float s = dot * scale;
    *slope = 1.0f;
    if (softcap > 0.0f) {
        const float t = tanh(s / softcap);
        s = softcap * t;
        *slope = 1.0f - t * t;
    }
    if (bias_code != ATT_NO_BIAS) {
        s = s + att_load_bias(bias, bias_row + (ulong)j, bias_code);
    }
    return s;
}

float att_dot(const __global act_t *a, const __global act_t *b, uint n)
{
    float acc = 0.0f;
    for (uint d = 0; d < n; d++) {
        acc = fma(LOAD_A(a, d), LOAD_A(b, d), acc);
    }
    return acc;
}

__kernel void rudnn_attention_bwd_delta(const __global act_t *out, ulong out_off, long4 o_st,
                                        const __global act_t *dout, ulong do_off, long4 do_st,
                                        __global float *delta, ulong delta_off, ulong group0, uint heads_q,
                                        long seq_q, uint Dv, ulong rows)
{
    const ulong row = (group0 + get_group_id(0)) * get_local_size(0) + get_local_id(0);
    if (row >= rows) {
        return;
    }
    long b, h, i;
    att_split_row(row, seq_q, heads_q, &b, &h, &i);
    delta[delta_off + row] = att_dot(out + out_off + b * o_st.x + h * o_st.y + i * o_st.z,
                                     dout + do_off + b * do_st.x + h * do_st.y + i * do_st.z, Dv);
}

__kernel void rudnn_attention_bwd_dq(
    const __global act_t *q, ulong q_off, long4 q_st,
    const __global act_t *k, ulong k_off, long4 k_st,
    const __global act_t *v, ulong v_off, long4 v_st,
    const __global uchar *mask, ulong mask_off, long4 m_st, uint has_mask,
    const __global uchar *bias, ulong bias_off, long4 b_st, uint bias_code,
    const __global act_t *dout, ulong do_off, long4 do_st,
    const __global float *lse, ulong lse_off, const __global float *delta, ulong delta_off,
    __global act_t *dq, ulong dq_off, long4 dq_st,
    ulong group0, uint heads_q, uint group_size, long seq_q, long seq_kv, uint D, uint Dv,
    float scale, float softcap, long window_left, long window_right, ulong rows)
{
    const ulong row = (group0 + get_group_id(0)) * get_local_size(0) + get_local_id(0);
    if (row >= rows) {
        return;
    }
    long b, h, i;
    att_split_row(row, seq_q, heads_q, &b, &h, &i);
    const long hk = h / group_size, o = seq_kv - seq_q;
    const __global act_t *qr = q + q_off + b * q_st.x + h * q_st.y + i * q_st.z;
    const __global act_t *dor = dout + do_off + b * do_st.x + h * do_st.y + i * do_st.z;
    const __global act_t *kb = k + k_off + b * k_st.x + hk * k_st.y;
    const __global act_t *vb = v + v_off + b * v_st.x + hk * v_st.y;
    const __global uchar *mask_row = mask + mask_off + b * m_st.x + h * m_st.y + i * m_st.z;
    const ulong bias_row = bias_off + (ulong)(b * b_st.x + h * b_st.y + i * b_st.z);
    const float l = lse[lse_off + row], dl = delta[delta_off + row];
    float acc[ATT_DMAX];
    for (uint d = 0; d < D; d++) {
        acc[d] = 0.0f;
    }
    const long lo = max(att_lo(i, o, window_left), 0L), hi = min(att_hi(i, o, window_right, seq_kv), seq_kv - 1);
    for (long j = lo; l != -INFINITY && j <= hi; j++) {
        if (!att_visible(j, lo, hi, has_mask, mask_row)) {
            continue;
        }
        const __global act_t *kr = kb + j * k_st.z;
        float slope;
        const float s = att_score_slope(att_dot(qr, kr, D), j, scale, softcap, bias_code, bias, bias_row, &slope);
        const float p = exp(s - l);
        const float du = p * (att_dot(dor, vb + j * v_st.z, Dv) - dl) * slope;
        for (uint d = 0; d < D; d++) {
            acc[d] = fma(du, LOAD_A(kr, d), acc[d]);
        }
    }
    __global act_t *out = dq + dq_off + b * dq_st.x + h * dq_st.y + i * dq_st.z;
    for (uint d = 0; d < D; d++) {
        STORE_A(out, d, acc[d] * scale);
    }
}

__kernel void rudnn_attention_bwd_dkv(
    const __global act_t *q, ulong q_off, long4 q_st,
    const __global act_t *k, ulong k_off, long4 k_st,
    const __global act_t *v, ulong v_off, long4 v_st,
    const __global uchar *mask, ulong mask_off, long4 m_st, uint has_mask,
    const __global uchar *bias, ulong bias_off, long4 b_st, uint bias_code,
    const __global act_t *dout, ulong do_off, long4 do_st,
    const __global float *lse, ulong lse_off, const __global float *delta, ulong delta_off,
    __global act_t *dk, ulong dk_off, long4 dk_st, __global act_t *dv, ulong dv_off, long4 dv_st,
    ulong group0, uint heads_q, uint group_size, long seq_q, long seq_kv, uint D, uint Dv,
    float scale, float softcap, long window_left, long window_right, ulong keys)
{
    const ulong id = (group0 + get_group_id(0)) * get_local_size(0) + get_local_id(0);
    if (id >= keys) {
        return;
    }
    const uint heads_kv = heads_q / group_size;
    const long j = (long)(id % (ulong)seq_kv);
    const ulong bhk = id / (ulong)seq_kv;
    const long hk = (long)(bhk % heads_kv), b = (long)(bhk / heads_kv), o = seq_kv - seq_q;
    const __global act_t *kr = k + k_off + b * k_st.x + hk * k_st.y + j * k_st.z;
    const __global act_t *vr = v + v_off + b * v_st.x + hk * v_st.y + j * v_st.z;
    float acc_k[ATT_DMAX], acc_v[ATT_DMAX];
    for (uint d = 0; d < D; d++) {
        acc_k[d] = 0.0f;
    }
    for (uint d = 0; d < Dv; d++) {
        acc_v[d] = 0.0f;
    }
    for (long h = hk * (long)group_size; h < (hk + 1) * (long)group_size; h++) {
        for (long i = 0; i < seq_q; i++) {
            const long lo = max(att_lo(i, o, window_left), 0L);
            const long hi = min(att_hi(i, o, window_right, seq_kv), seq_kv - 1);
            const __global uchar *mask_row = mask + mask_off + b * m_st.x + h * m_st.y + i * m_st.z;
            if (!att_visible(j, lo, hi, has_mask, mask_row)) {
                continue;
            }
            const ulong row = ((ulong)b * heads_q + (ulong)h) * (ulong)seq_q + (ulong)i;
            const float l = lse[lse_off + row];
            if (l == -INFINITY) {
                continue;
            }
            const __global act_t *qr = q + q_off + b * q_st.x + h * q_st.y + i * q_st.z;
            const __global act_t *dor = dout + do_off + b * do_st.x + h * do_st.y + i * do_st.z;
            const ulong bias_row = bias_off + (ulong)(b * b_st.x + h * b_st.y + i * b_st.z);
            float slope;
            const float s = att_score_slope(att_dot(qr, kr, D), j, scale, softcap, bias_code, bias, bias_row, &slope);
            const float p = exp(s - l);
            const float du = p * (att_dot(dor, vr, Dv) - delta[delta_off + row]) * slope;
            for (uint d = 0; d < Dv; d++) {
                acc_v[d] = fma(p, LOAD_A(dor, d), acc_v[d]);
            }
            for (uint d = 0; d < D; d++) {
                acc_k[d] = fma(du, LOAD_A(qr, d), acc_k[d]);
            }
        }
    }
    __global act_t *ko = dk + dk_off + b * dk_st.x + hk * dk_st.y + j * dk_st.z;
    __global act_t *vo = dv + dv_off + b * dv_st.x + hk * dv_st.y + j * dv_st.z;
    for (uint d = 0; d < D; d++) {
        STORE_A(ko, d, acc_k[d] * scale);
    }
    for (uint d = 0; d < Dv; d++) {
        STORE_A(vo, d, acc_v[d]);
    }
}

#endif /* ATT_PART == 3 */
