/* FP64 host references for MoE routing, dispatch, SwiGLU experts and combine,
 * with per-element tolerances derived from the FP32 computation of the
 * contract (backends/README.md, "Numeric contract of the MoE kernels"). */
#include "moe_ref.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define U32 0x1p-24 /* unit roundoff of FP32 */

/* Unit roundoff of the output dtype (half an ulp, relative): 2^-p with p the
 * significand bits including the implicit one (F32 24, F16 11, BF16 8). */
static double unit_roundoff(rudnn_dtype_t dtype)
{
    switch (dtype) {
    case RUDNN_F16: return 0x1p-11;
    case RUDNN_BF16: return 0x1p-8;
    default: return U32;
    }
}

/* Half the spacing of the dtype's subnormals: the absolute rounding error of
 * a value rounded into the subnormal range. */
static double subnormal_half_ulp(rudnn_dtype_t dtype)
{
    switch (dtype) {
    case RUDNN_F16: return 0x1p-25;
    case RUDNN_BF16: return 0x1p-134;
    default: return 0x1p-150;
    }
}

/* ---- ranking --------------------------------------------------------------------- */

int moe_ref_ranks_before(double va, int64_t ia, double vb, int64_t ib)
{
    int na = isnan(va), nb = isnan(vb);
    if (na != nb)
        return nb; /* a number ranks before NaN */
    if (!na && va != vb)
        return va > vb;
    return ia < ib;
}

/* Writes into order[0..count) the positions (0..n-1) of the count best of
 * (v[i], id[i]) in ranking order. */
static void rank_top(const double *v, const int64_t *id, int64_t n, int64_t count, int64_t *order)
{
    unsigned char *taken = calloc((size_t)(n ? n : 1), 1);
    if (!taken)
        abort();
    for (int64_t c = 0; c < count; c++) {
        int64_t best = -1;
        for (int64_t i = 0; i < n; i++) {
            if (taken[i])
                continue;
            if (best < 0 || moe_ref_ranks_before(v[i], id[i], v[best], id[best]))
                best = i;
        }
        taken[best] = 1;
        order[c] = best;
    }
    free(taken);
}

/* Gap between two keys whose order decided something; INFINITY when the
 * order cannot be ambiguous (equal keys: a tie broken by id, deterministic
 * because equal inputs give equal FP32 keys; NaN or inf: exact). */
static double key_gap(double a, double b, int relative)
{
    if (!isfinite(a) || !isfinite(b) || a == b)
        return INFINITY;
    double m = fmax(fabs(a), fabs(b));
    if (!relative && m < 1.0)
        m = 1.0;
    return fabs(a - b) / m;
}

/* ---- softmax routing ----------------------------------------------------------------
 * Weight tolerance (moe_ref_weight_tolerance): the kernel computes p in FP32:
 * exp within a few ulp (OpenCL allows 3, CUDA's expf 2), a sum of E <= 1024
 * terms of at most 1 whose relative error stays far below the worst-case
 * E * 2^-24 = 6e-5 (the terms are positive, so the bound is on the sum, and
 * pairwise or chunked sums are at log2(E) * 2^-24 = 6e-7), one division, and
 * for renormalize a sum of k <= 64 selected values and one division more;
 * grouped routing: sigmoid (exp, add, divide) and the scale multiply.
 * F32: rtol 3e-5. F16/BF16: the FP32 value is then rounded to the dtype, at
 * most half an ulp (2^-11, 2^-8 relative) away, plus the FP32 error: rtol
 * 2^-11 + 4e-5 and 2^-8 + 4e-5; atol is half the spacing of the subnormals
 * (F16 weights of E = 256 softmax rows reach 1e-6, below F16's 6.1e-5). */

