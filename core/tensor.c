/* Tensor descriptors. */
#include <string.h>

#include "internal.h"

rudnn_status_t rudnn_tensor_init(rudnn_tensor_t *t, rudnn_buffer_t buffer, size_t offset,
                                 rudnn_dtype_t dtype, int rank, const int64_t *dims)
{
    rudnn_clear_error();
    if (!t)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "tensor_init: tensor is NULL");
    if (rank < 0 || rank > RUDNN_MAX_RANK)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "tensor_init: rank %d is outside 0..%d", rank,
                               RUDNN_MAX_RANK);
    if (rank > 0 && !dims)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "tensor_init: dims is NULL for rank %d", rank);
    if ((unsigned)dtype >= RUDNN_DTYPE_COUNT)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "tensor_init: dtype %d is not a rudnn dtype",
                               (int)dtype);
    int64_t numel = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "tensor_init: dims[%d] = %lld is negative", i,
                                   (long long)dims[i]);
        if (dims[i] > 1 && numel > INT64_MAX / dims[i])
            return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE,
                                   "tensor_init: the element count overflows 64 bits at dims[%d]", i);
        numel *= dims[i] ? dims[i] : 1;
    }
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->rank = rank;
    t->buffer = buffer;
    t->offset = offset;
    int64_t stride = 1;
    for (int i = rank - 1; i >= 0; i--) {
        t->dims[i] = dims[i];
        t->strides[i] = stride;
        stride *= dims[i] > 0 ? dims[i] : 1;
    }
    return RUDNN_STATUS_SUCCESS;
}

int64_t rudnn_tensor_numel(const rudnn_tensor_t *t)
{
    if (!t)
        return 0;
    uint64_t n = 1; /* unsigned: a hand-filled descriptor must not overflow into UB */
    for (int i = 0; i < t->rank; i++)
        n *= (uint64_t)t->dims[i];
    return (int64_t)n;
}

size_t rudnn_tensor_bytes(const rudnn_tensor_t *t)
{
    if (!t)
        return 0;
    return rudnn_dtype_storage_bytes(t->dtype, (size_t)rudnn_tensor_numel(t));
}

int rudnn_tensor_is_contiguous(const rudnn_tensor_t *t)
{
    if (!t)
        return 0;
    if (rudnn_tensor_numel(t) == 0)
        return 1; /* an empty tensor has no layout to violate */
    uint64_t stride = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        if (t->dims[i] != 1 && (uint64_t)t->strides[i] != stride)
            return 0;
        stride *= (uint64_t)t->dims[i];
    }
    return 1;
}

static rudnn_status_t tensor_copy(const char *op, rudnn_queue_t q, const rudnn_tensor_t *t,
                                  const void *src, void *dst, size_t bytes)
{
    rudnn_clear_error();
    if (!q || !t)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is NULL", op, q ? "tensor" : "queue");
    if (!rudnn_tensor_is_contiguous(t))
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: tensor must be contiguous", op);
    if (bytes != rudnn_tensor_bytes(t))
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %zu host bytes given, tensor has %zu", op,
                               bytes, rudnn_tensor_bytes(t));
    return src ? rudnn_buffer_write(q, t->buffer, t->offset, src, bytes)
               : rudnn_buffer_read(q, t->buffer, t->offset, dst, bytes);
}

rudnn_status_t rudnn_tensor_write(rudnn_queue_t q, const rudnn_tensor_t *t, const void *host,
                                  size_t bytes)
{
    if (!host)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "tensor_write: host is NULL");
    return tensor_copy("tensor_write", q, t, host, NULL, bytes);
}

rudnn_status_t rudnn_tensor_read(rudnn_queue_t q, const rudnn_tensor_t *t, void *host, size_t bytes)
{
    if (!host)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "tensor_read: host is NULL");
    return tensor_copy("tensor_read", q, t, NULL, host, bytes);
}
