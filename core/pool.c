/* Pooled device allocator: power-of-two size classes, freed blocks kept for reuse. */
#include <stdlib.h>

#include "internal.h"
#include "pool.h"

#define POOL_CLASSES 48
#define POOL_MIN_SHIFT 8 /* 256-byte smallest class */

typedef struct pool_block {
    void *mem;
    struct pool_block *next;
} pool_block_t;

struct rudnn_pool {
    pthread_mutex_t lock;
    pool_block_t *free_list[POOL_CLASSES];
    size_t cached_bytes;
};

static int size_class(size_t bytes)
{
    int c = 0;
    size_t size = (size_t)1 << POOL_MIN_SHIFT;
    while (size < bytes && c < POOL_CLASSES - 1) {
        size <<= 1;
        c++;
    }
    return c;
}

static size_t class_bytes(int c) { return (size_t)1 << (POOL_MIN_SHIFT + c); }

struct rudnn_pool *rudnn_pool_create(void)
{
    struct rudnn_pool *pool = calloc(1, sizeof *pool);
    if (pool)
        pthread_mutex_init(&pool->lock, NULL);
    return pool;
}

static void free_all(rudnn_queue_t queue, struct rudnn_pool *pool)
{
    for (int c = 0; c < POOL_CLASSES; c++) {
        pool_block_t *b = pool->free_list[c];
        while (b) {
            pool_block_t *next = b->next;
            queue->context->backend->mem_free(queue->context->device, b->mem);
            free(b);
            b = next;
        }
        pool->free_list[c] = NULL;
    }
    pool->cached_bytes = 0;
}

void rudnn_pool_trim(rudnn_queue_t queue)
{
    pthread_mutex_lock(&queue->pool->lock);
    free_all(queue, queue->pool);
    pthread_mutex_unlock(&queue->pool->lock);
}

void rudnn_pool_destroy(struct rudnn_pool *pool)
{
    if (!pool)
        return;
    pthread_mutex_destroy(&pool->lock);
    free(pool);
}

size_t rudnn_pool_cached_bytes(rudnn_queue_t queue)
{
    pthread_mutex_lock(&queue->pool->lock);
    size_t n = queue->pool->cached_bytes;
    pthread_mutex_unlock(&queue->pool->lock);
    return n;
}

rudnn_status_t rudnn_pool_acquire(rudnn_queue_t queue, size_t bytes, void **mem)
{
    int c = size_class(bytes ? bytes : 1);
    if (class_bytes(c) < bytes)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "pool: %zu bytes is too large", bytes);
    struct rudnn_pool *pool = queue->pool;
    pthread_mutex_lock(&pool->lock);
    pool_block_t *b = pool->free_list[c];
    if (b) {
        pool->free_list[c] = b->next;
        pool->cached_bytes -= class_bytes(c);
    }
    pthread_mutex_unlock(&pool->lock);
    if (b) {
        *mem = b->mem;
        free(b);
        return RUDNN_STATUS_SUCCESS;
    }
    rudnn_status_t st = queue->context->backend->mem_alloc(queue->context->device, class_bytes(c), mem);
    if (st != RUDNN_STATUS_SUCCESS) { /* cached blocks may be what is missing */
        rudnn_pool_trim(queue);
        st = queue->context->backend->mem_alloc(queue->context->device, class_bytes(c), mem);
    }
    return st;
}

void rudnn_pool_release(rudnn_queue_t queue, void *mem, size_t bytes)
{
    if (!mem)
        return;
    int c = size_class(bytes ? bytes : 1);
    pool_block_t *b = malloc(sizeof *b);
    if (!b) {
        queue->context->backend->mem_free(queue->context->device, mem);
        return;
    }
    b->mem = mem;
    pthread_mutex_lock(&queue->pool->lock);
    b->next = queue->pool->free_list[c];
    queue->pool->free_list[c] = b;
    queue->pool->cached_bytes += class_bytes(c);
    pthread_mutex_unlock(&queue->pool->lock);
}
