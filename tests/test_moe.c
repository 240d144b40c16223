/* Numeric tests of the MoE family (include/rudnn/moe.h) against the FP64
 * references of reference/moe_ref.c, run once per backend (meson registers
 * moe-opencl, moe-cuda, moe-hip with RUDNN_BACKEND set). Each family runs for
 * F32, F16 and BF16 (logits, tokens and expert weights in that dtype, except
 * the cases marked "F32 logits"):
 *
 *   route_softmax  ties (grid logits, all equal), NaN / +inf / all -inf /
 *                  -inf among finite rows (NaN weights, experts 0..k-1),
 *                  top_k = 1 and E, E = 1, T = 0 and 1, renormalize on/off,
 *                  E = 256 and 1024 rows
 *   route_grouped  the worked example of DESIGN.md section 8 (also checked
 *                  against its literal result), group_top_two on/off, with
 *                  and without bias, many (E, groups, selected, k) including
 *                  one expert per group, selected = groups, top_k = 64,
 *                  E = 1024; ties, NaN and +-inf rows; T = 0 and 1
 *   dispatch       counts / offsets / positions exact (pair order), tokens
 *                  bit-identical to the input rows, experts that receive no
 *                  token, one expert that receives every token, top_k = E,
 *                  T = 0, T = 1, H = 1, E = 1, E = 256, 8192 pairs, E = 16384
 *   pipeline       route, dispatch, SwiGLU experts, combine with H and I not
 *                  multiples of 8; each stage is checked against the
 *                  reference computed from what the previous stage left on
 *                  the device; Scalar, Auto (bit-identical to the strategy it
 *                  resolves to) and TensorCore (see below); explicit
 *                  workspace of rudnn_swiglu_experts_workspace_size bytes
 *                  bit-identical to the NULL workspace; the one-call forms
 *                  bit-identical to the split path (grouped: with Scalar,
 *                  Auto and TensorCore); NaN routing rows giving NaN
 *                  output rows;
 *                  the plan destroyed before combine (the dispatched object
 *                  keeps it alive); one expert with 160 rows (several row
 *                  tiles of the GPU kernels)
 *   experts_grouped rudnn_swiglu_experts_forward_grouped on caller rows grouped
 *                  by expert_token_nums (counts and running totals, experts
 *                  without rows, rows past the sum left unwritten and unread,
 *                  R = 0, all counts 0, unaligned offsets) against
 *                  moe_ref_expert_row; Scalar, Auto, TensorCore where it runs
 *
 * TensorCore must run for F16/BF16 on cuda with aligned operands, and on opencl when the plugin
 * was built with CLBlast (TEST_HAVE_CLBLAST below); it must answer NOT_SUPPORTED naming
 * TensorCore, and write nothing, for F32 everywhere, on cuda with unaligned operands (no silent
 * fallback to another kernel) and on opencl without CLBlast (the F32 staging overflowing size_t is
 * refused too). When it runs: checked against the reference, with an explicit workspace of the
 * size asked for (bit-identical, nothing written past it) and one byte short of it (BAD_PARAM,
 * nothing written). Auto must pick TensorCore where it runs, except on PoCL's CPU device, where
 * the OpenCL plugin prefers its scalar kernels (CLBlast measured slower there). Every forward
 * runs the kernel rudnn_swiglu_experts_choose names (rudnn_last_kernel), and every kernel the
 * backend lists is run by name once per case (check_every_kernel).
 *
 * Every call's outputs are poisoned first: every element must be written,
 * nothing outside them may change, and the inputs (logits, bias, input,
 * expert weights, earlier stages' outputs) stay byte-identical. Plan and
 * dispatched views are checked for dtype and shape.
 *
 * Routing test data are on a grid (k/8 or k/64, bias k/16) so that distinct
 * keys are far apart compared to FP32 error and ties are exact; a row whose
 * deciding keys come closer than 1e-4 to a tie is redrawn (reference gap).
 *
 * Usage: test_moe [glob]   runs only tests whose name matches glob
 * (e.g. "pipeline/f16"). RUDNN_TEST_VERBOSE=1 prints each case's worst
 * error as a fraction of the allowed one. */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "reference/moe_ref.h"

#define GAP_MIN 1e-4

static const rudnn_dtype_t dtypes[] = {RUDNN_F32, RUDNN_F16, RUDNN_BF16};
#define DTYPE_COUNT 3

static char backend_name[32];
static int pocl_cpu;   /* the device is PoCL's CPU device */
static int nvidia_ocl; /* OpenCL on NVIDIA's driver */

/* The weights and expert outputs sit at small element offsets into their buffers, so most of them
 * are not 16-byte aligned: the CUDA plugin then takes its documented scalar fallback instead of its
 * tensor-core kernels (which need 16-byte aligned operands). Families whose point is a tensor-core
 * or cuBLAS path set aligned_operands: the offsets become multiples of 8 elements (16 bytes for
 * F16/BF16). */
static int aligned_operands;
/* set while a family runs whose path rounds g and u to the dtype (moe_ref_expert_row) */
static int gu_rounded;
static size_t operand_offset(size_t elems)
{
    return aligned_operands ? 8 * elems : elems;
}

/* CLBlast at build time: the OpenCL plugin uses it when meson finds it with
 * its header, and then the header is visible here too (a fact independent of
 * what the library answers). */
#if defined(__has_include)
#if __has_include(<clblast_c.h>)
#define TEST_HAVE_CLBLAST 1
#endif
#endif
#ifndef TEST_HAVE_CLBLAST
#define TEST_HAVE_CLBLAST 0
#endif

/* Bytes after an explicit TensorCore workspace that must stay untouched. */
#define WS_GUARD 4096

/* ---- cases ------------------------------------------------------------------------- */

typedef enum { R_SOFTMAX, R_GROUPED } routing_t;

enum data_kind {
    D_GRID,       /* logits k/8 in [-4, 4]: ties are frequent */
    D_GRID_FINE,  /* k/64 in [-4, 4] */
    D_EQUAL,      /* every logit 0 */
    D_NONFINITE,  /* softmax rows by t % 8: grid, NaN, +inf, all -inf, all -inf but two,
                     NaN and +inf, +inf and -inf, grid */
    D_GNONFINITE, /* grouped rows by t % 5: grid, all NaN, one NaN, two +inf and three -inf, grid */
    D_NO_TOKEN,   /* experts e % 5 == 1 at -4, the others in [-2, 4]: never selected */
    D_ONE_EXPERT, /* expert 5 (mod E) at 4, the others in [-4, 0] */
    D_WORKED,     /* x_i = i, bias [10, 0, ...] */
};

enum stage { S_ROUTE, S_DISPATCH, S_ALL };

typedef struct mcase {
    const char *label;
    routing_t routing;
    int64_t T, E;
    int top_k, renorm;
    int groups, selected, top_two, bias;
    float scale;
    int data;
    int stage;
    int64_t H, I;
    int logits_f32;   /* logits (and so routing weights) F32 whatever the dtype */
    int destroy_plan; /* destroy the plan right after dispatch */
} mcase_t;

#define SOFT(label, T, E, k, renorm, data, stage, H, I)                                                       \
    {label, R_SOFTMAX, T, E, k, renorm, 0, 0, 0, 0, 1.0f, data, stage, H, I, 0, 0}
#define GROUPED(label, T, E, k, renorm, groups, selected, top_two, bias, scale, data, stage, H, I)             \
    {label, R_GROUPED, T, E, k, renorm, groups, selected, top_two, bias, scale, data, stage, H, I, 0, 0}

/* ---- small device helpers ---------------------------------------------------------------------- */

/* 1 when st is SUCCESS and the error string is empty; logs otherwise. */
static int check_ok(rt_log_t *log, const char *label, const char *what, rudnn_status_t st)
{
    if (st != RUDNN_STATUS_SUCCESS) {
        rt_logf(log, "  %s: %s returned %s: %s\n", label, what, rudnn_status_string(st), rudnn_last_error());
        return 0;
    }
    if (strcmp(rudnn_last_error(), "") != 0) {
        rt_logf(log, "  %s: %s succeeded but rudnn_last_error() is \"%s\"\n", label, what, rudnn_last_error());
        return 0;
    }
    return 1;
}

static int check_view(rt_log_t *log, const char *label, const char *what, const rudnn_tensor_t *t,
                      rudnn_dtype_t dtype, int rank, int64_t d0, int64_t d1)
{
    int64_t want[2] = {d0, d1};
    int ok = t->dtype == dtype && t->rank == rank && t->buffer != NULL && rudnn_tensor_is_contiguous(t);
    for (int i = 0; ok && i < rank; i++)
        ok = t->dims[i] == want[i];
    if (!ok) {
        char got_s[96], want_s[96];
        rt_logf(log, "  %s: %s view is %s %s, expected %s %s\n", label, what, rudnn_dtype_name(t->dtype),
                rt_dims_str(t->rank, t->dims, got_s, sizeof got_s), rudnn_dtype_name(dtype),
                rt_dims_str(rank, want, want_s, sizeof want_s));
    }
    return ok;
}

/* Reads a (view) tensor into host memory; nothing for an empty tensor. */
static int read_raw(rt_log_t *log, const char *label, const rudnn_tensor_t *t, void *host)
{
    size_t bytes = rudnn_tensor_bytes(t);
    if (!bytes)
        return 1;
    return check_ok(log, label, "tensor_read", rudnn_tensor_read(rt_queue, t, host, bytes));
}

/* Inputs that no call may change (an rt_guard_t): each whole buffer is
 * snapshot when added and compared at the end. */
static void in_add(rt_guard_t *g, const rt_tensor_t *t, const char *name)
{
    rt_guard_snapshot(rt_guard_track(g, rt_queue, t, name));
}

static int in_check(rt_guard_t *g, rt_log_t *log, const char *label)
{
    int ok = rt_guard_changed(g) == 0;
    for (int i = 0; i < g->count; i++)
        if (g->items[i].changed)
            rt_logf(log, "  %s: the %s buffer was modified (it is only read)\n", label, g->items[i].name);
    return ok;
}

/* ---- data --------------------------------------------------------------------------------------- */

static float grid(rt_rng_t *rng, int lo_steps, int hi_steps, int per_unit)
{
    return (float)((double)((int64_t)rt_rng_below(rng, (uint64_t)(hi_steps - lo_steps + 1)) + lo_steps) / per_unit);
}

