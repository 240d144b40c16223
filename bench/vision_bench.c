/* rudnn-bench-vision: times the spatial operator families (rudnn/convolution.h, pooling.h,
 * interpolation.h, grid_sample.h, ctc.h) and prints one JSON line per case, direction and layout,
 * beside a device-to-device copy line ("op":"copy") measured first:
 *
 *   {"op","case","direction","shape","dtype","layout","backend","device","kernel","median_ms","min_ms",
 *    ...,"reps"}
 * convolution adds "strategy" (asked: autotune), "resolved" and "reason" (rudnn_conv_resolve after
 * the warm-up, which tuned), "flops","tflops"; the others "bytes","gbps","copy_gbps","copy_fraction".
 * "direction": forward, backward (pooling, interpolation: dx; grid sampling: dx and dgrid in one
 * call), data_backward, weight_backward (convolution), forward_backward (CTC: the loss and its
 * gradient in one call). "layout": nchw, nhwc (channels-last x, w, y, dy, dx, dw through
 * rudnn_conv_channels_last), tnc (CTC's log-probabilities). bench/baselines/torch_vision.py prints
 * the same lines for PyTorch; bench/compare_vision.py joins the two by (case, direction, layout).
 *
 * Cases (bf16 unless named; groups 1, dilation 1):
 *   conv_56_64_3x3       N 32, C 64 -> K 64, 56x56, 3x3, pad 1     forward, data and weight
 *                                                                  backward; nchw and nhwc
 *   conv_56_256_1x1      N 32, C 256 -> K 64, 56x56, 1x1           forward; nchw and nhwc
 *   conv_28_128_3x3      N 32, C 128 -> K 128, 28x28, 3x3, pad 1   forward; nchw and nhwc
 *   conv_14_256_3x3_s2   N 32, C 256 -> K 256, 28x28 input, 3x3, stride 2, pad 1 (14x14 out):
 *                        forward; nchw and nhwc
 *   conv_7_512_3x3       N 32, C 512 -> K 512, 7x7, 3x3, pad 1     forward; nchw and nhwc
 *   maxpool_3x3_s2       N 32, C 64, 112x112 -> 56x56, pad 1: forward with I64 indices, backward
 *   avgpool_2x2_s2       N 32, C 256, 56x56 -> 28x28 (count_include_pad): forward, backward
 *   bilinear_up2, nearest_up2, bicubic_up2
 *                        N 8, C 256, 64x64 -> 128x128, align_corners 0: forward, backward
 *   bilinear_zeros       grid sampling, N 8, C 64, 128x128 input, 128x128 grid, padding zeros,
 *                        align_corners 0: forward, backward (dx and dgrid)
 *   ctc_t256_n32_c64_s50 CTC, T 256, N 32, C 64 (blank 0), every target of 50 labels, F32
 *                        log-probabilities: loss and gradient in one call
 * --quick runs tiny shapes of every kind in F32 (a smoke run, e.g. on PoCL's CPU device, which has
 * no fp16).
 *
 * Inputs, never timed: a 64-bit LCG on the host, uploaded once per case: values in [-1, 1); CTC's
 * log-probabilities a log_softmax of logits in [-3, 3), its labels in 1..C-1, every input length T.
 * The sampling grid is not random but an affine warp (a rotation of 0.1 + 0.05 n rad and a scale
 * of 1.05 about the centre, as a spatial transformer makes): its locality sets the speed of the
 * gathers, and a few points fall outside the input (the zeros padding); torch_vision.py builds the
 * same grid.
 *
 * Counts. Convolution: flops = 2 N K (C / groups) R S P Q, the same for each direction (P Q the
 * output's size). The others: bytes = every tensor of the call read or written once (pool forward:
 * x, y, and the I64 indices for max; max backward: x, dy, dx, since rudnn finds the argmax again
 * from x; avg backward: dy, dx; interpolation: x + y, dy + dx; grid forward: x, grid, y; grid
 * backward: x, grid, dy, dx, dgrid; CTC: log_probs, targets (I32), loss, grad); gbps = bytes / median
 * time, copy_fraction = gbps / copy_gbps (the copy line's read + write rate). A workspace is queried
 * and allocated once per call shape, outside the timing, and not counted. CTC's call copies the
 * lengths to the device each time (a blocking copy, rudnn/ctc.h): inside the timing, as for any caller.
 *
 *   rudnn-bench-vision [--backend NAME] [--reps N] [--case NAME[,NAME]] [--quick]
 * WARMUP calls, then --reps calls each between two events; median and minimum. A case answering
 * NOT_SUPPORTED prints "status":"NOT_SUPPORTED" and the message; any other failure "status" and the
 * message too, and the exit status is 1 after the other cases ran. Diagnostics go to stderr. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "rudnn/rudnn.h"

#define PROG "rudnn-bench-vision"
#define WARMUP 3
#define DEFAULT_REPS 20
#define MAX_REPS 1024

#define CHECK(call)                                                                                              \
    do {                                                                                                         \
        rudnn_status_t check_st_ = (call);                                                                       \
        if (check_st_ != RUDNN_STATUS_SUCCESS)                                                                   \
            bench_die(PROG, #call, check_st_);                                                                   \
    } while (0)

typedef enum { OP_CONV, OP_POOL, OP_INTERP, OP_GRID, OP_CTC } op_t;
static const char *const op_names[] = {"conv2d", "pool2d", "interpolate2d", "grid_sample2d", "ctc_loss"};

typedef enum {
    DIR_FORWARD,
    DIR_BACKWARD,
    DIR_DATA_BACKWARD,
    DIR_WEIGHT_BACKWARD,
    DIR_FORWARD_BACKWARD,
    DIR_COUNT
} dir_t;
static const char *const dir_names[] = {"forward", "backward", "data_backward", "weight_backward",
                                        "forward_backward"};
#define D(dir) (1u << (dir))
#define FWD D(DIR_FORWARD)
#define FWD_BWD (D(DIR_FORWARD) | D(DIR_BACKWARD))
#define CONV_ALL (D(DIR_FORWARD) | D(DIR_DATA_BACKWARD) | D(DIR_WEIGHT_BACKWARD))

typedef struct vcase {
    const char *name;
    op_t op;
    unsigned dirs;    /* D(dir) bits, run in the enum's order */
    int both_layouts; /* convolution: nchw, then nhwc; the others one layout */
    rudnn_dtype_t dt;
    int64_t n, c, h, w;          /* x [N, C, H, W]; CTC: batch N, alphabet C */
    int64_t k;                   /* convolution: output channels */
    int64_t window, stride, pad; /* convolution's filter R x R, pooling's window */
    int64_t oh, ow;              /* interpolation, grid sampling: the output's size */
    int mode;                    /* rudnn_pool_mode_t, rudnn_interp_mode_t or rudnn_grid_sample_mode_t */
    int64_t t, s;                /* CTC: steps, target length */
} vcase_t;

