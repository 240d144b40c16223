/* libFuzzer target of MoE training (rudnn/moe_train.h): rudnn_moe_selected_router_weights and
 * rudnn_moe_selected_router_backward with arbitrary descriptors, dtypes, options (scoring, renormalize,
 * scale: finite or not) and index values (in range, repeated, negative, past E, past 2^32);
 * rudnn_moe_combine_backward and rudnn_moe_dispatch_backward on tokens the harness routes and dispatches,
 * with arbitrary descriptors, strategies and dispatched objects (NULL, another context, other shapes).
 *
 * Header bytes (fuzz_common.h has the slot format): 0 op (weights, backward, combine_backward,
 * dispatch_backward); 1 logits dtype; 2 T (0..6); 3 E (one of 1, 2, 3, 5, 8, 16, 64, 65); 4 top_k
 * (1 ..= min(E, 64)); 5 index dtype (U32, I32, I64); 6 flags: bit 0 sigmoid scoring, 1 renormalize, 2 write
 * the indices (else every index is the buffer's fill), 3 write the logits, 4 write grad_weights (backward),
 * 5 row r repeats its first index last, 6 row r gets a bad index, 7 values 16x wider (exp and sigmoid
 * underflow); 7 bits 0-3 which bad index value, bits 4-7 the row r; 8 seed of the written values and of the
 * selection; 9 scale (one of 1, 2.5, 0.5, 1e-3, 3e4); 14, 15 the buffers' fill (fz_begin). At most the
 * first 64 bytes of a written tensor are written (FZ_WRITE_BYTES), and two tensors (FZ_MAX_WRITES): the
 * rest holds the fill.
 * The rows ops read bytes 1 to 4, 8 and 9 for the routing the harness runs (logits and weights dtype, T, E,
 * top_k, seed, scale: softmax top-k, or with flag bit 0 sigmoid grouped in one group, bit 1 renormalized;
 * bit 3 writes all the logits, else every byte is the fill: ties, huge or NaN), 5 as the rows' dtype (F32,
 * F16, BF16), flag bit 2 writes expert_output / grad_rows, bit 4 grad_output; 10 H (one of 1, 2, 3, 5, 8,
 * 16, 33, 64, halved while an F32 [T*k, H] exceeds 8 KiB); 11 the strategy (serial, plane).
 *
 * Slots after the header, one each, in the order of the op's signature:
 *   weights:  0 queue, 1 logits, 2 indices, 3 options or NULL, 4 scoring (fz_int), 5 renormalize
 *             (fz_int), 6 scale (fz_float), 7 weights;
 *   backward: 0 queue, 1 logits, 2 indices, 3 grad_weights, 4 options or NULL, 5 scoring, 6 renormalize,
 *             7 scale, 8 grad_logits;
 *   combine_backward: 0 queue, 1 dispatched (valid, NULL, of the other context, hidden + 1, another dtype,
 *             tokens + 1, another top_k), 2 expert_output, 3 grad_output, 4 strategy (fz_int),
 *             5 grad_expert_output, 6 grad_weights;
 *   dispatch_backward: 0 queue, 1 dispatched, 2 grad_rows, 3 grad_input.
 *
 * Beyond fz_check's contract (rejected: a 1xx/2xx status naming the op, no byte written; accepted: only
 * the outputs written, the queues' work succeeds): an accepted call's outputs are disjoint from every input
 * and from each other (exactly on one is refused too), and their values follow moe_train.h, recomputed here
 * from what the buffers hold. Router: in double; a row with an index outside [0, E) is all NaN; a row of
 * finite values whose FP32 evaluation is well conditioned matches the formula, and with sigmoid scoring or
 * softmax renormalized the experts the row did not select have a gradient of exactly 0. Rows ops, through
 * the dispatched positions (a permutation of the rows) and the plan's weights: the products and the serial
 * and slot-order FP32 sums bit for bit (the kernels do not contract a*b+c), the plane sums within an FP32
 * error bound, NaN where a term is NaN. */
/* The FP32 reference must round each product, as the kernels do (common.cl). */
#pragma STDC FP_CONTRACT OFF

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/moe_train.h>

#include "fuzz_common.h"

enum { OP_WEIGHTS, OP_BACKWARD, OP_COMBINE_BACKWARD, OP_DISPATCH_BACKWARD, OP_COUNT };
/* The name each op's messages start with (ops/moe_train.c) */
static const char *const op_names[OP_COUNT] = {"moe_selected_router_weights", "moe_selected_router_backward",
                                               "moe_combine_backward", "moe_dispatch_backward"};

enum {
    F_SIGMOID = 1,
    F_RENORMALIZE = 2,
    F_WRITE_INDICES = 4,
    F_WRITE_LOGITS = 8,
    F_WRITE_GRAD = 16,
    F_REPEAT = 32,
    F_BAD_INDEX = 64,
    F_WIDE = 128,
    F_WRITE_ROWS = F_WRITE_INDICES, /* the rows ops: expert_output, grad_rows */
};

#define MAX_T 6
#define MAX_K RUDNN_MOE_TRAIN_MAX_TOP_K

