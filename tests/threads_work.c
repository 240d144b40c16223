/* One thread's rounds of ops for tests/test_threads.c (see threads_work.h). */
#include "threads_work.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/convolution.h>
#include <rudnn/ctc.h>
#include <rudnn/grid_sample.h>
#include <rudnn/interpolation.h>
#include <rudnn/pooling.h>

#include "operand.h" /* rt_half_ulp */
#include "reference/attention_ref.h"
#include "reference/convolution_ref.h"
#include "reference/ctc_ref.h"
#include "reference/grid_sample_ref.h"
#include "reference/interpolation_ref.h"
#include "reference/moe_ref.h"
#include "reference/norm_ref.h"
#include "reference/paged_attention_ref.h"
#include "reference/pooling_ref.h"

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

/* fill, and the same values as doubles (what the references take). */
static void fill2(tw_thread_t *t, rudnn_dtype_t dtype, float *v, double *d, size_t n, double lo, double hi)
{
    fill(t, dtype, v, n, lo, hi);
    for (size_t i = 0; i < n; i++)
        d[i] = v[i];
}

/* A view of x's buffer (made 1-D by tw_tensor_create) as a contiguous tensor of dims. */
static int tw_view(tw_thread_t *t, rudnn_tensor_t *v, const tw_tensor_t *x, int rank, const int64_t *dims)
{
    return tw_ok(t, "tensor_init", rudnn_tensor_init(v, x->buf, 0, x->t.dtype, rank, dims));
}

/* Every byte of x set to byte (0xFF: NaN in F32, F16 and BF16), so that an element a call does not
 * write fails its check. */
static int tw_poison(tw_thread_t *t, const rudnn_tensor_t *x, int byte)
{
    size_t bytes = rudnn_tensor_bytes(x);
    void *raw = malloc(bytes ? bytes : 1);
    if (!raw)
        return 0;
    memset(raw, byte, bytes);
    int ok = tw_ok(t, "tensor_write(poison)", rudnn_tensor_write(t->queue, x, raw, bytes));
    free(raw);
    return ok;
}

/* An element that must equal its reference exactly (a bound for within). */
#define TW_EXACT (-1.0)

/* Adds to rep each element of got (in dtype dt) farther from ref than bound[i] plus half an ulp of
 * dt at max(|got|, |ref|) (the final rounding; the suites' bounds), or off at all where bound[i] is
 * TW_EXACT (bound NULL: all of them). NaN passes only where ref is NaN. */
static void within(ref_report_t *rep, rudnn_dtype_t dt, const char *name, const float *got, const double *ref,
                   const double *bound, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const double b = bound ? bound[i] : TW_EXACT;
        const double allowed = b < 0 ? 0.0 : b + rt_half_ulp(dt, fmax(fabs((double)got[i]), fabs(ref[i])));
        if (ref_check_value(rep, got[i], ref[i], allowed))
            ref_report_mismatch(rep, "    %s[%lld] = %.9g, expected %.9g (allowed %.3g)\n", name, (long long)i,
                                (double)got[i], ref[i], allowed);
    }
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
enum { TA_NQ = TA_HQ * TA_SQ * TA_D, TA_NK = TA_HKV * TA_SKV * TA_D };

/* dq, dk or dv (n elements) against the reference as test_attention's grad_compare does: the
 * norm-wise relative error and the worst element over max |ref| within its tolerances (f32 1e-5
 * and 2e-5, f16 1e-3 and 2e-3, bf16 8e-3 and 1.6e-2: test_attention's grad_tol_of, with why). */
static int grad_close(tw_thread_t *t, const char *name, const float *got, const double *ref, int64_t n)
{
    const rudnn_dtype_t dt = t->dtype;
    const double tol_norm = dt == RUDNN_F32 ? 1e-5 : dt == RUDNN_F16 ? 1e-3 : 8e-3;
    const double tol_elem = dt == RUDNN_F32 ? 2e-5 : dt == RUDNN_F16 ? 2e-3 : 1.6e-2;
    double num = 0, den = 0, rmax = 0, emax = 0;
    int64_t worst = 0;
    for (int64_t i = 0; i < n; i++)
        rmax = fmax(rmax, fabs(ref[i]));
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]);
        if (!(e == e))
            e = INFINITY;
        num += e * e;
        den += ref[i] * ref[i];
        if (!(e <= emax))
            emax = e, worst = i;
    }
    const double norm = den > 0 ? sqrt(num / den) : sqrt(num), elem = emax / (rmax > 0 ? rmax : 1);
    if (norm <= tol_norm && elem <= tol_elem)
        return 1;
    rt_logf(t->log, "  %s: attention_backward: %s norm-wise error %.3g (tolerance %.3g), element %lld = %.9g, "
            "expected %.9g: error / max|ref| %.3g (tolerance %.3g)\n", t->label, name, norm, tol_norm,
            (long long)worst, (double)got[worst], ref[worst], elem, tol_elem);
    t->log->failures++;
    return 0;
}

/* rudnn_attention_backward of problem p, whose forward's out and lse are in to and tl: dq, dk and
 * dv against attn_ref_backward. A backend whose backward answers NOT_SUPPORTED skips it. */
