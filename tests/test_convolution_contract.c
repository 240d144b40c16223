/* Contract tests of convolution (include/rudnn/convolution.h, ops/convolution.c) on the default
 * backend. Every rejected call returns the status of its rule (BAD_PARAM for NULLs, values out of
 * range, enums, overlaps and bad workspaces; BAD_SHAPE for ranks, dims and strides that describe
 * no view; BAD_DTYPE; DEVICE_MISMATCH for another context's tensor, queue or workspace;
 * OUT_OF_BOUNDS for a view past its buffer or a kernel index out of range), a message that names
 * the op ("conv_forward", "conv_data_backward", "conv_weight_backward", "conv_resolve",
 * "conv_workspace_size", "conv_output_dims", "conv_channels_last", "conv_kernel_count",
 * "conv_kernel_info"), the argument and the rule, and writes nothing: every buffer of the
 * fixture (the outputs holding a sentinel) is read back byte for byte after the call, a rejected
 * query leaves *bytes, *choice, y_dims or the descriptor as they were. Each rule is checked on
 * every direction it applies to, through the op and through both queries (rudnn_conv_resolve and
 * rudnn_conv_workspace_size take the same arguments and fail as the call would).
 *
 * The fixture: one buffer a tensor (1024 bytes after each), F32, a grouped 2D convolution with
 * every option in play: x, dx [2, 4, 5, 6]; w, dw [6, 2, 3, 2] (groups 2: Cg 2, Kg 3); bias, dbias
 * [6]; y, dy [2, 6, 3, 4] (stride {2, 1}, padding {1, 0}, dilation {1, 2}). Each test edits a copy
 * of the descriptors; views of other shapes (1D, 3D, options NULL, in place) lie in the same
 * buffers. The success paths: every direction and strategy, F16 and BF16, no bias, a strided bias,
 * channels-last views, a data backward whose dx rounds to the same P, inputs sharing memory, N = 0,
 * resolve (kernel names "convolution.", the guide's overrides, what runs), options_init; and the
 * two queries on a new context with every allocation failing (they make none, so
 * tests/faults/convolution.c cannot walk them).
 * On a backend without convolution kernels (CUDA, HIP) the checks are the same and every valid
 * call answers NOT_SUPPORTED naming the op, writing nothing.
 *
 * Usage: test_convolution_contract [glob] */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/convolution.h>
#include <rudnn/debug.h>

#include "common.h"
#include "contract_fixture.h"
#include "operand.h"

enum { T_X, T_W, T_BIAS, T_Y, T_DY, T_DX, T_DW, T_DBIAS, T_COUNT };
static const char *const names[T_COUNT] = {"x", "w", "bias", "y", "dy", "dx", "dw", "dbias"};

enum { FWD = RUDNN_CONV_FORWARD, DGRAD = RUDNN_CONV_DATA_BACKWARD, WGRAD = RUDNN_CONV_WEIGHT_BACKWARD, DIRS = 3 };
static const char *const dir_ops[DIRS] = {"conv_forward", "conv_data_backward", "conv_weight_backward"};
#define B_FWD (1u << FWD)
#define B_DGRAD (1u << DGRAD)
#define B_WGRAD (1u << WGRAD)
#define B_ALL (B_FWD | B_DGRAD | B_WGRAD)

/* the three ways to reach a direction's checks */
enum { FORM_OP, FORM_RESOLVE, FORM_SIZE, FORMS };
static const char *const form_ops[FORMS] = {NULL, "conv_resolve", "conv_workspace_size"};
#define F_OP (1u << FORM_OP)
#define F_ALL 7u

#define SLACK 1024
static const int64_t dims_x[4] = {2, 4, 5, 6}, dims_w[4] = {6, 2, 3, 2}, dims_b[1] = {6}, dims_y[4] = {2, 6, 3, 4};

static contract_fixture_t F; /* the tensors' buffers (T_ order) guarded */
static int have_kernels; /* the backend lists convolution kernels */

#define BYTES_SENTINEL ((size_t)0x5eed1)
#define CHOICE_BYTE 0x5a

/* Fails the running test with every check its log holds. */
static void finish(void)
{
    if (rt_test_log->failures) {
        rt_log_t *log = rt_test_log;
        rt_test_log = rt_log_new(); /* the teardown frees this one */
        rt_log_finish_free(log, "check(s)");
    }
}

/* ---- the fixture and the calls ------------------------------------------------------------- */

/* The inputs' values (the outputs keep create's sentinel). */
static void fill_inputs(void)
{
    rt_rng_t r;
    rt_rng_seed(&r, 11);
    for (int i = 0; i < T_COUNT; i++)
        if (i != T_Y && i != T_DX && i != T_DW && i != T_DBIAS)
            rt_tensor_fill_uniform(&F.t[i], &r, -1.0, 1.0);
}

static int group_setup(void **state)
{
    (void)state;
    const int64_t *dims[T_COUNT] = {dims_x, dims_w, dims_b, dims_y, dims_y, dims_x, dims_w, dims_b};
    const int ranks[T_COUNT] = {4, 4, 1, 4, 4, 4, 4, 1};
    contract_fixture_setup(&F, T_COUNT, names, NULL, ranks, dims, SLACK, 0, fill_inputs);
    return 0;
}

static int group_teardown(void **state) { return contract_fixture_teardown(&F, state); }

typedef struct callspec {
    rudnn_queue_t queue;
    rudnn_tensor_t d[T_COUNT];
    int null_t[T_COUNT]; /* pass NULL for this tensor */
    rudnn_conv_options_t opts;
    int null_options;
    int strategy;
    int bad_direction, direction; /* the queries: pass this direction value instead */
    int null_tensors, null_result; /* the queries: tensors NULL; choice / bytes NULL */
    const rudnn_tensor_t *extra;   /* the queries: a tensor in a field the direction does not take */
    rudnn_buffer_t ws;
    size_t ws_bytes;
} callspec_t;

static void fixture_options(rudnn_conv_options_t *o)
{
    rudnn_conv_options_init(o);
    o->stride[0] = 2, o->stride[1] = 1;
    o->padding[0] = 1, o->padding[1] = 0;
    o->dilation[0] = 1, o->dilation[1] = 2;
    o->groups = 2;
}

static void spec_init(callspec_t *c)
{
    memset(c, 0, sizeof *c);
    c->queue = rt_queue;
    for (int i = 0; i < T_COUNT; i++)
        c->d[i] = F.t[i].t;
    fixture_options(&c->opts);
    c->strategy = RUDNN_CONV_AUTOTUNE;
}

/* Every descriptor to the shapes of another valid problem (each in its own fixture buffer). */
static void set_problem(callspec_t *c, int rank, const int64_t *x, const int64_t *w, const int64_t *y)
{
    rt_reshape(&c->d[T_X], rank, x), rt_reshape(&c->d[T_DX], rank, x);
    rt_reshape(&c->d[T_W], rank, w), rt_reshape(&c->d[T_DW], rank, w);
    rt_reshape(&c->d[T_Y], rank, y), rt_reshape(&c->d[T_DY], rank, y);
    rt_reshape(&c->d[T_BIAS], 1, &w[0]), rt_reshape(&c->d[T_DBIAS], 1, &w[0]);
}

static const rudnn_tensor_t *tp(const callspec_t *c, int i) { return c->null_t[i] ? NULL : &c->d[i]; }

static const char *op_name(int dir, int form) { return form == FORM_OP ? dir_ops[dir] : form_ops[form]; }

static rudnn_conv_tensors_t tensors_of(const callspec_t *c, int dir)
{
    rudnn_conv_tensors_t t;
    memset(&t, 0, sizeof t);
    switch (dir) {
    case FWD: t.x = tp(c, T_X), t.w = tp(c, T_W), t.bias = tp(c, T_BIAS), t.y = tp(c, T_Y); break;
    case DGRAD: t.dy = tp(c, T_DY), t.w = tp(c, T_W), t.dx = tp(c, T_DX); break;
    default: t.x = tp(c, T_X), t.dy = tp(c, T_DY), t.dw = tp(c, T_DW), t.dbias = tp(c, T_DBIAS); break;
    }
    if (c->extra) { /* a field the direction leaves NULL */
        if (dir == FWD)
            t.dx = c->extra;
        else if (dir == DGRAD)
            t.bias = c->extra;
        else
            t.w = c->extra;
    }
    return t;
}

static rudnn_status_t call_form(const callspec_t *c, int dir, int form, size_t *bytes, rudnn_conv_choice_t *choice)
{
    const rudnn_conv_options_t *o = c->null_options ? NULL : &c->opts;
    const rudnn_conv_strategy_t s = (rudnn_conv_strategy_t)c->strategy;
    if (form == FORM_OP) {
        switch (dir) {
        case FWD:
            return rudnn_conv_forward(c->queue, tp(c, T_X), tp(c, T_W), tp(c, T_BIAS), o, s, c->ws, c->ws_bytes,
                                      tp(c, T_Y));
        case DGRAD:
            return rudnn_conv_data_backward(c->queue, tp(c, T_DY), tp(c, T_W), o, s, c->ws, c->ws_bytes,
                                            tp(c, T_DX));
        default:
            return rudnn_conv_weight_backward(c->queue, tp(c, T_X), tp(c, T_DY), o, s, c->ws, c->ws_bytes,
                                              tp(c, T_DW), tp(c, T_DBIAS));
        }
    }
    const rudnn_conv_tensors_t t = tensors_of(c, dir);
    const rudnn_conv_direction_t d = (rudnn_conv_direction_t)(c->bad_direction ? c->direction : dir);
    if (form == FORM_RESOLVE)
        return rudnn_conv_resolve(c->queue, d, c->null_tensors ? NULL : &t, o, s, c->null_result ? NULL : choice);
    return rudnn_conv_workspace_size(c->queue, d, c->null_tensors ? NULL : &t, o, s, c->null_result ? NULL : bytes);
}

/* Every direction of dirs through every form of forms: want, a message naming the form's op and the
 * needles, nothing written (buffers, *bytes, *choice). */
static void expect_reject_in(const callspec_t *c, unsigned dirs, unsigned forms, rudnn_status_t want,
                             const char *n1, const char *n2, const char *n3, const char *what)
{
    for (int dir = 0; dir < DIRS; dir++)
        for (int form = 0; form < FORMS; form++) {
            if (!((dirs >> dir) & 1) || !((forms >> form) & 1))
                continue;
            rt_guard_begin(&F.guard);
            size_t bytes = BYTES_SENTINEL;
            rudnn_conv_choice_t choice, before;
            memset(&choice, CHOICE_BYTE, sizeof choice);
            before = choice;
            const rudnn_status_t st = call_form(c, dir, form, &bytes, &choice);
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", rudnn_last_error());
            const char *op = op_name(dir, form);
            const char *label = form == FORM_OP ? op : dir_ops[dir];
            char where[1024];
            snprintf(where, sizeof where, "%s [%s%s%s]", what, label, form ? " via " : "", form ? op : "");
            contract_check_rejection(where, st, want, msg, rt_message_names(msg, op, n1, n2, n3), op, 0, n1, n2, n3);
            if (bytes != BYTES_SENTINEL)
                rt_failf("%s [%s via %s]: a rejected query wrote *bytes", what, label, op);
            if (memcmp(&choice, &before, sizeof choice) != 0)
                rt_failf("%s [%s via %s]: a rejected query wrote *choice", what, label, op);
            snprintf(where, sizeof where, "%s [%s via %s]", what, label, form ? op : "the op");
            contract_check_untouched(&F, where, "a rejected call"); /* restores the fixture when written */
        }
}

