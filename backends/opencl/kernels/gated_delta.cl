/* The gated delta rule (backends/hal/gated_delta.h): FP32 state and arithmetic, inputs of the
 * program's RUDNN_DTYPE (common.cl's LOAD_A / STORE_A), log_decay and the states F32.
 *   rudnn_gdr_recurrent    a work-group per (sequence, head, block of `cols` value columns) of
 *                          cols x R work-items: item (c, r) keeps rows r, r + R, ... of column c of S
 *                          in local memory; per token its partial dots of S^T k and S^T q, reduced
 *                          over the R items of the column in local memory (R = 1: none)
 *   rudnn_gdr_chunk_prep   a work-group per (chunk, head): gamma to the scratch record, Lm (in the
 *                          upper triangle of a C x C local array) and Pm (to the record), T =
 *                          (I + Lm)^-1 by forward substitution into the lower triangle (the
 *                          contract's 4 (C^2 + C) bytes: that array and gamma), then W and U
 *   rudnn_gdr_chunk_state  a work-group per (sequence, head, block of cols value columns) of
 *                          cols x R work-items walking the sequence's chunks in order, S [K][cols]
 *                          and Delta [C][cols] in local memory: the rows of Delta = U - W S and of
 *                          the output, then those of the state, in blocks of 4 dealt round the R
 *                          items of a column (one load of S or Delta serves four products)
 * Strides come as long4 (b, h, t, unused) in elements; offsets (the *o arguments) in elements too,
 * the table's in longs. The padding of a chunk (rows L .. C - 1) is never computed nor read. */

typedef struct seq_info {
    long batch, start, length, chunk_first;
    long row;
} seq_info_t;

/* Sequence s: fixed length (batch row s, tokens 0 .. T - 1, state row s, chunks s * ceil(T / C) ..)
 * or the varlen table (start[n], length[n], chunk_first[n + 1], int state_row[n]). */
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

/* The sequence chunk c belongs to: the last s with chunk_first[s] <= c (zero-length sequences own
 * no chunk: the search passes over them). */
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

/* The scratch record of one (chunk, head), floats: W [C][K], U [C][V], Pm [C][C] (rows i < L,
 * columns j <= i written), gamma [C]; rounded up to 16 bytes. The host sizes it the same way
 * (gated_delta.c). */
long rec_u(long C, long K) { return C * K; }
long rec_pm(long C, long K, long V) { return C * (K + V); }
long rec_gamma(long C, long K, long V) { return C * (K + V) + C * C; }
long rec_size(long C, long K, long V) { return (C * (K + V) + C * C + C + 3) / 4 * 4; }

/* chunk_prep: Pm[i][j] and Lm[i][j] (at A[j][i]) of row i from its dots, when i < L and j <= i. */
void pair_store(long i, long j, long L, long C, __local const float *gam, __local float *A, __global float *Pm,
                float kk, float qk)
{
    if (i < L && j <= i) {
        const float e = exp(gam[i] - gam[j]);
        Pm[i * C + j] = e * qk;
        if (j < i) {
            A[j * C + i] = A[i * C + i] * e * kk;
        }
    }
}

/* chunk_prep: T[i][j] of the unit lower triangle stored below A's diagonal. */
float t_of(__local const float *A, long C, long i, long j)
{
    return j < i ? A[i * C + j] : (j == i ? 1.0f : 0.0f);
}

/* chunk_state: output row i of the column from qs = (Qc S)[i]: scale (e^gamma_i qs + (Pm Delta)[i]). */
void out_row(__global act_t *out, long at, long i, long C, __global const float *Pm, __global const float *gam,
             __local const float *D, uint cols, uint c, float scale, float qs)
{
    __global const float *pm = Pm + i * C;
    float pd = 0.0f;
    for (long j = 0; j <= i; j++) {
        pd += pm[j] * D[j * cols + c];
    }
    STORE_A(out, at, scale * (exp(gam[i]) * qs + pd));
}

