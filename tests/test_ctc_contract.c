/* Contract tests of the CTC loss (include/rudnn/ctc.h, ops/ctc.c) on the default backend. Every
 * rejected call returns the status of its rule (BAD_PARAM for NULLs, values out of range, overlaps
 * and bad workspaces; BAD_SHAPE for ranks, dims and strides that describe no view; BAD_DTYPE;
 * DEVICE_MISMATCH for another context's tensor, queue or workspace; OUT_OF_BOUNDS for a view past
 * its buffer), a message that starts with the op ("ctc_loss: ", "ctc_loss_workspace_size: ") and
 * names the argument and the rule, and writes nothing: every buffer of the fixture (the outputs
 * holding a sentinel) is read back byte for byte after the call, and a rejected size query leaves
 * *bytes as it was. Each rule is checked through both entry points (the query takes the call's
 * arguments and fails as the call would); the workspace rules through the call.
 *
 * The fixture: one buffer a tensor (1024 bytes after each): log_probs, grad_log_probs F32
 * [T 6, N 3, C 5]; targets I64 [3, S 4]; loss, grad_loss F32 [3]; input_lengths {6, 5, 4},
 * target_lengths {4, 2, 0}; blank 0, zero_infinity 0. Each test edits a copy of the descriptors;
 * views of other shapes lie in the same buffers.
 * The success paths: with and without grad_log_probs and grad_loss, F16 and BF16, I32 targets,
 * options NULL, blank C - 1 and zero_infinity 1, strided views of every tensor, input and target
 * lengths at both ends, T = 0, S = 0, C = 1, S = RUDNN_CTC_MAX_TARGET, inputs sharing memory,
 * outputs right next to inputs, N = 0 with NULL length arrays, workspaces of the asked size, larger,
 * and NULL, rudnn_ctc_options_init. Every accepted call writes every element of its outputs and no
 * other buffer, and leaves rudnn_last_error() empty.
 * On a backend without CTC kernels (CUDA, HIP) the checks are the same and every valid call answers
 * NOT_SUPPORTED naming the op, writing nothing (N = 0 may succeed: nothing runs); the workspace
 * rules, which need the backend's size, are not reached there.
 *
 * Usage: test_ctc_contract [glob] */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/ctc.h>

#include "common.h"
#include "contract_fixture.h"
#include "operand.h"

enum { T_LP, T_TG, T_GL, T_LOSS, T_GRAD, T_COUNT };
static const char *const names[T_COUNT] = {"log_probs", "targets", "grad_loss", "loss", "grad_log_probs"};

enum { F_SIZE, F_OP, FORMS };
static const char *const form_ops[FORMS] = {"ctc_loss_workspace_size", "ctc_loss"};
#define B_SIZE (1u << F_SIZE)
#define B_OP (1u << F_OP)
#define B_ALL (B_SIZE | B_OP)

#define SLACK 1024
#define BYTES_SENTINEL ((size_t)0x5a5a5a5a5a5a)
enum { FT = 6, FN = 3, FC = 5, FS = 4 };
static const int64_t dims_lp[3] = {FT, FN, FC}, dims_tg[2] = {FN, FS}, dims_n[1] = {FN};
static const int64_t fixture_il[FN] = {6, 5, 4}, fixture_tl[FN] = {4, 2, 0};

static contract_fixture_t F; /* the tensors' buffers (T_ order) guarded */
static int have_kernels;

/* ---- the fixture and the calls ------------------------------------------------------------------ */

static int is_output(int i) { return i == T_LOSS || i == T_GRAD; }

static void fill_inputs(void)
{
    rt_rng_t r;
    rt_rng_seed(&r, 29);
    rt_tensor_fill_uniform(&F.t[T_LP], &r, -3.0, -0.1);
    rt_tensor_fill_uniform(&F.t[T_GL], &r, -1.0, 1.0);
    /* labels 1..4 (never the blank 0), as raw int64 over the whole buffer: views of the buffer as
     * I32 read small labels too (and zeros: blanks, which make those samples NaN, still valid) */
    const size_t n = F.t[T_TG].buffer_bytes / 8;
    int64_t *v = rt_xmalloc(n * 8);
    for (size_t i = 0; i < n; i++)
        v[i] = 1 + (int64_t)(i % 4);
    rt_assert_status(rudnn_buffer_write(rt_queue, F.t[T_TG].buffer, 0, v, n * 8), RUDNN_STATUS_SUCCESS);
    free(v);
}

static int group_setup(void **state)
{
    (void)state;
    const int64_t *dims[T_COUNT] = {dims_lp, dims_tg, dims_n, dims_n, dims_lp};
    const int ranks[T_COUNT] = {3, 2, 1, 1, 3};
    const rudnn_dtype_t dtypes[T_COUNT] = {RUDNN_F32, RUDNN_I64, RUDNN_F32, RUDNN_F32, RUDNN_F32};
    contract_fixture_setup(&F, T_COUNT, names, dtypes, ranks, dims, SLACK, 0, fill_inputs);
    return 0;
}

static int group_teardown(void **state) { return contract_fixture_teardown(&F, state); }

typedef struct callspec {
    rudnn_queue_t queue;
    rudnn_tensor_t d[T_COUNT];
    int null_t[T_COUNT]; /* pass NULL for this tensor */
    int64_t il[FN + 8], tl[FN + 8];
    int null_il, null_tl, null_args, null_bytes;
    rudnn_ctc_options_t opts;
    int null_options;
    rudnn_buffer_t ws;
    size_t ws_bytes;
} callspec_t;

