/* Contract tests of dense attention (rudnn/attention.h), on the default backend: every error path
 * of rudnn_attention, rudnn_attention_resolve and rudnn_attention_workspace_size returns the
 * right status with a message naming the op, the argument and the rule, and writes nothing:
 * every buffer of the call (and of the second context) is read back byte for byte. Then the
 * successful paths (rudnn_last_error() "" after them), Sq 0, kernel_count / kernel_info.
 *
 * Where the backend has no attention kernels (CUDA and HIP until theirs exist), the checks that
 * come before the kernel choice still run, and every call that would run a kernel must be
 * NOT_SUPPORTED saying so.
 *
 * The backward (rudnn_attention_backward, rudnn_attention_backward_workspace_size): every
 * rejection of the forward's arguments (the tests above run both backward calls too, but for the
 * strategy, which the backward has not), then its own: NULL args, args->out, args->lse, dout, dq,
 * dk, dv; dout, dq, dk, dv unlike out, q, k, v (shape, dtype), not a view with a contiguous last
 * dim, out of bounds, on another context; lse's dtype, shape and layout; each output over each
 * input (q, k, v, mask, attn_bias, out, lse, dout), exactly and partly, and over each other; the
 * workspace too small, past its buffer, over each tensor, on another context. Where the backend
 * has no backward (CUDA and HIP today) the rejections are the same (they come first) and a valid
 * call is NOT_SUPPORTED naming the op, writing nothing.
 *
 * Fixture (F32): q [1, 2, 4, 8], k and v [1, 1, 5, 8] (GQA 2), mask BOOL and attn_bias F32
 * [1, 2, 4, 5], out [1, 2, 4, 8], lse [1, 2, 4]; the backward's dout [1, 2, 4, 8], dq [1, 2, 4, 8],
 * dk and dv [1, 1, 5, 8]; each in its own buffer with SLACK spare bytes, so views of other shapes,
 * dtypes and offsets fit in the same buffers.
 *
 * Usage: test_attention_contract [glob] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define SLACK 8192

enum { T_Q, T_K, T_V, T_MASK, T_BIAS, T_OUT, T_LSE, T_COUNT };
static const char *const tensor_names[T_COUNT] = {"q", "k", "v", "mask", "attn_bias", "out", "lse"};
static const int64_t dims_q[4] = {1, 2, 4, 8}, dims_kv[4] = {1, 1, 5, 8}, dims_s[4] = {1, 2, 4, 5};
static const int64_t dims_lse[3] = {1, 2, 4};

/* the backward's tensors */
enum { G_DOUT, G_DQ, G_DK, G_DV, G_COUNT };
static const char *const grad_names[G_COUNT] = {"dout", "dq", "dk", "dv"};
static const int grad_like[G_COUNT] = {T_OUT, T_Q, T_K, T_V}; /* the tensor each must be like */

enum { OP_ATTN, OP_RESOLVE, OP_WS, OP_BWD, OP_BWD_WS, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"attention", "attention_resolve", "attention_workspace_size",
                                               "attention_backward", "attention_backward_workspace_size"};

static int have_kernels; /* the backend has an attention table */

typedef struct fx {
    rt_tensor_t t[T_COUNT];
    rt_tensor_t t2[T_COUNT]; /* the same on the second context */
    rt_tensor_t g[G_COUNT], g2[G_COUNT]; /* dout, dq, dk, dv; on the second context */
    rt_guard_t guard;
    rt_log_t log;
} fx_t;

static void make_set(rt_tensor_t *t, uint64_t seed)
{
    const int64_t *dims[T_COUNT] = {dims_q, dims_kv, dims_kv, dims_s, dims_s, dims_q, dims_lse};
    for (int i = 0; i < T_COUNT; i++)
        rt_tensor_create(&t[i], i == T_MASK ? RUDNN_BOOL : RUDNN_F32, i == T_LSE ? 3 : 4, dims[i], 0, SLACK);
    rt_rng_t rng;
    rt_rng_seed(&rng, seed);
    for (int i = T_Q; i <= T_V; i++)
        rt_tensor_fill_uniform(&t[i], &rng, -1, 1);
    rt_tensor_fill_uniform(&t[T_BIAS], &rng, -1, 1);
    uint8_t m[40];
    for (int i = 0; i < 40; i++)
        m[i] = (uint8_t)(i % 3 == 0);
    rt_assert_status(rudnn_tensor_write(rt_queue, &t[T_MASK].t, m, sizeof m), RUDNN_STATUS_SUCCESS);
}

/* dout (values), dq, dk, dv (poisoned: rt_tensor_create) */
static void make_grads(rt_tensor_t *g, uint64_t seed)
{
    const int64_t *dims[G_COUNT] = {dims_q, dims_q, dims_kv, dims_kv};
    for (int i = 0; i < G_COUNT; i++)
        rt_tensor_create(&g[i], RUDNN_F32, 4, dims[i], 0, SLACK);
    rt_rng_t rng;
    rt_rng_seed(&rng, seed);
    rt_tensor_fill_uniform(&g[G_DOUT], &rng, -1, 1);
}

static int fx_setup(void **state)
{
    fx_t *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    *state = f;
    make_set(f->t, 1);
    make_grads(f->g, 3);
    for (int i = 0; i < T_COUNT; i++)
        rt_guard_track(&f->guard, rt_queue, &f->t[i], tensor_names[i]);
    for (int i = 0; i < G_COUNT; i++)
        rt_guard_track(&f->guard, rt_queue, &f->g[i], grad_names[i]);
    rt_binding_t saved = rt_bind(rt_ctx2, rt_queue2);
    make_set(f->t2, 2);
    make_grads(f->g2, 4);
    rt_unbind(saved);
    for (int i = 0; i < T_COUNT; i++)
        rt_guard_track(&f->guard, rt_queue2, &f->t2[i], NULL);
    for (int i = 0; i < G_COUNT; i++)
        rt_guard_track(&f->guard, rt_queue2, &f->g2[i], NULL);
    return 0;
}

static int fx_teardown(void **state)
{
    fx_t *f = *state;
    if (!f)
        return 0;
    rt_guard_free(&f->guard);
    for (int i = 0; i < T_COUNT; i++) {
        rt_tensor_destroy(&f->t[i]);
        rt_tensor_destroy(&f->t2[i]);
    }
    for (int i = 0; i < G_COUNT; i++) {
        rt_tensor_destroy(&f->g[i]);
        rt_tensor_destroy(&f->g2[i]);
    }
    free(f);
    return 0;
}

/* ---- calling ------------------------------------------------------------------------------- */

typedef struct args {
    rudnn_queue_t queue;
    const rudnn_tensor_t *t[T_COUNT];
    const rudnn_tensor_t *g[G_COUNT]; /* the backward's dout, dq, dk, dv */
    const rudnn_attention_options_t *options;
    rudnn_attention_options_t opts;
    rudnn_attention_strategy_t strategy;
    rudnn_buffer_t workspace;
    size_t workspace_bytes;
    int null_result; /* resolve: choice NULL; workspace_size: bytes NULL */
    int null_args;   /* the backward: args NULL */
} args_t;

static args_t defaults(const fx_t *f)
{
    args_t a;
    memset(&a, 0, sizeof a);
    a.queue = rt_queue;
    for (int i = 0; i < T_COUNT; i++)
        a.t[i] = &f->t[i].t;
    for (int i = 0; i < G_COUNT; i++)
        a.g[i] = &f->g[i].t;
    a.strategy = RUDNN_ATTENTION_AUTOTUNE;
    return a;
}

