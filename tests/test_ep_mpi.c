/* Expert-parallel dispatch and combine + AddRmsNorm (include/rudnn/ep.h) under
 * mpirun -np N (2..8): every rank builds every rank's inputs from the case's seed, runs
 * rudnn_ep_dispatch, applies the expert function of tests/reference/ep_ref.h to the rows it
 * received, runs rudnn_ep_combine_add_rms_norm and checks both ops against the FP64 reference;
 * then every limit and bad argument of the header, on all ranks or on one.
 *
 * Every rank runs every test in the same order (the ops are collective). A test ends
 * collectively: its teardown agrees on pass/fail over MPI_COMM_WORLD, so a rank whose checks
 * passed still fails a test another rank failed (naming that rank), and before each op call
 * the ranks agree that all of them are ready, so no rank waits in an op its peers skipped.
 * A rank stopped by an unexpected assertion inside a test (an allocation, a read-back) aborts
 * the job rather than leave the others waiting.
 *
 * Cases that need more ranks than the run has (TP = 2 needs 4, scale-down needs 2 active EP
 * ranks) are reported as skipped, with the reason, never passed silently.
 *
 * With the argument --comm=nccl the same tests run over NCCL communicators
 * (rudnn_comm_create_nccl; MPI only hands out the unique ids and agrees on results), on the CUDA
 * backend (skipped elsewhere). RUDNN_TEST_NCCL_ONE_GPU=1 lets the ranks share one GPU: each
 * gets its own NCCL_HOSTID, so that NCCL takes them for separate hosts (it refuses two ranks of
 * one communicator on one GPU of one host) and connects them over sockets. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#include <unistd.h>

#include "common.h"
#include "reference/ep_ref.h"
#include <rudnn/ep.h>

#define MIB ((size_t)1 << 20)
#define COMM_BYTES (16 * MIB)
#define SMALL_COMM_BYTES (2 * MIB + 64 * 1024)

static int world_rank, world_size;
static rudnn_comm_t comm_flat;  /* EP = MPI_COMM_WORLD */
static rudnn_comm_t comm_grid;  /* EP x TP grid: EP = same world_rank % 2, TP = pairs (2p, 2p+1) */
static rudnn_comm_t comm_small; /* EP = MPI_COMM_WORLD with a 2 MiB + 64 KiB staging buffer */
/* --comm=nccl: the same groups over MPI, so that each case also runs on the MPI host path and the
 * two must give the same bytes (issue 25) */
static rudnn_comm_t mpi_flat, mpi_grid, mpi_small;

static rt_log_t *g_log;
static int g_body_done;

#define LOGF(...) rt_logf(g_log, __VA_ARGS__)
#define FAILF(...)                                                                                 \
    do {                                                                                           \
        rt_logf(g_log, "rank %d: ", world_rank);                                                   \
        rt_logf(g_log, __VA_ARGS__);                                                               \
        g_log->failures++;                                                                         \
    } while (0)

/* A watchdog around each op call: an op that does not return within WATCHDOG_S seconds (a
 * rank left waiting in a collective its peers never joined) is reported, with the test and
 * the op, and the job is aborted instead of hanging until meson's timeout. */
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

static void unwatch(void) { alarm(0); }

