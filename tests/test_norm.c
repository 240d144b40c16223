/* Numeric tests of the normalization family against the FP64 references, run
 * once per backend (meson registers norm-opencl, norm-cuda, norm-hip with
 * RUDNN_BACKEND set). Every op x dtype (F32, F16, BF16) x case family:
 *
 *   shapes     rows of length 1, odd lengths (3, 7, 1000, 4097), power-of-two
 *              lengths, 10000 and 16384, ranks 1..4 (rows = product of the leading dims),
 *              thousands of short rows, 2000 rows of 4096
 *   large      rows of 65536 (2 and 201 rows) and 262144 elements
 *   empty      rows = 0 (an empty leading dim): succeeds, writes nothing
 *   magnitude  rows near 1e30, 1e-30 and FLT_MAX (F32, BF16), near 65504 and
 *              subnormal (F16), next to ordinary rows, for every kernel shape
 *              (odd lengths, warp, CTA, cluster): no overflow of the sum of
 *              squares, and rows of one launch on both sides of the CUDA
 *              kernels' unscaled shortcut; rows offset far from their spread
 *   nonfinite  NaN, +inf, -inf, all -inf, and (add_rms_norm) a + r that
 *              overflows the dtype
 *   inplace    output == input; for add_rms_norm x_out == residual,
 *              x_out == a, y == a, y == a with x_out == residual, and
 *              y == residual (accepted and right, or rejected untouched)
 *   offsets    tensors at element offsets inside bigger buffers, including
 *              offsets that are not 16-byte aligned
 *
 * Every run poisons each output buffer with a signalling-NaN sentinel, then
 * checks that every element of each output was written, that nothing outside
 * the outputs changed (inputs, gamma, beta, the head and tail of each buffer),
 * and compares with the reference using the tolerances of
 * reference/norm_ref.c (ref_tolerance, justified there). add_rms_norm checks
 * y, rstd and x_out (x_out bit-exact: it is defined as RNE(fp32(a + r))), and
 * that rms_norm run on x_out meets the same reference as y.
 *
 * After each case the name of the kernel it ran (rudnn_last_kernel()) is recorded; the last
 * test, kernel coverage, checks them: on CUDA and HIP every kernel kind the plugin's launch
 * policy (backends/cuda/norm_policy.h) can choose on this device must have run at least once,
 * and nothing else; on OpenCL each op must have named at least one kernel.
 *
 * Usage: test_norm [glob]   runs only tests whose name matches glob (no coverage check).
 * RUDNN_TEST_VERBOSE=1 prints each case's worst error as a fraction of the
 * allowed one (the margin of the tolerances). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "norm_kinds.h"
#include "reference/norm_ref.h"

typedef enum op {
    OP_LAYER_NORM,
    OP_LAYER_NORM_NOBETA,
    OP_RMS_NORM,
    OP_SOFTMAX,
    OP_ADD_RMS_NORM,
    OP_COUNT
} op_t;

static const char *const op_names[OP_COUNT] = {"layer_norm", "layer_norm_nobeta", "rms_norm", "softmax",
                                               "add_rms_norm"};

static const rudnn_dtype_t dtypes[] = {RUDNN_F32, RUDNN_F16, RUDNN_BF16};
#define DTYPE_COUNT 3

typedef struct param {
    op_t op;
    rudnn_dtype_t dtype;
} param_t;

enum {
    ALIAS_NONE = 0,
    ALIAS_Y_IS_X = 1,  /* output (y) is the input (a for add_rms_norm) */
    ALIAS_XO_IS_R = 2, /* add_rms_norm: x_out is residual */
    ALIAS_XO_IS_A = 4, /* add_rms_norm: x_out is a */
    ALIAS_Y_IS_R = 8,  /* add_rms_norm: y is residual (may be rejected) */
};

typedef struct run {
    const char *label;
    int rank;
    int64_t dims[RUDNN_MAX_RANK];
    float eps;
    int alias;
    /* element offsets of each tensor inside its buffer */
    size_t off_x, off_r, off_g, off_b, off_y, off_rstd, off_xo;
    int rstd_flat; /* add_rms_norm: rstd shaped [rows] rather than the leading dims */
    /* host data: x, r have numel elements, gamma and beta cols */
    const float *x, *r, *gamma, *beta;
} run_t;

/* ---- buffers to watch ----------------------------------------------------------- */

/* Every distinct buffer of a run, with a snapshot taken before the op, and the
 * byte ranges the op is allowed to write in it. */
typedef struct watched {
    rudnn_buffer_t buffer;
    size_t bytes;
    uint8_t *before;
    uint8_t *after;
    size_t out_begin[3], out_end[3];
    int out_count;
    const char *name;
} watched_t;

typedef struct watch {
    watched_t items[8];
    int count;
} watch_t;

static watched_t *watch_add(watch_t *w, const rt_tensor_t *t, const char *name)
{
    for (int i = 0; i < w->count; i++)
        if (w->items[i].buffer == t->buffer)
            return &w->items[i];
    watched_t *item = &w->items[w->count++];
    memset(item, 0, sizeof *item);
    item->buffer = t->buffer;
    item->bytes = t->buffer_bytes;
    item->name = name;
    return item;
}

static void watch_output(watch_t *w, const rt_tensor_t *t)
{
    watched_t *item = watch_add(w, t, "output");
    item->out_begin[item->out_count] = t->t.offset;
    item->out_end[item->out_count] = t->t.offset + rudnn_tensor_bytes(&t->t);
    item->out_count++;
}

static void watch_snapshot(watch_t *w, int after)
{
    for (int i = 0; i < w->count; i++) {
        uint8_t *snap = rt_buffer_snapshot(w->items[i].buffer, w->items[i].bytes);
        if (after)
            w->items[i].after = snap;
        else
            w->items[i].before = snap;
    }
}