#define CONV(nm, dirs_, N, C, H, K, R, st, pd)                                                                    \
    {.name = nm, .op = OP_CONV, .dirs = dirs_, .both_layouts = 1, .dt = DT, .n = N, .c = C, .h = H, .w = H,      \
     .k = K, .window = R, .stride = st, .pad = pd}
#define POOL(nm, md, N, C, H, R, st, pd)                                                                          \
    {.name = nm, .op = OP_POOL, .dirs = FWD_BWD, .dt = DT, .n = N, .c = C, .h = H, .w = H, .window = R,           \
     .stride = st, .pad = pd, .mode = md}
#define INTERP(nm, md, N, C, H, O)                                                                                \
    {.name = nm, .op = OP_INTERP, .dirs = FWD_BWD, .dt = DT, .n = N, .c = C, .h = H, .w = H, .oh = O, .ow = O,    \
     .mode = md}
#define GRID(nm, md, N, C, H, O)                                                                                  \
    {.name = nm, .op = OP_GRID, .dirs = FWD_BWD, .dt = DT, .n = N, .c = C, .h = H, .w = H, .oh = O, .ow = O,      \
     .mode = md}
#define CTC(nm, T, N, C, S)                                                                                       \
    {.name = nm, .op = OP_CTC, .dirs = D(DIR_FORWARD_BACKWARD), .dt = RUDNN_F32, .n = N, .c = C, .t = T, .s = S}

#define DT RUDNN_BF16
static const vcase_t full_cases[] = {
    /* ResNet-50's convolutions at batch 32 */
    CONV("conv_56_64_3x3", CONV_ALL, 32, 64, 56, 64, 3, 1, 1),
    CONV("conv_56_256_1x1", FWD, 32, 256, 56, 64, 1, 1, 0),
    CONV("conv_28_128_3x3", FWD, 32, 128, 28, 128, 3, 1, 1),
    CONV("conv_14_256_3x3_s2", FWD, 32, 256, 28, 256, 3, 2, 1),
    CONV("conv_7_512_3x3", FWD, 32, 512, 7, 512, 3, 1, 1),
    /* its stem's max pool; an average pool of the same size class */
    POOL("maxpool_3x3_s2", RUDNN_POOL_MAX, 32, 64, 112, 3, 2, 1),
    POOL("avgpool_2x2_s2", RUDNN_POOL_AVG_INCLUDE_PAD, 32, 256, 56, 2, 2, 0),
    /* a decoder's 2x upsampling */
    INTERP("bilinear_up2", RUDNN_INTERP_LINEAR, 8, 256, 64, 128),
    INTERP("nearest_up2", RUDNN_INTERP_NEAREST, 8, 256, 64, 128),
    INTERP("bicubic_up2", RUDNN_INTERP_CUBIC, 8, 256, 64, 128),
    GRID("bilinear_zeros", RUDNN_GRID_SAMPLE_BILINEAR, 8, 64, 128, 128),
    /* speech recognition's loss */
    CTC("ctc_t256_n32_c64_s50", 256, 32, 64, 50),
};
#undef DT
#define DT RUDNN_F32
static const vcase_t quick_cases[] = {
    CONV("quick_conv_8_16_3x3", CONV_ALL, 2, 16, 8, 16, 3, 1, 1),
    CONV("quick_conv_4_16_3x3_s2", FWD, 2, 16, 8, 32, 3, 2, 1),
    POOL("quick_maxpool_3x3_s2", RUDNN_POOL_MAX, 2, 8, 16, 3, 2, 1),
    POOL("quick_avgpool_2x2_s2", RUDNN_POOL_AVG_INCLUDE_PAD, 2, 8, 16, 2, 2, 0),
    INTERP("quick_bilinear_up2", RUDNN_INTERP_LINEAR, 2, 8, 8, 16),
    INTERP("quick_nearest_up2", RUDNN_INTERP_NEAREST, 2, 8, 8, 16),
    INTERP("quick_bicubic_up2", RUDNN_INTERP_CUBIC, 2, 8, 8, 16),
    GRID("quick_bilinear_zeros", RUDNN_GRID_SAMPLE_BILINEAR, 2, 8, 16, 16),
    CTC("quick_ctc_t32_n4_c16_s8", 32, 4, 16, 8),
};
#undef DT

