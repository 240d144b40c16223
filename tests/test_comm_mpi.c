/* MPI communicators (rudnn/comm.h, core/comm.h) under mpirun -np N (N even, 2..8): info, a TP
 * split into pairs, exchanges of varied sizes among all ranks and within pairs, every error path
 * (agreed among the ranks), destroy orders. Every rank runs every test in the same order: the
 * calls under test are collective.
 *
 * RUDNN_TEST_COMM_BIG=1 adds a 1 GiB + 3 byte message between ranks 0 and 1 (several MPI
 * messages; about 2.2 GiB of host memory on each of the two). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "comm.h" /* core/comm.h: the exchange ops/ use */
#include "common.h"
#include <rudnn/debug.h>

#define MIB ((size_t)1 << 20)
#define POISON ((rudnn_comm_t)(uintptr_t)0x5a5a5a5a)

static int world_rank, world_size;

static rudnn_comm_t create(const void *ep, const void *tp, size_t bytes)
{
    rudnn_comm_t comm = NULL;
    rt_assert_status(rudnn_comm_create_mpi(rt_ctx, ep, tp, bytes, &comm), RUDNN_STATUS_SUCCESS);
    assert_non_null(comm);
    return comm;
}

/* Pairs (0,1), (2,3), ...: the TP groups of the tests. */
static MPI_Comm split_pairs(void)
{
    MPI_Comm tp;
    assert_int_equal(MPI_Comm_split(MPI_COMM_WORLD, world_rank / 2, world_rank, &tp), MPI_SUCCESS);
    return tp;
}

