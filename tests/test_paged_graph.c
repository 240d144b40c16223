/* Paged attention inside a CUDA graph (rudnn/paged_attention.h: after the plan's upload, the calls
 * take no host synchronisation and can be captured). On the cuda backend only; elsewhere skipped.
 *
 * One decode-and-prefill schedule, a plan uploaded once, then attention (unsplit and with a split
 * workspace), MLA and an append captured on the queue's stream (rudnn_queue_native_handle) into
 * one graph. The graph's results must equal, byte for byte, those of the same calls run eagerly
 * (the same kernels on the same inputs), and replaying the graph after new queries are written
 * must give the eager results for those queries: the graph reads the buffers, it did not bake in
 * values. Correctness against the FP64 reference is test_paged_attention's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/paged_attention.h>

#include "cuda_graph.h"

enum { PS = 16, PAGES = 24, N = 3, Q = 6, HQ = 8, HKV = 2, D = 64, R = 40, P = 8 };

static const int64_t lengths[N] = {37, 1, 130};
static const int64_t table_offsets[N + 1] = {0, 3, 4, 13};
static const int32_t tables[13] = {5, 0, 9, 17, 2, 3, 4, 1, 6, 7, 8, 10, 11};
static const int64_t seq_ids[Q] = {0, 1, 2, 2, 2, 2};
static const int64_t positions[Q] = {36, 0, 126, 127, 128, 129};

typedef struct bufs {
    rt_tensor_t q, q_mla, qp, k, v, lat, kp, out, out_ws, out_mla, knew, vnew;
} bufs_t;

static void make(bufs_t *b, rudnn_dtype_t dt)
{
    const int64_t dq[3] = {Q, HQ, D}, dk[4] = {PAGES, PS, HKV, D}, dqp[3] = {Q, HQ, P}, dlat[4] = {PAGES, PS, 1, R},
                  dkp[4] = {PAGES, PS, 1, P}, dom[3] = {Q, HQ, R}, dnew[3] = {Q, HKV, D};
    /* MLA's q is [Q, H, R]: R (the latent width) differs from attention's D on purpose */
    rt_tensor_create(&b->q, dt, 3, dq, 0, 0);
    rt_tensor_create(&b->k, dt, 4, dk, 0, 0);
    rt_tensor_create(&b->v, dt, 4, dk, 0, 0);
    rt_tensor_create(&b->out, dt, 3, dq, 0, 0);
    rt_tensor_create(&b->out_ws, dt, 3, dq, 0, 0);
    rt_tensor_create(&b->q_mla, dt, 3, dom, 0, 0);
    rt_tensor_create(&b->qp, dt, 3, dqp, 0, 0);
    rt_tensor_create(&b->lat, dt, 4, dlat, 0, 0);
    rt_tensor_create(&b->kp, dt, 4, dkp, 0, 0);
    rt_tensor_create(&b->out_mla, dt, 3, dom, 0, 0);
    rt_tensor_create(&b->knew, dt, 3, dnew, 0, 0);
    rt_tensor_create(&b->vnew, dt, 3, dnew, 0, 0);
    rt_tensor_t *in[] = {&b->q, &b->q_mla, &b->k, &b->v, &b->qp, &b->lat, &b->kp, &b->knew, &b->vnew};
    rt_rng_t rng;
    rt_rng_seed(&rng, 11);
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        rt_tensor_fill_uniform(in[i], &rng, -1.0, 1.0);
}

static void destroy(bufs_t *b)
{
    rt_tensor_t *all[] = {&b->q, &b->q_mla, &b->qp, &b->k, &b->v, &b->lat, &b->kp, &b->out, &b->out_ws, &b->out_mla,
                          &b->knew, &b->vnew};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        rt_tensor_destroy(all[i]);
}

