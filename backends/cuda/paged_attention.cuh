/* What the CUDA/HIP paged-attention sources share: paged_attention.cu (the family's table, the
 * generic, merge and append kernels, the kernel choice) and the CUDA-only tensor-core kernels
 * paged_attention_mma.cu (attention), paged_attention_mla.cu and paged_attention_mla_wgmma.cu
 * (MLA). The kernels' argument block, the page-table walk, the split range, and the launchers'
 * declarations. Include after rdg_internal.h. */
#ifndef RUDNN_PAGED_ATTENTION_CUH
#define RUDNN_PAGED_ATTENTION_CUH

#include "elem.cuh"
#include "paged_attention_tuning.h"

#define PA_OP "paged_attention"
#define PA_GENERIC_NAME "paged_attention.generic"
#define PA_MERGE_NAME "paged_attention.merge"
#define PA_APPEND_NAME "paged_attention.append"
#define PA_MMA_DECODE_NAME "paged_attention.mma_decode"
#define PA_MMA_PREFILL_NAME "paged_attention.mma_prefill"
#define PA_MLA_NAME "paged_attention.mla_mma"
#define PA_WGMMA_PREFILL_NAME "paged_attention.wgmma_prefill"
#define PA_MLA_WGMMA_NAME "paged_attention.mla_wgmma"

/* Query heads the tensor-core kernels take: a block's rows (128 queries x heads) stay in int. */
#define PA_MMA_MAX_HEADS 65536

#define PA_LOG2E 1.4426950408889634f
#define PA_LN2 0.6931471805599453f

/* n / d for n, d < 2^31 by a multiply and a shift (Granlund and Montgomery): the page of a key
 * without a division instruction. */
struct PaDiv {
    uint32_t m, s;
};

static inline PaDiv pa_div_make(uint32_t d)
{
    uint32_t s = 0;
    while (((uint64_t)1 << s) < d)
        s++;
    PaDiv r;
    r.s = s;
    r.m = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << s) - d)) / d + 1);
    return r;
}

__host__ __device__ __forceinline__ uint32_t pa_div(const PaDiv &v, uint32_t n)
{
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    const uint32_t hi = __umulhi(n, v.m);
#else
    const uint32_t hi = (uint32_t)(((uint64_t)n * v.m) >> 32);
#endif
    return (uint32_t)(((uint64_t)hi + n) >> v.s);
}

/* What every paged kernel reads, by value: the plan's arrays (hal/paged_attention.h) as device
 * pointers, the blocks of the kind the launch works, the operands and the shapes. */
struct PaDev {
    const int32_t *seq_len, *seq_table, *query_seq, *query_pos, *pages;
    const rudnn_paged_block_t *blocks;
    const void *q, *qp, *k, *kp, *v; /* MLA: k the latent cache (and the value), kp the rope keys */
    void *out;
    float *ws; /* splits > 1: acc [splits][Q][Hq][Dv], then m, then l [splits][Q][Hq] */
    uint32_t *tickets; /* fused merge (the decode kernel's last CTA of a row group merges): the
                          group counters (hal/paged_attention.h); NULL: the merge kernel runs */
    int64_t nblocks;
    int32_t queries, heads_q, heads_kv, group, d, dv, p, splits, causal, page_size;
    PaDiv ps;
    float scale_log2; /* scale * log2(e): scores in base 2 (exp2) */
};

/* A CTA row of the tensor-core kernels: its query i, query head h, and the keys it sees in the
 * CTA's split, [k0, lim) (lim 0: no row, or none of the split's keys: pa_lim). */
struct PaRow {
    int32_t i, h, lim, pad;
};

static inline size_t pa_align16(size_t x)
{
    return (x + 15) & ~(size_t)15;
}