static int attention_backward(tw_thread_t *t, const attn_ref_problem_t *p, const rudnn_tensor_t *tq,
                              const rudnn_tensor_t *tk, const rudnn_tensor_t *tv, const rudnn_tensor_t *to,
                              const rudnn_tensor_t *tl, const rudnn_attention_options_t *o)
{
    const rudnn_dtype_t dt = t->dtype;
    float dout[TA_NQ], got_q[TA_NQ], got_k[TA_NK], got_v[TA_NK];
    double ref_q[TA_NQ], ref_k[TA_NK], ref_v[TA_NK];
    fill(t, dt, dout, TA_NQ, -1.0, 1.0);
    tw_tensor_t DO = {0}, DQ = {0}, DK = {0}, DV = {0};
    const int64_t dq[4] = {1, TA_HQ, TA_SQ, TA_D}, dk[4] = {1, TA_HKV, TA_SKV, TA_D};
    rudnn_tensor_t tdo, tdq, tdk, tdv;
    int ok = tw_tensor_create(t, &DO, dt, 1, TA_NQ, 0) && tw_tensor_create(t, &DQ, dt, 1, TA_NQ, 0) &&
             tw_tensor_create(t, &DK, dt, 1, TA_NK, 0) && tw_tensor_create(t, &DV, dt, 1, TA_NK, 0) &&
             tw_view(t, &tdo, &DO, 4, dq) && tw_view(t, &tdq, &DQ, 4, dq) && tw_view(t, &tdk, &DK, 4, dk) &&
             tw_view(t, &tdv, &DV, 4, dk) && tw_put(t, &DO, dout) && tw_poison(t, &tdq, 0xFF) &&
             tw_poison(t, &tdk, 0xFF) && tw_poison(t, &tdv, 0xFF);
    const rudnn_attention_backward_args_t args = {tq, tk, tv, NULL, NULL, to, tl, &tdo, &tdq, &tdk, &tdv};
    size_t bytes = 0;
    int skip = 0;
    if (ok) {
        const rudnn_status_t st = rudnn_attention_backward_workspace_size(t->queue, &args, o, &bytes);
        skip = st == RUDNN_STATUS_NOT_SUPPORTED;
        ok = !skip && tw_ok(t, "attention_backward_workspace_size", st);
    }
    ok = ok && tw_ok(t, "attention_backward", rudnn_attention_backward(t->queue, &args, o, NULL, 0)) &&
         kernel_starts(t, "attention_backward", "attention.");
    if (ok && !strstr(rudnn_last_kernel(), "backward")) {
        rt_logf(t->log, "  %s: after attention_backward rudnn_last_kernel() is \"%s\", not a backward kernel\n",
                t->label, rudnn_last_kernel());
        t->log->failures++;
        ok = 0;
    }
    ok = ok && tw_get(t, &tdq, got_q) && tw_get(t, &tdk, got_k) && tw_get(t, &tdv, got_v);
    if (ok) {
        attn_ref_backward(p, dout, ref_q, ref_k, ref_v);
        ok = grad_close(t, "dq", got_q, ref_q, TA_NQ) && grad_close(t, "dk", got_k, ref_k, TA_NK) &&
             grad_close(t, "dv", got_v, ref_v, TA_NK);
    }
    tw_tensor_t *all[] = {&DO, &DQ, &DK, &DV};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tw_tensor_destroy(all[i]);
    return ok || skip;
}

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
    /* the backward of the last forward (its out and lse are in O and L) */
    ok = ok && attention_backward(t, &p, &tq, &tk, &tv, &to, &tl, &o);
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

/* ---- convolution ------------------------------------------------------------------------------- */

/* 2D, stride 2, padding 1: x [2, 3, 7, 6], w [4, 3, 3, 3], bias [4] -> y [2, 4, 4, 3]. */
enum { TC_N = 2, TC_C = 3, TC_K = 4, TC_H = 7, TC_W = 6, TC_R = 3, TC_PH = 4, TC_PW = 3 };
enum { TC_NX = TC_N * TC_C * TC_H * TC_W, TC_NW = TC_K * TC_C * TC_R * TC_R, TC_NY = TC_N * TC_K * TC_PH * TC_PW };
enum { TC_MAX = TC_NX }; /* the largest of the three */

static const char *const conv_ops[3] = {"conv_forward", "conv_data_backward", "conv_weight_backward"};

/* 1 when the backend lists a kernel of direction d, of strategy s (-1: any) and named name (NULL:
 * any). */
static int conv_listed(rudnn_context_t ctx, int count, int s, int d, const char *name)
{
    for (int i = 0; i < count; i++) {
        const char *k;
        rudnn_conv_strategy_t ks;
        rudnn_conv_direction_t kd;
        if (rudnn_conv_kernel_info(ctx, i, &k, &ks, &kd) == RUDNN_STATUS_SUCCESS && (int)kd == d &&
            (s < 0 || (int)ks == s) && (!name || (k && strcmp(k, name) == 0)))
            return 1;
    }
    return 0;
}

/* Logs unless the last kernel is want (the kernel resolve named) or, want NULL (Autotune), a listed
 * kernel of direction d. */
static int conv_ran(tw_thread_t *t, const char *what, int count, int d, const char *want)
{
    const char *k = rudnn_last_kernel();
    if (want ? strcmp(k, want) == 0 : conv_listed(t->ctx, count, -1, d, k))
        return 1;
    rt_logf(t->log, "  %s: after %s rudnn_last_kernel() is \"%s\", expected %s%s\n", t->label, what, k,
            want ? "the resolved " : "a listed kernel of the direction", want ? want : "");
    t->log->failures++;
    return 0;
}

