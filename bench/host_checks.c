/* rudnn-bench-host-checks: the host time of an operator call's argument checks, with no device work:
 * each call is made with arguments that pass every check but its last one, so that it returns
 * before any launch, and beside it the same call rejected at its first check (a NULL queue or
 * plan: the call's fixed cost, error message included). One JSON line per call:
 *
 *   {"op":"host_checks","call","tensors","backend","device","calls","last_check_us","first_check_us",
 *    "last_check_error"}
 * (last_check_error: the message of the call rejected at its last check, to show which check it was)
 *
 *   rms_norm            input and output [4, 4096] BF16, gamma [4096] F32; rejected at its last
 *                       check, output overlapping gamma
 *   paged_attention     rudnn_paged_attention_with_workspace, decode B 1, KV 2k, page 16, Hq 32, Hkv 8,
 *                       D 128 BF16 with a split workspace; rejected at its last check, scale NaN
 *
 *   rudnn-bench-host-checks [--backend NAME] [--device N] [--calls N]
 * Times: the median of 7 runs of --calls calls (default 100000) each, per call, in microseconds.
 * The checks are the same on every backend (ops/ and core/); the backend only owns the buffers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "rudnn/rudnn.h"

#define PROG "rudnn-bench-host-checks"
#define RUNS 7
#define CHECK(x)                                                                                                     \
    do {                                                                                                             \
        const rudnn_status_t st_ = (x);                                                                              \
        if (st_)                                                                                                     \
            bench_die(PROG, #x, st_);                                                                                \
    } while (0)

typedef struct run {
    rudnn_context_t ctx;
    rudnn_queue_t q;
    rudnn_device_info_t dev;
    long calls;
} run_t;

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One call of a case: first = 1 for the variant rejected at its first check. */
typedef rudnn_status_t (*call_fn)(void *state, int first);

/* Microseconds a call, median of RUNS runs; dies unless every call answers want. */
static double time_call(const run_t *r, call_fn fn, void *state, int first, rudnn_status_t want)
{
    double t[RUNS];
    for (int k = 0; k < RUNS; k++) {
        const double t0 = seconds();
        rudnn_status_t got = want;
        for (long i = 0; i < r->calls; i++)
            got = got == want ? fn(state, first) : got;
        t[k] = 1e6 * (seconds() - t0) / (double)r->calls;
        if (got != want) {
            fprintf(stderr, PROG ": a call answered %s (%s), expected %s\n", rudnn_status_string(got),
                    rudnn_last_error(), rudnn_status_string(want));
            exit(1);
        }
    }
    qsort(t, RUNS, sizeof t[0], cmp_double);
    return t[RUNS / 2];
}

static void report(const run_t *r, const char *call, int tensors, double last, double first, const char *why)
{
    printf("{\"op\":\"host_checks\",\"call\":\"%s\",\"tensors\":%d,\"backend\":", call, tensors);
    bench_json_string(r->dev.backend);
    printf(",\"device\":");
    bench_json_string(r->dev.name);
    printf(",\"calls\":%ld,\"last_check_us\":%.4f,\"first_check_us\":%.4f,\"last_check_error\":", r->calls, last,
           first);
    bench_json_string(why);
    printf("}\n");
    fflush(stdout);
}

/* Times call fn on state refused at its last check and at its first, and prints the line. */
static void measure(const run_t *r, const char *call, int tensors, call_fn fn, void *state)
{
    const double last = time_call(r, fn, state, 0, RUDNN_STATUS_BAD_PARAM);
    char why[RUDNN_MESSAGE_MAX];
    snprintf(why, sizeof why, "%s", rudnn_last_error());
    const double first = time_call(r, fn, state, 1, RUDNN_STATUS_BAD_PARAM);
    report(r, call, tensors, last, first, why);
}

/* ---- rms_norm ---------------------------------------------------------------------------------- */

typedef struct norm_state {
    rudnn_queue_t q;
    rudnn_tensor_t in, gamma, out;
} norm_state_t;

static rudnn_status_t norm_call(void *s, int first)
{
    norm_state_t *n = s;
    return rudnn_rms_norm(first ? NULL : n->q, &n->in, &n->gamma, 1e-6f, &n->out);
}

