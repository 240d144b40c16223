/* The OpenCL backend plugin (librudnn-opencl.so): devices, memory, queues,
 * events and the vtable. Kernel launchers live in norm.c and moe.c, programs in
 * program_cache.c. OpenCL 1.2 host API only. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocl_internal.h"
#include "program_cache.h"

/* ---- host services and errors --------------------------------------------- */

static rudnn_status_t (*g_set_error)(rudnn_status_t status, const char *fmt, ...);
static void (*g_note_kernel)(const char *name);
static int (*g_fail_allocation)(void);
static char *g_cache_dir;

int ocl_alloc_fails(void) { return g_fail_allocation != NULL && g_fail_allocation(); }

void *ocl_malloc(size_t bytes) { return ocl_alloc_fails() ? NULL : malloc(bytes); }

void *ocl_calloc(size_t count, size_t size) { return ocl_alloc_fails() ? NULL : calloc(count, size); }

rudnn_status_t ocl_fail(rudnn_status_t status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g_set_error != NULL) {
        return g_set_error(status, "%s", msg);
    }
    return status;
}

const char *ocl_cache_dir(void) { return g_cache_dir; }

const char *ocl_error_name(cl_int err)
{
    /* Numeric values, so names of codes newer than the 1.2 headers resolve too. */
    switch (err) {
    case 0: return "CL_SUCCESS";
    case -1: return "CL_DEVICE_NOT_FOUND";
    case -2: return "CL_DEVICE_NOT_AVAILABLE";
    case -3: return "CL_COMPILER_NOT_AVAILABLE";
    case -4: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case -5: return "CL_OUT_OF_RESOURCES";
    case -6: return "CL_OUT_OF_HOST_MEMORY";
    case -7: return "CL_PROFILING_INFO_NOT_AVAILABLE";
    case -8: return "CL_MEM_COPY_OVERLAP";
    case -9: return "CL_IMAGE_FORMAT_MISMATCH";
    case -10: return "CL_IMAGE_FORMAT_NOT_SUPPORTED";
    case -11: return "CL_BUILD_PROGRAM_FAILURE";
    case -12: return "CL_MAP_FAILURE";
    case -13: return "CL_MISALIGNED_SUB_BUFFER_OFFSET";
    case -14: return "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST";
    case -15: return "CL_COMPILE_PROGRAM_FAILURE";
    case -16: return "CL_LINKER_NOT_AVAILABLE";
    case -17: return "CL_LINK_PROGRAM_FAILURE";
    case -18: return "CL_DEVICE_PARTITION_FAILED";
    case -19: return "CL_KERNEL_ARG_INFO_NOT_AVAILABLE";
    case -30: return "CL_INVALID_VALUE";
    case -31: return "CL_INVALID_DEVICE_TYPE";
    case -32: return "CL_INVALID_PLATFORM";
    case -33: return "CL_INVALID_DEVICE";
    case -34: return "CL_INVALID_CONTEXT";
    case -35: return "CL_INVALID_QUEUE_PROPERTIES";
    case -36: return "CL_INVALID_COMMAND_QUEUE";
    case -37: return "CL_INVALID_HOST_PTR";
    case -38: return "CL_INVALID_MEM_OBJECT";
    case -39: return "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR";
    case -40: return "CL_INVALID_IMAGE_SIZE";
    case -41: return "CL_INVALID_SAMPLER";
    case -42: return "CL_INVALID_BINARY";
    case -43: return "CL_INVALID_BUILD_OPTIONS";
    case -44: return "CL_INVALID_PROGRAM";
    case -45: return "CL_INVALID_PROGRAM_EXECUTABLE";
    case -46: return "CL_INVALID_KERNEL_NAME";
    case -47: return "CL_INVALID_KERNEL_DEFINITION";
    case -48: return "CL_INVALID_KERNEL";
    case -49: return "CL_INVALID_ARG_INDEX";
    case -50: return "CL_INVALID_ARG_VALUE";
    case -51: return "CL_INVALID_ARG_SIZE";
    case -52: return "CL_INVALID_KERNEL_ARGS";
    case -53: return "CL_INVALID_WORK_DIMENSION";
    case -54: return "CL_INVALID_WORK_GROUP_SIZE";
    case -55: return "CL_INVALID_WORK_ITEM_SIZE";
    case -56: return "CL_INVALID_GLOBAL_OFFSET";
    case -57: return "CL_INVALID_EVENT_WAIT_LIST";
    case -58: return "CL_INVALID_EVENT";
    case -59: return "CL_INVALID_OPERATION";
    case -60: return "CL_INVALID_GL_OBJECT";
    case -61: return "CL_INVALID_BUFFER_SIZE";
    case -62: return "CL_INVALID_MIP_LEVEL";
    case -63: return "CL_INVALID_GLOBAL_WORK_SIZE";
    case -64: return "CL_INVALID_PROPERTY";
    case -65: return "CL_INVALID_IMAGE_DESCRIPTOR";
    case -66: return "CL_INVALID_COMPILER_OPTIONS";
    case -67: return "CL_INVALID_LINKER_OPTIONS";
    case -68: return "CL_INVALID_DEVICE_PARTITION_COUNT";
    case -69: return "CL_INVALID_PIPE_SIZE";
    case -70: return "CL_INVALID_DEVICE_QUEUE";
    case -71: return "CL_INVALID_SPEC_ID";
    case -72: return "CL_MAX_SIZE_RESTRICTION_EXCEEDED";
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    case -9999: return "NVIDIA_ILLEGAL_MEMORY_ACCESS";
    default: return "unknown OpenCL error";
    }
}

