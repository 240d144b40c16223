/* The bulk kernel: 16-bit layer_norm and rms_norm rows streamed by bulk copies (CUDA, device code
 * for sm_90 and later, which have cp.async.bulk), in one CTA or over a cluster.
 *
 * Why: the register kernels hold a row's loads in registers or in per-thread cp.async copies, so
 * the bytes in flight on an SM are bounded by its threads, and gamma/beta staged per CTA (64 KiB
 * for a 16-bit layer_norm row of 8192) limit how many CTAs, hence rows, share an SM (the pair
 * kernel: 2 CTAs, 15 warps). Here a CTA of G row groups of T threads stages gamma (and beta)
 * once for all of them, and each group streams its own rows: the group's first thread copies a
 * whole row into one of STAGES shared buffers with a single bulk copy, counted by that buffer's
 * mbarrier, STAGES - 1 rows ahead of the row the group computes, so the next rows stay in
 * flight through the current row's reductions and no thread spends registers or load
 * instructions on them. Groups reduce on their own named barriers (reduce.cuh RED_GROUP).
 *
 * Numerics as the register kernel's unscaled-first path (backends/README.md): unscaled sums, and
 * the power-of-two scaled path for a row whose reduced sums fail the bounds; the statistics'
 * fast forms (stat_div, stat_rsqrt); layer_norm's variance in one reduction where that is
 * accurate enough (below). */
#ifndef RUDNN_NORM_BULK_CUH
#define RUDNN_NORM_BULK_CUH

#include "mbarrier.cuh"
#include "norm_math.cuh"

namespace {

static_assert(RDG_NORM_BULK_STAGES >= 1 && (int)RDG_NORM_BULK_STAGES <= (int)RDG_NORM_BULK_MAX_STAGES,
              "bulk kernel: 1 to RDG_NORM_BULK_MAX_STAGES buffers per group");

#if RUDNN_HAS_CLUSTERS && !RDG_HIP
/* bytes (a multiple of 16) from 16-byte aligned global src into shared dst, counted on bar. The
 * fence orders this thread's (and, after a barrier, its group's) earlier reads of dst before
 * the copy's writes, which go through the async proxy. */
__device__ __forceinline__ void bulk_load(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar)
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    mbar_expect_tx(bar, (int)bytes);
    /* no L2 evict-first hint: it measured 0.8% to 1.7% slower (twelfth session) */
    bulk_copy_g2s(dst, src, bytes, bar);
}

/* layer_norm's output for this thread's vectors (lane + i * T < count): y = (x - c) * inv *
 * gamma + beta, x from src(i, t) */
template <class S, int NV, class Src>
__device__ __forceinline__ void bulk_ln_store(Src &&src, float c, float inv, void *y, const float *sg,
                                              const float *sb, int lane, int T, int count, int slice, int64_t base)
{
    constexpr int VEC = S::VEC;
#pragma unroll
    for (int i = 0; i < NV; i++) {
        const int vi = lane + i * T;
        if (vi < count) {
            float g[VEC], b[VEC], t[VEC];
            load_affine<VEC, true, true>(sg, nullptr, vi, slice, g);
            load_affine<VEC, true, true>(sb, nullptr, vi, slice, b);
            src(i, t);
#pragma unroll
            for (int k = 0; k < VEC; k++)
                t[k] = fmaf((t[k] - c) * inv, g[k], b[k]);
            S::stv(y, base + vi, t);
        }
    }
}

/* layer_norm's scaled path for a row of which this thread holds w (vectors lane + i * T < count,
 * masked-out entries 0), and the row's output. Not inlined: it runs only for rows outside the
 * unscaled bounds, and inline its registers made the whole kernel spill (ptxas, 768 threads).
 * The context goes by value (by reference it would live in local memory in the hot path too);
 * the caller takes back its reductions' position, returned. */
template <class S, int NV, int SCOPE>
__device__ __noinline__ RedPos<SCOPE> bulk_ln_scaled(float (&w)[NV][S::VEC], void *y, float h, float eps, const float *sg,
                                           const float *sb, int lane, int T, int count, int slice, int64_t base,
                                           RedCtx ctx)
{
    constexpr int VEC = S::VEC;
    const float inv = ln_scaled_center<SCOPE, es_redux(OP_LN, SCOPE, VEC)>(w, lane, T, count, h, eps, ctx);
    bulk_ln_store<S, NV>(
        [&](int i, float (&t)[VEC]) {
#pragma unroll
            for (int k = 0; k < VEC; k++)
                t[k] = w[i][k];
        },
        0.0f, inv, y, sg, sb, lane, T, count, slice, base);
    return red_pos<SCOPE>(ctx);
}

