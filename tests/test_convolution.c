/* Numeric tests of convolution (include/rudnn/convolution.h) against the FP64 reference of
 * reference/convolution_ref.c, through the public API; run once per backend (meson registers
 * convolution-opencl, -cuda, -hip with RUDNN_BACKEND set). A backend whose plugin has no
 * convolution kernels (no table: CUDA and HIP in this release) must answer NOT_SUPPORTED, naming
 * the family, for rudnn_conv_kernel_count, rudnn_conv_resolve, rudnn_conv_workspace_size and a
 * valid call of each direction (writing nothing); the suite checks that, prints
 * "backend <b>: SKIPPED (convolution: NOT_SUPPORTED ...)" and exits 77 (tests/oldfam's plugin,
 * RUDNN_BACKEND=hip with RUDNN_BACKEND_PATH at its folder, shows it without a GPU). On OpenCL, whose
 * plugin has the family, a missing table fails the suite instead.
 *
 * What runs, each case for F32, F16 and BF16, each direction (forward, data backward, weight
 * backward) with each strategy (Direct, ImplicitGemm, Autotune):
 *   2d_s2p1           the main case: 2D, odd sizes, stride 2, padding 1, bias and dbias
 *   1d, 3d            one and three spatial dims (3D F32 asked for ImplicitGemm: the override)
 *   dil2, pad_big     dilation 2; padding larger than the filter's radius
 *   1x1, stride_gt_r  a 1x1 filter; stride larger than the filter (dx positions no term reaches)
 *   groups2, dw, dw_k2c, 3d_groups_dil   groups 2; depthwise (G = C = K) and K = 2C; 3D grouped
 *                     and dilated (groups > 1 asked for ImplicitGemm: the override)
 *   nobias, n1        no bias / dbias; N = 1
 *   clast             x, y, dy, dx and w channels-last (rudnn_conv_channels_last)
 *   strided_x         x (and dx) a padded-stride, non-contiguous view
 *   mixed, mixed2     a different layout per tensor in one call (contiguous, channels-last,
 *                     padded strides, a strided bias), tensors at nonzero offsets
 *   h1                a spatial dim of size 1 (its stride never stepped), channels-last
 *   tiles             K 36, 9 x 9: several ImplicitGemm tiles along every side of each
 *                     direction's product (32 x 32 tiles, 8-deep slices), none of them full
 * and n0 (N = 0: forward and data backward write nothing; weight backward writes zeros to dw and
 * dbias over a sentinel), the output dims, channels-last descriptors and the kernel list.
 *
 * Every call: rudnn_conv_resolve first (for the same arguments); the kernel it names is a listed
 * "convolution." candidate of the call's direction and rudnn_last_kernel() after the call names it
 * (Autotune: the kernel resolve names after the call, from the cache the call filled, whose reason
 * then says "autotuned"); Direct resolves to Direct, ImplicitGemm to ImplicitGemm except the guide's
 * overrides (3D F32, groups > 1), which resolve to Direct with a reason that mentions the override;
 * every output element is written (outputs are poisoned with a sentinel first), no byte of an
 * output's buffer outside its elements changes (padded-stride gaps, the head before the tensor,
 * the tail after it), no byte of an input's buffer changes; the same call again writes the same
 * bits (determinism); Autotune's output has the same bits as the explicit strategy's run of the
 * kernel Autotune picked (same kernel, same inputs).
 *
 * Tolerance. Inputs are drawn as doubles in [-1, 1], rounded to the dtype on the host (rudnn's
 * conversions) and the reference computes on exactly those values, so what is left is the kernel's
 * arithmetic. The contract says the sums run in FP32 for every dtype. A product of two F16 or BF16
 * values is exact in FP32 (22 or 16 significant bits), and the FP32 recursive sum of n terms is
 * within (n + 1) 2^-24 sum |terms| of the exact sum; the result is then rounded once to the
 * output's dtype (half an ulp of the output). So each output element must satisfy
 *   |got - ref| <= tol * sum|terms| + half_ulp_dtype(max(|got|, |ref|)),
 *   tol = max(1e-5, (n + 2) 2^-24)  for F32, F16 and BF16 alike,
 * with n the most terms an output of that direction sums (bias counted as one more): (n + 2) 2^-24
 * stays under 1e-5 up to n = 165 (the largest here, weight backward's N prod P, is 162), so 1e-5
 * is what applies, with room for FMA contraction and any summation order. The dtype enters through
 * the half-ulp term, relative at most 2^-24 (F32), 2^-11 = 4.9e-4 (F16), 2^-8 = 3.9e-3 (BF16); it
 * never drops below the half ulp of the dtype's smallest normal (F16: 2^-25), which is the floor
 * for zeros and tiny outputs. NaN never passes. The summary line prints the largest error as a
 * fraction of its bound per dtype: F16 and BF16 near 1 (their outputs are correctly rounded FP32
 * sums, up to the half ulp), F32 a few percent.
 *
 * Usage: test_convolution [glob of <dtype>/<case> or api/<test>]. RUDNN_TEST_VERBOSE=1 prints each
 * run's worst error and the resolve reasons. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rudnn/convolution.h>

#include "common.h"
#include "operand.h"
#include "reference/convolution_ref.h"

static const rudnn_dtype_t dtypes[] = {RUDNN_F32, RUDNN_F16, RUDNN_BF16};
#define DTYPE_COUNT 3

static const rudnn_conv_strategy_t strategies[] = {RUDNN_CONV_DIRECT, RUDNN_CONV_IMPLICIT_GEMM, RUDNN_CONV_AUTOTUNE};
static const char *const strategy_names[] = {"Autotune", "Direct", "ImplicitGemm"};
static const char *const direction_names[] = {"forward", "data_backward", "weight_backward"};

/* ---- cases ------------------------------------------------------------------------------------ */

enum { L_CONTIG = OPERAND_CONTIG, L_CLAST = OPERAND_CLAST, L_PADDED = OPERAND_PADDED };

typedef struct ccase {
    const char *name;
    int d;
    int64_t N, C, K, G;
    int64_t S[3], R[3], st[3], pad[3], dil[3];
    int bias;         /* forward's bias and weight backward's dbias present */
    int lx, lw, ly;   /* layouts of x and dx, of w and dw, of y and dy */
    int bias_strided; /* bias / dbias with element stride 3 */
    size_t head;      /* elements before each tensor in its buffer */
} ccase_t;

