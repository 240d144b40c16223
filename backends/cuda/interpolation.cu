/* Interpolation on CUDA and HIP (include/rudnn/interpolation.h has the rules, ops/interpolation.c
 * the plan of backends/hal/interpolation.h): the port of backends/opencl/kernels/interpolation.cl,
 * element for element, and the family's table.
 *   interp_forward_kernel   a thread per output: the product of each dim's taps
 *   interp_backward_kernel  a thread per dx element: along each dim the outputs whose taps can
 *                           reach it (a range found by bisection, since taps only move forward as
 *                           the output index grows), each weighted by the taps that land on it; no
 *                           atomics, one sum in a fixed order (the OpenCL kernel's)
 * Both run a grid-stride loop over N C times the box (outputs, or dx elements), the innermost dim
 * fastest, so neighbouring threads touch neighbouring elements of a contiguous tensor. The flat
 * index is split with 32-bit division where the count fits (the common case), 64-bit otherwise;
 * element offsets are always 64-bit.
 *
 * Arithmetic: FP32 coordinates, weights and sums, each product and sum rounded on its own (no
 * fused multiply-add), as the OpenCL program (FP_CONTRACT OFF) and the contract's reference do: the
 * coordinates then floor to exactly the contract's indices, and both backends add the same terms
 * in the same order. Modes are template arguments (tap counts fixed at compile time). */
#include <math.h>
#include <string.h>

#include "rdg_internal.h"
#include "elem.cuh"

namespace {

constexpr int kThreads = 256;    /* a block: a multiple of 64 (HIP's wavefronts) */
constexpr int kBlocksPerSm = 64; /* grid cap per SM; larger counts loop (grid stride) */

/* What both kernels read, passed by value. The forward reads src = x, writes dst = y, and walks the
 * outputs (box = O); the backward reads src = dy, writes dst = dx, and walks dx (box = S). */
struct InterpArgs {
    const void *src;
    void *dst;
    uint64_t total;     /* N C times the walked box */
    int64_t channels;   /* C */
    int64_t in[3];      /* S (missing leading dims 1) */
    int64_t out[3];     /* O */
    float ratio[3];     /* the plan's FP32 coordinate factors */
    int align;          /* align_corners */
    int64_t xs[5];      /* x or dx strides [batch, channel, D, H, W], elements */
    int64_t ys[5];      /* y or dy */
};

/* ---- FP32 without contraction ----
 * nvcc never fuses __fmul_rn / __fadd_rn. hipcc's are plain operators compiled where contraction is
 * on, so it fuses them: there the operators are written here, under the pragma (which nvcc's host
 * compiler would warn about). */

#if RDG_HIP
#pragma STDC FP_CONTRACT OFF
__device__ __forceinline__ float mul_rn(float a, float b) { return a * b; }
__device__ __forceinline__ float add_rn(float a, float b) { return a + b; }
__device__ __forceinline__ float sub_rn(float a, float b) { return a - b; }
#else
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
#endif

/* Keys' cubic convolution with A = -0.75, as the OpenCL cubic1 (|x| <= 1) and cubic2 (1 < |x| < 2),
 * the constants folded as its compiler folds them: A + 2 = 1.25, A + 3 = 2.25, 5A = -3.75,
 * 8A = -6, 4A = -3 (all exact). */
__device__ __forceinline__ float cubic1(float x)
{
    return add_rn(mul_rn(mul_rn(sub_rn(mul_rn(1.25f, x), 2.25f), x), x), 1.0f);
}

__device__ __forceinline__ float cubic2(float x)
{
    return sub_rn(mul_rn(add_rn(mul_rn(sub_rn(mul_rn(-0.75f, x), -3.75f), x), -6.0f), x), -3.0f);
}

template <int MODE>
__host__ __device__ constexpr int taps_per_dim()
{
    return MODE == RUDNN_INTERP_CUBIC ? 4 : MODE == RUDNN_INTERP_LINEAR ? 2 : 1;
}

/* Output index o's taps along one dim of S inputs: their count, input indices and weights.
 * Indices are clamped in float before they become integers (a huge ratio never overflows), then
 * once more as integers: past 2^24, (float)(S - 1) may round up to S. */
template <int MODE>
__device__ __forceinline__ int taps_raw(int align, float r, int64_t S, int64_t o, int64_t *idx, float *w)
{
    const float of = (float)o;
    if (MODE == RUDNN_INTERP_NEAREST || MODE == RUDNN_INTERP_NEAREST_EXACT) {
        const float s = floorf(MODE == RUDNN_INTERP_NEAREST ? mul_rn(of, r) : mul_rn(add_rn(of, 0.5f), r));
        const int64_t i = (int64_t)fminf(s, (float)(S - 1));
        idx[0] = i < S - 1 ? i : S - 1;
        w[0] = 1.0f;
        return 1;
    }
    /* a coordinate that overflows FP32 (a ratio near FLT_MAX) reads the last input with t = 0, as
     * the contract's reference does (inf - floor(inf) would be NaN; the OpenCL kernel gives NaN) */
    float src = align ? mul_rn(r, of) : sub_rn(mul_rn(r, add_rn(of, 0.5f)), 0.5f);
    if (MODE == RUDNN_INTERP_LINEAR) {
        if (src < 0.0f)
            src = 0.0f;
        const float fl = floorf(src);
        int64_t i0 = (int64_t)fminf(fl, (float)(S - 1));
        i0 = i0 < S - 1 ? i0 : S - 1;
        const float t = isfinite(src) ? sub_rn(src, fl) : 0.0f;
        idx[0] = i0;
        idx[1] = i0 < S - 1 ? i0 + 1 : i0;
        w[0] = sub_rn(1.0f, t);
        w[1] = t;
        return 2;
    }
    const float fl = floorf(src);
    /* its taps clamp into 0 .. S - 1 all the same */
    const int64_t i = (int64_t)fminf(fmaxf(fl, -3.0f), (float)(S + 2));
    const float t = isfinite(src) ? sub_rn(src, fl) : 0.0f;
    w[0] = cubic2(add_rn(t, 1.0f));
    w[1] = cubic1(t);
    w[2] = cubic1(sub_rn(1.0f, t));
    w[3] = cubic2(sub_rn(2.0f, t));
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const int64_t v = i - 1 + k;
        idx[k] = v < 0 ? 0 : v > S - 1 ? S - 1 : v;
    }
    return 4;
}

