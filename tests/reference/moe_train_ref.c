/* FP64 reference of the MoE training family: see moe_train_ref.h. */
#include "moe_train_ref.h"

#include <math.h>
#include <stdlib.h>

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
