/* Numeric tests of pooling (include/rudnn/pooling.h) against the FP64 reference of
 * reference/pooling_ref.c, through the public API; run once per backend (meson registers
 * pooling-opencl, -cuda, -hip with RUDNN_BACKEND set). A backend whose plugin has no pooling
 * kernels (no table: CUDA and HIP in this release) must answer NOT_SUPPORTED, naming the family,
 * for a valid forward and a valid backward, writing nothing; the suite checks that, prints
 * "backend <b>: SKIPPED (pooling: NOT_SUPPORTED ...)" and exits 77 (never a pass). On OpenCL, whose
 * plugin has the family, NOT_SUPPORTED fails the suite instead.
 *
 * What runs, each case for F32, F16 and BF16 and each of the case's modes (MAX, AVG_INCLUDE_PAD,
 * AVG_EXCLUDE_PAD): the forward with indices (MAX) twice, the forward without indices, the backward
 * twice (x given for MAX, NULL for the averages):
 *   2d_w3s2p1     the main case: 2D, window 3, stride 2, padding 1 (overlapping windows: the backward
 *                 sums up to 4 terms; the averages' divisors differ at the borders)
 *   1d, 3d        one and three spatial dims
 *   ceil_adds     ceil_mode adds an output along both dims (the last window partly past x and past
 *                 the padding: AVG_INCLUDE_PAD's divisor counts only [-pad, S + pad))
 *   ceil_drop     ceil_mode where PyTorch's rule drops the last window (it would start at S + pad)
 *   ceil_small    2 x 3 input, window 3, stride 2, ceil_mode: the window is longer than the padded
 *                 input along dim 1, the numerator of P's formula -1, rounded up to 0: P 1 (PyTorch's
 *                 MaxPool2d(3, 2, ceil_mode=True) of a 2 x 2 input gives 1 x 1)
 *   ceil_3d       3D ceil_mode, one dim adding an output, one dropping it, one unchanged
 *   dil2, dil2_ceil   MAX with dilation 2 (and ceil_mode)
 *   empty_win, empty_1d   MAX windows holding no element of x (S 2, R 2, pad 1, dil 3): y -inf,
 *                 index -1, the backward zeros
 *   nan           MAX with NaNs (several per window): y NaN, the index the first NaN, dy routed there
 *   ties          MAX on 5 levels (and a constant plane): the index the first maximum in window order
 *   inf           MAX with -inf and +inf inputs, a plane all -inf: y -inf, the index the window's
 *                 first element inside x (not -1), dy routed to it
 *   gaps          stride 3 > window 2: dx elements no window takes (zeros, written)
 *   w1            window 1, stride 1: the identity
 *   clast, clast_3d   x, dx, y, dy and indices channels-last (rudnn_conv_channels_last)
 *   strided       x, dx, y, dy and indices padded-stride views (not contiguous), at an offset
 *   mixed, mixed_1d   a different layout per tensor in one call, tensors at nonzero offsets
 *   big           N 2, C 8, 32 x 32 (several work-groups)
 * and api/output_dims (rudnn_pool_output_dims against the reference's formula over ~2900 shapes,
 * ceil_mode and floor, BAD_SHAPE where a P_i would be below 1, BAD_PARAM for options out of range,
 * y_dims untouched on error), api/options_init, and <dtype>/n0 (N = 0 and C = 0: success, no byte
 * of any buffer written).
 *
 * Every call: success; rudnn_last_kernel() names a "pooling." kernel; every output element written
 * (outputs are poisoned with a sentinel first, dx included); no byte of an output's buffer outside
 * its elements changes (stride gaps, head, tail); no byte of an input's buffer changes; the same
 * call again writes the same bits (determinism); MAX's y without indices has the bits of y with
 * them. The suite checks itself too: the ceil cases must add / drop outputs as named, and where a
 * case runs both averages the two references must differ (by more than the tolerance) somewhere.
 *
 * Tolerance. Inputs (x and dy) are drawn as doubles, rounded to the dtype on the host (rudnn's
 * conversions) and the reference computes on exactly those values, so what is left is the kernel's
 * arithmetic, which the contract puts in FP32:
 *   MAX forward   exact: y is one of the inputs (or -inf), NaN where the reference is NaN; the
 *                 indices exactly equal.
 *   MAX backward  exact where at most one output routes into a dx element (0 or dy itself); else
 *                 the FP32 sum of n terms: |got - ref| <= (n + 1) 2^-24 sum|terms| + half an ulp of
 *                 the dtype (the final rounding), n the most outputs sharing an element.
 *   averages      a sum of n terms in FP32 ((n - 1) 2^-24 sum|terms|) and, per output (forward) or
 *                 per term (backward), a division by the divisor, up to 2.5 ulp in OpenCL's x / y
 *                 (or a reciprocal and a product, 3 ulp): |got - ref| <= (n + 3) 2^-24 sum|terms|
 *                 + half an ulp of the dtype, n the window's element count (forward) or the most
 *                 outputs sharing an element (backward); the terms are x / divisor, so for
 *                 same-sign data this is (n + 3) F32 ulps, and for F16 / BF16 half an output ulp
 *                 plus a few F32 ulps: within one output ulp.
 * The half ulp is taken at max(|got|, |ref|) and never below that of the dtype's smallest normal.
 * F16 and BF16 reach about 0.999 of the bound (the summary line prints the largest fraction): an
 * FP32 result exactly halfway between two values of the dtype (a sum of two of them often is) rounds
 * to even, a whole half ulp from the exact value, which the bound allows with the FP32 part to spare.
 *
 * Usage: test_pooling [glob of <dtype>/<case> or api/<test>]. RUDNN_TEST_VERBOSE=1 prints each
 * check's worst error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/convolution.h>
#include <rudnn/pooling.h>

#include "common.h"
#include "operand.h"
#include "reference/pooling_ref.h"

static const rudnn_dtype_t dtypes[] = {RUDNN_F32, RUDNN_F16, RUDNN_BF16};
#define DTYPE_COUNT 3
static const char *const mode_names[] = {"max", "avg_include_pad", "avg_exclude_pad"};

/* ---- cases ------------------------------------------------------------------------------------ */

