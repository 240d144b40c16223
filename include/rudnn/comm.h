/* Communicators for expert-parallel ops: a handle over an existing distributed engine (MPI or
 * NCCL), never a transport of rudnn's own.
 *
 * The MPI path is host-staged: ops that exchange tokens copy them to a host staging buffer,
 * exchange them with MPI and copy them back. librudnn.so does not link MPI: it opens
 * librudnn-mpi.so (installed next to the backend plugins, built with the MPI of the build
 * machine) on the first rudnn_comm_create_mpi, so an application without MPI links and runs and
 * gets NOT_SUPPORTED there. The application must use the MPI librudnn-mpi.so was built with. */
#ifndef RUDNN_COMM_H
#define RUDNN_COMM_H

#include <stddef.h>

#include "rudnn/core.h"
#include "rudnn/export.h"
#include "rudnn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rudnn_comm *rudnn_comm_t;

typedef enum rudnn_comm_kind {
    RUDNN_COMM_MPI = 0,
    RUDNN_COMM_NCCL = 1,
} rudnn_comm_kind_t;

#define RUDNN_COMM_EP_MIN 2
#define RUDNN_COMM_EP_MAX 768
#define RUDNN_COMM_TP_SIZE 2
#define RUDNN_COMM_MIN_BUFFER_BYTES ((size_t)2 << 20)

/* Makes a communicator from the caller's MPI communicators. Collective over the EP group: every
 * rank of ep_comm calls it (and every rank of each tp_comm, which calls it as a member of its
 * own EP group).
 *
 * ep_comm points at an MPI_Comm of 2..768 ranks (the expert-parallel group); tp_comm at an
 * MPI_Comm of exactly 2 ranks (the tensor-parallel pair) or is NULL. The two must not hold the
 * same ranks. MPI must be initialised (MPI_Init or MPI_Init_thread) and not finalised; the thread
 * level it was initialised with is kept: below MPI_THREAD_MULTIPLE rudnn serialises its MPI
 * calls, and at MPI_THREAD_FUNNELED or below makes them only from the main thread.
 * buffer_bytes is the size of the host staging buffer later ops may use (at least
 * RUDNN_COMM_MIN_BUFFER_BYTES, 2 MiB), like Ascend's HCCL_BUFFSIZE.
 *
 * The communicators are duplicated (MPI_Comm_dup), so rudnn's messages never mix with the
 * caller's; the caller may free its own right after. The result keeps context alive until
 * rudnn_comm_destroy (any destroy order is safe).
 *
 * Errors: NOT_SUPPORTED when librudnn-mpi.so cannot be loaded (the message names the folders
 * tried); BAD_PARAM for a NULL ep_comm, MPI not initialised or an EP size out of range, returned
 * at once on that rank. Every other rejected argument (NULL context or comm, buffer_bytes, a bad
 * TP group) is agreed among the ranks first: then every rank returns an error, the others naming
 * the rank that rejected its arguments, so no rank is left holding a communicator its peers lack.
 * DEVICE_ERROR when an MPI call fails (with MPI's text). *comm is written only on success. */
RUDNN_API rudnn_status_t rudnn_comm_create_mpi(rudnn_context_t context, const void *ep_comm,
                                               const void *tp_comm, size_t buffer_bytes,
                                               rudnn_comm_t *comm);

/* Frees the duplicated communicators and releases the context. Called on every rank (MPI frees
 * communicators collectively), before MPI_Finalize; after it only the memory is freed. NULL is
 * ignored. */
RUDNN_API void rudnn_comm_destroy(rudnn_comm_t comm);

/* NCCL (CUDA backend) or RCCL, AMD's NCCL (HIP backend): the ops send their rows from device
 * memory into device memory (with a TP group, through host copies staged in the communicator's
 * device memory); counts and metadata are small host messages. librudnn.so links neither: it
 * opens librudnn-nccl.so (built with -Dnccl against NCCL and the CUDA runtime) or
 * librudnn-rccl.so (-Drccl, RCCL and the HIP runtime), next to the backend plugins, and without
 * the one a call needs it answers NOT_SUPPORTED. */
#define RUDNN_COMM_NCCL_ID_BYTES 128 /* an ncclUniqueId */

/* A new NCCL unique id (ncclGetUniqueId), for one rank to make and share with the others of a
 * group (over MPI, a file, a socket...). It has no context, so the engine is the default
 * backend's: RCCL when RUDNN_BACKEND is hip, or is unset or auto and the first GPU backend that
 * loads (cuda before hip) is hip; NCCL otherwise. */
RUDNN_API rudnn_status_t rudnn_comm_nccl_unique_id(void *id);

/* Makes a communicator over NCCL on context's device (CUDA backend; RCCL on the HIP backend).
 * Collective: every rank of the EP group calls it with the same ep_id and its own ep_rank of
 * ep_size (2..768); with a TP group, every rank also passes its pair's tp_id and its tp_rank (0 or
 * 1; NULL tp_id: no TP group).
 *
 * Returned at once, on that rank alone (the others then wait in NCCL's initialisation; check
 * these on every rank before calling): NOT_SUPPORTED when the context is on neither the CUDA nor
 * the HIP backend, or its glue (librudnn-nccl.so, librudnn-rccl.so) cannot be loaded; BAD_PARAM
 * for a NULL ep_id, context or comm, ep_size
 * out of range, ep_rank or tp_rank out of range. buffer_bytes below RUDNN_COMM_MIN_BUFFER_BYTES
 * is agreed among the ranks after the EP communicator is made, like rudnn_comm_create_mpi's
 * checks: every rank then returns an error. DEVICE_ERROR when NCCL/RCCL or the GPU runtime
 * fails (with their text). *comm is written only on success. Destroy with rudnn_comm_destroy
 * (every rank). */
RUDNN_API rudnn_status_t rudnn_comm_create_nccl(rudnn_context_t context, const void *ep_id, int ep_rank,
                                                int ep_size, const void *tp_id, int tp_rank, size_t buffer_bytes,
                                                rudnn_comm_t *comm);

typedef struct rudnn_comm_info {
    rudnn_comm_kind_t kind;
    int ep_rank, ep_size;
    int tp_rank, tp_size; /* 0 and 0 without a TP group */
    size_t buffer_bytes;
} rudnn_comm_info_t;

RUDNN_API rudnn_status_t rudnn_comm_get_info(rudnn_comm_t comm, rudnn_comm_info_t *info);

#ifdef __cplusplus
}
#endif
#endif
