/* Row-wise normalization kernels: layer_norm, rms_norm, softmax, add_rms_norm, and their
 * launchers (the rudnn_norm_kernels_t table).
 *
 * Numerics follow backends/README.md (FP32 math, power-of-two scaling for the norms; partial
 * sums combine as (e, s) pairs, which equals scaling by the row's e up to subnormal rounding).
 *
 * Kernel families:
 * - norm_reg_kernel ("row in registers"): 16-byte loads, each element read from DRAM once and
 *   written once. A row lives in the registers of one warp, of one CTA, or of the CTAs of a
 *   thread-block cluster (one slice each, partial statistics exchanged through distributed
 *   shared memory), F = NV * VEC floats per thread. CTAs are persistent (grid sized from
 *   occupancy) and stage their gamma/beta slice in shared memory once. Needs cols % VEC == 0
 *   and 16-byte aligned pointers. At F = 64 (16-bit rms_norm rows of 8192 or more) the row
 *   stays packed: the loaded 16-bit vectors are kept and converted again in each pass.
 * - bulk_kernel (norm_bulk.cuh, sm_90): 16-bit layer_norm and rms_norm rows of one CTA, several
 *   row groups per CTA sharing the staged gamma/beta, each streaming whole rows into shared
 *   memory with bulk copies (cp.async.bulk) a row or more ahead.
 * - norm_loop_kernel ("looped"): any cols and alignment, scalar loads, one CTA per row, one pass
 *   over global memory per statistic and one for the output.
 * choose() below is the launch policy.
 *
 * In place: every element is read and written by the same thread, after all of that thread's
 * reads of it, so an output may equal an input. Reductions are deterministic (reduce.cuh).
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* Measurement variants of this file (tools/gpu-ab.sh -n): macros from a header in the build
 * folder, which only that script writes, before every default below and in gpu_compat.h. */
#if defined(__has_include)
#if __has_include("rdg_variant.h")
#include "rdg_variant.h"
#endif
#endif
#include "rdg_internal.h"
#include "mbarrier.cuh"
#include "reduce.cuh"

namespace {

enum { OP_LN = 0, OP_RMS = 1, OP_SOFTMAX = 2, OP_ADD_RMS = 3 };

struct NormArgs {
    const void *x;      /* input (a for add_rms_norm) */
    const void *r;      /* residual (add_rms_norm) */
    const float *gamma; /* F32 [cols] (norms) */
    const float *beta;  /* F32 [cols] or NULL */
    void *y;
    void *xout;  /* add_rms_norm: round(a + r) */
    float *rstd; /* add_rms_norm: F32 [rows] */
    int64_t rows;
    int64_t cols;
    float eps;
    int csize;      /* CTAs per row (cluster size); 1 without a cluster */
    int slice_vec;  /* register kernel: vectors per CTA slice */
    int prefetch;   /* register kernel: next row copied to shared memory while this one reduces */
    int stages;        /* bulk kernel: row buffers per row group */
    int group_threads; /* bulk kernel: threads per row group */
};

/* ---- storage types: vector (16-byte) and scalar access, F32 conversions ---- */

struct StoreF32 {
    enum { VEC = 4 };
    typedef float4 raw_t;
    typedef float elem_t;
    __device__ static raw_t zero() { return make_float4(0.f, 0.f, 0.f, 0.f); }
    __device__ static raw_t ldv(const void *p, int64_t vi) { return RDG_LDCS((const float4 *)p + vi); }
    __device__ static void cvt(const raw_t &w, float (&v)[VEC])
    {
        v[0] = w.x;
        v[1] = w.y;
        v[2] = w.z;
        v[3] = w.w;
    }
    __device__ static void stv(void *p, int64_t vi, const float (&v)[VEC])
    {
        RDG_STCS((float4 *)p + vi, make_float4(v[0], v[1], v[2], v[3]));
    }
    __device__ static float ld1(const void *p, int64_t i) { return ((const float *)p)[i]; }
    __device__ static void st1(void *p, int64_t i, float v) { ((float *)p)[i] = v; }
    __device__ static float round(float v) { return v; }
};

/* 16-bit storage (8 per 16-byte vector): the format's conversions are H's (Bf16Bits, F16Bits). */
template <class H>
struct Store16 {
    enum { VEC = 8 };
    typedef uint4 raw_t;
    typedef uint16_t elem_t;
    __device__ static raw_t zero() { return make_uint4(0u, 0u, 0u, 0u); }
    __device__ static raw_t ldv(const void *p, int64_t vi) { return RDG_LDCS((const uint4 *)p + vi); }
    __device__ static void cvt(const raw_t &w, float (&v)[VEC])
    {
        const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            v[2 * k] = H::lo(u[k]);
            v[2 * k + 1] = H::hi(u[k]);
        }
    }
    __device__ static raw_t pack(const float (&v)[VEC])
    {
        uint4 w;
        w.x = H::pack(v[0], v[1]);
        w.y = H::pack(v[2], v[3]);
        w.z = H::pack(v[4], v[5]);
        w.w = H::pack(v[6], v[7]);
        return w;
    }
    __device__ static void stv(void *p, int64_t vi, const float (&v)[VEC]) { RDG_STCS((uint4 *)p + vi, pack(v)); }
    /* An empty asm that "changes" w: conversions of w before it cannot be reused after it, so a
     * packed row is not kept converted across passes (which would undo the packing). */
    __device__ static void launder(raw_t &w) { asm volatile("" : "+r"(w.x), "+r"(w.y), "+r"(w.z), "+r"(w.w)); }
    __device__ static float ld1(const void *p, int64_t i) { return H::to_f32(((const uint16_t *)p)[i]); }
    __device__ static void st1(void *p, int64_t i, float v) { ((uint16_t *)p)[i] = H::from_f32(v); }
    __device__ static float round(float v) { return H::to_f32(H::from_f32(v)); }
};

struct Bf16Bits {
    __device__ static float lo(uint32_t u) { return __uint_as_float(u << 16); }
    __device__ static float hi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }
    __device__ static uint32_t pack(float lo, float hi) { return rdg_pack_bf16x2(lo, hi); }
    __device__ static float to_f32(uint16_t h) { return rdg_bf16_to_f32(h); }
    __device__ static uint16_t from_f32(float v) { return rdg_f32_to_bf16(v); }
};

struct F16Bits {
    __device__ static float lo(uint32_t u) { return rdg_f16_to_f32((uint16_t)(u & 0xffffu)); }
    __device__ static float hi(uint32_t u) { return rdg_f16_to_f32((uint16_t)(u >> 16)); }
    __device__ static uint32_t pack(float lo, float hi)
    {
        return (uint32_t)rdg_f32_to_f16(lo) | ((uint32_t)rdg_f32_to_f16(hi) << 16);
    }
    __device__ static float to_f32(uint16_t h) { return rdg_f16_to_f32(h); }
    __device__ static uint16_t from_f32(float v) { return rdg_f32_to_f16(v); }
};

typedef Store16<Bf16Bits> StoreBF16;
typedef Store16<F16Bits> StoreF16;

/* Register budgets of the register kernel (CUDA; HIP takes only the thread limit). BLOCKS CTAs
 * of THREADS threads must fit on an SM, which caps the registers per thread:
 *   warp rows (256 threads), F = 8: 8 CTAs -> 32 regs      F = 32: 4 CTAs -> 64 regs
 *   CTA or cluster (512 threads), F = 16: 3 CTAs -> 40      F = 32: 2 CTAs -> 64
 * add_rms_norm holds two inputs in flight, and layer_norm reads gamma and beta per vector, so
 * they get more registers (fewer threads per SM) where the base budget would spill:
 * add_rms_norm one step down (half at F = 32), layer_norm one step down for F32 data. 16-bit
 * layer_norm in a cluster keeps the base budget; in one CTA at F = 32 it takes a register cap
 * instead (norm_reg_kernel_ln16: one step down measured 53% of copy bandwidth at [16384, 8192]
 * bf16 against 60% for the base budget, which spills); 16-bit
 * rms_norm and layer_norm rows of one warp at F = 32 go one step down (they spilled 12 and 20
 * bytes; [65536, 1024] bf16 rms_norm 76.5 -> 74.2 us, layer_norm 76.7 -> 76.2 us on the H200).
 * F32 softmax rows of one warp at F = 32 spill 8 bytes at the base budget, but one step down
 * measured 1% slower ([65536, 1024]: 0.1400 -> 0.1417 ms), so they keep it.
 * Packed 16-bit rows (F = 64, CTAs of at most 256 threads): 2 CTAs -> 128 regs. ptxas keeps the
 * converted values of several vectors live at once and spills below that. */
template <int F, int SCOPE, int OP, int ESIZE>
struct RegBounds {
    enum {
        THREADS = SCOPE == RED_WARP || F == 64 ? 256 : 512,
        BASE = SCOPE == RED_WARP ? (F == 8 ? 8 : 4) : F == 64 ? 2 : (F == 16 ? 3 : 2),
        DOWN = BASE > 4 ? BASE * 3 / 4 : BASE > 1 ? BASE - 1 : 1,
        BLOCKS = F == 64 ? BASE
               : OP == OP_ADD_RMS ? (F == 32 ? BASE / 2 : DOWN)
               : OP == OP_LN && ESIZE == 4 ? DOWN
               : SCOPE == RED_WARP && F == 32 && ESIZE == 2 && (OP == OP_RMS || OP == OP_LN) ? DOWN
               : BASE
    };
};

/* exp(d) for d <= 0 in the register softmax. RDG_SOFTMAX16_FAST_EXP=2 (the default; 0 gives
 * expf everywhere): 16-bit rows (VEC 8) take ex2.approx.ftz(d * log2 e), written out, 2
 * instructions instead of expf's 8 or so (these rows were issue-bound in ncu). 1 is __expf,
 * the same ex2.approx without .ftz, which ptxas wraps in subnormal fix-ups (about 10
 * instructions per element in the exp loop of the seventh session's per-instruction profile).
 * Measured on the H200 (A/B, 2 rounds): expf -> __expf, bf16 [4096, 65536] 0.381 -> 0.331 ms,
 * [16384, 8192] 0.154 -> 0.152, [65536, 1024] 0.0795 -> 0.0774; __expf -> .ftz, [4096, 65536]
 * 0.3220 -> 0.2983 ms (-7.4%), [16384, 8192] +0.9%. The error, a few 1e-7 relative plus |d| *
 * 2^-24 from rounding the argument, and results below 2^-126 flushed to 0 (both ways), stay far
 * below a 16-bit output's rounding (F16 ulp 2^-10, BF16 2^-7, F16 subnormals from 2^-24). F32
 * rows keep expf. */