static const ccase_t cases[] = {
    /* name           d  N  C   K   G   S            R          stride     pad        dil       bias lx lw ly bs head */
    {"2d_s2p1",       2, 2, 5,  6,  1, {9, 7},     {3, 3},    {2, 2},    {1, 1},    {1, 1},    1, 0, 0, 0, 0, 0},
    {"1d",            1, 2, 4,  3,  1, {11},       {3},       {1},       {1},       {1},       1, 0, 0, 0, 0, 0},
    {"3d",            3, 2, 3,  4,  1, {5, 6, 4},  {3, 2, 3}, {1, 2, 1}, {1, 0, 1}, {1, 1, 1}, 1, 0, 0, 0, 0, 0},
    {"dil2",          2, 2, 3,  4,  1, {9, 8},     {3, 3},    {1, 1},    {2, 1},    {2, 2},    1, 0, 0, 0, 0, 0},
    {"pad_big",       2, 2, 3,  2,  1, {5, 6},     {3, 2},    {1, 2},    {3, 2},    {1, 1},    1, 0, 0, 0, 0, 0},
    {"1x1",           2, 2, 8,  12, 1, {5, 7},     {1, 1},    {1, 1},    {0, 0},    {1, 1},    1, 0, 0, 0, 0, 0},
    {"stride_gt_r",   2, 2, 3,  5,  1, {9, 8},     {2, 2},    {3, 3},    {0, 1},    {1, 1},    1, 0, 0, 0, 0, 0},
    {"groups2",       2, 2, 6,  4,  2, {7, 6},     {3, 3},    {1, 1},    {1, 1},    {1, 1},    1, 0, 0, 0, 0, 0},
    {"dw",            2, 2, 8,  8,  8, {7, 7},     {3, 3},    {1, 1},    {1, 1},    {1, 1},    1, 0, 0, 0, 0, 0},
    {"dw_k2c",        2, 2, 4,  8,  4, {6, 7},     {3, 3},    {2, 1},    {1, 1},    {1, 1},    0, 0, 0, 0, 0, 0},
    {"3d_groups_dil", 3, 2, 4,  6,  2, {5, 5, 5},  {2, 2, 2}, {1, 1, 2}, {0, 1, 1}, {2, 1, 1}, 1, 0, 0, 0, 0, 0},
    {"nobias",        2, 2, 4,  4,  1, {6, 5},     {3, 3},    {1, 1},    {1, 1},    {1, 1},    0, 0, 0, 0, 0, 0},
    {"n1",            2, 1, 5,  3,  1, {7, 9},     {3, 3},    {2, 1},    {1, 1},    {1, 1},    1, 0, 0, 0, 0, 0},
    {"clast",         2, 2, 5,  6,  1, {7, 9},     {3, 3},    {2, 2},    {1, 1},    {1, 1},    1, 1, 1, 1, 0, 0},
    {"clast_3d",      3, 2, 3,  4,  1, {4, 5, 3},  {3, 3, 1}, {1, 1, 1}, {1, 1, 0}, {1, 1, 1}, 0, 1, 0, 1, 0, 0},
    {"strided_x",     2, 2, 5,  4,  1, {7, 6},     {3, 3},    {2, 1},    {1, 1},    {1, 1},    1, 2, 0, 0, 0, 0},
    {"mixed",         2, 2, 6,  4,  1, {7, 7},     {3, 3},    {2, 2},    {1, 1},    {1, 1},    1, 1, 2, 0, 1, 5},
    {"mixed2",        1, 2, 6,  8,  2, {10},       {3},       {2},       {2},       {1},       1, 2, 1, 1, 1, 3},
    {"h1",            2, 2, 3,  5,  1, {1, 9},     {1, 3},    {1, 2},    {0, 1},    {1, 1},    1, 1, 0, 1, 0, 0},
    {"tiles",         2, 2, 9,  36, 1, {9, 9},     {3, 3},    {1, 1},    {1, 1},    {1, 1},    1, 0, 0, 0, 0, 0},
};
#define CASE_COUNT (sizeof cases / sizeof cases[0])

static conv_ref_shape_t shape_of(const ccase_t *c)
{
    conv_ref_shape_t s;
    memset(&s, 0, sizeof s);
    s.spatial = c->d, s.batch = c->N, s.in_channels = c->C, s.out_channels = c->K, s.groups = c->G;
    for (int i = 0; i < c->d; i++) {
        s.in_size[i] = c->S[i], s.filter_size[i] = c->R[i], s.stride[i] = c->st[i];
        s.padding[i] = c->pad[i], s.dilation[i] = c->dil[i];
    }
    return s;
}

static rudnn_conv_options_t options_of(const ccase_t *c)
{
    rudnn_conv_options_t o;
    rudnn_conv_options_init(&o);
    for (int i = 0; i < c->d; i++)
        o.stride[i] = c->st[i], o.padding[i] = c->pad[i], o.dilation[i] = c->dil[i];
    for (int i = c->d; i < RUDNN_CONV_MAX_SPATIAL; i++) /* ignored entries: garbage must not matter */
        o.stride[i] = 0, o.padding[i] = -7, o.dilation[i] = 0;
    o.groups = c->G;
    return o;
}

/* ---- tolerance -------------------------------------------------------------------------------- */

/* tol of the header comment, for n terms (bias counted). */
static double acc_tol(int64_t n)
{
    const double t = (double)(n + 2) * 0x1p-24;
    return t > 1e-5 ? t : 1e-5;
}


/* ---- the kernel list ---------------------------------------------------------------------------- */

/* 1 when name is a listed candidate; its strategy and direction then in *s, *d. */
static int kernel_listed(const char *name, rudnn_conv_strategy_t *s, rudnn_conv_direction_t *d)
{
    int n = 0;
    if (!name || rudnn_conv_kernel_count(rt_ctx, &n))
        return 0;
    for (int i = 0; i < n; i++) {
        const char *k;
        if (!rudnn_conv_kernel_info(rt_ctx, i, &k, s, d) && k && strcmp(k, name) == 0)
            return 1;
    }
    return 0;
}

