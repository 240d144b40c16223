/* The gated delta rule's state passes on Hopper's wgmma (sm_90a, F16/BF16, K = V = 128, chunks of
 * 64): what gated_delta_tc.cu's tc_pass does (tc_state, and the segment passes of a cut sequence),
 * with the same roundings to the dtype (S, Delta, the decayed Delta and P), on warp-specialized
 * warpgroups of one block per (segment, head, sequence):
 *   producer   cp.async of each chunk's W, K, U (and Q, gamma) into a ring of two stages, 128-byte
 *              swizzled as wgmma reads them;
 *   state 0/1  each holds half of S^T in FP32 accumulators (64 value columns x 128 keys: the
 *              columns of S are independent): Delta^T = U^T - S^T W^T with S^T rounded in
 *              registers, then S^T = e^gl S^T + (e^(gl - gamma) Delta)^T K;
 *   output     (tc_state's pass only) P = (Q K^T) e^(gamma_i - gamma_j) on and below the diagonal,
 *              then O = scale (e^gamma Q S + P Delta), from the rounded S and Delta the state
 *              warpgroups leave in a double buffer, so that it may trail them.
 * mbarriers order every hand-over: full/empty per stage (producer -> consumers), sfull/sempty per
 * S and Delta buffer (state -> output). */
#include <stdio.h>

#include "rdg_internal.h"

#if !RDG_HIP

#include <atomic>
#include <type_traits>

#include "elem.cuh"
#include "gated_delta.cuh"
#include "gated_delta_tc.cuh"
#include "gated_delta_tuning.h"
#include "mbarrier.cuh"
#include "mma_sync.cuh"
#include "pdl.cuh"
#include "wgmma.cuh"

