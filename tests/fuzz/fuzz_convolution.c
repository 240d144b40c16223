/* libFuzzer target of convolution (rudnn/convolution.h): rudnn_conv_forward, rudnn_conv_data_backward,
 * rudnn_conv_weight_backward, rudnn_conv_resolve and rudnn_conv_workspace_size with arbitrary
 * descriptors (any dtype, rank, dims, strides, offsets, another context, aliasing), options (stride,
 * padding, dilation, groups: edge values and raw ones), strategies, directions and workspaces; and
 * rudnn_conv_output_dims, rudnn_conv_channels_last and rudnn_conv_kernel_info with arbitrary values.
 *
 * Header bytes (fuzz_common.h has the slot format): 0 op (forward, data_backward, weight_backward,
 * resolve, workspace_size, output_dims, channels_last, kernel_info); 1 dtype; 2 spatial dims d - 1
 * (1..3); 3 N (1..2, 0 when the byte's low nibble is 15); 4 groups (1..2); 5 Cg, 6 Kg (1..3 each);
 * 7, 8, 9 the low nibbles: S_1..S_3 (1..6; 3D: 1..4); 7 high nibble: the strategy (its value mod 3),
 * 8 high nibble: the queries' direction (mod 3), 9 high nibble bit 0: w and dw channels-last;
 * 10 R (2 bits a dim: 1..3), bit 6 writes the first input's first 64 bytes, bit 7 the second's;
 * 11 stride (2 bits a dim: 1..3), bit 6 bias / dbias given, bit 7 x, dx, y, dy channels-last;
 * 12 padding (2 bits a dim: 0..2; 3D 0..1); 13 dilation (2 bits a dim: 1..2), bits 6-7 the written
 * values' seed; 14, 15 the buffers' fill (fz_begin). A filter wider than the padded input gets R 1
 * there: the intended problem is always valid.
 *
 * Slots after the header, one each. The convolution ops and queries: 0 queue; 1 x (dx for data
 * backward), 2 w (dw for weight backward), 3 y (dy for the backward directions), 4 bias (forward) or
 * dbias (weight backward; data backward reads the slot and passes nothing): each in a buffer of its
 * own; 5 options present or NULL; 6..8 stride[0..2], 9..11 padding[0..2], 12..14 dilation[0..2],
 * 15 groups (fz_i64); 16 strategy (fz_int); then the ops: 17 workspace (fz_workspace: intended NULL);
 * the queries: 17 choice / bytes NULL, 18 tensors NULL, 19 direction (fz_int), 20 a tensor in a field
 * the direction leaves NULL.
 * output_dims: 0 rank (fz_int), 1..5 x_dims, 6..10 w_dims (fz_i64), 11 options present, 12..21 the
 * options as above, 22 x_dims or w_dims NULL, 23 y_dims NULL. channels_last: 0 rank, 1..5 dims, 6 dtype
 * (fz_int), 7 the buffer (this context's, none, the other's), 8 offset (fz_i64), 9 tensor NULL.
 * kernel_info: 0 index (fz_int), 1 context (main, NULL), 2 which result pointer is NULL.
 *
 * Beyond fz_check's contract (rejected: a 1xx/2xx status naming the op, no byte written; accepted:
 * only the outputs written, the queues' work succeeds): an op's rudnn_conv_resolve and
 * rudnn_conv_workspace_size, asked first with the same arguments, fail with the op's status where the
 * op fails for anything but its workspace, succeed where it succeeds, and resolve names the kernel
 * that then runs (an explicit strategy; Autotune: resolve asked again after the call); an accepted
 * call's outputs are disjoint from every input and from each other (convolution.h: not even in
 * place), the bytes between a strided output's elements are left alone, and every output element
 * matches an FP64 reference computed here from what the buffers hold: within the FP32 rounding of its
 * sum and the output dtype's rounding; NaN exactly where a term is NaN (a padding tap is a term of
 * forward and weight backward, zero times the other factor; a tap of data backward that meets no
 * output position is none); terms with an FP32 denormal factor may flush to zero; elements whose
 * terms reach 1e37 (F16 outputs: 6e4) are left alone. A rejected query leaves *bytes and *choice
 * alone; an accepted resolve names a "convolution." kernel of the backend. output_dims: accepted
 * exactly when the shape rule of convolution.h and its limits hold (computed here without overflow),
 * with those dims; y_dims untouched otherwise. channels_last: the strides of [N, S.., C] memory.
 * kernel_info: a listed kernel's name, strategy and direction. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/convolution.h>

#include "fuzz_common.h"

enum { OP_FWD, OP_DGRAD, OP_WGRAD, OP_RESOLVE, OP_SIZE, OP_OUTPUT_DIMS, OP_CHANNELS_LAST, OP_KERNEL_INFO, OP_COUNT };
/* The name each op's messages start with (ops/convolution.c) */
static const char *const op_names[OP_COUNT] = {"conv_forward",        "conv_data_backward", "conv_weight_backward",
                                               "conv_resolve",        "conv_workspace_size", "conv_output_dims",
                                               "conv_channels_last", "conv_kernel_info"};

#define BYTES_SENTINEL ((size_t)0x5eed1)
#define CHOICE_BYTE 0x5c

/* The valid problem the header describes. */
typedef struct problem {
    rudnn_dtype_t dt;
    int d;
    int64_t N, G, Cg, Kg, C, K;
    int64_t S[3], R[3], P[3], st[3], pad[3], dil[3];
    int strategy, qdir, bias, cl_xy, cl_w, write1, write2;
    uint8_t seed;
} problem_t;

