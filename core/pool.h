/* Pooled device allocator: a per-queue cache of released blocks, so that
 * workspaces requested with a NULL workspace do not pay an allocation per call.
 * A block released after work was queued on the queue may be handed to later
 * work on the same queue at once: the queue runs in order. */
#ifndef RUDNN_CORE_POOL_H
#define RUDNN_CORE_POOL_H

#include <stddef.h>

#include "rudnn/core.h"

struct rudnn_pool *rudnn_pool_create(void);
void rudnn_pool_destroy(struct rudnn_pool *pool); /* call rudnn_pool_trim first */

/* A block of at least bytes (rounded up to a size class). *mem is a backend
 * memory handle. Blocks are reused only after release. */
rudnn_status_t rudnn_pool_acquire(rudnn_queue_t queue, size_t bytes, void **mem);
void rudnn_pool_release(rudnn_queue_t queue, void *mem, size_t bytes);
/* Frees all cached (released) blocks. */
void rudnn_pool_trim(rudnn_queue_t queue);
/* Bytes currently cached (released, not freed). */
size_t rudnn_pool_cached_bytes(rudnn_queue_t queue);

#endif
