/* Launch policy of the CUDA/HIP normalization kernels: which kernel kind a row of an op and
 * dtype runs, and its launch shape, from the device's capabilities. Plain C (C11 and C++17), no
 * GPU types: norm.cu calls it, tests/test_norm_policy.c checks it on the CPU.
 *
 * Register kernels (norm_reg.cuh) when every row is 16-byte aligned and cols is a whole number of
 * 16-byte vectors (w = warp size: 32 on NVIDIA, 32 or 64 on AMD):
 *   cols <= 8 w:        warp rows, F = 8 (4 rows per CTA)
 *   cols <= 32 w:       warp rows, F = 32
 *   cols <= 8192:       one CTA per row, F = 16 (16-bit data: F = 32, up to 16384)
 *   cols <= 65536:      a cluster of ceil(cols / 8192) CTAs, F = 16 (16-bit data: 16384 a CTA)
 *   cols <= 131072:     a cluster of ceil(cols / 16384) CTAs, F = 32
 *   without clusters:   one CTA, F = 32, up to 16384
 *   16-bit rms_norm rows of 8192 or more: packed, F = 64 (16384 a CTA of <= 256 threads)
 * In their place, where they fit:
 *   bulk kernel (norm_bulk.cuh; sm_90 with clusters): 16-bit layer_norm and rms_norm rows of
 *     one CTA (groups of cols / 32 >= 128 threads) or over a cluster (slices of 16384 at least)
 *   pair kernel (norm_pair.cuh; CUDA): 16-bit layer_norm rows the bulk kernel does not take, and
 *     16-bit softmax rows over 5 to 8 CTAs (32768 < cols <= 65536), two rows a thread
 * Anything else (odd lengths, misalignment, longer rows, no room in shared memory) runs the looped
 * kernel (norm_loop.cuh). The values are norm_tuning.h's. */
#ifndef RUDNN_NORM_POLICY_H
#define RUDNN_NORM_POLICY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rudnn/dtype.h"

#include "norm_tuning.h"

/* The kernel kinds, each with the name rudnn_last_kernel() reports for it and what it is. */
#define RDG_NORM_KINDS(X)                                                                           \
    X(LOOP, "norm.loop")                     /* any length or alignment: scalar loads, CTA a row */ \
    X(WARP, "norm.warp")                     /* register kernel: one warp a row */                  \
    X(CTA, "norm.cta")                       /* register kernel: one CTA a row */                   \
    X(CLUSTER, "norm.cluster")               /* register kernel: a cluster a row */                 \
    X(PACKED, "norm.packed")                 /* register kernel, 16-bit rows packed: one CTA */     \
    X(PACKED_CLUSTER, "norm.packed_cluster") /* ... over a cluster */                               \
    X(PAIR, "norm.pair")                     /* two rows a thread: one CTA */                       \
    X(PAIR_CLUSTER, "norm.pair_cluster")     /* ... over a cluster */                               \
    X(BULK, "norm.bulk")                     /* rows streamed by bulk copies: one CTA */            \
    X(BULK_CLUSTER, "norm.bulk_cluster")     /* ... over a cluster */

typedef enum rdg_norm_kind {
#define RDG_NORM_KIND_ENUM(kind, name) RDG_NORM_##kind,
    RDG_NORM_KINDS(RDG_NORM_KIND_ENUM)
#undef RDG_NORM_KIND_ENUM
    RDG_NORM_KIND_COUNT
} rdg_norm_kind;

static inline const char *rdg_norm_kind_name(rdg_norm_kind kind)
{
    switch (kind) {
#define RDG_NORM_KIND_NAME(k, name)                                                                \
    case RDG_NORM_##k:                                                                             \
        return name;
        RDG_NORM_KINDS(RDG_NORM_KIND_NAME)
#undef RDG_NORM_KIND_NAME
    default:
        return "norm.?";
    }
}

/* The ops (also the kernels' OP template argument). */
typedef enum rdg_norm_op {
    RDG_NORM_LAYER_NORM = 0,
    RDG_NORM_RMS_NORM = 1,
    RDG_NORM_SOFTMAX = 2,
    RDG_NORM_ADD_RMS_NORM = 3
} rdg_norm_op;

/* What the policy reads of a device: the plugin's per-device cache (rdg_devinfo_t, filled when
 * the device is opened) and which plugin's kernels run. */
