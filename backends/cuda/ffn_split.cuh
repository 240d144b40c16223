/* The split-k partials' sum, shared by ffn_split_sum and ffn_split_act: the loads of a batch of
 * FFN_SPLIT_BATCH splits are issued together, then added in split order, so that a sum waits on
 * one L2 round trip a batch instead of one a split (same bits as the plain loop), from
 * FFN_SPLIT_BATCH_MIN splits on. */
#ifndef RUDNN_FFN_SPLIT_CUH
#define RUDNN_FFN_SPLIT_CUH

#include "ffn_tuning.h"

/* p[0] + p[stride] + ... + p[(splits - 1) stride], added left to right (splits >= 1) */
__device__ __forceinline__ float ffn_sum_splits(const float *__restrict__ p, int64_t stride, int splits)
{
    constexpr int B = FFN_SPLIT_BATCH;
    if (splits < FFN_SPLIT_BATCH_MIN) { /* few: one load after the other */
        float v = p[0];
        for (int s = 1; s < splits; s++)
            v += p[(int64_t)s * stride];
        return v;
    }
    float v = 0.0f;
    for (int s0 = 0; s0 < splits; s0 += B) {
        float x[B];
#pragma unroll
        for (int j = 0; j < B; j++)
            x[j] = s0 + j < splits ? p[(int64_t)(s0 + j) * stride] : 0.0f;
#pragma unroll
        for (int j = 0; j < B; j++)
            if (s0 + j < splits)
                v = s0 + j == 0 ? x[j] : v + x[j]; /* the first as it is: 0 + -0 would be +0 */
    }
    return v;
}

#endif
