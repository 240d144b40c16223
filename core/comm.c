/* Communicators (rudnn/comm.h): creation with agreement among ranks, and the exchange and
 * reduction ops/ build on. Every MPI, NCCL and RCCL call goes through a glue (core/comm_glue.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"

#define CREATE "comm_create_mpi"
#define TAG_MAX 32767 /* the MPI_TAG_UB every MPI guarantees */

/* Below MPI_THREAD_MULTIPLE, MPI may be entered by one thread at a time: rudnn's own calls take
 * this lock (the caller orders its calls against rudnn's). */
static pthread_mutex_t serial_lock = PTHREAD_MUTEX_INITIALIZER;

static void enter(int level)
{
    if (level < RUDNN_GLUE_THREAD_MULTIPLE)
        pthread_mutex_lock(&serial_lock);
}

static void leave(int level)
{
    if (level < RUDNN_GLUE_THREAD_MULTIPLE)
        pthread_mutex_unlock(&serial_lock);
}

/* Checks of this rank's arguments that its peers may not share: recorded, agreed on later.
 * *dup_tp says whether tp_comm is an MPI communicator its group can duplicate. */
static rudnn_status_t check_local(const rudnn_comm_glue_t *g, rudnn_context_t context,
                                  const void *ep_comm, const void *tp_comm, size_t buffer_bytes,
                                  rudnn_comm_t *comm, int *dup_tp)
{
    char err[RUDNN_COMM_GLUE_ERR_MAX];
    int tp_size = 0, relation = 0;
    *dup_tp = 0;
    if (tp_comm) {
        if (g->size(tp_comm, &tp_size, err, sizeof err))
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                                   CREATE ": tp_comm: %s (pass NULL for no TP group)", err);
        *dup_tp = 1; /* every member sees the same size and relation: all of them dup it */
    }
    if (!context)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, CREATE ": context is NULL");
    if (!comm)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, CREATE ": comm is NULL");
    if (buffer_bytes < RUDNN_COMM_MIN_BUFFER_BYTES)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               CREATE ": buffer_bytes %zu is below the minimum of %zu (2 MiB)",
                               buffer_bytes, RUDNN_COMM_MIN_BUFFER_BYTES);
    if (!tp_comm)
        return RUDNN_STATUS_SUCCESS;
    if (g->compare(ep_comm, tp_comm, &relation, err, sizeof err))
        return rudnn_set_error(RUDNN_STATUS_DEVICE_ERROR, CREATE ": %s", err);
    if (relation == RUDNN_GLUE_SAME_RANKS)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               CREATE ": tp_comm holds the same ranks as ep_comm: the TP group must "
                               "differ from the EP group");
    if (tp_size != RUDNN_COMM_TP_SIZE)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               CREATE ": tp_comm has %d rank(s), a TP group has exactly %d", tp_size,
                               RUDNN_COMM_TP_SIZE);
    return RUDNN_STATUS_SUCCESS;
}

/* Makes every rank of both groups see the worst status: over EP, TP, then EP again (in an
 * EP x TP grid that reaches every rank). *who: the failing EP rank + 1 seen in the first round. */
static int agree(const rudnn_comm_glue_t *g, void *ep, void *tp, int *status, int *who, char *err,
                 size_t cap)
{
    return g->allreduce_max_int(ep, status, err, cap) || g->allreduce_max_int(ep, who, err, cap) ||
           (tp && g->allreduce_max_int(tp, status, err, cap)) ||
           (tp && g->allreduce_max_int(ep, status, err, cap));
}

