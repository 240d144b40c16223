/* rudnn-bench: times the normalization family and prints one JSON line per case.
 *
 *   {"op","shape":[R,C],"dtype","backend","device","strategy","median_ms","min_ms",
 *    "gbps","tflops","peak_fraction","copy_gbps","reps","buffers"}
 *
 * gbps counts the minimal traffic: every input read once, every output written
 * once, gamma/beta (F32 [C]) and rstd (F32 [R], add_rms_norm) included.
 * copy_gbps is the device-to-device copy bandwidth measured in the same run
 * (read + write bytes of rudnn_buffer_copy); peak_fraction = gbps / copy_gbps.
 * tflops uses a nominal flop count per element (see FLOPS_PER_ELEMENT).
 *
 * Each launch is bracketed by rudnn_event_record and timed with
 * rudnn_event_elapsed_ms; 3 warm-up launches, then --reps timed ones. When the
 * working set of one case is smaller than 4x a 60 MB L2, several independent
 * sets of buffers are used in turn so the timing does not measure the cache.
 *
 * Diagnostics go to stderr; stdout carries only JSON lines. Any failing call
 * prints its status and rudnn_last_error() and exits 1, except an op answering
 * RUDNN_STATUS_NOT_SUPPORTED, which is reported as a {"skipped": ...} line.
 *
 * The autotune modes print text instead: --tune-show the autotune cache as a table (tune_show.c),
 * --tune <family> one progress line per tuned case (tune_attention.c for attention). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "rudnn/rudnn.h"
#include "tune.h"

#define WARMUP 3
#define DEFAULT_REPS 50
#define QUICK_REPS 5
#define L2_ROTATE_BYTES (4.0 * 60e6) /* rotate buffers below 4x a 60 MB L2 */
#define MAX_SETS 64
#define QUICK_MAX_SETS 4
#define MAX_SHAPES 32
#define EPS 1e-5f

enum { OP_RMS_NORM, OP_LAYER_NORM, OP_ADD_RMS_NORM, OP_SOFTMAX, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"rms_norm", "layer_norm", "add_rms_norm", "softmax"};
/* Nominal arithmetic per element, for the TFLOP/s column (these ops are memory bound). */
static const double FLOPS_PER_ELEMENT[OP_COUNT] = {
    4.0, /* rms_norm: square-accumulate (2), scale by rstd, scale by gamma */
    8.0, /* layer_norm: sum, subtract mean, square-accumulate (2), normalize, gamma, beta */
    5.0, /* add_rms_norm: add, then rms_norm */
    5.0, /* softmax: max, subtract, exp, sum, scale */
};

typedef struct shape {
    int64_t rows, cols;
} shape_t;

typedef struct options {
    int ops[OP_COUNT];
    rudnn_dtype_t dtypes[3];
    int dtype_count;
    shape_t shapes[MAX_SHAPES];
    int shape_count;
    int reps;
    int quick;
    const char *tune_family; /* --tune FAMILY */
    int tune_show;
    const char *backend;
    int device;
    long copy_mib; /* 0 = automatic */
} options_t;

