/* Backend loader tests. The loader keeps state per process and the
 * environment is read once per process, so each scenario runs in its own
 * process (meson registers one test per scenario):
 *
 *   main                 probe; unknown backend name; invalid device index;
 *                        explicit backend and device
 *   empty-folder         plugin_path = an empty folder: BACKEND_UNAVAILABLE,
 *                        naming the folder and "not found"
 *   badabi DIR           plugin_path = DIR with librudnn-opencl.so of ABI 999:
 *                        ABI_MISMATCH, "ABI"
 *   badsize DIR          DIR/librudnn-hip.so has ABI 1 but a 16-byte struct:
 *                        ABI_MISMATCH
 *   nosym DIR            DIR/librudnn-cuda.so lacks rudnn_backend_entry_v1:
 *                        BACKEND_UNAVAILABLE, naming the symbol
 *   env-unknown          RUDNN_BACKEND=metal
 *   env-device           RUDNN_DEVICE=1000
 *   env-device-invalid   RUDNN_DEVICE=first
 *   env-path DIR         RUDNN_BACKEND_PATH=DIR:<build plugin folders>,
 *                        RUDNN_BACKEND=opencl: DIR is searched first */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static const char *scenario_dir; /* DIR argument of the scenario */

/* ---- helpers ------------------------------------------------------------------------ */

static size_t probe(rudnn_backend_report_t reports[4])
{
    size_t count = 0;
    memset(reports, 0, 4 * sizeof reports[0]);
    rt_assert_status(rudnn_backend_probe(reports, 4, &count), RUDNN_STATUS_SUCCESS);
    return count;
}

/* The first backend that loaded with at least one device, or NULL. */
static const rudnn_backend_report_t *first_loaded(const rudnn_backend_report_t *reports, size_t count)
{
    for (size_t i = 0; i < count && i < 4; i++)
        if (reports[i].loaded && reports[i].device_count > 0)
            return &reports[i];
    return NULL;
}

static rudnn_status_t create(rudnn_context_t *ctx, const char *backend, int device, const char *plugin_path)
{
    rudnn_context_options_t opt;
    memset(&opt, 0, sizeof opt);
    opt.backend = backend;
    opt.device = device;
    opt.plugin_path = plugin_path;
    *ctx = NULL;
    return rudnn_context_create(ctx, &opt);
}

static void expect_no_context(rudnn_context_t ctx)
{
    if (ctx) {
        rudnn_context_destroy(ctx);
        fail_msg("a failed context_create returned a context");
    }
}

/* ---- main scenario -------------------------------------------------------------------- */

