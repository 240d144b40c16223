/* Paged attention and MLA over a paged KV cache (include/rudnn/paged_attention.h has the contract,
 * backends/hal/paged_attention.h the device plan, the split partials and the append). OpenCL C
 * 1.2, no extension: F16/BF16 are storage only (common.cl's LOAD_A / STORE_A), every score, softmax
 * and sum is FP32.
 *
 * Build options: -DRUDNN_DTYPE (0 F32, 1 F16, 2 BF16), -DPA_KEYS (keys a tile) and -DPA_CHUNK (the
 * width of the K and V slices staged in local memory), set by paged_attention.c, which sizes the
 * local arrays with the same values.
 *
 *   rudnn_paged_attend  a work-group per (query i, KV head hk, block of GB of its G = Hq / Hkv
 *                       query heads, split), so each K and V row is read once for GB heads. It
 *                       walks the split's keys in tiles of PA_KEYS: the tile's K rows are staged in
 *                       slices of PA_CHUNK features (any D; MLA's latent then kp slices as one row
 *                       of D + P), each work-item owning (head, key) scores in s_loc; then an online
 *                       softmax per head (m, l, alpha in stat), and V staged in slices of PA_CHUNK
 *                       columns, each work-item owning (head, column) sums of acc. Local memory
 *                       (floats): q_loc GB (D + P), kv PA_CHUNK (PA_KEYS + 1), s_loc GB PA_KEYS,
 *                       acc GB Dv, stat 3 GB; rows PA_KEYS longs. splits 1 writes out = acc / l
 *                       (zeros when l = 0), splits > 1 the FP32 partials (acc, m, l) of
 *                       hal/paged_attention.h, each split a range of the query's own keys [0, hi)
 *                       (its block of one query, kind 0, is the block the HAL's ranges refer to).
 *   rudnn_paged_merge   a work-group per (query, head): out = sum_s e^(m_s - M) acc_s /
 *                       sum_s e^(m_s - M) l_s over the splits with l_s != 0 (zeros when none)
 *   rudnn_paged_append  a work-group per query: its k (and v) row [Hkv, D] into its cache row
 *
 * The plan arrives as int32 with each array's offset in ints; tensor offsets are in elements. Every
 * kernel takes group0, the first work-group of this launch (the host splits huge launches). */

#ifndef RUDNN_DTYPE
#error "RUDNN_DTYPE must be defined: 0 (F32), 1 (F16) or 2 (BF16)"
#endif
#if !defined(PA_KEYS) || !defined(PA_CHUNK)
#error "PA_KEYS and PA_CHUNK must be defined (set by paged_attention.c)"
#endif
#if PA_KEYS % 4 != 0
#error "PA_KEYS must be a multiple of 4 (pa_values sums four chains)"
#endif

/* The transposed K slice's pitch: padded, so that the items that stage one key row write to
 * different banks. */
#define PA_KT_PITCH (PA_KEYS + 1)

/* The plan's int32 arrays (hal/paged_attention.h), each already offset. */
typedef struct pa_plan {
    __global const int *seq_len, *seq_table, *query_seq, *query_pos, *pages;
} pa_plan_t;

pa_plan_t pa_plan_of(__global const int *plan, ulong o_len, ulong o_table, ulong o_qseq, ulong o_qpos,
                     ulong o_pages)
{
    pa_plan_t p;
    p.seq_len = plan + o_len;
    p.seq_table = plan + o_table;
    p.query_seq = plan + o_qseq;
    p.query_pos = plan + o_qpos;
    p.pages = plan + o_pages;
    return p;
}

/* The physical cache row of key j of sequence s: page pages[seq_table[s] + j / ps], row j % ps. */
long pa_row(pa_plan_t p, int s, long j, uint ps)
{
    const long page = p.pages[p.seq_table[s] + (int)(j / ps)];
    return page * (long)ps + j % ps;
}

