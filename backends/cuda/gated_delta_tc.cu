/* The chunked gated delta rule on tensor cores (CUDA sm_80+, F16/BF16, chunks of 64, K and V of
 * 64 or 128): the WY form of hal/gated_delta.h in three launches, mma.sync m16n8k16 with FP32
 * accumulators, 16-bit operands staged by cp.async and read by ldmatrix.
 *   gated_delta.tc_prep   per (chunk, head), parallel: gamma; Lm from the Gram matrix K K^T;
 *                         T = (I + Lm)^-1 in FP32 by 16 x 16 blocks; W = T diag(beta e^gamma) K and
 *                         U = T diag(beta) V in the dtype (the FP32 T scaled before its rounding).
 *   gated_delta.tc_state  per (sequence, head, GDR_TC_STATE_COLS value columns), serial along the
 *                         chunks: the state S [K, cols] in FP32 accumulators; per chunk it is rounded to the dtype
 *                         once, stored as the chunk's snapshot and used for Delta = U - W S (written
 *                         over U), then S = e^gamma_last S + K^T (e^(gamma_last - gamma) Delta).
 *                         The next chunk's W, K, U stream in (cp.async, two stages) meanwhile.
 *   gated_delta.tc_out    per (chunk, head), parallel: O = scale (e^gamma Q S_snapshot + P Delta),
 *                         P = (Q K^T) e^(gamma_i - gamma_j) below and on the diagonal.
 * Padding rows of the last chunk are zero-filled (K, V, beta 0; decay 0), so they add nothing and
 * are never stored. */
#include <atomic>

#include "rdg_internal.h"
#include "elem.cuh"
#include "gated_delta.cuh"
#include "mma_sync.cuh"
#include "gated_delta_tuning.h"

namespace {

constexpr int CH = 64;      /* chunk rows (the only chunk size of this path) */
constexpr int THREADS = 128; /* 4 warps, 16 chunk rows each */
static_assert(GDR_TC_STATE_COLS % 16 == 0 && GDR_TC_STATE_COLS_FEW % 16 == 0, "tc_state: pairs of n8 tiles");
constexpr int PAD = 8;      /* 16 bytes of padding a staged row: ldmatrix rows in distinct banks */
constexpr int INV_BLK = 16; /* diagonal blocks of the triangular inverse */
static_assert(CH % INV_BLK == 0 && CH <= THREADS, "a thread a column of the diagonal blocks");

/* The scratch record of one (chunk, head), bytes: W [CH][KD], U / Delta [CH][VD], the state
 * snapshot [KD][VD] in the dtype, gamma [CH] FP32. */
template <int KD, int VD>
struct Rec {
    static constexpr size_t w = 0;
    static constexpr size_t u = w + (size_t)CH * KD * 2;
    static constexpr size_t s = u + (size_t)CH * VD * 2;
    static constexpr size_t gamma = s + (size_t)KD * VD * 2;
    static constexpr size_t bytes = gamma + CH * 4;
};

template <int DT>
__device__ __forceinline__ uint32_t pack2(float lo, float hi)
{
    if constexpr (DT == RUDNN_BF16)
        return rdg_pack_bf16x2(lo, hi);
    else
        return (uint32_t)rdg_f32_to_f16(lo) | (uint32_t)rdg_f32_to_f16(hi) << 16;
}

template <int DT>
__device__ __forceinline__ uint16_t to16(float x)
{
    if constexpr (DT == RUDNN_BF16)
        return rdg_f32_to_bf16(x);
    else
        return rdg_f32_to_f16(x);
}

/* Rows [0, CH) of WIDTH 16-bit elements from src (row r at src + r * stride elements; rows >= valid
 * zero-filled) into dst with a pitch of WIDTH + PAD elements. */
template <int WIDTH>
__device__ __forceinline__ void stage(uint16_t *dst, const uint16_t *src, int64_t stride, int64_t valid, int rows)
{
    constexpr int PER_ROW = WIDTH / 8;
    for (int e = threadIdx.x; e < rows * PER_ROW; e += THREADS) {
        const int r = e / PER_ROW, c = e % PER_ROW;
        const bool ok = r < valid;
        rdg_copy16_async_zfill(dst + r * (WIDTH + PAD) + c * 8, src + (ok ? r : 0) * stride + c * 8, ok);
    }
}

/* acc[NT][4] += A [16 rows at a_row0 of a (pitch ap)] x B^T, B stored [n][k] (rows of b, pitch bp):
 * KS steps of 16 along k (unrolled, so that fragments load ahead of the products), NT / 2 pairs of
 * n8 tiles from b's row 0. */
template <int DT, int NT, int KS>
__device__ __forceinline__ void mma_abt(float (&acc)[NT][4], const uint16_t *a, int ap, const uint16_t *b, int bp)
{
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int kk = 0; kk < KS; kk++) {
        uint32_t af[4];
        rdg_ldsm_x4(rdg_smem_addr(a + (lane % 16) * ap + kk * 16 + (lane / 16) * 8), af);
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            uint32_t bf[4];
            rdg_ldsm_x4(rdg_smem_addr(b + (np * 16 + (lane % 8) + (lane / 16) * 8) * bp + kk * 16 + ((lane / 8) % 2) * 8),
                        bf);
            mma16816<DT>(acc[2 * np], af, bf[0], bf[1]);
            mma16816<DT>(acc[2 * np + 1], af, bf[2], bf[3]);
        }
    }
}

