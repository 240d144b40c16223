/* libFuzzer target of the normalization family (rudnn/norm.h): layer_norm, rms_norm,
 * softmax_last_axis and add_rms_norm with arbitrary descriptors and options.
 *
 * Header bytes (fuzz_common.h has the slot format): 0 op, 1 dtype, 2 rank (1..4),
 * 3..5 leading dims (0..8), 6 last axis, 7 bit 0: layer_norm without beta, bit 1: rstd
 * shaped [rows] instead of the leading dims. The arguments then take one slot each, in
 * the order of the op's signature. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_common.h"

enum { OP_LAYER_NORM, OP_RMS_NORM, OP_SOFTMAX, OP_ADD_RMS_NORM, OP_COUNT };

typedef struct shapes {
    fz_spec_t x, gamma, rstd;
} shapes_t;

static int64_t last_axis(uint8_t byte)
{
    static const int64_t wide[] = {31, 32, 33, 64, 127, 128, 129, 255, 256, 257, 1000, 1024, 2048, 4096};
    return byte < 200 ? fz_small_dim(byte, 16, 0) : wide[byte % (sizeof wide / sizeof wide[0])];
}

static shapes_t intended_shapes(const fz_call_t *c)
{
    shapes_t s = {0};
    s.x.dtype = fz_float_dtype(fz_header_byte(c, 1));
    s.x.rank = 1 + fz_header_byte(c, 2) % 4;
    int64_t rows = 1;
    for (int i = 0; i < s.x.rank - 1; i++) {
        s.x.dims[i] = fz_small_dim(fz_header_byte(c, 3 + i), 8, 1);
        rows *= s.x.dims[i];
    }
    int64_t cols = last_axis(fz_header_byte(c, 6));
    if (rows * cols * 4 > FZ_BUFFER_BYTES) { /* keep it inside one buffer */
        for (int i = 0; i < s.x.rank - 1; i++)
            s.x.dims[i] = 1;
        rows = 1;
    }
    s.x.dims[s.x.rank - 1] = cols;

    s.gamma.dtype = RUDNN_F32;
    s.gamma.rank = 1;
    s.gamma.dims[0] = cols;

    s.rstd.dtype = RUDNN_F32;
    if (fz_header_byte(c, 7) & 2) {
        s.rstd.rank = 1;
        s.rstd.dims[0] = rows;
    } else {
        s.rstd.rank = s.x.rank - 1;
        for (int i = 0; i < s.rstd.rank; i++)
            s.rstd.dims[i] = s.x.dims[i];
    }
    return s;
}

/* The OpenCL norm program is built per dtype. */
void fz_warmup(void)
{
    for (uint8_t op = 0; op < OP_COUNT; op++)
        for (uint8_t dtype = 0; dtype < 3; dtype++)
            fz_run_header((const uint8_t[FZ_SLOT]){op, dtype});
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_call_t c;
    fz_begin(&c, data, size);
    shapes_t s = intended_shapes(&c);
    rudnn_queue_t q = fz_queue(&c);
    switch (fz_header_byte(&c, 0) % OP_COUNT) {
    case OP_LAYER_NORM: {
        const rudnn_tensor_t *x = fz_tensor(&c, &s.x, 0);
        const rudnn_tensor_t *gamma = fz_tensor(&c, &s.gamma, 0);
        const rudnn_tensor_t *beta = fz_optional_tensor(&c, &s.gamma, fz_header_byte(&c, 7) & 1);
        float eps = fz_float(&c, 1e-5f);
        const rudnn_tensor_t *y = fz_tensor(&c, &s.x, 1);
        fz_check(&c, "layer_norm", rudnn_layer_norm(q, x, gamma, beta, eps, y));
        break;
    }
    case OP_RMS_NORM: {
        const rudnn_tensor_t *x = fz_tensor(&c, &s.x, 0);
        const rudnn_tensor_t *gamma = fz_tensor(&c, &s.gamma, 0);
        float eps = fz_float(&c, 1e-6f);
        const rudnn_tensor_t *y = fz_tensor(&c, &s.x, 1);
        fz_check(&c, "rms_norm", rudnn_rms_norm(q, x, gamma, eps, y));
        break;
    }
    case OP_SOFTMAX: {
        const rudnn_tensor_t *x = fz_tensor(&c, &s.x, 0);
        const rudnn_tensor_t *y = fz_tensor(&c, &s.x, 1);
        fz_check(&c, "softmax_last_axis", rudnn_softmax_last_axis(q, x, y));
        break;
    }
    case OP_ADD_RMS_NORM: {
        const rudnn_tensor_t *a = fz_tensor(&c, &s.x, 0);
        const rudnn_tensor_t *residual = fz_tensor(&c, &s.x, 0);
        const rudnn_tensor_t *gamma = fz_tensor(&c, &s.gamma, 0);
        float eps = fz_float(&c, 1e-6f);
        const rudnn_tensor_t *y = fz_tensor(&c, &s.x, 1);
        const rudnn_tensor_t *rstd = fz_tensor(&c, &s.rstd, 1);
        const rudnn_tensor_t *x_out = fz_tensor(&c, &s.x, 1);
        fz_check(&c, "add_rms_norm", rudnn_add_rms_norm(q, a, residual, gamma, eps, y, rstd, x_out));
        break;
    }
    }
    return 0;
}
