/* Allocation-fault injection and the counters of rudnn/debug.h: the one place that counts
 * allocations and answers "should this one fail". */
#include <stdatomic.h>
#include <stdlib.h>

#include "internal.h"
#include "rudnn/debug.h"

/* Off until a test arms it: then every hooked allocation pays one branch and nothing else. */
atomic_int rudnn_fault_tracking;
static atomic_uint_fast64_t alloc_count;
static atomic_uint_fast64_t fail_from; /* 0: none fails; n: the nth and later ones fail */

static atomic_uint_fast64_t device_allocations;
static atomic_uint_fast64_t device_bytes;
static atomic_uint_fast64_t live_objects;

int rudnn_fault_tick(void)
{
    uint64_t n = atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed) + 1;
    uint64_t from = atomic_load_explicit(&fail_from, memory_order_relaxed);
    return from && n >= from;
}

void rudnn_debug_fail_allocation(uint64_t n)
{
    atomic_store(&fail_from, 0);
    atomic_store(&alloc_count, 0);
    atomic_store(&fail_from, n);
    atomic_store(&rudnn_fault_tracking, 1);
}

uint64_t rudnn_debug_allocation_count(void) { return atomic_load(&alloc_count); }

/* The host service of the same name (backends/backend.h). */
int rudnn_fault_allocation(void) { return rudnn_fault_hit(); }

void *rudnn_host_calloc(size_t count, size_t size)
{
    if (rudnn_fault_hit())
        return NULL;
    return calloc(count, size);
}

void *rudnn_host_malloc(size_t bytes)
{
    if (rudnn_fault_hit())
        return NULL;
    return malloc(bytes);
}

rudnn_status_t rudnn_device_alloc(rudnn_context_t ctx, size_t bytes, void **mem)
{
    if (rudnn_fault_hit())
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of device memory allocating %zu bytes "
                               "(injected fault, rudnn_debug_fail_allocation)", ctx->backend->name, bytes);
    rudnn_status_t st = ctx->backend->mem_alloc(ctx->device, bytes, mem);
    if (st == RUDNN_STATUS_SUCCESS) {
        atomic_fetch_add_explicit(&device_allocations, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&device_bytes, bytes, memory_order_relaxed);
    }
    return st;
}

void rudnn_device_free(rudnn_context_t ctx, void *mem, size_t bytes)
{
    if (!mem)
        return;
    ctx->backend->mem_free(ctx->device, mem);
    atomic_fetch_sub_explicit(&device_allocations, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&device_bytes, bytes, memory_order_relaxed);
}

void rudnn_debug_device_memory(uint64_t *allocations, uint64_t *bytes)
{
    if (allocations)
        *allocations = atomic_load(&device_allocations);
    if (bytes)
        *bytes = atomic_load(&device_bytes);
}

void rudnn_live_object(int delta)
{
    if (delta > 0)
        atomic_fetch_add_explicit(&live_objects, 1, memory_order_relaxed);
    else
        atomic_fetch_sub_explicit(&live_objects, 1, memory_order_relaxed);
}

uint64_t rudnn_debug_live_objects(void) { return atomic_load(&live_objects); }

/* RUDNN_FAULT_ALLOC=n (core/env.c): arms the fault from the first allocation on. */
void rudnn_fault_arm_from_env(uint64_t n)
{
    if (n)
        rudnn_debug_fail_allocation(n);
}
