/* rudnn-bench-ep-comm: expert-parallel dispatch and combine + AddRmsNorm across ranks (issue 25's
 * speed figure), one process a device under mpirun:
 *
 *   mpirun -np 2 rudnn-bench-ep-comm [--comm nccl|mpi] [--bs 512] [--k 8] [--h 7168] [--experts 256]
 *                                    [--dtype bf16|f16|f32] [--reps 20] [--seed N]
 *
 * Each rank takes the device of its node-local rank (MPI_COMM_TYPE_SHARED; device 0 where there
 * are fewer devices) unless RUDNN_DEVICE is set, and BS tokens whose K experts are drawn uniformly without repeats; expert e lives on rank
 * e / (E / ranks). The experts are the identity (the combine takes the dispatch's expand_x back), no
 * shared-expert rows, no mask. Per repetition: a barrier, then the dispatch, then the combine, each
 * timed on the host (both ops synchronise their queue before returning: ep.h), and each time reduced
 * to the slowest rank's; the median and minimum of those over --reps (after 3 untimed rounds).
 *
 * Rank 0 prints one JSON line each, with bench/baselines/torch_ep.py's keys so that the two
 * compare line by line: {"op" (ep_dispatch, ep_combine, ep_layer: both back to back), "bs", "k",
 * "h", "experts", "ranks", "dtype", "backend", "comm", "device", "median_ms", "min_ms", "bytes"
 * (rank 0's rows sent to other ranks, H elements each; twice that for ep_layer), "all_bytes" (all its
 * rows, those that stay included), "gbps" (bytes / median), "reps"}. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "bench_util.h"
#include "rudnn/comm.h"
#include "rudnn/ep.h"
#include "rudnn/rudnn.h"

#define PROG "rudnn-bench-ep-comm"
#define WARMUP 3
#define MIB ((size_t)1 << 20)

#define CHECK(call)                                                                                              \
    do {                                                                                                         \
        rudnn_status_t check_st_ = (call);                                                                       \
        if (check_st_ != RUDNN_STATUS_SUCCESS) {                                                                 \
            fprintf(stderr, "rank %d: ", g_rank);                                                                \
            bench_die(PROG, #call, check_st_);                                                                   \
        }                                                                                                        \
    } while (0)

static int g_rank, g_ranks;

static uint64_t rng_state;
static uint32_t next_u32(void)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}
static float next_unit(void) { return (float)(next_u32() >> 8) / (float)(1u << 24); }

typedef struct bench {
    rudnn_context_t ctx;
    rudnn_queue_t q;
    rudnn_dtype_t dt;
} bench_t;

/* A new buffer of n elements of dt from the floats v (F32 / F16 / BF16; I32 / I64 / BOOL raw). */
static rudnn_buffer_t upload(bench_t *b, rudnn_dtype_t dt, const void *v, size_t n)
{
    const size_t es = rudnn_dtype_size(dt), bytes = n * es;
    rudnn_buffer_t buf;
    CHECK(rudnn_buffer_create(b->ctx, bytes ? bytes : 1, &buf));
    if (!v || !bytes)
        return buf;
    if (dt == RUDNN_F16 || dt == RUDNN_BF16) {
        uint16_t *h = bench_xmalloc(PROG, bytes);
        for (size_t i = 0; i < n; i++)
            h[i] = dt == RUDNN_F16 ? rudnn_f32_to_f16(((const float *)v)[i]) : rudnn_f32_to_bf16(((const float *)v)[i]);
        CHECK(rudnn_buffer_write(b->q, buf, 0, h, bytes));
        free(h);
    } else {
        CHECK(rudnn_buffer_write(b->q, buf, 0, v, bytes));
    }
    return buf;
}

static void tensor(rudnn_tensor_t *t, rudnn_buffer_t buf, rudnn_dtype_t dt, int rank, const int64_t *dims)
{
    CHECK(rudnn_tensor_init(t, buf, 0, dt, rank, dims));
}

