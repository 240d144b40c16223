/* Plain-C FP64 host reference of convolution (include/rudnn/convolution.h): forward with an
 * optional bias, data backward, weight backward with an optional dbias, over 1, 2 or 3 spatial
 * dims, with groups, stride, padding and dilation. Written to be obviously correct: all three
 * directions walk the same list of terms of the forward sum,
 *   y[n, k, p] gets x[n, g Cg + c, q] w[k, c, r]   for every n, k, p, c < Cg, r with
 *   q_i = p_i stride_i - pad_i + r_i dil_i inside 0..S_i - 1 (else the term is padding: zero),
 *   g = k / Kg,
 * and add each term where the direction's output is: forward into y[n, k, p], data backward
 * (dy[n, k, p] w[k, c, r]) into dx[n, g Cg + c, q], weight backward (dy[n, k, p] x[n, g Cg + c, q])
 * into dw[k, c, r]; bias[k] is added to every y[n, k, p], dbias[k] is the sum of dy[n, k, p] over
 * n and p. So data and weight backward are the adjoints of forward by construction, a derivation
 * independent of the gathers of backends/hal/convolution.h. Every product and sum is in double;
 * nothing is rounded.
 *
 * Arrays are logical and contiguous: x (dx) [N][C][S_1..S_d], w (dw) [K][Cg][R_1..R_d],
 * y (dy) [N][K][P_1..P_d], bias (dbias) [K]. Converting device layouts is the caller's. Each output
 * also gets, where its _abs array is not NULL, the sum of the absolute values of the terms added
 * into it (|bias[k]| included), the scale of its rounding error bound. */
#ifndef RUDNN_TESTS_CONVOLUTION_REF_H
#define RUDNN_TESTS_CONVOLUTION_REF_H

#include <stdint.h>

#define CONV_REF_MAX_SPATIAL 3

/* A problem: entries i >= spatial of the arrays are ignored. */
typedef struct conv_ref_shape {
    int spatial;                                 /* d: 1, 2 or 3 */
    int64_t batch;                               /* N >= 0 */
    int64_t in_channels, out_channels, groups;   /* C, K >= 1, G >= 1 dividing both */
    int64_t in_size[CONV_REF_MAX_SPATIAL];       /* S_i >= 1 */
    int64_t filter_size[CONV_REF_MAX_SPATIAL];   /* R_i >= 1 */
    int64_t stride[CONV_REF_MAX_SPATIAL];        /* >= 1 */
    int64_t padding[CONV_REF_MAX_SPATIAL];       /* >= 0, both sides */
    int64_t dilation[CONV_REF_MAX_SPATIAL];      /* >= 1 */
} conv_ref_shape_t;

/* P_i = floor((S_i + 2 pad_i - dil_i (R_i - 1) - 1) / stride_i) + 1 into out_size[0..d-1].
 * Returns 0, or -1 when the shape is invalid (a rule above broken) or some P_i < 1. */
int conv_ref_out_size(const conv_ref_shape_t *s, int64_t out_size[CONV_REF_MAX_SPATIAL]);

/* Element counts of x, w and y (0 for an invalid shape). */
int64_t conv_ref_x_count(const conv_ref_shape_t *s);
int64_t conv_ref_w_count(const conv_ref_shape_t *s);
int64_t conv_ref_y_count(const conv_ref_shape_t *s);

/* The most terms any one output of a direction sums (bias and dbias not counted): forward
 * Cg prod R, data backward Kg prod R, weight backward N prod P. */
int64_t conv_ref_max_terms_forward(const conv_ref_shape_t *s);
int64_t conv_ref_max_terms_data(const conv_ref_shape_t *s);
int64_t conv_ref_max_terms_weight(const conv_ref_shape_t *s);

/* y = conv(x, w) (+ bias[k] when bias is not NULL). y_abs NULL: not computed. Returns 0, or -1
 * for an invalid shape (nothing written). */
int conv_ref_forward(const conv_ref_shape_t *s, const double *x, const double *w, const double *bias, double *y,
                     double *y_abs);

/* dx = the data gradient of dy through w (positions no term reaches get 0). */
int conv_ref_data_backward(const conv_ref_shape_t *s, const double *dy, const double *w, double *dx,
                           double *dx_abs);

/* dw = the weight gradient of dy and x; dbias (when not NULL) = sum over n, p of dy. With N = 0
 * both are zeros. */
int conv_ref_weight_backward(const conv_ref_shape_t *s, const double *x, const double *dy, double *dw,
                             double *dw_abs, double *dbias, double *dbias_abs);

#endif