/* Counts bytes that changed outside the declared output ranges. */
static size_t watch_stray_writes(const watch_t *w, rt_log_t *log, const char *label)
{
    size_t stray = 0;
    for (int i = 0; i < w->count; i++) {
        const watched_t *item = &w->items[i];
        size_t first = 0;
        size_t count = rt_count_changed(item->before, item->after, item->bytes, item->out_begin, item->out_end,
                                        item->out_count, &first);
        if (count) {
            rt_logf(log, "  %s: %zu byte(s) of the %s buffer changed outside the outputs (first at byte %zu)\n",
                    label, count, item->name, first);
            stray += count;
        }
    }
    return stray;
}

static void watch_free(watch_t *w)
{
    for (int i = 0; i < w->count; i++) {
        free(w->items[i].before);
        free(w->items[i].after);
    }
    w->count = 0;
}

/* Decodes tensor t from a buffer snapshot into floats; counts elements that
 * still hold the poison sentinel. */
static size_t decode(const rt_tensor_t *t, const uint8_t *snapshot, float *out, int check_sentinel)
{
    rt_decode(t->t.dtype, snapshot + t->t.offset, out, (size_t)rudnn_tensor_numel(&t->t));
    return check_sentinel ? rt_count_poisoned(t, snapshot) : 0;
}

static const uint8_t *snapshot_after(const watch_t *w, const rt_tensor_t *t)
{
    for (int i = 0; i < w->count; i++)
        if (w->items[i].buffer == t->buffer)
            return w->items[i].after;
    return NULL;
}

/* ---- which kernels ran ------------------------------------------------------------ */

/* The distinct names rudnn_last_kernel() gave after each op's cases (static strings). */
#define MAX_KERNEL_NAMES 32
static struct {
    const char *names[MAX_KERNEL_NAMES];
    int count;
} kernels_seen[OP_COUNT];

static void record_kernel(op_t op, const char *name)
{
    for (int i = 0; i < kernels_seen[op].count; i++)
        if (strcmp(kernels_seen[op].names[i], name) == 0)
            return;
    if (kernels_seen[op].count < MAX_KERNEL_NAMES)
        kernels_seen[op].names[kernels_seen[op].count++] = name;
}

/* ---- one run -------------------------------------------------------------------- */

