/* Paged attention and MLA on CUDA and HIP (hal/paged_attention.h): the family's table, the kernel
 * choice, and the kernels every shape can take:
 *   paged_attention.generic  SIMT, any dtype, D and Dv 1..1024, MLA with any R and P, any page
 *                            size; one CTA per (query, query head, split): rounds of
 *                            PA_GEN_KEYS keys (a warp scores a key, lanes over D), FP32 online
 *                            softmax in base 2, threads over the output columns;
 *   paged_attention.merge    splits > 1: out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s
 *                            over the splits with l_s != 0 (zeros when none); pa_merge_row, which
 *                            the tensor-core decode kernel also runs itself (fused merge);
 *   paged_attention.append   each query's k (and v) row into its position's cache row.
 * The tensor-core kernels (CUDA, sm_80+, F16/BF16) are paged_attention_mma.cu (attention, D and
 * Dv <= 256) and paged_attention_mla.cu (MLA, R 512, P 64); pa_choose takes them where they fit.
 * Every kernel writes the FP32 partials of hal/paged_attention.h when split, and the merge here
 * finishes them. */
#include <stdio.h>
#include <string.h>

#include <mutex>
#include <set>

#include "rdg_internal.h"

#include "paged_attention.cuh"
#include "paged_attention_tuning.h"

static_assert(PA_GEN_KEYS <= PA_GEN_THREADS, "generic: a thread a key's probability");
static_assert(RUDNN_PAGED_MAX_SPLITS <= 32, "merge: a lane a split's weight");
static_assert(PA_MERGE_THREADS % 64 == 0, "merge: whole warps (and HIP wavefronts)");

