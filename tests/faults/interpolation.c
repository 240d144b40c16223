/* Fault cases of interpolation (rudnn/interpolation.h): rudnn_interpolate_forward in every mode and
 * rudnn_interpolate_backward in three, over 1, 2 and 3 spatial dims and the three dtypes, with
 * align_corners and explicit scales. The ops take no workspace: their allocations are the plugin's
 * program builds from a cold context (none from a cold or warm queue, which the walk checks with
 * every allocation failing).
 *
 * Every successful call's output is checked against an FP64 reference computed here from the inputs
 * as the device holds them: each dim's source coordinate in FP32 as the header defines it, the
 * taps' weights in double, every product and sum in double; within the FP32 rounding of the sum and
 * the dtype's rounding. Then it is compared byte for byte with the fault-free run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_case.h"
#include <rudnn/interpolation.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

typedef struct interp_def {
    int backward;
    rudnn_interp_mode_t mode;
    int align;
    rudnn_dtype_t dt;
    int d;
    int64_t N, C, S[3], O[3];
    double scales[3];
} interp_def_t;

#define MAX_ELEMS 1024

static const interp_def_t defs[] = {
    /* forward */
    {0, RUDNN_INTERP_NEAREST, 0, RUDNN_F32, 2, 2, 3, {4, 5, 1}, {7, 3, 1}, {0, 0, 0}},
    {0, RUDNN_INTERP_NEAREST_EXACT, 0, RUDNN_BF16, 1, 1, 2, {6, 1, 1}, {10, 1, 1}, {1.7, 0, 0}},
    {0, RUDNN_INTERP_LINEAR, 1, RUDNN_F16, 3, 1, 2, {3, 4, 2}, {5, 3, 4}, {0, 0, 0}},
    {0, RUDNN_INTERP_CUBIC, 0, RUDNN_F32, 2, 1, 2, {4, 5, 1}, {10, 3, 1}, {2.5, 0.6, 0}},
    /* backward */
    {1, RUDNN_INTERP_LINEAR, 0, RUDNN_F32, 2, 2, 2, {3, 4, 1}, {6, 7, 1}, {0, 0, 0}},
    {1, RUDNN_INTERP_CUBIC, 1, RUDNN_BF16, 2, 1, 2, {4, 6, 1}, {5, 3, 1}, {0, 0, 0}},
    {1, RUDNN_INTERP_NEAREST, 0, RUDNN_F16, 1, 1, 3, {4, 1, 1}, {9, 1, 1}, {0, 0, 0}},
};

typedef struct interp_state {
    fault_env_t env;
    const interp_def_t *def;
    rudnn_interp_options_t opts;
    int64_t xdims[5], ydims[5];
    rudnn_tensor_t in, out; /* forward: x, y; backward: dy, dx */
    double ref[MAX_ELEMS], mag[MAX_ELEMS];
    int terms[MAX_ELEMS];
    size_t nref;
} interp_state_t;

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

static double cubic1(double x) { return ((-0.75 + 2.0) * x - (-0.75 + 3.0)) * x * x + 1.0; }
static double cubic2(double x) { return ((-0.75 * x - 5.0 * -0.75) * x + 8.0 * -0.75) * x - 4.0 * -0.75; }

