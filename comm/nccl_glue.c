/* librudnn-nccl.so and librudnn-rccl.so: core/comm_glue.h's NCCL table, over NCCL and the CUDA
 * runtime or (RUDNN_GLUE_HIP) over RCCL and the HIP runtime; comm/gpu_runtime.h maps the runtime
 * names. The only rudnn code that links either engine (and, for its stream and scratch, the
 * runtime), so that librudnn.so runs without them. Exports its entry alone (-fvisibility=hidden):
 * rudnn_nccl_glue_entry_v1, or rudnn_rccl_glue_entry_v1 for RCCL. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_runtime.h"

#include "core/comm_glue.h"

_Static_assert(RUDNN_NCCL_GLUE_ID_BYTES == NCCL_UNIQUE_ID_BYTES, "the unique id's size");

typedef struct glue_comm {
    ncclComm_t comm;
    gpuStream_t stream;
    int device;
    int *scratch;   /* one int on the device (allreduce_max_int) */
    uint8_t *stage; /* device staging of host exchanges, grown as needed */
    size_t stage_bytes;
} glue_comm_t;

static int fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t cap, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(err, cap, fmt, args);
    va_end(args);
    return 1;
}

static int fail_nccl(char *err, size_t cap, const char *call, ncclResult_t r)
{
    return fail(err, cap, "%s failed: %s (%s)", call, ncclGetErrorString(r), ncclGetLastError(NULL));
}

static int fail_gpu(char *err, size_t cap, const char *call, gpuError_t e)
{
    return fail(err, cap, "%s failed: %s", call, gpuGetErrorString(e));
}

static int glue_unique_id(void *id, char *err, size_t cap)
{
    ncclUniqueId u;
    ncclResult_t r = ncclGetUniqueId(&u);
    if (r != ncclSuccess)
        return fail_nccl(err, cap, "ncclGetUniqueId", r);
    memcpy(id, u.internal, NCCL_UNIQUE_ID_BYTES);
    return 0;
}

static int glue_init(int device, const void *id, int rank, int size, void **out, char *err, size_t cap)
{
    gpuError_t e = gpuSetDevice(device);
    if (e != gpuSuccess)
        return fail_gpu(err, cap, GPU_NAME("SetDevice"), e);
    glue_comm_t *c = calloc(1, sizeof *c);
    if (!c)
        return fail(err, cap, "out of host memory");
    c->device = device;
    if ((e = gpuStreamCreateWithFlags(&c->stream, gpuStreamNonBlocking)) != gpuSuccess) {
        free(c);
        return fail_gpu(err, cap, GPU_NAME("StreamCreateWithFlags"), e);
    }
    if ((e = gpuMalloc((void **)&c->scratch, sizeof(int))) != gpuSuccess) {
        gpuStreamDestroy(c->stream);
        free(c);
        return fail_gpu(err, cap, GPU_NAME("Malloc"), e);
    }
    ncclUniqueId u;
    memcpy(u.internal, id, NCCL_UNIQUE_ID_BYTES);
    ncclResult_t r = ncclCommInitRank(&c->comm, size, u, rank);
    if (r != ncclSuccess) {
        gpuFree(c->scratch);
        gpuStreamDestroy(c->stream);
        free(c);
        return fail_nccl(err, cap, "ncclCommInitRank", r);
    }
    *out = c;
    return 0;
}

static void glue_free(void *p)
{
    glue_comm_t *c = p;
    if (!c)
        return;
    gpuSetDevice(c->device);
    ncclCommDestroy(c->comm);
    gpuFree(c->stage);
    gpuFree(c->scratch);
    gpuStreamDestroy(c->stream);
    free(c);
}

static int wait(glue_comm_t *c, char *err, size_t cap)
{
    gpuError_t e = gpuStreamSynchronize(c->stream);
    return e != gpuSuccess ? fail_gpu(err, cap, GPU_NAME("StreamSynchronize"), e) : 0;
}

/* Room for n bytes of staging (256-byte aligned pieces). */
static int stage_reserve(glue_comm_t *c, size_t n, char *err, size_t cap)
{
    if (n <= c->stage_bytes)
        return 0;
    gpuFree(c->stage);
    c->stage = NULL;
    c->stage_bytes = 0;
    gpuError_t e = gpuMalloc((void **)&c->stage, n);
    if (e != gpuSuccess)
        return fail_gpu(err, cap, GPU_NAME("Malloc (staging)"), e);
    c->stage_bytes = n;
    return 0;
}

static size_t up256(size_t n) { return (n + 255) / 256 * 256; }

/* Host buffers, staged through device memory: copies in, grouped sends and receives, copies out,
 * on the glue's stream, waited for. */
