/* libFuzzer target of pooling (rudnn/pooling.h): rudnn_pool_forward and rudnn_pool_backward with
 * arbitrary descriptors (any dtype, rank, dims, strides, offsets, another context, aliasing), options
 * (mode, ceil_mode, window, stride, padding, dilation: edge values and raw ones) and NULLs; and
 * rudnn_pool_output_dims with arbitrary values.
 *
 * Header bytes (fuzz_common.h has the slot format): 0 op (forward, backward, output_dims); 1 dtype;
 * 2 spatial dims d - 1 (1..3); 3 N (1..2, 0 when the byte's low nibble is 15); 4 C (1..3, 0 likewise);
 * 5, 6, 7 for dim i: the low nibble S_i (1..6; 3D: 1..4), bits 4-5 the window R_i (1..3), bits 6-7
 * the stride (1..3); 8: bits 0-1 the mode (mod 3), bit 2 ceil_mode, bit 3 indices (forward MAX) or x
 * given (the averages' backward), bit 4 writes the first input's first 64 bytes (forward: x;
 * backward: dy), bit 5 the second's (backward MAX: x), bit 6 x, y, dy, dx, indices as channels-last
 * views, bit 7 the written values' seed; 9 padding (2 bits a dim: 0..R_i / 2); 10 dilation (2 bits a
 * dim: 1..2; MAX only); 14, 15 the buffers' fill (fz_begin). A window wider than the padded input
 * gets R 1 there: the intended problem is always valid.
 *
 * Slots after the header, one each. forward: 0 queue, 1 x, 2 y, 3 indices (optional output);
 * backward: 0 queue, 1 x (optional: intended for MAX or with bit 3), 2 dy, 3 dx; then both: 4 options
 * present or NULL, 5 mode, 6 ceil_mode (fz_int), 7..9 window, 10..12 stride, 13..15 padding, 16..18
 * dilation (fz_i64). output_dims: 0 rank (fz_int), 1..5 x_dims (fz_i64), 6 options present, 7..20
 * the options as above, 21 x_dims NULL, 22 y_dims NULL.
 *
 * Beyond fz_check's contract (rejected: a 1xx/2xx status naming the op, no byte written; accepted:
 * only the outputs written, the queues' work succeeds): an accepted call's outputs are disjoint from
 * every input and from each other (pooling.h), the bytes between a strided output's elements are
 * left alone, and every output element matches an FP64 reference computed here from what the buffers
 * hold: MAX exactly (the first largest element in window order, NaN where the window holds one, -inf
 * where it holds no element of x) and its indices exactly (-1 for none); the averages within the FP32
 * rounding of their sums and the dtype's rounding, NaN exactly where a term is NaN; the backward's dx
 * the same, each dx element the sum of the dy it receives (MAX: where it is the window's argmax, found
 * again from x). Elements whose terms reach FP32's (F16's) range are left alone. A window of more than
 * 2^16 positions is not walked here (nor its values checked). output_dims: accepted exactly when the
 * shape rule of pooling.h and its limits hold (computed here without overflow), with those dims;
 * y_dims untouched otherwise. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/pooling.h>

#include "fuzz_common.h"
#include "fuzz_values.h"

enum { OP_FORWARD, OP_BACKWARD, OP_OUTPUT_DIMS, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"pool_forward", "pool_backward", "pool_output_dims"};

/* The valid problem the header describes. */
typedef struct problem {
    rudnn_dtype_t dt;
    int d, mode, ceil, extra, write1, write2, cl, seed;
    int64_t N, C, S[3], R[3], st[3], pad[3], dil[3], P[3];
} problem_t;

/* The shape rule of pooling.h for one dim (valid options): P, or 0 when below 1. */
static int64_t out_size(int64_t S, int64_t R, int64_t st, int64_t pad, int64_t dil, int ceil)
{
    const int64_t span = dil * (R - 1) + 1, num = S + 2 * pad - span + (ceil ? st - 1 : 0);
    int64_t P = (num >= 0 ? num / st : -((-num + st - 1) / st)) + 1;
    if (ceil && P >= 1 && (P - 1) * st >= S + pad)
        P--;
    return P < 1 ? 0 : P;
}

