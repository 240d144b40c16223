/* Contract tests of interpolation (include/rudnn/interpolation.h, ops/interpolation.c) on the default
 * backend. Every rejected call returns the status of its rule (BAD_PARAM for NULLs, the mode enum,
 * align_corners, scales and overlaps; BAD_SHAPE for ranks, dims and strides that describe no view;
 * BAD_DTYPE; DEVICE_MISMATCH for another context's tensor or queue; OUT_OF_BOUNDS for a view past
 * its buffer), a message that names the op ("interpolate_forward", "interpolate_backward"), the
 * argument and the rule, and writes nothing: every buffer of the fixture (the outputs holding a
 * sentinel) is read back byte for byte after the call. Each rule is checked on both ops.
 *
 * The fixture: one buffer a tensor (SLACK bytes after each), a 2D LINEAR upsampling:
 * x, dx F32 [2, 3, 5, 4]; y, dy F32 [2, 3, 9, 7]. Each test edits a copy of the descriptors; views
 * of other shapes (1D, 3D, identity sizes, strided) lie in the same buffers.
 * The success paths: every mode (align_corners 0 and 1 where allowed), F16 and BF16, 1D and 3D,
 * options NULL (NEAREST: any sizes), scales (entries past d ignored even when NaN; -0.0 is 0),
 * strided and channels-last views, O = 1 with align_corners, outputs right after an input in its
 * buffer, N = 0 and C = 0 (nothing written, dims up to RUDNN_INTERP_MAX_DIM) and
 * rudnn_interp_options_init. A backend without the family (CUDA and HIP in this release) answers a
 * valid call NOT_SUPPORTED naming the op and writes nothing: the success paths check that there
 * instead (after every rejection has been checked the same as anywhere).
 *
 * Usage: test_interpolation_contract [glob] */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/interpolation.h>

#include "common.h"
#include "contract_fixture.h"
#include "operand.h"

enum { T_X, T_Y, T_DY, T_DX, T_COUNT };
static const char *const names[T_COUNT] = {"x", "y", "dy", "dx"};

enum { FWD, BWD, DIRS };
static const char *const dir_ops[DIRS] = {"interpolate_forward", "interpolate_backward"};
#define B_FWD (1u << FWD)
#define B_BWD (1u << BWD)
#define B_ALL (B_FWD | B_BWD)

#define SLACK 2048
static const int64_t dims_x[4] = {2, 3, 5, 4}, dims_y[4] = {2, 3, 9, 7};

static contract_fixture_t F; /* the tensors' buffers (T_ order) guarded */
static int family_absent; /* the backend answers a valid call NOT_SUPPORTED */

/* ---- the fixture and the calls ------------------------------------------------------------- */

static void fill_inputs(void)
{
    rt_rng_t r;
    rt_rng_seed(&r, 31);
    rt_tensor_fill_uniform(&F.t[T_X], &r, -1.0, 1.0);
    rt_tensor_fill_uniform(&F.t[T_DY], &r, -1.0, 1.0);
}

static void group_setup(void)
{
    const int64_t *dims[T_COUNT] = {dims_x, dims_y, dims_y, dims_x};
    contract_fixture_setup(&F, T_COUNT, names, NULL, NULL, dims, SLACK, 0, fill_inputs);
}

static int group_teardown(void **state) { return contract_fixture_teardown(&F, state); }

typedef struct callspec {
    rudnn_queue_t queue;
    rudnn_tensor_t d[T_COUNT];
    int null_t[T_COUNT]; /* pass NULL for this tensor */
    rudnn_interp_options_t opts;
    int null_options;
} callspec_t;

static void spec_init(callspec_t *c)
{
    memset(c, 0, sizeof *c);
    c->queue = rt_queue;
    for (int i = 0; i < T_COUNT; i++)
        c->d[i] = F.t[i].t;
    rudnn_interp_options_init(&c->opts);
    c->opts.mode = RUDNN_INTERP_LINEAR;
}

/* Every descriptor to the shapes of another problem (each in its own fixture buffer). */
static void set_problem(callspec_t *c, int rank, const int64_t *x, const int64_t *y)
{
    rt_reshape(&c->d[T_X], rank, x), rt_reshape(&c->d[T_DX], rank, x);
    rt_reshape(&c->d[T_Y], rank, y), rt_reshape(&c->d[T_DY], rank, y);
}

static void set_dtype(callspec_t *c, rudnn_dtype_t dt)
{
    for (int i = 0; i < T_COUNT; i++)
        c->d[i].dtype = dt;
}

static const rudnn_tensor_t *tp(const callspec_t *c, int i) { return c->null_t[i] ? NULL : &c->d[i]; }

static rudnn_status_t call_op(const callspec_t *c, int dir)
{
    const rudnn_interp_options_t *o = c->null_options ? NULL : &c->opts;
    if (dir == FWD)
        return rudnn_interpolate_forward(c->queue, tp(c, T_X), o, tp(c, T_Y));
    return rudnn_interpolate_backward(c->queue, tp(c, T_DY), o, tp(c, T_DX));
}

static rudnn_status_t call_any(const void *c, int dir, size_t *bytes)
{
    (void)bytes;
    return call_op(c, dir);
}

static const contract_family_t family = {DIRS, dir_ops, call_any, NULL, 0, 0};

/* Every op of dirs: want, a message naming the op and the needles, no byte of any fixture buffer
 * written. */
static void expect_reject3(const callspec_t *c, unsigned dirs, rudnn_status_t want, const char *n1, const char *n2,
                           const char *n3, const char *what)
{
    contract_expect_reject(&F, &family, c, dirs, want, n1, n2, n3, what);
}

static void expect_reject(const callspec_t *c, unsigned dirs, rudnn_status_t want, const char *n1, const char *n2,
                          const char *what)
{
    expect_reject3(c, dirs, want, n1, n2, NULL, what);
}