/* Expects status want on every rank and *comm untouched. */
static void expect_rejected(rudnn_context_t ctx, const void *ep, const void *tp, size_t bytes,
                            rudnn_status_t want, const char *needle)
{
    rudnn_comm_t comm = POISON;
    rt_assert_status(rudnn_comm_create_mpi(ctx, ep, tp, bytes, &comm), want);
    assert_ptr_equal(comm, POISON);
    rt_assert_error_mentions("comm_create_mpi", needle);
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_info(void **state)
{
    (void)state;
    uint64_t live = rudnn_debug_live_objects();
    rudnn_comm_t comm = create(&(MPI_Comm){MPI_COMM_WORLD}, NULL, 3 * MIB);
    rudnn_comm_info_t info;
    memset(&info, 0x7f, sizeof info);
    rt_assert_status(rudnn_comm_get_info(comm, &info), RUDNN_STATUS_SUCCESS);
    assert_int_equal(info.kind, RUDNN_COMM_MPI);
    assert_int_equal(info.ep_rank, world_rank);
    assert_int_equal(info.ep_size, world_size);
    assert_int_equal(info.tp_rank, 0);
    assert_int_equal(info.tp_size, 0);
    assert_int_equal(info.buffer_bytes, 3 * MIB);
    assert_int_equal(rudnn_debug_live_objects(), live + 1);
    rudnn_comm_destroy(comm);
    assert_int_equal(rudnn_debug_live_objects(), live);
    rudnn_comm_destroy(NULL);
    rt_assert_status(rudnn_comm_get_info(NULL, &info), RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("comm_get_info", "comm");
}

/* With 2 ranks a pair is the whole EP group, which a TP group must not be: 4 ranks and up. */
static void test_tp_pairs(void **state)
{
    (void)state;
    if (world_size < 4)
        skip();
    MPI_Comm world = MPI_COMM_WORLD, tp = split_pairs();
    rudnn_comm_t comm = create(&world, &tp, 2 * MIB);
    /* the caller's communicators are its own: freeing them leaves rudnn's duplicates */
    MPI_Comm_free(&tp);
    rudnn_comm_info_t info;
    rt_assert_status(rudnn_comm_get_info(comm, &info), RUDNN_STATUS_SUCCESS);
    assert_int_equal(info.ep_rank, world_rank);
    assert_int_equal(info.ep_size, world_size);
    assert_int_equal(info.tp_rank, world_rank % 2);
    assert_int_equal(info.tp_size, 2);
    /* the pair swaps a message through the TP group */
    int mine = 1000 + world_rank, theirs = -1, peer = 1 - info.tp_rank;
    const void *sb[] = {&mine};
    void *rb[] = {&theirs};
    size_t bytes[] = {sizeof(int)};
    rt_assert_status(rudnn_comm_exchange(comm, RUDNN_COMM_GROUP_TP, "test", 1, &peer, sb, bytes, 1,
                                         &peer, rb, bytes, 7),
                     RUDNN_STATUS_SUCCESS);
    assert_int_equal(theirs, 1000 + (world_rank ^ 1));
    /* agreement within the pair and within EP */
    int v = world_rank;
    rt_assert_status(rudnn_comm_allreduce_max(comm, RUDNN_COMM_GROUP_TP, "test", &v), RUDNN_STATUS_SUCCESS);
    assert_int_equal(v, world_rank | 1);
    v = world_rank;
    rt_assert_status(rudnn_comm_allreduce_max(comm, RUDNN_COMM_GROUP_EP, "test", &v), RUDNN_STATUS_SUCCESS);
    assert_int_equal(v, world_size - 1);
    rudnn_comm_destroy(comm);
}

/* EP and TP across each other (a grid): EP {0,2,..} and {1,3,..}, TP pairs {0,1}, {2,3}, ...
 * Creation is collective over each EP group; agreement reaches the other group through TP. */
static void test_ep_tp_grid(void **state)
{
    (void)state;
    if (world_size < 4)
        skip();
    MPI_Comm ep, tp = split_pairs();
    MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &ep);
    rudnn_comm_t comm = create(&ep, &tp, 2 * MIB);
    rudnn_comm_info_t info;
    rt_assert_status(rudnn_comm_get_info(comm, &info), RUDNN_STATUS_SUCCESS);
    assert_int_equal(info.ep_rank, world_rank / 2);
    assert_int_equal(info.ep_size, world_size / 2);
    assert_int_equal(info.tp_rank, world_rank % 2);
    assert_int_equal(info.tp_size, 2);
    rudnn_comm_destroy(comm);
    /* world rank 0 (EP group 0) rejects: its EP peers name it, the other EP group learns it
     * through the TP pairs */
    expect_rejected(rt_ctx, &ep, &tp, world_rank == 0 ? 0 : 2 * MIB, RUDNN_STATUS_BAD_PARAM,
                    world_rank == 0       ? "buffer_bytes 0"
                    : world_rank % 2 == 0 ? "EP rank 0 rejected"
                                          : "another EP group");
    MPI_Comm_free(&ep);
    MPI_Comm_free(&tp);
}

/* Size of the message src sends dst: 0 for some pairs, up to about 3 MB. */
static size_t pair_bytes(int src, int dst) { return (size_t)((src * 7 + dst * 13) % 5) * 700001; }

static unsigned char pattern(int src, int dst, size_t i)
{
    return (unsigned char)(i * 31 + (size_t)src * 7 + (size_t)dst * 101 + (i >> 11));
}

static void test_exchange_all(void **state)
{
    (void)state;
    rudnn_comm_t comm = create(&(MPI_Comm){MPI_COMM_WORLD}, NULL, 2 * MIB);
    int n = world_size;
    int *peers = rt_xcalloc((size_t)n, sizeof(int));
    const void **sb = rt_xcalloc((size_t)n, sizeof(void *));
    void **rb = rt_xcalloc((size_t)n, sizeof(void *));
    size_t *sbytes = rt_xcalloc((size_t)n, sizeof(size_t));
    size_t *rbytes = rt_xcalloc((size_t)n, sizeof(size_t));
    for (int p = 0; p < n; p++) { /* every rank, itself included */
        peers[p] = p;
        sbytes[p] = pair_bytes(world_rank, p);
        rbytes[p] = pair_bytes(p, world_rank);
        unsigned char *s = rt_xmalloc(sbytes[p]);
        for (size_t i = 0; i < sbytes[p]; i++)
            s[i] = pattern(world_rank, p, i);
        sb[p] = s;
        rb[p] = rt_xmalloc(rbytes[p]);
        memset(rb[p], 0xee, rbytes[p]);
    }
    /* two rounds with different tags on the same buffers */
    for (int round = 0; round < 2; round++)
        rt_assert_status(rudnn_comm_exchange(comm, RUDNN_COMM_GROUP_EP, "test", n, peers, sb, sbytes,
                                             n, peers, rb, rbytes, 100 + round),
                         RUDNN_STATUS_SUCCESS);
    for (int p = 0; p < n; p++) {
        const unsigned char *r = rb[p];
        for (size_t i = 0; i < rbytes[p]; i++)
            if (r[i] != pattern(p, world_rank, i))
                fail_msg("rank %d: byte %zu from rank %d is %u, expected %u", world_rank, i, p, r[i],
                         pattern(p, world_rank, i));
        free((void *)sb[p]);
        free(rb[p]);
    }
    free(peers);
    free(sb);
    free(rb);
    free(sbytes);
    free(rbytes);
    rudnn_comm_destroy(comm);
}

/* A ring where each rank sends only to the next and receives only from the previous. */
static void test_exchange_ring(void **state)
{
    (void)state;
    rudnn_comm_t comm = create(&(MPI_Comm){MPI_COMM_WORLD}, NULL, 2 * MIB);
    int next = (world_rank + 1) % world_size, prev = (world_rank + world_size - 1) % world_size;
    size_t len = 1 + (size_t)world_rank * 4099, want = 1 + (size_t)prev * 4099;
    unsigned char *s = rt_xmalloc(len), *r = rt_xmalloc(want);
    memset(s, world_rank + 1, len);
    const void *sb[] = {s};
    void *rb[] = {r};
    rt_assert_status(rudnn_comm_exchange(comm, RUDNN_COMM_GROUP_EP, "test", 1, &next, sb, &len, 1,
                                         &prev, rb, &want, 0),
                     RUDNN_STATUS_SUCCESS);
    for (size_t i = 0; i < want; i++)
        assert_int_equal(r[i], prev + 1);
    free(s);
    free(r);
    rudnn_comm_destroy(comm);
}

static void test_exchange_big(void **state)
{
    (void)state;
    const char *big = getenv("RUDNN_TEST_COMM_BIG");
    if (!big || strcmp(big, "1") != 0)
        skip();
    rudnn_comm_t comm = create(&(MPI_Comm){MPI_COMM_WORLD}, NULL, 2 * MIB);
    size_t len = ((size_t)1 << 30) + 3;
    if (world_rank < 2) {
        int peer = 1 - world_rank;
        unsigned char *s = rt_xmalloc(len), *r = rt_xmalloc(len);
        for (size_t i = 0; i < len; i += 4096)
            s[i] = (unsigned char)(i >> 12) ^ (unsigned char)world_rank;
        s[len - 1] = (unsigned char)(0xa0 + world_rank);
        const void *sb[] = {s};
        void *rb[] = {r};
        rt_assert_status(rudnn_comm_exchange(comm, RUDNN_COMM_GROUP_EP, "test", 1, &peer, sb, &len,
                                             1, &peer, rb, &len, 1),
                         RUDNN_STATUS_SUCCESS);
        for (size_t i = 0; i < len - 1; i += 4096)
            assert_int_equal(r[i], (unsigned char)(i >> 12) ^ (unsigned char)peer);
        assert_int_equal(r[len - 1], 0xa0 + peer);
        free(s);
        free(r);
    }
    rudnn_comm_destroy(comm);
}

static void test_create_errors(void **state)
{
    (void)state;
    MPI_Comm world = MPI_COMM_WORLD, self = MPI_COMM_SELF, tp = split_pairs();
    uint64_t live = rudnn_debug_live_objects();
    /* at once, on each rank alike */
    expect_rejected(rt_ctx, NULL, NULL, 2 * MIB, RUDNN_STATUS_BAD_PARAM, "ep_comm is NULL");
    expect_rejected(rt_ctx, &self, NULL, 2 * MIB, RUDNN_STATUS_BAD_PARAM, "1 rank(s)");
    /* agreed */
    rt_assert_status(rudnn_comm_create_mpi(rt_ctx, &world, NULL, 2 * MIB, NULL), RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("comm_create_mpi", "comm is NULL");
    expect_rejected(NULL, &world, NULL, 2 * MIB, RUDNN_STATUS_BAD_PARAM, "context is NULL");
    expect_rejected(rt_ctx, &world, NULL, 2 * MIB - 1, RUDNN_STATUS_BAD_PARAM, "2 MiB");
    expect_rejected(rt_ctx, &world, NULL, 0, RUDNN_STATUS_BAD_PARAM, "buffer_bytes 0");
    expect_rejected(rt_ctx, &world, &world, 2 * MIB, RUDNN_STATUS_BAD_PARAM, "same ranks");
    MPI_Comm null_comm = MPI_COMM_NULL;
    expect_rejected(rt_ctx, &world, &null_comm, 2 * MIB, RUDNN_STATUS_BAD_PARAM, "MPI_COMM_NULL");
    /* one rank's bad argument fails every rank, naming it */
    expect_rejected(rt_ctx, &world, NULL, world_rank == 1 ? MIB : 2 * MIB, RUDNN_STATUS_BAD_PARAM,
                    world_rank == 1 ? "buffer_bytes" : "EP rank 1 rejected");
    if (world_size == 2) {
        /* a TP group of both ranks: congruent with EP */
        expect_rejected(rt_ctx, &world, &tp, 2 * MIB, RUDNN_STATUS_BAD_PARAM, "same ranks");
    } else {
        /* ranks 0..2 in a TP group of 3, the rest in groups of their own */
        MPI_Comm odd;
        MPI_Comm_split(world, world_rank < 3 ? 0 : 1 + world_rank, world_rank, &odd);
        expect_rejected(rt_ctx, &world, &odd, 2 * MIB, RUDNN_STATUS_BAD_PARAM,
                        world_rank < 3 ? "tp_comm has 3 rank(s)" : "tp_comm has 1 rank(s)");
        MPI_Comm_free(&odd);
    }
    assert_int_equal(rudnn_debug_live_objects(), live);
    MPI_Comm_free(&tp);
}

static void test_exchange_errors(void **state)
{
    (void)state;
    rudnn_comm_t comm = create(&(MPI_Comm){MPI_COMM_WORLD}, NULL, 2 * MIB);
    int peer = 0, bad_peer = world_size, v = 0;
    char buf[4];
    const void *sb[] = {buf};
    void *rb[] = {buf}, *null_rb[] = {NULL};
    size_t bytes[] = {sizeof buf};
    rt_assert_status(rudnn_comm_exchange(NULL, 0, "op_x", 0, NULL, NULL, NULL, 0, NULL, NULL, NULL, 0),
                     RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("op_x: comm is NULL");
    rt_assert_status(rudnn_comm_exchange(comm, RUDNN_COMM_GROUP_TP, "op_x", 0, NULL, NULL, NULL, 0,
                                         NULL, NULL, NULL, 0),
                     RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("op_x", "no TP group");
    rt_assert_status(rudnn_comm_exchange(comm, 5, "op_x", 0, NULL, NULL, NULL, 0, NULL, NULL, NULL, 0),
                     RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_comm_exchange(comm, 0, "op_x", 1, &bad_peer, sb, bytes, 0, NULL, NULL,
                                         NULL, 0),
                     RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("op_x", "send_peers[0]", "outside");
    rt_assert_status(rudnn_comm_exchange(comm, 0, "op_x", -1, NULL, NULL, NULL, 0, NULL, NULL, NULL, 0),
                     RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_comm_exchange(comm, 0, "op_x", 0, NULL, NULL, NULL, 1, &peer, NULL, bytes, 0),
                     RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("op_x", "buffers array is NULL");
    rt_assert_status(rudnn_comm_exchange(comm, 0, "op_x", 0, NULL, NULL, NULL, 1, &peer, null_rb,
                                         bytes, 0),
                     RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("op_x", "recv_bufs[0] is NULL");
    rt_assert_status(rudnn_comm_exchange(comm, 0, "op_x", 1, &peer, sb, bytes, 1, &peer, rb, bytes,
                                         32768),
                     RUDNN_STATUS_BAD_PARAM);
    rt_assert_error_mentions("op_x", "tag 32768");
    rt_assert_status(rudnn_comm_allreduce_max(comm, 0, "op_x", NULL), RUDNN_STATUS_BAD_PARAM);
    rt_assert_status(rudnn_comm_allreduce_max(comm, 1, "op_x", &v), RUDNN_STATUS_BAD_PARAM);
    /* nothing to send or receive: succeeds without messages */
    rt_assert_status(rudnn_comm_exchange(comm, 0, "op_x", 0, NULL, NULL, NULL, 0, NULL, NULL, NULL, 0),
                     RUDNN_STATUS_SUCCESS);
    rudnn_comm_destroy(comm);
}

/* The comm keeps its context: destroying the context first is safe. */
static void test_destroy_orders(void **state)
{
    (void)state;
    uint64_t live = rudnn_debug_live_objects();
    MPI_Comm world = MPI_COMM_WORLD, tp = split_pairs();
    const void *tp_arg = world_size >= 4 ? &tp : NULL; /* a pair is all of 2 ranks */
    for (int order = 0; order < 2; order++) {
        rudnn_context_t ctx = NULL;
        rt_assert_status(rudnn_context_create(&ctx, NULL), RUDNN_STATUS_SUCCESS);
        rudnn_comm_t a = NULL, b = NULL;
        rt_assert_status(rudnn_comm_create_mpi(ctx, &world, tp_arg, 2 * MIB, &a), RUDNN_STATUS_SUCCESS);
        rt_assert_status(rudnn_comm_create_mpi(ctx, &world, NULL, 4 * MIB, &b), RUDNN_STATUS_SUCCESS);
        rudnn_context_destroy(ctx);
        rudnn_comm_info_t info;
        rt_assert_status(rudnn_comm_get_info(order ? b : a, &info), RUDNN_STATUS_SUCCESS);
        rudnn_comm_destroy(order ? b : a); /* in each order; the context goes with the last */
        int v = world_rank;
        rt_assert_status(rudnn_comm_allreduce_max(order ? a : b, 0, "test", &v), RUDNN_STATUS_SUCCESS);
        assert_int_equal(v, world_size - 1);
        rudnn_comm_destroy(order ? a : b);
        assert_int_equal(rudnn_debug_live_objects(), live);
    }
    MPI_Comm_free(&tp);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (world_size < 2 || world_size % 2) {
        fprintf(stderr, "test_comm_mpi: run under mpirun -np N, N even (got %d)\n", world_size);
        MPI_Finalize();
        return 1;
    }
    rt_open_or_skip("comm-mpi");
    static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_tp_pairs),
        cmocka_unit_test(test_ep_tp_grid),
        cmocka_unit_test(test_exchange_all),
        cmocka_unit_test(test_exchange_ring),
        cmocka_unit_test(test_exchange_big),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_exchange_errors),
        cmocka_unit_test(test_destroy_orders),
    };
    char name[64];
    snprintf(name, sizeof name, "comm-mpi rank %d/%d", world_rank, world_size);
    rt_set_filters(argc, argv);
    int failed = _cmocka_run_group_tests(name, tests, sizeof tests / sizeof tests[0], NULL, NULL);
    rt_close();
    /* a failed rank must not leave the others waiting in a collective */
    if (failed)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
    return rt_exit_code(failed);
}
