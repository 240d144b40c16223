/* libFuzzer target of grid sampling (rudnn/grid_sample.h): rudnn_grid_sample_forward,
 * rudnn_grid_sample_backward and rudnn_grid_sample_backward_workspace_size with arbitrary descriptors
 * (any dtype, rank, dims, strides, offsets, another context, aliasing), options (mode, padding,
 * align_corners: edge values), NULL outputs and workspaces, and grids of any values (inside, outside,
 * far outside, huge, NaN: the buffers' fill and seeded writes).
 *
 * Header bytes (fuzz_common.h has the slot format): 0 op (forward, backward, workspace_size); 1 dtype;
 * 2 bit 0: 3D (else 2D); 3 N (1..2, 0 when the byte's low nibble is 15); 4 C (1..3, 0 likewise); 5, 6,
 * 7 for x's spatial dim i (D, H, W; 2D: H, W): the low nibble the input size (1..5; 3D 1..4), the
 * high nibble the grid's (1..4; 3D 1..3); 8: bits 0-1 the mode (mod 3; BICUBIC in 3D becomes
 * BILINEAR), bits 2-3 the padding (mod 3), bit 4 align_corners, bit 5 dx, bit 6 dgrid (the backward:
 * dx when neither), bit 7 x, y, dy, dx as channels-last views; 9: bit 0 writes the grid's first 64
 * bytes, bit 1 writes x's (bit 5: dy's instead), bits 2-4 the values' seed, bits 6-7 the written
 * coordinates' span (1.5, 0.9, 4, 300); 14, 15 the buffers' fill (fz_begin).
 *
 * Slots after the header, one each. forward: 0 queue, 1 x, 2 grid, 3 y, 4 options present or NULL, 5
 * mode, 6 padding, 7 align_corners (fz_int). backward and workspace_size: 0 queue, 1 x, 2 grid, 3 dy,
 * 4 dx, 5 dgrid (optional outputs), 6 options present, 7 mode, 8 padding, 9 align_corners, 10 the
 * workspace (backward: fz_workspace, intended NULL; workspace_size: bytes NULL).
 *
 * Beyond fz_check's contract (rejected: a 1xx/2xx status naming the op, no byte written; accepted:
 * only the outputs written, the queues' work succeeds): the backward's workspace_size, asked first
 * with the same arguments, fails with the call's status where the call fails for anything but its
 * workspace and succeeds where it succeeds; a rejected query leaves *bytes alone. An accepted call's
 * outputs are disjoint from every input and from each other (grid_sample.h), the bytes between a
 * strided output's elements are left alone, and every output element matches an FP64 reference
 * computed here from what the buffers hold: each point's coordinates, padding (clip, reflection, the
 * safe range: -100) and taps in FP32 as the header defines them; weights, their derivatives, products
 * and sums in double; within the FP32 rounding of the sums and of the weights, and the dtype's
 * rounding; NaN exactly where a term is NaN (BILINEAR and NEAREST skip a tap outside x; BICUBIC
 * multiplies its 0 by the weight, so that a NaN weight gives NaN, and in dgrid by dy as well, as
 * PyTorch's). dx: the sum over the points and taps that read each x element (zeros where none
 * does); dgrid: the derivative of sum(dy * y) as the header describes
 * (NEAREST: 0 times the products; BORDER and REFLECTION through their clipping, 0 at and past a
 * clipped border; BICUBIC through the unnormalization only), zeros when C = 0. A NaN coordinate
 * reflects as the x86 conversion of NaN to int makes it (an even number of reflections: PyTorch's
 * CPU code and the OpenCL kernel alike). Elements whose terms (or dy x products) reach FP32's (F16's)
 * range are left alone. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/grid_sample.h>

#include "fuzz_common.h"
#include "fuzz_values.h"

/* the coordinates round as the header's FP32 formulas do: no fused multiply-adds */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

enum { OP_FORWARD, OP_BACKWARD, OP_SIZE, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"grid_sample_forward", "grid_sample_backward",
                                               "grid_sample_backward_workspace_size"};

#define BYTES_SENTINEL ((size_t)0x5eed1)

typedef struct problem {
    rudnn_dtype_t dt;
    int d, mode, padding, align, dx, dgrid, cl, write_grid, write_values, values_to_dy, seed;
    int64_t N, C, S[3], P[3];
    float span;
} problem_t;

