/* Contract tests of the gated delta rule (include/rudnn/gated_delta.h, ops/gated_delta.c) on the
 * default backend. Every rejected call returns the status of its rule (BAD_PARAM for NULLs, values
 * out of range, overlaps and bad workspaces; BAD_SHAPE for ranks and dims; BAD_DTYPE;
 * DEVICE_MISMATCH for another context's tensor or workspace; OUT_OF_BOUNDS for a view past its
 * buffer; NOT_SUPPORTED for a valid view the op does not take), a message that names the op
 * (rudnn_chunk_gated_delta_rule / rudnn_gated_delta_rule) and the argument, and writes nothing:
 * every buffer of the fixture (the outputs holding a sentinel) is read back byte for byte after the
 * call, for both forms (chunked with chunk 4, recurrent) and, where the rule is the same, their
 * workspace-size queries, which must leave *bytes as it was. Varlen plans
 * (rudnn_gated_delta_varlen_plan_create): each rule of their making, and of calls naming them.
 *
 * The fixture: one buffer a tensor of a valid call (512 bytes after each), q, k [2, 2, 6, 8],
 * v, out [2, 2, 6, 4], beta, log_decay [2, 2, 6], states [2, 2, 8, 4], all F32; each test edits a
 * copy of the descriptors. Varlen views take batch row 0 (B = 1, T 6) and the states as pools of 2
 * rows.
 *
 * Usage: test_gated_delta_contract [glob] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/gated_delta.h>

#include "common.h"

#define OP_CHUNK "rudnn_chunk_gated_delta_rule"
#define OP_REC "rudnn_gated_delta_rule"
#define OP_PLAN "rudnn_gated_delta_varlen_plan_create"

enum { T_Q, T_K, T_V, T_BETA, T_LD, T_S0, T_OUT, T_S1, T_COUNT };
static const char *const names[T_COUNT] = {"query", "key", "value", "beta", "log_decay", "initial_state", "output",
                                           "final_state"};

typedef struct fx {
    rt_tensor_t t[T_COUNT];
    rt_guard_t guard;
} fx_t;

static fx_t F;

typedef struct callspec {
    rudnn_tensor_t d[T_COUNT];
    rudnn_gated_delta_input_t in;
    rudnn_gated_delta_output_t out;
    rudnn_gated_delta_varlen_t vl;
    int use_vl;
    int64_t cu[4];
    int32_t idx[3];
    int64_t chunk;
    int only_form; /* -1: both forms; 0 chunked, 1 recurrent: that form only */
    float query_scale;
    rudnn_buffer_t ws;
    size_t ws_bytes;
} callspec_t;

static int setup(void **state)
{
    (void)state;
    const int64_t dq[4] = {2, 2, 6, 8}, dv[4] = {2, 2, 6, 4}, db[3] = {2, 2, 6}, ds[4] = {2, 2, 8, 4};
    const int64_t *dims[T_COUNT] = {dq, dq, dv, db, db, ds, dv, ds};
    const int ranks[T_COUNT] = {4, 4, 4, 3, 3, 4, 4, 4};
    rt_rng_t r;
    rt_rng_seed(&r, 5);
    memset(&F, 0, sizeof F);
    for (int i = 0; i < T_COUNT; i++) {
        rt_tensor_create(&F.t[i], RUDNN_F32, ranks[i], dims[i], 0, 512);
        if (i != T_OUT && i != T_S1) /* the outputs keep create's sentinel */
            rt_tensor_fill_uniform(&F.t[i], &r, i == T_LD ? -1.0 : -0.5, i == T_LD ? 0.0 : 0.5);
        rt_guard_track(&F.guard, rt_queue, &F.t[i], names[i]);
    }
    return 0;
}

static int teardown(void **state)
{
    for (int i = 0; i < T_COUNT; i++)
        rt_tensor_destroy(&F.t[i]);
    rt_guard_free(&F.guard);
    return rt_group_teardown_second(state);
}

static void spec_init(callspec_t *c)
{
    memset(c, 0, sizeof *c);
    for (int i = 0; i < T_COUNT; i++)
        c->d[i] = F.t[i].t;
    c->chunk = 4;
    c->only_form = -1;
    c->query_scale = 0.35f;
}

static void spec_bind(callspec_t *c)
{
    c->in = (rudnn_gated_delta_input_t){&c->d[T_Q], &c->d[T_K], &c->d[T_V], &c->d[T_BETA], &c->d[T_LD], &c->d[T_S0],
                                        c->query_scale};
    c->out = (rudnn_gated_delta_output_t){&c->d[T_OUT], &c->d[T_S1]};
}

/* Gives t a new rank and dims with row-major strides. */
static void reshape(rudnn_tensor_t *t, int rank, const int64_t *dims)
{
    t->rank = rank;
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        t->dims[i] = dims[i];
        t->strides[i] = s;
        s *= dims[i] > 0 ? dims[i] : 1;
    }
}

