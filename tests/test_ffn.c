/* Numeric tests of FFN / MoeFFN (include/rudnn/ffn.h) against the FP64 reference of
 * reference/ffn_ref.c, through the public API (rudnn_ffn_workspace_size, rudnn_ffn); run once per
 * backend (meson registers ffn-opencl, ffn-cuda, ffn-hip with RUDNN_BACKEND set).
 *
 * Every case runs with each of the seven activations (gelu, fastgelu, relu, silu and the gated
 * geglu, swiglu, reglu: N1 = 2 K2, the value first, the gate last):
 *   float/<f32|f16|bf16>     non-quantized: bias present and absent, M = 1, K1 = 17, 40, 72, 100
 *                            and K2 = 9 .. 48 (none a multiple of 64, several not of 16), x with
 *                            one, two and three leading dims, M = 70 with N1 = 96 (several GEMM
 *                            tiles each way); HIGH_PRECISION and HIGH_PERFORMANCE (F16 and BF16:
 *                            h + b1 rounded to x's dtype before the activation; F32: no effect),
 *                            with and without b1 / b2 (without them ops/ffn.c has the GEMMs write
 *                            h in x's dtype and y itself); the expert form with
 *                            counts and running totals, experts without tokens, a token sum below
 *                            M (the rows past it must stay untouched), a sum equal to M, one
 *                            expert, every count 0 (nothing written); two "exact" cases (dyadic
 *                            data, y = +-a) in which the hidden activation's rounding, and in
 *                            HIGH_PERFORMANCE h's, shows undiluted (make_exact)
 *   special/<f32|f16|bf16>   rows of x holding +inf, -inf, both, NaN: NaN and inf where the
 *                            reference has them (gelu/silu/fastgelu(-inf) = 0, relu(NaN) = NaN),
 *                            plain and expert form
 *   w8a8/<f32|i64|bf16>_deq  quantized (I8 x and weights, I32 biases; F16 y with F32 or I64 deq
 *                            scales, the I64's high word holding junk that must be ignored; BF16 y
 *                            with BF16 ones): per tensor and per channel deq1 / deq2, per tensor
 *                            and per channel requantization scale, bias present and absent, the
 *                            expert form (counts, totals, experts without tokens, sum < M), large
 *                            values that saturate the requantization, deq1 columns of NaN (q = 0)
 *                            and +inf (q saturated), exact ties that must round half to even
 *                            (relu, reglu: no allowance, see below), K1 = 65535 with x W1 near
 *                            2^30 and biases near INT32_MAX / INT32_MIN (the sums of ffn.h are
 *                            exact: an int32 sum would wrap)
 *   weight_only/<f16|bf16>   I8 per channel, I4 per channel, I4 per group (groups of 4 .. 36 rows,
 *                            mostly not aligned to the kernels' K steps), antiquant offset present
 *                            and absent, bias present and absent, HIGH_PERFORMANCE (no effect),
 *                            the expert form; two "exact" cases (one-hot x, y = +-a) in which the
 *                            rounding of the dequantized weights to x's dtype shows (make_exact_wo);
 *                            "mma_w4" cases in the shapes CUDA's int4 tensor-core kernel takes (N a
 *                            multiple of 256, groups of 16 .. 256 rows, aligned weights, M 1 .. 128,
 *                            K 1024 splitting k, x aligned and not, experts) and three it must not
 *                            (N 264, groups of 8 rows, unaligned weights); "dequant" cases past the
 *                            few-rows kernels (CUDA: W' dequantized into the workspace, then
 *                            cuBLAS); on CUDA sm_80+ the name
 *                            of the second GEMM's kernel is checked where it runs last (no bias2),
 *                            and two GPU-sized cases run there only (K2 14336 and 3584)
 *
 * Each (case, activation) calls rudnn_ffn three times on poisoned outputs: with an explicit
 * workspace of exactly rudnn_ffn_workspace_size bytes and deterministic = 1 (the bytes after it,
 * poisoned, must stay unchanged), with a NULL workspace and deterministic = 1 (must be bitwise
 * identical to the first: run-to-run determinism, and the workspace's origin does not matter),
 * and with a NULL workspace and deterministic = 0 (checked against the reference only: a backend
 * may then sum in a varying order). Every call must write every element of the rows [0, token
 * sum) of y, no other byte of y's buffer (rows past the sum included), leave every input buffer
 * byte-identical, and report an "ffn." kernel (rudnn_last_kernel) when it had rows to compute.
 * Tensors sit at small element offsets into their buffers.
 *
 * Reference and tolerances. The reference is ffn_ref with the roundings the contract asks for
 * (ffn_ref_precision_rounds: h rounded to F16 / BF16 in the HIGH_PERFORMANCE mode, the hidden
 * activation rounded to F16 / BF16 / F32 before the second product) and, for weight-only, each
 * dequantized weight rounded to x's dtype (round_weight), as the kernels do. Its y is double and
 * unrounded. A case passes when every element satisfies
 *     |y - ref| <= tol(y dtype) * max(1, max |ref|)      (the max over the finite ref values)
 * and non-finite ref values are matched exactly (NaN for NaN, the same infinity). With x and W
 * drawn so that h and a are O(1):
 *   F32   tol 1e-5:   FP32 sums of at most 100 terms of O(1) and the FP32 activation: errors
 *                     of a few 1e-7; 1e-5 leaves a wide margin without hiding a wrong term
 *                     (one missing term of K2 = 48 changes y by ~0.1).
 *   F16   tol 2e-3:   the output rounding (2^-11 relative = 4.9e-4 of the scale) plus rare
 *                     flips of the hidden activation's (and in HIGH_PERFORMANCE h's) F16
 *                     rounding where the device's FP32 value and the double one straddle a
 *                     rounding boundary: each flip moves y by |w2| 2^-11 |a| ~ 1e-4.
 *   BF16  tol 1.6e-2: the same with 8 fraction bits: output rounding 2^-9 = 2e-3, a hidden
 *                     flip 2^-8 |w2| |a| ~ 2e-3; 1.6e-2 = 2^-6 covers several.
 * W8A8 (F16 / BF16 y, the same tol): the integer products are exact, so y differs from the
 * reference by its rounding unless a requantized q differs. q = rint(a scale + offset) with a
 * computed in FP32 on the device and in double in the reference, so where t = a scale + offset
 * lies within delta of a rounding tie (k + 0.5) the device may give the other neighbour. The
 * comparison keeps the reference's own q and, for each such (row, j), allows y[row, c] an extra
 * |w2[j][c] deq2[c]| (one step of q); delta = 2e-6 (1 + |a scale| + |offset|) is about 30 FP32
 * ulps of t, above the device's error (two roundings of the dequantization, the activation's
 * few ulps, two of the requantization). The suite recomputes t in double from the reference's
 * formula, checks that it requantizes to the reference's q (a self-check), and counts the
 * allowances used (RUDNN_TEST_VERBOSE=1 prints them with each case's worst error as a fraction
 * of the allowed one). The exact-ties case computes exactly in FP32 for relu and reglu, so there
 * it allows nothing: a tie must round to even.
 * The "exact" float and weight-only cases (tcase_t.exact) compute h exactly in FP32 and make y a
 * signed copy of the hidden activation, so tolerances that hide a wrong rounding above do not
 * apply: relu and reglu must match the reference bit for bit, the other activations within 1 ulp
 * of y's dtype (F32: 8 ulps) plus 1e-6 of the output scale (the FP32 functions' error, and their
 * tails near underflow).
 *
 * Usage: test_ffn [glob]   runs only the tests whose name matches glob (e.g. "w8a8/i64_deq",
 * "float/f16"). */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "reference/ffn_ref.h"

#define ACT_COUNT 7
static const char *const act_names[ACT_COUNT] = {"gelu", "fastgelu", "relu", "silu", "geglu", "swiglu", "reglu"};

/* Bytes after an explicit workspace that must stay untouched. */
#define WS_GUARD 4096

static int verbose;

static double tol_of(rudnn_dtype_t y)
{
    switch (y) {
    case RUDNN_F32: return 1e-5;
    case RUDNN_F16: return 2e-3;
    default: return 1.6e-2; /* BF16 */
    }
}

/* ---- cases ----------------------------------------------------------------------------------- */

typedef struct tcase {
    const char *label;
    int nlead;
    int64_t lead[3]; /* x's leading dims (M = their product) */
    int64_t k1, k2;
    int bias; /* BIAS_* */
    rudnn_ffn_precision_t precision;
    /* expert form: experts > 0, counts[e] rows each (uploaded as running totals when totals) */
    int experts;
    int64_t counts[8];
    int totals;
    /* W8A8: per-channel flags (else per tensor) */
    int deq1_pc, deq2_pc, scale_pc;
    /* weight-only: I4 weights (else I8), groups (0: per channel), antiquant offsets */
    int int4;
    int64_t g1, g2;
    int aoffset;
    /* float: inf / NaN rows in x; W8A8: NaN and +inf deq1 columns */
    int special;
    /* W8A8: small integers and power-of-two scales, so that relu / reglu give exact ties */
    int ties;
    /* float: dyadic x and W1 (h exact in FP32, not in F16 / BF16); weight-only: one-hot rows of x
     * (h = a row of the dequantized W1); both: W2 a signed selection (y[c] = +-a[c % K2]); y is
     * compared to within ulps (make_exact) */
    int exact;
    /* W8A8 with K1 = 65535: x W1 near 2^30 and biases near INT32_MAX / INT32_MIN, whose sums
     * overflow int32 (ffn.h: summed exactly) */
    int big;
    /* device copies at 16-element offsets (I4: 16-byte): 1 the weights only, 2 every tensor, y too */
    int aligned;
    /* CUDA on sm_80+, cases without bias2 (the second GEMM writes y, so it runs last): the kernel
     * rudnn_last_kernel() must name, or with a leading '!' must not */
    const char *cuda_kernel;
    /* the same for a float case's F16 and BF16 runs only (F32 takes cuBLAS): on sm_90a */
    const char *cuda_kernel16;
    /* run on CUDA sm_80+ only: a shape that fills the GPU (its reference costs seconds on a CPU) */
    int cuda_only;
    /* nonzero: only the activations of these bits (1 << rudnn_ffn_activation_t) */
    unsigned acts;
} tcase_t;

