/* Contexts (backend + device), queues and events. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "pool.h"

int rudnn_backend_name_known(const char *name); /* loader.c */

static const char *const auto_order[] = {"cuda", "hip", "opencl"};

static rudnn_status_t open_device(const rudnn_backend_t *backend, int device_count, int index,
                                  rudnn_context_t *out)
{
    if (index >= device_count)
        return rudnn_set_error(RUDNN_STATUS_BACKEND_UNAVAILABLE,
                               "context_create: device %d requested but backend '%s' has %d device(s)",
                               index, backend->name, device_count);
    rudnn_context_t ctx = rudnn_host_calloc(1, sizeof *ctx);
    if (!ctx)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "context_create: out of host memory");
    atomic_init(&ctx->refs, 1);
    ctx->backend = backend;
    ctx->device_index = index;
    rudnn_status_t st = backend->device_open(index, &ctx->device);
    if (st != RUDNN_STATUS_SUCCESS) {
        rudnn_error_prefix("context_create");
        free(ctx);
        return st;
    }
    rudnn_live_object(+1);
    *out = ctx;
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_context_create(rudnn_context_t *context, const rudnn_context_options_t *options)
{
    rudnn_clear_error();
    if (!context)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "context_create: context is NULL");
    const rudnn_env_t *env = rudnn_env();
    const char *name = options && options->backend ? options->backend : env->backend;
    if (!name)
        name = "auto";
    const char *plugin_path = options ? options->plugin_path : NULL;
    int device = options && options->device >= 0 ? options->device : -1;
    if (device < 0) {
        if (env->device_set_invalid)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                                   "context_create: RUDNN_DEVICE is not a device index (expected 0, 1, ...)");
        device = env->device >= 0 ? env->device : 0;
    }

    if (strcmp(name, "auto") != 0) {
        if (!rudnn_backend_name_known(name))
            return rudnn_set_error(RUDNN_STATUS_UNKNOWN_BACKEND,
                                   "context_create: unknown backend '%s' (valid: auto, cuda, hip, opencl)",
                                   name);
        const rudnn_backend_t *backend;
        int count;
        rudnn_status_t st = rudnn_loader_open(name, plugin_path, &backend, &count);
        if (st != RUDNN_STATUS_SUCCESS) {
            /* say what is available instead */
            char failure[2048];
            snprintf(failure, sizeof failure, "%s", rudnn_last_error());
            char available[256] = "";
            for (size_t i = 0; i < sizeof auto_order / sizeof auto_order[0]; i++) {
                const rudnn_backend_t *other;
                int n;
                if (strcmp(auto_order[i], name) != 0 &&
                    rudnn_loader_open(auto_order[i], plugin_path, &other, &n) == RUDNN_STATUS_SUCCESS) {
                    size_t len = strlen(available);
                    snprintf(available + len, sizeof available - len, "%s%s (%d device(s))",
                             len ? ", " : "", auto_order[i], n);
                }
            }
            return rudnn_set_error(st, "context_create: %s. Available instead: %s", failure,
                                   available[0] ? available : "none");
        }
        return open_device(backend, count, device, context);
    }

    char report[4096] = "";
    for (size_t i = 0; i < sizeof auto_order / sizeof auto_order[0]; i++) {
        const rudnn_backend_t *backend;
        int count;
        if (rudnn_loader_open(auto_order[i], plugin_path, &backend, &count) == RUDNN_STATUS_SUCCESS)
            return open_device(backend, count, device, context);
        size_t len = strlen(report);
        snprintf(report + len, sizeof report - len, "%s[%s] %s", len ? "; " : "", auto_order[i],
                 rudnn_last_error());
    }
    return rudnn_set_error(RUDNN_STATUS_BACKEND_UNAVAILABLE,
                           "context_create: no backend available (tried cuda, hip, opencl): %s", report);
}

void rudnn_context_retain(rudnn_context_t ctx) { atomic_fetch_add(&ctx->refs, 1); }

void rudnn_context_release(rudnn_context_t ctx)
{
    if (atomic_fetch_sub(&ctx->refs, 1) > 1)
        return;
    ctx->backend->device_close(ctx->device);
    free(ctx);
    rudnn_live_object(-1);
}

/* Children made from the context keep it (and its device) alive until they are destroyed. */
void rudnn_context_destroy(rudnn_context_t ctx)
{
    if (ctx)
        rudnn_context_release(ctx);
}

rudnn_status_t rudnn_context_device_info(rudnn_context_t ctx, rudnn_device_info_t *info)
{
    rudnn_clear_error();
    if (!ctx || !info)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "context_device_info: %s is NULL",
                               ctx ? "info" : "context");
    memset(info, 0, sizeof *info);
    rudnn_status_t st = ctx->backend->device_info(ctx->device, info);
    snprintf(info->backend, sizeof info->backend, "%s", ctx->backend->name);
    info->index = ctx->device_index;
    return st;
}

