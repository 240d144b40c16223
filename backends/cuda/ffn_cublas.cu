/* The FFN's float GEMMs on cuBLAS (CUDA only; the loader in cublas_loader.h): C [m, n] (F32, or
 * the operands' dtype rounded once from the FP32 sum) = A [m, k] B [k, n], row-major, F32/F16/BF16
 * operands, FP32 accumulation. Row-major C = A B is
 * column-major C^T = B^T A^T, so cuBLAS gets (B, A) untransposed with the dims swapped. */
#include "rdg_internal.h"
#include "cublas_loader.h"

static cudaDataType cublas_type(rudnn_dtype_t dt)
{
    return dt == RUDNN_F16 ? CUDA_R_16F : dt == RUDNN_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

rudnn_status_t rdg_ffn_gemm_cublas(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, const void *a, const void *b,
                                   void *c)
{
    if (p->m > INT32_MAX || p->n > INT32_MAX || p->k > INT32_MAX)
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "ffn (cuBLAS): a GEMM dim above INT32_MAX (m %lld, n %lld, k "
                         "%lld)", (long long)p->m, (long long)p->n, (long long)p->k);
    RdgCublasSession s;
    TRY(rdg_cublas_begin(q, "ffn (cuBLAS)", &s));
    const float one = 1.0f, zero = 0.0f;
    const cudaDataType t = cublas_type(p->a_dtype);
    /* F32 operands: plain FP32 (no TF32), the precision the contract promises */
    rdg_note_kernel("ffn.cublas");
    rudnn_status_t st = rdg_cublas_check(
        &s,
        s.api->gemm_ex(s.handle, CUBLAS_OP_N, CUBLAS_OP_N, (int)p->n, (int)p->m, (int)p->k, &one, b, t, (int)p->n, a, t,
                       (int)p->k, &zero, c, cublas_type(p->c_dtype), (int)p->n, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx (ffn)");
    return rdg_cublas_end(&s, st);
}

/* ---- int8 x int8 -> int32 -------------------------------------------------------------------
 * cuBLAS's int8 tensor-core GEMMs take column-major "TN" operands: the weights must be K-contiguous.
 * The contract's W [k, n] is n-contiguous, so it is first transposed into the scratch (W^T [n, k],
 * n k bytes: ffn_gemm_workspace asks for them), then C^T [n, m] = (W^T)^T-op ... in cuBLAS's
 * column-major terms: op(A) = A^T with A = W^T stored column-major [k, n] (ld k), B = x column-major
 * [k, m] (ld k). Exact: int32 accumulation of |C| <= 65535 * 128 * 128 < 2^31. */
#define TRANSPOSE_TILE 32

__global__ void ffn_transpose_i8(const int8_t *__restrict__ w, int8_t *__restrict__ wt, int64_t k, int64_t n)
{
    __shared__ int8_t tile[TRANSPOSE_TILE][TRANSPOSE_TILE + 4];
    const int64_t r0 = (int64_t)blockIdx.y * TRANSPOSE_TILE, c0 = (int64_t)blockIdx.x * TRANSPOSE_TILE;
    for (int i = threadIdx.y; i < TRANSPOSE_TILE; i += blockDim.y) {
        const int64_t r = r0 + i, c = c0 + threadIdx.x;
        if (r < k && c < n)
            tile[i][threadIdx.x] = w[r * n + c];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < TRANSPOSE_TILE; i += blockDim.y) {
        const int64_t c = c0 + i, r = r0 + threadIdx.x; /* out row c, column r */
        if (c < n && r < k)
            wt[c * k + r] = tile[threadIdx.x][i];
    }
}

int rdg_ffn_cublas_i8_fits(const rudnn_ffn_gemm_plan_t *p)
{
    /* where cuBLAS 13's int8 GemmEx runs (it answers NOT_SUPPORTED for M 1, K 40 or M 20, K 72 on
     * the H200): all three dims multiples of 16, operands 16-byte aligned (ffn.cu checks those) */
    return p->k % 16 == 0 && p->n % 16 == 0 && p->m % 16 == 0 && p->m <= INT32_MAX && p->n <= INT32_MAX &&
           p->k <= INT32_MAX;
}

rudnn_status_t rdg_ffn_gemm_cublas_i8(rdg_queue_t *q, const rudnn_ffn_gemm_plan_t *p, const void *a, const void *b,
                                      void *scratch, void *c)
{
    const dim3 grid((unsigned)rdg_ceil_div(p->n, TRANSPOSE_TILE), (unsigned)rdg_ceil_div(p->k, TRANSPOSE_TILE));
    ffn_transpose_i8<<<grid, dim3(TRANSPOSE_TILE, 8), 0, q->stream>>>((const int8_t *)b, (int8_t *)scratch, p->k,
                                                                       p->n);
    TRY(rdg_launched("ffn.transpose_i8"));
    RdgCublasSession s;
    TRY(rdg_cublas_begin(q, "ffn (cuBLAS int8)", &s));
    const int32_t one = 1, zero = 0;
    rdg_note_kernel("ffn.cublas_i8");
    rudnn_status_t st = rdg_cublas_check(
        &s,
        s.api->gemm_ex(s.handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)p->n, (int)p->m, (int)p->k, &one, scratch, CUDA_R_8I,
                       (int)p->k, a, CUDA_R_8I, (int)p->k, &zero, c, CUDA_R_32I, (int)p->n, CUBLAS_COMPUTE_32I,
                       CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx (ffn, int8)");
    return rdg_cublas_end(&s, st);
}
