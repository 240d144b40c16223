/* Contract tests of the normalization family, on the default backend: every
 * error path returns the right status, a message naming the op and the
 * argument (and the rule where the brief names one: "eps", "contiguous",
 * "overlap", "offset"), and writes nothing: every buffer involved is read
 * back byte for byte after the rejected call and compared with before.
 * A successful call leaves rudnn_last_error() == "".
 *
 * The fixture is F32: input/a, residual [4, 8]; gamma, beta [8]; output/y,
 * x_out [4, 8]; rstd [4]; each in its own buffer with 512 spare bytes, so
 * views of other shapes, dtypes and offsets fit in the same buffers.
 *
 * Usage: test_norm_contract [glob] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

enum { OP_LN, OP_RMS, OP_SM, OP_ADD, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"layer_norm", "rms_norm", "softmax", "add_rms_norm"};
/* how each op's messages name its main input and output */
static const char *const input_names[OP_COUNT] = {"input", "input", "input", " a "};
static const char *const output_names[OP_COUNT] = {"output", "output", "output", " y "};

#define ROWS 4
#define COLS 8
#define SLACK 512

static const int64_t dims_x[2] = {ROWS, COLS};
static const int64_t dims_g[1] = {COLS};
static const int64_t dims_rstd[1] = {ROWS};

/* ---- a second context on the same backend -------------------------------------- */

/* ---- fixture -------------------------------------------------------------------- */

typedef struct fx {
    rt_tensor_t x, r, g, b, y, rstd, xo;
    /* the same on the second context */
    rt_tensor_t x2, r2, g2, b2, y2, rstd2, xo2;
    rt_guard_t guard; /* every buffer, read back around each rejected call */
    rt_log_t log;
} fx_t;

static void make_set(rt_tensor_t *x, rt_tensor_t *r, rt_tensor_t *g, rt_tensor_t *b, rt_tensor_t *y,
                     rt_tensor_t *rstd, rt_tensor_t *xo, uint64_t seed)
{
    rt_tensor_create(x, RUDNN_F32, 2, dims_x, 0, SLACK);
    rt_tensor_create(r, RUDNN_F32, 2, dims_x, 0, SLACK);
    rt_tensor_create(g, RUDNN_F32, 1, dims_g, 0, SLACK);
    rt_tensor_create(b, RUDNN_F32, 1, dims_g, 0, SLACK);
    rt_tensor_create(y, RUDNN_F32, 2, dims_x, 0, SLACK);
    rt_tensor_create(rstd, RUDNN_F32, 1, dims_rstd, 0, SLACK);
    rt_tensor_create(xo, RUDNN_F32, 2, dims_x, 0, SLACK);
    rt_rng_t rng;
    rt_rng_seed(&rng, seed);
    rt_tensor_fill_uniform(x, &rng, -2.0, 3.0);
    rt_tensor_fill_uniform(r, &rng, -2.0, 2.0);
    rt_tensor_fill_uniform(g, &rng, 0.5, 1.5);
    rt_tensor_fill_uniform(b, &rng, -1.0, 1.0);
}

static int fx_setup(void **state)
{
    fx_t *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    *state = f;
    make_set(&f->x, &f->r, &f->g, &f->b, &f->y, &f->rstd, &f->xo, 1);
    rt_tensor_t *mine[] = {&f->x, &f->r, &f->g, &f->b, &f->y, &f->rstd, &f->xo};
    for (size_t i = 0; i < 7; i++)
        rt_guard_track(&f->guard, rt_queue, mine[i], NULL);
    /* the same set on the second context (rt_tensor_create uses rt_ctx/rt_queue) */
    rt_binding_t saved = rt_bind(rt_ctx2, rt_queue2);
    make_set(&f->x2, &f->r2, &f->g2, &f->b2, &f->y2, &f->rstd2, &f->xo2, 2);
    rt_unbind(saved);
    rt_tensor_t *theirs[] = {&f->x2, &f->r2, &f->g2, &f->b2, &f->y2, &f->rstd2, &f->xo2};
    for (size_t i = 0; i < 7; i++)
        rt_guard_track(&f->guard, rt_queue2, theirs[i], NULL);
    return 0;
}

