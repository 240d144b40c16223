/* The paged-attention family's kernel table (ops/paged_attention.c plans; include/rudnn/
 * paged_attention.h has the contract). Included through backends/backend.h.
 *
 * The device plan is one buffer of int32 arrays that ops/ builds from a validated schedule and
 * uploads once (rudnn_paged_layout_t gives their byte offsets):
 *   seq_len[N]        KV length of sequence s
 *   seq_table[N + 1]  sequence s's page ids are pages[seq_table[s] .. seq_table[s + 1])
 *   seq_query[N + 1]  its queries are seq_query[s] .. seq_query[s + 1] - 1 (queries are sorted)
 *   query_seq[Q]      each query's sequence
 *   query_pos[Q]      each query's position
 *   pages[T]          the page tables, only the entries a history uses (ceil(len / page_size))
 *   blocks of kind b (b = 0 .. RUDNN_PAGED_BLOCK_KINDS - 1): the queries of every sequence cut
 *                     into runs of at most 2^b consecutive queries, in sequence order, each a
 *                     rudnn_paged_block_t; block_count[b] of them
 * Query i of sequence s sees keys [0, hi) with hi = causal ? min(len, pos + 1) : len; a block's
 * kv_causal is the largest hi (causal) of its queries, so a kernel working a block reads keys
 * [0, causal ? kv_causal : len) and masks per query row. Every query of a block has
 * 0 <= pos <= len, every page id of the tables is in [0, cache pages). */
#ifndef RUDNN_HAL_PAGED_ATTENTION_H
#define RUDNN_HAL_PAGED_ATTENTION_H

#include "table.h"
#include "rudnn/paged_attention.h"

#define RUDNN_PAGED_BLOCK_KINDS 8 /* runs of 1, 2, 4, .. 128 queries */

typedef struct rudnn_paged_block {
    int32_t seq;       /* its sequence */
    int32_t q0;        /* its first query */
    int32_t nq;        /* its queries, 1 .. 2^kind */
    int32_t kv_causal; /* max over its queries of min(len, pos + 1) */
} rudnn_paged_block_t;

typedef struct rudnn_paged_layout {
    int64_t page_size;       /* >= 1 */
    int64_t cache_pages;     /* the caches' first dim */
    int64_t sequences;       /* N >= 1 */
    int64_t queries;         /* Q >= 1 (ops/ runs nothing for Q = 0) */
    int64_t max_len;         /* the longest sequence's length */
    int64_t total_kv;        /* sum of the lengths of sequences that have queries */
    /* byte offsets in the plan buffer */
    int64_t off_seq_len, off_seq_table, off_seq_query, off_query_seq, off_query_pos, off_pages;
    int64_t off_blocks[RUDNN_PAGED_BLOCK_KINDS];
    int64_t block_count[RUDNN_PAGED_BLOCK_KINDS];
    int64_t bytes; /* the whole buffer */
} rudnn_paged_layout_t;

typedef struct rudnn_paged_args {
    rudnn_dtype_t dtype;  /* q (qp), caches and out: F32, F16 or BF16 */
    int32_t mla;          /* 0: attention; 1: MLA (k = latent, kp given, value = latent, heads_kv 1) */
    int64_t heads_q;      /* Hq (MLA: H) */
    int64_t heads_kv;     /* Hkv, divides heads_q (MLA: 1) */
    int64_t head_dim;     /* D (MLA: R), 1..RUDNN_PAGED_MAX_HEAD_DIM */
    int64_t value_dim;    /* Dv (MLA: R) */
    int64_t rope_dim;     /* MLA: P, 1..RUDNN_PAGED_MLA_MAX_ROPE_DIM; attention: 0 */
    float scale;          /* finite, > 0 */
    int32_t causal;
    /* 1: out written directly. > 1: split s of query i covers keys [s * c, (s + 1) * c) of its
     * block's key range [0, n) with c = split_chunk(n, splits) below; it writes FP32 partials to
     * the workspace, acc [splits][Q][Hq][Dv] (sum_j exp(s_j - m) v_j), then m [splits][Q][Hq] (its
     * max; -inf when it saw no key) and l [splits][Q][Hq] (sum_j exp(s_j - m)), and a merge writes
     * out = sum_s exp(m_s - M) acc_s / sum_s exp(m_s - M) l_s over the splits with l_s > 0 (M their
     * max; zeros when none). */
    int32_t splits;
    rudnn_paged_layout_t layout;
} rudnn_paged_args_t;

