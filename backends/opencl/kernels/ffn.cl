/* rudnn OpenCL FFN kernels (backends/hal/ffn.h): the tiled GEMM and the two element-wise
 * epilogues (act: bias, dequantization, activation, rounding or requantization; out: bias,
 * dequantization, output rounding).
 *
 * Two programs, picked with -DFFN_PART:
 *   1  gemm      -DFFN_A, -DFFN_B, -DFFN_C (dtype codes below), -DFFN_TILE, -DFFN_WPT: rudnn_ffn_gemm
 *   2  epilogue  (dtypes are run-time arguments: element-wise, memory-bound): rudnn_ffn_act,
 *                rudnn_ffn_out
 * Dtype codes (ffn.c passes them as -DFFN_DT_*, so the two cannot disagree): F32, F16, BF16,
 * I32, I64, I8, I4. OpenCL C 1.2 without cl_khr_fp16: F16 through vload_half / vstore_half_rte,
 * BF16 as ushort bits. The program cache prepends kernels/common.cl (bf16 helpers,
 * FP_CONTRACT off).
 *
 * Buffers and offsets are separate arguments (no sub-buffers): element offsets for the typed
 * pointers of the GEMM, byte offsets for the run-time typed ones of the epilogues. Every kernel
 * takes group0, the first work-group of this launch (the host splits launches below 2^31
 * work-items); launches are one-dimensional. Nothing uses atomics: every output element is
 * summed by one work-item in a fixed order, so results are bitwise reproducible. */

#ifndef FFN_PART
#error "FFN_PART must be 1 (gemm) or 2 (epilogue)"
#endif
#if !defined(FFN_DT_F32) || !defined(FFN_DT_F16) || !defined(FFN_DT_BF16) || !defined(FFN_DT_I32) ||      \
    !defined(FFN_DT_I64) || !defined(FFN_DT_I8) || !defined(FFN_DT_I4)
#error "ffn.cl needs the dtype codes FFN_DT_* (set by ffn.c)"
#endif

/* v rounded to the nearest F16 value (ties to even), as float; NaN stays NaN, past the F16
 * range gives inf. Integer arithmetic: no half variable (cl_khr_fp16) is needed. */
float ffn_round_f16(float v)
{
    const uint u = as_uint(v);
    const uint sign = u & 0x80000000u;
    uint mag = u & 0x7fffffffu;
    if (mag >= 0x7f800000u) {
        return v; /* inf, NaN */
    }
    if (mag >= 0x477ff000u) {
        return as_float(sign | 0x7f800000u); /* >= 65520: rounds past 65504 */
    }
    if (mag < 0x38800000u) {
        /* below 2^-14: an F16 subnormal, a multiple of 2^-24; the scaling is exact and rint
         * rounds half to even */
        const float q = rint(as_float(mag) * 16777216.0f);
        return as_float(sign | as_uint(q * 5.9604644775390625e-8f));
    }
    /* normal: drop 13 fraction bits, rounding half to even (a carry into the exponent is right) */
    mag = (mag + 0x0fffu + ((mag >> 13) & 1u)) & 0xffffe000u;
    return as_float(sign | mag);
}

float ffn_round_bf16(float v) { return bf16_to_f32(f32_to_bf16(v)); }

ulong ffn_item(ulong group0)
{
    return (group0 + get_group_id(0)) * get_local_size(0) + get_local_id(0);
}

#if FFN_PART == 1
/* ================================================================================
 * Part 1: C [m, n] = A [m, k] B [k, n], row-major, one FFN_TILE x FFN_TILE tile of C per
 * work-group of (FFN_TILE / FFN_WPT)^2 work-items, each computing FFN_WPT x FFN_WPT outputs
 * (rows ty + i R, columns tx + j R, R = FFN_TILE / FFN_WPT: neighbouring work-items touch
 * neighbouring columns). K advances FFN_TK at a time through local-memory tiles; edges are
 * padded with zeros, so any m, n, k works. Each output is one work-item's sum over k in
 * ascending order.
 *
 * FFN_A: F32, F16, BF16 or I8; FFN_B: FFN_A, or I8 / I4 with F16 / BF16 A (weight-only:
 * dequantized on load, w' = round_A((w + offset[g][j]) * scale[g][j]) in FP32, scale and
 * offset [groups, n] in A's dtype). I8 x I8 sums in int (exact: |C| <= 65535 * 128 * 128).
 * FFN_C: I32 for I8 A; else F32, or A's dtype (the FP32 sum rounded once, to nearest even).
 * ================================================================================ */

