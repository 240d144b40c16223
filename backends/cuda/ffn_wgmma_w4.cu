/* The FFN's int4 weight-only GEMM on Hopper's warpgroup MMA (CUDA only, sm_90a), for the products
 * of many rows that mma.sync leaves compute-bound: C [m, n] = A [m, k] W' [k, n], A BF16 / F16,
 * W int4 (I4 storage: byte (r, c / 2) holds column c in its low nibble, c + 1 in its high one),
 * W' = round_A(w scale) per hal/ffn.h (no offset), FP32 sums. Kernel "ffn.wgmma_w4"; also the
 * expert form's grouped product (offsets: expert e's rows [offsets[e], offsets[e + 1]) of A and
 * C against W [e], scale [e]), "ffn.wgmma_w4_grouped".
 *
 * It computes C^T = W'^T A^T with wgmma.m64n128k16: the dequantized weights are the A operand,
 * from registers (64 weight columns x 16 k a warpgroup), the tokens the B operand, straight from
 * shared memory (A's [128 tokens x 64 k] tile as TMA wrote it: K-major, 128-byte swizzle). A
 * fragment's 16 rows may be any 16 weight columns (C is stored with the same map): lane 4 g + t
 * of warp w takes two bytes of each of the weight rows k0 + 2t, 2t + 1, 2t + 8, 2t + 9 at byte
 * 16 w + 2 g of its warpgroup's 64; byte j's low nibble is row g of tile j, its high nibble row
 * g + 8 (the next column). So a warpgroup covers 128 columns in two m64 tiles, and a CTA's two
 * consumer warpgroups 256.
 * Dequantization: a prmt pairs two rows' bytes, a lop3 puts a nibble (XOR 8: w + 8) under a magic
 * exponent (bf16 128, f16 1024), a packed subtract leaves w exactly, a packed multiply by the
 * column's scale rounds w s once (exact in FP32: hal/ffn.h's rounding). The high nibbles are
 * shifted down first.
 *
 * Roles (as moe_experts_tma.cu's kernel): warpgroup 0's first thread issues the TMA loads of a
 * stage (A [128 x 64], W [64 rows x 128 bytes], 128-byte swizzle) into FFN_WGMMA_W4_STAGES stages,
 * mbarriers full / empty; warpgroups 1 and 2 read their weight bytes from the stage, dequantize
 * into registers (two sets, one in flight in the MMA) and issue the MMAs. One CTA a tile of 128
 * rows x 256 columns; rows past a tile's expert are computed and not stored; K and N past the end
 * read zeros (TMA's out-of-bounds fill). A dense product of fewer tiles than SMs (few rows: the
 * 70B FFN's second product at 128 rows has 32) splits k over blockIdx.y into F32 partials that
 * rdg_ffn_split_sum adds in order. */
#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "rdg_internal.h"
#include "ffn_tuning.h"
#include "int4_bits.cuh"
#include "mbarrier.cuh"
#include "moe_tc.cuh"
#include "tensor_map.h"

namespace {

constexpr int W4G_THREADS = 384; /* producer warpgroup + two consumer warpgroups */
constexpr int W4G_BT = 128;      /* rows (tokens) a tile: wgmma's N */
constexpr int W4G_BN = 256;      /* weight columns a tile */
constexpr int W4G_BK = 64;       /* k a stage */
constexpr int W4G_STAGES = FFN_WGMMA_W4_STAGES;
constexpr int W4G_A_BYTES = W4G_BT * W4G_BK * 2;
constexpr int W4G_W_BYTES = W4G_BK * W4G_BN / 2;
constexpr int W4G_STAGE = W4G_A_BYTES + W4G_W_BYTES;
constexpr int W4G_SMEM = W4G_STAGES * W4G_STAGE + 1024 + 2 * W4G_STAGES * 8;
static_assert(W4G_BT == TC_BM, "the tiles of the experts' rows: moe_tc.cuh's slots");

struct W4gArgs {
    const uint32_t *offsets; /* grouped: U32 [experts + 1]; NULL: one expert of m rows */
    const uint16_t *scale;   /* [experts, groups, n] */
    void *c;                 /* [m, n]; split k: F32 partials [splits, m, n] */
    int64_t m, n, k;
    int64_t c_split;         /* elements between splits' partials */
    int kts;                 /* k tiles a split (blockIdx.y) */
    int64_t slots, n_tiles;
    int experts;
    int group_rows;
    int groups;
    int c_f32;
};

#if RDG_HAS_WGMMA
/* two nibbles (bits 0..3 and 16..19 of x) as w s in a packed 16-bit pair, s2 the scale twice */
template <int DT>
__device__ __forceinline__ uint32_t dequant2(uint32_t x, uint32_t s2)
{
    constexpr uint32_t MAGIC = DT == RUDNN_BF16 ? 0x43084308u : 0x64086408u; /* 128 + 8, 1024 + 8 */
    const uint32_t v = and_xor<0x000f000fu, MAGIC>(x);                       /* magic + w + 8 */
    uint32_t r;
    if constexpr (DT == RUDNN_BF16)
        asm("{\n.reg .b32 t;\nsub.rn.bf16x2 t, %1, %2;\nmul.rn.bf16x2 %0, t, %3;\n}" : "=r"(r)
            : "r"(v), "r"(MAGIC), "r"(s2));
    else
        asm("{\n.reg .b32 t;\nsub.rn.f16x2 t, %1, %2;\nmul.rn.f16x2 %0, t, %3;\n}" : "=r"(r)
            : "r"(v), "r"(MAGIC), "r"(s2));
    return r;
}

/* byte address of byte b (0..127) of weight row r (0..63) of a stage: TMA's 128-byte swizzle */
__device__ __forceinline__ uint32_t w_at(uint32_t sw, int r, int b)
{
    return sw + (uint32_t)(r * 128 + (((b >> 4) ^ (r & 7)) << 4) + (b & 15));
}

__device__ __forceinline__ uint32_t lds_u16(uint32_t addr)
{
    uint16_t v;
    asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(addr));
    return v;
}