rudnn_status_t ocl_cl_fail(const char *call, cl_int err)
{
    const rudnn_status_t st = (err == CL_MEM_OBJECT_ALLOCATION_FAILURE ||
                               err == CL_OUT_OF_HOST_MEMORY)
                                  ? RUDNN_STATUS_ALLOC_FAILED
                                  : RUDNN_STATUS_DEVICE_ERROR;
    return ocl_fail(st, "opencl: %s failed: %s (%d)", call, ocl_error_name(err), (int)err);
}

#define CL_CHECK(call_name, expr)                                                                 \
    do {                                                                                           \
        const cl_int err_ = (expr);                                                                \
        if (err_ != CL_SUCCESS) {                                                                  \
            return ocl_cl_fail(call_name, err_);                                                   \
        }                                                                                          \
    } while (0)

/* ---- devices ---------------------------------------------------------------- */

typedef struct ocl_device_slot {
    cl_platform_id platform;
    cl_device_id device;
} ocl_device_slot_t;

static ocl_device_slot_t *g_devices;
static int g_device_count;

static int has_extension(const char *list, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n) {
        const int starts = (p == list) || p[-1] == ' ';
        const int ends = p[n] == '\0' || p[n] == ' ';
        if (starts && ends) {
            return 1;
        }
    }
    return 0;
}

/* PoCL's major release from CL_PLATFORM_VERSION ("OpenCL 3.0 PoCL 3.1+debian ...", "pocl 1.8"
 * before 3.0); 0 when the platform is not PoCL. */
static int pocl_release(cl_platform_id platform)
{
    char v[512];
    if (clGetPlatformInfo(platform, CL_PLATFORM_VERSION, sizeof v, v, NULL) != CL_SUCCESS) {
        return 0;
    }
    v[sizeof v - 1] = '\0';
    const char *p = strstr(v, "PoCL ");
    if (p == NULL) {
        p = strstr(v, "pocl ");
    }
    return p != NULL ? atoi(p + 5) : 0;
}

/* Appends the devices of one type class from every platform. */
static rudnn_status_t gather(cl_platform_id *platforms, cl_uint np, cl_device_type type,
                             ocl_device_slot_t **list, int *count, int *cap)
{
    for (cl_uint p = 0; p < np; p++) {
        cl_uint nd = 0;
        cl_int err = clGetDeviceIDs(platforms[p], type, 0, NULL, &nd);
        if (err == CL_DEVICE_NOT_FOUND || (err == CL_SUCCESS && nd == 0)) {
            continue;
        }
        if (err != CL_SUCCESS) {
            continue; /* a broken platform does not hide the others */
        }
        cl_device_id *ids = (cl_device_id *)calloc(nd, sizeof *ids);
        if (ids == NULL) {
            return ocl_fail(RUDNN_STATUS_ALLOC_FAILED, "opencl: out of host memory");
        }
        err = clGetDeviceIDs(platforms[p], type, nd, ids, NULL);
        if (err != CL_SUCCESS) {
            free(ids);
            continue;
        }
        for (cl_uint d = 0; d < nd; d++) {
            if (*count == *cap) {
                const int ncap = *cap ? *cap * 2 : 8;
                ocl_device_slot_t *grown =
                    (ocl_device_slot_t *)realloc(*list, (size_t)ncap * sizeof **list);
                if (grown == NULL) {
                    free(ids);
                    return ocl_fail(RUDNN_STATUS_ALLOC_FAILED, "opencl: out of host memory");
                }
                *list = grown;
                *cap = ncap;
            }
            (*list)[*count].platform = platforms[p];
            (*list)[*count].device = ids[d];
            (*count)++;
        }
        free(ids);
    }
    return RUDNN_STATUS_SUCCESS;
}

