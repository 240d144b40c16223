/* The FP64 gated-delta reference (tests/reference/gated_delta_ref.c) on its own, no backend needed:
 * the recurrence against cases worked by hand, its chunked WY form against the recurrence (the
 * issue's (T, chunk) pairs, log_decay 0 and -20, beta 0 and 1, random inputs: within 1e-12 of the
 * output's and the state's scale, max |x| floored at 1), state passing (a sequence split in two
 * calls equals one run), and the whole-problem helpers (fixed length, varlen with pools) against
 * per-(sequence, head) calls.
 *
 * Usage: test_gated_delta_ref [glob] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "reference/gated_delta_ref.h"

/* Hand-worked cases are exact up to the rounding of exp(log 0.5) and a few sums. */
#define HAND_TOL 1e-14
/* chunked vs recurrent: two FP64 orders of the same sums */
#define FORM_TOL 1e-12

static void expect_near(const char *what, const double *got, const double *want, int64_t n, double tol)
{
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol))
            fail_msg("%s[%lld] = %.17g, expected %.17g", what, (long long)i, got[i], want[i]);
}

/* Runs a hand case through the recurrence and through the chunked form with chunks of 1, 2 and 3
 * tokens, expecting out and s1 each time. */
static void hand_case(int64_t T, int64_t K, int64_t V, const double *q, const double *k, const double *v,
                      const double *beta, const double *ld, const double *s0, double scale, const double *want_out,
                      const double *want_s)
{
    double out[8], s1[8];
    gdr_ref_recurrent(T, K, V, q, k, v, beta, ld, s0, scale, out, s1);
    expect_near("recurrent out", out, want_out, T * V, HAND_TOL);
    expect_near("recurrent state", s1, want_s, K * V, HAND_TOL);
    for (int64_t c = 1; c <= 3; c++) {
        memset(out, 0, sizeof out), memset(s1, 0, sizeof s1);
        assert_int_equal(gdr_ref_chunked(T, K, V, c, q, k, v, beta, ld, s0, scale, out, s1), 0);
        expect_near("chunked out", out, want_out, T * V, HAND_TOL);
        expect_near("chunked state", s1, want_s, K * V, HAND_TOL);
    }
}

/* T 1, K = V = 1. S0 = 2, log_decay ln 0.5: S = 1. k 1, v 3, beta 0.5: S^T k = 1,
 * delta = 0.5 (3 - 1) = 1, S = 1 + 1 * 1 = 2. q 4, scale 0.5: o = 0.5 * 2 * 4 = 4. */
static void hand_t1_k1(void **state)
{
    (void)state;
    const double q = 4, k = 1, v = 3, beta = 0.5, ld = log(0.5), s0 = 2, out = 4, s1 = 2;
    hand_case(1, 1, 1, &q, &k, &v, &beta, &ld, &s0, 0.5, &out, &s1);
}

/* T 2, K = V = 1, scale 1, S0 = 1.
 * t0: log_decay 0: S = 1. k 2, v 4, beta 0.5: S^T k = 2, delta = 0.5 (4 - 2) = 1, S = 1 + 2 * 1 = 3;
 *     q 1: o = 3.
 * t1: log_decay ln 0.5: S = 1.5. k 1, v -1, beta 1: S^T k = 1.5, delta = -1 - 1.5 = -2.5,
 *     S = 1.5 - 2.5 = -1; q 2: o = -2. */
static void hand_t2_k1(void **state)
{
    (void)state;
    const double q[2] = {1, 2}, k[2] = {2, 1}, v[2] = {4, -1}, beta[2] = {0.5, 1}, ld[2] = {0, log(0.5)};
    const double s0 = 1, out[2] = {3, -2}, s1 = -1;
    hand_case(2, 1, 1, q, k, v, beta, ld, &s0, 1.0, out, &s1);
}

/* T 2, K 2, V 1, scale 1, S0 = 0, no decay, beta 1.
 * t0: k = (1, 0), v 5: S^T k = 0, delta 5, S = (5, 0); q = (1, 1): o = 5.
 * t1: k = (0, 1), v 7: S^T k = 0, delta 7, S = (5, 7); q = (1, 2): o = 5 + 14 = 19. */
