/* The CUDA/HIP norm launch policy (backends/cuda/norm_policy.h) on the CPU: for device
 * capabilities x op x dtype x row length, the kernel kind and its launch shape. The expected
 * values follow the policy's documented rules (its header, norm_tuning.h) at each threshold,
 * just below and just above it, on an H200 (sm_90: clusters, 227 KiB of shared memory), an
 * A100 (sm_80: no clusters, 163 KiB; and one byte less), a device with clusters and 99 KiB (sm_120), an AMD MI250
 * (HIP: wavefronts of 64, 64 KiB, no staging, prefetch or packed rows) and a small device.
 * They are the choices norm.cu's host code made before the policy moved here (checked against
 * it on every length up to 300000). No GPU needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "norm_kinds.h"

enum { H200, A100, A100_LESS, SM120, CL_EDGE, CL_LESS, MI250, SMALL, WARP0, NDEV };
static const rdg_norm_caps devices[NDEV] = {
    [H200] = {RDG_NORM_BACKEND_CUDA, 32, 1024, 232448, 1},
    [A100] = {RDG_NORM_BACKEND_CUDA, 32, 1024, 166912, 0},
    /* one byte less: what fits exactly on the A100 (with the static reserve) does not */
    [A100_LESS] = {RDG_NORM_BACKEND_CUDA, 32, 1024, 166911, 0},
    [SM120] = {RDG_NORM_BACKEND_CUDA, 32, 1024, 101376, 1},
    /* exactly a bulk cluster CTA of one group of a 16392-element layer_norm row, and one byte less */
    [CL_EDGE] = {RDG_NORM_BACKEND_CUDA, 32, 1024, 100448, 1},
    [CL_LESS] = {RDG_NORM_BACKEND_CUDA, 32, 1024, 100447, 1},
    [MI250] = {RDG_NORM_BACKEND_HIP, 64, 1024, 65536, 0},
    [SMALL] = {RDG_NORM_BACKEND_CUDA, 32, 256, 49152, 0},
    /* warp size and thread limit unknown (0): 32 and 1024 assumed, but no bulk kernel */
    [WARP0] = {RDG_NORM_BACKEND_CUDA, 0, 0, 232448, 1},
};
static const char *const device_names[NDEV] = {"H200",  "A100",  "A100 - 1 byte", "sm_120", "cluster edge",
                                               "cluster edge - 1 byte", "MI250", "small", "warp 0"};

enum { LN = RDG_NORM_LAYER_NORM, RMS = RDG_NORM_RMS_NORM, SM = RDG_NORM_SOFTMAX, ADD = RDG_NORM_ADD_RMS_NORM };
enum { X = -1 }; /* not checked */
enum { GB = RDG_NORM_STAGE_GAMMA_BETA, G = RDG_NORM_STAGE_GAMMA };

typedef struct policy_case {
    int device;
    int op;
    rudnn_dtype_t dtype;
    int64_t cols;
    int aligned;
    rdg_norm_kind kind;
    int f, csize, threads, rows_per_cta, prefetch, stage, grid_per_group;
} policy_case_t;

#define F32 RUDNN_F32
#define F16 RUDNN_F16
#define B16 RUDNN_BF16

