/* FP64 host references for layer_norm, rms_norm, softmax and add_rms_norm,
 * and the NaN-aware comparison with per-dtype tolerances. */
#include "norm_ref.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

float ref_round(rudnn_dtype_t dtype, float v)
{
    switch (dtype) {
    case RUDNN_F16: return rudnn_f16_to_f32(rudnn_f32_to_f16(v));
    case RUDNN_BF16: return rudnn_bf16_to_f32(rudnn_f32_to_bf16(v));
    default: return v;
    }
}

void ref_quantize(rudnn_dtype_t dtype, const float *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = ref_round(dtype, in[i]);
}

void ref_layer_norm(const float *x, const float *gamma, const float *beta, float eps, int64_t rows,
                    int64_t cols, double *y)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        double *yr = y + r * cols;
        double sum = 0.0;
        for (int64_t c = 0; c < cols; c++)
            sum += xr[c];
        double mean = sum / (double)cols;
        double ss = 0.0;
        for (int64_t c = 0; c < cols; c++) {
            double d = (double)xr[c] - mean;
            ss += d * d;
        }
        double var = ss / (double)cols;
        double rstd = 1.0 / sqrt(var + (double)eps);
        for (int64_t c = 0; c < cols; c++) {
            double v = ((double)xr[c] - mean) * rstd * (double)gamma[c];
            if (beta)
                v += (double)beta[c];
            yr[c] = v;
        }
    }
}

/* The kernels compute mean in FP32 (a few ulps of max|x| off for short rows, the summation bound
 * of ref_tolerance for long ones) and then x - mean in FP32: that difference carries an absolute
 * error of a few ulps of max|x| however small the variance is, and y multiplies it by
 * rstd * gamma. For rows whose values nearly coincide (short random rows can), this exceeds the
 * relative tolerance; 8 ulps covers the mean's rounding, the subtraction and the variance's effect
 * on rstd, and is negligible for well-conditioned rows (rstd * max|x| of order 1 to sqrt(cols)). */
void ref_layer_norm_cond_atol(const float *x, const float *gamma, float eps, int64_t rows, int64_t cols,
                              double *atol)
{
    double gmax = 0.0;
    for (int64_t c = 0; c < cols; c++)
        if (isfinite(gamma[c]) && fabs((double)gamma[c]) > gmax)
            gmax = fabs((double)gamma[c]);
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        double sum = 0.0, xmax = 0.0;
        for (int64_t c = 0; c < cols; c++) {
            sum += xr[c];
            if (isfinite(xr[c]) && fabs((double)xr[c]) > xmax)
                xmax = fabs((double)xr[c]);
        }
        double mean = sum / (double)cols;
        double ss = 0.0;
        for (int64_t c = 0; c < cols; c++) {
            double d = (double)xr[c] - mean;
            ss += d * d;
        }
        double rstd = 1.0 / sqrt(ss / (double)cols + (double)eps);
        double a = REF_LN_COND_ULPS * 0x1p-24 * xmax * rstd * gmax;
        atol[r] = isfinite(a) ? a : 0.0; /* rows with inf/NaN are checked by their NaN/inf pattern */
    }
}

void ref_rms_norm(const float *x, const float *gamma, float eps, int64_t rows, int64_t cols,
                  double *y, double *rstd)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        double ss = 0.0;
        for (int64_t c = 0; c < cols; c++)
            ss += (double)xr[c] * (double)xr[c];
        /* ss <= 262144 * (3.4e38)^2 ~ 3e82: no overflow in double. inf in x
         * gives ss = inf, rstd = 0, y = 0 for finite x and NaN for the inf
         * itself (inf * 0), as PyTorch's x * rsqrt(mean(x^2) + eps). */
        double rs = 1.0 / sqrt(ss / (double)cols + (double)eps);
        if (rstd)
            rstd[r] = rs;
        for (int64_t c = 0; c < cols; c++)
            y[r * cols + c] = (double)xr[c] * rs * (double)gamma[c];
    }
}

void ref_softmax(const float *x, int64_t rows, int64_t cols, double *y)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        double *yr = y + r * cols;
        int poisoned = 0; /* NaN or +inf present */
        double m = -INFINITY;
        for (int64_t c = 0; c < cols; c++) {
            if (isnan(xr[c]) || (isinf(xr[c]) && xr[c] > 0))
                poisoned = 1;
            if (xr[c] > m)
                m = xr[c];
        }
        if (poisoned || m == -INFINITY) {
            for (int64_t c = 0; c < cols; c++)
                yr[c] = NAN;
            continue;
        }
        double sum = 0.0;
        for (int64_t c = 0; c < cols; c++) {
            yr[c] = exp((double)xr[c] - m);
            sum += yr[c];
        }
        for (int64_t c = 0; c < cols; c++)
            yr[c] /= sum;
    }
}

void ref_add_rms_norm(rudnn_dtype_t dtype, const float *a, const float *r, const float *gamma,
                      float eps, int64_t rows, int64_t cols, double *y, double *rstd, float *x_out)
{
    size_t n = (size_t)(rows * cols);
    for (size_t i = 0; i < n; i++) {
        volatile float sum = a[i] + r[i]; /* one FP32 addition, as the kernels do */
        x_out[i] = ref_round(dtype, sum);
    }
    ref_rms_norm(x_out, gamma, eps, rows, cols, y, rstd);
}

