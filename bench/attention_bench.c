/* rudnn-bench-attention: times the attention forward on issue 20's cases and prints one JSON
 * line per (case, strategy), beside a device-to-device copy line ("op":"copy") measured first:
 *
 *   {"op":"attention","case","b","hq","hkv","sq","skv","d","dv","causal","dtype","backend",
 *    "device","strategy","kernel","resolved","median_ms","min_ms","tflops","gbps","copy_gbps",
 *    "peak_fraction","reps","sets"}
 *
 * tflops = 2*B*Hq*Sq*Skv*(D+Dv) / time (4*B*Hq*Sq*Skv*D when D == Dv), halved when causal, as
 * the issue counts. gbps = bytes of q, k, v and out, each once, / time; peak_fraction = gbps /
 * copy_gbps. resolved: the strategy of the kernel that ran (for autotune, its winner's). A strategy answering NOT_SUPPORTED (or a case that does not fit) gives a line with
 * "status":"NOT_SUPPORTED" (or "SKIPPED") and "message" instead of the times; one that fails,
 * "status":"FAILED", the run going on and exiting 1 at the end.
 *
 * Inputs are pseudo-random (never zeros). Several independent input sets are used in turn (at
 * least 2 where they fit; more while a set is under 4x a 60 MB L2) so that no launch finds its
 * inputs in the cache; WARMUP launches (the first one tunes, for autotune), then --reps launches
 * each between two events (fewer, down to MIN_REPS, where they would take over
 * STRATEGY_BUDGET_MS: "reps" says how many); median and minimum. Diagnostics go to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "rudnn/rudnn.h"

#define PROG "rudnn-bench-attention"
#define WARMUP 3
#define DEFAULT_REPS 50
#define QUICK_REPS 5
#define L2_ROTATE_BYTES (4.0 * 60e6)
#define MAX_SETS 16
#define MIN_REPS 10
#define STRATEGY_BUDGET_MS 5000.0 /* of timed launches per (case, strategy), above MIN_REPS */
#define MEMORY_SHARE 0.85 /* of the device memory for one case's sets and workspace */

typedef struct att_case {
    const char *name;
    int64_t b, hq, hkv, sq, skv, d, dv;
    int causal;
} att_case_t;

/* Issue 20: prefill (non-causal and causal) and GQA decode (Hq 32, Hkv 8, D 128). */
static const att_case_t full_cases[] = {
    {"prefill_b4_h32_s4096_d128", 4, 32, 32, 4096, 4096, 128, 128, 0},
    {"prefill_b4_h32_s4096_d128_causal", 4, 32, 32, 4096, 4096, 128, 128, 1},
    {"prefill_b1_h32_s16384_d128", 1, 32, 32, 16384, 16384, 128, 128, 0},
    {"prefill_b1_h32_s16384_d128_causal", 1, 32, 32, 16384, 16384, 128, 128, 1},
    {"prefill_b8_h16_s2048_d64", 8, 16, 16, 2048, 2048, 64, 64, 0},
    {"prefill_b8_h16_s2048_d64_causal", 8, 16, 16, 2048, 2048, 64, 64, 1},
    {"decode_b64_skv8192", 64, 32, 8, 1, 8192, 128, 128, 0},
    {"decode_b128_skv32768", 128, 32, 8, 1, 32768, 128, 128, 0},
};
/* PoCL smoke runs: the same kinds of case, small enough for a CPU. */
static const att_case_t quick_cases[] = {
    {"quick_prefill_b1_h4_s128_d64", 1, 4, 4, 128, 128, 64, 64, 0},
    {"quick_prefill_b1_h4_s128_d64_causal", 1, 4, 4, 128, 128, 64, 64, 1},
    {"quick_decode_b2_skv512", 2, 8, 2, 1, 512, 64, 64, 0},
};

