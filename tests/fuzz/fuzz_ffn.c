/* libFuzzer target of the FFN family (rudnn/ffn.h): rudnn_ffn and rudnn_ffn_workspace_size with
 * arbitrary descriptors, scenarios, optional tensors, expert_tokens values, options and workspaces.
 *
 * Header bytes (fuzz_common.h has the slot format): 0 op (ffn, ffn_workspace_size); 1 scenario
 * (% 10: plain f32, f16, bf16; W8A8 with f32, i64, bf16 deq scales; weight-only f16 and bf16 x with
 * i8 weights, then with i4 weights); 2 x's first dim (0..6); 3 x's rank (2 + b % 3) and its middle
 * dims (bits 2-3: 1..3, bit 4: 1..2); 4 K1 (0..8); 5 K2 (0..8; i4 makes K1 and N1 even); 6 the
 * activation (% 7); 7 flags: bit 0 expert form, 1 bias1, 2 bias2, 3 expert_tokens as running
 * totals, 4 scale per channel, 5 deq_scale1 per channel, 6 deq_scale2 per channel, 7
 * HIGH_PERFORMANCE; 8 bits 0-1 E - 1, bit 2 deterministic; 9 weight-only: bit 0 antiquant_offset1,
 * bit 1 antiquant_offset2, bits 2-3 and 4-5 per-group choice of scale1 / scale2 (0: per channel,
 * else the nth divisor of K); 10 expert_tokens' split (2 bits an expert: its share of M); 11 bit
 * 0: the counts cover every row of x (else the rows past their sum are left alone). 14, 15 the
 * buffers' fill (fz_begin).
 *
 * Slots after the header, one each:
 *   0 queue; 1 x, 2 weight1, 3 weight2, 4 expert_tokens, 5 bias1, 6 bias2, 7 scale, 8 y, 9 offset,
 *   10 deq_scale1, 11 deq_scale2, 12 antiquant_scale1, 13 antiquant_offset1, 14 antiquant_scale2,
 *   15 antiquant_offset2 (y is the eighth tensor so that it has a buffer of its own: fuzz_common.c
 *   puts tensor n in buffer n mod 8); 16..19 expert_tokens' values, one an expert (fz_i64: the
 *   intended value, an edge value or the raw field), written where expert_tokens points;
 *   20 expert_tokens_totals, 21 activation, 22 precision, 23 deterministic (fz_int); 24 args (the
 *   struct or NULL); 25 ffn: the workspace (fz_workspace; intended NULL, the pool), or
 *   ffn_workspace_size: bytes (the pointer or NULL).
 * An optional tensor whose header bit (or scenario) leaves it out is NULL unless its slot mutates
 * it: then it is present, of the shape it would have, mutated (a no-op mutation, e.g. stride 1 of
 * a vector, makes it present and valid).
 *
 * Besides fz_check's contract (rejected: a 1xx/2xx status naming the op, nothing written;
 * accepted: only y and the workspace written, the queues' work succeeds): a rejected
 * ffn_workspace_size leaves *bytes alone, and an accepted expert-form rudnn_ffn writes no row of
 * y past the expert_tokens' rows (ffn.h: "the rows past it neither read nor written"). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <rudnn/ffn.h>

#include "fuzz_common.h"

enum { OP_FFN, OP_WORKSPACE_SIZE, OP_COUNT };

#define MAX_E 4 /* experts of the intended problem; each takes a value slot */

static const struct scenario {
    rudnn_dtype_t x, w, deq; /* deq: quantized only */
} scenarios[] = {
    {RUDNN_F32, RUDNN_F32, RUDNN_F32}, {RUDNN_F16, RUDNN_F16, RUDNN_F32}, {RUDNN_BF16, RUDNN_BF16, RUDNN_F32},
    {RUDNN_I8, RUDNN_I8, RUDNN_F32},   {RUDNN_I8, RUDNN_I8, RUDNN_I64},   {RUDNN_I8, RUDNN_I8, RUDNN_BF16},
    {RUDNN_F16, RUDNN_I8, RUDNN_F32},  {RUDNN_BF16, RUDNN_I8, RUDNN_F32}, {RUDNN_F16, RUDNN_I4, RUDNN_F32},
    {RUDNN_BF16, RUDNN_I4, RUDNN_F32},
};
#define SCENARIOS ((int)(sizeof scenarios / sizeof scenarios[0]))