/* ---- errors ---------------------------------------------------------------- */

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("rudnn-bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

#define CHECK(call)                                                                              \
    do {                                                                                         \
        rudnn_status_t check_status_ = (call);                                                   \
        if (check_status_ != RUDNN_STATUS_SUCCESS)                                               \
            die("%s failed: %s: %s", #call, rudnn_status_string(check_status_),                  \
                rudnn_last_error());                                                             \
    } while (0)


/* Common prefix of every case line: op, shape, dtype, backend, device, strategy. */
static void json_case_head(const char *op, const int64_t *dims, int rank, const char *dtype,
                           const rudnn_device_info_t *dev)
{
    printf("{\"op\":");
    bench_json_string(op);
    printf(",\"shape\":[");
    for (int i = 0; i < rank; ++i)
        printf("%s%lld", i ? "," : "", (long long)dims[i]);
    printf("],\"dtype\":");
    bench_json_string(dtype);
    printf(",\"backend\":");
    bench_json_string(dev->backend);
    printf(",\"device\":");
    bench_json_string(dev->name);
    printf(",\"strategy\":\"default\"");
}

/* ---- argument parsing ------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: rudnn-bench [options]\n"
            "  --op NAME[,NAME]     rms_norm, layer_norm, add_rms_norm, softmax (default: all)\n"
            "  --dtype D[,D]        f32, f16, bf16 (default: all three)\n"
            "  --shape RxC[,RxC]    default: 16384x8192,4096x65536,65536x1024\n"
            "  --quick              tiny shapes (64x1024, 8x4097) and %d reps, for CPU/PoCL smoke runs\n"
            "  --reps N             timed launches per case (default %d; %d with --quick)\n"
            "  --backend NAME       auto, cuda, hip, opencl (default: RUDNN_BACKEND, else auto)\n"
            "  --device N           device index (default: RUDNN_DEVICE, else 0)\n"
            "  --copy-mib N         size of the reference copy (default min(2 GiB, memory/8))\n"
            "  --tune FAMILY        fill the autotune cache for a family's shape buckets (attention;\n"
            "                       with --quick, small shapes), printing a line per case\n"
            "  --tune-show          print the autotune cache (its path, then key parts, winner, ms)\n"
            "Prints one JSON line per case on stdout.\n",
            QUICK_REPS, DEFAULT_REPS, QUICK_REPS);
}

/* Splits a comma-separated list in place and calls fn on each item. */
static void for_each_item(char *list, void (*fn)(const char *item, options_t *o), options_t *o)
{
    char *save = NULL;
    for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if (*tok)
            fn(tok, o);
}

static void add_op(const char *item, options_t *o)
{
    for (int i = 0; i < OP_COUNT; ++i) {
        if (strcmp(item, op_names[i]) == 0) {
            o->ops[i] = 1;
            return;
        }
    }
    if (strcmp(item, "all") == 0) {
        for (int i = 0; i < OP_COUNT; ++i)
            o->ops[i] = 1;
        return;
    }
    die("unknown op '%s' (rms_norm, layer_norm, add_rms_norm, softmax)", item);
}

static void add_dtype(const char *item, options_t *o)
{
    rudnn_dtype_t dt;
    if (strcmp(item, "f32") == 0)
        dt = RUDNN_F32;
    else if (strcmp(item, "f16") == 0)
        dt = RUDNN_F16;
    else if (strcmp(item, "bf16") == 0)
        dt = RUDNN_BF16;
    else
        die("unknown dtype '%s' (f32, f16, bf16)", item);
    for (int i = 0; i < o->dtype_count; ++i)
        if (o->dtypes[i] == dt)
            return;
    o->dtypes[o->dtype_count++] = dt;
}

static void add_shape(const char *item, options_t *o)
{
    char *end = NULL;
    long long r = strtoll(item, &end, 10);
    if (!end || (*end != 'x' && *end != 'X'))
        die("bad shape '%s' (expected RxC, e.g. 16384x8192)", item);
    const char *c_str = end + 1;
    long long c = strtoll(c_str, &end, 10);
    if (end == c_str || *end != '\0' || r < 1 || c < 1 || r > (1LL << 40) || c > (1LL << 40))
        die("bad shape '%s' (expected RxC with R, C >= 1)", item);
    if (o->shape_count >= MAX_SHAPES)
        die("too many shapes (at most %d)", MAX_SHAPES);
    o->shapes[o->shape_count].rows = r;
    o->shapes[o->shape_count].cols = c;
    o->shape_count++;
}

static long parse_long(const char *flag, const char *v, long lo, long hi)
{
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (end == v || *end != '\0' || x < lo || x > hi)
        die("%s: '%s' is not an integer in [%ld, %ld]", flag, v, lo, hi);
    return x;
}

static void parse_args(int argc, char **argv, options_t *o)
{
    memset(o, 0, sizeof *o);
    o->device = -1;
    int have_ops = 0, reps_set = 0;
    for (int i = 1; i < argc; ++i) {
        const char *arg = argv[i];
        const char *val = NULL;
        char flag[64];
        const char *eq = strchr(arg, '=');
        if (strncmp(arg, "--", 2) == 0 && eq && (size_t)(eq - arg) < sizeof flag) {
            memcpy(flag, arg, (size_t)(eq - arg));
            flag[eq - arg] = '\0';
            val = eq + 1;
        } else {
            snprintf(flag, sizeof flag, "%s", arg);
        }
#define NEED_VALUE()                                                                             \
    do {                                                                                         \
        if (!val) {                                                                              \
            if (i + 1 >= argc)                                                                   \
                die("%s needs a value", flag);                                                   \
            val = argv[++i];                                                                     \
        }                                                                                        \
    } while (0)
        if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(flag, "--op") == 0) {
            NEED_VALUE();
            char *copy = strdup(val);
            for_each_item(copy, add_op, o);
            free(copy);
            have_ops = 1;
        } else if (strcmp(flag, "--dtype") == 0) {
            NEED_VALUE();
            char *copy = strdup(val);
            for_each_item(copy, add_dtype, o);
            free(copy);
        } else if (strcmp(flag, "--shape") == 0) {
            NEED_VALUE();
            char *copy = strdup(val);
            for_each_item(copy, add_shape, o);
            free(copy);
        } else if (strcmp(flag, "--reps") == 0) {
            NEED_VALUE();
            o->reps = (int)parse_long(flag, val, 1, 100000);
            reps_set = 1;
        } else if (strcmp(flag, "--backend") == 0) {
            NEED_VALUE();
            o->backend = val;
        } else if (strcmp(flag, "--device") == 0) {
            NEED_VALUE();
            o->device = (int)parse_long(flag, val, 0, 1 << 20);
        } else if (strcmp(flag, "--copy-mib") == 0) {
            NEED_VALUE();
            o->copy_mib = parse_long(flag, val, 1, 1L << 20);
        } else if (strcmp(flag, "--quick") == 0 && !val) {
            o->quick = 1;
        } else if (strcmp(flag, "--tune") == 0) {
            NEED_VALUE();
            o->tune_family = val;
        } else if (strcmp(flag, "--tune-show") == 0 && !val) {
            o->tune_show = 1;
        } else {
            usage(stderr);
            die("unknown argument '%s'", arg);
        }
#undef NEED_VALUE
    }
    if (!have_ops)
        for (int i = 0; i < OP_COUNT; ++i)
            o->ops[i] = 1;
    if (o->dtype_count == 0) {
        o->dtypes[0] = RUDNN_F32;
        o->dtypes[1] = RUDNN_F16;
        o->dtypes[2] = RUDNN_BF16;
        o->dtype_count = 3;
    }
    if (o->shape_count == 0) {
        if (o->quick) {
            add_shape("64x1024", o);
            add_shape("8x4097", o);
        } else {
            add_shape("16384x8192", o);
            add_shape("4096x65536", o);
            add_shape("65536x1024", o);
        }
    }
    if (!reps_set)
        o->reps = o->quick ? QUICK_REPS : DEFAULT_REPS;
}

