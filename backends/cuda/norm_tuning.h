/* Tuning table of the CUDA/HIP normalization kernels: the measured defaults and the limits they
 * rest on, read by the kernels (norm_*.cuh) and by the launch policy (norm_policy.h) alike.
 * Plain C (C11 and C++17). The figures are H200 A/B runs of bench/RESULTS.md (its session named);
 * the variants that lost are in git history. */
#ifndef RUDNN_NORM_TUNING_H
#define RUDNN_NORM_TUNING_H

/* ---- per backend: what its norm kernels do ---- */

typedef enum rdg_norm_backend { RDG_NORM_BACKEND_CUDA = 0, RDG_NORM_BACKEND_HIP = 1 } rdg_norm_backend;

enum {
    /* gamma/beta staged in shared memory once per persistent CTA; HIP reads them through the
     * caches (64 KiB of LDS may not hold a row's gamma and beta) */
    RDG_NORM_CUDA_STAGES_AFFINE = 1,
    RDG_NORM_HIP_STAGES_AFFINE = 0,
    /* the next row copied into shared memory (cp.async, sm_80+) while this one reduces; HIP has
     * no asynchronous copy */
    RDG_NORM_CUDA_PREFETCHES = 1,
    RDG_NORM_HIP_PREFETCHES = 0,
    /* 16-bit rms_norm rows held packed at F = 64: [4096, 65536] -12.2% against F = 32; the same
     * for layer_norm +8-12%, softmax +5-8% (2026-11-29, fourth session); not measured on AMD */
    RDG_NORM_CUDA_PACKS_16BIT = 1,
    RDG_NORM_HIP_PACKS_16BIT = 0,
};
/* RDG_NORM_BY_BACKEND(hip, PREFETCHES): the HIP plugin's value (hip != 0) or the CUDA plugin's */
#define RDG_NORM_BY_BACKEND(hip, what) ((hip) ? RDG_NORM_HIP_##what : RDG_NORM_CUDA_##what)

/* ---- limits ---- */

enum {
    RDG_NORM_MAX_CLUSTER = 8,                  /* CTAs per cluster: the portable limit */
    RDG_NORM_STATIC_SMEM_RESERVE = 1024,       /* a kernel's static shared memory plus a margin */
    RDG_NORM_BULK_CLUSTER_SMEM_RESERVE = 1024, /* ... plus the bulk cluster kernels' group partials */
    RDG_NORM_LOOP_THREADS = 1024,              /* looped kernel: its launch bounds */
    RDG_NORM_REG_MAX_THREADS = 512,            /* register kernels of a CTA or cluster: their bounds */
    RDG_NORM_CTA_ELEMS_16_PER_THREAD = 8192,   /* elements a register CTA holds at F = 16: 512 x 16 */
    RDG_NORM_CTA_ELEMS_32_PER_THREAD = 16384,  /* ... at F = 32: 512 x 32 */
    RDG_NORM_CTA_ELEMS_PACKED = 16384,         /* ... packed 16-bit rows at F = 64: 256 x 64 */
    RDG_NORM_PAIR_CTA_ELEMS = 16384,           /* pair kernel: elements of each row per CTA, 512 x 32 */
    RDG_NORM_BULK_MAX_GROUPS = 8,              /* bulk kernel: row groups per CTA (static arrays) */
    RDG_NORM_BULK_MAX_STAGES = 4,              /* bulk kernel: buffers per group (static arrays) */
};

/* ---- measured defaults ---- */

enum {
    /* warp rows side by side in a CTA: 4 (128 threads); never A/B-measured against another count */
    RDG_NORM_WARP_ROWS_PER_CTA = 4,
    /* 16-bit data at F = 32 in CTAs and clusters, F32 data at F = 16 (64 bytes a thread either
     * way): bf16 rms_norm [16384, 8192] 66.7% -> 84.1% of copy, softmax 78.5% -> 84.4% (2026-11-29) */
    RDG_NORM_F_16BIT = 32,
    RDG_NORM_F_FP32 = 16,
    /* packed 16-bit rms_norm rows from 8192: [16384, 4096] packed +0.6% bf16, +2.3% f16
     * (2026-11-29, fourth session) */
    RDG_NORM_PACKED_MIN_COLS = 8192,
    /* pair kernel, 16-bit layer_norm: CTA slices of 8192 at least; [4096, 65536] -7.1% against
     * 16384; 4096 +9.2% and +16.9% at rows of 8192 and 16384 (2026-11-30, ninth session) */
    RDG_NORM_LN16_PAIR_MIN_SLICE = 8192,
    /* pair kernel, 16-bit softmax: rows over 5 CTAs or more of at most 8192: [4096, 65536] -3.2%;
     * 4 CTAs or fewer +1.5% to +2.7%, CTAs of 16384 +3.9% (2026-11-30, tenth session) */
    RDG_NORM_SOFTMAX16_PAIR_MAX_SLICE = 8192,
    RDG_NORM_SOFTMAX16_PAIR_MIN_CTAS = 5,
    /* pair kernel: 32 floats of each row a thread (128 registers); 16 +16% to +34%, bf16
     * layer_norm (2026-11-30, tenth session) */
    RDG_NORM_PAIR_F = 32,
    /* bulk kernel over a cluster: CTA slices of 16384 at least; bf16 [4096, 65536] layer_norm
     * -3.4%, rms_norm -2.8% against 8192 (2026-11-30, thirteenth session) */
    RDG_NORM_BULK_CLUSTER_SLICE = 16384,
    /* bulk kernel: 2 row buffers per group; 3 -0.2% to +0.6% (2026-11-30, twelfth session) */
    RDG_NORM_BULK_STAGES = 2,
    /* bulk kernel: 4 vectors (32 elements) of a row a thread, groups of cols / 32 threads; the
     * one size built (2026-11-30, twelfth session) */
    RDG_NORM_BULK_NV = 4,
    /* bulk kernel: 768 threads a CTA at most (80 registers); 1024 +2.2% to +6.3% layer_norm
     * (2026-11-30, twelfth session) */
    RDG_NORM_BULK_THREADS = 768,
    /* bulk kernel: groups of 128 threads at least (rows of 4096 or more), the shortest rows timed;
     * rows of 2048 keep their kernels (2026-11-30, twelfth session) */
    RDG_NORM_BULK_MIN_GROUP_THREADS = 128,
};

#endif