#define HP RUDNN_FFN_HIGH_PERFORMANCE

/* tcase_t.bias: which of bias1 and bias2 the case gives */
enum { BIAS_NONE, BIAS_BOTH, BIAS_1, BIAS_2 };
static int has_b1(const struct tcase *c) { return c->bias == BIAS_BOTH || c->bias == BIAS_1; }
static int has_b2(const struct tcase *c) { return c->bias == BIAS_BOTH || c->bias == BIAS_2; }

static const tcase_t float_cases[] = {
    {.label = "M 1, K1 40, K2 24, bias", .nlead = 1, .lead = {1}, .k1 = 40, .k2 = 24, .bias = BIAS_BOTH},
    {.label = "M 1, K1 40, K2 24, no bias", .nlead = 1, .lead = {1}, .k1 = 40, .k2 = 24},
    {.label = "M 5, K1 40, K2 24, bias1 only, HIGH_PERFORMANCE", .nlead = 1, .lead = {5}, .k1 = 40, .k2 = 24,
     .bias = BIAS_1, .precision = HP},
    {.label = "M 5, K1 72, K2 24, bias2 only, HIGH_PERFORMANCE", .nlead = 1, .lead = {5}, .k1 = 72, .k2 = 24,
     .bias = BIAS_2, .precision = HP},
    {.label = "M 37, K1 72, K2 40, bias", .nlead = 1, .lead = {37}, .k1 = 72, .k2 = 40, .bias = BIAS_BOTH},
    {.label = "M 12, K1 17, K2 9, no bias", .nlead = 1, .lead = {12}, .k1 = 17, .k2 = 9},
    {.label = "x [2, 3, 4, 100], K2 48, bias", .nlead = 3, .lead = {2, 3, 4}, .k1 = 100, .k2 = 48, .bias = BIAS_BOTH},
    {.label = "M 70, K1 72, K2 48 (several tiles), bias, HIGH_PERFORMANCE", .nlead = 1, .lead = {70}, .k1 = 72,
     .k2 = 48, .bias = BIAS_BOTH, .precision = HP},
    {.label = "x [4, 5, 40], K2 20, no bias, HIGH_PERFORMANCE", .nlead = 2, .lead = {4, 5}, .k1 = 40, .k2 = 20,
     .precision = HP},
    {.label = "experts: counts 5 0 9 0 4 of M 24, bias", .nlead = 1, .lead = {24}, .k1 = 40, .k2 = 24, .bias = BIAS_BOTH,
     .experts = 5, .counts = {5, 0, 9, 0, 4}},
    {.label = "experts: totals 3 3 10 16 of x [2, 10, 72], no bias, HIGH_PERFORMANCE", .nlead = 2, .lead = {2, 10},
     .k1 = 72, .k2 = 16, .precision = HP, .experts = 4, .counts = {3, 0, 7, 6}, .totals = 1},
    /* the grouped products (CUDA sm_90a, F16 / BF16, no bias, every tensor 16-byte aligned): an
     * expert over two 128-row tiles, an empty one, rows past the sum, N1 past one 256-column tile,
     * K not of 64 (the unaligned expert cases above take each expert's steps) */
    {.label = "experts: grouped, counts 150 0 9 40 of M 205, K1 72, K2 136, HIGH_PERFORMANCE", .nlead = 1,
     .lead = {205}, .k1 = 72, .k2 = 136, .precision = HP, .experts = 4, .counts = {150, 0, 9, 40},
     .aligned = 2, .cuda_kernel16 = "ffn.wgmma_grouped"},
    {.label = "experts: grouped, counts 0 70 3 of M 80, K1 264, K2 64, HIGH_PRECISION (h in FP32)", .nlead = 1,
     .lead = {80}, .k1 = 264, .k2 = 64, .experts = 3, .counts = {0, 70, 3}, .aligned = 2,
     .cuda_kernel16 = "ffn.wgmma_grouped"},
    {.label = "experts: counts 7 1 0 12 (sum = M), K1 100, bias", .nlead = 1, .lead = {20}, .k1 = 100, .k2 = 20,
     .bias = BIAS_BOTH, .experts = 4, .counts = {7, 1, 0, 12}},
    {.label = "experts: every count 0 (nothing written)", .nlead = 1, .lead = {6}, .k1 = 40, .k2 = 8, .bias = BIAS_BOTH,
     .experts = 3, .counts = {0, 0, 0}},
    {.label = "experts: one expert, M 9", .nlead = 1, .lead = {9}, .k1 = 40, .k2 = 24, .bias = BIAS_BOTH, .experts = 1,
     .counts = {9}},
    {.label = "exact: dyadic h, y = +-a, HIGH_PRECISION", .nlead = 1, .lead = {16}, .k1 = 40, .k2 = 24,
     .exact = 1},
    {.label = "exact: dyadic h, y = +-a, HIGH_PERFORMANCE", .nlead = 1, .lead = {16}, .k1 = 40, .k2 = 24,
     .precision = HP, .exact = 1},
    {.label = "exact: dyadic h + bias1, y = +-a, HIGH_PERFORMANCE", .nlead = 1, .lead = {16}, .k1 = 40, .k2 = 24,
     .bias = BIAS_1, .precision = HP, .exact = 1},
};

static const tcase_t special_cases[] = {
    {.label = "inf / NaN rows, M 6, K1 40, K2 24, bias", .nlead = 1, .lead = {6}, .k1 = 40, .k2 = 24, .bias = BIAS_BOTH,
     .special = 1},
    {.label = "inf / NaN rows, experts 2 4, HIGH_PERFORMANCE", .nlead = 1, .lead = {6}, .k1 = 40, .k2 = 24,
     .precision = HP, .experts = 2, .counts = {2, 4}, .special = 1},
};

static const tcase_t w8a8_cases[] = {
    {.label = "M 1, K1 40, K2 24, bias, per tensor deq and scale", .nlead = 1, .lead = {1}, .k1 = 40, .k2 = 24,
     .bias = BIAS_BOTH},
    {.label = "M 20, K1 72, K2 40, bias, per channel deq and scale", .nlead = 1, .lead = {20}, .k1 = 72, .k2 = 40,
     .bias = BIAS_BOTH, .deq1_pc = 1, .deq2_pc = 1, .scale_pc = 1},
    {.label = "M 17, K1 100, K2 48, bias2 only, deq1 per channel", .nlead = 1, .lead = {17}, .k1 = 100, .k2 = 48,
     .bias = BIAS_2, .deq1_pc = 1},
    {.label = "x [2, 2, 5, 72], K2 24, bias, deq2 and scale per channel, HIGH_PERFORMANCE", .nlead = 3,
     .lead = {2, 2, 5}, .k1 = 72, .k2 = 24, .bias = BIAS_BOTH, .precision = HP, .deq2_pc = 1, .scale_pc = 1},
    {.label = "M 70, K1 40, K2 48 (several tiles), bias, per channel", .nlead = 1, .lead = {70}, .k1 = 40,
     .k2 = 48, .bias = BIAS_BOTH, .deq1_pc = 1, .deq2_pc = 1, .scale_pc = 1},
    {.label = "experts: counts 4 0 7 3 of M 16, bias, per channel", .nlead = 1, .lead = {16}, .k1 = 40, .k2 = 24,
     .bias = BIAS_BOTH, .experts = 4, .counts = {4, 0, 7, 3}, .deq1_pc = 1, .deq2_pc = 1, .scale_pc = 1},
    {.label = "experts: totals 0 6 6 11 of M 12, bias1 only, per tensor", .nlead = 1, .lead = {12}, .k1 = 72,
     .k2 = 16, .bias = BIAS_1, .experts = 4, .counts = {0, 6, 0, 5}, .totals = 1},
    {.label = "M 9, K1 40, K2 24, no bias, per tensor", .nlead = 1, .lead = {9}, .k1 = 40, .k2 = 24},
    {.label = "deq1 columns NaN and +inf (q = 0, saturated), M 8", .nlead = 1, .lead = {8}, .k1 = 40, .k2 = 24,
     .bias = BIAS_BOTH, .deq1_pc = 1, .special = 1},
    {.label = "exact ties (relu, reglu: round half to even), M 24, K1 40, K2 32", .nlead = 1, .lead = {24},
     .k1 = 40, .k2 = 32, .bias = BIAS_BOTH, .deq1_pc = 1, .scale_pc = 1, .ties = 1},
    {.label = "K1 65535: x W1 ~ 2^30, biases ~ INT32_MAX / INT32_MIN (int64 sums), M 3, K2 2", .nlead = 1,
     .lead = {3}, .k1 = 65535, .k2 = 2, .bias = BIAS_BOTH, .deq2_pc = 1, .big = 1},
};

