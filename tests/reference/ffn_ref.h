/* Plain-C FP64 host reference of FFN / MoeFFN (include/rudnn/ffn.h): the activations, the three
 * scenarios (non-quantized, quantized W8A8, weight-only), the plain and the expert form, and the
 * unpacking of I4 storage. Written to be obviously correct: simple loops over host arrays, every
 * product and sum in double (int64 for the integer products of W8A8), nothing rounded unless
 * an option of ffn_ref_args_t asks for it.
 *
 * Inputs are host arrays of the values the device tensors hold, already decoded: F16/BF16/F32
 * tensors as double (rudnn_f16_to_f32 and friends), I8 as int8, I4 unpacked to int8
 * (ffn_ref_unpack_int4), I32 as int32, the I64 deq scales' F32 as double (ffn_ref_deq_scale_i64).
 * The output y is double; rounding it to y's dtype and the tolerance of a comparison are the
 * caller's. */
#ifndef RUDNN_TESTS_FFN_REF_H
#define RUDNN_TESTS_FFN_REF_H

#include <stddef.h>
#include <stdint.h>

#include <rudnn/rudnn.h>
#include <rudnn/ffn.h>

/* ---- activations --------------------------------------------------------------------------- */

/* 1 for GEGLU, SWIGLU, REGLU (N1 = 2 K2), 0 for the others (N1 = K2). */
int ffn_ref_is_gated(rudnn_ffn_activation_t act);

/* The scalar function of act, for the gated ones that of their gate:
 *   GELU, GEGLU      0.5 x (1 + erf(x / sqrt 2))
 *   FASTGELU         x sigmoid(1.702 x)
 *   RELU, REGLU      max(x, 0) (NaN stays NaN)
 *   SILU, SWIGLU     x sigmoid(x)
 * sigmoid(t) = 1 / (1 + exp(-t)). NaN in, NaN out; +-inf give the functions' limits
 * (silu(-inf) = -inf * 0 is taken as 0, gelu(-inf) as 0). */
double ffn_ref_act_scalar(rudnn_ffn_activation_t act, double x);

/* One row of the hidden activation: h [N1] (x W1 + b1 of that row) to a [K2]:
 * non-gated: a[j] = f(h[j]), K2 = N1; gated: a[j] = h[j] * f(h[K2 + j]), K2 = N1 / 2 (the first
 * half is the value, the last the gate, as Ascend's kernels: ffn.h). */
void ffn_ref_activate_row(rudnn_ffn_activation_t act, const double *h, int64_t n1, double *a);

/* ---- roundings the kernels may make (none by default) ------------------------------------------ */

typedef enum ffn_ref_round {
    FFN_REF_ROUND_NONE = 0, /* keep the double */
    FFN_REF_ROUND_F32 = 1,  /* (float)v */
    FFN_REF_ROUND_F16 = 2,  /* rudnn_f16_to_f32(rudnn_f32_to_f16((float)v)) */
    FFN_REF_ROUND_BF16 = 3, /* rudnn_bf16_to_f32(rudnn_f32_to_bf16((float)v)) */
} ffn_ref_round_t;

/* The three scenarios of ffn.h (ffn_ref_args_t below says what each computes). */
typedef enum ffn_ref_scenario {
    FFN_REF_FLOAT = 0,
    FFN_REF_W8A8 = 1,
    FFN_REF_WEIGHT_ONLY = 2,
} ffn_ref_scenario_t;

/* v rounded as r says (through FP32 first, as an FP32-accumulating kernel does). */
double ffn_ref_round(ffn_ref_round_t r, double v);

/* The roundings ffn.h's rudnn_ffn_precision_t asks for, as round_pre and round_hidden of
 * ffn_ref_args_t (scenarios below), by x's dtype:
 *   FLOAT F16, HIGH_PRECISION     pre F32, hidden F16   (h and the activation in FP32)
 *   FLOAT F16, HIGH_PERFORMANCE   pre F16, hidden F16   (the activation from an F16 h)
 *   FLOAT BF16, HIGH_PRECISION    pre F32, hidden BF16
 *   FLOAT BF16, HIGH_PERFORMANCE  pre BF16, hidden BF16 (the activation from a BF16 h)
 *   FLOAT F32, either             pre F32, hidden F32
 *   WEIGHT_ONLY F16 / BF16        pre F32, hidden F16 / BF16 (the high-precision path)
 *   W8A8 (x I8), either           pre F32, hidden F32   (dequantized, activated, requantized in FP32)
 * Writes *pre and *hidden and returns 0; -1, writing nothing, for a dtype the scenario does not take
 * or a precision other than 0 and 1. */
int ffn_ref_precision_rounds(ffn_ref_scenario_t scenario, rudnn_dtype_t x_dtype, rudnn_ffn_precision_t precision,
                             ffn_ref_round_t *pre, ffn_ref_round_t *hidden);

/* ---- quantization helpers ------------------------------------------------------------------------ */

/* Round half to even, then saturate to [-128, 127]; NaN gives 0 (ffn.h). */
int8_t ffn_ref_requant_i8(double v);

/* The deq scale an I64 deq_scale element holds: the F32 whose bits are its low 32 bits, the high
 * 32 ignored (ffn.h; all 32 bits used, where Ascend's hardware reads the top 19). */
