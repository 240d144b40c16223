/* Numeric tests of interpolation (include/rudnn/interpolation.h) against the reference of
 * reference/interpolation_ref.c, through the public API; run once per backend (meson registers
 * interpolation-opencl, -cuda, -hip with RUDNN_BACKEND set). A backend whose plugin has no
 * interpolation kernels (no table: CUDA and HIP in this release) must answer NOT_SUPPORTED, naming
 * the op, for a valid forward and backward, writing nothing; the suite checks that, prints
 * "backend <b>: SKIPPED (interpolation: NOT_SUPPORTED ...)" and exits 77. On OpenCL, whose plugin
 * has the family, a missing table fails the suite instead.
 *
 * What runs, each case for F32, F16 and BF16, each mode the case lists (NEAREST, NEAREST_EXACT,
 * LINEAR, CUBIC), forward and backward:
 *   up2d, down2d           2D upsampling 5x4 -> 9x7 and downsampling 9x7 -> 4x3 (sizes' ratios)
 *   *_ac                   the same (and 1D, 3D, x8, border) with align_corners, LINEAR and CUBIC
 *   1d, 1d_down, 3d        one and three spatial dims (3D: each dim up or down on its own)
 *   o1, o1_ac, o1_ac_1d    outputs of size 1: the centre without align_corners, index 0 with it
 *                          (o1_ac passes scales, which align_corners leaves unused)
 *   scales                 explicit scales 2.0 and 0.5 (9 * 0.5 = 4.5: 4 outputs)
 *   scales_odd             scale 1.7 for sizes 5 -> 12 and 6 -> 9 (not 1.7 S): dim 0's coordinates
 *                          run past the input's end (src up to 6.3 for S 5): every tap clamps
 *   scales_mixed, _3d      a scale on some dims only (0 on others); scale 3 from S 6 to O 4 reads
 *                          only the first inputs (the rest of dx is 0 and must still be written)
 *   identity, identity_ac  O = S
 *   x8, x8_ac, x8_1d       upsampling by 8 (dx elements sum 8 to 16 outputs a dim)
 *   cubic_border(_ac), s1  S = 1 and S = 2 with CUBIC's four taps clamped at both ends
 *   fp32_coords            sizes and a scale (28 -> 46, 40 -> 41 at scale 1.3) where the FP32
 *                          coordinates of the header floor to other indices than the same formula
 *                          in double or exact arithmetic would (checked: the case must keep such
 *                          indices, so the nearest modes prove the FP32 rule)
 *   clast, clast_3d        x, dx, y and dy channels-last (rudnn_conv_channels_last)
 *   padded, padded_1d      padded-stride (non-contiguous) views, tensors at a nonzero offset
 *   mixed                  x, dx channels-last and y, dy padded, with an explicit scale
 *   huge_ratio, tiny_ratio scales 1e-20 and 1e20: ratios of 1e20 and 1e-20 (the coordinates and
 *                          their floors far outside any index: the header's clamps decide)
 * and n0 (N = 0 and C = 0: nothing written, every mode, both directions).
 *
 * Every call is made twice with the output poisoned (sentinel) before each: the first result is
 * checked against the reference, the second must have the same bits (determinism); every output
 * element must be written (the sentinel gone: backward's dx included where no output reaches it),
 * no byte of the output's buffer outside its elements may change (padded gaps, head, tail), no
 * byte of an input's buffer may change, and rudnn_last_kernel() names an "interpolation." kernel.
 * Entries of scales past d hold NaN (the header: ignored).
 * The backward is checked twice over: element by element against the reference's adjoint
 * (interp_ref_backward), and through the identity <y, dy> = <x, dx> in double, with y the
 * reference's forward (interp_ref_forward, which the device forward matched) and dx the device's:
 * that ties the device backward to the forward without the reference's backward code. The same
 * identity with the device's y, and with both of the reference's (the reference's own consistency),
 * is checked too.
 *
 * Tolerance. Inputs are drawn in [-1, 1] and rounded to the dtype on the host (rudnn's conversions)
 * before the reference sees them, so only the kernel's arithmetic is left. The contract computes the
 * coordinates in FP32 (the reference does the same, so floors and t agree exactly) and the weights,
 * products and sums in FP32 for every dtype, then rounds once to the output's dtype. For an output
 * element summing n terms w_k v_k over d dims:
 *   |got - ref| <= (n + 2d + 2) 2^-24 sum|w_k v_k|              the FP32 products and sum (any order)
 *                + E d (1 + c) 2^-24 sum|v_k|                   FP32 weights: E = 4 LINEAR, 16 CUBIC
 *                + half_ulp_dtype(max(|got|, |ref|))            the final rounding to the dtype
 * where c is the largest |src| whose taps do not all clamp onto one index (an FP32 coordinate's ulp
 * is c 2^-24: the room for a t that differs by an ulp, e.g. a fused multiply-add; a weight moves by
 * at most 1.35 |dt| for CUBIC, |dt| for LINEAR), and E covers evaluating Keys' cubic (terms up to
 * 15 in magnitude, a few roundings) or 1 - t. The dtype enters through the half ulp: F32 2^-24, F16
 * 2^-11, BF16 2^-8 of the value (never below that of the dtype's smallest normal). NEAREST and
 * NEAREST_EXACT forwards select one element with weight 1: they must be exact (bound 0). NaN never
 * passes. The identities: |<y, dy> - <x, dx>| <= sum over the device-made side of bound |other| +
 * 1e-12 sum |w v dy| (double rounding).
 * What that gives per dtype, e.g. for a 2D bicubic output (n = 16, d = 2; c is up to 31 here):
 *   F32   1.3e-6 sum|w x| + 1.9e-6 (1 + c) sum|x| + 6e-8 |y|   (the FP32 arithmetic dominates)
 *   F16   the same + 4.9e-4 |y|                                (2^-11: the output's rounding dominates)
 *   BF16  the same + 3.9e-3 |y|                                (2^-8)
 * and for a nearest backward (weights 1, exact) the sum's (n + 2d + 2) 2^-24 sum|dy| plus the half ulp.
 * Measured on PoCL (largest error / bound over the passing cases): F32 0.14; F16 and BF16 1.0, the
 * exactly rounded ties of the final conversion (the half ulp is the bound's whole F16/BF16 part).
 *
 * Usage: test_interpolation [glob of <dtype>/<case>]. RUDNN_TEST_VERBOSE=1 prints each run's worst
 * error as a fraction of its bound. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/convolution.h> /* rudnn_conv_channels_last */