/* acc[NT][4] += A [16 rows of a] x B, B stored [k][n] (rows of b, pitch bp), n from column 0. */
template <int DT, int NT, int KS>
__device__ __forceinline__ void mma_ab(float (&acc)[NT][4], const uint16_t *a, int ap, const uint16_t *b, int bp)
{
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int kk = 0; kk < KS; kk++) {
        uint32_t af[4];
        rdg_ldsm_x4(rdg_smem_addr(a + (lane % 16) * ap + kk * 16 + (lane / 16) * 8), af);
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            uint32_t bf[4];
            rdg_ldsm_x4_trans(
                rdg_smem_addr(b + (kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * bp + np * 16 + (lane / 16) * 8), bf);
            mma16816<DT>(acc[2 * np], af, bf[0], bf[1]);
            mma16816<DT>(acc[2 * np + 1], af, bf[2], bf[3]);
        }
    }
}

/* ---- tc_prep --------------------------------------------------------------------------------- */

template <int KD, int VD>
struct PrepSmem {
    static constexpr size_t ks = 0;
    static constexpr size_t vs = ks + (size_t)CH * (KD + PAD) * 2;
    static constexpr size_t lm = vs + (size_t)CH * (VD + PAD) * 2;
    static constexpr size_t tf = lm + (size_t)CH * (CH + 1) * 4;
    static constexpr size_t tw = tf + (size_t)CH * (CH + 1) * 4;
    static constexpr size_t tu = tw + (size_t)CH * (CH + PAD) * 2;
    static constexpr size_t gam = tu + (size_t)CH * (CH + PAD) * 2;
    static constexpr size_t bet = gam + CH * 4;
    static constexpr size_t bytes = bet + CH * 4;
};

