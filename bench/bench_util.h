/* What the benchmark binaries share: JSON string output, host allocation that cannot fail, the
 * timing of launches between event pairs (median and minimum), the device-to-device copy line each
 * bench prints first, and the --case list match. */
#ifndef RUDNN_BENCH_UTIL_H
#define RUDNN_BENCH_UTIL_H

#include <stddef.h>

#include "rudnn/core.h"

/* Prints s as a JSON string literal (quotes, escapes) on stdout. */
void bench_json_string(const char *s);

/* malloc that exits with "<prog>: out of host memory" instead of returning NULL (0 bytes: 1). */
void *bench_xmalloc(const char *prog, size_t bytes);

/* Prints "<prog>: <what>: <status>: <rudnn_last_error()>" on stderr and exits 1. */
void bench_die(const char *prog, const char *what, rudnn_status_t st) __attribute__((noreturn));

/* count pairs of events for timed launches: record start[i], the launch, end[i]; then bench_stats.
 * Failures exit through bench_die(prog, ...). */
typedef struct bench_events {
    const char *prog;
    int count;
    rudnn_event_t *start, *end;
    float *ms;
} bench_events_t;

void bench_events_create(bench_events_t *e, const char *prog, rudnn_context_t ctx, int count);
void bench_events_destroy(bench_events_t *e);

/* The first n (<= count) pairs, already recorded: median and minimum of their times, in ms. */
void bench_stats(bench_events_t *e, int n, double *median, double *minimum);

/* Times `reps` copies of `bytes` from one new buffer to another on q (3 untimed first), prints the
 * line {"op":"copy","bytes","backend","device","median_ms","min_ms","gbps","copy_gbps","reps"}
 * (gbps = 2 bytes / median: read + write) and returns gbps. Exits when the events time a copy at 0
 * (a timer that does not work would make every figure of the run meaningless). */
double bench_copy(bench_events_t *e, rudnn_context_t ctx, rudnn_queue_t q, const rudnn_device_info_t *dev,
                  size_t bytes, int reps);

/* 1 for a CPU device (PoCL: "cpu" or "pthread" in the name, or the pocl driver), where GPU-sized
 * buffers would take seconds a copy. */
int bench_is_cpu_device(const rudnn_device_info_t *dev);

/* 1 when name is one of the comma-separated entries of list (NULL: none). */
int bench_in_list(const char *list, const char *name);

#endif