typedef struct run {
    rudnn_context_t ctx;
    rudnn_queue_t q;
    rudnn_device_info_t dev;
    int reps;
    bench_events_t ev;
    double copy_gbps;
    int failed;
} run_t;

/* ---- inputs ----------------------------------------------------------------------------------- */

/* A 64-bit LCG (Knuth's MMIX constants); its top 24 bits give a float in [0, 1). Deterministic
 * across runs and machines, and the values only need to be ordinary numbers: no better generator
 * is called for. */
static uint64_t lcg_state = 0x2545f4914f6cdd1dULL;

static float lcg01(void)
{
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)(lcg_state >> 40) / 16777216.0f;
}

/* The buffers of one case, destroyed together at its end. */
typedef struct case_buffers {
    rudnn_buffer_t b[8];
    int n;
} case_buffers_t;

static rudnn_buffer_t buffer(run_t *r, case_buffers_t *bl, size_t bytes)
{
    if (bl->n == (int)(sizeof bl->b / sizeof bl->b[0])) {
        fprintf(stderr, PROG ": more than %d buffers in a case\n", bl->n);
        exit(1);
    }
    CHECK(rudnn_buffer_create(r->ctx, bytes ? bytes : 1, &bl->b[bl->n]));
    return bl->b[bl->n++];
}

static void buffers_destroy(case_buffers_t *bl)
{
    for (int i = 0; i < bl->n; i++)
        rudnn_buffer_destroy(bl->b[i]);
    bl->n = 0;
}

/* n floats into b at element `at`, converted to dt (F32, F16 or BF16). */
static void upload(run_t *r, rudnn_buffer_t b, size_t at, rudnn_dtype_t dt, const float *v, size_t n)
{
    const size_t es = rudnn_dtype_size(dt);
    void *h = bench_xmalloc(PROG, n * es);
    rudnn_convert_from_f32(dt, v, h, n);
    CHECK(rudnn_buffer_write(r->q, b, at * es, h, n * es));
    free(h);
}

/* count values uniform in [-1, 1) into b, in blocks (the largest inputs are 25M elements). */
static void fill_uniform(run_t *r, rudnn_buffer_t b, rudnn_dtype_t dt, int64_t count)
{
    const size_t block = (size_t)1 << 20;
    float *v = bench_xmalloc(PROG, block * sizeof *v);
    for (size_t at = 0; at < (size_t)count; at += block) {
        const size_t n = (size_t)count - at < block ? (size_t)count - at : block;
        for (size_t i = 0; i < n; i++)
            v[i] = 2.0f * lcg01() - 1.0f;
        upload(r, b, at, dt, v, n);
    }
    free(v);
}

static void nchw(rudnn_tensor_t *t, rudnn_buffer_t b, rudnn_dtype_t dt, const int64_t dims[4], int channels_last)
{
    if (channels_last)
        CHECK(rudnn_conv_channels_last(t, b, 0, dt, 4, dims));
    else
        CHECK(rudnn_tensor_init(t, b, 0, dt, 4, dims));
}

static double numel(const int64_t *dims, int rank)
{
    double n = 1;
    for (int i = 0; i < rank; i++)
        n *= (double)dims[i];
    return n;
}

/* ---- one call --------------------------------------------------------------------------------- */

/* The operands and options of one (op, direction); the unused fields stay zero. */
typedef struct call {
    op_t op;
    dir_t dir;
    const rudnn_tensor_t *x, *w, *y, *indices, *grid, *dy, *dx, *dw, *dgrid;
    rudnn_conv_options_t conv;
    rudnn_pool_options_t pool;
    rudnn_interp_options_t interp;
    rudnn_grid_sample_options_t gs;
    rudnn_ctc_args_t ctc;
    rudnn_buffer_t ws;
    size_t ws_bytes;
} call_t;