double ffn_ref_deq_scale_i64(int64_t v);

/* I4 storage [K, N] (N even, N / 2 bytes a row, the even column in the low nibble, two's
 * complement nibbles) to int8 values w [K, N] in -8..7. */
void ffn_ref_unpack_int4(const uint8_t *packed, int64_t k, int64_t n, int8_t *w);

/* The packing of rudnn_ffn_pack_int4, written independently: out[k][n / 2] = low nibble of
 * w[k][n] | low nibble of w[k][n + 1] << 4 (values assumed in -8..7, N even). */
void ffn_ref_pack_int4(const int8_t *w, int64_t k, int64_t n, uint8_t *out);

/* ---- the op ----------------------------------------------------------------------------------------
 * Mirrors rudnn_ffn_args_t. Shapes (E = experts, 1 in the plain form, where the leading [E] of
 * every per-expert array below is dropped, i.e. E = 1):
 *   x                      [m, k1]
 *   w1 / w1_i8             [E, k1, n1]      n1 = k2 (2 k2 for the gated activations)
 *   w2 / w2_i8             [E, k2, n2]      n2 = k1
 *   b1 / b1_i32            NULL or [E, n1]
 *   b2 / b2_i32            NULL or [E, n2]
 *   y                      [rows, n2]       rows = m (plain), the tokens' sum (expert form)
 *
 * FFN_REF_FLOAT:        h = x w1 + b1; a = act(h); y = a w2 + b2                  (x, w, b double)
 * FFN_REF_W8A8:         h = (x_i8 w1_i8 + b1_i32) deq1; a = act(h);
 *                       q = requant_i8(a scale + offset);            (a scale + offset in double)
 *                       y = (q w2_i8 + b2_i32) deq2                  (integer products in int64)
 * FFN_REF_WEIGHT_ONLY:  w1' = (w1_i8 + aoffset1) ascale1, w2' likewise;
 *                       h = x w1' + b1; a = act(h); y = a w2' + b2                 (x, b double)
 *
 * Where the kernels may round (all default to none):
 *   round_pre     h after the bias (W8A8: after deq1), before the activation;
 *   round_hidden  a, the activation's output, before the second product (W8A8: before the
 *                 requantization); ffn_ref_precision_rounds() gives both for a dtype and precision;
 *   round_weight  weight-only: each dequantized weight w' (an F16/BF16 dequantized tile). */
typedef struct ffn_ref_args {
    ffn_ref_scenario_t scenario;
    rudnn_ffn_activation_t activation;
    int64_t m, k1, n1, k2, n2;

    /* expert form: experts > 0 and expert_tokens [experts] (counts, or running totals when
     * expert_tokens_totals); rows of x grouped by expert in expert order, rows past the sum
     * neither read nor written. experts = 0: the plain FFN (expert_tokens unused). */
    int64_t experts;
    const int64_t *expert_tokens;
    int expert_tokens_totals;

    /* FLOAT: x, w1, w2 and the optional b1, b2. WEIGHT_ONLY: x, w1_i8, w2_i8, b1, b2. */
    const double *x;
    const double *w1, *w2;
    const double *b1, *b2;

    /* W8A8: x_i8, w1_i8, w2_i8, optional b1_i32, b2_i32, scale, offset, deq_scale1, deq_scale2. */
    const int8_t *x_i8;
    const int8_t *w1_i8, *w2_i8;
    const int32_t *b1_i32, *b2_i32;
    const double *scale;  /* [E, k2] when scale_per_channel (one per column of a), else [E] */
    const double *offset; /* [E] */
    const double *deq_scale1, *deq_scale2; /* [E, n] when deq_per_channel, else [E] */
    int scale_per_channel;
    int deq1_per_channel, deq2_per_channel;

    /* WEIGHT_ONLY: ascale [E, G, n] (required), aoffset [E, G, n] (NULL: 0); G = groups, 0 or 1
     * meaning per channel ([E, n]); group g covers rows [g k / G, (g + 1) k / G) of w (k = k1 for
     * w1, k2 for w2; k divisible by G). More than one group needs weights_int4 (ffn.h: per group
     * only for I4 weights), which says w1_i8 and w2_i8 hold I4 values (-8..7, not checked). */
    const double *antiquant_scale1, *antiquant_offset1;
    const double *antiquant_scale2, *antiquant_offset2;
    int64_t antiquant_groups1, antiquant_groups2;
    int weights_int4;

    ffn_ref_round_t round_pre, round_hidden, round_weight;
} ffn_ref_args_t;

/* Rows ffn_ref writes: m for the plain form, the tokens' sum for the expert form; -1 when the
 * arguments break the contract (a shape relation of ffn.h, a missing array, negative counts,
 * decreasing totals, a sum above m, k not divisible by the groups, groups without I4 weights). */
int64_t ffn_ref_rows(const ffn_ref_args_t *args);

/* Computes y [rows, n2] (and, when hidden is not NULL, hidden [rows, k2]: the second product's
 * left operand, i.e. a after round_hidden, or for W8A8 the requantized q as double). Returns
 * rows, or -1 (writing nothing) as ffn_ref_rows. */
int64_t ffn_ref(const ffn_ref_args_t *args, double *y, double *hidden);

#endif
