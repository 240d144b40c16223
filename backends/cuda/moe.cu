/* Mixture-of-experts kernels, part 1: routing (softmax top-k, grouped sigmoid), the dispatch
 * plan, the row gather and the weighted combine, and the rudnn_moe_kernels_t table. The SwiGLU
 * expert GEMMs are in moe_experts.cu.
 *
 * Numerics and orderings follow backends/README.md ("Numeric contract of the MoE kernels"):
 * FP32 math, F16/BF16 storage rounded to nearest even through gpu_compat.h.
 *
 * Ranking. Scores become u32 keys: key() is a monotone map of floats in which NaN maps to 1, below
 * every number (the smallest number, -inf, maps to 0x007fffff), -0 equals +0, and 0 means "absent
 * or already taken". The order is key descending, then id ascending.
 *
 * Routing: one warp per token, lane l holding the keys of the contiguous experts l EPT .. l EPT +
 * EPT - 1 in registers (EPT a template parameter, E <= 32 W, W = warp size; one vector load per
 * lane). A top-k round is one warp max of the lanes' cached best keys and one warp min of the
 * lanes holding it (two redux.sync on sm_80+, butterflies elsewhere): lower lanes hold lower ids,
 * so that lane holds the lowest id. Each lane caches its two best untaken entries and rescans its
 * registers only when both are taken (LaneTopK). Softmax sums are xor butterflies, so every lane
 * holds the bit-identical value and nothing depends on timing. Grouped routing scores groups that
 * are whole lanes with butterflies, other groupings through the warp's shared memory. Softmax rows
 * longer than 32 W use a looped kernel that re-reads the logits each round and picks the largest
 * 64-bit composite key << 32 | ~id below the previous round's.
 *
 * Dispatch plan (no host synchronisation): a stable counting sort of the pairs by expert.
 *   K1 hist:     block b counts the experts of its chunk of pairs -> M[b][e]
 *   K2 scan:     one block: counts, offsets, and M[b][e] := offsets[e] + sum_{b' < b} M[b'][e]
 *   K3 rank:     block b walks its chunk in pair order, batch by batch; a pair's rank among the
 *                equal experts of its batch comes from shared memory, its base from M[b][e] (the
 *                block's own cursor row, advanced after each batch) -> positions
 *   K4 finish:   row_token[positions[p]] = p / k
 * M lives in the row_token buffer (block count nb is chosen so that nb * E <= T * k), which K4
 * overwrites last; with one block, M is the counts buffer itself (K4 restores the counts).
 *
 * Gather and combine: a power-of-two group of threads per row (up to the block), 16-byte accesses
 * (gather falls back to 8, 4 or 2 bytes, combine to scalars, when the row size or alignment does
 * not allow them); combine accumulates w * x with FMA in FP32 in slot order j = 0..k-1.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rdg_internal.h"
#include "elem.cuh"

namespace {

/* run-time dtype (the routing weights in combine) */
__device__ __forceinline__ float ld_any(int dt, const void *p, int64_t i)
{
    return dt == RUDNN_F32 ? Elem<RUDNN_F32>::ld(p, i)
         : dt == RUDNN_F16 ? Elem<RUDNN_F16>::ld(p, i)
                           : Elem<RUDNN_BF16>::ld(p, i);
}

/* ---- ranking keys ---- */

__device__ __forceinline__ uint32_t order_key(float v)
{
    const uint32_t u = __float_as_uint(v + 0.0f); /* -0 + 0 = +0: -0 ties with +0 */
    const uint32_t flip = (uint32_t)((int32_t)u >> 31) | 0x80000000u; /* negative: all bits */
    return v != v ? 1u : u ^ flip;
}

__device__ __forceinline__ float key_value(uint32_t k)
{
    if (k <= 1u)
        return __uint_as_float(0x7fc00000u); /* NaN (0: no value) */
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

__device__ __forceinline__ uint64_t composite(uint32_t key, uint32_t id)
{
    return ((uint64_t)key << 32) | (uint64_t)(~id);
}

__device__ __forceinline__ uint64_t shfl_xor_u64(uint64_t v, int m)
{
    const uint32_t lo = RDG_SHFL_XOR((uint32_t)v, m);
    const uint32_t hi = RDG_SHFL_XOR((uint32_t)(v >> 32), m);
    return ((uint64_t)hi << 32) | lo;
}

__device__ __forceinline__ uint64_t warp_max_u64(uint64_t v)
{
#pragma unroll
    for (int m = RDG_WARP / 2; m > 0; m >>= 1) {
        const uint64_t o = shfl_xor_u64(v, m);
        v = o > v ? o : v;
    }
    return v;
}

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int m = RDG_WARP / 2; m > 0; m >>= 1)
        v += RDG_SHFL_XOR(v, m);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
    for (int m = RDG_WARP / 2; m > 0; m >>= 1)
        v = fmaxf(v, RDG_SHFL_XOR(v, m));
    return v;
}

/* 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below: one exponential and one division, no branch */
__device__ __forceinline__ float sigmoid_stable(float x)
{
    const float e = expf(-fabsf(x));
    return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}

/* The sigmoid that ranks the experts of grouped routing (not the weights, which take
 * sigmoid_stable): the hardware exponential and reciprocal, within about 1e-6 relative of
 * sigmoid_stable and the same for equal logits; five instructions instead of about twenty, which
 * is most of what a warp issues per expert (RDG_ROUTE_FAST=0 restores sigmoid_stable, for A/B).
 * Limits: -inf and x < -88 give 0, +inf gives 1, NaN stays NaN. */
#ifndef RDG_ROUTE_FAST
#define RDG_ROUTE_FAST 1
#endif
__device__ __forceinline__ float sigmoid_rank(float x)
{
#if RDG_ROUTE_FAST && !RDG_HIP
    /* __expf without its subnormal fix-ups (which cannot change 1 + e^-x): two MUFU ops */
    float e, r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(x * -1.4426950408889634f));
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.0f + e));
    return r;
#elif RDG_ROUTE_FAST
    return __fdividef(1.0f, 1.0f + __expf(-x));
#else
    return sigmoid_stable(x);
#endif
}

#define ROUTE_THREADS 128

