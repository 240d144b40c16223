/* paged_attention.mla_wgmma (CUDA only, sm_90a): MLA over a paged latent cache on Hopper's
 * warpgroup MMA fed by TMA, for the compute-bound shapes (H a multiple of 64 query heads: DeepSeek's
 * H 128 decode, one or a few query tokens a sequence). F16/BF16, R 512, P 64, FP32 accumulation.
 * score = scale (q . latent + qp . kp), value = latent; one latent head for all H query heads.
 *
 * A CTA takes 64 rows, the heads rc 64 .. rc 64 + 63 of one query (the plan's blocks of kind 0:
 * one query each; H 128 is two CTAs a query, which read the same pages at about the same time, so
 * the second reads them from L2), and one split's keys [k0, k1) of it, in 64-key tiles aligned to
 * multiples of 64 (a tile is a page at page size 64). Every row of the CTA sees the same keys, so
 * the mask is the same for all of them: keys of a tile below k0 or from k1 on. 384 threads, three
 * warpgroups with one role each:
 *   - warpgroup 0, the producer: one thread loads the key tiles into 2 stages with TMA (two 2-D
 *     tensor maps, the latent cache [rows, 512] and the rope cache [rows, 64], boxes of 64 columns
 *     x min(page size, 64) rows, 128-byte swizzle): a stage is 9 blocks of 64 keys x 64 columns
 *     (8 KiB each: latent columns 0..511 in blocks 0..7, the rope part in block 8), which are the
 *     K-major B operand of S and, blocks 0..7, the MN-major B operand of P V. mbarriers full[s]
 *     (one arrival with the bytes) and empty[s] (one arrival a consumer warp);
 *   - warpgroups 1 and 2, the consumers c = 0, 1. Q (64 x 576) is in shared memory (loaded by the
 *     consumer threads, swizzled as TMA would, once). Tile t: consumer c computes the scores of
 *     keys 32 c .. 32 c + 31 of the tile, S_c = Q K_c^T (64 x 32, wgmma m64n32k16 over the 36
 *     k16 steps, both operands K-major in shared memory), masks and scales them, and publishes its
 *     row maxima; after a barrier of the two (named barrier 1, 256 threads) both take the same
 *     new maxima m (each reads both halves: the same fmaxf in the same order), write their
 *     P = 2^(s - m) to the shared P tile (64 x 64, 16-bit, swizzled: the K-major A operand) and
 *     keep their own part of the row sums l (added at the end: both rescale by the same alpha);
 *     after a second barrier each computes O_c = alpha O_c + P V_c for its 256 output columns
 *     (wgmma m64n256k16, A = P and B = the latent blocks 4c .. 4c + 3 of the stage read MN-major).
 *     P V of tile t runs on the tensor cores while S of tile t + 1 is issued behind it; a stage is
 *     released (empty) once its P V is done.
 * Masked keys (below k0 or from k1 on, in the first and last tile only, and for page sizes under
 * 64 the boxes past k1 that are never loaded) get P = 0, and after the first barrier each
 * consumer zeroes their latent rows in its own columns of the stage (no wgmma reads them any
 * more: both S are done): a NaN or Inf there, a key no row sees, reaches no row as 0 x NaN. A NaN
 * in a key every row sees (or in q) reaches its rows' outputs as in the other kernels.
 * Shared memory (1024-byte aligned, 1 KiB slack): Q 9 x 8 KiB | stage 0, stage 1 (9 x 8 KiB each)
 * | P 8 KiB | mbarriers full[2], empty[2] | row maxima [2][64] FP32 | row sums [2][64] FP32:
 * 230464 bytes + 1024 <= 227 KiB. Splits > 1 write the FP32 partials (m in base e, l) that
 * paged_attention.cu's merge finishes. */
#include <stdio.h>
#include <string.h>

#include "rdg_internal.h"

#if !RDG_HIP

#include <cuda.h>
#include <cudaTypedefs.h>

#include "mbarrier.cuh"
#include "paged_attention.cuh"
#include "paged_attention_tuning.h"
#include "tensor_map.h"
#include "wgmma.cuh"
#include "wgmma_softmax.cuh"