/* taps_raw, with a dim of one input (and the missing leading dims) as one tap: every tap lands on
 * index 0, and taps landing on one index add (in tap order). */
template <int MODE>
__device__ __forceinline__ int taps_of(int align, float r, int64_t S, int64_t o, int64_t *idx, float *w)
{
    const int n = taps_raw<MODE>(align, r, S, o, idx, w);
    if (S > 1)
        return n;
#pragma unroll
    for (int k = 1; k < taps_per_dim<MODE>(); k++)
        w[0] = add_rn(w[0], w[k]);
    return 1;
}

/* The weight output o gives input q along one dim (taps landing on the same clamped index add). */
template <int MODE>
__device__ __forceinline__ float weight_to(int align, float r, int64_t S, int64_t o, int64_t q)
{
    int64_t idx[4];
    float w[4];
    const int n = taps_of<MODE>(align, r, S, o, idx, w);
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < taps_per_dim<MODE>(); k++)
        if (k < n && idx[k] == q)
            sum = add_rn(sum, w[k]);
    return sum;
}

/* The outputs (of O) whose taps can reach input q: [lo, hi], empty when lo > hi. */
template <int MODE>
__device__ __forceinline__ void reach(int align, float r, int64_t S, int64_t O, int64_t q, int64_t *lo,
                                      int64_t *hi)
{
    int64_t idx[4];
    float w[4];
    /* lo: the first o whose last tap is at or past q */
    int64_t a = 0, b = O;
    while (a < b) {
        const int64_t m = (a + b) / 2;
        const int n = taps_of<MODE>(align, r, S, m, idx, w);
        if (idx[n - 1] >= q)
            b = m;
        else
            a = m + 1;
    }
    *lo = a;
    /* hi: the last o whose first tap is at or before q */
    a = 0, b = O;
    while (a < b) {
        const int64_t m = (a + b) / 2;
        taps_of<MODE>(align, r, S, m, idx, w);
        if (idx[0] <= q)
            a = m + 1;
        else
            b = m;
    }
    *hi = a - 1;
}

/* Flat index -> (n, c, p0, p1, p2) over [N, C, box], the last dim fastest; I is uint32_t where the
 * launch's count fits it (cheaper division), else uint64_t. */
struct Pos {
    int64_t n, c, p[3];
};

template <typename I>
__device__ __forceinline__ Pos split_index(uint64_t id, int64_t channels, const int64_t *box)
{
    I rest = (I)id;
    Pos v;
    v.p[2] = (int64_t)(rest % (I)box[2]);
    rest /= (I)box[2];
    v.p[1] = (int64_t)(rest % (I)box[1]);
    rest /= (I)box[1];
    v.p[0] = (int64_t)(rest % (I)box[0]);
    rest /= (I)box[0];
    v.c = (int64_t)(rest % (I)channels);
    v.n = (int64_t)(rest / (I)channels);
    return v;
}

