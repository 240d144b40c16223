/* Grid sampling on CUDA and HIP: the table of backends/hal/grid_sample.h, a port of
 * backends/opencl/kernels/grid_sample.cl (the spec; include/rudnn/grid_sample.h has the contract,
 * ops/grid_sample.c validates the plan). FP32 coordinates, weights and sums; x, grid, y (dy, dx,
 * dgrid) of the plan's dtype through Elem<DT>. A point is (n, d, h, w) of the grid; each spatial dim
 * gives up to 4 taps (index, weight, d weight / d coordinate), a point's taps are their product (at
 * most 16). The kernels are templates of dtype, mode and spatial dims, so that a point's taps are
 * unrolled into registers.
 *   forward_kernel   a thread per point and chunk of channels (blockIdx.y): its taps, then each
 *                    channel of the chunk (one sum per y element: any split is deterministic)
 *   dgrid_kernel     a thread per point: the sum over channels (in order) and taps of dy x d(weight)
 *   dx, deterministically, by a counting sort of the (point, tap) pairs by the x element they read,
 *   in the workspace (uint32 each): counts [E + 1], cursors [E], chunk sums [nb], entries [pairs]:
 *   pairs_kernel     COUNT: counts[element]++ per tap (integer atomics: the counts do not depend on
 *                    the order); FILL: each pair into its element's list, in any order
 *   scan_*           counts -> exclusive prefix sums, counts[E] the total: chunk sums, their scan in
 *                    one block, each chunk's scan from its base
 *   sort_kernel      a thread per element: its list sorted by pair id = point * GS_TAPS + tap
 *   gather_kernel    a thread per element and group of GATHER_CH channels (blockIdx.y): per channel
 *                    the sum over the element's list in order
 * The dx path has the OpenCL backend's limits (uint32 ids): points below 2^28, N D H W below 2^31;
 * beyond them the workspace query answers NOT_SUPPORTED. Every launch is asynchronous on the
 * queue's stream (no host synchronisation: graph-capturable). */
#include <string.h>

#include "rdg_internal.h"
#include "elem.cuh"

