/* rudnn-bench-paged: times paged attention and MLA (rudnn/paged_attention.h) in BF16 on issue 24's
 * cases and prints one JSON line per case, beside a device-to-device copy line ("op":"copy")
 * measured first:
 *
 *   {"op":"paged_attention"|"paged_mla","case","kind","sequences","queries","page_size","max_kv",
 *    "kv_tokens","causal","dtype","backend","device", attention: "hq","hkv","d","dv"; MLA: "h","r",
 *    "p", then "kernel","splits","median_ms","min_ms","flops","tflops","bytes","cache_bytes","gbps",
 *    "copy_gbps","copy_fraction","size_copy_bytes","size_copy_gbps","size_copy_fraction","reps","sets",
 *    "host_plan_ms"}, and for a call under GRAPH_BELOW_MS on the cuda backend "graph_ms",
 *    "graph_copy_fraction" (below; elsewhere "graph_ms":null and "graph_why")
 *
 * Cases (causal, BF16, random values in [-1, 1); the physical pages of the caches are a random
 * permutation (seeded by the case's name), handed to the sequences in turn, so that every history
 * really reads scattered pages):
 *   decode_p{16,64}_b{1,8,64,128}_kv{2,8,32,128}k   Hq 32, Hkv 8, D = Dv = 128; every sequence holds
 *       kv tokens and asks one query at position kv - 1. A case whose K + V cache exceeds
 *       --max-cache-gib (default 24) prints "status":"SKIPPED" and says so.
 *   prefill_p16_n8_s2048, prefill_p16_mixed_t16384  Hq 32, Hkv 8, D 128, page 16; varlen, 16384
 *       tokens in all (8 sequences of 2048, or the 12 mixed lengths below), fresh histories: each
 *       sequence's queries at positions 0 .. len - 1 over its own len keys.
 *   mla_decode_b{64,128}_h{16,128}_t{1,2}           R 512, P 64, page 64, kv 8192; t queries per
 *       sequence at the last t positions (H 16 only with t 1). scale 1/sqrt(192): DeepSeek-V3's
 *       QK scale (128 + 64 dims before absorption).
 * --quick runs tiny cases of the same kinds (a smoke run, e.g. on PoCL).
 *
 * Every call goes through the _with_workspace form with a split workspace of splits 0 (the plan
 * chooses the count per call; --splits S gives every call S, to compare counts; "splits" is
 * rudnn_paged_split_count's answer, "kernel" rudnn_last_kernel() after the timed calls: the last
 * kernel of a call, the merge where one runs).
 *
 * Counts. pairs = visible (query, key) pairs, sum over queries of min(len, pos + 1).
 *   attention: flops = 2 Hq pairs (D + Dv)               (4 Hq pairs D here)
 *   MLA:       flops = 2 H pairs (R + P) + 2 H pairs R    (scores, then the latent as values)
 *   bytes = cache_bytes (every key row of every history once: K and V, or latent and kp) + q (+ qp)
 *           + out, each once; the page tables are not counted.
 *   gbps = bytes / median; copy_fraction = gbps / copy_gbps, the copy line's figure (min(2 GiB,
 *   memory / 8) copied, 2 bytes / time: read + write, bench_util.h); size_copy_fraction = gbps /
 *   size_copy_gbps, a copy of the case's own byte count (size_copy_bytes: less where memory leaves
 *   less room beside the sets; null where none) timed right after it, from its input sets in turn
 *   into one other buffer (counted the same way: 2 bytes / time). Issue 24's targets read
 *   copy_fraction. graph_ms: GRAPH_CALLS calls (over the sets in turn) captured in one CUDA graph,
 *   its replays timed (--reps, each between two events) and divided by GRAPH_CALLS: the call
 *   without the launch gap and host work that each event-bracketed call pays, as a serving step
 *   replays it (launch-bound calls only: B 1 KV 2k, bench_graph.h); graph_copy_fraction = bytes /
 *   graph_ms over copy_gbps.
 *
 *   rudnn-bench-paged [--backend NAME] [--device N] [--reps N] [--case NAME[,NAME]] [--quick]
 *                     [--max-cache-gib G] [--splits S] [--host-plan]
 * Inputs: when one set (caches, q, out) is under 4x a 60 MB L2, several sets are used in turn
 * ("sets"), so that no call finds its cache in L2. WARMUP calls (at least one per set), then --reps
 * calls each between two events; median and minimum. A case answering NOT_SUPPORTED prints
 * "status":"NOT_SUPPORTED" and the message; any other failure "status":"FAILED", the run going on
 * and exiting 1 at the end. Diagnostics go to stderr.
 *
 * host_plan_ms: rudnn_paged_host_plan_create's time on the host for the case's schedule (its page
 * tables a random permutation, as above), the fastest of HOST_PLAN_BUILDS builds: the per-step host
 * cost a serving engine pays before the upload. --host-plan times that alone for every selected case
 * (no device, no cache-size limit) and prints {"op":"paged_host_plan","case","sequences","queries",
 * "page_size","table_entries","host_plan_ms"} a case. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_graph.h"
#include "bench_util.h"
#include "rudnn/rudnn.h"

#define PROG "rudnn-bench-paged"
#define WARMUP 3
#define HOST_PLAN_BUILDS 5
#define DEFAULT_REPS 20
#define MAX_REPS 1024
#define L2_ROTATE_BYTES (4.0 * 60e6)
#define MAX_SETS 16
#define MEMORY_SHARE 0.85 /* of the device memory for one case's sets and the copy's target */
#define DEFAULT_MAX_CACHE_GIB 24.0
#define REGION_ALIGN 256 /* each tensor's offset in its set's buffer */
#define MLA_SCALE 0.07216878364870323 /* 1/sqrt(192) */
#define MAX_CASES 64
#define GRAPH_BELOW_MS 0.05 /* calls this short are launch-bound: timed from a graph as well */
#define GRAPH_CALLS 32      /* calls a graph (the sets in turn) */

