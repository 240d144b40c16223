/* Contract tests of pooling (include/rudnn/pooling.h, ops/pooling.c) on the default backend. Every
 * rejected call returns the status of its rule (BAD_PARAM for NULLs, options out of range, enums,
 * indices with an average and overlaps; BAD_SHAPE for ranks, dims, strides that describe no view
 * and outputs of the wrong shape; BAD_DTYPE; DEVICE_MISMATCH for another context's tensor or queue;
 * OUT_OF_BOUNDS for a view past its buffer), a message that names the op ("pool_forward",
 * "pool_backward", "pool_output_dims"), the argument and the rule, and writes nothing: every buffer
 * of the fixture (the outputs holding a sentinel) is read back byte for byte after the call, and a
 * rejected rudnn_pool_output_dims leaves y_dims as it was. Each rule is checked on every op it
 * applies to.
 *
 * The fixture: one buffer a tensor (1024 bytes after each), a 2D MAX pooling with every option but
 * dilation in play: x, dx F32 [2, 3, 5, 6]; y, dy F32 [2, 3, 3, 7]; indices I64 [2, 3, 3, 7]
 * (window {3, 2}, stride {2, 1}, padding {1, 1}: P_H (5 + 2 - 3) / 2 + 1 = 3, P_W 6 + 2 - 2 + 1 = 7).
 * The averages take the same shapes. Each test edits a copy of the descriptors; views of other
 * shapes (1D, 3D, options NULL, in place) lie in the same buffers; x's and dy's buffers hold values
 * throughout (slack included), the outputs' the sentinel. The calls pass indices to a MAX forward
 * and x to a MAX backward, and neither to the averages, unless a test says otherwise: an average
 * backward given x takes it (checked as for MAX, not read), a MAX backward without x is rejected.
 * The success paths: every mode, F16 and BF16, with and without indices, 1D and 3D, options NULL,
 * option entries past d ignored, ceil_mode, MAX with dilation, strided and channels-last views,
 * inputs sharing memory, N = 0 and C = 0, rudnn_pool_options_init and rudnn_pool_output_dims.
 *
 * Usage: test_pooling_contract [glob] */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/pooling.h>

#include "common.h"
#include "contract_fixture.h"
#include "operand.h"

enum { T_X, T_Y, T_IDX, T_DY, T_DX, T_COUNT };
static const char *const names[T_COUNT] = {"x", "y", "indices", "dy", "dx"};

enum { FWD, BWD, DIRS };
static const char *const dir_ops[DIRS] = {"pool_forward", "pool_backward"};
#define OP_DIMS "pool_output_dims"
#define B_FWD (1u << FWD)
#define B_BWD (1u << BWD)
#define B_ALL (B_FWD | B_BWD)

#define SLACK 1024
static const int64_t dims_x[4] = {2, 3, 5, 6}, dims_y[4] = {2, 3, 3, 7};

static contract_fixture_t F; /* the tensors' buffers (T_ order) guarded */

/* ---- the fixture and the calls ------------------------------------------------------------- */

static int is_output(int i) { return i == T_Y || i == T_IDX || i == T_DX; }

/* x's and dy's whole buffers (slack included) hold values of dtype, so that every view of them
 * reads data, never the sentinel. */
static void fill_inputs_as(rudnn_dtype_t dtype)
{
    rt_rng_t r;
    rt_rng_seed(&r, 23);
    const int in[2] = {T_X, T_DY};
    for (int k = 0; k < 2; k++) {
        rt_tensor_t whole = F.t[in[k]];
        const int64_t n = (int64_t)(whole.buffer_bytes / rudnn_dtype_size(dtype));
        rt_assert_status(rudnn_tensor_init(&whole.t, whole.buffer, 0, dtype, 1, &n), RUDNN_STATUS_SUCCESS);
        rt_tensor_fill_uniform(&whole, &r, -1.0, 1.0);
    }
}

static void fill_inputs(void) { fill_inputs_as(RUDNN_F32); }

static int group_setup(void **state)
{
    (void)state;
    const int64_t *dims[T_COUNT] = {dims_x, dims_y, dims_y, dims_y, dims_x};
    const rudnn_dtype_t dtypes[T_COUNT] = {RUDNN_F32, RUDNN_F32, RUDNN_I64, RUDNN_F32, RUDNN_F32};
    contract_fixture_setup(&F, T_COUNT, names, dtypes, NULL, dims, SLACK, 0, fill_inputs);
    return 0;
}

static int group_teardown(void **state) { return contract_fixture_teardown(&F, state); }

typedef struct callspec {
    rudnn_queue_t queue;
    rudnn_tensor_t d[T_COUNT];
    int null_t[T_COUNT]; /* pass NULL for this tensor */
    rudnn_pool_options_t opts;
    int null_options;
    int fwd_idx; /* -1: indices for MAX, NULL for the averages; 0: NULL; 1: indices */
    int bwd_x;   /* -1: x for MAX, NULL for the averages; 0: NULL; 1: x */
} callspec_t;

static void fixture_options(rudnn_pool_options_t *o)
{
    rudnn_pool_options_init(o);
    o->window[0] = 3, o->window[1] = 2;
    o->stride[0] = 2, o->stride[1] = 1;
    o->padding[0] = 1, o->padding[1] = 1;
}

static void spec_init(callspec_t *c)
{
    memset(c, 0, sizeof *c);
    c->queue = rt_queue;
    for (int i = 0; i < T_COUNT; i++)
        c->d[i] = F.t[i].t;
    fixture_options(&c->opts);
    c->fwd_idx = c->bwd_x = -1;
}

/* Every descriptor to the shapes of another problem (each in its own fixture buffer). */
static void set_problem(callspec_t *c, int rank, const int64_t *x, const int64_t *y)
{
    rt_reshape(&c->d[T_X], rank, x), rt_reshape(&c->d[T_DX], rank, x);
    rt_reshape(&c->d[T_Y], rank, y), rt_reshape(&c->d[T_DY], rank, y), rt_reshape(&c->d[T_IDX], rank, y);
}

static int is_max(const callspec_t *c) { return c->null_options || c->opts.mode == RUDNN_POOL_MAX; }

static const rudnn_tensor_t *tp(const callspec_t *c, int i) { return c->null_t[i] ? NULL : &c->d[i]; }

static const rudnn_tensor_t *fwd_indices(const callspec_t *c)
{
    const int take = c->fwd_idx < 0 ? is_max(c) : c->fwd_idx;
    return take ? tp(c, T_IDX) : NULL;
}

static const rudnn_tensor_t *bwd_x(const callspec_t *c)
{
    const int take = c->bwd_x < 0 ? is_max(c) : c->bwd_x;
    return take ? tp(c, T_X) : NULL;
}

static rudnn_status_t call_op(const callspec_t *c, int dir)
{
    const rudnn_pool_options_t *o = c->null_options ? NULL : &c->opts;
    if (dir == FWD)
        return rudnn_pool_forward(c->queue, tp(c, T_X), o, tp(c, T_Y), fwd_indices(c));
    return rudnn_pool_backward(c->queue, bwd_x(c), tp(c, T_DY), o, tp(c, T_DX));
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

/* Buffer b holds an output of op dir in c. */
static int is_output_buffer(const callspec_t *c, int dir, rudnn_buffer_t b)
{
    if (dir == FWD)
        return (!c->null_t[T_Y] && c->d[T_Y].buffer == b) || (fwd_indices(c) && c->d[T_IDX].buffer == b);
    return !c->null_t[T_DX] && c->d[T_DX].buffer == b;
}

static void repoison_outputs(void)
{
    rudnn_queue_synchronize(rt_queue);
    rt_tensor_poison(&F.t[T_Y]), rt_tensor_poison(&F.t[T_IDX]), rt_tensor_poison(&F.t[T_DX]);
}

/* Counts the elements of the view t (any strides) still holding the sentinel of its dtype in
 * snapshot, a copy of its whole buffer. */
static int64_t poisoned_in_view(const rudnn_tensor_t *t, const uint8_t *snapshot)
{
    const size_t elem = rudnn_dtype_size(t->dtype);
    const uint32_t poison = rt_poison_bits(t->dtype);
    const int64_t n = rudnn_tensor_numel(t);
    int64_t left = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t rem = k, at = 0;
        for (int i = t->rank - 1; i >= 0; i--) {
            at += (rem % t->dims[i]) * t->strides[i];
            rem /= t->dims[i];
        }
        const uint8_t *p = snapshot + t->offset + (size_t)at * elem;
        uint64_t bits = 0;
        memcpy(&bits, p, elem < 8 ? elem : 8);
        uint64_t want = elem == 8 ? 0xa5a5a5a5a5a5a5a5ull : poison;
        left += bits == want;
    }
    return left;
}

