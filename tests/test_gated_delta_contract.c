/* Contract tests of the gated delta rule (include/rudnn/gated_delta.h, ops/gated_delta.c) on the
 * default backend. Every rejected call returns the status of its rule (BAD_PARAM, BAD_SHAPE,
 * BAD_DTYPE, DEVICE_MISMATCH, NOT_SUPPORTED for a valid view the op does not take), a message that
 * names the op and the argument, and writes nothing: every buffer (the outputs poisoned) is read
 * back byte for byte after the call, for both forms (chunked with chunk 4, recurrent), and a rejected
 * workspace-size query leaves *bytes as it was.
 *
 * The fixture: one buffer a tensor of a valid call, q, k [2, 2, 6, 8], v, out [2, 2, 6, 4],
 * beta, log_decay [2, 2, 6], states [2, 2, 8, 4]; each test edits a copy of the descriptors.
 *
 * Usage: test_gated_delta_contract [glob] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/gated_delta.h>

#include "common.h"

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
    rudnn_buffer_t ws;
    size_t ws_bytes;
} callspec_t;

static int setup(void **state)
{
    (void)state;
    const int64_t dq[4] = {2, 2, 6, 8}, dv[4] = {2, 2, 6, 4}, db[3] = {2, 2, 6}, ds[4] = {2, 2, 8, 4};
    const int64_t *dims[T_COUNT] = {dq, dq, dv, db, db, ds, dv, ds};
    const int ranks[T_COUNT] = {4, 4, 4, 3, 3, 4, 4, 4};
    const rudnn_dtype_t dts[T_COUNT] = {RUDNN_F32, RUDNN_F32, RUDNN_F32, RUDNN_F32, RUDNN_F32, RUDNN_F32, RUDNN_F32,
                                        RUDNN_F32};
    rt_rng_t r;
    rt_rng_seed(&r, 5);
    memset(&F, 0, sizeof F);
    for (int i = 0; i < T_COUNT; i++) {
        rt_tensor_create(&F.t[i], dts[i], ranks[i], dims[i], 0, 512);
        if (i != T_OUT && i != T_S1)
            rt_tensor_fill_uniform(&F.t[i], &r, -0.5, 0.5);
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
}

static void spec_bind(callspec_t *c)
{
    c->in = (rudnn_gated_delta_input_t){&c->d[T_Q], &c->d[T_K], &c->d[T_V], &c->d[T_BETA], &c->d[T_LD], &c->d[T_S0],
                                        0.35f};
    c->out = (rudnn_gated_delta_output_t){&c->d[T_OUT], &c->d[T_S1]};
}

/* Both forms (and their size queries) must answer want, name the op and every needle, and write
 * nothing. */
static void expect_reject(callspec_t *c, rudnn_status_t want, const char *n1, const char *n2)
{
    spec_bind(c);
    const rudnn_gated_delta_varlen_t *vl = c->use_vl ? &c->vl : NULL;
    for (int form = 0; form < 2; form++) {
        rt_guard_begin(&F.guard);
        size_t bytes = 12345;
        rudnn_status_t st = form ? rudnn_gated_delta_rule_workspace_size(rt_queue, &c->in, vl, &c->out, &bytes)
                                 : rudnn_chunk_gated_delta_rule_workspace_size(rt_queue, &c->in, vl, c->chunk, &c->out,
                                                                               &bytes);
        if (!(want == RUDNN_STATUS_BAD_PARAM && n1 && !strcmp(n1, "workspace"))) {
            rt_assert_status(st, want);
            rt_assert_error_mentions(form ? "rudnn_gated_delta_rule" : "rudnn_chunk_gated_delta_rule", n1, n2);
            assert_int_equal(bytes, 12345);
        }
        st = form ? rudnn_gated_delta_rule(rt_queue, &c->in, vl, c->ws, c->ws_bytes, &c->out)
                  : rudnn_chunk_gated_delta_rule(rt_queue, &c->in, vl, c->chunk, c->ws, c->ws_bytes, &c->out);
        rt_assert_status(st, want);
        rt_assert_error_mentions(form ? "rudnn_gated_delta_rule" : "rudnn_chunk_gated_delta_rule", n1, n2);
        rudnn_queue_synchronize(rt_queue);
        if (rt_guard_changed(&F.guard))
            fail_msg("a rejected call (%s) wrote to a buffer", rudnn_last_error());
    }
}