#if !defined(FFN_A) || !defined(FFN_B) || !defined(FFN_C) || !defined(FFN_TILE) || !defined(FFN_WPT)
#error "the gemm program needs FFN_A, FFN_B, FFN_C, FFN_TILE and FFN_WPT (set by ffn.c)"
#endif

#define TS FFN_TILE
#define WPT FFN_WPT
#define RTS (FFN_TILE / FFN_WPT)
#define FFN_TK 16

#if FFN_A == FFN_DT_F32
#define a_t float
#define LOAD_AV(p, i) ((p)[i])
#define ROUND_AV(v) (v)
#elif FFN_A == FFN_DT_F16
#define a_t half
#define LOAD_AV(p, i) vload_half((i), (p))
#define ROUND_AV(v) ffn_round_f16(v)
#elif FFN_A == FFN_DT_BF16
#define a_t ushort
#define LOAD_AV(p, i) bf16_to_f32((p)[i])
#define ROUND_AV(v) ffn_round_bf16(v)
#elif FFN_A == FFN_DT_I8
#define a_t char
#define LOAD_AV(p, i) ((int)(p)[i])
#else
#error "FFN_A must be F32, F16, BF16 or I8"
#endif

#if FFN_A == FFN_DT_I8
#if FFN_B != FFN_DT_I8
#error "I8 A takes I8 B"
#endif
#if FFN_C != FFN_DT_I32
#error "I8 A writes I32 C"
#endif
#define acc_t int
#define MAC(acc, x, y) ((acc) + (x) * (y))
#else
#define acc_t float
/* acc + x y: fused where the device says fma is fast, else multiply then add; fixed per
 * device, so results stay reproducible. */
#ifdef FP_FAST_FMAF
#define MAC(acc, x, y) fma((x), (y), (acc))
#else
#define MAC(acc, x, y) ((acc) + (x) * (y))
#endif
#endif

/* c_t / STORE_C: C's storage, written from the accumulator */
#if FFN_C == FFN_DT_I32
#define c_t int
#define STORE_C(p, i, v) ((p)[i] = (v))
#elif FFN_C == FFN_DT_F32
#define c_t float
#define STORE_C(p, i, v) ((p)[i] = (v))
#elif FFN_C == FFN_DT_F16 && FFN_A == FFN_DT_F16
#define c_t half
#define STORE_C(p, i, v) vstore_half_rte((v), (i), (p))
#elif FFN_C == FFN_DT_BF16 && FFN_A == FFN_DT_BF16
#define c_t ushort
#define STORE_C(p, i, v) ((p)[i] = f32_to_bf16(v))
#else
#error "FFN_C must be I32 (I8 A), F32, or A's dtype"
#endif

#if FFN_B == FFN_A
#define WEIGHT_ONLY 0
#define b_t a_t
#elif FFN_B == FFN_DT_I8 && (FFN_A == FFN_DT_F16 || FFN_A == FFN_DT_BF16)
#define WEIGHT_ONLY 1
#define b_t char
#elif FFN_B == FFN_DT_I4 && (FFN_A == FFN_DT_F16 || FFN_A == FFN_DT_BF16)
#define WEIGHT_ONLY 1
#define b_t uchar
#else
#error "FFN_B must be FFN_A, or I8 / I4 with F16 / BF16 A"
#endif