__kernel void rudnn_gdr_recurrent(__global const act_t *q, ulong qo, __global const act_t *k, ulong ko,
                                  __global const act_t *v, ulong vo, __global const act_t *beta, ulong bo,
                                  __global const float *decay, ulong dco, __global const float *s_in, ulong sio,
                                  __global const long *table, ulong tbo, __global act_t *out, ulong oo,
                                  __global float *s_out, ulong soo, ulong group0, long4 qs, long4 ks, long4 vs,
                                  long4 bs, long4 ds, long4 os, long H, long T, long K, long V, long n, int varlen,
                                  float scale, long col_blocks, uint cols, __local float *S, __local float *red)
{
    const ulong g = group0 + get_group_id(0);
    const long cb = (long)(g % (ulong)col_blocks), h = (long)((g / (ulong)col_blocks) % (ulong)H);
    const long s = (long)(g / ((ulong)col_blocks * (ulong)H));
    const uint lid = (uint)get_local_id(0), R = (uint)get_local_size(0) / cols;
    const uint c = lid % cols, r = lid / cols;
    const long col = cb * cols + c;
    const int live = col < V;
    q += qo, k += ko, v += vo, beta += bo, decay += dco, s_in += sio, table += tbo, out += oo, s_out += soo;
    const seq_info_t si = seq_of(table, varlen, n, s, T, 0);
    __global const float *src = s_in + (si.row * H + h) * K * V;
    __global float *dst = s_out + (si.row * H + h) * K * V;
    for (long i = r; i < K; i += R) {
        S[i * cols + c] = live ? src[i * V + col] : 0.0f;
    }
    /* The rank-1 update of token t - 1 is applied in token t's pass, before its decay (the same
     * operations in the same order as two passes). */
    long kprev = 0;
    float dprev = 0.0f;
    for (long t = si.start; t < si.start + si.length; t++) {
        const long qb = tok(qs, si.batch, h, t), kb = tok(ks, si.batch, h, t);
        const float gate = exp(decay[tok(ds, si.batch, h, t)]);
        const int upd = t > si.start;
        float dk = 0.0f, dq = 0.0f, kq = 0.0f;
        for (long i = r; i < K; i += R) {
            float x = S[i * cols + c];
            if (upd) {
                x = x + LOAD_A(k, kprev + i) * dprev;
            }
            x = x * gate;
            S[i * cols + c] = x;
            const float ki = LOAD_A(k, kb + i), qi = LOAD_A(q, qb + i);
            dk += x * ki;
            dq += x * qi;
            kq += ki * qi;
        }
        if (R > 1) { /* partials of token parity p: [p][3][R][cols] */
            __local float *pr = red + (t & 1) * 3 * R * cols;
            pr[r * cols + c] = dk;
            pr[(R + r) * cols + c] = dq;
            pr[(2 * R + r) * cols + c] = kq;
            barrier(CLK_LOCAL_MEM_FENCE);
            dk = 0.0f, dq = 0.0f, kq = 0.0f;
            for (uint j = 0; j < R; j++) { /* every item of the column sums in the same order */
                dk += pr[j * cols + c];
                dq += pr[(R + j) * cols + c];
                kq += pr[(2 * R + j) * cols + c];
            }
        }
        const float b = LOAD_A(beta, tok(bs, si.batch, h, t));
        const float vt = live ? LOAD_A(v, tok(vs, si.batch, h, t) + col) : 0.0f;
        const float delta = b * (vt - dk);
        if (live && r == 0) {
            STORE_A(out, tok(os, si.batch, h, t) + col, scale * (dq + kq * delta));
        }
        kprev = kb;
        dprev = delta;
    }
    if (live) {
        const int upd = si.length > 0;
        for (long i = r; i < K; i += R) {
            float x = S[i * cols + c];
            if (upd) {
                x = x + LOAD_A(k, kprev + i) * dprev;
            }
            dst[i * V + col] = x;
        }
    }
}