template <int DT, int KD, int VD>
__global__ void __launch_bounds__(THREADS)
    tc_prep_kernel(const rudnn_gated_delta_plan_t p, const uint16_t *__restrict__ k, const uint16_t *__restrict__ v,
                   const void *__restrict__ beta, const float *__restrict__ decay, const void *__restrict__ table,
                   unsigned char *__restrict__ scratch)
{
    using R = Rec<KD, VD>;
    using M = PrepSmem<KD, VD>;
    extern __shared__ __align__(16) unsigned char sm[];
    uint16_t *Ks = (uint16_t *)(sm + M::ks), *Vs = (uint16_t *)(sm + M::vs);
    float *Lm = (float *)(sm + M::lm), *Tf = (float *)(sm + M::tf);
    uint16_t *Tw = (uint16_t *)(sm + M::tw), *Tu = (uint16_t *)(sm + M::tu);
    float *gam = (float *)(sm + M::gam), *bet = (float *)(sm + M::bet);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int64_t c = blockIdx.x, h = blockIdx.y;
    const SeqInfo si = seq_info(p, table, seq_of_chunk(p, table, c));
    const int64_t t0 = si.start + (c - si.chunk_first) * CH, b = si.batch;
    const int64_t L = min((int64_t)CH, si.start + si.length - t0);
    unsigned char *rec = scratch + (c * p.heads + h) * R::bytes;

    stage<KD>(Ks, k + tok(p.k_stride, b, h, t0), p.k_stride[2], L, CH);
    stage<VD>(Vs, v + tok(p.v_stride, b, h, t0), p.v_stride[2], L, CH);
    rdg_copy_async_commit();
    if (threadIdx.x < CH) {
        const int i = threadIdx.x;
        bet[i] = i < L ? Elem<DT>::ld(beta, tok(p.beta_stride, b, h, t0 + i)) : 0.0f;
        gam[i] = i < L ? decay[tok(p.decay_stride, b, h, t0 + i)] : 0.0f;
    }
    __syncthreads();
    if (threadIdx.x == 0) /* running sums: 64 adds */
        for (int i = 1; i < CH; i++)
            gam[i] += gam[i - 1];
    rdg_copy_async_wait_n(0);
    __syncthreads();

    /* Lm = beta_i e^(gamma_i - gamma_j) k_i . k_j below the diagonal */
    {
        float acc[CH / 8][4] = {};
        mma_abt<DT, CH / 8, KD / 16>(acc, Ks + warp * 16 * (KD + PAD), KD + PAD, Ks, KD + PAD);
#pragma unroll
        for (int nt = 0; nt < CH / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int i = warp * 16 + g + (e / 2) * 8, j = nt * 8 + 2 * t + (e % 2);
                Lm[i * (CH + 1) + j] = j < i ? bet[i] * expf(gam[i] - gam[j]) * acc[nt][e] : 0.0f;
            }
    }
    __syncthreads();
    /* T = (I + Lm)^-1 by blocks of 16: the diagonal blocks by forward substitution (a thread a
     * column: column j of a unit lower inverse needs only its own earlier rows), then block row by
     * block row T_ij = -T_ii sum_{j <= k < i} Lm_ik T_kj; Tw's bytes hold the sums meanwhile */
    if (threadIdx.x < CH) { /* the column in registers: its 16 rows, each a dot of loads in flight */
        const int j = threadIdx.x, b0 = (j / INV_BLK) * INV_BLK, c = j - b0;
        for (int i = 0; i < b0; i++)
            Tf[i * (CH + 1) + j] = 0.0f;
        float col[INV_BLK];
#pragma unroll
        for (int r = 0; r < INV_BLK; r++) {
            const float *lrow = Lm + (b0 + r) * (CH + 1) + b0;
            float val = r == c ? 1.0f : 0.0f;
#pragma unroll
            for (int m = 0; m < r; m++) /* col[m] is 0 above the diagonal (m < c), 1 on it */
                val -= lrow[m] * col[m];
            col[r] = r < c ? 0.0f : val;
            Tf[(b0 + r) * (CH + 1) + j] = col[r];
        }
    }
    __syncthreads();
    /* block row bi: a thread owns rows r0, r0 + 8 and column c of every block j < bi, so its sums run
     * side by side (T's blocks above the diagonal are 0: every sum may start at row 0) */
    float *Msum = (float *)Tw; /* [block j][16][16] */
    static_assert((CH / INV_BLK - 1) * INV_BLK * INV_BLK * 4 <= CH * (CH + PAD) * 2, "the sums fit Tw");
    static_assert(THREADS == 8 * INV_BLK, "a thread: two rows of a block");
    const int r0 = threadIdx.x / INV_BLK, cc = threadIdx.x % INV_BLK;
#pragma unroll
    for (int bi = 1; bi < CH / INV_BLK; bi++) {
        float acc[2][CH / INV_BLK - 1] = {};
        const float *l0 = Lm + (bi * INV_BLK + r0) * (CH + 1), *l1 = l0 + 8 * (CH + 1);
#pragma unroll 4
        for (int m = 0; m < bi * INV_BLK; m++) {
            const float a0 = l0[m], a1 = l1[m];
#pragma unroll
            for (int bj = 0; bj < bi; bj++) {
                const float t = Tf[m * (CH + 1) + bj * INV_BLK + cc];
                acc[0][bj] += a0 * t, acc[1][bj] += a1 * t;
            }
        }
#pragma unroll
        for (int bj = 0; bj < bi; bj++) {
            Msum[bj * INV_BLK * INV_BLK + r0 * INV_BLK + cc] = acc[0][bj];
            Msum[bj * INV_BLK * INV_BLK + (r0 + 8) * INV_BLK + cc] = acc[1][bj];
        }
        __syncthreads();
        float out[2][CH / INV_BLK - 1] = {};
        const float *d0 = Tf + (bi * INV_BLK + r0) * (CH + 1) + bi * INV_BLK, *d1 = d0 + 8 * (CH + 1);
#pragma unroll
        for (int m = 0; m < INV_BLK; m++) { /* T_ii is 0 above its diagonal */
            const float a0 = d0[m], a1 = d1[m];
#pragma unroll
            for (int bj = 0; bj < bi; bj++) {
                const float t = Msum[bj * INV_BLK * INV_BLK + m * INV_BLK + cc];
                out[0][bj] += a0 * t, out[1][bj] += a1 * t;
            }
        }
#pragma unroll
        for (int bj = 0; bj < bi; bj++) {
            Tf[(bi * INV_BLK + r0) * (CH + 1) + bj * INV_BLK + cc] = -out[0][bj];
            Tf[(bi * INV_BLK + r0 + 8) * (CH + 1) + bj * INV_BLK + cc] = -out[1][bj];
        }
        __syncthreads();
    }
    for (int e = threadIdx.x; e < CH * CH; e += THREADS) {
        const int i = e / CH, j = e % CH;
        const float tij = Tf[i * (CH + 1) + j];
        Tw[i * (CH + PAD) + j] = to16<DT>(tij * bet[j] * expf(gam[j]));
        Tu[i * (CH + PAD) + j] = to16<DT>(tij * bet[j]);
    }
    if (threadIdx.x < CH)
        ((float *)(rec + R::gamma))[threadIdx.x] = gam[threadIdx.x];
    __syncthreads();
    /* W = Tw K, U = Tu V, stored in the dtype */
    {
        float acc[KD / 8][4] = {};
        mma_ab<DT, KD / 8, CH / 16>(acc, Tw + warp * 16 * (CH + PAD), CH + PAD, Ks, KD + PAD);
        uint32_t *w = (uint32_t *)(rec + R::w);
#pragma unroll
        for (int nt = 0; nt < KD / 8; nt++) {
            const int i = warp * 16 + g, col = nt * 8 + 2 * t;
            w[(i * KD + col) / 2] = pack2<DT>(acc[nt][0], acc[nt][1]);
            w[((i + 8) * KD + col) / 2] = pack2<DT>(acc[nt][2], acc[nt][3]);
        }
    }
    {
        float acc[VD / 8][4] = {};
        mma_ab<DT, VD / 8, CH / 16>(acc, Tu + warp * 16 * (CH + PAD), CH + PAD, Vs, VD + PAD);
        uint32_t *u = (uint32_t *)(rec + R::u);
#pragma unroll
        for (int nt = 0; nt < VD / 8; nt++) {
            const int i = warp * 16 + g, col = nt * 8 + 2 * t;
            u[(i * VD + col) / 2] = pack2<DT>(acc[nt][0], acc[nt][1]);
            u[((i + 8) * VD + col) / 2] = pack2<DT>(acc[nt][2], acc[nt][3]);
        }
    }
}

