/* 16-bit rows of one CTA streamed by bulk copies: layer_norm and rms_norm (included by norm.cu
 * inside its namespace; CUDA, device code for sm_90 and later, which have cp.async.bulk).
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
 * Numerics as the register kernel's unscaled-first path (RDG_NORM_FAST_SUM, backends/README.md):
 * unscaled sums, and the power-of-two scaled path for a row whose reduced sums fail the bounds;
 * statistics as the pair kernel's (RDG_NORM_FAST_STATS); layer_norm's variance in one pass where
 * that is accurate enough (RDG_BULK_LN_ONE_PASS). */

/* RDG_NORM_BULK (bits): the 16-bit rows that take this kernel where it fits (bulk_cfg in
 * norm.cu): rows of one CTA, 1 layer_norm, 2 rms_norm; rows over a cluster, 4 layer_norm, 8
 * rms_norm; 0 none. 15 (the default). H200 A/B of the one-CTA rows against the kernels before
 * (layer_norm: two rows per thread, rms_norm: packed rows), 2 rounds, bench/RESULTS.md: bf16
 * layer_norm [16384, 8192] -2.9%, [32768, 4096] -5.1%, [8192, 16384] -0.5%, f16 [16384, 8192]
 * -2.8%; rms_norm bf16 -4.2%, -2.2%, -1.8%, f16 -3.5%. Rows over a cluster (slices of 16384,
 * early loads) against the two-row cluster kernel (layer_norm) and the packed cluster kernel
 * (rms_norm), thirteenth session: bf16 layer_norm [4096, 32768] -3.3%, [4096, 65536] -5.2%,
 * [2048, 131072] -9.2%; rms_norm -3.1%, -3.5%, -3.6%. Softmax was 1.4% faster at [32768, 4096]
 * but 2.9% to 5.5% slower at [16384, 8192] and [8192, 16384], and F32 rows of all three ops
 * 2.3% to 4.2% slower (an earlier build), so those keep their kernels (their code was removed). */
#ifndef RDG_NORM_BULK
#define RDG_NORM_BULK 15
#endif
/* elements per CTA slice of rows over a cluster at least (the cluster: ceil(cols / this) CTAs, at
 * most 8). 16384 (a row of 65536 over 4 CTAs, one group of 512 threads each) against 8192 (8 CTAs,
 * 3 groups of 256), H200, 2 rounds: bf16 layer_norm [4096, 65536] -3.4%, rms_norm -2.8%;
 * [4096, 32768] +0.6% and +0.3%; [2048, 131072] the same launch (8 CTAs either way). */
#ifndef RDG_BULK_CLUSTER_SLICE
#define RDG_BULK_CLUSTER_SLICE 16384
#endif
/* shared buffers per row group (STAGES - 1 rows in flight while one is computed); 3 measured
 * no faster (H200 A/B, 2 rounds: bf16 layer_norm [16384, 8192] +0.3%, [32768, 4096] +0.6%,
 * rms_norm -0.2% and -0.2%; +1.7% on layer_norm in an earlier two-pass build) */
#ifndef RDG_BULK_STAGES
#define RDG_BULK_STAGES 2
#endif
/* 16-byte vectors of a row per thread (F = RDG_BULK_NV * VEC floats) */
#ifndef RDG_BULK_NV
#define RDG_BULK_NV 4
#endif
/* 16-bit rows kept packed in registers, converted in every pass (bits: 1 layer_norm, 2 rms_norm;
 * unpacked, bf16 layer_norm spills at the 80 registers of 768 threads) */
#ifndef RDG_BULK_PACK
#define RDG_BULK_PACK 3
#endif
/* layer_norm's statistics in one reduction where that is accurate enough (1, the default), or
 * always in two (0). One pass: FP32 sums of x and x^2, each within about 40u (u = 2^-24; 32
 * sequential terms per thread, then the reduction's tree) of the sum of the terms' magnitudes;
 * var = E[x^2] - mean^2 then errs by at most about 124u E[x^2] (E|x| and |mean| are at most
 * sqrt(E[x^2])), which when mean^2 <= 16 var is at most 17 * 124u = 1.3e-4 of var: 6.3e-5
 * relative in rstd, an eighth of an F16 output's half-ulp and a thirtieth of BF16's (this kernel
 * takes 16-bit rows only). Rows with a larger mean, and rows outside the unscaled bounds, take
 * the second reduction (sum of (x - mean)^2). H200 A/B against two passes, 2 rounds: bf16
 * [16384, 8192] -2.9%, [32768, 4096] -1.8%, f16 [16384, 8192] -2.2%. */