/* The outputs' buffers poisoned with the sentinel of the views' dtypes (F16, BF16 views of the
 * fixture's F32 buffers), so that an element left unwritten is seen. */
static void poison_outputs_as(const callspec_t *c, int dir)
{
    const rudnn_tensor_t *outs[2] = {dir == FWD ? tp(c, T_Y) : tp(c, T_DX), dir == FWD ? fwd_indices(c) : NULL};
    for (int k = 0; k < 2; k++)
        for (int i = 0; outs[k] && i < T_COUNT; i++)
            if (F.t[i].buffer == outs[k]->buffer && outs[k]->dtype != F.t[i].t.dtype && is_output(i)) {
                rt_tensor_t as = F.t[i];
                as.t.dtype = outs[k]->dtype;
                rt_tensor_poison(&as);
            }
}

/* c is valid for every op of dirs: SUCCESS, rudnn_last_error() "", only the op's outputs' buffers
 * written, and (written != 0) every element of each output written. */
static void expect_valid_in(const callspec_t *c, unsigned dirs, int check_written, const char *what)
{
    for (int dir = 0; dir < DIRS; dir++) {
        if (!((dirs >> dir) & 1))
            continue;
        poison_outputs_as(c, dir);
        rt_guard_begin(&F.guard);
        const rudnn_status_t st = call_op(c, dir);
        if (st) {
            rt_failf("%s [%s]: returned %s (\"%s\")", what, dir_ops[dir], rudnn_status_string(st),
                      rudnn_last_error());
        } else if (rudnn_last_error()[0]) {
            rt_failf("%s [%s]: success left the message \"%s\"", what, dir_ops[dir], rudnn_last_error());
        }
        if (rudnn_queue_synchronize(rt_queue))
            rt_failf("%s [%s]: the queue's work failed: %s", what, dir_ops[dir], rudnn_last_error());
        rt_guard_changed(&F.guard);
        for (int i = 0; i < F.guard.count; i++)
            if (F.guard.items[i].changed && !is_output_buffer(c, dir, F.guard.items[i].buffer))
                rt_failf("%s [%s]: an accepted call wrote to %s's buffer, which holds no output", what,
                          dir_ops[dir], F.guard.items[i].name);
        if (!st && check_written) {
            const rudnn_tensor_t *outs[2] = {dir == FWD ? tp(c, T_Y) : tp(c, T_DX), dir == FWD ? fwd_indices(c) : NULL};
            const char *on[2] = {dir == FWD ? "y" : "dx", "indices"};
            for (int k = 0; k < 2; k++) {
                if (!outs[k])
                    continue;
                size_t bytes = 0;
                for (int i = 0; i < T_COUNT; i++)
                    if (F.t[i].buffer == outs[k]->buffer)
                        bytes = F.t[i].buffer_bytes;
                uint8_t *snap = rt_buffer_snapshot(outs[k]->buffer, bytes);
                const int64_t left = poisoned_in_view(outs[k], snap);
                if (left)
                    rt_failf("%s [%s]: %lld elements of %s not written", what, dir_ops[dir], (long long)left, on[k]);
                free(snap);
            }
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
    rudnn_pool_options_t o;
    memset(&o, 0x7b, sizeof o);
    rudnn_pool_options_init(&o);
    if (o.mode != RUDNN_POOL_MAX)
        rt_failf("options_init: mode %d, expected RUDNN_POOL_MAX", (int)o.mode);
    for (int i = 0; i < RUDNN_POOL_MAX_SPATIAL; i++)
        if (o.window[i] != 1 || o.stride[i] != 1 || o.padding[i] != 0 || o.dilation[i] != 1)
            rt_failf("options_init: dim %d: window %lld, stride %lld, padding %lld, dilation %lld; expected 1, 1, "
                      "0, 1",
                      i, (long long)o.window[i], (long long)o.stride[i], (long long)o.padding[i],
                      (long long)o.dilation[i]);
    if (o.ceil_mode != 0)
        rt_failf("options_init: ceil_mode %d, expected 0", o.ceil_mode);
}

static void valid_calls(void **state)
{
    (void)state;
    callspec_t c;
    static const char *const mode_names[3] = {"MAX", "AVG_INCLUDE_PAD", "AVG_EXCLUDE_PAD"};
    for (int m = 0; m < 3; m++) {
        spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m;
        char what[64];
        snprintf(what, sizeof what, "the fixture, %s", mode_names[m]);
        expect_valid(&c, what);
    }
    spec_init(&c), c.fwd_idx = 0;
    expect_valid_in(&c, B_FWD, 1, "MAX without indices");
    /* F16 and BF16 (indices stay I64) */
    const rudnn_dtype_t dts[2] = {RUDNN_F16, RUDNN_BF16};
    for (int k = 0; k < 2; k++)
        for (int m = 0; m < 3; m++) {
            spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m;
            c.d[T_X].dtype = c.d[T_Y].dtype = c.d[T_DY].dtype = c.d[T_DX].dtype = dts[k];
            char what[64];
            snprintf(what, sizeof what, "all %s, %s", rudnn_dtype_name(dts[k]), mode_names[m]);
            fill_inputs_as(dts[k]);
            expect_valid(&c, what);
        }
    fill_inputs();
    /* entries past d of the option arrays are ignored */
    spec_init(&c), c.opts.window[2] = 0, c.opts.stride[2] = -1, c.opts.padding[2] = -5;
    c.opts.dilation[2] = INT64_MIN;
    expect_valid(&c, "option entries past d ignored");
    /* options NULL: window 1, y and dy of x's shape */
    spec_init(&c), set_problem(&c, 4, dims_x, dims_x), c.null_options = 1;
    expect_valid(&c, "options NULL (window 1)");
    /* MAX with dilation {2, 2}: H (5 + 2 - 4 - 1) / 2 + 1 = 2, W 6 + 2 - 2 - 1 + 1 = 6 */
    {
        const int64_t y[4] = {2, 3, 2, 6};
        spec_init(&c), set_problem(&c, 4, dims_x, y), c.opts.dilation[0] = c.opts.dilation[1] = 2;
        expect_valid(&c, "MAX with dilation 2");
    }
    /* ceil_mode, x [2, 3, 6, 5], stride {2, 3}: H (S 6, window 3, padding 1): 5 / 2 -> floor 3,
     * ceil 4 (the 4th window starts at 6 - 1 = 5 < S: kept); W (S 5, window 2, padding 1): 5 / 3 ->
     * floor 2, ceil 3, but the 3rd would start at 6 - 1 = 5 >= S: dropped, 2 */
    {
        const int64_t x[4] = {2, 3, 6, 5}, yf[4] = {2, 3, 3, 2}, yc[4] = {2, 3, 4, 2};
        spec_init(&c), set_problem(&c, 4, x, yf), c.opts.stride[1] = 3;
        for (int m = 0; m < 3; m++) {
            c.opts.mode = (rudnn_pool_mode_t)m;
            expect_valid(&c, "floor mode, S 6 x 5");
        }
        spec_init(&c), set_problem(&c, 4, x, yc), c.opts.stride[1] = 3, c.opts.ceil_mode = 1;
        for (int m = 0; m < 3; m++) {
            c.opts.mode = (rudnn_pool_mode_t)m;
            expect_valid(&c, "ceil mode, S 6 x 5");
        }
        /* the floor shape under ceil_mode is wrong */
        spec_init(&c), set_problem(&c, 4, x, yf), c.opts.stride[1] = 3, c.opts.ceil_mode = 1;
        expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "y", "[2, 3, 4, 2]", "floor y under ceil_mode");
        expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dy", "[2, 3, 4, 2]", "floor dy under ceil_mode");
    }
    /* 1D: x [2, 3, 7], window 3, stride 2, padding 1 -> y [2, 3, 4] (entries 1 and 2 ignored) */
    {
        const int64_t x[3] = {2, 3, 7}, y[3] = {2, 3, 4};
        spec_init(&c), set_problem(&c, 3, x, y);
        c.opts.window[1] = 0, c.opts.stride[1] = 0, c.opts.padding[1] = 9;
        for (int m = 0; m < 3; m++) {
            c.opts.mode = (rudnn_pool_mode_t)m;
            expect_valid(&c, "1D");
        }
    }
    /* 3D: x [1, 2, 3, 4, 5], window {2, 2, 2}, padding {1, 0, 1}, stride {1, 2, 2} -> y [1, 2, 4, 2, 3] */
    {
        const int64_t x[5] = {1, 2, 3, 4, 5}, y[5] = {1, 2, 4, 2, 3};
        spec_init(&c), set_problem(&c, 5, x, y);
        for (int i = 0; i < 3; i++)
            c.opts.window[i] = 2;
        c.opts.padding[0] = 1, c.opts.padding[1] = 0, c.opts.padding[2] = 1;
        c.opts.stride[0] = 1, c.opts.stride[1] = 2, c.opts.stride[2] = 2;
        for (int m = 0; m < 3; m++) {
            c.opts.mode = (rudnn_pool_mode_t)m;
            expect_valid(&c, "3D");
        }
    }
    /* strided views: x with padded rows, y and dy channels-last ([N, H, W, C] memory) */
    spec_init(&c), c.d[T_X].strides[2] = 7, c.d[T_X].strides[1] = 35, c.d[T_X].strides[0] = 105;
    expect_valid_in(&c, B_ALL, 1, "x with padded rows");
    {
        spec_init(&c);
        const int yi[3] = {T_Y, T_DY, T_IDX};
        for (int k = 0; k < 3; k++) {
            rudnn_tensor_t *t = &c.d[yi[k]];
            t->strides[1] = 1, t->strides[3] = 3, t->strides[2] = 21, t->strides[0] = 63;
        }
        c.d[T_DX].strides[1] = 1, c.d[T_DX].strides[3] = 3, c.d[T_DX].strides[2] = 18, c.d[T_DX].strides[0] = 90;
        for (int m = 0; m < 3; m++) {
            c.opts.mode = (rudnn_pool_mode_t)m;
            expect_valid(&c, "channels-last y, dy, indices, dx");
        }
    }
    /* inputs may share memory (read only): dy over x's bytes in a MAX backward */
    spec_init(&c), c.d[T_DY].buffer = F.t[T_X].buffer, c.d[T_DY].offset = 8;
    expect_valid_in(&c, B_BWD, 1, "dy over x's bytes");
    /* outputs right after an input in its buffer, touching no byte of it */
    spec_init(&c), c.d[T_Y].buffer = F.t[T_X].buffer, c.d[T_Y].offset = 180 * 4;
    expect_valid_in(&c, B_FWD, 1, "y right after x in its buffer");
    spec_init(&c), c.d[T_DX].buffer = F.t[T_DY].buffer, c.d[T_DX].offset = 126 * 4;
    expect_valid_in(&c, B_BWD, 1, "dx right after dy in its buffer");
    /* a valid call right after a rejected one leaves no message */
    spec_init(&c), c.queue = NULL;
    (void)call_op(&c, FWD);
    spec_init(&c);
    expect_valid_in(&c, B_FWD, 0, "valid after rejected");
}

/* N = 0 or C = 0: success, nothing written. */
static void empty_batch(void **state)
{
    (void)state;
    const int64_t xn[4] = {0, 3, 5, 6}, yn[4] = {0, 3, 3, 7}, xc[4] = {2, 0, 5, 6}, yc[4] = {2, 0, 3, 7};
    for (int k = 0; k < 2; k++)
        for (int m = 0; m < 3; m++) {
            callspec_t c;
            spec_init(&c), set_problem(&c, 4, k ? xc : xn, k ? yc : yn), c.opts.mode = (rudnn_pool_mode_t)m;
            for (int dir = 0; dir < DIRS; dir++) {
                rt_guard_begin(&F.guard);
                const rudnn_status_t st = call_op(&c, dir);
                if (st)
                    rt_failf("%s = 0, mode %d [%s]: %s (\"%s\")", k ? "C" : "N", m, dir_ops[dir],
                              rudnn_status_string(st), rudnn_last_error());
                if (rt_guard_changed(&F.guard)) {
                    rt_failf("%s = 0, mode %d [%s]: a buffer was written", k ? "C" : "N", m, dir_ops[dir]);
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
    for (int m = 0; m < 3; m++) {
        spec_init(&c), c.queue = NULL, c.opts.mode = (rudnn_pool_mode_t)m;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "queue", "NULL", "queue NULL");
    }
    /* each required tensor */
    spec_init(&c), c.null_t[T_X] = 1;
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_PARAM, "x", "NULL", "x NULL");
    spec_init(&c), c.null_t[T_Y] = 1;
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_PARAM, "y", "NULL", "y NULL");
    spec_init(&c), c.null_t[T_DY] = 1;
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_PARAM, "dy", "NULL", "dy NULL");
    spec_init(&c), c.null_t[T_DX] = 1;
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_PARAM, "dx", "NULL", "dx NULL");
    for (int m = 1; m < 3; m++) { /* the averages too */
        spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m, c.null_t[T_X] = 1;
        expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_PARAM, "x", "NULL", "x NULL (average)");
        spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m, c.null_t[T_Y] = 1;
        expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_PARAM, "y", "NULL", "y NULL (average)");
        spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m, c.null_t[T_DY] = 1;
        expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_PARAM, "dy", "NULL", "dy NULL (average)");
        spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m, c.null_t[T_DX] = 1;
        expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_PARAM, "dx", "NULL", "dx NULL (average)");
    }
    /* a tensor without a buffer */
    for (int i = 0; i < T_COUNT; i++) {
        spec_init(&c), c.d[i].buffer = NULL;
        const unsigned dirs = i == T_X ? B_ALL : i == T_Y || i == T_IDX ? B_FWD : B_BWD;
        expect_reject(&c, dirs, RUDNN_STATUS_BAD_PARAM, names[i], "no buffer", "no buffer");
    }
    /* options NULL means the defaults: the fixture's shapes are then wrong (y must be x's shape) */
    spec_init(&c), c.null_options = 1;
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "y", "[2, 3, 5, 6]", "options NULL, fixture shapes");
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dy", "[2, 3, 5, 6]", "options NULL, fixture shapes");
}

