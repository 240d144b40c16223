/* Contract tests of grid sampling (include/rudnn/grid_sample.h, ops/grid_sample.c) on the default
 * backend. Every rejected call returns the status of its rule (BAD_PARAM for NULLs, the enums,
 * dx and dgrid both NULL, overlaps and the workspace; BAD_SHAPE for ranks, dims, the grid's last dim
 * and strides that describe no view; BAD_DTYPE; DEVICE_MISMATCH for another context's tensor, queue
 * or workspace; OUT_OF_BOUNDS for a view past its buffer), a message that names the op
 * ("grid_sample_forward", "grid_sample_backward", "grid_sample_backward_workspace_size"), the
 * argument and the rule, and writes nothing: every buffer of the fixture (the outputs holding a
 * sentinel) is read back byte for byte after the call, and the workspace query's *bytes keeps its
 * sentinel. Each rule is checked on every op it applies to (the backward and its workspace query
 * share every rule but the workspace's own).
 *
 * The fixture: one buffer a tensor (SLACK bytes after each) and a workspace buffer, a 2D problem:
 * x, dx F32 [2, 3, 5, 4]; grid, dgrid F32 [2, 6, 7, 2]; y, dy F32 [2, 3, 6, 7]. Each test edits a
 * copy of the descriptors; views of other shapes (3D, strided, coordinate-major grids) lie in the
 * same buffers.
 * The success paths: every mode x padding x align_corners (BICUBIC 2D only), F16 and BF16, 3D,
 * options NULL (PyTorch's defaults: bitwise the result of BILINEAR, ZEROS, align_corners 0),
 * strided views, dx only and dgrid only (the query: 0 bytes without dx), the workspace NULL, of the
 * queried size or larger (workspace_bytes past need, unused bytes), outputs right next to inputs in
 * one buffer, N = 0, C = 0 and no points (what each writes: nothing; dgrid zeros for C = 0; dx zeros
 * without points), dims up to RUDNN_GRID_SAMPLE_MAX_DIM where the views are empty, and
 * rudnn_grid_sample_options_init. A backend without the family (CUDA and HIP in this release)
 * answers a valid call NOT_SUPPORTED naming the op and writes nothing: the success paths check that
 * there instead (after every rejection has been checked the same as anywhere).
 *
 * Usage: test_grid_sample_contract [glob] */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/grid_sample.h>

#include "common.h"
#include "contract_fixture.h"
#include "operand.h"

enum { T_X, T_GRID, T_Y, T_DY, T_DX, T_DGRID, T_COUNT };
static const char *const names[T_COUNT] = {"x", "grid", "y", "dy", "dx", "dgrid"};

enum { FWD, BWD, WSZ, OPS };
static const char *const op_names[OPS] = {"grid_sample_forward", "grid_sample_backward",
                                          "grid_sample_backward_workspace_size"};
#define B_FWD (1u << FWD)
#define B_BWD (1u << BWD)
#define B_WSZ (1u << WSZ)
#define B_BACK (B_BWD | B_WSZ)
#define B_ALL (B_FWD | B_BACK)

#define SLACK 2048
#define WS_BYTES 65536
#define BYTES_SENTINEL ((size_t)0x5a5a5a5a5a5a5a5aull)
static const int64_t dims_x[4] = {2, 3, 5, 4}, dims_g[4] = {2, 6, 7, 2}, dims_y[4] = {2, 3, 6, 7};

static contract_fixture_t F; /* the tensors' buffers (T_ order) guarded, then the workspace's */
static int family_absent;

/* ---- the fixture and the calls ------------------------------------------------------------- */

static void fill_inputs(void)
{
    rt_rng_t r;
    rt_rng_seed(&r, 37);
    rt_tensor_fill_uniform(&F.t[T_X], &r, -1.0, 1.0);
    rt_tensor_fill_uniform(&F.t[T_GRID], &r, -1.3, 1.3);
    rt_tensor_fill_uniform(&F.t[T_DY], &r, -1.0, 1.0);
}

static void group_setup(void)
{
    const int64_t *dims[T_COUNT] = {dims_x, dims_g, dims_y, dims_y, dims_x, dims_g};
    contract_fixture_setup(&F, T_COUNT, names, NULL, NULL, dims, SLACK, WS_BYTES, fill_inputs);
}

static int group_teardown(void **state) { return contract_fixture_teardown(&F, state); }

typedef struct callspec {
    rudnn_queue_t queue;
    rudnn_tensor_t d[T_COUNT];
    int null_t[T_COUNT];
    rudnn_grid_sample_options_t opts;
    int null_options;
    rudnn_buffer_t ws; /* the backward's workspace (NULL: the pool) */
    size_t ws_bytes;
    int null_bytes; /* the query's bytes pointer NULL */
} callspec_t;

static void spec_init(callspec_t *c)
{
    memset(c, 0, sizeof *c);
    c->queue = rt_queue;
    for (int i = 0; i < T_COUNT; i++)
        c->d[i] = F.t[i].t;
    rudnn_grid_sample_options_init(&c->opts);
}

/* Every descriptor to the shapes of another problem (each in its own fixture buffer). */
static void set_problem(callspec_t *c, int rank, const int64_t *x, const int64_t *g, const int64_t *y)
{
    rt_reshape(&c->d[T_X], rank, x), rt_reshape(&c->d[T_DX], rank, x);
    rt_reshape(&c->d[T_GRID], rank, g), rt_reshape(&c->d[T_DGRID], rank, g);
    rt_reshape(&c->d[T_Y], rank, y), rt_reshape(&c->d[T_DY], rank, y);
}

static void set_dtype(callspec_t *c, rudnn_dtype_t dt)
{
    for (int i = 0; i < T_COUNT; i++)
        c->d[i].dtype = dt;
}

static const rudnn_tensor_t *tp(const callspec_t *c, int i) { return c->null_t[i] ? NULL : &c->d[i]; }

static rudnn_status_t call_op(const callspec_t *c, int op, size_t *bytes)
{
    const rudnn_grid_sample_options_t *o = c->null_options ? NULL : &c->opts;
    switch (op) {
    case FWD:
        return rudnn_grid_sample_forward(c->queue, tp(c, T_X), tp(c, T_GRID), o, tp(c, T_Y));
    case BWD:
        return rudnn_grid_sample_backward(c->queue, tp(c, T_X), tp(c, T_GRID), tp(c, T_DY), o, c->ws, c->ws_bytes,
                                          tp(c, T_DX), tp(c, T_DGRID));
    default:
        return rudnn_grid_sample_backward_workspace_size(c->queue, tp(c, T_X), tp(c, T_GRID), tp(c, T_DY), o,
                                                         tp(c, T_DX), tp(c, T_DGRID), c->null_bytes ? NULL : bytes);
    }
}

/* The message names the op and every needle (a NULL needle ends the list). For the backward the op
 * name must not be only the start of the query's. */
static int mentions(const char *msg, int op, const char *n1, const char *n2, const char *n3)
{
    const char *at = strstr(msg, op_names[op]);
    if (!at || (op == BWD && strncmp(at + strlen(op_names[BWD]), "_workspace", 10) == 0))
        return 0;
    const char *need[3] = {n1, n2, n3};
    for (int i = 0; i < 3 && need[i]; i++)
        if (!strstr(msg, need[i]))
            return 0;
    return 1;
}

static rudnn_status_t call_any(const void *c, int op, size_t *bytes) { return call_op(c, op, bytes); }

static const contract_family_t family = {OPS, op_names, call_any, mentions, 0, BYTES_SENTINEL};

/* Every op of ops: want, a message naming the op and the needles, no byte of any fixture buffer
 * written, the query's *bytes untouched. */
static void expect_reject3(const callspec_t *c, unsigned ops, rudnn_status_t want, const char *n1, const char *n2,
                           const char *n3, const char *what)
{
    contract_expect_reject(&F, &family, c, ops, want, n1, n2, n3, what);
}

static void expect_reject(const callspec_t *c, unsigned ops, rudnn_status_t want, const char *n1, const char *n2,
                          const char *what)
{
    expect_reject3(c, ops, want, n1, n2, NULL, what);
}