/* The calls a decoding step makes for one layer; each must succeed. */
static void step(rudnn_paged_plan_t plan, rudnn_paged_split_workspace_t ws, bufs_t *b)
{
    rudnn_tensor_t k_out, v_out;
    rt_assert_status(rudnn_paged_append(plan, &b->knew.t, &b->vnew.t, &b->k.t, &b->v.t, &k_out, &v_out),
                     RUDNN_STATUS_SUCCESS);
    assert_ptr_equal(k_out.buffer, b->k.buffer); /* not shared: written in place */
    rt_assert_status(rudnn_paged_attention(plan, &b->q.t, &b->k.t, &b->v.t, 0.125f, 1, &b->out.t),
                     RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_paged_attention_with_workspace(plan, ws, &b->q.t, &b->k.t, &b->v.t, 0.125f, 1,
                                                          &b->out_ws.t),
                     RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_paged_mla(plan, &b->q_mla.t, &b->qp.t, &b->lat.t, &b->kp.t, 0.1f, 0, &b->out_mla.t),
                     RUDNN_STATUS_SUCCESS);
}

typedef struct step_args {
    rudnn_paged_plan_t plan;
    rudnn_paged_split_workspace_t ws;
    bufs_t *b;
} step_args_t;

static void step_captured(void *arg)
{
    const step_args_t *a = arg;
    step(a->plan, a->ws, a->b);
}

static void read_outputs(bufs_t *b, uint8_t *host, size_t each)
{
    rt_assert_status(rudnn_buffer_read(rt_queue, b->out.buffer, 0, host, each), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_buffer_read(rt_queue, b->out_ws.buffer, 0, host + each, each), RUDNN_STATUS_SUCCESS);
    const size_t mla = b->out_mla.buffer_bytes;
    rt_assert_status(rudnn_buffer_read(rt_queue, b->out_mla.buffer, 0, host + 2 * each, mla), RUDNN_STATUS_SUCCESS);
}

static void test_graph_capture(void **state)
{
    (void)state;
    const rudnn_paged_schedule_t s = {PS, PAGES, N, lengths, table_offsets, tables, Q, seq_ids, positions};
    rudnn_paged_host_plan_t host = NULL;
    rudnn_paged_plan_t plan = NULL;
    rudnn_paged_split_workspace_t ws = NULL;
    rt_assert_status(rudnn_paged_host_plan_create(&s, &host), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_paged_plan_create(rt_queue, host, &plan), RUDNN_STATUS_SUCCESS);
    rudnn_paged_host_plan_destroy(host);
    rt_assert_status(rudnn_paged_split_workspace_create(rt_queue, Q, HQ, D, 4, &ws), RUDNN_STATUS_SUCCESS);

    bufs_t b;
    make(&b, RUDNN_BF16);
    const size_t each = b.out.buffer_bytes, total = 2 * each + b.out_mla.buffer_bytes;
    uint8_t *eager = malloc(total), *graphed = malloc(total);
    assert_non_null(eager);
    assert_non_null(graphed);

    step(plan, ws, &b);
    rt_assert_status(rudnn_queue_synchronize(rt_queue), RUDNN_STATUS_SUCCESS);
    read_outputs(&b, eager, each);

    rt_assert_status(rudnn_buffer_fill(rt_queue, b.out.buffer, 0, 0xAB, each), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_buffer_fill(rt_queue, b.out_ws.buffer, 0, 0xAB, each), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_queue_synchronize(rt_queue), RUDNN_STATUS_SUCCESS);
    cudaGraph_t graph = NULL;
    step_args_t args = {plan, ws, &b};
    cudaGraphExec_t exec = rt_graph_capture(step_captured, &args, &graph);
    rt_graph_run(exec);
    read_outputs(&b, graphed, each);
    assert_memory_equal(graphed, eager, total);

    /* new queries, replayed: the graph reads q from its buffer */
    rt_rng_t rng;
    rt_rng_seed(&rng, 99);
    rt_tensor_fill_uniform(&b.q, &rng, -1.0, 1.0);
    step(plan, ws, &b);
    rt_assert_status(rudnn_queue_synchronize(rt_queue), RUDNN_STATUS_SUCCESS);
    read_outputs(&b, eager, each);
    rt_assert_status(rudnn_buffer_fill(rt_queue, b.out.buffer, 0, 0xCD, each), RUDNN_STATUS_SUCCESS);
    rt_graph_run(exec);
    read_outputs(&b, graphed, each);
    assert_memory_equal(graphed, eager, total);

    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    free(eager);
    free(graphed);
    destroy(&b);
    rudnn_paged_split_workspace_destroy(ws);
    rudnn_paged_plan_destroy(plan);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_graph_capture)};
    return rt_graph_main("paged_graph", tests, sizeof tests / sizeof tests[0], argc, argv);
}