/* The MPI part of creation, under the serial lock. */
static rudnn_status_t create_agreed(const rudnn_comm_glue_t *g, rudnn_context_t context,
                                    const void *ep_comm, const void *tp_comm, size_t buffer_bytes,
                                    int level, rudnn_comm_t *out)
{
    char err[RUDNN_COMM_GLUE_ERR_MAX];
    int dup_tp = 0;
    rudnn_status_t local = check_local(g, context, ep_comm, tp_comm, buffer_bytes, out, &dup_tp);
    char local_msg[2048];
    rudnn_copy_str(local_msg, sizeof local_msg, rudnn_last_error());

    void *ep = NULL, *tp = NULL;
    if (g->dup(ep_comm, &ep, err, sizeof err))
        return rudnn_set_error(RUDNN_STATUS_DEVICE_ERROR, CREATE ": ep_comm: %s", err);
    if (dup_tp && g->dup(tp_comm, &tp, err, sizeof err) && !local)
        local = rudnn_set_error(RUDNN_STATUS_DEVICE_ERROR, CREATE ": tp_comm: %s", err);
    rudnn_comm_t c = local ? NULL : rudnn_host_calloc(1, sizeof *c);
    if (!local && !c)
        local = rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, CREATE ": out of host memory");
    if (!local) {
        c->ep = ep;
        c->tp = tp;
        if (g->rank(ep, &c->ep_rank, err, sizeof err) || g->size(ep, &c->ep_size, err, sizeof err) ||
            (tp && (g->rank(tp, &c->tp_rank, err, sizeof err) ||
                    g->size(tp, &c->tp_size, err, sizeof err))))
            local = rudnn_set_error(RUDNN_STATUS_DEVICE_ERROR, CREATE ": %s", err);
    }
    if (local)
        rudnn_copy_str(local_msg, sizeof local_msg, rudnn_last_error());

    int status = (int)local, who = 0, my_rank = 0;
    g->rank(ep, &my_rank, err, sizeof err);
    who = local ? my_rank + 1 : 0;
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    if (agree(g, ep, tp, &status, &who, err, sizeof err))
        st = rudnn_set_error(RUDNN_STATUS_DEVICE_ERROR, CREATE ": agreeing with the other ranks: %s", err);
    else if (local)
        st = rudnn_set_error(local, "%s", local_msg);
    else if (status && who)
        st = rudnn_set_error((rudnn_status_t)status,
                             CREATE ": EP rank %d rejected its arguments (%s); nothing was created",
                             who - 1, rudnn_status_string((rudnn_status_t)status));
    else if (status)
        st = rudnn_set_error((rudnn_status_t)status,
                             CREATE ": a rank of another EP group, reached through the TP group, "
                             "rejected its arguments (%s); nothing was created",
                             rudnn_status_string((rudnn_status_t)status));
    if (st != RUDNN_STATUS_SUCCESS) {
        free(c);
        if (tp)
            g->free(tp);
        g->free(ep);
        return st;
    }
    c->glue = g;
    c->thread_level = level;
    c->buffer_bytes = buffer_bytes;
    c->context = context;
    rudnn_context_retain(context);
    rudnn_live_object(+1);
    *out = c;
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_comm_create_mpi(rudnn_context_t context, const void *ep_comm,
                                     const void *tp_comm, size_t buffer_bytes, rudnn_comm_t *comm)
{
    rudnn_clear_error();
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    const rudnn_comm_glue_t *g = rudnn_comm_glue(CREATE, &st);
    if (!g)
        return st;
    /* what follows returns at once: every rank of the EP group decides it alike (or is the
     * caller's bug that MPI itself would not survive) */
    if (!ep_comm)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               CREATE ": ep_comm is NULL (pass the address of the EP group's MPI_Comm)");
    char err[RUDNN_COMM_GLUE_ERR_MAX];
    int usable = 0, level = 0, ep_size = 0;
    if (g->query(&usable, &level, err, sizeof err))
        return rudnn_set_error(RUDNN_STATUS_DEVICE_ERROR, CREATE ": %s", err);
    if (!usable)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                               CREATE ": MPI is not initialised or already finalised: call MPI_Init "
                               "(librudnn-mpi.so uses %s; the application must use the same MPI)",
                               g->engine);
    enter(level);
    if (g->size(ep_comm, &ep_size, err, sizeof err))
        st = rudnn_set_error(RUDNN_STATUS_BAD_PARAM, CREATE ": ep_comm: %s", err);
    else if (ep_size < RUDNN_COMM_EP_MIN || ep_size > RUDNN_COMM_EP_MAX)
        st = rudnn_set_error(RUDNN_STATUS_BAD_PARAM,
                             CREATE ": ep_comm has %d rank(s), an EP group has %d..%d", ep_size,
                             RUDNN_COMM_EP_MIN, RUDNN_COMM_EP_MAX);
    else
        st = create_agreed(g, context, ep_comm, tp_comm, buffer_bytes, level, comm);
    leave(level);
    return st;
}