enum { L_CONTIG = OPERAND_CONTIG, L_CLAST = OPERAND_CLAST, L_PADDED = OPERAND_PADDED };
enum { D_RANDOM, D_TIES, D_NAN, D_INF };
enum { M_MAX = 1, M_INC = 2, M_EXC = 4, M_ALL = 7 };
/* what ceil_mode does in the case (self-checked): nothing claimed, adds an output along some dim,
 * drops the last window along some dim, both */
enum { CE_NONE, CE_ADDS, CE_DROPS, CE_BOTH };

typedef struct pcase {
    const char *name;
    int d;
    int64_t N, C;
    int64_t S[3], R[3], st[3], pad[3], dil[3];
    int ceil;
    int ceil_effect;
    int modes;
    int data;
    int lx, ly, li; /* layouts of x and dx, of y and dy, of indices */
    size_t head;    /* elements before each tensor in its buffer */
} pcase_t;

#define A M_ALL
#define MX M_MAX
static const pcase_t cases[] = {
    /* name       d  N  C  S            R          stride     pad        dil     ceil effect modes data lx ly li head */
    {"2d_w3s2p1", 2, 2, 3, {9, 8},    {3, 3},    {2, 2},    {1, 1},    {1, 1},    0, CE_NONE, A, D_RANDOM, 0, 0, 0, 0},
    {"1d",        1, 2, 3, {11},      {4},       {3},       {2},       {1},       0, CE_NONE, A, D_RANDOM, 0, 0, 0, 0},
    {"3d",        3, 2, 2, {5, 6, 7}, {3, 2, 3}, {2, 1, 2}, {1, 1, 0}, {1, 1, 1}, 0, CE_NONE, A, D_RANDOM, 0, 0, 0, 0},
    {"ceil_adds", 2, 2, 2, {8, 8},    {3, 3},    {2, 2},    {0, 1},    {1, 1},    1, CE_ADDS, A, D_RANDOM, 0, 0, 0, 0},
    {"ceil_drop", 2, 2, 2, {5, 4},    {2, 2},    {2, 3},    {1, 1},    {1, 1},    1, CE_DROPS, A, D_RANDOM, 0, 0, 0, 0},
    {"ceil_small",2, 2, 2, {2, 3},    {3, 3},    {2, 2},    {0, 1},    {1, 1},    1, CE_ADDS, A, D_RANDOM, 0, 0, 0, 0},
    {"ceil_3d",   3, 1, 2, {6, 5, 7}, {3, 2, 3}, {2, 2, 3}, {1, 1, 1}, {1, 1, 1}, 1, CE_BOTH, A, D_RANDOM, 0, 0, 0, 0},
    {"dil2",      2, 2, 3, {9, 10},   {3, 2},    {1, 2},    {1, 1},    {2, 2},    0, CE_NONE, MX, D_RANDOM, 0, 0, 0, 0},
    {"dil2_ceil", 1, 2, 2, {10},      {3},       {2},       {1},       {2},       1, CE_ADDS, MX, D_RANDOM, 0, 0, 0, 0},
    {"empty_win", 2, 1, 2, {2, 5},    {2, 3},    {1, 2},    {1, 1},    {3, 1},    0, CE_NONE, MX, D_RANDOM, 0, 0, 0, 0},
    {"empty_1d",  1, 2, 2, {2},       {2},       {1},       {1},       {3},       0, CE_NONE, MX, D_RANDOM, 0, 0, 0, 0},
    {"nan",       2, 2, 3, {7, 8},    {3, 3},    {2, 1},    {1, 1},    {1, 1},    0, CE_NONE, MX, D_NAN,    0, 0, 0, 0},
    {"ties",      2, 2, 3, {7, 7},    {3, 3},    {1, 2},    {1, 1},    {1, 1},    0, CE_NONE, MX, D_TIES,   0, 0, 0, 0},
    {"inf",       2, 2, 3, {6, 7},    {3, 2},    {2, 1},    {1, 1},    {1, 1},    0, CE_NONE, MX, D_INF,    0, 0, 0, 0},
    {"gaps",      2, 2, 2, {7, 8},    {2, 2},    {3, 3},    {0, 1},    {1, 1},    0, CE_NONE, A, D_RANDOM, 0, 0, 0, 0},
    {"w1",        2, 1, 2, {4, 5},    {1, 1},    {1, 1},    {0, 0},    {1, 1},    0, CE_NONE, A, D_RANDOM, 0, 0, 0, 0},
    {"clast",     2, 2, 5, {7, 6},    {3, 3},    {2, 2},    {1, 1},    {1, 1},    0, CE_NONE, A, D_RANDOM, 1, 1, 1, 0},
    {"clast_3d",  3, 2, 3, {4, 5, 3}, {2, 3, 2}, {2, 1, 1}, {1, 1, 0}, {1, 1, 1}, 1, CE_NONE, A, D_RANDOM, 1, 1, 1, 0},
    {"strided",   2, 2, 3, {7, 9},    {3, 3},    {2, 2},    {1, 1},    {1, 1},    0, CE_NONE, A, D_RANDOM, 2, 2, 2, 3},
    {"mixed",     2, 2, 4, {8, 7},    {3, 2},    {2, 1},    {1, 1},    {1, 1},    1, CE_ADDS, A, D_RANDOM, 1, 2, 0, 5},
    {"mixed_1d",  1, 3, 2, {12},      {3},       {2},       {1},       {1},       0, CE_NONE, A, D_RANDOM, 2, 1, 2, 2},
    {"big",       2, 2, 8, {32, 32},  {3, 3},    {2, 2},    {1, 1},    {1, 1},    0, CE_NONE, A, D_RANDOM, 0, 0, 0, 0},
};
#undef A
#undef MX
#define CASE_COUNT (sizeof cases / sizeof cases[0])

static pool_ref_shape_t shape_of(const pcase_t *c, int mode)
{
    pool_ref_shape_t s;
    memset(&s, 0, sizeof s);
    s.mode = mode, s.spatial = c->d, s.batch = c->N, s.channels = c->C, s.ceil_mode = c->ceil;
    for (int i = 0; i < c->d; i++) {
        s.in_size[i] = c->S[i], s.window[i] = c->R[i], s.stride[i] = c->st[i];
        s.padding[i] = c->pad[i], s.dilation[i] = c->dil[i];
    }
    return s;
}

