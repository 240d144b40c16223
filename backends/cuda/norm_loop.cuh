/* The looped kernel: any cols and alignment, scalar loads, one CTA per row (persistent), one pass
 * over global memory per statistic and one for the output. The statistics are the power-of-two
 * scaled ones of backends/README.md throughout. */
#ifndef RUDNN_NORM_LOOP_CUH
#define RUDNN_NORM_LOOP_CUH

#include "norm_math.cuh"

namespace {

template <class S, int OP>
__global__ void RDG_LAUNCH_BOUNDS(RDG_NORM_LOOP_THREADS, 1) norm_loop_kernel(NormArgs a)
{
    __shared__ float red_f[2 * RDG_MAX_WARPS];
    __shared__ int red_i[2 * RDG_MAX_WARPS];
    RedCtx ctx = red_ctx(red_f, red_i, nullptr, nullptr, 1, 0); /* no cluster */

    const int tid = threadIdx.x;
    const int nthr = blockDim.x;
    const int64_t cols = a.cols;
    const float h = (float)cols;

    for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
        const int64_t off = row * cols;
        /* the values the statistics and the output use */
        const void *src = OP == OP_ADD_RMS ? a.xout : a.x;

        if (OP == OP_SOFTMAX) {
            float m = -INFINITY;
            for (int64_t c = tid; c < cols; c += nthr)
                m = fmaxf(m, S::ld1(a.x, off + c));
            m = block_allreduce<MaxOp, RED_BLOCK>(m, ctx);
            float s = 0.0f;
            for (int64_t c = tid; c < cols; c += nthr)
                s += expf(S::ld1(a.x, off + c) - m);
            s = block_allreduce<SumOp, RED_BLOCK>(s, ctx);
            const float inv = 1.0f / s;
            for (int64_t c = tid; c < cols; c += nthr)
                S::st1(a.y, off + c, expf(S::ld1(a.x, off + c) - m) * inv);
            continue;
        }

        /* pass 1: max|x| (add: x = round(a + r) is written to xout here, read back later by
         * the same thread) */
        float m = 0.0f;
        if (OP == OP_ADD_RMS) {
            for (int64_t c = tid; c < cols; c += nthr) {
                const float xv = S::round(S::ld1(a.x, off + c) + S::ld1(a.r, off + c));
                S::st1(a.xout, off + c, xv);
                m = fmaxf(m, fabsf(xv));
            }
        } else {
            for (int64_t c = tid; c < cols; c += nthr)
                m = fmaxf(m, fabsf(S::ld1(src, off + c)));
        }
        m = block_allreduce<MaxOp, RED_BLOCK>(m, ctx);
        const int e = exp_of_max(m);
        const float sc = pow2_neg(e);
        const float eps_s = scale_pow2(a.eps, -2 * e);

        if (OP == OP_LN) {
            float s = 0.0f;
            for (int64_t c = tid; c < cols; c += nthr)
                s += S::ld1(src, off + c) * sc;
            s = block_allreduce<SumOp, RED_BLOCK>(s, ctx);
            const float mean = s / h;
            float q = 0.0f;
            for (int64_t c = tid; c < cols; c += nthr) {
                const float d = S::ld1(src, off + c) * sc - mean;
                q = fmaf(d, d, q);
            }
            q = block_allreduce<SumOp, RED_BLOCK>(q, ctx);
            float inv = 1.0f / sqrtf(q / h + eps_s);
            if (isinf(inv)) /* constant row with large e: see the register kernel */
                inv = FLT_MAX;
            for (int64_t c = tid; c < cols; c += nthr) {
                const float d = (S::ld1(src, off + c) * sc - mean) * inv;
                const float yv = a.beta ? fmaf(d, a.gamma[c], a.beta[c]) : d * a.gamma[c];
                S::st1(a.y, off + c, yv);
            }
        } else { /* RMS, ADD_RMS */
            float s = 0.0f;
            for (int64_t c = tid; c < cols; c += nthr) {
                const float u = S::ld1(src, off + c) * sc;
                s = fmaf(u, u, s);
            }
            s = block_allreduce<SumOp, RED_BLOCK>(s, ctx);
            const float inv = 1.0f / sqrtf(s / h + eps_s);
            if (OP == OP_ADD_RMS && tid == 0)
                a.rstd[row] = scale_pow2(inv, -e);
            for (int64_t c = tid; c < cols; c += nthr)
                S::st1(a.y, off + c, (S::ld1(src, off + c) * sc) * inv * a.gamma[c]);
        }
    }
}

} // namespace

#endif