#ifndef RDG_SOFTMAX16_FAST_EXP
#define RDG_SOFTMAX16_FAST_EXP 2
#endif
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
template <int VEC>
__device__ __forceinline__ float softmax_exp(float d)
{
    if constexpr (RDG_SOFTMAX16_FAST_EXP == 2 && VEC == 8 && !RDG_HIP)
        return exp2_approx(d * 1.4426950408889634f);
    else if constexpr (RDG_SOFTMAX16_FAST_EXP && VEC == 8 && !RDG_HIP)
        return __expf(d);
    else
        return expf(d);
}

/* Which (e, s) warp reduction a register kernel uses (reduce.cuh): redux.sync, except for 16-bit
 * (VEC 8) rms_norm rows and 16-bit add_rms_norm rows over a cluster. Measured on the H200 against
 * the butterfly: layer_norm 4-13% faster (bf16 [16384, 8192] 0.1906 -> 0.1692 ms, [4096, 65536]
 * 0.537 -> 0.488), F32 rms_norm [4096, 65536] 5.7%; the exceptions were slower in both A/B runs
 * (bf16 rms_norm [65536, 1024] 0.0724 -> 0.0760 ms, [16384, 8192] and [4096, 65536] 0.2-0.8%,
 * add_rms_norm [4096, 65536] 0.588 -> 0.596). */
__host__ __device__ constexpr bool es_redux(int op, int scope, int vec)
{
    return RDG_ES_REDUX == 2 ||
           (RDG_ES_REDUX == 1 &&
            !(vec == 8 && (op == OP_RMS || (op == OP_ADD_RMS && scope == RED_CLUSTER))));
}

/* RDG_AFFINE_LDG=1 (the default; 0 for plain loads): gamma and beta read from global memory
 * through the read-only path (ld.global.nc). ops/norm.c rejects outputs that overlap them, so
 * they cannot change during a launch, and the compiler may issue these loads ahead of the stores
 * of earlier vectors (a plain load may alias y and waited for them: the 16-bit layer_norm
 * clusters, which read beta this way, stalled on it once per vector). It also freed the 24 bytes
 * those kernels spilled. H200 A/B, two rounds: bf16 layer_norm [4096, 65536] 0.452 -> 0.428 ms,
 * [2048, 131072] 0.486 -> 0.460; f16 -2.6% and -2.8%; the other shapes and f32 within 1%. */
#ifndef RDG_AFFINE_LDG
#define RDG_AFFINE_LDG 1
#endif

/* RDG_NORM_FAST_SUM=1 (the default; 0 always scales): the register kernel first sums the row
 * unscaled (x for layer_norm's mean, then (x - mean)^2; x^2 for rms_norm) with plain FP32
 * reductions, and takes the power-of-two scaled path of backends/README.md only when the
 * reduced sum shows that the unscaled one may have lost something: not finite (an overflow,
 * inf or NaN), above 2^100 (eps could vanish next to it, the output scale underflow), or for a
 * sum of squares below 2^-95 (terms may have underflowed: each loses at most 2^-150, and
 * cols <= 2^31 such losses stay below 2^-24 of a sum of 2^-95). In that range the scaled sums
 * are the unscaled ones times an exact power of two, so both paths give the same result up to
 * subnormal rounding. The decision is made on the reduced sum, so every thread of the row
 * group (and of the cluster) takes the same path. Saves the max|x| pass and the (e, s) pair
 * reductions on ordinary rows. */
#ifndef RDG_NORM_FAST_SUM
#define RDG_NORM_FAST_SUM 1
#endif
/* Which register kernels take the unscaled sums: rows over a cluster, except 16-bit layer_norm
 * and add_rms_norm. Measured on the H200 (A/B against the scaled path, two runs of 2 rounds):
 * F32 layer_norm [4096, 65536] -3.6 and -3.7%, rms_norm -1.8%, bf16 rms_norm -1.5 and -2.2%;
 * everywhere (=2) the 16-bit layer_norm kernels spilled (one CTA per row [16384, 8192] +16%,
 * cluster +2.8%), 16-bit warp rows lost 2-5% and 16-bit add_rms_norm clusters 1.5%; the other
 * rows within 1%. The policy measured level (within 0.3%) on every row it leaves scaled. */
__host__ __device__ constexpr bool fast_sums(int op, int scope, int vec)
{
    return RDG_NORM_FAST_SUM == 2 ||
           (RDG_NORM_FAST_SUM == 1 && scope == RED_CLUSTER && op != OP_ADD_RMS && !(op == OP_LN && vec == 8));
}
__device__ __forceinline__ __attribute__((unused)) bool unscaled_sum_ok(float s)
{
    return fabsf(s) <= 0x1p100f; /* false for inf and NaN */
}
__device__ __forceinline__ __attribute__((unused)) bool unscaled_sumsq_ok(float q)
{
    return q >= 0x1p-95f && q <= 0x1p100f;
}

/* RDG_NORM_FAST_STATS: the statistics divide by the row length as a product with its reciprocal
 * and take rsqrtf (MUFU.RSQ, 2 ulp) instead of 1 / sqrtf, as PyTorch's layer_norm does: per row
 * and statistic an IEEE division sequence and a square root less, with their slow-path branches,
  * on the path every thread of the row (and every CTA of a cluster) waits on. The outputs' error
 * grows by at most 3 ulp of FP32 (F32 tolerance 1e-5). 2 (the default): the two-row kernel
 * (norm_pair.cuh) and the bulk kernel (norm_bulk.cuh, written with them); H200 A/B against 0, 3 rounds: bf16 layer_norm [4096, 65536] -2.7%,
 * [2048, 131072] -5.9%, f16 -1.8% and -5.6%, [16384, 8192] (one CTA per row pair) within 0.3%.
 * (Keeping x - mean from the variance pass there, one subtraction per element less: -0.8% to
 * +0.3% alone, nothing on top of this; not kept.) 1: the one-row register kernels too
 * (layer_norm's fast path, rms_norm and add_rms_norm; H200 A/B against 2, 2 rounds: within 1%
 * on 17 of 18 rows, bf16 rms_norm [65536, 1024] 7.9% slower; the norm suites passed with it).
 * 0: neither. */
#ifndef RDG_NORM_FAST_STATS
#define RDG_NORM_FAST_STATS 2
#endif
__host__ __device__ constexpr bool fast_stats(bool pair)
{
    return pair ? RDG_NORM_FAST_STATS >= 1 : RDG_NORM_FAST_STATS == 1;
}
template <bool PAIR>
__device__ __forceinline__ float stat_div(float x, float h, float rh)
{
    return fast_stats(PAIR) ? x * rh : x / h;
}
template <bool PAIR>
__device__ __forceinline__ float stat_rsqrt(float x)
{
    return fast_stats(PAIR) ? rsqrtf(x) : 1.0f / sqrtf(x);
}

template <bool B>
struct BoolC {
    static constexpr bool value = B;
};

/* Layout of the staged gamma/beta slice. A thread reads its vector's VEC floats as VEC / 4
 * float4s. Stored in order (PLANAR false), a 16-bit row's vector (VEC = 8) spans 32 bytes, so
 * the 8 threads of one LDS.128 phase span 256 bytes: a 2-way bank conflict on every load.
 * PLANAR stores float4 p of vector v at p * slice_vec + v instead: a 16-byte stride, no
 * conflict. Taken where it measured faster (the pair kernel, norm_pair.cuh); the one-row
 * 16-bit kernels measured the same or up to 2% slower with it (H200, bench/RESULTS.md). */
template <int VEC, bool PLANAR>
__device__ __forceinline__ void stage_affine(float *sm, const float *src, int n4, int slice_vec)
{
    /* n4 float4s of the slice from src; zeros when src is null (a missing beta) */
    for (int k = threadIdx.x; k < n4; k += blockDim.x)
        ((float4 *)sm)[PLANAR ? (k % (VEC / 4)) * slice_vec + k / (VEC / 4) : k] =
            src ? ((const float4 *)src)[k] : make_float4(0.f, 0.f, 0.f, 0.f);
}

/* VEC floats of gamma or beta of slice vector vi: from the staged copy in shared memory or from
 * global memory. */
template <int VEC, bool STAGED, bool PLANAR = false>
__device__ __forceinline__ void load_affine(const float *sm, const float *gl, int vi, int slice_vec,
                                            float (&out)[VEC])
{
#pragma unroll
    for (int k = 0; k < VEC; k += 4) {
        const int c = vi * VEC + k;
        float4 g = STAGED ? (PLANAR ? ((const float4 *)sm)[(k / 4) * slice_vec + vi] : *(const float4 *)(sm + c))
                   : RDG_AFFINE_LDG ? __ldg((const float4 *)(gl + c))
                                    : *(const float4 *)(gl + c);
        out[k] = g.x;
        out[k + 1] = g.y;
        out[k + 2] = g.z;
        out[k + 3] = g.w;
    }
}

/* Which cache path the prefetch copies take. RDG_PF_L1=1 (the default): cp.async.ca (through L1)
 * except for 16-bit layer_norm, whose beta is read through L1 (those keep cp.async.cg); 2 .ca
 * everywhere, 0 .cg everywhere. With .cg (16 bytes a thread, a warp's 512 bytes contiguous) ncu
 * counted 2.5x the input's bytes in L2 read sectors for the 16-bit rows (42.0 M sectors for
 * 16.8 M; F32 rows without prefetch 1.5x, the same as every write); with .ca, H200 A/B
 * (2 rounds, 2 = everywhere): bf16 rms_norm [4096, 65536] -4.9%, add_rms_norm -4.8%,
 * softmax -1.9%, F32 layer_norm -4.8%; bf16 layer_norm +1.9% ([4096, 65536]) and +2.3%
 * ([16384, 8192]); the rest within 0.7%. */
