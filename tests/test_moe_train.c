/* Numeric tests of the MoE training family (include/rudnn/moe_train.h) against the FP64 reference of
 * reference/moe_train_ref.c, through the public API; run once per backend (meson registers
 * moe_train-opencl, -cuda, -hip with RUDNN_BACKEND set). A backend whose plugin has no kernels for
 * the family (NOT_SUPPORTED from a valid call) prints "backend <b>: SKIPPED (<why>)" and exits 77;
 * the OpenCL plugin has them, so there NOT_SUPPORTED fails the suite instead.
 *
 * What runs, for logits F32, F16 and BF16 (weights and grad_weights are F32), each case calling
 * rudnn_moe_selected_router_weights and rudnn_moe_selected_router_backward on the same inputs:
 *   sweep        (E, k) in (1, 1), (2, 1), (2, 2), (7, 1), (7, 3), (7, 7), (64, 1), (64, 8), (64, 64),
 *                (257, 1), (257, 8), (257, 33), (257, 64), each for softmax and sigmoid scoring,
 *                renormalized or not, and index dtypes U32, I32, I64; T 1, 5 or 33, scale 1 or 2.5,
 *                repeated indices (every row holds a duplicate) or distinct, logits in [-12, 12];
 *                rows 1 and T - 2 of half the cases with T >= 5 hold an out-of-range index: -1 or E
 *                (I32), -1 or 2^32 (I64: it wraps to 0 if cut to 32 bits), E or 2^31 (U32: negative
 *                if read as I32), whose rows must come out all NaN while the others are right;
 *   tiny         the large data under all four scorings with grad_weights of magnitude 1e-12: a
 *                sigmoid score of the k smallest (about 1e-35) times such a gradient is subnormal
 *                in FP32, so a kernel that forms g p and then divides by the scores' sum loses the
 *                gradient's digits; one that works with p / sum keeps them;
 *   large        softmax logits of magnitude 76 to 84 of random sign (max-subtraction needed: exp(84)
 *                overflows FP32), E 2 to 257; even rows select the row's largest logit first, odd
 *                rows (k < E) its k smallest: their scores underflow FP32 next to the row's max, yet
 *                renormalized their weights are finite ratios (the contract's formula), which a
 *                kernel must give (e.g. from the selected logits' own max), not 0 / 0;
 *   empty        T 0: success, every output buffer byte unchanged;
 *   reference    the hand-derived gradients of the reference against a central finite difference of
 *                its weights (repeated indices, k = E, both scorings, renormalized or not), and the
 *                weights against literal values and the renormalized sum = scale;
 *   rows         rudnn_moe_combine_backward (both strategies) and rudnn_moe_dispatch_backward on a
 *                dispatched object (rudnn_moe_route or rudnn_moe_route_sigmoid_grouped, then
 *                rudnn_moe_dispatch), rows F32, F16 or BF16, the logits (so the plan's weights) in each
 *                dtype in turn: T 0, 1, 7, 33; (E, k) (1, 1), (4, 1), (4, 2), (4, 4), (16, 1), (16, 3),
 *                (16, 16); H 1, 5, 64, 300. The reference gets the stored values (inputs rounded to the
 *                dtype, the plan's weights and positions read back; the positions must be a permutation of
 *                the T*k rows). Each op runs twice: the same bytes each time, and both strategies give the
 *                same grad_expert_output bytes (a product, no sum). The dispatched object's positions,
 *                weights and rows are inputs too (unchanged);
 *   gradients    independently of the reference (small F32 rows): grad_expert_output against a central
 *                difference of L = sum(grad_output * rudnn_moe_combine(...)), grad_weights against one of
 *                a double combine (checked against rudnn_moe_combine first), and dispatch_backward as the
 *                adjoint of rudnn_moe_dispatch (<gr, dispatch(x)> = <dispatch_backward(gr), x>).
 * Every output is pre-filled with the sentinel of common.h: every element must be written, no byte
 * around it; inputs stay byte-identical; a success leaves rudnn_last_error() empty and
 * rudnn_last_kernel() naming a "moe_train." kernel.
 *
 * Tolerances. The logits are rounded to their dtype before the reference sees them, so what remains
 * is the FP32 arithmetic and, for grad_logits, its one rounding to the logits dtype. An element
 * passes when |got - ref| <= a (mag + 1e-3 rowmag) + u (|ref| + a (mag + 1e-3 rowmag)) + z, where
 *   mag     the reference's magnitude of that element (moe_train_ref.h: the same expression with
 *           every term absolute, so cancellation in G_e - m_e D is allowed for), rowmag the largest
 *           of its row (elements tiny next to their row: exp of a large negative argument);
 *   a       1e-5 + (E + k) 2^-24: FP32 rounding, with the softmax's sum over E terms and the sums
 *           over k (the error bound of a sequential sum of n terms is (n - 1) 2^-24);
 *   u, z    the rounding of grad_logits: F16 u = 2^-11, z = 2^-25 (half its smallest subnormal),
 *           BF16 u = 2^-8, F32 and the weights (F32) u = z = 0;
 * plus 2^-120 everywhere: FP32 results below its normal range (scores exp(-160) of the large data)
 * may be 0 or subnormal.
 * The rows ops (allowed = a m + u (|ref| + a m) + z + 2^-120, u and z of the rows dtype as above):
 *   grad_expert_output  one FP32 product rounded once: a = 2^-24, m = |ref|;
 *   grad_weights        F32, H products summed in FP32 in either strategy's order: a = 1e-6 + gamma_H
 *                       (gamma_n = n 2^-24 / (1 - n 2^-24)), m = sum over h of |grad_output eo|, u = z = 0;
 *   grad_input          k rows summed in FP32, rounded once: a = gamma_{k-1}, m = sum over j of |grad_rows|.
 * Where the contract says a gradient is zero (the experts a row did not select, under sigmoid
 * scoring or a renormalized softmax) it must be exactly 0. Logits span [-12, 12], where 1 - p
 * computed from a rounded sigmoid p would lose its relative digits: the kernels must take it as
 * sigmoid(-x).
 *
 * Usage: test_moe_train [glob]; it prints the largest error of each dtype. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/moe_train.h>

#include "common.h"
#include "reference/moe_train_ref.h"
#include "reference/norm_ref.h" /* ref_quantize */

static const rudnn_dtype_t dtypes[] = {RUDNN_F32, RUDNN_F16, RUDNN_BF16};
static const rudnn_dtype_t index_dtypes[] = {RUDNN_U32, RUDNN_I32, RUDNN_I64};
#define FLOOR 1e-3
#define UNDERFLOW 0x1p-120 /* FP32 values past the normal range (exp below -87) may flush to zero */

typedef enum { D_NORMAL, D_LARGE } data_t;

typedef struct tcase {
    int64_t T, E;
    int k;
    int sigmoid, renorm;
    float scale;
    rudnn_dtype_t idt;
    data_t data;
    int repeats; /* every row holds a repeated index (k >= 2) */
    int bad;     /* rows 1 and T - 2 hold an out-of-range index */
    double grad_scale; /* grad_weights in [-grad_scale, grad_scale] (0: 1) */
} tcase_t;

/* The largest error of a dtype, absolute and as a fraction of its allowance. */
typedef struct stats {
    int cases;
    double w_err, w_ratio, g_err, g_ratio;
} stats_t;

/* ---- tolerances ------------------------------------------------------------------------------- */

static double tol_arith(const tcase_t *c) { return 1e-5 + (double)(c->E + c->k) * 0x1p-24; }

static double round_unit(rudnn_dtype_t dt) { return dt == RUDNN_F16 ? 0x1p-11 : dt == RUDNN_BF16 ? 0x1p-8 : 0.0; }

static double round_abs(rudnn_dtype_t dt) { return dt == RUDNN_F16 ? 0x1p-25 : 0.0; }

/* ---- outputs and inputs ----------------------------------------------------------------------------- */

/* 1 when st is SUCCESS with an empty error string and a "moe_train." kernel named (ran: the call
 * had rows); logs otherwise. */
static int check_ok(rt_log_t *log, const char *label, const char *what, rudnn_status_t st, int ran)
{
    if (st != RUDNN_STATUS_SUCCESS) {
        rt_logf(log, "  %s: %s returned %s: %s\n", label, what, rudnn_status_string(st), rudnn_last_error());
        return 0;
    }
    if (strcmp(rudnn_last_error(), "") != 0) {
        rt_logf(log, "  %s: %s succeeded but rudnn_last_error() is \"%s\"\n", label, what, rudnn_last_error());
        return 0;
    }
    const char *kernel = rudnn_last_kernel();
    if (ran && (!kernel || strncmp(kernel, "moe_train.", 10) != 0)) {
        rt_logf(log, "  %s: %s: rudnn_last_kernel() = \"%s\", expected a moe_train. kernel\n", label, what,
                kernel ? kernel : "(null)");
        return 0;
    }
    return 1;
}

