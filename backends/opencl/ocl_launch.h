/* Launch helpers shared by the OpenCL operator launchers (norm.c, moe.c):
 * dtype codes, local-size choice and one-dimensional launches. */
#ifndef RUDNN_OCL_LAUNCH_H
#define RUDNN_OCL_LAUNCH_H

#include "ocl_internal.h"
#include "program_cache.h"

/* The kernels' code for dtype (-DRUDNN_DTYPE: 0 F32, 1 F16, 2 BF16) and its
 * element size; NOT_SUPPORTED naming op and what (e.g. "logits") otherwise. */
rudnn_status_t ocl_dtype_code(rudnn_dtype_t dtype, const char *op, const char *what, int *code,
                              size_t *elem);

/* Largest power-of-two local size <= cap that the device and the program allow. */
size_t ocl_local_cap(const ocl_device_t *dev, const ocl_kernel_set_t *ks, size_t cap);

/* Power-of-two local size (<= cap and ocl_local_cap) for a work-group that
 * walks `work` elements: enough work-items to cover them, fewer on CPUs. */
size_t ocl_pick_local(const ocl_device_t *dev, const ocl_kernel_set_t *ks, uint64_t work,
                      size_t cap);

/* A kernel argument as clSetKernelArg takes it. */
typedef struct karg {
    size_t size;
    const void *value; /* NULL: local memory of size bytes */
} karg_t;

#define ARG(v) {sizeof(v), &(v)}
#define LOCAL_ARG(bytes) {(bytes), NULL}

/* Sets args[0..nargs) of kernel k of ks except args[group0_index] (the first
 * work-group of each launch, a cl_ulong), and enqueues `groups` work-groups
 * of `local` work-items, split into launches of fewer than 2^31 work-items
 * (NVIDIA's grid limit). names[k] and op name the kernel and the operation
 * in error messages. */
rudnn_status_t ocl_enqueue_groups(ocl_queue_t *q, ocl_kernel_set_t *ks, int k,
                                  const char *const *names, const char *op, const karg_t *args,
                                  cl_uint nargs, cl_uint group0_index, uint64_t groups,
                                  size_t local);

#endif
