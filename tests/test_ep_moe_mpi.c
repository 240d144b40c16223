/* Expert-parallel MoE end to end (include/rudnn/ep.h with include/rudnn/moe.h) under
 * mpirun -np N (2..8): rudnn_ep_dispatch, rudnn's SwiGLU experts on the received rows, then
 * rudnn_ep_combine_add_rms_norm, equals the single-device MoE forward of the same tokens.
 *
 * Every rank generates every rank's tokens and logits and all E = L W expert weights from the
 * case's seed. It routes its own BS tokens once (rudnn_moe_route: softmax top-K), and both paths
 * use that plan's ids and weights:
 *   - single device: rudnn_moe_dispatch -> rudnn_swiglu_experts_forward_dispatched over all E
 *     experts -> rudnn_moe_combine: out [BS, H];
 *   - EP: rudnn_ep_dispatch (expert_token_nums as counts, or as running totals in the cases so
 *     marked) -> rudnn_swiglu_experts_forward_grouped of the L local experts (weights [L, ...] of
 *     experts r L .. r L + L - 1, views of the same buffers) on expand_x [A, H] with the
 *     dispatch's expert_token_nums, into an expert output [A, H] whose rows past the received
 *     ones stay poisoned -> rudnn_ep_combine_add_rms_norm (scales = the routing weights,
 *     residual 0, gamma 1).
 * Checks: x (EP) against out (single device); both against the FP64 reference of
 * tests/reference/moe_ref.h; y and rstd (EP) against the reference loosely.
 * Every check's pass/fail is agreed over MPI_COMM_WORLD, as in test_ep_mpi.c. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#include <unistd.h>

#include "common.h"
#include "reference/moe_ref.h"
#include <rudnn/ep.h>
#include <rudnn/moe.h>

#define COMM_BYTES ((size_t)16 << 20)
#define H 1024 /* the EP ops' minimum hidden size */
#define EPS 1e-6f
#define NEVER (-1e4f) /* a logit that never wins (exp underflows to 0 in FP32) */

static int world_rank, world_size;
static rudnn_comm_t comm;
static rt_log_t *g_log;
static int g_body_done;

#define FAILF(...)                                                                                 \
    do {                                                                                           \
        rt_logf(g_log, "rank %d: ", world_rank);                                                   \
        rt_logf(g_log, __VA_ARGS__);                                                               \
        g_log->failures++;                                                                         \
    } while (0)

/* Watchdog (as test_ep_mpi.c): an op left waiting for its peers aborts the job. */
#define WATCHDOG_S 180
static char g_watch_text[256];
static void watchdog_fired(int sig)
{
    (void)sig;
    ssize_t n = write(2, g_watch_text, strlen(g_watch_text));
    (void)n;
    MPI_Abort(MPI_COMM_WORLD, 1);
}
static void watch(const char *test, const char *op)
{
    snprintf(g_watch_text, sizeof g_watch_text, "rank %d: %s: %s did not return within %d s (hang); aborting\n",
             world_rank, test, op, WATCHDOG_S);
    signal(SIGALRM, watchdog_fired);
    alarm(WATCHDOG_S);
}