namespace {

constexpr int W_R = 512, W_P = 64;   /* the shapes the kernel takes */
constexpr int W_CB = (W_R + W_P) / 64; /* 64-column blocks of a Q or key row: 9 */
constexpr int W_BM = 64, W_BN = 64;  /* rows a CTA, keys a tile */
constexpr int W_BLK = 64 * 128;      /* one 64 x 64 block of 16-bit values: 64 rows of 128 bytes */
constexpr int W_KSTEPS = (W_R + W_P) / 16;
constexpr int W_THREADS = 384;
static_assert(W_THREADS == 3 * 128 && setmaxnreg_fits(PA_MLA_WG_PRODUCER_REGS, 2, PA_MLA_WG_CONSUMER_REGS),
              "the warpgroups' registers after setmaxnreg exceed the launch's");
/* shared-memory offsets from the 1024-byte aligned base */
constexpr int W_OFF_Q = 0;
constexpr int W_OFF_STAGE = W_OFF_Q + W_CB * W_BLK;
constexpr int W_STAGE_BYTES = W_CB * W_BLK;
constexpr int W_OFF_P = W_OFF_STAGE + 2 * W_STAGE_BYTES;
constexpr int W_OFF_BAR = W_OFF_P + W_BLK;     /* full[0], full[1], empty[0], empty[1] */
constexpr int W_OFF_MX = W_OFF_BAR + 64;       /* [2][64] FP32 */
constexpr int W_OFF_LX = W_OFF_MX + 2 * W_BM * 4; /* [2][64] FP32 */
constexpr int W_BYTES = W_OFF_LX + 2 * W_BM * 4;
constexpr size_t W_SMEM = 1024 + (size_t)W_BYTES;
static_assert(W_SMEM <= 227 * 1024, "the CTA's shared memory");
static_assert(W_OFF_STAGE % 1024 == 0 && W_OFF_P % 1024 == 0, "swizzle atoms");
static_assert(W_KSTEPS == 4 * W_CB, "S's k16 steps: four a 64-column block");
static_assert(W_BM == 64 && W_BN == 64, "one m64 row block; a 64-key tile is the P tile's 64 columns");

#if RDG_HAS_WGMMA

/* the two consumer warpgroups (named barrier 1; the producer never takes part) */
__device__ __forceinline__ void w_consumer_sync()
{
    asm volatile("bar.sync 1, 256;\n" ::: "memory");
}

/* Byte offset of the 16-byte chunk `chunk` (0..7) of row `row` of a 64-column block with the
 * 128-byte swizzle (CU_TENSOR_MAP_SWIZZLE_128B and wgmma's 128B mode: bits 4..6 of the address
 * XOR bits 7..9, the block 1024-byte aligned). */
__device__ __forceinline__ uint32_t w_swz(int row, int chunk)
{
    return (uint32_t)(row * 128 + ((chunk ^ (row & 7)) << 4));
}

#endif

template <int DT>
__global__ void __launch_bounds__(W_THREADS, 1)
mla_wg_kernel(const __grid_constant__ CUtensorMap tl, const __grid_constant__ CUtensorMap tp, const PaDev d,
              const int chunks, const int box_rows)
{
#if RDG_HAS_WGMMA
    extern __shared__ __align__(1024) uint8_t mla_wg_smem[];
    const uint32_t raw = smem_u32(mla_wg_smem);
    const uint32_t pad = ((raw + 1023u) & ~1023u) - raw;
    uint8_t *const base = mla_wg_smem + pad; /* generic pointer of the aligned base */
    const uint32_t sb = raw + pad;            /* its shared-window address */
    const uint32_t sq = sb + W_OFF_Q, sp = sb + W_OFF_P;
    auto stage = [&](int s) { return sb + W_OFF_STAGE + (uint32_t)s * W_STAGE_BYTES; };
    auto full = [&](int s) { return sb + W_OFF_BAR + 8u * (uint32_t)s; };
    auto empty = [&](int s) { return sb + W_OFF_BAR + 16u + 8u * (uint32_t)s; };
    float *const smx = (float *)(base + W_OFF_MX), *const slx = (float *)(base + W_OFF_LX);

    /* the work item: row chunk fastest (the chunks of a query read the same pages together) */
    const int tid = (int)threadIdx.x, wg = tid / 128;
    const int64_t item = blockIdx.x;
    const int rc = (int)(item % chunks);
    const int64_t rest = item / chunks;
    const int split = (int)(rest % d.splits);
    const rudnn_paged_block_t b = d.blocks[rest / d.splits]; /* kind 0: one query, b.q0 */
    const int qi = b.q0;
    int k0, k1;
    pa_split_range(d, d.causal ? b.kv_causal : d.seq_len[b.seq], split, &k0, &k1);
    const int t0 = k0 / W_BN;
    const int ntiles = k1 > k0 ? (k1 - 1) / W_BN + 1 - t0 : 0;

    if (tid == 0) {
        for (int s = 0; s < 2; s++) {
            mbar_init(full(s), 1);
            mbar_init(empty(s), 8); /* one arrival a consumer warp */
        }
        mbar_fence_init();
    }
    __syncthreads();

    if (wg == 0) {
        set_max_regs_dec<PA_MLA_WG_PRODUCER_REGS>();
        if (tid == 0) {
            const int32_t *table = d.pages + d.seq_table[b.seq];
            const int boxes = W_BN / box_rows; /* 1, or 64 / page size (pages under 64 keys) */
            for (int t = 0; t < ntiles; t++) {
                const int s = t & 1;
                const int j0 = (t0 + t) * W_BN;
                /* the stage is free once every consumer warp released tile t - 2 (a fresh barrier
                 * passes parity 1 at once) */
                mbar_wait(empty(s), ((uint32_t)(t >> 1) & 1u) ^ 1u);
                /* the boxes that start below k1: only they are in the page table */
                const int nb = min(boxes, (k1 - j0 + box_rows - 1) / box_rows);
                mbar_expect_tx(full(s), nb * W_CB * box_rows * 128);
                for (int x = 0; x < nb; x++) {
                    const int row = (int)pa_row(d, table, j0 + x * box_rows);
                    const uint32_t dst = stage(s) + (uint32_t)(x * box_rows * 128);
#pragma unroll
                    for (int cb = 0; cb < W_CB - 1; cb++)
                        tma_load_2d(dst + cb * W_BLK, &tl, cb * 64, row, full(s));
                    tma_load_2d(dst + (W_CB - 1) * W_BLK, &tp, 0, row, full(s));
                }
            }
        }
    } else {
        set_max_regs_inc<PA_MLA_WG_CONSUMER_REGS>();
        const int c = wg - 1, ctid = tid - 128, warp = (tid / 32) % 4, lane = tid % 32;
        const int g = lane / 4, quad = lane % 4;
        const int64_t qrow0 = (int64_t)qi * d.heads_q + (int64_t)rc * W_BM; /* q's row of CTA row 0 */

        /* Q: q's 512 columns in blocks 0..7, qp's 64 in block 8, swizzled as TMA writes them */
        for (int e = ctid; e < W_BM * W_CB * 8; e += 256) {
            const int r = e / (W_CB * 8), ch = e - r * (W_CB * 8), cb = ch / 8;
            const uint4 x = cb < W_CB - 1
                                ? *(const uint4 *)((const char *)d.q + (qrow0 + r) * (W_R * 2) + ch * 16)
                                : *(const uint4 *)((const char *)d.qp + (qrow0 + r) * (W_P * 2) + (ch - 64) * 16);
            *(uint4 *)(base + W_OFF_Q + cb * W_BLK + w_swz(r, ch % 8)) = x;
        }
        fence_proxy_async(); /* the generic stores, before wgmma reads them (async proxy) */
        w_consumer_sync();

        float o[128]; /* O_c: rows 16 warp + g (+ 8), columns 256 c + 8 nb + 2 quad (+ 1) */
#pragma unroll
        for (int i = 0; i < 128; i++)
            o[i] = 0.0f;
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
        float sc[16]; /* S_c, then P_c: o's layout, 32 columns */
#pragma unroll
        for (int i = 0; i < 16; i++)
            sc[i] = 0.0f; /* defined before the first wgmma reads them (scale-d 0 ignores them) */
        fence_operands(sc);
        fence_operands(o);
        const int lr0 = 16 * warp + g; /* this thread's rows lr0 and lr0 + 8 of the CTA */

        for (int t = 0; t < ntiles; t++) {
            const int s = t & 1;
            const int j0 = (t0 + t) * W_BN;
            mbar_wait(full(s), (uint32_t)(t >> 1) & 1u);
            /* S_c = Q K_c^T, keys 32 c .. 32 c + 31 of the tile */
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < W_KSTEPS; kk++)
                wgmma_ss<DT, 32>(sc, wgmma_desc(sq + (kk / 4) * W_BLK + (kk % 4) * 32),
                                 wgmma_desc(stage(s) + (kk / 4) * W_BLK + c * 32 * 128 + (kk % 4) * 32), kk > 0);
            wgmma_commit();
            if (t > 0) {
                /* P V of tile t - 1 (committed before this S) is done: its stage goes back */
                wgmma_wait<1>();
                fence_operands(o);
                if (lane == 0)
                    mbar_arrive(empty((t - 1) & 1));
            }
            wgmma_wait<0>();
            fence_operands(sc);

            /* scale to base 2, mask, the row maxima of this half */
            const bool edge = j0 < k0 || j0 + W_BN > k1;
            float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int i = 0; i < 16; i++) {
                const int j = j0 + 32 * c + 8 * (i / 4) + 2 * quad + (i % 2);
                float x = sc[i] * d.scale_log2;
                if (edge && (j < k0 || j >= k1))
                    x = -INFINITY;
                sc[i] = x;
                mx[(i % 4) / 2] = fmaxf(mx[(i % 4) / 2], x);
            }
#pragma unroll
            for (int r = 0; r < 2; r++) {
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
                if (quad == 0)
                    smx[c * W_BM + lr0 + 8 * r] = mx[r];
            }
            /* (A) both halves' maxima are in; both warpgroups' S of this tile and P V of the last
             * are done (each waited for its own before), so P and the stage's masked rows are
             * free to write */
            w_consumer_sync();
            float alpha[2], m_use[2];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const float m_new = fmaxf(m[r], fmaxf(smx[lr0 + 8 * r], smx[W_BM + lr0 + 8 * r]));
                m_use[r] = m_new == -INFINITY ? 0.0f : m_new; /* nothing seen yet: p = 0, not NaN */
                alpha[r] = wg_exp2(m[r] - m_use[r]);          /* m = -inf at first: 0 */
                m[r] = m_new;
                l[r] *= alpha[r];
            }
            /* P_c to columns 32 c .. 32 c + 31 of the P tile: pair (i, i + 1) is row lr0 (+ 8),
             * key column 32 c + 8 (i / 4) + 2 quad, in 16-byte chunk 4 c + i / 4 at byte 4 quad */
#pragma unroll
            for (int i = 0; i < 16; i += 2) {
                const int r = (i % 4) / 2;
                const float p0 = wg_exp2(sc[i] - m_use[r]), p1 = wg_exp2(sc[i + 1] - m_use[r]);
                l[r] += p0 + p1;
                *(uint32_t *)(base + W_OFF_P + w_swz(lr0 + 8 * r, 4 * c + i / 4) + 4 * quad) = pack2(DT, p0, p1);
            }
            if (edge) {
                /* the masked keys' latent rows, this warpgroup's columns (blocks 4c .. 4c + 3) */
                uint8_t *const st = base + W_OFF_STAGE + s * W_STAGE_BYTES + 4 * c * W_BLK;
                for (int e = ctid % 128; e < W_BN * 32; e += 128) {
                    const int key = e / 32, blk = (e / 8) % 4, ch = e % 8;
                    const int j = j0 + key;
                    if (j < k0 || j >= k1)
                        *(uint4 *)(st + blk * W_BLK + key * 128 + ch * 16) = make_uint4(0u, 0u, 0u, 0u);
                }
            }
            fence_proxy_async(); /* P and the zeroed rows, before wgmma reads them */
            w_consumer_sync(); /* (B) the whole P tile is in */

#pragma unroll
            for (int i = 0; i < 128; i++)
                o[i] *= alpha[(i % 4) / 2];
            fence_operands(o); /* the rescale stays before the fence (else wgmma is serialized) */
            /* O_c += P V_c: V_c = latent columns 256 c .. 256 c + 255, MN-major, 64 columns a
             * block (LBO 8 KiB), the k16 step kk 16 keys (2 KiB) further */
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < W_BN / 16; kk++)
                wgmma_ss_t<DT, 256>(o, wgmma_desc(sp + kk * 32),
                                    wgmma_desc_mn(stage(s) + 4 * c * W_BLK + kk * 16 * 128, W_BLK), 1);
            wgmma_commit();
        }
        wgmma_wait<0>();
        fence_operands(o);
        /* (the last tile's stage is not released: the producer loads nothing more) */

        /* l: this thread's part, the quad's, then both halves */
