/* Deterministic block and cluster all-reductions for the row kernels.
 *
 * Every thread of the block (and of the cluster) ends with the bit-identical result: warps
 * reduce with an xor butterfly (each step adds the same two values in every lane), warp
 * partials go through shared memory and are reduced again by a butterfly in every warp, and
 * cluster partials are combined in rank order by every thread. The order is fixed by the
 * launch configuration alone, so a run is reproducible.
 *
 * Rules for callers: blockDim.x is a multiple of the warp size, every thread of the block calls
 * every reduction (no early exit), and the same sequence of reductions runs in every CTA of a
 * cluster, after cluster_reduce_init. Scratch slots alternate by a counter (ctx.counter) so
 * consecutive reductions need one barrier each, not two.
 */
#ifndef RUDNN_REDUCE_CUH
#define RUDNN_REDUCE_CUH

#include "gpu_compat.h"
#include "mbarrier.cuh"

#if RUDNN_HAS_CLUSTERS
#include <cooperative_groups.h>
#endif

namespace {

/* Who takes part in a reduction: one warp, the CTA, every CTA of the cluster, a group of whole
 * warps of the CTA with its own named barrier (RED_GROUP, CUDA: red_group below), or that group
 * together with the groups of the same place in every CTA of the cluster (RED_GROUP_CLUSTER). */
enum { RED_WARP = 0, RED_BLOCK = 1, RED_CLUSTER = 2, RED_GROUP = 3, RED_GROUP_CLUSTER = 4 };
__host__ __device__ constexpr bool red_grouped(int scope)
{
    return scope == RED_GROUP || scope == RED_GROUP_CLUSTER;
}
__host__ __device__ constexpr bool red_clustered(int scope)
{
    return scope == RED_CLUSTER || scope == RED_GROUP_CLUSTER;
}

/* CTAs of a cluster at most (the portable limit) */
#define RDG_RED_MAX_CLUSTER 8

/* Cluster reductions: each CTA pushes its partial into every CTA's shared memory with st.async,
 * counted by that CTA's mbarrier for the slot, and waits on its own mbarrier only: one-way
 * latency, no cluster-wide barrier per reduction (against a cluster barrier and remote reads:
 * 6-26% faster in 15 of 16 cases of rows of 65536 and 131072 on the H200, bench/RESULTS.md). */

struct RedCtx {
    float *f;        /* [2][RDG_MAX_WARPS] warp partials (float part) */
    int *i;          /* [2][RDG_MAX_WARPS] warp partials (exponent part) */
    float2 *cl;      /* [2][RDG_RED_MAX_CLUSTER] the cluster's partials by slot and rank */
    uint64_t *bar;   /* [2] mbarriers: the partials of slot s have arrived */
    int csize;       /* CTAs in the cluster (RED_CLUSTER) */
    int rank;        /* this CTA's rank in the cluster */
    int counter;
    uint32_t parity; /* bit s: the phase parity of bar[s] to wait for next */
    int warp0;       /* RED_GROUP: the group's first warp, its warps, its named barrier */
    int nwarps;
    int bar_id;
};

/* Where a context's reductions stand: the scratch slot counter and, with clusters, the mbarriers'
 * phase parities. A callee that is not inlined takes the context by value (by reference it would
 * live in local memory in the caller's hot path too) and hands this back, so that the caller's
 * next reduction uses the next slot and waits on the right phase. */
template <bool CLUSTER>
struct RedPosOf {
    int counter;
    uint32_t parity;
};
template <>
struct RedPosOf<false> {
    int counter;
};
template <int SCOPE>
using RedPos = RedPosOf<red_clustered(SCOPE)>;
template <int SCOPE>
__device__ __forceinline__ RedPos<SCOPE> red_pos(const RedCtx &c)
{
    if constexpr (red_clustered(SCOPE))
        return RedPos<SCOPE>{c.counter, c.parity};
    else
        return RedPos<SCOPE>{c.counter};
}
template <int SCOPE>
__device__ __forceinline__ void red_set_pos(RedCtx &c, RedPos<SCOPE> p)
{
    c.counter = p.counter;
    if constexpr (red_clustered(SCOPE))
        c.parity = p.parity;
}

/* A context over the caller's scratch arrays (cl and bar: nullptr without a cluster). */
__device__ __forceinline__ RedCtx red_ctx(float *f, int *i, float2 *cl, uint64_t *bar, int csize, int rank)
{
    RedCtx c;
    c.f = f;
    c.i = i;
    c.cl = cl;
    c.bar = bar;
    c.csize = csize;
    c.rank = rank;
    c.counter = 0;
    c.parity = 0u;
    c.warp0 = 0;
    c.nwarps = 0;
    c.bar_id = 0;
    return c;
}

/* RED_GROUP (and RED_GROUP_CLUSTER): the group of nwarps warps from warp0 reduces alone,
 * synchronising on named barrier bar_id (1 to 15; 0 is __syncthreads'); its warp partials take
 * their own places in the scratch (warp0 + w), so groups never share a slot. */
__device__ __forceinline__ void red_group(RedCtx &c, int warp0, int nwarps, int bar_id)
{
    c.warp0 = warp0;
    c.nwarps = nwarps;
    c.bar_id = bar_id;
}

/* The next block reduction's scratch (slots alternate by ctx.counter, above) and this thread's
 * place: one definition for block_allreduce, block_allreduce2 and block_allreduce_es. */
struct RedStep {
    int slot; /* scratch slot: warp partials at c.f / c.i [slot * RDG_MAX_WARPS + base + warp], cluster exchange */
    int lane, warp, nwarps;
    int base; /* RED_GROUP: the group's first warp; 0 otherwise */
};
template <int SCOPE>
__device__ __forceinline__ RedStep red_step(RedCtx &c)
{
    RedStep r;
    r.slot = c.counter & 1;
    c.counter++;
    r.lane = threadIdx.x % RDG_WARP;
    r.base = red_grouped(SCOPE) ? c.warp0 : 0;
    r.warp = threadIdx.x / RDG_WARP - r.base;
    r.nwarps = red_grouped(SCOPE) ? c.nwarps : blockDim.x / RDG_WARP;
    return r;
}

/* The barrier between writing the warp partials and reading them: the CTA's, or the group's. */
template <int SCOPE>
__device__ __forceinline__ void red_sync(const RedCtx &c)
{
#if !RDG_HIP
    if constexpr (red_grouped(SCOPE)) {
        asm volatile("bar.sync %0, %1;\n" ::"r"(c.bar_id), "r"(c.nwarps * RDG_WARP) : "memory");
        return;
    }
#endif
    (void)c;
    __syncthreads();
}

/* 2^-e for e in [0, 149] (exact, subnormal past 126). */
__device__ __forceinline__ float pow2_neg(int e)
{
    return e <= 126 ? __uint_as_float((uint32_t)(127 - e) << 23)
                    : __uint_as_float(0x00400000u >> (e > 149 ? 23 : e - 127));
}

/* s * 2^k for k <= 0 with one or two multiplies (ldexpf is much larger code). Exact unless the
 * result is subnormal. */
__device__ __forceinline__ float scale_pow2(float s, int k)
{
    if (k >= -126)
        return s * __uint_as_float((uint32_t)(127 + k) << 23);
    k += 126;
    return (s * 1.17549435e-38f) * (k >= -126 ? __uint_as_float((uint32_t)(127 + k) << 23) : 0.0f);
}

/* max(0, frexp exponent of m) for m = max|x| >= 0 (inf/NaN give 129, subnormals 0). */
__device__ __forceinline__ int exp_of_max(float m)
{
    int biased = (int)(__float_as_uint(m) >> 23) & 0xff;
    return biased > 126 ? biased - 126 : 0;
}

/* Combines (e, s) with (e2, s2): s holds a sum scaled by 2^(-SHIFT*e). Symmetric in its two
 * arguments bit for bit, which the butterfly relies on. */
template <int SHIFT>
__device__ __forceinline__ void es_combine(int &e, float &s, int e2, float s2)
{
    if (e2 > e) {
        s = scale_pow2(s, SHIFT * (e - e2)) + s2;
        e = e2;
    } else {
        s = s + scale_pow2(s2, SHIFT * (e2 - e));
    }
}

struct SumOp {
    __device__ static float identity() { return 0.0f; }
    __device__ static float apply(float a, float b) { return a + b; }
};
struct MaxOp {
    __device__ static float identity() { return -INFINITY; }
    __device__ static float apply(float a, float b) { return fmaxf(a, b); }
};

template <class Op>
__device__ __forceinline__ float warp_allreduce(float v)
{
#pragma unroll
    for (int m = RDG_WARP / 2; m > 0; m >>= 1)
        v = Op::apply(v, RDG_SHFL_XOR(v, m));
    return v;
}

/* (e, s) warp reduction, two ways:
 *   REDUX (CUDA): the warp's max e (one redux.sync on sm_80+), each lane's s scaled to it once,
 *     then a plain sum butterfly;
 *   otherwise: an (e, s) butterfly with a rescale per step (always on HIP).
 * Same terms in another association; both deterministic and bit-identical in every lane (the
 * same e everywhere, commutative adds). The norm kernels choose per kernel (norm_math.cuh,
 * es_redux). */

/* the warp's maximum: one redux.sync on sm_80+ */
__device__ __forceinline__ int warp_max_i32(int v)
{
#if !RDG_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_max_sync(0xffffffffu, v);
#else
#pragma unroll
    for (int m = RDG_WARP / 2; m > 0; m >>= 1)
        v = max(v, RDG_SHFL_XOR(v, m));
    return v;
#endif
}

template <int SHIFT, bool REDUX>
__device__ __forceinline__ void warp_allreduce_es(int &e, float &s)
{
    if constexpr (REDUX && !RDG_HIP) {
        const int em = warp_max_i32(e);
        s = warp_allreduce<SumOp>(scale_pow2(s, SHIFT * (e - em)));
        e = em;
    } else {
#pragma unroll
        for (int m = RDG_WARP / 2; m > 0; m >>= 1) {
            int e2 = RDG_SHFL_XOR(e, m);
            float s2 = RDG_SHFL_XOR(s, m);
            es_combine<SHIFT>(e, s, e2, s2);
        }
    }
}

#if RUDNN_HAS_CLUSTERS
__device__ __forceinline__ void cluster_sync_all()
{
    cooperative_groups::this_cluster().sync();
}

__device__ __forceinline__ uint32_t red_smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* the shared::cluster address of CTA `rank`'s copy of this CTA's shared address a */
__device__ __forceinline__ uint32_t red_mapa(uint32_t a, int rank)
{
    uint32_t r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
    return r;
}

/* Before the first cluster reduction, by every thread of every CTA of the cluster: the mbarriers
 * exist before any CTA pushes to them. */
template <int SCOPE = RED_CLUSTER>
__device__ __forceinline__ void cluster_reduce_init(RedCtx &c)
{
    if (red_grouped(SCOPE) ? (int)threadIdx.x == c.warp0 * RDG_WARP : threadIdx.x == 0) {
        for (int s = 0; s < 2; s++)
            mbar_init(red_smem_u32(&c.bar[s]), 1);
        mbar_fence_init();
    }
    c.parity = 0u;
    cluster_sync_all();
}

/* Publishes this CTA's partial and returns the partials of every rank, combined in rank order
 * by the caller through the callback. Push form: slot s is written again two reductions later,
 * by a CTA that has finished the reduction in between, which needs this CTA's partial of it,
 * which thread 0 (the group's first thread, RED_GROUP_CLUSTER) pushes only after a block (group)
 * barrier that follows every thread's reads of slot s. In RED_GROUP_CLUSTER each group has its own
 * partials and mbarriers (c.cl, c.bar) at the same place in every CTA. */
template <int SCOPE, class F>
__device__ __forceinline__ void cluster_exchange(RedCtx &c, int slot, float2 mine, F combine)
{
    const uint32_t bar = red_smem_u32(&c.bar[slot]);
    /* the block (group) barrier above, when the reduction had none */
    if (red_grouped(SCOPE) ? c.nwarps == 1 : blockDim.x <= RDG_WARP)
        red_sync<SCOPE>(c);
    if (red_grouped(SCOPE) ? (int)threadIdx.x == c.warp0 * RDG_WARP : threadIdx.x == 0) {
        mbar_expect_tx(bar, c.csize * 8);
        const uint32_t dst = red_smem_u32(&c.cl[slot * RDG_RED_MAX_CLUSTER + c.rank]);
        for (int r = 0; r < c.csize; r++)
            asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];\n" ::"r"(
                             red_mapa(dst, r)),
                         "r"(__float_as_uint(mine.x)), "r"(__float_as_uint(mine.y)), "r"(red_mapa(bar, r))
                         : "memory");
    }
    asm volatile("{\n.reg .pred done;\nwait_%=:\n"
                 "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra wait_%=;\n}\n" ::"r"(bar),
                 "r"((c.parity >> slot) & 1u)
                 : "memory");
    c.parity ^= 1u << slot;
    for (int r = 0; r < c.csize; r++)
        combine(c.cl[slot * RDG_RED_MAX_CLUSTER + r]);
}
#else
__device__ __forceinline__ void cluster_sync_all() {}
template <int SCOPE = RED_CLUSTER>
__device__ __forceinline__ void cluster_reduce_init(RedCtx &) {}
template <int SCOPE, class F>
__device__ __forceinline__ void cluster_exchange(RedCtx &, int, float2, F)
{
    /* never launched with csize > 1 on a target without clusters */
}
#endif