static problem_t decode_problem(const fz_call_t *c)
{
    problem_t p;
    memset(&p, 0, sizeof p);
    p.dt = fz_float_dtype(fz_header_byte(c, 1));
    p.d = 1 + fz_header_byte(c, 2) % 3;
    p.N = fz_small_dim(fz_header_byte(c, 3), 2, 1);
    p.C = fz_small_dim(fz_header_byte(c, 4), 3, 1);
    const uint8_t f = fz_header_byte(c, 8), pb = fz_header_byte(c, 9), db = fz_header_byte(c, 10);
    p.mode = (f & 3) % 3;
    p.ceil = (f >> 2) & 1, p.extra = (f >> 3) & 1, p.write1 = (f >> 4) & 1, p.write2 = (f >> 5) & 1;
    p.cl = (f >> 6) & 1, p.seed = (f >> 7) + 2 * (db >> 6);
    for (int i = 0; i < 3; i++) {
        p.S[i] = p.R[i] = p.st[i] = p.dil[i] = p.P[i] = 1;
        p.pad[i] = 0;
        if (i >= p.d)
            continue;
        const uint8_t b = fz_header_byte(c, 5 + i);
        p.S[i] = 1 + (b & 15) % (p.d == 3 ? 4 : 6);
        p.R[i] = 1 + ((b >> 4) & 3) % 3;
        p.st[i] = 1 + ((b >> 6) & 3) % 3;
        p.pad[i] = ((pb >> (2 * i)) & 3) % (p.R[i] / 2 + 1);
        p.dil[i] = p.mode == RUDNN_POOL_MAX ? 1 + ((db >> (2 * i)) & 3) % 2 : 1;
        if (p.dil[i] * (p.R[i] - 1) + 1 > p.S[i] + 2 * p.pad[i])
            p.R[i] = 1, p.dil[i] = 1, p.pad[i] = 0;
        p.P[i] = out_size(p.S[i], p.R[i], p.st[i], p.pad[i], p.dil[i], p.ceil);
    }
    return p;
}

static fz_spec_t spec_of(const problem_t *p, rudnn_dtype_t dt, const int64_t *sp)
{
    fz_spec_t s;
    memset(&s, 0, sizeof s);
    s.dtype = dt;
    s.rank = 2 + p->d;
    s.dims[0] = p->N, s.dims[1] = p->C;
    for (int i = 0; i < p->d; i++)
        s.dims[2 + i] = sp[i];
    return s;
}

static void read_options(fz_call_t *c, const problem_t *p, rudnn_pool_options_t *o)
{
    rudnn_pool_options_init(o);
    o->mode = (rudnn_pool_mode_t)fz_int(c, p->mode);
    o->ceil_mode = fz_int(c, p->ceil);
    for (int i = 0; i < 3; i++)
        o->window[i] = fz_i64(c, p->R[i]);
    for (int i = 0; i < 3; i++)
        o->stride[i] = fz_i64(c, p->st[i]);
    for (int i = 0; i < 3; i++)
        o->padding[i] = fz_i64(c, p->pad[i]);
    for (int i = 0; i < 3; i++)
        o->dilation[i] = fz_i64(c, p->dil[i]);
}

/* ---- the values of an accepted call ------------------------------------------------------------------ */

/* An accepted call's problem, padded to 3 spatial dims (leading dims of size 1). */
typedef struct box3 {
    int64_t N, C, S[3], P[3], R[3], st[3], pad[3], dil[3];
    int mode, d;
} box3_t;