static problem_t decode_problem(const fz_call_t *c)
{
    problem_t p;
    memset(&p, 0, sizeof p);
    p.dt = fz_float_dtype(fz_header_byte(c, 1));
    p.d = 1 + fz_header_byte(c, 2) % 3;
    p.N = fz_small_dim(fz_header_byte(c, 3), 2, 1);
    p.G = 1 + fz_header_byte(c, 4) % 2;
    p.Cg = 1 + fz_header_byte(c, 5) % 3;
    p.Kg = 1 + fz_header_byte(c, 6) % 3;
    p.C = p.G * p.Cg, p.K = p.G * p.Kg;
    const uint8_t rb = fz_header_byte(c, 10), sb = fz_header_byte(c, 11), pb = fz_header_byte(c, 12),
                  db = fz_header_byte(c, 13);
    for (int i = 0; i < 3; i++) {
        p.S[i] = p.R[i] = p.P[i] = p.st[i] = p.dil[i] = 1;
        p.pad[i] = 0;
        if (i >= p.d)
            continue;
        p.S[i] = 1 + (fz_header_byte(c, 7 + i) & 15) % (p.d == 3 ? 4 : 6);
        p.R[i] = 1 + ((rb >> (2 * i)) & 3) % 3;
        p.st[i] = 1 + ((sb >> (2 * i)) & 3) % 3;
        p.pad[i] = ((pb >> (2 * i)) & 3) % (p.d == 3 ? 2 : 3);
        p.dil[i] = 1 + ((db >> (2 * i)) & 3) % 2;
        if (p.dil[i] * (p.R[i] - 1) + 1 > p.S[i] + 2 * p.pad[i])
            p.R[i] = 1, p.dil[i] = 1;
        p.P[i] = (p.S[i] + 2 * p.pad[i] - p.dil[i] * (p.R[i] - 1) - 1) / p.st[i] + 1;
    }
    p.strategy = (fz_header_byte(c, 7) >> 4) % 3;
    p.qdir = (fz_header_byte(c, 8) >> 4) % 3;
    p.cl_w = (fz_header_byte(c, 9) >> 4) & 1;
    p.write1 = (rb >> 6) & 1, p.write2 = (rb >> 7) & 1;
    p.bias = (sb >> 6) & 1, p.cl_xy = (sb >> 7) & 1;
    p.seed = db >> 6;
    return p;
}

static fz_spec_t spec_of(const problem_t *p, int64_t d0, int64_t d1, const int64_t *sp)
{
    fz_spec_t s;
    memset(&s, 0, sizeof s);
    s.dtype = p->dt;
    s.rank = 2 + p->d;
    s.dims[0] = d0, s.dims[1] = d1;
    for (int i = 0; i < p->d; i++)
        s.dims[2 + i] = sp[i];
    return s;
}

/* A channels-last descriptor of the same bytes, when t is the intended contiguous one. */
static void as_channels_last(const rudnn_tensor_t *t)
{
    if (!t || t->rank < 3 || t->rank > 5 || !rudnn_tensor_is_contiguous(t))
        return;
    rudnn_tensor_t cl;
    if (rudnn_conv_channels_last(&cl, t->buffer, t->offset, t->dtype, t->rank, t->dims) == RUDNN_STATUS_SUCCESS)
        *(rudnn_tensor_t *)t = cl; /* the harness's own descriptor (fz_call_t.args) */
}

/* ---- reading what the buffers hold ---------------------------------------------------------------- */

#define MAX_READ 12
static struct {
    rudnn_buffer_t b;
    uint8_t *raw;
    size_t bytes;
} g_read[MAX_READ];
static int g_nread;

static void reads_reset(void)
{
    for (int i = 0; i < g_nread; i++)
        free(g_read[i].raw);
    g_nread = 0;
}

/* The whole buffer of t (read once an input), through a queue of its context. */
static const uint8_t *buffer_bytes(const fz_call_t *c, const rudnn_tensor_t *t)
{
    for (int i = 0; i < g_nread; i++)
        if (g_read[i].b == t->buffer)
            return g_read[i].raw;
    if (g_nread == MAX_READ)
        fz_fail("harness: too many buffers to read", "buffer_read", RUDNN_STATUS_INTERNAL);
    const size_t bytes = rudnn_buffer_size(t->buffer);
    uint8_t *raw = malloc(bytes ? bytes : 1);
    if (!raw)
        fz_fail("harness: out of memory", "malloc", RUDNN_STATUS_ALLOC_FAILED);
    const rudnn_queue_t q = rudnn_buffer_context(t->buffer) == c->env->ctx ? c->env->q : c->env->q2;
    fz_require("buffer_read", rudnn_buffer_read(q, t->buffer, 0, raw, bytes));
    g_read[g_nread].b = t->buffer, g_read[g_nread].raw = raw, g_read[g_nread].bytes = bytes;
    g_nread++;
    return raw;
}

/* Element access through a valid view (an accepted call's). */
typedef struct view {
    const uint8_t *raw;
    rudnn_dtype_t dt;
    size_t es;
    int64_t base; /* element index of [0, 0, ...] */
    int64_t st[5];
    int rank;
} view_t;

static view_t view_of(const fz_call_t *c, const rudnn_tensor_t *t)
{
    view_t v;
    memset(&v, 0, sizeof v);
    v.raw = buffer_bytes(c, t);
    v.dt = t->dtype;
    v.es = rudnn_dtype_size(t->dtype);
    v.base = (int64_t)(t->offset / v.es);
    v.rank = t->rank;
    for (int i = 0; i < t->rank && i < 5; i++)
        v.st[i] = t->dims[i] == 1 ? 0 : t->strides[i];
    return v;
}

