/* FFN and MoeFFN (rudnn/ffn.h): the argument checks of rudnn_ffn_workspace_size and rudnn_ffn, and
 * the plan that runs the family's kernel table (backends/hal/ffn.h) per expert:
 *   h = x W1 (gemm), a = act(h + b1 ...) (act), h2 = a W2 (gemm), y = h2 + b2 ... (out)
 * with h, a and h2 in the workspace (sizes below). Every check runs before the first kernel; a
 * device failure midway stops the call (earlier experts' rows of y may then be written). An empty y
 * (M = 0, or K1 = N2 = 0) needs no product: no workspace, no kernel (the arguments, expert_tokens'
 * values included, are still checked).
 *
 * Order of the checks (the first violation is reported):
 *   1. NULL queue, args, y, bytes; the activation and precision enums;
 *   2. every tensor's descriptor (rudnn_check_tensor: NULL required ones, context, dtype value,
 *      rank, layout), x of rank 2..8;
 *   3. the scenario the dtypes of x and the weights select, and which of the quantization and
 *      antiquant arguments it takes (any mix is rejected, naming the argument);
 *   4. the weights' shapes (K1 = x's last dim, N2 = K1, N1 = K2 or 2 K2, K <= 65535, I4's even N),
 *      expert_tokens, the M limit;
 *   5. the scenario's biases and scales; y's shape and dtype; y disjoint from every input;
 *   6. (rudnn_ffn) the workspace, then expert_tokens' values, read to the host (one
 *      synchronisation). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/pool.h"
#include "rudnn/ffn.h"
#include "validate.h"

typedef enum ffn_scenario { FFN_PLAIN, FFN_QUANT, FFN_WEIGHT_ONLY } ffn_scenario_t;

/* What the checks learn about a call. Dims of I4 weights count int4 values (their logical shape,
 * rudnn/dtype.h: two a byte along the last dim). */
typedef struct ffn_dims {
    ffn_scenario_t sc;
    int experts;                 /* expert_tokens given: weights [E, K, N] */
    int64_t E, M, K1, N1, K2, N2;
    rudnn_dtype_t y_dtype;
    const char *y_why;
} ffn_dims_t;

#define FFN_INPUTS 14
static const char *const input_names[FFN_INPUTS] = {
    "x", "weight1", "weight2", "expert_tokens", "bias1", "bias2", "scale", "offset", "deq_scale1", "deq_scale2",
    "antiquant_scale1", "antiquant_offset1", "antiquant_scale2", "antiquant_offset2"};

static void inputs_of(const rudnn_ffn_args_t *a, const rudnn_tensor_t *t[FFN_INPUTS])
{
    const rudnn_tensor_t *all[FFN_INPUTS] = {a->x, a->weight1, a->weight2, a->expert_tokens, a->bias1, a->bias2,
                                             a->scale, a->offset, a->deq_scale1, a->deq_scale2, a->antiquant_scale1,
                                             a->antiquant_offset1, a->antiquant_scale2, a->antiquant_offset2};
    for (int i = 0; i < FFN_INPUTS; i++)
        t[i] = all[i];
}

static const char *activation_name(rudnn_ffn_activation_t act)
{
    static const char *const names[] = {"gelu", "fastgelu", "relu", "silu", "geglu", "swiglu", "reglu"};
    return names[act];
}

static int is_gated(rudnn_ffn_activation_t act) { return act >= RUDNN_FFN_GEGLU; }

/* ---- 1, 2: pointers, enums, descriptors ------------------------------------------------------ */

static rudnn_status_t check_pointers_and_enums(const char *op, rudnn_queue_t queue, const rudnn_ffn_args_t *a,
                                               const rudnn_tensor_t *y)
{
    TRY(rudnn_check_queue(op, queue));
    TRY(rudnn_check_arg(op, "args", a));
    TRY(rudnn_check_arg(op, "y", y));
    if ((unsigned)a->activation > RUDNN_FFN_REGLU)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: activation = %d, expected 0..6 (rudnn_ffn_activation_t)",
                               op, (int)a->activation);
    if ((unsigned)a->precision > RUDNN_FFN_HIGH_PERFORMANCE)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               "%s: precision = %d, expected 0 (HIGH_PRECISION) or 1 (HIGH_PERFORMANCE)", op,
                               (int)a->precision);
    return RUDNN_STATUS_SUCCESS;
}

/* x (rank 2..8), the weights and y are required; every other tensor is checked where given. */
static rudnn_status_t check_descriptors(const char *op, rudnn_queue_t queue, const rudnn_ffn_args_t *a,
                                        const rudnn_tensor_t *y)
{
    const rudnn_tensor_t *t[FFN_INPUTS];
    inputs_of(a, t);
    for (int i = 0; i < FFN_INPUTS; i++)
        if (i < 3 || t[i])
            TRY(rudnn_check_tensor(op, input_names[i], queue, t[i], i == 0 ? 2 : 1));
    return rudnn_check_tensor(op, "y", queue, y, 2);
}

/* ---- 3: the scenario ------------------------------------------------------------------------- */

static rudnn_status_t pick_scenario(const char *op, const rudnn_ffn_args_t *a, ffn_dims_t *d)
{
    rudnn_dtype_t xd = a->x->dtype, wd = a->weight1->dtype;
    const char *xn = rudnn_dtype_name(xd), *wn = rudnn_dtype_name(wd);
    if (xd == RUDNN_I8) {
        if (wd != RUDNN_I8)
            return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: weight1 has dtype %s, expected i8 (i8 x: the "
                                   "quantized scenario takes i8 weights)", op, wn);
        d->sc = FFN_QUANT;
    } else if (!rudnn_dtype_is_float(xd)) {
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: x has dtype %s, expected f16, bf16, f32 or i8 "
                               "(quantized)", op, xn);
    } else if (wd == xd) {
        d->sc = FFN_PLAIN;
    } else if (wd == RUDNN_I8 || wd == RUDNN_I4) {
        if (xd == RUDNN_F32)
            return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: weight1 has dtype %s with f32 x: weight-only "
                                   "quantization (i8 or i4 weights) takes f16 or bf16 x", op, wn);
        d->sc = FFN_WEIGHT_ONLY;
    } else {
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: weight1 has dtype %s, expected %s (x's dtype) or, for "
                               "f16/bf16 x, i8 or i4 (weight-only)", op, wn, xn);
    }
    if (a->weight2->dtype != wd)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: weight2 has dtype %s, expected %s (weight1's dtype)", op,
                               rudnn_dtype_name(a->weight2->dtype), wn);
    return RUDNN_STATUS_SUCCESS;
}

