/* Numeric tests of the CTC loss (include/rudnn/ctc.h) against the FP64 reference of
 * reference/ctc_ref.c, through the public API; run once per backend (meson registers ctc-opencl,
 * -cuda, -hip with RUDNN_BACKEND set). A backend whose plugin has no CTC kernels (no table: CUDA and
 * HIP in this release) must answer NOT_SUPPORTED, naming the family, for a valid call, writing
 * nothing; the suite checks that, prints "backend <b>: SKIPPED (ctc: NOT_SUPPORTED ...)" and exits 77
 * (never a pass). On OpenCL, whose plugin has the family, NOT_SUPPORTED fails the suite instead.
 *
 * The reference itself is checked first (host only): ref/brute_force compares its loss and gradient
 * with the enumeration of all C^T alignments (T <= 5, C <= 3, ~3000 random problems and hand-worked
 * ones: target [1, 1] impossible in 2 steps, one path in 3), which shares nothing with the
 * recursions; ref/gradient compares its gradient with central differences of its loss w.r.t. the
 * activations whose log_softmax is log_probs.
 *
 * What runs, each case for F32, F16 and BF16 and for I32 and I64 targets (and, where the case says,
 * for zero_infinity 0 and 1): the loss and gradient with grad_loss given (twice: the bits must be the
 * same), with grad_loss NULL (ones), and the loss alone (grad_log_probs NULL, grad_loss passed and
 * ignored); calls alternate between a workspace of exactly the queried size and NULL (the pool).
 *   basic        per-sample input and target lengths, one target empty
 *   lengths      input_length 0 (with an empty target: loss 0), 1, shorter than T; target lengths 0..S
 *   too_short    inputs too short for the target and its repeats (input 0 with a label, 2 for 3
 *                labels, 6 for [1, 1, 1, 1] which needs 7): loss +inf, gradient NaN (0 / 0, as
 *                PyTorch); zero_infinity: 0 and 0
 *   repeats      [1, 1] in 1 and 2 steps impossible, in 3 steps one path (1, blank, 1); [1, 2] in 2
 *   blank_last   blank C - 1;  blank_mid  blank 3 of 6, repeated labels around it
 *   bad_label    labels C, the blank, -1, INT32_MAX / 2^40 + 1 (I64: truncated to 32 bits it would
 *                be the valid 1), INT_MIN: those samples' loss and gradient NaN, the others right
 *   bad_blank_last   the same with blank C - 1 (label C - 1 is bad, label 0 fine)
 *   ntc          log_probs and grad_log_probs stored [N, T, C] and viewed [T, N, C]; targets stored
 *                [S, N] viewed [N, S]; loss stride 2, grad_loss stride 3; all at an offset
 *   padded       log_probs with padded rows, grad_log_probs stored class-major [C, T, N], targets
 *                with padded rows, grad_loss stride 2, offsets; padded_inf: ntc with infinite losses
 *   c1           C = 1 (only the blank): loss 0; label 0 (= blank) NaN
 *   t0           T = 0: loss 0 for an empty target, +inf (or 0) otherwise; s0: S = 0
 *   peaked       activations in [-8, 8]: log-probs down to about -16, extreme posteriors
 *   long         T 150, S 60 (121 states); wide: T 700, S 300 (601 states and 300 label positions,
 *                more than a work-group's 256 items), blank 4, ntc views
 *   classes      C 300 (more classes than a work-group's items), blank C - 1, padded views
 * The targets' padding past target_lengths[n] holds invalid labels (-1, C, blank): read, it would
 * make the sample NaN. Each call must succeed; rudnn_last_kernel() names a "ctc." kernel; every
 * element of loss (and grad_log_probs) is written (both are poisoned with a sentinel first); no byte
 * of their buffers outside the elements changes (stride gaps, head, tail); no byte of an input's
 * buffer changes, nor the host length arrays; grad_log_probs' buffer is untouched when it is not
 * passed. The values:
 *   loss[n]                   the reference's; +inf exactly; NaN where the reference is NaN; 0 exactly
 *                             for zero_infinity's infinite losses
 *   grad[t, n, c], t < il[n]  grad_loss[n] (exp(lp) - gamma); NaN where the reference is (a bad
 *                             label, or an infinite loss without zero_infinity); 0 exactly for
 *                             zero_infinity's infinite losses
 *   grad[t, n, c], t >= il[n] 0 exactly (a bad label's sample: 0 or NaN, the header leaves it open)
 *   sum over c of grad[t, n, c] (finite losses, t < il[n]): grad_loss[n] (sum_c exp(lp) - 1), 0 up to
 *                             the rounding of log_probs to the dtype, within the entries' tolerances
 *   F32 (T N C <= 1000): grad_loss[n] times the central difference (double, h 1e-4) of the reference
 *                             loss w.r.t. the activations a (lp = log_softmax(a)) matches grad.
 * Plus <dtype>/n0 (N = 0, the length arrays NULL: success, no byte of any buffer written, with a
 * workspace and without), api/lengths_copied (the host length arrays overwritten right after the
 * call returns, before the synchronize: the results are those of the lengths passed) and
 * api/options_init.
 *
 * Tolerances. log_probs are made in double (log_softmax of random activations), rounded to the dtype
 * on the host (rudnn's conversion) and the reference computes on exactly those values; the loss is
 * F32 and the header puts the sums in FP32 in log space. So what is left is FP32 arithmetic:
 *   loss    each of the Tn steps adds, per state, up to two log-add-exps (a sum rounded relative to
 *           |alpha| <= about |loss|, and a log1p(exp()) of a value below log 2, a few ulps) and the
 *           step's log-prob, and the errors carry forward unamplified (log-add-exp is 1-Lipschitz):
 *           |got - ref| <= eL = 8 (Tn + 1) 2^-24 (|ref| + 1).
 *   grad    gamma = exp(lcab + nll - lp) puts the error of alpha + beta (the whole walk, forward and
 *           backward) and of nll into an exponent: a relative error eg = 2 eL in gamma; exp(lp) a few
 *           ulps: |got - ref| <= |grad_loss| (eg gamma + 8 2^-24 (exp(lp) + gamma)) + half an ulp of
 *           the dtype (the store's rounding, at max(|got|, |ref|), never below the dtype's smallest
 *           normal's).
 *   numeric gradient (F32): the above plus |grad_loss| (4 (Tn + 1) 2^-24 (max |lp| + 1) + 1e-7): the
 *           device saw log_probs rounded to F32 (|dlp| <= 2^-24 |lp|, moving a gradient entry by at
 *           most about 2 Tn max |dlp|, the rows of the Hessian summing to at most 2 Tn) and the
 *           central difference's own error (h^2 |f'''| / 6 and 1e-16 |loss| / h, below 1e-8).
 *   reference vs enumeration: 1e-12 (1 + |loss|); reference vs central differences: 1e-6 (both double).
 * The bounds are worst cases; the summary line prints the largest error as a fraction of its bound.
 *
 * Usage: test_ctc [glob of <dtype>/<case>, ref/<test> or api/<test>]. RUDNN_TEST_VERBOSE=1 prints
 * each call's worst error. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/ctc.h>

#include "common.h"
#include "operand.h"
#include "reference/ctc_ref.h"

static const rudnn_dtype_t dtypes[] = {RUDNN_F32, RUDNN_F16, RUDNN_BF16};
#define DTYPE_COUNT 3
#define MAXN 8

/* ---- cases ------------------------------------------------------------------------------------ */