#ifndef RDG_BULK_LN_ONE_PASS
#define RDG_BULK_LN_ONE_PASS 1
#endif
/* threads per CTA at most (all groups), and row groups per CTA at most. 768 (3 groups of 256 at
 * 8192 columns, 80 registers); 1024 (64 registers) measured 2.2% to 6.3% slower for layer_norm
 * and 1% to 3% for rms_norm (H200, 2 rounds). */
#ifndef RDG_BULK_THREADS
#define RDG_BULK_THREADS 768
#endif
#define RDG_BULK_MAX_GROUPS 8
#define RDG_BULK_MAX_STAGES 4
static_assert(RDG_BULK_STAGES >= 1 && RDG_BULK_STAGES <= RDG_BULK_MAX_STAGES, "RDG_BULK_STAGES: 1 to RDG_BULK_MAX_STAGES");
/* bulk copies with an L2 evict-first hint (1; the rows are read once) or none (0, the default):
 * H200 A/B, 2 rounds, without the hint: bf16 layer_norm [16384, 8192] -0.8%, [32768, 4096]
 * 0.0%, rms_norm -1.7% and -1.4% */
#ifndef RDG_BULK_EVICT_FIRST
#define RDG_BULK_EVICT_FIRST 0
#endif

#if RUDNN_HAS_CLUSTERS && !RDG_HIP
/* bytes (a multiple of 16) from 16-byte aligned global src into shared dst, counted on bar. The
 * fence orders this thread's (and, after a barrier, its group's) earlier reads of dst before
 * the copy's writes, which go through the async proxy. */
__device__ __forceinline__ void bulk_load(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar)
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    mbar_expect_tx(bar, (int)bytes);
    if constexpr (RDG_BULK_EVICT_FIRST) {
        uint64_t policy;
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                     " [%0], [%1], %2, [%3], %4;\n" ::"r"(dst),
                     "l"(src), "r"(bytes), "r"(bar), "l"(policy)
                     : "memory");
    } else {
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                         dst),
                     "l"(src), "r"(bytes), "r"(bar)
                     : "memory");
    }
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
 * the caller takes back its reduction counter, returned. */
template <class S, int NV, int SCOPE>
__device__ __noinline__ int bulk_ln_scaled(float (&w)[NV][S::VEC], void *y, float h, float eps, const float *sg,
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
    return ctx.counter;
}
#endif

/* One row per group at a time; group g of CTA (cluster) c takes rows c * G + g + k * (CTAs or
 * clusters) * G. SCOPE RED_GROUP: the CTA's slice is the whole row; RED_GROUP_CLUSTER: the CTA of
 * rank r in a cluster of csize holds slice r (a.slice_vec vectors) of its groups' rows, and group g
 * reduces with group g of the other CTAs. A thread holds vectors lane + i * T (i < NV) of its
 * slice in registers (as loaded or as FP32: PACK below), and reads its gamma and beta from
 * shared memory in the output pass. Shared memory: the slice's gamma (and beta, layer_norm) in
 * planes (stage_affine), then each group's STAGES slice buffers. */