/* Convolution's strategy: Autotune (the header's default), what a user gets. */
#define CONV_STRATEGY RUDNN_CONV_AUTOTUNE
static const char *const strategy_names[] = {"autotune", "direct", "implicit_gemm"};

static const rudnn_conv_direction_t conv_dirs[DIR_COUNT] = {
    [DIR_FORWARD] = RUDNN_CONV_FORWARD,
    [DIR_DATA_BACKWARD] = RUDNN_CONV_DATA_BACKWARD,
    [DIR_WEIGHT_BACKWARD] = RUDNN_CONV_WEIGHT_BACKWARD,
};

static rudnn_conv_tensors_t conv_tensors(const call_t *k)
{
    rudnn_conv_tensors_t t = {0};
    if (k->dir == DIR_FORWARD)
        t.x = k->x, t.w = k->w, t.y = k->y;
    else if (k->dir == DIR_DATA_BACKWARD)
        t.dy = k->dy, t.w = k->w, t.dx = k->dx;
    else
        t.x = k->x, t.dy = k->dy, t.dw = k->dw;
    return t;
}

static rudnn_status_t workspace_size(run_t *r, const call_t *k, size_t *bytes)
{
    *bytes = 0;
    if (k->op == OP_CONV) {
        const rudnn_conv_tensors_t t = conv_tensors(k);
        return rudnn_conv_workspace_size(r->q, conv_dirs[k->dir], &t, &k->conv, CONV_STRATEGY, bytes);
    }
    if (k->op == OP_GRID && k->dir == DIR_BACKWARD)
        return rudnn_grid_sample_backward_workspace_size(r->q, k->x, k->grid, k->dy, &k->gs, k->dx, k->dgrid,
                                                         bytes);
    if (k->op == OP_CTC)
        return rudnn_ctc_loss_workspace_size(r->q, &k->ctc, NULL, bytes);
    return RUDNN_STATUS_SUCCESS; /* pooling and interpolation take no workspace */
}

static rudnn_status_t launch(run_t *r, const call_t *k)
{
    const int fwd = k->dir == DIR_FORWARD;
    switch (k->op) {
    case OP_CONV:
        if (fwd)
            return rudnn_conv_forward(r->q, k->x, k->w, NULL, &k->conv, CONV_STRATEGY, k->ws, k->ws_bytes, k->y);
        if (k->dir == DIR_DATA_BACKWARD)
            return rudnn_conv_data_backward(r->q, k->dy, k->w, &k->conv, CONV_STRATEGY, k->ws, k->ws_bytes, k->dx);
        return rudnn_conv_weight_backward(r->q, k->x, k->dy, &k->conv, CONV_STRATEGY, k->ws, k->ws_bytes, k->dw,
                                          NULL);
    case OP_POOL:
        return fwd ? rudnn_pool_forward(r->q, k->x, &k->pool, k->y, k->indices)
                   : rudnn_pool_backward(r->q, k->x, k->dy, &k->pool, k->dx);
    case OP_INTERP:
        return fwd ? rudnn_interpolate_forward(r->q, k->x, &k->interp, k->y)
                   : rudnn_interpolate_backward(r->q, k->dy, &k->interp, k->dx);
    case OP_GRID:
        return fwd ? rudnn_grid_sample_forward(r->q, k->x, k->grid, &k->gs, k->y)
                   : rudnn_grid_sample_backward(r->q, k->x, k->grid, k->dy, &k->gs, k->ws, k->ws_bytes, k->dx,
                                                k->dgrid);
    case OP_CTC:
        return rudnn_ctc_loss(r->q, &k->ctc, NULL, k->ws, k->ws_bytes);
    }
    return RUDNN_STATUS_BAD_PARAM;
}

/* ---- timing and the JSON line ------------------------------------------------------------------ */

static void describe(const vcase_t *c, char *s, size_t cap)
{
    switch (c->op) {
    case OP_CONV:
        snprintf(s, cap, "N%lld C%lld H%lld W%lld K%lld R%lld stride%lld pad%lld", (long long)c->n, (long long)c->c,
                 (long long)c->h, (long long)c->w, (long long)c->k, (long long)c->window, (long long)c->stride,
                 (long long)c->pad);
        break;
    case OP_POOL:
        snprintf(s, cap, "N%lld C%lld H%lld W%lld window%lld stride%lld pad%lld", (long long)c->n, (long long)c->c,
                 (long long)c->h, (long long)c->w, (long long)c->window, (long long)c->stride, (long long)c->pad);
        break;
    case OP_INTERP:
    case OP_GRID:
        snprintf(s, cap, "N%lld C%lld H%lld W%lld -> %lldx%lld", (long long)c->n, (long long)c->c, (long long)c->h,
                 (long long)c->w, (long long)c->oh, (long long)c->ow);
        break;
    case OP_CTC:
        snprintf(s, cap, "T%lld N%lld C%lld S%lld", (long long)c->t, (long long)c->n, (long long)c->c,
                 (long long)c->s);
        break;
    }
}