/* rms_norm's output for this thread's vectors (lane + i * T < count): y = (x * sc) * inv * gamma,
 * x from src(i, t) */
template <class S, int NV, class Src>
__device__ __forceinline__ void bulk_rms_store(Src &&src, float sc, float inv, void *y, const float *sg, int lane,
                                               int T, int count, int slice, int64_t base)
{
    constexpr int VEC = S::VEC;
#pragma unroll
    for (int i = 0; i < NV; i++) {
        const int vi = lane + i * T;
        if (vi < count) {
            float g[VEC], t[VEC];
            load_affine<VEC, true, true>(sg, nullptr, vi, slice, g);
            src(i, t);
#pragma unroll
            for (int k = 0; k < VEC; k++)
                t[k] = (t[k] * sc) * inv * g[k];
            S::stv(y, base + vi, t);
        }
    }
}

/* rms_norm's scaled path for a row of which this thread holds xr (as bulk_ln_scaled: vectors
 * lane + i * T < count, masked-out entries zero), and the row's output. Not inlined, for the same
 * reason: inline it made the cluster kernel spill 8 bytes (ptxas, 768 threads). */
template <class S, int NV, int SCOPE>
__device__ __noinline__ RedPos<SCOPE> bulk_rms_scaled(const typename S::raw_t (&xr)[NV], void *y, float h, float rh,
                                               float eps, const float *sg, int lane, int T, int count, int slice,
                                               int64_t base, RedCtx ctx)
{
    constexpr int VEC = S::VEC;
    auto vals = [&](int i, float (&t)[VEC]) { S::cvt(xr[i], t); };
    float q;
    const int e = rms_scaled_sumsq<SCOPE, es_redux(OP_RMS, SCOPE, VEC)>(
        [&](auto &&f) { for_each_val<NV, VEC>(vals, f); }, q, ctx);
    /* y = (x * 2^-e) * inv * gamma (x * 2^-e exact) */
    const float inv = stat_rsqrt<true>(stat_div<true>(q, h, rh) + scale_pow2(eps, -2 * e));
    bulk_rms_store<S, NV>(vals, pow2_neg(e), inv, y, sg, lane, T, count, slice, base);
    return red_pos<SCOPE>(ctx);
}
#endif

/* One row per group at a time; group g of CTA (cluster) c takes rows c * G + g + k * (CTAs or
 * clusters) * G. SCOPE RED_GROUP: the CTA's slice is the whole row; RED_GROUP_CLUSTER: the CTA of
 * rank r in a cluster of csize holds slice r (a.slice_vec vectors) of its groups' rows, and group g
 * reduces with group g of the other CTAs. A thread holds vectors lane + i * T (i < NV) of its
 * slice in registers as loaded (converted at every use), and reads its gamma and beta from
 * shared memory in the output pass. Shared memory: the slice's gamma (and beta, layer_norm) in
 * planes (stage_affine), then each group's STAGES slice buffers. */
