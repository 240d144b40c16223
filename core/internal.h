/* Private runtime structures shared by core/ and ops/. Not installed. */
#ifndef RUDNN_CORE_INTERNAL_H
#define RUDNN_CORE_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>

#include "backends/backend.h"
#include "rudnn/rudnn.h"

struct rudnn_pool; /* core/pool.c */

/* Lifetimes: every object holds a reference on what it was made from (queue, buffer, event and
 * experts on the context; pooled blocks of plans and dispatched tokens on the queue; experts on
 * their weight buffers), so destroying a parent first only drops the caller's reference and the
 * parent is freed with its last child (see rudnn_context_destroy in rudnn/core.h). */
struct rudnn_context {
    atomic_int refs; /* the caller's until destroy, plus one per child */
    const rudnn_backend_t *backend;
    void *device; /* backend device handle */
    int device_index;
};

struct rudnn_queue {
    atomic_int refs;         /* the caller's until destroy, plus one per pooled block held */
    atomic_int closed;       /* destroyed by the caller: blocks released now are freed, not cached */
    rudnn_context_t context;
    void *handle;            /* backend queue; NULL once closed */
    struct rudnn_pool *pool; /* workspaces; per queue, so stream order makes reuse safe */
};

struct rudnn_buffer {
    atomic_int refs; /* the caller's until destroy, plus one per experts object using it */
    rudnn_context_t context;
    void *mem; /* backend memory handle */
    size_t size;
    rudnn_queue_t pool_queue; /* non-NULL: a pooled block of this queue (ops/ temporaries) */
};

struct rudnn_event {
    rudnn_context_t context;
    void *handle;
};