namespace {

constexpr int KD = 128;       /* keys = values: the only shape of this path */
constexpr int BLK = 64 * 128; /* one [64 rows][64 columns] 16-bit block, 128-byte rows */

/* Shared memory of a pass, bytes from the 1024-byte aligned base. A stage holds W, K, U and (OUT)
 * Q, each [64 chunk rows][128] as two 64-column blocks (two stages in the output's pass, whose
 * shared memory is full, GDR_WG_SEGMENT_STAGES in the others); S^T [128 v][128 keys] and Delta^T
 * [128 v][64 rows] twice (chunk parity); gamma [stage][64] FP32; the mbarriers. */
template <int PASS>
struct WgLayout {
    static constexpr bool out = PASS == PASS_STATE;
    static constexpr int threads = out ? 512 : 384; /* producer, two state, (output) warpgroups */
    static constexpr int consumers = threads - 128;
    static constexpr int stages = out ? 2 : GDR_WG_SEGMENT_STAGES;
    static constexpr uint32_t w = 0, k = 2 * BLK, u = 4 * BLK, q = 6 * BLK;
    static constexpr uint32_t stage = out ? 8 * BLK : 6 * BLK;
    static constexpr uint32_t sb = stages * stage;               /* [2][2 blocks of 128 rows] */
    static constexpr uint32_t du = sb + 8 * BLK;                  /* [2][128 rows] (OUT) */
    static constexpr uint32_t gam = du + (out ? 4 * BLK : 0);
    static constexpr uint32_t bar = gam + stages * CH * 4; /* full[stages], empty[stages], sfull[2], sempty[2] */
    static constexpr size_t smem = 1024 + (size_t)bar + 8 * (2 * stages + 4);
};
static_assert(setmaxnreg_fits(GDR_WG_STATE_PRODUCER_REGS, 3, GDR_WG_STATE_CONSUMER_REGS) &&
                  setmaxnreg_fits(GDR_WG_PRODUCER_REGS, 2, GDR_WG_SEGMENT_CONSUMER_REGS),
              "the warpgroups' registers after setmaxnreg exceed the launch's");
static_assert(WgLayout<PASS_STATE>::smem <= 227 * 1024 && WgLayout<PASS_LOCAL>::smem <= 227 * 1024,
              "the block's shared memory");

/* the 128 threads of state warpgroup hh (named barriers 1 and 2) */
__device__ __forceinline__ void state_sync(int hh)
{
    if (hh == 0)
        asm volatile("bar.sync 1, 128;\n" ::: "memory");
    else
        asm volatile("bar.sync 2, 128;\n" ::: "memory");
}

/* x, which the compiler cannot see through: what is computed from it is not hoisted out of a loop */
__device__ __forceinline__ int opaque(int x)
{
    asm volatile("" : "+r"(x));
    return x;
}

/* Byte offset of element col (0..63) of row in a 64-column block with the 128-byte swizzle (bits
 * 4..6 XOR bits 7..9 of the offset, the block 1024-byte aligned). */
__device__ __forceinline__ uint32_t swz(int row, int col)
{
    return (uint32_t)(row * 128 + ((((col >> 3) ^ (row & 7)) << 4) | ((col & 7) << 1)));
}

template <int DT>
__device__ __forceinline__ float from16(uint16_t x)
{
    if constexpr (DT == RUDNN_BF16)
        return rdg_bf16_to_f32(x);
    else
        return rdg_f16_to_f32(x);
}

template <int DT, int PASS>
__global__ void __launch_bounds__(WgLayout<PASS>::threads, 1)
    wg_pass_kernel(const rudnn_gated_delta_plan_t p, const uint16_t *__restrict__ q, const uint16_t *__restrict__ k,
                   const float *__restrict__ s_in, const void *__restrict__ table,
                   const unsigned char *__restrict__ scratch_in, float *__restrict__ carry_base,
                   void *__restrict__ out, float *__restrict__ s_out)
{
#if RDG_HAS_WGMMA
    using Lay = WgLayout<PASS>;
    using R = Rec<KD, KD>;
    constexpr bool OUT = Lay::out;
    extern __shared__ __align__(1024) uint8_t wg_smem[];
    const uint32_t raw = smem_u32(wg_smem);
    const uint32_t pad = ((raw + 1023u) & ~1023u) - raw;
    uint8_t *const base = wg_smem + pad;
    const uint32_t sb = raw + pad;
    auto stage = [&](int s) { return sb + (uint32_t)s * Lay::stage; };
    constexpr int S = Lay::stages;
    auto full = [&](int s) { return sb + Lay::bar + 8u * (uint32_t)s; };
    auto empty = [&](int s) { return sb + Lay::bar + 8u * (uint32_t)(S + s); };
    auto sfull = [&](int s) { return sb + Lay::bar + 8u * (uint32_t)(2 * S + s); };
    auto sempty = [&](int s) { return sb + Lay::bar + 8u * (uint32_t)(2 * S + 2 + s); };

    /* the segment and its chunks, as tc_pass */
    const int64_t h = blockIdx.y, s = blockIdx.z, segs = p.segments;
    const int64_t j = blockIdx.x + (PASS == PASS_TRANSITION ? 1 : 0); /* PASS_SEGMENT: from 0, as PASS_LOCAL */
    const SeqInfo si = seq_info(p, table, s);
    const int64_t live = live_segments(si.chunks, segs);
    const int64_t writer = live > 0 ? live - 1 : 0;
    if (PASS == PASS_STATE ? j > writer : j >= writer)
        return;
    int64_t cb, ce;
    segment_range(si.chunks, segs, j, cb, ce);
    const int nch = (int)(ce - cb);
    const int64_t b = si.batch;
    const size_t st_elems = (size_t)KD * KD;
    float *xs = carry_base, *ms = carry_base + (carry_m(p) - carry_x(p)) / 4;

    const int tid = (int)threadIdx.x, wg = tid / 128, ctid = tid % 128;
    if (tid == 0) {
        for (int x = 0; x < S; x++) {
            mbar_init(full(x), 128);
            mbar_init(empty(x), Lay::consumers);
        }
        for (int x = 0; x < 2; x++) {
            mbar_init(sfull(x), 256);
            mbar_init(sempty(x), 128);
        }
        mbar_fence_init();
    }
    __syncthreads();
    /* launched while the previous kernel ends (programmatic dependent): its outputs read past the wait */
    rdg_pdl_trigger();
    rdg_pdl_wait();

    if (wg == 0) { /* producer: every thread copies, waits for its copies, then arrives */
        set_max_regs_dec<OUT ? GDR_WG_STATE_PRODUCER_REGS : GDR_WG_PRODUCER_REGS>();
        /* a thread copies the 16 bytes c16 of rows r0 + 8 i: its swizzled offset in a stage is fixed */
        const int c16 = ctid % 16, r0 = ctid / 16;
        const uint32_t o0 = (uint32_t)(c16 / 8) * BLK + (uint32_t)r0 * 128 + ((uint32_t)((c16 % 8) ^ r0) << 4);
        const int64_t kstep = 8 * p.k_stride[2], qstep = 8 * p.q_stride[2];
        for (int n = 0; n < nch; n++) {
            const int x = n % S;
            if (n >= S)
                mbar_wait(empty(x), (uint32_t)(n / S - 1) & 1u); /* chunk n - S released it */
            const int64_t ci = cb + n, c = si.chunk_first + ci, t0 = si.start + ci * CH;
            const int64_t L = min((int64_t)CH, si.length - ci * CH);
            const unsigned char *rec = scratch_in + (c * p.heads + h) * R::bytes;
            const unsigned char *wu = rec + r0 * (KD * 2) + c16 * 16;
            const uint16_t *k0 = k + tok(p.k_stride, b, h, t0) + c16 * 8, *krow = k0 + r0 * p.k_stride[2];
            const uint16_t *q0 = OUT ? q + tok(p.q_stride, b, h, t0) + c16 * 8 : nullptr;
            const uint16_t *qrow = OUT ? q0 + r0 * p.q_stride[2] : nullptr;
            const uint32_t st = stage(x) + o0;
            /* rows r0 + 8 i: the offsets step by 8 rows (1024 bytes in a stage: the swizzle's row
             * bits stay); rows past the chunk's end are zero-filled (their source: the chunk's row 0) */
#pragma unroll 1 /* the producer's registers are few */
            for (int i = 0; i < CH / 8; i++) {
                const bool ok = r0 + 8 * i < L;
                const uint32_t o = (uint32_t)i * 1024;
                rdg_copy16_async_zfill(st + Lay::w + o, wu + R::w + i * 8 * (KD * 2), true);
                rdg_copy16_async_zfill(st + Lay::k + o, ok ? krow + i * kstep : k0, ok);
                if (PASS != PASS_TRANSITION)
                    rdg_copy16_async_zfill(st + Lay::u + o, wu + R::u + i * 8 * (KD * 2), true);
                if (OUT)
                    rdg_copy16_async_zfill(st + Lay::q + o, ok ? qrow + i * qstep : q0, ok);
            }
            if (ctid < CH / 4)
                rdg_copy16_async_zfill(sb + Lay::gam + (uint32_t)x * CH * 4 + ctid * 16, rec + R::gamma + ctid * 16,
                                       true);
            rdg_copy_async_commit();
            rdg_copy_async_wait_n(0);
            fence_proxy_async(); /* generic-proxy copies, read by wgmma (async proxy) */
            mbar_arrive(full(x));
        }
        return;
    }

    const int w = (ctid / 32) % 4, lane = ctid % 32, g = lane / 4, t = lane % 4;
    if (wg <= 2) { /* a state warpgroup: S^T rows (value columns) 64 hh .. 64 hh + 63 */
        if constexpr (OUT)
            set_max_regs_inc<GDR_WG_STATE_CONSUMER_REGS>();
        else
            set_max_regs_inc<GDR_WG_SEGMENT_CONSUMER_REGS>();
        const int hh = wg - 1, v0_ = 64 * hh + 16 * w + g; /* this thread's rows v0 and v0 + 8 */
        constexpr bool TWO = PASS == PASS_SEGMENT; /* the local state and the transition side by side */
        const bool trans = TWO && j >= 1;          /* segment 0 needs no transition */
        const float *src = PASS == PASS_TRANSITION ? nullptr
                           : j == 0                ? state_at(s_in, p, si.row, h)
                           : PASS != PASS_STATE    ? nullptr
                                                   : xs + ((s * segs + j) * p.heads + h) * st_elems;
        /* st[4 nn + e]: S^T (v0 + 8 (e / 2), key 8 nn + 2 t + e % 2) = S (key, v); mt the same of
         * the transition (PASS_SEGMENT), from I */
        float st[64], mt[TWO ? 64 : 1];
#pragma unroll
        for (int nn = 0; nn < 16; nn++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int v = v0_ + 8 * (e / 2), key = 8 * nn + 2 * t + (e % 2);
                st[4 * nn + e] = PASS == PASS_TRANSITION ? (key == v ? 1.0f : 0.0f) : src ? src[key * KD + v] : 0.0f;
                if constexpr (TWO)
                    mt[4 * nn + e] = key == v ? 1.0f : 0.0f;
            }
        fence_operands(st);
        if constexpr (TWO)
            fence_operands(mt);
        for (int n = 0; n < nch; n++) {
            const int sx = n % S, px = n & 1; /* the stage; the S and Delta buffer */
            const int L = (int)min((int64_t)CH, si.length - (cb + n) * CH);
            mbar_wait(full(sx), (uint32_t)(n / S) & 1u);
            const float *gam = (const float *)(base + Lay::gam + sx * CH * 4);
            /* One chunk of one state sa (TR: a transition, no U) through S^T buffer buf: a warpgroup
             * reads back only its own rows of the buffer, so the one of the other chain (or the other
             * parity) between two writes of it orders them. */
            auto step = [&](float(&sa)[64], auto tr, int buf) {
                constexpr bool TR = decltype(tr)::value;
                const int v0 = opaque(v0_); /* the swizzled addresses recomputed each chunk, not held */
                float x[32];
                /* S^T rounded into [v][key] blocks of 64 keys: the A operand of X (this warpgroup's
                 * rows) and the output warpgroup's B; stmatrix: matrix m of key step kk holds rows
                 * v0 + 8 (m % 2), keys 16 kk + 8 (m / 2) (sa[8 kk + 2 m], the next), lane l gives row
                 * l % 8 of matrix l / 8 (rows 8-aligned: the swizzle's row bits are l % 8) */
                if (OUT && n >= 2)
                    mbar_wait(sempty(buf), (uint32_t)((n >> 1) - 1) & 1u);
                {
                    const int lm = lane / 8, lr = lane % 8;
                    const uint32_t srow = sb + Lay::sb + buf * 4 * BLK + (uint32_t)(v0 - g + 8 * (lm % 2) + lr) * 128;
#pragma unroll
                    for (int kk = 0; kk < 8; kk++) {
                        const uint32_t r[4] = {pack2(DT, sa[8 * kk], sa[8 * kk + 1]), pack2(DT, sa[8 * kk + 2], sa[8 * kk + 3]),
                                               pack2(DT, sa[8 * kk + 4], sa[8 * kk + 5]),
                                               pack2(DT, sa[8 * kk + 6], sa[8 * kk + 7])};
                        stsm_x4(srow + (kk / 4) * 2 * BLK + ((uint32_t)((2 * (kk % 4) + lm / 2) ^ lr) << 4), r);
                    }
                }
                fence_proxy_async(); /* generic stores, read by wgmma */
                state_sync(hh);
                /* X = S^T W^T (A = S^T, B = W: both K-major); x defined here (the first product
                 * ignores it) so that it is dead outside, not held across the update */
                const uint32_t sbs = sb + Lay::sb + buf * 4 * BLK + hh * BLK;
#pragma unroll
                for (int i = 0; i < 32; i++)
                    x[i] = 0.0f;
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < 8; kk++)
                    wgmma_ss<DT, 64>(x, wgmma_desc(sbs + (kk / 4) * 2 * BLK + (kk % 4) * 32),
                                     wgmma_desc(stage(sx) + Lay::w + (kk / 4) * BLK + (kk % 4) * 32), kk > 0);
                wgmma_commit();
                wgmma_wait<0>();
                fence_operands(x);
                /* Delta^T = U^T - X on the valid rows (x[4 nn + e]: v0 + 8 (e / 2), row 8 nn + 2 t + e % 2);
                 * the decayed one as the A fragments of the update, Delta itself for the output */
                const float gl = gam[L - 1];
                uint32_t da[4][4];
                /* U^T by ldmatrix.trans, matrix m = 2 (nn % 2) + half of an nn pair: U's chunk rows
                 * 8 nn + l % 8 (lane l gives a row of matrix l / 8), value columns v0 - g + 8 half .. + 7 */
                const int lm = lane / 8, lr = lane % 8;
                /* the masks of a partial chunk's rows; a full chunk's step compiled without them */
                auto delta_rows = [&](auto full) {
                    constexpr bool FULL = decltype(full)::value;
#pragma unroll
                    for (int np = 0; np < 4; np++) {
                        uint32_t ur[4] = {0u, 0u, 0u, 0u}, dr[4];
                        if constexpr (!TR) { /* U^T (v, rows i, i + 1) from U [rows][v] */
                            const int nn = 2 * np + lm / 2, v = v0 - g + 8 * (lm % 2);
                            rdg_ldsm_x4_trans(stage(sx) + Lay::u + (uint32_t)hh * BLK + (uint32_t)(8 * nn + lr) * 128 +
                                                  ((uint32_t)(((v % 64) >> 3) ^ lr) << 4),
                                              ur);
                        }
#pragma unroll
                        for (int m = 0; m < 4; m++) {
                            const int nn = 2 * np + m / 2, half = m % 2, i = 8 * nn + 2 * t;
                            const float u0 = from16<DT>((uint16_t)(ur[m] & 0xffffu)), u1 = from16<DT>((uint16_t)(ur[m] >> 16));
                            const float d0 = FULL || i < L ? u0 - x[4 * nn + 2 * half] : 0.0f;
                            const float d1 = FULL || i + 1 < L ? u1 - x[4 * nn + 2 * half + 1] : 0.0f;
                            const float f0 = FULL || i < L ? __expf(gl - gam[i]) : 0.0f;
                            const float f1 = FULL || i + 1 < L ? __expf(gl - gam[i + 1]) : 0.0f;
                            dr[m] = pack2(DT, d0, d1);
                            da[np][m] = pack2(DT, d0 * f0, d1 * f1);
                        }
                        if constexpr (OUT) {
#pragma unroll
                            for (int m = 0; m < 4; m++) {
                                const int i = 8 * (2 * np + m / 2) + 2 * t; /* (stmatrix here spills) */
                                *(uint32_t *)(base + Lay::du + buf * 2 * BLK + swz(v0 + 8 * (m % 2), i)) = dr[m];
                            }
                        }
                    }
                };
                if (L == CH)
                    delta_rows(std::true_type{});
                else
                    delta_rows(std::false_type{});
                if constexpr (OUT) {
                    fence_proxy_async(); /* S and Delta (generic stores) before the output's wgmma */
                    mbar_arrive(sfull(buf));
                }
                /* S^T = e^gl S^T + (decayed Delta)^T K (B = K, MN-major: rows are chunk rows) */
                const float decay_all = __expf(gl);
#pragma unroll
                for (int e = 0; e < 64; e++)
                    sa[e] *= decay_all;
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < 4; kk++)
                    wgmma_rs<DT, 128, 1>(sa, da[kk], wgmma_desc_mn(stage(sx) + Lay::k + kk * 2048, BLK), 1);
                wgmma_commit();
                wgmma_wait<0>();
                fence_operands(sa);
            };
            if constexpr (TWO) {
                if (trans) {
                    step(st, std::false_type{}, 0);
                    step(mt, std::true_type{}, 1);
                } else {
                    step(st, std::false_type{}, px);
                }
            } else {
                step(st, std::integral_constant<bool, PASS == PASS_TRANSITION>{}, px);
            }
            mbar_arrive(empty(sx));
        }
        /* the leaving state: the sequence's final state, S_local_j into X[j + 1], or M_j */
        float *dst = PASS == PASS_STATE       ? (j == writer ? (float *)state_at(s_out, p, si.row, h) : nullptr)
                     : PASS == PASS_TRANSITION ? ms + ((s * segs + j) * p.heads + h) * st_elems
                                               : xs + ((s * segs + j + 1) * p.heads + h) * st_elems;
        /* a state's columns of this thread out to a [K][K] FP32 matrix */
        auto store = [&](float *to, const float(&sa)[64]) {
#pragma unroll
            for (int nn = 0; nn < 16; nn++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    to[(8 * nn + 2 * t + (e % 2)) * KD + v0_ + 8 * (e / 2)] = sa[4 * nn + e];
        };
        if (dst)
            store(dst, st);
        if constexpr (TWO) {
            if (trans)
                store(ms + ((s * segs + j) * p.heads + h) * st_elems, mt);
        }
        return;
    }

