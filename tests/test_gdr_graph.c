/* The gated delta rule inside a CUDA graph (rudnn/gated_delta.h: with a varlen plan the calls take
 * no host-to-device copy and no host synchronisation, so they can be captured). On the cuda
 * backend only; elsewhere skipped.
 *
 * A varlen schedule of four sequences (70, 1, 0 and 130 tokens, state rows 4, 0, 2, 5 of pools of
 * 6) uploaded once as a plan for chunk 64, then the chunked prefill and the recurrent form over the
 * same tokens (BF16, H 2, K = V = 128: on sm_80+ the tensor-core path, on sm_90a its wgmma passes),
 * each with a workspace of the queried size, captured on the queue's stream
 * (rudnn_queue_native_handle) into one graph. The graph's outputs and state pools must equal, byte
 * for byte, those of the same calls run eagerly (the same kernels on the same inputs), and
 * replaying the graph after new queries are written must give the eager results for those
 * queries: the graph reads the buffers, it did not bake in values. Correctness against the FP64
 * reference is test_gated_delta's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/gated_delta.h>

#include "cuda_graph.h"

enum { N = 4, H = 2, T = 201, K = 128, V = 128, POOL = 6, CHUNK = 64 };

static const int64_t cu[N + 1] = {0, 70, 71, 71, 201};
static const int32_t rows[N] = {4, 0, 2, 5};

typedef struct bufs {
    rt_tensor_t q, k, v, beta, ld, s0, out[2], s1[2]; /* [0] chunked, [1] recurrent */
    rudnn_buffer_t ws[2];
    size_t ws_bytes[2];
} bufs_t;

static void make(bufs_t *b)
{
    const int64_t dqk[4] = {1, H, T, K}, dv[4] = {1, H, T, V}, dbt[3] = {1, H, T}, ds[4] = {POOL, H, K, V};
    rt_tensor_create(&b->q, RUDNN_BF16, 4, dqk, 0, 0);
    rt_tensor_create(&b->k, RUDNN_BF16, 4, dqk, 0, 0);
    rt_tensor_create(&b->v, RUDNN_BF16, 4, dv, 0, 0);
    rt_tensor_create(&b->beta, RUDNN_BF16, 3, dbt, 0, 0);
    rt_tensor_create(&b->ld, RUDNN_F32, 3, dbt, 0, 0);
    rt_tensor_create(&b->s0, RUDNN_F32, 4, ds, 0, 0);
    for (int f = 0; f < 2; f++) {
        rt_tensor_create(&b->out[f], RUDNN_BF16, 4, dv, 0, 0);
        rt_tensor_create(&b->s1[f], RUDNN_F32, 4, ds, 0, 0);
    }
    rt_rng_t rng;
    rt_rng_seed(&rng, 23);
    rt_tensor_fill_uniform(&b->q, &rng, -1.0, 1.0);
    rt_tensor_fill_uniform(&b->k, &rng, -0.1, 0.1); /* |k|^2 near 0.4: the delta rule stays bounded */
    rt_tensor_fill_uniform(&b->v, &rng, -1.0, 1.0);
    rt_tensor_fill_uniform(&b->beta, &rng, 0.0, 1.0);
    rt_tensor_fill_uniform(&b->ld, &rng, -0.3, 0.0);
    rt_tensor_fill_uniform(&b->s0, &rng, -1.0, 1.0);
}