/* Which of the quantization (scale .. deq_scale2) and antiquant arguments the scenario takes. */
static rudnn_status_t check_scenario_args(const char *op, const rudnn_ffn_args_t *a, const ffn_dims_t *d)
{
    const rudnn_tensor_t *t[FFN_INPUTS];
    inputs_of(a, t);
    const char *xn = rudnn_dtype_name(a->x->dtype), *wn = rudnn_dtype_name(a->weight1->dtype);
    for (int i = 6; i < FFN_INPUTS; i++) { /* first what the scenario does not take */
        int quant_arg = i < 10;
        if (!t[i] || (d->sc == FFN_QUANT && quant_arg) || (d->sc == FFN_WEIGHT_ONLY && !quant_arg))
            continue;
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is given, but %s x with %s weights is the %s "
                               "scenario, which takes no %s arguments (%s)", op, input_names[i], xn, wn,
                               d->sc == FFN_PLAIN ? "non-quantized" : d->sc == FFN_QUANT ? "quantized" : "weight-only",
                               quant_arg ? "quantization" : "antiquant",
                               quant_arg ? "scale, offset and deq scales are for i8 x and i8 weights"
                                         : "antiquant scales are for f16/bf16 x with i8 or i4 weights");
    }
    for (int i = 6; i < 10 && d->sc == FFN_QUANT; i++)
        if (!t[i])
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is NULL: the quantized scenario (i8 x and "
                                   "weights) needs all of scale, offset, deq_scale1 and deq_scale2", op,
                                   input_names[i]);
    if (d->sc == FFN_WEIGHT_ONLY && (!a->antiquant_scale1 || !a->antiquant_scale2))
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is NULL: weight-only quantization (%s x, %s weights) "
                               "needs antiquant_scale1 and antiquant_scale2 (the offsets are optional)", op,
                               !a->antiquant_scale1 ? "antiquant_scale1" : "antiquant_scale2", xn, wn);
    return RUDNN_STATUS_SUCCESS;
}

/* ---- shapes --------------------------------------------------------------------------------- */

/* "<op>: <arg> has shape [..], expected <what>". */
static rudnn_status_t bad_shape(const char *op, const char *arg, const rudnn_tensor_t *t, const char *what)
{
    char s[160];
    return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has shape %s, expected %s", op, arg,
                           rudnn_shape_str(t, s, sizeof s), what);
}

/* t is [E, n...] with expert_tokens, [n...] without (n of n_count dims). */
static int shape_is(const rudnn_tensor_t *t, const ffn_dims_t *d, int n_count, int64_t n0, int64_t n1)
{
    int64_t want[3];
    int r = 0;
    if (d->experts)
        want[r++] = d->E;
    want[r++] = n0;
    if (n_count > 1)
        want[r++] = n1;
    if (t->rank != r)
        return 0;
    for (int i = 0; i < r; i++)
        if (t->dims[i] != want[i])
            return 0;
    return 1;
}

/* "[E, 8]" or "[8]" for the messages. */
static const char *expect_str(const ffn_dims_t *d, int64_t n, const char *name, char *buf, size_t cap)
{
    if (d->experts)
        snprintf(buf, cap, "[%lld, %lld] ([E, %s])", (long long)d->E, (long long)n, name);
    else
        snprintf(buf, cap, "[%lld] ([%s])", (long long)n, name);
    return buf;
}

static rudnn_status_t check_weight_ranks(const char *op, const rudnn_ffn_args_t *a, ffn_dims_t *d)
{
    d->experts = a->expert_tokens != NULL;
    const int want = d->experts ? 3 : 2;
    const char *form = d->experts ? "[E, K, N] (3-D: expert_tokens is given)" : "[K, N] (2-D: no expert_tokens)";
    if (a->weight1->rank != want)
        return bad_shape(op, "weight1", a->weight1, form);
    if (a->weight2->rank != want)
        return bad_shape(op, "weight2", a->weight2, form);
    d->E = d->experts ? a->weight1->dims[0] : 0;
    if (d->experts && a->weight2->dims[0] != d->E)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: weight2 has %lld experts (dims[0]), weight1 %lld "
                               "(both [E, K, N])", op, (long long)a->weight2->dims[0], (long long)d->E);
    if (d->experts) {
        TRY(rudnn_check_dtype(op, "expert_tokens", a->expert_tokens, RUDNN_I64, "rows per expert"));
        TRY(rudnn_check_vector(op, "expert_tokens", a->expert_tokens, d->E, "one per expert of the weights"));
    }
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t check_weights(const char *op, const rudnn_ffn_args_t *a, ffn_dims_t *d)
{
    TRY(check_weight_ranks(op, a, d));
    const int o = d->experts;
    d->K1 = a->weight1->dims[o], d->N1 = a->weight1->dims[o + 1];
    d->K2 = a->weight2->dims[o], d->N2 = a->weight2->dims[o + 1];
    const int64_t xk = a->x->dims[a->x->rank - 1];
    if (d->K1 != xk)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: weight1 has K1 = %lld, expected x's last dim %lld", op,
                               (long long)d->K1, (long long)xk);
    if (d->K1 > RUDNN_FFN_MAX_K || d->K2 > RUDNN_FFN_MAX_K)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has %s = %lld, expected at most %d (RUDNN_FFN_MAX_K)",
                               op, d->K1 > RUDNN_FFN_MAX_K ? "weight1" : "weight2",
                               d->K1 > RUDNN_FFN_MAX_K ? "K1" : "K2",
                               (long long)(d->K1 > RUDNN_FFN_MAX_K ? d->K1 : d->K2), RUDNN_FFN_MAX_K);
    if (d->N2 != d->K1)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: weight2 has N2 = %lld, expected K1 = %lld (y has x's "
                               "shape)", op, (long long)d->N2, (long long)d->K1);
    const int gated = is_gated(a->activation);
    if (gated ? d->N1 != 2 * d->K2 : d->N1 != d->K2)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: weight2 has K2 = %lld and weight1 N1 = %lld: activation "
                               "%s needs N1 = %sK2", op, (long long)d->K2, (long long)d->N1,
                               activation_name(a->activation), gated ? "2 " : "");
    if (a->weight1->dtype == RUDNN_I4 && (d->N1 % 2 || d->N2 % 2))
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has %s = %lld, odd: i4 weights pack two values a "
                               "byte along N, so N must be even", op, d->N1 % 2 ? "weight1" : "weight2",
                               d->N1 % 2 ? "N1" : "N2", (long long)(d->N1 % 2 ? d->N1 : d->N2));
    return RUDNN_STATUS_SUCCESS;
}