/* Runs one case; on failure appends to log and counts it. */
static void run_case(const param_t *p, const run_t *c, rt_log_t *log)
{
    const rudnn_dtype_t dt = p->dtype;
    const op_t op = p->op;
    const int is_add = op == OP_ADD_RMS_NORM;
    const int has_gamma = op != OP_SOFTMAX;
    const int has_beta = op == OP_LAYER_NORM;
    const int64_t numel = rt_numel(c->rank, c->dims);
    const int64_t cols = c->dims[c->rank - 1];
    const int64_t rows = rt_numel(c->rank - 1, c->dims);
    char dims_s[96], label[256];
    rt_dims_str(c->rank, c->dims, dims_s, sizeof dims_s);
    snprintf(label, sizeof label, "%s/%s %s %s alias=%d eps=%g", op_names[op], rudnn_dtype_name(dt), c->label,
             dims_s, c->alias, (double)c->eps);

    /* host side: quantized inputs and the reference */
    float *xq = rt_xmalloc((size_t)numel * sizeof(float));
    float *rq = rt_xmalloc((size_t)numel * sizeof(float));
    float *xo_ref = rt_xmalloc((size_t)numel * sizeof(float));
    double *y_ref = rt_xmalloc((size_t)numel * sizeof(double));
    double *rstd_ref = rt_xmalloc((size_t)rows * sizeof(double));
    double *row_atol = rt_xmalloc((size_t)rows * sizeof(double)); /* layer_norm's conditioning term */
    float *y_got = rt_xmalloc((size_t)numel * sizeof(float));
    float *y2_got = rt_xmalloc((size_t)numel * sizeof(float));
    float *xo_got = rt_xmalloc((size_t)numel * sizeof(float));
    float *rstd_got = rt_xmalloc((size_t)rows * sizeof(float));
    ref_quantize(dt, c->x, xq, (size_t)numel);
    if (is_add)
        ref_quantize(dt, c->r, rq, (size_t)numel);
    switch (op) {
    case OP_LAYER_NORM: ref_layer_norm(xq, c->gamma, c->beta, c->eps, rows, cols, y_ref); break;
    case OP_LAYER_NORM_NOBETA: ref_layer_norm(xq, c->gamma, NULL, c->eps, rows, cols, y_ref); break;
    case OP_RMS_NORM: ref_rms_norm(xq, c->gamma, c->eps, rows, cols, y_ref, NULL); break;
    case OP_SOFTMAX: ref_softmax(xq, rows, cols, y_ref); break;
    default: ref_add_rms_norm(dt, xq, rq, c->gamma, c->eps, rows, cols, y_ref, rstd_ref, xo_ref); break;
    }

    /* device side */
    rt_tensor_t X = {0}, R = {0}, G = {0}, B = {0}, Y = {0}, XO = {0}, RSTD = {0}, Y2 = {0};
    int64_t gdims[1] = {cols};
    rt_tensor_create(&X, dt, c->rank, c->dims, c->off_x, RT_TAIL_BYTES);
    rt_tensor_upload(&X, xq);
    if (is_add) {
        rt_tensor_create(&R, dt, c->rank, c->dims, c->off_r, RT_TAIL_BYTES);
        rt_tensor_upload(&R, rq);
    }
    if (has_gamma) {
        rt_tensor_create(&G, RUDNN_F32, 1, gdims, c->off_g, RT_TAIL_BYTES);
        rt_tensor_upload(&G, c->gamma);
    }
    if (has_beta) {
        rt_tensor_create(&B, RUDNN_F32, 1, gdims, c->off_b, RT_TAIL_BYTES);
        rt_tensor_upload(&B, c->beta);
    }
    if (c->alias & ALIAS_Y_IS_X)
        rt_tensor_view(&Y, &X, dt, c->rank, c->dims, X.t.offset);
    else if (c->alias & ALIAS_Y_IS_R)
        rt_tensor_view(&Y, &R, dt, c->rank, c->dims, R.t.offset);
    else
        rt_tensor_create(&Y, dt, c->rank, c->dims, c->off_y, RT_TAIL_BYTES);
    if (is_add) {
        if (c->alias & ALIAS_XO_IS_R)
            rt_tensor_view(&XO, &R, dt, c->rank, c->dims, R.t.offset);
        else if (c->alias & ALIAS_XO_IS_A)
            rt_tensor_view(&XO, &X, dt, c->rank, c->dims, X.t.offset);
        else
            rt_tensor_create(&XO, dt, c->rank, c->dims, c->off_xo, RT_TAIL_BYTES);
        int64_t rdims[RUDNN_MAX_RANK];
        int rrank;
        if (c->rstd_flat) {
            rrank = 1;
            rdims[0] = rows;
        } else {
            rrank = c->rank - 1;
            memcpy(rdims, c->dims, sizeof(int64_t) * (size_t)rrank);
        }
        rt_tensor_create(&RSTD, RUDNN_F32, rrank, rdims, c->off_rstd, RT_TAIL_BYTES);
    }

    watch_t w = {0};
    watch_add(&w, &X, is_add ? "a" : "input");
    if (is_add)
        watch_add(&w, &R, "residual");
    if (has_gamma)
        watch_add(&w, &G, "gamma");
    if (has_beta)
        watch_add(&w, &B, "beta");
    watch_output(&w, &Y);
    if (is_add) {
        watch_output(&w, &XO);
        watch_output(&w, &RSTD);
    }
    watch_snapshot(&w, 0);

    rudnn_status_t st;
    switch (op) {
    case OP_LAYER_NORM: st = rudnn_layer_norm(rt_queue, &X.t, &G.t, &B.t, c->eps, &Y.t); break;
    case OP_LAYER_NORM_NOBETA: st = rudnn_layer_norm(rt_queue, &X.t, &G.t, NULL, c->eps, &Y.t); break;
    case OP_RMS_NORM: st = rudnn_rms_norm(rt_queue, &X.t, &G.t, c->eps, &Y.t); break;
    case OP_SOFTMAX: st = rudnn_softmax_last_axis(rt_queue, &X.t, &Y.t); break;
    default: st = rudnn_add_rms_norm(rt_queue, &X.t, &R.t, &G.t, c->eps, &Y.t, &RSTD.t, &XO.t); break;
    }
    /* a call that launches nothing (no elements, rejected) leaves the previous case's name */
    if (st == RUDNN_STATUS_SUCCESS && numel > 0)
        record_kernel(op, rudnn_last_kernel());
    int failed = 0;
    int rejected_ok = 0;
    if (st == RUDNN_STATUS_SUCCESS && strcmp(rudnn_last_error(), "") != 0) {
        rt_logf(log, "  %s: succeeded but rudnn_last_error() is \"%s\", expected \"\"\n", label, rudnn_last_error());
        failed = 1;
    }
    if (st != RUDNN_STATUS_SUCCESS) {
        if ((c->alias & ALIAS_Y_IS_R) && st == RUDNN_STATUS_BAD_PARAM) {
            rejected_ok = 1; /* y == residual: rejecting it is allowed; then nothing may change */
        } else {
            rt_logf(log, "  %s: returned %s: %s\n", label, rudnn_status_string(st), rudnn_last_error());
            failed = 1;
            goto done;
        }
    }
    rudnn_status_t sync = rudnn_queue_synchronize(rt_queue);
    if (sync != RUDNN_STATUS_SUCCESS) {
        rt_logf(log, "  %s: queue_synchronize returned %s: %s\n", label, rudnn_status_string(sync),
                rudnn_last_error());
        failed = 1;
        goto done;
    }
    watch_snapshot(&w, 1);
    if (rejected_ok) {
        for (int i = 0; i < w.count; i++)
            w.items[i].out_count = 0; /* a rejected call writes nothing at all */
        failed |= watch_stray_writes(&w, log, label) != 0;
        goto done;
    }
    failed |= watch_stray_writes(&w, log, label) != 0;

    ref_report_t rep;
    ref_report_init(&rep);
    int y_aliased = (c->alias & (ALIAS_Y_IS_X | ALIAS_Y_IS_R)) != 0;
    size_t unwritten = decode(&Y, snapshot_after(&w, &Y), y_got, !y_aliased);
    if (unwritten) {
        rt_logf(log, "  %s: %zu element(s) of y were never written (still the poison sentinel)\n", label, unwritten);
        failed = 1;
    }
    if (op == OP_LAYER_NORM || op == OP_LAYER_NORM_NOBETA) {
        ref_layer_norm_cond_atol(xq, c->gamma, c->eps, rows, cols, row_atol);
        ref_compare_rows(&rep, "y", y_got, y_ref, rows, cols, ref_tolerance(dt), row_atol);
    } else {
        ref_compare(&rep, "y", y_got, y_ref, rows, cols, ref_tolerance(dt));
    }
    if (is_add) {
        int xo_aliased = (c->alias & (ALIAS_XO_IS_R | ALIAS_XO_IS_A)) != 0;
        unwritten = decode(&XO, snapshot_after(&w, &XO), xo_got, !xo_aliased);
        unwritten += decode(&RSTD, snapshot_after(&w, &RSTD), rstd_got, 1);
        if (unwritten) {
            rt_logf(log, "  %s: %zu element(s) of x_out/rstd were never written\n", label, unwritten);
            failed = 1;
        }
        ref_compare_exact(&rep, "x_out", xo_got, xo_ref, (size_t)numel);
        ref_compare(&rep, "rstd", rstd_got, rstd_ref, rows, 1, ref_tolerance(RUDNN_F32));
        if (numel > 0) {
            /* y is rms_norm of x_out: rms_norm run on x_out must meet the same reference
             * (bit equality is not promised: the two kernels may reduce in another order) */
            rt_tensor_create(&Y2, dt, c->rank, c->dims, 0, RT_TAIL_BYTES);
            rudnn_status_t st2 = rudnn_rms_norm(rt_queue, &XO.t, &G.t, c->eps, &Y2.t);
            if (st2 != RUDNN_STATUS_SUCCESS) {
                rt_logf(log, "  %s: rms_norm(x_out) returned %s: %s\n", label, rudnn_status_string(st2),
                        rudnn_last_error());
                failed = 1;
            } else {
                rt_tensor_download(&Y2, y2_got);
                ref_compare(&rep, "rms_norm(x_out) vs reference y", y2_got, y_ref, rows, cols, ref_tolerance(dt));
            }
        }
    }
    if (getenv("RUDNN_TEST_VERBOSE"))
        print_message("  %s: worst error %.3f of allowed (%zu values)\n", label, rep.worst_excess, rep.checked);
    if (rep.mismatches) {
        rt_logf(log, "  %s: %zu of %zu values outside tolerance (worst finite error %.3g x allowed):\n%s", label,
                rep.mismatches, rep.checked, rep.worst_excess, rep.text);
        failed = 1;
    }

done:
    watch_free(&w);
    rt_tensor_destroy(&Y2);
    rt_tensor_destroy(&RSTD);
    rt_tensor_destroy(&XO);
    rt_tensor_destroy(&Y);
    rt_tensor_destroy(&B);
    rt_tensor_destroy(&G);
    rt_tensor_destroy(&R);
    rt_tensor_destroy(&X);
    free(xq);
    free(rq);
    free(xo_ref);
    free(y_ref);
    free(rstd_ref);
    free(row_atol);
    free(y_got);
    free(y2_got);
    free(xo_got);
    free(rstd_got);
    if (failed)
        log->failures++;
}

