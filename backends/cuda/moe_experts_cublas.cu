/* MoE SwiGLU experts through cuBLAS: a comparison path for measuring the tensor-core kernels of
 * moe_experts.cu against the vendor library in the same binary (the candidates moe.cublas_grouped and
 * cublas_loop). Same function and numeric contract (backends/README.md):
 *   1. offsets [E+1] are read back and the stream is SYNCHRONISED: cuBLAS takes each expert's row
 *      count on the host (our kernels read the offsets on the device and never synchronise);
 *   2. GEMM 1, FP32 output: gu[r, 0:I] = x_r . gate[e]^T, gu[r, I:2I] = x_r . up[e]^T (FP32 so that
 *      g and u reach silu unrounded, as the contract says);
 *   3. act[r, i] = round_dtype(silu(g) * u): silu_mul of moe_tc.cuh, the epilogue of our kernels;
 *   4. GEMM 2, output in the dtype: out[r, :] = act_r . down[e]^T.
 * Both GEMMs accumulate in FP32 (CUBLAS_COMPUTE_32F; the handle disallows reductions in the 16-bit
 * output type, cublas_loader.cu).
 *
 * Grouped (cublas): one cublasGemmGroupedBatchedEx per GEMM, one group per expert with rows: GEMM 1's
 * group holds two problems of one shape (gate and up), GEMM 2's one (down). The pointer arrays go to
 * the device in one copy. Per expert (cublas_loop, or a cuBLAS before 12.5 without the grouped
 * entry): one cublasGemmEx per expert and matrix. If cuBLAS refuses FP32 output of 16-bit inputs
 * in the grouped GEMM (CUBLAS_STATUS_NOT_SUPPORTED, nothing launched), GEMM 1 runs per expert from
 * then on in this process; GEMM 2 stays grouped.
 *
 * gu16 (moe.cublas_grouped_gu16, moe.cublas_loop_gu16): GEMM 1 writes gate and up in the dtype
 * instead, as PyTorch's MoE does (torch.mm / torch._grouped_mm outputs), halving gu's traffic; g
 * and u are then rounded to the dtype before silu, a second rounding our kernels' contract does
 * not have. For measuring the fastest cuBLAS form against our kernels.
 *
 * Column-major view (cuBLAS) of the row-major C [n, N] = A [n, K] . W^T with W [N, K] (both K
 * contiguous): C^T (N x n) = W (N x K) . A^T (K x n), where W's storage read column-major is W^T
 * (K x N, ld K) and A's storage is A^T (K x n, ld K). So transa = T on W (lda K), transb = N on A
 * (ldb K), m = N, n = the expert's rows, k = K, C column-major N x n with ldc = the row pitch:
 *   GEMM 1: W = gate[e] / up[e], A = tokens rows, m = I, k = H, lda = ldb = H, C = gu (+ I for up),
 *           ldc = 2I, C FP32;
 *   GEMM 2: W = down[e], A = act rows, m = H, k = I, lda = ldb = I, C = out, ldc = H, C in the dtype.
 *
 * Scratch (the device's, cublas_loader.h): device gu [rows, 2I] FP32 + the pointer arrays; pinned
 * host offsets + group arrays + pointer arrays. Nothing is allocated per call once it has grown.
 * CUDA only (moe_experts.cu calls it only from its RDG_HIP == 0 build).
 */
#include <limits.h>

#include <atomic>
#include <stdio.h>
#include <string.h>

#include "cublas_loader.h"
#include "rdg_internal.h"
#include "moe_tc.cuh"