/* Keys per split of n keys (rudnn_paged_split_chunk): a multiple of 16, at least 16. */
long pa_split_chunk(long n, uint splits)
{
    long c = (n + splits - 1) / splits;
    c = (c + 15) / 16 * 16;
    return c < 16 ? 16 : c;
}

/* Feature f of key row `row` of the combined row [k (D) | kp (P)]; MLA's kp has one head. */
float pa_key(const __global act_t *k, const __global act_t *kp, long row, uint hk, uint Hkv, uint D, uint P,
             uint f)
{
    if (f < D) {
        return LOAD_A(k, ((ulong)row * Hkv + hk) * D + f);
    }
    return LOAD_A(kp, (ulong)row * P + (f - D));
}

/* A slice walked by rows: item lid takes columns lid % fl, lid % fl + fl, .. of rows lid / fl,
 * lid / fl + L / fl, .. with fl = min(L, PA_CHUNK) (both powers of two), so that neighbouring items
 * touch neighbouring columns (coalesced on a GPU, vector lanes on a CPU) without a division per
 * element. */
typedef struct pa_lanes {
    uint col, fl, row, rstep;
} pa_lanes_t;

pa_lanes_t pa_lanes_of(void)
{
    const uint lid = (uint)get_local_id(0), L = (uint)get_local_size(0);
    pa_lanes_t w;
    w.fl = min(L, (uint)PA_CHUNK);
    w.col = lid % w.fl;
    w.row = lid / w.fl;
    w.rstep = L / w.fl;
    return w;
}

/* Scores of the tile's keys [j0, j0 + PA_KEYS) for the block's heads into s_loc[g * PA_KEYS + jj]:
 * scale * (q . k), -inf past k_end. rows[jj] must hold the tile's cache rows (-1 past k_end). The
 * slice is staged transposed, kv[f * PA_KT_PITCH + jj], so that the items of one head, which take
 * consecutive keys, read consecutive floats. */