#include <rudnn/interpolation.h>

#include "common.h"
#include "operand.h"
#include "reference/interpolation_ref.h"

static const rudnn_dtype_t dtypes[] = {RUDNN_F32, RUDNN_F16, RUDNN_BF16};
#define DTYPE_COUNT 3

static const char *const mode_names[4] = {"nearest", "nearest_exact", "linear", "cubic"};

#define M_NEAREST (1u << RUDNN_INTERP_NEAREST)
#define M_EXACT (1u << RUDNN_INTERP_NEAREST_EXACT)
#define M_LINEAR (1u << RUDNN_INTERP_LINEAR)
#define M_CUBIC (1u << RUDNN_INTERP_CUBIC)
#define M_ALL (M_NEAREST | M_EXACT | M_LINEAR | M_CUBIC)
#define M_LC (M_LINEAR | M_CUBIC)

/* ---- cases ------------------------------------------------------------------------------------ */

enum { L_CONTIG = OPERAND_CONTIG, L_CLAST = OPERAND_CLAST, L_PADDED = OPERAND_PADDED };

typedef struct icase {
    const char *name;
    int d;
    int64_t N, C;
    int64_t S[3], O[3];
    unsigned modes;
    int align;
    double scales[3]; /* entries < d used; 0: from the sizes */
    int lx, ly;       /* layouts of x and dx, of y and dy */
    size_t head;      /* elements before each tensor in its buffer */
    int fp32_probe;   /* the case must hold nearest indices where FP32 and double/exact coordinates differ */
} icase_t;

