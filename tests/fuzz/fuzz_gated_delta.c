/* libFuzzer target of the gated delta rule (rudnn/gated_delta.h): rudnn_chunk_gated_delta_rule,
 * rudnn_gated_delta_rule and their _workspace_size queries with arbitrary descriptors, dtypes, strides,
 * chunk sizes, varlen offsets and state indices (valid and not), query_scale (finite or not) and
 * workspaces, on the default backend.
 *
 * Header bytes (fuzz_common.h has the slot format): 0 op (chunk, chunk_workspace_size, recurrent,
 * recurrent_workspace_size); 1 dtype; 2 B (1..3; varlen: 1); 3 H (1..3); 4 T (0..9, fixed length);
 * 5 K, 6 V (each one of 1, 2, 3, 8, 16); 7 chunk_size (one of 1, 2, 3, 4, 8, 16, 64); 8 flags: bit 0
 * varlen, 1 state_indices given (else NULL: sequence i uses row i), 2 query/key/value/output as
 * [B, H, T, D] views of [B, T, H, D] memory, 3 beta/log_decay as [B, H, T] views of [B, T, H], 4 T has
 * two tokens past cu_seqlens[N] (varlen), 5 the varlen struct (when given) made into a varlen plan
 * first (rudnn_gated_delta_varlen_plan_create, the op's chunk size or 0; the call then names the plan,
 * or keeps the host arrays where the plan was refused); 9 N - 1 (bits 0-1); 10 the sequences' lengths (2 bits each:
 * 0..3 tokens), 11 bits 0-3 add 4 tokens to sequence i, bits 4-5 extra pool rows (0..3), bits 6-7
 * rotate the state indices; 14, 15 the buffers' fill (fz_begin).
 *
 * Slots after the header, one each:
 *   0 queue; 1 query, 2 key, 3 value, 4 beta, 5 log_decay, 6 initial_state, 7 output, 8 final_state
 *   (each in a buffer of its own); 9 query_scale (fz_float: NaN, infinities, ...); 10 chunk_size
 *   (fz_i64; read by every op, used by the chunked ones); 11 the varlen struct present or not (flips
 *   the header's choice); 12 sequences (fz_i64; values past MAX_SEQ_ARRAY - 1 are left intended: the
 *   host arrays the harness passes hold that many entries, and a count past a caller's array is the
 *   caller's bug, not the op's); 13..17 cu_seqlens[0..4] (fz_i64; entries past 4 repeat the intended
 *   cu_seqlens[N]); 18..21 state_indices[0..3] (fz_int; entries past 3 are 4, 5, ...); 22 state_indices
 *   NULL or not (flips the header's choice); 23 the input struct or NULL; 24 the output struct or
 *   NULL; 25 the call: the workspace (fz_workspace; intended NULL, the pool), a query: bytes (the
 *   pointer or NULL).
 *
 * Beyond fz_check's contract (rejected: a 1xx/2xx status naming the op, no byte written; accepted:
 * only output, final_state and the workspace written, the queues' work succeeds): a rejected query
 * leaves *bytes alone and an accepted one gives a multiple of 256; an accepted varlen call leaves the
 * pool rows no sequence names and the output tokens past cu_seqlens[N] as they were (gated_delta.h),
 * and an accepted fixed-length call with T = 0 makes final_state equal to initial_state. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <rudnn/gated_delta.h>

#include "fuzz_common.h"

enum { OP_CHUNK, OP_CHUNK_SIZE, OP_RECURRENT, OP_RECURRENT_SIZE, OP_COUNT };
/* The name each op's messages start with (a query's are its op's) */
static const char *const op_names[OP_COUNT] = {"rudnn_chunk_gated_delta_rule", "rudnn_chunk_gated_delta_rule",
                                               "rudnn_gated_delta_rule", "rudnn_gated_delta_rule"};

#define MAX_N 4          /* sequences of the intended varlen problem */
#define MAX_SEQ_ARRAY 64 /* entries of the host arrays passed (cu_seqlens: MAX_SEQ_ARRAY + 1) */

enum {
    F_VARLEN = 1,
    F_INDICES = 2,
    F_BTHD = 4,
    F_BTH = 8,
    F_TAIL = 16,
    F_PLAN = 32,
};

/* The valid problem the header describes. */
typedef struct problem {
    rudnn_dtype_t dt;
    int64_t B, H, T, K, V, chunk;
    uint8_t flags;
    int64_t n, pool; /* varlen: sequences, rows of both pools */
    int64_t cu[MAX_N + 1];
    int32_t idx[MAX_N];
} problem_t;

