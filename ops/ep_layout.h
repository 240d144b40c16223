/* Expert parallelism: who takes part and where each (token, slot) goes, for rudnn_ep_dispatch
 * and rudnn_ep_combine_add_rms_norm (ops/ep*.c). Plain host logic: the same on every backend. */
#ifndef RUDNN_OPS_EP_LAYOUT_H
#define RUDNN_OPS_EP_LAYOUT_H

#include <stdint.h>

#include "rudnn/ep.h"

/* Where a slot goes. */
enum { EP_SLOT_OFF = -1, EP_SLOT_ZERO = -2, EP_SLOT_COPY = -3, EP_SLOT_CONST = -4 };

typedef struct ep_layout {
    int ep_size, ep_rank, tp_size, tp_rank;
    int halves;           /* max(tp_size, 1) */
    int64_t experts;      /* routed experts in effect (E, or the elastic info's count) */
    int64_t special0;     /* the first special expert id: E (moe_expert_num), scaled down or not */
    int64_t experts_after; /* the elastic info's routed experts after (-1: no scale-down) */
    int64_t local;        /* L: routed experts per rank (unchanged by scale-down) */
    int64_t zero, copy, konst;
    int64_t bs, k, h, a;  /* tokens, slots, hidden, rows per half of expand_x */
    int active;           /* this rank takes part (elastic: not excluded) */
    int nact;             /* ranks taking part */
    int *act;             /* [nact] EP ranks in the order of their local index */
    int *local_of;        /* [ep_size] local index, or -1 for an excluded rank */
} ep_layout_t;

/* Who takes part, from the comm and the elastic info (host copy, NULL: none): needs no params,
 * so that a rank with bad params still tells the others. op names the caller in messages. */
rudnn_status_t ep_layout_init(const char *op, ep_layout_t *lay, const rudnn_comm_info_t *ci, const int32_t *elastic);
/* The experts of the call (params checked): E or the elastic info's count, L, the special
 * experts' ranges; a rank-local error when the elastic count is not ranks after x L. bs, k, h
 * and a are the caller's to set. */
rudnn_status_t ep_layout_params(const char *op, ep_layout_t *lay, const rudnn_ep_params_t *p);
void ep_layout_free(ep_layout_t *lay);

/* The destination of slot (t, j): an active EP rank (>= 0) with its local expert in *le, or one
 * of EP_SLOT_*. ids: [bs, k]; mask: NULL, [bs] (mask_rank 1) or [bs, k] (mask_rank 2). */
int ep_slot_dest(const ep_layout_t *lay, const int32_t *ids, const uint8_t *mask, int mask_rank, int64_t t,
                 int64_t j, int64_t *le);

/* Checks the ids (in range for the active slots) and the 1D mask (its trues first): a rank-local
 * error with the message set, before any exchange. */
rudnn_status_t ep_check_routes(const char *op, const ep_layout_t *lay, const int32_t *ids, const uint8_t *mask,
                               int mask_rank);

#endif