/* One call of a form: 0 chunked, 1 recurrent; query 0 the op, 1 its workspace-size query. */
static rudnn_status_t call_form(const callspec_t *c, int form, int query, size_t *bytes)
{
    const rudnn_gated_delta_varlen_t *vl = c->use_vl ? &c->vl : NULL;
    if (query)
        return form ? rudnn_gated_delta_rule_workspace_size(rt_queue, &c->in, vl, &c->out, bytes)
                    : rudnn_chunk_gated_delta_rule_workspace_size(rt_queue, &c->in, vl, c->chunk, &c->out, bytes);
    return form ? rudnn_gated_delta_rule(rt_queue, &c->in, vl, c->ws, c->ws_bytes, &c->out)
                : rudnn_chunk_gated_delta_rule(rt_queue, &c->in, vl, c->chunk, c->ws, c->ws_bytes, &c->out);
}

/* Both forms and both size queries (unless skip_query: a rule of the workspace itself) must answer
 * want, name the op and every needle, write nothing and leave *bytes alone. */
static void expect_reject_q(callspec_t *c, rudnn_status_t want, int skip_query, const char *n1, const char *n2,
                            const char *n3)
{
    spec_bind(c);
    for (int form = 0; form < 2; form++)
        for (int query = skip_query ? 0 : 1; query >= 0 && (c->only_form < 0 || c->only_form == form); query--) {
            rt_guard_begin(&F.guard);
            size_t bytes = 12345;
            const rudnn_status_t st = call_form(c, form, query, &bytes);
            if (st != want)
                fail_msg("%s%s: returned %s, expected %s (%s)", form ? OP_REC : OP_CHUNK,
                         query ? "_workspace_size" : "", rudnn_status_string(st), rudnn_status_string(want),
                         rudnn_last_error());
            rt_assert_error_mentions(form ? OP_REC : OP_CHUNK, n1, n2, n3);
            assert_int_equal(bytes, 12345);
            if (rt_guard_changed(&F.guard))
                fail_msg("a rejected call (%s) wrote to a buffer", rudnn_last_error());
        }
}

static void expect_reject(callspec_t *c, rudnn_status_t want, const char *n1, const char *n2)
{
    expect_reject_q(c, want, 0, n1, n2, NULL);
}

/* c is a valid call: both forms and their size queries succeed (the outputs poisoned again after). */
static void expect_valid(callspec_t *c)
{
    spec_bind(c);
    for (int form = 0; form < 2; form++) {
        size_t bytes = 0;
        rt_assert_status(call_form(c, form, 1, &bytes), RUDNN_STATUS_SUCCESS);
        rt_assert_status(call_form(c, form, 0, NULL), RUDNN_STATUS_SUCCESS);
    }
    rudnn_queue_synchronize(rt_queue);
    rt_tensor_poison(&F.t[T_OUT]), rt_tensor_poison(&F.t[T_S1]);
}

/* The fixture is a valid call: both forms, fixed and varlen, sized and NULL workspaces. */
static void valid_call_passes(void **state)
{
    (void)state;
    callspec_t c;
    spec_init(&c);
    expect_valid(&c);
}

static void null_arguments(void **state)
{
    (void)state;
    callspec_t c;
    spec_init(&c);
    spec_bind(&c);
    for (int form = 0; form < 2; form++) {
        const char *op = form ? OP_REC : OP_CHUNK;
        size_t bytes = 77;
        rt_guard_begin(&F.guard);
        rt_assert_status(form ? rudnn_gated_delta_rule(NULL, &c.in, NULL, NULL, 0, &c.out)
                              : rudnn_chunk_gated_delta_rule(NULL, &c.in, NULL, 4, NULL, 0, &c.out),
                         RUDNN_STATUS_BAD_PARAM);
        rt_assert_error_mentions(op, "queue");
        rt_assert_status(form ? rudnn_gated_delta_rule_workspace_size(NULL, &c.in, NULL, &c.out, &bytes)
                              : rudnn_chunk_gated_delta_rule_workspace_size(NULL, &c.in, NULL, 4, &c.out, &bytes),
                         RUDNN_STATUS_BAD_PARAM);
        rt_assert_error_mentions(op, "queue");
        rt_assert_status(form ? rudnn_gated_delta_rule(rt_queue, NULL, NULL, NULL, 0, &c.out)
                              : rudnn_chunk_gated_delta_rule(rt_queue, NULL, NULL, 4, NULL, 0, &c.out),
                         RUDNN_STATUS_BAD_PARAM);
        rt_assert_error_mentions(op, "input");
        rt_assert_status(form ? rudnn_gated_delta_rule(rt_queue, &c.in, NULL, NULL, 0, NULL)
                              : rudnn_chunk_gated_delta_rule(rt_queue, &c.in, NULL, 4, NULL, 0, NULL),
                         RUDNN_STATUS_BAD_PARAM);
        rt_assert_error_mentions(op, "output");
        rt_assert_status(form ? rudnn_gated_delta_rule_workspace_size(rt_queue, &c.in, NULL, &c.out, NULL)
                              : rudnn_chunk_gated_delta_rule_workspace_size(rt_queue, &c.in, NULL, 4, &c.out, NULL),
                         RUDNN_STATUS_BAD_PARAM);
        rt_assert_error_mentions(op, "bytes");
        assert_int_equal(bytes, 77);
        assert_false(rt_guard_changed(&F.guard));
    }
    for (int i = 0; i < T_COUNT; i++) {
        callspec_t e;
        spec_init(&e);
        spec_bind(&e);
        const rudnn_tensor_t **slot[T_COUNT] = {&e.in.query, &e.in.key, &e.in.value, &e.in.beta, &e.in.log_decay,
                                                &e.in.initial_state, &e.out.output, &e.out.final_state};
        *slot[i] = NULL;
        for (int form = 0; form < 2; form++)
            for (int query = 0; query < 2; query++) {
                rt_guard_begin(&F.guard);
                size_t bytes = 77;
                rt_assert_status(call_form(&e, form, query, &bytes), RUDNN_STATUS_BAD_PARAM);
                rt_assert_error_mentions(form ? OP_REC : OP_CHUNK, names[i], "NULL");
                assert_int_equal(bytes, 77);
                assert_false(rt_guard_changed(&F.guard));
            }
    }
    /* a tensor without a buffer */
    spec_init(&c), c.d[T_V].buffer = NULL;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "value", NULL);
}