enum { LAY_CONTIG, LAY_NTC, LAY_PADDED };
enum { ZI0 = 1, ZI1 = 2, ZIB = 3 }; /* zero_infinity values to run: bit 0 for 0, bit 1 for 1 */

typedef struct ccase {
    const char *name;
    int64_t T, N, C, S;
    int64_t blank; /* -1: C - 1 */
    int zi;
    int layout;
    int64_t il[MAXN];   /* input lengths; -1: T */
    int64_t tl[MAXN];   /* random valid labels of these lengths (labels NULL) */
    const char *labels; /* explicit targets, samples separated by '|': digits, B blank, X C, N -1,
                           H INT32_MAX (I32) / 2^40 + 1 (I64), M INT32_MIN / INT64_MIN */
    double act;         /* activations uniform in [-act, act] */
} ccase_t;

static const ccase_t cases[] = {
    /* name            T    N  C  S    blank zi   layout      il                         tl                      labels */
    {"basic",          12,  4, 6, 5,   0,  ZI0, LAY_CONTIG, {12, 10, 7, 12},           {5, 3, 0, 4},            NULL, 2.0},
    {"lengths",        20,  6, 5, 6,   0,  ZI0, LAY_CONTIG, {20, 0, 1, 15, 9, 20},     {6, 0, 0, 2, 4, 1},      NULL, 2.0},
    {"too_short",      6,   6, 4, 4,   0,  ZIB, LAY_CONTIG, {0, 2, 3, 6, 4, 6},        {0}, "1|123|1232|1111|12|3",      2.0},
    {"repeats",        4,   6, 3, 2,   0,  ZIB, LAY_CONTIG, {2, 3, 4, 3, 2, 1},        {0}, "11|11|11|12|12|11",         2.0},
    {"blank_last",     10,  4, 7, 4,   -1, ZI0, LAY_CONTIG, {10, 10, 8, 5},            {4, 2, 3, 0},            NULL, 2.0},
    {"blank_mid",      9,   3, 6, 3,   3,  ZI0, LAY_CONTIG, {9, 7, 9},                 {0}, "414|22|505",                2.0},
    {"bad_label",      8,   7, 5, 3,   0,  ZIB, LAY_CONTIG, {8, 8, 8, 8, 8, 8, 6},     {0}, "12|1X|B3|N|H2|M|21",        2.0},
    {"bad_blank_last", 6,   4, 4, 2,   -1, ZIB, LAY_CONTIG, {6, 6, 6, 3},              {0}, "X|3|12|02",                 2.0},
    {"ntc",            11,  5, 6, 4,   0,  ZI0, LAY_NTC,    {11, 9, 11, 4, 7},         {4, 3, 0, 1, 2},         NULL, 2.0},
    {"padded",         13,  4, 5, 5,   2,  ZI0, LAY_PADDED, {13, 12, 10, 13},          {5, 4, 2, 3},            NULL, 2.0},
    {"padded_inf",     5,   3, 4, 3,   0,  ZIB, LAY_NTC,    {5, 2, 4},                 {0}, "123|12|111",                2.0},
    {"c1",             5,   3, 1, 1,   0,  ZIB, LAY_CONTIG, {5, 0, 3},                 {0}, "|0|",                       1.0},
    {"t0",             0,   3, 4, 2,   0,  ZIB, LAY_CONTIG, {0, 0, 0},                 {0}, "|12|",                      1.0},
    {"s0",             7,   3, 5, 0,   0,  ZI0, LAY_PADDED, {7, 0, 4},                 {0, 0, 0},               NULL, 2.0},
    {"peaked",         16,  3, 6, 4,   0,  ZI0, LAY_CONTIG, {16, 16, 12},              {4, 4, 3},               NULL, 8.0},
    {"long",           150, 3, 8, 60,  0,  ZI0, LAY_CONTIG, {150, 140, 150},           {60, 30, 0},             NULL, 2.0},
    {"wide",           700, 2, 5, 300, 4,  ZI0, LAY_NTC,    {700, 650},                {300, 260},              NULL, 1.5},
    {"classes",        7,   3, 300, 4, -1, ZI0, LAY_PADDED, {7, 5, 7},                 {4, 2, 0},               NULL, 3.0},
};
#define CASE_COUNT (sizeof cases / sizeof cases[0])

/* numeric gradients for F32 where T N C is at most this */
#define FD_MAX_ENTRIES 1000

/* ---- tolerance -------------------------------------------------------------------------------- */

static double tol_loss(int64_t Tn, double ref) { return 8.0 * (double)(Tn + 1) * 0x1p-24 * (fabs(ref) + 1.0); }

/* The bound of one gradient entry (the header comment). */
static double tol_grad(rudnn_dtype_t dt, int64_t Tn, double raw_loss, double gl, double lp, double gamma, double got,
                       double ref)
{
    const double eg = 2.0 * tol_loss(Tn, raw_loss);
    gamma = fmax(gamma, 0.0);
    return fabs(gl) * (eg * gamma + 8.0 * 0x1p-24 * (exp(lp) + gamma)) + rt_half_ulp(dt, fmax(fabs(got), fabs(ref)));
}

/* Worst error as a fraction of its bound, per dtype (loss, gradient), for the summary line. */
static double worst_loss[DTYPE_COUNT], worst_grad[DTYPE_COUNT], worst_fd;

/* ---- one problem -------------------------------------------------------------------------------- */

enum { R_LP, R_GRAD, R_TG, R_LOSS, R_GL };

/* Strides of a role under a layout (NULL: row-major) and its head in elements. */
static const int64_t *layout_of(int layout, int role, int64_t T, int64_t N, int64_t C, int64_t S, int64_t *st,
                                size_t *head)
{
    *head = 0;
    if (layout == LAY_CONTIG)
        return NULL;
    if (layout == LAY_NTC) {
        *head = 3;
        switch (role) {
        case R_LP:
        case R_GRAD: st[0] = C, st[1] = T * C, st[2] = 1; break; /* stored [N, T, C] */
        case R_TG: st[0] = 1, st[1] = N; break;                 /* stored [S, N] */
        case R_LOSS: st[0] = 2; break;
        default: st[0] = 3; break;
        }
        return st;
    }
    *head = role == R_LP ? 5 : role == R_GRAD ? 7 : role == R_TG ? 2 : role == R_LOSS ? 5 : 1;
    switch (role) {
    case R_LP: st[0] = N * (C + 2) + 1, st[1] = C + 2, st[2] = 1; break; /* padded rows */
    case R_GRAD: st[0] = N, st[1] = 1, st[2] = T * N; break;            /* stored [C, T, N] */
    case R_TG: st[0] = S + 2, st[1] = 1; break;
    case R_LOSS: st[0] = 1; break;
    default: st[0] = 2; break;
    }
    return st;
}