static const policy_case_t cases[] = {
    /* dev, op, dtype, cols, aligned: kind, f, csize, threads, rows/CTA, prefetch, stage, grid */
    /* H200, F32: warp rows up to 8 w (F = 8) and 32 w (F = 32), 4 rows of 32 threads a CTA; a
     * CTA a row up to 8192 (F = 16), clusters of ceil(cols / 8192) up to 65536, then of
     * ceil(cols / 16384) at F = 32 up to 131072; the looped kernel beyond, for lengths that are
     * no whole number of vectors and for misaligned rows */
    {H200, RMS, F32, 256, 1, RDG_NORM_WARP, 8, 1, 128, 4, 0, GB, 1},
    {H200, RMS, F32, 260, 1, RDG_NORM_WARP, 32, 1, 128, 4, 0, GB, 1},
    {H200, RMS, F32, 1024, 1, RDG_NORM_WARP, 32, 1, 128, 4, 0, GB, 1},
    {H200, RMS, F32, 1028, 1, RDG_NORM_CTA, 16, 1, 96, 1, 1, GB, 0},
    {H200, ADD, F32, 256, 1, RDG_NORM_WARP, 8, 1, 128, 4, 0, GB, 0}, /* add_rms_norm stays persistent */
    {H200, SM, F32, 1024, 1, RDG_NORM_WARP, 32, 1, 128, 4, 0, GB, 1},
    {H200, LN, F32, 8192, 1, RDG_NORM_CTA, 16, 1, 512, 1, 1, GB, 0},
    {H200, LN, F32, 8196, 1, RDG_NORM_CLUSTER, 16, 2, 288, 1, 1, GB, 0}, /* F32 layer_norm clusters prefetch */
    {H200, RMS, F32, 8196, 1, RDG_NORM_CLUSTER, 16, 2, 288, 1, 0, GB, 0}, /* F32 rms_norm clusters do not */
    {H200, RMS, F32, 65536, 1, RDG_NORM_CLUSTER, 16, 8, 512, 1, 0, GB, 0},
    {H200, RMS, F32, 65540, 1, RDG_NORM_CLUSTER, 32, 5, 416, 1, 0, GB, 0},
    {H200, RMS, F32, 131072, 1, RDG_NORM_CLUSTER, 32, 8, 512, 1, 0, GB, 0},
    {H200, RMS, F32, 131076, 1, RDG_NORM_LOOP, X, 1, 1024, 1, 0, X, 0},
    {H200, RMS, F32, 1001, 1, RDG_NORM_LOOP, X, 1, 1024, 1, 0, X, 0},
    {H200, RMS, F32, 4096, 0, RDG_NORM_LOOP, X, 1, 1024, 1, 0, X, 0},
    {H200, LN, F32, 3, 1, RDG_NORM_LOOP, X, 1, 32, 1, 0, X, 0},
    /* H200, 16-bit: warp rows up to 1024; layer_norm: two rows a thread up to 3072, then the bulk
     * kernel (groups of cols / 32 >= 128 threads), over a cluster above 16384 (slices of 16384)
     * up to 131072 */
    {H200, LN, B16, 1024, 1, RDG_NORM_WARP, 32, 1, 128, 4, 0, GB, 0}, /* 16-bit norms stay persistent */
    {H200, SM, B16, 1024, 1, RDG_NORM_WARP, 32, 1, 128, 4, 0, GB, 1}, /* 16-bit softmax does not */
    {H200, RMS, F16, 1024, 1, RDG_NORM_WARP, 32, 1, 128, 4, 0, GB, 0},
    {H200, LN, B16, 1032, 1, RDG_NORM_PAIR, 32, 1, 64, 2, 1, X, 0},
    {H200, LN, B16, 3072, 1, RDG_NORM_PAIR, 32, 1, 96, 2, 1, X, 0},
    {H200, LN, B16, 3080, 1, RDG_NORM_BULK, X, 1, 768, 6, X, X, 0},
    {H200, LN, F16, 8192, 1, RDG_NORM_BULK, X, 1, 768, 3, X, X, 0},
    {H200, LN, B16, 16384, 1, RDG_NORM_BULK, X, 1, 512, 1, X, X, 0},
    {H200, LN, B16, 16392, 1, RDG_NORM_BULK_CLUSTER, X, 2, 576, 2, X, X, 0},
    {H200, LN, B16, 131072, 1, RDG_NORM_BULK_CLUSTER, X, 8, 512, 1, X, X, 0},
    {H200, LN, B16, 131080, 1, RDG_NORM_LOOP, X, 1, 1024, 1, 0, X, 0},
    {H200, LN, B16, 8192, 0, RDG_NORM_LOOP, X, 1, 1024, 1, 0, X, 0},
    /* rms_norm: a CTA at F = 32 below the bulk kernel's 128-thread groups */
    {H200, RMS, B16, 1032, 1, RDG_NORM_CTA, 32, 1, 64, 1, 0, GB, 0},
    {H200, RMS, B16, 3072, 1, RDG_NORM_CTA, 32, 1, 96, 1, 0, GB, 0},
    {H200, RMS, B16, 3080, 1, RDG_NORM_BULK, X, 1, 768, 6, X, X, 0},
    {H200, RMS, F16, 8192, 1, RDG_NORM_BULK, X, 1, 768, 3, X, X, 0},
    {H200, RMS, B16, 65536, 1, RDG_NORM_BULK_CLUSTER, X, 4, 512, 1, X, X, 0},
    /* softmax: CTAs of up to 16384, clusters of 16384 a CTA with the next row prefetched; two rows
     * a thread over 5 to 8 CTAs of at most 8192 (32768 < cols <= 65536) */
    {H200, SM, B16, 16384, 1, RDG_NORM_CTA, 32, 1, 512, 1, 0, GB, 0},
    {H200, SM, B16, 16392, 1, RDG_NORM_CLUSTER, 32, 2, 288, 1, 1, GB, 0},
    {H200, SM, B16, 32768, 1, RDG_NORM_CLUSTER, 32, 2, 512, 1, 1, GB, 0},
    {H200, SM, B16, 32776, 1, RDG_NORM_PAIR_CLUSTER, 32, 5, 224, 2, 1, X, 0},
    {H200, SM, F16, 65536, 1, RDG_NORM_PAIR_CLUSTER, 32, 8, 256, 2, 1, X, 0},
    {H200, SM, B16, 65544, 1, RDG_NORM_CLUSTER, 32, 5, 416, 1, 1, GB, 0},
    /* add_rms_norm: no bulk or pair kernel */
    {H200, ADD, B16, 8192, 1, RDG_NORM_CTA, 32, 1, 256, 1, 0, GB, 0},
    {H200, ADD, B16, 16392, 1, RDG_NORM_CLUSTER, 32, 2, 288, 1, 1, GB, 0},

    /* A100, no clusters: 16-bit rms_norm packed (F = 64) from 8192 to 16384; 16-bit layer_norm
     * two rows a thread while gamma, beta and two rows fit (12 bytes a column: up to 13824),
     * then one row a thread staging gamma only, with the next row prefetched; F32 rows of
     * 8192 to 16384 in one CTA at F = 32 */
    {A100, RMS, B16, 8184, 1, RDG_NORM_CTA, 32, 1, 256, 1, 0, GB, 0},
    {A100, RMS, B16, 8192, 1, RDG_NORM_PACKED, 64, 1, 128, 1, 0, GB, 0},
    {A100, RMS, F16, 16384, 1, RDG_NORM_PACKED, 64, 1, 256, 1, 0, GB, 0},
    {A100, RMS, B16, 16392, 1, RDG_NORM_LOOP, X, 1, 1024, 1, 0, X, 0},
    {A100, LN, B16, 3080, 1, RDG_NORM_PAIR, 32, 1, 128, 2, 1, X, 0},
    {A100, LN, B16, 13824, 1, RDG_NORM_PAIR, 32, 1, 448, 2, 1, X, 0},
    {A100_LESS, LN, B16, 13824, 1, RDG_NORM_CTA, 32, 1, 448, 1, 1, G, 0},
    {A100, LN, B16, 13832, 1, RDG_NORM_CTA, 32, 1, 448, 1, 1, G, 0},
    {A100, LN, F16, 16384, 1, RDG_NORM_CTA, 32, 1, 512, 1, 1, G, 0},
    {A100, RMS, F32, 8196, 1, RDG_NORM_CTA, 32, 1, 288, 1, 1, GB, 0},
    {A100, RMS, F32, 16384, 1, RDG_NORM_CTA, 32, 1, 512, 1, 1, GB, 0},
    {A100, RMS, F32, 16388, 1, RDG_NORM_LOOP, X, 1, 1024, 1, 0, X, 0},
    {A100, SM, B16, 16392, 1, RDG_NORM_LOOP, X, 1, 1024, 1, 0, X, 0},

    /* sm_120-like, clusters but 99 KiB: the bulk kernel where its buffers fit (fewer groups), the
     * packed cluster kernel for 16-bit rms_norm and two rows a thread or one (gamma staged) for
     * 16-bit layer_norm where they do not */
    {SM120, RMS, B16, 8192, 1, RDG_NORM_BULK, X, 1, 512, 2, X, X, 0},
    {SM120, RMS, B16, 16384, 1, RDG_NORM_PACKED, 64, 1, 256, 1, 0, GB, 0},
    {SM120, RMS, B16, 16392, 1, RDG_NORM_BULK_CLUSTER, X, 2, 576, 2, X, X, 0},
    {SM120, RMS, B16, 131072, 1, RDG_NORM_PACKED_CLUSTER, 64, 8, 256, 1, 1, GB, 0},
    {SM120, LN, B16, 16392, 1, RDG_NORM_BULK_CLUSTER, X, 2, 288, 1, X, X, 0},
    {CL_EDGE, LN, B16, 16392, 1, RDG_NORM_BULK_CLUSTER, X, 2, 288, 1, X, X, 0},
    {CL_LESS, LN, B16, 16392, 1, RDG_NORM_PAIR_CLUSTER, 32, 3, 192, 2, 1, X, 0},
    {SM120, LN, B16, 65536, 1, RDG_NORM_PAIR_CLUSTER, 32, 8, 256, 2, 1, X, 0},
    {SM120, LN, F16, 131072, 1, RDG_NORM_CLUSTER, 32, 8, 512, 1, 1, G, 0},

    /* MI250 (HIP): warp rows up to 8 x 64 and 32 x 64; nothing staged, prefetched or packed; no
     * clusters, pair or bulk kernels */
    {MI250, RMS, F32, 512, 1, RDG_NORM_WARP, 8, 1, 256, 4, 0, GB, 1},
    {MI250, RMS, F32, 516, 1, RDG_NORM_WARP, 32, 1, 256, 4, 0, GB, 1},
    {MI250, RMS, F32, 2048, 1, RDG_NORM_WARP, 32, 1, 256, 4, 0, GB, 1},
    {MI250, RMS, F32, 2052, 1, RDG_NORM_CTA, 16, 1, 192, 1, 0, GB, 0},
    {MI250, RMS, F32, 8196, 1, RDG_NORM_CTA, 32, 1, 320, 1, 0, GB, 0},
    {MI250, RMS, F32, 16388, 1, RDG_NORM_LOOP, X, 1, 1024, 1, 0, X, 0},
    {MI250, RMS, B16, 8192, 1, RDG_NORM_CTA, 32, 1, 256, 1, 0, GB, 0},
    {MI250, LN, B16, 8192, 1, RDG_NORM_CTA, 32, 1, 256, 1, 0, GB, 0},
    {MI250, SM, F16, 2048, 1, RDG_NORM_WARP, 32, 1, 256, 4, 0, GB, 1},
    {MI250, LN, F32, 3, 1, RDG_NORM_LOOP, X, 1, 64, 1, 0, X, 0},

    /* a device of 256 threads a CTA: a CTA of 512 is refused, the looped kernel takes 256 */
    {SMALL, RMS, F32, 4096, 1, RDG_NORM_CTA, 16, 1, 256, 1, 1, GB, 0},
    {SMALL, RMS, F32, 8192, 1, RDG_NORM_LOOP, X, 1, 256, 1, 0, X, 0},
    {SMALL, RMS, F32, 5000, 1, RDG_NORM_LOOP, X, 1, 256, 1, 0, X, 0},
    /* an unknown warp size: the bulk kernel (32-thread warps only) is not taken */
    {WARP0, LN, B16, 8192, 1, RDG_NORM_PAIR, 32, 1, 256, 2, 1, X, 0},
    {WARP0, RMS, F32, 256, 1, RDG_NORM_WARP, 8, 1, 128, 4, 0, GB, 1},
};

