/* One thread's rounds of ops for tests/test_threads.c (see threads_work.h). */
#include "threads_work.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference/attention_ref.h"
#include "reference/moe_ref.h"
#include "reference/norm_ref.h"
#include "reference/paged_attention_ref.h"

/* ---- calls, tensors ---------------------------------------------------------------------------- */

int tw_status(tw_thread_t *t, const char *what, rudnn_status_t st, rudnn_status_t want)
{
    if (st == want)
        return 1;
    rt_logf(t->log, "  %s: %s returned %s (expected %s): %s\n", t->label, what, rudnn_status_string(st),
            rudnn_status_string(want), rudnn_last_error());
    t->log->failures++;
    return 0;
}

/* Logs unless the last kernel this thread launched starts with prefix. */
static int kernel_starts(tw_thread_t *t, const char *what, const char *prefix)
{
    const char *k = rudnn_last_kernel();
    if (strncmp(k, prefix, strlen(prefix)) == 0)
        return 1;
    rt_logf(t->log, "  %s: after %s rudnn_last_kernel() is \"%s\", expected a %s* kernel\n", t->label, what, k,
            prefix);
    t->log->failures++;
    return 0;
}

int tw_tensor_create(tw_thread_t *t, tw_tensor_t *x, rudnn_dtype_t dtype, int rank, int64_t d0, int64_t d1)
{
    const int64_t dims[2] = {d0, d1};
    memset(x, 0, sizeof *x);
    size_t bytes = rudnn_dtype_size(dtype) * (size_t)d0 * (size_t)(rank > 1 ? d1 : 1);
    if (!tw_ok(t, "buffer_create", rudnn_buffer_create(t->ctx, bytes, &x->buf)))
        return 0;
    return tw_ok(t, "tensor_init", rudnn_tensor_init(&x->t, x->buf, 0, dtype, rank, dims));
}

void tw_tensor_destroy(tw_tensor_t *x)
{
    rudnn_buffer_destroy(x->buf);
    x->buf = NULL;
}

int tw_put(tw_thread_t *t, const tw_tensor_t *x, const float *values)
{
    size_t bytes = rudnn_tensor_bytes(&x->t);
    void *raw = malloc(bytes);
    if (!raw)
        return 0;
    rudnn_convert_from_f32(x->t.dtype, values, raw, (size_t)rudnn_tensor_numel(&x->t));
    int ok = tw_ok(t, "tensor_write", rudnn_tensor_write(t->queue, &x->t, raw, bytes));
    free(raw);
    return ok;
}

int tw_get(tw_thread_t *t, const rudnn_tensor_t *x, float *values)
{
    size_t bytes = rudnn_tensor_bytes(x);
    void *raw = malloc(bytes ? bytes : 1);
    if (!raw)
        return 0;
    int ok = tw_ok(t, "tensor_read", rudnn_tensor_read(t->queue, x, raw, bytes));
    if (ok)
        rudnn_convert_to_f32(x->dtype, raw, values, (size_t)rudnn_tensor_numel(x));
    free(raw);
    return ok;
}

/* Logs the mismatches of a report; returns 1 when there are none. */
static int report_clean(tw_thread_t *t, const char *what, const ref_report_t *rep)
{
    if (!rep->mismatches)
        return 1;
    rt_logf(t->log, "  %s: %s: %zu of %zu value(s) outside the reference's tolerance:\n%s", t->label, what,
            rep->mismatches, rep->checked, rep->text);
    t->log->failures++;
    return 0;
}

/* Uniform values in [lo, hi] rounded to dtype. */
static void fill(tw_thread_t *t, rudnn_dtype_t dtype, float *v, size_t n, double lo, double hi)
{
    rt_fill_uniform(&t->rng, v, n, lo, hi);
    ref_quantize(dtype, v, v, n);
}

/* ---- normalization ---------------------------------------------------------------------------- */

enum { NR = 5, NC = 72 };

