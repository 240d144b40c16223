/* rudnn-bench-ep: the local kernels of expert parallelism on one device, beside a device-to-device
 * copy measured first in the same run (issue 21's speed figure: BS 512, K 8, H 7168, bf16):
 *
 *   pack:    the dispatch's rows for sending (the MoE table's dispatch_gather: row r = x[token of r],
 *            rows in send order, each token's K rows to their experts' ranks)
 *   combine: the combine's weighted sum of the K returned rows fused with the shared-expert term,
 *            the residual add and RMSNorm (ep_combine_norm), rows in a random return order
 *
 * One JSON line each: {"op","bs","k","h","dtype","backend","device","median_ms","min_ms","bytes",
 * "gbps","copy_gbps","copy_fraction","reps"}. bytes counts what must cross DRAM once: pack reads
 * x once (its K reads of a row hit L2) and writes BS K rows; combine reads BS K rows, the residual
 * and the shared rows, and writes x and y. Two input sets in turn, so no launch finds its rows in
 * L2. The kernels are called through the backend's table (the ops around them exchange between
 * ranks; this binary needs none).
 *   rudnn-bench-ep [--bs N] [--k N] [--h N] [--dtype bf16|f16|f32] [--reps N] [--no-shared] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "core/internal.h"
#include "rudnn/rudnn.h"

#define WARMUP 3
#define PROG "rudnn-bench-ep"
#define SETS 2

#define CHECK(call)                                                                                              \
    do {                                                                                                         \
        rudnn_status_t check_st_ = (call);                                                                       \
        if (check_st_ != RUDNN_STATUS_SUCCESS)                                                                   \
            bench_die(PROG, #call, check_st_);                                                                   \
    } while (0)

typedef struct bench {
    rudnn_context_t ctx;
    rudnn_queue_t q;
    rudnn_device_info_t dev;
    bench_events_t ev;
    int reps;
} bench_t;

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint32_t next_u32(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

static rudnn_buffer_t random_buffer(bench_t *b, size_t bytes)
{
    rudnn_buffer_t buf;
    CHECK(rudnn_buffer_create(b->ctx, bytes, &buf));
    uint16_t *h = bench_xmalloc(PROG, bytes);
    /* small finite values for any float dtype: 0x3c00-0x3dff (f16 ~1-1.5, bf16 ~0.008-0.06) */
    for (size_t i = 0; i < bytes / 2; i++)
        h[i] = (uint16_t)(0x3c00 | (next_u32() & 0x1ff));
    CHECK(rudnn_buffer_write(b->q, buf, 0, h, bytes));
    free(h);
    return buf;
}

static rudnn_buffer_t host_buffer(bench_t *b, const void *h, size_t bytes)
{
    rudnn_buffer_t buf;
    CHECK(rudnn_buffer_create(b->ctx, bytes, &buf));
    CHECK(rudnn_buffer_write(b->q, buf, 0, h, bytes));
    return buf;
}