static const tcase_t wo_cases[] = {
    {.label = "I8 per channel, offset, bias, M 1, K1 40, K2 24", .nlead = 1, .lead = {1}, .k1 = 40, .k2 = 24,
     .bias = BIAS_BOTH, .aoffset = 1},
    {.label = "I8 per channel, no offset, bias1 only, M 21, K1 72, K2 40", .nlead = 1, .lead = {21}, .k1 = 72,
     .k2 = 40, .bias = BIAS_1},
    {.label = "I4 per channel, offset, bias2 only, M 6, K1 40, K2 24", .nlead = 1, .lead = {6}, .k1 = 40,
     .k2 = 24, .bias = BIAS_2, .int4 = 1, .aoffset = 1},
    {.label = "I4 per channel, offset, bias, M 19, K1 100, K2 36", .nlead = 1, .lead = {19}, .k1 = 100, .k2 = 36,
     .bias = BIAS_BOTH, .int4 = 1, .aoffset = 1},
    {.label = "I4 per group (G 4, 3), offset, bias, M 25, K1 72, K2 48", .nlead = 1, .lead = {25}, .k1 = 72,
     .k2 = 48, .bias = BIAS_BOTH, .int4 = 1, .g1 = 4, .g2 = 3, .aoffset = 1},
    {.label = "I4 per group (G 5, 2), no offset, no bias, x [3, 2, 2, 40]", .nlead = 3, .lead = {3, 2, 2},
     .k1 = 40, .k2 = 24, .int4 = 1, .g1 = 5, .g2 = 2},
    {.label = "I8 per channel, offset, bias, HIGH_PERFORMANCE, M 70, K2 48 (several tiles)", .nlead = 1,
     .lead = {70}, .k1 = 40, .k2 = 48, .bias = BIAS_BOTH, .precision = HP, .aoffset = 1},
    {.label = "experts: I8 per channel, offset, bias, counts 3 0 6 2 of M 13", .nlead = 1, .lead = {13}, .k1 = 40,
     .k2 = 24, .bias = BIAS_BOTH, .experts = 4, .counts = {3, 0, 6, 2}, .aoffset = 1},
    {.label = "experts: I4 per group (G 2, 4), offset, bias, totals 5 5 12 of M 12", .nlead = 1, .lead = {12},
     .k1 = 72, .k2 = 16, .bias = BIAS_BOTH, .experts = 3, .counts = {5, 0, 7}, .totals = 1, .int4 = 1, .g1 = 2, .g2 = 4,
     .aoffset = 1},
    /* the grouped int4 products (CUDA sm_80+: no bias, every tensor 16-byte aligned, 8 experts or
     * more): an expert past 16 rows, empty ones, rows past the sum; one in the folding variant */
    {.label = "experts: grouped int4 (G 2, 4), offset, counts 5 0 17 3 9 1 0 12 of M 50, K1 256, K2 256",
     .nlead = 1, .lead = {50}, .k1 = 256, .k2 = 256, .experts = 8, .counts = {5, 0, 17, 3, 9, 1, 0, 12}, .int4 = 1,
     .g1 = 2, .g2 = 4, .aoffset = 1, .aligned = 2, .cuda_kernel = "ffn.mma_w4_grouped"},
    {.label = "experts: grouped int4 per channel, no offset, counts 2 8 1 0 4 7 3 5 of M 30, K1 512, K2 256",
     .nlead = 1, .lead = {30}, .k1 = 512, .k2 = 256, .experts = 8, .counts = {2, 8, 1, 0, 4, 7, 3, 5}, .int4 = 1,
     .aligned = 2, .cuda_kernel = "ffn.mma_w4_grouped"},
    /* the int4 wgmma kernel (CUDA sm_90a: no offset, 64 rows or more, aligned tensors): two 128-row
     * tiles and a partial one, a 256-column tile past n, k not of 64; grouped with an expert past
     * 128 rows, an empty one and rows past the sum; 64 rows exactly, per channel */
    {.label = "wgmma_w4: I4 per group (G 4, 2), bias1, M 300, K1 512, K2 256", .nlead = 1, .lead = {300},
     .k1 = 512, .k2 = 256, .bias = BIAS_1, .int4 = 1, .g1 = 4, .g2 = 2, .aligned = 2,
     .cuda_kernel16 = "ffn.wgmma_w4"},
    {.label = "experts: wgmma_w4 grouped (G 2, 4), counts 70 0 130 9 64 of M 280, K1 256, K2 256", .nlead = 1,
     .lead = {280}, .k1 = 256, .k2 = 256, .experts = 5, .counts = {70, 0, 130, 9, 64}, .int4 = 1, .g1 = 2, .g2 = 4,
     .aligned = 2, .cuda_kernel16 = "ffn.wgmma_w4_grouped"},
    {.label = "wgmma_w4: I4 per channel, M 64, K1 96, K2 64", .nlead = 1, .lead = {64}, .k1 = 96, .k2 = 64,
     .int4 = 1, .aligned = 2, .cuda_kernel16 = "ffn.wgmma_w4"},
    {.label = "wgmma_w4: I4 per group of 48 rows (G 4, 2), M 130, K1 192, K2 96", .nlead = 1, .lead = {130},
     .k1 = 192, .k2 = 96, .int4 = 1, .g1 = 4, .g2 = 2, .aligned = 2, .cuda_kernel16 = "ffn.wgmma_w4"},
    /* k split in two (17 tiles of 64 on a GPU of 4+ SMs), the second split from row 576, inside the
     * third group of 272 rows */
    {.label = "wgmma_w4: split k, I4 per group of 272 rows (G 4, 2), M 100, K1 1088, K2 256", .nlead = 1,
     .lead = {100}, .k1 = 1088, .k2 = 256, .int4 = 1, .g1 = 4, .g2 = 2, .aligned = 2,
     .cuda_kernel16 = "ffn.wgmma_w4"},
    {.label = "exact: one-hot x, y = +-a, I8 per channel, offset, bias1", .nlead = 1, .lead = {48}, .k1 = 40,
     .k2 = 24, .bias = BIAS_1, .aoffset = 1, .exact = 1},
    {.label = "exact: one-hot x, y = +-a, I4 per group (G 5, 3), offset", .nlead = 1, .lead = {40}, .k1 = 40,
     .k2 = 24, .int4 = 1, .g1 = 5, .g2 = 3, .aoffset = 1, .exact = 1},
    /* shapes the CUDA int4 tensor-core kernel (ffn.mma_w4) takes: n a multiple of 256, k and the
     * groups' rows multiples of 16, aligned weights; m 1 .. 128 (its variants: up to 8, 16, 32
     * tokens, blocks of 64); K 1024 makes it split k (partials and their sum), K 256 not */
    {.label = "mma_w4: I4 per group (G 2, 2), no offset, no bias, M 1, K1 256, K2 256", .nlead = 1, .lead = {1},
     .k1 = 256, .k2 = 256, .int4 = 1, .g1 = 2, .g2 = 2, .aligned = 1, .cuda_kernel = "ffn.mma_w4"},
    {.label = "mma_w4: I4 per channel, no offset, bias1, M 3, K1 512, K2 1024, x aligned", .nlead = 1,
     .lead = {3}, .k1 = 512, .k2 = 1024, .bias = BIAS_1, .int4 = 1, .aligned = 2, .cuda_kernel = "ffn.mma_w4"},
    {.label = "mma_w4: I4 per group (G 16, 8: 16 rows), offset, M 8, K1 256, K2 256", .nlead = 1, .lead = {8},
     .k1 = 256, .k2 = 256, .int4 = 1, .g1 = 16, .g2 = 8, .aoffset = 1, .aligned = 2, .cuda_kernel = "ffn.mma_w4"},
    {.label = "mma_w4: I4 per group (G 4, 8), offset, bias, M 9, K1 1024, K2 256", .nlead = 1, .lead = {9},
     .k1 = 1024, .k2 = 256, .bias = BIAS_BOTH, .int4 = 1, .g1 = 4, .g2 = 8, .aoffset = 1, .aligned = 1},
    {.label = "mma_w4: I4 per group (G 8, 4), no offset, M 16, K1 256, K2 512", .nlead = 1, .lead = {16}, .k1 = 256,
     .k2 = 512, .int4 = 1, .g1 = 8, .g2 = 4, .aligned = 1, .cuda_kernel = "ffn.mma_w4"},
    {.label = "mma_w4: I4 per channel, offset, x [3, 9, 256] (M 27), K2 256", .nlead = 2, .lead = {3, 9}, .k1 = 256,
     .k2 = 256, .int4 = 1, .aoffset = 1, .aligned = 2, .cuda_kernel = "ffn.mma_w4"},
    {.label = "mma_w4: I4 per group (G 2, 1), no offset, bias1, M 64 (x unaligned: no wgmma), K1 256, K2 256",
     .nlead = 1, .lead = {64}, .k1 = 256, .k2 = 256, .bias = BIAS_1, .int4 = 1, .g1 = 2, .g2 = 1, .aligned = 1,
     .cuda_kernel = "ffn.mma_w4"},
    {.label = "mma_w4: I4 per group (G 4, 2), offset, M 128 (two token blocks), K1 256, K2 256", .nlead = 1,
     .lead = {128}, .k1 = 256, .k2 = 256, .int4 = 1, .g1 = 4, .g2 = 2, .aoffset = 1, .aligned = 1,
     .cuda_kernel = "ffn.mma_w4"},
    {.label = "mma_w4: experts, I4 per group (G 2, 2), totals 5 5 16 of M 16", .nlead = 1, .lead = {16}, .k1 = 256,
     .k2 = 256, .experts = 3, .counts = {5, 0, 11}, .totals = 1, .int4 = 1, .g1 = 2, .g2 = 2, .aligned = 1,
     .cuda_kernel = "ffn.mma_w4"},
    /* GPU-sized, on CUDA only: the block shapes and splits it picks when the grid fills the GPU
     * (2 x 2 warps and 3 splits at N1 28672, 28 and 16 splits at K2 14336 and 3584) */
    {.label = "mma_w4 full GPU: I4 per group (G 8, 112), no offset, M 2, K1 1024, K2 14336", .nlead = 1,
     .lead = {2}, .k1 = 1024, .k2 = 14336, .int4 = 1, .g1 = 8, .g2 = 112, .aligned = 1, .cuda_kernel = "ffn.mma_w4",
     .cuda_only = 1, .acts = 1u << RUDNN_FFN_SILU | 1u << RUDNN_FFN_SWIGLU},
    {.label = "mma_w4 full GPU: I4 per group (G 8, 28), offset, M 17, K1 1024, K2 3584", .nlead = 1, .lead = {17},
     .k1 = 1024, .k2 = 3584, .int4 = 1, .g1 = 8, .g2 = 28, .aoffset = 1, .aligned = 2, .cuda_kernel = "ffn.mma_w4",
     .cuda_only = 1, .acts = 1u << RUDNN_FFN_GELU | 1u << RUDNN_FFN_GEGLU},
    /* the second GEMM unsplit with one warp along k (K2 128, 264 column tiles of 512 on 132 SMs): y
     * stored from the registers in F16 / BF16, rows past M's 9 of the second token tile skipped */
    {.label = "mma_w4 full GPU: unsplit second GEMM, I4 per group (G 1056, 2), M 9, K1 135168, K2 128", .nlead = 1,
     .lead = {9}, .k1 = 135168, .k2 = 128, .int4 = 1, .g1 = 1056, .g2 = 2, .aligned = 2, .cuda_kernel = "ffn.mma_w4",
     .cuda_only = 1, .acts = 1u << RUDNN_FFN_SWIGLU},
    /* shapes it does not take, through the other kernels: N2 = 264 (not a multiple of 256, and K1 264
     * not of 16); groups of 8 rows (G1 32) with the second GEMM still its */
    {.label = "mma_w4 misfit: I4 per channel, no offset, M 9, K1 264, K2 256", .nlead = 1, .lead = {9}, .k1 = 264,
     .k2 = 256, .int4 = 1, .aligned = 1, .cuda_kernel = "!ffn.mma_w4"},
    {.label = "mma_w4 misfit: I4 groups of 8 rows (G 32, 2) in the first GEMM, M 5, K1 256, K2 256", .nlead = 1,
     .lead = {5}, .k1 = 256, .k2 = 256, .int4 = 1, .g1 = 32, .g2 = 2, .aligned = 1, .cuda_kernel = "ffn.mma_w4"},
    {.label = "mma_w4 misfit: unaligned weights, I4 per group (G 2, 2), M 4, K1 256, K2 256", .nlead = 1,
     .lead = {4}, .k1 = 256, .k2 = 256, .int4 = 1, .g1 = 2, .g2 = 2, .cuda_kernel = "!ffn.mma_w4"},
    /* past the few-rows kernels (CUDA with cuBLAS: the weights dequantized into the workspace, then
     * cuBLAS): int4 above the tensor-core kernel's 128 rows, int8 above 16, a row of W' not made of
     * whole 16-byte pieces (N2 36), and experts of 150 and 20 rows in one call (the workspace holds
     * both paths' scratch) */
    {.label = "dequant: I4 per group (G 4, 2), offset, bias1, M 160, K1 256, K2 256", .nlead = 1, .lead = {160},
     .k1 = 256, .k2 = 256, .bias = BIAS_1, .int4 = 1, .g1 = 4, .g2 = 2, .aoffset = 1, .aligned = 1,
     .cuda_kernel = "ffn.dequant_cublas"},
    {.label = "dequant: I8 per channel, offset, M 33, K1 36, K2 20", .nlead = 1, .lead = {33}, .k1 = 36, .k2 = 20,
     .aoffset = 1, .cuda_kernel = "ffn.dequant_cublas"},
    {.label = "dequant: experts, I4 per group (G 2, 2), bias, counts 150 0 20 of M 170", .nlead = 1, .lead = {170},
     .k1 = 256, .k2 = 256, .bias = BIAS_BOTH, .experts = 3, .counts = {150, 0, 20}, .int4 = 1, .g1 = 2, .g2 = 2,
     .aligned = 1},
};