static int strategy_listed(rudnn_conv_strategy_t s, rudnn_conv_direction_t d)
{
    int n = 0;
    if (rudnn_conv_kernel_count(rt_ctx, &n))
        return 0;
    for (int i = 0; i < n; i++) {
        const char *k;
        rudnn_conv_strategy_t ks;
        rudnn_conv_direction_t kd;
        if (!rudnn_conv_kernel_info(rt_ctx, i, &k, &ks, &kd) && ks == s && kd == d)
            return 1;
    }
    return 0;
}

/* ---- one problem -------------------------------------------------------------------------------- */

typedef struct problem {
    const ccase_t *c;
    rudnn_dtype_t dt;
    conv_ref_shape_t s;
    rudnn_conv_options_t opts;
    int64_t ydims[5];
    operand_t x, w, bias, y, dy, dx, dw, dbias;
    double *hx, *hw, *hb, *hdy;
    /* reference per direction: value and sum |terms| of each output */
    double *ref_y, *abs_y, *ref_dx, *abs_dx, *ref_dw, *abs_dw, *ref_db, *abs_db;
} problem_t;

static void problem_make(problem_t *p, const ccase_t *c, rudnn_dtype_t dt)
{
    memset(p, 0, sizeof *p);
    p->c = c, p->dt = dt;
    p->s = shape_of(c);
    p->opts = options_of(c);
    const int rank = c->d + 2;
    int64_t xd[5] = {c->N, c->C}, wd[5] = {c->K, c->C / c->G}, bd[1] = {c->K};
    int64_t P[3];
    assert_int_equal(conv_ref_out_size(&p->s, P), 0);
    for (int i = 0; i < c->d; i++)
        xd[2 + i] = c->S[i], wd[2 + i] = c->R[i];
    rt_assert_status(rudnn_conv_output_dims(rank, xd, wd, &p->opts, p->ydims), RUDNN_STATUS_SUCCESS);
    if (p->ydims[0] != c->N || p->ydims[1] != c->K)
        fail_msg("%s: rudnn_conv_output_dims gave N %lld, K %lld", c->name, (long long)p->ydims[0],
                 (long long)p->ydims[1]);
    for (int i = 0; i < c->d; i++)
        if (p->ydims[2 + i] != P[i])
            fail_msg("%s: rudnn_conv_output_dims gave P_%d = %lld, the reference %lld", c->name, i,
                     (long long)p->ydims[2 + i], (long long)P[i]);
    operand_init_layout(&p->x, dt, rank, xd, c->lx, c->head);
    operand_init_layout(&p->dx, dt, rank, xd, c->lx, c->head);
    operand_init_layout(&p->w, dt, rank, wd, c->lw, c->head);
    operand_init_layout(&p->dw, dt, rank, wd, c->lw, c->head);
    operand_init_layout(&p->y, dt, rank, p->ydims, c->ly, c->head);
    operand_init_layout(&p->dy, dt, rank, p->ydims, c->ly, c->head);
    if (c->bias) {
        operand_init_layout(&p->bias, dt, 1, bd, c->bias_strided ? L_PADDED : L_CONTIG, c->head);
        operand_init_layout(&p->dbias, dt, 1, bd, c->bias_strided ? L_PADDED : L_CONTIG, c->head);
    }
    rt_rng_t rng;
    rt_rng_seed_case(&rng, c->name, (int)dt);
    const int64_t nx = conv_ref_x_count(&p->s), nw = conv_ref_w_count(&p->s), ny = conv_ref_y_count(&p->s);
    p->hx = rt_random_values(&rng, dt, nx);
    p->hw = rt_random_values(&rng, dt, nw);
    p->hdy = rt_random_values(&rng, dt, ny);
    p->hb = rt_random_values(&rng, dt, c->K);
    operand_upload(&p->x, p->hx);
    operand_upload(&p->w, p->hw);
    operand_upload(&p->dy, p->hdy);
    if (c->bias)
        operand_upload(&p->bias, p->hb);
#define ALLOC(n) rt_xcalloc((size_t)((n) > 0 ? (n) : 1), sizeof(double))
    p->ref_y = ALLOC(ny), p->abs_y = ALLOC(ny);
    p->ref_dx = ALLOC(nx), p->abs_dx = ALLOC(nx);
    p->ref_dw = ALLOC(nw), p->abs_dw = ALLOC(nw);
    p->ref_db = ALLOC(c->K), p->abs_db = ALLOC(c->K);
#undef ALLOC
    assert_int_equal(conv_ref_forward(&p->s, p->hx, p->hw, c->bias ? p->hb : NULL, p->ref_y, p->abs_y), 0);
    assert_int_equal(conv_ref_data_backward(&p->s, p->hdy, p->hw, p->ref_dx, p->abs_dx), 0);
    assert_int_equal(conv_ref_weight_backward(&p->s, p->hx, p->hdy, p->ref_dw, p->abs_dw, c->bias ? p->ref_db : NULL,
                                              c->bias ? p->abs_db : NULL),
                     0);
}

static void problem_free(problem_t *p)
{
    operand_t *all[] = {&p->x, &p->w, &p->bias, &p->y, &p->dy, &p->dx, &p->dw, &p->dbias};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        operand_free(all[i]);
    free(p->hx), free(p->hw), free(p->hb), free(p->hdy);
    free(p->ref_y), free(p->abs_y), free(p->ref_dx), free(p->abs_dx);
    free(p->ref_dw), free(p->abs_dw), free(p->ref_db), free(p->abs_db);
}

static const rudnn_tensor_t *opt(const operand_t *o) { return o->buf ? &o->t : NULL; }

static rudnn_conv_tensors_t tensors_of(const problem_t *p, rudnn_conv_direction_t dir)
{
    rudnn_conv_tensors_t t;
    memset(&t, 0, sizeof t);
    if (dir == RUDNN_CONV_FORWARD)
        t.x = &p->x.t, t.w = &p->w.t, t.bias = opt(&p->bias), t.y = &p->y.t;
    else if (dir == RUDNN_CONV_DATA_BACKWARD)
        t.dy = &p->dy.t, t.w = &p->w.t, t.dx = &p->dx.t;
    else
        t.x = &p->x.t, t.dy = &p->dy.t, t.dw = &p->dw.t, t.dbias = opt(&p->dbias);
    return t;
}