/* ---- tc_state -------------------------------------------------------------------------------- */

template <int KD, int VD, int BV>
struct StateSmem {
    static constexpr size_t ws = 0; /* per stage: W, K, U slice, gamma */
    static constexpr size_t ks = ws + (size_t)CH * (KD + PAD) * 2;
    static constexpr size_t us = ks + (size_t)CH * (KD + PAD) * 2;
    static constexpr size_t gam = us + (size_t)CH * (BV + PAD) * 2;
    static constexpr size_t stage = gam + CH * 4;
    static constexpr size_t sb = 2 * stage; /* S in the dtype [KD][BV] */
    static constexpr size_t db = sb + (size_t)KD * (BV + PAD) * 2; /* scaled Delta [CH][BV] */
    static constexpr size_t bytes = db + (size_t)CH * (BV + PAD) * 2;
};

template <int DT, int KD, int VD, int BV>
__global__ void __launch_bounds__(THREADS)
    tc_state_kernel(const rudnn_gated_delta_plan_t p, const uint16_t *__restrict__ k,
                    const float *__restrict__ s_in, const void *__restrict__ table, unsigned char *__restrict__ scratch,
                    float *__restrict__ s_out)
{
    using R = Rec<KD, VD>;
    using M = StateSmem<KD, VD, BV>;
    constexpr int MT = KD / 64; /* m16 tiles of state rows a warp owns (KD / 4 rows) */
    constexpr int NT = BV / 8;
    extern __shared__ __align__(16) unsigned char sm[];
    uint16_t *Sb = (uint16_t *)(sm + M::sb), *Db = (uint16_t *)(sm + M::db);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int64_t h = blockIdx.y, c0 = (int64_t)blockIdx.x * BV;
    const SeqInfo si = seq_info(p, table, blockIdx.z);
    const int64_t b = si.batch, nch = si.chunks;
    const float *src = state_at(s_in, p, si.row, h);
    float *dst = (float *)state_at(s_out, p, si.row, h);

    float S[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = warp * (KD / 4) + mt * 16 + g + (e / 2) * 8, col = nt * 8 + 2 * t + (e % 2);
                S[mt][nt][e] = src[r * VD + c0 + col];
            }

    auto issue = [&](int64_t ci) {
        unsigned char *st = sm + (ci % 2) * M::stage;
        const int64_t c = si.chunk_first + ci, t0 = si.start + ci * CH;
        const int64_t L = min((int64_t)CH, si.start + si.length - t0);
        const unsigned char *rec = scratch + (c * p.heads + h) * R::bytes;
        stage<KD>((uint16_t *)(st + M::ws), (const uint16_t *)(rec + R::w), KD, CH, CH);
        stage<KD>((uint16_t *)(st + M::ks), k + tok(p.k_stride, b, h, t0), p.k_stride[2], L, CH);
        stage<BV>((uint16_t *)(st + M::us), (const uint16_t *)(rec + R::u) + c0, VD, CH, CH);
        for (int e = threadIdx.x; e < CH / 4; e += THREADS)
            rdg_copy16_async_zfill(st + M::gam + e * 16, rec + R::gamma + e * 16, true);
        rdg_copy_async_commit();
    };

    if (nch > 0)
        issue(0);
    for (int64_t ci = 0; ci < nch; ci++) {
        const bool more = ci + 1 < nch;
        if (more)
            issue(ci + 1);
        rdg_copy_async_wait_n(more ? 1 : 0);
        __syncthreads();
        const unsigned char *st = sm + (ci % 2) * M::stage;
        const uint16_t *Ws = (const uint16_t *)(st + M::ws), *Ks = (const uint16_t *)(st + M::ks);
        const uint16_t *Us = (const uint16_t *)(st + M::us);
        const float *gam = (const float *)(st + M::gam);
        const int64_t c = si.chunk_first + ci, t0 = si.start + ci * CH;
        const int L = (int)min((int64_t)CH, si.start + si.length - t0);
        unsigned char *rec = scratch + (c * p.heads + h) * R::bytes;

        /* the state entering the chunk, in the dtype: operand and snapshot */
        uint16_t *snap = (uint16_t *)(rec + R::s);
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int half = 0; half < 2; half++) {
                    const int r = warp * (KD / 4) + mt * 16 + g + half * 8, col = nt * 8 + 2 * t;
                    const uint32_t pair = pack2<DT>(S[mt][nt][2 * half], S[mt][nt][2 * half + 1]);
                    *(uint32_t *)(Sb + r * (BV + PAD) + col) = pair;
                    *(uint32_t *)(snap + r * VD + c0 + col) = pair;
                }
        __syncthreads();
        /* Delta = U - W S over the warp's 16 chunk rows; written over U; e^(gl - gamma) Delta to Db */
        const float gl = gam[L - 1];
        {
            float acc[NT][4] = {};
            mma_ab<DT, NT, KD / 16>(acc, Ws + warp * 16 * (KD + PAD), KD + PAD, Sb, BV + PAD);
            uint16_t *u = (uint16_t *)(rec + R::u);
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int half = 0; half < 2; half++) {
                    const int i = warp * 16 + g + half * 8, col = nt * 8 + 2 * t;
                    const uint32_t up = *(const uint32_t *)(Us + i * (BV + PAD) + col);
                    const float d0 = i < L ? Elem<DT>::ld(&up, 0) - acc[nt][2 * half] : 0.0f;
                    const float d1 = i < L ? Elem<DT>::ld(&up, 1) - acc[nt][2 * half + 1] : 0.0f;
                    *(uint32_t *)(u + i * VD + c0 + col) = pack2<DT>(d0, d1);
                    const float f = i < L ? expf(gl - gam[i]) : 0.0f;
                    *(uint32_t *)(Db + i * (BV + PAD) + col) = pack2<DT>(d0 * f, d1 * f);
                }
        }
        __syncthreads();
        /* S = e^gl S + K^T Db: A = K^T from the staged K rows (ldmatrix.trans) */
        const float decay_all = expf(gl);
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    S[mt][nt][e] *= decay_all;
            const int m0 = warp * (KD / 4) + mt * 16;
