/* Loads the communication glue libraries (core/comm_glue.h), each once per process, from the
 * plugin folders: librudnn-mpi.so, librudnn-nccl.so and librudnn-rccl.so. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"

typedef struct glue_slot {
    const char *engine, *file, *symbol, *built_with;
    uint32_t abi, min_size;
    pthread_once_t once;
    const void *table; /* NULL: not loadable, status and why say so */
    rudnn_status_t status;
    char why[4096];
} glue_slot_t;

/* Every table starts with abi_version and struct_size (uint32_t each). */
static void load_slot(glue_slot_t *s)
{
    char report[3072];
    void *handle = rudnn_loader_open_library(s->file, report, sizeof report);
    if (!handle) {
        s->status = RUDNN_STATUS_NOT_SUPPORTED;
        snprintf(s->why, sizeof s->why, "%s communicators need %s (built with %s), not loadable: tried %s",
                 s->engine, s->file, s->built_with, report);
        return;
    }
    const void *(*entry)(void) = NULL;
    void *sym = dlsym(handle, s->symbol);
    memcpy(&entry, &sym, sizeof entry);
    const uint32_t *t = entry ? entry() : NULL;
    if (!t || t[0] != s->abi || t[1] < s->min_size) {
        s->status = RUDNN_STATUS_ABI_MISMATCH;
        snprintf(s->why, sizeof s->why, "%s found but %s%s: this librudnn needs glue ABI %u", s->file,
                 !entry ? "it lacks " : !t ? "its entry returned NULL" : "of another glue ABI",
                 !entry ? s->symbol : "", s->abi);
        dlclose(handle);
        return;
    }
    s->table = t; /* kept loaded for the process: communicators hold its functions */
}

static glue_slot_t mpi_slot = {"MPI", "librudnn-mpi.so", RUDNN_COMM_GLUE_ENTRY_SYMBOL, "-Dmpi=enabled",
                               RUDNN_COMM_GLUE_ABI_VERSION, sizeof(rudnn_comm_glue_t), PTHREAD_ONCE_INIT,
                               NULL, RUDNN_STATUS_SUCCESS, ""};
static glue_slot_t nccl_slot = {"NCCL", "librudnn-nccl.so", RUDNN_NCCL_GLUE_ENTRY_SYMBOL, "-Dnccl=enabled",
                                RUDNN_NCCL_GLUE_ABI_VERSION, sizeof(rudnn_nccl_glue_t), PTHREAD_ONCE_INIT,
                                NULL, RUDNN_STATUS_SUCCESS, ""};
/* RCCL fills the NCCL table (one source, comm/nccl_glue.c), under an entry name of its own */
static glue_slot_t rccl_slot = {"RCCL", "librudnn-rccl.so", RUDNN_RCCL_GLUE_ENTRY_SYMBOL, "-Drccl=enabled",
                                RUDNN_NCCL_GLUE_ABI_VERSION, sizeof(rudnn_nccl_glue_t), PTHREAD_ONCE_INIT,
                                NULL, RUDNN_STATUS_SUCCESS, ""};

static void load_mpi(void) { load_slot(&mpi_slot); }
static void load_nccl(void) { load_slot(&nccl_slot); }
static void load_rccl(void) { load_slot(&rccl_slot); }

const rudnn_comm_glue_t *rudnn_comm_glue(const char *op, rudnn_status_t *status)
{
    pthread_once(&mpi_slot.once, load_mpi);
    if (!mpi_slot.table)
        *status = rudnn_set_error(mpi_slot.status, "%s: %s", op, mpi_slot.why);
    return mpi_slot.table;
}

const rudnn_nccl_glue_t *rudnn_nccl_glue(const char *op, rudnn_status_t *status)
{
    pthread_once(&nccl_slot.once, load_nccl);
    if (!nccl_slot.table)
        *status = rudnn_set_error(nccl_slot.status, "%s: %s", op, nccl_slot.why);
    return nccl_slot.table;
}

const rudnn_nccl_glue_t *rudnn_rccl_glue(const char *op, rudnn_status_t *status)
{
    pthread_once(&rccl_slot.once, load_rccl);
    if (!rccl_slot.table)
        *status = rudnn_set_error(rccl_slot.status, "%s: %s", op, rccl_slot.why);
    return rccl_slot.table;
}