static void repoison_outputs(void)
{
    rudnn_queue_synchronize(rt_queue);
    rt_tensor_poison(&F.t[T_Y]), rt_tensor_poison(&F.t[T_DX]), rt_tensor_poison(&F.t[T_DGRID]);
}

/* Elements of the view t (any strides) still holding the sentinel in snapshot (its whole buffer);
 * *nonzero gets those not exactly 0. */
static int64_t poisoned_in_view(const rudnn_tensor_t *t, const uint8_t *snapshot, int64_t *nonzero)
{
    const int64_t n = rudnn_tensor_numel(t);
    int64_t left = 0, nz = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t rem = k, at = 0;
        for (int i = t->rank - 1; i >= 0; i--) {
            at += (rem % t->dims[i]) * t->strides[i];
            rem /= t->dims[i];
        }
        left += rt_element_bits(t->dtype, snapshot + t->offset, (size_t)at) == rt_poison_bits(t->dtype);
        nz += rt_element_value(t->dtype, snapshot + t->offset, (size_t)at) != 0.0f;
    }
    if (nonzero)
        *nonzero = nz;
    return left;
}

static size_t buffer_bytes_of(rudnn_buffer_t b)
{
    for (int i = 0; i < F.guard.count; i++)
        if (F.guard.items[i].buffer == b)
            return F.guard.items[i].bytes;
    return 0;
}

/* Checks that the output view out was written entirely (and, zeros, holds only zeros). */
static void check_written(const char *what, int op, const rudnn_tensor_t *out, const char *name, int zeros)
{
    uint8_t *snap = rt_buffer_snapshot(out->buffer, buffer_bytes_of(out->buffer));
    int64_t nonzero = 0;
    const int64_t left = poisoned_in_view(out, snap, &nonzero);
    if (left)
        rt_failf("%s [%s]: %lld elements of %s not written", what, op_names[op], (long long)left, name);
    if (zeros && nonzero)
        rt_failf("%s [%s]: %lld elements of %s not zero", what, op_names[op], (long long)nonzero, name);
    free(snap);
}

/* What an accepted call of op writes: y (forward); dx, dgrid (those given) and the workspace
 * (backward); nothing (the query). written: check every element of those outputs written;
 * zero_dx / zero_dgrid: and that they hold zeros. */
typedef struct expect_out {
    int written;
    int zero_dx, zero_dgrid;
    int dx_empty, dgrid_empty, y_empty; /* outputs with no elements: nothing to write */
    size_t *bytes_out;                  /* the query's answer, if wanted */
} expect_out_t;

static void expect_valid_x(const callspec_t *c, unsigned ops, const expect_out_t *e, const char *what)
{
    for (int op = 0; op < OPS; op++) {
        if (!((ops >> op) & 1))
            continue;
        rt_guard_begin(&F.guard);
        size_t bytes = BYTES_SENTINEL;
        const rudnn_status_t st = call_op(c, op, &bytes);
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", rudnn_last_error());
        if (family_absent) {
            if (st != RUDNN_STATUS_NOT_SUPPORTED || !mentions(msg, op, "grid-sample", NULL, NULL))
                rt_failf("%s [%s]: without the family returned %s (\"%s\"), expected NOT_SUPPORTED naming the op "
                          "and the family", what, op_names[op], rudnn_status_string(st), msg);
        } else if (st) {
            rt_failf("%s [%s]: returned %s (\"%s\")", what, op_names[op], rudnn_status_string(st), msg);
        } else if (msg[0]) {
            rt_failf("%s [%s]: success left the message \"%s\"", what, op_names[op], msg);
        }
        if (rudnn_queue_synchronize(rt_queue))
            rt_failf("%s [%s]: the queue's work failed: %s", what, op_names[op], rudnn_last_error());
        if (op == WSZ) {
            if (!st && bytes == BYTES_SENTINEL)
                rt_failf("%s [%s]: success without writing *bytes", what, op_names[op]);
            if (st && bytes != BYTES_SENTINEL)
                rt_failf("%s [%s]: a failed query wrote *bytes", what, op_names[op]);
            if (!st && c->null_t[T_DX] && bytes != 0)
                rt_failf("%s [%s]: %zu bytes without dx (the header: 0)", what, op_names[op], bytes);
            if (!st && e->bytes_out)
                *e->bytes_out = bytes;
        }
        rt_guard_changed(&F.guard);
        rudnn_buffer_t ok[3] = {NULL, NULL, NULL};
        if (!st && op == FWD && !e->y_empty)
            ok[0] = c->d[T_Y].buffer;
        if (!st && op == BWD) {
            ok[0] = c->null_t[T_DX] || e->dx_empty ? NULL : c->d[T_DX].buffer;
            ok[1] = c->null_t[T_DGRID] || e->dgrid_empty ? NULL : c->d[T_DGRID].buffer;
            ok[2] = c->ws;
        }
        for (int i = 0; i < F.guard.count; i++) {
            const rt_guard_item_t *it = &F.guard.items[i];
            if (it->changed && it->buffer != ok[0] && it->buffer != ok[1] && it->buffer != ok[2])
                rt_failf("%s [%s]: %s call wrote to %s's buffer, which holds no output of it", what, op_names[op],
                          st ? "a failed" : "an accepted", it->name);
        }
        if (!st && e->written && op == FWD && !e->y_empty)
            check_written(what, op, &c->d[T_Y], "y", 0);
        if (!st && e->written && op == BWD) {
            if (!c->null_t[T_DX] && !e->dx_empty)
                check_written(what, op, &c->d[T_DX], "dx", e->zero_dx);
            if (!c->null_t[T_DGRID] && !e->dgrid_empty)
                check_written(what, op, &c->d[T_DGRID], "dgrid", e->zero_dgrid);
        }
        repoison_outputs();
        if (rt_guard_changed(&F.guard)) /* an input's buffer held an output: refill it */
            contract_fixture_restore(&F);
    }
}

static void expect_valid_in(const callspec_t *c, unsigned ops, const char *what)
{
    const expect_out_t e = {1, 0, 0, 0, 0, 0, NULL};
    expect_valid_x(c, ops, &e, what);
}

static void expect_valid(const callspec_t *c, const char *what) { expect_valid_in(c, B_ALL, what); }

/* The workspace size the query gives for c (0 when it fails: logged). */
static size_t query(const callspec_t *c, const char *what)
{
    size_t bytes = 0;
    const expect_out_t e = {0, 0, 0, 0, 0, 0, &bytes};
    expect_valid_x(c, B_WSZ, &e, what);
    return bytes;
}

/* ---- the success paths --------------------------------------------------------------------------- */

static void options_init_defaults(void **state)
{
    (void)state;
    rudnn_grid_sample_options_t o;
    memset(&o, 0x7b, sizeof o);
    rudnn_grid_sample_options_init(&o);
    if (o.mode != RUDNN_GRID_SAMPLE_BILINEAR)
        rt_failf("options_init: mode %d, expected RUDNN_GRID_SAMPLE_BILINEAR", (int)o.mode);
    if (o.padding != RUDNN_GRID_SAMPLE_ZEROS)
        rt_failf("options_init: padding %d, expected RUDNN_GRID_SAMPLE_ZEROS", (int)o.padding);
    if (o.align_corners != 0)
        rt_failf("options_init: align_corners %d, expected 0", o.align_corners);
    rudnn_grid_sample_options_init(NULL); /* must not crash */
}

static const char *const mode_names[3] = {"BILINEAR", "NEAREST", "BICUBIC"};
static const char *const pad_names[3] = {"ZEROS", "BORDER", "REFLECTION"};