namespace {

constexpr int GS_THREADS = 256;
constexpr int64_t GS_MAX_BLOCKS = (int64_t)1 << 20; /* more items: grid-stride loops */
constexpr uint32_t GS_TAPS = 16;                     /* a pair's id: point * GS_TAPS + tap */
constexpr int SCAN_THREADS = 256;
constexpr int SCAN_ITEMS = 16;
constexpr int64_t SCAN_CHUNK = (int64_t)SCAN_THREADS * SCAN_ITEMS; /* counts a chunk sum covers */
constexpr int PART_THREADS = 1024;
constexpr int GATHER_CH = 4;                    /* channels a gather thread sums (one walk of the list) */
constexpr uint32_t SORT_INSERTION_MAX = 32;     /* longer lists: heap sort (collisions make thousands) */
constexpr int64_t FORWARD_THREADS_PER_SM = 2048; /* the forward splits channels until the device is full */
constexpr float CUBIC_A = -0.75f;

enum {
    BILINEAR = RUDNN_GRID_SAMPLE_BILINEAR,
    NEAREST = RUDNN_GRID_SAMPLE_NEAREST,
    BICUBIC = RUDNN_GRID_SAMPLE_BICUBIC,
};
enum {
    PAD_ZEROS = RUDNN_GRID_SAMPLE_ZEROS,
    PAD_BORDER = RUDNN_GRID_SAMPLE_BORDER,
    PAD_REFLECTION = RUDNN_GRID_SAMPLE_REFLECTION,
};

__host__ __device__ constexpr int taps_per_dim(int mode)
{
    return mode == BICUBIC ? 4 : mode == NEAREST ? 1 : 2;
}

__host__ __device__ inline int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* The plan's shape as the kernels read it (by value, per launch). */
struct GsShape {
    int64_t C;
    int64_t S[3], P[3]; /* D, H, W of x and of the grid's points (2D: D = 1) */
    int64_t points;     /* N P0 P1 P2 */
    int64_t np, ns;     /* points, x positions of one batch row */
    int padding, align;
};

/* Strides in elements: x-like [n, c, d, h, w]; grid-like [n, d, h, w, coordinate]. */
struct Strides {
    int64_t s[5];
};

/* ---- index math ---- */

/* a / b for a, b >= 0: the 32-bit division where both fit (most shapes) */
__device__ __forceinline__ int64_t quot(int64_t a, int64_t b)
{
    return ((a | b) >> 32) == 0 ? (int64_t)((uint32_t)a / (uint32_t)b) : a / b;
}

/* Position i of a box [., B1, B2] as (a0, a1, a2), the last fastest. */
__device__ __forceinline__ void box_at(int64_t i, int64_t B1, int64_t B2, int64_t &a0, int64_t &a1, int64_t &a2)
{
    const int64_t q = quot(i, B2);
    a2 = i - q * B2;
    a0 = quot(q, B1);
    a1 = q - a0 * B1;
}

/* The same for positions below 2^32 (the dx path: elements below 2^31, points below 2^28): no
 * 64-bit division in its kernels. */
__device__ __forceinline__ void box_at32(uint32_t i, uint32_t B1, uint32_t B2, int64_t &a0, int64_t &a1, int64_t &a2)
{
    const uint32_t q = i / B2, q1 = q / B1;
    a2 = i - q * B2;
    a1 = q - q1 * B1;
    a0 = q1;
}

/* ---- coordinates (grid_sample.cl's gs_* functions, operation for operation) ---- */

/* std::max(v, 0) then std::min(S - 1, .), as PyTorch writes them (a NaN becomes S - 1) */
__device__ __forceinline__ float clip_coord(float v, int64_t S)
{
    const float m = v < 0.0f ? 0.0f : v;
    return m < (float)(S - 1) ? m : (float)(S - 1);
}

/* Whether the reflection's flip count floor(in / span) (in >= 0) is odd, read from the float: a
 * count past the int range (every float there is even) or NaN counts as even, as the OpenCL
 * kernel's (int) conversion gives on x86 (INT_MIN) and the reference assumes. */
__device__ __forceinline__ bool odd_flips(float in, float span)
{
    const float half = floorf(in / span) * 0.5f;
    return half - floorf(half) == 0.5f;
}

__device__ __forceinline__ float reflect_coord(float in, float twice_low, float twice_high)
{
    if (twice_low == twice_high)
        return 0.0f;
    const float mn = twice_low / 2.0f, span = (twice_high - twice_low) / 2.0f;
    in = fabsf(in - mn);
    const float extra = fmodf(in, span);
    return odd_flips(in, span) ? span - extra + mn : extra + mn;
}

/* PyTorch's safe_downgrade_to_int_range: what cannot become an index reads as -100 (2^31 is
 * (float)INT_MAX - 1.0f, -2^31 is (float)INT_MIN) */
__device__ __forceinline__ float safe_coord(float c)
{
    return (!isfinite(c) || c > 2147483648.0f || c < -2147483648.0f) ? -100.0f : c;
}

/* The grid coordinate g unnormalized over S inputs. Never contracted into an FMA: the coordinate
 * is part of the contract (one FP32 rounding per operation, as the reference). */
__device__ __forceinline__ float unnormalize(float g, int64_t S, int align)
{
#if RDG_HIP
#pragma clang fp contract(off)
#endif
    const float g1 = __fadd_rn(g, 1.0f);
    return align ? __fmul_rn(g1 / 2.0f, (float)(S - 1)) : __fsub_rn(__fmul_rn(g1, (float)S), 1.0f) / 2.0f;
}

/* The padding mode applied to coordinate c (bilinear and nearest: the unnormalized coordinate;
 * bicubic: each tap's). */
__device__ __forceinline__ float pad_coord(float c, int64_t S, int padding, int align)
{
    if (padding == PAD_BORDER) {
        c = clip_coord(c, S);
    } else if (padding == PAD_REFLECTION) {
        c = align ? reflect_coord(c, 0.0f, 2.0f * (float)(S - 1)) : reflect_coord(c, -1.0f, 2.0f * (float)S - 1.0f);
        c = clip_coord(c, S);
    }
    return safe_coord(c);
}

/* d(padded coordinate) / d(unnormalized one), as PyTorch's *_set_grad functions (0 at and past a
 * clipped border; the reflections' sign). */
__device__ __forceinline__ float pad_slope(float c, int64_t S, int padding, int align)
{
    if (padding == PAD_ZEROS)
        return 1.0f;
    float m = 1.0f;
    if (padding == PAD_REFLECTION) {
        const float lo = align ? 0.0f : -1.0f, hi = align ? 2.0f * (float)(S - 1) : 2.0f * (float)S - 1.0f;
        if (lo == hi)
            return 0.0f;
        const float mn = lo / 2.0f, span = (hi - lo) / 2.0f;
        float in = c - mn;
        if (in < 0.0f) {
            m = -1.0f;
            in = -in;
        }
        const float extra = fmodf(in, span);
        const bool odd = odd_flips(in, span);
        c = odd ? span - extra + mn : extra + mn;
        if (odd)
            m = -m;
    }
    if (c <= 0.0f || c >= (float)(S - 1))
        return 0.0f;
    return m;
}

/* Keys' cubic convolution for |x| <= 1 and 1 < |x| < 2, and their derivatives */
__device__ __forceinline__ float cubic1(float x)
{
    return ((CUBIC_A + 2.0f) * x - (CUBIC_A + 3.0f)) * x * x + 1.0f;
}
__device__ __forceinline__ float cubic2(float x)
{
    return ((CUBIC_A * x - 5.0f * CUBIC_A) * x + 8.0f * CUBIC_A) * x - 4.0f * CUBIC_A;
}
__device__ __forceinline__ float cubic1_d(float x)
{
    return (3.0f * (CUBIC_A + 2.0f) * x - 2.0f * (CUBIC_A + 3.0f)) * x;
}
__device__ __forceinline__ float cubic2_d(float x)
{
    return (3.0f * CUBIC_A * x - 10.0f * CUBIC_A) * x + 8.0f * CUBIC_A;
}

/* One dim's taps: indices (-1: outside x, reads nothing), weights, and the weights' derivatives
 * with respect to the grid coordinate (the unnormalization's slope folded in). */
template <int MODE>
struct DimTaps {
    static constexpr int K = taps_per_dim(MODE);
    int64_t idx[K];
    float w[K], dw[K];
};

__device__ __forceinline__ int64_t inside(int64_t i, int64_t S)
{
    return i >= 0 && i < S ? i : -1;
}

template <int MODE>
__device__ __forceinline__ void dim_taps(float g, int64_t S, int padding, int align, DimTaps<MODE> &t)
{
    const float u = unnormalize(g, S, align);
    const float unslope = align ? (float)(S - 1) / 2.0f : (float)S / 2.0f;
    if constexpr (MODE == BICUBIC) {
        const float fl = floorf(u), f = u - fl;
        t.w[0] = cubic2(f + 1.0f), t.w[1] = cubic1(f), t.w[2] = cubic1(1.0f - f), t.w[3] = cubic2(2.0f - f);
        t.dw[0] = cubic2_d(f + 1.0f) * unslope, t.dw[1] = cubic1_d(f) * unslope;
        t.dw[2] = -cubic1_d(1.0f - f) * unslope, t.dw[3] = -cubic2_d(2.0f - f) * unslope;
#pragma unroll
        for (int k = 0; k < 4; k++) /* a padded coordinate is integral or -100: its index */
            t.idx[k] = inside((int64_t)pad_coord(fl - 1.0f + (float)k, S, padding, align), S);
    } else if constexpr (MODE == NEAREST) {
        (void)unslope;
        t.idx[0] = inside((int64_t)rintf(pad_coord(u, S, padding, align)), S); /* half to even */
        t.w[0] = 1.0f, t.dw[0] = 0.0f;
    } else {
        const float i = pad_coord(u, S, padding, align);
        const float fl = floorf(i), f = i - fl;
        const int64_t i0 = (int64_t)fl;
        const float slope = unslope * pad_slope(u, S, padding, align);
        t.idx[0] = inside(i0, S), t.idx[1] = inside(i0 + 1, S);
        t.w[0] = 1.0f - f, t.w[1] = f;
        t.dw[0] = -slope, t.dw[1] = slope;
    }
}

/* Weight k of one dim alone (the gather's): the same operations as dim_taps. */
template <int MODE>
__device__ __forceinline__ float dim_weight(float g, int64_t S, int padding, int align, int k)
{
    if constexpr (MODE == NEAREST) {
        (void)g, (void)S, (void)padding, (void)align, (void)k;
        return 1.0f;
    } else if constexpr (MODE == BICUBIC) {
        (void)padding;
        const float u = unnormalize(g, S, align);
        const float f = u - floorf(u);
        return k == 0 ? cubic2(f + 1.0f) : k == 1 ? cubic1(f) : k == 2 ? cubic1(1.0f - f) : cubic2(2.0f - f);
    } else {
        const float i = pad_coord(unnormalize(g, S, align), S, padding, align);
        const float f = i - floorf(i);
        return k == 0 ? 1.0f - f : f;
    }
}

/* A point's taps per dim; 2D has one D tap (index 0, weight 1, derivative 0). A tap of the point
 * is (a, b, e) over (D, H, W), numbered (a K + b) K + e. */
template <int MODE, int SP>
struct PointTaps {
    DimTaps<SP == 3 ? MODE : NEAREST> d;
    DimTaps<MODE> h, w;
};

template <int DT, int MODE, int SP>
__device__ __forceinline__ void point_taps(const void *grid, const Strides &gs, const GsShape &s, int64_t n,
                                           int64_t p0, int64_t p1, int64_t p2, PointTaps<MODE, SP> &t)
{
    const int64_t base = n * gs.s[0] + p0 * gs.s[1] + p1 * gs.s[2] + p2 * gs.s[3];
    /* coordinate 0 runs along W, 1 along H, 2 along D */
    dim_taps<MODE>(Elem<DT>::ld(grid, base), s.S[2], s.padding, s.align, t.w);
    dim_taps<MODE>(Elem<DT>::ld(grid, base + gs.s[4]), s.S[1], s.padding, s.align, t.h);
    if constexpr (SP == 3)
        dim_taps<MODE>(Elem<DT>::ld(grid, base + 2 * gs.s[4]), s.S[0], s.padding, s.align, t.d);
    else
        t.d.idx[0] = 0, t.d.w[0] = 1.0f, t.d.dw[0] = 0.0f;
}

/* A point's per-dim offsets into x (a tap's is their sum) and whether each index is inside x. */
template <int MODE, int SP>
struct TapOffsets {
    static constexpr int K = taps_per_dim(MODE), KD = SP == 3 ? K : 1;
    int64_t d[KD], h[K], w[K];
    bool in_d[KD], in_h[K], in_w[K];
};

template <int MODE, int SP>
__device__ __forceinline__ void tap_offsets(const PointTaps<MODE, SP> &t, const Strides &xs, TapOffsets<MODE, SP> &o)
{
#pragma unroll
    for (int a = 0; a < o.KD; a++)
        o.d[a] = t.d.idx[a] * xs.s[2], o.in_d[a] = t.d.idx[a] >= 0;
#pragma unroll
    for (int b = 0; b < o.K; b++)
        o.h[b] = t.h.idx[b] * xs.s[3], o.in_h[b] = t.h.idx[b] >= 0;
#pragma unroll
    for (int e = 0; e < o.K; e++)
        o.w[e] = t.w.idx[e] * xs.s[4], o.in_w[e] = t.w.idx[e] >= 0;
}

/* ---- forward and dgrid ---- */

template <int DT, int MODE, int SP>
__global__ void RDG_LAUNCH_BOUNDS(GS_THREADS, 1)
forward_kernel(const void *__restrict__ x, const void *__restrict__ grid, void *__restrict__ y, GsShape s,
               Strides xs, Strides gs, Strides ys, int64_t ch_chunk)
{
    constexpr int K = taps_per_dim(MODE), KD = SP == 3 ? K : 1, T = KD * K * K;
    const int64_t c_lo = (int64_t)blockIdx.y * ch_chunk, c_hi = min64(s.C, c_lo + ch_chunk);
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; id < s.points; id += step) {
        const int64_t n = quot(id, s.np);
        int64_t p0, p1, p2;
        box_at(id - n * s.np, s.P[1], s.P[2], p0, p1, p2);
        PointTaps<MODE, SP> t;
        point_taps<DT>(grid, gs, s, n, p0, p1, p2, t);
        TapOffsets<MODE, SP> o;
        tap_offsets(t, xs, o);
        float wt[T]; /* (w_d w_h) w_w, the OpenCL kernel's product order */
#pragma unroll
        for (int a = 0; a < KD; a++)
#pragma unroll
            for (int b = 0; b < K; b++)
#pragma unroll
                for (int e = 0; e < K; e++)
                    wt[(a * K + b) * K + e] = t.d.w[a] * t.h.w[b] * t.w.w[e];
        const int64_t yb = n * ys.s[0] + p0 * ys.s[2] + p1 * ys.s[3] + p2 * ys.s[4];
        for (int64_t ch = c_lo; ch < c_hi; ch++) {
            const int64_t xb = n * xs.s[0] + ch * xs.s[1];
            float acc = 0.0f;
#pragma unroll
            for (int a = 0; a < KD; a++)
#pragma unroll
                for (int b = 0; b < K; b++)
#pragma unroll
                    for (int e = 0; e < K; e++) {
                        /* outside x: bilinear and nearest skip the tap; bicubic reads 0 and multiplies
                         * it, as PyTorch's (a NaN weight then gives NaN) */
                        const bool in = o.in_d[a] && o.in_h[b] && o.in_w[e];
                        const float wk = wt[(a * K + b) * K + e];
                        if constexpr (MODE == BICUBIC)
                            acc += wk * (in ? Elem<DT>::ld(x, xb + o.d[a] + o.h[b] + o.w[e]) : 0.0f);
                        else if (in)
                            acc += wk * Elem<DT>::ld(x, xb + o.d[a] + o.h[b] + o.w[e]);
                    }
            Elem<DT>::st(y, yb + ch * ys.s[1], acc);
        }
    }
}