/* ---- data ------------------------------------------------------------------------- */

/* "<op>/<dtype>/<family>": the test's name, which seeds its data. */
static void test_name(char *buf, size_t cap, const param_t *p, const char *family)
{
    snprintf(buf, cap, "%s/%s/%s", op_names[p->op], rudnn_dtype_name(p->dtype), family);
}

typedef struct data {
    float *x, *r, *gamma, *beta;
} data_t;

/* Random data for one case: inputs uniform in [-2, 3) (softmax: [-8, 8))
 * scaled per row by 2^((row % 7) - 3), residual in [-2, 2), gamma in
 * [-1.5, 1.5), beta in [-1, 1). Seeded by test name and case index. */
static void data_make(data_t *d, const param_t *p, const char *test, int case_index, int rank,
                      const int64_t *dims)
{
    int64_t numel = rt_numel(rank, dims);
    int64_t cols = dims[rank - 1];
    rt_rng_t rng;
    rt_rng_seed_case(&rng, test, case_index);
    d->x = rt_xmalloc((size_t)numel * sizeof(float));
    d->r = rt_xmalloc((size_t)numel * sizeof(float));
    d->gamma = rt_xmalloc((size_t)(cols ? cols : 1) * sizeof(float));
    d->beta = rt_xmalloc((size_t)(cols ? cols : 1) * sizeof(float));
    for (int64_t i = 0; i < numel; i++) {
        int64_t row = cols ? i / cols : 0;
        double scale = ldexp(1.0, (int)(row % 7) - 3);
        d->x[i] = p->op == OP_SOFTMAX ? (float)rt_rng_uniform(&rng, -8.0, 8.0)
                                      : (float)(rt_rng_uniform(&rng, -2.0, 3.0) * scale);
        d->r[i] = (float)(rt_rng_uniform(&rng, -2.0, 2.0) * scale);
    }
    rt_fill_uniform(&rng, d->gamma, (size_t)cols, -1.5, 1.5);
    rt_fill_uniform(&rng, d->beta, (size_t)cols, -1.0, 1.0);
}

static void data_free(data_t *d)
{
    free(d->x);
    free(d->r);
    free(d->gamma);
    free(d->beta);
}

static run_t run_init(const char *label, int rank, const int64_t *dims, float eps, const data_t *d)
{
    run_t c;
    memset(&c, 0, sizeof c);
    c.label = label;
    c.rank = rank;
    memcpy(c.dims, dims, sizeof(int64_t) * (size_t)rank);
    c.eps = eps;
    c.x = d->x;
    c.r = d->r;
    c.gamma = d->gamma;
    c.beta = d->beta;
    return c;
}

typedef struct shape_case {
    const char *label;
    int rank;
    int64_t dims[4];
    float eps;
} shape_case_t;

