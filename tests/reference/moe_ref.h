/* Plain-C FP64 host references for the MoE family (routing, dispatch, SwiGLU
 * experts, combine), following "Numeric contract of the MoE kernels" in
 * backends/README.md and DESIGN.md section 8, and the comparisons used
 * against them. Tolerances are computed per element from error bounds of
 * the FP32 computation the contract prescribes (see moe_ref.c for each). */
#ifndef RUDNN_TESTS_MOE_REF_H
#define RUDNN_TESTS_MOE_REF_H

#include <stddef.h>
#include <stdint.h>

#include <rudnn/rudnn.h>

#include "reference/norm_ref.h" /* ref_round, ref_quantize, ref_report_t */

/* ---- routing ------------------------------------------------------------------
 * The ranking used everywhere: value descending, then id ascending; NaN ranks
 * below every number (NaNs among themselves by id). */

/* 1 when (va, ia) ranks before (vb, ib). */
int moe_ref_ranks_before(double va, int64_t ia, double vb, int64_t ib);

/* Softmax top-k of one row x [E] (values exactly representable in the logits
 * dtype): p = softmax(x) in double (a row with NaN or +inf, or all -inf, is
 * all NaN); slots hold the top_k experts in ranking order of p; weights are
 * the selected p, divided by their sum when renormalize.
 * Returns the smallest relative gap |pa - pb| / max(|pa|, |pb|) between two
 * different (not exactly equal) finite keys whose order decided the result
 * (INFINITY when there is none): data closer than FP32 error to a tie would
 * make the expected experts ambiguous, so the tests regenerate such rows. */
double moe_ref_route_softmax_row(const float *x, int64_t experts, int top_k, int renormalize,
                                 uint32_t *indices, double *weights);

typedef struct moe_ref_grouped {
    int top_k;
    int groups;
    int selected_groups;
    int group_top_two;
    int renormalize;
    double scale;
} moe_ref_grouped_t;

/* Grouped sigmoid routing of one row: p = sigmoid(x) (double), s = p + bias
 * (bias NULL: 0); group score = the best s of the group in ranking order (NaN
 * only when all are NaN), or the sum of its two best s when group_top_two;
 * selected_groups groups by score ranking, then top_k experts of those groups
 * by s ranking; weight = p (/ sum of selected p when renormalize) * scale.
 * Returns the smallest gap |a - b| / max(1, |a|, |b|) between two different
 * keys (expert s or group scores) whose order decided the result. */
double moe_ref_route_grouped_row(const float *x, const float *bias, int64_t experts,
                                 const moe_ref_grouped_t *options, uint32_t *indices, double *weights);

/* Tolerance of a routing weight rounded to dtype: |got - ref| <= atol + rtol*|ref|. */
ref_tol_t moe_ref_weight_tolerance(rudnn_dtype_t dtype);

/* ---- dispatch ----------------------------------------------------------------- */

/* From indices [tokens, top_k] (all < experts): counts [experts], offsets
 * [experts + 1] (exclusive prefix sum) and positions [tokens * top_k]: the
 * dispatched row of pair t*top_k + j, rows of one expert in pair order. */
void moe_ref_dispatch(const uint32_t *indices, int64_t tokens, int top_k, int64_t experts,
                      uint32_t *counts, uint32_t *offsets, uint32_t *positions);

/* ---- SwiGLU experts ------------------------------------------------------------- */

/* One dispatched row: x [H] (dtype values), gate_e and up_e [I, H], down_e
 * [H, I] (dtype values). out[h] is the reference and tol[h] the allowed
 * |got - out[h]| for an output rounded to dtype, computed as the contract
 * says: g, u accumulated in FP32, a_i = round_dtype(silu(g) * u), out =
 * round_dtype(sum_i a_i * down[h, i]) in FP32. scratch holds 2 * I doubles.
 * gu_rounded: g and u are also rounded to dtype before silu (the CUDA plugin's cuBLAS comparison
 * kernels moe.cublas_*_gu16, as PyTorch's MoE does). */
void moe_ref_expert_row(rudnn_dtype_t dtype, const float *x, const float *gate_e, const float *up_e,
                        const float *down_e, int64_t hidden, int64_t inter, int gu_rounded, double *scratch,
                        double *out, double *tol);

/* ---- combine ----------------------------------------------------------------------- */

/* out[h] = round_dtype(sum_j w[j] * rows[j][h]) summed in FP32, from the
 * weights and expert output rows as the device holds them (read back). */
void moe_ref_combine_row(rudnn_dtype_t dtype, const float *w, const float *const *rows, int top_k,
                         int64_t hidden, double *out, double *tol);

/* ---- comparison ----------------------------------------------------------------------- */

/* Compares n values with a per-element tolerance, NaN-aware as ref_compare
 * (NaN needs NaN, inf needs the same inf, non-finite where finite is a
 * mismatch). Records the worst |got - ref| / tol. Returns new mismatches. */
size_t moe_ref_compare(ref_report_t *report, const char *what, const float *got, const double *ref,
                       const double *tol, size_t n, int64_t row_len);

#endif
