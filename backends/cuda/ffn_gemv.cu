/* The FFN's weight-only GEMM for few rows (m <= FFN_GEMV_MAX_M): C [m, n] F32 = A [m, k] W' [k, n],
 * W' the int8 / int4 weights dequantized as hal/ffn.h says. At small m the time is the weights'
 * bytes, so the kernel streams them once at full width and does the little arithmetic beside:
 *   - a block owns FFN_GEMV_COLS columns (8 a lane: one 32-bit word of int4, two of int8) and one
 *     slice of k (split-k, so that there are blocks enough to fill the GPU); its warps take
 *     contiguous runs of rows, FFN_GEMV_UNROLL rows' loads in flight a lane;
 *   - a lane keeps its columns' scale and offset while the row stays in the same group (its rows
 *     only grow, so a boundary counter stands for a division a row);
 *   - the warps' sums are added in a fixed order in shared memory and written as the slice's
 *     partial [split, m, n]; a second kernel adds the slices in order. Deterministic.
 * Needs n % 8 == 0 (aligned words); the tiled kernel (ffn.cu) takes every other shape. */
#include "rdg_internal.h"
#include "elem.cuh"
#include "ffn_tuning.h"

namespace {

constexpr int WARPS = FFN_GEMV_THREADS / 32;
constexpr int COLS = 8 * 32; /* a warp's columns: 8 a lane */
static_assert(COLS == FFN_GEMV_COLS, "a block's columns are a warp's");

struct GemvArgs {
    const void *a, *b, *scale, *offset;
    float *partial; /* [splits, m, n] */
    int64_t m, n, k;
    int32_t group_rows, rows_per_split;
};

/* A pair of FP32 values rounded to A's dtype (one packed conversion) and back. */
template <int ADT>
__device__ __forceinline__ void round_pair(float &lo, float &hi)
{
    if constexpr (ADT == RUDNN_BF16) {
        const uint32_t p = rdg_pack_bf16x2(lo, hi);
        lo = __uint_as_float(p << 16), hi = __uint_as_float(p & 0xffff0000u);
    } else {
        lo = rdg_f16_to_f32(rdg_f32_to_f16(lo)), hi = rdg_f16_to_f32(rdg_f32_to_f16(hi));
    }
}

/* The raw words holding row r's 8 weights at columns c .. c + 7 (int4: one word, int8: two). */
template <int BDT>
__device__ __forceinline__ uint2 load_row(const void *b, int64_t n, int64_t r, int64_t c)
{
    if constexpr (BDT == RUDNN_I4)
        return make_uint2(*(const uint32_t *)((const uint8_t *)b + ((r * n + c) >> 1)), 0u);
    else
        return *(const uint2 *)((const int8_t *)b + r * n + c);
}

/* The words' 8 weights as exact FP32 integers, without int-to-float conversions: a biased field
 * ORed into the mantissa of 2^23 (0x4B000000), the bias subtracted. Two's complement nibbles XOR 8
 * (bytes XOR 0x80) are value + 8 (+ 128). Even column first (low bits). */
template <int BDT>
__device__ __forceinline__ void unpack_row(uint2 words, float w[8])
{
    if constexpr (BDT == RUDNN_I4) {
        const uint32_t u = words.x ^ 0x88888888u;
#pragma unroll
        for (int j = 0; j < 8; j++)
            w[j] = __uint_as_float(0x4B000000u | ((u >> (4 * j)) & 0xfu)) - 8388616.0f;
    } else {
        const uint32_t u[2] = {words.x ^ 0x80808080u, words.y ^ 0x80808080u};
#pragma unroll
        for (int j = 0; j < 8; j++)
            w[j] = __uint_as_float(0x4B000000u | ((u[j / 4] >> (8 * (j % 4))) & 0xffu)) - 8388736.0f;
    }
}

/* ---- int4 without an offset: dequantized two at a time in A's 16-bit type ----------------------
 * Nibbles p and p + 4 of a word (XOR 8: value + 8) ORed into the mantissas of a 16-bit pair whose
 * spacing is 1 (bf16 128, f16 1024) give 128 + 8 + value exactly; subtracting the pair (136, 136)
 * leaves the values, and one packed multiply by the scales rounds w * s once, as hal/ffn.h asks
 * (the FP32 product of a small integer and a 16-bit scale is exact, so FP32 and packed agree). */
template <int ADT>
struct Pair16 {
    static constexpr uint32_t magic = ADT == RUDNN_BF16 ? 0x43004300u : 0x64006400u;
    static constexpr uint32_t bias = ADT == RUDNN_BF16 ? 0x43084308u : 0x64086408u;
    __device__ static float lo(uint32_t w)
    {
        return ADT == RUDNN_BF16 ? __uint_as_float(w << 16) : rdg_f16_to_f32((uint16_t)w);
    }
    __device__ static float hi(uint32_t w)
    {
        return ADT == RUDNN_BF16 ? __uint_as_float(w & 0xffff0000u) : rdg_f16_to_f32((uint16_t)(w >> 16));
    }
    __device__ static uint32_t pack(float l, float h)
    {
        return ADT == RUDNN_BF16 ? rdg_pack_bf16x2(l, h)
                                 : (uint32_t)rdg_f32_to_f16(l) | (uint32_t)rdg_f32_to_f16(h) << 16;
    }
    /* (t - bias) * s, each half rounded once to A's type */
    __device__ static uint32_t dequant(uint32_t t, uint32_t s)
    {
#if !RDG_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        uint32_t v, w;
        if constexpr (ADT == RUDNN_BF16) {
            asm("sub.rn.bf16x2 %0, %1, %2;" : "=r"(v) : "r"(t), "r"(bias));
            asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(w) : "r"(v), "r"(s));
        } else {
            asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(v) : "r"(t), "r"(bias));
            asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(w) : "r"(v), "r"(s));
        }
        return w;