static void run_shape_list(void **state, const char *family, const shape_case_t *cases, size_t count)
{
    const param_t *p = *state;
    char test[128];
    test_name(test, sizeof test, p, family);
    rt_log_t *log = rt_log_new();
    for (size_t i = 0; i < count; i++) {
        data_t d;
        data_make(&d, p, test, (int)i, cases[i].rank, cases[i].dims);
        run_t c = run_init(cases[i].label, cases[i].rank, cases[i].dims, cases[i].eps, &d);
        /* add_rms_norm: one rank >= 3 case takes rstd as a flat [rows] */
        c.rstd_flat = p->op == OP_ADD_RMS_NORM && cases[i].rank >= 3 && (i % 2);
        run_case(p, &c, log);
        data_free(&d);
    }
    rt_log_finish_free(log, "case(s)");
}

/* ---- test families -------------------------------------------------------------- */

static void test_shapes(void **state)
{
    static const shape_case_t cases[] = {
        {"rows of length 1", 2, {5, 1}, 1e-5f},
        {"length 3, large eps", 2, {4, 3}, 0.5f},
        {"length 7", 2, {3, 7}, 1e-6f},
        {"length 1000", 2, {2, 1000}, 1e-5f},
        {"length 4097", 2, {2, 4097}, 1e-5f},
        {"length 1024", 2, {3, 1024}, 1e-5f},
        {"length 4096", 2, {2, 4096}, 1e-6f},
        {"rank 1, one element", 1, {1}, 1e-5f},
        {"rank 1", 1, {257}, 1e-5f},
        {"rank 2, many rows", 2, {67, 128}, 1e-5f},
        {"many short rows", 2, {5000, 3}, 1e-5f},
        {"rank 3, many rows", 3, {16, 64, 32}, 1e-5f},
        {"rank 3", 3, {2, 3, 33}, 1e-5f},
        {"rank 3 (flat rstd for add)", 3, {3, 2, 40}, 1e-5f},
        {"rank 4", 4, {2, 2, 3, 17}, 1e-5f},
        {"rank 4 (flat rstd for add)", 4, {1, 3, 2, 64}, 1e-5f},
        /* CUDA holds 16-bit rms_norm rows of 8192 and more packed (F = 64): 10000 leaves the
         * last lanes of the CTA partly empty, 16384 fills one CTA exactly. (Appended, so the
         * cases above keep the random data they ran with on the H200.) */
        {"length 10000", 2, {3, 10000}, 1e-5f},
        {"length 16384", 2, {2, 16384}, 1e-5f},
        /* CUDA's bulk kernel (norm_bulk.cuh) gives each of its row groups (792 of them at this
         * length on an H200) a run of rows through 2 buffers: 2000 rows reuse every buffer and
         * flip its mbarrier's phase. */
        {"length 4096, rows over every row group", 2, {2000, 4096}, 1e-5f},
        /* CUDA on sm_90: 16-bit layer_norm rows too short for the bulk kernel's groups run two
         * rows per thread in one CTA (norm.pair) */
        {"length 2048", 2, {3, 2048}, 1e-5f},
    };
    run_shape_list(state, "shapes", cases, sizeof cases / sizeof cases[0]);
}

static void test_large(void **state)
{
    static const shape_case_t cases[] = {
        {"length 65536", 2, {2, 65536}, 1e-5f},
        /* CUDA on an H200 splits these rows over clusters of 4 or 8 CTAs, 33 to 99 clusters at a
         * time: 201 rows give each cluster two or more, so its reductions reuse their slots and
         * mbarrier phases (reduce.cuh); the odd count leaves the two-row kernels
         * (norm_pair.cuh) a last row alone */
        {"length 65536, several rows per cluster, odd count", 2, {201, 65536}, 1e-5f},
        {"length 262144", 2, {1, 262144}, 1e-6f},
        /* CUDA's bulk kernel over a cluster of 3 CTAs: slices of 1667, 1667 and 1666 vectors (the
         * last CTA's slice shorter) */
        {"length 40000, a cluster's last slice shorter", 2, {5, 40000}, 1e-5f},
    };
    run_shape_list(state, "large", cases, sizeof cases / sizeof cases[0]);
}

static void test_empty(void **state)
{
    static const shape_case_t cases[] = {
        {"no rows", 2, {0, 16}, 1e-5f},
        {"empty middle dim", 3, {2, 0, 16}, 1e-5f},
        {"no rows of length 1", 2, {0, 1}, 1e-5f},
    };
    run_shape_list(state, "empty", cases, sizeof cases / sizeof cases[0]);
}

/* Rows of extreme magnitude. The kernels scale by an exact power of two so the
 * sum of squares cannot overflow; eps (1e-5) dominates mean(x^2) for the tiny
 * rows, as it does in the reference, so FP32 underflow of their squares does
 * not change the result. Inputs stay above 1e-30 so that no backend's
 * flush-to-zero of FP32 denormals matters. */
