/* Pooled device allocator: power-of-two size classes, freed blocks kept for reuse.
 *
 * Every block carries a bookkeeping node from the moment it is acquired, kept on the spare
 * list while the block is in use: release then needs no allocation, so it cannot fail, and
 * an acquire is the only step that allocates (host node, then device memory). */
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
    pool_block_t *spare; /* one node per block in use, for its release */
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
    struct rudnn_pool *pool = rudnn_host_calloc(1, sizeof *pool);
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
            rudnn_device_free(queue->context, b->mem, class_bytes(c));
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
    while (pool->spare) {
        pool_block_t *next = pool->spare->next;
        free(pool->spare);
        pool->spare = next;
    }
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

static void push_spare(struct rudnn_pool *pool, pool_block_t *node)
{
    pthread_mutex_lock(&pool->lock);
    node->next = pool->spare;
    pool->spare = node;
    pthread_mutex_unlock(&pool->lock);
}

/* A spare node, or NULL when every block in use already has one released (a caller error). */
static pool_block_t *pop_spare(struct rudnn_pool *pool)
{
    pthread_mutex_lock(&pool->lock);
    pool_block_t *node = pool->spare;
    if (node)
        pool->spare = node->next;
    pthread_mutex_unlock(&pool->lock);
    return node;
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
        b->next = pool->spare; /* the node waits there for the block's release */
        pool->spare = b;
    }
    pthread_mutex_unlock(&pool->lock);
    if (b) {
        *mem = b->mem;
        return RUDNN_STATUS_SUCCESS;
    }
    pool_block_t *node = rudnn_host_malloc(sizeof *node);
    if (!node)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "pool: out of host memory");
    rudnn_status_t st = rudnn_device_alloc(queue->context, class_bytes(c), mem);
    if (st != RUDNN_STATUS_SUCCESS) { /* cached blocks may be what is missing */
        rudnn_pool_trim(queue);
        st = rudnn_device_alloc(queue->context, class_bytes(c), mem);
    }
    if (st != RUDNN_STATUS_SUCCESS) {
        free(node);
        return st;
    }
    push_spare(pool, node);
    return RUDNN_STATUS_SUCCESS;
}

void rudnn_pool_release(rudnn_queue_t queue, void *mem, size_t bytes)
{
    if (!mem)
        return;
    int c = size_class(bytes ? bytes : 1);
    pool_block_t *b = pop_spare(queue->pool);
    /* a closed queue (rudnn_queue_destroy with plans alive) caches nothing more */
    if (!b || atomic_load(&queue->closed)) {
        rudnn_device_free(queue->context, mem, class_bytes(c));
        free(b);
        return;
    }
    b->mem = mem;
    pthread_mutex_lock(&queue->pool->lock);
    b->next = queue->pool->free_list[c];
    queue->pool->free_list[c] = b;
    queue->pool->cached_bytes += class_bytes(c);
    pthread_mutex_unlock(&queue->pool->lock);
}
