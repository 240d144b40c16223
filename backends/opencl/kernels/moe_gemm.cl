/* rudnn OpenCL helpers of the CLBlast SwiGLU experts (moe_gemm.c): dtype <-> F32
 * staging and the SwiGLU epilogue between the two SGEMMs.
 *
 * Built with -DRUDNN_DTYPE (1 F16 or 2 BF16; 0 F32 also compiles). The program
 * cache prepends kernels/common.cl (act_t, LOAD_A, STORE_A, bf16 helpers,
 * FP_CONTRACT off). OpenCL C 1.2 without cl_khr_fp16 (PoCL has none).
 *
 * Every kernel is element-wise over n items, one-dimensional, and takes
 * group0 (the first work-group of this launch; the host splits launches so
 * that one NDRange stays below 2^31 work-items). Buffers and element offsets
 * are separate arguments (no sub-buffers). */

#ifndef RUDNN_DTYPE
#error "moe_gemm.cl needs RUDNN_DTYPE"
#endif

ulong item_id(ulong group0)
{
    return (group0 + get_group_id(0)) * get_local_size(0) + get_local_id(0);
}

/* v rounded to the nearest f16 value (ties to even), returned as float: the
 * bits vstore_half_rte would store, read back. Integer arithmetic, so no half
 * variable (cl_khr_fp16) is needed. NaN stays NaN. */
float round_to_f16(float v)
{
    const uint u = as_uint(v);
    const uint sign = u & 0x80000000u;
    uint a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) {
        return v; /* inf, NaN */
    }
    if (a >= 0x477ff000u) {
        return as_float(sign | 0x7f800000u); /* >= 65520 (65504 + half an ulp, tie to even): inf */
    }
    if (a < 0x38800000u) {
        /* below 2^-14: an f16 subnormal, a multiple of 2^-24. Scaling by 2^24 is
         * exact and rint rounds to nearest even. */
        const float q = rint(as_float(a) * 16777216.0f);
        return as_float(sign | as_uint(q * 5.9604644775390625e-8f));
    }
    /* normal: keep 10 fraction bits, round the 13 dropped bits to nearest even
     * (a carry into the exponent is the right result) */
    a = (a + 0x0fffu + ((a >> 13) & 1u)) & 0xffffe000u;
    return as_float(sign | a);
}

#if RUDNN_DTYPE == 0
#define ROUND_A(v) (v)
#elif RUDNN_DTYPE == 1
#define ROUND_A(v) round_to_f16(v)
#else
#define ROUND_A(v) bf16_to_f32(f32_to_bf16(v))
#endif

/* dst[i] = (float)src[i], i < n. */
__kernel void rudnn_moe_gemm_to_f32(const __global act_t *src, ulong src_off, __global float *dst,
                                    ulong dst_off, ulong group0, ulong n)
{
    const ulong i = item_id(group0);
    if (i < n) {
        dst[dst_off + i] = LOAD_A(src + src_off, i);
    }
}

/* dst[i] = round_dtype(src[i]), i < n. */
__kernel void rudnn_moe_gemm_from_f32(const __global float *src, ulong src_off,
                                      __global act_t *dst, ulong dst_off, ulong group0, ulong n)
{
    const ulong i = item_id(group0);
    if (i < n) {
        STORE_A(dst + dst_off, i, src[src_off + i]);
    }
}

/* Expert e's weights as F32 in w32: gate [I, H] then up [I, H] (together the
 * [2I, H] B matrix of GEMM 1), then down [H, I] (GEMM 2). n = 3 * I * H,
 * ih = I * H. */
__kernel void rudnn_moe_gemm_weights_f32(const __global act_t *gate, ulong gate_off,
                                         const __global act_t *up, ulong up_off,
                                         const __global act_t *down, ulong down_off,
                                         __global float *w32, ulong w32_off, ulong group0,
                                         ulong ih, ulong expert)
{
    const ulong i = item_id(group0);
    if (i >= 3 * ih) {
        return;
    }
    const ulong base = expert * ih;
    float v;
    if (i < ih) {
        v = LOAD_A(gate + gate_off + base, i);
    } else if (i < 2 * ih) {
        v = LOAD_A(up + up_off + base, i - ih);
    } else {
        v = LOAD_A(down + down_off + base, i - 2 * ih);
    }
    w32[w32_off + i] = v;
}

/* In place on GEMM 1's output C [rows, 2I] (gate columns 0..I-1, up columns
 * I..2I-1): C[r, i] = round_dtype(silu(g) * u) for the n = rows * I items of
 * the rows that start at element c_off. The result is the activation A of
 * GEMM 2, read with leading dimension 2I; each item reads and writes only its
 * own elements. silu(g) = g / (1 + exp(-g)), as the Scalar kernels. */
__kernel void rudnn_moe_gemm_swiglu(__global float *c, ulong c_off, ulong group0, ulong n,
                                    uint inter)
{
    const ulong id = item_id(group0);
    if (id >= n) {
        return;
    }
    const ulong r = id / inter;
    const ulong i = id % inter;
    __global float *row = c + c_off + r * 2u * inter;
    const float g = row[i];
    const float u = row[inter + i];
    const float silu = g / (1.0f + exp(-g));
    row[i] = ROUND_A(silu * u);
}