int tw_norm_round(tw_thread_t *t)
{
    const rudnn_dtype_t dt = t->dtype;
    const float eps = 1e-5f;
    float x[NR * NC], r[NR * NC], gamma[NC], beta[NC], got[NR * NC], x_got[NR * NC], x_ref[NR * NC];
    float rstd_got[NR];
    double ref[NR * NC], rstd_ref[NR], cond[NR];
    fill(t, dt, x, NR * NC, -3.0, 3.0);
    fill(t, dt, r, NR * NC, -1.0, 1.0);
    fill(t, RUDNN_F32, gamma, NC, 0.5, 1.5);
    fill(t, RUDNN_F32, beta, NC, -0.5, 0.5);

    tw_tensor_t X = {0}, R = {0}, G = {0}, B = {0}, Y = {0}, RSTD = {0}, XO = {0};
    int ok = tw_tensor_create(t, &X, dt, 2, NR, NC) && tw_tensor_create(t, &R, dt, 2, NR, NC) &&
             tw_tensor_create(t, &G, RUDNN_F32, 1, NC, 0) && tw_tensor_create(t, &B, RUDNN_F32, 1, NC, 0) &&
             tw_tensor_create(t, &Y, dt, 2, NR, NC) && tw_tensor_create(t, &RSTD, RUDNN_F32, 1, NR, 0) &&
             tw_tensor_create(t, &XO, dt, 2, NR, NC);
    ok = ok && tw_put(t, &X, x) && tw_put(t, &R, r) && tw_put(t, &G, gamma) && tw_put(t, &B, beta);
    const ref_tol_t tol = ref_tolerance(dt);
    ref_report_t rep;

    if (ok && tw_ok(t, "layer_norm", rudnn_layer_norm(t->queue, &X.t, &G.t, &B.t, eps, &Y.t)) &&
        kernel_starts(t, "layer_norm", "norm.") && tw_get(t, &Y.t, got)) {
        ref_report_init(&rep);
        ref_layer_norm(x, gamma, beta, eps, NR, NC, ref);
        ref_layer_norm_cond_atol(x, gamma, eps, NR, NC, cond);
        ref_compare_rows(&rep, "y", got, ref, NR, NC, tol, cond);
        ok = report_clean(t, "layer_norm", &rep);
    }
    if (ok && tw_ok(t, "rms_norm", rudnn_rms_norm(t->queue, &X.t, &G.t, eps, &Y.t)) &&
        kernel_starts(t, "rms_norm", "norm.") && tw_get(t, &Y.t, got)) {
        ref_report_init(&rep);
        ref_rms_norm(x, gamma, eps, NR, NC, ref, NULL);
        ref_compare(&rep, "y", got, ref, NR, NC, tol);
        ok = report_clean(t, "rms_norm", &rep);
    }
    if (ok && tw_ok(t, "softmax_last_axis", rudnn_softmax_last_axis(t->queue, &X.t, &Y.t)) &&
        kernel_starts(t, "softmax_last_axis", "norm.") && tw_get(t, &Y.t, got)) {
        ref_report_init(&rep);
        ref_softmax(x, NR, NC, ref);
        ref_compare(&rep, "y", got, ref, NR, NC, tol);
        ok = report_clean(t, "softmax_last_axis", &rep);
    }
    if (ok && tw_ok(t, "add_rms_norm", rudnn_add_rms_norm(t->queue, &X.t, &R.t, &G.t, eps, &Y.t, &RSTD.t, &XO.t)) &&
        kernel_starts(t, "add_rms_norm", "norm.") && tw_get(t, &Y.t, got) && tw_get(t, &RSTD.t, rstd_got) &&
        tw_get(t, &XO.t, x_got)) {
        ref_report_init(&rep);
        ref_add_rms_norm(dt, x, r, gamma, eps, NR, NC, ref, rstd_ref, x_ref);
        ref_compare(&rep, "y", got, ref, NR, NC, tol);
        ref_compare(&rep, "rstd", rstd_got, rstd_ref, NR, 1, ref_tolerance(RUDNN_F32));
        ref_compare_exact(&rep, "x_out", x_got, x_ref, NR * NC);
        ok = report_clean(t, "add_rms_norm", &rep);
    }
    tw_tensor_t *all[] = {&X, &R, &G, &B, &Y, &RSTD, &XO};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tw_tensor_destroy(all[i]);
    return ok;
}