/* ---- host tensors ------------------------------------------------------------------------------- */

/* A tensor's host data (the storage bytes, and the values as the reference reads them) and its
 * device copy. */
typedef struct ht {
    const char *name;
    int present;
    rudnn_dtype_t dtype;
    int rank;
    int64_t dims[RUDNN_MAX_RANK];
    size_t n;     /* elements (I4: values) */
    uint8_t *raw; /* storage (I4 packed) */
    double *val;  /* float dtypes, deq scales: the decoded values */
    int8_t *q;    /* I8 / I4 values */
    rt_tensor_t dev;
} ht_t;

static void ht_init(ht_t *t, const char *name, rudnn_dtype_t dt, int rank, const int64_t *dims)
{
    memset(t, 0, sizeof *t);
    t->name = name;
    t->present = 1;
    t->dtype = dt;
    t->rank = rank;
    memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
    t->n = (size_t)rt_numel(rank, dims);
    t->raw = rt_xcalloc(rudnn_dtype_storage_bytes(dt, t->n) + 1, 1);
    t->val = rt_xcalloc(t->n + 1, sizeof *t->val);
    t->q = rt_xcalloc(t->n + 1, 1);
}

static void ht_free(ht_t *t)
{
    if (!t->present)
        return;
    rt_tensor_destroy(&t->dev);
    free(t->raw);
    free(t->val);
    free(t->q);
    memset(t, 0, sizeof *t);
}

/* Element i of a float tensor (or an F32 tensor) set to v rounded to its dtype. */
static void ht_set(ht_t *t, size_t i, float v)
{
    size_t es = rudnn_dtype_size(t->dtype);
    rudnn_convert_from_f32(t->dtype, &v, t->raw + i * es, 1);
    t->val[i] = (double)rt_element_value(t->dtype, t->raw, i);
}

static void ht_uniform(ht_t *t, rt_rng_t *rng, double lo, double hi)
{
    for (size_t i = 0; i < t->n; i++)
        ht_set(t, i, (float)rt_rng_uniform(rng, lo, hi));
}

/* I8 / I4 / I32 values uniform in [lo, hi]; I4 packed along the last dim (rudnn_ffn_pack_int4). */
static void ht_ints(ht_t *t, rt_rng_t *rng, int64_t lo, int64_t hi)
{
    for (size_t i = 0; i < t->n; i++) {
        int64_t v = lo + (int64_t)rt_rng_below(rng, (uint64_t)(hi - lo + 1));
        if (t->dtype == RUDNN_I32) {
            int32_t v32 = (int32_t)v;
            memcpy(t->raw + 4 * i, &v32, 4);
            t->val[i] = (double)v32;
        } else {
            t->q[i] = (int8_t)v;
            t->val[i] = (double)v;
        }
    }
    if (t->dtype == RUDNN_I8)
        memcpy(t->raw, t->q, t->n);
    if (t->dtype == RUDNN_I4) {
        int64_t cols = t->dims[t->rank - 1];
        assert_int_equal(rudnn_ffn_pack_int4(t->q, (int64_t)t->n / cols, cols, t->raw), RUDNN_STATUS_SUCCESS);
    }
}

/* Element i of an I8 / I32 tensor set to v. */
static void ht_set_int(ht_t *t, size_t i, int64_t v)
{
    if (t->dtype == RUDNN_I32) {
        int32_t v32 = (int32_t)v;
        memcpy(t->raw + 4 * i, &v32, 4);
    } else {
        t->q[i] = (int8_t)v;
        t->raw[i] = (uint8_t)t->q[i];
    }
    t->val[i] = (double)v;
}

/* A deq scale of value v (F32, BF16 rounded, or I64: the F32's bits in the low word, junk in the
 * high one, which the kernels must ignore). */
static void ht_set_deq(ht_t *t, size_t i, float v, rt_rng_t *rng)
{
    if (t->dtype != RUDNN_I64) {
        ht_set(t, i, v);
        return;
    }
    uint32_t bits;
    memcpy(&bits, &v, 4);
    uint64_t junk = (rt_rng_next(rng) | 0x10000000u) & 0xffffffffu; /* never 0 */
    int64_t packed = (int64_t)((junk << 32) | bits);
    memcpy(t->raw + 8 * i, &packed, 8);
    t->val[i] = ffn_ref_deq_scale_i64(packed);
}

/* The device copy at offset_elems elements (I4: bytes) into a poisoned buffer. */
static void ht_upload(ht_t *t, size_t offset_elems)
{
    rt_tensor_create(&t->dev, t->dtype, t->rank, t->dims, offset_elems, RT_TAIL_BYTES);
    size_t bytes = rudnn_tensor_bytes(&t->dev.t);
    if (bytes)
        rt_assert_status(rudnn_tensor_write(rt_queue, &t->dev.t, t->raw, bytes), RUDNN_STATUS_SUCCESS);
}

/* ---- one problem --------------------------------------------------------------------------------- */

enum { T_X, T_W1, T_W2, T_ET, T_B1, T_B2, T_SCALE, T_OFFSET, T_DQ1, T_DQ2, T_AS1, T_AO1, T_AS2, T_AO2, T_COUNT };

typedef struct prob {
    ffn_ref_scenario_t sc;
    rudnn_ffn_activation_t act;
    rudnn_dtype_t xdt, ydt;
    int64_t M, K1, N1, K2, N2, E; /* E 0: plain */
    int64_t starts[9];            /* expert e's rows: [starts[e], starts[e + 1]) */
    int64_t rows;                 /* rows written: the token sum (M plain) */
    ht_t t[T_COUNT];
    rt_tensor_t y;
    int x_rank;
    int64_t y_dims[RUDNN_MAX_RANK];
    double *yref;  /* [M, N2] */
    double *qref;  /* [M, K2]: the reference's hidden operand (W8A8: its q) */
    double *allow; /* [M, N2]: W8A8 extra allowance, else NULL */
    int ties;      /* W8A8: (row, j) pairs within delta of a rounding tie */
    int exact;     /* compare within exact_ulps ulps of y's dtype (tcase_t.exact) */
    int exact_ulps;
} prob_t;

/* dims of a per-expert array: [E, a (, b)] or [a (, b)] */
static int edims(const prob_t *p, int64_t *d, int64_t a, int64_t b, int two)
{
    int r = 0;
    if (p->E > 0)
        d[r++] = p->E;
    d[r++] = a;
    if (two)
        d[r++] = b;
    return r;
}

static int64_t experts_or_1(const prob_t *p) { return p->E > 0 ? p->E : 1; }

static void make_float_weights(prob_t *p, rt_rng_t *rng)
{
    int64_t d[3];
    int r = edims(p, d, p->K1, p->N1, 1);
    ht_init(&p->t[T_W1], "weight1", p->xdt, r, d);
    ht_uniform(&p->t[T_W1], rng, -3.0 / sqrt((double)p->K1), 3.0 / sqrt((double)p->K1)); /* h ~ O(1) */
    r = edims(p, d, p->K2, p->N2, 1);
    ht_init(&p->t[T_W2], "weight2", p->xdt, r, d);
    ht_uniform(&p->t[T_W2], rng, -3.0 / sqrt((double)p->K2), 3.0 / sqrt((double)p->K2));
}