template <int DT, int MODE, int SP>
__global__ void RDG_LAUNCH_BOUNDS(GS_THREADS, 1)
dgrid_kernel(const void *__restrict__ x, const void *__restrict__ grid, const void *__restrict__ dy,
             void *__restrict__ dgrid, GsShape s, Strides xs, Strides gs, Strides ys, Strides dgs)
{
    constexpr int K = taps_per_dim(MODE), KD = SP == 3 ? K : 1, T = KD * K * K;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; id < s.points; id += step) {
        const int64_t n = quot(id, s.np);
        int64_t p0, p1, p2;
        box_at(id - n * s.np, s.P[1], s.P[2], p0, p1, p2);
        PointTaps<MODE, SP> t;
        point_taps<DT>(grid, gs, s, n, p0, p1, p2, t);
        TapOffsets<MODE, SP> o;
        tap_offsets(t, xs, o);
        /* d(weight) / d coordinate along D (3D only), H, W per tap, in the OpenCL kernel's order */
        float c0[SP == 3 ? T : 1], c1[T], c2[T];
#pragma unroll
        for (int a = 0; a < KD; a++)
#pragma unroll
            for (int b = 0; b < K; b++)
#pragma unroll
                for (int e = 0; e < K; e++) {
                    const int k = (a * K + b) * K + e;
                    if constexpr (SP == 3)
                        c0[k] = t.d.dw[a] * t.h.w[b] * t.w.w[e];
                    c1[k] = t.d.w[a] * t.h.dw[b] * t.w.w[e];
                    c2[k] = t.d.w[a] * t.h.w[b] * t.w.dw[e];
                }
        const int64_t yb = n * ys.s[0] + p0 * ys.s[2] + p1 * ys.s[3] + p2 * ys.s[4];
        float g0 = 0.0f, g1 = 0.0f, g2 = 0.0f;
        for (int64_t ch = 0; ch < s.C; ch++) {
            const int64_t xb = n * xs.s[0] + ch * xs.s[1];
            const float gy = Elem<DT>::ld(dy, yb + ch * ys.s[1]);
#pragma unroll
            for (int a = 0; a < KD; a++)
#pragma unroll
                for (int b = 0; b < K; b++)
#pragma unroll
                    for (int e = 0; e < K; e++) {
                        const int k = (a * K + b) * K + e;
                        const bool in = o.in_d[a] && o.in_h[b] && o.in_w[e];
                        if (MODE != BICUBIC && !in) /* as the forward */
                            continue;
                        const float v = gy * (in ? Elem<DT>::ld(x, xb + o.d[a] + o.h[b] + o.w[e]) : 0.0f);
                        if constexpr (SP == 3)
                            g0 += c0[k] * v;
                        g1 += c1[k] * v;
                        g2 += c2[k] * v;
                    }
        }
        const int64_t out = n * dgs.s[0] + p0 * dgs.s[1] + p1 * dgs.s[2] + p2 * dgs.s[3];
        Elem<DT>::st(dgrid, out, g2);
        Elem<DT>::st(dgrid, out + dgs.s[4], g1);
        if constexpr (SP == 3)
            Elem<DT>::st(dgrid, out + 2 * dgs.s[4], g0);
    }
}

