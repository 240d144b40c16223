/* Paged attention and MLA over a paged KV cache, forward (section 9 of the guide, DESIGN.md 8):
 * what a serving engine calls for every layer of every step.
 *
 * A step's schedule is validated once on the host (rudnn_paged_host_plan_create) and uploaded
 * once to a queue (rudnn_paged_plan_create): the upload is the step's only host-to-device copy,
 * and the plan is then reused by every layer, head and call of the step (attention, MLA, append)
 * without another host synchronisation, so those calls can be captured in a CUDA graph.
 *
 * The schedule: sequences s = 0 .. N - 1, each with a KV length lengths[s] (the tokens its cache
 * holds) and a page table tables[table_offsets[s] .. table_offsets[s + 1]) of physical page ids;
 * token t of sequence s lives in row t % page_size of page table_s[t / page_size]. Packed queries
 * i = 0 .. Q - 1 (prefill and decode of several sequences in one batch) each belong to sequence
 * sequence_ids[i] (non-decreasing) at zero-based absolute position positions[i].
 *
 *   not causal: query i sees keys [0, len)          causal: keys [0, min(len, pos + 1))
 *
 * with len its sequence's length and pos its position. A query that sees no key (an empty
 * history) gives zeros. Rejected at plan time, each with its own message: page_size 0; a table
 * shorter than ceil(len / page_size); a page of the first ceil(len / page_size) entries out of
 * [0, pages) or repeated among them (entries past those are padding, never read); a position
 * past its sequence's length (pos > len); sequence ids decreasing or >= N.
 *
 * Attention: q [Q, Hq, D], k_cache [pages, page_size, Hkv, D], v_cache [pages, page_size, Hkv,
 * Dv], out [Q, Hq, Dv]; query head h reads KV head h / (Hq / Hkv); one dtype of F32, F16 or BF16
 * for all four; contiguous; D and Dv in 1..RUDNN_PAGED_MAX_HEAD_DIM; scale finite and > 0 (no
 * default). FP32 scores, softmax and sums.
 *
 * MLA (DeepSeek's multi-head latent attention, projections absorbed): q [Q, H, R] and qp [Q, H,
 * P], one shared latent cache [pages, page_size, 1, R] and rotary-key cache kp [pages, page_size,
 * 1, P], out [Q, H, R]: score = scale (q . latent + qp . kp), value = latent. R in
 * 1..RUDNN_PAGED_MAX_HEAD_DIM, P in 1..RUDNN_PAGED_MLA_MAX_ROPE_DIM; scale is the original model's
 * QK scale. The rotary encoding comes before, the value/output projection after: the caller's.
 *
 * Inputs are expected finite (as the guide requires). A NaN or infinity in q, k or v reaches only
 * the outputs of the rows whose scores or values it enters (NaN there); nothing is read or
 * written out of bounds.
 *
 * Split workspaces: the plain calls work each (query, head) in one pass over its keys. The
 * _with_workspace forms split the keys of every query into `splits` ranges worked in parallel,
 * keep FP32 partials (acc, max, sum) per split in the workspace and merge them in FP32, skipping
 * empty splits: decode of few sequences with long histories needs that to fill the GPU.
 *
 * Bad arguments return a status, set rudnn_last_error() (op, argument, rule) and write nothing. */
#ifndef RUDNN_PAGED_ATTENTION_H
#define RUDNN_PAGED_ATTENTION_H

#include "rudnn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUDNN_PAGED_MAX_HEAD_DIM 1024       /* D, Dv and MLA's R */
#define RUDNN_PAGED_MLA_MAX_ROPE_DIM 256    /* MLA's P */
#define RUDNN_PAGED_MAX_SPLITS 32
#define RUDNN_PAGED_SPLIT_WORKSPACE_MAX_BYTES ((size_t)64 << 20)

typedef struct rudnn_paged_host_plan *rudnn_paged_host_plan_t; /* a validated schedule, host only */
typedef struct rudnn_paged_plan *rudnn_paged_plan_t;           /* the schedule on one queue */
typedef struct rudnn_paged_split_workspace *rudnn_paged_split_workspace_t;

typedef struct rudnn_paged_schedule {
    int64_t page_size;            /* tokens a page, >= 1 */
    int64_t pages;                /* physical pages of the caches (their first dim), >= 1 */
    int64_t sequences;            /* N >= 1 */
    const int64_t *lengths;       /* [N] KV length of each sequence, >= 0 */
    const int64_t *table_offsets; /* [N + 1], non-decreasing from 0: sequence s's page table is */
    const int32_t *tables;        /* tables[table_offsets[s] .. table_offsets[s + 1]) */
    int64_t queries;              /* Q >= 0 packed queries */
    const int64_t *sequence_ids;  /* [Q] each query's sequence: non-decreasing, < N */
    const int64_t *positions;     /* [Q] each query's zero-based position: 0 <= pos <= its length */
} rudnn_paged_schedule_t;

/* Validates the schedule (the rules above) and keeps a copy: the arrays may be freed after. */
RUDNN_API rudnn_status_t rudnn_paged_host_plan_create(const rudnn_paged_schedule_t *schedule,
                                                      rudnn_paged_host_plan_t *plan);
RUDNN_API void rudnn_paged_host_plan_destroy(rudnn_paged_host_plan_t plan);

/* Uploads the schedule to queue's device (one host-to-device copy, ordered on queue) and builds
 * what the kernels read (per-sequence tables, query blocks). Every call on the plan runs on this
 * queue; tensors must live in its context. The host plan may be destroyed afterwards. */
