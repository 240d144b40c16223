/* Plain-C FP64 host reference of pooling (include/rudnn/pooling.h): forward (y and the argmax
 * indices) and backward of MAX, AVG_INCLUDE_PAD and AVG_EXCLUDE_PAD over 1, 2 or 3 spatial dims,
 * with stride, padding, dilation and ceil_mode. Written to be obviously correct: every output p
 * walks its window position by position,
 *   q_i = p_i stride_i - pad_i + r_i dil_i,  r_i = 0 .. R_i - 1  (r_1 slowest, r_d fastest),
 * and each direction is read off that walk:
 *   MAX               the largest q inside x; once a NaN is seen, that first NaN (y NaN); no q
 *                     inside x: y = -inf, index -1. Ties keep the first (a later element must be
 *                     strictly larger to take over), so the argmax is the first in window order.
 *   AVG_INCLUDE_PAD   sum over q inside x / (prod_i of the r_i whose q_i lies in [-pad_i, S_i + pad_i))
 *   AVG_EXCLUDE_PAD   sum over q inside x / (the number of q inside x); 0 when there is none
 *   backward          dx = 0, then each output p adds dy[p] into dx[its argmax] (MAX; nothing when
 *                     the window holds no element of x) or dy[p] / divisor into every q inside x
 *                     (averages): the adjoint of the forward by construction.
 * Every sum and division is in double; nothing is rounded. Indices are the flattened spatial
 * position in x's box (q_1 S_2 S_3 + q_2 S_3 + q_3 for 3D; q_1 S_2 + q_2 for 2D; q_1 for 1D).
 *
 * Arrays are logical and contiguous: x (dx) [N][C][S_1..S_d], y (dy, indices) [N][C][P_1..P_d].
 * Converting device layouts is the caller's. The optional _abs arrays get, per output element, the
 * sum of the absolute values of the terms added into it (for the averages each term x / divisor,
 * so forward y_abs = sum |x| / divisor), the scale of an FP32 rounding error bound; the optional
 * terms array of the backward gets how many terms each dx element sums. */
#ifndef RUDNN_TESTS_POOLING_REF_H
#define RUDNN_TESTS_POOLING_REF_H

#include <stdint.h>

#define POOL_REF_MAX_SPATIAL 3

/* The modes, numbered as rudnn_pool_mode_t. */
enum { POOL_REF_MAX = 0, POOL_REF_AVG_INCLUDE_PAD = 1, POOL_REF_AVG_EXCLUDE_PAD = 2 };

/* What pool_ref_out_size finds wrong (0: nothing). */
enum { POOL_REF_OK = 0, POOL_REF_BAD_PARAM = -1, POOL_REF_BAD_SHAPE = -2 };

/* A problem: entries i >= spatial of the arrays are ignored. */
typedef struct pool_ref_shape {
    int mode;                                  /* POOL_REF_* */
    int spatial;                               /* d: 1, 2 or 3 */
    int64_t batch, channels;                   /* N, C >= 0 */
    int64_t in_size[POOL_REF_MAX_SPATIAL];     /* S_i >= 1 */
    int64_t window[POOL_REF_MAX_SPATIAL];      /* R_i in 1 .. 2^24 */
    int64_t stride[POOL_REF_MAX_SPATIAL];      /* 1 .. 2^24 */
    int64_t padding[POOL_REF_MAX_SPATIAL];     /* 0 .. R_i / 2 */
    int64_t dilation[POOL_REF_MAX_SPATIAL];    /* 1 .. 2^24; exactly 1 for the averages */
    int ceil_mode;                             /* 0 or 1 */
} pool_ref_shape_t;

/* P_i into out_size[0..d-1]:
 *   floor:  P_i = floor((S_i + 2 pad_i - dil_i (R_i - 1) - 1) / stride_i) + 1
 *   ceil:   the same with the division rounded up, then P_i - 1 when (P_i - 1) stride_i >= S_i + pad_i
 * (the divisions are those of the real numbers, for negative numerators too). Returns POOL_REF_OK,
 * POOL_REF_BAD_PARAM (a parameter outside its range above, checked first) or POOL_REF_BAD_SHAPE
 * (some P_i < 1, or N, C < 0, or S_i < 1). */
int pool_ref_out_size(const pool_ref_shape_t *s, int64_t out_size[POOL_REF_MAX_SPATIAL]);

/* Element counts of x and y (0 for an invalid shape). */
int64_t pool_ref_x_count(const pool_ref_shape_t *s);
int64_t pool_ref_y_count(const pool_ref_shape_t *s);

/* The divisor of the averages for output p (its position p[0..d-1]); MAX: 1. 0 for an excluded-pad
 * window without any element of x. */
int64_t pool_ref_divisor(const pool_ref_shape_t *s, const int64_t *p);

/* The most outputs whose windows hold one element of x (the most terms a dx element sums). */
int64_t pool_ref_max_overlap(const pool_ref_shape_t *s);

/* The most elements of x one window holds. */
int64_t pool_ref_window_count(const pool_ref_shape_t *s);

/* y (and, when not NULL, indices: MAX's argmax, -1 for a window without elements of x; for the
 * averages -1 everywhere; y_abs as the header comment). Returns 0, or -1 for an invalid shape
 * (nothing written). */
int pool_ref_forward(const pool_ref_shape_t *s, const double *x, double *y, int64_t *indices, double *y_abs);

/* dx from dy (x: needed for MAX, ignored by the averages and may be NULL). dx_abs and dx_terms may
 * be NULL. Returns 0, or -1 for an invalid shape or a MAX call without x (nothing written). */
int pool_ref_backward(const pool_ref_shape_t *s, const double *x, const double *dy, double *dx, double *dx_abs,
                      int64_t *dx_terms);

#endif
