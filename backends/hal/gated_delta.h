/* The gated-delta family's kernel table (ops/gated_delta.c plans; include/rudnn/gated_delta.h has
 * the contract). Included through backends/backend.h.
 *
 * A plan covers `sequences` independent sequences of one call: fixed length, sequence s is batch row
 * s (tokens 0 .. T - 1, state row s); varlen (B = 1), the sequence table in the workspace says where
 * each is. Per (sequence, head), with g_t = exp(log_decay_t):
 *   S = g_t S;  delta = beta_t (v_t - S^T k_t);  S += k_t delta^T;  o_t = query_scale S^T q_t.
 *
 * The chunked form (chunk_size C) works chunk by chunk in the WY form. With gamma_i the running sum
 * of log_decay inside the chunk (i = 0 .. L - 1, L <= C its tokens) and S0 the state entering it:
 *   Lm[i][j] = beta_i exp(gamma_i - gamma_j) k_i . k_j  (j < i),   T = (I + Lm)^-1 (unit lower);
 *   W = T diag(beta exp(gamma)) Kc,  U = T diag(beta) Vc,  Delta = U - W S0;
 *   O = query_scale (diag(exp(gamma)) Qc S0 + Pm Delta),  Pm[i][j] = exp(gamma_i - gamma_j) q_i . k_j
 *       (j <= i, else 0);
 *   S1 = exp(gamma_{L-1}) S0 + sum_j exp(gamma_{L-1} - gamma_j) k_j Delta_j^T.
 * Only differences of gamma are exponentiated where they multiply, so nothing overflows for decays
 * <= 1. Everything but the passing of S from chunk to chunk is independent per chunk. */
#ifndef RUDNN_HAL_GATED_DELTA_H
#define RUDNN_HAL_GATED_DELTA_H

#include "table.h"
#include "rudnn/gated_delta.h"

/* The varlen sequence table ops/ writes at the start of the workspace (offset 0), or once into a
 * varlen plan's memory (operands.table says where), N entries each:
 *   int64 start[N]        first token of the sequence along T
 *   int64 length[N]       its tokens
 *   int64 chunk_first[N + 1]  chunked form: index of its first chunk in the chunk order (running sum
 *                         of ceil(length / C)); chunk_first[N] = plan.chunks. The recurrent form
 *                         never reads it (zeros, or a plan's chunk size's)
 *   int32 state_row[N]    its row of both state pools
 * rudnn_gated_delta_table_bytes(N) bytes, a multiple of 256. Fixed length has no table: sequence s
 * starts at 0, has T tokens, chunks s * ceil(T / C) .., state row s. */
static inline size_t rudnn_gated_delta_table_bytes(int64_t sequences)
{
    const size_t raw = (size_t)sequences * (3 * 8 + 4) + 8;
    return (raw + 255) / 256 * 256;
}

typedef struct rudnn_gated_delta_plan {
    rudnn_dtype_t dtype;       /* query, key, value, beta and output: F32, F16 or BF16 */
    int64_t heads;             /* H >= 1 */
    int64_t seq_len;           /* T of the tensors >= 1 (ops/ handles T = 0 without a kernel) */
    int64_t key_dim;           /* K, 1..RUDNN_GATED_DELTA_MAX_DIM */
    int64_t value_dim;         /* V, 1..RUDNN_GATED_DELTA_MAX_DIM */
    int64_t sequences;         /* fixed: B; varlen: N (>= 1) */
    int32_t varlen;            /* the sequence table is at the workspace's start */
    int64_t chunk_size;        /* C >= 1 (chunked), 0 (recurrent) */
    int64_t chunks;            /* chunked: chunks over all sequences (< 2^31) */
    int64_t seq_chunks;        /* chunked, fixed length: chunks a sequence, ceil(T / C) */
    float query_scale;
    /* Element strides of dims b, h, t (q, k, v, output: the last dim is contiguous). */
    int64_t q_stride[3];
    int64_t k_stride[3];
    int64_t v_stride[3];
    int64_t o_stride[3];
    int64_t beta_stride[3];
    int64_t decay_stride[3];
    /* States: contiguous [rows, H, K, V] F32. */
    int64_t state_in_rows;
    int64_t state_out_rows;
    /* Chunked: segments each sequence's chunks are cut into for the state pass (ceil(chunks / segments)
     * chunks each, empty ones at the end), worked side by side where few sequences and heads would leave
     * the device idle; 1 = one serial pass. Segment j > 0 first runs from a zero state (and its
     * transition, the product of the chunks' (e^gamma_last I - K~^T W), from I); a short serial pass
     * then carries the true entering states: S_(j+1) = M_j S_j + S_local_j. A hint: a backend may run
     * one serial pass instead (the scratch it asks for is its own). */
    int64_t segments;
} rudnn_gated_delta_plan_t;

typedef struct rudnn_gated_delta_operands {
    rudnn_mem_ref_t query, key, value, beta, log_decay, initial_state;
    rudnn_mem_ref_t output, final_state;
    rudnn_mem_ref_t table;   /* varlen: the sequence table (mem NULL for fixed length) */
    rudnn_mem_ref_t scratch; /* chunked: chunk_workspace bytes (mem NULL when 0) */
} rudnn_gated_delta_operands_t;

typedef struct rudnn_gated_delta_kernels {
    uint32_t struct_size; /* sizeof(rudnn_gated_delta_kernels_t) the plugin was built with */
    /* Token by token. Writes output (the sequences' tokens) and final_state (their rows) only. */
    rudnn_status_t (*recurrent)(void *queue, const rudnn_gated_delta_plan_t *plan,
                                const rudnn_gated_delta_operands_t *ops);
    /* Scratch bytes the chunked form needs for the plan (beyond the sequence table); sets an error
     * when the device cannot run the plan (e.g. chunk_size past its shared memory). */
    rudnn_status_t (*chunk_workspace)(void *device, const rudnn_gated_delta_plan_t *plan, size_t *bytes);
    /* Chunked, as above. Same outputs as recurrent. */
    rudnn_status_t (*chunked)(void *queue, const rudnn_gated_delta_plan_t *plan,
                              const rudnn_gated_delta_operands_t *ops);
    /* Entries appended later are optional: read them through RUDNN_KERNEL_ENTRY. */
} rudnn_gated_delta_kernels_t;

/* A table shorter than this is refused (the family is then absent on that backend). */
#define rudnn_gated_delta_kernels_min_size RUDNN_TABLE_END(rudnn_gated_delta_kernels_t, chunked)

#endif