namespace {

#define SWIGLU_THREADS 256

/* act[r, i] = round(silu(gu[r, i]) * gu[r, I + i]) for r < rows: grid.y over the rows, x over
 * groups of four columns (I % 4 == 0), both grid-stride. */
/* Four gu values at p: FP32, or 16-bit elements of the dtype DT (gu16). */
template <int DT, typename GU>
__device__ __forceinline__ float4 load4(const GU *p)
{
    if constexpr (sizeof(GU) == 4) {
        return *(const float4 *)p;
    } else {
        const uint2 w = *(const uint2 *)p;
        const uint16_t h[4] = {(uint16_t)(w.x & 0xffffu), (uint16_t)(w.x >> 16), (uint16_t)(w.y & 0xffffu),
                               (uint16_t)(w.y >> 16)};
        float f[4];
        for (int k = 0; k < 4; k++)
            f[k] = DT == RUDNN_BF16 ? rdg_bf16_to_f32(h[k]) : rdg_f16_to_f32(h[k]);
        return make_float4(f[0], f[1], f[2], f[3]);
    }
}

template <int DT, typename GU>
__global__ void __launch_bounds__(SWIGLU_THREADS)
swiglu_kernel(const GU *__restrict__ gu, uint16_t *__restrict__ act, int64_t rows, int64_t inter)
{
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const GU *g_row = gu + r * 2 * inter, *u_row = g_row + inter;
        uint16_t *a_row = act + r * inter;
        for (int64_t i = 4 * ((int64_t)blockIdx.x * blockDim.x + threadIdx.x); i < inter;
             i += 4 * (int64_t)gridDim.x * blockDim.x) {
            const float4 g = load4<DT>(g_row + i);
            const float4 u = load4<DT>(u_row + i);
            uint2 v;
            v.x = pack2(DT, silu_mul(g.x, u.x), silu_mul(g.y, u.y));
            v.y = pack2(DT, silu_mul(g.z, u.z), silu_mul(g.w, u.w));
            *(uint2 *)(a_row + i) = v;
        }
    }
}

/* GEMM 1's grouped form was refused FP32 output for this dtype (0 F16, 1 BF16). Process-wide, and
 * the cuBLAS lock is per device: sessions on two devices may race here, storing the same value. */
std::atomic<int> g_grouped_f32_refused[2];

/* Host arrays of one grouped GEMM: per group (transa .. beta) and per problem (a, b, c) */
struct Grouped {
    cublasOperation_t *ta, *tb;
    int *m, *n, *k, *lda, *ldb, *ldc, *size;
    float *alpha, *beta;
    const void **a, **b;
    void **c;
};

size_t pad8(size_t bytes)
{
    return (bytes + 7) / 8 * 8;
}

/* Takes n elements of T from the host scratch at *p (each piece 8-byte aligned). */
template <typename T>
T *carve(char **p, size_t n)
{
    T *r = (T *)*p;
    *p += pad8(n * sizeof(T));
    return r;
}

/* Host bytes of the per-group arrays of one Grouped (carve_groups). */
size_t group_bytes(size_t groups)
{
    return 2 * pad8(groups * sizeof(cublasOperation_t)) + 9 * pad8(groups * sizeof(int));
}

/* The per-group arrays for up to `groups` groups; problem arrays from `ptrs` (3 x problems). */
Grouped carve_groups(char **p, size_t groups, void **ptrs, size_t problems)
{
    Grouped g;
    g.ta = carve<cublasOperation_t>(p, groups);
    g.tb = carve<cublasOperation_t>(p, groups);
    int **ints[] = {&g.m, &g.n, &g.k, &g.lda, &g.ldb, &g.ldc, &g.size};
    for (int **x : ints)
        *x = carve<int>(p, groups);
    g.alpha = carve<float>(p, groups);
    g.beta = carve<float>(p, groups);
    g.a = (const void **)ptrs;
    g.b = (const void **)ptrs + problems;
    g.c = ptrs + 2 * problems;
    return g;
}

/* Group j: C = A . W^T as in the file comment (m = N, n = rows, k = K), `per` problems. */
void set_group(Grouped *g, int j, int per, int m, int n, int k, int ldc)
{
    g->ta[j] = CUBLAS_OP_T;
    g->tb[j] = CUBLAS_OP_N;
    g->m[j] = m;
    g->n[j] = n;
    g->k[j] = k;
    g->lda[j] = k;
    g->ldb[j] = k;
    g->ldc[j] = ldc;
    g->size[j] = per;
    g->alpha[j] = 1.0f;
    g->beta[j] = 0.0f;
}