/* The valid problem the header describes. */
typedef struct problem {
    rudnn_dtype_t ldt, idt;
    int64_t T, E, k;
    uint8_t flags, seed;
    rudnn_router_weight_options_t options;
} problem_t;

static problem_t decode_problem(const fz_call_t *c)
{
    static const int64_t experts[8] = {1, 2, 3, 5, 8, 16, 64, 65};
    static const rudnn_dtype_t index_dtypes[3] = {RUDNN_U32, RUDNN_I32, RUDNN_I64};
    static const float scales[5] = {1.0f, 2.5f, 0.5f, 1e-3f, 3e4f};
    problem_t p;
    memset(&p, 0, sizeof p);
    p.ldt = fz_float_dtype(fz_header_byte(c, 1));
    p.T = fz_small_dim(fz_header_byte(c, 2), MAX_T, 1);
    p.E = experts[fz_header_byte(c, 3) % 8];
    p.k = 1 + fz_header_byte(c, 4) % (p.E < MAX_K ? p.E : MAX_K);
    p.idt = index_dtypes[fz_header_byte(c, 5) % 3];
    p.flags = fz_header_byte(c, 6);
    p.seed = fz_header_byte(c, 8);
    p.options = (rudnn_router_weight_options_t){
        .scoring = p.flags & F_SIGMOID ? RUDNN_ROUTER_SIGMOID : RUDNN_ROUTER_SOFTMAX,
        .renormalize = (p.flags & F_RENORMALIZE) != 0,
        .scale = scales[fz_header_byte(c, 9) % 5]};
    return p;
}

static fz_spec_t spec2(rudnn_dtype_t dt, int64_t d0, int64_t d1)
{
    fz_spec_t s = {.dtype = dt, .rank = 2, .dims = {d0, d1}};
    return s;
}

/* ---- the written inputs -------------------------------------------------------------------- */

/* Index values a row may get in place of a valid one (stored in the index dtype: a U32 or I32 store
 * wraps, so that e.g. 2^32 becomes 0 there, a valid index the reference then reads as such). */
static int64_t bad_index(uint8_t pick, int64_t E)
{
    const int64_t table[10] = {E, -1, E + 1, INT32_MAX, INT32_MIN, (int64_t)1 << 32, ((int64_t)1 << 32) + 1,
                               UINT32_MAX, INT64_MIN, INT64_MAX};
    return table[pick % 10];
}

/* Writes the intended selection: row t picks (seed + 3t + j) mod E (distinct within the row), with row r's
 * repeat and bad index when the flags ask. Only the first FZ_WRITE_BYTES bytes fit. */
static void write_indices(fz_call_t *c, const problem_t *p, const rudnn_tensor_t *t)
{
    uint8_t raw[FZ_WRITE_BYTES];
    const size_t es = rudnn_dtype_size(p->idt), n = (size_t)(p->T * p->k) < sizeof raw / es
                                                         ? (size_t)(p->T * p->k) : sizeof raw / es;
    const uint8_t pick = fz_header_byte(c, 7);
    const int64_t r = p->T ? (pick >> 4) % p->T : 0;
    for (size_t i = 0; i < n; i++) {
        const int64_t row = (int64_t)i / p->k, j = (int64_t)i % p->k;
        int64_t v = (p->seed + 3 * row + j) % p->E;
        if (row == r && (p->flags & F_REPEAT) && j == p->k - 1 && p->k > 1)
            v = (p->seed + 3 * row) % p->E;
        if (row == r && (p->flags & F_BAD_INDEX) && j == (int64_t)(pick % p->k))
            v = bad_index(pick & 15, p->E);
        if (es == 8) {
            memcpy(raw + i * 8, &v, 8);
        } else {
            const uint32_t w = (uint32_t)(uint64_t)v;
            memcpy(raw + i * 4, &w, 4);
        }
    }
    if (n)
        fz_write_input(c, t, raw, n * es);
}

/* Writes values seeded by the header into the first FZ_WRITE_BYTES bytes of a float tensor. */
static void write_values(fz_call_t *c, uint8_t seed, const rudnn_tensor_t *t, rudnn_dtype_t dt, int64_t count,
                         float amplitude)
{
    float v[FZ_WRITE_BYTES / 2];
    uint8_t raw[FZ_WRITE_BYTES];
    const size_t es = rudnn_dtype_size(dt), cap = sizeof raw / es;
    const size_t n = (size_t)count < cap ? (size_t)count : cap;
    for (size_t i = 0; i < n; i++)
        v[i] = amplitude * (float)sin(0.7 * seed + 1.3 * (double)i);
    rudnn_convert_from_f32(dt, v, raw, n);
    if (n)
        fz_write_input(c, t, raw, n * es);
}

/* ---- the checks of an accepted call --------------------------------------------------------- */