/* Writes host index values (as the device reads them) in the tensor's index dtype. */
static void upload_indices(const rt_tensor_t *t, const int64_t *idx, size_t n)
{
    if (!n)
        return;
    const size_t es = rudnn_dtype_size(t->t.dtype);
    uint8_t *raw = rt_xmalloc(n * es);
    for (size_t i = 0; i < n; i++) {
        if (t->t.dtype == RUDNN_U32) {
            const uint32_t v = (uint32_t)idx[i];
            memcpy(raw + 4 * i, &v, 4);
        } else if (t->t.dtype == RUDNN_I32) {
            const int32_t v = (int32_t)idx[i];
            memcpy(raw + 4 * i, &v, 4);
        } else {
            memcpy(raw + 8 * i, &idx[i], 8);
        }
    }
    const rudnn_status_t st = rudnn_tensor_write(rt_queue, &t->t, raw, n * es);
    free(raw);
    rt_assert_status(st, RUDNN_STATUS_SUCCESS);
}

/* ---- data --------------------------------------------------------------------------------------------- */

static void make_logits(const tcase_t *c, rudnn_dtype_t dt, rt_rng_t *rng, float *x)
{
    const int64_t n = c->T * c->E;
    for (int64_t i = 0; i < n; i++) {
        if (c->data == D_LARGE) {
            const double sign = rt_rng_below(rng, 2) ? 1.0 : -1.0;
            x[i] = (float)(sign * rt_rng_uniform(rng, 76.0, 84.0));
        } else {
            x[i] = (float)rt_rng_uniform(rng, -12.0, 12.0);
        }
    }
    ref_quantize(dt, x, x, (size_t)n); /* the values the device holds */
}

/* Row t's indices: k distinct experts (a partial shuffle), with the row's largest logit first for
 * large data, then (repeats) slot k - 1 a copy of an earlier slot; bad rows get one slot out of
 * range. Values are what the device reads in the index dtype. */
static void make_indices(const tcase_t *c, rt_rng_t *rng, const float *x, int64_t *idx)
{
    const int64_t E = c->E;
    const int k = c->k;
    int64_t *perm = rt_xmalloc(sizeof(int64_t) * (size_t)E);
    for (int64_t t = 0; t < c->T; t++) {
        int64_t *row = idx + t * k;
        for (int64_t e = 0; e < E; e++)
            perm[e] = e;
        for (int j = 0; j < k; j++) {
            const int64_t r = j + (int64_t)rt_rng_below(rng, (uint64_t)(E - j));
            const int64_t tmp = perm[j];
            perm[j] = perm[r], perm[r] = tmp;
            row[j] = perm[j];
        }
        if (c->data == D_LARGE && t % 2 == 1 && k < E) {
            /* the k smallest logits (a selection sort's first k), far below the row's max: a
             * renormalized softmax must still give their finite ratios, not 0 / 0 */
            for (int j = 0; j < k; j++) {
                int64_t lo = j;
                for (int64_t e = j + 1; e < E; e++)
                    lo = x[t * E + perm[e]] < x[t * E + perm[lo]] ? e : lo;
                const int64_t tmp = perm[j];
                perm[j] = perm[lo], perm[lo] = tmp;
                row[j] = perm[j];
            }
        } else if (c->data == D_LARGE) {
            int64_t best = 0;
            for (int64_t e = 1; e < E; e++)
                best = x[t * E + e] > x[t * E + best] ? e : best;
            int at = -1;
            for (int j = 0; j < k; j++)
                at = row[j] == best ? j : at;
            if (at >= 0)
                row[at] = row[0];
            row[0] = best;
        }
        if (c->repeats && k >= 2)
            row[k - 1] = row[rt_rng_below(rng, (uint64_t)(k - 1))];
        if (c->bad && (t == 1 || t == c->T - 2)) {
            const int first = t == 1;
            int64_t v;
            if (c->idt == RUDNN_U32)
                v = first ? E : (int64_t)0x80000000u;
            else if (c->idt == RUDNN_I32)
                v = first ? -1 : E;
            else
                v = first ? -1 : (int64_t)1 << 32;
            row[rt_rng_below(rng, (uint64_t)k)] = v;
        }
    }
    free(perm);
}

/* ---- comparison ---------------------------------------------------------------------------------- */

/* Compares rows x n values (weights: n = k; grad_logits: n = E) against the reference. Rows in
 * nan_rows must be all NaN; zero[] (NULL: none) marks elements that must be exactly 0. */
static int compare(rt_log_t *log, const char *label, const char *what, const float *got, const double *ref,
                   const double *mag, const uint8_t *nan_rows, const uint8_t *zero, int64_t rows, int64_t n,
                   double a, double u, double z, double *worst_err, double *worst_ratio)
{
    int64_t bad = 0, first = -1, bad_nan = 0, first_nan = -1, bad_zero = 0, first_zero = -1;
    double allowed_first = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        if (nan_rows[r]) {
            for (int64_t i = r * n; i < (r + 1) * n; i++)
                if (!isnan(got[i]) && bad_nan++ == 0)
                    first_nan = i;
            continue;
        }
        double rowmag = 0.0;
        for (int64_t i = r * n; i < (r + 1) * n; i++)
            rowmag = fmax(rowmag, mag[i]);
        for (int64_t i = r * n; i < (r + 1) * n; i++) {
            if (zero && zero[i] && got[i] != 0.0f && bad_zero++ == 0)
                first_zero = i;
            const double arith = a * (mag[i] + FLOOR * rowmag);
            const double allowed = arith + u * (fabs(ref[i]) + arith) + z + UNDERFLOW;
            const double err = fabs((double)got[i] - ref[i]);
            if (!(err <= allowed)) {
                if (bad++ == 0)
                    first = i, allowed_first = allowed;
                *worst_err = INFINITY, *worst_ratio = INFINITY;
                continue;
            }
            *worst_err = fmax(*worst_err, err);
            if (allowed > 0.0)
                *worst_ratio = fmax(*worst_ratio, err / allowed);
        }
    }
    int problems = 0;
    if (bad) {
        rt_logf(log, "  %s: %s: %lld element(s) off; first [%lld, %lld] = %.9g, reference %.9g (error %.3g, "
                "allowed %.3g)\n", label, what, (long long)bad, (long long)(first / n), (long long)(first % n),
                got[first], ref[first], fabs((double)got[first] - ref[first]), allowed_first);
        problems++;
    }
    if (bad_nan) {
        rt_logf(log, "  %s: %s: %lld element(s) of rows with an out-of-range index not NaN; first [%lld, %lld] "
                "= %.9g\n", label, what, (long long)bad_nan, (long long)(first_nan / n),
                (long long)(first_nan % n), got[first_nan]);
        problems++;
    }
    if (bad_zero) {
        rt_logf(log, "  %s: %s: %lld gradient(s) of unselected experts not exactly 0; first [%lld, %lld] = %.9g\n",
                label, what, (long long)bad_zero, (long long)(first_zero / n), (long long)(first_zero % n),
                got[first_zero]);
        problems++;
    }
    return problems;
}

/* ---- one case -------------------------------------------------------------------------------- */

static void case_label(const tcase_t *c, rudnn_dtype_t dt, char *label, size_t cap)
{
    snprintf(label, cap, "%s E=%lld k=%d T=%lld %s%s scale %g idx %s%s%s%s", rudnn_dtype_name(dt),
             (long long)c->E, c->k, (long long)c->T, c->sigmoid ? "sigmoid" : "softmax",
             c->renorm ? " renormalized" : "", (double)c->scale, rudnn_dtype_name(c->idt),
             c->repeats ? " repeats" : "", c->bad ? " bad-rows" : "", c->data == D_LARGE ? " large" : "");
    if (c->grad_scale != 0.0) {
        const size_t used = strlen(label);
        snprintf(label + used, cap - used, " grad %g", c->grad_scale);
    }
}