static const icase_t cases[] = {
    /* name              d  N  C  S            O             modes    ac scales             lx        ly        head */
    {"up2d",             2, 2, 3, {5, 4},      {9, 7},       M_ALL,   0, {0},               L_CONTIG, L_CONTIG, 0, 0},
    {"down2d",           2, 2, 3, {9, 7},      {4, 3},       M_ALL,   0, {0},               L_CONTIG, L_CONTIG, 0, 0},
    {"up2d_ac",          2, 2, 3, {5, 4},      {9, 7},       M_LC,    1, {0},               L_CONTIG, L_CONTIG, 0, 0},
    {"down2d_ac",        2, 2, 3, {9, 7},      {4, 3},       M_LC,    1, {0},               L_CONTIG, L_CONTIG, 0, 0},
    {"1d",               1, 2, 3, {7},         {12},         M_ALL,   0, {0},               L_CONTIG, L_CONTIG, 0, 0},
    {"1d_down",          1, 2, 3, {13},        {5},          M_ALL,   0, {0},               L_CONTIG, L_CONTIG, 0, 0},
    {"1d_ac",            1, 2, 3, {7},         {12},         M_LC,    1, {0},               L_CONTIG, L_CONTIG, 0, 0},
    {"3d",               3, 1, 2, {3, 4, 5},   {5, 3, 8},    M_ALL,   0, {0},               L_CONTIG, L_CONTIG, 0, 0},
    {"3d_ac",            3, 1, 2, {3, 4, 5},   {5, 3, 8},    M_LC,    1, {0},               L_CONTIG, L_CONTIG, 0, 0},
    {"o1",               2, 2, 3, {5, 4},      {1, 1},       M_ALL,   0, {0},               L_CONTIG, L_CONTIG, 0, 0},
    {"o1_ac",            2, 2, 3, {5, 4},      {1, 3},       M_LC,    1, {1.7, 1.7},        L_CONTIG, L_CONTIG, 0, 0},
    {"o1_ac_1d",         1, 2, 2, {6},         {1},          M_LC,    1, {0},               L_CONTIG, L_CONTIG, 0, 0},
    {"scales",           2, 2, 3, {5, 9},      {10, 4},      M_ALL,   0, {2.0, 0.5},        L_CONTIG, L_CONTIG, 0, 0},
    {"scales_odd",       2, 2, 2, {5, 6},      {12, 9},      M_ALL,   0, {1.7, 1.7},        L_CONTIG, L_CONTIG, 0, 0},
    {"scales_mixed",     2, 1, 3, {6, 5},      {4, 13},      M_ALL,   0, {3.0, 0},          L_CONTIG, L_CONTIG, 0, 0},
    {"scales_3d",        3, 1, 2, {4, 3, 5},   {6, 7, 2},    M_ALL,   0, {1.3, 2.5, 0.25},  L_CONTIG, L_CONTIG, 0, 0},
    {"identity",         2, 2, 3, {6, 5},      {6, 5},       M_ALL,   0, {0},               L_CONTIG, L_CONTIG, 0, 0},
    {"identity_ac",      2, 2, 3, {6, 5},      {6, 5},       M_LC,    1, {0},               L_CONTIG, L_CONTIG, 0, 0},
    {"x8",               2, 1, 2, {3, 4},      {24, 32},     M_ALL,   0, {0},               L_CONTIG, L_CONTIG, 0, 0},
    {"x8_ac",            2, 1, 2, {3, 4},      {24, 32},     M_LC,    1, {0},               L_CONTIG, L_CONTIG, 0, 0},
    {"x8_1d",            1, 2, 2, {5},         {40},         M_ALL,   0, {0},               L_CONTIG, L_CONTIG, 0, 0},
    {"cubic_border",     2, 2, 2, {2, 1},      {7, 5},       M_ALL,   0, {0},               L_CONTIG, L_CONTIG, 0, 0},
    {"cubic_border_ac",  2, 2, 2, {2, 3},      {7, 5},       M_LC,    1, {0},               L_CONTIG, L_CONTIG, 0, 0},
    {"s1",               3, 1, 2, {1, 1, 2},   {3, 1, 5},    M_ALL,   0, {0},               L_CONTIG, L_CONTIG, 0, 0},
    {"fp32_coords",      2, 1, 2, {28, 40},    {46, 41},     M_ALL,   0, {0, 1.3},          L_CONTIG, L_CONTIG, 0, 1},
    {"clast",            2, 2, 5, {5, 4},      {9, 7},       M_ALL,   0, {0},               L_CLAST,  L_CLAST,  0, 0},
    {"clast_ac",         2, 2, 5, {9, 7},      {4, 5},       M_LC,    1, {0},               L_CLAST,  L_CLAST,  2, 0},
    {"clast_3d",         3, 2, 3, {3, 4, 3},   {5, 2, 6},    M_ALL,   0, {0},               L_CLAST,  L_CLAST,  0, 0},
    {"padded",           2, 2, 3, {5, 4},      {9, 7},       M_ALL,   0, {0},               L_PADDED, L_CLAST,  3, 0},
    {"padded_1d",        1, 2, 3, {7},         {12},         M_ALL,   0, {0},               L_PADDED, L_PADDED, 1, 0},
    {"mixed",            2, 2, 3, {9, 7},      {4, 5},       M_ALL,   0, {0.45, 0},         L_CLAST,  L_PADDED, 5, 0},
    {"huge_ratio",       2, 1, 2, {5, 4},      {6, 3},       M_ALL,   0, {1e-20, 1e-20},    L_CONTIG, L_CONTIG, 0, 0},
    {"tiny_ratio",       2, 1, 2, {5, 4},      {6, 3},       M_ALL,   0, {1e20, 1e20},      L_CONTIG, L_CONTIG, 0, 0},
};
#define CASE_COUNT (sizeof cases / sizeof cases[0])

