/* Plain-C FP64 host reference of paged attention and MLA (include/rudnn/paged_attention.h,
 * DESIGN.md section 8). Written to be obviously correct: simple loops, every product, exponential
 * and sum in double, nothing rounded. Inputs are the values the device tensors hold, decoded to
 * double; rounding the result to a dtype and the tolerance of a comparison are the caller's.
 *
 * The schedule is the API's own struct (rudnn_paged_schedule_t): token t of sequence s lives in
 * row t % page_size of page tables[table_offsets[s] + t / page_size]. Query i of sequence
 * s = sequence_ids[i] at position pos = positions[i] sees keys [0, n) of its sequence with
 *   n = len             (not causal)
 *   n = min(len, pos+1) (causal)
 * and, over those keys, out = sum_j p_j v_j with p = softmax_j(score_j) (max subtracted); n = 0
 * gives zeros.
 *   attention: score_j = scale (q_i,h . k_j,g), v_j = v_j,g with g = h / (Hq / Hkv)
 *   MLA:       score_j = scale (q_i,h . latent_j + qp_i,h . kp_j), v_j = latent_j
 *
 * Layouts (contiguous, row-major, as the API's dims):
 *   q [Q][Hq][D], k_cache [pages][page_size][Hkv][D], v_cache [pages][page_size][Hkv][Dv],
 *   out [Q][Hq][Dv];
 *   MLA: q [Q][H][R], qp [Q][H][P], latent [pages][page_size][R], kp [pages][page_size][P],
 *   out [Q][H][R].
 * Only rows of a history are read: rows past a sequence's length, pages no history names and
 * table entries past ceil(len / page_size) (padding) are never touched. */
#ifndef RUDNN_TESTS_PAGED_ATTENTION_REF_H
#define RUDNN_TESTS_PAGED_ATTENTION_REF_H

#include <stdint.h>

#include "rudnn/paged_attention.h"

/* Keys query i sees: [0, return value). */
int64_t pa_ref_visible(const rudnn_paged_schedule_t *s, int64_t i, int causal);

/* The cache row (page * page_size + row in page) of token t of sequence seq; t < its length and
 * the schedule valid. */
int64_t pa_ref_row(const rudnn_paged_schedule_t *s, int64_t seq, int64_t t);

/* Checks what the reference relies on (a valid schedule: the plan-time rules of the header).
 * Returns 0, or -1 with nothing read past the arrays' described extents. */
int pa_ref_check_schedule(const rudnn_paged_schedule_t *s);

/* Attention over the schedule. Hkv divides Hq. Returns 0, -1 on an invalid schedule or shape, -2
 * out of host memory (out untouched then). */
int pa_ref_attention(const rudnn_paged_schedule_t *s, int64_t Hq, int64_t Hkv, int64_t D, int64_t Dv,
                     const double *q, const double *k_cache, const double *v_cache, double scale, int causal,
                     double *out);

/* MLA over the schedule (one latent head shared by the H query heads). Same returns. */
int pa_ref_mla(const rudnn_paged_schedule_t *s, int64_t H, int64_t R, int64_t P, const double *q, const double *qp,
               const double *latent, const double *kp, double scale, int causal, double *out);

/* What rudnn_paged_append writes: row i of rows [Q][width] (width = Hkv * dim) into the cache
 * row of token positions[i] of sequence sequence_ids[i], cache [pages][page_size][width], of any
 * element type of elem bytes (the copy is bitwise). Every position must be below its length.
 * Returns 0 or -1 (invalid schedule or a position at its length). */
int pa_ref_append(const rudnn_paged_schedule_t *s, int64_t width, size_t elem, const void *rows, void *cache);

#endif
