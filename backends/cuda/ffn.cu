/* The FFN family's kernels (hal/ffn.h) for CUDA and HIP: a tiled GEMM for every dtype case (float,
 * int8 x int8, and weight-only int8 / int4 dequantized as the tiles load), the activation epilogue
 * and the output epilogue, and the table. On CUDA, float GEMMs go to cuBLAS (ffn_cublas.cu) when it
 * loads; everything else runs the tiled kernel here. */
#include <string.h>

#include "rdg_internal.h"
#include "elem.cuh"
#include "ffn_act.cuh"
#include "ffn_split.cuh"
#include "ffn_tuning.h"
#include "pdl.cuh"

namespace {

/* ---- loads --------------------------------------------------------------------------------- */

/* One element of a F32 / F16 / BF16 / I8 / I32 / I64 (an F32's bits in the low half) array as FP32,
 * by a dtype known only at run time (the epilogues' small side inputs). */
__device__ __forceinline__ float ld_any(const void *p, int64_t i, int dt)
{
    switch (dt) {
    case RUDNN_F16: return rdg_f16_to_f32(((const uint16_t *)p)[i]);
    case RUDNN_BF16: return rdg_bf16_to_f32(((const uint16_t *)p)[i]);
    case RUDNN_I8: return (float)((const int8_t *)p)[i];
    case RUDNN_I32: return (float)((const int32_t *)p)[i];
    case RUDNN_I64: return __int_as_float((int)(uint32_t)((const uint64_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

/* v rounded to F16 / BF16 (to nearest even) or kept as F32, stored as element i of p's dtype dt. */
__device__ __forceinline__ void st_any(void *p, int64_t i, int dt, float v)
{
    if (dt == RUDNN_F32)
        ((float *)p)[i] = v;
    else if (dt == RUDNN_F16)
        ((uint16_t *)p)[i] = rdg_f32_to_f16(v);
    else
        ((uint16_t *)p)[i] = rdg_f32_to_bf16(v);
}

/* A [m, k] element as the accumulator's type. */
template <int DT, typename Acc>
struct LoadA {
    __device__ Acc operator()(const void *a, int64_t i) const { return (Acc)Elem<DT>::ld(a, i); }
};
template <>
struct LoadA<RUDNN_I8, int> {
    __device__ int operator()(const void *a, int64_t i) const { return ((const int8_t *)a)[i]; }
};

/* Weight w [k, n] at (r, c), for int8 / int4 storage the raw integer. */
template <int WDT>
__device__ __forceinline__ int ld_int_weight(const void *b, int64_t n, int64_t r, int64_t c)
{
    if constexpr (WDT == RUDNN_I8)
        return ((const int8_t *)b)[r * n + c];
    const uint8_t byte = ((const uint8_t *)b)[(r * n + c) >> 1]; /* n even: a row is n / 2 bytes */
    const int nib = (c & 1) ? byte >> 4 : byte & 0xf;
    return nib >= 8 ? nib - 16 : nib;
}

struct GemmArgs {
    const void *a, *b, *scale, *offset;
    void *c;
    int64_t m, n, k;
    int64_t group_rows; /* weight-only: rows of k per scale row */
    int c_dtype;        /* F32 / I32 (the accumulator's type), or F16 / BF16 (rounded once) */
};

/* Stores one C element: the accumulator as is, or rounded to F16 / BF16. */
template <typename Acc>
__device__ __forceinline__ void store_c(const GemmArgs &g, int64_t i, Acc v)
{
    if (g.c_dtype == RUDNN_F16)
        ((uint16_t *)g.c)[i] = rdg_f32_to_f16((float)v);
    else if (g.c_dtype == RUDNN_BF16)
        ((uint16_t *)g.c)[i] = rdg_f32_to_bf16((float)v);
    else
        ((Acc *)g.c)[i] = v;
}

/* B [k, n] element as the accumulator's type: float / int8 as stored, weight-only dequantized to
 * A's dtype (ADT). */
template <int ADT, int BDT, typename Acc>
struct LoadB {
    __device__ Acc operator()(const GemmArgs &g, int64_t r, int64_t c) const
    {
        if constexpr (BDT == RUDNN_I4 || (BDT == RUDNN_I8 && ADT != RUDNN_I8)) {
            const int64_t s = (int64_t)((int)r / (int)g.group_rows) * g.n + c; /* k < 65536 */
            const float off = g.offset ? Elem<ADT>::ld(g.offset, s) : 0.0f;
            return (Acc)round_to(((float)ld_int_weight<BDT>(g.b, g.n, r, c) + off) * Elem<ADT>::ld(g.scale, s), ADT);
        } else if constexpr (BDT == RUDNN_I8) {
            return (Acc)((const int8_t *)g.b)[r * g.n + c];
        } else {
            return (Acc)Elem<BDT>::ld(g.b, r * g.n + c);
        }
    }
};

/* ---- the tiled GEMM ---------------------------------------------------------------------------
 * A block computes a FFN_TILE_M x FFN_TILE_N tile of C, stepping through k by FFN_TILE_K: each
 * thread loads a few elements of the A and B tiles into shared memory (converted to the
 * accumulator's type) and accumulates a FFN_MICRO x FFN_MICRO patch, rows and columns strided by
 * the thread grid so that neighbouring threads read neighbouring shared words. One fixed order of
 * summation: deterministic. */
constexpr int TM = FFN_TILE_M, TN = FFN_TILE_N, TK = FFN_TILE_K, MU = FFN_MICRO;
constexpr int TX = TN / MU, TY = TM / MU, THREADS = TX * TY;

template <int ADT, int BDT, typename Acc>
__global__ void __launch_bounds__(THREADS) ffn_gemm_tiled(GemmArgs g)
{
    __shared__ Acc as[TK][TM + 1];
    __shared__ Acc bs[TK][TN];
    const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
    const int64_t row0 = (int64_t)blockIdx.y * TM, col0 = (int64_t)blockIdx.x * TN;
    Acc acc[MU][MU];
#pragma unroll
    for (int i = 0; i < MU; i++)
#pragma unroll
        for (int j = 0; j < MU; j++)
            acc[i][j] = 0;
    const LoadA<ADT, Acc> load_a;
    const LoadB<ADT, BDT, Acc> load_b;
    for (int64_t k0 = 0; k0 < g.k; k0 += TK) {
        for (int e = threadIdx.x; e < TM * TK; e += THREADS) {
            const int r = e / TK, kk = e % TK;
            const int64_t gr = row0 + r, gk = k0 + kk;
            as[kk][r] = gr < g.m && gk < g.k ? load_a(g.a, gr * g.k + gk) : (Acc)0;
        }
        for (int e = threadIdx.x; e < TK * TN; e += THREADS) {
            const int kk = e / TN, c = e % TN;
            const int64_t gk = k0 + kk, gc = col0 + c;
            bs[kk][c] = gk < g.k && gc < g.n ? load_b(g, gk, gc) : (Acc)0;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TK; kk++) {
            Acc av[MU], bv[MU];
#pragma unroll
            for (int i = 0; i < MU; i++)
                av[i] = as[kk][ty + i * TY];
#pragma unroll
            for (int j = 0; j < MU; j++)
                bv[j] = bs[kk][tx + j * TX];
#pragma unroll
            for (int i = 0; i < MU; i++)
#pragma unroll
                for (int j = 0; j < MU; j++)
                    acc[i][j] += av[i] * bv[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < MU; i++)
#pragma unroll
        for (int j = 0; j < MU; j++) {
            const int r = ty + i * TY, c = tx + j * TX;
            if (row0 + r < g.m && col0 + c < g.n)
                store_c(g, (row0 + r) * g.n + col0 + c, acc[i][j]);
        }
}

template <int ADT, int BDT, typename Acc>
rudnn_status_t launch_tiled(rdg_queue_t *q, const GemmArgs &g, const char *name)
{
    const dim3 grid((unsigned)rdg_ceil_div(g.n, TN), (unsigned)rdg_ceil_div(g.m, TM));
    rdg_note_kernel(name);
    ffn_gemm_tiled<ADT, BDT, Acc><<<grid, THREADS, 0, q->stream>>>(g);
    return rdg_launched(name);
}

/* ---- int4 on wgmma ------------------------------------------------------------------------------
 * Whether the int4 wgmma kernel takes plan p (dense: experts 1; grouped: rows the most of one
 * expert's): from FFN_WGMMA_W4_MIN_ROWS rows, where its shapes and the device allow (the operands'
 * alignment is checked at the call: unaligned, the product falls to the tiled kernel). */
#if !RDG_HIP
bool wgmma_w4_plan_fits(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p, int64_t experts, int64_t rows)
{
    return rows >= FFN_WGMMA_W4_MIN_ROWS && rdg_ffn_wgmma_w4_why(dev, p, experts) == nullptr;
}

bool wgmma_w4_aligned(rudnn_mem_ref_t a, rudnn_mem_ref_t b, rudnn_mem_ref_t scale, rudnn_mem_ref_t c)
{
    return (uintptr_t)rdg_at(a) % 16 == 0 && (uintptr_t)rdg_at(b) % 16 == 0 && (uintptr_t)rdg_at(scale) % 4 == 0 &&
           (uintptr_t)rdg_at(c) % 8 == 0;
}
#endif

/* ---- weight-only through cuBLAS -----------------------------------------------------------------
 * Past the few-rows kernels (deq_gemm_fits) the weights are dequantized once into the
 * scratch, W' [k, n] in A's dtype exactly as LoadB rounds them (hal/ffn.h), and cuBLAS multiplies:
 * one pass over the weights, then the GEMM at the float path's speed. A block is one row of k
 * (k < 65536: the grid's y), a thread FFN_DEQ_COLS consecutive columns. */
#if !RDG_HIP && RDG_HAVE_CUBLAS
constexpr int DEQ_COLS = FFN_DEQ_COLS, DEQ_THREADS = FFN_EW_THREADS;

/* Whether gemm takes this path for plan p: weight-only rows that neither the few-rows kernel nor
 * the int4 tensor-core kernel takes by the plan (so that the workspace can be sized from it; a
 * tensor-core plan with unaligned weights keeps the tiled kernel). */
int deq_gemm_fits(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p)
{
    const int wo = (p->a_dtype == RUDNN_F16 || p->a_dtype == RUDNN_BF16) &&
                   (p->b_dtype == RUDNN_I8 || p->b_dtype == RUDNN_I4);
    return wo && p->m > 0 && !rdg_ffn_gemv_fits(p) && !rdg_ffn_mma_w4_plan_fits(dev, p) &&
           !wgmma_w4_plan_fits(dev, p, 1, p->m);
}

template <int ADT, int BDT>
__global__ void __launch_bounds__(DEQ_THREADS) ffn_dequant(GemmArgs g, uint16_t *__restrict__ w)
{
    const LoadB<ADT, BDT, float> load_b;
    const int64_t r = blockIdx.y, c0 = ((int64_t)blockIdx.x * DEQ_THREADS + threadIdx.x) * DEQ_COLS;
    if (c0 >= g.n)
        return;
    uint16_t v[DEQ_COLS];
#pragma unroll
    for (int j = 0; j < DEQ_COLS; j++) {
        const float x = c0 + j < g.n ? load_b(g, r, c0 + j) : 0.0f; /* already rounded to A's dtype */
        v[j] = ADT == RUDNN_BF16 ? rdg_f32_to_bf16(x) : rdg_f32_to_f16(x);
    }
    uint16_t *out = w + r * g.n + c0;
    if (g.n % DEQ_COLS == 0) { /* rows of whole 16-byte pieces (the scratch is 256-byte aligned) */
        static_assert(DEQ_COLS == 8, "one 16-byte store a thread");
        *(uint4 *)out = make_uint4(v[0] | (uint32_t)v[1] << 16, v[2] | (uint32_t)v[3] << 16,
                                   v[4] | (uint32_t)v[5] << 16, v[6] | (uint32_t)v[7] << 16);
    } else {
        for (int j = 0; j < DEQ_COLS && c0 + j < g.n; j++)
            out[j] = v[j];
    }
}

template <int ADT, int BDT>
rudnn_status_t launch_dequant(rdg_queue_t *q, const GemmArgs &g, void *w)
{
    const dim3 grid((unsigned)rdg_ceil_div(rdg_ceil_div(g.n, DEQ_COLS), DEQ_THREADS), (unsigned)g.k);
    ffn_dequant<ADT, BDT><<<grid, DEQ_THREADS, 0, q->stream>>>(g, (uint16_t *)w);
    return rdg_launched("ffn.dequant");
}

rudnn_status_t ffn_gemm_dequant_cublas(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, const GemmArgs &g, void *w)
{
    const int a = p->a_dtype, b = p->b_dtype;
    if (a == RUDNN_F16 && b == RUDNN_I8)
        TRY((launch_dequant<RUDNN_F16, RUDNN_I8>(q, g, w)));
    else if (a == RUDNN_BF16 && b == RUDNN_I8)
        TRY((launch_dequant<RUDNN_BF16, RUDNN_I8>(q, g, w)));
    else if (a == RUDNN_F16 && b == RUDNN_I4)
        TRY((launch_dequant<RUDNN_F16, RUDNN_I4>(q, g, w)));
    else if (a == RUDNN_BF16 && b == RUDNN_I4)
        TRY((launch_dequant<RUDNN_BF16, RUDNN_I4>(q, g, w)));
    else
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "ffn gemm: no dequantization for dtypes %d x %d", a, b);
    rudnn_ffn_gemm_plan_t f = *p; /* the same product on W' */
    f.b_dtype = p->a_dtype;
    f.groups = 0;
    TRY(rdg_ffn_gemm_cublas(q, &f, g.a, w, g.c));
    rdg_note_kernel("ffn.dequant_cublas");
    return RUDNN_STATUS_SUCCESS;
}
#endif

/* ---- epilogues ------------------------------------------------------------------------------- */

/* h[r, c] + bias[c], dequantized, rounded to pre_dtype: the value the activation reads. */
__device__ __forceinline__ float hidden_value(const rudnn_ffn_act_plan_t &p, const void *h, const void *bias,
                                              const void *deq, int64_t r, int64_t c)
{
    float v;
    if (p.h_dtype == RUDNN_I32) {
        int64_t s = ((const int32_t *)h)[r * p.n1 + c];
        if (p.has_bias)
            s += ((const int32_t *)bias)[c]; /* exact in int64 */
        v = (float)s;
    } else {
        v = ld_any(h, r * p.n1 + c, p.h_dtype);
        if (p.has_bias)
            v += ld_any(bias, c, p.bias_dtype);
    }
    if (p.deq_len > 0)
        v *= ld_any(deq, p.deq_len == 1 ? 0 : c, p.deq_dtype);
    return round_to(v, p.pre_dtype);
}

__device__ __forceinline__ int8_t requant(float v)
{
    if (v != v)
        return 0;
    if (v >= 127.0f)
        return 127;
    if (v <= -128.0f)
        return -128;
    return (int8_t)__float2int_rn(v); /* round half to even */
}

__global__ void ffn_act_kernel(rudnn_ffn_act_plan_t p, const void *h, const void *bias, const void *deq,
                               const void *scale, const void *offset, void *out)
{
    const int64_t total = p.rows * p.k2;
    const int gated = p.activation >= RUDNN_FFN_GEGLU;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / p.k2, j = i % p.k2;
        float a;
        if (gated)
            a = hidden_value(p, h, bias, deq, r, j) * act_scalar(p.activation, hidden_value(p, h, bias, deq, r, p.k2 + j));
        else
            a = act_scalar(p.activation, hidden_value(p, h, bias, deq, r, j));
        if (p.out_dtype == RUDNN_I8) {
            const float s = ((const float *)scale)[p.scale_len == 1 ? 0 : j];
            ((int8_t *)out)[i] = requant(a * s + ((const float *)offset)[0]);
        } else {
            st_any(out, i, p.out_dtype, a);
        }
    }
}

/* Four consecutive elements of a F32 / F16 / BF16 row as FP32 (p 8- or 16-byte aligned). */
__device__ __forceinline__ void ld4(const void *p, int64_t i, int dt, float v[4])
{
    if (dt == RUDNN_F32) {
        const float4 f = *(const float4 *)((const float *)p + i);
        v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
        return;
    }
    const uint2 u = *(const uint2 *)((const uint16_t *)p + i);
    const uint16_t e[4] = {(uint16_t)u.x, (uint16_t)(u.x >> 16), (uint16_t)u.y, (uint16_t)(u.y >> 16)};
#pragma unroll
    for (int k = 0; k < 4; k++)
        v[k] = dt == RUDNN_F16 ? rdg_f16_to_f32(e[k]) : rdg_bf16_to_f32(e[k]);
}

__device__ __forceinline__ void st4(void *p, int64_t i, int dt, const float v[4])
{
    if (dt == RUDNN_F32) {
        *(float4 *)((float *)p + i) = make_float4(v[0], v[1], v[2], v[3]);
        return;
    }
    uint32_t w[2];
#pragma unroll
    for (int k = 0; k < 2; k++)
        w[k] = dt == RUDNN_F16 ? (uint32_t)rdg_f32_to_f16(v[2 * k]) | (uint32_t)rdg_f32_to_f16(v[2 * k + 1]) << 16
                               : rdg_pack_bf16x2(v[2 * k], v[2 * k + 1]);
    *(uint2 *)((uint16_t *)p + i) = make_uint2(w[0], w[1]);
}

/* The float activation four columns a thread (ffn_act_vec_fits): rows over grid.y, columns over
 * grid.x; the same arithmetic as ffn_act_kernel, with wide loads and no per-element division. */
__global__ void ffn_act_vec4(rudnn_ffn_act_plan_t p, const void *h, const void *bias, void *out)
{
    rdg_pdl_trigger(); /* launched as a programmatic dependent (pdl.cuh) */
    rdg_pdl_wait();
    const int gated = p.activation >= RUDNN_FFN_GEGLU;
    const int quads = (int)(p.k2 / 4);
    for (int64_t r = blockIdx.y; r < p.rows; r += gridDim.y)
        for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < quads; q += gridDim.x * blockDim.x) {
            const int64_t j = (int64_t)q * 4;
            float v[4], g[4], a[4];
            ld4(h, r * p.n1 + j, p.h_dtype, v);
            if (gated)
                ld4(h, r * p.n1 + p.k2 + j, p.h_dtype, g);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                if (p.has_bias) {
                    v[k] += ld_any(bias, j + k, p.bias_dtype);
                    if (gated)
                        g[k] += ld_any(bias, p.k2 + j + k, p.bias_dtype);
                }
                v[k] = round_to(v[k], p.pre_dtype);
                a[k] = gated ? v[k] * act_scalar(p.activation, round_to(g[k], p.pre_dtype))
                             : act_scalar(p.activation, v[k]);
            }
            st4(out, r * p.k2 + j, p.out_dtype, a);
        }
}

/* Float h and a, no dequantization, k2 a multiple of 4 (so every row's quads stay aligned). */
bool ffn_act_vec_fits(const rudnn_ffn_act_plan_t *p)
{
    return p->h_dtype != RUDNN_I32 && p->out_dtype != RUDNN_I8 && p->deq_len == 0 && p->k2 % 4 == 0;
}

#if !RDG_HIP
/* The split sum of k and the activation in one (ffn_gemm_act): element i = (r, j) of a [rows, k2]
 * from the splits' FP32 partials [splits, rows, n1] added in split order and rounded to h_dtype (the
 * value rdg_ffn_split_sum stores and ffn_act_vec4 loads), then ffn_act_vec4's arithmetic: the same
 * bits, without h's round trip and one launch fewer. A programmatic dependent of the product. */
__global__ void ffn_split_act(rudnn_ffn_act_plan_t p, const float *__restrict__ partial, int splits,
                              const void *bias, void *out)
{
    rdg_pdl_trigger();
    rdg_pdl_wait();
    const int gated = p.activation >= RUDNN_FFN_GEGLU;
    const int64_t total = p.rows * p.k2, mn = p.rows * p.n1;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / p.k2, j = i - r * p.k2;
        const float *pv = partial + r * p.n1 + j;
        float v = ffn_sum_splits(pv, mn, splits), g = gated ? ffn_sum_splits(pv + p.k2, mn, splits) : 0.0f;
        v = round_to(v, p.h_dtype);
        g = round_to(g, p.h_dtype);
        if (p.has_bias) {
            v += ld_any(bias, j, p.bias_dtype);
            if (gated)
                g += ld_any(bias, p.k2 + j, p.bias_dtype);
        }
        v = round_to(v, p.pre_dtype);
        const float a = gated ? v * act_scalar(p.activation, round_to(g, p.pre_dtype)) : act_scalar(p.activation, v);
        st_any(out, i, p.out_dtype, a);
    }
}
#endif

__global__ void ffn_out_kernel(rudnn_ffn_out_plan_t p, const void *h, const void *bias, const void *deq, void *y)
{
    const int64_t total = p.rows * p.n;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = i % p.n;
        float v;
        if (p.h_dtype == RUDNN_I32) {
            int64_t s = ((const int32_t *)h)[i];
            if (p.has_bias)
                s += ((const int32_t *)bias)[c];
            v = (float)s;
        } else {
            v = ((const float *)h)[i];
            if (p.has_bias)
                v += ld_any(bias, c, p.bias_dtype);
        }
        if (p.deq_len > 0)
            v *= ld_any(deq, p.deq_len == 1 ? 0 : c, p.deq_dtype);
        st_any(y, i, p.y_dtype, v);
    }
}

unsigned elementwise_blocks(const rdg_queue_t *q, int64_t total)
{
    const int64_t want = rdg_ceil_div(total, FFN_EW_THREADS);
    const int64_t cap = (int64_t)q->dev.sm_count * FFN_EW_BLOCKS_PER_SM;
    return (unsigned)(want < cap ? (want > 0 ? want : 1) : cap);
}

/* ---- table entries ----------------------------------------------------------------------------- */

rudnn_status_t ffn_gemm_tiled_any(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, const GemmArgs &g)
{
    const int a = p->a_dtype, b = p->b_dtype;
    if (a == RUDNN_I8 && b == RUDNN_I8)
        return launch_tiled<RUDNN_I8, RUDNN_I8, int>(q, g, "ffn.gemm_tiled_i8");
    if (a == RUDNN_F32 && b == RUDNN_F32)
        return launch_tiled<RUDNN_F32, RUDNN_F32, float>(q, g, "ffn.gemm_tiled");
    if (a == RUDNN_F16 && b == RUDNN_F16)
        return launch_tiled<RUDNN_F16, RUDNN_F16, float>(q, g, "ffn.gemm_tiled");
    if (a == RUDNN_BF16 && b == RUDNN_BF16)
        return launch_tiled<RUDNN_BF16, RUDNN_BF16, float>(q, g, "ffn.gemm_tiled");
    if (a == RUDNN_F16 && b == RUDNN_I8)
        return launch_tiled<RUDNN_F16, RUDNN_I8, float>(q, g, "ffn.gemm_tiled_w8");
    if (a == RUDNN_BF16 && b == RUDNN_I8)
        return launch_tiled<RUDNN_BF16, RUDNN_I8, float>(q, g, "ffn.gemm_tiled_w8");
    if (a == RUDNN_F16 && b == RUDNN_I4)
        return launch_tiled<RUDNN_F16, RUDNN_I4, float>(q, g, "ffn.gemm_tiled_w4");
    if (a == RUDNN_BF16 && b == RUDNN_I4)
        return launch_tiled<RUDNN_BF16, RUDNN_I4, float>(q, g, "ffn.gemm_tiled_w4");
    return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "ffn gemm: no kernel for dtypes %d x %d", a, b);
}

/* Scratch of gemm for any m' rows with m / 2 < m' <= m (hal/ffn.h): the split-k partials of the
 * few-rows weight-only kernel and of the int4 tensor-core and wgmma kernels (all sized: whether the
 * latter two run depends on the operands' alignment too), the dequantized weights of the weight-only path
 * past them (deq_gemm_fits, which grows with m: m itself decides), the transposed int8
 * weights of the cuBLAS int8 path. */
rudnn_status_t ffn_gemm_workspace(void *device, const rudnn_ffn_gemm_plan_t *p, size_t *bytes)
{
    const rdg_devinfo_t *dev = rdg_devinfo_of(device);
    const int64_t lo = p->m / 2 + 1; /* the window's fewest rows */
    size_t most = 0;
    rudnn_ffn_gemm_plan_t at = *p;
    at.m = p->m < FFN_GEMV_MAX_M ? p->m : FFN_GEMV_MAX_M;
    if (lo <= at.m && rdg_ffn_gemv_fits(&at))
        most = rdg_ffn_gemv_scratch(dev, &at);
#if !RDG_HIP
    at.m = p->m < FFN_MMA_W4_MAX_M ? p->m : FFN_MMA_W4_MAX_M;
    const size_t mma = lo <= at.m ? rdg_ffn_mma_w4_scratch(dev, &at) : 0;
    most = mma > most ? mma : most;
    const size_t wg = wgmma_w4_plan_fits(dev, p, 1, p->m) ? rdg_ffn_wgmma_w4_scratch(dev, p) : 0;
    most = wg > most ? wg : most;
#endif
#if !RDG_HIP && RDG_HAVE_CUBLAS
    /* deq_gemm_fits, not monotonic in m where the wgmma kernel takes the rows from
     * FFN_WGMMA_W4_MIN_ROWS: m itself and the window's rows below that */
    at.m = p->m < FFN_WGMMA_W4_MIN_ROWS - 1 ? p->m : FFN_WGMMA_W4_MIN_ROWS - 1;
    if (deq_gemm_fits(dev, p) || (lo <= at.m && deq_gemm_fits(dev, &at))) {
        const size_t w = (size_t)p->k * (size_t)p->n * 2; /* W' in F16 / BF16 */
        most = w > most ? w : most;
    }
    if (p->a_dtype == RUDNN_I8 && rdg_ffn_cublas_i8_fits(p))
        most = (size_t)p->k * (size_t)p->n;
#endif
    *bytes = most;
    return RUDNN_STATUS_SUCCESS;
}

#if !RDG_HIP
/* Whether ffn_gemm runs this call on the int4 tensor-core kernel (the wgmma kernel not taking it) */
bool gemm_takes_mma_w4(const rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, rudnn_mem_ref_t a, rudnn_mem_ref_t b,
                       rudnn_mem_ref_t scale, rudnn_mem_ref_t scratch, rudnn_mem_ref_t c)
{
    return !(wgmma_w4_plan_fits(&q->dev, p, 1, p->m) && wgmma_w4_aligned(a, b, scale, c)) &&
           rdg_ffn_mma_w4_fits(&q->dev, p, rdg_at(b), scratch.mem != NULL);
}
#endif

/* The GEMM implementation is the backend's choice, as a BLAS picks its kernels: cuBLAS for float
 * operands and for int8 with leading dims that are multiples of 4, the int4 wgmma kernel (sm_90a)
 * for BF16 / F16 x int4 without offset from FFN_WGMMA_W4_MIN_ROWS rows (aligned operands), the
 * int4 tensor-core kernel (CUDA, sm_80+) for BF16 / F16 x int4 of up to FFN_MMA_W4_MAX_M rows where it fits
 * (rdg_ffn_mma_w4_fits: n % 256, k and the groups' rows % 16, 16-byte aligned weights), the
 * few-rows kernel for the other weight-only GEMMs of up to FFN_GEMV_MAX_M rows, past them the
 * weights dequantized into the scratch and cuBLAS (deq_gemm_fits), the tiled kernel otherwise
 * (HIP, cuBLAS not found, int4 tensor-core shapes with unaligned weights). rudnn_last_kernel names
 * what ran. */
/* ffn_gemm; early: b, scale and offset final before the stream's previous kernel began, so the
 * int4 tensor-core kernel may launch early (rdg_ffn_mma_w4) */
rudnn_status_t gemm_run(void *queue, const rudnn_ffn_gemm_plan_t *p, rudnn_mem_ref_t a, rudnn_mem_ref_t b,
                        rudnn_mem_ref_t scale, rudnn_mem_ref_t offset, rudnn_mem_ref_t scratch, rudnn_mem_ref_t c,
                        bool early)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    TRY(rdg_use_device(q->dev.index));
#if !RDG_HIP && RDG_HAVE_CUBLAS
    if (p->a_dtype == p->b_dtype && p->a_dtype != RUDNN_I8)
        return rdg_ffn_gemm_cublas(q, p, rdg_at(a), rdg_at(b), rdg_at(c));
    if (p->a_dtype == RUDNN_I8 && rdg_ffn_cublas_i8_fits(p) && scratch.mem &&
        (uintptr_t)rdg_at(a) % 16 == 0 && (uintptr_t)rdg_at(c) % 16 == 0)
        return rdg_ffn_gemm_cublas_i8(q, p, rdg_at(a), rdg_at(b), rdg_at(scratch), rdg_at(c));
#endif
#if !RDG_HIP
    if (wgmma_w4_plan_fits(&q->dev, p, 1, p->m) && wgmma_w4_aligned(a, b, scale, c))
        return rdg_ffn_wgmma_w4(q, p, 1, rdg_at(a), rdg_at(b), rdg_at(scale), nullptr,
                                scratch.mem ? rdg_at(scratch) : nullptr, rdg_at(c));
    if (gemm_takes_mma_w4(q, p, a, b, scale, scratch, c))
        return rdg_ffn_mma_w4(q, p, rdg_at(a), rdg_at(b), rdg_at(scale), rdg_at(offset), rdg_at(scratch), rdg_at(c),
                              early);
#else
    (void)early;
#endif
    /* the few-rows kernel reads a row's weights as one aligned word (int4) or two (int8) */
    const uintptr_t word = p->b_dtype == RUDNN_I4 ? 4 : 8;
    if (rdg_ffn_gemv_fits(p) && scratch.mem && (uintptr_t)rdg_at(b) % word == 0)
        return rdg_ffn_gemv(q, p, rdg_at(a), rdg_at(b), rdg_at(scale), rdg_at(offset), rdg_at(scratch), rdg_at(c));
    GemmArgs g = {rdg_at(a), rdg_at(b), rdg_at(scale), rdg_at(offset), rdg_at(c), p->m, p->n, p->k,
                  p->k / (p->groups > 0 ? p->groups : 1), p->c_dtype};
#if !RDG_HIP && RDG_HAVE_CUBLAS
    if (deq_gemm_fits(&q->dev, p) && scratch.mem && !rdg_cublas_unavailable())
        return ffn_gemm_dequant_cublas(q, p, g, rdg_at(scratch));
#endif
    return ffn_gemm_tiled_any(q, p, g);
}