static rudnn_pool_options_t options_of(const pcase_t *c, int mode)
{
    rudnn_pool_options_t o;
    rudnn_pool_options_init(&o);
    o.mode = (rudnn_pool_mode_t)mode;
    o.ceil_mode = c->ceil;
    for (int i = 0; i < c->d; i++)
        o.window[i] = c->R[i], o.stride[i] = c->st[i], o.padding[i] = c->pad[i], o.dilation[i] = c->dil[i];
    for (int i = c->d; i < RUDNN_POOL_MAX_SPATIAL; i++) /* ignored entries: garbage must not matter */
        o.window[i] = 0, o.stride[i] = 0, o.padding[i] = -7, o.dilation[i] = 0;
    return o;
}

/* ---- tolerance -------------------------------------------------------------------------------- */

/* The relative factors of the header comment, n the terms of one sum. */
static double tol_sum(int64_t n) { return (double)(n + 1) * 0x1p-24; }     /* MAX backward */
static double tol_avg(int64_t n) { return (double)(n + 3) * 0x1p-24; }     /* the averages */

/* Worst error as a fraction of its bound, per dtype, for the summary line. */
static double worst_ratio[DTYPE_COUNT];

/* x of a case: kind D_* over [N][C][plane] (planes: (n, c) pairs in order). */
static double *make_x(rt_rng_t *rng, rudnn_dtype_t dt, int kind, int64_t n, int64_t plane)
{
    double *v = rt_xmalloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        const int64_t pl = i / plane;
        double e = rt_rng_uniform(rng, -1, 1);
        switch (kind) {
        case D_TIES: /* 5 levels; plane 0 constant */
            e = pl == 0 ? 0.5 : 0.5 * ((double)rt_rng_below(rng, 5) - 2.0);
            break;
        case D_NAN: /* plane 0: every third element NaN; plane 1: none; the rest: 15% */
            if (pl == 0 ? i % 3 == 1 : pl == 1 ? 0 : rt_rng_below(rng, 100) < 15)
                e = NAN;
            break;
        case D_INF: /* plane 0 all -inf; plane 1 -inf, +inf and 0.5; the rest 40% -inf, 5% +inf */
            if (pl == 0) {
                e = -INFINITY;
            } else if (pl == 1) {
                const uint64_t k = rt_rng_below(rng, 3);
                e = k == 0 ? -INFINITY : k == 1 ? INFINITY : 0.5;
            } else {
                const uint64_t k = rt_rng_below(rng, 100);
                e = k < 40 ? -INFINITY : k < 45 ? INFINITY : e;
            }
            break;
        default:
            break;
        }
        v[i] = isnan(e) ? e : rt_round_to(dt, e);
    }
    return v;
}

/* ---- one problem -------------------------------------------------------------------------------- */

typedef struct problem {
    const pcase_t *c;
    rudnn_dtype_t dt;
    int rank;
    int64_t xdims[5], ydims[5];
    operand_t x, dx, y, dy, idx;
    double *hx, *hdy;
} problem_t;

/* P along each dim by the header's formula, ceil without the drop rule (for the self-check). */
static int64_t p_of(int64_t S, int64_t R, int64_t st, int64_t pad, int64_t dil, int ceil)
{
    const int64_t num = S + 2 * pad - dil * (R - 1) - 1;
    int64_t q = num >= 0 ? num / st : -((-num + st - 1) / st);
    if (ceil && q * st != num)
        q++;
    return q + 1;
}

/* Does the case's ceil_mode add / drop what the table says? Logs and counts a failure if not. */
static void check_ceil_claim(rt_log_t *log, const pcase_t *c)
{
    int adds = 0, drops = 0;
    for (int i = 0; i < c->d; i++) {
        const int64_t fl = p_of(c->S[i], c->R[i], c->st[i], c->pad[i], c->dil[i], 0);
        const int64_t ce = p_of(c->S[i], c->R[i], c->st[i], c->pad[i], c->dil[i], 1);
        const int drop = c->ceil && (ce - 1) * c->st[i] >= c->S[i] + c->pad[i];
        adds += c->ceil && ce - drop > fl;
        drops += drop;
    }
    const int want_adds = c->ceil_effect == CE_ADDS || c->ceil_effect == CE_BOTH;
    const int want_drops = c->ceil_effect == CE_DROPS || c->ceil_effect == CE_BOTH;
    if (want_adds != (adds > 0) || want_drops != (drops > 0)) {
        rt_logf(log, "  %s: the case is wrong: ceil_mode adds an output along %d dim(s), drops one along %d\n",
                c->name, adds, drops);
        log->failures++;
    }
}

static int problem_make(rt_log_t *log, problem_t *p, const pcase_t *c, rudnn_dtype_t dt)
{
    memset(p, 0, sizeof *p);
    p->c = c, p->dt = dt, p->rank = c->d + 2;
    const pool_ref_shape_t s = shape_of(c, (c->modes & M_MAX) ? POOL_REF_MAX : POOL_REF_AVG_INCLUDE_PAD);
    int64_t P[3];
    assert_int_equal(pool_ref_out_size(&s, P), POOL_REF_OK);
    p->xdims[0] = c->N, p->xdims[1] = c->C;
    for (int i = 0; i < c->d; i++)
        p->xdims[2 + i] = c->S[i];
    for (int mode = 0; mode < 3; mode++) {
        if (!(c->modes & (1 << mode)))
            continue;
        const rudnn_pool_options_t o = options_of(c, mode);
        int64_t yd[5] = {-1, -1, -1, -1, -1};
        const rudnn_status_t st = rudnn_pool_output_dims(p->rank, p->xdims, &o, yd);
        int good = st == RUDNN_STATUS_SUCCESS && yd[0] == c->N && yd[1] == c->C;
        for (int i = 0; good && i < c->d; i++)
            good = yd[2 + i] == P[i];
        if (!good) {
            char a[96], b[96];
            int64_t want[5] = {c->N, c->C, P[0], P[1], P[2]};
            rt_logf(log, "  %s/%s: rudnn_pool_output_dims (%s) returned %s, %s; expected %s\n", rudnn_dtype_name(dt),
                    c->name, mode_names[mode], rudnn_status_string(st), rt_dims_str(p->rank, yd, a, sizeof a),
                    rt_dims_str(p->rank, want, b, sizeof b));
            log->failures++;
            return -1;
        }
    }
    p->ydims[0] = c->N, p->ydims[1] = c->C;
    for (int i = 0; i < c->d; i++)
        p->ydims[2 + i] = P[i];
    operand_init_layout(&p->x, dt, p->rank, p->xdims, c->lx, c->head);
    operand_init_layout(&p->dx, dt, p->rank, p->xdims, c->lx, c->head);
    operand_init_layout(&p->y, dt, p->rank, p->ydims, c->ly, c->head);
    operand_init_layout(&p->dy, dt, p->rank, p->ydims, c->ly, c->head);
    operand_init_layout(&p->idx, RUDNN_I64, p->rank, p->ydims, c->li, c->head);
    rt_rng_t rng;
    rt_rng_seed_case(&rng, c->name, (int)dt);
    const int64_t nx = pool_ref_x_count(&s), ny = pool_ref_y_count(&s);
    int64_t plane = 1;
    for (int i = 0; i < c->d; i++)
        plane *= c->S[i];
    p->hx = make_x(&rng, dt, c->data, nx, plane);
    p->hdy = make_x(&rng, dt, D_RANDOM, ny, 1);
    operand_upload(&p->x, p->hx);
    operand_upload(&p->dy, p->hdy);
    return 0;
}