static void expect_reject(const callspec_t *c, unsigned dirs, rudnn_status_t want, const char *n1, const char *n2,
                          const char *what)
{
    expect_reject_in(c, dirs, F_ALL, want, n1, n2, NULL, what);
}

/* The outputs of a direction in c, and whether buffer b holds one of them. */
static int is_output_buffer(const callspec_t *c, int dir, rudnn_buffer_t b)
{
    const int outs[DIRS][2] = {{T_Y, -1}, {T_DX, -1}, {T_DW, T_DBIAS}};
    for (int k = 0; k < 2; k++)
        if (outs[dir][k] >= 0 && !c->null_t[outs[dir][k]] && c->d[outs[dir][k]].buffer == b)
            return 1;
    return 0;
}

static void repoison_outputs(void)
{
    rudnn_queue_synchronize(rt_queue);
    rt_tensor_poison(&F.t[T_Y]), rt_tensor_poison(&F.t[T_DX]);
    rt_tensor_poison(&F.t[T_DW]), rt_tensor_poison(&F.t[T_DBIAS]);
}

/* c is valid for every direction of dirs: both queries succeed (the resolved kernel is one of the
 * direction's, named "convolution.*"; with an explicit strategy, the one that then runs), the op
 * succeeds with rudnn_last_error() "" and writes only its outputs' buffers. Without kernels: all
 * three NOT_SUPPORTED naming the op, nothing written. Returns the last resolved choice. */
static rudnn_conv_choice_t expect_valid_in(const callspec_t *c, unsigned dirs, const char *what)
{
    rudnn_conv_choice_t last;
    memset(&last, 0, sizeof last);
    for (int dir = 0; dir < DIRS; dir++) {
        if (!((dirs >> dir) & 1))
            continue;
        if (!have_kernels) {
            expect_reject_in(c, 1u << dir, F_ALL, RUDNN_STATUS_NOT_SUPPORTED, "no convolution kernels", NULL, NULL,
                             what);
            continue;
        }
        size_t bytes = BYTES_SENTINEL;
        rudnn_conv_choice_t choice;
        memset(&choice, 0, sizeof choice);
        rudnn_status_t st = call_form(c, dir, FORM_SIZE, &bytes, NULL);
        if (st || bytes == BYTES_SENTINEL)
            rt_failf("%s [%s]: workspace_size returned %s, %zu (\"%s\")", what, dir_ops[dir],
                      rudnn_status_string(st), bytes, rudnn_last_error());
        st = call_form(c, dir, FORM_RESOLVE, NULL, &choice);
        if (st) {
            rt_failf("%s [%s]: resolve returned %s (\"%s\")", what, dir_ops[dir], rudnn_status_string(st),
                      rudnn_last_error());
        } else if (!choice.kernel || strncmp(choice.kernel, "convolution.", 12) != 0) {
            rt_failf("%s [%s]: resolve named kernel \"%s\"", what, dir_ops[dir],
                     choice.kernel ? choice.kernel : "(null)");
        } else if (strcmp(choice.kernel, "convolution.none") != 0) {
            /* the kernel is one of the backend's, of this direction and of the strategy reported */
            int n = 0, found = 0;
            rudnn_conv_kernel_count(rt_ctx, &n);
            for (int i = 0; i < n; i++) {
                const char *name;
                rudnn_conv_strategy_t s;
                rudnn_conv_direction_t d;
                if (!rudnn_conv_kernel_info(rt_ctx, i, &name, &s, &d) && strcmp(name, choice.kernel) == 0)
                    found = 1 + (d == (rudnn_conv_direction_t)dir && s == choice.strategy);
            }
            if (found != 2)
                rt_failf("%s [%s]: resolved %s (strategy %d) is %s", what, dir_ops[dir], choice.kernel,
                          (int)choice.strategy, found ? "of another direction or strategy" : "not a listed kernel");
            if (c->strategy == RUDNN_CONV_DIRECT && choice.strategy != RUDNN_CONV_DIRECT)
                rt_failf("%s [%s]: Direct resolved to strategy %d (%s)", what, dir_ops[dir], (int)choice.strategy,
                          choice.kernel);
        }
        last = choice;
        rt_guard_begin(&F.guard);
        st = call_form(c, dir, FORM_OP, NULL, NULL);
        if (st) {
            rt_failf("%s [%s]: returned %s (\"%s\")", what, dir_ops[dir], rudnn_status_string(st),
                      rudnn_last_error());
        } else {
            if (rudnn_last_error()[0])
                rt_failf("%s [%s]: success left the message \"%s\"", what, dir_ops[dir], rudnn_last_error());
            /* with an explicit strategy the resolved kernel is the one that ran (Autotune may tune first) */
            if (c->strategy != RUDNN_CONV_AUTOTUNE && choice.kernel && strcmp(choice.kernel, "convolution.none") &&
                strcmp(rudnn_last_kernel(), choice.kernel) != 0)
                rt_failf("%s [%s]: resolve said %s, %s ran", what, dir_ops[dir], choice.kernel, rudnn_last_kernel());
        }
        if (rudnn_queue_synchronize(rt_queue))
            rt_failf("%s [%s]: the queue's work failed: %s", what, dir_ops[dir], rudnn_last_error());
        rt_guard_changed(&F.guard);
        for (int i = 0; i < F.guard.count; i++)
            if (F.guard.items[i].changed && !is_output_buffer(c, dir, F.guard.items[i].buffer))
                rt_failf("%s [%s]: an accepted call wrote to %s's buffer, which holds no output", what,
                          dir_ops[dir], F.guard.items[i].name);
        repoison_outputs();
    }
    return last;
}

static void expect_valid(const callspec_t *c, const char *what) { (void)expect_valid_in(c, B_ALL, what); }

/* ---- the success paths --------------------------------------------------------------------------- */

static void options_init_defaults(void **state)
{
    (void)state;
    rudnn_conv_options_t o;
    memset(&o, 0x7b, sizeof o);
    rudnn_conv_options_init(&o);
    for (int i = 0; i < RUDNN_CONV_MAX_SPATIAL; i++)
        if (o.stride[i] != 1 || o.padding[i] != 0 || o.dilation[i] != 1)
            rt_failf("options_init: dim %d: stride %lld, padding %lld, dilation %lld; expected 1, 0, 1", i,
                      (long long)o.stride[i], (long long)o.padding[i], (long long)o.dilation[i]);
    if (o.groups != 1)
        rt_failf("options_init: groups %lld, expected 1", (long long)o.groups);
    rudnn_conv_options_init(NULL); /* no crash */
    finish();
}

static void valid_calls(void **state)
{
    (void)state;
    callspec_t c;
    static const int strategies[3] = {RUDNN_CONV_AUTOTUNE, RUDNN_CONV_DIRECT, RUDNN_CONV_IMPLICIT_GEMM};
    for (int s = 0; s < 3; s++) {
        spec_init(&c), c.strategy = strategies[s];
        char what[64];
        snprintf(what, sizeof what, "the fixture, strategy %d", strategies[s]);
        expect_valid(&c, what);
    }
    spec_init(&c), c.null_t[T_BIAS] = c.null_t[T_DBIAS] = 1;
    expect_valid(&c, "no bias, no dbias");
    /* a bias and dbias of stride 2 (any view inside its buffer) */
    spec_init(&c), c.d[T_BIAS].strides[0] = 2, c.d[T_DBIAS].strides[0] = 2;
    expect_valid(&c, "bias and dbias of stride 2");
    /* F16 and BF16 */
    const rudnn_dtype_t dts[2] = {RUDNN_F16, RUDNN_BF16};
    for (int k = 0; k < 2; k++) {
        spec_init(&c);
        for (int i = 0; i < T_COUNT; i++)
            c.d[i].dtype = dts[k];
        expect_valid(&c, k ? "all bf16" : "all f16");
    }
    /* entries past d of the option arrays are ignored */
    spec_init(&c), c.opts.stride[2] = 0, c.opts.padding[2] = -5, c.opts.dilation[2] = INT64_MIN;
    expect_valid(&c, "option entries past d ignored");
    /* options NULL: stride 1, padding 0, dilation 1, one group: w [6, 4, 3, 2] -> y [2, 6, 3, 5] */
    {
        const int64_t w[4] = {6, 4, 3, 2}, y[4] = {2, 6, 3, 5};
        spec_init(&c), set_problem(&c, 4, dims_x, w, y), c.null_options = 1;
        expect_valid(&c, "options NULL (defaults)");
        /* the fixture's grouped shapes with NULL options: C != Cg G */
        spec_init(&c), c.null_options = 1;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "groups is 1", "x has C = 4", "options NULL, grouped w");
    }
    /* data backward: dx of S 6 gives the same P 3 with stride 2 as S 5 */
    {
        const int64_t dx[4] = {2, 4, 6, 6};
        spec_init(&c), rt_reshape(&c.d[T_DX], 4, dx);
        expect_valid_in(&c, B_DGRAD, "dx with S 6 (P 3 all the same)");
        const int64_t x[4] = {2, 4, 6, 6};
        spec_init(&c), rt_reshape(&c.d[T_X], 4, x);
        expect_valid_in(&c, B_FWD | B_WGRAD, "x with S 6 (P 3 all the same)");
        /* a filter of R 2 also gives P 3 ((5 + 2 - 2) / 2 + 1) */
        const int64_t dw[4] = {6, 2, 2, 2};
        spec_init(&c), rt_reshape(&c.d[T_DW], 4, dw), rt_reshape(&c.d[T_W], 4, dw);
        expect_valid(&c, "w with R 2 x 2 (P 3 all the same)");
    }
    /* 1D: x [2, 4, 7], w [6, 2, 3], stride 2, padding 1, groups 2 -> y [2, 6, 4] */
    {
        const int64_t x[3] = {2, 4, 7}, w[3] = {6, 2, 3}, y[3] = {2, 6, 4};
        spec_init(&c), set_problem(&c, 3, x, w, y);
        c.opts.stride[1] = 0, c.opts.dilation[1] = 0; /* ignored past d = 1 */
        expect_valid(&c, "1D grouped");
    }
    /* 3D: x [1, 2, 3, 4, 5], w [2, 2, 2, 2, 2] -> y [1, 2, 2, 3, 4], one group; and grouped */
    {
        const int64_t x[5] = {1, 2, 3, 4, 5}, w[5] = {2, 2, 2, 2, 2}, y[5] = {1, 2, 2, 3, 4};
        spec_init(&c), set_problem(&c, 5, x, w, y);
        rudnn_conv_options_init(&c.opts);
        for (int s = 0; s < 3; s++) {
            c.strategy = strategies[s];
            expect_valid(&c, "3D");
        }
        const int64_t wg[5] = {2, 1, 2, 2, 2};
        set_problem(&c, 5, x, wg, y), c.opts.groups = 2, c.strategy = RUDNN_CONV_AUTOTUNE;
        expect_valid(&c, "3D grouped");
    }
    /* channels-last x, dx, y and dy: [N, C, H, W] views of [N, H, W, C] memory */
    {
        spec_init(&c);
        const int xi[2] = {T_X, T_DX}, yi[2] = {T_Y, T_DY};
        for (int k = 0; k < 2; k++) {
            rt_assert_status(rudnn_conv_channels_last(&c.d[xi[k]], F.t[xi[k]].buffer, 0, RUDNN_F32, 4, dims_x),
                             RUDNN_STATUS_SUCCESS);
            rt_assert_status(rudnn_conv_channels_last(&c.d[yi[k]], F.t[yi[k]].buffer, 0, RUDNN_F32, 4, dims_y),
                             RUDNN_STATUS_SUCCESS);
        }
        expect_valid(&c, "channels-last x, dx, y, dy");
        /* a w of [K, R_H, R_W, Cg] memory too */
        rt_assert_status(rudnn_conv_channels_last(&c.d[T_W], F.t[T_W].buffer, 0, RUDNN_F32, 4, dims_w),
                         RUDNN_STATUS_SUCCESS);
        rt_assert_status(rudnn_conv_channels_last(&c.d[T_DW], F.t[T_DW].buffer, 0, RUDNN_F32, 4, dims_w),
                         RUDNN_STATUS_SUCCESS);
        expect_valid(&c, "channels-last w, dw too");
    }
    /* inputs may share memory (read only): w over x's first bytes, dy over x's */
    {
        spec_init(&c), c.d[T_W].buffer = F.t[T_X].buffer, c.d[T_W].offset = 8;
        c.d[T_DY].buffer = F.t[T_X].buffer, c.d[T_DY].offset = 0;
        expect_valid(&c, "inputs sharing memory");
    }
    /* a valid call right after a rejected one leaves no message */
    spec_init(&c), c.queue = NULL;
    (void)call_form(&c, FWD, FORM_OP, NULL, NULL);
    spec_init(&c);
    expect_valid_in(&c, B_FWD, "valid after rejected");
    finish();
}