    if constexpr (OUT) { /* the output warpgroup: chunk rows i0 and i0 + 8 */
        set_max_regs_inc<GDR_WG_STATE_CONSUMER_REGS>();
        const int i0 = 16 * w + g;
        float pacc[32], o[64]; /* each defined just before its first product: dead in between */
        for (int n = 0; n < nch; n++) {
            const int sx = n % S, px = n & 1;
            const int64_t t0 = si.start + (cb + n) * CH;
            const int L = (int)min((int64_t)CH, si.length - (cb + n) * CH);
            mbar_wait(full(sx), (uint32_t)(n / S) & 1u);
            const float *gam = (const float *)(base + Lay::gam + sx * CH * 4);
            const uint32_t qs = stage(sx) + Lay::q, ks = stage(sx) + Lay::k;
            /* P = Q K^T (B = K, K-major) */
#pragma unroll
            for (int i = 0; i < 32; i++)
                pacc[i] = 0.0f;
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < 8; kk++)
                wgmma_ss<DT, 64>(pacc, wgmma_desc(qs + (kk / 4) * BLK + (kk % 4) * 32),
                                 wgmma_desc(ks + (kk / 4) * BLK + (kk % 4) * 32), kk > 0);
            wgmma_commit();
            wgmma_wait<0>();
            fence_operands(pacc);
            /* P decayed on and below the diagonal, as A fragments (k steps of 16 chunk columns) */
            uint32_t pa[4][4];
#pragma unroll
            for (int nn = 0; nn < 8; nn++)
#pragma unroll
                for (int half = 0; half < 2; half++) {
                    const int i = i0 + 8 * half, jj = 8 * nn + 2 * t;
                    const float p0 = jj <= i ? pacc[4 * nn + 2 * half] * __expf(gam[i] - gam[jj]) : 0.0f;
                    const float p1 = jj + 1 <= i ? pacc[4 * nn + 2 * half + 1] * __expf(gam[i] - gam[jj + 1]) : 0.0f;
                    pa[nn / 2][(nn % 2) * 2 + half] = pack2(DT, p0, p1);
                }
            /* Q S, once the state warpgroups left S (B = S^T [v][key], K-major) */
            mbar_wait(sfull(px), (uint32_t)(n >> 1) & 1u);
            const uint32_t sbs = sb + Lay::sb + px * 4 * BLK, dus = sb + Lay::du + px * 2 * BLK;
#pragma unroll
            for (int i = 0; i < 64; i++)
                o[i] = 0.0f;
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < 8; kk++)
                wgmma_ss<DT, 128>(o, wgmma_desc(qs + (kk / 4) * BLK + (kk % 4) * 32),
                                  wgmma_desc(sbs + (kk / 4) * 2 * BLK + (kk % 4) * 32), kk > 0);
            wgmma_commit();
            wgmma_wait<0>();
            fence_operands(o);
            const float e_lo = __expf(gam[i0]), e_hi = __expf(gam[i0 + 8]);
#pragma unroll
            for (int nn = 0; nn < 16; nn++)
                o[4 * nn] *= e_lo, o[4 * nn + 1] *= e_lo, o[4 * nn + 2] *= e_hi, o[4 * nn + 3] *= e_hi;
            /* + P Delta (B = Delta^T [v][row], K-major) */
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < 4; kk++)
                wgmma_rs<DT, 128, 0>(o, pa[kk], wgmma_desc(dus + kk * 32), 1);
            wgmma_commit();
            wgmma_wait<0>();
            fence_operands(o);
            mbar_arrive(sempty(px));
            mbar_arrive(empty(sx));
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int i = i0 + 8 * half;
                if (i < L) {
                    uint32_t *row = (uint32_t *)((uint16_t *)out + tok(p.o_stride, b, h, t0 + i));
#pragma unroll
                    for (int nn = 0; nn < 16; nn++)
                        row[4 * nn + t] = pack2(DT, p.query_scale * o[4 * nn + 2 * half],
                                                p.query_scale * o[4 * nn + 2 * half + 1]);
                }
            }
        }
    }
