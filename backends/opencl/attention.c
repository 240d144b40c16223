/* The attention family's kernel table of the OpenCL plugin (backends/hal/attention.h) and the
 * host launchers of kernels/attention.cl. Two candidates, most preferred first:
 *   attention.flash_unit  one fused online-softmax kernel (FlashUnit)
 *   attention.fallback    scores, softmax and P V as three kernels over an FP32 workspace
 * ops/attention.c chooses; ocl_attention_run runs exactly the one chosen. There is no matrix-unit
 * kernel here, so no FlashAccelerated candidate. */
#include <stdio.h>

#include "backends/hal/attention.h"
#include "attention_tuning.h"
#include "ocl_internal.h"
#include "ocl_launch.h"

enum { C_FLASH_UNIT, C_FALLBACK, C_COUNT };

static const rudnn_kernel_candidate_t k_candidates[C_COUNT] = {
    {"attention.flash_unit", RUDNN_ATTENTION_FLASH_UNIT, 0},
    {"attention.fallback", RUDNN_ATTENTION_FALLBACK, 0},
};

enum { PART_FLASH = 1, PART_FALLBACK = 2 };

enum { K_FLASH, K_FLASH_COUNT };
static const char *const k_flash_names[K_FLASH_COUNT] = {"rudnn_attention_flash"};

enum { K_SCORES, K_SOFTMAX, K_PV, K_FALLBACK_COUNT };
static const char *const k_fallback_names[K_FALLBACK_COUNT] = {
    "rudnn_attention_scores",
    "rudnn_attention_softmax",
    "rudnn_attention_pv",
};

#define ATT_OP "attention"
#define ATT_NO_BIAS 3u /* kernels/attention.cl's bias_code for "no bias" */

/* ---- flash_unit: its shape on a device (the one place it is chosen) -------------------- */

typedef struct flash_config {
    unsigned rows;    /* query rows per work-group */
    unsigned keys;    /* keys per staged K/V tile */
    unsigned threads; /* work-items per query row (ATT_T) */
    unsigned dv_max;  /* Dv rounded up to 64, 128 or 256 (ATT_DV_MAX) */
} flash_config_t;

static size_t pow2_at_most(size_t v)
{
    size_t p = 1;
    while (p <= v / 2) {
        p *= 2;
    }
    return p;
}

/* Local memory of the flash kernel (kernels/attention.cl, part 1), bytes. */
static uint64_t flash_local_bytes(const rudnn_attention_plan_t *plan, const flash_config_t *cfg)
{
    const uint64_t d = (uint64_t)plan->head_dim, dv = (uint64_t)plan->head_dim_v;
    const uint64_t floats = cfg->rows * d + cfg->keys * (d + 1) + cfg->keys * dv +
                            (uint64_t)cfg->rows * cfg->keys + (uint64_t)cfg->rows * cfg->threads;
    return floats * sizeof(float);
}

/* The device type's starting shape, shrunk (keys, then rows) to the device's work-group and
 * local-memory limits; 0 when even the smallest does not fit. */
static int flash_config(const ocl_device_t *dev, const rudnn_attention_plan_t *plan,
                        flash_config_t *cfg)
{
    size_t limit = dev->max_group_size ? dev->max_group_size : 1;
    if (dev->max_item_size0 > 0 && dev->max_item_size0 < limit) {
        limit = dev->max_item_size0;
    }
    limit = pow2_at_most(limit);
    cfg->threads = dev->is_cpu ? ATT_CPU_THREADS_PER_ROW : ATT_GPU_THREADS_PER_ROW;
    cfg->rows = dev->is_cpu ? ATT_CPU_ROWS : ATT_GPU_ROWS;
    const unsigned group = cfg->rows * cfg->threads;
    while (cfg->rows > 1 && (int64_t)cfg->rows / 2 >= plan->seq_q) {
        cfg->rows /= 2; /* decode: no idle rows */
    }
    const unsigned max_threads = dev->is_cpu ? cfg->threads : ATT_GPU_MAX_THREADS_PER_ROW;
    while (cfg->threads < max_threads && cfg->rows * cfg->threads * 2 <= group) {
        cfg->threads *= 2; /* the work-items of the rows dropped serve the rows left */
    }
    while ((size_t)cfg->rows * cfg->threads > limit) {
        if (cfg->rows > 1) {
            cfg->rows /= 2;
        } else {
            cfg->threads /= 2;
        }
    }
    cfg->keys = ATT_MAX_KEYS;
    cfg->dv_max = plan->head_dim_v <= 64 ? 64u : plan->head_dim_v <= 128 ? 128u : 256u;
    while (flash_local_bytes(plan, cfg) > dev->local_mem) {
        if (cfg->keys > ATT_MIN_KEYS) {
            cfg->keys /= 2;
        } else if (cfg->rows > 1) {
            cfg->rows /= 2;
        } else {
            return 0;
        }
    }
    return 1;
}

