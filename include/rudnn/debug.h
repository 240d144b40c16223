/* Testing aids: allocation-fault injection and counters of what rudnn holds.
 *
 * For test suites and leak hunts, not for production code: the calls are cheap but
 * process-wide (not per context or thread). Installed so that an application's own tests
 * can walk rudnn's failure paths; not included by rudnn/rudnn.h.
 *
 * What counts as an allocation: every host allocation librudnn makes for its objects
 * (contexts, queues, buffers, events, pools, routing plans, dispatched tokens, experts), every
 * device allocation it asks a backend for (buffer create, workspace pool), and the
 * allocations a plugin makes through the host service fail_allocation (the OpenCL plugin's
 * host objects, programs, clCreateBuffer; the CUDA/HIP plugins' host objects and cudaMalloc).
 * Allocations whose failure is not an error (disk-cache reads, probes) are not counted.
 * A plugin loaded before the hook existed counts nothing. */
#ifndef RUDNN_DEBUG_H
#define RUDNN_DEBUG_H

#include <stddef.h>
#include <stdint.h>

#include "rudnn/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Restarts the allocation count at 0 and arms the fault: n = 0 fails nothing; n >= 1 makes
 * the nth allocation from now fail, and every later one until the next call (so that a retry
 * inside the failing call fails too). A failing allocation gives RUDNN_STATUS_ALLOC_FAILED
 * (or, where the plugin cannot tell, another error status) with a message naming the op; the
 * call writes no output, leaks nothing, and the context and queue stay usable.
 * Counting starts with the first call of this function (or RUDNN_FAULT_ALLOC=n in the
 * environment, read once, which arms the fault from the process's first allocation on);
 * until then the hook is a single branch per allocation. */
RUDNN_API void rudnn_debug_fail_allocation(uint64_t n);

/* Allocations counted since the last rudnn_debug_fail_allocation (failed ones included);
 * 0 before counting started. */
RUDNN_API uint64_t rudnn_debug_allocation_count(void);

/* Device memory librudnn holds right now through backends: allocations and bytes (buffers,
 * pooled blocks in use or cached). Counted always, from the first allocation of the process. */
RUDNN_API void rudnn_debug_device_memory(uint64_t *allocations, uint64_t *bytes);

/* rudnn objects alive right now: contexts, queues, buffers, events, routing plans,
 * dispatched tokens and experts, including those kept alive after their destroy by a child
 * still in use (see rudnn_context_destroy). 0 once everything has been destroyed. */
RUDNN_API uint64_t rudnn_debug_live_objects(void);

#ifdef __cplusplus
}
#endif
#endif
