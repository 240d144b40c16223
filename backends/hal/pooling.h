/* The pooling family's kernel table (ops/pooling.c plans; include/rudnn/pooling.h has the contract).
 * Included through backends/backend.h. */
#ifndef RUDNN_HAL_POOLING_H
#define RUDNN_HAL_POOLING_H

#include "table.h"
#include "rudnn/pooling.h"

/* Spatial dims are kept as three, the op's d dims last (missing leading dims: size 1, element
 * stride 0, window 1, stride 1, padding 0, dilation 1). Tensor strides are in elements, dims
 * [batch, channel, D, H, W]. */
typedef struct rudnn_pool_plan {
    rudnn_pool_mode_t mode;
    rudnn_dtype_t dtype;   /* x, y, dy, dx: F32, F16 or BF16 */
    int spatial;           /* d: 1, 2 or 3 */
    int64_t batch;         /* N >= 1 */
    int64_t channels;      /* C >= 1 */
    int64_t in_size[3];    /* S */
    int64_t out_size[3];   /* P */
    int64_t window[3], stride[3], padding[3], dilation[3];
    int64_t x_stride[5];   /* x or dx */
    int64_t y_stride[5];   /* y or dy */
    int64_t idx_stride[5]; /* indices */
    int64_t src_stride[5]; /* backward, MAX: x's (x has dx's shape, not its layout) */
    int has_x;             /* backward: x is read (MAX) */
    int has_indices;       /* forward: indices are written */
} rudnn_pool_plan_t;

/* By role: x is x (forward; MAX backward) or mem NULL; dx is the backward's output; y is y or dy;
 * indices mem NULL when absent. */
typedef struct rudnn_pool_operands {
    rudnn_mem_ref_t x, y, indices, dx;
} rudnn_pool_operands_t;

typedef struct rudnn_pooling_kernels {
    uint32_t struct_size; /* sizeof(rudnn_pooling_kernels_t) the plugin was built with */
    /* y (and indices) from x: every element of y written. */
    rudnn_status_t (*forward)(void *queue, const rudnn_pool_plan_t *plan, const rudnn_pool_operands_t *ops);
    /* dx from dy (and x for MAX): every element of dx written. */
    rudnn_status_t (*backward)(void *queue, const rudnn_pool_plan_t *plan, const rudnn_pool_operands_t *ops);
    /* Entries appended later are optional: read them through RUDNN_KERNEL_ENTRY. */
} rudnn_pooling_kernels_t;

/* A table shorter than this is refused (the family is then absent on that backend). */
#define rudnn_pooling_kernels_min_size RUDNN_TABLE_END(rudnn_pooling_kernels_t, backward)

#endif
