/* Fault cases of the runtime: context, queue, buffer and event creation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_case.h"

typedef struct core_state {
    fault_env_t env;
    void *made; /* the handle the call made, or FAULT_NO_HANDLE */
} core_state_t;

static rudnn_status_t setup(void *s, const fault_env_t *env)
{
    ((core_state_t *)s)->env = *env;
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t prepare(void *s)
{
    ((core_state_t *)s)->made = FAULT_NO_HANDLE;
    return RUDNN_STATUS_SUCCESS;
}

static int unchanged(void *s, char *why, size_t cap)
{
    if (((core_state_t *)s)->made == FAULT_NO_HANDLE)
        return 1;
    snprintf(why, cap, "the output handle was written by a call that failed");
    return 0;
}

static void teardown(void *s) { (void)s; }

static rudnn_status_t no_bytes(uint8_t **bytes, size_t *size)
{
    *bytes = NULL;
    *size = 0;
    return RUDNN_STATUS_SUCCESS;
}

/* ---- context_create: the new context opens a queue that synchronizes ---- */

static rudnn_status_t context_call(void *s) { return rudnn_context_create((rudnn_context_t *)&((core_state_t *)s)->made, NULL); }

static rudnn_status_t context_result(void *s, uint8_t **bytes, size_t *size)
{
    rudnn_queue_t q = NULL;
    rudnn_status_t st = rudnn_queue_create(((core_state_t *)s)->made, &q);
    if (!st)
        st = rudnn_queue_synchronize(q);
    rudnn_queue_destroy(q);
    return st ? st : no_bytes(bytes, size);
}

static void context_undo(void *s) { rudnn_context_destroy(((core_state_t *)s)->made); }

/* ---- queue_create: the new queue synchronizes ---- */

static rudnn_status_t queue_call(void *s)
{
    core_state_t *c = s;
    return rudnn_queue_create(c->env.ctx, (rudnn_queue_t *)&c->made);
}

static rudnn_status_t queue_result(void *s, uint8_t **bytes, size_t *size)
{
    rudnn_status_t st = rudnn_queue_synchronize(((core_state_t *)s)->made);
    return st ? st : no_bytes(bytes, size);
}

static void queue_undo(void *s) { rudnn_queue_destroy(((core_state_t *)s)->made); }

/* ---- buffer_create: the new buffer holds what is written ---- */

#define BUFFER_BYTES 4096

static rudnn_status_t buffer_call(void *s)
{
    core_state_t *c = s;
    return rudnn_buffer_create(c->env.ctx, BUFFER_BYTES, (rudnn_buffer_t *)&c->made);
}

static rudnn_status_t buffer_result(void *s, uint8_t **bytes, size_t *size)
{
    core_state_t *c = s;
    uint8_t pattern[BUFFER_BYTES];
    for (size_t i = 0; i < sizeof pattern; i++)
        pattern[i] = (uint8_t)(i * 7u + 3u);
    *bytes = malloc(sizeof pattern);
    *size = 0;
    if (!*bytes)
        return RUDNN_STATUS_ALLOC_FAILED;
    rudnn_status_t st = rudnn_buffer_write(c->env.queue, c->made, 0, pattern, sizeof pattern);
    if (!st)
        st = rudnn_buffer_read(c->env.queue, c->made, 0, *bytes, sizeof pattern);
    if (!st)
        *size = sizeof pattern;
    return st;
}

static void buffer_undo(void *s) { rudnn_buffer_destroy(((core_state_t *)s)->made); }

/* ---- event_create: the new event records on the queue ---- */

static rudnn_status_t event_call(void *s)
{
    core_state_t *c = s;
    return rudnn_event_create(c->env.ctx, (rudnn_event_t *)&c->made);
}

static rudnn_status_t event_result(void *s, uint8_t **bytes, size_t *size)
{
    core_state_t *c = s;
    rudnn_status_t st = rudnn_event_record(c->made, c->env.queue);
    if (!st)
        st = rudnn_queue_synchronize(c->env.queue);
    return st ? st : no_bytes(bytes, size);
}

static void event_undo(void *s) { rudnn_event_destroy(((core_state_t *)s)->made); }

#define CORE_CASE(op, modes)                                                                                  \
    {"" #op "_create", sizeof(core_state_t), modes, setup, prepare, op##_call, unchanged, op##_result,         \
     op##_undo, teardown, NULL, 0}

static const fault_case_t cases[] = {
    CORE_CASE(context, FAULT_COLD_QUEUE),
    CORE_CASE(queue, FAULT_COLD_QUEUE),
    CORE_CASE(buffer, FAULT_COLD_CONTEXT | FAULT_COLD_QUEUE),
    CORE_CASE(event, FAULT_COLD_QUEUE),
};

const fault_family_t fault_family_core = {"core", cases, sizeof cases / sizeof cases[0]};
