/* The chunked gated delta rule on tensor cores (CUDA sm_80+, F16/BF16, chunks of 64, K and V of
 * 64 or 128): the WY form of hal/gated_delta.h in two launches (four where the state pass is cut
 * into segments), mma.sync m16n8k16 with FP32 accumulators, 16-bit operands staged by cp.async and
 * read by ldmatrix.
 *   gated_delta.tc_prep   per (chunk, head), parallel: gamma; Lm from the Gram matrix K K^T;
 *                         T = (I + Lm)^-1 in FP32 by 16 x 16 blocks; W = T diag(beta e^gamma) K and
 *                         U = T diag(beta) V in the dtype (the FP32 T scaled before its rounding).
 *   gated_delta.tc_state  per (segment, head, sequence), serial along the segment's chunks: the
 *                         whole state S [K, V] in FP32 accumulators of 16 warps; per chunk S is
 *                         rounded to the dtype once, Delta = U - W S, the output
 *                         O = scale (e^gamma Q S + P Delta) with P = (Q K^T) e^(gamma_i - gamma_j)
 *                         on and below the diagonal, then
 *                         S = e^gamma_last S + K^T (e^(gamma_last - gamma) Delta).
 *   gated_delta.tc_segment, tc_carry  where plan.segments > 1 (few sequences and heads): each segment
 *                         but the first from zero and its transition from I, side by side, then the
 *                         true entering states segment by segment (see the state pass below).
 * Padding rows of the last chunk are zero-filled (K, V, beta 0; decay 0), so they add nothing and
 * are never stored. */
#include <atomic>

#include "rdg_internal.h"
#include "elem.cuh"
#include "gated_delta.cuh"
#include "gated_delta_tc.cuh"
#include "mma_sync.cuh"
#include "pdl.cuh"
#include "gated_delta_tuning.h"