static box3_t box_of(const rudnn_tensor_t *xs, const rudnn_tensor_t *ys, const rudnn_pool_options_t *o)
{
    box3_t b;
    b.d = xs->rank - 2;
    b.N = xs->dims[0], b.C = xs->dims[1], b.mode = o->mode;
    for (int i = 0; i < 3; i++) {
        const int k = i - (3 - b.d);
        b.S[i] = k >= 0 ? xs->dims[2 + k] : 1;
        b.P[i] = k >= 0 ? ys->dims[2 + k] : 1;
        b.R[i] = k >= 0 ? o->window[k] : 1;
        b.st[i] = k >= 0 ? o->stride[k] : 1;
        b.pad[i] = k >= 0 ? o->padding[k] : 0;
        b.dil[i] = k >= 0 ? o->dilation[k] : 1;
    }
    return b;
}

/* Element index of [n, c, q] (q over the padded 3 dims) in a view of rank 2 + d. */
static int64_t index_of(const fv_view_t *v, const box3_t *b, int64_t n, int64_t ch, const int64_t q[3])
{
    int64_t at[5] = {n, ch};
    for (int i = 0; i < b->d; i++)
        at[2 + i] = q[3 - b->d + i];
    return fv_index(v, at, 2 + b->d);
}

/* Output p's window over x (row n, ch): MAX's value and flat argmax (-1 none); the averages' sum (in
 * acc, each term x / divisor). */
static void window(const box3_t *b, const fv_view_t *vx, int64_t n, int64_t ch, const int64_t p[3], float *best,
                   int64_t *arg, fv_acc_t *acc)
{
    *best = -INFINITY, *arg = -1;
    int64_t inside = 0, padded = 1;
    for (int i = 0; i < 3; i++) {
        const int64_t lo = p[i] * b->st[i] - b->pad[i];
        int64_t hi = lo + b->R[i];
        if (hi > b->S[i] + b->pad[i])
            hi = b->S[i] + b->pad[i];
        padded *= hi - lo;
    }
    memset(acc, 0, sizeof *acc);
    /* the averages' divisor first (its terms are x / divisor) */
    for (int pass = b->mode == RUDNN_POOL_MAX ? 1 : 0; pass < 2; pass++) {
        const double div = b->mode == RUDNN_POOL_AVG_INCLUDE_PAD ? (double)padded : (double)inside;
        for (int64_t r0 = 0; r0 < b->R[0]; r0++)
            for (int64_t r1 = 0; r1 < b->R[1]; r1++)
                for (int64_t r2 = 0; r2 < b->R[2]; r2++) {
                    const int64_t r[3] = {r0, r1, r2};
                    int64_t q[3], in = 1;
                    for (int i = 0; i < 3; i++) {
                        q[i] = p[i] * b->st[i] - b->pad[i] + r[i] * b->dil[i];
                        in &= q[i] >= 0 && q[i] < b->S[i];
                    }
                    if (!in)
                        continue;
                    if (pass == 0) {
                        inside++;
                        continue;
                    }
                    const float v = fv_load(vx, index_of(vx, b, n, ch, q));
                    if (b->mode != RUDNN_POOL_MAX) {
                        fv_add(acc, v, 1.0 / div);
                        continue;
                    }
                    if (*arg < 0 || (!isnan(*best) && (isnan(v) || v > *best)))
                        *best = v, *arg = (q[0] * b->S[1] + q[1]) * b->S[2] + q[2];
                }
    }
}

static int64_t box_count(const int64_t v[3]) { return v[0] * v[1] * v[2]; }

static void unflat(int64_t i, const int64_t box[3], int64_t at[3])
{
    at[2] = i % box[2], i /= box[2];
    at[1] = i % box[1], at[0] = i / box[1];
}

#define MAX_WINDOW ((int64_t)1 << 16)
#define MAX_DX (FZ_BUFFER_BYTES / 2)

