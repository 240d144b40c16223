/* MoE SwiGLU experts, and the FFN family's expert form (rdg_ffn_grouped_tma): the grouped
 * tensor-core GEMMs for sm_90a with TMA loads and warp specialisation.
 *
 * FFN's weights are [E, K, N] (N contiguous), the transpose of the experts' [E N, K]: BMN reads
 * B MN-major (four 3-D boxes of 64 columns x 64 rows of K a stage, wgmma's transposed B; rows of
 * K past an expert's are zeros) and stores C as is (CF32: in FP32, HIGH_PRECISION's h), or with
 * ACT the activation of it (hal/ffn.h's act plan without bias or quantization): with DUAL, a
 * gated activation, the gate columns (n_total + n0 ..., the second half of W1) and the value
 * columns (n0 ...) of the same outputs side by side in the tile, as the experts' gate and up.
 *
 * The same function, tiles and work items as moe_experts.cu's BN = 256 wgmma kernel (128 x 256
 * tiles, K in steps of 64, GEMM 1 holding the gate and up rows of the same columns side by side
 * and applying silu(g) * u in its epilogue), with the loads taken off the math warps:
 *   - warpgroup 0, the producer: one thread issues the TMA loads (cp.async.bulk.tensor with the
 *     128-byte swizzle, the layout wgmma reads) of A [128 x 64] and B [256 x 64] into 4 stages;
 *     mbarrier full[s] counts the bytes in, empty[s] the consumer warps done reading;
 *   - warpgroups 1 and 2, the consumers: 64 rows each, wgmma m64n256k16 straight from the stage,
 *     one group left running, then the epilogue from registers (a tile of 64 rows or fewer, an
 *     expert's last, leaves consumer 2 only padding rows: it skips its MMAs).
 * One CTA per work item, in the same order as the cp.async kernel, so the hardware's block
 * scheduler hands out the items as SMs free up. (Persistent CTAs taking every grid-th item were
 * up to 34% slower on the H200 (Mixtral, DeepSeek-V3 T 4096): partial and empty slots let them
 * drift apart, and the weight tiles in flight no longer fit in L2; bench/RESULTS.md.)
 * Rows past a tile's expert are loaded (the next expert's rows, or zeros past the tensor: TMA
 * fills out-of-bounds boxes with zeros) and never stored; K past the end reads zeros the same way.
 * The tensor maps are encoded on the host for each call through the driver's
 * cuTensorMapEncodeTiled, which device_open found (rdg_devinfo_t tensor_map_encode).
 */
#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "rdg_internal.h"
#include "mbarrier.cuh"
#include "moe_tc.cuh"
#include "ffn_act.cuh"
#include "ffn_tuning.h"
#include "tensor_map.h"