rudnn_status_t rudnn_queue_create(rudnn_context_t ctx, rudnn_queue_t *queue)
{
    rudnn_clear_error();
    if (!ctx || !queue)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "queue_create: %s is NULL",
                               ctx ? "queue" : "context");
    rudnn_queue_t q = rudnn_host_calloc(1, sizeof *q);
    if (!q)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "queue_create: out of host memory");
    atomic_init(&q->refs, 1);
    atomic_init(&q->closed, 0);
    q->context = ctx;
    q->pool = rudnn_pool_create();
    if (!q->pool) {
        free(q);
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "queue_create: out of host memory");
    }
    rudnn_status_t st = ctx->backend->queue_create(ctx->device, &q->handle);
    if (st != RUDNN_STATUS_SUCCESS) {
        rudnn_error_prefix("queue_create");
        rudnn_pool_destroy(q->pool);
        free(q);
        return st;
    }
    rudnn_context_retain(ctx);
    rudnn_live_object(+1);
    *queue = q;
    return RUDNN_STATUS_SUCCESS;
}

void rudnn_queue_retain(rudnn_queue_t q) { atomic_fetch_add(&q->refs, 1); }

void rudnn_queue_release(rudnn_queue_t q)
{
    if (atomic_fetch_sub(&q->refs, 1) > 1)
        return;
    rudnn_pool_trim(q);
    rudnn_pool_destroy(q->pool);
    rudnn_context_t ctx = q->context;
    free(q);
    rudnn_live_object(-1);
    rudnn_context_release(ctx);
}

/* The backend queue goes now (after its work); the pool, and the context, stay until the last
 * plan or dispatched object holding pooled blocks of this queue is destroyed. */
void rudnn_queue_destroy(rudnn_queue_t q)
{
    if (!q)
        return;
    q->context->backend->queue_sync(q->handle); /* pooled blocks may still be in use */
    atomic_store(&q->closed, 1);
    rudnn_pool_trim(q);
    q->context->backend->queue_destroy(q->handle);
    q->handle = NULL;
    rudnn_queue_release(q);
}

rudnn_status_t rudnn_queue_synchronize(rudnn_queue_t q)
{
    rudnn_clear_error();
    if (!q)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "queue_synchronize: queue is NULL");
    return q->context->backend->queue_sync(q->handle);
}

rudnn_context_t rudnn_queue_context(rudnn_queue_t q) { return q ? q->context : NULL; }

void *rudnn_queue_native_handle(rudnn_queue_t q)
{
    if (!q || !q->handle || !q->context->backend->queue_native)
        return NULL;
    return q->context->backend->queue_native(q->handle);
}

rudnn_status_t rudnn_event_create(rudnn_context_t ctx, rudnn_event_t *event)
{
    rudnn_clear_error();
    if (!ctx || !event)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "event_create: %s is NULL",
                               ctx ? "event" : "context");
    rudnn_event_t e = rudnn_host_calloc(1, sizeof *e);
    if (!e)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "event_create: out of host memory");
    e->context = ctx;
    rudnn_status_t st = ctx->backend->event_create(ctx->device, &e->handle);
    if (st != RUDNN_STATUS_SUCCESS) {
        rudnn_error_prefix("event_create");
        free(e);
        return st;
    }
    rudnn_context_retain(ctx);
    rudnn_live_object(+1);
    *event = e;
    return RUDNN_STATUS_SUCCESS;
}

void rudnn_event_destroy(rudnn_event_t e)
{
    if (!e)
        return;
    rudnn_context_t ctx = e->context;
    ctx->backend->event_destroy(e->handle);
    free(e);
    rudnn_live_object(-1);
    rudnn_context_release(ctx);
}

rudnn_status_t rudnn_event_record(rudnn_event_t e, rudnn_queue_t q)
{
    rudnn_clear_error();
    if (!e || !q)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "event_record: %s is NULL", e ? "queue" : "event");
    if (e->context != q->context)
        return rudnn_set_error(RUDNN_STATUS_DEVICE_MISMATCH,
                               "event_record: event and queue belong to different contexts");
    return e->context->backend->event_record(e->handle, q->handle);
}

rudnn_status_t rudnn_event_elapsed_ms(rudnn_event_t start, rudnn_event_t end, float *ms)
{
    rudnn_clear_error();
    if (!start || !end || !ms)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "event_elapsed_ms: %s is NULL",
                               !start ? "start" : !end ? "end" : "milliseconds");
    if (start->context != end->context)
        return rudnn_set_error(RUDNN_STATUS_DEVICE_MISMATCH,
                               "event_elapsed_ms: events belong to different contexts");
    return start->context->backend->event_elapsed_ms(start->handle, end->handle, ms);
}