/* The valid problem the header describes. */
typedef struct problem {
    rudnn_dtype_t xd, wd, deq, yd, bd;
    int quant, wo, experts, gated;
    int64_t E, K1, K2, N1, N2, M, g1, g2;
    int x_rank;
    int64_t x_dims[4];
    uint8_t flags, wo_flags;
    rudnn_ffn_activation_t act;
    int64_t tokens[MAX_E]; /* counts, or running totals with flags bit 3 */
} problem_t;

/* The pick-th divisor (1-based, cycling) of k; any g works for k = 0. */
static int64_t group_count(int64_t k, int pick)
{
    if (!pick)
        return 0; /* per channel */
    if (k == 0)
        return pick;
    int64_t div[8];
    int n = 0;
    for (int64_t g = 1; g <= k && n < 8; g++)
        if (k % g == 0)
            div[n++] = g;
    return div[(pick - 1) % n];
}

static problem_t decode_problem(const fz_call_t *c)
{
    problem_t p;
    memset(&p, 0, sizeof p);
    const struct scenario *s = &scenarios[fz_header_byte(c, 1) % SCENARIOS];
    p.xd = s->x, p.wd = s->w;
    p.quant = p.xd == RUDNN_I8;
    p.wo = !p.quant && p.wd != p.xd;
    p.deq = p.quant ? s->deq : RUDNN_F32;
    p.yd = p.quant ? (p.deq == RUDNN_BF16 ? RUDNN_BF16 : RUDNN_F16) : p.xd;
    p.bd = p.quant ? RUDNN_I32 : p.xd == RUDNN_F16 ? RUDNN_F16 : RUDNN_F32;
    p.flags = fz_header_byte(c, 7);
    p.wo_flags = fz_header_byte(c, 9);
    p.experts = p.flags & 1;
    p.E = 1 + (fz_header_byte(c, 8) & 3);
    p.act = (rudnn_ffn_activation_t)(fz_header_byte(c, 6) % 7);
    p.gated = p.act >= RUDNN_FFN_GEGLU;
    const int i4 = p.wd == RUDNN_I4;
    p.K1 = fz_small_dim(fz_header_byte(c, 4), 8, 1);
    p.K2 = fz_small_dim(fz_header_byte(c, 5), 8, 1);
    if (i4 && p.K1 % 2) /* N2 = K1 even */
        p.K1++;
    if (i4 && !p.gated && p.K2 % 2) /* N1 = K2 even */
        p.K2++;
    p.N1 = p.gated ? 2 * p.K2 : p.K2;
    p.N2 = p.K1;
    const uint8_t r = fz_header_byte(c, 3);
    p.x_rank = 2 + r % 3;
    const int64_t lead[3] = {fz_small_dim(fz_header_byte(c, 2), 6, 1), 1 + (r >> 2) % 3, 1 + (r >> 4) % 2};
    p.M = 1;
    for (int i = 0; i + 1 < p.x_rank; i++) {
        p.x_dims[i] = lead[i];
        p.M *= lead[i];
    }
    p.x_dims[p.x_rank - 1] = p.K1;
    if (p.wo && i4) {
        p.g1 = group_count(p.K1, (p.wo_flags >> 2) & 3);
        p.g2 = group_count(p.K2, (p.wo_flags >> 4) & 3);
    }
    /* expert_tokens: each expert a share (0..3) of M; the last takes the rest when byte 11 says so */
    const uint8_t split = fz_header_byte(c, 10);
    int64_t w[MAX_E], total_w = 0, left = p.M, at = 0;
    for (int e = 0; e < p.E; e++)
        total_w += w[e] = (split >> (2 * e)) & 3;
    for (int e = 0; e < p.E; e++) {
        int64_t n = total_w ? p.M * w[e] / total_w : 0;
        if (n > left)
            n = left;
        if (e == p.E - 1 && (fz_header_byte(c, 11) & 1))
            n = left;
        left -= n;
        at += n;
        p.tokens[e] = (p.flags & 8) ? at : n;
    }
    return p;
}