typedef struct problem {
    const ccase_t *c;
    rudnn_dtype_t dt, tdt;
    int64_t T, N, C, S, blank;
    int64_t il[MAXN], tl[MAXN];
    int64_t *tg;  /* [N][S] labels, padding included */
    double *act;  /* [T][N][C] activations */
    double *lp;   /* [T][N][C] log_probs as the device holds them */
    double gl[MAXN];
    operand_t lp_o, tg_o, gl_o, loss_o, grad_o;
} problem_t;

static int64_t label_code(char ch, const problem_t *p)
{
    const int i64 = p->tdt == RUDNN_I64;
    switch (ch) {
    case 'B': return p->blank;
    case 'X': return p->C;
    case 'N': return -1;
    case 'H': return i64 ? ((int64_t)1 << 40) + 1 : INT32_MAX;
    case 'M': return i64 ? INT64_MIN : INT32_MIN;
    default: return ch - '0';
    }
}

static void problem_make(problem_t *p, const ccase_t *c, rudnn_dtype_t dt, rudnn_dtype_t tdt)
{
    memset(p, 0, sizeof *p);
    p->c = c, p->dt = dt, p->tdt = tdt;
    p->T = c->T, p->N = c->N, p->C = c->C, p->S = c->S;
    p->blank = c->blank < 0 ? c->C - 1 : c->blank;
    const int64_t T = p->T, N = p->N, C = p->C, S = p->S;
    rt_rng_t rng;
    rt_rng_seed_case(&rng, c->name, (int)dt * 2 + (tdt == RUDNN_I64));
    /* targets: padding with invalid labels first */
    p->tg = rt_xmalloc(sizeof(int64_t) * (size_t)(N * S + 1));
    for (int64_t i = 0; i < N * S; i++) {
        const int64_t k = i % 3;
        p->tg[i] = k == 0 ? -1 : k == 1 ? C : p->blank;
    }
    const char *lab = c->labels;
    for (int64_t n = 0; n < N; n++) {
        p->il[n] = c->il[n] < 0 ? T : c->il[n];
        if (lab) {
            int64_t k = 0;
            for (; *lab && *lab != '|'; lab++)
                p->tg[n * S + k++] = label_code(*lab, p);
            if (*lab == '|')
                lab++;
            p->tl[n] = k;
        } else {
            p->tl[n] = c->tl[n];
            for (int64_t k = 0; k < p->tl[n]; k++) { /* any class but the blank */
                int64_t l = (int64_t)rt_rng_below(&rng, (uint64_t)(C - 1));
                p->tg[n * S + k] = l >= p->blank ? l + 1 : l;
            }
        }
        if (p->tl[n] > S)
            fail_msg("case %s: sample %lld has %lld labels, S is %lld", c->name, (long long)n, (long long)p->tl[n],
                     (long long)S);
    }
    /* activations, log_softmax in double, rounded to the dtype */
    const int64_t nlp = T * N * C;
    p->act = rt_xmalloc(sizeof(double) * (size_t)(nlp + 1));
    p->lp = rt_xmalloc(sizeof(double) * (size_t)(nlp + 1));
    for (int64_t i = 0; i < nlp; i++)
        p->act[i] = rt_rng_uniform(&rng, -c->act, c->act);
    for (int64_t r = 0; r < T * N; r++) {
        ctc_ref_log_softmax(C, p->act + r * C, p->lp + r * C);
        for (int64_t k = 0; k < C; k++)
            p->lp[r * C + k] = rt_round_to(dt, p->lp[r * C + k]);
    }
    for (int64_t n = 0; n < N; n++) /* both signs, one 0 (n = 3) */
        p->gl[n] = n % 4 == 3 ? 0.0 : (float)((n % 2 ? -1 : 1) * rt_rng_uniform(&rng, 0.25, 2.0));
    /* device operands */
    int64_t st[3];
    size_t head;
    const int64_t d3[3] = {T, N, C}, dtg[2] = {N, S}, d1[1] = {N};
    const int64_t *s;
    s = layout_of(c->layout, R_LP, T, N, C, S, st, &head);
    operand_init(&p->lp_o, dt, 3, d3, s, head);
    s = layout_of(c->layout, R_GRAD, T, N, C, S, st, &head);
    operand_init(&p->grad_o, dt, 3, d3, s, head);
    s = layout_of(c->layout, R_TG, T, N, C, S, st, &head);
    operand_init(&p->tg_o, tdt, 2, dtg, s, head);
    s = layout_of(c->layout, R_LOSS, T, N, C, S, st, &head);
    operand_init(&p->loss_o, RUDNN_F32, 1, d1, s, head);
    s = layout_of(c->layout, R_GL, T, N, C, S, st, &head);
    operand_init(&p->gl_o, RUDNN_F32, 1, d1, s, head);
    operand_upload(&p->lp_o, p->lp);
    operand_upload_ints(&p->tg_o, p->tg);
    operand_upload(&p->gl_o, p->gl);
}

static void problem_free(problem_t *p)
{
    operand_t *all[] = {&p->lp_o, &p->tg_o, &p->gl_o, &p->loss_o, &p->grad_o};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        operand_free(all[i]);
    free(p->tg), free(p->act), free(p->lp);
}

/* ---- the call ------------------------------------------------------------------------------------ */

static char call_msg[1024];
static char call_kernel[96];

/* The size query, then the op with a workspace of exactly that size (pooled 0) or NULL (pooled 1),
 * then a synchronize. */
static rudnn_status_t call_ctc(problem_t *p, int with_grad, int with_gl, int zi, int pooled)
{
    const rudnn_ctc_args_t a = {&p->lp_o.t, &p->tg_o.t, p->il, p->tl, with_gl ? &p->gl_o.t : NULL, &p->loss_o.t,
                                with_grad ? &p->grad_o.t : NULL};
    rudnn_ctc_options_t o;
    rudnn_ctc_options_init(&o);
    o.blank = p->blank, o.zero_infinity = zi;
    call_msg[0] = call_kernel[0] = 0;
    size_t bytes = 0;
    rudnn_status_t st = rudnn_ctc_loss_workspace_size(rt_queue, &a, &o, &bytes);
    if (st) {
        snprintf(call_msg, sizeof call_msg, "workspace_size: %s", rudnn_last_error());
        return st;
    }
    rudnn_buffer_t ws = NULL;
    if (!pooled && bytes) {
        st = rudnn_buffer_create(rt_ctx, bytes, &ws);
        if (st) {
            snprintf(call_msg, sizeof call_msg, "buffer_create(%zu): %s", bytes, rudnn_last_error());
            return st;
        }
    }
    st = rudnn_ctc_loss(rt_queue, &a, &o, ws, ws ? bytes : 0);
    if (!st)
        snprintf(call_kernel, sizeof call_kernel, "%s", rudnn_last_kernel());
    else
        snprintf(call_msg, sizeof call_msg, "%s", rudnn_last_error());
    const rudnn_status_t sync = rudnn_queue_synchronize(rt_queue);
    if (!st && sync)
        snprintf(call_msg, sizeof call_msg, "synchronize: %s", rudnn_last_error());
    if (ws)
        rudnn_buffer_destroy(ws);
    return st ? st : sync;
}

