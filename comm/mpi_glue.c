/* librudnn-mpi.so: core/comm_glue.h over MPI. The only rudnn code that links MPI, so that
 * librudnn.so runs without it. Exports rudnn_comm_glue_entry_v1 alone (-fvisibility=hidden). */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "core/comm_glue.h"

#define CHUNK_BYTES ((size_t)1 << 30) /* per message: MPI counts are int */

static int fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t cap, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(err, cap, fmt, args);
    va_end(args);
    return 1;
}

/* "<call> failed: <MPI's text>" */
static int fail_mpi(char *err, size_t cap, const char *call, int code)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "error %d", code);
    return fail(err, cap, "%s failed: %s", call, text);
}

/* The caller's handle, or an error for MPI_COMM_NULL (a rank outside a split). */
static int get_comm(const void *p, MPI_Comm *out, char *err, size_t cap)
{
    MPI_Comm c = *(const MPI_Comm *)p;
    if (c == MPI_COMM_NULL)
        return fail(err, cap, "the communicator is MPI_COMM_NULL");
    *out = c;
    return 0;
}

static int glue_query(int *usable, int *thread_level, char *err, size_t cap)
{
    int init = 0, fin = 0, level = MPI_THREAD_SINGLE;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    *usable = init && !fin;
    *thread_level = RUDNN_GLUE_THREAD_SINGLE;
    if (!*usable)
        return 0;
    int rc = MPI_Query_thread(&level);
    if (rc != MPI_SUCCESS)
        return fail_mpi(err, cap, "MPI_Query_thread", rc);
    *thread_level = level == MPI_THREAD_MULTIPLE     ? RUDNN_GLUE_THREAD_MULTIPLE
                    : level == MPI_THREAD_SERIALIZED ? RUDNN_GLUE_THREAD_SERIALIZED
                    : level == MPI_THREAD_FUNNELED   ? RUDNN_GLUE_THREAD_FUNNELED
                                                     : RUDNN_GLUE_THREAD_SINGLE;
    return 0;
}

static int glue_dup(const void *comm, void **dup, char *err, size_t cap)
{
    MPI_Comm c = MPI_COMM_NULL;
    if (get_comm(comm, &c, err, cap))
        return 1;
    MPI_Comm *d = malloc(sizeof *d);
    if (!d)
        return fail(err, cap, "out of host memory");
    int rc = MPI_Comm_dup(c, d);
    if (rc != MPI_SUCCESS) {
        free(d);
        return fail_mpi(err, cap, "MPI_Comm_dup", rc);
    }
    /* rudnn reports failures as statuses; the caller's handler (often fatal) stays theirs */
    MPI_Comm_set_errhandler(*d, MPI_ERRORS_RETURN);
    *dup = d;
    return 0;
}

static void glue_free(void *dup)
{
    MPI_Comm *d = dup;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin)
        MPI_Comm_free(d);
    free(d);
}

static int glue_compare(const void *a, const void *b, int *relation, char *err, size_t cap)
{
    MPI_Comm ca = MPI_COMM_NULL, cb = MPI_COMM_NULL;
    if (get_comm(a, &ca, err, cap) || get_comm(b, &cb, err, cap))
        return 1;
    int result = MPI_UNEQUAL;
    int rc = MPI_Comm_compare(ca, cb, &result);
    if (rc != MPI_SUCCESS)
        return fail_mpi(err, cap, "MPI_Comm_compare", rc);
    /* SIMILAR: the same ranks in another order, still one group */
    *relation = result == MPI_UNEQUAL ? RUDNN_GLUE_DIFFERENT_RANKS : RUDNN_GLUE_SAME_RANKS;
    return 0;
}

static int glue_rank(const void *comm, int *rank, char *err, size_t cap)
{
    MPI_Comm c = MPI_COMM_NULL;
    if (get_comm(comm, &c, err, cap))
        return 1;
    int rc = MPI_Comm_rank(c, rank);
    return rc == MPI_SUCCESS ? 0 : fail_mpi(err, cap, "MPI_Comm_rank", rc);
}

static int glue_size(const void *comm, int *size, char *err, size_t cap)
{
    MPI_Comm c = MPI_COMM_NULL;
    if (get_comm(comm, &c, err, cap))
        return 1;
    int rc = MPI_Comm_size(c, size);
    return rc == MPI_SUCCESS ? 0 : fail_mpi(err, cap, "MPI_Comm_size", rc);
}

/* MPI_THREAD_FUNNELED (or SINGLE) allows MPI calls from the main thread only. */
static int check_thread(char *err, size_t cap)
{
    int level = MPI_THREAD_SINGLE, is_main = 1;
    MPI_Query_thread(&level);
    if (level > MPI_THREAD_FUNNELED)
        return 0;
    MPI_Is_thread_main(&is_main);
    if (!is_main)
        return fail(err, cap,
                    "MPI was initialised with a thread level below MPI_THREAD_SERIALIZED: "
                    "communicate from the thread that called MPI_Init");
    return 0;
}