static rudnn_status_t call(int op, args_t *a)
{
    const rudnn_attention_options_t *o = a->options;
    rudnn_attention_choice_t choice;
    size_t bytes;
    switch (op) {
    case OP_ATTN:
        return rudnn_attention(a->queue, a->t[T_Q], a->t[T_K], a->t[T_V], a->t[T_MASK], a->t[T_BIAS], o, a->strategy,
                               a->workspace, a->workspace_bytes, a->t[T_OUT], a->t[T_LSE]);
    case OP_RESOLVE:
        return rudnn_attention_resolve(a->queue, a->t[T_Q], a->t[T_K], a->t[T_V], a->t[T_MASK], a->t[T_BIAS], o,
                                       a->strategy, a->t[T_OUT], a->t[T_LSE], a->null_result ? NULL : &choice);
    case OP_WS:
        return rudnn_attention_workspace_size(a->queue, a->t[T_Q], a->t[T_K], a->t[T_V], a->t[T_MASK],
                                              a->t[T_BIAS], o, a->strategy, a->t[T_OUT], a->t[T_LSE],
                                              a->null_result ? NULL : &bytes);
    default: {
        const rudnn_attention_backward_args_t g = {a->t[T_Q],   a->t[T_K],    a->t[T_V],   a->t[T_MASK],
                                                   a->t[T_BIAS], a->t[T_OUT], a->t[T_LSE], a->g[G_DOUT],
                                                   a->g[G_DQ],   a->g[G_DK],   a->g[G_DV]};
        const rudnn_attention_backward_args_t *ga = a->null_args ? NULL : &g;
        if (op == OP_BWD)
            return rudnn_attention_backward(a->queue, ga, o, a->workspace, a->workspace_bytes);
        return rudnn_attention_backward_workspace_size(a->queue, ga, o, a->null_result ? NULL : &bytes);
    }
    }
}

/* Calls op and checks: status want, a message naming the op (and arg and rule when given), no
 * buffer changed. */
static void expect_op(fx_t *f, int op, args_t *a, rudnn_status_t want, const char *arg, const char *rule,
                      const char *what)
{
    rt_guard_begin(&f->guard);
    rudnn_status_t st = call(op, a);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", rudnn_last_error());
    int bad = 0;
    if (st != want) {
        rt_logf(&f->log, "  %s, %s: returned %s, expected %s; message \"%s\"\n", op_names[op], what,
                rudnn_status_string(st), rudnn_status_string(want), msg);
        bad = 1;
    }
    if (want && (strncmp(msg, op_names[op], strlen(op_names[op])) != 0 || msg[strlen(op_names[op])] != ':')) {
        rt_logf(&f->log, "  %s, %s: message \"%s\" does not start with the op\n", op_names[op], what, msg);
        bad = 1;
    }
    if (want && arg && !strstr(msg, arg)) {
        rt_logf(&f->log, "  %s, %s: message \"%s\" does not name \"%s\"\n", op_names[op], what, msg, arg);
        bad = 1;
    }
    if (want && rule && !strstr(msg, rule)) {
        rt_logf(&f->log, "  %s, %s: message \"%s\" does not say \"%s\"\n", op_names[op], what, msg, rule);
        bad = 1;
    }
    if (!want && msg[0]) {
        rt_logf(&f->log, "  %s, %s: succeeded but rudnn_last_error() is \"%s\"\n", op_names[op], what, msg);
        bad = 1;
    }
    int changed = want ? rt_guard_changed(&f->guard) : 0;
    if (changed) {
        rt_logf(&f->log, "  %s, %s: %d buffer(s) written by a rejected call\n", op_names[op], what, changed);
        bad = 1;
    }
    f->log.failures += bad;
}

/* The same rejection from the calls of ops (a bit per OP_*). */
static void expect_reject_ops(fx_t *f, unsigned ops, const args_t *a, rudnn_status_t want, const char *arg,
                              const char *rule, const char *what)
{
    for (int op = 0; op < OP_COUNT; op++) {
        if (!(ops & (1u << op)))
            continue;
        args_t b = *a;
        if (b.options == &a->opts)
            b.options = &b.opts;
        expect_op(f, op, &b, want, arg, rule, what);
    }
}

#define FWD_OPS 7u                                    /* the forward's three calls */
#define BWD_OPS ((1u << OP_BWD) | (1u << OP_BWD_WS)) /* the backward's two */
#define ALL_OPS (FWD_OPS | BWD_OPS)
/* Every call: every rule of the forward's arguments holds for the backward too. */
static void expect_reject(fx_t *f, const args_t *a, rudnn_status_t want, const char *arg, const char *rule,
                          const char *what)
{
    expect_reject_ops(f, ALL_OPS, a, want, arg, rule, what);
}

/* A descriptor over fixture tensor i's buffer, of any dtype, shape and byte offset. */
static rudnn_tensor_t view(const fx_t *f, int i, rudnn_dtype_t dt, int rank, const int64_t *dims, size_t offset)
{
    return rt_tensor_desc(&f->t[i], dt, rank, dims, offset);
}

static void finish(fx_t *f) { rt_log_finish(&f->log, "check(s)"); }

/* ---- tests --------------------------------------------------------------------------------- */

static void test_null_arguments(void **state)
{
    fx_t *f = *state;
    args_t a = defaults(f);
    a.queue = NULL;
    expect_reject(f, &a, RUDNN_STATUS_BAD_PARAM, "queue", "NULL", "NULL queue");
    for (int i = T_Q; i <= T_V; i++) {
        a = defaults(f);
        a.t[i] = NULL;
        expect_reject(f, &a, RUDNN_STATUS_BAD_PARAM, tensor_names[i], "NULL", "NULL tensor");
    }
    a = defaults(f);
    a.t[T_OUT] = NULL;
    expect_reject_ops(f, 1u << OP_ATTN, &a, RUDNN_STATUS_BAD_PARAM, "out", "NULL", "NULL out");
    a = defaults(f);
    a.null_result = 1;
    expect_reject_ops(f, 1u << OP_RESOLVE, &a, RUDNN_STATUS_BAD_PARAM, "choice", "NULL", "NULL choice");
    expect_reject_ops(f, 1u << OP_WS, &a, RUDNN_STATUS_BAD_PARAM, "bytes", "NULL", "NULL bytes");
    rudnn_tensor_t nobuf;
    rt_assert_status(rudnn_tensor_init(&nobuf, NULL, 0, RUDNN_F32, 4, dims_q), RUDNN_STATUS_SUCCESS);
    for (int i = 0; i < T_COUNT; i++) {
        if (i == T_MASK || i == T_BIAS || i == T_LSE)
            continue;
        a = defaults(f);
        a.t[i] = &nobuf;
        expect_reject(f, &a, RUDNN_STATUS_BAD_PARAM, tensor_names[i], "no buffer", "tensor without a buffer");
    }
    finish(f);
}