namespace {

#define TMA_STAGES 4
#define TMA_THREADS 384 /* producer warpgroup + two consumer warpgroups */
#define TMA_BN 256
#define TMA_A_BYTES (TC_BM * TC_BK * 2)
#define TMA_STAGE_BYTES ((TC_BM + TMA_BN) * TC_BK * 2)
/* stages aligned to 1024 bytes (the swizzle atom), then the 2 x STAGES mbarriers */
#define TMA_SMEM (TMA_STAGES * TMA_STAGE_BYTES + 1024 + 2 * TMA_STAGES * 8)

#if RDG_HAS_WGMMA
/* FFN's fused activation, from one warp's m64n256 accumulators (laid out as store_acc_256's):
 * v = round_to(h, pre); DUAL: a = v_value f(v_gate), blocks j < 16 the gate, j + 16 the value
 * columns of the same outputs; else a = f(v); a rounded to DT. Rows at or past `rows` and columns
 * past n_total are not stored. */
template <int DT, bool DUAL, int F, bool ROUND>
__device__ __forceinline__ void store_act_256(const float (&acc)[128], uint16_t *__restrict__ c, int64_t row0, int rows,
                                              int m0, int64_t n0, int64_t n_total, int lane)
{
    constexpr int PRE = ROUND ? DT : RUDNN_F32;
    for_acc_pairs_256<DUAL ? 128 : 256>(row0, rows, m0, n0, n_total, lane, [&](int64_t r, int64_t n, int i) {
        float a[2];
#pragma unroll
        for (int t = 0; t < 2; t++) {
            const float f = act_of<F, FFN_GROUPED_ACT_FAST != 0>(round_to(acc[i + t], PRE));
            a[t] = DUAL ? round_to(acc[i + 64 + t], PRE) * f : f;
        }
        *(uint32_t *)(c + r * n_total + n) = pack2(DT, a[0], a[1]);
    });
}

/* The same with the function and the rounding chosen once a tile (the unrolled loop then holds
 * one path's code: switches inside it made the epilogue's code, run once a tile, 10x larger) */
template <int DT, bool DUAL, bool ROUND>
__device__ __forceinline__ void store_act_fn(const float (&acc)[128], uint16_t *__restrict__ c, int64_t row0, int rows,
                                             int m0, int64_t n0, int64_t n_total, int lane, int act)
{
    switch (act_fn(act)) {
    case ACT_GELU: store_act_256<DT, DUAL, ACT_GELU, ROUND>(acc, c, row0, rows, m0, n0, n_total, lane); break;
    case ACT_FASTGELU: store_act_256<DT, DUAL, ACT_FASTGELU, ROUND>(acc, c, row0, rows, m0, n0, n_total, lane); break;
    case ACT_RELU: store_act_256<DT, DUAL, ACT_RELU, ROUND>(acc, c, row0, rows, m0, n0, n_total, lane); break;
    default: store_act_256<DT, DUAL, ACT_SILU, ROUND>(acc, c, row0, rows, m0, n0, n_total, lane); break;
    }
}

template <int DT, bool DUAL>
__device__ __forceinline__ void store_act_256(const float (&acc)[128], uint16_t *__restrict__ c, int64_t row0, int rows,
                                              int m0, int64_t n0, int64_t n_total, int lane, int act, int pre)
{
    if (pre == DT)
        store_act_fn<DT, DUAL, true>(acc, c, row0, rows, m0, n0, n_total, lane, act);
    else
        store_act_fn<DT, DUAL, false>(acc, c, row0, rows, m0, n0, n_total, lane, act);
}
#endif

/* C = A B^T over the slots' rows (a: map of [rows, K]; b0/b1: maps of [E N, K], boxes of 128 rows;
 * c: [rows, N]); work item L as in moe_experts.cu. */
template <int DT, bool DUAL, bool BMN = false, bool CF32 = false, bool ACT = false>
__global__ void __launch_bounds__(TMA_THREADS, 1)
tma_gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b0,
                const __grid_constant__ CUtensorMap map_b1, const uint32_t *__restrict__ offsets,
                uint16_t *__restrict__ c, int experts, int64_t n_total, int64_t k_total, int64_t slots,
                int64_t n_tiles, int act, int pre)
{
#if RDG_HAS_WGMMA
    extern __shared__ __align__(128) uint8_t tma_smem[];
    constexpr int NCOLS = DUAL ? TMA_BN / 2 : TMA_BN; /* output columns per tile */
    const int tid = threadIdx.x;
    const int wg = tid / 128;
    const uint32_t smem0 = (smem_u32(tma_smem) + 1023u) & ~1023u;
    const uint32_t full0 = smem0 + TMA_STAGES * TMA_STAGE_BYTES; /* full[s] at full0 + 8 s */
    const uint32_t empty0 = full0 + TMA_STAGES * 8;
    const int ktiles = (int)((k_total + TC_BK - 1) / TC_BK);
    const int64_t items = tc_items(n_tiles, slots);

    if (tid == 0)
        mbar_init_ring(full0, empty0, TMA_STAGES, 1, 8); /* empty: one arrival per consumer warp */
    __syncthreads();

    /* the tile of item L: expert e, rows row0 .. + rows, output columns n0 .. + NCOLS */
    auto tile_of = [&](int64_t item, int *e, int64_t *row0, int *rows, int64_t *n0) -> bool {
        int64_t nt, v;
        if (!tc_item(item, n_tiles, slots, &nt, &v))
            return false;
        *n0 = nt * NCOLS;
        return find_tile_thread(offsets, experts, v, TC_BM, e, row0, rows);
    };

    if (wg == 0) {
        set_max_regs_dec<40>();
        if (tid != 0)
            return;
        uint32_t it = 0; /* k-tiles issued by this CTA: stage it % STAGES, pass it / STAGES */
        for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
            int e, rows;
            int64_t row0, n0;
            if (!tile_of(item, &e, &row0, &rows, &n0))
                continue;
            const int brow = (int)((int64_t)e * n_total + n0); /* B row of the tile's first column */
            for (int kt = 0; kt < ktiles; kt++, it++) {
                const uint32_t s = it % TMA_STAGES;
                const uint32_t full = full0 + 8 * s;
                mbar_wait(empty0 + 8 * s, ((it / TMA_STAGES) & 1u) ^ 1u);
                mbar_expect_tx(full, TMA_STAGE_BYTES);
                const uint32_t sa = smem0 + s * TMA_STAGE_BYTES;
                const uint32_t sb = sa + TMA_A_BYTES;
                const int k = kt * TC_BK;
                tma_load_2d(sa, &map_a, k, (int)row0, full);
                if (BMN) { /* B [E, K, N]: boxes of 64 columns x 64 rows of K, 8 KiB apart */
                    for (int j = 0; j < TMA_BN / 64; j++) {
                        const int col = !DUAL ? (int)n0 + 64 * j /* DUAL: gate, then value columns */
                                              : j < 2 ? (int)(n_total + n0) + 64 * j : (int)n0 + 64 * (j - 2);
                        tma_load_3d(sb + j * TC_BK * 128, &map_b0, col, k, e, full);
                    }
                } else if (DUAL) {
                    tma_load_2d(sb, &map_b0, k, brow, full);                 /* gate rows */
                    tma_load_2d(sb + TC_BM * 128, &map_b1, k, brow, full);   /* up rows, same columns */
                } else {
                    tma_load_2d(sb, &map_b0, k, brow, full);
                    tma_load_2d(sb + TC_BM * 128, &map_b0, k, brow + TC_BM, full);
                }
            }
        }
        return;
    }

    set_max_regs_inc<232>();
    const int cw = wg - 1; /* consumer warpgroup: tile rows cw*64 .. + 64 */
    const int warp = tid / 32 % 4, lane = tid % 32;
    uint32_t it = 0;
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        int e, rows;
        int64_t row0, n0;
        if (!tile_of(item, &e, &row0, &rows, &n0))
            continue;
        float acc[128];