int tw_convolution_round(tw_thread_t *t)
{
    int count = 0;
    if (rudnn_conv_kernel_count(t->ctx, &count) == RUDNN_STATUS_NOT_SUPPORTED)
        return 1; /* no convolution kernels on this backend (test_convolution checks that answer) */
    const rudnn_dtype_t dt = t->dtype;
    float x[TC_NX], w[TC_NW], b[TC_K], dy[TC_NY], got[TC_MAX], got_db[TC_K];
    double xd[TC_NX], wd[TC_NW], bd[TC_K], dyd[TC_NY], ref[3][TC_MAX], abs_terms[3][TC_MAX], bound[TC_MAX];
    double ref_db[TC_K], abs_db[TC_K], bound_db[TC_K];
    fill2(t, dt, x, xd, TC_NX, -1.0, 1.0);
    fill2(t, dt, w, wd, TC_NW, -1.0, 1.0);
    fill2(t, dt, b, bd, TC_K, -1.0, 1.0);
    fill2(t, dt, dy, dyd, TC_NY, -1.0, 1.0);
    const conv_ref_shape_t s = {.spatial = 2, .batch = TC_N, .in_channels = TC_C, .out_channels = TC_K, .groups = 1,
                                .in_size = {TC_H, TC_W}, .filter_size = {TC_R, TC_R}, .stride = {2, 2},
                                .padding = {1, 1}, .dilation = {1, 1}};
    int64_t P[CONV_REF_MAX_SPATIAL];
    if (conv_ref_out_size(&s, P) || P[0] != TC_PH || P[1] != TC_PW || conv_ref_forward(&s, xd, wd, bd, ref[0], abs_terms[0]) ||
        conv_ref_data_backward(&s, dyd, wd, ref[1], abs_terms[1]) ||
        conv_ref_weight_backward(&s, xd, dyd, ref[2], abs_terms[2], ref_db, abs_db)) {
        rt_logf(t->log, "  %s: the convolution reference refused the round's shape\n", t->label);
        t->log->failures++;
        return 0;
    }
    /* test_convolution's bound: max(1e-5, (n + 2) 2^-24) sum|terms| plus the half ulp, n the most
     * terms an output of the direction sums (bias one more) */
    const int64_t terms[3] = {conv_ref_max_terms_forward(&s) + 1, conv_ref_max_terms_data(&s),
                              conv_ref_max_terms_weight(&s)};
    const int64_t n_out[3] = {TC_NY, TC_NX, TC_NW};
    static const char *const out_names[3] = {"y", "dx", "dw"};

    tw_tensor_t X = {0}, Wt = {0}, B = {0}, Y = {0}, DY = {0}, DX = {0}, DW = {0}, DB = {0};
    const int64_t xdims[4] = {TC_N, TC_C, TC_H, TC_W}, wdims[4] = {TC_K, TC_C, TC_R, TC_R};
    const int64_t ydims[4] = {TC_N, TC_K, TC_PH, TC_PW};
    rudnn_tensor_t tx, tw, ty, tdy, tdx, tdw;
    int ok = tw_tensor_create(t, &X, dt, 1, TC_NX, 0) && tw_tensor_create(t, &Wt, dt, 1, TC_NW, 0) &&
             tw_tensor_create(t, &B, dt, 1, TC_K, 0) && tw_tensor_create(t, &Y, dt, 1, TC_NY, 0) &&
             tw_tensor_create(t, &DY, dt, 1, TC_NY, 0) && tw_tensor_create(t, &DX, dt, 1, TC_NX, 0) &&
             tw_tensor_create(t, &DW, dt, 1, TC_NW, 0) && tw_tensor_create(t, &DB, dt, 1, TC_K, 0);
    ok = ok && tw_view(t, &tx, &X, 4, xdims) && tw_view(t, &tw, &Wt, 4, wdims) && tw_view(t, &ty, &Y, 4, ydims) &&
         tw_view(t, &tdy, &DY, 4, ydims) && tw_view(t, &tdx, &DX, 4, xdims) && tw_view(t, &tdw, &DW, 4, wdims);
    ok = ok && tw_put(t, &X, x) && tw_put(t, &Wt, w) && tw_put(t, &B, b) && tw_put(t, &DY, dy);
    rudnn_conv_options_t o;
    rudnn_conv_options_init(&o);
    o.stride[0] = o.stride[1] = 2;
    o.padding[0] = o.padding[1] = 1;
    for (int d = RUDNN_CONV_FORWARD; ok && d <= RUDNN_CONV_WEIGHT_BACKWARD; d++) {
        rudnn_conv_tensors_t ts;
        memset(&ts, 0, sizeof ts);
        const rudnn_tensor_t *out = d == RUDNN_CONV_FORWARD ? &ty : d == RUDNN_CONV_DATA_BACKWARD ? &tdx : &tdw;
        if (d == RUDNN_CONV_FORWARD)
            ts.x = &tx, ts.w = &tw, ts.bias = &B.t, ts.y = &ty;
        else if (d == RUDNN_CONV_DATA_BACKWARD)
            ts.dy = &tdy, ts.w = &tw, ts.dx = &tdx;
        else
            ts.x = &tx, ts.dy = &tdy, ts.dw = &tdw, ts.dbias = &DB.t;
        /* every strategy the backend lists for the direction, and Autotune (threads racing on the
         * autotune cache) */
        for (int st = RUDNN_CONV_AUTOTUNE; ok && st <= RUDNN_CONV_IMPLICIT_GEMM; st++) {
            if (st != RUDNN_CONV_AUTOTUNE && !conv_listed(t->ctx, count, st, d, NULL))
                continue;
            const rudnn_conv_strategy_t strat = (rudnn_conv_strategy_t)st;
            const rudnn_conv_direction_t dir = (rudnn_conv_direction_t)d;
            rudnn_conv_choice_t choice;
            const rudnn_status_t rs = rudnn_conv_resolve(t->queue, dir, &ts, &o, strat, &choice);
            if (rs == RUDNN_STATUS_NOT_SUPPORTED && st != RUDNN_CONV_AUTOTUNE)
                continue; /* listed, but without a kernel for this call (as attention's) */
            char what[64];
            snprintf(what, sizeof what, "%s (strategy %d)", conv_ops[d], st);
            size_t bytes = 0;
            ok = tw_ok(t, "conv_resolve", rs) &&
                 tw_ok(t, "conv_workspace_size", rudnn_conv_workspace_size(t->queue, dir, &ts, &o, strat, &bytes)) &&
                 tw_poison(t, out, 0xFF) && (d != RUDNN_CONV_WEIGHT_BACKWARD || tw_poison(t, &DB.t, 0xFF));
            if (!ok)
                break;
            const rudnn_status_t cs =
                d == RUDNN_CONV_FORWARD ? rudnn_conv_forward(t->queue, &tx, &tw, &B.t, &o, strat, NULL, 0, &ty)
                : d == RUDNN_CONV_DATA_BACKWARD
                    ? rudnn_conv_data_backward(t->queue, &tdy, &tw, &o, strat, NULL, 0, &tdx)
                    : rudnn_conv_weight_backward(t->queue, &tx, &tdy, &o, strat, NULL, 0, &tdw, &DB.t);
            ok = tw_ok(t, what, cs) && conv_ran(t, what, count, d, st == RUDNN_CONV_AUTOTUNE ? NULL : choice.kernel) &&
                 tw_get(t, out, got) && (d != RUDNN_CONV_WEIGHT_BACKWARD || tw_get(t, &DB.t, got_db));
            if (ok) {
                ref_report_t rep;
                ref_report_init(&rep);
                const double tol = fmax(1e-5, (double)(terms[d] + 2) * 0x1p-24);
                for (int64_t i = 0; i < n_out[d]; i++)
                    bound[i] = tol * abs_terms[d][i];
                within(&rep, dt, out_names[d], got, ref[d], bound, n_out[d]);
                if (d == RUDNN_CONV_WEIGHT_BACKWARD) {
                    for (int k = 0; k < TC_K; k++)
                        bound_db[k] = tol * abs_db[k];
                    within(&rep, dt, "dbias", got_db, ref_db, bound_db, TC_K);
                }
                ok = report_clean(t, what, &rep);
            }
        }
    }
    tw_tensor_t *all[] = {&X, &Wt, &B, &Y, &DY, &DX, &DW, &DB};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tw_tensor_destroy(all[i]);
    return ok;
}

