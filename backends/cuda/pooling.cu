/* Pooling (backends/hal/pooling.h; the rules in include/rudnn/pooling.h), the CUDA/HIP port of
 * backends/opencl/kernels/pooling.cl: FP32 arithmetic, tensors F32 / F16 / BF16 (elem.cuh),
 * indices int64.
 *   pool_forward_kernel   a thread per output (n, c, p): its window walked in tap order (r_1
 *                         slowest), only the taps that land inside x
 *   pool_backward_kernel  a thread per dx element (n, c, q): the outputs whose window holds q, in
 *                         tap order, each added once (MAX: where q is that window's argmax, found
 *                         again by the forward's own walk); no atomics
 * Launches are one-dimensional grid-stride loops of POOL_THREADS threads. Where the written
 * tensor has its channels innermost (channels-last), consecutive threads take consecutive
 * channels, else consecutive positions along the last spatial dim, so that writes coalesce.
 * Positions and sizes are 32-bit where the problem allows it (I = int32_t: cheap divisions),
 * else 64-bit; memory offsets are always 64-bit. */
#include "rdg_internal.h"
#include "elem.cuh"

namespace {

/* threads a block (a multiple of 64: HIP wavefronts) */
constexpr int POOL_THREADS = 256;
/* blocks a launch at most (HIP: blocks x threads stays below 2^32); the kernels loop beyond */
constexpr int64_t POOL_MAX_BLOCKS = (int64_t)1 << 22;

enum { MODE_MAX = RUDNN_POOL_MAX, MODE_AVG_INCLUDE_PAD = RUDNN_POOL_AVG_INCLUDE_PAD };

/* Everything a launch needs, by value. Spatial arrays are (D, H, W) as in the plan; strides are
 * [batch, channel, D, H, W] in elements. */
template <typename I>
struct PoolArgs {
    I S[3], P[3], R[3], st[3], pad[3], dil[3];
    I C;
    /* backward (tap_run): along dim k the taps that land on an output are tap_step = st / g apart,
     * g = tap_gcd = gcd(st, dil); tap_inv: the inverse of dil / g modulo tap_step (0 where it is 1) */
    I tap_gcd[3], tap_step[3], tap_inv[3];
    int64_t xs[5];   /* x (forward) or dx (backward) */
    int64_t ys[5];   /* y or dy */
    int64_t is[5];   /* forward: indices */
    int64_t srcs[5]; /* backward, MAX: x */
    int64_t items;   /* threads' work: outputs (forward) or dx elements (backward) */
    int mode;
    int has_idx;
    int channels_inner; /* consecutive items: consecutive channels */
};

template <typename I>
__device__ __forceinline__ I imin(I a, I b)
{
    return a < b ? a : b;
}
template <typename I>
__device__ __forceinline__ I imax(I a, I b)
{
    return a > b ? a : b;
}

/* item -> (n, c, pos[3]); extents of size 1 cost no division */
template <typename I>
__device__ __forceinline__ void split_item(I id, const PoolArgs<I> &a, const I ext[3], I &n, I &c, I pos[3])
{
    c = 0;
    if (a.channels_inner && a.C > 1) {
        c = id % a.C;
        id /= a.C;
    }
#pragma unroll
    for (int k = 2; k >= 0; k--) {
        pos[k] = 0;
        if (ext[k] > 1) {
            pos[k] = id % ext[k];
            id /= ext[k];
        }
    }
    if (!a.channels_inner && a.C > 1) {
        c = id % a.C;
        id /= a.C;
    }
    n = id;
}

/* The taps r (0 .. R - 1) of one dim whose position start + r dil lies inside 0 .. S - 1: [lo, hi],
 * empty when lo > hi. The walks visit only these, so a huge window over a small input costs what
 * the input holds. */
template <typename I>
__device__ __forceinline__ void taps_inside(I start, I dil, I S, I R, I &lo, I &hi)
{
    if (dil == 1) {
        lo = start >= 0 ? 0 : -start;
        hi = start > S - 1 ? -1 : imin(R - 1, S - 1 - start);
    } else {
        lo = start >= 0 ? 0 : (-start + dil - 1) / dil;
        hi = start > S - 1 ? -1 : imin(R - 1, (S - 1 - start) / dil);
    }
}

/* The max of output p's window over the elements inside x (NaN if any is NaN), and its argmax, the
 * first such element in window order (the first NaN where there is one), as a flat position in
 * x's spatial box: -1 and -inf when none. */
template <int DT, typename I>
__device__ __forceinline__ float window_max(const void *__restrict__ x, int64_t base, const int64_t xs[5],
                                            const PoolArgs<I> &a, const I p[3], int64_t *arg)
{
    I start[3], lo[3], hi[3];
#pragma unroll
    for (int k = 0; k < 3; k++) {
        start[k] = p[k] * a.st[k] - a.pad[k];
        taps_inside(start[k], a.dil[k], a.S[k], a.R[k], lo[k], hi[k]);
    }
    float best = -INFINITY;
    int64_t at = -1;
    for (I r0 = lo[0]; r0 <= hi[0]; r0++) {
        const I i0 = start[0] + r0 * a.dil[0];
        const int64_t o0 = base + (int64_t)i0 * xs[2];
        for (I r1 = lo[1]; r1 <= hi[1]; r1++) {
            const I i1 = start[1] + r1 * a.dil[1];
            const int64_t o1 = o0 + (int64_t)i1 * xs[3];
            for (I r2 = lo[2]; r2 <= hi[2]; r2++) {
                const I i2 = start[2] + r2 * a.dil[2];
                const float v = Elem<DT>::ld(x, o1 + (int64_t)i2 * xs[4]);
                if (at < 0 || (!isnan(best) && (isnan(v) || v > best))) {
                    best = v;
                    at = ((int64_t)i0 * a.S[1] + i1) * a.S[2] + i2;
                }
            }
        }
    }
    *arg = at;
    return best;
}

/* The averages' divisor of output p: positions of the window inside the padded input
 * (AVG_INCLUDE_PAD) or inside x (AVG_EXCLUDE_PAD); the averages take dilation 1. The product is
 * 64-bit, then rounded to float once, as the OpenCL kernel does. */
template <typename I>
__device__ __forceinline__ float window_count(const PoolArgs<I> &a, const I p[3])
{
    int64_t cnt = 1;
#pragma unroll
    for (int k = 0; k < 3; k++) {
        const I lo = p[k] * a.st[k] - a.pad[k], hi = lo + a.R[k];
        cnt *= a.mode == MODE_AVG_INCLUDE_PAD ? (int64_t)(imin(hi, a.S[k] + a.pad[k]) - lo)
                                              : (int64_t)(imin(hi, a.S[k]) - imax(lo, (I)0));
    }
    return (float)cnt;
}

/* Output `id` of the forward: y (and its argmax) from its window. */
template <int DT, typename I>
__device__ __forceinline__ void forward_item(const void *__restrict__ x, void *__restrict__ y,
                                             int64_t *__restrict__ idx, const PoolArgs<I> &a, I id)
{
    I n, c, p[3];
    split_item(id, a, a.P, n, c, p);
    const int64_t base = (int64_t)n * a.xs[0] + (int64_t)c * a.xs[1];
    const int64_t out = (int64_t)n * a.ys[0] + (int64_t)c * a.ys[1] + (int64_t)p[0] * a.ys[2] +
                        (int64_t)p[1] * a.ys[3] + (int64_t)p[2] * a.ys[4];
    if (a.mode == MODE_MAX) {
        int64_t arg;
        const float v = window_max<DT>(x, base, a.xs, a, p, &arg);
        Elem<DT>::st(y, out, v);
        if (a.has_idx)
            idx[(int64_t)n * a.is[0] + (int64_t)c * a.is[1] + (int64_t)p[0] * a.is[2] + (int64_t)p[1] * a.is[3] +
                (int64_t)p[2] * a.is[4]] = arg;
        return;
    }
    I start[3], lo[3], hi[3];
#pragma unroll
    for (int k = 0; k < 3; k++) {
        start[k] = p[k] * a.st[k] - a.pad[k];
        taps_inside(start[k], (I)1, a.S[k], a.R[k], lo[k], hi[k]);
    }
    float sum = 0.0f;
    for (I r0 = lo[0]; r0 <= hi[0]; r0++) {
        const int64_t o0 = base + (int64_t)(start[0] + r0) * a.xs[2];
        for (I r1 = lo[1]; r1 <= hi[1]; r1++) {
            const int64_t o1 = o0 + (int64_t)(start[1] + r1) * a.xs[3];
            for (I r2 = lo[2]; r2 <= hi[2]; r2++)
                sum += Elem<DT>::ld(x, o1 + (int64_t)(start[2] + r2) * a.xs[4]);
        }
    }
    const float cnt = window_count(a, p);
    Elem<DT>::st(y, out, cnt > 0.0f ? sum / cnt : 0.0f);
}

template <int DT, typename I>
__global__ void RDG_LAUNCH_BOUNDS(POOL_THREADS, 1)
pool_forward_kernel(const void *__restrict__ x, void *__restrict__ y, int64_t *__restrict__ idx, const PoolArgs<I> a)
{
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t id = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; id < (uint64_t)a.items; id += step)
        forward_item<DT>(x, y, idx, a, (I)id);
}

