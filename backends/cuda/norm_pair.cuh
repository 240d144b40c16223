/* The pair kernel: 16-bit layer_norm and softmax, two rows per thread (CUDA: it needs gamma/beta
 * staged in shared memory and the asynchronous prefetch).
 *
 * Why (layer_norm): the one-row kernels of 16-bit layer_norm cannot stage both gamma and beta
 * (F32, 8 bytes per column against the row's 2) and still keep two CTAs' rows in flight on an
 * SM, so they read beta through L2 for every row (about 3.5 times the row's bytes in L2 traffic
 * at [4096, 65536] bf16). Here each thread holds its values of two rows of the same slice (twice
 * the registers per thread: 128 at F = 32), so gamma and beta are staged once per CTA and read
 * from shared memory once for both rows, the two rows reduce together (one barrier and one
 * cluster exchange per statistic for both), and the next two rows are prefetched (through L1:
 * nothing else of this kernel lives there). Softmax (no affine data) takes it for the halved
 * synchronisation alone, where that measured faster (norm_tuning.h).
 *
 * Numerics (layer_norm) as the register kernel's unscaled-first path: both rows are summed
 * unscaled; a row whose reduced sums fail the bounds of backends/README.md takes the
 * power-of-two scaled path alone afterwards (every thread of the cluster sees the same reduced
 * sums, so they all take the same reductions); the statistics' fast forms (stat_div,
 * stat_rsqrt). Softmax as norm_reg_body's. */
#ifndef RUDNN_NORM_PAIR_CUH
#define RUDNN_NORM_PAIR_CUH

#include "norm_math.cuh"

