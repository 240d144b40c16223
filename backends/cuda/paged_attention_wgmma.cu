/* paged_attention.wgmma_prefill (CUDA only, sm_90a): packed variable-length prefill over the paged
 * cache on Hopper's warpgroup MMA, F16/BF16, D and Dv multiples of 8 up to 128, one split.
 * attention_wgmma.cu's design (FlashAttention-3's) with the keys gathered from pages:
 *   - a work item is one block of the plan (up to 128 consecutive queries of one sequence, kind
 *     7) and one query head: rows are queries. Items run from the plan's last block to its
 *     first, the query heads fastest, so CTAs running together read the same pages (L2) and
 *     each sequence's longest (causal) blocks start first. One CTA an SM takes every gridDim.x-th
 *     item (persistent): the producer stages the next item's Q, row limits and first tiles while
 *     the consumers finish one (q_full / q_empty);
 *   - warpgroup 0, the producer: its 128 threads gather the Q rows once and then K and V tiles of
 *     BN keys with 16-byte cp.async (8 threads a row: 128 contiguous bytes a warp instruction),
 *     each row from its page (keys past the block's range zero-filled), written in the 128-byte
 *     swizzle wgmma reads; a thread reads one table entry a tile (a tile ahead) and the warp
 *     shares it by shuffles; cp.async.mbarrier.arrive.noinc signals a stage full once the
 *     thread's copies land (the full barriers count 128 arrivals);
 *   - warpgroups 1 and 2, the consumers: 64 rows each, S = Q K^T (wgmma, both operands K-major
 *     in shared memory), the mask (each row's own limit) and the online softmax in registers, P
 *     as the A fragments of O += P V (V read MN-major from its stage), ping-pong turns and the
 *     intra-warpgroup overlap of attention_wgmma.cu;
 *   - a tile that some row of the block sees only in part (causal diagonals, the range's end):
 *     the producer waits for its V, sets its non-finite values to 0 and notes each column's first
 *     such key; after that tile's P V a consumer makes NaN the columns whose noted key lies below
 *     the row's limit (the MMA would hand a row 0 x NaN from a key it does not see: the contract
 *     lets a NaN reach only the rows it enters).
 * Shared memory: Q [QB][128 rows][128 B] | K [STAGES][QB][BN][128 B] | V [STAGES][VB][BN][128 B]
 * | out staging [2][64][OUT_PITCH] | mbarriers | PwMeta (the item) | the producer warps' reductions | the cleaned tiles' first
 * non-finite key a column [STAGES][128].
 * Named barriers: 1, 2 the consumers' turns, 3 both consumer warpgroups (an item's start), 4 the
 * producer's, 5 and 6 each consumer warpgroup's (its staged output rows). */
#include <stdio.h>
#include <string.h>

#include <atomic>

#include "rdg_internal.h"

#include "mbarrier.cuh"
#include "paged_attention.cuh"
#include "paged_attention_tuning.h"
#include "wgmma.cuh"
#include "wgmma_softmax.cuh"