/* ---- pooling ------------------------------------------------------------------------------------ */

/* 2D MAX, window 3, stride 2, padding 1 (overlapping windows): x [2, 3, 7, 6] -> y [2, 3, 4, 3]. */
enum { TQ_N = 2, TQ_C = 3, TQ_H = 7, TQ_W = 6, TQ_PH = 4, TQ_PW = 3 };
enum { TQ_NX = TQ_N * TQ_C * TQ_H * TQ_W, TQ_NY = TQ_N * TQ_C * TQ_PH * TQ_PW };

int tw_pooling_round(tw_thread_t *t)
{
    const rudnn_dtype_t dt = t->dtype;
    float x[TQ_NX], dy[TQ_NY], got_y[TQ_NY], got_dx[TQ_NX];
    double xd[TQ_NX], dyd[TQ_NY], ref_y[TQ_NY], ref_dx[TQ_NX], dx_abs[TQ_NX], bound[TQ_NX];
    int64_t ref_idx[TQ_NY], got_idx[TQ_NY], dx_terms[TQ_NX];
    fill2(t, dt, x, xd, TQ_NX, -1.0, 1.0);
    fill2(t, dt, dy, dyd, TQ_NY, -1.0, 1.0);
    const pool_ref_shape_t s = {.mode = POOL_REF_MAX, .spatial = 2, .batch = TQ_N, .channels = TQ_C,
                                .in_size = {TQ_H, TQ_W}, .window = {3, 3}, .stride = {2, 2}, .padding = {1, 1},
                                .dilation = {1, 1}, .ceil_mode = 0};
    int64_t P[POOL_REF_MAX_SPATIAL];
    if (pool_ref_out_size(&s, P) != POOL_REF_OK || P[0] != TQ_PH || P[1] != TQ_PW ||
        pool_ref_forward(&s, xd, ref_y, ref_idx, NULL) || pool_ref_backward(&s, xd, dyd, ref_dx, dx_abs, dx_terms)) {
        rt_logf(t->log, "  %s: the pooling reference refused the round's shape\n", t->label);
        t->log->failures++;
        return 0;
    }
    tw_tensor_t X = {0}, Y = {0}, I = {0}, DY = {0}, DX = {0};
    const int64_t xdims[4] = {TQ_N, TQ_C, TQ_H, TQ_W}, ydims[4] = {TQ_N, TQ_C, TQ_PH, TQ_PW};
    rudnn_tensor_t tx, ty, ti, tdy, tdx;
    int ok = tw_tensor_create(t, &X, dt, 1, TQ_NX, 0) && tw_tensor_create(t, &Y, dt, 1, TQ_NY, 0) &&
             tw_tensor_create(t, &I, RUDNN_I64, 1, TQ_NY, 0) && tw_tensor_create(t, &DY, dt, 1, TQ_NY, 0) &&
             tw_tensor_create(t, &DX, dt, 1, TQ_NX, 0);
    ok = ok && tw_view(t, &tx, &X, 4, xdims) && tw_view(t, &ty, &Y, 4, ydims) && tw_view(t, &ti, &I, 4, ydims) &&
         tw_view(t, &tdy, &DY, 4, ydims) && tw_view(t, &tdx, &DX, 4, xdims);
    ok = ok && tw_put(t, &X, x) && tw_put(t, &DY, dy) && tw_poison(t, &ty, 0xFF) && tw_poison(t, &ti, 0x55) &&
         tw_poison(t, &tdx, 0xFF);
    rudnn_pool_options_t o;
    rudnn_pool_options_init(&o);
    o.mode = RUDNN_POOL_MAX;
    o.window[0] = o.window[1] = 3;
    o.stride[0] = o.stride[1] = 2;
    o.padding[0] = o.padding[1] = 1;
    /* a backend without pooling kernels answers NOT_SUPPORTED (test_pooling checks that) */
    int skip = 0;
    if (ok) {
        const rudnn_status_t st = rudnn_pool_forward(t->queue, &tx, &o, &ty, &ti);
        skip = st == RUDNN_STATUS_NOT_SUPPORTED;
        ok = !skip && tw_ok(t, "pool_forward", st);
    }
    ok = ok && kernel_starts(t, "pool_forward", "pooling.") && tw_get(t, &ty, got_y) &&
         tw_ok(t, "tensor_read(indices)", rudnn_tensor_read(t->queue, &ti, got_idx, sizeof got_idx));
    ref_report_t rep;
    if (ok) { /* MAX selects an element: y and its index exact */
        ref_report_init(&rep);
        within(&rep, dt, "y", got_y, ref_y, NULL, TQ_NY);
        for (int i = 0; i < TQ_NY; i++)
            if (got_idx[i] != ref_idx[i])
                ref_report_mismatch(&rep, "    indices[%d] = %lld, expected %lld\n", i, (long long)got_idx[i],
                                    (long long)ref_idx[i]);
        ok = report_clean(t, "pool_forward", &rep);
    }
    ok = ok && tw_ok(t, "pool_backward", rudnn_pool_backward(t->queue, &tx, &tdy, &o, &tdx)) &&
         kernel_starts(t, "pool_backward", "pooling.") && tw_get(t, &tdx, got_dx);
    if (ok) { /* test_pooling's bound: exact where one output routes into the element, else the FP32
               * sum of n terms, (n + 1) 2^-24 sum|terms| plus the half ulp (n: the most outputs
               * sharing an element) */
        const int64_t n = pool_ref_max_overlap(&s);
        for (int i = 0; i < TQ_NX; i++)
            bound[i] = dx_terms[i] <= 1 ? TW_EXACT : (double)(n + 1) * 0x1p-24 * dx_abs[i];
        ref_report_init(&rep);
        within(&rep, dt, "dx", got_dx, ref_dx, bound, TQ_NX);
        ok = report_clean(t, "pool_backward", &rep);
    }
    tw_tensor_t *all[] = {&X, &Y, &I, &DY, &DX};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tw_tensor_destroy(all[i]);
    return ok || skip;
}