static int fx_teardown(void **state)
{
    fx_t *f = *state;
    if (!f)
        return 0;
    rt_guard_free(&f->guard);
    rt_tensor_t *all[] = {&f->x, &f->r, &f->g, &f->b, &f->y, &f->rstd, &f->xo,
                          &f->x2, &f->r2, &f->g2, &f->b2, &f->y2, &f->rstd2, &f->xo2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        rt_tensor_destroy(all[i]);
    free(f);
    return 0;
}

static void fx_finish(fx_t *f) { rt_log_finish(&f->log, "check(s)"); }

/* ---- calling the ops -------------------------------------------------------------- */

typedef struct args {
    rudnn_queue_t q;
    const rudnn_tensor_t *x, *r, *g, *b, *y, *rstd, *xo;
    float eps;
} args_t;

static args_t defaults(const fx_t *f)
{
    args_t a = {rt_queue, &f->x.t, &f->r.t, &f->g.t, &f->b.t, &f->y.t, &f->rstd.t, &f->xo.t, 1e-5f};
    return a;
}

/* The row tensors (input, residual, output, x_out) as dtype and shape views
 * at offset 0 of the fixture's buffers, held by v; the rest as defaults. */
typedef struct rows_view {
    rudnn_tensor_t x, r, y, xo;
} rows_view_t;

static args_t with_rows(const fx_t *f, rows_view_t *v, rudnn_dtype_t dtype, int rank, const int64_t *dims)
{
    v->x = rt_tensor_desc(&f->x, dtype, rank, dims, 0);
    v->r = rt_tensor_desc(&f->r, dtype, rank, dims, 0);
    v->y = rt_tensor_desc(&f->y, dtype, rank, dims, 0);
    v->xo = rt_tensor_desc(&f->xo, dtype, rank, dims, 0);
    args_t a = defaults(f);
    a.x = &v->x;
    a.r = &v->r;
    a.y = &v->y;
    a.xo = &v->xo;
    return a;
}

static rudnn_status_t call(int op, const args_t *a)
{
    switch (op) {
    case OP_LN: return rudnn_layer_norm(a->q, a->x, a->g, a->b, a->eps, a->y);
    case OP_RMS: return rudnn_rms_norm(a->q, a->x, a->g, a->eps, a->y);
    case OP_SM: return rudnn_softmax_last_axis(a->q, a->x, a->y);
    default: return rudnn_add_rms_norm(a->q, a->x, a->r, a->g, a->eps, a->y, a->rstd, a->xo);
    }
}

/* Calls op with a, and checks: status is want (or alt, when the contract
 * allows two), the message names the op, arg and rule (each when non-NULL),
 * and no buffer changed. what describes the case in failure reports. */
static void expect_reject(fx_t *f, int op, const args_t *a, rudnn_status_t want, rudnn_status_t alt,
                          const char *arg, const char *rule, const char *what)
{
    rt_guard_begin(&f->guard);
    rudnn_status_t st = call(op, a);
    const char *msg = rudnn_last_error();
    char copy[2048];
    snprintf(copy, sizeof copy, "%s", msg ? msg : "(null)");
    int bad = 0;
    if (st != want && st != alt) {
        rt_logf(&f->log, "  %s, %s: returned %s, expected %s; message \"%s\"\n", op_names[op], what,
                rudnn_status_string(st), rudnn_status_string(want), copy);
        bad = 1;
    }
    if (!strstr(copy, op_names[op])) {
        rt_logf(&f->log, "  %s, %s: message \"%s\" does not name the op\n", op_names[op], what, copy);
        bad = 1;
    }
    if (arg && !strstr(copy, arg)) {
        rt_logf(&f->log, "  %s, %s: message \"%s\" does not name the argument \"%s\"\n", op_names[op], what, copy, arg);
        bad = 1;
    }
    if (rule && !strstr(copy, rule)) {
        rt_logf(&f->log, "  %s, %s: message \"%s\" does not say \"%s\"\n", op_names[op], what, copy, rule);
        bad = 1;
    }
    int changed = rt_guard_changed(&f->guard);
    if (changed) {
        rt_logf(&f->log, "  %s, %s: %d buffer(s) were written by a rejected call\n", op_names[op], what, changed);
        bad = 1;
    }
    f->log.failures += bad;
}

static void expect_ok(fx_t *f, int op, const args_t *a, const char *what)
{
    rudnn_status_t st = call(op, a);
    if (st != RUDNN_STATUS_SUCCESS) {
        rt_logf(&f->log, "  %s, %s: returned %s: %s\n", op_names[op], what, rudnn_status_string(st),
                rudnn_last_error());
        f->log.failures++;
        return;
    }
    if (strcmp(rudnn_last_error(), "") != 0) {
        rt_logf(&f->log, "  %s, %s: succeeded but rudnn_last_error() is \"%s\"\n", op_names[op], what,
                rudnn_last_error());
        f->log.failures++;
    }
    rudnn_queue_synchronize(rt_queue);
}

static int uses_gamma(int op) { return op != OP_SM; }
static int uses_eps(int op) { return op != OP_SM; }

/* A descriptor over another tensor's buffer (rt_tensor_desc), filled by hand
 * (row-major strides in unsigned arithmetic): for
 * shapes whose element count overflows, so that this suite tests the ops'
 * validation and not rudnn_tensor_init (test_core covers that). */
static rudnn_tensor_t raw_view(const rt_tensor_t *base, rudnn_dtype_t dtype, int rank, const int64_t *dims,
                               size_t byte_offset)
{
    rudnn_tensor_t t;
    memset(&t, 0, sizeof t);
    t.dtype = dtype;
    t.rank = rank;
    t.buffer = base->buffer;
    t.offset = byte_offset;
    uint64_t stride = 1;
    for (int i = rank - 1; i >= 0; i--) {
        t.dims[i] = dims[i];
        t.strides[i] = (int64_t)stride;
        stride *= (uint64_t)dims[i];
    }
    return t;
}

/* ---- tests ------------------------------------------------------------------------- */

static void test_null_arguments(void **state)
{
    fx_t *f = *state;
    for (int op = 0; op < OP_COUNT; op++) {
        args_t a = defaults(f);
        a.q = NULL;
        expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, "queue", NULL, "NULL queue");
        a = defaults(f);
        a.x = NULL;
        expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, input_names[op], NULL,
                      "NULL input");
        a = defaults(f);
        a.y = NULL;
        expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, output_names[op], NULL,
                      "NULL output");
        if (uses_gamma(op)) {
            a = defaults(f);
            a.g = NULL;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, "gamma", NULL, "NULL gamma");
        }
        if (op == OP_ADD) {
            a = defaults(f);
            a.r = NULL;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, "residual", NULL,
                          "NULL residual");
            a = defaults(f);
            a.rstd = NULL;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, "rstd", NULL, "NULL rstd");
            a = defaults(f);
            a.xo = NULL;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, " x ", NULL, "NULL x_out");
        }
        /* a descriptor without a buffer */
        rudnn_tensor_t nobuf;
        rt_assert_status(rudnn_tensor_init(&nobuf, NULL, 0, RUDNN_F32, 2, dims_x), RUDNN_STATUS_SUCCESS);
        a = defaults(f);
        a.x = &nobuf;
        expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, input_names[op], NULL,
                      "input without a buffer");
    }
    fx_finish(f);
}

