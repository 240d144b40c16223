/* FP64 reference of pooling: see pooling_ref.h. */
#include "pooling_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PARAM_MAX ((int64_t)1 << 24)

/* floor(a / b) and ceil(a / b) of the real numbers, b >= 1 */
static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

static int params_ok(const pool_ref_shape_t *s)
{
    if (s->mode != POOL_REF_MAX && s->mode != POOL_REF_AVG_INCLUDE_PAD && s->mode != POOL_REF_AVG_EXCLUDE_PAD)
        return 0;
    if (s->ceil_mode != 0 && s->ceil_mode != 1)
        return 0;
    for (int i = 0; i < s->spatial; i++) {
        if (s->window[i] < 1 || s->window[i] > PARAM_MAX || s->stride[i] < 1 || s->stride[i] > PARAM_MAX)
            return 0;
        if (s->dilation[i] < 1 || s->dilation[i] > PARAM_MAX)
            return 0;
        if (s->mode != POOL_REF_MAX && s->dilation[i] != 1)
            return 0;
        if (s->padding[i] < 0 || s->padding[i] > s->window[i] / 2)
            return 0;
    }
    return 1;
}

int pool_ref_out_size(const pool_ref_shape_t *s, int64_t out_size[POOL_REF_MAX_SPATIAL])
{
    if (s->spatial < 1 || s->spatial > POOL_REF_MAX_SPATIAL)
        return POOL_REF_BAD_SHAPE;
    if (!params_ok(s))
        return POOL_REF_BAD_PARAM;
    if (s->batch < 0 || s->channels < 0)
        return POOL_REF_BAD_SHAPE;
    for (int i = 0; i < s->spatial; i++) {
        const int64_t S = s->in_size[i], pad = s->padding[i], st = s->stride[i];
        if (S < 1)
            return POOL_REF_BAD_SHAPE;
        const int64_t num = S + 2 * pad - s->dilation[i] * (s->window[i] - 1) - 1;
        int64_t P = (s->ceil_mode ? ceil_div(num, st) : floor_div(num, st)) + 1;
        if (s->ceil_mode && P >= 1 && (P - 1) * st >= S + pad)
            P--;
        if (P < 1)
            return POOL_REF_BAD_SHAPE;
        out_size[i] = P;
    }
    return POOL_REF_OK;
}

/* The problem with three spatial dims, the op's d last (leading ones: size 1, window 1). */
typedef struct dims3 {
    int mode;
    int64_t N, C;
    int64_t S[3], P[3], R[3], st[3], pad[3], dil[3];
} dims3_t;

static int to_dims3(const pool_ref_shape_t *s, dims3_t *d)
{
    int64_t P[POOL_REF_MAX_SPATIAL];
    if (pool_ref_out_size(s, P) != POOL_REF_OK)
        return -1;
    memset(d, 0, sizeof *d);
    d->mode = s->mode, d->N = s->batch, d->C = s->channels;
    const int lead = 3 - s->spatial;
    for (int i = 0; i < 3; i++) {
        d->S[i] = d->P[i] = d->R[i] = d->st[i] = d->dil[i] = 1;
        d->pad[i] = 0;
    }
    for (int i = 0; i < s->spatial; i++) {
        d->S[lead + i] = s->in_size[i], d->P[lead + i] = P[i], d->R[lead + i] = s->window[i];
        d->st[lead + i] = s->stride[i], d->pad[lead + i] = s->padding[i], d->dil[lead + i] = s->dilation[i];
    }
    return 0;
}

int64_t pool_ref_x_count(const pool_ref_shape_t *s)
{
    dims3_t d;
    return to_dims3(s, &d) ? 0 : d.N * d.C * d.S[0] * d.S[1] * d.S[2];
}

int64_t pool_ref_y_count(const pool_ref_shape_t *s)
{
    dims3_t d;
    return to_dims3(s, &d) ? 0 : d.N * d.C * d.P[0] * d.P[1] * d.P[2];
}