static size_t chunks(size_t bytes) { return (bytes + CHUNK_BYTES - 1) / CHUNK_BYTES; }

/* Posts one message per chunk of buf; advances *n. */
static int post(int is_send, MPI_Comm c, int peer, const void *buf, size_t bytes, int tag,
                MPI_Request *reqs, size_t *n, char *err, size_t cap)
{
    for (size_t off = 0; off < bytes; off += CHUNK_BYTES) {
        size_t len = bytes - off < CHUNK_BYTES ? bytes - off : CHUNK_BYTES;
        char *p = (char *)buf + off;
        int rc = is_send ? MPI_Isend(p, (int)len, MPI_BYTE, peer, tag, c, &reqs[*n])
                         : MPI_Irecv(p, (int)len, MPI_BYTE, peer, tag, c, &reqs[*n]);
        if (rc != MPI_SUCCESS)
            return fail_mpi(err, cap, is_send ? "MPI_Isend" : "MPI_Irecv", rc);
        (*n)++;
    }
    return 0;
}

static int glue_exchange(void *dup, int nsend, const int *send_peers, const void *const *send_bufs,
                         const size_t *send_bytes, int nrecv, const int *recv_peers,
                         void *const *recv_bufs, const size_t *recv_bytes, int tag, char *err,
                         size_t cap)
{
    MPI_Comm c = *(MPI_Comm *)dup;
    if (check_thread(err, cap))
        return 1;
    int *tag_ub = NULL, has = 0;
    MPI_Comm_get_attr(c, MPI_TAG_UB, &tag_ub, &has);
    if (tag < 0 || (has && tag_ub && tag > *tag_ub))
        return fail(err, cap, "tag %d outside 0..%d (MPI_TAG_UB)", tag, has && tag_ub ? *tag_ub : 32767);
    size_t total = 0;
    for (int i = 0; i < nsend; i++)
        total += chunks(send_bytes[i]);
    for (int i = 0; i < nrecv; i++)
        total += chunks(recv_bytes[i]);
    if (total == 0)
        return 0;
    if (total > INT_MAX)
        return fail(err, cap, "%zu messages: more than MPI_Waitall takes", total);
    MPI_Request *reqs = malloc(total * sizeof *reqs);
    if (!reqs)
        return fail(err, cap, "out of host memory for %zu requests", total);
    size_t n = 0;
    int bad = 0;
    /* receives first, so early sends find them posted */
    for (int i = 0; i < nrecv && !bad; i++)
        bad = post(0, c, recv_peers[i], recv_bufs[i], recv_bytes[i], tag, reqs, &n, err, cap);
    for (int i = 0; i < nsend && !bad; i++)
        bad = post(1, c, send_peers[i], send_bufs[i], send_bytes[i], tag, reqs, &n, err, cap);
    if (bad) {
        /* a failed post leaves its peers' messages unmatched: the caller cannot continue on this
         * communicator; at least do not leave receives writing into freed buffers */
        for (size_t i = 0; i < n; i++) {
            MPI_Cancel(&reqs[i]);
            MPI_Request_free(&reqs[i]);
        }
        free(reqs);
        return 1;
    }
    int rc = MPI_Waitall((int)n, reqs, MPI_STATUSES_IGNORE);
    free(reqs);
    return rc == MPI_SUCCESS ? 0 : fail_mpi(err, cap, "MPI_Waitall", rc);
}

static int glue_allreduce_max_int(void *dup, int *value, char *err, size_t cap)
{
    if (check_thread(err, cap))
        return 1;
    int rc = MPI_Allreduce(MPI_IN_PLACE, value, 1, MPI_INT, MPI_MAX, *(MPI_Comm *)dup);
    return rc == MPI_SUCCESS ? 0 : fail_mpi(err, cap, "MPI_Allreduce", rc);
}

#define STR_(x) #x
#define STR(x) STR_(x)
#if defined(OMPI_MAJOR_VERSION)
#define ENGINE "Open MPI " STR(OMPI_MAJOR_VERSION) "." STR(OMPI_MINOR_VERSION) "." STR(OMPI_RELEASE_VERSION)
#elif defined(MPICH_VERSION)
#define ENGINE "MPICH " MPICH_VERSION
#else
#define ENGINE "MPI " STR(MPI_VERSION) "." STR(MPI_SUBVERSION)
#endif

static const rudnn_comm_glue_t glue = {
    .abi_version = RUDNN_COMM_GLUE_ABI_VERSION,
    .struct_size = sizeof(rudnn_comm_glue_t),
    .engine = ENGINE,
    .query = glue_query,
    .dup = glue_dup,
    .free = glue_free,
    .compare = glue_compare,
    .rank = glue_rank,
    .size = glue_size,
    .exchange = glue_exchange,
    .allreduce_max_int = glue_allreduce_max_int,
};

__attribute__((visibility("default"))) const rudnn_comm_glue_t *rudnn_comm_glue_entry_v1(void);
__attribute__((visibility("default"))) const rudnn_comm_glue_t *rudnn_comm_glue_entry_v1(void)
{
    return &glue;
}
