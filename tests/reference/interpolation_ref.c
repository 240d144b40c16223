/* Reference of interpolation: see interpolation_ref.h. */
#include "interpolation_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIM ((int64_t)1 << 31)

/* FP32 arithmetic, each result rounded to float on its own (volatile: no contraction into an FMA,
 * no excess precision, whatever the compiler's flags). */
static float f_mul(float a, float b)
{
    volatile float r = a * b;
    return r;
}

static float f_add(float a, float b)
{
    volatile float r = a + b;
    return r;
}

static float f_div(float a, float b)
{
    volatile float r = a / b;
    return r;
}

int interp_ref_valid(const interp_ref_shape_t *s)
{
    if (!s || s->spatial < 1 || s->spatial > INTERP_REF_MAX_SPATIAL)
        return 0;
    if (s->mode < INTERP_REF_NEAREST || s->mode > INTERP_REF_CUBIC)
        return 0;
    if (s->align_corners != 0 && s->align_corners != 1)
        return 0;
    if (s->align_corners && s->mode < INTERP_REF_LINEAR)
        return 0;
    if (s->batch < 0 || s->channels < 0 || s->batch > MAX_DIM || s->channels > MAX_DIM)
        return 0;
    for (int i = 0; i < s->spatial; i++) {
        if (s->in_size[i] < 1 || s->in_size[i] > MAX_DIM || s->out_size[i] < 1 || s->out_size[i] > MAX_DIM)
            return 0;
        if (!isfinite(s->scales[i]) || s->scales[i] < 0.0)
            return 0;
    }
    return 1;
}

float interp_ref_ratio(const interp_ref_shape_t *s, int i)
{
    const int64_t S = s->in_size[i], O = s->out_size[i];
    if (s->mode >= INTERP_REF_LINEAR && s->align_corners)
        return O > 1 ? f_div((float)(S - 1), (float)(O - 1)) : 0.0f;
    if (s->scales[i] > 0.0) {
        volatile float r = (float)(1.0 / s->scales[i]); /* PyTorch: (float)(1.0 / scale) */
        return r;
    }
    return f_div((float)S, (float)O);
}

float interp_ref_source(const interp_ref_shape_t *s, int i, int64_t o)
{
    const float r = interp_ref_ratio(s, i);
    const float of = (float)o;
    switch (s->mode) {
    case INTERP_REF_NEAREST:
        return f_mul(of, r);
    case INTERP_REF_NEAREST_EXACT:
        return f_mul(f_add(of, 0.5f), r);
    default:
        if (s->align_corners)
            return f_mul(of, r);
        {
            float src = f_add(f_mul(f_add(of, 0.5f), r), -0.5f);
            if (s->mode == INTERP_REF_LINEAR && src < 0.0f)
                src = 0.0f;
            return src;
        }
    }
}

/* fl + k clamped into [0, S - 1], fl an integer-valued float of any size: in double (exact for
 * |fl| < 2^52, and huge values clamp the same either way). */
static int64_t clamp_index(float fl, int k, int64_t S)
{
    const double v = (double)fl + (double)k;
    if (v <= 0.0)
        return 0;
    if (v >= (double)(S - 1))
        return S - 1;
    return (int64_t)v;
}

/* Keys' cubic convolution, PyTorch's cubic_convolution1 (|x| <= 1) and cubic_convolution2 (1 < |x| < 2). */
static double cubic1(double x)
{
    const double A = INTERP_REF_CUBIC_A;
    return ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
}

static double cubic2(double x)
{
    const double A = INTERP_REF_CUBIC_A;
    return ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
}

int interp_ref_taps_per_dim(int mode)
{
    return mode == INTERP_REF_CUBIC ? 4 : mode == INTERP_REF_LINEAR ? 2 : 1;
}

int64_t interp_ref_terms_forward(const interp_ref_shape_t *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->spatial; i++)
        n *= interp_ref_taps_per_dim(s->mode);
    return n;
}

