/* Fault cases of grid sampling (rudnn/grid_sample.h): rudnn_grid_sample_forward in every mode and
 * padding, and rudnn_grid_sample_backward with dx and dgrid (workspace NULL: the counting sort's
 * lists come from the queue's pool) and with dgrid alone (no workspace), over 2D and 3D and the
 * three dtypes. Their allocations: the program build (one per dtype, from a cold context) and the
 * pooled workspace of a backward with dx (from a cold queue). The workspace query allocates
 * nothing (arithmetic on the plan) and is not walked.
 *
 * The grids hold coordinates in about [-1.4, 1.4], so that taps fall outside x and every padding
 * clips or reflects. Every successful call's outputs are checked against an FP64 reference
 * computed here from the tensors as the device holds them (each point's coordinate, padding and
 * tap in FP32 as the header defines them; weights, derivatives, products and sums in double),
 * within the FP32 rounding of the sums and the dtype's rounding; then compared byte for byte with
 * the fault-free run. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_case.h"
#include <rudnn/grid_sample.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

typedef struct gs_def {
    int backward, dx, dgrid;
    rudnn_grid_sample_mode_t mode;
    rudnn_grid_sample_padding_t padding;
    int align;
    rudnn_dtype_t dt;
    int d;
    int64_t N, C, S[3], P[3];
} gs_def_t;

#define MAX_ELEMS 512

static const gs_def_t defs[] = {
    {0, 0, 0, RUDNN_GRID_SAMPLE_BILINEAR, RUDNN_GRID_SAMPLE_ZEROS, 0, RUDNN_F32, 2, 2, 3, {4, 5, 1}, {3, 4, 1}},
    {0, 0, 0, RUDNN_GRID_SAMPLE_NEAREST, RUDNN_GRID_SAMPLE_BORDER, 1, RUDNN_F16, 3, 1, 2, {3, 4, 3}, {2, 3, 2}},
    {0, 0, 0, RUDNN_GRID_SAMPLE_BICUBIC, RUDNN_GRID_SAMPLE_REFLECTION, 0, RUDNN_BF16, 2, 2, 2, {4, 3, 1}, {3, 3, 1}},
    {1, 1, 1, RUDNN_GRID_SAMPLE_BILINEAR, RUDNN_GRID_SAMPLE_REFLECTION, 1, RUDNN_F32, 2, 2, 2, {3, 5, 1}, {4, 3, 1}},
    {1, 1, 1, RUDNN_GRID_SAMPLE_BILINEAR, RUDNN_GRID_SAMPLE_ZEROS, 0, RUDNN_BF16, 3, 1, 2, {3, 2, 4}, {2, 2, 3}},
    {1, 1, 1, RUDNN_GRID_SAMPLE_BICUBIC, RUDNN_GRID_SAMPLE_BORDER, 0, RUDNN_F16, 2, 1, 2, {4, 4, 1}, {3, 2, 1}},
    {1, 0, 1, RUDNN_GRID_SAMPLE_BILINEAR, RUDNN_GRID_SAMPLE_BORDER, 0, RUDNN_F32, 2, 2, 2, {3, 4, 1}, {2, 3, 1}},
};

typedef struct gs_state {
    fault_env_t env;
    const gs_def_t *def;
    rudnn_grid_sample_options_t opts;
    rudnn_tensor_t x, grid, dy; /* inputs (dy: backward) */
    rudnn_tensor_t y, dx, dgrid;
    int ny; /* outputs below, in this order: y | dx, dgrid */
    double ref[2][MAX_ELEMS], mag[2][MAX_ELEMS];
    int terms[2][MAX_ELEMS];
    size_t nref[2];
} gs_state_t;

static rudnn_status_t read_f32(const fault_env_t *env, const rudnn_tensor_t *t, float *out)
{
    const size_t n = (size_t)rudnn_tensor_numel(t), bytes = rudnn_tensor_bytes(t);
    void *raw = malloc(bytes ? bytes : 1);
    if (!raw)
        return RUDNN_STATUS_ALLOC_FAILED;
    rudnn_status_t st = rudnn_tensor_read(env->queue, t, raw, bytes);
    if (!st)
        rudnn_convert_to_f32(t->dtype, raw, out, n);
    free(raw);
    return st;
}

/* ---- the header's coordinate rules, in FP32 ---------------------------------------------------- */

static float clip(float v, int64_t S)
{
    const float m = v < 0.0f ? 0.0f : v;
    return m < (float)(S - 1) ? m : (float)(S - 1);
}

