/* The attention backward on CUDA/HIP (rudnn/attention.h; the OpenCL kernels of attention.cl part 3
 * are the spec): dq, dk and dv from q, k, v, out, dout and the forward's lse, with
 *   P = exp(s - lse),  Delta_i = dout_i . out_i,  dP = dout_i . v_j,  dS = P (dP - Delta_i),
 *   dU = dS * (1 - tanh^2) under a softcap (else dS),
 *   dq_i = scale sum_j dU k_j,  dk_j = scale sum_(h, i) dU q_i,  dv_j = sum_(h, i) P dout_i
 * (h over the query heads of key head j's group). Deterministic, no atomics: three kernels, each
 * output element summed by one thread in the OpenCL order (dq: keys ascending; dk, dv: the
 * group's heads ascending, then queries ascending; every dot product over the features
 * ascending), each term an fmaf as OpenCL's fma.
 *
 *   delta  a thread per query row: Delta into the FP32 workspace [B, Hq, Sq]
 *   dq     tiled (FlashAttention-2 style, FP32 SIMT): a CTA of BWD_THREADS takes `outer` query rows
 *          of one (b, h) and walks the key tiles of `inner` keys its rows can see. Per tile it
 *          stages K and V in shared memory as FP32, recomputes S and dP for the outer x inner
 *          block (thread (t / 16, t % 16) a micro-tile of rows t / 16 + 16 r, keys t % 16 + 16 c),
 *          leaves dU in shared memory and adds dU K into registers (thread (t / 32, t % 32): rows
 *          t / 32 + 8 r, columns t % 32 + 32 u: consecutive lanes, consecutive columns).
 *   dkv    tiled the same way the other way round: a CTA takes `outer` keys of one (b, key head)
 *          and walks, for each query head of the group, the query tiles that can see them,
 *          staging Q and dout per tile; P and dU go through shared memory into dv += P^T dout and
 *          dk += dU^T q.
 * Invisible pairs (window, mask, a fully masked row with lse -inf, padding past Sq or Skv) give P
 * and dU exactly 0, whose fmaf adds nothing: the same sums as OpenCL's, which skips them.
 *
 * Shared memory (floats; D', Dv': rows padded to an odd pitch, so that the lanes of a micro-tile
 * read different banks): dq  outer (D' + Dv') + inner (D' + Dv') + outer (inner + 1) + 2 outer,
 *                   dkv outer (D' + Dv') + inner (D' + Dv') + 2 outer (inner + 1) + 2 inner.
 * Tiles by max(D, Dv) rounded up to 64 / 128 / 256 (the accumulators: DMAX / 32 columns a
 * thread): outer x inner 64 x 64 / 64 x 32 / 32 x 32 (84 to 140 KiB with D = Dv = DMAX), else
 * the small ones 32 x 32 / 32 x 16 / 16 x 16 where those do not fit the device (at most 68 KiB);
 * where neither fits (D 256 on a device of 64 KiB, as AMD's), the OpenCL kernels' shape: a thread
 * per query row for dq and per key for dk, dv, reading global memory (slow, but every plan runs).
 * The three ways add the same terms in the same order. */
#include <string.h>

#include "rdg_internal.h"

#include "attention.cuh"
#include "attention_tuning.h"

#define ATT_BWD_NAME "attention.backward"

