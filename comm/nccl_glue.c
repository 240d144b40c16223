/* librudnn-nccl.so: core/comm_glue.h's NCCL table. The only rudnn code that links NCCL (and, for
 * its stream and scratch, the CUDA runtime), so that librudnn.so runs without either. Exports
 * rudnn_nccl_glue_entry_v1 alone (-fvisibility=hidden). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "core/comm_glue.h"

_Static_assert(RUDNN_NCCL_GLUE_ID_BYTES == NCCL_UNIQUE_ID_BYTES, "the unique id's size");

typedef struct glue_comm {
    ncclComm_t comm;
    cudaStream_t stream;
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

static int fail_cuda(char *err, size_t cap, const char *call, cudaError_t e)
{
    return fail(err, cap, "%s failed: %s", call, cudaGetErrorString(e));
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
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess)
        return fail_cuda(err, cap, "cudaSetDevice", e);
    glue_comm_t *c = calloc(1, sizeof *c);
    if (!c)
        return fail(err, cap, "out of host memory");
    c->device = device;
    if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        free(c);
        return fail_cuda(err, cap, "cudaStreamCreateWithFlags", e);
    }
    if ((e = cudaMalloc((void **)&c->scratch, sizeof(int))) != cudaSuccess) {
        cudaStreamDestroy(c->stream);
        free(c);
        return fail_cuda(err, cap, "cudaMalloc", e);
    }
    ncclUniqueId u;
    memcpy(u.internal, id, NCCL_UNIQUE_ID_BYTES);
    ncclResult_t r = ncclCommInitRank(&c->comm, size, u, rank);
    if (r != ncclSuccess) {
        cudaFree(c->scratch);
        cudaStreamDestroy(c->stream);
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
    cudaSetDevice(c->device);
    ncclCommDestroy(c->comm);
    cudaFree(c->stage);
    cudaFree(c->scratch);
    cudaStreamDestroy(c->stream);
    free(c);
}

static int wait(glue_comm_t *c, char *err, size_t cap)
{
    cudaError_t e = cudaStreamSynchronize(c->stream);
    return e != cudaSuccess ? fail_cuda(err, cap, "cudaStreamSynchronize", e) : 0;
}

/* Room for n bytes of staging (256-byte aligned pieces). */
static int stage_reserve(glue_comm_t *c, size_t n, char *err, size_t cap)
{
    if (n <= c->stage_bytes)
        return 0;
    cudaFree(c->stage);
    c->stage = NULL;
    c->stage_bytes = 0;
    cudaError_t e = cudaMalloc((void **)&c->stage, n);
    if (e != cudaSuccess)
        return fail_cuda(err, cap, "cudaMalloc (staging)", e);
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
    cudaError_t e = cudaSetDevice(c->device);
    if (e != cudaSuccess)
        return fail_cuda(err, cap, "cudaSetDevice", e);
    size_t total = 0;
    for (int i = 0; i < nsend; i++)
        total += up256(send_bytes[i]);
    for (int i = 0; i < nrecv; i++)
        total += up256(recv_bytes[i]);
    if (stage_reserve(c, total, err, cap))
        return 1;
    size_t at = 0;
    for (int i = 0; i < nsend && e == cudaSuccess; i++) {
        if (send_bytes[i])
            e = cudaMemcpyAsync(c->stage + at, send_bufs[i], send_bytes[i], cudaMemcpyHostToDevice, c->stream);
        at += up256(send_bytes[i]);
    }
    if (e != cudaSuccess)
        return fail_cuda(err, cap, "cudaMemcpyAsync (to the device)", e);
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
    for (int i = 0; i < nrecv && e == cudaSuccess; i++) {
        if (recv_bytes[i])
            e = cudaMemcpyAsync(recv_bufs[i], c->stage + at, recv_bytes[i], cudaMemcpyDeviceToHost, c->stream);
        at += up256(recv_bytes[i]);
    }
    if (e != cudaSuccess)
        return fail_cuda(err, cap, "cudaMemcpyAsync (to the host)", e);
    return wait(c, err, cap);
}

static int glue_exchange_device(void *p, int nsend, const int *send_peers, const void *const *send_bufs,
                                const size_t *send_bytes, int nrecv, const int *recv_peers, void *const *recv_bufs,
                                const size_t *recv_bytes, char *err, size_t cap)
{
    glue_comm_t *c = p;
    cudaError_t e = cudaSetDevice(c->device);
    if (e != cudaSuccess)
        return fail_cuda(err, cap, "cudaSetDevice", e);
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
    cudaError_t e = cudaSetDevice(c->device);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(c->scratch, value, sizeof *value, cudaMemcpyHostToDevice, c->stream);
    if (e != cudaSuccess)
        return fail_cuda(err, cap, "cudaMemcpyAsync (to the device)", e);
    ncclResult_t r = ncclAllReduce(c->scratch, c->scratch, 1, ncclInt32, ncclMax, c->comm, c->stream);
    if (r != ncclSuccess)
        return fail_nccl(err, cap, "ncclAllReduce", r);
    if ((e = cudaMemcpyAsync(value, c->scratch, sizeof *value, cudaMemcpyDeviceToHost, c->stream)) != cudaSuccess)
        return fail_cuda(err, cap, "cudaMemcpyAsync (to the host)", e);
    return wait(c, err, cap);
}

static char engine[64];

__attribute__((visibility("default"))) const rudnn_nccl_glue_t *rudnn_nccl_glue_entry_v1(void);
const rudnn_nccl_glue_t *rudnn_nccl_glue_entry_v1(void)
{
    static rudnn_nccl_glue_t table;
    if (!table.abi_version) { /* the loader calls this once, under its once-flag */
        int v = 0;
        if (ncclGetVersion(&v) == ncclSuccess)
            snprintf(engine, sizeof engine, "NCCL %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
        else
            snprintf(engine, sizeof engine, "NCCL (version unknown)");
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