namespace {

constexpr int BN = PA_WG_BN, STAGES = PA_WG_STAGES;
constexpr int BM = 128;      /* query rows of a CTA: two consumer warpgroups of 64 */
constexpr int ROW_BYTES = 128; /* 64 16-bit elements: one swizzled shared row */
constexpr int THREADS = 384;
static_assert(THREADS == 3 * 128 && setmaxnreg_fits(PA_WG_PRODUCER_REGS, 2, PA_WG_CONSUMER_REGS),
              "the warpgroups' registers after setmaxnreg exceed the launch's");
constexpr int KIND = 7;      /* the plan's blocks of up to 128 queries */
static_assert(((int64_t)1 << KIND) == BM, "a block's queries fill the CTA's rows");
static_assert(BN == 128, "the producer's 128 threads hold a tile's cache rows, one each");

/* What the producer tells the consumers about a work item (shared memory, written before its
 * q_full completes, rewritten only after q_empty says the consumers are past it). */
struct PwMeta {
    int q0, nq, h, ntiles; /* the block's queries, the query head, the key tiles [0, n) */
    int wg_max[2];         /* each consumer warpgroup's largest row limit */
    int cta_min;           /* the block's smallest row limit */
    int pad;
    int lim[BM];           /* each row's limit (0 past the block's queries) */
};

/* bytes an output row takes in the staging area: 128 columns and 16 bytes (the rows of a quad's
 * 4-byte stores fall in distinct banks) */
constexpr int OUT_PITCH = 128 * 2 + 16;

constexpr size_t wg_smem_bytes(int qb, int vb)
{
    return 1024 /* the swizzle atom's alignment */ + (size_t)qb * BM * ROW_BYTES +
           (size_t)STAGES * (qb + vb) * BN * ROW_BYTES + 2 * 64 * OUT_PITCH + 8 * (2 + 4 * STAGES) + sizeof(PwMeta) +
           (16 + STAGES * 128) * sizeof(int);
}

int blocks_of(int64_t d)
{
    return d <= 64 ? 1 : 2;
}

#if RDG_HAS_WGMMA
/* Signals bar once every cp.async this thread issued so far has landed (one of its counted
 * arrivals). */
__device__ __forceinline__ void cp_async_arrive(uint32_t bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

/* Gathers a tile of BN keys of a paged cache for KV head hk into a stage of NB 64-column blocks,
 * width w elements. Warp wp stages rows 32 wp .. 32 wp + 31, whose cache rows its lanes hold
 * (row: lane x holds row 32 wp + x's, -1 past the range: zero-filled); each pass 4 rows of 8
 * lanes (a 128-byte segment a row), the row's cache row shuffled from its lane. */
template <int NB>
__device__ __forceinline__ void gather_tile(const PaDev &d, const void *cache, int w, int hk, int row, uint32_t stage,
                                            int tid)
{
    const int lane = tid % 32, chunk = lane % 8;
#pragma unroll
    for (int p = 0; p < 8; p++) {
        const int x = 4 * p + lane / 8, r = 32 * (tid / 32) + x;
        const int crow = __shfl_sync(0xffffffffu, row, x);
        const char *src = (const char *)cache + (((int64_t)crow * d.heads_kv + hk) * w + chunk * 8) * 2;
        const uint32_t dst = stage + (uint32_t)(r * ROW_BYTES + ((chunk ^ (r % 8)) * 16));
#pragma unroll
        for (int b = 0; b < NB; b++) {
            const bool ok = crow >= 0 && b * 64 + chunk * 8 < w;
            rdg_copy16_async_zfill(dst + b * BN * ROW_BYTES, ok ? src + b * 128 : (const char *)cache, ok);
        }
    }
}

/* The cache row of key j of a history (its table), -1 at or past n. */
__device__ __forceinline__ int cache_row(const PaDev &d, const int32_t *table, int j, int n)
{
    if (j >= n)
        return -1;
    const uint32_t pi = pa_div(d.ps, (uint32_t)j);
    return table[pi] * d.page_size + (j - (int)pi * d.page_size);
}
#endif

template <int DT, int QB, int VB>
__global__ void __launch_bounds__(THREADS, 1) pa_wgmma_kernel(const PaDev d, const int64_t items)
{
#if RDG_HAS_WGMMA
    constexpr int NV = VB * 64; /* O columns per wgmma */
    constexpr int Q_BYTES = QB * BM * ROW_BYTES;
    constexpr int K_BYTES = QB * BN * ROW_BYTES; /* one stage */
    constexpr int V_BYTES = VB * BN * ROW_BYTES;
    extern __shared__ __align__(1024) uint8_t pw_smem[];
    const uint32_t base = (smem_u32(pw_smem) + 1023u) & ~1023u;
    uint8_t *const gbase = pw_smem + (base - smem_u32(pw_smem)); /* base as a generic pointer */
    const uint32_t sq = base, sk = sq + Q_BYTES, sv = sk + STAGES * K_BYTES;
    const uint32_t sout = sv + STAGES * V_BYTES; /* out staging [2 wg][64 rows][OUT_PITCH] */
    const uint32_t bars = sout + 2 * 64 * OUT_PITCH;
    PwMeta *const meta = (PwMeta *)(gbase + (bars - base) + 8 * (2 + 4 * STAGES));
    int *const pred = (int *)(meta + 1); /* [2 items][max 4, min 4]: the producer warps' reductions */
    int *const bad_cols = pred + 16;     /* [STAGES][128]: a cleaned V tile's first non-finite key a column */
    const uint32_t q_full = bars, q_empty = bars + 8;
    auto k_full = [&](int s) { return bars + 8u * (2 + s); };
    auto k_empty = [&](int s) { return bars + 8u * (2 + STAGES + s); };
    auto v_full = [&](int s) { return bars + 8u * (2 + 2 * STAGES + s); };
    auto v_empty = [&](int s) { return bars + 8u * (2 + 3 * STAGES + s); };

    const int tid = (int)threadIdx.x, wg = tid / 128;
    if (tid == 0) {
        mbar_init(q_full, 256); /* the producer threads' cp.async arrivals, then their meta arrivals */
        mbar_init(q_empty, 8);  /* one arrival per consumer warp */
        for (int s = 0; s < STAGES; s++) {
            mbar_init(k_full(s), 128); /* the producer threads' cp.async arrivals (or plain ones) */
            mbar_init(v_full(s), 128);
            mbar_init(k_empty(s), 8);
            mbar_init(v_empty(s), 8);
        }
        mbar_fence_init();
    }
    __syncthreads();

    /* items: the plan's blocks last to first, the query heads fastest; a CTA takes every
     * gridDim.x-th, so that the producer loads the next while the consumers finish one */
    if (wg == 0) {
        set_max_regs_dec<PA_WG_PRODUCER_REGS>();
        const int lane = tid % 32, w = tid / 32;
        int64_t g = 0; /* key tiles staged so far (all items): the stage and its phase */
        int k = 0;
        for (int64_t it = blockIdx.x; it < items; it += gridDim.x, k++) {
            const int h = (int)(it % d.heads_q);
            const rudnn_paged_block_t blk = d.blocks[d.nblocks - 1 - it / d.heads_q];
            const int hk = h / d.group, len = d.seq_len[blk.seq];
            const int n = d.causal ? blk.kv_causal : len; /* the keys any row of the block sees */
            const int ntiles = (n + BN - 1) / BN;
            const int32_t *table = d.pages + d.seq_table[blk.seq];
            const bool in = tid < blk.nq;
            const int hi = in ? pa_row_limit(d, blk.q0 + tid, len) : 0;
            /* Q: rows are the block's queries (rows past nq zero-filled), 8 threads a row */
            mbar_wait(q_empty, (k & 1) ^ 1);
            {
                const int chunk = lane % 8;
                for (int r = tid / 8; r < BM; r += 16) {
                    const bool rin = r < blk.nq;
                    const char *src =
                        (const char *)d.q + (((int64_t)(blk.q0 + (rin ? r : 0)) * d.heads_q + h) * d.d + chunk * 8) * 2;
#pragma unroll
                    for (int b = 0; b < QB; b++) {
                        const bool ok = rin && b * 64 + chunk * 8 < d.d;
                        const uint32_t dst =
                            sq + (uint32_t)(b * BM * ROW_BYTES + r * ROW_BYTES) + (uint32_t)((chunk ^ (r % 8)) * 16);
                        rdg_copy16_async_zfill(dst, ok ? src + b * 128 : (const char *)d.q, ok);
                    }
                }
                cp_async_arrive(q_full);
            }
            /* the row limits and their extremes (each warp 32 rows: warps 0-1 the first consumer
             * warpgroup's, 2-3 the second's) */
            int mx = hi, mn = in ? hi : INT32_MAX;
#pragma unroll
            for (int of = 16; of > 0; of /= 2) {
                mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, of));
                mn = min(mn, __shfl_xor_sync(0xffffffffu, mn, of));
            }
            int *pr = pred + (k & 1) * 8;
            if (lane == 0) {
                pr[w] = mx;
                pr[4 + w] = mn;
            }
            asm volatile("bar.sync 4, 128;" ::: "memory");
            const int cta_min = min(min(pr[4], pr[5]), min(pr[6], pr[7]));
            meta->lim[tid] = hi;
            if (tid == 0) {
                meta->q0 = blk.q0;
                meta->nq = blk.nq;
                meta->h = h;
                meta->ntiles = ntiles;
                meta->wg_max[0] = max(pr[0], pr[1]);
                meta->wg_max[1] = max(pr[2], pr[3]);
                meta->cta_min = cta_min;
            }
            mbar_arrive(q_full); /* releases the meta writes */
            /* the cache row of key t BN + tid, read a tile ahead (the table read off the copies' path) */
            int row = cache_row(d, table, tid, n);
            for (int t = 0; t < ntiles; t++, g++) {
                const int s = (int)(g % STAGES);
                const uint32_t parity = (uint32_t)((g / STAGES) & 1) ^ 1;
                const int next = cache_row(d, table, (t + 1) * BN + tid, n);
                mbar_wait(k_empty(s), parity);
                gather_tile<QB>(d, d.k, d.d, hk, row, sk + s * K_BYTES, tid);
                cp_async_arrive(k_full(s));
                mbar_wait(v_empty(s), parity);
                gather_tile<VB>(d, d.v, d.dv, hk, row, sv + s * V_BYTES, tid);
                row = next;
                if ((t + 1) * BN <= cta_min) {
                    cp_async_arrive(v_full(s));
                    continue;
                }
                /* a tile some row sees only in part: its non-finite V values become 0 (a row's
                 * 0 x NaN must not reach it), each column's first such key noted (poison) */
                asm volatile("cp.async.wait_all;\n" ::: "memory");
                int *bad = bad_cols + s * 128;
                bad[tid] = INT32_MAX; /* none */
                asm volatile("bar.sync 4, 128;" ::: "memory");
                uint8_t *vs = gbase + (sv - base) + s * V_BYTES;
                const uint32_t e2 = DT == RUDNN_BF16 ? 0x7f807f80u : 0x7c007c00u; /* a pair's exponents */
                for (int x = tid; x < VB * BN * 8; x += 128) {
                    const int b = x / (BN * 8), r = x / 8 % BN, pc = x % 8;
                    uint4 *p16 = (uint4 *)(vs + b * BN * ROW_BYTES + r * ROW_BYTES + pc * 16);
                    const uint4 w4 = *p16;
                    uint32_t u[4] = {w4.x, w4.y, w4.z, w4.w};
                    /* a half whose exponent is all ones: its 0xffff lanes in the compare */
                    uint32_t any = 0;
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        any |= __vcmpeq2(u[i] & e2, e2);
                    if (!any)
                        continue;
#pragma unroll
                    for (int i = 0; i < 8; i++) {
                        const uint32_t mask = 0xffffu << (16 * (i % 2));
                        if ((u[i / 2] & e2 & mask) == (e2 & mask)) {
                            u[i / 2] &= ~mask;
                            atomicMin(&bad[b * 64 + (pc ^ (r % 8)) * 8 + i], r);
                        }
                    }
                    *p16 = make_uint4(u[0], u[1], u[2], u[3]);
                }
                fence_proxy_async(); /* the cleaned values are read by wgmma (async proxy) */
                asm volatile("bar.sync 4, 128;" ::: "memory");
                mbar_arrive(v_full(s));
            }
        }
        asm volatile("cp.async.wait_all;\n" ::: "memory"); /* nothing in flight when the CTA exits */
    } else {
        set_max_regs_inc<PA_WG_CONSUMER_REGS>();
        const int cw = wg - 1, warp = (tid / 32) % 4, lane = tid % 32, quad = lane % 4;
        const uint32_t q_rows = sq + cw * 64 * ROW_BYTES;
        const float scale_log2 = d.scale_log2;
        int64_t g0 = 0; /* key tiles consumed before this item */
        int k = 0;
        for (int64_t it = blockIdx.x; it < items; it += gridDim.x, k++) {
            mbar_wait(q_full, k & 1);
            fence_proxy_async(); /* the generic-proxy copies are read by wgmma (async proxy) */
            const int q0 = meta->q0, nq = meta->nq, h = meta->h, ntiles = meta->ntiles;
            const int cta_min = meta->cta_min;
            const int wg_n = min((meta->wg_max[cw] + BN - 1) / BN, ntiles); /* the tiles its rows see */
            /* this thread's two rows: r = 0 (lane / 4) and r = 1 (lane / 4 + 8) of its warp's 16 */
            int qi[2], lim[2];
            float m[2], l[2];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int row = cw * 64 + warp * 16 + lane / 4 + r * 8;
                qi[r] = row < nq ? q0 + row : -1;
                lim[r] = meta->lim[row];
                m[r] = -INFINITY;
                l[r] = 0.0f;
            }
            if (wg_n == 0 && lane == 0)
                mbar_arrive(q_empty); /* no S reads Q */
            float o[NV / 2];
#pragma unroll
            for (int i = 0; i < NV / 2; i++)
                o[i] = 0.0f;
            float sc[BN / 2];        /* S of the tile in flight, then its P (FP32) */
            uint32_t pa[BN / 16][4]; /* P of the tile whose P V is next, 16-bit A fragments */
            float alpha[2];

            auto issue_s = [&](int t) {
                const int64_t gt = g0 + t;
                const int s = (int)(gt % STAGES);
                mbar_wait(k_full(s), (uint32_t)(gt / STAGES) & 1);
                if (PA_WG_CONSUMER_FENCE)
                    fence_proxy_async();
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < QB * 4; kk++)
                    wgmma_ss<DT, BN>(sc, wgmma_desc(q_rows + (kk / 4) * BM * ROW_BYTES + (kk % 4) * 32),
                                     wgmma_desc(sk + s * K_BYTES + (kk / 4) * BN * ROW_BYTES + (kk % 4) * 32), kk > 0);
                wgmma_commit();
            };
            auto issue_pv = [&](int t) {
                const int64_t gt = g0 + t;
                const int s = (int)(gt % STAGES);
                mbar_wait(v_full(s), (uint32_t)(gt / STAGES) & 1);
                if (PA_WG_CONSUMER_FENCE)
                    fence_proxy_async();
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < BN / 16; kk++)
                    wgmma_rs_t<DT, NV>(o, pa[kk],
                                       wgmma_desc_mn(sv + s * V_BYTES + kk * 16 * ROW_BYTES, BN * ROW_BYTES), 1);
                wgmma_commit();
            };
            /* after P V of a tile the producer cleaned (partial for the block): a column whose
             * first non-finite V value lies below a row's limit is NaN in that row */
            auto poison = [&](int t) {
                if ((t + 1) * BN <= cta_min)
                    return;
                const int *bad = bad_cols + (int)((g0 + t) % STAGES) * 128;
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int lr = lim[r] - t * BN;
#pragma unroll
                    for (int nb = 0; nb < NV / 8; nb++)
#pragma unroll
                        for (int ee = 0; ee < 2; ee++)
                            if (bad[nb * 8 + 2 * quad + ee] < lr)
                                o[4 * nb + 2 * r + ee] = __int_as_float(0x7fc00000);
                }
            };
            auto release_v = [&](int t) {
                if (lane == 0)
                    mbar_arrive(v_empty((int)((g0 + t) % STAGES)));
            };
            /* tile t's scores (in sc) -> p = 2^(s - m) in the log2 domain; alpha: O's rescale factor */
            auto softmax = [&](int t) {
                const int j0 = t * BN;
                /* whole: every row of the warp sees every key of the tile (uniform in the warp) */
                const bool whole = __all_sync(0xffffffffu, j0 + BN <= min(qi[0] >= 0 ? lim[0] : INT32_MAX,
                                                                            qi[1] >= 0 ? lim[1] : INT32_MAX));
                if (!whole) {
#pragma unroll
                    for (int r = 0; r < 2; r++) {
                        const int c_end = lim[r] - j0; /* columns below it are seen */
#pragma unroll
                        for (int u = 0; u < BN / 4; u++) {
                            const int i = 4 * (u / 2) + 2 * r + u % 2; /* row r's elements */
                            const int c = 8 * (i / 4) + 2 * quad + (i % 2);
                            sc[i] = c < c_end ? sc[i] * scale_log2 : -INFINITY;
                        }
                    }
                }
                /* a whole tile keeps the raw dot products: the scale joins the max and the exponent */
                const float f = whole ? scale_log2 : 1.0f;
                wg_softmax<BN>(sc, m, l, alpha, f);
            };
            auto rescale_pack = [&]() { wg_rescale_pack<DT, BN, NV>(o, alpha, sc, pa); };
            /* ping-pong turns (attention_wgmma.cu): every warpgroup takes exactly ntiles + 1
             * turns an item */
            auto turn_begin = [&]() { asm volatile("bar.sync %0, 256;" ::"r"(1 + cw) : "memory"); };
            auto turn_end = [&]() { asm volatile("bar.arrive %0, 256;" ::"r"(1 + (cw + 1) % 2) : "memory"); };
            /* warpgroup 0 has taken the last turn of the item before (its barrier's arrivals must
             * not run into the next item's) */
            asm volatile("bar.sync 3, 256;" ::: "memory");
            if (cw == 1)
                turn_end(); /* the first turn is warpgroup 0's */
            if (wg_n > 0) {
                turn_begin();
                issue_s(0);
                turn_end();
                wgmma_wait<0>();
                fence_operands(sc);
                if (lane == 0)
                    mbar_arrive(k_empty((int)(g0 % STAGES)));
                softmax(0);
                rescale_pack();
                for (int t = 1; t < wg_n; t++) {
                    turn_begin();
                    issue_s(t);
                    issue_pv(t - 1);
                    turn_end();
                    wgmma_wait<1>();
                    fence_operands(sc);
                    if (lane == 0)
                        mbar_arrive(k_empty((int)((g0 + t) % STAGES)));
                    softmax(t);
                    wgmma_wait<0>();
                    fence_operands(o);
                    fence_operands(pa);
                    poison(t - 1);
                    release_v(t - 1);
                    rescale_pack();
                }
                if (lane == 0)
                    mbar_arrive(q_empty); /* its last S is done: Q may be reloaded */
                turn_begin();
                issue_pv(wg_n - 1);
                turn_end();
                wgmma_wait<0>();
                fence_operands(o);
                fence_operands(pa);
                poison(wg_n - 1);
                release_v(wg_n - 1);
            } else {
                turn_begin(); /* the turn the first tile's S and the last P V would take */
                turn_end();
            }
            /* the tiles it does not read: each stage released once full (the producer counts
             * every consumer warp's arrival) */
            for (int t = wg_n; t < ntiles; t++) {
                const int64_t gt = g0 + t;
                const int s = (int)(gt % STAGES);
                turn_begin();
                turn_end();
                mbar_wait(k_full(s), (uint32_t)(gt / STAGES) & 1);
                if (lane == 0)
                    mbar_arrive(k_empty(s));
                mbar_wait(v_full(s), (uint32_t)(gt / STAGES) & 1);
                if (lane == 0)
                    mbar_arrive(v_empty(s));
            }
            if (cw == 0)
                turn_begin(); /* the last warpgroup's last turn ends on warpgroup 0's barrier */
            g0 += ntiles;

            /* out = O / l (a row that saw nothing: zeros), through the warpgroup's staging rows
             * so that the rows leave in 16-byte stores */
            uint8_t *const so = gbase + (sout - base) + cw * 64 * OUT_PITCH;
