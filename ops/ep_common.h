/* Expert parallelism, what the dispatch (ops/ep_dispatch.c) and the combine (ops/ep_combine.c)
 * share: argument checks, who takes part, the send plan, the message tags (ops/ep.c). */
#ifndef RUDNN_OPS_EP_COMMON_H
#define RUDNN_OPS_EP_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "ep_layout.h"

/* message tags (1: the status agreement, ops/ep_host.c) */
enum { TAG_COUNTS = 2, TAG_META = 3, TAG_ROWS = 4, TAG_TP = 5 };

rudnn_status_t ep_check_dims(const char *op, const char *arg, const rudnn_tensor_t *t, int rank,
                             const int64_t *dims, const char *what);

/* The parameters every rank shares (the same error on every rank for the same values). */
rudnn_status_t ep_check_params(const char *op, const rudnn_comm_info_t *ci, const rudnn_ep_params_t *p);

/* The tokens' tensor (x, or the combine's residual: name), expert_ids and the mask. */
rudnn_status_t ep_check_routing_inputs(const char *op, rudnn_queue_t q, const rudnn_comm_info_t *ci,
                                       const rudnn_ep_params_t *p, const char *name, const rudnn_tensor_t *x,
                                       const rudnn_tensor_t *ids, const rudnn_tensor_t *mask);

/* A: rows per half of expand_x, and its lower bound. */
rudnn_status_t ep_check_rows(const char *op, const rudnn_comm_info_t *ci, const rudnn_ep_params_t *p, int64_t bs,
                             int64_t k, int64_t rows, int64_t *a);

/* Phase one: who takes part (the comm and the elastic info); an error here is not agreed on. */
rudnn_status_t ep_who_takes_part(const char *op, rudnn_queue_t q, rudnn_comm_t comm, const rudnn_tensor_t *elastic,
                                 rudnn_comm_info_t *ci, ep_layout_t *lay);

/* Phase two's shared part: the params, and the experts of the call. */
rudnn_status_t ep_params_layout(const char *op, const rudnn_comm_info_t *ci, const rudnn_ep_params_t *p,
                                ep_layout_t *lay);

/* Rows this rank sends: per (active destination i, local expert e) counts, and for each
 * routed slot its place in the send order (i, e, token, slot) (-1: not sent). */
typedef struct send_plan {
    int32_t *counts; /* [nact L] */
    int64_t *offset; /* [nact L + 1] exclusive prefix of counts */
    int64_t *pos;    /* [BS K] */
} send_plan_t;

void ep_send_plan_free(send_plan_t *sp);
rudnn_status_t ep_send_plan_make(const char *op, const ep_layout_t *lay, const int32_t *ids, const uint8_t *mask,
                                 int mask_rank, send_plan_t *sp);

/* Element size and row bytes of x. */
size_t ep_row_bytes(const ep_layout_t *lay, rudnn_dtype_t dt);

/* The seed's buffer rule: (buffer - 2 MiB) / 2 >= maxBS e (H + 128) (W L + K + 1). */
rudnn_status_t ep_check_buffer(const char *op, const rudnn_comm_info_t *ci, const rudnn_ep_params_t *p,
                               const ep_layout_t *lay, rudnn_dtype_t dt);

#endif