/* N = 0: forward and data backward write nothing; weight backward writes zeros. */
static void empty_batch(void **state)
{
    (void)state;
    const int64_t x[4] = {0, 4, 5, 6}, y[4] = {0, 6, 3, 4};
    callspec_t c;
    spec_init(&c), set_problem(&c, 4, x, dims_w, y);
    rt_reshape(&c.d[T_W], 4, dims_w), rt_reshape(&c.d[T_DW], 4, dims_w);
    c.strategy = RUDNN_CONV_DIRECT;
    for (int dir = 0; dir < DIRS; dir++) {
        rt_guard_begin(&F.guard);
        const rudnn_status_t st = call_form(&c, dir, FORM_OP, NULL, NULL);
        const rudnn_status_t want = have_kernels ? RUDNN_STATUS_SUCCESS : RUDNN_STATUS_NOT_SUPPORTED;
        if (st != want)
            rt_failf("N = 0 [%s]: %s, expected %s (\"%s\")", dir_ops[dir], rudnn_status_string(st),
                      rudnn_status_string(want), rudnn_last_error());
        rt_guard_changed(&F.guard);
        for (int i = 0; i < F.guard.count; i++) {
            const int written = F.guard.items[i].changed;
            const int may = st == RUDNN_STATUS_SUCCESS && dir == WGRAD && (i == T_DW || i == T_DBIAS);
            if (written && !may)
                rt_failf("N = 0 [%s]: %s's buffer written", dir_ops[dir], F.guard.items[i].name);
        }
        if (st == RUDNN_STATUS_SUCCESS && dir == WGRAD) {
            const int outs[2] = {T_DW, T_DBIAS};
            for (int k = 0; k < 2; k++) {
                const int64_t n = rudnn_tensor_numel(&F.t[outs[k]].t);
                float *v = rt_xmalloc((size_t)n * sizeof *v);
                rt_tensor_download(&F.t[outs[k]], v);
                for (int64_t i = 0; i < n; i++)
                    if (v[i] != 0.0f || signbit(v[i])) {
                        rt_failf("N = 0 [%s]: %s[%lld] = %g, expected +0", dir_ops[dir], names[outs[k]],
                                  (long long)i, (double)v[i]);
                        break;
                    }
                free(v);
            }
        }
        /* resolve: nothing runs for the first two */
        rudnn_conv_choice_t choice;
        memset(&choice, 0, sizeof choice);
        if (have_kernels && !call_form(&c, dir, FORM_RESOLVE, NULL, &choice) && dir != WGRAD &&
            strcmp(choice.kernel, "convolution.none") != 0)
            rt_failf("N = 0 [%s]: resolve named %s, expected convolution.none", dir_ops[dir], choice.kernel);
        repoison_outputs();
    }
    finish();
}

/* resolve: what runs, and the guide's overrides. */
static void resolve_reports(void **state)
{
    (void)state;
    if (!have_kernels) {
        printf("    no convolution kernels on this backend: resolve answers NOT_SUPPORTED (valid_calls)\n");
        return;
    }
    callspec_t c;
    /* grouped (the fixture) asked for ImplicitGemm runs Direct, saying so */
    spec_init(&c), c.strategy = RUDNN_CONV_IMPLICIT_GEMM;
    for (int dir = 0; dir < DIRS; dir++) {
        rudnn_conv_choice_t ch = expect_valid_in(&c, 1u << dir, "grouped, ImplicitGemm");
        if (ch.kernel && (ch.strategy != RUDNN_CONV_DIRECT || !strstr(ch.reason, "overridden to Direct") ||
                          !strstr(ch.reason, "grouped")))
            rt_failf("grouped ImplicitGemm [%s]: resolved strategy %d, reason \"%s\"", dir_ops[dir],
                      (int)ch.strategy, ch.reason);
    }
    /* 3D F32 asked for ImplicitGemm runs Direct; 3D F16 does not have to */
    const int64_t x[5] = {1, 2, 3, 4, 5}, w[5] = {2, 2, 2, 2, 2}, y[5] = {1, 2, 2, 3, 4};
    spec_init(&c), set_problem(&c, 5, x, w, y), rudnn_conv_options_init(&c.opts);
    c.strategy = RUDNN_CONV_IMPLICIT_GEMM;
    for (int dir = 0; dir < DIRS; dir++) {
        rudnn_conv_choice_t ch = expect_valid_in(&c, 1u << dir, "3D F32, ImplicitGemm");
        if (ch.kernel && (ch.strategy != RUDNN_CONV_DIRECT || !strstr(ch.reason, "overridden to Direct") ||
                          !strstr(ch.reason, "3D")))
            rt_failf("3D F32 ImplicitGemm [%s]: resolved strategy %d, reason \"%s\"", dir_ops[dir],
                      (int)ch.strategy, ch.reason);
    }
    /* a 2D F32 convolution of one group asked for ImplicitGemm: ImplicitGemm runs, or NOT_SUPPORTED
     * naming the op; never Direct */
    const int64_t w2[4] = {6, 4, 3, 2}, y2[4] = {2, 6, 3, 5};
    spec_init(&c), set_problem(&c, 4, dims_x, w2, y2), rudnn_conv_options_init(&c.opts);
    c.strategy = RUDNN_CONV_IMPLICIT_GEMM;
    for (int dir = 0; dir < DIRS; dir++) {
        rudnn_conv_choice_t ch;
        memset(&ch, 0, sizeof ch);
        const rudnn_status_t st = call_form(&c, dir, FORM_RESOLVE, NULL, &ch);
        if (st == RUDNN_STATUS_NOT_SUPPORTED && strstr(rudnn_last_error(), "conv_resolve"))
            continue;
        if (st || ch.strategy != RUDNN_CONV_IMPLICIT_GEMM || strstr(ch.reason, "overridden"))
            rt_failf("2D F32 ImplicitGemm [%s]: %s, strategy %d, reason \"%s\"", dir_ops[dir],
                      rudnn_status_string(st), (int)ch.strategy, st ? rudnn_last_error() : ch.reason);
        else
            expect_valid_in(&c, 1u << dir, "2D F32 ImplicitGemm");
    }
    /* Autotune after a call: the choice is what runs */
    spec_init(&c);
    for (int dir = 0; dir < DIRS; dir++) {
        expect_valid_in(&c, 1u << dir, "Autotune (tunes)");
        rudnn_conv_choice_t ch;
        memset(&ch, 0, sizeof ch);
        rt_assert_status(call_form(&c, dir, FORM_RESOLVE, NULL, &ch), RUDNN_STATUS_SUCCESS);
        rt_assert_status(call_form(&c, dir, FORM_OP, NULL, NULL), RUDNN_STATUS_SUCCESS);
        if (strcmp(rudnn_last_kernel(), ch.kernel) != 0)
            rt_failf("Autotune [%s], tuned: resolve said %s (\"%s\"), %s ran", dir_ops[dir], ch.kernel, ch.reason,
                      rudnn_last_kernel());
        repoison_outputs();
    }
    finish();
}

/* ---- the rejections ------------------------------------------------------------------------------ */

