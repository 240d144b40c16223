/* Convolution over 1, 2 or 3 spatial dims (section 2 of the guide): forward, data backward and
 * weight backward, as cuDNN and PyTorch compute them (cross-correlation, no kernel flip).
 *
 * Logical shapes (d = 1, 2 or 3 spatial dims; G = options.groups, Cg = C / G, Kg = K / G):
 *   x [N, C, S_1 .. S_d]     input
 *   w [K, Cg, R_1 .. R_d]    filter
 *   y [N, K, P_1 .. P_d]     output, P_i = floor((S_i + 2 pad_i - dil_i (R_i - 1) - 1) / stride_i) + 1
 *   bias [K]                 optional
 * forward:          y[n, k, p] = bias[k] + sum_{c < Cg, r} x[n, g Cg + c, p stride - pad + r dil] w[k, c, r]
 *                   with g = k / Kg; positions outside x read as zero (padding).
 * data backward:    dx[n, g Cg + c, s] = sum_{o < Kg, r, p : p stride - pad + r dil = s}
 *                                        dy[n, g Kg + o, p] w[g Kg + o, c, r]
 * weight backward:  dw[k, c, r] = sum_{n, p} dy[n, k, p] x[n, g Cg + c, p stride - pad + r dil];
 *                   dbias[k] = sum_{n, p} dy[n, k, p] (optional)
 *
 * Layout is the tensors' strides (elements, any valid view inside its buffer): channels-last
 * memory (NHWC, NDHWC; the guide's conv_forward_nhwc) is x viewed as [N, C, H, W] with strides
 * [H W C, 1, W C, C]; rudnn_conv_channels_last fills such a descriptor. Every tensor may have its
 * own layout. All tensors of a call share one dtype, F32, F16 or BF16; sums run in FP32 in a fixed
 * order, so results are the same run to run. Outputs may not overlap any input (nor each other).
 * N = 0 writes nothing (weight backward: zeros). C, K >= 1, every dim of w >= 1.
 *
 * Strategies (DESIGN.md 5): Direct (a work-item per output, the sum walked directly), ImplicitGemm
 * (the same sum as a tiled matrix product whose operands are gathered from x, w and dy on the fly:
 * no im2col copy, no workspace), Autotune (times the candidates that run once per shape bucket and
 * keeps the winner in the autotune cache). As the guide says, the strategy is not always binding:
 * a 3D F32 convolution and a grouped one (G > 1) asked for ImplicitGemm run Direct.
 * rudnn_conv_resolve reports what runs and why, overrides included.
 *
 * Bad arguments return a status, set rudnn_last_error() (op, argument, rule) and write nothing. */
#ifndef RUDNN_CONVOLUTION_H
#define RUDNN_CONVOLUTION_H

#include "rudnn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUDNN_CONV_MAX_SPATIAL 3
/* stride, padding and dilation at most (so that no window arithmetic overflows) */
#define RUDNN_CONV_MAX_PARAM (1 << 24)
/* dims of every tensor at most */
#define RUDNN_CONV_MAX_DIM ((int64_t)1 << 31)

typedef enum rudnn_conv_strategy {
    RUDNN_CONV_AUTOTUNE = 0,      /* the default: the fastest candidate that runs, tuned once per
                                   * shape bucket (RUDNN_AUTOTUNE=off: the static choice) */
    RUDNN_CONV_DIRECT = 1,        /* a work-item per output element */
    RUDNN_CONV_IMPLICIT_GEMM = 2, /* tiled implicit GEMM (overridden to Direct: 3D F32, groups > 1) */
} rudnn_conv_strategy_t;

typedef enum rudnn_conv_direction {
    RUDNN_CONV_FORWARD = 0,
    RUDNN_CONV_DATA_BACKWARD = 1,
    RUDNN_CONV_WEIGHT_BACKWARD = 2,
} rudnn_conv_direction_t;

typedef struct rudnn_conv_options {
    int64_t stride[RUDNN_CONV_MAX_SPATIAL];   /* >= 1 */
    int64_t padding[RUDNN_CONV_MAX_SPATIAL];  /* >= 0, zeros on both sides */
    int64_t dilation[RUDNN_CONV_MAX_SPATIAL]; /* >= 1 */
    int64_t groups;                           /* >= 1, divides C and K */
} rudnn_conv_options_t;
/* Entries i >= d of the arrays are ignored. */

/* Stride 1, padding 0, dilation 1, one group. NULL options mean these. */
RUDNN_API void rudnn_conv_options_init(rudnn_conv_options_t *options);