/* Message of the last failed call (synchronize and destroys afterwards clear rudnn_last_error). */
static char call_msg[1024];

/* The op of dir on p's tensors. */
static rudnn_status_t call_op(const problem_t *p, rudnn_conv_direction_t dir, rudnn_conv_strategy_t strat,
                              rudnn_buffer_t ws, size_t bytes)
{
    const rudnn_conv_tensors_t t = tensors_of(p, dir);
    if (dir == RUDNN_CONV_FORWARD)
        return rudnn_conv_forward(rt_queue, t.x, t.w, t.bias, &p->opts, strat, ws, bytes, t.y);
    if (dir == RUDNN_CONV_DATA_BACKWARD)
        return rudnn_conv_data_backward(rt_queue, t.dy, t.w, &p->opts, strat, ws, bytes, t.dx);
    return rudnn_conv_weight_backward(rt_queue, t.x, t.dy, &p->opts, strat, ws, bytes, t.dw, t.dbias);
}

/* One call of dir: the workspace query, then the op with a workspace buffer (sized: of exactly the
 * queried size, or 256 bytes when that is 0, a workspace the call needs none of) or NULL (the
 * queue's pool), then a synchronize. */
static rudnn_status_t call(const problem_t *p, rudnn_conv_direction_t dir, rudnn_conv_strategy_t strat, int sized,
                           char kernel[96])
{
    const rudnn_conv_tensors_t t = tensors_of(p, dir);
    size_t bytes = 0;
    kernel[0] = 0;
    call_msg[0] = 0;
    rudnn_status_t st = rudnn_conv_workspace_size(rt_queue, dir, &t, &p->opts, strat, &bytes);
    if (st) {
        snprintf(call_msg, sizeof call_msg, "workspace_size: %s", rudnn_last_error());
        return st;
    }
    rudnn_buffer_t ws = NULL;
    if (sized) {
        bytes = bytes ? bytes : 256;
        st = rudnn_buffer_create(rt_ctx, bytes, &ws);
        if (st) {
            snprintf(call_msg, sizeof call_msg, "%s", rudnn_last_error());
            return st;
        }
    }
    st = call_op(p, dir, strat, ws, ws ? bytes : 0);
    if (!st)
        snprintf(kernel, 96, "%s", rudnn_last_kernel());
    else
        snprintf(call_msg, sizeof call_msg, "%s", rudnn_last_error());
    const rudnn_status_t sync = rudnn_queue_synchronize(rt_queue);
    if (!st && sync)
        snprintf(call_msg, sizeof call_msg, "synchronize: %s", rudnn_last_error());
    if (ws)
        rudnn_buffer_destroy(ws);
    return st ? st : sync;
}

/* The outputs of dir: the main one and (weight backward) dbias, or NULL. */
static operand_t *main_out(problem_t *p, rudnn_conv_direction_t dir)
{
    return dir == RUDNN_CONV_FORWARD ? &p->y : dir == RUDNN_CONV_DATA_BACKWARD ? &p->dx : &p->dw;
}

static operand_t *extra_out(problem_t *p, rudnn_conv_direction_t dir)
{
    return dir == RUDNN_CONV_WEIGHT_BACKWARD && p->dbias.buf ? &p->dbias : NULL;
}

/* Worst error as a fraction of its bound, per dtype, for the summary line. */
static double worst_ratio[DTYPE_COUNT];

/* Checks an output snapshot against the reference: every element written, no byte outside the
 * elements changed, every value within its bound. Returns the number of problems logged. */
static int check_output(rt_log_t *log, const char *what, const char *name, const operand_t *o, const uint8_t *snap,
                        const double *ref, const double *abs_terms, int64_t max_terms)
{
    int problems = 0;
    float *got = rt_xmalloc(sizeof(float) * (size_t)(o->numel > 0 ? o->numel : 1));
    problems += operand_check_written(log, what, name, o, snap, got, NULL);
    const double tol = acc_tol(max_terms);
    int64_t bad = 0, first = -1;
    double worst = 0;
    for (int64_t i = 0; i < o->numel; i++) {
        const double g = got[i], r = ref[i];
        const double bound = tol * abs_terms[i] + rt_half_ulp(o->t.dtype, fmax(fabs(g), fabs(r)));
        const double e = fabs(g - r);
        const double ratio = e == e ? e / bound : INFINITY;
        worst = fmax(worst, ratio);
        if (!(e <= bound) && bad++ == 0)
            first = i;
    }
    const int di = rt_dtype_index(o->t.dtype);
    worst_ratio[di] = fmax(worst_ratio[di], worst);
    if (getenv("RUDNN_TEST_VERBOSE"))
        printf("    %s: %s: worst error %.3g of its bound\n", what, name, worst);
    if (bad) {
        const double bound = tol * abs_terms[first] + rt_half_ulp(o->t.dtype, fmax(fabs(got[first]), fabs(ref[first])));
        rt_logf(log, "  %s: %s: %lld of %lld element(s) off (worst %.3g x its bound); first [%lld] = %.9g, reference "
                "%.9g (sum |terms| %.4g, bound %.3g)\n", what, name, (long long)bad, (long long)o->numel, worst,
                (long long)first, got[first], ref[first], abs_terms[first], bound);
        problems++;
    }
    free(got);
    return problems;
}

/* The bits of the output's elements (snapshot order), for determinism and agreement checks. */
typedef struct bits {
    uint8_t *main, *extra;
    char kernel[96];
} bits_t;

static void bits_free(bits_t *b)
{
    free(b->main), free(b->extra);
    memset(b, 0, sizeof *b);
}

static int overridden(const problem_t *p, rudnn_conv_strategy_t strat)
{
    return strat == RUDNN_CONV_IMPLICIT_GEMM && ((p->c->d == 3 && p->dt == RUDNN_F32) || p->c->G > 1);
}

/* Runs dir with strat (twice: determinism) and checks everything the header comment lists. kept:
 * the explicit strategies' outputs by kernel, for Autotune's agreement (filled here). */
