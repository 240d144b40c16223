/* Tensor descriptors. */
#include <stdint.h>
#include <stdio.h>
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

/* A rank the dims array can hold: helpers take hand-filled descriptors. */
static int rank_valid(const rudnn_tensor_t *t) { return t && t->rank >= 0 && t->rank <= RUDNN_MAX_RANK; }

int64_t rudnn_tensor_numel(const rudnn_tensor_t *t)
{
    if (!rank_valid(t))
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
    if (!rank_valid(t))
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

/* "[a, b, c]" of n int64 values into buf. */
static const char *int64_list(const int64_t *v, int n, char *buf, size_t cap)
{
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)v[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
    return buf;
}

/* The first two parts of the stride rule (rudnn/status.h): strides that describe a view
 * (BAD_SHAPE), the whole view inside the buffer (OUT_OF_BOUNDS). *span gets the bytes from the
 * first element through the last (0 when empty). */
static rudnn_status_t check_view(const char *op, const char *arg, const rudnn_tensor_t *t, size_t buffer_size,
                                 size_t *span_bytes)
{
    if (t->rank < 0 || t->rank > RUDNN_MAX_RANK)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has rank %d, outside 0..%d", op, arg,
                               t->rank, RUDNN_MAX_RANK);
    int empty = 0;
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] < 0)
            return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has negative dims[%d] = %lld", op,
                                   arg, i, (long long)t->dims[i]);
        empty |= t->dims[i] == 0;
    }
    /* the shape and strides for a message, formatted only when one is made (a call's checks pass
     * far more often than they fail: formatting them up front was most of an op call's host time) */
    char shape[200], strides[200];
#define SHAPE_STR int64_list(t->dims, t->rank, shape, sizeof shape)
#define STRIDES_STR int64_list(t->strides, t->rank, strides, sizeof strides)

    /* extent: 1 + the farthest element's distance from the first, in elements (0 when empty;
     * the strides of an empty tensor and of dims of size 1 are never used) */
    uint64_t extent = 0;
    int too_far = 0;
    if (!empty) {
        int order[RUDNN_MAX_RANK], n = 0;
        for (int i = 0; i < t->rank; i++) {
            if (t->dims[i] == 1)
                continue;
            if (t->strides[i] < 1)
                return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE,
                                       "%s: %s has stride %lld for dims[%d] of size %lld: the stride of "
                                       "a dim larger than 1 must be positive (shape %s, strides %s)",
                                       op, arg, (long long)t->strides[i], i, (long long)t->dims[i],
                                       SHAPE_STR, STRIDES_STR);
            int k = n++;
            for (; k > 0 && t->strides[order[k - 1]] > t->strides[i]; k--)
                order[k] = order[k - 1];
            order[k] = i;
        }
        /* by increasing stride, each stride must step over everything the smaller ones reach:
         * then no two elements share an address */
        extent = 1;
        for (int k = 0; k < n && !too_far; k++) {
            int i = order[k];
            uint64_t stride = (uint64_t)t->strides[i], span;
            if (stride < extent)
                return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE,
                                       "%s: %s has overlapping elements: dims[%d] (size %lld) has stride "
                                       "%llu, less than the %llu elements the dims of smaller stride "
                                       "span (shape %s, strides %s)",
                                       op, arg, i, (long long)t->dims[i], (unsigned long long)stride,
                                       (unsigned long long)extent, SHAPE_STR, STRIDES_STR);
            too_far = __builtin_mul_overflow(stride, (uint64_t)t->dims[i] - 1, &span) ||
                      __builtin_add_overflow(extent, span, &extent);
        }
    }
    size_t elem_max = rudnn_dtype_size(t->dtype) ? rudnn_dtype_size(t->dtype) : 1;
    too_far |= extent > SIZE_MAX / elem_max;
    size_t bytes = too_far ? SIZE_MAX : rudnn_dtype_storage_bytes(t->dtype, (size_t)extent);
    if (too_far || t->offset > buffer_size || bytes > buffer_size - t->offset) {
        if (too_far)
            return rudnn_set_error(RUDNN_STATUS_OUT_OF_BOUNDS,
                                   "%s: %s spans more bytes than any buffer holds (shape %s, strides %s)",
                                   op, arg, SHAPE_STR, STRIDES_STR);
        return rudnn_set_error(RUDNN_STATUS_OUT_OF_BOUNDS,
                               "%s: %s needs bytes [%zu, %zu) but its buffer has %zu bytes", op, arg,
                               t->offset, t->offset + bytes, buffer_size);
    }
    *span_bytes = bytes;
    return RUDNN_STATUS_SUCCESS;
#undef SHAPE_STR
#undef STRIDES_STR
}

rudnn_status_t rudnn_check_layout(const char *op, const char *arg, const rudnn_tensor_t *t,
                                  size_t buffer_size)
{
    size_t span;
    RUDNN_TRY(check_view(op, arg, t, buffer_size, &span));
    if (!rudnn_tensor_is_contiguous(t)) {
        char shape[200], strides[200];
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED,
                               "%s: %s must be contiguous (row-major strides); strided views are not "
                               "supported (shape %s, strides %s)",
                               op, arg, int64_list(t->dims, t->rank, shape, sizeof shape),
                               int64_list(t->strides, t->rank, strides, sizeof strides));
    }
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_check_layout_rows(const char *op, const char *arg, const rudnn_tensor_t *t,
                                       size_t buffer_size)
{
    size_t span;
    RUDNN_TRY(check_view(op, arg, t, buffer_size, &span));
    int last = t->rank - 1;
    if (last >= 0 && rudnn_tensor_numel(t) > 0 && t->dims[last] > 1 && t->strides[last] != 1) {
        char shape[200], strides[200];
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED,
                               "%s: %s must have a contiguous last dim (stride 1), not %lld (shape %s, "
                               "strides %s)",
                               op, arg, (long long)t->strides[last],
                               int64_list(t->dims, t->rank, shape, sizeof shape),
                               int64_list(t->strides, t->rank, strides, sizeof strides));
    }
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_check_layout_view(const char *op, const char *arg, const rudnn_tensor_t *t,
                                       size_t buffer_size)
{
    size_t span;
    return check_view(op, arg, t, buffer_size, &span);
}

size_t rudnn_tensor_span_bytes(const rudnn_tensor_t *t)
{
    size_t span = 0;
    if (!t || !t->buffer || check_view("", "", t, SIZE_MAX, &span))
        return 0;
    return span;
}

static rudnn_status_t tensor_copy(const char *op, rudnn_queue_t q, const rudnn_tensor_t *t,
                                  const void *src, void *dst, size_t bytes)
{
    rudnn_clear_error();
    if (!q || !t)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is NULL", op, q ? "tensor" : "queue");
    if (t->buffer) /* a NULL buffer is buffer_read/write's BAD_PARAM */
        RUDNN_TRY(rudnn_check_layout(op, "tensor", t, t->buffer->size));
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
