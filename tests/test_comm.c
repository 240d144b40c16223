/* The comm glues in a program that does not use MPI (each glue is loaded once per process, so
 * each scenario runs in its own):
 *
 *   no-glue INSTALL_DIR   RUDNN_BACKEND_PATH set to an empty folder before any rudnn call:
 *                         NOT_SUPPORTED naming librudnn-mpi.so and the folder, and for NCCL
 *                         librudnn-nccl.so (skipped when INSTALL_DIR, also searched, holds an
 *                         installed glue)
 *   no-glue-hip INSTALL_DIR  the same with RUDNN_BACKEND=hip (the environment): the NCCL calls
 *                         take the RCCL glue and name librudnn-rccl.so
 *   uninit                the glue is found (the environment's RUDNN_BACKEND_PATH) and loads
 *                         MPI itself, which nobody initialised: BAD_PARAM saying so
 *   wrong-entry NCCL_GLUE  RUDNN_BACKEND=hip, and a folder whose librudnn-rccl.so is the NCCL
 *                         glue: ABI_MISMATCH naming rudnn_rccl_glue_entry_v1 (one glue is never
 *                         taken for the other)
 *   other-backend         a context on RUDNN_BACKEND (opencl): NOT_SUPPORTED, NCCL needing cuda
 *                         and RCCL hip, before any glue is looked for
 *   rccl-load GLUE_DIR    RUDNN_BACKEND=hip, the built RCCL glue in GLUE_DIR (searched first): it is
 *                         found; without RCCL's runtime (Debian 12: trixie's librccl needs glibc
 *                         2.38) NOT_SUPPORTED with the loader's reason, with it an id or RCCL's
 *                         error. No AMD GPU here: nothing runs over RCCL. */
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

/* RUDNN_BACKEND=hip: the NCCL calls go to librudnn-rccl.so, never to librudnn-nccl.so. */
static void test_no_glue_hip(void **state)
{
    (void)state;
    unsigned char id[RUDNN_COMM_NCCL_ID_BYTES];
    memset(id, 0x5a, sizeof id);
    rt_assert_status(rudnn_comm_nccl_unique_id(id), RUDNN_STATUS_NOT_SUPPORTED);
    rt_assert_error_mentions("comm_nccl_unique_id", "RCCL", "librudnn-rccl.so", empty_dir, "not found",
                             "-Drccl");
    assert_null(strstr(rudnn_last_error(), "librudnn-nccl.so"));
    for (size_t i = 0; i < sizeof id; i++)
        assert_int_equal(id[i], 0x5a);
    rudnn_comm_t comm = POISON;
    rt_assert_status(rudnn_comm_create_nccl(NULL, id, 0, 2, NULL, 0, 4 << 20, &comm), RUDNN_STATUS_NOT_SUPPORTED);
    assert_ptr_equal(comm, POISON);
    rt_assert_error_mentions("comm_create_nccl", "librudnn-rccl.so", "-Drccl");
}

/* A context on a backend with neither engine (the environment's RUDNN_BACKEND=opencl): refused
 * before any glue is looked for. */