/* Keys per split of a range of n keys: a multiple of 16 (whole MMA tiles), at least 16. */
static inline int64_t rudnn_paged_split_chunk(int64_t n, int32_t splits)
{
    int64_t c = (n + splits - 1) / splits;
    c = (c + 15) / 16 * 16;
    return c < 16 ? 16 : c;
}

typedef struct rudnn_paged_operands {
    rudnn_mem_ref_t plan;      /* the device plan (layout) */
    rudnn_mem_ref_t q;         /* [Q, Hq, D] */
    rudnn_mem_ref_t qp;        /* MLA: [Q, H, P]; else mem NULL */
    rudnn_mem_ref_t k;         /* [pages, page_size, Hkv, D] (MLA: the latent cache) */
    rudnn_mem_ref_t kp;        /* MLA: [pages, page_size, 1, P]; else mem NULL */
    rudnn_mem_ref_t v;         /* [pages, page_size, Hkv, Dv]; MLA: mem NULL (value = latent) */
    rudnn_mem_ref_t out;       /* [Q, Hq, Dv] */
    rudnn_mem_ref_t workspace; /* splits > 1: the partials (above); else mem NULL */
    /* splits > 1, optional (mem NULL: none): Q * Hq uint32 counters, zero between calls, at a
     * fixed place of the workspace (past the partials of its most splits), so that the CTAs of
     * one output row group can count their splits' partials in and the last one merge them
     * (it resets its counter to 0: the next call, or a graph replay, starts from zero). */
    rudnn_mem_ref_t tickets;
} rudnn_paged_operands_t;

typedef struct rudnn_paged_append_args {
    rudnn_dtype_t dtype;
    int64_t heads_kv;
    int64_t key_dim;   /* D */
    int64_t value_dim; /* Dv; 0: no value cache */
    rudnn_paged_layout_t layout;
} rudnn_paged_append_args_t;

typedef struct rudnn_paged_append_operands {
    rudnn_mem_ref_t plan;
    rudnn_mem_ref_t k, v;             /* [Q, Hkv, D], [Q, Hkv, Dv] (v: mem NULL when value_dim 0) */
    rudnn_mem_ref_t k_cache, v_cache; /* [pages, page_size, Hkv, D / Dv] */
} rudnn_paged_append_operands_t;

typedef struct rudnn_paged_attention_kernels {
    uint32_t struct_size; /* sizeof(rudnn_paged_attention_kernels_t) the plugin was built with */
    /* Attention or MLA over the plan (args->splits as above). Writes out (and the workspace)
     * only; sets an error and returns NOT_SUPPORTED where the device cannot run the shape. */
    rudnn_status_t (*attend)(void *queue, const rudnn_paged_args_t *args, const rudnn_paged_operands_t *ops);
    /* Query i's k (and v) row into its position's cache row; ops/ checked that every position is
     * below its length and that no two queries share a row. */
    rudnn_status_t (*append)(void *queue, const rudnn_paged_append_args_t *args,
                             const rudnn_paged_append_operands_t *ops);
    /* Entries appended later are optional: read them through RUDNN_KERNEL_ENTRY. */
} rudnn_paged_attention_kernels_t;

/* A table shorter than this is refused (the family is then absent on that backend). */
#define rudnn_paged_attention_kernels_min_size RUDNN_TABLE_END(rudnn_paged_attention_kernels_t, append)

#endif