/* 1 when every rank is ok (collective). */
static int all_ok(int ok)
{
    int v = ok ? 1 : 0, all = 0;
    MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

/* ---- cases ------------------------------------------------------------------------------ */

typedef enum { IDS_RANDOM, IDS_SOME_EMPTY, IDS_ONE_RANK } ids_kind_t;

typedef struct ep_case {
    const char *name;
    rudnn_dtype_t dtype;
    int64_t H, K, L, bs;
    int uneven;          /* tokens per rank differ; global_bs = max * W */
    int pass_global_bs;  /* global_bs = bs * W given although every rank has bs */
    int mask_dims;       /* 0, 1, 2 */
    int shared;          /* 0: [BS, H] rows, 1: none, 2: [BS, 1, H] rows */
    int64_t Z, C, N;
    int tp;              /* 1: EP x TP grid */
    int excluded;        /* 0, 1, 2 EP ranks removed by scale-down */
    ids_kind_t ids;
    int64_t token_nums_type;
} ep_case_t;

typedef struct dev_data {
    int64_t bs;
    float *x, *scales, *residual, *shared, *ori;
    int32_t *ids;
    uint8_t *mask;
} dev_data_t;

/* Everything one case needs on this rank. */
typedef struct fx {
    const ep_case_t *c;
    rudnn_comm_t comm;
    int W, T, ep_rank, tp_rank, excluded_me;
    int64_t H, K, L, E, A, maxbs, global_bs;
    rudnn_ep_params_t params;
    ep_ref_layout_t layout;
    dev_data_t *devs; /* [T W] */
    ep_ref_rank_in_t *ins;
    int32_t *elastic;
    float *gamma, *alpha1, *alpha2, *cv;
    ep_ref_problem_t prob;
    /* this rank's tensors */
    rt_tensor_t x, ids, mask, elastic_t, expand_x, assist, etn, erc, trc;
    rt_tensor_t expert_out, scales, residual, gamma_t, shared, ori, a1, a2, v, y, rstd, xo;
    int have[32];
    rudnn_buffer_t ws;
    size_t ws_bytes;
    rudnn_ep_dispatch_in_t din;
    rudnn_ep_dispatch_out_t dout;
    rudnn_ep_combine_in_t cin;
    rudnn_ep_combine_out_t cout;
} fx_t;

static float rnd(rt_rng_t *rng, rudnn_dtype_t dtype, double lo, double hi)
{
    return ref_round(dtype, (float)rt_rng_uniform(rng, lo, hi));
}

static float *rnd_array(rt_rng_t *rng, rudnn_dtype_t dtype, size_t n, double lo, double hi)
{
    float *a = rt_xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        a[i] = rnd(rng, dtype, lo, hi);
    return a;
}

/* The ids one token may choose from. */
static int64_t id_pool(const fx_t *f, int64_t *pool)
{
    const ep_case_t *c = f->c;
    int64_t n = 0, routed = f->layout.routed;
    for (int64_t g = 0; g < routed; g++) {
        if (c->ids == IDS_SOME_EMPTY && g % 3 == 1)
            continue;
        if (c->ids == IDS_ONE_RANK && g >= f->L)
            continue;
        pool[n++] = g;
    }
    if (c->ids != IDS_ONE_RANK)
        for (int64_t s = 0; s < c->Z + c->C + c->N; s++)
            pool[n++] = f->E + s;
    return n;
}

/* All ranks' inputs, the same on every rank (seeded by the case name and the world size). */
static void gen_inputs(fx_t *f, int64_t bad_bs, int bad_dev)
{
    const ep_case_t *c = f->c;
    rudnn_dtype_t dt = c->dtype;
    rt_rng_t rng;
    rt_rng_seed_case(&rng, c->name, world_size);
    int ndev = f->T * f->W;
    f->devs = rt_xcalloc((size_t)ndev, sizeof(dev_data_t));
    f->ins = rt_xcalloc((size_t)ndev, sizeof(ep_ref_rank_in_t));
    int64_t *pool = rt_xmalloc((size_t)(f->E + c->Z + c->C + c->N + 1) * sizeof(int64_t));
    const int64_t H = f->H, K = f->K, specials = c->Z + c->C + c->N;
    for (int d = 0; d < ndev; d++) {
        dev_data_t *dd = &f->devs[d];
        int r = d % f->W, t = d / f->W;
        int64_t bs = c->bs;
        if (c->uneven)
            bs = r == f->W - 1 ? c->bs : 1 + (r * 5 + t * 3) % c->bs;
        if (d == bad_dev && bad_bs >= 0)
            bs = bad_bs;
        dd->bs = bs;
        size_t nh = (size_t)(bs * H) + 1, nk = (size_t)(bs * K) + 1;
        dd->x = rnd_array(&rng, dt, nh, -1.0, 1.0);
        dd->residual = rnd_array(&rng, dt, nh, -1.0, 1.0);
        dd->shared = c->shared != 1 ? rnd_array(&rng, dt, nh, -0.5, 0.5) : NULL;
        dd->ori = c->C + c->N ? rnd_array(&rng, dt, nh, -1.0, 1.0) : NULL;
        dd->scales = rt_xmalloc(nk * sizeof(float));
        dd->ids = rt_xmalloc(nk * sizeof(int32_t));
        for (int64_t i = 0; i < bs * K; i++)
            dd->scales[i] = (float)rt_rng_uniform(&rng, 0.1, 1.0);
        for (int64_t i = 0; i < bs; i++) {
            int64_t n = id_pool(f, pool);
            /* each token takes one special expert in a slot that varies, cycling the kinds */
            int64_t forced = specials && K > 1 ? f->E + (i + d) % specials : -1;
            int distinct = n >= K; /* distinct ids when there are enough */
            for (int64_t k = 0; k < K; k++) {
                int64_t id;
                if (k == (i + d) % K && forced >= 0) {
                    id = forced;
                    for (int64_t j = 0; j < n; j++)
                        if (pool[j] == forced) {
                            pool[j] = pool[--n];
                            break;
                        }
                } else if (n > 0) {
                    int64_t j = (int64_t)rt_rng_below(&rng, (uint64_t)n);
                    id = pool[j];
                    if (distinct)
                        pool[j] = pool[--n];
                } else {
                    id = 0;
                }
                dd->ids[i * K + k] = (int32_t)id;
            }
        }
        if (c->mask_dims == 1) {
            dd->mask = rt_xcalloc((size_t)bs + 1, 1);
            int64_t on = d % 3 == 0 ? bs : d % 3 == 1 ? bs / 2 : 0;
            for (int64_t i = 0; i < on; i++)
                dd->mask[i] = 1;
        } else if (c->mask_dims == 2) {
            dd->mask = rt_xcalloc((size_t)(bs * K) + 1, 1);
            for (int64_t i = 0; i < bs * K; i++)
                dd->mask[i] = rt_rng_uniform(&rng, 0.0, 1.0) < 0.7;
            for (int64_t k = 0; k < K; k++) {
                dd->mask[k] = 1; /* token 0: all slots */
                if (bs > 1)
                    dd->mask[K + k] = 0; /* token 1: none (inactive) */
            }
        }
        ep_ref_rank_in_t *in = &f->ins[d];
        in->bs = bs;
        in->x = dd->x;
        in->expert_ids = dd->ids;
        in->mask = dd->mask;
        in->scales = dd->scales;
        in->residual = dd->residual;
        in->shared_x = dd->shared;
        in->ori_x = dd->ori;
    }
    free(pool);
    f->gamma = rnd_array(&rng, dt, (size_t)H + 1, 0.5, 1.5);
    f->alpha1 = rnd_array(&rng, dt, (size_t)c->N + 1, -1.0, 1.0);
    f->alpha2 = rnd_array(&rng, dt, (size_t)c->N + 1, -1.0, 1.0);
    f->cv = rnd_array(&rng, dt, (size_t)(c->N * H) + 1, -1.0, 1.0);
}

/* The topology, params and layout of a case; 0 when this run cannot hold it (*why set). */
static int fx_topology(fx_t *f, const ep_case_t *c, const char **why)
{
    memset(f, 0, sizeof *f);
    f->c = c;
    f->H = c->H;
    f->K = c->K;
    f->L = c->L;
    if (c->tp) {
        if (world_size < 4 || !comm_grid) {
            *why = "TP = 2 needs an EP group of 2 or more ranks in an EP x TP grid: 4 ranks or more";
            return 0;
        }
        f->comm = comm_grid;
        f->T = 2;
        f->W = world_size / 2;
        f->ep_rank = world_rank / 2;
        f->tp_rank = world_rank % 2;
    } else {
        f->comm = comm_flat;
        f->T = 1;
        f->W = world_size;
        f->ep_rank = world_rank;
    }
    if (c->excluded && f->W - c->excluded < 2) {
        *why = "scale-down keeps 2 EP ranks or more here (is one rank left a valid EP group? see the report)";
        return 0;
    }
    f->E = f->L * f->W;
    int64_t maxbs = c->bs;
    f->maxbs = maxbs;
    f->global_bs = c->uneven || c->pass_global_bs ? maxbs * f->W : 0;
    f->A = (f->global_bs ? f->global_bs : c->bs * f->W) * (f->L < f->K ? f->L : f->K);
    memset(&f->params, 0, sizeof f->params);
    f->params.moe_expert_num = f->E;
    f->params.global_bs = f->global_bs;
    f->params.zero_expert_num = c->Z;
    f->params.copy_expert_num = c->C;
    f->params.const_expert_num = c->N;
    f->params.expert_token_nums_type = c->token_nums_type;
    if (c->excluded) {
        /* ranks 1 and (for two) W - 1 removed; the survivors keep their order */
        f->elastic = rt_xcalloc((size_t)(4 + 2 * f->W), sizeof(int32_t));
        int wn = 0;
        for (int r = 0; r < f->W; r++) {
            int gone = r == 1 || (c->excluded == 2 && r == f->W - 1);
            f->elastic[4 + r] = gone ? -1 : wn;
            if (!gone)
                f->elastic[4 + f->W + wn++] = r;
        }
        for (int r = wn; r < f->W; r++)
            f->elastic[4 + f->W + r] = -1;
        f->elastic[0] = 1;
        f->elastic[1] = wn;
        f->elastic[2] = 0;
        f->elastic[3] = (int32_t)(f->L * wn);
        f->excluded_me = f->elastic[4 + f->ep_rank] < 0;
    }
    f->prob.dtype = c->dtype;
    f->prob.ep_size = f->W;
    f->prob.tp_size = f->T;
    f->prob.hidden = f->H;
    f->prob.top_k = f->K;
    f->prob.mask_dims = c->mask_dims;
    f->prob.params = f->params;
    f->prob.elastic = f->elastic;
    f->prob.eps = 1e-6f;
    ep_ref_layout(&f->prob, &f->layout);
    return 1;
}

static void write_raw(const rt_tensor_t *t, const void *host)
{
    if (rudnn_tensor_bytes(&t->t) == 0)
        return;
    rt_assert_status(rudnn_tensor_write(rt_queue, &t->t, host, rudnn_tensor_bytes(&t->t)), RUDNN_STATUS_SUCCESS);
}

/* rt_tensor_upload, nothing for an empty tensor (BS 0 or K 0 in the error cases) */
static void up(const rt_tensor_t *t, const float *host)
{
    if (rudnn_tensor_numel(&t->t) > 0)
        rt_tensor_upload(t, host);
}

static void mk(fx_t *f, int slot, rt_tensor_t *t, rudnn_dtype_t dtype, int rank, const int64_t *dims)
{
    rt_tensor_create(t, dtype, rank, dims, 0, RT_TAIL_BYTES);
    f->have[slot] = 1;
}

/* This rank's device tensors and the ops' argument structs. */
static void fx_tensors(fx_t *f)
{
    const ep_case_t *c = f->c;
    rudnn_dtype_t dt = c->dtype;
    int me = f->tp_rank * f->W + f->ep_rank;
    const dev_data_t *dd = &f->devs[me];
    const int64_t H = f->H, K = f->K, bs = dd->bs, TA = f->T * f->A;
    mk(f, 0, &f->x, dt, 2, (int64_t[]){bs, H});
    up(&f->x, dd->x);
    mk(f, 1, &f->ids, RUDNN_I32, 2, (int64_t[]){bs, K});
    write_raw(&f->ids, dd->ids);
    if (dd->mask) {
        if (c->mask_dims == 1)
            mk(f, 2, &f->mask, RUDNN_BOOL, 1, (int64_t[]){bs});
        else
            mk(f, 2, &f->mask, RUDNN_BOOL, 2, (int64_t[]){bs, K});
        write_raw(&f->mask, dd->mask);
    }
    if (f->elastic) {
        mk(f, 3, &f->elastic_t, RUDNN_I32, 1, (int64_t[]){4 + 2 * f->W});
        write_raw(&f->elastic_t, f->elastic);
    }
    mk(f, 4, &f->expand_x, dt, 2, (int64_t[]){TA, H});
    mk(f, 5, &f->assist, RUDNN_I32, 2, (int64_t[]){TA, 3});
    mk(f, 6, &f->etn, RUDNN_I64, 1, (int64_t[]){f->L});
    mk(f, 7, &f->erc, RUDNN_I32, 1, (int64_t[]){f->T * f->L * f->W});
    if (f->T == 2)
        mk(f, 8, &f->trc, RUDNN_I32, 1, (int64_t[]){2});
    mk(f, 9, &f->expert_out, dt, 2, (int64_t[]){TA, H});
    mk(f, 10, &f->scales, RUDNN_F32, 2, (int64_t[]){bs, K});
    up(&f->scales, dd->scales);
    mk(f, 11, &f->residual, dt, 3, (int64_t[]){bs, 1, H});
    up(&f->residual, dd->residual);
    mk(f, 12, &f->gamma_t, dt, 1, (int64_t[]){H});
    up(&f->gamma_t, f->gamma);
    if (dd->shared) {
        if (c->shared == 2)
            mk(f, 13, &f->shared, dt, 3, (int64_t[]){bs, 1, H});
        else
            mk(f, 13, &f->shared, dt, 2, (int64_t[]){bs, H});
        up(&f->shared, dd->shared);
    }
    if (dd->ori) {
        mk(f, 14, &f->ori, dt, 2, (int64_t[]){bs, H});
        up(&f->ori, dd->ori);
    }
    if (c->N) {
        mk(f, 15, &f->a1, dt, 1, (int64_t[]){c->N});
        up(&f->a1, f->alpha1);
        mk(f, 16, &f->a2, dt, 1, (int64_t[]){c->N});
        up(&f->a2, f->alpha2);
        mk(f, 17, &f->v, dt, 2, (int64_t[]){c->N, H});
        up(&f->v, f->cv);
    }
    mk(f, 18, &f->y, dt, 3, (int64_t[]){bs, 1, H});
    mk(f, 19, &f->rstd, RUDNN_F32, 3, (int64_t[]){bs, 1, 1});
    mk(f, 20, &f->xo, dt, 3, (int64_t[]){bs, 1, H});

    f->din = (rudnn_ep_dispatch_in_t){&f->x.t, &f->ids.t, f->have[2] ? &f->mask.t : NULL,
                                      f->have[3] ? &f->elastic_t.t : NULL};
    f->dout = (rudnn_ep_dispatch_out_t){&f->expand_x.t, &f->assist.t, &f->etn.t, &f->erc.t,
                                        f->have[8] ? &f->trc.t : NULL};
    memset(&f->cin, 0, sizeof f->cin);
    f->cin.expand_x = &f->expert_out.t;
    f->cin.expert_ids = &f->ids.t;
    f->cin.assist_info = &f->assist.t;
    f->cin.ep_send_counts = &f->erc.t;
    f->cin.tp_send_counts = f->have[8] ? &f->trc.t : NULL;
    f->cin.expert_scales = &f->scales.t;
    f->cin.residual = &f->residual.t;
    f->cin.gamma = &f->gamma_t.t;
    f->cin.active_mask = f->have[2] ? &f->mask.t : NULL;
    f->cin.shared_expert_x = f->have[13] ? &f->shared.t : NULL;
    f->cin.elastic_info = f->have[3] ? &f->elastic_t.t : NULL;
    f->cin.ori_x = f->have[14] ? &f->ori.t : NULL;
    f->cin.const_alpha1 = f->have[15] ? &f->a1.t : NULL;
    f->cin.const_alpha2 = f->have[16] ? &f->a2.t : NULL;
    f->cin.const_v = f->have[17] ? &f->v.t : NULL;
    f->cin.norm_eps = f->prob.eps;
    f->cout = (rudnn_ep_combine_out_t){&f->y.t, &f->rstd.t, &f->xo.t};
}

static void fx_free(fx_t *f)
{
    rt_tensor_t *ts[] = {&f->x, &f->ids, &f->mask, &f->elastic_t, &f->expand_x, &f->assist, &f->etn,
                         &f->erc, &f->trc, &f->expert_out, &f->scales, &f->residual, &f->gamma_t, &f->shared,
                         &f->ori, &f->a1, &f->a2, &f->v, &f->y, &f->rstd, &f->xo};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        if (f->have[i])
            rt_tensor_destroy(ts[i]);
    if (f->ws)
        rudnn_buffer_destroy(f->ws);
    if (f->devs)
        for (int d = 0; d < f->T * f->W; d++) {
            dev_data_t *dd = &f->devs[d];
            free(dd->x);
            free(dd->scales);
            free(dd->residual);
            free(dd->shared);
            free(dd->ori);
            free(dd->ids);
            free(dd->mask);
        }
    free(f->devs);
    free(f->ins);
    free(f->elastic);
    free(f->gamma);
    free(f->alpha1);
    free(f->alpha2);
    free(f->cv);
    memset(f, 0, sizeof *f);
}

/* Full setup of a case; 0 (after skip bookkeeping) when the run cannot hold it. */
static int fx_build(fx_t *f, const ep_case_t *c, int64_t bad_bs, int bad_dev, const char **why)
{
    if (!fx_topology(f, c, why))
        return 0;
    gen_inputs(f, bad_bs, bad_dev);
    f->prob.ranks = f->ins;
    f->prob.gamma = f->gamma;
    f->prob.alpha1 = f->alpha1;
    f->prob.alpha2 = f->alpha2;
    f->prob.const_v = f->cv;
    if (!f->excluded_me)
        fx_tensors(f);
    return 1;
}

/* ---- the numeric cases --------------------------------------------------------------------- */

static void check_int_exact(const char *what, const int32_t *got, const int32_t *want, int64_t n)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            if (bad < 6)
                FAILF("%s[%lld]: got %d, want %d\n", what, (long long)i, got[i], want[i]);
            bad++;
        }
    if (bad > 6)
        FAILF("%s: %lld of %lld entries differ\n", what, (long long)bad, (long long)n);
}