rudnn_status_t ffn_gemm(void *queue, const rudnn_ffn_gemm_plan_t *p, rudnn_mem_ref_t a, rudnn_mem_ref_t b,
                        rudnn_mem_ref_t scale, rudnn_mem_ref_t offset, rudnn_mem_ref_t scratch, rudnn_mem_ref_t c)
{
    return gemm_run(queue, p, a, b, scale, offset, scratch, c, false);
}

rudnn_status_t ffn_act(void *queue, const rudnn_ffn_act_plan_t *p, rudnn_mem_ref_t h, rudnn_mem_ref_t bias,
                       rudnn_mem_ref_t deq, rudnn_mem_ref_t scale, rudnn_mem_ref_t offset, rudnn_mem_ref_t a)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    TRY(rdg_use_device(q->dev.index));
    if (ffn_act_vec_fits(p)) {
        const int64_t xb = rdg_ceil_div(p->k2 / 4, FFN_EW_THREADS);
        const dim3 grid((unsigned)(xb > 0 ? xb : 1), (unsigned)(p->rows < FFN_ACT_MAX_GRID_Y ? p->rows : FFN_ACT_MAX_GRID_Y));
        rdg_note_kernel("ffn.act_vec");
        return rdg_launch_pdl(q, FFN_PDL, "ffn.act_vec", ffn_act_vec4, grid, dim3(FFN_EW_THREADS), 0, *p,
                              (const void *)rdg_at(h), (const void *)rdg_at(bias), rdg_at(a));
    }
    rdg_note_kernel("ffn.act");
    ffn_act_kernel<<<elementwise_blocks(q, p->rows * p->k2), FFN_EW_THREADS, 0, q->stream>>>(
        *p, rdg_at(h), rdg_at(bias), rdg_at(deq), rdg_at(scale), rdg_at(offset), rdg_at(a));
    return rdg_launched("ffn.act");
}

