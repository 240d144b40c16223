/* Numeric tests of grid sampling (include/rudnn/grid_sample.h) against the reference of
 * reference/grid_sample_ref.c, through the public API; run once per backend (meson registers
 * grid_sample-opencl, -cuda, -hip with RUDNN_BACKEND set). A backend whose plugin has no grid-sample
 * kernels (CUDA and HIP in this release) must answer NOT_SUPPORTED, naming the op and the family,
 * for a valid forward, backward and workspace query, writing nothing; the suite checks that, prints
 * "backend <b>: SKIPPED (grid_sample: NOT_SUPPORTED ...)" and exits 77. On OpenCL, whose plugin has
 * the family, a missing table fails the suite instead.
 *
 * What runs: each case below in F32, F16 and BF16, for every mode x padding x align_corners the
 * dimension allows (2D: BILINEAR, NEAREST, BICUBIC; 3D: trilinear, NEAREST; ZEROS, BORDER,
 * REFLECTION; align_corners 0 and 1):
 *   basic, 3d            random grids with |g| up to 1.5 (points outside [-1, 1]), Ho/Wo other than H/W
 *   special, 3d_special  grid values on purpose: exactly -1, 0, 1, +-1.5, coordinates exactly on
 *                        integers (bilinear t = 0, one-sided dgrid), on the borders (0, S - 1 and,
 *                        without align_corners, -0.5 and S - 0.5: the clip's and reflection's
 *                        kinks, where the gradient is PyTorch's <= 0 / >= S - 1 rule) and exactly
 *                        at half positions (NEAREST's ties: round half to even). Sizes make these
 *                        exact in every dtype (H 5 with align_corners, W 4 without; 3D D 3, H 4,
 *                        W 5); the case must hold ties and integer coordinates (checked: else a
 *                        test bug)
 *   upsample             x 3 x 2 sampled at 9 x 11 points inside [-1, 1]
 *   s1, n1               dims of size 1 in x, the grid and N (REFLECTION with align_corners:
 *                        PyTorch's twice_low == twice_high rule; BICUBIC's taps all padded); every
 *                        dim of size 1 of every tensor has an odd stride (1000003), which a view
 *                        may have and nothing may use
 *   wide                 x 17 x 19 (more x positions than the dx scan's work-group has items)
 *   collide, 3d_collide  every grid point the same: each x element a tap reads collects every
 *                        point (hundreds of terms: the counting sort's long lists, summed in order)
 *   halfsame             every other point the same, the others random
 *   strided, strided2,   x, dx channels-last or padded; grid, dgrid coordinate-major ([N, d, Ho,
 *   3d_strided           Wo] memory) or padded; y, dy padded or channels-last; tensors at nonzero
 *                        offsets in their buffers
 *   nonfinite, 3d_nonfinite  the special grid with a quarter of its values NaN, +-inf, +-3e9 (past
 *                        the int range) and +-1e30 (not under REFLECTION, whose flip count would
 *                        leave the int range: undefined in PyTorch): the -100 rule (ZEROS reads 0;
 *                        BORDER and REFLECTION clip NaN to S - 1 as PyTorch's CPU std::min/max do;
 *                        BICUBIC's NaN weights give NaN). Checked: the forward, dx under ZEROS,
 *                        dgrid at the points whose coordinates are all finite and within +-2; the
 *                        other outputs only for being written and nothing crashing.
 * and empty (per dtype, 2D and 3D, every mode): N = 0 (nothing written), no points (the forward
 * writes nothing, dx is written with zeros, dgrid holds nothing), C = 0 (the forward and dx write
 * nothing, dgrid is written with zeros), with the workspace queried and NULL.
 *
 * Per mode x padding x align_corners:
 *   forward twice (y poisoned before each): checked against the reference, then bitwise the same;
 *   backward with dx and dgrid, workspace NULL (the queue's pool); checked against the reference;
 *   the same with a workspace of exactly the queried size (in a buffer with 256 poisoned bytes
 *   after it, which must stay so): dx and dgrid bitwise those of the first call (determinism, also
 *   where hundreds of points collide on one element);
 *   dx only (its own query, that size) and dgrid only (the query must say 0 bytes: the header's
 *   "0 without dx"; workspace NULL): each checked against the reference;
 *   every call: rudnn_last_kernel() a "grid_sample." kernel, every output element written (the
 *   sentinel gone), no byte of an output's buffer outside its elements changed (padded gaps, head,
 *   tail), no byte of an input's buffer changed.
 * F32 additionally: dgrid against central differences of sum(dy * y) with the reference forward
 * in double coordinates (exact_coords; step 1e-4 in g), at every coordinate away from kinks: a
 * coordinate within 1e-3 + the step of an integer (BILINEAR: of its padded coordinate, which also
 * puts the clip and reflection borders out; BICUBIC: of its unnormalized coordinate) or, for
 * NEAREST, of a half position, is left out; the reference's own dgrid is held to the same. And dx
 * against central differences of the same sum in x (linear in x: exact up to rounding), at up to 48
 * elements per run.
 *
 * Tolerance. Inputs (x, grid, dy) are drawn and rounded to the dtype on the host (rudnn's
 * conversions) before the reference sees them, so only the kernel's arithmetic is left. The
 * coordinates are part of the contract, in FP32 (the reference computes them the same way, so
 * indices and t agree exactly); weights, products and sums are FP32 in the kernel, double in the
 * reference; the result is rounded once to the dtype. For an output summing n terms (its taps;
 * dx: every point-tap reading the element; dgrid: C times the taps) in d dims:
 *   |got - ref| <= (n + 2d + 4) 2^-24 sum|term|                    FP32 products and sums (any order)
 *                + E d (1 + c) 2^-24 sum|term without its weights|  FP32 weights and their derivatives
 *                + half_ulp_dtype(max(|got|, |ref|))                the final rounding to the dtype
 * E = 4 BILINEAR (1 - t), 32 BICUBIC (Keys' polynomials and their derivatives: terms up to about 8,
 * a few roundings each), 0 NEAREST; c = the largest input size + 2 (room for a coordinate one ulp
 * off, e.g. contracted on another backend); for dgrid "without its weights" is |slope dy x|, the
 * slope (S - 1) / 2 or S / 2 of the unnormalization. The NEAREST forward selects one element: exact
 * (bound 0). The dtype enters through the half ulp: F32 2^-24, F16 2^-11, BF16 2^-8 of the value
 * (never below that of the dtype's smallest normal). A NaN reference (BICUBIC at a non-finite
 * coordinate) wants a NaN; a NaN elsewhere never passes.
 * The finite differences: |got - fd| <= the bound above + 1e-5 sum|slope dy x| (the difference of
 * an FP32 and a double coordinate, about an ulp of the coordinate, times BICUBIC's second
 * derivative, and the central difference's h^2 term); dx: the bound + 1e-12 sum|dy y|.
 * Measured on PoCL (largest error / bound; the summary line prints it): F32 0.14, F16 and BF16 1.0
 * (exactly rounded ties of the final conversion: the half ulp is the whole F16/BF16 part of the
 * bound), central differences 0.15.
 *
 * Usage: test_grid_sample [glob of <dtype>/<case>]. RUDNN_TEST_VERBOSE=1 prints each check's worst
 * error as a fraction of its bound. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rudnn/grid_sample.h>

#include "common.h"
#include "operand.h"
#include "reference/grid_sample_ref.h"

static const rudnn_dtype_t dtypes[] = {RUDNN_F32, RUDNN_F16, RUDNN_BF16};
#define DTYPE_COUNT 3

static const char *const mode_names[3] = {"bilinear", "nearest", "bicubic"};
static const char *const pad_names[3] = {"zeros", "border", "reflection"};

/* ---- cases ------------------------------------------------------------------------------------ */