/* Output o's taps along one dim (S inputs, O outputs, scale sc): count, indices, weights. */
static int taps(const interp_def_t *d, int64_t S, int64_t O, double sc, int64_t o, int64_t *idx, double *w)
{
    float r;
    if (d->mode >= RUDNN_INTERP_LINEAR && d->align)
        r = O > 1 ? (float)(S - 1) / (float)(O - 1) : 0.0f;
    else
        r = sc > 0 ? (float)(1.0 / sc) : (float)S / (float)O;
    if (d->mode <= RUDNN_INTERP_NEAREST_EXACT) {
        const float s = d->mode == RUDNN_INTERP_NEAREST ? floorf((float)o * r) : floorf(((float)o + 0.5f) * r);
        idx[0] = s < (float)(S - 1) ? (int64_t)s : S - 1;
        w[0] = 1;
        return 1;
    }
    float src = d->align ? r * (float)o : r * ((float)o + 0.5f) - 0.5f;
    if (d->mode == RUDNN_INTERP_LINEAR) {
        if (src < 0.0f)
            src = 0.0f;
        const float fl = floorf(src), t = src - fl;
        idx[0] = fl < (float)(S - 1) ? (int64_t)fl : S - 1;
        idx[1] = idx[0] < S - 1 ? idx[0] + 1 : idx[0];
        w[0] = 1.0 - t, w[1] = t;
        return 2;
    }
    const float fl = floorf(src);
    const double t = src - fl;
    w[0] = cubic2(t + 1), w[1] = cubic1(t), w[2] = cubic1(1 - t), w[3] = cubic2(2 - t);
    for (int k = 0; k < 4; k++) {
        const int64_t i = (int64_t)fl - 1 + k;
        idx[k] = i < 0 ? 0 : i > S - 1 ? S - 1 : i;
    }
    return 4;
}

