/* paged_attention.mla_mma (CUDA only, sm_80+): MLA over a paged latent cache on mma.sync m16n8k16
 * with FP32 accumulation, F16/BF16, R 512 and P 64 (DeepSeek's shapes), 16-byte aligned operands.
 * score = scale (q . latent + qp . kp), value = latent; one latent head for all H query heads.
 *   - one CTA per (row chunk, split, query block), 8 warps; its rows are the H heads of the block's
 *     queries (row r: query r / H, head r % H), 16 (one m16 tile: H 16 decode) or 64 (four:
 *     H 128, or several H 16 queries) a CTA; each staged latent row serves every row;
 *   - a key's latent row and its rope part are staged once, side by side (one 1152-byte row),
 *     with 16-byte cp.async into a ring; S reads all 576 columns, P V the first 512 (value =
 *     latent);
 *   - S = Q K^T over the 36 k16 steps: warps split the k steps (and, with 64 rows, the rows), each
 *     writes its partial S in FP32 to shared memory;
 *   - softmax: 256 / rows threads a row add the partials, mask (the row's limit), and keep the
 *     row's online softmax (base 2); P goes to shared memory in the dtype, alpha beside it;
 *   - O += P V: the 16 x 512 (or 64 x 512) accumulator is split by columns, 64 a warp, each warp
 *     reading P of all rows and its 64 columns of the latent tile; a step whose keys some row sees
 *     only in part, with a non-finite latent value there, runs on the SIMT cores with each row's
 *     own mask (as in paged_attention_mma.cu).
 * Three barriers a tile (landed, S partials, P). Shared memory (MlaShape offsets): Q [rows][1168]
 * | MmaRow [rows] | S partials [KG][rows][TK + 8] FP32 | P [rows][TK + 8] dtype | alpha, m, l
 * [rows] | ring [stages][TK][1168]. The 1168-byte pitch (73 units of 16) puts the 8 rows of an
 * ldmatrix in distinct banks, as do the partials' pitch for the quad pattern of the fragments. */
#include <stdio.h>
#include <string.h>

#include "rdg_internal.h"

#include "mma_sync.cuh"
#include "paged_attention.cuh"
#include "paged_attention_tuning.h"

static_assert(PA_MAX_STAGES >= 2 && PA_MAX_STAGES <= 8, "rdg_copy_async_wait_n covers 0 .. 6 pending groups");