static void ranks_and_dims(void **state)
{
    (void)state;
    callspec_t c;
    /* ranks */
    {
        const int64_t q3[3] = {4, 6, 8}, k3[3] = {4, 6, 8}, b4[4] = {2, 2, 6, 1}, ld2[2] = {4, 6};
        const int64_t s3[3] = {4, 8, 4}, o3[3] = {4, 6, 4};
        spec_init(&c), reshape(&c.d[T_Q], 3, q3);
        expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "query", "rank");
        spec_init(&c), reshape(&c.d[T_K], 3, k3);
        expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "key", "rank");
        spec_init(&c), reshape(&c.d[T_V], 3, o3);
        expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "value", "rank");
        spec_init(&c), reshape(&c.d[T_BETA], 4, b4);
        expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "beta", "rank");
        spec_init(&c), reshape(&c.d[T_LD], 2, ld2);
        expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "log_decay", "rank");
        spec_init(&c), reshape(&c.d[T_S0], 3, s3);
        expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "initial_state", "rank");
        spec_init(&c), reshape(&c.d[T_OUT], 3, o3);
        expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "output", "rank");
        spec_init(&c), reshape(&c.d[T_S1], 3, s3);
        expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "final_state", "rank");
    }
    /* B, H, T, K, V mismatched across tensors (each a contiguous view inside its buffer) */
    static const struct {
        int tensor;
        int dim;
        int64_t value;
    } mism[] = {
        {T_K, 0, 1}, {T_K, 1, 1}, {T_K, 2, 5}, {T_K, 3, 7},        /* key: B, H, T, K */
        {T_V, 0, 1}, {T_V, 1, 1}, {T_V, 2, 5},                     /* value: B, H, T */
        {T_BETA, 0, 1}, {T_BETA, 1, 1}, {T_BETA, 2, 5},            /* beta: B, H, T */
        {T_LD, 0, 1}, {T_LD, 1, 1}, {T_LD, 2, 3},                  /* log_decay */
        {T_OUT, 0, 1}, {T_OUT, 1, 1}, {T_OUT, 2, 5}, {T_OUT, 3, 3}, /* output: B, H, T, V */
        {T_S0, 0, 1}, {T_S0, 1, 1}, {T_S0, 2, 4}, {T_S0, 3, 2},    /* initial_state: B, H, K, V */
        {T_S1, 0, 1}, {T_S1, 1, 1}, {T_S1, 2, 4}, {T_S1, 3, 2},    /* final_state */
    };
    for (size_t i = 0; i < sizeof mism / sizeof mism[0]; i++) {
        spec_init(&c);
        rudnn_tensor_t *t = &c.d[mism[i].tensor];
        int64_t dims[4];
        memcpy(dims, t->dims, sizeof dims);
        dims[mism[i].dim] = mism[i].value;
        reshape(t, t->rank, dims);
        expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, names[mism[i].tensor], "expected");
    }
    /* value's V differs from the states' and output's */
    spec_init(&c);
    {
        const int64_t v3[4] = {2, 2, 6, 3};
        reshape(&c.d[T_V], 4, v3);
    }
    expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "output", NULL);
    /* a view past the end of its buffer */
    spec_init(&c), c.d[T_K].offset = F.t[T_K].buffer_bytes - 16;
    expect_reject(&c, RUDNN_STATUS_OUT_OF_BOUNDS, "key", NULL);
}