static void test_bad_shapes(void **state)
{
    fx_t *f = *state;
    static const int64_t empty_last[2] = {ROWS, 0};
    static const int64_t empty_g[1] = {0};
    static const int64_t g_short[1] = {COLS - 1};
    static const int64_t g_long[1] = {COLS + 1};
    static const int64_t g_rank2[2] = {1, COLS};
    static const int64_t neg[2] = {-ROWS, COLS};
    for (int op = 0; op < OP_COUNT; op++) {
        /* empty last axis */
        rows_view_t v;
        args_t a = with_rows(f, &v, RUDNN_F32, 2, empty_last);
        rudnn_tensor_t ge = rt_tensor_desc(&f->g, RUDNN_F32, 1, empty_g, 0);
        rudnn_tensor_t be = rt_tensor_desc(&f->b, RUDNN_F32, 1, empty_g, 0);
        a.g = &ge;
        a.b = &be;
        expect_reject(f, op, &a, RUDNN_STATUS_BAD_SHAPE, RUDNN_STATUS_BAD_SHAPE, input_names[op], NULL,
                      "empty last axis [4, 0]");

        /* rank 0 input (and output) */
        a = with_rows(f, &v, RUDNN_F32, 0, NULL);
        static const int64_t one[1] = {1};
        rudnn_tensor_t g1 = rt_tensor_desc(&f->g, RUDNN_F32, 1, one, 0);
        a.g = &g1;
        a.b = &g1;
        expect_reject(f, op, &a, RUDNN_STATUS_BAD_SHAPE, RUDNN_STATUS_BAD_SHAPE, input_names[op], NULL,
                      "rank 0 input");

        /* negative dim and rank 9 written into the descriptor directly */
        rudnn_tensor_t xn = f->x.t;
        memcpy(xn.dims, neg, sizeof neg);
        a = defaults(f);
        a.x = &xn;
        expect_reject(f, op, &a, RUDNN_STATUS_BAD_SHAPE, RUDNN_STATUS_BAD_SHAPE, input_names[op], NULL,
                      "negative dim");
        rudnn_tensor_t x9 = f->x.t;
        x9.rank = RUDNN_MAX_RANK + 1;
        a = defaults(f);
        a.x = &x9;
        expect_reject(f, op, &a, RUDNN_STATUS_BAD_SHAPE, RUDNN_STATUS_BAD_SHAPE, input_names[op], NULL, "rank 9");

        /* output shape differs (same element count too) */
        static const int64_t y_other[][3] = {{ROWS, COLS + 1, 0}, {ROWS / 2, COLS * 2, 0}, {ROWS * COLS, 0, 0},
                                             {ROWS, COLS, 1}};
        static const int y_rank[] = {2, 2, 1, 3};
        for (size_t k = 0; k < 4; k++) {
            rudnn_tensor_t yo = rt_tensor_desc(&f->y, RUDNN_F32, y_rank[k], y_other[k], 0);
            a = defaults(f);
            a.y = &yo;
            char what[64];
            snprintf(what, sizeof what, "output shape variant %zu", k);
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_SHAPE, RUDNN_STATUS_BAD_SHAPE, output_names[op], NULL, what);
            if (op == OP_ADD) {
                rudnn_tensor_t xo = rt_tensor_desc(&f->xo, RUDNN_F32, y_rank[k], y_other[k], 0);
                a = defaults(f);
                a.xo = &xo;
                expect_reject(f, op, &a, RUDNN_STATUS_BAD_SHAPE, RUDNN_STATUS_BAD_SHAPE, " x ", NULL,
                              "x_out shape differs");
                rudnn_tensor_t rr = rt_tensor_desc(&f->r, RUDNN_F32, y_rank[k], y_other[k], 0);
                a = defaults(f);
                a.r = &rr;
                expect_reject(f, op, &a, RUDNN_STATUS_BAD_SHAPE, RUDNN_STATUS_BAD_SHAPE, "residual", NULL,
                              "residual shape differs from a");
            }
        }

        if (!uses_gamma(op))
            continue;
        const int64_t *gd[] = {g_short, g_long, g_rank2};
        const int gr[] = {1, 1, 2};
        const char *gw[] = {"gamma [H-1]", "gamma [H+1]", "gamma [1, H]"};
        for (size_t k = 0; k < 3; k++) {
            rudnn_tensor_t g = rt_tensor_desc(&f->g, RUDNN_F32, gr[k], gd[k], 0);
            a = defaults(f);
            a.g = &g;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_SHAPE, RUDNN_STATUS_BAD_SHAPE, "gamma", NULL, gw[k]);
            if (op == OP_LN) {
                rudnn_tensor_t b = rt_tensor_desc(&f->b, RUDNN_F32, gr[k], gd[k], 0);
                a = defaults(f);
                a.b = &b;
                expect_reject(f, op, &a, RUDNN_STATUS_BAD_SHAPE, RUDNN_STATUS_BAD_SHAPE, "beta", NULL, gw[k]);
            }
        }
        /* a bad gamma is rejected even when there are no rows */
        static const int64_t no_rows[2] = {0, COLS};
        a = with_rows(f, &v, RUDNN_F32, 2, no_rows);
        static const int64_t zero[1] = {0};
        rudnn_tensor_t rstdz = rt_tensor_desc(&f->rstd, RUDNN_F32, 1, zero, 0);
        rudnn_tensor_t g = rt_tensor_desc(&f->g, RUDNN_F32, 1, g_short, 0);
        a.rstd = &rstdz;
        a.g = &g;
        expect_reject(f, op, &a, RUDNN_STATUS_BAD_SHAPE, RUDNN_STATUS_BAD_SHAPE, "gamma", NULL,
                      "gamma [H-1] with 0 rows");
    }
    fx_finish(f);
}