template <class Op, int SCOPE>
__device__ __forceinline__ float block_allreduce(float v, RedCtx &c)
{
    const RedStep r = red_step<SCOPE>(c);
    v = warp_allreduce<Op>(v);
    if (SCOPE == RED_WARP)
        return v;
    if (r.nwarps > 1) {
        if (r.lane == 0)
            c.f[r.slot * RDG_MAX_WARPS + r.base + r.warp] = v;
        red_sync<SCOPE>(c);
        v = r.lane < r.nwarps ? c.f[r.slot * RDG_MAX_WARPS + r.base + r.lane] : Op::identity();
        v = warp_allreduce<Op>(v);
    }
    if (red_clustered(SCOPE)) {
        float acc = Op::identity();
        cluster_exchange<SCOPE>(c, r.slot, make_float2(v, 0.0f),
                         [&](float2 p) { acc = Op::apply(acc, p.x); });
        v = acc;
    }
    return v;
}

/* Two independent values reduced at once (two rows' partials): one barrier and one cluster
 * exchange for both. The y parts of the warp partials go through the exponent scratch. */
template <class Op, int SCOPE>
__device__ __forceinline__ float2 block_allreduce2(float2 v, RedCtx &c)
{
    const RedStep r = red_step<SCOPE>(c);
    v.x = warp_allreduce<Op>(v.x);
    v.y = warp_allreduce<Op>(v.y);
    if (SCOPE == RED_WARP)
        return v;
    if (r.nwarps > 1) {
        if (r.lane == 0) {
            c.f[r.slot * RDG_MAX_WARPS + r.base + r.warp] = v.x;
            c.i[r.slot * RDG_MAX_WARPS + r.base + r.warp] = __float_as_int(v.y);
        }
        red_sync<SCOPE>(c);
        v.x = r.lane < r.nwarps ? c.f[r.slot * RDG_MAX_WARPS + r.base + r.lane] : Op::identity();
        v.y = r.lane < r.nwarps ? __int_as_float(c.i[r.slot * RDG_MAX_WARPS + r.base + r.lane]) : Op::identity();
        v.x = warp_allreduce<Op>(v.x);
        v.y = warp_allreduce<Op>(v.y);
    }
    if (red_clustered(SCOPE)) {
        float2 acc = make_float2(Op::identity(), Op::identity());
        cluster_exchange<SCOPE>(c, r.slot, v, [&](float2 p) {
            acc.x = Op::apply(acc.x, p.x);
            acc.y = Op::apply(acc.y, p.y);
        });
        v = acc;
    }
    return v;
}