/* Along dim i for output p: positions inside x and inside the padded input [-pad, S + pad). */
static void dim_counts(const dims3_t *d, int i, int64_t p, int64_t *inside, int64_t *in_padded)
{
    *inside = *in_padded = 0;
    for (int64_t r = 0; r < d->R[i]; r++) {
        const int64_t q = p * d->st[i] - d->pad[i] + r * d->dil[i];
        *inside += q >= 0 && q < d->S[i];
        *in_padded += q >= -d->pad[i] && q < d->S[i] + d->pad[i];
    }
}

static int64_t divisor3(const dims3_t *d, const int64_t p[3])
{
    if (d->mode == POOL_REF_MAX)
        return 1;
    int64_t inside = 1, padded = 1;
    for (int i = 0; i < 3; i++) {
        int64_t a, b;
        dim_counts(d, i, p[i], &a, &b);
        inside *= a, padded *= b;
    }
    return d->mode == POOL_REF_AVG_INCLUDE_PAD ? padded : inside;
}

int64_t pool_ref_divisor(const pool_ref_shape_t *s, const int64_t *p)
{
    dims3_t d;
    if (to_dims3(s, &d))
        return 0;
    int64_t p3[3] = {0, 0, 0};
    for (int i = 0; i < s->spatial; i++)
        p3[3 - s->spatial + i] = p[i];
    return divisor3(&d, p3);
}

int64_t pool_ref_max_overlap(const pool_ref_shape_t *s)
{
    dims3_t d;
    if (to_dims3(s, &d))
        return 0;
    int64_t total = 1;
    for (int i = 0; i < 3; i++) {
        int64_t *cnt = calloc((size_t)d.S[i], sizeof *cnt), best = 0;
        if (!cnt)
            return 0;
        for (int64_t p = 0; p < d.P[i]; p++)
            for (int64_t r = 0; r < d.R[i]; r++) {
                const int64_t q = p * d.st[i] - d.pad[i] + r * d.dil[i];
                if (q >= 0 && q < d.S[i] && ++cnt[q] > best)
                    best = cnt[q];
            }
        free(cnt);
        total *= best;
    }
    return total;
}

int64_t pool_ref_window_count(const pool_ref_shape_t *s)
{
    dims3_t d;
    if (to_dims3(s, &d))
        return 0;
    int64_t total = 1;
    for (int i = 0; i < 3; i++) {
        int64_t best = 0;
        for (int64_t p = 0; p < d.P[i]; p++) {
            int64_t a, b;
            dim_counts(&d, i, p, &a, &b);
            if (a > best)
                best = a;
        }
        total *= best;
    }
    return total;
}

/* The positions of output p's window inside x, in window order, as flattened spatial indices into
 * out (at most R_1 R_2 R_3 of them); returns how many. */
static int64_t window_positions(const dims3_t *d, const int64_t p[3], int64_t *out)
{
    int64_t n = 0;
    for (int64_t r0 = 0; r0 < d->R[0]; r0++) {
        const int64_t q0 = p[0] * d->st[0] - d->pad[0] + r0 * d->dil[0];
        if (q0 < 0 || q0 >= d->S[0])
            continue;
        for (int64_t r1 = 0; r1 < d->R[1]; r1++) {
            const int64_t q1 = p[1] * d->st[1] - d->pad[1] + r1 * d->dil[1];
            if (q1 < 0 || q1 >= d->S[1])
                continue;
            for (int64_t r2 = 0; r2 < d->R[2]; r2++) {
                const int64_t q2 = p[2] * d->st[2] - d->pad[2] + r2 * d->dil[2];
                if (q2 < 0 || q2 >= d->S[2])
                    continue;
                out[n++] = (q0 * d->S[1] + q1) * d->S[2] + q2;
            }
        }
    }
    return n;
}

/* MAX over the positions pos[0..n) of plane (one (n, c) of x): the argmax's flattened index (-1 when
 * n = 0) and the value. */
static int64_t argmax(const double *plane, const int64_t *pos, int64_t n, double *value)
{
    int64_t best = -1;
    double v = -INFINITY;
    for (int64_t k = 0; k < n; k++) {
        const double e = plane[pos[k]];
        if (isnan(e)) { /* the first NaN wins for good */
            *value = e;
            return pos[k];
        }
        if (best < 0 || e > v) /* strictly larger: a tie keeps the earlier */
            best = pos[k], v = e;
    }
    *value = v;
    return best;
}

