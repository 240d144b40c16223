/* Fault cases of convolution (rudnn/convolution.h): the three directions with workspace NULL (the
 * queue's pool) and the two queries, each with RUDNN_CONV_DIRECT and RUDNN_CONV_AUTOTUNE. A 2D
 * convolution of one group, so that both strategies' kernels run: x, dx [2, 3, 5, 4]; w, dw
 * [4, 3, 3, 1]; y, dy [2, 4, 3, 4] (stride {2, 1}, padding {1, 0}, dilation {1, 1}); bias, dbias [4];
 * Direct in F32, Autotune in F16. Their allocations: the pooled workspace where a kernel needs one
 * (none in this release), the plugin's program builds from a cold context, and with a cold autotune
 * key the timing's (its arrays, events) and every candidate's first run. The walk primes each case
 * once, so its Autotune cases run the tuned winner (the cached path). rudnn_conv_resolve and
 * rudnn_conv_workspace_size allocate nothing, from a cold context too (argument checks, the
 * backend's verdicts, the autotune lookup; no program is built), so they are not walked (the walk
 * takes a cold count of 0 on OpenCL for an unwired hook): test_convolution_contract.c
 * (queries_allocate_nothing) runs them with every allocation failing on a new context instead.
 *
 * The tuning itself ("tuning" cases: Autotune, F32): every call gets a key no call saw before (the
 * filter's W is 1, so dilation[1] changes the key and nothing else), so that each call times the
 * candidates afresh; a failure there must leave the outputs as they were too. Their result is
 * checked against an FP64 reference computed here, within FP32 rounding (the winner of a timing may
 * differ from run to run, and its sums may round differently), not compared byte for byte. A key stored in the
 * cache file would stay there for good (every walk stores some hundred), so these cases run only
 * where the file cannot be written (RUDNN_AUTOTUNE_CACHE=/dev/null/x: the winners stay in memory)
 * and are reported as skipped otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fault_case.h"
#include <rudnn/autotune.h>
#include <rudnn/convolution.h>

#define N 2
#define C 3
#define K 4
#define SH 5
#define SW 4
#define RH 3
#define RW 1
#define PH 3 /* (5 + 2 - 2 - 1) / 2 + 1 */
#define PW 4

#define VARIANT(dir, strategy, tuning) ((dir) | (strategy) << 2 | (tuning) << 4)
#define V_DIR(v) ((v)&3)
#define V_STRATEGY(v) (((v) >> 2) & 3)
#define V_TUNING(v) (((v) >> 4) & 1)

typedef struct conv_state {
    fault_env_t env;
    int dir, tuning;
    rudnn_conv_strategy_t strategy;
    rudnn_tensor_t x, w, bias, dy; /* the inputs the direction takes */
    rudnn_tensor_t out, out2;      /* y | dx | dw and dbias */
    rudnn_conv_options_t opts;
    double *ref; /* tuning: out's and out2's values in FP64 */
    double *mag; /* the sum of the terms' magnitudes of each */
    size_t nref;
} conv_state_t;

static const int64_t dims_x[4] = {N, C, SH, SW}, dims_w[4] = {K, C, RH, RW}, dims_y[4] = {N, K, PH, PW};
static const int64_t dims_b[1] = {K};

/* A dilation along W (R 1) that no key of this process had: the key changes, the result not. */
static int64_t fresh_dilation(void)
{
    static int64_t next = 2;
    return next++ % RUDNN_CONV_MAX_PARAM + 1;
}

/* Tuning stores its winners for good where the cache file can be written. */
static int tuning_walkable(void)
{
    if (!rudnn_autotune_is_enabled())
        return 0;
    char path[4096];
    if (rudnn_autotune_cache_path(path, sizeof path) != RUDNN_STATUS_SUCCESS)
        return 1; /* no file at all */
    char *slash = strrchr(path, '/');
    if (slash)
        *slash = '\0';
    struct stat sb;
    return !(stat(slash ? (path[0] ? path : "/") : ".", &sb) == 0 && S_ISDIR(sb.st_mode) &&
             access(slash ? (path[0] ? path : "/") : ".", W_OK) == 0);
}