static void head(const run_t *r, const vcase_t *c, dir_t dir, const char *layout)
{
    char shape[160];
    describe(c, shape, sizeof shape);
    printf("{\"op\":\"%s\",\"case\":\"%s\",\"direction\":\"%s\",\"shape\":\"%s\",\"dtype\":\"%s\",\"layout\":\"%s\","
           "\"backend\":",
           op_names[c->op], c->name, dir_names[dir], shape, rudnn_dtype_name(c->dt), layout);
    bench_json_string(r->dev.backend);
    printf(",\"device\":");
    bench_json_string(r->dev.name);
}

/* Queries and makes the workspace, warms up (Autotune tunes on the first call), times r->reps calls
 * and prints the line: flops for a convolution, else bytes; or the status and message of what
 * failed (the workspace query, an allocation or a warm-up call). */
static void measure(run_t *r, const vcase_t *c, call_t *k, const char *layout, double flops, double bytes)
{
    char message[1024] = "";
    rudnn_conv_choice_t choice = {0};
    double median = 0, minimum = 0;
    k->ws = NULL;
    rudnn_status_t st = workspace_size(r, k, &k->ws_bytes);
    if (!st && k->ws_bytes)
        st = rudnn_buffer_create(r->ctx, k->ws_bytes, &k->ws);
    for (int i = 0; i < WARMUP && !st; i++)
        st = launch(r, k);
    if (!st)
        st = rudnn_queue_synchronize(r->q);
    if (!st && k->op == OP_CONV) {
        const rudnn_conv_tensors_t t = conv_tensors(k);
        st = rudnn_conv_resolve(r->q, conv_dirs[k->dir], &t, &k->conv, CONV_STRATEGY, &choice);
    }
    if (st) {
        /* kept now: a later call (the workspace's destroy) may clear rudnn_last_error() */
        snprintf(message, sizeof message, "%s", rudnn_last_error());
    } else {
        for (int i = 0; i < r->reps; i++) {
            CHECK(rudnn_event_record(r->ev.start[i], r->q));
            CHECK(launch(r, k));
            CHECK(rudnn_event_record(r->ev.end[i], r->q));
        }
        bench_stats(&r->ev, r->reps, &median, &minimum);
    }
    head(r, c, k->dir, layout);
    if (st) {
        printf(",\"status\":\"%s\",\"message\":", rudnn_status_string(st));
        bench_json_string(message);
        printf("}\n");
        if (st != RUDNN_STATUS_NOT_SUPPORTED)
            r->failed = 1;
    } else {
        const double secs = median * 1e-3;
        printf(",\"kernel\":");
        bench_json_string(rudnn_last_kernel());
        printf(",\"median_ms\":%.6f,\"min_ms\":%.6f", median, minimum);
        if (k->op == OP_CONV) {
            printf(",\"strategy\":\"%s\",\"resolved\":\"%s\",\"reason\":", strategy_names[CONV_STRATEGY],
                   (unsigned)choice.strategy < 3 ? strategy_names[choice.strategy] : "?");
            bench_json_string(choice.reason);
            printf(",\"flops\":%.6g,\"tflops\":%.3f", flops, flops / secs / 1e12);
        } else {
            const double gbps = bytes / secs / 1e9;
            printf(",\"bytes\":%.0f,\"gbps\":%.2f,\"copy_gbps\":%.2f,\"copy_fraction\":%.4f", bytes, gbps,
                   r->copy_gbps, gbps / r->copy_gbps);
        }
        printf(",\"reps\":%d}\n", r->reps);
    }
    fflush(stdout);
    if (k->ws)
        rudnn_buffer_destroy(k->ws);
    k->ws = NULL;
}

/* ---- the families ----------------------------------------------------------------------------- */

