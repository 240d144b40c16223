/* Plain-C host reference of interpolation (include/rudnn/interpolation.h): forward and backward of
 * NEAREST, NEAREST_EXACT, LINEAR and CUBIC over 1, 2 or 3 spatial dims, with align_corners and
 * explicit scales, as PyTorch's F.interpolate (no antialias).
 *
 * The source coordinates are part of the contract and are computed here exactly as the header
 * writes them, in C `float` (each product and difference rounded to FP32, nothing contracted):
 *   ratio r    align_corners (LINEAR, CUBIC): (float)(S - 1) / (float)(O - 1), 0 when O = 1
 *              else scales[i] > 0: (float)(1.0 / scales[i]), else (float)S / (float)O
 *   NEAREST          src = (float)o * r,                    index min(floor(src), S - 1)
 *   NEAREST_EXACT    src = ((float)o + 0.5f) * r,           index min(floor(src), S - 1)
 *   LINEAR, CUBIC    align_corners: src = (float)o * r; else src = ((float)o + 0.5f) * r - 0.5f,
 *                    and for LINEAR max(src, 0)
 *   t = src - floor(src) in float (as PyTorch); floor(src) is taken as an integer without limit
 *   and only the clamped tap indices are converted, so huge coordinates (a ratio of 1e20) are
 *   well defined: every tap lands on S - 1.
 * The taps of one dim and output index o, each index clamped into [0, S - 1]:
 *   NEAREST*   one tap, weight 1
 *   LINEAR     floor(src) with 1 - t, floor(src) + 1 with t
 *   CUBIC      floor(src) - 1 .. floor(src) + 2 with Keys' weights (A = -0.75), PyTorch's
 *              get_cubic_upsample_coefficients: W(t + 1), W(t), W(1 - t), W(2 - t),
 *              W(x) = ((A + 2) x - (A + 3)) x^2 + 1 for x <= 1, ((A x - 5A) x + 8A) x - 4A for 1 < x < 2
 * The weights (from the float t) and every product and sum are in double; nothing is rounded to a
 * dtype. Taps that clamp onto one index stay separate terms (their weights add). An output's weight
 * over a d-dim input is the product of its dims' tap weights.
 *   forward    y[o] = sum over tap combinations k of w_k x[idx_k]
 *   backward   dx = 0, then each output o adds w_k dy[o] into dx[idx_k] for each combination k:
 *              the adjoint of the forward by construction (<forward(x), dy> = <x, backward(dy)>).
 *
 * Arrays are logical and contiguous: x (dx) [N][C][S_1..S_d], y (dy) [N][C][O_1..O_d]; converting
 * device layouts is the caller's. The optional arrays give, per output element, what a rounding
 * error bound scales with:
 *   _abs        sum over its terms of |w_k| |value_k| (value: x forward, dy backward)
 *   _abs_in     sum over its terms of |value_k| (what an error in the weights multiplies)
 *   dx_terms    how many terms a dx element sums (forward: an output sums taps^d terms) */
#ifndef RUDNN_TESTS_INTERPOLATION_REF_H
#define RUDNN_TESTS_INTERPOLATION_REF_H

#include <stdint.h>

#define INTERP_REF_MAX_SPATIAL 3
#define INTERP_REF_MAX_TAPS 4
#define INTERP_REF_CUBIC_A (-0.75)

/* The modes, numbered as rudnn_interp_mode_t. */
enum { INTERP_REF_NEAREST = 0, INTERP_REF_NEAREST_EXACT = 1, INTERP_REF_LINEAR = 2, INTERP_REF_CUBIC = 3 };

/* A problem: entries i >= spatial of the arrays are ignored. */
typedef struct interp_ref_shape {
    int mode;                              /* INTERP_REF_* */
    int spatial;                           /* d: 1, 2 or 3 */
    int align_corners;                     /* 0 or 1 (0 for the nearest modes) */
    int64_t batch, channels;               /* N, C >= 0 */
    int64_t in_size[INTERP_REF_MAX_SPATIAL];  /* S_i >= 1 */
    int64_t out_size[INTERP_REF_MAX_SPATIAL]; /* O_i >= 1 */
    double scales[INTERP_REF_MAX_SPATIAL];    /* 0: from the sizes; else finite, > 0 */
} interp_ref_shape_t;

/* 1 when the shape is one the header accepts (the rules above), else 0. */
int interp_ref_valid(const interp_ref_shape_t *s);

/* The FP32 factor r of dim i (0 <= i < spatial). */
float interp_ref_ratio(const interp_ref_shape_t *s, int i);

/* The FP32 source coordinate of output index o along dim i (for LINEAR after max(src, 0); for the
 * nearest modes the product before the floor). */
float interp_ref_source(const interp_ref_shape_t *s, int i, int64_t o);

/* The taps of output index o along dim i: their indices (clamped into [0, S_i - 1]) and weights;
 * returns how many (1, 2 or 4), or 0 for a NaN coordinate (no such tap is defined). */
int interp_ref_taps(const interp_ref_shape_t *s, int i, int64_t o, int64_t idx[INTERP_REF_MAX_TAPS],
                    double w[INTERP_REF_MAX_TAPS]);

/* Taps per dim of the mode (1, 2 or 4) and per output (that to the power d). */
int interp_ref_taps_per_dim(int mode);
int64_t interp_ref_terms_forward(const interp_ref_shape_t *s);

/* Element counts of x and y (0 for an invalid shape). */
int64_t interp_ref_x_count(const interp_ref_shape_t *s);
int64_t interp_ref_y_count(const interp_ref_shape_t *s);

/* The largest |src| over every output index of every dim (what an FP32 coordinate's ulp scales
 * with). */
double interp_ref_max_source(const interp_ref_shape_t *s);

/* y from x; y_abs and y_abs_in may be NULL. Returns 0, or -1 for an invalid shape or a NaN
 * coordinate (nothing written then). */
int interp_ref_forward(const interp_ref_shape_t *s, const double *x, double *y, double *y_abs, double *y_abs_in);

/* dx from dy (every dx element written); dx_abs, dx_abs_in and dx_terms may be NULL. Returns 0, or
 * -1 for an invalid shape or a NaN coordinate (nothing written then). */
int interp_ref_backward(const interp_ref_shape_t *s, const double *dy, double *dx, double *dx_abs,
                        double *dx_abs_in, int64_t *dx_terms);

#endif
