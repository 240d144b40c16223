/* FFN and MoeFFN, after Ascend's FFN operator (aclnnFFN, V2, V3; the seed 002_739eaf1ad77eac52.txt).
 * docs/FFN_NOTES.md says what was followed where the seed's tables were lost, and where rudnn departs.
 *
 *   non-quantized:  y = act(x W1 + b1) W2 + b2
 *   quantized W8A8: y = ((act((x W1 + b1) deq_scale1) scale + offset) W2 + b2) deq_scale2
 *                   (x, W int8, b int32; both products' sums, biases included, are exact, where an
 *                   int32 accumulator could overflow: 65535 * 128 * 128 plus a bias passes INT32_MAX.
 *                   The dequantization, the activation and the requantization in FP32 (Ascend's in F16):
 *                   the activation's output times scale plus offset, rounded half to even, saturated to
 *                   [-128, 127], NaN to 0)
 *   weight-only:    y = act(x ((W1 + aoffset1) ascale1) + b1) ((W2 + aoffset2) ascale2) + b2
 *                   (W int8 or int4, per output channel, or for int4 per group of K / G rows)
 *
 * x [..., K1] has 2..8 dims (Ascend's limit), the leading ones flattened into M; M rounded up to 32 bytes'
 * worth of x's elements stays below INT32_MAX (the seed's limit). W1 [K1, N1], W2 [K2, N2], K1 = N2, K1 and
 * K2 below 65536. y has x's shape.
 *
 * Expert form (MoeFFN): expert_tokens I64 [E] gives each expert's rows of x, as counts or as inclusive
 * running totals (non-decreasing); the rows come grouped by expert in expert order (as rudnn_ep_dispatch and
 * rudnn_moe_dispatch produce them). W1 [E, K1, N1], W2 [E, K2, N2]; biases and per-expert scales gain a
 * leading E. Extensions: the tokens' sum may be below M, the rows past it neither read nor written (Ascend
 * requires it to equal M); E has no limit (Ascend: at most 256).
 *
 * Activations: gelu, fastgelu (x sigmoid(1.702 x)), relu, silu with N1 = K2; the gated geglu, swiglu, reglu
 * with N1 = 2 K2, as Ascend's kernels do it: of h = x W1 + b1 the first K2 columns are the value, the last K2
 * the gate (activated): a = h[:, :K2] * act(h[:, K2:]). gelu, and geglu's gelu, is erf-based, 0.5 x (1 +
 * erf(x / sqrt 2)), as the issue asks ("gelu (erf)"): a departure from Ascend, whose kernels use the tanh
 * approximation (FFN_NOTES section 7). Every activation works in every scenario and dtype (Ascend limits
 * the gated ones to F16 non-quantized, without experts, HIGH_PERFORMANCE).
 *
 * Two-phase: rudnn_ffn_workspace_size, then rudnn_ffn. Bad arguments return a status, set
 * rudnn_last_error() (op, argument, rule) and write nothing. */
#ifndef RUDNN_FFN_H
#define RUDNN_FFN_H

#include "rudnn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUDNN_FFN_MAX_K 65535 /* K1, K2 < 65536 (the seed) */

typedef enum rudnn_ffn_activation {
    RUDNN_FFN_GELU = 0,
    RUDNN_FFN_FASTGELU = 1,
    RUDNN_FFN_RELU = 2,
    RUDNN_FFN_SILU = 3,
    RUDNN_FFN_GEGLU = 4,
    RUDNN_FFN_SWIGLU = 5,
    RUDNN_FFN_REGLU = 6,
} rudnn_ffn_activation_t;

/* Where F16 and BF16 non-quantized round (Ascend's innerPrecise, there for F16 only):
 *   HIGH_PRECISION:   x W1 + b1 and the activation in FP32, the activation's output rounded to x's dtype
 *                     once, before the second product (the default);
 *   HIGH_PERFORMANCE: x W1 + b1 rounded to x's dtype, the activation computed from that, its output rounded
 *                     to x's dtype: PyTorch's matmul + activation + matmul in that dtype. Without bias1 the
 *                     first product is written in x's dtype and never leaves the GPU in FP32 (faster).
 * (Ascend rejects HIGH_PERFORMANCE for BF16; rudnn gives it the F16 meaning.) F32 keeps everything F32;
 * weight-only computes as the high-precision path of x's dtype; quantized, see above; there either value
 * is accepted and has no effect. Other values: BAD_PARAM. */
