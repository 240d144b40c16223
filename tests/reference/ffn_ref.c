/* FP64 host reference of FFN / MoeFFN (include/rudnn/ffn.h); see ffn_ref.h for the API. Every
 * loop follows the formula of its scenario literally, one output element at a time. */
#include "ffn_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- activations --------------------------------------------------------------------------- */

int ffn_ref_is_gated(rudnn_ffn_activation_t act)
{
    return act == RUDNN_FFN_GEGLU || act == RUDNN_FFN_SWIGLU || act == RUDNN_FFN_REGLU;
}

static double sigmoid(double t)
{
    if (t >= 0.0)
        return 1.0 / (1.0 + exp(-t));
    double e = exp(t); /* t < 0: no overflow of exp */
    return e / (1.0 + e);
}

double ffn_ref_act_scalar(rudnn_ffn_activation_t act, double x)
{
    if (isnan(x))
        return x;
    switch (act) {
    case RUDNN_FFN_RELU:
    case RUDNN_FFN_REGLU:
        return x > 0.0 ? x : 0.0;
    case RUDNN_FFN_GELU:
    case RUDNN_FFN_GEGLU:
        if (isinf(x)) /* the limits; -inf * 0 would give NaN */
            return x > 0.0 ? x : 0.0;
        return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case RUDNN_FFN_FASTGELU:
        if (isinf(x))
            return x > 0.0 ? x : 0.0;
        return x * sigmoid(1.702 * x);
    case RUDNN_FFN_SILU:
    case RUDNN_FFN_SWIGLU:
        if (isinf(x))
            return x > 0.0 ? x : 0.0;
        return x * sigmoid(x);
    }
    return NAN; /* not an activation of ffn.h */
}

void ffn_ref_activate_row(rudnn_ffn_activation_t act, const double *h, int64_t n1, double *a)
{
    if (ffn_ref_is_gated(act)) {
        int64_t k2 = n1 / 2;
        for (int64_t j = 0; j < k2; j++)
            a[j] = h[j] * ffn_ref_act_scalar(act, h[k2 + j]); /* value: first half; gate: second */
    } else {
        for (int64_t j = 0; j < n1; j++)
            a[j] = ffn_ref_act_scalar(act, h[j]);
    }
}

/* ---- roundings ------------------------------------------------------------------------------------ */

double ffn_ref_round(ffn_ref_round_t r, double v)
{
    switch (r) {
    case FFN_REF_ROUND_F32: return (double)(float)v;
    case FFN_REF_ROUND_F16: return (double)rudnn_f16_to_f32(rudnn_f32_to_f16((float)v));
    case FFN_REF_ROUND_BF16: return (double)rudnn_bf16_to_f32(rudnn_f32_to_bf16((float)v));
    case FFN_REF_ROUND_NONE: break;
    }
    return v;
}

int ffn_ref_precision_rounds(ffn_ref_scenario_t scenario, rudnn_dtype_t x_dtype, rudnn_ffn_precision_t precision,
                             ffn_ref_round_t *pre, ffn_ref_round_t *hidden)
{
    if (precision != RUDNN_FFN_HIGH_PRECISION && precision != RUDNN_FFN_HIGH_PERFORMANCE)
        return -1;
    ffn_ref_round_t rpre = FFN_REF_ROUND_F32, rhid; /* h is FP32 but for F16/BF16 high performance */
    switch (scenario) {
    case FFN_REF_FLOAT:
        if (x_dtype == RUDNN_F16) {
            rhid = FFN_REF_ROUND_F16;
            if (precision == RUDNN_FFN_HIGH_PERFORMANCE)
                rpre = FFN_REF_ROUND_F16;
        } else if (x_dtype == RUDNN_BF16) {
            rhid = FFN_REF_ROUND_BF16;
            if (precision == RUDNN_FFN_HIGH_PERFORMANCE)
                rpre = FFN_REF_ROUND_BF16;
        } else if (x_dtype == RUDNN_F32) {
            rhid = FFN_REF_ROUND_F32;
        } else {
            return -1;
        }
        break;
    case FFN_REF_WEIGHT_ONLY: /* the high-precision path whatever the precision */
        if (x_dtype == RUDNN_F16)
            rhid = FFN_REF_ROUND_F16;
        else if (x_dtype == RUDNN_BF16)
            rhid = FFN_REF_ROUND_BF16;
        else
            return -1;
        break;
    case FFN_REF_W8A8: /* the activation's output stays FP32 into the requantization */
        if (x_dtype != RUDNN_I8)
            return -1;
        rhid = FFN_REF_ROUND_F32;
        break;
    default:
        return -1;
    }
    *pre = rpre;
    *hidden = rhid;
    return 0;
}

