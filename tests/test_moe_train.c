/* Numeric tests of the MoE training family (include/rudnn/moe_train.h) against the FP64 reference of
 * reference/moe_train_ref.c, through the public API; run once per backend (meson registers
 * moe_train-opencl, -cuda, -hip with RUDNN_BACKEND set). A backend whose plugin has no kernels for
 * the family (NOT_SUPPORTED from a valid call) prints "backend <b>: SKIPPED (<why>)" and exits 77;
 * one that has the router and rows ops but not the experts' training kernels skips the experts tests
 * only (cmocka SKIP). The OpenCL plugin has them all, so there NOT_SUPPORTED fails the suite instead.
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
 *                adjoint of rudnn_moe_dispatch (<gr, dispatch(x)> = <dispatch_backward(gr), x>);
 *   experts      rudnn_swiglu_experts_forward_dispatched_training and rudnn_swiglu_experts_backward, weights,
 *                tokens and gradients F32, F16 or BF16 (the dtype of the test), on a dispatched object
 *                (rudnn_moe_route or rudnn_moe_route_sigmoid_grouped, then rudnn_moe_dispatch): 14 cases
 *                drawn from T 0, 1, 7, 33; (E, k) (1, 1), (4, 2), (8, 2), (16, 3); H 1, 5, 64; I 1, 3, 40;
 *                g of order 1, 6 (s or 1 - s tiny) or up to 150 (exp(|g|) overflows FP32). The reference
 *                gets the stored weights, the rows and offsets read back, and grad_expert_output; it
 *                computes g and u itself, so the reserve ([R, 2I]: g, then u) is checked as an output.
 *                Each op runs three times: Scalar with the context's pool, again, and Auto with a caller
 *                workspace of exactly rudnn_swiglu_experts_training_workspace_size bytes (= R I 8; the 64
 *                bytes after them in its buffer must stay as they were): the same bytes each time. The
 *                weight gradients of the experts without rows must be exactly 0; T 0: the forward writes
 *                no byte, the backward zeros into the weight gradients and nothing else. The inputs
 *                (weights, dispatched rows, offsets, positions, routing weights, grad_expert_output, and the
 *                reserve in the backward) stay byte-identical. TensorCore is refused (NOT_SUPPORTED,
 *                nothing written), and rudnn_swiglu_experts_forward_dispatched (Scalar) is checked against
 *                the same reference and tolerance as the training forward's expert_output;
 *   experts_gradients  independently of the reference (small F32 problems, one with g up to 150): every
 *                element of gate, up, down and the tokens' input x moved by +-2^-18 in a double forward
 *                (itself checked against the device's expert_output), L = sum(grad_expert_output * y); the
 *                central difference against the device's grad_gate, grad_up, grad_down and
 *                rudnn_moe_dispatch_backward(grad_rows), within their tolerance below plus 1e-8 (1 + mag),
 *                and against the reference's (within 1e-8 (1 + mag), grad_down plus its bracket);
 *   training_plan  the router training plan (rudnn_routing_plan_into_training and the calls after it), for
 *                T 0, 1, 7, 33; (E, k) (4, 1), (4, 2), (16, 1), (16, 2), (16, 8), (64, 1), (64, 2), (64, 8);
 *                each of the four scorings; scale 1 or 2.5: logits in [-8, 8] routed by rudnn_moe_route (the
 *                options' renormalize) or, in a quarter of the cases, rudnn_moe_route_sigmoid_grouped (4 groups,
 *                2 selected, a bias, the options' renormalize and scale), then into_training on the same
 *                logits. Its routing plan (rudnn_router_training_plan_routing; a second reference released at
 *                once) must be a new plan holding exactly the plan's indices (U32) and F32 weights equal bit
 *                for bit to rudnn_moe_selected_router_weights on the plan's indices view, and near the
 *                reference (the sweep's tolerance); with the routing's own options (softmax at scale 1 after
 *                moe_route; sigmoid after the grouped routing) the plan's weights, rounded to the logits
 *                dtype, agree with them too (u, z of the logits dtype). rudnn_router_training_plan_backward
 *                must give the bytes of rudnn_moe_selected_router_backward (and be near the reference, its
 *                zeros exact). The original plan's indices and weights stay byte-identical and it still
 *                dispatches: the training routing's dispatch (rows F32, F16 or BF16, H 1, 5 or 33) holds the
 *                same positions, offsets, counts and rows bytes as the plan's, and rudnn_moe_combine with it
 *                matches a double combine with the F32 training weights and the positions read back (a =
 *                gamma_k over sum |w eo|, u and z of the rows dtype, as the rows ops). Lifetimes: the
 *                original plan and then the logits' buffer handle are destroyed (rudnn_debug_live_objects
 *                unchanged by the latter: the training plan holds the buffer); backward then gives the same
 *                bytes; the training plan goes before the routing plan it handed out (the live count drops
 *                by 2: it and the logits' buffer), which still holds its bytes, dispatches as before and
 *                combines to the same bytes; at the end of each case no live object is left over.
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
 * The experts (moe_train_ref.h gives the magnitudes mag: the error an FP32 evaluation makes, to first order,
 * is at most gamma_N mag, N the longest chain of roundings; exp and the divide of silu and sigmoid count
 * 8 ulp, the other elementwise steps 1 each, within the 16 or 32 added below). An element passes when
 * |got - ref| <= arith + u (|ref| + arith) + z + 2^-120 with arith = rad + a (mag + rad), u and z of the
 * output's dtype (the weight gradients and the reserve are F32: 0), where
 *   reserve g, u     a = gamma_H (H products, summed in FP32), rad 0;
 *   activation       the FP32 silu(g) u is within gamma_{H+16} of its magnitude; the reference brackets
 *                    its rounding to the dtype (the device's a is one of the two ends where the bracket
 *                    holds a rounding boundary: a_mid +- a_rad, moe_train_ref.h);
 *   expert_output    a = gamma_I over sum |a down|, rad = sum_i a_rad |down|;
 *   grad_rows        a = gamma_{H+2I+32}: da (H terms), dg or du (a few ulp more), 2I terms;
 *   grad_gate, up    a = gamma_{H+R+32}: da, dg or du, then the expert's rows (at most R = T k);
 *   grad_down        a = gamma_R over sum_r |dy a| (the expert's rows), rad = sum_r |dy| a_rad.
 * The activation's bracket is almost always one value, so an activation not rounded to the dtype (in
 * expert_output or grad_down), or a reserve rounded to it, is outside these by far (F16: 2^-11 relative
 * against ~1e-5). grad_input (experts_gradients) adds gamma_k for dispatch_backward's sum of k rows.
 *
 * Usage: test_moe_train [glob]; it prints the largest error of each dtype. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/debug.h> /* rudnn_debug_live_objects */
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

/* ==== SwiGLU experts: training ==================================================================== */

typedef struct xcase {
    int64_t T, E, H, I;
    int k;
    int wide; /* gate weights 6x larger (1): g reaches about +-25, where s or 1 - s is tiny; 40x (2): g
               * reaches about +-150, where exp(|g|) overflows FP32 (only the stable forms stay finite) */
} xcase_t;

enum { X_G, X_U, X_Y, X_GR, X_GG, X_GU, X_GD, X_COUNT };
static const char *const x_names[X_COUNT] = {"reserve g", "reserve u", "expert_output", "grad_rows",
                                             "grad_gate", "grad_up", "grad_down"};

/* The largest error of each output of a dtype, absolute and as a fraction of its allowance. */
typedef struct xstats {
    int cases, empty_experts;
    double err[X_COUNT], ratio[X_COUNT];
} xstats_t;

/* The tolerances' a of each output (the file's header says why), for R dispatched rows. */
typedef struct xtol {
    double act, a[X_COUNT];
} xtol_t;

static xtol_t experts_tolerances(const xcase_t *c)
{
    const int64_t H = c->H, I = c->I, R = c->T * c->k;
    xtol_t t;
    t.act = gamma_n(H + 16);
    t.a[X_G] = t.a[X_U] = gamma_n(H);
    t.a[X_Y] = gamma_n(I);
    t.a[X_GR] = gamma_n(H + 2 * I + 32);
    t.a[X_GG] = t.a[X_GU] = gamma_n(H + R + 32);
    t.a[X_GD] = gamma_n(R);
    return t;
}

static void xcase_label(const xcase_t *c, rudnn_dtype_t dt, char *label, size_t cap)
{
    snprintf(label, cap, "experts %s T=%lld E=%lld k=%d H=%lld I=%lld%s", rudnn_dtype_name(dt), (long long)c->T,
             (long long)c->E, c->k, (long long)c->H, (long long)c->I,
             c->wide == 2 ? " extreme" : c->wide ? " wide" : "");
}

/* The experts' weights on the device and as stored. */
typedef struct xweights {
    rt_tensor_t G, U, D;
    rudnn_swiglu_experts_t ex;
    float *gate, *up, *down;
} xweights_t;

static void xweights_free(xweights_t *w)
{
    rudnn_swiglu_experts_destroy(w->ex);
    rt_tensor_destroy(&w->G), rt_tensor_destroy(&w->U), rt_tensor_destroy(&w->D);
    free(w->gate), free(w->up), free(w->down);
    memset(w, 0, sizeof *w);
}

/* Random weights of dtype dt at element offset off (gate and up [E, I, H] scaled so that g and u are
 * of order 1 for x in [-2, 2], g 6 or 40 times that when wide; down [E, H, I]) and the experts over them. */