#pragma unroll
        for (int i = 0; i < 128; i++)
            acc[i] = 0.0f;
        if (cw * 64 >= rows) {
            /* only padding rows: release each stage as it arrives (waiting keeps this warpgroup's
             * arrivals in the producer's phase) */
            for (int kt = 0; kt < ktiles; kt++, it++) {
                const uint32_t s = it % TMA_STAGES;
                mbar_wait(full0 + 8 * s, (it / TMA_STAGES) & 1u);
                if (lane == 0)
                    mbar_arrive(empty0 + 8 * s);
            }
            continue; /* nothing to store */
        }
        uint32_t prev = 0;
        for (int kt = 0; kt < ktiles; kt++, it++) {
            const uint32_t s = it % TMA_STAGES;
            mbar_wait(full0 + 8 * s, (it / TMA_STAGES) & 1u);
            const uint32_t sa = smem0 + s * TMA_STAGE_BYTES + cw * 64 * 128;
            const uint32_t sb = smem0 + s * TMA_STAGE_BYTES + TMA_A_BYTES;
            wgmma_fence();
#pragma unroll
            for (int ks = 0; ks < TC_BK / 16; ks++) {
                if constexpr (BMN) /* 16 rows of K a step (2 KiB), the next 64 columns 8 KiB on */
                    wgmma_ss_t<DT, 256>(acc, wgmma_desc(sa + ks * 32), wgmma_desc_mn(sb + ks * 2048, TC_BK * 128), 1);
                else
                    wgmma_256<DT>(acc, wgmma_desc(sa + ks * 32), wgmma_desc(sb + ks * 32));
            }
            wgmma_commit();
            wgmma_wait<1>(); /* the previous k-tile's group is done: its stage may be refilled */
            fence_operands(acc);
            if (kt > 0 && lane == 0)
                mbar_arrive(empty0 + 8 * prev);
            prev = s;
        }
        wgmma_wait<0>();
        fence_operands(acc);
        if (lane == 0)
            mbar_arrive(empty0 + 8 * prev);

        if constexpr (ACT)
            store_act_256<DT, DUAL>(acc, c, row0, rows, cw * 64 + warp * 16, n0, n_total, lane, act, pre);
        else if constexpr (CF32) /* FFN's HIGH_PRECISION h */
            store_acc_256<DT, DUAL>(acc, (float *)c, row0, rows, cw * 64 + warp * 16, n0, n_total, lane);
        else
            store_acc_256<DT, DUAL>(acc, c, row0, rows, cw * 64 + warp * 16, n0, n_total, lane);
    }
