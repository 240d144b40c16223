/* Leaks and lifetimes.
 *
 * cycles: creates and destroys queues, buffers, events, routing plans, dispatched tokens and
 * experts objects, makes and runs a paged-attention step (host and device plans, a split workspace,
 * an append, an attention), and runs an FFN (rudnn_ffn, expert form: a workspace from the new queue's pool,
 * the host copy of expert_tokens) and a chunked gated delta rule (rudnn_chunk_gated_delta_rule,
 * varlen, workspace NULL: the sequence table and scratch from the new queue's pool, the host bitmap
 * of the index check and the host copy of the table; then again through a varlen plan, made and
 * destroyed) on each new queue, in a loop (RUDNN_LIFETIME_CYCLES, default
 * 100000; tools/soak.sh runs 10^6), and contexts in a shorter loop (RUDNN_LIFETIME_CONTEXTS,
 * default 200: opening a PoCL context costs about 20 ms, 140 ms under ASan, so 10^5 of them would
 * take hours under ASan). Resident memory (/proc/self/statm) and the device memory rudnn holds
 * (rudnn_debug_device_memory) are measured after a warm-up tenth of the cycles and at the end: RSS
 * may grow by a fixed slack, device memory and live objects not at all. The figures are printed.
 *
 * wrong order: destroying a queue before the plans and dispatched tokens taken from its pool, a
 * context before its queues, buffers, events and experts (an FFN and a gated delta rule then still
 * run on its queue), a gated-delta varlen plan's queue before the plan, weight buffers before their
 * experts. FFN has no object of its own (no plan or weights object: it takes its workspace from the
 * queue's pool and frees its host copies before it returns), so it has nothing to destroy out of
 * order; the cycles check that what it takes goes back. The parent stays alive until its last
 * child goes (rudnn/core.h): the children keep working, nothing leaks (live objects and device
 * memory back to zero; LSan in the ASan run) and nothing is used after free (ASan). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h> /* malloc_trim */
#endif

#include "common.h"
#include <rudnn/debug.h>
#include <rudnn/ffn.h>
#include <rudnn/gated_delta.h>
#include <rudnn/paged_attention.h>

#define T 4
#define E 4
#define K 2
#define H 8
#define I 16

static long env_count(const char *name, long fallback)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return fallback;
    char *end = NULL;
    long n = strtol(v, &end, 10);
    return *end == '\0' && n > 0 ? n : fallback;
}

/* Resident memory after glibc hands its free heap pages back (malloc_trim): what is freed but kept
 * in the arenas of PoCL's and the driver's threads is fragmentation, not a leak, and it moved RSS by
 * up to 14 MiB over 200-400 context cycles (not growing with the count: 8.8 MiB over 1000). */