static interp_ref_shape_t shape_of(const icase_t *c, int mode)
{
    interp_ref_shape_t s;
    memset(&s, 0, sizeof s);
    s.mode = mode, s.spatial = c->d, s.align_corners = c->align;
    s.batch = c->N, s.channels = c->C;
    for (int i = 0; i < c->d; i++)
        s.in_size[i] = c->S[i], s.out_size[i] = c->O[i], s.scales[i] = c->scales[i];
    return s;
}

static rudnn_interp_options_t options_of(const icase_t *c, int mode)
{
    rudnn_interp_options_t o;
    rudnn_interp_options_init(&o);
    o.mode = (rudnn_interp_mode_t)mode;
    o.align_corners = c->align;
    for (int i = 0; i < RUDNN_INTERP_MAX_SPATIAL; i++) /* entries past d: ignored, so garbage must not matter */
        o.scales[i] = i < c->d ? c->scales[i] : NAN;
    return o;
}

/* ---- tolerance -------------------------------------------------------------------------------- */

/* E of the header comment: the FP32 weights' error per unit of sum|v| (per dim, per 1 + c). */
static double weight_err(int mode) { return mode == RUDNN_INTERP_CUBIC ? 16.0 : mode == RUDNN_INTERP_LINEAR ? 4.0 : 0.0; }

/* c of the header comment: the largest |src| of the case whose taps do not all clamp onto one index
 * (past S + 2, or below -2, every tap of every mode lands on S - 1 or 0). */
static double coord_scale(const interp_ref_shape_t *s)
{
    double c = 0.0;
    for (int i = 0; i < s->spatial; i++)
        for (int64_t o = 0; o < s->out_size[i]; o++) {
            const double v = (double)interp_ref_source(s, i, o);
            if (v < (double)s->in_size[i] + 2.0 && v > -2.0)
                c = fmax(c, fabs(v));
        }
    return c;
}

/* ---- one problem -------------------------------------------------------------------------------- */

typedef struct problem {
    const icase_t *c;
    rudnn_dtype_t dt;
    operand_t x, y, dy, dx;
    double *hx, *hdy;
    int64_t nx, ny;
} problem_t;

static void problem_make(problem_t *p, const icase_t *c, rudnn_dtype_t dt)
{
    memset(p, 0, sizeof *p);
    p->c = c, p->dt = dt;
    const int rank = c->d + 2;
    int64_t xd[5] = {c->N, c->C}, yd[5] = {c->N, c->C};
    for (int i = 0; i < c->d; i++)
        xd[2 + i] = c->S[i], yd[2 + i] = c->O[i];
    operand_init_layout(&p->x, dt, rank, xd, c->lx, c->head);
    operand_init_layout(&p->dx, dt, rank, xd, c->lx, c->head);
    operand_init_layout(&p->y, dt, rank, yd, c->ly, c->head);
    operand_init_layout(&p->dy, dt, rank, yd, c->ly, c->head);
    p->nx = p->x.numel, p->ny = p->y.numel;
    rt_rng_t rng;
    rt_rng_seed_case(&rng, c->name, (int)dt);
    p->hx = rt_random_values(&rng, dt, p->nx);
    p->hdy = rt_random_values(&rng, dt, p->ny);
    operand_upload(&p->x, p->hx);
    operand_upload(&p->dy, p->hdy);
}

static void problem_free(problem_t *p)
{
    operand_free(&p->x), operand_free(&p->y), operand_free(&p->dy), operand_free(&p->dx);
    free(p->hx), free(p->hdy);
}

/* Message of the last failed call (synchronize clears rudnn_last_error). */
static char call_msg[1024];

/* One call of a direction (0 forward, 1 backward), then a synchronize; kernel gets
 * rudnn_last_kernel() after a success. */
static rudnn_status_t call(const problem_t *p, int dir, const rudnn_interp_options_t *o, char kernel[96])
{
    kernel[0] = 0;
    call_msg[0] = 0;
    const rudnn_status_t st = dir == 0 ? rudnn_interpolate_forward(rt_queue, &p->x.t, o, &p->y.t)
                                       : rudnn_interpolate_backward(rt_queue, &p->dy.t, o, &p->dx.t);
    if (!st)
        snprintf(kernel, 96, "%s", rudnn_last_kernel());
    else
        snprintf(call_msg, 1024, "%s", rudnn_last_error());
    const rudnn_status_t sync = rudnn_queue_synchronize(rt_queue);
    if (!st && sync)
        snprintf(call_msg, sizeof call_msg, "synchronize: %s", rudnn_last_error());
    return st ? st : sync;
}

/* Worst error as a fraction of its bound, per dtype, for the summary line. */
static double worst_ratio[DTYPE_COUNT];