static void valid_calls(void **state)
{
    (void)state;
    callspec_t c;
    char what[128];
    /* every mode x padding x align_corners, each float dtype */
    const rudnn_dtype_t dts[3] = {RUDNN_F32, RUDNN_F16, RUDNN_BF16};
    for (int k = 0; k < 3; k++)
        for (int m = 0; m < 3; m++)
            for (int p = 0; p < 3; p++)
                for (int ac = 0; ac < 2; ac++) {
                    spec_init(&c), set_dtype(&c, dts[k]);
                    c.opts.mode = (rudnn_grid_sample_mode_t)m, c.opts.padding = (rudnn_grid_sample_padding_t)p;
                    c.opts.align_corners = ac;
                    snprintf(what, sizeof what, "the fixture, %s, %s, %s, align_corners %d", rudnn_dtype_name(dts[k]),
                             mode_names[m], pad_names[p], ac);
                    expect_valid(&c, what);
                }
    /* 3D: x [1, 2, 3, 4, 2], grid [1, 2, 5, 3, 3], y [1, 2, 2, 5, 3] */
    {
        const int64_t x[5] = {1, 2, 3, 4, 2}, g[5] = {1, 2, 5, 3, 3}, y[5] = {1, 2, 2, 5, 3};
        for (int m = 0; m < 2; m++)
            for (int p = 0; p < 3; p++) {
                spec_init(&c), set_problem(&c, 5, x, g, y);
                c.opts.mode = (rudnn_grid_sample_mode_t)m, c.opts.padding = (rudnn_grid_sample_padding_t)p;
                c.opts.align_corners = p == 1;
                snprintf(what, sizeof what, "3D, %s, %s", mode_names[m], pad_names[p]);
                expect_valid(&c, what);
            }
    }
    /* options NULL */
    spec_init(&c), c.null_options = 1;
    expect_valid(&c, "options NULL");
    /* dx only, dgrid only (the query: 0 bytes without dx) */
    for (int m = 0; m < 3; m++) {
        spec_init(&c), c.opts.mode = (rudnn_grid_sample_mode_t)m, c.null_t[T_DGRID] = 1;
        snprintf(what, sizeof what, "dx only, %s", mode_names[m]);
        expect_valid_in(&c, B_BACK, what);
        spec_init(&c), c.opts.mode = (rudnn_grid_sample_mode_t)m, c.null_t[T_DX] = 1;
        snprintf(what, sizeof what, "dgrid only, %s", mode_names[m]);
        expect_valid_in(&c, B_BACK, what);
        c.ws = F.ws, c.ws_bytes = 0;
        snprintf(what, sizeof what, "dgrid only, %s, a workspace of 0 bytes", mode_names[m]);
        expect_valid_in(&c, B_BWD, what);
    }
    /* the workspace: of the queried size, larger, NULL with any workspace_bytes */
    for (int m = 0; m < 3; m++) {
        spec_init(&c), c.opts.mode = (rudnn_grid_sample_mode_t)m;
        snprintf(what, sizeof what, "workspace query, %s", mode_names[m]);
        const size_t need = query(&c, what);
        if (!family_absent && need == 0)
            rt_failf("%s: 0 bytes with dx", what);
        if (need > WS_BYTES) {
            rt_failf("%s: %zu bytes, more than the fixture's workspace (test bug)", what, need);
            continue;
        }
        c.ws = F.ws, c.ws_bytes = need;
        snprintf(what, sizeof what, "workspace of the queried size, %s", mode_names[m]);
        expect_valid_in(&c, B_BWD, what);
        c.ws_bytes = WS_BYTES;
        snprintf(what, sizeof what, "workspace larger than needed, %s", mode_names[m]);
        expect_valid_in(&c, B_BWD, what);
        c.ws = NULL, c.ws_bytes = (size_t)1 << 62;
        snprintf(what, sizeof what, "workspace NULL, workspace_bytes huge (ignored), %s", mode_names[m]);
        expect_valid_in(&c, B_BWD, what);
    }
    /* strided views: x and dx channels-last ([N, H, W, C] memory), grid and dgrid coordinate-major
     * ([N, 2, Ho, Wo] memory), y and dy with padded rows */
    spec_init(&c);
    for (int k = T_X; k < T_COUNT; k += T_DX - T_X) {
        rudnn_tensor_t *t = &c.d[k];
        t->strides[1] = 1, t->strides[3] = 3, t->strides[2] = 12, t->strides[0] = 60;
    }
    for (int k = T_GRID; k < T_COUNT; k += T_DGRID - T_GRID) {
        rudnn_tensor_t *t = &c.d[k];
        t->strides[3] = 42, t->strides[2] = 1, t->strides[1] = 7, t->strides[0] = 84;
    }
    for (int k = T_Y; k <= T_DY; k++) {
        rudnn_tensor_t *t = &c.d[k];
        t->strides[3] = 1, t->strides[2] = 9, t->strides[1] = 60, t->strides[0] = 200;
    }
    for (int m = 0; m < 3; m++) {
        c.opts.mode = (rudnn_grid_sample_mode_t)m, c.opts.padding = (rudnn_grid_sample_padding_t)(2 - m);
        snprintf(what, sizeof what, "channels-last x, dx; coordinate-major grid, dgrid; padded y, dy; %s",
                 mode_names[m]);
        expect_valid(&c, what);
    }
    /* outputs right after an input in its buffer, touching no byte of it */
    spec_init(&c), c.d[T_Y].buffer = F.t[T_X].buffer, c.d[T_Y].offset = 120 * 4;
    expect_valid_in(&c, B_FWD, "y right after x in its buffer");
    spec_init(&c), c.d[T_Y].buffer = F.t[T_GRID].buffer, c.d[T_Y].offset = 0, c.d[T_GRID].offset = 252 * 4;
    expect_valid_in(&c, B_FWD, "y right before grid in its buffer");
    spec_init(&c), c.d[T_DX].buffer = F.t[T_DY].buffer, c.d[T_DX].offset = 252 * 4;
    c.d[T_DGRID].buffer = F.t[T_DY].buffer, c.d[T_DGRID].offset = (252 + 120) * 4;
    expect_valid_in(&c, B_BACK, "dx right after dy and dgrid right after dx in dy's buffer");
    spec_init(&c), c.d[T_DGRID].buffer = F.t[T_GRID].buffer, c.d[T_DGRID].offset = 168 * 4;
    expect_valid_in(&c, B_BACK, "dgrid right after grid in its buffer");
    /* the workspace right after the outputs? a tensor past workspace_bytes in the workspace's buffer */
    spec_init(&c), c.ws = F.ws, c.ws_bytes = 8192, c.d[T_X].buffer = F.ws, c.d[T_X].offset = 8192;
    expect_valid_in(&c, B_BWD, "x in the workspace's buffer past workspace_bytes");
    /* a valid call right after a rejected one leaves no message */
    spec_init(&c), c.queue = NULL;
    size_t b;
    (void)call_op(&c, FWD, &b);
    spec_init(&c);
    expect_valid_in(&c, B_FWD, "valid after rejected");
}

/* options NULL: bitwise the result of explicit defaults (BILINEAR, ZEROS, align_corners 0), and not
 * that of another mode. */
static void options_null_is_default(void **state)
{
    (void)state;
    if (family_absent) {
        printf("    the family is absent: nothing to compare\n");
        return;
    }
    const size_t yb = F.t[T_Y].buffer_bytes;
    uint8_t *res[3];
    for (int k = 0; k < 3; k++) {
        callspec_t c;
        spec_init(&c);
        c.null_options = k == 0;
        if (k == 2)
            c.opts.align_corners = 1;
        size_t b;
        const rudnn_status_t st = call_op(&c, FWD, &b);
        if (st)
            rt_failf("options %s: %s (\"%s\")", k == 0 ? "NULL" : "explicit", rudnn_status_string(st),
                      rudnn_last_error());
        res[k] = rt_buffer_snapshot(F.t[T_Y].buffer, yb);
        repoison_outputs();
    }
    if (memcmp(res[0], res[1], yb))
        rt_failf("options NULL: y differs from BILINEAR, ZEROS, align_corners 0");
    if (!memcmp(res[0], res[2], yb))
        rt_failf("options NULL: y equals align_corners 1's too (the check proves nothing: test bug)");
    for (int k = 0; k < 3; k++)
        free(res[k]);
    rt_guard_begin(&F.guard); /* the fixture as it is now */
}