static void spec_init(callspec_t *c)
{
    memset(c, 0, sizeof *c);
    c->queue = rt_queue;
    for (int i = 0; i < T_COUNT; i++)
        c->d[i] = F.t[i].t;
    for (int n = 0; n < FN; n++)
        c->il[n] = fixture_il[n], c->tl[n] = fixture_tl[n];
    rudnn_ctc_options_init(&c->opts);
}

/* Every descriptor to the shapes of a problem of T, N, C, S (each in its own fixture buffer). */
static void set_problem(callspec_t *c, int64_t T, int64_t N, int64_t C, int64_t S)
{
    const int64_t d3[3] = {T, N, C}, d2[2] = {N, S}, d1[1] = {N};
    rt_reshape(&c->d[T_LP], 3, d3), rt_reshape(&c->d[T_GRAD], 3, d3);
    rt_reshape(&c->d[T_TG], 2, d2), rt_reshape(&c->d[T_LOSS], 1, d1), rt_reshape(&c->d[T_GL], 1, d1);
}

static const rudnn_tensor_t *tp(const callspec_t *c, int i) { return c->null_t[i] ? NULL : &c->d[i]; }

static rudnn_status_t call_form(const callspec_t *c, int form, size_t *bytes)
{
    const rudnn_ctc_args_t a = {tp(c, T_LP), tp(c, T_TG), c->null_il ? NULL : c->il, c->null_tl ? NULL : c->tl,
                                tp(c, T_GL), tp(c, T_LOSS), tp(c, T_GRAD)};
    const rudnn_ctc_args_t *ap = c->null_args ? NULL : &a;
    const rudnn_ctc_options_t *o = c->null_options ? NULL : &c->opts;
    if (form == F_SIZE)
        return rudnn_ctc_loss_workspace_size(c->queue, ap, o, c->null_bytes ? NULL : bytes);
    return rudnn_ctc_loss(c->queue, ap, o, c->ws, c->ws_bytes);
}

static rudnn_status_t call_any(const void *c, int form, size_t *bytes) { return call_form(c, form, bytes); }

/* the message starts with "<op>: " (contract_message_starts) */
static const contract_family_t family = {FORMS, form_ops, call_any, NULL, 1, BYTES_SENTINEL};

/* Every form of forms: want, a message naming the op and the needles, *bytes untouched, no byte of
 * any fixture buffer written. */
static void expect_reject3(const callspec_t *c, unsigned forms, rudnn_status_t want, const char *n1, const char *n2,
                           const char *n3, const char *what)
{
    contract_expect_reject(&F, &family, c, forms, want, n1, n2, n3, what);
}

static void expect_reject(const callspec_t *c, unsigned forms, rudnn_status_t want, const char *n1, const char *n2,
                          const char *what)
{
    expect_reject3(c, forms, want, n1, n2, NULL, what);
}

static int is_output_buffer(const callspec_t *c, rudnn_buffer_t b)
{
    return (!c->null_t[T_LOSS] && c->d[T_LOSS].buffer == b) || (!c->null_t[T_GRAD] && c->d[T_GRAD].buffer == b);
}

static void repoison_outputs(void)
{
    rudnn_queue_synchronize(rt_queue);
    rt_tensor_poison(&F.t[T_LOSS]), rt_tensor_poison(&F.t[T_GRAD]);
}

/* Elements of the view t still holding the sentinel of its dtype in snapshot (its whole buffer). */
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
        left += rt_element_bits(t->dtype, snapshot + t->offset + (size_t)at * elem, 0) == poison;
    }
    return left;
}

/* The outputs' buffers poisoned with the sentinel of the views' dtypes (F16, BF16 views of the
 * fixture's F32 buffers), so that an element left unwritten is seen. */
static void poison_outputs_as(const callspec_t *c)
{
    const int outs[2] = {T_LOSS, T_GRAD};
    for (int k = 0; k < 2; k++) {
        const rudnn_tensor_t *o = tp(c, outs[k]);
        for (int i = 0; o && i < T_COUNT; i++)
            if (F.t[i].buffer == o->buffer && o->dtype != F.t[i].t.dtype && is_output(i)) {
                rt_tensor_t as = F.t[i];
                as.t.dtype = o->dtype;
                rt_tensor_poison(&as);
            }
    }
}

/* c is valid for every form of forms: the query succeeds and writes *bytes; the call succeeds with
 * rudnn_last_error() "" and writes only its outputs' buffers, every element of them. Without
 * kernels: NOT_SUPPORTED naming the op, nothing written. */