enum { L_CONTIG, L_CLAST, L_PADDED, L_CMAJOR };
enum { G_RANDOM, G_INSIDE, G_SPECIAL, G_NONFINITE, G_SAME, G_HALFSAME };

typedef struct gcase {
    const char *name;
    int d;
    int64_t N, C;
    int64_t S[3], O[3]; /* [H, W] or [D, H, W] */
    int grid;           /* G_* */
    int lx, lg, ly;     /* layouts of x and dx; grid and dgrid; y and dy */
    size_t head;        /* elements before each tensor in its buffer */
} gcase_t;

static const gcase_t cases[] = {
    /* name            d  N  C  S             O             grid         lx        lg        ly        head */
    {"basic",          2, 2, 3, {5, 6},       {4, 7},       G_RANDOM,    L_CONTIG, L_CONTIG, L_CONTIG, 0},
    {"special",        2, 2, 2, {5, 4},       {6, 9},       G_SPECIAL,   L_CONTIG, L_CONTIG, L_CONTIG, 0},
    {"upsample",       2, 1, 2, {3, 2},       {9, 11},      G_INSIDE,    L_CONTIG, L_CONTIG, L_CONTIG, 0},
    {"s1",             2, 2, 2, {1, 3},       {3, 1},       G_RANDOM,    L_CONTIG, L_CONTIG, L_CONTIG, 0},
    {"n1",             2, 1, 3, {4, 1},       {1, 5},       G_RANDOM,    L_CLAST,  L_CMAJOR, L_CONTIG, 1},
    {"wide",           2, 2, 2, {17, 19},     {13, 15},     G_RANDOM,    L_CONTIG, L_CONTIG, L_CONTIG, 0},
    {"collide",        2, 2, 3, {4, 5},       {32, 33},     G_SAME,      L_CONTIG, L_CONTIG, L_CONTIG, 0},
    {"halfsame",       2, 2, 2, {6, 5},       {8, 8},       G_HALFSAME,  L_CONTIG, L_CONTIG, L_CONTIG, 0},
    {"strided",        2, 2, 3, {5, 4},       {4, 7},       G_SPECIAL,   L_CLAST,  L_CMAJOR, L_PADDED, 3},
    {"strided2",       2, 2, 3, {5, 6},       {3, 5},       G_RANDOM,    L_PADDED, L_PADDED, L_CLAST,  1},
    {"nonfinite",      2, 2, 2, {5, 4},       {5, 6},       G_NONFINITE, L_CONTIG, L_CONTIG, L_CONTIG, 0},
    {"3d",             3, 2, 2, {3, 4, 5},    {2, 3, 4},    G_RANDOM,    L_CONTIG, L_CONTIG, L_CONTIG, 0},
    {"3d_special",     3, 1, 2, {3, 4, 5},    {3, 4, 4},    G_SPECIAL,   L_CONTIG, L_CONTIG, L_CONTIG, 0},
    {"3d_collide",     3, 1, 2, {2, 3, 4},    {4, 5, 6},    G_SAME,      L_CONTIG, L_CONTIG, L_CONTIG, 0},
    {"3d_strided",     3, 2, 3, {3, 4, 5},    {2, 3, 3},    G_RANDOM,    L_CLAST,  L_CMAJOR, L_PADDED, 2},
    {"3d_nonfinite",   3, 1, 2, {3, 4, 5},    {2, 3, 4},    G_NONFINITE, L_CONTIG, L_CONTIG, L_CONTIG, 0},
};
#define CASE_COUNT (sizeof cases / sizeof cases[0])

/* ---- tolerance -------------------------------------------------------------------------------- */

/* E of the header comment. */
static double weight_err(int mode) { return mode == GS_REF_BICUBIC ? 32.0 : mode == GS_REF_BILINEAR ? 4.0 : 0.0; }

/* ---- device operands ---------------------------------------------------------------------------- */

/* layout: L_CONTIG (row-major), L_CLAST (memory [N, S..., C]), L_CMAJOR (memory [N, last dim,
 * the others]: a grid's coordinates outermost after N) or L_PADDED (row-major over dims padded by
 * 1, the innermost by 3). */
static void make_operand(operand_t *o, rudnn_dtype_t dt, int rank, const int64_t *dims, int layout, size_t head)
{
    int order[RUDNN_MAX_RANK]; /* memory order, outermost first */
    for (int i = 0; i < rank; i++)
        order[i] = i;
    if (layout == L_CLAST) {
        for (int i = 1; i < rank - 1; i++)
            order[i] = i + 1;
        order[rank - 1] = 1;
    } else if (layout == L_CMAJOR) {
        order[1] = rank - 1;
        for (int i = 2; i < rank; i++)
            order[i] = i - 1;
    }
    int64_t strides[RUDNN_MAX_RANK], s = 1;
    for (int k = rank - 1; k >= 0; k--) {
        const int i = order[k];
        strides[i] = s;
        s *= (dims[i] > 0 ? dims[i] : 1) + (layout == L_PADDED ? (k == rank - 1 ? 3 : 1) : 0);
    }
    for (int i = 0; i < rank; i++) /* a dim of size 1: any stride (never used): an odd one */
        if (dims[i] == 1)
            strides[i] = 1000003;
    operand_init(o, dt, rank, dims, strides, head);
}

/* ---- one problem -------------------------------------------------------------------------------- */

typedef struct problem {
    const gcase_t *c;
    rudnn_dtype_t dt;
    operand_t x, grid, y, dy, dx, dgrid;
    double *hx, *hdy, *hgrid;
    int64_t nx, ny, ng, npts;
} problem_t;

static gs_ref_shape_t shape_of(const gcase_t *c, int mode, int padding, int align)
{
    gs_ref_shape_t s;
    memset(&s, 0, sizeof s);
    s.spatial = c->d, s.mode = mode, s.padding = padding, s.align_corners = align;
    s.batch = c->N, s.channels = c->C;
    for (int i = 0; i < c->d; i++)
        s.in_size[i] = c->S[i], s.out_size[i] = c->O[i];
    return s;
}