template <class S, int OP, int SCOPE>
__global__ void __launch_bounds__(RDG_BULK_THREADS, 1) bulk_kernel(NormArgs a)
{
#if RUDNN_HAS_CLUSTERS && !RDG_HIP
    static_assert(OP == OP_LN || OP == OP_RMS, "bulk kernel: layer_norm and rms_norm");
    static_assert(SCOPE == RED_GROUP || SCOPE == RED_GROUP_CLUSTER, "bulk kernel: row groups");
    constexpr bool CL = SCOPE == RED_GROUP_CLUSTER;
    constexpr int VEC = S::VEC;
    static_assert(VEC == 8, "bulk kernel: 16-bit rows");
    constexpr int NV = RDG_BULK_NV;
    constexpr bool LN = OP == OP_LN;
    constexpr bool ONE_PASS = RDG_BULK_LN_ONE_PASS != 0;
    /* the norms keep the row packed in registers and convert it in every pass (RDG_BULK_PACK) */
    constexpr bool PACK = (OP == OP_LN && (RDG_BULK_PACK & 1)) || (OP == OP_RMS && (RDG_BULK_PACK & 2));
    typedef typename S::raw_t raw_t;

    extern __shared__ float4 rdg_dyn_smem[];
    __shared__ float red_f[2 * RDG_MAX_WARPS];
    __shared__ int red_i[2 * RDG_MAX_WARPS];
    __shared__ uint64_t full[RDG_BULK_MAX_GROUPS * RDG_BULK_MAX_STAGES];
    /* the groups' cluster partials and their mbarriers (reduce.cuh), by group */
    __shared__ float2 red_cl[CL ? RDG_BULK_MAX_GROUPS * 2 * RDG_RED_MAX_CLUSTER : 1];
    __shared__ uint64_t red_bar[CL ? RDG_BULK_MAX_GROUPS * 2 : 1];

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
    uint64_t *bars = full + group * RDG_BULK_MAX_STAGES;
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
     * staging (H200 A/B against issuing them after, 2 rounds: bf16 layer_norm [32768, 4096]
     * -1.5%, [16384, 8192] -0.7%; rms_norm within 0.3%); the barrier below publishes the inits */
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
        /* the row's vectors as loaded (xr, PACK) or as FP32 (v); vals(i, t) gives vector i in FP32 */
        raw_t xr[NV];
        float v[NV][VEC];
        const raw_t *buf = bufs + (size_t)s * slice;
#pragma unroll
        for (int i = 0; i < NV; i++) {
            const int vi = lane + i * T;
            const raw_t w = vi < count ? buf[vi] : S::zero();
            if constexpr (PACK)
                xr[i] = w;
            else
                S::cvt(w, v[i]);
        }
        auto vals = [&](int i, float (&t)[VEC]) { vals_of<S, PACK>(xr[i], v[i], t); };
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
            int e = 0;
            if (!unscaled_sumsq_ok(q)) /* the power-of-two scaled path (the same in the whole group) */
                e = rms_scaled_sumsq<SCOPE, es_redux(OP_RMS, SCOPE, VEC)>(each, q, ctx);
            /* y = (x * 2^-e) * inv * gamma (x * 2^-e exact; e is 0 on the unscaled path) */
            const float sc = pow2_neg(e);
            const float inv = stat_rsqrt<true>(stat_div<true>(q, h, rh) + scale_pow2(a.eps, -2 * e));
#pragma unroll
            for (int i = 0; i < NV; i++) {
                const int vi = lane + i * T;
                if (vi < count) {
                    float g[VEC], t[VEC];
                    load_affine<VEC, true, true>(sg, nullptr, vi, slice, g);
                    vals(i, t);
#pragma unroll
                    for (int k = 0; k < VEC; k++)
                        t[k] = (t[k] * sc) * inv * g[k];
                    S::stv(a.y, base + vi, t);
                }
            }
        } else { /* OP_LN */
            /* ONE_PASS: the sums of x and x^2 in one reduction, var = E[x^2] - mean^2, taken when
             * mean^2 <= 16 var (below); otherwise, and without ONE_PASS, the sum of
             * (x - mean)^2 in a second */
            float sum = 0.0f, mean = 0.0f, var = 0.0f;
            bool fast = false;
            if constexpr (ONE_PASS) {
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
            } else {
                each([&](float x) { sum += x; });
                sum = block_allreduce<SumOp, SCOPE>(sum, ctx);
                refill();
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
                ctx.counter = bulk_ln_scaled<S, NV, SCOPE>(w, a.y, h, a.eps, sg, sb, lane, T, count, slice, base, ctx);
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
