/* Launch helpers shared by the OpenCL operator launchers (see ocl_launch.h). */
#include "ocl_launch.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>

/* CPU devices (PoCL) run a work-group as loops over its work-items, vectorised
 * across them: narrow groups are 2-3x faster on many-row shapes than 256. They
 * get about one work-item per OCL_CPU_ELEMS_PER_ITEM elements, at least one
 * AVX-512 vector of floats; this also bounds how many values one work-item
 * sums in sequence (accuracy). */
#define OCL_CPU_MIN_LOCAL 16u
#define OCL_CPU_ELEMS_PER_ITEM 64u

/* Work-items per launch stay below 2^31 (NVIDIA's grid limit, 32-bit size_t). */
#ifndef OCL_MAX_GLOBAL
#define OCL_MAX_GLOBAL ((size_t)INT32_MAX)
#endif

rudnn_status_t ocl_dtype_code(rudnn_dtype_t dtype, const char *op, const char *what, int *code,
                              size_t *elem)
{
    *code = 0;
    *elem = 1;
    switch (dtype) {
    case RUDNN_F32: *code = 0; *elem = 4; return RUDNN_STATUS_SUCCESS;
    case RUDNN_F16: *code = 1; *elem = 2; return RUDNN_STATUS_SUCCESS;
    case RUDNN_BF16: *code = 2; *elem = 2; return RUDNN_STATUS_SUCCESS;
    default:
        return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED, "%s: opencl: %s dtype %d not supported", op,
                        what, (int)dtype);
    }
}

static size_t pow2_floor(size_t v)
{
    size_t p = 1;
    while (p <= v / 2) {
        p *= 2;
    }
    return p;
}

static size_t pow2_ceil(size_t v)
{
    size_t p = 1;
    while (p < v) {
        p *= 2;
    }
    return p;
}

size_t ocl_local_cap(const ocl_device_t *dev, const ocl_kernel_set_t *ks, size_t cap)
{
    if (dev->max_group_size > 0 && dev->max_group_size < cap) {
        cap = dev->max_group_size;
    }
    if (dev->max_item_size0 > 0 && dev->max_item_size0 < cap) {
        cap = dev->max_item_size0;
    }
    if (ks->max_group > 0 && ks->max_group < cap) {
        cap = ks->max_group;
    }
    return pow2_floor(cap ? cap : 1);
}

size_t ocl_pick_local(const ocl_device_t *dev, const ocl_kernel_set_t *ks, uint64_t work,
                      size_t cap)
{
    size_t want = pow2_ceil(work > cap ? cap : (size_t)(work ? work : 1));
    if (dev->is_cpu) {
        const uint64_t lanes = (work + OCL_CPU_ELEMS_PER_ITEM - 1) / OCL_CPU_ELEMS_PER_ITEM;
        size_t cpu = pow2_ceil(lanes > cap ? cap : (size_t)lanes);
        if (cpu < OCL_CPU_MIN_LOCAL) {
            cpu = OCL_CPU_MIN_LOCAL;
        }
        if (cpu < want) {
            want = cpu;
        }
    }
    const size_t lmax = ocl_local_cap(dev, ks, cap);
    return want < lmax ? want : lmax;
}

/* PoCL before 6.0 (3.1 in Debian 12). Its CPU drivers keep the dlopen'ed work-group functions in
 * one process-wide list, an entry per kernel (identical programs in different contexts share
 * them), local size and widest grid. A launch takes an entry that fits its grid (a new one for a
 * wider grid), but a finished launch gives back the first entry of its kernel and local size,
 * whatever the grid. With launches of one kernel and one local size but different grids in flight
 * on several queues, it gives back an entry nobody holds and PoCL aborts
 * ("pocl_release_dlhandle_cache: Assertion 'found->ref_count > 0' failed"); PoCL 6.0 fixed it
 * (commit 9184812d, "fix dlhandle cache"). test_threads' grid_sizes aborted 6 runs of 40 here
 * without this lock. So on such a PoCL a launch holds it until its kernel has finished: one launch
 * of ours in flight in the process (CLBlast's calls wait likewise, moe_gemm.c). A CPU device runs
 * each kernel on all its cores anyway. */
static pthread_mutex_t g_serial_lock = PTHREAD_MUTEX_INITIALIZER;

/* Where args holds its one GROUP0_ARG(); -1 when it holds none or several. */
static int group0_index(karg_list_t args)
{
    int found = -1;
    for (cl_uint i = 0; i < args.count; i++) {
        if (args.args[i].kind == KARG_GROUP0) {
            if (found >= 0) {
                return -1;
            }
            found = (int)i;
        }
    }
    return found;
}