/* The flash program for cfg, with rows (then threads) lowered to what the built kernel allows. */
static rudnn_status_t flash_program(ocl_queue_t *q, int code, flash_config_t *cfg,
                                    ocl_kernel_set_t **ks)
{
    for (;;) {
        char options[128];
        snprintf(options, sizeof options, "-DATT_PART=%d -DRUDNN_DTYPE=%d -DATT_T=%u -DATT_DV_MAX=%u",
                 PART_FLASH, code, cfg->threads, cfg->dv_max);
        RUDNN_TRY(ocl_program_get(q->dev, "attention.cl (flash)", rudnn_ocl_src_attention, options,
                                  k_flash_names, K_FLASH_COUNT, ks));
        const size_t max_group = (*ks)->max_group ? (*ks)->max_group : 1;
        while (cfg->rows > 1 && (size_t)cfg->rows * cfg->threads > max_group) {
            cfg->rows /= 2;
        }
        if ((size_t)cfg->rows * cfg->threads <= max_group) {
            return RUDNN_STATUS_SUCCESS;
        }
        if (cfg->threads == 1) {
            return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED,
                            ATT_OP ": opencl: %s allows no work-group for the flash kernel",
                            q->dev->name);
        }
        cfg->threads /= 2;
    }
}

/* ---- arguments both candidates share ------------------------------------------------- */

/* A buffer the kernel reads only when present; absent ones stand in as another (never read). */
static cl_mem mem_or(rudnn_mem_ref_t ref, rudnn_mem_ref_t other)
{
    return (cl_mem)(ref.mem != NULL ? ref.mem : other.mem);
}

static cl_long4 strides4(const int64_t s[3])
{
    cl_long4 v;
    v.s[0] = s[0];
    v.s[1] = s[1];
    v.s[2] = s[2];
    v.s[3] = 0;
    return v;
}

/* What the kernels of both candidates take, from the plan and the buffers. */
typedef struct att_args {
    ocl_queue_t *q;
    int code;    /* RUDNN_DTYPE */
    size_t elem; /* bytes per q/k/v/out element */
    cl_mem qm, km, vm, mm, bm, om, lm;
    cl_ulong qo, ko, vo, mo, bo, oo, lo;
    cl_long4 qs, ks, vs, ms, bs, os;
    cl_uint has_mask, bias_code, has_lse;
    cl_uint heads_q, group_size, d, dv;
    cl_long seq_q, seq_kv, window_left, window_right;
    float scale, softcap;
} att_args_t;