/* core/error.c: records the thread's message and returns status. */
rudnn_status_t rudnn_set_error(rudnn_status_t status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
rudnn_status_t rudnn_set_error_v(rudnn_status_t status, const char *fmt, va_list args);
void rudnn_clear_error(void);
/* Copies src into dst of cap bytes, truncating; always terminates. */
void rudnn_copy_str(char *dst, size_t cap, const char *src);
/* Prefixes the current message with "<op>: " unless it already starts so. */
void rudnn_error_prefix(const char *op);

/* core/error.c: the name of the last kernel a call on this thread launched (a plugin reports it
 * through rudnn_host_services_t.note_kernel; see rudnn_last_kernel). */
void rudnn_note_kernel(const char *name);

/* core/family.c: backend's kernel table of the family at field_offset in rudnn_backend_t, or NULL
 * when the plugin has none: its vtable ends before that field, the entry is NULL, or the table
 * is shorter than min_size (its required entries). Read it through RUDNN_FAMILY_TABLE. */
const void *rudnn_family_table_at(const rudnn_backend_t *backend, size_t field_offset, size_t min_size);
#define RUDNN_FAMILY_TABLE(backend, f)                                                             \
    ((const rudnn_##f##_kernels_t *)rudnn_family_table_at(                                         \
        (backend), offsetof(rudnn_backend_t, f), rudnn_##f##_kernels_min_size))

/* core/tensor.c: the stride rule of rudnn/status.h for tensor t (argument arg of op) in a buffer of
 * buffer_size bytes, checked in this order: rank outside 0..8 or a negative dim, BAD_SHAPE;
 * strides that describe no view (a dim of size > 1 with a stride < 1, or elements that can share
 * an address), BAD_SHAPE; an element past the end of the buffer, OUT_OF_BOUNDS; a valid view that
 * is not row-major contiguous, NOT_SUPPORTED. Messages start "<op>: <arg>". */
rudnn_status_t rudnn_check_layout(const char *op, const char *arg, const rudnn_tensor_t *t,
                                  size_t buffer_size);
/* The same rule for ops that take strided views (attention): a valid view inside its buffer
 * whose last dim is contiguous (stride 1); any other view is NOT_SUPPORTED. */
rudnn_status_t rudnn_check_layout_rows(const char *op, const char *arg, const rudnn_tensor_t *t,
                                       size_t buffer_size);
/* Any valid view inside its buffer (the first two checks of rudnn_check_layout), for inputs read
 * element by element (the gated delta rule's beta and log_decay). */
rudnn_status_t rudnn_check_layout_view(const char *op, const char *arg, const rudnn_tensor_t *t,
                                       size_t buffer_size);
/* Bytes from t's first element through its last, for a valid view (0 when empty or invalid):
 * the range [offset, offset + span) a strided view touches. */
size_t rudnn_tensor_span_bytes(const rudnn_tensor_t *t);

/* core/context.c, core/buffer.c: references (see the structs above); a release that drops the
 * last one frees the object and releases its parent. */
void rudnn_context_retain(rudnn_context_t ctx);
void rudnn_context_release(rudnn_context_t ctx);
void rudnn_queue_retain(rudnn_queue_t q);
void rudnn_queue_release(rudnn_queue_t q);
void rudnn_buffer_hold(rudnn_buffer_t b); /* any buffer, pooled blocks too */
/* Device memory for plans and dispatched tokens: a block of the queue's pool (at least 16 bytes)
 * wrapped as a buffer, so that a warm call pays no allocation. The block holds a reference on the
 * queue (and so on its pool and context); rudnn_buffer_release gives it back to the pool. */
rudnn_status_t rudnn_buffer_from_pool(rudnn_queue_t queue, size_t bytes, rudnn_buffer_t *out);
void rudnn_buffer_release(rudnn_buffer_t b);
/* Whether the buffer has more than one reference (copy on write). */
int rudnn_buffer_is_shared(rudnn_buffer_t b);

/* core/fault.c: allocation-fault injection (rudnn/debug.h). rudnn_fault_hit() is one branch
 * until a test arms the hook; then it counts the allocation and says whether it must fail. */
extern atomic_int rudnn_fault_tracking;
int rudnn_fault_tick(void);
static inline int rudnn_fault_hit(void)
{
    return atomic_load_explicit(&rudnn_fault_tracking, memory_order_relaxed) && rudnn_fault_tick();
}
/* The host service handed to plugins (rudnn_host_services_t.fail_allocation). */
int rudnn_fault_allocation(void);
void rudnn_fault_arm_from_env(uint64_t n);
/* Every host allocation of core/ and ops/ goes through these (NULL on an injected fault). */
void *rudnn_host_calloc(size_t count, size_t size);
void *rudnn_host_malloc(size_t bytes);
/* Every device allocation core/ asks a backend for: counted for rudnn_debug_device_memory.
 * A failure sets the error ("<backend>: ..."); callers add the op's name. */
rudnn_status_t rudnn_device_alloc(rudnn_context_t ctx, size_t bytes, void **mem);
void rudnn_device_free(rudnn_context_t ctx, void *mem, size_t bytes);
/* +1 when an object is made, -1 when it is freed (rudnn_debug_live_objects). */
void rudnn_live_object(int delta);

/* core/env.c: environment read once per process. */
typedef struct rudnn_env {
    const char *backend;      /* RUDNN_BACKEND or NULL */
    int device;               /* RUDNN_DEVICE or -1 */
    int device_set_invalid;   /* RUDNN_DEVICE set but not a number */
    const char *backend_path; /* RUDNN_BACKEND_PATH or NULL */
    const char *cache_dir;    /* RUDNN_CACHE_DIR, else $XDG_CACHE_HOME/rudnn, else $HOME/.cache/rudnn */
    const char *autotune_cache; /* RUDNN_AUTOTUNE_CACHE or NULL */
    int autotune_off;             /* RUDNN_AUTOTUNE=off */
    const char *autotune_unknown; /* RUDNN_AUTOTUNE set to neither "on" nor "off", else NULL */
    uint64_t fault_alloc;       /* RUDNN_FAULT_ALLOC (testing aid, rudnn/debug.h) or 0 */
    int gdr_segments;           /* RUDNN_GDR_SEGMENTS (testing aid: the chunked gated delta rule's
                                   state-pass segments, 1..64) or 0 (chosen by the plan) */
} rudnn_env_t;
const rudnn_env_t *rudnn_env(void);

/* core/loader.c */
rudnn_status_t rudnn_loader_open(const char *name, const char *plugin_path,
                                 const rudnn_backend_t **backend, int *device_count);
extern const rudnn_host_services_t rudnn_host_services;
/* dlopen()s file_name from the first folder of the plugin search list (RUDNN_BACKEND_PATH, the
 * install folder, the folder of librudnn.so + "/rudnn") that holds a loadable one; NULL with
 * each path tried and why in report otherwise. For libraries other than backends (comm glue). */
void *rudnn_loader_open_library(const char *file_name, char *report, size_t cap);

#endif
