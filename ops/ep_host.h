/* Expert parallelism, host-staged path: host copies of device tensors, the status agreement and
 * the point-to-point exchanges among the ranks that take part (ops/ep*.c). */
#ifndef RUDNN_OPS_EP_HOST_H
#define RUDNN_OPS_EP_HOST_H

#include "ep_layout.h"

/* Host copy of a contiguous tensor (freed by the caller); NULL tensor: *host NULL. */
rudnn_status_t ep_read(const char *op, rudnn_queue_t q, const rudnn_tensor_t *t, void **host);
/* Elements of a float tensor's host copy as F32. */
float ep_get(rudnn_dtype_t dt, const void *base, int64_t i);
/* v rounded to dt, stored at element i. */
void ep_put(rudnn_dtype_t dt, void *base, int64_t i, float v);

/* Every rank that takes part tells the others its status; the result is this rank's own error,
 * or BAD_PARAM naming the first rank that refused, or SUCCESS when none did. */
rudnn_status_t ep_agree(const char *op, rudnn_comm_t comm, const ep_layout_t *lay, rudnn_status_t mine);

/* One exchange among the ranks that take part (EP group): send[i] / send_bytes[i] to active
 * rank i (its EP rank lay->act[i]), recv[i] / recv_bytes[i] from it. */
rudnn_status_t ep_exchange(const char *op, rudnn_comm_t comm, const ep_layout_t *lay, void *const *send,
                           const size_t *send_bytes, void *const *recv, const size_t *recv_bytes, int tag);

/* The same with the TP peer: send, then receive its message of recv_bytes. */
rudnn_status_t ep_exchange_tp(const char *op, rudnn_comm_t comm, const ep_layout_t *lay, const void *send,
                              size_t send_bytes, void *recv, size_t recv_bytes, int tag);

#endif