static void hand_t2_k2_v1(void **state)
{
    (void)state;
    const double q[4] = {1, 1, 1, 2}, k[4] = {1, 0, 0, 1}, v[2] = {5, 7}, beta[2] = {1, 1}, ld[2] = {0, 0};
    const double s0[2] = {0, 0}, out[2] = {5, 19}, s1[2] = {5, 7};
    hand_case(2, 2, 1, q, k, v, beta, ld, s0, 1.0, out, s1);
}

/* T 2, K = V = 2, scale 0.5, S0 = [[1, 0], [0, 2]] (S[r][c], r along K, c along V).
 * t0: log_decay ln 0.5: S = [[0.5, 0], [0, 1]]. k = (1, 1), v = (1, 3), beta 0.5:
 *     S^T k = (0.5 + 0, 0 + 1) = (0.5, 1); delta = 0.5 ((1, 3) - (0.5, 1)) = (0.25, 1);
 *     S += k delta^T: each row gains (0.25, 1): S = [[0.75, 1], [0.25, 2]].
 *     q = (2, 0): S^T q = (1.5, 2), o = 0.5 (1.5, 2) = (0.75, 1).
 * t1: log_decay 0. k = (0, 1), v = (-1, 0), beta 1: S^T k = row 1 = (0.25, 2);
 *     delta = (-1.25, -2); row 1 gains delta: S = [[0.75, 1], [-1, 0]] (row 1 is now v: the
 *     overwrite of a unit k with beta 1). q = (1, -1): S^T q = (0.75 + 1, 1 - 0) = (1.75, 1),
 *     o = (0.875, 0.5). */
static void hand_t2_k2_v2(void **state)
{
    (void)state;
    const double q[4] = {2, 0, 1, -1}, k[4] = {1, 1, 0, 1}, v[4] = {1, 3, -1, 0}, beta[2] = {0.5, 1};
    const double ld[2] = {log(0.5), 0}, s0[4] = {1, 0, 0, 2};
    const double out[4] = {0.75, 1, 0.875, 0.5}, s1[4] = {0.75, 1, -1, 0};
    hand_case(2, 2, 2, q, k, v, beta, ld, s0, 0.5, out, s1);
}

/* T 1, K 2, V 3, beta 1, unit k = e_1, no decay: row 1 of S becomes v, row 0 stays; q = k reads v. */
static void hand_overwrite(void **state)
{
    (void)state;
    const double q[2] = {0, 1}, k[2] = {0, 1}, v[3] = {1, -2, 3}, beta = 1, ld = 0;
    const double s0[6] = {9, 8, 7, 6, 5, 4}, out[3] = {1, -2, 3}, s1[6] = {9, 8, 7, 1, -2, 3};
    hand_case(1, 2, 3, q, k, v, &beta, &ld, s0, 1.0, out, s1);
}

/* T 0: the state passes unchanged and nothing is written to out. */
static void empty(void **state)
{
    (void)state;
    const double s0[6] = {1, 2, 3, 4, 5, 6}, dummy = 0;
    double out = 12345, s1[6];
    gdr_ref_recurrent(0, 2, 3, &dummy, &dummy, &dummy, &dummy, &dummy, s0, 1.0, &out, s1);
    expect_near("T 0 state", s1, s0, 6, 0);
    memset(s1, 0, sizeof s1);
    assert_int_equal(gdr_ref_chunked(0, 2, 3, 4, &dummy, &dummy, &dummy, &dummy, &dummy, s0, 1.0, &out, s1), 0);
    expect_near("T 0 chunked state", s1, s0, 6, 0);
    assert_true(out == 12345);
    assert_int_equal(gdr_ref_chunked(1, 2, 3, 0, &dummy, &dummy, &dummy, &dummy, &dummy, s0, 1.0, &out, s1), -1);
}

/* ---- random problems --------------------------------------------------------------------------- */

typedef struct prob {
    int64_t T, K, V;
    double *q, *k, *v, *beta, *ld, *s0;
} prob_t;

enum { GATE_ZERO, GATE_MINUS20, GATE_MILD, GATE_MIXED, GATE_MODES };
static const char *const gate_names[GATE_MODES] = {"0", "-20", "mild", "mixed"};
enum { BETA_ZERO, BETA_ONE, BETA_RANDOM, BETA_MODES };

