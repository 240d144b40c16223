/* Plain-C host reference of grid sampling (include/rudnn/grid_sample.h): forward, dx and dgrid of
 * BILINEAR (trilinear in 3D), NEAREST and BICUBIC (2D only) under the ZEROS, BORDER and REFLECTION
 * paddings, with and without align_corners, as PyTorch's F.grid_sample and its backward compute
 * them (aten/src/ATen/native/GridSampler.h, the CPU fallback kernels).
 *
 * Coordinates. Everything that leads to a tap's index and its t is computed in C `float` exactly as
 * the header writes it (each sum, product and quotient rounded to FP32 on its own, nothing
 * contracted; fmod and floor are exact), per point and dim of size S, grid value g:
 *   unnormalize   align_corners: ((g + 1) / 2) * (S - 1)      else: ((g + 1) * S - 1) / 2
 *   clip          std::min(S - 1, std::max(c, 0)) as PyTorch's CPU code writes it: a NaN becomes
 *                 S - 1 (std::max(NaN, 0) is NaN, std::min(S - 1, NaN) is S - 1)
 *   reflect       over [lo, hi] = align_corners ? [0, S - 1] : [-0.5, S - 0.5] (PyTorch's
 *                 reflect_coordinates with twice_low, twice_high = 2 lo, 2 hi; 0 when they are
 *                 equal): in = |c - lo|, extra = fmod(in, span), flips = floor(in / span); even
 *                 flips: extra + lo, odd: span - extra + lo; then clipped. A flips count past the
 *                 int range (PyTorch: undefined) counts as even here; the suites do not go there.
 *   safe          not finite, > INT_MAX - 1 or < INT_MIN (compared in float): -100
 *   BILINEAR, NEAREST: i = safe(pad(unnormalize(g))); BICUBIC: u = unnormalize(g) unpadded, and each
 *   tap's index safe(pad(floor(u) - 1 + k)), k = 0..3 (PyTorch's get_value_bounded).
 * Taps along one dim (index -1 where the padded index is outside 0 .. S - 1: it reads 0 and its
 * gradient goes nowhere):
 *   BILINEAR  floor(i), floor(i) + 1 with weights 1 - t, t (t = i - floor(i))
 *   NEAREST   nearbyint(i) (round half to even) with weight 1
 *   BICUBIC   floor(u) - 1 .. floor(u) + 2 with Keys' weights (A = -0.75) W(t + 1), W(t), W(1 - t),
 *             W(2 - t), t = u - floor(u) (NaN for a non-finite u: its weights are NaN)
 * A point's taps are every combination of its dims' taps, weight the product.
 *
 * The weights (from the float t) and every product and sum are in double; nothing is rounded to a
 * dtype.
 *   forward   y[n, c, p] = sum over the point's taps of w x[n, c, tap]. BILINEAR and NEAREST add
 *             only the taps inside x (PyTorch's within_bounds checks); BICUBIC adds w * 0 for a tap
 *             outside (PyTorch's get_value_bounded), so a NaN weight (non-finite coordinate) gives
 *             NaN under every padding, as PyTorch's.
 *   dx        0, then each point adds w dy[n, c, p] into every tap inside x (no tap outside adds).
 *   dgrid     per point and coordinate k: sum over c and the taps of dy x(tap) times the weight
 *             with dim k's weight replaced by its derivative with respect to g. That derivative is
 *             PyTorch's: the unnormalization's slope ((S - 1) / 2 or S / 2) times, for BILINEAR,
 *             the padding's (clip_coordinates_set_grad: 0 for c <= 0 or c >= S - 1, else 1;
 *             reflect_coordinates_set_grad: -1 per reflection about the low end and per odd flip)
 *             times d(1 - t)/dt = -1, dt/dt = 1; for BICUBIC the cubic's derivative in t (the
 *             padding of the tap indices is piecewise constant and passes nothing); NEAREST 0.
 *             C = 0: zeros. (BICUBIC's taps outside x take part with x = 0, as in the forward.)
 *
 * exact_coords = 1 computes the same formulas in double instead of float (no rounding to FP32):
 * what a finite difference of the forward with steps far below an FP32 ulp needs.
 *
 * Arrays are logical and contiguous: x (dx) [N][C][S...], grid (dgrid) [N][O...][d] (coordinate 0
 * along W, the last spatial dim, 1 along H, 2 along D), y (dy) [N][C][O...]. Spatial sizes are
 * ordered [H, W] (2D) or [D, H, W] (3D). The optional arrays give, per output element, what a
 * rounding error bound scales with:
 *   _abs      sum over its terms of |term| (forward: |w x|; dx: |w dy|; dgrid: |dy x dw w...|)
 *   _abs_in   sum over its terms of the term without its weights (forward: |x|; dx: |dy|; dgrid:
 *             |slope dy x|, slope the unnormalization's): what an error in the weights multiplies
 *   _terms    how many terms it sums */