#define CHECK(call)                                                                                              \
    do {                                                                                                         \
        rudnn_status_t check_st_ = (call);                                                                       \
        if (check_st_ != RUDNN_STATUS_SUCCESS)                                                                   \
            bench_die(PROG, #call, check_st_);                                                                   \
    } while (0)

typedef enum { KIND_DECODE, KIND_PREFILL, KIND_MLA } pa_kind_t;

typedef struct pa_case {
    char name[64];
    pa_kind_t kind;
    int64_t hq, hkv, d, dv, rope; /* MLA: hq = H, hkv = 1, d = dv = R, rope = P; attention: rope 0 */
    int64_t page, sequences;
    const int64_t *lengths; /* prefill: each sequence's tokens (all of them queries); NULL: kv each */
    int64_t kv, tq;         /* decode, MLA: every sequence's length, its queries (the last tq positions) */
} pa_case_t;

/* prefill: 12 lengths of 16384 tokens in all, two of them not page multiples; torch_paged.py has the
 * same list */
static const int64_t prefill_mixed[] = {4096, 3072, 2560, 2048, 1536, 1024, 768, 512, 384, 256, 100, 28};
static const int64_t prefill_even[] = {2048, 2048, 2048, 2048, 2048, 2048, 2048, 2048};
static const int64_t quick_mixed[] = {37, 64, 3, 24};

typedef struct run {
    rudnn_context_t ctx;
    rudnn_queue_t q;
    rudnn_device_info_t dev;
    int reps;
    double max_cache_gib;
    int splits; /* --splits: the split workspaces' count (0: the plan's choice a call) */
    bench_events_t ev;
    double copy_gbps;
    uint16_t *block; /* random BF16 values every buffer is filled from */
    size_t block_bytes;
    int failed;
} run_t;

/* ---- cases ------------------------------------------------------------------------------------- */

static int64_t case_len(const pa_case_t *c, int64_t s) { return c->lengths ? c->lengths[s] : c->kv; }
static int64_t case_nq(const pa_case_t *c, int64_t s) { return c->lengths ? c->lengths[s] : c->tq; }

static size_t add_case(pa_case_t *list, size_t n, pa_case_t c)
{
    if (n == MAX_CASES) {
        fprintf(stderr, PROG ": more than %d cases\n", MAX_CASES);
        exit(1);
    }
    list[n] = c;
    return n + 1;
}

static pa_case_t decode_case(int64_t page, int64_t b, int64_t kv, int64_t hq, int64_t hkv, int64_t d, int quick)
{
    pa_case_t c = {.kind = KIND_DECODE, .hq = hq, .hkv = hkv, .d = d, .dv = d, .page = page, .sequences = b,
                   .kv = kv, .tq = 1};
    if (quick)
        snprintf(c.name, sizeof c.name, "quick_decode_p%lld_b%lld_kv%lld", (long long)page, (long long)b,
                 (long long)kv);
    else
        snprintf(c.name, sizeof c.name, "decode_p%lld_b%lld_kv%lldk", (long long)page, (long long)b,
                 (long long)(kv / 1024));
    return c;
}

static pa_case_t prefill_case(const char *name, const int64_t *lengths, int64_t n, int64_t hq, int64_t hkv, int64_t d)
{
    pa_case_t c = {.kind = KIND_PREFILL, .hq = hq, .hkv = hkv, .d = d, .dv = d, .page = 16, .sequences = n,
                   .lengths = lengths};
    snprintf(c.name, sizeof c.name, "%s", name);
    return c;
}

static pa_case_t mla_case(int64_t b, int64_t h, int64_t tq, int64_t r, int64_t p, int64_t page, int64_t kv, int quick)
{
    pa_case_t c = {.kind = KIND_MLA, .hq = h, .hkv = 1, .d = r, .dv = r, .rope = p, .page = page, .sequences = b,
                   .kv = kv, .tq = tq};
    snprintf(c.name, sizeof c.name, "%smla_decode_b%lld_h%lld_t%lld", quick ? "quick_" : "", (long long)b,
             (long long)h, (long long)tq);
    return c;
}

static size_t make_cases(pa_case_t *list, int quick)
{
    size_t n = 0;
    if (quick) {
        n = add_case(list, n, decode_case(16, 1, 1024, 4, 2, 32, 1)); /* splits above 1 */
        n = add_case(list, n, decode_case(5, 3, 100, 4, 2, 32, 1)); /* a page size not a power of two */
        n = add_case(list, n, prefill_case("quick_prefill_p16_mixed_t128", quick_mixed, 4, 4, 2, 32));
        n = add_case(list, n, mla_case(2, 4, 1, 64, 16, 16, 200, 1));
        n = add_case(list, n, mla_case(2, 4, 2, 64, 16, 16, 200, 1));
        return n;
    }
    static const int64_t pages[] = {16, 64}, batches[] = {1, 8, 64, 128}, kvs[] = {2048, 8192, 32768, 131072};
    for (size_t p = 0; p < 2; p++)
        for (size_t b = 0; b < 4; b++)
            for (size_t k = 0; k < 4; k++)
                n = add_case(list, n, decode_case(pages[p], batches[b], kvs[k], 32, 8, 128, 0));
    n = add_case(list, n, prefill_case("prefill_p16_n8_s2048", prefill_even, 8, 32, 8, 128));
    n = add_case(list, n, prefill_case("prefill_p16_mixed_t16384", prefill_mixed, 12, 32, 8, 128));
    static const int64_t mla[][3] = {{64, 16, 1},  {128, 16, 1},  {64, 128, 1},
                                     {64, 128, 2}, {128, 128, 1}, {128, 128, 2}}; /* B, H, queries a sequence */
    for (size_t i = 0; i < sizeof mla / sizeof mla[0]; i++)
        n = add_case(list, n, mla_case(mla[i][0], mla[i][1], mla[i][2], 512, 64, 64, 8192, 0));
    return n;
}

/* ---- counts ------------------------------------------------------------------------------------ */

typedef struct pa_counts {
    int64_t queries, pages, kv_tokens, max_kv;
    double pairs, flops, cache_bytes, bytes;
    size_t off[5], set_bytes; /* the set buffer: k cache | v or kp cache | q | qp | out */
} pa_counts_t;

static size_t align_up(size_t x) { return (x + REGION_ALIGN - 1) / REGION_ALIGN * REGION_ALIGN; }

static void count(const pa_case_t *c, pa_counts_t *n)
{
    memset(n, 0, sizeof *n);
    for (int64_t s = 0; s < c->sequences; s++) {
        const int64_t len = case_len(c, s), nq = case_nq(c, s);
        n->queries += nq;
        n->pages += (len + c->page - 1) / c->page;
        n->kv_tokens += len;
        n->max_kv = len > n->max_kv ? len : n->max_kv;
        /* causal: query at position len - nq + j sees len - nq + j + 1 keys */
        n->pairs += (double)nq * (double)(len - nq) + (double)nq * (double)(nq + 1) / 2;
    }
    const int mla = c->kind == KIND_MLA;
    const double es = 2, hq = (double)c->hq;
    n->flops = 2 * hq * n->pairs * (double)(c->d + c->rope + c->dv);
    const int64_t second = mla ? c->rope : c->dv; /* the second cache's width: kp or v */
    n->cache_bytes = (double)n->kv_tokens * (double)c->hkv * (double)(c->d + second) * es;
    const double q_bytes = (double)n->queries * hq * (double)(c->d + c->rope) * es;
    n->bytes = n->cache_bytes + q_bytes + (double)n->queries * hq * (double)c->dv * es;
    const size_t rows = (size_t)(n->pages * c->page), sizes[5] = {
        rows * (size_t)(c->hkv * c->d) * 2, rows * (size_t)(c->hkv * second) * 2,
        (size_t)(n->queries * c->hq * c->d) * 2, (size_t)(n->queries * c->hq * c->rope) * 2,
        (size_t)(n->queries * c->hq * c->dv) * 2};
    for (int i = 0; i < 5; i++) {
        n->off[i] = n->set_bytes;
        n->set_bytes += align_up(sizes[i]);
    }
}

/* ---- inputs ------------------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t next_random(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* The host block every buffer starts from: BF16 values in [-1, 1), never 0. */
static void make_block(run_t *r, size_t bytes)
{
    const size_t n = bytes / 2;
    r->block = bench_xmalloc(PROG, bytes);
    r->block_bytes = bytes;
    for (size_t i = 0; i < n; i++) {
        float x = (float)((next_random() >> 40) + 1) / (float)(1 << 24) * 2.0f - 1.0f;
        r->block[i] = rudnn_f32_to_bf16(x != 0.0f ? x : 1.0f / (1 << 24));
    }
}

/* The block written at the buffer's start, then doubled along it on the device (a host array of a
 * 16 GiB cache would take minutes): which keys repeat does not change what is read. */
static void fill(run_t *r, rudnn_buffer_t b, size_t bytes)
{
    size_t done = bytes < r->block_bytes ? bytes : r->block_bytes;
    CHECK(rudnn_buffer_write(r->q, b, 0, r->block, done));
    while (done < bytes) {
        const size_t n = bytes - done < done ? bytes - done : done;
        CHECK(rudnn_buffer_copy(r->q, b, done, b, 0, n));
        done += n;
    }
}

typedef struct set {
    rudnn_buffer_t buf;
    rudnn_tensor_t k, k2, q, qp, out; /* k2: v cache (attention) or kp cache (MLA) */
} set_t;

static void tensor(rudnn_tensor_t *t, rudnn_buffer_t b, size_t off, int64_t d0, int64_t d1, int64_t d2, int64_t d3,
                   int rank)
{
    const int64_t dims[4] = {d0, d1, d2, d3};
    CHECK(rudnn_tensor_init(t, b, off, RUDNN_BF16, rank, dims));
}

static void set_create(run_t *r, const pa_case_t *c, const pa_counts_t *n, set_t *s)
{
    memset(s, 0, sizeof *s);
    CHECK(rudnn_buffer_create(r->ctx, n->set_bytes, &s->buf));
    fill(r, s->buf, n->set_bytes);
    const int mla = c->kind == KIND_MLA;
    tensor(&s->k, s->buf, n->off[0], n->pages, c->page, c->hkv, c->d, 4);
    tensor(&s->k2, s->buf, n->off[1], n->pages, c->page, c->hkv, mla ? c->rope : c->dv, 4);
    tensor(&s->q, s->buf, n->off[2], n->queries, c->hq, c->d, 0, 3);
    if (mla)
        tensor(&s->qp, s->buf, n->off[3], n->queries, c->hq, c->rope, 0, 3);
    tensor(&s->out, s->buf, n->off[4], n->queries, c->hq, c->dv, 0, 3);
}

/* The schedule: a random permutation of the pages handed to the sequences in turn; each sequence's
 * queries at its last positions (prefill: all of them). */
static double host_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The case's schedule and the arrays behind it. */
typedef struct sched {
    rudnn_paged_schedule_t s;
    int64_t *lengths, *offsets, *ids, *pos;
    int32_t *tables;
} sched_t;

/* A case's own seed (FNV-1a of its name): its page permutation does not depend on which cases ran
 * before it. */
static uint64_t case_seed(const pa_case_t *c)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const char *p = c->name; *p; p++)
        h = (h ^ (uint8_t)*p) * 0x100000001b3ULL;
    return h ? h : 1;
}

