/* attention.flash_unit on OpenCL: the shape of the fused kernel on a device (the one place it
 * is chosen, for the check and the launch alike) and its launch (kernels/attention.cl, part 1). */
#include <stdio.h>

#include "attention_tuning.h"
#include "ocl_attention.h"
#include "ocl_launch.h"

enum { K_FLASH, K_FLASH_COUNT };
static const char *const k_flash_names[K_FLASH_COUNT] = {"rudnn_attention_flash"};

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
    const uint64_t d = (uint64_t)plan->head_dim, dv = (uint64_t)plan->head_dim_v, f = sizeof(float);
    return ocl_local_arg_bytes(cfg->rows * d * f) + ocl_local_arg_bytes(cfg->keys * (d + 1) * f) +
           ocl_local_arg_bytes(cfg->keys * dv * f) + ocl_local_arg_bytes((uint64_t)cfg->rows * cfg->keys * f) +
           ocl_local_arg_bytes((uint64_t)cfg->rows * cfg->threads * f);
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
                 ATT_PART_FLASH, code, cfg->threads, cfg->dv_max);
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

int ocl_att_flash_fits(const ocl_device_t *dev, const rudnn_attention_plan_t *plan)
{
    flash_config_t cfg;
    return flash_config(dev, plan, &cfg);
}

rudnn_status_t ocl_att_run_flash(const att_args_t *a, const rudnn_attention_plan_t *plan)
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
    ocl_note_kernel(ATT_FLASH_UNIT_NAME);
    return ocl_enqueue_groups(a->q, ks, K_FLASH, k_flash_names, ATT_OP, args, groups, local);
}
