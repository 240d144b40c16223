/* Shared libFuzzer harness code (fuzz_common.h): environment, decoder, builders, checks. */
#include "fuzz_common.h"

#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- environment -------------------------------------------------------------------- */

static fz_env_t g_env;
static int g_env_ready;

static void env_require(const char *what, rudnn_status_t st)
{
    if (st == RUDNN_STATUS_SUCCESS)
        return;
    fprintf(stderr, "fuzz: setup: %s failed: %s: %s\n", what, rudnn_status_string(st), rudnn_last_error());
    abort();
}

/* At exit, so that LeakSanitizer's end-of-process check sees what a program that cleans up
 * leaves behind, as in the test suites. */
static void env_destroy(void)
{
    for (int i = 0; i < FZ_BUFFERS; i++)
        rudnn_buffer_destroy(g_env.buf[i]);
    for (int i = 0; i < FZ_FOREIGN_BUFFERS; i++)
        rudnn_buffer_destroy(g_env.foreign[i]);
    rudnn_queue_destroy(g_env.q);
    rudnn_queue_destroy(g_env.q2);
    rudnn_context_destroy(g_env.ctx);
    rudnn_context_destroy(g_env.ctx2);
    g_env_ready = 0;
}

const fz_env_t *fz_env(void)
{
    if (g_env_ready)
        return &g_env;
    atexit(env_destroy);
    /* environment defaults (RUDNN_BACKEND=opencl in CI): the backend under test */
    env_require("context_create", rudnn_context_create(&g_env.ctx, NULL));
    env_require("context_create (second)", rudnn_context_create(&g_env.ctx2, NULL));
    env_require("queue_create", rudnn_queue_create(g_env.ctx, &g_env.q));
    env_require("queue_create (second)", rudnn_queue_create(g_env.ctx2, &g_env.q2));
    for (int i = 0; i < FZ_BUFFERS; i++)
        env_require("buffer_create", rudnn_buffer_create(g_env.ctx, FZ_BUFFER_BYTES, &g_env.buf[i]));
    for (int i = 0; i < FZ_FOREIGN_BUFFERS; i++)
        env_require("buffer_create (second)", rudnn_buffer_create(g_env.ctx2, FZ_BUFFER_BYTES, &g_env.foreign[i]));
    g_env_ready = 1;
    return &g_env;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

void fz_run_header(const uint8_t header[FZ_SLOT]) { LLVMFuzzerTestOneInput(header, FZ_SLOT); }

/* libFuzzer calls this once before the first input: the contexts, queues and buffers are
 * made here, not per input, and the target's programs are built. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fz_env();
    fz_warmup();
    return 0;
}

/* Buffer k of all of them: the main context's first, then the other context's. */
static rudnn_buffer_t any_buffer(const fz_env_t *e, int k)
{
    return k < FZ_BUFFERS ? e->buf[k] : e->foreign[k - FZ_BUFFERS];
}

static rudnn_queue_t queue_of(const fz_env_t *e, int k) { return k < FZ_BUFFERS ? e->q : e->q2; }

static int buffer_index(const fz_env_t *e, rudnn_buffer_t b)
{
    for (int k = 0; k < FZ_BUFFERS + FZ_FOREIGN_BUFFERS; k++)
        if (any_buffer(e, k) == b)
            return k;
    return -1;
}

/* ---- decoder -------------------------------------------------------------------------- */

static void read_bytes(fz_call_t *c, uint8_t *out, size_t n)
{
    memset(out, 0, n);
    size_t avail = c->pos < c->size ? c->size - c->pos : 0;
    memcpy(out, c->data + c->pos, avail < n ? avail : n);
    c->pos += n;
}

fz_slot_t fz_next_slot(fz_call_t *c)
{
    uint8_t b[FZ_SLOT];
    read_bytes(c, b, sizeof b);
    fz_slot_t s = {.mode = b[0], .kind = b[1], .index = b[2], .pick = b[3]};
    memcpy(s.extra, b + 4, 4);
    s.raw = 0;
    for (int i = 7; i >= 0; i--)
        s.raw = (s.raw << 8) | b[8 + i];
    return s;
}

static int mutated(const fz_slot_t *s) { return s->mode >= 0x80; }

uint8_t fz_header_byte(const fz_call_t *c, int i) { return c->header[i & (FZ_SLOT - 1)]; }

int64_t fz_small_dim(uint8_t byte, int64_t span, int allow_zero)
{
    if (allow_zero && byte % 16 == 15)
        return 0;
    return 1 + (int64_t)(byte % (uint8_t)span);
}

rudnn_dtype_t fz_float_dtype(uint8_t byte)
{
    static const rudnn_dtype_t f[3] = {RUDNN_F32, RUDNN_F16, RUDNN_BF16};
    return f[byte % 3];
}

/* Bytes that make useful input values in every float dtype: sentinel-ish, 0, ~1, huge, NaN. */
static const uint8_t fill_bytes[] = {0xa5, 0x00, 0x3f, 0x7f, 0xff, 0x80, 0x41, 0xc7};

/* the input under test, for fz_fail */
static const uint8_t *g_input;
static size_t g_input_size;

void fz_begin(fz_call_t *c, const uint8_t *data, size_t size)
{
    memset(c, 0, sizeof *c);
    c->env = fz_env();
    c->data = data;
    c->size = size;
    g_input = data;
    g_input_size = size;
    read_bytes(c, c->header, sizeof c->header);
    for (int k = 0; k < FZ_BUFFERS + FZ_FOREIGN_BUFFERS; k++) {
        uint8_t pick = k < FZ_BUFFERS ? c->header[15] : c->header[14];
        c->fill[k] = fill_bytes[(pick + (pick >> 4) * k) % COUNT(fill_bytes)];
        rudnn_status_t st = rudnn_buffer_fill(queue_of(c->env, k), any_buffer(c->env, k), 0, c->fill[k],
                                              FZ_BUFFER_BYTES);
        env_require("buffer_fill", st);
    }
    env_require("queue_synchronize", rudnn_queue_synchronize(c->env->q));
    env_require("queue_synchronize (second)", rudnn_queue_synchronize(c->env->q2));
}

/* ---- edge values ------------------------------------------------------------------------ */

static const int64_t dim_edges[] = {
    0, 1, 2, 3, 7, -1, -2, INT64_MIN, INT64_MAX, INT32_MAX, (int64_t)INT32_MAX + 1, UINT32_MAX,
    (int64_t)1 << 32, ((int64_t)1 << 32) + 1, 3037000500 /* its square overflows int64 */,
    (int64_t)1 << 62, (int64_t)1 << 31, 65536, 4097, 1025, 1024, 129, 65, 64,
};
static const int64_t stride_edges[] = {0, -1, 1, 2, 3, INT64_MAX, INT64_MIN, (int64_t)1 << 62, (int64_t)1 << 32,
                                       INT32_MAX, -(int64_t)FZ_BUFFER_BYTES};
/* The seeds (make_corpus.py) pick entries by index: append only. RUDNN_DTYPE_COUNT is one past
 * the last dtype. */
static const int32_t dtype_edges[] = {RUDNN_F32, RUDNN_F16, RUDNN_BF16,        RUDNN_U32, RUDNN_I32, RUDNN_I64, RUDNN_I8,
                                      RUDNN_I4,  -1,        RUDNN_DTYPE_COUNT, 255,       INT32_MAX, INT32_MIN,
                                      RUDNN_BOOL};
static const int32_t rank_edges[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1, 100, INT32_MAX, INT32_MIN};
static const int32_t int_edges[] = {0, 1, 2, 3, -1, -2, INT32_MIN, INT32_MAX, 8, 63, 64, 65, 127, 128, 129, 1023,
                                    1024, 1025};

/* A value of table t (n entries) or the raw field, as the slot's pick byte says. */
static int64_t pick_i64(const fz_slot_t *s, const int64_t *t, size_t n)
{
    return (s->pick & 0x80) ? (int64_t)s->raw : t[s->pick % n];
}

static int32_t pick_i32(const fz_slot_t *s, const int32_t *t, size_t n)
{
    return (s->pick & 0x80) ? (int32_t)(uint32_t)s->raw : t[s->pick % n];
}

/* ---- tensors -------------------------------------------------------------------------------- */

/* Row-major strides for whatever dims the descriptor has (wrapping, never UB). */
static void row_major(rudnn_tensor_t *t)
{
    uint64_t stride = 1;
    int rank = t->rank < 0 ? 0 : t->rank > RUDNN_MAX_RANK ? RUDNN_MAX_RANK : t->rank;
    for (int i = rank - 1; i >= 0; i--) {
        t->strides[i] = (int64_t)stride;
        stride *= t->dims[i] > 0 ? (uint64_t)t->dims[i] : 1;
    }
}

static size_t spec_bytes(const fz_spec_t *spec)
{
    size_t n = 1;
    for (int i = 0; i < spec->rank; i++)
        n *= (size_t)spec->dims[i];
    return rudnn_dtype_storage_bytes(spec->dtype, n);
}

/* The intended descriptor (c->nargs counts it already): argument n gets buffer n (mod FZ_BUFFERS) at a 256-byte multiple
 * that keeps it inside. */
static void place(fz_call_t *c, const fz_spec_t *spec, const fz_slot_t *s, rudnn_tensor_t *t)
{
    size_t bytes = spec_bytes(spec);
    size_t offset = 256 * (size_t)(s->extra[0] % 8);
    if (bytes > FZ_BUFFER_BYTES || offset > FZ_BUFFER_BYTES - bytes)
        offset = 0;
    rudnn_status_t st =
        rudnn_tensor_init(t, c->env->buf[(c->nargs - 1) % FZ_BUFFERS], offset, spec->dtype, spec->rank, spec->dims);
    if (st)
        fz_fail("harness: an intended tensor spec is invalid", "tensor_init", st);
}

enum {
    MUT_NULL,
    MUT_NO_BUFFER,
    MUT_FOREIGN,
    MUT_DTYPE,
    MUT_RANK,
    MUT_DIM,
    MUT_OVERFLOW,
    MUT_STRIDE,
    MUT_OFFSET,
    MUT_ALIAS,
    MUT_OVERLAP,
    MUT_SINGLE_COUNT, /* the kinds above; the next one applies two of them */
    MUT_TWO = MUT_SINGLE_COUNT,
    MUT_COUNT
};

static void mutate(fz_call_t *c, const fz_slot_t *s, int kind, fz_tensor_arg_t *a)
{
    rudnn_tensor_t *t = &a->t;
    size_t elem = rudnn_dtype_size(t->dtype) ? rudnn_dtype_size(t->dtype) : 1;
    switch (kind) {
    case MUT_NULL:
        a->is_null = 1;
        break;
    case MUT_NO_BUFFER:
        t->buffer = NULL;
        break;
    case MUT_FOREIGN:
        t->buffer = c->env->foreign[s->index % FZ_FOREIGN_BUFFERS];
        break;
    case MUT_DTYPE:
        t->dtype = (rudnn_dtype_t)pick_i32(s, dtype_edges, COUNT(dtype_edges));
        break;
    case MUT_RANK: {
        int old = t->rank < 0 ? 0 : t->rank > RUDNN_MAX_RANK ? RUDNN_MAX_RANK : t->rank; /* may be mutated */
        t->rank = pick_i32(s, rank_edges, COUNT(rank_edges));
        for (int i = old; i < RUDNN_MAX_RANK; i++)
            t->dims[i] = 1 + s->extra[1] % 3;
        row_major(t);
        break;
    }
    case MUT_DIM:
        t->dims[s->index % RUDNN_MAX_RANK] = pick_i64(s, dim_edges, COUNT(dim_edges));
        row_major(t);
        break;
    case MUT_OVERFLOW: /* every dim large: the element count overflows int64 / size_t */
        for (int i = 0; i < RUDNN_MAX_RANK; i++)
            t->dims[i] = dim_edges[(s->pick + i * (1 + s->index)) % COUNT(dim_edges)] & INT64_MAX;
        if (!(s->pick & 0x80))
            for (int i = 0; i < RUDNN_MAX_RANK; i++)
                t->dims[i] = (int64_t)1 << (20 + (s->extra[1] + i) % 24);
        row_major(t);
        break;
    case MUT_STRIDE: {
        int i = s->index % RUDNN_MAX_RANK;
        int64_t v = pick_i64(s, stride_edges, COUNT(stride_edges));
        if (s->extra[1] & 1) /* near the row-major value: padded rows, transposes */
            v = (int64_t)((uint64_t)t->strides[i] * (1 + s->extra[1] % 3) + (uint64_t)(s->extra[2] % 3));
        t->strides[i] = v;
        break;
    }
    case MUT_OFFSET: {
        const uint64_t table[] = {1, 2, 3, elem - 1, elem + 1, FZ_BUFFER_BYTES - 1, FZ_BUFFER_BYTES,
                                  FZ_BUFFER_BYTES + elem, FZ_BUFFER_BYTES - elem, SIZE_MAX, SIZE_MAX - 1,
                                  SIZE_MAX - elem + 1, (uint64_t)1 << 63, t->offset + elem};
        t->offset = (s->pick & 0x80) ? (size_t)s->raw : (size_t)table[s->pick % COUNT(table)];
        break;
    }
    case MUT_ALIAS:   /* exactly on an earlier argument (in place when the shapes agree) */
    case MUT_OVERLAP: /* partly over it */
        if (c->nargs > 1) { /* the arguments before this one */
            const rudnn_tensor_t *o = &c->args[s->index % (c->nargs - 1)].t;
            t->buffer = o->buffer;
            t->offset = o->offset + (kind == MUT_OVERLAP ? elem * (1 + s->extra[1] % 4) : 0);
        }
        break;
    }
}

/* A tensor argument; an unmutated slot gives NULL when absent_if_intended. */
static const rudnn_tensor_t *tensor_arg(fz_call_t *c, const fz_spec_t *spec, int is_output, int absent_if_intended)
{
    fz_slot_t s = fz_next_slot(c);
    if (c->nargs == FZ_MAX_TENSORS)
        fz_fail("harness: too many tensor arguments", "fz_tensor", RUDNN_STATUS_INTERNAL);
    fz_tensor_arg_t *a = &c->args[c->nargs++];
    memset(a, 0, sizeof *a);
    a->is_output = is_output;
    place(c, spec, &s, &a->t);
    if (!mutated(&s)) {
        a->is_null = absent_if_intended;
    } else if (s.kind % MUT_COUNT == MUT_TWO) {
        mutate(c, &s, s.extra[2] % MUT_SINGLE_COUNT, a);
        mutate(c, &s, s.extra[3] % MUT_SINGLE_COUNT, a);
    } else {
        mutate(c, &s, s.kind % MUT_COUNT, a);
    }
    return a->is_null ? NULL : &a->t;
}

const rudnn_tensor_t *fz_tensor(fz_call_t *c, const fz_spec_t *spec, int is_output)
{
    return tensor_arg(c, spec, is_output, 0);
}

const rudnn_tensor_t *fz_optional_tensor(fz_call_t *c, const fz_spec_t *spec, int absent)
{
    return tensor_arg(c, spec, 0, absent);
}

const rudnn_tensor_t *fz_optional_output(fz_call_t *c, const fz_spec_t *spec, int absent)
{
    return tensor_arg(c, spec, 1, absent);
}

void fz_note_input(fz_call_t *c, const rudnn_tensor_t *t)
{
    if (c->nargs == FZ_MAX_TENSORS)
        fz_fail("harness: too many tensor arguments", "fz_note_input", RUDNN_STATUS_INTERNAL);
    fz_tensor_arg_t *a = &c->args[c->nargs++];
    memset(a, 0, sizeof *a);
    a->t = *t;
}

/* The byte the harness left at `at` of buffer k: the fill, or what fz_write_input put there. */
static uint8_t expected_byte(const fz_call_t *c, int k, size_t at)
{
    uint8_t b = c->fill[k];
    for (int i = 0; i < c->nwritten; i++) {
        const fz_written_t *w = &c->written[i];
        if (w->buffer == k && at >= w->offset && at - w->offset < w->bytes)
            b = w->data[at - w->offset];
    }
    return b;
}

int fz_write_input(fz_call_t *c, const rudnn_tensor_t *t, const void *data, size_t bytes)
{
    int k = t ? buffer_index(c->env, t->buffer) : -1;
    if (k < 0 || c->nwritten == FZ_MAX_WRITES || bytes > FZ_WRITE_BYTES || t->offset > FZ_BUFFER_BYTES ||
        bytes > FZ_BUFFER_BYTES - t->offset)
        return 0;
    env_require("buffer_write (harness input)", rudnn_buffer_write(queue_of(c->env, k), any_buffer(c->env, k),
                                                                   t->offset, data, bytes));
    fz_written_t *w = &c->written[c->nwritten++];
    w->buffer = k;
    w->offset = t->offset;
    w->bytes = bytes;
    memcpy(w->data, data, bytes);
    return 1;
}

/* ---- options, queues, objects ---------------------------------------------------------------- */

int fz_int(fz_call_t *c, int intended)
{
    fz_slot_t s = fz_next_slot(c);
    if (!mutated(&s))
        return intended;
    if (s.kind % 4 == 0)
        return (int)((unsigned)intended + (s.index % 2 ? 1u : UINT_MAX)); /* one past either end */
    return pick_i32(&s, int_edges, COUNT(int_edges));
}

int64_t fz_i64(fz_call_t *c, int64_t intended)
{
    fz_slot_t s = fz_next_slot(c);
    return mutated(&s) ? pick_i64(&s, dim_edges, COUNT(dim_edges)) : intended;
}

float fz_float(fz_call_t *c, float intended)
{
    static const float edges[] = {0.0f, -0.0f, -1.0f, NAN, -NAN, INFINITY, -INFINITY, 1e-45f, FLT_MIN, FLT_MAX,
                                  1e-5f, 1.0f, 1e30f, -1e-5f};
    fz_slot_t s = fz_next_slot(c);
    if (!mutated(&s))
        return intended;
    if (s.pick & 0x80) {
        uint32_t bits = (uint32_t)s.raw;
        float f;
        memcpy(&f, &bits, sizeof f);
        return f;
    }
    return edges[s.pick % COUNT(edges)];
}

rudnn_queue_t fz_queue(fz_call_t *c)
{
    fz_slot_t s = fz_next_slot(c);
    if (!mutated(&s))
        return c->env->q;
    return s.kind % 2 ? c->env->q2 : NULL;
}

int fz_object_choice(fz_call_t *c, int n)
{
    fz_slot_t s = fz_next_slot(c);
    return mutated(&s) ? 1 + s.kind % (n - 1) : 0;
}

rudnn_buffer_t fz_workspace(fz_call_t *c, size_t intended_bytes, size_t *bytes)
{
    fz_slot_t s = fz_next_slot(c);
    *bytes = intended_bytes;
    if (!mutated(&s))
        return NULL;
    const uint64_t sizes[] = {intended_bytes, 0, intended_bytes - 1, intended_bytes + 1, FZ_BUFFER_BYTES,
                              FZ_BUFFER_BYTES + 1, SIZE_MAX};
    *bytes = (s.pick & 0x80) ? (size_t)s.raw : (size_t)sizes[s.pick % COUNT(sizes)];
    if (s.kind % 3 == 2)
        return c->env->foreign[0];
    if (s.kind % 3 == 1)
        return NULL;
    c->workspace = c->env->buf[s.index % FZ_BUFFERS];
    c->workspace_bytes = *bytes;
    return c->workspace;
}

/* ---- checks ------------------------------------------------------------------------------------ */

static void print_args(const fz_call_t *c)
{
    for (int n = 0; n < c->nargs; n++) {
        const fz_tensor_arg_t *a = &c->args[n];
        const rudnn_tensor_t *t = &a->t;
        if (a->is_null) {
            fprintf(stderr, "  arg %d%s: NULL\n", n, a->is_output ? " (output)" : "");
            continue;
        }
        fprintf(stderr, "  arg %d%s: buffer %d offset %zu dtype %d rank %d dims", n, a->is_output ? " (output)" : "",
                buffer_index(c->env, t->buffer), t->offset, (int)t->dtype, t->rank);
        for (int i = 0; i < RUDNN_MAX_RANK; i++)
            fprintf(stderr, " %" PRId64, t->dims[i]);
        fprintf(stderr, " strides");
        for (int i = 0; i < RUDNN_MAX_RANK; i++)
            fprintf(stderr, " %" PRId64, t->strides[i]);
        fprintf(stderr, "\n");
    }
}

static const fz_call_t *g_failing_call;

/* The failing input, in hex on stderr (a CI log keeps it when no file survives the run) and as
 * <FZ_ARTIFACT_PREFIX>fail-input: libFuzzer writes no crash file for an abort() here. */
static void dump_input(void)
{
    if (!g_input)
        return;
    fprintf(stderr, "fuzz: input (%zu bytes):", g_input_size);
    for (size_t i = 0; i < g_input_size; i++)
        fprintf(stderr, "%s%02x", i % 32 ? "" : "\nfuzz:   ", g_input[i]);
    fprintf(stderr, "\n");
    const char *prefix = getenv("FZ_ARTIFACT_PREFIX");
    char path[4096];
    if (!prefix || snprintf(path, sizeof path, "%sfail-input", prefix) >= (int)sizeof path)
        return;
    FILE *f = fopen(path, "wb");
    if (f) {
        const int ok = fwrite(g_input, 1, g_input_size, f) == g_input_size;
        if (fclose(f) == 0 && ok)
            fprintf(stderr, "fuzz: input written to %s\n", path);
    }
}

void fz_fail(const char *why, const char *op, rudnn_status_t st)
{
    fprintf(stderr, "fuzz: %s\n  op %s returned %s (%d)\n", why, op, rudnn_status_string(st), (int)st);
    if (g_failing_call)
        print_args(g_failing_call);
    dump_input();
    abort();
}

void fz_require(const char *what, rudnn_status_t st)
{
    if (st == RUDNN_STATUS_SUCCESS)
        return;
    fprintf(stderr, "fuzz: harness: %s failed: %s\n", what, rudnn_last_error());
    fz_fail("a call the harness needs was rejected", what, st);
}

/* Bytes from a tensor's first element through its last: its size when contiguous, more for the
 * strided views an op accepts (attention's). Strides of an accepted call are valid. */
static size_t view_bytes(const rudnn_tensor_t *t)
{
    if (rudnn_tensor_is_contiguous(t) || rudnn_tensor_numel(t) == 0)
        return rudnn_tensor_bytes(t);
    uint64_t last = 0;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] > 1)
            last += (uint64_t)(t->dims[i] - 1) * (uint64_t)t->strides[i];
    return rudnn_dtype_storage_bytes(t->dtype, (size_t)last + 1);
}

