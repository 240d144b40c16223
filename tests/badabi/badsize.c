/* A plugin with the right ABI number but a struct smaller than the one this
 * librudnn needs (struct_size 16): the loader must refuse it with
 * RUDNN_STATUS_ABI_MISMATCH instead of reading past the end of the struct. */
#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"

/* Only the fields a 16-byte struct would have; the rest stays unread. */
static const struct {
    uint32_t abi_version;
    uint32_t struct_size;
    const char *name;
} small_backend = {RUDNN_BACKEND_ABI_VERSION, 16u, "hip"};

RUDNN_PLUGIN_EXPORT const rudnn_backend_t *rudnn_backend_entry_v1(void);

RUDNN_PLUGIN_EXPORT const rudnn_backend_t *rudnn_backend_entry_v1(void)
{
    return (const rudnn_backend_t *)(const void *)&small_backend;
}