static void repoison_outputs(void)
{
    rudnn_queue_synchronize(rt_queue);
    rt_tensor_poison(&F.t[T_Y]), rt_tensor_poison(&F.t[T_DX]);
}

/* Counts the elements of the view t (any strides) still holding the sentinel of its dtype in
 * snapshot, a copy of its whole buffer. */
static int64_t poisoned_in_view(const rudnn_tensor_t *t, const uint8_t *snapshot)
{
    const int64_t n = rudnn_tensor_numel(t);
    int64_t left = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t rem = k, at = 0;
        for (int i = t->rank - 1; i >= 0; i--) {
            at += (rem % t->dims[i]) * t->strides[i];
            rem /= t->dims[i];
        }
        left += rt_element_bits(t->dtype, snapshot + t->offset, (size_t)at) == rt_poison_bits(t->dtype);
    }
    return left;
}

/* The buffer of dir's output in c, or NULL. */
static rudnn_buffer_t out_buffer(const callspec_t *c, int dir)
{
    const int o = dir == FWD ? T_Y : T_DX;
    return c->null_t[o] ? NULL : c->d[o].buffer;
}

/* c is valid for every op of dirs: SUCCESS, rudnn_last_error() "", only the op's output's buffer
 * written, and (check_written) every element of the output written. On a backend without the
 * family: NOT_SUPPORTED naming the op and the family, nothing written. */
static void expect_valid_in(const callspec_t *c, unsigned dirs, int check_written, const char *what)
{
    for (int dir = 0; dir < DIRS; dir++) {
        if (!((dirs >> dir) & 1))
            continue;
        rt_guard_begin(&F.guard);
        const rudnn_status_t st = call_op(c, dir);
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", rudnn_last_error());
        if (family_absent) {
            if (st != RUDNN_STATUS_NOT_SUPPORTED || !rt_message_names(msg, dir_ops[dir], "interpolation", NULL, NULL))
                rt_failf("%s [%s]: without the family returned %s (\"%s\"), expected NOT_SUPPORTED naming the op "
                          "and the family", what, dir_ops[dir], rudnn_status_string(st), msg);
        } else if (st) {
            rt_failf("%s [%s]: returned %s (\"%s\")", what, dir_ops[dir], rudnn_status_string(st), msg);
        } else if (msg[0]) {
            rt_failf("%s [%s]: success left the message \"%s\"", what, dir_ops[dir], msg);
        }
        if (rudnn_queue_synchronize(rt_queue))
            rt_failf("%s [%s]: the queue's work failed: %s", what, dir_ops[dir], rudnn_last_error());
        rt_guard_changed(&F.guard);
        const rudnn_buffer_t ob = st ? NULL : out_buffer(c, dir);
        for (int i = 0; i < F.guard.count; i++)
            if (F.guard.items[i].changed && F.guard.items[i].buffer != ob)
                rt_failf("%s [%s]: %s call wrote to %s's buffer, which holds no output of it", what, dir_ops[dir],
                          st ? "a failed" : "an accepted", F.guard.items[i].name);
        if (!st && check_written) {
            const rudnn_tensor_t *out = tp(c, dir == FWD ? T_Y : T_DX);
            size_t bytes = 0;
            for (int i = 0; i < T_COUNT; i++)
                if (F.t[i].buffer == out->buffer)
                    bytes = F.t[i].buffer_bytes;
            uint8_t *snap = rt_buffer_snapshot(out->buffer, bytes);
            const int64_t left = poisoned_in_view(out, snap);
            if (left)
                rt_failf("%s [%s]: %lld elements of %s not written", what, dir_ops[dir], (long long)left,
                          dir == FWD ? "y" : "dx");
            free(snap);
        }
        repoison_outputs();
        if (rt_guard_changed(&F.guard)) /* an input's buffer was written: refill it */
            contract_fixture_restore(&F);
    }
}

static void expect_valid(const callspec_t *c, const char *what) { expect_valid_in(c, B_ALL, 1, what); }

/* ---- the success paths --------------------------------------------------------------------------- */

static void options_init_defaults(void **state)
{
    (void)state;
    rudnn_interp_options_t o;
    memset(&o, 0x7b, sizeof o);
    rudnn_interp_options_init(&o);
    if (o.mode != RUDNN_INTERP_NEAREST)
        rt_failf("options_init: mode %d, expected RUDNN_INTERP_NEAREST", (int)o.mode);
    if (o.align_corners != 0)
        rt_failf("options_init: align_corners %d, expected 0", o.align_corners);
    for (int i = 0; i < RUDNN_INTERP_MAX_SPATIAL; i++)
        if (o.scales[i] != 0.0 || signbit(o.scales[i]))
            rt_failf("options_init: scales[%d] = %g, expected 0 (from the sizes)", i, o.scales[i]);
    rudnn_interp_options_init(NULL); /* must not crash */
}

static const char *const mode_names[4] = {"NEAREST", "NEAREST_EXACT", "LINEAR", "CUBIC"};