/* ---- interpolation ------------------------------------------------------------------------------ */

/* 2D LINEAR (bilinear), align_corners 0, the ratios from the sizes: x [2, 2, 5, 4] -> y [2, 2, 9, 7]. */
enum { TI_N = 2, TI_C = 2, TI_H = 5, TI_W = 4, TI_OH = 9, TI_OW = 7 };
enum { TI_NX = TI_N * TI_C * TI_H * TI_W, TI_NY = TI_N * TI_C * TI_OH * TI_OW };

int tw_interpolation_round(tw_thread_t *t)
{
    const rudnn_dtype_t dt = t->dtype;
    float x[TI_NX], dy[TI_NY], got_y[TI_NY], got_dx[TI_NX];
    double xd[TI_NX], dyd[TI_NY], ref_y[TI_NY], y_abs[TI_NY], y_in[TI_NY], bound_y[TI_NY];
    double ref_dx[TI_NX], dx_abs[TI_NX], dx_in[TI_NX], bound_dx[TI_NX];
    int64_t dx_terms[TI_NX];
    fill2(t, dt, x, xd, TI_NX, -1.0, 1.0);
    fill2(t, dt, dy, dyd, TI_NY, -1.0, 1.0);
    const interp_ref_shape_t s = {.mode = INTERP_REF_LINEAR, .spatial = 2, .align_corners = 0, .batch = TI_N,
                                  .channels = TI_C, .in_size = {TI_H, TI_W}, .out_size = {TI_OH, TI_OW}};
    if (!interp_ref_valid(&s) || interp_ref_forward(&s, xd, ref_y, y_abs, y_in) ||
        interp_ref_backward(&s, dyd, ref_dx, dx_abs, dx_in, dx_terms)) {
        rt_logf(t->log, "  %s: the interpolation reference refused the round's shape\n", t->label);
        t->log->failures++;
        return 0;
    }
    tw_tensor_t X = {0}, Y = {0}, DY = {0}, DX = {0};
    const int64_t xdims[4] = {TI_N, TI_C, TI_H, TI_W}, ydims[4] = {TI_N, TI_C, TI_OH, TI_OW};
    rudnn_tensor_t tx, ty, tdy, tdx;
    int ok = tw_tensor_create(t, &X, dt, 1, TI_NX, 0) && tw_tensor_create(t, &Y, dt, 1, TI_NY, 0) &&
             tw_tensor_create(t, &DY, dt, 1, TI_NY, 0) && tw_tensor_create(t, &DX, dt, 1, TI_NX, 0);
    ok = ok && tw_view(t, &tx, &X, 4, xdims) && tw_view(t, &ty, &Y, 4, ydims) && tw_view(t, &tdy, &DY, 4, ydims) &&
         tw_view(t, &tdx, &DX, 4, xdims);
    ok = ok && tw_put(t, &X, x) && tw_put(t, &DY, dy) && tw_poison(t, &ty, 0xFF) && tw_poison(t, &tdx, 0xFF);
    rudnn_interp_options_t o;
    rudnn_interp_options_init(&o);
    o.mode = RUDNN_INTERP_LINEAR;
    /* a backend without interpolation kernels answers NOT_SUPPORTED (test_interpolation checks that) */
    int skip = 0;
    if (ok) {
        const rudnn_status_t st = rudnn_interpolate_forward(t->queue, &tx, &o, &ty);
        skip = st == RUDNN_STATUS_NOT_SUPPORTED;
        ok = !skip && tw_ok(t, "interpolate_forward", st);
    }
    ok = ok && kernel_starts(t, "interpolate_forward", "interpolation.") && tw_get(t, &ty, got_y) &&
         tw_ok(t, "interpolate_backward", rudnn_interpolate_backward(t->queue, &tdy, &o, &tdx)) &&
         kernel_starts(t, "interpolate_backward", "interpolation.") && tw_get(t, &tdx, got_dx);
    if (ok) {
        /* test_interpolation's bound: (n + 2d + 2) 2^-24 sum|w v| + E d (1 + c) 2^-24 sum|v| plus the
         * half ulp, n the terms of the element, E = 4 (LINEAR), c the largest |source coordinate| */
        const double werr = 4.0 * 2 * (1.0 + interp_ref_max_source(&s));
        const int64_t nf = interp_ref_terms_forward(&s);
        for (int i = 0; i < TI_NY; i++)
            bound_y[i] = (double)(nf + 6) * 0x1p-24 * y_abs[i] + werr * 0x1p-24 * y_in[i];
        for (int i = 0; i < TI_NX; i++)
            bound_dx[i] = (double)((dx_terms[i] > 0 ? dx_terms[i] : 1) + 6) * 0x1p-24 * dx_abs[i] +
                          werr * 0x1p-24 * dx_in[i];
        ref_report_t rep;
        ref_report_init(&rep);
        within(&rep, dt, "y", got_y, ref_y, bound_y, TI_NY);
        within(&rep, dt, "dx", got_dx, ref_dx, bound_dx, TI_NX);
        ok = report_clean(t, "interpolate_forward and backward", &rep);
    }
    tw_tensor_t *all[] = {&X, &Y, &DY, &DX};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tw_tensor_destroy(all[i]);
    return ok || skip;
}