namespace {

constexpr int THREADS = 128; /* 4 warps, 16 chunk rows each */
constexpr int PAD = 8;      /* 16 bytes of padding a staged row: ldmatrix rows in distinct banks */
constexpr int INV_BLK = 16; /* diagonal blocks of the triangular inverse */
static_assert(CH % INV_BLK == 0 && CH <= THREADS, "a thread a column of the diagonal blocks");

template <int DT>
__device__ __forceinline__ uint32_t pack2(float lo, float hi)
{
    if constexpr (DT == RUDNN_BF16)
        return rdg_pack_bf16x2(lo, hi);
    else
        return (uint32_t)rdg_f32_to_f16(lo) | (uint32_t)rdg_f32_to_f16(hi) << 16;
}


/* Rows [0, CH) of WIDTH 16-bit elements from src (row r at src + r * stride elements; rows >= valid
 * zero-filled) into dst with a pitch of WIDTH + PAD elements. */
template <int WIDTH, int NTHREADS = THREADS>
__device__ __forceinline__ void stage(uint16_t *dst, const uint16_t *src, int64_t stride, int64_t valid, int rows)
{
    constexpr int PER_ROW = WIDTH / 8;
    for (int e = threadIdx.x; e < rows * PER_ROW; e += NTHREADS) {
        const int r = e / PER_ROW, c = e % PER_ROW;
        const bool ok = r < valid;
        rdg_copy16_async_zfill(dst + r * (WIDTH + PAD) + c * 8, src + (ok ? r : 0) * stride + c * 8, ok);
    }
}

/* acc[NT][4] += A [16 rows at a_row0 of a (pitch ap)] x B^T, B stored [n][k] (rows of b, pitch bp):
 * KS steps of 16 along k (unrolled, so that fragments load ahead of the products), the first
 * pairs (warp-uniform, at most NT / 2) of n8 tiles from b's row 0. */
template <int DT, int NT, int KS>
__device__ __forceinline__ void mma_abt(float (&acc)[NT][4], const uint16_t *a, int ap, const uint16_t *b, int bp,
                                        int pairs = NT / 2)
{
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int kk = 0; kk < KS; kk++) {
        uint32_t af[4];
        rdg_ldsm_x4(rdg_smem_addr(a + (lane % 16) * ap + kk * 16 + (lane / 16) * 8), af);
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            if (np >= pairs)
                break;
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

/* dst [CH][N] (16-bit pairs) = A [the warp's 16 rows of CH] x B [CH][N] (staged rows of N + PAD), in
 * pieces of at most 64 columns, with A = T diag(scale) built in registers: T the warp's 16 FP32 rows
 * (pitch tp, even, so that a lane's column pairs load as float2), each entry scaled by its column's
 * factor and rounded to the dtype once. */
template <int DT, int N>
__device__ __forceinline__ void prep_product_f32(const float *T, int tp, const float *scale, const uint16_t *b,
                                                 uint32_t *dst)
{
    constexpr int PIECE = N < 64 ? N : 64;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    uint32_t af[CH / 16][4];
#pragma unroll
    for (int kk = 0; kk < CH / 16; kk++) {
        const int c = kk * 16 + 2 * t;
        const float2 s0 = *(const float2 *)(scale + c), s1 = *(const float2 *)(scale + c + 8);
        const float2 v0 = *(const float2 *)(T + g * tp + c), v1 = *(const float2 *)(T + (g + 8) * tp + c);
        const float2 v2 = *(const float2 *)(T + g * tp + c + 8), v3 = *(const float2 *)(T + (g + 8) * tp + c + 8);
        af[kk][0] = pack2<DT>(v0.x * s0.x, v0.y * s0.y);
        af[kk][1] = pack2<DT>(v1.x * s0.x, v1.y * s0.y);
        af[kk][2] = pack2<DT>(v2.x * s1.x, v2.y * s1.y);
        af[kk][3] = pack2<DT>(v3.x * s1.x, v3.y * s1.y);
    }
#pragma unroll 1 /* one piece at a time: the registers of 4 blocks an SM */
    for (int c0 = 0; c0 < N; c0 += PIECE) {
        float acc[PIECE / 8][4] = {};
#pragma unroll
        for (int kk = 0; kk < CH / 16; kk++)
#pragma unroll
            for (int np = 0; np < PIECE / 16; np++) {
                uint32_t bf[4];
                rdg_ldsm_x4_trans(rdg_smem_addr(b + (kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * (N + PAD) + c0 +
                                                np * 16 + (lane / 16) * 8),
                                  bf);
                mma16816<DT>(acc[2 * np], af[kk], bf[0], bf[1]);
                mma16816<DT>(acc[2 * np + 1], af[kk], bf[2], bf[3]);
            }
#pragma unroll
        for (int nt = 0; nt < PIECE / 8; nt++) {
            const int i = warp * 16 + g, col = c0 + nt * 8 + 2 * t;
            dst[(i * N + col) / 2] = pack2<DT>(acc[nt][0], acc[nt][1]);
            dst[((i + 8) * N + col) / 2] = pack2<DT>(acc[nt][2], acc[nt][3]);
        }
    }
}

template <int KD, int VD>
struct PrepSmem {
    static constexpr size_t ks = 0;
    static constexpr size_t k_bytes = (size_t)CH * (KD + PAD) * 2, v_bytes = (size_t)CH * (VD + PAD) * 2;
    /* V staged over K once W is made: 37 KB a block, not 55, for more blocks an SM */
    static constexpr size_t vs = ks;
    /* Lm, then the inverse T over it (in place) */
    static constexpr size_t lm = ks + (k_bytes > v_bytes ? k_bytes : v_bytes);
    /* Lm's pitch in floats: the float2 pairs of the A fragments built from T, conflict-free */
    static constexpr int lp = CH + 8;
    static constexpr size_t gam = lm + (size_t)CH * lp * 4;
    static constexpr size_t bet = gam + CH * 4;
    static constexpr size_t colw = bet + CH * 4; /* beta_j e^gamma_j: W's column factors */
    static constexpr size_t bytes = colw + CH * 4;
};

static_assert((PrepSmem<128, 128>::bytes + 1024) * GDR_TC_PREP_BLOCKS <= 233472, "tc_prep's blocks an SM");

template <int DT, int KD, int VD>
__global__ void __launch_bounds__(THREADS, GDR_TC_PREP_BLOCKS)
    tc_prep_kernel(const rudnn_gated_delta_plan_t p, const uint16_t *__restrict__ k, const uint16_t *__restrict__ v,
                   const void *__restrict__ beta, const float *__restrict__ decay, const void *__restrict__ table,
                   unsigned char *__restrict__ scratch)
{
    using R = Rec<KD, VD>;
    using M = PrepSmem<KD, VD>;
    extern __shared__ __align__(16) unsigned char sm[];
    uint16_t *Ks = (uint16_t *)(sm + M::ks), *Vs = (uint16_t *)(sm + M::vs);
    float *Lm = (float *)(sm + M::lm), *Tf = Lm; /* T replaces Lm entry by entry */
    constexpr int LP = M::lp;
    float *gam = (float *)(sm + M::gam), *bet = (float *)(sm + M::bet), *colw = (float *)(sm + M::colw);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int64_t c = blockIdx.x, h = blockIdx.y;
    const SeqInfo si = seq_info(p, table, seq_of_chunk(p, table, c));
    const int64_t t0 = si.start + (c - si.chunk_first) * CH, b = si.batch;
    const int64_t L = min((int64_t)CH, si.start + si.length - t0);
    unsigned char *rec = scratch + (c * p.heads + h) * R::bytes;

    stage<KD>(Ks, k + tok(p.k_stride, b, h, t0), p.k_stride[2], L, CH);
    rdg_copy_async_commit();
    if (threadIdx.x < CH) {
        const int i = threadIdx.x;
        bet[i] = i < L ? Elem<DT>::ld(beta, tok(p.beta_stride, b, h, t0 + i)) : 0.0f;
        gam[i] = i < L ? decay[tok(p.decay_stride, b, h, t0 + i)] : 0.0f;
    }
    __syncthreads();
    static_assert(CH == 64, "the running sum: two entries a lane of one warp");
    if (warp == 0) { /* running sums of the decays: an inclusive scan over the lanes' pairs */
        const float a = gam[2 * lane], pair = a + gam[2 * lane + 1];
        float run = pair;
#pragma unroll
        for (int off = 1; off < 32; off *= 2) {
            const float y = __shfl_up_sync(0xffffffffu, run, off);
            run += lane >= off ? y : 0.0f;
        }
        gam[2 * lane] = run - pair + a, gam[2 * lane + 1] = run;
        __syncwarp();
        colw[2 * lane] = bet[2 * lane] * __expf(gam[2 * lane]);
        colw[2 * lane + 1] = bet[2 * lane + 1] * __expf(gam[2 * lane + 1]);
    }
    rdg_copy_async_wait_n(0);
    __syncthreads();

    /* Lm = beta_i e^(gamma_i - gamma_j) k_i . k_j below the diagonal */
    {
        /* The lower triangle's 10 n16 column pairs (row block rb has rb + 1) over the 4 warps, 3 / 3 /
         * 2 / 2: warp w its own row block's pairs [0, na) and row block rbb's [pb0, pb1); the pairs
         * right of the diagonal are its own row block's zeros. (Each warp its own row block's, 1 / 2 /
         * 3 / 4, left three waiting at the barrier on the fourth: H100, B 1 / H 8 / T 32768 0.451 ->
         * 0.444 ms, bench/RESULTS.md.) */
        const int na = warp == 0 || warp == 3 ? 1 : 2;
        const int rbb = warp == 3 ? 2 : 3, pb0 = warp == 1 ? 1 : 2;
        const int pb1 = warp == 0 ? 4 : warp == 1 ? 2 : warp == 3 ? 3 : pb0;
#pragma unroll 1
        for (int job = 0; job < 2; job++) {
            const int rb = job ? rbb : warp, p0 = job ? pb0 : 0, np = job ? pb1 - pb0 : na;
            if (np <= 0)
                continue;
            float acc[4][4] = {};
            mma_abt<DT, 4, KD / 16>(acc, Ks + rb * 16 * (KD + PAD), KD + PAD, Ks + p0 * 16 * (KD + PAD), KD + PAD, np);
#pragma unroll
            for (int nt = 0; nt < 4; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int i = rb * 16 + g + (e / 2) * 8, j = p0 * 16 + nt * 8 + 2 * t + (e % 2);
                    if (nt < 2 * np)
                        Lm[i * LP + j] = j < i ? bet[i] * __expf(gam[i] - gam[j]) * acc[nt][e] : 0.0f;
                }
        }
        for (int nt = 2 * (warp + 1); nt < CH / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                Lm[(warp * 16 + g + (e / 2) * 8) * LP + nt * 8 + 2 * t + (e % 2)] = 0.0f;
    }
    __syncthreads();
    /* T = (I + Lm)^-1 by blocks of 16, in place over Lm: the diagonal blocks by forward
     * substitution (a thread a column: column j of a unit lower inverse needs only its own earlier
     * rows), then block row by block row T_ij = -T_ii sum_{j <= k < i} Lm_ik T_kj. Above the
     * diagonal blocks Lm's zeros are T's; a block row's Lm is read before its T is written. */
    float col[INV_BLK]; /* the column in registers: its 16 rows, each a dot of loads in flight */
    const int jc = threadIdx.x, b0 = (jc / INV_BLK) * INV_BLK, cj = jc - b0;
    if (threadIdx.x < CH) {
#pragma unroll
        for (int r = 0; r < INV_BLK; r++) {
            const float *lrow = Lm + (b0 + r) * LP + b0;
            float val = r == cj ? 1.0f : 0.0f;
#pragma unroll
            for (int m = 0; m < r; m++) /* col[m] is 0 above the diagonal (m < cj), 1 on it */
                val -= lrow[m] * col[m];
            col[r] = r < cj ? 0.0f : val;
        }
    }
    __syncthreads(); /* every column read its block's Lm */
    if (threadIdx.x < CH) {
#pragma unroll
        for (int r = 0; r < INV_BLK; r++)
            Tf[(b0 + r) * LP + jc] = col[r];
    }
    __syncthreads();
    /* block row bi on tensor cores at about FP32's precision (3xTF32): a warp an n8 tile of its
     * columns [0, 16 bi): X = Lm_i,[0,16bi) T_[0,16bi),tile (T is 0 above its diagonal blocks, so the
     * sum starts at the tile's block), then T_i,tile = -T_ii X, X passed from the accumulator's
     * layout to the operand's by shuffles. Every warp reads Lm's block row before any writes T's. */
#pragma unroll
    for (int bi = 1; bi < CH / INV_BLK; bi++) {
        float x[2][4] = {}; /* X of the warp's tiles warp and warp + 4 */
#pragma unroll
        for (int w = 0; w < 2; w++) {
            const int nt = warp + 4 * w;
            if (nt >= 2 * bi)
                continue;
            const float *lr = Lm + (bi * INV_BLK + g) * LP;
#pragma unroll
            for (int ks = (nt / 2) * 2; ks < 2 * bi; ks++) {
                const float a[4] = {lr[ks * 8 + t], lr[8 * LP + ks * 8 + t], lr[ks * 8 + t + 4],
                                    lr[8 * LP + ks * 8 + t + 4]};
                const float *bc = Tf + (ks * 8 + t) * LP + nt * 8 + g;
                mma1688_3xtf32(x[w], a, bc[0], bc[4 * LP]);
            }
        }
        __syncthreads(); /* Lm's block row read by every warp */
#pragma unroll
        for (int w = 0; w < 2; w++) {
            const int nt = warp + 4 * w;
            if (nt >= 2 * bi)
                continue;
            /* operand [k][n] = X[k][g] from the lane holding row k % 8, column pair g / 2 */
            float xb[4];
#pragma unroll
            for (int q = 0; q < 4; q++) { /* rows t, t + 4, 8 + t, 12 + t */
                const int src = ((q % 2) * 4 + t) * 4 + g / 2;
                const float lo = __shfl_sync(0xffffffffu, x[w][(q / 2) * 2], src);
                const float hi = __shfl_sync(0xffffffffu, x[w][(q / 2) * 2 + 1], src);
                xb[q] = g % 2 ? hi : lo;
            }
            float o[4] = {};
            const float *dr = Tf + (bi * INV_BLK + g) * LP + bi * INV_BLK;
#pragma unroll
            for (int ks = 0; ks < 2; ks++) {
                const float a[4] = {dr[ks * 8 + t], dr[8 * LP + ks * 8 + t], dr[ks * 8 + t + 4],
                                    dr[8 * LP + ks * 8 + t + 4]};
                mma1688_3xtf32(o, a, xb[2 * ks], xb[2 * ks + 1]);
            }
            float *tr = Tf + (bi * INV_BLK + g) * LP + nt * 8 + 2 * t;
            tr[0] = -o[0], tr[1] = -o[1], tr[8 * LP] = -o[2], tr[8 * LP + 1] = -o[3];
        }
        __syncthreads(); /* block row bi of T written */
    }
    if (threadIdx.x < CH)
        ((float *)(rec + R::gamma))[threadIdx.x] = gam[threadIdx.x];
    /* W = T diag(colw) K, U = T diag(beta) V: the A fragments scaled and rounded from T itself */
    prep_product_f32<DT, KD>(Tf + warp * 16 * LP, LP, colw, Ks, (uint32_t *)(rec + R::w));
    __syncthreads(); /* every warp done with K: V over it */
    stage<VD>(Vs, v + tok(p.v_stride, b, h, t0), p.v_stride[2], L, CH);
    rdg_copy_async_commit();
    rdg_copy_async_wait_n(0);
    __syncthreads();
    prep_product_f32<DT, VD>(Tf + warp * 16 * LP, LP, bet, Vs, (uint32_t *)(rec + R::u));
}

/* ---- the state pass: tc_state, and its segments ---------------------------------------------- */

constexpr int PASS_THREADS = 32 * GDR_TC_PASS_WARPS; /* 4 quarters of the rows x PASS_COL_SPLIT of the columns */
constexpr int PASS_COL_SPLIT = PASS_THREADS / 32 / 4;

/* OUT: the pass that also writes the output (tc_state): Q staged, Delta unscaled and P kept. */
template <int KD, int NC, bool OUT>
struct PassSmem {
    static constexpr size_t ws = 0; /* per stage: W, K, U, Q, gamma */
    static constexpr size_t ks = ws + (size_t)CH * (KD + PAD) * 2;
    static constexpr size_t us = ks + (size_t)CH * (KD + PAD) * 2;
    static constexpr size_t qs = us + (size_t)CH * (NC + PAD) * 2;
    static constexpr size_t gam = qs + (OUT ? (size_t)CH * (KD + PAD) * 2 : 0);
    static constexpr size_t stage = gam + CH * 4;
    static constexpr size_t sb = 2 * stage; /* S in the dtype [KD][NC] */
    static constexpr size_t db = sb + (size_t)KD * (NC + PAD) * 2; /* scaled Delta [CH][NC] */
    static constexpr size_t du = db + (size_t)CH * (NC + PAD) * 2; /* Delta [CH][NC] */
    static constexpr size_t pb = du + (OUT ? (size_t)CH * (NC + PAD) * 2 : 0); /* P [CH][CH] */
    static constexpr size_t bytes = pb + (OUT ? (size_t)CH * (CH + PAD) * 2 : 0);
};

/* A block per (segment, head, sequence) holds the whole state [K][NC] in FP32 accumulators of
 * GDR_TC_PASS_WARPS warps (NC = V, or K for a transition). Per chunk: S rounded to the dtype once
 * (the operand), Delta = U - W S, then S = e^gamma_last S + K^T (e^(gamma_last - gamma) Delta); tc_state also writes
 * the chunk's output O = scale (e^gamma Q S + P Delta), P = (Q K^T) e^(gamma_i - gamma_j) on and below
 * the diagonal, with the S that entered the chunk, so that no state or Delta goes through memory.
 * The next chunk's W, K, U (and Q) stream in (cp.async, two stages) meanwhile. */
template <int DT, int KD, int VD, int PASS>
__global__ void __launch_bounds__(PASS_THREADS, 1)
    tc_pass_kernel(const rudnn_gated_delta_plan_t p, const uint16_t *__restrict__ q, const uint16_t *__restrict__ k,
                   const float *__restrict__ s_in, const void *__restrict__ table,
                   const unsigned char *__restrict__ scratch_in, float *__restrict__ carry_base,
                   void *__restrict__ out, float *__restrict__ s_out)
{
    constexpr int NC = PASS == PASS_TRANSITION ? KD : VD;
    constexpr bool OUT = PASS == PASS_STATE;
    using R = Rec<KD, VD>;
    using M = PassSmem<KD, NC, OUT>;
    constexpr int MT = KD / 64; /* m16 tiles of the warp's KD / 4 state rows */
    constexpr int NT = NC / (8 * PASS_COL_SPLIT); /* n8 tiles of the warp's columns */
    static_assert(NT % 2 == 0, "pairs of n8 tiles");
    extern __shared__ __align__(16) unsigned char sm[];
    uint16_t *Sb = (uint16_t *)(sm + M::sb), *Db = (uint16_t *)(sm + M::db);
    uint16_t *Du = (uint16_t *)(sm + M::du), *Pb = (uint16_t *)(sm + M::pb);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    /* the warp's column group and row quarter, its first column */
    const int wq = warp / 4, wr = warp % 4, wc0 = wq * (NC / PASS_COL_SPLIT);
    static_assert(PASS_COL_SPLIT * 16 == CH, "P: a warp's 16 rows x 16 columns");
    const int64_t h = blockIdx.y, s = blockIdx.z, segs = p.segments;
    const int64_t j = blockIdx.x + (PASS == PASS_TRANSITION ? 1 : 0);
    const SeqInfo si = seq_info(p, table, s);
    const int64_t live = live_segments(si.chunks, segs);
    const int64_t writer = live > 0 ? live - 1 : 0; /* the segment that ends the sequence */
    if (PASS == PASS_STATE ? j > writer : j >= writer)
        return;
    int64_t cb, ce;
    segment_range(si.chunks, segs, j, cb, ce);
    const int64_t b = si.batch;
    float *xs = carry_base, *ms = carry_base + (carry_m(p) - carry_x(p)) / 4;
    const size_t st_elems = (size_t)KD * VD;

    /* the entering state */
    const float *src = PASS == PASS_TRANSITION ? nullptr
                       : j == 0                ? state_at(s_in, p, si.row, h)
                       : PASS == PASS_LOCAL    ? nullptr
                                               : xs + ((s * segs + j) * p.heads + h) * st_elems;
    float S[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int r = wr * (KD / 4) + mt * 16 + g + half * 8, col = wc0 + nt * 8 + 2 * t;
                float2 v = make_float2(0.0f, 0.0f);
                if (PASS == PASS_TRANSITION)
                    v = make_float2(r == col ? 1.0f : 0.0f, r == col + 1 ? 1.0f : 0.0f);
                else if (src)
                    v = *(const float2 *)(src + r * NC + col);
                S[mt][nt][2 * half] = v.x, S[mt][nt][2 * half + 1] = v.y;
            }

    auto issue = [&](int64_t ci) {
        unsigned char *st = sm + ((ci - cb) % 2) * M::stage;
        const int64_t c = si.chunk_first + ci, t0 = si.start + ci * CH;
        const int64_t L = min((int64_t)CH, si.start + si.length - t0);
        const unsigned char *rec = scratch_in + (c * p.heads + h) * R::bytes;
        stage<KD, PASS_THREADS>((uint16_t *)(st + M::ws), (const uint16_t *)(rec + R::w), KD, CH, CH);
        stage<KD, PASS_THREADS>((uint16_t *)(st + M::ks), k + tok(p.k_stride, b, h, t0), p.k_stride[2], L, CH);
        if (PASS != PASS_TRANSITION)
            stage<NC, PASS_THREADS>((uint16_t *)(st + M::us), (const uint16_t *)(rec + R::u), VD, CH, CH);
        if (OUT)
            stage<KD, PASS_THREADS>((uint16_t *)(st + M::qs), q + tok(p.q_stride, b, h, t0), p.q_stride[2], L, CH);
        for (int e = threadIdx.x; e < CH / 4; e += PASS_THREADS)
            rdg_copy16_async_zfill(st + M::gam + e * 16, rec + R::gamma + e * 16, true);
        rdg_copy_async_commit();
    };

    if (cb < ce)
        issue(cb);
    for (int64_t ci = cb; ci < ce; ci++) {
        rdg_copy_async_wait_n(0);
        __syncthreads(); /* the stage has landed; the last chunk's reads of the other stage and Db are done */
        if (ci + 1 < ce)
            issue(ci + 1);
        const unsigned char *st = sm + ((ci - cb) % 2) * M::stage;
        const uint16_t *Ws = (const uint16_t *)(st + M::ws), *Ks = (const uint16_t *)(st + M::ks);
        const uint16_t *Us = (const uint16_t *)(st + M::us), *Qs = (const uint16_t *)(st + M::qs);
        const float *gam = (const float *)(st + M::gam);
        const int64_t t0 = si.start + ci * CH;
        const int L = (int)min((int64_t)CH, si.start + si.length - t0);

#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int half = 0; half < 2; half++) {
                    const int r = wr * (KD / 4) + mt * 16 + g + half * 8, col = wc0 + nt * 8 + 2 * t;
                    *(uint32_t *)(Sb + r * (NC + PAD) + col) = pack2<DT>(S[mt][nt][2 * half], S[mt][nt][2 * half + 1]);
                }
        __syncthreads();
        /* Delta = U - W S (and tc_state: Q S, P) for the warp's 16 chunk rows and NC / PASS_COL_SPLIT
         * columns */
        const float gl = gam[L - 1];
        float qsacc[OUT ? NT : 1][4] = {};
        {
            float acc[NT][4] = {};
            mma_ab<DT, NT, KD / 16>(acc, Ws + wr * 16 * (KD + PAD), KD + PAD, Sb + wc0, NC + PAD);
            if constexpr (OUT)
                mma_ab<DT, NT, KD / 16>(qsacc, Qs + wr * 16 * (KD + PAD), KD + PAD, Sb + wc0, NC + PAD);
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int i = wr * 16 + g + half * 8;
                const float f = i < L ? __expf(gl - gam[i]) : 0.0f;
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    const int col = wc0 + nt * 8 + 2 * t;
                    float u0 = 0.0f, u1 = 0.0f;
                    if (PASS != PASS_TRANSITION) {
                        const uint32_t up = *(const uint32_t *)(Us + i * (NC + PAD) + col);
                        u0 = Elem<DT>::ld(&up, 0), u1 = Elem<DT>::ld(&up, 1);
                    }
                    const float d0 = i < L ? u0 - acc[nt][2 * half] : 0.0f;
                    const float d1 = i < L ? u1 - acc[nt][2 * half + 1] : 0.0f;
                    if (OUT)
                        *(uint32_t *)(Du + i * (NC + PAD) + col) = pack2<DT>(d0, d1);
                    *(uint32_t *)(Db + i * (NC + PAD) + col) = pack2<DT>(d0 * f, d1 * f);
                }
            }
        }
        if constexpr (OUT) { /* P: the warp's 16 rows x 16 columns */
            float pacc[2][4] = {};
            mma_abt<DT, 2, KD / 16>(pacc, Qs + wr * 16 * (KD + PAD), KD + PAD, Ks + wq * 16 * (KD + PAD), KD + PAD);
#pragma unroll
            for (int nt = 0; nt < 2; nt++)
#pragma unroll
                for (int half = 0; half < 2; half++) {
                    const int i = wr * 16 + g + half * 8, j = wq * 16 + nt * 8 + 2 * t;
                    const float p0 = j <= i ? pacc[nt][2 * half] * __expf(gam[i] - gam[j]) : 0.0f;
                    const float p1 = j + 1 <= i ? pacc[nt][2 * half + 1] * __expf(gam[i] - gam[j + 1]) : 0.0f;
                    *(uint32_t *)(Pb + i * (CH + PAD) + j) = pack2<DT>(p0, p1);
                }
        }
        __syncthreads();
        /* S = e^gl S + K^T Db: A = K^T from the staged K rows (ldmatrix.trans) */
        const float decay_all = __expf(gl);
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    S[mt][nt][e] *= decay_all;
            const int m0 = wr * (KD / 4) + mt * 16;
#pragma unroll
            for (int kk = 0; kk < CH / 16; kk++) {
                uint32_t af[4];
                rdg_ldsm_x4_trans(rdg_smem_addr(Ks + (kk * 16 + (lane % 8) + (lane / 16) * 8) * (KD + PAD) + m0 +
                                                ((lane / 8) % 2) * 8),
                                  af);
#pragma unroll
                for (int np = 0; np < NT / 2; np++) {
                    uint32_t bf[4];
                    rdg_ldsm_x4_trans(rdg_smem_addr(Db + (kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * (NC + PAD) +
                                                    wc0 + np * 16 + (lane / 16) * 8),
                                      bf);
                    mma16816<DT>(S[mt][2 * np], af, bf[0], bf[1]);
                    mma16816<DT>(S[mt][2 * np + 1], af, bf[2], bf[3]);
                }
            }
        }
        if constexpr (OUT) { /* O = scale (e^gamma Q S + P Delta): the warp's rows and columns */
            const float e_lo = __expf(gam[wr * 16 + g]), e_hi = __expf(gam[wr * 16 + g + 8]);
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
                qsacc[nt][0] *= e_lo, qsacc[nt][1] *= e_lo, qsacc[nt][2] *= e_hi, qsacc[nt][3] *= e_hi;
            mma_ab<DT, NT, CH / 16>(qsacc, Pb + wr * 16 * (CH + PAD), CH + PAD, Du + wc0, NC + PAD);
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int half = 0; half < 2; half++) {
                    const int i = wr * 16 + g + half * 8, col = wc0 + nt * 8 + 2 * t;
                    if (i < L) {
                        const int64_t o = tok(p.o_stride, b, h, t0 + i) + col;
                        Elem<DT>::st(out, o, p.query_scale * qsacc[nt][2 * half]);
                        Elem<DT>::st(out, o + 1, p.query_scale * qsacc[nt][2 * half + 1]);
                    }
                }
        }
    }
    /* the leaving state: the sequence's final state, S_local_j into X[j + 1], or M_j */
    float *dst = PASS == PASS_STATE        ? (j == writer ? (float *)state_at(s_out, p, si.row, h) : nullptr)
                 : PASS == PASS_LOCAL      ? xs + ((s * segs + j + 1) * p.heads + h) * st_elems
                                           : ms + ((s * segs + j) * p.heads + h) * (size_t)KD * KD;
    if (!dst)
        return;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int r = wr * (KD / 4) + mt * 16 + g + half * 8, col = wc0 + nt * 8 + 2 * t;
                *(float2 *)(dst + r * NC + col) = make_float2(S[mt][nt][2 * half], S[mt][nt][2 * half + 1]);
            }
}

