/* FP64 reference of expert-parallel dispatch and combine + AddRmsNorm (ep_ref.h says what is
 * computed and which readings of the contract it takes). */
#include "ep_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ep_ref_layout(const ep_ref_problem_t *p, ep_ref_layout_t *l)
{
    int w = p->ep_size;
    l->local = p->params.moe_expert_num / w;
    l->w = w;
    l->routed = p->params.moe_expert_num;
    for (int r = 0; r < w; r++)
        l->new_of[r] = l->phys_of[r] = r;
    if (p->elastic && p->elastic[0]) {
        l->w = p->elastic[1];
        l->routed = p->elastic[3];
        for (int r = 0; r < w; r++) {
            l->new_of[r] = p->elastic[4 + r];
            l->phys_of[r] = r < l->w ? p->elastic[4 + w + r] : -1;
        }
    }
}

double ep_ref_expert(double v, int64_t g, int tp_size, int tp_rank)
{
    double out = v * (1.0 + 0.125 * (double)g) + 0.01 * (double)g;
    if (tp_size == 2)
        out *= 0.375 + 0.25 * (double)tp_rank;
    return out;
}

int ep_ref_token_active(const ep_ref_problem_t *p, const ep_ref_rank_in_t *in, int64_t i)
{
    if (p->mask_dims == 0 || !in->mask)
        return 1;
    if (p->mask_dims == 1)
        return in->mask[i] != 0;
    for (int64_t k = 0; k < p->top_k; k++)
        if (in->mask[i * p->top_k + k])
            return 1;
    return 0;
}

int ep_ref_slot_active(const ep_ref_problem_t *p, const ep_ref_rank_in_t *in, int64_t i, int64_t k)
{
    if (!ep_ref_token_active(p, in, i))
        return 0;
    if (p->mask_dims == 2 && in->mask)
        return in->mask[i * p->top_k + k] != 0;
    return 1;
}

void ep_ref_dispatch_free(ep_ref_dispatch_t *d)
{
    free(d->expand_x);
    free(d->assist);
    free(d->local_expert);
    free(d->expert_token_nums);
    free(d->ep_recv_counts);
    memset(d, 0, sizeof *d);
}

/* Rows the EP group of tp_rank brings to new rank r: grouped by local expert, then source (new)
 * rank, then token, then slot. With out NULL only counts them. */
static int64_t fill_half(const ep_ref_problem_t *p, const ep_ref_layout_t *l, int r_new, int tp_rank,
                         ep_ref_dispatch_t *out, int64_t row0, int half)
{
    const int64_t H = p->hidden, K = p->top_k;
    int64_t n = 0;
    for (int64_t e = 0; e < l->local; e++) {
        int64_t expert = (int64_t)r_new * l->local + e;
        /* sources in new-rank order (the same as physical: Table2 is increasing here); the
         * counts are indexed by physical rank, a removed rank adding nothing */
        for (int ps = 0; ps < p->ep_size; ps++) {
            if (l->new_of[ps] >= 0) {
                const ep_ref_rank_in_t *in = &p->ranks[tp_rank * p->ep_size + ps];
                for (int64_t i = 0; i < in->bs; i++)
                    for (int64_t k = 0; k < K; k++) {
                        if (!ep_ref_slot_active(p, in, i, k) || in->expert_ids[i * K + k] != expert)
                            continue;
                        if (out) {
                            int64_t row = row0 + n;
                            memcpy(out->expand_x + row * H, in->x + i * H, (size_t)H * sizeof(float));
                            out->assist[row * 3 + 0] = ps;
                            out->assist[row * 3 + 1] = (int32_t)i;
                            out->assist[row * 3 + 2] = (int32_t)k;
                            out->local_expert[row] = (int32_t)e;
                            out->expert_token_nums[e]++;
                        }
                        n++;
                    }
            }
            if (out)
                out->ep_recv_counts[((int64_t)half * l->local + e) * p->ep_size + ps] = (int32_t)n;
        }
    }
    return n;
}

int ep_ref_dispatch(const ep_ref_problem_t *p, int ep_rank, int tp_rank, ep_ref_dispatch_t *out)
{
    ep_ref_layout_t l;
    ep_ref_layout(p, &l);
    memset(out, 0, sizeof *out);
    int r_new = l.new_of[ep_rank];
    if (r_new < 0)
        return 0;
    int halves = p->tp_size == 2 ? 2 : 1;
    int tps[2] = {tp_rank, 1 - tp_rank};
    for (int h = 0; h < halves; h++)
        out->half_rows[h] = fill_half(p, &l, r_new, tps[h], NULL, 0, h);
    out->rows = out->half_rows[0] + out->half_rows[1];
    out->count_len = halves * l.local * p->ep_size;
    size_t rows = (size_t)out->rows + 1;
    out->expand_x = malloc(rows * (size_t)p->hidden * sizeof(float));
    out->assist = malloc(rows * 3 * sizeof(int32_t));
    out->local_expert = malloc(rows * sizeof(int32_t));
    out->expert_token_nums = calloc((size_t)l.local, sizeof(int64_t));
    out->ep_recv_counts = calloc((size_t)out->count_len, sizeof(int32_t));
    if (!out->expand_x || !out->assist || !out->local_expert || !out->expert_token_nums || !out->ep_recv_counts) {
        ep_ref_dispatch_free(out);
        return -1;
    }
    for (int h = 0; h < halves; h++)
        fill_half(p, &l, r_new, tps[h], out, h ? out->half_rows[0] : 0, h);
    if (p->params.expert_token_nums_type == 0)
        for (int64_t e = 1; e < l.local; e++)
            out->expert_token_nums[e] += out->expert_token_nums[e - 1];
    if (halves == 2) {
        out->tp_recv_counts[tp_rank] = (int32_t)out->half_rows[0];
        out->tp_recv_counts[1 - tp_rank] = (int32_t)out->half_rows[1];
    }
    return 0;
}