static void expect_valid_in(const callspec_t *c, unsigned forms, const char *what)
{
    for (int form = 0; form < FORMS; form++) {
        if (!((forms >> form) & 1))
            continue;
        if (!have_kernels) {
            expect_reject(c, 1u << form, RUDNN_STATUS_NOT_SUPPORTED, "no CTC kernels", NULL, what);
            continue;
        }
        poison_outputs_as(c);
        rt_guard_begin(&F.guard);
        size_t bytes = BYTES_SENTINEL;
        const rudnn_status_t st = call_form(c, form, &bytes);
        if (st)
            rt_failf("%s [%s]: returned %s (\"%s\")", what, form_ops[form], rudnn_status_string(st),
                      rudnn_last_error());
        else if (rudnn_last_error()[0])
            rt_failf("%s [%s]: success left the message \"%s\"", what, form_ops[form], rudnn_last_error());
        if (!st && form == F_SIZE && bytes == BYTES_SENTINEL)
            rt_failf("%s [%s]: success without writing *bytes", what, form_ops[form]);
        if (rudnn_queue_synchronize(rt_queue))
            rt_failf("%s [%s]: the queue's work failed: %s", what, form_ops[form], rudnn_last_error());
        rt_guard_changed(&F.guard);
        for (int i = 0; i < F.guard.count; i++)
            if (F.guard.items[i].changed && (form == F_SIZE || !is_output_buffer(c, F.guard.items[i].buffer)))
                rt_failf("%s [%s]: an accepted call wrote to %s's buffer, which holds no output", what,
                          form_ops[form], F.guard.items[i].name);
        if (!st && form == F_OP) {
            const int outs[2] = {T_LOSS, T_GRAD};
            for (int k = 0; k < 2; k++) {
                const rudnn_tensor_t *o = tp(c, outs[k]);
                if (!o)
                    continue;
                uint8_t *snap = rt_buffer_snapshot(o->buffer, rudnn_buffer_size(o->buffer));
                const int64_t left = poisoned_in_view(o, snap);
                if (left)
                    rt_failf("%s [%s]: %lld elements of %s not written", what, form_ops[form], (long long)left,
                              names[outs[k]]);
                free(snap);
            }
        }
        repoison_outputs();
        if (rt_guard_changed(&F.guard)) /* an input's buffer was written: refill it */
            contract_fixture_restore(&F);
    }
}

static void expect_valid(const callspec_t *c, const char *what) { expect_valid_in(c, B_ALL, what); }

/* ---- the success paths ------------------------------------------------------------------------------ */

static void options_init_defaults(void **state)
{
    (void)state;
    rudnn_ctc_options_t o;
    memset(&o, 0x7b, sizeof o);
    rudnn_ctc_options_init(&o);
    if (o.blank != 0 || o.zero_infinity != 0)
        rt_failf("options_init: blank %lld, zero_infinity %d; expected 0, 0", (long long)o.blank, o.zero_infinity);
    rudnn_ctc_options_init(NULL);
}

static void valid_calls(void **state)
{
    (void)state;
    callspec_t c;
    spec_init(&c);
    expect_valid(&c, "the fixture");
    spec_init(&c), c.null_t[T_GL] = 1;
    expect_valid(&c, "grad_loss NULL");
    spec_init(&c), c.null_t[T_GRAD] = 1;
    expect_valid(&c, "loss alone, grad_loss given (ignored)");
    spec_init(&c), c.null_t[T_GRAD] = c.null_t[T_GL] = 1;
    expect_valid(&c, "loss alone");
    spec_init(&c), c.null_options = 1;
    expect_valid(&c, "options NULL (blank 0, zero_infinity 0)");
    spec_init(&c), c.opts.blank = FC - 1, c.opts.zero_infinity = 1;
    expect_valid(&c, "blank C - 1, zero_infinity 1");
    /* F16 and BF16 log_probs and grad_log_probs */
    const rudnn_dtype_t dts[2] = {RUDNN_F16, RUDNN_BF16};
    for (int k = 0; k < 2; k++) {
        spec_init(&c), c.d[T_LP].dtype = c.d[T_GRAD].dtype = dts[k];
        char what[64];
        snprintf(what, sizeof what, "log_probs and grad_log_probs %s", rudnn_dtype_name(dts[k]));
        expect_valid(&c, what);
    }
    /* I32 targets (a view of the I64 buffer) */
    spec_init(&c), c.d[T_TG].dtype = RUDNN_I32;
    expect_valid(&c, "I32 targets");
    /* strided views: log_probs stored [N, T, C]; grad_log_probs class-major [C, T, N]; targets stored
     * [S, N]; loss stride 2, grad_loss stride 3 (all inside the fixture's buffers and slack) */
    spec_init(&c);
    c.d[T_LP].strides[0] = FC, c.d[T_LP].strides[1] = FT * FC, c.d[T_LP].strides[2] = 1;
    c.d[T_GRAD].strides[0] = FN, c.d[T_GRAD].strides[1] = 1, c.d[T_GRAD].strides[2] = FT * FN;
    c.d[T_TG].strides[0] = 1, c.d[T_TG].strides[1] = FN;
    c.d[T_LOSS].strides[0] = 2, c.d[T_GL].strides[0] = 3;
    expect_valid(&c, "strided views of every tensor");
    /* padded rows at an offset */
    spec_init(&c);
    c.d[T_LP].strides[0] = 20, c.d[T_LP].strides[1] = 6, c.d[T_LP].offset = 8;
    c.d[T_GRAD].strides[0] = 19, c.d[T_GRAD].strides[1] = 6, c.d[T_GRAD].offset = 12;
    c.d[T_TG].strides[0] = 5, c.d[T_TG].offset = 16;
    expect_valid(&c, "padded rows at offsets");
    /* lengths at both ends */
    spec_init(&c);
    for (int n = 0; n < FN; n++)
        c.il[n] = 0, c.tl[n] = FS;
    expect_valid(&c, "input lengths 0, target lengths S");
    spec_init(&c);
    for (int n = 0; n < FN; n++)
        c.il[n] = FT, c.tl[n] = 0;
    expect_valid(&c, "input lengths T, target lengths 0");
    /* T = 0 (input lengths 0), S = 0, C = 1 */
    spec_init(&c), set_problem(&c, 0, FN, FC, FS);
    for (int n = 0; n < FN; n++)
        c.il[n] = 0;
    expect_valid(&c, "T = 0");
    spec_init(&c), set_problem(&c, FT, FN, FC, 0);
    for (int n = 0; n < FN; n++)
        c.tl[n] = 0;
    expect_valid(&c, "S = 0");
    spec_init(&c), set_problem(&c, FT, FN, 1, FS);
    expect_valid(&c, "C = 1 (every label NaN, still valid)");
    /* inputs may share memory (read only): grad_loss over log_probs' bytes */
    spec_init(&c), c.d[T_GL].buffer = F.t[T_LP].buffer, c.d[T_GL].offset = 4;
    expect_valid(&c, "grad_loss over log_probs' bytes");
    /* outputs right after inputs in their buffers, touching no byte of them */
    spec_init(&c), c.d[T_LOSS].buffer = F.t[T_GL].buffer, c.d[T_LOSS].offset = FN * 4;
    expect_valid_in(&c, B_OP, "loss right after grad_loss in its buffer");
    spec_init(&c), c.d[T_GRAD].buffer = F.t[T_LP].buffer, c.d[T_GRAD].offset = FT * FN * FC * 4;
    expect_valid_in(&c, B_OP, "grad_log_probs right after log_probs in its buffer");
    /* a valid call right after a rejected one leaves no message */
    spec_init(&c), c.queue = NULL;
    (void)call_form(&c, F_OP, NULL);
    spec_init(&c);
    expect_valid_in(&c, B_OP, "valid after rejected");
}

