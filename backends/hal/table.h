/* What every family's kernel table shares: its leading struct_size, and the rules for reading a
 * table that an older (or newer) plugin built.
 *
 * A family table starts with uint32_t struct_size (the sizeof the plugin was built with). Its
 * required entries come first and never move; entries added later are appended and optional.
 * ops/ reads a table through rudnn_family_table() (core/family.c), which refuses one shorter
 * than its required part, and reads optional entries through RUDNN_KERNEL_ENTRY, which gives
 * NULL for an entry past the end of the plugin's table. */
#ifndef RUDNN_HAL_TABLE_H
#define RUDNN_HAL_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "rudnn/core.h"
#include "rudnn/dtype.h"
#include "rudnn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rudnn_mem_ref {
    void *mem;     /* backend handle: device pointer or cl_mem */
    size_t offset; /* bytes */
} rudnn_mem_ref_t;

/* Bytes of type up to and including field. */
#define RUDNN_TABLE_END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

/* table->field when the plugin's table is long enough to hold it, else NULL. */
#define RUDNN_KERNEL_ENTRY(table, field)                                                          \
    ((table) && (table)->struct_size >= RUDNN_TABLE_END(__typeof__(*(table)), field)             \
         ? (table)->field                                                                         \
         : NULL)

#ifdef __cplusplus
}
#endif
#endif