static void problem_make(problem_t *p, const gcase_t *c, rudnn_dtype_t dt)
{
    memset(p, 0, sizeof *p);
    p->c = c, p->dt = dt;
    const int rank = c->d + 2;
    int64_t xd[5] = {c->N, c->C}, yd[5] = {c->N, c->C}, gd[5] = {c->N};
    for (int i = 0; i < c->d; i++)
        xd[2 + i] = c->S[i], yd[2 + i] = c->O[i], gd[1 + i] = c->O[i];
    gd[rank - 1] = c->d;
    make_operand(&p->x, dt, rank, xd, c->lx, c->head);
    make_operand(&p->dx, dt, rank, xd, c->lx, c->head);
    make_operand(&p->grid, dt, rank, gd, c->lg, c->head);
    make_operand(&p->dgrid, dt, rank, gd, c->lg, c->head);
    make_operand(&p->y, dt, rank, yd, c->ly, c->head);
    make_operand(&p->dy, dt, rank, yd, c->ly, c->head);
    p->nx = p->x.numel, p->ny = p->y.numel, p->ng = p->grid.numel, p->npts = c->d ? p->ng / c->d : 0;
    rt_rng_t rng;
    rt_rng_seed_case(&rng, c->name, (int)dt);
    p->hx = rt_random_values(&rng, dt, p->nx);
    p->hdy = rt_random_values(&rng, dt, p->ny);
    p->hgrid = rt_xcalloc((size_t)(p->ng > 0 ? p->ng : 1), sizeof(double));
    operand_upload(&p->x, p->hx);
    operand_upload(&p->dy, p->hdy);
}

static void problem_free(problem_t *p)
{
    operand_free(&p->x), operand_free(&p->grid), operand_free(&p->y);
    operand_free(&p->dy), operand_free(&p->dx), operand_free(&p->dgrid);
    free(p->hx), free(p->hdy), free(p->hgrid);
}

/* The grid value that puts unnormalized coordinate u on a dim of size S. */
static double g_of_u(double u, int64_t S, int align)
{
    if (align)
        return S > 1 ? 2.0 * u / (double)(S - 1) - 1.0 : 0.0;
    return (2.0 * u + 1.0) / (double)S - 1.0;
}

static double special_value(rt_rng_t *r, int64_t S, int align)
{
    switch (rt_rng_below(r, 6)) {
    case 0:
        return rt_rng_uniform(r, -1.5, 1.5);
    case 1: /* an integer coordinate in -2 .. S + 1 */
        return g_of_u((double)((int64_t)rt_rng_below(r, (uint64_t)S + 4) - 2), S, align);
    case 2: /* a half position in -1.5 .. S + 0.5 */
        return g_of_u((double)((int64_t)rt_rng_below(r, (uint64_t)S + 3) - 2) + 0.5, S, align);
    case 3: {
        static const double v[5] = {-1.0, 1.0, 0.0, -1.5, 1.5};
        return v[rt_rng_below(r, 5)];
    }
    default: { /* the borders */
        const double u[4] = {0.0, (double)(S - 1), -0.5, (double)S - 0.5};
        return g_of_u(u[rt_rng_below(r, 4)], S, align);
    }
    }
}

/* The case's grid for align_corners and padding (the special grids depend on them), rounded to the
 * dtype, into hgrid and the device. */
static void grid_make(problem_t *p, int align, int padding)
{
    const gcase_t *c = p->c;
    const int d = c->d;
    rt_rng_t r;
    rt_rng_seed_case(&r, c->name, 1000 + 10 * (int)p->dt + (c->grid >= G_SPECIAL && c->grid <= G_NONFINITE ?
                                                            3 * align + padding : 0));
    double same[3];
    for (int k = 0; k < d; k++)
        same[k] = rt_rng_uniform(&r, -1.2, 1.2);
    for (int64_t pt = 0; pt < p->npts; pt++)
        for (int k = 0; k < d; k++) {
            const int64_t S = c->S[d - 1 - k]; /* coordinate k runs along dim d - 1 - k */
            double v;
            switch (c->grid) {
            case G_INSIDE:
                v = rt_rng_uniform(&r, -1.0, 1.0);
                break;
            case G_SPECIAL:
                v = special_value(&r, S, align);
                break;
            case G_NONFINITE:
                v = special_value(&r, S, align);
                if (rt_rng_below(&r, 4) == 0) {
                    static const double bad[7] = {NAN, INFINITY, -INFINITY, 3e9, -3e9, 1e30, -1e30};
                    v = bad[rt_rng_below(&r, padding == GS_REF_REFLECTION ? 5 : 7)];
                }
                break;
            case G_SAME:
                v = same[k];
                break;
            case G_HALFSAME:
                v = pt % 2 ? rt_rng_uniform(&r, -1.5, 1.5) : same[k];
                break;
            default:
                v = rt_rng_uniform(&r, -1.5, 1.5);
            }
            p->hgrid[pt * d + k] = rt_round_to(p->dt, v);
        }
    operand_upload(&p->grid, p->hgrid);
}

/* 1 when every coordinate of point pt is finite and within +-2. */
static int point_tame(const problem_t *p, int64_t pt)
{
    for (int k = 0; k < p->c->d; k++) {
        const double g = p->hgrid[pt * p->c->d + k];
        if (!isfinite(g) || fabs(g) > 2.0)
            return 0;
    }
    return 1;
}

/* ---- the calls ------------------------------------------------------------------------------- */

static char call_msg[1024];

static rudnn_status_t finish(rudnn_status_t st, char kernel[96])
{
    if (kernel)
        kernel[0] = 0;
    if (!st && kernel)
        snprintf(kernel, 96, "%s", rudnn_last_kernel());
    else if (st)
        snprintf(call_msg, sizeof call_msg, "%s", rudnn_last_error());
    const rudnn_status_t sync = rudnn_queue_synchronize(rt_queue);
    if (!st && sync)
        snprintf(call_msg, sizeof call_msg, "synchronize: %s", rudnn_last_error());
    return st ? st : sync;
}

static rudnn_status_t call_forward(const problem_t *p, const rudnn_grid_sample_options_t *o, char kernel[96])
{
    call_msg[0] = 0;
    return finish(rudnn_grid_sample_forward(rt_queue, &p->x.t, &p->grid.t, o, &p->y.t), kernel);
}

/* A workspace: need bytes followed by WS_TAIL poisoned ones that must stay so. */
#define WS_TAIL 256
typedef struct workspace {
    rudnn_buffer_t buf;
    size_t need;
    uint8_t *image;
} workspace_t;

static void ws_make(workspace_t *w, size_t need)
{
    memset(w, 0, sizeof *w);
    w->need = need;
    w->image = rt_xmalloc(need + WS_TAIL);
    memset(w->image, 0xa5, need + WS_TAIL);
    rt_assert_status(rudnn_buffer_create(rt_ctx, need + WS_TAIL, &w->buf), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_buffer_write(rt_queue, w->buf, 0, w->image, need + WS_TAIL), RUDNN_STATUS_SUCCESS);
}