/* Fills row t of the logits for the case's data kind. */
static void make_row(const mcase_t *c, rt_rng_t *rng, int64_t t, float *x)
{
    const int64_t E = c->E;
    for (int64_t e = 0; e < E; e++)
        x[e] = grid(rng, -32, 32, 8);
    switch (c->data) {
    case D_GRID_FINE:
        for (int64_t e = 0; e < E; e++)
            x[e] = grid(rng, -256, 256, 64);
        break;
    case D_EQUAL:
        for (int64_t e = 0; e < E; e++)
            x[e] = 0.0f;
        break;
    case D_WORKED:
        for (int64_t e = 0; e < E; e++)
            x[e] = (float)e;
        break;
    case D_NO_TOKEN:
        for (int64_t e = 0; e < E; e++)
            x[e] = e % 5 == 1 ? -4.0f : grid(rng, -16, 32, 8);
        break;
    case D_ONE_EXPERT:
        for (int64_t e = 0; e < E; e++)
            x[e] = e == 5 % E ? 4.0f : grid(rng, -32, 0, 8);
        break;
    case D_NONFINITE: {
        size_t i1 = (size_t)rt_rng_below(rng, (uint64_t)E);
        size_t i2 = (i1 + 1 + (size_t)rt_rng_below(rng, (uint64_t)(E > 1 ? E - 1 : 1))) % (size_t)E;
        switch (t % 8) {
        case 1: x[i1] = NAN; break;
        case 2: x[i1] = INFINITY; break;
        case 3:
            for (int64_t e = 0; e < E; e++)
                x[e] = -INFINITY;
            break;
        case 4:
            for (int64_t e = 0; e < E; e++)
                if ((size_t)e != i1 && (size_t)e != i2)
                    x[e] = -INFINITY;
            break;
        case 5:
            x[i1] = NAN;
            x[i2] = INFINITY;
            break;
        case 6:
            x[i1] = INFINITY;
            x[i2] = -INFINITY;
            break;
        default: break;
        }
        break;
    }
    case D_GNONFINITE: {
        switch (t % 5) {
        case 1:
            for (int64_t e = 0; e < E; e++)
                x[e] = NAN;
            break;
        case 2: x[rt_rng_below(rng, (uint64_t)E)] = NAN; break;
        case 3:
            for (int n = 0; n < 5; n++)
                x[rt_rng_below(rng, (uint64_t)E)] = n < 2 ? INFINITY : -INFINITY;
            break;
        default: break;
        }
        break;
    }
    default: break;
    }
}

/* 1 for softmax rows that must come out NaN (NaN or +inf present, or all -inf). */
static int softmax_row_is_nan(const float *x, int64_t E)
{
    int all_ninf = 1;
    for (int64_t e = 0; e < E; e++) {
        if (isnan(x[e]) || (isinf(x[e]) && x[e] > 0))
            return 1;
        all_ninf &= isinf(x[e]) && x[e] < 0;
    }
    return all_ninf;
}

static moe_ref_grouped_t ref_grouped_options(const mcase_t *c)
{
    moe_ref_grouped_t o = {c->top_k, c->groups, c->selected, c->top_two, c->renorm, (double)c->scale};
    return o;
}

/* Logits (quantized to ldt), bias and the reference routing; rows whose
 * deciding keys are nearly tied are redrawn. Also checks the reference
 * against the contract's literal statements (worked example, NaN rows). */
static int make_routing(const mcase_t *c, rudnn_dtype_t ldt, rt_rng_t *rng, float *logits, float *bias,
                        uint32_t *idx, double *w, rt_log_t *log, const char *label)
{
    const int64_t E = c->E;
    const int k = c->top_k;
    moe_ref_grouped_t go = ref_grouped_options(c);
    if (bias)
        for (int64_t e = 0; e < E; e++)
            bias[e] = c->data == D_WORKED ? (e == 0 ? 10.0f : 0.0f) : grid(rng, -8, 8, 16);
    for (int64_t t = 0; t < c->T; t++) {
        float *x = logits + t * E;
        double gap = 0.0;
        for (int attempt = 0; attempt < 500 && !(gap >= GAP_MIN); attempt++) {
            make_row(c, rng, t, x);
            ref_quantize(ldt, x, x, (size_t)E);
            gap = c->routing == R_SOFTMAX ? moe_ref_route_softmax_row(x, E, k, c->renorm, idx + t * k, w + t * k)
                                          : moe_ref_route_grouped_row(x, bias, E, &go, idx + t * k, w + t * k);
        }
        if (!(gap >= GAP_MIN)) {
            rt_logf(log, "  %s: test data: row %lld keeps keys %.3g apart from a tie (need %g)\n", label,
                    (long long)t, gap, GAP_MIN);
            return 0;
        }
        /* the reference against the contract's own words */
        if (c->routing == R_SOFTMAX && softmax_row_is_nan(x, E)) {
            for (int j = 0; j < k; j++)
                if (idx[t * k + j] != (uint32_t)j || !isnan(w[t * k + j])) {
                    rt_logf(log, "  %s: reference self-check: NaN row %lld slot %d gives expert %u weight %g\n",
                            label, (long long)t, j, idx[t * k + j], w[t * k + j]);
                    return 0;
                }
        }
        if (c->data == D_WORKED && c->routing == R_GROUPED && E == 8 && k == 2 && c->scale == 2.0f &&
            c->renorm) {
            double s3 = 1.0 / (1.0 + exp(-3.0));
            double w0 = 2.0 * 0.5 / (0.5 + s3), w1 = 2.0 * s3 / (0.5 + s3);
            if (idx[t * k] != 0 || idx[t * k + 1] != 3 || fabs(w[t * k] - w0) > 1e-14 ||
                fabs(w[t * k + 1] - w1) > 1e-14) {
                rt_logf(log, "  %s: reference self-check: worked example gives [%u, %u] [%.17g, %.17g]\n", label,
                        idx[t * k], idx[t * k + 1], w[t * k], w[t * k + 1]);
                return 0;
            }
        }
    }
    return 1;
}

/* ---- one case ------------------------------------------------------------------------------------ */

/* What TensorCore must do here: 1 run, 0 NOT_SUPPORTED, -1 either. */
static int tensor_core_expected(rudnn_dtype_t dt)
{
    if (dt == RUDNN_F32)
        return 0;
    if (strcmp(backend_name, "cuda") == 0)
        return aligned_operands ? 1 : 0; /* unaligned: the matrix kernels cannot run, and say so */
    if (strcmp(backend_name, "opencl") == 0)
        return TEST_HAVE_CLBLAST;
    return -1;
}

/* Where TensorCore runs, what Auto must pick: 1 TensorCore, 0 Scalar, -1 either. */
static int auto_tensor_core_expected(void)
{
    if (strcmp(backend_name, "cuda") == 0)
        return 1;
    if (strcmp(backend_name, "opencl") == 0)
        return pocl_cpu ? 0 : nvidia_ocl ? 1 : -1;
    return -1;
}

typedef struct state {
    /* device */
    rt_tensor_t L, B, X, G, U, D, EO, EO_WS, EO_AUTO, EO_TC, EO_TC_WS, EO_K, OUT, OUT_ONE, OUT_AUTO,
        OUT_ONE_AUTO, OUT_TC, OUT_ONE_TC;
    rudnn_routing_plan_t plan;
    rudnn_dispatched_t disp;
    rudnn_swiglu_experts_t experts;
    rudnn_buffer_t ws, ws_tc;
    rt_guard_t inputs;
    /* host */
    float *logits, *bias, *x, *gate, *up, *down;
    uint32_t *ref_idx, *ref_counts, *ref_offsets, *ref_pos;
    double *ref_w;
    uint32_t *idx, *counts, *offsets, *pos;
    float *w, *tokens, *eo, *eo2, *out, *out2;
    uint8_t *raw_x, *raw_tokens;
    double *ref, *tol, *scratch;
} state_t;

static void state_free(state_t *s)
{
    rt_guard_free(&s->inputs);
    rudnn_dispatched_destroy(s->disp);
    rudnn_routing_plan_destroy(s->plan);
    rudnn_swiglu_experts_destroy(s->experts);
    if (s->ws)
        rudnn_buffer_destroy(s->ws);
    if (s->ws_tc)
        rudnn_buffer_destroy(s->ws_tc);
    rt_tensor_t *all[] = {&s->L, &s->B, &s->X, &s->G, &s->U, &s->D, &s->EO, &s->EO_WS, &s->EO_AUTO, &s->EO_TC,
                          &s->EO_TC_WS, &s->EO_K, &s->OUT, &s->OUT_ONE, &s->OUT_AUTO, &s->OUT_ONE_AUTO, &s->OUT_TC,
                          &s->OUT_ONE_TC};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        rt_tensor_destroy(all[i]);
    void *host[] = {s->logits, s->bias, s->x, s->gate, s->up, s->down, s->ref_idx, s->ref_counts,
                    s->ref_offsets, s->ref_pos, s->ref_w, s->idx, s->counts, s->offsets, s->pos, s->w,
                    s->tokens, s->eo, s->eo2, s->out, s->out2, s->raw_x, s->raw_tokens, s->ref, s->tol,
                    s->scratch};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        free(host[i]);
}

static rudnn_status_t call_route(const mcase_t *c, state_t *s)
{
    if (c->routing == R_SOFTMAX) {
        rudnn_routing_options_t o = {c->top_k, c->renorm};
        return rudnn_moe_route(rt_queue, &s->L.t, &o, &s->plan);
    }
    rudnn_grouped_routing_options_t o = {c->top_k, c->groups, c->selected, c->top_two, c->renorm, c->scale};
    return rudnn_moe_route_sigmoid_grouped(rt_queue, &s->L.t, c->bias ? &s->B.t : NULL, &o, &s->plan);
}

static rudnn_status_t call_one(const mcase_t *c, state_t *s, rudnn_moe_strategy_t strategy, const rt_tensor_t *out)
{
    if (c->routing == R_SOFTMAX) {
        rudnn_routing_options_t o = {c->top_k, c->renorm};
        return rudnn_swiglu_experts_forward(rt_queue, s->experts, &s->X.t, &s->L.t, &o, &out->t);
    }
    rudnn_grouped_routing_options_t o = {c->top_k, c->groups, c->selected, c->top_two, c->renorm, c->scale};
    return rudnn_swiglu_experts_forward_sigmoid_grouped(rt_queue, s->experts, &s->X.t, &s->L.t,
                                                        c->bias ? &s->B.t : NULL, &o, strategy, &out->t);
}

/* expert_output of one strategy: NULL workspace or ws/ws_bytes. Checks the
 * outputs' bytes and, when values is given, decodes them. */
static int run_experts(state_t *s, rudnn_moe_strategy_t strategy, rudnn_buffer_t ws, size_t ws_bytes,
                       const rt_tensor_t *eo, float *values, rt_log_t *log, const char *label, const char *what)
{
    rudnn_moe_choice_t choice;
    char cw[160];
    snprintf(cw, sizeof cw, "swiglu_experts_choose for %s", what);
    if (!check_ok(log, label, cw, rudnn_swiglu_experts_choose(s->experts, s->disp, &eo->t, strategy, &choice)))
        return 0;
    rt_out_watch_t w;
    rt_out_watch_begin(&w, eo);
    rudnn_status_t st = rudnn_swiglu_experts_forward_dispatched(rt_queue, s->experts, s->disp, strategy, ws, ws_bytes,
                                                               &eo->t);
    int ok = check_ok(log, label, what, st);
    /* what choose reported is what ran (a call without rows launches nothing) */
    const char *ran = rudnn_last_kernel();
    if (ok && rudnn_tensor_numel(&eo->t) > 0 && strcmp(ran, choice.kernel) != 0) {
        rt_logf(log, "  %s: %s: choose reported kernel %s, rudnn_last_kernel() says %s ran\n", label, what,
                choice.kernel, ran[0] ? ran : "(none)");
        ok = 0;
    }
    ok &= rt_out_watch_end(&w, ok && rudnn_tensor_numel(&eo->t) > 0, values, log, label, what);
    return ok;
}