/* moe_train.h asks every output disjoint from every input; fz_check lets one lie exactly on an input. */
static void check_disjoint(const char *op, const rudnn_tensor_t *out, const rudnn_tensor_t *const *in, int n)
{
    const size_t ob = out->offset, oe = out->offset + rudnn_tensor_bytes(out);
    for (int i = 0; i < n; i++) {
        const size_t ib = in[i]->offset, ie = in[i]->offset + rudnn_tensor_bytes(in[i]);
        if (in[i]->buffer == out->buffer && ob < oe && ib < ie && ob < ie && ib < oe) {
            fprintf(stderr, "fuzz: output bytes [%zu, %zu) overlap input %d's [%zu, %zu)\n", ob, oe, i, ib, ie);
            fz_fail("an accepted call's output is not disjoint from an input", op, RUDNN_STATUS_SUCCESS);
        }
    }
}

static void read_floats(rudnn_queue_t q, const rudnn_tensor_t *t, float *out)
{
    static uint8_t raw[FZ_BUFFER_BYTES];
    const size_t bytes = rudnn_tensor_bytes(t);
    fz_require("tensor_read", rudnn_tensor_read(q, t, raw, bytes));
    rudnn_convert_to_f32(t->dtype, raw, out, (size_t)rudnn_tensor_numel(t));
}

static void read_indices(rudnn_queue_t q, const rudnn_tensor_t *t, int64_t *out)
{
    static uint8_t raw[FZ_BUFFER_BYTES];
    const size_t n = (size_t)rudnn_tensor_numel(t);
    fz_require("tensor_read", rudnn_tensor_read(q, t, raw, rudnn_tensor_bytes(t)));
    for (size_t i = 0; i < n; i++) {
        if (t->dtype == RUDNN_I64) {
            memcpy(&out[i], raw + 8 * i, 8);
        } else {
            uint32_t w;
            memcpy(&w, raw + 4 * i, 4);
            out[i] = t->dtype == RUDNN_U32 ? (int64_t)w : (int64_t)(int32_t)w;
        }
    }
}

static void mismatch(const char *op, const char *what, int64_t t, int64_t e, double want, float got)
{
    fprintf(stderr, "fuzz: row %lld, element %lld: expected %.9g, got %.9g\n", (long long)t, (long long)e, want,
            (double)got);
    fz_fail(what, op, RUDNN_STATUS_SUCCESS);
}

/* The values of an accepted call (T >= 1), against the formula of moe_train.h in double. Rows that are not
 * finite, or whose FP32 evaluation may underflow or overflow (a renormalizing sum under 1e-30, gradients
 * near FLT_MAX), are left to the numeric suite, except for the NaN a bad index asks. */
static void check_values(rudnn_queue_t q, const char *op, int backward, const rudnn_tensor_t *logits,
                         const rudnn_tensor_t *indices, const rudnn_tensor_t *grad_weights,
                         const rudnn_router_weight_options_t *o, const rudnn_tensor_t *out)
{
    /* an accepted tensor lies in one harness buffer: FZ_BUFFER_BYTES / 2 elements at most */
    static float l[FZ_BUFFER_BYTES / 2], g[FZ_BUFFER_BYTES / 2], got[FZ_BUFFER_BYTES / 2];
    static int64_t idx[FZ_BUFFER_BYTES / 2];
    static double p[FZ_BUFFER_BYTES / 2], dp[FZ_BUFFER_BYTES / 2], c[FZ_BUFFER_BYTES / 2];
    const int64_t T = logits->dims[0], E = logits->dims[1], k = indices->dims[1];
    read_floats(q, logits, l);
    read_indices(q, indices, idx);
    if (backward)
        read_floats(q, grad_weights, g);
    read_floats(q, out, got);
    const int sigmoid = o->scoring == RUDNN_ROUTER_SIGMOID, renorm = o->renormalize != 0;
    const double scale = o->scale;
    /* rounding of the output dtype (grad_logits: the logits'), and its range */
    const double rel = !backward || out->dtype == RUDNN_F32 ? 1e-4 : out->dtype == RUDNN_F16 ? 2e-3 : 8e-3;
    /* F16's subnormal step; else FP32's, once for each of the k + 4 operations behind an element */
    const double floor_abs = backward && out->dtype == RUDNN_F16 ? 1e-7 : 1e-30 + fabs(scale) * (double)(k + 4) * 0x1p-149;
    const double range = backward && out->dtype == RUDNN_F16 ? 6e4 : 1e37;
    const int64_t width = backward ? E : k;
    for (int64_t t = 0; t < T; t++) {
        const float *lr = l + t * E, *gr = g + t * k, *outr = got + t * width;
        const int64_t *ir = idx + t * k;
        int bad = 0, finite = 1;
        for (int64_t j = 0; j < k; j++)
            bad |= ir[j] < 0 || ir[j] >= E;
        if (bad) {
            for (int64_t e = 0; e < width; e++)
                if (!isnan(outr[e]))
                    mismatch(op, "a row with an index outside [0, E) is not all NaN", t, e, NAN, outr[e]);
            continue;
        }
        double m = -INFINITY, sum = 0, gsum = 0;
        for (int64_t e = 0; e < E; e++) {
            finite &= isfinite(lr[e]) != 0;
            m = lr[e] > m ? lr[e] : m;
        }
        for (int64_t j = 0; backward && j < k; j++) {
            finite &= isfinite(gr[j]) != 0;
            gsum += fabs(gr[j]);
        }
        if (!finite)
            continue;
        for (int64_t e = 0; e < E; e++) {
            p[e] = sigmoid ? 1.0 / (1.0 + exp(-(double)lr[e])) : exp((double)lr[e] - m);
            sum += p[e];
        }
        for (int64_t e = 0; !sigmoid && e < E; e++)
            p[e] /= sum;
        double S = 0;
        for (int64_t j = 0; j < k; j++)
            S += p[ir[j]];
        const double div = renorm ? S : 1.0;
        if (renorm && S < 1e-30)
            continue;
        if (!backward) {
            for (int64_t j = 0; j < k; j++) {
                const double want = scale * p[ir[j]] / div;
                if (fabs(want) <= range && !(fabs(outr[j] - want) <= rel * fabs(want) + 1e-6 * scale + floor_abs))
                    mismatch(op, "a weight differs from the formula of moe_train.h", t, j, want, outr[j]);
            }
            continue;
        }
        /* dL/dp_e, then through the scoring; c_e counts e's occurrences (a repeated index adds its share) */
        const double bound = scale * gsum / div;
        if (!(bound <= 1e30))
            continue;
        double gw = 0;
        for (int64_t e = 0; e < E; e++)
            dp[e] = c[e] = 0;
        for (int64_t j = 0; j < k; j++) {
            dp[ir[j]] += scale * gr[j] / div;
            c[ir[j]] += 1;
            gw += gr[j] * p[ir[j]];
        }
        for (int64_t e = 0; renorm && e < E; e++)
            dp[e] -= scale * gw / (S * S) * c[e];
        double pdp = 0;
        for (int64_t e = 0; e < E; e++)
            pdp += p[e] * dp[e];
        const int zero_unselected = sigmoid || renorm;
        for (int64_t e = 0; e < E; e++) {
            /* 1 - p as 1 / (1 + exp(x)): no cancellation where p rounds to 1 */
            const double want = sigmoid ? dp[e] * p[e] / (1.0 + exp((double)lr[e])) : p[e] * (dp[e] - pdp);
            if (zero_unselected && c[e] == 0) {
                if (outr[e] != 0.0f)
                    mismatch(op, "a gradient the selection does not reach is not 0 (moe_train.h)", t, e, 0.0,
                             outr[e]);
                continue;
            }
            if (fabs(want) <= range &&
                !(fabs(outr[e] - want) <= rel * fabs(want) + 1e-5 * scale * gsum + floor_abs))
                mismatch(op, "a gradient differs from the formula of moe_train.h", t, e, want, outr[e]);
        }
    }
}