void ocl_note_kernel(const char *name)
{
    if (g_note_kernel != NULL) {
        g_note_kernel(name);
    }
}

static rudnn_status_t ocl_init(const rudnn_host_services_t *host, int *device_count)
{
    if (host != NULL) {
        g_set_error = host->set_error;
        g_note_kernel = host->struct_size >= RUDNN_TABLE_END(rudnn_host_services_t, note_kernel)
                            ? host->note_kernel
                            : NULL;
        g_fail_allocation =
            host->struct_size >= RUDNN_TABLE_END(rudnn_host_services_t, fail_allocation)
                ? host->fail_allocation
                : NULL;
        free(g_cache_dir);
        g_cache_dir = NULL;
        if (host->struct_size >=
                offsetof(rudnn_host_services_t, cache_dir) + sizeof(host->cache_dir) &&
            host->cache_dir != NULL && host->cache_dir[0] != '\0') {
            const size_t n = strlen(host->cache_dir) + 1;
            g_cache_dir = (char *)malloc(n);
            if (g_cache_dir != NULL) {
                memcpy(g_cache_dir, host->cache_dir, n);
            }
        }
    }
    free(g_devices);
    g_devices = NULL;
    g_device_count = 0;
    *device_count = 0;

    cl_uint np = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &np);
    if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (err == CL_SUCCESS && np == 0)) {
        return ocl_fail(RUDNN_STATUS_BACKEND_UNAVAILABLE,
                        "opencl: no OpenCL platform found (is an ICD installed? see "
                        "/etc/OpenCL/vendors)");
    }
    if (err != CL_SUCCESS) {
        return ocl_fail(RUDNN_STATUS_BACKEND_UNAVAILABLE,
                        "opencl: clGetPlatformIDs failed: %s (%d)", ocl_error_name(err), (int)err);
    }
    cl_platform_id *platforms = (cl_platform_id *)calloc(np, sizeof *platforms);
    if (platforms == NULL) {
        return ocl_fail(RUDNN_STATUS_ALLOC_FAILED, "opencl: out of host memory");
    }
    err = clGetPlatformIDs(np, platforms, NULL);
    if (err != CL_SUCCESS) {
        free(platforms);
        return ocl_fail(RUDNN_STATUS_BACKEND_UNAVAILABLE,
                        "opencl: clGetPlatformIDs failed: %s (%d)", ocl_error_name(err), (int)err);
    }

    /* GPUs first (on the GPU machine device 0 is the GPU), then the rest. */
    ocl_device_slot_t *list = NULL;
    int count = 0, cap = 0;
    rudnn_status_t st = gather(platforms, np, CL_DEVICE_TYPE_GPU, &list, &count, &cap);
    if (st == RUDNN_STATUS_SUCCESS) {
        st = gather(platforms, np, CL_DEVICE_TYPE_CPU | CL_DEVICE_TYPE_ACCELERATOR, &list, &count,
                    &cap);
    }
    free(platforms);
    if (st != RUDNN_STATUS_SUCCESS) {
        free(list);
        return st;
    }
    if (count == 0) {
        free(list);
        return ocl_fail(RUDNN_STATUS_BACKEND_UNAVAILABLE,
                        "opencl: %u OpenCL platform(s) found but no GPU, CPU or accelerator "
                        "device",
                        (unsigned)np);
    }
    g_devices = list;
    g_device_count = count;
    *device_count = count;
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t device_string(cl_device_id dev, cl_device_info what, const char *what_name,
                                    char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    cl_int err = clGetDeviceInfo(dev, what, 0, NULL, &n);
    if (err != CL_SUCCESS) {
        char call[96];
        snprintf(call, sizeof call, "clGetDeviceInfo(%s)", what_name);
        return ocl_cl_fail(call, err);
    }
    char *buf = (char *)ocl_malloc(n + 1);
    if (buf == NULL) {
        return ocl_fail(RUDNN_STATUS_ALLOC_FAILED, "opencl: out of host memory");
    }
    err = clGetDeviceInfo(dev, what, n, buf, NULL);
    if (err != CL_SUCCESS) {
        free(buf);
        char call[96];
        snprintf(call, sizeof call, "clGetDeviceInfo(%s)", what_name);
        return ocl_cl_fail(call, err);
    }
    buf[n] = '\0';
    snprintf(out, cap, "%s", buf);
    free(buf);
    return RUDNN_STATUS_SUCCESS;
}