/* ---- NCCL (cuda) and RCCL (hip) --------------------------------------------------------- */

#define CREATE_NCCL "comm_create_nccl"

/* The backend a context made now would be on, for the glue choice: RUDNN_BACKEND, or (unset,
 * auto) the first of cuda and hip whose plugin loads with a device, in rudnn_context_create's
 * order. NULL when neither loads. */
static const char *default_backend(void)
{
    static const char *const gpu_order[] = {"cuda", "hip"};
    const char *name = rudnn_env()->backend;
    if (name && strcmp(name, "auto") != 0)
        return name;
    for (size_t i = 0; i < sizeof gpu_order / sizeof gpu_order[0]; i++) {
        const rudnn_backend_t *backend = NULL;
        int count = 0;
        if (rudnn_loader_open(gpu_order[i], NULL, &backend, &count) == RUDNN_STATUS_SUCCESS)
            return gpu_order[i];
    }
    rudnn_clear_error(); /* not an error of the caller's call */
    return NULL;
}

/* The glue of the NCCL table for a backend: RCCL on hip, NCCL otherwise (for cuda, and for the
 * calls that have no context to tell, as before RCCL was built). */
static const rudnn_nccl_glue_t *nccl_glue_of(const char *backend, const char *op, rudnn_status_t *status)
{
    return backend && strcmp(backend, "hip") == 0 ? rudnn_rccl_glue(op, status) : rudnn_nccl_glue(op, status);
}

rudnn_status_t rudnn_comm_nccl_unique_id(void *id)
{
    rudnn_clear_error();
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    /* no context: the id comes from the engine of the backend contexts get by default */
    const rudnn_nccl_glue_t *g = nccl_glue_of(default_backend(), "comm_nccl_unique_id", &st);
    if (!g)
        return st;
    if (!id)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "comm_nccl_unique_id: id is NULL (%d bytes expected)",
                               RUDNN_COMM_NCCL_ID_BYTES);
    char err[RUDNN_COMM_GLUE_ERR_MAX];
    return g->unique_id(id, err, sizeof err)
               ? rudnn_set_error(RUDNN_STATUS_DEVICE_ERROR, "comm_nccl_unique_id: %s: %s", g->engine, err)
               : RUDNN_STATUS_SUCCESS;
}

/* The glue for context: NCCL on cuda, RCCL on hip, NOT_SUPPORTED on any other backend. Without a
 * context, the default backend's (the NULL is reported after, with the other arguments). */
static const rudnn_nccl_glue_t *glue_for_context(rudnn_context_t context, rudnn_status_t *status)
{
    if (!context)
        return nccl_glue_of(default_backend(), CREATE_NCCL, status);
    const char *name = context->backend->name;
    if (strcmp(name, "cuda") != 0 && strcmp(name, "hip") != 0) {
        *status = rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, CREATE_NCCL ": the context is on the %s backend: "
                                  "NCCL needs the cuda backend, RCCL the hip backend (use rudnn_comm_create_mpi "
                                  "elsewhere)", name);
        return NULL;
    }
    return nccl_glue_of(name, CREATE_NCCL, status);
}

/* What a rank decides alone, before NCCL's collective initialisation (the backend is checked
 * first, by glue_for_context). */