/* q, v, s0 uniform in (-1, 1); k in (-1, 1) / sqrt(K); log_decay per gate mode (mild: U(-0.5, 0),
 * mixed: mild with one token in four at -20); beta per beta mode. */
static void make_prob(prob_t *p, int64_t T, int64_t K, int64_t V, int gate, int bmode, rt_rng_t *r)
{
    p->T = T, p->K = K, p->V = V;
    p->q = rt_xmalloc(sizeof(double) * (size_t)(T * K)), p->k = rt_xmalloc(sizeof(double) * (size_t)(T * K));
    p->v = rt_xmalloc(sizeof(double) * (size_t)(T * V));
    p->beta = rt_xmalloc(sizeof(double) * (size_t)T), p->ld = rt_xmalloc(sizeof(double) * (size_t)T);
    p->s0 = rt_xmalloc(sizeof(double) * (size_t)(K * V));
    const double ks = 1.0 / sqrt((double)K);
    for (int64_t i = 0; i < T * K; i++)
        p->q[i] = rt_rng_uniform(r, -1, 1), p->k[i] = ks * rt_rng_uniform(r, -1, 1);
    for (int64_t i = 0; i < T * V; i++)
        p->v[i] = rt_rng_uniform(r, -1, 1);
    for (int64_t i = 0; i < K * V; i++)
        p->s0[i] = rt_rng_uniform(r, -1, 1);
    for (int64_t t = 0; t < T; t++) {
        p->beta[t] = bmode == BETA_ZERO ? 0.0 : bmode == BETA_ONE ? 1.0 : rt_rng_uniform(r, 0, 1);
        const double mild = rt_rng_uniform(r, -0.5, 0);
        p->ld[t] = gate == GATE_ZERO      ? 0.0
                   : gate == GATE_MINUS20 ? -20.0
                   : gate == GATE_MILD    ? mild
                   : rt_rng_below(r, 4) == 0 ? -20.0
                                           : mild;
    }
}

static void free_prob(prob_t *p)
{
    free(p->q), free(p->k), free(p->v), free(p->beta), free(p->ld), free(p->s0);
}

static double max_abs_floor1(const double *x, int64_t n)
{
    double m = 1.0;
    for (int64_t i = 0; i < n; i++)
        m = fmax(m, fabs(x[i]));
    return m;
}

/* max |a - b| / scale of b (scale: max |b| floored at 1) */
static double rel_err(const double *a, const double *b, int64_t n)
{
    const double scale = max_abs_floor1(b, n);
    double e = 0.0;
    for (int64_t i = 0; i < n; i++)
        e = fmax(e, fabs(a[i] - b[i]));
    return e / scale;
}

/* chunked == recurrent for the (T, chunk) pairs, every gate and beta mode, two shapes */
static void chunked_matches_recurrent(void **state)
{
    (void)state;
    static const int64_t pairs[][2] = {{1, 1}, {3, 4}, {7, 3}, {67, 33}, {64, 64}, {65, 64}, {129, 64}};
    static const int64_t shapes[][2] = {{5, 3}, {16, 8}, {1, 2}};
    rt_log_t *log = rt_log_new();
    int n = 0;
    for (size_t pi = 0; pi < sizeof pairs / sizeof pairs[0]; pi++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int gate = 0; gate < GATE_MODES; gate++)
                for (int bmode = 0; bmode < BETA_MODES; bmode++, n++) {
                    const int64_t T = pairs[pi][0], C = pairs[pi][1], K = shapes[si][0], V = shapes[si][1];
                    rt_rng_t r;
                    rt_rng_seed_case(&r, "chunked_matches_recurrent", n);
                    prob_t p;
                    make_prob(&p, T, K, V, gate, bmode, &r);
                    double *o1 = rt_xmalloc(sizeof(double) * (size_t)(T * V));
                    double *o2 = rt_xmalloc(sizeof(double) * (size_t)(T * V));
                    double *s1 = rt_xmalloc(sizeof(double) * (size_t)(K * V));
                    double *s2 = rt_xmalloc(sizeof(double) * (size_t)(K * V));
                    gdr_ref_recurrent(T, K, V, p.q, p.k, p.v, p.beta, p.ld, p.s0, 0.7, o1, s1);
                    assert_int_equal(gdr_ref_chunked(T, K, V, C, p.q, p.k, p.v, p.beta, p.ld, p.s0, 0.7, o2, s2), 0);
                    const double eo = rel_err(o2, o1, T * V), es = rel_err(s2, s1, K * V);
                    if (!(eo <= FORM_TOL && es <= FORM_TOL))
                        rt_logf(log, "T %lld C %lld K %lld V %lld gate %s beta mode %d: chunked differs by %.3g "
                                "(output) %.3g (state) of the scale\n", (long long)T, (long long)C, (long long)K,
                                (long long)V, gate_names[gate], bmode, eo, es);
                    /* beta 0: the state only decays, S1 = exp(sum log_decay) S0 */
                    if (bmode == BETA_ZERO) {
                        double sum = 0.0;
                        for (int64_t t = 0; t < T; t++)
                            sum += p.ld[t];
                        for (int64_t i = 0; i < K * V; i++)
                            if (!(fabs(s1[i] - exp(sum) * p.s0[i]) <= FORM_TOL))
                                rt_logf(log, "T %lld gate %s beta 0: state[%lld] = %.17g, expected the decayed "
                                        "%.17g\n", (long long)T, gate_names[gate], (long long)i, s1[i],
                                        exp(sum) * p.s0[i]);
                    }
                    free(o1), free(o2), free(s1), free(s2);
                    free_prob(&p);
                }
    rt_log_finish_free(log, "cases");
}