static void test_bad_dtypes(void **state)
{
    fx_t *f = *state;
    struct {
        int i;
        rudnn_dtype_t dt;
        const char *rule;
    } bad[] = {
        {T_Q, RUDNN_I32, "f32, f16 or bf16"}, {T_Q, RUDNN_BOOL, "f32, f16 or bf16"}, {T_K, RUDNN_F16, "dtype of q"},
        {T_V, RUDNN_BF16, "dtype of q"},      {T_OUT, RUDNN_F16, "dtype of q"},     {T_MASK, RUDNN_F32, "bool"},
        {T_MASK, RUDNN_I8, "bool"},           {T_BIAS, RUDNN_F16, "f32 or f32"},    {T_BIAS, RUDNN_I32, "f32 or"},
        {T_LSE, RUDNN_F16, "f32"},
    };
    for (size_t n = 0; n < sizeof bad / sizeof bad[0]; n++) {
        args_t a = defaults(f);
        const rudnn_tensor_t *t = &f->t[bad[n].i].t;
        rudnn_tensor_t v = view(f, bad[n].i, bad[n].dt, t->rank, t->dims, 0);
        a.t[bad[n].i] = &v;
        char what[64];
        snprintf(what, sizeof what, "%s as %s", tensor_names[bad[n].i], rudnn_dtype_name(bad[n].dt));
        if (bad[n].i == T_OUT)
            expect_reject_ops(f, ALL_OPS, &a, RUDNN_STATUS_BAD_DTYPE, "out", bad[n].rule, what);
        else
            expect_reject(f, &a, RUDNN_STATUS_BAD_DTYPE, tensor_names[bad[n].i], bad[n].rule, what);
    }
    /* an invalid dtype value */
    args_t a = defaults(f);
    rudnn_tensor_t q = f->t[T_Q].t;
    q.dtype = RUDNN_DTYPE_COUNT;
    a.t[T_Q] = &q;
    expect_reject(f, &a, RUDNN_STATUS_BAD_DTYPE, "q", "not a rudnn dtype", "q dtype out of range");
    finish(f);
}

static void test_bad_shapes(void **state)
{
    fx_t *f = *state;
    struct {
        int i, rank;
        int64_t dims[5];
        const char *rule;
    } bad[] = {
        {T_Q, 3, {2, 4, 8}, "rank 4"},
        {T_K, 5, {1, 1, 1, 5, 8}, "rank 4"},
        {T_OUT, 3, {2, 4, 8}, "rank 4"},
        {T_MASK, 3, {2, 4, 5}, "rank 4"},
        {T_BIAS, 2, {4, 5}, "rank 4"},
        {T_LSE, 4, {1, 2, 4, 1}, "rank 3"},
        {T_K, 4, {1, 3, 5, 8}, "dividing Hq"},      /* Hq 2 % Hkv 3 */
        {T_K, 4, {2, 1, 5, 8}, "batch"},            /* B differs */
        {T_K, 4, {1, 0, 5, 8}, "Hkv >= 1"},
        {T_K, 4, {1, 1, 5, 7}, "head dim D of q"},
        {T_V, 4, {1, 1, 4, 8}, "B, Hkv, Skv of k"},
        {T_V, 4, {1, 2, 5, 8}, "B, Hkv, Skv of k"},
        {T_V, 4, {1, 1, 5, 0}, "Dv = 0"},
        {T_V, 4, {1, 1, 5, 257}, "Dv = 257"},
        {T_OUT, 4, {1, 2, 4, 7}, "Dv of v"},
        {T_OUT, 4, {1, 2, 3, 8}, "[B, Hq, Sq]"},
        {T_MASK, 4, {1, 2, 4, 6}, "[B or 1, Hq or 1, Sq, Skv]"},
        {T_MASK, 4, {2, 2, 4, 5}, "[B or 1, Hq or 1, Sq, Skv]"},
        {T_BIAS, 4, {1, 3, 4, 5}, "[B or 1, Hq or 1, Sq, Skv]"},
        {T_BIAS, 4, {1, 2, 5, 5}, "[B or 1, Hq or 1, Sq, Skv]"},
        {T_LSE, 3, {1, 2, 5}, "[B, Hq, Sq]"},
    };
    for (size_t n = 0; n < sizeof bad / sizeof bad[0]; n++) {
        args_t a = defaults(f);
        int i = bad[n].i;
        rudnn_tensor_t v = view(f, i, f->t[i].t.dtype, bad[n].rank, bad[n].dims, 0);
        a.t[i] = &v;
        char what[64];
        snprintf(what, sizeof what, "%s shape variant %zu", tensor_names[i], n);
        expect_reject(f, &a, RUDNN_STATUS_BAD_SHAPE, tensor_names[i], bad[n].rule, what);
    }
    /* B = 0, Hq = 0, D = 0 and 257 on q (k follows) */
    static const int64_t q_bad[][4] = {{0, 2, 4, 8}, {1, 0, 4, 8}, {1, 2, 4, 0}, {1, 2, 1, 257}};
    static const int64_t k_bad[][4] = {{0, 1, 5, 8}, {1, 1, 5, 8}, {1, 1, 5, 0}, {1, 1, 1, 257}};
    static const char *const q_rule[] = {"B >= 1", "Hq >= 1", "D = 0", "D = 257"};
    for (int n = 0; n < 4; n++) {
        args_t a = defaults(f);
        rudnn_tensor_t q = view(f, T_Q, RUDNN_F32, 4, q_bad[n], 0), k = view(f, T_K, RUDNN_F32, 4, k_bad[n], 0);
        a.t[T_Q] = &q;
        a.t[T_K] = &k;
        a.t[T_OUT] = NULL, a.t[T_MASK] = NULL, a.t[T_BIAS] = NULL, a.t[T_LSE] = NULL;
        expect_reject_ops(f, (1u << OP_RESOLVE) | (1u << OP_WS), &a, RUDNN_STATUS_BAD_SHAPE, "q", q_rule[n], q_rule[n]);
    }
    /* a negative dim written into the descriptor */
    args_t a = defaults(f);
    rudnn_tensor_t q = f->t[T_Q].t;
    q.dims[2] = -4;
    a.t[T_Q] = &q;
    expect_reject(f, &a, RUDNN_STATUS_BAD_SHAPE, "q", "negative", "negative dim");
    finish(f);
}

static void test_strides(void **state)
{
    fx_t *f = *state;
    /* a last dim of stride 2 (a valid view: every other element) */
    args_t a = defaults(f);
    rudnn_tensor_t q = f->t[T_Q].t;
    q.strides[3] = 2, q.strides[2] = 16, q.strides[1] = 64, q.strides[0] = 128;
    a.t[T_Q] = &q;
    expect_reject(f, &a, RUDNN_STATUS_NOT_SUPPORTED, "q", "contiguous last dim", "q last stride 2");
    for (int i = T_K; i <= T_OUT; i++) {
        a = defaults(f);
        rudnn_tensor_t t = f->t[i].t;
        t.strides[3] = 2;
        for (int d = 2; d >= 0; d--)
            t.strides[d] = t.strides[d + 1] * t.dims[d + 1] * (d == 2 ? 2 : 1);
        a.t[i] = &t;
        expect_reject(f, &a, RUDNN_STATUS_NOT_SUPPORTED, tensor_names[i], "contiguous last dim", "last stride 2");
    }
    /* strides that describe no view: two rows at one address */
    a = defaults(f);
    q = f->t[T_Q].t;
    q.strides[2] = 0;
    a.t[T_Q] = &q;
    expect_reject(f, &a, RUDNN_STATUS_BAD_SHAPE, "q", "stride", "q stride 0");
    /* lse must be contiguous: a transposed view is a valid one, but not accepted */
    a = defaults(f);
    rudnn_tensor_t lse = f->t[T_LSE].t;
    lse.strides[1] = 1, lse.strides[2] = 2, lse.strides[0] = 8;
    a.t[T_LSE] = &lse;
    expect_reject(f, &a, RUDNN_STATUS_NOT_SUPPORTED, "lse", "contiguous", "lse transposed");
    /* past the end of the buffer, misaligned */
    for (int i = 0; i < T_COUNT; i++) {
        a = defaults(f);
        rudnn_tensor_t t = f->t[i].t;
        t.offset = f->t[i].buffer_bytes - 4;
        a.t[i] = &t;
        expect_reject(f, &a, RUDNN_STATUS_OUT_OF_BOUNDS, tensor_names[i], "bytes", "past the end");
        if (i == T_MASK)
            continue; /* bool: any byte offset is aligned */
        t = f->t[i].t;
        t.offset = 2;
        a.t[i] = &t;
        expect_reject(f, &a, RUDNN_STATUS_BAD_PARAM, tensor_names[i], "offset", "misaligned");
    }
    finish(f);
}

