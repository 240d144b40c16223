/* The CTC family's kernel table (ops/ctc.c plans; include/rudnn/ctc.h has the contract). Included
 * through backends/backend.h.
 *
 * The workspace starts with the lengths table ops/ writes with each call: int64 input_lengths[N],
 * then int64 target_lengths[N] (rudnn_ctc_table_bytes(N) bytes, a multiple of 256); the backend's
 * scratch (its `workspace` entry's bytes) follows it. */
#ifndef RUDNN_HAL_CTC_H
#define RUDNN_HAL_CTC_H

#include "table.h"
#include "rudnn/ctc.h"

static inline size_t rudnn_ctc_table_bytes(int64_t n)
{
    return ((size_t)n * 16 + 255) / 256 * 256;
}

typedef struct rudnn_ctc_plan {
    rudnn_dtype_t dtype;        /* log_probs and grad_log_probs: F32, F16 or BF16 */
    rudnn_dtype_t target_dtype; /* I32 or I64 */
    int64_t steps;              /* T */
    int64_t batch;              /* N >= 1 */
    int64_t classes;            /* C >= 1 */
    int64_t target_len;         /* S: targets' second dim */
    int64_t blank;
    int zero_infinity;
    int has_grad;               /* grad_log_probs is written */
    int has_grad_loss;          /* grad_loss is read (else ones) */
    /* element strides */
    int64_t lp_stride[3];       /* log_probs [T, N, C] */
    int64_t grad_stride[3];     /* grad_log_probs [T, N, C] */
    int64_t target_stride[2];   /* targets [N, S] */
    int64_t loss_stride;        /* loss [N] */
    int64_t grad_loss_stride;   /* grad_loss [N] */
} rudnn_ctc_plan_t;

typedef struct rudnn_ctc_operands {
    rudnn_mem_ref_t log_probs, targets, grad_loss, loss, grad_log_probs; /* absent: mem NULL */
    rudnn_mem_ref_t table;   /* the lengths table */
    rudnn_mem_ref_t scratch; /* the backend's scratch (mem NULL when it asked for none) */
} rudnn_ctc_operands_t;

typedef struct rudnn_ctc_kernels {
    uint32_t struct_size; /* sizeof(rudnn_ctc_kernels_t) the plugin was built with */
    /* Scratch bytes the plan needs beyond the table; an error when the device cannot run it. */
    rudnn_status_t (*workspace)(void *device, const rudnn_ctc_plan_t *plan, size_t *bytes);
    /* loss (and grad_log_probs) for every sample. */
    rudnn_status_t (*loss)(void *queue, const rudnn_ctc_plan_t *plan, const rudnn_ctc_operands_t *ops);
    /* Entries appended later are optional: read them through RUDNN_KERNEL_ENTRY. */
} rudnn_ctc_kernels_t;

/* A table shorter than this is refused (the family is then absent on that backend). */
#define rudnn_ctc_kernels_min_size RUDNN_TABLE_END(rudnn_ctc_kernels_t, loss)

#endif