/* [lead E,] then n0 (and n1 when n_count is 2). */
static fz_spec_t spec_e(rudnn_dtype_t dt, const problem_t *p, int n_count, int64_t n0, int64_t n1)
{
    fz_spec_t s;
    memset(&s, 0, sizeof s);
    s.dtype = dt;
    if (p->experts)
        s.dims[s.rank++] = p->E;
    s.dims[s.rank++] = n0;
    if (n_count > 1)
        s.dims[s.rank++] = n1;
    return s;
}

/* Per tensor: [1], or [E] in the expert form. */
static fz_spec_t spec_per_tensor(rudnn_dtype_t dt, const problem_t *p)
{
    fz_spec_t s = {.dtype = dt, .rank = 1, .dims = {p->experts ? p->E : 1}};
    return s;
}

/* A quantization vector: per channel over n ([n] / [E, n]) or per tensor. */
static fz_spec_t spec_quant(rudnn_dtype_t dt, const problem_t *p, int per_channel, int64_t n)
{
    return per_channel ? spec_e(dt, p, 1, n, 0) : spec_per_tensor(dt, p);
}

/* An antiquant scale or offset: per channel [n] / [E, n], or per group [g, n] / [E, g, n]. */
static fz_spec_t spec_antiquant(const problem_t *p, int64_t groups, int64_t n)
{
    return groups ? spec_e(p->xd, p, 2, groups, n) : spec_e(p->xd, p, 1, n, 0);
}

typedef struct call {
    rudnn_ffn_args_t a;
    const rudnn_tensor_t *y;
    rudnn_queue_t q;
} call_t;

static void build_call(fz_call_t *c, const problem_t *p, call_t *out)
{
    memset(out, 0, sizeof *out);
    rudnn_ffn_args_t *a = &out->a;
    const uint8_t f = p->flags, wf = p->wo_flags;
    fz_spec_t x = {.dtype = p->xd, .rank = p->x_rank};
    memcpy(x.dims, p->x_dims, sizeof p->x_dims);
    fz_spec_t y = x;
    y.dtype = p->yd;
    y.dims[y.rank - 1] = p->N2;
    const fz_spec_t w1 = spec_e(p->wd, p, 2, p->K1, p->N1), w2 = spec_e(p->wd, p, 2, p->K2, p->N2);
    const fz_spec_t tok = {.dtype = RUDNN_I64, .rank = 1, .dims = {p->E}};
    const fz_spec_t b1 = spec_e(p->bd, p, 1, p->N1, 0), b2 = spec_e(p->bd, p, 1, p->N2, 0);
    const fz_spec_t sc = spec_quant(RUDNN_F32, p, (f >> 4) & 1, p->K2), of = spec_per_tensor(RUDNN_F32, p);
    const fz_spec_t d1 = spec_quant(p->deq, p, (f >> 5) & 1, p->N1), d2 = spec_quant(p->deq, p, (f >> 6) & 1, p->N2);
    const fz_spec_t as1 = spec_antiquant(p, p->g1, p->N1), as2 = spec_antiquant(p, p->g2, p->N2);

    out->q = fz_queue(c);
    a->x = fz_tensor(c, &x, 0);
    a->weight1 = fz_tensor(c, &w1, 0);
    a->weight2 = fz_tensor(c, &w2, 0);
    a->expert_tokens = fz_optional_tensor(c, &tok, !p->experts);
    a->bias1 = fz_optional_tensor(c, &b1, !(f & 2));
    a->bias2 = fz_optional_tensor(c, &b2, !(f & 4));
    a->scale = fz_optional_tensor(c, &sc, !p->quant);
    out->y = fz_tensor(c, &y, 1);
    a->offset = fz_optional_tensor(c, &of, !p->quant);
    a->deq_scale1 = fz_optional_tensor(c, &d1, !p->quant);
    a->deq_scale2 = fz_optional_tensor(c, &d2, !p->quant);
    a->antiquant_scale1 = fz_optional_tensor(c, &as1, !p->wo);
    a->antiquant_offset1 = fz_optional_tensor(c, &as1, !(p->wo && (wf & 1)));
    a->antiquant_scale2 = fz_optional_tensor(c, &as2, !p->wo);
    a->antiquant_offset2 = fz_optional_tensor(c, &as2, !(p->wo && (wf & 2)));

    /* expert_tokens' values where it points (four slots whatever E is: fixed slot numbers) */
    int64_t v[MAX_E];
    for (int e = 0; e < MAX_E; e++)
        v[e] = fz_i64(c, e < p->E ? p->tokens[e] : 0);
    if (a->expert_tokens)
        fz_write_input(c, a->expert_tokens, v, (size_t)p->E * sizeof v[0]);

    a->expert_tokens_totals = fz_int(c, (f >> 3) & 1);
    a->activation = (rudnn_ffn_activation_t)fz_int(c, (int)p->act);
    a->precision = (rudnn_ffn_precision_t)fz_int(c, (f >> 7) & 1);
    a->deterministic = fz_int(c, (fz_header_byte(c, 8) >> 2) & 1);
}