/* paged_attention.cu: the argument block of a call, its blocks those of `kind`. */
PaDev pa_make_dev(const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o, int kind);
/* paged_attention.cu: lets fn take smem bytes of dynamic shared memory (past the default 48 KiB). */
rudnn_status_t pa_allow_smem(const rdg_queue_t *q, const void *fn, size_t smem);
/* paged_attention.cu: DEVICE_ERROR naming the kernel when the launch just made failed. */
rudnn_status_t pa_launched(const char *name, int64_t grid, int threads, size_t smem);
/* paged_attention.cu: the split merge (splits > 1) into out. */
rudnn_status_t pa_run_merge(rdg_queue_t *q, const rudnn_paged_args_t *a, const PaDev &d);
/* The block kind whose runs of 2^kind queries give at most `rows` rows of `per_query` each (kind 0
 * where one query has more: its rows then take several row chunks). */
int pa_block_kind(int64_t rows, int64_t per_query);
/* Whether the addresses are 16-byte aligned (null counts as aligned). */
int pa_aligned16(const void *a, const void *b, const void *c, const void *d, const void *e);

#if !RDG_HIP
/* paged_attention_mma.cu (CUDA only): why the tensor-core attention kernel does not take the call
 * on dev (NULL when it does; written into why), and its launch (with the merge when split). */
const char *rdg_pa_mma_why(const rdg_devinfo_t *dev, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o,
                           char *why, size_t cap);
rudnn_status_t rdg_pa_mma_run(rdg_queue_t *q, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o);
/* paged_attention_mla.cu (CUDA only): the same for MLA (R 512, P 64). */
const char *rdg_pa_mla_why(const rdg_devinfo_t *dev, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o,
                           char *why, size_t cap);
rudnn_status_t rdg_pa_mla_run(rdg_queue_t *q, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o);
/* paged_attention_wgmma.cu (CUDA only, sm_90a): the same for the wgmma prefill (packed prefill,
 * D and Dv <= 128, one split). */
const char *rdg_pa_wgmma_why(const rdg_devinfo_t *dev, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o,
                             char *why, size_t cap);
rudnn_status_t rdg_pa_wgmma_run(rdg_queue_t *q, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o);
/* paged_attention_mla_wgmma.cu (CUDA only, sm_90a): the same for MLA on Hopper's warpgroup MMA
 * (R 512, P 64, heads a multiple of 64). */
const char *rdg_pa_mla_wgmma_why(const rdg_devinfo_t *dev, const rudnn_paged_args_t *a,
                                 const rudnn_paged_operands_t *o, char *why, size_t cap);
rudnn_status_t rdg_pa_mla_wgmma_run(rdg_queue_t *q, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o);
#endif