namespace {

/* ------------------------------------------------------------------------------ generic */

/* q . k of key row `row` (and qp . kp for MLA) by one warp: lanes over the dims, the sum in every
 * lane. q (and qp after it) is in shared memory as FP32. */
template <int DT>
__device__ __forceinline__ float gen_dot(const PaDev &d, const float *qs, int64_t row, int hk, int lane)
{
    const int64_t kr = (row * d.heads_kv + hk) * d.d;
    float s = 0.0f;
    for (int e = lane; e < d.d; e += RDG_WARP)
        s = fmaf(qs[e], Elem<DT>::ld(d.k, kr + e), s);
    for (int e = lane; e < d.p; e += RDG_WARP)
        s = fmaf(qs[d.d + e], Elem<DT>::ld(d.kp, row * d.p + e), s);
    for (int o = RDG_WARP / 2; o > 0; o >>= 1)
        s += RDG_SHFL_XOR(s, o);
    return s;
}

/* One work item per (query i, query head h, split) in a grid-stride loop, h fastest (the heads of
 * one KV head read the same rows at about the same time). */
template <int DT>
__global__ void RDG_LAUNCH_BOUNDS(PA_GEN_THREADS, 1) gen_kernel(const PaDev d)
{
    constexpr int NT = PA_GEN_THREADS, NW = NT / RDG_WARP, KT = PA_GEN_KEYS;
    constexpr int COLS = (RUDNN_PAGED_MAX_HEAD_DIM + NT - 1) / NT;
    __shared__ float qs[RUDNN_PAGED_MAX_HEAD_DIM + RUDNN_PAGED_MLA_MAX_ROPE_DIM];
    __shared__ float sc[KT], pr[KT]; /* the round's scores (base 2), then probabilities */
    __shared__ int64_t rows[KT];     /* the round's cache rows */
    const int tid = (int)threadIdx.x, lane = tid % RDG_WARP, warp = tid / RDG_WARP;
    const int Hq = d.heads_q, D = d.d, Dv = d.dv;
    const void *vsrc = d.p > 0 ? d.k : d.v; /* MLA: the value is the latent row */
    const int64_t items = (int64_t)d.queries * Hq * d.splits;
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const int h = (int)(item % Hq);
        const int64_t rest = item / Hq;
        const int split = (int)(rest % d.splits), i = (int)(rest / d.splits);
        const int hk = h / d.group;
        const int32_t *table = d.pages + d.seq_table[d.query_seq[i]];
        int k0, k1;
        pa_split_range(d, pa_hi(d, i), split, &k0, &k1);

        __syncthreads(); /* the previous item's readers of qs are done */
        for (int e = tid; e < D + d.p; e += NT)
            qs[e] = e < D ? Elem<DT>::ld(d.q, ((int64_t)i * Hq + h) * D + e)
                          : Elem<DT>::ld(d.qp, ((int64_t)i * Hq + h) * d.p + (e - D));
        __syncthreads();

        float m = -INFINITY, l = 0.0f, acc[COLS];
#pragma unroll
        for (int u = 0; u < COLS; u++)
            acc[u] = 0.0f;
        for (int64_t j0 = k0; j0 < k1; j0 += KT) {
            const int nk = (int)(k1 - j0 < KT ? k1 - j0 : KT);
            for (int jj = warp; jj < nk; jj += NW) {
                const int64_t row = pa_row(d, table, (int)(j0 + jj));
                const float dot = gen_dot<DT>(d, qs, row, hk, lane);
                if (lane == 0) {
                    sc[jj] = dot * d.scale_log2;
                    rows[jj] = row;
                }
            }
            __syncthreads();
            float mt = -INFINITY;
            for (int jj = 0; jj < nk; jj++)
                mt = fmaxf(mt, sc[jj]);
            const float m_new = fmaxf(m, mt);
            if (tid < nk)
                pr[tid] = pa_weight(sc[tid], m_new);
            __syncthreads();
            const float alpha = m_new == -INFINITY ? 1.0f : exp2f(m - m_new); /* never exp2(-inf - -inf) */
            float sum = 0.0f;
            for (int jj = 0; jj < nk; jj++)
                sum += pr[jj];
            l = l * alpha + sum;
            m = m_new;
#pragma unroll
            for (int u = 0; u < COLS; u++)
                acc[u] *= alpha;
            for (int jj = 0; jj < nk; jj++) {
                const float p = pr[jj];
                const int64_t vr = (rows[jj] * d.heads_kv + hk) * Dv;
#pragma unroll
                for (int u = 0; u < COLS; u++) {
                    const int c = tid + u * NT;
                    if (c < Dv)
                        acc[u] = fmaf(p, Elem<DT>::ld(vsrc, vr + c), acc[u]);
                }
            }
            __syncthreads(); /* the next round rewrites sc and rows */
        }
#pragma unroll
        for (int u = 0; u < COLS; u++) {
            const int c = tid + u * NT;
            if (c < Dv)
                pa_put<DT>(d, split, i, h, c, acc[u], l);
        }
        if (tid == 0)
            pa_put_ml(d, split, i, h, m, l);
    }
}

/* ------------------------------------------------------------------------------- merge */

/* A warp per unit (output row, 4 x warp columns), units in a grid-stride loop (pa_merge_row). */
template <int DT>
__global__ void RDG_LAUNCH_BOUNDS(PA_MERGE_THREADS, 1) merge_kernel(const PaDev d)
{
    constexpr int WPB = PA_MERGE_THREADS / RDG_WARP, CW = 4 * RDG_WARP;
    const int lane = (int)threadIdx.x % RDG_WARP, warp = (int)threadIdx.x / RDG_WARP;
    const int chunks = (d.dv + CW - 1) / CW;
    const int64_t units = (int64_t)d.queries * d.heads_q * chunks;
    for (int64_t u = (int64_t)blockIdx.x * WPB + warp; u < units; u += (int64_t)gridDim.x * WPB) {
        const int ch = (int)(u % chunks);
        const int64_t r = u / chunks;
        pa_merge_row<DT>(d, (int)(r / d.heads_q), (int)(r % d.heads_q), ch * CW + 4 * lane, lane);
    }
}

/* ------------------------------------------------------------------------------ append */

/* What the append kernel reads: per query its row of k (and v), row_bytes[0] (and [1]) long, into
 * the cache row of its position. vec: 16-byte copies (addresses and sizes aligned). */