namespace {

/* Threads of a tiled CTA: the 16 x 16 score micro-tile grid and 8 rows x 32 columns of
 * accumulators (a multiple of HIP's 64-wide wavefronts). */
constexpr int BWD_THREADS = 256;
/* Threads of a CTA of the delta and the thread-per-row kernels. */
constexpr int BWD_ROW_THREADS = 128;

/* What the backward adds to the forward's rdg_att_args: the gradients' addresses and element
 * strides (dims b, h, s), the workspace and the lse. */
struct BwdArgs {
    const void *dout;
    void *dq, *dk, *dv;
    float *delta;     /* workspace: Delta per query row, [B, Hq, Sq] (NULL when Sq is 0) */
    const float *lse; /* [B, Hq, Sq] */
    int64_t dos[3], dqs[3], dks[3], dvs[3];
    int64_t heads_kv;
    int vec_dout; /* 1: dout rows may be read in 16-byte pieces */
};

/* outer x inner tiles by DMAX (the file comment); small: the ones for devices with less shared
 * memory. Both multiples of 16 (the micro-tile grid); outer a multiple of 8. */
__host__ __device__ constexpr int tile_outer(int dmax, bool small)
{
    return small ? (dmax == 256 ? 16 : 32) : (dmax == 256 ? 32 : 64);
}
__host__ __device__ constexpr int tile_inner(int dmax, bool small)
{
    return small ? (dmax == 64 ? 32 : 16) : (dmax == 64 ? 64 : 32);
}

/* An odd pitch of at least n floats (rows of a staged tile fall in different banks). */
__host__ __device__ inline int odd_pitch(int n)
{
    return n | 1;
}

/* The score of a visible key from its dot product, exactly as att_finish (the forward's): scale,
 * softcap, bias; slope is ds / du, the softcap's 1 - tanh^2 (1 without one). */
__device__ __forceinline__ float bwd_score(const rdg_att_args &a, float dot, int64_t j, int64_t bias_row,
                                           float *slope)
{
    float s = dot * a.scale;
    *slope = 1.0f;
    if (a.softcap > 0.0f) {
        const float t = tanhf(s / a.softcap);
        s = a.softcap * t;
        *slope = 1.0f - t * t;
    }
    if (a.bias_dtype != ATT_NO_BIAS)
        s += att_bias(a, bias_row + j);
    return s;
}

/* ---- delta ---- */

/* Delta[row] = out_row . dout_row over Dv, ascending (16-byte loads where both rows allow them). */
template <int DT>
__global__ void __launch_bounds__(BWD_ROW_THREADS) bwd_delta_kernel(const rdg_att_args a, const BwdArgs g,
                                                                     int64_t rows)
{
    constexpr int EB = att_elem_bytes<DT>(), VE = 16 / EB;
    const bool vec = a.vec_out && g.vec_dout;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t row = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; row < rows; row += step) {
        const int64_t i = row % a.seq_q, bh = row / a.seq_q;
        const int64_t h = bh % a.heads_q, b = bh / a.heads_q;
        const char *o = (const char *)a.out + (b * a.os[0] + h * a.os[1] + i * a.os[2]) * EB;
        const char *d = (const char *)g.dout + (b * g.dos[0] + h * g.dos[1] + i * g.dos[2]) * EB;
        float acc = 0.0f;
        if (vec) {
            for (int e = 0; e < a.dv; e += VE) {
                float x[VE], y[VE];
                att_ld16<DT>(o, e, x);
                att_ld16<DT>(d, e, y);
#pragma unroll
                for (int u = 0; u < VE; u++)
                    acc = fmaf(x[u], y[u], acc);
            }
        } else {
            for (int e = 0; e < a.dv; e++)
                acc = fmaf(Elem<DT>::ld(o, e), Elem<DT>::ld(d, e), acc);
        }
        g.delta[row] = acc;
    }
}

/* ---- dq, tiled ---- */