static void test_device_mismatch(void **state)
{
    fx_t *f = *state;
    for (int i = 0; i < T_COUNT; i++) {
        args_t a = defaults(f);
        a.t[i] = &f->t2[i].t;
        expect_reject(f, &a, RUDNN_STATUS_DEVICE_MISMATCH, tensor_names[i], "another context", "on ctx2");
    }
    finish(f);
}

static void test_overlap(void **state)
{
    fx_t *f = *state;
    /* out over q exactly (in place is not allowed), over k, mask or bias partly; lse over out */
    args_t a = defaults(f);
    rudnn_tensor_t out = view(f, T_Q, RUDNN_F32, 4, dims_q, 0);
    a.t[T_OUT] = &out;
    expect_reject(f, &a, RUDNN_STATUS_BAD_PARAM, "out overlaps q", NULL, "out == q");
    a = defaults(f);
    out = view(f, T_K, RUDNN_F32, 4, dims_q, 64);
    a.t[T_OUT] = &out;
    expect_reject(f, &a, RUDNN_STATUS_BAD_PARAM, "out overlaps k", NULL, "out over k");
    a = defaults(f);
    rudnn_tensor_t lse = view(f, T_OUT, RUDNN_F32, 3, dims_lse, 16);
    a.t[T_LSE] = &lse;
    expect_reject(f, &a, RUDNN_STATUS_BAD_PARAM, "lse overlaps out", NULL, "lse over out");
    a = defaults(f);
    lse = view(f, T_BIAS, RUDNN_F32, 3, dims_lse, 0);
    a.t[T_LSE] = &lse;
    expect_reject(f, &a, RUDNN_STATUS_BAD_PARAM, "lse overlaps attn_bias", NULL, "lse over bias");
    a = defaults(f);
    out = view(f, T_MASK, RUDNN_F32, 4, dims_q, 8);
    a.t[T_OUT] = &out;
    expect_reject(f, &a, RUDNN_STATUS_BAD_PARAM, "out overlaps mask", NULL, "out over mask");
    finish(f);
}

static void test_options(void **state)
{
    fx_t *f = *state;
    struct {
        float scale, softcap;
        int causal;
        int64_t wl, wr;
        const char *arg, *rule;
    } bad[] = {
        {NAN, 0, 0, -1, -1, "scale", "finite"},         {INFINITY, 0, 0, -1, -1, "scale", "finite"},
        {1, -1, 0, -1, -1, "softcap", "> 0"},           {1, NAN, 0, -1, -1, "softcap", "> 0"},
        {1, INFINITY, 0, -1, -1, "softcap", "finite"},  {1, 0, 0, -2, -1, "window_left", ">= 0"},
        {1, 0, 0, -1, -9, "window_right", ">= 0"},      {1, 0, 1, -1, 2, "causal", "inconsistent"},
    };
    for (size_t n = 0; n < sizeof bad / sizeof bad[0]; n++) {
        args_t a = defaults(f);
        rudnn_attention_options_init(&a.opts);
        a.opts.scale = bad[n].scale, a.opts.softcap = bad[n].softcap, a.opts.causal = bad[n].causal;
        a.opts.window_left = bad[n].wl, a.opts.window_right = bad[n].wr;
        a.options = &a.opts;
        char what[64];
        snprintf(what, sizeof what, "options variant %zu", n);
        expect_reject(f, &a, RUDNN_STATUS_BAD_PARAM, bad[n].arg, bad[n].rule, what);
    }
    static const int strategies[] = {-1, 4, 1000};
    for (int n = 0; n < 3; n++) {
        args_t a = defaults(f);
        a.strategy = (rudnn_attention_strategy_t)strategies[n];
        expect_reject_ops(f, FWD_OPS, &a, RUDNN_STATUS_BAD_PARAM, "strategy", "not a rudnn_attention_strategy_t",
                          "strategy");
    }
    finish(f);
}

/* Strategies the backend lists. */
static int listed(rudnn_attention_strategy_t s)
{
    int n = 0;
    if (rudnn_attention_kernel_count(rt_ctx, &n))
        return 0;
    for (int i = 0; i < n; i++) {
        const char *name;
        rudnn_attention_strategy_t st;
        rudnn_attention_kernel_info(rt_ctx, i, &name, &st);
        if (st == s)
            return 1;
    }
    return 0;
}

static void test_kernel_choice(void **state)
{
    fx_t *f = *state;
    args_t a = defaults(f);
    if (!have_kernels) {
        expect_reject_ops(f, FWD_OPS, &a, RUDNN_STATUS_NOT_SUPPORTED, "has no attention kernels", NULL, "no table");
        finish(f);
        return;
    }
    for (int s = RUDNN_ATTENTION_FALLBACK; s <= RUDNN_ATTENTION_FLASH_ACCELERATED; s++) {
        if (listed((rudnn_attention_strategy_t)s))
            continue;
        a = defaults(f);
        a.strategy = (rudnn_attention_strategy_t)s;
        expect_reject_ops(f, FWD_OPS, &a, RUDNN_STATUS_NOT_SUPPORTED, "no ", "kernel on", "unlisted strategy");
    }
    finish(f);
}