static rudnn_status_t att_args(void *queue, const rudnn_attention_plan_t *plan, rudnn_mem_ref_t q,
                               rudnn_mem_ref_t k, rudnn_mem_ref_t v, rudnn_mem_ref_t mask,
                               rudnn_mem_ref_t bias, rudnn_mem_ref_t out, rudnn_mem_ref_t lse,
                               att_args_t *a)
{
    a->q = (ocl_queue_t *)queue;
    RUDNN_TRY(ocl_dtype_code(plan->dtype, ATT_OP, "q", &a->code, &a->elem));
    if ((uint64_t)plan->heads_q > UINT32_MAX) {
        return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED, ATT_OP ": opencl: heads_q = %lld exceeds %u",
                        (long long)plan->heads_q, (unsigned)UINT32_MAX);
    }
    a->qm = (cl_mem)q.mem;
    a->km = mem_or(k, q); /* Skv 0: k and v may have no memory; never read then */
    a->vm = mem_or(v, q);
    a->om = (cl_mem)out.mem;
    a->qo = q.offset / a->elem;
    a->ko = k.offset / a->elem;
    a->vo = v.offset / a->elem;
    a->oo = out.offset / a->elem;
    a->qs = strides4(plan->q_stride);
    a->ks = strides4(plan->k_stride);
    a->vs = strides4(plan->v_stride);
    a->os = strides4(plan->out_stride);

    a->has_mask = plan->has_mask && mask.mem != NULL;
    a->mm = mem_or(mask, q);
    a->mo = a->has_mask ? mask.offset : 0;
    a->ms = strides4(plan->mask_stride);

    a->bias_code = ATT_NO_BIAS;
    a->bo = 0;
    if (plan->has_bias && bias.mem != NULL) {
        int bcode;
        size_t belem;
        RUDNN_TRY(ocl_dtype_code(plan->bias_dtype, ATT_OP, "attn_bias", &bcode, &belem));
        a->bias_code = (cl_uint)bcode;
        a->bo = bias.offset / belem;
    }
    a->bm = mem_or(bias, q);
    a->bs = strides4(plan->bias_stride);

    a->has_lse = plan->has_lse && lse.mem != NULL;
    a->lm = mem_or(lse, out);
    a->lo = a->has_lse ? lse.offset / sizeof(float) : 0;

    a->heads_q = (cl_uint)plan->heads_q;
    a->group_size = (cl_uint)(plan->heads_q / plan->heads_kv);
    a->seq_q = plan->seq_q;
    a->seq_kv = plan->seq_kv;
    a->d = (cl_uint)plan->head_dim;
    a->dv = (cl_uint)plan->head_dim_v;
    a->window_left = plan->window_left;
    a->window_right = plan->window_right;
    a->scale = plan->scale;
    a->softcap = plan->softcap;
    return RUDNN_STATUS_SUCCESS;
}

/* ---- flash_unit ---------------------------------------------------------------------- */

static rudnn_status_t run_flash(const att_args_t *a, const rudnn_attention_plan_t *plan)
{
    flash_config_t cfg;
    if (!flash_config(a->q->dev, plan, &cfg)) {
        return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED,
                        ATT_OP ": opencl: the flash tiles for D %lld, Dv %lld exceed %s's local memory",
                        (long long)plan->head_dim, (long long)plan->head_dim_v, a->q->dev->name);
    }
    ocl_kernel_set_t *ks;
    RUDNN_TRY(flash_program(a->q, a->code, &cfg, &ks));
    const size_t d = a->d, dv = a->dv;
    cl_uint rows = cfg.rows, keys = cfg.keys;
    const size_t local = (size_t)rows * cfg.threads;
    const uint64_t q_tiles = ((uint64_t)plan->seq_q + rows - 1) / rows;
    const uint64_t groups = (uint64_t)plan->batch * (uint64_t)plan->heads_q * q_tiles;
    const karg_list_t args = KARGS(
        ARG(a->qm), ARG(a->qo), ARG(a->qs), ARG(a->km), ARG(a->ko), ARG(a->ks), ARG(a->vm),
        ARG(a->vo), ARG(a->vs), ARG(a->mm), ARG(a->mo), ARG(a->ms), ARG(a->has_mask), ARG(a->bm),
        ARG(a->bo), ARG(a->bs), ARG(a->bias_code), ARG(a->om), ARG(a->oo), ARG(a->os), ARG(a->lm),
        ARG(a->lo), ARG(a->has_lse), GROUP0_ARG(), ARG(a->heads_q), ARG(a->group_size),
        ARG(a->seq_q), ARG(a->seq_kv), ARG(a->d), ARG(a->dv), ARG(a->scale), ARG(a->softcap),
        ARG(a->window_left), ARG(a->window_right), ARG(rows), ARG(keys),
        LOCAL_ARG(rows * d * sizeof(float)), LOCAL_ARG(keys * (d + 1) * sizeof(float)),
        LOCAL_ARG(keys * dv * sizeof(float)), LOCAL_ARG((size_t)rows * keys * sizeof(float)),
        LOCAL_ARG(local * sizeof(float)));
    ocl_note_kernel(k_candidates[C_FLASH_UNIT].name);
    return ocl_enqueue_groups(a->q, ks, K_FLASH, k_flash_names, ATT_OP, args, groups, local);
}

/* ---- fallback ------------------------------------------------------------------------ */

