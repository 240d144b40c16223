/* rudnn-bench-ffn: times rudnn_ffn on issue 22's cases and prints one JSON line per case, beside a
 * device-to-device copy line ("op":"copy") measured first:
 *
 *   {"op":"ffn","case","m","k1","n1","k2","n2","x","w","group_rows","backend","device","kernel",
 *    "median_ms","min_ms","tflops","weight_gbps","copy_gbps","weight_copy_fraction","reps"}
 *
 * tflops = (2 m k1 n1 + 2 m k2 n2) / time (TOPS for int8 x int8). weight_gbps = the weights' bytes
 * (packed int4 counts half a byte a value; antiquant scales included) / time, and its fraction of
 * the copy bandwidth of the same run: what the weight-only cases at small M are judged by.
 * The BF16 cases run HIGH_PERFORMANCE (h rounded to BF16, as PyTorch's baseline) unless "_precise".
 * Expert cases (MoeFFN, "experts" E > 0): m rows grouped by expert, m / E each (the same counts for
 * both sides), on the DeepSeek-V3 expert shapes of rudnn-bench-moe (E 256, top-8, H 7168, I 2048:
 * m = T * 8); each is followed by a line "op":"swiglu_experts" timing rudnn's own SwiGLU experts
 * (rudnn_swiglu_experts_forward_grouped, BF16, Auto) on the same rows and counts in the same run:
 * the baseline issue 22 names for MoeFFN.
 * A case that answers NOT_SUPPORTED prints "status":"NOT_SUPPORTED" and its message.
 *
 *   rudnn-bench-ffn [--backend NAME] [--reps N] [--case NAME[,NAME]] [--quick]
 * Inputs are pseudo-random small values; WARMUP calls, then --reps calls between two events each;
 * median and minimum. Diagnostics go to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "rudnn/rudnn.h"

#define WARMUP 3
#define DEFAULT_REPS 20
#define PROG "rudnn-bench-ffn"

typedef struct ffn_case {
    const char *name;
    int64_t m, k1, k2;
    rudnn_ffn_activation_t act;
    rudnn_dtype_t x, w;
    int64_t group_rows; /* weight-only: 0 per channel, else scale groups of this many rows of K */
    rudnn_ffn_precision_t precision;
    int64_t experts; /* 0: FFN; E: MoeFFN with m / E rows an expert */
} ffn_case_t;