int tw_rms_norm_grids(tw_thread_t *t, const int64_t *rows, int n)
{
    const int64_t nr = rows[n - 1], nc = TW_GRID_COLS;
    const size_t count = (size_t)(nr * nc);
    const float eps = 1e-5f;
    float *x = malloc(count * sizeof(float)), *got = malloc(count * sizeof(float)), gamma[TW_GRID_COLS];
    double *ref = malloc(count * sizeof(double));
    tw_tensor_t X = {0}, G = {0}, Y = {0};
    int ok = x && got && ref;
    if (ok) {
        fill(t, t->dtype, x, count, -3.0, 3.0);
        fill(t, RUDNN_F32, gamma, TW_GRID_COLS, 0.5, 1.5);
    }
    ok = ok && tw_tensor_create(t, &X, t->dtype, 2, nr, nc) && tw_tensor_create(t, &G, RUDNN_F32, 1, nc, 0) &&
         tw_tensor_create(t, &Y, t->dtype, 2, nr, nc) && tw_put(t, &X, x) && tw_put(t, &G, gamma);
    for (int j = 0; j < n && ok; j++) { /* the first rows[j] rows of X and Y */
        const int64_t dims[2] = {rows[j], nc};
        rudnn_tensor_t xj, yj;
        ok = tw_ok(t, "tensor_init", rudnn_tensor_init(&xj, X.buf, 0, t->dtype, 2, dims)) &&
             tw_ok(t, "tensor_init", rudnn_tensor_init(&yj, Y.buf, 0, t->dtype, 2, dims)) &&
             tw_ok(t, "rms_norm", rudnn_rms_norm(t->queue, &xj, &G.t, eps, &yj)) &&
             kernel_starts(t, "rms_norm", "norm.");
    }
    if (ok && tw_get(t, &Y.t, got)) { /* the last launch wrote every row */
        ref_report_t rep;
        ref_report_init(&rep);
        ref_rms_norm(x, gamma, eps, nr, nc, ref, NULL);
        ref_compare(&rep, "y", got, ref, nr, nc, ref_tolerance(t->dtype));
        ok = report_clean(t, "rms_norm", &rep);
    } else {
        ok = 0;
    }
    tw_tensor_destroy(&X);
    tw_tensor_destroy(&G);
    tw_tensor_destroy(&Y);
    free(x);
    free(got);
    free(ref);
    return ok;
}

/* ---- MoE -------------------------------------------------------------------------------------- */

enum { T_ = TW_TOKENS, E_ = TW_EXPERTS, K_ = TW_TOP_K, H_ = TW_HIDDEN, I_ = TW_INTER, P_ = T_ * K_ };

int tw_experts_create(tw_thread_t *t, tw_experts_t *x)
{
    memset(x, 0, sizeof *x);
    x->dtype = t->dtype;
    const size_t n = (size_t)E_ * I_ * H_;
    x->host_gate = malloc(n * sizeof(float));
    x->host_up = malloc(n * sizeof(float));
    x->host_down = malloc(n * sizeof(float));
    if (!x->host_gate || !x->host_up || !x->host_down)
        return 0;
    fill(t, x->dtype, x->host_gate, n, -0.5, 0.5);
    fill(t, x->dtype, x->host_up, n, -0.5, 0.5);
    fill(t, x->dtype, x->host_down, n, -0.5, 0.5);
    const int64_t gdims[3] = {E_, I_, H_}, ddims[3] = {E_, H_, I_};
    tw_tensor_t *w[3] = {&x->gate, &x->up, &x->down};
    const float *host[3] = {x->host_gate, x->host_up, x->host_down};
    for (int i = 0; i < 3; i++) {
        if (!tw_ok(t, "buffer_create", rudnn_buffer_create(t->ctx, n * rudnn_dtype_size(x->dtype), &w[i]->buf)) ||
            !tw_ok(t, "tensor_init",
                   rudnn_tensor_init(&w[i]->t, w[i]->buf, 0, x->dtype, 3, i == 2 ? ddims : gdims)) ||
            !tw_put(t, w[i], host[i]))
            return 0;
    }
    return tw_ok(t, "swiglu_experts_create",
                 rudnn_swiglu_experts_create(t->ctx, &x->gate.t, &x->up.t, &x->down.t, &x->experts));
}

void tw_experts_destroy(tw_experts_t *x)
{
    rudnn_swiglu_experts_destroy(x->experts);
    tw_tensor_destroy(&x->gate);
    tw_tensor_destroy(&x->up);
    tw_tensor_destroy(&x->down);
    free(x->host_gate);
    free(x->host_up);
    free(x->host_down);
    memset(x, 0, sizeof *x);
}

int tw_kernels_of(const tw_experts_t *x, rudnn_moe_strategy_t s, const char **names, int cap)
{
    int count = 0, found = 0;
    if (rudnn_swiglu_experts_kernel_count(x->experts, &count) != RUDNN_STATUS_SUCCESS)
        return 0;
    for (int i = 0; i < count; i++) {
        const char *name;
        rudnn_moe_strategy_t strategy;
        if (rudnn_swiglu_experts_kernel_info(x->experts, i, &name, &strategy) == RUDNN_STATUS_SUCCESS &&
            strategy == s) {
            if (found < cap)
                names[found] = name;
            found++;
        }
    }
    return found;
}

/* Logits on a grid of eighths in [-4, 4] (distinct keys far apart against FP32 error); a row whose
 * deciding keys come within 1e-4 of a tie is drawn again. Fills the reference routing. */