static void valid_calls(void **state)
{
    (void)state;
    callspec_t c;
    char what[96];
    /* every mode, align_corners where allowed, each float dtype */
    const rudnn_dtype_t dts[3] = {RUDNN_F32, RUDNN_F16, RUDNN_BF16};
    for (int k = 0; k < 3; k++)
        for (int m = 0; m < 4; m++)
            for (int ac = 0; ac <= (m >= RUDNN_INTERP_LINEAR); ac++) {
                spec_init(&c), set_dtype(&c, dts[k]), c.opts.mode = (rudnn_interp_mode_t)m, c.opts.align_corners = ac;
                snprintf(what, sizeof what, "the fixture, %s, %s, align_corners %d", rudnn_dtype_name(dts[k]),
                         mode_names[m], ac);
                expect_valid(&c, what);
            }
    /* options NULL: NEAREST, any sizes (up and down) */
    spec_init(&c), c.null_options = 1;
    expect_valid(&c, "options NULL (upsampling)");
    spec_init(&c), set_problem(&c, 4, dims_y, dims_x), c.null_options = 1;
    expect_valid(&c, "options NULL (downsampling)");
    /* scales: explicit, not matching the sizes, entries past d NaN (ignored), -0.0 (= 0), huge and tiny */
    const double sc[][3] = {{1.8, 1.75, NAN}, {1.7, 0.0, -1.0}, {-0.0, 2.0, INFINITY}, {DBL_MAX, 1e-30, NAN},
                            {0.25, 100.0, -INFINITY}};
    for (size_t k = 0; k < sizeof sc / sizeof sc[0]; k++)
        for (int m = 0; m < 4; m++) {
            spec_init(&c), c.opts.mode = (rudnn_interp_mode_t)m;
            memcpy(c.opts.scales, sc[k], sizeof c.opts.scales);
            snprintf(what, sizeof what, "scales {%g, %g, %g}, %s", sc[k][0], sc[k][1], sc[k][2], mode_names[m]);
            expect_valid(&c, what);
        }
    /* scales with align_corners: unused, but still checked (below); valid ones are fine */
    spec_init(&c), c.opts.align_corners = 1, c.opts.scales[0] = 3.0, c.opts.scales[1] = 0.1;
    expect_valid(&c, "align_corners with scales");
    /* 1D: x [2, 3, 7] -> y [2, 3, 12]; entries 1 and 2 of scales ignored */
    {
        const int64_t x[3] = {2, 3, 7}, y[3] = {2, 3, 12};
        for (int m = 0; m < 4; m++) {
            spec_init(&c), set_problem(&c, 3, x, y), c.opts.mode = (rudnn_interp_mode_t)m;
            c.opts.scales[1] = -5.0, c.opts.scales[2] = NAN;
            snprintf(what, sizeof what, "1D, %s", mode_names[m]);
            expect_valid(&c, what);
        }
    }
    /* 3D: x [1, 2, 3, 4, 2] -> y [1, 2, 5, 2, 7] */
    {
        const int64_t x[5] = {1, 2, 3, 4, 2}, y[5] = {1, 2, 5, 2, 7};
        for (int m = 0; m < 4; m++)
            for (int ac = 0; ac <= (m >= RUDNN_INTERP_LINEAR); ac++) {
                spec_init(&c), set_problem(&c, 5, x, y), c.opts.mode = (rudnn_interp_mode_t)m;
                c.opts.align_corners = ac, c.opts.scales[2] = 3.5;
                snprintf(what, sizeof what, "3D, %s, align_corners %d", mode_names[m], ac);
                expect_valid(&c, what);
            }
    }
    /* sizes of 1: O = 1 with align_corners, S = 1 */
    {
        const int64_t x[4] = {2, 3, 5, 1}, y[4] = {2, 3, 1, 6};
        for (int m = 0; m < 4; m++)
            for (int ac = 0; ac <= (m >= RUDNN_INTERP_LINEAR); ac++) {
                spec_init(&c), set_problem(&c, 4, x, y), c.opts.mode = (rudnn_interp_mode_t)m, c.opts.align_corners = ac;
                snprintf(what, sizeof what, "O 1 and S 1, %s, align_corners %d", mode_names[m], ac);
                expect_valid(&c, what);
            }
    }
    /* strided views: x and dx with padded rows, y and dy channels-last ([N, H, W, C] memory) */
    spec_init(&c);
    c.d[T_X].strides[2] = 6, c.d[T_X].strides[1] = 32, c.d[T_X].strides[0] = 100;
    c.d[T_DX].strides[2] = 6, c.d[T_DX].strides[1] = 32, c.d[T_DX].strides[0] = 100;
    for (int k = T_Y; k <= T_DY; k++) {
        rudnn_tensor_t *t = &c.d[k];
        t->strides[1] = 1, t->strides[3] = 3, t->strides[2] = 21, t->strides[0] = 189;
    }
    for (int m = 0; m < 4; m++) {
        c.opts.mode = (rudnn_interp_mode_t)m;
        snprintf(what, sizeof what, "padded x and dx, channels-last y and dy, %s", mode_names[m]);
        expect_valid(&c, what);
    }
    /* outputs right after an input in its buffer, touching no byte of it */
    spec_init(&c), c.d[T_Y].buffer = F.t[T_X].buffer, c.d[T_Y].offset = 120 * 4;
    expect_valid_in(&c, B_FWD, 1, "y right after x in its buffer");
    spec_init(&c), c.d[T_DX].buffer = F.t[T_DY].buffer, c.d[T_DX].offset = 378 * 4;
    expect_valid_in(&c, B_BWD, 1, "dx right after dy in its buffer");
    /* ... and right before it */
    spec_init(&c), c.d[T_Y].buffer = F.t[T_X].buffer, c.d[T_Y].offset = 0, c.d[T_X].offset = 378 * 4;
    expect_valid_in(&c, B_FWD, 1, "y right before x in its buffer");
    /* a valid call right after a rejected one leaves no message */
    spec_init(&c), c.queue = NULL;
    (void)call_op(&c, FWD);
    spec_init(&c);
    expect_valid_in(&c, B_FWD, 0, "valid after rejected");
}

/* N = 0 or C = 0: success, nothing written; with dims up to RUDNN_INTERP_MAX_DIM (empty views need
 * no memory). */
