/* rudnn-bench --tune attention: runs rudnn_attention with RUDNN_ATTENTION_AUTOTUNE over a list of
 * shape buckets and dtypes, so that the autotune cache holds their winners before an application
 * needs them (DESIGN.md 5), and prints one progress line per case:
 *   tune attention 3/24: bf16 b4 h32 q4096 k4096 d128 -> attention.flash_unit 1.234 ms
 * (the kernel rudnn_attention_resolve reports, and its median time over a few runs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rudnn/rudnn.h"
#include "tune.h"

#define TIMED_RUNS 5

typedef struct att_shape {
    int64_t b, h, hkv, sq, skv, d;
} att_shape_t;

/* Decode, prefill and training-like buckets; GQA in some. */
static const att_shape_t full_shapes[] = {
    {1, 32, 8, 1, 4096, 128},     {16, 32, 8, 1, 2048, 128},   {1, 32, 32, 512, 512, 64},
    {8, 8, 8, 256, 256, 64},      {4, 32, 32, 1024, 1024, 128}, {4, 32, 8, 4096, 4096, 128},
    {2, 16, 16, 2048, 2048, 256}, {1, 8, 8, 8192, 8192, 64},
};
static const att_shape_t quick_shapes[] = {
    {1, 4, 2, 1, 256, 64}, {1, 4, 4, 64, 64, 64}, {2, 2, 2, 128, 128, 32},
};
static const rudnn_dtype_t dtypes[] = {RUDNN_BF16, RUDNN_F16, RUDNN_F32};

typedef struct case_bufs {
    rudnn_buffer_t q, k, v, out;
    rudnn_tensor_t tq, tk, tv, tout;
} case_bufs_t;

static rudnn_status_t make_tensor(rudnn_context_t ctx, rudnn_queue_t queue, rudnn_dtype_t dt,
                                  const int64_t dims[4], rudnn_buffer_t *buf, rudnn_tensor_t *t)
{
    size_t bytes = (size_t)(dims[0] * dims[1] * dims[2] * dims[3]) * rudnn_dtype_size(dt);
    rudnn_status_t st = rudnn_buffer_create(ctx, bytes ? bytes : 1, buf);
    if (st == RUDNN_STATUS_SUCCESS)
        st = rudnn_tensor_init(t, *buf, 0, dt, 4, dims);
    if (st == RUDNN_STATUS_SUCCESS && bytes) /* zeros: any finite values time the same */
        st = rudnn_buffer_fill(queue, *buf, 0, 0, bytes);
    return st;
}