/* ---- quantization helpers ----------------------------------------------------------------------------
 * ffn.h: the requantized value is rounded half to even, saturated to [-128, 127], NaN to 0 (what the
 * saturating float -> int conversions give for NaN: OpenCL's convert_char_sat_rte, PTX's
 * cvt.rni.sat). */

/* Round half to even of a finite v with |v| < 2^52 (v - floor(v) is then exact). */
static double round_half_even(double v)
{
    double f = floor(v);
    double d = v - f;
    if (d < 0.5)
        return f;
    if (d > 0.5)
        return f + 1.0;
    return fmod(f, 2.0) == 0.0 ? f : f + 1.0; /* a tie: the even neighbour */
}

int8_t ffn_ref_requant_i8(double v)
{
    if (isnan(v))
        return 0;
    if (v >= 127.0)
        return 127;
    if (v <= -128.0)
        return -128;
    return (int8_t)round_half_even(v); /* in [-128, 127]: -128 < v < 127 */
}

double ffn_ref_deq_scale_i64(int64_t v)
{
    uint32_t bits = (uint32_t)((uint64_t)v & 0xffffffffu); /* the low word; the high one ignored */
    float f;
    memcpy(&f, &bits, sizeof f);
    return (double)f;
}

void ffn_ref_unpack_int4(const uint8_t *packed, int64_t k, int64_t n, int8_t *w)
{
    for (int64_t r = 0; r < k; r++) {
        for (int64_t c = 0; c < n; c++) {
            uint8_t byte = packed[r * (n / 2) + c / 2];
            int nibble = c % 2 == 0 ? (byte & 0x0f) : (byte >> 4);
            w[r * n + c] = (int8_t)(nibble >= 8 ? nibble - 16 : nibble); /* two's complement */
        }
    }
}

void ffn_ref_pack_int4(const int8_t *w, int64_t k, int64_t n, uint8_t *out)
{
    for (int64_t r = 0; r < k; r++) {
        for (int64_t c = 0; c < n; c += 2) {
            unsigned lo = (unsigned)(w[r * n + c] + 16) % 16; /* -8..7 -> 8..15, 0..7 */
            unsigned hi = (unsigned)(w[r * n + c + 1] + 16) % 16;
            out[r * (n / 2) + c / 2] = (uint8_t)(lo + 16 * hi);
        }
    }
}

/* ---- the op ------------------------------------------------------------------------------------------ */

static int64_t max1(int64_t v)
{
    return v > 1 ? v : 1;
}

/* Rows of expert e: *start and *count from expert_tokens (already validated). */
static void expert_rows(const ffn_ref_args_t *a, int64_t e, int64_t *start, int64_t *count)
{
    if (a->expert_tokens_totals) {
        *start = e == 0 ? 0 : a->expert_tokens[e - 1];
        *count = a->expert_tokens[e] - *start;
    } else {
        int64_t s = 0;
        for (int64_t i = 0; i < e; i++)
            s += a->expert_tokens[i];
        *start = s;
        *count = a->expert_tokens[e];
    }
}

