/* The gated delta rule's varlen schedule: its checks, its chunk counts, the device table of
 * backends/hal/gated_delta.h, and the plan that uploads that table once (rudnn/gated_delta.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gated_delta_internal.h"
#include "validate.h"

#define OP_PLAN "rudnn_gated_delta_varlen_plan_create"

rudnn_status_t rudnn_gdr_check_offsets(const char *op, const rudnn_gated_delta_varlen_t *v, int64_t T)
{
    if (v->sequences < 1)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: varlen.sequences = %lld, expected >= 1", op,
                               (long long)v->sequences);
    TRY(rudnn_check_arg(op, "varlen.cu_seqlens", v->cu_seqlens));
    if (v->cu_seqlens[0] != 0)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: varlen.cu_seqlens[0] = %lld, expected 0", op,
                               (long long)v->cu_seqlens[0]);
    for (int64_t i = 0; i < v->sequences; i++) {
        if (v->cu_seqlens[i + 1] < v->cu_seqlens[i])
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: varlen.cu_seqlens[%lld] = %lld is below "
                                   "cu_seqlens[%lld] = %lld: offsets must not decrease", op, (long long)(i + 1),
                                   (long long)v->cu_seqlens[i + 1], (long long)i, (long long)v->cu_seqlens[i]);
        if (v->cu_seqlens[i + 1] > T)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: varlen.cu_seqlens[%lld] = %lld is past T = %lld "
                                   "(dim 2 of query)", op, (long long)(i + 1), (long long)v->cu_seqlens[i + 1],
                                   (long long)T);
    }
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_gdr_check_indices(const char *op, const rudnn_gated_delta_varlen_t *v, int64_t rows_in,
                                       int64_t rows_out, int64_t *rows_needed)
{
    if (!v->state_indices) {
        if (v->sequences > rows_in || v->sequences > rows_out)
            return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: varlen.state_indices is NULL (sequence i uses row "
                                   "i), so initial_state (%lld rows) and final_state (%lld rows) need %lld rows", op,
                                   (long long)rows_in, (long long)rows_out, (long long)v->sequences);
        *rows_needed = v->sequences;
        return RUDNN_STATUS_SUCCESS;
    }
    /* in range first (the largest sizes the bitmap), then distinct: the rows seen marked */
    const int64_t rows = rows_in < rows_out ? rows_in : rows_out;
    int64_t most = -1;
    for (int64_t i = 0; i < v->sequences; i++) {
        const int32_t r = v->state_indices[i];
        if (r < 0)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: varlen.state_indices[%lld] = %d is negative, outside "
                                   "every state pool (rows count from 0)", op, (long long)i, (int)r);
        if (r >= rows)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: varlen.state_indices[%lld] = %d is outside the "
                                   "state pools (initial_state %lld rows, final_state %lld rows)", op, (long long)i,
                                   (int)r, (long long)rows_in, (long long)rows_out);
        most = r > most ? r : most;
    }
    uint8_t *seen = rudnn_host_calloc((size_t)(most + 1 + 7) / 8 + 1, 1);
    if (!seen)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory for the state index check", op);
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    for (int64_t i = 0; i < v->sequences && !st; i++) {
        const int32_t r = v->state_indices[i];
        if (seen[r / 8] & (1u << (r % 8)))
            st = rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: varlen.state_indices[%lld] = %d repeats an earlier "
                                 "sequence's row: each sequence needs its own state", op, (long long)i, (int)r);
        else
            seen[r / 8] |= (uint8_t)(1u << (r % 8));
    }
    free(seen);
    *rows_needed = most + 1;
    return st;
}

rudnn_status_t rudnn_gdr_check_chunk_size(const char *op, rudnn_queue_t queue, int64_t chunk)
{
    rudnn_device_info_t info;
    TRY(rudnn_context_device_info(queue->context, &info));
    const uint64_t limit = info.shared_memory_per_group;
    if (chunk >= 1 && chunk <= (int64_t)1 << 20 && 4 * ((uint64_t)chunk * (uint64_t)chunk + (uint64_t)chunk) <= limit)
        return RUDNN_STATUS_SUCCESS;
    if (chunk < 1)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: chunk_size = %lld, expected >= 1", op, (long long)chunk);
    return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: chunk_size = %lld needs a triangular workspace of 4 (C^2 + C) "
                           "= %llu bytes, past the device's shared memory per workgroup (%llu bytes)", op,
                           (long long)chunk,
                           chunk <= (int64_t)1 << 20
                               ? (unsigned long long)(4 * ((uint64_t)chunk * (uint64_t)chunk + (uint64_t)chunk))
                               : (unsigned long long)UINT64_MAX,
                           (unsigned long long)limit);
}

void rudnn_gdr_count_chunks(const rudnn_gated_delta_varlen_t *v, int64_t chunk, int64_t *chunks, int64_t *longest)
{
    *chunks = 0, *longest = 0;
    if (!chunk)
        return;
    for (int64_t i = 0; i < v->sequences; i++) {
        const int64_t n = (v->cu_seqlens[i + 1] - v->cu_seqlens[i] + chunk - 1) / chunk;
        *chunks += n;
        *longest = n > *longest ? n : *longest;
    }
}