static int xweights_make(rt_log_t *log, const char *label, const xcase_t *c, rudnn_dtype_t dt, rt_rng_t *rng,
                         size_t off, xweights_t *w)
{
    memset(w, 0, sizeof *w);
    const int64_t E = c->E, H = c->H, I = c->I;
    const size_t nw = (size_t)(E * I * H);
    const double su = 1.8 / sqrt((double)H), sd = 1.0 / sqrt((double)I);
    const double sg = su * (c->wide == 2 ? 40.0 : c->wide ? 6.0 : 1.0);
    w->gate = rt_xmalloc(sizeof(float) * nw), w->up = rt_xmalloc(sizeof(float) * nw);
    w->down = rt_xmalloc(sizeof(float) * nw);
    rt_fill_uniform(rng, w->gate, nw, -sg, sg);
    rt_fill_uniform(rng, w->up, nw, -su, su);
    rt_fill_uniform(rng, w->down, nw, -sd, sd);
    ref_quantize(dt, w->gate, w->gate, nw), ref_quantize(dt, w->up, w->up, nw), ref_quantize(dt, w->down, w->down, nw);
    const int64_t dgu[3] = {E, I, H}, dd[3] = {E, H, I};
    rt_tensor_create(&w->G, dt, 3, dgu, off, RT_TAIL_BYTES);
    rt_tensor_create(&w->U, dt, 3, dgu, 2 - off, RT_TAIL_BYTES);
    rt_tensor_create(&w->D, dt, 3, dd, off + 1, RT_TAIL_BYTES);
    rt_tensor_upload(&w->G, w->gate), rt_tensor_upload(&w->U, w->up), rt_tensor_upload(&w->D, w->down);
    return check_ok(log, label, "swiglu_experts_create",
                    rudnn_swiglu_experts_create(rt_ctx, &w->G.t, &w->U.t, &w->D.t, &w->ex), 0);
}

/* The dispatched object's offsets [E + 1] read back (and their view, for the guard); 1 when read. */
static int read_offsets(rt_log_t *log, const char *label, const routed_t *r, int64_t E, uint32_t *offsets,
                        rudnn_tensor_t *view)
{
    if (!check_ok(log, label, "dispatched_offsets", rudnn_dispatched_offsets(r->disp, view), 0))
        return 0;
    if (view->dtype != RUDNN_U32 || view->rank != 1 || view->dims[0] != E + 1) {
        rt_logf(log, "  %s: offsets view is %s rank %d, expected U32 [%lld]\n", label, rudnn_dtype_name(view->dtype),
                view->rank, (long long)(E + 1));
        return 0;
    }
    return read_tensor(log, label, "offsets", view, offsets);
}

/* Compares rows x n values: |got - ref| <= arith + u (|ref| + arith) + z + UNDERFLOW, with
 * arith = rad + a (mag + rad) (rad NULL: 0), the form of compare_rows with an absolute allowance. */
