/* Versioned kernel tables: a plugin built with shorter tables than this librudnn knows.
 *
 *   test_family_abi          RUDNN_KERNEL_ENTRY and rudnn_family_table_at on tables in memory
 *   test_family_abi old DIR  DIR/librudnn-hip.so (tests/oldfam) has a vtable that ends before the
 *                            moe table and a norm table that ends before its required entries,
 *                            with poison past both ends: every op of both families must answer
 *                            NOT_SUPPORTED, write nothing, call none of the plugin's kernels and
 *                            read nothing past the ends (a read would call the poison). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "core/internal.h"

static const char *old_dir;

/* A table of two required entries and one appended later. */
typedef struct demo_table {
    uint32_t struct_size;
    int (*a)(void);
    int (*b)(void);
    int (*appended)(void);
} demo_table_t;

static int one(void) { return 1; }

static void test_kernel_entry(void **state)
{
    (void)state;
    demo_table_t t = {sizeof t, one, one, one};
    const demo_table_t *p = &t;
    assert_true(RUDNN_KERNEL_ENTRY(p, appended) == one);
    t.struct_size = (uint32_t)offsetof(demo_table_t, appended); /* an older plugin */
    assert_null(RUDNN_KERNEL_ENTRY(p, appended));
    assert_true(RUDNN_KERNEL_ENTRY(p, b) == one);
    t.struct_size = (uint32_t)offsetof(demo_table_t, appended) + 4; /* ends inside the entry */
    assert_null(RUDNN_KERNEL_ENTRY(p, appended));
    p = NULL;
    assert_null(RUDNN_KERNEL_ENTRY(p, a));
}

static void test_family_table_at(void **state)
{
    (void)state;
    static rudnn_norm_kernels_t norm;
    static rudnn_backend_t b;
    memset(&b, 0, sizeof b);
    memset(&norm, 0, sizeof norm);
    norm.struct_size = sizeof norm;
    b.struct_size = sizeof b;
    b.norm = &norm;
    assert_ptr_equal(RUDNN_FAMILY_TABLE(&b, norm), &norm);
    assert_null(RUDNN_FAMILY_TABLE(&b, moe)); /* NULL entry */
    norm.struct_size = (uint32_t)rudnn_norm_kernels_min_size - 1; /* shorter than its required part */
    assert_null(RUDNN_FAMILY_TABLE(&b, norm));
    norm.struct_size = (uint32_t)rudnn_norm_kernels_min_size;
    assert_ptr_equal(RUDNN_FAMILY_TABLE(&b, norm), &norm);
    b.moe = (const rudnn_moe_kernels_t *)(const void *)&norm; /* past the end below: never read */
    b.struct_size = (uint32_t)offsetof(rudnn_backend_t, moe);
    assert_null(RUDNN_FAMILY_TABLE(&b, moe));
    assert_ptr_equal(RUDNN_FAMILY_TABLE(&b, norm), &norm);
    assert_null(RUDNN_FAMILY_TABLE(NULL, norm));
}

static int plugin_kernel_called(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/librudnn-hip.so", old_dir);
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    int (*fn)(void);
    void *sym = dlsym(h, "oldfam_kernel_called");
    assert_non_null(sym);
    memcpy(&fn, &sym, sizeof fn);
    int called = fn();
    dlclose(h);
    return called;
}

static void test_old_plugin(void **state)
{
    (void)state;
    rudnn_context_options_t o = {.backend = "hip", .device = 0, .plugin_path = old_dir};
    rudnn_context_t ctx = NULL;
    rt_assert_status(rudnn_context_create(&ctx, &o), RUDNN_STATUS_SUCCESS);
    rudnn_queue_t q;
    rt_assert_status(rudnn_queue_create(ctx, &q), RUDNN_STATUS_SUCCESS);
    rudnn_buffer_t buf;
    rt_assert_status(rudnn_buffer_create(ctx, 4096, &buf), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_buffer_fill(q, buf, 0, 0x5a, 4096), RUDNN_STATUS_SUCCESS);
    rudnn_tensor_t x, gamma, y, logits, rstd, xo;
    int64_t xd[2] = {4, 8}, gd[1] = {8}, ld[2] = {4, 8}, rd[1] = {4};
    rudnn_tensor_init(&x, buf, 0, RUDNN_F32, 2, xd);
    rudnn_tensor_init(&gamma, buf, 128, RUDNN_F32, 1, gd);
    rudnn_tensor_init(&y, buf, 256, RUDNN_F32, 2, xd);
    rudnn_tensor_init(&logits, buf, 512, RUDNN_F32, 2, ld);
    rudnn_tensor_init(&rstd, buf, 768, RUDNN_F32, 1, rd);
    rudnn_tensor_init(&xo, buf, 1024, RUDNN_F32, 2, xd);

    /* norm: the table is shorter than its required part, so the family is absent */
    rt_assert_status(rudnn_rms_norm(q, &x, &gamma, 1e-6f, &y), RUDNN_STATUS_NOT_SUPPORTED);
    rt_assert_error_mentions("rms_norm", "hip");
    rt_assert_status(rudnn_softmax_last_axis(q, &x, &y), RUDNN_STATUS_NOT_SUPPORTED);
    rt_assert_status(rudnn_layer_norm(q, &x, &gamma, NULL, 1e-6f, &y), RUDNN_STATUS_NOT_SUPPORTED);
    rt_assert_status(rudnn_add_rms_norm(q, &x, &x, &gamma, 1e-6f, &y, &rstd, &xo), RUDNN_STATUS_NOT_SUPPORTED);
    assert_int_equal(plugin_kernel_called(), 0);

    /* moe: the vtable ends before the moe table */
    rudnn_routing_options_t ro = {.top_k = 2, .renormalize = 1};
    rudnn_routing_plan_t plan = NULL;
    rt_assert_status(rudnn_moe_route(q, &logits, &ro, &plan), RUDNN_STATUS_NOT_SUPPORTED);
    rt_assert_error_mentions("moe_route", "hip");
    assert_null(plan);

    /* nothing was written */
    uint8_t host[4096];
    rt_assert_status(rudnn_buffer_read(q, buf, 0, host, sizeof host), RUDNN_STATUS_SUCCESS);
    for (size_t i = 0; i < sizeof host; i++)
        assert_int_equal(host[i], 0x5a);
    rudnn_buffer_destroy(buf);
    rudnn_queue_destroy(q);
    rudnn_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    static const struct CMUnitTest unit[] = {cmocka_unit_test(test_kernel_entry),
                                             cmocka_unit_test(test_family_table_at)};
    static const struct CMUnitTest old[] = {cmocka_unit_test(test_old_plugin)};
    if (argc == 3 && strcmp(argv[1], "old") == 0) {
        old_dir = argv[2];
        return cmocka_run_group_tests_name("family-abi-old-plugin", old, NULL, NULL);
    }
    return cmocka_run_group_tests_name("family-abi", unit, NULL, NULL);
}
