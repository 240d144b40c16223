/* Reference of grid sampling: see grid_sample_ref.h. */
#include "grid_sample_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIM ((int64_t)1 << 31)

/* A value rounded to FP32 (unless exact_coords): every coordinate operation below takes FP32
 * operands (held in double) and rounds its result so. Rounding the double result of +, -, * or /
 * of two floats to float gives the correctly rounded float result (53 >= 2 * 24 + 2 bits), so this
 * is FP32 arithmetic, one rounding per operation, nothing contracted; volatile keeps any excess
 * precision away. */
static double rnd(const gs_ref_shape_t *s, double v)
{
    if (s->exact_coords)
        return v;
    volatile float f = (float)v;
    return (double)f;
}

int gs_ref_valid(const gs_ref_shape_t *s)
{
    if (!s || (s->spatial != 2 && s->spatial != 3))
        return 0;
    if (s->mode < GS_REF_BILINEAR || s->mode > GS_REF_BICUBIC)
        return 0;
    if (s->padding < GS_REF_ZEROS || s->padding > GS_REF_REFLECTION)
        return 0;
    if (s->align_corners != 0 && s->align_corners != 1)
        return 0;
    if (s->mode == GS_REF_BICUBIC && s->spatial != 2)
        return 0;
    if (s->batch < 0 || s->channels < 0 || s->batch > MAX_DIM || s->channels > MAX_DIM)
        return 0;
    for (int i = 0; i < s->spatial; i++)
        if (s->in_size[i] < 1 || s->in_size[i] > MAX_DIM || s->out_size[i] < 0 || s->out_size[i] > MAX_DIM)
            return 0;
    return 1;
}

static int64_t plane(const int64_t *sizes, int d)
{
    int64_t n = 1;
    for (int i = 0; i < d; i++)
        n *= sizes[i];
    return n;
}

int64_t gs_ref_x_count(const gs_ref_shape_t *s)
{
    return gs_ref_valid(s) ? s->batch * s->channels * plane(s->in_size, s->spatial) : 0;
}

int64_t gs_ref_y_count(const gs_ref_shape_t *s)
{
    return gs_ref_valid(s) ? s->batch * s->channels * plane(s->out_size, s->spatial) : 0;
}

int64_t gs_ref_points(const gs_ref_shape_t *s) { return gs_ref_valid(s) ? s->batch * plane(s->out_size, s->spatial) : 0; }

int64_t gs_ref_grid_count(const gs_ref_shape_t *s) { return gs_ref_points(s) * (s ? s->spatial : 0); }

/* ---- coordinates ------------------------------------------------------------------------------ */

double gs_ref_unnormalize(const gs_ref_shape_t *s, int64_t S, double g)
{
    g = rnd(s, g);
    const double g1 = rnd(s, g + 1.0);
    if (s->align_corners)
        return rnd(s, rnd(s, g1 / 2.0) * rnd(s, (double)(S - 1)));
    return rnd(s, rnd(s, rnd(s, g1 * rnd(s, (double)S)) - 1.0) / 2.0);
}

/* PyTorch's clip_coordinates (CPU): std::min(S - 1, std::max(c, 0)); a NaN becomes S - 1. */
static double clip(const gs_ref_shape_t *s, int64_t S, double c)
{
    const double hi = rnd(s, (double)(S - 1));
    const double m = c < 0.0 ? 0.0 : c; /* std::max(c, 0): (c < 0) ? 0 : c */
    return m < hi ? m : hi;             /* std::min(hi, m): (m < hi) ? m : hi */
}

/* PyTorch's reflect_coordinates (and its _set_grad's multiplier through *mult when not NULL). */
static double reflect(const gs_ref_shape_t *s, double c, double twice_low, double twice_high, double *mult)
{
    if (twice_low == twice_high) {
        if (mult)
            *mult = 0.0;
        return 0.0;
    }
    const double mn = rnd(s, twice_low / 2.0), span = rnd(s, rnd(s, twice_high - twice_low) / 2.0);
    double in = rnd(s, c - mn), m = 1.0;
    if (in < 0.0) {
        m = -1.0;
        in = -in;
    }
    const double extra = fmod(in, span); /* exact */
    const double flips = floor(rnd(s, in / span));
    /* (int)flips in PyTorch: past the int range undefined; counted as even here (x86's INT_MIN) */
    const int odd = isfinite(flips) && flips < 2147483648.0 ? (int)((int64_t)flips % 2 != 0) : 0;
    if (mult)
        *mult = odd ? -m : m;
    return odd ? rnd(s, rnd(s, span - extra) + mn) : rnd(s, extra + mn);
}