/* ---- ctc ---------------------------------------------------------------------------------------- */

/* log_probs [8, 3, 5] (blank 0), targets [3, 3]: input lengths 8, 6, 5 and target lengths 3, 2, 1
 * (every alignment possible); the targets' padding holds -1, which would make its sample NaN if it
 * were read. */
enum { TX_T = 8, TX_N = 3, TX_C = 5, TX_S = 3, TX_NLP = TX_T * TX_N * TX_C };

int tw_ctc_round(tw_thread_t *t)
{
    static const int64_t il[TX_N] = {8, 6, 5}, tl[TX_N] = {3, 2, 1};
    const rudnn_dtype_t dt = t->dtype;
    const rudnn_dtype_t tdt = rt_rng_below(&t->rng, 2) ? RUDNN_I64 : RUDNN_I32;
    const int own_workspace = (int)rt_rng_below(&t->rng, 2);
    float lp[TX_NLP], gl[TX_N], got_loss[TX_N], got_grad[TX_NLP];
    double lpd[TX_NLP], gld[TX_N], ref_loss[TX_N], ref_grad[TX_NLP], bound_loss[TX_N], bound_grad[TX_NLP];
    int64_t targets[TX_N * TX_S];
    int32_t targets32[TX_N * TX_S];
    for (int r = 0; r < TX_T * TX_N; r++) { /* log_softmax of activations in [-2, 2], rounded to dt */
        double a[TX_C], l[TX_C];
        for (int c = 0; c < TX_C; c++)
            a[c] = rt_rng_uniform(&t->rng, -2.0, 2.0);
        ctc_ref_log_softmax(TX_C, a, l);
        for (int c = 0; c < TX_C; c++) {
            lp[r * TX_C + c] = ref_round(dt, (float)l[c]);
            lpd[r * TX_C + c] = lp[r * TX_C + c];
        }
    }
    for (int n = 0; n < TX_N; n++)
        for (int j = 0; j < TX_S; j++) {
            targets[n * TX_S + j] = j < tl[n] ? 1 + (int64_t)rt_rng_below(&t->rng, TX_C - 1) : -1;
            targets32[n * TX_S + j] = (int32_t)targets[n * TX_S + j];
        }
    fill2(t, RUDNN_F32, gl, gld, TX_N, 0.5, 1.5);
    if (ctc_ref_batch(TX_T, TX_N, TX_C, TX_S, lpd, targets, il, tl, 0, 0, gld, ref_loss, ref_grad)) {
        rt_logf(t->log, "  %s: the ctc reference failed (out of memory)\n", t->label);
        t->log->failures++;
        return 0;
    }
    tw_tensor_t LP = {0}, TG = {0}, GL = {0}, LOSS = {0}, GR = {0};
    const int64_t lpdims[3] = {TX_T, TX_N, TX_C}, tgdims[2] = {TX_N, TX_S};
    rudnn_tensor_t tlp, ttg, tgr;
    int ok = tw_tensor_create(t, &LP, dt, 1, TX_NLP, 0) && tw_tensor_create(t, &TG, tdt, 1, TX_N * TX_S, 0) &&
             tw_tensor_create(t, &GL, RUDNN_F32, 1, TX_N, 0) && tw_tensor_create(t, &LOSS, RUDNN_F32, 1, TX_N, 0) &&
             tw_tensor_create(t, &GR, dt, 1, TX_NLP, 0);
    ok = ok && tw_view(t, &tlp, &LP, 3, lpdims) && tw_view(t, &ttg, &TG, 2, tgdims) && tw_view(t, &tgr, &GR, 3, lpdims);
    ok = ok && tw_put(t, &LP, lp) && tw_put(t, &GL, gl) &&
         tw_ok(t, "tensor_write(targets)",
               tdt == RUDNN_I64 ? rudnn_tensor_write(t->queue, &ttg, targets, sizeof targets)
                                : rudnn_tensor_write(t->queue, &ttg, targets32, sizeof targets32)) &&
         tw_poison(t, &LOSS.t, 0xFF) && tw_poison(t, &tgr, 0xFF);
    const rudnn_ctc_args_t args = {&tlp, &ttg, il, tl, &GL.t, &LOSS.t, &tgr};
    size_t bytes = 0;
    rudnn_buffer_t ws = NULL;
    /* a backend without ctc kernels answers NOT_SUPPORTED (test_ctc checks that) */
    int skip = 0;
    if (ok) {
        const rudnn_status_t st = rudnn_ctc_loss_workspace_size(t->queue, &args, NULL, &bytes);
        skip = st == RUDNN_STATUS_NOT_SUPPORTED;
        ok = !skip && tw_ok(t, "ctc_loss_workspace_size", st);
    }
    if (ok && own_workspace && bytes)
        ok = tw_ok(t, "buffer_create(workspace)", rudnn_buffer_create(t->ctx, bytes, &ws));
    ok = ok && tw_ok(t, "ctc_loss", rudnn_ctc_loss(t->queue, &args, NULL, ws, ws ? bytes : 0)) &&
         kernel_starts(t, "ctc_loss", "ctc.") && tw_get(t, &LOSS.t, got_loss) && tw_get(t, &tgr, got_grad);
    if (ok) {
        /* test_ctc's bounds: the loss 8 (Tn + 1) 2^-24 (|ref| + 1); the gradient for t < Tn
         * |gl| (eg gamma + 8 2^-24 (exp(lp) + gamma)) plus the half ulp, gamma = exp(lp) - ref / gl the
         * posterior, eg twice the loss's bound; for t >= Tn exactly 0 */
        for (int n = 0; n < TX_N; n++)
            bound_loss[n] = 8.0 * (double)(il[n] + 1) * 0x1p-24 * (fabs(ref_loss[n]) + 1.0);
        for (int i = 0; i < TX_NLP; i++) {
            const int step = i / (TX_N * TX_C), n = i / TX_C % TX_N;
            const double gamma = fmax(exp(lpd[i]) - ref_grad[i] / gld[n], 0.0);
            bound_grad[i] = step >= il[n] ? TW_EXACT
                                           : fabs(gld[n]) * (2.0 * bound_loss[n] * gamma +
                                                             8.0 * 0x1p-24 * (exp(lpd[i]) + gamma));
        }
        ref_report_t rep;
        ref_report_init(&rep);
        within(&rep, RUDNN_F32, "loss", got_loss, ref_loss, bound_loss, TX_N);
        within(&rep, dt, "grad_log_probs", got_grad, ref_grad, bound_grad, TX_NLP);
        ok = report_clean(t, "ctc_loss", &rep);
    }
    if (ws)
        rudnn_buffer_destroy(ws);
    tw_tensor_t *all[] = {&LP, &TG, &GL, &LOSS, &GR};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tw_tensor_destroy(all[i]);
    return ok || skip;
}