static void k_and_v_range(void **state)
{
    (void)state;
    callspec_t c;
    /* K = 0 and V = 0 */
    spec_init(&c);
    {
        const int64_t q0[4] = {2, 2, 6, 0}, s0[4] = {2, 2, 0, 4};
        reshape(&c.d[T_Q], 4, q0), reshape(&c.d[T_K], 4, q0);
        reshape(&c.d[T_S0], 4, s0), reshape(&c.d[T_S1], 4, s0);
    }
    expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "query", "1..256");
    spec_init(&c);
    {
        const int64_t v0[4] = {2, 2, 6, 0}, s0[4] = {2, 2, 8, 0};
        reshape(&c.d[T_V], 4, v0), reshape(&c.d[T_OUT], 4, v0);
        reshape(&c.d[T_S0], 4, s0), reshape(&c.d[T_S1], 4, s0);
    }
    expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "value", "1..256");
    /* K = 257: q, k [1, 1, 1, 257] inside their buffers (768 + 512 bytes) */
    spec_init(&c);
    {
        const int64_t q[4] = {1, 1, 1, RUDNN_GATED_DELTA_MAX_DIM + 1};
        reshape(&c.d[T_Q], 4, q), reshape(&c.d[T_K], 4, q);
    }
    expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "query", "1..256");
    /* V = 257: value [1, 1, 1, 257] in a buffer of its own, q, k, beta, log_decay of one token */
    rt_tensor_t big;
    const int64_t vb[4] = {1, 1, 1, RUDNN_GATED_DELTA_MAX_DIM + 1};
    rt_tensor_create(&big, RUDNN_F32, 4, vb, 0, 64);
    spec_init(&c);
    {
        const int64_t q[4] = {1, 1, 1, 8}, b[3] = {1, 1, 1};
        reshape(&c.d[T_Q], 4, q), reshape(&c.d[T_K], 4, q);
        reshape(&c.d[T_BETA], 3, b), reshape(&c.d[T_LD], 3, b);
        c.d[T_V] = big.t;
    }
    expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "value", "1..256");
    rt_tensor_destroy(&big);
}

static void dtypes(void **state)
{
    (void)state;
    callspec_t c;
    spec_init(&c), c.d[T_Q].dtype = RUDNN_I8;
    expect_reject(&c, RUDNN_STATUS_BAD_DTYPE, "query", NULL);
    spec_init(&c), c.d[T_K].dtype = RUDNN_BF16;
    expect_reject(&c, RUDNN_STATUS_BAD_DTYPE, "key", "query");
    spec_init(&c), c.d[T_V].dtype = RUDNN_F16;
    expect_reject(&c, RUDNN_STATUS_BAD_DTYPE, "value", "query");
    spec_init(&c), c.d[T_BETA].dtype = RUDNN_F16;
    expect_reject(&c, RUDNN_STATUS_BAD_DTYPE, "beta", "query");
    /* log_decay stays F32 when the others are BF16 */
    spec_init(&c);
    for (int i = T_Q; i <= T_BETA; i++)
        c.d[i].dtype = RUDNN_BF16;
    c.d[T_OUT].dtype = RUDNN_BF16, c.d[T_LD].dtype = RUDNN_BF16;
    expect_reject(&c, RUDNN_STATUS_BAD_DTYPE, "log_decay", "f32");
    spec_init(&c), c.d[T_S0].dtype = RUDNN_BF16;
    expect_reject(&c, RUDNN_STATUS_BAD_DTYPE, "initial_state", "f32");
    spec_init(&c), c.d[T_OUT].dtype = RUDNN_BF16;
    expect_reject(&c, RUDNN_STATUS_BAD_DTYPE, "output", "query");
    spec_init(&c), c.d[T_S1].dtype = RUDNN_F16;
    expect_reject(&c, RUDNN_STATUS_BAD_DTYPE, "final_state", "f32");
    /* F16 inputs with F16 states: the states must be F32 all the same */
    spec_init(&c);
    for (int i = T_Q; i <= T_BETA; i++)
        c.d[i].dtype = RUDNN_F16;
    c.d[T_OUT].dtype = RUDNN_F16, c.d[T_S0].dtype = RUDNN_F16;
    expect_reject(&c, RUDNN_STATUS_BAD_DTYPE, "initial_state", "f32");
}

