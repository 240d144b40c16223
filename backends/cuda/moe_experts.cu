/* Mixture-of-experts kernels, part 2: the SwiGLU experts over dispatched rows.
 *
 *   act[r, i] = round(silu(x_r . gate[e, i, :]) * (x_r . up[e, i, :]))     (GEMM 1, fused)
 *   out[r, h] = round(act_r . down[e, h, :])                                (GEMM 2)
 *
 * for each dispatched row r of expert e (offsets[e] <= r < offsets[e + 1]), FP32 accumulation,
 * act staged in the workspace (rows x inter, the dtype). Both GEMMs are C = A B^T with A [rows, K]
 * and B [N, K] row-major (K contiguous in both), so one kernel shape serves both; GEMM 1 computes
 * the gate and up tiles of the same columns side by side and applies silu(g) * u in its epilogue.
 *
 * Tiles without host synchronisation. Every block owns BM rows of ONE expert. Expert e gets the
 * virtual tile slots [s(e), s(e + 1)) with s(e) = floor((offsets[e] + e (BM - 1)) / BM): at least
 * ceil(count_e / BM) slots (an extra slot finds no rows and is skipped), and s(E) =
 * floor((rows + E (BM - 1)) / BM) slots in all, which the host knows. A block finds the expert of
 * slot v as (number of e in 0..E with s(e) <= v) - 1, one __syncthreads_count per blockDim experts.
 * experts_scalar: grid.x runs over the column tiles (fastest, so the blocks of one row tile run
 * together and share its rows in L2), grid.y over the slots (grid-stride past 65535).
 *
 * experts_scalar: CUDA-core kernels, 64 x 64 tiles of 256 threads, K in steps of 16 through
 * shared memory (FP32), any H, I and alignment.
 *
 * Tensor-core candidates (CUDA), most preferred first: moe.wgmma_tma, the TMA + warp-specialised
 * kernel of moe_experts_tma.cu (sm_90a with the driver's tensor-map encoder; same tiles and work
 * items, 16% faster on the Mixtral shape); then the kernels below:
 * 128-row tiles, K in steps of 64 through a cp.async pipeline of
 * 128-byte shared rows with the 128-byte XOR swizzle (wgmma's K-major layout; conflict-free for
 * ldmatrix too), FP32 accumulators, silu(g) * u in GEMM 1's epilogue (the tile holds the gate rows
 * and the up rows of the same columns, so a thread holds g and u of the same elements):
 *   - moe.wgmma_cp_async (sm_90a binaries): wgmma m64n256k16, 128 x 256 tiles, 4 stages, 1 CTA/SM
 *     (a tile of 64 rows or fewer, an expert's last, runs the MMAs of one warpgroup only);
 *   - moe.mma_sync (sm_80+, PTX for newer GPUs): mma.sync m16n8k16 + ldmatrix, 128 x 128 tiles,
 *     3 stages, 2 CTAs/SM.
 * The host learns which one the loaded binary has from a probe kernel's launch bound (no launch,
 * no synchronisation). Blocks take work items (column group of 8 tiles, slot, column): the CTAs
 * running together share a few row tiles and each expert's weight tiles in L2, so weights are read
 * from DRAM about once per pass instead of once per row tile.
 * They need H % 8 == 0, I % 8 == 0 and 16-byte aligned operands (16-byte cp.async rows); where a
 * candidate cannot run, rdg_moe_experts_check says why and ops/ picks another (no kernel entry
 * falls back by itself). The cuBLAS candidates (moe_experts_cublas.cu) are comparison paths.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdg_internal.h"
#include "elem.cuh"
#include "moe_tc.cuh"
#include "mma_sync.cuh"

namespace {

/* ---- tile slots (slot_start: moe_tc.cuh) ---- */

/* Expert, first row and row count of slot v; false when the slot has no rows. Every thread of the
 * block must call it (it contains barriers) and gets the same answer. */
