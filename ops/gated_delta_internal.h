/* The gated delta rule's varlen schedule, shared by the calls (ops/gated_delta.c) and the plan
 * that uploads it once (ops/gated_delta_varlen.c). */
#ifndef RUDNN_OPS_GATED_DELTA_INTERNAL_H
#define RUDNN_OPS_GATED_DELTA_INTERNAL_H

#include <stdint.h>

#include "core/internal.h"
#include "rudnn/gated_delta.h"

struct rudnn_gated_delta_varlen_plan {
    rudnn_queue_t queue;  /* held */
    rudnn_buffer_t table; /* a block of the queue's pool: backends/hal/gated_delta.h's varlen table */
    int64_t sequences;
    int64_t chunk_size;   /* its chunked calls' (0: recurrent calls only) */
    int64_t tokens;       /* cu_seqlens[N]: a call's T must reach it */
    int64_t rows;         /* the pools' rows the indices need: the largest index + 1 */
    int64_t chunks;       /* chunk_size's chunks of all sequences, and of the longest */
    int64_t longest;
};

/* 0 = cu[0] <= cu[1] <= ... <= cu[N] <= T (INT64_MAX: T unknown yet). */
rudnn_status_t rudnn_gdr_check_offsets(const char *op, const rudnn_gated_delta_varlen_t *v, int64_t T);
/* The indices (NULL: row i) below both pools' rows and distinct; *rows_needed = the largest + 1. */
rudnn_status_t rudnn_gdr_check_indices(const char *op, const rudnn_gated_delta_varlen_t *v, int64_t rows_in,
                                       int64_t rows_out, int64_t *rows_needed);
/* chunk_size 1 .. the triangular workspace the device's shared memory holds. */
rudnn_status_t rudnn_gdr_check_chunk_size(const char *op, rudnn_queue_t queue, int64_t chunk);
/* chunk's chunks of all sequences and of the longest (chunk 0: none). */
void rudnn_gdr_count_chunks(const rudnn_gated_delta_varlen_t *v, int64_t chunk, int64_t *chunks, int64_t *longest);
/* The device table's image (rudnn_gated_delta_table_bytes(N) bytes) for calls with chunk, to the
 * queue's memory at ws; ALLOC_FAILED without host memory. */
rudnn_status_t rudnn_gdr_write_table(rudnn_queue_t queue, const rudnn_gated_delta_varlen_t *v, int64_t chunk,
                                     void *ws);
/* A plan a call may use: no host arrays beside it, its queue alive and the call's, made for the
 * call's chunk (0: a recurrent call takes any plan), its last offset within T and its largest index
 * within both pools' rows. */
rudnn_status_t rudnn_gdr_check_plan(const char *op, rudnn_queue_t queue, const rudnn_gated_delta_varlen_t *v,
                                    int64_t chunk, int64_t T, int64_t rows_in, int64_t rows_out);

#endif