/* 1 when every rank is ok (collective). */
static int all_ok(int ok)
{
    int v = ok ? 1 : 0, all = 0;
    MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

typedef enum { ROUTE_RANDOM, ROUTE_EMPTY_EXPERTS, ROUTE_EMPTY_RANK } route_kind_t;

typedef struct moe_case {
    const char *name;
    rudnn_dtype_t dtype;
    int L;          /* local experts per rank: E = L W */
    int64_t I, bs;  /* intermediate size, tokens per rank */
    int K, renorm;  /* top-k, renormalize the selected weights */
    route_kind_t route; /* EMPTY_EXPERTS: experts 1 and L get no token; EMPTY_RANK: the last rank's */
    int totals;         /* expert_token_nums as running totals (expert_token_nums_type 0), else counts */
} moe_case_t;

static double unit_roundoff(rudnn_dtype_t dt)
{
    return dt == RUDNN_BF16 ? 0x1p-8 : dt == RUDNN_F16 ? 0x1p-11 : 0x1p-24;
}

static float *rnd_array(rt_rng_t *rng, rudnn_dtype_t dt, size_t n, double lo, double hi)
{
    float *a = rt_xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        a[i] = ref_round(dt, (float)rt_rng_uniform(rng, lo, hi));
    return a;
}

static void mk(rt_tensor_t *t, rudnn_dtype_t dt, int rank, const int64_t *dims, const float *host)
{
    rt_tensor_create(t, dt, rank, dims, 0, RT_TAIL_BYTES);
    if (host)
        rt_tensor_upload(t, host);
}

static void view(rudnn_tensor_t *t, rudnn_buffer_t b, size_t offset, rudnn_dtype_t dt, int rank, const int64_t *dims)
{
    rt_assert_status(rudnn_tensor_init(t, b, offset, dt, rank, dims), RUDNN_STATUS_SUCCESS);
}

static void read_raw(const rudnn_tensor_t *t, void *host)
{
    rt_assert_status(rudnn_tensor_read(rt_queue, t, host, rudnn_tensor_bytes(t)), RUDNN_STATUS_SUCCESS);
}

/* The experts whose logits are all NEVER in a case. */
static int never_routed(const moe_case_t *c, int64_t e, int L, int W)
{
    return (c->route == ROUTE_EMPTY_EXPERTS && (e == 1 || e == L)) || (c->route == ROUTE_EMPTY_RANK && e / L == W - 1);
}

#define TRYF(call, what)                                                                           \
    do {                                                                                           \
        rudnn_status_t st_ = (call);                                                               \
        if (st_ != RUDNN_STATUS_SUCCESS) {                                                         \
            FAILF("%s: %s: %s\n", what, rudnn_status_string(st_), rudnn_last_error());             \
            ok = 0;                                                                                \
        }                                                                                          \
    } while (0)

static void test_case(void **state)
{
    const moe_case_t *c = *state;
    const rudnn_dtype_t dt = c->dtype;
    const int W = world_size, L = c->L, K = c->K, me = world_rank;
    const int64_t E = (int64_t)L * W, I = c->I, BS = c->bs, A = BS * W * (L < K ? L : K);
    const size_t es = rudnn_dtype_size(dt);
    const double u = unit_roundoff(dt);

    /* ---- inputs: every rank's tokens and logits, all weights (same on every rank) ---- */
    rt_rng_t rng;
    rt_rng_seed_case(&rng, c->name, W);
    float *gate = rnd_array(&rng, dt, (size_t)(E * I * H), -0.1, 0.1);
    float *up = rnd_array(&rng, dt, (size_t)(E * I * H), -0.1, 0.1);
    float *down = rnd_array(&rng, dt, (size_t)(E * H * I), -0.2, 0.2);
    float *x_all = rnd_array(&rng, dt, (size_t)(W * BS * H), -1.0, 1.0);
    float *lg_all = rnd_array(&rng, dt, (size_t)(W * BS * E), -2.0, 2.0);
    for (int64_t i = 0; i < W * BS * E; i++)
        if (never_routed(c, i % E, L, W))
            lg_all[i] = ref_round(dt, NEVER);
    const float *x = x_all + me * BS * H, *logits = lg_all + me * BS * E; /* this rank's tokens */

    int ok = 1;
    rt_tensor_t gate_t, up_t, down_t, x_t, lg_t, eo_all, out1, ids_t, expand, assist, etn, erc, eout, scales,
        resid, gamma_t, y_t, rstd_t, xo_t;
    mk(&gate_t, dt, 3, (int64_t[]){E, I, H}, gate);
    mk(&up_t, dt, 3, (int64_t[]){E, I, H}, up);
    mk(&down_t, dt, 3, (int64_t[]){E, H, I}, down);
    mk(&x_t, dt, 2, (int64_t[]){BS, H}, x);
    mk(&lg_t, dt, 2, (int64_t[]){BS, E}, logits);
    rudnn_swiglu_experts_t ex_all = NULL, ex_loc = NULL;
    rt_assert_status(rudnn_swiglu_experts_create(rt_ctx, &gate_t.t, &up_t.t, &down_t.t, &ex_all),
                     RUDNN_STATUS_SUCCESS);
    rudnn_tensor_t lgate, lup, ldown; /* this rank's experts me L .. me L + L - 1 */
    size_t lofs = (size_t)me * (size_t)(L * I * H) * es;
    view(&lgate, gate_t.buffer, lofs, dt, 3, (int64_t[]){L, I, H});
    view(&lup, up_t.buffer, lofs, dt, 3, (int64_t[]){L, I, H});
    view(&ldown, down_t.buffer, lofs, dt, 3, (int64_t[]){L, H, I});
    rt_assert_status(rudnn_swiglu_experts_create(rt_ctx, &lgate, &lup, &ldown, &ex_loc), RUDNN_STATUS_SUCCESS);

    /* ---- routing (once: both paths use these ids and weights) ---- */
    rudnn_routing_plan_t plan = NULL;
    rt_assert_status(rudnn_moe_route(rt_queue, &lg_t.t, &(rudnn_routing_options_t){K, c->renorm}, &plan),
                     RUDNN_STATUS_SUCCESS);
    rudnn_tensor_t pi, pw;
    rt_assert_status(rudnn_routing_plan_indices(plan, &pi), RUDNN_STATUS_SUCCESS);
    rt_assert_status(rudnn_routing_plan_weights(plan, &pw), RUDNN_STATUS_SUCCESS);
    uint32_t *idx = rt_xmalloc((size_t)(BS * K) * 4);
    uint8_t *wraw = rt_xmalloc((size_t)(BS * K) * es);
    read_raw(&pi, idx);
    read_raw(&pw, wraw);
    float *w = rt_xmalloc((size_t)(BS * K) * sizeof(float));
    int32_t *ids = rt_xmalloc((size_t)(BS * K) * sizeof(int32_t));
    for (int64_t i = 0; i < BS * K; i++) {
        w[i] = rt_element_value(dt, wraw, (size_t)i);
        ids[i] = (int32_t)idx[i];
        if (idx[i] >= (uint32_t)E || !isfinite(w[i]))
            FAILF("routing (token %lld, slot %lld): expert %u, weight %g\n", (long long)(i / K), (long long)(i % K),
                  idx[i], (double)w[i]);
        else if (never_routed(c, idx[i], L, W))
            FAILF("routing chose expert %u, whose logits are all %g\n", idx[i], (double)NEVER);
    }

    /* ---- single device: dispatch -> all E experts -> combine ---- */
    rudnn_dispatched_t disp = NULL;
    mk(&eo_all, dt, 2, (int64_t[]){BS * K, H}, NULL);
    mk(&out1, dt, 2, (int64_t[]){BS, H}, NULL);
    TRYF(rudnn_moe_dispatch(rt_queue, plan, &x_t.t, &disp), "single device: rudnn_moe_dispatch");
    if (ok)
        TRYF(rudnn_swiglu_experts_forward_dispatched(rt_queue, ex_all, disp, RUDNN_MOE_SCALAR, NULL, 0, &eo_all.t),
             "single device: rudnn_swiglu_experts_forward_dispatched");
    if (ok)
        TRYF(rudnn_moe_combine(rt_queue, disp, &eo_all.t, &out1.t), "single device: rudnn_moe_combine");
    float *single = rt_xcalloc((size_t)(BS * H), sizeof(float));
    if (ok)
        rt_tensor_download(&out1, single);

    /* ---- EP tensors ---- */
    float *ones = rt_xmalloc(H * sizeof(float)), *zeros = rt_xcalloc((size_t)(BS * H), sizeof(float));
    for (int h = 0; h < H; h++)
        ones[h] = 1.0f;
    mk(&ids_t, RUDNN_I32, 2, (int64_t[]){BS, K}, NULL);
    rt_assert_status(rudnn_tensor_write(rt_queue, &ids_t.t, ids, (size_t)(BS * K) * 4), RUDNN_STATUS_SUCCESS);
    mk(&expand, dt, 2, (int64_t[]){A, H}, NULL);
    mk(&assist, RUDNN_I32, 2, (int64_t[]){A, 3}, NULL);
    mk(&etn, RUDNN_I64, 1, (int64_t[]){L}, NULL);
    mk(&erc, RUDNN_I32, 1, (int64_t[]){(int64_t)L * W}, NULL);
    mk(&eout, dt, 2, (int64_t[]){A, H}, NULL); /* rows past the received ones stay poisoned */
    mk(&scales, RUDNN_F32, 2, (int64_t[]){BS, K}, w);
    mk(&resid, dt, 3, (int64_t[]){BS, 1, H}, zeros);
    mk(&gamma_t, dt, 1, (int64_t[]){H}, ones);
    mk(&y_t, dt, 3, (int64_t[]){BS, 1, H}, NULL);
    mk(&rstd_t, RUDNN_F32, 3, (int64_t[]){BS, 1, 1}, NULL);
    mk(&xo_t, dt, 3, (int64_t[]){BS, 1, H}, NULL);
    rudnn_ep_params_t params = {.moe_expert_num = E, .expert_token_nums_type = c->totals ? 0 : 1};
    rudnn_ep_dispatch_in_t din = {&x_t.t, &ids_t.t, NULL, NULL};
    rudnn_ep_dispatch_out_t dout = {&expand.t, &assist.t, &etn.t, &erc.t, NULL};
    rudnn_ep_combine_in_t cin = {.expand_x = &eout.t, .expert_ids = &ids_t.t, .assist_info = &assist.t,
                                 .ep_send_counts = &erc.t, .expert_scales = &scales.t, .residual = &resid.t,
                                 .gamma = &gamma_t.t, .norm_eps = EPS};
    rudnn_ep_combine_out_t cout = {&y_t.t, &rstd_t.t, &xo_t.t};

    if (all_ok(ok)) {
        watch(c->name, "rudnn_ep_dispatch");
        TRYF(rudnn_ep_dispatch(rt_queue, comm, &params, &din, &dout), "rudnn_ep_dispatch");
        alarm(0);
    }
    /* ---- the local experts on the received rows (expand_x grouped by local expert) ---- */
    if (all_ok(ok)) {
        int64_t nums[RUDNN_EP_MAX_EXPERTS], rows = 0;
        read_raw(&etn.t, nums);
        for (int e = 0; e < L && ok; e++) {
            int64_t n = c->totals ? nums[e] - (e ? nums[e - 1] : 0) : nums[e];
            if (n < 0 || (rows += n) > A) {
                FAILF("expert_token_nums[%d] = %lld (%s): not a count that fits A = %lld rows\n", e,
                      (long long)nums[e], c->totals ? "running totals" : "counts", (long long)A);
                ok = 0;
            }
        }
        if (ok)
            TRYF(rudnn_swiglu_experts_forward_grouped(rt_queue, ex_loc, &expand.t, &etn.t, c->totals,
                                                      RUDNN_MOE_SCALAR, NULL, 0, &eout.t),
                 "local rudnn_swiglu_experts_forward_grouped");
        if (ok) { /* the received rows written, the rows past them not */
            uint8_t *raw = rt_xmalloc((size_t)(A * H) * es);
            read_raw(&eout.t, raw);
            const uint32_t poison = rt_poison_bits(dt);
            int64_t unwritten = 0, written_past = 0;
            for (int64_t i = 0; i < A * H; i++) {
                int p = rt_element_bits(dt, raw, (size_t)i) == poison;
                unwritten += i < rows * H && p;
                written_past += i >= rows * H && !p;
            }
            if (unwritten || written_past) {
                FAILF("expert output: %lld value(s) of the %lld received rows unwritten, %lld past them written\n",
                      (long long)unwritten, (long long)rows, (long long)written_past);
                ok = 0;
            }
            free(raw);
        }
    }
    rudnn_buffer_t ws = NULL;
    size_t ws_bytes = 0;
    if (all_ok(ok)) {
        TRYF(rudnn_ep_combine_workspace_size(rt_queue, comm, &params, &cin, &cout, &ws_bytes),
             "rudnn_ep_combine_workspace_size");
        if (ok && ws_bytes)
            rt_assert_status(rudnn_buffer_create(rt_ctx, ws_bytes, &ws), RUDNN_STATUS_SUCCESS);
    }
    if (all_ok(ok)) {
        watch(c->name, "rudnn_ep_combine_add_rms_norm");
        TRYF(rudnn_ep_combine_add_rms_norm(rt_queue, comm, &params, &cin, ws, ws_bytes, &cout),
             "rudnn_ep_combine_add_rms_norm");
        alarm(0);
    }

    /* ---- checks ---- */
    double stat[4] = {0, 0, 0, 0}; /* max |x - single| / scale, worst excess: x vs ref, single vs ref, y/rstd */
    if (all_ok(ok)) {
        float *xo = rt_xmalloc((size_t)(BS * H) * sizeof(float)), *y = rt_xmalloc((size_t)(BS * H) * sizeof(float));
        float rstd[RUDNN_EP_MAX_BS];
        rt_tensor_download(&xo_t, xo);
        rt_tensor_download(&y_t, y);
        rt_tensor_download(&rstd_t, rstd);
        /* EP against single device. Both paths run the same expert kernel on the same rows and sum
         * the same K weighted rows in FP32, then round once; they may differ in the FP32 summation
         * order and in one rounding each. F32: 1e-4 of the output scale (max |out|), far above the
         * FP32 sum-order error. F16/BF16: two roundings of the dtype at the output scale, i.e. two
         * ulps = 4 u max|out| (u the unit roundoff: 2^-11, 2^-8). */
        double scale = 0.0, dmax = 0.0;
        for (int64_t i = 0; i < BS * H; i++)
            scale = fmax(scale, fabs(single[i]));
        double tol = dt == RUDNN_F32 ? 1e-4 * scale : 4.0 * u * scale;
        int64_t bad = 0;
        for (int64_t i = 0; i < BS * H; i++) {
            double d = fabs((double)xo[i] - single[i]);
            if (!(d <= tol) && bad++ < 6)
                FAILF("x[%lld, %lld] = %.9g (EP), single device %.9g: |diff| %.3g > %.3g\n", (long long)(i / H),
                      (long long)(i % H), (double)xo[i], (double)single[i], d, tol);
            dmax = fmax(dmax, isnan(d) ? INFINITY : d);
        }
        if (bad > 6)
            FAILF("x: %lld of %lld values differ from the single-device output\n", (long long)bad, (long long)(BS * H));
        stat[0] = scale > 0 ? dmax / scale : dmax;

        /* FP64 reference of the MoE forward: moe_ref_expert_row per (token, slot) (its tolerance
         * covers the FP32 accumulations and the roundings to the dtype), weighted sum in double;
         * the sum's tolerance adds (K + 3) FP32 roundings of the terms and one rounding to dtype. */
        double *ref = rt_xmalloc((size_t)(BS * H) * sizeof(double)), *rtol = rt_xmalloc((size_t)(BS * H) * sizeof(double));
        double *eo = rt_xmalloc(H * sizeof(double)), *etol = rt_xmalloc(H * sizeof(double));
        double *mag = rt_xmalloc(H * sizeof(double)), *scratch = rt_xmalloc((size_t)(2 * I) * sizeof(double));
        for (int64_t t = 0; t < BS; t++) {
            double *rr = ref + t * H, *rt = rtol + t * H;
            for (int h = 0; h < H; h++)
                rr[h] = rt[h] = mag[h] = 0.0;
            for (int k = 0; k < K; k++) {
                int64_t g = idx[t * K + k];
                double wk = w[t * K + k];
                moe_ref_expert_row(dt, x + t * H, gate + g * I * H, up + g * I * H, down + g * H * I, H, I, 0, scratch,
                                   eo, etol);
                for (int h = 0; h < H; h++) {
                    rr[h] += wk * eo[h];
                    rt[h] += fabs(wk) * etol[h];
                    mag[h] += fabs(wk) * (fabs(eo[h]) + etol[h]);
                }
            }
            for (int h = 0; h < H; h++) {
                double pre = rt[h] + 2.0 * (K + 3) * 0x1p-24 * mag[h];
                rt[h] = pre + u * (fabs(rr[h]) + pre) + 1e-30;
            }
        }
        ref_report_t rep;
        ref_report_init(&rep);
        moe_ref_compare(&rep, "x (EP) vs FP64 reference", xo, ref, rtol, (size_t)(BS * H), H);
        stat[1] = rep.worst_excess;
        ref_report_t rep1;
        ref_report_init(&rep1);
        moe_ref_compare(&rep1, "single-device out vs FP64 reference", single, ref, rtol, (size_t)(BS * H), H);
        stat[2] = rep1.worst_excess;

        /* y = x rstd (gamma 1) and rstd, loosely: rstd from the reference x, allowing x's whole
         * tolerance through the norm (twice) plus two roundings of y to the dtype. */
        double *yref = rt_xmalloc((size_t)(BS * H) * sizeof(double)), *ytol = rt_xmalloc((size_t)(BS * H) * sizeof(double));
        double rref[RUDNN_EP_MAX_BS], rtolv[RUDNN_EP_MAX_BS];
        for (int64_t t = 0; t < BS; t++) {
            double ss = 0.0, xt = 0.0;
            for (int h = 0; h < H; h++) {
                ss += ref[t * H + h] * ref[t * H + h];
                xt = fmax(xt, rtol[t * H + h]);
            }
            double rs = 1.0 / sqrt(ss / H + EPS), rel = 2.0 * xt * rs + 1e-5;
            rref[t] = rs;
            rtolv[t] = rel * rs;
            for (int h = 0; h < H; h++) {
                double yr = ref[t * H + h] * rs;
                yref[t * H + h] = yr;
                ytol[t * H + h] = 2.0 * xt * rs * (1.0 + fabs(yr)) + 4.0 * u * fabs(yr) + 1e-30;
            }
        }
        ref_report_t rep2;
        ref_report_init(&rep2);
        moe_ref_compare(&rep2, "rstd (EP)", rstd, rref, rtolv, (size_t)BS, 1);
        moe_ref_compare(&rep2, "y (EP)", y, yref, ytol, (size_t)(BS * H), H);
        stat[3] = rep2.worst_excess;
        ref_report_t *reps[] = {&rep, &rep1, &rep2};
        for (int i = 0; i < 3; i++)
            if (reps[i]->mismatches)
                FAILF("%zu of %zu values out of tolerance (worst %.3g x the tolerance):\n%s", reps[i]->mismatches,
                      reps[i]->checked, reps[i]->worst_excess, reps[i]->text);
        free(xo), free(y), free(ref), free(rtol), free(eo), free(etol), free(mag), free(scratch), free(yref), free(ytol);
    }
    double stat_max[4];
    MPI_Allreduce(stat, stat_max, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (world_rank == 0)
        printf("%s (W %d, E %lld): max|x_ep - single|/max|single| %.3g; worst error/tolerance: x %.3g, single %.3g, "
               "y+rstd %.3g\n",
               c->name, W, (long long)E, stat_max[0], stat_max[1], stat_max[2], stat_max[3]);

    rudnn_dispatched_destroy(disp);
    rudnn_routing_plan_destroy(plan);
    rudnn_swiglu_experts_destroy(ex_loc);
    rudnn_swiglu_experts_destroy(ex_all);
    if (ws)
        rudnn_buffer_destroy(ws);
    rt_tensor_t *ts[] = {&gate_t, &up_t, &down_t, &x_t, &lg_t, &eo_all, &out1, &ids_t, &expand, &assist, &etn, &erc,
                         &eout, &scales, &resid, &gamma_t, &y_t, &rstd_t, &xo_t};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        rt_tensor_destroy(ts[i]);
    free(gate), free(up), free(down), free(x_all), free(lg_all), free(idx), free(wraw), free(w), free(ids);
    free(single), free(ones), free(zeros);
    g_body_done = 1;
    rt_log_finish(g_log, "checks");
}

static int setup(void **state)
{
    (void)state;
    g_body_done = 0;
    g_log = rt_log_new();
    return 0;
}

/* Agrees on pass/fail over every rank (as test_ep_mpi.c): a test fails on every rank when it
 * fails on one; a rank stopped by an assertion aborts the job rather than leave the others. */
static int teardown(void **state)
{
    (void)state;
    if (!g_body_done) {
        fprintf(stderr, "rank %d: the test stopped at an assertion; aborting so no rank waits in a collective\n",
                world_rank);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int mine = g_log->failures != 0, any = 0;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    free(g_log);
    g_log = NULL;
    if (any && !mine) {
        print_error("failed on another rank (see its output)\n");
        return -1;
    }
    return 0;
}

/* E = L W experts, H = 1024. EMPTY_EXPERTS: experts 1 and L (one on rank 0, the first of rank
 * 1) get no token; EMPTY_RANK: the last rank receives no row at all. */
static const moe_case_t cases[] = {
    {"ep_moe/f32/L2/bs5/k2/empty_experts", RUDNN_F32, 2, 64, 5, 2, 1, ROUTE_EMPTY_EXPERTS, 0},
    {"ep_moe/f32/L4/bs16/k4/random", RUDNN_F32, 4, 64, 16, 4, 0, ROUTE_RANDOM, 0},
    {"ep_moe/f32/L2/bs16/k2/empty_rank", RUDNN_F32, 2, 128, 16, 2, 0, ROUTE_EMPTY_RANK, 0},
    {"ep_moe/f32/L4/bs16/k4/random/totals", RUDNN_F32, 4, 64, 16, 4, 1, ROUTE_RANDOM, 1},
    {"ep_moe/bf16/L2/bs5/k2/empty_experts", RUDNN_BF16, 2, 64, 5, 2, 1, ROUTE_EMPTY_EXPERTS, 0},
    {"ep_moe/bf16/L2/bs5/k2/empty_experts/totals", RUDNN_BF16, 2, 64, 5, 2, 1, ROUTE_EMPTY_EXPERTS, 1},
    {"ep_moe/bf16/L4/bs16/k4/empty_rank", RUDNN_BF16, 4, 64, 16, 4, 1, ROUTE_EMPTY_RANK, 0},
    {"ep_moe/f16/L4/bs16/k4/random", RUDNN_F16, 4, 64, 16, 4, 1, ROUTE_RANDOM, 0},
};

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (world_size < 2 || world_size > 8) {
        fprintf(stderr, "test_ep_moe_mpi: run under mpirun -np N, N in 2..8 (got %d)\n", world_size);
        MPI_Finalize();
        return 1;
    }
    rt_open_or_skip("ep-moe-mpi");
    MPI_Comm world = MPI_COMM_WORLD;
    rt_assert_status(rudnn_comm_create_mpi(rt_ctx, &world, NULL, COMM_BYTES, &comm), RUDNN_STATUS_SUCCESS);
    size_t n = sizeof cases / sizeof cases[0];
    struct CMUnitTest tests[sizeof cases / sizeof cases[0]];
    for (size_t i = 0; i < n; i++)
        tests[i] = (struct CMUnitTest){cases[i].name, test_case, setup, teardown, (void *)&cases[i]};
    char name[64];
    snprintf(name, sizeof name, "ep-moe-mpi rank %d/%d", world_rank, world_size);
    rt_set_filters(argc, argv); /* every rank runs the same tests */
    int failed = _cmocka_run_group_tests(name, tests, n, NULL, NULL);
    rudnn_comm_destroy(comm);
    rt_close();
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return rt_exit_code(any);
}