static void ranks(void **state)
{
    (void)state;
    callspec_t c;
    /* rank 2 and 6, every tensor alike */
    const int64_t x2[2] = {2, 3}, x6[6] = {2, 3, 5, 6, 1, 1}, y6[6] = {2, 3, 3, 7, 1, 1};
    spec_init(&c), set_problem(&c, 2, x2, x2);
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "x has rank 2", "3, 4 or 5", "rank 2");
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dx has rank 2", "3, 4 or 5", "rank 2");
    spec_init(&c), set_problem(&c, 6, x6, y6);
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "x has rank 6", "3, 4 or 5", "rank 6");
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dx has rank 6", "3, 4 or 5", "rank 6");
    /* a rank no descriptor has */
    spec_init(&c), c.d[T_X].rank = 9, c.d[T_DX].rank = -1;
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "x has rank 9", NULL, "rank 9");
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dx has rank -1", NULL, "rank -1");
    c.opts.mode = RUDNN_POOL_AVG_INCLUDE_PAD;
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dx has rank -1", NULL, "rank -1 (average)");
    spec_init(&c), c.d[T_X].rank = 9; /* MAX backward's x */
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "x has rank 9", NULL, "x rank 9 (MAX backward)");
    /* ranks that disagree with x's (dx's for the backward) */
    const int64_t y5[5] = {2, 3, 3, 7, 1}, y3[3] = {2, 3, 3};
    spec_init(&c), rt_reshape(&c.d[T_Y], 5, y5), rt_reshape(&c.d[T_DY], 5, y5);
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "y has shape [2, 3, 3, 7, 1]", "expected [2, 3, 3, 7]",
                  "y rank 5");
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dy has shape [2, 3, 3, 7, 1]", "expected [2, 3, 3, 7]",
                  "dy rank 5");
    spec_init(&c), rt_reshape(&c.d[T_Y], 3, y3), rt_reshape(&c.d[T_DY], 3, y3);
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "y has shape [2, 3, 3]", "expected [2, 3, 3, 7]", "y rank 3");
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dy has shape [2, 3, 3]", "expected [2, 3, 3, 7]", "dy rank 3");
    spec_init(&c), rt_reshape(&c.d[T_IDX], 5, y5);
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "indices has shape [2, 3, 3, 7, 1]", "expected [2, 3, 3, 7]",
                  "indices rank 5");
    /* MAX backward: x's rank against dx's */
    const int64_t x5[5] = {2, 3, 5, 6, 1};
    spec_init(&c), rt_reshape(&c.d[T_X], 5, x5);
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "x has shape [2, 3, 5, 6, 1]", "expected [2, 3, 5, 6]",
                  "x rank 5 in MAX backward");
}