namespace {

constexpr int MLA_R = 512, MLA_P = 64;                     /* the shapes this kernel takes */
constexpr int KD = MLA_R + MLA_P;                          /* S's depth */
constexpr int KSTEPS = KD / 16;                            /* its k16 steps */
constexpr int PITCH = KD * 2 + 16;                         /* bytes a staged Q or key row */
constexpr int CHUNKS = KD * 2 / 16, R_CHUNKS = MLA_R * 2 / 16; /* 16-byte chunks a row, of them the latent's */
constexpr int NT = PA_MLA_WARPS * 32;
constexpr int CW = MLA_R / PA_MLA_WARPS; /* output columns a warp */
static_assert(CW % 16 == 0 && PITCH / 16 % 2 == 1, "whole pairs of n8 tiles a warp, an odd pitch in 16-byte units");

struct MlaShape {
    int chunks, stages;
    int off_rows, off_s, off_p, off_stats, off_ring;
};

struct MlaConfig {
    MlaShape s;
    int mt;   /* m16 tiles of rows: 1 or 4 */
    int kind; /* the query blocks' kind */
    size_t smem;
    int64_t items;
};

/* The tile for MT m16 tiles of rows: TK keys staged a tile; the S warp grid, MW row tiles a warp, RG
 * row groups, KG groups of k steps. */
template <int MT>
struct MlaGrid {
    static constexpr int TK = MT == 1 ? PA_MLA_KEYS : PA_MLA_WIDE_KEYS;
    static constexpr int SP = TK + 8;      /* floats a partial S row: conflict-free float2 stores of the quads */
    static constexpr int PP = TK * 2 + 16; /* bytes a P row (odd units of 16: ldmatrix) */
    static constexpr int MW = MT == 1 ? 1 : 2, RG = MT / MW, KG = PA_MLA_WARPS / RG;
    static constexpr int RM = 16 * MT, TPR = NT / RM, KPT = TK / TPR; /* softmax: threads a row, keys a thread */
    static_assert(TK % 16 == 0 && PP / 16 % 2 == 1, "whole k16 steps of keys, an odd P pitch");
    static_assert(PA_MLA_WARPS % RG == 0 && NT % RM == 0 && TK % TPR == 0 && KPT % 2 == 0, "MLA grid");
};

/* Keys j0 .. j0 + TK - 1 (at or past k1 zero-filled) into a ring slot: each row's latent
 * chunks then its rope chunks. Latent: thread -> (chunk c, rows r0 + RPP n), one division placing
 * its first row in a page, later rows stepping within it (a table read only where a row enters
 * another page: paged_attention_mma.cu's mma_stage); rope: one row a thread. A division and a
 * table read per 16-byte chunk made staging most of the kernel's instructions. */
template <int TK>
__device__ __forceinline__ void mla_stage(const PaDev &d, const int32_t *table, int64_t j0, int k1, unsigned char *slot)
{
    constexpr int RPP = NT / R_CHUNKS, P_CHUNKS = CHUNKS - R_CHUNKS;
    static_assert(NT % R_CHUNKS == 0 && TK % RPP == 0, "whole latent rows a pass");
    const int tid = (int)threadIdx.x;
    const int64_t left = k1 - j0; /* rows r below this hold keys */
    const uint32_t ps = (uint32_t)d.page_size;
    {
        const int c = tid % R_CHUNKS, r0 = tid / R_CHUNKS;
        const char *base = (const char *)d.k + c * 16;
        uint32_t pi = pa_div(d.ps, (uint32_t)j0 + r0), sl = (uint32_t)j0 + r0 - pi * ps;
        const char *src = base;
        auto enter = [&](int r) { /* row r's address (past k1: the base, never read) */
            src = r < left ? base + ((int64_t)table[pi] * ps + sl) * (MLA_R * 2) : base;
        };
        enter(r0);
#pragma unroll
        for (int n = 0; n < TK / RPP; n++) {
            const int r = r0 + n * RPP;
            rdg_copy16_async_zfill(slot + r * PITCH + c * 16, src, r < left);
            if (n + 1 < TK / RPP) {
                sl += RPP;
                if (sl < ps && r + RPP < left) {
                    src += RPP * (MLA_R * 2);
                } else {
                    while (sl >= ps) { /* once where page_size >= RPP */
                        sl -= ps;
                        pi++;
                    }
                    enter(r + RPP);
                }
            }
        }
    }
    auto rope = [&](int e) {
        const int c = e % P_CHUNKS, r = e / P_CHUNKS;
        const bool ok = r < left;
        const int64_t row = ok ? pa_row(d, table, (int)(j0 + r)) : 0;
        rdg_copy16_async_zfill(slot + r * PITCH + (R_CHUNKS + c) * 16,
                               (const char *)d.kp + row * (MLA_P * 2) + c * 16, ok);
    };
    if constexpr (NT / P_CHUNKS >= TK) { /* the rope parts in one pass */
        if (tid < TK * P_CHUNKS)
            rope(tid);
    } else {
        for (int e = tid; e < TK * P_CHUNKS; e += NT)
            rope(e);
    }
}

/* The CTA's Q rows (q then qp, raw; zeros past nrows) and their PaRow. */
template <int RM>
__device__ __forceinline__ void mla_load_rows(const PaDev &d, const rudnn_paged_block_t &b, int rc, int nrows, int k0,
                                              int k1, unsigned char *q_sm, PaRow *rows)
{
    const int tid = (int)threadIdx.x, H = d.heads_q;
    for (int e = tid; e < RM * CHUNKS; e += NT) {
        const int r = e / CHUNKS, c = e - r * CHUNKS;
        uint4 x = make_uint4(0u, 0u, 0u, 0u);
        if (r < nrows) {
            const int br = rc * RM + r, qi = br / H;
            const int64_t qh = ((int64_t)b.q0 + qi) * H + (br - qi * H);
            x = c < R_CHUNKS ? *(const uint4 *)((const char *)d.q + qh * (MLA_R * 2) + c * 16)
                             : *(const uint4 *)((const char *)d.qp + qh * (MLA_P * 2) + (c - R_CHUNKS) * 16);
        }
        *(uint4 *)(q_sm + r * PITCH + c * 16) = x;
    }
    if (tid < RM) {
        PaRow rw = {0, 0, 0, 0};
        if (tid < nrows) {
            const int br = rc * RM + tid, qi = br / H;
            rw.i = b.q0 + qi;
            rw.h = br - qi * H;
            rw.lim = pa_lim(d, rw.i, k0, k1);
        }
        rows[tid] = rw;
    }
}

/* Partial S of warp (rg, kg): rows 16 MW rg .. of the tile, all TK keys, k steps of group kg,
 * into sp [kg][row][key]. Warps whose rows are all past nrows skip (their rows are masked). */
template <int DT, int MT>
__device__ __forceinline__ void mla_scores(const unsigned char *q_sm, const unsigned char *slot, float *sp, int nrows,
                                           int warp, int lane)
{
    using Gr = MlaGrid<MT>;
    constexpr int TK = Gr::TK, SP = Gr::SP;
    const int rg = warp / Gr::KG, kg = warp % Gr::KG, g = lane / 4, t = lane % 4, r0 = 16 * Gr::MW * rg;
    if (r0 >= nrows)
        return;
    const uint32_t qa = rdg_smem_addr(q_sm) + (uint32_t)((r0 + (lane % 8) + 8 * ((lane / 8) % 2)) * PITCH +
                                                         16 * (lane / 16));
    const uint32_t ka = rdg_smem_addr(slot) +
                        (uint32_t)(((lane % 8) + 8 * (lane / 16)) * PITCH + 16 * ((lane / 8) % 2));
    float sc[Gr::MW][TK / 8][4];
#pragma unroll
    for (int mi = 0; mi < Gr::MW; mi++)
#pragma unroll
        for (int n = 0; n < TK / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                sc[mi][n][e] = 0.0f;
    const int ks1 = (kg + 1) * KSTEPS / Gr::KG;
    for (int kk = kg * KSTEPS / Gr::KG; kk < ks1; kk++) {
        uint32_t af[Gr::MW][4];
#pragma unroll
        for (int mi = 0; mi < Gr::MW; mi++)
            rdg_ldsm_x4(qa + (uint32_t)(mi * 16 * PITCH) + kk * 32, af[mi]);
#pragma unroll
        for (int kb = 0; kb < TK / 16; kb++) {
            uint32_t bf[4];
            rdg_ldsm_x4(ka + (uint32_t)(kb * 16 * PITCH) + kk * 32, bf);
#pragma unroll
            for (int mi = 0; mi < Gr::MW; mi++) {
                mma16816<DT>(sc[mi][2 * kb], af[mi], bf[0], bf[1]);
                mma16816<DT>(sc[mi][2 * kb + 1], af[mi], bf[2], bf[3]);
            }
        }
    }
#pragma unroll
    for (int mi = 0; mi < Gr::MW; mi++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float *row = sp + ((size_t)kg * Gr::RM + r0 + 16 * mi + g + 8 * h) * SP;
#pragma unroll
            for (int n = 0; n < TK / 8; n++)
                *(float2 *)(row + 8 * n + 2 * t) = make_float2(sc[mi][n][2 * h], sc[mi][n][2 * h + 1]);
        }
}

/* A row's online softmax, kept by its TPR threads (each holds the same m, l): this thread's KPT
 * keys of the tile from the partials, masked at the row's limit; P to p_sm, alpha to al. */
template <int DT, int MT>
struct MlaSoftmax {
    float m = -INFINITY, l = 0.0f;

    __device__ __forceinline__ void tile(const float *sp, unsigned char *p_sm, float *al, int lim, int64_t j0,
                                         float scale_log2)
    {
        using Gr = MlaGrid<MT>;
        constexpr int TK = Gr::TK, SP = Gr::SP, PP = Gr::PP;
        const int tid = (int)threadIdx.x, row = tid / Gr::TPR, k0 = (tid % Gr::TPR) * Gr::KPT;
        const int64_t left = lim - j0;
        const int rel = left < 0 ? 0 : left > TK ? TK : (int)left; /* the row's limit in the tile */
        float x[Gr::KPT];
        float mt = -INFINITY;
#pragma unroll
        for (int u = 0; u < Gr::KPT; u += 2) {
            float2 s = make_float2(0.0f, 0.0f);
#pragma unroll
            for (int kg = 0; kg < Gr::KG; kg++) {
                const float2 v = *(const float2 *)(sp + ((size_t)kg * Gr::RM + row) * SP + k0 + u);
                s.x += v.x;
                s.y += v.y;
            }
            x[u] = k0 + u < rel ? s.x * scale_log2 : -INFINITY;
            x[u + 1] = k0 + u + 1 < rel ? s.y * scale_log2 : -INFINITY;
            mt = fmaxf(mt, fmaxf(x[u], x[u + 1]));
        }
#pragma unroll
        for (int o = 1; o < Gr::TPR; o <<= 1)
            mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
        const float m_new = fmaxf(m, mt);
        const float alpha = m_new == -INFINITY ? 1.0f : exp2f(m - m_new); /* never exp2(-inf - -inf) */
        float sum = 0.0f;
        uint32_t *prow = (uint32_t *)(p_sm + row * PP) + k0 / 2;
#pragma unroll
        for (int u = 0; u < Gr::KPT; u += 2) {
            const float p0 = pa_weight(x[u], m_new), p1 = pa_weight(x[u + 1], m_new);
            sum += p0 + p1;
            prow[u / 2] = pa_pack2<DT>(p0, p1);
        }
#pragma unroll
        for (int o = 1; o < Gr::TPR; o <<= 1)
            sum += __shfl_xor_sync(0xffffffffu, sum, o);
        l = l * alpha + sum;
        m = m_new;
        if (tid % Gr::TPR == 0)
            al[row] = alpha;
    }
};

/* Warp w's 64 output columns of every row tile: rescaled by alpha, then += P V over the tile. */
template <int DT, int MT>
struct MlaOut {
    static constexpr int TK = MlaGrid<MT>::TK, PP = MlaGrid<MT>::PP;
    float acc[MT][CW / 8][4];

    __device__ __forceinline__ void init(void)
    {
#pragma unroll
        for (int mi = 0; mi < MT; mi++)
#pragma unroll
            for (int n = 0; n < CW / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    acc[mi][n][e] = 0.0f;
    }

    /* j0 the tile's first key, k1 the CTA's end, cmin the rows' smallest nonzero limit (keys from
     * it on are not seen by every row). */
    __device__ __forceinline__ void tile(const unsigned char *p_sm, const float *al, const unsigned char *slot,
                                         const PaRow *rows, int64_t j0, int k1, int cmin, int nrows, int warp,
                                         int lane)
    {
        const int g = lane / 4;
#pragma unroll
        for (int mi = 0; mi < MT; mi++) {
            if (16 * mi < nrows) {
                const float a0 = al[16 * mi + g], a1 = al[16 * mi + g + 8];
#pragma unroll
                for (int n = 0; n < CW / 8; n++) {
                    acc[mi][n][0] *= a0;
                    acc[mi][n][1] *= a0;
                    acc[mi][n][2] *= a1;
                    acc[mi][n][3] *= a1;
                }
            }
        }
        const uint32_t pa = rdg_smem_addr(p_sm) +
                            (uint32_t)(((lane % 8) + 8 * ((lane / 8) % 2)) * PP + 16 * (lane / 16));
        const uint32_t va = rdg_smem_addr(slot) + (uint32_t)(((lane % 8) + 8 * ((lane / 8) % 2)) * PITCH +
                                                             16 * (lane / 16) + warp * CW * 2);
#pragma unroll
        for (int kq = 0; kq < TK / 16; kq++) {
            /* where some row sees only part of the step's keys and the warp's columns of them hold a
             * non-finite value, the step on the SIMT cores (the MMA would give that row 0 x NaN) */
            const int64_t ks = j0 + 16 * kq, ke = ks + 16 < k1 ? ks + 16 : k1;
            const unsigned char *vk = slot + kq * 16 * PITCH + warp * CW * 2;
            if (cmin < ke && !pa_finite16<DT>(vk, PITCH, CW / 8, lane)) {
                pv_masked(p_sm, vk, rows, ks, 16 * kq, nrows, lane);
                continue;
            }
            uint32_t af[MT][4];
#pragma unroll
            for (int mi = 0; mi < MT; mi++)
                if (16 * mi < nrows)
                    rdg_ldsm_x4(pa + (uint32_t)(mi * 16 * PP) + kq * 32, af[mi]);
#pragma unroll
            for (int np = 0; np < CW / 16; np++) {
                uint32_t bv[4];
                rdg_ldsm_x4_trans(va + (uint32_t)(kq * 16 * PITCH) + np * 32, bv);
#pragma unroll
                for (int mi = 0; mi < MT; mi++)
                    if (16 * mi < nrows) {
                        mma16816<DT>(acc[mi][2 * np], af[mi], bv[0], bv[1]);
                        mma16816<DT>(acc[mi][2 * np + 1], af[mi], bv[2], bv[3]);
                    }
            }
        }
    }

    /* acc += P V over 16 keys (ks the first, column k0 of P; vk their rows at the warp's columns),
     * each row only over the keys it sees. */
    __device__ __forceinline__ void pv_masked(const unsigned char *p_sm, const unsigned char *vk, const PaRow *rows,
                                              int64_t ks, int k0, int nrows, int lane)
    {
        const int g = lane / 4, t = lane % 4;
#pragma unroll
        for (int mi = 0; mi < MT; mi++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int r = 16 * mi + g + 8 * h;
                if (16 * mi >= nrows)
                    continue;
                const int64_t left = rows[r].lim - ks;
                const int seen = left < 0 ? 0 : left > 16 ? 16 : (int)left;
                const uint16_t *prow = (const uint16_t *)(p_sm + r * PP) + k0;
                for (int kk = 0; kk < seen; kk++) {
                    const float p = pa_half<DT>(prow[kk]);
                    const uint16_t *vr = (const uint16_t *)(vk + kk * PITCH);
#pragma unroll
                    for (int n = 0; n < CW / 8; n++)
#pragma unroll
                        for (int e = 0; e < 2; e++)
                            acc[mi][n][2 * h + e] = fmaf(p, pa_half<DT>(vr[8 * n + 2 * t + e]), acc[mi][n][2 * h + e]);
                }
            }
    }

    /* The warp's columns of rows below nrows: to out (divided by l), or the split's partials. */
    __device__ __forceinline__ void store(const PaDev &d, const PaRow *rows, const float *fm, const float *fl,
                                          int nrows, int split, int warp, int lane)
    {
        const int g = lane / 4, t = lane % 4;
#pragma unroll
        for (int mi = 0; mi < MT; mi++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int r = 16 * mi + g + 8 * h;
                if (r >= nrows)
                    continue;
                const PaRow rw = rows[r];
                const int c0 = warp * CW + 2 * t;
                if (d.splits > 1) {
                    float *o = pa_ws_acc(d, split, rw.i, rw.h) + c0;
#pragma unroll
                    for (int n = 0; n < CW / 8; n++)
                        *(float2 *)(o + 8 * n) = make_float2(acc[mi][n][2 * h], acc[mi][n][2 * h + 1]);
                    if (warp == 0 && t == 0)
                        pa_put_ml(d, split, rw.i, rw.h, fm[r], fl[r]);
                } else {
                    const float inv = fl[r] != 0.0f ? 1.0f / fl[r] : 0.0f;
                    uint32_t *o = (uint32_t *)((uint16_t *)d.out + ((int64_t)rw.i * d.heads_q + rw.h) * MLA_R + c0);
#pragma unroll
                    for (int n = 0; n < CW / 8; n++)
                        o[4 * n] = pa_pack2<DT>(acc[mi][n][2 * h] * inv, acc[mi][n][2 * h + 1] * inv);
                }
            }
    }
};

/* Work items (row chunk, split, block) in a grid-stride loop, the row chunk fastest (the chunks of
 * one query read the same latent rows at about the same time). */
template <int DT, int MT>
__global__ void RDG_LAUNCH_BOUNDS(NT, 1) mla_kernel(const PaDev d, const MlaShape s)
{
    extern __shared__ __align__(16) unsigned char pa_smem[];
    using Gr = MlaGrid<MT>;
    constexpr int RM = Gr::RM, TK = Gr::TK;
    const int tid = (int)threadIdx.x, lane = tid % 32, warp = tid / 32;
    unsigned char *q_sm = pa_smem, *p_sm = pa_smem + s.off_p, *ring = pa_smem + s.off_ring;
    PaRow *rows = (PaRow *)(pa_smem + s.off_rows);
    float *sp = (float *)(pa_smem + s.off_s);
    float *al = (float *)(pa_smem + s.off_stats), *fm = al + RM, *fl = fm + RM;
    const int64_t items = (int64_t)s.chunks * d.splits * d.nblocks;
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const int rc = (int)(item % s.chunks);
        const int64_t rest = item / s.chunks;
        const int split = (int)(rest % d.splits);
        const rudnn_paged_block_t b = d.blocks[rest / d.splits];
        const int nrows = min(RM, b.nq * d.heads_q - rc * RM);
        if (nrows <= 0)
            continue; /* uniform over the CTA */
        int k0, k1;
        pa_split_range(d, d.causal ? b.kv_causal : d.seq_len[b.seq], split, &k0, &k1);
        const int ntiles = k1 > k0 ? (int)(((int64_t)k1 - k0 + TK - 1) / TK) : 0;
        const int32_t *table = d.pages + d.seq_table[b.seq];

        const int stage_bytes = TK * PITCH;
        __syncthreads(); /* the previous item's readers of shared memory are done */
        for (int t = 0; t < s.stages - 1; t++) { /* the ring's first tiles load with the rows */
            if (t < ntiles)
                mla_stage<TK>(d, table, k0 + (int64_t)t * TK, k1, ring + (t % s.stages) * stage_bytes);
            rdg_copy_async_commit();
        }
        mla_load_rows<RM>(d, b, rc, nrows, k0, k1, q_sm, rows);
        __syncthreads();

        const int lim = rows[tid / Gr::TPR].lim;
        int cmin = k1; /* the rows' smallest nonzero limit, in every lane */
        for (int r = lane; r < RM; r += 32)
            cmin = rows[r].lim > 0 ? min(cmin, rows[r].lim) : cmin;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1)
            cmin = min(cmin, __shfl_xor_sync(0xffffffffu, cmin, o));
        MlaSoftmax<DT, MT> sm;
        MlaOut<DT, MT> out;
        out.init();
        for (int t = 0; t < ntiles; t++) {
            rdg_copy_async_wait_n(s.stages - 2);
            __syncthreads(); /* tile t is in; tile t - 1's P V (its slot, P, alpha) is done */
            if (t + s.stages - 1 < ntiles)
                mla_stage<TK>(d, table, k0 + (int64_t)(t + s.stages - 1) * TK, k1,
                          ring + ((t + s.stages - 1) % s.stages) * stage_bytes);
            rdg_copy_async_commit();
            const unsigned char *slot = ring + (t % s.stages) * stage_bytes;
            mla_scores<DT, MT>(q_sm, slot, sp, nrows, warp, lane);
            __syncthreads(); /* the partials are in */
            sm.tile(sp, p_sm, al, lim, k0 + (int64_t)t * TK, d.scale_log2);
            __syncthreads(); /* P and alpha are in */
            out.tile(p_sm, al, slot, rows, k0 + (int64_t)t * TK, k1, cmin, nrows, warp, lane);
        }
        rdg_copy_async_wait_n(0);
        if (tid % Gr::TPR == 0) {
            fm[tid / Gr::TPR] = sm.m;
            fl[tid / Gr::TPR] = sm.l;
        }
        __syncthreads();
        out.store(d, rows, fm, fl, nrows, split, warp, lane);
    }
}

/* ------------------------------------------------------------------------------------- host */

typedef void (*mla_fn)(const PaDev, const MlaShape);

template <int DT>
mla_fn mla_kernel_of(int mt)
{
    return mt == 1 ? mla_kernel<DT, 1> : mla_kernel<DT, 4>;
}

/* The shared-memory layout for mt row tiles with `stages` ring slots; returns its bytes. */
template <int MT>
size_t mla_layout(MlaShape *s, int stages)
{
    using Gr = MlaGrid<MT>;
    s->stages = stages;
    s->off_rows = Gr::RM * PITCH;
    s->off_s = (int)pa_align16((size_t)s->off_rows + Gr::RM * sizeof(PaRow));
    s->off_p = s->off_s + Gr::KG * Gr::RM * Gr::SP * 4;
    s->off_stats = (int)pa_align16((size_t)s->off_p + Gr::RM * Gr::PP);
    s->off_ring = (int)pa_align16((size_t)s->off_stats + 3 * Gr::RM * 4);
    return (size_t)s->off_ring + (size_t)stages * Gr::TK * PITCH;
}

/* The kernel's shape for a call on dev, or why it does not take it (the one place it is chosen):
 * 16 rows a CTA (H <= 16 decode) or 64, from the plan's blocks; the stages from the shared memory
 * (one CTA an SM, PA_MLA_INFLIGHT_PER_SM in flight). */
const char *mla_config(const rdg_devinfo_t *dev, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o,
                       MlaConfig *c, char *why, size_t cap)
{
    memset(c, 0, sizeof *c);
    const rudnn_paged_layout_t &l = a->layout;
    if (!a->mla || a->dtype == RUDNN_F32 || dev->arch < 80) {
        snprintf(why, cap, "mma.sync needs F16 or BF16 MLA on sm_80+");
        return why;
    }
    if (a->head_dim != MLA_R || a->rope_dim != MLA_P) {
        snprintf(why, cap, "R %lld, P %lld: the tensor-core MLA kernel takes R %d, P %d", (long long)a->head_dim,
                 (long long)a->rope_dim, MLA_R, MLA_P);
        return why;
    }
    if (a->heads_q > PA_MMA_MAX_HEADS) {
        snprintf(why, cap, "%lld query heads: the tensor-core kernel's 32-bit row indices take %d",
                 (long long)a->heads_q, PA_MMA_MAX_HEADS);
        return why;
    }
    if (!pa_aligned16(rdg_at(o->q), rdg_at(o->qp), rdg_at(o->k), rdg_at(o->kp), rdg_at(o->out)) ||
        !pa_aligned16(rdg_at(o->workspace), nullptr, nullptr, nullptr, nullptr)) {
        snprintf(why, cap, "q, qp, caches and out must be 16-byte aligned for 16-byte copies");
        return why;
    }
    const int64_t H = a->heads_q;
    const int kind1 = pa_block_kind(16, H), kind4 = pa_block_kind(64, H);
    c->mt = H > 16 || l.block_count[kind4] * PA_MLA_BLOCK_RATIO <= l.block_count[kind1] ? 4 : 1;
    c->kind = c->mt == 4 ? kind4 : kind1;
    const int rm = 16 * c->mt;
    c->s.chunks = (int)rdg_ceil_div(((int64_t)1 << c->kind) * H, rm);
    const size_t stage = (size_t)(c->mt == 1 ? MlaGrid<1>::TK : MlaGrid<4>::TK) * PITCH;
    int stages = 1 + (int)rdg_ceil_div(PA_MLA_INFLIGHT_PER_SM, (int64_t)stage);
    stages = stages > PA_MAX_STAGES ? PA_MAX_STAGES : stages;
    for (; stages >= 2; stages--) {
        c->smem = c->mt == 1 ? mla_layout<1>(&c->s, stages) : mla_layout<4>(&c->s, stages);
        if (c->smem <= dev->smem_optin)
            break;
    }
    if (stages < 2) {
        snprintf(why, cap, "two latent stages and %d query rows exceed the device's shared memory (%zu bytes)", rm,
                 dev->smem_optin);
        return why;
    }
    c->items = c->s.chunks * (int64_t)(a->splits > 1 ? a->splits : 1) * l.block_count[c->kind];
    return nullptr;
}

} // namespace