/* [i0, i1, sp...] of a rank 2 + d view (bias: rank 1, i1 unused) */
static int64_t elem_index(const view_t *v, int64_t i0, int64_t i1, const int64_t *sp, int d)
{
    int64_t e = v->base + i0 * v->st[0];
    if (v->rank > 1)
        e += i1 * v->st[1];
    for (int k = 0; k < d; k++)
        e += sp[k] * v->st[2 + k];
    return e;
}

static float load(const view_t *v, int64_t e)
{
    float f;
    rudnn_convert_to_f32(v->dt, v->raw + (size_t)e * v->es, &f, 1);
    return f;
}

static void unflat(int64_t i, const int64_t *box, int d, int64_t *at)
{
    for (int k = d - 1; k >= 0; k--) {
        at[k] = i % box[k];
        i /= box[k];
    }
}

static int64_t box_size(const int64_t *box, int d)
{
    int64_t n = 1;
    for (int k = 0; k < d; k++)
        n *= box[k];
    return n;
}

/* One output element's sum in FP64 with what bounds its FP32 evaluation. */
typedef struct acc {
    double sum, mag, slack; /* slack: terms with an FP32 denormal factor (a device may flush them) */
    int64_t terms;
    int nan;
} acc_t;

static int denormal(float v) { return v != 0.0f && fabsf(v) < FLT_MIN; }

static void add_term(acc_t *a, float u, float v)
{
    const double t = (double)u * (double)v;
    a->terms++;
    if (isnan(t)) {
        a->nan = 1;
        return;
    }
    a->sum += t, a->mag += fabs(t);
    if (denormal(u) || denormal(v))
        a->slack += fabs(t);
}

static void mismatch(const char *op, const char *what, const char *out, int64_t i, double want, float got,
                     double tol)
{
    fprintf(stderr, "fuzz: %s element %lld: expected %.9g (within %.3g), got %.9g\n", out, (long long)i, want, tol,
            (double)got);
    fz_fail(what, op, RUDNN_STATUS_SUCCESS);
}

/* got against a: NaN exactly where a term is; else within the FP32 bound and the dtype's rounding. */
static void check_element(const char *op, const char *out, rudnn_dtype_t dt, int64_t i, const acc_t *a, float got)
{
    if (a->nan) {
        if (!isnan(got))
            mismatch(op, "an output over a NaN term is not NaN", out, i, NAN, got, 0);
        return;
    }
    const double range = dt == RUDNN_F16 ? 6e4 : 1e37;
    if (!(a->mag <= range))
        return; /* FP32 (F16) may overflow on the way */
    const double eps = dt == RUDNN_F16 ? 0x1p-11 : dt == RUDNN_BF16 ? 0x1p-8 : 0.0;
    const double tol = (double)(a->terms + 2) * 0x1p-23 * a->mag + a->slack + (double)(a->terms + 2) * FLT_MIN +
                       eps * fabs(a->sum) + (dt == RUDNN_F16 ? 0x1p-24 : 0.0);
    if (isnan(got) || !(fabs((double)got - a->sum) <= tol))
        mismatch(op, "an output differs from the formula of convolution.h", out, i, a->sum, got, tol);
}

/* The input position p stride - pad + r dil in at; 0 in the padding. */
static int input_at(const int64_t *p, const int64_t *r, const rudnn_conv_options_t *o, const int64_t *S, int d,
                    int64_t *at)
{
    int in = 1;
    for (int q = 0; q < d; q++) {
        at[q] = p[q] * o->stride[q] - o->padding[q] + r[q] * o->dilation[q];
        in &= at[q] >= 0 && at[q] < S[q];
    }
    return in;
}

typedef struct call {
    rudnn_queue_t q;
    const rudnn_tensor_t *x, *w, *y, *bias; /* by role: x or dx, w or dw, y or dy, bias or dbias */
    rudnn_conv_options_t opts;
    int has_options;
    int strategy;
} call_t;