static void make_float_biases(prob_t *p, const tcase_t *c, rt_rng_t *rng)
{
    rudnn_dtype_t bdt = p->xdt == RUDNN_F16 ? RUDNN_F16 : RUDNN_F32; /* ffn.h: F16 for F16 x, else F32 */
    int64_t d[2];
    int r;
    if (has_b1(c)) {
        r = edims(p, d, p->N1, 0, 0);
        ht_init(&p->t[T_B1], "bias1", bdt, r, d);
        ht_uniform(&p->t[T_B1], rng, -0.5, 0.5);
    }
    if (has_b2(c)) {
        r = edims(p, d, p->N2, 0, 0);
        ht_init(&p->t[T_B2], "bias2", bdt, r, d);
        ht_uniform(&p->t[T_B2], rng, -0.5, 0.5);
    }
}

/* Rows of x with inf / NaN: row 1 +inf, row 2 -inf, row 3 NaN, row 5 +inf and -inf. */
static void make_special_x(prob_t *p)
{
    ht_t *x = &p->t[T_X];
    const int64_t k = p->K1;
    if (p->M > 1)
        ht_set(x, (size_t)(1 * k + 3 % k), INFINITY);
    if (p->M > 2)
        ht_set(x, (size_t)(2 * k + 7 % k), -INFINITY);
    if (p->M > 3)
        ht_set(x, (size_t)(3 * k), NAN);
    if (p->M > 5) {
        ht_set(x, (size_t)(5 * k + 1), INFINITY);
        ht_set(x, (size_t)(5 * k + 2), -INFINITY);
    }
}

static void make_w8a8(prob_t *p, const tcase_t *c, rudnn_dtype_t deq_dt, rt_rng_t *rng)
{
    int64_t d[3];
    int r;
    const int64_t E1 = experts_or_1(p);
    /* ties: |x W1 + b1| <= 83 and deq1 in {1/2, 1/4}: h, relu's a and reglu's products are
     * multiples of 1/16 and exact in FP32 (as a scale + offset with scale in {1/2, 1, 2}, offset
     * 0), so many t lie exactly on k + 1/2 and must round to the even k. */
    const int64_t xr = c->ties ? 1 : 128, wr = c->ties ? 2 : 128;
    ht_ints(&p->t[T_X], rng, -xr, xr - (c->ties ? 0 : 1));
    r = edims(p, d, p->K1, p->N1, 1);
    ht_init(&p->t[T_W1], "weight1", RUDNN_I8, r, d);
    ht_ints(&p->t[T_W1], rng, -wr, wr - (c->ties ? 0 : 1));
    r = edims(p, d, p->K2, p->N2, 1);
    ht_init(&p->t[T_W2], "weight2", RUDNN_I8, r, d);
    ht_ints(&p->t[T_W2], rng, -128, 127);
    if (has_b1(c)) {
        r = edims(p, d, p->N1, 0, 0);
        ht_init(&p->t[T_B1], "bias1", RUDNN_I32, r, d);
        ht_ints(&p->t[T_B1], rng, c->ties ? -3 : -20000, c->ties ? 3 : 20000);
    }
    if (has_b2(c)) {
        r = edims(p, d, p->N2, 0, 0);
        ht_init(&p->t[T_B2], "bias2", RUDNN_I32, r, d);
        ht_ints(&p->t[T_B2], rng, -20000, 20000);
    }
    /* x W1 has a standard deviation of about 5461 sqrt(K1) (128^2 / 3 per product): deq1 brings
     * it to ~1.5; scale 40 puts q mostly inside [-128, 127] with saturated tails; deq2 brings
     * q W2 (q ~ 40, w ~ 74) to ~1. */
    const double deq1 = 1.5 / (5461.0 * sqrt((double)p->K1)), deq2 = 1.0 / (2960.0 * sqrt((double)p->K2));
    if (c->scale_pc) {
        r = edims(p, d, p->K2, 0, 0);
    } else {
        d[0] = E1; /* [1] / [E] */
        r = 1;
    }
    ht_init(&p->t[T_SCALE], "scale", RUDNN_F32, r, d);
    for (size_t i = 0; i < p->t[T_SCALE].n; i++)
        ht_set(&p->t[T_SCALE], i,
               c->ties ? ldexpf(1.0f, (int)rt_rng_below(rng, 3) - 1) : (float)(40.0 * rt_rng_uniform(rng, 0.5, 1.5)));
    d[0] = E1;
    ht_init(&p->t[T_OFFSET], "offset", RUDNN_F32, 1, d);
    ht_uniform(&p->t[T_OFFSET], rng, c->ties ? 0.0 : -3.0, c->ties ? 0.0 : 3.0);
    for (int which = 0; which < 2; which++) {
        const int pc = which ? c->deq2_pc : c->deq1_pc;
        const int64_t n = which ? p->N2 : p->N1;
        ht_t *t = &p->t[which ? T_DQ2 : T_DQ1];
        if (pc) {
            r = edims(p, d, n, 0, 0);
        } else {
            d[0] = E1;
            r = 1;
        }
        ht_init(t, which ? "deq_scale2" : "deq_scale1", deq_dt, r, d);
        for (size_t i = 0; i < t->n; i++)
            ht_set_deq(t, i,
                       c->ties && !which ? ldexpf(1.0f, -1 - (int)rt_rng_below(rng, 2))
                                         : (float)((which ? deq2 : deq1) * rt_rng_uniform(rng, 0.5, 1.5)),
                       rng);
    }
    if (c->big) {
        /* row 0: x = -128 and W1's even columns -128: x W1 = 65535 * 16384 = 1073725440; the even
         * columns' b1 near INT32_MAX (a sum near 3.2e9), the odd ones' near INT32_MIN. deq1 1.5e-9
         * and scale 20 keep q mostly inside [-128, 127]; a wrapped sum flips v's sign. y's even
         * columns: b2 near INT32_MAX, so h2 + b2 passes the int32 range whenever h2 > 1000, deq2
         * 1e-9; its odd ones: a small b2 and deq2 ~ 1 / 32258, so that y shows q. */
        for (int64_t e = 0; e < E1; e++) {
            for (int64_t k = 0; k < p->K1; k++) {
                ht_set_int(&p->t[T_X], (size_t)k, -128);
                for (int64_t col = 0; col < p->N1; col += 2)
                    ht_set_int(&p->t[T_W1], (size_t)((e * p->K1 + k) * p->N1 + col), -128);
            }
            for (int64_t col = 0; col < p->N1; col++)
                ht_set_int(&p->t[T_B1], (size_t)(e * p->N1 + col),
                           col % 2 ? INT32_MIN + (int64_t)rt_rng_below(rng, 1000)
                                   : INT32_MAX - (int64_t)rt_rng_below(rng, 1000));
            for (int64_t col = 0; col < p->N2; col++)
                ht_set_int(&p->t[T_B2], (size_t)(e * p->N2 + col),
                           col % 2 ? (int64_t)rt_rng_below(rng, 2001) - 1000
                                   : INT32_MAX - (int64_t)rt_rng_below(rng, 1000));
        }
        for (size_t i = 0; i < p->t[T_DQ1].n; i++)
            ht_set_deq(&p->t[T_DQ1], i, (float)(1.5e-9 * rt_rng_uniform(rng, 0.9, 1.1)), rng);
        for (size_t i = 0; i < p->t[T_DQ2].n; i++) /* per channel: column i % N2 */
            ht_set_deq(&p->t[T_DQ2], i,
                       (float)((i % (size_t)p->N2 % 2 ? 1.0 / 32258.0 : 1e-9) * rt_rng_uniform(rng, 0.9, 1.1)), rng);
        for (size_t i = 0; i < p->t[T_SCALE].n; i++)
            ht_set(&p->t[T_SCALE], i, 20.0f);
    }
    if (c->special) { /* a NaN column gives q = 0, an inf one saturated q (or 0 through gelu(-inf)) */
        ht_t *t = &p->t[T_DQ1];
        for (int64_t e = 0; e < E1; e++) {
            ht_set_deq(t, (size_t)(e * p->N1 + 1), NAN, rng);
            ht_set_deq(t, (size_t)(e * p->N1 + 2), INFINITY, rng);
        }
    }
}

static void make_weight_only(prob_t *p, const tcase_t *c, rt_rng_t *rng)
{
    const rudnn_dtype_t wdt = c->int4 ? RUDNN_I4 : RUDNN_I8;
    const int64_t wlo = c->int4 ? -8 : -128, whi = c->int4 ? 7 : 127;
    const double wrms = c->int4 ? 5.5 : 74.0; /* rms of w (+ offset) */
    int64_t d[3];
    for (int which = 0; which < 2; which++) {
        const int64_t k = which ? p->K2 : p->K1, n = which ? p->N2 : p->N1;
        const int64_t g = which ? c->g2 : c->g1;
        ht_t *w = &p->t[which ? T_W2 : T_W1];
        int r = edims(p, d, k, n, 1);
        ht_init(w, which ? "weight2" : "weight1", wdt, r, d);
        ht_ints(w, rng, wlo, whi);
        r = g > 0 ? edims(p, d, g, n, 1) : edims(p, d, n, 0, 0);
        ht_t *s = &p->t[which ? T_AS2 : T_AS1];
        ht_init(s, which ? "antiquant_scale2" : "antiquant_scale1", p->xdt, r, d);
        const double base = 3.0 / (wrms * sqrt((double)k));
        for (size_t i = 0; i < s->n; i++)
            ht_set(s, i, (float)(base * rt_rng_uniform(rng, 0.5, 1.5)));
        if (c->aoffset) {
            ht_t *o = &p->t[which ? T_AO2 : T_AO1];
            ht_init(o, which ? "antiquant_offset2" : "antiquant_offset1", p->xdt, r, d);
            ht_uniform(o, rng, -4.0, 4.0);
        }
    }
}

static void set_exact(prob_t *p);