static int make_logits(tw_thread_t *t, rudnn_dtype_t dt, float *logits, uint32_t *idx, double *w)
{
    for (int64_t tok = 0; tok < T_; tok++) {
        float *row = logits + tok * E_;
        double gap = 0.0;
        for (int attempt = 0; attempt < 200 && !(gap >= 1e-4); attempt++) {
            for (int e = 0; e < E_; e++)
                row[e] = (float)((double)((int64_t)rt_rng_below(&t->rng, 65) - 32) / 8.0);
            ref_quantize(dt, row, row, E_);
            gap = moe_ref_route_softmax_row(row, E_, K_, 1, idx + tok * K_, w + tok * K_);
        }
        if (!(gap >= 1e-4)) {
            rt_logf(t->log, "  %s: test data: no routing row without a near-tie\n", t->label);
            t->log->failures++;
            return 0;
        }
    }
    return 1;
}

/* Routing views against the reference: experts exact, weights within tolerance. */
static int check_route(tw_thread_t *t, rudnn_routing_plan_t plan, const uint32_t *idx_ref, const double *w_ref,
                       float *w_got)
{
    rudnn_tensor_t iv, wv;
    uint32_t idx[P_];
    if (!tw_ok(t, "routing_plan_indices", rudnn_routing_plan_indices(plan, &iv)) ||
        !tw_ok(t, "routing_plan_weights", rudnn_routing_plan_weights(plan, &wv)) ||
        !tw_ok(t, "tensor_read(indices)", rudnn_tensor_read(t->queue, &iv, idx, sizeof idx)) || !tw_get(t, &wv, w_got))
        return 0;
    ref_report_t rep;
    ref_report_init(&rep);
    for (int p = 0; p < P_; p++)
        if (idx[p] != idx_ref[p])
            ref_report_mismatch(&rep, "    pair %d: expert %u, expected %u\n", p, idx[p], idx_ref[p]);
    ref_compare(&rep, "weights", w_got, w_ref, T_, K_, moe_ref_weight_tolerance(wv.dtype));
    return report_clean(t, "moe_route", &rep);
}

/* Dispatch against the reference: counts, offsets and positions exact, rows copied bit for bit. */
static int check_dispatch(tw_thread_t *t, rudnn_dispatched_t d, const uint32_t *idx, const float *input,
                          uint32_t *offsets, uint32_t *positions, float *rows)
{
    uint32_t counts[E_], counts_ref[E_], offsets_ref[E_ + 1], positions_ref[P_];
    rudnn_tensor_t cv, ov, pv, tv;
    if (!tw_ok(t, "dispatched_counts", rudnn_dispatched_counts(d, &cv)) ||
        !tw_ok(t, "dispatched_offsets", rudnn_dispatched_offsets(d, &ov)) ||
        !tw_ok(t, "dispatched_positions", rudnn_dispatched_positions(d, &pv)) ||
        !tw_ok(t, "dispatched_tokens", rudnn_dispatched_tokens(d, &tv)) ||
        !tw_ok(t, "tensor_read(counts)", rudnn_tensor_read(t->queue, &cv, counts, sizeof counts)) ||
        !tw_ok(t, "tensor_read(offsets)", rudnn_tensor_read(t->queue, &ov, offsets, (E_ + 1) * sizeof *offsets)) ||
        !tw_ok(t, "tensor_read(positions)", rudnn_tensor_read(t->queue, &pv, positions, P_ * sizeof *positions)) ||
        !tw_get(t, &tv, rows))
        return 0;
    moe_ref_dispatch(idx, T_, K_, E_, counts_ref, offsets_ref, positions_ref);
    ref_report_t rep;
    ref_report_init(&rep);
    if (memcmp(counts, counts_ref, sizeof counts) || memcmp(offsets, offsets_ref, sizeof offsets_ref) ||
        memcmp(positions, positions_ref, sizeof positions_ref))
        ref_report_mismatch(&rep, "    counts, offsets or positions differ from the reference\n");
    for (int p = 0; p < P_ && !rep.mismatches; p++)
        ref_compare_exact(&rep, "dispatched row", rows + (size_t)positions_ref[p] * H_, input + (size_t)(p / K_) * H_,
                          H_);
    return report_clean(t, "moe_dispatch", &rep);
}

/* The expert output rows against the reference of each row's expert. */
static int check_experts(tw_thread_t *t, const tw_experts_t *x, const uint32_t *offsets, const float *rows,
                         const float *got)
{
    double scratch[2 * I_], ref[H_], tol[H_];
    ref_report_t rep;
    ref_report_init(&rep);
    for (int e = 0; e < E_; e++) {
        const size_t w = (size_t)e * I_ * H_;
        for (uint32_t r = offsets[e]; r < offsets[e + 1]; r++) {
            moe_ref_expert_row(x->dtype, rows + (size_t)r * H_, x->host_gate + w, x->host_up + w, x->host_down + w,
                               H_, I_, 0, scratch, ref, tol);
            moe_ref_compare(&rep, "expert_output", got + (size_t)r * H_, ref, tol, H_, H_);
        }
    }
    return report_clean(t, "swiglu_experts_forward_dispatched", &rep);
}