/* 1 when byte `at` of buffer k lies in an output of an accepted call. */
static int in_output(const fz_call_t *c, int k, size_t at)
{
    rudnn_buffer_t b = any_buffer(c->env, k);
    if (c->workspace == b && at < c->workspace_bytes)
        return 1;
    for (int n = 0; n < c->nargs; n++) {
        const fz_tensor_arg_t *a = &c->args[n];
        if (!a->is_output || a->is_null || a->t.buffer != b)
            continue;
        if (at >= a->t.offset && at - a->t.offset < view_bytes(&a->t))
            return 1;
    }
    return 0;
}

/* Byte range of argument a in its buffer. */
static void byte_range(const fz_tensor_arg_t *a, size_t *begin, size_t *end)
{
    *begin = a->t.offset;
    *end = a->t.offset + view_bytes(&a->t);
}

/* The overlap rule of an accepted call: every output exactly on an input or disjoint from it;
 * the workspace disjoint from every input. */
static void check_overlaps(const fz_call_t *c, const char *op)
{
    for (int n = 0; n < c->nargs; n++) {
        const fz_tensor_arg_t *in = &c->args[n];
        if (in->is_output || in->is_null || !in->t.buffer)
            continue;
        size_t ib, ie;
        byte_range(in, &ib, &ie);
        if (ib == ie)
            continue;
        if (c->workspace == in->t.buffer && ib < c->workspace_bytes) {
            fprintf(stderr, "fuzz: the workspace [0, %zu) overlaps input arg %d\n", c->workspace_bytes, n);
            fz_fail("an accepted call writes a workspace over an input", op, RUDNN_STATUS_SUCCESS);
        }
        for (int m = 0; m < c->nargs; m++) {
            const fz_tensor_arg_t *out = &c->args[m];
            if (!out->is_output || out->is_null || out->t.buffer != in->t.buffer)
                continue;
            size_t ob, oe;
            byte_range(out, &ob, &oe);
            if (ob == oe || oe <= ib || ie <= ob || (ob == ib && oe == ie))
                continue;
            fprintf(stderr, "fuzz: output arg %d bytes [%zu, %zu) partly overlap input arg %d [%zu, %zu)\n", m, ob,
                    oe, n, ib, ie);
            fz_fail("an accepted call's output partly overlaps an input", op, RUDNN_STATUS_SUCCESS);
        }
    }
}