/* tcase_t.exact: x and W1 multiples of 1/16 in [-4, 4] (exact in F16 and BF16), so h = x W1 is a
 * multiple of 1/256 of ~14 significant bits: exact in FP32, rounded by F16 / BF16 (the HIGH_PERFORMANCE
 * rounding shows). W2[j][c] = +-1 where j = c % K2, else 0: y[c] = +-a[j] exactly, so y carries the
 * hidden activation's rounding unblurred. relu and reglu compute exactly in FP32 and must match the
 * reference bit for bit; the other activations within 1 ulp (F32: 8 ulps, the FP32 functions'
 * error) plus 1e-6 of the output scale (exact_allowed). */
static void make_exact(prob_t *p, rt_rng_t *rng)
{
    for (int which = 0; which < 2; which++) {
        ht_t *t = &p->t[which ? T_W1 : T_X];
        for (size_t i = 0; i < t->n; i++)
            ht_set(t, i, (float)((int64_t)rt_rng_below(rng, 129) - 64) / 16.0f);
    }
    ht_t *w2 = &p->t[T_W2];
    for (int64_t e = 0; e < experts_or_1(p); e++)
        for (int64_t j = 0; j < p->K2; j++)
            for (int64_t c = 0; c < p->N2; c++)
                ht_set(w2, (size_t)((e * p->K2 + j) * p->N2 + c), j == c % p->K2 ? (c % 2 ? -1.0f : 1.0f) : 0.0f);
    set_exact(p);
}

/* tcase_t.exact for weight-only: row r of x is one-hot at r % K1, so h is a row of the dequantized
 * W1 (the products add zeros), and reglu's a = v relu(g) shows whether those weights were
 * rounded to x's dtype (ffn.h: round_A((w + offset) scale)); W2 dequantizes to a signed selection
 * (w2 +-1 or 0, offset 0, scale 1), so y = +-a exactly. */
static void make_exact_wo(prob_t *p)
{
    ht_t *x = &p->t[T_X], *w2 = &p->t[T_W2];
    for (int64_t r = 0; r < p->M; r++)
        for (int64_t k = 0; k < p->K1; k++)
            ht_set(x, (size_t)(r * p->K1 + k), k == r % p->K1 ? 1.0f : 0.0f);
    for (int64_t e = 0; e < experts_or_1(p); e++)
        for (int64_t j = 0; j < p->K2; j++)
            for (int64_t c = 0; c < p->N2; c++)
                w2->q[(e * p->K2 + j) * p->N2 + c] = (int8_t)(j == c % p->K2 ? (c % 2 ? -1 : 1) : 0);
    if (w2->dtype == RUDNN_I8) {
        memcpy(w2->raw, w2->q, w2->n);
    } else {
        const int64_t cols = w2->dims[w2->rank - 1];
        assert_int_equal(rudnn_ffn_pack_int4(w2->q, (int64_t)w2->n / cols, cols, w2->raw), RUDNN_STATUS_SUCCESS);
    }
    for (size_t i = 0; i < p->t[T_AS2].n; i++)
        ht_set(&p->t[T_AS2], i, 1.0f);
    for (size_t i = 0; p->t[T_AO2].present && i < p->t[T_AO2].n; i++)
        ht_set(&p->t[T_AO2], i, 0.0f);
    set_exact(p);
}

static void set_exact(prob_t *p)
{
    p->exact = 1;
    p->exact_ulps = p->act == RUDNN_FFN_RELU || p->act == RUDNN_FFN_REGLU ? 0 : p->ydt == RUDNN_F32 ? 8 : 1;
}

/* One ulp of v in dtype (at least the smallest subnormal's spacing). */
static double ulp_of(rudnn_dtype_t dt, double v)
{
    const int bits = dt == RUDNN_F16 ? 10 : dt == RUDNN_BF16 ? 7 : 23;
    const int min_exp = dt == RUDNN_F16 ? -24 : -149;
    int e;
    frexp(v, &e); /* |v| in [2^(e-1), 2^e) */
    int u = e - 1 - bits;
    return ldexp(1.0, u > min_exp ? u : min_exp);
}

/* Builds the case's tensors (host and device), the reference and (W8A8) the allowances. dt is
 * x's dtype, for W8A8 the deq scales'. Returns 0 (after logging) when the test data are wrong. */
static int build(prob_t *p, const tcase_t *c, ffn_ref_scenario_t sc, rudnn_dtype_t dt, rudnn_ffn_activation_t act,
                 rt_rng_t *rng, rt_log_t *log, const char *label)
{
    memset(p, 0, sizeof *p);
    p->sc = sc;
    p->act = act;
    p->xdt = sc == FFN_REF_W8A8 ? RUDNN_I8 : dt;
    p->ydt = sc == FFN_REF_W8A8 ? (dt == RUDNN_BF16 ? RUDNN_BF16 : RUDNN_F16) : dt;
    p->M = 1;
    for (int i = 0; i < c->nlead; i++)
        p->M *= c->lead[i];
    p->K1 = c->k1;
    p->K2 = c->k2;
    p->N1 = ffn_ref_is_gated(act) ? 2 * c->k2 : c->k2;
    p->N2 = c->k1;
    p->E = c->experts;

    /* x and y: [lead..., K1] */
    p->x_rank = c->nlead + 1;
    int64_t xd[RUDNN_MAX_RANK];
    for (int i = 0; i < c->nlead; i++)
        xd[i] = p->y_dims[i] = c->lead[i];
    xd[c->nlead] = p->K1;
    p->y_dims[c->nlead] = p->N2;
    ht_init(&p->t[T_X], "x", p->xdt, p->x_rank, xd);

    /* expert_tokens */
    p->rows = p->M;
    if (p->E > 0) {
        int64_t d = p->E;
        ht_init(&p->t[T_ET], "expert_tokens", RUDNN_I64, 1, &d);
        int64_t at = 0;
        for (int64_t e = 0; e < p->E; e++) {
            p->starts[e] = at;
            at += c->counts[e];
            int64_t v = c->totals ? at : c->counts[e];
            memcpy(p->t[T_ET].raw + 8 * e, &v, 8);
        }
        p->starts[p->E] = at;
        p->rows = at;
    } else {
        p->starts[0] = 0;
        p->starts[1] = p->M;
    }

    switch (sc) {
    case FFN_REF_FLOAT:
        ht_uniform(&p->t[T_X], rng, -1.0, 1.0);
        if (c->special)
            make_special_x(p);
        make_float_weights(p, rng);
        make_float_biases(p, c, rng);
        if (c->exact)
            make_exact(p, rng);
        break;
    case FFN_REF_W8A8: make_w8a8(p, c, dt, rng); break;
    case FFN_REF_WEIGHT_ONLY:
        ht_uniform(&p->t[T_X], rng, -1.0, 1.0);
        make_weight_only(p, c, rng);
        make_float_biases(p, c, rng);
        if (c->exact)
            make_exact_wo(p);
        break;
    }

    /* device copies at small, different element offsets (tcase_t.aligned: multiples of 16) */
    for (int i = 0; i < T_COUNT; i++) {
        const int al = c->aligned == 2 || (c->aligned == 1 && (i == T_W1 || i == T_W2));
        if (p->t[i].present)
            ht_upload(&p->t[i], (size_t)(1 + i % 5) * (al ? 16 : 1));
    }
    rt_tensor_create(&p->y, p->ydt, p->x_rank, p->y_dims, c->aligned == 2 ? 16 : 7, RT_TAIL_BYTES);

    /* the reference */
    ffn_ref_args_t ra;
    memset(&ra, 0, sizeof ra);
    ra.scenario = sc;
    ra.activation = act;
    ra.m = p->M, ra.k1 = p->K1, ra.n1 = p->N1, ra.k2 = p->K2, ra.n2 = p->N2;
    ra.experts = p->E;
    int64_t tokens[8];
    for (int64_t e = 0; e < p->E; e++)
        memcpy(&tokens[e], p->t[T_ET].raw + 8 * e, 8);
    ra.expert_tokens = tokens;
    ra.expert_tokens_totals = c->totals;
    if (ffn_ref_precision_rounds(sc, p->xdt, c->precision, &ra.round_pre, &ra.round_hidden) != 0) {
        rt_logf(log, "  %s: test data: no reference roundings for this dtype\n", label);
        return 0;
    }
    const double *b1 = p->t[T_B1].present ? p->t[T_B1].val : NULL;
    const double *b2 = p->t[T_B2].present ? p->t[T_B2].val : NULL;
    int32_t *b1i = NULL, *b2i = NULL;
    if (sc == FFN_REF_W8A8) {
        ra.x_i8 = p->t[T_X].q;
        ra.w1_i8 = p->t[T_W1].q, ra.w2_i8 = p->t[T_W2].q;
        if (p->t[T_B1].present)
            b1i = (int32_t *)(void *)p->t[T_B1].raw;
        if (p->t[T_B2].present)
            b2i = (int32_t *)(void *)p->t[T_B2].raw;
        ra.b1_i32 = b1i, ra.b2_i32 = b2i;
        ra.scale = p->t[T_SCALE].val, ra.offset = p->t[T_OFFSET].val;
        ra.deq_scale1 = p->t[T_DQ1].val, ra.deq_scale2 = p->t[T_DQ2].val;
        ra.scale_per_channel = c->scale_pc;
        ra.deq1_per_channel = c->deq1_pc, ra.deq2_per_channel = c->deq2_pc;
    } else {
        ra.x = p->t[T_X].val;
        ra.b1 = b1, ra.b2 = b2;
        if (sc == FFN_REF_FLOAT) {
            ra.w1 = p->t[T_W1].val, ra.w2 = p->t[T_W2].val;
        } else {
            ra.w1_i8 = p->t[T_W1].q, ra.w2_i8 = p->t[T_W2].q;
            ra.antiquant_scale1 = p->t[T_AS1].val, ra.antiquant_scale2 = p->t[T_AS2].val;
            ra.antiquant_offset1 = p->t[T_AO1].present ? p->t[T_AO1].val : NULL;
            ra.antiquant_offset2 = p->t[T_AO2].present ? p->t[T_AO2].val : NULL;
            ra.antiquant_groups1 = c->g1, ra.antiquant_groups2 = c->g2;
            ra.weights_int4 = c->int4;
            ra.round_weight = p->xdt == RUDNN_F16 ? FFN_REF_ROUND_F16 : FFN_REF_ROUND_BF16;
        }
    }
    p->yref = rt_xcalloc((size_t)(p->M * p->N2) + 1, sizeof *p->yref);
    p->qref = rt_xcalloc((size_t)(p->M * p->K2) + 1, sizeof *p->qref);
    int64_t got = ffn_ref(&ra, p->yref, p->qref);
    if (got != p->rows) {
        rt_logf(log, "  %s: test data: ffn_ref returned %lld rows, expected %lld\n", label, (long long)got,
                (long long)p->rows);
        return 0;
    }
    if (sc != FFN_REF_W8A8)
        return 1;

    /* W8A8: t = a scale + offset of every (row, j) in double, as the reference computes it; where
     * t is within delta of a tie, y may take the other neighbour of q (one step of w2 deq2). */
    p->allow = rt_xcalloc((size_t)(p->M * p->N2) + 1, sizeof *p->allow);
    double *h = rt_xcalloc((size_t)p->N1, sizeof *h), *a = rt_xcalloc((size_t)p->K2, sizeof *a);
    /* the exact-ties case's relu and reglu compute exactly in FP32: no allowance, a tie must round
     * to even */
    const int exact = c->ties && (act == RUDNN_FFN_RELU || act == RUDNN_FFN_REGLU);
    int exact_ties = 0;
    const int64_t K1 = p->K1, N1 = p->N1, K2 = p->K2, N2 = p->N2;
    int ok = 1;
    for (int64_t e = 0; e < experts_or_1(p); e++) {
        const int8_t *w1 = p->t[T_W1].q + e * K1 * N1, *w2 = p->t[T_W2].q + e * K2 * N2;
        for (int64_t row = p->starts[e]; row < p->starts[e + 1]; row++) {
            for (int64_t col = 0; col < N1; col++) {
                int64_t acc = b1i ? b1i[e * N1 + col] : 0;
                for (int64_t i = 0; i < K1; i++)
                    acc += (int64_t)p->t[T_X].q[row * K1 + i] * w1[i * N1 + col];
                double dq = c->deq1_pc ? p->t[T_DQ1].val[e * N1 + col] : p->t[T_DQ1].val[e];
                h[col] = ffn_ref_round(ra.round_pre, (double)acc * dq);
            }
            ffn_ref_activate_row(act, h, N1, a);
            for (int64_t j = 0; j < K2; j++) {
                double av = ffn_ref_round(ra.round_hidden, a[j]);
                double s = c->scale_pc ? p->t[T_SCALE].val[e * K2 + j] : p->t[T_SCALE].val[e];
                double o = p->t[T_OFFSET].val[e];
                double t = av * s + o;
                if ((double)ffn_ref_requant_i8(t) != p->qref[row * K2 + j] && ok) {
                    rt_logf(log, "  %s: test self-check: t = %.17g at row %lld, j %lld requantizes to %d, the "
                            "reference's q is %g\n", label, t, (long long)row, (long long)j, ffn_ref_requant_i8(t),
                            p->qref[row * K2 + j]);
                    ok = 0;
                }
                if (exact) {
                    exact_ties += t - floor(t) == 0.5;
                    continue;
                }
                if (!isfinite(t))
                    continue;
                double delta = 2e-6 * (1.0 + fabs(av * s) + fabs(o));
                if (fabs(fabs(t - floor(t)) - 0.5) > delta)
                    continue;
                p->ties++;
                for (int64_t col = 0; col < N2; col++) {
                    double dq = c->deq2_pc ? p->t[T_DQ2].val[e * N2 + col] : p->t[T_DQ2].val[e];
                    p->allow[row * N2 + col] += fabs((double)w2[j * N2 + col] * dq);
                }
            }
        }
    }
    free(h);
    free(a);
    if (exact && exact_ties < 10) {
        rt_logf(log, "  %s: test data: only %d exact ties (want >= 10)\n", label, exact_ties);
        ok = 0;
    }
    return ok;
}