int interp_ref_taps(const interp_ref_shape_t *s, int i, int64_t o, int64_t idx[INTERP_REF_MAX_TAPS],
                    double w[INTERP_REF_MAX_TAPS])
{
    const int64_t S = s->in_size[i];
    const float src = interp_ref_source(s, i, o);
    if (isnan(src))
        return 0;
    const float fl = floorf(src);
    if (s->mode == INTERP_REF_NEAREST || s->mode == INTERP_REF_NEAREST_EXACT) {
        idx[0] = clamp_index(fl, 0, S); /* min(floor(src), S - 1); src >= 0 */
        w[0] = 1.0;
        return 1;
    }
    volatile float tv = src - fl; /* float, as PyTorch: t = src - floor(src) */
    const double t = isfinite(src) ? (double)tv : 0.0;
    if (s->mode == INTERP_REF_LINEAR) {
        idx[0] = clamp_index(fl, 0, S), idx[1] = clamp_index(fl, 1, S);
        w[0] = 1.0 - t, w[1] = t;
        return 2;
    }
    for (int k = 0; k < 4; k++)
        idx[k] = clamp_index(fl, k - 1, S);
    w[0] = cubic2(t + 1.0);
    w[1] = cubic1(t);
    w[2] = cubic1(1.0 - t);
    w[3] = cubic2(2.0 - t);
    return 4;
}

int64_t interp_ref_x_count(const interp_ref_shape_t *s)
{
    if (!interp_ref_valid(s))
        return 0;
    int64_t n = s->batch * s->channels;
    for (int i = 0; i < s->spatial; i++)
        n *= s->in_size[i];
    return n;
}

int64_t interp_ref_y_count(const interp_ref_shape_t *s)
{
    if (!interp_ref_valid(s))
        return 0;
    int64_t n = s->batch * s->channels;
    for (int i = 0; i < s->spatial; i++)
        n *= s->out_size[i];
    return n;
}

double interp_ref_max_source(const interp_ref_shape_t *s)
{
    double m = 0.0;
    for (int i = 0; i < s->spatial; i++)
        for (int64_t o = 0; o < s->out_size[i]; o++) {
            const double v = fabs((double)interp_ref_source(s, i, o));
            if (v > m)
                m = v;
        }
    return m;
}

/* Every dim's taps for every output index: table[i][o * MAX_TAPS + k]. */
typedef struct tap_table {
    int count; /* taps per dim */
    int64_t *idx[INTERP_REF_MAX_SPATIAL];
    double *w[INTERP_REF_MAX_SPATIAL];
} tap_table_t;

static void table_free(tap_table_t *t)
{
    for (int i = 0; i < INTERP_REF_MAX_SPATIAL; i++)
        free(t->idx[i]), free(t->w[i]);
}

static int table_make(const interp_ref_shape_t *s, tap_table_t *t)
{
    memset(t, 0, sizeof *t);
    t->count = interp_ref_taps_per_dim(s->mode);
    for (int i = 0; i < s->spatial; i++) {
        const size_t n = (size_t)s->out_size[i] * INTERP_REF_MAX_TAPS;
        t->idx[i] = malloc(sizeof(int64_t) * n);
        t->w[i] = malloc(sizeof(double) * n);
        if (!t->idx[i] || !t->w[i]) {
            table_free(t);
            return -1;
        }
        for (int64_t o = 0; o < s->out_size[i]; o++)
            if (interp_ref_taps(s, i, o, t->idx[i] + o * INTERP_REF_MAX_TAPS, t->w[i] + o * INTERP_REF_MAX_TAPS) !=
                t->count) {
                table_free(t);
                return -1;
            }
    }
    return 0;
}

/* Walks every (plane, output, tap combination): calls visit with the output's flat index, the input's
 * flat index and the combination's weight. */
typedef void (*visit_fn)(void *ctx, int64_t out_flat, int64_t in_flat, double w);