/* S = RUDNN_CTC_MAX_TARGET is accepted by the contract (a backend whose local memory cannot hold
 * its states answers NOT_SUPPORTED, saying so); one more is BAD_SHAPE. Targets [N, S] I32 in a
 * buffer of their own. */
static void max_target(void **state)
{
    (void)state;
    rudnn_buffer_t big;
    const int64_t S = RUDNN_CTC_MAX_TARGET;
    const size_t bytes = (size_t)(FN * (S + 1)) * 4;
    rt_assert_status(rudnn_buffer_create(rt_ctx, bytes, &big), RUDNN_STATUS_SUCCESS);
    int32_t *v = rt_xmalloc(bytes);
    for (size_t i = 0; i < bytes / 4; i++)
        v[i] = 1 + (int32_t)(i % 4);
    rt_assert_status(rudnn_buffer_write(rt_queue, big, 0, v, bytes), RUDNN_STATUS_SUCCESS);
    free(v);
    callspec_t c;
    spec_init(&c);
    const int64_t d[2] = {FN, S};
    rt_assert_status(rudnn_tensor_init(&c.d[T_TG], big, 0, RUDNN_I32, 2, d), RUDNN_STATUS_SUCCESS);
    c.tl[0] = S, c.tl[1] = 3, c.tl[2] = 0; /* sample 0: more labels than steps, +inf */
    if (!have_kernels) {
        expect_valid(&c, "S = RUDNN_CTC_MAX_TARGET");
    } else {
        for (int form = 0; form < FORMS; form++) {
            size_t b = BYTES_SENTINEL;
            const rudnn_status_t st = call_form(&c, form, &b);
            if (st == RUDNN_STATUS_NOT_SUPPORTED && strstr(rudnn_last_error(), "local memory"))
                printf("    S = %lld [%s]: NOT_SUPPORTED on this device: %s\n", (long long)S, form_ops[form],
                       rudnn_last_error());
            else if (st)
                rt_failf("S = RUDNN_CTC_MAX_TARGET [%s]: %s (\"%s\")", form_ops[form], rudnn_status_string(st),
                          rudnn_last_error());
            rudnn_queue_synchronize(rt_queue);
        }
        repoison_outputs();
    }
    /* one more */
    const int64_t d1[2] = {FN, S + 1};
    rt_assert_status(rudnn_tensor_init(&c.d[T_TG], big, 0, RUDNN_I32, 2, d1), RUDNN_STATUS_SUCCESS);
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "targets", "RUDNN_CTC_MAX_TARGET", "S = RUDNN_CTC_MAX_TARGET + 1");
    rudnn_buffer_destroy(big);
}

/* N = 0: success with NULL length arrays, nothing written (the query: some size); the rules that do
 * not depend on N still apply. */
static void empty_batch(void **state)
{
    (void)state;
    callspec_t c;
    for (int k = 0; k < 3; k++) {
        spec_init(&c), set_problem(&c, FT, 0, FC, FS), c.null_il = c.null_tl = 1;
        if (k == 1)
            c.null_t[T_GRAD] = c.null_t[T_GL] = 1;
        if (k == 2) { /* a workspace buffer given: nothing needed, nothing written */
            rt_assert_status(rudnn_buffer_create(rt_ctx, 512, &c.ws), RUDNN_STATUS_SUCCESS);
            c.ws_bytes = 512;
        }
        for (int form = 0; form < FORMS; form++) {
            rt_guard_begin(&F.guard);
            size_t bytes = BYTES_SENTINEL;
            const rudnn_status_t st = call_form(&c, form, &bytes);
            const int ok = st == RUDNN_STATUS_SUCCESS || (!have_kernels && st == RUDNN_STATUS_NOT_SUPPORTED);
            if (!ok)
                rt_failf("N = 0 (%d) [%s]: %s (\"%s\")", k, form_ops[form], rudnn_status_string(st),
                          rudnn_last_error());
            if (!st && form == F_SIZE && bytes == BYTES_SENTINEL)
                rt_failf("N = 0 (%d) [%s]: success without writing *bytes", k, form_ops[form]);
            if (rt_guard_changed(&F.guard)) {
                rt_failf("N = 0 (%d) [%s]: a buffer was written", k, form_ops[form]);
                contract_fixture_restore(&F);
            }
        }
        if (c.ws)
            rudnn_buffer_destroy(c.ws);
    }
    /* the rules not about N */
    spec_init(&c), set_problem(&c, FT, 0, FC, FS), c.null_il = c.null_tl = 1, c.opts.blank = FC;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "options.blank", NULL, "N = 0, blank C");
    spec_init(&c), set_problem(&c, FT, 0, FC, FS), c.null_il = c.null_tl = 1, c.d[T_LP].dtype = RUDNN_I32;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_DTYPE, "log_probs", NULL, "N = 0, log_probs I32");
    spec_init(&c), set_problem(&c, FT, 0, FC, FS), c.null_il = c.null_tl = 1;
    c.d[T_LOSS].dims[0] = 1;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "loss", "dims[0] = 0", "N = 0, loss [1]");
    spec_init(&c), set_problem(&c, FT, 0, FC, FS), c.null_il = c.null_tl = 1, c.queue = NULL;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "queue", "NULL", "N = 0, queue NULL");
}

