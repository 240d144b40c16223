/* Expert parallelism, the device side of the combine (ops/ep_device.h). */
#include "ep_device.h"

#include <stdlib.h>

#include "core/internal.h"
#include "validate.h"

#define WS_ALIGN 256

static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

/* The rows first (aligned, so that the kernel's 16-byte accesses work), then the codes. */
static size_t rows_bytes(int64_t bs, int64_t k, int64_t h, rudnn_dtype_t dt)
{
    return round_up((size_t)(bs * k) * (size_t)h * rudnn_dtype_size(dt), WS_ALIGN);
}

rudnn_mem_ref_t ep_combine_rows_at(rudnn_buffer_t ws, int64_t row, size_t row_bytes)
{
    const rudnn_mem_ref_t r = {ws->mem, (size_t)row * row_bytes};
    return r;
}

size_t ep_combine_workspace_bytes(int64_t bs, int64_t k, int64_t h, rudnn_dtype_t dt)
{
    return rows_bytes(bs, k, h, dt) + (size_t)(bs * k) * sizeof(int32_t);
}

static const rudnn_moe_kernels_t *kernels(rudnn_queue_t q) { return RUDNN_FAMILY_TABLE(q->context->backend, moe); }

rudnn_status_t ep_combine_device_check(const char *op, rudnn_queue_t q, const rudnn_ep_combine_in_t *in,
                                       const rudnn_ep_combine_out_t *out, rudnn_buffer_t ws, size_t ws_bytes,
                                       size_t need)
{
    if (!RUDNN_KERNEL_ENTRY(kernels(q), ep_combine_norm))
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: backend %s has no ep_combine_norm kernel (a plugin "
                               "built before it)", op, q->context->backend->name);
    TRY(rudnn_check_arg(op, "workspace", ws));
    if (ws->context != q->context)
        return rudnn_set_error(RUDNN_STATUS_DEVICE_MISMATCH, "%s: workspace is on another context/device than the "
                               "queue", op);
    if (ws_bytes > ws->size)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: workspace_bytes = %zu exceeds the workspace buffer "
                               "(%zu bytes)", op, ws_bytes, ws->size);
    if (ws_bytes < need)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: workspace_bytes = %zu is too small: the combine needs "
                               "%zu bytes (rudnn_ep_combine_workspace_size)", op, ws_bytes, need);
    const rudnn_tensor_t *all[18] = {in->expand_x, in->expert_ids, in->assist_info, in->ep_send_counts,
                                     in->tp_send_counts, in->expert_scales, in->residual, in->gamma,
                                     in->active_mask, in->shared_expert_x, in->elastic_info, in->ori_x,
                                     in->const_alpha1, in->const_alpha2, in->const_v, out->y, out->x, out->rstd};
    for (int i = 0; i < 18; i++) {
        const rudnn_tensor_t *t = all[i];
        if (t && t->buffer == ws && rudnn_tensor_span_bytes(t) && t->offset < ws_bytes)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: a tensor of the call overlaps the first "
                                   "workspace_bytes (%zu) of workspace", op, ws_bytes);
    }
    return RUDNN_STATUS_SUCCESS;
}

/* Where slot (t, j) takes its value from (hal/moe.h's codes). */
static int32_t slot_code(const ep_layout_t *lay, const int32_t *ids, const uint8_t *mask, int mask_rank,
                         const int64_t *pos, int64_t t, int64_t j)
{
    int64_t le = 0;
    switch (ep_slot_dest(lay, ids, mask, mask_rank, t, j, &le)) {
    case EP_SLOT_OFF:
        return RUDNN_EP_SRC_OFF;
    case EP_SLOT_ZERO:
        return RUDNN_EP_SRC_ZERO;
    case EP_SLOT_COPY:
        return RUDNN_EP_SRC_COPY;
    case EP_SLOT_CONST:
        return (int32_t)(RUDNN_EP_SRC_CONST0 - (ids[t * lay->k + j] - (lay->special0 + lay->zero + lay->copy)));
    default:
        return (int32_t)pos[t * lay->k + j];
    }
}

rudnn_status_t ep_combine_device(const char *op, rudnn_queue_t q, const ep_layout_t *lay, rudnn_dtype_t dt,
                                 const int32_t *ids, const uint8_t *mask, int mask_rank, const int64_t *pos,
                                 const void *back, int64_t nback, const rudnn_ep_combine_in_t *in,
                                 rudnn_buffer_t ws, const rudnn_ep_combine_out_t *out)
{
    const int64_t bs = lay->bs, k = lay->k;
    int32_t *codes = rudnn_host_malloc((size_t)(bs * k) * sizeof *codes);
    if (!codes)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (slot codes)", op);
    for (int64_t t = 0; t < bs; t++)
        for (int64_t j = 0; j < k; j++)
            codes[t * k + j] = slot_code(lay, ids, mask, mask_rank, pos, t, j);
    const rudnn_backend_t *be = q->context->backend;
    const rudnn_mem_ref_t rows = {ws->mem, 0}, src = {ws->mem, rows_bytes(bs, k, lay->h, dt)};
    const size_t row = (size_t)lay->h * rudnn_dtype_size(dt);
    /* back NULL: the rows came into the workspace from the device exchange */
    rudnn_status_t st = back && nback ? be->mem_write(q->handle, rows, back, (size_t)nback * row)
                                      : RUDNN_STATUS_SUCCESS;
    if (st == RUDNN_STATUS_SUCCESS)
        st = be->mem_write(q->handle, src, codes, (size_t)(bs * k) * sizeof *codes);
    if (st == RUDNN_STATUS_SUCCESS) {
        const rudnn_ep_combine_plan_t plan = {.dtype = dt, .tokens = bs, .top_k = (int32_t)k, .hidden = lay->h,
                                              .has_shared = in->shared_expert_x != NULL, .eps = in->norm_eps};
        st = kernels(q)->ep_combine_norm(q->handle, &plan, rows, src, rudnn_mem_of(in->expert_scales),
                                         rudnn_mem_of(in->shared_expert_x), rudnn_mem_of(in->ori_x),
                                         rudnn_mem_of(in->const_alpha1), rudnn_mem_of(in->const_alpha2),
                                         rudnn_mem_of(in->const_v), rudnn_mem_of(in->residual),
                                         rudnn_mem_of(in->gamma), rudnn_mem_of(out->y), rudnn_mem_of(out->rstd),
                                         rudnn_mem_of(out->x));
    }
    /* the ops return with their work done (rudnn/ep.h) */
    if (st == RUDNN_STATUS_SUCCESS)
        st = rudnn_queue_synchronize(q);
    free(codes);
    return rudnn_kernel_status(op, st);
}