static void schedule_make(const pa_case_t *c, const pa_counts_t *n, sched_t *sc)
{
    rng_state = case_seed(c);
    const int64_t N = c->sequences, Q = n->queries;
    int64_t *lengths = sc->lengths = bench_xmalloc(PROG, (size_t)N * sizeof *lengths);
    int64_t *offsets = sc->offsets = bench_xmalloc(PROG, (size_t)(N + 1) * sizeof *offsets);
    int32_t *tables = sc->tables = bench_xmalloc(PROG, (size_t)n->pages * sizeof *tables);
    int64_t *ids = sc->ids = bench_xmalloc(PROG, (size_t)(Q ? Q : 1) * sizeof *ids);
    int64_t *pos = sc->pos = bench_xmalloc(PROG, (size_t)(Q ? Q : 1) * sizeof *pos);
    for (int64_t i = 0; i < n->pages; i++)
        tables[i] = (int32_t)i;
    for (int64_t i = n->pages - 1; i > 0; i--) {
        const int64_t j = (int64_t)(next_random() % (uint64_t)(i + 1));
        const int32_t t = tables[i];
        tables[i] = tables[j], tables[j] = t;
    }
    offsets[0] = 0;
    int64_t qi = 0;
    for (int64_t s = 0; s < N; s++) {
        const int64_t len = case_len(c, s), nq = case_nq(c, s);
        lengths[s] = len;
        offsets[s + 1] = offsets[s] + (len + c->page - 1) / c->page;
        for (int64_t j = 0; j < nq; j++, qi++)
            ids[qi] = s, pos[qi] = len - nq + j;
    }
    sc->s = (rudnn_paged_schedule_t){.page_size = c->page, .pages = n->pages, .sequences = N, .lengths = lengths,
                                     .table_offsets = offsets, .tables = tables, .queries = Q, .sequence_ids = ids,
                                     .positions = pos};
}