static void run_conv(run_t *r, const vcase_t *c)
{
    call_t k = {.op = OP_CONV};
    rudnn_conv_options_init(&k.conv);
    k.conv.stride[0] = k.conv.stride[1] = c->stride;
    k.conv.padding[0] = k.conv.padding[1] = c->pad;
    const int64_t xd[4] = {c->n, c->c, c->h, c->w}, wd[4] = {c->k, c->c / k.conv.groups, c->window, c->window};
    int64_t yd[4];
    CHECK(rudnn_conv_output_dims(4, xd, wd, &k.conv, yd));
    const size_t es = rudnn_dtype_size(c->dt);
    const double nx = numel(xd, 4), nw = numel(wd, 4), ny = numel(yd, 4);
    const int backward = (c->dirs & ~FWD) != 0;
    case_buffers_t bl = {0};
    rudnn_buffer_t bx = buffer(r, &bl, (size_t)nx * es), bw = buffer(r, &bl, (size_t)nw * es);
    rudnn_buffer_t by = buffer(r, &bl, (size_t)ny * es);
    rudnn_buffer_t bdy = backward ? buffer(r, &bl, (size_t)ny * es) : NULL;
    rudnn_buffer_t bdx = backward ? buffer(r, &bl, (size_t)nx * es) : NULL;
    rudnn_buffer_t bdw = backward ? buffer(r, &bl, (size_t)nw * es) : NULL;
    fill_uniform(r, bx, c->dt, (int64_t)nx);
    fill_uniform(r, bw, c->dt, (int64_t)nw);
    if (backward)
        fill_uniform(r, bdy, c->dt, (int64_t)ny);
    CHECK(rudnn_queue_synchronize(r->q));
    /* 2 N K (C / groups) R S P Q: one multiply-add per filter tap and output, every direction */
    const double flops = 2.0 * ny * (double)(c->c / k.conv.groups) * (double)(c->window * c->window);
    for (int clast = 0; clast <= c->both_layouts; clast++) {
        /* the same buffers seen through the other strides: the values are random either way */
        rudnn_tensor_t tx, tw, ty, tdy, tdx, tdw;
        nchw(&tx, bx, c->dt, xd, clast);
        nchw(&tw, bw, c->dt, wd, clast);
        nchw(&ty, by, c->dt, yd, clast);
        k.x = &tx, k.w = &tw, k.y = &ty;
        if (backward) {
            nchw(&tdy, bdy, c->dt, yd, clast);
            nchw(&tdx, bdx, c->dt, xd, clast);
            nchw(&tdw, bdw, c->dt, wd, clast);
            k.dy = &tdy, k.dx = &tdx, k.dw = &tdw;
        }
        for (int d = 0; d < DIR_COUNT; d++)
            if (c->dirs & D(d)) {
                k.dir = (dir_t)d;
                measure(r, c, &k, clast ? "nhwc" : "nchw", flops, 0);
            }
    }
    buffers_destroy(&bl);
}

static void run_pool(run_t *r, const vcase_t *c)
{
    call_t k = {.op = OP_POOL};
    rudnn_pool_options_init(&k.pool);
    k.pool.mode = (rudnn_pool_mode_t)c->mode;
    k.pool.window[0] = k.pool.window[1] = c->window;
    k.pool.stride[0] = k.pool.stride[1] = c->stride;
    k.pool.padding[0] = k.pool.padding[1] = c->pad;
    const int64_t xd[4] = {c->n, c->c, c->h, c->w};
    int64_t yd[4];
    CHECK(rudnn_pool_output_dims(4, xd, &k.pool, yd));
    const int max = c->mode == RUDNN_POOL_MAX;
    const size_t es = rudnn_dtype_size(c->dt);
    const double nx = numel(xd, 4), ny = numel(yd, 4);
    case_buffers_t bl = {0};
    rudnn_tensor_t tx, ty, ti, tdy, tdx;
    nchw(&tx, buffer(r, &bl, (size_t)nx * es), c->dt, xd, 0);
    nchw(&ty, buffer(r, &bl, (size_t)ny * es), c->dt, yd, 0);
    nchw(&tdy, buffer(r, &bl, (size_t)ny * es), c->dt, yd, 0);
    nchw(&tdx, buffer(r, &bl, (size_t)nx * es), c->dt, xd, 0);
    if (max)
        CHECK(rudnn_tensor_init(&ti, buffer(r, &bl, (size_t)ny * 8), 0, RUDNN_I64, 4, yd));
    fill_uniform(r, tx.buffer, c->dt, (int64_t)nx);
    fill_uniform(r, tdy.buffer, c->dt, (int64_t)ny);
    CHECK(rudnn_queue_synchronize(r->q));
    k.x = &tx, k.y = &ty, k.indices = max ? &ti : NULL, k.dy = &tdy, k.dx = &tdx;
    k.dir = DIR_FORWARD;
    measure(r, c, &k, "nchw", 0, (nx + ny) * (double)es + (max ? ny * 8 : 0));
    /* the max backward reads x to find each argmax again; the averages read none */
    k.x = max ? &tx : NULL;
    k.dir = DIR_BACKWARD;
    measure(r, c, &k, "nchw", 0, ((max ? nx : 0) + ny + nx) * (double)es);
    buffers_destroy(&bl);
}

static void run_interp(run_t *r, const vcase_t *c)
{
    call_t k = {.op = OP_INTERP};
    rudnn_interp_options_init(&k.interp);
    k.interp.mode = (rudnn_interp_mode_t)c->mode; /* align_corners 0, scales from the sizes */
    const int64_t xd[4] = {c->n, c->c, c->h, c->w}, yd[4] = {c->n, c->c, c->oh, c->ow};
    const size_t es = rudnn_dtype_size(c->dt);
    const double nx = numel(xd, 4), ny = numel(yd, 4);
    case_buffers_t bl = {0};
    rudnn_tensor_t tx, ty, tdy, tdx;
    nchw(&tx, buffer(r, &bl, (size_t)nx * es), c->dt, xd, 0);
    nchw(&ty, buffer(r, &bl, (size_t)ny * es), c->dt, yd, 0);
    nchw(&tdy, buffer(r, &bl, (size_t)ny * es), c->dt, yd, 0);
    nchw(&tdx, buffer(r, &bl, (size_t)nx * es), c->dt, xd, 0);
    fill_uniform(r, tx.buffer, c->dt, (int64_t)nx);
    fill_uniform(r, tdy.buffer, c->dt, (int64_t)ny);
    CHECK(rudnn_queue_synchronize(r->q));
    k.x = &tx, k.y = &ty, k.dy = &tdy, k.dx = &tdx;
    for (int d = DIR_FORWARD; d <= DIR_BACKWARD; d++) {
        k.dir = (dir_t)d;
        measure(r, c, &k, "nchw", 0, (nx + ny) * (double)es);
    }
    buffers_destroy(&bl);
}