/* M, the product of x's leading dims, rounded up to 32 bytes' worth of x's elements, below INT32_MAX. */
static rudnn_status_t check_rows(const char *op, const rudnn_tensor_t *x, ffn_dims_t *d)
{
    const int64_t per32 = 32 / (int64_t)rudnn_dtype_size(x->dtype);
    int64_t m = 1;
    int over = 0;
    for (int i = 0; i + 1 < x->rank; i++)
        over |= __builtin_mul_overflow(m, x->dims[i], &m);
    if (over || m > INT32_MAX || (m + per32 - 1) / per32 * per32 > INT32_MAX) {
        char s[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: x has shape %s: M (the product of its leading dims), "
                               "rounded up to a multiple of %lld (32 bytes of %s), must stay below INT32_MAX", op,
                               rudnn_shape_str(x, s, sizeof s), (long long)per32, rudnn_dtype_name(x->dtype));
    }
    d->M = m;
    return RUDNN_STATUS_SUCCESS;
}

/* ---- 5: biases, scales, y ------------------------------------------------------------------- */

static rudnn_status_t check_bias(const char *op, const char *arg, const rudnn_tensor_t *b, const ffn_dims_t *d,
                                 int64_t n, const char *n_name, rudnn_dtype_t want, const char *why)
{
    if (!b)
        return RUDNN_STATUS_SUCCESS;
    TRY(rudnn_check_dtype(op, arg, b, want, why));
    char e[96];
    return shape_is(b, d, 1, n, 0) ? RUDNN_STATUS_SUCCESS : bad_shape(op, arg, b, expect_str(d, n, n_name, e, sizeof e));
}

static rudnn_status_t check_biases(const char *op, const rudnn_ffn_args_t *a, const ffn_dims_t *d)
{
    rudnn_dtype_t want = d->sc == FFN_QUANT ? RUDNN_I32 : a->x->dtype == RUDNN_F16 ? RUDNN_F16 : RUDNN_F32;
    const char *why = d->sc == FFN_QUANT ? "quantized: int32 biases" : a->x->dtype == RUDNN_F16
                                                                           ? "f16 x: f16 biases"
                                                                           : "bf16 or f32 x: f32 biases";
    TRY(check_bias(op, "bias1", a->bias1, d, d->N1, "N1", want, why));
    return check_bias(op, "bias2", a->bias2, d, d->N2, "N2", want, why);
}

/* Per tensor [1] / [E], or per channel [n] / [E, n] where per_channel. */
static rudnn_status_t check_quant_vector(const char *op, const char *arg, const rudnn_tensor_t *t,
                                         const ffn_dims_t *d, int per_channel, int64_t n, const char *n_name)
{
    int ok = d->experts ? t->rank == 1 && t->dims[0] == d->E : shape_is(t, d, 1, 1, 0);
    ok |= per_channel && shape_is(t, d, 1, n, 0);
    if (ok)
        return RUDNN_STATUS_SUCCESS;
    char e[200], c[96];
    snprintf(e, sizeof e, "%s (per tensor)%s%s%s", d->experts ? "[E]" : "[1]", per_channel ? " or " : "",
             per_channel ? expect_str(d, n, n_name, c, sizeof c) : "", per_channel ? " (per channel)" : "");
    if (d->experts) {
        char s[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has shape %s, expected %s, E = %lld", op, arg,
                               rudnn_shape_str(t, s, sizeof s), e, (long long)d->E);
    }
    return bad_shape(op, arg, t, e);
}

static rudnn_status_t check_quant(const char *op, const rudnn_ffn_args_t *a, ffn_dims_t *d)
{
    TRY(rudnn_check_dtype(op, "scale", a->scale, RUDNN_F32, "the requantization scale"));
    TRY(check_quant_vector(op, "scale", a->scale, d, 1, d->K2, "K2"));
    TRY(rudnn_check_dtype(op, "offset", a->offset, RUDNN_F32, "the requantization offset"));
    TRY(check_quant_vector(op, "offset", a->offset, d, 0, 0, NULL));
    rudnn_dtype_t dq = a->deq_scale1->dtype;
    if (dq != RUDNN_F32 && dq != RUDNN_I64 && dq != RUDNN_BF16)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: deq_scale1 has dtype %s, expected f32 or i64 (f16 y) or "
                               "bf16 (bf16 y)", op, rudnn_dtype_name(dq));
    TRY(rudnn_check_dtype(op, "deq_scale2", a->deq_scale2, dq, "deq_scale1's dtype"));
    TRY(check_quant_vector(op, "deq_scale1", a->deq_scale1, d, 1, d->N1, "N1"));
    TRY(check_quant_vector(op, "deq_scale2", a->deq_scale2, d, 1, d->N2, "N2"));
    d->y_dtype = dq == RUDNN_BF16 ? RUDNN_BF16 : RUDNN_F16;
    d->y_why = dq == RUDNN_BF16 ? "quantized with bf16 deq scales: bf16 y" : "quantized with f32/i64 deq scales: f16 y";
    return RUDNN_STATUS_SUCCESS;
}

