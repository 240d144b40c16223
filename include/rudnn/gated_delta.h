/* The gated delta rule (the linear-attention core of hybrid models such as Qwen3-Next): section 8 of
 * the guide, DESIGN.md section 8. Per batch row b and head h, an FP32 state S [K, V], and per token t:
 *
 *   S = exp(log_decay_t) S;   delta = beta_t (v_t - S^T k_t);   S = S + k_t delta^T;
 *   o_t = S^T (query_scale q_t)
 *
 * No normalization of q or k and no default scale inside the op (query_scale is the caller's, often
 * 1 / sqrt(K)). Two forms compute the same thing:
 *   rudnn_gated_delta_rule        token by token (decode; any T);
 *   rudnn_chunk_gated_delta_rule  chunks of chunk_size tokens in the WY form, chunks of one sequence
 *                                 worked in parallel except the state passed from chunk to chunk
 *                                 (prefill). The last chunk is zero-padded inside the op; the padding
 *                                 never reaches the output or the state.
 * They agree within the tolerances README states (FP32 state and sums in both; the chunked form
 * rounds nothing more for F32 inputs).
 *
 * Tensors (strided views whose last dim is contiguous, so [B, T, H, K] storage viewed as
 * [B, H, T, K] works without a copy; beta and log_decay may have any strides):
 *   query, key [B, H, T, K]; value [B, H, T, V]: F32, F16 or BF16, one dtype;
 *   beta [B, H, T] in query's dtype; log_decay [B, H, T] F32;
 *   initial_state [B, H, K, V] F32, contiguous, never written;
 *   output [B, H, T, V] in query's dtype; final_state [B, H, K, V] F32, contiguous, not overlapping
 *   initial_state (nor any input). K and V in 1..RUDNN_GATED_DELTA_MAX_DIM.
 * T = 0 writes final_state = initial_state and nothing else. Passing final_state as the next call's
 * initial_state continues the sequence exactly (prefill, then decode token by token, equals one run).
 *
 * Variable length (serving): varlen non-NULL packs sequences along T of a batch of one (B = 1):
 * sequence i is tokens [cu_seqlens[i], cu_seqlens[i + 1]); the states are pools, initial_state
 * [P_in, H, K, V] and final_state [P_out, H, K, V], and sequence i reads row state_indices[i] of the
 * first and writes that row of the second (rows no sequence names are left untouched, as are output
 * tokens past cu_seqlens[N]). The offsets and indices are host arrays, checked on the host and copied
 * to the device (a blocking copy) with each call: 0 = cu[0] <= cu[1] <= ... <= cu[N] <= T, and
 * distinct indices below both pools' row counts. Sequences of length 0 copy their state row.
 * A serving step uploads its schedule once instead (rudnn_gated_delta_varlen_plan_create): every
 * linear-attention layer's call then names the plan (varlen.plan) and makes no host-to-device copy
 * and no host sync (capturable in a CUDA graph).
 *
 * Two-phase: the *_workspace_size query, then the call with a workspace of at least that many bytes
 * (or NULL: the queue's pool). Bad arguments return a status, set rudnn_last_error() (op, argument,
 * rule) and write nothing. */
#ifndef RUDNN_GATED_DELTA_H
#define RUDNN_GATED_DELTA_H

#include "rudnn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUDNN_GATED_DELTA_MAX_DIM 256 /* K and V */

typedef struct rudnn_gated_delta_input {
    const rudnn_tensor_t *query;         /* [B, H, T, K]: F32, F16 or BF16 */
    const rudnn_tensor_t *key;           /* [B, H, T, K]: query's dtype */
    const rudnn_tensor_t *value;         /* [B, H, T, V]: query's dtype */
    const rudnn_tensor_t *beta;          /* [B, H, T]: query's dtype */
    const rudnn_tensor_t *log_decay;     /* [B, H, T]: F32, the natural log of the gate */
    const rudnn_tensor_t *initial_state; /* [B, H, K, V] F32 (varlen: [P_in, H, K, V]) */
    float query_scale;                   /* finite */
} rudnn_gated_delta_input_t;