__kernel void rudnn_gdr_chunk_prep(__global const act_t *q, ulong qo, __global const act_t *k, ulong ko,
                                   __global const act_t *v, ulong vo, __global const act_t *beta, ulong bo,
                                   __global const float *decay, ulong dco, __global const long *table, ulong tbo,
                                   __global float *scratch, ulong sco, ulong group0, long4 qs, long4 ks, long4 vs,
                                   long4 bs, long4 ds, long H, long T, long K, long V, long n, int varlen, long C,
                                   __local float *A, __local float *gam)
{
    const ulong g = group0 + get_group_id(0);
    const long c = (long)(g / (ulong)H), h = (long)(g % (ulong)H);
    const long lid = get_local_id(0), LS = get_local_size(0);
    q += qo, k += ko, v += vo, beta += bo, decay += dco, table += tbo, scratch += sco;
    const seq_info_t si = seq_of(table, varlen, n, seq_of_chunk(table, varlen, n, c, T, C), T, C);
    const long t0 = si.start + (c - si.chunk_first) * C, b = si.batch;
    const long L = min(C, si.start + si.length - t0);
    __global float *rec = scratch + (c * H + h) * rec_size(C, K, V);
    __global float *W = rec, *U = rec + rec_u(C, K), *Pm = rec + rec_pm(C, K, V);

    /* A: Lm[i][j] (j < i) at A[j][i], T[i][j] (j < i) at A[i][j], beta_i at A[i][i] (T's unit
     * diagonal is implicit) */
    if (lid == 0) {
        float run = 0.0f;
        for (long i = 0; i < L; i++) {
            run += decay[tok(ds, b, h, t0 + i)];
            gam[i] = run;
            rec[rec_gamma(C, K, V) + i] = run;
        }
    }
    for (long i = lid; i < L; i += LS) {
        A[i * C + i] = LOAD_A(beta, tok(bs, b, h, t0 + i));
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* Lm and Pm: an item a (block of 4 rows i, column j) pair, one load of k_j for eight products;
     * rows past L computed as row L - 1 and not stored */
    const long nb = (L + 3) / 4;
    for (long idx = lid; idx < nb * L; idx += LS) {
        const long i0 = idx / L * 4, j = idx % L;
        if (j > i0 + 3) {
            continue;
        }
        const long i1 = min(i0 + 1, L - 1), i2 = min(i0 + 2, L - 1), i3 = min(i0 + 3, L - 1);
        __global const act_t *kj = k + tok(ks, b, h, t0 + j);
        __global const act_t *k0 = k + tok(ks, b, h, t0 + i0), *k1 = k + tok(ks, b, h, t0 + i1);
        __global const act_t *k2 = k + tok(ks, b, h, t0 + i2), *k3 = k + tok(ks, b, h, t0 + i3);
        __global const act_t *q0 = q + tok(qs, b, h, t0 + i0), *q1 = q + tok(qs, b, h, t0 + i1);
        __global const act_t *q2 = q + tok(qs, b, h, t0 + i2), *q3 = q + tok(qs, b, h, t0 + i3);
        float kk0 = 0.0f, kk1 = 0.0f, kk2 = 0.0f, kk3 = 0.0f, qk0 = 0.0f, qk1 = 0.0f, qk2 = 0.0f, qk3 = 0.0f;
        for (long d = 0; d < K; d++) {
            const float x = LOAD_A(kj, d);
            kk0 += LOAD_A(k0, d) * x;
            kk1 += LOAD_A(k1, d) * x;
            kk2 += LOAD_A(k2, d) * x;
            kk3 += LOAD_A(k3, d) * x;
            qk0 += LOAD_A(q0, d) * x;
            qk1 += LOAD_A(q1, d) * x;
            qk2 += LOAD_A(q2, d) * x;
            qk3 += LOAD_A(q3, d) * x;
        }
        pair_store(i0, j, L, C, gam, A, Pm, kk0, qk0);
        pair_store(i0 + 1, j, L, C, gam, A, Pm, kk1, qk1);
        pair_store(i0 + 2, j, L, C, gam, A, Pm, kk2, qk2);
        pair_store(i0 + 3, j, L, C, gam, A, Pm, kk3, qk3);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* T = (I + Lm)^-1, a column a work-item: T[i][j] = -(Lm[i][j] + sum_{j<m<i} Lm[i][m] T[m][j])
     * reads the upper triangle and the item's own column only. Then gam[j] = beta_j e^gamma_j (W's
     * coefficient; nobody else reads gam[j] here). */
    for (long j = lid; j < L; j += LS) {
        for (long i = j + 1; i < L; i++) {
            float val = -A[j * C + i];
            for (long m = j + 1; m < i; m++) {
                val -= A[m * C + i] * A[m * C + j];
            }
            A[i * C + j] = val;
        }
        gam[j] = A[j * C + j] * exp(gam[j]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* W = T diag(beta e^gamma) Kc, U = T diag(beta) Vc: an item a (block of 4 rows i, column d),
     * one load of k_j or v_j for four products; T[i][j] is A[i][j] below the diagonal, 1 on it, 0
     * above; rows past L computed as row L - 1 and not stored */
    const long nw = nb * K, n_all = nb * (K + V);
    for (long idx = lid; idx < n_all; idx += LS) {
        const int is_w = idx < nw;
        const long e = is_w ? idx : idx - nw, cols = is_w ? K : V;
        const long i0 = e / cols * 4, d = e % cols;
        const long i1 = min(i0 + 1, L - 1), i2 = min(i0 + 2, L - 1), i3 = min(i0 + 3, L - 1);
        __global const act_t *x = is_w ? k : v;
        const long4 xs = is_w ? ks : vs;
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
        for (long j = 0; j <= i3; j++) {
            const float xj = LOAD_A(x, tok(xs, b, h, t0 + j) + d) * (is_w ? gam[j] : A[j * C + j]);
            a0 += t_of(A, C, i0, j) * xj;
            a1 += t_of(A, C, i1, j) * xj;
            a2 += t_of(A, C, i2, j) * xj;
            a3 += t_of(A, C, i3, j) * xj;
        }
        __global float *dst = (is_w ? W : U) + i0 * cols + d;
        dst[0] = a0;
        if (i0 + 1 < L) {
            dst[cols] = a1;
        }
        if (i0 + 2 < L) {
            dst[2 * cols] = a2;
        }
        if (i0 + 3 < L) {
            dst[3 * cols] = a3;
        }
    }
}

__kernel void rudnn_gdr_chunk_state(__global const act_t *q, ulong qo, __global const act_t *k, ulong ko,
                                    __global const float *s_in, ulong sio, __global const long *table, ulong tbo,
                                    __global const float *scratch, ulong sco, __global act_t *out, ulong oo,
                                    __global float *s_out, ulong soo, ulong group0, long4 qs, long4 ks, long4 os,
                                    long H, long T, long K, long V, long n, int varlen, long C, float scale,
                                    long col_blocks, uint cols, __local float *S, __local float *D)
{
    const ulong g = group0 + get_group_id(0);
    const long cb = (long)(g % (ulong)col_blocks), h = (long)((g / (ulong)col_blocks) % (ulong)H);
    const long s = (long)(g / ((ulong)col_blocks * (ulong)H));
    const uint lid = (uint)get_local_id(0), R = (uint)get_local_size(0) / cols;
    const uint c = lid % cols, r = lid / cols;
    const long col = cb * cols + c;
    const int live = col < V;
    q += qo, k += ko, s_in += sio, table += tbo, scratch += sco, out += oo, s_out += soo;
    const seq_info_t si = seq_of(table, varlen, n, s, T, C);
    __global const float *src = s_in + (si.row * H + h) * K * V;
    __global float *dst = s_out + (si.row * H + h) * K * V;
    const long b = si.batch;
    for (long i = r; i < K; i += R) { /* a barrier follows before any item reads another's rows */
        S[i * cols + c] = live ? src[i * V + col] : 0.0f;
    }
    const long chunks = (si.length + C - 1) / C;
    for (long ci = 0; ci < chunks; ci++) {
        const long ch = si.chunk_first + ci, t0 = si.start + ci * C;
        const long L = min(C, si.start + si.length - t0);
        __global const float *rec = scratch + (ch * H + h) * rec_size(C, K, V);
        __global const float *W = rec, *U = rec + rec_u(C, K), *Pm = rec + rec_pm(C, K, V);
        __global const float *gam = rec + rec_gamma(C, K, V);
        barrier(CLK_LOCAL_MEM_FENCE); /* S complete (loaded, or the last chunk's update) */
        /* Delta = U - W S: blocks of 4 rows (one load of S for four products), block bi of the
         * item's r, r + R, ..; rows past L computed as row L - 1 and not stored */
        for (long i0 = 4 * r; i0 < L; i0 += 4 * R) {
            const long i1 = min(i0 + 1, L - 1), i2 = min(i0 + 2, L - 1), i3 = min(i0 + 3, L - 1);
            __global const float *w0 = W + i0 * K, *w1 = W + i1 * K, *w2 = W + i2 * K, *w3 = W + i3 * K;
            float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
            for (long d = 0; d < K; d++) {
                const float x = S[d * cols + c];
                a0 += w0[d] * x;
                a1 += w1[d] * x;
                a2 += w2[d] * x;
                a3 += w3[d] * x;
            }
            if (live) {
                D[i0 * cols + c] = U[i0 * V + col] - a0;
                if (i0 + 1 < L) {
                    D[(i0 + 1) * cols + c] = U[(i0 + 1) * V + col] - a1;
                }
                if (i0 + 2 < L) {
                    D[(i0 + 2) * cols + c] = U[(i0 + 2) * V + col] - a2;
                }
                if (i0 + 3 < L) {
                    D[(i0 + 3) * cols + c] = U[(i0 + 3) * V + col] - a3;
                }
            } else {
                for (long i = i0; i < min(i0 + 4, L); i++) {
                    D[i * cols + c] = 0.0f;
                }
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        /* O = scale (e^gamma Qc S + Pm Delta), the same blocks of rows */
        for (long i0 = 4 * r; i0 < L; i0 += 4 * R) {
            const long i1 = min(i0 + 1, L - 1), i2 = min(i0 + 2, L - 1), i3 = min(i0 + 3, L - 1);
            __global const act_t *q0 = q + tok(qs, b, h, t0 + i0), *q1 = q + tok(qs, b, h, t0 + i1);
            __global const act_t *q2 = q + tok(qs, b, h, t0 + i2), *q3 = q + tok(qs, b, h, t0 + i3);
            float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
            for (long d = 0; d < K; d++) {
                const float x = S[d * cols + c];
                a0 += LOAD_A(q0, d) * x;
                a1 += LOAD_A(q1, d) * x;
                a2 += LOAD_A(q2, d) * x;
                a3 += LOAD_A(q3, d) * x;
            }
            if (live) {
                out_row(out, tok(os, b, h, t0 + i0) + col, i0, C, Pm, gam, D, cols, c, scale, a0);
                if (i0 + 1 < L) {
                    out_row(out, tok(os, b, h, t0 + i1) + col, i1, C, Pm, gam, D, cols, c, scale, a1);
                }
                if (i0 + 2 < L) {
                    out_row(out, tok(os, b, h, t0 + i2) + col, i2, C, Pm, gam, D, cols, c, scale, a2);
                }
                if (i0 + 3 < L) {
                    out_row(out, tok(os, b, h, t0 + i3) + col, i3, C, Pm, gam, D, cols, c, scale, a3);
                }
            }
        }
        const float gl = gam[L - 1];
        barrier(CLK_LOCAL_MEM_FENCE); /* every output row has read S and Delta */
        for (long j = r; j < L; j += R) {
            D[j * cols + c] *= exp(gl - gam[j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        /* S = e^gl S + sum_j k_j (e^(gl - gamma_j) Delta_j)^T: blocks of 4 state rows (one load of
         * Delta for four products); rows past K computed as row K - 1 and not stored */
        const float egl = exp(gl);
        __global const act_t *kt = k + tok(ks, b, h, t0);
        for (long i0 = 4 * r; i0 < K; i0 += 4 * R) {
            const long i1 = min(i0 + 1, K - 1), i2 = min(i0 + 2, K - 1), i3 = min(i0 + 3, K - 1);
            float a0 = egl * S[i0 * cols + c], a1 = egl * S[i1 * cols + c];
            float a2 = egl * S[i2 * cols + c], a3 = egl * S[i3 * cols + c];
            for (long j = 0; j < L; j++) {
                const float x = D[j * cols + c];
                __global const act_t *kj = kt + j * ks.z;
                a0 += LOAD_A(kj, i0) * x;
                a1 += LOAD_A(kj, i1) * x;
                a2 += LOAD_A(kj, i2) * x;
                a3 += LOAD_A(kj, i3) * x;
            }
            S[i0 * cols + c] = a0;
            if (i0 + 1 < K) {
                S[(i0 + 1) * cols + c] = a1;
            }
            if (i0 + 2 < K) {
                S[(i0 + 2) * cols + c] = a2;
            }
            if (i0 + 3 < K) {
                S[(i0 + 3) * cols + c] = a3;
            }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (live) {
        for (long i = r; i < K; i += R) {
            dst[i * V + col] = S[i * cols + c];
        }
    }
}