static problem_t decode_problem(const fz_call_t *c)
{
    static const int64_t dims[5] = {1, 2, 3, 8, 16};
    static const int64_t chunks[7] = {1, 2, 3, 4, 8, 16, 64};
    problem_t p;
    memset(&p, 0, sizeof p);
    p.dt = fz_float_dtype(fz_header_byte(c, 1));
    p.flags = fz_header_byte(c, 8);
    p.H = 1 + fz_header_byte(c, 3) % 3;
    p.K = dims[fz_header_byte(c, 5) % 5];
    p.V = dims[fz_header_byte(c, 6) % 5];
    p.chunk = chunks[fz_header_byte(c, 7) % 7];
    if (!(p.flags & F_VARLEN)) {
        p.B = 1 + fz_header_byte(c, 2) % 3;
        p.T = fz_small_dim(fz_header_byte(c, 4), 9, 1);
        return p;
    }
    /* varlen: B 1, N sequences packed along T, pools of rows that fit a harness buffer */
    const uint8_t lengths = fz_header_byte(c, 10), more = fz_header_byte(c, 11);
    const int64_t row_bytes = p.H * p.K * p.V * 4, cap = FZ_BUFFER_BYTES / row_bytes;
    p.B = 1;
    p.n = 1 + fz_header_byte(c, 9) % MAX_N;
    p.pool = p.n + ((more >> 4) & 3);
    if (p.pool > cap)
        p.pool = cap;
    if (p.n > p.pool)
        p.n = p.pool;
    for (int64_t i = 0; i < p.n; i++)
        p.cu[i + 1] = p.cu[i] + ((lengths >> (2 * i)) & 3) + ((more >> i) & 1 ? 4 : 0);
    p.T = p.cu[p.n] + (p.flags & F_TAIL ? 2 : 0);
    for (int64_t i = 0; i < p.n; i++)
        p.idx[i] = (int32_t)((i + (more >> 6)) % p.pool);
    return p;
}

static fz_spec_t spec(rudnn_dtype_t dt, int rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    fz_spec_t s = {dt, rank, {d0, d1, d2, d3}};
    return s;
}

/* A [B, H, T, D] descriptor over [B, T, H, D] memory (the same bytes), when it is the intended
 * contiguous one (a mutated descriptor is left as mutated). */
static void as_bthd(const rudnn_tensor_t *t)
{
    if (!t || t->rank != 4 || !rudnn_tensor_is_contiguous(t))
        return;
    rudnn_tensor_t *w = (rudnn_tensor_t *)t; /* the harness's own descriptor (fz_call_t.args) */
    const int64_t h = w->dims[1], s = w->dims[2], d = w->dims[3];
    int64_t hd, shd;
    if (__builtin_mul_overflow(h, d, &hd) || __builtin_mul_overflow(s, hd, &shd))
        return;
    w->strides[3] = 1, w->strides[1] = d, w->strides[2] = hd, w->strides[0] = shd;
}

/* The same for [B, H, T] over [B, T, H]. */
static void as_bth(const rudnn_tensor_t *t)
{
    if (!t || t->rank != 3 || !rudnn_tensor_is_contiguous(t))
        return;
    rudnn_tensor_t *w = (rudnn_tensor_t *)t;
    const int64_t h = w->dims[1], s = w->dims[2];
    int64_t sh;
    if (__builtin_mul_overflow(s, h, &sh))
        return;
    w->strides[1] = 1, w->strides[2] = h, w->strides[0] = sh;
}

typedef struct call {
    rudnn_queue_t q;
    rudnn_gated_delta_input_t in;
    rudnn_gated_delta_output_t out;
    rudnn_gated_delta_varlen_t vl;
    int64_t chunk;
    int has_varlen;
    int64_t cu[MAX_SEQ_ARRAY + 1];
    int32_t idx[MAX_SEQ_ARRAY];
} call_t;

