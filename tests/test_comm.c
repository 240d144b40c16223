/* rudnn_comm_create_mpi in a program that does not use MPI (the glue is loaded once per process,
 * so each scenario runs in its own):
 *
 *   no-glue INSTALL_DIR   RUDNN_BACKEND_PATH set to an empty folder before any rudnn call:
 *                         NOT_SUPPORTED naming librudnn-mpi.so and the folder (skipped when
 *                         INSTALL_DIR, also searched, holds an installed glue)
 *   uninit                the glue is found (the environment's RUDNN_BACKEND_PATH) and loads
 *                         MPI itself, which nobody initialised: BAD_PARAM saying so */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define POISON ((rudnn_comm_t)(uintptr_t)0x5a5a5a5a)

static char empty_dir[] = "/tmp/rudnn-test-comm-XXXXXX";

static void test_no_glue(void **state)
{
    (void)state;
    long fake_comm = 0; /* never read: the glue is missing */
    rudnn_comm_t comm = POISON;
    rt_assert_status(rudnn_comm_create_mpi(NULL, &fake_comm, NULL, 4 << 20, &comm),
                     RUDNN_STATUS_NOT_SUPPORTED);
    assert_ptr_equal(comm, POISON);
    rt_assert_error_mentions("comm_create_mpi", "librudnn-mpi.so", empty_dir, "not found");
    /* the answer is kept for the process */
    rt_assert_status(rudnn_comm_create_mpi(NULL, NULL, NULL, 0, NULL), RUDNN_STATUS_NOT_SUPPORTED);
    /* the NCCL glue alike */
    unsigned char id[RUDNN_COMM_NCCL_ID_BYTES];
    memset(id, 0x5a, sizeof id);
    rt_assert_status(rudnn_comm_nccl_unique_id(id), RUDNN_STATUS_NOT_SUPPORTED);
    rt_assert_error_mentions("comm_nccl_unique_id", "librudnn-nccl.so", empty_dir, "not found");
    for (size_t i = 0; i < sizeof id; i++)
        assert_int_equal(id[i], 0x5a);
    rt_assert_status(rudnn_comm_create_nccl(NULL, id, 0, 2, NULL, 0, 4 << 20, &comm), RUDNN_STATUS_NOT_SUPPORTED);
    assert_ptr_equal(comm, POISON);
    rt_assert_error_mentions("comm_create_nccl", "librudnn-nccl.so", "-Dnccl");
    rudnn_comm_destroy(NULL);
    rudnn_comm_info_t info;
    rt_assert_status(rudnn_comm_get_info(NULL, &info), RUDNN_STATUS_BAD_PARAM);
}

static void test_uninit(void **state)
{
    (void)state;
    long fake_comm = 0; /* never read: MPI is checked first */
    rudnn_comm_t comm = POISON;
    rt_assert_status(rudnn_comm_create_mpi(NULL, &fake_comm, NULL, 4 << 20, &comm),
                     RUDNN_STATUS_BAD_PARAM);
    assert_ptr_equal(comm, POISON);
    rt_assert_error_mentions("comm_create_mpi", "MPI is not initialised", "MPI_Init");
    rt_assert_status(rudnn_comm_create_mpi(NULL, NULL, NULL, 4 << 20, &comm), RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("comm_create_mpi", "ep_comm is NULL");
}

int main(int argc, char **argv)
{
    const char *scenario = argc > 1 ? argv[1] : "";
    if (strcmp(scenario, "no-glue") == 0 && argc > 2) {
        char installed[4096];
        char installed_nccl[4096];
        snprintf(installed, sizeof installed, "%s/librudnn-mpi.so", argv[2]);
        snprintf(installed_nccl, sizeof installed_nccl, "%s/librudnn-nccl.so", argv[2]);
        if (access(installed, F_OK) == 0 || access(installed_nccl, F_OK) == 0) {
            printf("comm no-glue: SKIPPED (%s or librudnn-nccl.so is installed and searched too)\n", installed);
            return RT_EXIT_SKIP;
        }
        if (!mkdtemp(empty_dir))
            return 1;
        /* before any rudnn call: the environment is read once */
        setenv("RUDNN_BACKEND_PATH", empty_dir, 1);
        static const struct CMUnitTest tests[] = {cmocka_unit_test(test_no_glue)};
        int failed = cmocka_run_group_tests_name("comm no-glue", tests, NULL, NULL);
        rmdir(empty_dir);
        return rt_exit_code(failed);
    }
    if (strcmp(scenario, "uninit") == 0) {
        static const struct CMUnitTest tests[] = {cmocka_unit_test(test_uninit)};
        return rt_exit_code(cmocka_run_group_tests_name("comm uninit", tests, NULL, NULL));
    }
    fprintf(stderr, "usage: test_comm no-glue INSTALL_DIR | uninit\n");
    return 1;
}