static void problem_free(problem_t *p)
{
    operand_t *all[] = {&p->x, &p->dx, &p->y, &p->dy, &p->idx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        operand_free(all[i]);
    free(p->hx), free(p->hdy);
}

/* Message of the last failed call; the kernel the last call named. */
static char call_msg[1024];
static char call_kernel[96];

static rudnn_status_t finish_call(rudnn_status_t st)
{
    call_msg[0] = 0;
    if (!st)
        snprintf(call_kernel, sizeof call_kernel, "%s", rudnn_last_kernel());
    else
        snprintf(call_msg, sizeof call_msg, "%s", rudnn_last_error());
    const rudnn_status_t sync = rudnn_queue_synchronize(rt_queue);
    if (!st && sync)
        snprintf(call_msg, sizeof call_msg, "synchronize: %s", rudnn_last_error());
    return st ? st : sync;
}

static rudnn_status_t call_forward(problem_t *p, const rudnn_pool_options_t *o, int with_indices)
{
    return finish_call(rudnn_pool_forward(rt_queue, &p->x.t, o, &p->y.t, with_indices ? &p->idx.t : NULL));
}

static rudnn_status_t call_backward(problem_t *p, const rudnn_pool_options_t *o)
{
    const rudnn_tensor_t *x = o->mode == RUDNN_POOL_MAX ? &p->x.t : NULL;
    return finish_call(rudnn_pool_backward(rt_queue, x, &p->dy.t, o, &p->dx.t));
}

/* Checks a float output snapshot against the reference: every element written, no byte outside
 * the elements changed, every value within its bound (exact: bound 0; terms not NULL: bound 0 where
 * terms[i] <= 1). Returns the number of problems logged. */
static int check_values(rt_log_t *log, const char *what, const char *name, const operand_t *o, const uint8_t *snap,
                        const double *ref, const double *abs_terms, const int64_t *terms, double tol, int exact)
{
    int problems = 0;
    float *got = rt_xmalloc(sizeof(float) * (size_t)(o->numel > 0 ? o->numel : 1));
    problems += operand_check_written(log, what, name, o, snap, got, NULL);
    int64_t bad = 0, first = -1;
    double worst = 0, first_bound = 0;
    for (int64_t i = 0; i < o->numel; i++) {
        const double g = got[i], r = ref[i];
        if (isnan(r) || isnan(g)) {
            if (!(isnan(r) && isnan(g)) && bad++ == 0)
                first = i, first_bound = 0;
            if (!(isnan(r) && isnan(g)))
                worst = INFINITY;
            continue;
        }
        if (g == r)
            continue;
        const int zero = exact || (terms && terms[i] <= 1);
        const double bound = zero ? 0.0 : tol * abs_terms[i] + rt_half_ulp(o->t.dtype, fmax(fabs(g), fabs(r)));
        const double e = fabs(g - r);
        worst = fmax(worst, bound > 0 ? e / bound : INFINITY);
        if (!(e <= bound) && bad++ == 0)
            first = i, first_bound = bound;
    }
    const int di = rt_dtype_index(o->t.dtype);
    if (!exact)
        worst_ratio[di] = fmax(worst_ratio[di], worst);
    if (getenv("RUDNN_TEST_VERBOSE"))
        printf("    %s: %s: worst error %.3g of its bound\n", what, name, worst);
    if (bad) {
        char nterms[48] = "";
        if (terms)
            snprintf(nterms, sizeof nterms, ", %lld term(s)", (long long)terms[first]);
        rt_logf(log, "  %s: %s: %lld of %lld element(s) off; first [%lld] = %.9g, reference %.9g (sum |terms| %.4g%s, "
                "bound %.3g)\n", what, name, (long long)bad, (long long)o->numel, (long long)first, got[first],
                ref[first], abs_terms ? abs_terms[first] : 0.0, nterms, first_bound);
        problems++;
    }
    free(got);
    return problems;
}

/* indices: every element written, nothing around changed, every value exactly the reference's. */
static int check_indices(rt_log_t *log, const char *what, const operand_t *o, const uint8_t *snap, const int64_t *ref)
{
    int problems = 0;
    int64_t *got = rt_xmalloc(sizeof(int64_t) * (size_t)(o->numel > 0 ? o->numel : 1));
    problems += operand_check_written(log, what, "indices", o, snap, NULL, got);
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < o->numel; i++)
        if (got[i] != ref[i] && bad++ == 0)
            first = i;
    if (bad) {
        rt_logf(log, "  %s: indices: %lld of %lld wrong; first [%lld] = %lld, reference %lld\n", what, (long long)bad,
                (long long)o->numel, (long long)first, (long long)got[first], (long long)ref[first]);
        problems++;
    }
    free(got);
    return problems;
}