static void schedule_free(sched_t *sc)
{
    free(sc->lengths);
    free(sc->offsets);
    free(sc->tables);
    free(sc->ids);
    free(sc->pos);
}

/* The host plan of s; *ms: the fastest of HOST_PLAN_BUILDS builds. */
static rudnn_paged_host_plan_t host_plan_timed(const rudnn_paged_schedule_t *s, double *ms)
{
    rudnn_paged_host_plan_t host = NULL;
    for (int i = 0; i < HOST_PLAN_BUILDS; i++) {
        if (host)
            rudnn_paged_host_plan_destroy(host);
        const double t0 = host_seconds();
        CHECK(rudnn_paged_host_plan_create(s, &host));
        const double t = 1e3 * (host_seconds() - t0);
        *ms = i == 0 || t < *ms ? t : *ms;
    }
    return host;
}

/* The case's device plan; *host_ms as host_plan_timed's. */
static rudnn_paged_plan_t plan_create(run_t *r, const pa_case_t *c, const pa_counts_t *n, double *host_ms)
{
    sched_t sc;
    schedule_make(c, n, &sc);
    rudnn_paged_host_plan_t host = host_plan_timed(&sc.s, host_ms);
    rudnn_paged_plan_t plan;
    CHECK(rudnn_paged_plan_create(r->q, host, &plan));
    rudnn_paged_host_plan_destroy(host);
    schedule_free(&sc);
    return plan;
}