static void test_bad_dtypes(void **state)
{
    fx_t *f = *state;
    static const rudnn_dtype_t not_float[] = {RUDNN_I8, RUDNN_I4, RUDNN_U32, RUDNN_I32, RUDNN_I64};
    for (int op = 0; op < OP_COUNT; op++) {
        for (size_t k = 0; k < sizeof not_float / sizeof not_float[0]; k++) {
            rudnn_dtype_t dt = not_float[k];
            /* input, residual and outputs all of that dtype: only the dtype is wrong */
            rows_view_t v;
            args_t a = with_rows(f, &v, dt, 2, dims_x);
            char what[64];
            snprintf(what, sizeof what, "input dtype %s", rudnn_dtype_name(dt));
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_DTYPE, RUDNN_STATUS_BAD_DTYPE, input_names[op], NULL, what);
        }
        /* a dtype value that is not a rudnn dtype */
        rudnn_tensor_t xbad = f->x.t;
        xbad.dtype = (rudnn_dtype_t)99;
        args_t a = defaults(f);
        a.x = &xbad;
        expect_reject(f, op, &a, RUDNN_STATUS_BAD_DTYPE, RUDNN_STATUS_BAD_DTYPE, input_names[op], NULL,
                      "input dtype 99");

        /* output dtype differs from the input's */
        static const rudnn_dtype_t other[] = {RUDNN_F16, RUDNN_BF16};
        for (size_t k = 0; k < 2; k++) {
            rudnn_tensor_t y = rt_tensor_desc(&f->y, other[k], 2, dims_x, 0);
            a = defaults(f);
            a.y = &y;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_DTYPE, RUDNN_STATUS_BAD_DTYPE, output_names[op], NULL,
                          "output dtype differs");
            if (op == OP_ADD) {
                rudnn_tensor_t xo = rt_tensor_desc(&f->xo, other[k], 2, dims_x, 0);
                a = defaults(f);
                a.xo = &xo;
                expect_reject(f, op, &a, RUDNN_STATUS_BAD_DTYPE, RUDNN_STATUS_BAD_DTYPE, " x ", NULL,
                              "x_out dtype differs");
                rudnn_tensor_t r = rt_tensor_desc(&f->r, other[k], 2, dims_x, 0);
                a = defaults(f);
                a.r = &r;
                expect_reject(f, op, &a, RUDNN_STATUS_BAD_DTYPE, RUDNN_STATUS_BAD_DTYPE, "residual", NULL,
                              "residual dtype differs");
                rudnn_tensor_t rs = rt_tensor_desc(&f->rstd, other[k], 1, dims_rstd, 0);
                a = defaults(f);
                a.rstd = &rs;
                expect_reject(f, op, &a, RUDNN_STATUS_BAD_DTYPE, RUDNN_STATUS_BAD_DTYPE, "rstd", NULL,
                              "rstd not f32");
            }
            if (!uses_gamma(op))
                continue;
            /* gamma/beta must be F32 whatever the input dtype */
            rudnn_tensor_t g = rt_tensor_desc(&f->g, other[k], 1, dims_g, 0);
            a = defaults(f);
            a.g = &g;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_DTYPE, RUDNN_STATUS_BAD_DTYPE, "gamma", NULL,
                          "gamma f16/bf16");
            if (op == OP_LN) {
                rudnn_tensor_t b = rt_tensor_desc(&f->b, other[k], 1, dims_g, 0);
                a = defaults(f);
                a.b = &b;
                expect_reject(f, op, &a, RUDNN_STATUS_BAD_DTYPE, RUDNN_STATUS_BAD_DTYPE, "beta", NULL,
                              "beta f16/bf16");
            }
            /* gamma F16 with an F16 input: still F32 only */
            rows_view_t v16;
            a = with_rows(f, &v16, other[k], 2, dims_x);
            a.g = &g;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_DTYPE, RUDNN_STATUS_BAD_DTYPE, "gamma", NULL,
                          "gamma of the input's 16-bit dtype");
        }
    }
    fx_finish(f);
}