static void run_one(rt_log_t *log, problem_t *p, rudnn_conv_direction_t dir, rudnn_conv_strategy_t strat,
                    bits_t kept[2], int sized)
{
    const ccase_t *c = p->c;
    char what[160];
    snprintf(what, sizeof what, "%s/%s/%s/%s", rudnn_dtype_name(p->dt), c->name, direction_names[dir],
             strategy_names[strat]);
    const int verbose = getenv("RUDNN_TEST_VERBOSE") != NULL;
    const rudnn_conv_tensors_t t = tensors_of(p, dir);
    rudnn_conv_choice_t choice;
    memset(&choice, 0, sizeof choice);
    rudnn_status_t st = rudnn_conv_resolve(rt_queue, dir, &t, &p->opts, strat, &choice);
    if (st) {
        rt_logf(log, "  %s: resolve returned %s: %s\n", what, rudnn_status_string(st), rudnn_last_error());
        log->failures++;
        return;
    }
    if (verbose)
        printf("    %s: resolve: %s %s: %s\n", what, strategy_names[choice.strategy], choice.kernel, choice.reason);
    /* the strategy that runs */
    if (strat != RUDNN_CONV_AUTOTUNE) {
        const rudnn_conv_strategy_t want = overridden(p, strat) ? RUDNN_CONV_DIRECT : strat;
        if (choice.strategy != want) {
            rt_logf(log, "  %s: resolve chose %s, expected %s (reason: %s)\n", what, strategy_names[choice.strategy],
                    strategy_names[want], choice.reason);
            log->failures++;
        }
        if (overridden(p, strat) && !rt_mentions(choice.reason, "overrid")) {
            rt_logf(log, "  %s: ImplicitGemm overridden to %s but the reason does not mention the override: \"%s\"\n",
                    what, strategy_names[choice.strategy], choice.reason);
            log->failures++;
        }
    }
    rudnn_conv_strategy_t ks;
    rudnn_conv_direction_t kd;
    if (!kernel_listed(choice.kernel, &ks, &kd) || kd != dir || ks != choice.strategy ||
        strncmp(choice.kernel, "convolution.", 12)) {
        rt_logf(log, "  %s: resolve named kernel \"%s\" (%s), not a listed %s candidate of %s\n", what,
                choice.kernel ? choice.kernel : "(null)", strategy_names[choice.strategy], direction_names[dir],
                strategy_names[choice.strategy]);
        log->failures++;
    }

    operand_t *out = main_out(p, dir), *out2 = extra_out(p, dir);
    operand_t *inputs[4];
    int nin = 0;
    if (dir == RUDNN_CONV_FORWARD) {
        inputs[nin++] = &p->x, inputs[nin++] = &p->w;
        if (p->bias.buf)
            inputs[nin++] = &p->bias;
    } else if (dir == RUDNN_CONV_DATA_BACKWARD) {
        inputs[nin++] = &p->dy, inputs[nin++] = &p->w;
    } else {
        inputs[nin++] = &p->x, inputs[nin++] = &p->dy;
    }
    uint8_t *first_main = NULL, *first_extra = NULL;
    char first_kernel[96] = "";
    for (int rep = 0; rep < 2; rep++) {
        operand_poison(out);
        if (out2)
            operand_poison(out2);
        char kernel[96];
        st = call(p, dir, strat, rep ? !sized : sized, kernel);
        if (st) {
            rt_logf(log, "  %s: call %d returned %s: %s\n", what, rep + 1, rudnn_status_string(st), call_msg);
            log->failures++;
            break;
        }
        rudnn_conv_choice_t after = choice;
        if (strat == RUDNN_CONV_AUTOTUNE) { /* the first call may have tuned: ask again */
            st = rudnn_conv_resolve(rt_queue, dir, &t, &p->opts, strat, &after);
            if (st) {
                rt_logf(log, "  %s: resolve after the call returned %s: %s\n", what, rudnn_status_string(st),
                        rudnn_last_error());
                log->failures++;
                break;
            }
            if (rudnn_autotune_is_enabled() && !rt_mentions(after.reason, "autotuned")) {
                rt_logf(log, "  %s: after the call, resolve's reason does not say \"autotuned\": %s\n", what,
                        after.reason);
                log->failures++;
            }
            if (!kernel_listed(after.kernel, &ks, &kd) || kd != dir) {
                rt_logf(log, "  %s: Autotune resolved to \"%s\", not a listed %s kernel\n", what,
                        after.kernel ? after.kernel : "(null)", direction_names[dir]);
                log->failures++;
            }
            if (verbose && rep == 0)
                printf("    %s: after the call: %s: %s\n", what, after.kernel, after.reason);
        }
        if (!after.kernel || strcmp(kernel, after.kernel)) {
            rt_logf(log, "  %s: call %d: resolve named %s, rudnn_last_kernel() says %s ran\n", what, rep + 1,
                    after.kernel ? after.kernel : "(null)", kernel);
            log->failures++;
        }
        for (int i = 0; i < nin; i++) {
            uint8_t *now = operand_snapshot(inputs[i]);
            if (memcmp(now, inputs[i]->image, inputs[i]->bytes)) {
                rt_logf(log, "  %s: call %d changed an input's buffer (input %d)\n", what, rep + 1, i);
                log->failures++;
            }
            free(now);
        }
        uint8_t *snap = operand_snapshot(out), *snap2 = out2 ? operand_snapshot(out2) : NULL;
        if (rep == 0) {
            const double *ref = dir == RUDNN_CONV_FORWARD ? p->ref_y : dir == RUDNN_CONV_DATA_BACKWARD ? p->ref_dx
                                                                                                        : p->ref_dw;
            const double *abs_t = dir == RUDNN_CONV_FORWARD ? p->abs_y : dir == RUDNN_CONV_DATA_BACKWARD ? p->abs_dx
                                                                                                          : p->abs_dw;
            const int64_t n = dir == RUDNN_CONV_FORWARD ? conv_ref_max_terms_forward(&p->s) + (c->bias ? 1 : 0)
                            : dir == RUDNN_CONV_DATA_BACKWARD ? conv_ref_max_terms_data(&p->s)
                                                              : conv_ref_max_terms_weight(&p->s);
            log->failures += check_output(log, what, direction_names[dir], out, snap, ref, abs_t, n) != 0;
            if (out2)
                log->failures += check_output(log, what, "dbias", out2, snap2, p->ref_db, p->abs_db,
                                              conv_ref_max_terms_weight(&p->s)) != 0;
            first_main = snap, first_extra = snap2;
            snprintf(first_kernel, sizeof first_kernel, "%s", kernel);
        } else {
            if (memcmp(snap, first_main, out->bytes) || (out2 && memcmp(snap2, first_extra, out2->bytes))) {
                rt_logf(log, "  %s: the same call twice wrote different bits (kernels %s, %s)\n", what, first_kernel,
                        kernel);
                log->failures++;
            }
            free(snap), free(snap2);
        }
    }
    if (!first_main)
        return;
    /* same kernel, same inputs: same bits across strategies */
    bits_t *match = NULL;
    for (int i = 0; i < 2; i++)
        if (kept[i].main && strcmp(kept[i].kernel, first_kernel) == 0)
            match = &kept[i];
    if (match) {
        if (memcmp(match->main, first_main, out->bytes) || (out2 && memcmp(match->extra, first_extra, out2->bytes))) {
            rt_logf(log, "  %s: kernel %s wrote other bits than the same kernel did for another strategy\n", what,
                    first_kernel);
            log->failures++;
        }
        free(first_main), free(first_extra);
    } else {
        bits_t *slot = !kept[0].main ? &kept[0] : !kept[1].main ? &kept[1] : NULL;
        if (slot) {
            slot->main = first_main, slot->extra = first_extra;
            snprintf(slot->kernel, sizeof slot->kernel, "%s", first_kernel);
        } else {
            free(first_main), free(first_extra);
        }
    }
}