namespace {

/* The cache row (page * page_size + offset) of key j of the history whose page table is table. */
__device__ __forceinline__ int64_t pa_row(const PaDev &d, const int32_t *table, int j)
{
    const uint32_t pi = pa_div(d.ps, (uint32_t)j);
    return (int64_t)table[pi] * d.page_size + ((uint32_t)j - pi * (uint32_t)d.page_size);
}

/* The keys [0, limit) query i of a history of len keys sees (query_pos is read only when causal). */
__device__ __forceinline__ int pa_row_limit(const PaDev &d, int i, int len)
{
    return d.causal ? min(len, d.query_pos[i] + 1) : len;
}

/* Query i sees keys [0, hi). */
__device__ __forceinline__ int pa_hi(const PaDev &d, int i)
{
    return pa_row_limit(d, i, d.seq_len[d.query_seq[i]]);
}

/* A tensor-core row's limit for query i in the split [k0, k1) (PaRow). */
__device__ __forceinline__ int pa_lim(const PaDev &d, int i, int k0, int k1)
{
    const int lim = min(pa_hi(d, i), k1);
    return lim > k0 ? lim : 0;
}

/* The keys [*k0, *k1) of split `split` of a key range [0, n) (hal/paged_attention.h). */
__device__ __forceinline__ void pa_split_range(const PaDev &d, int n, int split, int *k0, int *k1)
{
    if (d.splits <= 1) {
        *k0 = 0;
        *k1 = n;
        return;
    }
    /* rudnn_paged_split_chunk (a host function): whole 16-key tiles, at least one */
    int64_t c = ((int64_t)n + d.splits - 1) / d.splits;
    c = (c + 15) / 16 * 16;
    c = c < 16 ? 16 : c;
    const int64_t lo = split * c;
    *k0 = lo < n ? (int)lo : n;
    *k1 = lo + c < n ? (int)(lo + c) : n;
}

/* Where the partials of (split, query i, head h) go. */
__device__ __forceinline__ float *pa_ws_acc(const PaDev &d, int split, int i, int h)
{
    return d.ws + (((int64_t)split * d.queries + i) * d.heads_q + h) * d.dv;
}
__device__ __forceinline__ float *pa_ws_ml(const PaDev &d, int split, int i, int h, int which)
{
    const int64_t rows = (int64_t)d.splits * d.queries * d.heads_q;
    return d.ws + rows * d.dv + which * rows + ((int64_t)split * d.queries + i) * d.heads_q + h;
}

#if RDG_HIP
#define PA_LDCG(p) (*(p))
#else
#define PA_LDCG(p) __ldcg(p)
#endif

/* Four FP32 partials from p (n of them: fewer past Dv, none at n <= 0) through L2 (ld.cg: they were
 * written by other CTAs, possibly of this launch, and L1 is not coherent). vec: p 16-byte aligned. */
__device__ __forceinline__ float4 pa_ld4(const float *p, int n, bool vec)
{
    if (vec && n >= 4)
        return PA_LDCG((const float4 *)p);
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (n > 0)
        x.x = PA_LDCG(p);
    if (n > 1)
        x.y = PA_LDCG(p + 1);
    if (n > 2)
        x.z = PA_LDCG(p + 2);
    return x;
}

/* The split merge of output row (query i, head h), columns c .. c + 3 (the lane's; none past Dv),
 * by one warp (every lane calls it, splits <= 32): out = sum_s w_s acc_s with w_s = e^(m_s - M) /
 * L over the splits with l_s != 0 (hal/paged_attention.h). Lane s reads split s's (m, l) and the
 * shuffles reduce them; the acc loads of the first PA_MERGE_BATCH splits are issued before that,
 * and every batch's together: one L2 round trip a batch, none behind the weights. An empty split's
 * acc (stale or never written) is loaded but dropped by a select, never multiplied. */
template <int DT>
__device__ __forceinline__ void pa_merge_row(const PaDev &d, int i, int h, int c, int lane)
{
    constexpr int B = PA_MERGE_BATCH;
    const int S = d.splits, n = d.dv - c;
    const bool vec = d.dv % 4 == 0;
    const bool in = lane < S;
    const float m = in ? PA_LDCG(pa_ws_ml(d, lane, i, h, 0)) : -INFINITY;
    const float l = in ? PA_LDCG(pa_ws_ml(d, lane, i, h, 1)) : 0.0f;
    float4 x[B];
    auto load = [&](int s0) {
#pragma unroll
        for (int j = 0; j < B; j++)
            x[j] = s0 + j < S ? pa_ld4(pa_ws_acc(d, s0 + j, i, h) + c, n, vec) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    };
    load(0);
    const bool live = l != 0.0f; /* "l > 0" would drop a NaN l, which must reach the output */
    float M = live ? m : -INFINITY;
#pragma unroll
    for (int o = RDG_WARP / 2; o > 0; o >>= 1)
        M = fmaxf(M, RDG_SHFL_XOR(M, o));
    const float e = live ? expf(m - M) : 0.0f;
    float L = e * l;
#pragma unroll
    for (int o = RDG_WARP / 2; o > 0; o >>= 1)
        L += RDG_SHFL_XOR(L, o);
    const float wl = live && L != 0.0f ? e / L : 0.0f;
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int s0 = 0;;) {
#pragma unroll
        for (int j = 0; j < B; j++) {
            const float w = RDG_SHFL(wl, (s0 + j) % RDG_WARP);
            if (s0 + j < S && w != 0.0f) { /* uniform over the warp */
                o.x = fmaf(w, x[j].x, o.x);
                o.y = fmaf(w, x[j].y, o.y);
                o.z = fmaf(w, x[j].z, o.z);
                o.w = fmaf(w, x[j].w, o.w);
            }
        }
        s0 += B;
        if (s0 >= S)
            break;
        load(s0);
    }
    const int64_t at = ((int64_t)i * d.heads_q + h) * d.dv + c;
    const float v[4] = {o.x, o.y, o.z, o.w};
#pragma unroll
    for (int k = 0; k < 4; k++)
        if (k < n)
            Elem<DT>::st(d.out, at + k, v[k]);
}

