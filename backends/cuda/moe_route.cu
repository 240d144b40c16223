/* Mixture-of-experts routing: softmax top-k and grouped sigmoid top-k, one warp per token (the
 * route_softmax and route_sigmoid_grouped entries of moe_table.cu). The dispatch plan, gather and
 * combine are in moe_permute.cu, the SwiGLU expert GEMMs in moe_experts.cu.
 *
 * Numerics and orderings follow backends/README.md ("Numeric contract of the MoE kernels"):
 * FP32 math, F16/BF16 storage rounded to nearest even through gpu_compat.h.
 *
 * Ranking. Scores become u32 keys: order_key() is a monotone map of floats in which NaN maps to 1,
 * below every number (the smallest number, -inf, maps to 0x007fffff), -0 equals +0, and 0 means
 * "absent or already taken". The order is key descending, then id ascending.
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
 */
#include <math.h>

#include "rdg_internal.h"
#include "elem.cuh"
#include "moe_host.h"
#include "moe_tuning.h"

namespace {

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

/* Ranking takes the hardware sigmoid: five instructions per expert instead of about twenty. */
__device__ __forceinline__ float sigmoid_rank(float x)
{
    return rdg_sigmoid_approx(x);
}

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

/* ---- grouped sigmoid top-k (E, G and k within backends/limits.h) ----
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

#define GROUPS_PER_LANE ((RUDNN_MOE_GROUPED_MAX_GROUPS + RDG_WARP - 1) / RDG_WARP)

/* What the grouped kernels assume of the limits that ops/ enforces. */
static_assert(RUDNN_MOE_GROUPED_MAX_EXPERTS <= 32 * ROUTE_MAX_EPT,
              "a warp of 32 lanes or more holds every expert in registers: pick_ept never fails");
static_assert(RUDNN_MOE_GROUPED_MAX_GROUPS <= 4 * 32, "the selected groups fit the four 32-bit words of gmask");
static_assert(RUDNN_MOE_GROUPED_MAX_EXPERTS <= 1024, "group of an expert by a multiply: exact below 1024");
static_assert((ROUTE_THREADS / 32) * (RUDNN_MOE_GROUPED_MAX_EXPERTS + RUDNN_MOE_GROUPED_MAX_GROUPS) * 4 <=
                  48 * 1024,
              "the shared-memory grouping fits in a block's 48 KiB without the opt-in");

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

/* ---- host side ---- */

/* registers per lane for E experts: the smallest power of two up to ROUTE_MAX_EPT with
 * E <= W * EPT; 0 if none */
int pick_ept(int64_t experts, int w)
{
    for (int ept = 1; ept <= ROUTE_MAX_EPT; ept *= 2)
        if (experts <= (int64_t)w * ept)
            return ept;
    return 0;
}

static_assert(ROUTE_MAX_EPT <= 32, "the kernels below are instantiated for EPT 1 .. 32");

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
        return route_grouped_kernel<DT, 32>; /* ROUTE_MAX_EPT */
    }
}

} // namespace

rudnn_status_t rdg_moe_route_softmax(void *queue, const rudnn_route_kernel_plan_t *plan, rudnn_mem_ref_t logits,
                                     rudnn_mem_ref_t indices, rudnn_mem_ref_t weights)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    TRY(begin(q));
    const int w = warp_size(q);
    const int ept = pick_ept(plan->experts, w);
    softmax_fn fn = plan->dtype == RUDNN_F32   ? softmax_kernel_for<RUDNN_F32>(ept)
                    : plan->dtype == RUDNN_F16 ? softmax_kernel_for<RUDNN_F16>(ept)
                                               : softmax_kernel_for<RUDNN_BF16>(ept);
    const int64_t per_block = ROUTE_THREADS / w;
    rdg_note_kernel("moe.route_softmax");
    fn<<<dim3((unsigned)rdg_ceil_div(plan->tokens, per_block)), dim3(ROUTE_THREADS), 0, q->stream>>>(
        rdg_at(logits), (uint32_t *)rdg_at(indices), rdg_at(weights), plan->tokens, plan->experts, plan->top_k,
        plan->renormalize);
    return rdg_launched("moe route_softmax");
}

rudnn_status_t rdg_moe_route_sigmoid_grouped(void *queue, const rudnn_route_kernel_plan_t *plan,
                                             rudnn_mem_ref_t logits, rudnn_mem_ref_t bias, rudnn_mem_ref_t indices,
                                             rudnn_mem_ref_t weights)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    TRY(begin(q));
    const int w = warp_size(q);
    /* > 0: ops/ keeps E within RUDNN_MOE_GROUPED_MAX_EXPERTS, which a warp holds (static_assert above) */
    const int ept = pick_ept(plan->experts, w);
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
    rdg_note_kernel("moe.route_grouped");
    fn<<<dim3((unsigned)rdg_ceil_div(plan->tokens, per_block)), dim3(ROUTE_THREADS), smem, q->stream>>>(
        rdg_at(logits), (const float *)rdg_at(bias), (uint32_t *)rdg_at(indices), rdg_at(weights), plan->tokens,
        plan->experts, plan->top_k, plan->renormalize, plan->groups, plan->selected_groups, plan->group_top_two,
        plan->scale, lanes_per_group);
    return rdg_launched("moe route_sigmoid_grouped");
}