static void test_bad_eps(void **state)
{
    fx_t *f = *state;
    const float bad[] = {0.0f, -0.0f, -1e-5f, NAN, INFINITY, -INFINITY};
    for (int op = 0; op < OP_COUNT; op++) {
        if (!uses_eps(op))
            continue;
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            args_t a = defaults(f);
            a.eps = bad[k];
            char what[64];
            snprintf(what, sizeof what, "eps = %g", (double)bad[k]);
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, "eps", NULL, what);
        }
    }
    fx_finish(f);
}

static void test_device_mismatch(void **state)
{
    fx_t *f = *state;
    for (int op = 0; op < OP_COUNT; op++) {
        args_t a = defaults(f);
        a.x = &f->x2.t;
        expect_reject(f, op, &a, RUDNN_STATUS_DEVICE_MISMATCH, RUDNN_STATUS_DEVICE_MISMATCH, input_names[op], NULL,
                      "input from another context");
        a = defaults(f);
        a.y = &f->y2.t;
        expect_reject(f, op, &a, RUDNN_STATUS_DEVICE_MISMATCH, RUDNN_STATUS_DEVICE_MISMATCH, output_names[op], NULL,
                      "output from another context");
        /* every tensor on this context, the queue on the other */
        a = defaults(f);
        a.q = rt_queue2;
        expect_reject(f, op, &a, RUDNN_STATUS_DEVICE_MISMATCH, RUDNN_STATUS_DEVICE_MISMATCH, NULL, NULL,
                      "queue from another context");
        if (uses_gamma(op)) {
            a = defaults(f);
            a.g = &f->g2.t;
            expect_reject(f, op, &a, RUDNN_STATUS_DEVICE_MISMATCH, RUDNN_STATUS_DEVICE_MISMATCH, "gamma", NULL,
                          "gamma from another context");
        }
        if (op == OP_LN) {
            a = defaults(f);
            a.b = &f->b2.t;
            expect_reject(f, op, &a, RUDNN_STATUS_DEVICE_MISMATCH, RUDNN_STATUS_DEVICE_MISMATCH, "beta", NULL,
                          "beta from another context");
        }
        if (op == OP_ADD) {
            a = defaults(f);
            a.r = &f->r2.t;
            expect_reject(f, op, &a, RUDNN_STATUS_DEVICE_MISMATCH, RUDNN_STATUS_DEVICE_MISMATCH, "residual", NULL,
                          "residual from another context");
            a = defaults(f);
            a.rstd = &f->rstd2.t;
            expect_reject(f, op, &a, RUDNN_STATUS_DEVICE_MISMATCH, RUDNN_STATUS_DEVICE_MISMATCH, "rstd", NULL,
                          "rstd from another context");
            a = defaults(f);
            a.xo = &f->xo2.t;
            expect_reject(f, op, &a, RUDNN_STATUS_DEVICE_MISMATCH, RUDNN_STATUS_DEVICE_MISMATCH, " x ", NULL,
                          "x_out from another context");
        }
    }
    fx_finish(f);
}