static void check_dispatch(fx_t *f, const ep_ref_dispatch_t *ref, int32_t *erc_got, int32_t *trc_got)
{
    const int64_t H = f->H, TA = f->T * f->A;
    rudnn_dtype_t dt = f->c->dtype;
    size_t es = rudnn_dtype_size(dt);
    uint8_t *raw = rt_xmalloc((size_t)(TA * H) * es);
    rt_assert_status(rudnn_tensor_read(rt_queue, &f->expand_x.t, raw, (size_t)(TA * H) * es), RUDNN_STATUS_SUCCESS);
    if (ref->rows > TA) {
        FAILF("the reference holds %lld rows, more than T A = %lld (the test's A is wrong)\n", (long long)ref->rows,
              (long long)TA);
    } else {
        int64_t bad_rows = 0;
        for (int64_t r = 0; r < ref->rows; r++) {
            int64_t first = -1, dr = r < ref->half_rows[0] ? r : f->A + (r - ref->half_rows[0]); /* half 1 at A */
            for (int64_t h = 0; h < H; h++)
                if (rt_element_value(dt, raw, (size_t)(dr * H + h)) != ref->expand_x[r * H + h]) {
                    first = h;
                    break;
                }
            if (first >= 0) {
                if (bad_rows < 4)
                    FAILF("expand_x row %lld (from rank %d token %d slot %d, local expert %d) col %lld: got %g, want "
                          "%g\n",
                          (long long)r, ref->assist[r * 3], ref->assist[r * 3 + 1], ref->assist[r * 3 + 2],
                          ref->local_expert[r], (long long)first,
                          (double)rt_element_value(dt, raw, (size_t)(dr * H + first)),
                          (double)ref->expand_x[r * H + first]);
                bad_rows++;
            }
        }
        if (bad_rows > 4)
            FAILF("expand_x: %lld of %lld rows differ\n", (long long)bad_rows, (long long)ref->rows);
        uint32_t poison = rt_poison_bits(dt);
        int64_t touched = 0;
        for (int h = 0; h < f->T; h++)
            for (int64_t i = (h * f->A + ref->half_rows[h]) * H; i < (h + 1) * f->A * H; i++)
                touched += rt_element_bits(dt, raw, (size_t)i) != poison;
        if (touched)
            FAILF("expand_x: %lld elements past the %lld received rows were written (the header: left as they "
                  "were)\n",
                  (long long)touched, (long long)ref->rows);
    }
    free(raw);
    int32_t *assist = rt_xmalloc((size_t)(TA * 3) * sizeof(int32_t));
    rt_assert_status(rudnn_tensor_read(rt_queue, &f->assist.t, assist, (size_t)(TA * 3) * sizeof(int32_t)),
                     RUDNN_STATUS_SUCCESS);
    if (ref->rows <= TA) {
        check_int_exact("assist_info (half 0)", assist, ref->assist, ref->half_rows[0] * 3);
        if (f->T == 2)
            check_int_exact("assist_info (half 1, from row A)", assist + f->A * 3, ref->assist + ref->half_rows[0] * 3,
                            ref->half_rows[1] * 3);
    }
    free(assist);
    int64_t etn[RUDNN_EP_MAX_EXPERTS];
    rt_assert_status(rudnn_tensor_read(rt_queue, &f->etn.t, etn, (size_t)f->L * sizeof(int64_t)),
                     RUDNN_STATUS_SUCCESS);
    for (int64_t e = 0; e < f->L; e++)
        if (etn[e] != ref->expert_token_nums[e])
            FAILF("expert_token_nums[%lld] (type %lld): got %lld, want %lld\n", (long long)e,
                  (long long)f->params.expert_token_nums_type, (long long)etn[e],
                  (long long)ref->expert_token_nums[e]);
    rt_assert_status(rudnn_tensor_read(rt_queue, &f->erc.t, erc_got, (size_t)(f->T * f->L * f->W) * sizeof(int32_t)),
                     RUDNN_STATUS_SUCCESS);
    check_int_exact("ep_recv_counts", erc_got, ref->ep_recv_counts, ref->count_len);
    if (f->T == 2) {
        rt_assert_status(rudnn_tensor_read(rt_queue, &f->trc.t, trc_got, 2 * sizeof(int32_t)), RUDNN_STATUS_SUCCESS);
        check_int_exact("tp_recv_counts", trc_got, ref->tp_recv_counts, 2);
    }
}

/* The expert outputs of the rows this rank received (read back), each row's local expert taken
 * from the ep_recv_counts it read back; rows past them 0. */
static void write_expert_out(fx_t *f, const int32_t *erc, const int32_t *trc)
{
    const int64_t H = f->H, TA = f->T * f->A, L = f->L, w = f->W; /* counts by the comm's rank */
    float *rows = rt_xmalloc((size_t)(TA * H) * sizeof(float));
    rt_tensor_download(&f->expand_x, rows);
    float *out = rt_xcalloc((size_t)(TA * H), sizeof(float));
    int r_new = f->layout.new_of[f->ep_rank];
    int64_t row0 = 0;
    for (int h = 0; h < f->T; h++) {
        int64_t total = erc[(h * L + L - 1) * w + w - 1];
        if (f->T == 2 && total != trc[h ? 1 - f->tp_rank : f->tp_rank])
            LOGF("rank %d: note: half %d: ep_recv_counts total %lld, tp_recv_counts %d\n", world_rank, h,
                 (long long)total, trc[h ? 1 - f->tp_rank : f->tp_rank]);
        row0 = h * f->A; /* half h from row h A */
        if (total < 0 || total > f->A) {
            FAILF("half %d: ep_recv_counts total %lld does not fit the %lld rows: expert outputs left 0\n", h,
                  (long long)total, (long long)TA);
            break;
        }
        for (int64_t j = 0; j < total; j++) {
            int64_t e = 0;
            while (e < L - 1 && j >= erc[(h * L + e) * w + w - 1])
                e++;
            int64_t g = (int64_t)r_new * L + e;
            for (int64_t c = 0; c < H; c++)
                out[(row0 + j) * H + c] =
                    (float)ep_ref_expert(rows[(row0 + j) * H + c], g, f->T, f->T == 2 ? f->tp_rank : 0);
        }
    }
    rt_tensor_upload(&f->expert_out, out);
    free(rows);
    free(out);
}

static void check_combine(fx_t *f, const ep_ref_combine_t *ref)
{
    const int64_t bs = ref->bs, H = f->H;
    float *y = rt_xmalloc((size_t)(bs * H) * sizeof(float)), *x = rt_xmalloc((size_t)(bs * H) * sizeof(float));
    float *rstd = rt_xmalloc((size_t)bs * sizeof(float));
    rt_tensor_download(&f->y, y);
    rt_tensor_download(&f->xo, x);
    rt_tensor_download(&f->rstd, rstd);
    ref_report_t rep;
    ref_report_init(&rep);
    ep_ref_compare(&rep, "x", x, ref->x, ref->x_tol, (size_t)(bs * H), H);
    ep_ref_compare(&rep, "rstd", rstd, ref->rstd, ref->rstd_tol, (size_t)bs, 1);
    ep_ref_compare(&rep, "y", y, ref->y, ref->y_tol, (size_t)(bs * H), H);
    if (rep.mismatches)
        FAILF("combine: %zu of %zu values out of tolerance (worst %.3g x the tolerance):\n%s", rep.mismatches,
              rep.checked, rep.worst_excess, rep.text);
    free(y);
    free(x);
    free(rstd);
}

/* The MPI twin of a comm of this run (NULL outside --comm=nccl). */
static rudnn_comm_t mpi_twin(rudnn_comm_t c)
{
    return c == comm_flat ? mpi_flat : c == comm_grid ? mpi_grid : c == comm_small ? mpi_small : NULL;
}

