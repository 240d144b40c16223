/* Grid sampling (the guide's feature list: Rasterstichprobe), forward and backward, as PyTorch's
 * F.grid_sample computes it.
 *
 *   2D: x [N, C, H, W], grid [N, Ho, Wo, 2] -> y [N, C, Ho, Wo]
 *   3D: x [N, C, D, H, W], grid [N, Do, Ho, Wo, 3] -> y [N, C, Do, Ho, Wo]
 * grid holds normalized coordinates, the last dim ordered (x, y[, z]) = (along W, along H[, along
 * D]); -1 and 1 are the first and last input positions' centres with align_corners, their outer
 * edges without. Per point and dim (size S, coordinate g), in FP32:
 *   align_corners: i = (g + 1) / 2 (S - 1)        else: i = ((g + 1) S - 1) / 2
 * then the padding mode (for BILINEAR and NEAREST on i, for BICUBIC on each tap's index):
 *   ZEROS       taps outside 0 .. S - 1 read 0
 *   BORDER      i clipped into [0, S - 1]
 *   REFLECTION  i reflected at the borders (align_corners: over [0, S - 1]; else over [-0.5, S - 0.5]),
 *               then clipped into [0, S - 1]
 * BILINEAR (trilinear in 3D) weights the 2 (8) neighbours floor(i), floor(i) + 1 by 1 - t and t;
 * NEAREST reads round-half-to-even(i); BICUBIC (2D only) weights the 4 x 4 neighbours
 * floor(i) - 1 .. + 2 by Keys' cubic convolution (A = -0.75). A coordinate that is not finite
 * after the padding (or past the int range) reads as position -100, as PyTorch's: nothing is read
 * out of bounds, and under ZEROS it reads 0 (BILINEAR and NEAREST skip taps outside x; BICUBIC
 * multiplies their 0 by the weight, so a NaN weight gives NaN, as PyTorch's).
 *
 * Backward: dx (optional) = the sum over the points and taps that read each x element of weight
 * times dy; dgrid (optional) = the derivative of sum(dy * y) with respect to grid (NEAREST: 0), as
 * PyTorch's: BORDER and REFLECTION pass it through their clipping and reflection (0 at and past a
 * clipped border), BICUBIC through the unnormalization only. Both
 * deterministic: dx is gathered per element from the points sorted into a list per input element
 * (a counting sort in the workspace), never added with atomics; dgrid sums over C in order.
 *
 * Tensors: any valid views inside their buffers; x, grid, y, dy, dx, dgrid share one dtype (F32,
 * F16 or BF16); sums in FP32. Outputs may not overlap any input or each other. N = 0 or C = 0
 * writes nothing (dgrid: zeros when C = 0). Bad arguments return a status, set rudnn_last_error()
 * (op, argument, rule) and write nothing. */
#ifndef RUDNN_GRID_SAMPLE_H
#define RUDNN_GRID_SAMPLE_H

#include "rudnn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every dim at most this (the OpenCL backward with dx: N Do Ho Wo below 2^28 points, and N D H W x
 * elements below 2^31). */
#define RUDNN_GRID_SAMPLE_MAX_DIM ((int64_t)1 << 31)

typedef enum rudnn_grid_sample_mode {
    RUDNN_GRID_SAMPLE_BILINEAR = 0, /* trilinear in 3D */
    RUDNN_GRID_SAMPLE_NEAREST = 1,
    RUDNN_GRID_SAMPLE_BICUBIC = 2,  /* 2D only */
} rudnn_grid_sample_mode_t;

typedef enum rudnn_grid_sample_padding {
    RUDNN_GRID_SAMPLE_ZEROS = 0,
    RUDNN_GRID_SAMPLE_BORDER = 1,
    RUDNN_GRID_SAMPLE_REFLECTION = 2,
} rudnn_grid_sample_padding_t;

typedef struct rudnn_grid_sample_options {
    rudnn_grid_sample_mode_t mode;
    rudnn_grid_sample_padding_t padding;
    int align_corners; /* 0 or 1 */
} rudnn_grid_sample_options_t;

/* BILINEAR, ZEROS, align_corners 0 (PyTorch's defaults). NULL options mean these. */
RUDNN_API void rudnn_grid_sample_options_init(rudnn_grid_sample_options_t *options);

RUDNN_API rudnn_status_t rudnn_grid_sample_forward(rudnn_queue_t queue, const rudnn_tensor_t *x,
                                                   const rudnn_tensor_t *grid,
                                                   const rudnn_grid_sample_options_t *options,
                                                   const rudnn_tensor_t *y);

/* dx and dgrid: either may be NULL (not both). Workspace: rudnn_grid_sample_backward_workspace_size
 * bytes (the counting sort's lists: 0 without dx), or NULL for the queue's pool. */
RUDNN_API rudnn_status_t rudnn_grid_sample_backward_workspace_size(rudnn_queue_t queue, const rudnn_tensor_t *x,
                                                                   const rudnn_tensor_t *grid,
                                                                   const rudnn_tensor_t *dy,
                                                                   const rudnn_grid_sample_options_t *options,
                                                                   const rudnn_tensor_t *dx,
                                                                   const rudnn_tensor_t *dgrid, size_t *bytes);
RUDNN_API rudnn_status_t rudnn_grid_sample_backward(rudnn_queue_t queue, const rudnn_tensor_t *x,
                                                    const rudnn_tensor_t *grid, const rudnn_tensor_t *dy,
                                                    const rudnn_grid_sample_options_t *options,
                                                    rudnn_buffer_t workspace, size_t workspace_bytes,
                                                    const rudnn_tensor_t *dx, const rudnn_tensor_t *dgrid);

#ifdef __cplusplus
}
#endif
#endif
