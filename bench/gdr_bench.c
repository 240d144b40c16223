/* rudnn-bench-gdr: times the gated delta rule (rudnn/gated_delta.h) in BF16 and prints one JSON line
 * per case, beside a device-to-device copy line ("op":"copy") measured first:
 *
 *   {"op","case","b","h","t","k","v","chunk","sequences","dtype","backend","device","kernel",
 *    "median_ms","min_ms","flops","flop_count","tflops","bytes","gbps","copy_gbps","copy_fraction",
 *    "reps"}
 * decode cases add "state_bytes","state_gbps","state_copy_fraction"; the varlen case adds
 * "fixed_kernel", "fixed_ms" (the same tokens as one sequence: B 1, the same T, timed in the same
 * run), "varlen_ratio" (its median / fixed_ms) and "plan_ms" (the same call through a varlen plan:
 * the schedule uploaded once, no copy a call).
 *
 * Cases (K = V = 128, query_scale 1/sqrt(128), chunk 64; inputs [B, H, T, K] contiguous):
 *   prefill_b1_h8_t32768, prefill_b8_h16_t4096   rudnn_chunk_gated_delta_rule, fixed length
 *   decode_b64_h16, _b128_h16, _b256_h16          rudnn_gated_delta_rule, T 1: a decode step
 *   varlen_n64_h8_t32768                          chunked, 64 sequences of the fixed mixed lengths
 *                                                 below (1 to 2668 tokens, 32768 in all), their
 *                                                 states rows of a pool of 128 (state_indices
 *                                                 37 i + 11 mod 128)
 * --quick runs small shapes of the same kinds (K = V = 32, chunk 16: a smoke run, e.g. on PoCL).
 * Inputs: q and k rows L2-normalized (as Qwen3-Next's l2norm of q and k), v uniform in [-1, 1], beta
 * in (0.05, 0.95), log_decay in [-0.1, -0.001], the initial state 0.0115 everywhere (a byte fill).
 * Decode alternates between two state buffers (step i reads one and writes the other, as a decode
 * loop does), so no step finds its state in L2 at B >= 64.
 *
 * FLOP count ("flop_count" in the JSON names it). tflops = flops / median time, with the
 * algorithmic count of each form: matrix products at 2 flops per multiply-add, triangular factors
 * counted as triangles (what the math needs, not the full tiles a tensor-core kernel may issue),
 * element-wise scalings and exponentials not counted. FLA and FlashQLA report TFLOP/s with counts of
 * their own (dense tiles), so compare times across libraries, not TFLOP/s.
 *   Chunked WY form (hal/gated_delta.h's formulas), per (sequence, head) and chunk of L <= C tokens:
 *     Lm  strictly lower part of Kc Kc^T: L(L-1)/2 dots of length K       L(L-1) K
 *     Pm  lower part with the diagonal of Qc Kc^T: L(L+1)/2 dots           L(L+1) K
 *     T = (I + Lm)^-1, unit lower: column j costs sum_{i>j} (i - j)
 *         multiply-adds, (L-1) L (L+1) / 6 in all                          (L^3 - L) / 3
 *     W = T (beta e^gamma Kc): L(L-1)/2 off-diagonal entries x K columns   L(L-1) K
 *     U = T (beta Vc)                                                      L(L-1) V
 *     Delta = U - W S0: [L, K] x [K, V]                                    2 L K V
 *     O = e^gamma Qc S0 + Pm Delta                                         2 L K V + L(L+1) V
 *     S1 = e^gamma_L S0 + Kc^T (e^(gamma_L - gamma) Delta)                 2 L K V
 *   in all K (3L^2 - L) + 2 V L^2 + (L^3 - L) / 3 + 6 L K V per chunk: for full chunks about
 *   3CK + 2CV + C^2/3 + 6KV per token (C 64, K = V = 128: 140.5 kflop per token and head).
 *   Recurrent form, per (token, head): S *= g (K V), S^T k (2 K V), delta (2 V), S += k delta^T
 *   (2 K V), S^T q (2 K V), q scaled (K): 7 K V + 2 V + K. The chunked count is the larger (the
 *   intra-chunk products): TFLOP/s of the two forms do not compare either.
 * Bytes (gbps, copy_fraction = gbps / copy_gbps): q, k, v, output, beta (BF16), log_decay (F32) once,
 * and the state rows the call reads and writes (F32, B H K V 4 each way). Decode's state_bytes =
 * 2 B H K V 4 (read + write) is what bounds a decode step: state_copy_fraction is its share of the
 * copy bandwidth.
 *
 *   rudnn-bench-gdr [--backend NAME] [--reps N] [--case NAME[,NAME]] [--quick]
 * WARMUP calls, then --reps calls each between two events; median and minimum. A case answering
 * NOT_SUPPORTED prints "status":"NOT_SUPPORTED" and the message; any other failure "status" and the
 * message too, and the exit status is 1 after the other cases ran. Diagnostics go to stderr. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "rudnn/rudnn.h"

#define PROG "rudnn-bench-gdr"
#define WARMUP 3
#define DEFAULT_REPS 20
#define MAX_REPS 1024
#define STATE_FILL 0x3c /* every state float 0x3c3c3c3c = 0.0115 */