#pragma unroll
            for (int kk = 0; kk < CH / 16; kk++) {
                uint32_t af[4];
                rdg_ldsm_x4_trans(rdg_smem_addr(Ks + (kk * 16 + (lane % 8) + (lane / 16) * 8) * (KD + PAD) + m0 +
                                                ((lane / 8) % 2) * 8),
                                  af);
#pragma unroll
                for (int np = 0; np < NT / 2; np++) {
                    uint32_t bf[4];
                    rdg_ldsm_x4_trans(rdg_smem_addr(Db + (kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * (BV + PAD) +
                                                    np * 16 + (lane / 16) * 8),
                                      bf);
                    mma16816<DT>(S[mt][2 * np], af, bf[0], bf[1]);
                    mma16816<DT>(S[mt][2 * np + 1], af, bf[2], bf[3]);
                }
            }
        }
        __syncthreads(); /* the stage is refilled and Sb, Db rewritten by the next chunk */
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = warp * (KD / 4) + mt * 16 + g + (e / 2) * 8, col = nt * 8 + 2 * t + (e % 2);
                dst[r * VD + c0 + col] = S[mt][nt][e];
            }
}

/* ---- tc_out ---------------------------------------------------------------------------------- */

template <int KD, int VD>
struct OutSmem {
    static constexpr size_t qs = 0;
    static constexpr size_t ks = qs + (size_t)CH * (KD + PAD) * 2;
    static constexpr size_t ss = ks + (size_t)CH * (KD + PAD) * 2;
    static constexpr size_t ds = ss + (size_t)KD * (VD + PAD) * 2;
    static constexpr size_t pb = ds + (size_t)CH * (VD + PAD) * 2;
    static constexpr size_t gam = pb + (size_t)CH * (CH + PAD) * 2;
    static constexpr size_t bytes = gam + CH * 4;
};