/* ---- a lane's candidates ----
 *
 * Lane l holds the keys of the contiguous experts l * EPT + i (i < EPT), so lower lanes hold lower
 * ids: among equal keys the lowest id is in the lowest lane holding the key, and within a lane in
 * the lowest i. Each lane caches its two best entries not yet taken. A round is one warp max of the
 * cached best keys and one warp min of the lanes holding it (two redux.sync on sm_80+); the owner
 * pops its cache, and rescans its registers (for entries ranked below the last one it gave away)
 * only when the cache ran dry, which a warp rarely has to wait for. */
template <int EPT>
struct LaneTopK {
    uint32_t key[EPT];
    uint32_t b1, b2; /* cached best keys, 0: none */
    int i1, i2;
    uint32_t last_key; /* the last entry given away: every untaken entry ranks below it */
    int last_i;

    template <bool ALL>
    __device__ __forceinline__ void fill()
    {
        b1 = b2 = 0u;
        i1 = i2 = 0;
#pragma unroll
        for (int i = 0; i < EPT; i++) {
            const uint32_t k = key[i];
            const bool below = ALL || k < last_key || (k == last_key && i > last_i);
            if (below && k > b1) {
                b2 = b1;
                i2 = i1;
                b1 = k;
                i1 = i;
            } else if (below && k > b2) {
                b2 = k;
                i2 = i;
            }
        }
    }
    __device__ __forceinline__ void start() { fill<true>(); }
    /* the next entry in ranking order, the same in every lane: returns its key, the lane that
     * held it and its register there (expert owner * EPT + i) */
    __device__ __forceinline__ uint32_t next(int lane, int *owner_out, int *i_out)
    {
        const uint32_t m = rdg_warp_max_u32(b1);
        const int owner = (int)rdg_warp_min_u32(b1 == m ? (uint32_t)lane : 0xffffffffu);
        const int i = RDG_SHFL(i1, owner);
        if (lane == owner) {
            last_key = b1;
            last_i = i1;
            b1 = b2;
            i1 = i2;
            b2 = 0u;
            if (b1 == 0u)
                fill<false>();
        }
        *owner_out = owner;
        *i_out = i;
        return m;
    }
};

/* v[i] = score of expert lane * EPT + i, `absent` past the row's end. One vector load per lane
 * (up to 16 bytes) when the lane's slice is whole and aligned. */
template <int DT, int EPT>
__device__ __forceinline__ void load_scores(const void *x, int lane, int experts, float absent, float (&v)[EPT])
{
    constexpr int ESIZE = DT == RUDNN_F32 ? 4 : 2;
    constexpr int BYTES = EPT * ESIZE;
    constexpr int VB = BYTES < 16 ? BYTES : 16;
    const int e0 = lane * EPT;
    const char *p = (const char *)x + (size_t)e0 * ESIZE;
    if (VB >= 4 && e0 + EPT <= experts && ((uintptr_t)p % VB) == 0) {
        uint32_t w[BYTES / 4 > 0 ? BYTES / 4 : 1];
#pragma unroll
        for (int c = 0; c < BYTES / VB; c++) {
            if constexpr (VB == 16) {
                const uint4 q = *(const uint4 *)(p + c * 16);
                w[c * 4] = q.x;
                w[c * 4 + 1] = q.y;
                w[c * 4 + 2] = q.z;
                w[c * 4 + 3] = q.w;
            } else if constexpr (VB == 8) {
                const uint2 q = *(const uint2 *)(p + c * 8);
                w[c * 2] = q.x;
                w[c * 2 + 1] = q.y;
            } else {
                w[c] = *(const uint32_t *)(p + c * 4);
            }
        }
#pragma unroll
        for (int i = 0; i < EPT; i++) {
            if constexpr (DT == RUDNN_F32) {
                v[i] = __uint_as_float(w[i]);
            } else {
                const uint16_t h = (uint16_t)(w[i / 2] >> (16 * (i % 2)));
                v[i] = DT == RUDNN_F16 ? rdg_f16_to_f32(h) : rdg_bf16_to_f32(h);
            }
        }
        return;
    }
#pragma unroll
    for (int i = 0; i < EPT; i++)
        v[i] = e0 + i < experts ? Elem<DT>::ld(x, e0 + i) : absent;
}

/* The top_k rounds: slot j's expert goes to lane j % W, register j / W (top_k <= W * EPT);
 * value[] receives the slot's key for the caller to turn into a weight. */
template <int EPT>
__device__ __forceinline__ void take_top_k(LaneTopK<EPT> &tk, int lane, int top_k, uint32_t (&my_id)[EPT],
                                           uint32_t (&my_key)[EPT], float *sel_sum)
{
    float sum = 0.0f;
    RDG_UNROLL_EARLY_EXIT
    for (int c = 0; c < EPT; c++) {
        my_id[c] = 0u;
        my_key[c] = 0u;
        if (c * RDG_WARP >= top_k)
            break;
        const int n = top_k - c * RDG_WARP < RDG_WARP ? top_k - c * RDG_WARP : RDG_WARP;
#pragma unroll 1
        for (int jj = 0; jj < n; jj++) {
            int owner, i;
            const uint32_t m = tk.next(lane, &owner, &i);
            sum += key_value(m); /* slot order, the same in every lane */
            if (lane == jj) {
                my_id[c] = (uint32_t)(owner * EPT + i);
                my_key[c] = m;
            }
        }
    }
    *sel_sum = sum;
}

/* ---- softmax top-k: E <= W * EPT, scores in registers ---- */

template <int DT, int EPT>
__global__ void RDG_LAUNCH_BOUNDS(ROUTE_THREADS, 4)
route_softmax_kernel(const void *__restrict__ logits, uint32_t *__restrict__ indices, void *__restrict__ weights,
                     int64_t tokens, int experts, int top_k, int renormalize)
{
    const int lane = (int)(threadIdx.x % RDG_WARP);
    const int64_t t = (int64_t)blockIdx.x * (ROUTE_THREADS / RDG_WARP) + threadIdx.x / RDG_WARP;
    if (t >= tokens)
        return; /* whole warps */
    const size_t esize = DT == RUDNN_F32 ? 4 : 2;
    const void *x = (const char *)logits + (size_t)t * experts * esize;

    float v[EPT];
    load_scores<DT, EPT>(x, lane, experts, -INFINITY, v);
    float m = v[0];
#pragma unroll
    for (int i = 1; i < EPT; i++)
        m = fmaxf(m, v[i]);
    m = warp_max(m);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < EPT; i++) {
        v[i] = lane * EPT + i < experts ? expf(v[i] - m) : 0.0f;
        s += v[i];
    }
    s = warp_sum(s);
    /* p = e * (1 / s): monotone in e like e / s, within an ulp of it; s >= 1 or NaN */
    const float r = 1.0f / s;
    LaneTopK<EPT> tk;