#pragma unroll
        for (int r = 0; r < 2; r++) {
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
            if (quad == 0)
                slx[c * W_BM + lr0 + 8 * r] = l[r];
        }
        w_consumer_sync();
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int lr = lr0 + 8 * r, h = rc * W_BM + lr;
            const float lt = slx[lr] + slx[W_BM + lr];
            const int col0 = 256 * c + 2 * quad;
            if (d.splits > 1) {
                float *const ob = pa_ws_acc(d, split, qi, h) + col0;
#pragma unroll
                for (int nb = 0; nb < 32; nb++)
                    *(float2 *)(ob + 8 * nb) = make_float2(o[4 * nb + 2 * r], o[4 * nb + 2 * r + 1]);
                if (c == 0 && quad == 0)
                    pa_put_ml(d, split, qi, h, m[r], lt);
            } else {
                const float inv = lt != 0.0f ? 1.0f / lt : 0.0f; /* no key: zeros; NaN l: NaN */
                uint32_t *const ob = (uint32_t *)((uint16_t *)d.out + (qrow0 + lr) * W_R + col0);
#pragma unroll
                for (int nb = 0; nb < 32; nb++)
                    ob[4 * nb] = pack2(DT, o[4 * nb + 2 * r] * inv, o[4 * nb + 2 * r + 1] * inv);
            }
        }
    }