static void test_probe(void **state)
{
    (void)state;
    rudnn_backend_report_t r[4];
    size_t count = probe(r);
    assert_int_equal(count, 3);
    static const char *const order[3] = {"cuda", "hip", "opencl"}; /* auto order */
    for (size_t i = 0; i < 3; i++) {
        assert_string_equal(r[i].name, order[i]);
        assert_true(r[i].message[0] != '\0');
        if (r[i].loaded) {
            assert_string_equal(r[i].message, "ok");
            assert_true(r[i].device_count >= 1);
            assert_true(r[i].plugin_path[0] != '\0');
        } else {
            assert_int_equal(r[i].device_count, 0);
            /* the message says why, naming the backend */
            assert_non_null(strstr(r[i].message, order[i]));
        }
        print_message("probe: %s loaded=%d devices=%d plugin=%s: %s\n", r[i].name, r[i].loaded,
                      r[i].device_count, r[i].plugin_path, r[i].message);
    }
    assert_int_equal(r[3].name[0], '\0'); /* capacity 4, three known: the 4th untouched */
    assert_string_equal(rudnn_last_error(), "");

    /* a smaller capacity fills only that many, still counts all */
    rudnn_backend_report_t one[2];
    memset(one, 0xab, sizeof one);
    count = 0;
    rt_assert_status(rudnn_backend_probe(one, 1, &count), RUDNN_STATUS_SUCCESS);
    assert_int_equal(count, 3);
    assert_string_equal(one[0].name, "cuda");
    const unsigned char *tail = (const unsigned char *)&one[1];
    for (size_t i = 0; i < sizeof one[1]; i++)
        assert_int_equal(tail[i], 0xab);
    /* capacity 0 with no array only counts */
    count = 0;
    rt_assert_status(rudnn_backend_probe(NULL, 0, &count), RUDNN_STATUS_SUCCESS);
    assert_int_equal(count, 3);
    /* NULL count, or NULL reports with a capacity */
    rt_assert_status(rudnn_backend_probe(r, 4, NULL), RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("probe");
    rt_assert_status(rudnn_backend_probe(NULL, 4, &count), RUDNN_STATUS_BAD_PARAM);
}

static void test_unknown_backend(void **state)
{
    (void)state;
    static const char *const names[] = {"metal", "", "vulkan", "cuda ", "opencl:0"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        rudnn_context_t ctx;
        rt_assert_status(create(&ctx, names[i], 0, NULL), RUDNN_STATUS_UNKNOWN_BACKEND);
        expect_no_context(ctx);
        /* names what was asked for and lists the valid names */
        char quoted[64];
        snprintf(quoted, sizeof quoted, "'%s'", names[i]);
        const char *msg = rudnn_last_error();
        if (!strstr(msg, names[i]) || !strstr(msg, "cuda") || !strstr(msg, "hip") || !strstr(msg, "opencl") ||
            !strstr(msg, "auto"))
            fail_msg("message for backend \"%s\" should name it and list auto, cuda, hip, opencl: \"%s\"", names[i],
                     msg);
    }
}

static void test_explicit_backend_and_device(void **state)
{
    (void)state;
    rudnn_backend_report_t r[4];
    size_t count = probe(r);
    const rudnn_backend_report_t *b = first_loaded(r, count);
    if (!b) {
        print_message("no backend loads here: SKIPPED\n");
        skip();
    }
    rudnn_context_t ctx = NULL, ctx_b = NULL;
    rt_assert_status(create(&ctx, b->name, 0, NULL), RUDNN_STATUS_SUCCESS);
    assert_string_equal(rudnn_last_error(), "");
    rudnn_device_info_t info;
    rt_assert_status(rudnn_context_device_info(ctx, &info), RUDNN_STATUS_SUCCESS);
    assert_string_equal(info.backend, b->name);
    assert_int_equal(info.index, 0);
    /* two contexts on one device at the same time */
    rt_assert_status(create(&ctx_b, b->name, 0, NULL), RUDNN_STATUS_SUCCESS);
    rudnn_context_destroy(ctx_b);
    rudnn_context_destroy(ctx);

    /* a device index past the last: a message with the index and the count */
    const int bad[] = {1000, b->device_count};
    for (size_t i = 0; i < 2; i++) {
        rudnn_status_t st = create(&ctx, b->name, bad[i], NULL);
        expect_no_context(ctx);
        if (st != RUDNN_STATUS_BACKEND_UNAVAILABLE && st != RUDNN_STATUS_BAD_PARAM)
            fail_msg("device %d of %d: got %s (%s)", bad[i], b->device_count, rudnn_status_string(st),
                     rudnn_last_error());
        char idx[32], cnt[32];
        snprintf(idx, sizeof idx, "%d", bad[i]);
        snprintf(cnt, sizeof cnt, "%d", b->device_count);
        rt_assert_error_mentions(idx, cnt, "device");
        /* auto with the same device */
        st = create(&ctx, "auto", bad[i], NULL);
        expect_no_context(ctx);
        assert_true(st == RUDNN_STATUS_BACKEND_UNAVAILABLE || st == RUDNN_STATUS_BAD_PARAM);
        rt_assert_error_mentions(idx);
    }
    /* NULL options and an explicit "auto" both work */
    rt_assert_status(rudnn_context_create(&ctx, NULL), RUDNN_STATUS_SUCCESS);
    rudnn_context_destroy(ctx);
    rt_assert_status(create(&ctx, "auto", -1, NULL), RUDNN_STATUS_SUCCESS);
    rudnn_context_destroy(ctx);
    /* an unavailable backend says what is available instead */
    for (size_t i = 0; i < count; i++) {
        if (r[i].loaded)
            continue;
        rudnn_status_t st = create(&ctx, r[i].name, 0, NULL);
        expect_no_context(ctx);
        assert_true(st == RUDNN_STATUS_BACKEND_UNAVAILABLE || st == RUDNN_STATUS_ABI_MISMATCH);
        rt_assert_error_mentions(r[i].name, b->name);
    }
    rt_assert_status(rudnn_context_create(NULL, NULL), RUDNN_STATUS_BAD_PARAM);
}

/* ---- plugin folders ---------------------------------------------------------------------- */

static void test_empty_folder(void **state)
{
    (void)state;
    char dir[] = "/tmp/rudnn-test-empty-XXXXXX";
    assert_non_null(mkdtemp(dir));
    rudnn_context_t ctx;
    rudnn_status_t st = create(&ctx, "opencl", 0, dir);
    char msg[4096];
    snprintf(msg, sizeof msg, "%s", rudnn_last_error());
    /* auto over the same folder: nothing loads, each backend is accounted for */
    rudnn_context_t ctx2;
    rudnn_status_t st_auto = create(&ctx2, "auto", 0, dir);
    char msg_auto[4096];
    snprintf(msg_auto, sizeof msg_auto, "%s", rudnn_last_error());
    /* two folders: both named */
    char two[512];
    snprintf(two, sizeof two, "/nonexistent/rudnn-plugins:%s", dir);
    rudnn_context_t ctx3;
    rudnn_status_t st_two = create(&ctx3, "hip", 0, two);
    char msg_two[4096];
    snprintf(msg_two, sizeof msg_two, "%s", rudnn_last_error());
    rmdir(dir);

    expect_no_context(ctx);
    expect_no_context(ctx2);
    expect_no_context(ctx3);
    assert_int_equal(st, RUDNN_STATUS_BACKEND_UNAVAILABLE);
    if (!strstr(msg, dir) || !strstr(msg, "not found") || !strstr(msg, "opencl"))
        fail_msg("message should name backend opencl, folder %s and say \"not found\": \"%s\"", dir, msg);
    assert_int_equal(st_auto, RUDNN_STATUS_BACKEND_UNAVAILABLE);
    if (!strstr(msg_auto, "cuda") || !strstr(msg_auto, "hip") || !strstr(msg_auto, "opencl") ||
        !strstr(msg_auto, dir))
        fail_msg("auto message should account for cuda, hip, opencl in %s: \"%s\"", dir, msg_auto);
    assert_int_equal(st_two, RUDNN_STATUS_BACKEND_UNAVAILABLE);
    if (!strstr(msg_two, dir) || !strstr(msg_two, "/nonexistent/rudnn-plugins"))
        fail_msg("message should name both folders searched: \"%s\"", msg_two);
}

static void test_bad_abi(void **state)
{
    (void)state;
    rudnn_context_t ctx;
    rt_assert_status(create(&ctx, "opencl", 0, scenario_dir), RUDNN_STATUS_ABI_MISMATCH);
    expect_no_context(ctx);
    rt_assert_error_mentions("ABI", "opencl", scenario_dir, "999");
    /* auto over the same folder: refused too, and the reason survives */
    rudnn_status_t st = create(&ctx, "auto", 0, scenario_dir);
    expect_no_context(ctx);
    assert_true(st == RUDNN_STATUS_ABI_MISMATCH || st == RUDNN_STATUS_BACKEND_UNAVAILABLE);
    rt_assert_error_mentions("ABI");
    /* asking again gives the same answer (nothing half-loaded is cached) */
    rt_assert_status(create(&ctx, "opencl", 0, scenario_dir), RUDNN_STATUS_ABI_MISMATCH);
    expect_no_context(ctx);
}

static void test_bad_struct_size(void **state)
{
    (void)state;
    rudnn_context_t ctx;
    rt_assert_status(create(&ctx, "hip", 0, scenario_dir), RUDNN_STATUS_ABI_MISMATCH);
    expect_no_context(ctx);
    rt_assert_error_mentions("ABI", "hip", scenario_dir);
}

static void test_no_entry_symbol(void **state)
{
    (void)state;
    rudnn_context_t ctx;
    rt_assert_status(create(&ctx, "cuda", 0, scenario_dir), RUDNN_STATUS_BACKEND_UNAVAILABLE);
    expect_no_context(ctx);
    rt_assert_error_mentions("cuda", scenario_dir, "rudnn_backend_entry_v1");
    rt_assert_status(create(&ctx, "cuda", 0, scenario_dir), RUDNN_STATUS_BACKEND_UNAVAILABLE);
    expect_no_context(ctx);
}

/* ---- environment ------------------------------------------------------------------------- */

static void test_env_unknown_backend(void **state)
{
    (void)state;
    rudnn_context_t ctx = NULL;
    rt_assert_status(rudnn_context_create(&ctx, NULL), RUDNN_STATUS_UNKNOWN_BACKEND);
    expect_no_context(ctx);
    rt_assert_error_mentions("metal", "opencl");
    /* options with backend NULL also take RUDNN_BACKEND */
    rt_assert_status(create(&ctx, NULL, -1, NULL), RUDNN_STATUS_UNKNOWN_BACKEND);
    expect_no_context(ctx);
    /* an explicit name overrides the environment */
    rudnn_status_t st = create(&ctx, "auto", -1, NULL);
    assert_int_not_equal(st, RUDNN_STATUS_UNKNOWN_BACKEND);
    if (st == RUDNN_STATUS_SUCCESS)
        rudnn_context_destroy(ctx);
    else
        assert_int_equal(st, RUDNN_STATUS_BACKEND_UNAVAILABLE);
    /* probing does not depend on RUDNN_BACKEND */
    rudnn_backend_report_t r[4];
    assert_int_equal(probe(r), 3);
}

static void test_env_device(void **state)
{
    (void)state;
    rudnn_backend_report_t r[4];
    size_t count = probe(r);
    if (!first_loaded(r, count)) {
        print_message("no backend loads here: SKIPPED\n");
        skip();
    }
    rudnn_context_t ctx = NULL;
    rudnn_status_t st = rudnn_context_create(&ctx, NULL);
    expect_no_context(ctx);
    assert_true(st == RUDNN_STATUS_BACKEND_UNAVAILABLE || st == RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("1000");
    /* a negative options.device means "use RUDNN_DEVICE" */
    st = create(&ctx, NULL, -1, NULL);
    expect_no_context(ctx);
    assert_true(st == RUDNN_STATUS_BACKEND_UNAVAILABLE || st == RUDNN_STATUS_BAD_PARAM);
    /* an explicit device overrides it */
    rt_assert_status(create(&ctx, NULL, 0, NULL), RUDNN_STATUS_SUCCESS);
    rudnn_context_destroy(ctx);
}

static void test_env_device_invalid(void **state)
{
    (void)state;
    rudnn_context_t ctx = NULL;
    rt_assert_status(rudnn_context_create(&ctx, NULL), RUDNN_STATUS_BAD_PARAM);
    expect_no_context(ctx);
    rt_assert_error_mentions("RUDNN_DEVICE");
    rudnn_backend_report_t r[4];
    size_t count = probe(r);
    if (!first_loaded(r, count))
        return;
    rt_assert_status(create(&ctx, NULL, 0, NULL), RUDNN_STATUS_SUCCESS);
    rudnn_context_destroy(ctx);
}

static void test_env_path_searched_first(void **state)
{
    (void)state;
    rudnn_backend_report_t r[4];
    size_t count = probe(r);
    assert_int_equal(count, 3);
    /* hip: DIR/librudnn-hip.so (bad struct size) is found through RUDNN_BACKEND_PATH */
    const rudnn_backend_report_t *hip = &r[1];
    assert_string_equal(hip->name, "hip");
    if (!hip->loaded) {
        if (!strstr(hip->message, scenario_dir) || !strstr(hip->message, "ABI"))
            fail_msg("hip report should name %s and the ABI problem: \"%s\"", scenario_dir, hip->message);
    }
    /* opencl: DIR/librudnn-opencl.so (ABI 999) comes first and is refused; a
     * real plugin later in the path may still load */
    const rudnn_backend_report_t *ocl = &r[2];
    rudnn_context_t ctx = NULL;
    rudnn_status_t st = rudnn_context_create(&ctx, NULL);
    if (ocl->loaded) {
        assert_null(strstr(ocl->plugin_path, scenario_dir));
        rt_assert_status(st, RUDNN_STATUS_SUCCESS);
        rudnn_device_info_t info;
        rt_assert_status(rudnn_context_device_info(ctx, &info), RUDNN_STATUS_SUCCESS);
        assert_string_equal(info.backend, "opencl");
        rudnn_context_destroy(ctx);
    } else {
        expect_no_context(ctx);
        assert_true(st == RUDNN_STATUS_ABI_MISMATCH || st == RUDNN_STATUS_BACKEND_UNAVAILABLE);
        rt_assert_error_mentions(scenario_dir, "ABI");
    }
}

/* ---- main ----------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    const char *scenario = argc > 1 ? argv[1] : "main";
    scenario_dir = argc > 2 ? argv[2] : NULL;
    static const struct CMUnitTest main_tests[] = {
        cmocka_unit_test(test_probe),
        cmocka_unit_test(test_unknown_backend),
        cmocka_unit_test(test_explicit_backend_and_device),
    };
    static const struct CMUnitTest empty_tests[] = {cmocka_unit_test(test_empty_folder)};
    static const struct CMUnitTest badabi_tests[] = {cmocka_unit_test(test_bad_abi)};
    static const struct CMUnitTest badsize_tests[] = {cmocka_unit_test(test_bad_struct_size)};
    static const struct CMUnitTest nosym_tests[] = {cmocka_unit_test(test_no_entry_symbol)};
    static const struct CMUnitTest env_unknown_tests[] = {cmocka_unit_test(test_env_unknown_backend)};
    static const struct CMUnitTest env_device_tests[] = {cmocka_unit_test(test_env_device)};
    static const struct CMUnitTest env_device_invalid_tests[] = {cmocka_unit_test(test_env_device_invalid)};
    static const struct CMUnitTest env_path_tests[] = {cmocka_unit_test(test_env_path_searched_first)};
    static const struct {
        const char *name;
        const struct CMUnitTest *tests;
        size_t count;
        int needs_dir;
    } scenarios[] = {
#define S(name, arr, dir) {name, arr, sizeof arr / sizeof arr[0], dir}
        S("main", main_tests, 0),
        S("empty-folder", empty_tests, 0),
        S("badabi", badabi_tests, 1),
        S("badsize", badsize_tests, 1),
        S("nosym", nosym_tests, 1),
        S("env-unknown", env_unknown_tests, 0),
        S("env-device", env_device_tests, 0),
        S("env-device-invalid", env_device_invalid_tests, 0),
        S("env-path", env_path_tests, 1),
#undef S
    };
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        if (strcmp(scenarios[i].name, scenario) != 0)
            continue;
        if (scenarios[i].needs_dir && !scenario_dir) {
            fprintf(stderr, "usage: %s %s DIR\n", argv[0], scenario);
            return 2;
        }
        char group[64];
        snprintf(group, sizeof group, "loader-%s", scenario);
        return rt_exit_code(_cmocka_run_group_tests(group, scenarios[i].tests, scenarios[i].count, NULL, NULL));
    }
    fprintf(stderr, "%s: unknown scenario '%s'\n", argv[0], scenario);
    return 2;
}