static void bench_norm(const run_t *r)
{
    enum { ROWS = 4, COLS = 4096 };
    norm_state_t n = {.q = r->q};
    rudnn_buffer_t b_in, b_w;
    CHECK(rudnn_buffer_create(r->ctx, ROWS * COLS * 2, &b_in));
    CHECK(rudnn_buffer_create(r->ctx, ROWS * COLS * 2 + COLS * 4, &b_w));
    const int64_t d2[2] = {ROWS, COLS}, d1[1] = {COLS};
    CHECK(rudnn_tensor_init(&n.in, b_in, 0, RUDNN_BF16, 2, d2));
    CHECK(rudnn_tensor_init(&n.gamma, b_w, 0, RUDNN_F32, 1, d1));
    CHECK(rudnn_tensor_init(&n.out, b_w, 0, RUDNN_BF16, 2, d2)); /* over gamma: the last check's rule */
    measure(r, "rms_norm", 3, norm_call, &n);
    rudnn_buffer_destroy(b_in);
    rudnn_buffer_destroy(b_w);
}

/* ---- paged attention ----------------------------------------------------------------------------- */

typedef struct paged_state {
    rudnn_paged_plan_t plan;
    rudnn_paged_split_workspace_t ws;
    rudnn_tensor_t q, k, v, out;
} paged_state_t;

static rudnn_status_t paged_call(void *s, int first)
{
    paged_state_t *p = s;
    return rudnn_paged_attention_with_workspace(first ? NULL : p->plan, p->ws, &p->q, &p->k, &p->v, NAN, 1,
                                                &p->out);
}

static void bench_paged(const run_t *r)
{
    enum { PAGE = 16, KV = 2048, PAGES = KV / PAGE, HQ = 32, HKV = 8, D = 128 };
    int64_t len[1] = {KV}, off[2] = {0, PAGES}, sid[1] = {0}, pos[1] = {KV - 1};
    int32_t tab[PAGES];
    for (int i = 0; i < PAGES; i++)
        tab[i] = i;
    const rudnn_paged_schedule_t sched = {PAGE, PAGES, 1, len, off, tab, 1, sid, pos};
    rudnn_paged_host_plan_t host;
    paged_state_t p;
    CHECK(rudnn_paged_host_plan_create(&sched, &host));
    CHECK(rudnn_paged_plan_create(r->q, host, &p.plan));
    rudnn_paged_host_plan_destroy(host);
    CHECK(rudnn_paged_split_workspace_create(r->q, 1, HQ, D, 0, &p.ws));
    rudnn_buffer_t bq, bk, bv, bo;
    const size_t cache = (size_t)PAGES * PAGE * HKV * D * 2;
    CHECK(rudnn_buffer_create(r->ctx, HQ * D * 2, &bq));
    CHECK(rudnn_buffer_create(r->ctx, cache, &bk));
    CHECK(rudnn_buffer_create(r->ctx, cache, &bv));
    CHECK(rudnn_buffer_create(r->ctx, HQ * D * 2, &bo));
    const int64_t dq[3] = {1, HQ, D}, dk[4] = {PAGES, PAGE, HKV, D};
    CHECK(rudnn_tensor_init(&p.q, bq, 0, RUDNN_BF16, 3, dq));
    CHECK(rudnn_tensor_init(&p.k, bk, 0, RUDNN_BF16, 4, dk));
    CHECK(rudnn_tensor_init(&p.v, bv, 0, RUDNN_BF16, 4, dk));
    CHECK(rudnn_tensor_init(&p.out, bo, 0, RUDNN_BF16, 3, dq));
    measure(r, "paged_attention", 4, paged_call, &p);
    rudnn_buffer_destroy(bq);
    rudnn_buffer_destroy(bk);
    rudnn_buffer_destroy(bv);
    rudnn_buffer_destroy(bo);
    rudnn_paged_split_workspace_destroy(p.ws);
    rudnn_paged_plan_destroy(p.plan);
}

int main(int argc, char **argv)
{
    const char *backend = NULL;
    int device = -1;
    run_t r = {.calls = 100000};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && !strcmp(a, "--backend"))
            backend = v;
        else if (v && !strcmp(a, "--device"))
            device = atoi(v);
        else if (v && !strcmp(a, "--calls") && atol(v) > 0)
            r.calls = atol(v);
        else {
            fprintf(stderr, "usage: " PROG " [--backend NAME] [--device N] [--calls N]\n");
            return 2;
        }
        i++;
    }
    rudnn_context_options_t opts = {.backend = backend, .device = device};
    CHECK(rudnn_context_create(&r.ctx, &opts));
    CHECK(rudnn_queue_create(r.ctx, &r.q));
    CHECK(rudnn_context_device_info(r.ctx, &r.dev));
    bench_norm(&r);
    bench_paged(&r);
    CHECK(rudnn_queue_synchronize(r.q));
    rudnn_queue_destroy(r.q);
    rudnn_context_destroy(r.ctx);
    return 0;
}