static float *random_floats(size_t n, float lo, float hi)
{
    float *v = bench_xmalloc(PROG, n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = lo + (hi - lo) * next_unit();
    return v;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median (the mean of the middle two for an even count, as bench_util) and minimum of t[0..n). */
static void stats(double *t, int n, double *median, double *minimum)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    *median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    *minimum = t[0];
}

static void print_line(const char *op, const char *comm, int64_t bs, int64_t k, int64_t h, int64_t experts,
                       rudnn_dtype_t dt, const rudnn_device_info_t *dev, double median, double minimum,
                       double bytes, double all_bytes, int reps)
{
    printf("{\"op\":\"%s\",\"bs\":%lld,\"k\":%lld,\"h\":%lld,\"experts\":%lld,\"ranks\":%d,\"dtype\":\"%s\","
           "\"backend\":",
           op, (long long)bs, (long long)k, (long long)h, (long long)experts, g_ranks, rudnn_dtype_name(dt));
    bench_json_string(dev->backend);
    printf(",\"comm\":\"%s\",\"device\":", comm);
    bench_json_string(dev->name);
    printf(",\"median_ms\":%.6f,\"min_ms\":%.6f,\"bytes\":%.0f,\"all_bytes\":%.0f,\"gbps\":%.1f,\"reps\":%d}\n",
           median, minimum, bytes, all_bytes, bytes / (median * 1e6), reps);
    fflush(stdout);
}

/* This rank's device: its node-local rank, unless RUDNN_DEVICE says otherwise. */
static int local_device(void)
{
    const char *env = getenv("RUDNN_DEVICE");
    if (env && *env)
        return -1; /* the context reads RUDNN_DEVICE */
    MPI_Comm node;
    int local = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    return local;
}

static rudnn_comm_t make_comm(bench_t *b, int nccl, size_t bytes)
{
    rudnn_comm_t comm = NULL;
    if (!nccl) {
        MPI_Comm world = MPI_COMM_WORLD;
        CHECK(rudnn_comm_create_mpi(b->ctx, &world, NULL, bytes, &comm));
        return comm;
    }
    unsigned char id[RUDNN_COMM_NCCL_ID_BYTES] = {0};
    if (g_rank == 0)
        CHECK(rudnn_comm_nccl_unique_id(id));
    MPI_Bcast(id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    CHECK(rudnn_comm_create_nccl(b->ctx, id, g_rank, g_ranks, NULL, 0, bytes, &comm));
    return comm;
}

static int usage(void)
{
    if (g_rank == 0)
        fprintf(stderr, "usage: mpirun -np N " PROG " [--comm nccl|mpi] [--bs N] [--k N] [--h N] [--experts N] "
                        "[--dtype bf16|f16|f32] [--reps N] [--seed N]\n");
    MPI_Finalize();
    return 2;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_ranks);
    int64_t bs = 512, k = 8, h = 7168, experts = 256;
    int reps = 20, nccl = 1;
    uint64_t seed = 1234;
    rudnn_dtype_t dt = RUDNN_BF16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return usage();
        if (!strcmp(a, "--comm") && (!strcmp(v, "nccl") || !strcmp(v, "mpi")))
            nccl = !strcmp(v, "nccl");
        else if (!strcmp(a, "--bs"))
            bs = atoll(v);
        else if (!strcmp(a, "--k"))
            k = atoll(v);
        else if (!strcmp(a, "--h"))
            h = atoll(v);
        else if (!strcmp(a, "--experts"))
            experts = atoll(v);
        else if (!strcmp(a, "--reps"))
            reps = atoi(v);
        else if (!strcmp(a, "--seed"))
            seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--dtype") && (!strcmp(v, "bf16") || !strcmp(v, "f16") || !strcmp(v, "f32")))
            dt = !strcmp(v, "f32") ? RUDNN_F32 : !strcmp(v, "f16") ? RUDNN_F16 : RUDNN_BF16;
        else
            return usage();
        i++;
    }
    if (g_ranks < 2 || bs < 1 || k < 1 || k > experts || reps < 1 || experts % g_ranks) {
        if (g_rank == 0)
            fprintf(stderr, PROG ": 2 ranks or more, bs >= 1, k in 1..experts, reps >= 1, experts divisible by "
                            "the ranks (the ops check the rest)\n");
        MPI_Finalize();
        return 2;
    }
    rng_state = 0x9e3779b97f4a7c15ULL ^ (seed * 0x100000001b3ULL + (uint64_t)g_rank);

    bench_t b = {.dt = dt};
    rudnn_context_options_t opts = {.backend = NULL, .device = local_device(), .plugin_path = NULL};
    if (rudnn_context_create(&b.ctx, &opts) != RUDNN_STATUS_SUCCESS && opts.device > 0) {
        /* fewer devices than ranks on the node (a CPU device, one GPU): they share device 0 */
        fprintf(stderr, "rank %d: device %d: %s; using device 0\n", g_rank, opts.device, rudnn_last_error());
        opts.device = 0;
        CHECK(rudnn_context_create(&b.ctx, &opts));
    }
    CHECK(rudnn_queue_create(b.ctx, &b.q));
    rudnn_device_info_t dev;
    CHECK(rudnn_context_device_info(b.ctx, &dev));

    const int64_t L = experts / g_ranks, A = bs * g_ranks * (L < k ? L : k);
    const size_t es = rudnn_dtype_size(dt);
    /* ep.h: (buffer_bytes - 2 MiB) / 2 >= maxBS e (H + 128) (ep_size L + K + 1) */
    const size_t comm_bytes = 2 * MIB + 2 * (size_t)bs * es * (size_t)(h + 128) * (size_t)(g_ranks * L + k + 1);
    rudnn_comm_t comm = make_comm(&b, nccl, comm_bytes);

    /* inputs: K distinct experts a token (a partial shuffle of 0 .. E-1) */
    int32_t *ids = bench_xmalloc(PROG, (size_t)(bs * k) * sizeof *ids);
    int32_t *pool = bench_xmalloc(PROG, (size_t)experts * sizeof *pool);
    int64_t remote_rows = 0;
    for (int64_t t = 0; t < bs; t++) {
        for (int64_t e = 0; e < experts; e++)
            pool[e] = (int32_t)e;
        for (int64_t s = 0; s < k; s++) {
            const int64_t j = s + (int64_t)(next_u32() % (uint32_t)(experts - s));
            const int32_t id = pool[j];
            pool[j] = pool[s], pool[s] = id;
            ids[t * k + s] = id;
            remote_rows += id / L != g_rank;
        }
    }
    float *x = random_floats((size_t)(bs * h), -1.0f, 1.0f), *res = random_floats((size_t)(bs * h), -1.0f, 1.0f);
    float *gamma = random_floats((size_t)h, 0.5f, 1.5f), *scales = random_floats((size_t)(bs * k), 0.0f, 1.0f);
    for (int64_t t = 0; t < bs; t++) { /* a token's scales sum to 1, as after a softmax */
        float sum = 0.0f;
        for (int64_t s = 0; s < k; s++)
            sum += scales[t * k + s];
        for (int64_t s = 0; s < k; s++)
            scales[t * k + s] /= sum;
    }
    rudnn_buffer_t bx = upload(&b, dt, x, (size_t)(bs * h)), bids = upload(&b, RUDNN_I32, ids, (size_t)(bs * k));
    rudnn_buffer_t bres = upload(&b, dt, res, (size_t)(bs * h)), bgamma = upload(&b, dt, gamma, (size_t)h);
    rudnn_buffer_t bscales = upload(&b, RUDNN_F32, scales, (size_t)(bs * k));
    rudnn_buffer_t bexp = upload(&b, dt, NULL, (size_t)(A * h)), bassist = upload(&b, RUDNN_I32, NULL, (size_t)(A * 3));
    rudnn_buffer_t betn = upload(&b, RUDNN_I64, NULL, (size_t)L);
    rudnn_buffer_t berc = upload(&b, RUDNN_I32, NULL, (size_t)(L * g_ranks));
    rudnn_buffer_t by = upload(&b, dt, NULL, (size_t)(bs * h)), bxo = upload(&b, dt, NULL, (size_t)(bs * h));
    rudnn_buffer_t brstd = upload(&b, RUDNN_F32, NULL, (size_t)bs);
    free(x), free(res), free(gamma), free(scales), free(pool), free(ids);

    rudnn_tensor_t tx, tids, texp, tassist, tetn, terc, tscales, tres, tgamma, ty, trstd, txo;
    tensor(&tx, bx, dt, 2, (int64_t[]){bs, h});
    tensor(&tids, bids, RUDNN_I32, 2, (int64_t[]){bs, k});
    tensor(&texp, bexp, dt, 2, (int64_t[]){A, h});
    tensor(&tassist, bassist, RUDNN_I32, 2, (int64_t[]){A, 3});
    tensor(&tetn, betn, RUDNN_I64, 1, (int64_t[]){L});
    tensor(&terc, berc, RUDNN_I32, 1, (int64_t[]){L * g_ranks});
    tensor(&tscales, bscales, RUDNN_F32, 2, (int64_t[]){bs, k});
    tensor(&tres, bres, dt, 3, (int64_t[]){bs, 1, h});
    tensor(&tgamma, bgamma, dt, 1, (int64_t[]){h});
    tensor(&ty, by, dt, 3, (int64_t[]){bs, 1, h});
    tensor(&trstd, brstd, RUDNN_F32, 3, (int64_t[]){bs, 1, 1});
    tensor(&txo, bxo, dt, 3, (int64_t[]){bs, 1, h});

    const rudnn_ep_params_t params = {.moe_expert_num = experts, .expert_token_nums_type = 1};
    const rudnn_ep_dispatch_in_t din = {&tx, &tids, NULL, NULL};
    const rudnn_ep_dispatch_out_t dout = {&texp, &tassist, &tetn, &terc, NULL};
    rudnn_ep_combine_in_t cin;
    memset(&cin, 0, sizeof cin);
    cin.expand_x = &texp; /* identity experts: the received rows go back as they came */
    cin.expert_ids = &tids;
    cin.assist_info = &tassist;
    cin.ep_send_counts = &terc;
    cin.expert_scales = &tscales;
    cin.residual = &tres;
    cin.gamma = &tgamma;
    cin.norm_eps = 1e-6f;
    const rudnn_ep_combine_out_t cout = {&ty, &trstd, &txo};
    size_t ws_bytes = 0;
    CHECK(rudnn_ep_combine_workspace_size(b.q, comm, &params, &cin, &cout, &ws_bytes));
    rudnn_buffer_t ws = NULL;
    if (ws_bytes)
        CHECK(rudnn_buffer_create(b.ctx, ws_bytes, &ws));

    double *td = bench_xmalloc(PROG, (size_t)reps * sizeof *td), *tc = bench_xmalloc(PROG, (size_t)reps * sizeof *tc);
    double *tl = bench_xmalloc(PROG, (size_t)reps * sizeof *tl);
    for (int i = -WARMUP; i < reps; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        CHECK(rudnn_ep_dispatch(b.q, comm, &params, &din, &dout));
        const double t1 = MPI_Wtime();
        CHECK(rudnn_ep_combine_add_rms_norm(b.q, comm, &params, &cin, ws, ws_bytes, &cout));
        const double t2 = MPI_Wtime();
        if (i >= 0)
            td[i] = (t1 - t0) * 1e3, tc[i] = (t2 - t1) * 1e3, tl[i] = (t2 - t0) * 1e3;
    }
    /* each repetition as long as its slowest rank */
    MPI_Allreduce(MPI_IN_PLACE, td, reps, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, tc, reps, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, tl, reps, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (g_rank == 0) {
        const double bytes = (double)remote_rows * (double)h * (double)es;
        const double all_bytes = (double)(bs * k) * (double)h * (double)es;
        const char *cname = nccl ? "nccl" : "mpi";
        double med, mn;
        stats(td, reps, &med, &mn);
        print_line("ep_dispatch", cname, bs, k, h, experts, dt, &dev, med, mn, bytes, all_bytes, reps);
        stats(tc, reps, &med, &mn);
        print_line("ep_combine", cname, bs, k, h, experts, dt, &dev, med, mn, bytes, all_bytes, reps);
        stats(tl, reps, &med, &mn);
        print_line("ep_layer", cname, bs, k, h, experts, dt, &dev, med, mn, 2 * bytes, 2 * all_bytes, reps);
    }
    free(td), free(tc), free(tl);
    rudnn_buffer_t bufs[] = {bx, bids, bres, bgamma, bscales, bexp, bassist, betn, berc, by, bxo, brstd, ws};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        rudnn_buffer_destroy(bufs[i]);
    rudnn_comm_destroy(comm);
    rudnn_queue_destroy(b.q);
    rudnn_context_destroy(b.ctx);
    MPI_Finalize();
    return 0;
}