/* ---- the calls under test ------------------------------------------------------------------ */

static void run(fz_call_t *c, const problem_t *p, int op)
{
    const int backward = op == OP_BACKWARD;
    const char *name = op_names[op];
    const fz_spec_t ls = spec2(p->ldt, p->T, p->E), is = spec2(p->idt, p->T, p->k), gs = spec2(RUDNN_F32, p->T, p->k);
    const float amplitude = p->flags & F_WIDE ? 64.0f : 4.0f;
    rudnn_queue_t q = fz_queue(c);
    const rudnn_tensor_t *logits = fz_tensor(c, &ls, 0);
    const rudnn_tensor_t *indices = fz_tensor(c, &is, 0);
    const rudnn_tensor_t *grad_weights = backward ? fz_tensor(c, &gs, 0) : NULL;
    rudnn_router_weight_options_t options;
    const int has_options = fz_object_choice(c, 2) == 0;
    options.scoring = (rudnn_router_scoring_t)fz_int(c, (int)p->options.scoring);
    options.renormalize = fz_int(c, p->options.renormalize);
    options.scale = fz_float(c, p->options.scale);
    const fz_spec_t os = backward ? spec2(p->ldt, p->T, p->E) : gs;
    const rudnn_tensor_t *out = fz_tensor(c, &os, 1);
    /* the inputs' values: the selection first, then the values (two writes at most) */
    if (p->flags & F_WRITE_INDICES)
        write_indices(c, p, indices);
    if (p->flags & F_WRITE_LOGITS)
        write_values(c, p->seed, logits, p->ldt, p->T * p->E, amplitude);
    if (backward && (p->flags & F_WRITE_GRAD))
        write_values(c, p->seed, grad_weights, RUDNN_F32, p->T * p->k, amplitude);
    const rudnn_router_weight_options_t *opt = has_options ? &options : NULL;
    rudnn_status_t st = backward ? rudnn_moe_selected_router_backward(q, logits, indices, grad_weights, opt, out)
                                 : rudnn_moe_selected_router_weights(q, logits, indices, opt, out);
    if (fz_check(c, name, st))
        return;
    const rudnn_tensor_t *inputs[3] = {logits, indices, grad_weights};
    check_disjoint(name, out, inputs, backward ? 3 : 2);
    if (rudnn_tensor_numel(out) > 0)
        check_values(q, name, backward, logits, indices, grad_weights, &options, out);
}

/* ---- combine and dispatch backward ------------------------------------------------------------ */