#ifndef RDG_PF_L1
#define RDG_PF_L1 1
#endif

/* Asynchronous copies of this thread's vectors lane + i * gsize (i < NV, < count) of the slice
 * starting at vector base into buf (same vector index). */
template <class S, int NV, bool L1>
__device__ __forceinline__ void issue_prefetch(typename S::raw_t *buf, const void *src, int64_t base, int lane,
                                               int gsize, int count)
{
#pragma unroll
    for (int i = 0; i < NV; i++) {
        const int vi = lane + i * gsize;
        if (vi >= count)
            continue;
        rdg_copy16_async<L1>(buf + vi, (const typename S::raw_t *)src + base + vi);
    }
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

/* FP32 values t of one of a thread's row vectors, kept either as FP32 (v) or, PACK, as the
 * 16-bit vector loaded (xr), converted again at every use: the empty asm of launder stops the
 * compiler from keeping the converted values instead. */
template <class S, bool PACK>
__device__ __forceinline__ void vals_of(typename S::raw_t &xr, const float (&v)[S::VEC], float (&t)[S::VEC])
{
    if constexpr (PACK) {
        S::launder(xr);
        S::cvt(xr, t);
    } else {
#pragma unroll
        for (int k = 0; k < S::VEC; k++)
            t[k] = v[k];
    }
}

/* f(x) for each value of a thread's NV vectors of VEC, vals(i, t) giving vector i in FP32 */
template <int NV, int VEC, class Vals, class F>
__device__ __forceinline__ void for_each_val(Vals &&vals, F &&f)
{
#pragma unroll
    for (int i = 0; i < NV; i++) {
        float t[VEC];
        vals(i, t);
#pragma unroll
        for (int k = 0; k < VEC; k++)
            f(t[k]);
    }
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

/* ---- register kernel ----
 *
 * A row group handles one row at a time: one warp (SCOPE RED_WARP: the CTA runs blockDim / warp
 * rows side by side), the CTA (RED_BLOCK), or the CTAs of a cluster, each holding one slice of
 * the row (RED_CLUSTER). Thread `lane` of the group holds vectors lane + i * gsize (i < NV) of
 * its slice, F = NV * VEC floats. */
template <class S, int OP, int F, int SCOPE, int STAGE_AFFINE>
__device__ __forceinline__ void norm_reg_body(const NormArgs &a)
{
    constexpr int VEC = S::VEC;
    constexpr int NV = F / VEC;
    /* F = 64: 16-bit rms_norm rows kept packed in registers (below) */
    constexpr bool PACKED = F == 64;
    static_assert(!PACKED || (VEC == 8 && OP == OP_RMS), "packed rows: 16-bit rms_norm only (packed_op)");
    constexpr bool HAS_GAMMA = OP != OP_SOFTMAX;
    constexpr bool WARP = SCOPE == RED_WARP;
    constexpr bool FAST = fast_sums(OP, SCOPE, VEC); /* unscaled sums first (RDG_NORM_FAST_SUM) */

    extern __shared__ float4 rdg_dyn_smem[];
    __shared__ float red_f[2 * RDG_MAX_WARPS];
    __shared__ int red_i[2 * RDG_MAX_WARPS];
    __shared__ float2 red_cl[2 * RDG_RED_MAX_CLUSTER];
    __shared__ uint64_t red_bar[2];

    const int csize = SCOPE == RED_CLUSTER ? a.csize : 1;
    const int rank = SCOPE == RED_CLUSTER ? (int)(blockIdx.x % (unsigned)csize) : 0;
    RedCtx ctx = red_ctx(red_f, red_i, red_cl, red_bar, csize, rank);
    const int lane = WARP ? (int)(threadIdx.x % RDG_WARP) : (int)threadIdx.x;
    const int gsize = WARP ? RDG_WARP : (int)blockDim.x;
    const int groups = WARP ? (int)(blockDim.x / RDG_WARP) : 1;
    const int group = WARP ? (int)(threadIdx.x / RDG_WARP) : 0;
    const int nvec = (int)(a.cols / VEC); /* cols <= INT32_MAX */
    const int vbeg = rank * a.slice_vec;
    const int count = min(a.slice_vec, nvec - vbeg); /* vectors in this CTA's slice */
    const float h = (float)a.cols, rh = 1.0f / h; /* stat_div */

    /* gamma/beta slice: staged once per CTA in shared memory (the CTA is persistent over rows);
     * a missing beta is staged as zeros (fmaf(t, g, 0) == t * g). STAGE_AFFINE: 1 gamma and beta
     * staged, 2 gamma only (beta read through the caches), 0 neither (and always on HIP). */
    constexpr bool STAGED = HAS_GAMMA && RDG_AFFINE_IN_SMEM && STAGE_AFFINE != 0;
    constexpr bool STAGED_B = STAGED && OP == OP_LN && STAGE_AFFINE == 1;
    const float *sg = (const float *)rdg_dyn_smem;
    const float *sb = sg + (size_t)a.slice_vec * VEC;
    if (STAGED) {
        const int n4 = count * (VEC / 4);
        stage_affine<VEC, false>((float *)sg, a.gamma + (size_t)vbeg * VEC, n4, a.slice_vec);
        if (STAGED_B)
            stage_affine<VEC, false>((float *)sb, a.beta ? a.beta + (size_t)vbeg * VEC : nullptr, n4, a.slice_vec);
        __syncthreads();
    }
    const float *gg = HAS_GAMMA ? a.gamma + (size_t)vbeg * VEC : nullptr;
    const float *gb = a.beta ? a.beta + (size_t)vbeg * VEC : nullptr;

    if (SCOPE == RED_CLUSTER)
        cluster_reduce_init(ctx);

    const int64_t step = (int64_t)(gridDim.x / (unsigned)csize) * groups;
    int64_t row = (int64_t)(blockIdx.x / (unsigned)csize) * groups + group;

    /* Prefetch: each thread copies its own vectors of the group's next row into shared memory
     * (after the staged gamma/beta) while the group reduces the current row, so loads stay in
     * flight across the synchronisations. A thread reads back only what it copied itself, and
     * converts it to registers before it issues the next copy, so no barrier is needed. Rows
     * are disjoint, so this holds in place too. */
    constexpr int NIN = OP == OP_ADD_RMS ? 2 : 1;
    const int nstaged = (STAGED ? 1 : 0) + (STAGED_B ? 1 : 0);
    const bool prefetch = RDG_PREFETCH_SMEM && a.prefetch;
    typename S::raw_t *pf_x = (typename S::raw_t *)(sg + (size_t)nstaged * a.slice_vec * VEC) +
                              (size_t)group * NIN * a.slice_vec;
    constexpr bool PF_L1 = RDG_PF_L1 == 2 || (RDG_PF_L1 == 1 && !(OP == OP_LN && VEC == 8));
    auto prefetch_row = [&](int64_t r) {
        if (r < a.rows) {
            issue_prefetch<S, NV, PF_L1>(pf_x, a.x, r * nvec + vbeg, lane, gsize, count);
            if (OP == OP_ADD_RMS)
                issue_prefetch<S, NV, PF_L1>(pf_x + a.slice_vec, a.r, r * nvec + vbeg, lane, gsize, count);
        }
        rdg_copy_async_commit(); /* one group per row, empty past the end */
    };
    if (prefetch)
        prefetch_row(row);

    for (; row < a.rows; row += step) {
        const int64_t base = row * nvec + vbeg; /* vector index of the slice start */
        /* FP32 values (v), or for PACKED rows the 16-bit vectors as loaded (xr), converted again in
         * every pass; either way row_vals(i, t) gives vector i's FP32 values. */
        float v[NV][VEC];
        typename S::raw_t xr[NV];
        auto row_vals = [&](int i, float (&t)[VEC]) { vals_of<S, PACKED>(xr[i], v[i], t); };
        /* f(x) for each of this thread's values, masked-out entries (0) included */
        auto each_val = [&](auto &&f) { for_each_val<NV, VEC>(row_vals, f); };
        /* two reductions per row: fixed slots 0, 1 (layer_norm's count varies with the fast
         * sums, so its slots keep alternating across rows) */
        if (OP == OP_SOFTMAX || (OP == OP_LN && !FAST))
            ctx.counter = 0;

        /* loads: every 16-byte load of the row is issued before the first use */
        {
            typename S::raw_t raw[NV], raw2[NV];
            if (prefetch) {
                rdg_copy_async_wait();
#pragma unroll
                for (int i = 0; i < NV; i++) {
                    const int vi = lane + i * gsize;
                    raw[i] = vi < count ? pf_x[vi] : S::zero();
                    if (OP == OP_ADD_RMS)
                        raw2[i] = vi < count ? pf_x[a.slice_vec + vi] : S::zero();
                }
            } else {
#pragma unroll
                for (int i = 0; i < NV; i++) {
                    const int vi = lane + i * gsize;
                    raw[i] = vi < count ? S::ldv(a.x, base + vi) : S::zero();
                    if (OP == OP_ADD_RMS)
                        raw2[i] = vi < count ? S::ldv(a.r, base + vi) : S::zero();
                }
            }
            if (OP == OP_ADD_RMS) {
#pragma unroll
                for (int i = 0; i < NV; i++) {
                    float t[VEC];
                    S::cvt(raw[i], v[i]);
                    S::cvt(raw2[i], t);
#pragma unroll
                    for (int k = 0; k < VEC; k++)
                        v[i][k] = S::round(v[i][k] + t[k]);
                }
            } else {
#pragma unroll
                for (int i = 0; i < NV; i++) {
                    if constexpr (PACKED)
                        xr[i] = raw[i];
                    else
                        S::cvt(raw[i], v[i]);
                }
            }
        }
        if (prefetch) {
            prefetch_row(row + step); /* into the buffer just read */
        }
        if (OP == OP_ADD_RMS) {
            /* x_out may be a or r: written only after this thread read both */
#pragma unroll
            for (int i = 0; i < NV; i++) {
                const int vi = lane + i * gsize;
                if (vi < count)
                    S::stv(a.xout, base + vi, v[i]);
            }
        }

        if (OP == OP_RMS || OP == OP_ADD_RMS) {
            /* masked-out entries are 0: they add nothing to max|x| or the sum */
            float s = 0.0f;
            bool fast = false;
            if constexpr (FAST) {
                each_val([&](float x) { s = fmaf(x, x, s); });
                s = block_allreduce<SumOp, SCOPE>(s, ctx);
                fast = unscaled_sumsq_ok(s);
            }
            int e = 0;
            if (!fast)
                e = rms_scaled_sumsq<SCOPE, es_redux(OP, SCOPE, VEC)>(each_val, s, ctx);
            const float sc = pow2_neg(e);
            const float inv = stat_rsqrt<false>(stat_div<false>(s, h, rh) + scale_pow2(a.eps, -2 * e));
            if (OP == OP_ADD_RMS && rank == 0 && lane == 0)
                a.rstd[row] = scale_pow2(inv, -e);
            /* y = (x * 2^-e) * inv * gamma; the fast path's e is 0 and skips that multiply */
            auto store_rows = [&](auto scaled) {
#pragma unroll
                for (int i = 0; i < NV; i++) {
                    const int vi = lane + i * gsize;
                    if (vi < count) {
                        float g[VEC], t[VEC];
                        load_affine<VEC, STAGED>(sg, gg, vi, a.slice_vec, g);
                        row_vals(i, t);
#pragma unroll
                        for (int k = 0; k < VEC; k++)
                            t[k] = (decltype(scaled)::value ? t[k] * sc : t[k]) * inv * g[k];
                        S::stv(a.y, base + vi, t);
                    }
                }
            };
            if (fast)
                store_rows(BoolC<false>());
            else
                store_rows(BoolC<true>());
        } else if (OP == OP_LN) {
            /* y = (x - mean) * inv * gamma + beta; CENTERED: v holds x - mean already (scaled
             * path, in its scaled units) */
            auto store_ln = [&](auto centered, float mean, float inv) {
#pragma unroll
                for (int i = 0; i < NV; i++) {
                    const int vi = lane + i * gsize;
                    if (vi < count) {
                        float g[VEC], t[VEC];
                        load_affine<VEC, STAGED>(sg, gg, vi, a.slice_vec, g);
#pragma unroll
                        for (int k = 0; k < VEC; k++)
                            t[k] = (decltype(centered)::value ? v[i][k] : v[i][k] - mean) * inv;
                        if (STAGED_B || gb) {
                            float b[VEC];
                            load_affine<VEC, STAGED_B>(sb, gb, vi, a.slice_vec, b);
#pragma unroll
                            for (int k = 0; k < VEC; k++)
                                t[k] = fmaf(t[k], g[k], b[k]);
                        } else {
#pragma unroll
                            for (int k = 0; k < VEC; k++)
                                t[k] *= g[k];
                        }
                        S::stv(a.y, base + vi, t);
                    }
                }
            };
            bool fast = false;
            if constexpr (FAST) {
                float s = 0.0f;
                each_val([&](float x) { s += x; });
                s = block_allreduce<SumOp, SCOPE>(s, ctx);
                if (unscaled_sum_ok(s)) {
                    const float mean = stat_div<false>(s, h, rh);
                    float q = 0.0f;
#pragma unroll
                    for (int i = 0; i < NV; i++) {
                        if (lane + i * gsize < count)
#pragma unroll
                            for (int k = 0; k < VEC; k++) {
                                const float d = v[i][k] - mean;
                                q = fmaf(d, d, q);
                            }
                    }
                    q = block_allreduce<SumOp, SCOPE>(q, ctx);
                    fast = unscaled_sumsq_ok(q);
                    if (fast)
                        store_ln(BoolC<false>(), mean, stat_rsqrt<false>(stat_div<false>(q, h, rh) + a.eps));
                }
            }
            if (!fast) { /* the power-of-two scaled path */
                const float inv = ln_scaled_center<SCOPE, es_redux(OP, SCOPE, VEC)>(v, lane, gsize, count, h,
                                                                                   a.eps, ctx);
                store_ln(BoolC<true>(), 0.0f, inv);
            }
        } else { /* OP_SOFTMAX: max, then the sum of exp. One reduction instead, of (k, s) pairs
                  * (each thread's sum relative to its own power of two k >= its maximum), was
                  * no faster for 16-bit rows (H200, bench/RESULTS.md, thirteenth session) */
            float m = -INFINITY;
#pragma unroll
            for (int i = 0; i < NV; i++) {
                if (lane + i * gsize < count)
#pragma unroll
                    for (int k = 0; k < VEC; k++)
                        m = fmaxf(m, v[i][k]);
            }
            m = block_allreduce<MaxOp, SCOPE>(m, ctx);
            float s = 0.0f;
#pragma unroll
            for (int i = 0; i < NV; i++) {
                if (lane + i * gsize < count)
#pragma unroll
                    for (int k = 0; k < VEC; k++) {
                        v[i][k] = softmax_exp<VEC>(v[i][k] - m);
                        s += v[i][k];
                    }
            }
            s = block_allreduce<SumOp, SCOPE>(s, ctx);
            const float inv = 1.0f / s;
#pragma unroll
            for (int i = 0; i < NV; i++) {
                const int vi = lane + i * gsize;
                if (vi < count) {
#pragma unroll
                    for (int k = 0; k < VEC; k++)
                        v[i][k] *= inv;
                    S::stv(a.y, base + vi, v[i]);
                }
            }
        }
    }
    if (prefetch)
        rdg_copy_async_wait();
    /* A CTA's shared memory must outlive the cluster's last remote read of it. */
    if (SCOPE == RED_CLUSTER)
        cluster_sync_all();
}

/* STAGE (LaunchCfg::staged): 1 gamma and beta staged in shared memory; 0 both read through the
 * caches, where the staged slice would leave one CTA per SM (16-bit layer_norm clusters);
 * 2 gamma staged, beta through the caches (RDG_LN16_STAGE_GAMMA below). */
template <class S, int OP, int F, int SCOPE, int STAGE = 1>
__global__ void RDG_LAUNCH_BOUNDS((RegBounds<F, SCOPE, OP, sizeof(typename S::elem_t)>::THREADS),
                                  (RegBounds<F, SCOPE, OP, sizeof(typename S::elem_t)>::BLOCKS))
norm_reg_kernel(NormArgs a)
{
    norm_reg_body<S, OP, F, SCOPE, STAGE>(a);
}

/* RDG_LN16_STAGE_GAMMA=1 (the default; 0 stages neither): 16-bit layer_norm clusters stage gamma
 * only (64 KiB per CTA, so two CTAs still fit on an SM with their prefetch buffers) and read beta
 * through the caches, halving the L2 reads of the affine data (they are 4x the row's own bytes in
 * the unstaged kernel). H200 A/B: bf16 [4096, 65536] 0.485 -> 0.454 ms; other shapes unchanged. */
#ifndef RDG_LN16_STAGE_GAMMA
#define RDG_LN16_STAGE_GAMMA 1
#endif

/* 16-bit layer_norm rows in one CTA at F = 32 (up to 512 threads): 80 registers. The launch
 * bounds allow 64 (2 CTAs of 512), which spills 28 bytes, or 128 (1 CTA), with which ptxas
 * takes so many that 256-thread CTAs ([16384, 8192]) fit only 2 per SM; 80 keeps the 3 per SM
 * that the staged gamma and beta (64 KiB) allow, without spilling. */
#ifndef RDG_LN16_MAXNREG
#define RDG_LN16_MAXNREG 1
#endif
template <class S, int STAGE = 1>
__global__ void RDG_MAXNREG(512, 80) norm_reg_kernel_ln16(NormArgs a)
{
    norm_reg_body<S, OP_LN, 32, RED_BLOCK, STAGE>(a);
}

/* RDG_LN16_BLOCK_PF=1 (the default; 0 stages gamma and beta without prefetch): 16-bit layer_norm
 * rows of one CTA stage gamma only (32 KiB at 8192 columns instead of 64) and prefetch the next
 * row into the space saved, so that loads stay in flight across the row's two reductions (these
 * CTAs, 3 per SM, had nothing in flight while they reduced). H200 A/B, 2 rounds: bf16 [16384,
 * 8192] 0.169 -> 0.155 ms, [8192, 16384] 0.245 -> 0.188; f16 the same. */
#ifndef RDG_LN16_BLOCK_PF
#define RDG_LN16_BLOCK_PF 1
#endif

#if RDG_PREFETCH_SMEM && RDG_AFFINE_IN_SMEM
#include "norm_pair.cuh"
#endif
#include "norm_bulk.cuh"


/* ---- looped kernel (any cols, any alignment) ---- */

#define RDG_LOOP_THREADS 1024

template <class S, int OP>
__global__ void RDG_LAUNCH_BOUNDS(RDG_LOOP_THREADS, 1) norm_loop_kernel(NormArgs a)
{
    __shared__ float red_f[2 * RDG_MAX_WARPS];
    __shared__ int red_i[2 * RDG_MAX_WARPS];
    RedCtx ctx = red_ctx(red_f, red_i, nullptr, nullptr, 1, 0); /* no cluster */

    const int tid = threadIdx.x;
    const int nthr = blockDim.x;
    const int64_t cols = a.cols;
    const float h = (float)cols;

    for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
        const int64_t off = row * cols;
        /* the values the statistics and the output use */
        const void *src = OP == OP_ADD_RMS ? a.xout : a.x;

        if (OP == OP_SOFTMAX) {
            float m = -INFINITY;
            for (int64_t c = tid; c < cols; c += nthr)
                m = fmaxf(m, S::ld1(a.x, off + c));
            m = block_allreduce<MaxOp, RED_BLOCK>(m, ctx);
            float s = 0.0f;
            for (int64_t c = tid; c < cols; c += nthr)
                s += expf(S::ld1(a.x, off + c) - m);
            s = block_allreduce<SumOp, RED_BLOCK>(s, ctx);
            const float inv = 1.0f / s;
            for (int64_t c = tid; c < cols; c += nthr)
                S::st1(a.y, off + c, expf(S::ld1(a.x, off + c) - m) * inv);
            continue;
        }

        /* pass 1: max|x| (add: x = round(a + r) is written to xout here, read back later by
         * the same thread) */
        float m = 0.0f;
        if (OP == OP_ADD_RMS) {
            for (int64_t c = tid; c < cols; c += nthr) {
                const float xv = S::round(S::ld1(a.x, off + c) + S::ld1(a.r, off + c));
                S::st1(a.xout, off + c, xv);
                m = fmaxf(m, fabsf(xv));
            }
        } else {
            for (int64_t c = tid; c < cols; c += nthr)
                m = fmaxf(m, fabsf(S::ld1(src, off + c)));
        }
        m = block_allreduce<MaxOp, RED_BLOCK>(m, ctx);
        const int e = exp_of_max(m);
        const float sc = pow2_neg(e);
        const float eps_s = scale_pow2(a.eps, -2 * e);

        if (OP == OP_LN) {
            float s = 0.0f;
            for (int64_t c = tid; c < cols; c += nthr)
                s += S::ld1(src, off + c) * sc;
            s = block_allreduce<SumOp, RED_BLOCK>(s, ctx);
            const float mean = s / h;
            float q = 0.0f;
            for (int64_t c = tid; c < cols; c += nthr) {
                const float d = S::ld1(src, off + c) * sc - mean;
                q = fmaf(d, d, q);
            }
            q = block_allreduce<SumOp, RED_BLOCK>(q, ctx);
            float inv = 1.0f / sqrtf(q / h + eps_s);
            if (isinf(inv)) /* constant row with large e: see the register kernel */
                inv = FLT_MAX;
            for (int64_t c = tid; c < cols; c += nthr) {
                const float d = (S::ld1(src, off + c) * sc - mean) * inv;
                const float yv = a.beta ? fmaf(d, a.gamma[c], a.beta[c]) : d * a.gamma[c];
                S::st1(a.y, off + c, yv);
            }
        } else { /* RMS, ADD_RMS */
            float s = 0.0f;
            for (int64_t c = tid; c < cols; c += nthr) {
                const float u = S::ld1(src, off + c) * sc;
                s = fmaf(u, u, s);
            }
            s = block_allreduce<SumOp, RED_BLOCK>(s, ctx);
            const float inv = 1.0f / sqrtf(s / h + eps_s);
            if (OP == OP_ADD_RMS && tid == 0)
                a.rstd[row] = scale_pow2(inv, -e);
            for (int64_t c = tid; c < cols; c += nthr)
                S::st1(a.y, off + c, (S::ld1(src, off + c) * sc) * inv * a.gamma[c]);
        }
    }
}

/* ---- host side: kernel selection, launch configuration, occupancy cache ---- */

typedef void (*kernel_fn)(NormArgs);

/* The register-kernel variants the policy uses (F floats per thread, reduction scope). */
enum { V_WARP8, V_WARP32, V_BLOCK16, V_BLOCK32, V_CLUSTER16, V_CLUSTER32, V_BLOCK64, V_CLUSTER64 };

/* Ops whose 16-bit rows the policy holds packed at F = 64 in CTAs and clusters: rms_norm only.
 * Measured on the H200 against F = 32 (bench/RESULTS.md): rms_norm [4096, 65536] 12-14% faster,
 * [16384, 8192] 1-2%; layer_norm 8-12% and softmax 5-8% slower (they convert twice more per
 * element and softmax computes exp twice); add_rms_norm's packed kernels spill (two inputs). */
constexpr bool packed_op(int op, int esize)
{
    return RDG_NORM_PACKED16 && esize == 2 && op == OP_RMS;
}

template <class S, int OP>
constexpr bool packed_rows()
{
    return packed_op(OP, (int)sizeof(typename S::elem_t));
}

template <class S, int OP>
kernel_fn reg_kernel_for(int variant, int staged)
{
#if RDG_PREFETCH_SMEM && RDG_AFFINE_IN_SMEM
    if constexpr ((OP == OP_LN || OP == OP_SOFTMAX) && sizeof(typename S::elem_t) == 2)
        if (staged == 3) /* two rows per thread (norm_pair.cuh) */
            return variant == V_BLOCK32 ? pair_kernel<S, OP, RED_BLOCK>
#if RDG_HOST_CLUSTERS
                   : variant == V_CLUSTER32 ? pair_kernel<S, OP, RED_CLUSTER>
#endif
                                            : nullptr;
#endif
    if (staged != 1) { /* the policy stages less only for 16-bit layer_norm (choose) */
        if constexpr (OP == OP_LN && sizeof(typename S::elem_t) == 2) {
            if constexpr (RDG_LN16_BLOCK_PF && RDG_LN16_MAXNREG)
                if (variant == V_BLOCK32 && staged == 2)
                    return norm_reg_kernel_ln16<S, 2>;
#if RDG_HOST_CLUSTERS
            if (variant == V_CLUSTER32 && staged == 0)
                return norm_reg_kernel<S, OP_LN, 32, RED_CLUSTER, 0>;
            if constexpr (RDG_LN16_STAGE_GAMMA)
                if (variant == V_CLUSTER32 && staged == 2)
                    return norm_reg_kernel<S, OP_LN, 32, RED_CLUSTER, 2>;
#endif
        }
        return nullptr;
    }
    switch (variant) {
    case V_WARP8:
        return norm_reg_kernel<S, OP, 8, RED_WARP>;
    case V_WARP32:
        return norm_reg_kernel<S, OP, 32, RED_WARP>;
    case V_BLOCK16: /* choose() gives 16-bit rows F = 32 in CTAs and clusters: not built for them */
        if constexpr (sizeof(typename S::elem_t) == 2)
            return nullptr;
        else
            return norm_reg_kernel<S, OP, 16, RED_BLOCK>;
    case V_BLOCK32: /* packed ops too: their rows below 8192 */
        if constexpr (RDG_LN16_MAXNREG && OP == OP_LN && sizeof(typename S::elem_t) == 2)
            return norm_reg_kernel_ln16<S>;
        else
            return norm_reg_kernel<S, OP, 32, RED_BLOCK>;
    case V_BLOCK64:
        if constexpr (packed_rows<S, OP>())
            return norm_reg_kernel<S, OP, 64, RED_BLOCK>;
        else
            return nullptr;
#if RDG_HOST_CLUSTERS
    case V_CLUSTER16:
        if constexpr (sizeof(typename S::elem_t) == 2)
            return nullptr;
        else
            return norm_reg_kernel<S, OP, 16, RED_CLUSTER>;
    case V_CLUSTER32:
        if constexpr (packed_rows<S, OP>())
            return nullptr;
        else
            return norm_reg_kernel<S, OP, 32, RED_CLUSTER>;
    case V_CLUSTER64:
        if constexpr (packed_rows<S, OP>())
            return norm_reg_kernel<S, OP, 64, RED_CLUSTER>;
        else
            return nullptr;
#endif
    default:
        return nullptr;
    }
}

template <int OP>
kernel_fn reg_kernel(rudnn_dtype_t dt, int variant, int staged)
{
    switch (dt) {
    case RUDNN_F32:
        return reg_kernel_for<StoreF32, OP>(variant, staged);
    case RUDNN_F16:
        return reg_kernel_for<StoreF16, OP>(variant, staged);
    default:
        return reg_kernel_for<StoreBF16, OP>(variant, staged);
    }
}

template <int OP>
kernel_fn loop_kernel(rudnn_dtype_t dt)
{
    switch (dt) {
    case RUDNN_F32:
        return norm_loop_kernel<StoreF32, OP>;
    case RUDNN_F16:
        return norm_loop_kernel<StoreF16, OP>;
    default:
        return norm_loop_kernel<StoreBF16, OP>;
    }
}

kernel_fn pick_reg(int op, rudnn_dtype_t dt, int variant, int staged)
{
    switch (op) {
    case OP_LN:
        return reg_kernel<OP_LN>(dt, variant, staged);
    case OP_RMS:
        return reg_kernel<OP_RMS>(dt, variant, staged);
    case OP_SOFTMAX:
        return reg_kernel<OP_SOFTMAX>(dt, variant, staged);
    default:
        return reg_kernel<OP_ADD_RMS>(dt, variant, staged);
    }
}

kernel_fn pick_loop(int op, rudnn_dtype_t dt)
{
    switch (op) {
    case OP_LN:
        return loop_kernel<OP_LN>(dt);
    case OP_RMS:
        return loop_kernel<OP_RMS>(dt);
    case OP_SOFTMAX:
        return loop_kernel<OP_SOFTMAX>(dt);
    default:
        return loop_kernel<OP_ADD_RMS>(dt);
    }
}

/* the bulk kernel of an op, dtype and scope (sm_90 device code; choose() takes it only where
 * the device has clusters, i.e. runs sm_90+ code) */
template <int OP, int SCOPE>
kernel_fn bulk_kernel_for(rudnn_dtype_t dt)
{
#if RDG_HOST_CLUSTERS && !RDG_HIP
    switch (dt) {
    case RUDNN_F32: /* 16-bit rows only (bulk_cfg) */
        return nullptr;
    case RUDNN_F16:
        return bulk_kernel<StoreF16, OP, SCOPE>;
    default:
        return bulk_kernel<StoreBF16, OP, SCOPE>;
    }
#else
    (void)dt;
    return nullptr;
#endif
}

kernel_fn pick_bulk(int op, rudnn_dtype_t dt, int cluster)
{
    switch (op) {
    case OP_LN:
        return cluster ? bulk_kernel_for<OP_LN, RED_GROUP_CLUSTER>(dt) : bulk_kernel_for<OP_LN, RED_GROUP>(dt);
    case OP_RMS:
        return cluster ? bulk_kernel_for<OP_RMS, RED_GROUP_CLUSTER>(dt) : bulk_kernel_for<OP_RMS, RED_GROUP>(dt);
    default:
        return nullptr;
    }
}

struct LaunchCfg {
    int reg;        /* 1: register kernel, 0: looped kernel */
    int variant;    /* register kernel: V_* */
    int f;          /* register kernel: floats per thread (8, 16, 32) */
    int threads;    /* per CTA */
    int csize;      /* CTAs per row (cluster size), 1 otherwise */
    int rows_per_cta; /* warp variants: one row per warp; 2 for pair_kernel */
    int slice_vec;  /* vectors per CTA slice */
    size_t smem;    /* dynamic shared memory bytes */
    int staged;     /* register kernel: 1 gamma/beta staged in shared memory, 2 gamma only, 0 neither
                       (read through the caches), 3 two rows per thread (16-bit
                       layer_norm, gamma and beta staged; softmax: pair_kernel) */
    int prefetch;   /* next row copied asynchronously into shared memory (after gamma/beta) */
    int bulk;       /* 1: bulk kernel (norm_bulk.cuh): rows_per_cta groups of group_threads */
    int stages;     /* bulk kernel: row buffers per group */
    int group_threads;
};

int64_t round_up(int64_t v, int64_t m)
{
    return rdg_ceil_div(v, m) * m;
}

/* Static shared memory of the kernels plus a margin, subtracted from the opt-in limit. */
#define RDG_STATIC_SMEM_RESERVE 1024
/* Elements one CTA of the register kernel holds at most: 512 threads at F = 16 and at F = 32. */
#define RDG_CTA_ELEMS_F16 8192
#define RDG_CTA_ELEMS_F32 16384
/* ... and 16-bit elements held packed (F = 64, 256 threads) */
#define RDG_CTA_ELEMS_PACKED 16384
#define RDG_MAX_CLUSTER 8 /* portable cluster size limit */
static_assert(RDG_MAX_CLUSTER <= RDG_RED_MAX_CLUSTER, "reduce.cuh holds the partials of RDG_RED_MAX_CLUSTER CTAs");
/* Whether the CTAs of warp rows (cols <= 1024) each take one row group, the grid covering all
 * rows, instead of a persistent grid looping over them. RDG_WARP_ROWS_GRID: 1 (default) the
 * measured policy below, 0 always persistent, 2 always one row group per CTA. H200 A/B against persistent, 2 rounds,
 * [65536, 1024] and [65536, 256]: F32 softmax -1.5% and -3%, F32 layer_norm 0 and -4.5%, F32
 * rms_norm 0 and -2.6%, 16-bit softmax -3.8% and -1%; 16-bit rms_norm +3.5% and +1.8% and
 * layer_norm +6% and +5.5% (slower), so those stay persistent; add_rms_norm was not measured and
 * stays persistent. */
#ifndef RDG_WARP_ROWS_GRID
#define RDG_WARP_ROWS_GRID 1
#endif
bool warp_rows_grid(int op, rudnn_dtype_t dt)
{
    if (RDG_WARP_ROWS_GRID != 1)
        return RDG_WARP_ROWS_GRID == 2;
    return dt == RUDNN_F32 ? op != OP_ADD_RMS : op == OP_SOFTMAX;
}
#ifndef RDG_WARP_ROWS_PER_CTA
#define RDG_WARP_ROWS_PER_CTA 4
#endif

/* The looped kernel: one CTA of min(1024, cols rounded up to the warp size) threads per row. */
LaunchCfg loop_cfg(const rdg_devinfo_t *d, int64_t cols)
{
    LaunchCfg c;
    memset(&c, 0, sizeof c);
    const int w = d->warp_size > 0 ? d->warp_size : 32;
    const int max_thr = d->max_threads > 0 && d->max_threads < RDG_LOOP_THREADS ? d->max_threads : RDG_LOOP_THREADS;
    c.csize = 1;
    c.rows_per_cta = 1;
    c.threads = (int)(cols < max_thr ? round_up(cols, w) : (max_thr / w) * w);
    return c;
}

/* 16-bit layer_norm and softmax rows with two rows per thread (norm_pair.cuh) where
 * RDG_LN16_PAIR or RDG_SOFTMAX16_PAIR asks for it (bit 0: rows that choose() splits over a
 * cluster, bit 1: rows of one CTA at F = 32) and the staged gamma and beta (layer_norm) and two
 * rows' prefetch buffers fit in shared memory: fills c and returns 1. A CTA's slice is the row
 * when it is at most the op's minimum slice long (or the device has no clusters); longer rows
 * are split evenly over a cluster into slices of about that size, larger where that would take
 * more than RDG_MAX_CLUSTER CTAs. layer_norm, 8192 (the default) gives two CTAs of 256 threads
 * per SM in place of one of 512. H200 A/B against 16384, 2 rounds, bf16: [4096, 65536] 0.3425
 * -> 0.3181 ms (-7.1%), [4096, 16384] -1.7%, [16384, 8192] +0.8% (the same kernel: noise),
 * [2048, 131072] +0.6% (the same slices); 4096 lost where it changed the slice of 8192-element
 * rows (cluster of 2: +9.2%) and of 16384 (+16.9%). */
#ifndef RDG_LN16_PAIR_MIN_SLICE
#define RDG_LN16_PAIR_MIN_SLICE 8192
#endif
#ifndef RDG_SOFTMAX16_PAIR_MIN_SLICE
#define RDG_SOFTMAX16_PAIR_MIN_SLICE 8192
#endif
int pair_cfg(const rdg_devinfo_t *d, int op, int esize, int variant, int64_t nvec, LaunchCfg *c)
{
#if RDG_PREFETCH_SMEM && RDG_AFFINE_IN_SMEM
    const int bits = op == OP_LN ? RDG_LN16_PAIR : op == OP_SOFTMAX ? RDG_SOFTMAX16_PAIR : 0;
    const int want = esize == 2 && ((variant == V_CLUSTER32 && (bits & 1)) || (variant == V_BLOCK32 && (bits & 2)));
    if (!want)
        return 0;
    const int w = d->warp_size > 0 ? d->warp_size : 32;
    const int max_thr = d->max_threads > 0 && d->max_threads < 1024 ? d->max_threads : 1024;
    const int vec = 16 / esize; /* elements per 16-byte vector */
    const int min_slice = op == OP_LN ? RDG_LN16_PAIR_MIN_SLICE : RDG_SOFTMAX16_PAIR_MIN_SLICE;
    int64_t slice = rdg_ceil_div(min_slice, vec);
    if (slice * RDG_MAX_CLUSTER < nvec)
        slice = rdg_ceil_div(nvec, RDG_MAX_CLUSTER);
    if (slice > nvec || !d->clusters)
        slice = nvec;
    const int csize = (int)rdg_ceil_div(nvec, slice);
    slice = rdg_ceil_div(nvec, csize); /* balanced */
    /* softmax: only rows over more than 4 slices of min_slice (RDG_SOFTMAX16_PAIR, measured) */
    if (op == OP_SOFTMAX && (slice * vec > min_slice || csize <= 4))
        return 0;
    const int64_t thr = round_up(rdg_ceil_div(slice * vec, RDG_PAIR_F), w);
    /* gamma and beta (F32, layer_norm), then two rows' 16-byte vectors */
    const size_t smem = (op == OP_LN ? (size_t)slice * vec * sizeof(float) * 2 : 0) + (size_t)slice * 16 * 2;
    if (thr > max_thr || thr > 16384 / RDG_PAIR_F || smem + RDG_STATIC_SMEM_RESERVE > d->smem_optin)
        return 0;
    memset(c, 0, sizeof *c);
    c->reg = 1;
    c->variant = csize > 1 ? V_CLUSTER32 : V_BLOCK32;
    c->f = RDG_PAIR_F;
    c->threads = (int)thr;
    c->csize = csize;
    c->rows_per_cta = 2;
    c->slice_vec = (int)slice;
    c->smem = smem;
    c->staged = 3;
    c->prefetch = 1;
    return 1;
#else
    (void)d, (void)op, (void)esize, (void)variant, (void)nvec, (void)c;
    return 0;
#endif
}

/* 16-bit rows through the bulk kernel (norm_bulk.cuh) where RDG_NORM_BULK asks for the op and
 * the row's extent (one CTA, or a cluster: CLUSTER) and the device runs sm_90 code. A CTA's slice
 * is the row, or over a cluster slices of RDG_BULK_CLUSTER_SLICE elements (balanced; larger
 * where that would take more than RDG_MAX_CLUSTER CTAs). Groups of T = ceil(slice / (RDG_BULK_NV
 * * VEC)) threads, as many per CTA as RDG_BULK_THREADS and shared memory allow (the slice's gamma
 * and beta once, then RDG_BULK_STAGES slice buffers per group). T >= 128: rows of 4096 or more,
 * the shortest measured (rows of 2048 would get groups of 2 warps, 8 to a CTA, not measured); the
 * kernel itself needs 2 warps, so that the group's first reduction has a barrier before the
 * refill. Fills c and returns 1. */
int bulk_cfg(const rdg_devinfo_t *d, int op, int esize, int64_t nvec, int cluster, LaunchCfg *c)
{
#if RDG_HOST_CLUSTERS
    const int bit = (op == OP_LN ? 1 : op == OP_RMS ? 2 : 0) << (cluster ? 2 : 0);
    if (!(RDG_NORM_BULK & bit) || esize != 2 || !d->clusters || d->warp_size != 32)
        return 0;
    const int vec = 16 / esize;
    int64_t slice = nvec;
    int csize = 1;
    if (cluster) {
        csize = (int)rdg_ceil_div(nvec, rdg_ceil_div(RDG_BULK_CLUSTER_SLICE, vec));
        if (csize > RDG_MAX_CLUSTER)
            csize = RDG_MAX_CLUSTER;
        if (csize < 2)
            return 0;
        slice = rdg_ceil_div(nvec, csize);
    }
    const int64_t t = round_up(rdg_ceil_div(slice, RDG_BULK_NV), 32);
    const int max_thr = d->max_threads > 0 && d->max_threads < RDG_BULK_THREADS ? d->max_threads : RDG_BULK_THREADS;
    if (t < 128 || t > max_thr)
        return 0;
    const size_t affine = (size_t)slice * vec * sizeof(float) * (op == OP_LN ? 2 : 1);
    const size_t per_group = (size_t)RDG_BULK_STAGES * slice * 16;
    /* static shared memory: the cluster kernels also hold the groups' cluster partials */
    const size_t reserve = RDG_STATIC_SMEM_RESERVE + (cluster ? 1024 : 0);
    int groups = (int)(max_thr / t);
    if (groups > RDG_BULK_MAX_GROUPS)
        groups = RDG_BULK_MAX_GROUPS;
    while (groups > 0 && affine + groups * per_group + reserve > d->smem_optin)
        groups--;
    if (groups < 1)
        return 0;
    memset(c, 0, sizeof *c);
    c->reg = 1;
    c->bulk = 1;
    c->variant = cluster ? V_CLUSTER32 : V_BLOCK32;
    c->threads = (int)t * groups;
    c->group_threads = (int)t;
    c->csize = csize;
    c->rows_per_cta = groups;
    c->slice_vec = (int)slice;
    c->stages = RDG_BULK_STAGES;
    c->smem = affine + groups * per_group;
    return 1;
#else
    (void)d, (void)op, (void)esize, (void)nvec, (void)cluster, (void)c;
    return 0;
#endif
}

/* The launch policy (w = warp size: 32 on NVIDIA, 32 or 64 on AMD). Register kernel when every
 * row is 16-byte aligned and cols is a multiple of the vector width (16 bytes):
 *   cols <= 8 w (256):     one warp per row, 4 rows per CTA, F = 8
 *   cols <= 32 w (1024):   one warp per row, 4 rows per CTA, F = 32 (1024 -> 32 lanes x 32)
 *   cols <= 8192:          one CTA per row, F = 16, ceil(cols / 16) threads (8192 -> 512)
 *   cols <= 65536:         cluster of ceil(cols / 8192) CTAs, F = 16, <= 512 threads each
 *                          (65536 -> 8 x 512)
 *   cols <= 131072:        cluster of ceil(cols / 16384) CTAs, F = 32, <= 512 threads each
 *   16-bit data: F = 32 (cols <= 16384 in one CTA, 16384 per CTA of a cluster); rms_norm
 *                          from 8192: F = 64 packed (16384 per CTA of <= 256 threads)
 *   16-bit layer_norm and rms_norm rows of one CTA (sm_90, 4096 <= cols <= 16384): the bulk
 *                          kernel (bulk_cfg, norm_bulk.cuh), row groups of cols / 32 threads;
 *                          rows over a cluster the same, in CTA slices of at least 16384
 *                          (65536 -> 4 x 512 threads; up to 8 CTAs of <= 768 threads, where
 *                          shared memory holds them: layer_norm to 153600, rms_norm to 196608)
 *   16-bit layer_norm (CUDA) rows the bulk kernel does not take: two rows per thread in CTAs
 *                          of up to 8192 elements, or 16384 where
 *                          a row needs more than 8 (pair_cfg, norm_pair.cuh); 16-bit softmax
 *                          the same for rows over 5 to 8 CTAs of 8192 (32768 < cols <= 65536)
 *   without clusters (HIP, pre-Hopper): 8192 < cols <= 16384 one CTA, F = 32, <= 512 threads
 * with gamma (and beta) staged in shared memory (CUDA) when they fit; anything else (odd sizes,
 * misalignment, longer rows) runs the looped kernel. */
LaunchCfg choose(const rdg_devinfo_t *d, int op, rudnn_dtype_t dt, int64_t cols, int aligned)
{
    LaunchCfg c;
    memset(&c, 0, sizeof c);
    const int esize = dt == RUDNN_F32 ? 4 : 2;
    const int vec = 16 / esize;
    const int w = d->warp_size > 0 ? d->warp_size : 32;
    const int max_thr = d->max_threads > 0 && d->max_threads < 1024 ? d->max_threads : 1024;

    if (aligned && cols % vec == 0) {
        const int64_t nvec = cols / vec;
        int variant = -1, f = 0, csize = 1;
        /* 16-bit data gets twice the elements per thread, so that every thread moves 64 bytes
         * per row in the CTA and cluster variants whatever the dtype: per-row synchronisation
         * costs the same, so fewer, fuller threads hide it better (measured on the H200). */
        const int wide = esize == 2;
        /* 16-bit rms_norm rows of 8192 or more stay packed in registers at F = 64 (16384
         * elements in 256 threads): half the per-row work (reductions, index arithmetic) per
         * element; these rows were issue-bound at F = 32 on the H200 (ncu). Rows of 4096 (CTAs
         * of 64 threads) measured 1-2% slower packed. */
        const int packed = packed_op(op, esize) && cols >= 8192;
        const int64_t cta_elems = packed ? RDG_CTA_ELEMS_PACKED : wide ? RDG_CTA_ELEMS_F32 : RDG_CTA_ELEMS_F16;
        if (cols <= 8 * w) {
            variant = V_WARP8;
            f = 8;
        } else if (cols <= 32 * w) {
            variant = V_WARP32;
            f = 32;
        } else if (cols <= cta_elems) {
            variant = packed ? V_BLOCK64 : wide ? V_BLOCK32 : V_BLOCK16;
            f = packed ? 64 : wide ? 32 : 16;
        } else if (d->clusters && cols <= RDG_MAX_CLUSTER * cta_elems) {
            variant = packed ? V_CLUSTER64 : wide ? V_CLUSTER32 : V_CLUSTER16;
            f = packed ? 64 : wide ? 32 : 16;
            csize = (int)rdg_ceil_div(cols, cta_elems);
        } else if (d->clusters && !packed && cols <= RDG_MAX_CLUSTER * RDG_CTA_ELEMS_F32) {
            variant = V_CLUSTER32;
            f = 32;
            csize = (int)rdg_ceil_div(cols, RDG_CTA_ELEMS_F32);
        } else if (!d->clusters && cols <= RDG_CTA_ELEMS_F32) {
            variant = V_BLOCK32;
            f = 32;
        }
        if (variant >= 0 && variant != V_WARP8 && variant != V_WARP32 && bulk_cfg(d, op, esize, nvec, csize > 1, &c))
            return c;
        if (variant >= 0 && pair_cfg(d, op, esize, variant, nvec, &c))
            return c;
        if (variant >= 0) {
            const int warp_rows = variant == V_WARP8 || variant == V_WARP32;
            const int64_t slice = rdg_ceil_div(nvec, csize);
            const int64_t thr = warp_rows ? (int64_t)RDG_WARP_ROWS_PER_CTA * w
                                          : round_up(rdg_ceil_div(slice * vec, f), w);
            const int64_t group = warp_rows ? w : thr;
            if (thr <= 512 && thr <= max_thr && slice * vec <= group * f) {
                c.reg = 1;
                c.variant = variant;
                c.f = f;
                c.threads = (int)thr;
                c.csize = csize;
                c.rows_per_cta = warp_rows ? RDG_WARP_ROWS_PER_CTA : 1;
                c.slice_vec = (int)slice;
                /* gamma (and beta, zeros when absent) staged in shared memory, except for 16-bit
                 * layer_norm clusters: their 128 KiB slice left one CTA per SM, and reading it
                 * through the caches measured faster on the H200 ([4096, 65536] bf16 0.709 ->
                 * 0.595 ms, 0.604 -> 0.535 with the push reductions of reduce.cuh; the other
                 * ops lost 0-6% that way) */
                const int ln16_cluster = op == OP_LN && wide && csize > 1 && variant == V_CLUSTER32;
                const int ln16_block_pf = RDG_LN16_BLOCK_PF && RDG_LN16_MAXNREG && RDG_PREFETCH_SMEM &&
                                          op == OP_LN && wide && variant == V_BLOCK32;
                c.staged = ln16_block_pf ? 2 : !ln16_cluster ? 1 : RDG_LN16_STAGE_GAMMA ? 2 : 0;
                const int ng = !RDG_AFFINE_IN_SMEM || !c.staged || op == OP_SOFTMAX ? 0
                               : op == OP_LN && c.staged == 1                    ? 2
                                                                                : 1;
                const size_t bytes = (size_t)slice * vec * sizeof(float) * ng;
                /* the next row's slice per row group (a and residual for add_rms_norm) */
                const size_t pf_bytes = (size_t)slice * 16 * (op == OP_ADD_RMS ? 2 : 1) * c.rows_per_cta;
                /* Measured on the H200: the prefetch pays for F32 rows held by one CTA, for F32
                 * layer_norm clusters (two reductions per row; [4096, 65536] 0.980 -> 0.901 ms)
                 * and for 16-bit rows split over a cluster, and costs elsewhere (F32 rms_norm
                 * and add_rms_norm clusters lost 10%; RDG_NORM_PREFETCH=2 turns it on wherever
                 * it fits, for measuring). */
                const int want_pf = RDG_NORM_PREFETCH == 2 || ln16_block_pf ||
                                    (!warp_rows && (wide ? csize > 1 : csize == 1 || op == OP_LN));
                if (RDG_PREFETCH_SMEM && want_pf && bytes + pf_bytes + RDG_STATIC_SMEM_RESERVE <= d->smem_optin) {
                    c.prefetch = 1;
                    c.smem = bytes + pf_bytes;
                    return c;
                }
                if (bytes + RDG_STATIC_SMEM_RESERVE <= d->smem_optin) {
                    c.smem = bytes;
                    return c;
                }
            }
        }
    }
    return loop_cfg(d, cols);
}

/* Occupancy cache: resident CTAs (or clusters) per device for a (kernel, block, smem, cluster)
 * configuration. The first lookup of a configuration with dynamic shared
 * memory also raises the kernel's limit on that device. */
struct OccEntry {
    int device;
    kernel_fn fn;
    int threads;
    size_t smem;
    int csize;
    int resident; /* CTAs per SM (csize 1) or clusters per device (csize > 1) */
};

#define RDG_OCC_CACHE 256
OccEntry occ_cache[RDG_OCC_CACHE];
int occ_count;
pthread_mutex_t occ_lock = PTHREAD_MUTEX_INITIALIZER;

rudnn_status_t occupancy(const rdg_devinfo_t *d, kernel_fn fn, int threads, size_t smem, int csize,
                         int *resident)
{
    pthread_mutex_lock(&occ_lock);
    for (int i = 0; i < occ_count; i++) {
        const OccEntry &e = occ_cache[i];
        if (e.device == d->index && e.fn == fn && e.threads == threads && e.smem == smem && e.csize == csize) {
            *resident = e.resident;
            pthread_mutex_unlock(&occ_lock);
            return RUDNN_STATUS_SUCCESS;
        }
    }
    pthread_mutex_unlock(&occ_lock);

    cudaError_t err;
    if (smem > 0) {
        /* dynamic plus static shared memory above 48 KiB needs the opt-in (exactly 48 KiB of
         * dynamic memory already does); always the device's whole allowance, so that no
         * configuration lowers it for another */
        cudaFuncAttributes fa;
        err = cudaFuncGetAttributes(&fa, (const void *)fn);
        if (err != cudaSuccess)
            return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, "FuncGetAttributes");
        const int allow = (int)(d->smem_optin - fa.sharedSizeBytes);
        err = cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize, allow);
        if (err != cudaSuccess)
            return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, "FuncSetAttribute(MaxDynamicSharedMemorySize)");
    }
    int n = 0;
    if (csize > 1) {
#if RDG_HOST_CLUSTERS
        cudaLaunchConfig_t cfg = cudaLaunchConfig_t();
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = (unsigned)csize;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        cfg.gridDim = dim3((unsigned)(csize * d->sm_count), 1, 1);
        cfg.blockDim = dim3((unsigned)threads, 1, 1);
        cfg.dynamicSmemBytes = smem;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        err = cudaOccupancyMaxActiveClusters(&n, (const void *)fn, &cfg);
        if (err != cudaSuccess) {
            /* a capability question: a configuration the device cannot schedule (n = 0) makes
             * the caller use the looped kernel */
            (void)cudaGetLastError();
            n = 0;
        }
#else
        n = 0;
#endif
    } else {
        err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, (const void *)fn, threads, smem);
        if (err != cudaSuccess)
            return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, "OccupancyMaxActiveBlocksPerMultiprocessor");
    }

    pthread_mutex_lock(&occ_lock);
    if (occ_count < RDG_OCC_CACHE) {
        OccEntry &e = occ_cache[occ_count++];
        e.device = d->index;
        e.fn = fn;
        e.threads = threads;
        e.smem = smem;
        e.csize = csize;
        e.resident = n;
    }
    pthread_mutex_unlock(&occ_lock);
    *resident = n;
    return RUDNN_STATUS_SUCCESS;
}

