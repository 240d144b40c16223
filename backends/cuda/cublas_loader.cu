/* cuBLAS loaded at run time, one handle and one scratch area per device: see cublas_loader.h.
 *
 * Loading follows backends/opencl/moe_gemm.c (CLBlast): pthread_once, dlopen with RTLD_NOW |
 * RTLD_LOCAL | RTLD_NODELETE, every failure kept for the message. Handles, events and scratch live
 * in g_dev[device index] until the plugin closes the device's last context
 * (rdg_cublas_release_device); the library stays loaded.
 */
#include <atomic>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cublas_loader.h"

namespace {

#define CUBLAS_MAX_DEVICES 64 /* as the plugin's other per-device tables */

struct DeviceState {
    pthread_mutex_t lock;
    cublasHandle_t handle;
    cudaEvent_t done; /* the end of the last session that used the scratch, on its stream */
    void *dev;
    size_t dev_bytes;
    void *host; /* pinned */
    size_t host_bytes;
};

pthread_once_t g_once = PTHREAD_ONCE_INIT;
RdgCublas g_api;
std::atomic<int> g_loaded; /* set once in load(); read without the once by rdg_cublas_release_device */
char g_why[640]; /* why cuBLAS did not load: each file tried and its error */
DeviceState g_dev[CUBLAS_MAX_DEVICES];

/* dlsym into a typed function pointer (memcpy: ISO C++ has no object-to-function pointer cast) */
template <typename F>
bool resolve(void *lib, const char *name, F *fn)
{
    void *sym = dlsym(lib, name);
    memcpy(fn, &sym, sizeof *fn);
    return sym != nullptr;
}

void load(void)
{
    for (int d = 0; d < CUBLAS_MAX_DEVICES; d++)
        pthread_mutex_init(&g_dev[d].lock, nullptr);

    static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    size_t used = (size_t)snprintf(g_why, sizeof g_why, "cuBLAS not found (tried");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        const char *why = lib ? nullptr : dlerror();
        const size_t len = strlen(names[i]);
        if (why && strncmp(why, names[i], len) == 0 && strncmp(why + len, ": ", 2) == 0)
            why += len + 2; /* dlerror starts with the file name, which the message gives already */
        char missing[80];
        /* required entries: slot = the RdgCublas member the symbol's address is copied into */
        const struct {
            const char *name;
            void *slot;
        } need[] = {{"cublasCreate_v2", &g_api.create},
                    {"cublasDestroy_v2", &g_api.destroy},
                    {"cublasSetStream_v2", &g_api.set_stream},
                    {"cublasSetMathMode", &g_api.set_math_mode},
                    {"cublasGemmEx", &g_api.gemm_ex}};
        for (size_t j = 0; lib && !why && j < sizeof need / sizeof need[0]; j++) {
            void *sym = dlsym(lib, need[j].name);
            memcpy(need[j].slot, &sym, sizeof sym);
            if (!sym) {
                snprintf(missing, sizeof missing, "no symbol %s", need[j].name);
                why = missing;
            }
        }
        if (lib && !why) {
            resolve(lib, "cublasGemmGroupedBatchedEx", &g_api.gemm_grouped); /* optional: cuBLAS 12.5+ */
            rdg_cublas_get_property_fn prop = nullptr;
            int v[3] = {-1, -1, -1};
            if (resolve(lib, "cublasGetProperty", &prop))
                for (int p = 0; p < 3; p++)
                    if (prop((libraryPropertyType)(MAJOR_VERSION + p), &v[p]) != CUBLAS_STATUS_SUCCESS)
                        v[p] = -1;
            snprintf(g_api.version, sizeof g_api.version, "cuBLAS %d.%d.%d, %s", v[0], v[1], v[2], names[i]);
            g_loaded = 1;
            return;
        }
        if (used < sizeof g_why)
            used += (size_t)snprintf(g_why + used, sizeof g_why - used, "%s %s: %s", i ? ";" : "", names[i],
                                     why ? why : "unknown error");
    }
    if (used < sizeof g_why)
        snprintf(g_why + used, sizeof g_why - used, ")");
}

const char *status_name(cublasStatus_t st)
{
    switch (st) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "unknown cuBLAS status";
    }
}