/* rudnn_last_kernel() after a call that computed something names a "pooling." kernel. */
static int check_kernel(rt_log_t *log, const char *what)
{
    if (strncmp(call_kernel, "pooling.", 8) == 0 && call_kernel[8])
        return 0;
    rt_logf(log, "  %s: rudnn_last_kernel() is \"%s\", not a \"pooling.<kernel>\"\n", what, call_kernel);
    return 1;
}

/* The inputs' buffers hold their bytes. */
static int check_inputs(rt_log_t *log, const char *what, operand_t *const *ins, int n)
{
    int problems = 0;
    static const char *const names[] = {"x", "dy"};
    for (int i = 0; i < n; i++)
        if (!operand_unchanged(ins[i])) {
            rt_logf(log, "  %s: the input %s's buffer changed\n", what, names[i]);
            problems++;
        }
    return problems;
}

/* One mode of a case: the forward (with indices for MAX, twice, then without), the backward
 * (twice), each against the reference. Returns the reference's y (for the averages' comparison). */
static double *run_mode(rt_log_t *log, problem_t *p, int mode)
{
    const pcase_t *c = p->c;
    char what[160];
    const pool_ref_shape_t s = shape_of(c, mode);
    const rudnn_pool_options_t o = options_of(c, mode);
    const int64_t nx = pool_ref_x_count(&s), ny = pool_ref_y_count(&s);
    const size_t nxs = (size_t)(nx > 0 ? nx : 1), nys = (size_t)(ny > 0 ? ny : 1);
    double *ref_y = rt_xcalloc(nys, sizeof(double)), *abs_y = rt_xcalloc(nys, sizeof(double));
    double *ref_dx = rt_xcalloc(nxs, sizeof(double)), *abs_dx = rt_xcalloc(nxs, sizeof(double));
    int64_t *ref_idx = rt_xcalloc(nys, sizeof(int64_t)), *terms = rt_xcalloc(nxs, sizeof(int64_t));
    assert_int_equal(pool_ref_forward(&s, p->hx, ref_y, ref_idx, abs_y), 0);
    assert_int_equal(pool_ref_backward(&s, p->hx, p->hdy, ref_dx, abs_dx, terms), 0);
    const int is_max = mode == POOL_REF_MAX;
    const int64_t n_window = pool_ref_window_count(&s), n_overlap = pool_ref_max_overlap(&s);
    operand_t *const fwd_in[1] = {&p->x};
    operand_t *const bwd_in[2] = {&p->x, &p->dy};

    /* forward, with indices for MAX, twice */
    uint8_t *first_y = NULL, *first_i = NULL;
    for (int rep = 0; rep < 2; rep++) {
        snprintf(what, sizeof what, "%s/%s/%s/forward%s", rudnn_dtype_name(p->dt), c->name, mode_names[mode],
                 rep ? " (again)" : "");
        operand_poison(&p->y);
        operand_poison(&p->idx);
        const rudnn_status_t st = call_forward(p, &o, is_max);
        if (st) {
            rt_logf(log, "  %s: returned %s: %s\n", what, rudnn_status_string(st), call_msg);
            log->failures++;
            break;
        }
        int problems = check_kernel(log, what) + check_inputs(log, what, fwd_in, 1);
        uint8_t *sy = operand_snapshot(&p->y), *si = operand_snapshot(&p->idx);
        if (!is_max && memcmp(si, p->idx.image, p->idx.bytes)) {
            rt_logf(log, "  %s: the indices' buffer (not passed) changed\n", what);
            problems++;
        }
        if (rep == 0) {
            problems += check_values(log, what, "y", &p->y, sy, ref_y, abs_y, NULL, tol_avg(n_window), is_max);
            if (is_max)
                problems += check_indices(log, what, &p->idx, si, ref_idx);
            first_y = sy, first_i = si;
        } else {
            if (memcmp(sy, first_y, p->y.bytes) || (is_max && memcmp(si, first_i, p->idx.bytes))) {
                rt_logf(log, "  %s: the same call twice wrote different bits\n", what);
                problems++;
            }
            free(sy), free(si);
        }
        log->failures += problems != 0;
    }
    /* MAX without indices: y as with them */
    if (is_max && first_y) {
        snprintf(what, sizeof what, "%s/%s/%s/forward without indices", rudnn_dtype_name(p->dt), c->name,
                 mode_names[mode]);
        operand_poison(&p->y);
        operand_poison(&p->idx);
        const rudnn_status_t st = call_forward(p, &o, 0);
        if (st) {
            rt_logf(log, "  %s: returned %s: %s\n", what, rudnn_status_string(st), call_msg);
            log->failures++;
        } else {
            int problems = check_kernel(log, what) + check_inputs(log, what, fwd_in, 1);
            uint8_t *sy = operand_snapshot(&p->y);
            if (memcmp(sy, first_y, p->y.bytes)) {
                /* say how: values (and written-ness) first */
                if (!check_values(log, what, "y", &p->y, sy, ref_y, abs_y, NULL, 0, 1))
                    rt_logf(log, "  %s: y's bits differ from the call with indices\n", what);
                problems++;
            }
            if (!operand_unchanged(&p->idx)) {
                rt_logf(log, "  %s: the indices' buffer (not passed) changed\n", what);
                problems++;
            }
            free(sy);
            log->failures += problems != 0;
        }
    }
    free(first_y), free(first_i);

    /* backward, twice */
    uint8_t *first_dx = NULL;
    for (int rep = 0; rep < 2; rep++) {
        snprintf(what, sizeof what, "%s/%s/%s/backward%s", rudnn_dtype_name(p->dt), c->name, mode_names[mode],
                 rep ? " (again)" : "");
        operand_poison(&p->dx);
        const rudnn_status_t st = call_backward(p, &o);
        if (st) {
            rt_logf(log, "  %s: returned %s: %s\n", what, rudnn_status_string(st), call_msg);
            log->failures++;
            break;
        }
        int problems = check_kernel(log, what) + check_inputs(log, what, bwd_in, 2);
        uint8_t *sdx = operand_snapshot(&p->dx);
        if (rep == 0) {
            problems += check_values(log, what, "dx", &p->dx, sdx, ref_dx, abs_dx, is_max ? terms : NULL,
                                     is_max ? tol_sum(n_overlap) : tol_avg(n_overlap), 0);
            first_dx = sdx;
        } else {
            if (memcmp(sdx, first_dx, p->dx.bytes)) {
                rt_logf(log, "  %s: the same call twice wrote different bits\n", what);
                problems++;
            }
            free(sdx);
        }
        log->failures += problems != 0;
    }
    free(first_dx);
    free(abs_y), free(ref_dx), free(abs_dx), free(ref_idx), free(terms);
    return ref_y;
}

