/* Expert-parallel MoE across ranks: dispatch and combine + AddRmsNorm (after Ascend's
 * MoeDistributeDispatchV3 and MoeDistributeCombineAddRmsNormV2; README "Expert parallelism" says
 * what was followed where the seed is silent).
 *
 *   rank r: x [BS, H], expert ids [BS, K] (global ids)
 *     -> rudnn_ep_dispatch: each selected (token, slot) row goes to the rank that holds its expert
 *     -> expand_x [A, H] on the expert's rank, rows grouped by local expert
 *     -> the caller's experts (rudnn's SwiGLU experts, or its own) -> expert output [A, H]
 *     -> rudnn_ep_combine_add_rms_norm: the rows go back along the path they came, and on the
 *        token's rank: combined = sum_k scale_k out_k + shared, x = combined + residual,
 *        y = x / RMS(x) * gamma (FP32 throughout; x and y rounded to the dtype once, RMS taken
 *        of the unrounded x, as Ascend's kernel does)
 *
 * Experts: ids 0 .. E-1 are routed experts (moe_expert_num E); expert e lives on EP rank
 * e / L, L = E / ep_size local experts per rank. After them come the special experts, computed
 * on the token's own rank and never sent: zero experts [E, E+Z) give 0, copy experts
 * [E+Z, E+Z+C) give ori_x, const experts [E+Z+C, E+Z+C+N) give alpha1[c] ori_x + alpha2[c] v[c].
 *
 * Order (deterministic): on the receiving rank, expand_x holds its rows grouped by local expert,
 * and within an expert by source rank, then source token, then slot. With a TP group (size 2:
 * one local expert per rank), the rows the EP exchange brought to this rank form the first half
 * of expand_x and those it brought to the TP peer the second (as Ascend: own rows first); the
 * combine adds the peer's partial outputs of this rank's rows to its own in FP32, rounds once,
 * and sends the sums back (ReduceScatterV).
 *
 * Masks: an inactive token (1D mask false, or all K slots false) sends nothing; its combined
 * value is 0, so x = residual (Ascend leaves those rows unwritten; rudnn defines them). The
 * shared-expert rows are added once per active token, unweighted (Ascend's kernel; the seed's
 * formula reads as if each slot's scale weighted them). Special experts are weighted by their
 * slot's scale like routed ones.
 *
 * Shared parameters (rudnn_ep_params_t, the comm's group sizes, H, K, the dtypes, whether a
 * mask or elastic info is given) must be the same on every rank and in both ops. Each op
 * checks its arguments, then the ranks agree on a status before any data moves: a bad argument
 * on one rank makes every rank return an error (that rank the argument's, the others
 * RUDNN_STATUS_BAD_PARAM naming the rank that refused), and nothing hangs or is written.
 *
 * Both ops are collective over the active ranks of the comm's EP group (and its TP group):
 * every active rank calls them with the same shared parameters, in the same order. They
 * synchronise the queue (the MPI path exchanges host copies). */
#ifndef RUDNN_EP_H
#define RUDNN_EP_H

#include "rudnn/comm.h"
#include "rudnn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The seed's limits (each a clear error before any communication). */
#define RUDNN_EP_MAX_WORLD 768    /* ep_size in 2..768 */
#define RUDNN_EP_MAX_EXPERTS 1024 /* moe_expert_num in 1..1024 */
#define RUDNN_EP_MAX_BS 512       /* tokens per rank, 1..512 */
#define RUDNN_EP_MAX_TOP_K 16     /* K in 1..16, and at most the experts of all kinds */
#define RUDNN_EP_MIN_HIDDEN 1024  /* H in 1024..8192 */
#define RUDNN_EP_MAX_HIDDEN 8192

typedef struct rudnn_ep_params {
    int64_t moe_expert_num;         /* E: 1..1024, divisible by ep_size - shared_expert_rank_num */
    int64_t shared_expert_num;      /* 0 (reserved, as in the seed) */
    int64_t shared_expert_rank_num; /* 0 (reserved) */
    int64_t expert_shard_type;      /* 0: shared-expert ranks first (the only one) */
    int64_t global_bs;              /* 0 (every rank has BS tokens) or max BS over ranks * ep_size */
    int64_t zero_expert_num;        /* Z >= 0 */
    int64_t copy_expert_num;        /* C >= 0: need ori_x in the combine */
    int64_t const_expert_num;       /* N >= 0: need ori_x, alpha1, alpha2 and v in the combine */
    int64_t expert_token_nums_type; /* 0: expert_token_nums as running totals, 1: as counts */
} rudnn_ep_params_t;

/* Dispatch inputs. x: [BS, H] F32/F16/BF16. expert_ids: [BS, K] I32. active_mask (NULL: all
 * active): BOOL [BS] (a token takes part; the trues come first) or [BS, K] (a slot takes part).
 * elastic_info (NULL: no scale-down): I32 [4 + 2 ep_size], read on the host (see the README). */