/* antiquant_scale<i> (and its offset): per channel [N] / [E, N], or for i4 weights per group
 * [G, N] / [E, G, N] with K divisible by G; x's dtype. */
static rudnn_status_t check_antiquant_one(const char *op, const rudnn_ffn_args_t *a, const ffn_dims_t *d, int second)
{
    const rudnn_tensor_t *s = second ? a->antiquant_scale2 : a->antiquant_scale1;
    const rudnn_tensor_t *o = second ? a->antiquant_offset2 : a->antiquant_offset1;
    const char *sn = second ? "antiquant_scale2" : "antiquant_scale1";
    const int64_t k = second ? d->K2 : d->K1, n = second ? d->N2 : d->N1;
    TRY(rudnn_check_dtype(op, sn, s, a->x->dtype, "x's dtype"));
    const int lead = d->experts;
    if (s->rank == lead + 2 && (!d->experts || s->dims[0] == d->E) && s->dims[lead + 1] == n) {
        const int64_t g = s->dims[lead];
        if (a->weight1->dtype != RUDNN_I4)
            return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has %lld groups (per group): per-group scales "
                                   "are for i4 weights only, these are %s (per channel: %s)", op, sn, (long long)g,
                                   rudnn_dtype_name(a->weight1->dtype), d->experts ? "[E, N]" : "[N]");
        if (g < 1 || k % g)
            return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has G = %lld groups, which must divide K%d = %lld",
                                   op, sn, (long long)g, second + 1, (long long)k);
    } else if (!shape_is(s, d, 1, n, 0)) {
        char e[200];
        if (d->experts)
            snprintf(e, sizeof e, "[E, %lld] (per channel) or [E, G, %lld] (per group, i4), E = %lld", (long long)n,
                     (long long)n, (long long)d->E);
        else
            snprintf(e, sizeof e, "[%lld] (per channel) or [G, %lld] (per group, i4)", (long long)n, (long long)n);
        return bad_shape(op, sn, s, e);
    }
    return o ? rudnn_check_like(op, second ? "antiquant_offset2" : "antiquant_offset1", o, sn, s)
             : RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t check_scenario_tensors(const char *op, const rudnn_ffn_args_t *a, ffn_dims_t *d)
{
    d->y_dtype = a->x->dtype;
    d->y_why = "x's dtype";
    if (d->sc == FFN_QUANT)
        TRY(check_quant(op, a, d));
    if (d->sc == FFN_WEIGHT_ONLY) {
        TRY(check_antiquant_one(op, a, d, 0));
        TRY(check_antiquant_one(op, a, d, 1));
    }
    return check_biases(op, a, d);
}

static rudnn_status_t check_output(const char *op, const rudnn_ffn_args_t *a, const ffn_dims_t *d,
                                   const rudnn_tensor_t *y)
{
    const rudnn_tensor_t *x = a->x;
    int same = y->rank == x->rank && y->dims[y->rank - 1] == d->N2;
    for (int i = 0; same && i + 1 < x->rank; i++)
        same = y->dims[i] == x->dims[i];
    if (!same) {
        char s[160], e[200];
        snprintf(e, sizeof e, "x's shape %s (N2 = K1)", rudnn_shape_str(x, s, sizeof s));
        return bad_shape(op, "y", y, e);
    }
    TRY(rudnn_check_dtype(op, "y", y, d->y_dtype, d->y_why));
    const rudnn_tensor_t *t[FFN_INPUTS];
    inputs_of(a, t);
    for (int i = 0; i < FFN_INPUTS; i++)
        TRY(rudnn_check_disjoint(op, "y", y, input_names[i], t[i]));
    return RUDNN_STATUS_SUCCESS;
}

/* Every check of rudnn_ffn.h that the arguments alone decide (not expert_tokens' values). */
static rudnn_status_t validate(const char *op, rudnn_queue_t queue, const rudnn_ffn_args_t *a,
                               const rudnn_tensor_t *y, ffn_dims_t *d)
{
    TRY(check_pointers_and_enums(op, queue, a, y));
    TRY(check_descriptors(op, queue, a, y));
    TRY(pick_scenario(op, a, d));
    TRY(check_scenario_args(op, a, d));
    TRY(check_weights(op, a, d));
    TRY(check_rows(op, a->x, d));
    TRY(check_scenario_tensors(op, a, d));
    return check_output(op, a, d, y);
}

/* ---- 6: workspace and expert_tokens' values -------------------------------------------------- */

/* The caller's workspace (NULL: the queue's pool): on the queue's context, workspace_bytes within the
 * buffer and at least need, touching no tensor of the call. */
static rudnn_status_t check_workspace(const char *op, rudnn_queue_t queue, const rudnn_ffn_args_t *a,
                                      const rudnn_tensor_t *y, rudnn_buffer_t ws, size_t ws_bytes, size_t need)
{
    const rudnn_tensor_t *t[FFN_INPUTS + 1];
    const char *names[FFN_INPUTS + 1];
    inputs_of(a, t);
    for (int i = 0; i < FFN_INPUTS; i++)
        names[i] = input_names[i];
    t[FFN_INPUTS] = y, names[FFN_INPUTS] = "y";
    return rudnn_check_workspace(op, queue, ws, ws_bytes, need, "rudnn_ffn_workspace_size", t, names,
                                 FFN_INPUTS + 1);
}

/* expert_tokens' values against x's M rows: counts >= 0, or running totals >= 0 that never
 * decrease; their sum (the last total) at most M. */
static rudnn_status_t check_token_values(const char *op, const int64_t *v, int64_t experts, int totals, int64_t M)
{
    int64_t at = 0; /* rows of experts 0 .. e */
    for (int64_t e = 0; e < experts; e++) {
        if (v[e] < 0)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: expert_tokens[%lld] = %lld, expected a %s >= 0", op,
                                   (long long)e, (long long)v[e], totals ? "running total" : "count");
        if (totals && v[e] < at)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: expert_tokens[%lld] = %lld is below expert_tokens[%lld] "
                                   "= %lld; running totals (expert_tokens_totals != 0) must not decrease", op,
                                   (long long)e, (long long)v[e], (long long)(e - 1), (long long)at);
        if (totals ? v[e] > M : v[e] > M - at) /* at <= M: no overflow */
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: expert_tokens (%s) reach past x's M = %lld rows at "
                                   "expert %lld (%lld); expected a sum <= M", op, totals ? "running totals" : "counts",
                                   (long long)M, (long long)e, (long long)v[e]);
        at = totals ? v[e] : at + v[e];
    }
    return RUDNN_STATUS_SUCCESS;
}