/* Expert output against the reference computed from the device's tokens. */
static int check_experts(const mcase_t *c, rudnn_dtype_t dt, state_t *s, const float *eo, rt_log_t *log,
                         const char *label, const char *what, double *worst)
{
    const int64_t H = c->H, I = c->I;
    ref_report_t rep;
    ref_report_init(&rep);
    for (int64_t e = 0; e < c->E; e++) {
        for (uint32_t r = s->ref_offsets[e]; r < s->ref_offsets[e + 1]; r++) {
            moe_ref_expert_row(dt, s->tokens + (size_t)r * H, s->gate + e * I * H, s->up + e * I * H,
                               s->down + e * H * I, H, I, gu_rounded, s->scratch, s->ref + (size_t)r * H,
                               s->tol + (size_t)r * H);
        }
    }
    size_t n = (size_t)(c->T * c->top_k * H);
    moe_ref_compare(&rep, what, eo, s->ref, s->tol, n, H);
    if (rep.worst_excess > *worst)
        *worst = rep.worst_excess;
    if (rep.mismatches) {
        rt_logf(log, "  %s: %s: %zu of %zu values outside tolerance (worst %.3g x allowed):\n%s", label, what,
                rep.mismatches, rep.checked, rep.worst_excess, rep.text);
        return 0;
    }
    return 1;
}

static int compare_exact(const float *got, const float *want, size_t n, rt_log_t *log, const char *label,
                         const char *what)
{
    ref_report_t rep;
    ref_report_init(&rep);
    ref_compare_exact(&rep, what, got, want, n);
    if (rep.mismatches) {
        rt_logf(log, "  %s: %s: %zu of %zu values differ:\n%s", label, what, rep.mismatches, rep.checked, rep.text);
        return 0;
    }
    return 1;
}

/* Combines eo (the split path's expert rows under `strategy`) into out, runs the grouped one-call
 * form with the same strategy into one, and requires the two outputs to be equal bit for bit. */
static int one_call_matches_split(const mcase_t *c, state_t *s, rudnn_moe_strategy_t strategy, const char *name,
                                  const rt_tensor_t *eo, const rt_tensor_t *out, const rt_tensor_t *one, size_t nout,
                                  rt_log_t *log, const char *label)
{
    char what[96];
    rt_out_watch_t w;
    rt_out_watch_begin(&w, out);
    snprintf(what, sizeof what, "moe_combine (%s experts)", name);
    int ok = check_ok(log, label, what, rudnn_moe_combine(rt_queue, s->disp, &eo->t, &out->t));
    snprintf(what, sizeof what, "combine (%s experts)", name);
    ok &= rt_out_watch_end(&w, ok && nout > 0, s->out, log, label, what);
    rt_out_watch_begin(&w, one);
    snprintf(what, sizeof what, "swiglu_experts_forward_sigmoid_grouped (%s)", name);
    ok &= check_ok(log, label, what, call_one(c, s, strategy, one));
    snprintf(what, sizeof what, "one-call (%s)", name);
    ok &= rt_out_watch_end(&w, ok && nout > 0, s->out2, log, label, what);
    snprintf(what, sizeof what, "one-call (%s) vs split path (%s)", name, name);
    return ok && compare_exact(s->out2, s->out, nout, log, label, what);
}

/* Each expert kernel the backend lists, named through swiglu_experts_set_kernel: where choose says
 * it runs, the forward runs exactly it (rudnn_last_kernel) and matches the reference; where not,
 * the forward is NOT_SUPPORTED naming the kernel and writes nothing. Scalar kernels must run
 * everywhere; matrix-unit kernels wherever TensorCore must run (tc_expect 1), and never on CUDA
 * with unaligned operands (no silent fallback). An unknown name is BAD_PARAM listing the known. */
static int check_every_kernel(const mcase_t *c, rudnn_dtype_t dt, state_t *s, int tc_expect, rt_log_t *log,
                              const char *label, double *worst)
{
    int count = 0, ok = 1;
    if (!check_ok(log, label, "swiglu_experts_kernel_count", rudnn_swiglu_experts_kernel_count(s->experts, &count)))
        return 0;
    rudnn_status_t rs = rudnn_swiglu_experts_set_kernel(s->experts, "moe.no_such_kernel");
    if (rs != RUDNN_STATUS_BAD_PARAM || !strstr(rudnn_last_error(), "moe.no_such_kernel") ||
        !strstr(rudnn_last_error(), "moe.")) {
        rt_logf(log, "  %s: set_kernel(moe.no_such_kernel) returned %s: \"%s\"\n", label, rudnn_status_string(rs),
                rudnn_last_error());
        ok = 0;
    }
    for (int i = 0; i < count && ok; i++) {
        const char *name;
        rudnn_moe_strategy_t strategy;
        if (!check_ok(log, label, "swiglu_experts_kernel_info",
                      rudnn_swiglu_experts_kernel_info(s->experts, i, &name, &strategy)))
            return 0;
        if (rt_kernel_skipped(name))
            continue;
        if (!check_ok(log, label, "swiglu_experts_set_kernel", rudnn_swiglu_experts_set_kernel(s->experts, name)))
            return 0;
        char what[128];
        snprintf(what, sizeof what, "experts (kernel %s)", name);
        rudnn_moe_choice_t choice;
        rudnn_status_t cs = rudnn_swiglu_experts_choose(s->experts, s->disp, &s->EO_K.t, strategy, &choice);
        const int scalar = strategy == RUDNN_MOE_SCALAR;
        const int must_run = scalar || tc_expect == 1;
        const int must_not = !scalar && (tc_expect == 0 || (strcmp(backend_name, "cuda") == 0 && !aligned_operands));
        if ((cs == RUDNN_STATUS_SUCCESS && (must_not || strcmp(choice.kernel, name) != 0)) ||
            (cs != RUDNN_STATUS_SUCCESS && (must_run || cs != RUDNN_STATUS_NOT_SUPPORTED))) {
            rt_logf(log, "  %s: choose(kernel %s) returned %s (%s): \"%s\"%s\n", label, name,
                    rudnn_status_string(cs), cs ? "-" : choice.kernel, cs ? rudnn_last_error() : choice.reason,
                    must_run ? ", expected it to run" : must_not ? ", expected NOT_SUPPORTED" : "");
            ok = 0;
            break;
        }
        if (cs == RUDNN_STATUS_SUCCESS) {
            gu_rounded = strstr(name, "_gu16") != NULL; /* rounds g and u to the dtype, as PyTorch */
            ok = run_experts(s, strategy, NULL, 0, &s->EO_K, s->eo2, log, label, what) &&
                 check_experts(c, dt, s, s->eo2, log, label, what, worst);
            gu_rounded = 0;
        } else {
            rt_out_watch_t w;
            rt_out_watch_begin(&w, &s->EO_K);
            rs = rudnn_swiglu_experts_forward_dispatched(rt_queue, s->experts, s->disp, strategy, NULL, 0,
                                                         &s->EO_K.t);
            if (rs != RUDNN_STATUS_NOT_SUPPORTED || !strstr(rudnn_last_error(), name)) {
                rt_logf(log, "  %s: %s where choose said NOT_SUPPORTED returned %s: \"%s\"\n", label, what,
                        rudnn_status_string(rs), rudnn_last_error());
                ok = 0;
            }
            ok &= rt_out_watch_end(&w, 0, NULL, log, label, what);
        }
    }
    ok &= check_ok(log, label, "swiglu_experts_set_kernel(NULL)", rudnn_swiglu_experts_set_kernel(s->experts, NULL));
    return ok;
}

/* TensorCore with an explicit workspace: of the size asked for (bit-identical to tc_vals, the
 * NULL-workspace result, and no byte past it written), then one byte short of it (BAD_PARAM
 * naming the workspace; neither the output nor the workspace written). */
static int check_tc_workspace(state_t *s, int64_t pairs, const float *tc_vals, size_t neo, rt_log_t *log,
                              const char *label)
{
    size_t bytes = 0;
    if (!check_ok(log, label, "swiglu_experts_workspace_size(TensorCore)",
                  rudnn_swiglu_experts_workspace_size(s->experts, pairs, RUDNN_MOE_TENSOR_CORE, &bytes)) ||
        !check_ok(log, label, "buffer_create (TensorCore workspace)",
                  rudnn_buffer_create(rt_ctx, bytes + WS_GUARD, &s->ws_tc)))
        return 0;
    if (strcmp(backend_name, "opencl") == 0) {
        /* the F32 staging of a huge batch does not fit a size_t: refused with the reason */
        size_t huge = 0;
        rudnn_status_t rs =
            rudnn_swiglu_experts_workspace_size(s->experts, INT64_MAX / 2, RUDNN_MOE_TENSOR_CORE, &huge);
        if (rs != RUDNN_STATUS_NOT_SUPPORTED || !strstr(rudnn_last_error(), "workspace")) {
            rt_logf(log, "  %s: workspace_size(TensorCore, 2^62 rows) returned %s (%zu bytes): \"%s\", expected "
                       "NOT_SUPPORTED naming the workspace\n",
                    label, rudnn_status_string(rs), huge, rudnn_last_error());
            return 0;
        }
    }
    const size_t total = bytes + WS_GUARD;
    rudnn_buffer_fill(rt_queue, s->ws_tc, 0, 0xa5, total);
    float *vals = rt_xmalloc(neo * sizeof(float));
    int ok = run_experts(s, RUDNN_MOE_TENSOR_CORE, s->ws_tc, bytes, &s->EO_TC_WS, vals, log, label,
                         "experts (TensorCore, explicit workspace)");
    if (ok)
        ok = compare_exact(vals, tc_vals, neo, log, label, "TensorCore: explicit workspace vs NULL workspace");
    free(vals);
    uint8_t *snap = rt_buffer_snapshot(s->ws_tc, total);
    size_t past = 0;
    for (size_t i = bytes; i < total; i++)
        past += snap[i] != 0xa5;
    if (past) {
        rt_logf(log, "  %s: TensorCore wrote %zu byte(s) past the %zu workspace bytes it asked for\n", label, past,
                bytes);
        ok = 0;
    }
    if (bytes > 0) {
        rt_out_watch_t w;
        rt_out_watch_begin(&w, &s->EO_TC_WS);
        rudnn_status_t rs = rudnn_swiglu_experts_forward_dispatched(rt_queue, s->experts, s->disp,
                                                                   RUDNN_MOE_TENSOR_CORE, s->ws_tc, bytes - 1,
                                                                   &s->EO_TC_WS.t);
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", rudnn_last_error());
        if (rs != RUDNN_STATUS_BAD_PARAM || !strstr(msg, "workspace") || !strstr(msg, "kernel moe.")) {
            rt_logf(log, "  %s: TensorCore with a workspace one byte short returned %s: \"%s\", expected BAD_PARAM "
                       "naming the workspace and its kernel\n", label, rudnn_status_string(rs), msg);
            ok = 0;
        }
        ok &= rt_out_watch_end(&w, 0, NULL, log, label, "experts (TensorCore, workspace one byte short)");
        uint8_t *after = rt_buffer_snapshot(s->ws_tc, total);
        if (memcmp(after, snap, total) != 0) {
            rt_logf(log, "  %s: the rejected TensorCore call changed its workspace\n", label);
            ok = 0;
        }
        free(after);
    }
    free(snap);
    return ok;
}