#else
    (void)map_a;
    (void)map_b0;
    (void)map_b1;
    (void)offsets;
    (void)c;
    (void)experts;
    (void)n_total;
    (void)k_total;
    (void)slots;
    (void)n_tiles;
    (void)act;
    (void)pre;
    __trap(); /* the host launches it only where the binary has wgmma */
#endif
}

/* ---- host side ---- */

/* A 2-D row-major [rows, cols] 16-bit tensor read in boxes of 64 columns x box_rows rows. */
bool encode_2d(PFN_cuTensorMapEncodeTiled_v12000 enc, CUtensorMap *map, const void *base, rudnn_dtype_t dt,
               int64_t rows, int64_t cols, int box_rows)
{
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)cols * 2};
    const cuuint32_t box[2] = {(cuuint32_t)TC_BK, (cuuint32_t)box_rows};
    return rdg_encode_map16(enc, map, base, dt, 2, dims, strides, box);
}

typedef void (*tma_fn)(CUtensorMap, CUtensorMap, CUtensorMap, const uint32_t *, uint16_t *, int, int64_t, int64_t,
                       int64_t, int64_t, int, int);

/* dynamic shared memory limits raised, per kernel slot and device */
std::atomic<int> g_tma_smem_done[12][64];

} // namespace

const char *rdg_moe_tma_why(const rdg_devinfo_t *dev, const rudnn_moe_rows_plan_t *plan)
{
    if (!dev->tensor_map_encode)
        return "the driver has no tensor-map encoder (cuTensorMapEncodeTiled)";
    if ((size_t)TMA_SMEM > dev->smem_optin)
        return "the device has too little shared memory";
    const int64_t E = plan->experts, H = plan->hidden, I = plan->inter;
    if (E * I > INT32_MAX || E * H > INT32_MAX || plan->rows > INT32_MAX)
        return "a weight or row count passes the tensor maps' 32-bit coordinates";
    return nullptr;
}