static void build_call(fz_call_t *c, const problem_t *p, call_t *k)
{
    memset(k, 0, sizeof *k);
    const int64_t rows = p->flags & F_VARLEN ? p->pool : p->B;
    const fz_spec_t sq = spec(p->dt, 4, p->B, p->H, p->T, p->K), sv = spec(p->dt, 4, p->B, p->H, p->T, p->V);
    const fz_spec_t sb = spec(p->dt, 3, p->B, p->H, p->T, 0), sd = spec(RUDNN_F32, 3, p->B, p->H, p->T, 0);
    const fz_spec_t ss = spec(RUDNN_F32, 4, rows, p->H, p->K, p->V);
    k->q = fz_queue(c);
    k->in.query = fz_tensor(c, &sq, 0);
    k->in.key = fz_tensor(c, &sq, 0);
    k->in.value = fz_tensor(c, &sv, 0);
    k->in.beta = fz_tensor(c, &sb, 0);
    k->in.log_decay = fz_tensor(c, &sd, 0);
    k->in.initial_state = fz_tensor(c, &ss, 0);
    k->out.output = fz_tensor(c, &sv, 1);
    k->out.final_state = fz_tensor(c, &ss, 1);
    if (p->flags & F_BTHD) {
        as_bthd(k->in.query), as_bthd(k->in.key), as_bthd(k->in.value), as_bthd(k->out.output);
    }
    if (p->flags & F_BTH) {
        as_bth(k->in.beta), as_bth(k->in.log_decay);
    }
    k->in.query_scale = fz_float(c, 1.0f / sqrtf((float)p->K));
    k->chunk = fz_i64(c, p->chunk);

    /* varlen: the struct, its count and host arrays (fixed slot numbers whatever N is) */
    k->has_varlen = !(p->flags & F_VARLEN) != !fz_object_choice(c, 2);
    const int64_t n = p->flags & F_VARLEN ? p->n : 1;
    const int64_t total = p->flags & F_VARLEN ? p->cu[p->n] : p->T;
    int64_t seqs = fz_i64(c, n);
    if (seqs > MAX_SEQ_ARRAY - 1)
        seqs = n;
    for (int i = 0; i <= MAX_N; i++)
        k->cu[i] = fz_i64(c, i <= n ? (p->flags & F_VARLEN ? p->cu[i] : i ? total : 0) : total);
    for (int i = MAX_N + 1; i <= MAX_SEQ_ARRAY; i++)
        k->cu[i] = k->cu[MAX_N];
    for (int i = 0; i < MAX_N; i++)
        k->idx[i] = fz_int(c, i < n ? (p->flags & F_VARLEN ? p->idx[i] : i) : i);
    for (int i = MAX_N; i < MAX_SEQ_ARRAY; i++)
        k->idx[i] = i;
    const int with_indices = !(p->flags & F_INDICES) != !fz_object_choice(c, 2);
    k->vl.sequences = seqs;
    k->vl.cu_seqlens = k->cu;
    k->vl.state_indices = with_indices ? k->idx : NULL;
}

/* After an accepted varlen call: the pool rows no sequence names, and the output tokens past
 * cu_seqlens[N], are as they were. */
static void check_varlen_untouched(fz_call_t *c, const char *op, const call_t *k)
{
    const rudnn_tensor_t *fs = k->out.final_state, *o = k->out.output;
    const int64_t n = k->vl.sequences, rows = fs->dims[0];
    const size_t row_bytes = (size_t)(fs->dims[1] * fs->dims[2] * fs->dims[3]) * 4;
    for (int64_t r = 0; r < rows; r++) {
        int named = 0;
        for (int64_t i = 0; i < n && !named; i++)
            named = (k->vl.state_indices ? k->vl.state_indices[i] : i) == r;
        if (!named)
            fz_check_untouched(c, op, fs, (size_t)r * row_bytes, (size_t)(r + 1) * row_bytes);
    }
    const size_t es = rudnn_dtype_size(o->dtype), token_bytes = (size_t)o->dims[3] * es;
    for (int64_t h = 0; h < o->dims[1]; h++)
        for (int64_t t = k->cu[n]; t < o->dims[2]; t++) {
            const size_t at = (size_t)(h * o->strides[1] + t * o->strides[2]) * es;
            fz_check_untouched(c, op, o, at, at + token_bytes);
        }
}

/* After an accepted fixed-length call with T = 0: final_state holds initial_state's bytes. */
static void check_state_copied(const fz_call_t *c, const char *op, const call_t *k)
{
    static uint8_t a[FZ_BUFFER_BYTES], b[FZ_BUFFER_BYTES];
    const size_t bytes = rudnn_tensor_bytes(k->in.initial_state);
    if (bytes > sizeof a)
        return;
    fz_require("tensor_read (initial_state)", rudnn_tensor_read(c->env->q, k->in.initial_state, a, bytes));
    fz_require("tensor_read (final_state)", rudnn_tensor_read(c->env->q, k->out.final_state, b, bytes));
    if (memcmp(a, b, bytes) != 0)
        fz_fail("an accepted call with T = 0 did not copy initial_state to final_state", op, RUDNN_STATUS_SUCCESS);
}