#else
    (void)tl;
    (void)tp;
    (void)d;
    (void)chunks;
    (void)box_rows;
    __trap(); /* the host launches it only where the binary has wgmma */
#endif
}

/* ------------------------------------------------------------------------------------- host */

typedef void (*mla_wg_fn)(CUtensorMap, CUtensorMap, PaDev, int, int);

struct MlaWgConfig {
    int chunks;   /* CTAs a query: H / 64 */
    int box_rows; /* rows a TMA box: min(page size, 64) */
    int64_t items;
};

/* A 2-D map over a cache viewed as [rows, cols] (16-bit, rows of cols * 2 bytes), boxes of 64
 * columns x box_rows rows, 128-byte swizzle. */
bool mla_wg_encode(PFN_cuTensorMapEncodeTiled_v12000 enc, CUtensorMap *map, const void *ptr, rudnn_dtype_t dt,
                   int64_t rows, int64_t cols, int box_rows)
{
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)cols * 2};
    const cuuint32_t box[2] = {64, (cuuint32_t)box_rows};
    return rdg_encode_map16(enc, map, ptr, dt, 2, dims, strides, box);
}

/* Whether the kernel takes the call on dev, and its shape (the one place it is decided). */
const char *mla_wg_config(const rdg_devinfo_t *dev, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o,
                          MlaWgConfig *c, char *why, size_t cap)
{
    memset(c, 0, sizeof *c);
    const rudnn_paged_layout_t &l = a->layout;
    if (!a->mla || (a->dtype != RUDNN_F16 && a->dtype != RUDNN_BF16)) {
        snprintf(why, cap, "wgmma MLA takes F16 or BF16 MLA");
        return why;
    }
    if (!dev->wgmma) {
        snprintf(why, cap, "wgmma needs an sm_90a device and binary (the device is sm_%d)", dev->arch);
        return why;
    }
    if (!dev->tensor_map_encode) {
        snprintf(why, cap, "the driver has no tensor-map encoder (cuTensorMapEncodeTiled)");
        return why;
    }
    if (a->head_dim != W_R || a->value_dim != W_R || a->rope_dim != W_P) {
        snprintf(why, cap, "R %lld, P %lld: the wgmma MLA kernel takes R %d, P %d", (long long)a->head_dim,
                 (long long)a->rope_dim, W_R, W_P);
        return why;
    }
    if (a->heads_q % W_BM != 0 || a->heads_q > PA_MMA_MAX_HEADS) {
        snprintf(why, cap, "%lld query heads: the wgmma MLA kernel takes multiples of %d up to %d",
                 (long long)a->heads_q, W_BM, PA_MMA_MAX_HEADS);
        return why;
    }
    const int64_t ps = l.page_size;
    if (!(ps % 64 == 0 || ps == 8 || ps == 16 || ps == 32)) {
        snprintf(why, cap, "page size %lld: the wgmma MLA kernel takes 8, 16, 32 or multiples of 64", (long long)ps);
        return why;
    }
    if (!pa_aligned16(rdg_at(o->q), rdg_at(o->qp), rdg_at(o->k), rdg_at(o->kp), rdg_at(o->out)) ||
        !pa_aligned16(rdg_at(o->workspace), nullptr, nullptr, nullptr, nullptr)) {
        snprintf(why, cap, "q, qp, caches and out must be 16-byte aligned (16-byte copies, TMA)");
        return why;
    }
    if (l.cache_pages * ps > INT32_MAX || l.queries * a->heads_q > INT32_MAX) {
        snprintf(why, cap, "the cache rows or the query rows pass 32 bits (TMA coordinates)");
        return why;
    }
    if (W_SMEM > dev->smem_optin) {
        snprintf(why, cap, "the tiles need %zu bytes of shared memory, the device has %zu", W_SMEM, dev->smem_optin);
        return why;
    }
    c->chunks = (int)(a->heads_q / W_BM);
    c->box_rows = ps < 64 ? (int)ps : 64;
    c->items = c->chunks * (int64_t)(a->splits > 1 ? a->splits : 1) * l.block_count[0];
    if (c->items > INT32_MAX) {
        snprintf(why, cap, "%lld work items pass the grid", (long long)c->items);
        return why;
    }
    return nullptr;
}

} // namespace