template <int DT, int DMAX, int BQ, int BK>
__global__ void __launch_bounds__(BWD_THREADS) bwd_dq_tiled(const rdg_att_args a, const BwdArgs g, int64_t q_tiles)
{
    constexpr int EB = att_elem_bytes<DT>();
    constexpr int RI = BQ / 16, RJ = BK / 16; /* score micro-tile: rows x keys */
    constexpr int RA = BQ / 8, U = DMAX / 32; /* accumulators: rows x columns */
    extern __shared__ float bwd_smem[];

    const int t = (int)threadIdx.x;
    const int D = a.d, Dv = a.dv, qp = odd_pitch(D), dp = odd_pitch(Dv), sp = BK + 1;
    float *q_s = bwd_smem;
    float *do_s = q_s + BQ * qp;
    float *k_s = do_s + BQ * dp;
    float *v_s = k_s + BK * qp;
    float *ds_s = v_s + BK * dp;
    float *lse_s = ds_s + BQ * sp;
    float *delta_s = lse_s + BQ;
    const int si = t / 16, sj = t % 16; /* score micro-tile */
    const int ai = t / 32, ae = t % 32; /* accumulators */
    const int64_t total = a.batch * a.heads_q * q_tiles;

    for (int64_t w = blockIdx.x; w < total; w += gridDim.x) {
        const int64_t bh = w / q_tiles, i0 = (w - bh * q_tiles) * BQ;
        const int64_t h = bh % a.heads_q, b = bh / a.heads_q, hk = h / a.group;

        __syncthreads(); /* the previous work item's readers of shared memory are done */
        att_stage<DT>(q_s, qp, (const char *)a.q + (b * a.qs[0] + h * a.qs[1]) * EB, a.qs[2], i0, BQ, a.seq_q, D,
                      a.vec_q);
        att_stage<DT>(do_s, dp, (const char *)g.dout + (b * g.dos[0] + h * g.dos[1]) * EB, g.dos[2], i0, BQ,
                      a.seq_q, Dv, g.vec_dout);
        for (int r = t; r < BQ; r += BWD_THREADS) {
            const int64_t i = i0 + r;
            lse_s[r] = i < a.seq_q ? g.lse[bh * a.seq_q + i] : -INFINITY;
            delta_s[r] = i < a.seq_q ? g.delta[bh * a.seq_q + i] : 0.0f;
        }

        /* the rows this thread scores */
        int64_t lo[RI], hi[RI], bias_row[RI];
        const uint8_t *mask_row[RI];
        bool row_ok[RI];
#pragma unroll
        for (int r = 0; r < RI; r++) {
            const int64_t i = i0 + si + 16 * r;
            row_ok[r] = i < a.seq_q;
            lo[r] = att_lo(a, i);
            hi[r] = att_hi(a, i);
            mask_row[r] = row_ok[r] ? att_mask_row(a, b, h, i) : nullptr;
            bias_row[r] = att_bias_row(a, b, h, i);
        }
        /* the keys any row of the CTA sees (lo and hi grow with i) */
        const int64_t i_last = (i0 + BQ < a.seq_q ? i0 + BQ : a.seq_q) - 1;
        const int64_t lo0 = att_lo(a, i0), hi_last = att_hi(a, i_last);
        const int64_t j_begin = lo0 > 0 ? lo0 : 0;
        const int64_t j_end = hi_last < a.seq_kv - 1 ? hi_last : a.seq_kv - 1;

        float acc[RA][U];
#pragma unroll
        for (int r = 0; r < RA; r++)
#pragma unroll
            for (int u = 0; u < U; u++)
                acc[r][u] = 0.0f;
        const char *kb = (const char *)a.k + (b * a.ks[0] + hk * a.ks[1]) * EB;
        const char *vb = (const char *)a.v + (b * a.vs[0] + hk * a.vs[1]) * EB;

        for (int64_t j0 = j_begin; j0 <= j_end; j0 += BK) {
            __syncthreads(); /* q, dout, lse are in; the last tile's readers are done */
            att_stage<DT>(k_s, qp, kb, a.ks[2], j0, BK, j_end + 1, D, a.vec_kv);
            att_stage<DT>(v_s, dp, vb, a.vs[2], j0, BK, j_end + 1, Dv, a.vec_kv);
            __syncthreads();

            /* S and dP of the micro-tile, each an fmaf chain over the features, ascending */
            float s[RI][RJ], dpv[RI][RJ];
#pragma unroll
            for (int r = 0; r < RI; r++)
#pragma unroll
                for (int c = 0; c < RJ; c++)
                    s[r][c] = dpv[r][c] = 0.0f;
#pragma unroll 4
            for (int d = 0; d < D; d++) {
                float x[RI], y[RJ];
#pragma unroll
                for (int r = 0; r < RI; r++)
                    x[r] = q_s[(si + 16 * r) * qp + d];
#pragma unroll
                for (int c = 0; c < RJ; c++)
                    y[c] = k_s[(sj + 16 * c) * qp + d];
#pragma unroll
                for (int r = 0; r < RI; r++)
#pragma unroll
                    for (int c = 0; c < RJ; c++)
                        s[r][c] = fmaf(x[r], y[c], s[r][c]);
            }
#pragma unroll 4
            for (int e = 0; e < Dv; e++) {
                float x[RI], y[RJ];
#pragma unroll
                for (int r = 0; r < RI; r++)
                    x[r] = do_s[(si + 16 * r) * dp + e];
#pragma unroll
                for (int c = 0; c < RJ; c++)
                    y[c] = v_s[(sj + 16 * c) * dp + e];
#pragma unroll
                for (int r = 0; r < RI; r++)
#pragma unroll
                    for (int c = 0; c < RJ; c++)
                        dpv[r][c] = fmaf(x[r], y[c], dpv[r][c]);
            }
            /* dU, 0 where the pair is invisible (as OpenCL's skip) */
#pragma unroll
            for (int r = 0; r < RI; r++) {
                const float l = lse_s[si + 16 * r], dl = delta_s[si + 16 * r];
#pragma unroll
                for (int c = 0; c < RJ; c++) {
                    const int64_t j = j0 + sj + 16 * c;
                    float du = 0.0f;
                    if (row_ok[r] && j <= j_end && l != -INFINITY && att_visible(j, lo[r], hi[r], mask_row[r])) {
                        float slope;
                        const float sc = bwd_score(a, s[r][c], j, bias_row[r], &slope);
                        const float p = expf(sc - l);
                        du = p * (dpv[r][c] - dl) * slope;
                    }
                    ds_s[(si + 16 * r) * sp + sj + 16 * c] = du;
                }
            }
            __syncthreads();

            /* dq += dU K over the tile's keys, ascending */
            const int nk = j_end - j0 + 1 < BK ? (int)(j_end - j0 + 1) : BK;
            for (int jj = 0; jj < nk; jj++) {
                float kv[U];
#pragma unroll
                for (int u = 0; u < U; u++) {
                    const int col = ae + 32 * u;
                    kv[u] = col < D ? k_s[jj * qp + col] : 0.0f;
                }
#pragma unroll
                for (int r = 0; r < RA; r++) {
                    const float du = ds_s[(ai + 8 * r) * sp + jj];
#pragma unroll
                    for (int u = 0; u < U; u++)
                        acc[r][u] = fmaf(du, kv[u], acc[r][u]);
                }
            }
        }

        /* every row of the tile is written (zeros where it saw no key) */
#pragma unroll
        for (int r = 0; r < RA; r++) {
            const int64_t i = i0 + ai + 8 * r;
            if (i >= a.seq_q)
                continue;
            char *row = (char *)g.dq + (b * g.dqs[0] + h * g.dqs[1] + i * g.dqs[2]) * EB;
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int col = ae + 32 * u;
                if (col < D)
                    Elem<DT>::st(row, col, acc[r][u] * a.scale);
            }
        }
    }
}