static void check_forward(fz_call_t *c, const char *op, const rudnn_tensor_t *x, const rudnn_tensor_t *y,
                          const rudnn_tensor_t *idx, const rudnn_pool_options_t *o)
{
    const box3_t b = box_of(x, y, o);
    if (box_count(b.R) > MAX_WINDOW)
        return;
    const fv_view_t vx = fv_view_of(c, op, x), vy = fv_view_of(c, op, y);
    fv_view_t vi;
    memset(&vi, 0, sizeof vi);
    if (idx)
        vi = fv_view_of(c, op, idx);
    const int64_t np = box_count(b.P);
    for (int64_t n = 0; n < b.N; n++)
        for (int64_t ch = 0; ch < b.C; ch++)
            for (int64_t pi = 0; pi < np; pi++) {
                int64_t p[3], arg;
                unflat(pi, b.P, p);
                float best;
                fv_acc_t a;
                window(&b, &vx, n, ch, p, &best, &arg, &a);
                const int64_t e = index_of(&vy, &b, n, ch, p);
                const float got = fv_load(&vy, e);
                if (b.mode != RUDNN_POOL_MAX) {
                    fv_check_element(op, "y", y->dtype, e, &a, got, "an average differs from the rule of pooling.h");
                    continue;
                }
                if (!(got == best || (isnan(got) && isnan(best)))) {
                    fprintf(stderr, "fuzz: y element %lld: expected %.9g (argmax %lld), got %.9g\n", (long long)e,
                            (double)best, (long long)arg, (double)got);
                    fz_fail("a max differs from the rule of pooling.h", op, RUDNN_STATUS_SUCCESS);
                }
                if (idx) {
                    const int64_t ie = index_of(&vi, &b, n, ch, p), gi = fv_load_int(&vi, ie);
                    if (gi != arg) {
                        fprintf(stderr, "fuzz: indices element %lld: expected %lld, got %lld\n", (long long)ie,
                                (long long)arg, (long long)gi);
                        fz_fail("an index differs from the first argmax in window order", op, RUDNN_STATUS_SUCCESS);
                    }
                }
            }
}

static void check_backward(fz_call_t *c, const char *op, const rudnn_tensor_t *x, const rudnn_tensor_t *dy,
                           const rudnn_tensor_t *dx, const rudnn_pool_options_t *o)
{
    const box3_t b = box_of(dx, dy, o);
    const int64_t ns = box_count(b.S), np = box_count(b.P);
    if (box_count(b.R) > MAX_WINDOW || b.N * b.C * ns > MAX_DX)
        return;
    static fv_acc_t acc[MAX_DX];
    memset(acc, 0, (size_t)(b.N * b.C * ns) * sizeof *acc);
    const fv_view_t vdy = fv_view_of(c, op, dy), vdx = fv_view_of(c, op, dx);
    fv_view_t vx;
    memset(&vx, 0, sizeof vx);
    if (b.mode == RUDNN_POOL_MAX)
        vx = fv_view_of(c, op, x);
    for (int64_t n = 0; n < b.N; n++)
        for (int64_t ch = 0; ch < b.C; ch++) {
            fv_acc_t *row = acc + (n * b.C + ch) * ns;
            for (int64_t pi = 0; pi < np; pi++) {
                int64_t p[3], arg;
                unflat(pi, b.P, p);
                const float g = fv_load(&vdy, index_of(&vdy, &b, n, ch, p));
                if (b.mode == RUDNN_POOL_MAX) {
                    float best;
                    fv_acc_t unused;
                    window(&b, &vx, n, ch, p, &best, &arg, &unused);
                    if (arg >= 0)
                        fv_add(&row[arg], g, 1.0);
                    continue;
                }
                /* the averages: every q of the window inside x gets dy / divisor */
                int64_t inside = 0, padded = 1;
                for (int pass = 0; pass < 2; pass++) {
                    const double div = b.mode == RUDNN_POOL_AVG_INCLUDE_PAD ? (double)padded : (double)inside;
                    for (int64_t ri = 0; ri < box_count(b.R); ri++) {
                        int64_t r[3], q[3], in = 1;
                        unflat(ri, b.R, r);
                        for (int i = 0; i < 3; i++) {
                            q[i] = p[i] * b.st[i] - b.pad[i] + r[i];
                            in &= q[i] >= 0 && q[i] < b.S[i];
                        }
                        if (!in)
                            continue;
                        if (pass == 0)
                            inside++;
                        else
                            fv_add(&row[(q[0] * b.S[1] + q[1]) * b.S[2] + q[2]], g, 1.0 / div);
                    }
                    if (pass == 0)
                        for (int i = 0; i < 3; i++) {
                            const int64_t lo = p[i] * b.st[i] - b.pad[i];
                            int64_t hi = lo + b.R[i];
                            if (hi > b.S[i] + b.pad[i])
                                hi = b.S[i] + b.pad[i];
                            padded *= hi - lo;
                        }
                }
            }
            for (int64_t qi = 0; qi < ns; qi++) {
                int64_t q[3];
                unflat(qi, b.S, q);
                const int64_t e = index_of(&vdx, &b, n, ch, q);
                fv_check_element(op, "dx", dx->dtype, e, &row[qi], fv_load(&vdx, e),
                                 "a dx element differs from the rule of pooling.h");
            }
        }
}