/* Fills both GEMMs' problems from the offsets (host), one group per expert with rows, and returns
 * the group count. ptrs: tokens, gate, up, down, act, out (16-bit elements); gu: [rows, 2I] of
 * gu_size-byte elements (FP32, or the dtype with gu16). */
int set_problems(const uint32_t *off, int E, int64_t H, int64_t I, const void *const *ptrs, char *gu, int gu_size,
                 Grouped *g1, Grouped *g2)
{
    const char *x = (const char *)ptrs[0], *gate = (const char *)ptrs[1], *up = (const char *)ptrs[2];
    const char *down = (const char *)ptrs[3];
    char *act = (char *)ptrs[4], *out = (char *)ptrs[5];
    int groups = 0;
    for (int e = 0; e < E; e++) {
        const int64_t r0 = off[e], n = (int64_t)off[e + 1] - r0;
        if (n == 0)
            continue;
        const int j = groups++;
        set_group(g1, j, 2, (int)I, (int)n, (int)H, (int)(2 * I));
        g1->a[2 * j] = gate + (e * I * H) * 2;
        g1->a[2 * j + 1] = up + (e * I * H) * 2;
        g1->b[2 * j] = g1->b[2 * j + 1] = x + (r0 * H) * 2;
        g1->c[2 * j] = gu + (r0 * 2 * I) * gu_size;
        g1->c[2 * j + 1] = gu + (r0 * 2 * I + I) * gu_size;
        set_group(g2, j, 1, (int)H, (int)n, (int)I, (int)H);
        g2->a[j] = down + (e * H * I) * 2;
        g2->b[j] = act + (r0 * I) * 2;
        g2->c[j] = out + (r0 * H) * 2;
    }
    return groups;
}

/* One cublasGemmGroupedBatchedEx over groups [0, count); da/db/dc: the device copies of g's arrays. */
rudnn_status_t grouped_gemm(const RdgCublasSession *s, const Grouped *g, int count, cudaDataType ab, cudaDataType c,
                            const void *const *da, const void *const *db, void *const *dc, const char *what)
{
    return rdg_cublas_check(s,
                            s->api->gemm_grouped(s->handle, g->ta, g->tb, g->m, g->n, g->k, g->alpha, da, ab, g->lda,
                                                 db, ab, g->ldb, g->beta, dc, c, g->ldc, count, g->size,
                                                 CUBLAS_COMPUTE_32F),
                            what);
}