static int run_case(rt_log_t *log, stats_t *stats, rudnn_dtype_t dt, const tcase_t *c, int seed)
{
    char label[192];
    case_label(c, dt, label, sizeof label);
    const int64_t T = c->T, E = c->E;
    const int k = c->k;
    const size_t nl = (size_t)(T * E), nk = (size_t)T * (size_t)k;
    rt_rng_t rng;
    rt_rng_seed_case(&rng, label, seed);
    float *x = rt_xmalloc(sizeof(float) * nl), *gw = rt_xmalloc(sizeof(float) * nk);
    int64_t *idx = rt_xmalloc(sizeof(int64_t) * nk);
    make_logits(c, dt, &rng, x);
    make_indices(c, &rng, x, idx);
    const double gs = c->grad_scale != 0.0 ? c->grad_scale : 1.0;
    rt_fill_uniform(&rng, gw, nk, -gs, gs);

    /* small element offsets: the tensors need not start aligned */
    const size_t off = (size_t)(seed % 3);
    const int64_t dl[2] = {T, E}, dk[2] = {T, k};
    rt_tensor_t tl, ti, tw, tg, tgl;
    rt_tensor_create(&tl, dt, 2, dl, off, RT_TAIL_BYTES);
    rt_tensor_create(&ti, c->idt, 2, dk, 2 - off, RT_TAIL_BYTES);
    rt_tensor_create(&tw, RUDNN_F32, 2, dk, off + 1, RT_TAIL_BYTES);
    rt_tensor_create(&tg, RUDNN_F32, 2, dk, off, RT_TAIL_BYTES);
    rt_tensor_create(&tgl, dt, 2, dl, 2 - off, RT_TAIL_BYTES);
    rt_tensor_upload(&tl, x);
    upload_indices(&ti, idx, nk);
    rt_tensor_upload(&tg, gw);

    rt_guard_t inputs;
    memset(&inputs, 0, sizeof inputs);
    rt_guard_track(&inputs, rt_queue, &tl, "logits");
    rt_guard_track(&inputs, rt_queue, &ti, "indices");
    rt_guard_track(&inputs, rt_queue, &tg, "grad_weights");
    rt_guard_begin(&inputs);
    rt_out_watch_t ww, wg;
    rt_out_watch_begin(&ww, &tw);
    rt_out_watch_begin(&wg, &tgl);

    const rudnn_router_weight_options_t o = {c->sigmoid ? RUDNN_ROUTER_SIGMOID : RUDNN_ROUTER_SOFTMAX, c->renorm,
                                             c->scale};
    int problems = 0;
    rudnn_status_t st = rudnn_moe_selected_router_weights(rt_queue, &tl.t, &ti.t, &o, &tw.t);
    const int ok_w = check_ok(log, label, "selected_router_weights", st, T > 0);
    st = rudnn_moe_selected_router_backward(rt_queue, &tl.t, &ti.t, &tg.t, &o, &tgl.t);
    const int ok_g = check_ok(log, label, "selected_router_backward", st, T > 0);
    problems += !ok_w + !ok_g;

    float *w = rt_xmalloc(sizeof(float) * (nk + 1)), *g = rt_xmalloc(sizeof(float) * (nl + 1));
    problems += !rt_out_watch_end(&ww, T > 0 && ok_w, w, log, label, "weights");
    problems += !rt_out_watch_end(&wg, T > 0 && ok_g, g, log, label, "grad_logits");
    if (rt_guard_changed(&inputs)) {
        for (int i = 0; i < inputs.count; i++)
            if (inputs.items[i].changed)
                rt_logf(log, "  %s: the %s buffer was modified (it is only read)\n", label, inputs.items[i].name);
        problems++;
    }

    if (ok_w || ok_g) {
        const mt_ref_options_t ro = {c->sigmoid, c->renorm, (double)c->scale};
        double *rw = rt_xmalloc(sizeof(double) * (nk + 1)), *mw = rt_xmalloc(sizeof(double) * (nk + 1));
        double *rg = rt_xmalloc(sizeof(double) * (nl + 1)), *mg = rt_xmalloc(sizeof(double) * (nl + 1));
        uint8_t *nan_rows = rt_xcalloc((size_t)T + 1, 1), *zero = rt_xcalloc(nl + 1, 1);
        assert_int_equal(mt_ref_weights(x, T, E, idx, k, &ro, rw, mw, nan_rows), 0);
        assert_int_equal(mt_ref_backward(x, T, E, idx, k, gw, &ro, rg, mg, NULL), 0);
        /* the contract's zeros: the experts a row did not select, unless an unrenormalized softmax */
        if (c->sigmoid || c->renorm)
            for (int64_t t = 0; t < T; t++) {
                memset(zero + t * E, 1, (size_t)E);
                for (int j = 0; j < k; j++)
                    if (!nan_rows[t])
                        zero[t * E + idx[t * k + j]] = 0;
            }
        const double a = tol_arith(c);
        if (ok_w)
            problems += compare(log, label, "weights", w, rw, mw, nan_rows, NULL, T, k, a, 0.0, 0.0, &stats->w_err,
                                &stats->w_ratio);
        if (ok_g)
            problems += compare(log, label, "grad_logits", g, rg, mg, nan_rows, zero, T, E, a, round_unit(dt),
                                round_abs(dt), &stats->g_err, &stats->g_ratio);
        free(rw), free(mw), free(rg), free(mg), free(nan_rows), free(zero);
    }
    stats->cases++;

    free(w), free(g), free(x), free(gw), free(idx);
    rt_guard_free(&inputs);
    rt_tensor_destroy(&tl), rt_tensor_destroy(&ti), rt_tensor_destroy(&tw), rt_tensor_destroy(&tg);
    rt_tensor_destroy(&tgl);
    return problems;
}

static void print_stats(const char *test, rudnn_dtype_t dt, const stats_t *s)
{
    printf("  %s %s: %d case(s); largest weights error %.3g (%.3g of its tolerance), largest grad_logits error "
           "%.3g (%.3g of its tolerance)\n",
           test, rudnn_dtype_name(dt), s->cases, s->w_err, s->w_ratio, s->g_err, s->g_ratio);
    fflush(stdout);
}

/* ---- tests ------------------------------------------------------------------------------------ */

typedef struct param {
    rudnn_dtype_t dtype;
    char name[48];
} param_t;

static const int64_t sweep_ek[][2] = {{1, 1},  {2, 1},  {2, 2},   {7, 1},   {7, 3},    {7, 7},    {64, 1},
                                      {64, 8}, {64, 64}, {257, 1}, {257, 8}, {257, 33}, {257, 64}};

/* Every (E, k), scoring, renormalization and index dtype; T, scale, repeats and bad rows vary along
 * the loops so that each meets every scoring, renormalization and index dtype. */
static void test_sweep(void **state)
{
    const param_t *p = *state;
    rt_log_t *log = rt_log_new();
    stats_t stats = {0};
    static const int64_t Ts[3] = {1, 5, 33};
    int seed = 0;
    for (int ek = 0; ek < (int)(sizeof sweep_ek / sizeof sweep_ek[0]); ek++)
        for (int combo = 0; combo < 4; combo++)
            for (int id = 0; id < 3; id++) {
                tcase_t c = {0};
                c.E = sweep_ek[ek][0], c.k = (int)sweep_ek[ek][1];
                c.sigmoid = combo >> 1, c.renorm = combo & 1;
                c.idt = index_dtypes[id];
                c.T = Ts[(combo + id + ek) % 3];
                c.scale = (combo + ek) % 2 ? 2.5f : 1.0f;
                c.repeats = c.k >= 2 && (id + ek) % 2 == 1;
                c.bad = c.T >= 5 && (combo + id) % 2 == 0;
                c.data = D_NORMAL;
                log->failures += run_case(log, &stats, p->dtype, &c, seed++) != 0;
            }
    print_stats("sweep", p->dtype, &stats);
    rt_log_finish_free(log, "case(s)");
}

/* Softmax logits of magnitude ~80: exp overflows FP32 without the max subtracted. */
static void test_large(void **state)
{
    const param_t *p = *state;
    rt_log_t *log = rt_log_new();
    stats_t stats = {0};
    static const int64_t Es[4] = {2, 7, 64, 257};
    int seed = 0;
    for (int ei = 0; ei < 4; ei++) {
        const int kmax = Es[ei] < RUDNN_MOE_TRAIN_MAX_TOP_K ? (int)Es[ei] : RUDNN_MOE_TRAIN_MAX_TOP_K;
        const int ks[3] = {1, kmax > 4 ? 4 : kmax, kmax};
        for (int ki = 0; ki < 3; ki++)
            for (int renorm = 0; renorm < 2; renorm++) {
                tcase_t c = {0};
                c.E = Es[ei], c.k = ks[ki];
                c.sigmoid = 0, c.renorm = renorm;
                c.idt = index_dtypes[seed % 3];
                c.T = 33;
                c.scale = seed % 2 ? 2.5f : 1.0f;
                c.repeats = c.k >= 2 && (seed / 2) % 2;
                c.bad = ki == 1;
                c.data = D_LARGE;
                log->failures += run_case(log, &stats, p->dtype, &c, seed++) != 0;
            }
    }
    print_stats("large", p->dtype, &stats);
    rt_log_finish_free(log, "case(s)");
}

/* The large data with gradients of 1e-12, every scoring: g p is subnormal where p is a sigmoid
 * score near 1e-35. */
static void test_tiny(void **state)
{
    const param_t *p = *state;
    rt_log_t *log = rt_log_new();
    stats_t stats = {0};
    static const int64_t Es[2] = {7, 64};
    static const int ks[2] = {1, 4};
    int seed = 0;
    for (int ei = 0; ei < 2; ei++)
        for (int ki = 0; ki < 2; ki++)
            for (int combo = 0; combo < 4; combo++) {
                tcase_t c = {0};
                c.E = Es[ei], c.k = ks[ki];
                c.sigmoid = combo >> 1, c.renorm = combo & 1;
                c.idt = index_dtypes[seed % 3];
                c.T = 33;
                c.scale = seed % 2 ? 2.5f : 1.0f;
                c.data = D_LARGE;
                c.grad_scale = 1e-12;
                log->failures += run_case(log, &stats, p->dtype, &c, seed++) != 0;
            }
    print_stats("tiny", p->dtype, &stats);
    rt_log_finish_free(log, "case(s)");
}