static problem_t decode_problem(const fz_call_t *c)
{
    static const float spans[4] = {1.5f, 0.9f, 4.0f, 300.0f};
    problem_t p;
    memset(&p, 0, sizeof p);
    p.dt = fz_float_dtype(fz_header_byte(c, 1));
    p.d = 2 + (fz_header_byte(c, 2) & 1);
    p.N = fz_small_dim(fz_header_byte(c, 3), 2, 1);
    p.C = fz_small_dim(fz_header_byte(c, 4), 3, 1);
    for (int i = 0; i < p.d; i++) {
        const uint8_t b = fz_header_byte(c, 5 + i);
        p.S[i] = 1 + (b & 15) % (p.d == 3 ? 4 : 5);
        p.P[i] = 1 + (b >> 4) % (p.d == 3 ? 3 : 4);
    }
    const uint8_t f = fz_header_byte(c, 8), w = fz_header_byte(c, 9);
    p.mode = (f & 3) % 3;
    if (p.d == 3 && p.mode == RUDNN_GRID_SAMPLE_BICUBIC)
        p.mode = RUDNN_GRID_SAMPLE_BILINEAR;
    p.padding = ((f >> 2) & 3) % 3;
    p.align = (f >> 4) & 1, p.dx = (f >> 5) & 1, p.dgrid = (f >> 6) & 1, p.cl = f >> 7;
    if (!p.dx && !p.dgrid)
        p.dx = 1;
    p.write_grid = w & 1, p.write_values = (w >> 1) & 1, p.values_to_dy = (w >> 5) & 1;
    p.seed = (w >> 2) & 7;
    p.span = spans[w >> 6];
    return p;
}

static fz_spec_t spec5(rudnn_dtype_t dt, int rank, const int64_t *dims)
{
    fz_spec_t s;
    memset(&s, 0, sizeof s);
    s.dtype = dt;
    s.rank = rank;
    for (int i = 0; i < rank; i++)
        s.dims[i] = dims[i];
    return s;
}

/* ---- the header's coordinate rules, in FP32 ------------------------------------------------------------ */

static float clip(float v, int64_t S)
{
    const float m = v < 0.0f ? 0.0f : v;
    return m < (float)(S - 1) ? m : (float)(S - 1);
}

/* reflected over [lo / 2, hi / 2]; *odd: the reflections' parity (NaN and infinities: even, as x86
 * converts them to INT_MIN) */
static float reflect(float in, float twice_lo, float twice_hi, int *odd)
{
    *odd = 0;
    if (twice_lo == twice_hi)
        return 0.0f;
    const float mn = twice_lo / 2.0f, span = (twice_hi - twice_lo) / 2.0f;
    in = fabsf(in - mn);
    const float extra = fmodf(in, span), flips = floorf(in / span);
    *odd = fmodf(flips, 2.0f) == 1.0f;
    return *odd ? span - extra + mn : extra + mn;
}

static float safe(float c) { return (!isfinite(c) || c > (float)INT_MAX - 1.0f || c < (float)INT_MIN) ? -100.0f : c; }

static float pad_coord(float c, int64_t S, int padding, int align)
{
    int odd;
    if (padding == RUDNN_GRID_SAMPLE_BORDER)
        c = clip(c, S);
    else if (padding == RUDNN_GRID_SAMPLE_REFLECTION)
        c = clip(align ? reflect(c, 0.0f, 2.0f * (float)(S - 1), &odd)
                       : reflect(c, -1.0f, 2.0f * (float)S - 1.0f, &odd),
                 S);
    return safe(c);
}

/* d padded / d unnormalized (bilinear): 0 at and past a clipped border; the reflections' sign */
static double pad_slope(float c, int64_t S, int padding, int align)
{
    if (padding == RUDNN_GRID_SAMPLE_ZEROS)
        return 1.0;
    double m = 1.0;
    if (padding == RUDNN_GRID_SAMPLE_REFLECTION) {
        const float lo = align ? 0.0f : -1.0f, hi = align ? 2.0f * (float)(S - 1) : 2.0f * (float)S - 1.0f;
        if (lo == hi)
            return 0.0;
        if (c - lo / 2.0f < 0.0f)
            m = -m;
        int odd;
        c = reflect(c, lo, hi, &odd);
        if (odd)
            m = -m;
    }
    return c <= 0.0f || c >= (float)(S - 1) ? 0.0 : m;
}