/* --host-plan: the host plan's time alone (no device). */
static void host_plan_case(const pa_case_t *c)
{
    pa_counts_t n;
    count(c, &n);
    sched_t sc;
    schedule_make(c, &n, &sc);
    double ms = 0;
    rudnn_paged_host_plan_destroy(host_plan_timed(&sc.s, &ms));
    schedule_free(&sc);
    printf("{\"op\":\"paged_host_plan\",\"case\":");
    bench_json_string(c->name);
    printf(",\"sequences\":%lld,\"queries\":%lld,\"page_size\":%lld,\"table_entries\":%lld,\"host_plan_ms\":%.4f}\n",
           (long long)c->sequences, (long long)n.queries, (long long)c->page, (long long)n.pages, ms);
    fflush(stdout);
}

/* ---- output ------------------------------------------------------------------------------------ */

static void head(const run_t *r, const pa_case_t *c, const pa_counts_t *n)
{
    static const char *const kinds[] = {"decode", "prefill", "mla_decode"};
    printf("{\"op\":\"%s\",\"case\":", c->kind == KIND_MLA ? "paged_mla" : "paged_attention");
    bench_json_string(c->name);
    printf(",\"kind\":\"%s\",\"sequences\":%lld,\"queries\":%lld,\"page_size\":%lld,\"max_kv\":%lld,"
           "\"kv_tokens\":%lld,\"causal\":true",
           kinds[c->kind], (long long)c->sequences, (long long)n->queries, (long long)c->page, (long long)n->max_kv,
           (long long)n->kv_tokens);
    if (c->kind == KIND_MLA)
        printf(",\"h\":%lld,\"r\":%lld,\"p\":%lld", (long long)c->hq, (long long)c->d, (long long)c->rope);
    else
        printf(",\"hq\":%lld,\"hkv\":%lld,\"d\":%lld,\"dv\":%lld", (long long)c->hq, (long long)c->hkv,
               (long long)c->d, (long long)c->dv);
    printf(",\"dtype\":\"bf16\",\"backend\":");
    bench_json_string(r->dev.backend);
    printf(",\"device\":");
    bench_json_string(r->dev.name);
}