/* Reads expert_tokens to the host (one synchronisation), checks its values and turns them into
 * each expert's first row: *starts [E + 1] (the caller frees it). */
static rudnn_status_t read_expert_rows(const char *op, rudnn_queue_t queue, const rudnn_ffn_args_t *a,
                                       const ffn_dims_t *d, int64_t **starts)
{
    *starts = NULL;
    int64_t *host = rudnn_host_malloc((size_t)(d->E + 1) * sizeof(int64_t));
    if (!host)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (expert_tokens)", op);
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    if (d->E > 0)
        st = rudnn_kernel_status(op, queue->context->backend->mem_read(queue->handle,
                                                                        rudnn_mem_of(a->expert_tokens), host + 1,
                                                                        (size_t)d->E * sizeof(int64_t)));
    if (!st)
        st = check_token_values(op, host + 1, d->E, a->expert_tokens_totals != 0, d->M);
    if (st) {
        free(host);
        return st;
    }
    host[0] = 0;
    if (!a->expert_tokens_totals)
        for (int64_t e = 1; e <= d->E; e++)
            host[e] += host[e - 1];
    *starts = host;
    return RUDNN_STATUS_SUCCESS;
}

/* ---- the plan -------------------------------------------------------------------------------- */

/* h = x W1 in x's dtype: the precision rounds h + b1 there anyway and there is no b1 to add first. */
/* The dtype the activation rounds h (+ b1) to first: x's in the 16-bit float HIGH_PERFORMANCE mode. */
static rudnn_dtype_t act_pre_dtype(const rudnn_ffn_args_t *a, const ffn_dims_t *d)
{
    return d->sc == FFN_PLAIN && (a->x->dtype == RUDNN_F16 || a->x->dtype == RUDNN_BF16) &&
                   a->precision == RUDNN_FFN_HIGH_PERFORMANCE
               ? a->x->dtype
               : RUDNN_F32;
}

static int h_in_x_dtype(const rudnn_ffn_args_t *a, const ffn_dims_t *d)
{
    return d->sc == FFN_PLAIN && (a->x->dtype == RUDNN_F16 || a->x->dtype == RUDNN_BF16) &&
           a->precision == RUDNN_FFN_HIGH_PERFORMANCE && !a->bias1;
}

/* The second gemm writes y: out would only round its FP32 sum to y's dtype (no b2, no deq scale). */
static int y_from_gemm(const rudnn_ffn_args_t *a, const ffn_dims_t *d)
{
    return d->sc != FFN_QUANT && !a->bias2;
}

/* The workspace: h [M, N1] (F32, I32 or x's dtype), h2 [M, N2] (F32 or I32; none when the second gemm
 * writes y) and a [M, K2] (the second product's input dtype), each 256-byte aligned, then the gemms'
 * scratch and (expert form) the experts' first rows for gemm_grouped. */
typedef struct ffn_layout {
    rudnn_dtype_t acc, h_dtype, a_dtype; /* h2, h, a */
    size_t h1, a, h2, scratch;  /* byte offsets */
    size_t offsets;             /* the expert form: U32 [E + 1] first rows (gemm_grouped) */
    size_t scratch_bytes, total;
} ffn_layout_t;

static size_t up256(size_t n) { return (n + 255) / 256 * 256; }

/* a * b * c bytes, or SIZE_MAX on overflow. */
static size_t bytes3(int64_t a, int64_t b, size_t c)
{
    size_t r;
    if (__builtin_mul_overflow((size_t)a, (size_t)b, &r) || __builtin_mul_overflow(r, c, &r) || r > SIZE_MAX - 256)
        return SIZE_MAX;
    return r;
}

static void gemm_plans(const rudnn_ffn_args_t *a, const ffn_dims_t *d, rudnn_ffn_gemm_plan_t *g1,
                       rudnn_ffn_gemm_plan_t *g2, int64_t rows)
{
    const rudnn_dtype_t xd = a->x->dtype, wd = a->weight1->dtype;
    const int lead = d->experts;
    const rudnn_dtype_t acc = d->sc == FFN_QUANT ? RUDNN_I32 : RUDNN_F32;
    *g1 = (rudnn_ffn_gemm_plan_t){.a_dtype = xd, .b_dtype = wd, .c_dtype = h_in_x_dtype(a, d) ? xd : acc, .m = rows,
                                  .n = d->N1, .k = d->K1, .groups = 1, .deterministic = a->deterministic != 0};
    *g2 = *g1;
    g2->a_dtype = d->sc == FFN_QUANT ? RUDNN_I8 : xd;
    g2->c_dtype = y_from_gemm(a, d) ? d->y_dtype : acc;
    g2->n = d->N2, g2->k = d->K2;
    if (d->sc == FFN_WEIGHT_ONLY) {
        const rudnn_tensor_t *s1 = a->antiquant_scale1, *s2 = a->antiquant_scale2;
        g1->groups = s1->rank == lead + 2 ? s1->dims[lead] : 1;
        g2->groups = s2->rank == lead + 2 ? s2->dims[lead] : 1;
        g1->has_offset = a->antiquant_offset1 != NULL;
        g2->has_offset = a->antiquant_offset2 != NULL;
    }
}

/* y has no element (M = 0, or N2 = K1 = 0): nothing to compute, whatever K2 is. */
static int y_empty(const ffn_dims_t *d) { return d->M == 0 || d->N2 == 0; }

