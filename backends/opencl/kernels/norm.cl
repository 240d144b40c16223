/* rudnn OpenCL normalization kernels: layer_norm, rms_norm, softmax, add_rms_norm.
 *
 * Numerics follow backends/README.md exactly ("Numeric contract of the
 * normalization kernels"). OpenCL C 1.2; no extension is required.
 *
 * Build options:
 *   -DRUDNN_DTYPE=0|1|2   storage dtype of x/y (F32, F16, BF16). gamma, beta and
 *                         rstd are always F32.
 *
 * Launch: one work-group per row, local size L chosen by the host (a power of
 * two; the same L for every kernel of the program for a given cols, so that
 * add_rms_norm's y equals rms_norm(x_out) bit for bit). Work-item `lid` owns
 * the columns lid, lid + L, lid + 2L, ...: every global read and write of a
 * column is done by the same work-item, so an output may be exactly an input
 * (same buffer and offset). Reductions: each work-item accumulates its columns
 * in order, then a fixed tree in local memory (deterministic for a given L).
 * Every barrier is reached by all work-items of the group.
 *
 * Arguments: buffers and element offsets are separate (no sub-buffers);
 * row0 is the first row of this launch (the host splits huge row counts).
 * The last argument is local scratch of L floats.
 *
 * The program cache prepends kernels/common.cl: act_t / LOAD_A / STORE_A (the
 * x/y storage), group_sum / group_max, and FP_CONTRACT OFF come from there.
 */

#ifndef RUDNN_DTYPE
#error "RUDNN_DTYPE must be defined: 0 (F32), 1 (F16) or 2 (BF16)"
#endif

/* 2^-k for 0 <= k <= 126 (a normal float, built from its bits). */
float pow2_neg(int k) { return as_float((uint)(127 - k) << 23); }

/* e = max(0, frexp exponent of m) for m = max|x| >= 0. frexp's exponent of a
 * normal float with biased exponent b is b - 126. Zero and subnormals give
 * e <= 0, hence 0. inf/NaN give 0: the row is inf/NaN anyway and the result
 * does not depend on e. */
int scale_exponent(float m)
{
    int b = (int)((as_uint(m) >> 23) & 0xffu);
    if (b == 0xff || b <= 126) {
        return 0;
    }
    return b - 126;
}

/* The scale 2^-e is applied as two exact multiplications by normal floats
 * (2^-e alone is subnormal for e = 127, 128). */
typedef struct scale2 {
    float s1, s2;
} scale2;

scale2 make_scale(int e)
{
    scale2 s;
    s.s1 = pow2_neg(e >> 1);
    s.s2 = pow2_neg(e - (e >> 1));
    return s;
}

float apply_scale(float x, scale2 s) { return (x * s.s1) * s.s2; }

/* eps * 2^-2e */
float scaled_eps(float eps, scale2 s) { return ((eps * s.s1) * s.s1) * s.s2 * s.s2; }

/* max |x| over the row */
float row_absmax(const __global act_t *xr, uint cols, __local float *scratch)
{
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    float m = 0.0f;
    for (uint j = lid; j < cols; j += L) {
        m = fmax(m, fabs(LOAD_A(xr, j)));
    }
    return group_max(m, scratch);
}

/* rms_norm of one row given its max |x|: returns rstd = 2^-e / sqrt(s/H + eps 2^-2e)
 * and writes y = (x 2^-e) * (1 / sqrt(s/H + eps 2^-2e)) * gamma. Shared by
 * rms_norm and add_rms_norm so both compute the same bits. */
float rms_row(const __global act_t *xr, const __global float *g, __global act_t *yr,
              uint cols, float eps, float absmax, __local float *scratch)
{
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    const scale2 sc = make_scale(scale_exponent(absmax));

    float acc = 0.0f;
    for (uint j = lid; j < cols; j += L) {
        const float u = apply_scale(LOAD_A(xr, j), sc);
        acc = acc + u * u;
    }
    const float s = group_sum(acc, scratch);
    const float r = 1.0f / sqrt(s / (float)cols + scaled_eps(eps, sc));

    for (uint j = lid; j < cols; j += L) {
        const float u = apply_scale(LOAD_A(xr, j), sc);
        STORE_A(yr, j, (u * r) * g[j]);
    }
    return (r * sc.s1) * sc.s2;
}

__kernel void rudnn_rms_norm(const __global act_t *x, ulong x_off,
                             const __global float *gamma, ulong gamma_off,
                             __global act_t *y, ulong y_off,
                             ulong row0, uint cols, float eps, __local float *scratch)
{
    const ulong row = row0 + get_group_id(0);
    const __global act_t *xr = x + x_off + row * cols;
    __global act_t *yr = y + y_off + row * cols;

    const float m = row_absmax(xr, cols, scratch);
    (void)rms_row(xr, gamma + gamma_off, yr, cols, eps, m, scratch);
}