/* Reads every buffer back; aborts on a byte that changed where nothing may be written. */
static void check_buffers(const fz_call_t *c, const char *op, rudnn_status_t st)
{
    static uint8_t host[FZ_BUFFER_BYTES];
    for (int k = 0; k < FZ_BUFFERS + FZ_FOREIGN_BUFFERS; k++) {
        rudnn_status_t rst = rudnn_buffer_read(queue_of(c->env, k), any_buffer(c->env, k), 0, host, sizeof host);
        if (rst)
            fz_fail("reading a buffer back after the call failed", op, rst);
        for (size_t at = 0; at < sizeof host; at++) {
            if (host[at] == expected_byte(c, k, at) || (st == RUDNN_STATUS_SUCCESS && in_output(c, k, at)))
                continue;
            fprintf(stderr, "fuzz: buffer %d byte %zu is 0x%02x, was 0x%02x\n", k, at, host[at],
                    expected_byte(c, k, at));
            fz_fail(st ? "a rejected call changed a buffer" : "an accepted call wrote outside its outputs", op, st);
        }
    }
}

/* Accepted and rejected calls per op, printed at exit when RUDNN_FUZZ_STATS is set: whether
 * the inputs reach the kernels, not only the checks. */
#define STATS_OPS 32
static struct op_stats {
    const char *op;
    unsigned long accepted, rejected;
} g_stats[STATS_OPS];