static void run_case(rudnn_dtype_t dt, const mcase_t *c, const char *test, int case_index, rt_log_t *log)
{
    const rudnn_dtype_t ldt = c->logits_f32 ? RUDNN_F32 : dt;
    const int64_t T = c->T, E = c->E, H = c->H, I = c->I;
    const int k = c->top_k;
    const int64_t pairs = T * k;
    char label[256];
    snprintf(label, sizeof label, "%s [%s] T=%lld E=%lld k=%d%s%s", test, c->label, (long long)T, (long long)E, k,
             c->renorm ? " renorm" : "", c->logits_f32 ? " f32-logits" : "");
    int failed = 0, tc_runs = 0;
    double worst = 0.0;
    state_t st_, *s = &st_;
    memset(s, 0, sizeof *s);
    rt_rng_t rng;
    rt_rng_seed_case(&rng, test, case_index);

    /* ---- routing ---- */
    s->logits = rt_xmalloc((size_t)(T * E) * sizeof(float));
    s->bias = c->bias ? rt_xmalloc((size_t)E * sizeof(float)) : NULL;
    s->ref_idx = rt_xmalloc((size_t)pairs * sizeof(uint32_t));
    s->ref_w = rt_xmalloc((size_t)pairs * sizeof(double));
    s->idx = rt_xmalloc((size_t)pairs * sizeof(uint32_t));
    s->w = rt_xmalloc((size_t)pairs * sizeof(float));
    if (!make_routing(c, ldt, &rng, s->logits, s->bias, s->ref_idx, s->ref_w, log, label)) {
        failed = 1;
        goto done;
    }
    int64_t ldims[2] = {T, E};
    rt_tensor_create(&s->L, ldt, 2, ldims, 3, RT_TAIL_BYTES);
    rt_tensor_upload(&s->L, s->logits);
    in_add(&s->inputs, &s->L, "logits");
    if (c->bias) {
        int64_t bdims[1] = {E};
        rt_tensor_create(&s->B, RUDNN_F32, 1, bdims, 1, RT_TAIL_BYTES);
        rt_tensor_upload(&s->B, s->bias);
        in_add(&s->inputs, &s->B, "bias");
    }
    if (!check_ok(log, label, c->routing == R_SOFTMAX ? "moe_route" : "moe_route_sigmoid_grouped",
                  call_route(c, s))) {
        failed = 1;
        goto done;
    }
    rudnn_tensor_t vi, vw;
    if (!check_ok(log, label, "routing_plan_indices", rudnn_routing_plan_indices(s->plan, &vi)) ||
        !check_ok(log, label, "routing_plan_weights", rudnn_routing_plan_weights(s->plan, &vw)) ||
        !check_view(log, label, "plan indices", &vi, RUDNN_U32, 2, T, k) ||
        !check_view(log, label, "plan weights", &vw, ldt, 2, T, k)) {
        failed = 1;
        goto done;
    }
    {
        uint8_t *raw = rt_xmalloc((size_t)pairs * 4);
        int ok = read_raw(log, label, &vi, s->idx) && read_raw(log, label, &vw, raw);
        rt_decode(ldt, raw, s->w, (size_t)pairs);
        free(raw);
        if (!ok) {
            failed = 1;
            goto done;
        }
    }
    {
        size_t bad = 0;
        for (int64_t i = 0; i < pairs; i++) {
            if (s->idx[i] != s->ref_idx[i]) {
                if (bad < 6) {
                    int64_t t = i / k;
                    rt_logf(log, "  %s: indices[%lld, %lld] = %u, expected %u; row:", label, (long long)t,
                            (long long)(i % k), s->idx[i], s->ref_idx[i]);
                    for (int64_t e = 0; e < E && e < 16; e++)
                        rt_logf(log, " %g", (double)s->logits[t * E + e]);
                    rt_logf(log, "%s\n", E > 16 ? " ..." : "");
                }
                bad++;
            }
        }
        ref_report_t rep;
        ref_report_init(&rep);
        ref_compare(&rep, "weights", s->w, s->ref_w, T, k, moe_ref_weight_tolerance(ldt));
        if (rep.worst_excess > worst)
            worst = rep.worst_excess;
        if (bad || rep.mismatches) {
            if (bad)
                rt_logf(log, "  %s: %zu of %lld expert indices differ from the reference\n", label, bad,
                        (long long)pairs);
            if (rep.mismatches)
                rt_logf(log, "  %s: %zu of %zu routing weights outside tolerance:\n%s", label, rep.mismatches,
                        rep.checked, rep.text);
            failed = 1;
            goto done;
        }
    }
    if (c->stage == S_ROUTE)
        goto inputs;

    /* ---- dispatch ---- */
    s->x = rt_xmalloc((size_t)(T * H) * sizeof(float));
    rt_fill_uniform(&rng, s->x, (size_t)(T * H), -2.0, 2.0);
    ref_quantize(dt, s->x, s->x, (size_t)(T * H));
    int64_t xdims[2] = {T, H};
    rt_tensor_create(&s->X, dt, 2, xdims, 5, RT_TAIL_BYTES);
    rt_tensor_upload(&s->X, s->x);
    in_add(&s->inputs, &s->X, "input");
    if (!check_ok(log, label, "moe_dispatch", rudnn_moe_dispatch(rt_queue, s->plan, &s->X.t, &s->disp))) {
        failed = 1;
        goto done;
    }
    if (c->destroy_plan) {
        rudnn_routing_plan_destroy(s->plan); /* the dispatched object keeps what it needs */
        s->plan = NULL;
    }
    {
        rudnn_tensor_t vt, vc, vo, vp;
        if (!check_ok(log, label, "dispatched_tokens", rudnn_dispatched_tokens(s->disp, &vt)) ||
            !check_ok(log, label, "dispatched_counts", rudnn_dispatched_counts(s->disp, &vc)) ||
            !check_ok(log, label, "dispatched_offsets", rudnn_dispatched_offsets(s->disp, &vo)) ||
            !check_ok(log, label, "dispatched_positions", rudnn_dispatched_positions(s->disp, &vp)) ||
            !check_view(log, label, "dispatched tokens", &vt, dt, 2, pairs, H) ||
            !check_view(log, label, "dispatched counts", &vc, RUDNN_U32, 1, E, 0) ||
            !check_view(log, label, "dispatched offsets", &vo, RUDNN_U32, 1, E + 1, 0) ||
            !check_view(log, label, "dispatched positions", &vp, RUDNN_U32, 2, T, k)) {
            failed = 1;
            goto done;
        }
        s->counts = rt_xmalloc((size_t)E * 4);
        s->offsets = rt_xmalloc((size_t)(E + 1) * 4);
        s->pos = rt_xmalloc((size_t)pairs * 4);
        s->ref_counts = rt_xmalloc((size_t)E * 4);
        s->ref_offsets = rt_xmalloc((size_t)(E + 1) * 4);
        s->ref_pos = rt_xmalloc((size_t)pairs * 4);
        size_t esz = rudnn_dtype_size(dt);
        s->raw_tokens = rt_xmalloc((size_t)(pairs * H) * esz);
        s->raw_x = rt_xmalloc((size_t)(T * H) * esz);
        s->tokens = rt_xmalloc((size_t)(pairs * H) * sizeof(float));
        if (!read_raw(log, label, &vc, s->counts) || !read_raw(log, label, &vo, s->offsets) ||
            !read_raw(log, label, &vp, s->pos) || !read_raw(log, label, &vt, s->raw_tokens) ||
            !read_raw(log, label, &s->X.t, s->raw_x)) {
            failed = 1;
            goto done;
        }
        rt_decode(dt, s->raw_tokens, s->tokens, (size_t)(pairs * H));
        moe_ref_dispatch(s->ref_idx, T, k, E, s->ref_counts, s->ref_offsets, s->ref_pos);
        int bad = 0;
        for (int64_t e = 0; e < E; e++)
            if (s->counts[e] != s->ref_counts[e]) {
                if (bad++ < 4)
                    rt_logf(log, "  %s: counts[%lld] = %u, expected %u\n", label, (long long)e, s->counts[e],
                            s->ref_counts[e]);
            }
        for (int64_t e = 0; e <= E; e++)
            if (s->offsets[e] != s->ref_offsets[e]) {
                if (bad++ < 8)
                    rt_logf(log, "  %s: offsets[%lld] = %u, expected %u\n", label, (long long)e, s->offsets[e],
                            s->ref_offsets[e]);
            }
        for (int64_t i = 0; i < pairs; i++)
            if (s->pos[i] != s->ref_pos[i]) {
                if (bad++ < 12)
                    rt_logf(log, "  %s: positions[%lld, %lld] = %u, expected %u (pair order within the expert)\n",
                            label, (long long)(i / k), (long long)(i % k), s->pos[i], s->ref_pos[i]);
            }
        if (!bad) {
            /* each dispatched row is its token's input row, bit for bit */
            size_t row_bytes = (size_t)H * esz;
            for (int64_t i = 0; i < pairs; i++) {
                int64_t t = i / k;
                if (memcmp(s->raw_tokens + (size_t)s->ref_pos[i] * row_bytes, s->raw_x + (size_t)t * row_bytes,
                           row_bytes) != 0) {
                    if (bad++ < 4)
                        rt_logf(log, "  %s: dispatched row %u is not input row %lld (pair %lld, slot %lld)\n", label,
                                s->ref_pos[i], (long long)t, (long long)i, (long long)(i % k));
                }
            }
        }
        /* what the crafted data promise */
        for (int64_t e = 0; e < E && !bad; e++) {
            if (c->data == D_NO_TOKEN && e % 5 == 1 && s->counts[e] != 0) {
                rt_logf(log, "  %s: expert %lld should receive no token, counts = %u\n", label, (long long)e,
                        s->counts[e]);
                bad++;
            }
            if (c->data == D_ONE_EXPERT && k == 1 && s->counts[e] != (e == 5 % E ? (uint32_t)T : 0u)) {
                rt_logf(log, "  %s: expert %lld: counts = %u, expected every token to go to expert %lld\n", label,
                        (long long)e, s->counts[e], (long long)(5 % E));
                bad++;
            }
        }
        if (bad) {
            failed = 1;
            goto done;
        }
    }
    if (c->stage == S_DISPATCH)
        goto inputs;

    /* ---- SwiGLU experts ---- */
    {
        size_t nw = (size_t)(E * I * H);
        s->gate = rt_xmalloc(nw * sizeof(float));
        s->up = rt_xmalloc(nw * sizeof(float));
        s->down = rt_xmalloc(nw * sizeof(float));
        double gs = 1.5 / sqrt((double)H), ds = 1.5 / sqrt((double)I);
        rt_fill_uniform(&rng, s->gate, nw, -gs, gs);
        rt_fill_uniform(&rng, s->up, nw, -gs, gs);
        rt_fill_uniform(&rng, s->down, nw, -ds, ds);
        ref_quantize(dt, s->gate, s->gate, nw);
        ref_quantize(dt, s->up, s->up, nw);
        ref_quantize(dt, s->down, s->down, nw);
        int64_t gdims[3] = {E, I, H}, ddims[3] = {E, H, I};
        rt_tensor_create(&s->G, dt, 3, gdims, operand_offset(0), RT_TAIL_BYTES);
        rt_tensor_create(&s->U, dt, 3, gdims, operand_offset(2), RT_TAIL_BYTES);
        rt_tensor_create(&s->D, dt, 3, ddims, operand_offset(1), RT_TAIL_BYTES);
        rt_tensor_upload(&s->G, s->gate);
        rt_tensor_upload(&s->U, s->up);
        rt_tensor_upload(&s->D, s->down);
        in_add(&s->inputs, &s->G, "gate");
        in_add(&s->inputs, &s->U, "up");
        in_add(&s->inputs, &s->D, "down");
    }
    if (!check_ok(log, label, "swiglu_experts_create",
                  rudnn_swiglu_experts_create(rt_ctx, &s->G.t, &s->U.t, &s->D.t, &s->experts))) {
        failed = 1;
        goto done;
    }
    {
        int64_t eodims[2] = {pairs, H};
        size_t neo = (size_t)(pairs * H);
        rt_tensor_create(&s->EO, dt, 2, eodims, operand_offset(2), RT_TAIL_BYTES);
        rt_tensor_create(&s->EO_WS, dt, 2, eodims, operand_offset(0), RT_TAIL_BYTES);
        rt_tensor_create(&s->EO_AUTO, dt, 2, eodims, operand_offset(1), RT_TAIL_BYTES);
        rt_tensor_create(&s->EO_TC, dt, 2, eodims, operand_offset(3), RT_TAIL_BYTES);
        rt_tensor_create(&s->EO_TC_WS, dt, 2, eodims, operand_offset(1), RT_TAIL_BYTES);
        rt_tensor_create(&s->EO_K, dt, 2, eodims, operand_offset(2), RT_TAIL_BYTES);
        s->eo = rt_xmalloc(neo * sizeof(float));
        s->eo2 = rt_xmalloc(neo * sizeof(float));
        s->ref = rt_xmalloc(neo * sizeof(double));
        s->tol = rt_xmalloc(neo * sizeof(double));
        s->scratch = rt_xmalloc((size_t)(2 * I) * sizeof(double));

        /* Scalar, pool workspace */
        if (!run_experts(s, RUDNN_MOE_SCALAR, NULL, 0, &s->EO, s->eo, log, label, "experts (Scalar)") ||
            !check_experts(c, dt, s, s->eo, log, label, "expert_output (Scalar)", &worst)) {
            failed = 1;
            goto done;
        }
        /* Scalar, explicit workspace of the size asked for */
        size_t ws_bytes = 0;
        if (!check_ok(log, label, "swiglu_experts_workspace_size",
                      rudnn_swiglu_experts_workspace_size(s->experts, pairs, RUDNN_MOE_SCALAR, &ws_bytes)) ||
            !check_ok(log, label, "buffer_create (workspace)",
                      rudnn_buffer_create(rt_ctx, ws_bytes ? ws_bytes : 1, &s->ws))) {
            failed = 1;
            goto done;
        }
        rudnn_buffer_fill(rt_queue, s->ws, 0, 0xa5, ws_bytes ? ws_bytes : 1);
        if (!run_experts(s, RUDNN_MOE_SCALAR, s->ws, ws_bytes, &s->EO_WS, s->eo2, log, label,
                         "experts (Scalar, explicit workspace)") ||
            !compare_exact(s->eo2, s->eo, neo, log, label, "explicit workspace vs NULL workspace")) {
            failed = 1;
        }

        /* Auto: resolves per backend and dtype, and equals what it resolves to */
        int tc = tensor_core_expected(dt);
        rudnn_moe_strategy_t resolved = (rudnn_moe_strategy_t)-1, resolved_any = (rudnn_moe_strategy_t)-1;
        rudnn_moe_choice_t auto_choice;
        if (!check_ok(log, label, "swiglu_experts_resolve(Auto)",
                      rudnn_swiglu_experts_resolve(s->experts, RUDNN_MOE_AUTO, &resolved_any)) ||
            !check_ok(log, label, "swiglu_experts_choose(Auto)",
                      rudnn_swiglu_experts_choose(s->experts, s->disp, &s->EO_AUTO.t, RUDNN_MOE_AUTO,
                                                  &auto_choice))) {
            failed = 1;
            goto done;
        }
        resolved = auto_choice.strategy;
        /* resolve answers for aligned operands: it agrees with choose wherever they are aligned */
        if (aligned_operands && resolved_any != resolved) {
            rt_logf(log, "  %s: resolve(Auto) = %d, choose(Auto) = %d for aligned operands\n", label,
                    (int)resolved_any, (int)resolved);
            failed = 1;
        }
        const int want_auto = tc == 1 ? auto_tensor_core_expected() : tc == 0 ? 0 : -1;
        if ((want_auto == 1 && resolved != RUDNN_MOE_TENSOR_CORE) || (want_auto == 0 && resolved != RUDNN_MOE_SCALAR) ||
            (resolved != RUDNN_MOE_SCALAR && resolved != RUDNN_MOE_TENSOR_CORE)) {
            rt_logf(log, "  %s: Auto resolved to %d on backend %s with %s weights\n", label, (int)resolved,
                    backend_name, rudnn_dtype_name(dt));
            failed = 1;
        }
        if (!run_experts(s, RUDNN_MOE_AUTO, NULL, 0, &s->EO_AUTO, s->eo2, log, label, "experts (Auto)")) {
            failed = 1;
            goto done;
        }
        if (resolved == RUDNN_MOE_SCALAR)
            failed |= !compare_exact(s->eo2, s->eo, neo, log, label, "Auto (resolved Scalar) vs Scalar");
        else
            failed |= !check_experts(c, dt, s, s->eo2, log, label, "expert_output (Auto)", &worst);

        /* TensorCore: runs, or NOT_SUPPORTED naming the strategy and writing nothing */
        rudnn_moe_choice_t tc_choice;
        rudnn_status_t rs =
            rudnn_swiglu_experts_choose(s->experts, s->disp, &s->EO_TC.t, RUDNN_MOE_TENSOR_CORE, &tc_choice);
        tc_runs = rs == RUDNN_STATUS_SUCCESS;
        if ((tc == 1 && !tc_runs) || (tc == 0 && rs != RUDNN_STATUS_NOT_SUPPORTED) ||
            (rs != RUDNN_STATUS_SUCCESS && rs != RUDNN_STATUS_NOT_SUPPORTED)) {
            rt_logf(log, "  %s: resolve(TensorCore) on %s with %s weights returned %s: %s\n", label, backend_name,
                    rudnn_dtype_name(dt), rudnn_status_string(rs), rudnn_last_error());
            failed = 1;
        }
        if (tc_runs && resolved != RUDNN_MOE_TENSOR_CORE && auto_tensor_core_expected() != 0) {
            rt_logf(log, "  %s: TensorCore is supported but Auto resolved to Scalar\n", label);
            failed = 1;
        }
        if (!tc_runs && resolved == RUDNN_MOE_TENSOR_CORE) {
            rt_logf(log, "  %s: Auto resolved to TensorCore, which cannot run\n", label);
            failed = 1;
        }
        rt_out_watch_t w;
        rt_out_watch_begin(&w, &s->EO_TC);
        rs = rudnn_swiglu_experts_forward_dispatched(rt_queue, s->experts, s->disp, RUDNN_MOE_TENSOR_CORE, NULL, 0,
                                                     &s->EO_TC.t);
        if (tc_runs) {
            int ok = check_ok(log, label, "experts (TensorCore)", rs);
            ok &= rt_out_watch_end(&w, ok && neo > 0, s->eo2, log, label, "experts (TensorCore)");
            if (ok)
                ok = check_experts(c, dt, s, s->eo2, log, label, "expert_output (TensorCore)", &worst);
            if (ok && resolved == RUDNN_MOE_TENSOR_CORE) {
                float *auto_vals = rt_xmalloc(neo * sizeof(float));
                rt_tensor_download(&s->EO_AUTO, auto_vals);
                ok = compare_exact(auto_vals, s->eo2, neo, log, label, "Auto (resolved TensorCore) vs TensorCore");
                free(auto_vals);
            }
            if (ok)
                ok = check_tc_workspace(s, pairs, s->eo2, neo, log, label);
            failed |= !ok;
        } else {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", rudnn_last_error());
            if (rs != RUDNN_STATUS_NOT_SUPPORTED || !strstr(msg, "TensorCore")) {
                rt_logf(log, "  %s: experts (TensorCore) on %s with %s weights returned %s: \"%s\", expected "
                           "NOT_SUPPORTED naming TensorCore\n", label, backend_name, rudnn_dtype_name(dt),
                        rudnn_status_string(rs), msg);
                failed = 1;
            }
            failed |= !rt_out_watch_end(&w, 0, NULL, log, label, "experts (TensorCore, rejected)");
            size_t tc_bytes;
            rs = rudnn_swiglu_experts_workspace_size(s->experts, pairs, RUDNN_MOE_TENSOR_CORE, &tc_bytes);
            if (rs != RUDNN_STATUS_NOT_SUPPORTED) {
                rt_logf(log, "  %s: workspace_size(TensorCore) returned %s where TensorCore cannot run\n", label,
                        rudnn_status_string(rs));
                failed = 1;
            }
        }
    }

    if (s->disp && s->experts)
        failed |= !check_every_kernel(c, dt, s, tensor_core_expected(dt), log, label, &worst);

    /* ---- combine ---- */
    {
        int64_t odims[2] = {T, H};
        size_t nout = (size_t)(T * H);
        rt_tensor_create(&s->OUT, dt, 2, odims, 1, RT_TAIL_BYTES);
        rt_tensor_create(&s->OUT_ONE, dt, 2, odims, 4, RT_TAIL_BYTES);
        rt_tensor_create(&s->OUT_AUTO, dt, 2, odims, 0, RT_TAIL_BYTES);
        rt_tensor_create(&s->OUT_ONE_AUTO, dt, 2, odims, 2, RT_TAIL_BYTES);
        s->out = rt_xmalloc(nout * sizeof(float));
        s->out2 = rt_xmalloc(nout * sizeof(float));
        rt_guard_t eo_guard = {0};
        in_add(&eo_guard, &s->EO, "expert_output");
        rt_out_watch_t w;
        rt_out_watch_begin(&w, &s->OUT);
        int ok = check_ok(log, label, "moe_combine", rudnn_moe_combine(rt_queue, s->disp, &s->EO.t, &s->OUT.t));
        ok &= rt_out_watch_end(&w, ok && nout > 0, s->out, log, label, "combine");
        ok &= in_check(&eo_guard, log, label);
        rt_guard_free(&eo_guard);
        if (!ok) {
            failed = 1;
            goto done;
        }
        ref_report_t rep;
        ref_report_init(&rep);
        const float **rows = rt_xmalloc((size_t)k * sizeof *rows);
        for (int64_t t = 0; t < T; t++) {
            for (int j = 0; j < k; j++)
                rows[j] = s->eo + (size_t)s->ref_pos[t * k + j] * H;
            moe_ref_combine_row(dt, s->w + t * k, rows, k, H, s->ref + t * H, s->tol + t * H);
        }
        free(rows);
        moe_ref_compare(&rep, "output", s->out, s->ref, s->tol, nout, H);
        if (rep.worst_excess > worst)
            worst = rep.worst_excess;
        if (rep.mismatches) {
            rt_logf(log, "  %s: combine: %zu of %zu values outside tolerance (worst %.3g x allowed):\n%s", label,
                    rep.mismatches, rep.checked, rep.worst_excess, rep.text);
            failed = 1;
        }

        /* the one-call form equals the split path (Scalar) bit for bit */
        rt_out_watch_begin(&w, &s->OUT_ONE);
        ok = check_ok(log, label, c->routing == R_SOFTMAX ? "swiglu_experts_forward"
                                                          : "swiglu_experts_forward_sigmoid_grouped (Scalar)",
                      call_one(c, s, RUDNN_MOE_SCALAR, &s->OUT_ONE));
        ok &= rt_out_watch_end(&w, ok && nout > 0, s->out2, log, label, "one-call (Scalar)");
        if (ok)
            ok = compare_exact(s->out2, s->out, nout, log, label, "one-call vs route+dispatch+experts+combine");
        failed |= !ok;

        /* grouped one-call with Auto (TensorCore) equals the split path with Auto (TensorCore) */
        if (c->routing == R_GROUPED)
            failed |= !one_call_matches_split(c, s, RUDNN_MOE_AUTO, "Auto", &s->EO_AUTO, &s->OUT_AUTO,
                                              &s->OUT_ONE_AUTO, nout, log, label);
        if (c->routing == R_GROUPED && tc_runs) {
            rt_tensor_create(&s->OUT_TC, dt, 2, odims, 3, RT_TAIL_BYTES);
            rt_tensor_create(&s->OUT_ONE_TC, dt, 2, odims, 1, RT_TAIL_BYTES);
            failed |= !one_call_matches_split(c, s, RUDNN_MOE_TENSOR_CORE, "TensorCore", &s->EO_TC, &s->OUT_TC,
                                              &s->OUT_ONE_TC, nout, log, label);
        }
    }

inputs:
    failed |= !in_check(&s->inputs, log, label);
done:
    if (getenv("RUDNN_TEST_VERBOSE"))
        print_message("  %s: worst error %.3f of allowed\n", label, worst);
    state_free(s);
    if (failed)
        log->failures++;
}