/* ---- dx: the counting sort ---- */

/* COUNT (FILL false): counts[element]++ per tap inside x. FILL: each pair into its element's list at
 * offsets[element] + the element's cursor (counts holds the offsets by then). The element is the
 * x position within all of x's N D H W. */
template <int DT, int MODE, int SP, bool FILL>
__global__ void RDG_LAUNCH_BOUNDS(GS_THREADS, 1)
pairs_kernel(const void *__restrict__ grid, GsShape s, Strides gs, uint32_t *counts, uint32_t *cursors,
             uint32_t *entries)
{
    constexpr int K = taps_per_dim(MODE), KD = SP == 3 ? K : 1;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; id < s.points; id += step) {
        const uint32_t n = (uint32_t)id / (uint32_t)s.np; /* points below 2^28 here */
        int64_t p0, p1, p2;
        box_at32((uint32_t)id - n * (uint32_t)s.np, (uint32_t)s.P[1], (uint32_t)s.P[2], p0, p1, p2);
        PointTaps<MODE, SP> t;
        point_taps<DT>(grid, gs, s, n, p0, p1, p2, t);
#pragma unroll
        for (int a = 0; a < KD; a++)
#pragma unroll
            for (int b = 0; b < K; b++)
#pragma unroll
                for (int e = 0; e < K; e++) {
                    if (t.d.idx[a] < 0 || t.h.idx[b] < 0 || t.w.idx[e] < 0)
                        continue;
                    const int64_t el = (((int64_t)n * s.S[0] + t.d.idx[a]) * s.S[1] + t.h.idx[b]) * s.S[2] + t.w.idx[e];
                    if constexpr (FILL)
                        entries[counts[el] + atomicAdd(&cursors[el], 1u)] =
                            (uint32_t)id * GS_TAPS + (uint32_t)((a * K + b) * K + e);
                    else
                        atomicAdd(&counts[el], 1u);
                }
    }
}