/* The combined output against the reference made from the device's weights and expert rows. */
static int check_combine(tw_thread_t *t, rudnn_dtype_t dt, const float *w, const uint32_t *positions,
                         const float *expert_rows, const float *got)
{
    double ref[H_], tol[H_];
    ref_report_t rep;
    ref_report_init(&rep);
    for (int tok = 0; tok < T_; tok++) {
        const float *rows[K_];
        for (int j = 0; j < K_; j++)
            rows[j] = expert_rows + (size_t)positions[tok * K_ + j] * H_;
        moe_ref_combine_row(dt, w + tok * K_, rows, K_, H_, ref, tol);
        moe_ref_compare(&rep, "output", got + (size_t)tok * H_, ref, tol, H_, H_);
    }
    return report_clean(t, "moe_combine", &rep);
}

/* Logs unless the last kernel is one of x's kernels of strategy s. */
static int kernel_of_strategy(tw_thread_t *t, const tw_experts_t *x, rudnn_moe_strategy_t s)
{
    const char *names[16];
    int n = tw_kernels_of(x, s, names, 16);
    const char *k = rudnn_last_kernel();
    for (int i = 0; i < n && i < 16; i++)
        if (strcmp(k, names[i]) == 0)
            return 1;
    rt_logf(t->log, "  %s: after the experts forward rudnn_last_kernel() is \"%s\", not a kernel of the strategy\n",
            t->label, k);
    t->log->failures++;
    return 0;
}

int tw_moe_round(tw_thread_t *t, const tw_experts_t *x, rudnn_moe_strategy_t strategy,
                 pthread_barrier_t *before_forward)
{
    const rudnn_dtype_t dt = x->dtype;
    static const size_t rows_floats = (size_t)P_ * H_;
    float logits[T_ * E_], input[T_ * H_], w_got[P_], out[T_ * H_];
    float *rows = malloc(rows_floats * sizeof(float)), *eo = malloc(rows_floats * sizeof(float));
    uint32_t idx_ref[P_], offsets[E_ + 1], positions[P_];
    double w_ref[P_];
    int ok = rows && eo && make_logits(t, dt, logits, idx_ref, w_ref);
    fill(t, dt, input, T_ * H_, -1.0, 1.0);

    tw_tensor_t L = {0}, X = {0}, EO = {0}, OUT = {0};
    rudnn_routing_plan_t plan = NULL;
    rudnn_dispatched_t d = NULL;
    const rudnn_routing_options_t ro = {.top_k = K_, .renormalize = 1};
    ok = ok && tw_tensor_create(t, &L, dt, 2, T_, E_) && tw_tensor_create(t, &X, dt, 2, T_, H_) &&
         tw_tensor_create(t, &EO, dt, 2, P_, H_) && tw_tensor_create(t, &OUT, dt, 2, T_, H_) && tw_put(t, &L, logits) &&
         tw_put(t, &X, input);
    ok = ok && tw_ok(t, "moe_route", rudnn_moe_route(t->queue, &L.t, &ro, &plan)) &&
         kernel_starts(t, "moe_route", "moe.") && check_route(t, plan, idx_ref, w_ref, w_got);
    ok = ok && tw_ok(t, "moe_dispatch", rudnn_moe_dispatch(t->queue, plan, &X.t, &d)) &&
         kernel_starts(t, "moe_dispatch", "moe.") && check_dispatch(t, d, idx_ref, input, offsets, positions, rows);
    if (before_forward) /* every thread waits here, even one that failed before */
        pthread_barrier_wait(before_forward);
    ok = ok && tw_ok(t, "swiglu_experts_forward_dispatched",
                     rudnn_swiglu_experts_forward_dispatched(t->queue, x->experts, d, strategy, NULL, 0, &EO.t)) &&
         kernel_of_strategy(t, x, strategy) && tw_get(t, &EO.t, eo) && check_experts(t, x, offsets, rows, eo);
    ok = ok && tw_ok(t, "moe_combine", rudnn_moe_combine(t->queue, d, &EO.t, &OUT.t)) &&
         kernel_starts(t, "moe_combine", "moe.") && tw_get(t, &OUT.t, out) &&
         check_combine(t, dt, w_got, positions, eo, out);

    rudnn_dispatched_destroy(d);
    rudnn_routing_plan_destroy(plan);
    tw_tensor_t *all[] = {&L, &X, &EO, &OUT};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tw_tensor_destroy(all[i]);
    free(rows);
    free(eo);
    return ok;
}