static void test_workspace(void **state)
{
    fx_t *f = *state;
    args_t a = defaults(f);
    for (int s = RUDNN_ATTENTION_AUTOTUNE; s <= RUDNN_ATTENTION_FLASH_ACCELERATED && have_kernels; s++) {
        if (s && !listed((rudnn_attention_strategy_t)s))
            continue;
        a = defaults(f);
        a.strategy = (rudnn_attention_strategy_t)s;
        size_t need = 0;
        rudnn_attention_choice_t choice;
        /* a listed strategy may have no kernel for these F32 operands (CUDA's tensor-core kernel) */
        if (s && rudnn_attention_resolve(rt_queue, a.t[T_Q], a.t[T_K], a.t[T_V], a.t[T_MASK], a.t[T_BIAS], NULL,
                                         a.strategy, a.t[T_OUT], a.t[T_LSE], &choice) == RUDNN_STATUS_NOT_SUPPORTED)
            continue;
        rt_assert_status(rudnn_attention_workspace_size(rt_queue, a.t[T_Q], a.t[T_K], a.t[T_V], a.t[T_MASK],
                                                        a.t[T_BIAS], NULL, a.strategy, a.t[T_OUT], a.t[T_LSE], &need),
                         RUDNN_STATUS_SUCCESS);
        rudnn_buffer_t ws = NULL;
        rt_assert_status(rudnn_buffer_create(rt_ctx, need + 64, &ws), RUDNN_STATUS_SUCCESS);
        if (need) {
            a.workspace = ws, a.workspace_bytes = need - 1;
            expect_reject_ops(f, 1u << OP_ATTN, &a, RUDNN_STATUS_BAD_PARAM, "workspace_bytes", "too small",
                              "workspace one byte short");
        }
        a.workspace = ws, a.workspace_bytes = need + 65;
        expect_reject_ops(f, 1u << OP_ATTN, &a, RUDNN_STATUS_BAD_PARAM, "workspace_bytes", "exceeds",
                          "workspace_bytes past the buffer");
        /* the caller's workspace of exactly the size asked for */
        a.workspace = ws, a.workspace_bytes = need;
        expect_op(f, OP_ATTN, &a, RUDNN_STATUS_SUCCESS, NULL, NULL, "workspace of the size asked for");
        rudnn_queue_synchronize(rt_queue);
        /* the workspace over the output */
        a.workspace = f->t[T_OUT].buffer, a.workspace_bytes = need ? need : 4;
        if (f->t[T_OUT].buffer_bytes >= a.workspace_bytes)
            expect_reject_ops(f, 1u << OP_ATTN, &a, RUDNN_STATUS_BAD_PARAM, "out overlaps", "workspace",
                              "workspace over out");
        a.workspace = f->t2[T_OUT].buffer, a.workspace_bytes = 4;
        expect_reject_ops(f, 1u << OP_ATTN, &a, RUDNN_STATUS_DEVICE_MISMATCH, "workspace", "another context",
                          "workspace on ctx2");
        rudnn_buffer_destroy(ws);
    }
    finish(f);
}

static void test_success(void **state)
{
    fx_t *f = *state;
    unsigned ok_ops = have_kernels ? FWD_OPS : 0;
    args_t a = defaults(f);
    a.queue = NULL;
    (void)call(OP_ATTN, &a); /* leaves an error */
    a = defaults(f);
    if (have_kernels) {
        for (int op = 0; op <= OP_WS; op++)
            expect_op(f, op, &a, RUDNN_STATUS_SUCCESS, NULL, NULL, "valid call after a failed one");
        /* optional tensors absent; explicit options; F16 with an F32 bias; [B, S, H, D] views */
        a.t[T_MASK] = a.t[T_BIAS] = a.t[T_LSE] = NULL;
        rudnn_attention_options_init(&a.opts);
        a.opts.causal = 1;
        a.opts.window_left = 2;
        a.options = &a.opts;
        expect_op(f, OP_ATTN, &a, RUDNN_STATUS_SUCCESS, NULL, NULL, "no mask, bias, lse; causal + window");
        a = defaults(f);
        rudnn_tensor_t q = f->t[T_Q].t;
        q.strides[2] = 16, q.strides[1] = 8, q.strides[0] = 64; /* [1, 4, 2, 8] memory */
        a.t[T_Q] = &q;
        expect_op(f, OP_ATTN, &a, RUDNN_STATUS_SUCCESS, NULL, NULL, "q as a [B, S, H, D] view");
        rudnn_queue_synchronize(rt_queue);
    }
    /* Sq 0: nothing written (on a backend without kernels: NOT_SUPPORTED, also nothing) */
    static const int64_t q0[4] = {1, 2, 0, 8}, m0[4] = {1, 2, 0, 5}, l0[3] = {1, 2, 0};
    rudnn_tensor_t q = view(f, T_Q, RUDNN_F32, 4, q0, 0), o = view(f, T_OUT, RUDNN_F32, 4, q0, 0);
    rudnn_tensor_t m = view(f, T_MASK, RUDNN_BOOL, 4, m0, 0), b = view(f, T_BIAS, RUDNN_F32, 4, m0, 0);
    rudnn_tensor_t l = view(f, T_LSE, RUDNN_F32, 3, l0, 0);
    a = defaults(f);
    a.t[T_Q] = &q, a.t[T_OUT] = &o, a.t[T_MASK] = &m, a.t[T_BIAS] = &b, a.t[T_LSE] = &l;
    for (int op = 0; op <= OP_WS; op++) {
        rt_guard_begin(&f->guard);
        expect_op(f, op, &a, (ok_ops >> op) & 1 ? RUDNN_STATUS_SUCCESS : RUDNN_STATUS_NOT_SUPPORTED, NULL, NULL,
                  "Sq 0");
        if (rt_guard_changed(&f->guard)) {
            rt_logf(&f->log, "  %s: Sq 0 wrote to a buffer\n", op_names[op]);
            f->log.failures++;
        }
    }
    if (have_kernels) {
        rudnn_attention_choice_t choice;
        rt_assert_status(rudnn_attention_resolve(rt_queue, a.t[T_Q], a.t[T_K], a.t[T_V], NULL, NULL, NULL,
                                                 RUDNN_ATTENTION_AUTOTUNE, NULL, NULL, &choice),
                         RUDNN_STATUS_SUCCESS);
        if (strcmp(choice.kernel, "attention.none") != 0 || !strstr(choice.reason, "Sq is 0")) {
            rt_logf(&f->log, "  resolve with Sq 0: kernel %s, reason \"%s\"\n", choice.kernel, choice.reason);
            f->log.failures++;
        }
    }
    finish(f);
}

static void test_kernel_info(void **state)
{
    fx_t *f = *state;
    int n = -1;
    rudnn_status_t st = rudnn_attention_kernel_count(NULL, &n);
    if (st != RUDNN_STATUS_BAD_PARAM || !strstr(rudnn_last_error(), "attention_kernel_count: context")) {
        rt_logf(&f->log, "  kernel_count(NULL context): %s \"%s\"\n", rudnn_status_string(st), rudnn_last_error());
        f->log.failures++;
    }
    st = rudnn_attention_kernel_count(rt_ctx, NULL);
    if (st != RUDNN_STATUS_BAD_PARAM || !strstr(rudnn_last_error(), "count is NULL")) {
        rt_logf(&f->log, "  kernel_count(NULL count): %s \"%s\"\n", rudnn_status_string(st), rudnn_last_error());
        f->log.failures++;
    }
    st = rudnn_attention_kernel_count(rt_ctx, &n);
    if (st != (have_kernels ? RUDNN_STATUS_SUCCESS : RUDNN_STATUS_NOT_SUPPORTED) || (have_kernels && n < 1)) {
        rt_logf(&f->log, "  kernel_count: %s, %d: \"%s\"\n", rudnn_status_string(st), n, rudnn_last_error());
        f->log.failures++;
    }
    const char *name = NULL;
    rudnn_attention_strategy_t s;
    for (int i = 0; have_kernels && i < n; i++) {
        st = rudnn_attention_kernel_info(rt_ctx, i, &name, &s);
        if (st || strncmp(name, "attention.", 10) != 0 || s < RUDNN_ATTENTION_FALLBACK ||
            s > RUDNN_ATTENTION_FLASH_ACCELERATED) {
            rt_logf(&f->log, "  kernel_info(%d): %s, %s, strategy %d\n", i, rudnn_status_string(st),
                    name ? name : "(null)", (int)s);
            f->log.failures++;
        }
    }
    const int bad_index[] = {-1, have_kernels ? n : 0, 1000};
    for (int k = 0; k < 3; k++) {
        st = rudnn_attention_kernel_info(rt_ctx, bad_index[k], &name, &s);
        rudnn_status_t want = have_kernels ? RUDNN_STATUS_OUT_OF_BOUNDS : RUDNN_STATUS_NOT_SUPPORTED;
        if (st != want || !strstr(rudnn_last_error(), "attention_kernel_info")) {
            rt_logf(&f->log, "  kernel_info(%d): %s \"%s\"\n", bad_index[k], rudnn_status_string(st),
                    rudnn_last_error());
            f->log.failures++;
        }
    }
    st = rudnn_attention_kernel_info(rt_ctx, 0, NULL, &s);
    if (st != RUDNN_STATUS_BAD_PARAM || !strstr(rudnn_last_error(), "name is NULL")) {
        rt_logf(&f->log, "  kernel_info(NULL name): %s \"%s\"\n", rudnn_status_string(st), rudnn_last_error());
        f->log.failures++;
    }
    finish(f);
}