static int glue_exchange(void *p, int nsend, const int *send_peers, const void *const *send_bufs,
                         const size_t *send_bytes, int nrecv, const int *recv_peers, void *const *recv_bufs,
                         const size_t *recv_bytes, char *err, size_t cap)
{
    glue_comm_t *c = p;
    gpuError_t e = gpuSetDevice(c->device);
    if (e != gpuSuccess)
        return fail_gpu(err, cap, GPU_NAME("SetDevice"), e);
    size_t total = 0;
    for (int i = 0; i < nsend; i++)
        total += up256(send_bytes[i]);
    for (int i = 0; i < nrecv; i++)
        total += up256(recv_bytes[i]);
    if (stage_reserve(c, total, err, cap))
        return 1;
    size_t at = 0;
    for (int i = 0; i < nsend && e == gpuSuccess; i++) {
        if (send_bytes[i])
            e = gpuMemcpyAsync(c->stage + at, send_bufs[i], send_bytes[i], gpuMemcpyHostToDevice, c->stream);
        at += up256(send_bytes[i]);
    }
    if (e != gpuSuccess)
        return fail_gpu(err, cap, GPU_NAME("MemcpyAsync (to the device)"), e);
    const size_t recv0 = at;
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess)
        return fail_nccl(err, cap, "ncclGroupStart", r);
    for (int i = 0; i < nrecv && r == ncclSuccess; i++) {
        if (recv_bytes[i])
            r = ncclRecv(c->stage + at, recv_bytes[i], ncclUint8, recv_peers[i], c->comm, c->stream);
        at += up256(recv_bytes[i]);
    }
    at = 0;
    for (int i = 0; i < nsend && r == ncclSuccess; i++) {
        if (send_bytes[i])
            r = ncclSend(c->stage + at, send_bytes[i], ncclUint8, send_peers[i], c->comm, c->stream);
        at += up256(send_bytes[i]);
    }
    const ncclResult_t end = ncclGroupEnd(); /* always closes the group */
    if (r != ncclSuccess)
        return fail_nccl(err, cap, "ncclSend/ncclRecv", r);
    if (end != ncclSuccess)
        return fail_nccl(err, cap, "ncclGroupEnd", end);
    at = recv0;
    for (int i = 0; i < nrecv && e == gpuSuccess; i++) {
        if (recv_bytes[i])
            e = gpuMemcpyAsync(recv_bufs[i], c->stage + at, recv_bytes[i], gpuMemcpyDeviceToHost, c->stream);
        at += up256(recv_bytes[i]);
    }
    if (e != gpuSuccess)
        return fail_gpu(err, cap, GPU_NAME("MemcpyAsync (to the host)"), e);
    return wait(c, err, cap);
}

static int glue_exchange_device(void *p, int nsend, const int *send_peers, const void *const *send_bufs,
                                const size_t *send_bytes, int nrecv, const int *recv_peers, void *const *recv_bufs,
                                const size_t *recv_bytes, char *err, size_t cap)
{
    glue_comm_t *c = p;
    gpuError_t e = gpuSetDevice(c->device);
    if (e != gpuSuccess)
        return fail_gpu(err, cap, GPU_NAME("SetDevice"), e);
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess)
        return fail_nccl(err, cap, "ncclGroupStart", r);
    for (int i = 0; i < nrecv && r == ncclSuccess; i++)
        if (recv_bytes[i])
            r = ncclRecv(recv_bufs[i], recv_bytes[i], ncclUint8, recv_peers[i], c->comm, c->stream);
    for (int i = 0; i < nsend && r == ncclSuccess; i++)
        if (send_bytes[i])
            r = ncclSend(send_bufs[i], send_bytes[i], ncclUint8, send_peers[i], c->comm, c->stream);
    const ncclResult_t end = ncclGroupEnd();
    if (r != ncclSuccess)
        return fail_nccl(err, cap, "ncclSend/ncclRecv", r);
    if (end != ncclSuccess)
        return fail_nccl(err, cap, "ncclGroupEnd", end);
    return wait(c, err, cap);
}

static int glue_allreduce_max_int(void *p, int *value, char *err, size_t cap)
{
    glue_comm_t *c = p;
    gpuError_t e = gpuSetDevice(c->device);
    if (e == gpuSuccess)
        e = gpuMemcpyAsync(c->scratch, value, sizeof *value, gpuMemcpyHostToDevice, c->stream);
    if (e != gpuSuccess)
        return fail_gpu(err, cap, GPU_NAME("MemcpyAsync (to the device)"), e);
    ncclResult_t r = ncclAllReduce(c->scratch, c->scratch, 1, ncclInt32, ncclMax, c->comm, c->stream);
    if (r != ncclSuccess)
        return fail_nccl(err, cap, "ncclAllReduce", r);
    if ((e = gpuMemcpyAsync(value, c->scratch, sizeof *value, gpuMemcpyDeviceToHost, c->stream)) != gpuSuccess)
        return fail_gpu(err, cap, GPU_NAME("MemcpyAsync (to the host)"), e);
    return wait(c, err, cap);
}

static char engine[64];

/* RCCL answers ncclGetVersion with its own release (2.13.4 in ROCm 5.4), coded as NCCL's. */
static void describe_engine(void)
{
    int v = 0;
    if (ncclGetVersion(&v) == ncclSuccess)
        snprintf(engine, sizeof engine, GLUE_ENGINE " %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    else
        snprintf(engine, sizeof engine, GLUE_ENGINE " (version unknown)");
}

__attribute__((visibility("default"))) const rudnn_nccl_glue_t *GLUE_ENTRY(void);
const rudnn_nccl_glue_t *GLUE_ENTRY(void)
{
    static rudnn_nccl_glue_t table;
    if (!table.abi_version) { /* the loader calls this once, under its once-flag */
        describe_engine();
        table.struct_size = sizeof table;
        table.engine = engine;
        table.unique_id = glue_unique_id;
        table.init = glue_init;
        table.free = glue_free;
        table.exchange = glue_exchange;
        table.allreduce_max_int = glue_allreduce_max_int;
        table.exchange_device = glue_exchange_device;
        table.abi_version = RUDNN_NCCL_GLUE_ABI_VERSION;
    }
    return &table;
}
