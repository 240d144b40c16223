/* The grid-sample family's kernel table (ops/grid_sample.c plans; include/rudnn/grid_sample.h has
 * the contract). Included through backends/backend.h. */
#ifndef RUDNN_HAL_GRID_SAMPLE_H
#define RUDNN_HAL_GRID_SAMPLE_H

#include "table.h"
#include "rudnn/grid_sample.h"

/* Spatial dims kept as three (D, H, W); 2D has D = 1 in and out. Strides in elements: x, y (or dx,
 * dy) [n, c, d, h, w]; grid (or dgrid) [n, d, h, w, coordinate] (coordinate 0 along W, 1 along H,
 * 2 along D). A dim of size 1 has stride 0. */
typedef struct rudnn_grid_sample_plan {
    rudnn_grid_sample_mode_t mode;
    rudnn_grid_sample_padding_t padding;
    int align_corners;
    rudnn_dtype_t dtype;
    int spatial;            /* 2 or 3 */
    int64_t batch;          /* N >= 1 */
    int64_t channels;       /* C >= 0 (0: the forward writes nothing, dgrid zeros) */
    int64_t in_size[3];     /* D, H, W of x */
    int64_t out_size[3];    /* of y and grid */
    int64_t x_stride[5];    /* x, and dx in the backward (dx_stride) */
    int64_t y_stride[5];    /* y or dy */
    int64_t grid_stride[5];
    int64_t dx_stride[5];
    int64_t dgrid_stride[5];
    int has_dx, has_dgrid;
} rudnn_grid_sample_plan_t;

typedef struct rudnn_grid_sample_operands {
    rudnn_mem_ref_t x, grid, y; /* y: y (forward) or dy (backward) */
    rudnn_mem_ref_t dx, dgrid;  /* backward; mem NULL when absent */
    rudnn_mem_ref_t workspace;  /* backward: backward_workspace bytes (mem NULL when 0) */
} rudnn_grid_sample_operands_t;

typedef struct rudnn_grid_sample_kernels {
    uint32_t struct_size; /* sizeof(rudnn_grid_sample_kernels_t) the plugin was built with */
    rudnn_status_t (*forward)(void *queue, const rudnn_grid_sample_plan_t *plan,
                              const rudnn_grid_sample_operands_t *ops);
    rudnn_status_t (*backward_workspace)(void *device, const rudnn_grid_sample_plan_t *plan, size_t *bytes);
    rudnn_status_t (*backward)(void *queue, const rudnn_grid_sample_plan_t *plan,
                               const rudnn_grid_sample_operands_t *ops);
    /* Entries appended later are optional: read them through RUDNN_KERNEL_ENTRY. */
} rudnn_grid_sample_kernels_t;

/* A table shorter than this is refused (the family is then absent on that backend). */
#define rudnn_grid_sample_kernels_min_size RUDNN_TABLE_END(rudnn_grid_sample_kernels_t, backward)

#endif