static void empty_batch(void **state)
{
    (void)state;
    const int64_t big = RUDNN_INTERP_MAX_DIM;
    const int64_t xn[4] = {0, 3, 5, 4}, yn[4] = {0, 3, 9, 7}, xc[4] = {2, 0, 5, 4}, yc[4] = {2, 0, 9, 7};
    const int64_t xb[4] = {0, 3, big, 4}, yb[4] = {0, 3, 9, big}, xbn[4] = {big, 0, 5, 4}, ybn[4] = {big, 0, 9, 7};
    const int64_t *xs[4] = {xn, xc, xb, xbn}, *ys[4] = {yn, yc, yb, ybn};
    const char *label[4] = {"N = 0", "C = 0", "N = 0, S and O of 2^31", "N = 2^31, C = 0"};
    for (int k = 0; k < 4; k++)
        for (int m = 0; m < 4; m++)
            for (int ac = 0; ac <= (m >= RUDNN_INTERP_LINEAR); ac++) {
                callspec_t c;
                spec_init(&c), set_problem(&c, 4, xs[k], ys[k]), c.opts.mode = (rudnn_interp_mode_t)m;
                c.opts.align_corners = ac;
                for (int dir = 0; dir < DIRS; dir++) {
                    rt_guard_begin(&F.guard);
                    const rudnn_status_t st = call_op(&c, dir);
                    const int ok = family_absent ? st == RUDNN_STATUS_NOT_SUPPORTED || st == RUDNN_STATUS_SUCCESS
                                                 : st == RUDNN_STATUS_SUCCESS;
                    if (!ok)
                        rt_failf("%s, %s, align_corners %d [%s]: %s (\"%s\")", label[k], mode_names[m], ac,
                                  dir_ops[dir], rudnn_status_string(st), rudnn_last_error());
                    if (rt_guard_changed(&F.guard)) {
                        rt_failf("%s, %s [%s]: a buffer was written", label[k], mode_names[m], dir_ops[dir]);
                        contract_fixture_restore(&F);
                    }
                }
            }
}

/* ---- the rejections ------------------------------------------------------------------------------ */

static void null_arguments(void **state)
{
    (void)state;
    callspec_t c;
    for (int m = 0; m < 4; m++) {
        spec_init(&c), c.queue = NULL, c.opts.mode = (rudnn_interp_mode_t)m;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "queue", "NULL", "queue NULL");
    }
    spec_init(&c), c.queue = NULL, c.null_options = 1;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "queue", "NULL", "queue NULL, options NULL");
    spec_init(&c), c.null_t[T_X] = 1;
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_PARAM, "x is NULL", NULL, "x NULL");
    spec_init(&c), c.null_t[T_Y] = 1;
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_PARAM, "y is NULL", NULL, "y NULL");
    spec_init(&c), c.null_t[T_DY] = 1;
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_PARAM, "dy is NULL", NULL, "dy NULL");
    spec_init(&c), c.null_t[T_DX] = 1;
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_PARAM, "dx is NULL", NULL, "dx NULL");
    spec_init(&c), c.null_t[T_X] = c.null_t[T_Y] = c.null_t[T_DY] = c.null_t[T_DX] = 1, c.null_options = 1;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "is NULL", NULL, "everything NULL");
    /* a tensor without a buffer */
    for (int i = 0; i < T_COUNT; i++) {
        spec_init(&c), c.d[i].buffer = NULL;
        char n1[32];
        snprintf(n1, sizeof n1, "%s has no buffer", names[i]);
        expect_reject(&c, i == T_X || i == T_Y ? B_FWD : B_BWD, RUDNN_STATUS_BAD_PARAM, n1, NULL, "no buffer");
    }
}