/* ---- checks ---------------------------------------------------------------------------------------- */

/* The references of a problem: raw (zero_infinity 0, grad_loss ones: the loss as computed, and
 * exp(lp) - gamma) and the expected outputs of a call (zero_infinity zi, grad_loss gl or ones). */
typedef struct refs {
    double raw_loss[MAXN], loss[MAXN];
    double *unit; /* [T][N][C] */
    double *grad; /* [T][N][C] */
} refs_t;

static void refs_make(refs_t *r, const problem_t *p, int zi, int with_gl)
{
    const int64_t n = p->T * p->N * p->C + 1;
    r->unit = rt_xmalloc(sizeof(double) * (size_t)n);
    r->grad = rt_xmalloc(sizeof(double) * (size_t)n);
    assert_int_equal(ctc_ref_batch(p->T, p->N, p->C, p->S, p->lp, p->tg, p->il, p->tl, p->blank, 0, NULL, r->raw_loss,
                                   r->unit),
                     0);
    assert_int_equal(ctc_ref_batch(p->T, p->N, p->C, p->S, p->lp, p->tg, p->il, p->tl, p->blank, zi,
                                   with_gl ? p->gl : NULL, r->loss, r->grad),
                     0);
}

static void refs_free(refs_t *r) { free(r->unit), free(r->grad); }

static int check_kernel(rt_log_t *log, const char *what)
{
    if (strncmp(call_kernel, "ctc.", 4) == 0 && call_kernel[4])
        return 0;
    rt_logf(log, "  %s: rudnn_last_kernel() is \"%s\", not a \"ctc.<kernel>\"\n", what, call_kernel);
    return 1;
}

static int check_inputs(rt_log_t *log, const char *what, const problem_t *p, const int64_t *il0, const int64_t *tl0)
{
    int problems = 0;
    const operand_t *ins[3] = {&p->lp_o, &p->tg_o, &p->gl_o};
    static const char *const names[3] = {"log_probs", "targets", "grad_loss"};
    for (int i = 0; i < 3; i++)
        if (!operand_unchanged(ins[i])) {
            rt_logf(log, "  %s: the input %s's buffer changed\n", what, names[i]);
            problems++;
        }
    if (memcmp(il0, p->il, sizeof p->il) || memcmp(tl0, p->tl, sizeof p->tl)) {
        rt_logf(log, "  %s: the host length arrays changed\n", what);
        problems++;
    }
    return problems;
}

/* loss against r. */
static int check_loss(rt_log_t *log, const char *what, const problem_t *p, const uint8_t *snap, const refs_t *r,
                      int zi)
{
    int problems = 0;
    float got[MAXN];
    problems += operand_check_written(log, what, "loss", &p->loss_o, snap, got, NULL);
    double worst = 0.0;
    for (int64_t n = 0; n < p->N; n++) {
        const double g = got[n], want = r->loss[n];
        int ok;
        double bound = 0.0;
        if (isnan(want))
            ok = isnan(g);
        else if (isinf(want) || (zi && isinf(r->raw_loss[n])))
            ok = g == want; /* +inf, or zero_infinity's exact 0 */
        else {
            bound = tol_loss(p->il[n], want);
            ok = fabs(g - want) <= bound;
            if (ok && bound > 0)
                worst = fmax(worst, fabs(g - want) / bound);
        }
        if (!ok) {
            rt_logf(log, "  %s: loss[%lld] = %.9g, reference %.9g (input length %lld, target length %lld, bound "
                    "%.3g)\n", what, (long long)n, g, want, (long long)p->il[n], (long long)p->tl[n], bound);
            problems++;
        }
    }
    const int di = rt_dtype_index(p->dt);
    worst_loss[di] = fmax(worst_loss[di], worst);
    if (getenv("RUDNN_TEST_VERBOSE"))
        printf("    %s: loss: worst error %.3g of its bound\n", what, worst);
    return problems;
}

/* grad_log_probs against r (gl: the grad_loss values the call used, ones when NULL); the identity
 * sum_c grad = gl (sum_c exp(lp) - 1); with fd, the central differences (F32). */
static int check_grad(rt_log_t *log, const char *what, const problem_t *p, const uint8_t *snap, const refs_t *r,
                      const double *gl, int zi, int fd)
{
    const int64_t T = p->T, N = p->N, C = p->C;
    int problems = 0;
    float *got = rt_xmalloc(sizeof(float) * (size_t)(T * N * C + 1));
    double *tol = rt_xmalloc(sizeof(double) * (size_t)(T * N * C + 1));
    problems += operand_check_written(log, what, "grad_log_probs", &p->grad_o, snap, got, NULL);
    int64_t bad = 0, first = -1;
    double worst = 0.0, first_bound = 0.0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++)
            for (int64_t c = 0; c < C; c++) {
                const int64_t i = (t * N + n) * C + c;
                const double g = got[i], want = r->grad[i], raw = r->raw_loss[n];
                int ok;
                double bound = 0.0;
                tol[i] = 0.0;
                if (t >= p->il[n])
                    ok = g == 0.0 || (isnan(raw) && isnan(g)); /* a bad label's sample: 0 or NaN */
                else if (isnan(want))
                    ok = isnan(g);
                else if (zi && isinf(raw))
                    ok = g == 0.0;
                else {
                    const double lp = p->lp[i], gamma = exp(lp) - r->unit[i];
                    bound = tol_grad(p->dt, p->il[n], raw, gl[n], lp, gamma, g, want);
                    tol[i] = bound;
                    ok = fabs(g - want) <= bound;
                    if (ok)
                        worst = fmax(worst, fabs(g - want) / bound);
                }
                if (!ok && bad++ == 0)
                    first = i, first_bound = bound;
            }
    if (bad) {
        const int64_t t = first / (N * C), n = first / C % N, c = first % C;
        rt_logf(log, "  %s: grad_log_probs: %lld of %lld element(s) off; first [t %lld, n %lld, c %lld] = %.9g, "
                "reference %.9g (bound %.3g; input length %lld, loss %.6g)\n", what, (long long)bad,
                (long long)(T * N * C), (long long)t, (long long)n, (long long)c, got[first], r->grad[first],
                first_bound, (long long)p->il[n], r->raw_loss[n]);
        problems++;
    }
    /* the identity over c */
    int64_t bad_sum = 0;
    for (int64_t n = 0; n < N; n++) {
        if (!isfinite(r->raw_loss[n]))
            continue;
        for (int64_t t = 0; t < p->il[n]; t++) {
            double sum = 0.0, bound = 0.0, sexp = 0.0;
            for (int64_t c = 0; c < C; c++) {
                const int64_t i = (t * N + n) * C + c;
                sum += got[i], bound += tol[i], sexp += exp(p->lp[i]);
            }
            bound += fabs(gl[n]) * fabs(sexp - 1.0);
            if (!(fabs(sum) <= bound) && bad_sum++ == 0)
                rt_logf(log, "  %s: sum over c of grad_log_probs[t %lld, n %lld] = %.9g, expected 0 within %.3g\n",
                        what, (long long)t, (long long)n, sum, bound);
        }
    }
    problems += bad_sum > 0;
    /* central differences of the reference loss w.r.t. the activations */
    if (fd) {
        double *a = rt_xmalloc(sizeof(double) * (size_t)(T * C + 1)), *x = rt_xmalloc(sizeof(double) * (size_t)(T * C + 1));
        int64_t bad_fd = 0;
        for (int64_t n = 0; n < N; n++) {
            const int64_t Tn = p->il[n];
            if (!isfinite(r->raw_loss[n]))
                continue;
            double maxlp = 0.0;
            for (int64_t t = 0; t < Tn; t++)
                for (int64_t c = 0; c < C; c++)
                    a[t * C + c] = p->act[(t * N + n) * C + c], maxlp = fmax(maxlp, fabs(p->lp[(t * N + n) * C + c]));
            for (int64_t t = 0; t < Tn; t++)
                for (int64_t c = 0; c < C; c++) {
                    const double h = 1e-4, a0 = a[t * C + c];
                    double f[2];
                    for (int k = 0; k < 2; k++) {
                        a[t * C + c] = a0 + (k ? -h : h);
                        for (int64_t u = 0; u < Tn; u++)
                            ctc_ref_log_softmax(C, a + u * C, x + u * C);
                        f[k] = ctc_ref_sample(Tn, C, x, p->tl[n], p->tg + n * p->S, p->blank, NULL, NULL);
                    }
                    a[t * C + c] = a0;
                    const double num = gl[n] * (f[0] - f[1]) / (2 * h);
                    const int64_t i = (t * N + n) * C + c;
                    const double bound = tol[i] + fabs(gl[n]) * (4.0 * (double)(Tn + 1) * 0x1p-24 * (maxlp + 1.0) + 1e-7);
                    const double e = fabs(got[i] - num);
                    if (e <= bound)
                        worst_fd = fmax(worst_fd, e / bound);
                    else if (bad_fd++ == 0)
                        rt_logf(log, "  %s: grad_log_probs[t %lld, n %lld, c %lld] = %.9g, central difference %.9g "
                                "(bound %.3g)\n", what, (long long)t, (long long)n, (long long)c, got[i], num, bound);
                }
        }
        problems += bad_fd > 0;
        free(a), free(x);
    }
    const int di = rt_dtype_index(p->dt);
    worst_grad[di] = fmax(worst_grad[di], worst);
    if (getenv("RUDNN_TEST_VERBOSE"))
        printf("    %s: grad: worst error %.3g of its bound\n", what, worst);
    free(got), free(tol);
    return problems;
}