static const struct {
    const char *name;
    rudnn_attention_strategy_t value;
} strategies[] = {
    {"fallback", RUDNN_ATTENTION_FALLBACK},
    {"flash_unit", RUDNN_ATTENTION_FLASH_UNIT},
    {"flash_accelerated", RUDNN_ATTENTION_FLASH_ACCELERATED},
    {"autotune", RUDNN_ATTENTION_AUTOTUNE},
};
#define STRATEGY_COUNT ((int)(sizeof strategies / sizeof strategies[0]))

typedef struct options {
    const char *backend;
    int device;
    rudnn_dtype_t dtype;
    int use_strategy[STRATEGY_COUNT];
    const char *cases; /* comma list, NULL: all */
    int quick, reps;
    long copy_mib; /* 0: automatic */
} options_t;

typedef struct run {
    rudnn_context_t ctx;
    rudnn_queue_t q;
    rudnn_device_info_t dev;
    const options_t *o;
    bench_events_t ev;
    double copy_gbps;
    int failed; /* a strategy failed: the exit status is 1, after the other cases ran */
} run_t;

#define CHECK(call)                                                                                              \
    do {                                                                                                         \
        rudnn_status_t check_st_ = (call);                                                                       \
        if (check_st_ != RUDNN_STATUS_SUCCESS)                                                                   \
            bench_die(PROG, #call, check_st_);                                                                   \
    } while (0)


/* ---- the copy reference: what memory can move on this device, in this run ---- */

static double measure_copy(run_t *r)
{
    uint64_t bytes = r->o->copy_mib > 0 ? (uint64_t)r->o->copy_mib << 20
                     : r->dev.global_memory_bytes ? r->dev.global_memory_bytes / 8 : 256ULL << 20;
    if (!r->o->copy_mib && bytes > 2ULL << 30)
        bytes = 2ULL << 30;
    /* a CPU device (PoCL) would take seconds over a GPU-sized copy */
    int cpu = bench_is_cpu_device(&r->dev);
    if (!r->o->copy_mib && (r->o->quick || cpu) && bytes > 256ULL << 20)
        bytes = 256ULL << 20;
    bytes = bytes < 4096 ? 4096 : bytes & ~(uint64_t)4095;
    return bench_copy(&r->ev, r->ctx, r->q, &r->dev, (size_t)bytes, r->o->reps);
}

/* ---- inputs ---------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static float uniform(void) /* in [-1, 1], never exactly 0 */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    float u = (float)((rng_state >> 40) + 1) / (float)(1 << 24); /* (0, 1] */
    float x = 2.0f * u - 1.0f;
    return x != 0.0f ? x : 1.0f / (1 << 24);
}

/* Random values over a whole buffer: one fresh block of up to 32 MiB written, then copied along
 * the buffer on the device (a full host array would cost minutes for the decode cases). */
static void fill_random(run_t *r, rudnn_buffer_t b, size_t n)
{
    const size_t es = rudnn_dtype_size(r->o->dtype);
    size_t first = ((size_t)32 << 20) / es;
    first = n < first ? n : first;
    float *f = bench_xmalloc(PROG, first * sizeof *f);
    void *h = bench_xmalloc(PROG, first * es);
    for (size_t i = 0; i < first; i++)
        f[i] = uniform();
    if (r->o->dtype == RUDNN_F32)
        memcpy(h, f, first * es);
    else
        rudnn_convert_from_f32(r->o->dtype, f, h, first);
    CHECK(rudnn_buffer_write(r->q, b, 0, h, first * es));
    for (size_t done = first; done < n; done += first) {
        size_t chunk = n - done < first ? n - done : first;
        CHECK(rudnn_buffer_copy(r->q, b, done * es, b, 0, chunk * es));
    }
    free(f);
    free(h);
}

typedef struct set {
    rudnn_buffer_t buf[4];
    rudnn_tensor_t q, k, v, out;
} set_t;