/* reflected over [lo / 2, hi / 2]; *flipped: the reflections' parity */
static float reflect(float in, float twice_lo, float twice_hi, int *odd)
{
    *odd = 0;
    if (twice_lo == twice_hi)
        return 0.0f;
    const float mn = twice_lo / 2.0f, span = (twice_hi - twice_lo) / 2.0f;
    in = fabsf(in - mn);
    const float extra = fmodf(in, span), flips = floorf(in / span);
    *odd = fmodf(flips, 2.0f) != 0.0f;
    return *odd ? span - extra + mn : extra + mn;
}

static float safe(float c) { return (!isfinite(c) || c > (float)INT_MAX - 1.0f || c < (float)INT_MIN) ? -100.0f : c; }

static float pad(float c, int64_t S, int padding, int align)
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

/* d padded / d unnormalized (bilinear): 0 at and past a clipped border, the reflections' sign */
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
static int dim_taps(const gs_def_t *d, float g, int64_t S, int64_t *idx, double *w, double *dw)
{
    const float u = d->align ? ((g + 1.0f) / 2.0f) * (float)(S - 1) : ((g + 1.0f) * (float)S - 1.0f) / 2.0f;
    const double unslope = d->align ? (double)(S - 1) / 2.0 : (double)S / 2.0;
    if (d->mode == RUDNN_GRID_SAMPLE_BICUBIC) {
        const float fl = floorf(u);
        const double t = (double)(u - fl);
        w[0] = cubic2(t + 1), w[1] = cubic1(t), w[2] = cubic1(1 - t), w[3] = cubic2(2 - t);
        dw[0] = cubic2_d(t + 1), dw[1] = cubic1_d(t), dw[2] = -cubic1_d(1 - t), dw[3] = -cubic2_d(2 - t);
        for (int k = 0; k < 4; k++) {
            const float at = pad(fl - 1.0f + (float)k, S, d->padding, d->align);
            const int64_t i = (int64_t)at;
            idx[k] = i >= 0 && i < S ? i : -1;
            dw[k] *= unslope;
        }
        return 4;
    }
    const float i = pad(u, S, d->padding, d->align);
    if (d->mode == RUDNN_GRID_SAMPLE_NEAREST) {
        const int64_t r = (int64_t)nearbyintf(i);
        idx[0] = r >= 0 && r < S ? r : -1;
        w[0] = 1, dw[0] = 0;
        return 1;
    }
    const float fl = floorf(i);
    const double t = (double)(i - fl), slope = unslope * pad_slope(u, S, d->padding, d->align);
    const int64_t i0 = (int64_t)fl;
    idx[0] = i0 >= 0 && i0 < S ? i0 : -1;
    idx[1] = i0 + 1 >= 0 && i0 + 1 < S ? i0 + 1 : -1;
    w[0] = 1 - t, w[1] = t;
    dw[0] = -slope, dw[1] = slope;
    return 2;
}

static void add(gs_state_t *s, int which, int64_t e, double term)
{
    s->ref[which][e] += term, s->mag[which][e] += fabs(term), s->terms[which][e]++;
}