/* The output's dims [N, K, P_1 .. P_d] (rank x_rank) for x's and w's dims: BAD_SHAPE where a P_i
 * would be below 1, or the shapes disagree (ranks 3..5, w's Cg times G = C, G divides K). */
RUDNN_API rudnn_status_t rudnn_conv_output_dims(int x_rank, const int64_t *x_dims, const int64_t *w_dims,
                                                const rudnn_conv_options_t *options, int64_t *y_dims);

/* A channels-last descriptor of logical dims [N, C, S_1 .. S_d] (rank 3..5): memory [N, S_1 .. S_d, C]. */
RUDNN_API rudnn_status_t rudnn_conv_channels_last(rudnn_tensor_t *tensor, rudnn_buffer_t buffer, size_t offset,
                                                  rudnn_dtype_t dtype, int rank, const int64_t *dims);

/* What a request resolves to on the queue's device: the strategy that runs, the kernel (as
 * rudnn_last_kernel() names it) and why (candidates passed over, an override, or "autotuned"). */
typedef struct rudnn_conv_choice {
    rudnn_conv_strategy_t strategy;
    const char *kernel;
    char reason[512];
} rudnn_conv_choice_t;

/* The operands of one direction. Forward: x, w, bias (or NULL) in, y out. Data backward: dy, w in,
 * dx out. Weight backward: x, dy in, dw out and dbias (or NULL) out. Other fields NULL. */
typedef struct rudnn_conv_tensors {
    const rudnn_tensor_t *x, *w, *bias, *y;
    const rudnn_tensor_t *dy, *dx, *dw, *dbias;
} rudnn_conv_tensors_t;

/* Fails as the call would for the same arguments; never times anything (a cold autotune cache
 * answers the static choice, which the first call replaces by tuning). */
RUDNN_API rudnn_status_t rudnn_conv_resolve(rudnn_queue_t queue, rudnn_conv_direction_t direction,
                                            const rudnn_conv_tensors_t *tensors,
                                            const rudnn_conv_options_t *options, rudnn_conv_strategy_t strategy,
                                            rudnn_conv_choice_t *choice);

/* Workspace bytes the call needs (0 for every kernel of this release; query it all the same). */
RUDNN_API rudnn_status_t rudnn_conv_workspace_size(rudnn_queue_t queue, rudnn_conv_direction_t direction,
                                                   const rudnn_conv_tensors_t *tensors,
                                                   const rudnn_conv_options_t *options,
                                                   rudnn_conv_strategy_t strategy, size_t *bytes);

/* The three directions. workspace may be NULL (the queue's pool); else workspace_bytes must be at
 * least rudnn_conv_workspace_size's, and it may not overlap any tensor of the call. */
RUDNN_API rudnn_status_t rudnn_conv_forward(rudnn_queue_t queue, const rudnn_tensor_t *x, const rudnn_tensor_t *w,
                                            const rudnn_tensor_t *bias, const rudnn_conv_options_t *options,
                                            rudnn_conv_strategy_t strategy, rudnn_buffer_t workspace,
                                            size_t workspace_bytes, const rudnn_tensor_t *y);
RUDNN_API rudnn_status_t rudnn_conv_data_backward(rudnn_queue_t queue, const rudnn_tensor_t *dy,
                                                  const rudnn_tensor_t *w, const rudnn_conv_options_t *options,
                                                  rudnn_conv_strategy_t strategy, rudnn_buffer_t workspace,
                                                  size_t workspace_bytes, const rudnn_tensor_t *dx);
RUDNN_API rudnn_status_t rudnn_conv_weight_backward(rudnn_queue_t queue, const rudnn_tensor_t *x,
                                                    const rudnn_tensor_t *dy, const rudnn_conv_options_t *options,
                                                    rudnn_conv_strategy_t strategy, rudnn_buffer_t workspace,
                                                    size_t workspace_bytes, const rudnn_tensor_t *dw,
                                                    const rudnn_tensor_t *dbias);

/* The backend's convolution kernels: count, then name, strategy and direction of each. */
RUDNN_API rudnn_status_t rudnn_conv_kernel_count(rudnn_context_t context, int *count);
RUDNN_API rudnn_status_t rudnn_conv_kernel_info(rudnn_context_t context, int index, const char **name,
                                                rudnn_conv_strategy_t *strategy,
                                                rudnn_conv_direction_t *direction);

#ifdef __cplusplus
}
#endif
#endif