/* Bytes of the fallback's FP32 scores, B * Hq * Sq * Skv * 4; 0 when that overflows. */
static uint64_t scores_bytes(const rudnn_attention_plan_t *plan)
{
    const uint64_t dims[5] = {(uint64_t)plan->batch, (uint64_t)plan->heads_q,
                              (uint64_t)plan->seq_q, (uint64_t)plan->seq_kv, sizeof(float)};
    uint64_t n = 1;
    for (int i = 0; i < 5; i++) {
        if (dims[i] != 0 && n > UINT64_MAX / dims[i]) {
            return 0;
        }
        n *= dims[i];
    }
    return n;
}

/* Why the scores do not fit this device (NULL when they do). */
static const char *scores_unfit(const ocl_device_t *dev, const rudnn_attention_plan_t *plan,
                                char *why, size_t cap)
{
    const uint64_t n = scores_bytes(plan);
    if (plan->seq_kv == 0) {
        return NULL;
    }
    if (n == 0 || n > SIZE_MAX) {
        snprintf(why, cap, "the fallback's scores (B*Hq*Sq*Skv floats) overflow size_t");
        return why;
    }
    if (n > dev->max_alloc) {
        snprintf(why, cap,
                 "the fallback's scores need %llu bytes, over the device's largest allocation "
                 "(%llu)",
                 (unsigned long long)n, (unsigned long long)dev->max_alloc);
        return why;
    }
    return NULL;
}

static rudnn_status_t run_fallback(const att_args_t *a, const rudnn_attention_plan_t *plan,
                                   rudnn_mem_ref_t workspace)
{
    ocl_queue_t *q = a->q;
    char why[256];
    if (scores_unfit(q->dev, plan, why, sizeof why)) {
        return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED, ATT_OP ": opencl: %s", why);
    }
    if (plan->seq_kv > 0 && workspace.mem == NULL) {
        return ocl_fail(RUDNN_STATUS_INTERNAL, ATT_OP ": opencl: attention.fallback got no workspace");
    }
    char options[64];
    snprintf(options, sizeof options, "-DATT_PART=%d -DRUDNN_DTYPE=%d", PART_FALLBACK, a->code);
    ocl_kernel_set_t *ks;
    RUDNN_TRY(ocl_program_get(q->dev, "attention.cl (fallback)", rudnn_ocl_src_attention, options,
                              k_fallback_names, K_FALLBACK_COUNT, &ks));
    cl_mem sm = workspace.mem != NULL ? (cl_mem)workspace.mem : a->om; /* Skv 0: never read */
    cl_ulong so = workspace.offset / sizeof(float);
    const uint64_t rows = (uint64_t)plan->batch * (uint64_t)plan->heads_q * (uint64_t)plan->seq_q;
    const uint64_t skv = (uint64_t)plan->seq_kv;
    ocl_note_kernel(k_candidates[C_FALLBACK].name);

    if (skv > 0) {
        const size_t local = ocl_pick_local(q->dev, ks, skv, ATT_FALLBACK_MAX_LOCAL);
        const karg_list_t args = KARGS(
            ARG(a->qm), ARG(a->qo), ARG(a->qs), ARG(a->km), ARG(a->ko), ARG(a->ks), ARG(a->mm),
            ARG(a->mo), ARG(a->ms), ARG(a->has_mask), ARG(a->bm), ARG(a->bo), ARG(a->bs),
            ARG(a->bias_code), ARG(sm), ARG(so), GROUP0_ARG(), ARG(a->heads_q),
            ARG(a->group_size), ARG(a->seq_q), ARG(a->seq_kv), ARG(a->d), ARG(a->scale),
            ARG(a->softcap), ARG(a->window_left), ARG(a->window_right),
            LOCAL_ARG((size_t)a->d * sizeof(float)));
        RUDNN_TRY(ocl_enqueue_groups(q, ks, K_SCORES, k_fallback_names, ATT_OP, args, rows, local));
    }
    {
        const size_t local = ocl_pick_local(q->dev, ks, skv, ATT_FALLBACK_MAX_LOCAL);
        const karg_list_t args = KARGS(ARG(sm), ARG(so), ARG(a->lm), ARG(a->lo), ARG(a->has_lse),
                                       GROUP0_ARG(), ARG(a->seq_kv),
                                       LOCAL_ARG(local * sizeof(float)));
        RUDNN_TRY(ocl_enqueue_groups(q, ks, K_SOFTMAX, k_fallback_names, ATT_OP, args, rows, local));
    }
    const size_t local = ocl_pick_local(q->dev, ks, (uint64_t)a->dv, ATT_FALLBACK_MAX_LOCAL);
    const karg_list_t args = KARGS(ARG(sm), ARG(so), ARG(a->vm), ARG(a->vo), ARG(a->vs),
                                   ARG(a->om), ARG(a->oo), ARG(a->os), GROUP0_ARG(),
                                   ARG(a->heads_q), ARG(a->group_size), ARG(a->seq_q),
                                   ARG(a->seq_kv), ARG(a->dv));
    return ocl_enqueue_groups(q, ks, K_PV, k_fallback_names, ATT_OP, args, rows, local);
}