typedef struct rudnn_ep_dispatch_in {
    const rudnn_tensor_t *x;
    const rudnn_tensor_t *expert_ids;
    const rudnn_tensor_t *active_mask;
    const rudnn_tensor_t *elastic_info;
} rudnn_ep_dispatch_in_t;

/* Dispatch outputs, T = max(tp_size, 1). expand_x: [T A, H] in x's dtype; rows past the
 * received ones are left as they were. assist_info: I32 [T A, 3], for each received row its
 * (source EP rank, source token, slot). expert_token_nums: I64 [L], rows of each local expert
 * in expand_x, both halves (running totals or counts: params). ep_recv_counts: I32 [T L ep_size]: in
 * half t, at (t L + e) ep_size + s, the running total of the half's rows up to and including
 * those from source rank s for local expert e (expand_x's order; Ascend's layout).
 * tp_recv_counts: I32 [T] (NULL without a TP group): [tp_rank] this rank's rows, the other the
 * peer's. A bounds the rows a half holds: A >= BS ep_size min(L, K) (global_bs 0) or global_bs
 * min(L, K). The comm's buffer must hold (buffer_bytes - 2 MiB) / 2 >= maxBS e (H + 128)
 * (ep_size L + K + 1) bytes, e the dtype's size (the seed's formula), or the call fails first. */
typedef struct rudnn_ep_dispatch_out {
    const rudnn_tensor_t *expand_x;
    const rudnn_tensor_t *assist_info;
    const rudnn_tensor_t *expert_token_nums;
    const rudnn_tensor_t *ep_recv_counts;
    const rudnn_tensor_t *tp_recv_counts;
} rudnn_ep_dispatch_out_t;

RUDNN_API rudnn_status_t rudnn_ep_dispatch(rudnn_queue_t queue, rudnn_comm_t comm, const rudnn_ep_params_t *params,
                                           const rudnn_ep_dispatch_in_t *in, const rudnn_ep_dispatch_out_t *out);

/* Combine inputs. expand_x: the expert outputs [T A, H], rows in the dispatch's expand_x order.
 * expert_ids, active_mask, elastic_info: as given to the dispatch. assist_info,
 * ep_send_counts, tp_send_counts: the dispatch's assist_info, ep_recv_counts, tp_recv_counts.
 * expert_scales: F32 [BS, K]. residual: [BS, 1, H]; gamma: [H]; shared_expert_x (optional):
 * [BS, H] or [BS, 1, H]; ori_x: [BS, H] (copy and const experts); const_alpha1, const_alpha2:
 * [N]; const_v: [N, H]. All float tensors in expand_x's dtype. norm_eps: finite, >= 0. */
typedef struct rudnn_ep_combine_in {
    const rudnn_tensor_t *expand_x;
    const rudnn_tensor_t *expert_ids;
    const rudnn_tensor_t *assist_info;
    const rudnn_tensor_t *ep_send_counts;
    const rudnn_tensor_t *tp_send_counts;
    const rudnn_tensor_t *expert_scales;
    const rudnn_tensor_t *residual;
    const rudnn_tensor_t *gamma;
    const rudnn_tensor_t *active_mask;
    const rudnn_tensor_t *shared_expert_x;
    const rudnn_tensor_t *elastic_info;
    const rudnn_tensor_t *ori_x;
    const rudnn_tensor_t *const_alpha1;
    const rudnn_tensor_t *const_alpha2;
    const rudnn_tensor_t *const_v;
    float norm_eps;
} rudnn_ep_combine_in_t;

/* Combine outputs: y [BS, 1, H] and x [BS, 1, H] in the residual's dtype, rstd [BS, 1, 1] F32. */
typedef struct rudnn_ep_combine_out {
    const rudnn_tensor_t *y;
    const rudnn_tensor_t *rstd;
    const rudnn_tensor_t *x;
} rudnn_ep_combine_out_t;

/* Device workspace for the combine (two-phase, as the seed): *bytes for these arguments, room
 * for the rows that come back (one a slot: BS K H elements, rounded up to 256 bytes) and a slot
 * code each (BS K I32). The combine checks the workspace on the queue's context, holding
 * workspace_bytes >= *bytes and overlapping no tensor of the call (a rank-local error, agreed on
 * like any other). Its weighted sum, shared term, residual add and RMSNorm run on the device
 * over those rows; the other float inputs are read there, never copied to the host. */
RUDNN_API rudnn_status_t rudnn_ep_combine_workspace_size(rudnn_queue_t queue, rudnn_comm_t comm,
                                                         const rudnn_ep_params_t *params,
                                                         const rudnn_ep_combine_in_t *in,
                                                         const rudnn_ep_combine_out_t *out, size_t *bytes);

RUDNN_API rudnn_status_t rudnn_ep_combine_add_rms_norm(rudnn_queue_t queue, rudnn_comm_t comm,
                                                       const rudnn_ep_params_t *params,
                                                       const rudnn_ep_combine_in_t *in,
                                                       rudnn_buffer_t workspace, size_t workspace_bytes,
                                                       const rudnn_ep_combine_out_t *out);

#ifdef __cplusplus
}
#endif
#endif