template <int DT, int MODE, typename I>
__global__ void __launch_bounds__(kThreads) interp_forward_kernel(const InterpArgs a)
{
    constexpr int T = taps_per_dim<MODE>();
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t id = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; id < a.total; id += step) {
        const Pos o = split_index<I>(id, a.channels, a.out);
        int64_t i0[4], i1[4], i2[4];
        float w0[4], w1[4], w2[4];
        const int n0 = taps_of<MODE>(a.align, a.ratio[0], a.in[0], o.p[0], i0, w0);
        const int n1 = taps_of<MODE>(a.align, a.ratio[1], a.in[1], o.p[1], i1, w1);
        const int n2 = taps_of<MODE>(a.align, a.ratio[2], a.in[2], o.p[2], i2, w2);
        const int64_t base = o.n * a.xs[0] + o.c * a.xs[1];
        float acc = 0.0f;
#pragma unroll
        for (int p = 0; p < T; p++) {
            if (p < n0) {
#pragma unroll
                for (int q = 0; q < T; q++) {
                    if (q < n1) {
                        const int64_t plane = base + i0[p] * a.xs[2] + i1[q] * a.xs[3];
                        float row = 0.0f;
#pragma unroll
                        for (int c = 0; c < T; c++)
                            if (c < n2)
                                row = add_rn(row, mul_rn(w2[c], Elem<DT>::ld(a.src, plane + i2[c] * a.xs[4])));
                        acc = add_rn(acc, mul_rn(mul_rn(w0[p], w1[q]), row));
                    }
                }
            }
        }
        Elem<DT>::st(a.dst, o.n * a.ys[0] + o.c * a.ys[1] + o.p[0] * a.ys[2] + o.p[1] * a.ys[3] + o.p[2] * a.ys[4],
                     acc);
    }
}

template <int DT, int MODE, typename I>
__global__ void __launch_bounds__(kThreads) interp_backward_kernel(const InterpArgs a)
{
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t id = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; id < a.total; id += step) {
        const Pos q = split_index<I>(id, a.channels, a.in);
        int64_t lo0, hi0, lo1, hi1, lo2, hi2;
        reach<MODE>(a.align, a.ratio[0], a.in[0], a.out[0], q.p[0], &lo0, &hi0);
        reach<MODE>(a.align, a.ratio[1], a.in[1], a.out[1], q.p[1], &lo1, &hi1);
        reach<MODE>(a.align, a.ratio[2], a.in[2], a.out[2], q.p[2], &lo2, &hi2);
        const int64_t base = q.n * a.ys[0] + q.c * a.ys[1];
        float acc = 0.0f;
        /* no output reaches q along the innermost dim: no term at all (an empty row times another
         * dim's weight, NaN past FP32's coordinate range, must not make one) */
        if (lo2 > hi2)
            hi0 = lo0 - 1;
        for (int64_t o0 = lo0; o0 <= hi0; o0++) {
            const float wa = weight_to<MODE>(a.align, a.ratio[0], a.in[0], o0, q.p[0]);
            for (int64_t o1 = lo1; o1 <= hi1; o1++) {
                const float wb = weight_to<MODE>(a.align, a.ratio[1], a.in[1], o1, q.p[1]);
                const int64_t plane = base + o0 * a.ys[2] + o1 * a.ys[3];
                float row = 0.0f;
                for (int64_t o2 = lo2; o2 <= hi2; o2++)
                    row = add_rn(row, mul_rn(weight_to<MODE>(a.align, a.ratio[2], a.in[2], o2, q.p[2]),
                                             Elem<DT>::ld(a.src, plane + o2 * a.ys[4])));
                acc = add_rn(acc, mul_rn(mul_rn(wa, wb), row));
            }
        }
        Elem<DT>::st(a.dst, q.n * a.xs[0] + q.c * a.xs[1] + q.p[0] * a.xs[2] + q.p[1] * a.xs[3] + q.p[2] * a.xs[4],
                     acc);
    }
}

/* ---- launchers ---- */

typedef void (*kernel_fn)(InterpArgs);

template <int DT, int MODE>
kernel_fn kernel_for(bool backward, bool wide)
{
    if (backward)
        return wide ? interp_backward_kernel<DT, MODE, uint64_t> : interp_backward_kernel<DT, MODE, uint32_t>;
    return wide ? interp_forward_kernel<DT, MODE, uint64_t> : interp_forward_kernel<DT, MODE, uint32_t>;
}