typedef enum rudnn_ffn_precision {
    RUDNN_FFN_HIGH_PRECISION = 0,
    RUDNN_FFN_HIGH_PERFORMANCE = 1,
} rudnn_ffn_precision_t;

typedef struct rudnn_ffn_args {
    const rudnn_tensor_t *x;        /* [..., K1]: F16, BF16, F32 (an extension), or I8 (quantized) */
    const rudnn_tensor_t *weight1;  /* [K1, N1] / [E, K1, N1]: x's dtype, I8 (quantized or weight-only)
                                     * or I4 (weight-only) */
    const rudnn_tensor_t *weight2;  /* [K2, N2] / [E, K2, N2]: weight1's dtype */
    const rudnn_tensor_t *expert_tokens; /* NULL: FFN; I64 [E]: MoeFFN, counts or running totals */
    int expert_tokens_totals;       /* expert_tokens holds running totals (rudnn_ep_dispatch's type 0) */
    const rudnn_tensor_t *bias1;    /* NULL or [N1] / [E, N1]: F16 for F16 x, F32 for BF16/F32 x, I32 (quant) */
    const rudnn_tensor_t *bias2;    /* NULL or [N2] / [E, N2]: as bias1 */
    /* quantized (all four, or none) */
    const rudnn_tensor_t *scale;      /* F32 per tensor [1] / [E] or per channel [K2] / [E, K2] (K2 = N1 for
                                       * the non-gated activations, Ascend's only quantized ones; any
                                       * deq_scale dtype, where Ascend's per channel excludes F32) */
    const rudnn_tensor_t *offset;     /* F32 [1] / [E] */
    const rudnn_tensor_t *deq_scale1; /* per channel [N1] / [E, N1], or per tensor [1] / [E] (an extension).
                                       * F16 y: F32, or I64 holding the F32's bits in its low 32 bits, the
                                       * high 32 ignored (Ascend's hardware reads only the top 19 bits of that
                                       * F32, rudnn all of it; rudnn has no U64). BF16 y: BF16 */
    const rudnn_tensor_t *deq_scale2; /* [N2] / [E, N2] or [1] / [E]: deq_scale1's dtype */
    /* weight-only: antiquant_scale required, antiquant_offset optional (NULL is 0: an extension, Ascend
     * requires it) of its scale's shape. Per channel [N] / [E, N], or for I4 weights per group [G, N] /
     * [E, G, N]: K divisible by G, group g covers rows [g K / G, (g + 1) K / G). F16 for F16 x, BF16 for
     * BF16 x. */
    const rudnn_tensor_t *antiquant_scale1, *antiquant_offset1;
    const rudnn_tensor_t *antiquant_scale2, *antiquant_offset2;
    rudnn_ffn_activation_t activation;
    rudnn_ffn_precision_t precision;
    int deterministic; /* bitwise-identical results run to run (no split-K atomics); Ascend: a context option */
} rudnn_ffn_args_t;

/* Output y: x's shape (N2 = K1), x's dtype; for quantized x, F16 (deq scales F32 or I64) or BF16 (deq
 * scales BF16). */
RUDNN_API rudnn_status_t rudnn_ffn_workspace_size(rudnn_queue_t queue, const rudnn_ffn_args_t *args,
                                                  const rudnn_tensor_t *y, size_t *bytes);

RUDNN_API rudnn_status_t rudnn_ffn(rudnn_queue_t queue, const rudnn_ffn_args_t *args, rudnn_buffer_t workspace,
                                   size_t workspace_bytes, const rudnn_tensor_t *y);

/* Host helper: packs int8 values w[k][n] (each in -8..7) of a [K, N] matrix (N even) into I4
 * storage, two per byte along N, the even column in the low nibble: for even n, out[k][n / 2] =
 * (w[k][n] & 0xf) | (w[k][n + 1] & 0xf) << 4 (K N / 2 bytes). BAD_PARAM for a NULL pointer, a
 * negative K or N, an odd N or a value out of range; a rejected call writes nothing. */
RUDNN_API rudnn_status_t rudnn_ffn_pack_int4(const int8_t *w, int64_t k, int64_t n, uint8_t *out);

#ifdef __cplusplus
}
#endif
#endif