static void valid_call_passes(void **state)
{
    (void)state;
    callspec_t c;
    spec_init(&c);
    spec_bind(&c);
    size_t bytes = 0;
    rt_assert_status(rudnn_chunk_gated_delta_rule_workspace_size(rt_queue, &c.in, NULL, 4, &c.out, &bytes),
                     RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_chunk_gated_delta_rule(rt_queue, &c.in, NULL, 4, NULL, 0, &c.out), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_gated_delta_rule(rt_queue, &c.in, NULL, NULL, 0, &c.out), RUDNN_STATUS_SUCCESS);
}

static void null_arguments(void **state)
{
    (void)state;
    callspec_t c;
    spec_init(&c);
    spec_bind(&c);
    size_t bytes;
    rt_assert_status(rudnn_gated_delta_rule(NULL, &c.in, NULL, NULL, 0, &c.out), RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("queue");
    rt_assert_status(rudnn_gated_delta_rule(rt_queue, NULL, NULL, NULL, 0, &c.out), RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("input");
    rt_assert_status(rudnn_chunk_gated_delta_rule(rt_queue, &c.in, NULL, 4, NULL, 0, NULL), RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("output");
    rt_assert_status(rudnn_gated_delta_rule_workspace_size(rt_queue, &c.in, NULL, &c.out, NULL),
                     RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("bytes");
    (void)bytes;
    for (int i = 0; i < T_COUNT; i++) {
        callspec_t e;
        spec_init(&e);
        spec_bind(&e);
        const rudnn_tensor_t **slot[T_COUNT] = {&e.in.query, &e.in.key, &e.in.value, &e.in.beta, &e.in.log_decay,
                                                &e.in.initial_state, &e.out.output, &e.out.final_state};
        *slot[i] = NULL;
        rt_assert_status(rudnn_gated_delta_rule(rt_queue, &e.in, NULL, NULL, 0, &e.out), RUDNN_STATUS_BAD_PARAM);
        rt_assert_error_mentions(names[i], "NULL");
    }
}

static void shapes(void **state)
{
    (void)state;
    callspec_t c;
    spec_init(&c), c.d[T_Q].rank = 3, c.d[T_Q].strides[0] = 12, c.d[T_Q].strides[1] = 6, c.d[T_Q].strides[2] = 1;
    expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "query", "rank");
    spec_init(&c), c.d[T_K].dims[1] = 1;
    expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "key", NULL);
    spec_init(&c), c.d[T_V].dims[2] = 5;
    expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "value", NULL);
    spec_init(&c), c.d[T_BETA].dims[0] = 1;
    expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "beta", NULL);
    spec_init(&c), c.d[T_LD].dims[2] = 3;
    expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "log_decay", NULL);
    spec_init(&c), c.d[T_OUT].dims[3] = 3;
    expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "output", NULL);
    spec_init(&c), c.d[T_S0].dims[2] = 4, c.d[T_S0].strides[0] = 32, c.d[T_S0].strides[1] = 16;
    expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "initial_state", NULL);
    spec_init(&c), c.d[T_S1].dims[0] = 3;
    expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "final_state", NULL);
    /* K and V range */
    spec_init(&c);
    for (int i = T_Q; i <= T_K; i++)
        c.d[i].dims[3] = 0;
    c.d[T_S0].dims[2] = c.d[T_S1].dims[2] = 0;
    expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "query", "K");
    spec_init(&c);
    for (int i = T_Q; i <= T_K; i++) { /* [1, 1, 1, 257] inside the buffer's 512-byte tail */
        c.d[i].dims[0] = c.d[i].dims[1] = c.d[i].dims[2] = 1, c.d[i].dims[3] = RUDNN_GATED_DELTA_MAX_DIM + 1;
        c.d[i].strides[0] = c.d[i].strides[1] = c.d[i].strides[2] = c.d[i].dims[3];
    }
    expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "query", "1..256");
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
    expect_reject(&c, RUDNN_STATUS_BAD_DTYPE, "value", NULL);
    spec_init(&c), c.d[T_BETA].dtype = RUDNN_F16;
    expect_reject(&c, RUDNN_STATUS_BAD_DTYPE, "beta", NULL);
    /* query, key, value, beta, output in BF16 with an F32... log_decay must be F32 */
    spec_init(&c), c.d[T_LD].dtype = RUDNN_BF16;
    expect_reject(&c, RUDNN_STATUS_BAD_DTYPE, "log_decay", "f32");
    spec_init(&c), c.d[T_S0].dtype = RUDNN_BF16;
    expect_reject(&c, RUDNN_STATUS_BAD_DTYPE, "initial_state", "f32");
    spec_init(&c), c.d[T_OUT].dtype = RUDNN_BF16;
    expect_reject(&c, RUDNN_STATUS_BAD_DTYPE, "output", NULL);
    spec_init(&c), c.d[T_S1].dtype = RUDNN_F16;
    expect_reject(&c, RUDNN_STATUS_BAD_DTYPE, "final_state", "f32");
}