#pragma unroll
    for (int i = 0; i < EPT; i++)
        tk.key[i] = lane * EPT + i < experts ? order_key(v[i] * r) : 0u;
    tk.start();

    uint32_t my_id[EPT], my_key[EPT];
    float sel_sum;
    take_top_k<EPT>(tk, lane, top_k, my_id, my_key, &sel_sum);
    RDG_UNROLL_EARLY_EXIT
    for (int c = 0; c < EPT; c++) {
        const int j = lane + c * RDG_WARP;
        if (c * RDG_WARP >= top_k)
            break;
        if (j < top_k) {
            const float p = key_value(my_key[c]); /* exactly the p ranked */
            indices[t * top_k + j] = my_id[c];
            Elem<DT>::st(weights, t * top_k + j, renormalize ? p / sel_sum : p);
        }
    }
}

/* ---- softmax top-k, any E: the same with the scores re-read from memory ---- */

template <int DT>
__global__ void RDG_LAUNCH_BOUNDS(ROUTE_THREADS, 4)
route_softmax_loop_kernel(const void *__restrict__ logits, uint32_t *__restrict__ indices, void *__restrict__ weights,
                          int64_t tokens, int experts, int top_k, int renormalize)
{
    const int lane = (int)(threadIdx.x % RDG_WARP);
    const int64_t t = (int64_t)blockIdx.x * (ROUTE_THREADS / RDG_WARP) + threadIdx.x / RDG_WARP;
    if (t >= tokens)
        return;
    const size_t esize = DT == RUDNN_F32 ? 4 : 2;
    const void *x = (const char *)logits + (size_t)t * experts * esize;

    float m = -INFINITY;
    for (int e = lane; e < experts; e += RDG_WARP)
        m = fmaxf(m, Elem<DT>::ld(x, e));
    m = warp_max(m);
    float s = 0.0f;
    for (int e = lane; e < experts; e += RDG_WARP)
        s += expf(Elem<DT>::ld(x, e) - m);
    s = warp_sum(s);

    uint32_t *idx = indices + t * top_k;
    uint64_t prev = ~0ull;
    float sel_sum = 0.0f;
    for (int j = 0; j < top_k; j++) {
        uint64_t best = 0;
        for (int e = lane; e < experts; e += RDG_WARP) {
            const uint64_t c = composite(order_key(expf(Elem<DT>::ld(x, e) - m) / s), (uint32_t)e);
            best = (c < prev && c > best) ? c : best;
        }
        best = warp_max_u64(best);
        prev = best;
        const float p = key_value((uint32_t)(best >> 32));
        sel_sum += p;
        if (lane == j % RDG_WARP) {
            idx[j] = ~(uint32_t)best;
            if (!renormalize)
                Elem<DT>::st(weights, t * top_k + j, p);
        }
    }
    if (renormalize) {
        for (int j = lane; j < top_k; j += RDG_WARP) {
            const float p = expf(Elem<DT>::ld(x, idx[j]) - m) / s;
            Elem<DT>::st(weights, t * top_k + j, p / sel_sum);
        }
    }
}

/* ---- grouped sigmoid top-k (E <= 1024, G <= 128, k <= 64) ----
 *
 * Selection keys are those of s = p + bias, p = sigmoid(logit). A group's score is its best key, or
 * the sum of its two best s (NaN ranks lowest, so a NaN is counted only when fewer than two numbers
 * remain).
 *   - aligned groups (lanes_per_group > 0: E / G a multiple of EPT, E / (G EPT) lanes a power of
 *     two): a group is whole lanes, its score comes from xor butterflies over them, and the
 *     selected groups come from rounds over the lanes' group scores, as the experts do;
 *   - otherwise the keys go through the warp's shared memory, lanes split the groups, and the
 *     selected groups become a 128-bit mask in every lane.
 * Experts outside the selected groups drop out before the top-k rounds. The weights are the raw
 * p, recomputed from the logits by the lane holding the slot. */

#define GROUPED_MAX_GROUPS 128
#define GROUPED_MAX_TOP_K 64
#define GROUPS_PER_LANE ((GROUPED_MAX_GROUPS + RDG_WARP - 1) / RDG_WARP)

/* keys only (no ids): branch-free, three instructions */
__device__ __forceinline__ void top_two_insert(uint32_t kk, uint32_t &k1, uint32_t &k2)
{
    k2 = max(k2, min(k1, kk));
    k1 = max(k1, kk);
}

/* merges the (k1, k2) of the lanes lane ^ 1, ..., lane ^ (lanes / 2) */
__device__ __forceinline__ void top_two_merge(uint32_t &k1, uint32_t &k2, int lanes)
{
    for (int msk = 1; msk < lanes; msk <<= 1) {
        const uint32_t o1 = RDG_SHFL_XOR(k1, msk);
        const uint32_t o2 = RDG_SHFL_XOR(k2, msk);
        const uint32_t lo = min(k1, o1);
        k1 = max(k1, o1);
        k2 = max(lo, max(k2, o2));
    }
}

__device__ __forceinline__ uint32_t group_score(uint32_t k1, uint32_t k2, int top_two)
{
    return top_two ? order_key(key_value(k1) + key_value(k2)) : k1;
}