template <int DT, int KD, int VD>
__global__ void __launch_bounds__(THREADS)
    tc_out_kernel(const rudnn_gated_delta_plan_t p, const uint16_t *__restrict__ q, const uint16_t *__restrict__ k,
                  const void *__restrict__ table, const unsigned char *__restrict__ scratch, void *__restrict__ out)
{
    using R = Rec<KD, VD>;
    using M = OutSmem<KD, VD>;
    extern __shared__ __align__(16) unsigned char sm[];
    uint16_t *Qs = (uint16_t *)(sm + M::qs), *Ks = (uint16_t *)(sm + M::ks), *Ss = (uint16_t *)(sm + M::ss);
    uint16_t *Ds = (uint16_t *)(sm + M::ds), *Pb = (uint16_t *)(sm + M::pb);
    float *gam = (float *)(sm + M::gam);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int64_t c = blockIdx.x, h = blockIdx.y;
    const SeqInfo si = seq_info(p, table, seq_of_chunk(p, table, c));
    const int64_t t0 = si.start + (c - si.chunk_first) * CH, b = si.batch;
    const int64_t L = min((int64_t)CH, si.start + si.length - t0);
    const unsigned char *rec = scratch + (c * p.heads + h) * R::bytes;

    stage<KD>(Qs, q + tok(p.q_stride, b, h, t0), p.q_stride[2], L, CH);
    stage<KD>(Ks, k + tok(p.k_stride, b, h, t0), p.k_stride[2], L, CH);
    stage<VD>(Ss, (const uint16_t *)(rec + R::s), VD, KD, KD);
    stage<VD>(Ds, (const uint16_t *)(rec + R::u), VD, CH, CH);
    for (int e = threadIdx.x; e < CH / 4; e += THREADS)
        rdg_copy16_async_zfill(sm + M::gam + e * 16, rec + R::gamma + e * 16, true);
    rdg_copy_async_commit();
    rdg_copy_async_wait_n(0);
    __syncthreads();

    /* P = (Q K^T) e^(gamma_i - gamma_j), j <= i: the warp's 16 rows */
    {
        float acc[CH / 8][4] = {};
        mma_abt<DT, CH / 8, KD / 16>(acc, Qs + warp * 16 * (KD + PAD), KD + PAD, Ks, KD + PAD);
#pragma unroll
        for (int nt = 0; nt < CH / 8; nt++)
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int i = warp * 16 + g + half * 8, j = nt * 8 + 2 * t;
                const float p0 = j <= i ? acc[nt][2 * half] * expf(gam[i] - gam[j]) : 0.0f;
                const float p1 = j + 1 <= i ? acc[nt][2 * half + 1] * expf(gam[i] - gam[j + 1]) : 0.0f;
                *(uint32_t *)(Pb + i * (CH + PAD) + j) = pack2<DT>(p0, p1);
            }
    }
    __syncwarp(); /* a warp reads back only its own rows of P */
    float acc[VD / 8][4] = {};
    mma_ab<DT, VD / 8, KD / 16>(acc, Qs + warp * 16 * (KD + PAD), KD + PAD, Ss, VD + PAD);
    const float e_lo = expf(gam[warp * 16 + g]), e_hi = expf(gam[warp * 16 + g + 8]);