static void null_arguments(void **state)
{
    (void)state;
    callspec_t c;
    spec_init(&c), c.queue = NULL;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "queue", "NULL", "queue NULL");
    /* each required tensor */
    const int req[DIRS][3] = {{T_X, T_W, T_Y}, {T_DY, T_W, T_DX}, {T_X, T_DY, T_DW}};
    for (int dir = 0; dir < DIRS; dir++)
        for (int k = 0; k < 3; k++) {
            spec_init(&c), c.null_t[req[dir][k]] = 1;
            expect_reject(&c, 1u << dir, RUDNN_STATUS_BAD_PARAM, names[req[dir][k]], "is NULL", "tensor NULL");
        }
    /* a tensor without a buffer */
    for (int dir = 0; dir < DIRS; dir++)
        for (int k = 0; k < 3; k++) {
            spec_init(&c), c.d[req[dir][k]].buffer = NULL;
            expect_reject(&c, 1u << dir, RUDNN_STATUS_BAD_PARAM, names[req[dir][k]], "no buffer", "no buffer");
        }
    spec_init(&c), c.d[T_BIAS].buffer = NULL, c.d[T_DBIAS].buffer = NULL;
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_PARAM, "bias", "no buffer", "bias without buffer");
    expect_reject(&c, B_WGRAD, RUDNN_STATUS_BAD_PARAM, "dbias", "no buffer", "dbias without buffer");
    /* the queries' own pointers */
    spec_init(&c), c.null_tensors = 1;
    expect_reject_in(&c, B_ALL, ~F_OP & F_ALL, RUDNN_STATUS_BAD_PARAM, "tensors", "NULL", NULL, "tensors NULL");
    spec_init(&c), c.null_result = 1;
    expect_reject_in(&c, B_ALL, 1u << FORM_RESOLVE, RUDNN_STATUS_BAD_PARAM, "choice", "NULL", NULL, "choice NULL");
    expect_reject_in(&c, B_ALL, 1u << FORM_SIZE, RUDNN_STATUS_BAD_PARAM, "bytes", "NULL", NULL, "bytes NULL");
    /* a field the direction does not take, set */
    spec_init(&c), c.extra = &c.d[T_DX];
    expect_reject_in(&c, B_FWD, ~F_OP & F_ALL, RUDNN_STATUS_BAD_PARAM, "tensors->dx", "forward", NULL,
                     "forward with dx set");
    spec_init(&c), c.extra = &c.d[T_BIAS];
    expect_reject_in(&c, B_DGRAD, ~F_OP & F_ALL, RUDNN_STATUS_BAD_PARAM, "tensors->bias", "data backward", NULL,
                     "data backward with bias set");
    spec_init(&c), c.extra = &c.d[T_W];
    expect_reject_in(&c, B_WGRAD, ~F_OP & F_ALL, RUDNN_STATUS_BAD_PARAM, "tensors->w", "weight backward", NULL,
                     "weight backward with w set");
    finish();
}

static void ranks(void **state)
{
    (void)state;
    callspec_t c;
    /* rank 2 and 6 for both data and filter */
    const int64_t x2[2] = {2, 4}, w2[2] = {6, 2}, y2[2] = {2, 6};
    spec_init(&c), set_problem(&c, 2, x2, w2, y2);
    expect_reject(&c, B_FWD | B_WGRAD, RUDNN_STATUS_BAD_SHAPE, "x has rank 2", "3, 4 or 5", "rank 2");
    expect_reject(&c, B_DGRAD, RUDNN_STATUS_BAD_SHAPE, "dx has rank 2", "3, 4 or 5", "rank 2");
    const int64_t x6[6] = {2, 4, 5, 6, 1, 1}, w6[6] = {6, 2, 3, 2, 1, 1}, y6[6] = {2, 6, 3, 4, 1, 1};
    spec_init(&c), set_problem(&c, 6, x6, w6, y6);
    expect_reject(&c, B_FWD | B_WGRAD, RUDNN_STATUS_BAD_SHAPE, "x has rank 6", "3, 4 or 5", "rank 6");
    expect_reject(&c, B_DGRAD, RUDNN_STATUS_BAD_SHAPE, "dx has rank 6", "3, 4 or 5", "rank 6");
    /* a rank no descriptor has */
    spec_init(&c), c.d[T_X].rank = 9, c.d[T_DY].rank = -1;
    expect_reject(&c, B_FWD | B_WGRAD, RUDNN_STATUS_BAD_SHAPE, "x has rank 9", NULL, "rank 9");
    expect_reject(&c, B_DGRAD, RUDNN_STATUS_BAD_SHAPE, "dy has rank -1", NULL, "rank -1");
    /* ranks that disagree: the filter's, the output's, the bias's */
    const int64_t w3[3] = {6, 2, 3};
    spec_init(&c), rt_reshape(&c.d[T_W], 3, w3), rt_reshape(&c.d[T_DW], 3, w3);
    expect_reject(&c, B_FWD | B_DGRAD, RUDNN_STATUS_BAD_SHAPE, "w has rank 3", "rank 4", "w rank 3");
    expect_reject(&c, B_WGRAD, RUDNN_STATUS_BAD_SHAPE, "dw has rank 3", "rank 4", "dw rank 3");
    const int64_t y5[5] = {2, 6, 3, 4, 1};
    spec_init(&c), rt_reshape(&c.d[T_Y], 5, y5), rt_reshape(&c.d[T_DY], 5, y5);
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "y has shape [2, 6, 3, 4, 1]", "expected [2, 6, 3, 4]",
                  "y rank 5");
    expect_reject(&c, B_DGRAD | B_WGRAD, RUDNN_STATUS_BAD_SHAPE, "dy has shape", "expected [2, 6, 3, 4]",
                  "dy rank 5");
    const int64_t dx5[5] = {2, 4, 5, 6, 1};
    spec_init(&c), rt_reshape(&c.d[T_DX], 5, dx5);
    expect_reject(&c, B_DGRAD, RUDNN_STATUS_BAD_SHAPE, "rank", "dx", "dx rank 5");
    const int64_t b2[2] = {1, 6};
    spec_init(&c), rt_reshape(&c.d[T_BIAS], 2, b2), rt_reshape(&c.d[T_DBIAS], 2, b2);
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "bias has shape [1, 6]", "expected [6]", "bias rank 2");
    expect_reject(&c, B_WGRAD, RUDNN_STATUS_BAD_SHAPE, "dbias has shape [1, 6]", "expected [6]", "dbias rank 2");
    finish();
}

static void dtypes(void **state)
{
    (void)state;
    callspec_t c;
    /* non-float dtypes, all tensors alike */
    const rudnn_dtype_t bad[] = {RUDNN_I8, RUDNN_I32, RUDNN_U32, RUDNN_I64, RUDNN_BOOL, RUDNN_I4};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        spec_init(&c);
        for (int i = 0; i < T_COUNT; i++)
            c.d[i].dtype = bad[k];
        char what[64];
        snprintf(what, sizeof what, "every tensor %s", rudnn_dtype_name(bad[k]));
        expect_reject(&c, B_FWD | B_WGRAD, RUDNN_STATUS_BAD_DTYPE, "x has", "expected f32, f16 or bf16", what);
        expect_reject(&c, B_DGRAD, RUDNN_STATUS_BAD_DTYPE, "dy has", "expected f32, f16 or bf16", what);
    }
    /* not a dtype at all */
    spec_init(&c), c.d[T_W].dtype = (rudnn_dtype_t)99;
    expect_reject(&c, B_FWD | B_DGRAD, RUDNN_STATUS_BAD_DTYPE, "w has dtype 99", "not a rudnn dtype", "dtype 99");
    spec_init(&c), c.d[T_DBIAS].dtype = (rudnn_dtype_t)-1;
    expect_reject(&c, B_WGRAD, RUDNN_STATUS_BAD_DTYPE, "dbias has dtype -1", "not a rudnn dtype", "dtype -1");
    /* one tensor of another float dtype, or an integer one among floats */
    static const struct {
        int tensor;
        unsigned dirs;
        rudnn_dtype_t dt;
    } one[] = {
        {T_W, B_FWD | B_DGRAD, RUDNN_F16}, {T_BIAS, B_FWD, RUDNN_BF16}, {T_Y, B_FWD, RUDNN_F16},
        {T_DX, B_DGRAD, RUDNN_BF16},       {T_DY, B_WGRAD, RUDNN_F16},  {T_DW, B_WGRAD, RUDNN_BF16},
        {T_DBIAS, B_WGRAD, RUDNN_F16},     {T_W, B_FWD, RUDNN_I8},      {T_DBIAS, B_WGRAD, RUDNN_I32},
        {T_DX, B_DGRAD, RUDNN_I32},
    };
    for (size_t k = 0; k < sizeof one / sizeof one[0]; k++) {
        spec_init(&c), c.d[one[k].tensor].dtype = one[k].dt;
        char n1[32], what[64];
        snprintf(n1, sizeof n1, "%s is %s", names[one[k].tensor], rudnn_dtype_name(one[k].dt));
        snprintf(what, sizeof what, "%s %s among f32", names[one[k].tensor], rudnn_dtype_name(one[k].dt));
        expect_reject(&c, one[k].dirs, RUDNN_STATUS_BAD_DTYPE, n1, "one dtype", what);
    }
    /* the data tensor in f16, the rest f32: the others are named */
    spec_init(&c), c.d[T_X].dtype = RUDNN_F16;
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_DTYPE, "w is f32", "expected f16", "x f16 among f32");
    expect_reject(&c, B_WGRAD, RUDNN_STATUS_BAD_DTYPE, "dw is f32", "expected f16", "x f16 among f32");
    finish();
}

static void groups_and_channels(void **state)
{
    (void)state;
    callspec_t c;
    const int64_t bad_groups[] = {0, -1, INT64_MIN};
    for (size_t k = 0; k < 3; k++) {
        spec_init(&c), c.opts.groups = bad_groups[k];
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "options.groups", ">= 1", "groups < 1");
    }
    /* C != Cg G: w [6, 3, 3, 2] with groups 2 and C 4 */
    const int64_t w3[4] = {6, 3, 3, 2};
    spec_init(&c), rt_reshape(&c.d[T_W], 4, w3), rt_reshape(&c.d[T_DW], 4, w3);
    expect_reject(&c, B_FWD | B_DGRAD, RUDNN_STATUS_BAD_SHAPE, "w has 3 input channels a group", "C = 4",
                  "Cg G != C");
    expect_reject(&c, B_WGRAD, RUDNN_STATUS_BAD_SHAPE, "dw has 3 input channels a group", "x has C = 4",
                  "Cg G != C");
    /* G does not divide C (3 groups of 2 against C 4, or of 1 against C 4) */
    spec_init(&c), c.opts.groups = 3;
    expect_reject(&c, B_FWD | B_WGRAD, RUDNN_STATUS_BAD_SHAPE, "groups is 3", "x has C = 4", "groups 3, C 4");
    expect_reject(&c, B_DGRAD, RUDNN_STATUS_BAD_SHAPE, "groups is 3", "dx has C = 4", "groups 3, C 4");
    /* G divides C but not K: groups 4, w [6, 1, 3, 2] */
    const int64_t w1[4] = {6, 1, 3, 2};
    spec_init(&c), c.opts.groups = 4, rt_reshape(&c.d[T_W], 4, w1), rt_reshape(&c.d[T_DW], 4, w1);
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "groups = 4 does not divide K = 6", NULL, "groups 4, K 6");
    /* groups so large that Cg G overflows: no G that large divides C */
    const int64_t huge[] = {INT64_MAX, (int64_t)1 << 62, ((int64_t)1 << 62) + 1, 4611686018427387905LL};
    for (size_t k = 0; k < sizeof huge / sizeof huge[0]; k++) {
        spec_init(&c), c.opts.groups = huge[k];
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "groups", NULL, "groups huge");
    }
    /* C, K and R of 0 */
    const int64_t x0[4] = {2, 0, 5, 6};
    spec_init(&c), rt_reshape(&c.d[T_X], 4, x0), rt_reshape(&c.d[T_DX], 4, x0);
    expect_reject(&c, B_FWD | B_WGRAD, RUDNN_STATUS_BAD_SHAPE, "x dims[1] = 0", "expected 1..", "C 0");
    expect_reject(&c, B_DGRAD, RUDNN_STATUS_BAD_SHAPE, "dx dims[1] = 0", "expected 1..", "C 0");
    const int64_t k0[4] = {0, 2, 3, 2}, r0[4] = {6, 2, 0, 2}, s0[4] = {2, 4, 5, 0};
    spec_init(&c), rt_reshape(&c.d[T_W], 4, k0), rt_reshape(&c.d[T_DW], 4, k0);
    expect_reject(&c, B_FWD | B_DGRAD, RUDNN_STATUS_BAD_SHAPE, "w dims[0] = 0", "expected 1..", "K 0");
    expect_reject(&c, B_WGRAD, RUDNN_STATUS_BAD_SHAPE, "dw dims[0] = 0", "expected 1..", "K 0");
    spec_init(&c), rt_reshape(&c.d[T_W], 4, r0), rt_reshape(&c.d[T_DW], 4, r0);
    expect_reject(&c, B_FWD | B_DGRAD, RUDNN_STATUS_BAD_SHAPE, "w dims[2] = 0", "expected 1..", "R 0");
    spec_init(&c), rt_reshape(&c.d[T_X], 4, s0), rt_reshape(&c.d[T_DX], 4, s0);
    expect_reject(&c, B_FWD | B_WGRAD, RUDNN_STATUS_BAD_SHAPE, "x dims[3] = 0", "expected 1..", "S 0");
    expect_reject(&c, B_DGRAD, RUDNN_STATUS_BAD_SHAPE, "dx dims[3] = 0", "expected 1..", "S 0");
    /* negative dims: the descriptor rule */
    const int64_t neg[4] = {2, 4, -5, 6};
    spec_init(&c), rt_reshape(&c.d[T_X], 4, neg), rt_reshape(&c.d[T_DX], 4, neg);
    expect_reject(&c, B_FWD | B_WGRAD, RUDNN_STATUS_BAD_SHAPE, "x has negative dims[2]", NULL, "S -5");
    expect_reject(&c, B_DGRAD, RUDNN_STATUS_BAD_SHAPE, "dx has negative dims[2]", NULL, "S -5");
    finish();
}