/* ---- the rejections ---------------------------------------------------------------------------------- */

static void null_arguments(void **state)
{
    (void)state;
    callspec_t c;
    spec_init(&c), c.queue = NULL;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "queue", "NULL", "queue NULL");
    spec_init(&c), c.null_args = 1;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "args", "NULL", "args NULL");
    spec_init(&c), c.null_bytes = 1;
    expect_reject(&c, B_SIZE, RUDNN_STATUS_BAD_PARAM, "bytes", "NULL", "bytes NULL");
    const int required[3] = {T_LP, T_TG, T_LOSS};
    for (int k = 0; k < 3; k++) {
        char what[64];
        snprintf(what, sizeof what, "%s NULL", names[required[k]]);
        spec_init(&c), c.null_t[required[k]] = 1;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, names[required[k]], "NULL", what);
    }
    spec_init(&c), c.null_il = 1;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "input_lengths", "NULL", "input_lengths NULL");
    spec_init(&c), c.null_tl = 1;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "target_lengths", "NULL", "target_lengths NULL");
    /* a tensor without a buffer */
    for (int i = 0; i < T_COUNT; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s without a buffer", names[i]);
        spec_init(&c), c.d[i].buffer = NULL;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, names[i], "no buffer", what);
    }
}

static void ranks(void **state)
{
    (void)state;
    static const struct {
        int tensor;
        int rank;
    } each[] = {{T_LP, 2}, {T_LP, 4}, {T_TG, 1}, {T_TG, 3}, {T_LOSS, 0}, {T_LOSS, 2},
                {T_GL, 0}, {T_GL, 2}, {T_GRAD, 2}, {T_GRAD, 4}};
    for (size_t k = 0; k < sizeof each / sizeof each[0]; k++) {
        callspec_t c;
        spec_init(&c);
        rudnn_tensor_t *t = &c.d[each[k].tensor];
        const int64_t d[4] = {FN, 1, 1, 1}, dl[4] = {FT, FN, FC, 1};
        /* the same elements in another rank */
        rt_reshape(t, each[k].rank, each[k].tensor == T_LP || each[k].tensor == T_GRAD ? dl : d);
        char want[32], what[64];
        snprintf(want, sizeof want, "rank %d", each[k].tensor == T_LP || each[k].tensor == T_GRAD ? 3
                                               : each[k].tensor == T_TG                           ? 2
                                                                                                  : 1);
        snprintf(what, sizeof what, "%s of rank %d", names[each[k].tensor], each[k].rank);
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, names[each[k].tensor], want, what);
    }
    /* rank past RUDNN_MAX_RANK */
    callspec_t c;
    spec_init(&c), c.d[T_LP].rank = RUDNN_MAX_RANK + 1;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "log_probs", "rank", "log_probs rank 9");
    spec_init(&c), c.d[T_GL].rank = -1;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "grad_loss", "rank", "grad_loss rank -1");
}

static void dtypes(void **state)
{
    (void)state;
    callspec_t c;
    static const rudnn_dtype_t not_float[] = {RUDNN_I32, RUDNN_I64, RUDNN_U32, RUDNN_I8, RUDNN_BOOL};
    for (size_t k = 0; k < sizeof not_float / sizeof not_float[0]; k++) {
        char what[64];
        snprintf(what, sizeof what, "log_probs %s", rudnn_dtype_name(not_float[k]));
        spec_init(&c), c.d[T_LP].dtype = c.d[T_GRAD].dtype = not_float[k];
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_DTYPE, "log_probs", "f32, f16 or bf16", what);
        spec_init(&c), c.d[T_LP].dtype = not_float[k], c.null_t[T_GRAD] = 1;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_DTYPE, "log_probs", "f32, f16 or bf16", what);
    }
    spec_init(&c), c.d[T_LP].dtype = (rudnn_dtype_t)99;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_DTYPE, "log_probs", "not a rudnn dtype", "log_probs dtype 99");
    static const rudnn_dtype_t not_int[] = {RUDNN_F32, RUDNN_F16, RUDNN_U32, RUDNN_I8, RUDNN_BOOL};
    for (size_t k = 0; k < sizeof not_int / sizeof not_int[0]; k++) {
        char what[64];
        snprintf(what, sizeof what, "targets %s", rudnn_dtype_name(not_int[k]));
        spec_init(&c), c.d[T_TG].dtype = not_int[k];
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_DTYPE, "targets", "i32 or i64", what);
    }
    static const rudnn_dtype_t not_f32[] = {RUDNN_F16, RUDNN_BF16, RUDNN_I32, RUDNN_U32};
    for (size_t k = 0; k < sizeof not_f32 / sizeof not_f32[0]; k++) {
        char what[64];
        snprintf(what, sizeof what, "loss %s", rudnn_dtype_name(not_f32[k]));
        spec_init(&c), c.d[T_LOSS].dtype = not_f32[k];
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_DTYPE, "loss", "f32", what);
        snprintf(what, sizeof what, "grad_loss %s", rudnn_dtype_name(not_f32[k]));
        spec_init(&c), c.d[T_GL].dtype = not_f32[k];
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_DTYPE, "grad_loss", "f32", what);
    }
    /* loss stays F32 when log_probs is F16 */
    spec_init(&c), c.d[T_LP].dtype = c.d[T_GRAD].dtype = c.d[T_LOSS].dtype = RUDNN_F16;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_DTYPE, "loss", "f32", "loss F16 with F16 log_probs");
    /* grad_log_probs in another dtype than log_probs */
    spec_init(&c), c.d[T_GRAD].dtype = RUDNN_F16;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_DTYPE, "grad_log_probs", "log_probs", "grad_log_probs F16, log_probs F32");
    spec_init(&c), c.d[T_LP].dtype = RUDNN_BF16;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_DTYPE, "grad_log_probs", "log_probs", "grad_log_probs F32, log_probs BF16");
}

