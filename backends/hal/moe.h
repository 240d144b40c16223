/* The MoE family's kernel table (ops/moe.c plans; include/rudnn/moe.h has the contract).
 * Included through backends/backend.h. */
#ifndef RUDNN_HAL_MOE_H
#define RUDNN_HAL_MOE_H

#include "table.h"
#include "rudnn/moe.h" /* rudnn_moe_strategy_t */

typedef struct rudnn_route_kernel_plan {
    rudnn_dtype_t dtype;  /* logits dtype = weights dtype: F32, F16 or BF16 */
    int64_t tokens;       /* T >= 1 */
    int32_t experts;      /* E */
    int32_t top_k;
    int32_t renormalize;
    /* grouped sigmoid routing only */
    int32_t groups;
    int32_t selected_groups;
    int32_t group_top_two;
    float scale;
} rudnn_route_kernel_plan_t;

typedef struct rudnn_moe_rows_plan {
    rudnn_dtype_t dtype;        /* tokens / activations / expert weights dtype */
    rudnn_dtype_t weight_dtype; /* routing weights dtype (combine) */
    int64_t tokens;             /* T >= 1 */
    int32_t top_k;
    int32_t experts;            /* E */
    int64_t hidden;             /* H */
    int64_t inter;              /* I (experts only) */
    int64_t rows;               /* T * top_k */
    /* experts: every operand's device address (tokens, offsets, gate, up, down, act, out) is a
     * multiple of align bytes (a power of two, at most 256) */
    uint32_t align;
} rudnn_moe_rows_plan_t;

/* The expert-parallel combine + AddRmsNorm of one rank (ops/ep_combine.c), once the expert rows
 * are back on the token's rank: src codes say where each (token, slot) takes its value from. */
enum {
    RUDNN_EP_SRC_OFF = -1,    /* inactive slot: nothing */
    RUDNN_EP_SRC_ZERO = -2,   /* zero expert: 0 (the token is active) */
    RUDNN_EP_SRC_COPY = -3,   /* copy expert: ori_x[t] */
    RUDNN_EP_SRC_CONST0 = -4, /* -4 - c: const expert c: alpha1[c] ori_x[t] + alpha2[c] const_v[c] */
};

typedef struct rudnn_ep_combine_plan {
    rudnn_dtype_t dtype; /* rows, shared, ori_x, alpha1/2, const_v, residual, gamma, y, x */
    int64_t tokens;      /* BS >= 1 */
    int32_t top_k;       /* K >= 1 */
    int64_t hidden;      /* H >= 1 */
    int32_t has_shared;  /* shared [BS, H] given */
    float eps;
} rudnn_ep_combine_plan_t;

