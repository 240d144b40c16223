/* The normalization family's kernel table (ops/norm.c plans; include/rudnn/norm.h has the
 * contract). Included through backends/backend.h. */
#ifndef RUDNN_HAL_NORM_H
#define RUDNN_HAL_NORM_H

#include "table.h"

/* Row-wise normalization over the last axis: rows x cols, contiguous. */
typedef struct rudnn_norm_plan {
    rudnn_dtype_t dtype; /* of input/output: F32, F16 or BF16 */
    int64_t rows;        /* >= 1 (ops/ skips empty launches) */
    int64_t cols;        /* >= 1 */
    float eps;
} rudnn_norm_plan_t;

typedef struct rudnn_norm_kernels {
    uint32_t struct_size; /* sizeof(rudnn_norm_kernels_t) the plugin was built with */
    /* beta.mem may be NULL (no shift). gamma/beta are F32 [cols]. */
    rudnn_status_t (*layer_norm)(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t x,
                                 rudnn_mem_ref_t gamma, rudnn_mem_ref_t beta, rudnn_mem_ref_t y);
    rudnn_status_t (*rms_norm)(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t x,
                               rudnn_mem_ref_t gamma, rudnn_mem_ref_t y);
    rudnn_status_t (*softmax)(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t x,
                              rudnn_mem_ref_t y);
    /* x = round(a + r); y = rms_norm(x); rstd F32 [rows]. x_out may alias a or r. */
    rudnn_status_t (*add_rms_norm)(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t a,
                                   rudnn_mem_ref_t r, rudnn_mem_ref_t gamma, rudnn_mem_ref_t y,
                                   rudnn_mem_ref_t rstd, rudnn_mem_ref_t x_out);
    /* Entries appended later are optional: read them through RUDNN_KERNEL_ENTRY. */
} rudnn_norm_kernels_t;

/* A table shorter than this is refused (the family is then absent on that backend). */
#define rudnn_norm_kernels_min_size RUDNN_TABLE_END(rudnn_norm_kernels_t, add_rms_norm)

#endif