/* ---- the ops ------------------------------------------------------------------------------------------- */

static void run_pool(fz_call_t *c, const problem_t *p, int op)
{
    const char *name = op_names[op];
    const int backward = op == OP_BACKWARD;
    const fz_spec_t sx = spec_of(p, p->dt, p->S), sy = spec_of(p, p->dt, p->P), si = spec_of(p, RUDNN_I64, p->P);
    const rudnn_queue_t q = fz_queue(c);
    const rudnn_tensor_t *x, *y, *third;
    if (!backward) {
        x = fz_tensor(c, &sx, 0);
        y = fz_tensor(c, &sy, 1);
        third = fz_optional_output(c, &si, !(p->mode == RUDNN_POOL_MAX && p->extra));
    } else {
        x = fz_optional_tensor(c, &sx, !(p->mode == RUDNN_POOL_MAX || p->extra));
        y = fz_tensor(c, &sy, 0);
        third = fz_tensor(c, &sx, 1);
    }
    if (p->cl)
        fv_channels_last(x), fv_channels_last(y), fv_channels_last(third);
    const int has_options = fz_object_choice(c, 2) == 0;
    rudnn_pool_options_t opts, def;
    read_options(c, p, &opts);
    rudnn_pool_options_init(&def);
    const rudnn_pool_options_t *o = has_options ? &opts : NULL;
    if (p->write1)
        fv_write_values(c, backward ? y : x, p->dt, p->seed, 0, 2.0f);
    if (p->write2 && backward)
        fv_write_values(c, x, p->dt, p->seed, 1, 2.0f);
    const rudnn_status_t st = fz_check(c, name, backward ? rudnn_pool_backward(q, x, y, o, third)
                                                         : rudnn_pool_forward(q, x, o, y, third));
    if (st)
        return;
    const rudnn_pool_options_t *eff = o ? o : &def;
    if (!backward) {
        const rudnn_tensor_t *outs[2] = {y, third}, *ins[1] = {x};
        fv_check_disjoint(name, outs, 2, ins, 1);
        fv_check_gaps(c, name, y);
        fv_check_gaps(c, name, third);
        if (x->dims[0] && x->dims[1])
            check_forward(c, name, x, y, third, eff);
    } else {
        const rudnn_tensor_t *outs[1] = {third}, *ins[2] = {x, y};
        fv_check_disjoint(name, outs, 1, ins, 2);
        fv_check_gaps(c, name, third);
        if (third->dims[0] && third->dims[1])
            check_backward(c, name, x, y, third, eff);
    }
    fv_reads_reset();
}

