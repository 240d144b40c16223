/* libFuzzer target of interpolation (rudnn/interpolation.h): rudnn_interpolate_forward and
 * rudnn_interpolate_backward with arbitrary descriptors (any dtype, rank, dims, strides, offsets,
 * another context, aliasing), options (mode, align_corners, scales: edge values, NaN, infinities,
 * raw doubles) and NULLs.
 *
 * Header bytes (fuzz_common.h has the slot format): 0 op (forward, backward); 1 dtype; 2 spatial
 * dims d - 1 (1..3); 3 N (1..2, 0 when the byte's low nibble is 15); 4 C (1..3, 0 likewise); 5, 6, 7
 * for dim i: the low nibble the input size S_i (1..6; 3D 1..4), the high nibble the output size O_i
 * (1..8; 3D 1..4); 8: bits 0-1 the mode, bit 2 align_corners (LINEAR and CUBIC only), bit 3 writes
 * the input's first 64 bytes (forward: x; backward: dy), bit 4 x, y, dy, dx as channels-last views,
 * bits 5-7 the written values' seed; 9: 2 bits a dim, the scale (0: from the sizes, 0.5, 1.7, 3);
 * 14, 15 the buffers' fill (fz_begin).
 *
 * Slots after the header, one each: 0 queue, 1 x (dy), 2 y (dx), 3 options present or NULL, 4 mode,
 * 5 align_corners (fz_int), 6..8 scales[0..2] (intended, or an edge double: 0, -0, -1, NaN, +-inf,
 * denormals, 1e-300, 1e300, the smallest scale whose reciprocal is finite in FP32, or the raw field's
 * bits as a double).
 *
 * Beyond fz_check's contract (rejected: a 1xx/2xx status naming the op, no byte written; accepted:
 * only the outputs written, the queues' work succeeds): an accepted call's output is disjoint from
 * its input (interpolation.h), the bytes between a strided output's elements are left alone, and
 * every output element matches an FP64 reference computed here from what the buffers hold: each
 * dim's source coordinate in FP32 as the header defines it (ratio, src, floor, clamps), the taps'
 * weights and every product and sum in double; within the FP32 rounding of the sum and of the
 * weights, and the dtype's rounding; NaN exactly where a term is NaN (a NaN input times any weight,
 * or a weight that is NaN: a coordinate past FP32's range); the backward's dx[q] the sum over every
 * output of weight(o, q) dy[o]. Elements whose terms, or the partial sums of a factorized evaluation
 * (a dim's row of taps before the other dims' weights, which may be 0, multiply it), may reach FP32's
 * (F16's) range are left alone. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/interpolation.h>

#include "fuzz_common.h"
#include "fuzz_values.h"

/* the coordinates round as the header's FP32 formulas do: no fused multiply-adds */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

enum { OP_FORWARD, OP_BACKWARD, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"interpolate_forward", "interpolate_backward"};

typedef struct problem {
    rudnn_dtype_t dt;
    int d, mode, align, write, cl, seed;
    int64_t N, C, S[3], O[3];
    double scales[3];
} problem_t;

static problem_t decode_problem(const fz_call_t *c)
{
    static const double scale_table[4] = {0.0, 0.5, 1.7, 3.0};
    problem_t p;
    memset(&p, 0, sizeof p);
    p.dt = fz_float_dtype(fz_header_byte(c, 1));
    p.d = 1 + fz_header_byte(c, 2) % 3;
    p.N = fz_small_dim(fz_header_byte(c, 3), 2, 1);
    p.C = fz_small_dim(fz_header_byte(c, 4), 3, 1);
    const uint8_t f = fz_header_byte(c, 8), sb = fz_header_byte(c, 9);
    p.mode = f & 3;
    p.align = p.mode >= RUDNN_INTERP_LINEAR ? (f >> 2) & 1 : 0;
    p.write = (f >> 3) & 1, p.cl = (f >> 4) & 1, p.seed = f >> 5;
    for (int i = 0; i < 3; i++) {
        p.S[i] = p.O[i] = 1;
        if (i >= p.d)
            continue;
        const uint8_t b = fz_header_byte(c, 5 + i);
        p.S[i] = 1 + (b & 15) % (p.d == 3 ? 4 : 6);
        p.O[i] = 1 + (b >> 4) % (p.d == 3 ? 4 : 8);
        p.scales[i] = scale_table[(sb >> (2 * i)) & 3];
    }
    return p;
}

static fz_spec_t spec_of(const problem_t *p, const int64_t *sp)
{
    fz_spec_t s;
    memset(&s, 0, sizeof s);
    s.dtype = p->dt;
    s.rank = 2 + p->d;
    s.dims[0] = p->N, s.dims[1] = p->C;
    for (int i = 0; i < p->d; i++)
        s.dims[2 + i] = sp[i];
    return s;
}

