/* The pooled device allocator (core/pool.h), through the static core
 * library: a released block is reused by the next request of its size class,
 * cached bytes are accounted, trim frees every cached block. Needs a backend
 * (the pool allocates device memory): exits 77 when none is usable. */
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "common.h"
#include "pool.h"

static void test_reuse(void **state)
{
    (void)state;
    rudnn_pool_trim(rt_queue);
    assert_int_equal(rudnn_pool_cached_bytes(rt_queue), 0);

    void *a = NULL;
    rt_assert_status(rudnn_pool_acquire(rt_queue, 1000, &a), RUDNN_STATUS_SUCCESS);
    assert_non_null(a);
    assert_int_equal(rudnn_pool_cached_bytes(rt_queue), 0); /* in use, not cached */
    rudnn_pool_release(rt_queue, a, 1000);
    size_t cached = rudnn_pool_cached_bytes(rt_queue);
    assert_true(cached >= 1000);

    /* the same size, and a smaller one of the same class, get the block back */
    void *b = NULL;
    rt_assert_status(rudnn_pool_acquire(rt_queue, 1000, &b), RUDNN_STATUS_SUCCESS);
    assert_ptr_equal(b, a);
    assert_int_equal(rudnn_pool_cached_bytes(rt_queue), 0);
    rudnn_pool_release(rt_queue, b, 1000);
    void *c = NULL;
    rt_assert_status(rudnn_pool_acquire(rt_queue, 900, &c), RUDNN_STATUS_SUCCESS);
    assert_ptr_equal(c, a);

    /* while it is held, another request gets a different block */
    void *d = NULL;
    rt_assert_status(rudnn_pool_acquire(rt_queue, 1000, &d), RUDNN_STATUS_SUCCESS);
    assert_non_null(d);
    assert_ptr_not_equal(d, c);
    /* a much larger request is a different block too */
    void *e = NULL;
    rt_assert_status(rudnn_pool_acquire(rt_queue, 1 << 20, &e), RUDNN_STATUS_SUCCESS);
    assert_non_null(e);
    assert_ptr_not_equal(e, c);
    assert_ptr_not_equal(e, d);

    rudnn_pool_release(rt_queue, c, 900);
    rudnn_pool_release(rt_queue, d, 1000);
    rudnn_pool_release(rt_queue, e, 1 << 20);
    assert_true(rudnn_pool_cached_bytes(rt_queue) >= 2000 + (1 << 20));

    /* trim frees everything cached */
    rudnn_pool_trim(rt_queue);
    assert_int_equal(rudnn_pool_cached_bytes(rt_queue), 0);
    /* and the pool still works afterwards */
    void *f = NULL;
    rt_assert_status(rudnn_pool_acquire(rt_queue, 1000, &f), RUDNN_STATUS_SUCCESS);
    assert_non_null(f);
    rudnn_pool_release(rt_queue, f, 1000);
    rudnn_pool_trim(rt_queue);
    assert_int_equal(rudnn_pool_cached_bytes(rt_queue), 0);
}

static void test_edges(void **state)
{
    (void)state;
    /* zero bytes gives a usable (smallest) block */
    void *z = NULL;
    rt_assert_status(rudnn_pool_acquire(rt_queue, 0, &z), RUDNN_STATUS_SUCCESS);
    assert_non_null(z);
    rudnn_pool_release(rt_queue, z, 0);
    /* releasing NULL is a no-op */
    size_t before = rudnn_pool_cached_bytes(rt_queue);
    rudnn_pool_release(rt_queue, NULL, 4096);
    assert_int_equal(rudnn_pool_cached_bytes(rt_queue), before);
    /* an impossible size fails cleanly */
    void *huge = NULL;
    rudnn_status_t st = rudnn_pool_acquire(rt_queue, SIZE_MAX, &huge);
    assert_int_equal(st, RUDNN_STATUS_ALLOC_FAILED);
    assert_true(rudnn_last_error()[0] != '\0');
    rudnn_pool_trim(rt_queue);
    assert_int_equal(rudnn_pool_cached_bytes(rt_queue), 0);
}

/* Blocks still cached when the queue goes are freed by queue_destroy
 * (ASan/LSan would report the bookkeeping otherwise). */
static void test_destroy_with_cached_blocks(void **state)
{
    (void)state;
    rudnn_context_t ctx = NULL;
    rt_assert_status(rudnn_context_create(&ctx, NULL), RUDNN_STATUS_SUCCESS);
    rudnn_queue_t q = NULL;
    rt_assert_status(rudnn_queue_create(ctx, &q), RUDNN_STATUS_SUCCESS);
    void *a = NULL, *b = NULL;
    rt_assert_status(rudnn_pool_acquire(q, 4096, &a), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_pool_acquire(q, 100, &b), RUDNN_STATUS_SUCCESS);
    rudnn_pool_release(q, a, 4096);
    rudnn_pool_release(q, b, 100);
    assert_true(rudnn_pool_cached_bytes(q) >= 4196);
    rudnn_queue_destroy(q);
    rudnn_context_destroy(ctx);
}

/* Pools are per queue: a block released on one queue is not handed to
 * another (the other queue's work is not ordered after the first's). */
static void test_per_queue(void **state)
{
    (void)state;
    rudnn_queue_t q2 = NULL;
    rt_assert_status(rudnn_queue_create(rt_ctx, &q2), RUDNN_STATUS_SUCCESS);
    rudnn_pool_trim(rt_queue);
    void *a = NULL, *b = NULL;
    rt_assert_status(rudnn_pool_acquire(rt_queue, 1000, &a), RUDNN_STATUS_SUCCESS);
    rudnn_pool_release(rt_queue, a, 1000);
    assert_true(rudnn_pool_cached_bytes(rt_queue) >= 1000);
    assert_int_equal(rudnn_pool_cached_bytes(q2), 0);
    rt_assert_status(rudnn_pool_acquire(q2, 1000, &b), RUDNN_STATUS_SUCCESS);
    assert_non_null(b);
    assert_ptr_not_equal(b, a);
    assert_true(rudnn_pool_cached_bytes(rt_queue) >= 1000); /* still cached on the first queue */
    rudnn_pool_release(q2, b, 1000);
    assert_true(rudnn_pool_cached_bytes(q2) >= 1000);
    rudnn_queue_destroy(q2); /* frees q2's cached block */
    void *c = NULL;
    rt_assert_status(rudnn_pool_acquire(rt_queue, 1000, &c), RUDNN_STATUS_SUCCESS);
    assert_ptr_equal(c, a);
    rudnn_pool_release(rt_queue, c, 1000);
    rudnn_pool_trim(rt_queue);
    assert_int_equal(rudnn_pool_cached_bytes(rt_queue), 0);
}

static int group_teardown(void **state)
{
    (void)state;
    rt_close();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reuse),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_destroy_with_cached_blocks),
        cmocka_unit_test(test_per_queue),
    };
    rt_open_or_skip("pool");
    return rt_exit_code(cmocka_run_group_tests_name("pool", tests, NULL, group_teardown));
}
