/* Plain-C FP64 host references for the normalization family, following the
 * numeric contract in backends/README.md, and the comparison used against
 * them. The references compute the exact functions in double; the
 * power-of-two scaling of the kernels is exact, so it does not appear here. */
#ifndef RUDNN_TESTS_NORM_REF_H
#define RUDNN_TESTS_NORM_REF_H

#include <stddef.h>
#include <stdint.h>

#include <rudnn/rudnn.h>

/* ---- quantization ---------------------------------------------------------- */

/* Rounds v to dtype (RNE, through rudnn_f32_to_f16 / rudnn_f32_to_bf16) and
 * returns it as float. F32 returns v. */
float ref_round(rudnn_dtype_t dtype, float v);

/* out[i] = ref_round(dtype, in[i]); in and out may be the same array. */
void ref_quantize(rudnn_dtype_t dtype, const float *in, float *out, size_t n);

/* ---- references (double accumulation) ---------------------------------------
 * x is row-major [rows, cols] and already holds values exactly representable
 * in the op's dtype; gamma and beta are F32 [cols]. Outputs are double. */

/* y = (x - mean) / sqrt(var + eps) * gamma + beta (population variance);
 * beta may be NULL. */
void ref_layer_norm(const float *x, const float *gamma, const float *beta, float eps, int64_t rows,
                    int64_t cols, double *y);

/* rstd = 1 / sqrt(mean(x^2) + eps); y = x * rstd * gamma. rstd may be NULL. */
void ref_rms_norm(const float *x, const float *gamma, float eps, int64_t rows, int64_t cols,
                  double *y, double *rstd);

/* y = exp(x - max) / sum(exp(x - max)); a row with NaN or +inf, or all -inf,
 * is all NaN. */
void ref_softmax(const float *x, int64_t rows, int64_t cols, double *y);

/* x = round_dtype(fp32(a + r)) (FP32 add, then RNE to the dtype, as the
 * contract says), written to x_out as float; y and rstd are ref_rms_norm of
 * that rounded x, in double. */
void ref_add_rms_norm(rudnn_dtype_t dtype, const float *a, const float *r, const float *gamma,
                      float eps, int64_t rows, int64_t cols, double *y, double *rstd, float *x_out);

/* ---- comparison ------------------------------------------------------------ */

/* |got - ref| <= atol_abs + atol_rel * scale + rtol * |ref|, where scale is
 * the largest finite |ref| of the row (the row's output scale). */
typedef struct ref_tol {
    double rtol;
    double atol_rel;
    double atol_abs;
} ref_tol_t;

/* The tolerance of an output rounded to dtype; see norm_ref.c for why. */
ref_tol_t ref_tolerance(rudnn_dtype_t dtype);

/* layer_norm's conditioning term, per row: REF_LN_COND_ULPS FP32 ulps of max|x| (the error of
 * x - mean in FP32, which does not shrink with the variance) times rstd * max|gamma|. A row whose
 * values nearly coincide has a large rstd, and no FP32 computation of x - mean gets closer to the
 * FP64 reference than that; see norm_ref.c. */
#define REF_LN_COND_ULPS 8.0
void ref_layer_norm_cond_atol(const float *x, const float *gamma, float eps, int64_t rows, int64_t cols,
                              double *atol);

typedef struct ref_report {
    size_t mismatches; /* elements outside tolerance or with the wrong NaN/inf */
    size_t checked;
    double worst_excess; /* largest |got-ref| / allowed among finite elements */
    char text[2048];     /* the first mismatches, one per line */
} ref_report_t;

void ref_report_init(ref_report_t *report);

/* Checks one value against want with |got - want| <= allowed, NaN-aware
 * (a NaN want needs a NaN, an inf want the same inf, and a NaN or inf got
 * where want is finite is a mismatch); counts it as checked and records its
 * error / allowed in worst_excess (finite values). Returns 1 on a mismatch,
 * which the caller reports with ref_report_mismatch. */
int ref_check_value(ref_report_t *report, double got, double want, double allowed);

/* Counts a mismatch; the first ones (8) are described in text by fmt. */
void ref_report_mismatch(ref_report_t *report, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Compares got (as read back) against ref row by row, NaN-aware: a NaN in
 * ref needs a NaN in got at the same position, an inf needs the same inf, and
 * a NaN or inf in got where ref is finite is a mismatch. what names the
 * output in the report lines. Returns the number of new mismatches. */
size_t ref_compare(ref_report_t *report, const char *what, const float *got, const double *ref,
                   int64_t rows, int64_t cols, ref_tol_t tol);

/* ref_compare with row_atol[r] added to the allowed error of row r (NULL: none). */
size_t ref_compare_rows(ref_report_t *report, const char *what, const float *got, const double *ref,
                        int64_t rows, int64_t cols, ref_tol_t tol, const double *row_atol);

/* Bit-exact comparison of two float arrays (NaN matches any NaN). */
size_t ref_compare_exact(ref_report_t *report, const char *what, const float *got, const float *want,
                         size_t n);

#endif