static void set_create(run_t *r, const att_case_t *c, set_t *s)
{
    const int64_t dims[4][4] = {{c->b, c->hq, c->sq, c->d}, {c->b, c->hkv, c->skv, c->d},
                                {c->b, c->hkv, c->skv, c->dv}, {c->b, c->hq, c->sq, c->dv}};
    rudnn_tensor_t *t[4] = {&s->q, &s->k, &s->v, &s->out};
    for (int i = 0; i < 4; i++) {
        size_t n = (size_t)(dims[i][0] * dims[i][1] * dims[i][2] * dims[i][3]);
        CHECK(rudnn_buffer_create(r->ctx, n * rudnn_dtype_size(r->o->dtype), &s->buf[i]));
        CHECK(rudnn_tensor_init(t[i], s->buf[i], 0, r->o->dtype, 4, dims[i]));
        if (i < 3)
            fill_random(r, s->buf[i], n);
        else /* poison out with NaN bytes: never a zero page */
            CHECK(rudnn_buffer_fill(r->q, s->buf[i], 0, 0xff, n * rudnn_dtype_size(r->o->dtype)));
    }
}

static void set_destroy(set_t *s)
{
    for (int i = 0; i < 4; i++)
        rudnn_buffer_destroy(s->buf[i]);
}

/* ---- one case -------------------------------------------------------------- */

static double case_bytes(const att_case_t *c, size_t es)
{
    return (double)es * ((double)c->b * c->hq * c->sq * (c->d + c->dv) + (double)c->b * c->hkv * c->skv * (c->d + c->dv));
}

static double case_flops(const att_case_t *c)
{
    double f = 2.0 * c->b * c->hq * (double)c->sq * (double)c->skv * (double)(c->d + c->dv);
    return c->causal ? f / 2 : f;
}

static void head(const run_t *r, const att_case_t *c, const char *strategy)
{
    printf("{\"op\":\"attention\",\"case\":");
    bench_json_string(c->name);
    printf(",\"b\":%lld,\"hq\":%lld,\"hkv\":%lld,\"sq\":%lld,\"skv\":%lld,\"d\":%lld,\"dv\":%lld,\"causal\":%s",
           (long long)c->b, (long long)c->hq, (long long)c->hkv, (long long)c->sq, (long long)c->skv,
           (long long)c->d, (long long)c->dv, c->causal ? "true" : "false");
    printf(",\"dtype\":\"%s\",\"backend\":", rudnn_dtype_name(r->o->dtype));
    bench_json_string(r->dev.backend);
    printf(",\"device\":");
    bench_json_string(r->dev.name);
    printf(",\"strategy\":\"%s\"", strategy);
}

static void print_status(const run_t *r, const att_case_t *c, const char *strategy, const char *status,
                         const char *message)
{
    head(r, c, strategy);
    printf(",\"status\":\"%s\",\"message\":", status);
    bench_json_string(message);
    printf("}\n");
    fflush(stdout);
}

/* A launch that did not succeed: NOT_SUPPORTED on the first call is the backend's answer (no such
 * kernel, or not for this case); anything else is a failure, reported on its line so that the
 * other cases and strategies still run. */
static void fail_strategy(run_t *r, const att_case_t *c, const char *sname, rudnn_status_t rc, int first,
                          rudnn_buffer_t ws)
{
    char why[RUDNN_MESSAGE_MAX + 64];
    if (first && rc == RUDNN_STATUS_NOT_SUPPORTED) {
        print_status(r, c, sname, "NOT_SUPPORTED", rudnn_last_error());
    } else {
        snprintf(why, sizeof why, "%s: %s", rudnn_status_string(rc), rudnn_last_error());
        print_status(r, c, sname, "FAILED", why);
        fprintf(stderr, "rudnn-bench-attention: %s %s: %s\n", c->name, sname, why);
        r->failed = 1;
    }
    (void)rudnn_queue_synchronize(r->q);
    rudnn_buffer_destroy(ws);
}

/* Times one strategy over the case's sets. The workspace (fallback's scores) is allocated here,
 * once, outside the queue's pool, so it is gone before the next case. */