static void reflect_bounds(const gs_ref_shape_t *s, int64_t S, double *lo, double *hi)
{
    if (s->align_corners)
        *lo = 0.0, *hi = rnd(s, (double)(2 * (S - 1)));
    else
        *lo = -1.0, *hi = rnd(s, (double)(2 * S - 1));
}

/* PyTorch's safe_downgrade_to_int_range: x > INT_MAX - 1 (2^31 in float) or x < INT_MIN or not
 * finite reads as -100. */
static double safe(double c)
{
    if (!isfinite(c) || c > 2147483648.0 || c < -2147483648.0)
        return -100.0;
    return c;
}

double gs_ref_pad(const gs_ref_shape_t *s, int64_t S, double c)
{
    if (s->padding == GS_REF_BORDER) {
        c = clip(s, S, c);
    } else if (s->padding == GS_REF_REFLECTION) {
        double lo, hi;
        reflect_bounds(s, S, &lo, &hi);
        c = clip(s, S, reflect(s, c, lo, hi, NULL));
    }
    return safe(c);
}

/* d pad(c) / dc as PyTorch's *_set_grad functions give it: clip_coordinates_set_grad is 0 for
 * c <= 0 and c >= S - 1 (on the reflected coordinate for REFLECTION), 1 between; reflection adds
 * its sign. */
static double pad_slope(const gs_ref_shape_t *s, int64_t S, double c)
{
    if (s->padding == GS_REF_ZEROS)
        return 1.0;
    double m = 1.0;
    if (s->padding == GS_REF_REFLECTION) {
        double lo, hi;
        reflect_bounds(s, S, &lo, &hi);
        c = reflect(s, c, lo, hi, &m);
    }
    if (c <= 0.0 || c >= rnd(s, (double)(S - 1)))
        return 0.0;
    return m;
}

/* Keys' cubic convolution (PyTorch's cubic_convolution1 for |x| <= 1, cubic_convolution2 for
 * 1 < |x| < 2) and their derivatives. */
static double cubic1(double x)
{
    const double A = GS_REF_CUBIC_A;
    return ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
}

static double cubic2(double x)
{
    const double A = GS_REF_CUBIC_A;
    return ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
}

static double cubic1_d(double x)
{
    const double A = GS_REF_CUBIC_A;
    return (3.0 * (A + 2.0) * x - 2.0 * (A + 3.0)) * x;
}

static double cubic2_d(double x)
{
    const double A = GS_REF_CUBIC_A;
    return (3.0 * A * x - 10.0 * A) * x + 8.0 * A;
}

/* An index of a padded coordinate (integer-valued or -100) inside 0 .. S - 1, or -1. */
static int64_t inside(double c, int64_t S)
{
    if (!(c >= 0.0) || c > (double)(S - 1))
        return -1;
    return (int64_t)c;
}

int gs_ref_dim_taps(const gs_ref_shape_t *s, int64_t S, double g, int64_t idx[GS_REF_MAX_TAPS],
                    double w[GS_REF_MAX_TAPS], double dw[GS_REF_MAX_TAPS], double *slope)
{
    const double u = gs_ref_unnormalize(s, S, g);
    const double unslope = s->align_corners ? (double)(S - 1) / 2.0 : (double)S / 2.0;
    if (slope)
        *slope = unslope;
    if (s->mode == GS_REF_BICUBIC) {
        const double fl = floor(u), t = u - fl; /* NaN for a non-finite u */
        w[0] = cubic2(t + 1.0), w[1] = cubic1(t), w[2] = cubic1(1.0 - t), w[3] = cubic2(2.0 - t);
        dw[0] = cubic2_d(t + 1.0) * unslope, dw[1] = cubic1_d(t) * unslope;
        dw[2] = -cubic1_d(1.0 - t) * unslope, dw[3] = -cubic2_d(2.0 - t) * unslope;
        for (int k = 0; k < 4; k++) {
            const double c = rnd(s, rnd(s, fl - 1.0) + (double)k); /* PyTorch's ix_nw - 1 + i */
            idx[k] = inside(gs_ref_pad(s, S, c), S);
        }
        return 4;
    }
    const double i = gs_ref_pad(s, S, u); /* finite: the -100 rule */
    if (s->mode == GS_REF_NEAREST) {
        idx[0] = inside(nearbyint(i), S); /* round half to even (the default rounding mode) */
        w[0] = 1.0, dw[0] = 0.0;
        return 1;
    }
    const double fl = floor(i), t = i - fl;
    const int64_t i0 = (int64_t)fl;
    const double sl = unslope * pad_slope(s, S, u);
    idx[0] = inside((double)i0, S), idx[1] = inside((double)(i0 + 1), S);
    w[0] = 1.0 - t, w[1] = t;
    dw[0] = -sl, dw[1] = sl;
    return 2;
}