static void layouts(void **state)
{
    (void)state;
    callspec_t c;
    /* a last dim that is not contiguous (valid views inside the buffers' 512-byte tails) */
    spec_init(&c); /* query [2, 2, 6, 4] every other element (its layout is checked before K) */
    c.d[T_Q].dims[3] = 4;
    c.d[T_Q].strides[3] = 2, c.d[T_Q].strides[2] = 8, c.d[T_Q].strides[1] = 48, c.d[T_Q].strides[0] = 96;
    expect_reject(&c, RUDNN_STATUS_NOT_SUPPORTED, "query", "contiguous");
    spec_init(&c);
    c.d[T_OUT].strides[3] = 2, c.d[T_OUT].strides[2] = 8, c.d[T_OUT].strides[1] = 48, c.d[T_OUT].strides[0] = 96;
    expect_reject(&c, RUDNN_STATUS_NOT_SUPPORTED, "output", "contiguous");
    spec_init(&c);
    c.d[T_V].strides[3] = 2, c.d[T_V].strides[2] = 8, c.d[T_V].strides[1] = 48, c.d[T_V].strides[0] = 96;
    expect_reject(&c, RUDNN_STATUS_NOT_SUPPORTED, "value", "contiguous");
    /* the states must be contiguous: batch rows 128 elements apart (inside the tail) */
    spec_init(&c), c.d[T_S0].strides[0] = 128;
    expect_reject(&c, RUDNN_STATUS_NOT_SUPPORTED, "initial_state", "contiguous");
    spec_init(&c), c.d[T_S1].strides[0] = 128;
    expect_reject(&c, RUDNN_STATUS_NOT_SUPPORTED, "final_state", "contiguous");
    /* an offset that is not a multiple of the element size */
    spec_init(&c), c.d[T_BETA].offset = 2;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "beta", "offset");
    /* strides that describe no view */
    spec_init(&c), c.d[T_Q].strides[1] = 0;
    expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "query", NULL);
}

static void overlaps(void **state)
{
    (void)state;
    callspec_t c;
    /* final_state over initial_state, over an input */
    spec_init(&c), c.d[T_S1] = c.d[T_S0];
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "final_state", "initial_state");
    spec_init(&c), c.d[T_S1].buffer = c.d[T_Q].buffer, c.d[T_S1].offset = 64;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "final_state", "query");
    /* output over an input, over final_state */
    spec_init(&c), c.d[T_OUT] = c.d[T_V];
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "output", "value");
    spec_init(&c), c.d[T_OUT].buffer = c.d[T_K].buffer, c.d[T_OUT].offset = 4;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "output", "key");
    spec_init(&c), c.d[T_OUT].buffer = c.d[T_S1].buffer, c.d[T_OUT].offset = 256;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "output", "final_state");
    /* inputs may share memory (read only): q and k the same tensor is valid */
    spec_init(&c), c.d[T_K] = c.d[T_Q];
    spec_bind(&c);
    rt_assert_status(call_form(&c, 1, 0, NULL), RUDNN_STATUS_SUCCESS);
    rudnn_queue_synchronize(rt_queue);
    rt_tensor_poison(&F.t[T_OUT]), rt_tensor_poison(&F.t[T_S1]);
}

static void query_scale(void **state)
{
    (void)state;
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
        callspec_t c;
        spec_init(&c), c.query_scale = bad[i];
        expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "query_scale", "finite");
    }
}

static void chunk_sizes(void **state)
{
    (void)state;
    callspec_t c;
    spec_init(&c);
    spec_bind(&c);
    rudnn_device_info_t info;
    rt_assert_status(rudnn_context_device_info(rt_ctx, &info), RUDNN_STATUS_SUCCESS);
    /* the smallest C whose triangular FP32 workspace, 4 (C^2 + C) bytes, passes the limit */
    int64_t too_big = 1;
    while (4 * ((uint64_t)too_big * (uint64_t)too_big + (uint64_t)too_big) <= info.shared_memory_per_group)
        too_big++;
    char limit[32];
    snprintf(limit, sizeof limit, "%llu", (unsigned long long)info.shared_memory_per_group);
    const int64_t bad[4] = {0, -3, INT64_MIN, too_big};
    for (int i = 0; i < 4; i++) {
        for (int query = 0; query < 2; query++) {
            rt_guard_begin(&F.guard);
            size_t bytes = 7;
            rt_assert_status(query ? rudnn_chunk_gated_delta_rule_workspace_size(rt_queue, &c.in, NULL, bad[i], &c.out,
                                                                                 &bytes)
                                   : rudnn_chunk_gated_delta_rule(rt_queue, &c.in, NULL, bad[i], NULL, 0, &c.out),
                             RUDNN_STATUS_BAD_PARAM);
            rt_assert_error_mentions(OP_CHUNK, "chunk_size");
            if (i == 3)
                rt_assert_error_mentions("shared memory", limit);
            assert_int_equal(bytes, 7);
            assert_false(rt_guard_changed(&F.guard));
        }
    }
    /* the largest chunk that fits passes the contract: the backend may still not take it (its
     * kernels' own bound, NOT_SUPPORTED naming the op), never BAD_PARAM */
    size_t bytes = 0;
    const rudnn_status_t st =
        rudnn_chunk_gated_delta_rule_workspace_size(rt_queue, &c.in, NULL, too_big - 1, &c.out, &bytes);
    if (st != RUDNN_STATUS_SUCCESS) {
        rt_assert_status(st, RUDNN_STATUS_NOT_SUPPORTED);
        rt_assert_error_mentions(OP_CHUNK, "chunk_size");
    }
}