static void stats_print(void)
{
    for (int i = 0; i < STATS_OPS && g_stats[i].op; i++)
        fprintf(stderr, "fuzz stats: %-40s accepted %8lu rejected %8lu\n", g_stats[i].op, g_stats[i].accepted,
                g_stats[i].rejected);
}

static void stats_count(const char *op, rudnn_status_t st)
{
    static int registered;
    if (!getenv("RUDNN_FUZZ_STATS"))
        return;
    if (!registered++)
        atexit(stats_print);
    for (int i = 0; i < STATS_OPS; i++) {
        if (g_stats[i].op && strcmp(g_stats[i].op, op) != 0)
            continue;
        g_stats[i].op = op;
        if (st)
            g_stats[i].rejected++;
        else
            g_stats[i].accepted++;
        return;
    }
}

rudnn_status_t fz_check(fz_call_t *c, const char *op, rudnn_status_t st)
{
    stats_count(op, st);
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", rudnn_last_error());
    g_failing_call = c;
    size_t n = strlen(op);
    if (st == RUDNN_STATUS_SUCCESS) {
        check_overlaps(c, op);
        if (msg[0]) {
            fprintf(stderr, "fuzz: message: %s\n", msg);
            fz_fail("an accepted call left a message in rudnn_last_error()", op, st);
        }
    } else {
        if (!(st >= 100 && st < 300)) {
            fprintf(stderr, "fuzz: message: %s\n", msg);
            fz_fail("a rejected call returned a status outside 1xx/2xx", op, st);
        }
        if (strncmp(msg, op, n) != 0 || msg[n] != ':') {
            fprintf(stderr, "fuzz: message: \"%s\"\n", msg);
            fz_fail("a rejected call's message does not start with \"<op>:\"", op, st);
        }
    }
    /* both queues: a call may have queued work before it failed */
    rudnn_status_t sync = rudnn_queue_synchronize(c->env->q);
    if (!sync)
        sync = rudnn_queue_synchronize(c->env->q2);
    if (sync) {
        fprintf(stderr, "fuzz: synchronize: %s\n", rudnn_last_error());
        fz_fail("queue work of the call failed", op, sync);
    }
    check_buffers(c, op, st);
    g_failing_call = NULL;
    return st;
}