#else
        return pack((lo(t) - lo(bias)) * lo(s), (hi(t) - hi(bias)) * hi(s));
#endif
    }
};

template <int ADT, int BDT, int MM, bool PK>
__global__ void __launch_bounds__(FFN_GEMV_THREADS) ffn_gemv_wq(GemvArgs g)
{
    __shared__ float sum[MM][COLS];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int64_t c = (int64_t)blockIdx.x * COLS + lane * 8;
    const int64_t k0 = (int64_t)blockIdx.y * g.rows_per_split;
    const int64_t k1 = k0 + g.rows_per_split < g.k ? k0 + g.rows_per_split : g.k;
    const int64_t per_warp = (k1 - k0 + WARPS - 1) / WARPS;
    const int64_t r0 = k0 + warp * per_warp, r1 = r0 + per_warp < k1 ? r0 + per_warp : k1;
    float acc[MM][8];
#pragma unroll
    for (int i = 0; i < MM; i++)
#pragma unroll
        for (int j = 0; j < 8; j++)
            acc[i][j] = 0.0f;
    const bool live = c < g.n;
    float s[8], o[8];
    uint32_t sp[4]; /* PK: the scales of columns (p, p + 4) as 16-bit pairs */
    /* the next row whose group's scales are not loaded (rows only grow: no division a row) */
    int64_t next_group = r0;
    int group = (int)(r0 / g.group_rows) - 1;
    /* more rows of sums leave registers for fewer rows in flight (compute-bound there anyway) */
    constexpr int UNROLL = MM >= 8 ? FFN_GEMV_UNROLL / (PK ? 4 : 8) : MM >= 4 ? FFN_GEMV_UNROLL / 2 : FFN_GEMV_UNROLL;
    for (int64_t r = r0; live && r < r1; r += UNROLL) {
        uint2 words[UNROLL];
        float xs[UNROLL][MM]; /* A's values of these rows, loaded beside the weights */
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            words[u] = r + u < r1 ? load_row<BDT>(g.b, g.n, r + u, c) : make_uint2(0u, 0u);
#pragma unroll
            for (int i = 0; i < MM; i++)
                xs[u][i] = i < g.m && r + u < r1 ? Elem<ADT>::ld(g.a, i * g.k + r + u) : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            if (r + u >= r1) /* the last rows of a run: nothing loaded */
                continue;
            if (r + u >= next_group) {
                const int gi = ++group;
                next_group = (int64_t)(gi + 1) * g.group_rows;
                if constexpr (PK) {
                    const uint16_t *sc = (const uint16_t *)g.scale + (int64_t)gi * g.n + c;
#pragma unroll
                    for (int p = 0; p < 4; p++)
                        sp[p] = (uint32_t)sc[p] | (uint32_t)sc[p + 4] << 16;
                } else {
#pragma unroll
                    for (int j = 0; j < 8; j++) {
                        s[j] = Elem<ADT>::ld(g.scale, (int64_t)gi * g.n + c + j);
                        o[j] = g.offset ? Elem<ADT>::ld(g.offset, (int64_t)gi * g.n + c + j) : 0.0f;
                    }
                }
            }
            if constexpr (PK) {
                const uint32_t uw = words[u].x ^ 0x88888888u;
#pragma unroll
                for (int p = 0; p < 4; p++) {
                    const uint32_t w2 = Pair16<ADT>::dequant(((uw >> (4 * p)) & 0x000f000fu) | Pair16<ADT>::magic, sp[p]);
                    const float wl = Pair16<ADT>::lo(w2), wh = Pair16<ADT>::hi(w2);
#pragma unroll
                    for (int i = 0; i < MM; i++) {
                        if (i < g.m) {
                            acc[i][p] = fmaf(xs[u][i], wl, acc[i][p]);
                            acc[i][p + 4] = fmaf(xs[u][i], wh, acc[i][p + 4]);
                        }
                    }
                }
                continue;
            }
            float wv[8];
            unpack_row<BDT>(words[u], wv);
#pragma unroll
            for (int j = 0; j < 8; j++)
                wv[j] = (wv[j] + o[j]) * s[j];
#pragma unroll
            for (int j = 0; j < 8; j += 2)
                round_pair<ADT>(wv[j], wv[j + 1]);
#pragma unroll
            for (int i = 0; i < MM; i++) {
                if (i < g.m) {
                    const float x = xs[u][i];
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        acc[i][j] = fmaf(x, wv[j], acc[i][j]);
                }
            }
        }
    }
    /* the warps' sums, added in warp order */
    for (int wv = 0; wv < WARPS; wv++) {
        if (warp == wv)
#pragma unroll
            for (int i = 0; i < MM; i++)
#pragma unroll
                for (int j = 0; j < 8; j++)
                    sum[i][lane * 8 + j] = wv == 0 ? acc[i][j] : sum[i][lane * 8 + j] + acc[i][j];
        __syncthreads();
    }
    for (int e = threadIdx.x; e < MM * COLS; e += FFN_GEMV_THREADS) {
        const int i = e / COLS, cc = e % COLS;
        const int64_t col = (int64_t)blockIdx.x * COLS + cc;
        if (i < g.m && col < g.n)
            g.partial[((int64_t)blockIdx.y * g.m + i) * g.n + col] = sum[i][cc];
    }
}