/* varlen: B = 1 views of the fixture (T 6 of batch row 0), pools of 2 rows, sequences [0, 2) and
 * [2, 6) on rows 1 and 0 */
static void varlen_spec(callspec_t *c)
{
    spec_init(c);
    for (int i = T_Q; i <= T_LD; i++)
        c->d[i].dims[0] = 1;
    c->d[T_OUT].dims[0] = 1;
    c->use_vl = 1;
    c->cu[0] = 0, c->cu[1] = 2, c->cu[2] = 6;
    c->idx[0] = 1, c->idx[1] = 0;
    c->vl = (rudnn_gated_delta_varlen_t){.sequences = 2, .cu_seqlens = c->cu, .state_indices = c->idx};
}

static void varlen_rules(void **state)
{
    (void)state;
    callspec_t c;
    varlen_spec(&c);
    expect_valid(&c);

    /* B != 1 */
    spec_init(&c), c.use_vl = 1, c.cu[1] = 2, c.cu[2] = 6;
    c.vl = (rudnn_gated_delta_varlen_t){.sequences = 2, .cu_seqlens = c.cu};
    expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "query", "varlen");
    /* sequences */
    varlen_spec(&c), c.vl.sequences = 0;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "varlen.sequences", ">= 1");
    varlen_spec(&c), c.vl.sequences = -2;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "varlen.sequences", NULL);
    /* offsets */
    varlen_spec(&c), c.vl.cu_seqlens = NULL;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "cu_seqlens", "NULL");
    varlen_spec(&c), c.cu[0] = 1;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "cu_seqlens[0]", NULL);
    varlen_spec(&c), c.cu[0] = -1;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "cu_seqlens[0]", NULL);
    varlen_spec(&c), c.cu[1] = 5, c.cu[2] = 4;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "cu_seqlens", "decrease");
    varlen_spec(&c), c.cu[2] = 7; /* cu[N] > T */
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "cu_seqlens[2]", "past T");
    varlen_spec(&c), c.cu[1] = 7;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "cu_seqlens", "past T");
    /* state indices */
    varlen_spec(&c), c.idx[0] = -1;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "state_indices[0]", "outside");
    varlen_spec(&c), c.idx[1] = 2; /* >= P_in and P_out */
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "state_indices[1]", "outside");
    varlen_spec(&c), c.d[T_S0].dims[0] = 1; /* >= P_in (1) only */
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "state_indices[0]", "initial_state");
    varlen_spec(&c), c.d[T_S1].dims[0] = 1; /* >= P_out (1) only */
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "state_indices[0]", "final_state");
    varlen_spec(&c), c.idx[1] = 1;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "state_indices[1]", "repeats");
    /* NULL indices: sequence i uses row i, so both pools need N rows */
    varlen_spec(&c), c.vl.state_indices = NULL, c.d[T_S1].dims[0] = 1;
    expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "state_indices", "final_state");
    /* the pools still need H, K, V of the call */
    varlen_spec(&c), c.d[T_S0].dims[1] = 1, c.d[T_S0].strides[0] = 32;
    expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "initial_state", NULL);
}

/* rudnn_gated_delta_varlen_plan_create's rejections: the status, a message naming the op and the
 * rule, and *plan left as it was. */
static void expect_plan_reject(rudnn_queue_t q, const rudnn_gated_delta_varlen_t *vl, int64_t chunk,
                               rudnn_status_t want, const char *n1, const char *n2)
{
    rudnn_gated_delta_varlen_plan_t sentinel = (rudnn_gated_delta_varlen_plan_t)(uintptr_t)0x5151, p = sentinel;
    const rudnn_status_t st = rudnn_gated_delta_varlen_plan_create(q, vl, chunk, &p);
    if (st != want)
        fail_msg("%s: returned %s, expected %s (%s)", OP_PLAN, rudnn_status_string(st), rudnn_status_string(want),
                 rudnn_last_error());
    rt_assert_error_mentions(OP_PLAN, n1, n2);
    assert_ptr_equal(p, sentinel);
}

/* A varlen plan: made once (every check of the schedule but T and the pools), then named by calls
 * of both forms; the calls check what their tensors decide, and that the plan is theirs. */