static void time_strategy(run_t *r, const att_case_t *c, int si, set_t *sets, int nsets, size_t ws_bytes)
{
    const char *sname = strategies[si].name;
    rudnn_attention_strategy_t st = strategies[si].value;
    rudnn_attention_options_t opt;
    rudnn_attention_options_init(&opt);
    opt.causal = c->causal;
    rudnn_buffer_t ws = NULL;
    if (st == RUDNN_ATTENTION_AUTOTUNE)
        ws_bytes = 0; /* the queue's pool, as a caller would: tuning may pick a kernel needing more */
    if (ws_bytes)
        CHECK(rudnn_buffer_create(r->ctx, ws_bytes, &ws));
    int warmup = nsets > WARMUP ? nsets : WARMUP;
    float last_ms = 0;
    for (int i = 0; i < warmup; i++) {
        set_t *s = &sets[i % nsets];
        if (i == warmup - 1)
            CHECK(rudnn_event_record(r->ev.start[0], r->q));
        rudnn_status_t rc = rudnn_attention(r->q, &s->q, &s->k, &s->v, NULL, NULL, &opt, st, ws, ws_bytes, &s->out, NULL);
        if (rc != RUDNN_STATUS_SUCCESS) {
            fail_strategy(r, c, sname, rc, i == 0, ws);
            return;
        }
        if (i == warmup - 1) {
            CHECK(rudnn_event_record(r->ev.end[0], r->q));
            CHECK(rudnn_event_elapsed_ms(r->ev.start[0], r->ev.end[0], &last_ms));
        }
    }
    CHECK(rudnn_queue_synchronize(r->q));
    /* slow strategies (fallback at S 16384) get fewer reps, never under MIN_REPS, so that the
     * whole run fits the GPU machine's time per call */
    int reps = r->o->reps;
    if (last_ms > 0 && reps > MIN_REPS && reps * last_ms > STRATEGY_BUDGET_MS)
        reps = STRATEGY_BUDGET_MS / last_ms > MIN_REPS ? (int)(STRATEGY_BUDGET_MS / last_ms) : MIN_REPS;
    for (int i = 0; i < reps; i++) {
        set_t *s = &sets[i % nsets];
        CHECK(rudnn_event_record(r->ev.start[i], r->q));
        rudnn_status_t rc = rudnn_attention(r->q, &s->q, &s->k, &s->v, NULL, NULL, &opt, st, ws, ws_bytes, &s->out, NULL);
        if (rc != RUDNN_STATUS_SUCCESS) {
            fail_strategy(r, c, sname, rc, 0, ws);
            return;
        }
        CHECK(rudnn_event_record(r->ev.end[i], r->q));
    }
    const char *kernel = rudnn_last_kernel();
    char kernel_copy[128];
    snprintf(kernel_copy, sizeof kernel_copy, "%s", kernel ? kernel : "");
    /* the strategy of what ran: autotune's winner may be FlashBlackboxAccelerated's kernel */
    const char *resolved = sname;
    rudnn_attention_choice_t choice;
    if (rudnn_attention_resolve(r->q, &sets[0].q, &sets[0].k, &sets[0].v, NULL, NULL, &opt, st, &sets[0].out, NULL,
                                &choice) == RUDNN_STATUS_SUCCESS)
        for (int k = 0; k < STRATEGY_COUNT; k++)
            if (strategies[k].value == choice.strategy && strategies[k].value != RUDNN_ATTENTION_AUTOTUNE)
                resolved = strategies[k].name;
    double median, minimum;
    bench_stats(&r->ev, reps, &median, &minimum);
    rudnn_buffer_destroy(ws);
    double secs = median * 1e-3;
    double gbps = secs > 0 ? case_bytes(c, rudnn_dtype_size(r->o->dtype)) / secs / 1e9 : 0;
    head(r, c, sname);
    printf(",\"kernel\":");
    bench_json_string(kernel_copy);
    printf(",\"resolved\":\"%s\"", resolved);
    printf(",\"median_ms\":%.6f,\"min_ms\":%.6f,\"tflops\":%.3f,\"gbps\":%.2f,\"copy_gbps\":%.2f,"
           "\"peak_fraction\":%.4f,\"reps\":%d,\"sets\":%d}\n",
           median, minimum, secs > 0 ? case_flops(c) / secs / 1e12 : 0.0, gbps, r->copy_gbps,
           r->copy_gbps > 0 ? gbps / r->copy_gbps : 0.0, reps, nsets);
    fflush(stdout);
}