static int check_field(const char *what, const char *field, int want, int got)
{
    if (want == X || want == got)
        return 0;
    print_error("%s: %s is %d, expected %d\n", what, field, got, want);
    return 1;
}

static void test_choices(void **state)
{
    (void)state;
    int failures = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const policy_case_t *c = &cases[i];
        char what[160];
        snprintf(what, sizeof what, "%s op %d dtype %s cols %lld%s", device_names[c->device], c->op,
                 rudnn_dtype_name(c->dtype), (long long)c->cols, c->aligned ? "" : " (misaligned)");
        const rdg_norm_launch l = rdg_norm_choose(&devices[c->device], (rdg_norm_op)c->op, c->dtype, c->cols, c->aligned);
        int bad = 0;
        if (l.kind != c->kind) {
            print_error("%s: %s, expected %s\n", what, rdg_norm_kind_name(l.kind), rdg_norm_kind_name(c->kind));
            bad = 1;
        } else {
            bad |= check_field(what, "f", c->f, l.f);
            bad |= check_field(what, "csize", c->csize, l.csize);
            bad |= check_field(what, "threads", c->threads, l.threads);
            bad |= check_field(what, "rows_per_cta", c->rows_per_cta, l.rows_per_cta);
            bad |= check_field(what, "prefetch", c->prefetch, l.prefetch);
            bad |= check_field(what, "stage", c->stage, l.stage);
            bad |= check_field(what, "grid_per_group", c->grid_per_group, l.grid_per_group);
        }
        failures += bad;
    }
    assert_int_equal(failures, 0);
}