RUDNN_API rudnn_status_t rudnn_paged_plan_create(rudnn_queue_t queue, rudnn_paged_host_plan_t host,
                                                 rudnn_paged_plan_t *plan);
/* Waits for nothing: the memory is released in the queue's order. */
RUDNN_API void rudnn_paged_plan_destroy(rudnn_paged_plan_t plan);
/* Device memory the plan holds (bytes) and the queue it belongs to. */
RUDNN_API size_t rudnn_paged_plan_device_bytes(rudnn_paged_plan_t plan);
RUDNN_API rudnn_queue_t rudnn_paged_plan_queue(rudnn_paged_plan_t plan);

/* out = attention of each packed query over its sequence's pages (see above). */
RUDNN_API rudnn_status_t rudnn_paged_attention(rudnn_paged_plan_t plan, const rudnn_tensor_t *q,
                                               const rudnn_tensor_t *k_cache, const rudnn_tensor_t *v_cache,
                                               float scale, int causal, const rudnn_tensor_t *out);

RUDNN_API rudnn_status_t rudnn_paged_mla(rudnn_paged_plan_t plan, const rudnn_tensor_t *q, const rudnn_tensor_t *qp,
                                         const rudnn_tensor_t *latent_cache, const rudnn_tensor_t *kp_cache,
                                         float scale, int causal, const rudnn_tensor_t *out);

/* A split workspace for calls with `queries` queries of `heads` (query) heads and output width
 * value_dim (Dv; MLA: R), on queue. splits 2..RUDNN_PAGED_MAX_SPLITS fixes the split count; 0 lets
 * each call choose it from its plan and the device (1 .. the most that fit). Its FP32 partials,
 * splits * queries * heads * (value_dim + 2) * 4 bytes, may not exceed
 * RUDNN_PAGED_SPLIT_WORKSPACE_MAX_BYTES (BAD_PARAM naming the figure; with splits 0 the count is
 * capped to fit instead). Reusable by any call of those shapes on that queue, one at a time in
 * the queue's order. */
RUDNN_API rudnn_status_t rudnn_paged_split_workspace_create(rudnn_queue_t queue, int64_t queries, int64_t heads,
                                                            int64_t value_dim, int splits,
                                                            rudnn_paged_split_workspace_t *workspace);
RUDNN_API void rudnn_paged_split_workspace_destroy(rudnn_paged_split_workspace_t workspace);
RUDNN_API size_t rudnn_paged_split_workspace_bytes(rudnn_paged_split_workspace_t workspace);

/* The split count a _with_workspace call of these shapes uses (the workspace's, or, for splits 0,
 * the plan's choice). */
RUDNN_API rudnn_status_t rudnn_paged_split_count(rudnn_paged_plan_t plan, rudnn_paged_split_workspace_t workspace,
                                                 int64_t heads_q, int64_t heads_kv, int *splits);

RUDNN_API rudnn_status_t rudnn_paged_attention_with_workspace(rudnn_paged_plan_t plan,
                                                              rudnn_paged_split_workspace_t workspace,
                                                              const rudnn_tensor_t *q, const rudnn_tensor_t *k_cache,
                                                              const rudnn_tensor_t *v_cache, float scale, int causal,
                                                              const rudnn_tensor_t *out);
RUDNN_API rudnn_status_t rudnn_paged_mla_with_workspace(rudnn_paged_plan_t plan, rudnn_paged_split_workspace_t workspace,
                                                        const rudnn_tensor_t *q, const rudnn_tensor_t *qp,
                                                        const rudnn_tensor_t *latent_cache,
                                                        const rudnn_tensor_t *kp_cache, float scale, int causal,
                                                        const rudnn_tensor_t *out);

/* Writes each query's new key and value at its position: k [Q, Hkv, D] row i into k_cache
 * [pages, page_size, Hkv, D] at token positions[i] of sequence sequence_ids[i] (the page its
 * table names), v [Q, Hkv, Dv] likewise into v_cache (v and v_cache may both be NULL: one cache,
 * e.g. MLA's latent, written alone; MLA's kp cache is the second). Every position must be below
 * its sequence's length (the length counts the tokens being appended), and no two queries may
 * write one physical row (rejected, naming both). Contiguous, one dtype (F32, F16 or BF16).
 *
 * Copy on write: a cache whose buffer is shared (its reference count above one: see
 * rudnn_buffer_retain) is not modified: the append copies that buffer into a new one, writes the
 * copy, and returns the tensors to keep using in *k_cache_out / *v_cache_out (the same buffer
 * when it was not shared; a new buffer the caller owns and destroys when it was; k and v caches
 * in one shared buffer share one copy). A buffer is new exactly where k_cache_out->buffer (or
 * v_cache_out->buffer) differs from the one passed in; an append of zero queries writes and copies
 * nothing and returns the caller's tensors. Pages shared between sequences' prefixes inside one cache
 * are the scheduler's to copy before an append writes them (rudnn cannot see that sharing). */
RUDNN_API rudnn_status_t rudnn_paged_append(rudnn_paged_plan_t plan, const rudnn_tensor_t *k, const rudnn_tensor_t *v,
                                            const rudnn_tensor_t *k_cache, const rudnn_tensor_t *v_cache,
                                            rudnn_tensor_t *k_cache_out, rudnn_tensor_t *v_cache_out);

#ifdef __cplusplus
}
#endif
#endif