/* gemm, then act (hal/ffn.h gemm_act): where the int4 tensor-core kernel splits k, its partials go
 * straight into ffn_split_act (h left unwritten); elsewhere the two entries as they are. *fused:
 * whether ffn_split_act ran. */
rudnn_status_t gemm_act_run(void *queue, const rudnn_ffn_gemm_plan_t *p, const rudnn_ffn_act_plan_t *ap,
                            rudnn_mem_ref_t a, rudnn_mem_ref_t b, rudnn_mem_ref_t scale, rudnn_mem_ref_t offset,
                            rudnn_mem_ref_t bias, rudnn_mem_ref_t scratch, rudnn_mem_ref_t h, rudnn_mem_ref_t out,
                            bool *fused)
{
    int splits = 0; /* 0: the product not run yet */
    *fused = false;
#if !RDG_HIP
    rdg_queue_t *q = (rdg_queue_t *)queue;
    if (FFN_SPLIT_ACT && ap->out_dtype != RUDNN_I8 && ap->deq_len == 0 && ap->h_dtype == p->c_dtype &&
        gemm_takes_mma_w4(q, p, a, b, scale, scratch, h)) {
        TRY(rdg_use_device(q->dev.index));
        TRY(rdg_ffn_mma_w4_unsummed(q, p, rdg_at(a), rdg_at(b), rdg_at(scale), rdg_at(offset), rdg_at(scratch),
                                    rdg_at(h), &splits, false));
        if (splits > 1) {
            const int64_t want = rdg_ceil_div(ap->rows * ap->k2, FFN_EW_THREADS);
            const int64_t cap = (int64_t)q->dev.sm_count * FFN_EW_BLOCKS_PER_SM;
            *fused = true;
            rdg_note_kernel("ffn.split_act");
            return rdg_launch_pdl(q, FFN_PDL, "ffn.split_act", ffn_split_act, dim3((unsigned)(want < cap ? want : cap)),
                                  dim3(FFN_EW_THREADS), 0, *ap, (const float *)rdg_at(scratch), splits,
                                  (const void *)rdg_at(bias), rdg_at(out));
        }
    }
#endif
    if (splits == 0)
        TRY(ffn_gemm(queue, p, a, b, scale, offset, scratch, h));
    const rudnn_mem_ref_t none = {NULL, 0};
    return ffn_act(queue, ap, h, bias, none, none, none, out);
}