/* Launch shapes the kernels rely on, on every length: a CTA within the device's and the kernel's
 * thread limits in whole warps, a slice that covers the row, shared memory within the opt-in. */
static void test_shapes_fit(void **state)
{
    (void)state;
    static const rudnn_dtype_t dtypes[] = {RUDNN_F32, RUDNN_F16, RUDNN_BF16};
    long failures = 0;
    for (int dv = 0; dv < NDEV; dv++) {
        const rdg_norm_caps *caps = &devices[dv];
        const int w = caps->warp_size > 0 ? caps->warp_size : 32;
        const int max_thr = caps->max_threads > 0 ? caps->max_threads : 1024;
        for (int op = LN; op <= ADD; op++)
            for (int d = 0; d < 3; d++)
                for (int64_t cols = 1; cols <= 140000; cols++) {
                    const rdg_norm_launch l = rdg_norm_choose(caps, (rdg_norm_op)op, dtypes[d], cols, 1);
                    const int vec = dtypes[d] == RUDNN_F32 ? 4 : 8;
                    int ok = l.threads > 0 && l.threads <= max_thr && l.threads % w == 0 && l.csize >= 1 &&
                             l.csize <= RDG_NORM_MAX_CLUSTER && l.smem + RDG_NORM_STATIC_SMEM_RESERVE <= caps->smem_optin;
                    if (l.kind != RDG_NORM_LOOP)
                        ok = ok && (int64_t)l.slice_vec * l.csize * vec >= cols &&
                             (int64_t)l.slice_vec * (l.csize - 1) * vec < cols;
                    if (!ok && failures++ < 10)
                        print_error("%s op %d dtype %d cols %lld: %s, %d threads, cluster %d, slice %d, smem %zu\n",
                                    device_names[dv], op, d, (long long)cols, rdg_norm_kind_name(l.kind), l.threads,
                                    l.csize, l.slice_vec, l.smem);
                }
    }
    assert_int_equal(failures, 0);
}