__device__ bool find_tile(const uint32_t *__restrict__ offsets, int experts, int64_t v, int bm, int *expert,
                          int64_t *row0, int *rows)
{
    int cnt = 0;
    for (int base = 0; base <= experts; base += blockDim.x) {
        const int i = base + (int)threadIdx.x;
        const bool pred = i <= experts && slot_start(offsets[i], i, bm) <= v;
        cnt += __syncthreads_count(pred);
    }
    const int e = cnt - 1; /* s(0) = 0 <= v, so cnt >= 1 */
    if (e >= experts)
        return false;
    *expert = e;
    return slot_rows(offsets, e, v, bm, row0, rows);
}

int64_t slot_count(int64_t rows, int64_t experts, int bm)
{
    return (rows + experts * (bm - 1)) / bm;
}

/* ---- scalar kernels ---- */

#define SG_BM 64
#define SG_BN 64
#define SG_BK 16
#define SG_THREADS 256

/* C[r, n] = A[r, :] . B0[e, n, :] (DUAL: act = silu(A . B0) * (A . B1)) for the rows of each slot. */
template <int DT, bool DUAL>
__global__ void RDG_LAUNCH_BOUNDS(SG_THREADS, 2)
scalar_gemm_kernel(const void *__restrict__ a, const void *__restrict__ b0, const void *__restrict__ b1,
                   const uint32_t *__restrict__ offsets, void *__restrict__ c, int experts, int64_t n_total,
                   int64_t k_total, int64_t slots)
{
    __shared__ float as[SG_BK][SG_BM + 1];
    __shared__ float bs[DUAL ? 2 : 1][SG_BK][SG_BN + 1];
    const int tid = threadIdx.x;
    const int tx = tid % 16, ty = tid / 16;
    const int64_t n0 = (int64_t)blockIdx.x * SG_BN;

    for (int64_t v = blockIdx.y; v < slots; v += gridDim.y) {
        int e, rows;
        int64_t row0;
        if (!find_tile(offsets, experts, v, SG_BM, &e, &row0, &rows))
            continue; /* uniform */
        const int64_t wbase = (int64_t)e * n_total; /* first weight row of expert e */
        float acc[DUAL ? 2 : 1][4][4];
#pragma unroll
        for (int d = 0; d < (DUAL ? 2 : 1); d++)
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    acc[d][i][j] = 0.0f;

        for (int64_t k0 = 0; k0 < k_total; k0 += SG_BK) {
#pragma unroll
            for (int q = 0; q < (SG_BM * SG_BK) / SG_THREADS; q++) {
                const int l = tid + q * SG_THREADS;
                const int m = l / SG_BK, kk = l % SG_BK;
                const int64_t k = k0 + kk;
                as[kk][m] = (m < rows && k < k_total) ? Elem<DT>::ld(a, (row0 + m) * k_total + k) : 0.0f;
                const bool nv = n0 + m < n_total && k < k_total; /* m doubles as the column here */
                const int64_t bi = (wbase + n0 + m) * k_total + k;
                bs[0][kk][m] = nv ? Elem<DT>::ld(b0, bi) : 0.0f;
                if (DUAL)
                    bs[DUAL ? 1 : 0][kk][m] = nv ? Elem<DT>::ld(b1, bi) : 0.0f;
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < SG_BK; kk++) {
                float av[4], bv[DUAL ? 2 : 1][4];
#pragma unroll
                for (int i = 0; i < 4; i++)
                    av[i] = as[kk][ty + 16 * i];
#pragma unroll
                for (int d = 0; d < (DUAL ? 2 : 1); d++)
#pragma unroll
                    for (int j = 0; j < 4; j++)
                        bv[d][j] = bs[d][kk][tx + 16 * j];
#pragma unroll
                for (int d = 0; d < (DUAL ? 2 : 1); d++)
#pragma unroll
                    for (int i = 0; i < 4; i++)
#pragma unroll
                        for (int j = 0; j < 4; j++)
                            acc[d][i][j] = fmaf(av[i], bv[d][j], acc[d][i][j]);
            }
            __syncthreads();
        }

#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int m = ty + 16 * i;
            if (m >= rows)
                continue;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int64_t n = n0 + tx + 16 * j;
                if (n < n_total) {
                    const float r = DUAL ? silu_mul(acc[0][i][j], acc[DUAL ? 1 : 0][i][j]) : acc[0][i][j];
                    Elem<DT>::st(c, (row0 + m) * n_total + n, r);
                }
            }
        }
    }
}