static void destroy(bufs_t *b)
{
    rt_tensor_t *all[] = {&b->q, &b->k, &b->v, &b->beta, &b->ld, &b->s0, &b->out[0], &b->out[1], &b->s1[0],
                          &b->s1[1]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        rt_tensor_destroy(all[i]);
    for (int f = 0; f < 2; f++)
        if (b->ws[f])
            rudnn_buffer_destroy(b->ws[f]);
}

static void operands(bufs_t *b, int f, rudnn_gated_delta_input_t *in, rudnn_gated_delta_output_t *out)
{
    *in = (rudnn_gated_delta_input_t){.query = &b->q.t, .key = &b->k.t, .value = &b->v.t, .beta = &b->beta.t,
                                      .log_decay = &b->ld.t, .initial_state = &b->s0.t, .query_scale = 0.088f};
    *out = (rudnn_gated_delta_output_t){.output = &b->out[f].t, .final_state = &b->s1[f].t};
}

/* The outputs and pools set to a fill, so that whole buffers compare (rows and tokens no sequence
 * owns keep it). */
static void reset(bufs_t *b, int byte)
{
    for (int f = 0; f < 2; f++) {
        rt_assert_status(rudnn_buffer_fill(rt_queue, b->out[f].buffer, 0, byte, b->out[f].buffer_bytes),
                         RUDNN_STATUS_SUCCESS);
        rt_assert_status(rudnn_buffer_fill(rt_queue, b->s1[f].buffer, 0, byte, b->s1[f].buffer_bytes),
                         RUDNN_STATUS_SUCCESS);
    }
    rt_assert_status(rudnn_queue_synchronize(rt_queue), RUDNN_STATUS_SUCCESS);
}

/* The calls of one layer of a step: chunked prefill and the recurrent form, both through the plan. */
static void step(bufs_t *b, const rudnn_gated_delta_varlen_t *vl)
{
    rudnn_gated_delta_input_t in;
    rudnn_gated_delta_output_t out;
    operands(b, 0, &in, &out);
    rt_assert_status(rudnn_chunk_gated_delta_rule(rt_queue, &in, vl, CHUNK, b->ws[0], b->ws_bytes[0], &out),
                     RUDNN_STATUS_SUCCESS);
    operands(b, 1, &in, &out);
    rt_assert_status(rudnn_gated_delta_rule(rt_queue, &in, vl, b->ws[1], b->ws_bytes[1], &out),
                     RUDNN_STATUS_SUCCESS);
}

typedef struct step_args {
    bufs_t *b;
    const rudnn_gated_delta_varlen_t *vl;
} step_args_t;

static void step_captured(void *arg)
{
    const step_args_t *a = arg;
    step(a->b, a->vl);
}

static size_t read_outputs(bufs_t *b, uint8_t *host)
{
    size_t at = 0;
    for (int f = 0; f < 2; f++) {
        rt_assert_status(rudnn_buffer_read(rt_queue, b->out[f].buffer, 0, host + at, b->out[f].buffer_bytes),
                         RUDNN_STATUS_SUCCESS);
        at += b->out[f].buffer_bytes;
        rt_assert_status(rudnn_buffer_read(rt_queue, b->s1[f].buffer, 0, host + at, b->s1[f].buffer_bytes),
                         RUDNN_STATUS_SUCCESS);
        at += b->s1[f].buffer_bytes;
    }
    return at;
}

static void test_graph_capture(void **state)
{
    (void)state;
    const rudnn_gated_delta_varlen_t arrays = {.sequences = N, .cu_seqlens = cu, .state_indices = rows};
    rudnn_gated_delta_varlen_plan_t plan = NULL;
    rt_assert_status(rudnn_gated_delta_varlen_plan_create(rt_queue, &arrays, CHUNK, &plan), RUDNN_STATUS_SUCCESS);
    const rudnn_gated_delta_varlen_t vl = {.plan = plan};

    bufs_t b;
    memset(&b, 0, sizeof b);
    make(&b);
    for (int f = 0; f < 2; f++) { /* workspaces of the queried sizes: no pool allocation inside the capture */
        rudnn_gated_delta_input_t in;
        rudnn_gated_delta_output_t out;
        operands(&b, f, &in, &out);
        rt_assert_status(f ? rudnn_gated_delta_rule_workspace_size(rt_queue, &in, &vl, &out, &b.ws_bytes[f])
                           : rudnn_chunk_gated_delta_rule_workspace_size(rt_queue, &in, &vl, CHUNK, &out,
                                                                          &b.ws_bytes[f]),
                         RUDNN_STATUS_SUCCESS);
        if (b.ws_bytes[f])
            rt_assert_status(rudnn_buffer_create(rt_ctx, b.ws_bytes[f], &b.ws[f]), RUDNN_STATUS_SUCCESS);
    }
    size_t total = 0;
    for (int f = 0; f < 2; f++)
        total += b.out[f].buffer_bytes + b.s1[f].buffer_bytes;
    uint8_t *eager = malloc(total), *graphed = malloc(total);
    assert_non_null(eager);
    assert_non_null(graphed);

    reset(&b, 0x3C);
    step(&b, &vl);
    rt_assert_status(rudnn_queue_synchronize(rt_queue), RUDNN_STATUS_SUCCESS);
    assert_int_equal(read_outputs(&b, eager), total);

    reset(&b, 0x3C);
    cudaGraph_t graph = NULL;
    step_args_t args = {&b, &vl};
    cudaGraphExec_t exec = rt_graph_capture(step_captured, &args, &graph);
    rt_graph_run(exec);
    read_outputs(&b, graphed);
    assert_memory_equal(graphed, eager, total);

    /* new queries, replayed: the graph reads q from its buffer */
    rt_rng_t rng;
    rt_rng_seed(&rng, 97);
    rt_tensor_fill_uniform(&b.q, &rng, -1.0, 1.0);
    reset(&b, 0x3C);
    step(&b, &vl);
    rt_assert_status(rudnn_queue_synchronize(rt_queue), RUDNN_STATUS_SUCCESS);
    read_outputs(&b, eager);
    reset(&b, 0x3C);
    rt_graph_run(exec);
    read_outputs(&b, graphed);
    assert_memory_equal(graphed, eager, total);

    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    free(eager);
    free(graphed);
    destroy(&b);
    rudnn_gated_delta_varlen_plan_destroy(plan);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_graph_capture)};
    return rt_graph_main("gated_delta_graph", tests, sizeof tests / sizeof tests[0], argc, argv);
}
