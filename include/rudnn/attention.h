/* Dense scaled-dot-product attention, forward and backward.
 *
 *   out[b, h, i, :] = sum_j P[i, j] * v[b, h / G, j, :],  P = softmax_j(s[i, j]) in FP32,
 *   s[i, j] = (q[b, h, i, :] . k[b, h / G, j, :]) * scale, then, in this order (DESIGN.md 8):
 *     softcap:      s = softcap * tanh(s / softcap)                 (options.softcap > 0)
 *     mask:         s = -inf where mask[b, h, i, j] is nonzero      (mask given)
 *     causal/window: s = -inf where key j is outside query i's range (below)
 *     bias:         s = s + attn_bias[b, h, i, j]                   (attn_bias given)
 *
 * Shapes: q [B, Hq, Sq, D], k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv], out [B, Hq, Sq, Dv] in q's
 * dtype (F32, F16 or BF16; k and v the same dtype). Grouped-query attention: Hq is a multiple of
 * Hkv, query head h reads key/value head h / (Hq / Hkv). 1 <= D, Dv <= RUDNN_ATTENTION_MAX_HEAD_DIM.
 * Sq and Skv may be 0 (nothing to compute; out of Sq 0 rows; with Skv 0 every row is fully
 * masked). Any layout whose last dimension is contiguous is taken as it is (strides in elements,
 * e.g. [B, S, H, D] memory viewed as [B, H, S, D] by its strides), for q, k, v and out.
 *
 * Query i may see key j when (with o = Skv - Sq: the last query row aligns with the last key,
 * "bottom-right", as FlashAttention 2.1+ and cuDNN):
 *   causal:        j <= i + o
 *   window_left L: j >= i + o - L      (L >= 0; RUDNN_ATTENTION_NO_WINDOW: no limit)
 *   window_right R: j <= i + o + R     (R >= 0; causal is the same as R = 0, and causal with
 *                                       R > 0 is rejected as inconsistent)
 * mask: RUDNN_BOOL (nonzero = masked), attn_bias: F32 or q's dtype; each [B or 1, Hq or 1, Sq,
 * Skv] (dims of 1 broadcast over B and H), last dimension contiguous.
 * A row whose keys are all masked gives zeros, and log-sum-exp -inf.
 * lse (optional): F32 [B, Hq, Sq], the natural log of each row's softmax denominator,
 * log(sum_j exp(s[i, j])), what a backward pass and split merges need.
 *
 * Bad arguments return a status, set rudnn_last_error() (op, argument, rule) and write nothing. */
#ifndef RUDNN_ATTENTION_H
#define RUDNN_ATTENTION_H

#include "rudnn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUDNN_ATTENTION_MAX_HEAD_DIM 256
#define RUDNN_ATTENTION_NO_WINDOW (-1)

typedef enum rudnn_attention_strategy {
    RUDNN_ATTENTION_AUTOTUNE = 0,       /* the default: the fastest candidate that runs, timed once
                                         * per shape bucket and kept in the autotune cache */
    RUDNN_ATTENTION_FALLBACK = 1,       /* several simple kernels: scores, softmax, output; needs a
                                         * workspace for the scores (rudnn_attention_workspace_size) */
    RUDNN_ATTENTION_FLASH_UNIT = 2,     /* one fused online-softmax kernel, FP32 accumulation, no
                                         * score matrix in memory */
    RUDNN_ATTENTION_FLASH_ACCELERATED = 3, /* fused, on matrix units (FlashBlackboxAccelerated);
                                            * NOT_SUPPORTED on a backend without them */
} rudnn_attention_strategy_t;

typedef struct rudnn_attention_options {
    float scale;          /* finite, nonzero; 0: 1 / sqrt(D) */
    float softcap;        /* 0: none; else finite and > 0 */
    int causal;           /* bottom-right aligned (above) */
    int64_t window_left;  /* RUDNN_ATTENTION_NO_WINDOW or >= 0 */
    int64_t window_right; /* RUDNN_ATTENTION_NO_WINDOW or >= 0 */
} rudnn_attention_options_t;

/* The defaults: scale 1 / sqrt(D), no softcap, not causal, no window. NULL options mean these. */
RUDNN_API void rudnn_attention_options_init(rudnn_attention_options_t *options);

/* What a request resolves to on this queue's device: the strategy and kernel that run (Autotune
 * resolved: from the autotune cache, or the static choice when it is off or cold) and why. */
typedef struct rudnn_attention_choice {
    rudnn_attention_strategy_t strategy;
    const char *kernel; /* "attention.<kernel>", as rudnn_last_kernel() names it */
    char reason[512];   /* the candidates passed over and why, or "autotuned: ..." */
} rudnn_attention_choice_t;

