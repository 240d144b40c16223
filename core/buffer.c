/* Device buffers and host <-> device copies. */
#include <stdlib.h>

#include "internal.h"
#include "pool.h"

rudnn_status_t rudnn_buffer_create(rudnn_context_t ctx, size_t bytes, rudnn_buffer_t *buffer)
{
    rudnn_clear_error();
    if (!ctx || !buffer)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "buffer_create: %s is NULL",
                               ctx ? "buffer" : "context");
    if (bytes == 0)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "buffer_create: size must be > 0 bytes");
    rudnn_buffer_t b = rudnn_host_calloc(1, sizeof *b);
    if (!b)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "buffer_create: out of host memory");
    rudnn_status_t st = rudnn_device_alloc(ctx, bytes, &b->mem);
    if (st != RUDNN_STATUS_SUCCESS) {
        rudnn_error_prefix("buffer_create");
        free(b);
        return st;
    }
    atomic_init(&b->refs, 1);
    b->context = ctx;
    b->size = bytes;
    rudnn_context_retain(ctx);
    rudnn_live_object(+1);
    *buffer = b;
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_buffer_from_pool(rudnn_queue_t queue, size_t bytes, rudnn_buffer_t *out)
{
    if (bytes < 16)
        bytes = 16;
    rudnn_buffer_t b = rudnn_host_calloc(1, sizeof *b);
    if (!b)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "out of host memory");
    rudnn_status_t st = rudnn_pool_acquire(queue, bytes, &b->mem);
    if (st) {
        free(b);
        return st;
    }
    atomic_init(&b->refs, 1);
    b->context = queue->context;
    b->size = bytes;
    b->pool_queue = queue;
    rudnn_queue_retain(queue);
    *out = b;
    return RUDNN_STATUS_SUCCESS;
}

void rudnn_buffer_hold(rudnn_buffer_t b) { atomic_fetch_add(&b->refs, 1); }

void rudnn_buffer_retain(rudnn_buffer_t b)
{
    if (b && !b->pool_queue) /* a plan's view is not the caller's to keep */
        rudnn_buffer_hold(b);
}

int rudnn_buffer_is_shared(rudnn_buffer_t b) { return atomic_load(&b->refs) > 1; }

void rudnn_buffer_release(rudnn_buffer_t b)
{
    if (atomic_fetch_sub(&b->refs, 1) > 1)
        return;
    if (b->pool_queue) { /* a pooled block (ops/ temporaries): back to its queue's pool */
        rudnn_queue_t queue = b->pool_queue;
        rudnn_pool_release(queue, b->mem, b->size);
        free(b);
        rudnn_queue_release(queue);
        return;
    }
    rudnn_context_t ctx = b->context;
    rudnn_device_free(ctx, b->mem, b->size);
    free(b);
    rudnn_live_object(-1);
    rudnn_context_release(ctx);
}

/* Experts made over the buffer keep its memory until they are destroyed too. */
void rudnn_buffer_destroy(rudnn_buffer_t b)
{
    if (!b || b->pool_queue) /* a view of a plan's memory is not the caller's */
        return;
    rudnn_buffer_release(b);
}

size_t rudnn_buffer_size(rudnn_buffer_t b) { return b ? b->size : 0; }

rudnn_context_t rudnn_buffer_context(rudnn_buffer_t b) { return b ? b->context : NULL; }

/* Checks queue/buffer/range for a copy; names the op in the message. */
static rudnn_status_t check_range(const char *op, rudnn_queue_t q, rudnn_buffer_t b, const char *arg,
                                  size_t offset, size_t bytes)
{
    if (!q)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: queue is NULL", op);
    if (!b)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is NULL", op, arg);
    if (b->context != q->context)
        return rudnn_set_error(RUDNN_STATUS_DEVICE_MISMATCH,
                               "%s: %s belongs to another context than the queue", op, arg);
    if (offset > b->size || bytes > b->size - offset)
        return rudnn_set_error(RUDNN_STATUS_OUT_OF_BOUNDS,
                               "%s: range [%zu, %zu + %zu) is outside %s of %zu bytes", op, offset,
                               offset, bytes, arg, b->size);
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_buffer_write(rudnn_queue_t q, rudnn_buffer_t b, size_t offset, const void *host,
                                  size_t bytes)
{
    rudnn_clear_error();
    rudnn_status_t st = check_range("buffer_write", q, b, "buffer", offset, bytes);
    if (st)
        return st;
    if (!host && bytes)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "buffer_write: host is NULL");
    if (!bytes)
        return RUDNN_STATUS_SUCCESS;
    return q->context->backend->mem_write(q->handle, (rudnn_mem_ref_t){b->mem, offset}, host, bytes);
}

rudnn_status_t rudnn_buffer_read(rudnn_queue_t q, rudnn_buffer_t b, size_t offset, void *host,
                                 size_t bytes)
{
    rudnn_clear_error();
    rudnn_status_t st = check_range("buffer_read", q, b, "buffer", offset, bytes);
    if (st)
        return st;
    if (!host && bytes)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "buffer_read: host is NULL");
    if (!bytes)
        return RUDNN_STATUS_SUCCESS;
    return q->context->backend->mem_read(q->handle, (rudnn_mem_ref_t){b->mem, offset}, host, bytes);
}

rudnn_status_t rudnn_buffer_copy(rudnn_queue_t q, rudnn_buffer_t dst, size_t dst_offset,
                                 rudnn_buffer_t src, size_t src_offset, size_t bytes)
{
    rudnn_clear_error();
    rudnn_status_t st = check_range("buffer_copy", q, dst, "dst", dst_offset, bytes);
    if (!st)
        st = check_range("buffer_copy", q, src, "src", src_offset, bytes);
    if (st)
        return st;
    if (dst == src && dst_offset < src_offset + bytes && src_offset < dst_offset + bytes &&
        dst_offset != src_offset)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "buffer_copy: src and dst ranges overlap");
    if (!bytes || (dst == src && dst_offset == src_offset))
        return RUDNN_STATUS_SUCCESS;
    return q->context->backend->mem_copy(q->handle, (rudnn_mem_ref_t){dst->mem, dst_offset},
                                         (rudnn_mem_ref_t){src->mem, src_offset}, bytes);
}

rudnn_status_t rudnn_buffer_fill(rudnn_queue_t q, rudnn_buffer_t b, size_t offset, uint8_t byte,
                                 size_t bytes)
{
    rudnn_clear_error();
    rudnn_status_t st = check_range("buffer_fill", q, b, "buffer", offset, bytes);
    if (st || !bytes)
        return st;
    return q->context->backend->mem_fill(q->handle, (rudnn_mem_ref_t){b->mem, offset}, byte, bytes);
}
