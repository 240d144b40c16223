/* Launch helpers shared by the OpenCL operator launchers (norm.c, moe.c,
 * moe_gemm.c): dtype codes, local-size choice and one-dimensional launches. */
#ifndef RUDNN_OCL_LAUNCH_H
#define RUDNN_OCL_LAUNCH_H

#include "ocl_internal.h"
#include "program_cache.h"

/* The kernels' code for dtype (-DRUDNN_DTYPE: 0 F32, 1 F16, 2 BF16) and its
 * element size; NOT_SUPPORTED naming op and what (e.g. "logits") otherwise. */
rudnn_status_t ocl_dtype_code(rudnn_dtype_t dtype, const char *op, const char *what, int *code,
                              size_t *elem);

/* Three int64 values as a long4 (the fourth lane 0), five as a long8 (the last three 0): the
 * shapes and strides the kernels take. */
cl_long4 ocl_long4_of(const int64_t v[3]);
cl_long8 ocl_long8_of(const int64_t v[5]);

/* The program of source (label names it in messages) built for dtype (-DRUDNN_DTYPE, the code of
 * ocl_dtype_code; what names the tensor whose dtype it is) and the extra options, or "". */
rudnn_status_t ocl_dtype_program(ocl_queue_t *q, rudnn_dtype_t dtype, const char *op, const char *what,
                                 const char *label, const char *source, const char *extra,
                                 const char *const *kernel_names, size_t kernel_count, ocl_kernel_set_t **ks);

/* Largest power-of-two local size <= cap that the device and the program allow. */
size_t ocl_local_cap(const ocl_device_t *dev, const ocl_kernel_set_t *ks, size_t cap);

/* Power-of-two local size (<= cap and ocl_local_cap) for a work-group that
 * walks `work` elements: enough work-items to cover them, fewer on CPUs. */
size_t ocl_pick_local(const ocl_device_t *dev, const ocl_kernel_set_t *ks, uint64_t work,
                      size_t cap);

/* A kernel argument as clSetKernelArg takes it, or the marker of the per-launch
 * first work-group (see GROUP0_ARG). */
typedef enum karg_kind { KARG_VALUE, KARG_LOCAL, KARG_GROUP0 } karg_kind_t;

typedef struct karg {
    karg_kind_t kind;
    size_t size;
    const void *value; /* KARG_VALUE only; NULL otherwise */
} karg_t;

/* A kernel's arguments in signature order; count is the compiler's (KARGS). */
typedef struct karg_list {
    const karg_t *args;
    cl_uint count;
} karg_list_t;

#define ARG(v) {KARG_VALUE, sizeof(v), &(v)}
#define LOCAL_ARG(bytes) {KARG_LOCAL, (bytes), NULL}

/* What a LOCAL_ARG of `bytes` may take of a work-group's local memory: a driver places each local
 * argument at an alignment of its own (NVIDIA's refused a launch whose six arrays summed to 20
 * bytes under CL_DEVICE_LOCAL_MEM_SIZE), so budgets count each array rounded up to this. */
#define OCL_LOCAL_ARG_ALIGN 256u
static inline uint64_t ocl_local_arg_bytes(uint64_t bytes)
{
    return (bytes + OCL_LOCAL_ARG_ALIGN - 1) / OCL_LOCAL_ARG_ALIGN * OCL_LOCAL_ARG_ALIGN;
}
/* Stands where the kernel takes its ulong group0 (row0): the first work-group
 * of the launch, which ocl_enqueue_groups sets per split launch. */
#define GROUP0_ARG() {KARG_GROUP0, sizeof(cl_ulong), NULL}

/* The arguments as a list whose length the compiler counts: no hand-written
 * count or group0 index can disagree with the list. The array lives until the
 * end of the enclosing block (a compound literal). */
#define KARGS(...)                                                                                 \
    ((karg_list_t){(const karg_t[]){__VA_ARGS__},                                                  \
                   (cl_uint)(sizeof((const karg_t[]){__VA_ARGS__}) / sizeof(karg_t))})

/* Sets the arguments of kernel k of ks, and enqueues `groups` work-groups of
 * `local` work-items, split into launches of fewer than 2^31 work-items
 * (NVIDIA's grid limit), each with its first work-group in the GROUP0_ARG()
 * slot (exactly one, else INTERNAL). names[k] and op name the kernel and the
 * operation in error messages. */
rudnn_status_t ocl_enqueue_groups(ocl_queue_t *q, ocl_kernel_set_t *ks, int k,
                                  const char *const *names, const char *op, karg_list_t args,
                                  uint64_t groups, size_t local);

#endif
