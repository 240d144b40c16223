/* Per-device OpenCL program cache (see program_cache.h). */
#include "program_cache.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

typedef struct ocl_program_entry {
    struct ocl_program_entry *next;
    const char *source; /* embedded, static: compared by address */
    char *options;      /* full build options */
    ocl_kernel_set_t set;
} ocl_program_entry_t;

struct ocl_program_cache {
    pthread_mutex_t lock;
    ocl_program_entry_t *entries;
    ocl_program_cache_stats_t stats;
};

/* ---- hashing -------------------------------------------------------------- */

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= FNV_PRIME;
    }
    return h;
}

/* Hashes the string and its terminating NUL (a separator between fields). */
static uint64_t fnv1a_str(uint64_t h, const char *s)
{
    return fnv1a(h, s, strlen(s) + 1);
}

/* ---- program text --------------------------------------------------------- */

/* A program is built from these strings in order: the shared helpers, then
 * the kernel file with line numbers restarted so that build logs point into
 * it (the newline ends common.cl's last line whatever it is). */
enum { PROGRAM_PARTS = 3 };
static const char line_restart[] = "\n#line 1\n";

static void program_parts(const char *source, const char *parts[PROGRAM_PARTS],
                          size_t lengths[PROGRAM_PARTS])
{
    parts[0] = rudnn_ocl_src_common;
    lengths[0] = rudnn_ocl_src_common_size;
    parts[1] = line_restart;
    lengths[1] = sizeof line_restart - 1;
    parts[2] = source;
    lengths[2] = strlen(source);
}

uint64_t ocl_program_key(const ocl_device_t *dev, const char *source, const char *options)
{
    const char *parts[PROGRAM_PARTS];
    size_t lengths[PROGRAM_PARTS];
    program_parts(source, parts, lengths);
    uint64_t h = FNV_OFFSET;
    for (int i = 0; i < PROGRAM_PARTS; i++) {
        h = fnv1a(h, parts[i], lengths[i]);
    }
    h = fnv1a(h, "", 1); /* the text's terminating NUL, as fnv1a_str hashes it */
    h = fnv1a_str(h, options);
    h = fnv1a_str(h, dev->name);
    h = fnv1a_str(h, dev->version);
    h = fnv1a_str(h, dev->driver);
    h = fnv1a_str(h, dev->platform_name);
    return h;
}

/* ---- disk cache ------------------------------------------------------------ */

/* File layout (little or native endian; the key covers the device):
 *   char     magic[8]   "RUDNNOCL"
 *   uint32   format     1
 *   uint32   reserved   0
 *   uint64   key        the program key (also the file name)
 *   uint64   size       binary bytes
 *   uint64   checksum   FNV-1a of the binary
 *   byte     binary[size]                                                  */
#define DISK_MAGIC "RUDNNOCL"
#define DISK_FORMAT 1u
#define DISK_HEADER_BYTES 40u

static void put_u32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* mkdir -p; returns 0 when the folder exists afterwards. */
static int make_dirs(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) {
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            const char saved = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
                return -1;
            }
            buf[i] = saved;
        }
    }
    struct stat st;
    return (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) ? 0 : -1;
}

/* <cache_dir>/opencl/<key>.bin, or "" when there is no disk cache. */
static int disk_path(char *out, size_t cap, uint64_t key, int create_dir)
{
    const char *root = ocl_cache_dir();
    if (root == NULL || root[0] == '\0') {
        return -1;
    }
    char dir[4096];
    int n = snprintf(dir, sizeof dir, "%s/opencl", root);
    if (n < 0 || (size_t)n >= sizeof dir) {
        return -1;
    }
    if (create_dir && make_dirs(dir) != 0) {
        return -1;
    }
    n = snprintf(out, cap, "%s/%016llx.bin", dir, (unsigned long long)key);
    return (n < 0 || (size_t)n >= cap) ? -1 : 0;
}