/* ---- dk, dv, tiled ---- */

template <int DT, int DMAX, int BK, int BQ>
__global__ void __launch_bounds__(BWD_THREADS) bwd_dkv_tiled(const rdg_att_args a, const BwdArgs g,
                                                             int64_t k_tiles)
{
    constexpr int EB = att_elem_bytes<DT>();
    constexpr int RJ = BK / 16, RI = BQ / 16; /* score micro-tile: keys x rows */
    constexpr int RA = BK / 8, U = DMAX / 32; /* accumulators: keys x columns */
    extern __shared__ float bwd_smem[];

    const int t = (int)threadIdx.x;
    const int D = a.d, Dv = a.dv, qp = odd_pitch(D), dp = odd_pitch(Dv), sp = BQ + 1;
    float *k_s = bwd_smem;
    float *v_s = k_s + BK * qp;
    float *q_s = v_s + BK * dp;
    float *do_s = q_s + BQ * qp;
    float *p_s = do_s + BQ * dp;
    float *ds_s = p_s + BK * sp;
    float *lse_s = ds_s + BK * sp;
    float *delta_s = lse_s + BQ;
    const int sj = t % 16, si = t / 16; /* score micro-tile */
    const int aj = t / 32, ae = t % 32; /* accumulators */
    const int64_t total = a.batch * g.heads_kv * k_tiles;
    const int64_t o = a.seq_kv - a.seq_q;

    for (int64_t w = blockIdx.x; w < total; w += gridDim.x) {
        const int64_t bhk = w / k_tiles, j0 = (w - bhk * k_tiles) * BK;
        const int64_t hk = bhk % g.heads_kv, b = bhk / g.heads_kv;
        const int64_t j_last = (j0 + BK < a.seq_kv ? j0 + BK : a.seq_kv) - 1;

        __syncthreads(); /* the previous work item's readers of shared memory are done */
        att_stage<DT>(k_s, qp, (const char *)a.k + (b * a.ks[0] + hk * a.ks[1]) * EB, a.ks[2], j0, BK, a.seq_kv,
                      D, a.vec_kv);
        att_stage<DT>(v_s, dp, (const char *)a.v + (b * a.vs[0] + hk * a.vs[1]) * EB, a.vs[2], j0, BK, a.seq_kv,
                      Dv, a.vec_kv);

        /* the queries that can see a key of the tile: lo(i) <= j_last and hi(i) >= j0 */
        int64_t i_begin = a.window_right < 0 ? 0 : j0 - o - a.window_right;
        int64_t i_end = a.window_left < 0 ? a.seq_q - 1 : j_last - o + a.window_left;
        i_begin = i_begin > 0 ? i_begin : 0;
        i_end = i_end < a.seq_q - 1 ? i_end : a.seq_q - 1;

        float acc_k[RA][U], acc_v[RA][U];
#pragma unroll
        for (int c = 0; c < RA; c++)
#pragma unroll
            for (int u = 0; u < U; u++)
                acc_k[c][u] = acc_v[c][u] = 0.0f;

        for (int64_t h = hk * a.group; h < (hk + 1) * a.group; h++) {
            const int64_t bh = b * a.heads_q + h;
            const char *qb = (const char *)a.q + (b * a.qs[0] + h * a.qs[1]) * EB;
            const char *dob = (const char *)g.dout + (b * g.dos[0] + h * g.dos[1]) * EB;
            for (int64_t i0 = i_begin; i0 <= i_end; i0 += BQ) {
                __syncthreads(); /* K and V are in; the last tile's readers are done */
                att_stage<DT>(q_s, qp, qb, a.qs[2], i0, BQ, i_end + 1, D, a.vec_q);
                att_stage<DT>(do_s, dp, dob, g.dos[2], i0, BQ, i_end + 1, Dv, g.vec_dout);
                for (int r = t; r < BQ; r += BWD_THREADS) {
                    const int64_t i = i0 + r;
                    lse_s[r] = i <= i_end ? g.lse[bh * a.seq_q + i] : -INFINITY;
                    delta_s[r] = i <= i_end ? g.delta[bh * a.seq_q + i] : 0.0f;
                }
                __syncthreads();

                /* S and dP of the micro-tile, each an fmaf chain over the features, ascending */
                float s[RJ][RI], dpv[RJ][RI];
#pragma unroll
                for (int c = 0; c < RJ; c++)
#pragma unroll
                    for (int r = 0; r < RI; r++)
                        s[c][r] = dpv[c][r] = 0.0f;
#pragma unroll 4
                for (int d = 0; d < D; d++) {
                    float x[RJ], y[RI];
#pragma unroll
                    for (int c = 0; c < RJ; c++)
                        x[c] = k_s[(sj + 16 * c) * qp + d];
#pragma unroll
                    for (int r = 0; r < RI; r++)
                        y[r] = q_s[(si + 16 * r) * qp + d];
#pragma unroll
                    for (int c = 0; c < RJ; c++)
#pragma unroll
                        for (int r = 0; r < RI; r++)
                            s[c][r] = fmaf(y[r], x[c], s[c][r]);
                }
#pragma unroll 4
                for (int e = 0; e < Dv; e++) {
                    float x[RJ], y[RI];
#pragma unroll
                    for (int c = 0; c < RJ; c++)
                        x[c] = v_s[(sj + 16 * c) * dp + e];
#pragma unroll
                    for (int r = 0; r < RI; r++)
                        y[r] = do_s[(si + 16 * r) * dp + e];
#pragma unroll
                    for (int c = 0; c < RJ; c++)
#pragma unroll
                        for (int r = 0; r < RI; r++)
                            dpv[c][r] = fmaf(y[r], x[c], dpv[c][r]);
                }
                /* P and dU, 0 where the pair is invisible (as OpenCL's skip) */
#pragma unroll
                for (int r = 0; r < RI; r++) {
                    const int64_t i = i0 + si + 16 * r;
                    const bool row_ok = i <= i_end;
                    const float l = lse_s[si + 16 * r], dl = delta_s[si + 16 * r];
                    const int64_t lo = att_lo(a, i), hi = att_hi(a, i), bias_row = att_bias_row(a, b, h, i);
                    const uint8_t *mask_row = row_ok ? att_mask_row(a, b, h, i) : nullptr;
#pragma unroll
                    for (int c = 0; c < RJ; c++) {
                        const int64_t j = j0 + sj + 16 * c;
                        float p = 0.0f, du = 0.0f;
                        if (row_ok && j <= j_last && l != -INFINITY && att_visible(j, lo, hi, mask_row)) {
                            float slope;
                            const float sc = bwd_score(a, s[c][r], j, bias_row, &slope);
                            p = expf(sc - l);
                            du = p * (dpv[c][r] - dl) * slope;
                        }
                        p_s[(sj + 16 * c) * sp + si + 16 * r] = p;
                        ds_s[(sj + 16 * c) * sp + si + 16 * r] = du;
                    }
                }
                __syncthreads();

                /* dv += P^T dout, dk += dU^T q over the tile's queries, ascending */
                const int nq = i_end - i0 + 1 < BQ ? (int)(i_end - i0 + 1) : BQ;
                for (int ii = 0; ii < nq; ii++) {
                    float dov[U], qv[U];
#pragma unroll
                    for (int u = 0; u < U; u++) {
                        const int col = ae + 32 * u;
                        dov[u] = col < Dv ? do_s[ii * dp + col] : 0.0f;
                        qv[u] = col < D ? q_s[ii * qp + col] : 0.0f;
                    }
#pragma unroll
                    for (int c = 0; c < RA; c++) {
                        const float p = p_s[(aj + 8 * c) * sp + ii], du = ds_s[(aj + 8 * c) * sp + ii];
#pragma unroll
                        for (int u = 0; u < U; u++) {
                            acc_v[c][u] = fmaf(p, dov[u], acc_v[c][u]);
                            acc_k[c][u] = fmaf(du, qv[u], acc_k[c][u]);
                        }
                    }
                }
            }
        }

        /* every key of the tile is written (zeros where no query saw it) */
#pragma unroll
        for (int c = 0; c < RA; c++) {
            const int64_t j = j0 + aj + 8 * c;
            if (j >= a.seq_kv)
                continue;
            char *kr = (char *)g.dk + (b * g.dks[0] + hk * g.dks[1] + j * g.dks[2]) * EB;
            char *vr = (char *)g.dv + (b * g.dvs[0] + hk * g.dvs[1] + j * g.dvs[2]) * EB;
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int col = ae + 32 * u;
                if (col < D)
                    Elem<DT>::st(kr, col, acc_k[c][u] * a.scale);
                if (col < Dv)
                    Elem<DT>::st(vr, col, acc_v[c][u]);
            }
        }
    }
}

