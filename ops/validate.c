/* Argument checks shared by every op. */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/pool.h"
#include "validate.h"

const char *rudnn_shape_str(const rudnn_tensor_t *t, char *buf, size_t cap)
{
    size_t len = 0;
    len += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < t->rank && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
    return buf;
}

rudnn_status_t rudnn_check_queue(const char *op, rudnn_queue_t queue)
{
    return rudnn_check_arg(op, "queue", queue);
}

rudnn_status_t rudnn_check_held_queue(const char *op, const char *holder, rudnn_queue_t queue)
{
    if (atomic_load(&queue->closed) || !queue->handle)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s's queue was destroyed: its calls run on that queue "
                               "only", op, holder);
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_check_arg(const char *op, const char *arg, const void *ptr)
{
    if (!ptr)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is NULL", op, arg);
    return RUDNN_STATUS_SUCCESS;
}

/* Everything rudnn_check_tensor checks before the stride rule. */
static rudnn_status_t check_descriptor(const char *op, const char *arg, rudnn_queue_t queue,
                                       const rudnn_tensor_t *t, int min_rank)
{
    if (!t)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is NULL", op, arg);
    if (!t->buffer)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s has no buffer", op, arg);
    if (t->buffer->context != queue->context)
        return rudnn_set_error(RUDNN_STATUS_DEVICE_MISMATCH,
                               "%s: %s is on another context/device than the queue (%s device %d)", op,
                               arg, queue->context->backend->name, queue->context->device_index);
    if ((unsigned)t->dtype >= RUDNN_DTYPE_COUNT)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: %s has dtype %d, not a rudnn dtype", op, arg,
                               (int)t->dtype);
    if (t->rank < min_rank || t->rank > RUDNN_MAX_RANK)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has rank %d, expected %d..%d", op, arg,
                               t->rank, min_rank, RUDNN_MAX_RANK);
    uint64_t numel = 1;
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] < 0)
            return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has negative dims[%d] = %lld", op, arg,
                                   i, (long long)t->dims[i]);
        if (t->dims[i] && numel > (UINT64_MAX >> 4) / (uint64_t)t->dims[i])
            return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has too many elements", op, arg);
        numel *= (uint64_t)t->dims[i];
    }
    size_t elem = rudnn_dtype_size(t->dtype);
    if (elem > 1 && t->offset % elem)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               "%s: %s byte offset %zu is not a multiple of its element size %zu", op, arg,
                               t->offset, elem);
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_check_tensor(const char *op, const char *arg, rudnn_queue_t queue,
                                  const rudnn_tensor_t *t, int min_rank)
{
    TRY(check_descriptor(op, arg, queue, t, min_rank));
    /* strides (rudnn/status.h): no view BAD_SHAPE, outside the buffer OUT_OF_BOUNDS, a valid
     * strided view NOT_SUPPORTED */
    return rudnn_check_layout(op, arg, t, t->buffer->size);
}

rudnn_status_t rudnn_check_tensor_rows(const char *op, const char *arg, rudnn_queue_t queue,
                                       const rudnn_tensor_t *t, int min_rank)
{
    TRY(check_descriptor(op, arg, queue, t, min_rank));
    return rudnn_check_layout_rows(op, arg, t, t->buffer->size);
}

rudnn_status_t rudnn_check_tensor_view(const char *op, const char *arg, rudnn_queue_t queue,
                                       const rudnn_tensor_t *t, int min_rank)
{
    TRY(check_descriptor(op, arg, queue, t, min_rank));
    return rudnn_check_layout_view(op, arg, t, t->buffer->size);
}

rudnn_status_t rudnn_check_workspace(const char *op, rudnn_queue_t queue, rudnn_buffer_t ws, size_t ws_bytes,
                                     size_t need, const char *size_query, const rudnn_tensor_t *const *tensors,
                                     const char *const *names, int n)
{
    if (!ws)
        return RUDNN_STATUS_SUCCESS;
    if (ws->context != queue->context)
        return rudnn_set_error(RUDNN_STATUS_DEVICE_MISMATCH, "%s: workspace is on another context/device than the "
                               "queue", op);
    if (ws_bytes > ws->size)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: workspace_bytes = %zu exceeds the workspace buffer (%zu "
                               "bytes)", op, ws_bytes, ws->size);
    if (ws_bytes < need)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: workspace_bytes = %zu is too small: %zu bytes needed "
                               "(%s)", op, ws_bytes, need, size_query);
    for (int i = 0; i < n; i++) {
        const rudnn_tensor_t *t = tensors[i];
        if (t && t->buffer == ws && ws_bytes && rudnn_tensor_span_bytes(t) && t->offset < ws_bytes)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s overlaps the first workspace_bytes (%zu) of "
                                   "workspace", op, names[i], ws_bytes);
    }
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_check_float_dtype(const char *op, const char *arg, const rudnn_tensor_t *t)
{
    if (rudnn_dtype_is_float(t->dtype))
        return RUDNN_STATUS_SUCCESS;
    return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: %s has %s dtype %s, expected f32, f16 or bf16", op,
                           arg, rudnn_dtype_is_quantized(t->dtype) ? "quantized" : "non-float",
                           rudnn_dtype_name(t->dtype));
}

rudnn_status_t rudnn_check_dtype(const char *op, const char *arg, const rudnn_tensor_t *t,
                                 rudnn_dtype_t want, const char *why)
{
    if (t->dtype == want)
        return RUDNN_STATUS_SUCCESS;
    return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: %s has dtype %s, expected %s (%s)", op, arg,
                           rudnn_dtype_name(t->dtype), rudnn_dtype_name(want), why);
}

