/* The FFN activations on one FP32 value (hal/ffn.h rudnn_ffn_act_plan_t's f), shared by the
 * activation kernels of ffn.cu and the grouped GEMM's fused epilogue (moe_experts_tma.cu), so
 * that both compute the same bits. Include after gpu_compat.h. */
#ifndef RUDNN_FFN_ACT_CUH
#define RUDNN_FFN_ACT_CUH

#include "rudnn/ffn.h"

namespace {

/* The activation's function: erf GELU (gelu, geglu), fast GELU, ReLU (relu, reglu), SiLU (silu,
 * swiglu); act_fn(activation) maps an activation to it. */
enum { ACT_GELU, ACT_FASTGELU, ACT_RELU, ACT_SILU };

__host__ __device__ constexpr int act_fn(int act)
{
    return act == RUDNN_FFN_GELU || act == RUDNN_FFN_GEGLU   ? ACT_GELU
           : act == RUDNN_FFN_FASTGELU                      ? ACT_FASTGELU
           : act == RUDNN_FFN_RELU || act == RUDNN_FFN_REGLU ? ACT_RELU
                                                            : ACT_SILU;
}

/* FAST: the sigmoids through ex2.approx and rcp.approx (a few FP32 ulps, far below the 16-bit
 * rounding of the output), without branches: NaN passes through, -inf gives 0, and where
 * 1 + e^-x passes 2^126 the quotient is 0 (|x sigmoid(x)| < 2^-119 there) */
template <int F, bool FAST = false>
__device__ __forceinline__ float act_of(float x)
{
    if (FAST && (F == ACT_SILU || F == ACT_FASTGELU)) {
        const float r = __fdividef(x, 1.0f + __expf(F == ACT_SILU ? -x : -1.702f * x));
        return x == -INFINITY ? 0.0f : r;
    }
    if (x != x)
        return x;
    if (F == ACT_RELU)
        return x > 0.0f ? x : 0.0f;
    if (isinf(x)) /* the limits (-inf times 0 would be NaN) */
        return x > 0.0f ? x : 0.0f;
    if (F == ACT_GELU)
        return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    if (F == ACT_FASTGELU)
        return FAST ? __fdividef(x, 1.0f + __expf(-1.702f * x)) : x / (1.0f + expf(-1.702f * x));
    return FAST ? __fdividef(x, 1.0f + __expf(-x)) : x / (1.0f + expf(-x));
}

__device__ __forceinline__ float act_scalar(int act, float x)
{
    switch (act_fn(act)) {
    case ACT_GELU: return act_of<ACT_GELU>(x);
    case ACT_FASTGELU: return act_of<ACT_FASTGELU>(x);
    case ACT_RELU: return act_of<ACT_RELU>(x);
    default: return act_of<ACT_SILU>(x);
    }
}

/* v rounded to dt (F16 / BF16: round to nearest even; F32: as is): the pre_dtype rounding. */
__device__ __forceinline__ float round_to(float v, int dt)
{
    switch (dt) {
    case RUDNN_F16: return rdg_f16_to_f32(rdg_f32_to_f16(v));
    case RUDNN_BF16: return rdg_bf16_to_f32(rdg_f32_to_bf16(v));
    default: return v;
    }
}

} // namespace

#endif