/* T 0: both ops succeed and write no byte (run_case checks each whole buffer unchanged). */
static void test_empty(void **state)
{
    const param_t *p = *state;
    rt_log_t *log = rt_log_new();
    stats_t stats = {0};
    int seed = 0;
    for (int id = 0; id < 3; id++)
        for (int combo = 0; combo < 4; combo++) {
            tcase_t c = {0};
            c.E = combo % 2 ? 7 : 64, c.k = combo % 2 ? 3 : 64;
            c.sigmoid = combo >> 1, c.renorm = combo & 1;
            c.idt = index_dtypes[id];
            c.T = 0;
            c.scale = 1.0f;
            log->failures += run_case(log, &stats, p->dtype, &c, seed++) != 0;
        }
    rt_log_finish_free(log, "case(s)");
}

/* The reference's hand-derived gradient against a central difference of its own weights:
 * L(x) = sum_j g_j w_j(x), dL/dx_e ~ (L(x + h e_e) - L(x - h e_e)) / 2h with h 1e-5 (truncation
 * ~h^2 L''' ~ 1e-10, cancellation ~1e-16 |L| / h ~ 1e-11); also its weights against literal values,
 * sum_j w_j = scale when renormalized, equal weights for a repeated index, NaN for a bad index. */
static double loss_of(const double *x, int64_t E, const int64_t *idx, int k, const double *g,
                      const mt_ref_options_t *o)
{
    double w[RUDNN_MOE_TRAIN_MAX_TOP_K];
    mt_ref_weights_row(x, E, idx, k, o, w, NULL);
    double l = 0.0;
    for (int j = 0; j < k; j++)
        l += g[j] * w[j];
    return l;
}

static void test_reference(void **state)
{
    (void)state;
    rt_log_t *log = rt_log_new();
    typedef struct fdcase {
        int64_t E;
        int k;
        int repeats;
        double lo, hi; /* logits range; |x| >= lo when lo > 0 (random sign) */
    } fdcase_t;
    static const fdcase_t fd[] = {
        {1, 1, 0, -3, 3},  {2, 1, 0, -3, 3},  {2, 2, 0, -3, 3},  {2, 2, 1, -3, 3},  {3, 2, 1, -3, 3},
        {5, 3, 0, -3, 3},  {5, 4, 1, -3, 3},  {5, 5, 0, -3, 3},  {8, 6, 1, -2, 2},  {8, 3, 0, 5, 9},
        {4, 4, 1, 10, 14},
    };
    double worst = 0.0;
    int checked = 0;
    rt_rng_t rng;
    rt_rng_seed_case(&rng, "moe_train reference", 0);
    for (size_t ci = 0; ci < sizeof fd / sizeof fd[0]; ci++)
        for (int combo = 0; combo < 8; combo++) {
            const fdcase_t *c = &fd[ci];
            const mt_ref_options_t o = {(combo >> 1) & 1, combo & 1, combo & 4 ? 2.5 : 1.0};
            double x[16], g[16], grad[16], mag[16], w[16];
            int64_t idx[16];
            for (int64_t e = 0; e < c->E; e++) {
                x[e] = rt_rng_uniform(&rng, c->lo, c->hi);
                if (c->lo > 0 && rt_rng_below(&rng, 2))
                    x[e] = -x[e];
            }
            int64_t perm[16];
            for (int64_t e = 0; e < c->E; e++)
                perm[e] = e;
            for (int j = 0; j < c->k; j++) {
                const int64_t r = j + (int64_t)rt_rng_below(&rng, (uint64_t)(c->E - j));
                const int64_t tmp = perm[j];
                perm[j] = perm[r], perm[r] = tmp;
                idx[j] = perm[j];
                g[j] = rt_rng_uniform(&rng, -1, 1);
            }
            if (c->repeats)
                idx[c->k - 1] = idx[0];
            char what[96];
            snprintf(what, sizeof what, "E=%lld k=%d%s %s%s scale %g", (long long)c->E, c->k,
                     c->repeats ? " repeats" : "", o.sigmoid ? "sigmoid" : "softmax",
                     o.renormalize ? " renormalized" : "", o.scale);
            if (mt_ref_weights_row(x, c->E, idx, c->k, &o, w, NULL) ||
                mt_ref_backward_row(x, c->E, idx, c->k, g, &o, grad, mag)) {
                rt_logf(log, "  %s: the reference reports an out-of-range index\n", what);
                log->failures++;
                continue;
            }
            double sum = 0.0, gmax = 0.0;
            for (int j = 0; j < c->k; j++)
                sum += w[j];
            if (o.renormalize && fabs(sum - o.scale) > 1e-12 * o.scale) {
                rt_logf(log, "  %s: renormalized weights sum to %.17g, expected the scale\n", what, sum);
                log->failures++;
            }
            if (c->repeats && w[c->k - 1] != w[0]) {
                rt_logf(log, "  %s: a repeated index got weights %.17g and %.17g\n", what, w[0], w[c->k - 1]);
                log->failures++;
            }
            for (int64_t e = 0; e < c->E; e++)
                gmax = fmax(gmax, mag[e]);
            for (int64_t e = 0; e < c->E; e++) {
                const double h = 1e-5, keep = x[e];
                x[e] = keep + h;
                const double lp = loss_of(x, c->E, idx, c->k, g, &o);
                x[e] = keep - h;
                const double lm = loss_of(x, c->E, idx, c->k, g, &o);
                x[e] = keep;
                const double num = (lp - lm) / (2 * h), err = fabs(num - grad[e]);
                worst = fmax(worst, err / fmax(1.0, gmax));
                checked++;
                if (!(err <= 1e-8 * fmax(1.0, gmax)) || !(fabs(grad[e]) <= mag[e] * (1 + 1e-12))) {
                    rt_logf(log, "  %s: d/dx[%lld]: derived %.12g (magnitude %.3g), central difference %.12g\n",
                            what, (long long)e, grad[e], mag[e], num);
                    log->failures++;
                }
                int selected = 0;
                for (int j = 0; j < c->k; j++)
                    selected |= idx[j] == e;
                if (!selected && (o.sigmoid || o.renormalize) && grad[e] != 0.0) {
                    rt_logf(log, "  %s: d/dx[%lld] = %.3g for an unselected expert, expected exactly 0\n", what,
                            (long long)e, grad[e]);
                    log->failures++;
                }
            }
        }
    /* literal values: x = [0, ln 2, ln 3] makes softmax [1/6, 2/6, 3/6]; sigmoid(0) = 1/2 */
    {
        const double x[3] = {0.0, 0.69314718055994531, 1.0986122886681098}; /* 0, ln 2, ln 3 */
        const int64_t idx[2] = {2, 0};
        double w[2];
        const mt_ref_options_t plain = {0, 0, 2.0}, renorm = {0, 1, 2.0}, sig = {1, 1, 1.0};
        mt_ref_weights_row(x, 3, idx, 2, &plain, w, NULL);
        int ok = fabs(w[0] - 1.0) < 1e-15 && fabs(w[1] - 1.0 / 3) < 1e-15;
        mt_ref_weights_row(x, 3, idx, 2, &renorm, w, NULL);
        ok &= fabs(w[0] - 1.5) < 1e-15 && fabs(w[1] - 0.5) < 1e-15;
        const int64_t same[2] = {0, 0};
        mt_ref_weights_row(x, 3, same, 2, &sig, w, NULL);
        ok &= w[0] == 0.5 && w[1] == 0.5;
        const int64_t out[2] = {1, 3}, neg[2] = {-1, 0};
        ok &= mt_ref_weights_row(x, 3, out, 2, &plain, w, NULL) == 1 && isnan(w[0]) && isnan(w[1]);
        double gr[3];
        const double g2[2] = {1.0, 1.0};
        ok &= mt_ref_backward_row(x, 3, neg, 2, g2, &plain, gr, NULL) == 1 && isnan(gr[0]) && isnan(gr[2]);
        if (!ok) {
            rt_logf(log, "  the reference's weights differ from the literal values\n");
            log->failures++;
        }
    }
    printf("  reference: %d gradient(s) against central differences, largest error %.3g (of max(1, row "
           "magnitude))\n", checked, worst);
    fflush(stdout);
    rt_log_finish_free(log, "check(s)");
}

/* ==== combine and dispatch backward ============================================================== */

/* One routed problem: T tokens of H in the rows dtype, routed over E experts, k a token, by logits of
 * dtype ldt (the plan's weights are in that dtype). */
typedef struct rcase {
    int64_t T, E, H;
    int k;
    rudnn_dtype_t ldt;
    int grouped; /* rudnn_moe_route_sigmoid_grouped (one group, scale 2.5), else rudnn_moe_route */
    int renorm;
} rcase_t;

/* The largest error of each output of a rows dtype, absolute and as a fraction of its allowance. */
typedef struct rstats {
    int cases;
    double ge_err, ge_ratio, gw_err, gw_ratio, gi_err, gi_ratio;
} rstats_t;