#pragma unroll
            for (int r = 0; r < 2; r++) {
                l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
                l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
                const float inv = l[r] > 0.0f ? __frcp_rn(l[r]) : l[r] != l[r] ? l[r] : 0.0f;
                uint8_t *srow = so + (warp * 16 + lane / 4 + 8 * r) * OUT_PITCH;
#pragma unroll
                for (int nb = 0; nb < NV / 8; nb++)
                    *(uint32_t *)(srow + (nb * 8 + 2 * quad) * 2) =
                        pack2(DT, o[4 * nb + 2 * r] * inv, o[4 * nb + 2 * r + 1] * inv);
            }
            asm volatile("bar.sync %0, 128;" ::"r"(5 + cw) : "memory");
            const int rows = min(64, nq - cw * 64), chunks = d.dv / 8; /* 16-byte pieces a row */
            for (int x = tid - 128 * wg; x < rows * chunks; x += 128) {
                const int rr = x / chunks, c = x - rr * chunks;
                const int64_t orow = (int64_t)(q0 + cw * 64 + rr) * d.heads_q + h;
                *(uint4 *)((uint16_t *)d.out + orow * d.dv + c * 8) = *(const uint4 *)(so + rr * OUT_PITCH + c * 16);
            }
        }
    }
#else
    (void)d;
    (void)items;
    __trap(); /* the host launches it only where the binary has wgmma */