/* ---- dq and dk, dv a thread per row / key (where no tile fits): OpenCL's kernels ---- */

template <int DT>
__device__ __forceinline__ float bwd_dot(const char *x, const char *y, int n)
{
    float acc = 0.0f;
    for (int d = 0; d < n; d++)
        acc = fmaf(Elem<DT>::ld(x, d), Elem<DT>::ld(y, d), acc);
    return acc;
}

template <int DT>
__global__ void __launch_bounds__(BWD_ROW_THREADS) bwd_dq_rows(const rdg_att_args a, const BwdArgs g, int64_t rows)
{
    constexpr int EB = att_elem_bytes<DT>();
    const int D = a.d, Dv = a.dv;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t row = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; row < rows; row += step) {
        const int64_t i = row % a.seq_q, bh = row / a.seq_q;
        const int64_t h = bh % a.heads_q, b = bh / a.heads_q, hk = h / a.group;
        const char *qr = (const char *)a.q + (b * a.qs[0] + h * a.qs[1] + i * a.qs[2]) * EB;
        const char *dor = (const char *)g.dout + (b * g.dos[0] + h * g.dos[1] + i * g.dos[2]) * EB;
        const char *kb = (const char *)a.k + (b * a.ks[0] + hk * a.ks[1]) * EB;
        const char *vb = (const char *)a.v + (b * a.vs[0] + hk * a.vs[1]) * EB;
        const uint8_t *mask_row = att_mask_row(a, b, h, i);
        const int64_t bias_row = att_bias_row(a, b, h, i);
        const float l = g.lse[row], dl = g.delta[row];
        float acc[RUDNN_ATTENTION_MAX_HEAD_DIM];
        for (int d = 0; d < D; d++)
            acc[d] = 0.0f;
        int64_t lo = att_lo(a, i), hi = att_hi(a, i);
        lo = lo > 0 ? lo : 0;
        hi = hi < a.seq_kv - 1 ? hi : a.seq_kv - 1;
        for (int64_t j = lo; l != -INFINITY && j <= hi; j++) {
            if (!att_visible(j, lo, hi, mask_row))
                continue;
            const char *kr = kb + j * a.ks[2] * EB;
            float slope;
            const float s = bwd_score(a, bwd_dot<DT>(qr, kr, D), j, bias_row, &slope);
            const float p = expf(s - l);
            const float du = p * (bwd_dot<DT>(dor, vb + j * a.vs[2] * EB, Dv) - dl) * slope;
            for (int d = 0; d < D; d++)
                acc[d] = fmaf(du, Elem<DT>::ld(kr, d), acc[d]);
        }
        char *out = (char *)g.dq + (b * g.dqs[0] + h * g.dqs[1] + i * g.dqs[2]) * EB;
        for (int d = 0; d < D; d++)
            Elem<DT>::st(out, d, acc[d] * a.scale);
    }
}

