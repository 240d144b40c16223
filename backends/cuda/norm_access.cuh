/* What every norm kernel reads and writes: its arguments, the storage types (16-byte vector and
 * scalar access, conversions to and from F32), gamma/beta staged in shared memory, the next
 * row's asynchronous copies, and a thread's row values held packed or as F32. */
#ifndef RUDNN_NORM_ACCESS_CUH
#define RUDNN_NORM_ACCESS_CUH

#include "gpu_compat.h"
#include "norm_policy.h"

namespace {

/* the kernels' OP template argument */
enum { OP_LN = RDG_NORM_LAYER_NORM, OP_RMS = RDG_NORM_RMS_NORM, OP_SOFTMAX = RDG_NORM_SOFTMAX,
       OP_ADD_RMS = RDG_NORM_ADD_RMS_NORM };

/* this plugin's backend features (norm_tuning.h) */
constexpr bool kStageAffine = RDG_NORM_BY_BACKEND(RDG_HIP, STAGES_AFFINE);
constexpr bool kPrefetch = RDG_NORM_BY_BACKEND(RDG_HIP, PREFETCHES);
constexpr bool kPacked16 = RDG_NORM_BY_BACKEND(RDG_HIP, PACKS_16BIT);

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

/* ---- gamma and beta ---- */

/* Layout of the staged gamma/beta slice. A thread reads its vector's VEC floats as VEC / 4
 * float4s. Stored in order (PLANAR false), a 16-bit row's vector (VEC = 8) spans 32 bytes, so
 * the 8 threads of one LDS.128 phase span 256 bytes: a 2-way bank conflict on every load.
 * PLANAR stores float4 p of vector v at p * slice_vec + v instead: a 16-byte stride, no
 * conflict. Taken where it measured faster (the pair kernel; the bulk kernel was written with
 * it); the one-row 16-bit kernels measured the same or up to 2% slower (tenth session). */
template <int VEC, bool PLANAR>
__device__ __forceinline__ void stage_affine(float *sm, const float *src, int n4, int slice_vec)
{
    /* n4 float4s of the slice from src; zeros when src is null (a missing beta) */
    for (int k = threadIdx.x; k < n4; k += blockDim.x)
        ((float4 *)sm)[PLANAR ? (k % (VEC / 4)) * slice_vec + k / (VEC / 4) : k] =
            src ? ((const float4 *)src)[k] : make_float4(0.f, 0.f, 0.f, 0.f);
}

/* VEC floats of gamma or beta of slice vector vi: from the staged copy in shared memory, or from
 * global memory through the read-only path (ops/norm.c rejects outputs that overlap gamma and
 * beta, so these loads may go ahead of the stores of earlier vectors). */
template <int VEC, bool STAGED, bool PLANAR = false>
__device__ __forceinline__ void load_affine(const float *sm, const float *gl, int vi, int slice_vec,
                                            float (&out)[VEC])
{
#pragma unroll
    for (int k = 0; k < VEC; k += 4) {
        const int c = vi * VEC + k;
        float4 g = STAGED ? (PLANAR ? ((const float4 *)sm)[(k / 4) * slice_vec + vi] : *(const float4 *)(sm + c))
                          : __ldg((const float4 *)(gl + c));
        out[k] = g.x;
        out[k + 1] = g.y;
        out[k + 2] = g.z;
        out[k + 3] = g.w;
    }
}

/* ---- a thread's row values ---- */

/* Asynchronous copies of this thread's vectors lane + i * gsize (i < NV, < count) of the slice
 * starting at vector base into buf (same vector index); L1: through L1 (cp.async.ca). */
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

} // namespace

#endif