static double cubic1(double x) { return ((-0.75 + 2.0) * x - (-0.75 + 3.0)) * x * x + 1.0; }
static double cubic2(double x) { return ((-0.75 * x - 5.0 * -0.75) * x + 8.0 * -0.75) * x - 4.0 * -0.75; }
static double cubic1_d(double x) { return (3.0 * (-0.75 + 2.0) * x - 2.0 * (-0.75 + 3.0)) * x; }
static double cubic2_d(double x) { return (3.0 * -0.75 * x - 10.0 * -0.75) * x + 8.0 * -0.75; }

/* One dim's taps for coordinate g over S inputs: count, indices (-1: none), weights, d weight / d g. */
static int dim_taps(const rudnn_grid_sample_options_t *o, float g, int64_t S, int64_t *idx, double *w, double *dw)
{
    const int align = o->align_corners;
    const float u = align ? ((g + 1.0f) / 2.0f) * (float)(S - 1) : ((g + 1.0f) * (float)S - 1.0f) / 2.0f;
    const double unslope = align ? (double)(S - 1) / 2.0 : (double)S / 2.0;
    if (o->mode == RUDNN_GRID_SAMPLE_BICUBIC) {
        const float fl = floorf(u);
        const double t = (double)u - (double)fl;
        w[0] = cubic2(t + 1), w[1] = cubic1(t), w[2] = cubic1(1 - t), w[3] = cubic2(2 - t);
        dw[0] = cubic2_d(t + 1), dw[1] = cubic1_d(t), dw[2] = -cubic1_d(1 - t), dw[3] = -cubic2_d(2 - t);
        for (int k = 0; k < 4; k++) {
            const float at = pad_coord(fl - 1.0f + (float)k, S, o->padding, align);
            const int64_t i = (int64_t)at;
            idx[k] = i >= 0 && i < S ? i : -1;
            dw[k] *= unslope;
        }
        return 4;
    }
    const float i = pad_coord(u, S, o->padding, align);
    if (o->mode == RUDNN_GRID_SAMPLE_NEAREST) {
        const int64_t r = (int64_t)nearbyintf(i);
        idx[0] = r >= 0 && r < S ? r : -1;
        w[0] = 1, dw[0] = 0;
        return 1;
    }
    const float fl = floorf(i);
    const double t = (double)i - (double)fl, slope = unslope * pad_slope(u, S, o->padding, align);
    const int64_t i0 = (int64_t)fl;
    idx[0] = i0 >= 0 && i0 < S ? i0 : -1;
    idx[1] = i0 + 1 >= 0 && i0 + 1 < S ? i0 + 1 : -1;
    w[0] = 1 - t, w[1] = t;
    dw[0] = -slope, dw[1] = slope;
    return 2;
}

/* ---- the values of an accepted call -------------------------------------------------------------------- */

#define MAX_ELEMS (FZ_BUFFER_BYTES / 2)

typedef struct call {
    rudnn_queue_t q;
    const rudnn_tensor_t *x, *grid, *y, *dx, *dgrid; /* y: forward's y or the backward's dy */
    rudnn_grid_sample_options_t opts;
    int has_options;
} call_t;

/* [n, c, spatial...] of a rank 2 + d view, the spatial index over the padded 3 dims. */
static int64_t index_of(const fv_view_t *v, int d, int64_t n, int64_t ch, const int64_t q[3])
{
    int64_t at[5] = {n, ch};
    for (int i = 0; i < d; i++)
        at[2 + i] = q[3 - d + i];
    return fv_index(v, at, 2 + d);
}

