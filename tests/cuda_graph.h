/* CUDA-graph helpers of the capture tests (test_paged_graph.c, test_gdr_graph.c): the cuda backend's
 * queue stream captured around a step of calls, the graph launched, and the tests' skip elsewhere.
 * Header-only: the tests that include it link the CUDA runtime themselves. */
#ifndef RUDNN_TESTS_CUDA_GRAPH_H
#define RUDNN_TESTS_CUDA_GRAPH_H

#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "common.h"

/* step(arg) captured on rt_queue's stream into an instantiated graph (the calls must take no host
 * synchronisation; a failure fails the test). */
static inline cudaGraphExec_t rt_graph_capture(void (*step)(void *), void *arg, cudaGraph_t *graph)
{
    cudaStream_t stream = (cudaStream_t)rudnn_queue_native_handle(rt_queue);
    assert_non_null(stream);
    cudaGraphExec_t exec = NULL;
    assert_int_equal(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    step(arg);
    assert_int_equal(cudaStreamEndCapture(stream, graph), cudaSuccess);
    assert_int_equal(cudaGraphInstantiate(&exec, *graph, 0), cudaSuccess);
    return exec;
}

/* The graph run on rt_queue's stream, to its end. */
static inline void rt_graph_run(cudaGraphExec_t exec)
{
    assert_int_equal(cudaGraphLaunch(exec, (cudaStream_t)rudnn_queue_native_handle(rt_queue)), cudaSuccess);
    rt_assert_status(rudnn_queue_synchronize(rt_queue), RUDNN_STATUS_SUCCESS);
}

/* main() of a capture test: the default backend opened, the tests run where it is cuda, else
 * skipped (CUDA graphs need the cuda backend). */
static inline int rt_graph_main(const char *name, const struct CMUnitTest *tests, size_t count, int argc,
                                char **argv)
{
    rt_set_filters(argc, argv);
    rt_open_or_skip(name);
    rudnn_device_info_t info;
    const char *backend = rudnn_context_device_info(rt_ctx, &info) ? "unknown" : info.backend;
    if (strcmp(backend, "cuda") != 0) {
        printf("%s: SKIPPED (CUDA graphs need the cuda backend, this is %s)\n", name, backend);
        rt_close();
        return RT_EXIT_SKIP;
    }
    const int failed = _cmocka_run_group_tests(name, tests, count, NULL, rt_group_teardown);
    return rt_exit_code(failed);
}

#endif