/* Reads a cache file; returns a malloc'd binary or NULL. */
static unsigned char *disk_load(uint64_t key, size_t *size)
{
    char path[4200];
    if (disk_path(path, sizeof path, key, 0) != 0) {
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    unsigned char hdr[DISK_HEADER_BYTES];
    unsigned char *bin = NULL;
    if (fread(hdr, 1, sizeof hdr, f) != sizeof hdr || memcmp(hdr, DISK_MAGIC, 8) != 0 ||
        get_u32(hdr + 8) != DISK_FORMAT || get_u64(hdr + 16) != key) {
        goto fail;
    }
    const uint64_t n = get_u64(hdr + 24);
    if (n == 0 || n > ((uint64_t)1 << 31)) {
        goto fail;
    }
    bin = (unsigned char *)malloc((size_t)n);
    if (bin == NULL || fread(bin, 1, (size_t)n, f) != (size_t)n ||
        fnv1a(FNV_OFFSET, bin, (size_t)n) != get_u64(hdr + 32) || fgetc(f) != EOF) {
        goto fail;
    }
    fclose(f);
    *size = (size_t)n;
    return bin;
fail:
    free(bin);
    fclose(f);
    return NULL;
}

/* Writes a cache file atomically (temporary file, then rename). Best effort. */
static int disk_store(uint64_t key, const unsigned char *bin, size_t size)
{
    static atomic_uint counter;
    char path[4200], tmp[4300];
    if (disk_path(path, sizeof path, key, 1) != 0) {
        return -1;
    }
    const unsigned c = atomic_fetch_add(&counter, 1u);
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), c);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        return -1;
    }
    unsigned char hdr[DISK_HEADER_BYTES];
    memcpy(hdr, DISK_MAGIC, 8);
    put_u32(hdr + 8, DISK_FORMAT);
    put_u32(hdr + 12, 0);
    put_u64(hdr + 16, key);
    put_u64(hdr + 24, (uint64_t)size);
    put_u64(hdr + 32, fnv1a(FNV_OFFSET, bin, size));
    FILE *f = fopen(tmp, "wb");
    if (f == NULL) {
        return -1;
    }
    int ok = fwrite(hdr, 1, sizeof hdr, f) == sizeof hdr && fwrite(bin, 1, size, f) == size;
    ok = (fflush(f) == 0) && ok;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return -1;
    }
    return 0;
}

/* Fetches the device binary of a built program (malloc'd), or NULL. */
static unsigned char *program_binary(cl_program prog, size_t *size)
{
    size_t n = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL) != CL_SUCCESS ||
        n == 0) {
        return NULL;
    }
    unsigned char *bin = (unsigned char *)malloc(n);
    if (bin == NULL) {
        return NULL;
    }
    unsigned char *ptrs[1] = {bin};
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof ptrs, ptrs, NULL) != CL_SUCCESS) {
        free(bin);
        return NULL;
    }
    *size = n;
    return bin;
}

/* ---- building ------------------------------------------------------------- */

#define BUILD_LOG_MAX 600

static rudnn_status_t build_failed(ocl_device_t *dev, cl_program prog, const char *label,
                                   cl_int err)
{
    char log[BUILD_LOG_MAX + 1];
    size_t n = 0;
    log[0] = '\0';
    if (clGetProgramBuildInfo(prog, dev->id, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) == CL_SUCCESS &&
        n > 1) {
        char *full = (char *)malloc(n + 1);
        if (full != NULL &&
            clGetProgramBuildInfo(prog, dev->id, CL_PROGRAM_BUILD_LOG, n, full, NULL) ==
                CL_SUCCESS) {
            full[n] = '\0';
            /* drop trailing blank space */
            while (n > 0 && (full[n - 1] == '\0' || full[n - 1] == '\n' ||
                             full[n - 1] == '\r' || full[n - 1] == ' ')) {
                full[--n] = '\0';
            }
            /* skip leading blank lines, keep the first BUILD_LOG_MAX chars */
            const char *p = full;
            while (*p == '\n' || *p == '\r' || *p == ' ') {
                p++;
            }
            snprintf(log, sizeof log, "%s", p);
            if (strlen(p) > BUILD_LOG_MAX && BUILD_LOG_MAX > 4) {
                memcpy(log + BUILD_LOG_MAX - 4, " ...", 5);
            }
        }
        free(full);
    }
    return ocl_fail(RUDNN_STATUS_DEVICE_ERROR,
                    "opencl: building program '%s' for %s failed: clBuildProgram: %s (%d)%s%s",
                    label, dev->name, ocl_error_name(err), (int)err,
                    log[0] ? "; build log: " : "", log);
}