/* tc_carry: a block per (carry_cols(K) value columns, head, sequence) walks the live segments,
 * X[j + 1] = M_j X[j] + X[j + 1] for j = 1 .. live - 2 (X[1] left true by segment 0's tc_segment), in
 * FP32. M_j streams into shared memory (cp.async, two stages: M_(j+1) lands during step j); a thread
 * owns one row and 4 columns, and a warp's 32 rows read the same columns of X[j] (broadcasts). */
constexpr int CARRY_THREADS = GDR_TC_CARRY_THREADS;
__host__ __device__ constexpr int carry_cols(int kd) { return 4 * (CARRY_THREADS / kd); }
__host__ __device__ constexpr int carry_pitch(int kd) { return kd + 4; } /* float4 rows, no conflicts */
__host__ __device__ constexpr size_t carry_smem(int kd)
{
    return (size_t)2 * kd * carry_pitch(kd) * 4 + (size_t)kd * carry_cols(kd) * 4;
}

/* One step of tc_carry on mma.sync with 3xTF32 (about FP32's precision), GDR_TC_CARRY_MMA: warp w
 * takes the m16 x n8 tile (w % (KD / 16), w / (KD / 16)) of X[j + 1] = M_j X[j] + X[j + 1], each
 * element of M_j read once from shared memory (the SIMT form reads a row a thread as float4 and
 * X[j]'s columns as broadcasts). m: M_j [KD][KD + 4]; xcol: X[j]'s CARRY_COLS columns [KD][cols];
 * next: X[j + 1] at the block's first column, its local state in, the true state out. */