/* ---- device-to-device copy reference -------------------------------------- */

static double measure_copy(rudnn_context_t ctx, rudnn_queue_t q, const rudnn_device_info_t *dev,
                           const options_t *o, bench_events_t *t)
{
    const uint64_t two_gib = 2ULL << 30;
    uint64_t bytes;
    if (o->copy_mib > 0) {
        bytes = (uint64_t)o->copy_mib << 20;
    } else {
        bytes = dev->global_memory_bytes ? dev->global_memory_bytes / 8 : (256ULL << 20);
        if (bytes > two_gib)
            bytes = two_gib;
        /* CPU OpenCL (PoCL) and smoke runs: a copy of that size would take seconds. */
        int cpu_device = bench_is_cpu_device(dev);
        if ((o->quick || cpu_device) && bytes > (256ULL << 20))
            bytes = 256ULL << 20;
    }
    bytes &= ~(uint64_t)4095;
    if (bytes < 4096)
        bytes = 4096;

    rudnn_buffer_t src = NULL, dst = NULL;
    CHECK(rudnn_buffer_create(ctx, (size_t)bytes, &src));
    CHECK(rudnn_buffer_create(ctx, (size_t)bytes, &dst));
    CHECK(rudnn_buffer_fill(q, src, 0, 0x5a, (size_t)bytes));
    CHECK(rudnn_buffer_fill(q, dst, 0, 0x00, (size_t)bytes));
    for (int i = 0; i < WARMUP; ++i)
        CHECK(rudnn_buffer_copy(q, dst, 0, src, 0, (size_t)bytes));
    CHECK(rudnn_queue_synchronize(q));
    for (int i = 0; i < t->count; ++i) {
        CHECK(rudnn_event_record(t->start[i], q));
        CHECK(rudnn_buffer_copy(q, dst, 0, src, 0, (size_t)bytes));
        CHECK(rudnn_event_record(t->end[i], q));
    }
    double median, minimum;
    bench_stats(t, t->count, &median, &minimum);
    CHECK(rudnn_queue_synchronize(q));
    rudnn_buffer_destroy(src);
    rudnn_buffer_destroy(dst);

    if (!(median > 0.0))
        die("device-to-device copy of %llu bytes timed at %g ms: the event timer does not work",
            (unsigned long long)bytes, median);
    double moved = 2.0 * (double)bytes; /* read + write */
    double gbps = moved / (median * 1e-3) / 1e9;
    int64_t dims[1] = {(int64_t)bytes};
    json_case_head("copy", dims, 1, "u8", dev);
    printf(",\"median_ms\":%.6f,\"min_ms\":%.6f,\"gbps\":%.2f,\"tflops\":0,\"peak_fraction\":1,"
           "\"copy_gbps\":%.2f,\"reps\":%d,\"buffers\":1}\n",
           median, minimum, gbps, gbps, t->count);
    fflush(stdout);
    return gbps;
}