/* ---- the backward -------------------------------------------------------------------------- */

/* Whether the backend has the backward: the workspace query of the fixture's valid arguments
 * succeeds, or answers NOT_SUPPORTED naming the op and the missing kernels (a failure otherwise). */
static int backward_available(fx_t *f)
{
    const args_t a = defaults(f);
    const rudnn_attention_backward_args_t g = {a.t[T_Q],   a.t[T_K],    a.t[T_V],    a.t[T_MASK],
                                               a.t[T_BIAS], a.t[T_OUT], a.t[T_LSE], a.g[G_DOUT],
                                               a.g[G_DQ],   a.g[G_DK],   a.g[G_DV]};
    size_t bytes = 0;
    const rudnn_status_t st = rudnn_attention_backward_workspace_size(rt_queue, &g, NULL, &bytes);
    if (st == RUDNN_STATUS_SUCCESS)
        return 1;
    if (st != RUDNN_STATUS_NOT_SUPPORTED ||
        strncmp(rudnn_last_error(), "attention_backward_workspace_size: backend", 42) != 0 ||
        !strstr(rudnn_last_error(), "no attention backward kernels")) {
        rt_logf(&f->log, "  attention_backward_workspace_size of valid arguments: %s \"%s\"\n",
                rudnn_status_string(st), rudnn_last_error());
        f->log.failures++;
    }
    return 0;
}

static void test_backward_null(void **state)
{
    fx_t *f = *state;
    args_t a = defaults(f);
    a.null_args = 1;
    expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_BAD_PARAM, "args is NULL", NULL, "args NULL");
    a = defaults(f);
    a.t[T_OUT] = NULL;
    expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_BAD_PARAM, "args->out", "NULL", "args->out NULL");
    a = defaults(f);
    a.t[T_LSE] = NULL;
    expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_BAD_PARAM, "args->lse", "NULL", "args->lse NULL (required)");
    a = defaults(f);
    a.null_result = 1;
    expect_reject_ops(f, 1u << OP_BWD_WS, &a, RUDNN_STATUS_BAD_PARAM, "bytes", "NULL", "bytes NULL");
    rudnn_tensor_t nobuf;
    rt_assert_status(rudnn_tensor_init(&nobuf, NULL, 0, RUDNN_F32, 4, dims_q), RUDNN_STATUS_SUCCESS);
    for (int i = 0; i < G_COUNT; i++) {
        char what[64];
        a = defaults(f);
        a.g[i] = NULL;
        snprintf(what, sizeof what, "%s NULL", grad_names[i]);
        expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_BAD_PARAM, grad_names[i], "is NULL", what);
        rudnn_tensor_t nb = nobuf;
        nb.rank = f->g[i].t.rank;
        memcpy(nb.dims, f->g[i].t.dims, sizeof nb.dims);
        memcpy(nb.strides, f->g[i].t.strides, sizeof nb.strides);
        a = defaults(f);
        a.g[i] = &nb;
        snprintf(what, sizeof what, "%s without a buffer", grad_names[i]);
        expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_BAD_PARAM, grad_names[i], "no buffer", what);
    }
    finish(f);
}

/* dout, dq, dk, dv: like out, q, k, v (shape, then dtype), views with a contiguous last dim, inside
 * their buffer, on the queue's context. */
static void test_backward_like(void **state)
{
    fx_t *f = *state;
    for (int i = 0; i < G_COUNT; i++) {
        const rt_tensor_t *g = &f->g[i];
        const char *ref = tensor_names[grad_like[i]];
        char what[96], rule[64];
        /* dtypes */
        static const rudnn_dtype_t bad_dt[] = {RUDNN_F16, RUDNN_BF16, RUDNN_I32};
        snprintf(rule, sizeof rule, "(dtype of %s)", ref);
        for (int n = 0; n < 3; n++) {
            args_t a = defaults(f);
            rudnn_tensor_t v = rt_tensor_desc(g, bad_dt[n], 4, g->t.dims, 0);
            a.g[i] = &v;
            snprintf(what, sizeof what, "%s as %s", grad_names[i], rudnn_dtype_name(bad_dt[n]));
            expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_BAD_DTYPE, grad_names[i], rule, what);
        }
        /* shapes: each dim one larger, one smaller (where > 1), and rank 3 */
        snprintf(rule, sizeof rule, "(shape of %s)", ref);
        for (int d = 0; d < 4; d++) {
            for (int delta = -1; delta <= 1; delta += 2) {
                int64_t dims[4];
                memcpy(dims, g->t.dims, sizeof dims);
                dims[d] += delta;
                if (dims[d] < 1)
                    continue;
                args_t a = defaults(f);
                rudnn_tensor_t v = rt_tensor_desc(g, RUDNN_F32, 4, dims, 0);
                a.g[i] = &v;
                snprintf(what, sizeof what, "%s dim %d %+d", grad_names[i], d, delta);
                expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_BAD_SHAPE, grad_names[i], rule, what);
            }
        }
        args_t a = defaults(f);
        rudnn_tensor_t v = rt_tensor_desc(g, RUDNN_F32, 3, g->t.dims + 1, 0);
        a.g[i] = &v;
        snprintf(what, sizeof what, "%s of rank 3", grad_names[i]);
        expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_BAD_SHAPE, grad_names[i], rule, what);
        /* a shape error comes before a dtype error */
        a = defaults(f);
        int64_t dims[4];
        memcpy(dims, g->t.dims, sizeof dims);
        dims[3] += 1;
        v = rt_tensor_desc(g, RUDNN_F16, 4, dims, 0);
        a.g[i] = &v;
        snprintf(what, sizeof what, "%s of another shape and dtype", grad_names[i]);
        expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_BAD_SHAPE, grad_names[i], rule, what);
        /* a last dim of stride 2 (a valid view, every other element) */
        a = defaults(f);
        v = g->t;
        v.strides[3] = 2;
        for (int d = 2; d >= 0; d--)
            v.strides[d] = v.strides[d + 1] * v.dims[d + 1] * (d == 2 ? 2 : 1);
        a.g[i] = &v;
        snprintf(what, sizeof what, "%s last stride 2", grad_names[i]);
        expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_NOT_SUPPORTED, grad_names[i], "contiguous last dim", what);
        /* two rows at one address */
        a = defaults(f);
        v = g->t;
        v.strides[2] = 0;
        a.g[i] = &v;
        snprintf(what, sizeof what, "%s row stride 0", grad_names[i]);
        expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_BAD_SHAPE, grad_names[i], "stride", what);
        /* past the end; misaligned */
        a = defaults(f);
        v = g->t;
        v.offset = g->buffer_bytes - 4;
        a.g[i] = &v;
        snprintf(what, sizeof what, "%s past the end", grad_names[i]);
        expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_OUT_OF_BOUNDS, grad_names[i], "bytes", what);
        v = g->t;
        v.offset = 2;
        snprintf(what, sizeof what, "%s misaligned", grad_names[i]);
        expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_BAD_PARAM, grad_names[i], "offset", what);
        /* on the second context */
        a = defaults(f);
        a.g[i] = &f->g2[i].t;
        snprintf(what, sizeof what, "%s on ctx2", grad_names[i]);
        expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_DEVICE_MISMATCH, grad_names[i], "another context", what);
    }
    finish(f);
}

