/* bench_graph.h: a step of calls captured into a CUDA graph and its replays timed. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_graph.h"

/* The CUDA runtime's entry points used here, with their handles as void * (cudaError_t is an int
 * enum, 0 = cudaSuccess). */
typedef struct cudart {
    int (*begin_capture)(void *stream, int mode);
    int (*end_capture)(void *stream, void **graph);
    int (*instantiate)(void **exec, void *graph, unsigned long long flags);
    int (*launch)(void *exec, void *stream);
    int (*exec_destroy)(void *exec);
    int (*graph_destroy)(void *graph);
} cudart_t;

enum { CAPTURE_THREAD_LOCAL = 1 }; /* cudaStreamCaptureModeThreadLocal */

static void *sym(void *h, const char *name, int *missing)
{
    void *s = dlsym(h, name);
    *missing |= s == NULL;
    return s;
}

/* Loaded once; NULL where no libcudart loads or one lacks an entry point. */
static const cudart_t *cudart(void)
{
    static int tried;
    static cudart_t rt;
    static const cudart_t *ok;
    if (tried)
        return ok;
    tried = 1;
    char home[512];
    const char *env = getenv("CUDA_HOME");
    snprintf(home, sizeof home, "%s/lib64/libcudart.so", env && *env ? env : "/usr/local/cuda");
    const char *const names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12", home};
    void *h = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !h; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return NULL;
    int missing = 0;
    void *s[6] = {sym(h, "cudaStreamBeginCapture", &missing), sym(h, "cudaStreamEndCapture", &missing),
                  sym(h, "cudaGraphInstantiate", &missing), sym(h, "cudaGraphLaunch", &missing),
                  sym(h, "cudaGraphExecDestroy", &missing), sym(h, "cudaGraphDestroy", &missing)};
    if (missing)
        return NULL;
    memcpy(&rt.begin_capture, &s[0], sizeof s[0]);
    memcpy(&rt.end_capture, &s[1], sizeof s[1]);
    memcpy(&rt.instantiate, &s[2], sizeof s[2]);
    memcpy(&rt.launch, &s[3], sizeof s[3]);
    memcpy(&rt.exec_destroy, &s[4], sizeof s[4]);
    memcpy(&rt.graph_destroy, &s[5], sizeof s[5]);
    ok = &rt;
    return ok;
}

int bench_graph_time(bench_events_t *e, rudnn_context_t ctx, rudnn_queue_t q, int calls, bench_graph_call_fn call,
                     void *arg, double *ms_per_call, const char **why)
{
    rudnn_device_info_t info;
    if (rudnn_context_device_info(ctx, &info) || strcmp(info.backend, "cuda") != 0) {
        *why = "CUDA graphs need the cuda backend";
        return 1;
    }
    const cudart_t *rt = cudart();
    void *stream = rudnn_queue_native_handle(q);
    if (!rt || !stream) {
        *why = !rt ? "no CUDA runtime library (libcudart) loads" : "the queue has no native stream";
        return 1;
    }
    rudnn_status_t st = rudnn_queue_synchronize(q);
    if (st) {
        *why = "the queue failed before the capture";
        return 1;
    }
    if (rt->begin_capture(stream, CAPTURE_THREAD_LOCAL)) {
        *why = "cudaStreamBeginCapture refused the queue's stream";
        return 1;
    }
    for (int i = 0; i < calls && !st; i++)
        st = call(arg, i);
    void *graph = NULL, *exec = NULL;
    const int ended = rt->end_capture(stream, &graph);
    if (st || ended || rt->instantiate(&exec, graph, 0)) {
        if (graph)
            rt->graph_destroy(graph);
        *why = st ? "a call failed under capture" : ended ? "cudaStreamEndCapture failed (a call synchronised?)"
                                                    : "cudaGraphInstantiate failed";
        return 1;
    }
    int bad = 0;
    for (int i = 0; i < 2 && !bad; i++)
        bad = rt->launch(exec, stream);
    if (!bad)
        bad = rudnn_queue_synchronize(q) != RUDNN_STATUS_SUCCESS;
    for (int i = 0; i < e->count && !bad; i++) {
        if ((st = rudnn_event_record(e->start[i], q)))
            bench_die(e->prog, "event record", st);
        bad = rt->launch(exec, stream);
        if ((st = rudnn_event_record(e->end[i], q)))
            bench_die(e->prog, "event record", st);
    }
    rt->exec_destroy(exec);
    rt->graph_destroy(graph);
    if (bad) {
        *why = "a replay failed";
        return 1;
    }
    double median, minimum;
    bench_stats(e, e->count, &median, &minimum);
    *ms_per_call = median / calls;
    return 0;
}