const char *op_name(int op)
{
    switch (op) {
    case OP_LN:
        return "layer_norm";
    case OP_RMS:
        return "rms_norm";
    case OP_SOFTMAX:
        return "softmax";
    default:
        return "add_rms_norm";
    }
}

int aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}


rudnn_status_t launch(void *queue, int op, const rudnn_norm_plan_t *plan, NormArgs a)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    const rdg_devinfo_t *d = &q->dev;
    if (plan->rows <= 0 || plan->cols <= 0)
        return RUDNN_STATUS_SUCCESS;

    const rudnn_status_t selected = rdg_use_device(d->index);
    if (selected != RUDNN_STATUS_SUCCESS)
        return selected;
    cudaError_t err;

    a.rows = plan->rows;
    a.cols = plan->cols;
    a.eps = plan->eps;
    a.csize = 1;

    const int aligned = aligned16(a.x) && aligned16(a.y) && (!a.r || aligned16(a.r)) &&
                        (!a.xout || aligned16(a.xout)) && (!a.gamma || aligned16(a.gamma)) &&
                        (!a.beta || aligned16(a.beta));
    LaunchCfg c = choose(d, op, plan->dtype, plan->cols, aligned);

    kernel_fn fn = nullptr;
    int resident = 0;
    rudnn_status_t st;
    if (c.reg) {
        fn = c.bulk ? pick_bulk(op, plan->dtype, c.csize > 1) : pick_reg(op, plan->dtype, c.variant, c.staged);
        if (!fn)
            return rdg_error(RUDNN_STATUS_INTERNAL, "%s: %s: no kernel for variant %d", RUDNN_GPU_BACKEND_NAME,
                             op_name(op), c.variant);
        st = occupancy(d, fn, c.threads, c.smem, c.csize, &resident);
        if (st != RUDNN_STATUS_SUCCESS)
            return st;
        if (resident <= 0)
            c.reg = 0; /* cannot be resident (cluster, shared memory): use the looped kernel */
    }
    if (!c.reg) {
        c = loop_cfg(d, plan->cols);
        fn = pick_loop(op, plan->dtype);
        st = occupancy(d, fn, c.threads, 0, 1, &resident);
        if (st != RUDNN_STATUS_SUCCESS)
            return st;
        if (resident <= 0)
            return rdg_error(RUDNN_STATUS_DEVICE_ERROR, "%s: %s: no CTA of %d threads fits on the device",
                             RUDNN_GPU_BACKEND_NAME, op_name(op), c.threads);
    }

    /* persistent grid: as many CTAs as can be resident, at most one per row (slice) */
    int64_t grid;
    if (c.csize > 1)
        grid = (int64_t)resident * c.csize; /* resident clusters on the whole device */
    else
        grid = (int64_t)resident * d->sm_count;
    const int64_t need = rdg_ceil_div(plan->rows, c.rows_per_cta) * c.csize;
    /* CTAs of warp rows take one row group each (the hardware scheduler handing out the rest)
     * instead of looping, for F32 rows and 16-bit softmax (warp_rows_grid) */
    if ((c.variant == V_WARP8 || c.variant == V_WARP32) && c.reg && warp_rows_grid(op, plan->dtype))
        grid = need;
    if (grid > need)
        grid = need;
    if (grid > INT_MAX - 8)
        grid = ((int64_t)(INT_MAX - 8) / c.csize) * c.csize;
    if (grid < c.csize)
        grid = c.csize;

    a.csize = c.csize;
    a.slice_vec = c.slice_vec;
    a.prefetch = c.prefetch;
    a.stages = c.stages;
    a.group_threads = c.group_threads;

    /* any error left from an earlier failed call was reported then: start clean, so that the
     * check after the launch sees only this launch */
    (void)cudaGetLastError();
    if (c.csize > 1) {
#if RDG_HOST_CLUSTERS
        cudaLaunchConfig_t cfg = cudaLaunchConfig_t();
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = (unsigned)c.csize;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        cfg.gridDim = dim3((unsigned)grid, 1, 1);
        cfg.blockDim = dim3((unsigned)c.threads, 1, 1);
        cfg.dynamicSmemBytes = c.smem;
        cfg.stream = q->stream;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        err = cudaLaunchKernelEx(&cfg, fn, a);
        if (err == cudaSuccess)
            err = cudaGetLastError();
#else
        return rdg_error(RUDNN_STATUS_INTERNAL, "%s: cluster launch without cluster support", RUDNN_GPU_BACKEND_NAME);
#endif
    } else {
        fn<<<dim3((unsigned)grid), dim3((unsigned)c.threads), c.smem, q->stream>>>(a);
        err = cudaGetLastError();
    }
    if (err != cudaSuccess) {
        char what[160];
        snprintf(what, sizeof what, " kernel launch (%s %s, grid %lld, block %d, cluster %d, smem %zu)",
                 op_name(op), c.reg ? "registers" : "looped", (long long)grid, c.threads, c.csize, c.smem);
        return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, what);
    }
    return RUDNN_STATUS_SUCCESS;
}

