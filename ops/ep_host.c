/* Expert parallelism, host-staged path: copies and exchanges (ops/ep_host.h). */
#include "ep_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/internal.h"

rudnn_status_t ep_read(const char *op, rudnn_queue_t q, const rudnn_tensor_t *t, void **host)
{
    *host = NULL;
    if (!t)
        return RUDNN_STATUS_SUCCESS;
    const size_t bytes = rudnn_tensor_bytes(t);
    *host = rudnn_host_malloc(bytes ? bytes : 1);
    if (!*host)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (a %zu-byte staging copy)", op,
                               bytes);
    const rudnn_status_t st = bytes ? rudnn_tensor_read(q, t, *host, bytes) : RUDNN_STATUS_SUCCESS;
    if (st != RUDNN_STATUS_SUCCESS) {
        free(*host);
        *host = NULL;
    }
    return st;
}

float ep_get(rudnn_dtype_t dt, const void *base, int64_t i)
{
    switch (dt) {
    case RUDNN_F16:
        return rudnn_f16_to_f32(((const uint16_t *)base)[i]);
    case RUDNN_BF16:
        return rudnn_bf16_to_f32(((const uint16_t *)base)[i]);
    default:
        return ((const float *)base)[i];
    }
}

void ep_put(rudnn_dtype_t dt, void *base, int64_t i, float v)
{
    switch (dt) {
    case RUDNN_F16:
        ((uint16_t *)base)[i] = rudnn_f32_to_f16(v);
        break;
    case RUDNN_BF16:
        ((uint16_t *)base)[i] = rudnn_f32_to_bf16(v);
        break;
    default:
        ((float *)base)[i] = v;
    }
}

rudnn_status_t ep_exchange(const char *op, rudnn_comm_t comm, const ep_layout_t *lay, void *const *send,
                           const size_t *send_bytes, void *const *recv, const size_t *recv_bytes, int tag)
{
    return rudnn_comm_exchange(comm, RUDNN_COMM_GROUP_EP, op, lay->nact, lay->act, (const void *const *)send,
                               send_bytes, lay->nact, lay->act, recv, recv_bytes, tag);
}

rudnn_status_t ep_exchange_tp(const char *op, rudnn_comm_t comm, const ep_layout_t *lay, const void *send,
                              size_t send_bytes, void *recv, size_t recv_bytes, int tag)
{
    const int peer = 1 - lay->tp_rank;
    return rudnn_comm_exchange(comm, RUDNN_COMM_GROUP_TP, op, 1, &peer, &send, &send_bytes, 1, &peer, &recv,
                               &recv_bytes, tag);
}

rudnn_status_t ep_agree(const char *op, rudnn_comm_t comm, const ep_layout_t *lay, rudnn_status_t mine)
{
    const int n = lay->nact;
    int32_t *theirs = rudnn_host_calloc((size_t)n, sizeof *theirs);
    void **send = rudnn_host_calloc((size_t)n, sizeof *send), **recv = rudnn_host_calloc((size_t)n, sizeof *recv);
    size_t *bytes = rudnn_host_calloc((size_t)n, sizeof *bytes);
    int32_t own = (int32_t)mine;
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    if (!theirs || !send || !recv || !bytes) {
        /* still tell the others: a rank that cannot allocate here fails, and they must not wait */
        st = rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory (status of %d ranks)", op, n);
    } else {
        for (int i = 0; i < n; i++) {
            send[i] = &own;
            recv[i] = &theirs[i];
            bytes[i] = sizeof own;
        }
        char saved[RUDNN_MESSAGE_MAX];
        snprintf(saved, sizeof saved, "%s", rudnn_last_error());
        st = ep_exchange(op, comm, lay, send, bytes, recv, bytes, 1);
        if (st == RUDNN_STATUS_SUCCESS) {
            if (mine != RUDNN_STATUS_SUCCESS) {
                st = rudnn_set_error(mine, "%s", saved); /* this rank's own message stands */
            } else {
                for (int i = 0; i < n; i++)
                    if (theirs[i] != RUDNN_STATUS_SUCCESS) {
                        st = rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                                             "%s: EP rank %d refused its arguments (%s); no data was exchanged", op,
                                             lay->act[i], rudnn_status_string((rudnn_status_t)theirs[i]));
                        break;
                    }
            }
        }
    }
    free(theirs);
    free(send);
    free(recv);
    free(bytes);
    return st;
}