/* ---- a point's taps --------------------------------------------------------------------------- */

typedef struct point_taps {
    int n[GS_REF_MAX_SPATIAL];
    int64_t idx[GS_REF_MAX_SPATIAL][GS_REF_MAX_TAPS];
    double w[GS_REF_MAX_SPATIAL][GS_REF_MAX_TAPS], dw[GS_REF_MAX_SPATIAL][GS_REF_MAX_TAPS];
    double slope[GS_REF_MAX_SPATIAL];
    int combos;
} point_taps_t;

/* coords in grid order (coordinate k along spatial dim d - 1 - k). */
static void point_taps(const gs_ref_shape_t *s, const double *coords, point_taps_t *t)
{
    const int d = s->spatial;
    t->combos = 1;
    for (int j = 0; j < d; j++) {
        t->n[j] = gs_ref_dim_taps(s, s->in_size[j], coords[d - 1 - j], t->idx[j], t->w[j], t->dw[j], &t->slope[j]);
        t->combos *= t->n[j];
    }
}

/* Combination k of t's taps: its spatial flat index within a plane (-1 when a tap is outside), the
 * product of its weights, and (dprod[j]) that product with dim j's weight replaced by its
 * derivative. */
static int64_t combo(const gs_ref_shape_t *s, const point_taps_t *t, int k, double *w, double dprod[GS_REF_MAX_SPATIAL])
{
    const int d = s->spatial;
    int tap[GS_REF_MAX_SPATIAL];
    for (int j = d - 1; j >= 0; j--) {
        tap[j] = k % t->n[j];
        k /= t->n[j];
    }
    int64_t flat = 0;
    int out = 0;
    *w = 1.0;
    for (int j = 0; j < d; j++) {
        const int64_t i = t->idx[j][tap[j]];
        out |= i < 0;
        flat = flat * s->in_size[j] + (i < 0 ? 0 : i);
        *w *= t->w[j][tap[j]];
    }
    if (dprod)
        for (int j = 0; j < d; j++) {
            double p = 1.0;
            for (int q = 0; q < d; q++)
                p *= q == j ? t->dw[q][tap[q]] : t->w[q][tap[q]];
            dprod[j] = p;
        }
    return out ? -1 : flat;
}

/* y of one point (and its bound terms) for every channel of row n: y_point[c * stride]. */
static void point_forward(const gs_ref_shape_t *s, const double *x, int64_t n, const point_taps_t *t, double *yp,
                          double *yabs, double *yin, int64_t *yterms, int64_t stride)
{
    const int64_t pl = plane(s->in_size, s->spatial);
    for (int64_t c = 0; c < s->channels; c++) {
        const double *xp = x + (n * s->channels + c) * pl;
        double acc = 0.0, a = 0.0, ai = 0.0;
        int64_t terms = 0;
        for (int k = 0; k < t->combos; k++) {
            double w;
            const int64_t at = combo(s, t, k, &w, NULL);
            if (at < 0) {
                if (s->mode == GS_REF_BICUBIC)
                    acc += w * 0.0; /* get_value_bounded's 0, times the weight (NaN stays NaN) */
                continue;
            }
            acc += w * xp[at];
            a += fabs(w * xp[at]);
            ai += fabs(xp[at]);
            terms++;
        }
        yp[c * stride] = acc;
        if (yabs)
            yabs[c * stride] = a;
        if (yin)
            yin[c * stride] = ai;
        if (yterms)
            yterms[c * stride] = terms;
    }
}