static void stride_padding_dilation(void **state)
{
    (void)state;
    callspec_t c;
    static const struct {
        int which, dim;
        int64_t value;
        const char *n1, *n2;
    } bad[] = {
        {0, 0, 0, "options.stride[0] = 0", "expected 1.."},
        {0, 1, -1, "options.stride[1] = -1", "expected 1.."},
        {0, 0, INT64_MIN, "options.stride[0]", "expected 1.."},
        {1, 0, -1, "options.padding[0] = -1", "expected 0.."},
        {1, 1, INT64_MIN, "options.padding[1]", "expected 0.."},
        {2, 0, 0, "options.dilation[0] = 0", "expected 1.."},
        {2, 1, -3, "options.dilation[1] = -3", "expected 1.."},
        /* past any limit: S + 2 padding and dilation (R - 1) would overflow */
        {0, 1, INT64_MAX, "options.stride[1]", NULL},
        {1, 0, INT64_MAX, "options.padding[0]", NULL},
        {1, 1, INT64_MAX / 2, "options.padding[1]", NULL},
        {2, 0, INT64_MAX, "options.dilation[0]", NULL},
        {2, 1, INT64_MAX / 2, "options.dilation[1]", NULL},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        spec_init(&c);
        int64_t *field = bad[k].which == 0 ? c.opts.stride : bad[k].which == 1 ? c.opts.padding : c.opts.dilation;
        field[bad[k].dim] = bad[k].value;
        char what[80];
        snprintf(what, sizeof what, "option %d[%d] = %lld", bad[k].which, bad[k].dim, (long long)bad[k].value);
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, bad[k].n1, bad[k].n2, what);
    }
    finish();
}

static void output_shapes(void **state)
{
    (void)state;
    callspec_t c;
    /* the output (forward) or dy against rudnn_conv_output_dims: N, K and each P */
    static const struct {
        int dim;
        int64_t value;
    } ymis[] = {{0, 1}, {1, 5}, {2, 2}, {2, 4}, {3, 3}, {3, 5}};
    for (size_t k = 0; k < sizeof ymis / sizeof ymis[0]; k++) {
        int64_t y[4];
        memcpy(y, dims_y, sizeof y);
        y[ymis[k].dim] = ymis[k].value;
        spec_init(&c), rt_reshape(&c.d[T_Y], 4, y), rt_reshape(&c.d[T_DY], 4, y);
        expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "y has shape", "expected [2, 6, 3, 4]", "y mismatched");
        expect_reject(&c, B_DGRAD | B_WGRAD, RUDNN_STATUS_BAD_SHAPE, "dy has shape", "expected [2, 6, 3, 4]",
                      "dy mismatched");
    }
    /* data backward: dx decides P with w; a dx whose P is not dy's */
    const int64_t dx7[4] = {2, 4, 7, 6}, dx4[4] = {2, 4, 5, 5}, dxn[4] = {1, 4, 5, 6};
    spec_init(&c), rt_reshape(&c.d[T_DX], 4, dx7);
    expect_reject(&c, B_DGRAD, RUDNN_STATUS_BAD_SHAPE, "dy has shape [2, 6, 3, 4]", "expected [2, 6, 4, 4]",
                  "dx S 7");
    spec_init(&c), rt_reshape(&c.d[T_DX], 4, dx4);
    expect_reject(&c, B_DGRAD, RUDNN_STATUS_BAD_SHAPE, "dy has shape [2, 6, 3, 4]", "expected [2, 6, 3, 3]",
                  "dx W 5");
    spec_init(&c), rt_reshape(&c.d[T_DX], 4, dxn);
    expect_reject(&c, B_DGRAD, RUDNN_STATUS_BAD_SHAPE, "dy has shape [2, 6, 3, 4]", "expected [1, 6, 3, 4]",
                  "dx N 1");
    /* weight backward: dw's K and R against dy, x's N against dy's */
    const int64_t dwk[4] = {4, 2, 3, 2}, dwr[4] = {6, 2, 1, 2}, xn[4] = {1, 4, 5, 6};
    spec_init(&c), rt_reshape(&c.d[T_DW], 4, dwk);
    expect_reject(&c, B_WGRAD, RUDNN_STATUS_BAD_SHAPE, "dy has shape [2, 6, 3, 4]", "expected [2, 4, 3, 4]",
                  "dw K 4");
    spec_init(&c), rt_reshape(&c.d[T_DW], 4, dwr);
    expect_reject(&c, B_WGRAD, RUDNN_STATUS_BAD_SHAPE, "dy has shape [2, 6, 3, 4]", "expected [2, 6, 4, 4]",
                  "dw R_H 1");
    spec_init(&c), rt_reshape(&c.d[T_X], 4, xn);
    expect_reject(&c, B_WGRAD, RUDNN_STATUS_BAD_SHAPE, "dy has shape [2, 6, 3, 4]", "expected [1, 6, 3, 4]",
                  "x N 1");
    /* P < 1: a filter larger than the padded input (H: R 3 over S 1 without padding), and dilation */
    const int64_t x1[4] = {2, 4, 1, 6}, y1[4] = {2, 6, 1, 4};
    spec_init(&c), c.opts.padding[0] = 0;
    rt_reshape(&c.d[T_X], 4, x1), rt_reshape(&c.d[T_DX], 4, x1), rt_reshape(&c.d[T_Y], 4, y1),
        rt_reshape(&c.d[T_DY], 4, y1);
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "spatial dim 0", "no output position", "R 3 over S 1");
    spec_init(&c), c.opts.dilation[1] = 6; /* W: 6 (2 - 1) + 1 = 7 > 6 */
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "spatial dim 1", "no output position", "dilation 6 over S 6");
    /* the padding makes room: S 1, padding 1 gives P 1 with stride 2 */
    spec_init(&c);
    rt_reshape(&c.d[T_X], 4, x1), rt_reshape(&c.d[T_DX], 4, x1), rt_reshape(&c.d[T_Y], 4, y1),
        rt_reshape(&c.d[T_DY], 4, y1);
    expect_valid(&c, "S 1 with padding 1");
    finish();
}

static void bias_shapes(void **state)
{
    (void)state;
    callspec_t c;
    const int64_t b7[1] = {7}, b3[1] = {3}, b0[1] = {0};
    const int64_t *bad[3] = {b7, b3, b0};
    for (int k = 0; k < 3; k++) {
        spec_init(&c), rt_reshape(&c.d[T_BIAS], 1, bad[k]), rt_reshape(&c.d[T_DBIAS], 1, bad[k]);
        expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "bias has shape", "expected [6]", "bias dims");
        expect_reject(&c, B_WGRAD, RUDNN_STATUS_BAD_SHAPE, "dbias has shape", "expected [6]", "dbias dims");
    }
    spec_init(&c), c.d[T_BIAS].dtype = RUDNN_F16, c.d[T_DBIAS].dtype = RUDNN_BF16;
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_DTYPE, "bias is f16", "expected f32", "bias f16");
    expect_reject(&c, B_WGRAD, RUDNN_STATUS_BAD_DTYPE, "dbias is bf16", "expected f32", "dbias bf16");
    finish();
}

static void layouts(void **state)
{
    (void)state;
    callspec_t c;
    /* a view past the end of its buffer, each tensor */
    static const struct {
        int tensor;
        unsigned dirs;
    } each[] = {{T_X, B_FWD | B_WGRAD}, {T_W, B_FWD | B_DGRAD}, {T_BIAS, B_FWD}, {T_Y, B_FWD}, {T_DY, B_DGRAD | B_WGRAD},
                {T_DX, B_DGRAD},        {T_DW, B_WGRAD},         {T_DBIAS, B_WGRAD}};
    for (size_t k = 0; k < sizeof each / sizeof each[0]; k++) {
        const int i = each[k].tensor;
        spec_init(&c), c.d[i].offset = F.t[i].buffer_bytes - 16;
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_OUT_OF_BOUNDS, names[i], "needs bytes", "view past its buffer");
        spec_init(&c), c.d[i].offset = SIZE_MAX - 3;
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_OUT_OF_BOUNDS, names[i], "its buffer has", "offset SIZE_MAX - 3");
        /* a misaligned offset */
        spec_init(&c), c.d[i].offset = 2;
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_BAD_PARAM, names[i], "not a multiple of its element size",
                      "offset 2");
        /* strides that describe no view */
        spec_init(&c), c.d[i].strides[0] = 0;
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_BAD_SHAPE, names[i], "must be positive", "stride 0");
    }
    /* overlapping elements, strides past any buffer */
    spec_init(&c), c.d[T_X].strides[3] = 2;
    expect_reject(&c, B_FWD | B_WGRAD, RUDNN_STATUS_BAD_SHAPE, "x has overlapping elements", NULL, "x W stride 2");
    spec_init(&c), c.d[T_DY].strides[0] = INT64_MAX / 2;
    expect_reject(&c, B_DGRAD | B_WGRAD, RUDNN_STATUS_OUT_OF_BOUNDS, "dy spans more bytes", NULL, "dy N stride huge");
    /* a padded row stride inside the buffer is a valid view */
    spec_init(&c), c.d[T_X].strides[2] = 7, c.d[T_X].strides[1] = 35, c.d[T_X].strides[0] = 140;
    expect_valid_in(&c, B_FWD | B_WGRAD, "x with padded rows");
    finish();
}

