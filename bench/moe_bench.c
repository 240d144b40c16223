/* rudnn-bench-moe: times the MoE forward (routing, dispatch, SwiGLU experts, combine) and the
 * routing alone, on the model shapes. One JSON line per case, as rudnn-bench.
 *
 *   rudnn-bench-moe [--backend NAME] [--quick] [--reps N] [--strategy scalar|auto|tensor_core]
 *                   [--kernel NAME] (one of rudnn_swiglu_experts_kernel_info's names)
 *                   [--case NAME] [--only forward|route]
 *
 * Routing rows carry three figures: median_ms (an event pair around each call, the GPU idle
 * before it: what one call costs a caller, launch latency included), b2b_ms (50 calls back to
 * back between two events, divided by 50: the throughput when calls queue up) and host_us (the
 * median CPU time of one call: validation, plan memory, launch).
 *
 * Inputs are pseudo-random bf16 (never zeros): a 32 MiB random block is written once and copied
 * over the large weight buffers on the device. */
#include <math.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/rudnn.h>

typedef struct moe_case {
    const char *name;
    int experts, top_k;
    int64_t hidden, inter, tokens;
    int grouped; /* 1: also time grouped sigmoid routing (DeepSeek-V3 style) */
} moe_case_t;

static const moe_case_t full_cases[] = {
    {"mixtral", 8, 2, 4096, 14336, 4096, 0},
    {"deepseek_v3_t4096", 256, 8, 7168, 2048, 4096, 1},
    {"deepseek_v3_t128", 256, 8, 7168, 2048, 128, 1},
    {"qwen3", 128, 8, 2048, 768, 4096, 0},
};
static const moe_case_t quick_cases[] = {
    {"quick", 8, 2, 128, 96, 64, 1},
};

static void check(rudnn_status_t st, const char *what)
{
    if (st != RUDNN_STATUS_SUCCESS) {
        fprintf(stderr, "rudnn-bench-moe: %s: %s: %s\n", what, rudnn_status_string(st), rudnn_last_error());
        exit(1);
    }
}

static uint64_t rng = 0x243f6a8885a308d3ULL;
static float uniform(float lo, float hi)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    float u = (float)((rng >> 40) + 1) / (float)(1 << 24); /* (0, 1] */
    return lo + (hi - lo) * u;
}

/* Fills a bf16 buffer of n elements with values in [-scale, scale]. */
static void fill(rudnn_queue_t q, rudnn_buffer_t b, size_t n, float scale)
{
    const size_t block = (size_t)16 << 20; /* elements: 32 MiB of bf16 */
    if (n == 0)
        return;
    size_t first = n < block ? n : block;
    float *f = calloc(first, sizeof *f);
    uint16_t *h = malloc(first * sizeof *h);
    if (!f || !h) {
        fprintf(stderr, "rudnn-bench-moe: out of host memory\n");
        exit(1);
    }
    for (size_t i = 0; i < first; i++)
        f[i] = uniform(-scale, scale);
    rudnn_convert_from_f32(RUDNN_BF16, f, h, first);
    check(rudnn_buffer_write(q, b, 0, h, first * 2), "write");
    for (size_t done = first; done < n; done += first) {
        size_t chunk = n - done < first ? n - done : first;
        check(rudnn_buffer_copy(q, b, done * 2, b, 0, chunk * 2), "copy");
    }
    free(f);
    free(h);
}

static rudnn_buffer_t tensor(rudnn_context_t ctx, rudnn_tensor_t *t, rudnn_dtype_t dt, int rank,
                             const int64_t *dims)
{
    size_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= (size_t)dims[i];
    rudnn_buffer_t b;
    check(rudnn_buffer_create(ctx, n * rudnn_dtype_size(dt), &b), "buffer_create");
    check(rudnn_tensor_init(t, b, 0, dt, rank, dims), "tensor_init");
    return b;
}