rudnn_status_t ffn_gemm_act(void *queue, const rudnn_ffn_gemm_plan_t *p, const rudnn_ffn_act_plan_t *ap,
                            rudnn_mem_ref_t a, rudnn_mem_ref_t b, rudnn_mem_ref_t scale, rudnn_mem_ref_t offset,
                            rudnn_mem_ref_t bias, rudnn_mem_ref_t scratch, rudnn_mem_ref_t h, rudnn_mem_ref_t out)
{
    bool fused;
    return gemm_act_run(queue, p, ap, a, b, scale, offset, bias, scratch, h, out, &fused);
}

/* hal/ffn.h gemm_act_gemm: gemm_act_run, then the second product, after ffn_split_act free to
 * launch early (its weights are the op's inputs, and neither ffn_split_act nor the first product
 * writes them). */
rudnn_status_t ffn_gemm_act_gemm(void *queue, const rudnn_ffn_gemm_plan_t *p, const rudnn_ffn_act_plan_t *ap,
                                 rudnn_mem_ref_t a, rudnn_mem_ref_t b, rudnn_mem_ref_t scale, rudnn_mem_ref_t offset,
                                 rudnn_mem_ref_t bias, rudnn_mem_ref_t scratch, rudnn_mem_ref_t h, rudnn_mem_ref_t out,
                                 const rudnn_ffn_second_t *second)
{
    bool fused;
    TRY(gemm_act_run(queue, p, ap, a, b, scale, offset, bias, scratch, h, out, &fused));
    return gemm_run(queue, second->plan, out, second->b, second->scale, second->offset, scratch, second->c, fused);
}