static int compare_rad(rt_log_t *log, const char *label, const char *what, const float *got, const double *ref,
                       const double *mag, const double *rad, int64_t rows, int64_t n, double a, double u, double z,
                       double *worst_err, double *worst_ratio)
{
    int64_t bad = 0, first = -1;
    double allowed_first = 0.0;
    for (int64_t i = 0; i < rows * n; i++) {
        const double rd = rad ? rad[i] : 0.0, arith = rd + a * (mag[i] + rd);
        const double allowed = arith + u * (fabs(ref[i]) + arith) + z + UNDERFLOW;
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

/* The weight gradients of the experts without rows must be exactly 0 (written, not accumulated). */
static int check_empty_experts(rt_log_t *log, const char *label, const char *what, const float *got,
                               const uint32_t *offsets, int64_t E, int64_t per_expert)
{
    for (int64_t e = 0; e < E; e++)
        if (offsets[e] == offsets[e + 1])
            for (int64_t i = 0; i < per_expert; i++)
                if (got[e * per_expert + i] != 0.0f) {
                    rt_logf(log, "  %s: %s of expert %lld (no rows) [%lld] = %.9g, expected exactly 0\n", label, what,
                            (long long)e, (long long)i, got[e * per_expert + i]);
                    return 1;
                }
    return 0;
}

/* A TensorCore request: NOT_SUPPORTED (no backend has such training kernels yet), nothing written. */
static int check_tensor_core_refused(rt_log_t *log, const char *label, const char *what, rudnn_status_t st)
{
    if (st == RUDNN_STATUS_NOT_SUPPORTED)
        return 1;
    rt_logf(log, "  %s: %s with RUDNN_MOE_TENSOR_CORE returned %s, expected NOT_SUPPORTED\n", label, what,
            rudnn_status_string(st));
    return 0;
}

static const rudnn_moe_strategy_t x_strategy[3] = {RUDNN_MOE_SCALAR, RUDNN_MOE_SCALAR, RUDNN_MOE_AUTO};
static const char *const x_call_name[3] = {"scalar", "scalar (call 2)", "auto, caller workspace"};

/* Route and dispatch T tokens, then three forwards (Scalar, Scalar again, Auto with a caller workspace of
 * exactly the size asked for) and three backwards the same way from the first forward's reserve, each
 * against the FP64 reference fed the stored values; the three calls of each must give the same bytes. */
static int run_experts_case(rt_log_t *log, xstats_t *stats, rudnn_dtype_t dt, const xcase_t *c, int seed)
{
    char label[192];
    xcase_label(c, dt, label, sizeof label);
    rt_rng_t rng;
    rt_rng_seed_case(&rng, label, seed);
    const rcase_t rc = {c->T, c->E, c->H, c->k, dtypes[seed % 3], seed % 2, (seed / 2) % 2};
    const int64_t E = c->E, H = c->H, I = c->I, R = c->T * c->k;
    const size_t off = (size_t)(seed % 3);
    routed_t r;
    xweights_t w;
    memset(&w, 0, sizeof w);
    uint32_t *offsets = rt_xmalloc(sizeof(uint32_t) * (size_t)(E + 1));
    rudnn_tensor_t voff;
    if (!routed_make(log, label, &rc, dt, &rng, &r) || !read_offsets(log, label, &r, E, offsets, &voff) ||
        !xweights_make(log, label, c, dt, &rng, off, &w)) {
        free(offsets), routed_free(&r), xweights_free(&w);
        return 1;
    }
    int problems = 0;
    for (int64_t e = 0; e < E; e++)
        stats->empty_experts += offsets[e] == offsets[e + 1];
    const size_t nrh = (size_t)(R * H), nri = (size_t)(R * I), nw = (size_t)(E * I * H);
    float *dy = rt_xmalloc(sizeof(float) * (nrh + 1));
    rt_fill_uniform(&rng, dy, nrh, -1.0, 1.0);
    ref_quantize(dt, dy, dy, nrh);

    size_t ws = 0;
    const rudnn_status_t wst = rudnn_swiglu_experts_training_workspace_size(w.ex, R, &ws);
    problems += !check_ok(log, label, "training_workspace_size", wst, 0);
    if (wst == RUDNN_STATUS_SUCCESS && ws != (size_t)(R * I * 8)) {
        rt_logf(log, "  %s: training_workspace_size = %zu, expected rows * inter * 8 = %lld\n", label, ws,
                (long long)(R * I * 8));
        problems++;
    }
    /* the caller's workspace: exactly ws bytes named, 64 more in its buffer that must stay as they are */
    rudnn_buffer_t wsb = NULL;
    rt_assert_status(rudnn_buffer_create(rt_ctx, ws + 64, &wsb), RUDNN_STATUS_SUCCESS);
    {
        uint8_t *fill = rt_xmalloc(ws + 64);
        memset(fill, 0xa5, ws + 64);
        rt_assert_status(rudnn_buffer_write(rt_queue, wsb, 0, fill, ws + 64), RUDNN_STATUS_SUCCESS);
        free(fill);
    }

    const int64_t drh[2] = {R, H}, dres[2] = {R, 2 * I}, dgu[3] = {E, I, H}, dd[3] = {E, H, I};
    rt_tensor_t RES[3], EO[3], GEO, GR[3], GG[3], GU[3], GD[3];
    for (int call = 0; call < 3; call++) {
        const size_t o = off + (size_t)call;
        rt_tensor_create(&RES[call], RUDNN_F32, 2, dres, o % 3, RT_TAIL_BYTES);
        rt_tensor_create(&EO[call], dt, 2, drh, (o + 1) % 3, RT_TAIL_BYTES);
        rt_tensor_create(&GR[call], dt, 2, drh, (o + 2) % 3, RT_TAIL_BYTES);
        rt_tensor_create(&GG[call], RUDNN_F32, 3, dgu, o % 3, RT_TAIL_BYTES);
        rt_tensor_create(&GU[call], RUDNN_F32, 3, dgu, (o + 1) % 3, RT_TAIL_BYTES);
        rt_tensor_create(&GD[call], RUDNN_F32, 3, dd, (o + 2) % 3, RT_TAIL_BYTES);
    }
    rt_tensor_create(&GEO, dt, 2, drh, 2 - off, RT_TAIL_BYTES);
    rt_tensor_upload(&GEO, dy);

    rt_guard_t inputs;
    memset(&inputs, 0, sizeof inputs);
    rt_guard_track(&inputs, rt_queue, &w.G, "gate weights");
    rt_guard_track(&inputs, rt_queue, &w.U, "up weights");
    rt_guard_track(&inputs, rt_queue, &w.D, "down weights");
    rt_guard_track(&inputs, rt_queue, &GEO, "grad_expert_output");
    rt_guard_track_buffer(&inputs, rt_queue, voff.buffer, voff.offset + rudnn_tensor_bytes(&voff), "offsets");
    routed_guard(&inputs, &r);
    rt_guard_begin(&inputs);

    /* forward */
    int ok_f[3], ok_b[3];
    float *res = rt_xmalloc(sizeof(float) * (2 * nri + 1)), *eo = rt_xmalloc(sizeof(float) * (nrh + 1));
    for (int call = 0; call < 3; call++) {
        char what[96], wr[128], we[128];
        snprintf(what, sizeof what, "forward_dispatched_training %s", x_call_name[call]);
        snprintf(wr, sizeof wr, "%s reserve", what);
        snprintf(we, sizeof we, "%s expert_output", what);
        rt_out_watch_t wres, weo;
        rt_out_watch_begin(&wres, &RES[call]);
        rt_out_watch_begin(&weo, &EO[call]);
        const rudnn_status_t st = rudnn_swiglu_experts_forward_dispatched_training(
            rt_queue, w.ex, r.disp, x_strategy[call], call == 2 ? wsb : NULL, call == 2 ? ws : 0, &RES[call].t,
            &EO[call].t);
        ok_f[call] = check_ok(log, label, what, st, R > 0);
        problems += !ok_f[call];
        /* R = 0: nothing to write */
        problems += !rt_out_watch_end(&wres, R > 0 && ok_f[call], call ? NULL : res, log, label, wr);
        problems += !rt_out_watch_end(&weo, R > 0 && ok_f[call], call ? NULL : eo, log, label, we);
    }
    if (rt_guard_changed(&inputs)) {
        for (int i = 0; i < inputs.count; i++)
            if (inputs.items[i].changed)
                rt_logf(log, "  %s: forward: the %s buffer was modified (it is only read)\n", label,
                        inputs.items[i].name);
        problems++;
    }

    /* backward, from the first forward's reserve (now an input too) */
    rt_guard_track(&inputs, rt_queue, &RES[0], "reserve");
    rt_guard_begin(&inputs);
    float *gr = rt_xmalloc(sizeof(float) * (nrh + 1)), *gg = rt_xmalloc(sizeof(float) * nw);
    float *gu = rt_xmalloc(sizeof(float) * nw), *gd = rt_xmalloc(sizeof(float) * nw);
    for (int call = 0; call < 3; call++) {
        char what[96], wgr[128], wgg[128], wgu[128], wgd[128];
        snprintf(what, sizeof what, "backward %s", x_call_name[call]);
        snprintf(wgr, sizeof wgr, "%s grad_rows", what);
        snprintf(wgg, sizeof wgg, "%s grad_gate", what);
        snprintf(wgu, sizeof wgu, "%s grad_up", what);
        snprintf(wgd, sizeof wgd, "%s grad_down", what);
        rt_out_watch_t wr, wg, wu, wd;
        rt_out_watch_begin(&wr, &GR[call]), rt_out_watch_begin(&wg, &GG[call]);
        rt_out_watch_begin(&wu, &GU[call]), rt_out_watch_begin(&wd, &GD[call]);
        const rudnn_status_t st = rudnn_swiglu_experts_backward(rt_queue, w.ex, r.disp, &RES[0].t, &GEO.t,
                                                                x_strategy[call], call == 2 ? wsb : NULL,
                                                                call == 2 ? ws : 0, &GR[call].t, &GG[call].t,
                                                                &GU[call].t, &GD[call].t);
        ok_b[call] = check_ok(log, label, what, st, R > 0);
        problems += !ok_b[call];
        /* the weight gradients are written even without rows (zeros); grad_rows has no element then */
        problems += !rt_out_watch_end(&wr, R > 0 && ok_b[call], call ? NULL : gr, log, label, wgr);
        problems += !rt_out_watch_end(&wg, ok_b[call], call ? NULL : gg, log, label, wgg);
        problems += !rt_out_watch_end(&wu, ok_b[call], call ? NULL : gu, log, label, wgu);
        problems += !rt_out_watch_end(&wd, ok_b[call], call ? NULL : gd, log, label, wgd);
    }
    if (rt_guard_changed(&inputs)) {
        for (int i = 0; i < inputs.count; i++)
            if (inputs.items[i].changed)
                rt_logf(log, "  %s: backward: the %s buffer was modified (it is only read)\n", label,
                        inputs.items[i].name);
        problems++;
    }
    {
        uint8_t *after = rt_buffer_snapshot(wsb, ws + 64);
        size_t i = ws;
        while (i < ws + 64 && after[i] == 0xa5)
            i++;
        if (i < ws + 64) {
            rt_logf(log, "  %s: the caller's workspace: byte %zu past its %zu bytes was written\n", label, i, ws);
            problems++;
        }
        free(after);
    }

    /* the same bytes from every call: Scalar twice, Auto (Scalar) with the caller's workspace */
    for (int call = 1; call < 3; call++) {
        char what[160];
        if (ok_f[0] && ok_f[call]) {
            snprintf(what, sizeof what, "reserve of forward scalar and %s", x_call_name[call]);
            problems += !same_bytes(log, label, what, &RES[0], &RES[call]);
            snprintf(what, sizeof what, "expert_output of forward scalar and %s", x_call_name[call]);
            problems += !same_bytes(log, label, what, &EO[0], &EO[call]);
        }
        if (ok_b[0] && ok_b[call]) {
            const rt_tensor_t *outs[4][3] = {{&GR[0], &GR[1], &GR[2]},
                                             {&GG[0], &GG[1], &GG[2]},
                                             {&GU[0], &GU[1], &GU[2]},
                                             {&GD[0], &GD[1], &GD[2]}};
            static const char *const names[4] = {"grad_rows", "grad_gate", "grad_up", "grad_down"};
            for (int o = 0; o < 4; o++) {
                snprintf(what, sizeof what, "%s of backward scalar and %s", names[o], x_call_name[call]);
                problems += !same_bytes(log, label, what, outs[o][0], outs[o][call]);
            }
        }
    }

    /* the inference forward (rudnn_swiglu_experts_forward_dispatched, Scalar) is the same function: within the
     * same tolerance of the reference */
    float *eo_inf = rt_xmalloc(sizeof(float) * (nrh + 1));
    int ok_inf;
    {
        rt_out_watch_t wi;
        rt_out_watch_begin(&wi, &EO[1]);
        const rudnn_status_t st = rudnn_swiglu_experts_forward_dispatched(rt_queue, w.ex, r.disp, RUDNN_MOE_SCALAR,
                                                                          NULL, 0, &EO[1].t);
        ok_inf = check_ok(log, label, "forward_dispatched scalar", st, 0);
        problems += !ok_inf;
        problems += !rt_out_watch_end(&wi, R > 0 && ok_inf, eo_inf, log, label, "forward_dispatched expert_output");
    }

    /* TensorCore: refused, nothing written (outputs of the second calls, already compared) */
    {
        rt_out_watch_t wres, weo, wr, wg, wu, wd;
        rt_out_watch_begin(&wres, &RES[1]), rt_out_watch_begin(&weo, &EO[1]);
        rudnn_status_t st = rudnn_swiglu_experts_forward_dispatched_training(
            rt_queue, w.ex, r.disp, RUDNN_MOE_TENSOR_CORE, NULL, 0, &RES[1].t, &EO[1].t);
        problems += !check_tensor_core_refused(log, label, "forward_dispatched_training", st);
        problems += !rt_out_watch_end(&wres, 0, NULL, log, label, "forward TensorCore reserve");
        problems += !rt_out_watch_end(&weo, 0, NULL, log, label, "forward TensorCore expert_output");
        rt_out_watch_begin(&wr, &GR[1]), rt_out_watch_begin(&wg, &GG[1]);
        rt_out_watch_begin(&wu, &GU[1]), rt_out_watch_begin(&wd, &GD[1]);
        st = rudnn_swiglu_experts_backward(rt_queue, w.ex, r.disp, &RES[0].t, &GEO.t, RUDNN_MOE_TENSOR_CORE, NULL, 0,
                                           &GR[1].t, &GG[1].t, &GU[1].t, &GD[1].t);
        problems += !check_tensor_core_refused(log, label, "backward", st);
        problems += !rt_out_watch_end(&wr, 0, NULL, log, label, "backward TensorCore grad_rows");
        problems += !rt_out_watch_end(&wg, 0, NULL, log, label, "backward TensorCore grad_gate");
        problems += !rt_out_watch_end(&wu, 0, NULL, log, label, "backward TensorCore grad_up");
        problems += !rt_out_watch_end(&wd, 0, NULL, log, label, "backward TensorCore grad_down");
    }

    /* against the reference, fed the rows and offsets the device holds */
    const mt_ref_experts_t p = {R, E, H, I, r.tok, offsets, w.gate, w.up, w.down};
    mt_ref_experts_fwd_t f;
    mt_ref_experts_bwd_t b;
    mt_ref_experts_alloc(&p, &f, &b);
    const xtol_t tol = experts_tolerances(c);
    if (mt_ref_experts_forward(dt, &p, tol.act, &f) || mt_ref_experts_backward(&p, &f, dy, &b)) {
        rt_logf(log, "  %s: the dispatched offsets are not a partition of the %lld rows\n", label, (long long)R);
        problems++;
    } else {
        const double u = round_unit(dt), z = round_abs(dt);
        if (ok_f[0] && R > 0) {
            /* the reserve [R, 2I]: g, then u */
            float *gv = rt_xmalloc(sizeof(float) * nri), *uv = rt_xmalloc(sizeof(float) * nri);
            for (int64_t row = 0; row < R; row++)
                for (int64_t i = 0; i < I; i++)
                    gv[row * I + i] = res[row * 2 * I + i], uv[row * I + i] = res[row * 2 * I + I + i];
            problems += compare_rad(log, label, "reserve g", gv, f.g, f.g_mag, NULL, R, I, tol.a[X_G], 0.0, 0.0,
                                    &stats->err[X_G], &stats->ratio[X_G]);
            problems += compare_rad(log, label, "reserve u", uv, f.u, f.u_mag, NULL, R, I, tol.a[X_U], 0.0, 0.0,
                                    &stats->err[X_U], &stats->ratio[X_U]);
            problems += compare_rad(log, label, "expert_output", eo, f.y, f.y_mag, f.y_rad, R, H, tol.a[X_Y], u, z,
                                    &stats->err[X_Y], &stats->ratio[X_Y]);
            free(gv), free(uv);
        }
        if (ok_inf && R > 0) {
            double e = 0.0, q = 0.0; /* not in the statistics: another op's */
            problems += compare_rad(log, label, "forward_dispatched expert_output", eo_inf, f.y, f.y_mag, f.y_rad, R, H,
                                    tol.a[X_Y], u, z, &e, &q);
        }
        if (ok_f[0] && ok_b[0]) {
            if (R > 0)
                problems += compare_rad(log, label, "grad_rows", gr, b.grad_rows, b.grad_rows_mag, NULL, R, H,
                                        tol.a[X_GR], u, z, &stats->err[X_GR], &stats->ratio[X_GR]);
            problems += compare_rad(log, label, "grad_gate", gg, b.grad_gate, b.grad_gate_mag, NULL, E, I * H,
                                    tol.a[X_GG], 0.0, 0.0, &stats->err[X_GG], &stats->ratio[X_GG]);
            problems += compare_rad(log, label, "grad_up", gu, b.grad_up, b.grad_up_mag, NULL, E, I * H,
                                    tol.a[X_GU], 0.0, 0.0, &stats->err[X_GU], &stats->ratio[X_GU]);
            problems += compare_rad(log, label, "grad_down", gd, b.grad_down, b.grad_down_mag, b.grad_down_rad, E,
                                    H * I, tol.a[X_GD], 0.0, 0.0, &stats->err[X_GD], &stats->ratio[X_GD]);
        }
        if (ok_b[0]) {
            problems += check_empty_experts(log, label, "grad_gate", gg, offsets, E, I * H);
            problems += check_empty_experts(log, label, "grad_up", gu, offsets, E, I * H);
            problems += check_empty_experts(log, label, "grad_down", gd, offsets, E, H * I);
        }
    }
    stats->cases++;

    mt_ref_experts_free(&f, &b);
    free(dy), free(res), free(eo), free(eo_inf), free(gr), free(gg), free(gu), free(gd), free(offsets);
    rt_guard_free(&inputs);
    for (int call = 0; call < 3; call++) {
        rt_tensor_destroy(&RES[call]), rt_tensor_destroy(&EO[call]), rt_tensor_destroy(&GR[call]);
        rt_tensor_destroy(&GG[call]), rt_tensor_destroy(&GU[call]), rt_tensor_destroy(&GD[call]);
    }
    rt_tensor_destroy(&GEO);
    rudnn_buffer_destroy(wsb);
    xweights_free(&w);
    routed_free(&r);
    return problems;
}

/* T 0, 1, 7, 33; (E, k) (1, 1), (4, 2), (8, 2), (16, 3); H 1, 5, 64; I 1, 3, 40: a diverse dozen, each
 * meeting several of the others' values; some experts get no row (their weight gradients exactly 0). */
static const xcase_t experts_cases[] = {
    /* T, E, H, I, k, wide */
    {0, 4, 5, 3, 2, 0},    {1, 1, 1, 1, 1, 0},   {1, 16, 64, 40, 3, 0}, {7, 4, 5, 3, 2, 1},
    {7, 8, 64, 1, 2, 0},   {7, 16, 1, 40, 3, 0}, {33, 1, 64, 40, 1, 0}, {33, 4, 1, 3, 2, 0},
    {33, 8, 5, 40, 2, 1},  {33, 16, 64, 3, 3, 0}, {7, 1, 5, 40, 1, 1},  {0, 16, 64, 40, 3, 0},
    {1, 8, 5, 1, 2, 1},    {7, 4, 64, 3, 2, 2},
};

/* set by main when a backend other than OpenCL answers NOT_SUPPORTED for the experts' training ops */
static char experts_skip[512];

static void test_experts(void **state)
{
    const param_t *p = *state;
    if (experts_skip[0]) {
        printf("  experts %s: SKIPPED (%s)\n", rudnn_dtype_name(p->dtype), experts_skip);
        skip();
    }
    rt_log_t *log = rt_log_new();
    xstats_t stats = {0};
    for (int i = 0; i < (int)(sizeof experts_cases / sizeof experts_cases[0]); i++)
        log->failures += run_experts_case(log, &stats, p->dtype, &experts_cases[i], i) != 0;
    printf("  experts %s: %d case(s), %d expert(s) without rows; largest error (fraction of its tolerance):",
           rudnn_dtype_name(p->dtype), stats.cases, stats.empty_experts);
    for (int o = 0; o < X_COUNT; o++)
        printf("%s %s %.3g (%.3g)", o ? "," : "", x_names[o], stats.err[o], stats.ratio[o]);
    printf("\n");
    fflush(stdout);
    rt_log_finish_free(log, "case(s)");
}

/* y [R, H]: the experts of the token rows in double, each dispatched row pos[t, j] holding x[t, :], a
 * not rounded (the contract's gradient passes its rounding straight: it is the exact gradient of this). */
static void experts_rows_y(const xcase_t *c, const uint32_t *pos, const int64_t *expert_of, const double *x,
                           const double *gate, const double *up, const double *down, double *y)
{
    const int64_t H = c->H, I = c->I;
    double a[64];
    assert_true(I <= 64);
    for (int64_t t = 0; t < c->T; t++)
        for (int j = 0; j < c->k; j++) {
            const int64_t r = pos[t * c->k + j], e = expert_of[r];
            for (int64_t i = 0; i < I; i++) {
                double g = 0.0, u = 0.0;
                for (int64_t h = 0; h < H; h++)
                    g += x[t * H + h] * gate[(e * I + i) * H + h], u += x[t * H + h] * up[(e * I + i) * H + h];
                a[i] = g / (1.0 + exp(-g)) * u;
            }
            for (int64_t h = 0; h < H; h++) {
                double v = 0.0;
                for (int64_t i = 0; i < I; i++)
                    v += a[i] * down[(e * H + h) * I + i];
                y[r * H + h] = v;
            }
        }
}

/* The gradients, independently of the reference, on small F32 problems: L = sum(dy * y) with y the
 * experts in double (experts_rows_y, checked against the device's expert_output first); every element of
 * gate, up, down and of the tokens' input x [T, H] moved by +-2^-18 in turn, dL/dw ~ (L+ - L-) / 2^-17.
 * Only the rows the element reaches change, and L+ - L- is summed over their y+ - y- (the others are the
 * same bits), so the difference keeps its digits: truncation h^2 / 6 |L'''| ~ 1e-12 |L'''|, cancellation
 * ~1e-16 |y| I / h ~ 1e-10; allowed 1e-8 (1 + mag). The device's gradients (grad_gate, grad_up, grad_down;
 * dispatch_backward(grad_rows) for x) must match within their experts tolerance plus that; so must the
 * reference's (its backward against its own derivation's true derivative; grad_down with its a bracket). */
static void test_experts_gradients(void **state)
{
    (void)state;
    if (experts_skip[0]) {
        printf("  experts_gradients: SKIPPED (%s)\n", experts_skip);
        skip();
    }
    rt_log_t *log = rt_log_new();
    static const xcase_t cases[] = {
        {3, 4, 5, 3, 2, 0}, {5, 8, 7, 4, 2, 1}, {2, 1, 3, 2, 1, 0}, {4, 16, 6, 5, 3, 0}, {6, 4, 16, 9, 2, 1},
        {3, 2, 4, 3, 1, 2},
    };
    double worst_dev = 0.0, worst_ref = 0.0, worst_y = 0.0;
    int checked = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const xcase_t *c = &cases[ci];
        char label[192];
        xcase_label(c, RUDNN_F32, label, sizeof label);
        rt_rng_t rng;
        rt_rng_seed_case(&rng, label, (int)ci);
        const rcase_t rc = {c->T, c->E, c->H, c->k, RUDNN_F32, (int)ci % 2, 0};
        const int64_t T = c->T, E = c->E, H = c->H, I = c->I, R = c->T * c->k;
        const int k = c->k;
        routed_t r;
        xweights_t w;
        memset(&w, 0, sizeof w);
        uint32_t *offsets = rt_xmalloc(sizeof(uint32_t) * (size_t)(E + 1));
        rudnn_tensor_t voff;
        if (!routed_make(log, label, &rc, RUDNN_F32, &rng, &r) || !read_offsets(log, label, &r, E, offsets, &voff) ||
            !xweights_make(log, label, c, RUDNN_F32, &rng, ci % 3, &w)) {
            free(offsets), routed_free(&r), xweights_free(&w);
            log->failures++;
            continue;
        }
        const size_t nrh = (size_t)(R * H), nw = (size_t)(E * I * H), nt = (size_t)(T * H);
        int64_t *expert_of = rt_xmalloc(sizeof(int64_t) * (size_t)R);
        for (int64_t e = 0; e < E; e++)
            for (int64_t row = offsets[e]; row < (int64_t)offsets[e + 1] && row < R; row++)
                expert_of[row] = e;
        /* the dispatched rows are the tokens' (bit for bit): the host forward builds them from x */
        for (int64_t t = 0; t < T; t++)
            for (int j = 0; j < k; j++)
                if (memcmp(r.tok + (int64_t)r.pos[t * k + j] * H, r.x + t * H, sizeof(float) * (size_t)H) != 0) {
                    rt_logf(log, "  %s: dispatched row %u is not token %lld's input\n", label, r.pos[t * k + j],
                            (long long)t);
                    log->failures++;
                }
        float *dy = rt_xmalloc(sizeof(float) * nrh), *eo = rt_xmalloc(sizeof(float) * nrh);
        float *gi = rt_xmalloc(sizeof(float) * nt);
        float *gg = rt_xmalloc(sizeof(float) * nw), *gu = rt_xmalloc(sizeof(float) * nw);
        float *gd = rt_xmalloc(sizeof(float) * nw);
        rt_fill_uniform(&rng, dy, nrh, -1.0, 1.0);
        const int64_t drh[2] = {R, H}, dres[2] = {R, 2 * I}, dgu[3] = {E, I, H}, dd[3] = {E, H, I}, dtok[2] = {T, H};
        rt_tensor_t RES, EO, GEO, GR, GG, GU, GD, GI;
        rt_tensor_create(&RES, RUDNN_F32, 2, dres, 0, RT_TAIL_BYTES);
        rt_tensor_create(&EO, RUDNN_F32, 2, drh, 1, RT_TAIL_BYTES);
        rt_tensor_create(&GEO, RUDNN_F32, 2, drh, 2, RT_TAIL_BYTES);
        rt_tensor_create(&GR, RUDNN_F32, 2, drh, 0, RT_TAIL_BYTES);
        rt_tensor_create(&GG, RUDNN_F32, 3, dgu, 1, RT_TAIL_BYTES);
        rt_tensor_create(&GU, RUDNN_F32, 3, dgu, 2, RT_TAIL_BYTES);
        rt_tensor_create(&GD, RUDNN_F32, 3, dd, 0, RT_TAIL_BYTES);
        rt_tensor_create(&GI, RUDNN_F32, 2, dtok, 1, RT_TAIL_BYTES);
        rt_tensor_upload(&GEO, dy);
        rt_assert_status(rudnn_swiglu_experts_forward_dispatched_training(rt_queue, w.ex, r.disp, RUDNN_MOE_SCALAR,
                                                                          NULL, 0, &RES.t, &EO.t),
                         RUDNN_STATUS_SUCCESS);
        rt_assert_status(rudnn_swiglu_experts_backward(rt_queue, w.ex, r.disp, &RES.t, &GEO.t, RUDNN_MOE_SCALAR, NULL,
                                                       0, &GR.t, &GG.t, &GU.t, &GD.t),
                         RUDNN_STATUS_SUCCESS);
        rt_assert_status(rudnn_moe_dispatch_backward(rt_queue, r.disp, &GR.t, &GI.t), RUDNN_STATUS_SUCCESS);
        rt_tensor_download(&EO, eo), rt_tensor_download(&GI, gi);
        rt_tensor_download(&GG, gg), rt_tensor_download(&GU, gu), rt_tensor_download(&GD, gd);

        /* the reference: the tolerances' magnitudes, and its own gradients checked too */
        const mt_ref_experts_t p = {R, E, H, I, r.tok, offsets, w.gate, w.up, w.down};
        mt_ref_experts_fwd_t f;
        mt_ref_experts_bwd_t b;
        mt_ref_experts_alloc(&p, &f, &b);
        const xtol_t tol = experts_tolerances(c);
        assert_int_equal(mt_ref_experts_forward(RUDNN_F32, &p, tol.act, &f), 0);
        assert_int_equal(mt_ref_experts_backward(&p, &f, dy, &b), 0);

        double *x = rt_xmalloc(sizeof(double) * nt), *gate = rt_xmalloc(sizeof(double) * nw);
        double *up = rt_xmalloc(sizeof(double) * nw), *down = rt_xmalloc(sizeof(double) * nw);
        double *y0 = rt_xmalloc(sizeof(double) * nrh), *yp = rt_xmalloc(sizeof(double) * nrh);
        double *ym = rt_xmalloc(sizeof(double) * nrh);
        for (size_t i = 0; i < nt; i++)
            x[i] = r.x[i];
        for (size_t i = 0; i < nw; i++)
            gate[i] = w.gate[i], up[i] = w.up[i], down[i] = w.down[i];

        /* the host forward is the device's (its a unrounded: within the reference's y bracket, twice) */
        experts_rows_y(c, r.pos, expert_of, x, gate, up, down, y0);
        for (size_t i = 0; i < nrh; i++) {
            const double allowed = 2.0 * (f.y_rad[i] + tol.a[X_Y] * (f.y_mag[i] + f.y_rad[i])) + UNDERFLOW;
            worst_y = fmax(worst_y, fabs(eo[i] - y0[i]) / allowed);
            if (!(fabs(eo[i] - y0[i]) <= allowed)) {
                rt_logf(log, "  %s: expert_output[%zu] = %.9g, the double forward %.12g (allowed %.3g)\n", label, i,
                        eo[i], y0[i], allowed);
                log->failures++;
                break;
            }
        }

        /* d L / d v for every element v of the four arrays; dev and ref the two gradients, mag and rad the
         * reference's allowances, a the device's */
        const double step = 0x1p-18;
        double *arrays[4] = {gate, up, down, x};
        const float *devs[4] = {gg, gu, gd, gi};
        const double *refs[4] = {b.grad_gate, b.grad_up, b.grad_down, NULL};
        const double *mags[4] = {b.grad_gate_mag, b.grad_up_mag, b.grad_down_mag, NULL};
        const double as[4] = {tol.a[X_GG], tol.a[X_GU], tol.a[X_GD], tol.a[X_GR] + gamma_n(k)};
        static const char *const names[4] = {"grad_gate", "grad_up", "grad_down", "grad_input"};
        for (int arr = 0; arr < 4; arr++) {
            const size_t n = arr == 3 ? nt : nw;
            for (size_t i = 0; i < n; i++) {
                double ref, mag, rad = 0.0;
                if (arr == 3) { /* the token's rows summed: dispatch_backward of grad_rows */
                    const int64_t t = (int64_t)i / H, h = (int64_t)i % H;
                    ref = mag = 0.0;
                    for (int j = 0; j < k; j++) {
                        const int64_t row = r.pos[t * k + j];
                        ref += b.grad_rows[row * H + h], mag += b.grad_rows_mag[row * H + h];
                    }
                } else {
                    ref = refs[arr][i], mag = mags[arr][i], rad = arr == 2 ? b.grad_down_rad[i] : 0.0;
                }
                const double keep = arrays[arr][i];
                arrays[arr][i] = keep + step;
                experts_rows_y(c, r.pos, expert_of, x, gate, up, down, yp);
                arrays[arr][i] = keep - step;
                experts_rows_y(c, r.pos, expert_of, x, gate, up, down, ym);
                arrays[arr][i] = keep;
                double diff = 0.0;
                for (size_t q = 0; q < nrh; q++) /* exactly 0 for the rows v does not reach */
                    diff += dy[q] * (yp[q] - ym[q]);
                const double num = diff / (2.0 * step), fd = 1e-8 * (1.0 + mag);
                const double dev = devs[arr][i], dev_allowed = as[arr] * (mag + rad) + rad + fd + UNDERFLOW;
                const double ref_allowed = rad + fd;
                worst_dev = fmax(worst_dev, fabs(dev - num) / dev_allowed);
                worst_ref = fmax(worst_ref, fabs(ref - num) / ref_allowed);
                checked++;
                if (!(fabs(dev - num) <= dev_allowed)) {
                    rt_logf(log, "  %s: %s[%zu] = %.9g, central difference %.9g (allowed %.3g)\n", label, names[arr],
                            i, dev, num, dev_allowed);
                    log->failures++;
                }
                if (!(fabs(ref - num) <= ref_allowed)) {
                    rt_logf(log, "  %s: the reference's %s[%zu] = %.12g, central difference %.12g (allowed %.3g)\n",
                            label, names[arr], i, ref, num, ref_allowed);
                    log->failures++;
                }
            }
        }

        mt_ref_experts_free(&f, &b);
        free(x), free(gate), free(up), free(down), free(y0), free(yp), free(ym);
        free(dy), free(eo), free(gi), free(gg), free(gu), free(gd), free(expert_of), free(offsets);
        rt_tensor_t *all[] = {&RES, &EO, &GEO, &GR, &GG, &GU, &GD, &GI};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            rt_tensor_destroy(all[i]);
        xweights_free(&w);
        routed_free(&r);
    }
    printf("  experts_gradients: %d derivative(s) against central differences; largest error as a fraction of "
           "its allowance: device %.3g, reference %.3g (expert_output against the double forward %.3g)\n",
           checked, worst_dev, worst_ref, worst_y);
    fflush(stdout);
    rt_log_finish_free(log, "check(s)");
}

/* ==== the router training plan ================================================================== */

/* One training plan problem: logits [T, E] of the test's dtype routed k a token, then into_training on
 * the same logits with options (scoring, renormalize, scale); rows of rdt [T, H] dispatched with the
 * training plan's routing plan and combined. */
typedef struct pcase {
    int64_t T, E, H;
    int k;
    int sigmoid, renorm;
    float scale;
    int grouped; /* rudnn_moe_route_sigmoid_grouped (4 groups, 2 selected, a bias, the options' renormalize
                  * and scale), else rudnn_moe_route (the options' renormalize) */
    rudnn_dtype_t rdt;
} pcase_t;

/* The largest error of each comparison, absolute and as a fraction of its allowance. */
typedef struct pstats {
    int cases, matched;
    double w_err, w_ratio, g_err, g_ratio, c_err, c_ratio, p_err, p_ratio;
} pstats_t;

static void pcase_label(const pcase_t *c, rudnn_dtype_t dt, char *label, size_t cap)
{
    snprintf(label, cap, "training plan %s T=%lld E=%lld k=%d, %s%s scale %g, routed by %s, rows %s H=%lld",
             rudnn_dtype_name(dt), (long long)c->T, (long long)c->E, c->k, c->sigmoid ? "sigmoid" : "softmax",
             c->renorm ? " renormalized" : "", (double)c->scale, c->grouped ? "sigmoid grouped" : "moe_route",
             rudnn_dtype_name(c->rdt), (long long)c->H);
}

/* The bytes of a view (rt_xmalloc'ed, 1 byte for an empty one); *ok = 0 when reading failed. */
static uint8_t *view_bytes(rt_log_t *log, const char *label, const char *what, const rudnn_tensor_t *v, int *ok)
{
    uint8_t *raw = rt_xmalloc(rudnn_tensor_bytes(v) + 1);
    if (!read_tensor(log, label, what, v, raw))
        *ok = 0;
    return raw;
}

/* 1 when a and b (bytes long, elements of dt) are equal; logs the first differing element. */
static int same_raw(rt_log_t *log, const char *label, const char *what, rudnn_dtype_t dt, const uint8_t *a,
                    const uint8_t *b, size_t bytes)
{
    const size_t es = rudnn_dtype_size(dt);
    size_t i = 0;
    while (i < bytes && a[i] == b[i])
        i++;
    if (i == bytes)
        return 1;
    rt_logf(log, "  %s: %s: element %zu differs (0x%x vs 0x%x)\n", label, what, i / es,
            (unsigned)rt_element_bits(dt, a, i / es), (unsigned)rt_element_bits(dt, b, i / es));
    return 0;
}

/* 1 when the view v still holds the bytes want (its dtype's elements). */
static int view_holds(rt_log_t *log, const char *label, const char *what, const rudnn_tensor_t *v,
                      const uint8_t *want)
{
    int ok = 1;
    uint8_t *now = view_bytes(log, label, what, v, &ok);
    ok = ok && same_raw(log, label, what, v->dtype, now, want, rudnn_tensor_bytes(v));
    free(now);
    return ok;
}

/* 1 when two dispatched objects hold the same positions, offsets, counts and rows, byte for byte. */
static int same_dispatch(rt_log_t *log, const char *label, const char *what, rudnn_dispatched_t a,
                         rudnn_dispatched_t b)
{
    typedef rudnn_status_t (*view_fn)(rudnn_dispatched_t, rudnn_tensor_t *);
    static const view_fn fns[4] = {rudnn_dispatched_positions, rudnn_dispatched_offsets, rudnn_dispatched_counts,
                                   rudnn_dispatched_tokens};
    static const char *const names[4] = {"positions", "offsets", "counts", "rows"};
    int ok = 1;
    for (int i = 0; i < 4 && ok; i++) {
        char w[160];
        snprintf(w, sizeof w, "%s: %s", what, names[i]);
        rudnn_tensor_t va, vb;
        if (!check_ok(log, label, w, fns[i](a, &va), 0) || !check_ok(log, label, w, fns[i](b, &vb), 0))
            return 0;
        const size_t bytes = rudnn_tensor_bytes(&va);
        if (bytes != rudnn_tensor_bytes(&vb) || va.dtype != vb.dtype) {
            rt_logf(log, "  %s: %s: %zu bytes of %s vs %zu of %s\n", label, w, bytes, rudnn_dtype_name(va.dtype),
                    rudnn_tensor_bytes(&vb), rudnn_dtype_name(vb.dtype));
            return 0;
        }
        uint8_t *ra = view_bytes(log, label, w, &va, &ok), *rb = view_bytes(log, label, w, &vb, &ok);
        ok = ok && same_raw(log, label, w, va.dtype, ra, rb, bytes);
        free(ra), free(rb);
    }
    return ok;
}

/* The live-object count is what it should be; logs otherwise. */
static int live_is(rt_log_t *log, const char *label, const char *when, uint64_t want)
{
    const uint64_t now = rudnn_debug_live_objects();
    if (now == want)
        return 1;
    rt_logf(log, "  %s: %s: rudnn_debug_live_objects() = %llu, expected %llu\n", label, when,
            (unsigned long long)now, (unsigned long long)want);
    return 0;
}

/* Route, into_training, and every check of the training plan (see the header). Returns the number of
 * problems. */
static int run_plan_case(rt_log_t *log, pstats_t *stats, rudnn_dtype_t dt, const pcase_t *c, int seed)
{
    char label[224];
    pcase_label(c, dt, label, sizeof label);
    rt_rng_t rng;
    rt_rng_seed_case(&rng, label, seed);
    const int64_t T = c->T, E = c->E, H = c->H, pairs = c->T * c->k;
    const int k = c->k;
    const size_t nl = (size_t)(T * E), nk = (size_t)pairs, nx = (size_t)(T * H), nr = (size_t)(pairs * H);
    const uint64_t live0 = rudnn_debug_live_objects();
    int problems = 0;

    float *x = rt_xmalloc(sizeof(float) * (nl + 1)), *gw = rt_xmalloc(sizeof(float) * (nk + 1));
    float *xin = rt_xmalloc(sizeof(float) * (nx + 1)), *eo = rt_xmalloc(sizeof(float) * (nr + 1));
    rt_fill_uniform(&rng, x, nl, -8.0, 8.0);
    ref_quantize(dt, x, x, nl); /* the values the device holds */
    rt_fill_uniform(&rng, gw, nk, -1.0, 1.0);
    rt_fill_uniform(&rng, xin, nx, -2.0, 2.0);
    ref_quantize(c->rdt, xin, xin, nx);
    rt_fill_uniform(&rng, eo, nr, -2.0, 2.0);
    ref_quantize(c->rdt, eo, eo, nr);

    /* small element offsets: the tensors need not start aligned */
    const size_t off = (size_t)(seed % 3);
    const int64_t dl[2] = {T, E}, dk[2] = {T, k}, dx[2] = {T, H}, dr[2] = {pairs, H}, db[1] = {E};
    rt_tensor_t L, B, W, G, GL[3], X, EO, OUT[2];
    memset(&B, 0, sizeof B);
    rt_tensor_create(&L, dt, 2, dl, off, RT_TAIL_BYTES);
    rt_tensor_create(&W, RUDNN_F32, 2, dk, 2 - off, RT_TAIL_BYTES);
    rt_tensor_create(&G, RUDNN_F32, 2, dk, off + 1, RT_TAIL_BYTES);
    for (int i = 0; i < 3; i++)
        rt_tensor_create(&GL[i], dt, 2, dl, (off + (size_t)i) % 3, RT_TAIL_BYTES);
    rt_tensor_create(&X, c->rdt, 2, dx, 1, RT_TAIL_BYTES);
    rt_tensor_create(&EO, c->rdt, 2, dr, 2 - off, RT_TAIL_BYTES);
    rt_tensor_create(&OUT[0], c->rdt, 2, dx, off, RT_TAIL_BYTES);
    rt_tensor_create(&OUT[1], c->rdt, 2, dx, 1, RT_TAIL_BYTES);
    rt_tensor_upload(&L, x), rt_tensor_upload(&G, gw), rt_tensor_upload(&X, xin), rt_tensor_upload(&EO, eo);

    rudnn_routing_plan_t plan = NULL, routing = NULL, again = NULL;
    rudnn_router_training_plan_t training = NULL;
    rudnn_dispatched_t d_plan = NULL, d_train = NULL, d_after = NULL;
    rt_guard_t inputs, kept;
    memset(&inputs, 0, sizeof inputs);
    memset(&kept, 0, sizeof kept);
    uint8_t *plan_idx = NULL, *plan_w = NULL, *r_idx = NULL, *r_w = NULL, *w_sel = NULL;
    float *w = rt_xmalloc(sizeof(float) * (nk + 1)), *g = rt_xmalloc(sizeof(float) * (nl + 1));
    float *out = rt_xmalloc(sizeof(float) * (nx + 1));
    int64_t *idx = rt_xmalloc(sizeof(int64_t) * (nk + 1));
    uint32_t *pos = rt_xmalloc(sizeof(uint32_t) * (nk + 1));
    const rudnn_router_weight_options_t o = {c->sigmoid ? RUDNN_ROUTER_SIGMOID : RUDNN_ROUTER_SOFTMAX, c->renorm,
                                             c->scale};
    const mt_ref_options_t ro = {c->sigmoid, c->renorm, (double)c->scale};
    const double a = 1e-5 + (double)(E + k) * 0x1p-24; /* tol_arith */
    int ok = 1;

    /* 1. the plan, routed from the logits */
    rudnn_status_t st;
    if (c->grouped) {
        float bias[64];
        rt_fill_uniform(&rng, bias, (size_t)E, -0.5, 0.5);
        rt_tensor_create(&B, RUDNN_F32, 1, db, 1, RT_TAIL_BYTES);
        rt_tensor_upload(&B, bias);
        const rudnn_grouped_routing_options_t go = {k, 4, 2, E >= 8, c->renorm, c->scale};
        st = rudnn_moe_route_sigmoid_grouped(rt_queue, &L.t, &B.t, &go, &plan);
    } else {
        const rudnn_routing_options_t go = {k, c->renorm};
        st = rudnn_moe_route(rt_queue, &L.t, &go, &plan);
    }
    rudnn_tensor_t pi, pw, ri, rw;
    if (!check_ok(log, label, "moe_route", st, 0) ||
        !check_ok(log, label, "routing_plan_indices", rudnn_routing_plan_indices(plan, &pi), 0) ||
        !check_ok(log, label, "routing_plan_weights", rudnn_routing_plan_weights(plan, &pw), 0) ||
        !check_view(log, label, "the plan's indices", &pi, RUDNN_U32, T, k) ||
        !check_view(log, label, "the plan's weights", &pw, dt, T, k)) {
        problems++;
        goto done;
    }
    plan_idx = view_bytes(log, label, "the plan's indices", &pi, &ok);
    plan_w = view_bytes(log, label, "the plan's weights", &pw, &ok);
    if (!ok) {
        problems++;
        goto done;
    }
    for (size_t i = 0; i < nk; i++) {
        uint32_t v;
        memcpy(&v, plan_idx + 4 * i, 4);
        idx[i] = v;
    }
    rt_guard_track(&inputs, rt_queue, &L, "logits");
    rt_guard_track(&inputs, rt_queue, &G, "grad_weights");
    rt_guard_track(&inputs, rt_queue, &X, "input rows");
    rt_guard_track(&inputs, rt_queue, &EO, "expert_output");
    if (c->grouped)
        rt_guard_track(&inputs, rt_queue, &B, "bias");
    if (nk) /* one block: the indices, then the weights */
        rt_guard_track_buffer(&inputs, rt_queue, pi.buffer,
                              pw.offset + rudnn_tensor_bytes(&pw) > pi.offset + rudnn_tensor_bytes(&pi)
                                  ? pw.offset + rudnn_tensor_bytes(&pw)
                                  : pi.offset + rudnn_tensor_bytes(&pi),
                              "the original plan's indices and weights");
    rt_guard_begin(&inputs);

    /* 2. the training plan and its routing plan: the plan's indices, the weights of
     * selected_router_weights (bit for bit), near the reference */
    st = rudnn_routing_plan_into_training(rt_queue, plan, &L.t, &o, &training);
    if (!check_ok(log, label, "routing_plan_into_training", st, T > 0)) {
        problems++;
        goto done;
    }
    if (!check_ok(log, label, "router_training_plan_routing", rudnn_router_training_plan_routing(training, &routing),
                  0)) {
        problems++;
        goto done;
    }
    /* a second reference, released at once: the first stays valid */
    if (!check_ok(log, label, "router_training_plan_routing (again)",
                  rudnn_router_training_plan_routing(training, &again), 0))
        problems++;
    else if (again != routing) {
        rt_logf(log, "  %s: router_training_plan_routing gave two different plans\n", label);
        problems++;
    }
    rudnn_routing_plan_destroy(again);
    if (routing == plan) {
        rt_logf(log, "  %s: the training plan's routing plan is the original plan\n", label);
        problems++;
    }
    if (!check_ok(log, label, "routing_plan_indices (training)", rudnn_routing_plan_indices(routing, &ri), 0) ||
        !check_ok(log, label, "routing_plan_weights (training)", rudnn_routing_plan_weights(routing, &rw), 0) ||
        !check_view(log, label, "the training plan's indices", &ri, RUDNN_U32, T, k) ||
        !check_view(log, label, "the training plan's weights", &rw, RUDNN_F32, T, k)) {
        problems++;
        goto done;
    }
    r_idx = view_bytes(log, label, "the training plan's indices", &ri, &ok);
    r_w = view_bytes(log, label, "the training plan's weights", &rw, &ok);
    if (!ok) {
        problems++;
        goto done;
    }
    if (nk)
        rt_guard_track_buffer(&kept, rt_queue, ri.buffer,
                              rw.offset + rudnn_tensor_bytes(&rw) > ri.offset + rudnn_tensor_bytes(&ri)
                                  ? rw.offset + rudnn_tensor_bytes(&rw)
                                  : ri.offset + rudnn_tensor_bytes(&ri),
                              "the training plan's indices and weights");
    rt_guard_begin(&kept);
    problems += !same_raw(log, label, "the training plan's indices against the plan's", RUDNN_U32, r_idx, plan_idx,
                          4 * nk);
    {
        rt_out_watch_t ww;
        rt_out_watch_begin(&ww, &W);
        st = rudnn_moe_selected_router_weights(rt_queue, &L.t, &pi, &o, &W.t);
        const int ok_w = check_ok(log, label, "selected_router_weights", st, T > 0);
        problems += !ok_w;
        problems += !rt_out_watch_end(&ww, T > 0 && ok_w, NULL, log, label, "selected_router_weights");
        w_sel = raw_of(&W);
        if (ok_w)
            problems += !same_raw(log, label, "the training plan's weights against selected_router_weights",
                                  RUDNN_F32, r_w, w_sel, 4 * nk);
    }
    rt_decode(RUDNN_F32, r_w, w, nk);
    {
        double *rwt = rt_xmalloc(sizeof(double) * (nk + 1)), *mw = rt_xmalloc(sizeof(double) * (nk + 1));
        double *rg = rt_xmalloc(sizeof(double) * (nl + 1)), *mg = rt_xmalloc(sizeof(double) * (nl + 1));
        uint8_t *nan_rows = rt_xcalloc((size_t)T + 1, 1), *zero = rt_xcalloc(nl + 1, 1);
        assert_int_equal(mt_ref_weights(x, T, E, idx, k, &ro, rwt, mw, nan_rows), 0);
        for (int64_t t = 0; t < T; t++)
            if (nan_rows[t]) {
                rt_logf(log, "  %s: the plan's row %lld holds an index outside [0, %lld)\n", label, (long long)t,
                        (long long)E);
                problems++;
                goto ref_done;
            }
        problems += compare(log, label, "the training plan's weights", w, rwt, mw, nan_rows, NULL, T, k, a, 0.0, 0.0,
                            &stats->w_err, &stats->w_ratio) != 0;
        /* options that are the routing's own: the plan's weights (rounded to the logits dtype) agree */
        if (c->grouped ? c->sigmoid : !c->sigmoid && c->scale == 1.0f) {
            float *pwf = rt_xmalloc(sizeof(float) * (nk + 1));
            rt_decode(dt, plan_w, pwf, nk);
            for (size_t i = 0; i < nk; i++)
                rwt[i] = w[i], mw[i] = fabs(w[i]);
            problems += compare(log, label, "the plan's own weights against the training plan's", pwf, rwt, mw,
                                nan_rows, NULL, T, k, a, round_unit(dt), round_abs(dt), &stats->p_err,
                                &stats->p_ratio) != 0;
            stats->matched++;
            free(pwf);
        }

        /* 3. backward: selected_router_backward's bytes, every element written, near the reference */
        rt_out_watch_t wg[2];
        rt_out_watch_begin(&wg[0], &GL[0]);
        rt_out_watch_begin(&wg[1], &GL[1]);
        st = rudnn_router_training_plan_backward(rt_queue, training, &G.t, &GL[0].t);
        const int ok_t = check_ok(log, label, "router_training_plan_backward", st, T > 0);
        st = rudnn_moe_selected_router_backward(rt_queue, &L.t, &pi, &G.t, &o, &GL[1].t);
        const int ok_s = check_ok(log, label, "selected_router_backward", st, T > 0);
        problems += !ok_t + !ok_s;
        problems += !rt_out_watch_end(&wg[0], T > 0 && ok_t, g, log, label, "router_training_plan_backward");
        problems += !rt_out_watch_end(&wg[1], T > 0 && ok_s, NULL, log, label, "selected_router_backward");
        if (ok_t && ok_s)
            problems += !same_bytes(log, label, "router_training_plan_backward against selected_router_backward",
                                    &GL[0], &GL[1]);
        if (ok_t) {
            assert_int_equal(mt_ref_backward(x, T, E, idx, k, gw, &ro, rg, mg, NULL), 0);
            if (c->sigmoid || c->renorm)
                for (int64_t t = 0; t < T; t++) {
                    memset(zero + t * E, 1, (size_t)E);
                    for (int j = 0; j < k; j++)
                        zero[t * E + idx[t * k + j]] = 0;
                }
            problems += compare(log, label, "grad_logits", g, rg, mg, nan_rows, zero, T, E, a, round_unit(dt),
                                round_abs(dt), &stats->g_err, &stats->g_ratio) != 0;
        }
    ref_done:
        free(rwt), free(mw), free(rg), free(mg), free(nan_rows), free(zero);
    }

    /* 4. the original plan unchanged and usable; the training routing dispatches as it does, and combines
     * with the F32 training weights */
    if (!check_ok(log, label, "moe_dispatch (training routing)", rudnn_moe_dispatch(rt_queue, routing, &X.t, &d_train),
                  0) ||
        !check_ok(log, label, "moe_dispatch (original plan)", rudnn_moe_dispatch(rt_queue, plan, &X.t, &d_plan), 0)) {
        problems++;
        goto done;
    }
    problems += !same_dispatch(log, label, "the training routing's dispatch against the plan's", d_train, d_plan);
    {
        rudnn_tensor_t vpos;
        int okp = check_ok(log, label, "dispatched_positions", rudnn_dispatched_positions(d_train, &vpos), 0) &&
                  read_tensor(log, label, "positions", &vpos, pos);
        for (size_t i = 0; i < nk && okp; i++)
            if ((int64_t)pos[i] >= pairs) {
                rt_logf(log, "  %s: positions[%zu] = %u, expected < %lld\n", label, i, pos[i], (long long)pairs);
                okp = 0;
            }
        rt_out_watch_t wo;
        rt_out_watch_begin(&wo, &OUT[0]);
        st = rudnn_moe_combine(rt_queue, d_train, &EO.t, &OUT[0].t);
        const int ok_c = check_ok(log, label, "moe_combine (training routing)", st, 0);
        problems += !okp + !ok_c;
        problems += !rt_out_watch_end(&wo, T > 0 && ok_c, out, log, label, "moe_combine (training routing)");
        if (okp && ok_c) {
            double *ref = rt_xmalloc(sizeof(double) * (nx + 1)), *mag = rt_xmalloc(sizeof(double) * (nx + 1));
            for (int64_t t = 0; t < T; t++)
                for (int64_t h = 0; h < H; h++) {
                    double s = 0.0, m = 0.0;
                    for (int j = 0; j < k; j++) {
                        const double v = (double)w[t * k + j] * eo[(int64_t)pos[t * k + j] * H + h];
                        s += v, m += fabs(v);
                    }
                    ref[t * H + h] = s, mag[t * H + h] = m;
                }
            /* k FP32 products summed in FP32, rounded once to the rows dtype */
            problems += compare_rows(log, label, "moe_combine with the training routing", out, ref, mag, T, H,
                                     gamma_n(k), round_unit(c->rdt), round_abs(c->rdt), &stats->c_err,
                                     &stats->c_ratio);
            free(ref), free(mag);
        }
    }
    problems += !view_holds(log, label, "the original plan's indices", &pi, plan_idx);
    problems += !view_holds(log, label, "the original plan's weights", &pw, plan_w);
    if (rt_guard_changed(&inputs) + rt_guard_changed(&kept)) {
        rt_guard_t *gs[2] = {&inputs, &kept};
        for (int gi = 0; gi < 2; gi++)
            for (int i = 0; i < gs[gi]->count; i++)
                if (gs[gi]->items[i].changed)
                    rt_logf(log, "  %s: the %s buffer was modified (it is only read)\n", label,
                            gs[gi]->items[i].name);
        problems++;
    }
    rt_guard_free(&inputs);

    /* 5. lifetimes: the original plan and the logits' buffer handle go first; the training plan holds
     * the logits' buffer (still a live object) and its backward gives the same bytes */
    rudnn_dispatched_destroy(d_plan), d_plan = NULL;
    rudnn_routing_plan_destroy(plan), plan = NULL;
    {
        const uint64_t live_a = rudnn_debug_live_objects();
        rt_tensor_destroy(&L); /* rudnn_buffer_destroy of the logits' buffer */
        problems += !live_is(log, label, "the logits' buffer destroyed while the training plan holds it", live_a);
        rt_out_watch_t wg;
        rt_out_watch_begin(&wg, &GL[2]);
        st = rudnn_router_training_plan_backward(rt_queue, training, &G.t, &GL[2].t);
        const int ok_b = check_ok(log, label, "router_training_plan_backward (plan and logits handle destroyed)", st,
                                  T > 0);
        problems += !ok_b;
        problems += !rt_out_watch_end(&wg, T > 0 && ok_b, NULL, log, label,
                                      "router_training_plan_backward (plan and logits handle destroyed)");
        if (ok_b)
            problems += !same_bytes(log, label, "router_training_plan_backward after the destroys", &GL[0], &GL[2]);
    }
    /* the training plan before the routing plan it handed out: that one (and dispatch and combine) stays */
    {
        const uint64_t live_b = rudnn_debug_live_objects();
        rudnn_router_training_plan_destroy(training), training = NULL;
        problems += !live_is(log, label, "the training plan destroyed (it and the logits' buffer go)", live_b - 2);
    }
    problems += !view_holds(log, label, "the training plan's indices (training plan destroyed)", &ri, r_idx);
    problems += !view_holds(log, label, "the training plan's weights (training plan destroyed)", &rw, r_w);
    if (!check_ok(log, label, "moe_dispatch (training plan destroyed)",
                  rudnn_moe_dispatch(rt_queue, routing, &X.t, &d_after), 0)) {
        problems++;
        goto done;
    }
    problems += !same_dispatch(log, label, "dispatch after the training plan's destroy", d_after, d_train);
    {
        rt_out_watch_t wo;
        rt_out_watch_begin(&wo, &OUT[1]);
        st = rudnn_moe_combine(rt_queue, d_after, &EO.t, &OUT[1].t);
        const int ok_c = check_ok(log, label, "moe_combine (training plan destroyed)", st, 0);
        problems += !ok_c;
        problems += !rt_out_watch_end(&wo, T > 0 && ok_c, NULL, log, label, "moe_combine (training plan destroyed)");
        if (ok_c)
            problems += !same_bytes(log, label, "moe_combine after the training plan's destroy", &OUT[0], &OUT[1]);
    }

done:
    rudnn_router_training_plan_destroy(training);
    rudnn_dispatched_destroy(d_after), rudnn_dispatched_destroy(d_train), rudnn_dispatched_destroy(d_plan);
    rudnn_routing_plan_destroy(routing);
    rudnn_routing_plan_destroy(plan);
    rt_guard_free(&inputs), rt_guard_free(&kept);
    rt_tensor_destroy(&L), rt_tensor_destroy(&B), rt_tensor_destroy(&W), rt_tensor_destroy(&G);
    for (int i = 0; i < 3; i++)
        rt_tensor_destroy(&GL[i]);
    rt_tensor_destroy(&X), rt_tensor_destroy(&EO), rt_tensor_destroy(&OUT[0]), rt_tensor_destroy(&OUT[1]);
    rudnn_queue_synchronize(rt_queue);
    problems += !live_is(log, label, "everything destroyed", live0);
    free(x), free(gw), free(xin), free(eo), free(w), free(g), free(out), free(idx), free(pos);
    free(plan_idx), free(plan_w), free(r_idx), free(r_w), free(w_sel);
    stats->cases++;
    return problems;
}

static const int64_t plan_ek[][2] = {{4, 1}, {4, 2}, {16, 1}, {16, 2}, {16, 8}, {64, 1}, {64, 2}, {64, 8}};

/* T in {0, 1, 7, 33} x (E, k) x the four scorings; the scale, the router (moe_route or grouped sigmoid),
 * the rows dtype and H cycle along the loops. */
static void test_training_plan(void **state)
{
    const param_t *p = *state;
    rt_log_t *log = rt_log_new();
    pstats_t stats = {0};
    static const int64_t Ts[4] = {0, 1, 7, 33}, Hs[3] = {1, 5, 33};
    int seed = 0;
    for (int ti = 0; ti < 4; ti++)
        for (int ek = 0; ek < (int)(sizeof plan_ek / sizeof plan_ek[0]); ek++)
            for (int combo = 0; combo < 4; combo++) {
                pcase_t c = {0};
                c.T = Ts[ti], c.E = plan_ek[ek][0], c.k = (int)plan_ek[ek][1];
                c.sigmoid = combo >> 1, c.renorm = combo & 1;
                c.scale = (ti + ek + combo) % 2 ? 2.5f : 1.0f;
                c.grouped = (ti + 2 * ek + combo) % 4 == 1;
                c.rdt = dtypes[(ti + ek + combo) % 3];
                c.H = Hs[(ti + combo) % 3];
                log->failures += run_plan_case(log, &stats, p->dtype, &c, seed++) != 0;
            }
    printf("  training_plan %s: %d case(s), %d with the routing's own options; largest error (fraction of its "
           "tolerance): weights %.3g (%.3g), grad_logits %.3g (%.3g), combine %.3g (%.3g), the plan's weights "
           "%.3g (%.3g)\n",
           rudnn_dtype_name(p->dtype), stats.cases, stats.matched, stats.w_err, stats.w_ratio, stats.g_err,
           stats.g_ratio, stats.c_err, stats.c_ratio, stats.p_err, stats.p_ratio);
    fflush(stdout);
    rt_log_finish_free(log, "case(s)");
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

/* forward_dispatched_training on a one-row problem (E = H = I = 1, F32); *why gets the message of a
 * NOT_SUPPORTED answer. */
static rudnn_status_t probe_experts(char *why, size_t cap)
{
    rudnn_buffer_t b = NULL;
    rudnn_status_t st = rudnn_buffer_create(rt_ctx, 256, &b);
    if (st)
        return st;
    uint8_t zeros[256] = {0};
    const int64_t d11[2] = {1, 1}, d12[2] = {1, 2}, d111[3] = {1, 1, 1};
    rudnn_tensor_t l, x, g, u, d, res, eo;
    rudnn_routing_plan_t plan = NULL;
    rudnn_dispatched_t disp = NULL;
    rudnn_swiglu_experts_t ex = NULL;
    const rudnn_routing_options_t o = {1, 0};
    if (!(st = rudnn_buffer_write(rt_queue, b, 0, zeros, sizeof zeros)) &&
        !(st = rudnn_tensor_init(&l, b, 0, RUDNN_F32, 2, d11)) &&
        !(st = rudnn_tensor_init(&x, b, 16, RUDNN_F32, 2, d11)) &&
        !(st = rudnn_tensor_init(&g, b, 32, RUDNN_F32, 3, d111)) &&
        !(st = rudnn_tensor_init(&u, b, 48, RUDNN_F32, 3, d111)) &&
        !(st = rudnn_tensor_init(&d, b, 64, RUDNN_F32, 3, d111)) &&
        !(st = rudnn_tensor_init(&res, b, 80, RUDNN_F32, 2, d12)) &&
        !(st = rudnn_tensor_init(&eo, b, 96, RUDNN_F32, 2, d11)) &&
        !(st = rudnn_swiglu_experts_create(rt_ctx, &g, &u, &d, &ex)) &&
        !(st = rudnn_moe_route(rt_queue, &l, &o, &plan)) &&
        !(st = rudnn_moe_dispatch(rt_queue, plan, &x, &disp))) {
        st = rudnn_swiglu_experts_forward_dispatched_training(rt_queue, ex, disp, RUDNN_MOE_SCALAR, NULL, 0, &res, &eo);
        if (st == RUDNN_STATUS_NOT_SUPPORTED)
            snprintf(why, cap, "%s", rudnn_last_error());
    }
    rudnn_queue_synchronize(rt_queue);
    rudnn_dispatched_destroy(disp);
    rudnn_routing_plan_destroy(plan);
    rudnn_swiglu_experts_destroy(ex);
    rudnn_buffer_destroy(b);
    return st;
}

int main(int argc, char **argv)
{
    static param_t params[7][3];
    static struct CMUnitTest tests[7 * 3 + 3];
    size_t n = 0;
    static const char *const kinds[7] = {"sweep", "large", "tiny", "empty", "rows", "experts", "training_plan"};
    static const CMUnitTestFunction fns[7] = {test_sweep, test_large,   test_tiny,         test_empty,
                                              test_rows,  test_experts, test_training_plan};
    tests[n++] = (struct CMUnitTest){"reference", test_reference, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"gradients", test_gradients, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"experts_gradients", test_experts_gradients, NULL, NULL, NULL};
    for (int f = 0; f < 7; f++)
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
    } else if (probe_experts(why, sizeof why) == RUDNN_STATUS_NOT_SUPPORTED) {
        /* the router and rows ops run, the experts' training kernels are missing: skip those tests only */
        if (!on_opencl)
            snprintf(experts_skip, sizeof experts_skip, "%s", why);
        else
            printf("%s: the opencl plugin answers NOT_SUPPORTED for the experts (%s); their tests will fail\n",
                   group, why);
    }
    return rt_exit_code(_cmocka_run_group_tests(group, tests, n, NULL, rt_group_teardown));
}