rudnn_status_t rudnn_gdr_write_table(rudnn_queue_t queue, const rudnn_gated_delta_varlen_t *v, int64_t chunk,
                                     void *ws)
{
    const int64_t n = v->sequences;
    const size_t bytes = rudnn_gated_delta_table_bytes(n);
    uint8_t *host = rudnn_host_calloc(bytes, 1);
    if (!host)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "out of host memory for the sequence table");
    int64_t *start = (int64_t *)host, *length = start + n, *first = length + n;
    int32_t *row = (int32_t *)(first + n + 1);
    for (int64_t i = 0; i < n; i++) {
        start[i] = v->cu_seqlens[i];
        length[i] = v->cu_seqlens[i + 1] - v->cu_seqlens[i];
        first[i + 1] = first[i] + (chunk ? (length[i] + chunk - 1) / chunk : 0);
        row[i] = v->state_indices ? v->state_indices[i] : (int32_t)i;
    }
    const rudnn_status_t st = queue->context->backend->mem_write(queue->handle, (rudnn_mem_ref_t){ws, 0}, host, bytes);
    free(host);
    return st;
}

rudnn_status_t rudnn_gdr_check_plan(const char *op, rudnn_queue_t queue, const rudnn_gated_delta_varlen_t *v,
                                    int64_t chunk, int64_t T, int64_t rows_in, int64_t rows_out)
{
    const rudnn_gated_delta_varlen_plan_t p = v->plan;
    if (v->sequences || v->cu_seqlens || v->state_indices)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: varlen.plan is set, so varlen.sequences must be 0 and "
                               "varlen.cu_seqlens and varlen.state_indices NULL (the plan holds the schedule)", op);
    TRY(rudnn_check_held_queue(op, "varlen.plan", p->queue));
    if (p->queue != queue)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: varlen.plan was made for another queue: it serves "
                               "calls on its own queue only", op);
    if (chunk && chunk != p->chunk_size)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: varlen.plan was made for chunk_size %lld, the call's "
                               "is %lld", op, (long long)p->chunk_size, (long long)chunk);
    /* the plan checked its schedule; what the call's tensors decide is checked here */
    if (p->tokens > T)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: varlen.plan's cu_seqlens[%lld] = %lld is past T = %lld "
                               "(dim 2 of query)", op, (long long)p->sequences, (long long)p->tokens, (long long)T);
    if (p->rows > rows_in || p->rows > rows_out)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: varlen.plan's state_indices need %lld rows of the state "
                               "pools (initial_state has %lld rows, final_state %lld)", op, (long long)p->rows,
                               (long long)rows_in, (long long)rows_out);
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_gated_delta_varlen_plan_create(rudnn_queue_t queue, const rudnn_gated_delta_varlen_t *varlen,
                                                    int64_t chunk_size, rudnn_gated_delta_varlen_plan_t *plan)
{
    rudnn_clear_error();
    TRY(rudnn_check_arg(OP_PLAN, "plan", plan));
    TRY(rudnn_check_queue(OP_PLAN, queue));
    TRY(rudnn_check_arg(OP_PLAN, "varlen", varlen));
    if (varlen->plan)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: varlen.plan is set: a plan is made from host arrays "
                               "(varlen.sequences, cu_seqlens, state_indices)", OP_PLAN);
    if (chunk_size < 0)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: chunk_size = %lld, expected >= 1 (or 0: recurrent "
                               "calls only)", OP_PLAN, (long long)chunk_size);
    if (chunk_size)
        TRY(rudnn_gdr_check_chunk_size(OP_PLAN, queue, chunk_size));
    TRY(rudnn_gdr_check_offsets(OP_PLAN, varlen, INT64_MAX));
    int64_t rows = 0;
    TRY(rudnn_gdr_check_indices(OP_PLAN, varlen, (int64_t)INT32_MAX + 1, (int64_t)INT32_MAX + 1, &rows));
    rudnn_gated_delta_varlen_plan_t p = rudnn_host_calloc(1, sizeof *p);
    if (!p)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory", OP_PLAN);
    rudnn_status_t st = rudnn_buffer_from_pool(queue, rudnn_gated_delta_table_bytes(varlen->sequences), &p->table);
    if (!st) {
        st = rudnn_gdr_write_table(queue, varlen, chunk_size, p->table->mem);
        if (st)
            rudnn_buffer_release(p->table);
    }
    if (st) {
        rudnn_error_prefix(OP_PLAN);
        free(p);
        return st;
    }
    rudnn_queue_retain(queue);
    p->queue = queue;
    p->sequences = varlen->sequences;
    p->chunk_size = chunk_size;
    p->tokens = varlen->cu_seqlens[varlen->sequences];
    p->rows = rows;
    rudnn_gdr_count_chunks(varlen, chunk_size, &p->chunks, &p->longest);
    rudnn_live_object(+1);
    *plan = p;
    return RUDNN_STATUS_SUCCESS;
}

void rudnn_gated_delta_varlen_plan_destroy(rudnn_gated_delta_varlen_plan_t p)
{
    if (!p)
        return;
    rudnn_buffer_release(p->table);
    rudnn_queue_release(p->queue);
    free(p);
    rudnn_live_object(-1);
}

size_t rudnn_gated_delta_varlen_plan_device_bytes(rudnn_gated_delta_varlen_plan_t p)
{
    return p ? p->table->size : 0;
}