/* ---- the table entries --------------------------------------------------------------- */

static void ocl_attention_check(void *device, const rudnn_attention_plan_t *plan, uint32_t c,
                                rudnn_candidate_verdict_t *verdict)
{
    const ocl_device_t *dev = (const ocl_device_t *)device;
    verdict->runs = 0;
    verdict->preferred = 0;
    verdict->why[0] = '\0';
    flash_config_t cfg;
    const int flash_fits = flash_config(dev, plan, &cfg);
    char fallback_why[256];
    const int fallback_fits = !scores_unfit(dev, plan, fallback_why, sizeof fallback_why);
    /* decode on a CPU device: the fallback's passes beat the fused kernel (attention_tuning.h) */
    const int decode_on_cpu = dev->is_cpu && plan->seq_q <= ATT_CPU_FALLBACK_MAX_SQ;
    switch (c) {
    case C_FLASH_UNIT:
        if (!flash_fits) {
            snprintf(verdict->why, sizeof verdict->why,
                     "the flash tiles for D %lld, Dv %lld exceed the device's local memory "
                     "(%llu bytes)",
                     (long long)plan->head_dim, (long long)plan->head_dim_v,
                     (unsigned long long)dev->local_mem);
            return;
        }
        verdict->runs = 1;
        verdict->preferred = !(decode_on_cpu && fallback_fits);
        if (!verdict->preferred) {
            snprintf(verdict->why, sizeof verdict->why,
                     "attention.fallback is faster for %lld query row(s) on CPU devices",
                     (long long)plan->seq_q);
        }
        return;
    case C_FALLBACK:
        if (!fallback_fits) {
            snprintf(verdict->why, sizeof verdict->why, "%s", fallback_why);
            return;
        }
        verdict->runs = 1;
        verdict->preferred = !flash_fits || decode_on_cpu;
        if (!verdict->preferred) {
            snprintf(verdict->why, sizeof verdict->why,
                     "attention.flash_unit is faster (no score matrix in memory)");
        }
        return;
    default:
        snprintf(verdict->why, sizeof verdict->why, "no candidate %u on opencl", (unsigned)c);
        return;
    }
}

static rudnn_status_t ocl_attention_workspace(void *device, const rudnn_attention_plan_t *plan,
                                              uint32_t c, size_t *bytes)
{
    *bytes = 0;
    if (c != C_FALLBACK) {
        return RUDNN_STATUS_SUCCESS;
    }
    char why[256];
    if (scores_unfit((const ocl_device_t *)device, plan, why, sizeof why)) {
        return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED, ATT_OP ": opencl: %s", why);
    }
    *bytes = (size_t)scores_bytes(plan);
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t ocl_attention_run(void *queue, const rudnn_attention_plan_t *plan,
                                        uint32_t c, rudnn_mem_ref_t q, rudnn_mem_ref_t k,
                                        rudnn_mem_ref_t v, rudnn_mem_ref_t mask,
                                        rudnn_mem_ref_t bias, rudnn_mem_ref_t out,
                                        rudnn_mem_ref_t lse, rudnn_mem_ref_t workspace)
{
    if (c >= C_COUNT) {
        return ocl_fail(RUDNN_STATUS_INTERNAL, ATT_OP ": opencl: no candidate %u", (unsigned)c);
    }
    att_args_t a;
    RUDNN_TRY(att_args(queue, plan, q, k, v, mask, bias, out, lse, &a));
    if (c == C_FLASH_UNIT) {
        return run_flash(&a, plan);
    }
    return run_fallback(&a, plan, workspace);
}

const rudnn_attention_kernels_t ocl_attention_kernels = {
    .struct_size = sizeof(rudnn_attention_kernels_t),
    .candidates = k_candidates,
    .candidate_count = C_COUNT,
    .check = ocl_attention_check,
    .workspace = ocl_attention_workspace,
    .run = ocl_attention_run,
};