/* The dispatched object and what the tests read of it. */
typedef struct routed {
    rt_tensor_t L, X;
    rudnn_routing_plan_t plan;
    rudnn_dispatched_t disp;
    rudnn_tensor_t vpos, vw, vtok; /* its positions, weights and rows */
    float *x;                      /* the input [T, H] as stored */
    uint32_t *pos;                 /* [T, k] */
    float *w;                      /* [T, k], the plan's weights as stored */
    float *tok;                    /* [T*k, H], dispatch(x) as the device wrote it */
} routed_t;

static const rudnn_combine_grad_strategy_t strategies[2] = {RUDNN_COMBINE_GRAD_SERIAL, RUDNN_COMBINE_GRAD_PLANE};
static const char *const strategy_names[2] = {"serial", "plane"};

/* gamma_n = n u / (1 - n u): the relative error bound of n FP32 roundings in a row (Higham). */
static double gamma_n(int64_t n) { return (double)n * 0x1p-24 / (1.0 - (double)n * 0x1p-24); }

static void rcase_label(const rcase_t *c, rudnn_dtype_t dt, char *label, size_t cap)
{
    snprintf(label, cap, "rows %s T=%lld E=%lld k=%d H=%lld, %s logits%s%s", rudnn_dtype_name(dt), (long long)c->T,
             (long long)c->E, c->k, (long long)c->H, rudnn_dtype_name(c->ldt),
             c->grouped ? " sigmoid grouped" : " softmax", c->renorm ? " renormalized" : "");
}

/* Reads a whole tensor to host memory (none for 0 bytes); 1 when it succeeded. */
static int read_tensor(rt_log_t *log, const char *label, const char *what, const rudnn_tensor_t *t, void *host)
{
    const size_t bytes = rudnn_tensor_bytes(t);
    return !bytes || check_ok(log, label, what, rudnn_tensor_read(rt_queue, t, host, bytes), 0);
}

/* A view's dtype and [d0, d1]; logs otherwise. */
static int check_view(rt_log_t *log, const char *label, const char *what, const rudnn_tensor_t *v, rudnn_dtype_t dt,
                      int64_t d0, int64_t d1)
{
    if (v->dtype == dt && v->rank == 2 && v->dims[0] == d0 && v->dims[1] == d1)
        return 1;
    rt_logf(log, "  %s: %s view is %s rank %d, expected %s [%lld, %lld]\n", label, what, rudnn_dtype_name(v->dtype),
            v->rank, rudnn_dtype_name(dt), (long long)d0, (long long)d1);
    return 0;
}

static void routed_free(routed_t *r)
{
    rudnn_dispatched_destroy(r->disp);
    rudnn_routing_plan_destroy(r->plan);
    rt_tensor_destroy(&r->L), rt_tensor_destroy(&r->X);
    free(r->x), free(r->pos), free(r->w), free(r->tok);
    memset(r, 0, sizeof *r);
}

/* Routes random logits and dispatches a random input of dtype dt; reads the positions (which must
 * name each of the T*k rows once), the weights and the rows back. 1 when all of it worked. */
static int routed_make(rt_log_t *log, const char *label, const rcase_t *c, rudnn_dtype_t dt, rt_rng_t *rng,
                       routed_t *r)
{
    memset(r, 0, sizeof *r);
    const int64_t T = c->T, pairs = c->T * c->k;
    const int64_t dl[2] = {T, c->E}, dx[2] = {T, c->H};
    float *logits = rt_xmalloc(sizeof(float) * (size_t)(T * c->E + 1));
    rt_fill_uniform(rng, logits, (size_t)(T * c->E), -3.0, 3.0);
    rt_tensor_create(&r->L, c->ldt, 2, dl, 1, RT_TAIL_BYTES);
    rt_tensor_upload(&r->L, logits);
    free(logits);
    r->x = rt_xmalloc(sizeof(float) * (size_t)(T * c->H + 1));
    rt_fill_uniform(rng, r->x, (size_t)(T * c->H), -2.0, 2.0);
    ref_quantize(dt, r->x, r->x, (size_t)(T * c->H));
    rt_tensor_create(&r->X, dt, 2, dx, 3, RT_TAIL_BYTES);
    rt_tensor_upload(&r->X, r->x);
    rudnn_status_t st;
    if (c->grouped) {
        const rudnn_grouped_routing_options_t o = {c->k, 1, 1, 0, c->renorm, 2.5f};
        st = rudnn_moe_route_sigmoid_grouped(rt_queue, &r->L.t, NULL, &o, &r->plan);
    } else {
        const rudnn_routing_options_t o = {c->k, c->renorm};
        st = rudnn_moe_route(rt_queue, &r->L.t, &o, &r->plan);
    }
    if (!check_ok(log, label, "moe_route", st, 0) ||
        !check_ok(log, label, "moe_dispatch", rudnn_moe_dispatch(rt_queue, r->plan, &r->X.t, &r->disp), 0) ||
        !check_ok(log, label, "dispatched_positions", rudnn_dispatched_positions(r->disp, &r->vpos), 0) ||
        !check_ok(log, label, "routing_plan_weights", rudnn_routing_plan_weights(r->plan, &r->vw), 0) ||
        !check_ok(log, label, "dispatched_tokens", rudnn_dispatched_tokens(r->disp, &r->vtok), 0) ||
        !check_view(log, label, "positions", &r->vpos, RUDNN_U32, T, c->k) ||
        !check_view(log, label, "weights", &r->vw, c->ldt, T, c->k) ||
        !check_view(log, label, "dispatched rows", &r->vtok, dt, pairs, c->H))
        return 0;
    r->pos = rt_xmalloc(sizeof(uint32_t) * (size_t)(pairs + 1));
    r->w = rt_xmalloc(sizeof(float) * (size_t)(pairs + 1));
    r->tok = rt_xmalloc(sizeof(float) * (size_t)(pairs * c->H + 1));
    uint8_t *raw = rt_xmalloc((size_t)(pairs * c->H + 1) * 4);
    int ok = read_tensor(log, label, "positions", &r->vpos, r->pos) && read_tensor(log, label, "weights", &r->vw, raw);
    rt_decode(c->ldt, raw, r->w, (size_t)pairs);
    ok = ok && read_tensor(log, label, "dispatched rows", &r->vtok, raw);
    rt_decode(dt, raw, r->tok, (size_t)(pairs * c->H));
    free(raw);
    if (!ok)
        return 0;
    /* every dispatched row belongs to exactly one (token, slot): the outputs' every element is written */
    uint8_t *seen = rt_xcalloc((size_t)pairs + 1, 1);
    for (int64_t i = 0; i < pairs && ok; i++) {
        if ((int64_t)r->pos[i] >= pairs || seen[r->pos[i]]++) {
            rt_logf(log, "  %s: positions[%lld] = %u: not a permutation of the %lld dispatched rows\n", label,
                    (long long)i, r->pos[i], (long long)pairs);
            ok = 0;
        }
    }
    free(seen);
    return ok;
}

/* The dispatched object's arrays among the inputs that must not change (a prefix of their buffers). */
static void routed_guard(rt_guard_t *g, const routed_t *r)
{
    const rudnn_tensor_t *views[3] = {&r->vpos, &r->vw, &r->vtok};
    static const char *const names[3] = {"positions", "routing weights", "dispatched rows"};
    for (int i = 0; i < 3; i++)
        if (rudnn_tensor_bytes(views[i]))
            rt_guard_track_buffer(g, rt_queue, views[i]->buffer, views[i]->offset + rudnn_tensor_bytes(views[i]),
                                  names[i]);
}

/* Compares rows x n values: |got - ref| <= a m + u (|ref| + a m) + z (+ UNDERFLOW), with m = mag[i], or
 * |ref| when mag is NULL. */
static int compare_rows(rt_log_t *log, const char *label, const char *what, const float *got, const double *ref,
                        const double *mag, int64_t rows, int64_t n, double a, double u, double z, double *worst_err,
                        double *worst_ratio)
{
    int64_t bad = 0, first = -1;
    double allowed_first = 0.0;
    for (int64_t i = 0; i < rows * n; i++) {
        const double m = mag ? mag[i] : fabs(ref[i]);
        const double arith = a * m, allowed = arith + u * (fabs(ref[i]) + arith) + z + UNDERFLOW;
        const double err = fabs((double)got[i] - ref[i]);
        if (!(err <= allowed)) {
            if (bad++ == 0)
                first = i, allowed_first = allowed;
            *worst_err = INFINITY, *worst_ratio = INFINITY;
            continue;
        }
        *worst_err = fmax(*worst_err, err);
        *worst_ratio = fmax(*worst_ratio, err / allowed);
    }
    if (bad)
        rt_logf(log, "  %s: %s: %lld element(s) off; first [%lld, %lld] = %.9g, reference %.9g (error %.3g, "
                "allowed %.3g)\n", label, what, (long long)bad, (long long)(first / n), (long long)(first % n),
                got[first], ref[first], fabs((double)got[first] - ref[first]), allowed_first);
    return bad != 0;
}