static void line(bench_t *b, const char *op, int64_t bs, int64_t k, int64_t h, rudnn_dtype_t dt, double bytes,
                 double copy_gbps)
{
    double median, minimum;
    bench_stats(&b->ev, b->reps, &median, &minimum);
    const double gbps = bytes / (median * 1e6);
    printf("{\"op\":\"%s\",\"bs\":%lld,\"k\":%lld,\"h\":%lld,\"dtype\":\"%s\",\"backend\":", op, (long long)bs,
           (long long)k, (long long)h, rudnn_dtype_name(dt));
    bench_json_string(b->dev.backend);
    printf(",\"device\":");
    bench_json_string(b->dev.name);
    printf(",\"median_ms\":%.6f,\"min_ms\":%.6f,\"bytes\":%.0f,\"gbps\":%.2f,\"copy_gbps\":%.2f,"
           "\"copy_fraction\":%.3f,\"reps\":%d}\n",
           median, minimum, bytes, gbps, copy_gbps > 0 ? copy_gbps : gbps, copy_gbps > 0 ? gbps / copy_gbps : 1.0,
           b->reps);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int64_t bs = 512, k = 8, h = 7168;
    rudnn_dtype_t dt = RUDNN_BF16;
    int reps = 50, shared = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--bs") && v)
            bs = atoll(v), i++;
        else if (!strcmp(a, "--k") && v)
            k = atoll(v), i++;
        else if (!strcmp(a, "--h") && v)
            h = atoll(v), i++;
        else if (!strcmp(a, "--reps") && v)
            reps = atoi(v), i++;
        else if (!strcmp(a, "--dtype") && v) {
            dt = !strcmp(v, "f32") ? RUDNN_F32 : !strcmp(v, "f16") ? RUDNN_F16 : RUDNN_BF16;
            i++;
        } else if (!strcmp(a, "--no-shared"))
            shared = 0;
        else {
            fprintf(stderr, "usage: rudnn-bench-ep [--bs N] [--k N] [--h N] [--dtype bf16|f16|f32] [--reps N] "
                            "[--no-shared]\n");
            return 2;
        }
    }
    if (bs < 1 || k < 1 || k > 16 || h < 1 || reps < 1) {
        fprintf(stderr, "rudnn-bench-ep: bs, h >= 1, k in 1..16, reps >= 1\n");
        return 2;
    }
    bench_t b = {.reps = reps};
    CHECK(rudnn_context_create(&b.ctx, NULL));
    CHECK(rudnn_queue_create(b.ctx, &b.q));
    CHECK(rudnn_context_device_info(b.ctx, &b.dev));
    bench_events_create(&b.ev, PROG, b.ctx, reps);
    const rudnn_moe_kernels_t *kt = RUDNN_FAMILY_TABLE(b.ctx->backend, moe);
    if (!kt || !kt->dispatch_gather || !RUDNN_KERNEL_ENTRY(kt, ep_combine_norm)) {
        fprintf(stderr, "rudnn-bench-ep: backend %s lacks the MoE gather or ep_combine_norm kernel\n",
                b.ctx->backend->name);
        return 1;
    }
    const size_t esz = rudnn_dtype_size(dt), row = (size_t)h * esz, rows = (size_t)(bs * k);
    const double copy_gbps = bench_copy(&b.ev, b.ctx, b.q, &b.dev, rows * row, reps);

    /* send order: each token's K rows spread over the destinations, grouped by destination */
    uint32_t *row_token = bench_xmalloc(PROG, rows * sizeof *row_token);
    int32_t *src = bench_xmalloc(PROG, rows * sizeof *src);
    float *scales = bench_xmalloc(PROG, rows * sizeof *scales);
    for (size_t r = 0; r < rows; r++)
        row_token[r] = (uint32_t)(r % (size_t)bs);
    for (size_t r = 0; r < rows; r++) /* the rows come back in a random order */
        src[r] = (int32_t)r;
    for (size_t r = rows - 1; r > 0; r--) {
        const size_t j = next_u32() % (r + 1);
        const int32_t t = src[r];
        src[r] = src[j], src[j] = t;
    }
    for (size_t r = 0; r < rows; r++)
        scales[r] = 1.0f / (float)k;
    rudnn_buffer_t x[SETS], packed[SETS], back[SETS], res[SETS], sh[SETS], y[SETS], xo[SETS], rstd[SETS];
    for (int s = 0; s < SETS; s++) {
        x[s] = random_buffer(&b, (size_t)bs * row);
        CHECK(rudnn_buffer_create(b.ctx, rows * row, &packed[s]));
        back[s] = random_buffer(&b, rows * row);
        res[s] = random_buffer(&b, (size_t)bs * row);
        sh[s] = random_buffer(&b, (size_t)bs * row);
        CHECK(rudnn_buffer_create(b.ctx, (size_t)bs * row, &y[s]));
        CHECK(rudnn_buffer_create(b.ctx, (size_t)bs * row, &xo[s]));
        CHECK(rudnn_buffer_create(b.ctx, (size_t)bs * sizeof(float), &rstd[s]));
    }
    rudnn_buffer_t d_rt = host_buffer(&b, row_token, rows * sizeof *row_token);
    rudnn_buffer_t d_src = host_buffer(&b, src, rows * sizeof *src);
    rudnn_buffer_t d_sc = host_buffer(&b, scales, rows * sizeof *scales);
    rudnn_buffer_t gamma = random_buffer(&b, row);

    const rudnn_moe_rows_plan_t pp = {.dtype = dt, .weight_dtype = dt, .tokens = bs, .top_k = (int32_t)k,
                                      .hidden = h, .rows = (int64_t)rows};