static rudnn_status_t plan_layout(const char *op, rudnn_queue_t queue, const rudnn_ffn_args_t *a,
                                  const ffn_dims_t *d, ffn_layout_t *l)
{
    *l = (ffn_layout_t){.acc = d->sc == FFN_QUANT ? RUDNN_I32 : RUDNN_F32,
                        .a_dtype = d->sc == FFN_QUANT ? RUDNN_I8 : a->x->dtype};
    l->h_dtype = h_in_x_dtype(a, d) ? a->x->dtype : l->acc;
    if (y_empty(d))
        return RUDNN_STATUS_SUCCESS; /* no h, a or h2: total 0 */
    const rudnn_ffn_kernels_t *k = RUDNN_FAMILY_TABLE(queue->context->backend, ffn);
    rudnn_status_t (*extra)(void *, const rudnn_ffn_gemm_plan_t *, size_t *) =
        k ? RUDNN_KERNEL_ENTRY(k, gemm_workspace) : NULL;
    /* the expert form runs each expert's rows, any count up to M (unknown until the call): the
     * scratch of every power of two of rows below M as well (hal/ffn.h: m covers m / 2 < m' <= m) */
    for (int64_t m = d->experts ? 1 : d->M;; m = m < d->M / 2 ? 2 * m : d->M) {
        rudnn_ffn_gemm_plan_t g[2];
        gemm_plans(a, d, &g[0], &g[1], m);
        for (int i = 0; i < 2 && extra && d->K2 > 0; i++) { /* K2 = 0 runs no gemm */
            size_t b = 0;
            TRY(rudnn_kernel_status(op, extra(queue->context->device, &g[i], &b)));
            if (b > l->scratch_bytes)
                l->scratch_bytes = b;
        }
        if (m >= d->M)
            break;
    }
    const size_t parts[3] = {bytes3(d->M, d->N1, rudnn_dtype_size(l->h_dtype)),
                             bytes3(d->M, d->K2, rudnn_dtype_size(l->a_dtype)),
                             y_from_gemm(a, d) ? 0 : bytes3(d->M, d->N2, 4)};
    size_t *at[5] = {&l->h1, &l->a, &l->h2, &l->scratch, &l->offsets};
    size_t total = 0;
    for (int i = 0; i < 5; i++) {
        const size_t n = i < 3 ? parts[i] : i == 3 ? l->scratch_bytes : d->experts ? (size_t)(d->E + 1) * 4 : 0;
        *at[i] = total;
        if (n == SIZE_MAX || up256(n) > SIZE_MAX - total)
            return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: the workspace for M = %lld rows (h [M, %lld], "
                                   "a [M, %lld], h2 [M, %lld]) overflows size_t", op, (long long)d->M,
                                   (long long)d->N1, (long long)d->K2, (long long)d->N2);
        total += up256(n);
    }
    l->total = total;
    return RUDNN_STATUS_SUCCESS;
}

/* t's reference moved by `index` elements of t's dtype (I4: index values, index even). */
static rudnn_mem_ref_t at_elem(const rudnn_tensor_t *t, int64_t index)
{
    if (!t)
        return (rudnn_mem_ref_t){NULL, 0};
    rudnn_mem_ref_t r = rudnn_mem_of(t);
    r.offset += t->dtype == RUDNN_I4 ? (size_t)index / 2 : (size_t)index * rudnn_dtype_size(t->dtype);
    return r;
}

/* Length of a per-tensor / per-channel vector of the expert form or not: 1 or its channels. */
static int64_t per_len(const rudnn_tensor_t *t, const ffn_dims_t *d)
{
    return d->experts ? (t->rank == 2 ? t->dims[1] : 1) : t->dims[0];
}