static void test_out_of_bounds(void **state)
{
    fx_t *f = *state;
    const size_t xbytes = f->x.buffer_bytes;
    const size_t tbytes = ROWS * COLS * sizeof(float);
    for (int op = 0; op < OP_COUNT; op++) {
        /* ends 4 bytes past the buffer; starts past the end; starts at the end */
        const size_t offsets[] = {xbytes - tbytes + 4, xbytes + 4, xbytes};
        for (size_t k = 0; k < 3; k++) {
            rudnn_tensor_t x = rt_tensor_desc(&f->x, RUDNN_F32, 2, dims_x, offsets[k]);
            args_t a = defaults(f);
            a.x = &x;
            char what[64];
            snprintf(what, sizeof what, "input at byte %zu of %zu", offsets[k], xbytes);
            expect_reject(f, op, &a, RUDNN_STATUS_OUT_OF_BOUNDS, RUDNN_STATUS_OUT_OF_BOUNDS, input_names[op], NULL,
                          what);
            rudnn_tensor_t y = rt_tensor_desc(&f->y, RUDNN_F32, 2, dims_x, offsets[k]);
            a = defaults(f);
            a.y = &y;
            expect_reject(f, op, &a, RUDNN_STATUS_OUT_OF_BOUNDS, RUDNN_STATUS_OUT_OF_BOUNDS, output_names[op],
                          NULL, "output past the end of its buffer");
        }
        /* more rows than the buffer holds */
        static const int64_t tall[2] = {ROWS * 100, COLS};
        rows_view_t v;
        args_t a = with_rows(f, &v, RUDNN_F32, 2, tall);
        static const int64_t tall_rows[1] = {ROWS * 100};
        rudnn_tensor_t rst = rt_tensor_desc(&f->rstd, RUDNN_F32, 1, tall_rows, 0);
        a.rstd = &rst;
        expect_reject(f, op, &a, RUDNN_STATUS_OUT_OF_BOUNDS, RUDNN_STATUS_OUT_OF_BOUNDS, input_names[op], NULL,
                      "400 rows in a buffer for 4 + slack");
        /* element counts whose byte size overflows: any clean rejection */
        static const int64_t huge[2] = {(int64_t)1 << 40, COLS};
        static const int64_t overflow[3] = {(int64_t)1 << 62, 4, COLS};
        rudnn_tensor_t xh = rt_tensor_desc(&f->x, RUDNN_F32, 2, huge, 0);
        rudnn_tensor_t yh = rt_tensor_desc(&f->y, RUDNN_F32, 2, huge, 0);
        a = defaults(f);
        a.x = &xh;
        a.y = &yh;
        expect_reject(f, op, &a, RUDNN_STATUS_OUT_OF_BOUNDS, RUDNN_STATUS_BAD_SHAPE, input_names[op], NULL,
                      "2^40 rows");
        rudnn_tensor_t xov = raw_view(&f->x, RUDNN_F32, 3, overflow, 0);
        rudnn_tensor_t yov = raw_view(&f->y, RUDNN_F32, 3, overflow, 0);
        a = defaults(f);
        a.x = &xov;
        a.y = &yov;
        expect_reject(f, op, &a, RUDNN_STATUS_BAD_SHAPE, RUDNN_STATUS_OUT_OF_BOUNDS, input_names[op], NULL,
                      "2^64 elements (size_t overflow)");
        if (uses_gamma(op)) {
            rudnn_tensor_t g = rt_tensor_desc(&f->g, RUDNN_F32, 1, dims_g, f->g.buffer_bytes - 4);
            a = defaults(f);
            a.g = &g;
            expect_reject(f, op, &a, RUDNN_STATUS_OUT_OF_BOUNDS, RUDNN_STATUS_OUT_OF_BOUNDS, "gamma", NULL,
                          "gamma past the end");
        }
        if (op == OP_LN) {
            rudnn_tensor_t b = rt_tensor_desc(&f->b, RUDNN_F32, 1, dims_g, f->b.buffer_bytes - 4);
            a = defaults(f);
            a.b = &b;
            expect_reject(f, op, &a, RUDNN_STATUS_OUT_OF_BOUNDS, RUDNN_STATUS_OUT_OF_BOUNDS, "beta", NULL,
                          "beta past the end");
        }
        if (op == OP_ADD) {
            rudnn_tensor_t rs = rt_tensor_desc(&f->rstd, RUDNN_F32, 1, dims_rstd, f->rstd.buffer_bytes - 4);
            a = defaults(f);
            a.rstd = &rs;
            expect_reject(f, op, &a, RUDNN_STATUS_OUT_OF_BOUNDS, RUDNN_STATUS_OUT_OF_BOUNDS, "rstd", NULL,
                          "rstd past the end");
            rudnn_tensor_t r = rt_tensor_desc(&f->r, RUDNN_F32, 2, dims_x, f->r.buffer_bytes - 4);
            a = defaults(f);
            a.r = &r;
            expect_reject(f, op, &a, RUDNN_STATUS_OUT_OF_BOUNDS, RUDNN_STATUS_OUT_OF_BOUNDS, "residual", NULL,
                          "residual past the end");
            rudnn_tensor_t xo = rt_tensor_desc(&f->xo, RUDNN_F32, 2, dims_x, f->xo.buffer_bytes - 4);
            a = defaults(f);
            a.xo = &xo;
            expect_reject(f, op, &a, RUDNN_STATUS_OUT_OF_BOUNDS, RUDNN_STATUS_OUT_OF_BOUNDS, " x ", NULL,
                          "x_out past the end");
        }
    }
    fx_finish(f);
}