static int cmpf(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

typedef enum { WHAT_FORWARD, WHAT_ROUTE, WHAT_ROUTE_GROUPED } what_t;

typedef struct run_args {
    rudnn_queue_t q;
    rudnn_swiglu_experts_t experts;
    const rudnn_tensor_t *input, *logits, *bias, *output;
    const moe_case_t *c;
    rudnn_moe_strategy_t strategy;
    const char *kernel; /* the expert kernel the forward runs (rudnn_swiglu_experts_choose) */
} run_args_t;

/* The full forward through the split path (so the strategy applies): route, dispatch,
 * experts, combine. */
static void run_once(const run_args_t *a, what_t what)
{
    rudnn_routing_plan_t plan = NULL;
    if (what == WHAT_ROUTE_GROUPED) {
        const int groups = a->c->experts >= 64 ? 8 : a->c->experts / 2; /* DeepSeek-V3: 8 groups, 4 chosen */
        rudnn_grouped_routing_options_t go = {.top_k = a->c->top_k, .groups = groups, .selected_groups = groups / 2,
                                              .group_top_two = 1, .renormalize = 1, .scale = 2.5f};
        check(rudnn_moe_route_sigmoid_grouped(a->q, a->logits, a->bias, &go, &plan), "route_sigmoid_grouped");
        rudnn_routing_plan_destroy(plan);
        return;
    }
    rudnn_routing_options_t ro = {.top_k = a->c->top_k, .renormalize = 1};
    check(rudnn_moe_route(a->q, a->logits, &ro, &plan), "route");
    if (what == WHAT_FORWARD) {
        rudnn_dispatched_t d;
        check(rudnn_moe_dispatch(a->q, plan, a->input, &d), "dispatch");
        rudnn_tensor_t eo;
        int64_t dims[2] = {a->c->tokens * a->c->top_k, a->c->hidden};
        rudnn_buffer_t eb = tensor(rudnn_queue_context(a->q), &eo, RUDNN_BF16, 2, dims);
        check(rudnn_swiglu_experts_forward_dispatched(a->q, a->experts, d, a->strategy, NULL, 0, &eo),
              "forward_dispatched");
        check(rudnn_moe_combine(a->q, d, &eo, a->output), "combine");
        rudnn_buffer_destroy(eb);
        rudnn_dispatched_destroy(d);
    }
    rudnn_routing_plan_destroy(plan);
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void time_case(const run_args_t *a, what_t what, int reps, const char *backend, const char *device)
{
    rudnn_context_t ctx = rudnn_queue_context(a->q);
    for (int i = 0; i < 2; i++)
        run_once(a, what);
    check(rudnn_queue_synchronize(a->q), "synchronize");
    float *ms = calloc((size_t)reps, sizeof *ms);
    float *host = calloc((size_t)reps, sizeof *host);
    rudnn_event_t e0, e1;
    check(rudnn_event_create(ctx, &e0), "event");
    check(rudnn_event_create(ctx, &e1), "event");
    for (int r = 0; r < reps; r++) {
        check(rudnn_event_record(e0, a->q), "record");
        double h0 = now_us();
        run_once(a, what);
        host[r] = (float)(now_us() - h0);
        check(rudnn_event_record(e1, a->q), "record");
        check(rudnn_event_elapsed_ms(e0, e1, &ms[r]), "elapsed");
    }
    float b2b = 0.0f;
    if (what != WHAT_FORWARD) { /* back to back: launches queue up, the GPU never waits */
        const int n = 50;
        check(rudnn_queue_synchronize(a->q), "synchronize");
        check(rudnn_event_record(e0, a->q), "record");
        for (int r = 0; r < n; r++)
            run_once(a, what);
        check(rudnn_event_record(e1, a->q), "record");
        check(rudnn_event_elapsed_ms(e0, e1, &b2b), "elapsed");
        b2b /= (float)n;
    }
    rudnn_event_destroy(e0);
    rudnn_event_destroy(e1);
    qsort(ms, (size_t)reps, sizeof *ms, cmpf);
    qsort(host, (size_t)reps, sizeof *host, cmpf);
    const moe_case_t *c = a->c;
    double flops = what == WHAT_FORWARD ? 6.0 * (double)c->tokens * c->top_k * (double)c->hidden * (double)c->inter : 0;
    double weight_bytes = 3.0 * c->experts * (double)c->hidden * (double)c->inter * 2;
    double median = ms[reps / 2];
    const char *op = what == WHAT_FORWARD ? "moe_forward" : what == WHAT_ROUTE ? "moe_route" : "moe_route_grouped";
    const char *strategy = what != WHAT_FORWARD ? "default"
                           : a->strategy == RUDNN_MOE_SCALAR ? "scalar"
                           : a->strategy == RUDNN_MOE_AUTO ? "auto" : "tensor_core";
    printf("{\"op\":\"%s\",\"case\":\"%s\",\"shape\":{\"T\":%lld,\"E\":%d,\"top_k\":%d,\"H\":%lld,\"I\":%lld},"
           "\"dtype\":\"bf16\",\"backend\":\"%s\",\"device\":\"%s\",\"strategy\":\"%s\",\"kernel\":\"%s\","
           "\"median_ms\":%.4f,"
           "\"min_ms\":%.4f,\"tflops\":%.1f,\"weight_gbps\":%.1f,\"host_us\":%.1f",
           op, c->name, (long long)c->tokens, c->experts, c->top_k, (long long)c->hidden, (long long)c->inter,
           backend, device, strategy, what == WHAT_FORWARD ? a->kernel : "", median, ms[0], what == WHAT_FORWARD ? flops / (median * 1e9) : 0.0,
           what == WHAT_FORWARD ? weight_bytes / (median * 1e6) : 0.0, host[reps / 2]);
    if (what != WHAT_FORWARD)
        printf(",\"b2b_ms\":%.4f", b2b);
    printf(",\"reps\":%d}\n", reps);
    fflush(stdout);
    free(ms);
    free(host);
}

int main(int argc, char **argv)
{
    const char *backend = NULL;
    const char *only_case = NULL, *only = NULL;
    int quick = 0, reps = 10;
    rudnn_moe_strategy_t strategy = RUDNN_MOE_AUTO;
    const char *kernel = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            backend = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]) > 0 ? atoi(argv[i]) : 1;
        else if (!strcmp(argv[i], "--case") && i + 1 < argc)
            only_case = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc && (!strcmp(argv[i + 1], "forward") ||
                                                                 !strcmp(argv[i + 1], "route")))
            only = argv[++i];
        else if (!strcmp(argv[i], "--kernel") && i + 1 < argc)
            kernel = argv[++i];
        else if (!strcmp(argv[i], "--strategy") && i + 1 < argc) {
            const char *s = argv[++i];
            strategy = !strcmp(s, "scalar") ? RUDNN_MOE_SCALAR
                       : !strcmp(s, "tensor_core") ? RUDNN_MOE_TENSOR_CORE : RUDNN_MOE_AUTO;
        } else {
            fprintf(stderr, "usage: rudnn-bench-moe [--backend NAME] [--quick] [--reps N] "
                            "[--strategy scalar|auto|tensor_core] [--kernel NAME] [--case NAME] "
                            "[--only forward|route]\n");
            return 2;
        }
    }
    rudnn_context_options_t opt = {.backend = backend, .device = -1, .plugin_path = NULL};
    rudnn_context_t ctx;
    check(rudnn_context_create(&ctx, &opt), "context_create");
    rudnn_device_info_t info;
    check(rudnn_context_device_info(ctx, &info), "device_info");
    rudnn_queue_t q;
    check(rudnn_queue_create(ctx, &q), "queue_create");

    const moe_case_t *cases = quick ? quick_cases : full_cases;
    size_t ncases = quick ? 1 : sizeof full_cases / sizeof full_cases[0];
    for (size_t i = 0; i < ncases; i++) {
        const moe_case_t *c = &cases[i];
        if (only_case && strcmp(only_case, c->name))
            continue;
        rudnn_tensor_t gate, up, down, input, logits, output, bias;
        int64_t gd[3] = {c->experts, c->inter, c->hidden}, dd[3] = {c->experts, c->hidden, c->inter};
        int64_t xd[2] = {c->tokens, c->hidden}, ld[2] = {c->tokens, c->experts}, bd[1] = {c->experts};
        rudnn_buffer_t bufs[7];
        bufs[0] = tensor(ctx, &gate, RUDNN_BF16, 3, gd);
        bufs[1] = tensor(ctx, &up, RUDNN_BF16, 3, gd);
        bufs[2] = tensor(ctx, &down, RUDNN_BF16, 3, dd);
        bufs[3] = tensor(ctx, &input, RUDNN_BF16, 2, xd);
        bufs[4] = tensor(ctx, &logits, RUDNN_BF16, 2, ld);
        bufs[5] = tensor(ctx, &output, RUDNN_BF16, 2, xd);
        bufs[6] = tensor(ctx, &bias, RUDNN_F32, 1, bd);
        float wscale = 1.0f / sqrtf((float)c->hidden);
        fill(q, bufs[0], (size_t)rudnn_tensor_numel(&gate), wscale);
        fill(q, bufs[1], (size_t)rudnn_tensor_numel(&up), wscale);
        fill(q, bufs[2], (size_t)rudnn_tensor_numel(&down), 1.0f / sqrtf((float)c->inter));
        fill(q, bufs[3], (size_t)rudnn_tensor_numel(&input), 1.0f);
        fill(q, bufs[4], (size_t)rudnn_tensor_numel(&logits), 2.0f);
        float *b = malloc((size_t)c->experts * sizeof *b);
        for (int e = 0; e < c->experts; e++)
            b[e] = uniform(-0.1f, 0.1f);
        check(rudnn_tensor_write(q, &bias, b, (size_t)c->experts * 4), "write bias");
        free(b);

        rudnn_swiglu_experts_t experts;
        check(rudnn_swiglu_experts_create(ctx, &gate, &up, &down, &experts), "experts_create");
        /* --kernel names the expert kernel (e.g. moe.cublas_grouped: cuBLAS's grouped GEMMs) */
        if (kernel)
            check(rudnn_swiglu_experts_set_kernel(experts, kernel), "swiglu_experts_set_kernel");
        rudnn_moe_choice_t choice;
        check(rudnn_swiglu_experts_choose(experts, NULL, NULL, strategy, &choice), "swiglu_experts_choose");
        run_args_t a = {q, experts, &input, &logits, &bias, &output, c, strategy, choice.kernel};
        if (!only || !strcmp(only, "forward"))
            time_case(&a, WHAT_FORWARD, reps, info.backend, info.name);
        if ((c->tokens == 4096 || quick) && (!only || !strcmp(only, "route"))) {
            time_case(&a, WHAT_ROUTE, reps * 5, info.backend, info.name);
            if (c->grouped)
                time_case(&a, WHAT_ROUTE_GROUPED, reps * 5, info.backend, info.name);
        }
        rudnn_swiglu_experts_destroy(experts);
        for (int k = 0; k < 7; k++)
            rudnn_buffer_destroy(bufs[k]);
    }
    rudnn_queue_destroy(q);
    rudnn_context_destroy(ctx);
    return 0;
}