static void layouts_and_overlaps(void **state)
{
    (void)state;
    callspec_t c;
    /* last dim not contiguous */
    spec_init(&c);
    c.d[T_Q].dims[3] = 4, c.d[T_Q].strides[3] = 2;
    c.d[T_K].dims[3] = 4, c.d[T_S0].dims[2] = c.d[T_S1].dims[2] = 4;
    expect_reject(&c, RUDNN_STATUS_NOT_SUPPORTED, "query", "contiguous");
    /* states must be contiguous */
    spec_init(&c), c.d[T_S0].strides[0] = 128; /* a valid view inside the buffer (its 512-byte tail) */
    expect_reject(&c, RUDNN_STATUS_NOT_SUPPORTED, "initial_state", "contiguous");
    /* final_state over initial_state, over an input; output over an input */
    spec_init(&c), c.d[T_S1] = c.d[T_S0];
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "final_state", "initial_state");
    spec_init(&c), c.d[T_OUT] = c.d[T_V];
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "output", "value");
    /* query_scale */
    spec_init(&c);
    spec_bind(&c);
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
        rt_guard_begin(&F.guard);
        c.in.query_scale = bad[i];
        rt_assert_status(rudnn_gated_delta_rule(rt_queue, &c.in, NULL, NULL, 0, &c.out), RUDNN_STATUS_BAD_PARAM);
        rt_assert_error_mentions("query_scale", "finite");
        rt_assert_status(rudnn_chunk_gated_delta_rule(rt_queue, &c.in, NULL, 4, NULL, 0, &c.out),
                         RUDNN_STATUS_BAD_PARAM);
        assert_false(rt_guard_changed(&F.guard));
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
    int64_t too_big = 1;
    while (4 * ((uint64_t)too_big * (uint64_t)too_big + (uint64_t)too_big) <= info.shared_memory_per_group)
        too_big++;
    const int64_t bad[3] = {0, -3, too_big};
    for (int i = 0; i < 3; i++) {
        rt_guard_begin(&F.guard);
        size_t bytes = 7;
        rt_assert_status(rudnn_chunk_gated_delta_rule_workspace_size(rt_queue, &c.in, NULL, bad[i], &c.out, &bytes),
                         RUDNN_STATUS_BAD_PARAM);
        rt_assert_error_mentions("chunk_size");
        assert_int_equal(bytes, 7);
        rt_assert_status(rudnn_chunk_gated_delta_rule(rt_queue, &c.in, NULL, bad[i], NULL, 0, &c.out),
                         RUDNN_STATUS_BAD_PARAM);
        if (i == 2) {
            char limit[32];
            snprintf(limit, sizeof limit, "%llu", (unsigned long long)info.shared_memory_per_group);
            rt_assert_error_mentions("chunk_size", "shared memory", limit);
        }
        assert_false(rt_guard_changed(&F.guard));
    }
}

/* varlen: B = 1 views of the fixture (T 6 of batch row 0), pools of 2 rows */
static void varlen_spec(callspec_t *c)
{
    spec_init(c);
    for (int i = T_Q; i <= T_LD; i++)
        c->d[i].dims[0] = 1;
    c->d[T_OUT].dims[0] = 1;
    c->use_vl = 1;
    c->cu[0] = 0, c->cu[1] = 2, c->cu[2] = 6;
    c->idx[0] = 1, c->idx[1] = 0;
    c->vl = (rudnn_gated_delta_varlen_t){2, c->cu, c->idx};
}

