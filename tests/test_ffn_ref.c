/* The FFN reference (tests/reference/ffn_ref.c) against hand-computed cases, and the int4
 * packing helper rudnn_ffn_pack_int4 (rudnn/ffn.h): its bytes, the round trip through the
 * reference's unpacking for every nibble value at even and odd columns, and its error paths
 * (status, a message naming the op and the rule, the output untouched). No backend needed.
 *
 * The expected values of the activations were computed with mpmath at 40 digits:
 *   h = [1, -1]:  gelu   0.84134474606854294859  -0.15865525393145705141
 *                 fastgelu 0.84579576593282129571 -0.15420423406717870429
 *                 silu   0.73105857863000487925  -0.26894142136999512075
 *   gated, a = value * act(gate) (ffn.h: the first half of h is the value, the last the gate):
 *   h = [2, -3] (value 2, gate -3): geglu 2 gelu(-3) = -0.0080993881897805671599,
 *                                   swiglu 2 silu(-3) = -0.28455523906540068527
 *   h = [-3, 2] (value -3, gate 2): geglu -3 gelu(2) = -5.8634992083109247568,
 *                                   swiglu -3 silu(2) = -5.2847824678672946644
 *   (gelu(-3) = -0.00404969409489028358, silu(-3) = -0.14227761953270034264,
 *    gelu(2) = 1.9544997361036415856, silu(2) = 1.7615941559557648881). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "reference/ffn_ref.h"

#define SENTINEL (-12345.0)

static void assert_close(double got, double want)
{
    double tol = 1e-14 * (fabs(want) > 1.0 ? fabs(want) : 1.0);
    if (got != want && !(fabs(got - want) <= tol)) /* equal infinities pass */
        fail_msg("got %.17g, want %.17g", got, want);
}

static void fill(double *v, size_t n, double value)
{
    for (size_t i = 0; i < n; i++)
        v[i] = value;
}

/* ---- activations ----------------------------------------------------------------------------- */

static void test_act_scalar(void **state)
{
    (void)state;
    assert_close(ffn_ref_act_scalar(RUDNN_FFN_GELU, 1.0), 0.84134474606854294859);
    assert_close(ffn_ref_act_scalar(RUDNN_FFN_GELU, -1.0), -0.15865525393145705141);
    assert_close(ffn_ref_act_scalar(RUDNN_FFN_FASTGELU, 1.0), 0.84579576593282129571);
    assert_close(ffn_ref_act_scalar(RUDNN_FFN_FASTGELU, -1.0), -0.15420423406717870429);
    assert_close(ffn_ref_act_scalar(RUDNN_FFN_SILU, 1.0), 0.73105857863000487925);
    assert_close(ffn_ref_act_scalar(RUDNN_FFN_SILU, -1.0), -0.26894142136999512075);
    assert_close(ffn_ref_act_scalar(RUDNN_FFN_RELU, 1.5), 1.5);
    assert_close(ffn_ref_act_scalar(RUDNN_FFN_RELU, -1.5), 0.0);
    /* the gated ones' gate functions */
    assert_close(ffn_ref_act_scalar(RUDNN_FFN_GEGLU, -1.0), -0.15865525393145705141);
    assert_close(ffn_ref_act_scalar(RUDNN_FFN_SWIGLU, 1.0), 0.73105857863000487925);
    assert_close(ffn_ref_act_scalar(RUDNN_FFN_REGLU, -2.0), 0.0);
    /* NaN stays NaN; inf gives the limits */
    for (int act = RUDNN_FFN_GELU; act <= RUDNN_FFN_REGLU; act++) {
        assert_true(isnan(ffn_ref_act_scalar((rudnn_ffn_activation_t)act, NAN)));
        assert_true(ffn_ref_act_scalar((rudnn_ffn_activation_t)act, INFINITY) == INFINITY);
        assert_true(ffn_ref_act_scalar((rudnn_ffn_activation_t)act, -INFINITY) == 0.0);
    }
    /* large negative inputs: no overflow in the sigmoid */
    assert_true(fabs(ffn_ref_act_scalar(RUDNN_FFN_SILU, -1000.0)) < 1e-300);
    assert_true(fabs(ffn_ref_act_scalar(RUDNN_FFN_FASTGELU, -1000.0)) < 1e-300);
    assert_close(ffn_ref_act_scalar(RUDNN_FFN_SILU, 1000.0), 1000.0);
    assert_int_equal(ffn_ref_is_gated(RUDNN_FFN_SWIGLU), 1);
    assert_int_equal(ffn_ref_is_gated(RUDNN_FFN_SILU), 0);
}

/* ---- non-quantized, one row: x = [1, -2], W1 = [[1, 0.5], [0.25, -1]] gives x W1 = [0.5, 2.5] ---- */

static const double x12[2] = {1.0, -2.0};
static const double w1_22[4] = {1.0, 0.5, 0.25, -1.0};

/* Non-gated: b1 = [0.5, -3.5] -> h = [1, -1]; W2 = [[2, 1], [-1, 3]], b2 = [0.25, -0.5]:
 * y = [2 a0 - a1 + 0.25, a0 + 3 a1 - 0.5]. */