/* All-reduction of (e, s) pairs, s scaled by 2^(-SHIFT*e); returns the pair for the global max e. */
template <int SHIFT, int SCOPE, bool REDUX>
__device__ __forceinline__ void block_allreduce_es(int &e, float &s, RedCtx &c)
{
    const RedStep r = red_step<SCOPE>(c);
    warp_allreduce_es<SHIFT, REDUX>(e, s);
    if (SCOPE == RED_WARP)
        return;
    if (r.nwarps > 1) {
        if (r.lane == 0) {
            c.f[r.slot * RDG_MAX_WARPS + r.base + r.warp] = s;
            c.i[r.slot * RDG_MAX_WARPS + r.base + r.warp] = e;
        }
        red_sync<SCOPE>(c);
        if (r.lane < r.nwarps) {
            s = c.f[r.slot * RDG_MAX_WARPS + r.base + r.lane];
            e = c.i[r.slot * RDG_MAX_WARPS + r.base + r.lane];
        } else {
            s = 0.0f;
            e = 0;
        }
        warp_allreduce_es<SHIFT, REDUX>(e, s);
    }
    if (red_clustered(SCOPE)) {
        int ea = 0;
        float sa = 0.0f;
        cluster_exchange<SCOPE>(c, r.slot, make_float2(__int_as_float(e), s), [&](float2 p) {
            es_combine<SHIFT>(ea, sa, __float_as_int(p.x), p.y);
        });
        e = ea;
        s = sa;
    }
}

} // namespace

#endif
