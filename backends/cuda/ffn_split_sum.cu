/* The sum of split-k partials (rdg_ffn_split_sum, rdg_internal.h), shared by the FFN's weight-only
 * GEMMs (ffn_gemv, ffn.mma_w4, ffn.wgmma_w4). Launched as a programmatic dependent of the GEMM
 * (pdl.cuh): scheduled while that grid ends, it reads the partials once that grid has finished. */
#include "rdg_internal.h"
#include "ffn_tuning.h"
#include "ffn_split.cuh"
#include "pdl.cuh"

namespace {

/* C = the splits' partials added in split order, stored as F32 or rounded once to F16 / BF16 */
__global__ void ffn_split_sum(const float *__restrict__ partial, void *__restrict__ c, int64_t mn, int splits,
                              int c_dtype)
{
    rdg_pdl_trigger();
    rdg_pdl_wait();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < mn; i += (int64_t)gridDim.x * blockDim.x) {
        const float v = ffn_sum_splits(partial + i, mn, splits);
        if (c_dtype == RUDNN_F16)
            ((uint16_t *)c)[i] = rdg_f32_to_f16(v);
        else if (c_dtype == RUDNN_BF16)
            ((uint16_t *)c)[i] = rdg_f32_to_bf16(v);
        else
            ((float *)c)[i] = v;
    }
}

} // namespace

rudnn_status_t rdg_ffn_split_sum(rdg_queue_t *q, const char *name, const float *partial, void *c, int64_t mn,
                                 int splits, int c_dtype)
{
    const int64_t want = rdg_ceil_div(mn, 256), cap = (int64_t)q->dev.sm_count * 8;
    const unsigned blocks = (unsigned)(want < cap ? want : cap);
    return rdg_launch_pdl(q, FFN_PDL, name, ffn_split_sum, dim3(blocks), dim3(256), 0, partial, c, mn, splits,
                          c_dtype);
}