typedef struct rudnn_gated_delta_output {
    const rudnn_tensor_t *output;      /* [B, H, T, V]: query's dtype */
    const rudnn_tensor_t *final_state; /* [B, H, K, V] F32 (varlen: [P_out, H, K, V]) */
} rudnn_gated_delta_output_t;

typedef struct rudnn_gated_delta_varlen_plan *rudnn_gated_delta_varlen_plan_t;

typedef struct rudnn_gated_delta_varlen {
    int64_t sequences;            /* N >= 1 */
    const int64_t *cu_seqlens;    /* host, N + 1 offsets along T */
    const int32_t *state_indices; /* host, N distinct pool rows; NULL: sequence i uses row i */
    /* non-NULL: the schedule of this plan, on the device already (then sequences 0 and both arrays
     * NULL); the call checks only what its tensors decide: cu_seqlens[N] <= T, and every index
     * below both pools' rows */
    rudnn_gated_delta_varlen_plan_t plan;
} rudnn_gated_delta_varlen_t;

/* The schedule varlen (host arrays, checked as above but for T and the pools, which the calls
 * check) uploaded once to queue (a blocking copy; the plan holds the queue) for the calls on that
 * queue of rudnn_chunk_gated_delta_rule with this chunk_size and of rudnn_gated_delta_rule
 * (chunk_size 0: those only). The plan keeps no pointer to varlen's arrays. */
RUDNN_API rudnn_status_t rudnn_gated_delta_varlen_plan_create(rudnn_queue_t queue,
                                                              const rudnn_gated_delta_varlen_t *varlen,
                                                              int64_t chunk_size,
                                                              rudnn_gated_delta_varlen_plan_t *plan);
RUDNN_API void rudnn_gated_delta_varlen_plan_destroy(rudnn_gated_delta_varlen_plan_t plan);
/* The device memory the plan holds (its sequence table), in bytes. */
RUDNN_API size_t rudnn_gated_delta_varlen_plan_device_bytes(rudnn_gated_delta_varlen_plan_t plan);

/* chunk_size >= 1; its triangular FP32 workspace, 4 (chunk_size^2 + chunk_size) bytes, must fit the
 * device's shared memory per workgroup (rudnn_device_info_t.shared_memory_per_group): else BAD_PARAM
 * naming the limit. varlen NULL: fixed length. */
RUDNN_API rudnn_status_t rudnn_chunk_gated_delta_rule_workspace_size(rudnn_queue_t queue,
                                                                     const rudnn_gated_delta_input_t *input,
                                                                     const rudnn_gated_delta_varlen_t *varlen,
                                                                     int64_t chunk_size,
                                                                     const rudnn_gated_delta_output_t *output,
                                                                     size_t *bytes);
RUDNN_API rudnn_status_t rudnn_chunk_gated_delta_rule(rudnn_queue_t queue, const rudnn_gated_delta_input_t *input,
                                                      const rudnn_gated_delta_varlen_t *varlen, int64_t chunk_size,
                                                      rudnn_buffer_t workspace, size_t workspace_bytes,
                                                      const rudnn_gated_delta_output_t *output);

RUDNN_API rudnn_status_t rudnn_gated_delta_rule_workspace_size(rudnn_queue_t queue,
                                                               const rudnn_gated_delta_input_t *input,
                                                               const rudnn_gated_delta_varlen_t *varlen,
                                                               const rudnn_gated_delta_output_t *output,
                                                               size_t *bytes);
RUDNN_API rudnn_status_t rudnn_gated_delta_rule(rudnn_queue_t queue, const rudnn_gated_delta_input_t *input,
                                                const rudnn_gated_delta_varlen_t *varlen, rudnn_buffer_t workspace,
                                                size_t workspace_bytes, const rudnn_gated_delta_output_t *output);

#ifdef __cplusplus
}
#endif
#endif