static const ffn_case_t full_cases[] = {
    /* BF16: M 4096, K1 4096, swiglu K2 14336 (N1 28672); HIGH_PERFORMANCE rounds h to BF16 as PyTorch
     * does, HIGH_PRECISION keeps it FP32 */
    {"bf16_m4096_swiglu", 4096, 4096, 14336, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_BF16, 0, RUDNN_FFN_HIGH_PERFORMANCE, 0},
    {"bf16_m4096_swiglu_precise", 4096, 4096, 14336, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_BF16, 0,
     RUDNN_FFN_HIGH_PRECISION, 0},
    /* W8A8: M 4096, K 4096, N 28672 */
    {"w8a8_m4096_swiglu", 4096, 4096, 14336, RUDNN_FFN_SWIGLU, RUDNN_I8, RUDNN_I8, 0, RUDNN_FFN_HIGH_PRECISION, 0},
    /* W4A16 per group of 128 rows on a 70B-class FFN (K1 8192, N1 28672), and BF16 beside it */
    {"w4a16_g128_m1", 1, 8192, 14336, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_I4, 128, RUDNN_FFN_HIGH_PRECISION, 0},
    {"w4a16_g128_m4", 4, 8192, 14336, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_I4, 128, RUDNN_FFN_HIGH_PRECISION, 0},
    {"w4a16_g128_m8", 8, 8192, 14336, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_I4, 128, RUDNN_FFN_HIGH_PRECISION, 0},
    {"w4a16_g128_m16", 16, 8192, 14336, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_I4, 128, RUDNN_FFN_HIGH_PRECISION, 0},
    {"w4a16_g128_m32", 32, 8192, 14336, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_I4, 128, RUDNN_FFN_HIGH_PRECISION, 0},
    {"w4a16_g128_m64", 64, 8192, 14336, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_I4, 128, RUDNN_FFN_HIGH_PRECISION, 0},
    {"w4a16_g128_m128", 128, 8192, 14336, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_I4, 128, RUDNN_FFN_HIGH_PRECISION, 0},
    {"w4a16_g128_m256", 256, 8192, 14336, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_I4, 128, RUDNN_FFN_HIGH_PRECISION, 0},
    {"bf16_k8192_m1", 1, 8192, 14336, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_BF16, 0, RUDNN_FFN_HIGH_PERFORMANCE, 0},
    {"bf16_k8192_m4", 4, 8192, 14336, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_BF16, 0, RUDNN_FFN_HIGH_PERFORMANCE, 0},
    {"bf16_k8192_m16", 16, 8192, 14336, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_BF16, 0, RUDNN_FFN_HIGH_PERFORMANCE, 0},
    {"bf16_k8192_m64", 64, 8192, 14336, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_BF16, 0, RUDNN_FFN_HIGH_PERFORMANCE, 0},
    {"bf16_k8192_m128", 128, 8192, 14336, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_BF16, 0, RUDNN_FFN_HIGH_PERFORMANCE, 0},
    {"bf16_k8192_m256", 256, 8192, 14336, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_BF16, 0, RUDNN_FFN_HIGH_PERFORMANCE, 0},
    /* MoeFFN on DeepSeek-V3's experts (E 256, H 7168, I 2048), T 4096 and 128 tokens routed top-8 */
    {"moe_dsv3_t4096_bf16", 4096 * 8, 7168, 2048, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_BF16, 0,
     RUDNN_FFN_HIGH_PERFORMANCE, 256},
    {"moe_dsv3_t4096_w4a16_g128", 4096 * 8, 7168, 2048, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_I4, 128,
     RUDNN_FFN_HIGH_PERFORMANCE, 256},
    {"moe_dsv3_t128_bf16", 128 * 8, 7168, 2048, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_BF16, 0,
     RUDNN_FFN_HIGH_PERFORMANCE, 256},
    {"moe_dsv3_t128_w4a16_g128", 128 * 8, 7168, 2048, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_I4, 128,
     RUDNN_FFN_HIGH_PERFORMANCE, 256},
};
static const ffn_case_t quick_cases[] = {
    {"quick_f32_m64_silu", 64, 128, 256, RUDNN_FFN_SILU, RUDNN_F32, RUDNN_F32, 0, RUDNN_FFN_HIGH_PRECISION, 0},
    {"quick_w8a8_m64_swiglu", 64, 128, 128, RUDNN_FFN_SWIGLU, RUDNN_I8, RUDNN_I8, 0, RUDNN_FFN_HIGH_PRECISION, 0},
    {"quick_moe_e4_w4a16_g32", 64, 128, 64, RUDNN_FFN_SWIGLU, RUDNN_BF16, RUDNN_I4, 32, RUDNN_FFN_HIGH_PERFORMANCE, 4},
};

#define CHECK(call)                                                                                              \
    do {                                                                                                         \
        rudnn_status_t check_st_ = (call);                                                                       \
        if (check_st_ != RUDNN_STATUS_SUCCESS)                                                                   \
            bench_die(PROG, #call, check_st_);                                                                   \
    } while (0)

typedef struct run {
    rudnn_context_t ctx;
    rudnn_queue_t q;
    rudnn_device_info_t dev;
    int reps;
    bench_events_t ev;
    double copy_gbps;
} run_t;

/* A buffer of n elements of dt (I4: n values) holding small pseudo-random values. */
static rudnn_buffer_t random_buffer(run_t *r, rudnn_dtype_t dt, size_t n, float scale)
{
    const size_t bytes = dt == RUDNN_I4 ? (n + 1) / 2 : n * rudnn_dtype_size(dt);
    rudnn_buffer_t b;
    CHECK(rudnn_buffer_create(r->ctx, bytes ? bytes : 1, &b));
    /* one 16 MiB chunk of values, written over the buffer again and again: the MoeFFN cases' 22 GB
     * of weights would take minutes to draw one by one on the host, and timing does not need them
     * all distinct */
    const size_t chunk = (size_t)1 << 24, first = bytes < chunk ? bytes : chunk;
    unsigned char *h = bench_xmalloc(PROG, chunk);
    uint64_t s = 0x9e3779b97f4a7c15ULL ^ n;
    for (size_t i = 0; i < first; i += rudnn_dtype_size(dt) ? rudnn_dtype_size(dt) : 1) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        const float u = ((float)(s >> 40) / (float)(1 << 24) * 2.0f - 1.0f) * scale;
        if (dt == RUDNN_F32)
            memcpy(h + i, &u, 4);
        else if (dt == RUDNN_F16 || dt == RUDNN_BF16) {
            uint16_t v = dt == RUDNN_F16 ? rudnn_f32_to_f16(u) : rudnn_f32_to_bf16(u);
            memcpy(h + i, &v, 2);
        } else if (dt == RUDNN_I32) {
            int32_t v = (int32_t)(u * 100.0f);
            memcpy(h + i, &v, 4);
        } else {
            h[i] = (unsigned char)(s >> 56); /* I8 / I4: any bits */
        }
    }
    for (size_t at = 0; at < bytes; at += chunk)
        CHECK(rudnn_buffer_write(r->q, b, at, h, bytes - at < chunk ? bytes - at : chunk));
    free(h);
    return b;
}