/* 1 when the bytes past need are as written. */
static int ws_tail_intact(const workspace_t *w)
{
    uint8_t *now = rt_buffer_snapshot(w->buf, w->need + WS_TAIL);
    const int ok = memcmp(now + w->need, w->image + w->need, WS_TAIL) == 0;
    free(now);
    return ok;
}

static void ws_free(workspace_t *w)
{
    if (w->buf)
        rudnn_buffer_destroy(w->buf);
    free(w->image);
    memset(w, 0, sizeof *w);
}

static rudnn_status_t call_query(const problem_t *p, const rudnn_grid_sample_options_t *o, int with_dx,
                                 int with_dgrid, size_t *bytes)
{
    call_msg[0] = 0;
    const rudnn_status_t st = rudnn_grid_sample_backward_workspace_size(
        rt_queue, &p->x.t, &p->grid.t, &p->dy.t, o, with_dx ? &p->dx.t : NULL, with_dgrid ? &p->dgrid.t : NULL, bytes);
    if (st)
        snprintf(call_msg, sizeof call_msg, "workspace_size: %s", rudnn_last_error());
    return st;
}

static rudnn_status_t call_backward(const problem_t *p, const rudnn_grid_sample_options_t *o, int with_dx,
                                    int with_dgrid, const workspace_t *ws, char kernel[96])
{
    call_msg[0] = 0;
    return finish(rudnn_grid_sample_backward(rt_queue, &p->x.t, &p->grid.t, &p->dy.t, o, ws ? ws->buf : NULL,
                                             ws ? ws->need : 0, with_dx ? &p->dx.t : NULL,
                                             with_dgrid ? &p->dgrid.t : NULL),
                  kernel);
}

/* ---- checking an output ------------------------------------------------------------------------- */

static double worst_ratio[DTYPE_COUNT];
static double worst_fd_ratio;
static int64_t fd_checked; /* dgrid coordinates the central differences checked in the running test */


typedef struct bound_spec {
    int exact;            /* bound 0 (the NEAREST forward) */
    const int64_t *terms; /* per element */
    int d;
    double werr; /* E d */
    const char *skip; /* per element: 1 = not compared (NULL: every element) */
} bound_spec_t;

static double bound_of(const bound_spec_t *b, rudnn_dtype_t dt, int64_t i, double g, double r, const double *abs_terms,
                       const double *abs_in)
{
    if (b->exact)
        return 0.0;
    const int64_t n = b->terms[i] > 0 ? b->terms[i] : 1;
    return (double)(n + 2 * b->d + 4) * 0x1p-24 * abs_terms[i] + b->werr * 0x1p-24 * abs_in[i] +
           rt_half_ulp(dt, fmax(fabs(g), fabs(r)));
}

/* Checks an output snapshot against the reference: every element written, no byte outside the
 * elements changed, every compared value within its bound (a NaN reference wants a NaN). got and
 * bound receive the decoded values and bounds. Returns the number of problems logged. */
static int check_output(rt_log_t *log, const char *what, const operand_t *o, const uint8_t *snap, const double *ref,
                        const double *abs_terms, const double *abs_in, const bound_spec_t *b, float *got,
                        double *bound)
{
    int problems = 0;
    problems += operand_check_written(log, what, NULL, o, snap, got, NULL);
    int64_t bad = 0, first = -1;
    double worst = 0, first_bound = 0;
    for (int64_t i = 0; i < o->numel; i++) {
        if (b->skip && b->skip[i]) {
            if (bound)
                bound[i] = 0;
            continue;
        }
        const double g = got[i], r = ref[i];
        if (isnan(r)) {
            if (bound)
                bound[i] = 0;
            if (!isnan(g) && bad++ == 0)
                first = i, first_bound = 0;
            continue;
        }
        const double bd = bound_of(b, o->t.dtype, i, g, r, abs_terms, abs_in);
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
                (long long)first, got[first], ref[first], abs_terms ? abs_terms[first] : 0.0, first_bound);
        problems++;
    }
    return problems;
}

/* Every element written, no byte outside changed; the values not compared. */
static void check_written(rt_log_t *log, const char *what, const operand_t *o, const uint8_t *snap)
{
    int64_t unwritten, outside;
    operand_decode(o, snap, NULL, NULL, &unwritten, &outside);
    if (unwritten || outside) {
        rt_logf(log, "  %s: %lld element(s) never written, %lld byte(s) outside changed\n", what,
                (long long)unwritten, (long long)outside);
        log->failures++;
    }
}

/* The inputs' buffers (x, grid, dy) unchanged by a call. */
static void check_inputs(rt_log_t *log, const problem_t *p, const char *what)
{
    const operand_t *in[3] = {&p->x, &p->grid, &p->dy};
    static const char *const names[3] = {"x", "grid", "dy"};
    for (int i = 0; i < 3; i++)
        if (!operand_unchanged(in[i])) {
            rt_logf(log, "  %s: the call changed %s's buffer\n", what, names[i]);
            log->failures++;
        }
}

static void check_kernel(rt_log_t *log, const char *what, const char *kernel)
{
    if (strncmp(kernel, "grid_sample.", 12) != 0) {
        rt_logf(log, "  %s: rudnn_last_kernel() is \"%s\", not a \"grid_sample.\" kernel\n", what, kernel);
        log->failures++;
    }
}

static int check_status(rt_log_t *log, const char *what, rudnn_status_t st)
{
    if (!st)
        return 1;
    rt_logf(log, "  %s: returned %s: %s\n", what, rudnn_status_string(st), call_msg);
    log->failures++;
    return 0;
}

/* ---- finite differences (F32) ----------------------------------------------------------------- */

/* A coordinate whose finite difference crosses a kink: see the header comment. */
static int near_kink(const gs_ref_shape_t *ex, int64_t S, double g, double margin)
{
    const double u = gs_ref_unnormalize(ex, S, g);
    if (!isfinite(u))
        return 1;
    if (ex->mode == GS_REF_BICUBIC)
        return fabs(u - nearbyint(u)) < margin;
    const double pc = gs_ref_pad(ex, S, u);
    if (ex->mode == GS_REF_NEAREST)
        return fabs(pc - floor(pc) - 0.5) < margin;
    return fabs(pc - nearbyint(pc)) < margin;
}

#define FD_STEP 1e-4