static void test_float_plain(void **state)
{
    (void)state;
    static const double b1[2] = {0.5, -3.5};
    static const double w2[4] = {2.0, 1.0, -1.0, 3.0};
    static const double b2[2] = {0.25, -0.5};
    static const struct {
        rudnn_ffn_activation_t act;
        double a0, a1;
    } cases[] = {
        {RUDNN_FFN_GELU, 0.84134474606854294859, -0.15865525393145705141},
        {RUDNN_FFN_FASTGELU, 0.84579576593282129571, -0.15420423406717870429},
        {RUDNN_FFN_RELU, 1.0, 0.0},
        {RUDNN_FFN_SILU, 0.73105857863000487925, -0.26894142136999512075},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ffn_ref_args_t a = {.scenario = FFN_REF_FLOAT, .activation = cases[i].act, .m = 1, .k1 = 2, .n1 = 2,
                            .k2 = 2, .n2 = 2, .x = x12, .w1 = w1_22, .w2 = w2, .b1 = b1, .b2 = b2};
        double y[2], hidden[2];
        assert_int_equal(ffn_ref(&a, y, hidden), 1);
        assert_close(hidden[0], cases[i].a0);
        assert_close(hidden[1], cases[i].a1);
        assert_close(y[0], 2.0 * cases[i].a0 - cases[i].a1 + 0.25);
        assert_close(y[1], cases[i].a0 + 3.0 * cases[i].a1 - 0.5);
    }
    /* the literal y of gelu and relu too (not only through a0, a1) */
    ffn_ref_args_t a = {.scenario = FFN_REF_FLOAT, .activation = RUDNN_FFN_GELU, .m = 1, .k1 = 2, .n1 = 2,
                        .k2 = 2, .n2 = 2, .x = x12, .w1 = w1_22, .w2 = w2, .b1 = b1, .b2 = b2};
    double y[2];
    assert_int_equal(ffn_ref(&a, y, NULL), 1);
    assert_close(y[0], 2.0913447460685429486);
    assert_close(y[1], -0.13462101572582820566);
    a.activation = RUDNN_FFN_RELU;
    assert_int_equal(ffn_ref(&a, y, NULL), 1);
    assert_close(y[0], 2.25);
    assert_close(y[1], 0.5);
    /* no biases: h = [0.5, 2.5], relu keeps both; y = [2 * 0.5 - 2.5, 0.5 + 7.5] */
    a.b1 = a.b2 = NULL;
    assert_int_equal(ffn_ref(&a, y, NULL), 1);
    assert_close(y[0], -1.5);
    assert_close(y[1], 8.0);
}

/* Gated (N1 = 2, K2 = 1), a = h[0] * act(h[1]) (value first, gate last); W2 = [[0.5, -2]],
 * b2 = [1, 0]: y = [0.5 a + 1, -2 a].
 *   b1 = [1.5, -5.5] -> h = [2, -3] (value 2, gate -3): reglu's gate is cut: a = 0, y = [1, 0];
 *   b1 = [-3.5, -0.5] -> h = [-3, 2] (value -3, gate 2): the negative value passes unactivated.
 * Either b1 gives other numbers with the halves the other way round. */