/* ---- a case ------------------------------------------------------------------------------------------- */

typedef struct unit {
    const ccase_t *c;
    rudnn_dtype_t dt;
    char name[64];
} unit_t;

static int run_calls(rt_log_t *log, problem_t *p, int zi, int *pooled_flip)
{
    const ccase_t *c = p->c;
    const int64_t T = p->T, N = p->N, C = p->C;
    int64_t il0[MAXN], tl0[MAXN];
    memcpy(il0, p->il, sizeof il0), memcpy(tl0, p->tl, sizeof tl0);
    const double ones[MAXN] = {1, 1, 1, 1, 1, 1, 1, 1};
    const int fd = p->dt == RUDNN_F32 && T * N * C <= FD_MAX_ENTRIES;
    int failures = 0;
    /* kind 0, 1: grad with grad_loss (twice); 2: grad with grad_loss NULL; 3: the loss alone */
    uint8_t *first_loss = NULL, *first_grad = NULL;
    for (int kind = 0; kind < 4; kind++) {
        const int with_grad = kind < 3, with_gl = kind != 2;
        const int pooled = (*pooled_flip)++ % 2;
        char what[192];
        snprintf(what, sizeof what, "%s/%s %s zero_infinity %d, %s (%s workspace)", rudnn_dtype_name(p->dt), c->name,
                 rudnn_dtype_name(p->tdt), zi,
                 kind < 2 ? (kind ? "loss and grad, grad_loss given (again)" : "loss and grad, grad_loss given")
                          : kind == 2 ? "loss and grad, grad_loss NULL" : "loss alone",
                 pooled ? "NULL" : "sized");
        operand_poison(&p->loss_o);
        operand_poison(&p->grad_o);
        const rudnn_status_t st = call_ctc(p, with_grad, with_gl, zi, pooled);
        if (st) {
            rt_logf(log, "  %s: returned %s: %s\n", what, rudnn_status_string(st), call_msg);
            failures++;
            continue;
        }
        int problems = check_kernel(log, what) + check_inputs(log, what, p, il0, tl0);
        uint8_t *sl = operand_snapshot(&p->loss_o), *sg = operand_snapshot(&p->grad_o);
        if (kind == 1) {
            if (first_loss && first_grad &&
                (memcmp(sl, first_loss, p->loss_o.bytes) || memcmp(sg, first_grad, p->grad_o.bytes))) {
                rt_logf(log, "  %s: the same call twice wrote different bits\n", what);
                problems++;
            }
        } else {
            refs_t r;
            refs_make(&r, p, zi, with_gl && with_grad);
            problems += check_loss(log, what, p, sl, &r, zi);
            if (with_grad)
                problems += check_grad(log, what, p, sg, &r, with_gl ? p->gl : ones, zi, fd && kind == 0);
            else if (memcmp(sg, p->grad_o.image, p->grad_o.bytes)) {
                rt_logf(log, "  %s: grad_log_probs' buffer (not passed) changed\n", what);
                problems++;
            }
            refs_free(&r);
        }
        if (kind == 0)
            first_loss = sl, first_grad = sg;
        else
            free(sl), free(sg);
        failures += problems != 0;
    }
    free(first_loss), free(first_grad);
    return failures;
}

static void test_case(void **state)
{
    const unit_t *u = *state;
    rt_log_t *log = rt_log_new();
    int flip = (int)(u->c - cases) + rt_dtype_index(u->dt);
    for (int ti = 0; ti < 2; ti++) {
        problem_t p;
        problem_make(&p, u->c, u->dt, ti ? RUDNN_I64 : RUDNN_I32);
        for (int zi = 0; zi < 2; zi++)
            if (u->c->zi & (1 << zi))
                log->failures += run_calls(log, &p, zi, &flip);
        problem_free(&p);
    }
    rt_log_finish_free(log, "call(s)");
}

/* The cases' own claims: which losses are finite, infinite or NaN (computed by the reference, so
 * that a case that stops testing what it says is seen). */
