/* The thread model of include/rudnn/core.h ("Threads"), on the default backend. Every thread
 * checks every result against the FP64 references (threads_work.c) and logs what fails; a test
 * fails once its threads have joined. Threads start each phase together (a barrier), so that
 * whatever they share is used at the same moment.
 *
 *   test_threads rounds      three tests in one process:
 *     shared_context    THREADS threads on one context, each with its own queue and buffers,
 *                       ROUNDS rounds of every norm, MoE, attention (forward with every listed
 *                       strategy and Autotune, then the backward) and paged-attention op, and of
 *                       convolution (forward, data and weight backward, each with every listed
 *                       strategy and Autotune: the threads race on the autotune cache), pooling
 *                       (MAX forward with indices, backward), interpolation (bilinear forward,
 *                       backward), ctc (loss with gradient) and grid_sample (bilinear forward,
 *                       backward with dx and dgrid); the experts objects (weights and
 *                       all) are shared, and thread 0 names another Scalar kernel for them
 *                       (set_kernel) before each of its rounds while the others run forwards.
 *     own_contexts      THREADS threads that each create their own context and queue at the
 *                       same moment, then the same rounds on their own experts.
 *     per_thread_state  each thread makes a bad call of its own and launches a kernel of its own,
 *                       then, once all have, finds its own message in rudnn_last_error() and its
 *                       own kernel in rudnn_last_kernel(); a new thread starts with both empty.
 *     grid_sizes        THREADS threads on one context launch one kernel (F32 rms_norm) at
 *                       once, with the same local size and a grid of their own in every round
 *                       (PoCL before 6.0 aborted on that: backends/opencl/ocl_launch.c).
 *   test_threads first-use   (a process of its own: nothing may be initialised before)
 *                       THREADS threads create contexts at the same moment (the loader, the
 *                       environment and the plugin's init race if they can; half of them name the
 *                       plugin folders by another path, "<dir>/.", which reaches the same file),
 *                       one probes the backends meanwhile; then every thread's first op on one
 *                       shared context (the program cache builds each program once) and on its
 *                       own (the on-disk cache), and, where the TensorCore experts run, the first
 *                       TensorCore forwards of all threads at once (CLBlast's or cuBLAS's lazy
 *                       loading and first use).
 *
 * Run time: about 20 s on PoCL with 2 cores once the kernels are in the program cache. The rounds of
 * convolution, pooling, interpolation, ctc, grid_sample and the attention backward added (PoCL 3.1,
 * 2 cores, 2026-12-07): 0.5 s more with warm caches, 39 s more with cold ones (rudnn's program cache
 * and PoCL's: their programs' first builds; under ThreadSanitizer 124 s more). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "threads_work.h"

#define THREADS 4
#define ROUNDS 6

static rudnn_dtype_t dtype_of(int thread) { return thread % 2 ? RUDNN_BF16 : RUDNN_F32; }

/* What each thread of a test gets. */
typedef struct worker {
    int id;
    tw_thread_t t;
    pthread_t handle;
    pthread_barrier_t *barrier;
    int own_context;          /* create t.ctx in the thread (else the test's) */
    const tw_experts_t *experts; /* shared experts of the thread's dtype; NULL: its own */
    tw_experts_t *pinned[2];  /* thread 0 of shared_context: experts whose kernel it switches */
} worker_t;

static void worker_init(worker_t *w, int id, pthread_barrier_t *barrier, const char *test)
{
    memset(w, 0, sizeof *w);
    w->id = id;
    w->barrier = barrier;
    w->t.ctx = rt_ctx;
    w->t.dtype = dtype_of(id);
    w->t.log = rt_log_new();
    rt_rng_seed_case(&w->t.rng, test, id);
    snprintf(w->t.label, sizeof w->t.label, "%s thread %d", test, id);
}

/* Joins the threads and fails the test with every thread's log. */
static void join_and_check(worker_t *w, int n)
{
    rt_log_t *all = rt_log_new();
    for (int i = 0; i < n; i++) {
        pthread_join(w[i].handle, NULL);
        rt_logf(all, "%s", w[i].t.log->text);
        all->failures += w[i].t.log->failures;
        free(w[i].t.log);
    }
    rt_log_finish_free(all, "check(s)");
}

static void start(worker_t *w, int n, void *(*fn)(void *))
{
    for (int i = 0; i < n; i++)
        assert_int_equal(pthread_create(&w[i].handle, NULL, fn, &w[i]), 0);
}

/* Thread 0's switch before its round r: one of the Scalar kernels of x by name in turn, and
 * every (kernels + 1)-th round none (choose by strategy). Results must not depend on it. */