/* Exclusive scan of one value per thread over the block (blockDim.x a multiple of the warp, every
 * thread calls it): the xor butterfly gives each lane its inclusive prefix in the warp, the warps'
 * sums go through shared memory. *total: the block's sum. Ends with a barrier, so that scratch can
 * be used again at once. */
__device__ uint32_t block_exclusive_scan(uint32_t v, uint32_t *scratch, uint32_t *total)
{
    const int lane = threadIdx.x % RDG_WARP, warp = threadIdx.x / RDG_WARP, warps = blockDim.x / RDG_WARP;
    uint32_t incl = v, sum = v;
#pragma unroll
    for (int m = 1; m < RDG_WARP; m <<= 1) {
        const uint32_t other = RDG_SHFL_XOR(sum, m);
        if (lane & m)
            incl += other;
        sum += other;
    }
    if (lane == 0)
        scratch[warp] = sum;
    __syncthreads();
    uint32_t before = 0, all = 0;
    for (int w = 0; w < warps; w++) {
        const uint32_t ws = scratch[w];
        before += w < warp ? ws : 0u;
        all += ws;
    }
    __syncthreads();
    *total = all;
    return before + incl - v;
}

/* parts[b] = the sum of counts over chunk b (SCAN_CHUNK counts) */
__global__ void RDG_LAUNCH_BOUNDS(SCAN_THREADS, 1)
scan_reduce_kernel(const uint32_t *__restrict__ counts, int64_t E, uint32_t *__restrict__ parts)
{
    __shared__ uint32_t scratch[RDG_MAX_WARPS];
    const int64_t lo = (int64_t)blockIdx.x * SCAN_CHUNK, hi = min64(E, lo + SCAN_CHUNK);
    uint32_t sum = 0u;
    for (int64_t i = lo + threadIdx.x; i < hi; i += SCAN_THREADS)
        sum += counts[i];
    uint32_t total;
    block_exclusive_scan(sum, scratch, &total);
    if (threadIdx.x == 0)
        parts[blockIdx.x] = total;
}

/* One block: parts [nb] become their exclusive prefix sums, *total their sum (counts[E]). */
__global__ void RDG_LAUNCH_BOUNDS(PART_THREADS, 1)
scan_parts_kernel(uint32_t *__restrict__ parts, int64_t nb, uint32_t *__restrict__ total)
{
    __shared__ uint32_t scratch[RDG_MAX_WARPS];
    uint32_t carry = 0u;
    for (int64_t base = 0; base < nb; base += PART_THREADS) {
        const int64_t i = base + threadIdx.x;
        uint32_t tile;
        const uint32_t excl = block_exclusive_scan(i < nb ? parts[i] : 0u, scratch, &tile);
        if (i < nb)
            parts[i] = carry + excl;
        carry += tile;
    }
    if (threadIdx.x == 0)
        *total = carry;
}

/* Chunk b's counts become their exclusive prefix sums from parts[b]. */
__global__ void RDG_LAUNCH_BOUNDS(SCAN_THREADS, 1)
scan_apply_kernel(uint32_t *__restrict__ counts, int64_t E, const uint32_t *__restrict__ parts)
{
    __shared__ uint32_t scratch[RDG_MAX_WARPS];
    const int64_t lo = (int64_t)blockIdx.x * SCAN_CHUNK;
    uint32_t carry = parts[blockIdx.x];
    for (int it = 0; it < SCAN_ITEMS; it++) {
        const int64_t base = lo + (int64_t)it * SCAN_THREADS;
        if (base >= E) /* the same for the whole block */
            break;
        const int64_t i = base + threadIdx.x;
        uint32_t tile;
        const uint32_t excl = block_exclusive_scan(i < E ? counts[i] : 0u, scratch, &tile);
        if (i < E)
            counts[i] = carry + excl;
        carry += tile;
    }
}

__device__ void insertion_sort(uint32_t *a, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) {
        const uint32_t v = a[i];
        uint32_t j = i;
        while (j > 0 && a[j - 1] > v) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = v;
    }
}

