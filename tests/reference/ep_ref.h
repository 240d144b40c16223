/* Plain-C FP64 reference for expert-parallel dispatch and combine + AddRmsNorm, read from the
 * contract of include/rudnn/ep.h (and docs/EP_NOTES.md where the header follows Ascend), not
 * from ops/ep*.c. Given every rank's inputs it computes what one rank's ops must output.
 *
 * Devices: ep_size EP ranks times tp_size (1 or 2) TP ranks; device (ep_rank r, tp_rank t) has
 * index t * ep_size + r in ep_ref_problem_t.ranks. With TP the EP groups are the devices of one
 * tp_rank, the TP pairs those of one ep_rank (an EP x TP grid); both TP ranks of a pair hold the
 * same experts, and each computes a partial of their output (ep_ref_expert).
 *
 * Readings where the header leaves a choice (see the report's open questions); each follows the
 * header's literal words:
 *   - TP: "the first half of expand_x [T A, H]" is rows [0, A), the peer's rows start at row A
 *     (Ascend's kernel writes them right after this rank's rows instead). The reference keeps
 *     the two halves back to back in its arrays (half_rows[0] rows, then half_rows[1]).
 *   - Elastic scale-down (only without TP): ep_recv_counts is indexed (t L + e) ep_size + s by
 *     the comm's (physical) rank s, a removed rank adding nothing to the running total, and
 *     assist_info holds physical source ranks (Ascend works in new-rank space); routed ids must
 *     be < M' = elastic[3]; special experts keep their ranges from params->moe_expert_num (the
 *     header's "[E, E+Z)", E = moe_expert_num; docs/EP_NOTES.md 4 reads it so too).
 * The expert function (the stand-in for the caller's experts), applied to each row as stored
 * in the dtype: out = v (1 + 0.125 g) + 0.01 g for global routed expert g; with TP, TP rank t
 * computes the partial out * (0.375 + 0.25 t) (the two sum to out). The test writes these as
 * the dtype (RNE of the float), the combine adds the two partials in FP32 and rounds once.
 *
 * Tolerances (per element, computed in ep_ref_combine; u = 2^-24 F32, 2^-11 F16, 2^-8 BF16, the
 * unit roundoff of the output dtype):
 *   - x: err = 2 (K + 3) 2^-24 sum|terms| (the FP32 sum of the K weighted slots, the shared row
 *     and the residual), tol = err + u (|x| + err) (one rounding to the dtype).
 *   - rstd (F32 output): relative 1e-5 (the FP32 mean of H squares) plus the relative effect of
 *     x's FP32 error, err_max / rms(x).
 *   - y = x rstd gamma rounded once: e = |gamma| (err rstd + |x| rstd rel_rstd) + 3 2^-24 |y|,
 *     tol = e + u (|y| + e).
 *   - Integer outputs (assist_info, counts, expert_token_nums) and the dispatched rows (copies
 *     of x as stored) are compared exactly. */
#ifndef RUDNN_TESTS_EP_REF_H
#define RUDNN_TESTS_EP_REF_H

#include <stddef.h>
#include <stdint.h>

#include <rudnn/rudnn.h>
#include <rudnn/ep.h>

#include "reference/norm_ref.h" /* ref_round, ref_report_t, ref_check_value */

typedef struct ep_ref_rank_in {
    int64_t bs;
    const float *x;            /* [bs, H], values exactly representable in the dtype */
    const int32_t *expert_ids; /* [bs, K] */
    const uint8_t *mask;       /* NULL, [bs] (mask_dims 1) or [bs, K] (mask_dims 2) */
    const float *scales;       /* [bs, K] */
    const float *residual;     /* [bs, H] */
    const float *shared_x;     /* [bs, H] or NULL */
    const float *ori_x;        /* [bs, H] or NULL (no copy or const experts) */
} ep_ref_rank_in_t;

typedef struct ep_ref_problem {
    rudnn_dtype_t dtype;
    int ep_size, tp_size; /* tp_size 1 (no TP group) or 2 */
    int64_t hidden, top_k;
    int mask_dims; /* 0: no mask, 1, 2 */
    rudnn_ep_params_t params;
    const int32_t *elastic;        /* [4 + 2 ep_size] or NULL */
    const ep_ref_rank_in_t *ranks; /* [tp_size * ep_size] */
    const float *gamma;            /* [H] */
    const float *alpha1, *alpha2;  /* [N] */
    const float *const_v;          /* [N, H] */
    float eps;
} ep_ref_problem_t;

/* The layout after scale-down: the active size W', the routed experts M', L, and the maps. */
typedef struct ep_ref_layout {
    int w;          /* W' (ep_size without scale-down) */
    int64_t local;  /* L = moe_expert_num / ep_size */
    int64_t routed; /* M' (moe_expert_num without scale-down) */
    int new_of[RUDNN_EP_MAX_WORLD]; /* physical -> new rank, -1 removed */
    int phys_of[RUDNN_EP_MAX_WORLD];
} ep_ref_layout_t;

void ep_ref_layout(const ep_ref_problem_t *p, ep_ref_layout_t *layout);

/* The expert function above (double, before the test rounds it to the dtype). */
double ep_ref_expert(double v, int64_t global_expert, int tp_size, int tp_rank);

/* 1 when token i of rank in is active (1D mask true, or some 2D slot true, or no mask). */
int ep_ref_token_active(const ep_ref_problem_t *p, const ep_ref_rank_in_t *in, int64_t i);
/* 1 when slot (i, k) takes part (the token is active and, with a 2D mask, the slot's bit). */
int ep_ref_slot_active(const ep_ref_problem_t *p, const ep_ref_rank_in_t *in, int64_t i, int64_t k);

/* What device (ep_rank, tp_rank) (physical ranks) must receive. */
typedef struct ep_ref_dispatch {
    int64_t half_rows[2]; /* rows of half 0 (this rank's) and half 1 (the TP peer's) */
    int64_t rows;
    float *expand_x;          /* [rows, H] */
    int32_t *assist;          /* [rows, 3] */
    int32_t *local_expert;    /* [rows] */
    int64_t *expert_token_nums; /* [L] */
    int32_t *ep_recv_counts;  /* [count_len] = tp_size L ep_size */
    int64_t count_len;
    int32_t tp_recv_counts[2];
} ep_ref_dispatch_t;

/* Returns 0, or -1 when out of memory. */
int ep_ref_dispatch(const ep_ref_problem_t *p, int ep_rank, int tp_rank, ep_ref_dispatch_t *out);
void ep_ref_dispatch_free(ep_ref_dispatch_t *d);

/* What device (ep_rank, tp_rank) must output from the combine: y, x [bs, H], rstd [bs], each
 * with its allowed |got - want|. */
typedef struct ep_ref_combine {
    int64_t bs;
    double *y, *x, *rstd;
    double *y_tol, *x_tol, *rstd_tol;
} ep_ref_combine_t;

int ep_ref_combine(const ep_ref_problem_t *p, int ep_rank, int tp_rank, ep_ref_combine_t *out);
void ep_ref_combine_free(ep_ref_combine_t *c);

/* Compares n values against want with per-element tolerances; row_len splits the index into
 * (row, col) in the report lines. Returns the new mismatches. */
size_t ep_ref_compare(ref_report_t *report, const char *what, const float *got, const double *want,
                      const double *tol, size_t n, int64_t row_len);

#endif