static void test_case_claims(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        const char *kinds; /* per sample: f finite, i +inf, n NaN, z exactly 0 */
    } claims[] = {
        {"lengths", "fzffff"},     {"too_short", "iiiiff"},   {"repeats", "iffffi"},     {"bad_label", "fnnnnnf"},
        {"bad_blank_last", "nnff"}, {"padded_inf", "ffi"},      {"c1", "znz"},             {"t0", "ziz"},
        {"basic", "ffff"},          {"long", "fff"},            {"wide", "ff"},             {"classes", "fff"},
    };
    rt_log_t *log = rt_log_new();
    for (size_t k = 0; k < sizeof claims / sizeof claims[0]; k++) {
        const ccase_t *c = NULL;
        for (size_t i = 0; i < CASE_COUNT; i++)
            if (!strcmp(cases[i].name, claims[k].name))
                c = &cases[i];
        assert_non_null(c);
        for (int ti = 0; ti < 2; ti++) {
            problem_t p;
            problem_make(&p, c, RUDNN_F32, ti ? RUDNN_I64 : RUDNN_I32);
            refs_t r;
            refs_make(&r, &p, 0, 0);
            for (int64_t n = 0; n < p.N; n++) {
                const double l = r.raw_loss[n];
                const char want = claims[k].kinds[n];
                const char is = isnan(l) ? 'n' : isinf(l) ? 'i' : l == 0.0 ? 'z' : 'f';
                if (is != want) {
                    rt_logf(log, "  case %s (%s targets): sample %lld has loss %g, the case claims '%c'\n", c->name,
                            rudnn_dtype_name(p.tdt), (long long)n, l, want);
                    log->failures++;
                }
            }
            refs_free(&r);
            problem_free(&p);
        }
    }
    rt_log_finish_free(log, "claim(s)");
}

/* ---- the reference's own checks ---------------------------------------------------------------------- */

static int close_or_same(double a, double b, double tol)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b))
        return a == b;
    return fabs(a - b) <= tol;
}

/* ctc_ref_sample against the enumeration of every alignment (and hand-worked cases). */
static void test_ref_brute(void **state)
{
    (void)state;
    rt_log_t *lg = rt_log_new();
    /* hand-worked: lp = log of fixed probabilities */
    {
        const double pr[3][2] = {{0.6, 0.4}, {0.3, 0.7}, {0.5, 0.5}}; /* [t][c], blank 0 */
        double lp[6], g[6];
        for (int i = 0; i < 6; i++)
            lp[i] = log(pr[i / 2][i % 2]);
        const int64_t one[2] = {1, 1};
        /* T 1, target [1]: -log 0.4 */
        double l = ctc_ref_sample(1, 2, lp, 1, one, 0, NULL, NULL);
        if (!close_or_same(l, -log(0.4), 1e-15))
            rt_logf(lg, "  hand: T 1 [1]: %.17g, expected %.17g\n", l, -log(0.4)), lg->failures++;
        /* T 2, target [1, 1]: impossible */
        l = ctc_ref_sample(2, 2, lp, 2, one, 0, g, NULL);
        if (!(isinf(l) && l > 0) || !isnan(g[0]))
            rt_logf(lg, "  hand: T 2 [1, 1]: %g (grad %g), expected +inf (NaN)\n", l, g[0]), lg->failures++;
        /* T 3, target [1, 1]: one path 1 0 1: 0.4 0.3 0.5 */
        l = ctc_ref_sample(3, 2, lp, 2, one, 0, g, NULL);
        if (!close_or_same(l, -log(0.4 * 0.3 * 0.5), 1e-14))
            rt_logf(lg, "  hand: T 3 [1, 1]: %.17g, expected %.17g\n", l, -log(0.06)), lg->failures++;
        /* ... whose posteriors are 1 on that path: grad = p - 1 there, p elsewhere */
        const int path[3] = {1, 0, 1};
        for (int t = 0; t < 3; t++)
            for (int c = 0; c < 2; c++) {
                const double want = pr[t][c] - (c == path[t]);
                if (fabs(g[t * 2 + c] - want) > 1e-14)
                    rt_logf(lg, "  hand: T 3 [1, 1]: grad[%d][%d] = %.17g, expected %.17g\n", t, c, g[t * 2 + c],
                            want), lg->failures++;
            }
        /* T 2, target [1]: paths 1 1, 0 1, 1 0: 0.4 0.7 + 0.6 0.7 + 0.4 0.3 */
        l = ctc_ref_sample(2, 2, lp, 1, one, 0, NULL, NULL);
        if (!close_or_same(l, -log(0.28 + 0.42 + 0.12), 1e-14))
            rt_logf(lg, "  hand: T 2 [1]: %.17g, expected %.17g\n", l, -log(0.82)), lg->failures++;
        /* T 2, empty target: 0 0 only: 0.6 0.3 */
        l = ctc_ref_sample(2, 2, lp, 0, one, 0, NULL, NULL);
        if (!close_or_same(l, -log(0.18), 1e-14))
            rt_logf(lg, "  hand: T 2 []: %.17g, expected %.17g\n", l, -log(0.18)), lg->failures++;
        /* blank 1, target [0]: a label equal to... no: label 0 with blank 1 is fine; label 1 is NaN */
        const int64_t zero[1] = {0};
        l = ctc_ref_sample(1, 2, lp, 1, zero, 1, NULL, NULL);
        if (!close_or_same(l, -log(0.6), 1e-15))
            rt_logf(lg, "  hand: blank 1, T 1 [0]: %.17g, expected %.17g\n", l, -log(0.6)), lg->failures++;
        l = ctc_ref_sample(1, 2, lp, 1, one, 1, NULL, NULL);
        if (!isnan(l))
            rt_logf(lg, "  hand: blank 1, label 1: %g, expected NaN\n", l), lg->failures++;
        /* T 0 */
        if (ctc_ref_sample(0, 2, lp, 0, one, 0, NULL, NULL) != 0.0 ||
            ctc_ref_sample(0, 2, lp, 1, one, 0, NULL, NULL) != INFINITY)
            rt_logf(lg, "  hand: T 0: expected 0 for [] and +inf for [1]\n"), lg->failures++;
    }
    /* random tiny problems */
    rt_rng_t rng;
    rt_rng_seed(&rng, rt_hash("ctc brute force"));
    int count[3] = {0, 0, 0}; /* finite, inf, NaN */
    for (int k = 0; k < 3000; k++) {
        const uint64_t cr = rt_rng_below(&rng, 10); /* C 1 (every label bad) a tenth of the time */
        const int64_t T = (int64_t)rt_rng_below(&rng, 6), C = cr == 0 ? 1 : cr < 5 ? 2 : 3;
        const int64_t blank = (int64_t)rt_rng_below(&rng, (uint64_t)C), L = (int64_t)rt_rng_below(&rng, 4);
        int64_t target[3];
        for (int64_t i = 0; i < L; i++) {
            if (rt_rng_below(&rng, 20) == 0 || C == 1) {
                target[i] = rt_rng_below(&rng, 2) ? blank : C; /* bad */
            } else {
                const int64_t l = (int64_t)rt_rng_below(&rng, (uint64_t)(C - 1));
                target[i] = l >= blank ? l + 1 : l;
            }
        }
        double a[15], lp[15], g1[15], g2[15];
        const double scale = rt_rng_below(&rng, 4) == 0 ? 6.0 : 1.5;
        for (int64_t t = 0; t < T; t++) {
            for (int64_t c = 0; c < C; c++)
                a[t * C + c] = rt_rng_uniform(&rng, -scale, scale);
            ctc_ref_log_softmax(C, a + t * C, lp + t * C);
        }
        const double l1 = ctc_ref_sample(T, C, lp, L, target, blank, g1, NULL);
        const double l2 = ctc_ref_brute(T, C, lp, L, target, blank, g2);
        count[isnan(l2) ? 2 : isinf(l2) ? 1 : 0]++;
        int ok = close_or_same(l1, l2, 1e-12 * (1 + fabs(l2)));
        for (int64_t i = 0; ok && i < T * C; i++)
            ok = close_or_same(g1[i], g2[i], 1e-12);
        if (!ok) {
            rt_logf(lg, "  problem %d: T %lld C %lld blank %lld L %lld: recursion %.17g, enumeration %.17g (or a "
                    "gradient entry differs)\n", k, (long long)T, (long long)C, (long long)blank, (long long)L, l1,
                    l2);
            lg->failures++;
        }
    }
    printf("    brute force: %d finite, %d infinite, %d NaN losses\n", count[0], count[1], count[2]);
    if (count[0] < 1000 || count[1] < 100 || count[2] < 50) {
        rt_logf(lg, "  the random problems cover too little: %d finite, %d infinite, %d NaN\n", count[0], count[1],
                count[2]);
        lg->failures++;
    }
    rt_log_finish_free(lg, "problem(s)");
}