__device__ void sift_down(uint32_t *a, uint64_t root, uint64_t n)
{
    const uint32_t v = a[root];
    for (;;) {
        uint64_t child = 2 * root + 1;
        if (child >= n)
            break;
        if (child + 1 < n && a[child + 1] > a[child])
            child++;
        if (a[child] <= v)
            break;
        a[root] = a[child];
        root = child;
    }
    a[root] = v;
}

__device__ void heap_sort(uint32_t *a, uint32_t n)
{
    for (uint32_t i = n / 2; i-- > 0;)
        sift_down(a, i, n);
    for (uint32_t end = n - 1; end > 0; end--) {
        const uint32_t top = a[0];
        a[0] = a[end];
        a[end] = top;
        sift_down(a, 0, end);
    }
}

/* Each element's list sorted by pair id (unique ids: one order whatever the fill's). */
__global__ void RDG_LAUNCH_BOUNDS(GS_THREADS, 1)
sort_kernel(const uint32_t *__restrict__ offsets, uint32_t *__restrict__ entries, int64_t E)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t el = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; el < E; el += step) {
        const uint32_t lo = offsets[el], n = offsets[el + 1] - lo;
        if (n <= SORT_INSERTION_MAX)
            insertion_sort(entries + lo, n);
        else
            heap_sort(entries + lo, n);
    }
}

/* dx at (n, channels ch0 .. ch0 + GATHER_CH, x position si): the sum over the element's sorted
 * list of weight x dy, a sum per channel in list order (the OpenCL kernel's). Threads run over the
 * elements (E below 2^31, points below 2^28: 32-bit index math), blockIdx.y over channel groups. */
template <int DT, int MODE, int SP>
__global__ void RDG_LAUNCH_BOUNDS(GS_THREADS, 1)
gather_kernel(const void *__restrict__ grid, const void *__restrict__ dy, const uint32_t *__restrict__ offsets,
              const uint32_t *__restrict__ entries, void *__restrict__ dx, GsShape s, Strides gs, Strides ys,
              Strides dxs, int64_t E, int64_t groups)
{
    constexpr int K = taps_per_dim(MODE);
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    const uint32_t ns = (uint32_t)s.ns, np = (uint32_t)s.np;
    for (int64_t g = blockIdx.y; g < groups; g += gridDim.y) {
        const int64_t ch0 = g * GATHER_CH;
        for (int64_t el = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; el < E; el += step) {
            const uint32_t n = (uint32_t)el / ns, si = (uint32_t)el - n * ns;
            float acc[GATHER_CH];
#pragma unroll
            for (int j = 0; j < GATHER_CH; j++)
                acc[j] = 0.0f;
            const uint32_t hi = offsets[el + 1];
            for (uint32_t k = offsets[el]; k < hi; k++) {
                const uint32_t pair = entries[k], tap = pair % GS_TAPS;
                int64_t p0, p1, p2; /* the point is of batch row n, as its element */
                box_at32(pair / GS_TAPS - n * np, (uint32_t)s.P[1], (uint32_t)s.P[2], p0, p1, p2);
                const int e = (int)(tap % K), b = (int)(tap / K % K), a = (int)(tap / (K * K));
                const int64_t gb = n * gs.s[0] + p0 * gs.s[1] + p1 * gs.s[2] + p2 * gs.s[3];
                /* (w_d w_h) w_w, then times dy: the OpenCL kernel's product order */
                float w = 1.0f;
                if constexpr (SP == 3)
                    w = dim_weight<MODE>(Elem<DT>::ld(grid, gb + 2 * gs.s[4]), s.S[0], s.padding, s.align, a);
                else
                    (void)a;
                w = w * dim_weight<MODE>(Elem<DT>::ld(grid, gb + gs.s[4]), s.S[1], s.padding, s.align, b);
                w = w * dim_weight<MODE>(Elem<DT>::ld(grid, gb), s.S[2], s.padding, s.align, e);
                const int64_t yb = n * ys.s[0] + p0 * ys.s[2] + p1 * ys.s[3] + p2 * ys.s[4];
#pragma unroll
                for (int j = 0; j < GATHER_CH; j++)
                    if (ch0 + j < s.C)
                        acc[j] += w * Elem<DT>::ld(dy, yb + (ch0 + j) * ys.s[1]);
            }
            int64_t q0, q1, q2;
            box_at32(si, (uint32_t)s.S[1], (uint32_t)s.S[2], q0, q1, q2);
            const int64_t xb = n * dxs.s[0] + q0 * dxs.s[2] + q1 * dxs.s[3] + q2 * dxs.s[4];
#pragma unroll
            for (int j = 0; j < GATHER_CH; j++)
                if (ch0 + j < s.C)
                    Elem<DT>::st(dx, xb + (ch0 + j) * dxs.s[1], acc[j]);
        }
    }
}

/* ---- host ---- */

uint64_t points_of(const rudnn_grid_sample_plan_t *p)
{
    return (uint64_t)p->batch * (uint64_t)p->out_size[0] * (uint64_t)p->out_size[1] * (uint64_t)p->out_size[2];
}

uint64_t elements_of(const rudnn_grid_sample_plan_t *p)
{
    return (uint64_t)p->batch * (uint64_t)p->in_size[0] * (uint64_t)p->in_size[1] * (uint64_t)p->in_size[2];
}

uint64_t taps_of(const rudnn_grid_sample_plan_t *p)
{
    const uint64_t k = (uint64_t)taps_per_dim((int)p->mode);
    return k * k * (p->spatial == 3 ? k : 1);
}