/* ---- tensor-core kernels ---- */

#if RDG_MOE_TENSOR_CORES

/* Two tile shapes, one kernel template (BN = B rows per tile; GEMM 1's tile is BN/2 gate rows then
 * the BN/2 up rows of the same columns):
 *   BN = 256: wgmma m64n256k16 (sm_90a), 4 stages, a wgmma group left running across iterations,
 *             1 CTA per SM (128 accumulators per thread)
 *   BN = 128: mma.sync m16n8k16 (sm_80+), 3 stages, 2 CTAs per SM
 * The host launches BN = 256 only where the loaded binary has wgmma (rdg_devinfo_t wgmma). */
#define TC_THREADS 256

template <int BN>
struct TcCfg {
    enum {
        STAGES = BN == 256 ? 4 : 3,
        INFLIGHT = BN == 256 ? 1 : 0,
        /* tiles in flight ahead of the one being multiplied: a stage is refilled only after every
         * read of it finished, so a wgmma group left running costs one stage */
        DIST = STAGES - 1 - INFLIGHT,
        MIN_BLOCKS = BN == 256 ? 1 : 2,
        STAGE_BYTES = (TC_BM + BN) * TC_BK * 2,
        SMEM = STAGES * STAGE_BYTES + 1024 /* + alignment of the stages to 1024 bytes */
    };
};

/* 16 bytes global -> shared, zero-filled when !valid (src is then not read) */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* ---- sm_80+: mma.sync m16n8k16 with ldmatrix ---- */

__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t (&r)[4])
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* C = A B^T over the slots' rows, see the file comment. a: [rows, K]; b0 (b1): [E, N, K]; c: [rows, N].
 * Shared stage: A tile [128 rows][64 k], then B tile [BN rows][64 k] (DUAL: BN/2 gate rows, then
 * the BN/2 up rows of the same columns), swizzled 128-byte rows.
 *   BN = 256, wgmma: warpgroup g multiplies A rows g*64 .. +64 by all 256 B rows (m64n256k16);
 *     accumulator block j (0..31) holds B rows j*8 .. +8, so DUAL pairs gate block j with up j + 16.
 *   BN = 128, mma.sync: warp (wm, wn) = (warp / 4, warp % 4) multiplies A rows wm*64 .. +64 by B
 *     rows wn*32 .. +32 (DUAL: gate rows wn*16 .. +16 and up rows 64 + wn*16 .. +16); fragment
 *     (i, j): A rows i*16 .. +16, B rows of n8 block j.
 * Both accumulator layouts give a thread rows r0 + lane/4 (+8) and columns 2 (lane % 4) + 0, 1 of a
 * 16 x 8 block.
 * Raster: work item L = (column group, slot, column in group), TC_GROUP_N column tiles per group,
 * so the CTAs running together share a few A row tiles and the weight tiles of a few experts. */