int64_t ffn_ref_rows(const ffn_ref_args_t *a)
{
    if (!a)
        return -1;
    if (a->scenario != FFN_REF_FLOAT && a->scenario != FFN_REF_W8A8 && a->scenario != FFN_REF_WEIGHT_ONLY)
        return -1;
    if ((int)a->activation < RUDNN_FFN_GELU || (int)a->activation > RUDNN_FFN_REGLU)
        return -1;
    if (a->m < 0 || a->k1 < 0 || a->n1 < 0 || a->k2 < 0 || a->n2 < 0)
        return -1;
    if (a->k1 > RUDNN_FFN_MAX_K || a->k2 > RUDNN_FFN_MAX_K)
        return -1;
    if (a->n1 != (ffn_ref_is_gated(a->activation) ? 2 * a->k2 : a->k2) || a->n2 != a->k1)
        return -1;
    switch (a->scenario) {
    case FFN_REF_FLOAT:
        if (!a->x || !a->w1 || !a->w2)
            return -1;
        break;
    case FFN_REF_W8A8:
        if (!a->x_i8 || !a->w1_i8 || !a->w2_i8 || !a->scale || !a->offset || !a->deq_scale1 || !a->deq_scale2)
            return -1;
        break;
    case FFN_REF_WEIGHT_ONLY:
        if (!a->x || !a->w1_i8 || !a->w2_i8 || !a->antiquant_scale1 || !a->antiquant_scale2)
            return -1;
        if (a->antiquant_groups1 < 0 || a->antiquant_groups2 < 0)
            return -1;
        if (a->k1 % max1(a->antiquant_groups1) != 0 || a->k2 % max1(a->antiquant_groups2) != 0)
            return -1;
        if ((a->antiquant_groups1 > 1 || a->antiquant_groups2 > 1) && !a->weights_int4)
            return -1; /* per group only for I4 weights */
        break;
    }
    if (a->experts < 0)
        return -1;
    if (a->experts == 0)
        return a->m;
    if (!a->expert_tokens)
        return -1;
    int64_t sum = 0;
    for (int64_t e = 0; e < a->experts; e++) {
        int64_t v = a->expert_tokens[e];
        if (a->expert_tokens_totals) {
            if (v < sum || v > a->m) /* decreasing totals, or past x */
                return -1;
            sum = v;
        } else {
            if (v < 0 || v > a->m - sum)
                return -1;
            sum += v;
        }
    }
    return sum;
}

/* Weight-only: the dequantized w'[r][c] = (w[r][c] + offset) * scale of a [k, n] matrix, with
 * groups groups of k / groups rows (0 or 1: per channel). */
static double dequant_weight(const int8_t *w, const double *scale, const double *offset, int64_t groups,
                             int64_t k, int64_t n, int64_t r, int64_t c, ffn_ref_round_t round_weight)
{
    int64_t g = groups > 1 ? r / (k / groups) : 0;
    double o = offset ? offset[g * n + c] : 0.0;
    double v = ((double)w[r * n + c] + o) * scale[g * n + c];
    return ffn_ref_round(round_weight, v);
}

/* One row of x (index row) through expert e's weights: writes y [n2] and, when not NULL,
 * hidden [k2]. h [n1] and act [k2] are scratch. */