/* Splits of k: enough blocks for FFN_GEMV_BLOCKS_PER_SM a SM, each slice at least
 * FFN_GEMV_MIN_ROWS rows. */
int gemv_splits(const rdg_devinfo_t *dev, int64_t n, int64_t k)
{
    const int64_t tiles = rdg_ceil_div(n, COLS);
    int64_t s = rdg_ceil_div((int64_t)dev->sm_count * FFN_GEMV_BLOCKS_PER_SM, tiles);
    const int64_t most = k / FFN_GEMV_MIN_ROWS > 1 ? k / FFN_GEMV_MIN_ROWS : 1;
    return (int)(s < 1 ? 1 : s > most ? most : s);
}

template <int ADT, int BDT, bool PK>
void launch_rows(rdg_queue_t *q, const GemvArgs &g, dim3 grid)
{
    if (g.m <= 1)
        ffn_gemv_wq<ADT, BDT, 1, PK><<<grid, FFN_GEMV_THREADS, 0, q->stream>>>(g);
    else if (g.m <= 2)
        ffn_gemv_wq<ADT, BDT, 2, PK><<<grid, FFN_GEMV_THREADS, 0, q->stream>>>(g);
    else if (g.m <= 4)
        ffn_gemv_wq<ADT, BDT, 4, PK><<<grid, FFN_GEMV_THREADS, 0, q->stream>>>(g);
    else if (g.m <= 8)
        ffn_gemv_wq<ADT, BDT, 8, PK><<<grid, FFN_GEMV_THREADS, 0, q->stream>>>(g);
    else
        ffn_gemv_wq<ADT, BDT, 16, PK><<<grid, FFN_GEMV_THREADS, 0, q->stream>>>(g);
}

template <int ADT, int BDT>
rudnn_status_t launch(rdg_queue_t *q, const GemvArgs &g, int splits, int c_dtype, void *c)
{
    const dim3 grid((unsigned)rdg_ceil_div(g.n, COLS), (unsigned)splits);
    const char *name = BDT == RUDNN_I4 ? "ffn.gemv_w4" : "ffn.gemv_w8";
    rdg_note_kernel(name);
    if (BDT == RUDNN_I4 && !g.offset)
        launch_rows<ADT, BDT, BDT == RUDNN_I4>(q, g, grid);
    else
        launch_rows<ADT, BDT, false>(q, g, grid);
    TRY(rdg_launched(name));
    return rdg_ffn_split_sum(q, "ffn.gemv_reduce", g.partial, c, g.m * g.n, splits, c_dtype);
}

} // namespace

int rdg_ffn_gemv_fits(const rudnn_ffn_gemm_plan_t *p)
{
    const int wq = p->b_dtype == RUDNN_I4 || (p->b_dtype == RUDNN_I8 && p->a_dtype != RUDNN_I8);
    return wq && p->m <= FFN_GEMV_MAX_M && p->n % 8 == 0;
}

size_t rdg_ffn_gemv_scratch(const rdg_devinfo_t *dev, const rudnn_ffn_gemm_plan_t *p)
{
    return (size_t)gemv_splits(dev, p->n, p->k) * (size_t)p->m * (size_t)p->n * sizeof(float);
}

rudnn_status_t rdg_ffn_gemv(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, const void *a, const void *b,
                            const void *scale, const void *offset, void *scratch, void *c)
{
    const int splits = gemv_splits(&q->dev, p->n, p->k);
    GemvArgs g = {a, b, scale, offset, (float *)scratch, p->m, p->n, p->k,
                  (int32_t)(p->k / (p->groups > 0 ? p->groups : 1)), (int32_t)rdg_ceil_div(p->k, splits)};
    const int cd = p->c_dtype;
    if (p->a_dtype == RUDNN_F16)
        return p->b_dtype == RUDNN_I4 ? launch<RUDNN_F16, RUDNN_I4>(q, g, splits, cd, c)
                                      : launch<RUDNN_F16, RUDNN_I8>(q, g, splits, cd, c);
    return p->b_dtype == RUDNN_I4 ? launch<RUDNN_BF16, RUDNN_I4>(q, g, splits, cd, c)
                                  : launch<RUDNN_BF16, RUDNN_I8>(q, g, splits, cd, c);
}