int pool_ref_forward(const pool_ref_shape_t *s, const double *x, double *y, int64_t *indices, double *y_abs)
{
    dims3_t d;
    if (to_dims3(s, &d))
        return -1;
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)(d.R[0] * d.R[1] * d.R[2]));
    if (!pos)
        return -1;
    const int64_t plane_in = d.S[0] * d.S[1] * d.S[2], plane_out = d.P[0] * d.P[1] * d.P[2];
    for (int64_t nc = 0; nc < d.N * d.C; nc++) {
        const double *xp = x + nc * plane_in;
        int64_t o = nc * plane_out;
        for (int64_t p0 = 0; p0 < d.P[0]; p0++)
            for (int64_t p1 = 0; p1 < d.P[1]; p1++)
                for (int64_t p2 = 0; p2 < d.P[2]; p2++, o++) {
                    const int64_t p[3] = {p0, p1, p2};
                    const int64_t n = window_positions(&d, p, pos);
                    if (d.mode == POOL_REF_MAX) {
                        double v;
                        const int64_t idx = argmax(xp, pos, n, &v);
                        y[o] = v;
                        if (indices)
                            indices[o] = idx;
                        if (y_abs)
                            y_abs[o] = fabs(v);
                        continue;
                    }
                    const int64_t div = divisor3(&d, p);
                    double sum = 0.0, abs_sum = 0.0;
                    for (int64_t k = 0; k < n; k++)
                        sum += xp[pos[k]], abs_sum += fabs(xp[pos[k]]);
                    y[o] = div > 0 ? sum / (double)div : 0.0;
                    if (indices)
                        indices[o] = -1;
                    if (y_abs)
                        y_abs[o] = div > 0 ? abs_sum / (double)div : 0.0;
                }
    }
    free(pos);
    return 0;
}

int pool_ref_backward(const pool_ref_shape_t *s, const double *x, const double *dy, double *dx, double *dx_abs,
                      int64_t *dx_terms)
{
    dims3_t d;
    if (to_dims3(s, &d) || (d.mode == POOL_REF_MAX && !x))
        return -1;
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)(d.R[0] * d.R[1] * d.R[2]));
    if (!pos)
        return -1;
    const int64_t plane_in = d.S[0] * d.S[1] * d.S[2], plane_out = d.P[0] * d.P[1] * d.P[2];
    const int64_t nx = d.N * d.C * plane_in;
    for (int64_t i = 0; i < nx; i++) {
        dx[i] = 0.0;
        if (dx_abs)
            dx_abs[i] = 0.0;
        if (dx_terms)
            dx_terms[i] = 0;
    }
    for (int64_t nc = 0; nc < d.N * d.C; nc++) {
        const int64_t base = nc * plane_in;
        int64_t o = nc * plane_out;
        for (int64_t p0 = 0; p0 < d.P[0]; p0++)
            for (int64_t p1 = 0; p1 < d.P[1]; p1++)
                for (int64_t p2 = 0; p2 < d.P[2]; p2++, o++) {
                    const int64_t p[3] = {p0, p1, p2};
                    const int64_t n = window_positions(&d, p, pos);
                    if (d.mode == POOL_REF_MAX) {
                        double v;
                        const int64_t idx = argmax(x + base, pos, n, &v);
                        if (idx < 0)
                            continue; /* no element of x: dy[p] goes nowhere */
                        dx[base + idx] += dy[o];
                        if (dx_abs)
                            dx_abs[base + idx] += fabs(dy[o]);
                        if (dx_terms)
                            dx_terms[base + idx]++;
                        continue;
                    }
                    const int64_t div = divisor3(&d, p);
                    if (div == 0)
                        continue;
                    const double term = dy[o] / (double)div;
                    for (int64_t k = 0; k < n; k++) {
                        dx[base + pos[k]] += term;
                        if (dx_abs)
                            dx_abs[base + pos[k]] += fabs(term);
                        if (dx_terms)
                            dx_terms[base + pos[k]]++;
                    }
                }
    }
    free(pos);
    return 0;
}