static void run_case(rt_log_t *log, const ccase_t *c, rudnn_dtype_t dt)
{
    problem_t p;
    problem_make(&p, c, dt);
    for (int dir = RUDNN_CONV_FORWARD; dir <= RUDNN_CONV_WEIGHT_BACKWARD; dir++) {
        bits_t kept[2];
        memset(kept, 0, sizeof kept);
        for (size_t si = 0; si < sizeof strategies / sizeof strategies[0]; si++) {
            const rudnn_conv_strategy_t s = strategies[si];
            if (s != RUDNN_CONV_AUTOTUNE && !strategy_listed(s, (rudnn_conv_direction_t)dir)) {
                rt_logf(log, "  %s/%s/%s: no %s candidate listed for this direction\n", rudnn_dtype_name(dt), c->name,
                        direction_names[dir], strategy_names[s]);
                log->failures++;
                continue;
            }
            run_one(log, &p, (rudnn_conv_direction_t)dir, s, kept, (int)(si + (size_t)dir) % 2);
        }
        bits_free(&kept[0]), bits_free(&kept[1]);
    }
    problem_free(&p);
}

/* ---- cmocka tests ---------------------------------------------------------------------------------- */

typedef struct unit {
    rudnn_dtype_t dt;
    const ccase_t *c;
    char name[64];
} unit_t;

static void test_case(void **state)
{
    const unit_t *u = *state;
    rt_log_t *log = rt_log_new();
    run_case(log, u->c, u->dt);
    rt_log_finish_free(log, "check(s)");
}

/* N = 0: forward and data backward write nothing (their output buffers keep every byte); weight
 * backward writes zeros to every element of dw and dbias (poisoned first) and nothing else. Every
 * strategy; dbias present and absent. rudnn_last_kernel() is not checked: such a call may launch
 * nothing. */
static void test_n0(void **state)
{
    const rudnn_dtype_t dt = *(const rudnn_dtype_t *)*state;
    rt_log_t *log = rt_log_new();
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        ccase_t c = {"n0", 2, 0, 4, 6, 2, {5, 6}, {3, 2}, {1, 2}, {1, 0}, {1, 1}, with_bias, 0, 1, 0, 0, 2};
        problem_t p;
        problem_make(&p, &c, dt);
        for (int dir = RUDNN_CONV_FORWARD; dir <= RUDNN_CONV_WEIGHT_BACKWARD; dir++)
            for (size_t si = 0; si < sizeof strategies / sizeof strategies[0]; si++) {
                const rudnn_conv_strategy_t s = strategies[si];
                char what[128];
                snprintf(what, sizeof what, "%s/n0%s/%s/%s", rudnn_dtype_name(dt), with_bias ? "+bias" : "",
                         direction_names[dir], strategy_names[s]);
                const rudnn_conv_direction_t dd = (rudnn_conv_direction_t)dir;
                operand_t *out = main_out(&p, dd), *out2 = extra_out(&p, dd);
                operand_poison(out);
                if (out2)
                    operand_poison(out2);
                operand_t *ins[3] = {&p.x, &p.w, &p.dy};
                char kernel[96];
                const rudnn_status_t st = call(&p, dd, s, (int)si % 2, kernel);
                if (st) {
                    rt_logf(log, "  %s: returned %s: %s\n", what, rudnn_status_string(st), call_msg);
                    log->failures++;
                    continue;
                }
                for (int i = 0; i < 3; i++) {
                    uint8_t *now = operand_snapshot(ins[i]);
                    if (memcmp(now, ins[i]->image, ins[i]->bytes))
                        rt_logf(log, "  %s: an input's buffer changed\n", what), log->failures++;
                    free(now);
                }
                operand_t *outs[2] = {out, out2};
                for (int k = 0; k < 2; k++) {
                    if (!outs[k])
                        continue;
                    uint8_t *snap = operand_snapshot(outs[k]);
                    if (dir != RUDNN_CONV_WEIGHT_BACKWARD) {
                        if (memcmp(snap, outs[k]->image, outs[k]->bytes))
                            rt_logf(log, "  %s: the output's buffer was written\n", what), log->failures++;
                    } else {
                        float *v = rt_xmalloc(sizeof(float) * (size_t)outs[k]->numel);
                        int64_t unwritten, outside, nonzero = 0;
                        operand_decode(outs[k], snap, v, NULL, &unwritten, &outside);
                        for (int64_t i = 0; i < outs[k]->numel; i++)
                            nonzero += v[i] != 0.0f;
                        if (unwritten || nonzero || outside) {
                            rt_logf(log, "  %s: %s: %lld element(s) left with the sentinel, %lld not zero, "
                                    "%lld byte(s) outside the elements changed\n", what, k ? "dbias" : "dw",
                                    (long long)unwritten, (long long)(nonzero - unwritten), (long long)outside);
                            log->failures++;
                        }
                        free(v);
                    }
                    free(snap);
                }
            }
        problem_free(&p);
    }
    rt_log_finish_free(log, "check(s)");
}