/* The whole buffers of the outputs (rows left as they were included), dispatch's or combine's. */
enum { SNAP_DISPATCH = 5, SNAP_ALL = 8 };
static void snapshot(fx_t *f, int n, uint8_t **bytes, size_t *sizes)
{
    const rt_tensor_t *t[SNAP_ALL] = {&f->expand_x, &f->assist, &f->etn, &f->erc, &f->trc, &f->y, &f->rstd, &f->xo};
    for (int i = 0; i < SNAP_ALL; i++) {
        bytes[i] = NULL, sizes[i] = 0;
        if (i >= n || !t[i]->buffer)
            continue;
        sizes[i] = t[i]->buffer_bytes;
        bytes[i] = rt_xmalloc(sizes[i]);
        rt_assert_status(rudnn_buffer_read(rt_queue, t[i]->buffer, 0, bytes[i], sizes[i]), RUDNN_STATUS_SUCCESS);
    }
}

/* --comm=nccl: dispatch and combine again over the MPI twin of f's comm, on the same inputs; every
 * output buffer must hold the bytes the NCCL run left (got: snapshot(SNAP_ALL) of that run). */
static int same_over_mpi(fx_t *f, uint8_t **got, const size_t *sizes)
{
    static const char *names[SNAP_ALL] = {"expand_x", "assist_info", "expert_token_nums", "ep_recv_counts",
                                          "tp_recv_counts", "y", "rstd", "x"};
    rudnn_comm_t twin = mpi_twin(f->comm);
    int ok = twin != NULL;
    if (!ok)
        FAILF("no MPI twin of the case's comm\n");
    if (all_ok(ok) && !f->excluded_me) {
        rudnn_status_t st = rudnn_ep_dispatch(rt_queue, twin, &f->params, &f->din, &f->dout);
        if (st != RUDNN_STATUS_SUCCESS) {
            FAILF("MPI twin: rudnn_ep_dispatch: %s: %s\n", rudnn_status_string(st), rudnn_last_error());
            ok = 0;
        }
    }
    if (all_ok(ok) && !f->excluded_me) {
        rudnn_status_t st = rudnn_ep_combine_add_rms_norm(rt_queue, twin, &f->params, &f->cin, f->ws, f->ws_bytes,
                                                          &f->cout);
        if (st != RUDNN_STATUS_SUCCESS) {
            FAILF("MPI twin: rudnn_ep_combine_add_rms_norm: %s: %s\n", rudnn_status_string(st), rudnn_last_error());
            ok = 0;
        }
    }
    if (all_ok(ok) && !f->excluded_me) {
        uint8_t *again[SNAP_ALL];
        size_t again_sizes[SNAP_ALL];
        snapshot(f, SNAP_ALL, again, again_sizes);
        for (int i = 0; i < SNAP_ALL; i++) {
            if (got[i] && again[i] && again_sizes[i] == sizes[i] && memcmp(got[i], again[i], sizes[i]) != 0) {
                size_t at = 0;
                while (got[i][at] == again[i][at])
                    at++;
                FAILF("%s: the NCCL and MPI runs differ (first at byte %zu of %zu)\n", names[i], at, sizes[i]);
                ok = 0;
            }
            free(again[i]);
        }
    }
    return ok;
}

static void test_case(void **state)
{
    const ep_case_t *c = *state;
    fx_t f;
    const char *why = NULL;
    if (!fx_build(&f, c, -1, -1, &why)) {
        fx_free(&f);
        if (world_rank == 0)
            printf("SKIPPED %s: %s (%d ranks)\n", c->name, why, world_size);
        g_body_done = 1;
        skip();
    }
    ep_ref_dispatch_t rd;
    ep_ref_combine_t rc;
    memset(&rd, 0, sizeof rd);
    memset(&rc, 0, sizeof rc);
    int ok = 1;
    if (!f.excluded_me) {
        if (ep_ref_dispatch(&f.prob, f.ep_rank, f.tp_rank, &rd) || ep_ref_combine(&f.prob, f.ep_rank, f.tp_rank, &rc))
            fail_msg("out of memory in the reference");
    }
    /* the active ranks call the ops; a removed rank waits in the agreements only */
    if (all_ok(ok) && !f.excluded_me) {
        watch(c->name, "rudnn_ep_dispatch");
        rudnn_status_t st = rudnn_ep_dispatch(rt_queue, f.comm, &f.params, &f.din, &f.dout);
        unwatch();
        if (st != RUDNN_STATUS_SUCCESS) {
            FAILF("rudnn_ep_dispatch: %s: %s\n", rudnn_status_string(st), rudnn_last_error());
            ok = 0;
        }
    }
    int32_t erc[2 * RUDNN_EP_MAX_EXPERTS * 8] = {0}, trc[2] = {0, 0};
    if (all_ok(ok) && !f.excluded_me) {
        check_dispatch(&f, &rd, erc, trc);
        write_expert_out(&f, erc, trc);
        size_t bytes = 0;
        rudnn_status_t st =
            rudnn_ep_combine_workspace_size(rt_queue, f.comm, &f.params, &f.cin, &f.cout, &bytes);
        if (st != RUDNN_STATUS_SUCCESS) {
            FAILF("rudnn_ep_combine_workspace_size: %s: %s\n", rudnn_status_string(st), rudnn_last_error());
            ok = 0;
        } else if (bytes) {
            rt_assert_status(rudnn_buffer_create(rt_ctx, bytes, &f.ws), RUDNN_STATUS_SUCCESS);
            f.ws_bytes = bytes;
        }
    }
    if (all_ok(ok) && !f.excluded_me) {
        watch(c->name, "rudnn_ep_combine_add_rms_norm");
        rudnn_status_t st =
            rudnn_ep_combine_add_rms_norm(rt_queue, f.comm, &f.params, &f.cin, f.ws, f.ws_bytes, &f.cout);
        unwatch();
        if (st != RUDNN_STATUS_SUCCESS) {
            FAILF("rudnn_ep_combine_add_rms_norm: %s: %s\n", rudnn_status_string(st), rudnn_last_error());
            ok = 0;
        } else {
            check_combine(&f, &rc);
        }
    }
    if (mpi_flat && all_ok(ok)) { /* --comm=nccl: the MPI host path gives the same bytes */
        uint8_t *got[SNAP_ALL] = {NULL};
        size_t sizes[SNAP_ALL] = {0};
        if (!f.excluded_me)
            snapshot(&f, SNAP_ALL, got, sizes);
        same_over_mpi(&f, got, sizes);
        for (int i = 0; i < SNAP_ALL; i++)
            free(got[i]);
    }
    ep_ref_dispatch_free(&rd);
    ep_ref_combine_free(&rc);
    fx_free(&f);
    g_body_done = 1;
    rt_log_finish(g_log, "checks");
}

/* ---- errors ------------------------------------------------------------------------------------ */

typedef struct call {
    rudnn_comm_t comm;
    rudnn_ep_params_t params;
    const rudnn_ep_params_t *pp;
    rudnn_ep_dispatch_in_t din;
    rudnn_ep_dispatch_out_t dout;
    rudnn_ep_combine_in_t cin;
    rudnn_ep_combine_out_t cout;
    const rudnn_ep_dispatch_in_t *pdin;
    const rudnn_ep_dispatch_out_t *pdout;
    const rudnn_ep_combine_in_t *pcin;
    const rudnn_ep_combine_out_t *pcout;
    size_t ws_bytes;
    rudnn_tensor_t scratch[4];
    const char *needle; /* a text the bad rank's message must hold (NULL: none) */
    char needle_alt[2][32];
} call_t;

typedef void (*mutate_fn)(fx_t *f, call_t *k);

typedef enum { W_BP, W_BP_OR_SHAPE, W_BSH, W_BDT, W_LIMIT_DIM, W_LIMIT_VAL, W_TOPK_EXPERTS, W_BUFFER } want_kind_t;

/* The statuses each kind accepts on the bad rank(s). A limit of the seed: BAD_SHAPE for a dim,
 * BAD_PARAM for a value; NOT_SUPPORTED is accepted too (the norm ops use it for "exceeds the
 * limit"). The buffer check: an argument error or a resource one, with the bytes named. */
static const rudnn_status_t want_sets[][4] = {
    [W_BP] = {RUDNN_STATUS_BAD_PARAM},
    [W_BP_OR_SHAPE] = {RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_SHAPE}, /* a param against a dim */
    [W_BSH] = {RUDNN_STATUS_BAD_SHAPE},
    [W_BDT] = {RUDNN_STATUS_BAD_DTYPE},
    [W_LIMIT_DIM] = {RUDNN_STATUS_BAD_SHAPE, RUDNN_STATUS_NOT_SUPPORTED},
    [W_LIMIT_VAL] = {RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_NOT_SUPPORTED},
    [W_TOPK_EXPERTS] = {RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_BAD_SHAPE, RUDNN_STATUS_NOT_SUPPORTED},
    [W_BUFFER] = {RUDNN_STATUS_BAD_PARAM, RUDNN_STATUS_NOT_SUPPORTED, RUDNN_STATUS_ALLOC_FAILED},
};

typedef struct err_case {
    const char *name;
    int combine;       /* 0: the dispatch is bad, 1: the combine */
    int bad_rank;      /* world rank holding the bad argument; -1: every rank (a shared one) */
    want_kind_t want;
    mutate_fn mutate;
    ep_case_t base;
    int64_t bad_bs;    /* tokens on the bad rank (-1: the case's) */
    int use_small_comm;
} err_case_t;

/* F32, H 1024, K 2, L 2, 4 tokens, one expert of each special kind; then overrides */
#define ERRX(nm, comb, bad, wk, fn, k, l, h, tp_, excl, maskd, badbs, small)                          \
    {.name = nm, .combine = comb, .bad_rank = bad, .want = wk, .mutate = fn, .bad_bs = badbs,          \
     .use_small_comm = small,                                                                          \
     .base = {.name = nm, .dtype = RUDNN_F32, .H = h, .K = k, .L = l, .bs = 4, .Z = 1, .C = 1, .N = 1,  \
              .tp = tp_, .excluded = excl, .mask_dims = maskd}}