static void switch_kernel(worker_t *w, tw_experts_t *x, int r)
{
    const char *names[8];
    int n = tw_kernels_of(x, RUDNN_MOE_SCALAR, names, 8);
    n = n > 8 ? 8 : n;
    const char *name = r % (n + 1) == n ? NULL : names[r % (n + 1)];
    tw_ok(&w->t, "swiglu_experts_set_kernel", rudnn_swiglu_experts_set_kernel(x->experts, name));
}

/* ROUNDS rounds of every op; the thread's experts are w->experts or its own. */
static void run_rounds(worker_t *w)
{
    tw_experts_t own;
    const tw_experts_t *x = w->experts;
    int ok = 1;
    if (!x) {
        ok = tw_experts_create(&w->t, &own);
        x = &own;
    }
    char base[48];
    snprintf(base, sizeof base, "%.40s", w->t.label);
    for (int r = 0; r < ROUNDS && ok; r++) {
        snprintf(w->t.label, sizeof w->t.label, "%s round %d", base, r);
        for (int i = 0; i < 2; i++)
            if (w->pinned[i])
                switch_kernel(w, w->pinned[i], r);
        ok = tw_norm_round(&w->t) && tw_moe_round(&w->t, x, RUDNN_MOE_SCALAR, NULL) &&
             tw_attention_round(&w->t) && tw_paged_attention_round(&w->t) && tw_convolution_round(&w->t) &&
             tw_pooling_round(&w->t) && tw_interpolation_round(&w->t) && tw_ctc_round(&w->t) &&
             tw_grid_sample_round(&w->t);
    }
    if (x == &own)
        tw_experts_destroy(&own);
}

static void *rounds_thread(void *arg)
{
    worker_t *w = arg;
    pthread_barrier_wait(w->barrier);
    if (w->own_context) {
        rudnn_context_t ctx = NULL;
        w->t.ctx = NULL;
        if (tw_ok(&w->t, "context_create", rudnn_context_create(&ctx, NULL)))
            w->t.ctx = ctx;
    }
    if (w->t.ctx && tw_ok(&w->t, "queue_create", rudnn_queue_create(w->t.ctx, &w->t.queue))) {
        pthread_barrier_wait(w->barrier);
        run_rounds(w);
        rudnn_queue_destroy(w->t.queue);
    } else {
        pthread_barrier_wait(w->barrier);
    }
    if (w->own_context)
        rudnn_context_destroy(w->t.ctx);
    return NULL;
}

/* The shared experts, one per dtype, made on rt_ctx through rt_queue. */
static void shared_experts_create(tw_experts_t x[2])
{
    for (int d = 0; d < 2; d++) {
        tw_thread_t maker = {.ctx = rt_ctx, .queue = rt_queue, .dtype = dtype_of(d), .log = rt_log_new()};
        rt_rng_seed_case(&maker.rng, "shared experts", d);
        snprintf(maker.label, sizeof maker.label, "shared experts %s", rudnn_dtype_name(maker.dtype));
        int ok = tw_experts_create(&maker, &x[d]);
        if (!ok)
            rt_print_lines(maker.log->text);
        free(maker.log);
        assert_true(ok);
    }
}

static void test_shared_context(void **state)
{
    (void)state;
    tw_experts_t shared[2];
    shared_experts_create(shared);
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, THREADS);
    worker_t w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        worker_init(&w[i], i, &barrier, "shared_context");
        w[i].experts = &shared[i % 2];
    }
    w[0].pinned[0] = &shared[0];
    w[0].pinned[1] = &shared[1];
    start(w, THREADS, rounds_thread);
    join_and_check(w, THREADS);
    pthread_barrier_destroy(&barrier);
    tw_experts_destroy(&shared[0]);
    tw_experts_destroy(&shared[1]);
}

static void test_own_contexts(void **state)
{
    (void)state;
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, THREADS);
    worker_t w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        worker_init(&w[i], i, &barrier, "own_contexts");
        w[i].own_context = 1;
    }
    start(w, THREADS, rounds_thread);
    join_and_check(w, THREADS);
    pthread_barrier_destroy(&barrier);
}

/* ---- per-thread state --------------------------------------------------------------------------- */

#define STATE_ROUNDS 20

/* Thread i's bad call: its status, and what its message starts with and mentions. */
typedef struct bad_call {
    rudnn_status_t status;
    const char *starts, *mentions;
} bad_call_t;

static const bad_call_t bad_calls[THREADS] = {
    {RUDNN_STATUS_BAD_PARAM, "rms_norm: ", "eps"},
    {RUDNN_STATUS_BAD_SHAPE, "layer_norm: ", "gamma"},
    {RUDNN_STATUS_BAD_PARAM, "moe_route: ", "top_k = 0"},
    {RUDNN_STATUS_BAD_PARAM, "buffer_create: ", "size must be > 0"},
};