template <int DT, bool DUAL, int BN>
__global__ void __launch_bounds__(TC_THREADS, TcCfg<BN>::MIN_BLOCKS)
tc_gemm_kernel(const uint16_t *__restrict__ a, const uint16_t *__restrict__ b0, const uint16_t *__restrict__ b1,
               const uint32_t *__restrict__ offsets, uint16_t *__restrict__ c, int experts, int64_t n_total,
               int64_t k_total, int64_t slots, int64_t n_tiles)
{
    typedef TcCfg<BN> Cfg;
    extern __shared__ __align__(128) uint8_t tc_smem[];
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int warp = tid / 32;
    constexpr int NCOLS = DUAL ? BN / 2 : BN; /* output columns per tile */
    constexpr int BQ = BN / 32;               /* B chunks per thread and stage */
    constexpr int HQ = DUAL ? BQ / 2 : BQ;    /* ... from the first matrix */
    const uint32_t smem0 = (smem_u32(tc_smem) + 1023u) & ~1023u;
    const int ktiles = (int)((k_total + TC_BK - 1) / TC_BK);
    const int64_t items = tc_items(n_tiles, slots);

    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        int64_t nt, v;
        if (!tc_item(item, n_tiles, slots, &nt, &v))
            continue; /* uniform */
        const int64_t n0 = nt * NCOLS;
        int e, rows;
        int64_t row0;
        if (!find_tile(offsets, experts, v, TC_BM, &e, &row0, &rows))
            continue; /* uniform */
        const uint16_t *ga = a + row0 * k_total;
        const uint16_t *gb0 = b0 + ((int64_t)e * n_total) * k_total;
        const uint16_t *gb1 = DUAL ? b1 + ((int64_t)e * n_total) * k_total : gb0;

        /* Each thread copies 4 chunks of A and BQ of B per stage: chunk q * 256 + tid is row
         * tid / 8 + 32 q, 16-byte column tid % 8; the swizzle of those rows is the same. */
        const int lrow = tid / 8, lch = tid % 8;
        const uint32_t ldst = swz(lrow, lch);
        const uint16_t *pa = ga + (int64_t)lrow * k_total + lch * 8;
        /* B rows: q < HQ from pb0 (DUAL: gate), the others from pb1 (DUAL: up), 32 rows apart */
        const int64_t bn = n0 + lrow; /* column of q = 0 */
        const uint16_t *pb0 = gb0 + bn * k_total + lch * 8;
        const uint16_t *pb1 = DUAL ? gb1 + bn * k_total + lch * 8 : pb0;
        const int64_t b_stride = 32 * k_total;
        auto load_stage = [&](int stage, int kt) {
            const uint32_t sa = smem0 + stage * Cfg::STAGE_BYTES + ldst;
            const uint32_t sb = sa + TC_BM * TC_BK * 2;
            const int64_t k0 = (int64_t)kt * TC_BK;
            const bool k_ok = k0 + lch * 8 < k_total;
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const bool ok = k_ok && lrow + 32 * q < rows;
                cp_async16(sa + q * 32 * 128, ok ? (const void *)(pa + (int64_t)q * 32 * k_total + k0) : (const void *)a,
                           ok);
            }
#pragma unroll
            for (int q = 0; q < BQ; q++) {
                const int qq = q % HQ;
                const bool ok = k_ok && bn + 32 * qq < n_total;
                const uint16_t *src = (q < HQ ? pb0 : pb1) + qq * b_stride + k0;
                cp_async16(sb + q * 32 * 128, ok ? (const void *)src : (const void *)a, ok);
            }
        };