/* (lo, hi) -> two dtype values packed, lo in bits 0..15, round to nearest even (P for P V). */
template <int DT>
__device__ __forceinline__ uint32_t pa_pack2(float lo, float hi)
{
    if constexpr (DT == RUDNN_BF16)
        return rdg_pack_bf16x2(lo, hi);
    else
        return (uint32_t)rdg_f32_to_f16(lo) | (uint32_t)rdg_f32_to_f16(hi) << 16;
}

/* A score's weight exp2(x - m) against its row's running maximum m. Where the row has no finite
 * maximum yet (its scores so far masked, -inf, or NaN, which fmaxf skips): 0 for a masked score,
 * NaN for a NaN one (a NaN in q or k must reach the row's output, not read as "no key"). */
__device__ __forceinline__ float pa_weight(float x, float m)
{
    return m == -INFINITY ? (x != x ? x : 0.0f) : exp2f(x - m);
}

/* A 16-bit value of the dtype as float. */
template <int DT>
__device__ __forceinline__ float pa_half(uint16_t x)
{
    return DT == RUDNN_BF16 ? rdg_bf16_to_f32(x) : rdg_f16_to_f32(x);
}

#if !RDG_HIP
/* The warp's vote: rows 0 .. 15 of a staged tile (pitch bytes) hold only finite values in their
 * first `chunks` 16-byte chunks. The tensor-core kernels ask it before a P V step where some row
 * sees only part of the step's keys: a non-finite value there would reach that row as 0 x NaN. */
template <int DT>
__device__ __forceinline__ bool pa_finite16(const unsigned char *rows, int pitch, int chunks, int lane)
{
    const uint32_t e = DT == RUDNN_BF16 ? 0x7f807f80u : 0x7c007c00u; /* the exponents of a pair */
    bool bad = false;
    for (int x = lane; x < 16 * chunks; x += 32) {
        const int r = x / chunks, c = x - r * chunks;
        const uint4 w = *(const uint4 *)(rows + r * pitch + c * 16);
        const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t m = u[i] & e;
            bad |= (m & 0xffffu) == (e & 0xffffu) || (m >> 16) == (e >> 16);
        }
    }
    return !__any_sync(0xffffffffu, bad);
}
#endif

/* Element c of row (query i, head h) of a CTA's result: acc / l into out (zeros where l is 0), or with splits
 * the partial acc; pa_put_ml: the partial m (from the base-2 max m2) and l. */
template <int DT>
__device__ __forceinline__ void pa_put(const PaDev &d, int split, int i, int h, int c, float acc, float l)
{
    if (d.splits > 1)
        pa_ws_acc(d, split, i, h)[c] = acc;
    else
        Elem<DT>::st(d.out, ((int64_t)i * d.heads_q + h) * d.dv + c, l != 0.0f ? acc / l : 0.0f); /* NaN l: NaN */
}
__device__ __forceinline__ void pa_put_ml(const PaDev &d, int split, int i, int h, float m2, float l)
{
    if (d.splits > 1) {
        *pa_ws_ml(d, split, i, h, 0) = m2 * PA_LN2;
        *pa_ws_ml(d, split, i, h, 1) = l;
    }
}

} // namespace

#endif