static void ranks(void **state)
{
    (void)state;
    callspec_t c;
    /* rank 2 and 6, every tensor alike */
    const int64_t x2[2] = {2, 3}, x6[6] = {2, 3, 5, 4, 1, 1}, y6[6] = {2, 3, 9, 7, 1, 1};
    spec_init(&c), set_problem(&c, 2, x2, x2);
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "x has rank 2", "3, 4 or 5", "rank 2");
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dx has rank 2", "3, 4 or 5", "rank 2");
    spec_init(&c), set_problem(&c, 6, x6, y6);
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "x has rank 6", "3, 4 or 5", "rank 6");
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dx has rank 6", "3, 4 or 5", "rank 6");
    c.null_options = 1;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "has rank 6", "3, 4 or 5", "rank 6, options NULL");
    /* rank 0 and 1 */
    const int64_t one[1] = {5};
    spec_init(&c), set_problem(&c, 1, one, one);
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "x has rank 1", "3, 4 or 5", "rank 1");
    spec_init(&c), set_problem(&c, 0, one, one);
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dx has rank 0", "3, 4 or 5", "rank 0");
    /* a rank no descriptor has */
    spec_init(&c), c.d[T_X].rank = 9, c.d[T_DX].rank = -1;
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "x has rank 9", NULL, "rank 9");
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dx has rank -1", NULL, "rank -1");
    spec_init(&c), c.d[T_Y].rank = 9, c.d[T_DY].rank = 9;
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "y has rank 9", NULL, "y rank 9");
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dy has rank 9", NULL, "dy rank 9");
    /* ranks that disagree: y (dy) against x (dx), both ways */
    const int64_t y5[5] = {2, 3, 9, 7, 1}, y3[3] = {2, 3, 9}, x5[5] = {2, 3, 5, 4, 1};
    spec_init(&c), rt_reshape(&c.d[T_Y], 5, y5), rt_reshape(&c.d[T_DY], 5, y5);
    expect_reject3(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "y has rank 5", "x rank 4", "the same", "y rank 5");
    expect_reject3(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dy has rank 5", "dx rank 4", "the same", "dy rank 5");
    spec_init(&c), rt_reshape(&c.d[T_Y], 3, y3), rt_reshape(&c.d[T_DY], 3, y3);
    expect_reject3(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "y has rank 3", "x rank 4", "the same", "y rank 3");
    expect_reject3(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dy has rank 3", "dx rank 4", "the same", "dy rank 3");
    spec_init(&c), rt_reshape(&c.d[T_X], 5, x5), rt_reshape(&c.d[T_DX], 5, x5);
    expect_reject3(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "y has rank 4", "x rank 5", "the same", "x rank 5");
    expect_reject3(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dy has rank 4", "dx rank 5", "the same", "dx rank 5");
    /* a 2D y for a 1D x (the rank decides d) */
    const int64_t x3[3] = {2, 3, 5};
    spec_init(&c), rt_reshape(&c.d[T_X], 3, x3), rt_reshape(&c.d[T_DX], 3, x3);
    expect_reject3(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "y has rank 4", "x rank 3", "the same", "x 1D, y 2D");
}

static void dims_rules(void **state)
{
    (void)state;
    callspec_t c;
    /* N and C of y (dy) must be x's (dx's) */
    static const struct {
        int dim;
        int64_t value;
        const char *fwd, *bwd, *what;
    } nc[] = {
        {0, 1, "y dims[0] = 1, expected 2", "dy dims[0] = 1, expected 2", "N"},
        {0, 3, "y dims[0] = 3, expected 2", "dy dims[0] = 3, expected 2", "N"},
        {1, 2, "y dims[1] = 2, expected 3", "dy dims[1] = 2, expected 3", "C"},
        {1, 4, "y dims[1] = 4, expected 3", "dy dims[1] = 4, expected 3", "C"},
        {0, 0, "y dims[0] = 0, expected 2", "dy dims[0] = 0, expected 2", "N"},
        {1, 0, "y dims[1] = 0, expected 3", "dy dims[1] = 0, expected 3", "C"},
    };
    for (size_t k = 0; k < sizeof nc / sizeof nc[0]; k++)
        for (int m = 0; m < 4; m++) {
            int64_t y[4];
            memcpy(y, dims_y, sizeof y);
            y[nc[k].dim] = nc[k].value;
            callspec_t s;
            spec_init(&s), rt_reshape(&s.d[T_Y], 4, y), rt_reshape(&s.d[T_DY], 4, y),
                s.opts.mode = (rudnn_interp_mode_t)m;
            char what[64];
            snprintf(what, sizeof what, "y %s mismatched (%lld), mode %d", nc[k].what, (long long)nc[k].value, m);
            expect_reject3(&s, B_FWD, RUDNN_STATUS_BAD_SHAPE, nc[k].fwd, nc[k].what, "x's", what);
            expect_reject3(&s, B_BWD, RUDNN_STATUS_BAD_SHAPE, nc[k].bwd, nc[k].what, "dx's", what);
        }
    /* x's N or C 0 against y's nonzero ones */
    {
        const int64_t x0[4] = {0, 3, 5, 4};
        spec_init(&c), rt_reshape(&c.d[T_X], 4, x0), rt_reshape(&c.d[T_DX], 4, x0);
        expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "y dims[0] = 2", "expected 0", "x N 0, y N 2");
        expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dy dims[0] = 2", "expected 0", "dx N 0, dy N 2");
    }
    /* spatial sizes of 0 (in x, in y; with N = 0 too: the rule is the dims', not the memory's) */
    static const struct {
        int which, dim; /* which: 0 x/dx, 1 y/dy */
        int64_t n;
    } zero[] = {{0, 2, 2}, {0, 3, 2}, {1, 2, 2}, {1, 3, 2}, {0, 2, 0}, {1, 3, 0}};
    for (size_t k = 0; k < sizeof zero / sizeof zero[0]; k++) {
        int64_t x[4], y[4];
        memcpy(x, dims_x, sizeof x), memcpy(y, dims_y, sizeof y);
        x[0] = y[0] = zero[k].n;
        (zero[k].which ? y : x)[zero[k].dim] = 0;
        spec_init(&c), set_problem(&c, 4, x, y);
        char fn[48], bn[48], what[64];
        snprintf(fn, sizeof fn, "%s dims[%d] = 0", zero[k].which ? "y" : "x", zero[k].dim);
        snprintf(bn, sizeof bn, "%s dims[%d] = 0", zero[k].which ? "dy" : "dx", zero[k].dim);
        snprintf(what, sizeof what, "spatial size 0 (%s dims[%d], N %lld)", zero[k].which ? "y" : "x", zero[k].dim,
                 (long long)zero[k].n);
        expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, fn, "expected 1..", what);
        expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, bn, "expected 1..", what);
        c.null_options = 1;
        expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, fn, "expected 1..", what);
    }
    /* past RUDNN_INTERP_MAX_DIM (empty views: N or C 0, so no memory stands in the way) */
    const int64_t over = RUDNN_INTERP_MAX_DIM + 1;
    {
        const int64_t x[4] = {0, 3, over, 4}, y[4] = {0, 3, 9, 7};
        spec_init(&c), set_problem(&c, 4, x, y);
        expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "x dims[2] = 2147483649", "2147483648", "S past the limit");
        expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dx dims[2] = 2147483649", "2147483648", "S past the limit");
    }
    {
        const int64_t x[4] = {0, 3, 5, 4}, y[4] = {0, 3, 9, over};
        spec_init(&c), set_problem(&c, 4, x, y);
        expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "y dims[3] = 2147483649", "2147483648", "O past the limit");
        expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dy dims[3] = 2147483649", "2147483648", "O past the limit");
    }
    {
        const int64_t x[4] = {over, 0, 5, 4}, y[4] = {over, 0, 9, 7};
        spec_init(&c), set_problem(&c, 4, x, y);
        expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "x dims[0] = 2147483649", "2147483648", "N past the limit");
        expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dx dims[0] = 2147483649", "2147483648", "N past the limit");
    }
    {
        const int64_t x[4] = {0, over, 5, 4}, y[4] = {0, over, 9, 7};
        spec_init(&c), set_problem(&c, 4, x, y);
        expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "x dims[1] = 2147483649", "2147483648", "C past the limit");
        expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dx dims[1] = 2147483649", "2147483648", "C past the limit");
    }
    /* negative dims */
    const int64_t neg[4] = {2, 3, -5, 4}, negn[4] = {-2, 3, 5, 4};
    spec_init(&c), rt_reshape(&c.d[T_X], 4, neg), rt_reshape(&c.d[T_DX], 4, neg);
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "x has negative dims[2]", NULL, "S -5");
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dx has negative dims[2]", NULL, "S -5");
    spec_init(&c), rt_reshape(&c.d[T_Y], 4, negn), rt_reshape(&c.d[T_DY], 4, negn);
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "y has negative dims[0]", NULL, "N -2");
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dy has negative dims[0]", NULL, "N -2");
}