/* Every element of the outputs of an accepted call of direction dir. */
static void check_values(fz_call_t *c, const char *op, int dir, const call_t *k)
{
    const rudnn_conv_options_t *o = &k->opts;
    rudnn_conv_options_t def;
    if (!k->has_options) {
        rudnn_conv_options_init(&def);
        o = &def;
    }
    const int d = k->x->rank - 2;
    const int64_t N = k->x->dims[0], C = k->x->dims[1], K = k->w->dims[0], G = o->groups;
    const int64_t Cg = C / G, Kg = K / G;
    const int64_t *S = &k->x->dims[2], *R = &k->w->dims[2], *P = &k->y->dims[2];
    const view_t vx = view_of(c, k->x), vw = view_of(c, k->w), vy = view_of(c, k->y);
    view_t vb;
    memset(&vb, 0, sizeof vb);
    if (k->bias)
        vb = view_of(c, k->bias);
    const int64_t ns = box_size(S, d), nr = box_size(R, d), np = box_size(P, d);
    int64_t s[3], r[3], pp[3], at[3];
    const char *out = dir == RUDNN_CONV_FORWARD ? "y" : dir == RUDNN_CONV_DATA_BACKWARD ? "dx" : "dw";
    if (dir == RUDNN_CONV_FORWARD) {
        for (int64_t n = 0; n < N; n++)
            for (int64_t kk = 0; kk < K; kk++)
                for (int64_t pi = 0; pi < np; pi++) {
                    unflat(pi, P, d, pp);
                    const int64_t g = kk / Kg;
                    acc_t a = {0};
                    for (int64_t ch = 0; ch < Cg; ch++)
                        for (int64_t ri = 0; ri < nr; ri++) {
                            unflat(ri, R, d, r);
                            const float wv = load(&vw, elem_index(&vw, kk, ch, r, d));
                            const float xv = input_at(pp, r, o, S, d, at) ? load(&vx, elem_index(&vx, n, g * Cg + ch, at, d))
                                                                 : 0.0f;
                            add_term(&a, xv, wv);
                        }
                    if (k->bias)
                        add_term(&a, load(&vb, elem_index(&vb, kk, 0, NULL, 0)), 1.0f);
                    const int64_t e = elem_index(&vy, n, kk, pp, d);
                    check_element(op, out, k->y->dtype, e, &a, load(&vy, e));
                }
    } else if (dir == RUDNN_CONV_DATA_BACKWARD) {
        for (int64_t n = 0; n < N; n++)
            for (int64_t cc = 0; cc < C; cc++)
                for (int64_t si = 0; si < ns; si++) {
                    unflat(si, S, d, s);
                    const int64_t g = cc / Cg, ch = cc % Cg;
                    acc_t a = {0};
                    for (int64_t kk = 0; kk < Kg; kk++)
                        for (int64_t ri = 0; ri < nr; ri++) {
                            unflat(ri, R, d, r);
                            int lands = 1;
                            for (int q = 0; q < d && lands; q++) {
                                const int64_t num = s[q] + o->padding[q] - r[q] * o->dilation[q];
                                lands = num >= 0 && num % o->stride[q] == 0 && num / o->stride[q] < P[q];
                                pp[q] = lands ? num / o->stride[q] : 0;
                            }
                            if (!lands)
                                continue;
                            add_term(&a, load(&vy, elem_index(&vy, n, g * Kg + kk, pp, d)),
                                     load(&vw, elem_index(&vw, g * Kg + kk, ch, r, d)));
                        }
                    const int64_t e = elem_index(&vx, n, cc, s, d);
                    check_element(op, out, k->x->dtype, e, &a, load(&vx, e));
                }
    } else {
        for (int64_t kk = 0; kk < K; kk++) {
            const int64_t g = kk / Kg;
            for (int64_t ch = 0; ch < Cg; ch++)
                for (int64_t ri = 0; ri < nr; ri++) {
                    unflat(ri, R, d, r);
                    acc_t a = {0};
                    for (int64_t n = 0; n < N; n++)
                        for (int64_t pi = 0; pi < np; pi++) {
                            unflat(pi, P, d, pp);
                            const float xv = input_at(pp, r, o, S, d, at) ? load(&vx, elem_index(&vx, n, g * Cg + ch, at, d))
                                                                 : 0.0f;
                            add_term(&a, load(&vy, elem_index(&vy, n, kk, pp, d)), xv);
                        }
                    const int64_t e = elem_index(&vw, kk, ch, r, d);
                    check_element(op, out, k->w->dtype, e, &a, load(&vw, e));
                }
            if (k->bias) {
                acc_t a = {0};
                for (int64_t n = 0; n < N; n++)
                    for (int64_t pi = 0; pi < np; pi++) {
                        unflat(pi, P, d, pp);
                        add_term(&a, load(&vy, elem_index(&vy, n, kk, pp, d)), 1.0f);
                    }
                const int64_t e = elem_index(&vb, kk, 0, NULL, 0);
                check_element(op, "dbias", k->bias->dtype, e, &a, load(&vb, e));
            }
        }
    }
}

/* Bytes [first, last element] of a view (0 when empty). */
static void span_of(const rudnn_tensor_t *t, size_t *begin, size_t *end)
{
    *begin = *end = t->offset;
    if (rudnn_tensor_numel(t) == 0)
        return;
    uint64_t last = 0;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] > 1)
            last += (uint64_t)(t->dims[i] - 1) * (uint64_t)t->strides[i];
    *end = t->offset + (size_t)(last + 1) * rudnn_dtype_size(t->dtype);
}

/* convolution.h: outputs overlap no input and no other output, not even exactly. */
static void check_disjoint(const char *op, const rudnn_tensor_t *const *outs, int nouts,
                           const rudnn_tensor_t *const *ins, int nins)
{
    for (int i = 0; i < nouts; i++) {
        if (!outs[i])
            continue;
        size_t ob, oe;
        span_of(outs[i], &ob, &oe);
        for (int j = 0; j < nins + nouts; j++) {
            const rudnn_tensor_t *o = j < nins ? ins[j] : outs[j - nins];
            if (!o || o == outs[i] || o->buffer != outs[i]->buffer)
                continue;
            size_t ib, ie;
            span_of(o, &ib, &ie);
            if (ob < oe && ib < ie && ob < ie && ib < oe) {
                fprintf(stderr, "fuzz: output bytes [%zu, %zu) meet bytes [%zu, %zu) of another argument\n", ob, oe,
                        ib, ie);
                fz_fail("an accepted call's output overlaps an input or another output", op, RUDNN_STATUS_SUCCESS);
            }
        }
    }
}

/* The byte the harness left at `at` of t's buffer (fuzz_common.c's rule: the fill, or what
 * fz_write_input put there); -1 for a buffer not the harness's. */
static int expected_byte(const fz_call_t *c, rudnn_buffer_t b, size_t at)
{
    int k = -1;
    for (int i = 0; i < FZ_BUFFERS + FZ_FOREIGN_BUFFERS && k < 0; i++)
        if ((i < FZ_BUFFERS ? c->env->buf[i] : c->env->foreign[i - FZ_BUFFERS]) == b)
            k = i;
    if (k < 0)
        return -1;
    int v = c->fill[k];
    for (int i = 0; i < c->nwritten; i++)
        if (c->written[i].buffer == k && at >= c->written[i].offset && at - c->written[i].offset < c->written[i].bytes)
            v = c->written[i].data[at - c->written[i].offset];
    return v;
}