#endif

template <int DT>
__global__ void __launch_bounds__(W4G_THREADS, 1)
    ffn_wgmma_w4(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_w, W4gArgs g)
{
#if RDG_HAS_WGMMA
    extern __shared__ __align__(128) uint8_t w4g_smem[];
    const int tid = threadIdx.x, wg = tid / 128;
    const uint32_t smem0 = (smem_u32(w4g_smem) + 1023u) & ~1023u;
    const uint32_t full0 = smem0 + W4G_STAGES * W4G_STAGE, empty0 = full0 + W4G_STAGES * 8;
    const int kt0 = (int)blockIdx.y * g.kts;
    const int kt1 = min((int)((g.k + W4G_BK - 1) / W4G_BK), kt0 + g.kts);
    const int64_t items = tc_items(g.n_tiles, g.slots);

    if (tid == 0)
        mbar_init_ring(full0, empty0, W4G_STAGES, 1, 8); /* empty: one arrival per consumer warp */
    __syncthreads();

    /* the tile of item L: expert e, rows row0 .. + rows, weight columns n0 .. + W4G_BN */
    auto tile_of = [&](int64_t item, int *e, int64_t *row0, int *rows, int64_t *n0) -> bool {
        int64_t nt, v;
        if (!tc_item(item, g.n_tiles, g.slots, &nt, &v))
            return false;
        *n0 = nt * W4G_BN;
        if (g.offsets)
            return find_tile_thread(g.offsets, g.experts, v, W4G_BT, e, row0, rows);
        *e = 0, *row0 = v * W4G_BT, *rows = (int)min((int64_t)W4G_BT, g.m - v * W4G_BT);
        return true;
    };

    if (wg == 0) {
        set_max_regs_dec<40>();
        if (tid != 0)
            return;
        uint32_t it = 0;
        for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
            int e, rows;
            int64_t row0, n0;
            if (!tile_of(item, &e, &row0, &rows, &n0))
                continue;
            for (int kt = kt0; kt < kt1; kt++, it++) {
                const uint32_t s = it % W4G_STAGES, full = full0 + 8 * s;
                mbar_wait(empty0 + 8 * s, ((it / W4G_STAGES) & 1u) ^ 1u);
                mbar_expect_tx(full, W4G_STAGE);
                const uint32_t sa = smem0 + s * W4G_STAGE;
                tma_load_2d(sa, &map_a, kt * W4G_BK, (int)row0, full);
                tma_load_3d(sa + W4G_A_BYTES, &map_w, (int)(n0 / 2), kt * W4G_BK, e, full);
            }
        }
        return;
    }

    set_max_regs_inc<232>();
    const int cw = wg - 1, warp = tid / 32 % 4, lane = tid % 32;
    const int gq = lane >> 2, tq = lane & 3;
    const int byte0 = cw * 64 + warp * 16 + 2 * gq; /* this thread's two bytes of a weight row */
    uint32_t it = 0;
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        int e, rows;
        int64_t row0, n0;
        if (!tile_of(item, &e, &row0, &rows, &n0))
            continue;
        /* tile j's fragment row g: column col0 + 2 j, row g + 8 the column after it */
        const int64_t col0 = n0 + byte0 * 2;
        const bool col_live = col0 < g.n; /* n even: both columns */
        const uint16_t *scale = g.scale + ((int64_t)e * g.groups) * g.n + col0;
        float acc[2][64];
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int i = 0; i < 64; i++)
                acc[j][i] = 0.0f;
        uint32_t afr[2][2][4]; /* [set][tile][fragment register]: one set in the MMA, one filling */
        uint32_t s2[2][2];     /* [tile][low / high column]: the scale twice */
        /* the group of the step, its steps left (no division a step); a split may start mid-group */
        int grp = kt0 * W4G_BK / g.group_rows - 1, left = 0;
        const int first_left = (g.group_rows - kt0 * W4G_BK % g.group_rows) / 16;
        uint32_t prev = 0;
        for (int kt = kt0; kt < kt1; kt++, it++) {
            const uint32_t s = it % W4G_STAGES;
            mbar_wait(full0 + 8 * s, (it / W4G_STAGES) & 1u);
            const uint32_t sa = smem0 + s * W4G_STAGE, sw = sa + W4G_A_BYTES;
#pragma unroll
            for (int ks = 0; ks < W4G_BK / 16; ks++) {
                const int k0 = kt * W4G_BK + ks * 16;
                if (left == 0) { /* group_rows % 16 == 0: a step stays in one group */
                    grp++;
                    left = kt == kt0 && ks == 0 ? first_left : g.group_rows / 16;
                    uint32_t sp[2] = {0u, 0u};
                    if (col_live && k0 < g.k) {
#pragma unroll
                        for (int j = 0; j < 2; j++)
                            sp[j] = __ldg((const uint32_t *)(scale + (int64_t)grp * g.n + 2 * j));
                    }
#pragma unroll
                    for (int j = 0; j < 2; j++) {
                        s2[j][0] = prmt(sp[j], sp[j], 0x1010u);
                        s2[j][1] = prmt(sp[j], sp[j], 0x3232u);
                    }
                }
                left--;
                const int r = ks * 16 + 2 * tq;
                const uint32_t w0 = lds_u16(w_at(sw, r, byte0)), w1 = lds_u16(w_at(sw, r + 1, byte0));
                const uint32_t w8 = lds_u16(w_at(sw, r + 8, byte0)), w9 = lds_u16(w_at(sw, r + 9, byte0));
                uint32_t(&a)[2][4] = afr[ks & 1];
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    const uint32_t sel = (uint32_t)(j | j << 4 | (4 + j) << 8 | (4 + j) << 12);
                    const uint32_t p01 = prmt(w0, w1, sel), p89 = prmt(w8, w9, sel);
                    a[j][0] = dequant2<DT>(p01, s2[j][0]);      /* row g: k 2t, 2t + 1 */
                    a[j][1] = dequant2<DT>(p01 >> 4, s2[j][1]); /* row g + 8 */
                    a[j][2] = dequant2<DT>(p89, s2[j][0]);      /* row g: k 2t + 8, 2t + 9 */
                    a[j][3] = dequant2<DT>(p89 >> 4, s2[j][1]);
                }
                wgmma_fence();
                const uint64_t db = wgmma_desc(sa + ks * 32);
                wgmma_rs<DT, 128, 0>(acc[0], a[0], db, 1);
                wgmma_rs<DT, 128, 0>(acc[1], a[1], db, 1);
                wgmma_commit();
                wgmma_wait<1>(); /* the previous step's MMAs are done: their registers and stage are free */
                fence_operands(acc[0]);
                fence_operands(acc[1]);
                /* the MMAs read the fragment registers asynchronously: keep both sets live until here */
                fence_operands(afr[0]);
                fence_operands(afr[1]);
                if (ks == 0 && kt > kt0 && lane == 0)
                    mbar_arrive(empty0 + 8 * prev);
            }
            prev = s;
        }
        wgmma_wait<0>();
        fence_operands(acc[0]);
        fence_operands(acc[1]);
        if (lane == 0)
            mbar_arrive(empty0 + 8 * prev);

        /* acc[j][4 i + h]: rows g (h 0, 1) and g + 8 (h 2, 3) of tile j, tokens 8 i + 2 t (+1) */
        if (!col_live)
            continue;
        /* a token's 4 columns col0 .. col0 + 3 (tiles 0 and 1) in one store (n % 32: all live) */