static void check_values(fz_call_t *c, const char *op, int backward, const call_t *k)
{
    rudnn_grid_sample_options_t def;
    rudnn_grid_sample_options_init(&def);
    const rudnn_grid_sample_options_t *o = k->has_options ? &k->opts : &def;
    const int d = k->x->rank - 2;
    int64_t S[3], P[3];
    for (int i = 0; i < 3; i++) {
        const int j = i - (3 - d);
        S[i] = j >= 0 ? k->x->dims[2 + j] : 1, P[i] = j >= 0 ? k->grid->dims[1 + j] : 1;
    }
    const int64_t N = k->x->dims[0], C = k->x->dims[1], ns = S[0] * S[1] * S[2], np = P[0] * P[1] * P[2];
    if (N * C * ns > MAX_ELEMS || N * C * np > MAX_ELEMS || N * np * d > MAX_ELEMS)
        return;
    static fv_acc_t out[MAX_ELEMS], dg[MAX_ELEMS]; /* y or dx; dgrid */
    memset(out, 0, sizeof(fv_acc_t) * (size_t)(N * C * (backward ? ns : np)));
    memset(dg, 0, sizeof(fv_acc_t) * (size_t)(N * np * d));
    const double werr = o->mode == RUDNN_GRID_SAMPLE_BICUBIC ? 0x1p-19 : 0x1p-21;
    const fv_view_t vx = fv_view_of(c, op, k->x), vg = fv_view_of(c, op, k->grid), vy = fv_view_of(c, op, k->y);
    for (int64_t n = 0; n < N; n++)
        for (int64_t pi = 0; pi < np; pi++) {
            const int64_t p[3] = {pi / (P[1] * P[2]), pi / P[2] % P[1], pi % P[2]};
            int64_t ga[5] = {n};
            for (int i = 0; i < d; i++)
                ga[1 + i] = p[3 - d + i];
            int64_t idx[3][4];
            double w[3][4], dw[3][4];
            int cnt[3];
            /* coordinate 0 runs along W, 1 along H, 2 along D */
            ga[d + 1] = 0;
            cnt[2] = dim_taps(o, fv_load(&vg, fv_index(&vg, ga, d + 2)), S[2], idx[2], w[2], dw[2]);
            ga[d + 1] = 1;
            cnt[1] = dim_taps(o, fv_load(&vg, fv_index(&vg, ga, d + 2)), S[1], idx[1], w[1], dw[1]);
            if (d == 3) {
                ga[d + 1] = 2;
                cnt[0] = dim_taps(o, fv_load(&vg, fv_index(&vg, ga, d + 2)), S[0], idx[0], w[0], dw[0]);
            } else {
                cnt[0] = 1, idx[0][0] = 0, w[0][0] = 1, dw[0][0] = 0;
            }
            for (int64_t ch = 0; ch < C; ch++) {
                const double gy = backward ? fv_load(&vy, index_of(&vy, d, n, ch, p)) : 0.0;
                for (int a = 0; a < cnt[0]; a++)
                    for (int b = 0; b < cnt[1]; b++)
                        for (int e = 0; e < cnt[2]; e++) {
                            /* a tap outside x: BILINEAR and NEAREST skip it, BICUBIC reads 0 and
                             * multiplies it (a NaN weight, or dy, then gives NaN) */
                            const int outside = idx[0][a] < 0 || idx[1][b] < 0 || idx[2][e] < 0;
                            if (outside && o->mode != RUDNN_GRID_SAMPLE_BICUBIC)
                                continue;
                            const int64_t q[3] = {idx[0][a], idx[1][b], idx[2][e]};
                            const double wt = w[0][a] * w[1][b] * w[2][e];
                            const double xv = outside ? 0.0 : fv_load(&vx, index_of(&vx, d, n, ch, q));
                            if (!backward) {
                                fv_add_err(&out[(n * C + ch) * np + pi], wt * xv, fabs(xv) * werr);
                                continue;
                            }
                            if (k->dx && !outside)
                                fv_add_err(&out[(n * C + ch) * ns + (q[0] * S[1] + q[1]) * S[2] + q[2]], wt * gy,
                                           fabs(gy) * werr);
                            if (k->dgrid) {
                                /* the kernel's v = dy x in FP32, then the weights' products */
                                const double v = gy * xv;
                                const double parts[3] = {w[0][a] * w[1][b] * dw[2][e], w[0][a] * dw[1][b] * w[2][e],
                                                         dw[0][a] * w[1][b] * w[2][e]};
                                for (int j = 0; j < d; j++) {
                                    fv_acc_t *ac = &dg[(n * np + pi) * d + j];
                                    fv_add_err(ac, parts[j] * v, fabs(v) * werr * 4);
                                    ac->reach += fabs(v) * 8;
                                }
                            }
                        }
            }
        }
    const char *rule = "an output differs from the formula of grid_sample.h";
    if (!backward) {
        for (int64_t n = 0; n < N; n++)
            for (int64_t ch = 0; ch < C; ch++)
                for (int64_t pi = 0; pi < np; pi++) {
                    const int64_t p[3] = {pi / (P[1] * P[2]), pi / P[2] % P[1], pi % P[2]};
                    const int64_t e = index_of(&vy, d, n, ch, p);
                    fv_check_element(op, "y", vy.dt, e, &out[(n * C + ch) * np + pi], fv_load(&vy, e), rule);
                }
        return;
    }
    if (k->dx) {
        const fv_view_t vdx = fv_view_of(c, op, k->dx);
        for (int64_t n = 0; n < N; n++)
            for (int64_t ch = 0; ch < C; ch++)
                for (int64_t si = 0; si < ns; si++) {
                    const int64_t q[3] = {si / (S[1] * S[2]), si / S[2] % S[1], si % S[2]};
                    const int64_t e = index_of(&vdx, d, n, ch, q);
                    fv_check_element(op, "dx", vdx.dt, e, &out[(n * C + ch) * ns + si], fv_load(&vdx, e), rule);
                }
    }
    if (k->dgrid) {
        const fv_view_t vdg = fv_view_of(c, op, k->dgrid);
        for (int64_t n = 0; n < N; n++)
            for (int64_t pi = 0; pi < np; pi++)
                for (int j = 0; j < d; j++) {
                    int64_t at[5] = {n};
                    const int64_t p[3] = {pi / (P[1] * P[2]), pi / P[2] % P[1], pi % P[2]};
                    for (int i = 0; i < d; i++)
                        at[1 + i] = p[3 - d + i];
                    at[d + 1] = j;
                    const int64_t e = fv_index(&vdg, at, d + 2);
                    fv_check_element(op, "dgrid", vdg.dt, e, &dg[(n * np + pi) * d + j], fv_load(&vdg, e), rule);
                }
    }
}

