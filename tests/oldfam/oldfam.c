/* A plugin built before later families and entries were appended: its vtable ends before the
 * moe table, and its norm table ends before the entries this librudnn requires. The memory past
 * each end holds poison (non-NULL pointers that crash when called), so librudnn must treat moe and
 * norm as absent from struct_size alone. Memory is host memory: enough for ops/ to get as far as
 * choosing a kernel. Installed as librudnn-hip.so in its own folder (tests/meson.build). */
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"

static int called; /* a kernel entry of a refused table was called */

static rudnn_status_t k_rms_norm(void *queue, const rudnn_norm_plan_t *plan, rudnn_mem_ref_t x,
                                 rudnn_mem_ref_t gamma, rudnn_mem_ref_t y)
{
    (void)queue, (void)plan, (void)x, (void)gamma, (void)y;
    called = 1;
    return RUDNN_STATUS_INTERNAL;
}

static rudnn_status_t b_init(const rudnn_host_services_t *host, int *count)
{
    (void)host;
    *count = 1;
    return RUDNN_STATUS_SUCCESS;
}
static rudnn_status_t b_open(int index, void **device)
{
    *device = malloc(1);
    return index == 0 && *device ? RUDNN_STATUS_SUCCESS : RUDNN_STATUS_BAD_PARAM;
}
static void b_close(void *device) { free(device); }
static rudnn_status_t b_info(void *device, rudnn_device_info_t *info)
{
    (void)device;
    memset(info, 0, sizeof *info);
    strcpy(info->name, "old plugin (host memory)");
    return RUDNN_STATUS_SUCCESS;
}
static rudnn_status_t b_alloc(void *device, size_t bytes, void **mem)
{
    (void)device;
    *mem = calloc(1, bytes ? bytes : 1);
    return *mem ? RUDNN_STATUS_SUCCESS : RUDNN_STATUS_ALLOC_FAILED;
}
static void b_free(void *device, void *mem) { (void)device, free(mem); }
static rudnn_status_t b_write(void *q, rudnn_mem_ref_t dst, const void *host, size_t n)
{
    (void)q;
    memcpy((char *)dst.mem + dst.offset, host, n);
    return RUDNN_STATUS_SUCCESS;
}
static rudnn_status_t b_read(void *q, rudnn_mem_ref_t src, void *host, size_t n)
{
    (void)q;
    memcpy(host, (const char *)src.mem + src.offset, n);
    return RUDNN_STATUS_SUCCESS;
}
static rudnn_status_t b_copy(void *q, rudnn_mem_ref_t dst, rudnn_mem_ref_t src, size_t n)
{
    (void)q;
    memmove((char *)dst.mem + dst.offset, (const char *)src.mem + src.offset, n);
    return RUDNN_STATUS_SUCCESS;
}
static rudnn_status_t b_fill(void *q, rudnn_mem_ref_t dst, uint8_t byte, size_t n)
{
    (void)q;
    memset((char *)dst.mem + dst.offset, byte, n);
    return RUDNN_STATUS_SUCCESS;
}
static rudnn_status_t b_queue_create(void *device, void **queue)
{
    *queue = device;
    return RUDNN_STATUS_SUCCESS;
}
static void b_queue_destroy(void *queue) { (void)queue; }
static rudnn_status_t b_sync(void *queue) { (void)queue; return RUDNN_STATUS_SUCCESS; }
static rudnn_status_t b_event_create(void *device, void **event)
{
    (void)device;
    *event = NULL;
    return RUDNN_STATUS_NOT_SUPPORTED;
}
static void b_event_destroy(void *event) { (void)event; }
static rudnn_status_t b_event_record(void *event, void *queue) { (void)event, (void)queue; return RUDNN_STATUS_NOT_SUPPORTED; }
static rudnn_status_t b_elapsed(void *s, void *e, float *ms) { (void)s, (void)e, *ms = 0; return RUDNN_STATUS_NOT_SUPPORTED; }

/* Poison: what an older plugin's memory past its struct might hold. */
#define POISON ((void *)(uintptr_t)0x1)

static rudnn_norm_kernels_t norm_table;
static rudnn_backend_t backend;

RUDNN_PLUGIN_EXPORT const rudnn_backend_t *rudnn_backend_entry_v1(void);
/* Whether librudnn called a kernel of the refused norm table (read by the test through dlsym). */
RUDNN_PLUGIN_EXPORT int oldfam_kernel_called(void);
int oldfam_kernel_called(void) { return called; }

RUDNN_PLUGIN_EXPORT const rudnn_backend_t *rudnn_backend_entry_v1(void)
{
    /* norm: only layer_norm and rms_norm existed; softmax onwards is past the end */
    memset(&norm_table, 0xff, sizeof norm_table);
    norm_table.struct_size = (uint32_t)offsetof(rudnn_norm_kernels_t, softmax);
    norm_table.layer_norm = NULL;
    norm_table.rms_norm = k_rms_norm;
    memcpy(&norm_table.softmax, &(void *){POISON}, sizeof(void *));
    memcpy(&norm_table.add_rms_norm, &(void *){POISON}, sizeof(void *));

    memset(&backend, 0, sizeof backend);
    backend.abi_version = RUDNN_BACKEND_ABI_VERSION;
    backend.struct_size = (uint32_t)offsetof(rudnn_backend_t, moe); /* built before the moe family */
    backend.name = "hip";
    backend.init = b_init;
    backend.device_open = b_open;
    backend.device_close = b_close;
    backend.device_info = b_info;
    backend.mem_alloc = b_alloc;
    backend.mem_free = b_free;
    backend.mem_write = b_write;
    backend.mem_read = b_read;
    backend.mem_copy = b_copy;
    backend.mem_fill = b_fill;
    backend.queue_create = b_queue_create;
    backend.queue_destroy = b_queue_destroy;
    backend.queue_sync = b_sync;
    backend.event_create = b_event_create;
    backend.event_destroy = b_event_destroy;
    backend.event_record = b_event_record;
    backend.event_elapsed_ms = b_elapsed;
    backend.norm = &norm_table;
    backend.moe = (const rudnn_moe_kernels_t *)POISON; /* past struct_size */
    return &backend;
}