/* ---- experts on rows grouped by counts (rudnn_swiglu_experts_forward_grouped) ----------------------
 * Rows [R, H] grouped by expert, expert_token_nums I64 [E] as counts or running totals (some
 * experts without rows, a sum below R, R = 0, every count 0). Each strategy's output rows below the
 * sum are checked against moe_ref_expert_row; the rows past the sum must keep the poison sentinel
 * (neither written) and hold NaN in rows (never read into a row below the sum); nothing outside the
 * output changes and rows, counts and weights stay byte-identical. Scalar with an explicit
 * workspace of rudnn_swiglu_experts_workspace_size(sum) bytes is bit-identical to the NULL
 * workspace; TensorCore runs wherever choose says it does, else it is NOT_SUPPORTED and writes
 * nothing. */

#define GMAX_E 8

typedef struct gcase {
    const char *label;
    int64_t E, H, I, R;
    int64_t counts[GMAX_E]; /* rows per expert */
    int totals;             /* pass them as running totals */
    size_t rows_off, out_off; /* element offsets of rows and expert_output in their buffers */
} gcase_t;

static const gcase_t grouped_cases[] = {
    {"counts with empty experts, 3 rows past the sum", 6, 33, 17, 15, {3, 0, 5, 0, 0, 4}, 0, 0, 0},
    {"the same as running totals", 6, 33, 17, 15, {3, 0, 5, 0, 0, 4}, 1, 0, 0},
    {"first and last expert empty, sum = R", 5, 21, 9, 18, {0, 7, 2, 9, 0}, 0, 0, 0},
    {"first and last expert empty, totals", 5, 21, 9, 20, {0, 7, 2, 9, 0}, 1, 0, 0},
    {"every count 0: nothing runs", 4, 16, 8, 5, {0, 0, 0, 0}, 0, 0, 0},
    {"R = 0", 3, 16, 8, 0, {0, 0, 0}, 1, 0, 0},
    {"one expert, 160 rows (several row tiles), totals", 1, 40, 24, 170, {160}, 1, 0, 0},
    {"rows and output at unaligned offsets", 4, 19, 11, 12, {2, 5, 1, 3}, 0, 3, 5},
    {"H, I multiples of 8, 130 rows", 4, 64, 136, 140, {40, 0, 70, 20}, 0, 0, 0},
};
#define GROUPED_COUNT (sizeof grouped_cases / sizeof grouped_cases[0])