/* The bytes between a strided output's elements hold what they held. */
static void check_gaps(const fz_call_t *c, const char *op, const rudnn_tensor_t *t)
{
    if (!t || rudnn_tensor_is_contiguous(t) || rudnn_tensor_numel(t) == 0)
        return;
    static uint8_t covered[FZ_BUFFER_BYTES];
    size_t b, e;
    span_of(t, &b, &e);
    if (e > sizeof covered || expected_byte(c, t->buffer, 0) < 0)
        return;
    memset(covered + b, 0, e - b);
    const size_t es = rudnn_dtype_size(t->dtype);
    const int64_t n = rudnn_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        int64_t rest = i, off = 0;
        for (int k = t->rank - 1; k >= 0; k--) {
            off += (rest % t->dims[k]) * (t->dims[k] == 1 ? 0 : t->strides[k]);
            rest /= t->dims[k];
        }
        memset(covered + t->offset + (size_t)off * es, 1, es);
    }
    const uint8_t *now = buffer_bytes(c, t);
    for (size_t at = b; at < e; at++)
        if (!covered[at] && now[at] != expected_byte(c, t->buffer, at)) {
            fprintf(stderr, "fuzz: byte %zu, between elements of an output (bytes [%zu, %zu)), is 0x%02x, was 0x%02x\n",
                    at, b, e, now[at], expected_byte(c, t->buffer, at));
            fz_fail("an accepted call wrote between a strided output's elements", op, RUDNN_STATUS_SUCCESS);
        }
}

/* ---- the convolution ops and queries --------------------------------------------------------------- */

static rudnn_conv_tensors_t tensors_of(int dir, const call_t *k)
{
    rudnn_conv_tensors_t t;
    memset(&t, 0, sizeof t);
    if (dir == RUDNN_CONV_FORWARD)
        t.x = k->x, t.w = k->w, t.y = k->y, t.bias = k->bias;
    else if (dir == RUDNN_CONV_DATA_BACKWARD)
        t.dx = k->x, t.w = k->w, t.dy = k->y;
    else
        t.x = k->x, t.dw = k->w, t.dy = k->y, t.dbias = k->bias;
    return t;
}

static rudnn_status_t run_op(int dir, const call_t *k, rudnn_buffer_t ws, size_t ws_bytes)
{
    const rudnn_conv_options_t *o = k->has_options ? &k->opts : NULL;
    const rudnn_conv_strategy_t s = (rudnn_conv_strategy_t)k->strategy;
    if (dir == RUDNN_CONV_FORWARD)
        return rudnn_conv_forward(k->q, k->x, k->w, k->bias, o, s, ws, ws_bytes, k->y);
    if (dir == RUDNN_CONV_DATA_BACKWARD)
        return rudnn_conv_data_backward(k->q, k->y, k->w, o, s, ws, ws_bytes, k->x);
    return rudnn_conv_weight_backward(k->q, k->x, k->y, o, s, ws, ws_bytes, k->w, k->bias);
}

/* The kernel named is one of the backend's, of direction dir. */
static void check_listed(const char *op, const rudnn_conv_choice_t *ch, int dir, rudnn_context_t ctx)
{
    if (!ch->kernel || strncmp(ch->kernel, "convolution.", 12) != 0)
        fz_fail("an accepted resolve names no \"convolution.\" kernel", op, RUDNN_STATUS_SUCCESS);
    if (strcmp(ch->kernel, "convolution.none") == 0)
        return;
    int n = 0;
    fz_require("conv_kernel_count", rudnn_conv_kernel_count(ctx, &n));
    for (int i = 0; i < n; i++) {
        const char *name;
        rudnn_conv_strategy_t s;
        rudnn_conv_direction_t d;
        fz_require("conv_kernel_info", rudnn_conv_kernel_info(ctx, i, &name, &s, &d));
        if (strcmp(name, ch->kernel) == 0) {
            if ((int)d != dir || s != ch->strategy) {
                fprintf(stderr, "fuzz: resolved %s, strategy %d for direction %d; listed strategy %d, direction %d\n",
                        ch->kernel, (int)ch->strategy, dir, (int)s, (int)d);
                fz_fail("resolve named a kernel of another direction or strategy", op, RUDNN_STATUS_SUCCESS);
            }
            return;
        }
    }
    fprintf(stderr, "fuzz: resolved %s\n", ch->kernel);
    fz_fail("resolve named a kernel the backend does not list", op, RUDNN_STATUS_SUCCESS);
}