/* N = 0, C = 0, no points: what each op writes; dims up to RUDNN_GRID_SAMPLE_MAX_DIM in empty views. */
static void empty_problems(void **state)
{
    (void)state;
    const int64_t big = RUDNN_GRID_SAMPLE_MAX_DIM;
    static const struct {
        const char *label;
        int64_t x[4], g[4], y[4];
        int y_empty, dx_empty, dgrid_empty, zero_dx, zero_dgrid;
    } e[] = {
        {"N = 0", {0, 3, 5, 4}, {0, 6, 7, 2}, {0, 3, 6, 7}, 1, 1, 1, 0, 0},
        {"C = 0", {2, 0, 5, 4}, {2, 6, 7, 2}, {2, 0, 6, 7}, 1, 1, 0, 0, 1},
        {"no points (Wo = 0)", {2, 3, 5, 4}, {2, 6, 0, 2}, {2, 3, 6, 0}, 1, 0, 1, 1, 0},
        {"no points (Ho = 0)", {2, 3, 5, 4}, {2, 0, 7, 2}, {2, 3, 0, 7}, 1, 0, 1, 1, 0},
        {"N = 0, H, W, Ho, Wo of 2^31", {0, 3, big, big}, {0, big, big, 2}, {0, 3, big, big}, 1, 1, 1, 0, 0},
        {"C = 2^31, N = 0", {0, big, 5, 4}, {0, 6, 7, 2}, {0, big, 6, 7}, 1, 1, 1, 0, 0},
    };
    /* N = 2^31, C = 0, no points: the forward and dgrid have nothing to do; with dx the header's
     * OpenCL limit (N D H W below 2^31 x positions) may answer NOT_SUPPORTED, naming the op and the
     * limit, writing nothing */
    {
        const int64_t x[4] = {big, 0, 5, 4}, g[4] = {big, 0, 7, 2}, y[4] = {big, 0, 0, 7};
        for (int m = 0; m < 3; m++) {
            callspec_t c;
            spec_init(&c), set_problem(&c, 4, x, g, y), c.opts.mode = (rudnn_grid_sample_mode_t)m;
            const expect_out_t ex = {1, 0, 0, 1, 1, 1, NULL};
            c.null_t[T_DX] = 1;
            expect_valid_x(&c, B_ALL, &ex, "N = 2^31, C = 0, no points, dgrid only");
            c.null_t[T_DX] = 0;
            for (int op = BWD; op <= WSZ; op++) {
                rt_guard_begin(&F.guard);
                size_t bytes = BYTES_SENTINEL;
                const rudnn_status_t st = call_op(&c, op, &bytes);
                char msg[1024];
                snprintf(msg, sizeof msg, "%s", rudnn_last_error());
                rudnn_queue_synchronize(rt_queue);
                if (st == RUDNN_STATUS_NOT_SUPPORTED) {
                    if (!mentions(msg, op, family_absent ? "grid-sample" : "2^31", NULL, NULL))
                        rt_failf("N = 2^31 with dx [%s]: NOT_SUPPORTED without naming the op and the limit (\"%s\")",
                                  op_names[op], msg);
                    if (bytes != BYTES_SENTINEL)
                        rt_failf("N = 2^31 with dx [%s]: a failed query wrote *bytes", op_names[op]);
                } else if (st) {
                    rt_failf("N = 2^31 with dx [%s]: %s (\"%s\")", op_names[op], rudnn_status_string(st), msg);
                }
                if (rt_guard_changed(&F.guard)) {
                    rt_failf("N = 2^31 with dx [%s]: a buffer was written", op_names[op]);
                    contract_fixture_restore(&F);
                }
            }
        }
    }
    for (size_t k = 0; k < sizeof e / sizeof e[0]; k++)
        for (int m = 0; m < 3; m++)
            for (int outs = 1; outs <= 3; outs++) {
                callspec_t c;
                spec_init(&c), set_problem(&c, 4, e[k].x, e[k].g, e[k].y);
                c.opts.mode = (rudnn_grid_sample_mode_t)m, c.opts.padding = (rudnn_grid_sample_padding_t)m;
                c.null_t[T_DX] = !(outs & 1), c.null_t[T_DGRID] = !(outs & 2);
                char what[160];
                snprintf(what, sizeof what, "%s, %s, %s", e[k].label, mode_names[m],
                         outs == 3 ? "dx and dgrid" : outs == 1 ? "dx only" : "dgrid only");
                size_t bytes = 0;
                const expect_out_t ex = {1, e[k].zero_dx, e[k].zero_dgrid, e[k].dx_empty, e[k].dgrid_empty,
                                         e[k].y_empty, &bytes};
                expect_valid_x(&c, outs == 3 ? B_ALL : B_BACK, &ex, what);
                if (!family_absent && e[k].x[0] == 0 && bytes != 0)
                    rt_failf("%s: the query says %zu bytes for N = 0", what, bytes);
                if (!family_absent && bytes <= WS_BYTES) {
                    c.ws = F.ws, c.ws_bytes = bytes;
                    char w2[200];
                    snprintf(w2, sizeof w2, "%s, workspace of the queried %zu bytes", what, bytes);
                    expect_valid_x(&c, B_BWD, &ex, w2);
                }
            }
}

/* ---- the rejections ------------------------------------------------------------------------------ */

static void null_arguments(void **state)
{
    (void)state;
    callspec_t c;
    for (int m = 0; m < 3; m++) {
        spec_init(&c), c.queue = NULL, c.opts.mode = (rudnn_grid_sample_mode_t)m;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "queue is NULL", NULL, "queue NULL");
    }
    spec_init(&c), c.queue = NULL, c.null_options = 1;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "queue is NULL", NULL, "queue NULL, options NULL");
    static const struct {
        int t;
        unsigned ops;
    } each[] = {{T_X, B_ALL}, {T_GRID, B_ALL}, {T_Y, B_FWD}, {T_DY, B_BACK}};
    for (size_t k = 0; k < sizeof each / sizeof each[0]; k++) {
        spec_init(&c), c.null_t[each[k].t] = 1;
        char n1[32], what[48];
        snprintf(n1, sizeof n1, "%s is NULL", names[each[k].t]);
        snprintf(what, sizeof what, "%s NULL", names[each[k].t]);
        expect_reject(&c, each[k].ops, RUDNN_STATUS_BAD_PARAM, n1, NULL, what);
    }
    /* dx and dgrid both NULL */
    for (int m = 0; m < 3; m++) {
        spec_init(&c), c.null_t[T_DX] = c.null_t[T_DGRID] = 1, c.opts.mode = (rudnn_grid_sample_mode_t)m;
        expect_reject3(&c, B_BACK, RUDNN_STATUS_BAD_PARAM, "dx and dgrid are both NULL", "nothing to compute", NULL,
                       "dx and dgrid NULL");
    }
    spec_init(&c), c.null_t[T_DX] = c.null_t[T_DGRID] = 1, c.ws = F.ws, c.ws_bytes = 4096;
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_PARAM, "dx and dgrid are both NULL", NULL, "dx, dgrid NULL, workspace");
    /* the query's bytes */
    spec_init(&c), c.null_bytes = 1;
    expect_reject(&c, B_WSZ, RUDNN_STATUS_BAD_PARAM, "bytes is NULL", NULL, "bytes NULL");
    spec_init(&c), c.null_bytes = 1, c.queue = NULL;
    expect_reject(&c, B_WSZ, RUDNN_STATUS_BAD_PARAM, "bytes is NULL", NULL, "bytes NULL before queue NULL");
    /* everything NULL */
    spec_init(&c), c.queue = NULL, c.null_options = 1;
    for (int i = 0; i < T_COUNT; i++)
        c.null_t[i] = 1;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "is NULL", NULL, "everything NULL");
    /* a tensor without a buffer */
    for (int i = 0; i < T_COUNT; i++) {
        spec_init(&c), c.d[i].buffer = NULL;
        char n1[32];
        snprintf(n1, sizeof n1, "%s has no buffer", names[i]);
        const unsigned ops = i == T_X || i == T_GRID ? B_ALL : i == T_Y ? B_FWD : B_BACK;
        expect_reject(&c, ops, RUDNN_STATUS_BAD_PARAM, n1, NULL, "no buffer");
    }
}