void pa_scores(const __global act_t *k, const __global act_t *kp, __local const float *q_loc,
               __local float *kv, __local float *s_loc, __local const long *rows, long j0, long k_end, uint hk,
               uint Hkv, uint D, uint P, uint GB, float scale)
{
    const uint lid = (uint)get_local_id(0), L = (uint)get_local_size(0);
    const uint W = D + P, pairs = GB * PA_KEYS;
    const pa_lanes_t w = pa_lanes_of();
    for (uint e = lid; e < pairs; e += L) {
        s_loc[e] = 0.0f;
    }
    for (uint f0 = 0; f0 < W; f0 += PA_CHUNK) {
        const uint n = min((uint)PA_CHUNK, W - f0);
        barrier(CLK_LOCAL_MEM_FENCE); /* rows are in; the last slice's readers are done */
        for (uint jj = w.row; jj < PA_KEYS; jj += w.rstep) {
            const long row = rows[jj];
            for (uint f = w.col; f < n; f += w.fl) {
                kv[f * PA_KT_PITCH + jj] = row >= 0 ? pa_key(k, kp, row, hk, Hkv, D, P, f0 + f) : 0.0f;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint e = lid; e < pairs; e += L) {
            const uint g = e / PA_KEYS, jj = e % PA_KEYS;
            __local const float *qr = q_loc + g * W + f0;
            __local const float *kc = kv + jj;
            float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f; /* four chains: FMA latency */
            uint f = 0;
            for (; f + 4 <= n; f += 4) {
                d0 = fma(qr[f], kc[f * PA_KT_PITCH], d0);
                d1 = fma(qr[f + 1], kc[(f + 1) * PA_KT_PITCH], d1);
                d2 = fma(qr[f + 2], kc[(f + 2) * PA_KT_PITCH], d2);
                d3 = fma(qr[f + 3], kc[(f + 3) * PA_KT_PITCH], d3);
            }
            for (; f < n; f++) {
                d0 = fma(qr[f], kc[f * PA_KT_PITCH], d0);
            }
            s_loc[e] += (d0 + d1) + (d2 + d3);
        }
    }
    for (uint e = lid; e < pairs; e += L) { /* each item finishes the pairs it summed */
        const uint jj = e % PA_KEYS;
        s_loc[e] = j0 + jj < k_end ? s_loc[e] * scale : -INFINITY;
    }
}

/* Online softmax of the tile, per head g: m grows to the tile's max, alpha = e^(m_old - m_new) is
 * what the old sums are scaled by, s_loc becomes p = e^(s - m_new). A head that has seen no maximum
 * yet (m -inf) keeps p 0 and alpha 1 (never e^(-inf - -inf)), except that a NaN score stays NaN
 * (fmax passes over it, the contract carries it to the output). stat: m [GB], l [GB], alpha [GB]. */
void pa_softmax(__local float *s_loc, __local float *stat, uint GB)
{
    const uint lid = (uint)get_local_id(0), L = (uint)get_local_size(0);
    for (uint g = lid; g < GB; g += L) {
        __local float *s = s_loc + g * PA_KEYS;
        float m_tile = -INFINITY;
        for (uint jj = 0; jj < PA_KEYS; jj++) {
            m_tile = fmax(m_tile, s[jj]);
        }
        const float m_old = stat[g], m_new = fmax(m_old, m_tile);
        const int none = m_new == -INFINITY;
        float sum = 0.0f;
        for (uint jj = 0; jj < PA_KEYS; jj++) {
            const float p = none ? (isnan(s[jj]) ? s[jj] : 0.0f) : exp(s[jj] - m_new);
            s[jj] = p;
            sum += p;
        }
        const float alpha = none ? 1.0f : exp(m_old - m_new);
        stat[g] = m_new;
        stat[GB + g] = stat[GB + g] * alpha + sum;
        stat[2 * GB + g] = alpha;
    }
}

/* acc[g][c] = alpha_g acc[g][c] + sum_jj p[g][jj] v[jj][c], V staged in slices of PA_CHUNK
 * columns, kv[jj * PA_CHUNK + c]. The value row of MLA is the latent row (v = k, Hkv 1, Dv = D: the
 * host's choice). */
void pa_values(const __global act_t *v, __local float *kv, __local const float *s_loc, __local float *acc,
               __local const float *stat, __local const long *rows, uint hk, uint Hkv, uint Dv, uint GB)
{
    const pa_lanes_t w = pa_lanes_of();
    for (uint c0 = 0; c0 < Dv; c0 += PA_CHUNK) {
        const uint n = min((uint)PA_CHUNK, Dv - c0);
        barrier(CLK_LOCAL_MEM_FENCE); /* p is in; the last slice's readers are done */
        for (uint jj = w.row; jj < PA_KEYS; jj += w.rstep) {
            const long row = rows[jj];
            const ulong at = row >= 0 ? ((ulong)row * Hkv + hk) * Dv + c0 : 0;
            for (uint c = w.col; c < n; c += w.fl) {
                kv[jj * PA_CHUNK + c] = row >= 0 ? LOAD_A(v, at + c) : 0.0f;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint g = w.row; g < GB; g += w.rstep) {
            __local const float *p = s_loc + g * PA_KEYS;
            __local float *ar = acc + g * Dv + c0;
            const float alpha = stat[2 * GB + g];
            for (uint c = w.col; c < n; c += w.fl) {
                float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f; /* four chains: FMA latency */
                for (uint jj = 0; jj < PA_KEYS; jj += 4) {
                    a0 = fma(p[jj], kv[jj * PA_CHUNK + c], a0);
                    a1 = fma(p[jj + 1], kv[(jj + 1) * PA_CHUNK + c], a1);
                    a2 = fma(p[jj + 2], kv[(jj + 2) * PA_CHUNK + c], a2);
                    a3 = fma(p[jj + 3], kv[(jj + 3) * PA_CHUNK + c], a3);
                }
                ar[c] = fma(ar[c], alpha, (a0 + a1) + (a2 + a3));
            }
        }
    }
}

__kernel void rudnn_paged_attend(
    __global const int *plan, ulong o_len, ulong o_table, ulong o_qseq, ulong o_qpos, ulong o_pages,
    const __global act_t *q, ulong q_off, const __global act_t *qp, ulong qp_off,
    const __global act_t *k, ulong k_off, const __global act_t *kp, ulong kp_off,
    const __global act_t *v, ulong v_off, __global act_t *out, ulong out_off,
    __global float *ws, ulong ws_off, ulong group0, uint Q, uint Hq, uint Hkv, uint GB, uint HB, uint S,
    uint D, uint P, uint Dv, uint ps, float scale, int causal,
    __local float *q_loc, __local float *kv, __local float *s_loc, __local float *acc, __local float *stat,
    __local long *rows)
{
    const uint lid = (uint)get_local_id(0), L = (uint)get_local_size(0);
    const ulong grp = group0 + get_group_id(0);
    const uint sp = (uint)(grp % S), hb = (uint)((grp / S) % HB);
    const uint hk = (uint)((grp / ((ulong)S * HB)) % Hkv);
    const uint i = (uint)(grp / ((ulong)S * HB * Hkv));
    const uint G = Hq / Hkv, g0 = hb * GB, W = D + P;
    q += q_off, qp += qp_off, k += k_off, kp += kp_off, v += v_off, out += out_off, ws += ws_off;
    const pa_plan_t pl = pa_plan_of(plan, o_len, o_table, o_qseq, o_qpos, o_pages);

    const int s = pl.query_seq[i];
    const long len = pl.seq_len[s], pos = pl.query_pos[i];
    const long hi = causal ? min(len, pos + 1) : len;
    long k_lo = 0, k_end = hi;
    if (S > 1) {
        const long c = pa_split_chunk(hi, S);
        k_lo = min((long)sp * c, hi);
        k_end = min(k_lo + c, hi);
    }

    /* the block's q rows [q | qp] (heads past G: zeros, never written back), zero sums */
    for (uint e = lid; e < GB * W; e += L) {
        const uint g = e / W, f = e - g * W;
        const ulong h = (ulong)hk * G + g0 + g;
        float x = 0.0f;
        if (g0 + g < G) {
            x = f < D ? LOAD_A(q, ((ulong)i * Hq + h) * D + f) : LOAD_A(qp, ((ulong)i * Hq + h) * P + (f - D));
        }
        q_loc[e] = x;
    }
    for (uint e = lid; e < GB * Dv; e += L) {
        acc[e] = 0.0f;
    }
    for (uint g = lid; g < GB; g += L) {
        stat[g] = -INFINITY, stat[GB + g] = 0.0f, stat[2 * GB + g] = 1.0f;
    }

    for (long j0 = k_lo; j0 < k_end; j0 += PA_KEYS) {
        barrier(CLK_LOCAL_MEM_FENCE); /* the last tile's readers of rows, kv and s_loc are done */
        for (uint jj = lid; jj < PA_KEYS; jj += L) {
            rows[jj] = j0 + jj < k_end ? pa_row(pl, s, j0 + jj, ps) : -1;
        }
        pa_scores(k, kp, q_loc, kv, s_loc, rows, j0, k_end, hk, Hkv, D, P, GB, scale);
        barrier(CLK_LOCAL_MEM_FENCE);
        pa_softmax(s_loc, stat, GB);
        pa_values(v, kv, s_loc, acc, stat, rows, hk, Hkv, Dv, GB);
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    const uint heads = min(GB, G - g0);
    for (uint e = lid; e < heads * Dv; e += L) {
        const uint g = e / Dv, c = e - g * Dv;
        const ulong h = (ulong)hk * G + g0 + g;
        const float a = acc[g * Dv + c];
        if (S == 1) {
            const float l = stat[GB + g];
            /* l >= 1 once a key is seen; 0: none */
            STORE_A(out, ((ulong)i * Hq + h) * Dv + c, l != 0.0f ? a / l : 0.0f);
        } else {
            ws[(((ulong)sp * Q + i) * Hq + h) * Dv + c] = a;
        }
    }
    if (S > 1) {
        __global float *m_out = ws + (ulong)S * Q * Hq * Dv, *l_out = m_out + (ulong)S * Q * Hq;
        for (uint g = lid; g < heads; g += L) {
            const ulong at = ((ulong)sp * Q + i) * Hq + (ulong)hk * G + g0 + g;
            m_out[at] = stat[g];
            l_out[at] = stat[GB + g];
        }
    }
}

/* out[i][h] from the S splits' partials of row r = i * Hq + h (one work-group per row). */
__kernel void rudnn_paged_merge(__global const float *ws, ulong ws_off, __global act_t *out, ulong out_off,
                                ulong group0, uint Q, uint Hq, uint S, uint Dv)
{
    const uint lid = (uint)get_local_id(0), L = (uint)get_local_size(0);
    const ulong r = group0 + get_group_id(0), rows = (ulong)Q * Hq;
    ws += ws_off, out += out_off;
    __global const float *m = ws + (ulong)S * rows * Dv, *l = m + (ulong)S * rows;
    float M = -INFINITY;
    int any = 0;
    for (uint sp = 0; sp < S; sp++) {
        if (l[sp * rows + r] != 0.0f) { /* NaN is kept: it reaches the output */
            M = any ? fmax(M, m[sp * rows + r]) : m[sp * rows + r];
            any = 1;
        }
    }
    float denom = 0.0f;
    for (uint sp = 0; sp < S; sp++) {
        if (l[sp * rows + r] != 0.0f) {
            denom += exp(m[sp * rows + r] - M) * l[sp * rows + r];
        }
    }
    for (uint c = lid; c < Dv; c += L) {
        float a = 0.0f;
        for (uint sp = 0; sp < S; sp++) {
            const float ls = l[sp * rows + r];
            if (ls != 0.0f) {
                a = fma(exp(m[sp * rows + r] - M), ws[(sp * rows + r) * Dv + c], a);
            }
        }
        STORE_A(out, r * Dv + c, any ? a / denom : 0.0f);
    }
}

/* Query i's rows k [Hkv * D] and v [Hkv * Dv] (Dv 0: none) into its position's cache row: plain
 * copies of the storage bits. */
__kernel void rudnn_paged_append(__global const int *plan, ulong o_len, ulong o_table, ulong o_qseq,
                                 ulong o_qpos, ulong o_pages, const __global raw_t *k, ulong k_off,
                                 __global raw_t *kc, ulong kc_off, const __global raw_t *v, ulong v_off,
                                 __global raw_t *vc, ulong vc_off, ulong group0, uint Hkv, uint D, uint Dv, uint ps)
{
    const uint lid = (uint)get_local_id(0), L = (uint)get_local_size(0);
    const ulong i = group0 + get_group_id(0);
    const pa_plan_t pl = pa_plan_of(plan, o_len, o_table, o_qseq, o_qpos, o_pages);
    const long row = pa_row(pl, pl.query_seq[i], pl.query_pos[i], ps);
    const ulong kw = (ulong)Hkv * D, vw = (ulong)Hkv * Dv;
    k += k_off + i * kw, kc += kc_off + (ulong)row * kw;
    for (ulong e = lid; e < kw; e += L) {
        kc[e] = k[e];
    }
    if (Dv > 0) {
        v += v_off + i * vw, vc += vc_off + (ulong)row * vw;
        for (ulong e = lid; e < vw; e += L) {
            vc[e] = v[e];
        }
    }
}