/* The same problems, one cublasGemmEx each (host pointer arrays). */
rudnn_status_t loop_gemm(const RdgCublasSession *s, const Grouped *g, int count, cudaDataType ab, cudaDataType c,
                         const char *what)
{
    const float one = 1.0f, zero = 0.0f;
    for (int j = 0, p = 0; j < count; j++)
        for (int i = 0; i < g->size[j]; i++, p++)
            TRY(rdg_cublas_check(s,
                                 s->api->gemm_ex(s->handle, g->ta[j], g->tb[j], g->m[j], g->n[j], g->k[j], &one,
                                                 g->a[p], ab, g->lda[j], g->b[p], ab, g->ldb[j], &zero, g->c[p], c,
                                                 g->ldc[j], CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                                 what));
    return RUDNN_STATUS_SUCCESS;
}

/* The forward, inside the session (s holds the device's handle and lock). */
rudnn_status_t run(RdgCublasSession *s, const rudnn_moe_rows_plan_t *plan, const void *const *ptrs,
                   const uint32_t *offsets, int per_expert, int gu16)
{
    rdg_queue_t *q = s->q;
    const int E = plan->experts;
    const int64_t H = plan->hidden, I = plan->inter, rows = plan->rows;
    const bool bf16 = plan->dtype == RUDNN_BF16;
    const cudaDataType dt = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    const bool grouped = !per_expert && s->api->gemm_grouped;

    /* Scratch. Device: gu [rows, 2I] FP32, then the pointer arrays [a1 b1 c1 | a2 b2 c2] (2E and E
     * entries each). Host: the offsets, the same pointer arrays (one copy), then each GEMM's
     * per-group arrays. */
    const int gu_size = gu16 ? 2 : (int)sizeof(float);
    const cudaDataType gu_type = gu16 ? dt : CUDA_R_32F;
    const size_t gu_bytes = pad8((size_t)rows * 2 * I * gu_size); /* keeps dptrs 8-byte aligned */
    const size_t ptr_bytes = 9 * (size_t)E * sizeof(void *);
    const size_t off_bytes = ((size_t)E + 1) * sizeof(uint32_t);
    void *dev = nullptr, *host = nullptr;
    TRY(rdg_cublas_scratch(s, gu_bytes + ptr_bytes, &dev, pad8(off_bytes) + ptr_bytes + 2 * group_bytes(E), &host));
    char *gu = (char *)dev;
    void **dptrs = (void **)((char *)dev + gu_bytes);

    /* 1. the row counts, on the host */
    char *hp = (char *)host;
    uint32_t *off = carve<uint32_t>(&hp, (size_t)E + 1);
    cudaError_t err = cudaMemcpyAsync(off, offsets, off_bytes, cudaMemcpyDeviceToHost, q->stream);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(q->stream);
    if (err != cudaSuccess)
        return rdg_error(RUDNN_STATUS_DEVICE_ERROR, "%s: %s: reading the expert offsets back failed: %s",
                         RUDNN_GPU_BACKEND_NAME, s->op, cudaGetErrorString(err));
    for (int e = 0; e < E; e++)
        if (off[e] > off[e + 1] || (int64_t)off[e + 1] > rows)
            return rdg_error(RUDNN_STATUS_INTERNAL, "%s: %s: expert offsets are not ascending within %lld rows "
                             "(offsets[%d] = %u, offsets[%d] = %u)", RUDNN_GPU_BACKEND_NAME, s->op, (long long)rows,
                             e, off[e], e + 1, off[e + 1]);
    const int64_t used_rows = off[E];

    /* the problems of both GEMMs, one group per expert with rows */
    void **hptrs = carve<void *>(&hp, 9 * (size_t)E);
    Grouped g1 = carve_groups(&hp, E, hptrs, 2 * (size_t)E);
    Grouped g2 = carve_groups(&hp, E, hptrs + 6 * (size_t)E, E);
    const int groups = set_problems(off, E, H, I, ptrs, gu, gu_size, &g1, &g2);
    if (groups == 0)
        return RUDNN_STATUS_SUCCESS;

    /* the device copies of the pointer arrays, laid out as hptrs */
    const void *const *da1 = (const void *const *)dptrs, *const *db1 = da1 + 2 * E;
    void *const *dc1 = dptrs + 4 * E;
    const void *const *da2 = (const void *const *)dptrs + 6 * E, *const *db2 = da2 + E;
    void *const *dc2 = dptrs + 8 * E;
    if (grouped) {
        err = cudaMemcpyAsync(dptrs, hptrs, ptr_bytes, cudaMemcpyHostToDevice, q->stream);
        if (err != cudaSuccess)
            return rdg_error(RUDNN_STATUS_DEVICE_ERROR, "%s: %s: copying the GEMM pointer arrays failed: %s",
                             RUDNN_GPU_BACKEND_NAME, s->op, cudaGetErrorString(err));
    }

    /* 2. GEMM 1 (gate and up, FP32 out, or the dtype with gu16) */
    std::atomic<int> &refused = g_grouped_f32_refused[bf16 ? 1 : 0];
    bool loop1 = !grouped || (!gu16 && refused.load(std::memory_order_relaxed));
    if (!loop1) {
        const cublasStatus_t cs =
            s->api->gemm_grouped(s->handle, g1.ta, g1.tb, g1.m, g1.n, g1.k, g1.alpha, da1, dt, g1.lda, db1, dt,
                                 g1.ldb, g1.beta, dc1, gu_type, g1.ldc, groups, g1.size, CUBLAS_COMPUTE_32F);
        if (cs == CUBLAS_STATUS_NOT_SUPPORTED && !gu16) { /* no such grouped kernel (nothing launched) */
            refused.store(1, std::memory_order_relaxed);
            loop1 = true;
        } else {
            TRY(rdg_cublas_check(s, cs, gu16 ? "cublasGemmGroupedBatchedEx (gate/up, 16-bit output)"
                                              : "cublasGemmGroupedBatchedEx (gate/up, 16-bit inputs, FP32 output)"));
        }
    }
    if (loop1)
        TRY(loop_gemm(s, &g1, groups, dt, gu_type, gu16 ? "cublasGemmEx (gate/up, 16-bit output)"
                                                         : "cublasGemmEx (gate/up, 16-bit inputs, FP32 output)"));

    /* 3. act = round(silu(g) * u) */
    {
        const int64_t x_blocks = rdg_ceil_div(I / 4, SWIGLU_THREADS);
        const dim3 grid((unsigned)(x_blocks < 1024 ? x_blocks : 1024),
                        (unsigned)(used_rows < 65535 ? used_rows : 65535));
        if (gu16) {
            void (*fn)(const uint16_t *, uint16_t *, int64_t, int64_t) =
                bf16 ? swiglu_kernel<RUDNN_BF16, uint16_t> : swiglu_kernel<RUDNN_F16, uint16_t>;
            fn<<<grid, SWIGLU_THREADS, 0, q->stream>>>((const uint16_t *)gu, (uint16_t *)ptrs[4], used_rows, I);
        } else {
            void (*fn)(const float *, uint16_t *, int64_t, int64_t) =
                bf16 ? swiglu_kernel<RUDNN_BF16, float> : swiglu_kernel<RUDNN_F16, float>;
            fn<<<grid, SWIGLU_THREADS, 0, q->stream>>>((const float *)gu, (uint16_t *)ptrs[4], used_rows, I);
        }
        TRY(rdg_launched("moe experts_tensor_core cuBLAS silu(g) * u"));
    }

    /* 4. GEMM 2 (down, output in the dtype) */
    if (grouped)
        return grouped_gemm(s, &g2, groups, dt, dt, da2, db2, dc2, "cublasGemmGroupedBatchedEx (down)");
    return loop_gemm(s, &g2, groups, dt, dt, "cublasGemmEx (down)");
}

} // namespace

rudnn_status_t rdg_moe_experts_cublas(rdg_queue_t *q, const rudnn_moe_rows_plan_t *plan, const void *const *ptrs,
                                      const uint32_t *offsets, int per_expert, int gu16)
{
    static const char *const ops[2][2] = {
        {"moe.cublas_grouped", "moe.cublas_grouped_gu16"},
        {"moe.cublas_loop",
         "moe.cublas_loop_gu16"}};
    const char *op = ops[per_expert ? 1 : 0][gu16 ? 1 : 0];
    /* cuBLAS takes int sizes and leading dimensions (the largest is GEMM 1's ldc = 2I) */
    if (2 * plan->inter > INT_MAX || plan->hidden > INT_MAX || plan->rows > INT_MAX || plan->experts > INT_MAX / 9)
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: %s: sizes beyond cuBLAS's int arguments (hidden %lld, "
                         "inter %lld, rows %lld)", RUDNN_GPU_BACKEND_NAME, op, (long long)plan->hidden,
                         (long long)plan->inter, (long long)plan->rows);
    RdgCublasSession s;
    TRY(rdg_cublas_begin(q, op, &s));
    return rdg_cublas_end(&s, run(&s, plan, ptrs, offsets, per_expert, gu16));
}