template <int DT>
__global__ void __launch_bounds__(BWD_ROW_THREADS) bwd_dkv_rows(const rdg_att_args a, const BwdArgs g, int64_t keys)
{
    constexpr int EB = att_elem_bytes<DT>();
    const int D = a.d, Dv = a.dv;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; id < keys; id += step) {
        const int64_t j = id % a.seq_kv, bhk = id / a.seq_kv;
        const int64_t hk = bhk % g.heads_kv, b = bhk / g.heads_kv;
        const char *kr = (const char *)a.k + (b * a.ks[0] + hk * a.ks[1] + j * a.ks[2]) * EB;
        const char *vr = (const char *)a.v + (b * a.vs[0] + hk * a.vs[1] + j * a.vs[2]) * EB;
        float acc_k[RUDNN_ATTENTION_MAX_HEAD_DIM], acc_v[RUDNN_ATTENTION_MAX_HEAD_DIM];
        for (int d = 0; d < D; d++)
            acc_k[d] = 0.0f;
        for (int d = 0; d < Dv; d++)
            acc_v[d] = 0.0f;
        for (int64_t h = hk * a.group; h < (hk + 1) * a.group; h++) {
            for (int64_t i = 0; i < a.seq_q; i++) {
                int64_t lo = att_lo(a, i), hi = att_hi(a, i);
                lo = lo > 0 ? lo : 0;
                hi = hi < a.seq_kv - 1 ? hi : a.seq_kv - 1;
                if (!att_visible(j, lo, hi, att_mask_row(a, b, h, i)))
                    continue;
                const int64_t row = (b * a.heads_q + h) * a.seq_q + i;
                const float l = g.lse[row];
                if (l == -INFINITY)
                    continue;
                const char *qr = (const char *)a.q + (b * a.qs[0] + h * a.qs[1] + i * a.qs[2]) * EB;
                const char *dor = (const char *)g.dout + (b * g.dos[0] + h * g.dos[1] + i * g.dos[2]) * EB;
                float slope;
                const float s = bwd_score(a, bwd_dot<DT>(qr, kr, D), j, att_bias_row(a, b, h, i), &slope);
                const float p = expf(s - l);
                const float du = p * (bwd_dot<DT>(dor, vr, Dv) - g.delta[row]) * slope;
                for (int d = 0; d < Dv; d++)
                    acc_v[d] = fmaf(p, Elem<DT>::ld(dor, d), acc_v[d]);
                for (int d = 0; d < D; d++)
                    acc_k[d] = fmaf(du, Elem<DT>::ld(qr, d), acc_k[d]);
            }
        }
        char *ko = (char *)g.dk + (b * g.dks[0] + hk * g.dks[1] + j * g.dks[2]) * EB;
        char *vo = (char *)g.dv + (b * g.dvs[0] + hk * g.dvs[1] + j * g.dvs[2]) * EB;
        for (int d = 0; d < D; d++)
            Elem<DT>::st(ko, d, acc_k[d] * a.scale);
        for (int d = 0; d < Dv; d++)
            Elem<DT>::st(vo, d, acc_v[d]);
    }
}