NormArgs empty_args()
{
    NormArgs a;
    memset(&a, 0, sizeof a);
    return a;
}

rudnn_status_t k_layer_norm(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t x, rudnn_mem_ref_t gamma,
                            rudnn_mem_ref_t beta, rudnn_mem_ref_t y)
{
    NormArgs a = empty_args();
    a.x = rdg_at(x);
    a.gamma = (const float *)rdg_at(gamma);
    a.beta = (const float *)rdg_at(beta);
    a.y = (void *)rdg_at(y);
    return launch(queue, OP_LN, plan, a);
}

rudnn_status_t k_rms_norm(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t x, rudnn_mem_ref_t gamma,
                          rudnn_mem_ref_t y)
{
    NormArgs a = empty_args();
    a.x = rdg_at(x);
    a.gamma = (const float *)rdg_at(gamma);
    a.y = (void *)rdg_at(y);
    return launch(queue, OP_RMS, plan, a);
}

rudnn_status_t k_softmax(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t x, rudnn_mem_ref_t y)
{
    NormArgs a = empty_args();
    a.x = rdg_at(x);
    a.y = (void *)rdg_at(y);
    return launch(queue, OP_SOFTMAX, plan, a);
}

rudnn_status_t k_add_rms_norm(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t a_in,
                              rudnn_mem_ref_t r, rudnn_mem_ref_t gamma, rudnn_mem_ref_t y, rudnn_mem_ref_t rstd,
                              rudnn_mem_ref_t x_out)
{
    NormArgs a = empty_args();
    a.x = rdg_at(a_in);
    a.r = rdg_at(r);
    a.gamma = (const float *)rdg_at(gamma);
    a.y = (void *)rdg_at(y);
    a.rstd = (float *)rdg_at(rstd);
    a.xout = (void *)rdg_at(x_out);
    return launch(queue, OP_ADD_RMS, plan, a);
}

} // namespace

/* A table inside a host function: a namespace-scope const would be promoted to device memory by
 * HIP's compiler. */
const rudnn_norm_kernels_t *rdg_norm_table(void)
{
    static const rudnn_norm_kernels_t table = {(uint32_t)sizeof(rudnn_norm_kernels_t), k_layer_norm, k_rms_norm, k_softmax, k_add_rms_norm};
    return &table;
}

int rdg_norm_clusters_supported(const cudaDeviceProp *prop)
{
#if RDG_HOST_CLUSTERS
    if (prop->major < 9)
        return 0;
    /* the code the runtime loaded for this device must come from sm_90+ source (clusters compiled
     * in): binaryVersion is the machine code's arch, ptxVersion the virtual arch it came from */
    cudaFuncAttributes attr;
    memset(&attr, 0, sizeof attr);
    if (cudaFuncGetAttributes(&attr, (const void *)norm_reg_kernel<StoreF32, OP_RMS, 16, RED_CLUSTER>) !=
        cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return attr.binaryVersion >= 90 && attr.ptxVersion >= 90;
#else
    (void)prop;
    return 0;
#endif
}