static void varlen_plan_rules(void **state)
{
    (void)state;
    callspec_t c;
    varlen_spec(&c);
    rudnn_gated_delta_varlen_t vl = c.vl;
    /* the plan's own rules */
    {
        rudnn_gated_delta_varlen_plan_t p = NULL;
        rt_assert_status(rudnn_gated_delta_varlen_plan_create(rt_queue, &vl, 4, NULL), RUDNN_STATUS_BAD_PARAM);
        rt_assert_error_mentions(OP_PLAN, "plan", "NULL");
        rt_assert_status(rudnn_gated_delta_varlen_plan_create(NULL, &vl, 4, &p), RUDNN_STATUS_BAD_PARAM);
        rt_assert_error_mentions(OP_PLAN, "queue");
        assert_null(p);
    }
    expect_plan_reject(rt_queue, NULL, 4, RUDNN_STATUS_BAD_PARAM, "varlen", "NULL");
    expect_plan_reject(rt_queue, &vl, -1, RUDNN_STATUS_BAD_PARAM, "chunk_size", ">= 1");
    expect_plan_reject(rt_queue, &vl, (int64_t)1 << 20, RUDNN_STATUS_BAD_PARAM, "chunk_size", "shared memory");
    vl.sequences = 0;
    expect_plan_reject(rt_queue, &vl, 4, RUDNN_STATUS_BAD_PARAM, "varlen.sequences", ">= 1");
    vl = c.vl, vl.cu_seqlens = NULL;
    expect_plan_reject(rt_queue, &vl, 4, RUDNN_STATUS_BAD_PARAM, "cu_seqlens", "NULL");
    varlen_spec(&c), vl = c.vl, c.cu[0] = 1;
    expect_plan_reject(rt_queue, &vl, 4, RUDNN_STATUS_BAD_PARAM, "cu_seqlens[0]", NULL);
    varlen_spec(&c), vl = c.vl, c.cu[1] = 5, c.cu[2] = 4;
    expect_plan_reject(rt_queue, &vl, 4, RUDNN_STATUS_BAD_PARAM, "cu_seqlens", "decrease");
    varlen_spec(&c), vl = c.vl, c.idx[0] = -1;
    expect_plan_reject(rt_queue, &vl, 4, RUDNN_STATUS_BAD_PARAM, "state_indices[0]", "outside");
    varlen_spec(&c), vl = c.vl, c.idx[1] = 1;
    expect_plan_reject(rt_queue, &vl, 4, RUDNN_STATUS_BAD_PARAM, "state_indices[1]", "repeats");

    /* a plan for chunk 4 serves both forms */
    varlen_spec(&c);
    rudnn_gated_delta_varlen_plan_t plan = NULL;
    rt_assert_status(rudnn_gated_delta_varlen_plan_create(rt_queue, &c.vl, 4, &plan), RUDNN_STATUS_SUCCESS);
    assert_true(rudnn_gated_delta_varlen_plan_device_bytes(plan) > 0);
    expect_plan_reject(rt_queue, &(rudnn_gated_delta_varlen_t){.plan = plan}, 4, RUDNN_STATUS_BAD_PARAM,
                       "varlen.plan", "host arrays");
    c.vl = (rudnn_gated_delta_varlen_t){.plan = plan};
    expect_valid(&c);
    /* the plan and host arrays at once */
    c.vl.sequences = 2;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "varlen.plan", "sequences must be 0");
    c.vl = (rudnn_gated_delta_varlen_t){.plan = plan, .cu_seqlens = c.cu};
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "varlen.plan", "cu_seqlens");
    /* another chunk size: the chunked form refuses, the recurrent one takes it */
    c.vl = (rudnn_gated_delta_varlen_t){.plan = plan}, c.chunk = 3, c.only_form = 0;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "varlen.plan", "chunk_size 4");
    rudnn_gated_delta_varlen_plan_destroy(plan);

    /* what the tensors decide: cu_seqlens[N] <= T, the pools' rows */
    varlen_spec(&c), c.cu[2] = 7;
    rt_assert_status(rudnn_gated_delta_varlen_plan_create(rt_queue, &c.vl, 4, &plan), RUDNN_STATUS_SUCCESS);
    c.vl = (rudnn_gated_delta_varlen_t){.plan = plan};
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "varlen.plan", "past T");
    rudnn_gated_delta_varlen_plan_destroy(plan);
    varlen_spec(&c), c.idx[0] = 2; /* rows 0 and 2: the pools have 2 */
    rt_assert_status(rudnn_gated_delta_varlen_plan_create(rt_queue, &c.vl, 4, &plan), RUDNN_STATUS_SUCCESS);
    c.vl = (rudnn_gated_delta_varlen_t){.plan = plan};
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "varlen.plan", "3 rows");
    rudnn_gated_delta_varlen_plan_destroy(plan);

    /* a plan of another queue, and one whose queue was destroyed */
    rudnn_queue_t q2 = NULL;
    rt_assert_status(rudnn_queue_create(rt_ctx, &q2), RUDNN_STATUS_SUCCESS);
    varlen_spec(&c);
    rt_assert_status(rudnn_gated_delta_varlen_plan_create(q2, &c.vl, 4, &plan), RUDNN_STATUS_SUCCESS);
    c.vl = (rudnn_gated_delta_varlen_t){.plan = plan};
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "varlen.plan", "another queue");
    rudnn_queue_destroy(q2);
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "varlen.plan", "destroyed");
    rudnn_gated_delta_varlen_plan_destroy(plan);
}