static void test_misaligned_offsets(void **state)
{
    fx_t *f = *state;
    for (int op = 0; op < OP_COUNT; op++) {
        static const size_t offs[] = {1, 2, 6};
        for (size_t k = 0; k < 3; k++) {
            rudnn_tensor_t x = rt_tensor_desc(&f->x, RUDNN_F32, 2, dims_x, offs[k]);
            args_t a = defaults(f);
            a.x = &x;
            char what[64];
            snprintf(what, sizeof what, "f32 input at byte offset %zu", offs[k]);
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, input_names[op], "offset",
                          what);
            rudnn_tensor_t y = rt_tensor_desc(&f->y, RUDNN_F32, 2, dims_x, offs[k]);
            a = defaults(f);
            a.y = &y;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, output_names[op], "offset",
                          "f32 output at a misaligned offset");
        }
        /* 16-bit input at an odd byte offset */
        rows_view_t v;
        args_t a = with_rows(f, &v, RUDNN_F16, 2, dims_x);
        v.x = rt_tensor_desc(&f->x, RUDNN_F16, 2, dims_x, 3);
        expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, input_names[op], "offset",
                      "f16 input at byte offset 3");
        if (uses_gamma(op)) {
            rudnn_tensor_t g = rt_tensor_desc(&f->g, RUDNN_F32, 1, dims_g, 2);
            a = defaults(f);
            a.g = &g;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, "gamma", "offset",
                          "gamma at byte offset 2");
        }
        if (op == OP_ADD) {
            rudnn_tensor_t rs = rt_tensor_desc(&f->rstd, RUDNN_F32, 1, dims_rstd, 1);
            a = defaults(f);
            a.rstd = &rs;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, "rstd", "offset",
                          "rstd at byte offset 1");
        }
    }
    fx_finish(f);
}

static void test_non_contiguous(void **state)
{
    fx_t *f = *state;
    for (int op = 0; op < OP_COUNT; op++) {
        /* padded rows (row stride 16 > 8) and a transposed view */
        static const int64_t strides[][2] = {{2 * COLS, 1}, {1, ROWS}};
        static const int64_t tdims[][2] = {{ROWS, COLS}, {ROWS, COLS}};
        for (size_t k = 0; k < 2; k++) {
            rudnn_tensor_t x = rt_tensor_desc(&f->x, RUDNN_F32, 2, tdims[k], 0);
            x.strides[0] = strides[k][0];
            x.strides[1] = strides[k][1];
            args_t a = defaults(f);
            a.x = &x;
            expect_reject(f, op, &a, RUDNN_STATUS_NOT_SUPPORTED, RUDNN_STATUS_BAD_SHAPE, input_names[op],
                          "contiguous", k ? "transposed input" : "input with padded rows");
            rudnn_tensor_t y = rt_tensor_desc(&f->y, RUDNN_F32, 2, tdims[k], 0);
            y.strides[0] = strides[k][0];
            y.strides[1] = strides[k][1];
            a = defaults(f);
            a.y = &y;
            expect_reject(f, op, &a, RUDNN_STATUS_NOT_SUPPORTED, RUDNN_STATUS_BAD_SHAPE, output_names[op],
                          "contiguous", k ? "transposed output" : "output with padded rows");
        }
        if (uses_gamma(op)) {
            rudnn_tensor_t g = rt_tensor_desc(&f->g, RUDNN_F32, 1, dims_g, 0);
            g.strides[0] = 2;
            args_t a = defaults(f);
            a.g = &g;
            expect_reject(f, op, &a, RUDNN_STATUS_NOT_SUPPORTED, RUDNN_STATUS_BAD_SHAPE, "gamma", "contiguous",
                          "gamma with stride 2");
        }
    }
    fx_finish(f);
}

static void test_overlap(void **state)
{
    fx_t *f = *state;
    for (int op = 0; op < OP_COUNT; op++) {
        /* output in the input's buffer, shifted by one element either way */
        static const size_t shifts[] = {4, 4 * COLS};
        for (size_t k = 0; k < 2; k++) {
            rudnn_tensor_t x = rt_tensor_desc(&f->x, RUDNN_F32, 2, dims_x, 4 * COLS);
            rudnn_tensor_t y_after = rt_tensor_desc(&f->x, RUDNN_F32, 2, dims_x, 4 * COLS + shifts[k]);
            rudnn_tensor_t y_before = rt_tensor_desc(&f->x, RUDNN_F32, 2, dims_x, 4 * COLS - shifts[k]);
            args_t a = defaults(f);
            a.x = &x;
            a.y = &y_after;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, output_names[op], "overlap",
                          "output shifted after the input");
            a.y = &y_before;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, output_names[op], "overlap",
                          "output shifted before the input");
        }
        if (uses_gamma(op)) {
            /* the output over gamma's bytes */
            rudnn_tensor_t y = rt_tensor_desc(&f->g, RUDNN_F32, 2, dims_x, 0);
            args_t a = defaults(f);
            a.y = &y;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, "gamma", "overlap",
                          "output overlaps gamma");
        }
        if (op == OP_LN) {
            rudnn_tensor_t y = rt_tensor_desc(&f->b, RUDNN_F32, 2, dims_x, 0);
            args_t a = defaults(f);
            a.y = &y;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, "beta", "overlap",
                          "output overlaps beta");
        }
        if (op == OP_ADD) {
            args_t a = defaults(f);
            /* y and x_out the very same tensor: two outputs in one place */
            a.xo = &f->y.t;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, NULL, "overlap",
                          "y == x_out");
            /* y and x_out partially overlapping */
            rudnn_tensor_t xo = rt_tensor_desc(&f->y, RUDNN_F32, 2, dims_x, 4);
            a = defaults(f);
            a.xo = &xo;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, NULL, "overlap",
                          "x_out one element after y");
            /* x_out partially over residual */
            rudnn_tensor_t xr = rt_tensor_desc(&f->r, RUDNN_F32, 2, dims_x, 4);
            a = defaults(f);
            a.xo = &xr;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, "residual", "overlap",
                          "x_out one element after residual");
            /* x_out partially over a */
            rudnn_tensor_t xa = rt_tensor_desc(&f->x, RUDNN_F32, 2, dims_x, 4);
            a = defaults(f);
            a.xo = &xa;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, " x ", "overlap",
                          "x_out one element after a");
            /* rstd inside y */
            rudnn_tensor_t rs = rt_tensor_desc(&f->y, RUDNN_F32, 1, dims_rstd, 8);
            a = defaults(f);
            a.rstd = &rs;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, "rstd", "overlap",
                          "rstd inside y");
            /* rstd inside a (an input) */
            rudnn_tensor_t rsa = rt_tensor_desc(&f->x, RUDNN_F32, 1, dims_rstd, 0);
            a = defaults(f);
            a.rstd = &rsa;
            expect_reject(f, op, &a, RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_PARAM, "rstd", "overlap",
                          "rstd inside a");
        }
    }
    fx_finish(f);
}

