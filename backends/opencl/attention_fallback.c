/* attention.fallback on OpenCL: scores into an FP32 workspace, softmax in place, then P V
 * (kernels/attention.cl, part 2), and the size of that workspace. */
#include <stdio.h>

#include "attention_tuning.h"
#include "ocl_attention.h"
#include "ocl_launch.h"

enum { K_SCORES, K_SOFTMAX, K_PV, K_FALLBACK_COUNT };
static const char *const k_fallback_names[K_FALLBACK_COUNT] = {
    "rudnn_attention_scores",
    "rudnn_attention_softmax",
    "rudnn_attention_pv",
};

uint64_t ocl_att_scores_bytes(const rudnn_attention_plan_t *plan)
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

const char *ocl_att_scores_unfit(const ocl_device_t *dev, const rudnn_attention_plan_t *plan,
                                char *why, size_t cap)
{
    const uint64_t n = ocl_att_scores_bytes(plan);
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

rudnn_status_t ocl_att_run_fallback(const att_args_t *a, const rudnn_attention_plan_t *plan,
                                   rudnn_mem_ref_t workspace)
{
    ocl_queue_t *q = a->q;
    char why[256];
    if (ocl_att_scores_unfit(q->dev, plan, why, sizeof why)) {
        return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED, ATT_OP ": opencl: %s", why);
    }
    if (plan->seq_kv > 0 && workspace.mem == NULL) {
        return ocl_fail(RUDNN_STATUS_INTERNAL, ATT_OP ": opencl: attention.fallback got no workspace");
    }
    char options[64];
    snprintf(options, sizeof options, "-DATT_PART=%d -DRUDNN_DTYPE=%d", ATT_PART_FALLBACK, a->code);
    ocl_kernel_set_t *ks;
    RUDNN_TRY(ocl_program_get(q->dev, "attention.cl (fallback)", rudnn_ocl_src_attention, options,
                              k_fallback_names, K_FALLBACK_COUNT, &ks));
    cl_mem sm = workspace.mem != NULL ? (cl_mem)workspace.mem : a->om; /* Skv 0: never read */
    cl_ulong so = workspace.offset / sizeof(float);
    const uint64_t rows = (uint64_t)plan->batch * (uint64_t)plan->heads_q * (uint64_t)plan->seq_q;
    const uint64_t skv = (uint64_t)plan->seq_kv;
    ocl_note_kernel(ATT_FALLBACK_NAME);

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
