/* The FP64 gated-delta reference (tests/reference/gated_delta_ref.c) against hand-worked cases,
 * and its chunked WY form against its recurrence; no backend needed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "reference/gated_delta_ref.h"

/* T 1, K = V = 1: S0 = 2, log_decay ln 0.5 (S' = 1), k 1, v 3, beta 0.5: delta = 0.5 (3 - 1) = 1,
 * S = 2, o = scale S q = 0.5 * 2 * 4 = 4. */
static void hand_one(void **state)
{
    (void)state;
    const double q = 4, k = 1, v = 3, beta = 0.5, ld = log(0.5), s0 = 2;
    double out, s1;
    gdr_ref_recurrent(1, 1, 1, &q, &k, &v, &beta, &ld, &s0, 0.5, &out, &s1);
    assert_true(fabs(out - 4.0) < 1e-15 && fabs(s1 - 2.0) < 1e-15);
}

/* T 2, K 2, V 1, S0 = 0, no decay, beta 1. t0: k = (1, 0), v 5: S = (5, 0), o = q . S = 5 (q = (1, 1)).
 * t1: k = (0, 1), v 7: S^T k = 0, delta 7, S = (5, 7), o = (1, 2) . (5, 7) = 19. */
static void hand_two(void **state)
{
    (void)state;
    const double q[4] = {1, 1, 1, 2}, k[4] = {1, 0, 0, 1}, v[2] = {5, 7}, beta[2] = {1, 1}, ld[2] = {0, 0};
    const double s0[2] = {0, 0};
    double out[2], s1[2];
    gdr_ref_recurrent(2, 2, 1, q, k, v, beta, ld, s0, 1.0, out, s1);
    assert_true(out[0] == 5 && out[1] == 19 && s1[0] == 5 && s1[1] == 7);
}

/* beta 1 with a unit k overwrites the k direction: S^T k becomes v exactly. */
static void overwrite(void **state)
{
    (void)state;
    const double q[2] = {0, 1}, k[2] = {0, 1}, v[3] = {1, -2, 3}, beta = 1, ld = 0;
    const double s0[6] = {9, 8, 7, 6, 5, 4};
    double out[3], s1[6];
    gdr_ref_recurrent(1, 2, 3, q, k, v, &beta, &ld, s0, 1.0, out, s1);
    for (int c = 0; c < 3; c++)
        assert_true(s1[3 + c] == v[c] && s1[c] == s0[c] && out[c] == v[c]);
}

static void fill(rt_rng_t *r, double *x, int64_t n, double lo, double hi)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = rt_rng_uniform(r, lo, hi);
}

/* chunked == recurrent for the (T, chunk) pairs and gates 0 / -0.3 / -20, beta 0, 1, random */
static void chunked_matches(void **state)
{
    (void)state;
    static const int64_t pairs[][2] = {{1, 1}, {3, 4}, {7, 3}, {67, 33}, {64, 64}, {65, 64}, {129, 64}};
    static const double gates[] = {0.0, -0.3, -20.0};
    const int64_t K = 5, V = 3;
    for (size_t pi = 0; pi < sizeof pairs / sizeof pairs[0]; pi++)
        for (size_t gi = 0; gi < 3; gi++)
            for (int bmode = 0; bmode < 3; bmode++) {
                const int64_t T = pairs[pi][0], C = pairs[pi][1];
                rt_rng_t r;
                rt_rng_seed_case(&r, "chunked_matches", (int)(pi * 9 + gi * 3 + (size_t)bmode));
                double *q = malloc(sizeof(double) * T * K), *k = malloc(sizeof(double) * T * K);
                double *v = malloc(sizeof(double) * T * V), *b = malloc(sizeof(double) * T);
                double *g = malloc(sizeof(double) * T), s0[15], o1[129 * 3], o2[129 * 3], s1[15], s2[15];
                fill(&r, q, T * K, -1, 1), fill(&r, k, T * K, -0.5, 0.5), fill(&r, v, T * V, -1, 1);
                fill(&r, s0, K * V, -1, 1);
                for (int64_t t = 0; t < T; t++) {
                    b[t] = bmode == 0 ? 0.0 : bmode == 1 ? 1.0 : rt_rng_uniform(&r, 0, 1);
                    g[t] = gates[gi] * rt_rng_uniform(&r, 0.5, 1.5);
                }
                gdr_ref_recurrent(T, K, V, q, k, v, b, g, s0, 0.7, o1, s1);
                assert_int_equal(gdr_ref_chunked(T, K, V, C, q, k, v, b, g, s0, 0.7, o2, s2), 0);
                double scale = 1.0, err = 0.0;
                for (int64_t i = 0; i < T * V; i++)
                    scale = fmax(scale, fabs(o1[i])), err = fmax(err, fabs(o1[i] - o2[i]));
                for (int64_t i = 0; i < K * V; i++)
                    err = fmax(err, fabs(s1[i] - s2[i]));
                if (err > 1e-12 * scale)
                    fail_msg("T %lld C %lld gate %g beta mode %d: chunked differs by %g", (long long)T, (long long)C,
                             gates[gi], bmode, err);
                free(q), free(k), free(v), free(b), free(g);
            }
}

/* beta 0: the state only decays; two calls passing the state equal one run */
static void split_equals_whole(void **state)
{
    (void)state;
    const int64_t T = 40, K = 4, V = 6, cut = 17;
    rt_rng_t r;
    rt_rng_seed(&r, 99);
    double q[40 * 4], k[40 * 4], v[40 * 6], b[40], g[40], s0[24], o1[40 * 6], o2[40 * 6], s1[24], mid[24], s2[24];
    fill(&r, q, T * K, -1, 1), fill(&r, k, T * K, -0.5, 0.5), fill(&r, v, T * V, -1, 1), fill(&r, s0, 24, -1, 1);
    fill(&r, b, T, 0, 1), fill(&r, g, T, -0.2, 0);
    gdr_ref_recurrent(T, K, V, q, k, v, b, g, s0, 1.0, o1, s1);
    gdr_ref_chunked(cut, K, V, 8, q, k, v, b, g, s0, 1.0, o2, mid);
    gdr_ref_recurrent(T - cut, K, V, q + cut * K, k + cut * K, v + cut * V, b + cut, g + cut, mid, 1.0,
                      o2 + cut * V, s2);
    for (int64_t i = 0; i < T * V; i++)
        assert_true(fabs(o1[i] - o2[i]) < 1e-12);
    for (int64_t i = 0; i < K * V; i++)
        assert_true(fabs(s1[i] - s2[i]) < 1e-12);
    double zb[40] = {0}, d = log(0.9), gd[40];
    for (int i = 0; i < 40; i++)
        gd[i] = d;
    gdr_ref_recurrent(T, K, V, q, k, v, zb, gd, s0, 1.0, o1, s1);
    for (int64_t i = 0; i < K * V; i++)
        assert_true(fabs(s1[i] - s0[i] * pow(0.9, 40)) < 1e-12);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hand_one),        cmocka_unit_test(hand_two),           cmocka_unit_test(overwrite),
        cmocka_unit_test(chunked_matches), cmocka_unit_test(split_equals_whole),
    };
    rt_set_filters(argc, argv);
    return rt_exit_code(cmocka_run_group_tests_name("gated-delta-ref", tests, NULL, NULL));
}
