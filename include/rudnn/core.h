/* rudnn runtime: backends, contexts, queues, buffers, tensors, events.
 *
 * Threads (docs/ARCHITECTURE.md, "Threads"): as with cuDNN and cuBLAS, a context and what is made
 * on it (buffers, experts objects, routing plans, dispatched tokens) may be used by any number of
 * threads at once; a queue (like a CUDA stream with its cuDNN handle) and an event by one thread
 * at a time, so each thread takes its own queue. rudnn_last_error() and rudnn_last_kernel() are per
 * thread. Process-wide state (plugins, the environment, program caches, vendor libraries loaded
 * at run time) is initialised once, safely, whichever threads get there first. The library does
 * not order device memory between queues: work on two queues that touches the same bytes (one of
 * them writing) needs rudnn_queue_synchronize in between, as two CUDA streams do. Destroy an
 * object only when no thread uses it any more, a context last. */
#ifndef RUDNN_CORE_H
#define RUDNN_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "rudnn/dtype.h"
#include "rudnn/export.h"
#include "rudnn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rudnn_context *rudnn_context_t; /* one backend, one device */
typedef struct rudnn_queue *rudnn_queue_t;     /* an in-order stream of work */
typedef struct rudnn_buffer *rudnn_buffer_t;   /* device memory */
typedef struct rudnn_event *rudnn_event_t;

/* ---- backends ---------------------------------------------------------- */

#define RUDNN_NAME_MAX 256
#define RUDNN_MESSAGE_MAX 1024

/* What the loader found for one backend (rudnn-info prints these). */
typedef struct rudnn_backend_report {
    char name[32];                  /* "cuda", "hip", "opencl" */
    int loaded;                     /* plugin found, ABI matched, runtime initialised */
    int device_count;               /* devices the backend sees (0 if not loaded) */
    char plugin_path[RUDNN_NAME_MAX]; /* file that was loaded or last tried ("" if none found) */
    char message[RUDNN_MESSAGE_MAX];  /* why it did not load, or "ok" */
} rudnn_backend_report_t;

/* Probes every known backend (cuda, hip, opencl) in auto order. Fills up to
 * capacity reports and sets *count to the number of known backends. */
RUDNN_API rudnn_status_t rudnn_backend_probe(rudnn_backend_report_t *reports, size_t capacity,
                                             size_t *count);

/* ---- contexts and devices ---------------------------------------------- */

typedef struct rudnn_context_options {
    /* "auto", "cuda", "hip", "opencl"; NULL means RUDNN_BACKEND, else "auto". */
    const char *backend;
    /* Device index; negative means RUDNN_DEVICE, else 0. */
    int device;
    /* Colon-separated plugin folders searched instead of the defaults;
     * NULL means RUDNN_BACKEND_PATH (searched first) then the defaults. */
    const char *plugin_path;
} rudnn_context_options_t;

/* Creates a context. options may be NULL (all defaults, environment applies).
 * On failure the message says what was tried, why each failed, and what is
 * available. */
RUDNN_API rudnn_status_t rudnn_context_create(rudnn_context_t *context,
                                              const rudnn_context_options_t *options);
/* Lifetimes: every object keeps what it was made from alive. Queues, buffers, events and
 * experts hold their context; routing plans and dispatched tokens hold the queue whose pool
 * their memory came from; experts hold their weight buffers. Destroying a parent before its
 * children is therefore safe: the handle must not be used again, but the children keep
 * working, and the parent's resources (the device, a queue's pool) are freed with the last
 * child. Any destroy order frees everything once every handle has been destroyed. */
RUDNN_API void rudnn_context_destroy(rudnn_context_t context);

typedef struct rudnn_device_info {
    char backend[32];
    char name[RUDNN_NAME_MAX];
    char driver[RUDNN_NAME_MAX];      /* driver / runtime version string */
    int index;
    uint64_t global_memory_bytes;
    int compute_units;                /* SMs, CUs or OpenCL compute units */
    int plane_width_min;              /* warp / wavefront / subgroup widths */
    int plane_width_max;
    uint64_t shared_memory_per_group; /* bytes of shared/local memory per workgroup */
    int max_group_size;               /* threads per workgroup */
    int has_fp16_matrix;              /* fp16 matrix units (tensor cores / MFMA) */
    int has_bf16_matrix;
    int has_native_fp16;              /* fp16 arithmetic in kernels (cl_khr_fp16 on OpenCL) */
    int compute_capability;           /* CUDA: 90 for sm_90; HIP: gfx number; OpenCL: 0 */
} rudnn_device_info_t;

RUDNN_API rudnn_status_t rudnn_context_device_info(rudnn_context_t context,
                                                   rudnn_device_info_t *info);

/* ---- queues and events ------------------------------------------------- */

RUDNN_API rudnn_status_t rudnn_queue_create(rudnn_context_t context, rudnn_queue_t *queue);
/* Waits for the queue's work and releases it. Routing plans and dispatched tokens made on it
 * may outlive it (their memory is freed, not cached, when they are destroyed). */
RUDNN_API void rudnn_queue_destroy(rudnn_queue_t queue);
RUDNN_API rudnn_status_t rudnn_queue_synchronize(rudnn_queue_t queue);
RUDNN_API rudnn_context_t rudnn_queue_context(rudnn_queue_t queue);
/* The backend runtime's object behind the queue, for interop with the caller's own work (events,
 * CUDA graph capture): a cudaStream_t on cuda, a hipStream_t on hip, a cl_command_queue on opencl.
 * The queue keeps owning it: never destroy it. NULL when queue is NULL or the backend has none. */
