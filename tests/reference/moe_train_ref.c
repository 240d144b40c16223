/* FP64 reference of the MoE training family: see moe_train_ref.h. */
#include "moe_train_ref.h"

#include <math.h>
#include <stdlib.h>

#include "norm_ref.h" /* ref_round */

/* sigmoid without overflow: exp of a non-positive argument only */
static double sigmoid(double x)
{
    if (x >= 0.0)
        return 1.0 / (1.0 + exp(-x));
    const double e = exp(x);
    return e / (1.0 + e);
}

void mt_ref_scores(const double *x, int64_t experts, int sigmoid_scoring, double *p)
{
    if (sigmoid_scoring) {
        for (int64_t e = 0; e < experts; e++)
            p[e] = sigmoid(x[e]);
        return;
    }
    double m = -INFINITY;
    for (int64_t e = 0; e < experts; e++)
        m = x[e] > m || isnan(x[e]) ? x[e] : m;
    double z = 0.0;
    for (int64_t e = 0; e < experts; e++)
        z += exp(x[e] - m);
    for (int64_t e = 0; e < experts; e++)
        p[e] = exp(x[e] - m) / z;
}

static int row_in_range(int64_t experts, const int64_t *idx, int top_k)
{
    for (int j = 0; j < top_k; j++)
        if (idx[j] < 0 || idx[j] >= experts)
            return 0;
    return 1;
}

static void fill_nan(double *a, int64_t n)
{
    for (int64_t i = 0; a && i < n; i++)
        a[i] = NAN;
}

/* S: the sum of the selected scores (a repeated index counted each time), or 1. */
static double selected_sum(const double *p, const int64_t *idx, int top_k, int renormalize)
{
    if (!renormalize)
        return 1.0;
    double s = 0.0;
    for (int j = 0; j < top_k; j++)
        s += p[idx[j]];
    return s;
}

int mt_ref_weights_row(const double *x, int64_t experts, const int64_t *idx, int top_k, const mt_ref_options_t *o,
                       double *w, double *mag)
{
    if (!row_in_range(experts, idx, top_k)) {
        fill_nan(w, top_k), fill_nan(mag, top_k);
        return 1;
    }
    double *p = malloc(sizeof(double) * (size_t)experts);
    if (!p)
        abort(); /* a few KB: out of memory here is not a test result */
    mt_ref_scores(x, experts, o->sigmoid, p);
    const double S = selected_sum(p, idx, top_k, o->renormalize);
    for (int j = 0; j < top_k; j++) {
        w[j] = o->scale * p[idx[j]] / S;
        if (mag)
            mag[j] = fabs(w[j]);
    }
    free(p);
    return 0;
}

int mt_ref_backward_row(const double *x, int64_t experts, const int64_t *idx, int top_k, const double *g,
                        const mt_ref_options_t *o, double *grad, double *mag)
{
    if (!row_in_range(experts, idx, top_k)) {
        fill_nan(grad, experts), fill_nan(mag, experts);
        return 1;
    }
    double *p = malloc(sizeof(double) * (size_t)experts);
    if (!p)
        abort();
    mt_ref_scores(x, experts, o->sigmoid, p);
    const double S = selected_sum(p, idx, top_k, o->renormalize);
    /* D = sum_j g_j q_j and its absolute counterpart */
    double D = 0.0, Dabs = 0.0;
    for (int j = 0; j < top_k; j++) {
        const double q = p[idx[j]] / S;
        D += g[j] * q;
        Dabs += fabs(g[j]) * q;
    }
    for (int64_t e = 0; e < experts; e++) {
        double G = 0.0, A = 0.0;
        int m = 0;
        for (int j = 0; j < top_k; j++)
            if (idx[j] == e) {
                G += g[j], A += fabs(g[j]);
                m++;
            }
        /* the derivative of the score: softmax's diagonal p_e (its off-diagonal -p_a p_e is the D term),
         * sigmoid's p_e (1 - p_e), 1 - p_e taken as sigmoid(-x_e) so that it keeps its digits */
        const double f = (o->sigmoid ? p[e] * sigmoid(-x[e]) : p[e]) / S;
        /* how often the D term enters: once per occurrence when renormalized; unrenormalized only the
         * softmax's cross terms, once for every expert */
        const double mult = o->renormalize ? (double)m : (o->sigmoid ? 0.0 : 1.0);
        grad[e] = o->scale * f * (G - mult * D);
        if (mag)
            mag[e] = o->scale * f * (A + mult * Dabs);
    }
    free(p);
    return 0;
}