static void tensor(rudnn_tensor_t *t, rudnn_buffer_t b, rudnn_dtype_t dt, int rank, int64_t d0, int64_t d1,
                   int64_t d2)
{
    int64_t dims[3] = {d0, d1, d2};
    CHECK(rudnn_tensor_init(t, b, 0, dt, rank, dims));
}

/* The rest of a case's JSON line after its own fields: the device, then the status and message
 * where st failed, else the kernel and the timing of the r->reps calls recorded in r->ev. */
static void finish_line(run_t *r, rudnn_status_t st, double flops, double weight_bytes)
{
    printf(",\"backend\":");
    bench_json_string(r->dev.backend);
    printf(",\"device\":");
    bench_json_string(r->dev.name);
    if (st) {
        printf(",\"status\":\"%s\",\"message\":", rudnn_status_string(st));
        bench_json_string(rudnn_last_error());
        printf("}\n");
    } else {
        double median, minimum;
        bench_stats(&r->ev, r->reps, &median, &minimum);
        const double wgbps = weight_bytes / (median * 1e6);
        printf(",\"kernel\":");
        bench_json_string(rudnn_last_kernel());
        printf(",\"median_ms\":%.6f,\"min_ms\":%.6f,\"tflops\":%.2f,\"weight_gbps\":%.1f,\"copy_gbps\":%.1f,"
               "\"weight_copy_fraction\":%.3f,\"reps\":%d}\n",
               median, minimum, flops / (median * 1e9), wgbps, r->copy_gbps, wgbps / r->copy_gbps, r->reps);
    }
    fflush(stdout);
}

/* rudnn's SwiGLU experts (gate, up [E, I, H], down [E, H, I] in x's dtype, Auto) on the rows x grouped
 * by counts: MoeFFN's baseline, one JSON line. */
static void run_experts_baseline(run_t *r, const ffn_case_t *c, const rudnn_tensor_t *x, const rudnn_tensor_t *counts)
{
    const int64_t e = c->experts, h = c->k1, in = c->k2;
    rudnn_buffer_t bg = random_buffer(r, c->x, (size_t)(e * in * h), 0.05f);
    rudnn_buffer_t bu = random_buffer(r, c->x, (size_t)(e * in * h), 0.05f);
    rudnn_buffer_t bd = random_buffer(r, c->x, (size_t)(e * h * in), 0.05f);
    rudnn_buffer_t bo;
    CHECK(rudnn_buffer_create(r->ctx, (size_t)(c->m * h) * rudnn_dtype_size(c->x), &bo));
    rudnn_tensor_t gate, up, down, out;
    tensor(&gate, bg, c->x, 3, e, in, h);
    tensor(&up, bu, c->x, 3, e, in, h);
    tensor(&down, bd, c->x, 3, e, h, in);
    tensor(&out, bo, c->x, 2, c->m, h, 0);
    rudnn_swiglu_experts_t ex;
    CHECK(rudnn_swiglu_experts_create(r->ctx, &gate, &up, &down, &ex));
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    for (int i = 0; i < WARMUP && !st; i++)
        st = rudnn_swiglu_experts_forward_grouped(r->q, ex, x, counts, 0, RUDNN_MOE_AUTO, NULL, 0, &out);
    for (int i = 0; i < r->reps && !st; i++) {
        CHECK(rudnn_event_record(r->ev.start[i], r->q));
        CHECK(rudnn_swiglu_experts_forward_grouped(r->q, ex, x, counts, 0, RUDNN_MOE_AUTO, NULL, 0, &out));
        CHECK(rudnn_event_record(r->ev.end[i], r->q));
    }
    printf("{\"op\":\"swiglu_experts\",\"case\":\"%s\",\"m\":%lld,\"experts\":%lld,\"h\":%lld,\"i\":%lld,\"x\":\"%s\"",
           c->name, (long long)c->m, (long long)e, (long long)h, (long long)in, rudnn_dtype_name(c->x));
    finish_line(r, st, 6.0 * (double)c->m * (double)h * (double)in,
                3.0 * (double)(e * h * in) * rudnn_dtype_size(c->x));
    rudnn_swiglu_experts_destroy(ex);
    rudnn_buffer_destroy(bg), rudnn_buffer_destroy(bu), rudnn_buffer_destroy(bd), rudnn_buffer_destroy(bo);
}