#define CHECK(call)                                                                                              \
    do {                                                                                                         \
        rudnn_status_t check_st_ = (call);                                                                       \
        if (check_st_ != RUDNN_STATUS_SUCCESS)                                                                   \
            bench_die(PROG, #call, check_st_);                                                                   \
    } while (0)

typedef enum { KIND_CHUNKED, KIND_DECODE, KIND_VARLEN } gdr_kind_t;

/* The varlen case's sequence lengths: a fixed pseudo-random list (short, medium and long sequences,
 * two of 64 multiples), 32768 tokens; bench/baselines/torch_gdr.py has the same list. */
static const int64_t varlen_lengths[64] = {
    992, 1674, 190, 547, 15,  627, 2647, 274, 475,  44,  754, 63,  76,  72,   71,  49,  403, 503, 1947, 71, 48, 846,
    287, 443,  674, 135, 3,   222, 1,    63,  256,  62,  285, 2668, 754, 28, 22,  57, 346, 325, 18,  22,  359, 860,
    583, 726,  2140, 536, 872, 176, 742, 135, 1261, 11, 151, 11,  711, 402, 296, 112, 1299, 704, 837, 785,
};
/* --quick: 256 tokens, one sequence empty (its state row copied) */
static const int64_t quick_lengths[6] = {37, 100, 1, 0, 64, 54};

typedef struct gdr_case {
    const char *name;
    gdr_kind_t kind;
    int64_t b, h, t, k, v, chunk;
    const int64_t *lengths; /* varlen: sequences' lengths, summing to t */
    int64_t sequences;
    int64_t pool_rows; /* varlen: rows of both state pools */
} gdr_case_t;

static const gdr_case_t full_cases[] = {
    {"prefill_b1_h8_t32768", KIND_CHUNKED, 1, 8, 32768, 128, 128, 64, NULL, 0, 0},
    {"prefill_b8_h16_t4096", KIND_CHUNKED, 8, 16, 4096, 128, 128, 64, NULL, 0, 0},
    {"decode_b64_h16", KIND_DECODE, 64, 16, 1, 128, 128, 0, NULL, 0, 0},
    {"decode_b128_h16", KIND_DECODE, 128, 16, 1, 128, 128, 0, NULL, 0, 0},
    {"decode_b256_h16", KIND_DECODE, 256, 16, 1, 128, 128, 0, NULL, 0, 0},
    {"varlen_n64_h8_t32768", KIND_VARLEN, 1, 8, 32768, 128, 128, 64, varlen_lengths, 64, 128},
};
static const gdr_case_t quick_cases[] = {
    {"quick_prefill_b1_h2_t256", KIND_CHUNKED, 1, 2, 256, 32, 32, 16, NULL, 0, 0},
    {"quick_prefill_b2_h2_t128", KIND_CHUNKED, 2, 2, 128, 32, 32, 16, NULL, 0, 0},
    {"quick_decode_b4_h2", KIND_DECODE, 4, 2, 1, 32, 32, 0, NULL, 0, 0},
    {"quick_decode_b8_h2", KIND_DECODE, 8, 2, 1, 32, 32, 0, NULL, 0, 0},
    {"quick_varlen_n6_h2_t256", KIND_VARLEN, 1, 2, 256, 32, 32, 16, quick_lengths, 6, 12},
};

typedef struct run {
    rudnn_context_t ctx;
    rudnn_queue_t q;
    rudnn_device_info_t dev;
    int reps;
    bench_events_t ev;
    double copy_gbps;
    int failed;
} run_t;

/* ---- FLOP and byte counts (the header's derivation) ------------------------------------------- */

static double chunk_flops(double L, double K, double V)
{
    return K * (3 * L * L - L) + 2 * V * L * L + (L * L * L - L) / 3 + 6 * L * K * V;
}

/* The chunked WY form over one (sequence, head) of n tokens. */
static double wy_flops(int64_t n, int64_t C, int64_t K, int64_t V)
{
    const int64_t full = n / C, rest = n % C;
    return (double)full * chunk_flops((double)C, (double)K, (double)V) +
           (rest ? chunk_flops((double)rest, (double)K, (double)V) : 0.0);
}

static double recurrent_flops(int64_t tokens, int64_t K, int64_t V)
{
    return (double)tokens * (7.0 * (double)K * (double)V + 2.0 * (double)V + (double)K);
}

#define WY_COUNT "wy_chunk: K(3L^2-L) + 2VL^2 + (L^3-L)/3 + 6LKV per chunk of L tokens and head"
#define RECURRENT_COUNT "recurrent: 7KV + 2V + K per token and head"

/* ---- inputs ----------------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static double uniform01(void) /* in (0, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
}

typedef enum { FILL_L2_ROWS, FILL_UNIFORM, FILL_BETA, FILL_DECAY } fill_t;

/* rows x width values of kind into b (BF16, or F32 for the decay), written in blocks of rows. */
static void fill(run_t *r, rudnn_buffer_t b, int64_t rows, int64_t width, fill_t kind)
{
    const int f32 = kind == FILL_DECAY;
    const size_t es = f32 ? 4 : 2, row_bytes = (size_t)width * es;
    const int64_t block = (int64_t)(((size_t)8 << 20) / row_bytes) > 0 ? (int64_t)(((size_t)8 << 20) / row_bytes) : 1;
    unsigned char *h = bench_xmalloc(PROG, (size_t)block * row_bytes);
    float *row = bench_xmalloc(PROG, (size_t)width * sizeof *row);
    for (int64_t at = 0; at < rows; at += block) {
        const int64_t n = rows - at < block ? rows - at : block;
        for (int64_t i = 0; i < n; i++) {
            double norm = 0;
            for (int64_t j = 0; j < width; j++) {
                const double u = uniform01();
                row[j] = kind == FILL_BETA    ? (float)(0.05 + 0.9 * u)
                         : kind == FILL_DECAY ? (float)(-0.001 - 0.099 * u)
                                              : (float)(2 * u - 1);
                norm += (double)row[j] * row[j];
            }
            const float scale = kind == FILL_L2_ROWS && norm > 0 ? (float)(1.0 / sqrt(norm)) : 1.0f;
            for (int64_t j = 0; j < width; j++) {
                unsigned char *dst = h + (size_t)i * row_bytes + (size_t)j * es;
                if (f32) {
                    memcpy(dst, &row[j], 4);
                } else {
                    const uint16_t v = rudnn_f32_to_bf16(row[j] * scale);
                    memcpy(dst, &v, 2);
                }
            }
        }
        CHECK(rudnn_buffer_write(r->q, b, (size_t)at * row_bytes, h, (size_t)n * row_bytes));
    }
    free(row);
    free(h);
}

static rudnn_buffer_t buffer(run_t *r, size_t bytes)
{
    rudnn_buffer_t b;
    CHECK(rudnn_buffer_create(r->ctx, bytes ? bytes : 1, &b));
    return b;
}

static void tensor(rudnn_tensor_t *t, rudnn_buffer_t b, rudnn_dtype_t dt, int rank, int64_t d0, int64_t d1,
                   int64_t d2, int64_t d3)
{
    const int64_t dims[4] = {d0, d1, d2, d3};
    CHECK(rudnn_tensor_init(t, b, 0, dt, rank, dims));
}

/* One case's device data: inputs [B, H, T, *], output, and the state buffers (decode: two, used in
 * turn; varlen: the pools, and a fixed-length pair for the comparison). */
typedef struct gdr_data {
    rudnn_buffer_t q, k, v, beta, decay, out, state[2], fixed_in, fixed_out;
    rudnn_tensor_t tq, tk, tv, tbeta, tdecay, tout, tstate[2], tfixed_in, tfixed_out;
} gdr_data_t;

static void data_create(run_t *r, const gdr_case_t *c, gdr_data_t *d)
{
    memset(d, 0, sizeof *d);
    const int64_t rows = c->b * c->h * c->t;
    const size_t es = 2;
    d->q = buffer(r, (size_t)(rows * c->k) * es);
    d->k = buffer(r, (size_t)(rows * c->k) * es);
    d->v = buffer(r, (size_t)(rows * c->v) * es);
    d->beta = buffer(r, (size_t)rows * es);
    d->decay = buffer(r, (size_t)rows * 4);
    d->out = buffer(r, (size_t)(rows * c->v) * es);
    fill(r, d->q, rows, c->k, FILL_L2_ROWS);
    fill(r, d->k, rows, c->k, FILL_L2_ROWS);
    fill(r, d->v, rows, c->v, FILL_UNIFORM);
    fill(r, d->beta, 1, rows, FILL_BETA);
    fill(r, d->decay, 1, rows, FILL_DECAY);
    const rudnn_dtype_t bf = RUDNN_BF16;
    tensor(&d->tq, d->q, bf, 4, c->b, c->h, c->t, c->k);
    tensor(&d->tk, d->k, bf, 4, c->b, c->h, c->t, c->k);
    tensor(&d->tv, d->v, bf, 4, c->b, c->h, c->t, c->v);
    tensor(&d->tout, d->out, bf, 4, c->b, c->h, c->t, c->v);
    tensor(&d->tbeta, d->beta, bf, 3, c->b, c->h, c->t, 0);
    tensor(&d->tdecay, d->decay, RUDNN_F32, 3, c->b, c->h, c->t, 0);
    const int64_t state_rows = c->kind == KIND_VARLEN ? c->pool_rows : c->b;
    const size_t state_bytes = (size_t)(state_rows * c->h * c->k * c->v) * 4;
    for (int i = 0; i < 2; i++) {
        d->state[i] = buffer(r, state_bytes);
        CHECK(rudnn_buffer_fill(r->q, d->state[i], 0, STATE_FILL, state_bytes));
        tensor(&d->tstate[i], d->state[i], RUDNN_F32, 4, state_rows, c->h, c->k, c->v);
    }
    if (c->kind == KIND_VARLEN) {
        const size_t one = (size_t)(c->h * c->k * c->v) * 4;
        d->fixed_in = buffer(r, one);
        d->fixed_out = buffer(r, one);
        CHECK(rudnn_buffer_fill(r->q, d->fixed_in, 0, STATE_FILL, one));
        tensor(&d->tfixed_in, d->fixed_in, RUDNN_F32, 4, 1, c->h, c->k, c->v);
        tensor(&d->tfixed_out, d->fixed_out, RUDNN_F32, 4, 1, c->h, c->k, c->v);
    }
    CHECK(rudnn_queue_synchronize(r->q));
}

static void data_destroy(gdr_data_t *d)
{
    rudnn_buffer_t all[] = {d->q, d->k, d->v, d->beta, d->decay, d->out, d->state[0], d->state[1], d->fixed_in,
                            d->fixed_out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i])
            rudnn_buffer_destroy(all[i]);
}