/* After an accepted expert-form call: y's rows past the expert_tokens' rows are as they were. */
static void check_rows_left_alone(fz_call_t *c, const call_t *k)
{
    const rudnn_tensor_t *tok = k->a.expert_tokens, *y = k->y;
    const int64_t experts = tok->dims[0];
    if (experts <= 0 || (size_t)experts > FZ_BUFFER_BYTES / sizeof(int64_t))
        return;
    static int64_t v[FZ_BUFFER_BYTES / sizeof(int64_t)];
    fz_require("tensor_read (expert_tokens)", rudnn_tensor_read(k->q, tok, v, (size_t)experts * sizeof v[0]));
    int64_t rows = 0;
    for (int64_t e = 0; e < experts; e++)
        rows = k->a.expert_tokens_totals ? v[e] : rows + v[e];
    int64_t m = 1;
    for (int i = 0; i + 1 < y->rank; i++)
        m *= y->dims[i];
    const size_t row_bytes = rudnn_dtype_storage_bytes(y->dtype, (size_t)y->dims[y->rank - 1]);
    if (rows < 0 || rows > m)
        fz_fail("an accepted call's expert_tokens reach past x's rows", "ffn", RUDNN_STATUS_SUCCESS);
    fz_check_untouched(c, "ffn", y, (size_t)rows * row_bytes, (size_t)m * row_bytes);
}

#define BYTES_SENTINEL ((size_t)0x5eed1)

static void run(fz_call_t *c, const problem_t *p, int op)
{
    call_t k;
    build_call(c, p, &k);
    const rudnn_ffn_args_t *args = fz_object_choice(c, 2) ? NULL : &k.a;
    if (op == OP_WORKSPACE_SIZE) {
        size_t bytes = BYTES_SENTINEL;
        size_t *out = fz_object_choice(c, 2) ? NULL : &bytes;
        rudnn_status_t st = fz_check(c, "ffn_workspace_size", rudnn_ffn_workspace_size(k.q, args, k.y, out));
        if (st && bytes != BYTES_SENTINEL)
            fz_fail("a rejected call wrote *bytes", "ffn_workspace_size", st);
        if (!st && (bytes == BYTES_SENTINEL || bytes % 256))
            fz_fail("an accepted call gave no size, or one not made of 256-byte parts", "ffn_workspace_size", st);
        return;
    }
    size_t need = 0;
    if (args && rudnn_ffn_workspace_size(c->env->q, args, k.y, &need))
        need = 0; /* the call under test says why */
    size_t ws_bytes = 0;
    rudnn_buffer_t ws = fz_workspace(c, need, &ws_bytes);
    rudnn_status_t st = fz_check(c, "ffn", rudnn_ffn(k.q, args, ws, ws_bytes, k.y));
    if (!st && args && k.a.expert_tokens)
        check_rows_left_alone(c, &k);
}

/* Every GEMM program (A, B, C dtypes: C in FP32 or I32, or x's dtype for HIGH_PERFORMANCE without
 * biases and a second product written straight into y) and the epilogue program, built before
 * libFuzzer's leak checks start. */
void fz_warmup(void)
{
    for (uint8_t sc = 0; sc < SCENARIOS; sc++)
        for (int v = 0; v < 2; v++)
            fz_run_header((const uint8_t[FZ_SLOT]){OP_FFN, sc, 1, 0, 3, 3, (uint8_t)(v ? 5 : 0),
                                                   (uint8_t)(v ? 0x81 : 0x06), 1, 0, 0x55, 1});
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_call_t c;
    fz_begin(&c, data, size);
    problem_t p = decode_problem(&c);
    run(&c, &p, fz_header_byte(&c, 0) % OP_COUNT);
    return 0;
}
