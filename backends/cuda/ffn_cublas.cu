/* The FFN's float GEMMs on cuBLAS (CUDA only; the loader in cublas_loader.h): C [m, n] F32 =
 * A [m, k] B [k, n], row-major, F32/F16/BF16 operands, FP32 accumulation. Row-major C = A B is
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
                       (int)p->k, &zero, c, CUDA_R_32F, (int)p->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx (ffn)");
    return rdg_cublas_end(&s, st);
}
