/* Allocation-fault walk: for every op case of every family (tests/faults/<family>.c), in every
 * state it lists (cold context, cold queue, warm), count the allocations the call makes, then
 * for N = 1..count make the Nth fail (rudnn/debug.h) and check that the call
 *  - returns RUDNN_STATUS_ALLOC_FAILED with a message naming the op,
 *  - left its outputs byte-for-byte unchanged (sentinel fill, read back),
 *  - left nothing allocated (rudnn_debug_live_objects and rudnn_debug_device_memory back to
 *    where they were; the ASan/LSan run of the suite checks host memory as well),
 *  - and that the same call then succeeds with the result of the fault-free run.
 * A call that makes no allocation in a state (a GPU backend's plain launch) must instead succeed,
 * with the fault-free result, while every allocation fails. On OpenCL every op allocates from a
 * cold context (its program's cache entry), so there a cold count of 0 means the hook is not
 * wired, and fails. Runs on the default backend (OpenCL on PoCL in CI). argv[1]: one family
 * (core, norm, moe, attention, ffn, gated_delta, paged_attention, moe_train, convolution, pooling,
 * interpolation, ctc, grid_sample). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "faults/fault_case.h"
#include <rudnn/debug.h>

static const fault_family_t *const families[] = {&fault_family_core, &fault_family_norm, &fault_family_moe,
                                                 &fault_family_attention, &fault_family_ffn,
                                                 &fault_family_gated_delta, &fault_family_paged_attention,
                                                 &fault_family_moe_train, &fault_family_convolution,
                                                 &fault_family_pooling, &fault_family_interpolation,
                                                 &fault_family_ctc, &fault_family_grid_sample};

/* Logs one failed check (rt_logf only appends text). */
#define fault_fail(log, ...)                                                                                 \
    do {                                                                                                     \
        (log)->failures++;                                                                                   \
        rt_logf((log), __VA_ARGS__);                                                                         \
    } while (0)

static char skip_reason[512]; /* why the last run_once returned -1 */
static int opencl_backend;    /* rt_ctx is on OpenCL: every op allocates from a cold context */

static const char *label(const fault_case_t *c) { return c->label ? c->label : c->name; }

static const char *mode_name(unsigned mode)
{
    return mode == FAULT_COLD_CONTEXT ? "cold context" : mode == FAULT_COLD_QUEUE ? "cold queue" : "warm";
}

/* What rudnn holds; equal before and after a step that cleaned up after itself. */
typedef struct holdings {
    uint64_t objects, device_allocations, device_bytes;
} holdings_t;

static holdings_t holdings(void)
{
    holdings_t h = {rudnn_debug_live_objects(), 0, 0};
    rudnn_debug_device_memory(&h.device_allocations, &h.device_bytes);
    return h;
}

static int env_open(unsigned mode, int variant, fault_env_t *env)
{
    env->ctx = rt_ctx;
    env->variant = variant;
    if (mode == FAULT_COLD_CONTEXT && rudnn_context_create(&env->ctx, NULL) != RUDNN_STATUS_SUCCESS)
        return 0;
    if (rudnn_queue_create(env->ctx, &env->queue) != RUDNN_STATUS_SUCCESS) {
        if (env->ctx != rt_ctx)
            rudnn_context_destroy(env->ctx);
        return 0;
    }
    return 1;
}

static void env_close(fault_env_t *env)
{
    rudnn_queue_destroy(env->queue);
    if (env->ctx != rt_ctx)
        rudnn_context_destroy(env->ctx);
}

/* One run of case c in mode: set up, warm up (FAULT_WARM), arm the fault at fail_at (0: none),
 * call. Fills *count with the allocations counted, *result with the result of a successful
 * call (fail_at 0, or a call that must not fail: must_fail 0) or of the retry after the failure;
 * logs what is wrong. Returns 1 if it ran, -1 if the case cannot run here (skip_reason says why),
 * 0 if it failed. */
