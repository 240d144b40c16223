/* Reading a plugin's family tables safely: a plugin built before a family (or an entry) was
 * appended has a shorter vtable (or table), and nothing past its end may be read. */
#include <string.h>

#include "internal.h"

const void *rudnn_family_table_at(const rudnn_backend_t *backend, size_t field_offset, size_t min_size)
{
    const void *table = NULL;
    if (!backend || backend->struct_size < field_offset + sizeof table)
        return NULL;
    memcpy(&table, (const char *)backend + field_offset, sizeof table);
    if (!table)
        return NULL;
    uint32_t size; /* every family table starts with its struct_size (hal/table.h) */
    memcpy(&size, table, sizeof size);
    return size >= min_size ? table : NULL;
}