rudnn_status_t rdg_moe_experts_tma(rdg_queue_t *q, const rudnn_moe_rows_plan_t *plan, const void *const *ptrs,
                                   const uint32_t *offsets)
{
    const PFN_cuTensorMapEncodeTiled_v12000 enc = (PFN_cuTensorMapEncodeTiled_v12000)q->dev.tensor_map_encode;
    const int64_t E = plan->experts, H = plan->hidden, I = plan->inter, rows = plan->rows;
    const rudnn_dtype_t dt = plan->dtype;
    /* GEMM 1: A = tokens [rows, H], B = gate / up [E I, H]; GEMM 2: A = act [rows, I], B = down [E H, I] */
    CUtensorMap a1, g, u, a2, d;
    if (!encode_2d(enc, &a1, ptrs[0], dt, rows, H, TC_BM) || !encode_2d(enc, &g, ptrs[1], dt, E * I, H, TC_BM) ||
        !encode_2d(enc, &u, ptrs[2], dt, E * I, H, TC_BM) || !encode_2d(enc, &a2, ptrs[4], dt, rows, I, TC_BM) ||
        !encode_2d(enc, &d, ptrs[3], dt, E * H, I, TC_BM))
        return rdg_error(RUDNN_STATUS_DEVICE_ERROR, "%s: moe.wgmma_tma: cuTensorMapEncodeTiled refused an operand "
                         "(hidden %lld, inter %lld, rows %lld)", RUDNN_GPU_BACKEND_NAME, (long long)H, (long long)I,
                         (long long)rows);

    const bool bf16 = dt == RUDNN_BF16;
    tma_fn f1 = bf16 ? tma_gemm_kernel<RUDNN_BF16, true> : tma_gemm_kernel<RUDNN_F16, true>;
    tma_fn f2 = bf16 ? tma_gemm_kernel<RUDNN_BF16, false> : tma_gemm_kernel<RUDNN_F16, false>;
    const int slot = bf16 ? 0 : 2;
    rudnn_status_t st = allow_smem_once(g_tma_smem_done, slot, (const void *)f1, q->dev.index, TMA_SMEM, "moe tma");
    if (st == RUDNN_STATUS_SUCCESS)
        st = allow_smem_once(g_tma_smem_done, slot + 1, (const void *)f2, q->dev.index, TMA_SMEM, "moe tma");
    if (st != RUDNN_STATUS_SUCCESS)
        return st;

    const int64_t slots = (rows + E * (TC_BM - 1)) / TC_BM;
    const int64_t nt1 = (I + TMA_BN / 2 - 1) / (TMA_BN / 2), nt2 = (H + TMA_BN - 1) / TMA_BN;
    const int64_t items1 = tc_items(nt1, slots), items2 = tc_items(nt2, slots);
    const int64_t max_grid = 0x7fffffff;
    f1<<<dim3((unsigned)(items1 < max_grid ? items1 : max_grid)), TMA_THREADS, TMA_SMEM, q->stream>>>(
        a1, g, u, offsets, (uint16_t *)ptrs[4], (int)E, I, H, slots, nt1, 0, 0);
    st = rdg_launched("moe experts_tensor_core tma gate/up");
    if (st != RUDNN_STATUS_SUCCESS)
        return st;
    f2<<<dim3((unsigned)(items2 < max_grid ? items2 : max_grid)), TMA_THREADS, TMA_SMEM, q->stream>>>(
        a2, d, d, offsets, (uint16_t *)ptrs[5], (int)E, H, I, slots, nt2, 0, 0);
    return rdg_launched("moe experts_tensor_core tma down");
}

/* ---- the FFN family's expert form ---- */

const char *rdg_ffn_grouped_tma_why(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p, int64_t experts)
{
    if (!dev->wgmma)
        return "wgmma needs an sm_90a device and binary";
    if (!dev->tensor_map_encode)
        return "the driver has no tensor-map encoder (cuTensorMapEncodeTiled)";
    if ((size_t)TMA_SMEM > dev->smem_optin)
        return "the device has too little shared memory";
    if ((p->a_dtype != RUDNN_F16 && p->a_dtype != RUDNN_BF16) || p->b_dtype != p->a_dtype ||
        (p->c_dtype != p->a_dtype && p->c_dtype != RUDNN_F32))
        return "one 16-bit float dtype for x and the weights, the product in it or in F32";
    if (p->k % 8 || p->n % 8)
        return "k and n must be multiples of 8 (16-byte rows)";
    if (p->m > INT32_MAX || p->k > INT32_MAX || p->n > INT32_MAX || experts > INT32_MAX)
        return "a row, column or expert count passes the tensor maps' 32-bit coordinates";
    return nullptr;
}

