/* FFN and MoeFFN (after Ascend's FFN operator, the seed 002_739eaf1ad77eac52.txt; README "FFN"
 * says what was followed where the seed's tables were lost):
 *
 *   non-quantized:  y = act(x W1 + b1) W2 + b2
 *   quantized W8A8: y = ((act((x W1 + b1) deq_scale1) scale + offset) W2 + b2) deq_scale2
 *                   (x, W int8; the first product and b1 in int32; the activation's output
 *                   requantized to int8 by scale and offset, rounded to nearest even, saturated)
 *   weight-only:    y = act(x ((W1 + aoffset1) ascale1) + b1) ((W2 + aoffset2) ascale2) + b2
 *                   (W int8 or int4, per output channel, or for int4 per group of K / G rows)
 *
 * x [M, K1] (leading dims flattened into M), W1 [K1, N1], W2 [K2, N2], K1 = N2, K1 and K2 below
 * 65536. The expert form (MoeFFN): expert_tokens [E] I64 gives each expert's rows of x, which come
 * grouped by expert (as rudnn_ep_dispatch and rudnn_moe_dispatch produce them); W1 [E, K1, N1],
 * W2 [E, K2, N2], biases and per-expert scales gain a leading E. Rows past the tokens' sum are
 * neither read nor written.
 *
 * Activations: gelu (erf), fastgelu (x sigmoid(1.702 x)), relu, silu with N1 = K2; the gated
 * geglu, swiglu, reglu with N1 = 2 K2, where the first K2 columns of x W1 + b1 are the gate
 * (activated) and the last K2 the value: act(h[:, :K2]) * h[:, K2:]. Every activation works in
 * every scenario and dtype (Ascend limits the gated ones to its F16 high-performance path for its
 * hardware only).
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

/* F16 non-quantized only (Ascend's innerPrecise; elsewhere accepted and without effect, as the
 * seed says): HIGH_PRECISION keeps the hidden activation x W1 + b1 -> act in FP32 into the second
 * product; HIGH_PERFORMANCE rounds it to F16 first (what a chain of F16 GEMMs does). */
typedef enum rudnn_ffn_precision {
    RUDNN_FFN_HIGH_PRECISION = 0,
    RUDNN_FFN_HIGH_PERFORMANCE = 1,
} rudnn_ffn_precision_t;

typedef struct rudnn_ffn_args {
    const rudnn_tensor_t *x;        /* [M, K1] (or [..., K1]): F16/BF16/F32, or I8 (quantized) */
    const rudnn_tensor_t *weight1;  /* [K1, N1] / [E, K1, N1]: x's dtype, I8 (quant, weight-only), I4 */
    const rudnn_tensor_t *weight2;  /* [K2, N2] / [E, K2, N2]: as weight1 */
    const rudnn_tensor_t *expert_tokens; /* NULL: FFN; I64 [E]: MoeFFN, counts or running totals */
    int expert_tokens_totals;       /* expert_tokens holds running totals (rudnn_ep_dispatch's type 0) */
    const rudnn_tensor_t *bias1;    /* NULL or [N1] / [E, N1]: F16 for F16, F32 for BF16/F32, I32 (quant) */
    const rudnn_tensor_t *bias2;    /* NULL or [N2] / [E, N2]: as bias1 */
    /* quantized (all four, or none) */
    const rudnn_tensor_t *scale;      /* F32 [1] / [E]: requantization of the activation */
    const rudnn_tensor_t *offset;     /* F32 [1] / [E] */
    const rudnn_tensor_t *deq_scale1; /* [N1] / [E, N1] per channel or [1] / [E] per tensor: F32, or
                                       * I64 (an F32 in the low 32 bits, Ascend's packed form) for F16
                                       * output, BF16 for BF16 output */
    const rudnn_tensor_t *deq_scale2; /* [N2] / [E, N2] or [1] / [E]: as deq_scale1 */
    /* weight-only (scale required, offset optional), per channel [N] / [E, N] or per group
     * [G, N] / [E, G, N] (int4 only; K divisible by G). F16 for F16 x; BF16 (scale: BF16 or F32)
     * for BF16 x. */
    const rudnn_tensor_t *antiquant_scale1, *antiquant_offset1;
    const rudnn_tensor_t *antiquant_scale2, *antiquant_offset2;
    rudnn_ffn_activation_t activation;
    rudnn_ffn_precision_t precision;
    int deterministic; /* bitwise-identical results run to run (no split-K atomics) */
} rudnn_ffn_args_t;

/* Output y: [M, N2] (x's leading dims kept), F16/BF16/F32 as x; for quantized x, F16 (deq scales
 * F32 or I64) or BF16 (deq scales BF16). */
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