static void shapes(void **state)
{
    (void)state;
    callspec_t c;
    /* targets' N */
    for (int d = -1; d <= 1; d += 2) {
        spec_init(&c), c.d[T_TG].dims[0] = FN + d;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "targets", "dims[0] = 3", "targets N off by one");
        spec_init(&c), c.d[T_LOSS].dims[0] = FN + d;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "loss", "dims[0] = 3", "loss N off by one");
        spec_init(&c), c.d[T_GL].dims[0] = FN + d;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "grad_loss", "dims[0] = 3", "grad_loss N off by one");
        spec_init(&c), c.d[T_GL].dims[0] = FN + d, c.null_t[T_GRAD] = 1; /* checked even when unread */
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "grad_loss", "dims[0] = 3", "grad_loss N off, no gradient");
    }
    /* grad_log_probs' dims */
    for (int i = 0; i < 3; i++) {
        spec_init(&c), c.d[T_GRAD].dims[i] -= 1;
        rt_reshape(&c.d[T_GRAD], 3, c.d[T_GRAD].dims);
        char what[64];
        snprintf(what, sizeof what, "grad_log_probs dims[%d] one short", i);
        expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "grad_log_probs", "[6, 3, 5]", "log_probs", what);
    }
    /* C = 0 */
    spec_init(&c), set_problem(&c, FT, FN, 0, FS);
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "log_probs", "C = 0", "C = 0");
    spec_init(&c), set_problem(&c, FT, FN, 0, FS), c.null_t[T_GRAD] = 1;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "log_probs", "C = 0", "C = 0, no gradient");
    /* negative dims */
    spec_init(&c), c.d[T_LP].dims[0] = -1, c.d[T_GRAD].dims[0] = -1;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "log_probs", "negative dims[0]", "T -1");
    spec_init(&c), c.d[T_TG].dims[1] = -4;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, "targets", "negative dims[1]", "S -4");
}

static void options_and_lengths(void **state)
{
    (void)state;
    callspec_t c;
    static const int64_t blanks[] = {-1, FC, FC + 1, INT64_MIN, INT64_MAX};
    for (size_t k = 0; k < sizeof blanks / sizeof blanks[0]; k++) {
        char what[64];
        snprintf(what, sizeof what, "blank %lld", (long long)blanks[k]);
        spec_init(&c), c.opts.blank = blanks[k];
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "options.blank", "0..4", what);
    }
    static const int zis[] = {2, -1, INT_MAX};
    for (size_t k = 0; k < sizeof zis / sizeof zis[0]; k++) {
        char what[64];
        snprintf(what, sizeof what, "zero_infinity %d", zis[k]);
        spec_init(&c), c.opts.zero_infinity = zis[k];
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "options.zero_infinity", "0 or 1", what);
    }
    /* C = 1: only blank 0 */
    spec_init(&c), set_problem(&c, FT, FN, 1, FS), c.opts.blank = 1;
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "options.blank", "0..0", "C = 1, blank 1");
    static const struct {
        int n;
        int64_t v;
        const char *needle;
    } il[] = {{0, -1, "input_lengths[0] = -1"}, {1, FT + 1, "input_lengths[1] = 7"}, {2, INT64_MIN, "input_lengths[2]"},
              {2, INT64_MAX, "input_lengths[2]"}},
      tl[] = {{0, -1, "target_lengths[0] = -1"}, {1, FS + 1, "target_lengths[1] = 5"},
              {2, INT64_MIN, "target_lengths[2]"}, {2, INT64_MAX, "target_lengths[2]"}};
    for (size_t k = 0; k < sizeof il / sizeof il[0]; k++) {
        spec_init(&c), c.il[il[k].n] = il[k].v;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, il[k].needle, "0..6", il[k].needle);
        spec_init(&c), c.tl[tl[k].n] = tl[k].v;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, tl[k].needle, "0..4", tl[k].needle);
    }
    /* T = 0: input lengths must be 0 */
    spec_init(&c), set_problem(&c, 0, FN, FC, FS);
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "input_lengths[0] = 6", "0..0", "T = 0, input length 6");
    /* S = 0: target lengths must be 0 */
    spec_init(&c), set_problem(&c, FT, FN, FC, 0);
    expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "target_lengths[0] = 4", "0..0", "S = 0, target length 4");
}