static void test_magnitude(void **state)
{
    const param_t *p = *state;
    const rudnn_dtype_t dt = p->dtype;
    char test[128];
    test_name(test, sizeof test, p, "magnitude");
    /* per row: scale of uniform(-1, 1) values, and whether one element is a
     * spike of that scale among values of order 1 (2: the first element, so
     * that a row starts far from its mean), or (3) the scale is an offset
     * added to uniform(-1, 1) values: a mean far from the spread, which CUDA's
     * one-pass layer_norm statistics (norm_bulk.cuh) must leave to their
     * second reduction, or (4) the first half of the row is -scale and the rest of order 1:
     * threads (warps, CTAs) that see only values far below the row's maximum, which must
     * count as nothing in a softmax whose threads first sum relative to their own maximum
     * (tried in the thirteenth session). Rows of length 1 are
     * included: layer_norm's variance is then exactly 0 while eps * 2^-2e
     * underflows in FP32 for the large rows, and the exact result is beta. */
    typedef struct {
        const char *label;
        double scale;
        int spike;
    } row_kind_t;
    static const row_kind_t f32_rows[] = {{"~1e30", 1e30, 0},    {"~1e-30", 1e-30, 0}, {"one 1e30 among ~1", 1e30, 1},
                                          {"~3e38", 3.0e38, 0},  {"~1e20", 1e20, 0},   {"~1", 1.0, 0},
                                          {"first 100 among ~1", 100.0, 2}, {"100 + ~1", 100.0, 3},
                                          {"first half -1e30, then ~1", 1e30, 4}};
    static const row_kind_t bf16_rows[] = {{"~1e30", 1e30, 0},   {"~1e-30", 1e-30, 0}, {"one 1e30 among ~1", 1e30, 1},
                                           {"~3e38", 3.0e38, 0}, {"~1", 1.0, 0},
                                           {"first 100 among ~1", 100.0, 2}, {"100 + ~1", 100.0, 3},
                                           {"first half -1e30, then ~1", 1e30, 4}};
    static const row_kind_t f16_rows[] = {{"~6e4", 65000.0, 0},  {"~1e-3", 1e-3, 0},  {"subnormal ~1e-6", 1e-6, 0},
                                          {"one 6e4 among ~1", 60000.0, 1}, {"~1", 1.0, 0},
                                          {"first 100 among ~1", 100.0, 2}, {"100 + ~1", 100.0, 3},
                                          {"first half -6e4, then ~1", 60000.0, 4}};
    const row_kind_t *kinds = dt == RUDNN_F32 ? f32_rows : dt == RUDNN_BF16 ? bf16_rows : f16_rows;
    size_t nkinds = dt == RUDNN_F32 ? sizeof f32_rows / sizeof f32_rows[0]
                    : dt == RUDNN_BF16 ? sizeof bf16_rows / sizeof bf16_rows[0]
                                       : sizeof f16_rows / sizeof f16_rows[0];
    /* odd lengths and 1 (looped kernels), and lengths of the register kernels' row groups: a
     * warp (96, 1024), a CTA (4096) and a cluster (20000); rows of one launch take both the
     * unscaled and the scaled paths of the CUDA cluster kernels (backends/README.md). The kinds
     * repeat (reps) where every row group of a launch must take several rows, mixing the two
     * paths (a group's reductions must stay in step after a scaled row: 320 rows of 20000 are
     * more than the 132 an H200's 16-bit bulk cluster launch holds at once). */
    static const struct {
        int64_t cols;
        int reps;
    } lengths[] = {{97, 1}, {4097, 1}, {1, 1}, {96, 1}, {1024, 1}, {4096, 1}, {20000, 1}, {20000, 40}};
    rt_log_t *log = rt_log_new();
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        int64_t dims[2] = {(int64_t)nkinds * lengths[li].reps, lengths[li].cols};
        int64_t cols = dims[1];
        data_t d;
        data_make(&d, p, test, (int)li, 2, dims);
        rt_rng_t rng;
        rt_rng_seed_case(&rng, test, 100 + (int)li);
        for (size_t row = 0; row < (size_t)dims[0]; row++) {
            const size_t k = row % nkinds; /* the row's kind */
            /* add_rms_norm: a and residual each half the scale, so the FP32
             * sum stays inside the dtype's range */
            double s = p->op == OP_ADD_RMS_NORM ? kinds[k].scale * 0.5 : kinds[k].scale;
            for (int64_t c = 0; c < cols; c++) {
                float *x = &d.x[row * (size_t)cols + (size_t)c];
                float *r = &d.r[row * (size_t)cols + (size_t)c];
                if (kinds[k].spike == 4 && c < cols / 2) {
                    *x = (float)-s;
                    *r = (float)-s;
                } else if (kinds[k].spike == 3) {
                    *x = (float)(s + rt_rng_uniform(&rng, -1.0, 1.0));
                    *r = (float)(s + rt_rng_uniform(&rng, -1.0, 1.0));
                } else if (kinds[k].spike) {
                    *x = (float)rt_rng_uniform(&rng, -1.0, 1.0);
                    *r = (float)rt_rng_uniform(&rng, -1.0, 1.0);
                } else {
                    *x = (float)(rt_rng_uniform(&rng, -1.0, 1.0) * s);
                    *r = (float)(rt_rng_uniform(&rng, -1.0, 1.0) * s);
                }
            }
            if (kinds[k].spike == 1 || kinds[k].spike == 2) {
                size_t at = row * (size_t)cols + (kinds[k].spike == 2 ? 0 : (size_t)rt_rng_below(&rng, (uint64_t)cols));
                d.x[at] = (float)s;
                d.r[at] = (float)s;
            }
        }
        char label[64];
        snprintf(label, sizeof label, "extreme rows (%lld of length %lld)", (long long)dims[0], (long long)cols);
        run_t c = run_init(label, 2, dims, 1e-5f, &d);
        run_case(p, &c, log);
        data_free(&d);
    }
    rt_log_finish_free(log, "case(s)");
}

/* NaN and infinities. Expected values come from the references in double:
 * a NaN in a row makes the row NaN for every op; layer_norm rows with an inf
 * are NaN (mean is inf); rms_norm rows with an inf give NaN at the inf and 0
 * elsewhere (x * rsqrt(inf), as PyTorch); softmax rows with NaN or +inf, or
 * all -inf, are NaN, and a -inf among finite values gives 0 there (also where
 * the first half of the row is -inf: whole threads, CTAs or warps of a row
 * then see no finite value). Lengths 37 and 4097 (the looped kernels: not a
 * whole number of 16-byte vectors), 4096 (one CTA per row, two 16-bit
 * layer_norm rows per thread on CUDA) and 20000 (a 16-bit row over a cluster).
 * add_rms_norm gets the non-finite values through residual, and one row where
 * a + r overflows the dtype, so that x_out holds an inf. */