typedef struct rdg_norm_caps {
    rdg_norm_backend backend;
    int warp_size;     /* <= 0: 32 */
    int max_threads;   /* per CTA; <= 0: 1024 */
    size_t smem_optin; /* shared memory one CTA may use, static and dynamic */
    int clusters;      /* thread-block cluster launches usable (CUDA, sm_90+ code) */
} rdg_norm_caps;

/* Which of gamma/beta a register kernel stages in shared memory (its STAGE template argument;
 * the HIP kernels stage nothing whatever it says). */
enum { RDG_NORM_STAGE_GAMMA_BETA = 1, RDG_NORM_STAGE_GAMMA = 2 };

/* A kernel kind and its launch shape. */
typedef struct rdg_norm_launch {
    rdg_norm_kind kind;
    int f;              /* register and pair kernels: floats of a row per thread */
    int threads;        /* per CTA */
    int csize;          /* CTAs per row (the cluster size); 1 without a cluster */
    int rows_per_cta;   /* rows (row groups) a CTA holds at a time */
    int slice_vec;      /* 16-byte vectors of a row per CTA */
    size_t smem;        /* dynamic shared memory, bytes */
    int stage;          /* register kernels: RDG_NORM_STAGE_* */
    int prefetch;       /* register kernels: the next row copied to shared memory while this reduces */
    int stages;         /* bulk kernel: row buffers per group */
    int group_threads;  /* bulk kernel: threads per row group */
    int grid_per_group; /* warp rows: a CTA per row group over all rows, not a persistent grid */
} rdg_norm_launch;

static inline int64_t rdg_norm_ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

static inline int64_t rdg_norm_round_up(int64_t v, int64_t m)
{
    return rdg_norm_ceil_div(v, m) * m;
}

static inline int rdg_norm_warp_size(const rdg_norm_caps *caps)
{
    return caps->warp_size > 0 ? caps->warp_size : 32;
}

/* threads per CTA: the device's limit, at most limit */
static inline int rdg_norm_max_threads(const rdg_norm_caps *caps, int limit)
{
    return caps->max_threads > 0 && caps->max_threads < limit ? caps->max_threads : limit;
}

/* The looped kernel: one CTA of min(1024, cols rounded up to the warp size) threads per row. */
static inline rdg_norm_launch rdg_norm_loop_launch(const rdg_norm_caps *caps, int64_t cols)
{
    rdg_norm_launch c;
    memset(&c, 0, sizeof c);
    const int w = rdg_norm_warp_size(caps);
    const int max_thr = rdg_norm_max_threads(caps, RDG_NORM_LOOP_THREADS);
    c.kind = RDG_NORM_LOOP;
    c.csize = 1;
    c.rows_per_cta = 1;
    c.threads = (int)(cols < max_thr ? rdg_norm_round_up(cols, w) : (max_thr / w) * w);
    return c;
}

/* The bulk kernel for 16-bit layer_norm and rms_norm rows of nvec vectors, of one CTA or over a
 * cluster (cluster: the register kernel would split the row). A CTA's slice is the row, or over
 * a cluster slices of RDG_NORM_BULK_CLUSTER_SLICE elements at least (balanced, at most
 * RDG_NORM_MAX_CLUSTER CTAs). Groups of ceil(slice / RDG_NORM_BULK_NV) threads, as many per CTA
 * as RDG_NORM_BULK_THREADS and shared memory allow (gamma and beta once, then
 * RDG_NORM_BULK_STAGES slice buffers per group); the kernel needs 2 warps a group or more, so
 * that the group's first reduction has a barrier before the refill. Fills c, returns 1. */