/* One expert's rows [r0, r0 + rows) through the four steps. */
static rudnn_status_t run_expert(const char *op, rudnn_queue_t queue, const rudnn_ffn_args_t *a, const ffn_dims_t *d,
                                 const ffn_layout_t *l, void *ws, int64_t e, int64_t r0, int64_t rows,
                                 const rudnn_tensor_t *y)
{
    const rudnn_ffn_kernels_t *k = RUDNN_FAMILY_TABLE(queue->context->backend, ffn);
    void *qh = queue->handle;
    rudnn_ffn_gemm_plan_t g1, g2;
    gemm_plans(a, d, &g1, &g2, rows);
    const size_t asz = rudnn_dtype_size(l->a_dtype);
    const rudnn_mem_ref_t h1 = {ws, l->h1 + (size_t)r0 * (size_t)d->N1 * rudnn_dtype_size(l->h_dtype)};
    const rudnn_mem_ref_t act = {ws, l->a + (size_t)r0 * (size_t)d->K2 * asz};
    const int direct = y_from_gemm(a, d);
    const rudnn_mem_ref_t h2 = direct ? at_elem(y, r0 * d->N2) : (rudnn_mem_ref_t){ws, l->h2 + (size_t)r0 * (size_t)d->N2 * 4};
    const rudnn_mem_ref_t scratch = {l->scratch_bytes ? ws : NULL, l->scratch};
    const int64_t el1 = d->experts ? e * d->K1 * d->N1 : 0, el2 = d->experts ? e * d->K2 * d->N2 : 0;

    /* y is not empty (rudnn_ffn): K1 = N2 >= 1, and N1 >= 1 where K2 >= 1 */
    if (d->K2 > 0) {
        const int64_t s1 = d->experts ? e * g1.groups * d->N1 : 0;
        const rudnn_mem_ref_t x = at_elem(a->x, r0 * d->K1), w1 = at_elem(a->weight1, el1);
        const rudnn_mem_ref_t aqs1 = at_elem(a->antiquant_scale1, s1), aqo1 = at_elem(a->antiquant_offset1, s1);
        const rudnn_mem_ref_t b1 = at_elem(a->bias1, e * d->N1);
        rudnn_ffn_act_plan_t ap = {.rows = rows, .n1 = d->N1, .k2 = d->K2, .activation = a->activation,
                                   .h_dtype = l->h_dtype, .has_bias = a->bias1 != NULL,
                                   .bias_dtype = a->bias1 ? a->bias1->dtype : RUDNN_F32,
                                   .pre_dtype = act_pre_dtype(a, d), .out_dtype = l->a_dtype};
        const int64_t s2 = d->experts ? e * g2.groups * d->N2 : 0;
        const rudnn_ffn_second_t second = {&g2, at_elem(a->weight2, el2), at_elem(a->antiquant_scale2, s2),
                                           at_elem(a->antiquant_offset2, s2), h2};
        const int both = d->sc != FFN_QUANT && RUDNN_KERNEL_ENTRY(k, gemm_act_gemm); /* they may overlap */
        if (both) {
            TRY(rudnn_kernel_status(op, RUDNN_KERNEL_ENTRY(k, gemm_act_gemm)(qh, &g1, &ap, x, w1, aqs1, aqo1, b1,
                                                                              scratch, h1, act, &second)));
        } else if (d->sc != FFN_QUANT && RUDNN_KERNEL_ENTRY(k, gemm_act)) { /* may fuse a split k's sum and act */
            TRY(rudnn_kernel_status(
                op, RUDNN_KERNEL_ENTRY(k, gemm_act)(qh, &g1, &ap, x, w1, aqs1, aqo1, b1, scratch, h1, act)));
        } else {
            TRY(rudnn_kernel_status(op, k->gemm(qh, &g1, x, w1, aqs1, aqo1, scratch, h1)));
            rudnn_mem_ref_t deq = {NULL, 0}, scale = {NULL, 0}, offset = {NULL, 0};
            if (d->sc == FFN_QUANT) {
                ap.deq_dtype = a->deq_scale1->dtype;
                ap.deq_len = per_len(a->deq_scale1, d);
                ap.scale_len = per_len(a->scale, d);
                deq = at_elem(a->deq_scale1, e * ap.deq_len);
                scale = at_elem(a->scale, e * ap.scale_len);
                offset = at_elem(a->offset, e);
            }
            TRY(rudnn_kernel_status(op, k->act(qh, &ap, h1, b1, deq, scale, offset, act)));
        }
        if (!both)
            TRY(rudnn_kernel_status(op, k->gemm(qh, &g2, act, second.b, second.scale, second.offset, scratch, h2)));
    } else { /* K2 = 0: a W2 is 0 (y's dtypes and F32 / I32 all have 0 as zero bytes) */
        TRY(rudnn_kernel_status(op, queue->context->backend->mem_fill(
                                        qh, h2, 0, (size_t)rows * d->N2 * rudnn_dtype_size(g2.c_dtype))));
    }
    if (direct)
        return RUDNN_STATUS_SUCCESS;
    rudnn_ffn_out_plan_t op2 = {.rows = rows, .n = d->N2, .h_dtype = l->acc, .has_bias = a->bias2 != NULL,
                                .bias_dtype = a->bias2 ? a->bias2->dtype : RUDNN_F32, .y_dtype = y->dtype};
    rudnn_mem_ref_t deq2 = {NULL, 0};
    if (d->sc == FFN_QUANT) {
        op2.deq_dtype = a->deq_scale2->dtype;
        op2.deq_len = per_len(a->deq_scale2, d);
        deq2 = at_elem(a->deq_scale2, e * op2.deq_len);
    }
    return rudnn_kernel_status(op, k->out(qh, &op2, h2, at_elem(a->bias2, e * d->N2), deq2,
                                          at_elem(y, r0 * d->N2)));
}

/* Whether the expert form runs as grouped products (hal/ffn.h gemm_grouped: one launch a product
 * for all experts, the activation once over all rows): F16 / BF16 x, float or weight-only weights,
 * no bias (h in x's dtype or F32 by the precision, y written by the second product), x, the
 * weights and y 16-byte aligned (scales and offsets 4-byte), and the backend takes both products. */
static int grouped_fits(rudnn_queue_t queue, const rudnn_ffn_args_t *a, const ffn_dims_t *d, int64_t rows,
                        int64_t rows_max, const rudnn_tensor_t *y)
{
    const rudnn_ffn_kernels_t *k = RUDNN_FAMILY_TABLE(queue->context->backend, ffn);
    int (*fits)(void *, const rudnn_ffn_gemm_plan_t *, int64_t) = k ? RUDNN_KERNEL_ENTRY(k, gemm_grouped_fits) : NULL;
    const int x16 = a->x->dtype == RUDNN_F16 || a->x->dtype == RUDNN_BF16;
    if (!fits || !RUDNN_KERNEL_ENTRY(k, gemm_grouped) || !d->experts || !x16 || d->sc == FFN_QUANT || a->bias1 ||
        !y_from_gemm(a, d) || d->K2 == 0 || rows > (int64_t)UINT32_MAX)
        return 0;
    const rudnn_tensor_t *t[4] = {a->x, a->weight1, a->weight2, y};
    for (int i = 0; i < 4; i++)
        if (rudnn_mem_of(t[i]).offset % 16)
            return 0;
    const rudnn_tensor_t *q[4] = {a->antiquant_scale1, a->antiquant_offset1, a->antiquant_scale2,
                                  a->antiquant_offset2}; /* column pairs read as words */
    for (int i = 0; i < 4; i++)
        if (q[i] && rudnn_mem_of(q[i]).offset % 4)
            return 0;
    rudnn_ffn_gemm_plan_t g1, g2;
    gemm_plans(a, d, &g1, &g2, rows);
    g1.rows_max = g2.rows_max = rows_max;
    void *dev = queue->context->device;
    return fits(dev, &g1, d->E) && fits(dev, &g2, d->E);
}

/* The expert form as grouped products: the experts' first rows to the workspace, x W1 for all
 * experts, the activation over all rows (in x W1's epilogue where the backend fuses it), a W2 into
 * y (rows [0, starts[E])). */