#define ERR(nm, comb, bad, wk, fn) ERRX(nm, comb, bad, wk, fn, 2, 2, 1024, 0, 0, 0, -1, 0)

static rudnn_tensor_t *redesc(call_t *k, int i, const rudnn_tensor_t *base, rudnn_dtype_t dtype, int rank,
                              const int64_t *dims)
{
    rudnn_tensor_t *t = &k->scratch[i];
    rt_assert_status(rudnn_tensor_init(t, base->buffer, base->offset, dtype, rank, dims), RUDNN_STATUS_SUCCESS);
    return t;
}

static void m_none(fx_t *f, call_t *k) { (void)f, (void)k; }
static void m_x_i32(fx_t *f, call_t *k) { k->din.x = redesc(k, 0, &f->x.t, RUDNN_I32, 2, f->x.t.dims); }
static void m_ids_f32(fx_t *f, call_t *k) { k->din.expert_ids = redesc(k, 0, &f->ids.t, RUDNN_F32, 2, f->ids.t.dims); }
static void m_expand_bf16(fx_t *f, call_t *k)
{
    k->dout.expand_x = redesc(k, 0, &f->expand_x.t, RUDNN_BF16, 2, f->expand_x.t.dims);
}
static void m_assist_i64(fx_t *f, call_t *k)
{
    k->dout.assist_info = redesc(k, 0, &f->expert_out.t, RUDNN_I64, 2, (int64_t[]){f->assist.t.dims[0], 3});
}
static void m_etn_i32(fx_t *f, call_t *k) { k->dout.expert_token_nums = redesc(k, 0, &f->etn.t, RUDNN_I32, 1, f->etn.t.dims); }
static void m_erc_i64(fx_t *f, call_t *k)
{
    k->dout.ep_recv_counts = redesc(k, 0, &f->expert_out.t, RUDNN_I64, 1, (int64_t[]){f->erc.t.dims[0]});
}
static void m_expand_short(fx_t *f, call_t *k)
{
    k->dout.expand_x = redesc(k, 0, &f->expand_x.t, f->c->dtype, 2, (int64_t[]){f->expand_x.t.dims[0] - 1, f->H});
}
static void m_expand_cols(fx_t *f, call_t *k)
{
    k->dout.expand_x = redesc(k, 0, &f->expand_x.t, f->c->dtype, 2, (int64_t[]){f->expand_x.t.dims[0] - 2, f->H + 1});
}
static void m_ids_rows(fx_t *f, call_t *k)
{
    k->din.expert_ids = redesc(k, 0, &f->ids.t, RUDNN_I32, 2, (int64_t[]){f->ids.t.dims[0] - 1, f->K});
}
static void m_erc_short(fx_t *f, call_t *k)
{
    k->dout.ep_recv_counts = redesc(k, 0, &f->erc.t, RUDNN_I32, 1, (int64_t[]){f->erc.t.dims[0] - 1});
}
static void m_etn_long(fx_t *f, call_t *k)
{
    k->dout.expert_token_nums = redesc(k, 0, &f->expert_out.t, RUDNN_I64, 1, (int64_t[]){f->L + 1});
}
static void m_assist_cols(fx_t *f, call_t *k)
{
    k->dout.assist_info = redesc(k, 0, &f->assist.t, RUDNN_I32, 2, (int64_t[]){f->assist.t.dims[0], 2});
}
static void m_null_params(fx_t *f, call_t *k) { (void)f, k->pp = NULL; }
static void m_null_x(fx_t *f, call_t *k) { (void)f, k->din.x = NULL; }
static void m_null_in(fx_t *f, call_t *k) { (void)f, k->pdin = NULL; }
static void m_null_out(fx_t *f, call_t *k) { (void)f, k->pdout = NULL; }
static void m_E_not_divisible(fx_t *f, call_t *k) { k->params.moe_expert_num = f->E + 1; }
static void m_E_zero(fx_t *f, call_t *k) { (void)f, k->params.moe_expert_num = 0; }
static void m_E_over(fx_t *f, call_t *k) { k->params.moe_expert_num = (RUDNN_EP_MAX_EXPERTS / f->W + 1) * f->W; }
static void m_shared_num(fx_t *f, call_t *k) { (void)f, k->params.shared_expert_num = 1; }
static void m_shared_rank_num(fx_t *f, call_t *k) { (void)f, k->params.shared_expert_rank_num = 1; }
static void m_shard_type(fx_t *f, call_t *k) { (void)f, k->params.expert_shard_type = 1; }
static void m_tn_type(fx_t *f, call_t *k) { (void)f, k->params.expert_token_nums_type = 2; }
static void m_gbs_not_multiple(fx_t *f, call_t *k) { k->params.global_bs = f->c->bs * f->W + 1; }
static void m_gbs_small(fx_t *f, call_t *k) { k->params.global_bs = (f->c->bs - 1) * f->W; }
static void m_neg_special(fx_t *f, call_t *k) { (void)f, k->params.zero_expert_num = -1; }
static void m_elastic_size(fx_t *f, call_t *k)
{
    (void)k;
    f->elastic[1] = f->W + 1; /* written by mutate_data */
}
static void m_elastic_short(fx_t *f, call_t *k)
{
    k->din.elastic_info = redesc(k, 0, &f->elastic_t.t, RUDNN_I32, 1, (int64_t[]){4 + 2 * f->W - 1});
}

/* Mutations of data (written to the device before the call). */
static void m_mask_not_prefix(fx_t *f, call_t *k)
{
    (void)k;
    uint8_t m[RUDNN_EP_MAX_BS];
    int64_t bs = f->x.t.dims[0];
    for (int64_t i = 0; i < bs; i++)
        m[i] = i != 1;
    write_raw(&f->mask, m);
}
static void set_id(fx_t *f, int32_t id)
{
    int32_t ids[64];
    int64_t n = f->ids.t.dims[0] * f->K;
    rt_assert_status(rudnn_tensor_read(rt_queue, &f->ids.t, ids, (size_t)n * 4), RUDNN_STATUS_SUCCESS);
    ids[n - 1] = id;
    write_raw(&f->ids, ids);
}
static void m_id_high(fx_t *f, call_t *k)
{
    (void)k;
    set_id(f, (int32_t)(f->E + f->c->Z + f->c->C + f->c->N));
}
static void m_id_negative(fx_t *f, call_t *k) { (void)k, set_id(f, -1); }
static void m_buffer(fx_t *f, call_t *k)
{
    /* the seed's formula: (buffer - 2 MiB) / 2 >= maxBS e (H + 128) (W L + K + 1) */
    long long need = (long long)f->maxbs * 4 * (f->H + 128) * (f->W * f->L + f->K + 1);
    snprintf(k->needle_alt[0], sizeof k->needle_alt[0], "%lld", need);
    snprintf(k->needle_alt[1], sizeof k->needle_alt[1], "%lld", 2 * need + (long long)(2 * MIB));
}

/* combine mutations */
static void m_eps_neg(fx_t *f, call_t *k) { (void)f, k->cin.norm_eps = -1e-6f; }
static void m_eps_nan(fx_t *f, call_t *k) { (void)f, k->cin.norm_eps = NAN; }
static void m_gamma_short(fx_t *f, call_t *k) { k->cin.gamma = redesc(k, 0, &f->gamma_t.t, f->c->dtype, 1, (int64_t[]){f->H - 1}); }
static void m_scales_bf16(fx_t *f, call_t *k)
{
    k->cin.expert_scales = redesc(k, 0, &f->scales.t, RUDNN_BF16, 2, f->scales.t.dims);
}
static void m_scales_cols(fx_t *f, call_t *k)
{
    k->cin.expert_scales = redesc(k, 0, &f->scales.t, RUDNN_F32, 2, (int64_t[]){f->scales.t.dims[0] - 1, f->K + 1});
}
static void m_residual_f16(fx_t *f, call_t *k)
{
    k->cin.residual = redesc(k, 0, &f->residual.t, RUDNN_F16, 3, f->residual.t.dims);
}
static void m_residual_h(fx_t *f, call_t *k)
{
    k->cin.residual = redesc(k, 0, &f->residual.t, f->c->dtype, 3, (int64_t[]){f->residual.t.dims[0], 1, f->H - 1});
}
static void m_y_bf16(fx_t *f, call_t *k) { k->cout.y = redesc(k, 0, &f->y.t, RUDNN_BF16, 3, f->y.t.dims); }
static void m_rstd_bf16(fx_t *f, call_t *k) { k->cout.rstd = redesc(k, 0, &f->rstd.t, RUDNN_BF16, 3, f->rstd.t.dims); }
static void m_no_ori(fx_t *f, call_t *k) { (void)f, k->cin.ori_x = NULL; }
static void m_no_v(fx_t *f, call_t *k) { (void)f, k->cin.const_v = NULL; }
static void m_cexpand_short(fx_t *f, call_t *k)
{
    k->cin.expand_x = redesc(k, 0, &f->expert_out.t, f->c->dtype, 2, (int64_t[]){f->expert_out.t.dims[0] - 1, f->H});
}
static void m_send_counts_short(fx_t *f, call_t *k)
{
    k->cin.ep_send_counts = redesc(k, 0, &f->erc.t, RUDNN_I32, 1, (int64_t[]){f->erc.t.dims[0] - 1});
}
static void m_ws_small(fx_t *f, call_t *k) { (void)f, k->ws_bytes = k->ws_bytes - 1; }
static void m_null_y(fx_t *f, call_t *k) { (void)f, k->cout.y = NULL; }

static int status_in(rudnn_status_t st, const rudnn_status_t *want)
{
    for (int i = 0; i < 4 && (i == 0 || want[i]); i++)
        if (st == want[i])
            return 1;
    return 0;
}

/* Snapshots of this rank's output buffers. */
typedef struct snaps {
    int n;
    const rt_tensor_t *t[8];
    uint8_t *before[8];
    const char *name[8];
} snaps_t;