static void test_nonfinite(void **state)
{
    const param_t *p = *state;
    const rudnn_dtype_t dt = p->dtype;
    char test[128];
    test_name(test, sizeof test, p, "nonfinite");
    enum { K_NORMAL, K_NAN, K_PINF, K_NINF, K_ALL_NINF, K_HALF_NINF, K_BOTH_INF, K_NAN_PINF, K_OVERFLOW, K_COUNT };
    static const int64_t lengths[] = {37, 4097, 4096, 20000};
    rt_log_t *log = rt_log_new();
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        int64_t rows = K_COUNT + 1; /* a normal row at the end too */
        int64_t dims[2] = {rows, lengths[li]};
        int64_t cols = dims[1];
        data_t d;
        data_make(&d, p, test, (int)li, 2, dims);
        rt_rng_t rng;
        rt_rng_seed_case(&rng, test, 100 + (int)li);
        float big = dt == RUDNN_F16 ? 40000.0f : 3.0e38f; /* big + big overflows the dtype */
        for (int k = 0; k < K_COUNT; k++) {
            /* add_rms_norm: non-finite values go into residual; a stays finite */
            float *v = p->op == OP_ADD_RMS_NORM ? d.r : d.x;
            float *row = v + (size_t)k * (size_t)cols;
            size_t i1 = (size_t)rt_rng_below(&rng, (uint64_t)cols);
            size_t i2 = (i1 + 1 + (size_t)rt_rng_below(&rng, (uint64_t)(cols - 1))) % (size_t)cols;
            switch (k) {
            case K_NAN: row[i1] = NAN; break;
            case K_PINF: row[i1] = INFINITY; break;
            case K_NINF: row[i1] = -INFINITY; break;
            case K_ALL_NINF:
                for (int64_t c = 0; c < cols; c++)
                    row[c] = -INFINITY;
                break;
            case K_HALF_NINF:
                for (int64_t c = 0; c < cols / 2; c++)
                    row[c] = -INFINITY;
                break;
            case K_BOTH_INF:
                row[i1] = INFINITY;
                row[i2] = -INFINITY;
                break;
            case K_NAN_PINF:
                row[i1] = NAN;
                row[i2] = INFINITY;
                break;
            case K_OVERFLOW:
                d.x[(size_t)k * (size_t)cols + i1] = big;
                d.r[(size_t)k * (size_t)cols + i1] = big;
                break;
            default: break;
            }
        }
        char label[96];
        snprintf(label, sizeof label,
                 "rows: normal, NaN, +inf, -inf, all -inf, half -inf, +-inf, NaN&+inf, big+big, normal (length %lld)",
                 (long long)cols);
        run_t c = run_init(label, 2, dims, 1e-5f, &d);
        run_case(p, &c, log);
        data_free(&d);
    }
    rt_log_finish_free(log, "case(s)");
}

static void test_inplace(void **state)
{
    const param_t *p = *state;
    char test[128];
    test_name(test, sizeof test, p, "inplace");
    /* a warp, the looped kernel, a cluster and a CTA per row (the register kernels need 16-byte
     * aligned rows: offset 8 keeps them, offset 2 sends every shape to the looped kernels) */
    static const int64_t shapes[][2] = {{3, 1000}, {2, 4097}, {1, 65536}, {3, 4096}};
    static const size_t offsets[] = {2, 8};
    static const struct {
        int alias;
        const char *label;
    } add_aliases[] = {
        {ALIAS_XO_IS_R, "x_out == residual"},
        {ALIAS_XO_IS_A, "x_out == a"},
        {ALIAS_Y_IS_X, "y == a"},
        {ALIAS_Y_IS_X | ALIAS_XO_IS_R, "y == a, x_out == residual"},
        {ALIAS_Y_IS_R, "y == residual (accepted and right, or BAD_PARAM and untouched)"},
    };
    rt_log_t *log = rt_log_new();
    int index = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t nalias = p->op == OP_ADD_RMS_NORM ? sizeof add_aliases / sizeof add_aliases[0] : 1;
        for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++)
            for (size_t a = 0; a < nalias; a++) {
                data_t d;
                data_make(&d, p, test, index++, 2, shapes[s]);
                char label[128];
                snprintf(label, sizeof label, "%s, offset %zu",
                         p->op == OP_ADD_RMS_NORM ? add_aliases[a].label : "output == input", offsets[o]);
                run_t c = run_init(label, 2, shapes[s], 1e-5f, &d);
                c.alias = p->op == OP_ADD_RMS_NORM ? add_aliases[a].alias : ALIAS_Y_IS_X;
                c.off_x = offsets[o]; /* in place at an offset too */
                run_case(p, &c, log);
                data_free(&d);
            }
    }
    rt_log_finish_free(log, "case(s)");
}