/* The lse the backward needs: F32 [B, Hq, Sq], contiguous (the forward's rules, now required). */
static void test_backward_lse(void **state)
{
    fx_t *f = *state;
    args_t a = defaults(f);
    rudnn_tensor_t lse = view(f, T_LSE, RUDNN_F16, 3, dims_lse, 0);
    a.t[T_LSE] = &lse;
    expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_BAD_DTYPE, "lse", "f32", "lse f16");
    static const int64_t bad[][3] = {{1, 2, 5}, {1, 1, 4}, {2, 2, 4}};
    for (int n = 0; n < 3; n++) {
        a = defaults(f);
        lse = view(f, T_LSE, RUDNN_F32, 3, bad[n], 0);
        a.t[T_LSE] = &lse;
        expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_BAD_SHAPE, "lse", "[B, Hq, Sq]", "lse shape");
    }
    a = defaults(f);
    lse = view(f, T_LSE, RUDNN_F32, 4, dims_q, 0);
    a.t[T_LSE] = &lse;
    expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_BAD_SHAPE, "lse", "rank 3", "lse rank 4");
    a = defaults(f);
    lse = f->t[T_LSE].t;
    lse.strides[1] = 1, lse.strides[2] = 2, lse.strides[0] = 8;
    a.t[T_LSE] = &lse;
    expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_NOT_SUPPORTED, "lse", "contiguous", "lse transposed");
    finish(f);
}

/* The backward's outputs over every input, exactly (offset 0: over the whole input, in place for
 * dq over q) and partly (over the input's last element only), and over each other; a view in the
 * same buffer past an input is accepted. */
static void test_backward_overlap(void **state)
{
    fx_t *f = *state;
    const int have = backward_available(f);
    /* the inputs, in the order of the check */
    const rt_tensor_t *ins[8] = {&f->t[T_Q],   &f->t[T_K],   &f->t[T_V],   &f->t[T_MASK],
                                 &f->t[T_BIAS], &f->t[T_OUT], &f->t[T_LSE], &f->g[G_DOUT]};
    static const char *const in_names[8] = {"q", "k", "v", "mask", "attn_bias", "out", "lse", "dout"};
    for (int o = G_DQ; o <= G_DV; o++) {
        for (int i = 0; i < 8; i++) {
            const size_t span = rudnn_tensor_bytes(&ins[i]->t);
            const size_t offsets[2] = {0, (span - 4) & ~(size_t)3};
            for (int k = 0; k < 2; k++) {
                args_t a = defaults(f);
                rudnn_tensor_t v = rt_tensor_desc(ins[i], RUDNN_F32, 4, f->g[o].t.dims, offsets[k]);
                a.g[o] = &v;
                char arg[64], what[96];
                snprintf(arg, sizeof arg, "%s overlaps %s", grad_names[o], in_names[i]);
                snprintf(what, sizeof what, "%s over %s at byte %zu", grad_names[o], in_names[i], offsets[k]);
                expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_BAD_PARAM, arg, "disjoint", what);
            }
        }
        for (int p = G_DQ; p <= G_DV; p++) {
            if (p == o)
                continue;
            args_t a = defaults(f);
            rudnn_tensor_t v = rt_tensor_desc(&f->g[p], RUDNN_F32, 4, f->g[o].t.dims, 4);
            a.g[o] = &v;
            char arg[64], what[96];
            /* the check names the first of the two (dq, dk, dv order) */
            snprintf(arg, sizeof arg, "%s overlaps %s", grad_names[o < p ? o : p], grad_names[o < p ? p : o]);
            snprintf(what, sizeof what, "%s over %s", grad_names[o], grad_names[p]);
            expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_BAD_PARAM, arg, "disjoint", what);
        }
    }
    /* disjoint views in the inputs' buffers, past them: accepted */
    args_t a = defaults(f);
    rudnn_tensor_t dq = rt_tensor_desc(&f->t[T_Q], RUDNN_F32, 4, dims_q, 4096);
    rudnn_tensor_t dk = rt_tensor_desc(&f->t[T_LSE], RUDNN_F32, 4, dims_kv, 1024);
    rudnn_tensor_t dv = rt_tensor_desc(&f->g[G_DQ], RUDNN_F32, 4, dims_kv, 2048);
    a.g[G_DQ] = &dq, a.g[G_DK] = &dk, a.g[G_DV] = &dv;
    for (int op = OP_BWD; op <= OP_BWD_WS; op++)
        expect_op(f, op, &a, have ? RUDNN_STATUS_SUCCESS : RUDNN_STATUS_NOT_SUPPORTED, NULL, NULL,
                  "outputs in the inputs' buffers, disjoint");
    rudnn_queue_synchronize(rt_queue);
    finish(f);
}