#endif
}

template <int DT, int PASS>
rudnn_status_t wg_launch(rdg_queue_t *q, const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o,
                         int64_t blocks, const char *name)
{
    using Lay = WgLayout<PASS>;
    static std::atomic<int> raised[1][64];
    TRY(allow_smem_once(raised, 0, (const void *)wg_pass_kernel<DT, PASS>, q->dev.index, (int)Lay::smem, name));
    rdg_note_kernel(name);
    unsigned char *scratch = (unsigned char *)rdg_at(o->scratch);
    return rdg_launch_pdl(q, true, name, wg_pass_kernel<DT, PASS>,
                          dim3((unsigned)blocks, (unsigned)p->heads, (unsigned)p->sequences), dim3(Lay::threads),
                          Lay::smem, *p, (const uint16_t *)rdg_at(o->query), (const uint16_t *)rdg_at(o->key),
                          (const float *)rdg_at(o->initial_state), rdg_at(o->table),
                          (const unsigned char *)scratch, (float *)(scratch + carry_x(*p)), rdg_at(o->output),
                          (float *)rdg_at(o->final_state));
}

template <int DT>
rudnn_status_t wg_pass_dt(rdg_queue_t *q, const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o,
                          int pass, int64_t blocks)
{
    if (pass == PASS_STATE)
        return wg_launch<DT, PASS_STATE>(q, p, o, blocks, "gated_delta.wg_state");
    if (pass == PASS_SEGMENT)
        return wg_launch<DT, PASS_SEGMENT>(q, p, o, blocks, "gated_delta.wg_segment");
    if (pass == PASS_LOCAL)
        return wg_launch<DT, PASS_LOCAL>(q, p, o, blocks, "gated_delta.wg_segment");
    return wg_launch<DT, PASS_TRANSITION>(q, p, o, blocks, "gated_delta.wg_segment");
}

} // namespace

int rdg_gdr_wg_fits(const rdg_devinfo_t *dev, const rudnn_gated_delta_plan_t *p, const rudnn_gated_delta_operands_t *o)
{
    /* the output is stored as 16-bit pairs */
    const void *out = rdg_at(o->output);
    const int pairs = (uintptr_t)out % 4 == 0 && p->o_stride[0] % 2 == 0 && p->o_stride[1] % 2 == 0 &&
                      p->o_stride[2] % 2 == 0;
    return GDR_TC_WGMMA && dev->wgmma && p->key_dim == KD && p->value_dim == KD &&
           WgLayout<PASS_STATE>::smem <= dev->smem_optin && pairs;
}

rudnn_status_t rdg_gdr_wg_pass(rdg_queue_t *q, const rudnn_gated_delta_plan_t *p,
                               const rudnn_gated_delta_operands_t *o, int pass, int64_t blocks)
{
    return p->dtype == RUDNN_F16 ? wg_pass_dt<RUDNN_F16>(q, p, o, pass, blocks)
                                 : wg_pass_dt<RUDNN_BF16>(q, p, o, pass, blocks);
}

#endif /* !RDG_HIP */