rudnn_status_t ffn_out(void *queue, const rudnn_ffn_out_plan_t *p, rudnn_mem_ref_t h, rudnn_mem_ref_t bias,
                       rudnn_mem_ref_t deq, rudnn_mem_ref_t y)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    TRY(rdg_use_device(q->dev.index));
    rdg_note_kernel("ffn.out");
    ffn_out_kernel<<<elementwise_blocks(q, p->rows * p->n), FFN_EW_THREADS, 0, q->stream>>>(
        *p, rdg_at(h), rdg_at(bias), rdg_at(deq), rdg_at(y));
    return rdg_launched("ffn.out");
}

#if !RDG_HIP
/* The expert form's grouped products (hal/ffn.h): float operands on the MoE experts' TMA-fed wgmma
 * kernel reading the weights MN-major (moe_experts_tma.cu, sm_90a); int4 weight-only on the int4
 * tensor-core kernel with an expert index a token block (ffn_mma_w4.cu). */
int ffn_gemm_grouped_fits(void *device, const rudnn_ffn_gemm_plan_t *p, int64_t experts)
{
    const rdg_devinfo_t *dev = rdg_devinfo_of(device);
    if (p->b_dtype == RUDNN_I4)
        return wgmma_w4_plan_fits(dev, p, experts, p->rows_max) || rdg_ffn_mma_w4_grouped_fits(dev, p, experts);
    return rdg_ffn_grouped_tma_why(dev, p, experts) == nullptr;
}