static rudnn_status_t run_grouped(const char *op, rudnn_queue_t queue, const rudnn_ffn_args_t *a,
                                  const ffn_dims_t *d, const ffn_layout_t *l, void *ws, const int64_t *starts,
                                  int64_t rows_max, const rudnn_tensor_t *y)
{
    const rudnn_ffn_kernels_t *k = RUDNN_FAMILY_TABLE(queue->context->backend, ffn);
    void *qh = queue->handle;
    const int64_t rows = starts[d->E];
    uint32_t *first = rudnn_host_malloc((size_t)(d->E + 1) * sizeof(uint32_t));
    if (!first)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (expert rows)", op);
    for (int64_t e = 0; e <= d->E; e++)
        first[e] = (uint32_t)starts[e];
    const rudnn_mem_ref_t offsets = {ws, l->offsets};
    rudnn_status_t st = rudnn_kernel_status(
        op, queue->context->backend->mem_write(qh, offsets, first, (size_t)(d->E + 1) * sizeof(uint32_t)));
    free(first);
    TRY(st);
    rudnn_ffn_gemm_plan_t g1, g2;
    gemm_plans(a, d, &g1, &g2, rows);
    g1.rows_max = g2.rows_max = rows_max;
    const rudnn_mem_ref_t h1 = {ws, l->h1}, act = {ws, l->a};
    const rudnn_mem_ref_t s1 = at_elem(a->antiquant_scale1, 0), o1 = at_elem(a->antiquant_offset1, 0);
    const rudnn_mem_ref_t s2 = at_elem(a->antiquant_scale2, 0), o2 = at_elem(a->antiquant_offset2, 0);
    const rudnn_ffn_act_plan_t ap = {.rows = rows, .n1 = d->N1, .k2 = d->K2, .activation = a->activation,
                                     .h_dtype = l->h_dtype, .has_bias = 0, .bias_dtype = RUDNN_F32,
                                     .pre_dtype = act_pre_dtype(a, d), .out_dtype = l->a_dtype};
    int (*act_fits)(void *, const rudnn_ffn_gemm_plan_t *, const rudnn_ffn_act_plan_t *, int64_t) =
        RUDNN_KERNEL_ENTRY(k, gemm_grouped_act_fits);
    if (act_fits && RUDNN_KERNEL_ENTRY(k, gemm_grouped_act) && act_fits(queue->context->device, &g1, &ap, d->E)) {
        /* the activation in the first product's epilogue: no h */
        TRY(rudnn_kernel_status(op, RUDNN_KERNEL_ENTRY(k, gemm_grouped_act)(qh, &g1, &ap, d->E, rudnn_mem_of(a->x),
                                                                          rudnn_mem_of(a->weight1), offsets, act)));
    } else {
        TRY(rudnn_kernel_status(op, RUDNN_KERNEL_ENTRY(k, gemm_grouped)(qh, &g1, d->E, rudnn_mem_of(a->x),
                                                                      rudnn_mem_of(a->weight1), s1, o1, offsets,
                                                                      h1)));
        const rudnn_mem_ref_t none = {NULL, 0};
        TRY(rudnn_kernel_status(op, k->act(qh, &ap, h1, none, none, none, none, act)));
    }
    return rudnn_kernel_status(op, RUDNN_KERNEL_ENTRY(k, gemm_grouped)(qh, &g2, d->E, act, rudnn_mem_of(a->weight2),
                                                                     s2, o2, offsets, rudnn_mem_of(y)));
}

static rudnn_status_t check_table(const char *op, rudnn_queue_t queue)
{
    if (RUDNN_FAMILY_TABLE(queue->context->backend, ffn))
        return RUDNN_STATUS_SUCCESS;
    return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: the %s backend has no FFN kernels", op,
                           queue->context->backend->name);
}

/* ---- public entries ------------------------------------------------------------------------ */

rudnn_status_t rudnn_ffn_workspace_size(rudnn_queue_t queue, const rudnn_ffn_args_t *args, const rudnn_tensor_t *y,
                                        size_t *bytes)
{
    const char *op = "ffn_workspace_size";
    rudnn_clear_error();
    TRY(rudnn_check_queue(op, queue));
    TRY(rudnn_check_arg(op, "args", args));
    TRY(rudnn_check_arg(op, "y", y));
    TRY(rudnn_check_arg(op, "bytes", bytes));
    ffn_dims_t d;
    TRY(validate(op, queue, args, y, &d));
    TRY(check_table(op, queue));
    ffn_layout_t l;
    TRY(plan_layout(op, queue, args, &d, &l));
    *bytes = l.total;
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_ffn(rudnn_queue_t queue, const rudnn_ffn_args_t *args, rudnn_buffer_t workspace,
                         size_t workspace_bytes, const rudnn_tensor_t *y)
{
    const char *op = "ffn";
    rudnn_clear_error();
    ffn_dims_t d;
    TRY(validate(op, queue, args, y, &d));
    TRY(check_table(op, queue));
    ffn_layout_t l;
    TRY(plan_layout(op, queue, args, &d, &l));
    TRY(check_workspace(op, queue, args, y, workspace, workspace_bytes, l.total));
    int64_t one[2] = {0, d.M}, *starts = one;
    const int64_t experts = d.experts ? d.E : 1;
    if (d.experts)
        TRY(read_expert_rows(op, queue, args, &d, &starts));
    const int64_t rows_total = y_empty(&d) ? 0 : starts[experts]; /* rows to compute */
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    void *ws = workspace ? workspace->mem : NULL;
    const int pooled = rows_total > 0 && l.total > 0 && !workspace; /* total 0: K2 = 0, y written directly */
    if (pooled)
        st = rudnn_kernel_status(op, rudnn_pool_acquire(queue, l.total, &ws));
    int64_t rows_max = 0;
    for (int64_t e = 0; e < experts; e++)
        rows_max = starts[e + 1] - starts[e] > rows_max ? starts[e + 1] - starts[e] : rows_max;
    if (!st && rows_total > 0 && grouped_fits(queue, args, &d, rows_total, rows_max, y))
        st = run_grouped(op, queue, args, &d, &l, ws, starts, rows_max, y);
    else
        for (int64_t e = 0; e < experts && rows_total > 0 && !st; e++)
            if (starts[e + 1] > starts[e])
                st = run_expert(op, queue, args, &d, &l, ws, e, starts[e], starts[e + 1] - starts[e], y);
    if (pooled)
        rudnn_pool_release(queue, ws, l.total);
    if (starts != one)
        free(starts);
    return st;
}