/* ---- host data ------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static float rng_uniform(float lo, float hi) /* never exactly 0 for lo < 0 < hi */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 0x2545f4914f6cdd1dULL;
    float u = (float)(r >> 40) * (1.0f / 16777216.0f); /* [0, 1) */
    float v = lo + (hi - lo) * u;
    return v == 0.0f ? 0.5f : v;
}

static void fill_random(float *dst, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; ++i)
        dst[i] = rng_uniform(lo, hi);
}

/* ---- one case -------------------------------------------------------------- */

typedef struct case_set {
    rudnn_buffer_t in0, in1, out0, out1, rstd;
    rudnn_tensor_t t_in0, t_in1, t_out0, t_out1, t_rstd;
} case_set_t;

typedef struct case_inputs {
    const void *x; /* converted host data, tensor_bytes each */
    const void *r;
    rudnn_buffer_t gamma, beta;
    rudnn_tensor_t t_gamma, t_beta;
} case_inputs_t;

static rudnn_status_t launch(int op, rudnn_queue_t q, const case_set_t *s, const case_inputs_t *in)
{
    switch (op) {
    case OP_RMS_NORM:
        return rudnn_rms_norm(q, &s->t_in0, &in->t_gamma, EPS, &s->t_out0);
    case OP_LAYER_NORM:
        return rudnn_layer_norm(q, &s->t_in0, &in->t_gamma, &in->t_beta, EPS, &s->t_out0);
    case OP_ADD_RMS_NORM:
        return rudnn_add_rms_norm(q, &s->t_in0, &s->t_in1, &in->t_gamma, EPS, &s->t_out0,
                                  &s->t_rstd, &s->t_out1);
    case OP_SOFTMAX:
        return rudnn_softmax_last_axis(q, &s->t_in0, &s->t_out0);
    default:
        return RUDNN_STATUS_INTERNAL;
    }
}

static void print_skip(int op, const shape_t *sh, rudnn_dtype_t dt, const rudnn_device_info_t *dev,
                       const char *why)
{
    int64_t dims[2] = {sh->rows, sh->cols};
    json_case_head(op_names[op], dims, 2, rudnn_dtype_name(dt), dev);
    printf(",\"skipped\":");
    bench_json_string(why);
    printf("}\n");
    fflush(stdout);
    fprintf(stderr, "rudnn-bench: %s %lldx%lld %s skipped: %s\n", op_names[op],
            (long long)sh->rows, (long long)sh->cols, rudnn_dtype_name(dt), why);
}

