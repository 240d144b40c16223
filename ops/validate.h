/* Argument checks shared by every op. Each returns RUDNN_STATUS_SUCCESS or a
 * status with the thread error set to "<op>: <arg> <what is wrong>". */
#ifndef RUDNN_OPS_VALIDATE_H
#define RUDNN_OPS_VALIDATE_H

#include "core/internal.h"

#define TRY(expr) RUDNN_TRY(expr) /* backends/backend.h */

/* Formats dims as "[4, 4095]" into buf. */
const char *rudnn_shape_str(const rudnn_tensor_t *t, char *buf, size_t cap);

rudnn_status_t rudnn_check_queue(const char *op, rudnn_queue_t queue);

/* The queue an object holds (a plan's) is still open: "<op>: <holder>'s queue was destroyed: its
 * calls run on that queue only" otherwise. */
rudnn_status_t rudnn_check_held_queue(const char *op, const char *holder, rudnn_queue_t queue);

/* A required pointer argument: "<op>: <arg> is NULL" when missing. */
rudnn_status_t rudnn_check_arg(const char *op, const char *arg, const void *ptr);

/* Non-NULL, has a buffer of the queue's context, valid dtype, rank in
 * [min_rank, RUDNN_MAX_RANK], non-negative dims, element-aligned offset, then
 * the stride rule of rudnn/status.h (rudnn_check_layout): strides that describe
 * a view, the whole view inside its buffer, contiguous. */
rudnn_status_t rudnn_check_tensor(const char *op, const char *arg, rudnn_queue_t queue,
                                  const rudnn_tensor_t *t, int min_rank);

/* rudnn_check_tensor for ops that take strided views: any valid view inside its buffer whose
 * last dim is contiguous (rudnn_check_layout_rows). */
rudnn_status_t rudnn_check_tensor_rows(const char *op, const char *arg, rudnn_queue_t queue,
                                       const rudnn_tensor_t *t, int min_rank);

/* rudnn_check_tensor for inputs read element by element: any valid view inside its buffer. */
rudnn_status_t rudnn_check_tensor_view(const char *op, const char *arg, rudnn_queue_t queue,
                                       const rudnn_tensor_t *t, int min_rank);

/* A caller's workspace (NULL: the op takes one from the queue's pool): on the queue's context,
 * workspace_bytes within the buffer and at least need, and none of the n tensors (NULL entries
 * skipped; names[i] names tensors[i]) inside its first workspace_bytes. */
rudnn_status_t rudnn_check_workspace(const char *op, rudnn_queue_t queue, rudnn_buffer_t ws, size_t ws_bytes,
                                     size_t need, const char *size_query, const rudnn_tensor_t *const *tensors,
                                     const char *const *names, int n);

/* Non-NULL and rudnn_check_tensor_view: an input or output read or written element by element. */
rudnn_status_t rudnn_check_view_arg(const char *op, const char *arg, rudnn_queue_t queue, const rudnn_tensor_t *t);

/* Rank `rank` and dims want[0 .. rank - 1]: BAD_SHAPE "<op>: <arg> has shape [..], expected [..]
 * (<why>)" otherwise. */
rudnn_status_t rudnn_check_dims(const char *op, const char *arg, const rudnn_tensor_t *t, const int64_t *want,
                                int rank, const char *why);

/* The element strides of t's dims [batch, channel, spatial...] as five, [batch, channel, D, H, W]:
 * t's d spatial dims last, missing leading ones 0, and 0 for every dim of size 1 (never stepped
 * along: kernels' offsets stay in range). The layout of the spatial families' plans. */
void rudnn_spatial_strides(const rudnn_tensor_t *t, int d, int64_t s[5]);

/* F32, F16 or BF16 (quantized and index dtypes are named as such). */
rudnn_status_t rudnn_check_float_dtype(const char *op, const char *arg, const rudnn_tensor_t *t);

/* Exactly this dtype. */
rudnn_status_t rudnn_check_dtype(const char *op, const char *arg, const rudnn_tensor_t *t,
                                 rudnn_dtype_t want, const char *why);

/* Same rank, dims and dtype as ref. */
rudnn_status_t rudnn_check_like(const char *op, const char *arg, const rudnn_tensor_t *t,
                                const char *ref_arg, const rudnn_tensor_t *ref);

/* Rank 1 with dims[0] == n. */
rudnn_status_t rudnn_check_vector(const char *op, const char *arg, const rudnn_tensor_t *t, int64_t n,
                                  const char *why);

/* An output may be exactly an input (same buffer, offset and extent) or
 * disjoint from it; anything in between is rejected. */
rudnn_status_t rudnn_check_overlap(const char *op, const char *out_arg, const rudnn_tensor_t *out,
                                   const char *in_arg, const rudnn_tensor_t *in);

/* An output that must not touch in at all (not even in place): the byte ranges the two views
 * span (first through last element) are disjoint. Either may be NULL. */
rudnn_status_t rudnn_check_disjoint(const char *op, const char *out_arg, const rudnn_tensor_t *out,
                                    const char *in_arg, const rudnn_tensor_t *in);

/* Finite and > 0. */
rudnn_status_t rudnn_check_eps(const char *op, float eps);

static inline rudnn_mem_ref_t rudnn_mem_of(const rudnn_tensor_t *t)
{
    rudnn_mem_ref_t r = {NULL, 0};
    if (t) {
        r.mem = t->buffer->mem;
        r.offset = t->offset;
    }
    return r;
}

/* The scratch of a kernel launch: the caller's workspace, or (workspace NULL) a block of need bytes from
 * the queue's pool, which rudnn_scratch_end gives back after the launch is queued. */
rudnn_status_t rudnn_scratch_begin(const char *op, rudnn_queue_t queue, rudnn_buffer_t workspace, size_t need,
                                   void **mem);
void rudnn_scratch_end(rudnn_queue_t queue, rudnn_buffer_t workspace, void *mem, size_t need);
/* Adds "<op>: " to a backend's message when a kernel entry fails. */
rudnn_status_t rudnn_kernel_status(const char *op, rudnn_status_t st);

#endif