/* Builds from the disk binary if possible, else from source. */
static rudnn_status_t build_program(ocl_program_cache_t *cache, ocl_device_t *dev,
                                    const char *label, const char *source, const char *options,
                                    cl_program *out)
{
    const uint64_t key = ocl_program_key(dev, source, options);
    cl_int err;
    size_t bin_size = 0;
    unsigned char *bin = disk_load(key, &bin_size);
    if (bin != NULL) {
        const unsigned char *bins[1] = {bin};
        cl_int bin_status = CL_SUCCESS;
        cl_program prog = clCreateProgramWithBinary(dev->context, 1, &dev->id, &bin_size, bins,
                                                    &bin_status, &err);
        free(bin);
        if (err == CL_SUCCESS && bin_status == CL_SUCCESS) {
            err = clBuildProgram(prog, 1, &dev->id, options, NULL, NULL);
            if (err == CL_SUCCESS) {
                cache->stats.from_binary++;
                *out = prog;
                return RUDNN_STATUS_SUCCESS;
            }
        }
        if (prog != NULL) {
            clReleaseProgram(prog);
        }
        cache->stats.binary_failed++;
    }

    const char *parts[PROGRAM_PARTS];
    size_t lengths[PROGRAM_PARTS];
    program_parts(source, parts, lengths);
    cl_program prog =
        clCreateProgramWithSource(dev->context, PROGRAM_PARTS, parts, lengths, &err);
    if (err != CL_SUCCESS) {
        return ocl_cl_fail("clCreateProgramWithSource", err);
    }
    err = clBuildProgram(prog, 1, &dev->id, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        rudnn_status_t st = build_failed(dev, prog, label, err);
        clReleaseProgram(prog);
        return st;
    }
    cache->stats.from_source++;
    bin = program_binary(prog, &bin_size);
    if (bin != NULL) {
        if (disk_store(key, bin, bin_size) == 0) {
            cache->stats.disk_written++;
        }
        free(bin);
    }
    *out = prog;
    return RUDNN_STATUS_SUCCESS;
}

static void release_set(ocl_kernel_set_t *set)
{
    for (size_t i = 0; i < set->kernel_count; i++) {
        if (set->kernels[i] != NULL) {
            clReleaseKernel(set->kernels[i]);
        }
    }
    if (set->program != NULL) {
        clReleaseProgram(set->program);
    }
}

static rudnn_status_t make_kernels(ocl_device_t *dev, const char *label,
                                   const char *const *names, size_t count, ocl_kernel_set_t *set)
{
    cl_int err;
    set->max_group = (size_t)-1;
    for (size_t i = 0; i < count; i++) {
        set->kernels[i] = clCreateKernel(set->program, names[i], &err);
        set->kernel_count = i + 1;
        if (err != CL_SUCCESS) {
            set->kernels[i] = NULL;
            return ocl_fail(RUDNN_STATUS_DEVICE_ERROR,
                            "opencl: clCreateKernel(%s) from program '%s' failed: %s (%d)",
                            names[i], label, ocl_error_name(err), (int)err);
        }
        size_t wg = 0;
        err = clGetKernelWorkGroupInfo(set->kernels[i], dev->id, CL_KERNEL_WORK_GROUP_SIZE,
                                       sizeof wg, &wg, NULL);
        if (err != CL_SUCCESS) {
            return ocl_cl_fail("clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)", err);
        }
        if (wg < set->max_group) {
            set->max_group = wg;
        }
        if (i == 0) {
            size_t mult = 0;
            if (clGetKernelWorkGroupInfo(set->kernels[i], dev->id,
                                         CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                                         sizeof mult, &mult, NULL) == CL_SUCCESS) {
                set->preferred_multiple = mult;
            }
        }
    }
    if (set->max_group == 0 || set->max_group == (size_t)-1) {
        set->max_group = 1;
    }
    return RUDNN_STATUS_SUCCESS;
}

