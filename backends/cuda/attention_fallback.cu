/* attention.fallback on CUDA/HIP: the scores into an FP32 workspace [B * Hq * Sq, Skv], the row
 * softmax in place (with lse), then P V; the workspace's size and whether it fits the device.
 * Each kernel takes one score row (b, h, i) per CTA, row = (b * Hq + h) * Sq + i, in a grid-stride
 * loop. */
#include <stdio.h>

#include "rdg_internal.h"

#include "attention.cuh"
#include "attention_tuning.h"
#include "reduce.cuh"

namespace {

/* (b, h, i) of a score row. */
__device__ __forceinline__ void att_split_row(const rdg_att_args &a, int64_t row, int64_t *b, int64_t *h, int64_t *i)
{
    *i = row % a.seq_q;
    const int64_t bh = row / a.seq_q;
    *h = bh % a.heads_q;
    *b = bh / a.heads_q;
}

/* scores[row, j]: the transformed score, -inf where key j is not visible. A warp per key, lanes
 * over D (coalesced K rows). */
template <int DT>
__global__ void RDG_LAUNCH_BOUNDS(ATT_FB_THREADS, 1) att_scores_kernel(const rdg_att_args a, float *scores)
{
    constexpr int W = RDG_WARP;
    constexpr int EB = att_elem_bytes<DT>();
    __shared__ float q_row[RUDNN_ATTENTION_MAX_HEAD_DIM];
    const int lane = (int)threadIdx.x % W, warp = (int)threadIdx.x / W, warps = (int)blockDim.x / W;
    const int64_t rows = a.batch * a.heads_q * a.seq_q;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        int64_t b, h, i;
        att_split_row(a, row, &b, &h, &i);
        const int64_t hk = h / a.group;
        __syncthreads(); /* the previous row's readers of q_row are done */
        const void *qr = (const char *)a.q + (b * a.qs[0] + h * a.qs[1] + i * a.qs[2]) * EB;
        for (int d = threadIdx.x; d < a.d; d += blockDim.x)
            q_row[d] = Elem<DT>::ld(qr, d);
        __syncthreads();

        const int64_t lo = att_lo(a, i), hi = att_hi(a, i);
        const uint8_t *mask_row = att_mask_row(a, b, h, i);
        const int64_t bias_row = att_bias_row(a, b, h, i);
        const char *kb = (const char *)a.k + (b * a.ks[0] + hk * a.ks[1]) * EB;
        float *sr = scores + row * a.seq_kv;
        for (int64_t j = warp; j < a.seq_kv; j += warps) {
            if (!att_visible(j, lo, hi, mask_row)) { /* the same for the whole warp */
                if (lane == 0)
                    sr[j] = -INFINITY;
                continue;
            }
            const void *kr = kb + j * a.ks[2] * EB;
            float dot = 0.0f;
            for (int d = lane; d < a.d; d += W)
                dot = fmaf(q_row[d], Elem<DT>::ld(kr, d), dot);
            dot = warp_allreduce<SumOp>(dot);
            if (lane == 0)
                sr[j] = att_finish(a, dot, j, bias_row);
        }
    }
}

/* Sum or max over the CTA, the result in every thread (scratch: RDG_MAX_WARPS floats; two
 * barriers, so consecutive calls may share it). */
template <class Op>
__device__ __forceinline__ float att_block_reduce(float v, float *scratch)
{
    constexpr int W = RDG_WARP;
    const int lane = (int)threadIdx.x % W, warp = (int)threadIdx.x / W, warps = (int)blockDim.x / W;
    v = warp_allreduce<Op>(v);
    __syncthreads(); /* the last call's readers are done */
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : Op::identity();
    return warp_allreduce<Op>(v);
}

/* The row's softmax in place (FP32, max-subtracted) and its lse; a row with no visible key (or
 * Skv 0) becomes all 0, lse -inf. */
__global__ void RDG_LAUNCH_BOUNDS(ATT_FB_THREADS, 1) att_softmax_kernel(const rdg_att_args a, float *scores)
{
    __shared__ float scratch[RDG_MAX_WARPS];
    const int64_t rows = a.batch * a.heads_q * a.seq_q;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        float *sr = scores + row * a.seq_kv;
        float m = -INFINITY;
        for (int64_t j = threadIdx.x; j < a.seq_kv; j += blockDim.x)
            m = fmaxf(m, sr[j]);
        m = att_block_reduce<MaxOp>(m, scratch);
        const bool none = m == -INFINITY; /* never exp(-inf - -inf) */
        float sum = 0.0f;
        for (int64_t j = threadIdx.x; j < a.seq_kv; j += blockDim.x) {
            const float p = none ? 0.0f : expf(sr[j] - m);
            sr[j] = p;
            sum += p;
        }
        sum = att_block_reduce<SumOp>(sum, scratch);
        const float inv = none ? 0.0f : 1.0f / sum;
        for (int64_t j = threadIdx.x; j < a.seq_kv; j += blockDim.x)
            sr[j] *= inv;
        if (a.lse && threadIdx.x == 0)
            a.lse[row] = none ? -INFINITY : m + logf(sum);
    }
}