#ifndef RUDNN_TESTS_GRID_SAMPLE_REF_H
#define RUDNN_TESTS_GRID_SAMPLE_REF_H

#include <stdint.h>

#define GS_REF_MAX_SPATIAL 3
#define GS_REF_MAX_TAPS 4
#define GS_REF_CUBIC_A (-0.75)

/* Numbered as rudnn_grid_sample_mode_t and rudnn_grid_sample_padding_t. */
enum { GS_REF_BILINEAR = 0, GS_REF_NEAREST = 1, GS_REF_BICUBIC = 2 };
enum { GS_REF_ZEROS = 0, GS_REF_BORDER = 1, GS_REF_REFLECTION = 2 };

typedef struct gs_ref_shape {
    int spatial;                           /* d: 2 or 3 */
    int mode, padding, align_corners;      /* GS_REF_*; align_corners 0 or 1 */
    int64_t batch, channels;               /* N, C >= 0 */
    int64_t in_size[GS_REF_MAX_SPATIAL];   /* [H, W] or [D, H, W], >= 1 */
    int64_t out_size[GS_REF_MAX_SPATIAL];  /* [Ho, Wo] or [Do, Ho, Wo], >= 0 */
    int exact_coords;                      /* 1: the coordinate formulas in double */
} gs_ref_shape_t;

/* 1 when the shape is one the header accepts (BICUBIC 2D only), else 0. */
int gs_ref_valid(const gs_ref_shape_t *s);

/* Element counts (0 for an invalid shape). */
int64_t gs_ref_x_count(const gs_ref_shape_t *s);
int64_t gs_ref_y_count(const gs_ref_shape_t *s);
int64_t gs_ref_grid_count(const gs_ref_shape_t *s);
int64_t gs_ref_points(const gs_ref_shape_t *s); /* N times the product of out_size */

/* Along a dim of size S: the unnormalized coordinate of grid value g, and the padded one (the
 * padding mode and the -100 rule applied; BICUBIC pads its taps, not this). FP32 values (double
 * with exact_coords). */
double gs_ref_unnormalize(const gs_ref_shape_t *s, int64_t S, double g);
double gs_ref_pad(const gs_ref_shape_t *s, int64_t S, double c);

/* One dim's taps for grid value g over S inputs: indices (-1: outside x), weights and their
 * derivatives with respect to g (the slopes of the unnormalization and, for BILINEAR, the padding
 * folded in). Returns how many (1, 2 or 4). *slope gets the unnormalization's slope (may be NULL). */
int gs_ref_dim_taps(const gs_ref_shape_t *s, int64_t S, double g, int64_t idx[GS_REF_MAX_TAPS],
                    double w[GS_REF_MAX_TAPS], double dw[GS_REF_MAX_TAPS], double *slope);

/* y from x and grid; y_abs, y_abs_in and y_terms may be NULL. Returns 0, or -1 for an invalid shape. */
int gs_ref_forward(const gs_ref_shape_t *s, const double *x, const double *grid, double *y, double *y_abs,
                   double *y_abs_in, int64_t *y_terms);

/* The outputs of one point of batch row n for the coordinates coords[0 .. d) (grid order: along W
 * first): y_point[c] for every channel. Returns 0 or -1. */
int gs_ref_point(const gs_ref_shape_t *s, const double *x, int64_t n, const double *coords, double *y_point);

/* dx (every element written) and dgrid (every element written) from x, grid and dy; either may be
 * NULL, as may every _abs, _abs_in and _terms array. Returns 0, or -1 for an invalid shape. */
int gs_ref_backward(const gs_ref_shape_t *s, const double *x, const double *grid, const double *dy, double *dx,
                    double *dx_abs, double *dx_abs_in, int64_t *dx_terms, double *dgrid, double *dgrid_abs,
                    double *dgrid_abs_in, int64_t *dgrid_terms);

#endif