rudnn_status_t map_status(cublasStatus_t st)
{
    switch (st) {
    case CUBLAS_STATUS_SUCCESS: return RUDNN_STATUS_SUCCESS;
    case CUBLAS_STATUS_ALLOC_FAILED: return RUDNN_STATUS_ALLOC_FAILED;
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH: return RUDNN_STATUS_NOT_SUPPORTED;
    case CUBLAS_STATUS_INVALID_VALUE: return RUDNN_STATUS_INTERNAL; /* the plugin passed bad arguments */
    default: return RUDNN_STATUS_DEVICE_ERROR;
    }
}

/* rdg_fail's message with the op in front */
rudnn_status_t cuda_fail(const RdgCublasSession *s, rudnn_status_t status, cudaError_t err, const char *what)
{
    return rdg_error(status, "%s: %s: %s%s failed: %s", RUDNN_GPU_BACKEND_NAME, s->op, RDG_API, what,
                     cudaGetErrorString(err));
}

/* Sizes grow in steps of 2 MiB (device) / 64 KiB (host), so that slowly growing requests do not
 * reallocate every time. */
size_t round_up(size_t n, size_t step)
{
    return (n + step - 1) / step * step;
}

} // namespace

rudnn_status_t rdg_cublas_check(const RdgCublasSession *s, cublasStatus_t st, const char *call)
{
    if (st == CUBLAS_STATUS_SUCCESS)
        return RUDNN_STATUS_SUCCESS;
    return rdg_error(map_status(st), "%s: %s: %s failed: %s (%s)", RUDNN_GPU_BACKEND_NAME, s->op, call,
                     status_name(st), s->api ? s->api->version : "cuBLAS");
}

const char *rdg_cublas_unavailable(void)
{
    pthread_once(&g_once, load);
    return g_loaded ? nullptr : g_why;
}