/* Shared-memory grouping: clears the keys of the experts outside the selected groups. */
template <int EPT>
__device__ __forceinline__ void keep_selected_groups_smem(uint32_t (&key)[EPT], uint32_t *ks, int lane,
                                                           int experts, int groups, int selected_groups,
                                                           int top_two)
{
    uint32_t *gk = ks + experts; /* group keys [G] */
#pragma unroll
    for (int i = 0; i < EPT; i++)
        if (lane * EPT + i < experts)
            ks[lane * EPT + i] = key[i];
    RDG_SYNCWARP();
    const int gsize = experts / groups;
    int lpg = 1; /* lanes per group: a power of two, lpg * groups <= W */
    while (lpg * 2 * groups <= RDG_WARP)
        lpg *= 2;
    const int gpp = RDG_WARP / lpg; /* groups per pass */
    for (int g0 = 0; g0 < groups; g0 += gpp) {
        const int g = g0 + lane / lpg;
        uint32_t k1 = 0u, k2 = 0u;
        if (g < groups)
            for (int e = g * gsize + lane % lpg; e < (g + 1) * gsize; e += lpg)
                top_two_insert(ks[e], k1, k2);
        top_two_merge(k1, k2, lpg);
        if (g < groups && lane % lpg == 0)
            gk[g] = group_score(k1, k2, top_two);
    }
    RDG_SYNCWARP();

    LaneTopK<GROUPS_PER_LANE> gt;
#pragma unroll
    for (int c = 0; c < GROUPS_PER_LANE; c++) {
        const int g = lane * GROUPS_PER_LANE + c;
        gt.key[c] = g < groups ? gk[g] : 0u;
    }
    gt.start();
    uint32_t gmask[4] = {0u, 0u, 0u, 0u};
#pragma unroll 1
    for (int r = 0; r < selected_groups; r++) {
        int owner, i;
        (void)gt.next(lane, &owner, &i);
        const uint32_t g = (uint32_t)(owner * GROUPS_PER_LANE + i);
#pragma unroll
        for (int w = 0; w < 4; w++)
            gmask[w] |= (g >> 5) == (uint32_t)w ? 1u << (g & 31u) : 0u;
    }
    /* group of e = e / gsize by a multiply (exact for e < 1024, gsize <= 1024: the error of the
     * rounded-up reciprocal stays below 1 / gsize) */
    const uint32_t magic = ((1u << 20) + (uint32_t)gsize - 1u) / (uint32_t)gsize;
#pragma unroll
    for (int i = 0; i < EPT; i++) {
        const uint32_t e = (uint32_t)(lane * EPT + i);
        const uint32_t g = (e * magic) >> 20;
        const uint32_t w = g >> 5;
        const uint32_t word = w == 0 ? gmask[0] : w == 1 ? gmask[1] : w == 2 ? gmask[2] : gmask[3];
        if (!((word >> (g & 31u)) & 1u))
            key[i] = 0u;
    }
}

template <int DT, int EPT>
__global__ void RDG_LAUNCH_BOUNDS(ROUTE_THREADS, 4)
route_grouped_kernel(const void *__restrict__ logits, const float *__restrict__ bias,
                     uint32_t *__restrict__ indices, void *__restrict__ weights, int64_t tokens, int experts,
                     int top_k, int renormalize, int groups, int selected_groups, int top_two, float scale,
                     int lanes_per_group)
{
    extern __shared__ uint32_t route_smem[];
    const int lane = (int)(threadIdx.x % RDG_WARP);
    const int warp = (int)(threadIdx.x / RDG_WARP);
    const int64_t t = (int64_t)blockIdx.x * (ROUTE_THREADS / RDG_WARP) + warp;
    if (t >= tokens)
        return; /* whole warps; only warp barriers below */
    const size_t esize = DT == RUDNN_F32 ? 4 : 2;
    const void *x = (const char *)logits + (size_t)t * experts * esize;

    float v[EPT], b[EPT];
    load_scores<DT, EPT>(x, lane, experts, 0.0f, v);
    if (bias)
        load_scores<RUDNN_F32, EPT>(bias, lane, experts, 0.0f, b);
    LaneTopK<EPT> tk;
    if ((lane + 1) * EPT <= experts) { /* the lane's experts all exist: no per-expert test */
#pragma unroll
        for (int i = 0; i < EPT; i++) {
            const float p = sigmoid_rank(v[i]);
            tk.key[i] = order_key(bias ? p + b[i] : p);
        }
    } else {
#pragma unroll
        for (int i = 0; i < EPT; i++) {
            const float p = sigmoid_rank(v[i]);
            tk.key[i] = lane * EPT + i < experts ? order_key(bias ? p + b[i] : p) : 0u;
        }
    }

    if (lanes_per_group > 0) {
        uint32_t k1 = 0u, k2 = 0u;
#pragma unroll
        for (int i = 0; i < EPT; i++)
            top_two_insert(tk.key[i], k1, k2);
        top_two_merge(k1, k2, lanes_per_group);
        uint32_t avail = lane * EPT < experts ? group_score(k1, k2, top_two) : 0u;
        bool chosen = false;
#pragma unroll 1
        for (int r = 0; r < selected_groups; r++) {
            const uint32_t m = rdg_warp_max_u32(avail);
            const int owner = (int)rdg_warp_min_u32(avail == m ? (uint32_t)lane : 0xffffffffu);
            if ((lane ^ owner) < lanes_per_group) { /* same group: lanes_per_group is a power of two */
                chosen = true;
                avail = 0u;
            }
        }
        if (!chosen)
#pragma unroll
            for (int i = 0; i < EPT; i++)
                tk.key[i] = 0u;
    } else {
        keep_selected_groups_smem<EPT>(tk.key, route_smem + (size_t)warp * (experts + groups), lane, experts,
                                       groups, selected_groups, top_two);
    }
    tk.start();

    uint32_t my_id[EPT], my_key[EPT];
    float unused;
    take_top_k<EPT>(tk, lane, top_k, my_id, my_key, &unused);
    /* slots c * W + lane; the loops stop at the last slot group (top_k <= W: one pass) */
    float p[EPT];
    float part = 0.0f;
    RDG_UNROLL_EARLY_EXIT
    for (int c = 0; c < EPT; c++) {
        if (c * RDG_WARP >= top_k)
            break;
        const int j = lane + c * RDG_WARP;
        p[c] = 0.0f;
        if (j < top_k) {
            p[c] = sigmoid_stable(Elem<DT>::ld(x, my_id[c]));
            part += p[c];
        }
    }
    const float sum = renormalize ? warp_sum(part) : 1.0f;
    RDG_UNROLL_EARLY_EXIT
    for (int c = 0; c < EPT; c++) {
        if (c * RDG_WARP >= top_k)
            break;
        const int j = lane + c * RDG_WARP;
        if (j < top_k) {
            indices[t * top_k + j] = my_id[c];
            Elem<DT>::st(weights, t * top_k + j, (renormalize ? p[c] / sum : p[c]) * scale);
        }
    }
}

/* ---- dispatch plan ---- */

#define PLAN_HIST_THREADS 256
#define PLAN_RANK_THREADS 128
#define PLAN_SCAN_THREADS 1024
#define PLAN_SMEM_BINS 12288 /* experts counted in shared memory (48 KiB); beyond: global atomics */

/* K1: m[b * E + e] = pairs of chunk b routed to e. Shared-memory bins when E fits (every entry of
 * the row is written), else global atomics into a zeroed m. */