static void run_case(run_t *r, const att_case_t *c)
{
    const double set_bytes = case_bytes(c, rudnn_dtype_size(r->o->dtype));
    const double budget = r->dev.global_memory_bytes ? MEMORY_SHARE * (double)r->dev.global_memory_bytes : 1e300;
    if (set_bytes > budget) {
        for (int si = 0; si < STRATEGY_COUNT; si++)
            if (r->o->use_strategy[si])
                print_status(r, c, strategies[si].name, "SKIPPED", "the inputs do not fit in device memory");
        return;
    }
    set_t first;
    set_create(r, c, &first);
    /* each strategy's workspace (the size query checks the tensors against their buffers) */
    size_t ws[STRATEGY_COUNT] = {0}, ws_max = 0;
    rudnn_attention_options_t opt;
    rudnn_attention_options_init(&opt);
    opt.causal = c->causal;
    for (int si = 0; si < STRATEGY_COUNT; si++) {
        if (!r->o->use_strategy[si])
            continue;
        if (rudnn_attention_workspace_size(r->q, &first.q, &first.k, &first.v, NULL, NULL, &opt,
                                           strategies[si].value, &first.out, NULL, &ws[si]) != RUDNN_STATUS_SUCCESS)
            ws[si] = 0; /* NOT_SUPPORTED and the like: the launch reports it */
        if (set_bytes + (double)ws[si] <= budget && ws[si] > ws_max)
            ws_max = ws[si];
    }
    int nsets = 2;
    while (nsets < MAX_SETS && nsets * set_bytes < L2_ROTATE_BYTES)
        nsets++;
    if (nsets > r->o->reps)
        nsets = r->o->reps > 1 ? r->o->reps : 1;
    while (nsets > 1 && nsets * set_bytes + (double)ws_max > budget)
        nsets--;
    set_t *sets = bench_xmalloc(PROG, (size_t)nsets * sizeof *sets);
    sets[0] = first;
    for (int k = 1; k < nsets; k++)
        set_create(r, c, &sets[k]);
    CHECK(rudnn_queue_synchronize(r->q));
    for (int si = 0; si < STRATEGY_COUNT; si++) {
        if (!r->o->use_strategy[si])
            continue;
        if (nsets * set_bytes + (double)ws[si] > budget) {
            char why[160];
            snprintf(why, sizeof why, "the workspace of %.0f MiB does not fit beside the inputs",
                     (double)ws[si] / 1048576.0);
            print_status(r, c, strategies[si].name, "SKIPPED", why);
            continue;
        }
        time_strategy(r, c, si, sets, nsets, ws[si]);
    }
    for (int k = 0; k < nsets; k++)
        set_destroy(&sets[k]);
    free(sets);
}