static void dtypes(void **state)
{
    (void)state;
    callspec_t c;
    /* non-float dtypes, x, y, dy, dx alike */
    const rudnn_dtype_t bad[] = {RUDNN_I8, RUDNN_I32, RUDNN_U32, RUDNN_I64, RUDNN_BOOL, RUDNN_I4};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        for (int m = 0; m < 3; m++) {
            spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m;
            c.d[T_X].dtype = c.d[T_Y].dtype = c.d[T_DY].dtype = c.d[T_DX].dtype = bad[k];
            char what[64];
            snprintf(what, sizeof what, "x, y, dy, dx %s, mode %d", rudnn_dtype_name(bad[k]), m);
            expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_DTYPE, "x has", "expected f32, f16 or bf16", what);
            expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_DTYPE, "dx has", "expected f32, f16 or bf16", what);
        }
    /* not a dtype at all */
    spec_init(&c), c.d[T_Y].dtype = (rudnn_dtype_t)99, c.d[T_DX].dtype = (rudnn_dtype_t)-1;
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_DTYPE, "y has dtype 99", "not a rudnn dtype", "y dtype 99");
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_DTYPE, "dx has dtype -1", "not a rudnn dtype", "dx dtype -1");
    /* one tensor of another float dtype, or an integer one among f32 */
    static const struct {
        int tensor;
        unsigned dirs;
        rudnn_dtype_t dt;
    } one[] = {
        {T_Y, B_FWD, RUDNN_F16},  {T_Y, B_FWD, RUDNN_BF16}, {T_Y, B_FWD, RUDNN_I32},
        {T_DX, B_BWD, RUDNN_F16}, {T_DX, B_BWD, RUDNN_BF16}, {T_DX, B_BWD, RUDNN_I64},
        {T_DY, B_BWD, RUDNN_BF16}, {T_X, B_BWD, RUDNN_F16},  /* MAX backward's x */
    };
    for (size_t k = 0; k < sizeof one / sizeof one[0]; k++) {
        spec_init(&c), c.d[one[k].tensor].dtype = one[k].dt;
        char what[64];
        snprintf(what, sizeof what, "%s %s among f32", names[one[k].tensor], rudnn_dtype_name(one[k].dt));
        expect_reject3(&c, one[k].dirs, RUDNN_STATUS_BAD_DTYPE, names[one[k].tensor], rudnn_dtype_name(one[k].dt),
                       "f32", what);
    }
    /* every float tensor f16 but x (forward) */
    spec_init(&c), c.d[T_X].dtype = RUDNN_F16;
    expect_reject3(&c, B_FWD, RUDNN_STATUS_BAD_DTYPE, "y", "f32", "f16", "x f16, y f32");
}

static void indices_rules(void **state)
{
    (void)state;
    callspec_t c;
    /* not I64 */
    const rudnn_dtype_t bad[] = {RUDNN_I32, RUDNN_U32, RUDNN_F32, RUDNN_F16};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        spec_init(&c), c.d[T_IDX].dtype = bad[k];
        char what[64];
        snprintf(what, sizeof what, "indices %s", rudnn_dtype_name(bad[k]));
        expect_reject3(&c, B_FWD, RUDNN_STATUS_BAD_DTYPE, "indices", rudnn_dtype_name(bad[k]), "i64", what);
    }
    /* with the averages */
    for (int m = 1; m < 3; m++) {
        spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m, c.fwd_idx = 1;
        expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_PARAM, "indices", "MAX", "indices with an average");
    }
    /* wrong shape: each dim, and the rank */
    static const struct {
        int dim;
        int64_t value;
    } mis[] = {{0, 1}, {1, 2}, {2, 2}, {2, 4}, {3, 6}, {3, 8}};
    for (size_t k = 0; k < sizeof mis / sizeof mis[0]; k++) {
        int64_t d[4];
        memcpy(d, dims_y, sizeof d);
        d[mis[k].dim] = mis[k].value;
        spec_init(&c), rt_reshape(&c.d[T_IDX], 4, d);
        expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "indices has shape", "expected [2, 3, 3, 7]",
                      "indices mismatched");
    }
    /* indices of y's shape but y wrong: y is named (it is checked against the rule first) */
    {
        const int64_t y[4] = {2, 3, 3, 6};
        spec_init(&c), rt_reshape(&c.d[T_Y], 4, y), rt_reshape(&c.d[T_IDX], 4, y);
        expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "has shape [2, 3, 3, 6]", "expected [2, 3, 3, 7]",
                      "y and indices mismatched alike");
    }
    /* indices past its buffer, of another context: in other tests (layouts, other_context) */
}