static void overlaps(void **state)
{
    (void)state;
    callspec_t c;
    /* each output over each input (its first bytes), and exactly on it where the shapes agree */
    static const struct {
        int out, in;
    } pairs[] = {{T_LOSS, T_LP}, {T_LOSS, T_TG}, {T_LOSS, T_GL}, {T_GRAD, T_LP}, {T_GRAD, T_TG},
                 {T_GRAD, T_GL}, {T_GRAD, T_LOSS}};
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        const int o = pairs[k].out, i = pairs[k].in;
        char what[96];
        snprintf(what, sizeof what, "%s over %s's first bytes", names[o], names[i]);
        spec_init(&c), c.d[o].buffer = F.t[i].buffer, c.d[o].offset = 4;
        expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, names[o], names[i], "overlaps", what);
        snprintf(what, sizeof what, "%s over %s's last element", names[o], names[i]);
        spec_init(&c), c.d[o].buffer = F.t[i].buffer;
        c.d[o].offset = F.t[i].t.offset + rudnn_tensor_bytes(&F.t[i].t) - 4;
        expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, names[o], names[i], "overlaps", what);
    }
    /* exactly in place: the outputs may not be an input */
    spec_init(&c), c.d[T_GRAD] = c.d[T_LP];
    expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "grad_log_probs", "log_probs", "overlaps",
                   "grad_log_probs exactly on log_probs");
    spec_init(&c), c.d[T_LOSS] = c.d[T_GL];
    expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "loss", "grad_loss", "overlaps", "loss exactly on grad_loss");
    /* loss over grad_loss without a gradient (grad_loss still an input) */
    spec_init(&c), c.d[T_LOSS] = c.d[T_GL], c.null_t[T_GRAD] = 1;
    expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "loss", "grad_loss", "overlaps",
                   "loss exactly on grad_loss, no gradient");
    /* a strided output whose elements land on an input's */
    spec_init(&c), c.d[T_LOSS].buffer = F.t[T_LP].buffer, c.d[T_LOSS].strides[0] = 7, c.d[T_LOSS].offset = 8;
    expect_reject3(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, "loss", "log_probs", "overlaps", "strided loss inside log_probs");
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
        spec_init(&c), c.d[i] = o.t;
        char what[64];
        snprintf(what, sizeof what, "%s of another context", names[i]);
        expect_reject(&c, B_ALL, RUDNN_STATUS_DEVICE_MISMATCH, names[i], "another context", what);
        if (i == T_GL || i == T_LOSS) { /* without the gradient too */
            c.null_t[T_GRAD] = 1;
            expect_reject(&c, B_ALL, RUDNN_STATUS_DEVICE_MISMATCH, names[i], "another context", what);
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
    for (int i = 0; i < T_COUNT; i++) {
        const size_t elem = rudnn_dtype_size(F.t[i].t.dtype);
        const int r = F.t[i].t.rank;
        char what[96];
        /* a view past the end of its buffer */
        snprintf(what, sizeof what, "%s past its buffer", names[i]);
        spec_init(&c), c.d[i].offset = F.t[i].buffer_bytes - rudnn_tensor_bytes(&F.t[i].t) + elem;
        expect_reject(&c, B_ALL, RUDNN_STATUS_OUT_OF_BOUNDS, names[i], "needs bytes", what);
        snprintf(what, sizeof what, "%s at an offset near SIZE_MAX", names[i]);
        spec_init(&c), c.d[i].offset = SIZE_MAX - (elem - 1);
        expect_reject(&c, B_ALL, RUDNN_STATUS_OUT_OF_BOUNDS, names[i], "its buffer has", what);
        snprintf(what, sizeof what, "%s's outer stride past its buffer", names[i]);
        spec_init(&c), c.d[i].strides[0] = (int64_t)(F.t[i].buffer_bytes / elem);
        expect_reject(&c, B_ALL, RUDNN_STATUS_OUT_OF_BOUNDS, names[i], "needs bytes", what);
        snprintf(what, sizeof what, "%s's outer stride huge", names[i]);
        spec_init(&c), c.d[i].strides[0] = INT64_MAX / 2;
        expect_reject(&c, B_ALL, RUDNN_STATUS_OUT_OF_BOUNDS, names[i], "spans more bytes", what);
        /* a misaligned offset */
        snprintf(what, sizeof what, "%s at offset 2", names[i]);
        spec_init(&c), c.d[i].offset = 2;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_PARAM, names[i], "not a multiple of its element size", what);
        /* strides that describe no view */
        snprintf(what, sizeof what, "%s stride 0", names[i]);
        spec_init(&c), c.d[i].strides[0] = 0;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, names[i], "must be positive", what);
        snprintf(what, sizeof what, "%s stride -1", names[i]);
        spec_init(&c), c.d[i].strides[r - 1] = -1;
        expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, names[i], "must be positive", what);
        if (r > 1) {
            snprintf(what, sizeof what, "%s with overlapping elements", names[i]);
            spec_init(&c), c.d[i].strides[r - 2] = 1, c.d[i].strides[r - 1] = 1;
            expect_reject(&c, B_ALL, RUDNN_STATUS_BAD_SHAPE, names[i], "overlapping elements", what);
        }
    }
}