/* ---- public --------------------------------------------------------------- */

ocl_program_cache_t *ocl_program_cache_create(void)
{
    ocl_program_cache_t *cache = (ocl_program_cache_t *)ocl_calloc(1, sizeof *cache);
    if (cache == NULL) {
        return NULL;
    }
    if (pthread_mutex_init(&cache->lock, NULL) != 0) {
        free(cache);
        return NULL;
    }
    return cache;
}

void ocl_program_cache_destroy(ocl_program_cache_t *cache)
{
    if (cache == NULL) {
        return;
    }
    ocl_program_entry_t *e = cache->entries;
    while (e != NULL) {
        ocl_program_entry_t *next = e->next;
        release_set(&e->set);
        pthread_mutex_destroy(&e->set.launch_lock);
        free(e->options);
        free(e);
        e = next;
    }
    pthread_mutex_destroy(&cache->lock);
    free(cache);
}

rudnn_status_t ocl_program_get(ocl_device_t *dev, const char *label, const char *source,
                               const char *options, const char *const *kernel_names,
                               size_t kernel_count, ocl_kernel_set_t **out)
{
    ocl_program_cache_t *cache = dev->programs;
    char full[512];
    int n = snprintf(full, sizeof full, "%s%s%s", dev->build_options,
                     (dev->build_options[0] && options[0]) ? " " : "", options);
    if (n < 0 || (size_t)n >= sizeof full || kernel_count > OCL_MAX_KERNELS) {
        return ocl_fail(RUDNN_STATUS_INTERNAL, "opencl: program '%s': options too long", label);
    }

    pthread_mutex_lock(&cache->lock);
    for (ocl_program_entry_t *e = cache->entries; e != NULL; e = e->next) {
        if (e->source == source && strcmp(e->options, full) == 0) {
            pthread_mutex_unlock(&cache->lock);
            *out = &e->set;
            return RUDNN_STATUS_SUCCESS;
        }
    }

    /* First use: build while holding the lock, so a program is never built
     * twice for one device. */
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    ocl_program_entry_t *e = (ocl_program_entry_t *)ocl_calloc(1, sizeof *e);
    char *opts = e != NULL ? (char *)ocl_malloc((size_t)n + 1) : NULL;
    if (e == NULL || opts == NULL) {
        st = ocl_fail(RUDNN_STATUS_ALLOC_FAILED, "opencl: out of host memory");
        goto fail;
    }
    memcpy(opts, full, (size_t)n + 1);
    st = build_program(cache, dev, label, source, full, &e->set.program);
    if (st != RUDNN_STATUS_SUCCESS) {
        goto fail;
    }
    st = make_kernels(dev, label, kernel_names, kernel_count, &e->set);
    if (st != RUDNN_STATUS_SUCCESS) {
        release_set(&e->set);
        goto fail;
    }
    if (pthread_mutex_init(&e->set.launch_lock, NULL) != 0) {
        release_set(&e->set);
        st = ocl_fail(RUDNN_STATUS_INTERNAL, "opencl: pthread_mutex_init failed");
        goto fail;
    }
    e->source = source;
    e->options = opts;
    e->next = cache->entries;
    cache->entries = e;
    pthread_mutex_unlock(&cache->lock);
    *out = &e->set;
    return RUDNN_STATUS_SUCCESS;

fail:
    pthread_mutex_unlock(&cache->lock);
    free(opts);
    free(e);
    return st;
}

size_t ocl_program_cache_preferred_multiple(ocl_program_cache_t *cache)
{
    size_t m = 0;
    pthread_mutex_lock(&cache->lock);
    for (ocl_program_entry_t *e = cache->entries; e != NULL && m == 0; e = e->next) {
        m = e->set.preferred_multiple;
    }
    pthread_mutex_unlock(&cache->lock);
    return m;
}

void ocl_program_cache_get_stats(ocl_program_cache_t *cache, ocl_program_cache_stats_t *stats)
{
    pthread_mutex_lock(&cache->lock);
    *stats = cache->stats;
    pthread_mutex_unlock(&cache->lock);
}