RUDNN_API void *rudnn_queue_native_handle(rudnn_queue_t queue);

RUDNN_API rudnn_status_t rudnn_event_create(rudnn_context_t context, rudnn_event_t *event);
RUDNN_API void rudnn_event_destroy(rudnn_event_t event);
RUDNN_API rudnn_status_t rudnn_event_record(rudnn_event_t event, rudnn_queue_t queue);
/* Milliseconds between two recorded events; waits for end to complete. */
RUDNN_API rudnn_status_t rudnn_event_elapsed_ms(rudnn_event_t start, rudnn_event_t end,
                                                float *milliseconds);

/* ---- buffers ----------------------------------------------------------- */

RUDNN_API rudnn_status_t rudnn_buffer_create(rudnn_context_t context, size_t bytes,
                                             rudnn_buffer_t *buffer);
/* Experts made over the buffer keep its memory until they are destroyed too. A buffer
 * handed out by a plan or dispatched view is not the caller's: destroying it does nothing. */
RUDNN_API void rudnn_buffer_destroy(rudnn_buffer_t buffer);
/* Adds a reference to buffer: it then takes one more rudnn_buffer_destroy to free it. A buffer
 * with more than one reference is shared, and ops that honour copy on write (rudnn_paged_append)
 * write a copy of it instead. Does nothing for a buffer that is not the caller's (above). */
RUDNN_API void rudnn_buffer_retain(rudnn_buffer_t buffer);
RUDNN_API size_t rudnn_buffer_size(rudnn_buffer_t buffer);
RUDNN_API rudnn_context_t rudnn_buffer_context(rudnn_buffer_t buffer);

/* Blocking copies between host memory and a buffer range. */
RUDNN_API rudnn_status_t rudnn_buffer_write(rudnn_queue_t queue, rudnn_buffer_t buffer,
                                            size_t offset, const void *host, size_t bytes);
RUDNN_API rudnn_status_t rudnn_buffer_read(rudnn_queue_t queue, rudnn_buffer_t buffer,
                                           size_t offset, void *host, size_t bytes);
/* Asynchronous device-to-device copy on the queue. */
RUDNN_API rudnn_status_t rudnn_buffer_copy(rudnn_queue_t queue, rudnn_buffer_t dst,
                                           size_t dst_offset, rudnn_buffer_t src,
                                           size_t src_offset, size_t bytes);
/* Asynchronous fill of a range with a repeated byte. */
RUDNN_API rudnn_status_t rudnn_buffer_fill(rudnn_queue_t queue, rudnn_buffer_t buffer,
                                           size_t offset, uint8_t byte, size_t bytes);

/* ---- tensors ----------------------------------------------------------- */

#define RUDNN_MAX_RANK 8

/* A tensor descriptor: a view of a buffer. The caller owns it; it owns nothing.
 * strides are in elements; rudnn_tensor_init fills row-major strides. The ops and
 * rudnn_tensor_read/write take contiguous tensors (attention: any view with a contiguous last
 * dim); what other strides get (BAD_SHAPE, OUT_OF_BOUNDS or NOT_SUPPORTED) is the stride rule in
 * rudnn/status.h. */
typedef struct rudnn_tensor {
    rudnn_dtype_t dtype;
    int rank;
    int64_t dims[RUDNN_MAX_RANK];
    int64_t strides[RUDNN_MAX_RANK];
    rudnn_buffer_t buffer;
    size_t offset; /* bytes from the start of the buffer */
} rudnn_tensor_t;

/* Fills a contiguous row-major descriptor. Fails on rank outside 0..8,
 * negative dims or a NULL tensor. */
RUDNN_API rudnn_status_t rudnn_tensor_init(rudnn_tensor_t *tensor, rudnn_buffer_t buffer,
                                           size_t offset, rudnn_dtype_t dtype, int rank,
                                           const int64_t *dims);
/* Number of elements (product of dims; 1 for rank 0; 0 for NULL or a rank outside 0..8). */
RUDNN_API int64_t rudnn_tensor_numel(const rudnn_tensor_t *tensor);
/* Bytes a contiguous tensor of this shape and dtype occupies (0 where numel is). */
RUDNN_API size_t rudnn_tensor_bytes(const rudnn_tensor_t *tensor);
/* 1 if the strides are row-major contiguous; 0 for NULL or a rank outside 0..8. */
RUDNN_API int rudnn_tensor_is_contiguous(const rudnn_tensor_t *tensor);

/* Blocking whole-tensor copies for contiguous tensors; bytes must equal
 * rudnn_tensor_bytes(tensor). */
RUDNN_API rudnn_status_t rudnn_tensor_write(rudnn_queue_t queue, const rudnn_tensor_t *tensor,
                                            const void *host, size_t bytes);
RUDNN_API rudnn_status_t rudnn_tensor_read(rudnn_queue_t queue, const rudnn_tensor_t *tensor,
                                           void *host, size_t bytes);

/* Debugging: the name of the last kernel that a rudnn call on this thread launched,
 * "<family>.<kernel>" (e.g. "norm.bulk", "moe.wgmma_tma"), or "" before any launch. A call
 * that launches several kernels leaves the last one's name; a call that launches none (an
 * empty tensor, a rejected argument) leaves it unchanged. The string has static storage. */
RUDNN_API const char *rudnn_last_kernel(void);

#ifdef __cplusplus
}
#endif
#endif