rudnn_status_t ffn_gemm_grouped(void *queue, const rudnn_ffn_gemm_plan_t *p, int64_t experts, rudnn_mem_ref_t a,
                                rudnn_mem_ref_t b, rudnn_mem_ref_t scale, rudnn_mem_ref_t offset,
                                rudnn_mem_ref_t offsets, rudnn_mem_ref_t c)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    TRY(rdg_use_device(q->dev.index));
    if (p->b_dtype == RUDNN_I4) {
        if (wgmma_w4_plan_fits(&q->dev, p, experts, p->rows_max) && wgmma_w4_aligned(a, b, scale, c))
            return rdg_ffn_wgmma_w4(q, p, experts, rdg_at(a), rdg_at(b), rdg_at(scale),
                                    (const uint32_t *)rdg_at(offsets), nullptr, rdg_at(c));
        if ((uintptr_t)rdg_at(b) % 16)
            return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "ffn gemm_grouped: int4 weights must be 16-byte aligned");
        return rdg_ffn_mma_w4_grouped(q, p, experts, rdg_at(a), rdg_at(b), rdg_at(scale), rdg_at(offset),
                                      (const uint32_t *)rdg_at(offsets), rdg_at(c));
    }
    if (const char *why = rdg_ffn_grouped_tma_why(&q->dev, p, experts))
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "ffn gemm_grouped: %s", why);
    if ((uintptr_t)rdg_at(a) % 16 || (uintptr_t)rdg_at(b) % 16 || (uintptr_t)rdg_at(c) % 16)
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "ffn gemm_grouped: a, b and c must be 16-byte aligned");
    return rdg_ffn_grouped_tma(q, p, experts, rdg_at(a), rdg_at(b), (const uint32_t *)rdg_at(offsets), rdg_at(c));
}

