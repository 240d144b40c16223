/* The convolution family's kernel table (ops/convolution.c plans; include/rudnn/convolution.h has
 * the contract). Included through backends/backend.h.
 *
 * Every direction is one product C[m, j] = sum_t A[m, t] B[t, j] per group g, whose operands are
 * gathered from the tensors (an implicit GEMM; Direct kernels walk the same sum per output):
 *   forward          m = (n, p)  j = k   t = (c, r)   A = x[n, g Cg + c, p s - pad + r dil]  B = w[g Kg + j, c, r]
 *   data backward    m = (n, q)  j = c   t = (k, r)   A = dy[n, g Kg + k, (q + pad - r dil) / s] where that
 *                                                     divides exactly and lands in 0..P - 1 (else no term);
 *                                                     B = w[g Kg + k, j, r]
 *   weight backward  m = k       j = (c, r) t = (n, p) A = dy[n, g Kg + m, p]  B = x[n, g Cg + c, p s - pad + r dil]
 * with n the batch row, p an output position, q an input position, r a filter tap (each the
 * flattened index of up to three spatial dims), Cg = C / G, Kg = K / G. Outputs are written, never
 * accumulated into; t runs in increasing order, so results do not depend on the launch. */
#ifndef RUDNN_HAL_CONVOLUTION_H
#define RUDNN_HAL_CONVOLUTION_H

#include "table.h"
#include "rudnn/convolution.h"

/* Spatial dims are kept as three, the op's d dims last (missing leading dims: size 1, element
 * stride 0, stride 1, padding 0, dilation 1). Tensor strides are in elements, dims
 * [batch or filter, channel, D, H, W]. */
typedef struct rudnn_conv_plan {
    rudnn_conv_direction_t direction;
    rudnn_dtype_t dtype;    /* every tensor's: F32, F16 or BF16 */
    int spatial;            /* d: 1, 2 or 3 */
    int64_t batch;          /* N >= 1 (ops/ handles N = 0 without a kernel where it can) */
    int64_t in_channels;    /* C */
    int64_t out_channels;   /* K */
    int64_t groups;         /* G */
    int64_t in_size[3];     /* S: x's (dx's) spatial dims */
    int64_t filter_size[3]; /* R */
    int64_t out_size[3];    /* P: y's (dy's) spatial dims */
    int64_t stride[3], padding[3], dilation[3];
    int64_t x_stride[5];    /* x or dx */
    int64_t w_stride[5];    /* w or dw */
    int64_t y_stride[5];    /* y or dy */
    int has_bias;           /* forward: bias is read; weight backward: dbias is written */
    int64_t bias_stride;    /* elements between bias[k] and bias[k + 1] */
} rudnn_conv_plan_t;

/* The tensors by role: x is x (forward, weight backward) or dx (data backward), w is w or dw, y is
 * y or dy; bias is bias or dbias (mem NULL when absent); workspace mem NULL when none is needed. */
typedef struct rudnn_conv_operands {
    rudnn_mem_ref_t x, w, y, bias, workspace;
} rudnn_conv_operands_t;

typedef struct rudnn_convolution_kernels {
    uint32_t struct_size; /* sizeof(rudnn_convolution_kernels_t) the plugin was built with */
    /* The candidates (hal/table.h), most preferred first (static storage); strategy is a
     * rudnn_conv_strategy_t, and candidate_directions[c] the rudnn_conv_direction_t it computes. */
    const rudnn_kernel_candidate_t *candidates;
    const int *candidate_directions;
    uint32_t candidate_count;
    /* Whether candidate c runs plan on device (and is preferred there). Asked only for a
     * candidate of the plan's direction. */
    void (*check)(void *device, const rudnn_conv_plan_t *plan, uint32_t c, rudnn_candidate_verdict_t *verdict);
    /* Workspace bytes candidate c needs for plan (asked only for a candidate that runs). */
    rudnn_status_t (*workspace)(void *device, const rudnn_conv_plan_t *plan, uint32_t c, size_t *bytes);
    /* Runs candidate c, which check said runs plan, or fails; never another kernel. */
    rudnn_status_t (*run)(void *queue, const rudnn_conv_plan_t *plan, uint32_t c, const rudnn_conv_operands_t *ops);
    /* Entries appended later are optional: read them through RUDNN_KERNEL_ENTRY. */
} rudnn_convolution_kernels_t;

/* A table shorter than this is refused (the family is then absent on that backend). */
#define rudnn_convolution_kernels_min_size RUDNN_TABLE_END(rudnn_convolution_kernels_t, run)

#endif
