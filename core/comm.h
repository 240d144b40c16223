/* Communicators (rudnn/comm.h) as ops/ uses them. Not installed. */
#ifndef RUDNN_CORE_COMM_H
#define RUDNN_CORE_COMM_H

#include "comm_glue.h"
#include "internal.h"

#define RUDNN_COMM_GROUP_EP 0
#define RUDNN_COMM_GROUP_TP 1

struct rudnn_comm {
    rudnn_context_t context; /* referenced: released by rudnn_comm_destroy */
    rudnn_comm_kind_t kind;
    const rudnn_comm_glue_t *glue;       /* RUDNN_COMM_MPI */
    const rudnn_nccl_glue_t *nccl;       /* RUDNN_COMM_NCCL: the NCCL or the RCCL glue */
    void *ep, *tp; /* the glue's communicators; tp NULL without a TP group */
    int ep_rank, ep_size, tp_rank, tp_size;
    int thread_level; /* RUDNN_GLUE_THREAD_*: below MULTIPLE, calls are serialised */
    size_t buffer_bytes;
};

/* Point-to-point exchange of host buffers within group (RUDNN_COMM_GROUP_EP or _TP), peers given
 * as ranks of that group: every receive and send posted at once, all waited for. recv_bytes[i]
 * must equal what recv_peers[i] sends with the same tag (NCCL: in its matching call; the tag is
 * checked and not sent). op names the calling op in messages. */
rudnn_status_t rudnn_comm_exchange(rudnn_comm_t comm, int group, const char *op, int nsend,
                                   const int *send_peers, const void *const *send_bufs,
                                   const size_t *send_bytes, int nrecv, const int *recv_peers,
                                   void *const *recv_bufs, const size_t *recv_bytes, int tag);

/* The same with device memory (NCCL communicators only; memory of the communicator's context):
 * no host copy. Several messages to one peer are matched in the order given. The queue that
 * wrote the send buffers must be synchronised first; the receives are complete on return. */
rudnn_status_t rudnn_comm_exchange_device(rudnn_comm_t comm, int group, const char *op, int nsend,
                                          const int *send_peers, const rudnn_mem_ref_t *send,
                                          const size_t *send_bytes, int nrecv, const int *recv_peers,
                                          const rudnn_mem_ref_t *recv, const size_t *recv_bytes);

/* Whether comm moves device memory itself (rudnn_comm_exchange_device works). */
int rudnn_comm_is_device(rudnn_comm_t comm);

/* Collective within group: *value becomes the maximum over its ranks (status agreement). */
rudnn_status_t rudnn_comm_allreduce_max(rudnn_comm_t comm, int group, const char *op, int *value);

/* core/comm_load.c: the glue, loaded once per process; NULL with the status and message set
 * ("<op>: ...") when it cannot be. rudnn_rccl_glue: librudnn-rccl.so, the NCCL table over RCCL. */
const rudnn_comm_glue_t *rudnn_comm_glue(const char *op, rudnn_status_t *status);
const rudnn_nccl_glue_t *rudnn_nccl_glue(const char *op, rudnn_status_t *status);
const rudnn_nccl_glue_t *rudnn_rccl_glue(const char *op, rudnn_status_t *status);

#endif