static void dtypes(void **state)
{
    (void)state;
    callspec_t c;
    /* non-float dtypes, every tensor alike */
    const rudnn_dtype_t bad[] = {RUDNN_I8, RUDNN_I32, RUDNN_U32, RUDNN_I64, RUDNN_BOOL, RUDNN_I4};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        spec_init(&c), set_dtype(&c, bad[k]);
        char what[64], n1[48], n2[48];
        snprintf(what, sizeof what, "x, y, dy, dx %s", rudnn_dtype_name(bad[k]));
        snprintf(n1, sizeof n1, "dtype %s", rudnn_dtype_name(bad[k]));
        snprintf(n2, sizeof n2, "dx has");
        expect_reject3(&c, B_FWD, RUDNN_STATUS_BAD_DTYPE, "x has", n1, "expected f32, f16 or bf16", what);
        expect_reject3(&c, B_BWD, RUDNN_STATUS_BAD_DTYPE, n2, n1, "expected f32, f16 or bf16", what);
    }
    /* not a dtype at all */
    spec_init(&c), c.d[T_Y].dtype = (rudnn_dtype_t)99, c.d[T_DX].dtype = (rudnn_dtype_t)-1;
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_DTYPE, "y has dtype 99", "not a rudnn dtype", "y dtype 99");
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_DTYPE, "dx has dtype -1", "not a rudnn dtype", "dx dtype -1");
    spec_init(&c), c.d[T_X].dtype = RUDNN_DTYPE_COUNT, c.d[T_DY].dtype = RUDNN_DTYPE_COUNT;
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_DTYPE, "x has dtype 9", "not a rudnn dtype", "x dtype COUNT");
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_DTYPE, "dy has dtype 9", "not a rudnn dtype", "dy dtype COUNT");
    /* one float dtype: the output (or dy) another float dtype, or an integer one */
    static const struct {
        int tensor;
        unsigned dirs;
        rudnn_dtype_t dt;
        const char *n1, *n2, *n3;
    } one[] = {
        {T_Y, B_FWD, RUDNN_F16, "y is f16", "expected f32", "x's dtype"},
        {T_Y, B_FWD, RUDNN_BF16, "y is bf16", "expected f32", "x's dtype"},
        {T_Y, B_FWD, RUDNN_I32, "y is i32", "expected f32", "x's dtype"},
        {T_DY, B_BWD, RUDNN_F16, "dy is f16", "expected f32", "dx's dtype"},
        {T_DY, B_BWD, RUDNN_BF16, "dy is bf16", "expected f32", "dx's dtype"},
        {T_DY, B_BWD, RUDNN_U32, "dy is u32", "expected f32", "dx's dtype"},
        /* the data tensor of another dtype than its partner: the partner is named against it */
        {T_X, B_FWD, RUDNN_F16, "y is f32", "expected f16", "x's dtype"},
        {T_DX, B_BWD, RUDNN_BF16, "dy is f32", "expected bf16", "dx's dtype"},
        /* the data tensor not float */
        {T_X, B_FWD, RUDNN_I64, "x has non-float dtype i64", "expected f32, f16 or bf16", NULL},
        {T_DX, B_BWD, RUDNN_I8, "dx has quantized dtype i8", "expected f32, f16 or bf16", NULL},
    };
    for (size_t k = 0; k < sizeof one / sizeof one[0]; k++) {
        spec_init(&c), c.d[one[k].tensor].dtype = one[k].dt;
        char what[64];
        snprintf(what, sizeof what, "%s %s among f32", names[one[k].tensor], rudnn_dtype_name(one[k].dt));
        expect_reject3(&c, one[k].dirs, RUDNN_STATUS_BAD_DTYPE, one[k].n1, one[k].n2, one[k].n3, what);
    }
    /* every float dtype pair that differs, both directions */
    const rudnn_dtype_t fl[3] = {RUDNN_F32, RUDNN_F16, RUDNN_BF16};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            if (a == b)
                continue;
            spec_init(&c), set_dtype(&c, fl[a]), c.d[T_Y].dtype = fl[b], c.d[T_DY].dtype = fl[b];
            char what[64], n1[32], n2[32], n3[32];
            snprintf(what, sizeof what, "x, dx %s; y, dy %s", rudnn_dtype_name(fl[a]), rudnn_dtype_name(fl[b]));
            snprintf(n1, sizeof n1, "is %s", rudnn_dtype_name(fl[b]));
            snprintf(n2, sizeof n2, "expected %s", rudnn_dtype_name(fl[a]));
            expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_DTYPE, n1, n2, NULL, what);
            snprintf(n3, sizeof n3, "y is %s", rudnn_dtype_name(fl[b]));
            expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_DTYPE, n3, "x's dtype", what);
        }
}