/* ---- the calls ------------------------------------------------------------------------------------------ */

static void build_call(fz_call_t *c, const problem_t *p, int backward, call_t *k)
{
    memset(k, 0, sizeof *k);
    int64_t xd[5] = {p->N, p->C}, gd[5] = {p->N}, yd[5] = {p->N, p->C};
    for (int i = 0; i < p->d; i++)
        xd[2 + i] = p->S[i], gd[1 + i] = p->P[i], yd[2 + i] = p->P[i];
    gd[p->d + 1] = p->d;
    const fz_spec_t sx = spec5(p->dt, 2 + p->d, xd), sg = spec5(p->dt, 2 + p->d, gd), sy = spec5(p->dt, 2 + p->d, yd);
    k->q = fz_queue(c);
    k->x = fz_tensor(c, &sx, 0);
    k->grid = fz_tensor(c, &sg, 0);
    k->y = fz_tensor(c, &sy, !backward);
    if (backward) {
        k->dx = fz_optional_output(c, &sx, !p->dx);
        k->dgrid = fz_optional_output(c, &sg, !p->dgrid);
    }
    if (p->cl)
        fv_channels_last(k->x), fv_channels_last(k->y), fv_channels_last(k->dx);
    k->has_options = fz_object_choice(c, 2) == 0;
    rudnn_grid_sample_options_init(&k->opts);
    k->opts.mode = (rudnn_grid_sample_mode_t)fz_int(c, p->mode);
    k->opts.padding = (rudnn_grid_sample_padding_t)fz_int(c, p->padding);
    k->opts.align_corners = fz_int(c, p->align);
    if (p->write_grid && k->grid) {
        float v[FZ_WRITE_BYTES / 2];
        uint8_t raw[FZ_WRITE_BYTES];
        const size_t es = rudnn_dtype_size(p->dt), n = sizeof raw / es;
        for (size_t i = 0; i < n; i++) /* some exactly on -1, 0, 1 and the half steps */
            v[i] = i % 7 == 3 ? (float)((int)(i / 7 % 5) - 2) * 0.5f
                              : (float)sin(0.9 * (p->seed + 1) + 2.3 * (double)i) * p->span;
        rudnn_convert_from_f32(p->dt, v, raw, n);
        fz_write_input(c, k->grid, raw, n * es);
    }
    if (p->write_values)
        fv_write_values(c, backward && p->values_to_dy ? k->y : k->x, p->dt, p->seed, 1, 2.0f);
}