/* ---- attention --------------------------------------------------------------------------------- */

enum { TA_HQ = 2, TA_HKV = 1, TA_SQ = 6, TA_SKV = 9, TA_D = 16 };

int tw_attention_round(tw_thread_t *t)
{
    int count = 0;
    if (rudnn_attention_kernel_count(t->ctx, &count) == RUDNN_STATUS_NOT_SUPPORTED)
        return 1; /* no attention kernels on this backend (test_attention checks that answer) */
    const rudnn_dtype_t dt = t->dtype;
    float q[TA_HQ * TA_SQ * TA_D], k[TA_HKV * TA_SKV * TA_D], v[TA_HKV * TA_SKV * TA_D];
    float got[TA_HQ * TA_SQ * TA_D], lse_got[TA_HQ * TA_SQ];
    double ref[TA_HQ * TA_SQ * TA_D], lse_ref[TA_HQ * TA_SQ];
    fill(t, dt, q, TA_HQ * TA_SQ * TA_D, -1.0, 1.0);
    fill(t, dt, k, TA_HKV * TA_SKV * TA_D, -1.0, 1.0);
    fill(t, dt, v, TA_HKV * TA_SKV * TA_D, -1.0, 1.0);
    tw_tensor_t Q = {0}, K = {0}, V = {0}, O = {0}, L = {0};
    /* made as 2-D buffers, then described as [1, H, S, D] */
    int ok = tw_tensor_create(t, &Q, dt, 2, TA_HQ * TA_SQ, TA_D) && tw_tensor_create(t, &K, dt, 2, TA_HKV * TA_SKV, TA_D) &&
             tw_tensor_create(t, &V, dt, 2, TA_HKV * TA_SKV, TA_D) && tw_tensor_create(t, &O, dt, 2, TA_HQ * TA_SQ, TA_D) &&
             tw_tensor_create(t, &L, RUDNN_F32, 1, TA_HQ * TA_SQ, 0);
    ok = ok && tw_put(t, &Q, q) && tw_put(t, &K, k) && tw_put(t, &V, v);
    const int64_t dq[4] = {1, TA_HQ, TA_SQ, TA_D}, dk[4] = {1, TA_HKV, TA_SKV, TA_D}, dl[3] = {1, TA_HQ, TA_SQ};
    rudnn_tensor_t tq, tk, tv, to, tl;
    ok = ok && tw_ok(t, "tensor_init", rudnn_tensor_init(&tq, Q.buf, 0, dt, 4, dq)) &&
         tw_ok(t, "tensor_init", rudnn_tensor_init(&tk, K.buf, 0, dt, 4, dk)) &&
         tw_ok(t, "tensor_init", rudnn_tensor_init(&tv, V.buf, 0, dt, 4, dk)) &&
         tw_ok(t, "tensor_init", rudnn_tensor_init(&to, O.buf, 0, dt, 4, dq)) &&
         tw_ok(t, "tensor_init", rudnn_tensor_init(&tl, L.buf, 0, RUDNN_F32, 3, dl));
    attn_ref_problem_t p = {.batch = 1, .heads_q = TA_HQ, .heads_kv = TA_HKV, .seq_q = TA_SQ, .seq_kv = TA_SKV,
                            .head_dim = TA_D, .head_dim_v = TA_D, .q = q, .k = k, .v = v,
                            .scale = (double)(1.0f / 4.0f), .causal = 1, .window_left = -1, .window_right = -1};
    attn_ref_forward(&p, ref, lse_ref);
    rudnn_attention_options_t o;
    rudnn_attention_options_init(&o);
    o.causal = 1;
    /* every strategy the backend lists, and Autotune (threads racing on the autotune cache) */
    for (int s = RUDNN_ATTENTION_AUTOTUNE; ok && s <= RUDNN_ATTENTION_FLASH_ACCELERATED; s++) {
        int listed = s == RUDNN_ATTENTION_AUTOTUNE;
        for (int i = 0; i < count && !listed; i++) {
            const char *name;
            rudnn_attention_strategy_t st;
            listed = !rudnn_attention_kernel_info(t->ctx, i, &name, &st) && (int)st == s;
        }
        if (!listed)
            continue;
        /* a listed strategy may have no kernel for this dtype (CUDA's tensor-core kernel: F16 and
         * BF16 only): resolve says so, and the round moves on */
        rudnn_attention_choice_t choice;
        if (rudnn_attention_resolve(t->queue, &tq, &tk, &tv, NULL, NULL, &o, (rudnn_attention_strategy_t)s, &to, &tl,
                                    &choice) == RUDNN_STATUS_NOT_SUPPORTED && s != RUDNN_ATTENTION_AUTOTUNE)
            continue;
        ok = tw_ok(t, "attention", rudnn_attention(t->queue, &tq, &tk, &tv, NULL, NULL, &o,
                                                   (rudnn_attention_strategy_t)s, NULL, 0, &to, &tl)) &&
             kernel_starts(t, "attention", "attention.") && tw_get(t, &to, got) && tw_get(t, &tl, lse_got);
        /* |v| <= 1, so out's error is test_attention's per-row bound */
        const double tol = dt == RUDNN_F32 ? 2e-5 : dt == RUDNN_F16 ? 1e-3 : 4e-3;
        for (int i = 0; ok && i < TA_HQ * TA_SQ * TA_D; i++) {
            if (!(fabs(got[i] - ref[i]) <= tol)) {
                rt_logf(t->log, "  %s: attention strategy %d: out[%d] = %.8g, expected %.8g\n", t->label, s, i,
                        (double)got[i], ref[i]);
                t->log->failures++;
                ok = 0;
            }
        }
        for (int i = 0; ok && i < TA_HQ * TA_SQ; i++) {
            if (!(fabs(lse_got[i] - lse_ref[i]) <= 1e-4 + 1e-5 * fabs(lse_ref[i]))) {
                rt_logf(t->log, "  %s: attention strategy %d: lse[%d] = %.8g, expected %.8g\n", t->label, s, i,
                        (double)lse_got[i], lse_ref[i]);
                t->log->failures++;
                ok = 0;
            }
        }
    }
    tw_tensor_t *all[] = {&Q, &K, &V, &O, &L};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tw_tensor_destroy(all[i]);
    return ok;
}