static void run_case(rt_log_t *log, const pcase_t *c, rudnn_dtype_t dt)
{
    check_ceil_claim(log, c);
    problem_t p;
    if (problem_make(log, &p, c, dt)) {
        problem_free(&p);
        return;
    }
    double *refs[3] = {NULL, NULL, NULL};
    for (int mode = 0; mode < 3; mode++)
        if (c->modes & (1 << mode))
            refs[mode] = run_mode(log, &p, mode);
    /* the averages must differ somewhere by more than their tolerance, where the case pads or rounds up */
    int pads = c->ceil;
    for (int i = 0; i < c->d; i++)
        pads |= c->pad[i] > 0;
    if (refs[1] && refs[2] && pads) {
        const pool_ref_shape_t s = shape_of(c, POOL_REF_AVG_INCLUDE_PAD);
        const int64_t ny = pool_ref_y_count(&s);
        int64_t differ = 0;
        for (int64_t i = 0; i < ny; i++)
            differ += fabs(refs[1][i] - refs[2][i]) > 4 * rt_half_ulp(dt, fmax(fabs(refs[1][i]), fabs(refs[2][i])));
        if (getenv("RUDNN_TEST_VERBOSE"))
            printf("    %s/%s: include and exclude pad differ at %lld of %lld outputs\n", rudnn_dtype_name(dt),
                   c->name, (long long)differ, (long long)ny);
        if (!differ) {
            rt_logf(log, "  %s/%s: the case is wrong: AVG_INCLUDE_PAD and AVG_EXCLUDE_PAD agree everywhere\n",
                    rudnn_dtype_name(dt), c->name);
            log->failures++;
        }
    }
    for (int mode = 0; mode < 3; mode++)
        free(refs[mode]);
    problem_free(&p);
}

/* ---- cmocka tests ---------------------------------------------------------------------------------- */

typedef struct unit {
    rudnn_dtype_t dt;
    const pcase_t *c;
    char name[64];
} unit_t;

static void test_case(void **state)
{
    const unit_t *u = *state;
    rt_log_t *log = rt_log_new();
    run_case(log, u->c, u->dt);
    rt_log_finish_free(log, "check(s)");
}

/* N = 0 and C = 0: every call succeeds and writes no byte of any buffer (outputs poisoned). */
static void test_empty(void **state)
{
    const rudnn_dtype_t dt = *(const rudnn_dtype_t *)*state;
    rt_log_t *log = rt_log_new();
    for (int which = 0; which < 2; which++) {
        const pcase_t c = {which ? "c0" : "n0", 2, which ? 2 : 0, which ? 0 : 3, {5, 6}, {3, 2}, {2, 1}, {1, 1},
                           {1, 1}, 0, CE_NONE, M_ALL, D_RANDOM, 1, 2, 0, 2};
        problem_t p;
        if (problem_make(log, &p, &c, dt)) {
            problem_free(&p);
            continue;
        }
        for (int mode = 0; mode < 3; mode++) {
            const rudnn_pool_options_t o = options_of(&c, mode);
            for (int call = 0; call < 3; call++) {
                if (call == 1 && mode != RUDNN_POOL_MAX)
                    continue; /* forward with indices: MAX only */
                char what[128];
                snprintf(what, sizeof what, "%s/%s/%s/%s", rudnn_dtype_name(dt), c.name, mode_names[mode],
                         call == 0 ? "forward" : call == 1 ? "forward with indices" : "backward");
                operand_poison(&p.y), operand_poison(&p.idx), operand_poison(&p.dx);
                const rudnn_status_t st = call < 2 ? call_forward(&p, &o, call == 1) : call_backward(&p, &o);
                if (st) {
                    rt_logf(log, "  %s: returned %s: %s\n", what, rudnn_status_string(st), call_msg);
                    log->failures++;
                    continue;
                }
                operand_t *all[] = {&p.x, &p.dy, &p.y, &p.idx, &p.dx};
                static const char *const names[] = {"x", "dy", "y", "indices", "dx"};
                for (int k = 0; k < 5; k++)
                    if (!operand_unchanged(all[k])) {
                        rt_logf(log, "  %s: %s's buffer was written\n", what, names[k]);
                        log->failures++;
                    }
            }
        }
        problem_free(&p);
    }
    rt_log_finish_free(log, "check(s)");
}

/* rudnn_pool_output_dims against the reference's formula over a sweep of shapes: success with the
 * reference's dims, BAD_SHAPE where a P_i would be below 1; BAD_PARAM for options out of range;
 * y_dims untouched on error. */