static void ranks(void **state)
{
    (void)state;
    callspec_t c;
    /* x of rank 3 and 6 (every tensor alike; x decides) */
    const int64_t x3[3] = {2, 3, 5}, g3[3] = {2, 6, 1}, y3[3] = {2, 3, 6};
    spec_init(&c), set_problem(&c, 3, x3, g3, y3);
    expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "x has rank 3", "expected 4 ([N, C, H, W]) or 5",
                   "[N, C, D, H, W]", "rank 3");
    const int64_t x6[6] = {2, 3, 5, 4, 1, 1}, g6[6] = {2, 6, 7, 1, 1, 4}, y6[6] = {2, 3, 6, 7, 1, 1};
    spec_init(&c), set_problem(&c, 6, x6, g6, y6);
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "x has rank 6", "expected 4", "rank 6");
    c.null_options = 1;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "x has rank 6", "expected 4", "rank 6, options NULL");
    /* x's rank decides before the options are looked at */
    c.null_options = 0, c.opts.mode = (rudnn_grid_sample_mode_t)7;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "x has rank 6", NULL, "rank 6 with a bad mode");
    /* ranks no descriptor has */
    spec_init(&c), c.d[T_X].rank = 9;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "x has rank 9", NULL, "x rank 9");
    spec_init(&c), c.d[T_GRID].rank = -1;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "grid has rank -1", NULL, "grid rank -1");
    spec_init(&c), c.d[T_Y].rank = 9, c.d[T_DY].rank = 9;
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "y has rank 9", NULL, "y rank 9");
    expect_reject(&c, B_BACK, RUDNN_STATUS_BAD_SHAPE, "dy has rank 9", NULL, "dy rank 9");
    spec_init(&c), c.d[T_DX].rank = 9;
    expect_reject(&c, B_BACK, RUDNN_STATUS_BAD_SHAPE, "dx has rank 9", NULL, "dx rank 9");
    spec_init(&c), c.d[T_DGRID].rank = 0;
    {
        /* rank 0 is a valid descriptor (a scalar): the like-rule names it */
        expect_reject3(&c, B_BACK, RUDNN_STATUS_BAD_SHAPE, "dgrid has shape []", "expected [2, 6, 7, 2]",
                       "shape of grid", "dgrid rank 0");
    }
    /* the grid's rank against x's */
    const int64_t g5[5] = {2, 1, 6, 7, 2}, g3b[3] = {2, 42, 2};
    spec_init(&c), rt_reshape(&c.d[T_GRID], 5, g5);
    expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "grid has rank 5", "expected 4", "[N, Ho, Wo, 2]",
                   "grid rank 5 beside x rank 4");
    spec_init(&c), rt_reshape(&c.d[T_GRID], 3, g3b);
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "grid has rank 3", "expected 4", "grid rank 3");
    {
        const int64_t x[5] = {2, 3, 3, 5, 4}, g[4] = {2, 6, 7, 3};
        spec_init(&c), rt_reshape(&c.d[T_X], 5, x), rt_reshape(&c.d[T_GRID], 4, g);
        expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "grid has rank 4", "expected 5", "[N, Do, Ho, Wo, 3]",
                       "grid rank 4 beside x rank 5");
    }
    /* y (dy) of another rank than x */
    const int64_t y5[5] = {2, 3, 1, 6, 7}, y3b[3] = {2, 3, 42};
    spec_init(&c), rt_reshape(&c.d[T_Y], 5, y5), rt_reshape(&c.d[T_DY], 5, y5);
    expect_reject3(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "y has shape [2, 3, 1, 6, 7]", "expected [2, 3, 6, 7]",
                   "the grid's points", "y rank 5");
    expect_reject3(&c, B_BACK, RUDNN_STATUS_BAD_SHAPE, "dy has shape [2, 3, 1, 6, 7]", "expected [2, 3, 6, 7]",
                   "the grid's points", "dy rank 5");
    spec_init(&c), rt_reshape(&c.d[T_Y], 3, y3b), rt_reshape(&c.d[T_DY], 3, y3b);
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "y has shape [2, 3, 42]", "expected [2, 3, 6, 7]", "y rank 3");
    expect_reject(&c, B_BACK, RUDNN_STATUS_BAD_SHAPE, "dy has shape [2, 3, 42]", "expected [2, 3, 6, 7]", "dy rank 3");
    /* dx, dgrid of another rank */
    const int64_t x5[5] = {2, 3, 1, 5, 4}, gg5[5] = {2, 1, 6, 7, 2};
    spec_init(&c), rt_reshape(&c.d[T_DX], 5, x5);
    expect_reject3(&c, B_BACK, RUDNN_STATUS_BAD_SHAPE, "dx has shape [2, 3, 1, 5, 4]", "expected [2, 3, 5, 4]",
                   "shape of x", "dx rank 5");
    spec_init(&c), rt_reshape(&c.d[T_DGRID], 5, gg5);
    expect_reject3(&c, B_BACK, RUDNN_STATUS_BAD_SHAPE, "dgrid has shape [2, 1, 6, 7, 2]", "expected [2, 6, 7, 2]",
                   "shape of grid", "dgrid rank 5");
}