/* Along one dim of the backward: the taps r whose output p = (top - r dil) / st is a whole number
 * in 0 .. P - 1, as the run r = first, first + step, ... <= last with p going down by dp a step
 * (the ascending r of the OpenCL walk, without its rejected taps). */
template <typename I>
struct TapRun {
    I first, last, step, p, dp;
};

template <typename I>
__device__ __forceinline__ TapRun<I> tap_run(const PoolArgs<I> &a, int k, I q)
{
    const I top = q + a.pad[k], span = (a.P[k] - 1) * a.st[k], dil = a.dil[k], st = a.st[k];
    TapRun<I> t;
    if (st == 1 && dil == 1) { /* every tap lands on an output */
        t.first = imax(top - span, (I)0);
        t.last = imin(a.R[k] - 1, top);
        t.step = 1;
        t.p = top - t.first;
        t.dp = 1;
        return t;
    }
    const I lo = top - span <= 0 ? 0 : (top - span + dil - 1) / dil;
    t.last = imin(a.R[k] - 1, top / dil);
    t.step = a.tap_step[k];
    const I g = a.tap_gcd[k];
    if (top % g != 0) { /* dil r = top (mod st) has no solution */
        t.first = t.last + 1;
        t.p = 0;
        t.dp = 0;
        return t;
    }
    /* r = (top / g) inv (mod step): the product in 64 bits (both factors below step) */
    const I res = (I)((int64_t)(top / g % t.step) * a.tap_inv[k] % t.step);
    t.first = lo + (res - lo % t.step + t.step) % t.step;
    t.p = t.first <= t.last ? (top - t.first * dil) / st : 0;
    t.dp = dil / g;
    return t;
}