static void workspaces(void **state)
{
    (void)state;
    if (!have_kernels) {
        printf("    no CTC kernels on this backend: workspace rules not reached\n");
        return;
    }
    for (int grad = 0; grad < 2; grad++) {
        callspec_t c;
        spec_init(&c), c.null_t[T_GRAD] = !grad;
        const char *form = grad ? "with the gradient" : "loss alone";
        size_t need = BYTES_SENTINEL;
        rt_assert_status(call_form(&c, F_SIZE, &need), RUDNN_STATUS_SUCCESS);
        printf("    %s: %zu workspace bytes\n", form, need);
        rudnn_buffer_t ws;
        rt_assert_status(rudnn_buffer_create(rt_ctx, need + 256, &ws), RUDNN_STATUS_SUCCESS);
        char what[96];
        if (need) {
            c.ws = ws, c.ws_bytes = need - 1;
            snprintf(what, sizeof what, "workspace one byte short, %s", form);
            expect_reject3(&c, B_OP, RUDNN_STATUS_BAD_PARAM, "workspace_bytes", "too small",
                           "rudnn_ctc_loss_workspace_size", what);
            c.ws_bytes = 0;
            snprintf(what, sizeof what, "workspace_bytes 0 with a buffer, %s", form);
            expect_reject(&c, B_OP, RUDNN_STATUS_BAD_PARAM, "workspace_bytes", "too small", what);
        }
        c.ws = ws, c.ws_bytes = need + 257;
        snprintf(what, sizeof what, "workspace_bytes past its buffer, %s", form);
        expect_reject(&c, B_OP, RUDNN_STATUS_BAD_PARAM, "workspace_bytes", "exceeds", what);
        c.ws_bytes = SIZE_MAX;
        expect_reject(&c, B_OP, RUDNN_STATUS_BAD_PARAM, "workspace_bytes", "exceeds", what);
        /* over a tensor of the call */
        for (int i = 0; i < T_COUNT; i++) {
            if (c.null_t[i])
                continue;
            c.ws = F.t[i].buffer, c.ws_bytes = need + 16 < F.t[i].buffer_bytes ? need + 16 : F.t[i].buffer_bytes;
            snprintf(what, sizeof what, "workspace over %s, %s", names[i], form);
            expect_reject(&c, B_OP, RUDNN_STATUS_BAD_PARAM, names[i], "overlaps the first workspace_bytes", what);
        }
        if (rt_ctx2) {
            rudnn_buffer_t other;
            rt_assert_status(rudnn_buffer_create(rt_ctx2, need + 16, &other), RUDNN_STATUS_SUCCESS);
            c.ws = other, c.ws_bytes = need;
            snprintf(what, sizeof what, "workspace of ctx2, %s", form);
            expect_reject(&c, B_OP, RUDNN_STATUS_DEVICE_MISMATCH, "workspace", "another context", what);
            rudnn_buffer_destroy(other);
        }
        /* the size asked for, more, and NULL (the pool) */
        c.ws = ws, c.ws_bytes = need;
        snprintf(what, sizeof what, "workspace of the size asked for, %s", form);
        expect_valid_in(&c, B_OP, what);
        c.ws_bytes = need + 256;
        snprintf(what, sizeof what, "workspace larger than asked, %s", form);
        expect_valid_in(&c, B_OP, what);
        c.ws = NULL, c.ws_bytes = 12345; /* ignored without a buffer */
        snprintf(what, sizeof what, "workspace NULL with workspace_bytes set, %s", form);
        expect_valid_in(&c, B_OP, what);
        /* the workspace in an output's buffer, after the output */
        rudnn_buffer_t shared;
        rt_assert_status(rudnn_buffer_create(rt_ctx, need + 4096, &shared), RUDNN_STATUS_SUCCESS);
        spec_init(&c), c.null_t[T_GRAD] = !grad, c.ws = shared, c.ws_bytes = need;
        c.d[T_LOSS].buffer = shared, c.d[T_LOSS].offset = need;
        snprintf(what, sizeof what, "loss in the workspace's buffer past workspace_bytes, %s", form);
        expect_valid_in(&c, B_OP, what);
        c.d[T_LOSS].offset = need - 4;
        snprintf(what, sizeof what, "loss in the workspace's last bytes, %s", form);
        if (need)
            expect_reject(&c, B_OP, RUDNN_STATUS_BAD_PARAM, "loss", "overlaps the first workspace_bytes", what);
        rudnn_buffer_destroy(shared);
        rudnn_buffer_destroy(ws);
    }
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, rt_test_log_setup, rt_test_log_teardown)

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        T(options_init_defaults), T(valid_calls), T(max_target), T(empty_batch), T(null_arguments),
        T(ranks),                 T(dtypes),      T(shapes),     T(options_and_lengths), T(overlaps),
        T(other_context),         T(layouts),     T(workspaces),
    };
    rt_set_filters(argc, argv);
    rt_open_or_skip("ctc-contract");
    if (rt_group_setup_second(NULL))
        return 1;
    rt_print_device("ctc-contract");
    group_setup(NULL);
    /* the fixture's query tells whether the backend has the family */
    callspec_t c;
    spec_init(&c);
    size_t bytes = 0;
    const rudnn_status_t st = call_form(&c, F_SIZE, &bytes);
    have_kernels = st == RUDNN_STATUS_SUCCESS;
    if (st && st != RUDNN_STATUS_NOT_SUPPORTED) {
        printf("ctc-contract: the fixture's workspace query failed: %s (%s)\n", rudnn_status_string(st),
               rudnn_last_error());
        return 1;
    }
    printf("ctc-contract: %s\n", have_kernels ? "the backend has CTC kernels"
                                              : "no CTC kernels: NOT_SUPPORTED expected where one runs");
    const int failed = cmocka_run_group_tests_name("ctc-contract", tests, NULL, group_teardown);
    return rt_exit_code(failed);
}