static double rss_mib(void)
{
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0.0;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = 0;
    fclose(f);
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct snapshot {
    double rss_mib;
    uint64_t device_allocations, device_bytes, objects;
} snapshot_t;

static snapshot_t snap(void)
{
    snapshot_t s = {rss_mib(), 0, 0, rudnn_debug_live_objects()};
    rudnn_debug_device_memory(&s.device_allocations, &s.device_bytes);
    return s;
}

/* A buffer of n F32 values from a fixed pattern, written on q, and its tensor. */
static void f32_tensor(rudnn_context_t ctx, rudnn_queue_t q, int rank, const int64_t *dims, rudnn_tensor_t *t)
{
    int64_t n = rt_numel(rank, dims);
    float v[T * E * H * I];
    assert_true(n <= (int64_t)(sizeof v / sizeof v[0]));
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
    rudnn_buffer_t b = NULL;
    rt_assert_status(rudnn_buffer_create(ctx, (size_t)n * 4, &b), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_buffer_write(q, b, 0, v, (size_t)n * 4), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_tensor_init(t, b, 0, RUDNN_F32, rank, dims), RUDNN_STATUS_SUCCESS);
}

/* The MoE inputs of one cycle: logits, input, weights. */
typedef struct moe_inputs {
    rudnn_tensor_t logits, input, gate, up, down, output;
} moe_inputs_t;

static void moe_inputs(rudnn_context_t ctx, rudnn_queue_t q, moe_inputs_t *m)
{
    const int64_t logits[2] = {T, E}, input[2] = {T, H}, gu[3] = {E, I, H}, down[3] = {E, H, I};
    f32_tensor(ctx, q, 2, logits, &m->logits);
    f32_tensor(ctx, q, 2, input, &m->input);
    f32_tensor(ctx, q, 3, gu, &m->gate);
    f32_tensor(ctx, q, 3, gu, &m->up);
    f32_tensor(ctx, q, 3, down, &m->down);
    f32_tensor(ctx, q, 2, input, &m->output);
}

static void moe_inputs_free(moe_inputs_t *m)
{
    rudnn_tensor_t *all[] = {&m->logits, &m->input, &m->gate, &m->up, &m->down, &m->output};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        rudnn_buffer_destroy(all[i]->buffer);
}

static const rudnn_routing_options_t route_options = {.top_k = K, .renormalize = 1};

/* FFN's expert_tokens over the MoE inputs: counts of the T rows per expert (I64 [E]). */
static void ffn_tokens(rudnn_context_t ctx, rudnn_queue_t q, rudnn_tensor_t *t)
{
    static const int64_t counts[E] = {T, 0, 0, 0}; /* one expert runs: three launches a call */
    const int64_t n[1] = {E};
    rudnn_buffer_t b = NULL;
    rt_assert_status(rudnn_buffer_create(ctx, sizeof counts, &b), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_buffer_write(q, b, 0, counts, sizeof counts), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_tensor_init(t, b, 0, RUDNN_I64, 1, n), RUDNN_STATUS_SUCCESS);
}

/* MoeFFN over the MoE inputs: x = input [T, H], W1 = down [E, H, I], W2 = gate [E, I, H], gelu,
 * y = output. Its allocations: the workspace from the queue's pool, the host copy of expert_tokens. */
static rudnn_status_t ffn_forward(rudnn_queue_t q, const moe_inputs_t *m, const rudnn_tensor_t *tokens)
{
    const rudnn_ffn_args_t a = {.x = &m->input, .weight1 = &m->down, .weight2 = &m->gate, .expert_tokens = tokens,
                                .activation = RUDNN_FFN_GELU};
    return rudnn_ffn(q, &a, NULL, 0, &m->output);
}

/* The gated delta rule's inputs: two sequences (4 and 2 tokens) packed in T 6, H 2, K = V = 4,
 * state pools of 3 rows (sequences on rows 2 and 0), chunks of 4. */
#define GDR_H 2
#define GDR_T 6
#define GDR_D 4
#define GDR_POOL 3
#define GDR_CHUNK 4

typedef struct gdr_inputs {
    rudnn_tensor_t q, k, v, beta, decay, s_in, out, s_out;
} gdr_inputs_t;

static const int64_t gdr_cu[3] = {0, 4, 6};
static const int32_t gdr_rows[2] = {2, 0};
static const rudnn_gated_delta_varlen_t gdr_varlen = {.sequences = 2, .cu_seqlens = gdr_cu,
                                                      .state_indices = gdr_rows};

static void gdr_inputs(rudnn_context_t ctx, rudnn_queue_t q, gdr_inputs_t *g)
{
    const int64_t x[4] = {1, GDR_H, GDR_T, GDR_D}, bt[3] = {1, GDR_H, GDR_T}, s[4] = {GDR_POOL, GDR_H, GDR_D, GDR_D};
    f32_tensor(ctx, q, 4, x, &g->q);
    f32_tensor(ctx, q, 4, x, &g->k);
    f32_tensor(ctx, q, 4, x, &g->v);
    f32_tensor(ctx, q, 3, bt, &g->beta);
    f32_tensor(ctx, q, 3, bt, &g->decay); /* log_decay in [-0.5, 0.45]: six tokens, no overflow */
    f32_tensor(ctx, q, 4, s, &g->s_in);
    f32_tensor(ctx, q, 4, x, &g->out);
    f32_tensor(ctx, q, 4, s, &g->s_out);
}

static void gdr_inputs_free(gdr_inputs_t *g)
{
    rudnn_tensor_t *all[] = {&g->q, &g->k, &g->v, &g->beta, &g->decay, &g->s_in, &g->out, &g->s_out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        rudnn_buffer_destroy(all[i]->buffer);
}

/* The chunked gated delta rule over g, varlen, workspace NULL (the queue's pool): with the host
 * arrays, then through a varlen plan (its table a block of the queue's pool, held by the plan). */
static rudnn_status_t gdr_forward(rudnn_queue_t q, const gdr_inputs_t *g)
{
    const rudnn_gated_delta_input_t in = {.query = &g->q, .key = &g->k, .value = &g->v, .beta = &g->beta,
                                          .log_decay = &g->decay, .initial_state = &g->s_in, .query_scale = 0.5f};
    const rudnn_gated_delta_output_t out = {.output = &g->out, .final_state = &g->s_out};
    rudnn_status_t st = rudnn_chunk_gated_delta_rule(q, &in, &gdr_varlen, GDR_CHUNK, NULL, 0, &out);
    rudnn_gated_delta_varlen_plan_t plan = NULL;
    if (!st)
        st = rudnn_gated_delta_varlen_plan_create(q, &gdr_varlen, GDR_CHUNK, &plan);
    if (!st)
        st = rudnn_chunk_gated_delta_rule(q, &in, &(rudnn_gated_delta_varlen_t){.plan = plan}, GDR_CHUNK, NULL, 0,
                                          &out);
    rudnn_gated_delta_varlen_plan_destroy(plan);
    return st;
}

/* Paged attention: a decode step of two sequences (page size 4, 6 pages), Hq 2, Hkv 1, D 4. */
#define PA_Q 2
#define PA_PAGES 6
#define PA_PS 4
#define PA_D 4
static const int64_t pa_lengths[2] = {6, 3};
static const int64_t pa_offsets[3] = {0, 2, 3};
static const int32_t pa_tables[3] = {4, 0, 2};
static const int64_t pa_seq[PA_Q] = {0, 1};
static const int64_t pa_pos[PA_Q] = {5, 2};
static const rudnn_paged_schedule_t pa_schedule = {PA_PS, PA_PAGES, 2, pa_lengths, pa_offsets, pa_tables,
                                                   PA_Q, pa_seq, pa_pos};

typedef struct paged_inputs {
    rudnn_tensor_t q, k_cache, v_cache, out, k_new, v_new;
} paged_inputs_t;

static void paged_inputs(rudnn_context_t ctx, rudnn_queue_t q, paged_inputs_t *p)
{
    const int64_t dq[3] = {PA_Q, 2, PA_D}, dc[4] = {PA_PAGES, PA_PS, 1, PA_D}, dn[3] = {PA_Q, 1, PA_D};
    f32_tensor(ctx, q, 3, dq, &p->q);
    f32_tensor(ctx, q, 4, dc, &p->k_cache);
    f32_tensor(ctx, q, 4, dc, &p->v_cache);
    f32_tensor(ctx, q, 3, dq, &p->out);
    f32_tensor(ctx, q, 3, dn, &p->k_new);
    f32_tensor(ctx, q, 3, dn, &p->v_new);
}

static void paged_inputs_free(paged_inputs_t *p)
{
    rudnn_tensor_t *all[] = {&p->q, &p->k_cache, &p->v_cache, &p->out, &p->k_new, &p->v_new};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        rudnn_buffer_destroy(all[i]->buffer);
}

/* A step on q: host plan, device plan (a block of q's pool), a split workspace of splits chosen per
 * call, append, attention with the workspace; everything destroyed again. */
static rudnn_status_t paged_step(rudnn_queue_t q, const paged_inputs_t *p)
{
    rudnn_paged_host_plan_t host = NULL;
    rudnn_paged_plan_t plan = NULL;
    rudnn_paged_split_workspace_t ws = NULL;
    rudnn_tensor_t k_out, v_out;
    rudnn_status_t st = rudnn_paged_host_plan_create(&pa_schedule, &host);
    if (!st)
        st = rudnn_paged_plan_create(q, host, &plan);
    if (!st)
        st = rudnn_paged_split_workspace_create(q, PA_Q, 2, PA_D, 0, &ws);
    if (!st)
        st = rudnn_paged_append(plan, &p->k_new, &p->v_new, &p->k_cache, &p->v_cache, &k_out, &v_out);
    if (!st)
        st = rudnn_paged_attention_with_workspace(plan, ws, &p->q, &p->k_cache, &p->v_cache, 0.5f, 1, &p->out);
    rudnn_paged_split_workspace_destroy(ws);
    rudnn_paged_plan_destroy(plan);
    rudnn_paged_host_plan_destroy(host);
    return st;
}

/* One cycle of the cheap objects on ctx: every kind made and destroyed once, and an FFN and a gated
 * delta rule on the new queue (its pool starts empty: the workspace blocks are made, then freed with
 * the queue). */
static void cycle(rudnn_context_t ctx, const moe_inputs_t *m, const rudnn_tensor_t *tokens, const gdr_inputs_t *g,
                  const paged_inputs_t *p)
{
    rudnn_queue_t q = NULL;
    rudnn_buffer_t b = NULL;
    rudnn_event_t e = NULL;
    rudnn_routing_plan_t plan = NULL;
    rudnn_dispatched_t d = NULL;
    rudnn_swiglu_experts_t x = NULL;
    rudnn_status_t st = rudnn_queue_create(ctx, &q);
    if (!st)
        st = rudnn_buffer_create(ctx, 4096, &b);
    if (!st)
        st = rudnn_event_create(ctx, &e);
    if (!st)
        st = rudnn_moe_route(q, &m->logits, &route_options, &plan);
    if (!st)
        st = rudnn_moe_dispatch(q, plan, &m->input, &d);
    if (!st)
        st = rudnn_swiglu_experts_create(ctx, &m->gate, &m->up, &m->down, &x);
    if (!st)
        st = ffn_forward(q, m, tokens);
    if (!st)
        st = gdr_forward(q, g);
    if (!st)
        st = paged_step(q, p);
    if (st)
        fail_msg("cycle: %s: %s", rudnn_status_string(st), rudnn_last_error());
    rudnn_swiglu_experts_destroy(x);
    rudnn_dispatched_destroy(d);
    rudnn_routing_plan_destroy(plan);
    rudnn_event_destroy(e);
    rudnn_buffer_destroy(b);
    rudnn_queue_destroy(q);
}

/* Under ASan freed memory sits in its quarantine (hundreds of MiB), so RSS says nothing there:
 * LeakSanitizer is the host check of that run. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_CHECKED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RSS_CHECKED 0
#endif
#endif
#ifndef RSS_CHECKED
#define RSS_CHECKED 1
#endif

static void check_flat(const char *what, long cycles, snapshot_t warm, snapshot_t end, double seconds)
{
    const double rss_slack_mib = 8.0; /* allocator arenas and driver caches settle in steps */
    printf("lifetime %s: %ld cycles in %.1f s; RSS %.1f -> %.1f MiB; device %llu -> %llu allocations, "
           "%llu -> %llu bytes; live objects %llu -> %llu\n",
           what, cycles, seconds, warm.rss_mib, end.rss_mib, (unsigned long long)warm.device_allocations,
           (unsigned long long)end.device_allocations, (unsigned long long)warm.device_bytes,
           (unsigned long long)end.device_bytes, (unsigned long long)warm.objects, (unsigned long long)end.objects);
    fflush(stdout);
    if (!RSS_CHECKED)
        printf("lifetime %s: RSS not checked under AddressSanitizer (its quarantine holds freed memory)\n", what);
    else if (end.rss_mib > warm.rss_mib + rss_slack_mib)
        fail_msg("%s: RSS grew by %.1f MiB over %ld cycles (slack %.1f MiB)", what, end.rss_mib - warm.rss_mib,
                 cycles, rss_slack_mib);
    assert_int_equal(end.device_allocations, warm.device_allocations);
    assert_int_equal(end.device_bytes, warm.device_bytes);
    assert_int_equal(end.objects, warm.objects);
}

static void test_object_cycles(void **state)
{
    (void)state;
    long cycles = env_count("RUDNN_LIFETIME_CYCLES", 100000);
    long warmup = cycles / 10 > 0 ? cycles / 10 : 1;
    moe_inputs_t m;
    moe_inputs(rt_ctx, rt_queue, &m);
    rudnn_tensor_t tokens;
    ffn_tokens(rt_ctx, rt_queue, &tokens);
    gdr_inputs_t g;
    gdr_inputs(rt_ctx, rt_queue, &g);
    paged_inputs_t p;
    paged_inputs(rt_ctx, rt_queue, &p);
    for (long i = 0; i < warmup; i++)
        cycle(rt_ctx, &m, &tokens, &g, &p);
    snapshot_t warm = snap();
    double t0 = now_s();
    for (long i = 0; i < cycles; i++)
        cycle(rt_ctx, &m, &tokens, &g, &p);
    check_flat("objects", cycles, warm, snap(), now_s() - t0);
    paged_inputs_free(&p);
    gdr_inputs_free(&g);
    rudnn_buffer_destroy(tokens.buffer);
    moe_inputs_free(&m);
}

static void test_context_cycles(void **state)
{
    (void)state;
    long cycles = env_count("RUDNN_LIFETIME_CONTEXTS", 200);
    long warmup = cycles / 10 > 0 ? cycles / 10 : 1;
    snapshot_t warm = {0};
    double t0 = 0.0;
    for (long i = 0; i < warmup + cycles; i++) {
        if (i == warmup) {
            warm = snap();
            t0 = now_s();
        }
        rudnn_context_t ctx = NULL;
        rt_assert_status(rudnn_context_create(&ctx, NULL), RUDNN_STATUS_SUCCESS);
        rudnn_queue_t q = NULL;
        rt_assert_status(rudnn_queue_create(ctx, &q), RUDNN_STATUS_SUCCESS);
        moe_inputs_t m;
        moe_inputs(ctx, q, &m);
        rudnn_tensor_t tokens;
        ffn_tokens(ctx, q, &tokens);
        gdr_inputs_t g;
        gdr_inputs(ctx, q, &g);
        paged_inputs_t p;
        paged_inputs(ctx, q, &p);
        cycle(ctx, &m, &tokens, &g, &p);
        paged_inputs_free(&p);
        gdr_inputs_free(&g);
        rudnn_buffer_destroy(tokens.buffer);
        moe_inputs_free(&m);
        rudnn_queue_destroy(q);
        rudnn_context_destroy(ctx);
    }
    check_flat("contexts", cycles, warm, snap(), now_s() - t0);
}

/* ---- wrong order ----------------------------------------------------------------------------- */

/* Everything made since base is gone. */
static void assert_back_to(snapshot_t base)
{
    snapshot_t now = snap();
    assert_int_equal(now.objects, base.objects);
    assert_int_equal(now.device_allocations, base.device_allocations);
    assert_int_equal(now.device_bytes, base.device_bytes);
}

/* The expected result of the forward over m, computed in the right order on rt_queue. */
static void reference_forward(rudnn_queue_t q, const moe_inputs_t *m, rudnn_swiglu_experts_t x, float *out)
{
    rt_assert_status(rudnn_swiglu_experts_forward(q, x, &m->input, &m->logits, &route_options, &m->output),
                     RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_tensor_read(q, &m->output, out, T * H * 4), RUDNN_STATUS_SUCCESS);
}

/* A queue destroyed before the plan and dispatched tokens from its pool: they stay usable on
 * another queue, and their blocks are freed (not cached) when they go. */
static void test_queue_before_plans(void **state)
{
    (void)state;
    snapshot_t base = snap();
    rudnn_queue_t qr = NULL; /* its own queue: its pool's cached blocks go with it */
    rt_assert_status(rudnn_queue_create(rt_ctx, &qr), RUDNN_STATUS_SUCCESS);
    moe_inputs_t m;
    moe_inputs(rt_ctx, qr, &m);
    rudnn_swiglu_experts_t x = NULL;
    rt_assert_status(rudnn_swiglu_experts_create(rt_ctx, &m.gate, &m.up, &m.down, &x), RUDNN_STATUS_SUCCESS);
    float want[T * H], got[T * H];
    reference_forward(qr, &m, x, want);

    rudnn_queue_t q = NULL;
    rt_assert_status(rudnn_queue_create(rt_ctx, &q), RUDNN_STATUS_SUCCESS);
    rudnn_routing_plan_t plan = NULL;
    rudnn_dispatched_t d = NULL;
    rt_assert_status(rudnn_moe_route(q, &m.logits, &route_options, &plan), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_moe_dispatch(q, plan, &m.input, &d), RUDNN_STATUS_SUCCESS);
    rudnn_gated_delta_varlen_plan_t gdr_plan = NULL; /* holds the queue and a block of its pool */
    rt_assert_status(rudnn_gated_delta_varlen_plan_create(q, &gdr_varlen, GDR_CHUNK, &gdr_plan), RUDNN_STATUS_SUCCESS);
    rudnn_queue_destroy(q); /* wrong order */

    /* the objects still work: experts and combine on another queue give the same output */
    const int64_t rows[2] = {T * K, H};
    rudnn_tensor_t eo;
    f32_tensor(rt_ctx, qr, 2, rows, &eo);
    rt_assert_status(rudnn_swiglu_experts_forward_dispatched(qr, x, d, RUDNN_MOE_SCALAR, NULL, 0, &eo),
                     RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_moe_combine(qr, d, &eo, &m.output), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_tensor_read(qr, &m.output, got, sizeof got), RUDNN_STATUS_SUCCESS);
    assert_memory_equal(got, want, sizeof got);

    rudnn_gated_delta_varlen_plan_destroy(gdr_plan); /* its table goes with the last holder of the queue */
    rudnn_routing_plan_destroy(plan); /* before d, which holds it too */
    rudnn_dispatched_destroy(d);
    rudnn_buffer_destroy(eo.buffer);
    rudnn_swiglu_experts_destroy(x);
    moe_inputs_free(&m);
    rudnn_queue_destroy(qr);
    assert_back_to(base);
}

/* A context destroyed first: its queue, buffers, event, experts and plan keep working, and the
 * device closes when the last of them goes. */
static void test_context_before_children(void **state)
{
    (void)state;
    snapshot_t base = snap();
    rudnn_context_t ctx = NULL;
    rt_assert_status(rudnn_context_create(&ctx, NULL), RUDNN_STATUS_SUCCESS);
    rudnn_queue_t q = NULL;
    rt_assert_status(rudnn_queue_create(ctx, &q), RUDNN_STATUS_SUCCESS);
    moe_inputs_t m;
    moe_inputs(ctx, q, &m);
    rudnn_swiglu_experts_t x = NULL;
    rt_assert_status(rudnn_swiglu_experts_create(ctx, &m.gate, &m.up, &m.down, &x), RUDNN_STATUS_SUCCESS);
    float want[T * H], got[T * H];
    reference_forward(q, &m, x, want);
    rudnn_event_t e0 = NULL, e1 = NULL;
    rt_assert_status(rudnn_event_create(ctx, &e0), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_event_create(ctx, &e1), RUDNN_STATUS_SUCCESS);
    rudnn_routing_plan_t plan = NULL;
    rt_assert_status(rudnn_moe_route(q, &m.logits, &route_options, &plan), RUDNN_STATUS_SUCCESS);
    rudnn_tensor_t tokens;
    ffn_tokens(ctx, q, &tokens);
    float want_ffn[T * H], got_ffn[T * H];
    rt_assert_status(ffn_forward(q, &m, &tokens), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_tensor_read(q, &m.output, want_ffn, sizeof want_ffn), RUDNN_STATUS_SUCCESS);
    gdr_inputs_t g;
    gdr_inputs(ctx, q, &g);
    float want_gdr[GDR_H * GDR_T * GDR_D], got_gdr[GDR_H * GDR_T * GDR_D];
    rt_assert_status(gdr_forward(q, &g), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_tensor_read(q, &g.out, want_gdr, sizeof want_gdr), RUDNN_STATUS_SUCCESS);
    paged_inputs_t pa;
    paged_inputs(ctx, q, &pa);
    rudnn_paged_host_plan_t pa_host = NULL;
    rudnn_paged_plan_t pa_plan = NULL;
    rudnn_paged_split_workspace_t pa_ws = NULL;
    rt_assert_status(rudnn_paged_host_plan_create(&pa_schedule, &pa_host), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_paged_plan_create(q, pa_host, &pa_plan), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_paged_split_workspace_create(q, PA_Q, 2, PA_D, 2, &pa_ws), RUDNN_STATUS_SUCCESS);
    float want_pa[PA_Q * 2 * PA_D], got_pa[PA_Q * 2 * PA_D];
    rt_assert_status(rudnn_paged_attention_with_workspace(pa_plan, pa_ws, &pa.q, &pa.k_cache, &pa.v_cache, 0.5f, 1,
                                                          &pa.out),
                     RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_tensor_read(q, &pa.out, want_pa, sizeof want_pa), RUDNN_STATUS_SUCCESS);

    rudnn_context_destroy(ctx); /* wrong order: everything above is still alive */

    rt_assert_status(rudnn_buffer_fill(q, m.output.buffer, 0, 0, T * H * 4), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_event_record(e0, q), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_swiglu_experts_forward(q, x, &m.input, &m.logits, &route_options, &m.output),
                     RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_event_record(e1, q), RUDNN_STATUS_SUCCESS);
    float ms = 0.0f;
    rt_assert_status(rudnn_event_elapsed_ms(e0, e1, &ms), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_tensor_read(q, &m.output, got, sizeof got), RUDNN_STATUS_SUCCESS);
    assert_memory_equal(got, want, sizeof got);
    /* an FFN on the queue of the destroyed context (its workspace from the queue's pool) */
    rt_assert_status(rudnn_buffer_fill(q, m.output.buffer, 0, 0, T * H * 4), RUDNN_STATUS_SUCCESS);
    rt_assert_status(ffn_forward(q, &m, &tokens), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_tensor_read(q, &m.output, got_ffn, sizeof got_ffn), RUDNN_STATUS_SUCCESS);
    assert_memory_equal(got_ffn, want_ffn, sizeof got_ffn);
    /* and a gated delta rule (its workspace from the queue's pool, its host copies) */
    rt_assert_status(rudnn_buffer_fill(q, g.out.buffer, 0, 0, sizeof got_gdr), RUDNN_STATUS_SUCCESS);
    rt_assert_status(gdr_forward(q, &g), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_tensor_read(q, &g.out, got_gdr, sizeof got_gdr), RUDNN_STATUS_SUCCESS);
    assert_memory_equal(got_gdr, want_gdr, sizeof got_gdr);
    /* and paged attention on a plan and split workspace made before (the host plan goes first) */
    rudnn_paged_host_plan_destroy(pa_host);
    rt_assert_status(rudnn_buffer_fill(q, pa.out.buffer, 0, 0, sizeof got_pa), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_paged_attention_with_workspace(pa_plan, pa_ws, &pa.q, &pa.k_cache, &pa.v_cache, 0.5f, 1,
                                                          &pa.out),
                     RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_tensor_read(q, &pa.out, got_pa, sizeof got_pa), RUDNN_STATUS_SUCCESS);
    assert_memory_equal(got_pa, want_pa, sizeof got_pa);

    /* and the children go in any order: queue first (the plan holds its pool), buffers before
     * the experts that use them */
    rudnn_queue_destroy(q);
    /* the plan outlives its queue, but its calls are refused: they ran on that queue */
    rt_assert_status(rudnn_paged_attention(pa_plan, &pa.q, &pa.k_cache, &pa.v_cache, 0.5f, 1, &pa.out),
                     RUDNN_STATUS_BAD_PARAM);
    rudnn_paged_split_workspace_destroy(pa_ws);
    paged_inputs_free(&pa);
    rudnn_paged_plan_destroy(pa_plan);
    rudnn_buffer_destroy(tokens.buffer);
    gdr_inputs_free(&g);
    moe_inputs_free(&m);
    rudnn_event_destroy(e1);
    rudnn_routing_plan_destroy(plan);
    rudnn_swiglu_experts_destroy(x);
    rudnn_event_destroy(e0);
    assert_back_to(base);
}

/* Weight buffers destroyed before their experts: the experts keep the memory. */
static void test_weights_before_experts(void **state)
{
    (void)state;
    snapshot_t base = snap();
    rudnn_queue_t qr = NULL; /* its own queue: its pool's cached blocks go with it */
    rt_assert_status(rudnn_queue_create(rt_ctx, &qr), RUDNN_STATUS_SUCCESS);
    moe_inputs_t m;
    moe_inputs(rt_ctx, qr, &m);
    rudnn_swiglu_experts_t x = NULL;
    rt_assert_status(rudnn_swiglu_experts_create(rt_ctx, &m.gate, &m.up, &m.down, &x), RUDNN_STATUS_SUCCESS);
    float want[T * H], got[T * H];
    reference_forward(qr, &m, x, want);
    rudnn_buffer_destroy(m.gate.buffer);
    rudnn_buffer_destroy(m.up.buffer);
    rudnn_buffer_destroy(m.down.buffer);
    rt_assert_status(rudnn_buffer_fill(qr, m.output.buffer, 0, 0, T * H * 4), RUDNN_STATUS_SUCCESS);
    reference_forward(qr, &m, x, got);
    assert_memory_equal(got, want, sizeof got);
    rudnn_swiglu_experts_destroy(x);
    rudnn_buffer_destroy(m.logits.buffer);
    rudnn_buffer_destroy(m.input.buffer);
    rudnn_buffer_destroy(m.output.buffer);
    rudnn_queue_destroy(qr);
    assert_back_to(base);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest all[] = {
        cmocka_unit_test(test_queue_before_plans),
        cmocka_unit_test(test_context_before_children),
        cmocka_unit_test(test_weights_before_experts),
        cmocka_unit_test(test_object_cycles),
        cmocka_unit_test(test_context_cycles),
    };
    /* argv[1]: "order" (the wrong-order tests) or "cycles" (the loops); none: all */
    struct CMUnitTest tests[sizeof all / sizeof all[0]];
    size_t n = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        int is_cycle = strstr(all[i].name, "cycles") != NULL;
        if (argc < 2 || (strcmp(argv[1], "cycles") == 0) == is_cycle)
            tests[n++] = all[i];
    }
    rt_open_or_skip("lifetime");
    return rt_exit_code(_cmocka_run_group_tests("lifetime", tests, n, NULL, rt_group_teardown));
}