/* ---- grid_sample -------------------------------------------------------------------------------- */

/* 2D BILINEAR, ZEROS, align_corners 0: x [2, 3, 5, 4], grid [2, 3, 4, 2] in [-1.2, 1.2] (some points
 * outside x) -> y [2, 3, 3, 4]. */
enum { TG_N = 2, TG_C = 3, TG_H = 5, TG_W = 4, TG_OH = 3, TG_OW = 4 };
enum { TG_NX = TG_N * TG_C * TG_H * TG_W, TG_NG = TG_N * TG_OH * TG_OW * 2, TG_NY = TG_N * TG_C * TG_OH * TG_OW };

/* test_grid_sample's bound (n + 2d + 4) 2^-24 sum|term| + E d (1 + c) 2^-24 sum|term without its
 * weights| (the half ulp within adds), d = 2, E = 4 (BILINEAR), c the largest input size + 2. */
static void gs_bounds(double *bound, const double *abs_terms, const double *abs_in, const int64_t *terms, int n)
{
    const double werr = 4.0 * 2 * (1.0 + (TG_H > TG_W ? TG_H : TG_W) + 2);
    for (int i = 0; i < n; i++)
        bound[i] = (double)((terms[i] > 0 ? terms[i] : 1) + 8) * 0x1p-24 * abs_terms[i] + werr * 0x1p-24 * abs_in[i];
}