static void print_status(const run_t *r, const pa_case_t *c, const pa_counts_t *n, const char *status,
                         const char *message)
{
    head(r, c, n);
    printf(",\"status\":\"%s\",\"message\":", status);
    bench_json_string(message);
    printf("}\n");
    fflush(stdout);
}

/* ---- one case ---------------------------------------------------------------------------------- */

typedef struct pa_call {
    const pa_case_t *c;
    rudnn_paged_plan_t plan;
    rudnn_paged_split_workspace_t ws;
    set_t *sets;
    int nsets;
    float scale;
} pa_call_t;

static rudnn_status_t call(const pa_call_t *k, int i)
{
    const set_t *s = &k->sets[i % k->nsets];
    if (k->c->kind == KIND_MLA)
        return rudnn_paged_mla_with_workspace(k->plan, k->ws, &s->q, &s->qp, &s->k, &s->k2, k->scale, 1, &s->out);
    return rudnn_paged_attention_with_workspace(k->plan, k->ws, &s->q, &s->k, &s->k2, k->scale, 1, &s->out);
}

/* bench_graph_time's call: the i-th call of a captured step. */
static rudnn_status_t graph_call(void *arg, int i)
{
    return call((const pa_call_t *)arg, i);
}

/* Warm-up and timed calls: 0 with the times and the kernel, or the failing call's status. */
static rudnn_status_t time_calls(run_t *r, const pa_call_t *k, double *median, double *minimum, char *kernel,
                                 size_t kernel_cap, int *first_failed)
{
    const int warmup = k->nsets > WARMUP ? k->nsets : WARMUP;
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    *first_failed = 0;
    for (int i = 0; i < warmup && !st; i++) {
        st = call(k, i);
        *first_failed = st && i == 0;
    }
    if (!st)
        st = rudnn_queue_synchronize(r->q);
    for (int i = 0; i < r->reps && !st; i++) {
        CHECK(rudnn_event_record(r->ev.start[i], r->q));
        st = call(k, i);
        CHECK(rudnn_event_record(r->ev.end[i], r->q));
    }
    if (st)
        return st;
    snprintf(kernel, kernel_cap, "%s", rudnn_last_kernel());
    bench_stats(&r->ev, r->reps, median, minimum);
    return RUDNN_STATUS_SUCCESS;
}

/* A copy of the case's byte count, from its sets in turn into dst: 2 bytes / median, in GB/s. */
static double size_copy(run_t *r, const pa_call_t *k, rudnn_buffer_t dst, size_t bytes)
{
    for (int i = 0; i < WARMUP; i++)
        CHECK(rudnn_buffer_copy(r->q, dst, 0, k->sets[i % k->nsets].buf, 0, bytes));
    for (int i = 0; i < r->reps; i++) {
        CHECK(rudnn_event_record(r->ev.start[i], r->q));
        CHECK(rudnn_buffer_copy(r->q, dst, 0, k->sets[i % k->nsets].buf, 0, bytes));
        CHECK(rudnn_event_record(r->ev.end[i], r->q));
    }
    double median, minimum;
    bench_stats(&r->ev, r->reps, &median, &minimum);
    return 2.0 * (double)bytes / (median * 1e6);
}