static void run_case(run_t *r, const ffn_case_t *c)
{
    const int gated = c->act >= RUDNN_FFN_GEGLU;
    const int64_t n1 = gated ? 2 * c->k2 : c->k2, n2 = c->k1;
    const int quant = c->x == RUDNN_I8, wo = !quant && c->w != c->x;
    const rudnn_dtype_t ydt = quant ? RUDNN_F16 : c->x;
    rudnn_buffer_t bx = random_buffer(r, c->x, (size_t)(c->m * c->k1), 1.0f);
    const int64_t ne = c->experts ? c->experts : 1; /* weight matrices */
    rudnn_buffer_t bw1 = random_buffer(r, c->w, (size_t)(ne * c->k1 * n1), 0.05f);
    rudnn_buffer_t bw2 = random_buffer(r, c->w, (size_t)(ne * c->k2 * n2), 0.05f);
    rudnn_buffer_t by;
    CHECK(rudnn_buffer_create(r->ctx, (size_t)(c->m * n2) * rudnn_dtype_size(ydt), &by));
    rudnn_tensor_t x, w1, w2, y, s1, s2, qs, qo, d1, d2;
    tensor(&x, bx, c->x, 2, c->m, c->k1, 0);
    if (c->experts) {
        tensor(&w1, bw1, c->w, 3, ne, c->k1, n1);
        tensor(&w2, bw2, c->w, 3, ne, c->k2, n2);
    } else {
        tensor(&w1, bw1, c->w, 2, c->k1, n1, 0);
        tensor(&w2, bw2, c->w, 2, c->k2, n2, 0);
    }
    tensor(&y, by, ydt, 2, c->m, n2, 0);
    rudnn_ffn_args_t a = {.x = &x, .weight1 = &w1, .weight2 = &w2, .activation = c->act, .precision = c->precision};
    /* MoeFFN: m / E rows an expert (the rest to the last) */
    rudnn_buffer_t bcounts = NULL;
    rudnn_tensor_t counts;
    if (c->experts) {
        int64_t *h = bench_xmalloc(PROG, (size_t)ne * sizeof *h);
        for (int64_t e = 0; e < ne; e++)
            h[e] = c->m / ne + (e == ne - 1 ? c->m % ne : 0);
        CHECK(rudnn_buffer_create(r->ctx, (size_t)ne * sizeof *h, &bcounts));
        tensor(&counts, bcounts, RUDNN_I64, 1, ne, 0, 0);
        CHECK(rudnn_tensor_write(r->q, &counts, h, (size_t)ne * sizeof *h));
        free(h);
        a.expert_tokens = &counts;
    }
    rudnn_buffer_t extra[6] = {0};
    double weight_bytes = (double)ne * (double)(c->k1 * n1 + c->k2 * n2) * (c->w == RUDNN_I4 ? 0.5 : rudnn_dtype_size(c->w));
    if (wo) {
        const int64_t g1 = c->group_rows ? c->k1 / c->group_rows : 1, g2 = c->group_rows ? c->k2 / c->group_rows : 1;
        extra[0] = random_buffer(r, c->x, (size_t)(ne * g1 * n1), 0.01f);
        extra[1] = random_buffer(r, c->x, (size_t)(ne * g2 * n2), 0.01f);
        /* [G, N] per group or [N] per channel, with a leading E for experts */
        if (c->experts && c->group_rows) {
            tensor(&s1, extra[0], c->x, 3, ne, g1, n1);
            tensor(&s2, extra[1], c->x, 3, ne, g2, n2);
        } else if (c->experts) {
            tensor(&s1, extra[0], c->x, 2, ne, n1, 0);
            tensor(&s2, extra[1], c->x, 2, ne, n2, 0);
        } else {
            tensor(&s1, extra[0], c->x, c->group_rows ? 2 : 1, c->group_rows ? g1 : n1, n1, 0);
            tensor(&s2, extra[1], c->x, c->group_rows ? 2 : 1, c->group_rows ? g2 : n2, n2, 0);
        }
        a.antiquant_scale1 = &s1, a.antiquant_scale2 = &s2;
        weight_bytes += (double)(ne * (g1 * n1 + g2 * n2)) * rudnn_dtype_size(c->x);
    }
    if (quant) {
        extra[2] = random_buffer(r, RUDNN_F32, (size_t)c->k2, 1.0f);
        extra[3] = random_buffer(r, RUDNN_F32, 1, 1.0f);
        extra[4] = random_buffer(r, RUDNN_F32, (size_t)n1, 0.001f);
        extra[5] = random_buffer(r, RUDNN_F32, (size_t)n2, 0.001f);
        tensor(&qs, extra[2], RUDNN_F32, 1, c->k2, 0, 0);
        tensor(&qo, extra[3], RUDNN_F32, 1, 1, 0, 0);
        tensor(&d1, extra[4], RUDNN_F32, 1, n1, 0, 0);
        tensor(&d2, extra[5], RUDNN_F32, 1, n2, 0, 0);
        a.scale = &qs, a.offset = &qo, a.deq_scale1 = &d1, a.deq_scale2 = &d2;
    }
    size_t ws_bytes = 0;
    rudnn_buffer_t ws = NULL;
    rudnn_status_t st = rudnn_ffn_workspace_size(r->q, &a, &y, &ws_bytes);
    if (!st)
        CHECK(rudnn_buffer_create(r->ctx, ws_bytes ? ws_bytes : 1, &ws));
    for (int i = 0; i < WARMUP && !st; i++)
        st = rudnn_ffn(r->q, &a, ws, ws_bytes, &y);
    for (int i = 0; i < r->reps && !st; i++) {
        CHECK(rudnn_event_record(r->ev.start[i], r->q));
        CHECK(rudnn_ffn(r->q, &a, ws, ws_bytes, &y));
        CHECK(rudnn_event_record(r->ev.end[i], r->q));
    }
    printf("{\"op\":\"ffn\",\"case\":\"%s\",\"experts\":%lld,\"m\":%lld,\"k1\":%lld,\"n1\":%lld,\"k2\":%lld,\"n2\":%lld,\"x\":\"%s\","
           "\"w\":\"%s\",\"group_rows\":%lld",
           c->name, (long long)c->experts, (long long)c->m, (long long)c->k1, (long long)n1, (long long)c->k2, (long long)n2,
           rudnn_dtype_name(c->x), rudnn_dtype_name(c->w), (long long)c->group_rows);
    finish_line(r, st, 2.0 * (double)c->m * (double)(c->k1 * n1 + c->k2 * n2), weight_bytes);
    /* the baseline in the same run (x and the counts shared; the MoeFFN weights freed first) */
    if (c->experts && c->act == RUDNN_FFN_SWIGLU && c->x != RUDNN_I8) {
        rudnn_buffer_destroy(bw1), rudnn_buffer_destroy(bw2);
        bw1 = bw2 = NULL;
        run_experts_baseline(r, c, &x, &counts);
    }
    if (bcounts)
        rudnn_buffer_destroy(bcounts);
    if (ws)
        rudnn_buffer_destroy(ws);
    for (int i = 0; i < 6; i++)
        if (extra[i])
            rudnn_buffer_destroy(extra[i]);
    if (bw1)
        rudnn_buffer_destroy(bw1), rudnn_buffer_destroy(bw2);
    rudnn_buffer_destroy(bx), rudnn_buffer_destroy(by);
}

