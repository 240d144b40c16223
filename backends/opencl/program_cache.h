/* Per-device OpenCL program cache: lazy compilation, kept in memory, with the
 * compiled binaries cached on disk.
 *
 * In memory: one entry per (source, build options) per device, created on
 * first use and released by ocl_program_cache_destroy (device_close).
 *
 * Every program is built from kernels/common.cl followed by its own source,
 * so the kernel files share helpers without an #include.
 *
 * On disk (when host->cache_dir is set): <cache_dir>/opencl/<key>.bin where
 * key is the 64-bit FNV-1a hash (16 hex digits) of the program text as built
 * (common.cl, then the source), the build options, the device name, the device
 * version, the driver version and the platform name (each followed by a NUL
 * in the hashed stream). A hit is loaded
 * with clCreateProgramWithBinary; if that or its build fails, the program is
 * built from source and the file rewritten. Files are written to a temporary
 * name and renamed, so readers never see a partial file; a file whose header,
 * key or checksum does not match is ignored. Disk-cache failures are never
 * errors: the cache is an optimisation only.
 */
#ifndef RUDNN_OCL_PROGRAM_CACHE_H
#define RUDNN_OCL_PROGRAM_CACHE_H

#include <pthread.h>

#include "ocl_internal.h"

#define OCL_MAX_KERNELS 8

/* A built program and its kernels, owned by the cache. */
typedef struct ocl_kernel_set {
    cl_program program;
    cl_kernel kernels[OCL_MAX_KERNELS];
    size_t kernel_count;
    size_t max_group;          /* min over the kernels of CL_KERNEL_WORK_GROUP_SIZE */
    size_t preferred_multiple; /* CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE of kernel 0 */
    /* clSetKernelArg + clEnqueueNDRangeKernel on a shared cl_kernel are not
     * thread-safe: launches hold this lock while they set and enqueue. */
    pthread_mutex_t launch_lock;
} ocl_kernel_set_t;

typedef struct ocl_program_cache_stats {
    unsigned long from_source;   /* clCreateProgramWithSource + build */
    unsigned long from_binary;   /* loaded from the disk cache */
    unsigned long binary_failed; /* disk entry present but unusable */
    unsigned long disk_written;
} ocl_program_cache_stats_t;

ocl_program_cache_t *ocl_program_cache_create(void);
/* Releases every kernel and program. */
void ocl_program_cache_destroy(ocl_program_cache_t *cache);

/* Returns the kernel set for (source, options) on dev, building it on first
 * use (after kernels/common.cl). options is appended to dev->build_options. kernel_names are created in
 * order (at most OCL_MAX_KERNELS). label names the source in messages. */
rudnn_status_t ocl_program_get(ocl_device_t *dev, const char *label, const char *source,
                               const char *options, const char *const *kernel_names,
                               size_t kernel_count, ocl_kernel_set_t **out);

/* CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE of any program built so far, 0 if none. */
size_t ocl_program_cache_preferred_multiple(ocl_program_cache_t *cache);

void ocl_program_cache_get_stats(ocl_program_cache_t *cache, ocl_program_cache_stats_t *stats);

/* The 64-bit FNV-1a key and file name for a program (exposed for tests). */
uint64_t ocl_program_key(const ocl_device_t *dev, const char *source, const char *options);

#endif