__global__ void RDG_LAUNCH_BOUNDS(PLAN_HIST_THREADS, 4)
plan_hist_kernel(const uint32_t *__restrict__ idx, uint32_t *__restrict__ m, int64_t pairs, int64_t chunk,
                 int experts, int smem_bins)
{
    extern __shared__ uint32_t hist_smem[];
    const int64_t b = blockIdx.x;
    const int64_t beg = b * chunk;
    const int64_t end = min(pairs, beg + chunk);
    uint32_t *row = m + b * experts;
    if (smem_bins) {
        for (int e = threadIdx.x; e < experts; e += blockDim.x)
            hist_smem[e] = 0u;
        __syncthreads();
        for (int64_t p = beg + threadIdx.x; p < end; p += blockDim.x)
            atomicAdd(&hist_smem[idx[p]], 1u);
        __syncthreads();
        for (int e = threadIdx.x; e < experts; e += blockDim.x)
            row[e] = hist_smem[e];
    } else {
        for (int64_t p = beg + threadIdx.x; p < end; p += blockDim.x)
            atomicAdd(&row[idx[p]], 1u);
    }
}

/* Exclusive block-wide scan of one value per thread (blockDim a multiple of the warp size); the
 * xor butterfly gives inclusive warp prefixes. Returns the exclusive prefix, *total the block sum.
 * Ends with a barrier, so the scratch can be reused at once. */
__device__ uint32_t block_exclusive_scan(uint32_t v, uint32_t *scratch, uint32_t *total)
{
    const int lane = threadIdx.x % RDG_WARP;
    const int warp = threadIdx.x / RDG_WARP;
    const int nwarps = blockDim.x / RDG_WARP;
    uint32_t incl = v, sum = v;
#pragma unroll
    for (int msk = 1; msk < RDG_WARP; msk <<= 1) {
        const uint32_t o = RDG_SHFL_XOR(sum, msk);
        if (lane & msk)
            incl += o;
        sum += o;
    }
    if (lane == RDG_WARP - 1)
        scratch[warp] = sum;
    __syncthreads();
    uint32_t before = 0, all = 0;
    for (int w = 0; w < nwarps; w++) {
        const uint32_t s = scratch[w];
        before += w < warp ? s : 0u;
        all += s;
    }
    __syncthreads();
    *total = all;
    return before + incl - v;
}

/* K2 (one block): counts, offsets and the per-chunk bases m[b][e] := offsets[e] + sum of the
 * chunks before b. Threads split into `slices` groups of chunk rows per expert, so that a few
 * experts still use the whole block: thread (sl, el) handles expert e0 + el, rows of slice sl. */
__global__ void RDG_LAUNCH_BOUNDS(PLAN_SCAN_THREADS, 1)
plan_scan_kernel(uint32_t *__restrict__ m, uint32_t *__restrict__ counts, uint32_t *__restrict__ offsets,
                 int64_t nb, int experts, int slices, int counts_alias)
{
    __shared__ uint32_t part[PLAN_SCAN_THREADS];
    __shared__ uint32_t base[PLAN_SCAN_THREADS];
    __shared__ uint32_t scratch[RDG_MAX_WARPS];
    const int per = blockDim.x / slices; /* experts per step */
    const int el = threadIdx.x % per;
    const int sl = threadIdx.x / per;
    const int64_t rb = nb * sl / slices, re = nb * (sl + 1) / slices;
    uint32_t carry = 0;
    for (int e0 = 0; e0 < experts; e0 += per) {
        const int e = e0 + el;
        uint32_t s = 0;
        if (e < experts) {
#pragma unroll 8
            for (int64_t b = rb; b < re; b++)
                s += m[b * experts + e];
        }
        part[threadIdx.x] = s;
        __syncthreads();
        /* the scan runs over threads 0..per-1 (slice 0), the others add zeros */
        uint32_t total = 0;
        if (sl == 0)
            for (int q = 0; q < slices; q++)
                total += part[q * per + el];
        uint32_t block_sum;
        const uint32_t excl = block_exclusive_scan(sl == 0 ? total : 0u, scratch, &block_sum);
        if (sl == 0) {
            base[el] = carry + excl;
            if (e < experts) {
                offsets[e] = carry + excl;
                if (!counts_alias)
                    counts[e] = total;
            }
        }
        __syncthreads();
        if (e < experts) {
            uint32_t run = base[el];
            for (int q = 0; q < sl; q++)
                run += part[q * per + el];
            for (int64_t b = rb; b < re; b++) {
                const uint32_t v = m[b * experts + e];
                m[b * experts + e] = run;
                run += v;
            }
        }
        carry += block_sum;
        __syncthreads(); /* part and base are rewritten by the next step */
    }
    if (threadIdx.x == 0)
        offsets[experts] = carry;
}

/* K3: block b walks its chunk in pair order, PLAN_RANK_THREADS pairs at a time. A pair's position
 * is the cursor of its expert (m[b][e], this block's own row) plus the number of earlier pairs of
 * the batch with the same expert; the last such pair of the batch advances the cursor. */
__global__ void RDG_LAUNCH_BOUNDS(PLAN_RANK_THREADS, 8)
plan_rank_kernel(const uint32_t *__restrict__ idx, uint32_t *__restrict__ m, uint32_t *__restrict__ positions,
                 int64_t pairs, int64_t chunk, int experts)
{
    __shared__ __align__(16) uint32_t se[PLAN_RANK_THREADS];
    const int64_t b = blockIdx.x;
    const int64_t beg = b * chunk;
    const int64_t end = min(pairs, beg + chunk);
    uint32_t *cursor = m + b * experts;
    const int tid = threadIdx.x;
    for (int64_t base = beg; base < end; base += PLAN_RANK_THREADS) {
        const int64_t p = base + tid;
        const bool valid = p < end;
        const uint32_t e = valid ? idx[p] : 0xffffffffu;
        se[tid] = e;
        __syncthreads();
        int before = 0, same = 0;
#pragma unroll 4
        for (int i = 0; i < PLAN_RANK_THREADS; i += 4) {
            const uint4 q = *(const uint4 *)&se[i];
            before += (q.x == e && i < tid) + (q.y == e && i + 1 < tid) + (q.z == e && i + 2 < tid) +
                      (q.w == e && i + 3 < tid);
            same += (q.x == e) + (q.y == e) + (q.z == e) + (q.w == e);
        }
        uint32_t pos = 0;
        if (valid) {
            pos = cursor[e] + (uint32_t)before;
            positions[p] = pos;
        }
        __syncthreads(); /* every cursor read of the batch is done */
        if (valid && before == same - 1)
            cursor[e] = pos + 1;
        __syncthreads(); /* cursor writes visible, se free */
    }
}