static int run_once(const fault_case_t *c, unsigned mode, uint64_t fail_at, int must_fail, uint64_t *count,
                    uint8_t **result, size_t *result_size, rt_log_t *log)
{
    const char *m = mode_name(mode);
    fault_env_t env;
    rudnn_debug_fail_allocation(0);
    if (!env_open(mode, c->variant, &env)) {
        fault_fail(log, "%s (%s): could not open a context/queue: %s\n", label(c), m, rudnn_last_error());
        return 0;
    }
    void *state = rt_xcalloc(1, c->state_size);
    int ran = 0;
    rudnn_status_t st = c->setup(state, &env);
    if (!st && mode == FAULT_WARM) {
        st = c->prepare(state);
        if (!st)
            st = c->call(state);
        if (!st)
            c->undo(state);
    }
    if (!st)
        st = c->prepare(state);
    if (st == RUDNN_STATUS_NOT_SUPPORTED) {
        ran = -1;
        snprintf(skip_reason, sizeof skip_reason, "%s", rudnn_last_error());
        goto done;
    }
    if (st) {
        fault_fail(log, "%s (%s): setup failed: %s: %s\n", label(c), m, rudnn_status_string(st), rudnn_last_error());
        goto done;
    }
    ran = 1;
    rudnn_debug_fail_allocation(fail_at);
    st = c->call(state);
    *count = rudnn_debug_allocation_count();
    rudnn_debug_fail_allocation(0);
    if (fail_at && !must_fail) {
        if (st) {
            fault_fail(log, "%s (%s), every allocation failing: a call that made %llu allocations failed: %s: %s\n",
                       label(c), m, (unsigned long long)*count, rudnn_status_string(st), rudnn_last_error());
            goto done;
        }
    } else if (fail_at) {
        char message[512];
        snprintf(message, sizeof message, "%s", rudnn_last_error());
        if (st == RUDNN_STATUS_SUCCESS) {
            fault_fail(log, "%s (%s), allocation %llu failing: the call succeeded\n", label(c), m,
                    (unsigned long long)fail_at);
            c->undo(state);
            goto done;
        }
        if (*count < fail_at)
            fault_fail(log, "%s (%s), allocation %llu failing: the call made only %llu allocations\n", label(c), m,
                    (unsigned long long)fail_at, (unsigned long long)*count);
        if (st != RUDNN_STATUS_ALLOC_FAILED)
            fault_fail(log, "%s (%s), allocation %llu failing: %s, expected RUDNN_STATUS_ALLOC_FAILED (%s)\n", label(c),
                    m, (unsigned long long)fail_at, rudnn_status_string(st), message);
        if (!strstr(message, c->name))
            fault_fail(log, "%s (%s), allocation %llu failing: the message does not name the op: \"%s\"\n", label(c),
                    m, (unsigned long long)fail_at, message);
        char why[256];
        if (!c->unchanged(state, why, sizeof why))
            fault_fail(log, "%s (%s), allocation %llu failing: %s\n", label(c), m, (unsigned long long)fail_at, why);
        st = c->call(state); /* the same call, nothing failing */
        if (st) {
            fault_fail(log, "%s (%s), after allocation %llu failed: the retry failed: %s: %s\n", label(c), m,
                    (unsigned long long)fail_at, rudnn_status_string(st), rudnn_last_error());
            goto done;
        }
    } else if (st) {
        fault_fail(log, "%s (%s): the fault-free call failed: %s: %s\n", label(c), m, rudnn_status_string(st),
                rudnn_last_error());
        ran = 0;
        goto done;
    }
    st = c->result(state, result, result_size);
    if (st)
        fault_fail(log, "%s (%s): reading the result failed: %s: %s\n", label(c), m, rudnn_status_string(st),
                rudnn_last_error());
    c->undo(state);
done:
    c->teardown(state);
    free(state);
    env_close(&env);
    return ran;
}