__kernel void rudnn_add_rms_norm(const __global act_t *a, ulong a_off,
                                 const __global act_t *res, ulong res_off,
                                 const __global float *gamma, ulong gamma_off,
                                 __global act_t *y, ulong y_off,
                                 __global float *rstd, ulong rstd_off,
                                 __global act_t *x_out, ulong x_off,
                                 ulong row0, uint cols, float eps, __local float *scratch)
{
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    const ulong row = row0 + get_group_id(0);
    const __global act_t *ar = a + a_off + row * cols;
    const __global act_t *rr = res + res_off + row * cols;
    __global act_t *xr = x_out + x_off + row * cols;
    __global act_t *yr = y + y_off + row * cols;

    /* x = round_dtype(a + r), written to x_out and read back (the rounding
     * is the store); x_out may be a or r: a[j], r[j] are read first. */
    float m = 0.0f;
    for (uint j = lid; j < cols; j += L) {
        const float v = LOAD_A(ar, j) + LOAD_A(rr, j);
        STORE_A(xr, j, v);
        m = fmax(m, fabs(LOAD_A(xr, j)));
    }
    m = group_max(m, scratch);

    const float rs = rms_row(xr, gamma + gamma_off, yr, cols, eps, m, scratch);
    if (lid == 0) {
        rstd[rstd_off + row] = rs;
    }
}

__kernel void rudnn_layer_norm(const __global act_t *x, ulong x_off,
                               const __global float *gamma, ulong gamma_off,
                               const __global float *beta, ulong beta_off, uint has_beta,
                               __global act_t *y, ulong y_off,
                               ulong row0, uint cols, float eps, __local float *scratch)
{
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    const ulong row = row0 + get_group_id(0);
    const __global act_t *xr = x + x_off + row * cols;
    __global act_t *yr = y + y_off + row * cols;
    const __global float *g = gamma + gamma_off;
    const __global float *b = beta + beta_off;
    const float H = (float)cols;

    const scale2 sc = make_scale(scale_exponent(row_absmax(xr, cols, scratch)));

    float acc = 0.0f;
    for (uint j = lid; j < cols; j += L) {
        acc = acc + apply_scale(LOAD_A(xr, j), sc);
    }
    const float mean = group_sum(acc, scratch) / H;

    acc = 0.0f;
    for (uint j = lid; j < cols; j += L) {
        const float d = apply_scale(LOAD_A(xr, j), sc) - mean;
        acc = acc + d * d;
    }
    const float var = group_sum(acc, scratch) / H;
    float r = 1.0f / sqrt(var + scaled_eps(eps, sc));
    /* For large e, eps * 2^-2e underflows in FP32; with var == 0 (a constant
     * row, e.g. cols == 1) r would be inf and 0 * inf = NaN, where the exact
     * value (eps > 0) is finite and y = beta. Clamp to the largest float. */
    if (isinf(r) && eps > 0.0f) {
        r = FLT_MAX;
    }

    for (uint j = lid; j < cols; j += L) {
        const float d = apply_scale(LOAD_A(xr, j), sc) - mean;
        float v = (d * r) * g[j];
        if (has_beta) {
            v = v + b[j];
        }
        STORE_A(yr, j, v);
    }
}

__kernel void rudnn_softmax(const __global act_t *x, ulong x_off,
                            __global act_t *y, ulong y_off,
                            ulong row0, uint cols, __local float *scratch)
{
    const uint lid = get_local_id(0);
    const uint L = (uint)get_local_size(0);
    const ulong row = row0 + get_group_id(0);
    const __global act_t *xr = x + x_off + row * cols;
    __global act_t *yr = y + y_off + row * cols;

    /* NaN, +inf or an all -inf row: x - m is NaN somewhere, so the sum and
     * every output are NaN, by the arithmetic alone. */
    float m = -INFINITY;
    for (uint j = lid; j < cols; j += L) {
        m = fmax(m, LOAD_A(xr, j));
    }
    m = group_max(m, scratch);

#if RUDNN_DTYPE == 0
    /* F32: keep exp(x - m) in y (exact, x[j] is already read), then divide:
     * one exp per element instead of two. */
    float acc = 0.0f;
    for (uint j = lid; j < cols; j += L) {
        const float ex = exp(LOAD_A(xr, j) - m);
        STORE_A(yr, j, ex);
        acc = acc + ex;
    }
    const float sum = group_sum(acc, scratch);

    for (uint j = lid; j < cols; j += L) {
        STORE_A(yr, j, LOAD_A(yr, j) / sum);
    }
#else
    /* F16/BF16: storing exp(x - m) would round it to the dtype: recompute. */
    float acc = 0.0f;
    for (uint j = lid; j < cols; j += L) {
        acc = acc + exp(LOAD_A(xr, j) - m);
    }
    const float sum = group_sum(acc, scratch);

    for (uint j = lid; j < cols; j += L) {
        STORE_A(yr, j, exp(LOAD_A(xr, j) - m) / sum);
    }
#endif
}
