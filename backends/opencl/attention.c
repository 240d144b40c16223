/* The attention family's kernel table of the OpenCL plugin (backends/hal/attention.h): the
 * candidates, their check, workspace and run entries, and the kernel arguments both share. The
 * launchers are attention_flash.c and attention_fallback.c. Two candidates, most preferred first:
 *   attention.flash_unit  one fused online-softmax kernel (FlashUnit)
 *   attention.fallback    scores, softmax and P V as three kernels over an FP32 workspace
 * ops/attention.c chooses; ocl_attention_run runs exactly the one chosen. There is no matrix-unit
 * kernel here, so no FlashAccelerated candidate. */
#include <stdio.h>

#include "attention_tuning.h"
#include "ocl_attention.h"
#include "ocl_launch.h"

enum { C_FLASH_UNIT, C_FALLBACK, C_COUNT };

static const rudnn_kernel_candidate_t k_candidates[C_COUNT] = {
    {ATT_FLASH_UNIT_NAME, RUDNN_ATTENTION_FLASH_UNIT, 0},
    {ATT_FALLBACK_NAME, RUDNN_ATTENTION_FALLBACK, 0},
};

/* ---- arguments both candidates share ------------------------------------------------- */

/* A buffer the kernel reads only when present; absent ones stand in as another (never read). */
static cl_mem mem_or(rudnn_mem_ref_t ref, rudnn_mem_ref_t other)
{
    return (cl_mem)(ref.mem != NULL ? ref.mem : other.mem);
}

/* The plan and buffers as the kernels take them (absent buffers stand in as present ones). */
rudnn_status_t ocl_att_args(void *queue, const rudnn_attention_plan_t *plan, rudnn_mem_ref_t q,
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
    a->qs = ocl_long4_of(plan->q_stride);
    a->ks = ocl_long4_of(plan->k_stride);
    a->vs = ocl_long4_of(plan->v_stride);
    a->os = ocl_long4_of(plan->out_stride);

    a->has_mask = plan->has_mask && mask.mem != NULL;
    a->mm = mem_or(mask, q);
    a->mo = a->has_mask ? mask.offset : 0;
    a->ms = ocl_long4_of(plan->mask_stride);

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
    a->bs = ocl_long4_of(plan->bias_stride);

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

/* ---- the table entries --------------------------------------------------------------- */

static void ocl_attention_check(void *device, const rudnn_attention_plan_t *plan, uint32_t c,
                                rudnn_candidate_verdict_t *verdict)
{
    const ocl_device_t *dev = (const ocl_device_t *)device;
    verdict->runs = 0;
    verdict->preferred = 0;
    verdict->why[0] = '\0';
    const int flash_fits = ocl_att_flash_fits(dev, plan);
    char fallback_why[256];
    const int fallback_fits = !ocl_att_scores_unfit(dev, plan, fallback_why, sizeof fallback_why);
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
    if (ocl_att_scores_unfit((const ocl_device_t *)device, plan, why, sizeof why)) {
        return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED, ATT_OP ": opencl: %s", why);
    }
    *bytes = (size_t)ocl_att_scores_bytes(plan);
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
    RUDNN_TRY(ocl_att_args(queue, plan, q, k, v, mask, bias, out, lse, &a));
    if (c == C_FLASH_UNIT) {
        return ocl_att_run_flash(&a, plan);
    }
    return ocl_att_run_fallback(&a, plan, workspace);
}

const rudnn_attention_kernels_t ocl_attention_kernels = {
    .struct_size = sizeof(rudnn_attention_kernels_t),
    .candidates = k_candidates,
    .candidate_count = C_COUNT,
    .check = ocl_attention_check,
    .workspace = ocl_attention_workspace,
    .run = ocl_attention_run,
    .backward_workspace = ocl_attention_backward_workspace,
    .backward = ocl_attention_backward,
};
