/* Interpolation (resizing) over 1, 2 or 3 spatial dims (the guide's feature list: Interpolation),
 * forward and backward, as PyTorch's F.interpolate computes it (without antialias).
 *
 * x [N, C, S_1 .. S_d] -> y [N, C, O_1 .. O_d]: the output sizes are y's dims. Along each dim i,
 * with the ratio r_i = 1 / options.scales[i] where that is > 0 (PyTorch's scale_factor with
 * recompute_scale_factor off) and S_i / O_i otherwise, output index o reads source coordinate
 *   NEAREST          src = min(floor(o r_i), S_i - 1)                          (PyTorch's 'nearest')
 *   NEAREST_EXACT    src = min(floor((o + 0.5) r_i), S_i - 1)                  (PyTorch's 'nearest-exact')
 *   LINEAR, CUBIC    align_corners: src = o (S_i - 1) / (O_i - 1), 0 when O_i = 1 (scales unused);
 *                    else src = (o + 0.5) r_i - 0.5, and for LINEAR max(src, 0)
 * computed in FP32 as PyTorch does (r_i, (S_i - 1) / (O_i - 1) and src are floats). LINEAR
 * weights the two inputs floor(src) and floor(src) + 1 (each clamped to S_i - 1, so a coordinate
 * past the last input reads it) by 1 - t and t, t = src - floor(src): linear, bilinear, trilinear
 * for d = 1, 2, 3. CUBIC weights the four inputs floor(src) - 1 .. + 2 (each
 * clamped into 0 .. S_i - 1) by Keys' cubic convolution with A = -0.75, as PyTorch's bicubic, along
 * every dim (bicubic for d = 2; the same rule per dim for d = 1 and 3). Taps that land on one
 * (clamped) index add their weights; the weights of the dims multiply; sums run in FP32.
 * Backward: dx[q] = sum over outputs o of weight(o, q) dy[o], each dx element written once as one
 * sum in a fixed order (no atomics: the same bits run to run; PyTorch's backward adds with atomics).
 *
 * Layout is the tensors' strides (any valid view inside its buffer, each its own). x, y, dy, dx: one
 * dtype, F32, F16 or BF16. Outputs may not overlap the input. N = 0 or C = 0 writes nothing.
 * Bad arguments return a status, set rudnn_last_error() (op, argument, rule) and write nothing. */
#ifndef RUDNN_INTERPOLATION_H
#define RUDNN_INTERPOLATION_H

#include "rudnn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUDNN_INTERP_MAX_SPATIAL 3
/* spatial sizes at most (N and C too) */
#define RUDNN_INTERP_MAX_DIM ((int64_t)1 << 31)

typedef enum rudnn_interp_mode {
    RUDNN_INTERP_NEAREST = 0,
    RUDNN_INTERP_NEAREST_EXACT = 1,
    RUDNN_INTERP_LINEAR = 2, /* linear / bilinear / trilinear */
    RUDNN_INTERP_CUBIC = 3,  /* bicubic (A = -0.75) per dim */
} rudnn_interp_mode_t;

typedef struct rudnn_interp_options {
    rudnn_interp_mode_t mode;
    int align_corners;                      /* 0 or 1; LINEAR and CUBIC only (0 for the nearest modes) */
    double scales[RUDNN_INTERP_MAX_SPATIAL]; /* 0: S_i / O_i; else > 0 with 1 / scale finite in FP32
                                              * (output over input) */
} rudnn_interp_options_t;
/* Entries i >= d of scales are ignored. */

/* NEAREST, align_corners 0, scales from the sizes. */
RUDNN_API void rudnn_interp_options_init(rudnn_interp_options_t *options);

/* y from x; y's dims [N, C, O...] give the output sizes. */
RUDNN_API rudnn_status_t rudnn_interpolate_forward(rudnn_queue_t queue, const rudnn_tensor_t *x,
                                                   const rudnn_interp_options_t *options, const rudnn_tensor_t *y);

/* dx [N, C, S...] from dy [N, C, O...]: every dx element written. */
RUDNN_API rudnn_status_t rudnn_interpolate_backward(rudnn_queue_t queue, const rudnn_tensor_t *dy,
                                                    const rudnn_interp_options_t *options,
                                                    const rudnn_tensor_t *dx);

#ifdef __cplusplus
}
#endif
#endif