double moe_ref_route_softmax_row(const float *x, int64_t experts, int top_k, int renormalize,
                                 uint32_t *indices, double *weights)
{
    double *p = calloc((size_t)experts, sizeof *p);
    int64_t *ids = calloc((size_t)experts, sizeof *ids);
    int64_t *order = calloc((size_t)experts, sizeof *order);
    if (!p || !ids || !order)
        abort();
    int poisoned = 0;
    double m = -INFINITY;
    for (int64_t e = 0; e < experts; e++) {
        ids[e] = e;
        if (isnan(x[e]) || (isinf(x[e]) && x[e] > 0))
            poisoned = 1;
        if (x[e] > m)
            m = x[e];
    }
    if (poisoned || m == -INFINITY) {
        for (int64_t e = 0; e < experts; e++)
            p[e] = NAN;
    } else {
        double sum = 0.0;
        for (int64_t e = 0; e < experts; e++) {
            p[e] = exp((double)x[e] - m);
            sum += p[e];
        }
        for (int64_t e = 0; e < experts; e++)
            p[e] /= sum;
    }
    int64_t ranked = top_k < experts ? top_k + 1 : experts; /* the first unselected decides too */
    rank_top(p, ids, experts, ranked, order);
    double gap = INFINITY;
    for (int64_t c = 0; c + 1 < ranked; c++)
        gap = fmin(gap, key_gap(p[order[c]], p[order[c + 1]], 1));
    double sel = 0.0;
    for (int j = 0; j < top_k; j++) {
        indices[j] = (uint32_t)order[j];
        weights[j] = p[order[j]];
        sel += p[order[j]];
    }
    if (renormalize)
        for (int j = 0; j < top_k; j++)
            weights[j] /= sel;
    free(p);
    free(ids);
    free(order);
    return gap;
}

/* ---- grouped sigmoid routing ------------------------------------------------------------ */

static double sigmoid(double x)
{
    if (x >= 0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e); /* NaN stays NaN (x >= 0 is false) */
}

double moe_ref_route_grouped_row(const float *x, const float *bias, int64_t experts,
                                 const moe_ref_grouped_t *o, uint32_t *indices, double *weights)
{
    int64_t groups = o->groups, per = experts / groups;
    double *p = calloc((size_t)experts, sizeof *p);
    double *s = calloc((size_t)experts, sizeof *s);
    int64_t *ids = calloc((size_t)experts, sizeof *ids);
    int64_t *order = calloc((size_t)experts, sizeof *order);
    double *gscore = calloc((size_t)groups, sizeof *gscore);
    int64_t *gids = calloc((size_t)groups, sizeof *gids);
    int64_t *gorder = calloc((size_t)groups, sizeof *gorder);
    double *cand_s = calloc((size_t)experts, sizeof *cand_s);
    int64_t *cand_id = calloc((size_t)experts, sizeof *cand_id);
    if (!p || !s || !ids || !order || !gscore || !gids || !gorder || !cand_s || !cand_id)
        abort();
    for (int64_t e = 0; e < experts; e++) {
        ids[e] = e;
        p[e] = sigmoid((double)x[e]);
        s[e] = p[e] + (bias ? (double)bias[e] : 0.0);
    }
    double gap = INFINITY;
    /* group scores: the best (or two best) s of each group in ranking order */
    for (int64_t g = 0; g < groups; g++) {
        int64_t best[2];
        int64_t take = o->group_top_two ? 2 : 1;
        rank_top(s + g * per, ids + g * per, per, take, best);
        gscore[g] = s[g * per + best[0]];
        if (take == 2) /* which two are the best matters only through their sum */
            gscore[g] += s[g * per + best[1]];
        gids[g] = g;
    }
    rank_top(gscore, gids, groups, groups, gorder);
    if (o->selected_groups < groups)
        gap = fmin(gap, key_gap(gscore[gorder[o->selected_groups - 1]], gscore[gorder[o->selected_groups]], 0));
    /* candidates: experts of the selected groups */
    int64_t n = 0;
    for (int64_t c = 0; c < o->selected_groups; c++) {
        int64_t g = gorder[c];
        for (int64_t i = 0; i < per; i++) {
            cand_s[n] = s[g * per + i];
            cand_id[n] = g * per + i;
            n++;
        }
    }
    int64_t ranked = o->top_k < n ? o->top_k + 1 : n;
    rank_top(cand_s, cand_id, n, ranked, order);
    for (int64_t c = 0; c + 1 < ranked; c++)
        gap = fmin(gap, key_gap(cand_s[order[c]], cand_s[order[c + 1]], 0));
    double sel = 0.0;
    for (int j = 0; j < o->top_k; j++) {
        int64_t e = cand_id[order[j]];
        indices[j] = (uint32_t)e;
        weights[j] = p[e];
        sel += p[e];
    }
    for (int j = 0; j < o->top_k; j++) {
        if (o->renormalize)
            weights[j] /= sel;
        weights[j] *= o->scale;
    }
    free(p);
    free(s);
    free(ids);
    free(order);
    free(gscore);
    free(gids);
    free(gorder);
    free(cand_s);
    free(cand_id);
    return gap;
}