#define DEV_STRING(dev, what, out)                                                                 \
    do {                                                                                           \
        st = device_string((dev), (what), #what, (out), sizeof(out));                              \
        if (st != RUDNN_STATUS_SUCCESS) {                                                          \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

#define DEV_VALUE(dev, what, var)                                                                  \
    do {                                                                                           \
        const cl_int e_ = clGetDeviceInfo((dev), (what), sizeof(var), &(var), NULL);               \
        if (e_ != CL_SUCCESS) {                                                                    \
            st = ocl_cl_fail("clGetDeviceInfo(" #what ")", e_);                                    \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

static void ocl_device_close(void *device);

/* Do marker events get device timestamps? Some drivers give 0 or
 * CL_PROFILING_INFO_NOT_AVAILABLE for markers/barriers; kernels always have
 * them. Probe: fill a small buffer, then a marker; both must be timed in order. */
static int probe_marker_timestamps(ocl_device_t *dev)
{
#ifdef OCL_FORCE_KERNEL_TIMESTAMPS
    (void)dev;
    return 0;
#else
    cl_int err;
    int ok = 0;
    cl_command_queue q =
        clCreateCommandQueue(dev->context, dev->id, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS) {
        return 0;
    }
    cl_mem m = clCreateBuffer(dev->context, CL_MEM_READ_WRITE, 64, NULL, &err);
    if (err == CL_SUCCESS) {
        const cl_uchar zero = 0;
        cl_event fill = NULL, mark = NULL;
        if (clEnqueueFillBuffer(q, m, &zero, 1, 0, 64, 0, NULL, &fill) == CL_SUCCESS &&
            clEnqueueMarkerWithWaitList(q, 0, NULL, &mark) == CL_SUCCESS &&
            clFinish(q) == CL_SUCCESS) {
            cl_ulong fill_end = 0, mark_end = 0;
            if (clGetEventProfilingInfo(fill, CL_PROFILING_COMMAND_END, sizeof fill_end,
                                        &fill_end, NULL) == CL_SUCCESS &&
                clGetEventProfilingInfo(mark, CL_PROFILING_COMMAND_END, sizeof mark_end,
                                        &mark_end, NULL) == CL_SUCCESS &&
                mark_end != 0 && mark_end >= fill_end) {
                ok = 1;
            }
        }
        if (fill != NULL) {
            clReleaseEvent(fill);
        }
        if (mark != NULL) {
            clReleaseEvent(mark);
        }
        clReleaseMemObject(m);
    }
    clReleaseCommandQueue(q);
    return ok;
#endif
}

static rudnn_status_t ocl_device_open(int index, void **device)
{
    if (index < 0 || index >= g_device_count) {
        return ocl_fail(RUDNN_STATUS_BAD_PARAM,
                        "opencl: device index %d out of range (%d device(s))", index,
                        g_device_count);
    }
    rudnn_status_t st = RUDNN_STATUS_DEVICE_ERROR;
    ocl_device_t *dev = (ocl_device_t *)ocl_calloc(1, sizeof *dev);
    char *exts = NULL;
    if (dev == NULL) {
        return ocl_fail(RUDNN_STATUS_ALLOC_FAILED, "opencl: out of host memory");
    }
    dev->index = index;
    dev->platform = g_devices[index].platform;
    dev->id = g_devices[index].device;

    DEV_STRING(dev->id, CL_DEVICE_NAME, dev->name);
    DEV_STRING(dev->id, CL_DEVICE_VERSION, dev->version);
    DEV_STRING(dev->id, CL_DRIVER_VERSION, dev->driver);
    {
        size_t n = 0;
        dev->platform_name[0] = '\0';
        if (clGetPlatformInfo(dev->platform, CL_PLATFORM_NAME, sizeof dev->platform_name,
                              dev->platform_name, &n) != CL_SUCCESS) {
            snprintf(dev->platform_name, sizeof dev->platform_name, "unknown");
        }
        dev->platform_name[sizeof dev->platform_name - 1] = '\0';
    }
    DEV_VALUE(dev->id, CL_DEVICE_MAX_WORK_GROUP_SIZE, dev->max_group_size);
    DEV_VALUE(dev->id, CL_DEVICE_LOCAL_MEM_SIZE, dev->local_mem);
    DEV_VALUE(dev->id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, dev->max_alloc);
    DEV_VALUE(dev->id, CL_DEVICE_GLOBAL_MEM_SIZE, dev->global_mem);
    DEV_VALUE(dev->id, CL_DEVICE_MAX_COMPUTE_UNITS, dev->compute_units);
    {
        cl_device_type type = 0;
        DEV_VALUE(dev->id, CL_DEVICE_TYPE, type);
        dev->is_cpu = (type & CL_DEVICE_TYPE_CPU) != 0;
        const int pocl = pocl_release(dev->platform);
        dev->serial_launches = dev->is_cpu && pocl > 0 && pocl < 6; /* see ocl_launch.c */
    }
    {
        size_t sizes[3] = {0, 0, 0};
        cl_uint dims = 0;
        DEV_VALUE(dev->id, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, dims);
        if (dims >= 1 && dims <= 3 &&
            clGetDeviceInfo(dev->id, CL_DEVICE_MAX_WORK_ITEM_SIZES, dims * sizeof(size_t), sizes,
                            NULL) == CL_SUCCESS) {
            dev->max_item_size0 = sizes[0];
        } else {
            dev->max_item_size0 = dev->max_group_size;
        }
    }
    {
        size_t n = 0;
        cl_int err = clGetDeviceInfo(dev->id, CL_DEVICE_EXTENSIONS, 0, NULL, &n);
        if (err != CL_SUCCESS) {
            st = ocl_cl_fail("clGetDeviceInfo(CL_DEVICE_EXTENSIONS)", err);
            goto fail;
        }
        exts = (char *)ocl_calloc(n + 1, 1);
        if (exts == NULL) {
            st = ocl_fail(RUDNN_STATUS_ALLOC_FAILED, "opencl: out of host memory");
            goto fail;
        }
        err = clGetDeviceInfo(dev->id, CL_DEVICE_EXTENSIONS, n, exts, NULL);
        if (err != CL_SUCCESS) {
            st = ocl_cl_fail("clGetDeviceInfo(CL_DEVICE_EXTENSIONS)", err);
            goto fail;
        }
        dev->has_fp16 = has_extension(exts, "cl_khr_fp16");
        cl_uint width = 0;
        if (has_extension(exts, "cl_nv_device_attribute_query") &&
            clGetDeviceInfo(dev->id, 0x4003 /* CL_DEVICE_WARP_SIZE_NV */, sizeof width, &width,
                            NULL) == CL_SUCCESS) {
            dev->vendor_plane_width = (int)width;
        } else if (has_extension(exts, "cl_amd_device_attribute_query") &&
                   clGetDeviceInfo(dev->id, 0x4043 /* CL_DEVICE_WAVEFRONT_WIDTH_AMD */,
                                   sizeof width, &width, NULL) == CL_SUCCESS) {
            dev->vendor_plane_width = (int)width;
        }
        free(exts);
        exts = NULL;
    }
    {
        cl_device_fp_config fp = 0;
        if (clGetDeviceInfo(dev->id, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL) ==
                CL_SUCCESS &&
            (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT)) {
            snprintf(dev->build_options, sizeof dev->build_options,
                     "-cl-fp32-correctly-rounded-divide-sqrt");
        }
    }

    {
        cl_int err;
        const cl_context_properties props[3] = {CL_CONTEXT_PLATFORM,
                                                (cl_context_properties)dev->platform, 0};
        dev->context = ocl_alloc_fails() ? (err = CL_OUT_OF_HOST_MEMORY, NULL)
                                         : clCreateContext(props, 1, &dev->id, NULL, NULL, &err);
        if (err != CL_SUCCESS) {
            dev->context = NULL;
            st = ocl_cl_fail("clCreateContext", err);
            goto fail;
        }
    }
    dev->programs = ocl_program_cache_create();
    if (dev->programs == NULL) {
        st = ocl_fail(RUDNN_STATUS_ALLOC_FAILED, "opencl: out of host memory");
        goto fail;
    }
    dev->marker_timestamps = probe_marker_timestamps(dev);
    *device = dev;
    return RUDNN_STATUS_SUCCESS;

fail:
    free(exts);
    ocl_device_close(dev);
    return st;
}

static void ocl_device_close(void *device)
{
    ocl_device_t *dev = (ocl_device_t *)device;
    if (dev == NULL) {
        return;
    }
    ocl_program_cache_destroy(dev->programs);
    if (dev->context != NULL) {
        clReleaseContext(dev->context);
    }
    free(dev);
}

static rudnn_status_t ocl_device_info(void *device, rudnn_device_info_t *info)
{
    const ocl_device_t *dev = (const ocl_device_t *)device;
    memset(info, 0, sizeof *info);
    snprintf(info->backend, sizeof info->backend, "opencl");
    snprintf(info->name, sizeof info->name, "%s", dev->name);

    /* CL_DEVICE_VERSION is "OpenCL <major.minor> <vendor info>": keep the number. */
    char ver[64];
    const char *v = dev->version;
    if (strncmp(v, "OpenCL ", 7) == 0) {
        v += 7;
    }
    size_t k = 0;
    while (v[k] != '\0' && v[k] != ' ' && k + 1 < sizeof ver) {
        ver[k] = v[k];
        k++;
    }
    ver[k] = '\0';
    snprintf(info->driver, sizeof info->driver, "OpenCL %.32s driver %.96s platform %.96s", ver,
             dev->driver, dev->platform_name);

    info->index = dev->index;
    info->global_memory_bytes = (uint64_t)dev->global_mem;
    info->compute_units = (int)dev->compute_units;
    int width = dev->vendor_plane_width;
    if (width <= 0) {
        width = (int)ocl_program_cache_preferred_multiple(dev->programs);
    }
    if (width <= 0) {
        width = 1;
    }
    info->plane_width_min = width;
    info->plane_width_max = width;
    info->shared_memory_per_group = (uint64_t)dev->local_mem;
    info->max_group_size = (int)dev->max_group_size;
    info->has_fp16_matrix = 0;
    info->has_bf16_matrix = 0;
    info->has_native_fp16 = dev->has_fp16;
    info->compute_capability = 0;
    return RUDNN_STATUS_SUCCESS;
}

/* ---- memory ------------------------------------------------------------------ */

static rudnn_status_t ocl_mem_alloc(void *device, size_t bytes, void **mem)
{
    ocl_device_t *dev = (ocl_device_t *)device;
    if (bytes == 0) {
        bytes = 1; /* OpenCL refuses empty buffers */
    }
    if ((cl_ulong)bytes > dev->max_alloc) {
        return ocl_fail(RUDNN_STATUS_ALLOC_FAILED,
                        "opencl: clCreateBuffer: %zu bytes exceed CL_DEVICE_MAX_MEM_ALLOC_SIZE "
                        "(%llu bytes) of %s",
                        bytes, (unsigned long long)dev->max_alloc, dev->name);
    }
    cl_int err;
    cl_mem m = ocl_alloc_fails() ? (err = CL_MEM_OBJECT_ALLOCATION_FAILURE, NULL)
                                 : clCreateBuffer(dev->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS) {
        return ocl_fail(RUDNN_STATUS_ALLOC_FAILED,
                        "opencl: clCreateBuffer(%zu bytes) on %s failed: %s (%d)", bytes,
                        dev->name, ocl_error_name(err), (int)err);
    }
    *mem = m;
    return RUDNN_STATUS_SUCCESS;
}

static void ocl_mem_free(void *device, void *mem)
{
    (void)device;
    if (mem != NULL) {
        clReleaseMemObject((cl_mem)mem);
    }
}

static rudnn_status_t ocl_mem_write(void *queue, rudnn_mem_ref_t dst, const void *host,
                                    size_t bytes)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    if (bytes == 0) {
        return RUDNN_STATUS_SUCCESS;
    }
    CL_CHECK("clEnqueueWriteBuffer",
             clEnqueueWriteBuffer(q->q, (cl_mem)dst.mem, CL_TRUE, dst.offset, bytes, host, 0, NULL,
                                  NULL));
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t ocl_mem_read(void *queue, rudnn_mem_ref_t src, void *host, size_t bytes)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    if (bytes == 0) {
        return RUDNN_STATUS_SUCCESS;
    }
    CL_CHECK("clEnqueueReadBuffer",
             clEnqueueReadBuffer(q->q, (cl_mem)src.mem, CL_TRUE, src.offset, bytes, host, 0, NULL,
                                 NULL));
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t ocl_mem_copy(void *queue, rudnn_mem_ref_t dst, rudnn_mem_ref_t src,
                                   size_t bytes)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    if (bytes == 0 || (dst.mem == src.mem && dst.offset == src.offset)) {
        return RUDNN_STATUS_SUCCESS;
    }
    const int overlap = dst.mem == src.mem && dst.offset < src.offset + bytes &&
                        src.offset < dst.offset + bytes;
    if (!overlap) {
        CL_CHECK("clEnqueueCopyBuffer",
                 clEnqueueCopyBuffer(q->q, (cl_mem)src.mem, (cl_mem)dst.mem, src.offset,
                                     dst.offset, bytes, 0, NULL, NULL));
        return RUDNN_STATUS_SUCCESS;
    }
    /* clEnqueueCopyBuffer refuses overlapping ranges: go through a temporary. */
    cl_int err;
    cl_mem tmp = ocl_alloc_fails()
                     ? (err = CL_MEM_OBJECT_ALLOCATION_FAILURE, NULL)
                     : clCreateBuffer(q->dev->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS) {
        return ocl_fail(RUDNN_STATUS_ALLOC_FAILED,
                        "opencl: clCreateBuffer(%zu bytes) for an overlapping copy failed: %s (%d)",
                        bytes, ocl_error_name(err), (int)err);
    }
    err = clEnqueueCopyBuffer(q->q, (cl_mem)src.mem, tmp, src.offset, 0, bytes, 0, NULL, NULL);
    if (err == CL_SUCCESS) {
        err = clEnqueueCopyBuffer(q->q, tmp, (cl_mem)dst.mem, 0, dst.offset, bytes, 0, NULL, NULL);
    }
    clReleaseMemObject(tmp); /* freed once the queued copies are done */
    if (err != CL_SUCCESS) {
        return ocl_cl_fail("clEnqueueCopyBuffer", err);
    }
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t ocl_mem_fill(void *queue, rudnn_mem_ref_t dst, uint8_t byte, size_t bytes)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    if (bytes == 0) {
        return RUDNN_STATUS_SUCCESS;
    }
    const cl_uchar pattern = byte;
    CL_CHECK("clEnqueueFillBuffer",
             clEnqueueFillBuffer(q->q, (cl_mem)dst.mem, &pattern, 1, dst.offset, bytes, 0, NULL,
                                 NULL));
    return RUDNN_STATUS_SUCCESS;
}

/* ---- queues and events ---------------------------------------------------------- */

static rudnn_status_t ocl_queue_create(void *device, void **queue)
{
    ocl_device_t *dev = (ocl_device_t *)device;
    ocl_queue_t *q = (ocl_queue_t *)ocl_calloc(1, sizeof *q);
    if (q == NULL) {
        return ocl_fail(RUDNN_STATUS_ALLOC_FAILED, "opencl: out of host memory");
    }
    cl_int err;
    q->dev = dev;
    q->q = ocl_alloc_fails()
               ? (err = CL_OUT_OF_HOST_MEMORY, NULL)
               : clCreateCommandQueue(dev->context, dev->id, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS) {
        free(q);
        return ocl_cl_fail("clCreateCommandQueue", err);
    }
    *queue = q;
    return RUDNN_STATUS_SUCCESS;
}

static void *ocl_queue_native(void *queue) { return ((ocl_queue_t *)queue)->q; }

static void ocl_queue_destroy(void *queue)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    if (q == NULL) {
        return;
    }
    clFinish(q->q);
    clReleaseCommandQueue(q->q);
    free(q);
}

static rudnn_status_t ocl_queue_sync(void *queue)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    CL_CHECK("clFinish", clFinish(q->q));
    return RUDNN_STATUS_SUCCESS;
}

typedef struct ocl_event {
    ocl_device_t *dev;
    cl_event ev; /* NULL until recorded */
} ocl_event_t;

static rudnn_status_t ocl_event_create(void *device, void **event)
{
    ocl_event_t *e = (ocl_event_t *)ocl_calloc(1, sizeof *e);
    if (e == NULL) {
        return ocl_fail(RUDNN_STATUS_ALLOC_FAILED, "opencl: out of host memory");
    }
    e->dev = (ocl_device_t *)device;
    *event = e;
    return RUDNN_STATUS_SUCCESS;
}

static void ocl_event_destroy(void *event)
{
    ocl_event_t *e = (ocl_event_t *)event;
    if (e == NULL) {
        return;
    }
    if (e->ev != NULL) {
        clReleaseEvent(e->ev);
    }
    free(e);
}

/* Used to time events where markers have no timestamps. */
static const char k_timestamp_source[] = "__kernel void rudnn_timestamp(void) { }\n";
static const char *const k_timestamp_names[1] = {"rudnn_timestamp"};

static rudnn_status_t ocl_event_record(void *event, void *queue)
{
    ocl_event_t *e = (ocl_event_t *)event;
    ocl_queue_t *q = (ocl_queue_t *)queue;
    cl_event ev = NULL;
    if (q->dev->marker_timestamps) {
        CL_CHECK("clEnqueueMarkerWithWaitList", clEnqueueMarkerWithWaitList(q->q, 0, NULL, &ev));
    } else {
        ocl_kernel_set_t *ks = NULL;
        const rudnn_status_t st = ocl_program_get(q->dev, "timestamp", k_timestamp_source, "",
                                                  k_timestamp_names, 1, &ks);
        if (st != RUDNN_STATUS_SUCCESS) {
            return st;
        }
        const size_t one = 1;
        /* no arguments to set: enqueueing a shared kernel is thread-safe */
        CL_CHECK("clEnqueueNDRangeKernel(rudnn_timestamp)",
                 clEnqueueNDRangeKernel(q->q, ks->kernels[0], 1, NULL, &one, &one, 0, NULL, &ev));
    }
    /* Submit now, so that waiting on the marker later cannot stall. */
    const cl_int err = clFlush(q->q);
    if (err != CL_SUCCESS) {
        clReleaseEvent(ev);
        return ocl_cl_fail("clFlush", err);
    }
    if (e->ev != NULL) {
        clReleaseEvent(e->ev);
    }
    e->ev = ev;
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t ocl_event_elapsed_ms(void *start, void *end, float *ms)
{
    ocl_event_t *s = (ocl_event_t *)start;
    ocl_event_t *e = (ocl_event_t *)end;
    if (s->ev == NULL || e->ev == NULL) {
        return ocl_fail(RUDNN_STATUS_BAD_PARAM,
                        "opencl: event_elapsed_ms: the %s event was never recorded",
                        s->ev == NULL ? "start" : "end");
    }
    cl_event both[2] = {s->ev, e->ev};
    CL_CHECK("clWaitForEvents", clWaitForEvents(2, both));
    cl_ulong t0 = 0, t1 = 0;
    CL_CHECK("clGetEventProfilingInfo(CL_PROFILING_COMMAND_END)",
             clGetEventProfilingInfo(s->ev, CL_PROFILING_COMMAND_END, sizeof t0, &t0, NULL));
    CL_CHECK("clGetEventProfilingInfo(CL_PROFILING_COMMAND_END)",
             clGetEventProfilingInfo(e->ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL));
    if (t0 == 0 || t1 == 0) {
        return ocl_fail(RUDNN_STATUS_DEVICE_ERROR,
                        "opencl: event_elapsed_ms: the driver gave no timestamp for an event");
    }
    const double ns = t1 >= t0 ? (double)(t1 - t0) : -(double)(t0 - t1);
    *ms = (float)(ns * 1e-6);
    return RUDNN_STATUS_SUCCESS;
}

/* Frees the process-wide state when the plugin is unloaded (dlclose). */
#if defined(__GNUC__)
__attribute__((destructor)) static void ocl_unload(void)
{
    free(g_devices);
    g_devices = NULL;
    g_device_count = 0;
    free(g_cache_dir);
    g_cache_dir = NULL;
}
#endif

/* ---- the vtable ------------------------------------------------------------------ */

static const rudnn_backend_t g_backend = {
    .abi_version = RUDNN_BACKEND_ABI_VERSION,
    .struct_size = (uint32_t)sizeof(rudnn_backend_t),
    .name = "opencl",
    .init = ocl_init,
    .device_open = ocl_device_open,
    .device_close = ocl_device_close,
    .device_info = ocl_device_info,
    .mem_alloc = ocl_mem_alloc,
    .mem_free = ocl_mem_free,
    .mem_write = ocl_mem_write,
    .mem_read = ocl_mem_read,
    .mem_copy = ocl_mem_copy,
    .mem_fill = ocl_mem_fill,
    .queue_create = ocl_queue_create,
    .queue_destroy = ocl_queue_destroy,
    .queue_sync = ocl_queue_sync,
    .event_create = ocl_event_create,
    .event_destroy = ocl_event_destroy,
    .event_record = ocl_event_record,
    .event_elapsed_ms = ocl_event_elapsed_ms,
    .queue_native = ocl_queue_native,
#define OCL_TABLE_SET(f) .f = &ocl_##f##_kernels,
    RUDNN_FAMILIES(OCL_TABLE_SET)
#undef OCL_TABLE_SET
};

RUDNN_PLUGIN_EXPORT const rudnn_backend_t *rudnn_backend_entry_v1(void);

RUDNN_PLUGIN_EXPORT const rudnn_backend_t *rudnn_backend_entry_v1(void) { return &g_backend; }