/* Thread i's good call (a launch) and its bad call, on tensors made for it. */
static int own_calls(worker_t *w, const tw_tensor_t *x, const tw_tensor_t *gamma, const tw_tensor_t *y,
                     const tw_tensor_t *gamma_short)
{
    tw_thread_t *t = &w->t;
    rudnn_routing_plan_t plan = NULL;
    rudnn_buffer_t none = NULL;
    rudnn_status_t good, bad;
    const rudnn_routing_options_t no_experts = {.top_k = 0, .renormalize = 1}, two = {.top_k = 2, .renormalize = 1};
    switch (w->id) {
    case 0:
        good = rudnn_rms_norm(t->queue, &x->t, &gamma->t, 1e-5f, &y->t);
        bad = rudnn_rms_norm(t->queue, &x->t, &gamma->t, -1.0f, &y->t);
        break;
    case 1:
        good = rudnn_softmax_last_axis(t->queue, &x->t, &y->t);
        bad = rudnn_layer_norm(t->queue, &x->t, &gamma_short->t, NULL, 1e-5f, &y->t);
        break;
    case 2:
        good = rudnn_moe_route(t->queue, &x->t, &two, &plan);
        rudnn_routing_plan_destroy(plan);
        bad = rudnn_moe_route(t->queue, &x->t, &no_experts, &plan);
        break;
    default:
        good = rudnn_layer_norm(t->queue, &x->t, &gamma->t, NULL, 1e-5f, &y->t);
        bad = rudnn_buffer_create(t->ctx, 0, &none);
        break;
    }
    /* the bad call launched nothing: the good call's kernel is still the last */
    return tw_ok(t, "the thread's good call", good) && tw_status(t, "the thread's bad call", bad, bad_calls[w->id].status);
}

static void *state_thread(void *arg)
{
    worker_t *w = arg;
    tw_thread_t *t = &w->t;
    if (rudnn_last_kernel()[0] || rudnn_last_error()[0]) {
        rt_logf(t->log, "  %s: a new thread starts with last kernel \"%s\" and last error \"%s\"\n", t->label,
                rudnn_last_kernel(), rudnn_last_error());
        t->log->failures++;
    }
    tw_tensor_t x = {0}, gamma = {0}, y = {0}, gamma_short = {0};
    int ok = tw_ok(t, "queue_create", rudnn_queue_create(t->ctx, &t->queue)) &&
             tw_tensor_create(t, &x, RUDNN_F32, 2, 4, 16) && tw_tensor_create(t, &gamma, RUDNN_F32, 1, 16, 0) &&
             tw_tensor_create(t, &y, RUDNN_F32, 2, 4, 16) && tw_tensor_create(t, &gamma_short, RUDNN_F32, 1, 15, 0);
    float values[64];
    rt_fill_uniform(&t->rng, values, 64, 0.5, 1.5);
    ok = ok && tw_put(t, &x, values) && tw_put(t, &gamma, values) && tw_put(t, &gamma_short, values);
    const bad_call_t *want = &bad_calls[w->id];
    for (int r = 0; r < STATE_ROUNDS; r++) {
        char kernel[128] = "";
        if (ok) {
            ok = own_calls(w, &x, &gamma, &y, &gamma_short);
            snprintf(kernel, sizeof kernel, "%s", rudnn_last_kernel());
        }
        pthread_barrier_wait(w->barrier); /* every thread has made its calls; some make the next */
        const char *msg = rudnn_last_error();
        if (ok && (strncmp(msg, want->starts, strlen(want->starts)) != 0 || !strstr(msg, want->mentions))) {
            rt_logf(t->log, "  %s round %d: rudnn_last_error() is \"%s\", expected \"%s...%s...\"\n", t->label, r, msg,
                    want->starts, want->mentions);
            t->log->failures++;
            ok = 0;
        }
        if (ok && (!kernel[0] || strcmp(rudnn_last_kernel(), kernel) != 0)) {
            rt_logf(t->log, "  %s round %d: rudnn_last_kernel() is \"%s\", the thread's own launch was \"%s\"\n",
                    t->label, r, rudnn_last_kernel(), kernel);
            t->log->failures++;
            ok = 0;
        }
    }
    tw_tensor_t *all[] = {&x, &gamma, &y, &gamma_short};
    for (size_t i = 0; i < 4; i++)
        tw_tensor_destroy(all[i]);
    rudnn_queue_destroy(t->queue);
    return NULL;
}

