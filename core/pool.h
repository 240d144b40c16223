/* Pooled device allocator: a per-context cache of freed blocks, so that
 * workspaces requested with a NULL workspace do not pay an allocation per call. */
#ifndef RUDNN_CORE_POOL_H
#define RUDNN_CORE_POOL_H

#include <stddef.h>

#include "rudnn/core.h"

struct rudnn_pool *rudnn_pool_create(rudnn_context_t ctx);
void rudnn_pool_destroy(struct rudnn_pool *pool); /* frees every cached block */

/* A block of at least bytes (rounded up to a size class). *mem is a backend
 * memory handle. Blocks are reused only after release. */
rudnn_status_t rudnn_pool_acquire(rudnn_context_t ctx, size_t bytes, void **mem);
void rudnn_pool_release(rudnn_context_t ctx, void *mem, size_t bytes);
/* Frees all cached (released) blocks. */
void rudnn_pool_trim(rudnn_context_t ctx);
/* Bytes currently cached (released, not freed). */
size_t rudnn_pool_cached_bytes(rudnn_context_t ctx);

#endif