/* dgrid (device: got/bound; and the reference's) against central differences of sum(dy * y). */
static void fd_dgrid(rt_log_t *log, const char *what, const problem_t *p, const gs_ref_shape_t *s, const float *got,
                     const double *bound, const double *ref, const double *abs_in)
{
    const int d = s->spatial;
    gs_ref_shape_t ex = *s;
    ex.exact_coords = 1;
    int64_t np = 1;
    for (int i = 0; i < d; i++)
        np *= s->out_size[i];
    double *yp = rt_xcalloc((size_t)(s->channels > 0 ? s->channels : 1), sizeof(double));
    double *ym = rt_xcalloc((size_t)(s->channels > 0 ? s->channels : 1), sizeof(double));
    int64_t checked = 0, skipped = 0, bad = 0, bad_ref = 0;
    double worst = 0;
    char first[256] = "";
    for (int64_t pt = 0; pt < p->npts; pt++) {
        if (!point_tame(p, pt))
            continue;
        const int64_t n = pt / np, pi = pt % np;
        for (int k = 0; k < d; k++) {
            const int64_t S = s->in_size[d - 1 - k];
            const double slope = s->align_corners ? (double)(S - 1) / 2.0 : (double)S / 2.0;
            const int64_t o = pt * d + k;
            if (near_kink(&ex, S, p->hgrid[o], 1e-3 + 2.0 * slope * FD_STEP)) {
                skipped++;
                continue;
            }
            double c[3], cm[3];
            for (int q = 0; q < d; q++)
                c[q] = cm[q] = p->hgrid[pt * d + q];
            c[k] += FD_STEP, cm[k] -= FD_STEP;
            assert_int_equal(gs_ref_point(&ex, p->hx, n, c, yp), 0);
            assert_int_equal(gs_ref_point(&ex, p->hx, n, cm, ym), 0);
            double fd = 0;
            for (int64_t ch = 0; ch < s->channels; ch++)
                fd += p->hdy[(n * s->channels + ch) * np + pi] * (yp[ch] - ym[ch]);
            fd /= 2.0 * FD_STEP;
            const double tol_fd = 1e-5 * abs_in[o] + 1e-9;
            const double e = fabs((double)got[o] - fd), tol = bound[o] + tol_fd;
            worst = fmax(worst, e / tol);
            checked++;
            if (!(e <= tol) && bad++ == 0)
                snprintf(first, sizeof first, "point %lld coordinate %d (g %.9g): device %.9g, central difference "
                         "%.9g, reference %.9g (tolerance %.3g)", (long long)pt, k, p->hgrid[o], got[o], fd, ref[o],
                         tol);
            if (!(fabs(ref[o] - fd) <= tol_fd) && bad_ref++ == 0 && !bad)
                snprintf(first, sizeof first, "point %lld coordinate %d (g %.9g): reference %.9g, central difference "
                         "%.9g (tolerance %.3g)", (long long)pt, k, p->hgrid[o], ref[o], fd, tol_fd);
        }
    }
    worst_fd_ratio = fmax(worst_fd_ratio, worst);
    if (getenv("RUDNN_TEST_VERBOSE"))
        printf("    %s: central differences: %lld coordinates checked, %lld near kinks left out, worst %.3g of its "
               "tolerance\n", what, (long long)checked, (long long)skipped, worst);
    if (bad || bad_ref) {
        rt_logf(log, "  %s: dgrid against central differences: %lld device and %lld reference value(s) off of %lld; "
                "first: %s\n", what, (long long)bad, (long long)bad_ref, (long long)checked, first);
        log->failures++;
    }
    fd_checked += checked;
    free(yp), free(ym);
}

static double objective(const gs_ref_shape_t *s, const double *x, const double *grid, const double *dy, double *y,
                        int64_t ny, double *abs_sum)
{
    assert_int_equal(gs_ref_forward(s, x, grid, y, NULL, NULL, NULL), 0);
    double f = 0, a = 0;
    for (int64_t i = 0; i < ny; i++)
        f += dy[i] * y[i], a += fabs(dy[i] * y[i]);
    if (abs_sum)
        *abs_sum = a;
    return f;
}

/* dx (device) against central differences of sum(dy * y) in x, at up to 48 elements. */
static void fd_dx(rt_log_t *log, const char *what, const problem_t *p, const gs_ref_shape_t *s, const float *got,
                  const double *bound)
{
    if (p->nx == 0)
        return;
    double *xs = rt_xmalloc(sizeof(double) * (size_t)p->nx);
    double *y = rt_xcalloc((size_t)(p->ny > 0 ? p->ny : 1), sizeof(double));
    memcpy(xs, p->hx, sizeof(double) * (size_t)p->nx);
    const int64_t step = (p->nx + 47) / 48;
    int64_t bad = 0, checked = 0;
    double worst = 0;
    char first[200] = "";
    for (int64_t i = 0; i < p->nx; i += step) {
        const double h = 0.5;
        double a1, a2;
        xs[i] = p->hx[i] + h;
        const double fp = objective(s, xs, p->hgrid, p->hdy, y, p->ny, &a1);
        xs[i] = p->hx[i] - h;
        const double fm = objective(s, xs, p->hgrid, p->hdy, y, p->ny, &a2);
        xs[i] = p->hx[i];
        const double fd = (fp - fm) / (2.0 * h), tol = bound[i] + 1e-12 * (a1 + a2) / h;
        const double e = fabs((double)got[i] - fd);
        worst = fmax(worst, e / tol);
        checked++;
        if (!(e <= tol) && bad++ == 0)
            snprintf(first, sizeof first, "element %lld: device %.9g, central difference %.9g (tolerance %.3g)",
                     (long long)i, got[i], fd, tol);
    }
    worst_fd_ratio = fmax(worst_fd_ratio, worst);
    if (bad) {
        rt_logf(log, "  %s: dx against central differences: %lld of %lld off; first: %s\n", what, (long long)bad,
                (long long)checked, first);
        log->failures++;
    }
    free(xs), free(y);
}

/* ---- one mode x padding x align_corners --------------------------------------------------------- */

/* The special grids must hold what they are for: NEAREST ties and integer coordinates. */
static void check_special(rt_log_t *log, const char *what, const problem_t *p, const gs_ref_shape_t *s)
{
    const int d = s->spatial;
    int64_t ties = 0, integers = 0;
    for (int64_t pt = 0; pt < p->npts; pt++)
        for (int k = 0; k < d; k++) {
            const int64_t S = s->in_size[d - 1 - k];
            const double u = gs_ref_unnormalize(s, S, p->hgrid[pt * d + k]);
            const double pc = gs_ref_pad(s, S, u);
            ties += pc - floor(pc) == 0.5;
            integers += u == floor(u) && u >= 0 && u <= (double)(S - 1);
        }
    if (getenv("RUDNN_TEST_VERBOSE"))
        printf("    %s: %lld half positions, %lld integer coordinates inside\n", what, (long long)ties,
               (long long)integers);
    if ((s->mode == GS_REF_NEAREST && ties == 0) || integers == 0) {
        rt_logf(log, "  %s: the special grid holds %lld half positions and %lld integer coordinates (test bug: it "
                "must hold both)\n", what, (long long)ties, (long long)integers);
        log->failures++;
    }
}

typedef struct refs {
    double *y, *y_abs, *y_in;
    int64_t *y_terms;
    double *dx, *dx_abs, *dx_in;
    int64_t *dx_terms;
    double *dg, *dg_abs, *dg_in;
    int64_t *dg_terms;
} refs_t;