/* ---- timing ----------------------------------------------------------------------------------- */

/* One call's arguments; the call alternates the states for decode. */
typedef struct gdr_call {
    const gdr_case_t *c;
    rudnn_gated_delta_input_t in;
    rudnn_gated_delta_output_t out;
    const rudnn_gated_delta_varlen_t *varlen;
    const rudnn_tensor_t *states[2]; /* decode: in turn */
    rudnn_buffer_t ws;
    size_t ws_bytes;
} gdr_call_t;

static rudnn_status_t call(run_t *r, gdr_call_t *k, int i)
{
    if (k->c->kind == KIND_DECODE) {
        k->in.initial_state = k->states[i % 2];
        k->out.final_state = k->states[(i + 1) % 2];
        return rudnn_gated_delta_rule(r->q, &k->in, k->varlen, k->ws, k->ws_bytes, &k->out);
    }
    return rudnn_chunk_gated_delta_rule(r->q, &k->in, k->varlen, k->c->chunk, k->ws, k->ws_bytes, &k->out);
}

/* Sizes and makes the workspace, warms up and times the call: 0 with the times, or the status
 * (the warm-up's or the query's; rudnn_last_error() says why). */
static rudnn_status_t time_call(run_t *r, gdr_call_t *k, double *median, double *minimum, char *kernel,
                                size_t kernel_cap)
{
    k->ws = NULL;
    k->ws_bytes = 0;
    rudnn_status_t st =
        k->c->kind == KIND_DECODE
            ? rudnn_gated_delta_rule_workspace_size(r->q, &k->in, k->varlen, &k->out, &k->ws_bytes)
            : rudnn_chunk_gated_delta_rule_workspace_size(r->q, &k->in, k->varlen, k->c->chunk, &k->out, &k->ws_bytes);
    if (!st && k->ws_bytes)
        st = rudnn_buffer_create(r->ctx, k->ws_bytes, &k->ws);
    for (int i = 0; i < WARMUP && !st; i++)
        st = call(r, k, i);
    if (!st)
        st = rudnn_queue_synchronize(r->q);
    if (!st) {
        for (int i = 0; i < r->reps; i++) {
            CHECK(rudnn_event_record(r->ev.start[i], r->q));
            CHECK(call(r, k, i));
            CHECK(rudnn_event_record(r->ev.end[i], r->q));
        }
        snprintf(kernel, kernel_cap, "%s", rudnn_last_kernel());
        bench_stats(&r->ev, r->reps, median, minimum);
    }
    if (k->ws)
        rudnn_buffer_destroy(k->ws);
    k->ws = NULL;
    return st;
}