struct AppendArgs {
    const int32_t *seq_table, *query_seq, *query_pos, *pages;
    const char *src[2];
    char *dst[2];
    int64_t row_bytes[2];
    int vec[2];
    int32_t queries, page_size;
    PaDiv ps;
};

/* blockIdx.y: 0 the keys, 1 the values; queries in a grid-stride loop over x. */
__global__ void RDG_LAUNCH_BOUNDS(PA_MERGE_THREADS, 1) append_kernel(const AppendArgs a)
{
    const int w = (int)blockIdx.y;
    const int64_t nb = a.row_bytes[w];
    for (int i = (int)blockIdx.x; i < a.queries; i += (int)gridDim.x) {
        const uint32_t pos = (uint32_t)a.query_pos[i], pi = pa_div(a.ps, pos);
        const int64_t row = (int64_t)a.pages[a.seq_table[a.query_seq[i]] + pi] * a.page_size +
                            (pos - pi * (uint32_t)a.page_size);
        const char *src = a.src[w] + (int64_t)i * nb;
        char *dst = a.dst[w] + row * nb;
        if (a.vec[w]) {
            for (int64_t e = threadIdx.x; e < nb / 16; e += blockDim.x)
                ((uint4 *)dst)[e] = ((const uint4 *)src)[e];
        } else {
            for (int64_t e = threadIdx.x; e < nb / 2; e += blockDim.x)
                ((uint16_t *)dst)[e] = ((const uint16_t *)src)[e];
        }
    }
}

/* -------------------------------------------------------------------------------- host */

template <int DT>
void launch_generic(rdg_queue_t *q, const PaDev &d, int64_t grid)
{
    gen_kernel<DT><<<dim3((unsigned)grid), dim3(PA_GEN_THREADS), 0, q->stream>>>(d);
}

rudnn_status_t run_generic(rdg_queue_t *q, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o)
{
    const PaDev d = pa_make_dev(a, o, 0);
    const int64_t items = (int64_t)d.queries * d.heads_q * d.splits;
    const int64_t grid = items < PA_MAX_GRID ? items : PA_MAX_GRID;
    rdg_note_kernel(PA_GENERIC_NAME);
    switch (a->dtype) {
    case RUDNN_F32: launch_generic<RUDNN_F32>(q, d, grid); break;
    case RUDNN_F16: launch_generic<RUDNN_F16>(q, d, grid); break;
    default: launch_generic<RUDNN_BF16>(q, d, grid); break;
    }
    TRY(pa_launched(PA_GENERIC_NAME, grid, PA_GEN_THREADS, 0));
    return d.splits > 1 ? pa_run_merge(q, a, d) : RUDNN_STATUS_SUCCESS;
}

enum PaKernel { PA_KERNEL_GENERIC, PA_KERNEL_MMA, PA_KERNEL_MLA, PA_KERNEL_WGMMA, PA_KERNEL_MLA_WGMMA };

/* The kernel of a call, the one place it is chosen: the wgmma kernel (attention: prefill; MLA:
 * heads a multiple of 64), else the mma.sync one, each where it takes the shape (CUDA; their
 * *_why functions say what each needs), else the generic one. */
PaKernel pa_choose(const rdg_devinfo_t *dev, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o)
{
#if !RDG_HIP
    char why[192];
    if (a->mla) {
        if (!rdg_pa_mla_wgmma_why(dev, a, o, why, sizeof why))
            return PA_KERNEL_MLA_WGMMA;
        return rdg_pa_mla_why(dev, a, o, why, sizeof why) ? PA_KERNEL_GENERIC : PA_KERNEL_MLA;
    }
    if (!rdg_pa_wgmma_why(dev, a, o, why, sizeof why))
        return PA_KERNEL_WGMMA;
    return rdg_pa_mma_why(dev, a, o, why, sizeof why) ? PA_KERNEL_GENERIC : PA_KERNEL_MMA;
#else
    (void)dev, (void)a, (void)o;
    return PA_KERNEL_GENERIC;
#endif
}