/* What bounds one output's elements: see the header comment. */
typedef struct bound_spec {
    int exact;            /* the nearest forwards: bound 0 */
    const int64_t *terms; /* per element (backward), or NULL: n for all */
    int64_t n;
    int d;
    double werr;          /* E d (1 + c) */
} bound_spec_t;

/* Checks an output snapshot against the reference: every element written, no byte outside the
 * elements changed, every value within its bound. got and bound (when not NULL) receive the decoded
 * values and each element's bound. Returns the number of problems logged. */
static int check_output(rt_log_t *log, const char *what, const operand_t *o, const uint8_t *snap, const double *ref,
                        const double *abs_terms, const double *abs_in, const bound_spec_t *b, float *got,
                        double *bound)
{
    int problems = 0;
    problems += operand_check_written(log, what, NULL, o, snap, got, NULL);
    int64_t bad = 0, first = -1;
    double worst = 0, first_bound = 0;
    for (int64_t i = 0; i < o->numel; i++) {
        const double g = got[i], r = ref[i];
        double bd = 0.0;
        if (!b->exact) {
            const int64_t n = b->terms ? (b->terms[i] > 0 ? b->terms[i] : 1) : b->n;
            bd = (double)(n + 2 * b->d + 2) * 0x1p-24 * abs_terms[i] + b->werr * 0x1p-24 * abs_in[i] +
                 rt_half_ulp(o->t.dtype, fmax(fabs(g), fabs(r)));
        }
        if (bound)
            bound[i] = bd;
        const double e = fabs(g - r);
        const double ratio = e == e ? (bd > 0 ? e / bd : (e == 0 ? 0 : INFINITY)) : INFINITY;
        worst = fmax(worst, ratio);
        if (!(e <= bd) && bad++ == 0)
            first = i, first_bound = bd;
    }
    const int di = rt_dtype_index(o->t.dtype);
    if (worst < INFINITY)
        worst_ratio[di] = fmax(worst_ratio[di], worst);
    if (getenv("RUDNN_TEST_VERBOSE"))
        printf("    %s: worst error %.3g of its bound\n", what, worst);
    if (bad) {
        rt_logf(log, "  %s: %lld of %lld element(s) off (worst %.3g x its bound); first [%lld] = %.9g, reference "
                "%.9g (sum |terms| %.4g, bound %.3g)\n", what, (long long)bad, (long long)o->numel, worst,
                (long long)first, got[first], ref[first], abs_terms[first], first_bound);
        problems++;
    }
    return problems;
}

/* Runs one direction twice and checks it (the header comment's list); got and bound get the
 * first run's values and bounds. Returns 0 when the calls failed (nothing to compare then). */
static int run_dir(rt_log_t *log, problem_t *p, int dir, const rudnn_interp_options_t *opts, const char *what,
                   const double *ref, const double *abs_terms, const double *abs_in, const bound_spec_t *b,
                   float *got, double *bound)
{
    operand_t *out = dir == 0 ? &p->y : &p->dx, *in = dir == 0 ? &p->x : &p->dy;
    uint8_t *first = NULL;
    int ok = 1;
    for (int rep = 0; rep < 2 && ok; rep++) {
        operand_poison(out);
        char kernel[96];
        const rudnn_status_t st = call(p, dir, opts, kernel);
        if (st) {
            rt_logf(log, "  %s: call %d returned %s: %s\n", what, rep + 1, rudnn_status_string(st), call_msg);
            log->failures++;
            ok = 0;
            break;
        }
        if (strncmp(kernel, "interpolation.", 14) != 0) {
            rt_logf(log, "  %s: rudnn_last_kernel() is \"%s\", not an \"interpolation.\" kernel\n", what, kernel);
            log->failures++;
        }
        uint8_t *now = operand_snapshot(in);
        if (memcmp(now, in->image, in->bytes)) {
            rt_logf(log, "  %s: call %d changed its input's buffer\n", what, rep + 1);
            log->failures++;
        }
        free(now);
        uint8_t *snap = operand_snapshot(out);
        if (rep == 0) {
            log->failures += check_output(log, what, out, snap, ref, abs_terms, abs_in, b, got, bound) != 0;
            first = snap;
        } else {
            if (memcmp(snap, first, out->bytes)) {
                size_t k = 0;
                while (k < out->bytes && snap[k] == first[k])
                    k++;
                rt_logf(log, "  %s: the same call twice wrote different bits (first at byte %zu)\n", what, k);
                log->failures++;
            }
            free(snap);
        }
    }
    free(first);
    return ok;
}

/* The nearest modes' index with the coordinate in double, and exactly (from the sizes, rational
 * arithmetic; -1 with an explicit scale); the case's fp32_probe needs one of them to differ from the
 * FP32 index somewhere. */