#pragma unroll
        for (int s = 0; s < Cfg::DIST; s++) {
            if (s < ktiles)
                load_stage(s, s);
            cp_async_commit();
        }

        if constexpr (BN == 256) {
#if RDG_HAS_WGMMA
            const int wg = warp / 4;
            /* A tile with 64 rows or fewer (an expert's last) leaves warpgroup 1 only padding rows:
             * it skips its MMAs (uniform in the warpgroup) and the SM's tensor cores do half the work. */
            const bool wg_busy = wg * 64 < rows; /* a tile of <= 64 rows leaves one warpgroup idle */
            float acc[128];
#pragma unroll
            for (int i = 0; i < 128; i++)
                acc[i] = 0.0f;
            for (int kt = 0; kt < ktiles; kt++) {
                cp_async_wait<Cfg::DIST - 1>();
                fence_proxy_async();
                __syncthreads();
                {
                    const int nk = kt + Cfg::DIST;
                    if (nk < ktiles)
                        load_stage(nk % Cfg::STAGES, nk);
                    cp_async_commit();
                }
                const uint32_t st = smem0 + (kt % Cfg::STAGES) * Cfg::STAGE_BYTES;
                const uint32_t sa = st + wg * 64 * 128;
                const uint32_t sb = st + TC_BM * TC_BK * 2;
                if (wg_busy) {
                    wgmma_fence();
#pragma unroll
                    for (int ks = 0; ks < TC_BK / 16; ks++)
                        wgmma_256<DT>(acc, wgmma_desc(sa + ks * 32), wgmma_desc(sb + ks * 32));
                    wgmma_commit();
                    wgmma_wait<Cfg::INFLIGHT>();
                    fence_operands(acc);
                }
            }
            wgmma_wait<0>();
            fence_operands(acc);
            cp_async_wait<0>();
            __syncthreads(); /* the next item's prologue overwrites the stages */

            store_acc_256<DT, DUAL>(acc, c, row0, rows, wg * 64 + (warp % 4) * 16, n0, n_total, lane);
#else
            __trap(); /* the host launches BN = 256 only where rdg_devinfo_t reports wgmma */
#endif
        } else {
            const int wm = warp / 4, wn = warp % 4;
            float acc[4][4][4];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
#pragma unroll
                    for (int r = 0; r < 4; r++)
                        acc[i][j][r] = 0.0f;
            /* ldmatrix row/chunk of this lane: A (16 x 16 at rows r0..): row r0 + lane % 16, chunk
             * 2 ks + lane / 16. B (two n8 x k16): row r0 + (lane / 16) * 8 + lane % 8, chunk
             * 2 ks + (lane / 8) % 2. */
            const int a_row = wm * 64 + lane % 16;
            const int a_ch = lane / 16;
            const int b_row0 = DUAL ? wn * 16 : wn * 32;
            const int b_row1 = DUAL ? BN / 2 + wn * 16 : wn * 32 + 16;
            const int b_sub = (lane / 16) * 8 + lane % 8;
            const int b_ch = (lane / 8) % 2;
            for (int kt = 0; kt < ktiles; kt++) {
                cp_async_wait<Cfg::DIST - 1>();
                __syncthreads();
                {
                    const int nk = kt + Cfg::DIST;
                    if (nk < ktiles)
                        load_stage(nk % Cfg::STAGES, nk);
                    cp_async_commit();
                }
                const uint32_t sa = smem0 + (kt % Cfg::STAGES) * Cfg::STAGE_BYTES;
                const uint32_t sb = sa + TC_BM * TC_BK * 2;
#pragma unroll
                for (int ks = 0; ks < TC_BK / 16; ks++) {
                    uint32_t af[4][4], bf[2][4];
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        ldmatrix_x4(sa + swz(a_row + i * 16, 2 * ks + a_ch), af[i]);
                    ldmatrix_x4(sb + swz(b_row0 + b_sub, 2 * ks + b_ch), bf[0]);
                    ldmatrix_x4(sb + swz(b_row1 + b_sub, 2 * ks + b_ch), bf[1]);
#pragma unroll
                    for (int i = 0; i < 4; i++)
#pragma unroll
                        for (int j = 0; j < 4; j++)
                            mma16816<DT>(acc[i][j], af[i], bf[j / 2][(j % 2) * 2], bf[j / 2][(j % 2) * 2 + 1]);
                }
            }
            cp_async_wait<0>();
            __syncthreads(); /* the next item's prologue overwrites the stages */

            /* epilogue: fragment (i, j) holds rows wm*64 + i*16 + lane/4 (+8), columns 2 (lane % 4) + 0, 1 */
#pragma unroll
            for (int i = 0; i < 4; i++) {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int m = wm * 64 + i * 16 + lane / 4 + h * 8;
                    if (m >= rows)
                        continue;
                    uint16_t *crow = c + (row0 + m) * n_total;
                    if (DUAL) {
#pragma unroll
                        for (int j = 0; j < 2; j++) {
                            const int64_t n = n0 + wn * 16 + j * 8 + (lane % 4) * 2;
                            if (n < n_total) {
                                const float lo = silu_mul(acc[i][j][2 * h], acc[i][j + 2][2 * h]);
                                const float hi = silu_mul(acc[i][j][2 * h + 1], acc[i][j + 2][2 * h + 1]);
                                *(uint32_t *)(crow + n) = pack2(DT, lo, hi);
                            }
                        }
                    } else {
#pragma unroll
                        for (int j = 0; j < 4; j++) {
                            const int64_t n = n0 + wn * 32 + j * 8 + (lane % 4) * 2;
                            if (n < n_total)
                                *(uint32_t *)(crow + n) = pack2(DT, acc[i][j][2 * h], acc[i][j][2 * h + 1]);
                        }
                    }
                }
            }
        }
    }
}

#endif /* RDG_MOE_TENSOR_CORES */

/* ---- host side ---- */

rudnn_status_t begin(rdg_queue_t *q) { return rdg_use_device(q->dev.index); }