static void run_combo(rt_log_t *log, problem_t *p, int mode, int padding, int align)
{
    const gcase_t *c = p->c;
    const gs_ref_shape_t s = shape_of(c, mode, padding, align);
    char what[160];
    snprintf(what, sizeof what, "%s/%s/%s/%s%s", rudnn_dtype_name(p->dt), c->name, mode_names[mode], pad_names[padding],
             align ? "/ac" : "");
    if (!gs_ref_valid(&s))
        fail_msg("%s: the case is not a valid problem (test bug)", what);
    grid_make(p, align, padding);
    if (c->grid == G_SPECIAL)
        check_special(log, what, p, &s);
    const int nonfinite = c->grid == G_NONFINITE;
    const int64_t nx = p->nx, ny = p->ny, ng = p->ng;
#define D(n) rt_xcalloc((size_t)((n) > 0 ? (n) : 1), sizeof(double))
#define I(n) rt_xcalloc((size_t)((n) > 0 ? (n) : 1), sizeof(int64_t))
#define F(n) rt_xcalloc((size_t)((n) > 0 ? (n) : 1), sizeof(float))
    refs_t r = {D(ny), D(ny), D(ny), I(ny), D(nx), D(nx), D(nx), I(nx), D(ng), D(ng), D(ng), I(ng)};
    float *got_y = F(ny), *got_dx = F(nx), *got_dg = F(ng);
    double *bound_dx = D(nx), *bound_dg = D(ng);
    char *skip_dg = rt_xcalloc((size_t)(ng > 0 ? ng : 1), 1);
#undef D
#undef I
#undef F
    assert_int_equal(gs_ref_forward(&s, p->hx, p->hgrid, r.y, r.y_abs, r.y_in, r.y_terms), 0);
    assert_int_equal(gs_ref_backward(&s, p->hx, p->hgrid, p->hdy, r.dx, r.dx_abs, r.dx_in, r.dx_terms, r.dg, r.dg_abs,
                                     r.dg_in, r.dg_terms),
                     0);
    const double werr = weight_err(mode) * c->d;
    for (int64_t pt = 0; pt < p->npts; pt++)
        for (int k = 0; k < c->d; k++)
            skip_dg[pt * c->d + k] = !point_tame(p, pt);
    const bound_spec_t by = {mode == GS_REF_NEAREST, r.y_terms, c->d, werr, NULL};
    const bound_spec_t bdx = {0, r.dx_terms, c->d, werr, NULL};
    const bound_spec_t bdg = {0, r.dg_terms, c->d, werr, nonfinite ? skip_dg : NULL};
    /* NaN coordinates leave dx defined only under ZEROS (BICUBIC's NaN weights reach x elsewhere) */
    const int check_dx = !nonfinite || padding == GS_REF_ZEROS;
    rudnn_grid_sample_options_t opts;
    rudnn_grid_sample_options_init(&opts);
    opts.mode = (rudnn_grid_sample_mode_t)mode, opts.padding = (rudnn_grid_sample_padding_t)padding;
    opts.align_corners = align;
    char w[240], kernel[96];

    /* forward, twice */
    uint8_t *first = NULL;
    for (int rep = 0; rep < 2; rep++) {
        snprintf(w, sizeof w, "%s/forward%s", what, rep ? " (again)" : "");
        operand_poison(&p->y);
        if (!check_status(log, w, call_forward(p, &opts, kernel)))
            break;
        check_kernel(log, w, kernel);
        check_inputs(log, p, w);
        uint8_t *snap = operand_snapshot(&p->y);
        if (rep == 0) {
            log->failures += check_output(log, w, &p->y, snap, r.y, r.y_abs, r.y_in, &by, got_y, NULL) != 0;
            first = snap;
        } else {
            if (memcmp(snap, first, p->y.bytes)) {
                rt_logf(log, "  %s: the same forward twice wrote different bits\n", w);
                log->failures++;
            }
            free(snap);
        }
    }
    free(first);

    /* backward with both outputs: workspace NULL, then of the queried size (bitwise the same) */
    uint8_t *dx1 = NULL, *dg1 = NULL;
    int both_ok = 0;
    snprintf(w, sizeof w, "%s/backward", what);
    operand_poison(&p->dx), operand_poison(&p->dgrid);
    if (check_status(log, w, call_backward(p, &opts, 1, 1, NULL, kernel))) {
        both_ok = 1;
        check_kernel(log, w, kernel);
        check_inputs(log, p, w);
        dx1 = operand_snapshot(&p->dx), dg1 = operand_snapshot(&p->dgrid);
        char wx[260], wg[260];
        snprintf(wx, sizeof wx, "%s/dx", w), snprintf(wg, sizeof wg, "%s/dgrid", w);
        if (check_dx)
            log->failures += check_output(log, wx, &p->dx, dx1, r.dx, r.dx_abs, r.dx_in, &bdx, got_dx, bound_dx) != 0;
        else
            check_written(log, wx, &p->dx, dx1);
        log->failures += check_output(log, wg, &p->dgrid, dg1, r.dg, r.dg_abs, r.dg_in, &bdg, got_dg, bound_dg) != 0;
    }
    size_t need = 0;
    snprintf(w, sizeof w, "%s/backward (workspace of the queried size)", what);
    if (both_ok && check_status(log, w, call_query(p, &opts, 1, 1, &need))) {
        workspace_t ws;
        ws_make(&ws, need);
        operand_poison(&p->dx), operand_poison(&p->dgrid);
        if (check_status(log, w, call_backward(p, &opts, 1, 1, &ws, kernel))) {
            check_inputs(log, p, w);
            uint8_t *dx2 = operand_snapshot(&p->dx), *dg2 = operand_snapshot(&p->dgrid);
            if (memcmp(dx2, dx1, p->dx.bytes) || memcmp(dg2, dg1, p->dgrid.bytes)) {
                rt_logf(log, "  %s: not bitwise the first backward's (dx %s, dgrid %s)\n", w,
                        memcmp(dx2, dx1, p->dx.bytes) ? "differs" : "same",
                        memcmp(dg2, dg1, p->dgrid.bytes) ? "differs" : "same");
                log->failures++;
            }
            if (!ws_tail_intact(&ws)) {
                rt_logf(log, "  %s: bytes past the %zu workspace bytes changed\n", w, need);
                log->failures++;
            }
            free(dx2), free(dg2);
        }
        ws_free(&ws);
    }
    free(dx1), free(dg1);

    /* dx only, with its own query's workspace */
    snprintf(w, sizeof w, "%s/backward dx only", what);
    size_t need_dx = 0;
    if (check_status(log, w, call_query(p, &opts, 1, 0, &need_dx))) {
        workspace_t ws;
        ws_make(&ws, need_dx);
        operand_poison(&p->dx), operand_poison(&p->dgrid);
        if (check_status(log, w, call_backward(p, &opts, 1, 0, &ws, kernel))) {
            check_kernel(log, w, kernel);
            check_inputs(log, p, w);
            uint8_t *snap = operand_snapshot(&p->dx);
            float *tmp = rt_xcalloc((size_t)(nx > 0 ? nx : 1), sizeof(float));
            if (check_dx)
                log->failures += check_output(log, w, &p->dx, snap, r.dx, r.dx_abs, r.dx_in, &bdx, tmp, NULL) != 0;
            else
                check_written(log, w, &p->dx, snap);
            free(tmp), free(snap);
            if (!operand_unchanged(&p->dgrid)) {
                rt_logf(log, "  %s: dgrid's buffer was written (dgrid NULL)\n", w);
                log->failures++;
            }
            if (!ws_tail_intact(&ws)) {
                rt_logf(log, "  %s: bytes past the %zu workspace bytes changed\n", w, need_dx);
                log->failures++;
            }
        }
        ws_free(&ws);
    }

    /* dgrid only: the query says 0, workspace NULL */
    snprintf(w, sizeof w, "%s/backward dgrid only", what);
    size_t need_dg = 12345;
    if (check_status(log, w, call_query(p, &opts, 0, 1, &need_dg))) {
        if (need_dg != 0) {
            rt_logf(log, "  %s: the workspace query says %zu bytes without dx (the header: 0)\n", w, need_dg);
            log->failures++;
        }
        operand_poison(&p->dx), operand_poison(&p->dgrid);
        if (check_status(log, w, call_backward(p, &opts, 0, 1, NULL, kernel))) {
            check_kernel(log, w, kernel);
            check_inputs(log, p, w);
            uint8_t *snap = operand_snapshot(&p->dgrid);
            float *tmp = rt_xcalloc((size_t)(ng > 0 ? ng : 1), sizeof(float));
            log->failures += check_output(log, w, &p->dgrid, snap, r.dg, r.dg_abs, r.dg_in, &bdg, tmp, NULL) != 0;
            free(tmp), free(snap);
            if (!operand_unchanged(&p->dx)) {
                rt_logf(log, "  %s: dx's buffer was written (dx NULL)\n", w);
                log->failures++;
            }
        }
    }

    /* F32: central differences */
    if (both_ok && p->dt == RUDNN_F32 && !nonfinite) {
        snprintf(w, sizeof w, "%s/backward", what);
        fd_dgrid(log, w, p, &s, got_dg, bound_dg, r.dg, r.dg_in);
        fd_dx(log, w, p, &s, got_dx, bound_dx);
    }
    free(r.y), free(r.y_abs), free(r.y_in), free(r.y_terms);
    free(r.dx), free(r.dx_abs), free(r.dx_in), free(r.dx_terms);
    free(r.dg), free(r.dg_abs), free(r.dg_in), free(r.dg_terms);
    free(got_y), free(got_dx), free(got_dg), free(bound_dx), free(bound_dg), free(skip_dg);
}

