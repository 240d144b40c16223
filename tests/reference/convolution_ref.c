/* FP64 reference of convolution: see convolution_ref.h. */
#include "convolution_ref.h"

#include <math.h>
#include <string.h>

/* The shape with its d dims as the last of three (missing leading dims: S = R = P = 1, stride 1,
 * padding 0, dilation 1), so one loop nest serves 1, 2 and 3 dims. */
typedef struct dims3 {
    int64_t N, C, K, G, Cg, Kg;
    int64_t S[3], R[3], P[3], st[3], pad[3], dil[3];
    int64_t Sn, Rn, Pn; /* products */
} dims3_t;

static int valid(const conv_ref_shape_t *s)
{
    if (!s || s->spatial < 1 || s->spatial > CONV_REF_MAX_SPATIAL || s->batch < 0 || s->in_channels < 1 ||
        s->out_channels < 1 || s->groups < 1 || s->in_channels % s->groups || s->out_channels % s->groups)
        return 0;
    for (int i = 0; i < s->spatial; i++)
        if (s->in_size[i] < 1 || s->filter_size[i] < 1 || s->stride[i] < 1 || s->padding[i] < 0 ||
            s->dilation[i] < 1)
            return 0;
    return 1;
}

int conv_ref_out_size(const conv_ref_shape_t *s, int64_t out_size[CONV_REF_MAX_SPATIAL])
{
    if (!valid(s))
        return -1;
    int64_t p[CONV_REF_MAX_SPATIAL];
    for (int i = 0; i < s->spatial; i++) {
        const int64_t span = s->in_size[i] + 2 * s->padding[i] - s->dilation[i] * (s->filter_size[i] - 1) - 1;
        if (span < 0) /* floor of a negative quotient: below 1 */
            return -1;
        p[i] = span / s->stride[i] + 1;
    }
    for (int i = 0; i < s->spatial; i++)
        out_size[i] = p[i];
    return 0;
}

static int to_dims3(const conv_ref_shape_t *s, dims3_t *d)
{
    int64_t out[CONV_REF_MAX_SPATIAL];
    if (conv_ref_out_size(s, out))
        return -1;
    d->N = s->batch, d->C = s->in_channels, d->K = s->out_channels, d->G = s->groups;
    d->Cg = d->C / d->G, d->Kg = d->K / d->G;
    const int lead = 3 - s->spatial;
    d->Sn = d->Rn = d->Pn = 1;
    for (int i = 0; i < 3; i++) {
        const int j = i - lead; /* the shape's dim, or < 0 for a missing leading one */
        d->S[i] = j < 0 ? 1 : s->in_size[j];
        d->R[i] = j < 0 ? 1 : s->filter_size[j];
        d->P[i] = j < 0 ? 1 : out[j];
        d->st[i] = j < 0 ? 1 : s->stride[j];
        d->pad[i] = j < 0 ? 0 : s->padding[j];
        d->dil[i] = j < 0 ? 1 : s->dilation[j];
        d->Sn *= d->S[i], d->Rn *= d->R[i], d->Pn *= d->P[i];
    }
    return 0;
}

int64_t conv_ref_x_count(const conv_ref_shape_t *s)
{
    dims3_t d;
    return to_dims3(s, &d) ? 0 : d.N * d.C * d.Sn;
}

int64_t conv_ref_w_count(const conv_ref_shape_t *s)
{
    dims3_t d;
    return to_dims3(s, &d) ? 0 : d.K * d.Cg * d.Rn;
}

int64_t conv_ref_y_count(const conv_ref_shape_t *s)
{
    dims3_t d;
    return to_dims3(s, &d) ? 0 : d.N * d.K * d.Pn;
}

int64_t conv_ref_max_terms_forward(const conv_ref_shape_t *s)
{
    dims3_t d;
    return to_dims3(s, &d) ? 0 : d.Cg * d.Rn;
}

int64_t conv_ref_max_terms_data(const conv_ref_shape_t *s)
{
    dims3_t d;
    return to_dims3(s, &d) ? 0 : d.Kg * d.Rn;
}

int64_t conv_ref_max_terms_weight(const conv_ref_shape_t *s)
{
    dims3_t d;
    return to_dims3(s, &d) ? 0 : d.N * d.Pn;
}

/* Which output a walk adds its terms into. */
enum { INTO_Y, INTO_X, INTO_W };

/* Walks every term x[xi] w[wi] of every y[yi] (padding terms left out) and adds
 * a[xi or yi] * b[wi or xi or yi] into out[...] and its absolute value into out_abs[...]:
 *   INTO_Y: out[yi] += a[xi] b[wi]   (a = x,  b = w)
 *   INTO_X: out[xi] += a[yi] b[wi]   (a = dy, b = w)
 *   INTO_W: out[wi] += a[yi] b[xi]   (a = dy, b = x) */