#pragma unroll
    for (int nt = 0; nt < VD / 8; nt++)
        acc[nt][0] *= e_lo, acc[nt][1] *= e_lo, acc[nt][2] *= e_hi, acc[nt][3] *= e_hi;
    mma_ab<DT, VD / 8, CH / 16>(acc, Pb + warp * 16 * (CH + PAD), CH + PAD, Ds, VD + PAD);
#pragma unroll
    for (int nt = 0; nt < VD / 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int i = warp * 16 + g + (e / 2) * 8, col = nt * 8 + 2 * t + (e % 2);
            if (i < L)
                Elem<DT>::st(out, tok(p.o_stride, b, h, t0 + i) + col, p.query_scale * acc[nt][e]);
        }
}

/* ---- host ------------------------------------------------------------------------------------ */

/* The shared-memory limit of each kernel raised once per (kernel, device). */
rudnn_status_t allow_smem(const void *fn, std::atomic<int> *raised, int dev, size_t bytes)
{
    if (dev >= 0 && dev < 64 && raised[dev].load(std::memory_order_acquire))
        return RUDNN_STATUS_SUCCESS;
    const cudaError_t err = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (err != cudaSuccess)
        return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, "gated_delta.tc: shared memory opt-in");
    if (dev >= 0 && dev < 64)
        raised[dev].store(1, std::memory_order_release);
    return RUDNN_STATUS_SUCCESS;
}

template <int DT, int KD, int VD, int BV>
rudnn_status_t launch_state(rdg_queue_t *q, const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o)
{
    static std::atomic<int> raised[64];
    const size_t bytes = StateSmem<KD, VD, BV>::bytes;
    TRY(allow_smem((const void *)tc_state_kernel<DT, KD, VD, BV>, raised, q->dev.index, bytes));
    rdg_note_kernel("gated_delta.tc_state");
    tc_state_kernel<DT, KD, VD, BV><<<dim3(VD / BV, (unsigned)p->heads, (unsigned)p->sequences), THREADS, bytes,
                                      q->stream>>>(*p, (const uint16_t *)rdg_at(o->key),
                                                   (const float *)rdg_at(o->initial_state), rdg_at(o->table),
                                                   (unsigned char *)rdg_at(o->scratch), (float *)rdg_at(o->final_state));
    return rdg_launched("gated_delta.tc_state");
}