/* K4: row_token[positions[p]] = p / k; with the counts as cursors, restores counts = end - start. */
__global__ void plan_finish_kernel(const uint32_t *__restrict__ positions, uint32_t *__restrict__ row_token,
                                   uint32_t *__restrict__ counts, const uint32_t *__restrict__ offsets,
                                   int64_t pairs, int top_k, int experts, int counts_alias)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < pairs)
        row_token[positions[i]] = (uint32_t)(i / top_k);
    if (counts_alias && i < experts)
        counts[i] -= offsets[i];
}

/* ---- gather and combine ---- */

#define ROWS_THREADS 256

/* tokens[r, :] = input[row_token[r], :], U-sized units (16, 8, 4 or 2 bytes), rows of `units`. */
template <class U>
__global__ void RDG_LAUNCH_BOUNDS(ROWS_THREADS, 4)
gather_kernel(const U *__restrict__ input, const uint32_t *__restrict__ row_token, U *__restrict__ tokens,
              int64_t rows, int64_t units, int tpr)
{
    const int64_t r = (int64_t)blockIdx.x * (ROWS_THREADS / tpr) + threadIdx.x / tpr;
    if (r >= rows)
        return;
    const U *src = input + (int64_t)row_token[r] * units;
    U *dst = tokens + r * units;
    for (int64_t u = threadIdx.x % tpr; u < units; u += tpr)
        dst[u] = src[u];
}

/* out[t, h] = round(sum_j w[t, j] * x[pos[t*k + j], h]), FP32, slot order. VEC elements per thread
 * (16-byte accesses; VEC = 1: scalar). */
template <int DT, int VEC>
__device__ __forceinline__ void load_vec(const void *x, int64_t i, float (&v)[VEC])
{
    if constexpr (VEC == 1) {
        v[0] = Elem<DT>::ld(x, i);
    } else if constexpr (DT == RUDNN_F32) {
        const float4 q = *(const float4 *)((const float *)x + i);
        v[0] = q.x;
        v[1] = q.y;
        v[2] = q.z;
        v[3] = q.w;
    } else {
        const uint4 q = *(const uint4 *)((const uint16_t *)x + i);
        const uint32_t u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int h = 0; h < 4; h++) {
            if constexpr (DT == RUDNN_BF16) {
                v[2 * h] = __uint_as_float(u[h] << 16);
                v[2 * h + 1] = __uint_as_float(u[h] & 0xffff0000u);
            } else {
                v[2 * h] = rdg_f16_to_f32((uint16_t)(u[h] & 0xffffu));
                v[2 * h + 1] = rdg_f16_to_f32((uint16_t)(u[h] >> 16));
            }
        }
    }
}

template <int DT, int VEC>
__device__ __forceinline__ void store_vec(void *y, int64_t i, const float (&v)[VEC])
{
    if constexpr (VEC == 1) {
        Elem<DT>::st(y, i, v[0]);
    } else if constexpr (DT == RUDNN_F32) {
        *(float4 *)((float *)y + i) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
        uint32_t u[4];
#pragma unroll
        for (int h = 0; h < 4; h++) {
            if constexpr (DT == RUDNN_BF16)
                u[h] = rdg_pack_bf16x2(v[2 * h], v[2 * h + 1]);
            else
                u[h] = (uint32_t)rdg_f32_to_f16(v[2 * h]) | ((uint32_t)rdg_f32_to_f16(v[2 * h + 1]) << 16);
        }
        *(uint4 *)((uint16_t *)y + i) = make_uint4(u[0], u[1], u[2], u[3]);
    }
}

template <int DT, int VEC>
__global__ void RDG_LAUNCH_BOUNDS(ROWS_THREADS, 4)
combine_kernel(const void *__restrict__ x, const uint32_t *__restrict__ positions, const void *__restrict__ w,
               int wdt, void *__restrict__ out, int64_t tokens, int64_t hidden, int top_k, int tpr)
{
    const int64_t t = (int64_t)blockIdx.x * (ROWS_THREADS / tpr) + threadIdx.x / tpr;
    if (t >= tokens)
        return;
    const int64_t nv = hidden / VEC;
    const uint32_t *pos = positions + t * top_k;
    for (int64_t v = threadIdx.x % tpr; v < nv; v += tpr) {
        float acc[VEC];
#pragma unroll
        for (int q = 0; q < VEC; q++)
            acc[q] = 0.0f;
        for (int j = 0; j < top_k; j++) {
            const float wj = ld_any(wdt, w, t * top_k + j);
            float xv[VEC];
            load_vec<DT, VEC>(x, (int64_t)pos[j] * hidden + v * VEC, xv);
#pragma unroll
            for (int q = 0; q < VEC; q++)
                acc[q] = fmaf(wj, xv[q], acc[q]);
        }
        store_vec<DT, VEC>(out, t * hidden + v * VEC, acc);
    }
}

/* ---- host side ---- */

rudnn_status_t begin(rdg_queue_t *q) { return rdg_use_device(q->dev.index); }

int warp_size(const rdg_queue_t *q)
{
    return q->dev.warp_size > 0 ? q->dev.warp_size : 32;
}

/* registers per lane for E experts: the smallest of 1, 2, 4, ..., 32 with E <= W * EPT; 0 if none */
int pick_ept(int64_t experts, int w)
{
    for (int ept = 1; ept <= 32; ept *= 2)
        if (experts <= (int64_t)w * ept)
            return ept;
    return 0;
}

typedef void (*softmax_fn)(const void *, uint32_t *, void *, int64_t, int, int, int);
typedef void (*grouped_fn)(const void *, const float *, uint32_t *, void *, int64_t, int, int, int, int, int, int,
                           float, int);

template <int DT>
softmax_fn softmax_kernel_for(int ept)
{
    switch (ept) {
    case 1:
        return route_softmax_kernel<DT, 1>;
    case 2:
        return route_softmax_kernel<DT, 2>;
    case 4:
        return route_softmax_kernel<DT, 4>;
    case 8:
        return route_softmax_kernel<DT, 8>;
    case 16:
        return route_softmax_kernel<DT, 16>;
    case 32:
        return route_softmax_kernel<DT, 32>;
    default:
        return route_softmax_loop_kernel<DT>;
    }
}

