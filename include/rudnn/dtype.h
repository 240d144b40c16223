/* Element types and host-side conversions. */
#ifndef RUDNN_DTYPE_H
#define RUDNN_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "rudnn/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rudnn_dtype {
    RUDNN_F32 = 0,
    RUDNN_F16 = 1,
    RUDNN_BF16 = 2,
    RUDNN_U32 = 3,
    RUDNN_I32 = 4,
    RUDNN_I64 = 5,
    RUDNN_I8 = 6,  /* quantized storage (FFN int8) */
    RUDNN_I4 = 7,  /* packed two per byte, low nibble first (FFN int4) */
    RUDNN_BOOL = 8, /* one byte, nonzero = true (attention masks) */
    RUDNN_DTYPE_COUNT
} rudnn_dtype_t;

/* "f32", "bf16", ...; "invalid" for an unknown value. */
RUDNN_API const char *rudnn_dtype_name(rudnn_dtype_t dtype);

/* Bytes per element; 0 for I4 (sub-byte: use rudnn_dtype_storage_bytes) and
 * for invalid values. */
RUDNN_API size_t rudnn_dtype_size(rudnn_dtype_t dtype);

/* Bytes needed to store n elements (rounds I4 up to whole bytes). */
RUDNN_API size_t rudnn_dtype_storage_bytes(rudnn_dtype_t dtype, size_t n);

/* 1 for F32/F16/BF16. */
RUDNN_API int rudnn_dtype_is_float(rudnn_dtype_t dtype);

/* 1 for I8/I4 (quantized storage types). */
RUDNN_API int rudnn_dtype_is_quantized(rudnn_dtype_t dtype);

/* Round-to-nearest-even conversions; NaN stays NaN (quiet), overflow gives inf. */
RUDNN_API uint16_t rudnn_f32_to_f16(float value);
RUDNN_API float rudnn_f16_to_f32(uint16_t bits);
RUDNN_API uint16_t rudnn_f32_to_bf16(float value);
RUDNN_API float rudnn_bf16_to_f32(uint16_t bits);

/* Array forms: convert n values between F32 and dtype (F32, F16 or BF16). */
RUDNN_API void rudnn_convert_from_f32(rudnn_dtype_t dtype, const float *src, void *dst, size_t n);
RUDNN_API void rudnn_convert_to_f32(rudnn_dtype_t dtype, const void *src, float *dst, size_t n);

#ifdef __cplusplus
}
#endif
#endif
