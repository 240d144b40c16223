/* Paged attention's objects, shared by ops/paged_schedule.c (host plan), ops/paged_attention.c
 * (device plan, attention, MLA, split workspaces) and ops/paged_append.c. */
#ifndef RUDNN_OPS_PAGED_INTERNAL_H
#define RUDNN_OPS_PAGED_INTERNAL_H

#include "core/internal.h"

struct rudnn_paged_host_plan {
    rudnn_paged_layout_t layout;
    uint8_t *image;        /* the device image (hal/paged_attention.h), layout.bytes */
    int64_t no_row_query;  /* a query at its sequence's length (no cache row to append to), or -1 */
    int64_t dup_query[2];  /* two queries of one physical row, or -1 */
};

struct rudnn_paged_plan {
    rudnn_queue_t queue;   /* held */
    rudnn_buffer_t image;  /* a block of the queue's pool */
    rudnn_paged_layout_t layout;
    int64_t no_row_query;
    int64_t dup_query[2];
    int compute_units;     /* the device's, for the split choice */
};

/* The plan is there and its queue is alive (the caller may have destroyed it: the plan's reference
 * keeps the object, not the runtime queue). */
rudnn_status_t rudnn_paged_check_plan(const char *op, rudnn_paged_plan_t p);

#endif