#endif
}

typedef void (*pw_fn)(PaDev, int64_t);

template <int DT>
pw_fn pw_kernel(int qb, int vb)
{
    return qb == 1 ? (vb == 1 ? pa_wgmma_kernel<DT, 1, 1> : pa_wgmma_kernel<DT, 1, 2>)
                   : (vb == 1 ? pa_wgmma_kernel<DT, 2, 1> : pa_wgmma_kernel<DT, 2, 2>);
}

} // namespace

const char *rdg_pa_wgmma_why(const rdg_devinfo_t *dev, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o,
                             char *why, size_t cap)
{
    const rudnn_paged_layout_t &l = a->layout;
    if (!dev->wgmma) {
        snprintf(why, cap, "wgmma needs an sm_90a device and binary (the device is sm_%d)", dev->arch);
        return why;
    }
    if (a->mla || (a->dtype != RUDNN_F16 && a->dtype != RUDNN_BF16)) {
        snprintf(why, cap, "the wgmma prefill takes F16 or BF16 attention (not MLA)");
        return why;
    }
    if (a->head_dim > 128 || a->value_dim > 128 || a->head_dim % 8 || a->value_dim % 8) {
        snprintf(why, cap, "D %lld and Dv %lld: the wgmma prefill takes multiples of 8 up to 128",
                 (long long)a->head_dim, (long long)a->value_dim);
        return why;
    }
    if (a->splits > 1) {
        snprintf(why, cap, "the wgmma prefill writes out directly (no split partials)");
        return why;
    }
    if (!pa_aligned16(rdg_at(o->q), rdg_at(o->k), rdg_at(o->v), rdg_at(o->out), nullptr)) {
        snprintf(why, cap, "q, caches and out must be 16-byte aligned for 16-byte copies");
        return why;
    }
    /* prefill: the blocks of 128 queries hold PA_WG_MIN_QUERIES or more on average */
    if (l.block_count[KIND] == 0 || l.queries < l.block_count[KIND] * PA_WG_MIN_QUERIES) {
        snprintf(why, cap, "%lld queries in %lld blocks of up to 128: too few a block for the wgmma prefill",
                 (long long)l.queries, (long long)l.block_count[KIND]);
        return why;
    }
    if (l.block_count[KIND] * a->heads_q > INT32_MAX || l.max_len > INT32_MAX - 2 * BN ||
        l.cache_pages * l.page_size > INT32_MAX) {
        snprintf(why, cap, "the grid, a key index or a cache row passes 32 bits");
        return why;
    }
    if (wg_smem_bytes(blocks_of(a->head_dim), blocks_of(a->value_dim)) > dev->smem_optin) {
        snprintf(why, cap, "the wgmma prefill's tiles need more shared memory than the device's %zu bytes",
                 dev->smem_optin);
        return why;
    }
    return nullptr;
}

