/* 16-bit layer_norm, two rows per thread (included by norm.cu, inside its namespace; CUDA only:
 * it needs gamma/beta staged in shared memory and the asynchronous prefetch).
 *
 * Why: the one-row kernels of 16-bit layer_norm cannot stage both gamma and beta (F32, 8 bytes
 * per column against the row's 2) and still keep two CTAs' rows in flight on an SM, so they read
 * beta through L2 for every row: at [4096, 65536] bf16 the L2 traffic (input, output, beta) then
 * equals the row bytes times about 3.5, which at the H200's L2 throughput is the measured 0.43 ms
 * (59% of copy bandwidth). Here one CTA per SM holds two rows of the same slice per thread
 * (twice the registers per thread: 128 at 512 threads), so gamma and beta are staged once per CTA
 * and read from shared memory once for both rows, the two rows reduce together (one barrier and
 * one cluster exchange per statistic for both), and the next two rows are prefetched (through L1:
 * nothing else of this kernel lives there).
 *
 * Numerics as the register kernel's unscaled-first path (RDG_NORM_FAST_SUM): both rows are
 * summed unscaled; a row whose reduced sums fail the bounds of backends/README.md takes the
 * power-of-two scaled path alone afterwards (every thread of the cluster sees the same reduced
 * sums, so they all take the same reductions). */

/* RDG_LN16_PAIR (bits): where choose() takes this kernel for 16-bit layer_norm: bit 0 rows over a
 * cluster, bit 1 rows of one CTA (3, the default: both; 0: neither, the one-row kernels). H200
 * A/B against the one-row kernels, 2 rounds, bf16 (f16 alike): [4096, 65536] 0.4271 -> 0.3437
 * ms (-19.5%), [2048, 131072] -24.0%, [16384, 8192] -2.9%, [8192, 4096] -1.4%, [32768, 2048]
 * -0.4%. (Rows held as 16 floats per thread, 1024 threads at 64 registers, lost: the CTA rows
 * spilled, +21% to +24%; [4096, 65536] -11.8%.) */
#ifndef RDG_LN16_PAIR
#define RDG_LN16_PAIR 3
#endif
template <class S, int F, int SCOPE>
__device__ __forceinline__ void ln_pair_body(const NormArgs &a)
{
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

    /* gamma and beta (zeros when absent) of the slice, then the prefetch buffers of two rows */
    float *sg = (float *)rdg_dyn_smem;
    float *sb = sg + (size_t)a.slice_vec * VEC;
    raw_t *pf = (raw_t *)(sb + (size_t)a.slice_vec * VEC);
    {
        const float4 *g4 = (const float4 *)(a.gamma + (size_t)vbeg * VEC);
        const float4 *b4 = a.beta ? (const float4 *)(a.beta + (size_t)vbeg * VEC) : nullptr;
        const int n4 = count * (VEC / 4);
        for (int k = lane; k < n4; k += gsize) {
            ((float4 *)sg)[k] = g4[k];
            ((float4 *)sb)[k] = b4 ? b4[k] : make_float4(0.f, 0.f, 0.f, 0.f);
        }
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

        /* unscaled sums of both rows (masked-out entries are 0) */
        float2 s = make_float2(0.0f, 0.0f);
#pragma unroll
        for (int i = 0; i < NV; i++)
#pragma unroll
            for (int k = 0; k < VEC; k++) {
                s.x += v0[i][k];
                s.y += v1[i][k];
            }
        s = block_allreduce_sum2<SCOPE>(s, ctx);
        const float mean0 = s.x / h, mean1 = s.y / h;
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
        q = block_allreduce_sum2<SCOPE>(q, ctx);
        const bool fast0 = unscaled_sum_ok(s.x) && unscaled_sumsq_ok(q.x);
        const bool fast1 = has1 && unscaled_sum_ok(s.y) && unscaled_sumsq_ok(q.y);
        const float inv0 = 1.0f / sqrtf(q.x / h + a.eps), inv1 = 1.0f / sqrtf(q.y / h + a.eps);
        const int64_t base0 = row * nvec + vbeg, base1 = base0 + nvec;

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
                load_affine<VEC, true>(sg, nullptr, vi * VEC, g);
                load_affine<VEC, true>(sb, nullptr, vi * VEC, b);
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
    }
    rdg_copy_async_wait();
    /* A CTA's shared memory must outlive the cluster's last remote write to it. */
    if (SCOPE == RED_CLUSTER)
        cluster_sync_all();
}

/* 16384 elements of a row in 512 threads at 128 registers (32 of each row per thread): one CTA of
 * the largest slice per SM; smaller slices fit two or more. */
template <class S, int SCOPE>
__global__ void __launch_bounds__(512, 1) ln_pair_kernel(NormArgs a)
{
    ln_pair_body<S, 32, SCOPE>(a);
}