int mt_ref_weights(const float *logits, int64_t tokens, int64_t experts, const int64_t *idx, int top_k,
                   const mt_ref_options_t *o, double *w, double *mag, uint8_t *nan_rows)
{
    double *x = malloc(sizeof(double) * (size_t)(experts > 0 ? experts : 1));
    if (!x)
        return -1;
    for (int64_t t = 0; t < tokens; t++) {
        for (int64_t e = 0; e < experts; e++)
            x[e] = logits[t * experts + e];
        const int bad = mt_ref_weights_row(x, experts, idx + t * top_k, top_k, o, w + t * top_k,
                                           mag ? mag + t * top_k : NULL);
        if (nan_rows)
            nan_rows[t] = (uint8_t)bad;
    }
    free(x);
    return 0;
}

int mt_ref_backward(const float *logits, int64_t tokens, int64_t experts, const int64_t *idx, int top_k,
                    const float *grad_weights, const mt_ref_options_t *o, double *grad, double *mag,
                    uint8_t *nan_rows)
{
    double *x = malloc(sizeof(double) * (size_t)(experts > 0 ? experts : 1));
    double *g = malloc(sizeof(double) * (size_t)(top_k > 0 ? top_k : 1));
    if (!x || !g) {
        free(x), free(g);
        return -1;
    }
    for (int64_t t = 0; t < tokens; t++) {
        for (int64_t e = 0; e < experts; e++)
            x[e] = logits[t * experts + e];
        for (int j = 0; j < top_k; j++)
            g[j] = grad_weights[t * top_k + j];
        const int bad = mt_ref_backward_row(x, experts, idx + t * top_k, top_k, g, o, grad + t * experts,
                                            mag ? mag + t * experts : NULL);
        if (nan_rows)
            nan_rows[t] = (uint8_t)bad;
    }
    free(x), free(g);
    return 0;
}

static int positions_in_range(const uint32_t *pos, int64_t tokens, int top_k)
{
    const int64_t rows = tokens * top_k;
    for (int64_t i = 0; i < rows; i++)
        if ((int64_t)pos[i] >= rows)
            return 0;
    return 1;
}

int mt_ref_combine_backward(const uint32_t *pos, const float *w, const float *expert_output, const float *grad_output,
                            int64_t tokens, int top_k, int64_t hidden, double *ge, double *gw, double *gw_mag)
{
    if (!positions_in_range(pos, tokens, top_k))
        return -1;
    for (int64_t t = 0; t < tokens; t++) {
        const float *g = grad_output + t * hidden;
        for (int j = 0; j < top_k; j++) {
            const int64_t r = pos[t * top_k + j];
            const double wj = w[t * top_k + j];
            const float *eo = expert_output + r * hidden;
            double s = 0.0, m = 0.0;
            for (int64_t h = 0; h < hidden; h++) {
                ge[r * hidden + h] = wj * g[h];
                s += (double)g[h] * eo[h];
                m += fabs((double)g[h] * eo[h]);
            }
            gw[t * top_k + j] = s;
            if (gw_mag)
                gw_mag[t * top_k + j] = m;
        }
    }
    return 0;
}

int mt_ref_dispatch_backward(const uint32_t *pos, const float *grad_rows, int64_t tokens, int top_k, int64_t hidden,
                             double *gi, double *gi_mag)
{
    if (!positions_in_range(pos, tokens, top_k))
        return -1;
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t h = 0; h < hidden; h++) {
            double s = 0.0, m = 0.0;
            for (int j = 0; j < top_k; j++) {
                const double v = grad_rows[(int64_t)pos[t * top_k + j] * hidden + h];
                s += v, m += fabs(v);
            }
            gi[t * hidden + h] = s;
            if (gi_mag)
                gi_mag[t * hidden + h] = m;
        }
    return 0;
}

/* ---- SwiGLU experts: training ------------------------------------------------------------------ */

static int offsets_partition(const mt_ref_experts_t *p)
{
    if (p->offsets[0] != 0 || (int64_t)p->offsets[p->experts] != p->rows)
        return 0;
    for (int64_t e = 0; e < p->experts; e++)
        if (p->offsets[e + 1] < p->offsets[e])
            return 0;
    return 1;
}