/* ---- host ---- */

typedef void (*bwd_fn)(const rdg_att_args, const BwdArgs, int64_t);

/* A tiled kernel's choice: its function, outer tile (rows of dq, keys of dk, dv a CTA) and shared
 * memory (fn NULL: none fits). */
struct TiledChoice {
    bwd_fn fn;
    int outer;
    size_t smem;
};

template <int DT, int DMAX, bool SMALL>
bwd_fn tiled_fn(bool dkv)
{
    constexpr int O = tile_outer(DMAX, SMALL), I = tile_inner(DMAX, SMALL);
    return dkv ? bwd_dkv_tiled<DT, DMAX, O, I> : bwd_dq_tiled<DT, DMAX, O, I>;
}

template <int DT, bool SMALL>
bwd_fn tiled_fn_dmax(int dmax, bool dkv)
{
    return dmax == 64 ? tiled_fn<DT, 64, SMALL>(dkv) : dmax == 128 ? tiled_fn<DT, 128, SMALL>(dkv)
                                                                   : tiled_fn<DT, 256, SMALL>(dkv);
}

bwd_fn tiled_fn_of(rudnn_dtype_t dt, int dmax, bool small, bool dkv)
{
    if (dt == RUDNN_F32)
        return small ? tiled_fn_dmax<RUDNN_F32, true>(dmax, dkv) : tiled_fn_dmax<RUDNN_F32, false>(dmax, dkv);
    if (dt == RUDNN_F16)
        return small ? tiled_fn_dmax<RUDNN_F16, true>(dmax, dkv) : tiled_fn_dmax<RUDNN_F16, false>(dmax, dkv);
    return small ? tiled_fn_dmax<RUDNN_BF16, true>(dmax, dkv) : tiled_fn_dmax<RUDNN_BF16, false>(dmax, dkv);
}

/* The tiled dq (dkv false) or dk, dv kernel for plan on dev: the large tiles, else the small
 * ones, else none (the file comment's layouts). */
TiledChoice tiled_choice(const rdg_devinfo_t *dev, const rudnn_attention_plan_t *plan, bool dkv)
{
    TiledChoice c = {nullptr, 0, 0};
    if (dev->max_threads > 0 && dev->max_threads < BWD_THREADS)
        return c;
    const int64_t dm = plan->head_dim > plan->head_dim_v ? plan->head_dim : plan->head_dim_v;
    const int dmax = dm <= 64 ? 64 : dm <= 128 ? 128 : 256;
    const size_t rowf = (size_t)odd_pitch((int)plan->head_dim) + (size_t)odd_pitch((int)plan->head_dim_v);
    for (int small = 0; small < 2; small++) {
        const size_t outer = (size_t)tile_outer(dmax, small), inner = (size_t)tile_inner(dmax, small);
        const size_t floats = (outer + inner) * rowf +
                              (dkv ? 2 * outer * (inner + 1) + 2 * inner : outer * (inner + 1) + 2 * outer);
        if (floats * sizeof(float) <= dev->smem_optin) {
            c.fn = tiled_fn_of(plan->dtype, dmax, small != 0, dkv);
            c.outer = (int)outer;
            c.smem = floats * sizeof(float);
            return c;
        }
    }
    return c;
}

template <int DT>
void rows_fns(bwd_fn *delta, bwd_fn *dq, bwd_fn *dkv)
{
    *delta = bwd_delta_kernel<DT>;
    *dq = bwd_dq_rows<DT>;
    *dkv = bwd_dkv_rows<DT>;
}