static int64_t nearest_double(const interp_ref_shape_t *s, int i, int64_t o)
{
    const double r = s->scales[i] > 0 ? 1.0 / s->scales[i] : (double)s->in_size[i] / (double)s->out_size[i];
    const double src = s->mode == RUDNN_INTERP_NEAREST ? (double)o * r : ((double)o + 0.5) * r;
    const int64_t f = (int64_t)floor(src);
    return f < s->in_size[i] - 1 ? f : s->in_size[i] - 1;
}

static int64_t nearest_exact_arith(const interp_ref_shape_t *s, int i, int64_t o)
{
    if (s->scales[i] > 0)
        return -1;
    const int64_t S = s->in_size[i], O = s->out_size[i];
    const int64_t f = s->mode == RUDNN_INTERP_NEAREST ? o * S / O : (2 * o + 1) * S / (2 * O);
    return f < S - 1 ? f : S - 1;
}

static int fp32_probe_hits(const interp_ref_shape_t *s)
{
    int hits = 0;
    for (int i = 0; i < s->spatial; i++)
        for (int64_t o = 0; o < s->out_size[i]; o++) {
            int64_t idx[INTERP_REF_MAX_TAPS];
            double w[INTERP_REF_MAX_TAPS];
            interp_ref_taps(s, i, o, idx, w);
            const int64_t e = nearest_exact_arith(s, i, o);
            hits += idx[0] != nearest_double(s, i, o) || (e >= 0 && idx[0] != e);
        }
    return hits;
}