static void run_gs(fz_call_t *c, const problem_t *p, int op)
{
    const char *name = op_names[op];
    const int backward = op != OP_FORWARD;
    call_t k;
    build_call(c, p, backward, &k);
    const rudnn_grid_sample_options_t *o = k.has_options ? &k.opts : NULL;
    if (op == OP_FORWARD) {
        if (fz_check(c, name, rudnn_grid_sample_forward(k.q, k.x, k.grid, o, k.y)))
            return;
        const rudnn_tensor_t *outs[1] = {k.y}, *ins[2] = {k.x, k.grid};
        fv_check_disjoint(name, outs, 1, ins, 2);
        fv_check_gaps(c, name, k.y);
        if (k.x->dims[0] && k.x->dims[1])
            check_values(c, name, 0, &k);
        fv_reads_reset();
        return;
    }
    if (op == OP_SIZE) {
        const int null_bytes = fz_object_choice(c, 2);
        size_t bytes = BYTES_SENTINEL;
        const rudnn_status_t st =
            fz_check(c, name, rudnn_grid_sample_backward_workspace_size(k.q, k.x, k.grid, k.y, o, k.dx, k.dgrid,
                                                                        null_bytes ? NULL : &bytes));
        if (st && bytes != BYTES_SENTINEL)
            fz_fail("a rejected workspace_size wrote *bytes", name, st);
        if (!st && bytes == BYTES_SENTINEL)
            fz_fail("an accepted workspace_size gave no size", name, st);
        return;
    }
    size_t need = BYTES_SENTINEL;
    const rudnn_status_t st_size = rudnn_grid_sample_backward_workspace_size(k.q, k.x, k.grid, k.y, o, k.dx, k.dgrid,
                                                                             &need);
    char size_msg[1024];
    snprintf(size_msg, sizeof size_msg, "%s", rudnn_last_error());
    size_t ws_bytes = 0;
    const rudnn_buffer_t ws = fz_workspace(c, st_size ? 0 : need, &ws_bytes);
    const rudnn_status_t st_op = rudnn_grid_sample_backward(k.q, k.x, k.grid, k.y, o, ws, ws_bytes, k.dx, k.dgrid);
    char op_msg[1024];
    snprintf(op_msg, sizeof op_msg, "%s", rudnn_last_error());
    const rudnn_status_t st = fz_check(c, name, st_op);
    if (st) {
        if (!strstr(op_msg, "workspace") && st_size != st) {
            fprintf(stderr, "fuzz: the op: %s \"%s\"; workspace_size: %s \"%s\"\n", rudnn_status_string(st), op_msg,
                    rudnn_status_string(st_size), size_msg);
            fz_fail("workspace_size does not fail as the call does", name, st);
        }
        return;
    }
    if (st_size) {
        fprintf(stderr, "fuzz: workspace_size: %s \"%s\"\n", rudnn_status_string(st_size), size_msg);
        fz_fail("workspace_size rejected what the call accepted", name, st);
    }
    const rudnn_tensor_t *outs[2] = {k.dx, k.dgrid}, *ins[3] = {k.x, k.grid, k.y};
    fv_check_disjoint(name, outs, 2, ins, 3);
    fv_check_gaps(c, name, k.dx);
    fv_check_gaps(c, name, k.dgrid);
    if (k.x->dims[0])
        check_values(c, name, 1, &k);
    fv_reads_reset();
}

/* Every op in every mode and dtype, so that the programs are built before the leak checks. */
void fz_warmup(void)
{
    for (uint8_t op = 0; op < 2; op++)
        for (uint8_t dt = 0; dt < 3; dt++)
            for (uint8_t mode = 0; mode < 3; mode++)
                fz_run_header((const uint8_t[FZ_SLOT]){op, dt, 0, 1, 1, 0x23, 0x34, 0, (uint8_t)(mode | 0x60), 3});
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_call_t c;
    fz_begin(&c, data, size);
    const problem_t p = decode_problem(&c);
    run_gs(&c, &p, fz_header_byte(&c, 0) % OP_COUNT);
    return 0;
}