ref_tol_t moe_ref_weight_tolerance(rudnn_dtype_t dtype)
{
    ref_tol_t t;
    t.atol_rel = 0.0;
    switch (dtype) {
    case RUDNN_F16:
        t.rtol = 0x1p-11 + 4e-5;
        t.atol_abs = 0x1p-25;
        break;
    case RUDNN_BF16:
        t.rtol = 0x1p-8 + 4e-5;
        t.atol_abs = 1e-37;
        break;
    default:
        t.rtol = 3e-5;
        t.atol_abs = 1e-37;
        break;
    }
    return t;
}

/* ---- dispatch ------------------------------------------------------------------------- */

void moe_ref_dispatch(const uint32_t *indices, int64_t tokens, int top_k, int64_t experts,
                      uint32_t *counts, uint32_t *offsets, uint32_t *positions)
{
    int64_t pairs = tokens * top_k;
    memset(counts, 0, (size_t)experts * sizeof *counts);
    for (int64_t i = 0; i < pairs; i++)
        counts[indices[i]]++;
    offsets[0] = 0;
    for (int64_t e = 0; e < experts; e++)
        offsets[e + 1] = offsets[e] + counts[e];
    uint32_t *cursor = malloc((size_t)(experts ? experts : 1) * sizeof *cursor);
    if (!cursor)
        abort();
    memcpy(cursor, offsets, (size_t)experts * sizeof *cursor);
    for (int64_t i = 0; i < pairs; i++)
        positions[i] = cursor[indices[i]]++;
    free(cursor);
}

/* ---- SwiGLU experts -----------------------------------------------------------------------
 * The tolerance follows the computation step by step (u = 2^-24):
 *
 * g = x . gate_i and v = x . up_i in FP32 over H terms: |error| <= (H + 2) u
 * sum |x_h w_h| for any summation order, with or without FMA (the products of
 * F16/BF16 values are even exact); doubled for margin.
 * silu(g) = g / (1 + exp(-g)) in FP32: its derivative is within [-0.1, 1.1],
 * so the error of g moves it by at most 1.1 |dg|; exp, add and divide add at
 * most 8 ulp. a = silu * v then rounds once more.
 * The FP32 value of a therefore lies in [a - da, a + da]; round_dtype is
 * monotone, so the kernel's a_i = round_dtype(a_fp32) lies between
 * lo = round_dtype(fp32(a - da)) and hi = round_dtype(fp32(a + da)). Almost
 * always lo == hi and the reference uses exactly the kernel's activation;
 * when a sits on a rounding boundary of the dtype both neighbours are allowed:
 * the reference uses the midpoint and adds the half-width times |down| to the
 * tolerance.
 * out = sum_i a_i down_hi in FP32 over I terms: (I + 2) u sum |a_i down_hi|,
 * doubled; then round to the dtype: half an ulp of the result (2^-11 F16,
 * 2^-8 BF16), or half the subnormal spacing near zero.
 * The bound is rigorous for any summation order, so it holds for the Scalar
 * and TensorCore kernels alike, and it is tight: an activation that is not
 * rounded to the dtype, a wrong weight row or a lost term shows up. */