/* One forward_grouped call into out (poisoned first); checks the bytes written (exactly the first
 * sum rows of out) and decodes out into vals. Logs and returns 0 on any failure. */
static int grouped_run(rudnn_swiglu_experts_t ex, const rt_tensor_t *rows, const rt_tensor_t *nums, int totals,
                       rudnn_moe_strategy_t strategy, rudnn_buffer_t ws, size_t ws_bytes, const rt_tensor_t *out,
                       int64_t sum, float *vals, rt_log_t *log, const char *label, const char *what)
{
    rt_tensor_poison(out);
    uint8_t *before = rt_buffer_snapshot(out->buffer, out->buffer_bytes);
    rudnn_status_t st = rudnn_swiglu_experts_forward_grouped(rt_queue, ex, &rows->t, &nums->t, totals, strategy, ws,
                                                             ws_bytes, &out->t);
    int ok = check_ok(log, label, what, st);
    rudnn_status_t sync = rudnn_queue_synchronize(rt_queue);
    ok &= check_ok(log, label, "queue_synchronize", sync);
    uint8_t *after = rt_buffer_snapshot(out->buffer, out->buffer_bytes);
    const size_t es = rudnn_dtype_size(out->t.dtype), H = (size_t)out->t.dims[1];
    size_t begin = out->t.offset, end = out->t.offset + (size_t)sum * H * es, first = 0;
    size_t changed = rt_count_changed(before, after, out->buffer_bytes, &begin, &end, 1, &first);
    if (changed) {
        rt_logf(log, "  %s: %s: %zu byte(s) changed past the first %lld rows of the output (first at byte %zu)\n",
                label, what, changed, (long long)sum, first);
        ok = 0;
    }
    size_t unwritten = 0, n = (size_t)sum * H;
    const uint32_t poison = rt_poison_bits(out->t.dtype);
    for (size_t i = 0; i < n; i++)
        unwritten += rt_element_bits(out->t.dtype, after + out->t.offset, i) == poison;
    if (ok && unwritten) {
        rt_logf(log, "  %s: %s: %zu of %zu element(s) of the first %lld rows never written\n", label, what,
                unwritten, n, (long long)sum);
        ok = 0;
    }
    rt_decode(out->t.dtype, after + out->t.offset, vals, n);
    free(before);
    free(after);
    return ok;
}

static int grouped_check(const gcase_t *c, const float *got, const double *ref,
                         const double *tol, int64_t sum, rt_log_t *log, const char *label, const char *what,
                         double *worst)
{
    ref_report_t rep;
    ref_report_init(&rep);
    moe_ref_compare(&rep, what, got, ref, tol, (size_t)(sum * c->H), c->H);
    if (rep.worst_excess > *worst)
        *worst = rep.worst_excess;
    if (rep.mismatches) {
        rt_logf(log, "  %s: %s: %zu of %zu values outside tolerance (worst %.3g x allowed):\n%s", label, what,
                rep.mismatches, rep.checked, rep.worst_excess, rep.text);
        return 0;
    }
    return 1;
}