/* The affine warp of the header, [N, Ho, Wo, 2] (x along W, then y along H), into b. */
static void fill_grid(run_t *r, rudnn_buffer_t b, const vcase_t *c)
{
    const size_t plane = (size_t)(c->oh * c->ow * 2);
    float *g = bench_xmalloc(PROG, plane * sizeof *g);
    for (int64_t n = 0; n < c->n; n++) {
        const double theta = 0.1 + 0.05 * (double)n, cs = 1.05 * cos(theta), sn = 1.05 * sin(theta);
        for (int64_t i = 0; i < c->oh; i++)
            for (int64_t j = 0; j < c->ow; j++) {
                /* the output pixel's centre in [-1, 1], rotated and scaled */
                const double u = (2.0 * (double)j + 1.0) / (double)c->ow - 1.0;
                const double v = (2.0 * (double)i + 1.0) / (double)c->oh - 1.0;
                float *p = g + 2 * (size_t)(i * c->ow + j);
                p[0] = (float)(cs * u - sn * v);
                p[1] = (float)(sn * u + cs * v);
            }
        upload(r, b, (size_t)n * plane, c->dt, g, plane);
    }
    free(g);
}

static void run_grid(run_t *r, const vcase_t *c)
{
    call_t k = {.op = OP_GRID};
    rudnn_grid_sample_options_init(&k.gs); /* zeros, align_corners 0 */
    k.gs.mode = (rudnn_grid_sample_mode_t)c->mode;
    const int64_t xd[4] = {c->n, c->c, c->h, c->w}, yd[4] = {c->n, c->c, c->oh, c->ow};
    const int64_t gd[4] = {c->n, c->oh, c->ow, 2};
    const size_t es = rudnn_dtype_size(c->dt);
    const double nx = numel(xd, 4), ny = numel(yd, 4), ng = numel(gd, 4);
    case_buffers_t bl = {0};
    rudnn_tensor_t tx, tg, ty, tdy, tdx, tdg;
    nchw(&tx, buffer(r, &bl, (size_t)nx * es), c->dt, xd, 0);
    nchw(&tg, buffer(r, &bl, (size_t)ng * es), c->dt, gd, 0);
    nchw(&ty, buffer(r, &bl, (size_t)ny * es), c->dt, yd, 0);
    nchw(&tdy, buffer(r, &bl, (size_t)ny * es), c->dt, yd, 0);
    nchw(&tdx, buffer(r, &bl, (size_t)nx * es), c->dt, xd, 0);
    nchw(&tdg, buffer(r, &bl, (size_t)ng * es), c->dt, gd, 0);
    fill_uniform(r, tx.buffer, c->dt, (int64_t)nx);
    fill_grid(r, tg.buffer, c);
    fill_uniform(r, tdy.buffer, c->dt, (int64_t)ny);
    CHECK(rudnn_queue_synchronize(r->q));
    k.x = &tx, k.grid = &tg, k.y = &ty, k.dy = &tdy, k.dx = &tdx, k.dgrid = &tdg;
    k.dir = DIR_FORWARD;
    measure(r, c, &k, "nchw", 0, (nx + ng + ny) * (double)es);
    k.dir = DIR_BACKWARD;
    measure(r, c, &k, "nchw", 0, (2 * nx + 2 * ng + ny) * (double)es);
    buffers_destroy(&bl);
}