static void dims_rules(void **state)
{
    (void)state;
    callspec_t c;
    /* the grid's last dim: 2 for 2D, 3 for 3D */
    {
        const int64_t g[4] = {2, 6, 7, 3}, g1[4] = {2, 6, 7, 1};
        spec_init(&c), rt_reshape(&c.d[T_GRID], 4, g), rt_reshape(&c.d[T_DGRID], 4, g);
        expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "grid has shape [2, 6, 7, 3]", "expected [2, 6, 7, 2]",
                       "one (x, y) per point", "2D grid with 3 coordinates");
        spec_init(&c), rt_reshape(&c.d[T_GRID], 4, g1), rt_reshape(&c.d[T_DGRID], 4, g1);
        expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "grid has shape [2, 6, 7, 1]", "expected [2, 6, 7, 2]",
                       "one (x, y) per point", "2D grid with 1 coordinate");
        const int64_t x[5] = {1, 2, 3, 4, 2}, g2[5] = {1, 2, 5, 3, 2}, y[5] = {1, 2, 2, 5, 3};
        spec_init(&c), set_problem(&c, 5, x, g2, y);
        expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "grid has shape [1, 2, 5, 3, 2]", "expected [1, 2, 5, 3, 3]",
                       "one (x, y, z) per point", "3D grid with 2 coordinates");
    }
    /* N: the grid's, y's (dy's) against x's */
    static const struct {
        int t;
        int dim;
        int64_t value;
        const char *n1, *n2;
    } nm[] = {
        {T_GRID, 0, 1, "grid has shape [1, 6, 7, 2]", "expected [2, 6, 7, 2]"},
        {T_GRID, 0, 3, "grid has shape [3, 6, 7, 2]", "expected [2, 6, 7, 2]"},
        {T_GRID, 0, 0, "grid has shape [0, 6, 7, 2]", "expected [2, 6, 7, 2]"},
        {T_Y, 0, 1, "y has shape [1, 3, 6, 7]", "expected [2, 3, 6, 7]"},
        {T_Y, 1, 2, "y has shape [2, 2, 6, 7]", "expected [2, 3, 6, 7]"},
        {T_Y, 1, 0, "y has shape [2, 0, 6, 7]", "expected [2, 3, 6, 7]"},
        {T_Y, 2, 7, "y has shape [2, 3, 7, 7]", "expected [2, 3, 6, 7]"},
        {T_Y, 3, 6, "y has shape [2, 3, 6, 6]", "expected [2, 3, 6, 7]"},
        {T_DY, 0, 3, "dy has shape [3, 3, 6, 7]", "expected [2, 3, 6, 7]"},
        {T_DY, 1, 4, "dy has shape [2, 4, 6, 7]", "expected [2, 3, 6, 7]"},
        {T_DY, 3, 8, "dy has shape [2, 3, 6, 8]", "expected [2, 3, 6, 7]"},
        {T_DX, 0, 1, "dx has shape [1, 3, 5, 4]", "expected [2, 3, 5, 4] (shape of x)"},
        {T_DX, 2, 4, "dx has shape [2, 3, 4, 4]", "expected [2, 3, 5, 4] (shape of x)"},
        {T_DGRID, 1, 7, "dgrid has shape [2, 7, 7, 2]", "expected [2, 6, 7, 2] (shape of grid)"},
        {T_DGRID, 3, 3, "dgrid has shape [2, 6, 7, 3]", "expected [2, 6, 7, 2] (shape of grid)"},
    };
    for (size_t k = 0; k < sizeof nm / sizeof nm[0]; k++)
        for (int m = 0; m < 3; m++) {
            spec_init(&c), c.opts.mode = (rudnn_grid_sample_mode_t)m;
            int64_t dd[4];
            memcpy(dd, c.d[nm[k].t].dims, sizeof dd);
            dd[nm[k].dim] = nm[k].value;
            rt_reshape(&c.d[nm[k].t], 4, dd);
            const unsigned ops = nm[k].t == T_Y ? B_FWD : nm[k].t == T_GRID ? B_ALL : B_BACK;
            char what[80];
            snprintf(what, sizeof what, "%s dims[%d] = %lld, %s", names[nm[k].t], nm[k].dim, (long long)nm[k].value,
                     mode_names[m]);
            expect_reject(&c, ops, RUDNN_STATUS_BAD_SHAPE, nm[k].n1, nm[k].n2, what);
        }
    /* x's spatial dims of 0 */
    {
        const int64_t x0h[4] = {2, 3, 0, 4}, x0w[4] = {0, 3, 5, 0};
        const int64_t g0[4] = {0, 6, 7, 2}, y0[4] = {0, 3, 6, 7};
        spec_init(&c), rt_reshape(&c.d[T_X], 4, x0h), rt_reshape(&c.d[T_DX], 4, x0h);
        expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "x dims[2] = 0", "expected 1..2147483648", NULL, "H 0");
        spec_init(&c), set_problem(&c, 4, x0w, g0, y0);
        expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "x dims[3] = 0", "expected 1..2147483648", NULL,
                       "W 0 with N 0");
    }
    /* past RUDNN_GRID_SAMPLE_MAX_DIM, in empty views */
    const int64_t over = RUDNN_GRID_SAMPLE_MAX_DIM + 1;
    {
        const int64_t x[4] = {0, 3, over, 4}, g[4] = {0, 6, 7, 2}, y[4] = {0, 3, 6, 7};
        spec_init(&c), set_problem(&c, 4, x, g, y);
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "x dims[2] = 2147483649", "expected 1..2147483648",
                      "H past the limit");
    }
    {
        const int64_t x[4] = {over, 0, 5, 4}, g[4] = {over, 0, 7, 2}, y[4] = {over, 0, 0, 7};
        spec_init(&c), set_problem(&c, 4, x, g, y);
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "x dims[0] = 2147483649", "expected 0..2147483648",
                      "N past the limit");
    }
    {
        const int64_t x[4] = {0, over, 5, 4}, g[4] = {0, 6, 7, 2}, y[4] = {0, over, 6, 7};
        spec_init(&c), set_problem(&c, 4, x, g, y);
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "x dims[1] = 2147483649", "expected 0..2147483648",
                      "C past the limit");
    }
    {
        const int64_t x[4] = {0, 3, 5, 4}, g[4] = {0, over, 7, 2}, y[4] = {0, 3, over, 7};
        spec_init(&c), set_problem(&c, 4, x, g, y);
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "grid dims[1] = 2147483649", "expected 0..2147483648",
                      "Ho past the limit");
    }
    {
        const int64_t x[5] = {0, 2, 3, 4, 2}, g[5] = {0, 5, 3, over, 3}, y[5] = {0, 2, 5, 3, over};
        spec_init(&c), set_problem(&c, 5, x, g, y);
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "grid dims[3] = 2147483649", "expected 0..2147483648",
                      "3D Wo past the limit");
    }
    /* negative dims (the descriptor's rule) */
    const int64_t neg[4] = {2, 3, -5, 4}, negg[4] = {2, -6, 7, 2};
    spec_init(&c), rt_reshape(&c.d[T_X], 4, neg);
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "x has negative dims[2]", NULL, "H -5");
    spec_init(&c), rt_reshape(&c.d[T_GRID], 4, negg);
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "grid has negative dims[1]", NULL, "Ho -6");
    spec_init(&c), rt_reshape(&c.d[T_DGRID], 4, negg);
    expect_reject(&c, B_BACK, RUDNN_STATUS_BAD_SHAPE, "dgrid has negative dims[1]", NULL, "dgrid Ho -6");
}

static void dtypes(void **state)
{
    (void)state;
    callspec_t c;
    /* non-float dtypes, every tensor alike */
    const rudnn_dtype_t bad[] = {RUDNN_I8, RUDNN_I32, RUDNN_U32, RUDNN_I64, RUDNN_BOOL, RUDNN_I4};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        spec_init(&c), set_dtype(&c, bad[k]);
        char what[64], n1[48];
        snprintf(what, sizeof what, "every tensor %s", rudnn_dtype_name(bad[k]));
        snprintf(n1, sizeof n1, "dtype %s", rudnn_dtype_name(bad[k]));
        expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_DTYPE, "x has", n1, "expected f32, f16 or bf16", what);
    }
    /* not a dtype at all */
    for (int i = 0; i < T_COUNT; i++) {
        spec_init(&c), c.d[i].dtype = (rudnn_dtype_t)99;
        char n1[48];
        snprintf(n1, sizeof n1, "%s has dtype 99", names[i]);
        const unsigned ops = i == T_X || i == T_GRID ? B_ALL : i == T_Y ? B_FWD : B_BACK;
        expect_reject(&c, ops, RUDNN_STATUS_BAD_DTYPE, n1, "not a rudnn dtype", "dtype 99");
    }
    /* one dtype for every tensor: each against x's, every float pair */
    const rudnn_dtype_t fl[3] = {RUDNN_F32, RUDNN_F16, RUDNN_BF16};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            if (a == b)
                continue;
            for (int i = T_GRID; i < T_COUNT; i++) {
                spec_init(&c), set_dtype(&c, fl[a]), c.d[i].dtype = fl[b];
                char n1[48], n2[80], what[64];
                snprintf(n1, sizeof n1, "%s has dtype %s", names[i], rudnn_dtype_name(fl[b]));
                if (i == T_DX || i == T_DGRID)
                    snprintf(n2, sizeof n2, "expected %s (dtype of %s)", rudnn_dtype_name(fl[a]),
                             i == T_DX ? "x" : "grid");
                else
                    snprintf(n2, sizeof n2, "expected %s (one dtype for every tensor)", rudnn_dtype_name(fl[a]));
                snprintf(what, sizeof what, "%s %s among %s", names[i], rudnn_dtype_name(fl[b]),
                         rudnn_dtype_name(fl[a]));
                const unsigned ops = i == T_GRID ? B_ALL : i == T_Y ? B_FWD : B_BACK;
                expect_reject(&c, ops, RUDNN_STATUS_BAD_DTYPE, n1, n2, what);
            }
            /* x the odd one: the grid is named against it */
            spec_init(&c), set_dtype(&c, fl[a]), c.d[T_X].dtype = fl[b];
            char n1[48], n2[48], what[48];
            snprintf(n1, sizeof n1, "grid has dtype %s", rudnn_dtype_name(fl[a]));
            snprintf(n2, sizeof n2, "expected %s", rudnn_dtype_name(fl[b]));
            snprintf(what, sizeof what, "x %s among %s", rudnn_dtype_name(fl[b]), rudnn_dtype_name(fl[a]));
            expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_DTYPE, n1, n2, what);
        }
    /* an integer tensor beside float x */
    spec_init(&c), c.d[T_GRID].dtype = RUDNN_I32;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_DTYPE, "grid has dtype i32", "expected f32", "grid i32");
    spec_init(&c), c.d[T_DGRID].dtype = RUDNN_I64;
    expect_reject(&c, B_BACK, RUDNN_STATUS_BAD_DTYPE, "dgrid has dtype i64", "expected f32 (dtype of grid)",
                  "dgrid i64");
    spec_init(&c), c.d[T_X].dtype = RUDNN_I8;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_DTYPE, "x has quantized dtype i8", "expected f32, f16 or bf16", "x i8");
}