static void test_other_backend(void **state)
{
    (void)state;
    rudnn_context_t ctx = NULL;
    if (rudnn_context_create(&ctx, NULL) != RUDNN_STATUS_SUCCESS) {
        printf("comm other-backend: SKIPPED: %s\n", rudnn_last_error());
        exit(RT_EXIT_SKIP);
    }
    unsigned char id[RUDNN_COMM_NCCL_ID_BYTES] = {0};
    rudnn_comm_t comm = POISON;
    rt_assert_status(rudnn_comm_create_nccl(ctx, id, 0, 2, NULL, 0, 4 << 20, &comm), RUDNN_STATUS_NOT_SUPPORTED);
    assert_ptr_equal(comm, POISON);
    rt_assert_error_mentions("comm_create_nccl", "opencl backend", "NCCL needs the cuda backend",
                             "RCCL the hip backend", "rudnn_comm_create_mpi");
    rudnn_context_destroy(ctx);
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

/* RUDNN_BACKEND=hip and a librudnn-rccl.so that is the NCCL glue (a link in empty_dir). */
static char wrong_link[4200];

static void test_wrong_entry(void **state)
{
    (void)state;
    unsigned char id[RUDNN_COMM_NCCL_ID_BYTES];
    rudnn_status_t st = rudnn_comm_nccl_unique_id(id);
    char missing[4300];
    snprintf(missing, sizeof missing, "%s: not found", wrong_link);
    if (st == RUDNN_STATUS_NOT_SUPPORTED && !strstr(rudnn_last_error(), missing)) {
        printf("comm wrong-entry: SKIPPED: the NCCL glue does not load here: %s\n", rudnn_last_error());
        unlink(wrong_link);
        rmdir(empty_dir);
        exit(RT_EXIT_SKIP);
    }
    rt_assert_status(st, RUDNN_STATUS_ABI_MISMATCH);
    rt_assert_error_mentions("comm_nccl_unique_id", "librudnn-rccl.so found", "lacks", "rudnn_rccl_glue_entry_v1");
}

/* The built RCCL glue (its folder the first searched): found, then loaded or refused by the
 * dynamic loader. */
static char built_glue[4200];

static void test_rccl_load(void **state)
{
    (void)state;
    unsigned char id[RUDNN_COMM_NCCL_ID_BYTES];
    rudnn_status_t st = rudnn_comm_nccl_unique_id(id);
    printf("comm rccl-load: %s: %s\n", rudnn_status_string(st),
           st != RUDNN_STATUS_SUCCESS ? rudnn_last_error() : "an RCCL unique id");
    if (st == RUDNN_STATUS_NOT_SUPPORTED) {
        rt_assert_error_mentions("comm_nccl_unique_id", "librudnn-rccl.so", "not loadable", built_glue);
        const char *tried = strstr(rudnn_last_error(), built_glue) + strlen(built_glue);
        assert_int_not_equal(strncmp(tried, ": not found", 11), 0); /* found; dlopen said why not */
    } else if (st != RUDNN_STATUS_SUCCESS) {
        rt_assert_status(st, RUDNN_STATUS_DEVICE_ERROR); /* loaded: RCCL's own error, named */
        rt_assert_error_mentions("comm_nccl_unique_id", "RCCL");
    }
}

/* Skips when INSTALL_DIR (searched after RUDNN_BACKEND_PATH) holds one of the glues named. */
static int installed_glue(const char *scenario, const char *install_dir, const char *const *glues)
{
    for (; *glues; glues++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", install_dir, *glues);
        if (access(path, F_OK) == 0) {
            printf("comm %s: SKIPPED (%s is installed and searched too)\n", scenario, path);
            return 1;
        }
    }
    return 0;
}

/* Runs one test with RUDNN_BACKEND_PATH set to a new empty folder (before any rudnn call: the
 * environment is read once); link_to, if given, becomes its librudnn-rccl.so. */
static int run_in_empty_dir(const char *name, const struct CMUnitTest *test, const char *link_to)
{
    char target[4096];
    if (link_to && !realpath(link_to, target)) { /* the link lives elsewhere: make it absolute */
        perror(link_to);
        return 1;
    }
    if (!mkdtemp(empty_dir))
        return 1;
    setenv("RUDNN_BACKEND_PATH", empty_dir, 1);
    snprintf(wrong_link, sizeof wrong_link, "%s/librudnn-rccl.so", empty_dir);
    if (link_to && symlink(target, wrong_link) != 0) {
        perror(wrong_link);
        rmdir(empty_dir);
        return 1;
    }
    const struct CMUnitTest tests[] = {*test};
    int failed = cmocka_run_group_tests_name(name, tests, NULL, NULL);
    if (link_to)
        unlink(wrong_link);
    rmdir(empty_dir);
    return rt_exit_code(failed);
}

int main(int argc, char **argv)
{
    const char *scenario = argc > 1 ? argv[1] : "";
    if (strcmp(scenario, "no-glue") == 0 && argc > 2) {
        static const char *const glues[] = {"librudnn-mpi.so", "librudnn-nccl.so", NULL};
        static const struct CMUnitTest test = cmocka_unit_test(test_no_glue);
        return installed_glue(scenario, argv[2], glues) ? RT_EXIT_SKIP : run_in_empty_dir("comm no-glue", &test, NULL);
    }
    if (strcmp(scenario, "no-glue-hip") == 0 && argc > 2) {
        static const char *const glues[] = {"librudnn-rccl.so", NULL};
        static const struct CMUnitTest test = cmocka_unit_test(test_no_glue_hip);
        return installed_glue(scenario, argv[2], glues) ? RT_EXIT_SKIP
                                                        : run_in_empty_dir("comm no-glue-hip", &test, NULL);
    }
    if (strcmp(scenario, "wrong-entry") == 0 && argc > 2) {
        static const struct CMUnitTest test = cmocka_unit_test(test_wrong_entry);
        return run_in_empty_dir("comm wrong-entry", &test, argv[2]);
    }
    if (strcmp(scenario, "other-backend") == 0) {
        static const struct CMUnitTest tests[] = {cmocka_unit_test(test_other_backend)};
        return rt_exit_code(cmocka_run_group_tests_name("comm other-backend", tests, NULL, NULL));
    }
    if (strcmp(scenario, "rccl-load") == 0 && argc > 2) {
        snprintf(built_glue, sizeof built_glue, "%s/librudnn-rccl.so", argv[2]);
        static const struct CMUnitTest tests[] = {cmocka_unit_test(test_rccl_load)};
        return rt_exit_code(cmocka_run_group_tests_name("comm rccl-load", tests, NULL, NULL));
    }
    if (strcmp(scenario, "uninit") == 0) {
        static const struct CMUnitTest tests[] = {cmocka_unit_test(test_uninit)};
        return rt_exit_code(cmocka_run_group_tests_name("comm uninit", tests, NULL, NULL));
    }
    fprintf(stderr, "usage: test_comm no-glue INSTALL_DIR | no-glue-hip INSTALL_DIR | uninit | wrong-entry NCCL_GLUE"
                    " | other-backend | rccl-load GLUE_DIR\n");
    return 1;
}