int tw_grid_sample_round(tw_thread_t *t)
{
    const rudnn_dtype_t dt = t->dtype;
    const int own_workspace = (int)rt_rng_below(&t->rng, 2);
    float x[TG_NX], g[TG_NG], dy[TG_NY], got_y[TG_NY], got_dx[TG_NX], got_dg[TG_NG];
    double xd[TG_NX], gd[TG_NG], dyd[TG_NY], bound[TG_NX];
    double ref_y[TG_NY], y_abs[TG_NY], y_in[TG_NY], ref_dx[TG_NX], dx_abs[TG_NX], dx_in[TG_NX];
    double ref_dg[TG_NG], dg_abs[TG_NG], dg_in[TG_NG];
    int64_t y_terms[TG_NY], dx_terms[TG_NX], dg_terms[TG_NG];
    fill2(t, dt, x, xd, TG_NX, -1.0, 1.0);
    fill2(t, dt, g, gd, TG_NG, -1.2, 1.2);
    fill2(t, dt, dy, dyd, TG_NY, -1.0, 1.0);
    const gs_ref_shape_t s = {.spatial = 2, .mode = GS_REF_BILINEAR, .padding = GS_REF_ZEROS, .align_corners = 0,
                              .batch = TG_N, .channels = TG_C, .in_size = {TG_H, TG_W}, .out_size = {TG_OH, TG_OW}};
    if (!gs_ref_valid(&s) || gs_ref_forward(&s, xd, gd, ref_y, y_abs, y_in, y_terms) ||
        gs_ref_backward(&s, xd, gd, dyd, ref_dx, dx_abs, dx_in, dx_terms, ref_dg, dg_abs, dg_in, dg_terms)) {
        rt_logf(t->log, "  %s: the grid_sample reference refused the round's shape\n", t->label);
        t->log->failures++;
        return 0;
    }
    tw_tensor_t X = {0}, G = {0}, Y = {0}, DY = {0}, DX = {0}, DG = {0};
    const int64_t xdims[4] = {TG_N, TG_C, TG_H, TG_W}, gdims[4] = {TG_N, TG_OH, TG_OW, 2};
    const int64_t ydims[4] = {TG_N, TG_C, TG_OH, TG_OW};
    rudnn_tensor_t tx, tg, ty, tdy, tdx, tdg;
    int ok = tw_tensor_create(t, &X, dt, 1, TG_NX, 0) && tw_tensor_create(t, &G, dt, 1, TG_NG, 0) &&
             tw_tensor_create(t, &Y, dt, 1, TG_NY, 0) && tw_tensor_create(t, &DY, dt, 1, TG_NY, 0) &&
             tw_tensor_create(t, &DX, dt, 1, TG_NX, 0) && tw_tensor_create(t, &DG, dt, 1, TG_NG, 0);
    ok = ok && tw_view(t, &tx, &X, 4, xdims) && tw_view(t, &tg, &G, 4, gdims) && tw_view(t, &ty, &Y, 4, ydims) &&
         tw_view(t, &tdy, &DY, 4, ydims) && tw_view(t, &tdx, &DX, 4, xdims) && tw_view(t, &tdg, &DG, 4, gdims);
    ok = ok && tw_put(t, &X, x) && tw_put(t, &G, g) && tw_put(t, &DY, dy) && tw_poison(t, &ty, 0xFF) &&
         tw_poison(t, &tdx, 0xFF) && tw_poison(t, &tdg, 0xFF);
    rudnn_grid_sample_options_t o;
    rudnn_grid_sample_options_init(&o); /* BILINEAR, ZEROS, align_corners 0 */
    size_t bytes = 0;
    rudnn_buffer_t ws = NULL;
    /* a backend without grid_sample kernels answers NOT_SUPPORTED (test_grid_sample checks that) */
    int skip = 0;
    if (ok) {
        const rudnn_status_t st =
            rudnn_grid_sample_backward_workspace_size(t->queue, &tx, &tg, &tdy, &o, &tdx, &tdg, &bytes);
        skip = st == RUDNN_STATUS_NOT_SUPPORTED;
        ok = !skip && tw_ok(t, "grid_sample_backward_workspace_size", st);
    }
    if (ok && own_workspace && bytes)
        ok = tw_ok(t, "buffer_create(workspace)", rudnn_buffer_create(t->ctx, bytes, &ws));
    ok = ok && tw_ok(t, "grid_sample_forward", rudnn_grid_sample_forward(t->queue, &tx, &tg, &o, &ty)) &&
         kernel_starts(t, "grid_sample_forward", "grid_sample.") && tw_get(t, &ty, got_y);
    ref_report_t rep;
    if (ok) {
        ref_report_init(&rep);
        gs_bounds(bound, y_abs, y_in, y_terms, TG_NY);
        within(&rep, dt, "y", got_y, ref_y, bound, TG_NY);
        ok = report_clean(t, "grid_sample_forward", &rep);
    }
    ok = ok && tw_ok(t, "grid_sample_backward",
                     rudnn_grid_sample_backward(t->queue, &tx, &tg, &tdy, &o, ws, ws ? bytes : 0, &tdx, &tdg)) &&
         kernel_starts(t, "grid_sample_backward", "grid_sample.") && tw_get(t, &tdx, got_dx) &&
         tw_get(t, &tdg, got_dg);
    if (ok) {
        ref_report_init(&rep);
        gs_bounds(bound, dx_abs, dx_in, dx_terms, TG_NX);
        within(&rep, dt, "dx", got_dx, ref_dx, bound, TG_NX);
        gs_bounds(bound, dg_abs, dg_in, dg_terms, TG_NG);
        within(&rep, dt, "dgrid", got_dg, ref_dg, bound, TG_NG);
        ok = report_clean(t, "grid_sample_backward", &rep);
    }
    if (ws)
        rudnn_buffer_destroy(ws);
    tw_tensor_t *all[] = {&X, &G, &Y, &DY, &DX, &DG};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tw_tensor_destroy(all[i]);
    return ok || skip;
}