static void overlaps(void **state)
{
    (void)state;
    callspec_t c;
    /* partial: an output a few elements into an input's bytes */
    static const struct {
        int out, in;
        unsigned dirs;
        size_t offset;
    } part[] = {
        {T_Y, T_X, B_FWD, 4},        {T_Y, T_W, B_FWD, 0},       {T_Y, T_BIAS, B_FWD, 8},
        {T_DX, T_DY, B_DGRAD, 4},    {T_DX, T_W, B_DGRAD, 16},   {T_DW, T_X, B_WGRAD, 4},
        {T_DW, T_DY, B_WGRAD, 0},    {T_DBIAS, T_X, B_WGRAD, 12}, {T_DBIAS, T_DY, B_WGRAD, 0},
        {T_DBIAS, T_DW, B_WGRAD, 8}, {T_DW, T_DBIAS, B_WGRAD, 4},
    };
    for (size_t k = 0; k < sizeof part / sizeof part[0]; k++) {
        spec_init(&c);
        c.d[part[k].out].buffer = F.t[part[k].in].buffer;
        c.d[part[k].out].offset = part[k].offset;
        char n1[32], n2[32], what[64];
        const int first = part[k].out == T_DBIAS && part[k].in == T_DW ? part[k].in : part[k].out;
        const int second = first == part[k].out ? part[k].in : part[k].out;
        snprintf(n1, sizeof n1, "%s overlaps %s", names[first], names[second]);
        snprintf(n2, sizeof n2, "%s must be disjoint", names[first]);
        snprintf(what, sizeof what, "%s partly over %s", names[part[k].out], names[part[k].in]);
        expect_reject(&c, part[k].dirs, RUDNN_STATUS_BAD_PARAM, n1, n2, what);
    }
    /* exactly in place: a problem whose output has its input's shape (x [1, 2, 3, 3], w [2, 2, 1, 1],
     * no options: y [1, 2, 3, 3]) with the output's descriptor equal to the input's */
    const int64_t x[4] = {1, 2, 3, 3}, w[4] = {2, 2, 1, 1};
    spec_init(&c), set_problem(&c, 4, x, w, x), c.null_options = 1;
    expect_valid(&c, "the in-place problem out of place");
    c.d[T_Y] = c.d[T_X];
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_PARAM, "y overlaps x", "disjoint", "y exactly on x");
    spec_init(&c), set_problem(&c, 4, x, w, x), c.null_options = 1, c.d[T_DX] = c.d[T_DY];
    expect_reject(&c, B_DGRAD, RUDNN_STATUS_BAD_PARAM, "dx overlaps dy", "disjoint", "dx exactly on dy");
    /* weight backward: dw [2, 2, 1, 1] exactly on dy [1, 2, 1, 2] (x [1, 2, 1, 2]), 4 elements each */
    const int64_t xw[4] = {1, 2, 1, 2};
    spec_init(&c), set_problem(&c, 4, xw, w, xw), c.null_options = 1;
    c.d[T_DW].buffer = c.d[T_DY].buffer, c.d[T_DW].offset = c.d[T_DY].offset;
    expect_reject(&c, B_WGRAD, RUDNN_STATUS_BAD_PARAM, "dw overlaps dy", "disjoint", "dw exactly on dy");
    spec_init(&c), set_problem(&c, 4, xw, w, xw), c.null_options = 1;
    c.d[T_DW].buffer = c.d[T_X].buffer, c.d[T_DW].offset = c.d[T_X].offset;
    expect_reject(&c, B_WGRAD, RUDNN_STATUS_BAD_PARAM, "dw overlaps x", "disjoint", "dw exactly on x");
    /* dbias on dw's first bytes (both outputs) */
    spec_init(&c), c.d[T_DBIAS].buffer = c.d[T_DW].buffer, c.d[T_DBIAS].offset = c.d[T_DW].offset;
    expect_reject(&c, B_WGRAD, RUDNN_STATUS_BAD_PARAM, "dw overlaps dbias", "disjoint", "dbias at dw's start");
    /* outputs right after an input, touching no byte of it: valid */
    spec_init(&c), c.d[T_Y].buffer = F.t[T_BIAS].buffer, c.d[T_Y].offset = 6 * 4;
    expect_valid_in(&c, B_FWD, "y right after bias in its buffer");
    spec_init(&c), c.d[T_DBIAS].buffer = F.t[T_DW].buffer, c.d[T_DBIAS].offset = 72 * 4;
    expect_valid_in(&c, B_WGRAD, "dbias right after dw in its buffer");
    finish();
}

static void other_context(void **state)
{
    (void)state;
    if (!rt_ctx2) {
        printf("    no second context: DEVICE_MISMATCH not checked\n");
        return;
    }
    static const struct {
        int tensor;
        unsigned dirs;
    } each[] = {{T_X, B_FWD | B_WGRAD}, {T_W, B_FWD | B_DGRAD}, {T_BIAS, B_FWD}, {T_Y, B_FWD}, {T_DY, B_DGRAD | B_WGRAD},
                {T_DX, B_DGRAD},        {T_DW, B_WGRAD},         {T_DBIAS, B_WGRAD}};
    for (size_t k = 0; k < sizeof each / sizeof each[0]; k++) {
        const int i = each[k].tensor;
        rt_binding_t saved = rt_bind(rt_ctx2, rt_queue2);
        rt_tensor_t o;
        rt_tensor_create(&o, RUDNN_F32, F.t[i].t.rank, F.t[i].t.dims, 0, 0);
        rt_unbind(saved);
        callspec_t c;
        spec_init(&c), c.d[i] = o.t;
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_DEVICE_MISMATCH, names[i], "another context", "other context");
        saved = rt_bind(rt_ctx2, rt_queue2);
        rt_tensor_destroy(&o);
        rt_unbind(saved);
    }
    /* the other context's queue with this context's tensors */
    callspec_t c;
    spec_init(&c), c.queue = rt_queue2;
    expect_reject(&c, B_ALL, RUDNN_STATUS_DEVICE_MISMATCH, "another context", NULL, "queue of ctx2");
    finish();
}

static void enums(void **state)
{
    (void)state;
    callspec_t c;
    const int bad_strategy[] = {-1, 3, 1000, INT_MIN, INT_MAX};
    for (int k = 0; k < 5; k++) {
        spec_init(&c), c.strategy = bad_strategy[k];
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "strategy =", "RUDNN_CONV_IMPLICIT_GEMM", "bad strategy");
    }
    const int bad_direction[] = {-1, 3, 1000, INT_MIN};
    for (int k = 0; k < 4; k++) {
        spec_init(&c), c.bad_direction = 1, c.direction = bad_direction[k];
        expect_reject_in(&c, B_FWD, ~F_OP & F_ALL, RUDNN_STATUS_BAD_PARAM, "direction =",
                         "RUDNN_CONV_WEIGHT_BACKWARD", NULL, "bad direction");
    }
    /* a valid direction whose tensors are not given: the other direction's fields are NULL */
    spec_init(&c), c.bad_direction = 1, c.direction = RUDNN_CONV_DATA_BACKWARD;
    expect_reject_in(&c, B_FWD, ~F_OP & F_ALL, RUDNN_STATUS_BAD_PARAM, "tensors->", "data backward", NULL,
                     "forward's tensors as data backward");
    finish();
}

/* Workspace rules per direction and strategy, after asking the size. */
static void workspaces(void **state)
{
    (void)state;
    if (!have_kernels) {
        printf("    no convolution kernels on this backend: workspace rules not reached\n");
        return;
    }
    static const int strategies[3] = {RUDNN_CONV_AUTOTUNE, RUDNN_CONV_DIRECT, RUDNN_CONV_IMPLICIT_GEMM};
    for (int dir = 0; dir < DIRS; dir++)
        for (int s = 0; s < 3; s++) {
            callspec_t c;
            spec_init(&c), c.strategy = strategies[s];
            size_t need = BYTES_SENTINEL;
            rt_assert_status(call_form(&c, dir, FORM_SIZE, &need, NULL), RUDNN_STATUS_SUCCESS);
            if (need != 0)
                printf("    %s, strategy %d: %zu workspace bytes\n", dir_ops[dir], strategies[s], need);
            rudnn_buffer_t ws;
            rt_assert_status(rudnn_buffer_create(rt_ctx, need + 256, &ws), RUDNN_STATUS_SUCCESS);
            char what[80];
            if (need) {
                c.ws = ws, c.ws_bytes = need - 1;
                snprintf(what, sizeof what, "workspace one byte short, strategy %d", strategies[s]);
                expect_reject_in(&c, 1u << dir, F_OP, RUDNN_STATUS_BAD_PARAM, "workspace_bytes", "too small",
                                 "rudnn_conv_workspace_size", what);
            }
            c.ws = ws, c.ws_bytes = need + 257;
            snprintf(what, sizeof what, "workspace_bytes past its buffer, strategy %d", strategies[s]);
            expect_reject_in(&c, 1u << dir, F_OP, RUDNN_STATUS_BAD_PARAM, "workspace_bytes", "exceeds", NULL, what);
            c.ws_bytes = SIZE_MAX;
            expect_reject_in(&c, 1u << dir, F_OP, RUDNN_STATUS_BAD_PARAM, "workspace_bytes", "exceeds", NULL, what);
            /* over a tensor of the call: the first input, and the output */
            const int in_t = dir == DGRAD ? T_DY : T_X, out_t = dir == FWD ? T_Y : dir == DGRAD ? T_DX : T_DW;
            const int tt[2] = {in_t, out_t};
            for (int k = 0; k < 2; k++) {
                c.ws = F.t[tt[k]].buffer, c.ws_bytes = need + 16;
                snprintf(what, sizeof what, "workspace over %s, strategy %d", names[tt[k]], strategies[s]);
                expect_reject_in(&c, 1u << dir, F_OP, RUDNN_STATUS_BAD_PARAM, names[tt[k]],
                                 "overlaps the first workspace_bytes", NULL, what);
            }
            /* ... but a workspace whose first bytes end before the tensor starts is fine */
            if (rt_ctx2) {
                rudnn_buffer_t other;
                rt_assert_status(rudnn_buffer_create(rt_ctx2, need + 16, &other), RUDNN_STATUS_SUCCESS);
                c.ws = other, c.ws_bytes = need;
                snprintf(what, sizeof what, "workspace of ctx2, strategy %d", strategies[s]);
                expect_reject_in(&c, 1u << dir, F_OP, RUDNN_STATUS_DEVICE_MISMATCH, "workspace", "another context",
                                 NULL, what);
                rudnn_buffer_destroy(other);
            }
            /* the size asked for, and more, in a buffer of its own; NULL (the pool) */
            c.ws = ws, c.ws_bytes = need;
            expect_valid_in(&c, 1u << dir, "workspace of the size asked for");
            c.ws_bytes = need + 256;
            expect_valid_in(&c, 1u << dir, "workspace larger than asked");
            c.ws = NULL, c.ws_bytes = 12345; /* ignored without a buffer */
            expect_valid_in(&c, 1u << dir, "workspace NULL with workspace_bytes set");
            rudnn_buffer_destroy(ws);
        }
    finish();
}

