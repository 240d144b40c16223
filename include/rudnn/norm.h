/* Normalization family: LayerNorm, RMSNorm, softmax, fused residual-add + RMSNorm.
 *
 * All ops work on the last axis of a contiguous tensor with any number of
 * leading dimensions (rows = product of the leading dims, may be 0) and keep
 * its shape. input/output are F32, F16 or BF16; gamma/beta are F32 [H];
 * statistics and affine arithmetic are FP32; outputs are rounded (RNE) to the
 * input dtype. An output may be the very same tensor as an input (in place);
 * any other overlap is rejected. Bad arguments return a status, set
 * rudnn_last_error() and leave every output untouched. */
#ifndef RUDNN_NORM_H
#define RUDNN_NORM_H

#include "rudnn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = (x - mean) / sqrt(var + eps) * gamma + beta; beta may be NULL. */
RUDNN_API rudnn_status_t rudnn_layer_norm(rudnn_queue_t queue, const rudnn_tensor_t *input,
                                          const rudnn_tensor_t *gamma,
                                          const rudnn_tensor_t *beta, float eps,
                                          const rudnn_tensor_t *output);

/* y = x / sqrt(mean(x^2) + eps) * gamma. Large inputs do not overflow the sum
 * of squares (it is computed with an exact power-of-two scaling). */
RUDNN_API rudnn_status_t rudnn_rms_norm(rudnn_queue_t queue, const rudnn_tensor_t *input,
                                        const rudnn_tensor_t *gamma, float eps,
                                        const rudnn_tensor_t *output);

/* y = exp(x - max) / sum(exp(x - max)). A row with NaN or +inf, or all -inf,
 * gives NaN, as in PyTorch. */
RUDNN_API rudnn_status_t rudnn_softmax_last_axis(rudnn_queue_t queue,
                                                 const rudnn_tensor_t *input,
                                                 const rudnn_tensor_t *output);

/* x = a + residual (rounded to the dtype, written to x_out);
 * y = rms_norm(x, gamma, eps); rstd = 1 / sqrt(mean(x^2) + eps), F32 with the
 * input's leading dims (or [rows]: any shape with rows elements).
 * a, residual, y_out and x_out share shape and dtype; y_out and x_out may each
 * be exactly a or residual (in place) but must not overlap each other. */
RUDNN_API rudnn_status_t rudnn_add_rms_norm(rudnn_queue_t queue, const rudnn_tensor_t *a,
                                            const rudnn_tensor_t *residual,
                                            const rudnn_tensor_t *gamma, float eps,
                                            const rudnn_tensor_t *y_out,
                                            const rudnn_tensor_t *rstd_out,
                                            const rudnn_tensor_t *x_out);

#ifdef __cplusplus
}
#endif
#endif