static void build_call(fz_call_t *c, const problem_t *p, int dir, int query, call_t *k)
{
    memset(k, 0, sizeof *k);
    const int64_t *sp_y = p->P;
    const fz_spec_t sx = spec_of(p, p->N, p->C, p->S), sw = spec_of(p, p->K, p->Cg, p->R),
                    sy = spec_of(p, p->N, p->K, sp_y);
    fz_spec_t sb;
    memset(&sb, 0, sizeof sb);
    sb.dtype = p->dt, sb.rank = 1, sb.dims[0] = p->K;
    k->q = fz_queue(c);
    /* a query writes nothing: its tensors count as inputs */
    k->x = fz_tensor(c, &sx, !query && dir == RUDNN_CONV_DATA_BACKWARD);
    k->w = fz_tensor(c, &sw, !query && dir == RUDNN_CONV_WEIGHT_BACKWARD);
    k->y = fz_tensor(c, &sy, !query && dir == RUDNN_CONV_FORWARD);
    if (dir == RUDNN_CONV_FORWARD)
        k->bias = fz_optional_tensor(c, &sb, !p->bias);
    else if (dir == RUDNN_CONV_WEIGHT_BACKWARD)
        k->bias = query ? fz_optional_tensor(c, &sb, !p->bias) : fz_optional_output(c, &sb, !p->bias);
    else
        (void)fz_next_slot(c);
    if (p->cl_xy)
        as_channels_last(k->x), as_channels_last(k->y);
    if (p->cl_w)
        as_channels_last(k->w);
    k->has_options = fz_object_choice(c, 2) == 0;
    rudnn_conv_options_init(&k->opts);
    for (int i = 0; i < 3; i++)
        k->opts.stride[i] = fz_i64(c, p->st[i]);
    for (int i = 0; i < 3; i++)
        k->opts.padding[i] = fz_i64(c, p->pad[i]);
    for (int i = 0; i < 3; i++)
        k->opts.dilation[i] = fz_i64(c, p->dil[i]);
    k->opts.groups = fz_i64(c, p->G);
    k->strategy = fz_int(c, p->strategy);
    /* the values: seeded writes into the inputs' first bytes (at most 64 each, two writes) */
    const rudnn_tensor_t *ins[2] = {dir == RUDNN_CONV_DATA_BACKWARD ? k->y : k->x,
                                    dir == RUDNN_CONV_WEIGHT_BACKWARD ? k->y : k->w};
    const int want[2] = {p->write1, p->write2};
    for (int j = 0; j < 2; j++) {
        if (!want[j] || !ins[j])
            continue;
        float v[FZ_WRITE_BYTES / 2];
        uint8_t raw[FZ_WRITE_BYTES];
        const size_t es = rudnn_dtype_size(p->dt), n = sizeof raw / es;
        for (size_t i = 0; i < n; i++)
            v[i] = (float)sin(0.9 * (p->seed + 1) + 1.7 * (double)i + 0.5 * j) * (j ? 0.5f : 2.0f);
        rudnn_convert_from_f32(p->dt, v, raw, n);
        fz_write_input(c, ins[j], raw, n * es);
    }
}

static void run_conv(fz_call_t *c, const problem_t *p, int op)
{
    const int query = op == OP_RESOLVE || op == OP_SIZE;
    const int dir = query ? p->qdir : op;
    const char *name = op_names[op];
    call_t k;
    build_call(c, p, dir, query, &k);
    const rudnn_conv_options_t *o = k.has_options ? &k.opts : NULL;
    const rudnn_conv_strategy_t s = (rudnn_conv_strategy_t)k.strategy;
    if (query) {
        const int null_result = fz_object_choice(c, 2), null_tensors = fz_object_choice(c, 2);
        const int qd = fz_int(c, dir);
        rudnn_conv_tensors_t t = tensors_of(dir, &k);
        if (fz_object_choice(c, 2)) { /* a field the direction leaves NULL */
            if (dir == RUDNN_CONV_FORWARD)
                t.dx = k.x;
            else if (dir == RUDNN_CONV_DATA_BACKWARD)
                t.x = k.x;
            else
                t.w = k.w;
        }
        rudnn_conv_choice_t ch, before;
        memset(&ch, CHOICE_BYTE, sizeof ch);
        before = ch;
        size_t bytes = BYTES_SENTINEL;
        const rudnn_conv_tensors_t *tp = null_tensors ? NULL : &t;
        const rudnn_status_t st =
            op == OP_RESOLVE
                ? fz_check(c, name, rudnn_conv_resolve(k.q, (rudnn_conv_direction_t)qd, tp, o, s, null_result ? NULL : &ch))
                : fz_check(c, name,
                           rudnn_conv_workspace_size(k.q, (rudnn_conv_direction_t)qd, tp, o, s,
                                                     null_result ? NULL : &bytes));
        if (st) {
            if (bytes != BYTES_SENTINEL || memcmp(&ch, &before, sizeof ch) != 0)
                fz_fail("a rejected query wrote its answer", name, st);
            return;
        }
        if (op == OP_SIZE && bytes == BYTES_SENTINEL)
            fz_fail("an accepted workspace_size gave no size", name, st);
        if (op == OP_RESOLVE)
            check_listed(name, &ch, qd, rudnn_queue_context(k.q));
        return;
    }
    /* the queries first, with the same arguments; then the op */
    const rudnn_conv_tensors_t t = tensors_of(dir, &k);
    rudnn_conv_choice_t ch;
    memset(&ch, 0, sizeof ch);
    size_t need = BYTES_SENTINEL;
    const rudnn_status_t st_resolve = rudnn_conv_resolve(k.q, (rudnn_conv_direction_t)dir, &t, o, s, &ch);
    char resolve_msg[1024];
    snprintf(resolve_msg, sizeof resolve_msg, "%s", rudnn_last_error());
    const rudnn_status_t st_size = rudnn_conv_workspace_size(k.q, (rudnn_conv_direction_t)dir, &t, o, s, &need);
    size_t ws_bytes = 0;
    rudnn_buffer_t ws = fz_workspace(c, st_size ? 0 : need, &ws_bytes);
    const rudnn_status_t st_op = run_op(dir, &k, ws, ws_bytes);
    char op_msg[1024], ran[256];
    snprintf(op_msg, sizeof op_msg, "%s", rudnn_last_error());
    snprintf(ran, sizeof ran, "%s", rudnn_last_kernel());
    const rudnn_status_t st = fz_check(c, name, st_op);
    if (st) {
        reads_reset();
        if (strstr(op_msg, "workspace"))
            return; /* the queries take no workspace */
        if (st_resolve != st || st_size != st) {
            fprintf(stderr, "fuzz: the op: %s \"%s\"; resolve: %s \"%s\"; workspace_size: %s\n",
                    rudnn_status_string(st), op_msg, rudnn_status_string(st_resolve), resolve_msg,
                    rudnn_status_string(st_size));
            fz_fail("the queries do not fail as the call does", name, st);
        }
        return;
    }
    if (st_resolve || st_size) {
        fprintf(stderr, "fuzz: resolve: %s \"%s\"; workspace_size: %s\n", rudnn_status_string(st_resolve), resolve_msg,
                rudnn_status_string(st_size));
        fz_fail("a query rejected what the call accepted", name, st);
    }
    check_listed("conv_resolve", &ch, dir, rudnn_queue_context(k.q));
    if (strcmp(ch.kernel, "convolution.none") != 0) {
        if (k.strategy == RUDNN_CONV_AUTOTUNE) { /* tuned by the call: asked again */
            fz_require("conv_resolve (after the call)",
                       rudnn_conv_resolve(k.q, (rudnn_conv_direction_t)dir, &t, o, s, &ch));
        }
        if (strcmp(ran, ch.kernel) != 0) {
            fprintf(stderr, "fuzz: resolve: %s (\"%s\"), ran: %s\n", ch.kernel, ch.reason, ran);
            fz_fail("resolve does not name the kernel that ran", name, st);
        }
    }
    const rudnn_tensor_t *outs[2], *ins[3];
    int nouts = 0, nins = 0;
    if (dir == RUDNN_CONV_FORWARD)
        outs[nouts++] = k.y, ins[nins++] = k.x, ins[nins++] = k.w, ins[nins++] = k.bias;
    else if (dir == RUDNN_CONV_DATA_BACKWARD)
        outs[nouts++] = k.x, ins[nins++] = k.y, ins[nins++] = k.w;
    else
        outs[nouts++] = k.w, outs[nouts++] = k.bias, ins[nins++] = k.x, ins[nins++] = k.y;
    check_disjoint(name, outs, nouts, ins, nins);
    for (int i = 0; i < nouts; i++)
        check_gaps(c, name, outs[i]);
    check_values(c, name, dir, &k);
    reads_reset();
}