static void modes_and_options(void **state)
{
    (void)state;
    callspec_t c;
    /* the mode enum */
    const int bad_mode[] = {-1, 4, 1000, INT_MIN, INT_MAX};
    for (int k = 0; k < 5; k++)
        for (int ac = 0; ac < 2; ac++) {
            spec_init(&c), c.opts.mode = (rudnn_interp_mode_t)bad_mode[k], c.opts.align_corners = ac;
            char what[64], n1[48];
            snprintf(what, sizeof what, "mode %d, align_corners %d", bad_mode[k], ac);
            snprintf(n1, sizeof n1, "options.mode = %d", bad_mode[k]);
            expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, n1, "_CUBIC (3)", what);
        }
    /* align_corners not 0 or 1, in every mode */
    const int bad_ac[] = {2, -1, INT_MAX, INT_MIN};
    for (int k = 0; k < 4; k++)
        for (int m = 0; m < 4; m++) {
            spec_init(&c), c.opts.mode = (rudnn_interp_mode_t)m, c.opts.align_corners = bad_ac[k];
            char what[64], n1[48];
            snprintf(what, sizeof what, "align_corners %d, mode %d", bad_ac[k], m);
            snprintf(n1, sizeof n1, "options.align_corners = %d", bad_ac[k]);
            expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, n1, "0 or 1", what);
        }
    /* align_corners 1 with a nearest mode */
    for (int m = 0; m < 2; m++) {
        spec_init(&c), c.opts.mode = (rudnn_interp_mode_t)m, c.opts.align_corners = 1;
        expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "options.align_corners = 1", "nearest", "LINEAR and CUBIC",
                       m ? "align_corners with NEAREST_EXACT" : "align_corners with NEAREST");
        const int64_t x3[3] = {2, 3, 5}, y3[3] = {2, 3, 5}; /* identity sizes do not make it valid */
        set_problem(&c, 3, x3, y3);
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "options.align_corners = 1", "nearest",
                      "align_corners with a nearest mode, 1D identity");
    }
    /* scales: not finite, or negative, in an entry < d; every mode */
    static const struct {
        int dim;
        double value;
        const char *n1;
    } bad[] = {
        {0, NAN, "options.scales[0] = "},      {1, NAN, "options.scales[1] = "},
        {0, INFINITY, "options.scales[0] = inf"}, {1, -INFINITY, "options.scales[1] = -inf"},
        {0, -1.0, "options.scales[0] = -1"},   {1, -0.5, "options.scales[1] = -0.5"},
        {0, -1e-300, "options.scales[0] = -1e-300"}, {1, -DBL_MAX, "options.scales[1] = "},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        for (int m = 0; m < 4; m++) {
            spec_init(&c), c.opts.mode = (rudnn_interp_mode_t)m;
            c.opts.scales[bad[k].dim] = bad[k].value;
            char what[80];
            snprintf(what, sizeof what, "scales[%d] = %g, mode %d", bad[k].dim, bad[k].value, m);
            expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, bad[k].n1, "finite", "> 0", what);
        }
    /* scales are checked with align_corners too (unused there, but still an argument) */
    spec_init(&c), c.opts.align_corners = 1, c.opts.scales[1] = NAN;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "options.scales[1] = ", "finite", "NaN scale with align_corners");
    /* the third entry counts for 3D */
    {
        const int64_t x[5] = {1, 2, 3, 4, 2}, y[5] = {1, 2, 5, 2, 7};
        spec_init(&c), set_problem(&c, 5, x, y), c.opts.scales[2] = -2.0;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "options.scales[2] = -2", "finite", "3D scales[2] = -2");
        c.opts.scales[2] = 0.0;
        expect_valid(&c, "3D scales[2] = 0");
    }
    /* the second entry is past d for 1D: ignored */
    {
        const int64_t x[3] = {2, 3, 5}, y[3] = {2, 3, 8};
        spec_init(&c), set_problem(&c, 3, x, y), c.opts.scales[1] = -3.0, c.opts.scales[2] = NAN;
        expect_valid(&c, "1D, scales[1] = -3, scales[2] = NaN (ignored)");
        c.opts.scales[0] = NAN;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "options.scales[0] = ", "finite", "1D scales[0] NaN");
    }
}

static void overlaps(void **state)
{
    (void)state;
    callspec_t c;
    /* partial: the output a few bytes into the input's span */
    static const struct {
        int out, in;
        unsigned dirs;
        size_t offset;
    } part[] = {
        {T_Y, T_X, B_FWD, 4}, {T_Y, T_X, B_FWD, 0}, {T_Y, T_X, B_FWD, 476},
        {T_DX, T_DY, B_BWD, 4}, {T_DX, T_DY, B_BWD, 0}, {T_DX, T_DY, B_BWD, 1508},
    };
    for (size_t k = 0; k < sizeof part / sizeof part[0]; k++)
        for (int m = 0; m < 4; m++) {
            spec_init(&c), c.opts.mode = (rudnn_interp_mode_t)m;
            c.d[part[k].out].buffer = F.t[part[k].in].buffer;
            c.d[part[k].out].offset = part[k].offset;
            char what[80];
            snprintf(what, sizeof what, "%s at byte %zu of %s's buffer, mode %d", names[part[k].out], part[k].offset,
                     names[part[k].in], m);
            expect_reject3(&c, part[k].dirs, RUDNN_STATUS_BAD_PARAM, names[part[k].out], names[part[k].in],
                           "overlaps", what);
        }
    /* the input's span starting inside the output's */
    spec_init(&c), c.d[T_Y].buffer = F.t[T_X].buffer, c.d[T_Y].offset = 0, c.d[T_X].offset = 1000;
    expect_reject3(&c, B_FWD, RUDNN_STATUS_BAD_PARAM, "y overlaps x", "disjoint", NULL, "x inside y's span");
    /* exactly in place (identity sizes) */
    spec_init(&c), set_problem(&c, 4, dims_x, dims_x), c.null_options = 1;
    expect_valid(&c, "the identity problem out of place");
    c.d[T_Y] = c.d[T_X];
    expect_reject3(&c, B_FWD, RUDNN_STATUS_BAD_PARAM, "y overlaps x", "disjoint", NULL, "y exactly on x");
    spec_init(&c), set_problem(&c, 4, dims_x, dims_x), c.d[T_DX] = c.d[T_DY];
    expect_reject3(&c, B_BWD, RUDNN_STATUS_BAD_PARAM, "dx overlaps dy", "disjoint", NULL, "dx exactly on dy");
    /* interleaved: no element shared, but the byte spans cross (the rule is the spans') */
    {
        callspec_t s;
        spec_init(&s), set_problem(&s, 4, dims_x, dims_x);
        for (int i = T_X; i < T_COUNT; i++) {
            rudnn_tensor_t *t = &s.d[i];
            t->strides[3] = 2, t->strides[2] = 8, t->strides[1] = 40, t->strides[0] = 120;
        }
        expect_valid(&s, "W stride 2 views, each in its own buffer");
        s.d[T_Y].buffer = F.t[T_X].buffer, s.d[T_Y].offset = 4;
        s.d[T_DX].buffer = F.t[T_DY].buffer, s.d[T_DX].offset = 4;
        expect_reject3(&s, B_FWD, RUDNN_STATUS_BAD_PARAM, "y overlaps x", NULL, NULL, "y interleaved with x");
        expect_reject3(&s, B_BWD, RUDNN_STATUS_BAD_PARAM, "dx overlaps dy", NULL, NULL, "dx interleaved with dy");
    }
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
    } each[] = {{T_X, B_FWD}, {T_Y, B_FWD}, {T_DY, B_BWD}, {T_DX, B_BWD}};
    for (size_t k = 0; k < sizeof each / sizeof each[0]; k++) {
        const int i = each[k].tensor;
        rt_binding_t saved = rt_bind(rt_ctx2, rt_queue2);
        rt_tensor_t o;
        rt_tensor_create(&o, F.t[i].t.dtype, F.t[i].t.rank, F.t[i].t.dims, 0, 0);
        rt_unbind(saved);
        callspec_t c;
        for (int m = 0; m < 4; m++) {
            spec_init(&c), c.d[i] = o.t, c.opts.mode = (rudnn_interp_mode_t)m;
            expect_reject(&c, each[k].dirs, RUDNN_STATUS_DEVICE_MISMATCH, names[i], "another context", "other context");
        }
        saved = rt_bind(rt_ctx2, rt_queue2);
        rt_tensor_destroy(&o);
        rt_unbind(saved);
    }
    /* the other context's queue with this context's tensors */
    callspec_t c;
    spec_init(&c), c.queue = rt_queue2;
    expect_reject(&c, B_ALL, RUDNN_STATUS_DEVICE_MISMATCH, "another context", NULL, "queue of ctx2");
}