static void run_grouped_case(rudnn_dtype_t dt, const gcase_t *c, const char *test, int index, rt_log_t *log)
{
    const int64_t E = c->E, H = c->H, I = c->I, R = c->R;
    char label[256];
    snprintf(label, sizeof label, "%s [%s] E=%lld H=%lld I=%lld R=%lld", test, c->label, (long long)E, (long long)H,
             (long long)I, (long long)R);
    rt_rng_t rng;
    rt_rng_seed_case(&rng, test, index);
    int64_t sum = 0, nums[GMAX_E];
    for (int64_t e = 0; e < E; e++) {
        sum += c->counts[e];
        nums[e] = c->totals ? sum : c->counts[e];
    }
    const size_t nw = (size_t)(E * I * H), nx = (size_t)(R * H) + 1;
    float *gate = rt_xmalloc(nw * sizeof(float)), *up = rt_xmalloc(nw * sizeof(float));
    float *down = rt_xmalloc(nw * sizeof(float)), *x = rt_xmalloc(nx * sizeof(float));
    float *vals = rt_xmalloc(nx * sizeof(float)), *vals2 = rt_xmalloc(nx * sizeof(float));
    double *ref = rt_xmalloc(nx * sizeof(double)), *tol = rt_xmalloc(nx * sizeof(double));
    double *scratch = rt_xmalloc((size_t)(2 * I) * sizeof(double));
    rt_fill_uniform(&rng, gate, (size_t)(E * I * H), -0.5, 0.5);
    rt_fill_uniform(&rng, up, (size_t)(E * I * H), -0.5, 0.5);
    rt_fill_uniform(&rng, down, (size_t)(E * H * I), -0.5, 0.5);
    rt_fill_uniform(&rng, x, (size_t)(R * H), -2.0, 2.0);
    for (int64_t i = sum * H; i < R * H; i++)
        x[i] = NAN; /* rows past the sum: never read into an output row */
    ref_quantize(dt, gate, gate, (size_t)(E * I * H));
    ref_quantize(dt, up, up, (size_t)(E * I * H));
    ref_quantize(dt, down, down, (size_t)(E * H * I));
    ref_quantize(dt, x, x, (size_t)(R * H));
    for (int64_t e = 0, r = 0; e < E; e++)
        for (int64_t j = 0; j < c->counts[e]; j++, r++)
            moe_ref_expert_row(dt, x + r * H, gate + e * I * H, up + e * I * H, down + e * H * I, H, I, 0, scratch,
                               ref + r * H, tol + r * H);

    rt_tensor_t G, U, D, X, N, OUT;
    rt_tensor_create(&G, dt, 3, (int64_t[]){E, I, H}, 0, RT_TAIL_BYTES);
    rt_tensor_create(&U, dt, 3, (int64_t[]){E, I, H}, 0, RT_TAIL_BYTES);
    rt_tensor_create(&D, dt, 3, (int64_t[]){E, H, I}, 0, RT_TAIL_BYTES);
    rt_tensor_create(&X, dt, 2, (int64_t[]){R, H}, c->rows_off, RT_TAIL_BYTES);
    rt_tensor_create(&N, RUDNN_I64, 1, (int64_t[]){E}, 0, RT_TAIL_BYTES);
    rt_tensor_create(&OUT, dt, 2, (int64_t[]){R, H}, c->out_off, RT_TAIL_BYTES);
    rt_tensor_upload(&G, gate);
    rt_tensor_upload(&U, up);
    rt_tensor_upload(&D, down);
    if (R > 0)
        rt_tensor_upload(&X, x);
    rt_assert_status(rudnn_tensor_write(rt_queue, &N.t, nums, (size_t)E * sizeof(int64_t)), RUDNN_STATUS_SUCCESS);
    rudnn_swiglu_experts_t ex = NULL;
    rudnn_buffer_t ws = NULL;
    rt_guard_t inputs;
    memset(&inputs, 0, sizeof inputs);
    int failed = 0;
    double worst = 0.0;
    if (!check_ok(log, label, "swiglu_experts_create", rudnn_swiglu_experts_create(rt_ctx, &G.t, &U.t, &D.t, &ex))) {
        failed = 1;
        goto done;
    }
    in_add(&inputs, &G, "gate");
    in_add(&inputs, &U, "up");
    in_add(&inputs, &D, "down");
    in_add(&inputs, &X, "rows");
    in_add(&inputs, &N, "expert_token_nums");
    const int aligned = c->rows_off == 0 && c->out_off == 0;
    static const rudnn_moe_strategy_t strategies[3] = {RUDNN_MOE_SCALAR, RUDNN_MOE_AUTO, RUDNN_MOE_TENSOR_CORE};
    static const char *const names[3] = {"Scalar", "Auto", "TensorCore"};
    for (int si = 0; si < 3; si++) {
        char what[128];
        snprintf(what, sizeof what, "forward_grouped (%s)", names[si]);
        rudnn_moe_choice_t choice;
        rudnn_status_t cs = rudnn_swiglu_experts_choose(ex, NULL, &OUT.t, strategies[si], &choice);
        if (strategies[si] != RUDNN_MOE_TENSOR_CORE && !check_ok(log, label, "swiglu_experts_choose", cs)) {
            failed = 1;
            continue;
        }
        if (strategies[si] == RUDNN_MOE_TENSOR_CORE && (cs != RUDNN_STATUS_SUCCESS || !aligned)) {
            if (cs == RUDNN_STATUS_SUCCESS)
                continue; /* choose answers for aligned rows: nothing to expect of unaligned ones */
            /* refused: the grouped call is refused too, writing nothing */
            rt_tensor_poison(&OUT);
            uint8_t *before = rt_buffer_snapshot(OUT.buffer, OUT.buffer_bytes);
            rudnn_status_t st = rudnn_swiglu_experts_forward_grouped(rt_queue, ex, &X.t, &N.t, c->totals,
                                                                     strategies[si], NULL, 0, &OUT.t);
            if (st != RUDNN_STATUS_NOT_SUPPORTED || !strstr(rudnn_last_error(), "swiglu_experts_forward_grouped")) {
                rt_logf(log, "  %s: %s where choose refuses returned %s: \"%s\", expected NOT_SUPPORTED\n", label,
                        what, rudnn_status_string(st), rudnn_last_error());
                failed = 1;
            }
            rudnn_queue_synchronize(rt_queue);
            uint8_t *after = rt_buffer_snapshot(OUT.buffer, OUT.buffer_bytes);
            if (memcmp(before, after, OUT.buffer_bytes) != 0) {
                rt_logf(log, "  %s: %s: the refused call wrote its output\n", label, what);
                failed = 1;
            }
            free(before);
            free(after);
            continue;
        }
        if (!grouped_run(ex, &X, &N, c->totals, strategies[si], NULL, 0, &OUT, sum, vals, log, label, what)) {
            failed = 1;
            continue;
        }
        const char *ran = rudnn_last_kernel();
        if (sum > 0 && aligned && strcmp(ran, choice.kernel) != 0) {
            rt_logf(log, "  %s: %s: choose reported kernel %s, rudnn_last_kernel() says %s ran\n", label, what,
                    choice.kernel, ran[0] ? ran : "(none)");
            failed = 1;
        }
        failed |= !grouped_check(c, vals, ref, tol, sum, log, label, what, &worst);
        if (strategies[si] == RUDNN_MOE_SCALAR) {
            /* an explicit workspace of the size asked for: bit-identical */
            size_t bytes = 0;
            if (!check_ok(log, label, "swiglu_experts_workspace_size",
                          rudnn_swiglu_experts_workspace_size(ex, sum, RUDNN_MOE_SCALAR, &bytes)) ||
                !check_ok(log, label, "buffer_create (workspace)", rudnn_buffer_create(rt_ctx, bytes + 64, &ws))) {
                failed = 1;
                continue;
            }
            if (!grouped_run(ex, &X, &N, c->totals, RUDNN_MOE_SCALAR, ws, bytes, &OUT, sum, vals2, log, label,
                             "forward_grouped (Scalar, explicit workspace)") ||
                !compare_exact(vals2, vals, (size_t)(sum * H), log, label, "explicit workspace vs NULL workspace"))
                failed = 1;
            rudnn_buffer_destroy(ws);
            ws = NULL;
        }
    }
    failed |= !in_check(&inputs, log, label);
done:
    if (getenv("RUDNN_TEST_VERBOSE"))
        print_message("  %s: worst error %.3f of allowed\n", label, worst);
    rt_guard_free(&inputs);
    rudnn_swiglu_experts_destroy(ex);
    rt_tensor_t *all[] = {&G, &U, &D, &X, &N, &OUT};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        rt_tensor_destroy(all[i]);
    free(gate), free(up), free(down), free(x), free(vals), free(vals2), free(ref), free(tol), free(scratch);
    if (failed)
        log->failures++;
}


/* ---- case lists ----------------------------------------------------------------------------------- */

static const mcase_t route_softmax_cases[] = {
    SOFT("grid, ties likely", 64, 16, 4, 0, D_GRID, S_ROUTE, 0, 0),
    SOFT("grid, ties likely", 64, 16, 4, 1, D_GRID, S_ROUTE, 0, 0),
    SOFT("fine grid", 64, 64, 6, 1, D_GRID_FINE, S_ROUTE, 0, 0),
    SOFT("all logits equal", 5, 8, 3, 0, D_EQUAL, S_ROUTE, 0, 0),
    SOFT("all logits equal", 5, 8, 3, 1, D_EQUAL, S_ROUTE, 0, 0),
    SOFT("NaN, +inf, all -inf, -inf rows", 16, 8, 3, 0, D_NONFINITE, S_ROUTE, 0, 0),
    SOFT("NaN, +inf, all -inf, -inf rows", 16, 8, 3, 1, D_NONFINITE, S_ROUTE, 0, 0),
    SOFT("NaN, +inf, all -inf, -inf rows, top_k = E", 8, 8, 8, 0, D_NONFINITE, S_ROUTE, 0, 0),
    SOFT("top_k = 1", 33, 16, 1, 0, D_GRID, S_ROUTE, 0, 0),
    SOFT("top_k = 1", 33, 16, 1, 1, D_GRID, S_ROUTE, 0, 0),
    SOFT("top_k = E", 17, 16, 16, 0, D_GRID, S_ROUTE, 0, 0),
    SOFT("top_k = E", 17, 16, 16, 1, D_GRID, S_ROUTE, 0, 0),
    SOFT("E = 1", 9, 1, 1, 0, D_GRID, S_ROUTE, 0, 0),
    SOFT("E = 1", 9, 1, 1, 1, D_GRID, S_ROUTE, 0, 0),
    SOFT("T = 0", 0, 16, 4, 1, D_GRID, S_ROUTE, 0, 0),
    SOFT("T = 1", 1, 16, 2, 0, D_GRID, S_ROUTE, 0, 0),
    SOFT("E = 256", 64, 256, 8, 1, D_GRID, S_ROUTE, 0, 0),
    SOFT("E = 256, top_k = E", 4, 256, 256, 0, D_GRID, S_ROUTE, 0, 0),
    SOFT("E = 1024", 8, 1024, 8, 0, D_GRID_FINE, S_ROUTE, 0, 0),
};

static const mcase_t route_grouped_cases[] = {
    GROUPED("worked example (DESIGN.md 8)", 1, 8, 2, 1, 2, 1, 0, 1, 2.0f, D_WORKED, S_ROUTE, 0, 0),
    GROUPED("worked example, group_top_two", 1, 8, 2, 1, 2, 1, 1, 1, 2.0f, D_WORKED, S_ROUTE, 0, 0),
    GROUPED("E8 G2 sel1", 64, 8, 2, 1, 2, 1, 0, 1, 2.0f, D_GRID, S_ROUTE, 0, 0),
    GROUPED("E16 G4 sel2 top-two", 64, 16, 4, 1, 4, 2, 1, 1, 1.0f, D_GRID, S_ROUTE, 0, 0),
    GROUPED("E16 G4 sel2 no bias", 64, 16, 4, 0, 4, 2, 0, 0, 2.5f, D_GRID, S_ROUTE, 0, 0),
    GROUPED("E16 G4 sel2 top-two no bias", 64, 16, 4, 0, 4, 2, 1, 0, 1.0f, D_GRID_FINE, S_ROUTE, 0, 0),
    GROUPED("E16 one group, top_k = E", 17, 16, 16, 1, 1, 1, 0, 1, 1.0f, D_GRID, S_ROUTE, 0, 0),
    GROUPED("E16 G16: one expert per group", 32, 16, 4, 1, 16, 4, 0, 1, 1.0f, D_GRID, S_ROUTE, 0, 0),
    GROUPED("E12 G3 sel2 k5 top-two", 32, 12, 5, 0, 3, 2, 1, 1, 0.5f, D_GRID, S_ROUTE, 0, 0),
    GROUPED("E32 G4 selected = groups", 32, 32, 8, 0, 4, 4, 1, 0, 1.0f, D_GRID, S_ROUTE, 0, 0),
    GROUPED("E64 G8 sel3 k6 top-two", 64, 64, 6, 1, 8, 3, 1, 1, 2.5f, D_GRID, S_ROUTE, 0, 0),
    GROUPED("E256 G8 sel4 k8 top-two (DeepSeek-V3)", 64, 256, 8, 1, 8, 4, 1, 1, 2.5f, D_GRID, S_ROUTE, 0, 0),
    GROUPED("E256 G128 sel32 k64 top-two", 16, 256, 64, 1, 128, 32, 1, 1, 1.0f, D_GRID, S_ROUTE, 0, 0),
    GROUPED("E1024 G128 sel8 k64: top_k = experts of the selected groups", 8, 1024, 64, 1, 128, 8, 1, 1, 1.0f,
            D_GRID_FINE, S_ROUTE, 0, 0),
    GROUPED("E1024 one group k64 no bias", 8, 1024, 64, 0, 1, 1, 0, 0, 1.0f, D_GRID, S_ROUTE, 0, 0),
    GROUPED("E = 1", 9, 1, 1, 1, 1, 1, 0, 1, 1.0f, D_GRID, S_ROUTE, 0, 0),
    GROUPED("E = 1", 9, 1, 1, 0, 1, 1, 0, 0, 3.0f, D_GRID, S_ROUTE, 0, 0),
    GROUPED("all logits equal, no bias: ties", 4, 16, 4, 1, 4, 2, 1, 0, 1.0f, D_EQUAL, S_ROUTE, 0, 0),
    GROUPED("all logits equal, no bias: ties", 4, 16, 6, 0, 4, 3, 0, 0, 1.0f, D_EQUAL, S_ROUTE, 0, 0),
    GROUPED("NaN, +-inf rows, top-two", 20, 16, 4, 1, 4, 2, 1, 1, 1.0f, D_GNONFINITE, S_ROUTE, 0, 0),
    GROUPED("NaN, +-inf rows, max score no bias", 20, 16, 6, 0, 4, 2, 0, 0, 2.0f, D_GNONFINITE, S_ROUTE, 0, 0),
    GROUPED("T = 0", 0, 16, 4, 1, 4, 2, 1, 1, 1.0f, D_GRID, S_ROUTE, 0, 0),
    GROUPED("T = 1", 1, 16, 4, 1, 4, 2, 1, 1, 1.0f, D_GRID, S_ROUTE, 0, 0),
};