static void test_backward_workspace(void **state)
{
    fx_t *f = *state;
    args_t a = defaults(f);
    rudnn_buffer_t ws = NULL;
    rt_assert_status(rudnn_buffer_create(rt_ctx, 4096, &ws), RUDNN_STATUS_SUCCESS);
    if (!backward_available(f)) {
        /* no backward: a valid call with a valid workspace says so and writes nothing */
        a.workspace = ws, a.workspace_bytes = 4096;
        expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_NOT_SUPPORTED, "no attention backward kernels", NULL,
                          "no backward");
        rudnn_buffer_destroy(ws);
        finish(f);
        return;
    }
    size_t need = 0;
    const rudnn_attention_backward_args_t g = {a.t[T_Q],   a.t[T_K],    a.t[T_V],    a.t[T_MASK],
                                               a.t[T_BIAS], a.t[T_OUT], a.t[T_LSE], a.g[G_DOUT],
                                               a.g[G_DQ],   a.g[G_DK],   a.g[G_DV]};
    rt_assert_status(rudnn_attention_backward_workspace_size(rt_queue, &g, NULL, &need), RUDNN_STATUS_SUCCESS);
    /* the fixture needs Delta (rudnn/attention.h), so some workspace */
    if (need == 0 || need + 64 > 4096) {
        rt_logf(&f->log, "  backward workspace_size: %zu bytes for the fixture, expected 1..4032\n", need);
        f->log.failures++;
        need = need ? need : 1;
    }
    a.workspace = ws, a.workspace_bytes = need - 1;
    expect_reject_ops(f, 1u << OP_BWD, &a, RUDNN_STATUS_BAD_PARAM, "workspace_bytes", "too small",
                      "workspace one byte short");
    a.workspace_bytes = 0;
    expect_reject_ops(f, 1u << OP_BWD, &a, RUDNN_STATUS_BAD_PARAM, "workspace_bytes", "too small",
                      "workspace of 0 bytes");
    a.workspace_bytes = 4097;
    expect_reject_ops(f, 1u << OP_BWD, &a, RUDNN_STATUS_BAD_PARAM, "workspace_bytes", "exceeds",
                      "workspace_bytes past the buffer");
    /* over each tensor of the call */
    const rt_tensor_t *all[11] = {&f->t[T_Q],   &f->t[T_K],   &f->t[T_V],    &f->t[T_MASK], &f->t[T_BIAS], &f->t[T_OUT],
                                  &f->t[T_LSE], &f->g[G_DOUT], &f->g[G_DQ], &f->g[G_DK],   &f->g[G_DV]};
    static const char *const names[11] = {"q", "k", "v", "mask", "attn_bias", "out", "lse", "dout", "dq", "dk", "dv"};
    for (int i = 0; i < 11; i++) {
        a = defaults(f);
        a.workspace = all[i]->buffer, a.workspace_bytes = need;
        char arg[64], what[64];
        snprintf(arg, sizeof arg, "%s overlaps", names[i]);
        snprintf(what, sizeof what, "workspace over %s", names[i]);
        expect_reject_ops(f, 1u << OP_BWD, &a, RUDNN_STATUS_BAD_PARAM, arg, "workspace", what);
    }
    a = defaults(f);
    a.workspace = f->t2[T_OUT].buffer, a.workspace_bytes = 4;
    expect_reject_ops(f, 1u << OP_BWD, &a, RUDNN_STATUS_DEVICE_MISMATCH, "workspace", "another context",
                      "workspace on ctx2");
    /* the size asked for, more, and none */
    a = defaults(f);
    a.workspace = ws, a.workspace_bytes = need;
    expect_op(f, OP_BWD, &a, RUDNN_STATUS_SUCCESS, NULL, NULL, "workspace of the size asked for");
    a.workspace_bytes = 4096;
    expect_op(f, OP_BWD, &a, RUDNN_STATUS_SUCCESS, NULL, NULL, "workspace of the whole buffer");
    a.workspace = NULL, a.workspace_bytes = 0;
    expect_op(f, OP_BWD, &a, RUDNN_STATUS_SUCCESS, NULL, NULL, "workspace NULL");
    rudnn_queue_synchronize(rt_queue);
    rudnn_buffer_destroy(ws);
    finish(f);
}

/* Valid calls: after a failed one (rudnn_last_error() ""), every element of dq, dk, dv written
 * and nothing around them; options and [B, S, H, D] views. Without a backward: NOT_SUPPORTED
 * naming the op, nothing written. */
static void test_backward_success(void **state)
{
    fx_t *f = *state;
    const int have = backward_available(f);
    args_t a = defaults(f);
    if (!have) {
        expect_reject_ops(f, BWD_OPS, &a, RUDNN_STATUS_NOT_SUPPORTED, "has no attention backward kernels", NULL,
                          "no backward");
        finish(f);
        return;
    }
    /* out and lse from the forward, as the backward expects them */
    rt_assert_status(rudnn_attention(rt_queue, a.t[T_Q], a.t[T_K], a.t[T_V], a.t[T_MASK], a.t[T_BIAS], NULL,
                                     RUDNN_ATTENTION_AUTOTUNE, NULL, 0, a.t[T_OUT], a.t[T_LSE]),
                     RUDNN_STATUS_SUCCESS);
    a.queue = NULL;
    (void)call(OP_BWD, &a); /* leaves an error */
    a = defaults(f);
    for (int op = OP_BWD; op <= OP_BWD_WS; op++)
        expect_op(f, op, &a, RUDNN_STATUS_SUCCESS, NULL, NULL, "valid call after a failed one");
    rt_assert_status(rudnn_queue_synchronize(rt_queue), RUDNN_STATUS_SUCCESS);
    /* once more, watched: every element of dq, dk, dv written, no byte around them */
    rt_out_watch_t w[3];
    for (int i = 0; i < 3; i++)
        rt_out_watch_begin(&w[i], &f->g[G_DQ + i]);
    expect_op(f, OP_BWD, &a, RUDNN_STATUS_SUCCESS, NULL, NULL, "valid call, outputs watched");
    rt_assert_status(rudnn_queue_synchronize(rt_queue), RUDNN_STATUS_SUCCESS);
    for (int i = 0; i < 3; i++)
        f->log.failures += !rt_out_watch_end(&w[i], 1, NULL, &f->log, "attention_backward", grad_names[G_DQ + i]);
    /* no mask, bias; causal with a window and softcap; [B, S, H, D] views of dq and dout */
    a.t[T_MASK] = a.t[T_BIAS] = NULL;
    rudnn_attention_options_init(&a.opts);
    a.opts.causal = 1, a.opts.window_left = 2, a.opts.softcap = 2.0f;
    a.options = &a.opts;
    rt_assert_status(rudnn_attention(rt_queue, a.t[T_Q], a.t[T_K], a.t[T_V], NULL, NULL, &a.opts,
                                     RUDNN_ATTENTION_AUTOTUNE, NULL, 0, a.t[T_OUT], a.t[T_LSE]),
                     RUDNN_STATUS_SUCCESS);
    rudnn_tensor_t dq = f->g[G_DQ].t, dout = f->g[G_DOUT].t;
    dq.strides[2] = 16, dq.strides[1] = 8, dq.strides[0] = 64; /* [1, 4, 2, 8] memory */
    dout.strides[2] = 16, dout.strides[1] = 8, dout.strides[0] = 64;
    a.g[G_DQ] = &dq, a.g[G_DOUT] = &dout;
    for (int op = OP_BWD; op <= OP_BWD_WS; op++)
        expect_op(f, op, &a, RUDNN_STATUS_SUCCESS, NULL, NULL, "options; [B, S, H, D] views of dq and dout");
    rudnn_queue_synchronize(rt_queue);
    finish(f);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        T(test_null_arguments), T(test_bad_dtypes), T(test_bad_shapes),  T(test_strides),
        T(test_device_mismatch), T(test_overlap),   T(test_options),     T(test_kernel_choice),
        T(test_workspace),      T(test_success),    T(test_kernel_info),
        T(test_backward_null),  T(test_backward_like), T(test_backward_lse), T(test_backward_overlap),
        T(test_backward_workspace), T(test_backward_success),
    };
    rt_set_filters(argc, argv);
    rt_open_or_skip("attention-contract");
    int n;
    have_kernels = rudnn_attention_kernel_count(rt_ctx, &n) == RUDNN_STATUS_SUCCESS;
    printf("attention-contract: %s\n", have_kernels ? "the backend has attention kernels"
                                                    : "no attention kernels: NOT_SUPPORTED expected where one runs");
    return rt_exit_code(
        _cmocka_run_group_tests("attention-contract", tests, sizeof tests / sizeof tests[0], rt_group_setup_second,
                                rt_group_teardown_second));
}