static void enums(void **state)
{
    (void)state;
    callspec_t c;
    const int bad_mode[] = {-1, 3, 1000, INT_MIN, INT_MAX};
    for (int k = 0; k < 5; k++) {
        spec_init(&c), c.opts.mode = (rudnn_grid_sample_mode_t)bad_mode[k];
        char what[64], n1[48];
        snprintf(what, sizeof what, "mode %d", bad_mode[k]);
        snprintf(n1, sizeof n1, "options.mode = %d", bad_mode[k]);
        expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, n1, "_BICUBIC (2)", "RUDNN_GRID_SAMPLE_BILINEAR", what);
    }
    const int bad_pad[] = {-1, 3, INT_MAX};
    for (int k = 0; k < 3; k++)
        for (int m = 0; m < 3; m++) {
            spec_init(&c), c.opts.padding = (rudnn_grid_sample_padding_t)bad_pad[k];
            c.opts.mode = (rudnn_grid_sample_mode_t)m;
            char what[64], n1[48];
            snprintf(what, sizeof what, "padding %d, %s", bad_pad[k], mode_names[m]);
            snprintf(n1, sizeof n1, "options.padding = %d", bad_pad[k]);
            expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, n1, "_REFLECTION (2)", "RUDNN_GRID_SAMPLE_ZEROS", what);
        }
    const int bad_ac[] = {2, -1, INT_MAX, INT_MIN};
    for (int k = 0; k < 4; k++)
        for (int m = 0; m < 3; m++) {
            spec_init(&c), c.opts.align_corners = bad_ac[k], c.opts.mode = (rudnn_grid_sample_mode_t)m;
            char what[64], n1[48];
            snprintf(what, sizeof what, "align_corners %d, %s", bad_ac[k], mode_names[m]);
            snprintf(n1, sizeof n1, "options.align_corners = %d", bad_ac[k]);
            expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, n1, "expected 0 or 1", what);
        }
    /* the mode is checked before the padding */
    spec_init(&c), c.opts.mode = (rudnn_grid_sample_mode_t)5, c.opts.padding = (rudnn_grid_sample_padding_t)5;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "options.mode = 5", NULL, "mode and padding bad");
    /* BICUBIC takes 2D only */
    {
        const int64_t x[5] = {1, 2, 3, 4, 2}, g[5] = {1, 2, 5, 3, 3}, y[5] = {1, 2, 2, 5, 3};
        for (int p = 0; p < 3; p++)
            for (int ac = 0; ac < 2; ac++) {
                spec_init(&c), set_problem(&c, 5, x, g, y), c.opts.mode = RUDNN_GRID_SAMPLE_BICUBIC;
                c.opts.padding = (rudnn_grid_sample_padding_t)p, c.opts.align_corners = ac;
                char what[64];
                snprintf(what, sizeof what, "BICUBIC 3D, %s, align_corners %d", pad_names[p], ac);
                expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "options.mode BICUBIC", "2D inputs only",
                               "rank 4", what);
            }
        /* even with N = 0 (the rule is the options', not the data's) */
        const int64_t x0[5] = {0, 2, 3, 4, 2}, g0[5] = {0, 2, 5, 3, 3}, y0[5] = {0, 2, 2, 5, 3};
        spec_init(&c), set_problem(&c, 5, x0, g0, y0), c.opts.mode = RUDNN_GRID_SAMPLE_BICUBIC;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "options.mode BICUBIC", "2D inputs only", "BICUBIC 3D, N 0");
    }
}

static void overlaps(void **state)
{
    (void)state;
    callspec_t c;
    /* an output a few bytes into (or exactly at) an input's span */
    static const struct {
        int out, in;
        unsigned ops;
        size_t offset;
    } part[] = {
        {T_Y, T_X, B_FWD, 0},          {T_Y, T_X, B_FWD, 4},          {T_Y, T_X, B_FWD, 476},
        {T_Y, T_GRID, B_FWD, 0},       {T_Y, T_GRID, B_FWD, 668},
        {T_DX, T_X, B_BACK, 0},        {T_DX, T_X, B_BACK, 8},        {T_DX, T_GRID, B_BACK, 4},
        {T_DX, T_DY, B_BACK, 0},       {T_DX, T_DY, B_BACK, 1004},
        {T_DGRID, T_X, B_BACK, 12},    {T_DGRID, T_GRID, B_BACK, 0},  {T_DGRID, T_GRID, B_BACK, 668},
        {T_DGRID, T_DY, B_BACK, 400},
    };
    for (size_t k = 0; k < sizeof part / sizeof part[0]; k++)
        for (int m = 0; m < 3; m++) {
            spec_init(&c), c.opts.mode = (rudnn_grid_sample_mode_t)m;
            c.d[part[k].out].buffer = F.t[part[k].in].buffer;
            c.d[part[k].out].offset = part[k].offset;
            char what[96], n1[48];
            snprintf(what, sizeof what, "%s at byte %zu of %s's buffer, %s", names[part[k].out], part[k].offset,
                     names[part[k].in], mode_names[m]);
            snprintf(n1, sizeof n1, "%s overlaps %s", names[part[k].out], names[part[k].in]);
            expect_reject3(&c, part[k].ops, RUDNN_STATUS_BAD_PARAM, n1, "must be disjoint", NULL, what);
        }
    /* an input's span starting inside the output's */
    spec_init(&c), c.d[T_Y].buffer = F.t[T_X].buffer, c.d[T_Y].offset = 0, c.d[T_X].offset = 1000;
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_PARAM, "y overlaps x", "disjoint", "x inside y's span");
    /* dx and dgrid on each other */
    spec_init(&c), c.d[T_DGRID].buffer = F.t[T_DX].buffer, c.d[T_DGRID].offset = 16;
    expect_reject(&c, B_BACK, RUDNN_STATUS_BAD_PARAM, "dx overlaps dgrid", "disjoint", "dgrid inside dx");
    spec_init(&c), c.d[T_DX].buffer = F.t[T_DGRID].buffer, c.d[T_DX].offset = 0;
    expect_reject(&c, B_BACK, RUDNN_STATUS_BAD_PARAM, "dx overlaps dgrid", "disjoint", "dx at dgrid");
    /* the inputs may share a buffer, even overlap (they are only read) */
    spec_init(&c), c.d[T_GRID].buffer = F.t[T_X].buffer, c.d[T_GRID].offset = 0;
    expect_valid(&c, "grid on x's bytes (two inputs overlapping)");
    /* interleaved: no element shared, but the byte spans cross (the rule is the spans') */
    {
        callspec_t s;
        spec_init(&s);
        rudnn_tensor_t *x = &s.d[T_X], *y = &s.d[T_Y];
        x->strides[3] = 2, x->strides[2] = 8, x->strides[1] = 40, x->strides[0] = 120;
        y->buffer = F.t[T_X].buffer, y->offset = 4;
        y->strides[3] = 2, y->strides[2] = 14, y->strides[1] = 84, y->strides[0] = 252;
        expect_reject3(&s, B_FWD, RUDNN_STATUS_BAD_PARAM, "y overlaps x", NULL, NULL, "y interleaved with x");
    }
    /* a dx view with a NULL dgrid never meets dgrid's rule */
    spec_init(&c), c.null_t[T_DGRID] = 1, c.d[T_DX].buffer = F.t[T_DGRID].buffer, c.d[T_DX].offset = 0;
    expect_valid_in(&c, B_BACK, "dx in dgrid's buffer, dgrid NULL");
}