namespace {
std::atomic<int> g_pw_smem_done[8][64];
}

rudnn_status_t rdg_pa_wgmma_run(rdg_queue_t *q, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o)
{
    char why[192];
    if (rdg_pa_wgmma_why(&q->dev, a, o, why, sizeof why))
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, PA_OP ": %s: %s", RUDNN_GPU_BACKEND_NAME, why);
    const PaDev d = pa_make_dev(a, o, KIND);
    const int qb = blocks_of(a->head_dim), vb = blocks_of(a->value_dim);
    const bool bf16 = a->dtype == RUDNN_BF16;
    const pw_fn fn = bf16 ? pw_kernel<RUDNN_BF16>(qb, vb) : pw_kernel<RUDNN_F16>(qb, vb);
    const size_t smem = wg_smem_bytes(qb, vb);
    TRY(allow_smem_once(g_pw_smem_done, (bf16 ? 4 : 0) + (qb - 1) * 2 + (vb - 1), (const void *)fn, q->dev.index,
                        (int)smem, "paged attention wgmma"));
    const int64_t items = d.nblocks * d.heads_q;
    const int64_t grid = items < q->dev.sm_count ? items : q->dev.sm_count; /* one CTA an SM, persistent */
    if (grid > 0) {
        (void)cudaGetLastError(); /* the check below sees this launch only */
        rdg_note_kernel(PA_WGMMA_PREFILL_NAME);
        fn<<<dim3((unsigned)grid), dim3(THREADS), smem, q->stream>>>(d, items);
        TRY(pa_launched(PA_WGMMA_PREFILL_NAME, grid, THREADS, smem));
    }
    return RUDNN_STATUS_SUCCESS;
}