static const mcase_t dispatch_cases[] = {
    SOFT("softmax", 64, 16, 4, 1, D_GRID, S_DISPATCH, 67, 0),
    GROUPED("grouped", 64, 16, 4, 1, 4, 2, 1, 1, 1.0f, D_GRID, S_DISPATCH, 33, 0),
    SOFT("experts 1, 6, 11 receive no token", 64, 16, 3, 0, D_NO_TOKEN, S_DISPATCH, 40, 0),
    SOFT("expert 5 receives every token", 64, 8, 1, 0, D_ONE_EXPERT, S_DISPATCH, 24, 0),
    GROUPED("expert 5 receives every token (grouped)", 64, 8, 1, 1, 2, 1, 0, 0, 1.0f, D_ONE_EXPERT, S_DISPATCH,
            24, 0),
    SOFT("top_k = E: every expert receives every token", 10, 8, 8, 1, D_GRID, S_DISPATCH, 19, 0),
    SOFT("T = 0", 0, 8, 2, 0, D_GRID, S_DISPATCH, 16, 0),
    SOFT("T = 1, H = 1", 1, 4, 2, 0, D_GRID, S_DISPATCH, 1, 0),
    SOFT("E = 1", 7, 1, 1, 0, D_GRID, S_DISPATCH, 9, 0),
    SOFT("E = 256, H = 1", 64, 256, 8, 1, D_GRID, S_DISPATCH, 1, 0),
    SOFT("8192 pairs (many scan chunks and blocks), H = 3", 1024, 64, 8, 0, D_GRID, S_DISPATCH, 3, 0),
    SOFT("E = 16384 (beyond a shared-memory histogram)", 3, 16384, 3, 1, D_GRID, S_DISPATCH, 5, 0),
};

static const mcase_t pipeline_cases[] = {
    SOFT("softmax, H 67, I 45", 64, 16, 4, 1, D_GRID, S_ALL, 67, 45),
    SOFT("softmax, H 200, I 130", 32, 8, 2, 0, D_GRID, S_ALL, 200, 130),
    GROUPED("grouped top-two, H 131, I 77", 48, 16, 4, 1, 4, 2, 1, 1, 2.5f, D_GRID, S_ALL, 131, 77),
    GROUPED("grouped no bias, H 45, I 199", 24, 8, 2, 0, 2, 1, 0, 0, 1.0f, D_GRID, S_ALL, 45, 199),
    GROUPED("worked example routing, H 13, I 7", 1, 8, 2, 1, 2, 1, 0, 1, 2.0f, D_WORKED, S_ALL, 13, 7),
    SOFT("experts without tokens", 16, 16, 3, 1, D_NO_TOKEN, S_ALL, 40, 24),
    SOFT("one expert takes every token", 20, 8, 1, 0, D_ONE_EXPERT, S_ALL, 50, 30),
    SOFT("one expert takes 160 rows (more than one row tile)", 160, 8, 1, 1, D_ONE_EXPERT, S_ALL, 70, 33),
    /* H and I multiples of 8 (the CUDA tensor-core kernels' shapes; here with unaligned operands,
     * so CUDA takes its scalar fallback: tc_cases below run them aligned): several K steps and
     * column tiles, row tiles that straddle experts, and (300 rows, 9 column tiles) more work items
     * than an H200 has SMs */
    SOFT("tensor-core tiles: 300 rows, H 136, I 264", 100, 4, 3, 1, D_GRID, S_ALL, 136, 264),
    SOFT("one expert, 300 rows, H 72, I 1032", 300, 8, 1, 1, D_ONE_EXPERT, S_ALL, 72, 1032),
    SOFT("top_k = E", 9, 8, 8, 1, D_GRID, S_ALL, 19, 23),
    SOFT("E = 1", 7, 1, 1, 0, D_GRID, S_ALL, 33, 17),
    SOFT("T = 1, H = 1, I = 1", 1, 4, 2, 1, D_GRID, S_ALL, 1, 1),
    SOFT("T = 0", 0, 8, 2, 1, D_GRID, S_ALL, 24, 16),
    GROUPED("T = 0 grouped", 0, 8, 2, 1, 2, 1, 1, 1, 1.0f, D_GRID, S_ALL, 24, 16),
    SOFT("NaN, +inf, -inf routing rows: NaN output rows", 16, 8, 3, 1, D_NONFINITE, S_ALL, 21, 11),
    {"F32 logits", R_SOFTMAX, 32, 8, 2, 1, 0, 0, 0, 0, 1.0f, D_GRID, S_ALL, 37, 29, 1, 0},
    {"F32 logits, grouped", R_GROUPED, 32, 16, 4, 1, 4, 2, 1, 1, 2.5f, D_GRID, S_ALL, 37, 29, 1, 0},
    {"plan destroyed before experts and combine", R_SOFTMAX, 16, 8, 2, 1, 0, 0, 0, 0, 1.0f, D_GRID, S_ALL, 24,
     16, 0, 1},
    {"plan destroyed before experts and combine, grouped", R_GROUPED, 16, 8, 2, 1, 2, 1, 0, 1, 1.0f, D_GRID,
     S_ALL, 24, 16, 0, 1},
};

/* Tensor-core cases with 16-byte aligned operands (aligned_operands): Auto and TensorCore take the
 * device's preferred kernel, and every kernel the backend lists runs once by name
 * (check_every_kernel: on CUDA the TMA, cp.async wgmma and mma.sync kernels and the four cuBLAS
 * comparison paths). Several tiles per expert, partial and empty tiles (experts without rows:
 * cuBLAS groups skipped), GEMMs of one K step (K <= 64), E = 256 (many groups), no rows at all. */
static const mcase_t tc_cases[] = {
    SOFT("aligned: 300 rows, H 136, I 264", 100, 4, 3, 1, D_GRID, S_ALL, 136, 264),
    SOFT("aligned: one expert, 300 rows, H 72, I 1032", 300, 8, 1, 1, D_ONE_EXPERT, S_ALL, 72, 1032),
    SOFT("aligned: experts without tokens, H 40, I 24", 16, 16, 3, 1, D_NO_TOKEN, S_ALL, 40, 24),
    SOFT("aligned: H 64, I 136", 200, 6, 2, 1, D_GRID, S_ALL, 64, 136),
    GROUPED("aligned: E256 G8 sel4 k8, H 48, I 88", 64, 256, 8, 1, 8, 4, 1, 1, 2.5f, D_GRID, S_ALL, 48, 88),
    SOFT("aligned: T = 0", 0, 8, 2, 1, D_GRID, S_ALL, 24, 16),
};


typedef struct family {
    const char *name;
    const mcase_t *cases;
    size_t count;
    int aligned; /* aligned_operands while the family runs */
} family_t;

#define FAMILY(name, list, aligned) {name, list, sizeof list / sizeof list[0], aligned}
static const family_t families[] = {
    FAMILY("route_softmax", route_softmax_cases, 0),
    FAMILY("route_grouped", route_grouped_cases, 0),
    FAMILY("dispatch", dispatch_cases, 0),
    FAMILY("pipeline", pipeline_cases, 0),
    FAMILY("pipeline_tensor_core", tc_cases, 1),
};
#define FAMILY_COUNT (sizeof families / sizeof families[0])

typedef struct param {
    const family_t *family;
    rudnn_dtype_t dtype;
    char name[64];
} param_t;

/* "experts_grouped/<dtype>" (family NULL) */
static void test_grouped(void **state)
{
    const param_t *p = *state;
    rt_log_t *log = rt_log_new();
    for (size_t i = 0; i < GROUPED_COUNT; i++)
        run_grouped_case(p->dtype, &grouped_cases[i], p->name, (int)i, log);
    rt_log_finish_free(log, "case(s)");
}

static void test_family(void **state)
{
    const param_t *p = *state;
    const family_t *f = p->family;
    aligned_operands = f->aligned;
    rt_log_t *log = rt_log_new();
    for (size_t i = 0; i < f->count; i++)
        run_case(p->dtype, &f->cases[i], p->name, (int)i, log);
    aligned_operands = 0;
    rt_log_finish_free(log, "case(s)");
}

int main(int argc, char **argv)
{
    static param_t params[FAMILY_COUNT * DTYPE_COUNT + DTYPE_COUNT];
    static struct CMUnitTest tests[FAMILY_COUNT * DTYPE_COUNT + DTYPE_COUNT];
    size_t n = 0;
    for (size_t f = 0; f < FAMILY_COUNT; f++) {
        for (int d = 0; d < DTYPE_COUNT; d++) {
            param_t *p = &params[n];
            p->family = &families[f];
            p->dtype = dtypes[d];
            snprintf(p->name, sizeof p->name, "%s/%s", families[f].name, rudnn_dtype_name(dtypes[d]));
            tests[n] = (struct CMUnitTest){p->name, test_family, NULL, NULL, p};
            n++;
        }
    }
    for (int d = 0; d < DTYPE_COUNT; d++) {
        param_t *p = &params[n];
        p->family = NULL;
        p->dtype = dtypes[d];
        snprintf(p->name, sizeof p->name, "experts_grouped/%s", rudnn_dtype_name(dtypes[d]));
        tests[n] = (struct CMUnitTest){p->name, test_grouped, NULL, NULL, p};
        n++;
    }
    rt_set_filters(argc, argv);

    char group[64];
    snprintf(group, sizeof group, "moe-%s", rt_requested_backend());
    rt_open_or_skip(group);
    rudnn_device_info_t info;
    if (rudnn_context_device_info(rt_ctx, &info) == RUDNN_STATUS_SUCCESS) {
        snprintf(backend_name, sizeof backend_name, "%s", info.backend);
        /* PoCL names its CPU devices "pthread-<cpu>" or "cpu-<cpu>" */
        pocl_cpu = strcmp(info.backend, "opencl") == 0 && strstr(info.driver, "Portable Computing Language") &&
                   (strncmp(info.name, "pthread", 7) == 0 || strncmp(info.name, "cpu", 3) == 0);
        nvidia_ocl = strcmp(info.backend, "opencl") == 0 && strstr(info.driver, "NVIDIA") != NULL;
    }
    return rt_exit_code(_cmocka_run_group_tests(group, tests, n, NULL, rt_group_teardown));
}