/* The rows ops' problem: tokens routed (softmax top-k, or sigmoid grouped with one group) from logits the
 * harness writes, then dispatched; the arguments under test are built for these. */
typedef struct rows_problem {
    rudnn_dtype_t ldt, xdt; /* logits (the routing weights' dtype), rows */
    int64_t T, E, k, H;
    uint8_t flags, seed;
    float scale;
    int strategy;
} rows_problem_t;

static rows_problem_t decode_rows(const fz_call_t *c)
{
    static const int64_t hiddens[8] = {1, 2, 3, 5, 8, 16, 33, 64};
    const problem_t b = decode_problem(c);
    rows_problem_t p = {.ldt = b.ldt, .xdt = fz_float_dtype(fz_header_byte(c, 5)), .T = b.T, .E = b.E, .k = b.k,
                        .flags = b.flags, .seed = b.seed, .scale = b.options.scale,
                        .strategy = fz_header_byte(c, 11) % 2};
    p.H = hiddens[fz_header_byte(c, 10) % 8];
    /* an F32 [T*k, H] tensor keeps half a harness buffer free for its placement offset */
    while (p.H > 1 && p.T * p.k * p.H * 4 > FZ_BUFFER_BYTES / 2)
        p.H /= 2;
    return p;
}

/* The logits and input the harness routes and dispatches lie in buffers of its own, one a context: not
 * among the arguments' (fz_check reads those back), and written in full (fz_write_input stops at 64 bytes). */
#define OWN_INPUT_OFFSET (FZ_BUFFER_BYTES / 2)
static rudnn_buffer_t own_buffers[2];

static void own_destroy(void)
{
    for (int i = 0; i < 2; i++) {
        rudnn_buffer_destroy(own_buffers[i]);
        own_buffers[i] = NULL;
    }
}

/* Registered after fz_env's own atexit, so run before it: the buffers go before their contexts. */
static rudnn_buffer_t own_buffer(const fz_call_t *c, int foreign)
{
    if (!own_buffers[0]) {
        fz_require("buffer_create (harness)", rudnn_buffer_create(c->env->ctx, FZ_BUFFER_BYTES, &own_buffers[0]));
        fz_require("buffer_create (harness)", rudnn_buffer_create(c->env->ctx2, FZ_BUFFER_BYTES, &own_buffers[1]));
        atexit(own_destroy);
    }
    return own_buffers[foreign];
}

typedef struct routed {
    rudnn_routing_plan_t plan;
    rudnn_dispatched_t d;
    rudnn_queue_t q; /* of the context they were made on */
} routed_t;

/* Routes T tokens to k of p's experts and dispatches [T, H] rows of dtype xdt, on the main context or the
 * other one. The logits come from the seed (F_WRITE_LOGITS), else every byte is the fill: equal logits (ties,
 * to the lower experts), huge or NaN ones (NaN weights) route too. */
static routed_t make_routed(const fz_call_t *c, const rows_problem_t *p, int foreign, int64_t T, int64_t k,
                            int64_t H, rudnn_dtype_t xdt)
{
    static float v[FZ_BUFFER_BYTES / 8];
    static uint8_t raw[FZ_BUFFER_BYTES / 2];
    rudnn_queue_t q = foreign ? c->env->q2 : c->env->q;
    rudnn_buffer_t b = own_buffer(c, foreign);
    const size_t n = (size_t)(T * p->E), bytes = n * rudnn_dtype_size(p->ldt);
    const float amplitude = p->flags & F_WIDE ? 64.0f : 4.0f;
    if (p->flags & F_WRITE_LOGITS) {
        for (size_t i = 0; i < n; i++)
            v[i] = amplitude * (float)sin(0.3 * p->seed + 0.9 * (double)i);
        rudnn_convert_from_f32(p->ldt, v, raw, n);
    } else {
        memset(raw, c->fill[0], bytes);
    }
    if (bytes)
        fz_require("buffer_write (harness logits)", rudnn_buffer_write(q, b, 0, raw, bytes));
    const int64_t ld[2] = {T, p->E}, xd[2] = {T, H};
    rudnn_tensor_t logits, input;
    fz_require("tensor_init (harness)", rudnn_tensor_init(&logits, b, 0, p->ldt, 2, ld));
    fz_require("tensor_init (harness)", rudnn_tensor_init(&input, b, OWN_INPUT_OFFSET, xdt, 2, xd));
    routed_t r = {NULL, NULL, q};
    if (p->flags & F_SIGMOID) {
        const rudnn_grouped_routing_options_t go = {.top_k = (int)k, .groups = 1, .selected_groups = 1,
                                                    .renormalize = (p->flags & F_RENORMALIZE) != 0,
                                                    .scale = p->scale};
        fz_require("moe_route_sigmoid_grouped (harness)",
                   rudnn_moe_route_sigmoid_grouped(q, &logits, NULL, &go, &r.plan));
    } else {
        const rudnn_routing_options_t so = {.top_k = (int)k, .renormalize = (p->flags & F_RENORMALIZE) != 0};
        fz_require("moe_route (harness)", rudnn_moe_route(q, &logits, &so, &r.plan));
    }
    fz_require("moe_dispatch (harness)", rudnn_moe_dispatch(q, r.plan, &input, &r.d));
    return r;
}