/* dx element `id` of the backward: the sum over the outputs whose window holds it. MAX (a template
 * parameter: the max's window walk inside the tap walk is what sets the register count) adds dy
 * where the element is that window's argmax, the averages dy over the window's divisor. */
template <int DT, typename I, bool MAX>
__device__ __forceinline__ void backward_item(const void *__restrict__ x, const void *__restrict__ dy,
                                              void *__restrict__ dx, const PoolArgs<I> &a, I id)
{
    I n, c, q[3];
    split_item(id, a, a.S, n, c, q);
    const int64_t flat_q = ((int64_t)q[0] * a.S[1] + q[1]) * a.S[2] + q[2];
    const int64_t dy_base = (int64_t)n * a.ys[0] + (int64_t)c * a.ys[1];
    const int64_t x_base = (int64_t)n * a.srcs[0] + (int64_t)c * a.srcs[1];
    const TapRun<I> t0 = tap_run(a, 0, q[0]), t1 = tap_run(a, 1, q[1]), t2 = tap_run(a, 2, q[2]);
    float acc = 0.0f;
    I p[3];
    p[0] = t0.p;
    for (I r0 = t0.first; r0 <= t0.last; r0 += t0.step, p[0] -= t0.dp) {
        p[1] = t1.p;
        for (I r1 = t1.first; r1 <= t1.last; r1 += t1.step, p[1] -= t1.dp) {
            p[2] = t2.p;
            for (I r2 = t2.first; r2 <= t2.last; r2 += t2.step, p[2] -= t2.dp) {
                const int64_t at =
                    dy_base + (int64_t)p[0] * a.ys[2] + (int64_t)p[1] * a.ys[3] + (int64_t)p[2] * a.ys[4];
                if (MAX) {
                    int64_t arg;
                    window_max<DT>(x, x_base, a.srcs, a, p, &arg);
                    if (arg == flat_q)
                        acc += Elem<DT>::ld(dy, at);
                } else {
                    acc += Elem<DT>::ld(dy, at) / window_count(a, p);
                }
            }
        }
    }
    Elem<DT>::st(dx, (int64_t)n * a.xs[0] + (int64_t)c * a.xs[1] + (int64_t)q[0] * a.xs[2] +
                         (int64_t)q[1] * a.xs[3] + (int64_t)q[2] * a.xs[4],
                 acc);
}