namespace {

/* One grouped launch for FFN: B [experts, k, n] through a 3-D map, f one of the BMN kernels (its
 * shared-memory slot `slot`), n_out output columns in tiles of ncols. */
rudnn_status_t launch_ffn_grouped(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, int64_t experts, const void *a,
                                  const void *b, const uint32_t *offsets, void *c, tma_fn f, int slot, int64_t n_out,
                                  int ncols, int act, int pre)
{
    const PFN_cuTensorMapEncodeTiled_v12000 enc = (PFN_cuTensorMapEncodeTiled_v12000)q->dev.tensor_map_encode;
    const rudnn_dtype_t dt = p->a_dtype;
    CUtensorMap ma, mb;
    const cuuint64_t bdims[3] = {(cuuint64_t)p->n, (cuuint64_t)p->k, (cuuint64_t)experts};
    const cuuint64_t bstrides[2] = {(cuuint64_t)p->n * 2, (cuuint64_t)p->k * (cuuint64_t)p->n * 2};
    const cuuint32_t bbox[3] = {64, (cuuint32_t)TC_BK, 1};
    if (!encode_2d(enc, &ma, a, dt, p->m, p->k, TC_BM) || !rdg_encode_map16(enc, &mb, b, dt, 3, bdims, bstrides, bbox))
        return rdg_error(RUDNN_STATUS_DEVICE_ERROR, "%s: ffn.wgmma_grouped: cuTensorMapEncodeTiled refused an operand "
                         "(m %lld, k %lld, n %lld)", RUDNN_GPU_BACKEND_NAME, (long long)p->m, (long long)p->k,
                         (long long)p->n);
    TRY(allow_smem_once(g_tma_smem_done, slot, (const void *)f, q->dev.index, TMA_SMEM, "ffn grouped tma"));
    const int64_t slots = (p->m + experts * (TC_BM - 1)) / TC_BM;
    const int64_t nt = (n_out + ncols - 1) / ncols;
    const int64_t items = tc_items(nt, slots);
    const int64_t max_grid = 0x7fffffff;
    rdg_note_kernel("ffn.wgmma_grouped");
    f<<<dim3((unsigned)(items < max_grid ? items : max_grid)), TMA_THREADS, TMA_SMEM, q->stream>>>(
        ma, mb, mb, offsets, (uint16_t *)c, (int)experts, n_out, p->k, slots, nt, act, pre);
    return rdg_launched("ffn.wgmma_grouped");
}

int act_gated(const rudnn_ffn_act_plan_t *ap)
{
    return ap->activation >= RUDNN_FFN_GEGLU;
}

} // namespace

rudnn_status_t rdg_ffn_grouped_tma(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, int64_t experts, const void *a,
                                   const void *b, const uint32_t *offsets, void *c)
{
    if (p->m <= 0 || p->n <= 0)
        return RUDNN_STATUS_SUCCESS;
    const bool bf16 = p->a_dtype == RUDNN_BF16;
    const bool f32 = p->c_dtype == RUDNN_F32;
    const tma_fn fns[2][2] = {{tma_gemm_kernel<RUDNN_F16, false, true>, tma_gemm_kernel<RUDNN_F16, false, true, true>},
                              {tma_gemm_kernel<RUDNN_BF16, false, true>, tma_gemm_kernel<RUDNN_BF16, false, true, true>}};
    return launch_ffn_grouped(q, p, experts, a, b, offsets, c, fns[bf16][f32], 4 + 2 * bf16 + f32, p->n, TMA_BN, 0,
                              0);
}

const char *rdg_ffn_grouped_act_why(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p,
                                    const rudnn_ffn_act_plan_t *ap, int64_t experts)
{
    if (const char *why = rdg_ffn_grouped_tma_why(dev, p, experts))
        return why;
    if (ap->has_bias || ap->deq_len != 0 || ap->h_dtype == RUDNN_I32)
        return "the fused activation takes no bias and no quantization";
    if (ap->out_dtype != p->a_dtype || (ap->pre_dtype != RUDNN_F32 && ap->pre_dtype != p->a_dtype))
        return "the activation rounds to x's dtype (or F32 first) and writes x's dtype";
    if (ap->rows != p->m || ap->n1 != p->n || ap->k2 != (act_gated(ap) ? p->n / 2 : p->n) || ap->k2 % 8)
        return "the activation's shape is not the product's (k2 a multiple of 8)";
    return nullptr;
}

rudnn_status_t rdg_ffn_grouped_act(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, const rudnn_ffn_act_plan_t *ap,
                                   int64_t experts, const void *a, const void *b, const uint32_t *offsets, void *out)
{
    if (p->m <= 0 || ap->k2 <= 0)
        return RUDNN_STATUS_SUCCESS;
    const bool bf16 = p->a_dtype == RUDNN_BF16, gated = act_gated(ap);
    const tma_fn fns[2][2] = {
        {tma_gemm_kernel<RUDNN_F16, false, true, false, true>, tma_gemm_kernel<RUDNN_F16, true, true, false, true>},
        {tma_gemm_kernel<RUDNN_BF16, false, true, false, true>, tma_gemm_kernel<RUDNN_BF16, true, true, false, true>}};
    return launch_ffn_grouped(q, p, experts, a, b, offsets, out, fns[bf16][gated], 8 + 2 * bf16 + gated, ap->k2,
                              gated ? TMA_BN / 2 : TMA_BN, (int)ap->activation, (int)ap->pre_dtype);
}