#if WEIGHT_ONLY
/* The stored integer weight (row kk, column j) of the [k, n] matrix. */
int ffn_weight(const __global b_t *b, uint kk, uint j, uint n)
{
    const ulong i = (ulong)kk * n + j;
#if FFN_B == FFN_DT_I8
    return (int)b[i];
#else
    /* two values a byte along n, the even column in the low nibble; two's complement */
    const uint byte = b[i >> 1];
    const int nib = (int)((j & 1u) ? (byte >> 4) : (byte & 15u));
    return nib - ((nib & 8) << 1);
#endif
}
#endif

/* B (row kk, column j) as the product reads it: the stored value, or the dequantized weight. */
#if WEIGHT_ONLY
#define LOAD_B(kk, j) ffn_dequant(b, scale, offset, kk, j, n, group_rows, has_offset)
float ffn_dequant(const __global b_t *b, const __global a_t *scale, const __global a_t *offset, uint kk,
                  uint j, uint n, uint group_rows, uint has_offset)
{
    const ulong g = (ulong)(kk / group_rows) * n + j;
    const float o = has_offset ? LOAD_AV(offset, g) : 0.0f;
    const float w = ((float)ffn_weight(b, kk, j, n) + o) * LOAD_AV(scale, g);
    return ROUND_AV(w);
}
#else
#define LOAD_B(kk, j) LOAD_AV(b, (ulong)(kk) * n + (j))
#endif

/* tiles_n = ceil(n / TS); group_rows = k / groups (weight-only; else unused). scale and offset
 * are placeholders (never read) outside weight-only, offset also without has_offset. */
