/* The HAL: the one interface every backend plugin implements.
 *
 * A plugin (librudnn-<name>.so) exports one C symbol, rudnn_backend_entry_v1,
 * returning a const rudnn_backend_t whose first two fields are abi_version and
 * struct_size, so the struct can grow at its end. librudnn.so loads plugins
 * with dlopen and links no GPU runtime itself.
 *
 * Conventions:
 * - Every entry returns rudnn_status_t; on failure it calls host->set_error
 *   with a message (the op layer adds the op's name where it knows it).
 * - Memory is an opaque handle (a device pointer on CUDA/HIP, a cl_mem on
 *   OpenCL) plus a byte offset: rudnn_mem_ref_t (hal/table.h).
 * - Each family's plans and kernel table live in hal/<family>.h; the list of
 *   families is families.txt at the top of the tree (one line a family).
 * - Kernel entries receive plans that ops/ already validated: shapes are
 *   consistent, every range fits in its buffer, offsets are element-aligned.
 *   They do not validate again.
 * - A NULL kernel entry means "this backend cannot run that"; the op layer
 *   then picks another strategy or returns RUDNN_STATUS_NOT_SUPPORTED.
 */
#ifndef RUDNN_BACKEND_H
#define RUDNN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "rudnn/core.h"
#include "rudnn/dtype.h"
#include "rudnn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RUDNN_BACKEND_ABI_VERSION 3u /* 2: family tables with struct_size, expert candidates; 3: queue_native */
#define RUDNN_BACKEND_ENTRY_SYMBOL "rudnn_backend_entry_v1"

/* Returns the status of expr from the calling function when it is not SUCCESS (used by the op
 * layer and the plugins alike). */
#define RUDNN_TRY(expr)                                                                            \
    do {                                                                                           \
        rudnn_status_t rudnn_try_status_ = (expr);                                                 \
        if (rudnn_try_status_ != RUDNN_STATUS_SUCCESS)                                             \
            return rudnn_try_status_;                                                              \
    } while (0)

/* Services librudnn.so gives a plugin at init. */
typedef struct rudnn_host_services {
    uint32_t struct_size;
    /* Records the thread's error message (printf-style); returns status. */
    rudnn_status_t (*set_error)(rudnn_status_t status, const char *fmt, ...)
#if defined(__GNUC__)
        __attribute__((format(printf, 2, 3)))
#endif
        ;
    /* Environment values read once by core/env.c (NULL when unset). */
    const char *cache_dir; /* folder for on-disk caches (OpenCL binaries); may be NULL */
    /* Records, for rudnn_last_kernel(), the name of a kernel the calling thread is about to
     * launch: "<family>.<kernel>", a string with static storage. Appended: a plugin checks
     * struct_size before calling it. */
    void (*note_kernel)(const char *name);
    /* Allocation-fault injection (rudnn/debug.h): a plugin calls it right before each host or
     * device allocation whose failure it reports as an error, and fails that allocation (with
     * its usual out-of-memory status and message) when it returns nonzero. Counts the
     * allocation. Appended: a plugin checks struct_size before calling it. */
    int (*fail_allocation)(void);
} rudnn_host_services_t;

#include "limits.h"          /* contract limits kernels depend on */
#include "rudnn_families.h" /* generated from families.txt: the family tables */

/* ---- the vtable ---------------------------------------------------------- */

typedef struct rudnn_backend {
    uint32_t abi_version; /* RUDNN_BACKEND_ABI_VERSION */
    uint32_t struct_size; /* sizeof(rudnn_backend_t) the plugin was built with */
    const char *name;     /* "cuda", "hip", "opencl" */

    /* Loads the runtime and counts devices. Called once per process before
     * anything else. On failure writes why into the host error. */
    rudnn_status_t (*init)(const rudnn_host_services_t *host, int *device_count);

    /* device */
    rudnn_status_t (*device_open)(int index, void **device);
    void (*device_close)(void *device);
    rudnn_status_t (*device_info)(void *device, rudnn_device_info_t *info);

    /* memory (all copies are ordered on the queue; read/write block) */
    rudnn_status_t (*mem_alloc)(void *device, size_t bytes, void **mem);
    void (*mem_free)(void *device, void *mem);
    rudnn_status_t (*mem_write)(void *queue, rudnn_mem_ref_t dst, const void *host, size_t bytes);
    rudnn_status_t (*mem_read)(void *queue, rudnn_mem_ref_t src, void *host, size_t bytes);
    rudnn_status_t (*mem_copy)(void *queue, rudnn_mem_ref_t dst, rudnn_mem_ref_t src, size_t bytes);
    rudnn_status_t (*mem_fill)(void *queue, rudnn_mem_ref_t dst, uint8_t byte, size_t bytes);

    /* queues and events */
    rudnn_status_t (*queue_create)(void *device, void **queue);
    void (*queue_destroy)(void *queue);
    rudnn_status_t (*queue_sync)(void *queue);
    rudnn_status_t (*event_create)(void *device, void **event);
    void (*event_destroy)(void *event);
    rudnn_status_t (*event_record)(void *event, void *queue);
    rudnn_status_t (*event_elapsed_ms)(void *start, void *end, float *ms);
    /* The runtime's own queue object behind queue (cudaStream_t, hipStream_t, cl_command_queue),
     * for rudnn_queue_native_handle; NULL entry: none to give. */
    void *(*queue_native)(void *queue);

    /* One kernel table per family, in the order of families.txt (NULL: the backend does not
     * implement that family). New families are appended there, so the struct grows at its end:
     * the loader accepts a plugin whose struct ends anywhere after queue_native, and ops/
     * treats a family past the plugin's struct_size as absent (core/family.c). */
#define RUDNN_FAMILY_FIELD(f) const rudnn_##f##_kernels_t *f;
    RUDNN_FAMILIES(RUDNN_FAMILY_FIELD)
#undef RUDNN_FAMILY_FIELD
} rudnn_backend_t;

/* The part of rudnn_backend_t every plugin must have: everything before the family tables. */
#define RUDNN_BACKEND_MIN_SIZE RUDNN_TABLE_END(rudnn_backend_t, queue_native)

typedef const rudnn_backend_t *(*rudnn_backend_entry_fn)(void);

#if defined(__GNUC__)
#define RUDNN_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define RUDNN_PLUGIN_EXPORT
#endif

#ifdef __cplusplus
}
#endif
#endif