static void snap_add(snaps_t *s, const rt_tensor_t *t, const char *name)
{
    s->t[s->n] = t;
    s->name[s->n] = name;
    s->before[s->n++] = rt_buffer_snapshot(t->buffer, t->buffer_bytes);
}

static void snap_check(snaps_t *s, const char *what)
{
    for (int i = 0; i < s->n; i++) {
        uint8_t *after = rt_buffer_snapshot(s->t[i]->buffer, s->t[i]->buffer_bytes);
        size_t first = 0, changed = rt_count_changed(s->before[i], after, s->t[i]->buffer_bytes, NULL, NULL, 0, &first);
        if (changed)
            FAILF("%s: %zu byte(s) of %s changed (first at byte %zu) though the call failed\n", what, changed,
                  s->name[i], first);
        free(after);
        free(s->before[i]);
    }
    s->n = 0;
}

static void test_error(void **state)
{
    const err_case_t *ec = *state;
    fx_t f;
    const char *why = NULL;
    int bad_rank = ec->bad_rank >= 0 ? ec->bad_rank % world_size : -1;
    if (!fx_build(&f, &ec->base, ec->bad_bs, bad_rank < 0 ? -1 : bad_rank, &why)) {
        fx_free(&f);
        if (world_rank == 0)
            printf("SKIPPED %s: %s (%d ranks)\n", ec->name, why, world_size);
        g_body_done = 1;
        skip();
    }
    if (ec->use_small_comm)
        f.comm = comm_small;
    int i_am_bad = bad_rank < 0 || bad_rank == world_rank;
    int bad_ep_rank = bad_rank < 0 ? -1 : (f.T == 2 ? bad_rank / 2 : bad_rank);
    int ok = 1;
    /* the combine's errors come after a good dispatch and the expert outputs */
    if (f.excluded_me) {
        /* a rank removed by scale-down calls nothing: it takes part in the agreements only */
        int rounds = (ec->combine ? 2 : 0) + 2;
        for (int i = 0; i < rounds; i++)
            all_ok(1);
        fx_free(&f);
        g_body_done = 1;
        rt_log_finish(g_log, "checks");
        return;
    }
    if (ec->combine) {
        if (all_ok(ok)) {
            watch(ec->name, "the good rudnn_ep_dispatch before the combine");
            rudnn_status_t st = rudnn_ep_dispatch(rt_queue, f.comm, &f.params, &f.din, &f.dout);
            unwatch();
            if (st != RUDNN_STATUS_SUCCESS) {
                FAILF("the good dispatch before the combine's error: %s: %s\n", rudnn_status_string(st),
                      rudnn_last_error());
                ok = 0;
            }
        }
        if (all_ok(ok)) {
            int32_t erc[2 * RUDNN_EP_MAX_EXPERTS * 8] = {0}, trc[2] = {0, 0};
            rt_assert_status(rudnn_tensor_read(rt_queue, &f.erc.t, erc, rudnn_tensor_bytes(&f.erc.t)),
                             RUDNN_STATUS_SUCCESS);
            if (f.T == 2)
                rt_assert_status(rudnn_tensor_read(rt_queue, &f.trc.t, trc, 8), RUDNN_STATUS_SUCCESS);
            write_expert_out(&f, erc, trc);
            size_t bytes = 0;
            rudnn_status_t st = rudnn_ep_combine_workspace_size(rt_queue, f.comm, &f.params, &f.cin, &f.cout, &bytes);
            if (st != RUDNN_STATUS_SUCCESS) {
                FAILF("combine_workspace_size: %s: %s\n", rudnn_status_string(st), rudnn_last_error());
                ok = 0;
            } else if (bytes) {
                rt_assert_status(rudnn_buffer_create(rt_ctx, bytes, &f.ws), RUDNN_STATUS_SUCCESS);
                f.ws_bytes = bytes;
            }
        }
    }
    call_t k;
    memset(&k, 0, sizeof k);
    k.comm = f.comm;
    k.params = f.params;
    k.pp = &k.params;
    k.din = f.din;
    k.dout = f.dout;
    k.cin = f.cin;
    k.cout = f.cout;
    k.pdin = &k.din;
    k.pdout = &k.dout;
    k.pcin = &k.cin;
    k.pcout = &k.cout;
    k.ws_bytes = f.ws_bytes;
    const rudnn_status_t *want = want_sets[ec->want];
    if (ec->mutate == m_ws_small && f.ws_bytes == 0) {
        /* every rank has the same arguments, so every rank skips */
        if (world_rank == 0)
            printf("SKIPPED %s: the workspace is 0 bytes, there is none to shrink\n", ec->name);
        fx_free(&f);
        g_body_done = 1;
        skip();
    }
    if (i_am_bad) {
        ec->mutate(&f, &k);
        if (ec->mutate == m_elastic_size)
            write_raw(&f.elastic_t, f.elastic);
    }
    snaps_t s = {0};
    if (ec->combine) {
        snap_add(&s, &f.y, "y");
        snap_add(&s, &f.rstd, "rstd");
        snap_add(&s, &f.xo, "x");
    } else {
        snap_add(&s, &f.expand_x, "expand_x");
        snap_add(&s, &f.assist, "assist_info");
        snap_add(&s, &f.etn, "expert_token_nums");
        snap_add(&s, &f.erc, "ep_recv_counts");
        if (f.T == 2)
            snap_add(&s, &f.trc, "tp_recv_counts");
    }
    const char *op = ec->combine ? "ep_combine" : "ep_dispatch";
    if (all_ok(ok)) {
        watch(ec->name, ec->combine ? "rudnn_ep_combine_add_rms_norm (the bad call)" : "rudnn_ep_dispatch (the bad call)");
        rudnn_status_t st = ec->combine
                                ? rudnn_ep_combine_add_rms_norm(rt_queue, k.comm, k.pp, k.pcin, f.ws, k.ws_bytes, k.pcout)
                                : rudnn_ep_dispatch(rt_queue, k.comm, k.pp, k.pdin, k.pdout);
        unwatch();
        const char *msg = rudnn_last_error();
        if (i_am_bad) {
            if (!status_in(st, want))
                FAILF("%s: got %s (%s), want %s%s%s\n", ec->name, rudnn_status_string(st), msg,
                      rudnn_status_string(want[0]), want[1] ? " or " : "",
                      want[1] ? rudnn_status_string(want[1]) : "");
            if (k.needle_alt[0][0] && !strstr(msg, k.needle_alt[0]) && !strstr(msg, k.needle_alt[1]))
                FAILF("%s: the message does not name the bytes needed (%s or %s): %s\n", ec->name, k.needle_alt[0],
                      k.needle_alt[1], msg);
        } else {
            char needle[32];
            snprintf(needle, sizeof needle, "rank %d", bad_ep_rank);
            if (st != RUDNN_STATUS_BAD_PARAM)
                FAILF("%s: a good rank got %s (%s), want RUDNN_STATUS_BAD_PARAM naming %s\n", ec->name,
                      rudnn_status_string(st), msg, needle);
            else if (!strstr(msg, needle))
                FAILF("%s: a good rank's message does not name %s: %s\n", ec->name, needle, msg);
        }
        if (st != RUDNN_STATUS_SUCCESS && !strstr(msg, op))
            FAILF("%s: the message does not name the op (%s): %s\n", ec->name, op, msg);
        snap_check(&s, ec->name);
    } else {
        for (int i = 0; i < s.n; i++)
            free(s.before[i]);
    }
    /* the ranks still work together: after one rank's bad argument the good call runs */
    if (all_ok(ok) && ec->bad_rank >= 0 && ec->bad_bs < 0) {
        const dev_data_t *dd = &f.devs[f.tp_rank * f.W + f.ep_rank];
        write_raw(&f.ids, dd->ids); /* undo what a data mutation wrote */
        if (f.have[2])
            write_raw(&f.mask, dd->mask);
        watch(ec->name, "the good call after the error");
        rudnn_status_t st = ec->combine
                                ? rudnn_ep_combine_add_rms_norm(rt_queue, f.comm, &f.params, &f.cin, f.ws, f.ws_bytes,
                                                                &f.cout)
                                : rudnn_ep_dispatch(rt_queue, f.comm, &f.params, &f.din, &f.dout);
        unwatch();
        if (st != RUDNN_STATUS_SUCCESS)
            FAILF("%s: the good call after the error: %s: %s\n", ec->name, rudnn_status_string(st),
                  rudnn_last_error());
    }
    fx_free(&f);
    g_body_done = 1;
    rt_log_finish(g_log, "checks");
}

/* ---- fixtures and main ------------------------------------------------------------------------------ */

static int setup(void **state)
{
    (void)state;
    g_body_done = 0;
    g_log = rt_log_new();
    return 0;
}