#define PACK(s) kt->dispatch_gather(b.q->handle, &pp, (rudnn_mem_ref_t){x[s]->mem, 0}, \
                                    (rudnn_mem_ref_t){d_rt->mem, 0}, (rudnn_mem_ref_t){packed[s]->mem, 0})
    for (int i = 0; i < WARMUP; i++)
        CHECK(PACK(i % SETS));
    for (int i = 0; i < reps; i++) {
        CHECK(rudnn_event_record(b.ev.start[i], b.q));
        CHECK(PACK(i % SETS));
        CHECK(rudnn_event_record(b.ev.end[i], b.q));
    }
    line(&b, "ep_pack", bs, k, h, dt, (double)((size_t)bs * row + rows * row), copy_gbps);

    const rudnn_ep_combine_plan_t cp = {.dtype = dt, .tokens = bs, .top_k = (int32_t)k, .hidden = h,
                                        .has_shared = shared, .eps = 1e-6f};
    const rudnn_mem_ref_t none = {NULL, 0};
#define COMBINE(s) kt->ep_combine_norm(b.q->handle, &cp, (rudnn_mem_ref_t){back[s]->mem, 0}, \
        (rudnn_mem_ref_t){d_src->mem, 0}, (rudnn_mem_ref_t){d_sc->mem, 0}, \
        shared ? (rudnn_mem_ref_t){sh[s]->mem, 0} : none, none, none, none, none, \
        (rudnn_mem_ref_t){res[s]->mem, 0}, (rudnn_mem_ref_t){gamma->mem, 0}, (rudnn_mem_ref_t){y[s]->mem, 0}, \
        (rudnn_mem_ref_t){rstd[s]->mem, 0}, (rudnn_mem_ref_t){xo[s]->mem, 0})
    for (int i = 0; i < WARMUP; i++)
        CHECK(COMBINE(i % SETS));
    for (int i = 0; i < reps; i++) {
        CHECK(rudnn_event_record(b.ev.start[i], b.q));
        CHECK(COMBINE(i % SETS));
        CHECK(rudnn_event_record(b.ev.end[i], b.q));
    }
    line(&b, shared ? "ep_combine_norm" : "ep_combine_norm_noshared", bs, k, h, dt,
         (double)(rows * row + (size_t)(shared ? 4 : 3) * (size_t)bs * row), copy_gbps);
    CHECK(rudnn_queue_synchronize(b.q));

    for (int s = 0; s < SETS; s++) {
        rudnn_buffer_destroy(x[s]), rudnn_buffer_destroy(packed[s]), rudnn_buffer_destroy(back[s]);
        rudnn_buffer_destroy(res[s]), rudnn_buffer_destroy(sh[s]), rudnn_buffer_destroy(y[s]);
        rudnn_buffer_destroy(xo[s]), rudnn_buffer_destroy(rstd[s]);
    }
    rudnn_buffer_destroy(d_rt), rudnn_buffer_destroy(d_src), rudnn_buffer_destroy(d_sc), rudnn_buffer_destroy(gamma);
    bench_events_destroy(&b.ev);
    free(row_token), free(src), free(scales);
    rudnn_queue_destroy(b.q);
    rudnn_context_destroy(b.ctx);
    return 0;
}