/* The dispatched argument: valid, NULL, of the other context, or with other hidden, dtype, tokens or top_k. */
static routed_t dispatched_arg(fz_call_t *c, const rows_problem_t *p)
{
    const int64_t kmax = p->E < MAX_K ? p->E : MAX_K;
    switch (fz_object_choice(c, 7)) {
    case 1: return (routed_t){NULL, NULL, NULL};
    case 2: return make_routed(c, p, 1, p->T, p->k, p->H, p->xdt);
    case 3: return make_routed(c, p, 0, p->T, p->k, p->H + 1, p->xdt);
    case 4: return make_routed(c, p, 0, p->T, p->k, p->H, fz_float_dtype(p->xdt + 1));
    case 5: return make_routed(c, p, 0, p->T + 1, p->k, p->H, p->xdt);
    case 6:
        if (kmax > 1) /* one expert: no other top_k, two more tokens instead */
            return make_routed(c, p, 0, p->T, p->k < kmax ? p->k + 1 : p->k - 1, p->H, p->xdt);
        return make_routed(c, p, 0, p->T + 2, p->k, p->H, p->xdt);
    default: return make_routed(c, p, 0, p->T, p->k, p->H, p->xdt);
    }
}

/* The bytes of the positions and weights the rows ops read and of the dispatched tokens, in out (cap bytes):
 * inputs of the call, which no call may change (fz_check sees only the harness's buffers). */
static size_t routed_bytes(const routed_t *r, uint8_t *out, size_t cap)
{
    rudnn_tensor_t v[3];
    size_t n = 0;
    fz_require("dispatched_positions", rudnn_dispatched_positions(r->d, &v[0]));
    fz_require("routing_plan_weights", rudnn_routing_plan_weights(r->plan, &v[1]));
    fz_require("dispatched_tokens", rudnn_dispatched_tokens(r->d, &v[2]));
    for (int i = 0; i < 3; i++) {
        const size_t bytes = rudnn_tensor_bytes(&v[i]);
        if (bytes > cap - n)
            fz_fail("harness: the dispatched views exceed the snapshot", "dispatched_tokens", RUDNN_STATUS_INTERNAL);
        if (bytes)
            fz_require("tensor_read", rudnn_tensor_read(r->q, &v[i], out + n, bytes));
        n += bytes;
    }
    return n;
}

/* The dispatched positions [T*k] (checked to be a permutation of the rows: every row of a backward's
 * [T*k, H] output is then written exactly once) and the routing weights [T*k] as floats. */
static void read_routed(rudnn_queue_t q, const routed_t *r, int64_t rows, uint32_t *pos, float *w)
{
    static uint8_t seen[FZ_BUFFER_BYTES / 2];
    rudnn_tensor_t v;
    fz_require("dispatched_positions", rudnn_dispatched_positions(r->d, &v));
    if (v.dtype != RUDNN_U32 || rudnn_tensor_numel(&v) != rows)
        fz_fail("the dispatched positions are not U32 [T, top_k]", "dispatched_positions", RUDNN_STATUS_SUCCESS);
    fz_require("tensor_read", rudnn_tensor_read(q, &v, pos, (size_t)rows * 4));
    memset(seen, 0, (size_t)rows);
    for (int64_t i = 0; i < rows; i++) {
        if (pos[i] >= rows || seen[pos[i]]++)
            fz_fail("the dispatched positions are not a permutation of the rows", "moe_dispatch",
                    RUDNN_STATUS_SUCCESS);
    }
    fz_require("routing_plan_weights", rudnn_routing_plan_weights(r->plan, &v));
    read_floats(q, &v, w);
}

/* v rounded once to dtype, as the kernels store it. */
static float round_to(rudnn_dtype_t dt, float v)
{
    uint8_t raw[4];
    float out;
    rudnn_convert_from_f32(dt, &v, raw, 1);
    rudnn_convert_to_f32(dt, raw, &out, 1);
    return out;
}

/* Equal bits but for NaN's payload, or within flush_abs (a device that flushes FP32 denormals to zero). */
static int same(float want, float got, double flush_abs)
{
    return (isnan(want) && isnan(got)) || want == got || fabs((double)want - (double)got) <= flush_abs;
}

static void mismatch_at(const char *op, const char *what, int64_t i, int64_t h, double want, float got)
{
    fprintf(stderr, "fuzz: (token, slot) or row %lld, element %lld: expected %.9g, got %.9g\n", (long long)i,
            (long long)h, want, (double)got);
    fz_fail(what, op, RUDNN_STATUS_SUCCESS);
}

/* combine_backward's outputs (T >= 1), recomputed from the buffers and the dispatched views. FP_CONTRACT is
 * off in the kernels and here, so the products and the serial sums are reproduced bit for bit in FP32; the
 * plane sums (another order) are held to an FP32 error bound of the sum of the terms' magnitudes. */