static void walk(const interp_ref_shape_t *s, const tap_table_t *t, visit_fn visit, void *ctx)
{
    const int d = s->spatial;
    int64_t in_plane = 1, out_plane = 1;
    for (int i = 0; i < d; i++)
        in_plane *= s->in_size[i], out_plane *= s->out_size[i];
    const int64_t planes = s->batch * s->channels;
    int64_t combos = 1;
    for (int i = 0; i < d; i++)
        combos *= t->count;
    for (int64_t p = 0; p < planes; p++)
        for (int64_t of = 0; of < out_plane; of++) {
            int64_t o[INTERP_REF_MAX_SPATIAL], rem = of;
            for (int i = d - 1; i >= 0; i--) {
                o[i] = rem % s->out_size[i];
                rem /= s->out_size[i];
            }
            for (int64_t k = 0; k < combos; k++) {
                int64_t kr = k, in_flat = 0;
                double w = 1.0;
                int tap[INTERP_REF_MAX_SPATIAL];
                for (int i = d - 1; i >= 0; i--) {
                    tap[i] = (int)(kr % t->count);
                    kr /= t->count;
                }
                for (int i = 0; i < d; i++) {
                    const int64_t at = o[i] * INTERP_REF_MAX_TAPS + tap[i];
                    in_flat = in_flat * s->in_size[i] + t->idx[i][at];
                    w *= t->w[i][at];
                }
                visit(ctx, p * out_plane + of, p * in_plane + in_flat, w);
            }
        }
}

typedef struct fwd_ctx {
    const double *x;
    double *y, *y_abs, *y_abs_in;
} fwd_ctx_t;

static void fwd_visit(void *c, int64_t out_flat, int64_t in_flat, double w)
{
    fwd_ctx_t *f = c;
    const double v = f->x[in_flat];
    f->y[out_flat] += w * v;
    if (f->y_abs)
        f->y_abs[out_flat] += fabs(w) * fabs(v);
    if (f->y_abs_in)
        f->y_abs_in[out_flat] += fabs(v);
}

int interp_ref_forward(const interp_ref_shape_t *s, const double *x, double *y, double *y_abs, double *y_abs_in)
{
    if (!interp_ref_valid(s))
        return -1;
    tap_table_t t;
    if (table_make(s, &t))
        return -1;
    const size_t ny = (size_t)interp_ref_y_count(s);
    memset(y, 0, sizeof(double) * ny);
    if (y_abs)
        memset(y_abs, 0, sizeof(double) * ny);
    if (y_abs_in)
        memset(y_abs_in, 0, sizeof(double) * ny);
    fwd_ctx_t f = {x, y, y_abs, y_abs_in};
    walk(s, &t, fwd_visit, &f);
    table_free(&t);
    return 0;
}

typedef struct bwd_ctx {
    const double *dy;
    double *dx, *dx_abs, *dx_abs_in;
    int64_t *terms;
} bwd_ctx_t;

static void bwd_visit(void *c, int64_t out_flat, int64_t in_flat, double w)
{
    bwd_ctx_t *b = c;
    const double v = b->dy[out_flat];
    b->dx[in_flat] += w * v;
    if (b->dx_abs)
        b->dx_abs[in_flat] += fabs(w) * fabs(v);
    if (b->dx_abs_in)
        b->dx_abs_in[in_flat] += fabs(v);
    if (b->terms)
        b->terms[in_flat]++;
}

int interp_ref_backward(const interp_ref_shape_t *s, const double *dy, double *dx, double *dx_abs,
                        double *dx_abs_in, int64_t *dx_terms)
{
    if (!interp_ref_valid(s))
        return -1;
    tap_table_t t;
    if (table_make(s, &t))
        return -1;
    const size_t nx = (size_t)interp_ref_x_count(s);
    memset(dx, 0, sizeof(double) * nx);
    if (dx_abs)
        memset(dx_abs, 0, sizeof(double) * nx);
    if (dx_abs_in)
        memset(dx_abs_in, 0, sizeof(double) * nx);
    if (dx_terms)
        memset(dx_terms, 0, sizeof(int64_t) * nx);
    bwd_ctx_t b = {dy, dx, dx_abs, dx_abs_in, dx_terms};
    walk(s, &t, bwd_visit, &b);
    table_free(&t);
    return 0;
}