/* A double option from the next slot: intended, an edge value, or the raw field's bits. */
static double fuzz_double(fz_call_t *c, double intended)
{
    static const double edges[] = {0.0, -0.0, -1.0, NAN, INFINITY, -INFINITY, 4.9e-324, DBL_MIN, 1e-300, 1e300,
                                   3.0e-39 /* 1 / it overflows FP32 */, 2.95e-39 /* its reciprocal: FLT_MAX-ish */,
                                   1e-38, 1.0, 1e-45, 1e38, DBL_MAX, 0.3};
    const fz_slot_t s = fz_next_slot(c);
    if (s.mode < 0x80)
        return intended;
    if (s.pick & 0x80) {
        double v;
        memcpy(&v, &s.raw, sizeof v);
        return v;
    }
    return edges[s.pick % (sizeof edges / sizeof edges[0])];
}

/* ---- the values of an accepted call ------------------------------------------------------------------ */

static double cubic1(double x) { return ((-0.75 + 2.0) * x - (-0.75 + 3.0)) * x * x + 1.0; }
static double cubic2(double x) { return ((-0.75 * x - 5.0 * -0.75) * x + 8.0 * -0.75) * x - 4.0 * -0.75; }

/* The FP32 ratio of one dim (the header's r_i, or the align_corners step). */
static float ratio_of(const rudnn_interp_options_t *o, int i, int64_t S, int64_t O)
{
    if (o->mode >= RUDNN_INTERP_LINEAR && o->align_corners)
        return O > 1 ? (float)(S - 1) / (float)(O - 1) : 0.0f;
    if (o->scales[i] > 0.0)
        return (float)(1.0 / o->scales[i]);
    return (float)S / (float)O;
}

/* Output o's taps along one dim of S inputs: count, indices, weights (double, from the FP32 t). */
static int taps(int mode, int align, float r, int64_t S, int64_t o, int64_t *idx, double *w)
{
    const float last = (float)(S - 1);
    if (mode <= RUDNN_INTERP_NEAREST_EXACT) {
        const float s = mode == RUDNN_INTERP_NEAREST ? floorf((float)o * r) : floorf(((float)o + 0.5f) * r);
        idx[0] = s < last ? (int64_t)s : S - 1;
        w[0] = 1;
        return 1;
    }
    float src = align ? r * (float)o : r * ((float)o + 0.5f) - 0.5f;
    if (mode == RUDNN_INTERP_LINEAR) {
        if (src < 0.0f)
            src = 0.0f;
        const float fl = floorf(src);
        const double t = (double)src - (double)fl; /* inf - inf: NaN, as in FP32 */
        idx[0] = fl < last ? (int64_t)fl : S - 1;
        idx[1] = idx[0] < S - 1 ? idx[0] + 1 : idx[0];
        w[0] = 1.0 - t, w[1] = t;
        return 2;
    }
    const float fl = floorf(src);
    const double t = (double)src - (double)fl;
    /* clamped in float first (its taps clamp into 0 .. S - 1 all the same) */
    const float flc = fl < -3.0f ? -3.0f : fl > (float)(S + 2) ? (float)(S + 2) : fl;
    w[0] = cubic2(t + 1), w[1] = cubic1(t), w[2] = cubic1(1 - t), w[3] = cubic2(2 - t);
    for (int k = 0; k < 4; k++) {
        const int64_t i = (int64_t)flc - 1 + k;
        idx[k] = i < 0 ? 0 : i > S - 1 ? S - 1 : i;
    }
    return 4;
}

#define MAX_ELEMS (FZ_BUFFER_BYTES / 2)

/* Every element of the output of an accepted call: x [N, C, S..] (forward: the input; backward: dx,
 * the output), y [N, C, O..]. */