static double *alloc_doubles(int64_t n)
{
    double *a = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (!a)
        abort(); /* the tests' problems are small: out of memory here is not a test result */
    return a;
}

void mt_ref_experts_alloc(const mt_ref_experts_t *p, mt_ref_experts_fwd_t *f, mt_ref_experts_bwd_t *b)
{
    const int64_t ri = p->rows * p->inter, rh = p->rows * p->hidden, w = p->experts * p->inter * p->hidden;
    double **fa[] = {&f->g, &f->g_mag, &f->u, &f->u_mag, &f->a, &f->a_rad, &f->a_mag};
    for (size_t i = 0; i < sizeof fa / sizeof fa[0]; i++)
        *fa[i] = alloc_doubles(ri);
    f->y = alloc_doubles(rh), f->y_mag = alloc_doubles(rh), f->y_rad = alloc_doubles(rh);
    if (!b)
        return;
    double **bi[] = {&b->da, &b->da_mag, &b->dg, &b->dg_mag, &b->du, &b->du_mag};
    for (size_t i = 0; i < sizeof bi / sizeof bi[0]; i++)
        *bi[i] = alloc_doubles(ri);
    b->grad_rows = alloc_doubles(rh), b->grad_rows_mag = alloc_doubles(rh);
    double **bw[] = {&b->grad_gate, &b->grad_gate_mag, &b->grad_up, &b->grad_up_mag, &b->grad_down,
                     &b->grad_down_mag, &b->grad_down_rad};
    for (size_t i = 0; i < sizeof bw / sizeof bw[0]; i++)
        *bw[i] = alloc_doubles(w);
}

void mt_ref_experts_free(mt_ref_experts_fwd_t *f, mt_ref_experts_bwd_t *b)
{
    if (f) {
        free(f->g), free(f->g_mag), free(f->u), free(f->u_mag), free(f->a), free(f->a_rad), free(f->a_mag);
        free(f->y), free(f->y_mag), free(f->y_rad);
    }
    if (b) {
        free(b->da), free(b->da_mag), free(b->dg), free(b->dg_mag), free(b->du), free(b->du_mag);
        free(b->grad_rows), free(b->grad_rows_mag);
        free(b->grad_gate), free(b->grad_gate_mag), free(b->grad_up), free(b->grad_up_mag);
        free(b->grad_down), free(b->grad_down_mag), free(b->grad_down_rad);
    }
}

int mt_ref_experts_forward(rudnn_dtype_t dtype, const mt_ref_experts_t *p, double eps_a, mt_ref_experts_fwd_t *f)
{
    if (!offsets_partition(p))
        return -1;
    const int64_t H = p->hidden, I = p->inter;
    for (int64_t e = 0; e < p->experts; e++)
        for (int64_t r = p->offsets[e]; r < (int64_t)p->offsets[e + 1]; r++) {
            const float *x = p->x + r * H;
            for (int64_t i = 0; i < I; i++) {
                const float *gw = p->gate + (e * I + i) * H, *uw = p->up + (e * I + i) * H;
                double g = 0.0, u = 0.0, gm = 0.0, um = 0.0;
                for (int64_t h = 0; h < H; h++) {
                    g += (double)x[h] * gw[h], gm += fabs((double)x[h] * gw[h]);
                    u += (double)x[h] * uw[h], um += fabs((double)x[h] * uw[h]);
                }
                const double silu = g * sigmoid(g), silu_mag = 1.1 * gm + fabs(silu);
                const double a = silu * u, a_mag = fabs(silu) * um + silu_mag * fabs(u);
                /* the device's a = round_dtype(its FP32 silu u), somewhere in this bracket */
                const double lo = ref_round(dtype, (float)(a - eps_a * a_mag));
                const double hi = ref_round(dtype, (float)(a + eps_a * a_mag));
                const int64_t at = r * I + i;
                f->g[at] = g, f->g_mag[at] = gm, f->u[at] = u, f->u_mag[at] = um;
                f->a[at] = 0.5 * (lo + hi), f->a_rad[at] = 0.5 * (hi - lo), f->a_mag[at] = a_mag;
            }
            for (int64_t h = 0; h < H; h++) {
                const float *dw = p->down + (e * H + h) * I;
                double y = 0.0, m = 0.0, rad = 0.0;
                for (int64_t i = 0; i < I; i++) {
                    y += f->a[r * I + i] * dw[i];
                    m += fabs(f->a[r * I + i] * dw[i]);
                    rad += f->a_rad[r * I + i] * fabs((double)dw[i]);
                }
                f->y[r * H + h] = y, f->y_mag[r * H + h] = m, f->y_rad[r * H + h] = rad;
            }
        }
    return 0;
}