static void check_combine_backward(rudnn_queue_t q, const char *op, const routed_t *r, int plane,
                                   const rudnn_tensor_t *expert_output, const rudnn_tensor_t *grad_output,
                                   const rudnn_tensor_t *grad_expert_output, const rudnn_tensor_t *grad_weights)
{
    static float e[FZ_BUFFER_BYTES / 2], g[FZ_BUFFER_BYTES / 2], ge[FZ_BUFFER_BYTES / 2], gw[FZ_BUFFER_BYTES / 2],
        w[FZ_BUFFER_BYTES / 2];
    static uint32_t pos[FZ_BUFFER_BYTES / 2];
    const int64_t T = grad_output->dims[0], H = grad_output->dims[1], k = grad_weights->dims[1];
    const rudnn_dtype_t dt = grad_output->dtype;
    read_routed(q, r, T * k, pos, w);
    read_floats(q, expert_output, e);
    read_floats(q, grad_output, g);
    read_floats(q, grad_expert_output, ge);
    read_floats(q, grad_weights, gw);
    for (int64_t t = 0; t < T; t++) {
        const float *gr = g + t * H;
        for (int64_t j = 0; j < k; j++) {
            const int64_t i = t * k + j;
            const float *er = e + (int64_t)pos[i] * H, *ger = ge + (int64_t)pos[i] * H;
            for (int64_t h = 0; h < H; h++) {
                const float want = round_to(dt, w[i] * gr[h]);
                if (!same(want, ger[h], FLT_MIN))
                    mismatch_at(op, "a grad_expert_output element is not weight * grad_output (moe_train.h)", i, h,
                                want, ger[h]);
            }
            float acc = 0.0f;
            double sum = 0, magnitude = 0;
            int nan = 0, finite = 1;
            for (int64_t h = 0; h < H; h++) {
                const float prod = gr[h] * er[h];
                acc = acc + prod;
                sum += (double)gr[h] * er[h];
                magnitude += fabs((double)gr[h] * er[h]);
                nan |= isnan(gr[h]) || isnan(er[h]);
                finite &= isfinite(gr[h]) && isfinite(er[h]);
            }
            const double flush = (double)(H + 1) * FLT_MIN;
            if (!plane) {
                if (!same(acc, gw[i], flush))
                    mismatch_at(op, "a serial grad_weights sum differs from h-ascending FP32 (moe_train.h)", t, j, acc,
                                gw[i]);
            } else if (nan) {
                if (!isnan(gw[i]))
                    mismatch_at(op, "a grad_weights sum over a NaN is not NaN", t, j, NAN, gw[i]);
            } else if (finite && magnitude <= 1e37) {
                const double bound = 2.0 * (double)(H + 8) * FLT_EPSILON / 2 * magnitude + flush;
                if (!(fabs(gw[i] - sum) <= bound))
                    mismatch_at(op, "a plane grad_weights sum differs from the FP32 sum (moe_train.h)", t, j, sum,
                                gw[i]);
            }
        }
    }
}

/* dispatch_backward's output (T >= 1): the slot-order FP32 sum, rounded once, reproduced bit for bit. */
static void check_dispatch_backward(rudnn_queue_t q, const char *op, const routed_t *r, const rudnn_tensor_t *grad_rows,
                                    const rudnn_tensor_t *grad_input)
{
    static float gr[FZ_BUFFER_BYTES / 2], gi[FZ_BUFFER_BYTES / 2], w[FZ_BUFFER_BYTES / 2];
    static uint32_t pos[FZ_BUFFER_BYTES / 2];
    const int64_t T = grad_input->dims[0], H = grad_input->dims[1], k = grad_rows->dims[0] / T;
    read_routed(q, r, T * k, pos, w);
    read_floats(q, grad_rows, gr);
    read_floats(q, grad_input, gi);
    for (int64_t t = 0; t < T; t++) {
        for (int64_t h = 0; h < H; h++) {
            float acc = gr[(int64_t)pos[t * k] * H + h];
            for (int64_t j = 1; j < k; j++)
                acc = acc + gr[(int64_t)pos[t * k + j] * H + h];
            const float want = round_to(grad_input->dtype, acc);
            if (!same(want, gi[t * H + h], (double)k * FLT_MIN))
                mismatch_at(op, "a grad_input element is not the slot-order sum of its rows (moe_train.h)", t, h,
                            want, gi[t * H + h]);
        }
    }
}