static void run_ctc(run_t *r, const vcase_t *c)
{
    const int64_t T = c->t, N = c->n, C = c->c, S = c->s;
    const int64_t lpd[3] = {T, N, C}, td[2] = {N, S}, ld[1] = {N};
    const size_t es = rudnn_dtype_size(c->dt), nlp = (size_t)(T * N * C);
    case_buffers_t bl = {0};
    rudnn_tensor_t tlp, tt, tl, tg;
    CHECK(rudnn_tensor_init(&tlp, buffer(r, &bl, nlp * es), 0, c->dt, 3, lpd));
    CHECK(rudnn_tensor_init(&tt, buffer(r, &bl, (size_t)(N * S) * 4), 0, RUDNN_I32, 2, td));
    CHECK(rudnn_tensor_init(&tl, buffer(r, &bl, (size_t)N * 4), 0, RUDNN_F32, 1, ld));
    CHECK(rudnn_tensor_init(&tg, buffer(r, &bl, nlp * es), 0, c->dt, 3, lpd));
    /* log_softmax over C of logits in [-3, 3), one step [N, C] at a time */
    float *row = bench_xmalloc(PROG, (size_t)(N * C) * sizeof *row);
    for (int64_t t = 0; t < T; t++) {
        for (int64_t n = 0; n < N; n++) {
            float *x = row + n * C;
            double top = -INFINITY, sum = 0;
            for (int64_t i = 0; i < C; i++) {
                x[i] = 6.0f * lcg01() - 3.0f;
                top = x[i] > top ? x[i] : top;
            }
            for (int64_t i = 0; i < C; i++)
                sum += exp(x[i] - top);
            const double lse = top + log(sum);
            for (int64_t i = 0; i < C; i++)
                x[i] = (float)(x[i] - lse);
        }
        upload(r, tlp.buffer, (size_t)(t * N * C), c->dt, row, (size_t)(N * C));
    }
    free(row);
    /* labels 1..C-1 (0 is the blank); every sample uses all T steps and all S labels */
    int32_t *labels = bench_xmalloc(PROG, (size_t)(N * S) * sizeof *labels);
    for (int64_t i = 0; i < N * S; i++)
        labels[i] = 1 + (int32_t)(lcg01() * (float)(C - 1));
    CHECK(rudnn_tensor_write(r->q, &tt, labels, (size_t)(N * S) * sizeof *labels));
    free(labels);
    int64_t *in_len = bench_xmalloc(PROG, (size_t)N * sizeof *in_len);
    int64_t *tg_len = bench_xmalloc(PROG, (size_t)N * sizeof *tg_len);
    for (int64_t n = 0; n < N; n++)
        in_len[n] = T, tg_len[n] = S;
    CHECK(rudnn_queue_synchronize(r->q));
    call_t k = {.op = OP_CTC, .dir = DIR_FORWARD_BACKWARD};
    k.ctc = (rudnn_ctc_args_t){.log_probs = &tlp, .targets = &tt, .input_lengths = in_len,
                               .target_lengths = tg_len, .loss = &tl, .grad_log_probs = &tg};
    measure(r, c, &k, "tnc", 0, 2.0 * (double)nlp * (double)es + (double)(N * S) * 4 + (double)N * 4);
    free(in_len);
    free(tg_len);
    buffers_destroy(&bl);
}

static void run_case(run_t *r, const vcase_t *c)
{
    switch (c->op) {
    case OP_CONV:
        run_conv(r, c);
        break;
    case OP_POOL:
        run_pool(r, c);
        break;
    case OP_INTERP:
        run_interp(r, c);
        break;
    case OP_GRID:
        run_grid(r, c);
        break;
    case OP_CTC:
        run_ctc(r, c);
        break;
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: " PROG " [--backend NAME] [--reps N] [--case NAME[,NAME]] [--quick]\ncases:");
    for (size_t i = 0; i < sizeof full_cases / sizeof full_cases[0]; i++)
        fprintf(f, " %s", full_cases[i].name);
    fprintf(f, "\n--quick cases:");
    for (size_t i = 0; i < sizeof quick_cases / sizeof quick_cases[0]; i++)
        fprintf(f, " %s", quick_cases[i].name);
    fprintf(f, "\n");
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
            usage(stderr);
            return 2;
        }
    }
    if (r.reps < 1 || r.reps > MAX_REPS) {
        fprintf(stderr, PROG ": --reps must be 1..%d\n", MAX_REPS);
        return 2;
    }
    const vcase_t *list = quick ? quick_cases : full_cases;
    const size_t count = quick ? sizeof quick_cases / sizeof quick_cases[0] : sizeof full_cases / sizeof full_cases[0];
    /* every named case must exist: a typo must not give an empty, "passing" run */
    for (const char *p = cases; p && *p;) {
        const char *comma = strchr(p, ',');
        const size_t len = comma ? (size_t)(comma - p) : strlen(p);
        size_t i = 0;
        while (i < count && !(strlen(list[i].name) == len && !strncmp(list[i].name, p, len)))
            i++;
        if (i == count) {
            fprintf(stderr, PROG ": unknown case '%.*s'%s\n", (int)len, p, quick ? " (with --quick)" : "");
            usage(stderr);
            return 2;
        }
        p = comma ? comma + 1 : NULL;
    }
    rudnn_context_options_t opts = {.backend = backend, .device = -1};
    CHECK(rudnn_context_create(&r.ctx, &opts));
    CHECK(rudnn_queue_create(r.ctx, &r.q));
    CHECK(rudnn_context_device_info(r.ctx, &r.dev));
    bench_events_create(&r.ev, PROG, r.ctx, r.reps);
    const size_t copy_bytes = quick || bench_is_cpu_device(&r.dev) ? (size_t)16 << 20 : (size_t)1 << 30;
    r.copy_gbps = bench_copy(&r.ev, r.ctx, r.q, &r.dev, copy_bytes, r.reps);
    for (size_t i = 0; i < count; i++)
        if (!cases || bench_in_list(cases, list[i].name))
            run_case(&r, &list[i]);
    bench_events_destroy(&r.ev);
    rudnn_queue_destroy(r.q);
    rudnn_context_destroy(r.ctx);
    return r.failed;
}