static void test_float_gated(void **state)
{
    (void)state;
    static const double b1s[2][2] = {{1.5, -5.5}, {-3.5, -0.5}};
    static const double w2[2] = {0.5, -2.0};
    static const double b2[2] = {1.0, 0.0};
    static const struct {
        int b1;
        rudnn_ffn_activation_t act;
        double a, y0, y1;
    } cases[] = {
        {0, RUDNN_FFN_GEGLU, -0.0080993881897805671599, 0.99595030590510971642, 0.01619877637956113432},
        {0, RUDNN_FFN_SWIGLU, -0.28455523906540068527, 0.85772238046729965736, 0.56911047813080137055},
        {0, RUDNN_FFN_REGLU, 0.0, 1.0, 0.0},
        {1, RUDNN_FFN_GEGLU, -5.8634992083109247568, -1.9317496041554623784, 11.726998416621849514},
        {1, RUDNN_FFN_SWIGLU, -5.2847824678672946644, -1.6423912339336473322, 10.569564935734589329},
        {1, RUDNN_FFN_REGLU, -6.0, -2.0, 12.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ffn_ref_args_t a = {.scenario = FFN_REF_FLOAT, .activation = cases[i].act, .m = 1, .k1 = 2, .n1 = 2,
                            .k2 = 1, .n2 = 2, .x = x12, .w1 = w1_22, .w2 = w2, .b1 = b1s[cases[i].b1], .b2 = b2};
        double y[2], hidden[1];
        assert_int_equal(ffn_ref(&a, y, hidden), 1);
        assert_close(hidden[0], cases[i].a);
        assert_close(y[0], cases[i].y0);
        assert_close(y[1], cases[i].y1);
    }
    /* ffn_ref_activate_row directly, K2 = 2: h = [value 3, value -4, gate -1, gate 5] under reglu:
     * a = [3 relu(-1), -4 relu(5)] = [0, -20] */
    static const double h[4] = {3.0, -4.0, -1.0, 5.0};
    double act[2];
    ffn_ref_activate_row(RUDNN_FFN_REGLU, h, 4, act);
    assert_close(act[0], 0.0);
    assert_close(act[1], -20.0);
}

/* The roundings: h = a = 1 + 3 * 2^-11 (relu), W2 = [2048]: exact y = 2051; rounded to F16
 * (spacing 2^-10 above 1) a is a tie between 1 + 2^-10 and 1 + 2^-9, to even: 1 + 2^-9, y = 2052;
 * to BF16 (spacing 2^-7) a is 1, y = 2048. */
static void test_float_roundings(void **state)
{
    (void)state;
    static const double x[1] = {1.0};
    static const double w1[1] = {1.0 + 3.0 * 0x1p-11};
    static const double w2[1] = {2048.0};
    ffn_ref_args_t a = {.scenario = FFN_REF_FLOAT, .activation = RUDNN_FFN_RELU, .m = 1, .k1 = 1, .n1 = 1,
                        .k2 = 1, .n2 = 1, .x = x, .w1 = w1, .w2 = w2};
    double y[1], hidden[1];
    assert_int_equal(ffn_ref(&a, y, hidden), 1);
    assert_close(y[0], 2051.0);
    assert_close(hidden[0], 1.0 + 3.0 * 0x1p-11);
    a.round_hidden = FFN_REF_ROUND_F16;
    assert_int_equal(ffn_ref(&a, y, hidden), 1);
    assert_close(y[0], 2052.0);
    assert_close(hidden[0], 1.0 + 0x1p-9);
    a.round_hidden = FFN_REF_ROUND_BF16;
    assert_int_equal(ffn_ref(&a, y, NULL), 1);
    assert_close(y[0], 2048.0);
    a.round_hidden = FFN_REF_ROUND_F32; /* exact in FP32 */
    assert_int_equal(ffn_ref(&a, y, NULL), 1);
    assert_close(y[0], 2051.0);
    /* round_pre rounds h before the activation: the same here (relu of a positive value) */
    a.round_hidden = FFN_REF_ROUND_NONE;
    a.round_pre = FFN_REF_ROUND_F16;
    assert_int_equal(ffn_ref(&a, y, NULL), 1);
    assert_close(y[0], 2052.0);
    /* ffn_ref_round itself */
    assert_close(ffn_ref_round(FFN_REF_ROUND_F32, 1.0 + 0x1p-30), 1.0);
    assert_close(ffn_ref_round(FFN_REF_ROUND_F16, 65520.0), INFINITY);
    assert_close(ffn_ref_round(FFN_REF_ROUND_BF16, 1.0 + 0x1p-8), 1.0);    /* tie, to even */
    assert_close(ffn_ref_round(FFN_REF_ROUND_BF16, 1.0 + 0x1p-7 + 0x1p-8), 1.0 + 0x1p-6); /* tie, to even */
}

/* ffn_ref_precision_rounds against ffn.h's rudnn_ffn_precision_t, every scenario, dtype and value. */
static void test_precision_table(void **state)
{
    (void)state;
    enum { N = FFN_REF_ROUND_NONE, F32 = FFN_REF_ROUND_F32, F16 = FFN_REF_ROUND_F16, BF16 = FFN_REF_ROUND_BF16 };
    static const struct {
        ffn_ref_scenario_t scenario;
        rudnn_dtype_t dtype;
        int precision, ok, pre, hidden;
    } cases[] = {
        {FFN_REF_FLOAT, RUDNN_F16, 0, 1, F32, F16},        {FFN_REF_FLOAT, RUDNN_F16, 1, 1, F16, F16},
        {FFN_REF_FLOAT, RUDNN_BF16, 0, 1, F32, BF16},      {FFN_REF_FLOAT, RUDNN_BF16, 1, 1, BF16, BF16},
        {FFN_REF_FLOAT, RUDNN_F32, 0, 1, F32, F32},        {FFN_REF_FLOAT, RUDNN_F32, 1, 1, F32, F32},
        {FFN_REF_WEIGHT_ONLY, RUDNN_F16, 0, 1, F32, F16},  {FFN_REF_WEIGHT_ONLY, RUDNN_F16, 1, 1, F32, F16},
        {FFN_REF_WEIGHT_ONLY, RUDNN_BF16, 0, 1, F32, BF16}, {FFN_REF_WEIGHT_ONLY, RUDNN_BF16, 1, 1, F32, BF16},
        {FFN_REF_W8A8, RUDNN_I8, 0, 1, F32, F32},          {FFN_REF_W8A8, RUDNN_I8, 1, 1, F32, F32},
        /* dtypes a scenario does not take, precisions other than 0 and 1 */
        {FFN_REF_FLOAT, RUDNN_I8, 0, 0, N, N},             {FFN_REF_WEIGHT_ONLY, RUDNN_F32, 0, 0, N, N},
        {FFN_REF_WEIGHT_ONLY, RUDNN_I8, 1, 0, N, N},       {FFN_REF_W8A8, RUDNN_F16, 0, 0, N, N},
        {FFN_REF_FLOAT, RUDNN_F16, 2, 0, N, N},            {FFN_REF_FLOAT, RUDNN_F16, -1, 0, N, N},
        {(ffn_ref_scenario_t)3, RUDNN_F16, 0, 0, N, N},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ffn_ref_round_t pre = (ffn_ref_round_t)99, hidden = (ffn_ref_round_t)99;
        int rc = ffn_ref_precision_rounds(cases[i].scenario, cases[i].dtype, (rudnn_ffn_precision_t)cases[i].precision,
                                          &pre, &hidden);
        if (!cases[i].ok) {
            if (rc != -1 || (int)pre != 99 || (int)hidden != 99)
                fail_msg("case %zu: rc %d pre %d hidden %d, want -1 and nothing written", i, rc, (int)pre,
                         (int)hidden);
            continue;
        }
        if (rc != 0 || (int)pre != cases[i].pre || (int)hidden != cases[i].hidden)
            fail_msg("case %zu: rc %d pre %d hidden %d, want 0, %d, %d", i, rc, (int)pre, (int)hidden, cases[i].pre,
                     cases[i].hidden);
    }
}

/* The precisions through the op. reglu, x = [1], W1 = [[1 + 2^-11, 3]]: h = [value 1 + 2^-11, gate 3];
 * W2 = [[512]]. Exact: a = 3 + 3 * 2^-11, y = 1536 + 0.75.
 *   F16 high precision (h FP32, a to F16 once): F16's spacing in [2, 4) is 2^-9, a = 3 + 0.75 * 2^-9
 *     rounds to 3 + 2^-9: y = 1537;
 *   F16 high performance (h to F16 first): 1 + 2^-11 is a tie between 1 and 1 + 2^-10, to even: 1;
 *     a = 3 (exact in F16): y = 1536;
 *   BF16 (spacing 2^-6 in [2, 4)): a rounds to 3, y = 1536 (high performance: h's 1 + 2^-11 rounds
 *     to 1 first, a = 3, the same);
 *   F32: a = 3 + 3 * 2^-11 is exact (13 significant bits), y = 1536.75. */
static void test_float_precision(void **state)
{
    (void)state;
    static const double x[1] = {1.0};
    static const double w1[2] = {1.0 + 0x1p-11, 3.0};
    static const double w2[1] = {512.0};
    static const struct {
        rudnn_dtype_t dtype;
        rudnn_ffn_precision_t precision;
        double a, y;
    } cases[] = {
        {RUDNN_F16, RUDNN_FFN_HIGH_PRECISION, 3.0 + 0x1p-9, 1537.0},
        {RUDNN_F16, RUDNN_FFN_HIGH_PERFORMANCE, 3.0, 1536.0},
        {RUDNN_BF16, RUDNN_FFN_HIGH_PRECISION, 3.0, 1536.0},
        {RUDNN_BF16, RUDNN_FFN_HIGH_PERFORMANCE, 3.0, 1536.0},
        {RUDNN_F32, RUDNN_FFN_HIGH_PRECISION, 3.0 + 3.0 * 0x1p-11, 1536.75},
        {RUDNN_F32, RUDNN_FFN_HIGH_PERFORMANCE, 3.0 + 3.0 * 0x1p-11, 1536.75},
    };
    ffn_ref_args_t a = {.scenario = FFN_REF_FLOAT, .activation = RUDNN_FFN_REGLU, .m = 1, .k1 = 1, .n1 = 2,
                        .k2 = 1, .n2 = 1, .x = x, .w1 = w1, .w2 = w2};
    double y[1], hidden[1];
    assert_int_equal(ffn_ref(&a, y, hidden), 1);
    assert_close(hidden[0], 3.0 + 3.0 * 0x1p-11);
    assert_close(y[0], 1536.75);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(ffn_ref_precision_rounds(FFN_REF_FLOAT, cases[i].dtype, cases[i].precision, &a.round_pre,
                                                  &a.round_hidden),
                         0);
        assert_int_equal(ffn_ref(&a, y, hidden), 1);
        assert_close(hidden[0], cases[i].a);
        assert_close(y[0], cases[i].y);
    }
}