static void workspace_rules(void **state)
{
    (void)state;
    callspec_t c;
    for (int m = 0; m < 3; m++) {
        spec_init(&c), c.opts.mode = (rudnn_grid_sample_mode_t)m;
        char what[96];
        snprintf(what, sizeof what, "query, %s", mode_names[m]);
        const size_t need = query(&c, what);
        if (family_absent)
            continue; /* the rules below are checked after the kernels are found */
        if (need == 0) {
            rt_failf("%s: no workspace with dx (the workspace rules below prove nothing)", what);
            continue;
        }
        char n1[80];
        /* too small */
        c.ws = F.ws, c.ws_bytes = need - 1;
        snprintf(what, sizeof what, "workspace_bytes one short, %s", mode_names[m]);
        snprintf(n1, sizeof n1, "workspace_bytes = %zu is too small", need - 1);
        expect_reject3(&c, B_BWD, RUDNN_STATUS_BAD_PARAM, n1, "bytes needed",
                       "rudnn_grid_sample_backward_workspace_size", what);
        c.ws_bytes = 0;
        snprintf(what, sizeof what, "workspace_bytes 0, %s", mode_names[m]);
        expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_PARAM, "workspace_bytes = 0 is too small", NULL, what);
        /* past the buffer */
        c.ws_bytes = WS_BYTES + 1;
        snprintf(what, sizeof what, "workspace_bytes past the buffer, %s", mode_names[m]);
        expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_PARAM, "exceeds the workspace buffer", NULL, what);
        /* a tensor inside the first workspace_bytes */
        for (int i = 0; i < T_COUNT; i++) {
            if (i == T_Y)
                continue;
            spec_init(&c), c.opts.mode = (rudnn_grid_sample_mode_t)m, c.ws = F.ws, c.ws_bytes = need;
            c.d[i].buffer = F.ws, c.d[i].offset = i == T_X ? 0 : need - 4;
            snprintf(what, sizeof what, "%s inside the workspace, %s", names[i], mode_names[m]);
            snprintf(n1, sizeof n1, "%s overlaps the first workspace_bytes", names[i]);
            expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_PARAM, n1, "of workspace", what);
            /* the query knows no workspace: valid (if dx and dgrid are not put on each other) */
            expect_valid_in(&c, B_WSZ, what);
        }
    }
    /* a workspace of another context */
    if (!rt_ctx2) {
        printf("    no second context: the workspace's DEVICE_MISMATCH not checked\n");
        return;
    }
    if (family_absent)
        return;
    rudnn_buffer_t other = NULL;
    rt_assert_status(rudnn_buffer_create(rt_ctx2, WS_BYTES, &other), RUDNN_STATUS_SUCCESS);
    spec_init(&c), c.ws = other, c.ws_bytes = 8192;
    expect_reject(&c, B_BWD, RUDNN_STATUS_DEVICE_MISMATCH, "workspace is on another context", NULL,
                  "workspace of ctx2");
    rudnn_queue_synchronize(rt_queue2);
    rudnn_buffer_destroy(other);
}

static void other_context(void **state)
{
    (void)state;
    if (!rt_ctx2) {
        printf("    no second context: DEVICE_MISMATCH not checked\n");
        return;
    }
    for (int i = 0; i < T_COUNT; i++) {
        rt_binding_t saved = rt_bind(rt_ctx2, rt_queue2);
        rt_tensor_t o;
        rt_tensor_create(&o, F.t[i].t.dtype, F.t[i].t.rank, F.t[i].t.dims, 0, 0);
        rt_unbind(saved);
        callspec_t c;
        const unsigned ops = i == T_X || i == T_GRID ? B_ALL : i == T_Y ? B_FWD : B_BACK;
        for (int m = 0; m < 3; m++) {
            spec_init(&c), c.d[i] = o.t, c.opts.mode = (rudnn_grid_sample_mode_t)m;
            char n1[48];
            snprintf(n1, sizeof n1, "%s is on another context", names[i]);
            expect_reject(&c, ops, RUDNN_STATUS_DEVICE_MISMATCH, n1, NULL, "other context");
        }
        saved = rt_bind(rt_ctx2, rt_queue2);
        rt_tensor_destroy(&o);
        rt_unbind(saved);
    }
    callspec_t c;
    spec_init(&c), c.queue = rt_queue2;
    expect_reject(&c, B_ALL, RUDNN_STATUS_DEVICE_MISMATCH, "x is on another context", NULL, "queue of ctx2");
}

static void layouts(void **state)
{
    (void)state;
    callspec_t c;
    for (int i = 0; i < T_COUNT; i++) {
        const unsigned ops = i == T_X || i == T_GRID ? B_ALL : i == T_Y ? B_FWD : B_BACK;
        const size_t elem = rudnn_dtype_size(F.t[i].t.dtype);
        const int r = F.t[i].t.rank;
        /* a view past the end of its buffer */
        spec_init(&c), c.d[i].offset = F.t[i].buffer_bytes - 16;
        expect_reject(&c, ops, RUDNN_STATUS_OUT_OF_BOUNDS, names[i], "needs bytes", "view past its buffer");
        spec_init(&c), c.d[i].offset = SIZE_MAX - (elem - 1);
        expect_reject(&c, ops, RUDNN_STATUS_OUT_OF_BOUNDS, names[i], "its buffer has", "offset near SIZE_MAX");
        /* the N stride reaching past the buffer */
        spec_init(&c), c.d[i].strides[0] = (int64_t)(F.t[i].buffer_bytes / elem);
        expect_reject(&c, ops, RUDNN_STATUS_OUT_OF_BOUNDS, names[i], "needs bytes", "N stride past buffer");
        /* a misaligned offset */
        spec_init(&c), c.d[i].offset = 2;
        expect_reject(&c, ops, RUDNN_STATUS_BAD_PARAM, names[i], "not a multiple of its element size", "offset 2");
        /* strides that describe no view */
        spec_init(&c), c.d[i].strides[0] = 0;
        expect_reject(&c, ops, RUDNN_STATUS_BAD_SHAPE, names[i], "must be positive", "stride 0");
        spec_init(&c), c.d[i].strides[1] = -4;
        expect_reject(&c, ops, RUDNN_STATUS_BAD_SHAPE, names[i], "must be positive", "stride -4");
        spec_init(&c), c.d[i].strides[r - 2] = 1;
        expect_reject(&c, ops, RUDNN_STATUS_BAD_SHAPE, names[i], "overlapping elements", "two dims of stride 1");
        spec_init(&c), c.d[i].strides[0] = INT64_MAX / 2;
        expect_reject(&c, ops, RUDNN_STATUS_OUT_OF_BOUNDS, names[i], "spans more bytes", "N stride huge");
    }
    /* a valid view whose extent just fits (the last byte of the buffer), and one element past it */
    spec_init(&c), c.d[T_GRID].offset = F.t[T_GRID].buffer_bytes - 672;
    expect_valid_in(&c, B_ALL, "grid ending at its buffer's last byte");
    spec_init(&c), c.d[T_GRID].offset = F.t[T_GRID].buffer_bytes - 668;
    expect_reject(&c, B_ALL, RUDNN_STATUS_OUT_OF_BOUNDS, "grid", "needs bytes", "grid one element past its buffer");
    spec_init(&c), c.d[T_DGRID].offset = F.t[T_DGRID].buffer_bytes - 668;
    expect_reject(&c, B_BACK, RUDNN_STATUS_OUT_OF_BOUNDS, "dgrid", "needs bytes", "dgrid one element past its buffer");
    /* the descriptor's rules come before the shape rules: a bad view with a bad shape names the view */
    {
        const int64_t g[4] = {2, 6, 7, 3};
        spec_init(&c), rt_reshape(&c.d[T_GRID], 4, g), c.d[T_GRID].offset = 2;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "grid byte offset 2", NULL, "misaligned grid of a bad shape");
    }
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, rt_test_log_setup, rt_test_log_teardown)

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        T(options_init_defaults), T(valid_calls), T(options_null_is_default), T(empty_problems), T(null_arguments),
        T(ranks),                 T(dims_rules),  T(dtypes),                  T(enums),          T(overlaps),
        T(workspace_rules),       T(other_context), T(layouts),
    };
    rt_set_filters(argc, argv);
    rt_open_or_skip("grid_sample-contract");
    if (rt_group_setup_second(NULL))
        return 1;
    rt_print_device("grid_sample-contract");
    group_setup();
    {
        callspec_t c;
        spec_init(&c);
        size_t b;
        const rudnn_status_t st = call_op(&c, FWD, &b);
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", rudnn_last_error());
        rudnn_queue_synchronize(rt_queue);
        contract_fixture_restore(&F);
        family_absent = st == RUDNN_STATUS_NOT_SUPPORTED;
        if (family_absent)
            printf("    the backend has no grid-sample kernels (\"%s\"): valid calls must answer NOT_SUPPORTED\n", msg);
        else if (st)
            printf("    the fixture's forward returned %s (\"%s\"): the success paths will fail\n",
                   rudnn_status_string(st), msg);
    }
    const int failed = cmocka_run_group_tests_name("grid_sample-contract", tests, NULL, group_teardown);
    return rt_exit_code(failed);
}