#pragma unroll
        for (int i = 0; i < 16; i++)
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const int tok = 8 * i + 2 * tq + u;
                if (tok >= rows)
                    continue;
                const int64_t o = (int64_t)blockIdx.y * g.c_split + (row0 + tok) * g.n + col0;
                if (g.c_f32) {
                    *(float2 *)((float *)g.c + o) = make_float2(acc[0][4 * i + u], acc[0][4 * i + 2 + u]);
                    *(float2 *)((float *)g.c + o + 2) = make_float2(acc[1][4 * i + u], acc[1][4 * i + 2 + u]);
                } else {
                    *(uint2 *)((uint16_t *)g.c + o) = make_uint2(pack2(DT, acc[0][4 * i + u], acc[0][4 * i + 2 + u]),
                                                                 pack2(DT, acc[1][4 * i + u], acc[1][4 * i + 2 + u]));
                }
            }
    }
#else
    (void)map_a;
    (void)map_w;
    (void)g;
    __trap(); /* the host launches it only where the binary has wgmma */
#endif
}

std::atomic<int> g_w4g_smem_done[2][64];

/* How a product splits k (blockIdx.y): a dense product whose tiles leave SMs idle shares the SMs
 * among its tiles, each split FFN_WGMMA_W4_SPLIT_MIN_KTILES k tiles or more; the expert form does
 * not split (its tiles are many where it runs). */