static void test_add_rms_norm_rstd(void **state)
{
    fx_t *f = *state;
    static const int64_t wrong[][2] = {{ROWS + 1, 0}, {ROWS - 1, 0}, {ROWS, 2}, {ROWS * COLS, 0}};
    static const int wrong_rank[] = {1, 1, 2, 1};
    for (size_t k = 0; k < 4; k++) {
        rudnn_tensor_t rs = rt_tensor_desc(&f->rstd, RUDNN_F32, wrong_rank[k], wrong[k], 0);
        args_t a = defaults(f);
        a.rstd = &rs;
        char what[64];
        snprintf(what, sizeof what, "rstd with %lld elements for %d rows",
                 (long long)rt_numel(wrong_rank[k], wrong[k]), ROWS);
        expect_reject(f, OP_ADD, &a, RUDNN_STATUS_BAD_SHAPE, RUDNN_STATUS_BAD_SHAPE, "rstd", NULL, what);
    }
    /* any shape with rows elements is accepted: [rows], [2, 2] */
    static const int64_t ok22[2] = {2, 2};
    rudnn_tensor_t rs = rt_tensor_desc(&f->rstd, RUDNN_F32, 2, ok22, 0);
    args_t a = defaults(f);
    a.rstd = &rs;
    expect_ok(f, OP_ADD, &a, "rstd [2, 2] for 4 rows");
    a = defaults(f);
    expect_ok(f, OP_ADD, &a, "rstd [4]");
    fx_finish(f);
}

/* rudnn_last_error() is "" after a successful call, even right after a
 * failed one; the fixture's plain calls all succeed (beta NULL too). */
static void test_success_clears_error(void **state)
{
    fx_t *f = *state;
    for (int op = 0; op < OP_COUNT; op++) {
        args_t bad = defaults(f);
        bad.q = NULL;
        (void)call(op, &bad);
        if (strcmp(rudnn_last_error(), "") == 0) {
            rt_logf(&f->log, "  %s: a failed call left rudnn_last_error() empty\n", op_names[op]);
            f->log.failures++;
        }
        args_t a = defaults(f);
        expect_ok(f, op, &a, "valid call after a failed one");
        /* in place is valid */
        a = defaults(f);
        a.y = a.x;
        expect_ok(f, op, &a, "output == input");
        if (op == OP_LN) {
            a = defaults(f);
            a.b = NULL;
            expect_ok(f, op, &a, "beta NULL");
        }
        if (op == OP_ADD) {
            a = defaults(f);
            a.xo = a.r;
            expect_ok(f, op, &a, "x_out == residual");
            a = defaults(f);
            a.xo = a.x;
            expect_ok(f, op, &a, "x_out == a");
        }
        /* zero rows */
        static const int64_t no_rows[2] = {0, COLS};
        static const int64_t zero[1] = {0};
        rows_view_t v;
        a = with_rows(f, &v, RUDNN_F32, 2, no_rows);
        rudnn_tensor_t rsz = rt_tensor_desc(&f->rstd, RUDNN_F32, 1, zero, 0);
        a.rstd = &rsz;
        rt_guard_begin(&f->guard);
        expect_ok(f, op, &a, "zero rows");
        if (rt_guard_changed(&f->guard)) {
            rt_logf(&f->log, "  %s: a call with zero rows wrote to a buffer\n", op_names[op]);
            f->log.failures++;
        }
    }
    fx_finish(f);
}

/* ---- main ------------------------------------------------------------------------ */

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        T(test_null_arguments),   T(test_bad_shapes),    T(test_bad_dtypes),
        T(test_bad_eps),          T(test_device_mismatch), T(test_out_of_bounds),
        T(test_misaligned_offsets), T(test_non_contiguous), T(test_overlap),
        T(test_add_rms_norm_rstd), T(test_success_clears_error),
    };
    return rt_run_with_second_context("norm-contract", tests, argc, argv);
}