template <int KD, int VD>
__device__ __forceinline__ void carry_step_mma(const float *m, float *xcol, float *next, bool more)
{
    constexpr int COLS = carry_cols(KD), MP = carry_pitch(KD), MT = KD / 16;
    static_assert(MT * (COLS / 8) == CARRY_THREADS / 32, "tc_carry: one m16 x n8 tile a warp");
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int row = 16 * (warp % MT) + g, col = 8 * (warp / MT) + 2 * t;
    /* this lane's C elements: (row, col .. col + 1) and (row + 8, col .. col + 1) */
    const float2 l0 = *(const float2 *)(next + (size_t)row * VD + col);
    const float2 l1 = *(const float2 *)(next + (size_t)(row + 8) * VD + col);
    rdg_copy_async_wait_n(more ? 1 : 0);
    __syncthreads(); /* M_j has landed; X[j]'s columns are in xcol */
    float acc[2][4] = {}; /* alternate k steps: two shorter dependent chains */
#pragma unroll
    for (int ks = 0; ks < KD / 8; ks++) {
        const float *ar = m + row * MP + ks * 8 + t;
        const float a[4] = {ar[0], ar[8 * MP], ar[4], ar[8 * MP + 4]};
        const float *bc = xcol + (ks * 8 + t) * COLS + 8 * (warp / MT) + g;
        mma1688_3xtf32(acc[ks % 2], a, bc[0], bc[4 * COLS]);
    }
    __syncthreads(); /* every read of X[j] and of this stage done */
    const float o[4] = {acc[0][0] + acc[1][0] + l0.x, acc[0][1] + acc[1][1] + l0.y, acc[0][2] + acc[1][2] + l1.x,
                        acc[0][3] + acc[1][3] + l1.y};
    *(float2 *)(next + (size_t)row * VD + col) = make_float2(o[0], o[1]);
    *(float2 *)(next + (size_t)(row + 8) * VD + col) = make_float2(o[2], o[3]);
    xcol[row * COLS + col] = o[0], xcol[row * COLS + col + 1] = o[1];
    xcol[(row + 8) * COLS + col] = o[2], xcol[(row + 8) * COLS + col + 1] = o[3];
}