static double dot(const double *a, const double *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* |lhs - rhs| <= tol or a logged failure. */
static void check_identity(rt_log_t *log, const char *what, const char *which, double lhs, double rhs, double tol)
{
    const double e = fabs(lhs - rhs);
    if (!(e <= tol)) {
        rt_logf(log, "  %s: %s: <y, dy> = %.17g but <x, dx> = %.17g (difference %.3g, bound %.3g)\n", what, which, lhs,
                rhs, e, tol);
        log->failures++;
    } else if (getenv("RUDNN_TEST_VERBOSE")) {
        printf("    %s: %s: difference %.3g of bound %.3g\n", what, which, e, tol);
    }
}

static void run_mode(rt_log_t *log, problem_t *p, int mode)
{
    const icase_t *c = p->c;
    const interp_ref_shape_t s = shape_of(c, mode);
    char what[160];
    snprintf(what, sizeof what, "%s/%s/%s", rudnn_dtype_name(p->dt), c->name, mode_names[mode]);
    if (!interp_ref_valid(&s))
        fail_msg("%s: the case is not a valid problem (test bug)", what);
    if (c->fp32_probe && mode <= RUDNN_INTERP_NEAREST_EXACT) {
        const int hits = fp32_probe_hits(&s);
        if (hits == 0) {
            rt_logf(log, "  %s: the case holds no index where FP32 coordinates differ from double/exact ones (test "
                    "bug: it no longer proves the FP32 rule)\n", what);
            log->failures++;
        } else if (getenv("RUDNN_TEST_VERBOSE")) {
            printf("    %s: %d output index(es) where the FP32 coordinate floors elsewhere\n", what, hits);
        }
    }
    const int64_t nx = p->nx, ny = p->ny;
#define ALLOC(n) rt_xcalloc((size_t)((n) > 0 ? (n) : 1), sizeof(double))
    double *ref_y = ALLOC(ny), *abs_y = ALLOC(ny), *in_y = ALLOC(ny), *bound_y = ALLOC(ny);
    double *ref_dx = ALLOC(nx), *abs_dx = ALLOC(nx), *in_dx = ALLOC(nx), *bound_dx = ALLOC(nx);
#undef ALLOC
    int64_t *terms = rt_xcalloc((size_t)(nx > 0 ? nx : 1), sizeof(int64_t));
    float *got_y = rt_xcalloc((size_t)(ny > 0 ? ny : 1), sizeof(float));
    float *got_dx = rt_xcalloc((size_t)(nx > 0 ? nx : 1), sizeof(float));
    assert_int_equal(interp_ref_forward(&s, p->hx, ref_y, abs_y, in_y), 0);
    assert_int_equal(interp_ref_backward(&s, p->hdy, ref_dx, abs_dx, in_dx, terms), 0);

    /* the reference's own adjoint: the same terms summed two ways */
    double abs_sum = 0;
    for (int64_t i = 0; i < ny; i++)
        abs_sum += abs_y[i] * fabs(p->hdy[i]);
    const double ref_lhs = dot(ref_y, p->hdy, ny);
    check_identity(log, what, "the reference against itself", ref_lhs, dot(p->hx, ref_dx, nx), 1e-12 * abs_sum);

    const rudnn_interp_options_t opts = options_of(c, mode);
    const double werr = weight_err(mode) * c->d * (1.0 + coord_scale(&s));
    const bound_spec_t bf = {mode <= RUDNN_INTERP_NEAREST_EXACT, NULL, interp_ref_terms_forward(&s), c->d, werr};
    const bound_spec_t bb = {0, terms, 0, c->d, werr};
    char wf[200], wb[200];
    snprintf(wf, sizeof wf, "%s/forward", what);
    snprintf(wb, sizeof wb, "%s/backward", what);
    const int fwd_ok = run_dir(log, p, 0, &opts, wf, ref_y, abs_y, in_y, &bf, got_y, bound_y);
    const int bwd_ok = run_dir(log, p, 1, &opts, wb, ref_dx, abs_dx, in_dx, &bb, got_dx, bound_dx);
    if (bwd_ok) {
        /* <y_ref, dy> = <x, dx_device>: the device backward against the reference forward */
        double x_dx = 0, tol = 1e-12 * abs_sum;
        for (int64_t i = 0; i < nx; i++)
            x_dx += p->hx[i] * (double)got_dx[i], tol += bound_dx[i] * fabs(p->hx[i]);
        check_identity(log, wb, "reference y, device dx", ref_lhs, x_dx, tol);
        if (fwd_ok) {
            double y_dy = 0;
            for (int64_t i = 0; i < ny; i++)
                y_dy += (double)got_y[i] * p->hdy[i], tol += bound_y[i] * fabs(p->hdy[i]);
            check_identity(log, wb, "device y, device dx", y_dy, x_dx, tol);
        }
    }
    free(ref_y), free(abs_y), free(in_y), free(bound_y);
    free(ref_dx), free(abs_dx), free(in_dx), free(bound_dx);
    free(terms), free(got_y), free(got_dx);
}

/* ---- cmocka tests ---------------------------------------------------------------------------------- */

typedef struct unit {
    rudnn_dtype_t dt;
    const icase_t *c;
    char name[64];
} unit_t;

static void test_case(void **state)
{
    const unit_t *u = *state;
    rt_log_t *log = rt_log_new();
    problem_t p;
    problem_make(&p, u->c, u->dt);
    for (int m = 0; m < 4; m++)
        if (u->c->modes & (1u << m))
            run_mode(log, &p, m);
    problem_free(&p);
    rt_log_finish_free(log, "check(s)");
}

/* N = 0 or C = 0: success, and no byte of any buffer written (outputs poisoned first), every mode,
 * both directions, contiguous and channels-last. */
static void test_n0(void **state)
{
    const rudnn_dtype_t dt = *(const rudnn_dtype_t *)*state;
    rt_log_t *log = rt_log_new();
    for (int k = 0; k < 4; k++) {
        const int zero_c = k & 1, layout = k & 2 ? L_CLAST : L_CONTIG;
        icase_t c = {"n0", 2, zero_c ? 2 : 0, zero_c ? 0 : 3, {5, 4}, {9, 7}, M_ALL, 0, {0}, layout, layout, 2, 0};
        problem_t p;
        problem_make(&p, &c, dt);
        for (int m = 0; m < 4; m++)
            for (int ac = 0; ac <= (m >= RUDNN_INTERP_LINEAR); ac++)
                for (int dir = 0; dir < 2; dir++) {
                    c.align = ac;
                    const rudnn_interp_options_t opts = options_of(&c, m);
                    char what[128], kernel[96];
                    snprintf(what, sizeof what, "%s/%s/%s%s/%s%s", rudnn_dtype_name(dt), zero_c ? "c0" : "n0",
                             mode_names[m], ac ? "_ac" : "", dir ? "backward" : "forward",
                             layout == L_CLAST ? "/clast" : "");
                    operand_t *out = dir ? &p.dx : &p.y;
                    operand_poison(out);
                    const rudnn_status_t st = call(&p, dir, &opts, kernel);
                    if (st) {
                        rt_logf(log, "  %s: returned %s: %s\n", what, rudnn_status_string(st), call_msg);
                        log->failures++;
                    }
                    operand_t *all[4] = {&p.x, &p.y, &p.dy, &p.dx};
                    for (int i = 0; i < 4; i++) {
                        uint8_t *now = operand_snapshot(all[i]);
                        if (memcmp(now, all[i]->image, all[i]->bytes)) {
                            rt_logf(log, "  %s: a buffer was written (%s)\n", what,
                                    i == 0 ? "x" : i == 1 ? "y" : i == 2 ? "dy" : "dx");
                            log->failures++;
                        }
                        free(now);
                    }
                }
        problem_free(&p);
    }
    rt_log_finish_free(log, "check(s)");
}

/* ---- a backend without the family --------------------------------------------------------------------- */

/* A valid forward and backward answer NOT_SUPPORTED naming the op and write nothing; *why gets the
 * forward's message. */
static int check_absent(char *why, size_t cap)
{
    int ok = 1;
    const icase_t c = {"absent", 2, 1, 2, {4, 4}, {6, 5}, M_ALL, 0, {0}, L_CONTIG, L_CONTIG, 0, 0};
    problem_t p;
    problem_make(&p, &c, RUDNN_F32);
    snprintf(why, cap, "?");
    for (int m = 0; m < 4; m++)
        for (int dir = 0; dir < 2; dir++) {
            const rudnn_interp_options_t opts = options_of(&c, m);
            operand_t *out = dir ? &p.dx : &p.y;
            operand_poison(out);
            char kernel[96];
            const rudnn_status_t st = call(&p, dir, &opts, kernel);
            const char *op = dir ? "interpolate_backward" : "interpolate_forward";
            if (st != RUDNN_STATUS_NOT_SUPPORTED || !rt_mentions(call_msg, op) ||
                !rt_mentions(call_msg, "interpolation")) {
                fprintf(stderr, "%s (%s) without kernels returned %s: \"%s\" (expected NOT_SUPPORTED naming %s and "
                        "the family)\n", op, mode_names[m], rudnn_status_string(st), call_msg, op);
                ok = 0;
            } else if (m == 0 && dir == 0) {
                snprintf(why, cap, "%s", call_msg);
            }
            uint8_t *snap = operand_snapshot(out);
            if (memcmp(snap, out->image, out->bytes)) {
                fprintf(stderr, "%s without kernels wrote its output\n", op);
                ok = 0;
            }
            free(snap);
        }
    problem_free(&p);
    return ok;
}

int main(int argc, char **argv)
{
    rt_set_filters(argc, argv);
    char group[64];
    snprintf(group, sizeof group, "interpolation-%s", rt_requested_backend());
    rt_open_or_skip(group);
    /* does the plugin have the family? a small valid forward says */
    rudnn_status_t probe;
    {
        const icase_t c = {"probe", 1, 1, 1, {2}, {3}, M_NEAREST, 0, {0}, L_CONTIG, L_CONTIG, 0, 0};
        problem_t p;
        problem_make(&p, &c, RUDNN_F32);
        const rudnn_interp_options_t o = options_of(&c, RUDNN_INTERP_NEAREST);
        char kernel[96];
        probe = call(&p, 0, &o, kernel);
        problem_free(&p);
    }
    if (probe == RUDNN_STATUS_NOT_SUPPORTED) {
        char why[1024];
        const int ok = check_absent(why, sizeof why);
        return rt_family_absent_exit(ok, "interpolation", "interpolation", "every mode and both directions", why,
                                     NULL);
    }
    if (probe) {
        printf("backend %s: a valid interpolate_forward returned %s: %s\n", rt_requested_backend(),
               rudnn_status_string(probe), call_msg);
        rt_close();
        return 1;
    }
    /* N = 0 first, then case by case (each in every dtype): the extreme ratios come last */
    static unit_t units[DTYPE_COUNT * CASE_COUNT];
    static struct CMUnitTest tests[DTYPE_COUNT * CASE_COUNT + DTYPE_COUNT];
    static rudnn_dtype_t n0_dtypes[DTYPE_COUNT];
    static char n0_names[DTYPE_COUNT][32];
    size_t n = 0;
    for (size_t d = 0; d < DTYPE_COUNT; d++) {
        n0_dtypes[d] = dtypes[d];
        snprintf(n0_names[d], sizeof n0_names[d], "%s/n0", rudnn_dtype_name(dtypes[d]));
        tests[n++] = (struct CMUnitTest){n0_names[d], test_n0, NULL, NULL, &n0_dtypes[d]};
    }
    for (size_t i = 0; i < CASE_COUNT; i++)
        for (size_t d = 0; d < DTYPE_COUNT; d++) {
            unit_t *u = &units[i * DTYPE_COUNT + d];
            u->dt = dtypes[d];
            u->c = &cases[i];
            snprintf(u->name, sizeof u->name, "%s/%s", rudnn_dtype_name(dtypes[d]), cases[i].name);
            tests[n++] = (struct CMUnitTest){u->name, test_case, NULL, NULL, u};
        }
    const int failed = _cmocka_run_group_tests(group, tests, n, NULL, NULL);
    printf("%s: largest error as a fraction of its bound: f32 %.3g, f16 %.3g, bf16 %.3g\n", group, worst_ratio[0],
           worst_ratio[1], worst_ratio[2]);
    rt_close();
    return rt_exit_code(failed);
}