/* ctc_ref_sample's gradient against central differences of its loss w.r.t. the activations. */
static void test_ref_gradient(void **state)
{
    (void)state;
    rt_log_t *log = rt_log_new();
    rt_rng_t rng;
    rt_rng_seed(&rng, rt_hash("ctc reference gradient"));
    static const struct {
        int64_t T, C, blank, L;
        int64_t target[4];
    } probs[] = {
        {8, 5, 2, 3, {1, 1, 4}}, {6, 3, 0, 2, {1, 2}}, {12, 6, 5, 4, {0, 3, 3, 1}}, {5, 4, 0, 0, {0}},
        {5, 2, 0, 2, {1, 1}}, /* exactly one alignment needs 3 of the 5 steps */
    };
    for (size_t k = 0; k < sizeof probs / sizeof probs[0]; k++) {
        const int64_t T = probs[k].T, C = probs[k].C;
        double a[72], x[72], g[72];
        for (int64_t i = 0; i < T * C; i++)
            a[i] = rt_rng_uniform(&rng, -2, 2);
        for (int64_t t = 0; t < T; t++)
            ctc_ref_log_softmax(C, a + t * C, x + t * C);
        const double l = ctc_ref_sample(T, C, x, probs[k].L, probs[k].target, probs[k].blank, g, NULL);
        double worst = 0;
        for (int64_t i = 0; i < T * C; i++) {
            const double h = 1e-4, a0 = a[i];
            double f[2];
            for (int s = 0; s < 2; s++) {
                a[i] = a0 + (s ? -h : h);
                for (int64_t t = 0; t < T; t++)
                    ctc_ref_log_softmax(C, a + t * C, x + t * C);
                f[s] = ctc_ref_sample(T, C, x, probs[k].L, probs[k].target, probs[k].blank, NULL, NULL);
            }
            a[i] = a0;
            worst = fmax(worst, fabs((f[0] - f[1]) / (2 * h) - g[i]));
        }
        if (!(worst <= 1e-6) || !isfinite(l)) {
            rt_logf(log, "  problem %zu (loss %g): the gradient differs from central differences by %.3g\n", k, l,
                    worst);
            log->failures++;
        }
    }
    rt_log_finish_free(log, "problem(s)");
}

/* ---- N = 0, options ------------------------------------------------------------------------------------- */

/* N = 0 with the length arrays NULL: success, no byte of any buffer written (grad with grad_loss,
 * a sized workspace, a NULL one, and a workspace buffer of 256 bytes). */
static void test_empty(void **state)
{
    const rudnn_dtype_t dt = *(const rudnn_dtype_t *)*state;
    rt_log_t *log = rt_log_new();
    operand_t lp, tg, gl, loss, grad;
    const int64_t d3[3] = {3, 0, 4}, d2[2] = {0, 2}, d1[1] = {0};
    operand_init(&lp, dt, 3, d3, NULL, 2), operand_init(&grad, dt, 3, d3, NULL, 2);
    operand_init(&tg, RUDNN_I64, 2, d2, NULL, 1);
    operand_init(&gl, RUDNN_F32, 1, d1, NULL, 0), operand_init(&loss, RUDNN_F32, 1, d1, NULL, 3);
    rudnn_buffer_t ws256;
    rt_assert_status(rudnn_buffer_create(rt_ctx, 256, &ws256), RUDNN_STATUS_SUCCESS);
    for (int k = 0; k < 4; k++) {
        const rudnn_ctc_args_t a = {&lp.t, &tg.t, NULL, NULL, k == 3 ? NULL : &gl.t, &loss.t, k >= 2 ? NULL : &grad.t};
        size_t bytes = 12345;
        rudnn_status_t st = rudnn_ctc_loss_workspace_size(rt_queue, &a, NULL, &bytes);
        if (st) {
            rt_logf(log, "  N 0, %d: workspace_size returned %s: %s\n", k, rudnn_status_string(st), rudnn_last_error());
            log->failures++;
            continue;
        }
        rudnn_buffer_t ws = NULL;
        if (k == 0 && bytes)
            rt_assert_status(rudnn_buffer_create(rt_ctx, bytes, &ws), RUDNN_STATUS_SUCCESS);
        st = rudnn_ctc_loss(rt_queue, &a, NULL, k == 0 ? ws : k == 2 ? ws256 : NULL, k == 0 ? bytes : k == 2 ? 256 : 0);
        if (st) {
            rt_logf(log, "  N 0, %d: returned %s: %s\n", k, rudnn_status_string(st), rudnn_last_error());
            log->failures++;
        }
        rt_assert_status(rudnn_queue_synchronize(rt_queue), RUDNN_STATUS_SUCCESS);
        operand_t *all[5] = {&lp, &tg, &gl, &loss, &grad};
        static const char *const names[5] = {"log_probs", "targets", "grad_loss", "loss", "grad_log_probs"};
        for (int i = 0; i < 5; i++)
            if (!operand_unchanged(all[i])) {
                rt_logf(log, "  N 0, %d: %s's buffer was written\n", k, names[i]);
                log->failures++;
            }
        if (ws)
            rudnn_buffer_destroy(ws);
    }
    rudnn_buffer_destroy(ws256);
    operand_free(&lp), operand_free(&tg), operand_free(&gl), operand_free(&loss), operand_free(&grad);
    rt_log_finish_free(log, "call(s)");
}

/* The lengths are copied with the call (a blocking copy): the host arrays may change as soon as it
 * returns, before the queue is synchronized. */