static void modes_and_options(void **state)
{
    (void)state;
    callspec_t c;
    /* the mode enum */
    const int bad_mode[] = {-1, 3, 1000, INT_MIN, INT_MAX};
    for (int k = 0; k < 5; k++) {
        spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)bad_mode[k];
        char what[64];
        snprintf(what, sizeof what, "mode %d", bad_mode[k]);
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "mode", "RUDNN_POOL_AVG_EXCLUDE_PAD", what);
        c.fwd_idx = c.bwd_x = 1; /* with the MAX tensors given */
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "mode", "RUDNN_POOL_AVG_EXCLUDE_PAD", what);
    }
    /* window, stride, dilation below 1 or past RUDNN_POOL_MAX_PARAM; padding below 0 or past window / 2 */
    static const struct {
        int which, dim; /* 0 window, 1 stride, 2 padding, 3 dilation */
        int64_t value;
        const char *n1, *n2;
    } bad[] = {
        {0, 0, 0, "options.window[0] = 0", NULL},
        {0, 1, -1, "options.window[1] = -1", NULL},
        {0, 0, INT64_MIN, "options.window[0]", NULL},
        {0, 1, RUDNN_POOL_MAX_PARAM + 1, "options.window[1] = 16777217", NULL},
        {0, 0, INT64_MAX, "options.window[0]", NULL},
        {1, 0, 0, "options.stride[0] = 0", NULL},
        {1, 1, -2, "options.stride[1] = -2", NULL},
        {1, 1, RUDNN_POOL_MAX_PARAM + 1, "options.stride[1] = 16777217", NULL},
        {1, 0, INT64_MAX, "options.stride[0]", NULL},
        {2, 0, -1, "options.padding[0] = -1", NULL},
        {2, 1, INT64_MIN, "options.padding[1]", NULL},
        {2, 0, 2, "options.padding[0] = 2", "window"},  /* window 3: at most 1 */
        {2, 1, 2, "options.padding[1] = 2", "window"},  /* window 2: at most 1 */
        {2, 1, INT64_MAX, "options.padding[1]", NULL},
        {3, 0, 0, "options.dilation[0] = 0", NULL},
        {3, 1, -3, "options.dilation[1] = -3", NULL},
        {3, 0, RUDNN_POOL_MAX_PARAM + 1, "options.dilation[0] = 16777217", NULL},
        {3, 1, INT64_MAX, "options.dilation[1]", NULL},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        for (int m = 0; m < 3; m++) {
            spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m;
            int64_t *field = bad[k].which == 0   ? c.opts.window
                             : bad[k].which == 1 ? c.opts.stride
                             : bad[k].which == 2 ? c.opts.padding
                                                 : c.opts.dilation;
            field[bad[k].dim] = bad[k].value;
            char what[80];
            snprintf(what, sizeof what, "option %d[%d] = %lld, mode %d", bad[k].which, bad[k].dim,
                     (long long)bad[k].value, m);
            expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, bad[k].n1, bad[k].n2, what);
        }
    /* padding is checked against the window: a window of 1 takes no padding, a window of 4 takes 2 */
    spec_init(&c), c.opts.window[1] = 1;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "options.padding[1] = 1", "window", "padding 1, window 1");
    {
        /* W: window 4, padding 2: 6 + 4 - 4 + 1 = 7 */
        spec_init(&c), c.opts.window[1] = 4, c.opts.padding[1] = 2;
        expect_valid(&c, "padding 2, window 4");
        c.opts.padding[1] = 3;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "options.padding[1] = 3", "window", "padding 3, window 4");
    }
    /* dilation != 1 with the averages */
    for (int m = 1; m < 3; m++)
        for (int dim = 0; dim < 2; dim++) {
            spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m, c.opts.dilation[dim] = 2;
            char n1[32];
            snprintf(n1, sizeof n1, "options.dilation[%d] = 2", dim);
            expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, n1, "average", "dilation 2 with an average");
        }
    /* ... but MAX takes it: with the fixture's shapes the output is then wrong, not the option */
    spec_init(&c), c.opts.dilation[1] = 2;
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "y has shape [2, 3, 3, 7]", "expected [2, 3, 3, 6]",
                  "MAX dilation 2, fixture y");
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dy has shape [2, 3, 3, 7]", "expected [2, 3, 3, 6]",
                  "MAX dilation 2, fixture dy");
    /* ceil_mode not 0 or 1 */
    const int bad_ceil[] = {2, -1, INT_MAX, INT_MIN};
    for (int k = 0; k < 4; k++)
        for (int m = 0; m < 3; m++) {
            spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m, c.opts.ceil_mode = bad_ceil[k];
            expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "ceil_mode", "0 or 1", "bad ceil_mode");
        }
}

static void output_shapes(void **state)
{
    (void)state;
    callspec_t c;
    /* y (forward) and dy (backward) against rudnn_pool_output_dims of x (dx): N, C and each P */
    static const struct {
        int dim;
        int64_t value;
    } ymis[] = {{0, 1}, {1, 2}, {1, 4}, {2, 2}, {2, 4}, {3, 6}, {3, 8}};
    for (size_t k = 0; k < sizeof ymis / sizeof ymis[0]; k++)
        for (int m = 0; m < 3; m++) {
            int64_t y[4];
            memcpy(y, dims_y, sizeof y);
            y[ymis[k].dim] = ymis[k].value;
            spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m;
            rt_reshape(&c.d[T_Y], 4, y), rt_reshape(&c.d[T_DY], 4, y), rt_reshape(&c.d[T_IDX], 4, y);
            expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "y has shape", "expected [2, 3, 3, 7]", "y mismatched");
            expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dy has shape", "expected [2, 3, 3, 7]",
                          "dy mismatched");
        }
    /* backward: dx decides P; a dx whose P is not dy's */
    {
        const int64_t dx7[4] = {2, 3, 7, 6}, dx5[4] = {2, 3, 5, 5}, dxn[4] = {1, 3, 5, 6}, dxc[4] = {2, 2, 5, 6};
        const int64_t *dxs[4] = {dx7, dx5, dxn, dxc};
        const char *exp[4] = {"expected [2, 3, 4, 7]", "expected [2, 3, 3, 6]", "expected [1, 3, 3, 7]",
                              "expected [2, 2, 3, 7]"};
        for (int k = 0; k < 4; k++)
            for (int m = 1; m < 3; m++) { /* the averages: dx alone decides */
                spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m, rt_reshape(&c.d[T_DX], 4, dxs[k]);
                expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dy has shape [2, 3, 3, 7]", exp[k], "dx mismatched");
            }
        /* MAX: dy is checked against dx first; then x must have dx's shape */
        for (int k = 0; k < 4; k++) {
            spec_init(&c), rt_reshape(&c.d[T_DX], 4, dxs[k]);
            expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dy has shape [2, 3, 3, 7]", exp[k], "MAX: dx mismatched");
            spec_init(&c), rt_reshape(&c.d[T_X], 4, dxs[k]);
            expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "x has shape", "expected [2, 3, 5, 6]",
                          "MAX: x not dx's shape");
        }
        /* a dx of another S with the same P: valid for the averages, and for MAX with x of its shape;
         * x of the fixture's shape beside it is not */
        const int64_t dx6[4] = {2, 3, 6, 6};
        spec_init(&c), rt_reshape(&c.d[T_DX], 4, dx6);
        expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "x has shape [2, 3, 5, 6]", "expected [2, 3, 6, 6]",
                      "MAX: x not dx's shape, same P");
        rt_reshape(&c.d[T_X], 4, dx6);
        expect_valid_in(&c, B_BWD, 1, "MAX: x and dx with S 6 (P 3 all the same)");
        for (int m = 1; m < 3; m++) {
            spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m, rt_reshape(&c.d[T_DX], 4, dx6);
            expect_valid_in(&c, B_BWD, 1, "dx with S 6 (P 3 all the same)");
        }
    }
    /* P < 1: a window larger than the padded input (H: window 3 over S 1 without padding), with
     * dilation, and under ceil_mode */
    {
        const int64_t x1[4] = {2, 3, 1, 6}, y1[4] = {2, 3, 1, 7};
        for (int m = 0; m < 3; m++) {
            spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m, c.opts.padding[0] = 0;
            set_problem(&c, 4, x1, y1);
            expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "dim 0", NULL, "window 3 over S 1");
            c.opts.ceil_mode = 1;
            expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "dim 0", NULL, "window 3 over S 1, ceil_mode");
        }
        spec_init(&c), c.opts.dilation[1] = 8; /* W: 8 (2 - 1) + 1 = 9 > 6 + 2 */
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "dim 1", NULL, "dilation 8 over S 6");
        /* the largest window (in range) over the fixture */
        spec_init(&c), c.opts.window[1] = RUDNN_POOL_MAX_PARAM;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "dim 1", NULL, "window RUDNN_POOL_MAX_PARAM");
        /* padding makes room: S 1, window 3, padding 1: P 1 */
        spec_init(&c), set_problem(&c, 4, x1, y1);
        expect_valid(&c, "S 1 with padding 1");
        /* S 0 */
        const int64_t x0[4] = {2, 3, 5, 0}, y0[4] = {2, 3, 3, 0};
        spec_init(&c), set_problem(&c, 4, x0, y0);
        expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "x dims[3] = 0", "expected 1..", "S 0");
        expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dx dims[3] = 0", "expected 1..", "S 0");
    }
}