static void run_case(run_t *r, const pa_case_t *c)
{
    pa_counts_t n;
    count(c, &n);
    char why[RUDNN_MESSAGE_MAX + 64];
    const double gib = n.cache_bytes / (double)(1ULL << 30);
    if (gib > r->max_cache_gib) {
        snprintf(why, sizeof why, "the %s cache of %.1f GiB exceeds --max-cache-gib %g",
                 c->kind == KIND_MLA ? "latent + kp" : "K + V", gib, r->max_cache_gib);
        print_status(r, c, &n, "SKIPPED", why);
        return;
    }
    const double budget = r->dev.global_memory_bytes ? MEMORY_SHARE * (double)r->dev.global_memory_bytes : 1e300;
    const double set = (double)n.set_bytes;
    int nsets = 1;
    while (nsets < MAX_SETS && nsets * set < L2_ROTATE_BYTES)
        nsets++;
    while (nsets > 1 && nsets * set + n.bytes > budget)
        nsets--;
    if (set > budget) {
        snprintf(why, sizeof why, "one set of %.1f GiB does not fit in device memory", set / (double)(1ULL << 30));
        print_status(r, c, &n, "SKIPPED", why);
        return;
    }
    /* the size-matched copy: the case's bytes, or what memory leaves beside the sets (a larger copy
     * runs at the same rate) */
    const size_t copy_bytes = nsets * set + n.bytes <= budget ? (size_t)n.bytes
                                                              : (size_t)(budget - nsets * set) & ~(size_t)4095;
    pa_call_t k = {.c = c, .nsets = nsets,
                   .scale = c->kind == KIND_MLA ? (float)MLA_SCALE : (float)(1.0 / sqrt((double)c->d))};
    double host_ms = 0;
    k.plan = plan_create(r, c, &n, &host_ms);
    k.sets = bench_xmalloc(PROG, (size_t)nsets * sizeof *k.sets);
    for (int i = 0; i < nsets; i++)
        set_create(r, c, &n, &k.sets[i]);
    CHECK(rudnn_paged_split_workspace_create(r->q, n.queries, c->hq, c->dv, r->splits, &k.ws));
    int splits = 0;
    CHECK(rudnn_paged_split_count(k.plan, k.ws, c->hq, c->hkv, &splits));
    CHECK(rudnn_queue_synchronize(r->q));

    double median = 0, minimum = 0;
    char kernel[128] = "";
    int first_failed = 0;
    rudnn_status_t st = time_calls(r, &k, &median, &minimum, kernel, sizeof kernel, &first_failed);
    if (st) {
        const int unsupported = first_failed && st == RUDNN_STATUS_NOT_SUPPORTED;
        snprintf(why, sizeof why, "%s: %s", rudnn_status_string(st), rudnn_last_error());
        print_status(r, c, &n, unsupported ? "NOT_SUPPORTED" : "FAILED", unsupported ? rudnn_last_error() : why);
        if (!unsupported) {
            fprintf(stderr, PROG ": %s: %s\n", c->name, why);
            r->failed = 1;
        }
        (void)rudnn_queue_synchronize(r->q);
    } else {
        double size_gbps = 0;
        if (copy_bytes) {
            rudnn_buffer_t dst;
            CHECK(rudnn_buffer_create(r->ctx, copy_bytes, &dst));
            size_gbps = size_copy(r, &k, dst, copy_bytes);
            rudnn_buffer_destroy(dst);
        }
        const double secs = median * 1e-3, gbps = n.bytes / secs / 1e9;
        head(r, c, &n);
        printf(",\"kernel\":");
        bench_json_string(kernel);
        printf(",\"splits\":%d,\"median_ms\":%.6f,\"min_ms\":%.6f,\"flops\":%.6g,\"tflops\":%.3f,\"bytes\":%.0f,"
               "\"cache_bytes\":%.0f,\"gbps\":%.2f,\"copy_gbps\":%.2f,\"copy_fraction\":%.4f,\"size_copy_bytes\":%zu",
               splits, median, minimum, n.flops, n.flops / secs / 1e12, n.bytes, n.cache_bytes, gbps, r->copy_gbps,
               gbps / r->copy_gbps, copy_bytes);
        if (size_gbps > 0) /* no room for a copy beside the sets: null */
            printf(",\"size_copy_gbps\":%.2f,\"size_copy_fraction\":%.4f", size_gbps, gbps / size_gbps);
        else
            printf(",\"size_copy_gbps\":null,\"size_copy_fraction\":null");
        printf(",\"reps\":%d,\"sets\":%d,\"host_plan_ms\":%.4f", r->reps, nsets, host_ms);
        if (median < GRAPH_BELOW_MS) {
            double graph_ms = 0;
            const char *graph_why = NULL;
            if (!bench_graph_time(&r->ev, r->ctx, r->q, GRAPH_CALLS, graph_call, &k, &graph_ms, &graph_why))
                printf(",\"graph_ms\":%.6f,\"graph_copy_fraction\":%.4f", graph_ms,
                       n.bytes / (graph_ms * 1e-3) / 1e9 / r->copy_gbps);
            else {
                printf(",\"graph_ms\":null,\"graph_why\":");
                bench_json_string(graph_why);
            }
        }
        printf("}\n");
        fflush(stdout);
    }
    rudnn_paged_split_workspace_destroy(k.ws);
    for (int i = 0; i < nsets; i++)
        rudnn_buffer_destroy(k.sets[i].buf);
    free(k.sets);
    rudnn_paged_plan_destroy(k.plan);
    CHECK(rudnn_queue_synchronize(r->q));
}

/* ---- main -------------------------------------------------------------------------------------- */