template <int DT>
grouped_fn grouped_kernel_for(int ept)
{
    switch (ept) {
    case 1:
        return route_grouped_kernel<DT, 1>;
    case 2:
        return route_grouped_kernel<DT, 2>;
    case 4:
        return route_grouped_kernel<DT, 4>;
    case 8:
        return route_grouped_kernel<DT, 8>;
    case 16:
        return route_grouped_kernel<DT, 16>;
    default:
        return route_grouped_kernel<DT, 32>;
    }
}

rudnn_status_t k_route_softmax(void *queue, const rudnn_route_kernel_plan_t *plan, rudnn_mem_ref_t logits,
                               rudnn_mem_ref_t indices, rudnn_mem_ref_t weights)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    if (plan->tokens <= 0)
        return RUDNN_STATUS_SUCCESS;
    TRY(begin(q));
    const int w = warp_size(q);
    const int ept = pick_ept(plan->experts, w);
    softmax_fn fn = plan->dtype == RUDNN_F32   ? softmax_kernel_for<RUDNN_F32>(ept)
                    : plan->dtype == RUDNN_F16 ? softmax_kernel_for<RUDNN_F16>(ept)
                                               : softmax_kernel_for<RUDNN_BF16>(ept);
    const int64_t per_block = ROUTE_THREADS / w;
    fn<<<dim3((unsigned)rdg_ceil_div(plan->tokens, per_block)), dim3(ROUTE_THREADS), 0, q->stream>>>(
        rdg_at(logits), (uint32_t *)rdg_at(indices), rdg_at(weights), plan->tokens, plan->experts, plan->top_k,
        plan->renormalize);
    return rdg_launched("moe route_softmax");
}

rudnn_status_t k_route_sigmoid_grouped(void *queue, const rudnn_route_kernel_plan_t *plan, rudnn_mem_ref_t logits,
                                       rudnn_mem_ref_t bias, rudnn_mem_ref_t indices, rudnn_mem_ref_t weights)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    if (plan->tokens <= 0)
        return RUDNN_STATUS_SUCCESS;
    TRY(begin(q));
    const int w = warp_size(q);
    const int ept = pick_ept(plan->experts, w);
    if (ept == 0 || plan->groups < 1 || plan->groups > GROUPED_MAX_GROUPS || plan->top_k > GROUPED_MAX_TOP_K)
        return rdg_error(RUDNN_STATUS_INTERNAL, "%s: moe route_sigmoid_grouped: %d experts, %d groups, top_k %d "
                         "outside the kernel's limits", RUDNN_GPU_BACKEND_NAME, plan->experts, plan->groups,
                         plan->top_k);
    grouped_fn fn = plan->dtype == RUDNN_F32   ? grouped_kernel_for<RUDNN_F32>(ept)
                    : plan->dtype == RUDNN_F16 ? grouped_kernel_for<RUDNN_F16>(ept)
                                               : grouped_kernel_for<RUDNN_BF16>(ept);
    const int64_t per_block = ROUTE_THREADS / w;
    /* aligned groups: each group is a power of two of whole lanes (no shared memory) */
    const int gsize = plan->experts / plan->groups;
    int lanes_per_group = gsize % ept == 0 ? gsize / ept : 0;
    if (lanes_per_group & (lanes_per_group - 1))
        lanes_per_group = 0;
    const size_t smem = lanes_per_group
                            ? 0
                            : (size_t)per_block * (size_t)(plan->experts + plan->groups) * sizeof(uint32_t);
    fn<<<dim3((unsigned)rdg_ceil_div(plan->tokens, per_block)), dim3(ROUTE_THREADS), smem, q->stream>>>(
        rdg_at(logits), (const float *)rdg_at(bias), (uint32_t *)rdg_at(indices), rdg_at(weights), plan->tokens, plan->experts,
        plan->top_k, plan->renormalize, plan->groups, plan->selected_groups, plan->group_top_two, plan->scale,
        lanes_per_group);
    return rdg_launched("moe route_sigmoid_grouped");
}

rudnn_status_t k_dispatch_plan(void *queue, const rudnn_moe_rows_plan_t *plan, rudnn_mem_ref_t indices,
                               rudnn_mem_ref_t counts, rudnn_mem_ref_t offsets, rudnn_mem_ref_t positions,
                               rudnn_mem_ref_t row_token)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    const int64_t pairs = plan->rows;
    const int64_t experts = plan->experts;
    if (pairs <= 0)
        return RUDNN_STATUS_SUCCESS;
    TRY(begin(q));
    const uint32_t *idx = (const uint32_t *)rdg_at(indices);
    uint32_t *cnt = (uint32_t *)rdg_at(counts);
    uint32_t *off = (uint32_t *)rdg_at(offsets);
    uint32_t *pos = (uint32_t *)rdg_at(positions);
    uint32_t *rtok = (uint32_t *)rdg_at(row_token);

    /* chunk >= 2E keeps nb * E <= pairs whenever nb >= 2 (then pairs > chunk, so E < pairs / 2 and
     * nb * E <= (pairs / chunk + 1) * E <= pairs / 2 + E); about two chunks per SM */
    const int sms = q->dev.sm_count > 0 ? q->dev.sm_count : 1;
    int64_t chunk = 512;
    if (chunk < 2 * experts)
        chunk = 2 * experts;
    if (chunk < rdg_ceil_div(pairs, 2 * (int64_t)sms))
        chunk = rdg_ceil_div(pairs, 2 * (int64_t)sms);
    chunk = rdg_ceil_div(chunk, PLAN_RANK_THREADS) * PLAN_RANK_THREADS;
    int64_t nb = rdg_ceil_div(pairs, chunk);
    const int alias = nb < 2;
    if (alias) {
        nb = 1;
        chunk = pairs;
    }
    uint32_t *m = alias ? cnt : rtok; /* nb x E */
    const int smem_bins = experts <= PLAN_SMEM_BINS;
    if (!smem_bins) {
        cudaError_t err = cudaMemsetAsync(m, 0, (size_t)nb * (size_t)experts * sizeof(uint32_t), q->stream);
        if (err != cudaSuccess)
            return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, "MemsetAsync (moe dispatch plan)");
    }
    plan_hist_kernel<<<dim3((unsigned)nb), dim3(PLAN_HIST_THREADS),
                       smem_bins ? (size_t)experts * sizeof(uint32_t) : 0, q->stream>>>(idx, m, pairs, chunk,
                                                                                     (int)experts, smem_bins);
    TRY(rdg_launched("moe dispatch_plan histogram"));

    int slices = 1;
    while (slices < 32 && (int64_t)(PLAN_SCAN_THREADS / (slices * 2)) >= experts && slices * 2 <= nb)
        slices *= 2;
    plan_scan_kernel<<<dim3(1), dim3(PLAN_SCAN_THREADS), 0, q->stream>>>(m, cnt, off, nb, (int)experts, slices,
                                                                       alias);
    TRY(rdg_launched("moe dispatch_plan scan"));

    plan_rank_kernel<<<dim3((unsigned)nb), dim3(PLAN_RANK_THREADS), 0, q->stream>>>(idx, m, pos, pairs, chunk,
                                                                                   (int)experts);
    TRY(rdg_launched("moe dispatch_plan rank"));

    const int64_t n = pairs > experts ? pairs : experts;
    plan_finish_kernel<<<dim3((unsigned)rdg_ceil_div(n, 256)), dim3(256), 0, q->stream>>>(
        pos, rtok, cnt, off, pairs, plan->top_k, (int)experts, alias);
    return rdg_launched("moe dispatch_plan finish");
}