/* MAX backward needs x; the averages read none: x NULL or a tensor checked as for MAX. */
static void backward_x(void **state)
{
    (void)state;
    callspec_t c;
    spec_init(&c), c.bwd_x = 0;
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_PARAM, "x is NULL", "MAX", "MAX backward without x");
    spec_init(&c), c.bwd_x = 0, c.null_options = 1, set_problem(&c, 4, dims_x, dims_x);
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_PARAM, "x is NULL", "MAX", "MAX backward (options NULL) without x");
    for (int m = 1; m < 3; m++) {
        /* given: accepted (dx written, nothing else) */
        spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m, c.bwd_x = 1;
        expect_valid_in(&c, B_BWD, 1, "average backward with x given");
        /* ... and checked as for MAX */
        const int64_t x5[4] = {2, 3, 6, 6};
        spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m, c.bwd_x = 1, rt_reshape(&c.d[T_X], 4, x5);
        expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "x has shape [2, 3, 6, 6]", "expected [2, 3, 5, 6]",
                      "average backward, x of another shape");
        spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m, c.bwd_x = 1, c.d[T_X].dtype = RUDNN_BF16;
        expect_reject3(&c, B_BWD, RUDNN_STATUS_BAD_DTYPE, "x is bf16", "expected f32", "dx", "average backward, x bf16");
        spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m, c.bwd_x = 1, c.d[T_X].buffer = NULL;
        expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_PARAM, "x has no buffer", NULL, "average backward, x no buffer");
        spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m, c.bwd_x = 1;
        c.d[T_X].offset = F.t[T_X].buffer_bytes - 16;
        expect_reject(&c, B_BWD, RUDNN_STATUS_OUT_OF_BOUNDS, "x needs bytes", NULL, "average backward, x past buffer");
        spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m, c.bwd_x = 1;
        c.d[T_DX].buffer = F.t[T_X].buffer, c.d[T_DX].offset = 4;
        expect_reject3(&c, B_BWD, RUDNN_STATUS_BAD_PARAM, "dx overlaps x", "disjoint", NULL,
                       "average backward, dx over x");
    }
}

static void overlaps(void **state)
{
    (void)state;
    callspec_t c;
    /* partial: an output a few bytes into an input's or the other output's */
    static const struct {
        int out, in;
        unsigned dirs;
        size_t offset;
    } part[] = {
        {T_Y, T_X, B_FWD, 4},    {T_Y, T_X, B_FWD, 0},   {T_IDX, T_X, B_FWD, 8}, {T_Y, T_IDX, B_FWD, 8},
        {T_IDX, T_Y, B_FWD, 0},  {T_IDX, T_Y, B_FWD, 16}, {T_DX, T_DY, B_BWD, 4}, {T_DX, T_DY, B_BWD, 0},
        {T_DX, T_X, B_BWD, 4},   {T_DX, T_X, B_BWD, 400},
    };
    for (size_t k = 0; k < sizeof part / sizeof part[0]; k++)
        for (int m = 0; m < 3; m++) {
            if (m && (part[k].out == T_IDX || part[k].in == T_IDX || (part[k].dirs == B_BWD && part[k].in == T_X)))
                continue; /* the averages take no indices, and no x in the backward */
            spec_init(&c), c.opts.mode = (rudnn_pool_mode_t)m;
            c.d[part[k].out].buffer = F.t[part[k].in].buffer;
            c.d[part[k].out].offset = part[k].offset;
            char what[80];
            snprintf(what, sizeof what, "%s at byte %zu of %s's buffer, mode %d", names[part[k].out], part[k].offset,
                     names[part[k].in], m);
            expect_reject3(&c, part[k].dirs, RUDNN_STATUS_BAD_PARAM, names[part[k].out], names[part[k].in], "overlaps",
                           what);
        }
    /* exactly in place: options NULL (window 1), y of x's shape, on x's descriptor */
    spec_init(&c), set_problem(&c, 4, dims_x, dims_x), c.null_options = 1;
    expect_valid(&c, "the in-place problem out of place");
    c.d[T_Y] = c.d[T_X];
    expect_reject3(&c, B_FWD, RUDNN_STATUS_BAD_PARAM, "y", "x", "overlaps", "y exactly on x");
    spec_init(&c), set_problem(&c, 4, dims_x, dims_x), c.null_options = 1, c.d[T_DX] = c.d[T_DY];
    expect_reject3(&c, B_BWD, RUDNN_STATUS_BAD_PARAM, "dx", "dy", "overlaps", "dx exactly on dy");
    spec_init(&c), set_problem(&c, 4, dims_x, dims_x), c.null_options = 1, c.d[T_DX] = c.d[T_X];
    expect_reject3(&c, B_BWD, RUDNN_STATUS_BAD_PARAM, "dx", "x", "overlaps", "dx exactly on x (MAX)");
    for (int m = 1; m < 3; m++) {
        spec_init(&c), set_problem(&c, 4, dims_x, dims_x), rudnn_pool_options_init(&c.opts);
        c.opts.mode = (rudnn_pool_mode_t)m;
        c.d[T_Y] = c.d[T_X];
        expect_reject3(&c, B_FWD, RUDNN_STATUS_BAD_PARAM, "y", "x", "overlaps", "y exactly on x (average)");
        c.d[T_DX] = c.d[T_DY];
        expect_reject3(&c, B_BWD, RUDNN_STATUS_BAD_PARAM, "dx", "dy", "overlaps", "dx exactly on dy (average)");
    }
    /* y and indices at the same offset of one buffer */
    spec_init(&c), c.d[T_IDX].buffer = c.d[T_Y].buffer, c.d[T_IDX].offset = c.d[T_Y].offset;
    expect_reject3(&c, B_FWD, RUDNN_STATUS_BAD_PARAM, "y", "indices", "overlaps", "indices at y's start");
    /* y's first element on x's last */
    spec_init(&c), c.d[T_Y].buffer = F.t[T_X].buffer, c.d[T_Y].offset = 180 * 4 - 4;
    expect_reject3(&c, B_FWD, RUDNN_STATUS_BAD_PARAM, "y", "x", "overlaps", "y over x's last element");
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
    } each[] = {{T_X, B_ALL}, {T_Y, B_FWD}, {T_IDX, B_FWD}, {T_DY, B_BWD}, {T_DX, B_BWD}};
    for (size_t k = 0; k < sizeof each / sizeof each[0]; k++) {
        const int i = each[k].tensor;
        rt_binding_t saved = rt_bind(rt_ctx2, rt_queue2);
        rt_tensor_t o;
        rt_tensor_create(&o, F.t[i].t.dtype, F.t[i].t.rank, F.t[i].t.dims, 0, 0);
        rt_unbind(saved);
        callspec_t c;
        spec_init(&c), c.d[i] = o.t;
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_DEVICE_MISMATCH, names[i], "another context", "other context");
        if (i == T_DY || i == T_DX) {
            c.opts.mode = RUDNN_POOL_AVG_EXCLUDE_PAD;
            expect_reject(&c, B_BWD, RUDNN_STATUS_DEVICE_MISMATCH, names[i], "another context",
                          "other context (average)");
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
    } each[] = {{T_X, B_ALL}, {T_Y, B_FWD}, {T_IDX, B_FWD}, {T_DY, B_BWD}, {T_DX, B_BWD}};
    for (size_t k = 0; k < sizeof each / sizeof each[0]; k++) {
        const int i = each[k].tensor;
        const size_t elem = rudnn_dtype_size(F.t[i].t.dtype);
        /* a view past the end of its buffer */
        spec_init(&c), c.d[i].offset = F.t[i].buffer_bytes - 16;
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_OUT_OF_BOUNDS, names[i], "needs bytes", "view past its buffer");
        spec_init(&c), c.d[i].offset = SIZE_MAX - (elem - 1);
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_OUT_OF_BOUNDS, names[i], "its buffer has", "offset near SIZE_MAX");
        /* one element too many: the last dim one longer with the slack taken away is still inside,
         * so grow N until it is not */
        spec_init(&c), c.d[i].strides[0] = (int64_t)(F.t[i].buffer_bytes / elem);
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_OUT_OF_BOUNDS, names[i], "needs bytes", "N stride past buffer");
        /* a misaligned offset */
        spec_init(&c), c.d[i].offset = 2;
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_BAD_PARAM, names[i], "not a multiple of its element size",
                      "offset 2");
        /* strides that describe no view */
        spec_init(&c), c.d[i].strides[0] = 0;
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_BAD_SHAPE, names[i], "must be positive", "stride 0");
        spec_init(&c), c.d[i].strides[3] = 2;
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_BAD_SHAPE, names[i], "overlapping elements", "W stride 2");
        spec_init(&c), c.d[i].strides[0] = INT64_MAX / 2;
        expect_reject(&c, each[k].dirs, RUDNN_STATUS_OUT_OF_BOUNDS, names[i], "spans more bytes", "N stride huge");
    }
    /* negative dims */
    const int64_t neg[4] = {2, 3, -5, 6};
    spec_init(&c), rt_reshape(&c.d[T_X], 4, neg), rt_reshape(&c.d[T_DX], 4, neg);
    expect_reject(&c, B_FWD, RUDNN_STATUS_BAD_SHAPE, "x has negative dims[2]", NULL, "S -5");
    c.opts.mode = RUDNN_POOL_AVG_INCLUDE_PAD;
    expect_reject(&c, B_BWD, RUDNN_STATUS_BAD_SHAPE, "dx has negative dims[2]", NULL, "S -5");
}