template <int DT, int KD, int VD>
rudnn_status_t launch(rdg_queue_t *q, const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o)
{
    static std::atomic<int> raised[2][64];
    TRY(allow_smem((const void *)tc_prep_kernel<DT, KD, VD>, raised[0], q->dev.index, PrepSmem<KD, VD>::bytes));
    TRY(allow_smem((const void *)tc_out_kernel<DT, KD, VD>, raised[1], q->dev.index, OutSmem<KD, VD>::bytes));
    unsigned char *scratch = (unsigned char *)rdg_at(o->scratch);
    const uint16_t *qp = (const uint16_t *)rdg_at(o->query), *kp = (const uint16_t *)rdg_at(o->key);
    rdg_note_kernel("gated_delta.tc_prep");
    tc_prep_kernel<DT, KD, VD><<<dim3((unsigned)p->chunks, (unsigned)p->heads), THREADS, PrepSmem<KD, VD>::bytes,
                                 q->stream>>>(*p, kp, (const uint16_t *)rdg_at(o->value), rdg_at(o->beta),
                                              (const float *)rdg_at(o->log_decay), rdg_at(o->table), scratch);
    TRY(rdg_launched("gated_delta.tc_prep"));
    /* the serial kernel: narrower column blocks where the wide ones would leave SMs idle */
    const int64_t wide_blocks = p->heads * p->sequences * (VD / GDR_TC_STATE_COLS);
    if (wide_blocks < (int64_t)q->dev.sm_count)
        TRY((launch_state<DT, KD, VD, GDR_TC_STATE_COLS_FEW>(q, p, o)));
    else
        TRY((launch_state<DT, KD, VD, GDR_TC_STATE_COLS>(q, p, o)));
    rdg_note_kernel("gated_delta.tc_out");
    tc_out_kernel<DT, KD, VD><<<dim3((unsigned)p->chunks, (unsigned)p->heads), THREADS, OutSmem<KD, VD>::bytes,
                                q->stream>>>(*p, qp, kp, rdg_at(o->table), scratch, rdg_at(o->output));
    return rdg_launched("gated_delta.tc_out");
}

template <int DT>
rudnn_status_t launch_dims(rdg_queue_t *q, const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o)
{
    if (p->key_dim == 128)
        return p->value_dim == 128 ? launch<DT, 128, 128>(q, p, o) : launch<DT, 128, 64>(q, p, o);
    return p->value_dim == 128 ? launch<DT, 64, 128>(q, p, o) : launch<DT, 64, 64>(q, p, o);
}

bool aligned_rows(const void *base, const int64_t stride[3])
{
    return (uintptr_t)base % 16 == 0 && stride[0] % 8 == 0 && stride[1] % 8 == 0 && stride[2] % 8 == 0;
}

} // namespace

int rdg_gdr_tc_plan_fits(const rdg_devinfo_t *dev, const rudnn_gated_delta_plan_t *p)
{
    return dev->arch >= 80 && (p->dtype == RUDNN_F16 || p->dtype == RUDNN_BF16) && p->chunk_size == CH &&
           (p->key_dim == 64 || p->key_dim == 128) && (p->value_dim == 64 || p->value_dim == 128) &&
           OutSmem<128, 128>::bytes <= dev->smem_optin &&
           StateSmem<128, 128, GDR_TC_STATE_COLS_FEW>::bytes <= dev->smem_optin &&
           StateSmem<128, 128, GDR_TC_STATE_COLS>::bytes <= dev->smem_optin &&
           PrepSmem<128, 128>::bytes <= dev->smem_optin;
}

size_t rdg_gdr_tc_scratch(const rudnn_gated_delta_plan_t *p)
{
    const size_t rec = (size_t)2 * (CH * p->key_dim + CH * p->value_dim + p->key_dim * p->value_dim) + CH * 4;
    return (size_t)p->chunks * (size_t)p->heads * rec;
}

int rdg_gdr_tc_fits(const rdg_devinfo_t *dev, const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o)
{
    return rdg_gdr_tc_plan_fits(dev, p) && aligned_rows(rdg_at(o->query), p->q_stride) &&
           aligned_rows(rdg_at(o->key), p->k_stride) && aligned_rows(rdg_at(o->value), p->v_stride) &&
           (uintptr_t)rdg_at(o->scratch) % 16 == 0;
}

rudnn_status_t rdg_gdr_tc_chunked(rdg_queue_t *q, const rudnn_gated_delta_plan_t *p,
                                  const rudnn_gated_delta_operands_t *o)
{
    return p->dtype == RUDNN_F16 ? launch_dims<RUDNN_F16>(q, p, o) : launch_dims<RUDNN_BF16>(q, p, o);
}