template <int KD, int VD>
__global__ void __launch_bounds__(CARRY_THREADS)
    tc_carry_kernel(const rudnn_gated_delta_plan_t p, const void *__restrict__ table, float *__restrict__ xs,
                    const float *__restrict__ ms)
{
    constexpr int CARRY_COLS = carry_cols(KD), MP = carry_pitch(KD);
    static_assert(CARRY_THREADS % KD == 0 && VD % CARRY_COLS == 0, "tc_carry: rows and columns split evenly");
    extern __shared__ __align__(16) unsigned char sm[];
    float *mst = (float *)sm;                       /* [2][KD][MP] */
    float(*xc)[CARRY_COLS] = (float(*)[CARRY_COLS])(mst + 2 * KD * MP); /* [KD][CARRY_COLS] */
    /* a programmatic dependent: the transitions and local states are read past the wait */
    rdg_pdl_trigger();
    rdg_pdl_wait();
    const int64_t c0 = (int64_t)blockIdx.x * CARRY_COLS, h = blockIdx.y, s = blockIdx.z, segs = p.segments;
    const SeqInfo si = seq_info(p, table, s);
    const int64_t live = live_segments(si.chunks, segs);
    if (live < 3)
        return;
    const int r = threadIdx.x % KD, cg = (threadIdx.x / KD) * 4;
    auto x_at = [&](int64_t jj) { return xs + ((s * segs + jj) * p.heads + h) * (size_t)KD * VD; };
    auto issue = [&](int64_t jj) {
        const float *m = ms + ((s * segs + jj) * p.heads + h) * (size_t)KD * KD;
        float *dst = mst + (jj % 2) * KD * MP;
        for (int e = threadIdx.x; e < KD * KD / 4; e += CARRY_THREADS)
            rdg_copy16_async_zfill(dst + (e / (KD / 4)) * MP + (e % (KD / 4)) * 4, m + 4 * e, true);
        rdg_copy_async_commit();
    };
    issue(1);
    for (int e = threadIdx.x; e < KD * CARRY_COLS; e += CARRY_THREADS)
        xc[e / CARRY_COLS][e % CARRY_COLS] = x_at(1)[(e / CARRY_COLS) * VD + c0 + e % CARRY_COLS];
    for (int64_t jj = 1; jj + 1 < live; jj++) {
        const bool more = jj + 2 < live;
        if (more)
            issue(jj + 1);
        if constexpr (GDR_TC_CARRY_MMA) {
            carry_step_mma<KD, VD>(mst + (jj % 2) * KD * MP, &xc[0][0], x_at(jj + 1) + c0, more);
            continue;
        }
        const float4 local = *(const float4 *)(x_at(jj + 1) + r * VD + c0 + cg);
        rdg_copy_async_wait_n(more ? 1 : 0);
        __syncthreads(); /* M_jj has landed; X[jj]'s columns are in xc */
        const float4 *mrow = (const float4 *)(mst + (jj % 2) * KD * MP + r * MP);
        float *next = x_at(jj + 1) + r * VD + c0 + cg;
        float acc[4] = {};
#pragma unroll 8
        for (int k4 = 0; k4 < KD / 4; k4++) {
            const float4 mv = mrow[k4];
            const float m4[4] = {mv.x, mv.y, mv.z, mv.w};
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const float4 x = *(const float4 *)&xc[4 * k4 + q][cg];
                acc[0] += m4[q] * x.x, acc[1] += m4[q] * x.y, acc[2] += m4[q] * x.z, acc[3] += m4[q] * x.w;
            }
        }
        __syncthreads(); /* every read of X[jj] and of this stage done */
        acc[0] += local.x, acc[1] += local.y, acc[2] += local.z, acc[3] += local.w;
#pragma unroll
        for (int c = 0; c < 4; c++)
            next[c] = acc[c], xc[r][cg + c] = acc[c];
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

/* Hopper: the state and segment passes on wgmma (gated_delta_wg.cu) */
template <int KD, int VD>
bool wg_passes(rdg_queue_t *q, const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o)
{
    return KD == 128 && VD == 128 && rdg_gdr_wg_fits(&q->dev, p, o);
}

template <int DT, int KD, int VD, int PASS>
rudnn_status_t launch_pass(rdg_queue_t *q, const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o,
                           int64_t blocks, const char *name)
{
    if (wg_passes<KD, VD>(q, p, o))
        return rdg_gdr_wg_pass(q, p, o, PASS, blocks);
    static std::atomic<int> raised[64];
    const size_t bytes = PassSmem<KD, PASS == PASS_TRANSITION ? KD : VD, PASS == PASS_STATE>::bytes;
    TRY(allow_smem((const void *)tc_pass_kernel<DT, KD, VD, PASS>, raised, q->dev.index, bytes));
    rdg_note_kernel(name);
    tc_pass_kernel<DT, KD, VD, PASS><<<dim3((unsigned)blocks, (unsigned)p->heads, (unsigned)p->sequences),
                                       PASS_THREADS, bytes, q->stream>>>(
        *p, (const uint16_t *)rdg_at(o->query), (const uint16_t *)rdg_at(o->key),
        (const float *)rdg_at(o->initial_state), rdg_at(o->table), (const unsigned char *)rdg_at(o->scratch),
        (float *)((unsigned char *)rdg_at(o->scratch) + carry_x(*p)), rdg_at(o->output),
        (float *)rdg_at(o->final_state));
    return rdg_launched(name);
}

template <int DT, int KD, int VD>
rudnn_status_t launch(rdg_queue_t *q, const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o)
{
    static std::atomic<int> raised[64];
    TRY(allow_smem((const void *)tc_prep_kernel<DT, KD, VD>, raised, q->dev.index, PrepSmem<KD, VD>::bytes));
    unsigned char *scratch = (unsigned char *)rdg_at(o->scratch);
    const uint16_t *kp = (const uint16_t *)rdg_at(o->key);
    rdg_note_kernel("gated_delta.tc_prep");
    tc_prep_kernel<DT, KD, VD><<<dim3((unsigned)p->chunks, (unsigned)p->heads), THREADS, PrepSmem<KD, VD>::bytes,
                                 q->stream>>>(*p, kp, (const uint16_t *)rdg_at(o->value), rdg_at(o->beta),
                                              (const float *)rdg_at(o->log_decay), rdg_at(o->table), scratch);
    TRY(rdg_launched("gated_delta.tc_prep"));
    const int64_t segs = p->segments;
    if (segs > 1) { /* the segments from zero and their transitions, then the true entering states */
        /* on wgmma both in one pass (GDR_WG_FUSED_SEGMENT), else a pass each */
        const bool fused = GDR_WG_FUSED_SEGMENT && wg_passes<KD, VD>(q, p, o);
        if (fused)
            TRY(rdg_gdr_wg_pass(q, p, o, PASS_SEGMENT, segs - 1));
        else
            TRY((launch_pass<DT, KD, VD, PASS_LOCAL>(q, p, o, segs - 1, "gated_delta.tc_segment")));
        if (segs > 2) {
            if (!fused)
                TRY((launch_pass<DT, KD, VD, PASS_TRANSITION>(q, p, o, segs - 2, "gated_delta.tc_segment")));
            static std::atomic<int> carry_raised[64];
            TRY(allow_smem((const void *)tc_carry_kernel<KD, VD>, carry_raised, q->dev.index, carry_smem(KD)));
            rdg_note_kernel("gated_delta.tc_carry");
            TRY(rdg_launch_pdl(q, true, "gated_delta.tc_carry", tc_carry_kernel<KD, VD>,
                               dim3(VD / carry_cols(KD), (unsigned)p->heads, (unsigned)p->sequences),
                               dim3(CARRY_THREADS), carry_smem(KD), *p, rdg_at(o->table),
                               (float *)(scratch + carry_x(*p)), (const float *)(scratch + carry_m(*p))));
        }
    }
    return launch_pass<DT, KD, VD, PASS_STATE>(q, p, o, segs > 1 ? segs : 1, "gated_delta.tc_state");
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
           p->segments <= 65535 && PassSmem<128, 128, true>::bytes <= dev->smem_optin &&
           carry_smem(128) <= dev->smem_optin &&
           PrepSmem<128, 128>::bytes <= dev->smem_optin;
}

size_t rdg_gdr_tc_scratch(const rudnn_gated_delta_plan_t *p)
{
    if (p->segments <= 1)
        return (size_t)p->chunks * (size_t)p->heads * rec_bytes(*p);
    return carry_m(*p) + (size_t)p->sequences * (size_t)p->segments * (size_t)p->heads *
                             (size_t)(p->key_dim * p->key_dim) * 4;
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