__kernel void rudnn_ffn_gemm(const __global a_t *a, ulong a_off, const __global b_t *b, ulong b_off,
                             const __global a_t *scale, ulong scale_off, const __global a_t *offset,
                             ulong offset_off, __global c_t *c, ulong c_off, ulong group0, uint m, uint n,
                             uint k, uint tiles_n, uint group_rows, uint has_offset)
{
    __local acc_t as[FFN_TK][TS + 1]; /* A tile, transposed: as[kk][row] */
    __local acc_t bs[FFN_TK][TS];     /* B tile: bs[kk][column] */

    a += a_off;
    b += b_off;
    c += c_off;
#if WEIGHT_ONLY
    scale += scale_off;
    offset += offset_off;
#else
    (void)scale;
    (void)scale_off;
    (void)offset;
    (void)offset_off;
    (void)group_rows;
    (void)has_offset;
#endif
    const uint lid = get_local_id(0);
    const uint L = RTS * RTS;
    const uint tx = lid % RTS, ty = lid / RTS;
    const ulong tile = group0 + get_group_id(0);
    const uint m0 = (uint)(tile / tiles_n) * TS;
    const uint n0 = (uint)(tile % tiles_n) * TS;

    acc_t acc[WPT][WPT];
    for (uint i = 0; i < WPT; i++) {
        for (uint j = 0; j < WPT; j++) {
            acc[i][j] = 0;
        }
    }
    for (uint k0 = 0; k0 < k; k0 += FFN_TK) {
        /* consecutive work-items read consecutive k of A's rows and consecutive n of B's */
        for (uint e = lid; e < TS * FFN_TK; e += L) {
            const uint r = e / FFN_TK, kk = e % FFN_TK;
            const uint gr = m0 + r, gk = k0 + kk;
            as[kk][r] = (gr < m && gk < k) ? LOAD_AV(a, (ulong)gr * k + gk) : 0;
        }
        for (uint e = lid; e < TS * FFN_TK; e += L) {
            const uint kk = e / TS, col = e % TS;
            const uint gk = k0 + kk, gn = n0 + col;
            bs[kk][col] = (gk < k && gn < n) ? LOAD_B(gk, gn) : 0;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint kk = 0; kk < FFN_TK; kk++) {
            acc_t ar[WPT], br[WPT];
            for (uint i = 0; i < WPT; i++) {
                ar[i] = as[kk][ty + i * RTS];
                br[i] = bs[kk][tx + i * RTS];
            }
            for (uint i = 0; i < WPT; i++) {
                for (uint j = 0; j < WPT; j++) {
                    acc[i][j] = MAC(acc[i][j], ar[i], br[j]);
                }
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (uint i = 0; i < WPT; i++) {
        const uint r = m0 + ty + i * RTS;
        for (uint j = 0; j < WPT; j++) {
            const uint col = n0 + tx + j * RTS;
            if (r < m && col < n) {
                STORE_C(c, (ulong)r * n + col, acc[i][j]);
            }
        }
    }
}

#elif FFN_PART == 2
/* ================================================================================
 * Part 2: the element-wise epilogues, one work-item per output element. The dtypes of h, the
 * bias, the deq scale and the output are run-time arguments (uniform branches).
 * ================================================================================ */

/* Element i of a float-valued array of dtype code dt (F32, F16, BF16, or I64 holding an F32's
 * bits in its low 32 bits: the packed deq scale). */
float ffn_load_f(const __global uchar *p, ulong i, uint dt)
{
    if (dt == FFN_DT_F16) {
        return vload_half(i, (const __global half *)p);
    }
    if (dt == FFN_DT_BF16) {
        return bf16_to_f32(((const __global ushort *)p)[i]);
    }
    if (dt == FFN_DT_I64) {
        return as_float((uint)(((const __global ulong *)p)[i] & 0xffffffffu));
    }
    return ((const __global float *)p)[i];
}

/* h (+ bias) (* deq) of column col of row r, in FP32: I32 h and its I32 bias summed exactly
 * (64-bit), then converted (to nearest even); F32, F16 or BF16 h read as float. deq_len 0: no
 * dequantization. */
float ffn_value(const __global uchar *h, uint h_dt, ulong r, ulong col, ulong n, const __global uchar *bias,
                uint bias_dt, uint has_bias, const __global uchar *deq, uint deq_dt, ulong deq_len)
{
    const ulong i = r * n + col;
    float v;
    if (h_dt == FFN_DT_I32) {
        long s = (long)((const __global int *)h)[i];
        if (has_bias) {
            s += (long)((const __global int *)bias)[col];
        }
        v = convert_float_rte(s);
    } else {
        v = ffn_load_f(h, i, h_dt);
        if (has_bias) {
            v = v + ffn_load_f(bias, col, bias_dt);
        }
    }
    if (deq_len > 0) {
        v = v * ffn_load_f(deq, deq_len == 1 ? 0 : col, deq_dt);
    }
    return v;
}

/* x sigmoid(t x) without overflow (t x < 0 takes e / (1 + e), e = exp(t x) <= 1); the
 * infinities give the limits, inf and 0 (-inf * 0 would be NaN), as the reference. */
float ffn_x_sigmoid(float x, float t)
{
    if (isinf(x)) {
        return x > 0.0f ? x : 0.0f;
    }
    const float z = t * x;
    if (z >= 0.0f) {
        return x / (1.0f + exp(-z));
    }
    const float e = exp(z);
    return x * (e / (1.0f + e));
}

/* The activation act (ffn.h's enum: gelu 0, fastgelu 1, relu 2, silu 3, geglu 4, swiglu 5, reglu
 * 6; the gated ones apply their gate's function). NaN stays NaN. */
float ffn_activate(float x, uint act)
{
    if (isnan(x)) {
        return x;
    }
    switch (act) {
    case 0:
    case 4:
        /* 0.5 x erfc(-x / sqrt 2) = 0.5 x (1 + erf(x / sqrt 2)), without the cancellation of
         * 1 + erf for x << 0; gelu(-inf) = 0 */
        if (isinf(x)) {
            return x > 0.0f ? x : 0.0f;
        }
        return 0.5f * x * erfc(x * -0.70710678118654752440f);
    case 1:
        return ffn_x_sigmoid(x, 1.702f);
    case 3:
    case 5:
        return ffn_x_sigmoid(x, 1.0f);
    default: /* relu, reglu */
        return x > 0.0f ? x : 0.0f;
    }
}

float ffn_round_to(float v, uint dt)
{
    if (dt == FFN_DT_F16) {
        return ffn_round_f16(v);
    }
    if (dt == FFN_DT_BF16) {
        return ffn_round_bf16(v);
    }
    return v;
}

/* Stores v at element i of a float array of dtype dt (rounded to nearest even). */
void ffn_store_f(__global uchar *p, ulong i, uint dt, float v)
{
    if (dt == FFN_DT_F16) {
        vstore_half_rte(v, i, (__global half *)p);
    } else if (dt == FFN_DT_BF16) {
        ((__global ushort *)p)[i] = f32_to_bf16(v);
    } else {
        ((__global float *)p)[i] = v;
    }
}

/* a [rows, k2] from h [rows, n1] (hal/ffn.h rudnn_ffn_act_plan_t): v = round_pre(h (+ bias)
 * (* deq)); non-gated a[j] = f(v[j]), gated a[j] = v[j] f(v[k2 + j]) (value first, gate last);
 * then a rounded to out_dt, or for I8 requantized: rint(a scale + offset), saturated to
 * [-128, 127], NaN to 0. Byte offsets; bias, deq, scale and offset are placeholders where the
 * plan takes none. */
__kernel void rudnn_ffn_act(const __global uchar *h, ulong h_off, const __global uchar *bias, ulong bias_off,
                            const __global uchar *deq, ulong deq_off, const __global float *scale,
                            ulong scale_off, const __global float *offset, ulong offset_off,
                            __global uchar *out, ulong out_off, ulong group0, ulong rows, ulong n1, ulong k2,
                            uint act, uint h_dt, uint has_bias, uint bias_dt, uint deq_dt, ulong deq_len,
                            uint pre_dt, uint out_dt, ulong scale_len)
{
    const ulong id = ffn_item(group0);
    if (id >= rows * k2) {
        return;
    }
    const ulong r = id / k2, j = id % k2;
    h += h_off;
    bias += bias_off;
    deq += deq_off;
    out += out_off;
    float a;
    const float v = ffn_round_to(ffn_value(h, h_dt, r, j, n1, bias, bias_dt, has_bias, deq, deq_dt, deq_len),
                                 pre_dt);
    if (act >= 4) {
        const float g = ffn_round_to(
            ffn_value(h, h_dt, r, k2 + j, n1, bias, bias_dt, has_bias, deq, deq_dt, deq_len), pre_dt);
        a = v * ffn_activate(g, act);
    } else {
        a = ffn_activate(v, act);
    }
    if (out_dt == FFN_DT_I8) {
        const float q = a * scale[scale_off + (scale_len == 1 ? 0 : j)] + offset[offset_off];
        char qi;
        if (isnan(q)) {
            qi = 0;
        } else {
            qi = (char)clamp(rint(q), -128.0f, 127.0f); /* rint: half to even; inf saturates */
        }
        ((__global char *)out)[id] = qi;
    } else {
        ffn_store_f(out, id, out_dt, a);
    }
}

/* y [rows, n] = round_y(h (+ bias) (* deq)). */
__kernel void rudnn_ffn_out(const __global uchar *h, ulong h_off, const __global uchar *bias, ulong bias_off,
                            const __global uchar *deq, ulong deq_off, __global uchar *y, ulong y_off, ulong group0,
                            ulong rows, ulong n, uint h_dt, uint has_bias, uint bias_dt, uint deq_dt, ulong deq_len,
                            uint y_dt)
{
    const ulong id = ffn_item(group0);
    if (id >= rows * n) {
        return;
    }
    h += h_off;
    bias += bias_off;
    deq += deq_off;
    y += y_off;
    const float v = ffn_value(h, h_dt, id / n, id % n, n, bias, bias_dt, has_bias, deq, deq_dt, deq_len);
    ffn_store_f(y, id, y_dt, v);
}

#else
#error "FFN_PART must be 1 (gemm) or 2 (epilogue)"
#endif
