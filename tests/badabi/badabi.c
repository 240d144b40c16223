/* A plugin built against a HAL version that does not exist (999): the loader
 * must refuse it with RUDNN_STATUS_ABI_MISMATCH before calling anything in it
 * (every function pointer is NULL, so a call would crash the test). */
#include <stddef.h>

#include "backends/backend.h"

static const rudnn_backend_t bad_backend = {
    .abi_version = 999u,
    .struct_size = (uint32_t)sizeof(rudnn_backend_t),
    .name = "opencl",
};

RUDNN_PLUGIN_EXPORT const rudnn_backend_t *rudnn_backend_entry_v1(void);

RUDNN_PLUGIN_EXPORT const rudnn_backend_t *rudnn_backend_entry_v1(void) { return &bad_backend; }