static rudnn_status_t make_reference(gs_state_t *s)
{
    const gs_def_t *d = s->def;
    int64_t S[3], P[3];
    for (int i = 0; i < 3; i++) {
        const int k = i - (3 - d->d);
        S[i] = k >= 0 ? d->S[k] : 1, P[i] = k >= 0 ? d->P[k] : 1;
    }
    const int64_t ns = S[0] * S[1] * S[2], np = P[0] * P[1] * P[2], NC = d->N * d->C;
    static float x[MAX_ELEMS], grid[MAX_ELEMS], dy[MAX_ELEMS];
    if (NC * ns > MAX_ELEMS || NC * np > MAX_ELEMS || d->N * np * d->d > MAX_ELEMS)
        return RUDNN_STATUS_INTERNAL;
    rudnn_status_t st = read_f32(&s->env, &s->x, x);
    if (!st)
        st = read_f32(&s->env, &s->grid, grid);
    if (!st && d->backward)
        st = read_f32(&s->env, &s->dy, dy);
    if (st)
        return st;
    memset(s->ref, 0, sizeof s->ref);
    memset(s->mag, 0, sizeof s->mag);
    memset(s->terms, 0, sizeof s->terms);
    s->nref[0] = (size_t)(NC * (d->backward ? ns : np));
    s->nref[1] = (size_t)(d->N * np * d->d);
    for (int64_t n = 0; n < d->N; n++)
        for (int64_t pi = 0; pi < np; pi++) {
            int64_t idx[3][4];
            double w[3][4], dw[3][4];
            int cnt[3];
            const float *g = grid + (n * np + pi) * d->d; /* (x, y[, z]) along W, H[, D] */
            cnt[2] = dim_taps(d, g[0], S[2], idx[2], w[2], dw[2]);
            cnt[1] = dim_taps(d, g[1], S[1], idx[1], w[1], dw[1]);
            if (d->d == 3)
                cnt[0] = dim_taps(d, g[2], S[0], idx[0], w[0], dw[0]);
            else
                cnt[0] = 1, idx[0][0] = 0, w[0][0] = 1, dw[0][0] = 0;
            for (int64_t c = 0; c < d->C; c++)
                for (int a = 0; a < cnt[0]; a++)
                    for (int b = 0; b < cnt[1]; b++)
                        for (int e = 0; e < cnt[2]; e++) {
                            if (idx[0][a] < 0 || idx[1][b] < 0 || idx[2][e] < 0)
                                continue;
                            const int64_t xe = (n * d->C + c) * ns + (idx[0][a] * S[1] + idx[1][b]) * S[2] + idx[2][e];
                            const int64_t ye = (n * d->C + c) * np + pi;
                            const double wt = w[0][a] * w[1][b] * w[2][e];
                            if (!d->backward) {
                                add(s, 0, ye, wt * x[xe]);
                                continue;
                            }
                            if (d->dx)
                                add(s, 0, xe, wt * dy[ye]);
                            if (d->dgrid) {
                                const double v = (double)dy[ye] * x[xe];
                                const int64_t ge = (n * np + pi) * d->d;
                                add(s, 1, ge, w[0][a] * w[1][b] * dw[2][e] * v);
                                add(s, 1, ge + 1, w[0][a] * dw[1][b] * w[2][e] * v);
                                if (d->d == 3)
                                    add(s, 1, ge + 2, dw[0][a] * w[1][b] * w[2][e] * v);
                            }
                        }
        }
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t setup(void *p, const fault_env_t *env)
{
    gs_state_t *s = p;
    s->env = *env;
    s->def = &defs[env->variant];
    const gs_def_t *d = s->def;
    rudnn_grid_sample_options_init(&s->opts);
    s->opts.mode = d->mode, s->opts.padding = d->padding, s->opts.align_corners = d->align;
    const int rank = 2 + d->d;
    int64_t xd[5] = {d->N, d->C}, gd[5] = {d->N}, yd[5] = {d->N, d->C};
    for (int i = 0; i < d->d; i++)
        xd[2 + i] = d->S[i], gd[1 + i] = d->P[i], yd[2 + i] = d->P[i];
    gd[rank - 1] = d->d;
    /* the grid: coordinates in about [-1.4, 1.4] */
    const int64_t npts = d->N * d->P[0] * d->P[1] * (d->d == 3 ? d->P[2] : 1) * d->d;
    float gv[MAX_ELEMS];
    uint16_t g16[MAX_ELEMS];
    for (int64_t i = 0; i < npts; i++)
        gv[i] = (float)(1.4 * sin(1.3 * (double)i + 0.4 * env->variant));
    rudnn_convert_from_f32(d->dt, gv, g16, (size_t)npts);
    rudnn_buffer_t b = NULL;
    rudnn_status_t st = fault_float_tensor(env, d->dt, rank, xd, 101 + env->variant, &s->x);
    if (!st)
        st = fault_buffer(env, (size_t)npts * rudnn_dtype_size(d->dt), d->dt == RUDNN_F32 ? (void *)gv : g16, &b);
    if (!st)
        st = rudnn_tensor_init(&s->grid, b, 0, d->dt, rank, gd);
    if (!st && !d->backward)
        st = fault_out_tensor(env, d->dt, rank, yd, &s->y);
    if (!st && d->backward)
        st = fault_float_tensor(env, d->dt, rank, yd, 111 + env->variant, &s->dy);
    if (!st && d->dx)
        st = fault_out_tensor(env, d->dt, rank, xd, &s->dx);
    if (!st && d->dgrid)
        st = fault_out_tensor(env, d->dt, rank, gd, &s->dgrid);
    if (!st) { /* a backend without grid-sample kernels answers NOT_SUPPORTED (the case is then
                * skipped): the forward asked with N 0, which it checks in full and launches nothing for */
        xd[0] = gd[0] = yd[0] = 0;
        rudnn_tensor_t px, pg, py;
        const rudnn_tensor_t *out = s->y.buffer ? &s->y : s->dx.buffer ? &s->dx : &s->dgrid;
        st = rudnn_tensor_init(&px, s->x.buffer, 0, d->dt, rank, xd);
        if (!st)
            st = rudnn_tensor_init(&pg, s->grid.buffer, 0, d->dt, rank, gd);
        if (!st)
            st = rudnn_tensor_init(&py, out->buffer, 0, d->dt, rank, yd);
        if (!st)
            st = rudnn_grid_sample_forward(env->queue, &px, &pg, &s->opts, &py);
    }
    return st ? st : make_reference(s);
}

static rudnn_status_t prepare(void *p)
{
    gs_state_t *s = p;
    rudnn_tensor_t *outs[3] = {&s->y, &s->dx, &s->dgrid};
    for (int i = 0; i < 3; i++)
        if (outs[i]->buffer) {
            rudnn_status_t st = fault_fill_sentinel(&s->env, outs[i]);
            if (st)
                return st;
        }
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t call(void *p)
{
    gs_state_t *s = p;
    if (!s->def->backward)
        return rudnn_grid_sample_forward(s->env.queue, &s->x, &s->grid, &s->opts, &s->y);
    return rudnn_grid_sample_backward(s->env.queue, &s->x, &s->grid, &s->dy, &s->opts, NULL, 0,
                                      s->dx.buffer ? &s->dx : NULL, s->dgrid.buffer ? &s->dgrid : NULL);
}

static int unchanged(void *p, char *why, size_t cap)
{
    gs_state_t *s = p;
    return (!s->y.buffer || fault_is_sentinel(&s->env, &s->y, "y", why, cap)) &&
           (!s->dx.buffer || fault_is_sentinel(&s->env, &s->dx, "dx", why, cap)) &&
           (!s->dgrid.buffer || fault_is_sentinel(&s->env, &s->dgrid, "dgrid", why, cap));
}

static rudnn_status_t check(gs_state_t *s, int which, const rudnn_tensor_t *t, const char *name)
{
    static float got[MAX_ELEMS];
    rudnn_status_t st = read_f32(&s->env, t, got);
    if (st)
        return st;
    const double eps = s->def->dt == RUDNN_F32 ? 0.0 : s->def->dt == RUDNN_F16 ? 0x1p-11 : 0x1p-8;
    for (size_t i = 0; i < s->nref[which]; i++) {
        const double want = s->ref[which][i];
        const double tol = (double)(s->terms[which][i] + 8) * 0x1p-21 * s->mag[which][i] + eps * fabs(want) + 1e-30;
        if (!(fabs((double)got[i] - want) <= tol)) {
            printf("faults grid_sample: %s element %zu of %zu: %.9g, expected %.9g\n", name, i, s->nref[which],
                   (double)got[i], want);
            return RUDNN_STATUS_INTERNAL;
        }
    }
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t result(void *p, uint8_t **bytes, size_t *size)
{
    gs_state_t *s = p;
    *bytes = NULL;
    *size = 0;
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    if (s->y.buffer)
        st = check(s, 0, &s->y, "y");
    if (!st && s->dx.buffer)
        st = check(s, 0, &s->dx, "dx");
    if (!st && s->dgrid.buffer)
        st = check(s, 1, &s->dgrid, "dgrid");
    const rudnn_tensor_t *outs[3] = {&s->y, &s->dx, &s->dgrid};
    for (int i = 0; !st && i < 3; i++)
        if (outs[i]->buffer)
            st = fault_append_tensor(&s->env, outs[i], bytes, size);
    return st;
}

static void undo(void *p) { (void)p; }

static void teardown(void *p)
{
    gs_state_t *s = p;
    rudnn_tensor_t *all[] = {&s->x, &s->grid, &s->dy, &s->y, &s->dx, &s->dgrid};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        fault_drop_tensor(all[i]);
}

#define GS_CASE(op, label, def)                                                                              \
    {op,     sizeof(gs_state_t), FAULT_COLD_CONTEXT | FAULT_COLD_QUEUE | FAULT_WARM, setup, prepare, call,   \
     unchanged, result, undo, teardown, label, def}

static const fault_case_t cases[] = {
    GS_CASE("grid_sample_forward", "grid_sample_forward (BILINEAR, ZEROS, f32, 2D)", 0),
    GS_CASE("grid_sample_forward", "grid_sample_forward (NEAREST, BORDER, f16, 3D)", 1),
    GS_CASE("grid_sample_forward", "grid_sample_forward (BICUBIC, REFLECTION, bf16)", 2),
    GS_CASE("grid_sample_backward", "grid_sample_backward (BILINEAR, REFLECTION, f32)", 3),
    GS_CASE("grid_sample_backward", "grid_sample_backward (3D, ZEROS, bf16)", 4),
    GS_CASE("grid_sample_backward", "grid_sample_backward (BICUBIC, BORDER, f16)", 5),
    GS_CASE("grid_sample_backward", "grid_sample_backward (BORDER, f32, dgrid only)", 6),
};

const fault_family_t fault_family_grid_sample = {"grid_sample", cases, sizeof cases / sizeof cases[0]};