/* beta 1 with unit keys: each token overwrites the row of its key (S^T e_j = v_t) and decays the
 * others, in both forms; q = k reads back v_t. */
static void unit_key_overwrite(void **state)
{
    (void)state;
    const int64_t T = 40, K = 6, V = 5;
    rt_rng_t r;
    rt_rng_seed(&r, 7);
    prob_t p;
    make_prob(&p, T, K, V, GATE_MILD, BETA_ONE, &r);
    int64_t dir[40];
    for (int64_t t = 0; t < T; t++) {
        dir[t] = (int64_t)rt_rng_below(&r, (uint64_t)K);
        for (int64_t i = 0; i < K; i++)
            p.k[t * K + i] = p.q[t * K + i] = i == dir[t] ? 1.0 : 0.0;
    }
    double o[40 * 5], s[6 * 5], prev[6 * 5];
    for (int form = 0; form < 2; form++) {
        memcpy(prev, p.s0, sizeof prev);
        for (int64_t t = 0; t < T; t++) { /* token by token, so each step's state can be checked */
            if (form == 0)
                gdr_ref_recurrent(1, K, V, p.q + t * K, p.k + t * K, p.v + t * V, p.beta + t, p.ld + t, prev, 1.0,
                                  o + t * V, s);
            else
                assert_int_equal(gdr_ref_chunked(1, K, V, 3, p.q + t * K, p.k + t * K, p.v + t * V, p.beta + t,
                                                 p.ld + t, prev, 1.0, o + t * V, s),
                                 0);
            const double g = exp(p.ld[t]);
            for (int64_t rr = 0; rr < K; rr++)
                for (int64_t c = 0; c < V; c++) {
                    const double want = rr == dir[t] ? p.v[t * V + c] : g * prev[rr * V + c];
                    if (!(fabs(s[rr * V + c] - want) <= HAND_TOL))
                        fail_msg("form %d token %lld: S[%lld][%lld] = %.17g, expected %.17g", form, (long long)t,
                                 (long long)rr, (long long)c, s[rr * V + c], want);
                }
            expect_near("overwrite output", o + t * V, p.v + t * V, V, HAND_TOL);
            memcpy(prev, s, sizeof prev);
        }
        /* the whole sequence in one call ends in the same state */
        double whole[6 * 5], ow[40 * 5];
        if (form == 0)
            gdr_ref_recurrent(T, K, V, p.q, p.k, p.v, p.beta, p.ld, p.s0, 1.0, ow, whole);
        else
            assert_int_equal(gdr_ref_chunked(T, K, V, 16, p.q, p.k, p.v, p.beta, p.ld, p.s0, 1.0, ow, whole), 0);
        expect_near("overwrite whole state", whole, s, K * V, FORM_TOL);
        expect_near("overwrite whole output", ow, o, T * V, FORM_TOL);
    }
    free_prob(&p);
}