/* Agrees on pass/fail over every rank: a test fails on every rank when it fails on one. */
static int teardown(void **state)
{
    (void)state;
    if (!g_body_done) {
        fprintf(stderr, "rank %d: the test stopped at an assertion; aborting so no rank waits in a collective\n",
                world_rank);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int mine = g_log->failures != 0;
    int *all = rt_xcalloc((size_t)world_size, sizeof(int));
    MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    char ranks[256] = "";
    int others = 0;
    for (int r = 0; r < world_size; r++)
        if (all[r] && r != world_rank) {
            size_t len = strlen(ranks);
            snprintf(ranks + len, sizeof ranks - len, " %d", r);
            others++;
        }
    free(all);
    free(g_log);
    g_log = NULL;
    if (others && !mine) {
        print_error("failed on rank(s)%s (see their output)\n", ranks);
        return -1;
    }
    return 0;
}

#define F32 RUDNN_F32
#define BF16 RUDNN_BF16
/* H 1024 (the seed's minimum), 8 tokens, [BS, H] shared rows unless said otherwise */
#define CASE(nm, dt, k, l, ...)                                                                        \
    {.name = nm, .dtype = dt, .H = 1024, .K = k, .L = l, .bs = 8, __VA_ARGS__}

static const ep_case_t cases[] = {
    CASE("dispatch_combine/f32/topk1", F32, 1, 4),
    CASE("dispatch_combine/f32/topk2", F32, 2, 4),
    CASE("dispatch_combine/f32/topk3", F32, 3, 4),
    CASE("dispatch_combine/f32/topk4", F32, 4, 4),
    CASE("dispatch_combine/f32/topk5", F32, 5, 4),
    CASE("dispatch_combine/f32/topk6", F32, 6, 4),
    CASE("dispatch_combine/f32/topk7", F32, 7, 4),
    CASE("dispatch_combine/f32/topk8", F32, 8, 4),
    CASE("dispatch_combine/f32/one_local_expert", F32, 2, 1),
    CASE("dispatch_combine/f32/experts_without_tokens", F32, 3, 3, .ids = IDS_SOME_EMPTY),
    CASE("dispatch_combine/f32/all_tokens_to_rank0", F32, 2, 4, .ids = IDS_ONE_RANK),
    CASE("dispatch_combine/f32/no_shared", F32, 4, 2, .shared = 1),
    CASE("dispatch_combine/f32/shared_3d", F32, 4, 2, .shared = 2),
    CASE("dispatch_combine/f32/zero_expert", F32, 3, 2, .Z = 1),
    CASE("dispatch_combine/f32/copy_expert", F32, 3, 2, .C = 1),
    CASE("dispatch_combine/f32/const_expert", F32, 3, 2, .N = 1),
    CASE("dispatch_combine/f32/special_all_kinds", F32, 6, 2, .Z = 2, .C = 1, .N = 2),
    CASE("dispatch_combine/f32/mask1d", F32, 4, 2, .mask_dims = 1, .C = 1),
    CASE("dispatch_combine/f32/mask2d", F32, 4, 2, .mask_dims = 2, .Z = 1, .C = 1, .N = 1),
    CASE("dispatch_combine/f32/uneven_bs", F32, 4, 2, .uneven = 1),
    CASE("dispatch_combine/f32/global_bs_given", F32, 2, 2, .pass_global_bs = 1),
    CASE("dispatch_combine/f32/token_nums_counts", F32, 4, 4, .token_nums_type = 1),
    CASE("dispatch_combine/f32/tp2", F32, 2, 1, .tp = 1),
    CASE("dispatch_combine/f32/tp2_special_mask2d", F32, 4, 1, .tp = 1, .mask_dims = 2, .Z = 1, .C = 1, .N = 1),
    CASE("dispatch_combine/f32/elastic_one_removed", F32, 4, 2, .excluded = 1, .C = 1),
    CASE("dispatch_combine/f32/elastic_two_removed", F32, 3, 2, .excluded = 2),
    CASE("dispatch_combine/bf16/topk1", BF16, 1, 4),
    CASE("dispatch_combine/bf16/topk4", BF16, 4, 4),
    CASE("dispatch_combine/bf16/topk8", BF16, 8, 4),
    CASE("dispatch_combine/bf16/special_all_kinds", BF16, 6, 2, .Z = 2, .C = 1, .N = 2),
    CASE("dispatch_combine/bf16/mask1d", BF16, 4, 2, .mask_dims = 1, .shared = 2),
    CASE("dispatch_combine/bf16/mask2d", BF16, 4, 2, .mask_dims = 2, .Z = 1, .C = 1, .N = 1),
    CASE("dispatch_combine/bf16/uneven_bs", BF16, 4, 2, .uneven = 1),
    CASE("dispatch_combine/bf16/tp2", BF16, 2, 1, .tp = 1),
    CASE("dispatch_combine/bf16/elastic_one_removed", BF16, 4, 2, .excluded = 1, .N = 1),
    CASE("dispatch_combine/bf16/elastic_two_removed", BF16, 2, 2, .excluded = 2),
};

static const err_case_t errors[] = {
    /* limits of the header, on every rank (shared arguments) */
    ERR("errors/dispatch/moe_expert_num_not_divisible", 0, -1, W_BP, m_E_not_divisible),
    ERR("errors/dispatch/moe_expert_num_zero", 0, -1, W_BP, m_E_zero),
    ERR("errors/dispatch/moe_expert_num_over_1024", 0, -1, W_LIMIT_VAL, m_E_over),
    ERRX("errors/dispatch/tp_with_two_local_experts", 0, -1, W_LIMIT_VAL, m_none, 2, 2, 1024, 1, 0, 0, -1, 0),
    ERRX("errors/dispatch/topk_0", 0, -1, W_LIMIT_DIM, m_none, 0, 2, 1024, 0, 0, 0, -1, 0),
    ERRX("errors/dispatch/topk_17", 0, -1, W_LIMIT_DIM, m_none, 17, 16, 1024, 0, 0, 0, -1, 0),
    ERRX("errors/dispatch/topk_over_all_experts", 0, -1, W_TOPK_EXPERTS, m_none, 16, 1, 1024, 0, 0, 0, -1, 0),
    ERRX("errors/dispatch/hidden_1023", 0, -1, W_LIMIT_DIM, m_none, 2, 2, 1023, 0, 0, 0, -1, 0),
    ERRX("errors/dispatch/hidden_8193", 0, -1, W_LIMIT_DIM, m_none, 2, 2, 8193, 0, 0, 0, -1, 0),
    ERRX("errors/dispatch/buffer_too_small", 0, -1, W_BUFFER, m_buffer, 2, 2, 1024, 0, 0, 0, -1, 1),
    ERR("errors/dispatch/shared_expert_num_1", 0, -1, W_LIMIT_VAL, m_shared_num),
    ERR("errors/dispatch/shared_expert_rank_num_1", 0, -1, W_LIMIT_VAL, m_shared_rank_num),
    ERR("errors/dispatch/expert_shard_type_1", 0, -1, W_LIMIT_VAL, m_shard_type),
    ERR("errors/dispatch/expert_token_nums_type_2", 0, -1, W_BP, m_tn_type),
    ERR("errors/dispatch/global_bs_not_multiple", 0, -1, W_BP, m_gbs_not_multiple),
    ERR("errors/dispatch/global_bs_below_bs_times_w", 0, -1, W_BP_OR_SHAPE, m_gbs_small),
    ERR("errors/dispatch/zero_expert_num_negative", 0, -1, W_BP, m_neg_special),
    ERRX("errors/dispatch/elastic_size_over_w", 0, -1, W_BP, m_elastic_size, 2, 2, 1024, 0, 1, 0, -1, 0),
    /* one rank's bad argument: that rank its status, the others BAD_PARAM naming it */
    ERRX("errors/dispatch/bs_0_on_one_rank", 0, 1, W_LIMIT_DIM, m_none, 2, 2, 1024, 0, 0, 0, 0, 0),
    ERRX("errors/dispatch/bs_513_on_one_rank", 0, 1, W_LIMIT_DIM, m_none, 2, 2, 1024, 0, 0, 0, 513, 0),
    ERR("errors/dispatch/expand_x_below_A_rows", 0, 1, W_BSH, m_expand_short),
    ERR("errors/dispatch/expand_x_wrong_cols", 0, 0, W_BSH, m_expand_cols),
    ERRX("errors/dispatch/mask1d_trues_not_first", 0, 1, W_BP, m_mask_not_prefix, 2, 2, 1024, 0, 0, 1, -1, 0),
    ERR("errors/dispatch/expert_id_past_specials", 0, 1, W_BP, m_id_high),
    ERR("errors/dispatch/expert_id_negative", 0, 0, W_BP, m_id_negative),
    ERR("errors/dispatch/x_i32", 0, 1, W_BDT, m_x_i32),
    ERR("errors/dispatch/expert_ids_f32", 0, 1, W_BDT, m_ids_f32),
    ERR("errors/dispatch/expand_x_other_dtype", 0, 1, W_BDT, m_expand_bf16),
    ERR("errors/dispatch/assist_info_i64", 0, 1, W_BDT, m_assist_i64),
    ERR("errors/dispatch/expert_token_nums_i32", 0, 1, W_BDT, m_etn_i32),
    ERR("errors/dispatch/ep_recv_counts_i64", 0, 1, W_BDT, m_erc_i64),
    ERR("errors/dispatch/expert_ids_rows", 0, 1, W_BSH, m_ids_rows),
    ERR("errors/dispatch/ep_recv_counts_short", 0, 1, W_BSH, m_erc_short),
    ERR("errors/dispatch/expert_token_nums_long", 0, 1, W_BSH, m_etn_long),
    ERR("errors/dispatch/assist_info_two_cols", 0, 1, W_BSH, m_assist_cols),
    /* the elastic info is a shared argument (the seed: the same on every rank): bad on all */
    ERRX("errors/dispatch/elastic_info_short", 0, -1, W_BSH, m_elastic_short, 2, 2, 1024, 0, 1, 0, -1, 0),
    /* the combine, after a good dispatch */
    ERR("errors/combine/norm_eps_negative", 1, 1, W_BP, m_eps_neg),
    ERR("errors/combine/norm_eps_nan", 1, 0, W_BP, m_eps_nan),
    ERR("errors/combine/gamma_short", 1, 1, W_BSH, m_gamma_short),
    ERR("errors/combine/expert_scales_bf16", 1, 1, W_BDT, m_scales_bf16),
    ERR("errors/combine/expert_scales_shape", 1, 1, W_BSH, m_scales_cols),
    ERR("errors/combine/residual_other_dtype", 1, 1, W_BDT, m_residual_f16),
    ERR("errors/combine/residual_hidden", 1, 1, W_BSH, m_residual_h),
    ERR("errors/combine/y_other_dtype", 1, 1, W_BDT, m_y_bf16),
    ERR("errors/combine/rstd_bf16", 1, 1, W_BDT, m_rstd_bf16),
    ERR("errors/combine/copy_expert_without_ori_x", 1, 1, W_BP, m_no_ori),
    ERR("errors/combine/const_expert_without_v", 1, 1, W_BP, m_no_v),
    ERR("errors/combine/expand_x_below_A_rows", 1, 1, W_BSH, m_cexpand_short),
    ERR("errors/combine/ep_send_counts_short", 1, 1, W_BSH, m_send_counts_short),
    ERR("errors/combine/workspace_too_small", 1, 1, W_BP, m_ws_small),
    /* NULL arguments on one rank, last: that rank must still join the agreement */
    ERR("errors/dispatch/null_params", 0, 1, W_BP, m_null_params),
    ERR("errors/dispatch/null_in", 0, 1, W_BP, m_null_in),
    ERR("errors/dispatch/null_out", 0, 1, W_BP, m_null_out),
    ERR("errors/dispatch/null_x", 0, 1, W_BP, m_null_x),
    ERR("errors/combine/null_y", 1, 1, W_BP, m_null_y),
};

/* An NCCL communicator over the ranks of ep (and tp, MPI_COMM_NULL: none): each group's rank 0
 * makes the unique id, MPI shares it. */
static rudnn_status_t create_nccl(MPI_Comm ep, MPI_Comm tp, size_t bytes, rudnn_comm_t *out)
{
    unsigned char ep_id[RUDNN_COMM_NCCL_ID_BYTES] = {0}, tp_id[RUDNN_COMM_NCCL_ID_BYTES] = {0};
    int ep_rank = 0, ep_size = 0, tp_rank = 0;
    MPI_Comm_rank(ep, &ep_rank);
    MPI_Comm_size(ep, &ep_size);
    if (ep_rank == 0 && rudnn_comm_nccl_unique_id(ep_id) != RUDNN_STATUS_SUCCESS)
        fprintf(stderr, "rank %d: rudnn_comm_nccl_unique_id: %s\n", world_rank, rudnn_last_error());
    MPI_Bcast(ep_id, sizeof ep_id, MPI_BYTE, 0, ep);
    if (tp != MPI_COMM_NULL) {
        MPI_Comm_rank(tp, &tp_rank);
        if (tp_rank == 0 && rudnn_comm_nccl_unique_id(tp_id) != RUDNN_STATUS_SUCCESS)
            fprintf(stderr, "rank %d: rudnn_comm_nccl_unique_id: %s\n", world_rank, rudnn_last_error());
        MPI_Bcast(tp_id, sizeof tp_id, MPI_BYTE, 0, tp);
    }
    return rudnn_comm_create_nccl(rt_ctx, ep_id, ep_rank, ep_size, tp != MPI_COMM_NULL ? tp_id : NULL, tp_rank,
                                  bytes, out);
}

/* rudnn_comm_create_nccl's own errors (all ranks alike, or agreed on), before the tests. */
static int nccl_contract(void)
{
    unsigned char id[RUDNN_COMM_NCCL_ID_BYTES] = {0};
    rudnn_comm_t c = NULL;
    int bad = 0;
#define EXPECT(call, want, what)                                                                                 \
    do {                                                                                                         \
        rudnn_status_t st_ = (call);                                                                             \
        if (st_ != (want) || c != NULL || !strstr(rudnn_last_error(), what)) {                                   \
            fprintf(stderr, "rank %d: %s gave %s (%s), expected %s naming '%s'\n", world_rank, #call,             \
                    rudnn_status_string(st_), rudnn_last_error(), rudnn_status_string(want), what);              \
            bad = 1;                                                                                             \
        }                                                                                                        \
    } while (0)
    EXPECT(rudnn_comm_nccl_unique_id(NULL), RUDNN_STATUS_BAD_PARAM, "id is NULL");
    EXPECT(rudnn_comm_create_nccl(rt_ctx, NULL, world_rank, world_size, NULL, 0, COMM_BYTES, &c),
           RUDNN_STATUS_BAD_PARAM, "ep_id is NULL");
    EXPECT(rudnn_comm_create_nccl(NULL, id, world_rank, world_size, NULL, 0, COMM_BYTES, &c),
           RUDNN_STATUS_BAD_PARAM, "context is NULL");
    EXPECT(rudnn_comm_create_nccl(rt_ctx, id, 0, 1, NULL, 0, COMM_BYTES, &c), RUDNN_STATUS_BAD_PARAM,
           "an EP group has 2..768");
    EXPECT(rudnn_comm_create_nccl(rt_ctx, id, world_size, world_size, NULL, 0, COMM_BYTES, &c),
           RUDNN_STATUS_BAD_PARAM, "ep_rank");
    EXPECT(rudnn_comm_create_nccl(rt_ctx, id, world_rank, world_size, id, 2, COMM_BYTES, &c),
           RUDNN_STATUS_BAD_PARAM, "tp_rank 2");
    /* rank 1 alone passes too small a buffer: every rank gets an error, nothing is made */
    if (world_rank == 0 && rudnn_comm_nccl_unique_id(id) != RUDNN_STATUS_SUCCESS)
        fprintf(stderr, "rudnn_comm_nccl_unique_id: %s\n", rudnn_last_error());
    MPI_Bcast(id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    EXPECT(rudnn_comm_create_nccl(rt_ctx, id, world_rank, world_size, NULL, 0,
                                  world_rank == 1 ? (size_t)1024 : COMM_BYTES, &c),
           RUDNN_STATUS_BAD_PARAM, world_rank == 1 ? "buffer_bytes 1024" : "an EP rank rejected its arguments");
#undef EXPECT
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (world_rank == 0)
        printf("ep-nccl: rudnn_comm_create_nccl's errors: %s\n", any ? "FAILED" : "as expected");
    return any;
}

static rudnn_status_t create_comm(int nccl, MPI_Comm *ep, MPI_Comm *tp, size_t bytes, rudnn_comm_t *out)
{
    return nccl ? create_nccl(*ep, tp ? *tp : MPI_COMM_NULL, bytes, out)
                : rudnn_comm_create_mpi(rt_ctx, ep, tp, bytes, out);
}

int main(int argc, char **argv)
{
    int nccl = 0, kept = 1;
    for (int i = 1; i < argc; i++) /* --comm=nccl is ours; the rest are test filters */
        if (!strcmp(argv[i], "--comm=nccl"))
            nccl = 1;
        else
            argv[kept++] = argv[i];
    argc = kept;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (world_size < 2 || world_size > 8) {
        fprintf(stderr, "test_ep_mpi: run under mpirun -np N, N in 2..8 (got %d)\n", world_size);
        MPI_Finalize();
        return 1;
    }
    if (nccl && getenv("RUDNN_TEST_NCCL_ONE_GPU") && !strcmp(getenv("RUDNN_TEST_NCCL_ONE_GPU"), "1")) {
        char host[64];
        snprintf(host, sizeof host, "rudnn-test-rank-%d", world_rank);
        setenv("NCCL_HOSTID", host, 1);
        setenv("NCCL_SOCKET_IFNAME", "lo", 0);
    }
    rt_open_or_skip(nccl ? "ep-nccl" : "ep-mpi");
    if (nccl) {
        rudnn_device_info_t dev;
        rt_assert_status(rudnn_context_device_info(rt_ctx, &dev), RUDNN_STATUS_SUCCESS);
        if (strcmp(dev.backend, "cuda") != 0) { /* every rank opens the same backend */
            printf("ep-nccl: SKIPPED: NCCL needs the cuda backend, this run has %s\n", dev.backend);
            rt_close();
            MPI_Finalize();
            return RT_EXIT_SKIP;
        }
    }
    const int contract_failed = nccl ? nccl_contract() : 0;
    MPI_Comm world = MPI_COMM_WORLD, ep_half = MPI_COMM_NULL, tp_pair = MPI_COMM_NULL;
    rt_assert_status(create_comm(nccl, &world, NULL, COMM_BYTES, &comm_flat), RUDNN_STATUS_SUCCESS);
    rt_assert_status(create_comm(nccl, &world, NULL, SMALL_COMM_BYTES, &comm_small), RUDNN_STATUS_SUCCESS);
    if (nccl) {
        rt_assert_status(create_comm(0, &world, NULL, COMM_BYTES, &mpi_flat), RUDNN_STATUS_SUCCESS);
        rt_assert_status(create_comm(0, &world, NULL, SMALL_COMM_BYTES, &mpi_small), RUDNN_STATUS_SUCCESS);
    }
    if (world_size >= 4 && world_size % 2 == 0) {
        MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &ep_half);
        MPI_Comm_split(MPI_COMM_WORLD, world_rank / 2, world_rank, &tp_pair);
        rt_assert_status(create_comm(nccl, &ep_half, &tp_pair, COMM_BYTES, &comm_grid), RUDNN_STATUS_SUCCESS);
        if (nccl)
            rt_assert_status(create_comm(0, &ep_half, &tp_pair, COMM_BYTES, &mpi_grid), RUDNN_STATUS_SUCCESS);
        MPI_Comm_free(&ep_half);
        MPI_Comm_free(&tp_pair);
    }
    size_t ncase = sizeof cases / sizeof cases[0], nerr = sizeof errors / sizeof errors[0];
    struct CMUnitTest *tests = calloc(ncase + nerr, sizeof *tests);
    for (size_t i = 0; i < ncase; i++)
        tests[i] = (struct CMUnitTest){cases[i].name, test_case, setup, teardown, (void *)&cases[i]};
    for (size_t i = 0; i < nerr; i++)
        tests[ncase + i] = (struct CMUnitTest){errors[i].name, test_error, setup, teardown, (void *)&errors[i]};
    char name[64];
    snprintf(name, sizeof name, "ep-%s rank %d/%d", nccl ? "nccl" : "mpi", world_rank, world_size);
    /* every rank must run the same tests: a filter applies to all of them alike */
    rt_set_filters(argc, argv);
    int failed = _cmocka_run_group_tests(name, tests, ncase + nerr, NULL, NULL) + contract_failed;
    free(tests);
    rudnn_comm_destroy(mpi_grid);
    rudnn_comm_destroy(mpi_small);
    rudnn_comm_destroy(mpi_flat);
    rudnn_comm_destroy(comm_grid);
    rudnn_comm_destroy(comm_small);
    rudnn_comm_destroy(comm_flat);
    rt_close();
    int any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return rt_exit_code(any);
}