rudnn_status_t pa_attend(void *queue, const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    TRY(rdg_use_device(q->dev.index));
    switch (pa_choose(&q->dev, a, o)) {
#if !RDG_HIP
    case PA_KERNEL_MMA: return rdg_pa_mma_run(q, a, o);
    case PA_KERNEL_MLA: return rdg_pa_mla_run(q, a, o);
    case PA_KERNEL_WGMMA: return rdg_pa_wgmma_run(q, a, o);
    case PA_KERNEL_MLA_WGMMA: return rdg_pa_mla_wgmma_run(q, a, o);
#endif
    default: return run_generic(q, a, o);
    }
}

rudnn_status_t pa_append(void *queue, const rudnn_paged_append_args_t *a, const rudnn_paged_append_operands_t *o)
{
    rdg_queue_t *q = (rdg_queue_t *)queue;
    TRY(rdg_use_device(q->dev.index));
    const rudnn_paged_layout_t &l = a->layout;
    if (l.queries == 0)
        return RUDNN_STATUS_SUCCESS;
    const char *plan = (const char *)rdg_at(o->plan);
    AppendArgs x;
    memset(&x, 0, sizeof x);
    x.seq_table = (const int32_t *)(plan + l.off_seq_table);
    x.query_seq = (const int32_t *)(plan + l.off_query_seq);
    x.query_pos = (const int32_t *)(plan + l.off_query_pos);
    x.pages = (const int32_t *)(plan + l.off_pages);
    x.queries = (int32_t)l.queries;
    x.page_size = (int32_t)l.page_size;
    x.ps = pa_div_make((uint32_t)l.page_size);
    const int eb = a->dtype == RUDNN_F32 ? 4 : 2;
    const int parts = a->value_dim > 0 ? 2 : 1;
    const rudnn_mem_ref_t src[2] = {o->k, o->v}, dst[2] = {o->k_cache, o->v_cache};
    const int64_t dims[2] = {a->key_dim, a->value_dim};
    for (int w = 0; w < parts; w++) {
        x.src[w] = (const char *)rdg_at(src[w]);
        x.dst[w] = (char *)rdg_at(dst[w]);
        x.row_bytes[w] = a->heads_kv * dims[w] * eb;
        x.vec[w] = x.row_bytes[w] % 16 == 0 && pa_aligned16(x.src[w], x.dst[w], nullptr, nullptr, nullptr);
    }
    const int64_t grid = l.queries < PA_MAX_GRID ? l.queries : PA_MAX_GRID;
    rdg_note_kernel(PA_APPEND_NAME);
    append_kernel<<<dim3((unsigned)grid, (unsigned)parts), dim3(PA_MERGE_THREADS), 0, q->stream>>>(x);
    return pa_launched(PA_APPEND_NAME, grid, PA_MERGE_THREADS, 0);
}

/* A table inside a host function: a namespace-scope const would be promoted to device memory by
 * HIP's compiler. */
rudnn_paged_attention_kernels_t make_paged_attention_table(void)
{
    rudnn_paged_attention_kernels_t table;
    memset(&table, 0, sizeof table);
    table.attend = pa_attend;
    table.append = pa_append;
    table.struct_size = (uint32_t)sizeof table;
    return table;
}

} // namespace

/* ------------------------------------------------------------------ shared with the mma files */

PaDev pa_make_dev(const rudnn_paged_args_t *a, const rudnn_paged_operands_t *o, int kind)
{
    const rudnn_paged_layout_t &l = a->layout;
    const char *plan = (const char *)rdg_at(o->plan);
    PaDev d;
    memset(&d, 0, sizeof d);
    d.seq_len = (const int32_t *)(plan + l.off_seq_len);
    d.seq_table = (const int32_t *)(plan + l.off_seq_table);
    d.query_seq = (const int32_t *)(plan + l.off_query_seq);
    d.query_pos = (const int32_t *)(plan + l.off_query_pos);
    d.pages = (const int32_t *)(plan + l.off_pages);
    d.blocks = (const rudnn_paged_block_t *)(plan + l.off_blocks[kind]);
    d.nblocks = l.block_count[kind];
    d.q = rdg_at(o->q);
    d.qp = rdg_at(o->qp);
    d.k = rdg_at(o->k);
    d.kp = rdg_at(o->kp);
    d.v = rdg_at(o->v);
    d.out = rdg_at(o->out);
    d.ws = (float *)rdg_at(o->workspace);
    d.queries = (int32_t)l.queries;
    d.heads_q = (int32_t)a->heads_q;
    d.heads_kv = (int32_t)a->heads_kv;
    d.group = (int32_t)(a->heads_q / a->heads_kv);
    d.d = (int32_t)a->head_dim;
    d.dv = (int32_t)a->value_dim;
    d.p = a->mla ? (int32_t)a->rope_dim : 0;
    d.splits = a->splits > 1 ? a->splits : 1;
    d.causal = a->causal != 0;
    d.page_size = (int32_t)l.page_size;
    d.ps = pa_div_make((uint32_t)l.page_size);
    d.scale_log2 = a->scale * PA_LOG2E;
    return d;
}