/* A sequence split in two calls (the state passed) equals one run, for every pair of forms and
 * cuts inside and at the edges of chunks. */
static void split_equals_whole(void **state)
{
    (void)state;
    const int64_t T = 70, K = 4, V = 6, C = 8;
    static const int64_t cuts[] = {0, 1, 8, 17, 64, 69, 70};
    rt_rng_t r;
    rt_rng_seed(&r, 99);
    prob_t p;
    make_prob(&p, T, K, V, GATE_MIXED, BETA_RANDOM, &r);
    double whole_o[70 * 6], whole_s[4 * 6], o[70 * 6], mid[4 * 6], s[4 * 6];
    gdr_ref_recurrent(T, K, V, p.q, p.k, p.v, p.beta, p.ld, p.s0, 0.4, whole_o, whole_s);
    for (size_t ci = 0; ci < sizeof cuts / sizeof cuts[0]; ci++)
        for (int first = 0; first < 2; first++)
            for (int second = 0; second < 2; second++) {
                const int64_t a = cuts[ci], b = T - a;
                const int64_t c1 = first ? C : 0, c2 = second ? C : 0;
                /* chunk 0 is rejected by gdr_ref_chunked: pick the form explicitly */
                if (c1)
                    assert_int_equal(gdr_ref_chunked(a, K, V, c1, p.q, p.k, p.v, p.beta, p.ld, p.s0, 0.4, o, mid), 0);
                else
                    gdr_ref_recurrent(a, K, V, p.q, p.k, p.v, p.beta, p.ld, p.s0, 0.4, o, mid);
                if (c2)
                    assert_int_equal(gdr_ref_chunked(b, K, V, c2, p.q + a * K, p.k + a * K, p.v + a * V, p.beta + a,
                                                     p.ld + a, mid, 0.4, o + a * V, s),
                                     0);
                else
                    gdr_ref_recurrent(b, K, V, p.q + a * K, p.k + a * K, p.v + a * V, p.beta + a, p.ld + a, mid, 0.4,
                                      o + a * V, mid); /* in place */
                const double *fin = c2 ? s : mid;
                if (!(rel_err(o, whole_o, T * V) <= FORM_TOL && rel_err(fin, whole_s, K * V) <= FORM_TOL))
                    fail_msg("cut at %lld (%s then %s) differs from one run", (long long)a,
                             first ? "chunked" : "recurrent", second ? "chunked" : "recurrent");
            }
    free_prob(&p);
}

/* gdr_ref_fixed over [B][H][T][*] equals per-(b, h) calls */
static void fixed_problem(void **state)
{
    (void)state;
    const int64_t B = 2, H = 3, T = 9, K = 3, V = 4, BH = B * H;
    rt_rng_t r;
    rt_rng_seed(&r, 5);
    prob_t p; /* BH sequences back to back are [B][H][T][*] */
    make_prob(&p, BH * T, K, V, GATE_MILD, BETA_RANDOM, &r);
    double s0[6 * 12], o[6 * 9 * 4], s[6 * 12], ro[9 * 4], rs[12];
    for (int64_t i = 0; i < BH * K * V; i++)
        s0[i] = rt_rng_uniform(&r, -1, 1);
    for (int64_t chunk = 0; chunk <= 4; chunk += 4) {
        assert_int_equal(gdr_ref_fixed(B, H, T, K, V, chunk, p.q, p.k, p.v, p.beta, p.ld, s0, 0.3, o, s), 0);
        for (int64_t bh = 0; bh < BH; bh++) {
            gdr_ref_recurrent(T, K, V, p.q + bh * T * K, p.k + bh * T * K, p.v + bh * T * V, p.beta + bh * T,
                              p.ld + bh * T, s0 + bh * K * V, 0.3, ro, rs);
            expect_near("fixed output", o + bh * T * V, ro, T * V, FORM_TOL);
            expect_near("fixed state", s + bh * K * V, rs, K * V, FORM_TOL);
        }
    }
    free_prob(&p);
}