static void free_case(case_bufs_t *c)
{
    rudnn_buffer_destroy(c->q);
    rudnn_buffer_destroy(c->k);
    rudnn_buffer_destroy(c->v);
    rudnn_buffer_destroy(c->out);
    memset(c, 0, sizeof *c);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Tunes one case (the first call with AUTOTUNE times the candidates and stores the winner), then
 * times the resolved kernel. 0 done, 1 skipped (why in why), -1 failed. */
static int tune_case(rudnn_context_t ctx, rudnn_queue_t queue, const att_shape_t *s, rudnn_dtype_t dt,
                     uint64_t memory, const char **kernel, float *ms, char *why, size_t cap)
{
    int64_t qd[4] = {s->b, s->h, s->sq, s->d}, kd[4] = {s->b, s->hkv, s->skv, s->d};
    size_t es = rudnn_dtype_size(dt);
    double bytes = (double)es * (2.0 * s->b * s->h * s->sq * s->d + 2.0 * s->b * s->hkv * s->skv * s->d);
    if (bytes > (double)memory / 4) {
        snprintf(why, cap, "needs %.0f MiB, more than a quarter of the device memory", bytes / 1048576.0);
        return 1;
    }
    case_bufs_t c;
    memset(&c, 0, sizeof c);
    rudnn_event_t start = NULL, stop = NULL;
    int rc = -1;
    rudnn_status_t st;
    if ((st = make_tensor(ctx, queue, dt, qd, &c.q, &c.tq)) != RUDNN_STATUS_SUCCESS ||
        (st = make_tensor(ctx, queue, dt, kd, &c.k, &c.tk)) != RUDNN_STATUS_SUCCESS ||
        (st = make_tensor(ctx, queue, dt, kd, &c.v, &c.tv)) != RUDNN_STATUS_SUCCESS ||
        (st = make_tensor(ctx, queue, dt, qd, &c.out, &c.tout)) != RUDNN_STATUS_SUCCESS)
        goto done;
    st = rudnn_attention(queue, &c.tq, &c.tk, &c.tv, NULL, NULL, NULL, RUDNN_ATTENTION_AUTOTUNE, NULL, 0,
                         &c.tout, NULL);
    if (st == RUDNN_STATUS_NOT_SUPPORTED) {
        snprintf(why, cap, "%s", rudnn_last_error());
        rc = 1;
        goto done;
    }
    if (st != RUDNN_STATUS_SUCCESS)
        goto done;
    rudnn_attention_choice_t choice;
    if ((st = rudnn_attention_resolve(queue, &c.tq, &c.tk, &c.tv, NULL, NULL, NULL, RUDNN_ATTENTION_AUTOTUNE,
                                      &c.tout, NULL, &choice)) != RUDNN_STATUS_SUCCESS)
        goto done;
    *kernel = choice.kernel;
    float t[TIMED_RUNS];
    if ((st = rudnn_event_create(ctx, &start)) != RUDNN_STATUS_SUCCESS ||
        (st = rudnn_event_create(ctx, &stop)) != RUDNN_STATUS_SUCCESS)
        goto done;
    for (int r = 0; r < TIMED_RUNS; r++) {
        if ((st = rudnn_event_record(start, queue)) != RUDNN_STATUS_SUCCESS ||
            (st = rudnn_attention(queue, &c.tq, &c.tk, &c.tv, NULL, NULL, NULL, RUDNN_ATTENTION_AUTOTUNE, NULL,
                                  0, &c.tout, NULL)) != RUDNN_STATUS_SUCCESS ||
            (st = rudnn_event_record(stop, queue)) != RUDNN_STATUS_SUCCESS ||
            (st = rudnn_event_elapsed_ms(start, stop, &t[r])) != RUDNN_STATUS_SUCCESS)
            goto done;
    }
    qsort(t, TIMED_RUNS, sizeof t[0], cmp_float);
    *ms = t[TIMED_RUNS / 2];
    rc = 0;
done:
    if (rc < 0)
        snprintf(why, cap, "%s: %s", rudnn_status_string(st), rudnn_last_error());
    rudnn_event_destroy(start);
    rudnn_event_destroy(stop);
    free_case(&c);
    return rc;
}

static const char *dtype_text(rudnn_dtype_t dt)
{
    return dt == RUDNN_BF16 ? "bf16" : dt == RUDNN_F16 ? "f16" : "f32";
}

int bench_tune_attention(const char *backend, int device, int quick)
{
    if (!rudnn_autotune_is_enabled()) {
        fprintf(stderr, "rudnn-bench: RUDNN_AUTOTUNE=off: nothing would be kept; unset it to tune\n");
        return 1;
    }
    rudnn_context_options_t copts;
    memset(&copts, 0, sizeof copts);
    copts.backend = backend;
    copts.device = device;
    rudnn_context_t ctx = NULL;
    rudnn_queue_t queue = NULL;
    rudnn_device_info_t dev;
    if (rudnn_context_create(&ctx, &copts) != RUDNN_STATUS_SUCCESS ||
        rudnn_context_device_info(ctx, &dev) != RUDNN_STATUS_SUCCESS ||
        rudnn_queue_create(ctx, &queue) != RUDNN_STATUS_SUCCESS) {
        fprintf(stderr, "rudnn-bench: %s\n", rudnn_last_error());
        rudnn_context_destroy(ctx);
        return 1;
    }
    char path[4096] = "";
    rudnn_autotune_cache_path(path, sizeof path);
    printf("tune attention on %s device %d: %s; cache %s\n", dev.backend, dev.index, dev.name,
           path[0] ? path : "(none: winners kept for this process only)");
    const att_shape_t *shapes = quick ? quick_shapes : full_shapes;
    int shape_count = quick ? (int)(sizeof quick_shapes / sizeof quick_shapes[0])
                            : (int)(sizeof full_shapes / sizeof full_shapes[0]);
    int dtype_count = (int)(sizeof dtypes / sizeof dtypes[0]);
    int total = shape_count * dtype_count, done = 0, failed = 0;
    for (int si = 0; si < shape_count; si++) {
        for (int di = 0; di < dtype_count; di++) {
            const att_shape_t *s = &shapes[si];
            const char *kernel = "?";
            float ms = 0;
            char why[1024] = "";
            int rc = tune_case(ctx, queue, s, dtypes[di], dev.global_memory_bytes, &kernel, &ms, why, sizeof why);
            printf("tune attention %d/%d: %s b%lld h%lld", ++done, total, dtype_text(dtypes[di]), (long long)s->b,
                   (long long)s->h);
            if (s->hkv != s->h)
                printf(" kv%lld", (long long)s->hkv);
            printf(" q%lld k%lld d%lld -> ", (long long)s->sq, (long long)s->skv, (long long)s->d);
            if (rc == 0)
                printf("%s %.3f ms\n", kernel, ms);
            else
                printf("%s: %s\n", rc > 0 ? "skipped" : "FAILED", why);
            fflush(stdout);
            failed += rc < 0;
        }
    }
    rudnn_queue_destroy(queue);
    rudnn_context_destroy(ctx);
    return failed ? 1 : 0;
}