static void usage(FILE *f, const pa_case_t *full, size_t nfull, const pa_case_t *quick, size_t nquick)
{
    fprintf(f, "usage: " PROG " [--backend NAME] [--device N] [--reps N] [--case NAME[,NAME]] [--quick]\n"
               "         [--max-cache-gib G] [--splits S] [--host-plan]\ncases:");
    for (size_t i = 0; i < nfull; i++)
        fprintf(f, " %s", full[i].name);
    fprintf(f, "\n--quick cases:");
    for (size_t i = 0; i < nquick; i++)
        fprintf(f, " %s", quick[i].name);
    fprintf(f, "\n");
}

int main(int argc, char **argv)
{
    static pa_case_t full[MAX_CASES], quick_list[MAX_CASES];
    const size_t nfull = make_cases(full, 0), nquick = make_cases(quick_list, 1);
    const char *backend = NULL, *cases = NULL;
    int quick = 0, device = -1, host_only = 0;
    run_t r = {.reps = DEFAULT_REPS, .max_cache_gib = DEFAULT_MAX_CACHE_GIB};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            quick = 1;
            continue;
        }
        if (!strcmp(a, "--host-plan")) {
            host_only = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout, full, nfull, quick_list, nquick);
            return 0;
        }
        if (v && !strcmp(a, "--backend"))
            backend = v;
        else if (v && !strcmp(a, "--device"))
            device = atoi(v);
        else if (v && !strcmp(a, "--reps"))
            r.reps = atoi(v);
        else if (v && !strcmp(a, "--case"))
            cases = v;
        else if (v && !strcmp(a, "--max-cache-gib") && atof(v) > 0)
            r.max_cache_gib = atof(v);
        else if (v && !strcmp(a, "--splits"))
            r.splits = atoi(v);
        else {
            usage(stderr, full, nfull, quick_list, nquick);
            return 2;
        }
        i++;
    }
    if (r.reps < 1 || r.reps > MAX_REPS) {
        fprintf(stderr, PROG ": --reps must be 1..%d\n", MAX_REPS);
        return 2;
    }
    const pa_case_t *list = quick ? quick_list : full;
    const size_t count_cases = quick ? nquick : nfull;
    /* every named case must exist: a typo must not give an empty, "passing" run */
    for (const char *p = cases; p && *p;) {
        const char *comma = strchr(p, ',');
        const size_t len = comma ? (size_t)(comma - p) : strlen(p);
        size_t i = 0;
        while (i < count_cases && !(strlen(list[i].name) == len && !strncmp(list[i].name, p, len)))
            i++;
        if (i == count_cases) {
            fprintf(stderr, PROG ": unknown case '%.*s'%s\n", (int)len, p, quick ? " (with --quick)" : "");
            usage(stderr, full, nfull, quick_list, nquick);
            return 2;
        }
        p = comma ? comma + 1 : NULL;
    }
    if (host_only) {
        for (size_t i = 0; i < count_cases; i++)
            if (!cases || bench_in_list(cases, list[i].name))
                host_plan_case(&list[i]);
        return 0;
    }
    rudnn_context_options_t opts = {.backend = backend, .device = device};
    CHECK(rudnn_context_create(&r.ctx, &opts));
    CHECK(rudnn_queue_create(r.ctx, &r.q));
    CHECK(rudnn_context_device_info(r.ctx, &r.dev));
    fprintf(stderr, PROG ": %s device %d: %s, %.1f GiB\n", r.dev.backend, r.dev.index, r.dev.name,
            (double)r.dev.global_memory_bytes / (1 << 30));
    const int small = quick || bench_is_cpu_device(&r.dev);
    make_block(&r, small ? (size_t)1 << 20 : (size_t)32 << 20);
    bench_events_create(&r.ev, PROG, r.ctx, r.reps);
    /* the reference copy: min(2 GiB, memory / 8) as rudnn-bench-attention (16 MiB on a CPU) */
    uint64_t copy_bytes = r.dev.global_memory_bytes ? r.dev.global_memory_bytes / 8 : 256ULL << 20;
    copy_bytes = copy_bytes > 2ULL << 30 ? 2ULL << 30 : copy_bytes;
    copy_bytes = small ? 16ULL << 20 : copy_bytes & ~(uint64_t)4095;
    r.copy_gbps = bench_copy(&r.ev, r.ctx, r.q, &r.dev, (size_t)copy_bytes, r.reps);
    for (size_t i = 0; i < count_cases; i++)
        if (!cases || bench_in_list(cases, list[i].name))
            run_case(&r, &list[i]);
    bench_events_destroy(&r.ev);
    free(r.block);
    rudnn_queue_destroy(r.q);
    rudnn_context_destroy(r.ctx);
    return r.failed;
}