template <int DT, typename I, bool MAX>
__global__ void RDG_LAUNCH_BOUNDS(POOL_THREADS, 1)
pool_backward_kernel(const void *__restrict__ x, const void *__restrict__ dy, void *__restrict__ dx,
                     const PoolArgs<I> a)
{
    const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t id = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; id < (uint64_t)a.items; id += step)
        backward_item<DT, I, MAX>(x, dy, dx, a, (I)id);
}

/* ---- host side ---- */

int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        const int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* The inverse of v modulo m (v and m coprime, m >= 1): 0 where m is 1. */
int64_t inverse_mod(int64_t v, int64_t m)
{
    int64_t r0 = m, r1 = v % m, s0 = 0, s1 = 1;
    while (r1) {
        const int64_t k = r0 / r1, r2 = r0 - k * r1, s2 = s0 - k * s1;
        r0 = r1, r1 = r2, s0 = s1, s1 = s2;
    }
    return ((s0 % m) + m) % m;
}

/* Consecutive items take consecutive channels where the written tensor's channel stride is below
 * that of every spatial dim that has more than one position (channels-last). */
int channels_inner(const int64_t stride[5], const int64_t ext[3], int64_t C)
{
    if (C <= 1)
        return 0;
    const int64_t cs = stride[1] < 0 ? -stride[1] : stride[1];
    for (int k = 0; k < 3; k++) {
        const int64_t s = stride[2 + k] < 0 ? -stride[2 + k] : stride[2 + k];
        if (ext[k] > 1 && s <= cs)
            return 0;
    }
    return 1;
}

/* 32-bit positions hold: every item number, and along every dim anything the walks compute
 * (positions within the padded input, window, stride and dilation added: below S + 2 pad + R +
 * st + dil). */
bool fits_int32(const rudnn_pool_plan_t *p, int64_t items)
{
    if (items >= INT32_MAX || p->batch >= INT32_MAX || p->channels >= INT32_MAX)
        return false;
    for (int k = 0; k < 3; k++)
        if (p->in_size[k] + 2 * p->padding[k] + p->window[k] + p->stride[k] + p->dilation[k] >= INT32_MAX ||
            p->out_size[k] >= INT32_MAX)
            return false;
    return true;
}

template <typename I>
PoolArgs<I> make_args(const rudnn_pool_plan_t *p, int64_t items, bool forward)
{
    PoolArgs<I> a;
    memset(&a, 0, sizeof a);
    for (int k = 0; k < 3; k++) {
        a.S[k] = (I)p->in_size[k];
        a.P[k] = (I)p->out_size[k];
        a.R[k] = (I)p->window[k];
        a.st[k] = (I)p->stride[k];
        a.pad[k] = (I)p->padding[k];
        a.dil[k] = (I)p->dilation[k];
        const int64_t g = gcd64(p->stride[k], p->dilation[k]), step = p->stride[k] / g;
        a.tap_gcd[k] = (I)g;
        a.tap_step[k] = (I)step;
        a.tap_inv[k] = (I)inverse_mod(p->dilation[k] / g, step);
    }
    a.C = (I)p->channels;
    for (int k = 0; k < 5; k++) {
        a.xs[k] = p->x_stride[k];
        a.ys[k] = p->y_stride[k];
        a.is[k] = p->idx_stride[k];
        a.srcs[k] = p->src_stride[k];
    }
    a.items = items;
    a.mode = (int)p->mode;
    a.has_idx = p->has_indices != 0;
    a.channels_inner = forward ? channels_inner(p->y_stride, p->out_size, p->channels)
                               : channels_inner(p->x_stride, p->in_size, p->channels);
    return a;
}