static void test_per_thread_state(void **state)
{
    (void)state;
    /* the main thread launches and fails first: nothing of it may show in the new threads */
    rudnn_buffer_t none = NULL;
    rt_assert_status(rudnn_buffer_create(rt_ctx, 0, &none), RUDNN_STATUS_BAD_PARAM);
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, THREADS);
    worker_t w[THREADS];
    for (int i = 0; i < THREADS; i++)
        worker_init(&w[i], i, &barrier, "per_thread_state");
    start(w, THREADS, state_thread);
    join_and_check(w, THREADS);
    pthread_barrier_destroy(&barrier);
}

/* ---- one kernel, different grids -------------------------------------------------------------- */

#define GRID_ROUNDS 40
#define GRID_LAUNCHES 4

/* Thread i's launch j of round r covers (r * GRID_LAUNCHES + j) * THREADS + i + 1 rows: every
 * launch a grid of its own, most of them wider than any before (PoCL's new entries). */
static void *grid_thread(void *arg)
{
    worker_t *w = arg;
    tw_thread_t *t = &w->t;
    t->dtype = RUDNN_F32; /* one program, so that every thread launches the same kernel */
    int ok = tw_ok(t, "queue_create", rudnn_queue_create(t->ctx, &t->queue));
    pthread_barrier_wait(w->barrier);
    for (int r = 0; r < GRID_ROUNDS && ok; r++) {
        int64_t rows[GRID_LAUNCHES];
        for (int j = 0; j < GRID_LAUNCHES; j++)
            rows[j] = ((int64_t)r * GRID_LAUNCHES + j) * THREADS + w->id + 1;
        ok = tw_rms_norm_grids(t, rows, GRID_LAUNCHES);
    }
    if (t->queue)
        rudnn_queue_destroy(t->queue);
    return NULL;
}

static void test_grid_sizes(void **state)
{
    (void)state;
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, THREADS);
    worker_t w[THREADS];
    for (int i = 0; i < THREADS; i++)
        worker_init(&w[i], i, &barrier, "grid_sizes");
    start(w, THREADS, grid_thread);
    join_and_check(w, THREADS);
    pthread_barrier_destroy(&barrier);
}

/* ---- first use -------------------------------------------------------------------------------- */

/* RUDNN_BACKEND_PATH with every folder written "<dir>/.": other path strings for the same plugin
 * files. Empty when the variable is unset. */
static char alias_path[4096];

static void make_alias_path(void)
{
    const char *p = getenv("RUDNN_BACKEND_PATH");
    char copy[2048];
    snprintf(copy, sizeof copy, "%s", p ? p : "");
    char *save = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        size_t len = strlen(alias_path);
        snprintf(alias_path + len, sizeof alias_path - len, "%s%s/.", len ? ":" : "", dir);
    }
}

typedef struct first_use {
    pthread_barrier_t barrier;
    rudnn_context_t shared;    /* thread 0's context, shared by all after the second barrier */
    tw_experts_t experts;      /* BF16 experts on it, made by thread 0 */
    int tensor_core;           /* the TensorCore experts run on it */
    rudnn_status_t create[THREADS];
} first_use_t;

static first_use_t first;

