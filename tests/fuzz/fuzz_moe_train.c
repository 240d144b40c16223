/* libFuzzer target of MoE training (rudnn/moe_train.h): rudnn_moe_selected_router_weights and
 * rudnn_moe_selected_router_backward with arbitrary descriptors, dtypes, options (scoring, renormalize,
 * scale: finite or not) and index values (in range, repeated, negative, past E, past 2^32);
 * rudnn_moe_combine_backward and rudnn_moe_dispatch_backward on tokens the harness routes and dispatches,
 * with arbitrary descriptors, strategies and dispatched objects (NULL, another context, other shapes);
 * rudnn_swiglu_experts_forward_dispatched_training and rudnn_swiglu_experts_backward on such tokens with
 * SwiGLU experts the harness makes (NULL, another context, E + 1 experts, another dtype, H + 1), arbitrary
 * strategies, workspaces and tensors, then rudnn_swiglu_experts_training_workspace_size.
 *
 * Header bytes (fuzz_common.h has the slot format): 0 op (weights, backward, combine_backward,
 * dispatch_backward, experts_forward, experts_backward); 1 logits dtype; 2 T (0..6); 3 E (one of 1, 2, 3, 5,
 * 8, 16, 64, 65); 4 top_k (1 ..= min(E, 64)); 5 index dtype (U32, I32, I64); 6 flags: bit 0 sigmoid scoring,
 * 1 renormalize, 2 write the indices (else every index is the buffer's fill), 3 write the logits, 4 write
 * grad_weights (backward), 5 row r repeats its first index last, 6 row r gets a bad index, 7 values 16x wider
 * (exp and sigmoid underflow); 7 bits 0-3 which bad index value, bits 4-7 the row r; 8 seed of the written
 * values and of the selection; 9 scale (one of 1, 2.5, 0.5, 1e-3, 3e4); 14, 15 the buffers' fill (fz_begin).
 * At most the first 64 bytes of a written tensor are written (FZ_WRITE_BYTES), and two tensors
 * (FZ_MAX_WRITES): the rest holds the fill.
 * The rows ops read bytes 1 to 4, 8 and 9 for the routing the harness runs (logits and weights dtype, T, E,
 * top_k, seed, scale: softmax top-k, or with flag bit 0 sigmoid grouped in one group, bit 1 renormalized;
 * bit 3 writes all the logits, else every byte is the fill: ties, huge or NaN), 5 as the rows' dtype (F32,
 * F16, BF16), flag bit 2 writes expert_output / grad_rows, bit 4 grad_output; 10 H (one of 1, 2, 3, 5, 8,
 * 16, 33, 64, halved while an F32 [T*k, H] exceeds 8 KiB); 11 the strategy (serial, plane).
 * The experts ops read the routing as the rows ops, 5 as the dtype of the tokens and the weights; 10 H and
 * 12 I (1..24 each; H, then I, halved while the rows [T*k, H], the reserve [T*k, 2 I] or the weights
 * [E, I, H] exceed 8 KiB in F32); 11 the strategy (Scalar, Auto, TensorCore, 3, -1, INT_MIN); flag bit 2
 * writes the reserve (backward), bit 4 grad_expert_output, bit 5 poisons one token or weight (byte 13: bits
 * 0-2 the value: NaN, inf, -inf, 3e38, a denormal, 65504, 1e5, -0; bit 3 a weight, else a token; bits 4-7
 * where), bit 6 puts the weights in the middle of the first three harness buffers (fill values but for the
 * first 64 bytes of gate and down; outputs may overlap them), else in buffers of the harness's own, from the
 * seed (0.5, 8 with bit 7); the tokens always come from the seed (1, 16 with bit 7).
 *
 * Slots after the header, one each, in the order of the op's signature:
 *   weights:  0 queue, 1 logits, 2 indices, 3 options or NULL, 4 scoring (fz_int), 5 renormalize
 *             (fz_int), 6 scale (fz_float), 7 weights;
 *   backward: 0 queue, 1 logits, 2 indices, 3 grad_weights, 4 options or NULL, 5 scoring, 6 renormalize,
 *             7 scale, 8 grad_logits;
 *   combine_backward: 0 queue, 1 dispatched (valid, NULL, of the other context, hidden + 1, another dtype,
 *             tokens + 1, another top_k), 2 expert_output, 3 grad_output, 4 strategy (fz_int),
 *             5 grad_expert_output, 6 grad_weights;
 *   dispatch_backward: 0 queue, 1 dispatched, 2 grad_rows, 3 grad_input;
 *   experts_forward: 0 queue, 1 experts, 2 dispatched, 3 strategy (fz_int), 4 workspace (fz_workspace:
 *             NULL, or a buffer of either context of the needed size, one byte short, ...), 5 reserve,
 *             6 expert_output, then the size query: 7 rows (fz_i64), 8 bytes NULL;
 *   experts_backward: 0 queue, 1 experts, 2 dispatched, 3 reserve, 4 grad_expert_output, 5 strategy,
 *             6 workspace, 7 grad_rows, 8 grad_gate, 9 grad_up, 10 grad_down, 11 rows, 12 bytes NULL.
 * The experts' three weights are noted as inputs (fz_note_input) before the tensors: an ALIAS or OVERLAP
 * index counts them first.
 *
 * Beyond fz_check's contract (rejected: a 1xx/2xx status naming the op, no byte written; accepted: only
 * the outputs written, the queues' work succeeds): an accepted call's outputs are disjoint from every input
 * and from each other (exactly on one is refused too), and their values follow moe_train.h, recomputed here
 * from what the buffers hold. Router: in double; a row with an index outside [0, E) is all NaN; a row of
 * finite values whose FP32 evaluation is well conditioned matches the formula, and with sigmoid scoring or
 * softmax renormalized the experts the row did not select have a gradient of exactly 0. Rows ops, through
 * the dispatched positions (a permutation of the rows) and the plan's weights: the products and the serial
 * and slot-order FP32 sums bit for bit (the kernels do not contract a*b+c), the plane sums within an FP32
 * error bound, NaN where a term is NaN. Experts ops: the intended call (no slot mutated, the weights apart)
 * accepted with Scalar or Auto, NOT_SUPPORTED with TensorCore, BAD_PARAM with any other strategy; an accepted
 * call had matching objects and queue and tensors of the header's shapes; the outputs apart from the
 * workspace's first workspace_bytes; the reserve, expert_output, grad_rows and the weight gradients, in double
 * from the tokens (rudnn_dispatched_tokens, rows of expert e from rudnn_dispatched_offsets), the weights and
 * (backward) the reserve and grad_expert_output read back, within a bound on their FP32 evaluation (see
 * ev_t), elements over a NaN, an infinity or a magnitude past 1e37 (F16: 65504) left alone; the weight
 * gradients of an expert without rows exactly 0, always; the harness's weights and the dispatched tokens,
 * positions, weights and offsets unchanged by any call; the workspace size rows * inter * 8, its bad
 * arguments rejected with the answer unwritten. */
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

