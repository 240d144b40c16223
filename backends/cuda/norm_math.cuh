/* Numerics of the norm kernels (backends/README.md): exp for softmax, the bounds of the unscaled
 * sums, the statistics' division and reciprocal square root, and the power-of-two scaled
 * statistics of layer_norm and rms_norm. */
#ifndef RUDNN_NORM_MATH_CUH
#define RUDNN_NORM_MATH_CUH

#include <float.h>
#include <math.h>

#include "norm_access.cuh"
#include "reduce.cuh"

namespace {

/* 2^x by ex2.approx.ftz (CUDA; HIP takes exp2f) */
__device__ __forceinline__ __attribute__((unused)) float exp2_approx(float x)
{
#if !RDG_HIP
    float e;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(x));
    return e;
#else
    return exp2f(x);
#endif
}

/* exp(d) for d <= 0 in softmax: 16-bit rows (VEC 8) take ex2.approx.ftz(d * log2 e), 2
 * instructions instead of expf's 8 or so (these rows were issue-bound); its error stays far
 * below a 16-bit output's rounding (backends/README.md). F32 rows keep expf. */
template <int VEC>
__device__ __forceinline__ float softmax_exp(float d)
{
    if constexpr (VEC == 8 && !RDG_HIP)
        return exp2_approx(d * 1.4426950408889634f);
    else
        return expf(d);
}

/* Which (e, s) warp reduction a kernel uses (reduce.cuh): redux.sync, except for 16-bit (VEC 8)
 * rms_norm rows and 16-bit add_rms_norm rows over a cluster, where the butterfly measured faster
 * (fifth session). */
__host__ __device__ constexpr bool es_redux(int op, int scope, int vec)
{
    return !(vec == 8 && (op == OP_RMS || (op == OP_ADD_RMS && scope == RED_CLUSTER)));
}

/* Whether an unscaled sum (of x: layer_norm's mean) or sum of squares lost nothing, so that the
 * power-of-two scaled path may be skipped (backends/README.md): finite and at most 2^100 (eps
 * cannot vanish next to it), and for squares at least 2^-95 (underflowed terms lose under 2^-24
 * of it). Every thread of a row decides on the same reduced value. */
__device__ __forceinline__ __attribute__((unused)) bool unscaled_sum_ok(float s)
{
    return fabsf(s) <= 0x1p100f; /* false for inf and NaN */
}
__device__ __forceinline__ __attribute__((unused)) bool unscaled_sumsq_ok(float q)
{
    return q >= 0x1p-95f && q <= 0x1p100f;
}

/* The statistics' x / h and 1 / sqrt(x). FAST (the pair and bulk kernels): x * (1 / h) and
 * rsqrtf (2 ulp), as PyTorch's layer_norm: an IEEE division and a square root less per row and
 * statistic on the path the whole row waits on, at most 3 FP32 ulps more error. The one-row
 * register kernels keep the exact forms (fast there: bf16 rms_norm [65536, 1024] +7.9%, eleventh
 * session). */
template <bool FAST>
__device__ __forceinline__ float stat_div(float x, float h, float rh)
{
    return FAST ? x * rh : x / h;
}
template <bool FAST>
__device__ __forceinline__ float stat_rsqrt(float x)
{
    return FAST ? rsqrtf(x) : 1.0f / sqrtf(x);
}

/* layer_norm's power-of-two scaled statistics (backends/README.md) of a row of which this thread
 * holds v, vectors lane + i * gsize (< count valid; masked-out entries 0): v becomes
 * x * 2^-e - mean, and the factor that normalizes it is returned. Every thread of the row group
 * calls it (two reductions). */
template <int SCOPE, bool REDUX, int NV, int VEC>
__device__ __forceinline__ float ln_scaled_center(float (&v)[NV][VEC], int lane, int gsize, int count, float h,
                                                  float eps, RedCtx &ctx)
{
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; i++)
#pragma unroll
        for (int k = 0; k < VEC; k++)
            m = fmaxf(m, fabsf(v[i][k]));
    int e = exp_of_max(m);
    const float sc_t = pow2_neg(e);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; i++)
#pragma unroll
        for (int k = 0; k < VEC; k++)
            s = fmaf(v[i][k], sc_t, s);
    block_allreduce_es<1, SCOPE, REDUX>(e, s, ctx);
    const float sc = pow2_neg(e);
    const float mean = s / h;
    float q = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; i++) {
        const bool valid = lane + i * gsize < count;
#pragma unroll
        for (int k = 0; k < VEC; k++) {
            v[i][k] = fmaf(v[i][k], sc, -mean); /* u - mean (x * sc is exact) */
            if (valid)
                q = fmaf(v[i][k], v[i][k], q);
        }
    }
    q = block_allreduce<SumOp, SCOPE>(q, ctx);
    /* a constant row with large e: eps * 2^-2e underflows and var is 0, so inv would be inf and
     * 0 * inf NaN; exact arithmetic gives y = beta (backends/README.md) */
    const float inv = 1.0f / sqrtf(q / h + scale_pow2(eps, -2 * e));
    return isinf(inv) ? FLT_MAX : inv;
}

/* rms_norm's power-of-two scaled statistics (backends/README.md) of a row whose values this
 * thread visits through each(f) (masked-out entries 0): returns e, and leaves in s the reduced
 * sum of (x * 2^-e)^2. Every thread of the row group calls it (one reduction). */
template <int SCOPE, bool REDUX, class Each>
__device__ __forceinline__ int rms_scaled_sumsq(Each &&each, float &s, RedCtx &ctx)
{
    float m = 0.0f;
    each([&](float x) { m = fmaxf(m, fabsf(x)); });
    int e = exp_of_max(m);
    const float sc_t = pow2_neg(e);
    s = 0.0f;
    each([&](float x) {
        const float u = x * sc_t;
        s = fmaf(u, u, s);
    });
    block_allreduce_es<2, SCOPE, REDUX>(e, s, ctx);
    return e;
}

} // namespace

#endif