static inline int rdg_norm_bulk_launch(const rdg_norm_caps *caps, rdg_norm_op op, int esize, int64_t nvec,
                                       int cluster, rdg_norm_launch *c)
{
    if ((op != RDG_NORM_LAYER_NORM && op != RDG_NORM_RMS_NORM) || esize != 2 || !caps->clusters ||
        caps->warp_size != 32)
        return 0;
    const int vec = 16 / esize;
    int64_t slice = nvec;
    int csize = 1;
    if (cluster) {
        csize = (int)rdg_norm_ceil_div(nvec, rdg_norm_ceil_div(RDG_NORM_BULK_CLUSTER_SLICE, vec));
        if (csize > RDG_NORM_MAX_CLUSTER)
            csize = RDG_NORM_MAX_CLUSTER;
        if (csize < 2)
            return 0;
        slice = rdg_norm_ceil_div(nvec, csize);
    }
    const int64_t t = rdg_norm_round_up(rdg_norm_ceil_div(slice, RDG_NORM_BULK_NV), 32);
    const int max_thr = rdg_norm_max_threads(caps, RDG_NORM_BULK_THREADS);
    if (t < RDG_NORM_BULK_MIN_GROUP_THREADS || t > max_thr)
        return 0;
    const size_t affine = (size_t)slice * vec * sizeof(float) * (op == RDG_NORM_LAYER_NORM ? 2 : 1);
    const size_t per_group = (size_t)RDG_NORM_BULK_STAGES * slice * 16;
    const size_t reserve = RDG_NORM_STATIC_SMEM_RESERVE + (cluster ? RDG_NORM_BULK_CLUSTER_SMEM_RESERVE : 0);
    int groups = (int)(max_thr / t);
    if (groups > RDG_NORM_BULK_MAX_GROUPS)
        groups = RDG_NORM_BULK_MAX_GROUPS;
    while (groups > 0 && affine + groups * per_group + reserve > caps->smem_optin)
        groups--;
    if (groups < 1)
        return 0;
    memset(c, 0, sizeof *c);
    c->kind = cluster ? RDG_NORM_BULK_CLUSTER : RDG_NORM_BULK;
    c->threads = (int)t * groups;
    c->group_threads = (int)t;
    c->csize = csize;
    c->rows_per_cta = groups;
    c->slice_vec = (int)slice;
    c->stages = RDG_NORM_BULK_STAGES;
    c->smem = affine + groups * per_group;
    return 1;
}

/* The pair kernel (two rows a thread) for 16-bit layer_norm rows of nvec vectors, and 16-bit
 * softmax rows the register kernel would split over a cluster (cluster), where the staged gamma
 * and beta (layer_norm) and two rows' prefetch buffers fit in shared memory. A CTA's slice is the
 * row when it is at most the op's minimum slice long (or the device has no clusters); longer rows
 * are split evenly over a cluster into slices of about that size, larger where that would take
 * more than RDG_NORM_MAX_CLUSTER CTAs. Softmax only over RDG_NORM_SOFTMAX16_PAIR_MIN_CTAS CTAs or
 * more, of at most RDG_NORM_SOFTMAX16_PAIR_MAX_SLICE elements. Fills c, returns 1. */
static inline int rdg_norm_pair_launch(const rdg_norm_caps *caps, rdg_norm_op op, int esize, int64_t nvec,
                                       int cluster, rdg_norm_launch *c)
{
    const int is_ln = op == RDG_NORM_LAYER_NORM;
    if (!RDG_NORM_BY_BACKEND(caps->backend == RDG_NORM_BACKEND_HIP, STAGES_AFFINE) ||
        !RDG_NORM_BY_BACKEND(caps->backend == RDG_NORM_BACKEND_HIP, PREFETCHES) || esize != 2 ||
        !(is_ln || (op == RDG_NORM_SOFTMAX && cluster)))
        return 0;
    const int w = rdg_norm_warp_size(caps);
    const int max_thr = rdg_norm_max_threads(caps, 1024);
    const int vec = 16 / esize;
    const int min_slice = is_ln ? RDG_NORM_LN16_PAIR_MIN_SLICE : RDG_NORM_SOFTMAX16_PAIR_MAX_SLICE;
    int64_t slice = rdg_norm_ceil_div(min_slice, vec);
    if (slice * RDG_NORM_MAX_CLUSTER < nvec)
        slice = rdg_norm_ceil_div(nvec, RDG_NORM_MAX_CLUSTER);
    if (slice > nvec || !caps->clusters)
        slice = nvec;
    const int csize = (int)rdg_norm_ceil_div(nvec, slice);
    slice = rdg_norm_ceil_div(nvec, csize); /* balanced */
    if (!is_ln && (slice * vec > RDG_NORM_SOFTMAX16_PAIR_MAX_SLICE || csize < RDG_NORM_SOFTMAX16_PAIR_MIN_CTAS))
        return 0;
    const int64_t thr = rdg_norm_round_up(rdg_norm_ceil_div(slice * vec, RDG_NORM_PAIR_F), w);
    /* gamma and beta (F32, layer_norm), then two rows' 16-byte vectors */
    const size_t smem = (is_ln ? (size_t)slice * vec * sizeof(float) * 2 : 0) + (size_t)slice * 16 * 2;
    if (thr > max_thr || thr > RDG_NORM_PAIR_CTA_ELEMS / RDG_NORM_PAIR_F ||
        smem + RDG_NORM_STATIC_SMEM_RESERVE > caps->smem_optin)
        return 0;
    memset(c, 0, sizeof *c);
    c->kind = csize > 1 ? RDG_NORM_PAIR_CLUSTER : RDG_NORM_PAIR;
    c->f = RDG_NORM_PAIR_F;
    c->threads = (int)thr;
    c->csize = csize;
    c->rows_per_cta = 2;
    c->slice_vec = (int)slice;
    c->smem = smem;
    c->prefetch = 1;
    return 1;
}