/* The raw bytes of a tensor (rt_xmalloc'ed; 1 byte for an empty one). */
static uint8_t *raw_of(const rt_tensor_t *t)
{
    const size_t bytes = rudnn_tensor_bytes(&t->t);
    uint8_t *raw = rt_xmalloc(bytes + 1);
    if (bytes)
        rt_assert_status(rudnn_tensor_read(rt_queue, &t->t, raw, bytes), RUDNN_STATUS_SUCCESS);
    return raw;
}

/* 1 when two tensors of the same shape hold the same bytes; logs the first differing element. */
static int same_bytes(rt_log_t *log, const char *label, const char *what, const rt_tensor_t *a, const rt_tensor_t *b)
{
    const size_t bytes = rudnn_tensor_bytes(&a->t), es = rudnn_dtype_size(a->t.dtype);
    uint8_t *ra = raw_of(a), *rb = raw_of(b);
    size_t i = 0;
    while (i < bytes && ra[i] == rb[i])
        i++;
    if (i < bytes)
        rt_logf(log, "  %s: %s: element %zu differs (%g vs %g)\n", label, what, i / es,
                (double)rt_element_value(a->t.dtype, ra, i / es), (double)rt_element_value(b->t.dtype, rb, i / es));
    free(ra), free(rb);
    return i == bytes;
}

/* Every output of both ops, twice each (both strategies for combine_backward), against the FP64
 * reference fed the stored values; each pair of calls must give the same bytes, and so must the two
 * strategies' grad_expert_output (a single product: no sum whose order differs). */
static int run_rows_case(rt_log_t *log, rstats_t *stats, rudnn_dtype_t dt, const rcase_t *c, int seed)
{
    char label[192];
    rcase_label(c, dt, label, sizeof label);
    rt_rng_t rng;
    rt_rng_seed_case(&rng, label, seed);
    routed_t r;
    if (!routed_make(log, label, c, dt, &rng, &r)) {
        routed_free(&r);
        return 1;
    }
    const int64_t T = c->T, H = c->H, pairs = c->T * c->k;
    const int k = c->k;
    const size_t nr = (size_t)(pairs * H), nt = (size_t)(T * H), nk = (size_t)pairs;
    float *eo = rt_xmalloc(sizeof(float) * (nr + 1)), *go = rt_xmalloc(sizeof(float) * (nt + 1));
    float *gr = rt_xmalloc(sizeof(float) * (nr + 1));
    rt_fill_uniform(&rng, eo, nr, -2.0, 2.0);
    rt_fill_uniform(&rng, go, nt, -2.0, 2.0);
    rt_fill_uniform(&rng, gr, nr, -2.0, 2.0);
    ref_quantize(dt, eo, eo, nr), ref_quantize(dt, go, go, nt), ref_quantize(dt, gr, gr, nr);

    /* small element offsets: the tensors need not start aligned */
    const size_t off = (size_t)(seed % 3);
    const int64_t drows[2] = {pairs, H}, dtok[2] = {T, H}, dk[2] = {T, k};
    rt_tensor_t EO, GO, GR, GE[2][2], GW[2][2], GI[2];
    rt_tensor_create(&EO, dt, 2, drows, off, RT_TAIL_BYTES);
    rt_tensor_create(&GO, dt, 2, dtok, 2 - off, RT_TAIL_BYTES);
    rt_tensor_create(&GR, dt, 2, drows, off + 1, RT_TAIL_BYTES);
    for (int s = 0; s < 2; s++)
        for (int call = 0; call < 2; call++) {
            rt_tensor_create(&GE[s][call], dt, 2, drows, (off + (size_t)s + (size_t)call) % 3, RT_TAIL_BYTES);
            rt_tensor_create(&GW[s][call], RUDNN_F32, 2, dk, 2 - (off + (size_t)call) % 3, RT_TAIL_BYTES);
        }
    rt_tensor_create(&GI[0], dt, 2, dtok, off, RT_TAIL_BYTES);
    rt_tensor_create(&GI[1], dt, 2, dtok, 1, RT_TAIL_BYTES);
    rt_tensor_upload(&EO, eo), rt_tensor_upload(&GO, go), rt_tensor_upload(&GR, gr);

    rt_guard_t inputs;
    memset(&inputs, 0, sizeof inputs);
    rt_guard_track(&inputs, rt_queue, &EO, "expert_output");
    rt_guard_track(&inputs, rt_queue, &GO, "grad_output");
    rt_guard_track(&inputs, rt_queue, &GR, "grad_rows");
    routed_guard(&inputs, &r);
    rt_guard_begin(&inputs);

    int problems = 0, ok_c[2][2], ok_d[2];
    float *ge[2], *gw[2], *gi = rt_xmalloc(sizeof(float) * (nt + 1));
    for (int s = 0; s < 2; s++) {
        ge[s] = rt_xmalloc(sizeof(float) * (nr + 1)), gw[s] = rt_xmalloc(sizeof(float) * (nk + 1));
        for (int call = 0; call < 2; call++) {
            char what[64], wge[96], wgw[96];
            snprintf(what, sizeof what, "combine_backward %s (call %d)", strategy_names[s], call + 1);
            snprintf(wge, sizeof wge, "%s grad_expert_output", what);
            snprintf(wgw, sizeof wgw, "%s grad_weights", what);
            rt_out_watch_t we, ww;
            rt_out_watch_begin(&we, &GE[s][call]);
            rt_out_watch_begin(&ww, &GW[s][call]);
            const rudnn_status_t st = rudnn_moe_combine_backward(rt_queue, r.disp, &EO.t, &GO.t, strategies[s],
                                                                 &GE[s][call].t, &GW[s][call].t);
            ok_c[s][call] = check_ok(log, label, what, st, T > 0);
            problems += !ok_c[s][call];
            problems += !rt_out_watch_end(&we, T > 0 && ok_c[s][call], call ? NULL : ge[s], log, label, wge);
            problems += !rt_out_watch_end(&ww, T > 0 && ok_c[s][call], call ? NULL : gw[s], log, label, wgw);
        }
    }
    for (int call = 0; call < 2; call++) {
        char what[64];
        snprintf(what, sizeof what, "dispatch_backward (call %d)", call + 1);
        rt_out_watch_t wi;
        rt_out_watch_begin(&wi, &GI[call]);
        const rudnn_status_t st = rudnn_moe_dispatch_backward(rt_queue, r.disp, &GR.t, &GI[call].t);
        ok_d[call] = check_ok(log, label, what, st, T > 0);
        problems += !ok_d[call];
        problems += !rt_out_watch_end(&wi, T > 0 && ok_d[call], call ? NULL : gi, log, label, what);
    }
    if (rt_guard_changed(&inputs)) {
        for (int i = 0; i < inputs.count; i++)
            if (inputs.items[i].changed)
                rt_logf(log, "  %s: the %s buffer was modified (it is only read)\n", label, inputs.items[i].name);
        problems++;
    }

    if (T > 0) {
        double *rge = rt_xmalloc(sizeof(double) * (nr + 1)), *rgw = rt_xmalloc(sizeof(double) * (nk + 1));
        double *mgw = rt_xmalloc(sizeof(double) * (nk + 1)), *rgi = rt_xmalloc(sizeof(double) * (nt + 1));
        double *mgi = rt_xmalloc(sizeof(double) * (nt + 1));
        assert_int_equal(mt_ref_combine_backward(r.pos, r.w, eo, go, T, k, H, rge, rgw, mgw), 0);
        assert_int_equal(mt_ref_dispatch_backward(r.pos, gr, T, k, H, rgi, mgi), 0);
        for (int s = 0; s < 2; s++) {
            char wge[64], wgw[64];
            snprintf(wge, sizeof wge, "combine_backward %s grad_expert_output", strategy_names[s]);
            snprintf(wgw, sizeof wgw, "combine_backward %s grad_weights", strategy_names[s]);
            if (ok_c[s][0]) {
                /* one FP32 product, rounded once to the rows dtype */
                problems += compare_rows(log, label, wge, ge[s], rge, NULL, pairs, H, 0x1p-24, round_unit(dt),
                                         round_abs(dt), &stats->ge_err, &stats->ge_ratio);
                /* H FP32 products summed in FP32, in either order */
                problems += compare_rows(log, label, wgw, gw[s], rgw, mgw, T, k, 1e-6 + gamma_n(H), 0.0, 0.0,
                                         &stats->gw_err, &stats->gw_ratio);
            }
            if (ok_c[s][0] && ok_c[s][1]) {
                snprintf(wge, sizeof wge, "combine_backward %s: grad_expert_output of two calls", strategy_names[s]);
                snprintf(wgw, sizeof wgw, "combine_backward %s: grad_weights of two calls", strategy_names[s]);
                problems += !same_bytes(log, label, wge, &GE[s][0], &GE[s][1]);
                problems += !same_bytes(log, label, wgw, &GW[s][0], &GW[s][1]);
            }
        }
        if (ok_c[0][0] && ok_c[1][0])
            problems += !same_bytes(log, label, "grad_expert_output of serial and plane", &GE[0][0], &GE[1][0]);
        if (ok_d[0])
            /* k rows summed in FP32 in slot order, rounded once */
            problems += compare_rows(log, label, "dispatch_backward grad_input", gi, rgi, mgi, T, H, gamma_n(k - 1),
                                     round_unit(dt), round_abs(dt), &stats->gi_err, &stats->gi_ratio);
        if (ok_d[0] && ok_d[1])
            problems += !same_bytes(log, label, "dispatch_backward: grad_input of two calls", &GI[0], &GI[1]);
        free(rge), free(rgw), free(mgw), free(rgi), free(mgi);
    }
    stats->cases++;

    for (int s = 0; s < 2; s++) {
        free(ge[s]), free(gw[s]);
        for (int call = 0; call < 2; call++)
            rt_tensor_destroy(&GE[s][call]), rt_tensor_destroy(&GW[s][call]);
    }
    free(gi), free(eo), free(go), free(gr);
    rt_guard_free(&inputs);
    rt_tensor_destroy(&EO), rt_tensor_destroy(&GO), rt_tensor_destroy(&GR);
    rt_tensor_destroy(&GI[0]), rt_tensor_destroy(&GI[1]);
    routed_free(&r);
    return problems;
}