/* ---- cmocka tests ---------------------------------------------------------------------------------- */

typedef struct unit {
    rudnn_dtype_t dt;
    const gcase_t *c;
    char name[64];
} unit_t;

static void test_case(void **state)
{
    const unit_t *u = *state;
    rt_log_t *log = rt_log_new();
    problem_t p;
    problem_make(&p, u->c, u->dt);
    fd_checked = 0;
    for (int m = 0; m < 3; m++) {
        if (m == GS_REF_BICUBIC && u->c->d == 3)
            continue;
        for (int pad = 0; pad < 3; pad++)
            for (int ac = 0; ac < 2; ac++)
                run_combo(log, &p, m, pad, ac);
    }
    if (u->dt == RUDNN_F32 && u->c->grid != G_NONFINITE && fd_checked == 0) {
        rt_logf(log, "  %s: no dgrid coordinate away from kinks for the central differences (test bug)\n", u->name);
        log->failures++;
    }
    problem_free(&p);
    rt_log_finish_free(log, "check(s)");
}

/* Every element of a snapshot of o exactly zero (and written), no byte outside changed. */
static void check_zeros(rt_log_t *log, const char *what, const operand_t *o)
{
    uint8_t *snap = operand_snapshot(o);
    float *v = rt_xcalloc((size_t)(o->numel > 0 ? o->numel : 1), sizeof(float));
    int64_t unwritten, outside, nonzero = 0;
    operand_decode(o, snap, v, NULL, &unwritten, &outside);
    for (int64_t i = 0; i < o->numel; i++)
        nonzero += v[i] != 0.0f;
    if (unwritten || outside || nonzero) {
        rt_logf(log, "  %s: expected zeros: %lld never written, %lld not zero, %lld byte(s) outside changed\n", what,
                (long long)unwritten, (long long)nonzero, (long long)outside);
        log->failures++;
    }
    free(v), free(snap);
}

static void check_untouched(rt_log_t *log, const char *what, const problem_t *p)
{
    const operand_t *all[6] = {&p->x, &p->grid, &p->y, &p->dy, &p->dx, &p->dgrid};
    static const char *const names[6] = {"x", "grid", "y", "dy", "dx", "dgrid"};
    for (int i = 0; i < 6; i++)
        if (!operand_unchanged(all[i])) {
            rt_logf(log, "  %s: %s's buffer was written\n", what, names[i]);
            log->failures++;
        }
}

/* N = 0: nothing written. No points: the forward writes nothing, dx zeros, dgrid nothing. C = 0:
 * the forward and dx nothing, dgrid zeros. Every mode, 2D and 3D, workspace queried and NULL. */