/* One launch of fn on `blocks` CTAs of `threads` (capped: the kernels loop over their work); none
 * when there is nothing to do. */
rudnn_status_t launch(rdg_queue_t *q, bwd_fn fn, const rdg_att_args &a, const BwdArgs &g, int64_t blocks,
                      int threads, size_t smem, int64_t arg, const char *what)
{
    if (blocks <= 0)
        return RUDNN_STATUS_SUCCESS;
    TRY(rdg_att_allow_smem(q, (const void *)fn, smem));
    const int64_t grid = blocks < ATT_MAX_GRID ? blocks : ATT_MAX_GRID;
    fn<<<dim3((unsigned)grid), dim3((unsigned)threads), smem, q->stream>>>(a, g, arg);
    return rdg_launched(what);
}

} // namespace

rudnn_status_t rdg_attention_backward_workspace(void *device, const rudnn_attention_plan_t *plan, size_t *bytes)
{
    (void)device;
    /* Delta, FP32 per query row */
    *bytes = (size_t)plan->batch * (size_t)plan->heads_q * (size_t)plan->seq_q * sizeof(float);
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rdg_attention_backward(void *queue, const rudnn_attention_plan_t *plan,
                                      const rudnn_attention_backward_operands_t *ops)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    TRY(rdg_use_device(q->dev.index));
    rdg_att_args a;
    rdg_att_make_args(plan, ops->q, ops->k, ops->v, ops->mask, ops->bias, ops->out, ops->lse, &a);
    const size_t elem = plan->dtype == RUDNN_F32 ? 4 : 2;
    BwdArgs g;
    memset(&g, 0, sizeof g);
    g.dout = rdg_at(ops->dout);
    g.dq = rdg_at(ops->dq);
    g.dk = rdg_at(ops->dk);
    g.dv = rdg_at(ops->dv);
    g.delta = (float *)rdg_at(ops->workspace);
    g.lse = (const float *)rdg_at(ops->lse);
    for (int s = 0; s < 3; s++) {
        g.dos[s] = ops->dout_stride[s];
        g.dqs[s] = ops->dq_stride[s];
        g.dks[s] = ops->dk_stride[s];
        g.dvs[s] = ops->dv_stride[s];
    }
    g.heads_kv = plan->heads_kv;
    g.vec_dout = rdg_att_vec_ok(g.dout, ops->dout_stride, plan->head_dim_v, elem);

    const int64_t rows = plan->batch * plan->heads_q * plan->seq_q;
    const int64_t keys = plan->batch * plan->heads_kv * plan->seq_kv;
    bwd_fn delta_fn, dq_rows_fn, dkv_rows_fn;
    if (plan->dtype == RUDNN_F32)
        rows_fns<RUDNN_F32>(&delta_fn, &dq_rows_fn, &dkv_rows_fn);
    else if (plan->dtype == RUDNN_F16)
        rows_fns<RUDNN_F16>(&delta_fn, &dq_rows_fn, &dkv_rows_fn);
    else
        rows_fns<RUDNN_BF16>(&delta_fn, &dq_rows_fn, &dkv_rows_fn);
    const TiledChoice dq = tiled_choice(&q->dev, plan, false), dkv = tiled_choice(&q->dev, plan, true);

    /* rows and keys of the thread-per-row kernels; work items (tiles) of the tiled ones */
    const int64_t row_blocks = rdg_ceil_div(rows, BWD_ROW_THREADS), key_blocks = rdg_ceil_div(keys, BWD_ROW_THREADS);
    rdg_note_kernel(ATT_BWD_NAME);
    TRY(launch(q, delta_fn, a, g, row_blocks, BWD_ROW_THREADS, 0, rows, ATT_BWD_NAME " delta"));
    if (dq.fn) {
        const int64_t q_tiles = rdg_ceil_div(plan->seq_q, dq.outer);
        TRY(launch(q, dq.fn, a, g, plan->batch * plan->heads_q * q_tiles, BWD_THREADS, dq.smem, q_tiles,
                   ATT_BWD_NAME " dq"));
    } else {
        TRY(launch(q, dq_rows_fn, a, g, row_blocks, BWD_ROW_THREADS, 0, rows, ATT_BWD_NAME " dq, a thread per row"));
    }
    if (dkv.fn) {
        const int64_t k_tiles = rdg_ceil_div(plan->seq_kv, dkv.outer);
        return launch(q, dkv.fn, a, g, plan->batch * plan->heads_kv * k_tiles, BWD_THREADS, dkv.smem, k_tiles,
                      ATT_BWD_NAME " dk, dv");
    }
    return launch(q, dkv_rows_fn, a, g, key_blocks, BWD_ROW_THREADS, 0, keys, ATT_BWD_NAME " dk, dv, a thread per key");
}