/* One workspace rule for a form on a spec: too small, past its buffer, another context's, and a
 * workspace holding an input. */
static void workspace_rules_for(callspec_t *c, int form)
{
    spec_bind(c);
    size_t need = 0;
    rt_assert_status(call_form(c, form, 1, &need), RUDNN_STATUS_SUCCESS);
    const char *op = form ? OP_REC : OP_CHUNK;
    if (need == 0) {
        /* nothing needed: any workspace (even one of 0 bytes) is fine, NULL too */
        printf("    %s%s: the backend needs no workspace here\n", op, c->use_vl ? " (varlen)" : "");
        return;
    }
    rudnn_buffer_t ws;
    rt_assert_status(rudnn_buffer_create(rt_ctx, need, &ws), RUDNN_STATUS_SUCCESS);
    c->only_form = form;
    c->ws = ws, c->ws_bytes = need - 1;
    expect_reject_q(c, RUDNN_STATUS_BAD_PARAM, 1, "workspace_bytes", "too small", NULL);
    c->ws_bytes = need + 1;
    expect_reject_q(c, RUDNN_STATUS_BAD_PARAM, 1, "workspace_bytes", "exceeds", NULL);
    c->ws_bytes = need;
    if (rt_ctx2) {
        rudnn_buffer_t other;
        rt_assert_status(rudnn_buffer_create(rt_ctx2, need, &other), RUDNN_STATUS_SUCCESS);
        c->ws = other;
        expect_reject_q(c, RUDNN_STATUS_DEVICE_MISMATCH, 1, "workspace", NULL, NULL);
        rudnn_buffer_destroy(other);
    }
    /* a workspace whose first need bytes hold an input (key at offset 0 of a buffer of need bytes
     * and more): the key's own buffer is checked unchanged by a guard of its own */
    rt_tensor_t kin;
    rt_tensor_create(&kin, RUDNN_F32, c->d[T_K].rank, c->d[T_K].dims, 0, need);
    rt_rng_t r;
    rt_rng_seed(&r, 3);
    rt_tensor_fill_uniform(&kin, &r, -0.5, 0.5);
    rt_guard_t g;
    memset(&g, 0, sizeof g);
    rt_guard_track(&g, rt_queue, &kin, "key");
    rt_guard_begin(&g);
    const rudnn_tensor_t key_saved = c->d[T_K];
    c->d[T_K] = kin.t, c->ws = kin.buffer, c->ws_bytes = need;
    expect_reject_q(c, RUDNN_STATUS_BAD_PARAM, 1, "key", "workspace", NULL);
    assert_false(rt_guard_changed(&g));
    c->d[T_K] = key_saved;
    /* the exact size is accepted */
    c->ws = ws, c->ws_bytes = need;
    spec_bind(c);
    rt_assert_status(call_form(c, form, 0, NULL), RUDNN_STATUS_SUCCESS);
    rudnn_queue_synchronize(rt_queue);
    rt_tensor_poison(&F.t[T_OUT]), rt_tensor_poison(&F.t[T_S1]);
    rt_guard_free(&g);
    rt_tensor_destroy(&kin);
    rudnn_buffer_destroy(ws);
    c->ws = NULL, c->ws_bytes = 0;
}

static void workspaces(void **state)
{
    (void)state;
    callspec_t c;
    for (int form = 0; form < 2; form++) {
        spec_init(&c);
        workspace_rules_for(&c, form);
        varlen_spec(&c);
        workspace_rules_for(&c, form);
    }
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
        rt_tensor_create(&o, RUDNN_F32, F.t[i].t.rank, F.t[i].t.dims, 0, 0);
        rt_unbind(saved);
        callspec_t c;
        spec_init(&c), c.d[i] = o.t;
        expect_reject(&c, RUDNN_STATUS_DEVICE_MISMATCH, names[i], NULL);
        saved = rt_bind(rt_ctx2, rt_queue2);
        rt_tensor_destroy(&o);
        rt_unbind(saved);
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(valid_call_passes), cmocka_unit_test(null_arguments), cmocka_unit_test(ranks_and_dims),
        cmocka_unit_test(k_and_v_range),     cmocka_unit_test(dtypes),         cmocka_unit_test(layouts),
        cmocka_unit_test(overlaps),          cmocka_unit_test(query_scale),    cmocka_unit_test(chunk_sizes),
        cmocka_unit_test(varlen_rules),      cmocka_unit_test(varlen_plan_rules), cmocka_unit_test(workspaces),
        cmocka_unit_test(other_context),
    };
    rt_set_filters(argc, argv);
    rt_open_or_skip("gated_delta-contract");
    if (rt_group_setup_second(NULL))
        return 1;
    setup(NULL);
    const int failed = cmocka_run_group_tests_name("gated_delta-contract", tests, NULL, teardown);
    return rt_exit_code(failed);
}