static void *first_use_thread(void *arg)
{
    worker_t *w = arg;
    tw_thread_t *t = &w->t;
    rudnn_context_t own = NULL;
    rudnn_queue_t own_queue = NULL;
    rudnn_context_options_t opts = {.backend = NULL, .device = -1, .plugin_path = NULL};
    if (w->id % 2 && alias_path[0])
        opts.plugin_path = alias_path;
    pthread_barrier_wait(&first.barrier);
    first.create[w->id] = rudnn_context_create(&own, &opts);
    int ok = first.create[w->id] == RUDNN_STATUS_SUCCESS;
    if (!ok && first.create[w->id] != RUDNN_STATUS_BACKEND_UNAVAILABLE)
        tw_ok(t, "context_create", first.create[w->id]);
    if (w->id == 1) { /* the loader again, while the others open devices */
        rudnn_backend_report_t reports[3];
        size_t count = 0;
        tw_ok(t, "backend_probe", rudnn_backend_probe(reports, 3, &count));
    }
    if (w->id == 0 && ok) {
        first.shared = own;
        t->ctx = own;
        t->queue = NULL;
        ok = tw_ok(t, "queue_create", rudnn_queue_create(own, &t->queue));
        if (ok) {
            t->dtype = RUDNN_BF16;
            ok = tw_experts_create(t, &first.experts);
            rudnn_moe_choice_t choice;
            first.tensor_core = ok && rudnn_swiglu_experts_choose(first.experts.experts, NULL, NULL,
                                                                  RUDNN_MOE_TENSOR_CORE, &choice) == RUDNN_STATUS_SUCCESS;
            printf("first_use: TensorCore experts %s: %s\n", first.tensor_core ? "run here" : "do not run here",
                   first.tensor_core ? choice.kernel : rudnn_last_error());
            t->dtype = dtype_of(w->id);
            rudnn_queue_destroy(t->queue);
        }
    }
    pthread_barrier_wait(&first.barrier); /* first.shared is set (or NULL: thread 0 failed) */
    ok = ok && first.shared;
    rudnn_queue_t shared_queue = NULL;
    ok = ok && tw_ok(t, "queue_create(shared)", rudnn_queue_create(first.shared, &shared_queue)) &&
         tw_ok(t, "queue_create(own)", rudnn_queue_create(own, &own_queue));
    pthread_barrier_wait(&first.barrier);
    /* every thread's first op on the shared context at once, then on its own */
    t->ctx = first.shared;
    t->queue = shared_queue;
    ok = ok && tw_norm_round(t);
    pthread_barrier_wait(&first.barrier);
    if (first.tensor_core) { /* the shared context's first TensorCore forwards, all at once */
        t->dtype = RUDNN_BF16;
        /* called whatever ok is: it waits on the barrier in any case */
        int moe_ok = tw_moe_round(t, &first.experts, RUDNN_MOE_TENSOR_CORE, &first.barrier);
        ok = ok && moe_ok;
        t->dtype = dtype_of(w->id);
    }
    t->ctx = own;
    t->queue = own_queue;
    ok = ok && tw_norm_round(t);
    if (shared_queue)
        rudnn_queue_destroy(shared_queue);
    if (own_queue)
        rudnn_queue_destroy(own_queue);
    pthread_barrier_wait(&first.barrier); /* thread 0 destroys the shared context last */
    if (w->id == 0)
        tw_experts_destroy(&first.experts);
    else
        rudnn_context_destroy(own);
    return NULL;
}

static void test_first_use(void **state)
{
    (void)state;
    make_alias_path();
    pthread_barrier_init(&first.barrier, NULL, THREADS);
    worker_t w[THREADS];
    for (int i = 0; i < THREADS; i++)
        worker_init(&w[i], i, NULL, "first_use");
    start(w, THREADS, first_use_thread);
    for (int i = 0; i < THREADS; i++)
        pthread_join(w[i].handle, NULL);
    rudnn_context_destroy(first.shared);
    pthread_barrier_destroy(&first.barrier);
    if (first.create[0] == RUDNN_STATUS_BACKEND_UNAVAILABLE) { /* no backend: skip, or fail if required */
        for (int i = 0; i < THREADS; i++)
            free(w[i].t.log);
        rt_open_or_skip("threads-first-use");
        fail_msg("context_create failed in a thread but not in the main thread");
    }
    rt_log_t *all = rt_log_new();
    for (int i = 0; i < THREADS; i++) {
        rt_logf(all, "%s", w[i].t.log->text);
        all->failures += w[i].t.log->failures;
        if (first.create[i] != first.create[0]) {
            rt_logf(all, "  thread %d: context_create returned %s, thread 0 %s\n", i,
                    rudnn_status_string(first.create[i]), rudnn_status_string(first.create[0]));
            all->failures++;
        }
        free(w[i].t.log);
    }
    rt_log_finish_free(all, "check(s)");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "first-use") == 0) {
#if defined(__SANITIZE_ADDRESS__)
        /* A thread that made the process's first context (PoCL loads LLVM in it) dies in ASan's own
         * thread teardown (gcc 12: "unable to unmap" its alternate signal stack; LLVM installs one
         * of its own, we believe): a sanitizer conflict outside rudnn. Plain and TSan runs cover it. */
        printf("threads-first-use: SKIPPED under AddressSanitizer (its thread teardown fails after PoCL)\n");
        return RT_EXIT_SKIP;
#endif
        const struct CMUnitTest tests[] = {cmocka_unit_test(test_first_use)};
        return rt_exit_code(cmocka_run_group_tests_name("threads-first-use", tests, NULL, NULL));
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_context),
        cmocka_unit_test(test_own_contexts),
        cmocka_unit_test(test_per_thread_state),
        cmocka_unit_test(test_grid_sizes),
    };
    if (argc > 1 && strcmp(argv[1], "rounds") != 0)
        cmocka_set_test_filter(argv[1]);
    rt_open_or_skip("threads");
    return rt_exit_code(cmocka_run_group_tests_name("threads", tests, NULL, rt_group_teardown));
}