GsShape shape_of(const rudnn_grid_sample_plan_t *p)
{
    GsShape s;
    memset(&s, 0, sizeof s);
    s.C = p->channels;
    for (int i = 0; i < 3; i++)
        s.S[i] = p->in_size[i], s.P[i] = p->out_size[i];
    s.np = p->out_size[0] * p->out_size[1] * p->out_size[2];
    s.ns = p->in_size[0] * p->in_size[1] * p->in_size[2];
    s.points = p->batch * s.np;
    s.padding = (int)p->padding;
    s.align = p->align_corners != 0;
    return s;
}

Strides strides_of(const int64_t *st)
{
    Strides s;
    for (int i = 0; i < 5; i++)
        s.s[i] = st[i];
    return s;
}

unsigned blocks_for(int64_t items)
{
    return (unsigned)min64(rdg_ceil_div(items, GS_THREADS), GS_MAX_BLOCKS);
}

/* The dx sort's ids are uint32: pairs below 2^32 (points below 2^28), elements below 2^31. */
rudnn_status_t check_dx_limits(const rudnn_grid_sample_plan_t *p)
{
    if (points_of(p) * GS_TAPS >= ((uint64_t)1 << 32) || elements_of(p) >= ((uint64_t)1 << 31))
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "grid_sample: the backward's dx sorts %llu points (2^28 at most) "
                         "over %llu x positions (2^31 at most) on this backend", (unsigned long long)points_of(p),
                         (unsigned long long)elements_of(p));
    return RUDNN_STATUS_SUCCESS;
}

/* The workspace in uint32s: counts [E + 1], cursors [E], chunk sums [nb], entries [pairs]. */
struct DxLayout {
    uint32_t *counts, *cursors, *parts, *entries;
    int64_t E, nb;
};

DxLayout dx_layout(const rudnn_grid_sample_plan_t *p, void *base)
{
    DxLayout l;
    l.E = (int64_t)elements_of(p);
    l.nb = rdg_ceil_div(l.E, SCAN_CHUNK);
    l.counts = (uint32_t *)base;
    l.cursors = l.counts ? l.counts + l.E + 1 : nullptr;
    l.parts = l.counts ? l.cursors + l.E : nullptr;
    l.entries = l.counts ? l.parts + l.nb : nullptr;
    return l;
}

rudnn_status_t gs_backward_workspace(void *device, const rudnn_grid_sample_plan_t *p, size_t *bytes)
{
    (void)device;
    *bytes = 0;
    if (!p->has_dx)
        return RUDNN_STATUS_SUCCESS;
    TRY(check_dx_limits(p));
    const DxLayout l = dx_layout(p, nullptr);
    const uint64_t uints = 2 * (uint64_t)l.E + 1 + (uint64_t)l.nb + points_of(p) * taps_of(p);
    *bytes = (size_t)((uints * 4 + 255) / 256 * 256);
    return RUDNN_STATUS_SUCCESS;
}

template <int DT, int MODE, int SP>
rudnn_status_t forward_typed(rdg_queue_t *q, const rudnn_grid_sample_plan_t *p, const rudnn_grid_sample_operands_t *o)
{
    const GsShape s = shape_of(p);
    if (s.points == 0 || s.C == 0)
        return RUDNN_STATUS_SUCCESS;
    /* few points: channel chunks over blockIdx.y, until the device has its threads */
    const int64_t want = (int64_t)(q->dev.sm_count > 0 ? q->dev.sm_count : 1) * FORWARD_THREADS_PER_SM;
    int64_t chunks = s.points < want ? min64(min64(s.C, rdg_ceil_div(want, s.points)), 65535) : 1;
    const int64_t ch_chunk = rdg_ceil_div(s.C, chunks);
    chunks = rdg_ceil_div(s.C, ch_chunk);
    rdg_note_kernel("grid_sample.forward");
    forward_kernel<DT, MODE, SP><<<dim3(blocks_for(s.points), (unsigned)chunks), dim3(GS_THREADS), 0, q->stream>>>(
        rdg_at(o->x), rdg_at(o->grid), rdg_at(o->y), s, strides_of(p->x_stride), strides_of(p->grid_stride),
        strides_of(p->y_stride), ch_chunk);
    return rdg_launched("grid_sample.forward");
}