void ep_ref_combine_free(ep_ref_combine_t *c)
{
    free(c->y);
    free(c->x);
    free(c->rstd);
    free(c->y_tol);
    free(c->x_tol);
    free(c->rstd_tol);
    memset(c, 0, sizeof *c);
}

static double unit_roundoff(rudnn_dtype_t dtype)
{
    switch (dtype) {
    case RUDNN_BF16: return 0x1p-8;
    case RUDNN_F16: return 0x1p-11;
    default: return 0x1p-24;
    }
}

/* The value a routed slot returns: the expert function of the row as the dtype holds it, each
 * TP partial written as the dtype, summed in FP32 and rounded once. */
static double routed_value(const ep_ref_problem_t *p, float v, int64_t g)
{
    if (p->tp_size != 2)
        return ref_round(p->dtype, (float)ep_ref_expert(v, g, 1, 0));
    float p0 = ref_round(p->dtype, (float)ep_ref_expert(v, g, 2, 0));
    float p1 = ref_round(p->dtype, (float)ep_ref_expert(v, g, 2, 1));
    return ref_round(p->dtype, p0 + p1);
}

int ep_ref_combine(const ep_ref_problem_t *p, int ep_rank, int tp_rank, ep_ref_combine_t *out)
{
    ep_ref_layout_t l;
    ep_ref_layout(p, &l);
    const ep_ref_rank_in_t *in = &p->ranks[tp_rank * p->ep_size + ep_rank];
    const int64_t H = p->hidden, K = p->top_k, bs = in->bs;
    const int64_t E = p->params.moe_expert_num, Z = p->params.zero_expert_num,
                  C = p->params.copy_expert_num;
    memset(out, 0, sizeof *out);
    out->bs = bs;
    size_t n = (size_t)(bs * H) + 1;
    out->y = malloc(n * sizeof(double));
    out->x = malloc(n * sizeof(double));
    out->y_tol = malloc(n * sizeof(double));
    out->x_tol = malloc(n * sizeof(double));
    out->rstd = malloc(((size_t)bs + 1) * sizeof(double));
    out->rstd_tol = malloc(((size_t)bs + 1) * sizeof(double));
    double *err = malloc(((size_t)H + 1) * sizeof(double));
    if (!out->y || !out->x || !out->y_tol || !out->x_tol || !out->rstd || !out->rstd_tol || !err) {
        free(err);
        ep_ref_combine_free(out);
        return -1;
    }
    const double u = unit_roundoff(p->dtype);
    for (int64_t i = 0; i < bs; i++) {
        int active = ep_ref_token_active(p, in, i);
        double ss = 0.0, err_max = 0.0;
        for (int64_t h = 0; h < H; h++) {
            double acc = 0.0, mag = 0.0;
            if (active) {
                for (int64_t k = 0; k < K; k++) {
                    if (!ep_ref_slot_active(p, in, i, k))
                        continue;
                    int64_t id = in->expert_ids[i * K + k];
                    double s = in->scales[i * K + k], v;
                    if (id < E)
                        v = routed_value(p, in->x[i * H + h], id);
                    else if (id < E + Z)
                        v = 0.0;
                    else if (id < E + Z + C)
                        v = in->ori_x[i * H + h];
                    else {
                        int64_t c = id - E - Z - C;
                        v = (double)p->alpha1[c] * in->ori_x[i * H + h] + (double)p->alpha2[c] * p->const_v[c * H + h];
                        mag += fabs(s) * (fabs((double)p->alpha1[c] * in->ori_x[i * H + h]) +
                                          fabs((double)p->alpha2[c] * p->const_v[c * H + h]));
                    }
                    acc += s * v;
                    mag += fabs(s * v);
                }
                if (in->shared_x) {
                    acc += in->shared_x[i * H + h];
                    mag += fabs(in->shared_x[i * H + h]);
                }
            }
            double xv = acc + in->residual[i * H + h];
            mag += fabs(in->residual[i * H + h]);
            double e = 2.0 * (double)(K + 3) * 0x1p-24 * mag + 1e-30;
            out->x[i * H + h] = xv;
            out->x_tol[i * H + h] = e + u * (fabs(xv) + e);
            err[h] = e;
            if (e > err_max)
                err_max = e;
            ss += xv * xv;
        }
        double ms = ss / (double)H;
        double rstd = 1.0 / sqrt(ms + (double)p->eps);
        double rel = 1e-5 + err_max * rstd;
        out->rstd[i] = rstd;
        out->rstd_tol[i] = rel * rstd;
        for (int64_t h = 0; h < H; h++) {
            double g = p->gamma[h], xv = out->x[i * H + h];
            double y = xv * rstd * g;
            double e = fabs(g) * (err[h] * rstd + fabs(xv) * rstd * rel) + 3.0 * 0x1p-24 * fabs(y) + 1e-30;
            out->y[i * H + h] = y;
            out->y_tol[i * H + h] = e + u * (fabs(y) + e);
        }
    }
    free(err);
    return 0;
}

size_t ep_ref_compare(ref_report_t *report, const char *what, const float *got, const double *want,
                      const double *tol, size_t n, int64_t row_len)
{
    size_t before = report->mismatches;
    for (size_t i = 0; i < n; i++)
        if (ref_check_value(report, got[i], want[i], tol[i]))
            ref_report_mismatch(report, "%s[%lld, %lld]: got %.9g, want %.9g (tolerance %.3g)", what,
                                (long long)(i / (size_t)row_len), (long long)(i % (size_t)row_len), (double)got[i],
                                want[i], tol[i]);
    return report->mismatches - before;
}