static void prob_free(prob_t *p)
{
    for (int i = 0; i < T_COUNT; i++)
        ht_free(&p->t[i]);
    rt_tensor_destroy(&p->y);
    free(p->yref);
    free(p->qref);
    free(p->allow);
}

static const rudnn_tensor_t *dev_of(const prob_t *p, int i)
{
    return p->t[i].present ? &p->t[i].dev.t : NULL;
}

static rudnn_ffn_args_t args_of(const prob_t *p, const tcase_t *c)
{
    rudnn_ffn_args_t a;
    memset(&a, 0, sizeof a);
    a.x = dev_of(p, T_X);
    a.weight1 = dev_of(p, T_W1);
    a.weight2 = dev_of(p, T_W2);
    a.expert_tokens = dev_of(p, T_ET);
    a.expert_tokens_totals = c->totals;
    a.bias1 = dev_of(p, T_B1);
    a.bias2 = dev_of(p, T_B2);
    a.scale = dev_of(p, T_SCALE);
    a.offset = dev_of(p, T_OFFSET);
    a.deq_scale1 = dev_of(p, T_DQ1);
    a.deq_scale2 = dev_of(p, T_DQ2);
    a.antiquant_scale1 = dev_of(p, T_AS1);
    a.antiquant_offset1 = dev_of(p, T_AO1);
    a.antiquant_scale2 = dev_of(p, T_AS2);
    a.antiquant_offset2 = dev_of(p, T_AO2);
    a.activation = p->act;
    a.precision = c->precision;
    return a;
}

/* ---- calls and checks ---------------------------------------------------------------------------- */

static int check_ok(rt_log_t *log, const char *label, const char *what, rudnn_status_t st)
{
    if (st != RUDNN_STATUS_SUCCESS) {
        rt_logf(log, "  %s: %s returned %s: %s\n", label, what, rudnn_status_string(st), rudnn_last_error());
        return 0;
    }
    return 1;
}

/* rudnn_last_kernel() right after call_ffn's rudnn_ffn */
static char last_ran[64];

/* 1 on the CUDA backend of an sm_80+ device (where ffn.mma_w4 can run) */
static int cuda_tensor_cores(void)
{
    rudnn_device_info_t info;
    return rudnn_context_device_info(rt_ctx, &info) == RUDNN_STATUS_SUCCESS && strcmp(info.backend, "cuda") == 0 &&
           info.compute_capability >= 80;
}

/* CUDA on sm_90: the wgmma kernels (the plugin is built for sm_90a) */
static int cuda_wgmma(void)
{
    rudnn_device_info_t info;
    return rudnn_context_device_info(rt_ctx, &info) == RUDNN_STATUS_SUCCESS && strcmp(info.backend, "cuda") == 0 &&
           info.compute_capability == 90;
}

/* One rudnn_ffn on a poisoned y. Checks what it wrote (every element of the rows [0, rows), no
 * other byte of y's buffer, nothing past ws_bytes of an explicit workspace) and returns those
 * rows' bytes (malloc'ed) in *out, NULL on failure. */
static int call_ffn(prob_t *p, rudnn_ffn_args_t args, int det, rudnn_buffer_t ws, size_t ws_bytes,
                    size_t ws_buffer_bytes, uint8_t **out, rt_log_t *log, const char *label, const char *what)
{
    *out = NULL;
    rt_tensor_poison(&p->y);
    uint8_t *before = rt_buffer_snapshot(p->y.buffer, p->y.buffer_bytes);
    uint8_t *ws_before = ws ? rt_buffer_snapshot(ws, ws_buffer_bytes) : NULL;
    args.deterministic = det;
    int ok = check_ok(log, label, what, rudnn_ffn(rt_queue, &args, ws, ws_bytes, &p->y.t));
    snprintf(last_ran, sizeof last_ran, "%s", rudnn_last_kernel());
    if (ok && p->rows > 0 && strncmp(rudnn_last_kernel(), "ffn.", 4) != 0) {
        rt_logf(log, "  %s: %s: rudnn_last_kernel() is \"%s\", expected an ffn kernel\n", label, what,
                rudnn_last_kernel());
        ok = 0;
    }
    ok &= check_ok(log, label, "queue_synchronize", rudnn_queue_synchronize(rt_queue));
    uint8_t *after = rt_buffer_snapshot(p->y.buffer, p->y.buffer_bytes);
    const size_t es = rudnn_dtype_size(p->ydt);
    const size_t row_bytes = (size_t)p->N2 * es, written = (size_t)p->rows * row_bytes;
    size_t begin = p->y.t.offset, end = begin + written, first = 0;
    size_t changed = rt_count_changed(before, after, p->y.buffer_bytes, &begin, &end, 1, &first);
    if (changed) {
        rt_logf(log, "  %s: %s: %zu byte(s) of y's buffer changed outside y's rows [0, %lld) (first at byte %zu "
                "of the buffer, y at %zu)\n", label, what, changed, (long long)p->rows, first, begin);
        ok = 0;
    }
    size_t unwritten = 0, poison = rt_poison_bits(p->ydt);
    for (size_t i = 0; i < (size_t)p->rows * (size_t)p->N2; i++)
        unwritten += rt_element_bits(p->ydt, after + begin, i) == poison;
    if (unwritten) {
        rt_logf(log, "  %s: %s: %zu of %lld element(s) of y never written\n", label, what, unwritten,
                (long long)(p->rows * p->N2));
        ok = 0;
    }
    if (ws) {
        uint8_t *ws_after = rt_buffer_snapshot(ws, ws_buffer_bytes);
        size_t wb = 0, we = ws_bytes;
        size_t wc = rt_count_changed(ws_before, ws_after, ws_buffer_bytes, &wb, &we, 1, &first);
        if (wc) {
            rt_logf(log, "  %s: %s: %zu byte(s) past the workspace's %zu bytes changed (first at %zu)\n", label,
                    what, wc, ws_bytes, first);
            ok = 0;
        }
        free(ws_after);
    }
    if (ok) {
        *out = rt_xmalloc(written + 1);
        memcpy(*out, after + begin, written);
    }
    free(before);
    free(ws_before);
    free(after);
    return ok;
}

