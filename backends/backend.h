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
 *   OpenCL) plus a byte offset: rudnn_mem_ref_t.
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

#define RUDNN_BACKEND_ABI_VERSION 1u
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
} rudnn_host_services_t;

typedef struct rudnn_mem_ref {
    void *mem;      /* backend handle: device pointer or cl_mem */
    size_t offset;  /* bytes */
} rudnn_mem_ref_t;

/* ---- kernel plans ------------------------------------------------------- */

/* Row-wise normalization over the last axis: rows x cols, contiguous. */
typedef struct rudnn_norm_plan {
    rudnn_dtype_t dtype; /* of input/output: F32, F16 or BF16 */
    int64_t rows;        /* >= 1 (ops/ skips empty launches) */
    int64_t cols;        /* >= 1 */
    float eps;
} rudnn_norm_plan_t;

typedef struct rudnn_norm_kernels {
    /* beta.mem may be NULL (no shift). gamma/beta are F32 [cols]. */
    rudnn_status_t (*layer_norm)(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t x,
                                 rudnn_mem_ref_t gamma, rudnn_mem_ref_t beta, rudnn_mem_ref_t y);
    rudnn_status_t (*rms_norm)(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t x,
                               rudnn_mem_ref_t gamma, rudnn_mem_ref_t y);
    rudnn_status_t (*softmax)(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t x,
                              rudnn_mem_ref_t y);
    /* x = round(a + r); y = rms_norm(x); rstd F32 [rows]. x_out may alias a or r. */
    rudnn_status_t (*add_rms_norm)(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t a,
                                   rudnn_mem_ref_t r, rudnn_mem_ref_t gamma, rudnn_mem_ref_t y,
                                   rudnn_mem_ref_t rstd, rudnn_mem_ref_t x_out);
} rudnn_norm_kernels_t;


/* MoE (ops/moe.c plans; see include/rudnn/moe.h for the contract). */
typedef struct rudnn_route_kernel_plan {
    rudnn_dtype_t dtype;  /* logits dtype = weights dtype: F32, F16 or BF16 */
    int64_t tokens;       /* T >= 1 */
    int32_t experts;      /* E */
    int32_t top_k;
    int32_t renormalize;
    /* grouped sigmoid routing only */
    int32_t groups;
    int32_t selected_groups;
    int32_t group_top_two;
    float scale;
} rudnn_route_kernel_plan_t;

typedef struct rudnn_moe_rows_plan {
    rudnn_dtype_t dtype;        /* tokens / activations / expert weights dtype */
    rudnn_dtype_t weight_dtype; /* routing weights dtype (combine) */
    int64_t tokens;             /* T >= 1 */
    int32_t top_k;
    int32_t experts;            /* E */
    int64_t hidden;             /* H */
    int64_t inter;              /* I (experts only) */
    int64_t rows;               /* T * top_k */
} rudnn_moe_rows_plan_t;

typedef struct rudnn_moe_kernels {
    /* indices U32 [T, k], weights [T, k] in plan->dtype */
    rudnn_status_t (*route_softmax)(void *queue, const rudnn_route_kernel_plan_t *plan,
                                    rudnn_mem_ref_t logits, rudnn_mem_ref_t indices,
                                    rudnn_mem_ref_t weights);
    /* bias.mem may be NULL */
    rudnn_status_t (*route_sigmoid_grouped)(void *queue, const rudnn_route_kernel_plan_t *plan,
                                            rudnn_mem_ref_t logits, rudnn_mem_ref_t bias,
                                            rudnn_mem_ref_t indices, rudnn_mem_ref_t weights);
    /* From indices [T, k] (all < E): counts [E], offsets [E+1] (exclusive scan),
     * positions [T*k] (dispatched row of pair t*k+j; rows of one expert in pair
     * order) and row_token [T*k] (source token of each dispatched row). */
    rudnn_status_t (*dispatch_plan)(void *queue, const rudnn_moe_rows_plan_t *plan,
                                    rudnn_mem_ref_t indices, rudnn_mem_ref_t counts,
                                    rudnn_mem_ref_t offsets, rudnn_mem_ref_t positions,
                                    rudnn_mem_ref_t row_token);
    /* tokens[r, :] = input[row_token[r], :] */
    rudnn_status_t (*dispatch_gather)(void *queue, const rudnn_moe_rows_plan_t *plan,
                                      rudnn_mem_ref_t input, rudnn_mem_ref_t row_token,
                                      rudnn_mem_ref_t tokens);
    /* Scalar SwiGLU experts over dispatched rows grouped by offsets [E+1];
     * act is a workspace of rows * inter elements of plan->dtype. */
    rudnn_status_t (*experts_scalar)(void *queue, const rudnn_moe_rows_plan_t *plan,
                                     rudnn_mem_ref_t tokens, rudnn_mem_ref_t offsets,
                                     rudnn_mem_ref_t gate, rudnn_mem_ref_t up, rudnn_mem_ref_t down,
                                     rudnn_mem_ref_t act, rudnn_mem_ref_t out);
    /* Matrix-unit SwiGLU experts (F16/BF16); NULL where unsupported. Same
     * arguments and workspace as experts_scalar. */
    rudnn_status_t (*experts_tensor_core)(void *queue, const rudnn_moe_rows_plan_t *plan,
                                          rudnn_mem_ref_t tokens, rudnn_mem_ref_t offsets,
                                          rudnn_mem_ref_t gate, rudnn_mem_ref_t up,
                                          rudnn_mem_ref_t down, rudnn_mem_ref_t act,
                                          rudnn_mem_ref_t out);
    /* out[t, :] = sum_j weights[t, j] * expert_out[positions[t*k + j], :] (FP32) */
    rudnn_status_t (*combine)(void *queue, const rudnn_moe_rows_plan_t *plan,
                              rudnn_mem_ref_t expert_out, rudnn_mem_ref_t positions,
                              rudnn_mem_ref_t weights, rudnn_mem_ref_t out);

    /* Optional entries (appended; NULL keeps the behaviour described). */

    /* Workspace bytes experts_tensor_core needs for plan (it reads dtype,
     * experts, hidden, inter and rows only). NULL: rows * inter elements of
     * plan->dtype, as experts_scalar. Sets an error (e.g. NOT_SUPPORTED when
     * the size overflows) on failure. */
    rudnn_status_t (*experts_tensor_core_workspace)(void *device, const rudnn_moe_rows_plan_t *plan,
                                                    size_t *bytes);
    /* Whether Auto should pick experts_tensor_core on this device for weights
     * of plan's dtype, experts, hidden and inter (rows is not known: 0), when
     * TensorCore can run at all. NULL: always. A backend whose matrix path is
     * slower than its scalar one on some devices says 0 there. */
    int (*experts_tensor_core_auto)(void *device, const rudnn_moe_rows_plan_t *plan);
} rudnn_moe_kernels_t;

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

    /* kernel tables (NULL: family not implemented by this backend) */
    const rudnn_norm_kernels_t *norm;
    const rudnn_moe_kernels_t *moe;
} rudnn_backend_t;

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