enum {
    OP_WEIGHTS,
    OP_BACKWARD,
    OP_COMBINE_BACKWARD,
    OP_DISPATCH_BACKWARD,
    OP_EXPERTS_FORWARD,
    OP_EXPERTS_BACKWARD,
    OP_COUNT
};
/* The name each op's messages start with (ops/moe_train.c) */
static const char *const op_names[OP_COUNT] = {"moe_selected_router_weights", "moe_selected_router_backward",
                                               "moe_combine_backward",        "moe_dispatch_backward",
                                               "swiglu_experts_forward_dispatched_training",
                                               "swiglu_experts_backward"};

enum {
    F_SIGMOID = 1,
    F_RENORMALIZE = 2,
    F_WRITE_INDICES = 4,
    F_WRITE_LOGITS = 8,
    F_WRITE_GRAD = 16,
    F_REPEAT = 32,
    F_BAD_INDEX = 64,
    F_WIDE = 128,
    F_WRITE_ROWS = F_WRITE_INDICES, /* the rows ops: expert_output, grad_rows; the experts' backward: reserve */
    F_POISON = F_REPEAT,            /* the experts ops: one token or weight gets an edge value (byte 13) */
    F_SHARED_WEIGHTS = F_BAD_INDEX, /* the experts ops: the weights lie in the arguments' buffers */
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

static fz_spec_t spec3(rudnn_dtype_t dt, int64_t d0, int64_t d1, int64_t d2)
{
    fz_spec_t s = {.dtype = dt, .rank = 3, .dims = {d0, d1, d2}};
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
    /* the experts ops (decode_experts): inter, and the edge value one token or weight gets */
    int64_t I;
    int poison_token, poison_weight;
    uint32_t poison_at;
    float poison_value;
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
    /* what they were made with */
    int foreign;
    int64_t T, k, H;
    rudnn_dtype_t dt;
} routed_t;

/* Routes T tokens to k of p's experts and dispatches [T, H] rows of dtype xdt, on the main context or the
 * other one. The logits come from the seed (F_WRITE_LOGITS), else every byte is the fill: equal logits (ties,
 * to the lower experts), huge or NaN ones (NaN weights) route too. The experts ops' input rows come from the
 * seed, 16x wider with F_WIDE, with the poisoned token (the rows ops' are what the buffer held). */
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
    /* the rows ops do not read the tokens: their values only for the experts ops (I >= 1) */
    const size_t nx = p->I ? (size_t)(T * H) : 0, xbytes = nx * rudnn_dtype_size(xdt);
    for (size_t i = 0; i < nx; i++)
        v[i] = (p->flags & F_WIDE ? 16.0f : 1.0f) * (float)sin(0.45 * p->seed + 1.1 * (double)i + 0.3);
    if (p->poison_token && nx)
        v[p->poison_at % nx] = p->poison_value;
    rudnn_convert_from_f32(xdt, v, raw, nx);
    if (xbytes)
        fz_require("buffer_write (harness input)", rudnn_buffer_write(q, b, OWN_INPUT_OFFSET, raw, xbytes));
    const int64_t ld[2] = {T, p->E}, xd[2] = {T, H};
    rudnn_tensor_t logits, input;
    fz_require("tensor_init (harness)", rudnn_tensor_init(&logits, b, 0, p->ldt, 2, ld));
    fz_require("tensor_init (harness)", rudnn_tensor_init(&input, b, OWN_INPUT_OFFSET, xdt, 2, xd));
    routed_t r = {NULL, NULL, q, foreign, T, k, H, xdt};
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
    case 1: return (routed_t){0};
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

/* The bytes of the positions and weights the rows ops read and of the dispatched tokens, with their experts'
 * offsets when offsets (the experts ops), in out (cap bytes): inputs of the call, which no call may change
 * (fz_check sees only the harness's buffers). */
static size_t routed_bytes(const routed_t *r, int offsets, uint8_t *out, size_t cap)
{
    rudnn_tensor_t v[4];
    size_t n = 0;
    fz_require("dispatched_positions", rudnn_dispatched_positions(r->d, &v[0]));
    fz_require("routing_plan_weights", rudnn_routing_plan_weights(r->plan, &v[1]));
    fz_require("dispatched_tokens", rudnn_dispatched_tokens(r->d, &v[2]));
    if (offsets)
        fz_require("dispatched_offsets", rudnn_dispatched_offsets(r->d, &v[3]));
    for (int i = 0; i < 3 + offsets; i++) {
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
    const size_t held = r.d ? routed_bytes(&r, 0, before, sizeof before) : 0;
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
    if (r.d && (routed_bytes(&r, 0, after, sizeof after) != held || memcmp(before, after, held) != 0))
        fz_fail("the call changed its dispatched tokens' positions, weights or tokens", name, st);
    rudnn_dispatched_destroy(r.d);
    rudnn_routing_plan_destroy(r.plan);
}

/* ---- SwiGLU experts: training forward and backward ----------------------------------------------- */

/* The experts ops' problem: the rows ops' routing and dispatch (bytes 1 to 6, 8, 9) with H from byte 10
 * and I from byte 12 (1..24 each), the intended strategy from byte 11 and the poisoned element from byte 13.
 * The reserve [T*k, 2 I], the rows [T*k, H] and the weights [E, I, H] (F32) stay within half a harness
 * buffer (its placement offsets): H, then I, halve until they do. */
static rows_problem_t decode_experts(const fz_call_t *c)
{
    static const int strategies[6] = {RUDNN_MOE_SCALAR, RUDNN_MOE_AUTO, RUDNN_MOE_TENSOR_CORE, 3, -1, INT32_MIN};
    static const float poisons[8] = {NAN, INFINITY, -INFINITY, 3e38f, 1e-40f, 65504.0f, 1e5f, -0.0f};
    rows_problem_t p = decode_rows(c);
    p.H = 1 + fz_header_byte(c, 10) % 24;
    p.I = 1 + fz_header_byte(c, 12) % 24;
    p.strategy = strategies[fz_header_byte(c, 11) % 6];
    const int64_t rows = p.T * p.k, half = FZ_BUFFER_BYTES / 2;
    while (p.H > 1 && rows * p.H * 4 > half)
        p.H /= 2;
    while (p.I > 1 && rows * p.I * 8 > half)
        p.I /= 2;
    while (p.E * p.I * p.H * 4 > half) {
        if (p.I >= p.H)
            p.I /= 2;
        else
            p.H /= 2;
    }
    const uint8_t poison = fz_header_byte(c, 13);
    if (p.flags & F_POISON) {
        p.poison_token = !(poison & 8);
        p.poison_weight = (poison & 8) != 0;
        p.poison_at = (uint32_t)(poison >> 4) * 37u + p.seed;
        p.poison_value = poisons[poison & 7];
    }
    return p;
}

/* The harness's own weight buffers, one a context (64 KiB: gate, up and down 16 KiB apart), for the experts
 * the calls read: written in full, outside fz_check's buffers, so checked against a snapshot. */
#define WEIGHT_REGION (16 << 10)
static rudnn_buffer_t weight_buffers[2];
static uint8_t weight_raw[3][WEIGHT_REGION]; /* what the harness wrote there (main context) */

static void weights_destroy(void)
{
    for (int i = 0; i < 2; i++) {
        rudnn_buffer_destroy(weight_buffers[i]);
        weight_buffers[i] = NULL;
    }
}

/* Registered after fz_env's own atexit, so run before it. */
static rudnn_buffer_t weight_buffer(const fz_call_t *c, int foreign)
{
    if (!weight_buffers[0]) {
        fz_require("buffer_create (harness)", rudnn_buffer_create(c->env->ctx, 4 * WEIGHT_REGION, &weight_buffers[0]));
        fz_require("buffer_create (harness)", rudnn_buffer_create(c->env->ctx2, 4 * WEIGHT_REGION, &weight_buffers[1]));
        atexit(weights_destroy);
    }
    return weight_buffers[foreign];
}

typedef struct experts_arg {
    rudnn_swiglu_experts_t x; /* NULL for the NULL argument */
    int foreign, shared;      /* on the other context; the weights in the arguments' buffers (fill values) */
    int64_t E, I, H;
    rudnn_dtype_t dt;
    rudnn_tensor_t w[3]; /* gate [E, I, H], up [E, I, H], down [E, H, I] */
    rudnn_queue_t q;     /* of their context */
} experts_arg_t;

/* Weights from the seed (amplitude 0.5, 8 with F_WIDE) and the poisoned weight; or, shared (F_SHARED_WEIGHTS, the
 * valid experts only), gate, up and down at the middle of the first three harness buffers, holding their fill
 * but for the first 64 bytes of gate and down (fz_write_input): an output may then overlap them. */
/* choice: 0 valid, 1 NULL, 2 of the other context, 3 E + 1 experts, 4 another dtype, 5 H + 1. */
static experts_arg_t make_experts(fz_call_t *c, const rows_problem_t *p, int choice)
{
    static float v[WEIGHT_REGION / 4];
    experts_arg_t a;
    memset(&a, 0, sizeof a);
    if (choice == 1)
        return a;
    a.foreign = choice == 2;
    a.shared = choice == 0 && (p->flags & F_SHARED_WEIGHTS);
    a.E = p->E + (choice == 3);
    a.I = p->I;
    a.H = p->H + (choice == 5);
    a.dt = choice == 4 ? fz_float_dtype(p->xdt + 1) : p->xdt;
    a.q = a.foreign ? c->env->q2 : c->env->q;
    const int64_t dims[3][3] = {{a.E, a.I, a.H}, {a.E, a.I, a.H}, {a.E, a.H, a.I}};
    const size_t n = (size_t)(a.E * a.I * a.H), bytes = n * rudnn_dtype_size(a.dt);
    const double amplitude = p->flags & F_WIDE ? 8.0 : 0.5;
    for (int m = 0; m < 3; m++) {
        rudnn_buffer_t b = a.shared ? c->env->buf[m] : weight_buffer(c, a.foreign);
        const size_t offset = a.shared ? FZ_BUFFER_BYTES / 2 : (size_t)m * WEIGHT_REGION;
        fz_require("tensor_init (harness weights)", rudnn_tensor_init(&a.w[m], b, offset, a.dt, 3, dims[m]));
        if (a.shared)
            continue;
        for (size_t i = 0; i < n; i++)
            v[i] = (float)(amplitude * sin((0.37 + 0.11 * m) * p->seed + (0.61 + 0.13 * m) * (double)i + m + 1.0));
        if (p->poison_weight && (int)(p->poison_at % 3) == m)
            v[p->poison_at / 3 % n] = p->poison_value;
        rudnn_convert_from_f32(a.dt, v, weight_raw[m], n);
        fz_require("buffer_write (harness weights)", rudnn_buffer_write(a.q, b, offset, weight_raw[m], bytes));
    }
    if (a.shared) {
        write_values(c, (uint8_t)(p->seed + 5), &a.w[0], a.dt, (int64_t)n, (float)amplitude);
        write_values(c, (uint8_t)(p->seed + 6), &a.w[2], a.dt, (int64_t)n, (float)amplitude);
    }
    if (!a.foreign) /* the call reads them: an output may alias them (fz_tensor), fz_check holds it to that */
        for (int m = 0; m < 3; m++)
            fz_note_input(c, &a.w[m]);
    fz_require("swiglu_experts_create (harness)",
               rudnn_swiglu_experts_create(a.foreign ? c->env->ctx2 : c->env->ctx, &a.w[0], &a.w[1], &a.w[2], &a.x));
    return a;
}

/* The harness's own weights are inputs of the call: still what it wrote, whatever the call returned. */
static void check_weights_kept(const char *op, const experts_arg_t *a, rudnn_status_t st)
{
    static uint8_t now[WEIGHT_REGION];
    if (!a->x || a->shared || a->foreign)
        return;
    for (int m = 0; m < 3; m++) {
        const size_t bytes = rudnn_tensor_bytes(&a->w[m]);
        fz_require("tensor_read", rudnn_tensor_read(a->q, &a->w[m], now, bytes));
        if (memcmp(now, weight_raw[m], bytes) != 0)
            fz_fail("the call changed the experts' weights", op, st);
    }
}

/* 1 when b is a buffer of the other context (the harness's). */
static int other_context_buffer(const fz_call_t *c, rudnn_buffer_t b)
{
    return b == c->env->foreign[0] || b == c->env->foreign[1] || b == own_buffers[1] || b == weight_buffers[1];
}

/* An accepted call's tensor has the shape, dtype and layout the header asks (ops/moe_train.c checks them), in
 * a buffer of the queue's context (foreign: the other one). */
static void expect_tensor(const fz_call_t *c, const char *op, const char *arg, const rudnn_tensor_t *t, int foreign,
                          rudnn_dtype_t dt, int rank, int64_t d0, int64_t d1, int64_t d2)
{
    const int64_t d[3] = {d0, d1, d2};
    int ok = t && t->buffer && other_context_buffer(c, t->buffer) == foreign && t->dtype == dt && t->rank == rank &&
             rudnn_tensor_is_contiguous(t);
    for (int i = 0; ok && i < rank; i++)
        ok = t->dims[i] == d[i];
    if (!ok) {
        fprintf(stderr, "fuzz: %s: expected %s, rank %d, dims %lld %lld %lld (as the rank has them), contiguous, "
                "on the queue's context\n", arg, rudnn_dtype_name(dt), rank, (long long)d0, (long long)d1,
                (long long)d2);
        fz_fail("an accepted call took a tensor of another dtype, shape or layout", op, RUDNN_STATUS_SUCCESS);
    }
}

/* moe_train.h: the outputs disjoint from the workspace's first workspace_bytes (fz_check: from the inputs). */
static void check_off_workspace(const fz_call_t *c, const char *op, const rudnn_tensor_t *const *outs, int n)
{
    for (int i = 0; i < n; i++) {
        if (c->workspace && outs[i]->buffer == c->workspace && rudnn_tensor_bytes(outs[i]) &&
            outs[i]->offset < c->workspace_bytes)
            fz_fail("an accepted call's output overlaps the workspace", op, RUDNN_STATUS_SUCCESS);
    }
}

/* -- the values, in double, with a bound on the FP32 evaluation's error --
 * A value the kernels compute is tracked as (v, e, m): v its exact value from the exact inputs, e a bound on
 * |FP32 result - v| (u = 2^-24 a rounding, FLT_MIN an underflow: flushed denormals), m the largest magnitude
 * on the way (NaN when an input is NaN): an element is checked when m <= EV_LIMIT (no overflow in FP32 and
 * finite inputs), else left alone. A product of FP32 values with errors ea, eb: |a'b' - ab| <= ea|b'| + |a|eb
 * plus its rounding u|a'b'| (and FLT_MIN |b'| where a' is a flushed denormal); a recursive sum of n terms, n u times the sum of their magnitudes; exp and the
 * division of silu and sigmoid within 16 ulp (OpenCL's exp: 3); silu is 1.1-Lipschitz. Rounding to BF16: 2^-8
 * of the magnitude, to F16: 2^-11 plus half its subnormal step (2^-25), and F16's range (65504). */
#define EV_U 0x1p-24
#define EV_TINY ((double)FLT_MIN)
#define EV_LIMIT 1e37

typedef struct ev {
    double v, e, m;
} ev_t;

/* the larger, or NaN when either is */
static double ev_max(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }

static ev_t ev_exact(double v)
{
    ev_t r = {v, 0.0, fabs(v)};
    return r;
}

static double ev_abs(ev_t a) { return fabs(a.v) + a.e; }

static ev_t ev_mul(ev_t a, ev_t b)
{
    const double aa = ev_abs(a), bb = ev_abs(b);
    ev_t r = {a.v * b.v, a.e * bb + fabs(a.v) * b.e + EV_U * aa * bb + EV_TINY * (1.0 + aa + bb), 0.0};
    r.m = ev_max(ev_max(a.m, b.m), aa * bb);
    return r;
}

/* 1 + a */
static ev_t ev_one_plus(ev_t a)
{
    ev_t r = {1.0 + a.v, a.e + EV_U * (1.0 + ev_abs(a)), 0.0};
    r.m = ev_max(a.m, 1.0 + ev_abs(a));
    return r;
}

/* silu(g) = g / (1 + exp(-g)) of a g within g.e. Below g = -88.7 exp(-g) overflows: FP32 silu is -0 where
 * |silu| < 1e-35. */
static ev_t ev_silu(ev_t g)
{
    const double v = g.v / (1.0 + exp(-g.v));
    ev_t r = {v, 1.1 * g.e, 0.0};
    r.e += 16 * EV_U * (fabs(v) + r.e) + 2 * EV_TINY + (g.v - g.e < -85.0 ? 1e-35 : 0.0);
    r.m = ev_max(g.m, fabs(v) + r.e);
    return r;
}

/* the kernels' stable sigmoid of an exact x (a subnormal or flushed exp(x) below -87) */
static ev_t ev_sigmoid(double x)
{
    const double v = 1.0 / (1.0 + exp(-x));
    ev_t r = {v, 16 * EV_U * v + 2 * EV_TINY, isnan(x) ? NAN : v};
    return r;
}

/* a stored in dtype dt (once, round to nearest) */
static ev_t ev_round(ev_t a, rudnn_dtype_t dt)
{
    if (dt == RUDNN_F32)
        return a;
    const double rel = dt == RUDNN_F16 ? 0x1p-11 : 0x1p-8, floor_abs = dt == RUDNN_F16 ? 0x1p-25 : EV_TINY;
    ev_t r = {a.v, a.e + rel * ev_abs(a) + floor_abs, a.m};
    if (dt == RUDNN_F16 && !(ev_abs(a) < 65504.0))
        r.m = INFINITY; /* may round to inf */
    return r;
}

typedef struct ev_sum {
    double v, e, mag, m;
    int n;
} ev_sum_t;

static void ev_add(ev_sum_t *s, ev_t t)
{
    s->v += t.v;
    s->e += t.e;
    s->mag += ev_abs(t);
    s->m = ev_max(s->m, t.m);
    s->n++;
}

static ev_t ev_total(const ev_sum_t *s)
{
    ev_t r = {s->v, s->e + s->n * (EV_U * s->mag + EV_TINY), ev_max(s->m, s->mag)};
    return r;
}

static void check_ev(const char *op, const char *what, int64_t i, int64_t j, ev_t want, float got)
{
    if (!(want.m <= EV_LIMIT) || fabs((double)got - want.v) <= want.e)
        return;
    fprintf(stderr, "fuzz: [%lld, %lld]: expected %.9g within %.3g, got %.9g\n", (long long)i, (long long)j,
            want.v, want.e, (double)got);
    fz_fail(what, op, RUDNN_STATUS_SUCCESS);
}

/* The dispatched tokens [R, H] as floats and their experts' offsets [E + 1] (checked: 0 .. R, ascending). */
static void read_dispatched(const routed_t *r, int64_t E, int64_t R, float *x, uint32_t *off)
{
    rudnn_tensor_t v;
    fz_require("dispatched_tokens", rudnn_dispatched_tokens(r->d, &v));
    read_floats(r->q, &v, x);
    fz_require("dispatched_offsets", rudnn_dispatched_offsets(r->d, &v));
    if (v.dtype != RUDNN_U32 || rudnn_tensor_numel(&v) != E + 1)
        fz_fail("the dispatched offsets are not U32 [E + 1]", "dispatched_offsets", RUDNN_STATUS_SUCCESS);
    fz_require("tensor_read", rudnn_tensor_read(r->q, &v, off, (size_t)(E + 1) * 4));
    for (int64_t e = 0; e < E; e++)
        if (off[e] > off[e + 1])
            fz_fail("the dispatched offsets descend", "dispatched_offsets", RUDNN_STATUS_SUCCESS);
    if (off[0] != 0 || off[E] != (uint64_t)R)
        fz_fail("the dispatched offsets do not run from 0 to the rows", "dispatched_offsets", RUDNN_STATUS_SUCCESS);
}

#define MAX_INTER 24
#define MAX_EXPERTS 66

/* forward_dispatched_training's reserve and expert_output (R >= 1), from the tokens and weights read back. */
static void check_experts_forward(rudnn_queue_t q, const char *op, const experts_arg_t *a, const routed_t *r,
                                  const rudnn_tensor_t *reserve, const rudnn_tensor_t *out)
{
    static float x[FZ_BUFFER_BYTES / 2], w[3][WEIGHT_REGION / 2], res[FZ_BUFFER_BYTES / 4], y[FZ_BUFFER_BYTES / 2];
    static uint32_t off[MAX_EXPERTS + 1];
    ev_t act[MAX_INTER];
    const int64_t E = a->E, I = a->I, H = a->H, R = r->T * r->k;
    read_dispatched(r, E, R, x, off);
    for (int m = 0; m < 3; m++)
        read_floats(a->q, &a->w[m], w[m]);
    read_floats(q, reserve, res);
    read_floats(q, out, y);
    for (int64_t e = 0; e < E; e++) {
        for (int64_t row = off[e]; row < off[e + 1]; row++) {
            const float *xr = x + row * H, *rr = res + row * 2 * I;
            for (int64_t i = 0; i < I; i++) {
                const float *gw = w[0] + (e * I + i) * H, *uw = w[1] + (e * I + i) * H;
                ev_sum_t sg = {0}, su = {0};
                for (int64_t h = 0; h < H; h++) {
                    ev_add(&sg, ev_mul(ev_exact(xr[h]), ev_exact(gw[h])));
                    ev_add(&su, ev_mul(ev_exact(xr[h]), ev_exact(uw[h])));
                }
                const ev_t g = ev_total(&sg), u = ev_total(&su);
                check_ev(op, "a reserve g is not the FP32 sum of x gate (moe_train.h)", row, i, g, rr[i]);
                check_ev(op, "a reserve u is not the FP32 sum of x up (moe_train.h)", row, I + i, u, rr[I + i]);
                act[i] = ev_round(ev_mul(ev_silu(g), u), a->dt);
            }
            for (int64_t h = 0; h < H; h++) {
                const float *dw = w[2] + (e * H + h) * I;
                ev_sum_t so = {0};
                for (int64_t i = 0; i < I; i++)
                    ev_add(&so, ev_mul(act[i], ev_exact(dw[i])));
                check_ev(op, "an expert_output element differs from the formula of moe_train.h", row, h,
                         ev_round(ev_total(&so), a->dt), y[row * H + h]);
            }
        }
    }
}

/* backward's outputs, from the tokens, weights, reserve and grad_expert_output read back; the weight gradients
 * of the experts without a row exactly 0. */
static void check_experts_backward(rudnn_queue_t q, const char *op, const experts_arg_t *a, const routed_t *r,
                                   const rudnn_tensor_t *reserve, const rudnn_tensor_t *grad_expert_output,
                                   const rudnn_tensor_t *grad_rows, const rudnn_tensor_t *const grads[3])
{
    static float x[FZ_BUFFER_BYTES / 2], w[3][WEIGHT_REGION / 2], res[FZ_BUFFER_BYTES / 4],
        dy[FZ_BUFFER_BYTES / 2], gr[FZ_BUFFER_BYTES / 2], gw[3][FZ_BUFFER_BYTES / 4];
    static uint32_t off[MAX_EXPERTS + 1];
    static ev_t dg[FZ_BUFFER_BYTES / 8], du[FZ_BUFFER_BYTES / 8], act[FZ_BUFFER_BYTES / 8];
    static const char *const zero_what[3] = {
        "a grad_gate element of an expert without rows is not 0 (moe_train.h)",
        "a grad_up element of an expert without rows is not 0 (moe_train.h)",
        "a grad_down element of an expert without rows is not 0 (moe_train.h)"};
    const int64_t E = a->E, I = a->I, H = a->H, R = r->T * r->k;
    read_dispatched(r, E, R, x, off);
    for (int m = 0; m < 3; m++) {
        read_floats(a->q, &a->w[m], w[m]);
        read_floats(q, grads[m], gw[m]);
    }
    if (R) {
        read_floats(q, reserve, res);
        read_floats(q, grad_expert_output, dy);
        read_floats(q, grad_rows, gr);
    }
    for (int64_t e = 0; e < E; e++) {
        if (off[e] == off[e + 1]) {
            for (int m = 0; m < 3; m++)
                for (int64_t j = 0; j < I * H; j++)
                    if (gw[m][e * I * H + j] != 0.0f)
                        mismatch_at(op, zero_what[m], e, j, 0.0, gw[m][e * I * H + j]);
            continue;
        }
        for (int64_t row = off[e]; row < off[e + 1]; row++) {
            const float *rr = res + row * 2 * I, *dyr = dy + row * H;
            for (int64_t i = 0; i < I; i++) {
                ev_sum_t sa = {0};
                for (int64_t h = 0; h < H; h++)
                    ev_add(&sa, ev_mul(ev_exact(dyr[h]), ev_exact(w[2][(e * H + h) * I + i])));
                const ev_t da = ev_total(&sa);
                const double g = rr[i], u = rr[I + i];
                /* dg = (da u) (s (1 + g sigmoid(-g))), du = da silu(g), as the kernels group them */
                const ev_t ds = ev_mul(ev_sigmoid(g), ev_one_plus(ev_mul(ev_exact(g), ev_sigmoid(-g))));
                const ev_t silu = ev_silu(ev_exact(g));
                dg[row * I + i] = ev_mul(ev_mul(da, ev_exact(u)), ds);
                du[row * I + i] = ev_mul(da, silu);
                act[row * I + i] = ev_round(ev_mul(silu, ev_exact(u)), a->dt);
            }
            for (int64_t h = 0; h < H; h++) {
                ev_sum_t s = {0};
                for (int64_t i = 0; i < I; i++) {
                    ev_add(&s, ev_mul(dg[row * I + i], ev_exact(w[0][(e * I + i) * H + h])));
                    ev_add(&s, ev_mul(du[row * I + i], ev_exact(w[1][(e * I + i) * H + h])));
                }
                check_ev(op, "a grad_rows element differs from the formula of moe_train.h", row, h,
                         ev_round(ev_total(&s), a->dt), gr[row * H + h]);
            }
        }
        for (int64_t i = 0; i < I; i++) {
            for (int64_t h = 0; h < H; h++) {
                ev_sum_t sg = {0}, su = {0}, sd = {0};
                for (int64_t row = off[e]; row < off[e + 1]; row++) {
                    const ev_t xv = ev_exact(x[row * H + h]);
                    ev_add(&sg, ev_mul(dg[row * I + i], xv));
                    ev_add(&su, ev_mul(du[row * I + i], xv));
                    ev_add(&sd, ev_mul(ev_exact(dy[row * H + h]), act[row * I + i]));
                }
                check_ev(op, "a grad_gate element differs from the formula of moe_train.h", e, i * H + h,
                         ev_total(&sg), gw[0][(e * I + i) * H + h]);
                check_ev(op, "a grad_up element differs from the formula of moe_train.h", e, i * H + h,
                         ev_total(&su), gw[1][(e * I + i) * H + h]);
                check_ev(op, "a grad_down element differs from the formula of moe_train.h", e, h * I + i,
                         ev_total(&sd), gw[2][(e * H + h) * I + i]);
            }
        }
    }
}

/* 1 when no argument slot up to byte end is mutated: the intended call. */
static int all_intended(const fz_call_t *c, size_t end)
{
    for (size_t at = FZ_SLOT; at < end && at < c->size; at += FZ_SLOT)
        if (c->data[at] >= 0x80)
            return 0;
    return 1;
}

/* training_workspace_size with the experts argument, rows (fz_i64, R intended) and bytes (NULL or not), held
 * to the header: rows * inter * 8, or a status of 1xx with its message where experts or bytes is NULL, rows
 * is negative or the product overflows size_t; bytes untouched then. */
static void run_size_query(fz_call_t *c, const experts_arg_t *a, int64_t R)
{
    const char *op = "swiglu_experts_training_workspace_size";
    const int64_t rows = fz_i64(c, R);
    const int null_out = fz_object_choice(c, 2);
    size_t bytes = 0x5eed;
    const rudnn_status_t st = rudnn_swiglu_experts_training_workspace_size(a->x, rows, null_out ? NULL : &bytes);
    const int bad = !a->x || null_out || rows < 0 ||
                    (unsigned __int128)(uint64_t)rows * (uint64_t)a->I * 8u > (unsigned __int128)SIZE_MAX;
    const char *msg = rudnn_last_error();
    if (!bad) {
        if (st != RUDNN_STATUS_SUCCESS || msg[0])
            fz_fail("a valid workspace size query was rejected or left a message", op, st);
        if (bytes != (size_t)rows * (size_t)a->I * 8u) {
            fprintf(stderr, "fuzz: rows %lld, inter %lld: %zu bytes\n", (long long)rows, (long long)a->I, bytes);
            fz_fail("the training workspace size is not rows * inter * 8 (moe_train.h)", op, st);
        }
        return;
    }
    if (st == RUDNN_STATUS_SUCCESS)
        fz_fail("a workspace size query with a NULL argument, negative rows or an overflow was accepted", op, st);
    if (!(st >= 100 && st < 200) || strncmp(msg, op, strlen(op)) != 0 || msg[strlen(op)] != ':') {
        fprintf(stderr, "fuzz: message: \"%s\"\n", msg);
        fz_fail("a rejected workspace size query has a status outside 1xx or a message not naming it", op, st);
    }
    if (bytes != 0x5eed)
        fz_fail("a rejected workspace size query wrote its answer", op, st);
}

/* fz_workspace, with a workspace of the other context counted as an output too (fz_workspace counts the main
 * context's alone): a call on the other context's queue may take it, and writes its first bytes. */
static rudnn_buffer_t workspace_arg(fz_call_t *c, size_t need, size_t *bytes)
{
    rudnn_buffer_t ws = fz_workspace(c, need, bytes);
    if (ws && ws != c->workspace) {
        c->workspace = ws;
        c->workspace_bytes = *bytes;
    }
    return ws;
}

static void run_experts(fz_call_t *c, const rows_problem_t *p, int op)
{
    const char *name = op_names[op];
    const int backward = op == OP_EXPERTS_BACKWARD;
    const int64_t R = p->T * p->k;
    const float amplitude = p->flags & F_WIDE ? 64.0f : 4.0f;
    rudnn_queue_t q = fz_queue(c);
    const experts_arg_t a = make_experts(c, p, fz_object_choice(c, 6));
    const routed_t r = dispatched_arg(c, p);
    static uint8_t before[48 << 10], after[48 << 10];
    const size_t held = r.d ? routed_bytes(&r, 1, before, sizeof before) : 0;
    size_t need = 0;
    if (a.x) {
        fz_require("swiglu_experts_training_workspace_size (harness)",
                   rudnn_swiglu_experts_training_workspace_size(a.x, R, &need));
        if (need != (size_t)R * (size_t)a.I * 8u)
            fz_fail("the training workspace size is not rows * inter * 8 (moe_train.h)",
                    "swiglu_experts_training_workspace_size", RUDNN_STATUS_SUCCESS);
    }
    const fz_spec_t res_s = spec2(RUDNN_F32, R, 2 * p->I), rows_s = spec2(p->xdt, R, p->H),
                    gate_s = spec3(RUDNN_F32, p->E, p->I, p->H), down_s = spec3(RUDNN_F32, p->E, p->H, p->I);
    const rudnn_tensor_t *reserve, *grad_expert_output = NULL, *out = NULL, *grad_rows = NULL, *grads[3] = {NULL};
    int strategy;
    size_t ws_bytes;
    rudnn_buffer_t ws;
    if (!backward) {
        strategy = fz_int(c, p->strategy);
        ws = workspace_arg(c, need, &ws_bytes);
        reserve = fz_tensor(c, &res_s, 1);
        out = fz_tensor(c, &rows_s, 1);
    } else {
        reserve = fz_tensor(c, &res_s, 0);
        grad_expert_output = fz_tensor(c, &rows_s, 0);
        strategy = fz_int(c, p->strategy);
        ws = workspace_arg(c, need, &ws_bytes);
        grad_rows = fz_tensor(c, &rows_s, 1);
        grads[0] = fz_tensor(c, &gate_s, 1);
        grads[1] = fz_tensor(c, &gate_s, 1);
        grads[2] = fz_tensor(c, &down_s, 1);
        if (p->flags & F_WRITE_ROWS)
            write_values(c, (uint8_t)(p->seed + 3), reserve, RUDNN_F32, R * 2 * p->I, amplitude);
        if (p->flags & F_WRITE_GRAD)
            write_values(c, (uint8_t)(p->seed + 4), grad_expert_output, p->xdt, R * p->H, amplitude);
    }
    const size_t end = c->pos; /* the op's slots; the size query's follow */
    const rudnn_status_t st =
        backward ? rudnn_swiglu_experts_backward(q, a.x, r.d, reserve, grad_expert_output,
                                                 (rudnn_moe_strategy_t)strategy, ws, ws_bytes, grad_rows, grads[0],
                                                 grads[1], grads[2])
                 : rudnn_swiglu_experts_forward_dispatched_training(q, a.x, r.d, (rudnn_moe_strategy_t)strategy, ws,
                                                                    ws_bytes, reserve, out);
    fz_check(c, name, st);
    /* the intended call (the weights apart from every argument): accepted with Scalar or Auto, TensorCore
     * NOT_SUPPORTED, any other strategy BAD_PARAM */
    if (!a.shared && all_intended(c, end)) {
        const rudnn_status_t want = strategy == RUDNN_MOE_SCALAR || strategy == RUDNN_MOE_AUTO ? RUDNN_STATUS_SUCCESS
                                    : strategy == RUDNN_MOE_TENSOR_CORE ? RUDNN_STATUS_NOT_SUPPORTED
                                                                        : RUDNN_STATUS_BAD_PARAM;
        if (st != want) {
            fprintf(stderr, "fuzz: strategy %d: expected %s, message: %s\n", strategy, rudnn_status_string(want),
                    rudnn_last_error());
            fz_fail("the intended call returned another status than its strategy asks (moe_train.h)", name, st);
        }
    }
    if (st == RUDNN_STATUS_SUCCESS) {
        if (strategy != RUDNN_MOE_SCALAR && strategy != RUDNN_MOE_AUTO)
            fz_fail("an accepted call had a strategy other than Scalar or Auto (moe_train.h)", name, st);
        if (!a.x || !r.d || !q || a.foreign != r.foreign || (q == c->env->q2) != a.foreign || a.E != p->E ||
            a.H != r.H || a.dt != r.dt)
            fz_fail("an accepted call's experts, dispatched tokens and queue disagree (context, E, H or dtype)",
                    name, st);
        const int64_t rows = r.T * r.k;
        if (ws && (ws_bytes < (size_t)rows * (size_t)a.I * 8u || ws_bytes > FZ_BUFFER_BYTES)) {
            fprintf(stderr, "fuzz: workspace_bytes %zu, rows %lld, inter %lld\n", ws_bytes, (long long)rows,
                    (long long)a.I);
            fz_fail("an accepted call took a workspace smaller than rows * inter * 8 or past its buffer", name, st);
        }
        expect_tensor(c, name, "reserve", reserve, a.foreign, RUDNN_F32, 2, rows, 2 * a.I, 0);
        const rudnn_tensor_t *const w[3] = {&a.w[0], &a.w[1], &a.w[2]};
        if (!backward) {
            expect_tensor(c, name, "expert_output", out, a.foreign, a.dt, 2, rows, a.H, 0);
            const rudnn_tensor_t *in[4] = {out, w[0], w[1], w[2]}, *outs[2] = {reserve, out};
            check_disjoint(name, reserve, in, 4);
            check_disjoint(name, out, in + 1, 3);
            check_off_workspace(c, name, outs, 2);
            if (rows > 0)
                check_experts_forward(q, name, &a, &r, reserve, out);
        } else {
            expect_tensor(c, name, "grad_expert_output", grad_expert_output, a.foreign, a.dt, 2, rows, a.H, 0);
            expect_tensor(c, name, "grad_rows", grad_rows, a.foreign, a.dt, 2, rows, a.H, 0);
            expect_tensor(c, name, "grad_gate", grads[0], a.foreign, RUDNN_F32, 3, a.E, a.I, a.H);
            expect_tensor(c, name, "grad_up", grads[1], a.foreign, RUDNN_F32, 3, a.E, a.I, a.H);
            expect_tensor(c, name, "grad_down", grads[2], a.foreign, RUDNN_F32, 3, a.E, a.H, a.I);
            /* each output against the inputs and the outputs after it */
            const rudnn_tensor_t *all[8] = {grads[0], grads[1], grads[2], reserve, grad_expert_output, w[0], w[1],
                                            w[2]};
            const rudnn_tensor_t *outs[4] = {grad_rows, grads[0], grads[1], grads[2]};
            for (int o = 0; o < 4; o++)
                check_disjoint(name, outs[o], all + o, 8 - o);
            check_off_workspace(c, name, outs, 4);
            check_experts_backward(q, name, &a, &r, reserve, grad_expert_output, grad_rows, grads);
        }
    }
    check_weights_kept(name, &a, st);
    if (r.d && (routed_bytes(&r, 1, after, sizeof after) != held || memcmp(before, after, held) != 0))
        fz_fail("the call changed its dispatched tokens' positions, weights, tokens or offsets", name, st);
    run_size_query(c, &a, R);
    rudnn_swiglu_experts_destroy(a.x);
    rudnn_dispatched_destroy(r.d);
    rudnn_routing_plan_destroy(r.plan);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every op in every logits and index (rows ops: rows) dtype, both scorings (rows ops: both routings), the
 * experts ops in every dtype, then the rows and experts ops accepted on the other context, so that the programs
 * of both contexts are built before the leak checks. */
void fz_warmup(void)
{
    for (uint8_t op = 0; op < OP_EXPERTS_FORWARD; op++)
        for (uint8_t ldt = 0; ldt < 3; ldt++)
            for (uint8_t idt = 0; idt < 3; idt++)
                for (uint8_t flags = 0; flags < 4; flags++)
                    fz_run_header((const uint8_t[FZ_SLOT]){op, ldt, 2, 4, 1, idt, (uint8_t)(flags | F_WRITE_INDICES |
                                                                                           F_WRITE_LOGITS)});
    /* 3 tokens, top-2 of 8 experts, H 4, I 4, Scalar */
    for (uint8_t op = OP_EXPERTS_FORWARD; op < OP_COUNT; op++)
        for (uint8_t xdt = 0; xdt < 3; xdt++)
            fz_run_header((const uint8_t[FZ_SLOT]){op, 0, 2, 4, 1, xdt, F_WRITE_LOGITS, 0, 0, 0, 3, 0, 3});
    /* queue, dispatched (experts) and every tensor of the other context (two buffers: the tensors at 256-byte
     * steps that keep them apart) */
    uint8_t in[16 * FZ_SLOT] = {0};
    for (uint8_t op = OP_COMBINE_BACKWARD; op < OP_COUNT; op++) {
        static const int8_t tensor_slots[OP_COUNT][7] = {
            [OP_COMBINE_BACKWARD] = {3, 4, 6, 7, -1},
            [OP_DISPATCH_BACKWARD] = {3, 4, -1},
            [OP_EXPERTS_FORWARD] = {6, 7, -1},
            [OP_EXPERTS_BACKWARD] = {4, 5, 8, 9, 10, 11, -1}};
        /* (buffer, 256-byte step) of each: reserve 192 bytes, rows 96, weight gradients 512 */
        static const uint8_t places[OP_COUNT][6][2] = {
            [OP_COMBINE_BACKWARD] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}},
            [OP_DISPATCH_BACKWARD] = {{0, 0}, {1, 0}},
            [OP_EXPERTS_FORWARD] = {{0, 0}, {1, 0}},
            [OP_EXPERTS_BACKWARD] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}, {0, 2}, {1, 4}}};
        const int experts = op >= OP_EXPERTS_FORWARD;
        memset(in, 0, sizeof in);
        memcpy(in, (const uint8_t[]){op, 0, 2, 4, 1, 0, F_WRITE_LOGITS, 0, 0, 0, (uint8_t)(experts ? 3 : 4), 0, 3},
               13);
        for (int s = 1; s <= 2 + experts; s++) { /* queue, (experts,) dispatched of the other context */
            in[s * FZ_SLOT] = 0x80;
            in[s * FZ_SLOT + 1] = 1;
        }
        for (int i = 0; tensor_slots[op][i] >= 0; i++) {
            uint8_t *t = in + tensor_slots[op][i] * FZ_SLOT;
            t[0] = 0x80;
            t[1] = 2; /* fuzz_common.c's MUT_FOREIGN: foreign buffer t[2], at 256 * t[4] */
            t[2] = places[op][i][0];
            t[4] = places[op][i][1];
        }
        LLVMFuzzerTestOneInput(in, sizeof in);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_call_t c;
    fz_begin(&c, data, size);
    const int op = fz_header_byte(&c, 0) % OP_COUNT;
    if (op == OP_EXPERTS_FORWARD || op == OP_EXPERTS_BACKWARD) {
        const rows_problem_t p = decode_experts(&c);
        run_experts(&c, &p, op);
    } else if (op == OP_COMBINE_BACKWARD || op == OP_DISPATCH_BACKWARD) {
        const rows_problem_t p = decode_rows(&c);
        run_rows(&c, &p, op);
    } else {
        problem_t p = decode_problem(&c);
        run(&c, &p, op);
    }
    return 0;
}