int gs_ref_point(const gs_ref_shape_t *s, const double *x, int64_t n, const double *coords, double *y_point)
{
    if (!gs_ref_valid(s) || n < 0 || n >= s->batch)
        return -1;
    point_taps_t t;
    point_taps(s, coords, &t);
    point_forward(s, x, n, &t, y_point, NULL, NULL, NULL, 1);
    return 0;
}

int gs_ref_forward(const gs_ref_shape_t *s, const double *x, const double *grid, double *y, double *y_abs,
                   double *y_abs_in, int64_t *y_terms)
{
    if (!gs_ref_valid(s))
        return -1;
    const int d = s->spatial;
    const int64_t np = plane(s->out_size, d);
    for (int64_t n = 0; n < s->batch; n++)
        for (int64_t p = 0; p < np; p++) {
            point_taps_t t;
            point_taps(s, grid + (n * np + p) * d, &t);
            const int64_t o = n * s->channels * np + p;
            point_forward(s, x, n, &t, y + o, y_abs ? y_abs + o : NULL, y_abs_in ? y_abs_in + o : NULL,
                          y_terms ? y_terms + o : NULL, np);
        }
    return 0;
}

int gs_ref_backward(const gs_ref_shape_t *s, const double *x, const double *grid, const double *dy, double *dx,
                    double *dx_abs, double *dx_abs_in, int64_t *dx_terms, double *dgrid, double *dgrid_abs,
                    double *dgrid_abs_in, int64_t *dgrid_terms)
{
    if (!gs_ref_valid(s))
        return -1;
    const int d = s->spatial;
    const int64_t np = plane(s->out_size, d), pl = plane(s->in_size, d);
    const size_t nx = (size_t)gs_ref_x_count(s), ng = (size_t)gs_ref_grid_count(s);
    if (dx) {
        memset(dx, 0, sizeof(double) * nx);
        if (dx_abs)
            memset(dx_abs, 0, sizeof(double) * nx);
        if (dx_abs_in)
            memset(dx_abs_in, 0, sizeof(double) * nx);
        if (dx_terms)
            memset(dx_terms, 0, sizeof(int64_t) * nx);
    }
    if (dgrid) {
        memset(dgrid, 0, sizeof(double) * ng);
        if (dgrid_abs)
            memset(dgrid_abs, 0, sizeof(double) * ng);
        if (dgrid_abs_in)
            memset(dgrid_abs_in, 0, sizeof(double) * ng);
        if (dgrid_terms)
            memset(dgrid_terms, 0, sizeof(int64_t) * ng);
    }
    for (int64_t n = 0; n < s->batch; n++)
        for (int64_t p = 0; p < np; p++) {
            point_taps_t t;
            const int64_t pt = n * np + p;
            point_taps(s, grid + pt * d, &t);
            for (int64_t c = 0; c < s->channels; c++) {
                const int64_t xb = (n * s->channels + c) * pl;
                const double g = dy[(n * s->channels + c) * np + p];
                for (int k = 0; k < t.combos; k++) {
                    double w, dp[GS_REF_MAX_SPATIAL];
                    const int64_t at = combo(s, &t, k, &w, dp);
                    if (dx && at >= 0) {
                        dx[xb + at] += w * g;
                        if (dx_abs)
                            dx_abs[xb + at] += fabs(w * g);
                        if (dx_abs_in)
                            dx_abs_in[xb + at] += fabs(g);
                        if (dx_terms)
                            dx_terms[xb + at]++;
                    }
                    if (!dgrid || (at < 0 && s->mode != GS_REF_BICUBIC))
                        continue;
                    const double v = at >= 0 ? x[xb + at] : 0.0;
                    for (int j = 0; j < d; j++) {
                        const int64_t o = pt * d + (d - 1 - j); /* coordinate d - 1 - j runs along dim j */
                        dgrid[o] += g * v * dp[j];
                        if (at < 0)
                            continue;
                        if (dgrid_abs)
                            dgrid_abs[o] += fabs(g * v * dp[j]);
                        if (dgrid_abs_in)
                            dgrid_abs_in[o] += fabs(g * v * t.slope[j]);
                        if (dgrid_terms)
                            dgrid_terms[o]++;
                    }
                }
            }
        }
    return 0;
}