static const int64_t rows_ek[][2] = {{1, 1}, {4, 1}, {4, 2}, {4, 4}, {16, 1}, {16, 3}, {16, 16}};

/* T in {0, 1, 7, 33} x (E, k) x H in {1, 5, 64, 300}; the logits dtype (hence the weights') cycles
 * through F32, F16, BF16 so that each meets every rows dtype, routing softmax or grouped sigmoid,
 * renormalized or not. */
static void test_rows(void **state)
{
    const param_t *p = *state;
    rt_log_t *log = rt_log_new();
    rstats_t stats = {0};
    static const int64_t Ts[4] = {0, 1, 7, 33}, Hs[4] = {1, 5, 64, 300};
    int seed = 0;
    for (int ti = 0; ti < 4; ti++)
        for (int ek = 0; ek < (int)(sizeof rows_ek / sizeof rows_ek[0]); ek++)
            for (int hi = 0; hi < 4; hi++) {
                rcase_t c = {0};
                c.T = Ts[ti], c.E = rows_ek[ek][0], c.k = (int)rows_ek[ek][1], c.H = Hs[hi];
                c.ldt = dtypes[(ti + ek + hi) % 3];
                c.grouped = (ek + hi) % 2;
                c.renorm = (ti + hi / 2) % 2;
                log->failures += run_rows_case(log, &stats, p->dtype, &c, seed++) != 0;
            }
    printf("  rows %s: %d case(s); largest error (fraction of its tolerance): grad_expert_output %.3g (%.3g), "
           "grad_weights %.3g (%.3g), grad_input %.3g (%.3g)\n",
           rudnn_dtype_name(p->dtype), stats.cases, stats.ge_err, stats.ge_ratio, stats.gw_err, stats.gw_ratio,
           stats.gi_err, stats.gi_ratio);
    fflush(stdout);
    rt_log_finish_free(log, "case(s)");
}

/* L = sum over t, h of go[t, h] out[t, h], out = combine(dispatched, expert_output) in double. */
static double combine_loss(const routed_t *r, const rcase_t *c, const double *w, const float *eo, const float *go)
{
    double l = 0.0;
    for (int64_t t = 0; t < c->T; t++)
        for (int64_t h = 0; h < c->H; h++) {
            double o = 0.0;
            for (int j = 0; j < c->k; j++)
                o += w[t * c->k + j] * eo[(int64_t)r->pos[t * c->k + j] * c->H + h];
            l += go[t * c->H + h] * o;
        }
    return l;
}

/* The two ops are the true gradients, independently of the reference, on small F32 problems:
 *   grad_expert_output = dL/d expert_output, L = sum(go * rudnn_moe_combine(dispatched, eo)) on the
 *     device: L is linear in each element, so a central difference of step 1/2 is exact but for the
 *     rounding of the one output row the element reaches (gamma_k of its magnitude);
 *   grad_weights = dL/d weights, through a double combine (itself checked against rudnn_moe_combine),
 *     step 1e-3 (linear again: only double cancellation, ~1e-16 |L| / 1e-3);
 *   dispatch_backward is the adjoint of rudnn_moe_dispatch: <gr, dispatch(x)> = <dispatch_backward(gr), x>,
 *     within the FP32 sums of dispatch_backward (gamma_{k-1} of sum |x| |gr|).
 * Both strategies. */
