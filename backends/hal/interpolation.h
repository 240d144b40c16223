/* The interpolation family's kernel table (ops/interpolation.c plans; include/rudnn/interpolation.h
 * has the contract). Included through backends/backend.h. */
#ifndef RUDNN_HAL_INTERPOLATION_H
#define RUDNN_HAL_INTERPOLATION_H

#include "table.h"
#include "rudnn/interpolation.h"

/* Spatial dims are kept as three, the op's d dims last (missing leading dims: size 1 in and out,
 * element stride 0, ratio 1). Tensor strides in elements, dims [batch, channel, D, H, W]. */
typedef struct rudnn_interp_plan {
    rudnn_interp_mode_t mode;
    rudnn_dtype_t dtype;   /* F32, F16 or BF16 */
    int spatial;           /* d: 1, 2 or 3 */
    int align_corners;
    int64_t batch;         /* N >= 1 */
    int64_t channels;      /* C >= 1 */
    int64_t in_size[3];    /* S */
    int64_t out_size[3];   /* O */
    float ratio[3];        /* the coordinate map's FP32 factor along each dim (the header's r_i, or
                            * (S - 1) / (O - 1) with align_corners, 0 when O = 1 there) */
    int64_t x_stride[5];   /* x or dx */
    int64_t y_stride[5];   /* y or dy */
} rudnn_interp_plan_t;

typedef struct rudnn_interp_operands {
    rudnn_mem_ref_t x, y; /* forward: x in, y out; backward: y is dy (in), x is dx (out) */
} rudnn_interp_operands_t;

typedef struct rudnn_interpolation_kernels {
    uint32_t struct_size; /* sizeof(rudnn_interpolation_kernels_t) the plugin was built with */
    rudnn_status_t (*forward)(void *queue, const rudnn_interp_plan_t *plan, const rudnn_interp_operands_t *ops);
    rudnn_status_t (*backward)(void *queue, const rudnn_interp_plan_t *plan, const rudnn_interp_operands_t *ops);
    /* Entries appended later are optional: read them through RUDNN_KERNEL_ENTRY. */
} rudnn_interpolation_kernels_t;

/* A table shorter than this is refused (the family is then absent on that backend). */
#define rudnn_interpolation_kernels_min_size RUDNN_TABLE_END(rudnn_interpolation_kernels_t, backward)

#endif