typedef void (*scalar_fn)(const void *, const void *, const void *, const uint32_t *, void *, int, int64_t, int64_t,
                          int64_t);

template <bool DUAL>
scalar_fn scalar_kernel(rudnn_dtype_t dt)
{
    switch (dt) {
    case RUDNN_F32:
        return scalar_gemm_kernel<RUDNN_F32, DUAL>;
    case RUDNN_F16:
        return scalar_gemm_kernel<RUDNN_F16, DUAL>;
    default:
        return scalar_gemm_kernel<RUDNN_BF16, DUAL>;
    }
}

dim3 slot_grid(int64_t n_tiles, int64_t slots)
{
    return dim3((unsigned)n_tiles, (unsigned)(slots < 65535 ? (slots > 0 ? slots : 1) : 65535));
}

#if RDG_MOE_TENSOR_CORES
typedef void (*tc_fn)(const uint16_t *, const uint16_t *, const uint16_t *, const uint32_t *, uint16_t *, int,
                      int64_t, int64_t, int64_t, int64_t);

/* probed once at device open (device_caps.cu) */
int has_wgmma(const rdg_devinfo_t *dev)
{
    return dev->wgmma;
}

/* dynamic shared memory limits raised, per kernel slot (tc_launch) and device */
std::atomic<int> g_smem_done[8][64];

template <int BN>
rudnn_status_t tc_launch(rdg_queue_t *q, const rudnn_moe_rows_plan_t *plan, const void *const *ptrs,
                         const uint32_t *off)
{
    typedef TcCfg<BN> Cfg;
    const bool bf16 = plan->dtype == RUDNN_BF16;
    tc_fn f1 = bf16 ? tc_gemm_kernel<RUDNN_BF16, true, BN> : tc_gemm_kernel<RUDNN_F16, true, BN>;
    tc_fn f2 = bf16 ? tc_gemm_kernel<RUDNN_BF16, false, BN> : tc_gemm_kernel<RUDNN_F16, false, BN>;
    const int slot = (BN == 256 ? 4 : 0) + (bf16 ? 0 : 2);
    TRY(allow_smem_once(g_smem_done, slot, (const void *)f1, q->dev.index, Cfg::SMEM, "moe experts"));
    TRY(allow_smem_once(g_smem_done, slot + 1, (const void *)f2, q->dev.index, Cfg::SMEM, "moe experts"));
    const int64_t slots = slot_count(plan->rows, plan->experts, TC_BM);
    const int64_t nt1 = rdg_ceil_div(plan->inter, BN / 2), nt2 = rdg_ceil_div(plan->hidden, BN);
    const int64_t max_grid = 0x7fffffff;
    const int64_t items1 = tc_items(nt1, slots);
    const int64_t items2 = tc_items(nt2, slots);
    f1<<<dim3((unsigned)(items1 < max_grid ? items1 : max_grid)), TC_THREADS, Cfg::SMEM, q->stream>>>(
        (const uint16_t *)ptrs[0], (const uint16_t *)ptrs[1], (const uint16_t *)ptrs[2], off, (uint16_t *)ptrs[4],
        plan->experts, plan->inter, plan->hidden, slots, nt1);
    TRY(rdg_launched("moe experts_tensor_core gate/up"));
    f2<<<dim3((unsigned)(items2 < max_grid ? items2 : max_grid)), TC_THREADS, Cfg::SMEM, q->stream>>>(
        (const uint16_t *)ptrs[4], (const uint16_t *)ptrs[3], nullptr, off, (uint16_t *)ptrs[5], plan->experts,
        plan->hidden, plan->inter, slots, nt2);
    return rdg_launched("moe experts_tensor_core down");
}
#endif