static void test_offsets(void **state)
{
    const param_t *p = *state;
    char test[128];
    test_name(test, sizeof test, p, "offsets");
    static const struct {
        const char *label;
        int64_t dims[2];
        size_t x, r, g, b, y, rstd, xo;
    } cases[] = {
        {"all tensors 4 elements in", {3, 67}, 4, 4, 4, 4, 4, 4, 4},
        {"odd offsets (not 16-byte aligned)", {2, 1000}, 1, 5, 1, 2, 3, 1, 7},
        {"odd offsets, length 4097", {2, 4097}, 3, 1, 3, 1, 5, 3, 1},
        {"odd offsets, length 4096", {3, 4096}, 1, 3, 2, 3, 7, 2, 5},
        /* offsets that keep every row 16-byte aligned (the CUDA register kernels: a CTA and a
         * cluster per row); F32 gamma and beta from 4 elements in */
        {"aligned offsets, length 4096", {3, 4096}, 8, 16, 4, 8, 24, 1, 8},
        {"aligned offsets, length 20000", {3, 20000}, 16, 8, 8, 4, 8, 3, 16},
    };
    rt_log_t *log = rt_log_new();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        data_t d;
        data_make(&d, p, test, (int)i, 2, cases[i].dims);
        run_t c = run_init(cases[i].label, 2, cases[i].dims, 1e-5f, &d);
        c.off_x = cases[i].x;
        c.off_r = cases[i].r;
        c.off_g = cases[i].g;
        c.off_b = cases[i].b;
        c.off_y = cases[i].y;
        c.off_rstd = cases[i].rstd;
        c.off_xo = cases[i].xo;
        run_case(p, &c, log);
        data_free(&d);
    }
    rt_log_finish_free(log, "case(s)");
}

/* ---- kernel coverage -------------------------------------------------------------- */

static int tests_filtered; /* a glob was given: not every case ran */

/* What the CUDA/HIP policy reads of this device, from its device info. Whether cluster launches
 * work is not in the info: taken as sm_90 or later (the plugin also checks that its loaded code
 * is sm_90 code, which every default build has). */
static rdg_norm_caps caps_of(const rudnn_device_info_t *info)
{
    rdg_norm_caps caps;
    memset(&caps, 0, sizeof caps);
    const int hip = strcmp(info->backend, "hip") == 0;
    caps.backend = hip ? RDG_NORM_BACKEND_HIP : RDG_NORM_BACKEND_CUDA;
    caps.warp_size = info->plane_width_min;
    caps.max_threads = info->max_group_size;
    caps.smem_optin = (size_t)info->shared_memory_per_group;
    caps.clusters = !hip && info->compute_capability >= 90;
    return caps;
}

static void test_kernel_coverage(void **state)
{
    (void)state;
    if (tests_filtered)
        skip();
    rudnn_device_info_t info;
    rt_assert_status(rudnn_context_device_info(rt_ctx, &info), RUDNN_STATUS_SUCCESS);
    const int gpu = strcmp(info.backend, "cuda") == 0 || strcmp(info.backend, "hip") == 0;
    int failures = 0;
    unsigned ran = 0;
    for (int op = 0; op < OP_COUNT; op++) {
        int op_named = 0;
        for (int i = 0; i < kernels_seen[op].count; i++) {
            const char *name = kernels_seen[op].names[i];
            op_named |= name[0] != '\0';
            if (getenv("RUDNN_TEST_VERBOSE"))
                print_message("  %s ran \"%s\"\n", op_names[op], name);
            if (!gpu)
                continue;
            int k = 0;
            while (k < RDG_NORM_KIND_COUNT && strcmp(rdg_norm_kind_name((rdg_norm_kind)k), name) != 0)
                k++;
            if (k == RDG_NORM_KIND_COUNT) {
                print_error("%s ran \"%s\", which is no kernel kind of backends/cuda/norm_policy.h\n",
                            op_names[op], name);
                failures++;
            } else {
                ran |= 1u << k;
            }
        }
        if (!op_named) {
            print_error("%s named no kernel\n", op_names[op]);
            failures++;
        }
    }
    if (gpu) {
        const rdg_norm_caps caps = caps_of(&info);
        const unsigned can = norm_kinds_reachable(&caps);
        for (int k = 0; k < RDG_NORM_KIND_COUNT; k++) {
            const unsigned bit = 1u << k;
            if ((can & bit) && !(ran & bit)) {
                print_error("%s: no case ran %s, which the policy chooses on this device\n", info.name,
                            rdg_norm_kind_name((rdg_norm_kind)k));
                failures++;
            }
            if ((ran & bit) && !(can & bit)) {
                print_error("%s: %s ran, which the policy never chooses on this device\n", info.name,
                            rdg_norm_kind_name((rdg_norm_kind)k));
                failures++;
            }
        }
    }
    assert_int_equal(failures, 0);
}

/* ---- main ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        CMUnitTestFunction fn;
    } families[] = {
        {"shapes", test_shapes},       {"large", test_large},     {"empty", test_empty},
        {"magnitude", test_magnitude}, {"nonfinite", test_nonfinite}, {"inplace", test_inplace},
        {"offsets", test_offsets},
    };
    enum { NFAM = sizeof families / sizeof families[0] };
    static param_t params[OP_COUNT * DTYPE_COUNT];
    static char names[OP_COUNT * DTYPE_COUNT * NFAM][96];
    static struct CMUnitTest tests[OP_COUNT * DTYPE_COUNT * NFAM + 1];
    size_t n = 0;
    for (int op = 0; op < OP_COUNT; op++) {
        for (int d = 0; d < DTYPE_COUNT; d++) {
            param_t *p = &params[op * DTYPE_COUNT + d];
            p->op = (op_t)op;
            p->dtype = dtypes[d];
            for (int f = 0; f < NFAM; f++) {
                test_name(names[n], sizeof names[n], p, families[f].name);
                tests[n] = (struct CMUnitTest){names[n], families[f].fn, NULL, NULL, p};
                n++;
            }
        }
    }
    /* last: what the cases above ran */
    tests[n++] = (struct CMUnitTest){"kernel coverage", test_kernel_coverage, NULL, NULL, NULL};
    tests_filtered = rt_set_filters(argc, argv);

    char group[64];
    snprintf(group, sizeof group, "norm-%s", rt_requested_backend());
    rt_open_or_skip(group);
    return rt_exit_code(_cmocka_run_group_tests(group, tests, n, NULL, rt_group_teardown));
}