/* threads per row: a power of two covering `units` up to the block */
int threads_per_row(int64_t units, int w)
{
    int tpr = w < ROWS_THREADS ? w : ROWS_THREADS;
    while (tpr < ROWS_THREADS && tpr < units)
        tpr *= 2;
    return tpr;
}

int aligned(const void *p, size_t a)
{
    return ((uintptr_t)p % a) == 0;
}

rudnn_status_t k_dispatch_gather(void *queue, const rudnn_moe_rows_plan_t *plan, rudnn_mem_ref_t input,
                                 rudnn_mem_ref_t row_token, rudnn_mem_ref_t tokens)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    if (plan->rows <= 0)
        return RUDNN_STATUS_SUCCESS;
    TRY(begin(q));
    const void *src = rdg_at(input);
    void *dst = rdg_at(tokens);
    const size_t esize = plan->dtype == RUDNN_F32 ? 4 : 2;
    const size_t row_bytes = (size_t)plan->hidden * esize;
    size_t unit = 16;
    while (unit > esize && !(row_bytes % unit == 0 && aligned(src, unit) && aligned(dst, unit)))
        unit /= 2;
    const int64_t units = (int64_t)(row_bytes / unit);
    const int tpr = threads_per_row(units, warp_size(q));
    const dim3 grid((unsigned)rdg_ceil_div(plan->rows, ROWS_THREADS / tpr));
    const uint32_t *rt = (const uint32_t *)rdg_at(row_token);
    switch (unit) {
    case 16:
        gather_kernel<uint4><<<grid, ROWS_THREADS, 0, q->stream>>>((const uint4 *)src, rt, (uint4 *)dst, plan->rows,
                                                                 units, tpr);
        break;
    case 8:
        gather_kernel<uint2><<<grid, ROWS_THREADS, 0, q->stream>>>((const uint2 *)src, rt, (uint2 *)dst, plan->rows,
                                                                 units, tpr);
        break;
    case 4:
        gather_kernel<uint32_t><<<grid, ROWS_THREADS, 0, q->stream>>>((const uint32_t *)src, rt, (uint32_t *)dst,
                                                                    plan->rows, units, tpr);
        break;
    default:
        gather_kernel<uint16_t><<<grid, ROWS_THREADS, 0, q->stream>>>((const uint16_t *)src, rt, (uint16_t *)dst,
                                                                    plan->rows, units, tpr);
        break;
    }
    return rdg_launched("moe dispatch_gather");
}

typedef void (*combine_fn)(const void *, const uint32_t *, const void *, int, void *, int64_t, int64_t, int, int);

rudnn_status_t k_combine(void *queue, const rudnn_moe_rows_plan_t *plan, rudnn_mem_ref_t expert_out,
                         rudnn_mem_ref_t positions, rudnn_mem_ref_t weights, rudnn_mem_ref_t out)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    if (plan->tokens <= 0)
        return RUDNN_STATUS_SUCCESS;
    TRY(begin(q));
    const void *x = rdg_at(expert_out);
    void *y = rdg_at(out);
    const int vec_elems = plan->dtype == RUDNN_F32 ? 4 : 8;
    const int vec = plan->hidden % vec_elems == 0 && aligned(x, 16) && aligned(y, 16);
    combine_fn fn;
    switch (plan->dtype) {
    case RUDNN_F32:
        fn = vec ? combine_kernel<RUDNN_F32, 4> : combine_kernel<RUDNN_F32, 1>;
        break;
    case RUDNN_F16:
        fn = vec ? combine_kernel<RUDNN_F16, 8> : combine_kernel<RUDNN_F16, 1>;
        break;
    default:
        fn = vec ? combine_kernel<RUDNN_BF16, 8> : combine_kernel<RUDNN_BF16, 1>;
        break;
    }
    const int64_t nv = vec ? plan->hidden / vec_elems : plan->hidden;
    const int tpr = threads_per_row(nv, warp_size(q));
    fn<<<dim3((unsigned)rdg_ceil_div(plan->tokens, ROWS_THREADS / tpr)), dim3(ROWS_THREADS), 0, q->stream>>>(
        x, (const uint32_t *)rdg_at(positions), rdg_at(weights), (int)plan->weight_dtype, y, plan->tokens, plan->hidden,
        plan->top_k, tpr);
    return rdg_launched("moe combine");
}

} // namespace

/* A table inside a host function: a namespace-scope const would be promoted to device memory by
 * HIP's compiler. */
const rudnn_moe_kernels_t *rdg_moe_table(void)
{
    static const rudnn_moe_kernels_t table = {
        (uint32_t)sizeof(rudnn_moe_kernels_t),
        k_route_softmax,
        k_route_sigmoid_grouped,
        k_dispatch_plan,
        k_dispatch_gather,
        rdg_moe_experts_scalar,
#if RDG_MOE_TENSOR_CORES
        rdg_moe_experts_tensor_core,
#else
        nullptr,
#endif
        k_combine,
        nullptr, /* experts_tensor_core_workspace: the common size */
        nullptr, /* experts_tensor_core_auto: always where it runs */
    };
    return &table;
}