const char *rdg_pa_mla_why(const rdg_devinfo_t *dev, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o,
                           char *why, size_t cap)
{
    MlaConfig c;
    return mla_config(dev, a, o, &c, why, cap);
}

rudnn_status_t rdg_pa_mla_run(rdg_queue_t *q, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o)
{
    MlaConfig c;
    char why[192];
    if (mla_config(&q->dev, a, o, &c, why, sizeof why))
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, PA_OP ": %s: %s", RUDNN_GPU_BACKEND_NAME, why);
    const PaDev d = pa_make_dev(a, o, c.kind);
    const mla_fn fn = a->dtype == RUDNN_F16 ? mla_kernel_of<RUDNN_F16>(c.mt) : mla_kernel_of<RUDNN_BF16>(c.mt);
    TRY(pa_allow_smem(q, (const void *)fn, c.smem));
    const int64_t grid = c.items < PA_MAX_GRID ? c.items : PA_MAX_GRID;
    if (grid > 0) {
        rdg_note_kernel(PA_MLA_NAME);
        fn<<<dim3((unsigned)grid), dim3(NT), c.smem, q->stream>>>(d, c.s);
        TRY(pa_launched(PA_MLA_NAME, grid, NT, c.smem));
    }
    return d.splits > 1 ? pa_run_merge(q, a, d) : RUDNN_STATUS_SUCCESS;
}