/* ---- output_dims, channels_last, kernel_info ---------------------------------------------------------- */

/* The shape rule of convolution.h with its limits, without overflow: 1 and y when valid. */
static int expected_dims(int rank, const int64_t *x, const int64_t *w, const rudnn_conv_options_t *o, int64_t *y)
{
    if (rank < 3 || rank > 5)
        return 0;
    const int d = rank - 2;
    for (int i = 0; i < d; i++)
        if (o->stride[i] < 1 || o->stride[i] > RUDNN_CONV_MAX_PARAM || o->padding[i] < 0 ||
            o->padding[i] > RUDNN_CONV_MAX_PARAM || o->dilation[i] < 1 || o->dilation[i] > RUDNN_CONV_MAX_PARAM)
            return 0;
    if (o->groups < 1)
        return 0;
    for (int i = 0; i < rank; i++)
        if (x[i] < (i ? 1 : 0) || x[i] > RUDNN_CONV_MAX_DIM || w[i] < 1 || w[i] > RUDNN_CONV_MAX_DIM)
            return 0;
    int64_t cg_g;
    if (__builtin_mul_overflow(w[1], o->groups, &cg_g) || cg_g != x[1] || w[0] % o->groups)
        return 0;
    y[0] = x[0], y[1] = w[0];
    for (int i = 0; i < d; i++) {
        /* within the limits: at most 2^24 (2^31 - 1) + 1 and 2^31 + 2^25 */
        const int64_t span = o->dilation[i] * (w[2 + i] - 1) + 1, room = x[2 + i] + 2 * o->padding[i];
        if (room < span)
            return 0;
        y[2 + i] = (int64_t)((room - span) / o->stride[i] + 1);
    }
    return 1;
}

static void read_options(fz_call_t *c, const problem_t *p, rudnn_conv_options_t *o)
{
    rudnn_conv_options_init(o);
    for (int i = 0; i < 3; i++)
        o->stride[i] = fz_i64(c, p->st[i]);
    for (int i = 0; i < 3; i++)
        o->padding[i] = fz_i64(c, p->pad[i]);
    for (int i = 0; i < 3; i++)
        o->dilation[i] = fz_i64(c, p->dil[i]);
    o->groups = fz_i64(c, p->G);
}

static void run_output_dims(fz_call_t *c, const problem_t *p)
{
    const char *name = op_names[OP_OUTPUT_DIMS];
    const int rank = fz_int(c, 2 + p->d);
    /* the arrays hold 8 entries: a rank past 5 must be refused before any is read past 5 */
    int64_t x[8], w[8], y[8];
    const int64_t ix[5] = {p->N, p->C, p->S[0], p->S[1], p->S[2]}, iw[5] = {p->K, p->Cg, p->R[0], p->R[1], p->R[2]};
    for (int i = 0; i < 8; i++)
        x[i] = i < 5 ? fz_i64(c, ix[i]) : 1;
    for (int i = 0; i < 8; i++)
        w[i] = i < 5 ? fz_i64(c, iw[i]) : 1;
    for (int i = 0; i < 8; i++)
        y[i] = -77;
    const int has_options = fz_object_choice(c, 2) == 0;
    rudnn_conv_options_t o, def;
    read_options(c, p, &o);
    rudnn_conv_options_init(&def);
    const int null_in = fz_object_choice(c, 3), null_y = fz_object_choice(c, 2); /* 1: x_dims, 2: w_dims */
    int64_t want[8];
    const int ok = !null_in && !null_y && expected_dims(rank, x, w, has_options ? &o : &def, want);
    const rudnn_status_t st =
        fz_check(c, name, rudnn_conv_output_dims(rank, null_in == 1 ? NULL : x, null_in == 2 ? NULL : w,
                                                 has_options ? &o : NULL, null_y ? NULL : y));
    if (!ok != !!st) {
        fprintf(stderr, "fuzz: rank %d, x [%lld, %lld, %lld, %lld, %lld], w [%lld, %lld, %lld, %lld, %lld], groups "
                        "%lld: expected %s\n", rank, (long long)x[0], (long long)x[1], (long long)x[2], (long long)x[3],
                (long long)x[4], (long long)w[0], (long long)w[1], (long long)w[2], (long long)w[3], (long long)w[4],
                (long long)(has_options ? o.groups : 1), ok ? "success" : "a rejection");
        fz_fail("output_dims does not follow the shape rule of convolution.h", name, st);
    }
    for (int i = 0; i < 8; i++) {
        const int64_t expect = !st && i < rank ? want[i] : -77;
        if (y[i] != expect) {
            fprintf(stderr, "fuzz: y_dims[%d] = %lld, expected %lld\n", i, (long long)y[i], (long long)expect);
            fz_fail(st ? "a rejected output_dims wrote y_dims" : "output_dims gave other dims", name, st);
        }
    }
}

