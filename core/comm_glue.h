/* The interface between librudnn.so and a communication glue library (librudnn-mpi.so,
 * librudnn-nccl.so, librudnn-rccl.so), which alone links the distributed engine. Like the
 * backend ABI (backends/backend.h), but tiny: the glue exports one symbol returning a const
 * table that starts with abi_version and struct_size.
 *
 * A communicator is passed as `const void *` pointing at the engine's own handle (an MPI_Comm):
 * the caller's communicators and the glue's duplicates alike, so one set of queries serves both.
 * Every function returns 0 on success, else nonzero after writing why into err (cap bytes,
 * always terminated). */
#ifndef RUDNN_COMM_GLUE_H
#define RUDNN_COMM_GLUE_H

#include <stddef.h>
#include <stdint.h>

#define RUDNN_COMM_GLUE_ABI_VERSION 1u
#define RUDNN_COMM_GLUE_ENTRY_SYMBOL "rudnn_comm_glue_entry_v1"
#define RUDNN_COMM_GLUE_ERR_MAX 512

/* Thread levels, in the order of MPI's (glue maps its engine's constants onto these). */
enum { RUDNN_GLUE_THREAD_SINGLE, RUDNN_GLUE_THREAD_FUNNELED, RUDNN_GLUE_THREAD_SERIALIZED,
       RUDNN_GLUE_THREAD_MULTIPLE };

/* How two communicators relate (compare). */
enum { RUDNN_GLUE_SAME_RANKS, RUDNN_GLUE_DIFFERENT_RANKS };

typedef struct rudnn_comm_glue {
    uint32_t abi_version; /* RUDNN_COMM_GLUE_ABI_VERSION */
    uint32_t struct_size; /* sizeof(rudnn_comm_glue_t) the glue was built with */
    const char *engine;   /* "Open MPI 4.1.4", for messages */

    /* Whether the engine is usable now (initialised, not finalised) and its thread level. */
    int (*query)(int *usable, int *thread_level, char *err, size_t cap);
    /* Collective over comm: a private duplicate whose errors return instead of aborting. */
    int (*dup)(const void *comm, void **dup, char *err, size_t cap);
    /* Collective; frees the duplicate (only its memory once the engine is finalised). */
    void (*free)(void *dup);
    /* Local: RUDNN_GLUE_SAME_RANKS when a and b hold the same ranks (in any order). */
    int (*compare)(const void *a, const void *b, int *relation, char *err, size_t cap);
    int (*rank)(const void *comm, int *rank, char *err, size_t cap);
    int (*size)(const void *comm, int *size, char *err, size_t cap);
    /* Point to point on a duplicate: posts every receive and send (a message per 1 GiB chunk,
     * so counts may exceed INT_MAX) and waits for all. recv_bytes[i] must equal what peer
     * recv_peers[i] sends with the same tag; a 0-byte entry posts nothing. */
    int (*exchange)(void *dup, int nsend, const int *send_peers, const void *const *send_bufs,
                    const size_t *send_bytes, int nrecv, const int *recv_peers,
                    void *const *recv_bufs, const size_t *recv_bytes, int tag, char *err,
                    size_t cap);
    /* Collective on a duplicate: *value becomes the maximum over its ranks. */
    int (*allreduce_max_int)(void *dup, int *value, char *err, size_t cap);
} rudnn_comm_glue_t;

typedef const rudnn_comm_glue_t *(*rudnn_comm_glue_entry_fn)(void);

/* The NCCL glue: the same idea for NCCL. librudnn-nccl.so (NCCL, CUDA runtime) exports
 * rudnn_nccl_glue_entry_v1; librudnn-rccl.so, built from the same source over RCCL and the HIP
 * runtime, exports rudnn_rccl_glue_entry_v1 returning the same table (its own name, so that one
 * glue file is never taken for the other). A communicator is the glue's own handle (an
 * ncclComm_t with a CUDA or HIP stream, scratch and staging memory of its own, on the device it
 * was made on); every call makes that device current, issues on its stream and waits. */
#define RUDNN_NCCL_GLUE_ABI_VERSION 1u
#define RUDNN_NCCL_GLUE_ENTRY_SYMBOL "rudnn_nccl_glue_entry_v1"
#define RUDNN_RCCL_GLUE_ENTRY_SYMBOL "rudnn_rccl_glue_entry_v1"
#define RUDNN_NCCL_GLUE_ID_BYTES 128 /* NCCL_UNIQUE_ID_BYTES */

typedef struct rudnn_nccl_glue {
    uint32_t abi_version; /* RUDNN_NCCL_GLUE_ABI_VERSION */
    uint32_t struct_size;
    const char *engine; /* "NCCL 2.28.9", "RCCL 2.13.4", for messages */

    int (*unique_id)(void *id, char *err, size_t cap);
    /* Collective over the size ranks that pass the same id: ncclCommInitRank on CUDA (RCCL:
     * HIP) device `device`. */
    int (*init)(int device, const void *id, int rank, int size, void **comm, char *err, size_t cap);
    void (*free)(void *comm);
    /* Host buffers, staged through the glue's device memory: grouped sends and receives
     * (ncclGroupStart/End), then waits. recv_bytes[i] must equal what peer recv_peers[i] sends
     * to this rank in its matching call; 0-byte entries post nothing. */
    int (*exchange)(void *comm, int nsend, const int *send_peers, const void *const *send_bufs,
                    const size_t *send_bytes, int nrecv, const int *recv_peers, void *const *recv_bufs,
                    const size_t *recv_bytes, char *err, size_t cap);
    /* Collective: *value (host) becomes the maximum over the ranks. */
    int (*allreduce_max_int)(void *comm, int *value, char *err, size_t cap);
    /* Device buffers (addresses on the communicator's device), no staging: grouped sends and
     * receives, then waits. Several messages to one peer are matched in the order posted. The
     * caller's writes into the send buffers must be finished. */
    int (*exchange_device)(void *comm, int nsend, const int *send_peers, const void *const *send_bufs,
                           const size_t *send_bytes, int nrecv, const int *recv_peers, void *const *recv_bufs,
                           const size_t *recv_bytes, char *err, size_t cap);
} rudnn_nccl_glue_t;

typedef const rudnn_nccl_glue_t *(*rudnn_nccl_glue_entry_fn)(void);

#endif