/* rudnn_conv_output_dims against the reference's formula over a sweep of shapes, BAD_SHAPE where a
 * P_i would be below 1. */
static void test_output_dims(void **state)
{
    (void)state;
    rt_log_t *log = rt_log_new();
    int checked = 0;
    for (int d = 1; d <= 3; d++)
        for (int64_t S = 1; S <= 9; S += 2)
            for (int64_t R = 1; R <= 4; R++)
                for (int64_t st = 1; st <= 3; st++)
                    for (int64_t pad = 0; pad <= 3; pad++)
                        for (int64_t dil = 1; dil <= 2; dil++) {
                            ccase_t c = {"dims", d, 3, 4, 6, 2, {S, S + 1, S + 2}, {R, R, 1}, {st, 1, st},
                                         {pad, 0, pad}, {dil, 1, dil}, 0, 0, 0, 0, 0, 0};
                            conv_ref_shape_t s = shape_of(&c);
                            rudnn_conv_options_t o = options_of(&c);
                            int64_t xd[5] = {3, 4}, wd[5] = {6, 2}, yd[5] = {-1, -1, -1, -1, -1}, P[3];
                            for (int i = 0; i < d; i++)
                                xd[2 + i] = c.S[i], wd[2 + i] = c.R[i];
                            const int ok = conv_ref_out_size(&s, P) == 0;
                            const rudnn_status_t st2 = rudnn_conv_output_dims(d + 2, xd, wd, &o, yd);
                            int good = ok ? st2 == RUDNN_STATUS_SUCCESS && yd[0] == 3 && yd[1] == 6
                                          : st2 == RUDNN_STATUS_BAD_SHAPE;
                            for (int i = 0; ok && good && i < d; i++)
                                good = yd[2 + i] == P[i];
                            checked++;
                            if (!good) {
                                rt_logf(log, "  d %d S %lld R %lld stride %lld pad %lld dil %lld: %s, P_0 %lld; the "
                                        "reference: %s P_0 %lld\n", d, (long long)S, (long long)R, (long long)st,
                                        (long long)pad, (long long)dil, rudnn_status_string(st2), (long long)yd[2],
                                        ok ? "valid," : "invalid", ok ? (long long)P[0] : -1LL);
                                log->failures++;
                            }
                        }
    printf("  output_dims: %d shape(s) checked\n", checked);
    rt_log_finish_free(log, "shape(s)");
}

/* rudnn_conv_channels_last: memory [N, S..., C] for ranks 3, 4 and 5, offset and dtype kept. */
static void test_channels_last(void **state)
{
    (void)state;
    rudnn_buffer_t b;
    rt_assert_status(rudnn_buffer_create(rt_ctx, 4096, &b), RUDNN_STATUS_SUCCESS);
    const int64_t dims[5] = {2, 3, 4, 5, 6};
    for (int rank = 3; rank <= 5; rank++) {
        rudnn_tensor_t t;
        rt_assert_status(rudnn_conv_channels_last(&t, b, 16, RUDNN_BF16, rank, dims), RUDNN_STATUS_SUCCESS);
        assert_int_equal(t.rank, rank);
        assert_int_equal(t.dtype, RUDNN_BF16);
        assert_int_equal(t.offset, 16);
        assert_ptr_equal(t.buffer, b);
        int64_t s = dims[1];
        for (int i = rank - 1; i >= 2; i--) {
            assert_int_equal(t.dims[i], dims[i]);
            assert_int_equal(t.strides[i], s);
            s *= dims[i];
        }
        assert_int_equal(t.strides[1], 1);
        assert_int_equal(t.strides[0], s);
        assert_int_equal(t.dims[0], 2);
        assert_int_equal(t.dims[1], 3);
    }
    rudnn_buffer_destroy(b);
}

/* The kernel list: at least one candidate, every name "convolution.<kernel>" and unique, every
 * strategy Direct or ImplicitGemm, every direction valid, a Direct candidate for each direction
 * (the overrides' target), and an ImplicitGemm one for each. */
static void test_kernels(void **state)
{
    (void)state;
    int n = 0;
    rt_assert_status(rudnn_conv_kernel_count(rt_ctx, &n), RUDNN_STATUS_SUCCESS);
    assert_true(n >= 1);
    int have[3][3] = {{0}};
    const char *names[64];
    for (int i = 0; i < n; i++) {
        const char *name = NULL;
        rudnn_conv_strategy_t s;
        rudnn_conv_direction_t d;
        rt_assert_status(rudnn_conv_kernel_info(rt_ctx, i, &name, &s, &d), RUDNN_STATUS_SUCCESS);
        assert_non_null(name);
        printf("  convolution: kernel %s (%s, %s)\n", name, (int)s >= 0 && (int)s <= 2 ? strategy_names[s] : "?",
               (int)d >= 0 && (int)d <= 2 ? direction_names[d] : "?");
        if (strncmp(name, "convolution.", 12) || !name[12])
            fail_msg("kernel %d is named \"%s\", not \"convolution.<kernel>\"", i, name);
        if (s != RUDNN_CONV_DIRECT && s != RUDNN_CONV_IMPLICIT_GEMM)
            fail_msg("kernel %s has strategy %d (Direct or ImplicitGemm expected)", name, (int)s);
        if ((int)d < 0 || (int)d > 2)
            fail_msg("kernel %s has direction %d", name, (int)d);
        for (int j = 0; j < i && j < 64; j++)
            if (strcmp(names[j], name) == 0)
                fail_msg("kernel name %s listed twice", name);
        if (i < 64)
            names[i] = name;
        have[d][s] = 1;
    }
    for (int d = 0; d < 3; d++) {
        if (!have[d][RUDNN_CONV_DIRECT])
            fail_msg("no Direct kernel for %s", direction_names[d]);
        if (!have[d][RUDNN_CONV_IMPLICIT_GEMM])
            fail_msg("no ImplicitGemm kernel for %s", direction_names[d]);
    }
}

/* ---- a backend without the family --------------------------------------------------------------------- */