/* ---- paged attention --------------------------------------------------------------------------- */

/* Two sequences (lengths 7 and 3, the last token of each appended this step) on 6 pages of 4
 * tokens in a shuffled order: decode queries at the appended positions, causal. */
enum { TP_PS = 4, TP_PAGES = 6, TP_Q = 2, TP_HQ = 4, TP_HKV = 2, TP_D = 8 };
enum { TP_ROW = TP_HKV * TP_D, TP_CACHE = TP_PAGES * TP_PS * TP_ROW };

int tw_paged_attention_round(tw_thread_t *t)
{
    static const int64_t lengths[2] = {7, 3}, offsets[3] = {0, 2, 3}, ids[TP_Q] = {0, 1}, pos[TP_Q] = {6, 2};
    static const int32_t tables[3] = {5, 1, 3};
    const rudnn_paged_schedule_t sc = {TP_PS, TP_PAGES, 2, lengths, offsets, tables, TP_Q, ids, pos};
    const rudnn_dtype_t dt = t->dtype;
    float q[TP_Q * TP_HQ * TP_D], kc[TP_CACHE], vc[TP_CACHE], kn[TP_Q * TP_ROW], vn[TP_Q * TP_ROW];
    float got[TP_Q * TP_HQ * TP_D];
    double qd[TP_Q * TP_HQ * TP_D], kd[TP_CACHE], vd[TP_CACHE], ref[TP_Q * TP_HQ * TP_D];
    fill(t, dt, q, TP_Q * TP_HQ * TP_D, -1.0, 1.0);
    fill(t, dt, kc, TP_CACHE, -1.0, 1.0);
    fill(t, dt, vc, TP_CACHE, -1.0, 1.0);
    fill(t, dt, kn, TP_Q * TP_ROW, -1.0, 1.0);
    fill(t, dt, vn, TP_Q * TP_ROW, -1.0, 1.0);

    /* the reference: the new rows written into host copies of the caches first */
    for (int i = 0; i < TP_Q * TP_HQ * TP_D; i++)
        qd[i] = q[i];
    for (int i = 0; i < TP_CACHE; i++)
        kd[i] = kc[i], vd[i] = vc[i];
    double knd[TP_Q * TP_ROW], vnd[TP_Q * TP_ROW];
    for (int i = 0; i < TP_Q * TP_ROW; i++)
        knd[i] = kn[i], vnd[i] = vn[i];
    int ok = pa_ref_append(&sc, TP_ROW, sizeof(double), knd, kd) == 0 &&
             pa_ref_append(&sc, TP_ROW, sizeof(double), vnd, vd) == 0 &&
             pa_ref_attention(&sc, TP_HQ, TP_HKV, TP_D, TP_D, qd, kd, vd, 0.35, 1, ref) == 0;
    if (!ok) {
        rt_logf(t->log, "  %s: the paged-attention reference refused its own schedule\n", t->label);
        t->log->failures++;
        return 0;
    }

    rudnn_paged_host_plan_t host = NULL;
    rudnn_paged_plan_t plan = NULL;
    rudnn_paged_split_workspace_t ws = NULL;
    rudnn_status_t st = rudnn_paged_host_plan_create(&sc, &host);
    if (!tw_ok(t, "paged_host_plan_create", st))
        return 0;
    st = rudnn_paged_plan_create(t->queue, host, &plan);
    rudnn_paged_host_plan_destroy(host);
    if (!tw_ok(t, "paged_plan_create", st))
        return 0;
    tw_tensor_t Q = {0}, K = {0}, V = {0}, KN = {0}, VN = {0}, O = {0};
    ok = tw_tensor_create(t, &Q, dt, 2, TP_Q * TP_HQ, TP_D) && tw_tensor_create(t, &O, dt, 2, TP_Q * TP_HQ, TP_D) &&
         tw_tensor_create(t, &K, dt, 2, TP_CACHE / TP_D, TP_D) &&
         tw_tensor_create(t, &V, dt, 2, TP_CACHE / TP_D, TP_D) &&
         tw_tensor_create(t, &KN, dt, 2, TP_Q * TP_HKV, TP_D) && tw_tensor_create(t, &VN, dt, 2, TP_Q * TP_HKV, TP_D);
    ok = ok && tw_put(t, &Q, q) && tw_put(t, &K, kc) && tw_put(t, &V, vc) && tw_put(t, &KN, kn) && tw_put(t, &VN, vn);
    const int64_t dq[3] = {TP_Q, TP_HQ, TP_D}, dc[4] = {TP_PAGES, TP_PS, TP_HKV, TP_D}, dn[3] = {TP_Q, TP_HKV, TP_D};
    rudnn_tensor_t tq, tk, tv, tkn, tvn, to, k_out, v_out;
    ok = ok && tw_ok(t, "tensor_init", rudnn_tensor_init(&tq, Q.buf, 0, dt, 3, dq)) &&
         tw_ok(t, "tensor_init", rudnn_tensor_init(&tk, K.buf, 0, dt, 4, dc)) &&
         tw_ok(t, "tensor_init", rudnn_tensor_init(&tv, V.buf, 0, dt, 4, dc)) &&
         tw_ok(t, "tensor_init", rudnn_tensor_init(&tkn, KN.buf, 0, dt, 3, dn)) &&
         tw_ok(t, "tensor_init", rudnn_tensor_init(&tvn, VN.buf, 0, dt, 3, dn)) &&
         tw_ok(t, "tensor_init", rudnn_tensor_init(&to, O.buf, 0, dt, 3, dq));
    /* a backend without paged kernels answers NOT_SUPPORTED (test_paged_attention checks that) */
    int skip = 0;
    if (ok) {
        st = rudnn_paged_append(plan, &tkn, &tvn, &tk, &tv, &k_out, &v_out);
        skip = st == RUDNN_STATUS_NOT_SUPPORTED;
        ok = !skip && tw_ok(t, "paged_append", st);
    }
    ok = ok && tw_ok(t, "paged_split_workspace_create",
                     rudnn_paged_split_workspace_create(t->queue, TP_Q, TP_HQ, TP_D, 0, &ws));
    /* |v| <= 1: out's error is the dtype's rounding (test_paged_attention's tolerances) */
    const double tol = dt == RUDNN_F32 ? 2e-5 : dt == RUDNN_F16 ? 3e-3 : 2e-2;
    for (int form = 0; ok && form < 2; form++) {
        ok = tw_ok(t, form ? "paged_attention_with_workspace" : "paged_attention",
                   form ? rudnn_paged_attention_with_workspace(plan, ws, &tq, &k_out, &v_out, 0.35f, 1, &to)
                        : rudnn_paged_attention(plan, &tq, &k_out, &v_out, 0.35f, 1, &to)) &&
             kernel_starts(t, "paged attention", "paged_attention.") && tw_get(t, &to, got);
        for (int i = 0; ok && i < TP_Q * TP_HQ * TP_D; i++)
            if (!(fabs(got[i] - ref[i]) <= tol)) {
                rt_logf(t->log, "  %s: paged attention (%s): out[%d] = %.8g, expected %.8g\n", t->label,
                        form ? "split" : "plain", i, (double)got[i], ref[i]);
                t->log->failures++;
                ok = 0;
            }
    }
    rudnn_paged_split_workspace_destroy(ws);
    rudnn_paged_plan_destroy(plan);
    tw_tensor_t *all[] = {&Q, &K, &V, &KN, &VN, &O};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tw_tensor_destroy(all[i]);
    return ok || skip;
}
