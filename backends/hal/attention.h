/* The attention family's kernel table (ops/attention.c plans; include/rudnn/attention.h has the
 * contract). Included through backends/backend.h.
 *
 * ops/ validates every argument, resolves the options (scale, causal folded into the window) and
 * picks a candidate; a backend's run entry runs exactly that candidate or fails. */
#ifndef RUDNN_HAL_ATTENTION_H
#define RUDNN_HAL_ATTENTION_H

#include "table.h"
#include "rudnn/attention.h" /* rudnn_attention_strategy_t */

typedef struct rudnn_attention_plan {
    rudnn_dtype_t dtype; /* q, k, v and out: F32, F16 or BF16 */
    int64_t batch;       /* B >= 1 */
    int64_t heads_q;     /* Hq >= 1, a multiple of heads_kv */
    int64_t heads_kv;    /* Hkv >= 1 */
    int64_t seq_q;       /* Sq >= 1 (ops/ handles 0 without a kernel) */
    int64_t seq_kv;      /* Skv >= 0 (0: every row fully masked) */
    int64_t head_dim;    /* D, 1..RUDNN_ATTENTION_MAX_HEAD_DIM */
    int64_t head_dim_v;  /* Dv, 1..RUDNN_ATTENTION_MAX_HEAD_DIM */
    /* Element strides of dims b, h, s (the last dim is contiguous). */
    int64_t q_stride[3];
    int64_t k_stride[3];
    int64_t v_stride[3];
    int64_t out_stride[3];
    /* mask (RUDNN_BOOL, nonzero = masked) and bias (bias_dtype: F32 or dtype), when present: element
     * strides of dims b, h, i (0 on a broadcast dim); the key dim j is contiguous. */
    int32_t has_mask;
    int64_t mask_stride[3];
    int32_t has_bias;
    rudnn_dtype_t bias_dtype;
    int64_t bias_stride[3];
    float scale;   /* resolved: the caller's, or 1 / sqrt(D) */
    float softcap; /* 0: none; else > 0 */
    /* Keys query i sees: lo(i) <= j <= hi(i), with o = seq_kv - seq_q,
     * lo(i) = window_left < 0 ? 0 : i + o - window_left, hi(i) = window_right < 0 ? seq_kv - 1 :
     * i + o + window_right (causal is folded in: window_right 0); lo is raised to 0 and hi lowered to
     * seq_kv - 1, and a row with lo > hi sees no key (fully masked: zeros, lse -inf). */
    int32_t causal; /* for information: already folded into window_right */
    int64_t window_left;
    int64_t window_right;
    int32_t has_lse; /* lse: F32 [B, Hq, Sq], contiguous */
} rudnn_attention_plan_t;

/* The backward's tensors (mask, bias: mem NULL when absent); strides of dout, dq, dk, dv (dims b, h,
 * s) in the plan's backward strides below. */
typedef struct rudnn_attention_backward_operands {
    rudnn_mem_ref_t q, k, v, mask, bias, out, lse, dout;
    rudnn_mem_ref_t dq, dk, dv;
    rudnn_mem_ref_t workspace; /* backward_workspace bytes */
    int64_t dout_stride[3], dq_stride[3], dk_stride[3], dv_stride[3];
} rudnn_attention_backward_operands_t;

typedef struct rudnn_attention_kernels {
    uint32_t struct_size; /* sizeof(rudnn_attention_kernels_t) the plugin was built with */
    /* The candidates (hal/table.h), most preferred first (static storage); strategy is a
     * rudnn_attention_strategy_t (never AUTOTUNE). */
    const rudnn_kernel_candidate_t *candidates;
    uint32_t candidate_count;
    /* Whether candidate c runs plan on device, and whether it is preferred there (the static
     * choice when autotuning is off or the cache is cold). */
    void (*check)(void *device, const rudnn_attention_plan_t *plan, uint32_t c,
                  rudnn_candidate_verdict_t *verdict);
    /* Workspace bytes candidate c needs for plan (asked only for a candidate that runs; 0 where
     * none). Sets an error (NOT_SUPPORTED when the size overflows) on failure. */
    rudnn_status_t (*workspace)(void *device, const rudnn_attention_plan_t *plan, uint32_t c, size_t *bytes);
    /* Runs candidate c, which check said runs plan, or fails; never another kernel. mask, bias,
     * lse and workspace have mem NULL when absent (workspace: when the candidate needs none). */
    rudnn_status_t (*run)(void *queue, const rudnn_attention_plan_t *plan, uint32_t c, rudnn_mem_ref_t q,
                          rudnn_mem_ref_t k, rudnn_mem_ref_t v, rudnn_mem_ref_t mask, rudnn_mem_ref_t bias,
                          rudnn_mem_ref_t out, rudnn_mem_ref_t lse, rudnn_mem_ref_t workspace);
    /* Entries appended later are optional: read them through RUDNN_KERNEL_ENTRY. */
    /* The backward (rudnn/attention.h): workspace bytes for plan (plan.has_lse is 1), then the
     * gradients. A backend without them answers NOT_SUPPORTED through ops/. */
    rudnn_status_t (*backward_workspace)(void *device, const rudnn_attention_plan_t *plan, size_t *bytes);
    rudnn_status_t (*backward)(void *queue, const rudnn_attention_plan_t *plan,
                               const struct rudnn_attention_backward_operands *ops);
} rudnn_attention_kernels_t;

/* A table shorter than this is refused (the family is then absent on that backend). */
#define rudnn_attention_kernels_min_size RUDNN_TABLE_END(rudnn_attention_kernels_t, run)

#endif