struct W4gSplit {
    int splits, kts;
};

W4gSplit split_of(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p, int64_t experts)
{
    const int ktiles = (int)rdg_ceil_div(p->k, W4G_BK);
    W4gSplit sp = {1, ktiles};
    if (experts != 1 || p->m <= 0)
        return sp;
    const int64_t tiles = rdg_ceil_div(p->m, W4G_BT) * rdg_ceil_div(p->n, W4G_BN);
    int64_t want = dev->sm_count / tiles;
    const int64_t most = ktiles / FFN_WGMMA_W4_SPLIT_MIN_KTILES;
    want = want < most ? want : most;
    if (want < 2)
        return sp;
    sp.kts = (int)rdg_ceil_div(ktiles, want);
    sp.splits = (int)rdg_ceil_div(ktiles, sp.kts); /* no empty split */
    return sp;
}

} // namespace

size_t rdg_ffn_wgmma_w4_scratch(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p)
{
    if (rdg_ffn_wgmma_w4_why(dev, p, 1) || p->m <= 0)
        return 0;
    /* any m' in (m / 2, m]: the most rows of each count of row tiles, up to where one split fills */
    size_t most = 0;
    rudnn_ffn_gemm_plan_t at = *p;
    for (int64_t t = rdg_ceil_div(p->m / 2 + 1, W4G_BT); (t - 1) * W4G_BT < p->m; t++) {
        at.m = t * W4G_BT < p->m ? t * W4G_BT : p->m;
        const W4gSplit sp = split_of(dev, &at, 1);
        if (sp.splits == 1 && t * rdg_ceil_div(p->n, W4G_BN) * 2 > dev->sm_count)
            break; /* more rows: fewer splits still */
        const size_t b = sp.splits > 1 ? (size_t)sp.splits * (size_t)at.m * (size_t)p->n * sizeof(float) : 0;
        most = b > most ? b : most;
    }
    return most;
}

const char *rdg_ffn_wgmma_w4_why(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p, int64_t experts)
{
    if (!FFN_WGMMA_W4)
        return "the int4 wgmma kernel is turned off (FFN_WGMMA_W4)";
    if (!dev->wgmma)
        return "wgmma needs an sm_90a device and binary";
    if (!dev->tensor_map_encode)
        return "the driver has no tensor-map encoder (cuTensorMapEncodeTiled)";
    if ((size_t)W4G_SMEM > dev->smem_optin)
        return "the device has too little shared memory";
    if ((p->a_dtype != RUDNN_F16 && p->a_dtype != RUDNN_BF16) || p->b_dtype != RUDNN_I4 ||
        (p->c_dtype != p->a_dtype && p->c_dtype != RUDNN_F32))
        return "F16 / BF16 x int4 weights, the product in x's dtype or F32";
    if (p->has_offset)
        return "no antiquant offset";
    const int64_t groups = p->groups > 0 ? p->groups : 1;
    if (p->k % 8 || p->n % 32 || p->k % groups || (p->k / groups) % 16)
        return "k a multiple of 8 and of 16 a group, n of 32 (16-byte rows)";
    if (p->m > INT32_MAX || p->k > INT32_MAX || p->n > INT32_MAX || experts > INT32_MAX)
        return "a row, column or expert count passes the tensor maps' 32-bit coordinates";
    return nullptr;
}