static void check_values(fz_call_t *c, const char *op, int backward, const rudnn_tensor_t *x,
                         const rudnn_tensor_t *y, const rudnn_interp_options_t *o)
{
    const int d = x->rank - 2;
    int64_t S[3], O[3];
    float r[3];
    for (int i = 0; i < 3; i++) {
        const int k = i - (3 - d);
        S[i] = k >= 0 ? x->dims[2 + k] : 1, O[i] = k >= 0 ? y->dims[2 + k] : 1;
        r[i] = k >= 0 ? ratio_of(o, k, S[i], O[i]) : 1.0f;
    }
    const int64_t N = x->dims[0], C = x->dims[1], ns = S[0] * S[1] * S[2], no = O[0] * O[1] * O[2];
    const int64_t nout = backward ? ns : no;
    if (nout > MAX_ELEMS)
        return;
    static fv_acc_t acc[MAX_ELEMS];
    /* the weights' own FP32 error: a few ulps of 1 per dim (the cubic polynomials), 2^-24 (linear) */
    const double werr = o->mode == RUDNN_INTERP_CUBIC ? 0x1p-19 : o->mode == RUDNN_INTERP_LINEAR ? 0x1p-21 : 0.0;
    const fv_view_t vx = fv_view_of(c, op, x), vy = fv_view_of(c, op, y);
    for (int64_t n = 0; n < N; n++)
        for (int64_t ch = 0; ch < C; ch++) {
            memset(acc, 0, (size_t)nout * sizeof *acc);
            for (int64_t oi = 0; oi < no; oi++) {
                const int64_t oo[3] = {oi / (O[1] * O[2]), oi / O[2] % O[1], oi % O[2]};
                int64_t idx[3][4];
                double w[3][4];
                int cnt[3];
                for (int i = 0; i < 3; i++)
                    cnt[i] = taps(o->mode, o->align_corners, r[i], S[i], oo[i], idx[i], w[i]);
                int64_t at[5] = {n, ch};
                for (int i = 0; i < d; i++)
                    at[2 + i] = oo[3 - d + i];
                const double yv = backward ? fv_load(&vy, fv_index(&vy, at, 2 + d)) : 0.0;
                for (int a = 0; a < cnt[0]; a++)
                    for (int b = 0; b < cnt[1]; b++)
                        for (int e = 0; e < cnt[2]; e++) {
                            const int64_t q[3] = {idx[0][a], idx[1][b], idx[2][e]};
                            const int64_t qi = (q[0] * S[1] + q[1]) * S[2] + q[2];
                            const double wt = w[0][a] * w[1][b] * w[2][e];
                            double v = yv;
                            if (!backward) {
                                int64_t xa[5] = {n, ch};
                                for (int i = 0; i < d; i++)
                                    xa[2 + i] = q[3 - d + i];
                                v = fv_load(&vx, fv_index(&vx, xa, 2 + d));
                            }
                            fv_acc_t *a = &acc[backward ? qi : oi];
                            fv_add_err(a, wt * v, fabs(v) * werr);
                            a->reach += 2 * fabs(v); /* the rows' partial sums, weights up to ~1.1 a dim */
                        }
            }
            const fv_view_t *vo = backward ? &vx : &vy;
            const int64_t *box = backward ? S : O;
            for (int64_t i = 0; i < nout; i++) {
                const int64_t p[3] = {i / (box[1] * box[2]), i / box[2] % box[1], i % box[2]};
                int64_t at[5] = {n, ch};
                for (int k = 0; k < d; k++)
                    at[2 + k] = p[3 - d + k];
                const int64_t e = fv_index(vo, at, 2 + d);
                fv_check_element(op, backward ? "dx" : "y", vo->dt, e, &acc[i], fv_load(vo, e),
                                 "an output differs from the formula of interpolation.h");
            }
        }
}

static void run_interp(fz_call_t *c, const problem_t *p, int op)
{
    const char *name = op_names[op];
    const int backward = op == OP_BACKWARD;
    const fz_spec_t sx = spec_of(p, p->S), sy = spec_of(p, p->O);
    const rudnn_queue_t q = fz_queue(c);
    const rudnn_tensor_t *in = fz_tensor(c, backward ? &sy : &sx, 0);
    const rudnn_tensor_t *out = fz_tensor(c, backward ? &sx : &sy, 1);
    if (p->cl)
        fv_channels_last(in), fv_channels_last(out);
    const int has_options = fz_object_choice(c, 2) == 0;
    rudnn_interp_options_t opts, def;
    rudnn_interp_options_init(&opts);
    rudnn_interp_options_init(&def);
    opts.mode = (rudnn_interp_mode_t)fz_int(c, p->mode);
    opts.align_corners = fz_int(c, p->align);
    for (int i = 0; i < 3; i++)
        opts.scales[i] = fuzz_double(c, p->scales[i]);
    if (p->write)
        fv_write_values(c, in, p->dt, p->seed, 0, 2.0f);
    const rudnn_interp_options_t *o = has_options ? &opts : NULL;
    const rudnn_status_t st = fz_check(c, name, backward ? rudnn_interpolate_backward(q, in, o, out)
                                                         : rudnn_interpolate_forward(q, in, o, out));
    if (st)
        return;
    const rudnn_tensor_t *outs[1] = {out}, *ins[1] = {in};
    fv_check_disjoint(name, outs, 1, ins, 1);
    fv_check_gaps(c, name, out);
    if (in->dims[0] && in->dims[1])
        check_values(c, name, backward, backward ? out : in, backward ? in : out, o ? o : &def);
    fv_reads_reset();
}

/* Both directions in every mode and dtype, so that the programs are built before the leak checks. */
void fz_warmup(void)
{
    for (uint8_t op = 0; op < OP_COUNT; op++)
        for (uint8_t dt = 0; dt < 3; dt++)
            for (uint8_t mode = 0; mode < 4; mode++)
                fz_run_header((const uint8_t[FZ_SLOT]){op, dt, 1, 1, 1, 0x32, 0x53, 0, (uint8_t)(mode | 8)});
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_call_t c;
    fz_begin(&c, data, size);
    const problem_t p = decode_problem(&c);
    run_interp(&c, &p, fz_header_byte(&c, 0) % OP_COUNT);
    return 0;
}
