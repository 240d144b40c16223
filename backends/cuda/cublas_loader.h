/* cuBLAS for the CUDA plugin, opened at run time (dlopen of libcublas.so.13, .12, then .so) and never
 * linked: the plugin must keep loading with nothing but libcuda.so.1, and a machine without cuBLAS
 * loses only the ops that ask for it (NOT_SUPPORTED naming the op and the files tried). The
 * headers give the types only. CUDA only: hipcc does not compile this (backends/hip/meson.build).
 *
 * One handle per device, created on first use and kept until the device's last context closes
 * (the library stays loaded: RTLD_NODELETE, as the plugin). A handle is not safe to use from two threads at once, so a session
 * holds the device's lock from rdg_cublas_begin to rdg_cublas_end (sessions do not nest):
 *
 *     RdgCublasSession s;
 *     TRY(rdg_cublas_begin(q, "moe experts (cuBLAS)", &s));    the handle, bound to q's stream
 *     st = rdg_cublas_scratch(&s, dev_bytes, &dev, host_bytes, &host);    optional
 *     if (st == RUDNN_STATUS_SUCCESS)
 *         st = rdg_cublas_check(&s, s.api->gemm_ex(s.handle, ...), "cublasGemmEx (...)");
 *     return rdg_cublas_end(&s, st);                           on every path after begin succeeded
 */
#ifndef RUDNN_CUBLAS_LOADER_H
#define RUDNN_CUBLAS_LOADER_H

#include <cublas_v2.h>

#include "rdg_internal.h"

/* The entry points used, with the signatures of cuBLAS 12.5+ (written out: the C++ header overloads
 * cublasGemmEx, and headers before 12.5 lack the grouped GEMM). */
typedef cublasStatus_t (*rdg_cublas_create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*rdg_cublas_destroy_fn)(cublasHandle_t);
typedef cublasStatus_t (*rdg_cublas_set_stream_fn)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*rdg_cublas_set_math_mode_fn)(cublasHandle_t, cublasMath_t);
typedef cublasStatus_t (*rdg_cublas_get_property_fn)(libraryPropertyType, int *);
typedef cublasStatus_t (*rdg_cublas_gemm_ex_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                const void *, const void *, cudaDataType, int, const void *,
                                                cudaDataType, int, const void *, void *, cudaDataType, int,
                                                cublasComputeType_t, cublasGemmAlgo_t);
typedef cublasStatus_t (*rdg_cublas_gemm_grouped_fn)(cublasHandle_t, const cublasOperation_t[],
                                                     const cublasOperation_t[], const int[], const int[], const int[],
                                                     const void *, const void *const[], cudaDataType, const int[],
                                                     const void *const[], cudaDataType, const int[], const void *,
                                                     void *const[], cudaDataType, const int[], int, const int[],
                                                     cublasComputeType_t);

typedef struct RdgCublas {
    rdg_cublas_create_fn create;
    rdg_cublas_destroy_fn destroy;
    rdg_cublas_set_stream_fn set_stream;
    rdg_cublas_set_math_mode_fn set_math_mode;
    rdg_cublas_gemm_ex_fn gemm_ex;
    rdg_cublas_gemm_grouped_fn gemm_grouped; /* cublasGemmGroupedBatchedEx; NULL before cuBLAS 12.5 */
    char version[96];                        /* "cuBLAS 13.1.0, libcublas.so.13", for messages */
} RdgCublas;

typedef struct RdgCublasSession {
    const RdgCublas *api;
    cublasHandle_t handle; /* the device's, bound to q's stream */
    rdg_queue_t *q;
    const char *op; /* names the op in messages */
    int used;       /* rdg_cublas_scratch was called: rdg_cublas_end records the device's event */
} RdgCublasSession;

/* Loads cuBLAS (once per process), makes q's device current, takes the device's lock and binds its
 * handle (math mode: default, reductions in the compute type) to q's stream. On failure nothing is
 * held: NOT_SUPPORTED "<backend>: <op>: cuBLAS not found (tried ...)" when it does not load, the
 * mapped status of a failed cuBLAS call otherwise. */
rudnn_status_t rdg_cublas_begin(rdg_queue_t *q, const char *op, RdgCublasSession *s);

/* The device's scratch for this session: device memory (at least dev_bytes, 256-byte aligned) that
 * q's stream may use after every earlier session's work on it, and pinned host memory (host_bytes)
 * whose copies from earlier sessions have run, so it may be written now. Kept per device and grown
 * on demand (stream-ordered cudaMallocAsync / cudaFreeAsync). Either size may be 0 (pointer NULL). */
rudnn_status_t rdg_cublas_scratch(RdgCublasSession *s, size_t dev_bytes, void **dev, size_t host_bytes, void **host);

/* SUCCESS, or the status and message of a failed cuBLAS call ("<backend>: <op>: <call> failed:
 * CUBLAS_STATUS_..."): ALLOC_FAILED for ALLOC_FAILED, NOT_SUPPORTED for NOT_SUPPORTED and
 * ARCH_MISMATCH, INTERNAL for INVALID_VALUE (our arguments), DEVICE_ERROR otherwise. */
rudnn_status_t rdg_cublas_check(const RdgCublasSession *s, cublasStatus_t st, const char *call);

/* Ends the session: records the device's scratch event on q's stream (when scratch was used) and
 * releases the lock. Returns status, or the recording's failure when status is SUCCESS. */
rudnn_status_t rdg_cublas_end(RdgCublasSession *s, rudnn_status_t status);

#endif