rudnn_status_t rdg_ffn_wgmma_w4(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, int64_t experts, const void *a,
                                const void *b, const void *scale, const uint32_t *offsets, void *scratch, void *c)
{
    if (const char *why = rdg_ffn_wgmma_w4_why(&q->dev, p, experts))
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "ffn gemm: ffn.wgmma_w4: %s", why);
    if ((uintptr_t)a % 16 || (uintptr_t)b % 16 || (uintptr_t)scale % 4 || (uintptr_t)c % 8)
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "ffn gemm: ffn.wgmma_w4: a, b 16-byte, scale 4-byte and c "
                         "8-byte aligned");
    if (p->m <= 0)
        return RUDNN_STATUS_SUCCESS;
    const PFN_cuTensorMapEncodeTiled_v12000 enc = (PFN_cuTensorMapEncodeTiled_v12000)q->dev.tensor_map_encode;
    CUtensorMap ma, mw;
    const cuuint64_t adims[2] = {(cuuint64_t)p->k, (cuuint64_t)p->m};
    const cuuint64_t astrides[1] = {(cuuint64_t)p->k * 2};
    const cuuint32_t abox[2] = {(cuuint32_t)W4G_BK, (cuuint32_t)W4G_BT};
    const cuuint64_t wdims[3] = {(cuuint64_t)p->n / 2, (cuuint64_t)p->k, (cuuint64_t)experts};
    const cuuint64_t wstrides[2] = {(cuuint64_t)p->n / 2, (cuuint64_t)p->k * (cuuint64_t)p->n / 2};
    const cuuint32_t wbox[3] = {W4G_BN / 2, (cuuint32_t)W4G_BK, 1};
    const cuuint32_t ones[3] = {1, 1, 1};
    const bool ok_a = rdg_encode_map16(enc, &ma, a, p->a_dtype, 2, adims, astrides, abox);
    const bool ok_w = enc(&mw, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<void *>(b), wdims, wstrides, wbox, ones,
                          CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
    if (!ok_a || !ok_w)
        return rdg_error(RUDNN_STATUS_DEVICE_ERROR, "%s: ffn.wgmma_w4: cuTensorMapEncodeTiled refused an operand "
                         "(m %lld, k %lld, n %lld)", RUDNN_GPU_BACKEND_NAME, (long long)p->m, (long long)p->k,
                         (long long)p->n);
    const bool bf16 = p->a_dtype == RUDNN_BF16;
    const auto fn = bf16 ? ffn_wgmma_w4<RUDNN_BF16> : ffn_wgmma_w4<RUDNN_F16>;
    TRY(allow_smem_once(g_w4g_smem_done, bf16, (const void *)fn, q->dev.index, W4G_SMEM, "ffn wgmma w4"));
    W4gArgs g;
    memset(&g, 0, sizeof g);
    g.offsets = offsets;
    g.scale = (const uint16_t *)scale;
    W4gSplit sp = split_of(&q->dev, p, offsets ? experts : 1);
    if (!scratch)
        sp = W4gSplit{1, (int)rdg_ceil_div(p->k, W4G_BK)};
    g.c = sp.splits > 1 ? scratch : c;
    g.c_split = sp.splits > 1 ? p->m * p->n : 0;
    g.kts = sp.kts;
    g.m = p->m, g.n = p->n, g.k = p->k;
    g.experts = (int)experts;
    g.groups = (int)(p->groups > 0 ? p->groups : 1);
    g.group_rows = (int)(p->k / g.groups);
    g.c_f32 = sp.splits > 1 || p->c_dtype == RUDNN_F32;
    g.slots = offsets ? (p->m + experts * (W4G_BT - 1)) / W4G_BT : rdg_ceil_div(p->m, W4G_BT);
    g.n_tiles = rdg_ceil_div(p->n, W4G_BN);
    const int64_t items = tc_items(g.n_tiles, g.slots);
    const int64_t max_grid = 0x7fffffff;
    const dim3 grid((unsigned)(items < max_grid ? items : max_grid), (unsigned)sp.splits);
    fn<<<grid, W4G_THREADS, W4G_SMEM, q->stream>>>(ma, mw, g);
    TRY(rdg_launched("ffn.wgmma_w4"));
    if (sp.splits > 1)
        TRY(rdg_ffn_split_sum(q, "ffn.wgmma_w4_reduce", (const float *)scratch, c, p->m * p->n, sp.splits,
                              p->c_dtype));
    rdg_note_kernel(offsets ? "ffn.wgmma_w4_grouped" : "ffn.wgmma_w4");
    return RUDNN_STATUS_SUCCESS;
}