int main(int argc, char **argv)
{
    const char *backend = NULL, *cases = NULL;
    int quick = 0;
    run_t r = {.reps = DEFAULT_REPS};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            backend = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            r.reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--case") && i + 1 < argc)
            cases = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else {
            fprintf(stderr, "usage: " PROG " [--backend NAME] [--reps N] [--case NAME[,NAME]] [--quick]\n");
            return 2;
        }
    }
    if (r.reps < 1 || r.reps > 1024) {
        fprintf(stderr, PROG ": --reps must be 1..1024\n");
        return 2;
    }
    rudnn_context_options_t opts = {.backend = backend, .device = -1};
    CHECK(rudnn_context_create(&r.ctx, &opts));
    CHECK(rudnn_queue_create(r.ctx, &r.q));
    CHECK(rudnn_context_device_info(r.ctx, &r.dev));
    bench_events_create(&r.ev, PROG, r.ctx, r.reps);
    r.copy_gbps = bench_copy(&r.ev, r.ctx, r.q, &r.dev, quick ? (size_t)16 << 20 : (size_t)1 << 30, r.reps);
    const ffn_case_t *list = quick ? quick_cases : full_cases;
    const size_t count = quick ? sizeof quick_cases / sizeof quick_cases[0] : sizeof full_cases / sizeof full_cases[0];
    for (size_t i = 0; i < count; i++)
        if (!cases || bench_in_list(cases, list[i].name))
            run_case(&r, &list[i]);
    bench_events_destroy(&r.ev);
    rudnn_queue_destroy(r.q);
    rudnn_context_destroy(r.ctx);
    return 0;
}