namespace {

template <class S, int OP, int F, int SCOPE>
__device__ __forceinline__ void pair_body(const NormArgs &a)
{
    static_assert(OP == OP_LN || OP == OP_SOFTMAX, "pair kernel: layer_norm and softmax");
    constexpr bool LN = OP == OP_LN;
    constexpr int VEC = S::VEC;
    constexpr int NV = F / VEC;
    static_assert(VEC == 8 && NV * VEC == F, "16-bit rows, whole vectors per thread");
    typedef typename S::raw_t raw_t;

    extern __shared__ float4 rdg_dyn_smem[];
    __shared__ float red_f[2 * RDG_MAX_WARPS];
    __shared__ int red_i[2 * RDG_MAX_WARPS];
    __shared__ float2 red_cl[2 * RDG_RED_MAX_CLUSTER];
    __shared__ uint64_t red_bar[2];

    const int lane = (int)threadIdx.x;
    const int gsize = (int)blockDim.x;
    const int csize = SCOPE == RED_CLUSTER ? a.csize : 1;
    const int rank = SCOPE == RED_CLUSTER ? (int)(blockIdx.x % (unsigned)csize) : 0;
    RedCtx ctx = red_ctx(red_f, red_i, red_cl, red_bar, csize, rank);
    const int nvec = (int)(a.cols / VEC);
    const int vbeg = rank * a.slice_vec;
    const int count = min(a.slice_vec, nvec - vbeg);
    const float h = (float)a.cols;
    const float rh = 1.0f / h; /* stat_div */

    /* gamma and beta (zeros when absent) of the slice (layer_norm), then the prefetch buffers of
     * two rows */
    float *sg = (float *)rdg_dyn_smem;
    float *sb = sg + (size_t)a.slice_vec * VEC;
    raw_t *pf = LN ? (raw_t *)(sb + (size_t)a.slice_vec * VEC) : (raw_t *)rdg_dyn_smem;
    if (LN) {
        const int n4 = count * (VEC / 4);
        stage_affine<VEC, true>(sg, a.gamma + (size_t)vbeg * VEC, n4, a.slice_vec);
        stage_affine<VEC, true>(sb, a.beta ? a.beta + (size_t)vbeg * VEC : nullptr, n4, a.slice_vec);
        __syncthreads();
    }
    if (SCOPE == RED_CLUSTER)
        cluster_reduce_init(ctx);

    const int64_t step = (int64_t)(gridDim.x / (unsigned)csize) * 2;
    int64_t row = (int64_t)(blockIdx.x / (unsigned)csize) * 2;
    auto prefetch_pair = [&](int64_t r) {
        for (int k = 0; k < 2; k++)
            if (r + k < a.rows)
                issue_prefetch<S, NV, true>(pf + (size_t)k * a.slice_vec, a.x, (r + k) * nvec + vbeg, lane,
                                            gsize, count);
        rdg_copy_async_commit();
    };
    prefetch_pair(row);

    /* layer_norm of both rows */
    auto layer_norm_pair = [&](float (&v0)[NV][VEC], float (&v1)[NV][VEC], bool has1, int64_t base0,
                               int64_t base1) {
        /* unscaled sums of both rows (masked-out entries are 0) */
        float2 s = make_float2(0.0f, 0.0f);
#pragma unroll
        for (int i = 0; i < NV; i++)
#pragma unroll
            for (int k = 0; k < VEC; k++) {
                s.x += v0[i][k];
                s.y += v1[i][k];
            }
        s = block_allreduce2<SumOp, SCOPE>(s, ctx);
        const float mean0 = stat_div<true>(s.x, h, rh), mean1 = stat_div<true>(s.y, h, rh);
        float2 q = make_float2(0.0f, 0.0f);
#pragma unroll
        for (int i = 0; i < NV; i++) {
            if (lane + i * gsize < count)
#pragma unroll
                for (int k = 0; k < VEC; k++) {
                    const float d0 = v0[i][k] - mean0, d1 = v1[i][k] - mean1;
                    q.x = fmaf(d0, d0, q.x);
                    q.y = fmaf(d1, d1, q.y);
                }
        }
        q = block_allreduce2<SumOp, SCOPE>(q, ctx);
        const bool fast0 = unscaled_sum_ok(s.x) && unscaled_sumsq_ok(q.x);
        const bool fast1 = has1 && unscaled_sum_ok(s.y) && unscaled_sumsq_ok(q.y);
        const float inv0 = stat_rsqrt<true>(stat_div<true>(q.x, h, rh) + a.eps);
        const float inv1 = stat_rsqrt<true>(stat_div<true>(q.y, h, rh) + a.eps);

        /* a row that failed takes the scaled path of norm_reg_body: v becomes x * 2^-e - mean */
        float c0 = mean0, c1 = mean1, r0 = inv0, r1 = inv1;
        if (!fast0) {
            r0 = ln_scaled_center<SCOPE, es_redux(OP_LN, SCOPE, VEC)>(v0, lane, gsize, count, h, a.eps, ctx);
            c0 = 0.0f;
        }
        if (has1 && !fast1) {
            r1 = ln_scaled_center<SCOPE, es_redux(OP_LN, SCOPE, VEC)>(v1, lane, gsize, count, h, a.eps, ctx);
            c1 = 0.0f;
        }
        /* both rows, gamma and beta read once */
#pragma unroll
        for (int i = 0; i < NV; i++) {
            const int vi = lane + i * gsize;
            if (vi < count) {
                float g[VEC], b[VEC], t[VEC];
                load_affine<VEC, true, true>(sg, nullptr, vi, a.slice_vec, g);
                load_affine<VEC, true, true>(sb, nullptr, vi, a.slice_vec, b);
#pragma unroll
                for (int k = 0; k < VEC; k++)
                    t[k] = fmaf((v0[i][k] - c0) * r0, g[k], b[k]);
                S::stv(a.y, base0 + vi, t);
                if (has1) {
#pragma unroll
                    for (int k = 0; k < VEC; k++)
                        t[k] = fmaf((v1[i][k] - c1) * r1, g[k], b[k]);
                    S::stv(a.y, base1 + vi, t);
                }
            }
        }
    };

    /* softmax of both rows (masked-out entries take no part in the maximum) */
    auto softmax_pair = [&](float (&v0)[NV][VEC], float (&v1)[NV][VEC], bool has1, int64_t base0,
                            int64_t base1) {
        float2 m = make_float2(-INFINITY, -INFINITY);
#pragma unroll
        for (int i = 0; i < NV; i++)
            if (lane + i * gsize < count)
#pragma unroll
                for (int k = 0; k < VEC; k++) {
                    m.x = fmaxf(m.x, v0[i][k]);
                    m.y = fmaxf(m.y, v1[i][k]);
                }
        m = block_allreduce2<MaxOp, SCOPE>(m, ctx);
        float2 s = make_float2(0.0f, 0.0f);
#pragma unroll
        for (int i = 0; i < NV; i++)
            if (lane + i * gsize < count)
#pragma unroll
                for (int k = 0; k < VEC; k++) {
                    v0[i][k] = softmax_exp<VEC>(v0[i][k] - m.x);
                    v1[i][k] = softmax_exp<VEC>(v1[i][k] - m.y);
                    s.x += v0[i][k];
                    s.y += v1[i][k];
                }
        s = block_allreduce2<SumOp, SCOPE>(s, ctx);
        const float inv0 = 1.0f / s.x, inv1 = 1.0f / s.y;
#pragma unroll
        for (int i = 0; i < NV; i++) {
            const int vi = lane + i * gsize;
            if (vi < count) {
#pragma unroll
                for (int k = 0; k < VEC; k++) {
                    v0[i][k] *= inv0;
                    v1[i][k] *= inv1;
                }
                S::stv(a.y, base0 + vi, v0[i]);
                if (has1)
                    S::stv(a.y, base1 + vi, v1[i]);
            }
        }
    };

    for (; row < a.rows; row += step) {
        const bool has1 = row + 1 < a.rows; /* the same in every CTA of the cluster */
        float v0[NV][VEC], v1[NV][VEC];
        rdg_copy_async_wait();
#pragma unroll
        for (int i = 0; i < NV; i++) {
            const int vi = lane + i * gsize;
            const bool in = vi < count;
            S::cvt(in ? pf[vi] : S::zero(), v0[i]);
            S::cvt(in && has1 ? pf[a.slice_vec + vi] : S::zero(), v1[i]);
        }
        prefetch_pair(row + step); /* into the buffers just read: each thread its own vectors */

        const int64_t base0 = row * nvec + vbeg, base1 = base0 + nvec;
        if constexpr (LN)
            layer_norm_pair(v0, v1, has1, base0, base1);
        else
            softmax_pair(v0, v1, has1, base0, base1);
    }
    rdg_copy_async_wait();
    /* A CTA's shared memory must outlive the cluster's last remote write to it. */
    if (SCOPE == RED_CLUSTER)
        cluster_sync_all();
}

/* 16384 elements of a row in 512 threads at 128 registers: one CTA of the largest slice per SM;
 * smaller slices fit two or more. */
template <class S, int OP, int SCOPE>
__global__ void __launch_bounds__(RDG_NORM_PAIR_CTA_ELEMS / RDG_NORM_PAIR_F, 1) pair_kernel(NormArgs a)
{
    pair_body<S, OP, RDG_NORM_PAIR_F, SCOPE>(a);
}

} // namespace

#endif