/* Every entry answers NOT_SUPPORTED naming the family; *why gets the call's message. */
static int check_absent(char *why, size_t cap)
{
    int ok = 1, n = -1;
    rudnn_status_t st = rudnn_conv_kernel_count(rt_ctx, &n);
    if (st != RUDNN_STATUS_NOT_SUPPORTED || !rt_mentions(rudnn_last_error(), "conv")) {
        fprintf(stderr, "conv_kernel_count without kernels returned %s: %s\n", rudnn_status_string(st),
                rudnn_last_error());
        ok = 0;
    }
    const ccase_t c = {"absent", 2, 1, 2, 2, 1, {4, 4}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, 0, 0, 0, 0, 0};
    problem_t p;
    problem_make(&p, &c, RUDNN_F32);
    snprintf(why, cap, "?");
    for (int dir = RUDNN_CONV_FORWARD; dir <= RUDNN_CONV_WEIGHT_BACKWARD; dir++) {
        const rudnn_conv_tensors_t t = tensors_of(&p, (rudnn_conv_direction_t)dir);
        rudnn_conv_choice_t choice;
        st = rudnn_conv_resolve(rt_queue, (rudnn_conv_direction_t)dir, &t, &p.opts, RUDNN_CONV_AUTOTUNE, &choice);
        if (st != RUDNN_STATUS_NOT_SUPPORTED || !rt_mentions(rudnn_last_error(), "conv")) {
            fprintf(stderr, "conv_resolve (%s) without kernels returned %s: %s\n", direction_names[dir],
                    rudnn_status_string(st), rudnn_last_error());
            ok = 0;
        }
        size_t bytes = 0;
        st = rudnn_conv_workspace_size(rt_queue, (rudnn_conv_direction_t)dir, &t, &p.opts, RUDNN_CONV_AUTOTUNE, &bytes);
        if (st != RUDNN_STATUS_NOT_SUPPORTED || !rt_mentions(rudnn_last_error(), "conv")) {
            fprintf(stderr, "conv_workspace_size (%s) without kernels returned %s: %s\n", direction_names[dir],
                    rudnn_status_string(st), rudnn_last_error());
            ok = 0;
        }
        for (size_t si = 0; si < 3; si++) {
            operand_poison(main_out(&p, (rudnn_conv_direction_t)dir));
            st = call_op(&p, (rudnn_conv_direction_t)dir, strategies[si], NULL, 0);
            if (st != RUDNN_STATUS_NOT_SUPPORTED || !rt_mentions(rudnn_last_error(), "conv")) {
                fprintf(stderr, "conv %s (%s) without kernels returned %s: %s\n", direction_names[dir],
                        strategy_names[strategies[si]], rudnn_status_string(st), rudnn_last_error());
                ok = 0;
            } else if (dir == RUDNN_CONV_FORWARD && si == 0) {
                snprintf(why, cap, "%s", rudnn_last_error());
            }
            rudnn_queue_synchronize(rt_queue);
            operand_t *out = main_out(&p, (rudnn_conv_direction_t)dir);
            uint8_t *snap = operand_snapshot(out);
            if (memcmp(snap, out->image, out->bytes)) {
                fprintf(stderr, "conv %s without kernels wrote its output\n", direction_names[dir]);
                ok = 0;
            }
            free(snap);
        }
    }
    problem_free(&p);
    return ok;
}

/* The process's own autotune cache file (main) and the lock file beside it, removed at exit. */
static char cache[64], cache_lock[80];

static void remove_cache(void)
{
    unlink(cache);
    unlink(cache_lock);
}

int main(int argc, char **argv)
{
    /* a cache of this process's own: tuning starts cold and leaves nothing behind */
    snprintf(cache, sizeof cache, "/tmp/rudnn-test-convolution-%ld.txt", (long)getpid());
    snprintf(cache_lock, sizeof cache_lock, "%s.lock", cache);
    setenv("RUDNN_AUTOTUNE_CACHE", cache, 1);
    atexit(remove_cache);
    rt_set_filters(argc, argv);
    char group[64];
    snprintf(group, sizeof group, "convolution-%s", rt_requested_backend());
    rt_open_or_skip(group);
    int count = 0;
    const rudnn_status_t cst = rudnn_conv_kernel_count(rt_ctx, &count);
    if (cst == RUDNN_STATUS_NOT_SUPPORTED) {
        char why[1024];
        const int ok = check_absent(why, sizeof why);
        return rt_family_absent_exit(ok, "convolution", "convolution",
                                     "kernel_count, resolve, workspace_size and every direction's call", why, NULL);
    }
    if (cst) {
        printf("backend %s: rudnn_conv_kernel_count returned %s: %s\n", rt_requested_backend(),
               rudnn_status_string(cst), rudnn_last_error());
        rt_close();
        return 1;
    }
    static unit_t units[DTYPE_COUNT * CASE_COUNT];
    static struct CMUnitTest tests[DTYPE_COUNT * CASE_COUNT + DTYPE_COUNT + 3];
    static rudnn_dtype_t n0_dtypes[DTYPE_COUNT];
    static char n0_names[DTYPE_COUNT][32];
    size_t n = 0;
    tests[n++] = (struct CMUnitTest){"api/kernels", test_kernels, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"api/output_dims", test_output_dims, NULL, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"api/channels_last", test_channels_last, NULL, NULL, NULL};
    for (size_t d = 0; d < DTYPE_COUNT; d++) {
        for (size_t i = 0; i < CASE_COUNT; i++) {
            unit_t *u = &units[d * CASE_COUNT + i];
            u->dt = dtypes[d];
            u->c = &cases[i];
            snprintf(u->name, sizeof u->name, "%s/%s", rudnn_dtype_name(dtypes[d]), cases[i].name);
            tests[n++] = (struct CMUnitTest){u->name, test_case, NULL, NULL, u};
        }
        n0_dtypes[d] = dtypes[d];
        snprintf(n0_names[d], sizeof n0_names[d], "%s/n0", rudnn_dtype_name(dtypes[d]));
        tests[n++] = (struct CMUnitTest){n0_names[d], test_n0, NULL, NULL, &n0_dtypes[d]};
    }
    const int failed = _cmocka_run_group_tests(group, tests, n, NULL, NULL);
    printf("%s: largest error as a fraction of its bound: f32 %.3g, f16 %.3g, bf16 %.3g\n", group, worst_ratio[0],
           worst_ratio[1], worst_ratio[2]);
    rt_close();
    return rt_exit_code(failed);
}