template <class S, int OP, int SCOPE>
__global__ void __launch_bounds__(RDG_NORM_BULK_THREADS, 1) bulk_kernel(NormArgs a)
{
#if RUDNN_HAS_CLUSTERS && !RDG_HIP
    static_assert(OP == OP_LN || OP == OP_RMS, "bulk kernel: layer_norm and rms_norm");
    static_assert(SCOPE == RED_GROUP || SCOPE == RED_GROUP_CLUSTER, "bulk kernel: row groups");
    constexpr bool CL = SCOPE == RED_GROUP_CLUSTER;
    constexpr int VEC = S::VEC;
    static_assert(VEC == 8, "bulk kernel: 16-bit rows");
    constexpr int NV = RDG_NORM_BULK_NV;
    constexpr bool LN = OP == OP_LN;
    typedef typename S::raw_t raw_t;

    extern __shared__ float4 rdg_dyn_smem[];
    __shared__ float red_f[2 * RDG_MAX_WARPS];
    __shared__ int red_i[2 * RDG_MAX_WARPS];
    __shared__ uint64_t full[RDG_NORM_BULK_MAX_GROUPS * RDG_NORM_BULK_MAX_STAGES];
    /* the groups' cluster partials and their mbarriers (reduce.cuh), by group */
    __shared__ float2 red_cl[CL ? RDG_NORM_BULK_MAX_GROUPS * 2 * RDG_RED_MAX_CLUSTER : 1];
    __shared__ uint64_t red_bar[CL ? RDG_NORM_BULK_MAX_GROUPS * 2 : 1];

    const int T = a.group_threads;
    const int groups = (int)blockDim.x / T;
    const int group = (int)threadIdx.x / T;
    const int lane = (int)threadIdx.x - group * T;
    const int stages = a.stages;
    const int csize = CL ? a.csize : 1;
    const int rank = CL ? (int)(blockIdx.x % (unsigned)csize) : 0;
    RedCtx ctx = red_ctx(red_f, red_i, CL ? red_cl + group * 2 * RDG_RED_MAX_CLUSTER : nullptr,
                         CL ? red_bar + group * 2 : nullptr, csize, rank);
    red_group(ctx, group * (T / RDG_WARP), T / RDG_WARP, 1 + group);

    const int64_t nvec_row = a.cols / VEC;
    const int slice = CL ? a.slice_vec : (int)nvec_row; /* vectors per CTA slice */
    const int vbeg = rank * slice;
    const int count = CL ? (int)min((int64_t)slice, nvec_row - vbeg) : slice; /* valid in this CTA's slice */
    const float h = (float)a.cols, rh = 1.0f / h;
    const uint32_t slice_bytes = (uint32_t)count * 16u;

    float *sg = (float *)rdg_dyn_smem;
    float *sb = sg + (size_t)slice * VEC;
    const int naffine = LN ? 2 : 1;
    raw_t *bufs = (raw_t *)(sg + (size_t)naffine * slice * VEC) + (size_t)group * stages * slice;
    uint64_t *bars = full + group * RDG_NORM_BULK_MAX_STAGES;
    /* this group's first row and the rows' step, taken where used (held from here on, they made
     * layer_norm spill at 768 threads) */
    auto first_row = [&]() { return (int64_t)(blockIdx.x / (unsigned)csize) * groups + group; };
    auto row_step = [&]() { return (int64_t)(gridDim.x / (unsigned)csize) * groups; };
    auto load_row = [&](int s, int64_t r) { /* by the group's first thread */
        if (r < a.rows)
            bulk_load(red_smem_u32(bufs + (size_t)s * slice), (const raw_t *)a.x + r * nvec_row + vbeg, slice_bytes,
                      red_smem_u32(&bars[s]));
    };
    /* the group's first thread sets up its buffers' mbarriers and issues its first rows' copies
     * before gamma/beta are staged, so that the launch's first DRAM reads need not wait for the
     * staging (bf16 layer_norm [32768, 4096] -1.5%, thirteenth session); the barrier below
     * publishes the inits */
    if (lane == 0) {
        for (int s = 0; s < stages; s++)
            mbar_init(red_smem_u32(&bars[s]), 1);
        mbar_fence_init();
        for (int s = 0; s < stages; s++)
            load_row(s, first_row() + s * row_step());
    }
    stage_affine<VEC, true>(sg, a.gamma + (size_t)vbeg * VEC, count * (VEC / 4), slice);
    if (LN)
        stage_affine<VEC, true>(sb, CL && a.beta ? a.beta + (size_t)vbeg * VEC : a.beta, count * (VEC / 4), slice);
    __syncthreads();
    if constexpr (CL)
        cluster_reduce_init<SCOPE>(ctx); /* every thread of the cluster: the groups' mbarriers */

    const int64_t step = row_step();
    int64_t row = first_row();
    int s = 0;
    uint32_t parity = 0u;
    for (; row < a.rows; row += step) {
        mbar_wait(red_smem_u32(&bars[s]), parity);
        /* the row's vectors as loaded (xr), converted again in every pass: vals(i, t) gives vector i
         * in FP32 (held as FP32, bf16 layer_norm spilled at the 80 registers of 768 threads) */
        raw_t xr[NV];
        const raw_t *buf = bufs + (size_t)s * slice;
#pragma unroll
        for (int i = 0; i < NV; i++) {
            const int vi = lane + i * T;
            xr[i] = vi < count ? buf[vi] : S::zero();
        }
        auto vals = [&](int i, float (&t)[VEC]) {
            S::launder(xr[i]);
            S::cvt(xr[i], t);
        };
        /* f(x) for each of this thread's values (masked-out entries are 0) */
        auto each = [&](auto &&f) { for_each_val<NV, VEC>(vals, f); };
        /* after the first reduction's barrier every thread of the group has read buffer s: its
         * first thread refills it with the row STAGES ahead */
        const int refill_s = s;
        auto refill = [&]() {
            if (lane == 0)
                load_row(refill_s, row + (int64_t)stages * step);
        };
        if (++s == stages) {
            s = 0;
            parity ^= 1u;
        }
        const int64_t base = row * nvec_row + vbeg; /* vector index of the slice start */

        if constexpr (OP == OP_RMS) {
            float q = 0.0f;
            each([&](float x) { q = fmaf(x, x, q); });
            q = block_allreduce<SumOp, SCOPE>(q, ctx);
            refill();
            if (unscaled_sumsq_ok(q))
                bulk_rms_store<S, NV>(vals, 1.0f, stat_rsqrt<true>(stat_div<true>(q, h, rh) + a.eps), a.y, sg, lane,
                                      T, count, slice, base);
            else { /* the power-of-two scaled path (the same in the whole group), out of line, on a copy
                    * of xr: passing xr itself would keep it in local memory on the hot path too */
                raw_t xc[NV];
#pragma unroll
                for (int i = 0; i < NV; i++)
                    xc[i] = xr[i];
                red_set_pos<SCOPE>(ctx, bulk_rms_scaled<S, NV, SCOPE>(xc, a.y, h, rh, a.eps, sg, lane, T, count, slice, base,
                                                               ctx));
            }
        } else { /* OP_LN */
            /* One pass: the sums of x and x^2 in one reduction, var = E[x^2] - mean^2, taken when
             * mean^2 <= 16 var: each FP32 sum is within about 40u (u = 2^-24) of the sum of its
             * terms' magnitudes, so var errs by at most about 17 * 124u = 1.3e-4 of itself (6.3e-5
             * relative in rstd, an eighth of an F16 output's half-ulp). Otherwise the sum of
             * (x - mean)^2 in a second reduction. Against two passes always: bf16 [32768, 4096]
             * -1.8%, [16384, 8192] -2.9% (twelfth session). */
            float sum = 0.0f, mean = 0.0f, var = 0.0f;
            bool fast = false;
            {
                float2 sq = make_float2(0.0f, 0.0f);
                each([&](float x) {
                    sq.x += x;
                    sq.y = fmaf(x, x, sq.y);
                });
                sq = block_allreduce2<SumOp, SCOPE>(sq, ctx);
                refill();
                sum = sq.x;
                mean = stat_div<true>(sum, h, rh);
                const float msq = mean * mean;
                var = stat_div<true>(sq.y, h, rh) - msq;
                fast = unscaled_sum_ok(sum) && unscaled_sumsq_ok(sq.y) && msq <= 16.0f * var;
            }
            if (!fast) {
                mean = stat_div<true>(sum, h, rh);
                float q = 0.0f;
#pragma unroll
                for (int i = 0; i < NV; i++)
                    if (lane + i * T < count) {
                        float t[VEC];
                        vals(i, t);
#pragma unroll
                        for (int k = 0; k < VEC; k++) {
                            const float d = t[k] - mean;
                            q = fmaf(d, d, q);
                        }
                    }
                q = block_allreduce<SumOp, SCOPE>(q, ctx);
                fast = unscaled_sum_ok(sum) && unscaled_sumsq_ok(q);
                var = stat_div<true>(q, h, rh);
            }
            if (fast) {
                bulk_ln_store<S, NV>(vals, mean, stat_rsqrt<true>(var + a.eps), a.y, sg, sb, lane, T, count, slice,
                                     base);
            } else { /* the power-of-two scaled path (the same in the whole group), out of line */
                float w[NV][VEC];
#pragma unroll
                for (int i = 0; i < NV; i++)
                    vals(i, w[i]);
                red_set_pos<SCOPE>(ctx, bulk_ln_scaled<S, NV, SCOPE>(w, a.y, h, a.eps, sg, sb, lane, T, count, slice, base, ctx));
            }
        }
    }
    /* every copy a group issued was for a row it then waited on: none is left in flight; a CTA's
     * shared memory must outlive the cluster's last push to it */
    if constexpr (CL)
        cluster_sync_all();
#else
    (void)a;
#endif
}

} // namespace

#endif