rudnn_status_t scalar_launch(rdg_queue_t *q, const rudnn_moe_rows_plan_t *plan, rudnn_mem_ref_t tokens,
                             const uint32_t *off, rudnn_mem_ref_t gate, rudnn_mem_ref_t up, rudnn_mem_ref_t down,
                             rudnn_mem_ref_t act, rudnn_mem_ref_t out)
{
    const int64_t slots = slot_count(plan->rows, plan->experts, SG_BM);
    scalar_fn f1 = scalar_kernel<true>(plan->dtype);
    f1<<<slot_grid(rdg_ceil_div(plan->inter, SG_BN), slots), SG_THREADS, 0, q->stream>>>(
        rdg_at(tokens), rdg_at(gate), rdg_at(up), off, rdg_at(act), plan->experts, plan->inter, plan->hidden, slots);
    TRY(rdg_launched("moe experts_scalar gate/up"));
    scalar_fn f2 = scalar_kernel<false>(plan->dtype);
    f2<<<slot_grid(rdg_ceil_div(plan->hidden, SG_BN), slots), SG_THREADS, 0, q->stream>>>(
        rdg_at(act), rdg_at(down), nullptr, off, rdg_at(out), plan->experts, plan->hidden, plan->inter, slots);
    return rdg_launched("moe experts_scalar down");
}

/* The expert candidates, most preferred first (hal/table.h); rdg_moe_experts_check says which run
 * where, rdg_moe_experts_run runs the one ops/ chose. The cuBLAS ones are comparison paths
 * (moe_experts_cublas.cu), run only when named; they read the expert offsets back. */
enum Candidate {
    C_WGMMA_TMA,
    C_WGMMA_CP_ASYNC,
    C_MMA_SYNC,
    C_SCALAR,
    C_CUBLAS_GROUPED,
    C_CUBLAS_LOOP,
    C_CUBLAS_GROUPED_GU16,
    C_CUBLAS_LOOP_GU16,
    C_COUNT
};

const rudnn_kernel_candidate_t k_candidates[C_COUNT] = {
    {"moe.wgmma_tma", RUDNN_MOE_TENSOR_CORE, 0},
    {"moe.wgmma_cp_async", RUDNN_MOE_TENSOR_CORE, 0},
    {"moe.mma_sync", RUDNN_MOE_TENSOR_CORE, 0},
    {"moe.scalar", RUDNN_MOE_SCALAR, 0},
    {"moe.cublas_grouped", RUDNN_MOE_TENSOR_CORE, RUDNN_CANDIDATE_NAMED_ONLY | RUDNN_CANDIDATE_SYNCS},
    {"moe.cublas_loop", RUDNN_MOE_TENSOR_CORE, RUDNN_CANDIDATE_NAMED_ONLY | RUDNN_CANDIDATE_SYNCS},
    {"moe.cublas_grouped_gu16", RUDNN_MOE_TENSOR_CORE, RUDNN_CANDIDATE_NAMED_ONLY | RUDNN_CANDIDATE_SYNCS},
    {"moe.cublas_loop_gu16", RUDNN_MOE_TENSOR_CORE, RUDNN_CANDIDATE_NAMED_ONLY | RUDNN_CANDIDATE_SYNCS},
};

#if RDG_MOE_TENSOR_CORES || (!RDG_HIP && RDG_HAVE_CUBLAS)
/* Why a matrix-unit candidate (ours or cuBLAS's) cannot take plan, or NULL: they all read 16-bit
 * operands in 16-byte rows. */
const char *matrix_operands_why(const rudnn_moe_rows_plan_t *plan)
{
    if (plan->dtype != RUDNN_F16 && plan->dtype != RUDNN_BF16)
        return "matrix units need f16 or bf16 weights";
    if (plan->hidden % 8 || plan->inter % 8)
        return "hidden and inter must be multiples of 8 (16-byte rows)";
    if (plan->align < 16)
        return "every operand must be 16-byte aligned";
    return nullptr;
}
#endif

#if RDG_MOE_TENSOR_CORES
/* Why our tensor-core candidate c cannot run plan on dev, or NULL. */
const char *tensor_core_why(const rdg_devinfo_t *dev, const rudnn_moe_rows_plan_t *plan, int c, char *buf,
                            size_t cap)
{
    if (const char *why = matrix_operands_why(plan))
        return why;
    if (c == C_MMA_SYNC) {
        if (dev->arch < 80) {
            snprintf(buf, cap, "mma.sync needs sm_80 or later (the device is sm_%d)", dev->arch);
            return buf;
        }
        return (size_t)TcCfg<128>::SMEM <= dev->smem_optin ? nullptr : "the device has too little shared memory";
    }
    if (!has_wgmma(dev)) {
        snprintf(buf, cap, "wgmma needs an sm_90a device and binary (the device is sm_%d)", dev->arch);
        return buf;
    }
    if (c == C_WGMMA_CP_ASYNC)
        return (size_t)TcCfg<256>::SMEM <= dev->smem_optin ? nullptr : "the device has too little shared memory";
    return rdg_moe_tma_why(dev, plan);
}
#endif

} // namespace