static void run_rows(fz_call_t *c, const rows_problem_t *p, int op)
{
    const char *name = op_names[op];
    const fz_spec_t rs = spec2(p->xdt, p->T * p->k, p->H), ts = spec2(p->xdt, p->T, p->H),
                    ws = spec2(RUDNN_F32, p->T, p->k);
    const float amplitude = p->flags & F_WIDE ? 64.0f : 4.0f;
    rudnn_queue_t q = fz_queue(c);
    const routed_t r = dispatched_arg(c, p);
    /* tokens [T*k, H] grow to 32 KiB at most in the objects of another shape (T 0: H is not halved) */
    static uint8_t before[48 << 10], after[48 << 10];
    const size_t held = r.d ? routed_bytes(&r, before, sizeof before) : 0;
    rudnn_status_t st;
    if (op == OP_COMBINE_BACKWARD) {
        const rudnn_tensor_t *expert_output = fz_tensor(c, &rs, 0);
        const rudnn_tensor_t *grad_output = fz_tensor(c, &ts, 0);
        const int strategy = fz_int(c, p->strategy);
        const rudnn_tensor_t *grad_expert_output = fz_tensor(c, &rs, 1);
        const rudnn_tensor_t *grad_weights = fz_tensor(c, &ws, 1);
        if (p->flags & F_WRITE_ROWS)
            write_values(c, p->seed, expert_output, p->xdt, p->T * p->k * p->H, amplitude);
        if (p->flags & F_WRITE_GRAD)
            write_values(c, p->seed + 1, grad_output, p->xdt, p->T * p->H, amplitude);
        st = rudnn_moe_combine_backward(q, r.d, expert_output, grad_output, (rudnn_combine_grad_strategy_t)strategy,
                                        grad_expert_output, grad_weights);
        if (!fz_check(c, name, st)) {
            const rudnn_tensor_t *inputs[3] = {expert_output, grad_output, grad_weights};
            check_disjoint(name, grad_expert_output, inputs, 3); /* grad_weights: an output, disjoint too */
            check_disjoint(name, grad_weights, inputs, 2);
            if (rudnn_tensor_numel(grad_output) > 0)
                check_combine_backward(q, name, &r, strategy == RUDNN_COMBINE_GRAD_PLANE, expert_output,
                                       grad_output, grad_expert_output, grad_weights);
        }
    } else {
        const rudnn_tensor_t *grad_rows = fz_tensor(c, &rs, 0);
        const rudnn_tensor_t *grad_input = fz_tensor(c, &ts, 1);
        if (p->flags & F_WRITE_ROWS)
            write_values(c, p->seed, grad_rows, p->xdt, p->T * p->k * p->H, amplitude);
        st = rudnn_moe_dispatch_backward(q, r.d, grad_rows, grad_input);
        if (!fz_check(c, name, st)) {
            const rudnn_tensor_t *inputs[1] = {grad_rows};
            check_disjoint(name, grad_input, inputs, 1);
            if (rudnn_tensor_numel(grad_input) > 0)
                check_dispatch_backward(q, name, &r, grad_rows, grad_input);
        }
    }
    if (r.d && (routed_bytes(&r, after, sizeof after) != held || memcmp(before, after, held) != 0))
        fz_fail("the call changed its dispatched tokens' positions, weights or tokens", name, st);
    rudnn_dispatched_destroy(r.d);
    rudnn_routing_plan_destroy(r.plan);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every op in every logits and index (rows ops: rows) dtype, both scorings (rows ops: both routings), then the
 * rows ops accepted on the other context, so that the programs of both contexts are built before the leak
 * checks. */
void fz_warmup(void)
{
    for (uint8_t op = 0; op < OP_COUNT; op++)
        for (uint8_t ldt = 0; ldt < 3; ldt++)
            for (uint8_t idt = 0; idt < 3; idt++)
                for (uint8_t flags = 0; flags < 4; flags++)
                    fz_run_header((const uint8_t[FZ_SLOT]){op, ldt, 2, 4, 1, idt, (uint8_t)(flags | F_WRITE_INDICES |
                                                                                           F_WRITE_LOGITS)});
    /* queue, dispatched and every tensor of the other context (two buffers: the outputs 256 bytes on) */
    uint8_t in[8 * FZ_SLOT] = {0};
    for (uint8_t op = OP_COMBINE_BACKWARD; op < OP_COUNT; op++) {
        const int tensors = op == OP_COMBINE_BACKWARD ? 4 : 2, strategy_slot = op == OP_COMBINE_BACKWARD ? 4 : -1;
        memset(in, 0, sizeof in);
        memcpy(in, (const uint8_t[]){op, 0, 2, 4, 1, 0, F_WRITE_LOGITS, 0, 0, 0, 4}, 11);
        in[FZ_SLOT] = in[2 * FZ_SLOT] = 0x80; /* queue and dispatched of the other context */
        in[FZ_SLOT + 1] = in[2 * FZ_SLOT + 1] = 1;
        for (int i = 0, slot = 3; i < tensors; i++, slot++) {
            if (slot - 1 == strategy_slot)
                slot++;
            uint8_t *t = in + slot * FZ_SLOT;
            t[0] = 0x80;
            t[1] = 2; /* fuzz_common.c's MUT_FOREIGN: foreign buffer t[2], at 256 * t[4] */
            t[2] = (uint8_t)(i % 2);
            t[4] = (uint8_t)(i / 2);
        }
        LLVMFuzzerTestOneInput(in, sizeof in);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_call_t c;
    fz_begin(&c, data, size);
    const int op = fz_header_byte(&c, 0) % OP_COUNT;
    if (op == OP_COMBINE_BACKWARD || op == OP_DISPATCH_BACKWARD) {
        const rows_problem_t p = decode_rows(&c);
        run_rows(&c, &p, op);
    } else {
        problem_t p = decode_problem(&c);
        run(&c, &p, op);
    }
    return 0;
}