#define BYTES_SENTINEL ((size_t)0x5eed1)

static void run_call(fz_call_t *c, const call_t *k, const rudnn_gated_delta_varlen_t *vl, int op);

static void run(fz_call_t *c, const problem_t *p, int op)
{
    call_t k;
    build_call(c, p, &k);
    const rudnn_gated_delta_varlen_t *vl = k.has_varlen ? &k.vl : NULL;
    const int chunked = op == OP_CHUNK || op == OP_CHUNK_SIZE;
    rudnn_gated_delta_varlen_plan_t plan = NULL;
    rudnn_gated_delta_varlen_t with_plan;
    if (vl && (p->flags & F_PLAN) && !rudnn_gated_delta_varlen_plan_create(k.q, vl, chunked ? k.chunk : 0, &plan)) {
        with_plan = (rudnn_gated_delta_varlen_t){.plan = plan};
        vl = &with_plan;
    }
    run_call(c, &k, vl, op);
    rudnn_gated_delta_varlen_plan_destroy(plan);
}

/* The op on k, with vl (host arrays or a plan of k's; the checks after it read k's arrays). */
static void run_call(fz_call_t *c, const call_t *k, const rudnn_gated_delta_varlen_t *vl, int op)
{
    const rudnn_gated_delta_input_t *in = fz_object_choice(c, 2) ? NULL : &k->in;
    const rudnn_gated_delta_output_t *out = fz_object_choice(c, 2) ? NULL : &k->out;
    const char *name = op_names[op];
    const int chunked = op == OP_CHUNK || op == OP_CHUNK_SIZE;
    if (op == OP_CHUNK_SIZE || op == OP_RECURRENT_SIZE) {
        size_t bytes = BYTES_SENTINEL;
        size_t *res = fz_object_choice(c, 2) ? NULL : &bytes;
        rudnn_status_t st =
            fz_check(c, name,
                     chunked ? rudnn_chunk_gated_delta_rule_workspace_size(k->q, in, vl, k->chunk, out, res)
                             : rudnn_gated_delta_rule_workspace_size(k->q, in, vl, out, res));
        if (st && bytes != BYTES_SENTINEL)
            fz_fail("a rejected call wrote *bytes", name, st);
        if (!st && (bytes == BYTES_SENTINEL || bytes % 256))
            fz_fail("an accepted call gave no size, or one not made of 256-byte parts", name, st);
        return;
    }
    /* the intended workspace size, asked on the main queue (the call under test says why not) */
    size_t need = 0;
    if (in && out &&
        (chunked ? rudnn_chunk_gated_delta_rule_workspace_size(c->env->q, in, vl, k->chunk, out, &need)
                 : rudnn_gated_delta_rule_workspace_size(c->env->q, in, vl, out, &need)))
        need = 0;
    size_t ws_bytes = 0;
    rudnn_buffer_t ws = fz_workspace(c, need, &ws_bytes);
    rudnn_status_t st = fz_check(c, name,
                                 chunked ? rudnn_chunk_gated_delta_rule(k->q, in, vl, k->chunk, ws, ws_bytes, out)
                                         : rudnn_gated_delta_rule(k->q, in, vl, ws, ws_bytes, out));
    if (st)
        return;
    if (vl)
        check_varlen_untouched(c, name, k);
    else if (k->in.query->dims[2] == 0)
        check_state_copied(c, name, k);
}

/* Every op and dtype, fixed and varlen, so that the programs are built before the leak checks. */
void fz_warmup(void)
{
    for (uint8_t op = 0; op < OP_COUNT; op++)
        for (uint8_t dt = 0; dt < 3; dt++)
            for (uint8_t varlen = 0; varlen < 2; varlen++)
                fz_run_header((const uint8_t[FZ_SLOT]){op, dt, 1, 1, 4, 3, 4, 1, (uint8_t)(varlen ? 3 : 0), 1,
                                                       0x0b, 0x11});
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_call_t c;
    fz_begin(&c, data, size);
    problem_t p = decode_problem(&c);
    run(&c, &p, fz_header_byte(&c, 0) % OP_COUNT);
    return 0;
}
