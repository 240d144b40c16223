/* Loads librudnn-mpi.so (core/comm_glue.h) once per process, from the plugin folders. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"

#define GLUE_FILE "librudnn-mpi.so"

static pthread_once_t glue_once = PTHREAD_ONCE_INIT;
static const rudnn_comm_glue_t *glue;
static rudnn_status_t glue_status;
static char glue_why[4096];

static void load(void)
{
    char report[3072];
    void *handle = rudnn_loader_open_library(GLUE_FILE, report, sizeof report);
    if (!handle) {
        glue_status = RUDNN_STATUS_NOT_SUPPORTED;
        snprintf(glue_why, sizeof glue_why,
                 "MPI communicators need " GLUE_FILE " (built with -Dmpi=enabled), not loadable: "
                 "tried %s",
                 report);
        return;
    }
    rudnn_comm_glue_entry_fn entry;
    void *sym = dlsym(handle, RUDNN_COMM_GLUE_ENTRY_SYMBOL);
    memcpy(&entry, &sym, sizeof entry);
    const rudnn_comm_glue_t *g = entry ? entry() : NULL;
    if (!g || g->abi_version != RUDNN_COMM_GLUE_ABI_VERSION ||
        g->struct_size < sizeof(rudnn_comm_glue_t)) {
        glue_status = RUDNN_STATUS_ABI_MISMATCH;
        snprintf(glue_why, sizeof glue_why,
                 GLUE_FILE " found but %s: this librudnn needs glue ABI %u",
                 !entry ? "it lacks " RUDNN_COMM_GLUE_ENTRY_SYMBOL
                        : !g ? "its entry returned NULL" : "of another glue ABI",
                 RUDNN_COMM_GLUE_ABI_VERSION);
        dlclose(handle);
        return;
    }
    glue = g; /* kept loaded for the process: communicators hold its functions */
}

const rudnn_comm_glue_t *rudnn_comm_glue(const char *op, rudnn_status_t *status)
{
    pthread_once(&glue_once, load);
    if (!glue)
        *status = rudnn_set_error(glue_status, "%s: %s", op, glue_why);
    return glue;
}