/* The first of them with the activation in the epilogue (no h round trip). */
int ffn_gemm_grouped_act_fits(void *device, const rudnn_ffn_gemm_plan_t *p, const rudnn_ffn_act_plan_t *ap,
                              int64_t experts)
{
    return rdg_ffn_grouped_act_why(rdg_devinfo_of(device), p, ap, experts) == nullptr;
}

rudnn_status_t ffn_gemm_grouped_act(void *queue, const rudnn_ffn_gemm_plan_t *p, const rudnn_ffn_act_plan_t *ap,
                                    int64_t experts, rudnn_mem_ref_t a, rudnn_mem_ref_t b, rudnn_mem_ref_t offsets,
                                    rudnn_mem_ref_t out)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    TRY(rdg_use_device(q->dev.index));
    if (const char *why = rdg_ffn_grouped_act_why(&q->dev, p, ap, experts))
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "ffn gemm_grouped_act: %s", why);
    if ((uintptr_t)rdg_at(a) % 16 || (uintptr_t)rdg_at(b) % 16 || (uintptr_t)rdg_at(out) % 16)
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "ffn gemm_grouped_act: a, b and out must be 16-byte aligned");
    return rdg_ffn_grouped_act(q, p, ap, experts, rdg_at(a), rdg_at(b), (const uint32_t *)rdg_at(offsets),
                               rdg_at(out));
}
#endif

/* A table inside a host function: a namespace-scope const would be promoted to device memory by
 * HIP's compiler. */
rudnn_ffn_kernels_t make_ffn_table(void)
{
    rudnn_ffn_kernels_t table;
    memset(&table, 0, sizeof table);
    table.gemm_workspace = ffn_gemm_workspace;
    table.gemm = ffn_gemm;
    table.act = ffn_act;
    table.out = ffn_out;
    table.gemm_act = ffn_gemm_act;
    table.gemm_act_gemm = ffn_gemm_act_gemm;
#if !RDG_HIP
    table.gemm_grouped_fits = ffn_gemm_grouped_fits;
    table.gemm_grouped = ffn_gemm_grouped;
    if (FFN_GROUPED_FUSED_ACT) {
        table.gemm_grouped_act_fits = ffn_gemm_grouped_act_fits;
        table.gemm_grouped_act = ffn_gemm_grouped_act;
    }
#endif
    table.struct_size = (uint32_t)sizeof table;
    return table;
}

} // namespace

const rudnn_ffn_kernels_t *rdg_ffn_table(void)
{
    static rudnn_ffn_kernels_t table = make_ffn_table();
    return &table;
}