template <int DT>
kernel_fn kernel_for_mode(int mode, bool backward, bool wide)
{
    switch (mode) {
    case RUDNN_INTERP_NEAREST: return kernel_for<DT, RUDNN_INTERP_NEAREST>(backward, wide);
    case RUDNN_INTERP_NEAREST_EXACT: return kernel_for<DT, RUDNN_INTERP_NEAREST_EXACT>(backward, wide);
    case RUDNN_INTERP_LINEAR: return kernel_for<DT, RUDNN_INTERP_LINEAR>(backward, wide);
    case RUDNN_INTERP_CUBIC: return kernel_for<DT, RUDNN_INTERP_CUBIC>(backward, wide);
    default: return nullptr;
    }
}

kernel_fn kernel_of(int dtype, int mode, bool backward, bool wide)
{
    switch (dtype) {
    case RUDNN_F32: return kernel_for_mode<RUDNN_F32>(mode, backward, wide);
    case RUDNN_F16: return kernel_for_mode<RUDNN_F16>(mode, backward, wide);
    case RUDNN_BF16: return kernel_for_mode<RUDNN_BF16>(mode, backward, wide);
    default: return nullptr;
    }
}

/* Forward (x in, y out) or backward (dy in, dx out); o->x is x or dx, o->y is y or dy. */
rudnn_status_t interp_launch(void *queue, const rudnn_interp_plan_t *p, const rudnn_interp_operands_t *o,
                             bool backward)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    TRY(rdg_use_device(q->dev.index));
    const int64_t *box = backward ? p->in_size : p->out_size;
    const uint64_t total = (uint64_t)p->batch * (uint64_t)p->channels * (uint64_t)box[0] * (uint64_t)box[1] *
                           (uint64_t)box[2];
    const bool wide = total > (uint64_t)UINT32_MAX; /* every factor fits 32 bits when the product does */
    const kernel_fn k = kernel_of((int)p->dtype, (int)p->mode, backward, wide);
    if (!k)
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "interpolation: dtype %d, mode %d on this backend",
                         (int)p->dtype, (int)p->mode);
    if (total == 0)
        return RUDNN_STATUS_SUCCESS;

    InterpArgs a;
    memset(&a, 0, sizeof a);
    a.src = rdg_at(backward ? o->y : o->x);
    a.dst = rdg_at(backward ? o->x : o->y);
    a.total = total;
    a.channels = p->channels;
    for (int i = 0; i < 3; i++) {
        a.in[i] = p->in_size[i];
        a.out[i] = p->out_size[i];
        a.ratio[i] = p->ratio[i];
    }
    a.align = p->align_corners != 0;
    for (int i = 0; i < 5; i++) {
        a.xs[i] = p->x_stride[i];
        a.ys[i] = p->y_stride[i];
    }

    const int64_t sms = q->dev.sm_count > 0 ? q->dev.sm_count : 1;
    const uint64_t needed = (total + kThreads - 1) / kThreads;
    const uint64_t cap = (uint64_t)sms * kBlocksPerSm;
    const unsigned blocks = (unsigned)(needed < cap ? needed : cap);
    rdg_note_kernel(backward ? "interpolation.backward" : "interpolation.forward");
    k<<<dim3(blocks), dim3(kThreads), 0, q->stream>>>(a);
    return rdg_launched(backward ? "interpolation backward" : "interpolation forward");
}

rudnn_status_t interp_forward(void *queue, const rudnn_interp_plan_t *p, const rudnn_interp_operands_t *o)
{
    return interp_launch(queue, p, o, false);
}

rudnn_status_t interp_backward(void *queue, const rudnn_interp_plan_t *p, const rudnn_interp_operands_t *o)
{
    return interp_launch(queue, p, o, true);
}

/* A table inside a host function: a namespace-scope const would be promoted to device memory by
 * HIP's compiler. */
rudnn_interpolation_kernels_t make_interpolation_table(void)
{
    rudnn_interpolation_kernels_t table;
    memset(&table, 0, sizeof table);
    table.forward = interp_forward;
    table.backward = interp_backward;
    table.struct_size = (uint32_t)sizeof table;
    return table;
}

} // namespace

const rudnn_interpolation_kernels_t *rdg_interpolation_table(void)
{
    static rudnn_interpolation_kernels_t table = make_interpolation_table();
    return &table;
}