/* Tolerances: |got - ref| <= atol_abs + atol_rel * row_scale + rtol * |ref|.
 *
 * F32: the kernels accumulate in FP32. A row of up to 262144 elements summed
 * in per-thread chunks and a tree has a typical relative error of a few
 * 1e-7 and stays well below 1e-5 (the pairwise bound is log2(n) * 2^-24 =
 * 1.1e-6; sequential chunks of 1024 terms have a random-walk error of about
 * sqrt(1024) * 2^-24 = 2e-6); the final multiplications add 3 roundings and
 * exp/rsqrt a few ulp. rtol 1e-5. atol 1e-6 of the row's output scale covers
 * outputs near zero that come from cancellation (layer_norm's x - mean, or
 * t * gamma + beta), where the relative error is not meaningful.
 *
 * F16: the output is RNE-rounded to F16 from an FP32 value, so it may be one
 * ulp away (2^-10 = 9.8e-4 relative, at the bottom of a binade) when the FP32
 * value straddles a rounding boundary, plus the FP32 error above: rtol 1e-3.
 * atol_abs 2^-24 is one ulp of F16 subnormals (softmax of long rows gives
 * probabilities around 1.5e-5, below F16's smallest normal 6.1e-5); atol_rel
 * 1e-5 of the row scale covers FP32 cancellation before rounding.
 *
 * BF16: one ulp is 2^-7 = 7.8e-3 relative; plus FP32 error: rtol 8e-3, with
 * the same atol_rel as F16 (BF16 subnormals are below 1e-38 and covered by
 * the row-scale term). */
ref_tol_t ref_tolerance(rudnn_dtype_t dtype)
{
    ref_tol_t tol;
    switch (dtype) {
    case RUDNN_F16:
        tol.rtol = 1e-3;
        tol.atol_rel = 1e-5;
        tol.atol_abs = 0x1p-24;
        break;
    case RUDNN_BF16:
        tol.rtol = 8e-3;
        tol.atol_rel = 1e-5;
        tol.atol_abs = 0.0;
        break;
    default:
        tol.rtol = 1e-5;
        tol.atol_rel = 1e-6;
        tol.atol_abs = 0.0;
        break;
    }
    return tol;
}

void ref_report_init(ref_report_t *report) { memset(report, 0, sizeof *report); }

#define MAX_NOTES 8

void ref_report_mismatch(ref_report_t *report, const char *fmt, ...)
{
    size_t len = strlen(report->text);
    if (report->mismatches++ >= MAX_NOTES || len + 1 >= sizeof report->text)
        return;
    va_list args;
    va_start(args, fmt);
    vsnprintf(report->text + len, sizeof report->text - len, fmt, args);
    va_end(args);
}

int ref_check_value(ref_report_t *report, double got, double want, double allowed)
{
    report->checked++;
    if (isnan(want))
        return !isnan(got);
    if (isinf(want))
        return got != want;
    if (!isfinite(got))
        return 1;
    double err = fabs(got - want);
    double excess = allowed > 0 ? err / allowed : (err > 0 ? INFINITY : 0);
    if (excess > report->worst_excess)
        report->worst_excess = excess;
    return err > allowed;
}

size_t ref_compare(ref_report_t *report, const char *what, const float *got, const double *ref,
                   int64_t rows, int64_t cols, ref_tol_t tol)
{
    return ref_compare_rows(report, what, got, ref, rows, cols, tol, NULL);
}

size_t ref_compare_rows(ref_report_t *report, const char *what, const float *got, const double *ref,
                        int64_t rows, int64_t cols, ref_tol_t tol, const double *row_atol)
{
    size_t before = report->mismatches;
    for (int64_t r = 0; r < rows; r++) {
        double scale = 0.0;
        for (int64_t c = 0; c < cols; c++) {
            double v = fabs(ref[r * cols + c]);
            if (isfinite(v) && v > scale)
                scale = v;
        }
        double atol = tol.atol_abs + tol.atol_rel * scale + (row_atol ? row_atol[r] : 0.0);
        for (int64_t c = 0; c < cols; c++) {
            size_t i = (size_t)(r * cols + c);
            double want = ref[i];
            double g = got[i];
            double allowed = atol + tol.rtol * fabs(want);
            if (ref_check_value(report, g, want, allowed))
                ref_report_mismatch(report, "  %s[row %lld, col %lld]: got %.9g, want %.12g (allowed +-%.3g)\n",
                                    what, (long long)r, (long long)c, g, want, allowed);
        }
    }
    return report->mismatches - before;
}

size_t ref_compare_exact(ref_report_t *report, const char *what, const float *got, const float *want,
                         size_t n)
{
    size_t before = report->mismatches;
    for (size_t i = 0; i < n; i++) {
        uint32_t gb, wb;
        memcpy(&gb, &got[i], 4);
        memcpy(&wb, &want[i], 4);
        report->checked++;
        int same = gb == wb || (isnan(got[i]) && isnan(want[i]));
        if (!same)
            ref_report_mismatch(report, "  %s[%zu]: got %.9g (0x%08x), want exactly %.9g (0x%08x)\n", what, i,
                                (double)got[i], gb, (double)want[i], wb);
    }
    return report->mismatches - before;
}