void moe_ref_expert_row(rudnn_dtype_t dtype, const float *x, const float *gate_e, const float *up_e,
                        const float *down_e, int64_t hidden, int64_t inter, int gu_rounded, double *scratch,
                        double *out, double *tol)
{
    const double u_gu = gu_rounded ? unit_roundoff(dtype) : 0.0;
    double *a_mid = scratch, *a_rad = scratch + inter;
    for (int64_t i = 0; i < inter; i++) {
        const float *gr = gate_e + i * hidden, *ur = up_e + i * hidden;
        double g = 0.0, v = 0.0, sg = 0.0, sv = 0.0;
        for (int64_t h = 0; h < hidden; h++) {
            g += (double)x[h] * gr[h];
            v += (double)x[h] * ur[h];
            sg += fabs((double)x[h] * gr[h]);
            sv += fabs((double)x[h] * ur[h]);
        }
        double dg = 2.0 * (double)(hidden + 2) * U32 * sg;
        double dv = 2.0 * (double)(hidden + 2) * U32 * sv;
        /* a rounding to dtype: half an ulp of |g| + dg, and the subnormal step */
        dg += u_gu * (fabs(g) + dg) + (gu_rounded ? subnormal_half_ulp(dtype) : 0.0);
        dv += u_gu * (fabs(v) + dv) + (gu_rounded ? subnormal_half_ulp(dtype) : 0.0);
        double silu = g / (1.0 + exp(-g));
        double dsilu = 1.1 * dg + 8.0 * U32 * fabs(silu);
        double a = silu * v;
        double da = fabs(silu) * dv + fabs(v) * dsilu + dsilu * dv + 2.0 * U32 * fabs(a);
        double lo = ref_round(dtype, (float)(a - da));
        double hi = ref_round(dtype, (float)(a + da));
        a_mid[i] = 0.5 * (lo + hi);
        a_rad[i] = 0.5 * (hi - lo);
    }
    double u_out = unit_roundoff(dtype);
    for (int64_t h = 0; h < hidden; h++) {
        const float *dr = down_e + h * inter;
        double sum = 0.0, mag = 0.0, rad = 0.0;
        for (int64_t i = 0; i < inter; i++) {
            sum += a_mid[i] * dr[i];
            mag += fabs(a_mid[i] * dr[i]);
            rad += a_rad[i] * fabs((double)dr[i]);
        }
        double pre = rad + 2.0 * (double)(inter + 2) * U32 * (mag + rad);
        out[h] = sum;
        tol[h] = pre + u_out * (fabs(sum) + pre) + subnormal_half_ulp(dtype);
    }
}

/* ---- combine --------------------------------------------------------------------------------
 * k products and k - 1 additions in FP32 (slot order): (k + 1) u sum |w_j e_j|,
 * doubled; then half an ulp of the dtype. NaN weights give NaN. */
void moe_ref_combine_row(rudnn_dtype_t dtype, const float *w, const float *const *rows, int top_k,
                         int64_t hidden, double *out, double *tol)
{
    double u_out = unit_roundoff(dtype);
    for (int64_t h = 0; h < hidden; h++) {
        double sum = 0.0, mag = 0.0;
        for (int j = 0; j < top_k; j++) {
            sum += (double)w[j] * rows[j][h];
            mag += fabs((double)w[j] * rows[j][h]);
        }
        double pre = 2.0 * (double)(top_k + 1) * U32 * mag;
        out[h] = sum;
        tol[h] = pre + u_out * (fabs(sum) + pre) + subnormal_half_ulp(dtype);
    }
}

/* ---- comparison ------------------------------------------------------------------------------ */

size_t moe_ref_compare(ref_report_t *report, const char *what, const float *got, const double *ref,
                       const double *tol, size_t n, int64_t row_len)
{
    size_t before = report->mismatches;
    for (size_t i = 0; i < n; i++) {
        double want = ref[i], g = got[i];
        if (ref_check_value(report, g, want, tol[i]))
            ref_report_mismatch(report, "  %s[row %lld, col %lld]: got %.9g, want %.12g (allowed +-%.3g)\n", what,
                                (long long)(row_len ? (int64_t)i / row_len : 0),
                                (long long)(row_len ? (int64_t)i % row_len : 0), g, want, tol[i]);
    }
    return report->mismatches - before;
}