/* Walks every allocation of case c in mode; returns the count (0 if none, or on setup failure). */
static uint64_t walk(const fault_case_t *c, unsigned mode, rt_log_t *log)
{
    const char *m = mode_name(mode);
    holdings_t before = holdings();
    uint64_t count = 0;
    uint8_t *reference = NULL;
    size_t reference_size = 0;
    if (run_once(c, mode, 0, 0, &count, &reference, &reference_size, log) != 1)
        return 0;
    if (count == 0) { /* allocation-free here: it must not notice that every allocation would fail */
        uint8_t *got = NULL;
        size_t got_size = 0;
        uint64_t seen = 0;
        if (run_once(c, mode, 1, 0, &seen, &got, &got_size, log) == 1 &&
            (got_size != reference_size || (got_size && memcmp(got, reference, got_size) != 0)))
            fault_fail(log, "%s (%s), every allocation failing: the result differs from the fault-free run\n",
                       label(c), m);
        free(got);
    }
    for (uint64_t n = 1; n <= count; n++) {
        uint64_t seen = 0;
        uint8_t *got = NULL;
        size_t got_size = 0;
        run_once(c, mode, n, 1, &seen, &got, &got_size, log);
        if (got_size != reference_size || (got_size && memcmp(got, reference, got_size) != 0))
            fault_fail(log, "%s (%s), after allocation %llu failed: the retry's result differs from the fault-free "
                    "run (%zu vs %zu bytes)\n", label(c), m, (unsigned long long)n, got_size, reference_size);
        free(got);
        holdings_t after = holdings();
        if (after.objects != before.objects || after.device_allocations != before.device_allocations ||
            after.device_bytes != before.device_bytes)
            fault_fail(log, "%s (%s), allocation %llu failing: left %lld objects, %lld device allocations, %lld "
                    "device bytes behind\n", label(c), m, (unsigned long long)n,
                    (long long)(after.objects - before.objects),
                    (long long)(after.device_allocations - before.device_allocations),
                    (long long)(after.device_bytes - before.device_bytes));
    }
    free(reference);
    return count;
}

static void walk_family(const fault_family_t *f)
{
    rt_log_t *log = rt_log_new();
    uint64_t total = 0;
    for (size_t i = 0; i < f->count; i++) {
        const fault_case_t *c = &f->cases[i];
        /* builds the case's programs on the shared context, so that its cold-queue and warm
         * counts are the same on every run */
        uint64_t primed = 0;
        uint8_t *ignored = NULL;
        size_t ignored_size = 0;
        int ran = run_once(c, FAULT_COLD_QUEUE, 0, 0, &primed, &ignored, &ignored_size, log);
        free(ignored);
        if (ran < 0) {
            printf("faults %-48s skipped: %s\n", label(c), skip_reason);
            continue;
        }
        char line[256];
        size_t len = (size_t)snprintf(line, sizeof line, "faults %-48s", label(c));
        uint64_t cold = 0;
        for (unsigned mode = FAULT_COLD_CONTEXT; mode <= FAULT_WARM; mode <<= 1) {
            if (!(c->modes & mode))
                continue;
            uint64_t n = walk(c, mode, log);
            cold += mode != FAULT_WARM ? n : 0;
            total += n;
            len += (size_t)snprintf(line + len, sizeof line - len, " %s %3llu", mode_name(mode),
                                    (unsigned long long)n);
        }
        printf("%s allocations walked%s\n", line, cold ? "" : " (none: checked with every allocation failing)");
        fflush(stdout);
        if (cold == 0 && opencl_backend) /* a walk that fails nothing proves nothing */
            fault_fail(log, "%s: no allocation counted from a cold OpenCL context: is the hook wired?\n", label(c));
    }
    printf("faults %s: %llu allocations walked in all\n", f->name, (unsigned long long)total);
    rt_log_finish_free(log, "fault checks");
}

static void test_family(void **state) { walk_family(*state); }

int main(int argc, char **argv)
{
    struct CMUnitTest tests[sizeof families / sizeof families[0]];
    size_t n = 0;
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        if (argc > 1 && strcmp(argv[1], families[i]->name) != 0)
            continue;
        tests[n] = (struct CMUnitTest){families[i]->name, test_family, NULL, NULL, (void *)families[i]};
        n++;
    }
    if (n == 0) {
        fprintf(stderr, "test_faults: no family '%s' (core, norm, moe, attention, ffn, gated_delta, "
                        "paged_attention, moe_train, convolution, pooling, interpolation, ctc, grid_sample)\n",
                argv[1]);
        return 1;
    }
    rt_open_or_skip("faults");
    rudnn_device_info_t info;
    opencl_backend = rudnn_context_device_info(rt_ctx, &info) == RUDNN_STATUS_SUCCESS &&
                     strcmp(info.backend, "opencl") == 0;
    int failed = _cmocka_run_group_tests("faults", tests, n, NULL, rt_group_teardown);
    return rt_exit_code(failed);
}
