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

/* ---- kernel candidates --------------------------------------------------------------------
 * Where an op has several kernels (a strategy's variants, a vendor library, a comparison path),
 * the backend lists them as named candidates, most preferred first. ops/ decides which one runs
 * (the first of the requested strategy that runs here and is preferred on this device, else the
 * first that runs; the caller's named one; or an autotuned winner) and the backend's run entry runs exactly that candidate or fails: a kernel entry never
 * falls back to another kernel on its own. */
typedef struct rudnn_kernel_candidate {
    const char *name; /* "<family>.<kernel>": what rudnn_last_kernel() reports when it runs */
    int strategy;     /* the family's strategy enum value it implements */
    uint32_t flags;   /* RUDNN_CANDIDATE_* */
} rudnn_kernel_candidate_t;

/* Runs only when the caller names it (a comparison path such as a vendor library). */
#define RUDNN_CANDIDATE_NAMED_ONLY 1u
/* Synchronises the queue once per call (it reads device data back to the host). */
#define RUDNN_CANDIDATE_SYNCS 2u

/* A backend's answer for one (plan, candidate) on one device. */
typedef struct rudnn_candidate_verdict {
    int runs;      /* 1: the candidate can run this plan on this device */
    int preferred; /* 1: the better choice here (0: another candidate that runs is faster) */
    char why[256]; /* when runs or preferred is 0: the reason, without an op prefix */
} rudnn_candidate_verdict_t;

#ifdef __cplusplus
}
#endif
#endif