int mt_ref_experts_backward(const mt_ref_experts_t *p, const mt_ref_experts_fwd_t *f, const float *dy,
                            mt_ref_experts_bwd_t *b)
{
    if (!offsets_partition(p))
        return -1;
    const int64_t H = p->hidden, I = p->inter;
    for (int64_t e = 0; e < p->experts; e++) {
        const int64_t r0 = p->offsets[e], r1 = p->offsets[e + 1];
        /* the rows' da, dg, du */
        for (int64_t r = r0; r < r1; r++)
            for (int64_t i = 0; i < I; i++) {
                double da = 0.0, dam = 0.0;
                for (int64_t h = 0; h < H; h++) {
                    const double t = (double)dy[r * H + h] * p->down[(e * H + h) * I + i];
                    da += t, dam += fabs(t);
                }
                const int64_t at = r * I + i;
                const double g = f->g[at], u = f->u[at], gm = f->g_mag[at], um = f->u_mag[at];
                /* 1 - s as sigmoid(-g): it keeps its digits where s is near 1 */
                const double s = sigmoid(g), s1 = sigmoid(-g), silu = g * s;
                const double phi = s * (1.0 + g * s1), phi_abs = s * (1.0 + fabs(g) * s1);
                const double phi_mag = phi_abs + 0.5 * gm, silu_mag = 1.1 * gm + fabs(silu);
                b->da[at] = da, b->da_mag[at] = dam;
                b->dg[at] = da * u * phi;
                b->dg_mag[at] = dam * fabs(u) * phi_abs + fabs(da) * um * phi_abs + fabs(da * u) * phi_mag;
                b->du[at] = da * silu;
                b->du_mag[at] = dam * fabs(silu) + fabs(da) * silu_mag;
            }
        /* grad_rows: every row of the expert */
        for (int64_t r = r0; r < r1; r++)
            for (int64_t h = 0; h < H; h++) {
                double v = 0.0, m = 0.0;
                for (int64_t i = 0; i < I; i++) {
                    const double gw = p->gate[(e * I + i) * H + h], uw = p->up[(e * I + i) * H + h];
                    v += b->dg[r * I + i] * gw + b->du[r * I + i] * uw;
                    m += b->dg_mag[r * I + i] * fabs(gw) + b->du_mag[r * I + i] * fabs(uw);
                }
                b->grad_rows[r * H + h] = v, b->grad_rows_mag[r * H + h] = m;
            }
        /* the weight gradients: sums over the expert's rows (none: zeros) */
        for (int64_t i = 0; i < I; i++)
            for (int64_t h = 0; h < H; h++) {
                double gg = 0.0, ggm = 0.0, gu = 0.0, gum = 0.0;
                for (int64_t r = r0; r < r1; r++) {
                    const double x = p->x[r * H + h];
                    gg += b->dg[r * I + i] * x, ggm += b->dg_mag[r * I + i] * fabs(x);
                    gu += b->du[r * I + i] * x, gum += b->du_mag[r * I + i] * fabs(x);
                }
                const int64_t at = (e * I + i) * H + h;
                b->grad_gate[at] = gg, b->grad_gate_mag[at] = ggm, b->grad_up[at] = gu, b->grad_up_mag[at] = gum;
            }
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < I; i++) {
                double v = 0.0, m = 0.0, rad = 0.0;
                for (int64_t r = r0; r < r1; r++) {
                    const double d = dy[r * H + h];
                    v += d * f->a[r * I + i], m += fabs(d * f->a[r * I + i]), rad += fabs(d) * f->a_rad[r * I + i];
                }
                const int64_t at = (e * H + h) * I + i;
                b->grad_down[at] = v, b->grad_down_mag[at] = m, b->grad_down_rad[at] = rad;
            }
    }
    return 0;
}