static rudnn_status_t nccl_check_now(rudnn_context_t context, const void *ep_id, int ep_rank, int ep_size,
                                     const void *tp_id, int tp_rank, rudnn_comm_t *comm)
{
    if (!context || !comm || !ep_id)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, CREATE_NCCL ": %s is NULL",
                               !context ? "context" : !comm ? "comm" : "ep_id");
    if (ep_size < RUDNN_COMM_EP_MIN || ep_size > RUDNN_COMM_EP_MAX)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, CREATE_NCCL ": ep_size %d: an EP group has %d..%d ranks",
                               ep_size, RUDNN_COMM_EP_MIN, RUDNN_COMM_EP_MAX);
    if (ep_rank < 0 || ep_rank >= ep_size)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, CREATE_NCCL ": ep_rank %d outside 0..%d", ep_rank,
                               ep_size - 1);
    if (tp_id && (tp_rank < 0 || tp_rank >= RUDNN_COMM_TP_SIZE))
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, CREATE_NCCL ": tp_rank %d outside 0..%d (a TP group has "
                               "%d ranks)", tp_rank, RUDNN_COMM_TP_SIZE - 1, RUDNN_COMM_TP_SIZE);
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_comm_create_nccl(rudnn_context_t context, const void *ep_id, int ep_rank, int ep_size,
                                      const void *tp_id, int tp_rank, size_t buffer_bytes, rudnn_comm_t *comm)
{
    rudnn_clear_error();
    rudnn_status_t st = RUDNN_STATUS_SUCCESS;
    const rudnn_nccl_glue_t *g = glue_for_context(context, &st);
    if (!g)
        return st;
    RUDNN_TRY(nccl_check_now(context, ep_id, ep_rank, ep_size, tp_id, tp_rank, comm));
    char err[RUDNN_COMM_GLUE_ERR_MAX];
    void *ep = NULL, *tp = NULL;
    if (g->init(context->device_index, ep_id, ep_rank, ep_size, &ep, err, sizeof err))
        return rudnn_set_error(RUDNN_STATUS_DEVICE_ERROR, CREATE_NCCL ": EP group: %s: %s", g->engine, err);
    if (tp_id && g->init(context->device_index, tp_id, tp_rank, RUDNN_COMM_TP_SIZE, &tp, err, sizeof err)) {
        g->free(ep);
        return rudnn_set_error(RUDNN_STATUS_DEVICE_ERROR, CREATE_NCCL ": TP group: %s: %s", g->engine, err);
    }
    /* the rest is agreed on (EP, TP, EP again reaches every rank of an EP x TP grid) */
    rudnn_status_t local = buffer_bytes < RUDNN_COMM_MIN_BUFFER_BYTES
                               ? rudnn_set_error(RUDNN_STATUS_BAD_PARAM, CREATE_NCCL ": buffer_bytes %zu is below "
                                                 "the minimum of %zu (2 MiB)", buffer_bytes,
                                                 RUDNN_COMM_MIN_BUFFER_BYTES)
                               : RUDNN_STATUS_SUCCESS;
    rudnn_comm_t c = local ? NULL : rudnn_host_calloc(1, sizeof *c);
    if (!local && !c)
        local = rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, CREATE_NCCL ": out of host memory");
    char local_msg[1024];
    rudnn_copy_str(local_msg, sizeof local_msg, rudnn_last_error());
    int status = (int)local, who = local ? ep_rank + 1 : 0;
    if (g->allreduce_max_int(ep, &status, err, sizeof err) || g->allreduce_max_int(ep, &who, err, sizeof err) ||
        (tp && g->allreduce_max_int(tp, &status, err, sizeof err)) ||
        (tp && g->allreduce_max_int(ep, &status, err, sizeof err)))
        st = rudnn_set_error(RUDNN_STATUS_DEVICE_ERROR, CREATE_NCCL ": agreeing with the other ranks: %s", err);
    else if (local)
        st = rudnn_set_error(local, "%s", local_msg);
    else if (status)
        st = rudnn_set_error((rudnn_status_t)status, CREATE_NCCL ": %s rejected its arguments (%s); nothing was "
                             "created", who ? "an EP rank" : "a rank of another EP group", rudnn_status_string(
                                 (rudnn_status_t)status));
    if (st != RUDNN_STATUS_SUCCESS) {
        free(c);
        g->free(tp);
        g->free(ep);
        return st;
    }
    c->kind = RUDNN_COMM_NCCL;
    c->nccl = g;
    c->ep = ep;
    c->tp = tp;
    c->ep_rank = ep_rank;
    c->ep_size = ep_size;
    c->tp_rank = tp ? tp_rank : 0;
    c->tp_size = tp ? RUDNN_COMM_TP_SIZE : 0;
    c->thread_level = RUDNN_GLUE_THREAD_SERIALIZED; /* one thread at a time in a communicator's calls */
    c->buffer_bytes = buffer_bytes;
    c->context = context;
    rudnn_context_retain(context);
    rudnn_live_object(+1);
    *comm = c;
    return RUDNN_STATUS_SUCCESS;
}