/* gdr_ref_varlen: lengths 3, 0, 1, 6 packed along T = 12 (2 tokens past cu[4]), H 2, pools of 5
 * rows in and 6 out, shuffled rows. Each sequence equals its own call; rows no sequence names and
 * the tail tokens keep their sentinel; the chunked form agrees. */
static void varlen_problem(void **state)
{
    (void)state;
    enum { H = 2, T = 12, K = 3, V = 2, N = 4, PIN = 5, POUT = 6 };
    const int64_t cu[N + 1] = {0, 3, 3, 4, 10};
    const int32_t idx[N] = {4, 0, 2, 1};
    rt_rng_t r;
    rt_rng_seed(&r, 11);
    prob_t p; /* H runs of T tokens: [H][T][*] */
    make_prob(&p, H * T, K, V, GATE_MIXED, BETA_RANDOM, &r);
    double s0[PIN * H * K * V];
    for (int i = 0; i < PIN * H * K * V; i++)
        s0[i] = rt_rng_uniform(&r, -1, 1);
    const double sentinel = -777.0;
    double o[2][H * T * V], s[2][POUT * H * K * V];
    for (int form = 0; form < 2; form++) {
        for (int i = 0; i < H * T * V; i++)
            o[form][i] = sentinel;
        for (int i = 0; i < POUT * H * K * V; i++)
            s[form][i] = sentinel;
        assert_int_equal(gdr_ref_varlen(H, T, K, V, form ? 4 : 0, N, cu, idx, p.q, p.k, p.v, p.beta, p.ld, s0, 0.6,
                                        o[form], s[form]),
                         0);
        for (int i = 0; i < N; i++)
            for (int64_t h = 0; h < H; h++) {
                const int64_t tok = h * T + cu[i], len = cu[i + 1] - cu[i];
                double ro[10 * V], rs[K * V];
                gdr_ref_recurrent(len, K, V, p.q + tok * K, p.k + tok * K, p.v + tok * V, p.beta + tok, p.ld + tok,
                                  s0 + (idx[i] * H + h) * K * V, 0.6, ro, rs);
                expect_near("varlen output", o[form] + tok * V, ro, len * V, FORM_TOL);
                expect_near("varlen state", s[form] + (idx[i] * H + h) * K * V, rs, K * V, FORM_TOL);
            }
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = cu[N]; t < T; t++)
                for (int64_t c = 0; c < V; c++)
                    if (o[form][(h * T + t) * V + c] != sentinel)
                        fail_msg("varlen: output token %lld of head %lld past cu_seqlens[N] written", (long long)t,
                                 (long long)h);
        for (int row = 0; row < POUT; row++) {
            int named = 0;
            for (int i = 0; i < N; i++)
                named |= idx[i] == row;
            for (int e = 0; e < H * K * V && !named; e++)
                if (s[form][row * H * K * V + e] != sentinel)
                    fail_msg("varlen: final-state row %d written, no sequence names it", row);
        }
    }
    /* a length-0 sequence copies its row; NULL indices mean row i */
    expect_near("varlen empty sequence", s[0] + 0 * H * K * V, s0 + 0 * H * K * V, H * K * V, 0);
    double o3[H * T * V], s3[POUT * H * K * V];
    assert_int_equal(gdr_ref_varlen(H, T, K, V, 0, N, cu, NULL, p.q, p.k, p.v, p.beta, p.ld, s0, 0.6, o3, s3), 0);
    expect_near("varlen NULL indices: sequence 1 (empty) copies row 1", s3 + 1 * H * K * V, s0 + 1 * H * K * V,
                H * K * V, 0);
    free_prob(&p);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hand_t1_k1),
        cmocka_unit_test(hand_t2_k1),
        cmocka_unit_test(hand_t2_k2_v1),
        cmocka_unit_test(hand_t2_k2_v2),
        cmocka_unit_test(hand_overwrite),
        cmocka_unit_test(empty),
        cmocka_unit_test(chunked_matches_recurrent),
        cmocka_unit_test(unit_key_overwrite),
        cmocka_unit_test(split_equals_whole),
        cmocka_unit_test(fixed_problem),
        cmocka_unit_test(varlen_problem),
    };
    rt_set_filters(argc, argv);
    return rt_exit_code(cmocka_run_group_tests_name("gated-delta-ref", tests, NULL, NULL));
}