static void head(const run_t *r, const gdr_case_t *c)
{
    static const char *const ops[] = {"gated_delta_chunk", "gated_delta_recurrent", "gated_delta_chunk_varlen"};
    printf("{\"op\":\"%s\",\"case\":\"%s\",\"b\":%lld,\"h\":%lld,\"t\":%lld,\"k\":%lld,\"v\":%lld,\"chunk\":%lld,"
           "\"sequences\":%lld,\"dtype\":\"bf16\",\"backend\":",
           ops[c->kind], c->name, (long long)c->b, (long long)c->h, (long long)c->t, (long long)c->k,
           (long long)c->v, (long long)c->chunk, (long long)(c->kind == KIND_VARLEN ? c->sequences : c->b));
    bench_json_string(r->dev.backend);
    printf(",\"device\":");
    bench_json_string(r->dev.name);
}

static void print_failure(run_t *r, const gdr_case_t *c, rudnn_status_t st)
{
    head(r, c);
    printf(",\"status\":\"%s\",\"message\":", rudnn_status_string(st));
    bench_json_string(rudnn_last_error());
    printf("}\n");
    fflush(stdout);
    if (st != RUDNN_STATUS_NOT_SUPPORTED)
        r->failed = 1;
}

static void run_case(run_t *r, const gdr_case_t *c)
{
    gdr_data_t d;
    data_create(r, c, &d);
    int32_t *indices = NULL;
    int64_t *cu = NULL;
    rudnn_gated_delta_varlen_t vl = {0};
    gdr_call_t k = {.c = c};
    k.in = (rudnn_gated_delta_input_t){.query = &d.tq, .key = &d.tk, .value = &d.tv, .beta = &d.tbeta,
                                       .log_decay = &d.tdecay, .initial_state = &d.tstate[0],
                                       .query_scale = (float)(1.0 / sqrt((double)c->k))};
    k.out = (rudnn_gated_delta_output_t){.output = &d.tout, .final_state = &d.tstate[1]};
    k.states[0] = &d.tstate[0], k.states[1] = &d.tstate[1];

    /* counts: tokens are every (b, t) of the tensors, states the rows the call reads and writes */
    const int64_t K = c->k, V = c->v, H = c->h;
    double flops = 0;
    int64_t state_rows = c->b;
    if (c->kind == KIND_VARLEN) {
        cu = bench_xmalloc(PROG, (size_t)(c->sequences + 1) * sizeof *cu);
        indices = bench_xmalloc(PROG, (size_t)c->sequences * sizeof *indices);
        cu[0] = 0;
        for (int64_t i = 0; i < c->sequences; i++) {
            cu[i + 1] = cu[i] + c->lengths[i];
            indices[i] = (int32_t)((37 * i + 11) % c->pool_rows); /* distinct: 37 is prime to the pool rows */
            flops += (double)H * wy_flops(c->lengths[i], c->chunk, K, V);
        }
        if (cu[c->sequences] != c->t) {
            fprintf(stderr, PROG ": case %s: lengths sum to %lld, not T = %lld\n", c->name,
                    (long long)cu[c->sequences], (long long)c->t);
            exit(1);
        }
        vl = (rudnn_gated_delta_varlen_t){.sequences = c->sequences, .cu_seqlens = cu, .state_indices = indices};
        k.varlen = &vl;
        state_rows = c->sequences;
    } else if (c->kind == KIND_CHUNKED) {
        flops = (double)(c->b * H) * wy_flops(c->t, c->chunk, K, V);
    } else {
        flops = (double)(c->b * H) * recurrent_flops(c->t, K, V);
    }
    const double tokens = (double)(c->b * H * c->t);
    const double state_bytes = 2.0 * (double)(state_rows * H * K * V) * 4.0;
    const double bytes = tokens * ((double)(2 * K + 2 * V + 1) * 2.0 + 4.0) + state_bytes;

    double median = 0, minimum = 0, fixed_median = 0, fixed_minimum = 0;
    char kernel[128] = "", fixed_kernel[128] = "";
    rudnn_status_t st = time_call(r, &k, &median, &minimum, kernel, sizeof kernel);
    if (!st && c->kind == KIND_VARLEN) {
        /* the same tokens as one sequence of T (batch row 0, its own states) */
        gdr_call_t fixed = k;
        fixed.varlen = NULL;
        fixed.in.initial_state = &d.tfixed_in;
        fixed.out.final_state = &d.tfixed_out;
        st = time_call(r, &fixed, &fixed_median, &fixed_minimum, fixed_kernel, sizeof fixed_kernel);
    }
    double plan_median = 0, plan_minimum = 0;
    rudnn_gated_delta_varlen_plan_t plan = NULL;
    if (!st && c->kind == KIND_VARLEN) {
        st = rudnn_gated_delta_varlen_plan_create(r->q, &vl, c->chunk, &plan);
        if (!st) {
            const rudnn_gated_delta_varlen_t planned_vl = {.plan = plan};
            gdr_call_t planned = k;
            planned.varlen = &planned_vl;
            char planned_kernel[128];
            st = time_call(r, &planned, &plan_median, &plan_minimum, planned_kernel, sizeof planned_kernel);
        }
    }
    if (st) {
        print_failure(r, c, st);
    } else {
        const double secs = median * 1e-3, gbps = bytes / secs / 1e9;
        head(r, c);
        printf(",\"kernel\":");
        bench_json_string(kernel);
        printf(",\"median_ms\":%.6f,\"min_ms\":%.6f,\"flops\":%.6g,\"flop_count\":\"%s\",\"tflops\":%.3f,"
               "\"bytes\":%.0f,\"gbps\":%.2f,\"copy_gbps\":%.2f,\"copy_fraction\":%.4f",
               median, minimum, flops, c->kind == KIND_DECODE ? RECURRENT_COUNT : WY_COUNT, flops / secs / 1e12,
               bytes, gbps, r->copy_gbps, gbps / r->copy_gbps);
        if (c->kind == KIND_DECODE) {
            const double sg = state_bytes / secs / 1e9;
            printf(",\"state_bytes\":%.0f,\"state_gbps\":%.2f,\"state_copy_fraction\":%.4f", state_bytes, sg,
                   sg / r->copy_gbps);
        }
        if (c->kind == KIND_VARLEN) {
            printf(",\"fixed_kernel\":");
            bench_json_string(fixed_kernel);
            printf(",\"fixed_ms\":%.6f,\"fixed_min_ms\":%.6f,\"varlen_ratio\":%.4f,\"plan_ms\":%.6f,"
                   "\"plan_min_ms\":%.6f", fixed_median, fixed_minimum, median / fixed_median, plan_median,
                   plan_minimum);
        }
        printf(",\"reps\":%d}\n", r->reps);
        fflush(stdout);
    }
    rudnn_gated_delta_varlen_plan_destroy(plan);
    free(cu);
    free(indices);
    data_destroy(&d);
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
    const gdr_case_t *list = quick ? quick_cases : full_cases;
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