/* out[b, h, i, c] = sum_j P[row, j] v[b, h / G, j, c]: threads over c (coalesced V rows). */
template <int DT>
__global__ void RDG_LAUNCH_BOUNDS(ATT_FB_PV_MAX_THREADS, 1) att_pv_kernel(const rdg_att_args a, const float *scores)
{
    constexpr int EB = att_elem_bytes<DT>();
    const int64_t rows = a.batch * a.heads_q * a.seq_q;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        int64_t b, h, i;
        att_split_row(a, row, &b, &h, &i);
        const int64_t hk = h / a.group;
        const float *pr = scores + row * a.seq_kv;
        const char *vb = (const char *)a.v + (b * a.vs[0] + hk * a.vs[1]) * EB;
        void *ob = (char *)a.out + (b * a.os[0] + h * a.os[1] + i * a.os[2]) * EB;
        for (int c = threadIdx.x; c < a.dv; c += blockDim.x) {
            float acc = 0.0f;
            for (int64_t j = 0; j < a.seq_kv; j++)
                acc = fmaf(pr[j], Elem<DT>::ld(vb, j * a.vs[2] + c), acc);
            Elem<DT>::st(ob, c, acc);
        }
    }
}

/* DEVICE_ERROR naming the kernel when the launch just made failed. */
rudnn_status_t launched(const char *kernel, int64_t grid, int threads)
{
    const cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess)
        return RUDNN_STATUS_SUCCESS;
    char what[160];
    snprintf(what, sizeof what, " kernel launch (" ATT_FALLBACK_NAME " %s, grid %lld, block %d)", kernel,
             (long long)grid, threads);
    return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, what);
}

template <int DT>
rudnn_status_t run_fallback(rdg_queue_t *q, const rudnn_attention_plan_t *plan, const rdg_att_args &a,
                            float *scores)
{
    const int64_t rows = plan->batch * plan->heads_q * plan->seq_q;
    const int64_t grid = rows < ATT_MAX_GRID ? rows : ATT_MAX_GRID;
    const int w = q->dev.warp_size > 0 ? q->dev.warp_size : 32;
    (void)cudaGetLastError(); /* the checks below see these launches only */
    rdg_note_kernel(ATT_FALLBACK_NAME);
    if (plan->seq_kv > 0) {
        att_scores_kernel<DT><<<dim3((unsigned)grid), dim3(ATT_FB_THREADS), 0, q->stream>>>(a, scores);
        TRY(launched("scores", grid, ATT_FB_THREADS));
    }
    att_softmax_kernel<<<dim3((unsigned)grid), dim3(ATT_FB_THREADS), 0, q->stream>>>(a, scores);
    TRY(launched("softmax", grid, ATT_FB_THREADS));
    int threads = (int)rdg_ceil_div(plan->head_dim_v, w) * w;
    if (threads > ATT_FB_PV_MAX_THREADS)
        threads = ATT_FB_PV_MAX_THREADS;
    att_pv_kernel<DT><<<dim3((unsigned)grid), dim3((unsigned)threads), 0, q->stream>>>(a, scores);
    return launched("pv", grid, threads);
}

} // namespace

uint64_t rdg_att_scores_bytes(const rudnn_attention_plan_t *plan)
{
    const uint64_t dims[5] = {(uint64_t)plan->batch, (uint64_t)plan->heads_q, (uint64_t)plan->seq_q,
                              (uint64_t)plan->seq_kv, sizeof(float)};
    uint64_t n = 1;
    for (int i = 0; i < 5; i++) {
        if (dims[i] != 0 && n > UINT64_MAX / dims[i])
            return 0;
        n *= dims[i];
    }
    return n;
}

const char *rdg_att_scores_unfit(const rdg_devinfo_t *dev, const rudnn_attention_plan_t *plan, char *why,
                                 size_t cap)
{
    if (plan->seq_kv == 0)
        return nullptr;
    const uint64_t n = rdg_att_scores_bytes(plan);
    if (n == 0 || n > SIZE_MAX) {
        snprintf(why, cap, "the fallback's scores (B*Hq*Sq*Skv floats) overflow size_t");
        return why;
    }
    const uint64_t limit = (uint64_t)dev->total_mem / ATT_FB_MEM_DIVISOR;
    if (n > limit) {
        snprintf(why, cap, "the fallback's scores need %llu bytes, over 1/%d of the device's memory (%llu)",
                 (unsigned long long)n, ATT_FB_MEM_DIVISOR, (unsigned long long)dev->total_mem);
        return why;
    }
    return nullptr;
}

rudnn_status_t rdg_att_run_fallback(rdg_queue_t *q, const rudnn_attention_plan_t *plan, const rdg_att_args &a,
                                    rudnn_mem_ref_t workspace)
{
    char why[256];
    if (rdg_att_scores_unfit(&q->dev, plan, why, sizeof why))
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, ATT_OP ": %s: %s", RUDNN_GPU_BACKEND_NAME, why);
    float *scores = (float *)rdg_at(workspace);
    if (plan->seq_kv > 0 && scores == nullptr)
        return rdg_error(RUDNN_STATUS_INTERNAL, ATT_OP ": %s: " ATT_FALLBACK_NAME " got no workspace",
                         RUDNN_GPU_BACKEND_NAME);
    switch (plan->dtype) {
    case RUDNN_F32:
        return run_fallback<RUDNN_F32>(q, plan, a, scores);
    case RUDNN_F16:
        return run_fallback<RUDNN_F16>(q, plan, a, scores);
    default:
        return run_fallback<RUDNN_BF16>(q, plan, a, scores);
    }
}