dim3 grid_for(int64_t items)
{
    int64_t blocks = rdg_ceil_div(items, POOL_THREADS);
    if (blocks > POOL_MAX_BLOCKS)
        blocks = POOL_MAX_BLOCKS;
    return dim3((unsigned)blocks);
}

template <typename I>
using ForwardKernel = void (*)(const void *, void *, int64_t *, const PoolArgs<I>);
template <typename I>
using BackwardKernel = void (*)(const void *, const void *, void *, const PoolArgs<I>);

template <typename I>
void launch_forward(rdg_queue_t *q, const rudnn_pool_plan_t *p, const rudnn_pool_operands_t *o, int64_t items)
{
    ForwardKernel<I> kernel;
    switch (p->dtype) {
    case RUDNN_F32: kernel = pool_forward_kernel<RUDNN_F32, I>; break;
    case RUDNN_F16: kernel = pool_forward_kernel<RUDNN_F16, I>; break;
    default: kernel = pool_forward_kernel<RUDNN_BF16, I>; break;
    }
    kernel<<<grid_for(items), POOL_THREADS, 0, q->stream>>>(
        rdg_at(o->x), rdg_at(o->y), p->has_indices ? (int64_t *)rdg_at(o->indices) : nullptr,
        make_args<I>(p, items, true));
}

template <int DT, typename I>
BackwardKernel<I> backward_kernel(bool max)
{
    return max ? pool_backward_kernel<DT, I, true> : pool_backward_kernel<DT, I, false>;
}

template <typename I>
void launch_backward(rdg_queue_t *q, const rudnn_pool_plan_t *p, const rudnn_pool_operands_t *o, int64_t items)
{
    const bool max = p->mode == RUDNN_POOL_MAX;
    BackwardKernel<I> kernel;
    switch (p->dtype) {
    case RUDNN_F32: kernel = backward_kernel<RUDNN_F32, I>(max); break;
    case RUDNN_F16: kernel = backward_kernel<RUDNN_F16, I>(max); break;
    default: kernel = backward_kernel<RUDNN_BF16, I>(max); break;
    }
    /* the averages never read x (its reference may be empty) */
    kernel<<<grid_for(items), POOL_THREADS, 0, q->stream>>>(p->has_x ? rdg_at(o->x) : nullptr, rdg_at(o->y),
                                                            rdg_at(o->dx), make_args<I>(p, items, false));
}

int64_t box(const int64_t v[3])
{
    return v[0] * v[1] * v[2];
}

/* The plan arrives validated (dtype F32, F16 or BF16; N, C >= 1). */
rudnn_status_t pool_forward(void *queue, const rudnn_pool_plan_t *p, const rudnn_pool_operands_t *o)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    TRY(rdg_use_device(q->dev.index));
    const int64_t items = p->batch * p->channels * box(p->out_size);
    if (items <= 0)
        return RUDNN_STATUS_SUCCESS;
    rdg_note_kernel("pooling.forward");
    if (fits_int32(p, items))
        launch_forward<int32_t>(q, p, o, items);
    else
        launch_forward<int64_t>(q, p, o, items);
    return rdg_launched("pooling forward");
}

rudnn_status_t pool_backward(void *queue, const rudnn_pool_plan_t *p, const rudnn_pool_operands_t *o)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    TRY(rdg_use_device(q->dev.index));
    const int64_t items = p->batch * p->channels * box(p->in_size);
    if (items <= 0)
        return RUDNN_STATUS_SUCCESS;
    rdg_note_kernel("pooling.backward");
    if (fits_int32(p, items))
        launch_backward<int32_t>(q, p, o, items);
    else
        launch_backward<int64_t>(q, p, o, items);
    return rdg_launched("pooling backward");
}

/* A table inside a host function: a namespace-scope const would be promoted to device memory by
 * HIP's compiler. */
rudnn_pooling_kernels_t make_pooling_table(void)
{
    rudnn_pooling_kernels_t table;
    memset(&table, 0, sizeof table);
    table.forward = pool_forward;
    table.backward = pool_backward;
    table.struct_size = (uint32_t)sizeof table;
    return table;
}

} // namespace

const rudnn_pooling_kernels_t *rdg_pooling_table(void)
{
    static rudnn_pooling_kernels_t table = make_pooling_table();
    return &table;
}
