/* Device helpers of the MoE expert GEMMs (moe_experts.cu), in their own header so that another
 * kernel variant can share them (the cp.async kernels of moe_experts.cu and the TMA kernel of
 * moe_experts_tma.cu). Include after gpu_compat.h.
 *
 * Shared-memory operand layout of the tensor-core kernels: 128-byte rows (64 16-bit elements of
 * K) with the 128-byte XOR swizzle in 1024-byte atoms of 8 rows: wgmma's K-major layout, what TMA
 * writes with CU_TENSOR_MAP_SWIZZLE_128B, and conflict-free for ldmatrix. */
#ifndef RUDNN_MOE_TC_CUH
#define RUDNN_MOE_TC_CUH

#include <atomic>

#include "wgmma.cuh" /* smem_u32, wgmma descriptors, fences and groups */

#define TC_BM 128
#define TC_BK 64     /* 128-byte shared rows */
#define TC_GROUP_N 8 /* column tiles per raster group: CTAs running together share weight tiles in L2 */

namespace {

/* The raster of the grouped products' work items (the grids of moe_experts.cu, moe_experts_tma.cu
 * and ffn_wgmma_w4.cu): item L = (column group, slot, column in group), TC_GROUP_N column tiles a
 * group, so that the CTAs running together share a few row tiles and the weight tiles of a few
 * experts. tc_items: the items of n_tiles column tiles x slots (a short last group's extra ones
 * empty); tc_item: item's column tile and slot, false for an empty one. */
__host__ __device__ inline int64_t tc_items(int64_t n_tiles, int64_t slots)
{
    return (n_tiles + TC_GROUP_N - 1) / TC_GROUP_N * ((int64_t)TC_GROUP_N * slots);
}

__device__ __forceinline__ bool tc_item(int64_t item, int64_t n_tiles, int64_t slots, int64_t *n_tile, int64_t *slot)
{
    const int64_t per_group = (int64_t)TC_GROUP_N * slots;
    const int64_t grp = item / per_group;
    const int64_t within = item - grp * per_group;
    const int64_t gw = min((int64_t)TC_GROUP_N, n_tiles - grp * TC_GROUP_N); /* columns in the group */
    if (within >= gw * slots)
        return false;
    *n_tile = grp * TC_GROUP_N + within % gw;
    *slot = within / gw;
    return true;
}

__device__ __forceinline__ float silu_mul(float g, float u)
{
    /* ex2.approx and rcp.approx: a few FP32 ulps, far below the 16-bit rounding of act; a large
     * negative g gives 1 + e = inf and g * rcp(inf) = -0, as the exact quotient rounds to */
    return __fdividef(g, 1.0f + __expf(-g)) * u;
}

__device__ __forceinline__ int64_t slot_start(uint32_t offset, int64_t e, int bm)
{
    return ((int64_t)offset + e * (bm - 1)) / bm;
}

/* First row and row count of slot v of expert e; false when the slot has no rows. */
__device__ __forceinline__ bool slot_rows(const uint32_t *__restrict__ offsets, int e, int64_t v, int bm,
                                          int64_t *row0, int *rows)
{
    const uint32_t o0 = offsets[e], o1 = offsets[e + 1];
    const int64_t r0 = (int64_t)o0 + (v - slot_start(o0, e, bm)) * bm;
    if (r0 >= (int64_t)o1)
        return false;
    *row0 = r0;
    *rows = (int)min((int64_t)bm, (int64_t)o1 - r0);
    return true;
}

/* Expert, first row and row count of slot v in one thread (a binary search over the experts'
 * slot starts); false when the slot has no rows. */
__device__ __forceinline__ bool find_tile_thread(const uint32_t *__restrict__ offsets, int experts, int64_t v, int bm,
                                                 int *expert, int64_t *row0, int *rows)
{
    int lo = 0, hi = experts; /* the last e in [0, E] with slot_start(e) <= v; s(0) = 0 <= v */
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (slot_start(offsets[mid], mid, bm) <= v)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (lo >= experts || !slot_rows(offsets, lo, v, bm, row0, rows))
        return false;
    *expert = lo;
    return true;
}

#if RDG_MOE_TENSOR_CORES
/* byte offset of 16-byte chunk `ch` (0..7) of shared row `row` (128 bytes): the 128-byte swizzle
 * of wgmma's K-major layout (8-row atoms of 1024 bytes), also conflict-free for ldmatrix */
__device__ __forceinline__ uint32_t swz(int row, int ch)
{
    return (uint32_t)(row * 128 + ((ch ^ (row & 7)) << 4));
}

#if RDG_HAS_WGMMA
/* ---- sm_90a: warpgroup MMA, operands in shared memory ---- */

template <int DT>
__device__ __forceinline__ void wgmma_256(float (&d)[128], uint64_t da, uint64_t db)
{
    if constexpr (DT == RUDNN_BF16)
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                     : "l"(da), "l"(db), "r"(1));
    else
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                     : "l"(da), "l"(db), "r"(1));
}

/* One warp's m64n256 accumulators, NCOLS of their columns (256, or 128 where the tile pairs two
 * column sets): accumulator block j (0..31) holds columns j*8 .. +8; lane l has rows m0 + l/4 (+8)
 * and columns 2 (l % 4) + 0, 1 of each block. Calls st(row, n, i) for each row below `rows` and
 * column pair n, n + 1 below n_total, i the pair's first accumulator (acc[i], acc[i + 1]). */
template <int NCOLS, typename St>
__device__ __forceinline__ void for_acc_pairs_256(int64_t row0, int rows, int m0, int64_t n0, int64_t n_total, int lane,
                                                  St st)
{
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int m = m0 + lane / 4 + h * 8;
        if (m >= rows)
            continue;
#pragma unroll
        for (int j = 0; j < NCOLS / 8; j++) {
            const int64_t n = n0 + j * 8 + (lane % 4) * 2;
            if (n < n_total)
                st(row0 + m, n, j * 4 + 2 * h);
        }
    }
}

/* The accumulators -> rows of C. DUAL (GEMM 1): blocks j < 16 are gate columns, j + 16 the up
 * columns of the same outputs, stored as silu(g) * u. C in DT (CT uint16_t) or FP32 (CT float). */
template <int DT, bool DUAL, typename CT = uint16_t>
__device__ __forceinline__ void store_acc_256(const float (&acc)[128], CT *__restrict__ c, int64_t row0, int rows,
                                              int m0, int64_t n0, int64_t n_total, int lane)
{
    for_acc_pairs_256<DUAL ? 128 : 256>(row0, rows, m0, n0, n_total, lane, [&](int64_t r, int64_t n, int i) {
        float lo = acc[i], hi = acc[i + 1];
        if (DUAL) {
            lo = silu_mul(lo, acc[i + 64]);
            hi = silu_mul(hi, acc[i + 65]);
        }
        if constexpr (sizeof(CT) == 4)
            *(float2 *)(c + r * n_total + n) = make_float2(lo, hi);
        else
            *(uint32_t *)(c + r * n_total + n) = pack2(DT, lo, hi);
    });
}

#endif
#endif /* RDG_MOE_TENSOR_CORES */

} // namespace

#endif