/* The kernel for rows of cols elements of op and dtype; aligned: every row, gamma and beta start
 * on 16 bytes. The choice does not depend on the row count: the grid is the launcher's (from the
 * kernel's occupancy, which may still send a launch to the looped kernel). */
static inline rdg_norm_launch rdg_norm_choose(const rdg_norm_caps *caps, rdg_norm_op op, rudnn_dtype_t dtype,
                                              int64_t cols, int aligned)
{
    rdg_norm_launch c;
    const int esize = dtype == RUDNN_F32 ? 4 : 2;
    const int vec = 16 / esize;
    const int w = rdg_norm_warp_size(caps);
    const int max_thr = rdg_norm_max_threads(caps, 1024);
    const int hip = caps->backend == RDG_NORM_BACKEND_HIP;
    if (!aligned || cols % vec != 0)
        return rdg_norm_loop_launch(caps, cols);

    /* the register kernel's shape */
    const int64_t nvec = cols / vec;
    const int wide = esize == 2;
    const int packed = RDG_NORM_BY_BACKEND(hip, PACKS_16BIT) && wide && op == RDG_NORM_RMS_NORM &&
                       cols >= RDG_NORM_PACKED_MIN_COLS;
    const int f_cta = packed ? 64 : wide ? RDG_NORM_F_16BIT : RDG_NORM_F_FP32;
    const int64_t cta_elems = packed ? RDG_NORM_CTA_ELEMS_PACKED
                              : wide ? RDG_NORM_CTA_ELEMS_32_PER_THREAD
                                     : RDG_NORM_CTA_ELEMS_16_PER_THREAD;
    rdg_norm_kind kind;
    int f, csize = 1;
    if (cols <= 8 * w) {
        kind = RDG_NORM_WARP;
        f = 8;
    } else if (cols <= 32 * w) {
        kind = RDG_NORM_WARP;
        f = 32;
    } else if (cols <= cta_elems) {
        kind = packed ? RDG_NORM_PACKED : RDG_NORM_CTA;
        f = f_cta;
    } else if (caps->clusters && cols <= RDG_NORM_MAX_CLUSTER * cta_elems) {
        kind = packed ? RDG_NORM_PACKED_CLUSTER : RDG_NORM_CLUSTER;
        f = f_cta;
        csize = (int)rdg_norm_ceil_div(cols, cta_elems);
    } else if (caps->clusters && !packed && cols <= RDG_NORM_MAX_CLUSTER * RDG_NORM_CTA_ELEMS_32_PER_THREAD) {
        kind = RDG_NORM_CLUSTER;
        f = 32;
        csize = (int)rdg_norm_ceil_div(cols, RDG_NORM_CTA_ELEMS_32_PER_THREAD);
    } else if (!caps->clusters && cols <= RDG_NORM_CTA_ELEMS_32_PER_THREAD) {
        kind = RDG_NORM_CTA;
        f = 32;
    } else {
        return rdg_norm_loop_launch(caps, cols);
    }
    const int warp_rows = kind == RDG_NORM_WARP;
    if (!warp_rows && rdg_norm_bulk_launch(caps, op, esize, nvec, csize > 1, &c))
        return c;
    /* the pair kernel takes over rows of the 16-bit F = 32 shapes */
    if ((kind == RDG_NORM_CTA || kind == RDG_NORM_CLUSTER) && f == 32 &&
        rdg_norm_pair_launch(caps, op, esize, nvec, kind == RDG_NORM_CLUSTER, &c))
        return c;

    const int64_t slice = rdg_norm_ceil_div(nvec, csize);
    const int64_t thr = warp_rows ? (int64_t)RDG_NORM_WARP_ROWS_PER_CTA * w
                                  : rdg_norm_round_up(rdg_norm_ceil_div(slice * vec, f), w);
    const int64_t group = warp_rows ? w : thr;
    if (thr > RDG_NORM_REG_MAX_THREADS || thr > max_thr || slice * vec > group * f)
        return rdg_norm_loop_launch(caps, cols);
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.f = f;
    c.threads = (int)thr;
    c.csize = csize;
    c.rows_per_cta = warp_rows ? RDG_NORM_WARP_ROWS_PER_CTA : 1;
    c.slice_vec = (int)slice;
    /* Warp-row CTAs take one row group each, the grid covering all rows, for F32 rows other than
     * add_rms_norm (not measured) and 16-bit softmax: [65536, 1024] and [65536, 256] level to
     * -4.4%; 16-bit rms_norm +3.5%, layer_norm +6.2%, so those stay persistent (sixth session) */
    c.grid_per_group = warp_rows && (dtype == RUDNN_F32 ? op != RDG_NORM_ADD_RMS_NORM : op == RDG_NORM_SOFTMAX);

    /* gamma (and beta, zeros when absent) staged in shared memory; 16-bit layer_norm stages gamma
     * only: its clusters read beta through the caches (the whole slice left one CTA per SM,
     * [4096, 65536] bf16 0.709 -> 0.595 ms, third session; gamma only 0.485 -> 0.454, sixth), its
     * CTAs prefetch the next row into the room saved ([8192, 16384] 0.245 -> 0.189, sixth) */
    const int prefetches = RDG_NORM_BY_BACKEND(hip, PREFETCHES);
    const int ln16 = op == RDG_NORM_LAYER_NORM && wide;
    const int ln16_cluster = ln16 && csize > 1 && kind == RDG_NORM_CLUSTER && f == 32;
    const int ln16_cta_prefetch = prefetches && ln16 && kind == RDG_NORM_CTA && f == 32;
    c.stage = ln16_cta_prefetch || ln16_cluster ? RDG_NORM_STAGE_GAMMA : RDG_NORM_STAGE_GAMMA_BETA;
    const int staged_arrays = !RDG_NORM_BY_BACKEND(hip, STAGES_AFFINE) || op == RDG_NORM_SOFTMAX ? 0
                              : op == RDG_NORM_LAYER_NORM && c.stage == RDG_NORM_STAGE_GAMMA_BETA ? 2
                                                                                                 : 1;
    const size_t bytes = (size_t)slice * vec * sizeof(float) * staged_arrays;
    /* the next row's slice per row group (a and residual for add_rms_norm) */
    const size_t pf_bytes = (size_t)slice * 16 * (op == RDG_NORM_ADD_RMS_NORM ? 2 : 1) * c.rows_per_cta;
    /* the prefetch pays for F32 rows of one CTA, F32 layer_norm clusters ([4096, 65536] 0.980 ->
     * 0.901 ms, third session), 16-bit rows over a cluster and the 16-bit layer_norm CTAs above;
     * everywhere it cost F32 rms_norm +9.2%, add_rms_norm +7.9%, bf16 rms_norm CTAs +4.6% (sixth) */
    const int want_prefetch = ln16_cta_prefetch || (!warp_rows && (wide ? csize > 1 : csize == 1 || op == RDG_NORM_LAYER_NORM));
    if (prefetches && want_prefetch && bytes + pf_bytes + RDG_NORM_STATIC_SMEM_RESERVE <= caps->smem_optin) {
        c.prefetch = 1;
        c.smem = bytes + pf_bytes;
        return c;
    }
    if (bytes + RDG_NORM_STATIC_SMEM_RESERVE <= caps->smem_optin) {
        c.smem = bytes;
        return c;
    }
    return rdg_norm_loop_launch(caps, cols);
}

#endif