static void test_output_dims(void **state)
{
    (void)state;
    rt_log_t *log = rt_log_new();
    int checked = 0, valid = 0, ceil_differs = 0;
    for (int d = 1; d <= 3; d++)
        for (int64_t S = 1; S <= 9; S++)
            for (int64_t R = 1; R <= 5; R++)
                for (int64_t st = 1; st <= 3; st++)
                    for (int64_t pad = 0; pad <= R / 2; pad++)
                        for (int64_t dil = 1; dil <= 3; dil++)
                            for (int ceil = 0; ceil < 2; ceil++) {
                                if ((d != 1 && (S % 2 == 0 || dil == 2)) || (d == 3 && st == 2))
                                    continue; /* fewer shapes in 2D and 3D: the last dim varies as in 1D */
                                const int mode = dil == 1 && (S + R) % 2 ? POOL_REF_AVG_EXCLUDE_PAD : POOL_REF_MAX;
                                /* the dims before the last vary less: S + 1, window 2, stride 1 */
                                pcase_t c = {"dims", d, 3, 4, {S, S, S}, {R, R, R}, {st, st, st}, {pad, pad, pad},
                                             {dil, dil, dil}, ceil, CE_NONE, 0, 0, 0, 0, 0, 0};
                                for (int i = 0; i < d - 1; i++) {
                                    c.S[i] = S + 1 + i, c.R[i] = 2, c.st[i] = 1 + i, c.pad[i] = i % 2;
                                    c.dil[i] = mode == POOL_REF_MAX ? 2 : 1;
                                }
                                pool_ref_shape_t s = shape_of(&c, mode);
                                rudnn_pool_options_t o = options_of(&c, mode);
                                int64_t xd[5] = {3, 4}, yd[5] = {-7, -7, -7, -7, -7}, P[3];
                                for (int i = 0; i < d; i++)
                                    xd[2 + i] = c.S[i];
                                const int r = pool_ref_out_size(&s, P);
                                const rudnn_status_t got = rudnn_pool_output_dims(d + 2, xd, &o, yd);
                                int good;
                                if (r == POOL_REF_OK) {
                                    good = got == RUDNN_STATUS_SUCCESS && yd[0] == 3 && yd[1] == 4;
                                    for (int i = 0; good && i < d; i++)
                                        good = yd[2 + i] == P[i];
                                    valid++;
                                    if (ceil) {
                                        pool_ref_shape_t f = s;
                                        int64_t Pf[3];
                                        f.ceil_mode = 0;
                                        ceil_differs +=
                                            pool_ref_out_size(&f, Pf) != POOL_REF_OK || Pf[d - 1] != P[d - 1];
                                    }
                                } else {
                                    good = got == (r == POOL_REF_BAD_SHAPE ? RUDNN_STATUS_BAD_SHAPE
                                                                           : RUDNN_STATUS_BAD_PARAM);
                                    for (int i = 0; good && i < 5; i++)
                                        good = yd[i] == -7;
                                }
                                checked++;
                                if (!good) {
                                    rt_logf(log, "  d %d S %lld R %lld stride %lld pad %lld dil %lld %s %s: %s, y_dims "
                                            "[.., %lld]; the reference: %s P %lld\n", d, (long long)S, (long long)R,
                                            (long long)st, (long long)pad, (long long)dil, ceil ? "ceil" : "floor",
                                            mode_names[mode], rudnn_status_string(got), (long long)yd[d + 1],
                                            r == POOL_REF_OK           ? "valid,"
                                            : r == POOL_REF_BAD_SHAPE ? "BAD_SHAPE"
                                                                      : "BAD_PARAM",
                                            r == POOL_REF_OK ? (long long)P[d - 1] : -1LL);
                                    log->failures++;
                                }
                            }
    /* options out of range: BAD_PARAM, y_dims untouched */
    {
        const pcase_t base = {"param", 2, 2, 3, {9, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 0, CE_NONE, 0, 0, 0, 0, 0, 0};
        const int64_t xd[4] = {2, 3, 9, 9};
        for (int k = 0; k < 12; k++) {
            int mode = POOL_REF_MAX;
            pcase_t c = base;
            const char *why = "";
            switch (k) {
            case 0: c.R[1] = 0, why = "window 0"; break;
            case 1: c.st[0] = 0, why = "stride 0"; break;
            case 2: c.dil[1] = 0, why = "dilation 0"; break;
            case 3: c.pad[0] = 2, why = "padding 2 > window 3 / 2"; break;
            case 4: c.pad[1] = -1, why = "padding -1"; break;
            case 5: c.dil[0] = 2, mode = POOL_REF_AVG_INCLUDE_PAD, why = "dilation 2 for AVG_INCLUDE_PAD"; break;
            case 6: c.dil[1] = 2, mode = POOL_REF_AVG_EXCLUDE_PAD, why = "dilation 2 for AVG_EXCLUDE_PAD"; break;
            case 7: c.ceil = 2, why = "ceil_mode 2"; break;
            case 8: mode = 3, why = "mode 3"; break;
            case 9: c.R[0] = RUDNN_POOL_MAX_PARAM + 1, why = "window 2^24 + 1"; break;
            case 10: c.st[1] = RUDNN_POOL_MAX_PARAM + 1, why = "stride 2^24 + 1"; break;
            default: c.dil[0] = RUDNN_POOL_MAX_PARAM + 1, why = "dilation 2^24 + 1"; break;
            }
            const pool_ref_shape_t s = shape_of(&c, mode);
            int64_t P[3];
            rudnn_pool_options_t o = options_of(&c, mode == 3 ? 0 : mode);
            o.mode = (rudnn_pool_mode_t)mode;
            int64_t yd[4] = {-7, -7, -7, -7};
            const rudnn_status_t got = rudnn_pool_output_dims(4, xd, &o, yd);
            checked++;
            if (pool_ref_out_size(&s, P) != POOL_REF_BAD_PARAM) {
                rt_logf(log, "  the reference accepts %s\n", why);
                log->failures++;
            }
            if (got != RUDNN_STATUS_BAD_PARAM || yd[0] != -7 || yd[1] != -7 || yd[2] != -7 || yd[3] != -7) {
                rt_logf(log, "  %s: %s (%s), y_dims [%lld, %lld, %lld, %lld]; expected BAD_PARAM, untouched\n", why,
                        rudnn_status_string(got), rudnn_last_error(), (long long)yd[0], (long long)yd[1],
                        (long long)yd[2], (long long)yd[3]);
                log->failures++;
            }
        }
    }
    /* N = 0, C = 0: valid */
    {
        const pcase_t c = {"nc0", 2, 0, 0, {5, 6}, {3, 2}, {2, 1}, {1, 1}, {1, 1}, 1, CE_NONE, 0, 0, 0, 0, 0, 0};
        const rudnn_pool_options_t o = options_of(&c, POOL_REF_MAX);
        const pool_ref_shape_t s = shape_of(&c, POOL_REF_MAX);
        int64_t P[3];
        assert_int_equal(pool_ref_out_size(&s, P), POOL_REF_OK);
        for (int k = 0; k < 2; k++) {
            const int64_t xd[4] = {k ? 2 : 0, k ? 0 : 3, 5, 6};
            int64_t yd[4] = {-7, -7, -7, -7};
            const rudnn_status_t got = rudnn_pool_output_dims(4, xd, &o, yd);
            checked++;
            if (got || yd[0] != xd[0] || yd[1] != xd[1] || yd[2] != P[0] || yd[3] != P[1]) {
                rt_logf(log, "  N %lld C %lld: %s, y_dims [%lld, %lld, %lld, %lld]; expected [%lld, %lld, %lld, "
                        "%lld]\n",
                        (long long)xd[0], (long long)xd[1], rudnn_status_string(got), (long long)yd[0],
                        (long long)yd[1], (long long)yd[2], (long long)yd[3], (long long)xd[0], (long long)xd[1],
                        (long long)P[0], (long long)P[1]);
                log->failures++;
            }
        }
    }
    printf("  output_dims: %d shape(s) checked (%d valid, %d of them where ceil_mode changes the last P)\n", checked,
           valid, ceil_differs);
    rt_log_finish_free(log, "shape(s)");
}

/* rudnn_pool_options_init: MAX, window 1, stride 1, padding 0, dilation 1, floor, in every entry. */
static void test_options_init(void **state)
{
    (void)state;
    rudnn_pool_options_t o;
    memset(&o, 0x5a, sizeof o);
    rudnn_pool_options_init(&o);
    assert_int_equal(o.mode, RUDNN_POOL_MAX);
    assert_int_equal(o.ceil_mode, 0);
    for (int i = 0; i < RUDNN_POOL_MAX_SPATIAL; i++) {
        assert_int_equal(o.window[i], 1);
        assert_int_equal(o.stride[i], 1);
        assert_int_equal(o.padding[i], 0);
        assert_int_equal(o.dilation[i], 1);
    }
}

/* ---- a backend without the family --------------------------------------------------------------------- */

/* A valid forward and backward (MAX, F32, [1, 2, 4, 4] -> [1, 2, 2, 2]). Returns the forward's status;
 * *backward_st the backward's; *why the forward's message; *wrote whether an output was written. */
static rudnn_status_t probe(rudnn_status_t *backward_st, char *why, size_t cap, char *why_b, size_t cap_b, int *wrote)
{
    const pcase_t c = {"probe", 2, 1, 2, {4, 4}, {2, 2}, {2, 2}, {0, 0}, {1, 1},
                       0, CE_NONE, M_MAX, D_RANDOM, 0, 0, 0, 0};
    problem_t p;
    rt_log_t *log = rt_log_new();
    why[0] = why_b[0] = 0;
    *wrote = 0;
    if (problem_make(log, &p, &c, RUDNN_F32)) {
        fprintf(stderr, "%s", log->text);
        free(log);
        problem_free(&p);
        *backward_st = RUDNN_STATUS_INTERNAL;
        snprintf(why, cap, "rudnn_pool_output_dims failed");
        return RUDNN_STATUS_INTERNAL;
    }
    free(log);
    const rudnn_pool_options_t o = options_of(&c, RUDNN_POOL_MAX);
    const rudnn_status_t st = call_forward(&p, &o, 1);
    snprintf(why, cap, "%s", st ? call_msg : "");
    *backward_st = call_backward(&p, &o);
    snprintf(why_b, cap_b, "%s", *backward_st ? call_msg : "");
    if (st == RUDNN_STATUS_NOT_SUPPORTED && *backward_st == RUDNN_STATUS_NOT_SUPPORTED)
        *wrote = !operand_unchanged(&p.y) || !operand_unchanged(&p.idx) || !operand_unchanged(&p.dx);
    problem_free(&p);
    return st;
}

int main(int argc, char **argv)
{
    rt_set_filters(argc, argv);
    char group[64];
    snprintf(group, sizeof group, "pooling-%s", rt_requested_backend());
    rt_open_or_skip(group);
    rudnn_status_t bst;
    char why[1024], why_b[1024];
    int wrote = 0;
    const rudnn_status_t fst = probe(&bst, why, sizeof why, why_b, sizeof why_b, &wrote);
    if (fst == RUDNN_STATUS_NOT_SUPPORTED || bst == RUDNN_STATUS_NOT_SUPPORTED) {
        const int ok = fst == RUDNN_STATUS_NOT_SUPPORTED && bst == RUDNN_STATUS_NOT_SUPPORTED &&
                       rt_mentions(why, "pool") && rt_mentions(why_b, "pool") && !wrote;
        char detail[2200];
        snprintf(detail, sizeof detail, "forward %s: %s; backward %s: %s%s", rudnn_status_string(fst), why,
                 rudnn_status_string(bst), why_b, wrote ? "; an output was written" : "");
        return rt_family_absent_exit(ok, "pooling", "pooling", "a valid forward and backward, nothing written", why,
                                     detail);
    }
    if (fst || bst) {
        printf("backend %s: the probe failed: forward %s: %s; backward %s: %s\n", rt_requested_backend(),
               rudnn_status_string(fst), why, rudnn_status_string(bst), why_b);
        rt_close();
        return 1;
    }
    static unit_t units[DTYPE_COUNT * CASE_COUNT];
    static struct CMUnitTest tests[DTYPE_COUNT * CASE_COUNT + DTYPE_COUNT + 2];
    static rudnn_dtype_t empty_dtypes[DTYPE_COUNT];
    static char empty_names[DTYPE_COUNT][32];
    size_t n = 0;
    tests[n++] = (struct CMUnitTest){"api/output_dims", test_output_dims, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"api/options_init", test_options_init, NULL, NULL, NULL};
    for (size_t d = 0; d < DTYPE_COUNT; d++) {
        for (size_t i = 0; i < CASE_COUNT; i++) {
            unit_t *u = &units[d * CASE_COUNT + i];
            u->dt = dtypes[d];
            u->c = &cases[i];
            snprintf(u->name, sizeof u->name, "%s/%s", rudnn_dtype_name(dtypes[d]), cases[i].name);
            tests[n++] = (struct CMUnitTest){u->name, test_case, NULL, NULL, u};
        }
        empty_dtypes[d] = dtypes[d];
        snprintf(empty_names[d], sizeof empty_names[d], "%s/n0_c0", rudnn_dtype_name(dtypes[d]));
        tests[n++] = (struct CMUnitTest){empty_names[d], test_empty, NULL, NULL, &empty_dtypes[d]};
    }
    const int failed = _cmocka_run_group_tests(group, tests, n, NULL, NULL);
    printf("%s: largest error as a fraction of its bound (averages, max backward): f32 %.4f, f16 %.4f, bf16 %.4f\n",
           group, worst_ratio[0], worst_ratio[1], worst_ratio[2]);
    rt_close();
    return rt_exit_code(failed);
}