/* Which kinds each device can get at all: the sm_90 H200 never needs the packed kernels (the
 * bulk kernel takes those rows), sm_120 with less shared memory gets all ten, the A100 no
 * cluster kind, HIP only the warp, CTA and looped kernels. */
static void test_reachable_kinds(void **state)
{
    (void)state;
#define K(k) (1u << RDG_NORM_##k)
    const unsigned want[NDEV] = {
        [H200] = K(LOOP) | K(WARP) | K(CTA) | K(CLUSTER) | K(PAIR) | K(PAIR_CLUSTER) | K(BULK) | K(BULK_CLUSTER),
        [A100] = K(LOOP) | K(WARP) | K(CTA) | K(PACKED) | K(PAIR),
        [A100_LESS] = K(LOOP) | K(WARP) | K(CTA) | K(PACKED) | K(PAIR),
        [SM120] = (1u << RDG_NORM_KIND_COUNT) - 1,
        [CL_EDGE] = (1u << RDG_NORM_KIND_COUNT) - 1,
        [CL_LESS] = (1u << RDG_NORM_KIND_COUNT) - 1,
        [MI250] = K(LOOP) | K(WARP) | K(CTA),
        [SMALL] = K(LOOP) | K(WARP) | K(CTA) | K(PACKED) | K(PAIR),
        [WARP0] = K(LOOP) | K(WARP) | K(CTA) | K(CLUSTER) | K(PACKED) | K(PACKED_CLUSTER) | K(PAIR) | K(PAIR_CLUSTER),
    };
#undef K
    for (int dv = 0; dv < NDEV; dv++) {
        const unsigned got = norm_kinds_reachable(&devices[dv]);
        if (got != want[dv])
            print_error("%s: kinds 0x%x, expected 0x%x\n", device_names[dv], got, want[dv]);
        assert_int_equal(got, want[dv]);
    }
}

/* One name per kind, "norm.<kind>", all distinct. */
static void test_kind_names(void **state)
{
    (void)state;
    for (int a = 0; a < RDG_NORM_KIND_COUNT; a++) {
        const char *na = rdg_norm_kind_name((rdg_norm_kind)a);
        assert_int_equal(strncmp(na, "norm.", 5), 0);
        assert_true(strlen(na) > 5);
        assert_string_not_equal(na, "norm.?");
        for (int b = 0; b < a; b++)
            assert_string_not_equal(na, rdg_norm_kind_name((rdg_norm_kind)b));
    }
    assert_string_equal(rdg_norm_kind_name(RDG_NORM_KIND_COUNT), "norm.?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_choices),
        cmocka_unit_test(test_shapes_fit),
        cmocka_unit_test(test_reachable_kinds),
        cmocka_unit_test(test_kind_names),
    };
    return cmocka_run_group_tests_name("norm-policy", tests, NULL, NULL);
}