const rudnn_kernel_candidate_t *rdg_moe_experts_candidates(uint32_t *count)
{
    *count = C_COUNT;
    return k_candidates;
}

void rdg_moe_experts_check(void *device, const rudnn_moe_rows_plan_t *plan, uint32_t c,
                           rudnn_candidate_verdict_t *verdict)
{
    const rdg_devinfo_t *dev = rdg_devinfo_of(device);
    const char *why = nullptr;
    switch (c) {
    case C_SCALAR:
        break;
    case C_WGMMA_TMA:
    case C_WGMMA_CP_ASYNC:
    case C_MMA_SYNC:
#if RDG_MOE_TENSOR_CORES
        why = tensor_core_why(dev, plan, (int)c, verdict->why, sizeof verdict->why);
#else
        why = "this plugin has no tensor-core expert kernels";
#endif
        break;
    default:
#if !RDG_HIP && RDG_HAVE_CUBLAS
        why = matrix_operands_why(plan);
        if (!why)
            why = rdg_cublas_unavailable();
#else
        why = "this plugin was built without cuBLAS";
#endif
        break;
    }
    (void)dev;
    (void)plan;
    verdict->runs = why == nullptr;
    verdict->preferred = verdict->runs;
    if (why && why != verdict->why)
        snprintf(verdict->why, sizeof verdict->why, "%s", why);
}

rudnn_status_t rdg_moe_experts_run(void *queue, const rudnn_moe_rows_plan_t *plan, uint32_t c,
                                   rudnn_mem_ref_t tokens, rudnn_mem_ref_t offsets, rudnn_mem_ref_t gate,
                                   rudnn_mem_ref_t up, rudnn_mem_ref_t down, rudnn_mem_ref_t act,
                                   rudnn_mem_ref_t out)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    if (plan->rows <= 0)
        return RUDNN_STATUS_SUCCESS;
    TRY(begin(q));
    if (c >= C_COUNT)
        return rdg_error(RUDNN_STATUS_INTERNAL, "%s: moe experts: no candidate %u", RUDNN_GPU_BACKEND_NAME, c);
    rdg_note_kernel(k_candidates[c].name);
    const uint32_t *off = (const uint32_t *)rdg_at(offsets);
    if (c == C_SCALAR)
        return scalar_launch(q, plan, tokens, off, gate, up, down, act, out);
#if RDG_MOE_TENSOR_CORES || (!RDG_HIP && RDG_HAVE_CUBLAS)
    const void *ptrs[6] = {rdg_at(tokens), rdg_at(gate), rdg_at(up), rdg_at(down), rdg_at(act), rdg_at(out)};
#endif
    switch (c) {
#if RDG_MOE_TENSOR_CORES
    case C_WGMMA_TMA:
        return rdg_moe_experts_tma(q, plan, ptrs, off);
    case C_WGMMA_CP_ASYNC:
        return tc_launch<256>(q, plan, ptrs, off);
    case C_MMA_SYNC:
        return tc_launch<128>(q, plan, ptrs, off);
#endif
#if !RDG_HIP && RDG_HAVE_CUBLAS
    case C_CUBLAS_GROUPED:
    case C_CUBLAS_LOOP:
    case C_CUBLAS_GROUPED_GU16:
    case C_CUBLAS_LOOP_GU16:
        return rdg_moe_experts_cublas(q, plan, ptrs, off, c == C_CUBLAS_LOOP || c == C_CUBLAS_LOOP_GU16,
                                      c == C_CUBLAS_GROUPED_GU16 || c == C_CUBLAS_LOOP_GU16);
#endif
    default:
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: %s is not built into this plugin", RUDNN_GPU_BACKEND_NAME,
                         k_candidates[c].name);
    }
}