static void run_channels_last(fz_call_t *c, const problem_t *p)
{
    const char *name = op_names[OP_CHANNELS_LAST];
    const int rank = fz_int(c, 2 + p->d);
    int64_t dims[8];
    const int64_t id[5] = {p->N, p->C, p->S[0], p->S[1], p->S[2]};
    for (int i = 0; i < 8; i++)
        dims[i] = i < 5 ? fz_i64(c, id[i]) : 1;
    const rudnn_dtype_t dt = (rudnn_dtype_t)fz_int(c, (int)p->dt);
    const int which = fz_object_choice(c, 3);
    const rudnn_buffer_t b = which == 0 ? c->env->buf[0] : which == 1 ? NULL : c->env->foreign[0];
    const int64_t offset = fz_i64(c, 0);
    const int null_t = fz_object_choice(c, 2);
    rudnn_tensor_t t, before;
    memset(&t, 0x6b, sizeof t);
    before = t;
    const rudnn_status_t st =
        fz_check(c, name, rudnn_conv_channels_last(null_t ? NULL : &t, b, (size_t)offset, dt, rank, dims));
    if (st) {
        if (memcmp(&t, &before, sizeof t) != 0)
            fz_fail("a rejected channels_last wrote the descriptor", name, st);
        return;
    }
    if (rank < 3 || rank > 5 || t.rank != rank || t.dtype != dt || t.buffer != b || t.offset != (size_t)offset)
        fz_fail("channels_last accepted a rank outside 3..5 or changed the arguments", name, st);
    int64_t s = dims[1] ? dims[1] : 1;
    int bad = t.strides[1] != 1 || t.dims[0] != dims[0] || t.dims[1] != dims[1];
    for (int i = rank - 1; i >= 2; i--) {
        bad |= t.strides[i] != s || t.dims[i] != dims[i];
        s *= dims[i] ? dims[i] : 1;
    }
    bad |= t.strides[0] != s;
    if (bad)
        fz_fail("channels_last's strides are not those of [N, S.., C] memory", name, st);
}

static void run_kernel_info(fz_call_t *c, const problem_t *p)
{
    const char *name = op_names[OP_KERNEL_INFO];
    const int index = fz_int(c, (int)(p->Cg + p->Kg) % 6);
    const rudnn_context_t ctx = fz_object_choice(c, 2) ? NULL : c->env->ctx;
    const int null_which = fz_object_choice(c, 4); /* 0 none, 1 name, 2 strategy, 3 direction */
    const char *kname = (const char *)&null_which;
    rudnn_conv_strategy_t s = (rudnn_conv_strategy_t)-7;
    rudnn_conv_direction_t d = (rudnn_conv_direction_t)-7;
    const rudnn_status_t st =
        fz_check(c, name, rudnn_conv_kernel_info(ctx, index, null_which == 1 ? NULL : &kname,
                                                 null_which == 2 ? NULL : &s, null_which == 3 ? NULL : &d));
    if (st) {
        if (kname != (const char *)&null_which || (int)s != -7 || (int)d != -7)
            fz_fail("a rejected kernel_info wrote its results", name, st);
        return;
    }
    if (strncmp(kname, "convolution.", 12) != 0 || (s != RUDNN_CONV_DIRECT && s != RUDNN_CONV_IMPLICIT_GEMM) ||
        (unsigned)d > RUDNN_CONV_WEIGHT_BACKWARD)
        fz_fail("kernel_info gave a name, strategy or direction out of the family's", name, st);
}

/* Every direction and dtype with each strategy, so that the programs are built before the leak checks. */
void fz_warmup(void)
{
    for (uint8_t op = 0; op < 3; op++)
        for (uint8_t dt = 0; dt < 3; dt++)
            for (uint8_t s = 0; s < 3; s++)
                fz_run_header((const uint8_t[FZ_SLOT]){op, dt, 1, 0, 0, 1, 1, (uint8_t)(3 | s << 4), 4, 0, 0x05,
                                                       0x41, 0x01, 0x00});
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_call_t c;
    fz_begin(&c, data, size);
    const problem_t p = decode_problem(&c);
    const int op = fz_header_byte(&c, 0) % OP_COUNT;
    switch (op) {
    case OP_OUTPUT_DIMS: run_output_dims(&c, &p); break;
    case OP_CHANNELS_LAST: run_channels_last(&c, &p); break;
    case OP_KERNEL_INFO: run_kernel_info(&c, &p); break;
    default: run_conv(&c, &p, op); break;
    }
    return 0;
}
