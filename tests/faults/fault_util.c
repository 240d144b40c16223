/* Device tensors for the fault cases: inputs from a fixed pattern, outputs full of a sentinel. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_case.h"

rudnn_status_t fault_buffer(const fault_env_t *env, size_t bytes, const void *init, rudnn_buffer_t *out)
{
    rudnn_buffer_t b = NULL;
    rudnn_status_t st = rudnn_buffer_create(env->ctx, bytes, &b);
    if (st)
        return st;
    uint8_t *fill = NULL;
    if (!init) {
        fill = malloc(bytes);
        if (!fill) {
            rudnn_buffer_destroy(b);
            return RUDNN_STATUS_ALLOC_FAILED;
        }
        memset(fill, FAULT_SENTINEL, bytes);
    }
    st = rudnn_buffer_write(env->queue, b, 0, init ? init : fill, bytes);
    free(fill);
    if (st) {
        rudnn_buffer_destroy(b);
        return st;
    }
    *out = b;
    return RUDNN_STATUS_SUCCESS;
}

static int64_t numel(int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    return n;
}

rudnn_status_t fault_float_tensor(const fault_env_t *env, rudnn_dtype_t dtype, int rank, const int64_t *dims,
                                  unsigned seed, rudnn_tensor_t *t)
{
    size_t n = (size_t)numel(rank, dims), elem = rudnn_dtype_size(dtype);
    float *v = malloc((n ? n : 1) * sizeof *v);
    void *raw = malloc((n ? n : 1) * elem);
    if (!v || !raw) {
        free(v);
        free(raw);
        return RUDNN_STATUS_ALLOC_FAILED;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = (float)sin(0.37 * (double)i + (double)seed) * 0.75f;
    rudnn_convert_from_f32(dtype, v, raw, n);
    rudnn_buffer_t b = NULL;
    rudnn_status_t st = fault_buffer(env, (n ? n : 1) * elem, raw, &b);
    free(v);
    free(raw);
    if (st)
        return st;
    return rudnn_tensor_init(t, b, 0, dtype, rank, dims);
}

rudnn_status_t fault_f32_tensor(const fault_env_t *env, int rank, const int64_t *dims, unsigned seed,
                                rudnn_tensor_t *t)
{
    return fault_float_tensor(env, RUDNN_F32, rank, dims, seed, t);
}

rudnn_status_t fault_out_tensor(const fault_env_t *env, rudnn_dtype_t dtype, int rank, const int64_t *dims,
                                rudnn_tensor_t *t)
{
    size_t bytes = (size_t)numel(rank, dims) * rudnn_dtype_size(dtype);
    rudnn_buffer_t b = NULL;
    rudnn_status_t st = fault_buffer(env, bytes ? bytes : 1, NULL, &b);
    if (st)
        return st;
    return rudnn_tensor_init(t, b, 0, dtype, rank, dims);
}

rudnn_status_t fault_fill_sentinel(const fault_env_t *env, const rudnn_tensor_t *t)
{
    size_t bytes = rudnn_buffer_size(t->buffer);
    uint8_t *fill = malloc(bytes);
    if (!fill)
        return RUDNN_STATUS_ALLOC_FAILED;
    memset(fill, FAULT_SENTINEL, bytes);
    rudnn_status_t st = rudnn_buffer_write(env->queue, t->buffer, 0, fill, bytes);
    free(fill);
    return st;
}

int fault_is_sentinel(const fault_env_t *env, const rudnn_tensor_t *t, const char *arg, char *why, size_t cap)
{
    size_t bytes = rudnn_buffer_size(t->buffer);
    uint8_t *got = malloc(bytes);
    if (!got) {
        snprintf(why, cap, "%s: out of host memory reading it back", arg);
        return 0;
    }
    rudnn_status_t st = rudnn_buffer_read(env->queue, t->buffer, 0, got, bytes);
    if (st) {
        snprintf(why, cap, "%s: read back failed: %s (%s)", arg, rudnn_status_string(st), rudnn_last_error());
        free(got);
        return 0;
    }
    for (size_t i = 0; i < bytes; i++) {
        if (got[i] != FAULT_SENTINEL) {
            snprintf(why, cap, "%s: byte %zu of %zu written (0x%02x) by a call that failed", arg, i, bytes, got[i]);
            free(got);
            return 0;
        }
    }
    free(got);
    return 1;
}

rudnn_status_t fault_append_tensor(const fault_env_t *env, const rudnn_tensor_t *t, uint8_t **bytes,
                                   size_t *size)
{
    size_t n = rudnn_tensor_bytes(t);
    uint8_t *grown = realloc(*bytes, *size + n + 1);
    if (!grown)
        return RUDNN_STATUS_ALLOC_FAILED;
    *bytes = grown;
    rudnn_status_t st = n ? rudnn_tensor_read(env->queue, t, grown + *size, n) : RUDNN_STATUS_SUCCESS;
    if (!st)
        *size += n;
    return st;
}

void fault_drop_tensor(rudnn_tensor_t *t)
{
    if (t->buffer)
        rudnn_buffer_destroy(t->buffer);
    memset(t, 0, sizeof *t);
}