static void varlen_rules(void **state)
{
    (void)state;
    callspec_t c;
    varlen_spec(&c);
    spec_bind(&c);
    rt_assert_status(rudnn_chunk_gated_delta_rule(rt_queue, &c.in, &c.vl, 4, NULL, 0, &c.out), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_gated_delta_rule(rt_queue, &c.in, &c.vl, NULL, 0, &c.out), RUDNN_STATUS_SUCCESS);
    rt_tensor_poison(&F.t[T_OUT]), rt_tensor_poison(&F.t[T_S1]);

    spec_init(&c), c.use_vl = 1, c.cu[1] = 2, c.cu[2] = 6, c.vl = (rudnn_gated_delta_varlen_t){2, c.cu, NULL};
    expect_reject(&c, RUDNN_STATUS_BAD_SHAPE, "query", "varlen");
    varlen_spec(&c), c.vl.sequences = 0;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "varlen.sequences", NULL);
    varlen_spec(&c), c.vl.cu_seqlens = NULL;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "cu_seqlens", NULL);
    varlen_spec(&c), c.cu[0] = 1;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "cu_seqlens[0]", NULL);
    varlen_spec(&c), c.cu[1] = 7;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "cu_seqlens", "past T");
    varlen_spec(&c), c.cu[1] = 5, c.cu[2] = 4;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "cu_seqlens", "decrease");
    varlen_spec(&c), c.idx[0] = -1;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "state_indices", "outside");
    varlen_spec(&c), c.idx[0] = 2;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "state_indices", "outside");
    varlen_spec(&c), c.idx[1] = 1;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "state_indices", "repeats");
    varlen_spec(&c), c.d[T_S1].dims[0] = 1, c.idx[0] = 1, c.idx[1] = 0;
    expect_reject(&c, RUDNN_STATUS_BAD_PARAM, "state_indices", "final_state");
}

static void workspaces(void **state)
{
    (void)state;
    callspec_t c;
    spec_init(&c);
    spec_bind(&c);
    size_t need = 0;
    rt_assert_status(rudnn_chunk_gated_delta_rule_workspace_size(rt_queue, &c.in, NULL, 4, &c.out, &need),
                     RUDNN_STATUS_SUCCESS);
    if (need == 0)
        return; /* nothing to check: the backend's chunked form needs no scratch */
    rudnn_buffer_t ws;
    rt_assert_status(rudnn_buffer_create(rt_ctx, need, &ws), RUDNN_STATUS_SUCCESS);
    rt_guard_begin(&F.guard);
    rt_assert_status(rudnn_chunk_gated_delta_rule(rt_queue, &c.in, NULL, 4, ws, need - 1, &c.out),
                     RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("workspace_bytes", "too small");
    rt_assert_status(rudnn_chunk_gated_delta_rule(rt_queue, &c.in, NULL, 4, ws, need + 1, &c.out),
                     RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("workspace_bytes", "exceeds");
    assert_false(rt_guard_changed(&F.guard));
    rudnn_buffer_destroy(ws);
    /* on another context */
    if (rt_ctx2) {
        rudnn_buffer_t other;
        rt_assert_status(rudnn_buffer_create(rt_ctx2, need, &other), RUDNN_STATUS_SUCCESS);
        rt_assert_status(rudnn_chunk_gated_delta_rule(rt_queue, &c.in, NULL, 4, other, need, &c.out),
                         RUDNN_STATUS_DEVICE_MISMATCH);
        rt_assert_error_mentions("workspace");
        rudnn_buffer_destroy(other);
    }
    /* a tensor of another context */
    if (rt_ctx2) {
        rt_binding_t saved = rt_bind(rt_ctx2, rt_queue2);
        rt_tensor_t o;
        const int64_t dq[4] = {2, 2, 6, 8};
        rt_tensor_create(&o, RUDNN_F32, 4, dq, 0, 0);
        rt_unbind(saved);
        spec_init(&c), c.d[T_K] = o.t;
        expect_reject(&c, RUDNN_STATUS_DEVICE_MISMATCH, "key", NULL);
        rt_bind(rt_ctx2, rt_queue2);
        rt_tensor_destroy(&o);
        rt_unbind(saved);
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(valid_call_passes), cmocka_unit_test(null_arguments), cmocka_unit_test(shapes),
        cmocka_unit_test(dtypes),            cmocka_unit_test(layouts_and_overlaps),
        cmocka_unit_test(chunk_sizes),       cmocka_unit_test(varlen_rules),   cmocka_unit_test(workspaces),
    };
    rt_set_filters(argc, argv);
    rt_open_or_skip("gated_delta-contract");
    if (rt_group_setup_second(NULL))
        return 1;
    setup(NULL);
    const int failed = cmocka_run_group_tests_name("gated_delta-contract", tests, NULL, teardown);
    return rt_exit_code(failed);
}