void rudnn_comm_destroy(rudnn_comm_t comm)
{
    if (!comm)
        return;
    enter(comm->thread_level);
    if (comm->kind == RUDNN_COMM_NCCL) {
        comm->nccl->free(comm->tp);
        comm->nccl->free(comm->ep);
    } else {
        if (comm->tp)
            comm->glue->free(comm->tp);
        comm->glue->free(comm->ep);
    }
    leave(comm->thread_level);
    rudnn_context_t ctx = comm->context;
    free(comm);
    rudnn_live_object(-1);
    rudnn_context_release(ctx);
}

rudnn_status_t rudnn_comm_get_info(rudnn_comm_t comm, rudnn_comm_info_t *info)
{
    rudnn_clear_error();
    if (!comm || !info)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "comm_get_info: %s is NULL",
                               comm ? "info" : "comm");
    memset(info, 0, sizeof *info);
    info->kind = comm->kind;
    info->ep_rank = comm->ep_rank;
    info->ep_size = comm->ep_size;
    info->tp_rank = comm->tp_rank;
    info->tp_size = comm->tp_size;
    info->buffer_bytes = comm->buffer_bytes;
    return RUDNN_STATUS_SUCCESS;
}

/* The duplicate of group and its size, or an error naming op. */
static rudnn_status_t group_of(rudnn_comm_t comm, int group, const char *op, void **dup, int *size)
{
    if (!comm)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: comm is NULL", op);
    if (group == RUDNN_COMM_GROUP_EP) {
        *dup = comm->ep;
        *size = comm->ep_size;
    } else if (group == RUDNN_COMM_GROUP_TP && comm->tp) {
        *dup = comm->tp;
        *size = comm->tp_size;
    } else {
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: group %d %s", op, group,
                               group == RUDNN_COMM_GROUP_TP ? "(TP): the communicator has no TP group"
                                                            : "is neither EP (0) nor TP (1)");
    }
    return RUDNN_STATUS_SUCCESS;
}

/* One side of an exchange: counts, peers in range, a buffer for every non-empty message. */
static rudnn_status_t check_side(const char *op, const char *side, int n, const int *peers,
                                 const void *const *bufs, const size_t *bytes, int size)
{
    if (n < 0)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: n%s is %d, not a count", op, side, n);
    if (n > 0 && (!peers || !bufs || !bytes))
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: n%s is %d but its %s array is NULL", op,
                               side, n, !peers ? "peers" : !bufs ? "buffers" : "bytes");
    for (int i = 0; i < n; i++) {
        if (peers[i] < 0 || peers[i] >= size)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s_peers[%d] is %d, outside 0..%d",
                                   op, side, i, peers[i], size - 1);
        if (bytes[i] && !bufs[i])
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s_bufs[%d] is NULL for %zu bytes",
                                   op, side, i, bytes[i]);
    }
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_comm_exchange(rudnn_comm_t comm, int group, const char *op, int nsend,
                                   const int *send_peers, const void *const *send_bufs,
                                   const size_t *send_bytes, int nrecv, const int *recv_peers,
                                   void *const *recv_bufs, const size_t *recv_bytes, int tag)
{
    void *dup = NULL;
    int size = 0;
    RUDNN_TRY(group_of(comm, group, op, &dup, &size));
    RUDNN_TRY(check_side(op, "send", nsend, send_peers, send_bufs, send_bytes, size));
    RUDNN_TRY(check_side(op, "recv", nrecv, recv_peers, (const void *const *)recv_bufs, recv_bytes,
                         size));
    if (tag < 0 || tag > TAG_MAX)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: tag %d outside 0..%d", op, tag, TAG_MAX);
    char err[RUDNN_COMM_GLUE_ERR_MAX];
    enter(comm->thread_level);
    int bad = comm->kind == RUDNN_COMM_NCCL
                  ? comm->nccl->exchange(dup, nsend, send_peers, send_bufs, send_bytes, nrecv, recv_peers, recv_bufs,
                                         recv_bytes, err, sizeof err)
                  : comm->glue->exchange(dup, nsend, send_peers, send_bufs, send_bytes, nrecv, recv_peers,
                                         recv_bufs, recv_bytes, tag, err, sizeof err);
    leave(comm->thread_level);
    return bad ? rudnn_set_error(RUDNN_STATUS_DEVICE_ERROR, "%s: %s", op, err) : RUDNN_STATUS_SUCCESS;
}