/* ---- options --------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f, "usage: rudnn-bench-attention [--backend NAME] [--device N] [--dtype bf16|f16|f32]\n"
               "         [--strategy autotune|fallback|flash_unit|flash_accelerated|all[,...]]\n"
               "         [--case NAME[,NAME]] [--quick] [--reps N] [--copy-mib N]\n"
               "cases:");
    for (size_t i = 0; i < sizeof full_cases / sizeof full_cases[0]; i++)
        fprintf(f, " %s", full_cases[i].name);
    fprintf(f, "\n--quick: tiny cases for CPU smoke runs:");
    for (size_t i = 0; i < sizeof quick_cases / sizeof quick_cases[0]; i++)
        fprintf(f, " %s", quick_cases[i].name);
    fprintf(f, "\n");
}

static void parse(int argc, char **argv, options_t *o)
{
    memset(o, 0, sizeof *o);
    o->device = -1;
    o->dtype = RUDNN_BF16;
    o->reps = -1;
    const char *strat = "autotune";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            o->quick = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (!v) {
            usage(stderr);
            exit(2);
        }
        i++;
        if (!strcmp(a, "--backend"))
            o->backend = v;
        else if (!strcmp(a, "--device"))
            o->device = atoi(v);
        else if (!strcmp(a, "--dtype") && (!strcmp(v, "bf16") || !strcmp(v, "f16") || !strcmp(v, "f32")))
            o->dtype = !strcmp(v, "bf16") ? RUDNN_BF16 : !strcmp(v, "f16") ? RUDNN_F16 : RUDNN_F32;
        else if (!strcmp(a, "--strategy"))
            strat = v;
        else if (!strcmp(a, "--case"))
            o->cases = v;
        else if (!strcmp(a, "--reps") && atoi(v) > 0)
            o->reps = atoi(v);
        else if (!strcmp(a, "--copy-mib") && atol(v) > 0)
            o->copy_mib = atol(v);
        else {
            fprintf(stderr, "rudnn-bench-attention: bad option %s %s\n", a, v);
            usage(stderr);
            exit(2);
        }
    }
    int any = 0;
    for (int si = 0; si < STRATEGY_COUNT; si++)
        any += o->use_strategy[si] = bench_in_list(strat, "all") || bench_in_list(strat, strategies[si].name);
    if (!any) {
        fprintf(stderr, "rudnn-bench-attention: unknown strategy '%s'\n", strat);
        exit(2);
    }
    if (o->reps < 0)
        o->reps = o->quick ? QUICK_REPS : DEFAULT_REPS;
}

int main(int argc, char **argv)
{
    options_t o;
    parse(argc, argv, &o);
    const att_case_t *cases = o.quick ? quick_cases : full_cases;
    size_t ncases = o.quick ? sizeof quick_cases / sizeof quick_cases[0] : sizeof full_cases / sizeof full_cases[0];
    /* every named case must exist: a typo must not give an empty, "passing" run */
    for (const char *p = o.cases; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p), i;
        for (i = 0; i < ncases && !(strlen(cases[i].name) == len && !strncmp(cases[i].name, p, len)); i++)
            ;
        if (i == ncases) {
            fprintf(stderr, "rudnn-bench-attention: unknown case '%.*s'%s\n", (int)len, p,
                    o.quick ? " (with --quick)" : "");
            usage(stderr);
            return 2;
        }
        p = e ? e + 1 : NULL;
    }

    run_t r;
    memset(&r, 0, sizeof r);
    r.o = &o;
    rudnn_context_options_t copts;
    memset(&copts, 0, sizeof copts);
    copts.backend = o.backend;
    copts.device = o.device;
    CHECK(rudnn_context_create(&r.ctx, &copts));
    CHECK(rudnn_context_device_info(r.ctx, &r.dev));
    CHECK(rudnn_queue_create(r.ctx, &r.q));
    fprintf(stderr, "rudnn-bench-attention: %s device %d: %s, %.1f GiB\n", r.dev.backend, r.dev.index, r.dev.name,
            (double)r.dev.global_memory_bytes / (1 << 30));
    bench_events_create(&r.ev, PROG, r.ctx, o.reps);
    r.copy_gbps = measure_copy(&r);
    for (size_t i = 0; i < ncases; i++)
        if (!o.cases || bench_in_list(o.cases, cases[i].name))
            run_case(&r, &cases[i]);
    bench_events_destroy(&r.ev);
    rudnn_queue_destroy(r.q);
    rudnn_context_destroy(r.ctx);
    return r.failed;
}
