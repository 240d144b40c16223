/* Expert parallelism, the device side of the combine (ops/ep_combine.c): the caller's workspace,
 * the slot codes, and the backend's fused weighted sum + shared term + residual add + RMSNorm
 * (hal/moe.h, ep_combine_norm). */
#ifndef RUDNN_OPS_EP_DEVICE_H
#define RUDNN_OPS_EP_DEVICE_H

#include "ep_layout.h"
#include "core/internal.h"

/* Workspace bytes for BS tokens, K slots and H of dtype dt: room for one returning row a slot,
 * then the slot codes. */
size_t ep_combine_workspace_bytes(int64_t bs, int64_t k, int64_t h, rudnn_dtype_t dt);

/* This rank's device side can run: the backend has the kernel, and the caller's workspace is on
 * the queue's context, holds need bytes and overlaps no tensor of the call. A rank-local error. */
rudnn_status_t ep_combine_device_check(const char *op, rudnn_queue_t q, const rudnn_ep_combine_in_t *in,
                                       const rudnn_ep_combine_out_t *out, rudnn_buffer_t ws, size_t ws_bytes,
                                       size_t need);

/* Where returning row `row` (this rank's send order) lives in the workspace. */
rudnn_mem_ref_t ep_combine_rows_at(rudnn_buffer_t ws, int64_t row, size_t row_bytes);

/* Writes back (host: the rows that returned, in this rank's send order; pos[t K + j] is slot
 * (t, j)'s row; NULL: a device exchange put them there already) and each slot's code into the
 * workspace, then runs the kernel into out. */
rudnn_status_t ep_combine_device(const char *op, rudnn_queue_t q, const ep_layout_t *lay, rudnn_dtype_t dt,
                                 const int32_t *ids, const uint8_t *mask, int mask_rank, const int64_t *pos,
                                 const void *back, int64_t nback, const rudnn_ep_combine_in_t *in,
                                 rudnn_buffer_t ws, const rudnn_ep_combine_out_t *out);

#endif
