/* dtype metadata and round-to-nearest-even host conversions. */
#include <math.h>
#include <string.h>

#include "internal.h"

const char *rudnn_dtype_name(rudnn_dtype_t dtype)
{
    static const char *const names[RUDNN_DTYPE_COUNT] = {"f32", "f16", "bf16", "u32", "i32",
                                                         "i64", "i8",  "i4",   "bool"};
    if ((unsigned)dtype >= RUDNN_DTYPE_COUNT)
        return "invalid";
    return names[dtype];
}

size_t rudnn_dtype_size(rudnn_dtype_t dtype)
{
    switch (dtype) {
    case RUDNN_F32: case RUDNN_U32: case RUDNN_I32: return 4;
    case RUDNN_F16: case RUDNN_BF16: return 2;
    case RUDNN_I64: return 8;
    case RUDNN_I8: case RUDNN_BOOL: return 1;
    default: return 0;
    }
}

size_t rudnn_dtype_storage_bytes(rudnn_dtype_t dtype, size_t n)
{
    if (dtype == RUDNN_I4)
        return (n + 1) / 2;
    return n * rudnn_dtype_size(dtype);
}

int rudnn_dtype_is_float(rudnn_dtype_t dtype)
{
    return dtype == RUDNN_F32 || dtype == RUDNN_F16 || dtype == RUDNN_BF16;
}

int rudnn_dtype_is_quantized(rudnn_dtype_t dtype) { return dtype == RUDNN_I8 || dtype == RUDNN_I4; }

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t rudnn_f32_to_bf16(float value)
{
    uint32_t u = f32_bits(value);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign, force quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float rudnn_bf16_to_f32(uint16_t bits) { return bits_f32((uint32_t)bits << 16); }

uint16_t rudnn_f32_to_f16(float value)
{
    uint32_t u = f32_bits(value);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* >= 65520 rounds to inf (and inf itself) */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* below the smallest normal half (2^-14): subnormal or zero */
        if (a < 0x33000000u) /* < 2^-25: rounds to zero */
            return sign;
        uint32_t exp = a >> 23;
        uint32_t mant = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - exp; /* 14..24 */
        uint32_t half = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1u);
        uint32_t mid = 1u << (shift - 1u);
        if (rem > mid || (rem == mid && (half & 1u)))
            half++;
        return (uint16_t)(sign | half);
    }
    /* normal: rebias exponent 127 -> 15 and round the 13 dropped bits to even */
    uint32_t r = a - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

float rudnn_f16_to_f32(uint16_t bits)
{
    uint32_t sign = (uint32_t)(bits & 0x8000u) << 16;
    uint32_t exp = (bits >> 10) & 0x1fu;
    uint32_t mant = bits & 0x3ffu;
    if (exp == 0) {
        float v = ldexpf((float)mant, -24);
        return sign ? -v : v;
    }
    if (exp == 31)
        return bits_f32(sign | 0x7f800000u | (mant << 13));
    return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

void rudnn_convert_from_f32(rudnn_dtype_t dtype, const float *src, void *dst, size_t n)
{
    if (dtype == RUDNN_F32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    uint16_t *out = dst;
    for (size_t i = 0; i < n; i++)
        out[i] = dtype == RUDNN_F16 ? rudnn_f32_to_f16(src[i]) : rudnn_f32_to_bf16(src[i]);
}

void rudnn_convert_to_f32(rudnn_dtype_t dtype, const void *src, float *dst, size_t n)
{
    if (dtype == RUDNN_F32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    const uint16_t *in = src;
    for (size_t i = 0; i < n; i++)
        dst[i] = dtype == RUDNN_F16 ? rudnn_f16_to_f32(in[i]) : rudnn_bf16_to_f32(in[i]);
}