static void ffn_row(const ffn_ref_args_t *a, int64_t e, int64_t row, double *h, double *act, double *y,
                    double *hidden)
{
    int64_t k1 = a->k1, n1 = a->n1, k2 = a->k2, n2 = a->n2;
    int64_t g1 = max1(a->antiquant_groups1), g2 = max1(a->antiquant_groups2);

    /* first product and bias: h [n1] */
    for (int64_t c = 0; c < n1; c++) {
        double v = 0.0;
        if (a->scenario == FFN_REF_FLOAT) {
            const double *w1 = a->w1 + e * k1 * n1;
            for (int64_t i = 0; i < k1; i++)
                v += a->x[row * k1 + i] * w1[i * n1 + c];
            if (a->b1)
                v += a->b1[e * n1 + c];
        } else if (a->scenario == FFN_REF_W8A8) {
            const int8_t *w1 = a->w1_i8 + e * k1 * n1;
            int64_t acc = 0; /* exact: |acc| <= 65535 * 128 * 128 + 2^31 */
            for (int64_t i = 0; i < k1; i++)
                acc += (int64_t)a->x_i8[row * k1 + i] * (int64_t)w1[i * n1 + c];
            if (a->b1_i32)
                acc += a->b1_i32[e * n1 + c];
            double deq = a->deq1_per_channel ? a->deq_scale1[e * n1 + c] : a->deq_scale1[e];
            v = (double)acc * deq;
        } else {
            const int8_t *w1 = a->w1_i8 + e * k1 * n1;
            const double *s1 = a->antiquant_scale1 + e * g1 * n1;
            const double *o1 = a->antiquant_offset1 ? a->antiquant_offset1 + e * g1 * n1 : NULL;
            for (int64_t i = 0; i < k1; i++)
                v += a->x[row * k1 + i] *
                     dequant_weight(w1, s1, o1, a->antiquant_groups1, k1, n1, i, c, a->round_weight);
            if (a->b1)
                v += a->b1[e * n1 + c];
        }
        h[c] = ffn_ref_round(a->round_pre, v);
    }

    /* activation: act [k2], rounded where the kernel rounds it; W8A8 requantizes it to int8 */
    ffn_ref_activate_row(a->activation, h, n1, act);
    for (int64_t j = 0; j < k2; j++) {
        act[j] = ffn_ref_round(a->round_hidden, act[j]);
        if (a->scenario == FFN_REF_W8A8) {
            double scale = a->scale_per_channel ? a->scale[e * k2 + j] : a->scale[e];
            act[j] = (double)ffn_ref_requant_i8(act[j] * scale + a->offset[e]);
        }
        if (hidden)
            hidden[j] = act[j];
    }

    /* second product and bias: y [n2] */
    for (int64_t c = 0; c < n2; c++) {
        double v = 0.0;
        if (a->scenario == FFN_REF_FLOAT) {
            const double *w2 = a->w2 + e * k2 * n2;
            for (int64_t j = 0; j < k2; j++)
                v += act[j] * w2[j * n2 + c];
            if (a->b2)
                v += a->b2[e * n2 + c];
        } else if (a->scenario == FFN_REF_W8A8) {
            const int8_t *w2 = a->w2_i8 + e * k2 * n2;
            int64_t acc = 0;
            for (int64_t j = 0; j < k2; j++)
                acc += (int64_t)act[j] * (int64_t)w2[j * n2 + c]; /* act[j] holds an int8 */
            if (a->b2_i32)
                acc += a->b2_i32[e * n2 + c];
            double deq = a->deq2_per_channel ? a->deq_scale2[e * n2 + c] : a->deq_scale2[e];
            v = (double)acc * deq;
        } else {
            const int8_t *w2 = a->w2_i8 + e * k2 * n2;
            const double *s2 = a->antiquant_scale2 + e * g2 * n2;
            const double *o2 = a->antiquant_offset2 ? a->antiquant_offset2 + e * g2 * n2 : NULL;
            for (int64_t j = 0; j < k2; j++)
                v += act[j] * dequant_weight(w2, s2, o2, a->antiquant_groups2, k2, n2, j, c, a->round_weight);
            if (a->b2)
                v += a->b2[e * n2 + c];
        }
        y[c] = v;
    }
}

int64_t ffn_ref(const ffn_ref_args_t *a, double *y, double *hidden)
{
    int64_t rows = ffn_ref_rows(a);
    if (rows < 0)
        return -1;
    double *h = malloc((size_t)max1(a->n1) * sizeof *h);
    double *act = malloc((size_t)max1(a->k2) * sizeof *act);
    if (!h || !act)
        abort();
    int64_t experts = a->experts > 0 ? a->experts : 1;
    for (int64_t e = 0; e < experts; e++) {
        int64_t start = 0, count = rows;
        if (a->experts > 0)
            expert_rows(a, e, &start, &count);
        for (int64_t r = start; r < start + count; r++)
            ffn_row(a, e, r, h, act, y + r * a->n2, hidden ? hidden + r * a->k2 : NULL);
    }
    free(h);
    free(act);
    return rows;
}