typedef struct rudnn_moe_kernels {
    uint32_t struct_size; /* sizeof(rudnn_moe_kernels_t) the plugin was built with */
    /* indices U32 [T, k], weights [T, k] in plan->dtype */
    rudnn_status_t (*route_softmax)(void *queue, const rudnn_route_kernel_plan_t *plan,
                                    rudnn_mem_ref_t logits, rudnn_mem_ref_t indices,
                                    rudnn_mem_ref_t weights);
    /* bias.mem may be NULL */
    rudnn_status_t (*route_sigmoid_grouped)(void *queue, const rudnn_route_kernel_plan_t *plan,
                                            rudnn_mem_ref_t logits, rudnn_mem_ref_t bias,
                                            rudnn_mem_ref_t indices, rudnn_mem_ref_t weights);
    /* From indices [T, k] (all < E): counts [E], offsets [E+1] (exclusive scan),
     * positions [T*k] (dispatched row of pair t*k+j; rows of one expert in pair
     * order) and row_token [T*k] (source token of each dispatched row). */
    rudnn_status_t (*dispatch_plan)(void *queue, const rudnn_moe_rows_plan_t *plan,
                                    rudnn_mem_ref_t indices, rudnn_mem_ref_t counts,
                                    rudnn_mem_ref_t offsets, rudnn_mem_ref_t positions,
                                    rudnn_mem_ref_t row_token);
    /* tokens[r, :] = input[row_token[r], :] */
    rudnn_status_t (*dispatch_gather)(void *queue, const rudnn_moe_rows_plan_t *plan,
                                      rudnn_mem_ref_t input, rudnn_mem_ref_t row_token,
                                      rudnn_mem_ref_t tokens);
    /* out[t, :] = sum_j weights[t, j] * expert_out[positions[t*k + j], :] (FP32) */
    rudnn_status_t (*combine)(void *queue, const rudnn_moe_rows_plan_t *plan,
                              rudnn_mem_ref_t expert_out, rudnn_mem_ref_t positions,
                              rudnn_mem_ref_t weights, rudnn_mem_ref_t out);


    /* SwiGLU experts over dispatched rows grouped by offsets [E+1], as candidates (hal/table.h):
     * the list, most preferred first (static storage, at least one Scalar candidate). */
    const rudnn_kernel_candidate_t *experts_candidates;
    uint32_t experts_candidate_count;
    /* Whether candidate c runs plan on device (plan->rows is 0 when not known yet: the answer
     * must then hold for any rows), and whether it is preferred there. */
    void (*experts_check)(void *device, const rudnn_moe_rows_plan_t *plan, uint32_t c,
                          rudnn_candidate_verdict_t *verdict);
    /* Workspace bytes candidate c needs for plan (asked only for a candidate that runs): called
     * with *bytes set to what every candidate needs, act [rows, inter] in the dtype, which it may
     * raise. NULL: that size for every candidate. Sets an error (NOT_SUPPORTED when the size
     * overflows) on failure. */
    rudnn_status_t (*experts_workspace)(void *device, const rudnn_moe_rows_plan_t *plan, uint32_t c,
                                        size_t *bytes);
    /* Runs candidate c, which experts_check said runs plan, or fails; never another kernel.
     * act is the workspace of experts_workspace bytes. */
    rudnn_status_t (*experts_run)(void *queue, const rudnn_moe_rows_plan_t *plan, uint32_t c,
                                  rudnn_mem_ref_t tokens, rudnn_mem_ref_t offsets, rudnn_mem_ref_t gate,
                                  rudnn_mem_ref_t up, rudnn_mem_ref_t down, rudnn_mem_ref_t act,
                                  rudnn_mem_ref_t out);

    /* Entries appended later are optional: read them through RUDNN_KERNEL_ENTRY. */
    /* Expert parallelism, per token t (FP32; x and y rounded once, rstd of the unrounded x):
     *   c = sum_j scales[t, j] value(src[t, j]) + (any slot of t not OFF and has_shared ? shared[t] : 0)
     *   x = c + residual[t], rstd[t] = 1 / sqrt(mean(x^2) + eps), y = x rstd[t] gamma
     * value(s >= 0) = rows[s]; codes RUDNN_EP_SRC_*. src I32 [BS, K], scales F32 [BS, K], rows
     * [*, H]; rows, ori_x, alpha1/alpha2 [N] and const_v [N, H] are read only where a code asks
     * (their mem may be NULL otherwise), shared only with has_shared. All rows contiguous; the
     * outputs overlap no input. The sum of squares is plain FP32 (no rescaling: |x| past about
     * 1e18 overflows it). */
    rudnn_status_t (*ep_combine_norm)(void *queue, const rudnn_ep_combine_plan_t *plan, rudnn_mem_ref_t rows,
                                      rudnn_mem_ref_t src, rudnn_mem_ref_t scales, rudnn_mem_ref_t shared,
                                      rudnn_mem_ref_t ori_x, rudnn_mem_ref_t alpha1, rudnn_mem_ref_t alpha2,
                                      rudnn_mem_ref_t const_v, rudnn_mem_ref_t residual, rudnn_mem_ref_t gamma,
                                      rudnn_mem_ref_t y, rudnn_mem_ref_t rstd, rudnn_mem_ref_t x);
} rudnn_moe_kernels_t;

/* A table shorter than this is refused (the family is then absent on that backend). */
#define rudnn_moe_kernels_min_size RUDNN_TABLE_END(rudnn_moe_kernels_t, experts_run)

#endif