const char *rdg_pa_mla_wgmma_why(const rdg_devinfo_t *dev, const rudnn_paged_args_t *a,
                                 const rudnn_paged_operands_t *o, char *why, size_t cap)
{
    MlaWgConfig c;
    return mla_wg_config(dev, a, o, &c, why, cap);
}

rudnn_status_t rdg_pa_mla_wgmma_run(rdg_queue_t *q, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o)
{
    MlaWgConfig c;
    char why[192];
    if (mla_wg_config(&q->dev, a, o, &c, why, sizeof why))
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, PA_OP ": %s: %s", RUDNN_GPU_BACKEND_NAME, why);
    const PaDev d = pa_make_dev(a, o, 0);
    const rudnn_paged_layout_t &l = a->layout;
    /* no cache rows (every history empty: no tile is loaded): the maps describe q instead */
    const bool keys = l.cache_pages > 0 && rdg_at(o->k) && rdg_at(o->kp);
    const PFN_cuTensorMapEncodeTiled_v12000 enc = (PFN_cuTensorMapEncodeTiled_v12000)q->dev.tensor_map_encode;
    CUtensorMap tl, tp;
    const int64_t rows = keys ? l.cache_pages * l.page_size : l.queries * a->heads_q;
    const bool ok = mla_wg_encode(enc, &tl, keys ? rdg_at(o->k) : rdg_at(o->q), a->dtype, rows, W_R, c.box_rows) &&
                    mla_wg_encode(enc, &tp, keys ? rdg_at(o->kp) : rdg_at(o->qp), a->dtype, rows, W_P, c.box_rows);
    if (!ok)
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, PA_OP ": %s: " PA_MLA_WGMMA_NAME ": cuTensorMapEncodeTiled "
                         "refused the caches", RUDNN_GPU_BACKEND_NAME);
    const mla_wg_fn fn = a->dtype == RUDNN_F16 ? mla_wg_kernel<RUDNN_F16> : mla_wg_kernel<RUDNN_BF16>;
    TRY(pa_allow_smem(q, (const void *)fn, W_SMEM));
    if (c.items > 0) {
        rdg_note_kernel(PA_MLA_WGMMA_NAME);
        fn<<<dim3((unsigned)c.items), dim3(W_THREADS), W_SMEM, q->stream>>>(tl, tp, d, c.chunks, c.box_rows);
        TRY(pa_launched(PA_MLA_WGMMA_NAME, c.items, W_THREADS, W_SMEM));
    }
    return d.splits > 1 ? pa_run_merge(q, a, d) : RUDNN_STATUS_SUCCESS;
}

#endif /* !RDG_HIP */