static void test_empty(void **state)
{
    const rudnn_dtype_t dt = *(const rudnn_dtype_t *)*state;
    rt_log_t *log = rt_log_new();
    for (int d = 2; d <= 3; d++)
        for (int kind = 0; kind < 3; kind++) {
            gcase_t c = {kind == 0 ? "n0" : kind == 1 ? "points0" : "c0", d, kind == 0 ? 0 : 2, kind == 2 ? 0 : 3,
                         {4, 5, 3}, {3, 4, 2}, G_RANDOM, L_CLAST, L_CMAJOR, L_PADDED, 2};
            if (d == 2)
                c.S[0] = 5, c.S[1] = 4, c.O[0] = 3, c.O[1] = 4;
            if (kind == 1)
                c.O[d - 1] = 0; /* Wo = 0 */
            problem_t p;
            problem_make(&p, &c, dt);
            grid_make(&p, 0, 0);
            for (int m = 0; m < 3; m++) {
                if (m == GS_REF_BICUBIC && d == 3)
                    continue;
                rudnn_grid_sample_options_t opts;
                rudnn_grid_sample_options_init(&opts);
                opts.mode = (rudnn_grid_sample_mode_t)m, opts.padding = (rudnn_grid_sample_padding_t)(m % 3);
                opts.align_corners = m == 1;
                char what[200], kernel[96];
                snprintf(what, sizeof what, "%s/%dd/%s/%s/forward", rudnn_dtype_name(dt), d, c.name, mode_names[m]);
                operand_poison(&p.y), operand_poison(&p.dx), operand_poison(&p.dgrid);
                if (check_status(log, what, call_forward(&p, &opts, kernel)))
                    check_untouched(log, what, &p);
                for (int outs = 1; outs <= 3; outs++) /* 1 dx, 2 dgrid, 3 both */
                    for (int use_ws = 0; use_ws < 2; use_ws++) {
                        const int wdx = outs & 1, wdg = (outs >> 1) & 1;
                        snprintf(what, sizeof what, "%s/%dd/%s/%s/backward %s, workspace %s", rudnn_dtype_name(dt), d,
                                 c.name, mode_names[m], outs == 3 ? "dx and dgrid" : wdx ? "dx" : "dgrid",
                                 use_ws ? "queried" : "NULL");
                        size_t need = 0;
                        workspace_t ws;
                        memset(&ws, 0, sizeof ws);
                        if (use_ws) {
                            if (!check_status(log, what, call_query(&p, &opts, wdx, wdg, &need)))
                                continue;
                            if (kind == 0 && need != 0) {
                                rt_logf(log, "  %s: the query says %zu bytes for N = 0\n", what, need);
                                log->failures++;
                            }
                            ws_make(&ws, need);
                        }
                        operand_poison(&p.dx), operand_poison(&p.dgrid);
                        if (check_status(log, what, call_backward(&p, &opts, wdx, wdg, use_ws ? &ws : NULL, kernel))) {
                            if (kind == 1 && wdx) { /* no points: dx zeros */
                                char w2[240];
                                snprintf(w2, sizeof w2, "%s: dx", what);
                                check_zeros(log, w2, &p.dx);
                                if (!operand_unchanged(&p.dgrid) || !operand_unchanged(&p.y)) {
                                    rt_logf(log, "  %s: dgrid's or y's buffer was written\n", what);
                                    log->failures++;
                                }
                            } else if (kind == 2 && wdg) { /* C = 0: dgrid zeros */
                                char w2[240];
                                snprintf(w2, sizeof w2, "%s: dgrid", what);
                                check_zeros(log, w2, &p.dgrid);
                                if (!operand_unchanged(&p.dx) || !operand_unchanged(&p.y)) {
                                    rt_logf(log, "  %s: dx's or y's buffer was written\n", what);
                                    log->failures++;
                                }
                            } else {
                                check_untouched(log, what, &p);
                            }
                            check_inputs(log, &p, what);
                            if (use_ws && !ws_tail_intact(&ws)) {
                                rt_logf(log, "  %s: bytes past the workspace changed\n", what);
                                log->failures++;
                            }
                        }
                        ws_free(&ws);
                    }
            }
            problem_free(&p);
        }
    rt_log_finish_free(log, "check(s)");
}

/* ---- a backend without the family --------------------------------------------------------------------- */

/* A valid forward, backward and workspace query answer NOT_SUPPORTED naming the op and the family and
 * write nothing; *why gets the forward's message. */
static int check_absent(char *why, size_t cap)
{
    int ok = 1;
    const gcase_t c = {"absent", 2, 1, 2, {4, 4}, {3, 5}, G_RANDOM, L_CONTIG, L_CONTIG, L_CONTIG, 0};
    problem_t p;
    problem_make(&p, &c, RUDNN_F32);
    grid_make(&p, 0, 0);
    snprintf(why, cap, "?");
    for (int m = 0; m < 3; m++)
        for (int op = 0; op < 3; op++) {
            rudnn_grid_sample_options_t o;
            rudnn_grid_sample_options_init(&o);
            o.mode = (rudnn_grid_sample_mode_t)m;
            operand_poison(&p.y), operand_poison(&p.dx), operand_poison(&p.dgrid);
            rudnn_status_t st;
            size_t bytes = 777;
            const char *name = op == 0 ? "grid_sample_forward" : op == 1 ? "grid_sample_backward"
                                                                         : "grid_sample_backward_workspace_size";
            if (op == 0)
                st = call_forward(&p, &o, NULL);
            else if (op == 1)
                st = call_backward(&p, &o, 1, 1, NULL, NULL);
            else
                st = call_query(&p, &o, 1, 1, &bytes);
            if (st != RUDNN_STATUS_NOT_SUPPORTED || !rt_mentions(call_msg, name) ||
                !rt_mentions(call_msg, "grid-sample")) {
                fprintf(stderr, "%s (%s) without kernels returned %s: \"%s\" (expected NOT_SUPPORTED naming the op and "
                        "the family)\n", name, mode_names[m], rudnn_status_string(st), call_msg);
                ok = 0;
            } else if (m == 0 && op == 0) {
                snprintf(why, cap, "%s", call_msg);
            }
            if (op == 2 && bytes != 777) {
                fprintf(stderr, "%s without kernels wrote *bytes\n", name);
                ok = 0;
            }
            const operand_t *all[6] = {&p.x, &p.grid, &p.y, &p.dy, &p.dx, &p.dgrid};
            for (int i = 0; i < 6; i++)
                if (!operand_unchanged(all[i])) {
                    fprintf(stderr, "%s without kernels wrote a buffer\n", name);
                    ok = 0;
                }
        }
    problem_free(&p);
    return ok;
}

int main(int argc, char **argv)
{
    rt_set_filters(argc, argv);
    char group[64];
    snprintf(group, sizeof group, "grid_sample-%s", rt_requested_backend());
    rt_open_or_skip(group);
    rudnn_status_t probe;
    {
        const gcase_t c = {"probe", 2, 1, 1, {2, 2}, {1, 3}, G_RANDOM, L_CONTIG, L_CONTIG, L_CONTIG, 0};
        problem_t p;
        problem_make(&p, &c, RUDNN_F32);
        grid_make(&p, 0, 0);
        probe = call_forward(&p, NULL, NULL);
        problem_free(&p);
    }
    if (probe == RUDNN_STATUS_NOT_SUPPORTED) {
        char why[1024];
        const int ok = check_absent(why, sizeof why);
        return rt_family_absent_exit(ok, "grid_sample", "grid-sample",
                                     "every mode, the forward, the backward and the workspace query", why, NULL);
    }
    if (probe) {
        printf("backend %s: a valid grid_sample_forward returned %s: %s\n", rt_requested_backend(),
               rudnn_status_string(probe), call_msg);
        rt_close();
        return 1;
    }
    rt_print_device(group);
    static unit_t units[DTYPE_COUNT * CASE_COUNT];
    static struct CMUnitTest tests[DTYPE_COUNT * CASE_COUNT + DTYPE_COUNT];
    static rudnn_dtype_t empty_dtypes[DTYPE_COUNT];
    static char empty_names[DTYPE_COUNT][32];
    size_t n = 0;
    for (size_t d = 0; d < DTYPE_COUNT; d++) {
        empty_dtypes[d] = dtypes[d];
        snprintf(empty_names[d], sizeof empty_names[d], "%s/empty", rudnn_dtype_name(dtypes[d]));
        tests[n++] = (struct CMUnitTest){empty_names[d], test_empty, NULL, NULL, &empty_dtypes[d]};
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
    printf("%s: largest error as a fraction of its bound: f32 %.3g, f16 %.3g, bf16 %.3g; central differences %.3g\n",
           group, worst_ratio[0], worst_ratio[1], worst_ratio[2], worst_fd_ratio);
    rt_close();
    return rt_exit_code(failed);
}