static void test_lengths_copied(void **state)
{
    (void)state;
    rt_log_t *log = rt_log_new();
    problem_t p;
    problem_make(&p, &cases[0], RUDNN_F32, RUDNN_I32);
    refs_t r;
    refs_make(&r, &p, 0, 1);
    const rudnn_ctc_args_t a = {&p.lp_o.t, &p.tg_o.t, p.il, p.tl, &p.gl_o.t, &p.loss_o.t, &p.grad_o.t};
    rudnn_ctc_options_t o;
    rudnn_ctc_options_init(&o);
    const int64_t il0[MAXN] = {0}, tl0[MAXN] = {0};
    int64_t il[MAXN], tl[MAXN];
    memcpy(il, p.il, sizeof il), memcpy(tl, p.tl, sizeof tl);
    const rudnn_status_t st = rudnn_ctc_loss(rt_queue, &a, &o, NULL, 0);
    memcpy(p.il, il0, sizeof il0), memcpy(p.tl, tl0, sizeof tl0); /* valid lengths, other results */
    rt_assert_status(rudnn_queue_synchronize(rt_queue), RUDNN_STATUS_SUCCESS);
    memcpy(p.il, il, sizeof il), memcpy(p.tl, tl, sizeof tl);
    if (st) {
        rt_logf(log, "  returned %s: %s\n", rudnn_status_string(st), rudnn_last_error());
        log->failures++;
    } else {
        uint8_t *sl = operand_snapshot(&p.loss_o), *sg = operand_snapshot(&p.grad_o);
        log->failures += check_loss(log, "lengths changed after the call", &p, sl, &r, 0) != 0;
        log->failures += check_grad(log, "lengths changed after the call", &p, sg, &r, p.gl, 0, 0) != 0;
        free(sl), free(sg);
    }
    refs_free(&r);
    problem_free(&p);
    rt_log_finish_free(log, "check(s)");
}

static void test_options_init(void **state)
{
    (void)state;
    rudnn_ctc_options_t o;
    memset(&o, 0x5a, sizeof o);
    rudnn_ctc_options_init(&o);
    assert_int_equal(o.blank, 0);
    assert_int_equal(o.zero_infinity, 0);
    rudnn_ctc_options_init(NULL); /* a no-op */
}

/* ---- a backend without the family ------------------------------------------------------------------------- */

/* A valid call (F32, T 4, N 2, C 3, loss and gradient, the pool's workspace) and its size query.
 * Returns the call's status and *query_st the query's; why / why_q their messages; *wrote whether
 * an output was written by a call answering NOT_SUPPORTED. */
static rudnn_status_t probe(rudnn_status_t *query_st, char *why, char *why_q, size_t cap, int *wrote)
{
    static const ccase_t c = {"probe", 4, 2, 3, 2, 0, ZI0, LAY_CONTIG, {4, 3}, {2, 1}, NULL, 1.0};
    problem_t p;
    problem_make(&p, &c, RUDNN_F32, RUDNN_I64);
    const rudnn_ctc_args_t a = {&p.lp_o.t, &p.tg_o.t, p.il, p.tl, &p.gl_o.t, &p.loss_o.t, &p.grad_o.t};
    const rudnn_status_t st = rudnn_ctc_loss(rt_queue, &a, NULL, NULL, 0);
    snprintf(why, cap, "%s", st ? rudnn_last_error() : "");
    const rudnn_status_t sync = rudnn_queue_synchronize(rt_queue);
    size_t bytes = 0;
    *query_st = rudnn_ctc_loss_workspace_size(rt_queue, &a, NULL, &bytes);
    snprintf(why_q, cap, "%s", *query_st ? rudnn_last_error() : "");
    *wrote = st == RUDNN_STATUS_NOT_SUPPORTED && (!operand_unchanged(&p.loss_o) || !operand_unchanged(&p.grad_o));
    problem_free(&p);
    return st ? st : sync;
}

int main(int argc, char **argv)
{
    rt_set_filters(argc, argv);
    char group[64];
    snprintf(group, sizeof group, "ctc-%s", rt_requested_backend());
    rt_open_or_skip(group);
    rt_print_device(group);
    char why[1024], why_q[1024];
    int wrote = 0;
    rudnn_status_t qst;
    const rudnn_status_t pst = probe(&qst, why, why_q, sizeof why, &wrote);
    if (pst == RUDNN_STATUS_NOT_SUPPORTED || qst == RUDNN_STATUS_NOT_SUPPORTED) {
        const int ok = pst == RUDNN_STATUS_NOT_SUPPORTED && qst == RUDNN_STATUS_NOT_SUPPORTED &&
                       rt_mentions(why, "ctc") && rt_mentions(why_q, "ctc") && !wrote;
        char detail[2200];
        snprintf(detail, sizeof detail, "call %s: %s; query %s: %s%s", rudnn_status_string(pst), why,
                 rudnn_status_string(qst), why_q, wrote ? "; an output was written" : "");
        return rt_family_absent_exit(ok, "ctc", "CTC", "a valid call and its size query, nothing written", why, detail);
    }
    if (pst || qst) {
        printf("backend %s: the probe failed: call %s: %s; query %s: %s\n", rt_requested_backend(),
               rudnn_status_string(pst), why, rudnn_status_string(qst), why_q);
        rt_close();
        return 1;
    }
    static unit_t units[DTYPE_COUNT * CASE_COUNT];
    static struct CMUnitTest tests[DTYPE_COUNT * CASE_COUNT + DTYPE_COUNT + 5];
    static rudnn_dtype_t empty_dtypes[DTYPE_COUNT];
    static char empty_names[DTYPE_COUNT][32];
    size_t n = 0;
    tests[n++] = (struct CMUnitTest){"ref/brute_force", test_ref_brute, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"ref/gradient", test_ref_gradient, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"ref/case_claims", test_case_claims, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"api/options_init", test_options_init, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"api/lengths_copied", test_lengths_copied, NULL, NULL, NULL};
    for (size_t d = 0; d < DTYPE_COUNT; d++) {
        for (size_t i = 0; i < CASE_COUNT; i++) {
            unit_t *u = &units[d * CASE_COUNT + i];
            u->dt = dtypes[d];
            u->c = &cases[i];
            snprintf(u->name, sizeof u->name, "%s/%s", rudnn_dtype_name(dtypes[d]), cases[i].name);
            tests[n++] = (struct CMUnitTest){u->name, test_case, NULL, NULL, u};
        }
        empty_dtypes[d] = dtypes[d];
        snprintf(empty_names[d], sizeof empty_names[d], "%s/n0", rudnn_dtype_name(dtypes[d]));
        tests[n++] = (struct CMUnitTest){empty_names[d], test_empty, NULL, NULL, &empty_dtypes[d]};
    }
    const int failed = _cmocka_run_group_tests(group, tests, n, NULL, NULL);
    printf("%s: largest error as a fraction of its bound: loss f32 %.4g, f16 %.4g, bf16 %.4g; gradient f32 %.4g, "
           "f16 %.4g, bf16 %.4g; central differences (f32) %.4g\n", group, worst_loss[0], worst_loss[1], worst_loss[2],
           worst_grad[0], worst_grad[1], worst_grad[2], worst_fd);
    rt_close();
    return rt_exit_code(failed);
}