template <int DT, int MODE, int SP>
rudnn_status_t backward_typed(rdg_queue_t *q, const rudnn_grid_sample_plan_t *p,
                              const rudnn_grid_sample_operands_t *o)
{
    const GsShape s = shape_of(p);
    const bool dx_work = p->has_dx && s.C > 0; /* C = 0: dx has no elements */
    if (dx_work) {
        TRY(check_dx_limits(p));
        if (!o->workspace.mem)
            return rdg_error(RUDNN_STATUS_INTERNAL, "grid_sample: the backward got no workspace for dx");
    }
    const Strides xs = strides_of(p->x_stride), gs = strides_of(p->grid_stride), ys = strides_of(p->y_stride);
    const void *x = rdg_at(o->x), *grid = rdg_at(o->grid), *dy = rdg_at(o->y);
    rdg_note_kernel("grid_sample.backward");
    if (p->has_dgrid && s.points > 0) {
        dgrid_kernel<DT, MODE, SP><<<dim3(blocks_for(s.points)), dim3(GS_THREADS), 0, q->stream>>>(
            x, grid, dy, rdg_at(o->dgrid), s, xs, gs, ys, strides_of(p->dgrid_stride));
        TRY(rdg_launched("grid_sample.backward dgrid"));
    }
    if (!dx_work)
        return RUDNN_STATUS_SUCCESS;
    const DxLayout l = dx_layout(p, rdg_at(o->workspace));
    /* counts and cursors to 0; without points that is already the scan's result (offsets 0) */
    const cudaError_t err = cudaMemsetAsync(l.counts, 0, (size_t)(2 * l.E + 1) * sizeof(uint32_t), q->stream);
    if (err != cudaSuccess)
        return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, "MemsetAsync (grid_sample backward)");
    if (s.points > 0) {
        pairs_kernel<DT, MODE, SP, false><<<dim3(blocks_for(s.points)), dim3(GS_THREADS), 0, q->stream>>>(
            grid, s, gs, l.counts, nullptr, nullptr);
        TRY(rdg_launched("grid_sample.backward count"));
        scan_reduce_kernel<<<dim3((unsigned)l.nb), dim3(SCAN_THREADS), 0, q->stream>>>(l.counts, l.E, l.parts);
        TRY(rdg_launched("grid_sample.backward scan"));
        scan_parts_kernel<<<dim3(1), dim3(PART_THREADS), 0, q->stream>>>(l.parts, l.nb, l.counts + l.E);
        TRY(rdg_launched("grid_sample.backward scan"));
        scan_apply_kernel<<<dim3((unsigned)l.nb), dim3(SCAN_THREADS), 0, q->stream>>>(l.counts, l.E, l.parts);
        TRY(rdg_launched("grid_sample.backward scan"));
        pairs_kernel<DT, MODE, SP, true><<<dim3(blocks_for(s.points)), dim3(GS_THREADS), 0, q->stream>>>(
            grid, s, gs, l.counts, l.cursors, l.entries);
        TRY(rdg_launched("grid_sample.backward fill"));
        sort_kernel<<<dim3(blocks_for(l.E)), dim3(GS_THREADS), 0, q->stream>>>(l.counts, l.entries, l.E);
        TRY(rdg_launched("grid_sample.backward sort"));
    }
    const int64_t groups = rdg_ceil_div(s.C, GATHER_CH);
    gather_kernel<DT, MODE, SP><<<dim3(blocks_for(l.E), (unsigned)min64(groups, 65535)), dim3(GS_THREADS), 0,
                                  q->stream>>>(grid, dy, l.counts, l.entries, rdg_at(o->dx), s, gs, ys,
                                               strides_of(p->dx_stride), l.E, groups);
    return rdg_launched("grid_sample.backward gather");
}

enum { PASS_FORWARD, PASS_BACKWARD };

template <int DT, int MODE, int SP>
rudnn_status_t run_typed(int pass, rdg_queue_t *q, const rudnn_grid_sample_plan_t *p,
                         const rudnn_grid_sample_operands_t *o)
{
    return pass == PASS_FORWARD ? forward_typed<DT, MODE, SP>(q, p, o) : backward_typed<DT, MODE, SP>(q, p, o);
}

template <int DT>
rudnn_status_t run_dtype(int pass, rdg_queue_t *q, const rudnn_grid_sample_plan_t *p,
                         const rudnn_grid_sample_operands_t *o)
{
    const bool d3 = p->spatial == 3;
    switch (p->mode) {
    case RUDNN_GRID_SAMPLE_BILINEAR:
        return d3 ? run_typed<DT, BILINEAR, 3>(pass, q, p, o) : run_typed<DT, BILINEAR, 2>(pass, q, p, o);
    case RUDNN_GRID_SAMPLE_NEAREST:
        return d3 ? run_typed<DT, NEAREST, 3>(pass, q, p, o) : run_typed<DT, NEAREST, 2>(pass, q, p, o);
    case RUDNN_GRID_SAMPLE_BICUBIC:
        if (!d3)
            return run_typed<DT, BICUBIC, 2>(pass, q, p, o);
        break;
    default:
        break;
    }
    return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "grid_sample: mode %d in %dD on this backend", (int)p->mode,
                     p->spatial);
}

rudnn_status_t run(int pass, void *queue, const rudnn_grid_sample_plan_t *p, const rudnn_grid_sample_operands_t *o)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    TRY(rdg_use_device(q->dev.index));
    switch (p->dtype) {
    case RUDNN_F32: return run_dtype<RUDNN_F32>(pass, q, p, o);
    case RUDNN_F16: return run_dtype<RUDNN_F16>(pass, q, p, o);
    case RUDNN_BF16: return run_dtype<RUDNN_BF16>(pass, q, p, o);
    default:
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "grid_sample: dtype %d on this backend", (int)p->dtype);
    }
}

rudnn_status_t gs_forward(void *queue, const rudnn_grid_sample_plan_t *p, const rudnn_grid_sample_operands_t *o)
{
    return run(PASS_FORWARD, queue, p, o);
}

rudnn_status_t gs_backward(void *queue, const rudnn_grid_sample_plan_t *p, const rudnn_grid_sample_operands_t *o)
{
    return run(PASS_BACKWARD, queue, p, o);
}

/* A table inside a host function: a namespace-scope const would be promoted to device memory by
 * HIP's compiler. */
rudnn_grid_sample_kernels_t make_grid_sample_table(void)
{
    rudnn_grid_sample_kernels_t table;
    memset(&table, 0, sizeof table);
    table.forward = gs_forward;
    table.backward_workspace = gs_backward_workspace;
    table.backward = gs_backward;
    table.struct_size = (uint32_t)sizeof table;
    return table;
}

} // namespace

const rudnn_grid_sample_kernels_t *rdg_grid_sample_table(void)
{
    static rudnn_grid_sample_kernels_t table = make_grid_sample_table();
    return &table;
}
