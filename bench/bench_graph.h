/* Timing from CUDA-graph replays (the device tool's METHOD.md: for many small launches, capture a
 * graph and time its replays): the launch gaps and the host's work between calls leave the figure,
 * as in a serving step run from a graph. Only where the queue is the cuda backend's; the CUDA
 * runtime is loaded at run time (libcudart), so that the benches keep no build-time tie to CUDA. */
#ifndef RUDNN_BENCH_GRAPH_H
#define RUDNN_BENCH_GRAPH_H

#include "bench_util.h"

/* The i-th call of a captured step (i = 0 .. calls - 1). */
typedef rudnn_status_t (*bench_graph_call_fn)(void *arg, int i);

/* `calls` calls captured into one graph on q's stream, the graph replayed e->count times between
 * event pairs (twice untimed first): *ms_per_call is the median replay over calls. 0 on success;
 * 1 where none was timed (*why says why: not the cuda backend, no CUDA runtime, a call or a capture
 * that failed, a replay that failed); a failing event record exits through bench_die. */
int bench_graph_time(bench_events_t *e, rudnn_context_t ctx, rudnn_queue_t q, int calls, bench_graph_call_fn call,
                     void *arg, double *ms_per_call, const char **why);

#endif
