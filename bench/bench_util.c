#include "bench_util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COPY_WARMUP 3

void bench_json_string(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; ++p) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 0x20)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

void *bench_xmalloc(const char *prog, size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "%s: out of host memory (%zu bytes)\n", prog, bytes);
        exit(1);
    }
    return p;
}

void bench_die(const char *prog, const char *what, rudnn_status_t st)
{
    fprintf(stderr, "%s: %s: %s: %s\n", prog, what, rudnn_status_string(st), rudnn_last_error());
    exit(1);
}

static void check(const char *prog, const char *what, rudnn_status_t st)
{
    if (st != RUDNN_STATUS_SUCCESS)
        bench_die(prog, what, st);
}

void bench_events_create(bench_events_t *e, const char *prog, rudnn_context_t ctx, int count)
{
    memset(e, 0, sizeof *e);
    e->prog = prog;
    e->count = count;
    e->start = bench_xmalloc(prog, (size_t)count * sizeof e->start[0]);
    e->end = bench_xmalloc(prog, (size_t)count * sizeof e->end[0]);
    e->ms = bench_xmalloc(prog, (size_t)count * sizeof e->ms[0]);
    for (int i = 0; i < count; i++) {
        check(prog, "rudnn_event_create", rudnn_event_create(ctx, &e->start[i]));
        check(prog, "rudnn_event_create", rudnn_event_create(ctx, &e->end[i]));
    }
}

void bench_events_destroy(bench_events_t *e)
{
    for (int i = 0; i < e->count; i++) {
        rudnn_event_destroy(e->start[i]);
        rudnn_event_destroy(e->end[i]);
    }
    free(e->start);
    free(e->end);
    free(e->ms);
    memset(e, 0, sizeof *e);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

void bench_stats(bench_events_t *e, int n, double *median, double *minimum)
{
    if (n < 1 || n > e->count) {
        fprintf(stderr, "%s: bench_stats of %d launches (1..%d)\n", e->prog, n, e->count);
        exit(1);
    }
    for (int i = 0; i < n; i++)
        check(e->prog, "rudnn_event_elapsed_ms", rudnn_event_elapsed_ms(e->start[i], e->end[i], &e->ms[i]));
    qsort(e->ms, (size_t)n, sizeof e->ms[0], cmp_float);
    *median = n % 2 ? e->ms[n / 2] : 0.5 * ((double)e->ms[n / 2 - 1] + (double)e->ms[n / 2]);
    *minimum = e->ms[0];
}

double bench_copy(bench_events_t *e, rudnn_context_t ctx, rudnn_queue_t q, const rudnn_device_info_t *dev,
                  size_t bytes, int reps)
{
    const char *prog = e->prog;
    rudnn_buffer_t src, dst;
    check(prog, "rudnn_buffer_create (copy source)", rudnn_buffer_create(ctx, bytes, &src));
    check(prog, "rudnn_buffer_create (copy target)", rudnn_buffer_create(ctx, bytes, &dst));
    check(prog, "rudnn_buffer_fill", rudnn_buffer_fill(q, src, 0, 0x5a, bytes));
    for (int i = 0; i < COPY_WARMUP; i++)
        check(prog, "rudnn_buffer_copy", rudnn_buffer_copy(q, dst, 0, src, 0, bytes));
    check(prog, "rudnn_queue_synchronize", rudnn_queue_synchronize(q));
    for (int i = 0; i < reps; i++) {
        check(prog, "rudnn_event_record", rudnn_event_record(e->start[i], q));
        check(prog, "rudnn_buffer_copy", rudnn_buffer_copy(q, dst, 0, src, 0, bytes));
        check(prog, "rudnn_event_record", rudnn_event_record(e->end[i], q));
    }
    double median, minimum;
    bench_stats(e, reps, &median, &minimum);
    rudnn_buffer_destroy(src);
    rudnn_buffer_destroy(dst);
    if (!(median > 0)) {
        fprintf(stderr, "%s: a copy timed at %g ms: the event timer does not work\n", prog, median);
        exit(1);
    }
    const double gbps = 2.0 * (double)bytes / (median * 1e6); /* read + write */
    printf("{\"op\":\"copy\",\"bytes\":%zu,\"backend\":", bytes);
    bench_json_string(dev->backend);
    printf(",\"device\":");
    bench_json_string(dev->name);
    printf(",\"median_ms\":%.6f,\"min_ms\":%.6f,\"gbps\":%.2f,\"copy_gbps\":%.2f,\"reps\":%d}\n", median, minimum,
           gbps, gbps, reps);
    fflush(stdout);
    return gbps;
}

int bench_in_list(const char *list, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *comma = strchr(p, ',');
        const size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == n && !strncmp(p, name, n))
            return 1;
        p = comma ? comma + 1 : NULL;
    }
    return 0;
}

static int contains_ci(const char *hay, const char *needle)
{
    for (; *hay; hay++) {
        size_t i = 0;
        while (needle[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (!needle[i])
            return 1;
    }
    return 0;
}

int bench_is_cpu_device(const rudnn_device_info_t *dev)
{
    return contains_ci(dev->name, "cpu") || contains_ci(dev->name, "pthread") || contains_ci(dev->driver, "pocl");
}