/* Bytes of one set of per-case tensors (inputs, outputs, rstd); *params gets gamma/beta. */
static double case_set_bytes(int op, const shape_t *sh, rudnn_dtype_t dt, double *params)
{
    double tensor = (double)sh->rows * (double)sh->cols * (double)rudnn_dtype_size(dt);
    double rstd = (double)sh->rows * sizeof(float);
    *params = (double)sh->cols * sizeof(float) * (op == OP_LAYER_NORM ? 2.0 : 1.0);
    if (op == OP_ADD_RMS_NORM)
        return 4.0 * tensor + rstd; /* a, residual -> y, x_out, rstd */
    return 2.0 * tensor;
}

/* 1 when one set of the case fits in 85% of the device memory (or the size is unknown). */
static int case_fits(int op, const shape_t *sh, rudnn_dtype_t dt, const rudnn_device_info_t *dev)
{
    double params = 0.0;
    double set_bytes = case_set_bytes(op, sh, dt, &params);
    return !dev->global_memory_bytes ||
           set_bytes <= 0.85 * (double)dev->global_memory_bytes - params;
}

static void run_case(int op, const shape_t *sh, rudnn_dtype_t dt, rudnn_context_t ctx,
                     rudnn_queue_t q, const rudnn_device_info_t *dev, const options_t *o,
                     bench_events_t *t, const case_inputs_t *in, double copy_gbps)
{
    const int64_t dims[2] = {sh->rows, sh->cols};
    const double n = (double)sh->rows * (double)sh->cols;
    const size_t tensor_bytes = (size_t)sh->rows * (size_t)sh->cols * rudnn_dtype_size(dt);
    const size_t rstd_bytes = (size_t)sh->rows * sizeof(float);

    double params = 0.0;
    double set_bytes = case_set_bytes(op, sh, dt, &params);
    double minimal_bytes = set_bytes + params;

    int max_sets = o->quick ? QUICK_MAX_SETS : MAX_SETS;
    int sets = 1;
    if (set_bytes < L2_ROTATE_BYTES) {
        double want = L2_ROTATE_BYTES / set_bytes;
        sets = want >= max_sets ? max_sets : (int)want + 1;
    }
    if (!case_fits(op, sh, dt, dev)) {
        print_skip(op, sh, dt, dev, "working set does not fit in device memory");
        return;
    }
    if (dev->global_memory_bytes) {
        double budget = 0.85 * (double)dev->global_memory_bytes - params;
        while (sets > 1 && sets * set_bytes > budget)
            --sets;
    }
    if (sets > t->count)
        sets = t->count > 0 ? t->count : 1;

    case_set_t *s = calloc((size_t)sets, sizeof *s);
    if (!s)
        die("out of host memory");
    for (int k = 0; k < sets; ++k) {
        CHECK(rudnn_buffer_create(ctx, tensor_bytes, &s[k].in0));
        CHECK(rudnn_tensor_init(&s[k].t_in0, s[k].in0, 0, dt, 2, dims));
        CHECK(rudnn_tensor_write(q, &s[k].t_in0, in->x, tensor_bytes));
        CHECK(rudnn_buffer_create(ctx, tensor_bytes, &s[k].out0));
        CHECK(rudnn_tensor_init(&s[k].t_out0, s[k].out0, 0, dt, 2, dims));
        if (op == OP_ADD_RMS_NORM) {
            CHECK(rudnn_buffer_create(ctx, tensor_bytes, &s[k].in1));
            CHECK(rudnn_tensor_init(&s[k].t_in1, s[k].in1, 0, dt, 2, dims));
            CHECK(rudnn_tensor_write(q, &s[k].t_in1, in->r, tensor_bytes));
            CHECK(rudnn_buffer_create(ctx, tensor_bytes, &s[k].out1));
            CHECK(rudnn_tensor_init(&s[k].t_out1, s[k].out1, 0, dt, 2, dims));
            CHECK(rudnn_buffer_create(ctx, rstd_bytes, &s[k].rstd));
            CHECK(rudnn_tensor_init(&s[k].t_rstd, s[k].rstd, 0, RUDNN_F32, 1, &dims[0]));
        }
    }
    CHECK(rudnn_queue_synchronize(q));

    int skipped = 0;
    for (int i = 0; i < WARMUP; ++i) {
        rudnn_status_t st = launch(op, q, &s[i % sets], in);
        if (st == RUDNN_STATUS_NOT_SUPPORTED && i == 0) {
            char why[RUDNN_MESSAGE_MAX + 64];
            snprintf(why, sizeof why, "RUDNN_STATUS_NOT_SUPPORTED: %s", rudnn_last_error());
            print_skip(op, sh, dt, dev, why);
            skipped = 1;
            break;
        }
        if (st != RUDNN_STATUS_SUCCESS)
            die("%s %lldx%lld %s (warm-up) failed: %s: %s", op_names[op], (long long)sh->rows,
                (long long)sh->cols, rudnn_dtype_name(dt), rudnn_status_string(st),
                rudnn_last_error());
    }
    if (!skipped) {
        CHECK(rudnn_queue_synchronize(q));
        for (int i = 0; i < t->count; ++i) {
            CHECK(rudnn_event_record(t->start[i], q));
            rudnn_status_t st = launch(op, q, &s[i % sets], in);
            if (st != RUDNN_STATUS_SUCCESS)
                die("%s %lldx%lld %s failed: %s: %s", op_names[op], (long long)sh->rows,
                    (long long)sh->cols, rudnn_dtype_name(dt), rudnn_status_string(st),
                    rudnn_last_error());
            CHECK(rudnn_event_record(t->end[i], q));
        }
        double median, minimum;
        bench_stats(t, t->count, &median, &minimum);
        CHECK(rudnn_queue_synchronize(q));
        double secs = median * 1e-3;
        double gbps = secs > 0 ? minimal_bytes / secs / 1e9 : 0.0;
        double tflops = secs > 0 ? FLOPS_PER_ELEMENT[op] * n / secs / 1e12 : 0.0;
        double frac = copy_gbps > 0 ? gbps / copy_gbps : 0.0;
        json_case_head(op_names[op], dims, 2, rudnn_dtype_name(dt), dev);
        printf(",\"median_ms\":%.6f,\"min_ms\":%.6f,\"gbps\":%.2f,\"tflops\":%.4f,"
               "\"peak_fraction\":%.4f,\"copy_gbps\":%.2f,\"reps\":%d,\"buffers\":%d}\n",
               median, minimum, gbps, tflops, frac, copy_gbps, t->count, sets);
        fflush(stdout);
    }

    for (int k = 0; k < sets; ++k) {
        rudnn_buffer_destroy(s[k].in0);
        rudnn_buffer_destroy(s[k].out0);
        if (s[k].in1)
            rudnn_buffer_destroy(s[k].in1);
        if (s[k].out1)
            rudnn_buffer_destroy(s[k].out1);
        if (s[k].rstd)
            rudnn_buffer_destroy(s[k].rstd);
    }
    free(s);
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    options_t o;
    parse_args(argc, argv, &o);

    if (o.tune_show)
        return bench_tune_show();
    if (o.tune_family) {
        /* DESIGN.md section 5: --tune fills the autotune cache. Only attention has candidates to
         * time; the other families have one kernel per case, so say so rather than pretend. */
        if (strcmp(o.tune_family, "attention") != 0) {
            printf("nothing to tune for %s yet\n", o.tune_family);
            return 0;
        }
        return bench_tune_attention(o.backend, o.device, o.quick);
    }

    rudnn_context_options_t copts;
    memset(&copts, 0, sizeof copts);
    copts.backend = o.backend;
    copts.device = o.device;
    copts.plugin_path = NULL;
    rudnn_context_t ctx = NULL;
    CHECK(rudnn_context_create(&ctx, &copts));
    rudnn_device_info_t dev;
    memset(&dev, 0, sizeof dev);
    CHECK(rudnn_context_device_info(ctx, &dev));
    rudnn_queue_t q = NULL;
    CHECK(rudnn_queue_create(ctx, &q));
    fprintf(stderr, "rudnn-bench: %s device %d: %s (%s), %.1f GiB\n", dev.backend, dev.index,
            dev.name, dev.driver, (double)dev.global_memory_bytes / (1024.0 * 1024.0 * 1024.0));

    bench_events_t timer;
    bench_events_create(&timer, "rudnn-bench", ctx, o.reps);
    double copy_gbps = measure_copy(ctx, q, &dev, &o, &timer);

    int need_residual = o.ops[OP_ADD_RMS_NORM];
    for (int si = 0; si < o.shape_count; ++si) {
        const shape_t *sh = &o.shapes[si];
        size_t n = (size_t)sh->rows * (size_t)sh->cols;
        size_t cols = (size_t)sh->cols;

        int any_fits = 0;
        for (int di = 0; di < o.dtype_count; ++di)
            for (int op = 0; op < OP_COUNT; ++op)
                if (o.ops[op] && case_fits(op, sh, o.dtypes[di], &dev))
                    any_fits = 1;
        if (!any_fits) { /* report every case as skipped without making host data */
            for (int di = 0; di < o.dtype_count; ++di)
                for (int op = 0; op < OP_COUNT; ++op)
                    if (o.ops[op])
                        print_skip(op, sh, o.dtypes[di], &dev,
                                   "working set does not fit in device memory");
            continue;
        }

        float *hx = bench_xmalloc("rudnn-bench", n * sizeof(float));
        float *hr = need_residual ? bench_xmalloc("rudnn-bench", n * sizeof(float)) : NULL;
        fill_random(hx, n, -2.0f, 2.0f);
        if (hr)
            fill_random(hr, n, -1.0f, 1.0f);
        float *hg = bench_xmalloc("rudnn-bench", cols * sizeof(float));
        float *hb = bench_xmalloc("rudnn-bench", cols * sizeof(float));
        fill_random(hg, cols, 0.5f, 1.5f);
        fill_random(hb, cols, -0.25f, 0.25f);

        case_inputs_t in;
        memset(&in, 0, sizeof in);
        int64_t gdims[1] = {sh->cols};
        CHECK(rudnn_buffer_create(ctx, cols * sizeof(float), &in.gamma));
        CHECK(rudnn_tensor_init(&in.t_gamma, in.gamma, 0, RUDNN_F32, 1, gdims));
        CHECK(rudnn_tensor_write(q, &in.t_gamma, hg, cols * sizeof(float)));
        CHECK(rudnn_buffer_create(ctx, cols * sizeof(float), &in.beta));
        CHECK(rudnn_tensor_init(&in.t_beta, in.beta, 0, RUDNN_F32, 1, gdims));
        CHECK(rudnn_tensor_write(q, &in.t_beta, hb, cols * sizeof(float)));

        for (int di = 0; di < o.dtype_count; ++di) {
            rudnn_dtype_t dt = o.dtypes[di];
            size_t bytes = n * rudnn_dtype_size(dt);
            void *cx = bench_xmalloc("rudnn-bench", bytes);
            void *cr = hr ? bench_xmalloc("rudnn-bench", bytes) : NULL;
            rudnn_convert_from_f32(dt, hx, cx, n);
            if (hr)
                rudnn_convert_from_f32(dt, hr, cr, n);
            in.x = cx;
            in.r = cr;
            for (int op = 0; op < OP_COUNT; ++op)
                if (o.ops[op])
                    run_case(op, sh, dt, ctx, q, &dev, &o, &timer, &in, copy_gbps);
            free(cx);
            free(cr);
        }

        rudnn_buffer_destroy(in.gamma);
        rudnn_buffer_destroy(in.beta);
        free(hx);
        free(hr);
        free(hg);
        free(hb);
    }

    bench_events_destroy(&timer);
    rudnn_queue_destroy(q);
    rudnn_context_destroy(ctx);
    return 0;
}