static void test_gradients(void **state)
{
    (void)state;
    rt_log_t *log = rt_log_new();
    static const rcase_t cases[] = {
        {3, 4, 5, 2, RUDNN_F32, 0, 1},  {5, 4, 7, 3, RUDNN_F16, 1, 0}, {2, 1, 3, 1, RUDNN_BF16, 0, 0},
        {4, 16, 9, 16, RUDNN_F32, 1, 1}, {6, 4, 64, 4, RUDNN_F32, 0, 0},
    };
    double worst_ge = 0.0, worst_gw = 0.0, worst_adj = 0.0;
    int checked = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const rcase_t *c = &cases[ci];
        char label[192];
        rcase_label(c, RUDNN_F32, label, sizeof label);
        rt_rng_t rng;
        rt_rng_seed_case(&rng, label, (int)ci);
        routed_t r;
        if (!routed_make(log, label, c, RUDNN_F32, &rng, &r)) {
            routed_free(&r);
            log->failures++;
            continue;
        }
        const int64_t T = c->T, H = c->H, pairs = c->T * c->k;
        const int k = c->k;
        const size_t nr = (size_t)(pairs * H), nt = (size_t)(T * H);
        float *eo = rt_xmalloc(sizeof(float) * nr), *go = rt_xmalloc(sizeof(float) * nt);
        float *gr = rt_xmalloc(sizeof(float) * nr), *out = rt_xmalloc(sizeof(float) * nt);
        float *ge = rt_xmalloc(sizeof(float) * nr), *gw = rt_xmalloc(sizeof(float) * (size_t)pairs);
        float *gi = rt_xmalloc(sizeof(float) * nt);
        double *w = rt_xmalloc(sizeof(double) * (size_t)pairs);
        rt_fill_uniform(&rng, eo, nr, -1.0, 1.0);
        rt_fill_uniform(&rng, go, nt, -1.0, 1.0);
        rt_fill_uniform(&rng, gr, nr, -1.0, 1.0);
        for (int64_t i = 0; i < pairs; i++)
            w[i] = r.w[i];
        const int64_t drows[2] = {pairs, H}, dtok[2] = {T, H}, dk[2] = {T, k};
        rt_tensor_t EO, GO, GR, OUT, GE, GW, GI;
        rt_tensor_create(&EO, RUDNN_F32, 2, drows, 0, RT_TAIL_BYTES);
        rt_tensor_create(&GO, RUDNN_F32, 2, dtok, 1, RT_TAIL_BYTES);
        rt_tensor_create(&GR, RUDNN_F32, 2, drows, 2, RT_TAIL_BYTES);
        rt_tensor_create(&OUT, RUDNN_F32, 2, dtok, 0, RT_TAIL_BYTES);
        rt_tensor_create(&GE, RUDNN_F32, 2, drows, 1, RT_TAIL_BYTES);
        rt_tensor_create(&GW, RUDNN_F32, 2, dk, 0, RT_TAIL_BYTES);
        rt_tensor_create(&GI, RUDNN_F32, 2, dtok, 2, RT_TAIL_BYTES);
        rt_tensor_upload(&EO, eo), rt_tensor_upload(&GO, go), rt_tensor_upload(&GR, gr);

        /* the double combine against the device's */
        rt_assert_status(rudnn_moe_combine(rt_queue, r.disp, &EO.t, &OUT.t), RUDNN_STATUS_SUCCESS);
        rt_tensor_download(&OUT, out);
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                double o = 0.0, m = 0.0;
                for (int j = 0; j < k; j++) {
                    const double v = w[t * k + j] * eo[(int64_t)r.pos[t * k + j] * H + h];
                    o += v, m += fabs(v);
                }
                if (!(fabs(out[t * H + h] - o) <= gamma_n(k) * m + UNDERFLOW)) {
                    rt_logf(log, "  %s: moe_combine [%lld, %lld] = %.9g, the double combine %.9g: the weights or "
                            "positions read back are not the ones combine uses\n", label, (long long)t, (long long)h,
                            out[t * H + h], o);
                    log->failures++;
                    t = T, h = H;
                }
            }

        for (int s = 0; s < 2; s++) {
            char what[64];
            snprintf(what, sizeof what, "combine_backward %s", strategy_names[s]);
            rt_assert_status(rudnn_moe_combine_backward(rt_queue, r.disp, &EO.t, &GO.t, strategies[s], &GE.t, &GW.t),
                             RUDNN_STATUS_SUCCESS);
            rt_tensor_download(&GE, ge);
            rt_tensor_download(&GW, gw);
            /* d L / d expert_output[row, h], by rudnn_moe_combine itself (one element moved at a time) */
            for (int64_t t = 0; t < T && s == 0; t++)
                for (int j = 0; j < k; j++) {
                    const int64_t row = r.pos[t * k + j];
                    for (int64_t h = 0; h < H; h++) {
                        const float keep = eo[row * H + h], plus = keep + 0.5f, minus = keep - 0.5f;
                        double l[2];
                        for (int side = 0; side < 2; side++) {
                            eo[row * H + h] = side ? minus : plus;
                            rt_tensor_upload(&EO, eo);
                            rt_assert_status(rudnn_moe_combine(rt_queue, r.disp, &EO.t, &OUT.t), RUDNN_STATUS_SUCCESS);
                            rt_tensor_download(&OUT, out);
                            l[side] = 0.0;
                            for (int64_t i = 0; i < T * H; i++)
                                l[side] += (double)go[i] * out[i];
                        }
                        eo[row * H + h] = keep;
                        /* the rounding of out[t, :] on either side; the rest of out is the same bits */
                        double bound = 0.0;
                        for (int64_t hh = 0; hh < H; hh++) {
                            double m = 0.0;
                            for (int jj = 0; jj < k; jj++)
                                m += fabs(w[t * k + jj]) * (fabs(eo[(int64_t)r.pos[t * k + jj] * H + hh]) + 0.5);
                            bound += fabs(go[t * H + hh]) * gamma_n(k) * m;
                        }
                        const double num = (l[0] - l[1]) / ((double)plus - minus), got = ge[row * H + h];
                        const double allowed = 2.0 * bound + 0x1p-24 * fabs(got) + 1e-15 * T * H;
                        worst_ge = fmax(worst_ge, fabs(got - num) / allowed);
                        checked++;
                        if (!(fabs(got - num) <= allowed)) {
                            rt_logf(log, "  %s: %s: grad_expert_output[%lld, %lld] = %.9g, central difference "
                                    "of combine %.9g (allowed %.3g)\n", label, what, (long long)row, (long long)h,
                                    got, num, allowed);
                            log->failures++;
                        }
                    }
                }
            rt_tensor_upload(&EO, eo);
            /* d L / d weights[t, j], by the double combine */
            for (int64_t i = 0; i < pairs; i++) {
                const double keep = w[i], step = 1e-3;
                w[i] = keep + step;
                const double lp = combine_loss(&r, c, w, eo, go);
                w[i] = keep - step;
                const double lm = combine_loss(&r, c, w, eo, go);
                w[i] = keep;
                const double num = (lp - lm) / (2 * step);
                double m = 0.0;
                for (int64_t h = 0; h < H; h++)
                    m += fabs((double)go[(i / k) * H + h] * eo[(int64_t)r.pos[i] * H + h]);
                const double allowed = (1e-6 + gamma_n(H)) * m + 1e-10;
                worst_gw = fmax(worst_gw, fabs(gw[i] - num) / allowed);
                checked++;
                if (!(fabs(gw[i] - num) <= allowed)) {
                    rt_logf(log, "  %s: %s: grad_weights[%lld, %lld] = %.9g, central difference %.9g (allowed "
                            "%.3g)\n", label, what, (long long)(i / k), (long long)(i % k), gw[i], num, allowed);
                    log->failures++;
                }
            }
        }

        /* the adjoint of dispatch */
        rt_assert_status(rudnn_moe_dispatch_backward(rt_queue, r.disp, &GR.t, &GI.t), RUDNN_STATUS_SUCCESS);
        rt_tensor_download(&GI, gi);
        double lhs = 0.0, rhs = 0.0, lmag = 0.0, bound = 0.0;
        for (size_t i = 0; i < nr; i++)
            lhs += (double)gr[i] * r.tok[i], lmag += fabs((double)gr[i] * r.tok[i]);
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                rhs += (double)gi[t * H + h] * r.x[t * H + h];
                double m = 0.0;
                for (int j = 0; j < k; j++)
                    m += fabs(gr[(int64_t)r.pos[t * k + j] * H + h]);
                bound += fabs(r.x[t * H + h]) * gamma_n(k - 1) * m;
            }
        const double allowed = bound + 1e-13 * lmag + 1e-300;
        worst_adj = fmax(worst_adj, fabs(lhs - rhs) / allowed);
        checked++;
        if (!(fabs(lhs - rhs) <= allowed)) {
            rt_logf(log, "  %s: <grad_rows, dispatch(x)> = %.17g but <dispatch_backward(grad_rows), x> = %.17g "
                    "(allowed %.3g)\n", label, lhs, rhs, allowed);
            log->failures++;
        }

        free(eo), free(go), free(gr), free(out), free(ge), free(gw), free(gi), free(w);
        rt_tensor_t *all[] = {&EO, &GO, &GR, &OUT, &GE, &GW, &GI};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            rt_tensor_destroy(all[i]);
        routed_free(&r);
    }
    printf("  gradients: %d check(s) against central differences and the adjoint; largest error as a fraction "
           "of its allowance: grad_expert_output %.3g, grad_weights %.3g, adjoint %.3g\n",
           checked, worst_ge, worst_gw, worst_adj);
    fflush(stdout);
    rt_log_finish_free(log, "check(s)");
}

/* ---- support probe and main ------------------------------------------------------------------- */

/* Both ops on a valid [1, 2] problem; *why gets the message of a NOT_SUPPORTED answer. */
static rudnn_status_t probe(char *why, size_t cap)
{
    rudnn_buffer_t b = NULL;
    rudnn_status_t st = rudnn_buffer_create(rt_ctx, 64, &b);
    if (st)
        return st;
    uint8_t zeros[64] = {0};
    const int64_t d12[2] = {1, 2}, d11[2] = {1, 1};
    rudnn_tensor_t l, i, w, g, gl;
    const rudnn_router_weight_options_t o = {RUDNN_ROUTER_SOFTMAX, 1, 1.0f};
    if (!(st = rudnn_buffer_write(rt_queue, b, 0, zeros, sizeof zeros)) &&
        !(st = rudnn_tensor_init(&l, b, 0, RUDNN_F32, 2, d12)) &&
        !(st = rudnn_tensor_init(&i, b, 16, RUDNN_I32, 2, d11)) &&
        !(st = rudnn_tensor_init(&w, b, 24, RUDNN_F32, 2, d11)) &&
        !(st = rudnn_tensor_init(&g, b, 32, RUDNN_F32, 2, d11)) &&
        !(st = rudnn_tensor_init(&gl, b, 40, RUDNN_F32, 2, d12))) {
        st = rudnn_moe_selected_router_weights(rt_queue, &l, &i, &o, &w);
        if (st == RUDNN_STATUS_SUCCESS || st == RUDNN_STATUS_NOT_SUPPORTED) {
            snprintf(why, cap, "%s", rudnn_last_error());
            const rudnn_status_t sb = rudnn_moe_selected_router_backward(rt_queue, &l, &i, &g, &o, &gl);
            if (sb == RUDNN_STATUS_NOT_SUPPORTED && st == RUDNN_STATUS_SUCCESS)
                snprintf(why, cap, "%s", rudnn_last_error());
            st = sb == RUDNN_STATUS_NOT_SUPPORTED ? sb : st;
        }
    }
    rudnn_queue_synchronize(rt_queue);
    rudnn_buffer_destroy(b);
    return st;
}

int main(int argc, char **argv)
{
    static param_t params[5][3];
    static struct CMUnitTest tests[5 * 3 + 2];
    size_t n = 0;
    static const char *const kinds[5] = {"sweep", "large", "tiny", "empty", "rows"};
    static const CMUnitTestFunction fns[5] = {test_sweep, test_large, test_tiny, test_empty, test_rows};
    tests[n++] = (struct CMUnitTest){"reference", test_reference, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"gradients", test_gradients, NULL, NULL, NULL};
    for (int f = 0; f < 5; f++)
        for (int d = 0; d < 3; d++) {
            param_t *p = &params[f][d];
            p->dtype = dtypes[d];
            snprintf(p->name, sizeof p->name, "%s/%s", kinds[f], rudnn_dtype_name(dtypes[d]));
            tests[n++] = (struct CMUnitTest){p->name, fns[f], NULL, NULL, p};
        }
    rt_set_filters(argc, argv);

    char group[64];
    snprintf(group, sizeof group, "moe_train-%s", rt_requested_backend());
    rt_open_or_skip(group);
    rudnn_device_info_t info;
    const int on_opencl = rudnn_context_device_info(rt_ctx, &info) == RUDNN_STATUS_SUCCESS &&
                          strcmp(info.backend, "opencl") == 0;
    char why[512] = "";
    if (probe(why, sizeof why) == RUDNN_STATUS_NOT_SUPPORTED) {
        if (!on_opencl) {
            /* the plugin has no kernels for the family (CUDA and HIP for now): nothing to test */
            printf("backend %s: SKIPPED (moe_train: %s)\n", rt_requested_backend(), why);
            fflush(stdout);
            rt_close();
            return RT_EXIT_SKIP;
        }
        printf("%s: the opencl plugin answers NOT_SUPPORTED (%s); the tests will fail\n", group, why);
    }
    return rt_exit_code(_cmocka_run_group_tests(group, tests, n, NULL, rt_group_teardown));
}