/* rudnn_conv_resolve and rudnn_conv_workspace_size make no allocation the fault walk could fail
 * (tests/faults/convolution.c leaves them out for that): on a new context (nothing built yet), with
 * every allocation failing, each direction and strategy answers as it does without faults, or fails
 * with ALLOC_FAILED naming the query and writing nothing. */
static void queries_allocate_nothing(void **state)
{
    (void)state;
    rudnn_context_t ctx = NULL;
    rudnn_queue_t q = NULL;
    rt_assert_status(rudnn_context_create(&ctx, NULL), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_queue_create(ctx, &q), RUDNN_STATUS_SUCCESS);
    rt_binding_t saved = rt_bind(ctx, q);
    rt_tensor_t t[T_COUNT];
    const int64_t *dims[T_COUNT] = {dims_x, dims_w, dims_b, dims_y, dims_y, dims_x, dims_w, dims_b};
    for (int i = 0; i < T_COUNT; i++)
        rt_tensor_create(&t[i], RUDNN_F32, i == T_BIAS || i == T_DBIAS ? 1 : 4, dims[i], 0, 0);
    rt_unbind(saved);
    callspec_t c;
    spec_init(&c), c.queue = q;
    for (int i = 0; i < T_COUNT; i++)
        c.d[i] = t[i].t;
    static const int strategies[3] = {RUDNN_CONV_AUTOTUNE, RUDNN_CONV_DIRECT, RUDNN_CONV_IMPLICIT_GEMM};
    for (int pass = 0; pass < 2; pass++) /* faults first: nothing may be built before */
        for (int dir = 0; dir < DIRS; dir++)
            for (int s = 0; s < 3; s++)
                for (int form = FORM_RESOLVE; form <= FORM_SIZE; form++) {
                    c.strategy = strategies[s];
                    rudnn_conv_choice_t got, want;
                    size_t got_bytes = BYTES_SENTINEL, want_bytes = BYTES_SENTINEL;
                    memset(&got, CHOICE_BYTE, sizeof got);
                    memset(&want, 0, sizeof want);
                    rudnn_debug_fail_allocation(1);
                    const rudnn_status_t st = call_form(&c, dir, form, &got_bytes, &got);
                    const uint64_t count = rudnn_debug_allocation_count();
                    char msg[1024];
                    snprintf(msg, sizeof msg, "%s", rudnn_last_error());
                    rudnn_debug_fail_allocation(0);
                    const rudnn_status_t ref = call_form(&c, dir, form, &want_bytes, &want);
                    if (pass == 0 && count)
                        printf("    %s (%s, strategy %d): %llu allocation(s) with every one failing\n",
                               form_ops[form], dir_ops[dir], strategies[s], (unsigned long long)count);
                    if (st == RUDNN_STATUS_ALLOC_FAILED) {
                        rudnn_conv_choice_t blank;
                        memset(&blank, CHOICE_BYTE, sizeof blank);
                        if (!strstr(msg, form_ops[form]) || got_bytes != BYTES_SENTINEL ||
                            memcmp(&got, &blank, sizeof got) != 0)
                            rt_failf("%s (%s): ALLOC_FAILED \"%s\" without the op, or its answer written",
                                      form_ops[form], dir_ops[dir], msg);
                        continue;
                    }
                    if (st != ref || (form == FORM_SIZE && got_bytes != want_bytes) ||
                        (form == FORM_RESOLVE && !st &&
                         (got.strategy != want.strategy || strcmp(got.kernel, want.kernel) != 0 ||
                          strcmp(got.reason, want.reason) != 0)))
                        rt_failf("%s (%s, strategy %d), every allocation failing: %s \"%s\", without: %s (%s, "
                                  "%zu bytes)", form_ops[form], dir_ops[dir], strategies[s], rudnn_status_string(st),
                                  msg, rudnn_status_string(ref), ref ? rudnn_last_error() : want.kernel, want_bytes);
                }
    rudnn_debug_fail_allocation(0);
    saved = rt_bind(ctx, q);
    for (int i = 0; i < T_COUNT; i++)
        rt_tensor_destroy(&t[i]);
    rt_unbind(saved);
    rudnn_queue_destroy(q);
    rudnn_context_destroy(ctx);
    finish();
}

/* ---- the helpers' own contracts ----------------------------------------------------------------- */

static void output_dims_fn(void **state)
{
    (void)state;
    rudnn_conv_options_t o;
    fixture_options(&o);
    int64_t y[5] = {-7, -7, -7, -7, -7};
    rudnn_status_t st = rudnn_conv_output_dims(4, dims_x, dims_w, &o, y);
    if (st || memcmp(y, dims_y, sizeof dims_y) != 0 || y[4] != -7)
        rt_failf("output_dims(fixture): %s, [%lld, %lld, %lld, %lld, %lld]", rudnn_status_string(st),
                  (long long)y[0], (long long)y[1], (long long)y[2], (long long)y[3], (long long)y[4]);
    if (rudnn_last_error()[0])
        rt_failf("output_dims(fixture): success left \"%s\"", rudnn_last_error());
    /* 1D and 3D, defaults (NULL options) */
    {
        const int64_t x1[3] = {3, 2, 10}, w1[3] = {5, 2, 4};
        int64_t y1[3] = {0};
        st = rudnn_conv_output_dims(3, x1, w1, NULL, y1);
        if (st || y1[0] != 3 || y1[1] != 5 || y1[2] != 7)
            rt_failf("output_dims(1D, NULL options): %s, [%lld, %lld, %lld]", rudnn_status_string(st),
                      (long long)y1[0], (long long)y1[1], (long long)y1[2]);
        const int64_t x3[5] = {1, 4, 9, 8, 7}, w3[5] = {8, 2, 3, 3, 1};
        rudnn_conv_options_t o3;
        rudnn_conv_options_init(&o3);
        o3.groups = 2, o3.stride[0] = 3, o3.padding[1] = 2, o3.dilation[1] = 3;
        int64_t y3[5] = {0};
        /* D (9 - 3) / 3 + 1 = 3; H (8 + 4 - 7) / 1 + 1 = 6; W 7 */
        st = rudnn_conv_output_dims(5, x3, w3, &o3, y3);
        if (st || y3[0] != 1 || y3[1] != 8 || y3[2] != 3 || y3[3] != 6 || y3[4] != 7)
            rt_failf("output_dims(3D): %s, [%lld, %lld, %lld, %lld, %lld]", rudnn_status_string(st),
                      (long long)y3[0], (long long)y3[1], (long long)y3[2], (long long)y3[3], (long long)y3[4]);
    }
    /* rejections: y_dims untouched */
    static const struct {
        int rank;
        int64_t x[6], w[6];
        int64_t groups, stride0, pad0, dil0;
        rudnn_status_t want;
        const char *n1, *n2;
    } bad[] = {
        {2, {2, 4}, {6, 2}, 2, 2, 1, 1, RUDNN_STATUS_BAD_SHAPE, "x has rank 2", "3, 4 or 5"},
        {6, {2, 4, 5, 6, 1, 1}, {6, 2, 3, 2, 1, 1}, 2, 2, 1, 1, RUDNN_STATUS_BAD_SHAPE, "x has rank 6", NULL},
        {-1, {0}, {0}, 1, 1, 0, 1, RUDNN_STATUS_BAD_SHAPE, "rank -1", NULL},
        {4, {2, 4, 5, 6}, {6, 3, 3, 2}, 2, 2, 1, 1, RUDNN_STATUS_BAD_SHAPE, "input channels a group", "C = 4"},
        {4, {2, 4, 5, 6}, {6, 1, 3, 2}, 4, 2, 1, 1, RUDNN_STATUS_BAD_SHAPE, "does not divide K = 6", NULL},
        {4, {2, 4, 5, 6}, {6, 2, 3, 2}, 0, 2, 1, 1, RUDNN_STATUS_BAD_PARAM, "options.groups", ">= 1"},
        {4, {2, 4, 5, 6}, {6, 2, 3, 2}, INT64_MAX, 2, 1, 1, RUDNN_STATUS_BAD_SHAPE, "groups", NULL},
        {4, {2, 4, 1, 6}, {6, 2, 3, 2}, 2, 2, 0, 1, RUDNN_STATUS_BAD_SHAPE, "spatial dim 0", "no output position"},
        {4, {2, 4, 5, 6}, {6, 2, 3, 2}, 2, 0, 1, 1, RUDNN_STATUS_BAD_PARAM, "options.stride[0]", NULL},
        {4, {2, 4, 5, 6}, {6, 2, 3, 2}, 2, 2, -1, 1, RUDNN_STATUS_BAD_PARAM, "options.padding[0]", NULL},
        {4, {2, 4, 5, 6}, {6, 2, 3, 2}, 2, 2, 1, 0, RUDNN_STATUS_BAD_PARAM, "options.dilation[0]", NULL},
        {4, {2, 4, 5, 6}, {6, 2, 3, 2}, 2, 2, INT64_MAX, 1, RUDNN_STATUS_BAD_PARAM, "options.padding[0]", NULL},
        {4, {2, 4, 5, 6}, {6, 2, 3, 2}, 2, 2, 1, INT64_MAX, RUDNN_STATUS_BAD_PARAM, "options.dilation[0]", NULL},
        {4, {-2, 4, 5, 6}, {6, 2, 3, 2}, 2, 2, 1, 1, RUDNN_STATUS_BAD_SHAPE, "x dims[0] = -2", NULL},
        {4, {2, 4, 5, 6}, {6, 2, 0, 2}, 2, 2, 1, 1, RUDNN_STATUS_BAD_SHAPE, "w dims[2] = 0", NULL},
        {4, {2, 4, INT64_MAX, 6}, {6, 2, 3, 2}, 2, 2, 1, 1, RUDNN_STATUS_BAD_SHAPE, "x dims[2]", NULL},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        fixture_options(&o);
        o.groups = bad[k].groups, o.stride[0] = bad[k].stride0, o.padding[0] = bad[k].pad0;
        o.dilation[0] = bad[k].dil0;
        int64_t out[6] = {-7, -7, -7, -7, -7, -7};
        st = rudnn_conv_output_dims(bad[k].rank, bad[k].x, bad[k].w, &o, out);
        if (st != bad[k].want || !rt_message_names(rudnn_last_error(), "conv_output_dims", bad[k].n1, bad[k].n2, NULL))
            rt_failf("output_dims case %zu: %s (expected %s), \"%s\" (expected %s, %s)", k, rudnn_status_string(st),
                      rudnn_status_string(bad[k].want), rudnn_last_error(), bad[k].n1, bad[k].n2 ? bad[k].n2 : "-");
        for (int i = 0; i < 6; i++)
            if (out[i] != -7) {
                rt_failf("output_dims case %zu: rejected, wrote y_dims[%d]", k, i);
                break;
            }
    }
    /* NULL pointers */
    const char *args[3] = {"x_dims", "w_dims", "y_dims"};
    for (int k = 0; k < 3; k++) {
        st = rudnn_conv_output_dims(4, k == 0 ? NULL : dims_x, k == 1 ? NULL : dims_w, NULL, k == 2 ? NULL : y);
        if (st != RUDNN_STATUS_BAD_PARAM ||
            !rt_message_names(rudnn_last_error(), "conv_output_dims", args[k], "NULL", NULL))
            rt_failf("output_dims(%s NULL): %s, \"%s\"", args[k], rudnn_status_string(st), rudnn_last_error());
    }
    finish();
}