rudnn_status_t rudnn_check_like(const char *op, const char *arg, const rudnn_tensor_t *t,
                                const char *ref_arg, const rudnn_tensor_t *ref)
{
    int same = t->rank == ref->rank;
    for (int i = 0; same && i < t->rank; i++)
        same = t->dims[i] == ref->dims[i];
    if (!same) {
        char a[160], b[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has shape %s, expected %s (shape of %s)", op,
                               arg, rudnn_shape_str(t, a, sizeof a), rudnn_shape_str(ref, b, sizeof b),
                               ref_arg);
    }
    if (t->dtype != ref->dtype)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: %s has dtype %s, expected %s (dtype of %s)", op,
                               arg, rudnn_dtype_name(t->dtype), rudnn_dtype_name(ref->dtype), ref_arg);
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_check_vector(const char *op, const char *arg, const rudnn_tensor_t *t, int64_t n,
                                  const char *why)
{
    if (t->rank == 1 && t->dims[0] == n)
        return RUDNN_STATUS_SUCCESS;
    char s[160];
    return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has shape %s, expected [%lld] (%s)", op, arg,
                           rudnn_shape_str(t, s, sizeof s), (long long)n, why);
}

rudnn_status_t rudnn_check_overlap(const char *op, const char *out_arg, const rudnn_tensor_t *out,
                                   const char *in_arg, const rudnn_tensor_t *in)
{
    if (!in || out->buffer != in->buffer)
        return RUDNN_STATUS_SUCCESS;
    size_t out_end = out->offset + rudnn_tensor_bytes(out);
    size_t in_end = in->offset + rudnn_tensor_bytes(in);
    if (out_end <= in->offset || in_end <= out->offset)
        return RUDNN_STATUS_SUCCESS; /* disjoint */
    if (out->offset == in->offset && out_end == in_end)
        return RUDNN_STATUS_SUCCESS; /* exactly in place */
    return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                           "%s: %s partially overlaps %s (bytes [%zu, %zu) vs [%zu, %zu)); an output must "
                           "be the same tensor as an input or disjoint from it",
                           op, out_arg, in_arg, out->offset, out_end, in->offset, in_end);
}

rudnn_status_t rudnn_check_disjoint(const char *op, const char *out_arg, const rudnn_tensor_t *out,
                                    const char *in_arg, const rudnn_tensor_t *in)
{
    if (!in || !out || out->buffer != in->buffer)
        return RUDNN_STATUS_SUCCESS;
    size_t out_span = rudnn_tensor_span_bytes(out), in_span = rudnn_tensor_span_bytes(in);
    if (!out_span || !in_span || out->offset + out_span <= in->offset || in->offset + in_span <= out->offset)
        return RUDNN_STATUS_SUCCESS;
    return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                           "%s: %s overlaps %s (bytes [%zu, %zu) vs [%zu, %zu)); %s must be disjoint from it",
                           op, out_arg, in_arg, out->offset, out->offset + out_span, in->offset,
                           in->offset + in_span, out_arg);
}

rudnn_status_t rudnn_check_eps(const char *op, float eps)
{
    if (isfinite(eps) && eps > 0.0f)
        return RUDNN_STATUS_SUCCESS;
    return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: eps = %g, expected a finite value > 0", op,
                           (double)eps);
}

rudnn_status_t rudnn_kernel_status(const char *op, rudnn_status_t st)
{
    if (st != RUDNN_STATUS_SUCCESS)
        rudnn_error_prefix(op);
    return st;
}

rudnn_status_t rudnn_scratch_begin(const char *op, rudnn_queue_t queue, rudnn_buffer_t workspace, size_t need,
                                   void **mem)
{
    if (workspace) {
        *mem = workspace->mem;
        return RUDNN_STATUS_SUCCESS;
    }
    return rudnn_kernel_status(op, rudnn_pool_acquire(queue, need, mem));
}

void rudnn_scratch_end(rudnn_queue_t queue, rudnn_buffer_t workspace, void *mem, size_t need)
{
    if (!workspace) /* stream order makes the block safe to hand to later work on this queue */
        rudnn_pool_release(queue, mem, need);
}

rudnn_status_t rudnn_check_view_arg(const char *op, const char *arg, rudnn_queue_t queue, const rudnn_tensor_t *t)
{
    TRY(rudnn_check_arg(op, arg, t));
    return rudnn_check_tensor_view(op, arg, queue, t, 0);
}

rudnn_status_t rudnn_check_dims(const char *op, const char *arg, const rudnn_tensor_t *t, const int64_t *want,
                                int rank, const char *why)
{
    int same = t->rank == rank;
    for (int i = 0; same && i < rank; i++)
        same = t->dims[i] == want[i];
    if (same)
        return RUDNN_STATUS_SUCCESS;
    char got[160], exp[160];
    rudnn_tensor_t w = *t;
    w.rank = rank;
    memcpy(w.dims, want, (size_t)rank * sizeof *want);
    return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has shape %s, expected %s (%s)", op, arg,
                           rudnn_shape_str(t, got, sizeof got), rudnn_shape_str(&w, exp, sizeof exp), why);
}

void rudnn_spatial_strides(const rudnn_tensor_t *t, int d, int64_t s[5])
{
    for (int i = 0; i < 5; i++)
        s[i] = 0;
    if (!t)
        return;
    s[0] = t->dims[0] == 1 ? 0 : t->strides[0];
    s[1] = t->dims[1] == 1 ? 0 : t->strides[1];
    for (int i = 0; i < d; i++)
        s[2 + 3 - d + i] = t->dims[2 + i] == 1 ? 0 : t->strides[2 + i];
}
