/* The gated delta rule (backends/hal/gated_delta.h): FP32 state and arithmetic, inputs of the
 * program's RUDNN_DTYPE (common.cl's LOAD_A / STORE_A), log_decay and the states F32.
 *   rudnn_gdr_recurrent    a work-group per (sequence, head, block of value columns), a work-item a
 *                          column: its column of S in local memory (no other item touches it)
 *   rudnn_gdr_chunk_prep   a work-group per (chunk, head): gamma, Lm and Pm to the scratch record,
 *                          T = (I + Lm)^-1 in local memory (the contract's 4 (C^2 + C) bytes: T and
 *                          gamma), a work-item a column of T; then W and U
 *   rudnn_gdr_chunk_state  a work-group per (sequence, head, block of value columns), a work-item a
 *                          column walking the chunks in order: Delta = U - W S, the output, the state
 * Strides come as long4 (b, h, t, unused) in elements; offsets (the *o arguments) in elements too,
 * the table's in longs. */

typedef struct seq_info {
    long batch, start, length, chunk_first;
    long row;
} seq_info_t;

seq_info_t seq_of(__global const long *table, int varlen, long n, long s, long T, long C)
{
    seq_info_t si;
    if (varlen) {
        si.batch = 0;
        si.start = table[s];
        si.length = table[n + s];
        si.chunk_first = table[2 * n + s];
        si.row = ((__global const int *)(table + 3 * n + 1))[s];
    } else {
        const long per = C > 0 ? (T + C - 1) / C : 0;
        si.batch = s;
        si.start = 0;
        si.length = T;
        si.chunk_first = s * per;
        si.row = s;
    }
    return si;
}