/* tcase_t.exact: relu / reglu exactly; the others within exact_ulps ulps, plus 1e-6 of the scale
 * for the tails (erfc, exp near underflow), where the FP32 functions lose relative accuracy. */
static double exact_allowed(const prob_t *p, double want, double scale)
{
    return p->exact_ulps ? p->exact_ulps * ulp_of(p->ydt, want) + 1e-6 * scale : 0.0;
}

/* y's rows against the reference (the header's rule); *worst gets the largest err / allowed. */
static int compare(const prob_t *p, const uint8_t *raw, rt_log_t *log, const char *label, const char *what,
                   double *worst)
{
    const size_t n = (size_t)(p->rows * p->N2);
    double scale = 1.0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(p->yref[i]) && fabs(p->yref[i]) > scale)
            scale = fabs(p->yref[i]);
    const double base = tol_of(p->ydt) * scale;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const double got = (double)rt_element_value(p->ydt, raw, i), want = p->yref[i];
        int ok;
        if (isnan(want)) {
            ok = isnan(got);
        } else if (isinf(want)) {
            ok = got == want;
        } else {
            double allowed = base + (p->allow ? p->allow[i] : 0.0);
            if (p->exact)
                allowed = exact_allowed(p, want, scale);
            const double err = fabs(got - want);
            ok = err <= allowed; /* false for NaN */
            if (ok && allowed > 0 && err / allowed > *worst)
                *worst = err / allowed;
        }
        if (!ok) {
            if (bad < 4)
                rt_logf(log, "  %s: %s: y[%zu, %zu] = %.9g, reference %.9g (allowed %.3g)\n", label, what,
                        i / (size_t)p->N2, i % (size_t)p->N2, got, want,
                        p->exact ? exact_allowed(p, want, scale) : base + (p->allow ? p->allow[i] : 0.0));
            bad++;
        }
    }
    if (bad > 4)
        rt_logf(log, "  %s: %s: %d element(s) of %zu outside the tolerance\n", label, what, bad, n);
    return bad == 0;
}

/* One case with one activation: the three calls of the header. Returns 1 when it passed. */
static int run_one(const tcase_t *c, ffn_ref_scenario_t sc, rudnn_dtype_t dt, rudnn_ffn_activation_t act,
                   const char *test, int index, rt_log_t *log)
{
    if ((c->cuda_only && !cuda_tensor_cores()) || (c->acts && !(c->acts & 1u << act)))
        return 1;
    char label[256];
    snprintf(label, sizeof label, "%s: %s, %s", test, c->label, act_names[act]);
    rt_rng_t rng;
    rt_rng_seed_case(&rng, test, index * ACT_COUNT + (int)act);
    prob_t p;
    int ok = build(&p, c, sc, dt, act, &rng, log, label);
    rudnn_buffer_t ws = NULL;
    uint8_t *y1 = NULL, *y2 = NULL, *y3 = NULL;
    rt_guard_t guard = {0};
    double worst = 0.0;
    if (!ok)
        goto done;
    for (int i = 0; i < T_COUNT; i++)
        if (p.t[i].present)
            rt_guard_track(&guard, rt_queue, &p.t[i].dev, p.t[i].name);
    rt_guard_begin(&guard);

    rudnn_ffn_args_t args = args_of(&p, c);
    args.deterministic = 1;
    size_t ws_bytes = 0;
    ok = check_ok(log, label, "rudnn_ffn_workspace_size", rudnn_ffn_workspace_size(rt_queue, &args, &p.y.t, &ws_bytes));
    if (!ok)
        goto done;
    const size_t ws_buffer_bytes = ws_bytes + WS_GUARD;
    rt_assert_status(rudnn_buffer_create(rt_ctx, ws_buffer_bytes, &ws), RUDNN_STATUS_SUCCESS);
    {
        uint8_t *fill = rt_xmalloc(ws_buffer_bytes);
        memset(fill, 0xa5, ws_buffer_bytes);
        rt_assert_status(rudnn_buffer_write(rt_queue, ws, 0, fill, ws_buffer_bytes), RUDNN_STATUS_SUCCESS);
        free(fill);
    }
    const size_t bytes = (size_t)(p.rows * p.N2) * rudnn_dtype_size(p.ydt);

    ok &= call_ffn(&p, args, 1, ws, ws_bytes, ws_buffer_bytes, &y1, log, label, "explicit workspace, deterministic");
    if (y1)
        ok &= compare(&p, y1, log, label, "explicit workspace, deterministic", &worst);
    const char *kernel = c->cuda_kernel;
    if (c->cuda_kernel16 && (p.xdt == RUDNN_F16 || p.xdt == RUDNN_BF16) && cuda_wgmma())
        kernel = c->cuda_kernel16;
    if (y1 && kernel && !has_b2(c) && p.rows > 0 && cuda_tensor_cores()) {
        const int negate = kernel[0] == '!';
        const char *want = kernel + negate;
        if ((strcmp(last_ran, want) == 0) == negate) {
            rt_logf(log, "  %s: the second GEMM ran \"%s\", expected %s\"%s\"\n", label, last_ran,
                    negate ? "another kernel than " : "", want);
            ok = 0;
        }
    }
    ok &= call_ffn(&p, args, 1, NULL, 0, 0, &y2, log, label, "NULL workspace, deterministic");
    if (y1 && y2 && memcmp(y1, y2, bytes) != 0) {
        size_t i = 0;
        while (i < bytes && y1[i] == y2[i])
            i++;
        rt_logf(log, "  %s: deterministic runs differ (first at byte %zu of y)\n", label, i);
        ok = 0;
    }
    ok &= call_ffn(&p, args, 0, NULL, 0, 0, &y3, log, label, "NULL workspace, deterministic = 0");
    if (y3)
        ok &= compare(&p, y3, log, label, "deterministic = 0", &worst);

    int changed = rt_guard_changed(&guard);
    for (int i = 0; i < guard.count; i++)
        if (guard.items[i].changed)
            rt_logf(log, "  %s: the %s buffer was modified (it is only read)\n", label, guard.items[i].name);
    ok &= changed == 0;
    if (verbose)
        printf("  %-100s worst %.3f of allowed%s%s\n", label, worst, sc == FFN_REF_W8A8 ? ", ties " : "",
               sc == FFN_REF_W8A8 ? (p.ties ? "used" : "none") : "");

done:
    rt_guard_free(&guard);
    if (ws)
        rudnn_buffer_destroy(ws);
    free(y1);
    free(y2);
    free(y3);
    prob_free(&p);
    return ok;
}

/* ---- tests --------------------------------------------------------------------------------------- */

typedef struct param {
    char name[48];
    ffn_ref_scenario_t sc;
    rudnn_dtype_t dt; /* x's dtype; W8A8: the deq scales' */
    const tcase_t *cases;
    size_t count;
} param_t;

static void test_cases(void **state)
{
    const param_t *pa = *state;
    rt_log_t *log = rt_log_new();
    for (size_t i = 0; i < pa->count; i++)
        for (int act = 0; act < ACT_COUNT; act++)
            log->failures += !run_one(&pa->cases[i], pa->sc, pa->dt, (rudnn_ffn_activation_t)act, pa->name, (int)i,
                                      log);
    rt_log_finish_free(log, "(case, activation) pair(s)");
}

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

int main(int argc, char **argv)
{
    static const struct {
        const char *prefix, *suffix;
        ffn_ref_scenario_t sc;
        rudnn_dtype_t dt;
        const tcase_t *cases;
        size_t count;
    } list[] = {
        {"float", "", FFN_REF_FLOAT, RUDNN_F32, float_cases, COUNT_OF(float_cases)},
        {"float", "", FFN_REF_FLOAT, RUDNN_F16, float_cases, COUNT_OF(float_cases)},
        {"float", "", FFN_REF_FLOAT, RUDNN_BF16, float_cases, COUNT_OF(float_cases)},
        {"special", "", FFN_REF_FLOAT, RUDNN_F32, special_cases, COUNT_OF(special_cases)},
        {"special", "", FFN_REF_FLOAT, RUDNN_F16, special_cases, COUNT_OF(special_cases)},
        {"special", "", FFN_REF_FLOAT, RUDNN_BF16, special_cases, COUNT_OF(special_cases)},
        {"w8a8", "_deq", FFN_REF_W8A8, RUDNN_F32, w8a8_cases, COUNT_OF(w8a8_cases)},
        {"w8a8", "_deq", FFN_REF_W8A8, RUDNN_I64, w8a8_cases, COUNT_OF(w8a8_cases)},
        {"w8a8", "_deq", FFN_REF_W8A8, RUDNN_BF16, w8a8_cases, COUNT_OF(w8a8_cases)},
        {"weight_only", "", FFN_REF_WEIGHT_ONLY, RUDNN_F16, wo_cases, COUNT_OF(wo_cases)},
        {"weight_only", "", FFN_REF_WEIGHT_ONLY, RUDNN_BF16, wo_cases, COUNT_OF(wo_cases)},
    };
    static param_t params[COUNT_OF(list)];
    static struct CMUnitTest tests[COUNT_OF(list)];
    for (size_t i = 0; i < COUNT_OF(list); i++) {
        param_t *p = &params[i];
        snprintf(p->name, sizeof p->name, "%s/%s%s", list[i].prefix, rudnn_dtype_name(list[i].dt), list[i].suffix);
        p->sc = list[i].sc;
        p->dt = list[i].dt;
        p->cases = list[i].cases;
        p->count = list[i].count;
        tests[i] = (struct CMUnitTest){p->name, test_cases, NULL, NULL, p};
    }
    const char *v = getenv("RUDNN_TEST_VERBOSE");
    verbose = v && strcmp(v, "1") == 0;
    rt_set_filters(argc, argv);

    char group[64];
    snprintf(group, sizeof group, "ffn-%s", rt_requested_backend());
    rt_open_or_skip(group);
    return rt_exit_code(_cmocka_run_group_tests(group, tests, COUNT_OF(list), NULL, rt_group_teardown));
}