void fz_check_untouched(fz_call_t *c, const char *op, const rudnn_tensor_t *t, size_t begin, size_t end)
{
    static uint8_t host[FZ_BUFFER_BYTES];
    int k = buffer_index(c->env, t->buffer);
    if (k < 0 || begin >= end)
        return;
    if (t->offset > FZ_BUFFER_BYTES || end > FZ_BUFFER_BYTES - t->offset)
        fz_fail("harness: fz_check_untouched past the end of the buffer", op, RUDNN_STATUS_INTERNAL);
    rudnn_status_t st = rudnn_buffer_read(queue_of(c->env, k), any_buffer(c->env, k), 0, host, sizeof host);
    if (st)
        fz_fail("reading a buffer back after the call failed", op, st);
    g_failing_call = c;
    for (size_t at = t->offset + begin; at < t->offset + end; at++) {
        if (host[at] == expected_byte(c, k, at))
            continue;
        fprintf(stderr, "fuzz: buffer %d byte %zu is 0x%02x, was 0x%02x (bytes [%zu, %zu) of an output)\n", k, at,
                host[at], expected_byte(c, k, at), begin, end);
        fz_fail("an accepted call wrote a part of its output it must leave alone", op, RUDNN_STATUS_SUCCESS);
    }
    g_failing_call = NULL;
}