/* The sequence chunk c belongs to: the last s with chunk_first[s] <= c. */
long seq_of_chunk(__global const long *table, int varlen, long n, long c, long T, long C)
{
    if (!varlen) {
        return c / ((T + C - 1) / C);
    }
    __global const long *first = table + 2 * n;
    long lo = 0, hi = n - 1;
    while (lo < hi) {
        const long mid = (lo + hi + 1) / 2;
        if (first[mid] <= c) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    return lo;
}

long tok(long4 st, long b, long h, long t) { return b * st.x + h * st.y + t * st.z; }

/* The scratch record of one (chunk, head), floats: W [C][K], U [C][V] (Delta after chunk_state),
 * Pm [C][C], Lm [C][C], gamma [C]; the host sizes it the same way (gated_delta.c). */
long rec_w(long C, long K, long V) { return 0; }
long rec_u(long C, long K, long V) { return C * K; }
long rec_pm(long C, long K, long V) { return C * K + C * V; }
long rec_lm(long C, long K, long V) { return C * K + C * V + C * C; }
long rec_gamma(long C, long K, long V) { return C * K + C * V + 2 * C * C; }
long rec_size(long C, long K, long V) { return (C * K + C * V + 2 * C * C + C + 3) / 4 * 4; }

__kernel void rudnn_gdr_recurrent(__global const act_t *q, ulong qo, __global const act_t *k, ulong ko,
                                  __global const act_t *v, ulong vo, __global const act_t *beta, ulong bo,
                                  __global const float *decay, ulong dco, __global const float *s_in, ulong sio,
                                  __global const long *table, ulong tbo, __global act_t *out, ulong oo,
                                  __global float *s_out, ulong soo, ulong group0, long4 qs, long4 ks, long4 vs,
                                  long4 bs, long4 ds, long4 os, long H, long T, long K, long V, long n, int varlen,
                                  float scale, long col_blocks, __local float *S, __local float *qk)
{
    const ulong g = group0 + get_group_id(0);
    const long cb = (long)(g % (ulong)col_blocks), h = (long)((g / (ulong)col_blocks) % (ulong)H);
    const long s = (long)(g / ((ulong)col_blocks * (ulong)H));
    const uint lid = get_local_id(0), L = get_local_size(0);
    const long col = cb * L + lid;
    const int live = col < V;
    q += qo, k += ko, v += vo, beta += bo, decay += dco, s_in += sio, table += tbo, out += oo, s_out += soo;
    const seq_info_t si = seq_of(table, varlen, n, s, T, 0);
    __global const float *src = s_in + (si.row * H + h) * K * V;
    __global float *dst = s_out + (si.row * H + h) * K * V;
    for (long r = 0; r < K; r++) {
        S[r * L + lid] = live ? src[r * V + col] : 0.0f;
    }
    for (long t = si.start; t < si.start + si.length; t++) {
        barrier(CLK_LOCAL_MEM_FENCE);
        const long qb = tok(qs, si.batch, h, t), kb = tok(ks, si.batch, h, t);
        for (long i = lid; i < K; i += L) {
            qk[i] = LOAD_A(q, qb + i);
            qk[K + i] = LOAD_A(k, kb + i);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const float gate = exp(decay[tok(ds, si.batch, h, t)]);
        float dk = 0.0f, dq = 0.0f, kq = 0.0f;
        for (long r = 0; r < K; r++) {
            const float x = S[r * L + lid] * gate;
            S[r * L + lid] = x;
            dk += x * qk[K + r];
            dq += x * qk[r];
            kq += qk[K + r] * qk[r];
        }
        const float b = LOAD_A(beta, tok(bs, si.batch, h, t));
        const float vt = live ? LOAD_A(v, tok(vs, si.batch, h, t) + col) : 0.0f;
        const float delta = b * (vt - dk);
        if (live) {
            STORE_A(out, tok(os, si.batch, h, t) + col, scale * (dq + kq * delta));
        }
        for (long r = 0; r < K; r++) {
            S[r * L + lid] += qk[K + r] * delta;
        }
    }
    if (live) {
        for (long r = 0; r < K; r++) {
            dst[r * V + col] = S[r * L + lid];
        }
    }
}

__kernel void rudnn_gdr_chunk_prep(__global const act_t *q, ulong qo, __global const act_t *k, ulong ko,
                                   __global const act_t *v, ulong vo, __global const act_t *beta, ulong bo,
                                   __global const float *decay, ulong dco, __global const long *table, ulong tbo,
                                   __global float *scratch, ulong sco, ulong group0, long4 qs, long4 ks, long4 vs,
                                   long4 bs, long4 ds, long H, long T, long K, long V, long n, int varlen, long C,
                                   __local float *Tl, __local float *gam)
{
    const ulong g = group0 + get_group_id(0);
    const long c = (long)(g / (ulong)H), h = (long)(g % (ulong)H);
    const uint lid = get_local_id(0), LS = get_local_size(0);
    q += qo, k += ko, v += vo, beta += bo, decay += dco, table += tbo, scratch += sco;
    const seq_info_t si = seq_of(table, varlen, n, seq_of_chunk(table, varlen, n, c, T, C), T, C);
    const long t0 = si.start + (c - si.chunk_first) * C, b = si.batch;
    const long L = min(C, si.start + si.length - t0);
    __global float *rec = scratch + (c * H + h) * rec_size(C, K, V);
    __global float *Lm = rec + rec_lm(C, K, V), *Pm = rec + rec_pm(C, K, V);

    if (lid == 0) {
        float run = 0.0f;
        for (long i = 0; i < C; i++) {
            if (i < L) {
                run += decay[tok(ds, b, h, t0 + i)];
            }
            gam[i] = run;
            rec[rec_gamma(C, K, V) + i] = run;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (long idx = lid; idx < C * C; idx += LS) {
        const long i = idx / C, j = idx % C;
        float lm = 0.0f, pm = 0.0f;
        if (i < L && j <= i) {
            const long ki = tok(ks, b, h, t0 + i), kj = tok(ks, b, h, t0 + j), qi = tok(qs, b, h, t0 + i);
            float kk = 0.0f, qk = 0.0f;
            for (long d = 0; d < K; d++) {
                const float kjd = LOAD_A(k, kj + d);
                kk += LOAD_A(k, ki + d) * kjd;
                qk += LOAD_A(q, qi + d) * kjd;
            }
            const float e = exp(gam[i] - gam[j]);
            pm = e * qk;
            if (j < i) {
                lm = LOAD_A(beta, tok(bs, b, h, t0 + i)) * e * kk;
            }
        }
        Lm[idx] = lm;
        Pm[idx] = pm;
    }
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    /* T = (I + Lm)^-1, a column a work-item: column j of T needs only column j's earlier rows */
    for (long j = lid; j < C; j += LS) {
        for (long i = 0; i < C; i++) {
            float val = i == j ? 1.0f : 0.0f;
            if (i > j) {
                val = -Lm[i * C + j];
                for (long m = j + 1; m < i; m++) {
                    val -= Lm[i * C + m] * Tl[m * C + j];
                }
            }
            Tl[i * C + j] = val;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* W = T diag(beta e^gamma) Kc, U = T diag(beta) Vc */
    for (long idx = lid; idx < C * (K + V); idx += LS) {
        const int is_w = idx < C * K;
        const long cols = is_w ? K : V, e = is_w ? idx : idx - C * K;
        const long i = e / cols, d = e % cols;
        float acc = 0.0f;
        if (i < L) {
            for (long j = 0; j <= i; j++) {
                const float bj = LOAD_A(beta, tok(bs, b, h, t0 + j));
                const float x = is_w ? LOAD_A(k, tok(ks, b, h, t0 + j) + d) * exp(gam[j])
                                     : LOAD_A(v, tok(vs, b, h, t0 + j) + d);
                acc += Tl[i * C + j] * bj * x;
            }
        }
        rec[(is_w ? rec_w(C, K, V) : rec_u(C, K, V)) + e] = acc;
    }
}

__kernel void rudnn_gdr_chunk_state(__global const act_t *q, ulong qo, __global const act_t *k, ulong ko,
                                    __global const float *s_in, ulong sio, __global const long *table, ulong tbo,
                                    __global float *scratch, ulong sco, __global act_t *out, ulong oo,
                                    __global float *s_out, ulong soo, ulong group0, long4 qs, long4 ks, long4 os,
                                    long H, long T, long K, long V, long n, int varlen, long C, float scale,
                                    long col_blocks, __local float *S, __local float *D)
{
    const ulong g = group0 + get_group_id(0);
    const long cb = (long)(g % (ulong)col_blocks), h = (long)((g / (ulong)col_blocks) % (ulong)H);
    const long s = (long)(g / ((ulong)col_blocks * (ulong)H));
    const uint lid = get_local_id(0), LS = get_local_size(0);
    const long col = cb * LS + lid;
    const int live = col < V;
    q += qo, k += ko, s_in += sio, table += tbo, scratch += sco, out += oo, s_out += soo;
    const seq_info_t si = seq_of(table, varlen, n, s, T, C);
    __global const float *src = s_in + (si.row * H + h) * K * V;
    __global float *dst = s_out + (si.row * H + h) * K * V;
    const long b = si.batch;
    for (long r = 0; r < K; r++) {
        S[r * LS + lid] = live ? src[r * V + col] : 0.0f;
    }
    const long chunks = (si.length + C - 1) / C;
    for (long ci = 0; ci < chunks; ci++) {
        const long c = si.chunk_first + ci, t0 = si.start + ci * C;
        const long L = min(C, si.start + si.length - t0);
        __global float *rec = scratch + (c * H + h) * rec_size(C, K, V);
        __global const float *gam = rec + rec_gamma(C, K, V);
        for (long i = 0; i < L; i++) { /* Delta = U - W S */
            float acc = live ? rec[rec_u(C, K, V) + i * V + col] : 0.0f;
            __global const float *w = rec + rec_w(C, K, V) + i * K;
            for (long d = 0; d < K; d++) {
                acc -= w[d] * S[d * LS + lid];
            }
            D[i * LS + lid] = acc;
        }
        for (long i = 0; i < L; i++) { /* O = scale (e^gamma Qc S + Pm Delta) */
            const long qb = tok(qs, b, h, t0 + i);
            float qsum = 0.0f, pd = 0.0f;
            for (long d = 0; d < K; d++) {
                qsum += LOAD_A(q, qb + d) * S[d * LS + lid];
            }
            __global const float *pm = rec + rec_pm(C, K, V) + i * C;
            for (long j = 0; j <= i; j++) {
                pd += pm[j] * D[j * LS + lid];
            }
            if (live) {
                STORE_A(out, tok(os, b, h, t0 + i) + col, scale * (exp(gam[i]) * qsum + pd));
            }
        }
        const float gl = gam[L - 1];
        for (long r = 0; r < K; r++) { /* S = e^gl S + sum_j e^(gl - gamma_j) k_j Delta_j^T */
            float acc = exp(gl) * S[r * LS + lid];
            for (long j = 0; j < L; j++) {
                acc += exp(gl - gam[j]) * LOAD_A(k, tok(ks, b, h, t0 + j) + r) * D[j * LS + lid];
            }
            S[r * LS + lid] = acc;
        }
    }
    if (live) {
        for (long r = 0; r < K; r++) {
            dst[r * V + col] = S[r * LS + lid];
        }
    }
}