rudnn_status_t ocl_enqueue_groups(ocl_queue_t *q, ocl_kernel_set_t *ks, int k,
                                  const char *const *names, const char *op, karg_list_t args,
                                  uint64_t groups, size_t local)
{
    const int group0 = group0_index(args);
    if (group0 < 0) {
        return ocl_fail(RUDNN_STATUS_INTERNAL,
                        "%s: opencl: the arguments of %s need exactly one GROUP0_ARG()", op,
                        names[k]);
    }
    cl_kernel kernel = ks->kernels[k];
    char call[128];
    cl_int err = CL_SUCCESS;
    const int serial = q->dev->serial_launches;
    cl_event last = NULL; /* serial: the last split launch */

    if (serial) {
        pthread_mutex_lock(&g_serial_lock);
    }
    pthread_mutex_lock(&ks->launch_lock);
    for (cl_uint i = 0; i < args.count && err == CL_SUCCESS; i++) {
        const karg_t *a = &args.args[i];
        if (a->kind != KARG_GROUP0) {
            err = clSetKernelArg(kernel, i, a->size, a->value); /* NULL: local memory */
            if (err != CL_SUCCESS) {
                snprintf(call, sizeof call, "clSetKernelArg(%s, %u)", names[k], (unsigned)i);
            }
        }
    }
    uint64_t chunk = (uint64_t)(OCL_MAX_GLOBAL / local);
    if (chunk == 0) {
        chunk = 1;
    }
    for (uint64_t g0 = 0; err == CL_SUCCESS && g0 < groups; g0 += chunk) {
        const uint64_t left = groups - g0;
        const uint64_t n = left < chunk ? left : chunk;
        const cl_ulong first = (cl_ulong)g0;
        err = clSetKernelArg(kernel, (cl_uint)group0, sizeof first, &first);
        if (err != CL_SUCCESS) {
            snprintf(call, sizeof call, "clSetKernelArg(%s, group0)", names[k]);
            break;
        }
        const size_t global = (size_t)n * local;
        cl_event ev = NULL;
        err = clEnqueueNDRangeKernel(q->q, kernel, 1, NULL, &global, &local, 0, NULL,
                                     serial ? &ev : NULL);
        if (err != CL_SUCCESS) {
            snprintf(call, sizeof call, "clEnqueueNDRangeKernel(%s, global %zu, local %zu)",
                     names[k], global, local);
        } else if (ev != NULL) {
            if (last != NULL) {
                clReleaseEvent(last);
            }
            last = ev;
        }
    }
    pthread_mutex_unlock(&ks->launch_lock);
    if (last != NULL) { /* the queue is in order: the earlier split launches are done too */
        const cl_int waited = clWaitForEvents(1, &last);
        clReleaseEvent(last);
        if (err == CL_SUCCESS && waited != CL_SUCCESS) {
            err = waited;
            snprintf(call, sizeof call, "clWaitForEvents(%s)", names[k]);
        }
    }
    if (serial) {
        pthread_mutex_unlock(&g_serial_lock);
    }
    if (err != CL_SUCCESS) {
        const rudnn_status_t code =
            (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY)
                ? RUDNN_STATUS_ALLOC_FAILED
                : RUDNN_STATUS_DEVICE_ERROR;
        return ocl_fail(code, "%s: opencl: %s failed: %s (%d)", op, call, ocl_error_name(err),
                        (int)err);
    }
    return RUDNN_STATUS_SUCCESS;
}

cl_long4 ocl_long4_of(const int64_t v[3])
{
    cl_long4 r;
    r.s[0] = v[0], r.s[1] = v[1], r.s[2] = v[2], r.s[3] = 0;
    return r;
}

cl_long8 ocl_long8_of(const int64_t v[5])
{
    cl_long8 r;
    for (int i = 0; i < 8; i++)
        r.s[i] = i < 5 ? v[i] : 0;
    return r;
}

rudnn_status_t ocl_dtype_program(ocl_queue_t *q, rudnn_dtype_t dtype, const char *op, const char *what,
                                 const char *label, const char *source, const char *extra,
                                 const char *const *kernel_names, size_t kernel_count, ocl_kernel_set_t **ks)
{
    int code;
    size_t elem;
    RUDNN_TRY(ocl_dtype_code(dtype, op, what, &code, &elem));
    char options[128];
    snprintf(options, sizeof options, "-DRUDNN_DTYPE=%d%s%s", code, extra[0] ? " " : "", extra);
    return ocl_program_get(q->dev, label, source, options, kernel_names, kernel_count, ks);
}