/* ---- W8A8 ---------------------------------------------------------------------------------------- */

static void test_requant(void **state)
{
    (void)state;
    static const struct {
        double v;
        int q;
    } cases[] = {
        {0.5, 0},     {1.5, 2},     {2.5, 2},      {-0.5, 0},     {-1.5, -2},     {-2.5, -2},
        {3.4999, 3},  {-3.5, -4},   {126.5, 126},  {127.4, 127},  {127.5, 127},   {1e9, 127},
        {-127.5, -128}, {-128.5, -128}, {-129.0, -128}, {-1e300, -128}, {0.0, 0}, {-0.0, 0},
        {INFINITY, 127}, {-INFINITY, -128}, {NAN, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (ffn_ref_requant_i8(cases[i].v) != cases[i].q)
            fail_msg("requant(%g) = %d, want %d", cases[i].v, ffn_ref_requant_i8(cases[i].v), cases[i].q);
    }
}

/* reglu, K1 = N2 = 2, K2 = 4 (N1 = 8), x = [2, 1]: acc = 2 W1[0] + W1[1] + b1 =
 *   values (columns 0-3) [20 + 1, -6 + 1, 200 + 100 + 100, -256 - 44 - 300] = [21, -5, 400, -600],
 *   gates (columns 4-7) [2, 2, 2, 2]; deq1 = 0.5 per tensor:
 *   h = [10.5, -2.5, 200, -300, 1, 1, 1, 1], a = value * relu(gate) = [10.5, -2.5, 200, -300]
 *   (with the halves the other way round a would be [10.5, 0, 200, 0]).
 * scale 1, offset 0: q = [10, -2, 127, -128] (ties to even, saturation both ways).
 * scale 0.5, offset 0.25: a * 0.5 + 0.25 = [5.5, -1, 100.25, -149.75]: q = [6, -1, 100, -128].
 * W2 = [[1, 2], [3, 0], [0, 1], [1, -1]], b2 = [4, -5], deq2 = [0.25, 2] per channel:
 *   first:  acc2 = [10 - 6 - 128 + 4, 20 + 127 + 128 - 5] = [-120, 270], y = [-30, 540];
 *   second: acc2 = [6 - 3 - 128 + 4, 12 + 100 + 128 - 5] = [-121, 235], y = [-30.25, 470]. */
static const int8_t q_x[2] = {2, 1};
static const int8_t q_w1[16] = {
    10, -3, 100, -128, 1, 0, -1, 0, /* row 0: values | gates */
    1,  1,  100, -44,  0, 2, 4,  0, /* row 1 */
};
static const int32_t q_b1[8] = {0, 0, 100, -300, 0, 0, 0, 2};
static const int8_t q_w2[8] = {1, 2, 3, 0, 0, 1, 1, -1};
static const int32_t q_b2[2] = {4, -5};
static const double q_deq1[1] = {0.5};
static const double q_deq2[2] = {0.25, 2.0};

static void test_w8a8(void **state)
{
    (void)state;
    double scale[1] = {1.0}, offset[1] = {0.0};
    ffn_ref_args_t a = {.scenario = FFN_REF_W8A8, .activation = RUDNN_FFN_REGLU, .m = 1, .k1 = 2, .n1 = 8,
                        .k2 = 4, .n2 = 2, .x_i8 = q_x, .w1_i8 = q_w1, .w2_i8 = q_w2, .b1_i32 = q_b1,
                        .b2_i32 = q_b2, .scale = scale, .offset = offset, .deq_scale1 = q_deq1,
                        .deq_scale2 = q_deq2, .deq1_per_channel = 0, .deq2_per_channel = 1};
    double y[2], hidden[4];
    assert_int_equal(ffn_ref(&a, y, hidden), 1);
    static const double q_first[4] = {10, -2, 127, -128};
    for (int j = 0; j < 4; j++)
        assert_close(hidden[j], q_first[j]);
    assert_close(y[0], -30.0);
    assert_close(y[1], 540.0);

    scale[0] = 0.5;
    offset[0] = 0.25;
    assert_int_equal(ffn_ref(&a, y, hidden), 1);
    static const double q_second[4] = {6, -1, 100, -128};
    for (int j = 0; j < 4; j++)
        assert_close(hidden[j], q_second[j]);
    assert_close(y[0], -30.25);
    assert_close(y[1], 470.0);

    /* deq1 per channel, all 0.5, is the same; deq2 per tensor 2: y = 2 acc2 */
    static const double deq1_pc[8] = {0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
    static const double deq2_pt[1] = {2.0};
    a.deq_scale1 = deq1_pc;
    a.deq1_per_channel = 1;
    a.deq_scale2 = deq2_pt;
    a.deq2_per_channel = 0;
    assert_int_equal(ffn_ref(&a, y, NULL), 1);
    assert_close(y[0], -242.0);
    assert_close(y[1], 470.0);
    /* no biases: acc = values [21, -5, 300, -300], gates [2, 2, 2, 0] -> h = [10.5, -2.5, 150,
     * -150, 1, 1, 1, 0], a = [10.5, -2.5, 150, -0] (-150 relu(0)), q (scale 0.5, offset 0.25) =
     * [6, -1, 75, 0]: acc2 = [6 - 3, 12 + 75] = [3, 87], y = [6, 174] */
    a.b1_i32 = NULL;
    a.b2_i32 = NULL;
    assert_int_equal(ffn_ref(&a, y, hidden), 1);
    static const double q_nobias[4] = {6, -1, 75, 0};
    for (int j = 0; j < 4; j++)
        assert_close(hidden[j], q_nobias[j]);
    assert_close(y[0], 6.0);
    assert_close(y[1], 174.0);
}

/* A per-channel scale [K2] (one per column of a) on test_w8a8's a = [10.5, -2.5, 200, -300]:
 * scale [1, 2, 0.5, 0.25], offset 0.5: a scale + offset = [11, -4.5, 100.5, -74.5], ties to even:
 * q = [11, -4, 100, -74]; acc2 = [11 - 12 - 74 + 4, 22 + 100 + 74 - 5] = [-71, 191], deq2 [0.25, 2]:
 * y = [-17.75, 382]. */
static void test_w8a8_scale_per_channel(void **state)
{
    (void)state;
    static const double scale[4] = {1.0, 2.0, 0.5, 0.25}, offset[1] = {0.5};
    ffn_ref_args_t a = {.scenario = FFN_REF_W8A8, .activation = RUDNN_FFN_REGLU, .m = 1, .k1 = 2, .n1 = 8,
                        .k2 = 4, .n2 = 2, .x_i8 = q_x, .w1_i8 = q_w1, .w2_i8 = q_w2, .b1_i32 = q_b1,
                        .b2_i32 = q_b2, .scale = scale, .offset = offset, .scale_per_channel = 1,
                        .deq_scale1 = q_deq1, .deq_scale2 = q_deq2, .deq2_per_channel = 1};
    double y[2], hidden[4];
    assert_int_equal(ffn_ref(&a, y, hidden), 1);
    static const double q[4] = {11, -4, 100, -74};
    for (int j = 0; j < 4; j++)
        assert_close(hidden[j], q[j]);
    assert_close(y[0], -17.75);
    assert_close(y[1], 382.0);
}

/* I64 deq scales: the F32 of the low 32 bits, all of it; the high 32 bits ignored. */
static void test_deq_scale_i64(void **state)
{
    (void)state;
    assert_true(ffn_ref_deq_scale_i64(0x3F800000) == 1.0);
    assert_true(ffn_ref_deq_scale_i64(0xBF000000) == -0.5);
    /* aclnnTransQuantParam's bit 46, and a high word of ones (a negative int64): ignored */
    assert_true(ffn_ref_deq_scale_i64(INT64_C(1) << 46 | 0x3FC00000) == 1.5);
    assert_true(ffn_ref_deq_scale_i64(-(INT64_C(1) << 32) + 0x40490FDB) == 3.1415927410125732421875);
    /* the low 13 bits of the mantissa count (Ascend's hardware would read 1) */
    assert_true(ffn_ref_deq_scale_i64(0x3F800001) == 1.0 + 0x1p-23);
    assert_true(ffn_ref_deq_scale_i64(0x3F801FFF) == 1.0 + 0x1FFFp-23);
}

/* ---- weight-only ------------------------------------------------------------------------------------
 * int4, relu, M = 1, K1 = N2 = 4, N1 = K2 = 2.
 * W1 [4, 2] per group (G = 2: rows 0-1, 2-3): values [[7, -8], [-1, 2], [3, -4], [-8, 5]],
 *   scale [[0.5, 0.25], [2, -1]], offset [[1, 0], [-0.5, 2]]:
 *   W1' = [[4, -2], [0, 0.5], [5, 2], [-17, -7]].
 * x = [1, 2, -1, 0.5]: x W1' = [4 - 5 - 8.5, -2 + 1 - 2 - 3.5] = [-9.5, -6.5]; b1 = [12, 8.5]:
 *   h = [2.5, 2], a = [2.5, 2].
 * W2 [2, 4] per channel: values [[1, -2, 7, -8], [-3, 4, 0, 6]], scale [1, 0.5, -2, 0.25], no offset:
 *   W2' = [[1, -1, -14, -2], [-3, 2, 0, 1.5]]; a W2' = [2.5 - 6, -2.5 + 4, -35, -5 + 3];
 *   b2 = [0.5, 0, 0, 1]: y = [-3, 1.5, -35, -1]. */
static void test_weight_only_int4_group(void **state)
{
    (void)state;
    static const int8_t w1v[8] = {7, -8, -1, 2, 3, -4, -8, 5};
    static const int8_t w2v[8] = {1, -2, 7, -8, -3, 4, 0, 6};
    uint8_t w1p[4], w2p[4];
    assert_int_equal(rudnn_ffn_pack_int4(w1v, 4, 2, w1p), RUDNN_STATUS_SUCCESS);
    assert_int_equal(rudnn_ffn_pack_int4(w2v, 2, 4, w2p), RUDNN_STATUS_SUCCESS);
    /* the storage, by hand: low nibble = even column */
    static const uint8_t w1_bytes[4] = {0x87, 0x2f, 0xc3, 0x58};
    static const uint8_t w2_bytes[4] = {0xe1, 0x87, 0x4d, 0x60};
    assert_memory_equal(w1p, w1_bytes, 4);
    assert_memory_equal(w2p, w2_bytes, 4);
    int8_t w1[8], w2[8];
    ffn_ref_unpack_int4(w1p, 4, 2, w1);
    ffn_ref_unpack_int4(w2p, 2, 4, w2);
    assert_memory_equal(w1, w1v, 8);
    assert_memory_equal(w2, w2v, 8);

    static const double x[4] = {1.0, 2.0, -1.0, 0.5};
    static const double s1[4] = {0.5, 0.25, 2.0, -1.0};
    static const double o1[4] = {1.0, 0.0, -0.5, 2.0};
    static const double b1[2] = {12.0, 8.5};
    static const double s2[4] = {1.0, 0.5, -2.0, 0.25};
    static const double b2[4] = {0.5, 0.0, 0.0, 1.0};
    ffn_ref_args_t a = {.scenario = FFN_REF_WEIGHT_ONLY, .activation = RUDNN_FFN_RELU, .m = 1, .k1 = 4,
                        .n1 = 2, .k2 = 2, .n2 = 4, .x = x, .w1_i8 = w1, .w2_i8 = w2, .b1 = b1, .b2 = b2,
                        .antiquant_scale1 = s1, .antiquant_offset1 = o1, .antiquant_groups1 = 2,
                        .antiquant_scale2 = s2, .antiquant_groups2 = 1, .weights_int4 = 1};
    double y[4], hidden[2];
    assert_int_equal(ffn_ref(&a, y, hidden), 1);
    assert_close(hidden[0], 2.5);
    assert_close(hidden[1], 2.0);
    static const double want[4] = {-3.0, 1.5, -35.0, -1.0};
    for (int c = 0; c < 4; c++)
        assert_close(y[c], want[c]);
    /* groups 0 means per channel too */
    a.antiquant_groups2 = 0;
    assert_int_equal(ffn_ref(&a, y, NULL), 1);
    for (int c = 0; c < 4; c++)
        assert_close(y[c], want[c]);
    /* per group only for I4 weights; one group is per channel */
    a.weights_int4 = 0;
    assert_int_equal(ffn_ref_rows(&a), -1);
    a.antiquant_groups1 = 1;
    assert_int_equal(ffn_ref_rows(&a), 1);
    a.weights_int4 = 1;
    /* K1 = 4 is not divisible by 3 groups */
    a.antiquant_groups1 = 3;
    assert_int_equal(ffn_ref_rows(&a), -1);
}

/* int8 per channel with round_weight: W1 = [3], scale [1 + 2^-11]: W1' = 3 + 3 * 2^-11, which F16
 * (spacing 2^-9 in [2, 4)) rounds to 3 + 2^-9; x = [1], relu, W2 = [1], scale [1024]:
 * y = 3072 + 1.5 exact, 3072 + 2 with the weights rounded to F16. */
static void test_weight_only_round(void **state)
{
    (void)state;
    static const double x[1] = {1.0};
    static const int8_t w1[1] = {3}, w2[1] = {1};
    static const double s1[1] = {1.0 + 0x1p-11}, s2[1] = {1024.0};
    ffn_ref_args_t a = {.scenario = FFN_REF_WEIGHT_ONLY, .activation = RUDNN_FFN_RELU, .m = 1, .k1 = 1,
                        .n1 = 1, .k2 = 1, .n2 = 1, .x = x, .w1_i8 = w1, .w2_i8 = w2, .antiquant_scale1 = s1,
                        .antiquant_scale2 = s2};
    double y[1];
    assert_int_equal(ffn_ref(&a, y, NULL), 1);
    assert_close(y[0], 3073.5);
    a.round_weight = FFN_REF_ROUND_F16;
    assert_int_equal(ffn_ref(&a, y, NULL), 1);
    assert_close(y[0], 3074.0);
}

/* ---- expert form ------------------------------------------------------------------------------------
 * K1 = N1 = K2 = N2 = 1, relu, E = 3, M = 4, counts [1, 0, 2]: row 0 to expert 0 (W1 2, W2 3:
 * y = 6), none to expert 1, rows 1-2 to expert 2 (W1 -1, b1 2.5, W2 2, b2 1: h = 0.5 -> 2,
 * h = -0.5 -> 1); row 3 is past the sum: not written. */
static void test_experts(void **state)
{
    (void)state;
    static const double x[4] = {1.0, 2.0, 3.0, 4.0};
    static const double w1[3] = {2.0, 100.0, -1.0}, w2[3] = {3.0, 100.0, 2.0};
    static const double b1[3] = {0.0, 100.0, 2.5}, b2[3] = {0.0, 100.0, 1.0};
    int64_t tokens[3] = {1, 0, 2};
    ffn_ref_args_t a = {.scenario = FFN_REF_FLOAT, .activation = RUDNN_FFN_RELU, .m = 4, .k1 = 1, .n1 = 1,
                        .k2 = 1, .n2 = 1, .experts = 3, .expert_tokens = tokens, .x = x, .w1 = w1, .w2 = w2,
                        .b1 = b1, .b2 = b2};
    double y[4], hidden[4];
    fill(y, 4, SENTINEL);
    fill(hidden, 4, SENTINEL);
    assert_int_equal(ffn_ref(&a, y, hidden), 3);
    assert_close(y[0], 6.0);
    assert_close(y[1], 2.0);
    assert_close(y[2], 1.0);
    assert_true(y[3] == SENTINEL);
    assert_close(hidden[1], 0.5);
    assert_true(hidden[3] == SENTINEL);

    /* the same as running totals */
    int64_t totals[3] = {1, 1, 3};
    a.expert_tokens = totals;
    a.expert_tokens_totals = 1;
    fill(y, 4, SENTINEL);
    assert_int_equal(ffn_ref(&a, y, NULL), 3);
    assert_close(y[0], 6.0);
    assert_close(y[1], 2.0);
    assert_close(y[2], 1.0);
    assert_true(y[3] == SENTINEL);

    /* every row to expert 1 (its weights 100: y = relu(100 x + 100) * 100 + 100) */
    int64_t all1[3] = {0, 4, 0};
    a.expert_tokens = all1;
    a.expert_tokens_totals = 0;
    assert_int_equal(ffn_ref(&a, y, NULL), 4);
    for (int r = 0; r < 4; r++)
        assert_close(y[r], (100.0 * x[r] + 100.0) * 100.0 + 100.0);

    /* broken counts: nothing written, -1 */
    int64_t too_many[3] = {2, 2, 1}, negative[3] = {1, -1, 2}, decreasing[3] = {2, 1, 3}, past[3] = {1, 2, 5};
    const int64_t *bad[4] = {too_many, negative, decreasing, past};
    int as_totals[4] = {0, 0, 1, 1};
    for (int i = 0; i < 4; i++) {
        a.expert_tokens = bad[i];
        a.expert_tokens_totals = as_totals[i];
        fill(y, 4, SENTINEL);
        assert_int_equal(ffn_ref(&a, y, NULL), -1);
        for (int r = 0; r < 4; r++)
            assert_true(y[r] == SENTINEL);
    }
    a.expert_tokens = NULL;
    a.expert_tokens_totals = 0;
    assert_int_equal(ffn_ref_rows(&a), -1);
}

/* W8A8 in the expert form: the scale, offset and deq scales are per expert. Two experts with the
 * weights of test_w8a8, the second with scale 0.5, offset 0.25 (see there), one row each. */
static void test_experts_w8a8(void **state)
{
    (void)state;
    int8_t x[4] = {2, 1, 2, 1};
    int8_t w1[32], w2[16];
    int32_t b1[16], b2[4];
    for (int e = 0; e < 2; e++) {
        memcpy(w1 + 16 * e, q_w1, sizeof q_w1);
        memcpy(w2 + 8 * e, q_w2, sizeof q_w2);
        memcpy(b1 + 8 * e, q_b1, sizeof q_b1);
        memcpy(b2 + 2 * e, q_b2, sizeof q_b2);
    }
    double scale[2] = {1.0, 0.5}, offset[2] = {0.0, 0.25}, deq1[2] = {0.5, 0.5}, deq2[4] = {0.25, 2.0, 0.25, 2.0};
    int64_t tokens[2] = {1, 1};
    ffn_ref_args_t a = {.scenario = FFN_REF_W8A8, .activation = RUDNN_FFN_REGLU, .m = 2, .k1 = 2, .n1 = 8,
                        .k2 = 4, .n2 = 2, .experts = 2, .expert_tokens = tokens, .x_i8 = x, .w1_i8 = w1,
                        .w2_i8 = w2, .b1_i32 = b1, .b2_i32 = b2, .scale = scale, .offset = offset,
                        .deq_scale1 = deq1, .deq_scale2 = deq2, .deq2_per_channel = 1};
    double y[4];
    assert_int_equal(ffn_ref(&a, y, NULL), 2);
    assert_close(y[0], -30.0);
    assert_close(y[1], 540.0);
    assert_close(y[2], -30.25);
    assert_close(y[3], 470.0);
    /* per-channel scales [E, K2]: expert 0 all 1 with offset 0 (test_w8a8's first case), expert 1
     * test_w8a8_scale_per_channel's */
    double scale_pc[8] = {1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 0.5, 0.25}, offset_pc[2] = {0.0, 0.5};
    a.scale = scale_pc;
    a.offset = offset_pc;
    a.scale_per_channel = 1;
    assert_int_equal(ffn_ref(&a, y, NULL), 2);
    assert_close(y[0], -30.0);
    assert_close(y[1], 540.0);
    assert_close(y[2], -17.75);
    assert_close(y[3], 382.0);
}

/* The contract's shape relations and required arrays, as ffn_ref_rows checks them. */
static void test_rows_contract(void **state)
{
    (void)state;
    static const double w2[4] = {2.0, 1.0, -1.0, 3.0};
    ffn_ref_args_t good = {.scenario = FFN_REF_FLOAT, .activation = RUDNN_FFN_SILU, .m = 1, .k1 = 2, .n1 = 2,
                           .k2 = 2, .n2 = 2, .x = x12, .w1 = w1_22, .w2 = w2};
    assert_int_equal(ffn_ref_rows(&good), 1);
    ffn_ref_args_t a = good;
    a.activation = RUDNN_FFN_SWIGLU; /* gated needs N1 = 2 K2 */
    assert_int_equal(ffn_ref_rows(&a), -1);
    a = good;
    a.n2 = 3; /* N2 = K1 */
    assert_int_equal(ffn_ref_rows(&a), -1);
    a = good;
    a.w2 = NULL;
    assert_int_equal(ffn_ref_rows(&a), -1);
    a = good;
    a.scenario = FFN_REF_W8A8; /* the int8 arrays are missing */
    assert_int_equal(ffn_ref_rows(&a), -1);
    a = good;
    a.k1 = a.n2 = RUDNN_FFN_MAX_K + 1;
    assert_int_equal(ffn_ref_rows(&a), -1);
    a = good;
    a.activation = (rudnn_ffn_activation_t)7;
    assert_int_equal(ffn_ref_rows(&a), -1);
    a = good;
    a.m = 0; /* no rows: fine, nothing written */
    double y[1] = {SENTINEL};
    assert_int_equal(ffn_ref(&a, y, NULL), 0);
    assert_true(y[0] == SENTINEL);
    assert_int_equal(ffn_ref_rows(NULL), -1);
}

/* ---- int4 packing ------------------------------------------------------------------------------------ */

/* The nibble of v by hand: v for 0..7, v + 16 for -8..-1. */
static unsigned nibble_of(int v)
{
    return v >= 0 ? (unsigned)v : (unsigned)(v + 16);
}

static void test_pack_every_nibble(void **state)
{
    (void)state;
    /* each value at the even and at the odd column, the other column holding a different value */
    for (int v = -8; v <= 7; v++) {
        for (int pos = 0; pos < 2; pos++) {
            int other = -1 - v; /* -8 <-> 7, -1 <-> 0: always another value in range */
            int8_t w[2];
            w[pos] = (int8_t)v;
            w[1 - pos] = (int8_t)other;
            uint8_t out = 0xAA;
            assert_int_equal(rudnn_ffn_pack_int4(w, 1, 2, &out), RUDNN_STATUS_SUCCESS);
            unsigned want = pos == 0 ? nibble_of(v) | nibble_of(other) << 4 : nibble_of(other) | nibble_of(v) << 4;
            if (out != want)
                fail_msg("pack(%d at column %d, %d) = 0x%02x, want 0x%02x", v, pos, other, out, want);
            int8_t back[2];
            ffn_ref_unpack_int4(&out, 1, 2, back);
            assert_int_equal(back[0], w[0]);
            assert_int_equal(back[1], w[1]);
        }
    }
    /* all 256 pairs: row r holds r - 8 at even columns, column c / 2 - 8 at odd ones; rows of 32 */
    int8_t w[16 * 32], back[16 * 32];
    uint8_t out[16 * 16], ref[16 * 16];
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 32; c++)
            w[r * 32 + c] = (int8_t)(c % 2 == 0 ? r - 8 : c / 2 - 8);
    assert_int_equal(rudnn_ffn_pack_int4(w, 16, 32, out), RUDNN_STATUS_SUCCESS);
    ffn_ref_pack_int4(w, 16, 32, ref);
    assert_memory_equal(out, ref, sizeof out);
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            assert_int_equal(out[r * 16 + c], nibble_of(r - 8) | nibble_of(c - 8) << 4);
    ffn_ref_unpack_int4(out, 16, 32, back);
    assert_memory_equal(back, w, sizeof w);
    /* a known row: [-8, 7, -1, 0] -> 0x78, 0x0f */
    static const int8_t row[4] = {-8, 7, -1, 0};
    uint8_t two[2];
    assert_int_equal(rudnn_ffn_pack_int4(row, 1, 4, two), RUDNN_STATUS_SUCCESS);
    assert_int_equal(two[0], 0x78);
    assert_int_equal(two[1], 0x0f);
    assert_string_equal(rudnn_last_error(), "");
    /* empty matrices: success, nothing written */
    uint8_t untouched = 0xAA;
    assert_int_equal(rudnn_ffn_pack_int4(row, 0, 4, &untouched), RUDNN_STATUS_SUCCESS);
    assert_int_equal(rudnn_ffn_pack_int4(row, 3, 0, &untouched), RUDNN_STATUS_SUCCESS);
    assert_int_equal(untouched, 0xAA);
}

/* One rejected call: BAD_PARAM, the message names the op and holds rule, out untouched. */
static void expect_pack_error(const int8_t *w, int64_t k, int64_t n, uint8_t *out, size_t out_bytes,
                              const char *rule)
{
    uint8_t before[64];
    assert_true(out_bytes <= sizeof before);
    if (out)
        memcpy(before, out, out_bytes);
    rudnn_status_t st = rudnn_ffn_pack_int4(w, k, n, out);
    if (st != RUDNN_STATUS_BAD_PARAM)
        fail_msg("k %lld n %lld: status %s, want BAD_PARAM (%s)", (long long)k, (long long)n,
                 rudnn_status_string(st), rule);
    const char *msg = rudnn_last_error();
    if (strncmp(msg, "ffn_pack_int4: ", 15) != 0 || !strstr(msg, rule))
        fail_msg("message '%s' should start with 'ffn_pack_int4: ' and hold '%s'", msg, rule);
    if (out)
        assert_memory_equal(out, before, out_bytes);
}

static void test_pack_errors(void **state)
{
    (void)state;
    int8_t w[2 * 4] = {0, 1, 2, 3, -4, -5, -6, -7};
    uint8_t out[4];
    memset(out, 0xAA, sizeof out);
    expect_pack_error(NULL, 2, 4, out, sizeof out, "w is NULL");
    expect_pack_error(w, 2, 4, NULL, 0, "out is NULL");
    expect_pack_error(w, -1, 4, out, sizeof out, "k = -1 is negative");
    expect_pack_error(w, 2, -2, out, sizeof out, "n = -2 is negative");
    expect_pack_error(w, 2, 3, out, sizeof out, "n = 3 is odd");
    expect_pack_error(w, INT64_MAX / 2, INT64_MAX - 1, out, sizeof out, "overflow");
    /* out of range at an odd and at an even column, the last element: nothing written before */
    w[7] = 8;
    expect_pack_error(w, 2, 4, out, sizeof out, "w[1][3] = 8 is outside the int4 range -8..7");
    w[7] = -7;
    w[6] = -9;
    expect_pack_error(w, 2, 4, out, sizeof out, "w[1][2] = -9 is outside the int4 range -8..7");
    w[6] = -6;
    w[1] = 127;
    expect_pack_error(w, 2, 4, out, sizeof out, "w[0][1] = 127");
    w[1] = -128;
    expect_pack_error(w, 2, 4, out, sizeof out, "w[0][1] = -128");
    w[1] = 1;
    /* a good call afterwards succeeds and clears the message */
    assert_int_equal(rudnn_ffn_pack_int4(w, 2, 4, out), RUDNN_STATUS_SUCCESS);
    assert_string_equal(rudnn_last_error(), "");
    static const uint8_t want[4] = {0x10, 0x32, 0xbc, 0x9a};
    assert_memory_equal(out, want, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_act_scalar),
        cmocka_unit_test(test_float_plain),
        cmocka_unit_test(test_float_gated),
        cmocka_unit_test(test_float_roundings),
        cmocka_unit_test(test_precision_table),
        cmocka_unit_test(test_float_precision),
        cmocka_unit_test(test_requant),
        cmocka_unit_test(test_w8a8),
        cmocka_unit_test(test_w8a8_scale_per_channel),
        cmocka_unit_test(test_deq_scale_i64),
        cmocka_unit_test(test_weight_only_int4_group),
        cmocka_unit_test(test_weight_only_round),
        cmocka_unit_test(test_experts),
        cmocka_unit_test(test_experts_w8a8),
        cmocka_unit_test(test_rows_contract),
        cmocka_unit_test(test_pack_every_nibble),
        cmocka_unit_test(test_pack_errors),
    };
    return cmocka_run_group_tests_name("ffn-ref", tests, NULL, NULL);
}