static void channels_last_fn(void **state)
{
    (void)state;
    rudnn_tensor_t t;
    rudnn_status_t st;
    /* rank 3, 4, 5: memory [N, S..., C] */
    static const struct {
        int rank;
        int64_t dims[5], strides[5];
    } ok[] = {
        {3, {2, 3, 5}, {15, 1, 3}},
        {4, {2, 4, 5, 6}, {120, 1, 24, 4}},
        {5, {2, 3, 4, 5, 6}, {360, 1, 90, 18, 3}},
        {4, {1, 1, 1, 1}, {1, 1, 1, 1}},
    };
    for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++) {
        memset(&t, 0, sizeof t);
        st = rudnn_conv_channels_last(&t, F.t[T_X].buffer, 64, RUDNN_F16, ok[k].rank, ok[k].dims);
        int same = !st && t.rank == ok[k].rank && t.dtype == RUDNN_F16 && t.offset == 64 && t.buffer == F.t[T_X].buffer;
        for (int i = 0; same && i < ok[k].rank; i++)
            same = t.dims[i] == ok[k].dims[i] && t.strides[i] == ok[k].strides[i];
        if (!same)
            rt_failf("channels_last rank %d: %s; strides %lld %lld %lld %lld %lld", ok[k].rank, rudnn_status_string(st),
                      (long long)t.strides[0], (long long)t.strides[1], (long long)t.strides[2],
                      (long long)t.strides[3], (long long)t.strides[4]);
    }
    /* rejections: the descriptor untouched */
    const int64_t d2[2] = {2, 3}, d6[6] = {1, 2, 3, 4, 5, 6}, dneg[4] = {2, -1, 3, 3};
    struct {
        int rank;
        const int64_t *dims;
        rudnn_dtype_t dt;
        rudnn_status_t want;
        const char *n1;
    } bad[] = {
        {2, d2, RUDNN_F32, RUDNN_STATUS_BAD_SHAPE, "rank 2"},
        {6, d6, RUDNN_F32, RUDNN_STATUS_BAD_SHAPE, "rank 6"},
        {-1, d6, RUDNN_F32, RUDNN_STATUS_BAD_SHAPE, "rank -1"},
        {4, NULL, RUDNN_F32, RUDNN_STATUS_BAD_PARAM, "dims"},
        {4, dneg, RUDNN_F32, RUDNN_STATUS_BAD_SHAPE, "dims"},
        {4, dims_x, (rudnn_dtype_t)99, RUDNN_STATUS_BAD_DTYPE, "dtype"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        memset(&t, 0x3c, sizeof t);
        rudnn_tensor_t before = t;
        st = rudnn_conv_channels_last(&t, F.t[T_X].buffer, 0, bad[k].dt, bad[k].rank, bad[k].dims);
        if (st != bad[k].want || !rt_message_names(rudnn_last_error(), "conv_channels_last", bad[k].n1, NULL, NULL))
            rt_failf("channels_last case %zu: %s (expected %s), \"%s\" (expected %s)", k, rudnn_status_string(st),
                      rudnn_status_string(bad[k].want), rudnn_last_error(), bad[k].n1);
        if (memcmp(&t, &before, sizeof t) != 0)
            rt_failf("channels_last case %zu: rejected, wrote the descriptor", k);
    }
    st = rudnn_conv_channels_last(NULL, F.t[T_X].buffer, 0, RUDNN_F32, 4, dims_x);
    if (st != RUDNN_STATUS_BAD_PARAM ||
        !rt_message_names(rudnn_last_error(), "conv_channels_last", "tensor", "NULL", NULL))
        rt_failf("channels_last(NULL tensor): %s, \"%s\"", rudnn_status_string(st), rudnn_last_error());
    finish();
}

static void kernel_info(void **state)
{
    (void)state;
    int n = -1;
    rudnn_status_t st = rudnn_conv_kernel_count(NULL, &n);
    if (st != RUDNN_STATUS_BAD_PARAM ||
        !rt_message_names(rudnn_last_error(), "conv_kernel_count", "context", "NULL", NULL) ||
        n != -1)
        rt_failf("kernel_count(NULL context): %s \"%s\"", rudnn_status_string(st), rudnn_last_error());
    st = rudnn_conv_kernel_count(rt_ctx, NULL);
    if (st != RUDNN_STATUS_BAD_PARAM ||
        !rt_message_names(rudnn_last_error(), "conv_kernel_count", "count", "NULL", NULL))
        rt_failf("kernel_count(NULL count): %s \"%s\"", rudnn_status_string(st), rudnn_last_error());
    st = rudnn_conv_kernel_count(rt_ctx, &n);
    if (!have_kernels) {
        if (st != RUDNN_STATUS_NOT_SUPPORTED || !strstr(rudnn_last_error(), "conv_kernel_count"))
            rt_failf("kernel_count without kernels: %s \"%s\"", rudnn_status_string(st), rudnn_last_error());
        n = 0;
    } else if (st || n < 3) {
        rt_failf("kernel_count: %s, %d (a kernel per direction at least)", rudnn_status_string(st), n);
    }
    int direct[DIRS] = {0};
    for (int i = 0; have_kernels && i < n; i++) {
        const char *name = NULL;
        rudnn_conv_strategy_t s = (rudnn_conv_strategy_t)-9;
        rudnn_conv_direction_t d = (rudnn_conv_direction_t)-9;
        st = rudnn_conv_kernel_info(rt_ctx, i, &name, &s, &d);
        if (st || !name || strncmp(name, "convolution.", 12) != 0 ||
            (s != RUDNN_CONV_DIRECT && s != RUDNN_CONV_IMPLICIT_GEMM) || (unsigned)d >= DIRS)
            rt_failf("kernel_info(%d): %s, %s, strategy %d, direction %d", i, rudnn_status_string(st),
                      name ? name : "(null)", (int)s, (int)d);
        else if (s == RUDNN_CONV_DIRECT)
            direct[d]++;
        for (int j = 0; !st && j < i; j++) { /* names are unique */
            const char *other;
            rudnn_conv_strategy_t s2;
            rudnn_conv_direction_t d2;
            if (!rudnn_conv_kernel_info(rt_ctx, j, &other, &s2, &d2) && strcmp(other, name) == 0)
                rt_failf("kernel_info(%d) and (%d) are both %s", j, i, name);
        }
    }
    for (int d = 0; have_kernels && d < DIRS; d++)
        if (!direct[d])
            rt_failf("no Direct kernel for %s", dir_ops[d]);
    const int bad_index[] = {-1, n, n + 1, 1000, INT_MIN};
    for (int k = 0; k < 5; k++) {
        const char *name = "sentinel";
        rudnn_conv_strategy_t s = (rudnn_conv_strategy_t)-9;
        rudnn_conv_direction_t d = (rudnn_conv_direction_t)-9;
        st = rudnn_conv_kernel_info(rt_ctx, bad_index[k], &name, &s, &d);
        const rudnn_status_t want = have_kernels ? RUDNN_STATUS_OUT_OF_BOUNDS : RUDNN_STATUS_NOT_SUPPORTED;
        if (st != want ||
            !rt_message_names(rudnn_last_error(), "conv_kernel_info", have_kernels ? "index" : NULL, NULL, NULL))
            rt_failf("kernel_info(%d): %s \"%s\"", bad_index[k], rudnn_status_string(st), rudnn_last_error());
        if (strcmp(name, "sentinel") != 0 || (int)s != -9 || (int)d != -9)
            rt_failf("kernel_info(%d): rejected, wrote its results", bad_index[k]);
    }
    const char *name;
    rudnn_conv_strategy_t s;
    rudnn_conv_direction_t d;
    static const char *const which[4] = {"context", "name", "strategy", "direction"};
    for (int k = 0; k < 4; k++) {
        st = rudnn_conv_kernel_info(k == 0 ? NULL : rt_ctx, 0, k == 1 ? NULL : &name, k == 2 ? NULL : &s,
                                    k == 3 ? NULL : &d);
        if (st != RUDNN_STATUS_BAD_PARAM ||
            !rt_message_names(rudnn_last_error(), "conv_kernel_info", which[k], "NULL", NULL))
            rt_failf("kernel_info(%s NULL): %s \"%s\"", which[k], rudnn_status_string(st), rudnn_last_error());
    }
    finish();
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, rt_test_log_setup, rt_test_log_teardown)

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        T(options_init_defaults), T(valid_calls),   T(empty_batch),         T(resolve_reports),
        T(null_arguments),        T(ranks),         T(dtypes),              T(groups_and_channels),
        T(stride_padding_dilation), T(output_shapes), T(bias_shapes),       T(layouts),
        T(overlaps),              T(other_context), T(enums),               T(workspaces),
        T(queries_allocate_nothing), T(output_dims_fn), T(channels_last_fn), T(kernel_info),
    };
    rt_set_filters(argc, argv);
    rt_open_or_skip("convolution-contract");
    if (rt_group_setup_second(NULL))
        return 1;
    int n = 0;
    have_kernels = rudnn_conv_kernel_count(rt_ctx, &n) == RUDNN_STATUS_SUCCESS && n > 0;
    printf("convolution-contract: %s\n", have_kernels ? "the backend has convolution kernels"
                                                      : "no convolution kernels: NOT_SUPPORTED expected where one runs");
    group_setup(NULL);
    const int failed = cmocka_run_group_tests_name("convolution-contract", tests, NULL, group_teardown);
    return rt_exit_code(failed);
}