static rudnn_status_t make_reference(interp_state_t *s)
{
    const interp_def_t *d = s->def;
    int64_t S[3], O[3];
    double sc[3];
    for (int i = 0; i < 3; i++) {
        const int k = i - (3 - d->d);
        S[i] = k >= 0 ? d->S[k] : 1, O[i] = k >= 0 ? d->O[k] : 1, sc[i] = k >= 0 ? d->scales[k] : 0;
    }
    const int64_t NC = d->N * d->C, ns = S[0] * S[1] * S[2], no = O[0] * O[1] * O[2];
    static float in[MAX_ELEMS];
    if (NC * ns > MAX_ELEMS || NC * no > MAX_ELEMS)
        return RUDNN_STATUS_INTERNAL;
    rudnn_status_t st = read_f32(&s->env, &s->in, in);
    if (st)
        return st;
    s->nref = (size_t)(NC * (d->backward ? ns : no));
    memset(s->ref, 0, sizeof s->ref);
    memset(s->mag, 0, sizeof s->mag);
    memset(s->terms, 0, sizeof s->terms);
    for (int64_t nc = 0; nc < NC; nc++)
        for (int64_t oi = 0; oi < no; oi++) {
            const int64_t o[3] = {oi / (O[1] * O[2]), oi / O[2] % O[1], oi % O[2]};
            int64_t idx[3][4];
            double w[3][4];
            int n[3];
            for (int i = 0; i < 3; i++)
                n[i] = taps(d, S[i], O[i], sc[i], o[i], idx[i], w[i]);
            for (int a = 0; a < n[0]; a++)
                for (int b = 0; b < n[1]; b++)
                    for (int c = 0; c < n[2]; c++) {
                        const double wt = w[0][a] * w[1][b] * w[2][c];
                        const int64_t q = nc * ns + (idx[0][a] * S[1] + idx[1][b]) * S[2] + idx[2][c];
                        const int64_t e = d->backward ? q : nc * no + oi;
                        const double term = wt * in[d->backward ? nc * no + oi : q];
                        s->ref[e] += term, s->mag[e] += fabs(term), s->terms[e]++;
                    }
        }
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t setup(void *p, const fault_env_t *env)
{
    interp_state_t *s = p;
    s->env = *env;
    s->def = &defs[env->variant];
    const interp_def_t *d = s->def;
    rudnn_interp_options_init(&s->opts);
    s->opts.mode = d->mode;
    s->opts.align_corners = d->align;
    const int rank = 2 + d->d;
    s->xdims[0] = s->ydims[0] = d->N, s->xdims[1] = s->ydims[1] = d->C;
    for (int i = 0; i < d->d; i++)
        s->xdims[2 + i] = d->S[i], s->ydims[2 + i] = d->O[i], s->opts.scales[i] = d->scales[i];
    rudnn_status_t st = fault_float_tensor(env, d->dt, rank, d->backward ? s->ydims : s->xdims, 91 + env->variant,
                                           &s->in);
    if (!st)
        st = fault_out_tensor(env, d->dt, rank, d->backward ? s->xdims : s->ydims, &s->out);
    if (!st) { /* a backend without interpolation kernels answers NOT_SUPPORTED (the case is then
                * skipped): asked with N 0, which the op checks in full and launches nothing for */
        int64_t xd[5], yd[5];
        memcpy(xd, s->xdims, sizeof xd);
        memcpy(yd, s->ydims, sizeof yd);
        xd[0] = yd[0] = 0;
        rudnn_tensor_t px, py;
        st = rudnn_tensor_init(&px, s->in.buffer, 0, d->dt, rank, xd);
        if (!st)
            st = rudnn_tensor_init(&py, s->out.buffer, 0, d->dt, rank, yd);
        if (!st)
            st = rudnn_interpolate_forward(env->queue, &px, &s->opts, &py);
    }
    return st ? st : make_reference(s);
}

static rudnn_status_t prepare(void *p)
{
    interp_state_t *s = p;
    return fault_fill_sentinel(&s->env, &s->out);
}

static rudnn_status_t call(void *p)
{
    interp_state_t *s = p;
    if (s->def->backward)
        return rudnn_interpolate_backward(s->env.queue, &s->in, &s->opts, &s->out);
    return rudnn_interpolate_forward(s->env.queue, &s->in, &s->opts, &s->out);
}

static int unchanged(void *p, char *why, size_t cap)
{
    interp_state_t *s = p;
    return fault_is_sentinel(&s->env, &s->out, s->def->backward ? "dx" : "y", why, cap);
}

static rudnn_status_t result(void *p, uint8_t **bytes, size_t *size)
{
    interp_state_t *s = p;
    *bytes = NULL;
    *size = 0;
    static float got[MAX_ELEMS];
    rudnn_status_t st = read_f32(&s->env, &s->out, got);
    if (st)
        return st;
    const double eps = s->def->dt == RUDNN_F32 ? 0.0 : s->def->dt == RUDNN_F16 ? 0x1p-11 : 0x1p-8;
    for (size_t i = 0; i < s->nref; i++) {
        const double tol = (double)(s->terms[i] + 8) * 0x1p-21 * s->mag[i] + eps * fabs(s->ref[i]) + 1e-30;
        if (!(fabs((double)got[i] - s->ref[i]) <= tol)) {
            printf("faults interpolation: %s, element %zu of %zu: %.9g, expected %.9g\n",
                   s->def->backward ? "interpolate_backward dx" : "interpolate_forward y", i, s->nref,
                   (double)got[i], s->ref[i]);
            return RUDNN_STATUS_INTERNAL;
        }
    }
    return fault_append_tensor(&s->env, &s->out, bytes, size);
}

static void undo(void *p) { (void)p; }

static void teardown(void *p)
{
    interp_state_t *s = p;
    fault_drop_tensor(&s->in);
    fault_drop_tensor(&s->out);
}

#define INTERP_CASE(op, label, def)                                                                          \
    {op,     sizeof(interp_state_t), FAULT_COLD_CONTEXT | FAULT_COLD_QUEUE | FAULT_WARM, setup, prepare, call, \
     unchanged, result, undo, teardown, label, def}

static const fault_case_t cases[] = {
    INTERP_CASE("interpolate_forward", "interpolate_forward (NEAREST, f32, 2D)", 0),
    INTERP_CASE("interpolate_forward", "interpolate_forward (NEAREST_EXACT, bf16, 1D)", 1),
    INTERP_CASE("interpolate_forward", "interpolate_forward (LINEAR, f16, 3D, align)", 2),
    INTERP_CASE("interpolate_forward", "interpolate_forward (CUBIC, f32, 2D, scales)", 3),
    INTERP_CASE("interpolate_backward", "interpolate_backward (LINEAR, f32, 2D)", 4),
    INTERP_CASE("interpolate_backward", "interpolate_backward (CUBIC, bf16, 2D, align)", 5),
    INTERP_CASE("interpolate_backward", "interpolate_backward (NEAREST, f16, 1D)", 6),
};

const fault_family_t fault_family_interpolation = {"interpolation", cases, sizeof cases / sizeof cases[0]};
