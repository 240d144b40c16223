/* The register kernel: a row held in registers, 16-byte loads, each element read from DRAM once
 * and written once. A row lives in the registers of one warp, of one CTA, or of the CTAs of a
 * thread-block cluster (one slice each, partial statistics exchanged through distributed shared
 * memory), F = NV * VEC floats per thread. CTAs are persistent (grid sized from occupancy) and
 * stage their gamma/beta slice in shared memory once. Needs cols % VEC == 0 and 16-byte aligned
 * pointers. At F = 64 (16-bit rms_norm) the row stays packed: the loaded 16-bit vectors are kept
 * and converted again in each pass. In place: every element is read and written by the same
 * thread, after all of that thread's reads of it. */
#ifndef RUDNN_NORM_REG_CUH
#define RUDNN_NORM_REG_CUH

#include "norm_math.cuh"

namespace {

/* Register budgets (CUDA; HIP takes only the thread limit): BLOCKS CTAs of THREADS threads must
 * fit on an SM, which caps the registers per thread:
 *   warp rows (256 threads), F = 8: 8 CTAs -> 32 regs      F = 32: 4 CTAs -> 64 regs
 *   CTA or cluster (512 threads), F = 16: 3 CTAs -> 40      F = 32: 2 CTAs -> 64
 *   packed 16-bit rows (F = 64, <= 256 threads): 2 CTAs -> 128 (below that ptxas spills)
 * One step down (fewer CTAs, more registers) where the base budget spills: add_rms_norm (two
 * inputs in flight; half at F = 32), F32 layer_norm (gamma and beta per vector), and 16-bit
 * rms_norm and layer_norm warp rows at F = 32 (they spilled 12 and 20 bytes). F32 softmax warp
 * rows at F = 32 spill 8 bytes at the base budget but were 1% slower one step down, so they keep
 * it. 16-bit layer_norm CTAs take a register cap instead (norm_reg_kernel_ln16). */
template <int F, int SCOPE, int OP, int ESIZE>
struct RegBounds {
    enum {
        THREADS = SCOPE == RED_WARP || F == 64 ? 256 : 512,
        BASE = SCOPE == RED_WARP ? (F == 8 ? 8 : 4) : F == 64 ? 2 : (F == 16 ? 3 : 2),
        DOWN = BASE > 4 ? BASE * 3 / 4 : BASE > 1 ? BASE - 1 : 1,
        BLOCKS = F == 64 ? BASE
               : OP == OP_ADD_RMS ? (F == 32 ? BASE / 2 : DOWN)
               : OP == OP_LN && ESIZE == 4 ? DOWN
               : SCOPE == RED_WARP && F == 32 && ESIZE == 2 && (OP == OP_RMS || OP == OP_LN) ? DOWN
               : BASE
    };
};

/* Which register kernels take the unscaled sums first (backends/README.md): rows over a cluster,
 * except 16-bit layer_norm and add_rms_norm (F32 layer_norm [4096, 65536] -3.6%, bf16 rms_norm
 * -1.5% to -2.2%; elsewhere 16-bit layer_norm spilled and warp rows lost 2-5%; eighth session). */
__host__ __device__ constexpr bool fast_sums(int op, int scope, int vec)
{
    return scope == RED_CLUSTER && op != OP_ADD_RMS && !(op == OP_LN && vec == 8);
}

template <bool B>
struct BoolC {
    static constexpr bool value = B;
};

/* A row group handles one row at a time: one warp (SCOPE RED_WARP: the CTA runs blockDim / warp
 * rows side by side), the CTA (RED_BLOCK), or the CTAs of a cluster, each holding one slice of
 * the row (RED_CLUSTER). Thread `lane` of the group holds vectors lane + i * gsize (i < NV) of
 * its slice, F = NV * VEC floats. */
template <class S, int OP, int F, int SCOPE, int STAGE_AFFINE>
__device__ __forceinline__ void norm_reg_body(const NormArgs &a)
{
    constexpr int VEC = S::VEC;
    constexpr int NV = F / VEC;
    /* F = 64: 16-bit rms_norm rows kept packed in registers (below) */
    constexpr bool PACKED = F == 64;
    static_assert(!PACKED || (VEC == 8 && OP == OP_RMS), "packed rows: 16-bit rms_norm only (norm_policy.h)");
    constexpr bool HAS_GAMMA = OP != OP_SOFTMAX;
    constexpr bool WARP = SCOPE == RED_WARP;
    constexpr bool FAST = fast_sums(OP, SCOPE, VEC); /* unscaled sums first */

    extern __shared__ float4 rdg_dyn_smem[];
    __shared__ float red_f[2 * RDG_MAX_WARPS];
    __shared__ int red_i[2 * RDG_MAX_WARPS];
    __shared__ float2 red_cl[2 * RDG_RED_MAX_CLUSTER];
    __shared__ uint64_t red_bar[2];

    const int csize = SCOPE == RED_CLUSTER ? a.csize : 1;
    const int rank = SCOPE == RED_CLUSTER ? (int)(blockIdx.x % (unsigned)csize) : 0;
    RedCtx ctx = red_ctx(red_f, red_i, red_cl, red_bar, csize, rank);
    const int lane = WARP ? (int)(threadIdx.x % RDG_WARP) : (int)threadIdx.x;
    const int gsize = WARP ? RDG_WARP : (int)blockDim.x;
    const int groups = WARP ? (int)(blockDim.x / RDG_WARP) : 1;
    const int group = WARP ? (int)(threadIdx.x / RDG_WARP) : 0;
    const int nvec = (int)(a.cols / VEC); /* cols <= INT32_MAX */
    const int vbeg = rank * a.slice_vec;
    const int count = min(a.slice_vec, nvec - vbeg); /* vectors in this CTA's slice */
    const float h = (float)a.cols, rh = 1.0f / h; /* stat_div */

    /* gamma/beta slice: staged once per CTA in shared memory (the CTA is persistent over rows);
     * a missing beta is staged as zeros (fmaf(t, g, 0) == t * g). STAGE_AFFINE
     * (RDG_NORM_STAGE_*): gamma and beta, or gamma only (beta read through the caches); HIP
     * stages neither. */
    constexpr bool STAGED = HAS_GAMMA && kStageAffine;
    constexpr bool STAGED_B = STAGED && OP == OP_LN && STAGE_AFFINE == RDG_NORM_STAGE_GAMMA_BETA;
    const float *sg = (const float *)rdg_dyn_smem;
    const float *sb = sg + (size_t)a.slice_vec * VEC;
    if (STAGED) {
        const int n4 = count * (VEC / 4);
        stage_affine<VEC, false>((float *)sg, a.gamma + (size_t)vbeg * VEC, n4, a.slice_vec);
        if (STAGED_B)
            stage_affine<VEC, false>((float *)sb, a.beta ? a.beta + (size_t)vbeg * VEC : nullptr, n4, a.slice_vec);
        __syncthreads();
    }
    const float *gg = HAS_GAMMA ? a.gamma + (size_t)vbeg * VEC : nullptr;
    const float *gb = a.beta ? a.beta + (size_t)vbeg * VEC : nullptr;

    if (SCOPE == RED_CLUSTER)
        cluster_reduce_init(ctx);

    const int64_t step = (int64_t)(gridDim.x / (unsigned)csize) * groups;
    int64_t row = (int64_t)(blockIdx.x / (unsigned)csize) * groups + group;

    /* Prefetch: each thread copies its own vectors of the group's next row into shared memory
     * (after the staged gamma/beta) while the group reduces the current row, so loads stay in
     * flight across the synchronisations. A thread reads back only what it copied itself, and
     * converts it to registers before it issues the next copy, so no barrier is needed. Rows
     * are disjoint, so this holds in place too. */
    constexpr int NIN = OP == OP_ADD_RMS ? 2 : 1;
    const int nstaged = (STAGED ? 1 : 0) + (STAGED_B ? 1 : 0);
    const bool prefetch = kPrefetch && a.prefetch;
    typename S::raw_t *pf_x = (typename S::raw_t *)(sg + (size_t)nstaged * a.slice_vec * VEC) +
                              (size_t)group * NIN * a.slice_vec;
    /* through L1 (cp.async.ca; with .cg, L2 read 2.5x the input's bytes for 16-bit rows): bf16
     * rms_norm [4096, 65536] -4.9%; not for 16-bit layer_norm, whose beta goes through L1 (+1.9%,
     * eighth session) */
    constexpr bool PF_L1 = !(OP == OP_LN && VEC == 8);
    auto prefetch_row = [&](int64_t r) {
        if (r < a.rows) {
            issue_prefetch<S, NV, PF_L1>(pf_x, a.x, r * nvec + vbeg, lane, gsize, count);
            if (OP == OP_ADD_RMS)
                issue_prefetch<S, NV, PF_L1>(pf_x + a.slice_vec, a.r, r * nvec + vbeg, lane, gsize, count);
        }
        rdg_copy_async_commit(); /* one group per row, empty past the end */
    };
    if (prefetch)
        prefetch_row(row);

    for (; row < a.rows; row += step) {
        const int64_t base = row * nvec + vbeg; /* vector index of the slice start */
        /* FP32 values (v), or for PACKED rows the 16-bit vectors as loaded (xr), converted again in
         * every pass; either way row_vals(i, t) gives vector i's FP32 values. */
        float v[NV][VEC];
        typename S::raw_t xr[NV];
        auto row_vals = [&](int i, float (&t)[VEC]) { vals_of<S, PACKED>(xr[i], v[i], t); };
        /* f(x) for each of this thread's values, masked-out entries (0) included */
        auto each_val = [&](auto &&f) { for_each_val<NV, VEC>(row_vals, f); };
        /* two reductions per row: fixed slots 0, 1 (layer_norm's count varies with the fast
         * sums, so its slots keep alternating across rows) */
        if (OP == OP_SOFTMAX || (OP == OP_LN && !FAST))
            ctx.counter = 0;

        /* loads: every 16-byte load of the row is issued before the first use */
        {
            typename S::raw_t raw[NV], raw2[NV];
            if (prefetch) {
                rdg_copy_async_wait();
#pragma unroll
                for (int i = 0; i < NV; i++) {
                    const int vi = lane + i * gsize;
                    raw[i] = vi < count ? pf_x[vi] : S::zero();
                    if (OP == OP_ADD_RMS)
                        raw2[i] = vi < count ? pf_x[a.slice_vec + vi] : S::zero();
                }
            } else {
#pragma unroll
                for (int i = 0; i < NV; i++) {
                    const int vi = lane + i * gsize;
                    raw[i] = vi < count ? S::ldv(a.x, base + vi) : S::zero();
                    if (OP == OP_ADD_RMS)
                        raw2[i] = vi < count ? S::ldv(a.r, base + vi) : S::zero();
                }
            }
            if (OP == OP_ADD_RMS) {
#pragma unroll
                for (int i = 0; i < NV; i++) {
                    float t[VEC];
                    S::cvt(raw[i], v[i]);
                    S::cvt(raw2[i], t);
#pragma unroll
                    for (int k = 0; k < VEC; k++)
                        v[i][k] = S::round(v[i][k] + t[k]);
                }
            } else {
#pragma unroll
                for (int i = 0; i < NV; i++) {
                    if constexpr (PACKED)
                        xr[i] = raw[i];
                    else
                        S::cvt(raw[i], v[i]);
                }
            }
        }
        if (prefetch) {
            prefetch_row(row + step); /* into the buffer just read */
        }
        if (OP == OP_ADD_RMS) {
            /* x_out may be a or r: written only after this thread read both */
#pragma unroll
            for (int i = 0; i < NV; i++) {
                const int vi = lane + i * gsize;
                if (vi < count)
                    S::stv(a.xout, base + vi, v[i]);
            }
        }

        if (OP == OP_RMS || OP == OP_ADD_RMS) {
            /* masked-out entries are 0: they add nothing to max|x| or the sum */
            float s = 0.0f;
            bool fast = false;
            if constexpr (FAST) {
                each_val([&](float x) { s = fmaf(x, x, s); });
                s = block_allreduce<SumOp, SCOPE>(s, ctx);
                fast = unscaled_sumsq_ok(s);
            }
            int e = 0;
            if (!fast)
                e = rms_scaled_sumsq<SCOPE, es_redux(OP, SCOPE, VEC)>(each_val, s, ctx);
            const float sc = pow2_neg(e);
            const float inv = stat_rsqrt<false>(stat_div<false>(s, h, rh) + scale_pow2(a.eps, -2 * e));
            if (OP == OP_ADD_RMS && rank == 0 && lane == 0)
                a.rstd[row] = scale_pow2(inv, -e);
            /* y = (x * 2^-e) * inv * gamma; the fast path's e is 0 and skips that multiply */
            auto store_rows = [&](auto scaled) {
#pragma unroll
                for (int i = 0; i < NV; i++) {
                    const int vi = lane + i * gsize;
                    if (vi < count) {
                        float g[VEC], t[VEC];
                        load_affine<VEC, STAGED>(sg, gg, vi, a.slice_vec, g);
                        row_vals(i, t);
#pragma unroll
                        for (int k = 0; k < VEC; k++)
                            t[k] = (decltype(scaled)::value ? t[k] * sc : t[k]) * inv * g[k];
                        S::stv(a.y, base + vi, t);
                    }
                }
            };
            if (fast)
                store_rows(BoolC<false>());
            else
                store_rows(BoolC<true>());
        } else if (OP == OP_LN) {
            /* y = (x - mean) * inv * gamma + beta; CENTERED: v holds x - mean already (scaled
             * path, in its scaled units) */
            auto store_ln = [&](auto centered, float mean, float inv) {
#pragma unroll
                for (int i = 0; i < NV; i++) {
                    const int vi = lane + i * gsize;
                    if (vi < count) {
                        float g[VEC], t[VEC];
                        load_affine<VEC, STAGED>(sg, gg, vi, a.slice_vec, g);
#pragma unroll
                        for (int k = 0; k < VEC; k++)
                            t[k] = (decltype(centered)::value ? v[i][k] : v[i][k] - mean) * inv;
                        if (STAGED_B || gb) {
                            float b[VEC];
                            load_affine<VEC, STAGED_B>(sb, gb, vi, a.slice_vec, b);
#pragma unroll
                            for (int k = 0; k < VEC; k++)
                                t[k] = fmaf(t[k], g[k], b[k]);
                        } else {
#pragma unroll
                            for (int k = 0; k < VEC; k++)
                                t[k] *= g[k];
                        }
                        S::stv(a.y, base + vi, t);
                    }
                }
            };
            bool fast = false;
            if constexpr (FAST) {
                float s = 0.0f;
                each_val([&](float x) { s += x; });
                s = block_allreduce<SumOp, SCOPE>(s, ctx);
                if (unscaled_sum_ok(s)) {
                    const float mean = stat_div<false>(s, h, rh);
                    float q = 0.0f;
#pragma unroll
                    for (int i = 0; i < NV; i++) {
                        if (lane + i * gsize < count)
#pragma unroll
                            for (int k = 0; k < VEC; k++) {
                                const float d = v[i][k] - mean;
                                q = fmaf(d, d, q);
                            }
                    }
                    q = block_allreduce<SumOp, SCOPE>(q, ctx);
                    fast = unscaled_sumsq_ok(q);
                    if (fast)
                        store_ln(BoolC<false>(), mean, stat_rsqrt<false>(stat_div<false>(q, h, rh) + a.eps));
                }
            }
            if (!fast) { /* the power-of-two scaled path */
                const float inv = ln_scaled_center<SCOPE, es_redux(OP, SCOPE, VEC)>(v, lane, gsize, count, h,
                                                                                   a.eps, ctx);
                store_ln(BoolC<true>(), 0.0f, inv);
            }
        } else { /* OP_SOFTMAX: max, then the sum of exp (one reduction of (k, s) pairs was no
                  * faster for 16-bit rows, thirteenth session) */
            float m = -INFINITY;
#pragma unroll
            for (int i = 0; i < NV; i++) {
                if (lane + i * gsize < count)
#pragma unroll
                    for (int k = 0; k < VEC; k++)
                        m = fmaxf(m, v[i][k]);
            }
            m = block_allreduce<MaxOp, SCOPE>(m, ctx);
            float s = 0.0f;
#pragma unroll
            for (int i = 0; i < NV; i++) {
                if (lane + i * gsize < count)
#pragma unroll
                    for (int k = 0; k < VEC; k++) {
                        v[i][k] = softmax_exp<VEC>(v[i][k] - m);
                        s += v[i][k];
                    }
            }
            s = block_allreduce<SumOp, SCOPE>(s, ctx);
            const float inv = 1.0f / s;
#pragma unroll
            for (int i = 0; i < NV; i++) {
                const int vi = lane + i * gsize;
                if (vi < count) {
#pragma unroll
                    for (int k = 0; k < VEC; k++)
                        v[i][k] *= inv;
                    S::stv(a.y, base + vi, v[i]);
                }
            }
        }
    }
    if (prefetch)
        rdg_copy_async_wait();
    /* A CTA's shared memory must outlive the cluster's last remote read of it. */
    if (SCOPE == RED_CLUSTER)
        cluster_sync_all();
}

/* STAGE: RDG_NORM_STAGE_GAMMA_BETA, or RDG_NORM_STAGE_GAMMA (16-bit layer_norm clusters: the
 * whole slice would leave one CTA per SM) */
template <class S, int OP, int F, int SCOPE, int STAGE = 1>
__global__ void RDG_LAUNCH_BOUNDS((RegBounds<F, SCOPE, OP, sizeof(typename S::elem_t)>::THREADS),
                                  (RegBounds<F, SCOPE, OP, sizeof(typename S::elem_t)>::BLOCKS))
norm_reg_kernel(NormArgs a)
{
    norm_reg_body<S, OP, F, SCOPE, STAGE>(a);
}

/* 16-bit layer_norm rows in one CTA at F = 32 (up to 512 threads): 80 registers. The launch
 * bounds allow 64 (2 CTAs of 512), which spills 28 bytes, or 128 (1 CTA), with which ptxas
 * takes so many that 256-thread CTAs fit only 2 per SM; 80 keeps the 3 per SM that their shared
 * memory allows, without spilling. */
template <class S, int STAGE = 1>
__global__ void RDG_MAXNREG(512, 80) norm_reg_kernel_ln16(NormArgs a)
{
    norm_reg_body<S, OP_LN, 32, RED_BLOCK, STAGE>(a);
}

} // namespace

#endif