rudnn_status_t pa_allow_smem(const rdg_queue_t *q, const void *fn, size_t smem)
{
    if (smem <= 48u * 1024u)
        return RUDNN_STATUS_SUCCESS;
    /* once per (device, kernel), so that a decode step's launches make no runtime call for it */
    static std::mutex lock;
    static std::set<std::pair<int, const void *>> raised;
    std::lock_guard<std::mutex> hold(lock);
    if (raised.count({q->dev.index, fn}))
        return RUDNN_STATUS_SUCCESS;
    /* the device's whole allowance, so that no launch lowers it for another thread's */
    cudaFuncAttributes fa;
    cudaError_t err = cudaFuncGetAttributes(&fa, fn);
    if (err != cudaSuccess)
        return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, "FuncGetAttributes (" PA_OP ")");
    err = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)(q->dev.smem_optin - fa.sharedSizeBytes));
    if (err != cudaSuccess)
        return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, "FuncSetAttribute(MaxDynamicSharedMemorySize) (" PA_OP ")");
    raised.insert({q->dev.index, fn});
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t pa_launched(const char *name, int64_t grid, int threads, size_t smem)
{
    const cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess)
        return RUDNN_STATUS_SUCCESS;
    char msg[192];
    snprintf(msg, sizeof msg, " kernel launch (%s, grid %lld, block %d, smem %zu)", name, (long long)grid, threads,
             smem);
    return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, msg);
}

rudnn_status_t pa_run_merge(rdg_queue_t *q, const rudnn_paged_args_t *a, const PaDev &d)
{
    /* units counted with 32-lane warps (a 64-lane HIP wavefront's CTAs find fewer; the kernel loops) */
    const int64_t wpb = PA_MERGE_THREADS / 32, cw = 4 * 32;
    const int64_t units = (int64_t)d.queries * d.heads_q * ((d.dv + cw - 1) / cw);
    const int64_t ctas = (units + wpb - 1) / wpb, grid = ctas < PA_MAX_GRID ? ctas : PA_MAX_GRID;
    const dim3 g((unsigned)grid), t(PA_MERGE_THREADS);
    rdg_note_kernel(PA_MERGE_NAME);
    switch (a->dtype) {
    case RUDNN_F32: merge_kernel<RUDNN_F32><<<g, t, 0, q->stream>>>(d); break;
    case RUDNN_F16: merge_kernel<RUDNN_F16><<<g, t, 0, q->stream>>>(d); break;
    default: merge_kernel<RUDNN_BF16><<<g, t, 0, q->stream>>>(d); break;
    }
    return pa_launched(PA_MERGE_NAME, grid, PA_MERGE_THREADS, 0);
}

int pa_block_kind(int64_t rows, int64_t per_query)
{
    int kind = 0;
    while (kind + 1 < RUDNN_PAGED_BLOCK_KINDS && ((int64_t)2 << kind) * per_query <= rows)
        kind++;
    return kind;
}

int pa_aligned16(const void *a, const void *b, const void *c, const void *d, const void *e)
{
    return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d | (uintptr_t)e) & 15u) == 0;
}

const rudnn_paged_attention_kernels_t *rdg_paged_attention_table(void)
{
    static rudnn_paged_attention_kernels_t table = make_paged_attention_table();
    return &table;
}