/* mask, attn_bias, out and lse may be NULL; pass the out and lse the call will get (out NULL: a
 * contiguous one; the backend's choice may depend on both, and on their presence). Fails as
 * rudnn_attention would, for the same arguments. Never times anything: with a cold autotune
 * cache it answers the static choice, which the first rudnn_attention call replaces by tuning. */
RUDNN_API rudnn_status_t rudnn_attention_resolve(rudnn_queue_t queue, const rudnn_tensor_t *q,
                                                 const rudnn_tensor_t *k, const rudnn_tensor_t *v,
                                                 const rudnn_tensor_t *mask, const rudnn_tensor_t *attn_bias,
                                                 const rudnn_attention_options_t *options,
                                                 rudnn_attention_strategy_t strategy, const rudnn_tensor_t *out,
                                                 const rudnn_tensor_t *lse, rudnn_attention_choice_t *choice);

/* Workspace bytes rudnn_attention needs for these arguments and strategy (0 where none): those of
 * the kernel rudnn_attention_resolve names. out and lse as for resolve. */
RUDNN_API rudnn_status_t rudnn_attention_workspace_size(rudnn_queue_t queue, const rudnn_tensor_t *q,
                                                        const rudnn_tensor_t *k, const rudnn_tensor_t *v,
                                                        const rudnn_tensor_t *mask,
                                                        const rudnn_tensor_t *attn_bias,
                                                        const rudnn_attention_options_t *options,
                                                        rudnn_attention_strategy_t strategy,
                                                        const rudnn_tensor_t *out, const rudnn_tensor_t *lse,
                                                        size_t *bytes);

/* The forward. workspace may be NULL (the queue's pool is used); else it must hold
 * workspace_bytes >= rudnn_attention_workspace_size(...). lse may be NULL. */
RUDNN_API rudnn_status_t rudnn_attention(rudnn_queue_t queue, const rudnn_tensor_t *q, const rudnn_tensor_t *k,
                                         const rudnn_tensor_t *v, const rudnn_tensor_t *mask,
                                         const rudnn_tensor_t *attn_bias,
                                         const rudnn_attention_options_t *options,
                                         rudnn_attention_strategy_t strategy, rudnn_buffer_t workspace,
                                         size_t workspace_bytes, const rudnn_tensor_t *out,
                                         const rudnn_tensor_t *lse);

/* ---- backward ------------------------------------------------------------------------------
 * The gradients of rudnn_attention's out with respect to q, k and v, given dout and the forward's
 * out and lse (the forward must have run on the same q, k, v, mask, attn_bias and options):
 *   P = exp(s - lse),  Delta_i = dout_i . out_i,  dS = P (dout v^T - Delta),
 *   dq = scale dU k,  dk = scale dU^T q,  dv = P^T dout
 * with dU = dS, times 1 - tanh^2(scale (q . k) / softcap) under a softcap; grouped-query attention
 * sums dk and dv over the query heads of each key head. Fully masked rows (lse -inf) give nothing.
 * dout, dq, dk, dv: strided views with a contiguous last dim like q, k, v (dout [B, Hq, Sq, Dv] and
 * dq like q, dk like k, dv like v, all in q's dtype); lse F32 [B, Hq, Sq], contiguous, required.
 * Every sum runs in FP32 in a fixed order, with no atomics: the same bits run to run (a
 * deterministic backward). The outputs are written (not accumulated into) and may not overlap any
 * input or each other. No gradient of attn_bias (missing). Workspace: rudnn_attention_backward_
 * workspace_size bytes (FP32 Delta, 4 B Hq Sq), or NULL for the queue's pool. */
typedef struct rudnn_attention_backward_args {
    const rudnn_tensor_t *q, *k, *v, *mask, *attn_bias; /* the forward's inputs (mask, bias: or NULL) */
    const rudnn_tensor_t *out, *lse;                    /* the forward's outputs */
    const rudnn_tensor_t *dout;                         /* the gradient of out */
    const rudnn_tensor_t *dq, *dk, *dv;                 /* written */
} rudnn_attention_backward_args_t;

RUDNN_API rudnn_status_t rudnn_attention_backward_workspace_size(rudnn_queue_t queue,
                                                                 const rudnn_attention_backward_args_t *args,
                                                                 const rudnn_attention_options_t *options,
                                                                 size_t *bytes);
RUDNN_API rudnn_status_t rudnn_attention_backward(rudnn_queue_t queue, const rudnn_attention_backward_args_t *args,
                                                  const rudnn_attention_options_t *options,
                                                  rudnn_buffer_t workspace, size_t workspace_bytes);

/* The backend's attention kernels: count, then name and strategy of each, most preferred first. */
RUDNN_API rudnn_status_t rudnn_attention_kernel_count(rudnn_context_t context, int *count);
RUDNN_API rudnn_status_t rudnn_attention_kernel_info(rudnn_context_t context, int index, const char **name,
                                                     rudnn_attention_strategy_t *strategy);

#ifdef __cplusplus
}
#endif
#endif