static void layouts(void **state)
{
    (void)state;
    callspec_t c;
    static const struct {
        int tensor;
        unsigned dirs;
    } each[] = {{T_X, B_FWD}, {T_Y, B_FWD}, {T_DY, B_BWD}, {T_DX, B_BWD}};
    for (size_t k = 0; k < sizeof each / sizeof each[0]; k++) {
        const int i = each[k].tensor;
        const size_t elem = rudnn_dtype_size(F.t[i].t.dtype);
        /* a view past the end of its buffer */
        spec_init(&c), c.d[i].offset = F.t[i].buffer_bytes - 16;
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_OUT_OF_BOUNDS, names[i], "needs bytes", "view past its buffer");
        spec_init(&c), c.d[i].offset = SIZE_MAX - (elem - 1);
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_OUT_OF_BOUNDS, names[i], "its buffer has",
                      "offset near SIZE_MAX");
        /* the N stride reaching past the buffer */
        spec_init(&c), c.d[i].strides[0] = (int64_t)(F.t[i].buffer_bytes / elem);
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_OUT_OF_BOUNDS, names[i], "needs bytes", "N stride past buffer");
        /* a misaligned offset */
        spec_init(&c), c.d[i].offset = 2;
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_BAD_PARAM, names[i], "not a multiple of its element size",
                      "offset 2");
        /* strides that describe no view */
        spec_init(&c), c.d[i].strides[0] = 0;
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_BAD_SHAPE, names[i], "must be positive", "stride 0");
        spec_init(&c), c.d[i].strides[2] = -4;
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_BAD_SHAPE, names[i], "must be positive", "stride -4");
        spec_init(&c), c.d[i].strides[3] = 2;
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_BAD_SHAPE, names[i], "overlapping elements", "W stride 2");
        spec_init(&c), c.d[i].strides[0] = INT64_MAX / 2;
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_OUT_OF_BOUNDS, names[i], "spans more bytes", "N stride huge");
    }
    /* a valid strided view whose extent just fits (the last byte of the buffer) */
    spec_init(&c), c.d[T_X].offset = F.t[T_X].buffer_bytes - 480;
    expect_valid_in(&c, B_FWD, 1, "x ending at its buffer's last byte");
    spec_init(&c), c.d[T_X].offset = F.t[T_X].buffer_bytes - 476;
    expect_reject(&c, B_FWD, RUDNN_STATUS_OUT_OF_BOUNDS, "x", "needs bytes", "x one element past its buffer");
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, rt_test_log_setup, rt_test_log_teardown)

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        T(options_init_defaults), T(valid_calls), T(empty_batch),       T(null_arguments), T(ranks),
        T(dims_rules),            T(dtypes),      T(modes_and_options), T(overlaps),       T(other_context),
        T(layouts),
    };
    rt_set_filters(argc, argv);
    rt_open_or_skip("interpolation-contract");
    if (rt_group_setup_second(NULL))
        return 1;
    rt_print_device("interpolation-contract");
    group_setup();
    {
        /* does the backend have the family? the fixture's forward says */
        callspec_t c;
        spec_init(&c);
        const rudnn_status_t st = call_op(&c, FWD);
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", rudnn_last_error());
        rudnn_queue_synchronize(rt_queue);
        contract_fixture_restore(&F);
        family_absent = st == RUDNN_STATUS_NOT_SUPPORTED;
        if (family_absent)
            printf("    the backend has no interpolation kernels (\"%s\"): valid calls must answer NOT_SUPPORTED\n",
                   msg);
        else if (st)
            printf("    the fixture's forward returned %s (\"%s\"): the success paths will fail\n",
                   rudnn_status_string(st), msg);
    }
    const int failed = cmocka_run_group_tests_name("interpolation-contract", tests, NULL, group_teardown);
    return rt_exit_code(failed);
}