static rudnn_status_t read_f32(const fault_env_t *env, const rudnn_tensor_t *t, float *out)
{
    const size_t n = (size_t)rudnn_tensor_numel(t), bytes = rudnn_tensor_bytes(t);
    void *raw = malloc(bytes ? bytes : 1);
    if (!raw)
        return RUDNN_STATUS_ALLOC_FAILED;
    rudnn_status_t st = rudnn_tensor_read(env->queue, t, raw, bytes);
    if (!st)
        rudnn_convert_to_f32(t->dtype, raw, out, n);
    free(raw);
    return st;
}

/* out's (and out2's) values in FP64 from the inputs as the device holds them (row-major, one group). */
static rudnn_status_t make_reference(conv_state_t *s)
{
    float x[N * C * SH * SW], w[K * C * RH * RW], dy[N * K * PH * PW], b[K];
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    if (s->dir != RUDNN_CONV_DATA_BACKWARD)
        st = read_f32(&s->env, &s->x, x);
    if (!st && s->dir != RUDNN_CONV_WEIGHT_BACKWARD)
        st = read_f32(&s->env, &s->w, w);
    if (!st && s->dir != RUDNN_CONV_FORWARD)
        st = read_f32(&s->env, &s->dy, dy);
    if (!st && s->dir == RUDNN_CONV_FORWARD)
        st = read_f32(&s->env, &s->bias, b);
    if (st)
        return st;
    const size_t n_out = (size_t)rudnn_tensor_numel(&s->out), n2 = s->dir == RUDNN_CONV_WEIGHT_BACKWARD ? K : 0;
    s->nref = n_out + n2;
    s->ref = calloc(s->nref, sizeof *s->ref);
    s->mag = calloc(s->nref, sizeof *s->mag);
    if (!s->ref || !s->mag)
        return RUDNN_STATUS_ALLOC_FAILED;
    const int64_t sh = s->opts.stride[0], sw = s->opts.stride[1], ph = s->opts.padding[0], pw = s->opts.padding[1];
    const int64_t dh = s->opts.dilation[0], dw = s->opts.dilation[1];
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            for (int oh = 0; oh < PH; oh++)
                for (int ow = 0; ow < PW; ow++) {
                    const size_t yi = (((size_t)n * K + k) * PH + oh) * PW + ow;
                    for (int c = 0; c < C; c++)
                        for (int rh = 0; rh < RH; rh++)
                            for (int rw = 0; rw < RW; rw++) {
                                const int64_t ih = oh * sh - ph + rh * dh, iw = ow * sw - pw + rw * dw;
                                if (ih < 0 || ih >= SH || iw < 0 || iw >= SW)
                                    continue;
                                const size_t xi = (((size_t)n * C + c) * SH + ih) * SW + iw;
                                const size_t wi = (((size_t)k * C + c) * RH + rh) * RW + rw;
                                if (s->dir == RUDNN_CONV_FORWARD) {
                                    s->ref[yi] += (double)x[xi] * w[wi], s->mag[yi] += fabs((double)x[xi] * w[wi]);
                                } else if (s->dir == RUDNN_CONV_DATA_BACKWARD) {
                                    s->ref[xi] += (double)dy[yi] * w[wi];
                                    s->mag[xi] += fabs((double)dy[yi] * w[wi]);
                                } else {
                                    s->ref[wi] += (double)dy[yi] * x[xi];
                                    s->mag[wi] += fabs((double)dy[yi] * x[xi]);
                                }
                            }
                    if (s->dir == RUDNN_CONV_WEIGHT_BACKWARD)
                        s->ref[n_out + k] += dy[yi], s->mag[n_out + k] += fabs(dy[yi]);
                }
    if (s->dir == RUDNN_CONV_FORWARD)
        for (size_t i = 0; i < n_out; i++)
            s->ref[i] += b[i / (PH * PW) % K], s->mag[i] += fabs(b[i / (PH * PW) % K]);
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t setup(void *p, const fault_env_t *env)
{
    conv_state_t *s = p;
    s->env = *env;
    s->dir = V_DIR(env->variant), s->tuning = V_TUNING(env->variant);
    s->strategy = (rudnn_conv_strategy_t)V_STRATEGY(env->variant);
    if (s->tuning && !tuning_walkable()) {
        static int said;
        if (!said++)
            printf("faults convolution: the tuning cases need an autotune cache that is not written "
                   "(RUDNN_AUTOTUNE_CACHE=/dev/null/x): every walk would store its keys for good\n");
        return RUDNN_STATUS_NOT_SUPPORTED;
    }
    /* a backend without convolution kernels answers NOT_SUPPORTED (the case is then skipped); the
     * query allocates nothing */
    int kernels;
    const rudnn_status_t have = rudnn_conv_kernel_count(env->ctx, &kernels);
    if (have)
        return have;
    const rudnn_dtype_t dt = s->strategy == RUDNN_CONV_AUTOTUNE && !s->tuning ? RUDNN_F16 : RUDNN_F32;
    rudnn_conv_options_init(&s->opts);
    s->opts.stride[0] = 2, s->opts.padding[0] = 1;
    if (s->tuning)
        s->opts.dilation[1] = fresh_dilation();
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    switch (s->dir) {
    case RUDNN_CONV_FORWARD:
        st = fault_float_tensor(env, dt, 4, dims_x, 41, &s->x);
        if (!st)
            st = fault_float_tensor(env, dt, 4, dims_w, 42, &s->w);
        if (!st)
            st = fault_float_tensor(env, dt, 1, dims_b, 43, &s->bias);
        if (!st)
            st = fault_out_tensor(env, dt, 4, dims_y, &s->out);
        break;
    case RUDNN_CONV_DATA_BACKWARD:
        st = fault_float_tensor(env, dt, 4, dims_y, 44, &s->dy);
        if (!st)
            st = fault_float_tensor(env, dt, 4, dims_w, 45, &s->w);
        if (!st)
            st = fault_out_tensor(env, dt, 4, dims_x, &s->out);
        break;
    default:
        st = fault_float_tensor(env, dt, 4, dims_x, 46, &s->x);
        if (!st)
            st = fault_float_tensor(env, dt, 4, dims_y, 47, &s->dy);
        if (!st)
            st = fault_out_tensor(env, dt, 4, dims_w, &s->out);
        if (!st)
            st = fault_out_tensor(env, dt, 1, dims_b, &s->out2);
        break;
    }
    if (!st && s->tuning)
        st = make_reference(s);
    return st;
}

static rudnn_status_t prepare(void *p)
{
    conv_state_t *s = p;
    rudnn_status_t st = fault_fill_sentinel(&s->env, &s->out);
    return st || !s->out2.buffer ? st : fault_fill_sentinel(&s->env, &s->out2);
}

static rudnn_status_t call(void *p)
{
    conv_state_t *s = p;
    const rudnn_queue_t q = s->env.queue;
    switch (s->dir) {
    case RUDNN_CONV_FORWARD:
        return rudnn_conv_forward(q, &s->x, &s->w, &s->bias, &s->opts, s->strategy, NULL, 0, &s->out);
    case RUDNN_CONV_DATA_BACKWARD:
        return rudnn_conv_data_backward(q, &s->dy, &s->w, &s->opts, s->strategy, NULL, 0, &s->out);
    default:
        return rudnn_conv_weight_backward(q, &s->x, &s->dy, &s->opts, s->strategy, NULL, 0, &s->out, &s->out2);
    }
}

static int unchanged(void *p, char *why, size_t cap)
{
    conv_state_t *s = p;
    const char *name = s->dir == RUDNN_CONV_FORWARD ? "y" : s->dir == RUDNN_CONV_DATA_BACKWARD ? "dx" : "dw";
    return fault_is_sentinel(&s->env, &s->out, name, why, cap) &&
           (!s->out2.buffer || fault_is_sentinel(&s->env, &s->out2, "dbias", why, cap));
}

/* Tuning: every element within FP32 rounding of its sum of the FP64 reference; a mismatch is said on
 * stdout and fails the case (INTERNAL: "reading the result failed"); else one byte, 1. */
static rudnn_status_t tolerance_result(conv_state_t *s, uint8_t **bytes, size_t *size)
{
    float *got = malloc(s->nref * sizeof *got);
    if (!got)
        return RUDNN_STATUS_ALLOC_FAILED;
    const size_t n_out = (size_t)rudnn_tensor_numel(&s->out);
    rudnn_status_t st = read_f32(&s->env, &s->out, got);
    if (!st && s->out2.buffer)
        st = read_f32(&s->env, &s->out2, got + n_out);
    for (size_t i = 0; !st && i < s->nref; i++)
        if (!(fabs((double)got[i] - s->ref[i]) <= 1e-5 * s->mag[i] + 1e-6)) {
            printf("faults convolution: direction %d, element %zu of %zu: %.9g, expected %.9g\n", s->dir, i, s->nref,
                   (double)got[i], s->ref[i]);
            st = RUDNN_STATUS_INTERNAL;
        }
    free(got);
    if (st)
        return st;
    *bytes = malloc(1);
    if (!*bytes)
        return RUDNN_STATUS_ALLOC_FAILED;
    **bytes = 1;
    *size = 1;
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t result(void *p, uint8_t **bytes, size_t *size)
{
    conv_state_t *s = p;
    *bytes = NULL;
    *size = 0;
    if (s->tuning)
        return tolerance_result(s, bytes, size);
    rudnn_status_t st = fault_append_tensor(&s->env, &s->out, bytes, size);
    return st || !s->out2.buffer ? st : fault_append_tensor(&s->env, &s->out2, bytes, size);
}

/* A tuning case's next call gets a key of its own again (the one before was stored). */
static void undo(void *p)
{
    conv_state_t *s = p;
    if (s->tuning)
        s->opts.dilation[1] = fresh_dilation();
}

static void teardown(void *p)
{
    conv_state_t *s = p;
    rudnn_tensor_t *all[] = {&s->x, &s->w, &s->bias, &s->dy, &s->out, &s->out2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        fault_drop_tensor(all[i]);
    free(s->ref);
    free(s->mag);
}

#define CONV_CASE(op, label, dir, strategy, tuning)                                                          \
    {op,     sizeof(conv_state_t), FAULT_COLD_CONTEXT | FAULT_COLD_QUEUE | FAULT_WARM, setup, prepare, call, \
     unchanged, result, undo, teardown, label, VARIANT(dir, strategy, tuning)}

#define FWD RUDNN_CONV_FORWARD
#define DATA RUDNN_CONV_DATA_BACKWARD
#define WEIGHT RUDNN_CONV_WEIGHT_BACKWARD
#define DIRECT RUDNN_CONV_DIRECT
#define AUTO RUDNN_CONV_AUTOTUNE

static const fault_case_t cases[] = {
    CONV_CASE("conv_forward", "conv_forward (Direct, f32, bias, pool)", FWD, DIRECT, 0),
    CONV_CASE("conv_forward", "conv_forward (Autotune, f16, bias, pool)", FWD, AUTO, 0),
    CONV_CASE("conv_data_backward", "conv_data_backward (Direct, f32, pool)", DATA, DIRECT, 0),
    CONV_CASE("conv_data_backward", "conv_data_backward (Autotune, f16, pool)", DATA, AUTO, 0),
    CONV_CASE("conv_weight_backward", "conv_weight_backward (Direct, f32, dbias)", WEIGHT, DIRECT, 0),
    CONV_CASE("conv_weight_backward", "conv_weight_backward (Autotune, f16, dbias)", WEIGHT, AUTO, 0),
    CONV_CASE("conv_forward", "conv_forward (Autotune tuning, f32, bias)", FWD, AUTO, 1),
    CONV_CASE("conv_data_backward", "conv_data_backward (Autotune tuning, f32)", DATA, AUTO, 1),
    CONV_CASE("conv_weight_backward", "conv_weight_backward (Autotune tuning, f32)", WEIGHT, AUTO, 1),
};

const fault_family_t fault_family_convolution = {"convolution", cases, sizeof cases / sizeof cases[0]};