/* The shape rule of pooling.h with its limits, without overflow: 1 and y when valid. */
static int expected_dims(int rank, const int64_t *x, const rudnn_pool_options_t *o, int64_t *y)
{
    if (rank < 3 || rank > 5)
        return 0;
    const int d = rank - 2;
    if ((unsigned)o->mode > RUDNN_POOL_AVG_EXCLUDE_PAD || (o->ceil_mode != 0 && o->ceil_mode != 1))
        return 0;
    for (int i = 0; i < d; i++) {
        const int64_t v[3] = {o->window[i], o->stride[i], o->dilation[i]};
        for (int j = 0; j < 3; j++)
            if (v[j] < 1 || v[j] > RUDNN_POOL_MAX_PARAM)
                return 0;
        if (o->padding[i] < 0 || o->padding[i] > o->window[i] / 2)
            return 0;
        if (o->mode != RUDNN_POOL_MAX && o->dilation[i] != 1)
            return 0;
    }
    for (int i = 0; i < rank; i++)
        if (x[i] < (i < 2 ? 0 : 1) || x[i] > RUDNN_POOL_MAX_DIM)
            return 0;
    y[0] = x[0], y[1] = x[1];
    for (int i = 0; i < d; i++) {
        /* within the limits: S + 2 pad <= 2^31 + 2^24, span <= 2^48 */
        const int64_t P = out_size(x[2 + i], o->window[i], o->stride[i], o->padding[i], o->dilation[i], o->ceil_mode);
        if (P < 1)
            return 0;
        y[2 + i] = P;
    }
    return 1;
}

static void run_output_dims(fz_call_t *c, const problem_t *p)
{
    const char *name = op_names[OP_OUTPUT_DIMS];
    const int rank = fz_int(c, 2 + p->d);
    /* the arrays hold 8 entries: a rank past 5 must be refused before any is read past 5 */
    int64_t x[8], y[8], want[8];
    const int64_t ix[5] = {p->N, p->C, p->S[0], p->S[1], p->S[2]};
    for (int i = 0; i < 8; i++)
        x[i] = i < 5 ? fz_i64(c, ix[i]) : 1;
    for (int i = 0; i < 8; i++)
        y[i] = -77;
    const int has_options = fz_object_choice(c, 2) == 0;
    rudnn_pool_options_t o, def;
    read_options(c, p, &o);
    rudnn_pool_options_init(&def);
    const int null_x = fz_object_choice(c, 2), null_y = fz_object_choice(c, 2);
    const int ok = !null_x && !null_y && expected_dims(rank, x, has_options ? &o : &def, want);
    const rudnn_status_t st = fz_check(
        c, name, rudnn_pool_output_dims(rank, null_x ? NULL : x, has_options ? &o : NULL, null_y ? NULL : y));
    if (!ok != !!st) {
        fprintf(stderr, "fuzz: rank %d, x [%lld, %lld, %lld, %lld, %lld], mode %d: expected %s\n", rank,
                (long long)x[0], (long long)x[1], (long long)x[2], (long long)x[3], (long long)x[4],
                (int)(has_options ? o.mode : def.mode), ok ? "success" : "a rejection");
        fz_fail("output_dims does not follow the shape rule of pooling.h", name, st);
    }
    for (int i = 0; i < 8; i++) {
        const int64_t expect = !st && i < rank ? want[i] : -77;
        if (y[i] != expect) {
            fprintf(stderr, "fuzz: y_dims[%d] = %lld, expected %lld\n", i, (long long)y[i], (long long)expect);
            fz_fail(st ? "a rejected output_dims wrote y_dims" : "output_dims gave other dims", name, st);
        }
    }
}

/* Both directions in every mode and dtype, so that the programs are built before the leak checks. */
void fz_warmup(void)
{
    for (uint8_t op = 0; op < 2; op++)
        for (uint8_t dt = 0; dt < 3; dt++)
            for (uint8_t mode = 0; mode < 3; mode++)
                fz_run_header((const uint8_t[FZ_SLOT]){op, dt, 1, 1, 1, 0x14, 0x15, 0, (uint8_t)(mode | 8), 0x05});
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_call_t c;
    fz_begin(&c, data, size);
    const problem_t p = decode_problem(&c);
    const int op = fz_header_byte(&c, 0) % OP_COUNT;
    if (op == OP_OUTPUT_DIMS)
        run_output_dims(&c, &p);
    else
        run_pool(&c, &p, op);
    return 0;
}