static void walk(const dims3_t *d, int into, const double *a, const double *b, double *out, double *out_abs)
{
    for (int64_t n = 0; n < d->N; n++)
        for (int64_t k = 0; k < d->K; k++) {
            const int64_t g = k / d->Kg;
            for (int64_t p0 = 0; p0 < d->P[0]; p0++)
                for (int64_t p1 = 0; p1 < d->P[1]; p1++)
                    for (int64_t p2 = 0; p2 < d->P[2]; p2++) {
                        const int64_t yi = ((n * d->K + k) * d->P[0] + p0) * d->P[1] * d->P[2] + p1 * d->P[2] + p2;
                        for (int64_t c = 0; c < d->Cg; c++)
                            for (int64_t r0 = 0; r0 < d->R[0]; r0++)
                                for (int64_t r1 = 0; r1 < d->R[1]; r1++)
                                    for (int64_t r2 = 0; r2 < d->R[2]; r2++) {
                                        const int64_t q0 = p0 * d->st[0] - d->pad[0] + r0 * d->dil[0];
                                        const int64_t q1 = p1 * d->st[1] - d->pad[1] + r1 * d->dil[1];
                                        const int64_t q2 = p2 * d->st[2] - d->pad[2] + r2 * d->dil[2];
                                        if (q0 < 0 || q0 >= d->S[0] || q1 < 0 || q1 >= d->S[1] || q2 < 0 ||
                                            q2 >= d->S[2])
                                            continue; /* padding: the term is zero */
                                        const int64_t xi = ((n * d->C + g * d->Cg + c) * d->S[0] + q0) * d->S[1] *
                                                               d->S[2] +
                                                           q1 * d->S[2] + q2;
                                        const int64_t wi = ((k * d->Cg + c) * d->R[0] + r0) * d->R[1] * d->R[2] +
                                                           r1 * d->R[2] + r2;
                                        double t;
                                        int64_t o;
                                        if (into == INTO_Y)
                                            t = a[xi] * b[wi], o = yi;
                                        else if (into == INTO_X)
                                            t = a[yi] * b[wi], o = xi;
                                        else
                                            t = a[yi] * b[xi], o = wi;
                                        out[o] += t;
                                        if (out_abs)
                                            out_abs[o] += fabs(t);
                                    }
                    }
        }
}

static void zero(double *p, int64_t n)
{
    if (p && n > 0)
        memset(p, 0, sizeof(double) * (size_t)n);
}

int conv_ref_forward(const conv_ref_shape_t *s, const double *x, const double *w, const double *bias, double *y,
                     double *y_abs)
{
    dims3_t d;
    if (to_dims3(s, &d))
        return -1;
    const int64_t ny = d.N * d.K * d.Pn;
    zero(y, ny), zero(y_abs, ny);
    walk(&d, INTO_Y, x, w, y, y_abs);
    if (bias)
        for (int64_t i = 0; i < ny; i++) {
            const int64_t k = (i / d.Pn) % d.K;
            y[i] += bias[k];
            if (y_abs)
                y_abs[i] += fabs(bias[k]);
        }
    return 0;
}

int conv_ref_data_backward(const conv_ref_shape_t *s, const double *dy, const double *w, double *dx, double *dx_abs)
{
    dims3_t d;
    if (to_dims3(s, &d))
        return -1;
    zero(dx, d.N * d.C * d.Sn), zero(dx_abs, d.N * d.C * d.Sn);
    walk(&d, INTO_X, dy, w, dx, dx_abs);
    return 0;
}

int conv_ref_weight_backward(const conv_ref_shape_t *s, const double *x, const double *dy, double *dw,
                             double *dw_abs, double *dbias, double *dbias_abs)
{
    dims3_t d;
    if (to_dims3(s, &d))
        return -1;
    zero(dw, d.K * d.Cg * d.Rn), zero(dw_abs, d.K * d.Cg * d.Rn);
    walk(&d, INTO_W, dy, x, dw, dw_abs);
    if (dbias) {
        zero(dbias, d.K), zero(dbias_abs, d.K);
        for (int64_t n = 0; n < d.N; n++)
            for (int64_t k = 0; k < d.K; k++)
                for (int64_t p = 0; p < d.Pn; p++) {
                    const double t = dy[(n * d.K + k) * d.Pn + p];
                    dbias[k] += t;
                    if (dbias_abs)
                        dbias_abs[k] += fabs(t);
                }
    }
    return 0;
}