/* ---- rudnn_pool_output_dims ------------------------------------------------------------------------ */

static void output_dims_fn(void **state)
{
    (void)state;
    rudnn_pool_options_t o;
    rudnn_status_t st;
    /* successes: y_dims written for rank entries, nothing after */
    static const struct {
        int rank;
        int64_t x[5];
        int mode;
        int64_t window[3], stride[3], padding[3], dilation[3];
        int ceil_mode;
        int64_t y[5];
    } ok[] = {
        /* the fixture */
        {4, {2, 3, 5, 6}, 0, {3, 2, 1}, {2, 1, 1}, {1, 1, 0}, {1, 1, 1}, 0, {2, 3, 3, 7}},
        {4, {2, 3, 5, 6}, 2, {3, 2, 1}, {2, 1, 1}, {1, 1, 0}, {1, 1, 1}, 0, {2, 3, 3, 7}},
        /* the defaults: window 1 */
        {4, {2, 3, 5, 6}, 0, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 0, {2, 3, 5, 6}},
        /* 1D: (10 - 3) / 2 + 1 = 4 floor; ceil 7 / 2 -> 4 + 1 = 5, its start 8 < 10: kept */
        {3, {1, 4, 10}, 1, {3, 0, 0}, {2, 0, 0}, {0, 0, 0}, {1, 0, 0}, 0, {1, 4, 4}},
        {3, {1, 4, 10}, 1, {3, 0, 0}, {2, 0, 0}, {0, 0, 0}, {1, 0, 0}, 1, {1, 4, 5}},
        /* ceil_mode dropping the last window: S 5, window 2, stride 3, padding 1: 5 / 3 -> floor
         * 1 + 1 = 2; ceil 2 + 1 = 3, but (3 - 1) 3 = 6 >= 5 + 1: dropped, 2 */
        {3, {1, 1, 5}, 0, {2, 0, 0}, {3, 0, 0}, {1, 0, 0}, {1, 0, 0}, 0, {1, 1, 2}},
        {3, {1, 1, 5}, 0, {2, 0, 0}, {3, 0, 0}, {1, 0, 0}, {1, 0, 0}, 1, {1, 1, 2}},
        /* ... and without padding: S 5, window 1, stride 3: floor 2, ceil 3, 6 >= 5: dropped */
        {3, {1, 1, 5}, 2, {1, 0, 0}, {3, 0, 0}, {0, 0, 0}, {1, 0, 0}, 1, {1, 1, 2}},
        /* ceil keeping: S 6, window 3, stride 2, padding 1: 5 / 2 -> floor 3, ceil 4 (start 6 - 1 < 7) */
        {3, {1, 1, 6}, 0, {3, 0, 0}, {2, 0, 0}, {1, 0, 0}, {1, 0, 0}, 1, {1, 1, 4}},
        /* exact division: ceil = floor */
        {3, {1, 1, 7}, 0, {3, 0, 0}, {2, 0, 0}, {0, 0, 0}, {1, 0, 0}, 1, {1, 1, 3}},
        /* dilation (MAX): 2D, (9 - 3 (3 - 1) - 1) / 1 + 1 = 3, (8 + 2 - 2 (2 - 1) - 1) / 2 + 1 = 4 */
        {4, {1, 2, 9, 8}, 0, {3, 2, 0}, {1, 2, 0}, {0, 1, 0}, {3, 2, 0}, 0, {1, 2, 3, 4}},
        /* 3D with ceil: D (4 - 2) / 2 + 1 = 2; H (5 - 2) / 2 -> floor 2, ceil 3 (start 4 < 5);
         * W (7 + 2 - 3) / 3 + 1 = 3 */
        {5, {2, 1, 4, 5, 7}, 1, {2, 2, 3}, {2, 2, 3}, {0, 0, 1}, {1, 1, 1}, 1, {2, 1, 2, 3, 3}},
        {5, {2, 1, 4, 5, 7}, 1, {2, 2, 3}, {2, 2, 3}, {0, 0, 1}, {1, 1, 1}, 0, {2, 1, 2, 2, 3}},
        /* N = 0 and C = 0 */
        {4, {0, 3, 5, 6}, 0, {3, 2, 1}, {2, 1, 1}, {1, 1, 0}, {1, 1, 1}, 0, {0, 3, 3, 7}},
        {4, {2, 0, 5, 6}, 0, {3, 2, 1}, {2, 1, 1}, {1, 1, 0}, {1, 1, 1}, 0, {2, 0, 3, 7}},
        /* the largest dims */
        {3, {RUDNN_POOL_MAX_DIM, RUDNN_POOL_MAX_DIM, RUDNN_POOL_MAX_DIM}, 0, {2, 1, 1}, {2, 1, 1}, {1, 0, 0},
         {1, 1, 1}, 1, {RUDNN_POOL_MAX_DIM, RUDNN_POOL_MAX_DIM, RUDNN_POOL_MAX_DIM / 2 + 1}},
        /* the largest window, stride and dilation in range */
        {3, {1, 1, RUDNN_POOL_MAX_PARAM}, 0, {RUDNN_POOL_MAX_PARAM, 1, 1}, {RUDNN_POOL_MAX_PARAM, 1, 1}, {0, 0, 0},
         {1, 1, 1}, 1, {1, 1, 1}},
        {3, {1, 1, 5}, 0, {1, 1, 1}, {RUDNN_POOL_MAX_PARAM, 1, 1}, {0, 0, 0}, {RUDNN_POOL_MAX_PARAM, 1, 1}, 1,
         {1, 1, 1}},
    };
    for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++) {
        rudnn_pool_options_init(&o);
        o.mode = (rudnn_pool_mode_t)ok[k].mode;
        memcpy(o.window, ok[k].window, sizeof o.window);
        memcpy(o.stride, ok[k].stride, sizeof o.stride);
        memcpy(o.padding, ok[k].padding, sizeof o.padding);
        memcpy(o.dilation, ok[k].dilation, sizeof o.dilation);
        o.ceil_mode = ok[k].ceil_mode;
        int64_t y[6] = {-7, -7, -7, -7, -7, -7};
        st = rudnn_pool_output_dims(ok[k].rank, ok[k].x, &o, y);
        int same = st == RUDNN_STATUS_SUCCESS;
        for (int i = 0; i < 6; i++)
            same &= y[i] == (i < ok[k].rank && i < 5 ? ok[k].y[i] : -7);
        if (!same)
            rt_failf("output_dims case %zu: %s (\"%s\"), [%lld, %lld, %lld, %lld, %lld, %lld]", k,
                      rudnn_status_string(st), rudnn_last_error(), (long long)y[0], (long long)y[1], (long long)y[2],
                      (long long)y[3], (long long)y[4], (long long)y[5]);
        else if (rudnn_last_error()[0])
            rt_failf("output_dims case %zu: success left \"%s\"", k, rudnn_last_error());
    }
    /* options NULL: the defaults (window 1) */
    {
        int64_t y[5] = {-7, -7, -7, -7, -7};
        const int64_t x[5] = {1, 2, 3, 4, 5};
        st = rudnn_pool_output_dims(5, x, NULL, y);
        if (st || memcmp(x, y, sizeof x) != 0)
            rt_failf("output_dims(options NULL): %s (\"%s\")", rudnn_status_string(st), rudnn_last_error());
    }
    /* rejections: y_dims untouched */
    static const struct {
        int rank;
        int64_t x[6];
        int mode;
        int64_t window0, stride0, pad0, dil0;
        int ceil_mode;
        rudnn_status_t want;
        const char *n1, *n2;
    } bad[] = {
        {2, {2, 3}, 0, 1, 1, 0, 1, 0, RUDNN_STATUS_BAD_SHAPE, "rank 2", "3, 4 or 5"},
        {6, {2, 3, 5, 6, 1, 1}, 0, 1, 1, 0, 1, 0, RUDNN_STATUS_BAD_SHAPE, "rank 6", "3, 4 or 5"},
        {-1, {0}, 0, 1, 1, 0, 1, 0, RUDNN_STATUS_BAD_SHAPE, "rank -1", NULL},
        {4, {2, 3, 5, 6}, 3, 3, 2, 1, 1, 0, RUDNN_STATUS_BAD_PARAM, "mode", NULL},
        {4, {2, 3, 5, 6}, -1, 3, 2, 1, 1, 0, RUDNN_STATUS_BAD_PARAM, "mode", NULL},
        {4, {2, 3, 5, 6}, 0, 0, 2, 0, 1, 0, RUDNN_STATUS_BAD_PARAM, "options.window[0] = 0", NULL},
        {4, {2, 3, 5, 6}, 0, RUDNN_POOL_MAX_PARAM + 1, 2, 0, 1, 0, RUDNN_STATUS_BAD_PARAM, "options.window[0]", NULL},
        {4, {2, 3, 5, 6}, 0, 3, 0, 1, 1, 0, RUDNN_STATUS_BAD_PARAM, "options.stride[0] = 0", NULL},
        {4, {2, 3, 5, 6}, 0, 3, RUDNN_POOL_MAX_PARAM + 1, 1, 1, 0, RUDNN_STATUS_BAD_PARAM, "options.stride[0]", NULL},
        {4, {2, 3, 5, 6}, 0, 3, 2, -1, 1, 0, RUDNN_STATUS_BAD_PARAM, "options.padding[0] = -1", NULL},
        {4, {2, 3, 5, 6}, 0, 3, 2, 2, 1, 0, RUDNN_STATUS_BAD_PARAM, "options.padding[0] = 2", "window"},
        {4, {2, 3, 5, 6}, 0, 3, 2, 1, 0, 0, RUDNN_STATUS_BAD_PARAM, "options.dilation[0] = 0", NULL},
        {4, {2, 3, 5, 6}, 0, 3, 2, 1, RUDNN_POOL_MAX_PARAM + 1, 0, RUDNN_STATUS_BAD_PARAM, "options.dilation[0]", NULL},
        {4, {2, 3, 5, 6}, 1, 3, 2, 1, 2, 0, RUDNN_STATUS_BAD_PARAM, "options.dilation[0] = 2", "average"},
        {4, {2, 3, 5, 6}, 2, 3, 2, 1, 2, 0, RUDNN_STATUS_BAD_PARAM, "options.dilation[0] = 2", "average"},
        {4, {2, 3, 5, 6}, 0, 3, 2, 1, 1, 2, RUDNN_STATUS_BAD_PARAM, "ceil_mode", "0 or 1"},
        {4, {2, 3, 5, 6}, 0, 3, 2, 1, 1, -1, RUDNN_STATUS_BAD_PARAM, "ceil_mode", "0 or 1"},
        /* P < 1 */
        {4, {2, 3, 1, 6}, 0, 3, 2, 0, 1, 0, RUDNN_STATUS_BAD_SHAPE, "dim 0", NULL},
        {4, {2, 3, 1, 6}, 1, 3, 2, 0, 1, 1, RUDNN_STATUS_BAD_SHAPE, "dim 0", NULL},
        {4, {2, 3, 5, 6}, 0, 3, 2, 0, 3, 0, RUDNN_STATUS_BAD_SHAPE, "dim 0", NULL}, /* span 7 > 5 */
        {4, {2, 3, 5, 6}, 0, RUDNN_POOL_MAX_PARAM, 1, 0, RUDNN_POOL_MAX_PARAM, 0, RUDNN_STATUS_BAD_SHAPE, "dim 0", NULL},
        {4, {2, 3, 0, 6}, 0, 1, 1, 0, 1, 0, RUDNN_STATUS_BAD_SHAPE, "dims[2] = 0", "expected 1.."},
        {5, {1, 1, 3, 4, RUDNN_POOL_MAX_DIM + 1}, 0, 1, 1, 0, 1, 0, RUDNN_STATUS_BAD_SHAPE, "dims[4]", NULL},
        {4, {RUDNN_POOL_MAX_DIM + 1, 3, 5, 6}, 0, 3, 2, 1, 1, 0, RUDNN_STATUS_BAD_SHAPE, "dims[0]", NULL},
        /* dims out of range */
        {4, {-2, 3, 5, 6}, 0, 3, 2, 1, 1, 0, RUDNN_STATUS_BAD_SHAPE, "dims[0] = -2", NULL},
        {4, {2, -3, 5, 6}, 0, 3, 2, 1, 1, 0, RUDNN_STATUS_BAD_SHAPE, "dims[1] = -3", NULL},
        {4, {2, 3, INT64_MAX, 6}, 0, 3, 2, 1, 1, 0, RUDNN_STATUS_BAD_SHAPE, "dims[2]", NULL},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        fixture_options(&o);
        o.mode = (rudnn_pool_mode_t)bad[k].mode;
        o.window[0] = bad[k].window0, o.stride[0] = bad[k].stride0, o.padding[0] = bad[k].pad0;
        o.dilation[0] = bad[k].dil0, o.ceil_mode = bad[k].ceil_mode;
        int64_t out[6] = {-7, -7, -7, -7, -7, -7};
        st = rudnn_pool_output_dims(bad[k].rank, bad[k].x, &o, out);
        if (st != bad[k].want || !rt_message_names(rudnn_last_error(), OP_DIMS, bad[k].n1, bad[k].n2, NULL))
            rt_failf("output_dims rejection %zu: %s (expected %s), \"%s\" (expected %s, %s)", k,
                      rudnn_status_string(st), rudnn_status_string(bad[k].want), rudnn_last_error(), bad[k].n1,
                      bad[k].n2 ? bad[k].n2 : "-");
        for (int i = 0; i < 6; i++)
            if (out[i] != -7) {
                rt_failf("output_dims rejection %zu: wrote y_dims[%d]", k, i);
                break;
            }
    }
    /* NULL pointers */
    int64_t y[4] = {-7, -7, -7, -7};
    st = rudnn_pool_output_dims(4, NULL, NULL, y);
    if (st != RUDNN_STATUS_BAD_PARAM || !rt_message_names(rudnn_last_error(), OP_DIMS, "x_dims", "NULL", NULL) ||
        y[0] != -7)
        rt_failf("output_dims(x_dims NULL): %s, \"%s\"", rudnn_status_string(st), rudnn_last_error());
    st = rudnn_pool_output_dims(4, dims_x, NULL, NULL);
    if (st != RUDNN_STATUS_BAD_PARAM || !rt_message_names(rudnn_last_error(), OP_DIMS, "y_dims", "NULL", NULL))
        rt_failf("output_dims(y_dims NULL): %s, \"%s\"", rudnn_status_string(st), rudnn_last_error());
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, rt_test_log_setup, rt_test_log_teardown)

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        T(options_init_defaults), T(output_dims_fn), T(valid_calls),   T(empty_batch),
        T(null_arguments),        T(ranks),          T(dtypes),        T(indices_rules),
        T(modes_and_options),     T(output_shapes),  T(backward_x),    T(overlaps),
        T(other_context),         T(layouts),
    };
    rt_set_filters(argc, argv);
    rt_open_or_skip("pooling-contract");
    if (rt_group_setup_second(NULL))
        return 1;
    rt_print_device("pooling-contract");
    group_setup(NULL);
    const int failed = cmocka_run_group_tests_name("pooling-contract", tests, NULL, group_teardown);
    return rt_exit_code(failed);
}