rudnn_status_t rdg_cublas_begin(rdg_queue_t *q, const char *op, RdgCublasSession *s)
{
    memset(s, 0, sizeof *s);
    s->q = q;
    s->op = op;
    pthread_once(&g_once, load);
    if (!g_loaded)
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: %s: %s", RUDNN_GPU_BACKEND_NAME, op, g_why);
    s->api = &g_api;
    const int d = q->dev.index;
    if (d < 0 || d >= CUBLAS_MAX_DEVICES)
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: %s: cuBLAS is available on devices 0..%d only (device %d)",
                         RUDNN_GPU_BACKEND_NAME, op, CUBLAS_MAX_DEVICES - 1, d);
    TRY(rdg_use_device(d)); /* a handle belongs to the device current when it is created */
    DeviceState *ds = &g_dev[d];
    pthread_mutex_lock(&ds->lock);
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    if (!ds->handle) {
        cublasHandle_t h = nullptr;
        st = rdg_cublas_check(s, g_api.create(&h), "cublasCreate");
        /* FP32 accumulation to the end: no split-K reduction in a 16-bit output type (the numeric
         * contract rounds each output once) */
        const cublasMath_t mode =
            (cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
        if (st == RUDNN_STATUS_SUCCESS)
            st = rdg_cublas_check(s, g_api.set_math_mode(h, mode), "cublasSetMathMode");
        if (st == RUDNN_STATUS_SUCCESS)
            ds->handle = h;
        else if (h)
            g_api.destroy(h);
    }
    if (st == RUDNN_STATUS_SUCCESS)
        st = rdg_cublas_check(s, g_api.set_stream(ds->handle, q->stream), "cublasSetStream");
    if (st != RUDNN_STATUS_SUCCESS) {
        pthread_mutex_unlock(&ds->lock);
        return st;
    }
    s->handle = ds->handle;
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rdg_cublas_scratch(RdgCublasSession *s, size_t dev_bytes, void **dev, size_t host_bytes, void **host)
{
    DeviceState *ds = &g_dev[s->q->dev.index];
    const cudaStream_t stream = s->q->stream;
    cudaError_t err;
    if (!ds->done) {
        err = cudaEventCreateWithFlags(&ds->done, cudaEventDisableTiming);
        if (err != cudaSuccess) {
            ds->done = nullptr;
            return cuda_fail(s, RUDNN_STATUS_DEVICE_ERROR, err, "EventCreateWithFlags (cuBLAS scratch)");
        }
    } else {
        /* after the previous session's work: on the device for the device memory, on the host for the
         * pinned memory its copies read */
        err = cudaStreamWaitEvent(stream, ds->done, 0);
        if (err != cudaSuccess)
            return cuda_fail(s, RUDNN_STATUS_DEVICE_ERROR, err, "StreamWaitEvent (cuBLAS scratch)");
        err = host_bytes ? cudaEventSynchronize(ds->done) : cudaSuccess;
        if (err != cudaSuccess)
            return cuda_fail(s, RUDNN_STATUS_DEVICE_ERROR, err, "EventSynchronize (cuBLAS scratch)");
    }
    s->used = 1;
    if (dev_bytes > ds->dev_bytes) {
        if (ds->dev) {
            err = cudaFreeAsync(ds->dev, stream); /* stream-ordered after its last use (the wait above) */
            ds->dev = nullptr;
            ds->dev_bytes = 0;
            if (err != cudaSuccess)
                return cuda_fail(s, RUDNN_STATUS_DEVICE_ERROR, err, "FreeAsync (cuBLAS scratch)");
        }
        const size_t bytes = round_up(dev_bytes, (size_t)2 << 20);
        err = rdg_fail_allocation() ? cudaErrorMemoryAllocation : cudaMallocAsync(&ds->dev, bytes, stream);
        if (err != cudaSuccess) {
            ds->dev = nullptr;
            char what[96];
            snprintf(what, sizeof what, "MallocAsync(%zu bytes of cuBLAS scratch)", bytes);
            return cuda_fail(s, RUDNN_STATUS_ALLOC_FAILED, err, what);
        }
        ds->dev_bytes = bytes;
    }
    if (host_bytes > ds->host_bytes) {
        if (ds->host) {
            err = cudaFreeHost(ds->host); /* its copies have run (the event synchronisation above) */
            ds->host = nullptr;
            ds->host_bytes = 0;
            if (err != cudaSuccess)
                return cuda_fail(s, RUDNN_STATUS_DEVICE_ERROR, err, "FreeHost (cuBLAS scratch)");
        }
        const size_t bytes = round_up(host_bytes, (size_t)64 << 10);
        err = rdg_fail_allocation() ? cudaErrorMemoryAllocation : cudaMallocHost(&ds->host, bytes);
        if (err != cudaSuccess) {
            ds->host = nullptr;
            char what[96];
            snprintf(what, sizeof what, "MallocHost(%zu bytes of cuBLAS scratch)", bytes);
            return cuda_fail(s, RUDNN_STATUS_ALLOC_FAILED, err, what);
        }
        ds->host_bytes = bytes;
    }
    if (dev)
        *dev = dev_bytes ? ds->dev : nullptr;
    if (host)
        *host = host_bytes ? ds->host : nullptr;
    return RUDNN_STATUS_SUCCESS;
}

void rdg_cublas_release_device(int index)
{
    if (index < 0 || index >= CUBLAS_MAX_DEVICES || !g_loaded.load())
        return;
    DeviceState *ds = &g_dev[index];
    pthread_mutex_lock(&ds->lock);
    if ((ds->handle || ds->done || ds->dev || ds->host) && rdg_use_device(index) == RUDNN_STATUS_SUCCESS) {
        /* failures here have no caller to report to: the memory is as good as gone either way */
        if (ds->done)
            (void)cudaEventSynchronize(ds->done); /* the last session's work, which used the scratch */
        if (ds->dev)
            (void)cudaFree(ds->dev);
        if (ds->host)
            (void)cudaFreeHost(ds->host);
        if (ds->done)
            (void)cudaEventDestroy(ds->done);
        if (ds->handle)
            (void)g_api.destroy(ds->handle);
        ds->handle = nullptr;
        ds->done = nullptr;
        ds->dev = ds->host = nullptr;
        ds->dev_bytes = ds->host_bytes = 0;
    }
    pthread_mutex_unlock(&ds->lock);
}

rudnn_status_t rdg_cublas_end(RdgCublasSession *s, rudnn_status_t status)
{
    DeviceState *ds = &g_dev[s->q->dev.index];
    if (s->used && ds->done) {
        cudaError_t err = cudaEventRecord(ds->done, s->q->stream);
        if (err != cudaSuccess && status == RUDNN_STATUS_SUCCESS)
            status = cuda_fail(s, RUDNN_STATUS_DEVICE_ERROR, err, "EventRecord (cuBLAS scratch)");
    }
    s->used = 0;
    pthread_mutex_unlock(&ds->lock);
    return status;
}