int rudnn_comm_is_device(rudnn_comm_t comm) { return comm && comm->kind == RUDNN_COMM_NCCL; }

rudnn_status_t rudnn_comm_exchange_device(rudnn_comm_t comm, int group, const char *op, int nsend,
                                          const int *send_peers, const rudnn_mem_ref_t *send,
                                          const size_t *send_bytes, int nrecv, const int *recv_peers,
                                          const rudnn_mem_ref_t *recv, const size_t *recv_bytes)
{
    void *dup = NULL;
    int size = 0;
    RUDNN_TRY(group_of(comm, group, op, &dup, &size));
    if (comm->kind != RUDNN_COMM_NCCL)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: device exchanges need an NCCL communicator", op);
    const void **sp = rudnn_host_calloc((size_t)nsend + 1, sizeof *sp);
    void **rp = rudnn_host_calloc((size_t)nrecv + 1, sizeof *rp);
    rudnn_status_t st = !sp || !rp ? rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "%s: out of host memory", op)
                                   : RUDNN_STATUS_SUCCESS;
    /* the CUDA and HIP backends' memory handles are device pointers (hal/table.h) */
    for (int i = 0; st == RUDNN_STATUS_SUCCESS && i < nsend; i++)
        sp[i] = send[i].mem ? (const char *)send[i].mem + send[i].offset : NULL;
    for (int i = 0; st == RUDNN_STATUS_SUCCESS && i < nrecv; i++)
        rp[i] = recv[i].mem ? (char *)recv[i].mem + recv[i].offset : NULL;
    if (st == RUDNN_STATUS_SUCCESS)
        st = check_side(op, "send", nsend, send_peers, (const void *const *)sp, send_bytes, size);
    if (st == RUDNN_STATUS_SUCCESS)
        st = check_side(op, "recv", nrecv, recv_peers, (const void *const *)rp, recv_bytes, size);
    if (st == RUDNN_STATUS_SUCCESS) {
        char err[RUDNN_COMM_GLUE_ERR_MAX];
        enter(comm->thread_level);
        const int bad = comm->nccl->exchange_device(dup, nsend, send_peers, (const void *const *)sp, send_bytes,
                                                    nrecv, recv_peers, rp, recv_bytes, err, sizeof err);
        leave(comm->thread_level);
        if (bad)
            st = rudnn_set_error(RUDNN_STATUS_DEVICE_ERROR, "%s: %s", op, err);
    }
    free(sp);
    free(rp);
    return st;
}

rudnn_status_t rudnn_comm_allreduce_max(rudnn_comm_t comm, int group, const char *op, int *value)
{
    void *dup = NULL;
    int size = 0;
    RUDNN_TRY(group_of(comm, group, op, &dup, &size));
    if (!value)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: value is NULL", op);
    char err[RUDNN_COMM_GLUE_ERR_MAX];
    enter(comm->thread_level);
    int bad = comm->kind == RUDNN_COMM_NCCL ? comm->nccl->allreduce_max_int(dup, value, err, sizeof err)
                                            : comm->glue->allreduce_max_int(dup, value, err, sizeof err);
    leave(comm->thread_level);
    return bad ? rudnn_set_error(RUDNN_STATUS_DEVICE_ERROR, "%s: %s", op, err) : RUDNN_STATUS_SUCCESS;
}
