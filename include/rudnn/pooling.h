/* Pooling over 1, 2 or 3 spatial dims (the guide's feature list: Pooling): max and average,
 * forward and backward, as cuDNN and PyTorch (MaxPoolNd, AvgPoolNd) compute them.
 *
 * Logical shapes (d = 1, 2 or 3 spatial dims): x [N, C, S_1 .. S_d] -> y [N, C, P_1 .. P_d],
 *   P_i = floor((S_i + 2 pad_i - dil_i (R_i - 1) - 1) / stride_i) + 1   (R: the window)
 * with ceil_mode the division rounds up (so a last window may overhang the padded input: its
 * positions past it read nothing), and then a last window that would start past the input and its
 * left padding (at (P_i - 1) stride_i >= S_i + pad_i) is dropped, as PyTorch does. P_i >= 1.
 * Window of output p along dim i: input positions p stride_i - pad_i + r dil_i, r = 0 .. R_i - 1.
 *   MAX:               y = the largest element of the window that lies inside x; NaN if any is NaN;
 *                      -inf when none lies inside x. The argmax is the first such element in
 *                      window order (r_1 slowest, r_d fastest; the first NaN where there is one).
 *   AVG_INCLUDE_PAD:   y = (sum of the window's elements inside x) / (positions of the window inside
 *                      the padded input [-pad_i, S_i + pad_i) along every dim)
 *   AVG_EXCLUDE_PAD:   y = (sum of the window's elements inside x) / (positions inside x); 0 when none
 * Averages take dilation 1. Padding is at most half the window (pad_i <= R_i / 2, PyTorch's rule).
 * Backward: dx[q] = sum over the outputs p whose window holds q of dy[p] times (MAX) [q is p's argmax]
 * or (averages) 1 / p's divisor; every dx element is written (zeros where no window takes it), each
 * as one sum in a fixed order: no atomics, the same bits run to run. The max backward finds each
 * argmax again from x (as cuDNN, which takes x), so it needs x; the averages read no x.
 *
 * Layout is the tensors' strides (any valid view inside its buffer, each tensor its own; channels-
 * last memory is a view: rudnn_conv_channels_last of rudnn/convolution.h fills one). x, y, dy and dx
 * share one dtype, F32, F16 or BF16; sums and divisions in FP32. indices (optional, MAX forward)
 * is I64 [N, C, P...]: the argmax's flattened position in x's spatial box (S_2 S_3 q_1 + S_3 q_2 + q_3
 * for 3D, as PyTorch's return_indices), -1 where the window holds no element of x.
 * Outputs may not overlap any input or each other. N = 0 or C = 0 writes nothing.
 * Bad arguments return a status, set rudnn_last_error() (op, argument, rule) and write nothing. */
#ifndef RUDNN_POOLING_H
#define RUDNN_POOLING_H

#include "rudnn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUDNN_POOL_MAX_SPATIAL 3
/* window, stride and dilation at most (so that no window arithmetic overflows) */
#define RUDNN_POOL_MAX_PARAM (1 << 24)
/* spatial dims at most (N and C too) */
#define RUDNN_POOL_MAX_DIM ((int64_t)1 << 31)

typedef enum rudnn_pool_mode {
    RUDNN_POOL_MAX = 0,
    RUDNN_POOL_AVG_INCLUDE_PAD = 1, /* PyTorch's count_include_pad=True (its default) */
    RUDNN_POOL_AVG_EXCLUDE_PAD = 2,
} rudnn_pool_mode_t;

typedef struct rudnn_pool_options {
    rudnn_pool_mode_t mode;
    int64_t window[RUDNN_POOL_MAX_SPATIAL];   /* R_i >= 1 */
    int64_t stride[RUDNN_POOL_MAX_SPATIAL];   /* >= 1 */
    int64_t padding[RUDNN_POOL_MAX_SPATIAL];  /* 0 .. R_i / 2 */
    int64_t dilation[RUDNN_POOL_MAX_SPATIAL]; /* >= 1; 1 for the averages */
    int ceil_mode;                            /* 0 or 1 */
} rudnn_pool_options_t;
/* Entries i >= d of the arrays are ignored. */

/* MAX, window 1, stride 1, padding 0, dilation 1, floor: set the window (and stride) after. */
RUDNN_API void rudnn_pool_options_init(rudnn_pool_options_t *options);

/* y's dims [N, C, P_1 .. P_d] (rank x_rank, 3..5) for x's dims: BAD_SHAPE where a P_i would be below
 * 1, BAD_PARAM for options outside their ranges. */
RUDNN_API rudnn_status_t rudnn_pool_output_dims(int x_rank, const int64_t *x_dims,
                                                const rudnn_pool_options_t *options, int64_t *y_dims);

/* y (and, MAX only, indices, or NULL) from x. */
RUDNN_API rudnn_status_t rudnn_pool_forward(rudnn_queue_t queue, const rudnn_tensor_t *x,
                                            const rudnn_pool_options_t *options, const rudnn_tensor_t *y,
                                            const rudnn_tensor_t *indices);

/* dx from dy. x: required for MAX (the argmax is found again from it); the averages do not read it
 * (NULL, or a tensor checked as for MAX). */
RUDNN_API rudnn_status_t rudnn_pool_backward(rudnn_queue_t queue, const rudnn_tensor_t *x,
                                             const rudnn_tensor_t *dy, const rudnn_pool_options_t *options,
                                             const rudnn_tensor_t *dx);

#ifdef __cplusplus
}
#endif
#endif
