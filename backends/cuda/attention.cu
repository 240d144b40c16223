/* The attention family's kernel table (hal/attention.h) on CUDA/HIP: the candidates, their check,
 * workspace and run entries, and the kernel arguments both share. The candidates, most preferred
 * first:
 *   attention.wgmma_tma   FlashBlackboxAccelerated: wgmma fed by TMA, warp-specialised (sm_90a,
 *                         F16/BF16, D and Dv <= 128; attention_wgmma.cu; CUDA only)
 *   attention.flash_decode  decode shapes: fused, split-KV, K/V once per K/V head (attention_decode.cu)
 *   attention.flash_unit  one fused online-softmax kernel (attention_flash.cu)
 *   attention.fallback    scores, softmax and P V over an FP32 workspace (attention_fallback.cu)
 * ops/attention.c chooses; run runs exactly the one chosen. */
#include <stdio.h>
#include <string.h>

#include "rdg_internal.h"

#include "attention.cuh"
#include "attention_tuning.h"

namespace {

enum { C_WGMMA, C_FLASH_DECODE, C_FLASH_UNIT, C_FALLBACK, C_COUNT };

void att_check(void *device, const rudnn_attention_plan_t *plan, uint32_t c, rudnn_candidate_verdict_t *verdict)
{
    const rdg_devinfo_t *dev = rdg_devinfo_of(device);
    verdict->runs = 0;
    verdict->preferred = 0;
    verdict->why[0] = '\0';
    const int flash_fits = rdg_att_flash_fits(dev, plan);
    switch (c) {
    case C_WGMMA:
#if RDG_HIP
        snprintf(verdict->why, sizeof verdict->why, "no matrix-unit attention kernel on HIP yet");
#else
        if (rdg_att_wgmma_why(dev, plan, verdict->why, sizeof verdict->why))
            return;
        verdict->runs = 1;
        verdict->preferred = rdg_att_wgmma_preferred(plan);
        if (!verdict->preferred)
            snprintf(verdict->why, sizeof verdict->why,
                     "Sq %lld < %d without grouped-query heads to pack: its %d-row tiles would be mostly padding",
                     (long long)plan->seq_q, ATT_WG_PREFER_MIN_SQ, ATT_WG_BM);
#endif
        return;
    case C_FLASH_DECODE: /* decode shapes only; where it runs, it reads K/V once per K/V head */
        if (rdg_att_decode_unfit(dev, plan, verdict->why, sizeof verdict->why))
            return;
        verdict->runs = 1;
        verdict->preferred = 1;
        return;
    case C_FLASH_UNIT:
        if (!flash_fits) {
            snprintf(verdict->why, sizeof verdict->why,
                     "the flash tiles for D %lld, Dv %lld exceed the device's shared memory (%zu bytes)",
                     (long long)plan->head_dim, (long long)plan->head_dim_v, dev->smem_optin);
            return;
        }
        verdict->runs = 1;
        verdict->preferred = 1;
        return;
    case C_FALLBACK:
        if (rdg_att_scores_unfit(dev, plan, verdict->why, sizeof verdict->why))
            return;
        verdict->runs = 1;
        verdict->preferred = !flash_fits;
        if (!verdict->preferred)
            snprintf(verdict->why, sizeof verdict->why, ATT_FLASH_UNIT_NAME " is faster (no score matrix in memory)");
        return;
    default:
        snprintf(verdict->why, sizeof verdict->why, "no candidate %u on %s", (unsigned)c, RUDNN_GPU_BACKEND_NAME);
        return;
    }
}

rudnn_status_t att_workspace(void *device, const rudnn_attention_plan_t *plan, uint32_t c, size_t *bytes)
{
    *bytes = 0;
    if (c == C_FLASH_DECODE) { /* split-KV partials; the check said it runs */
        *bytes = (size_t)rdg_att_decode_ws_bytes(rdg_devinfo_of(device), plan);
        return RUDNN_STATUS_SUCCESS;
    }
    if (c != C_FALLBACK)
        return RUDNN_STATUS_SUCCESS;
    char why[256];
    if (rdg_att_scores_unfit(rdg_devinfo_of(device), plan, why, sizeof why))
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, ATT_OP ": %s: %s", RUDNN_GPU_BACKEND_NAME, why);
    *bytes = (size_t)rdg_att_scores_bytes(plan);
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t att_run(void *queue, const rudnn_attention_plan_t *plan, uint32_t c, rudnn_mem_ref_t q,
                       rudnn_mem_ref_t k, rudnn_mem_ref_t v, rudnn_mem_ref_t mask, rudnn_mem_ref_t bias,
                       rudnn_mem_ref_t out, rudnn_mem_ref_t lse, rudnn_mem_ref_t workspace)
{
    rdg_queue_t *qu = (rdg_queue_t *)queue;
    if (c >= C_COUNT)
        return rdg_error(RUDNN_STATUS_INTERNAL, ATT_OP ": %s: no candidate %u", RUDNN_GPU_BACKEND_NAME, (unsigned)c);
    TRY(rdg_use_device(qu->dev.index));
    rdg_att_args a;
    rdg_att_make_args(plan, q, k, v, mask, bias, out, lse, &a);
    if (c == C_FLASH_DECODE)
        return rdg_att_run_decode(qu, plan, a, workspace);
    if (c == C_FLASH_UNIT)
        return rdg_att_run_flash(qu, plan, a);
    if (c == C_WGMMA) {
#if RDG_HIP
        return rdg_error(RUDNN_STATUS_NOT_SUPPORTED, ATT_OP ": hip: no " ATT_WGMMA_NAME);
#else
        return rdg_att_run_wgmma(qu, plan, a);
#endif
    }
    return rdg_att_run_fallback(qu, plan, a, workspace);
}

rudnn_attention_kernels_t make_attention_table(void)
{
    /* static storage for the candidates; inside a function: a namespace-scope const would be
     * promoted to device memory by HIP's compiler (moe_table.cu) */
    static const rudnn_kernel_candidate_t candidates[C_COUNT] = {
        {ATT_WGMMA_NAME, RUDNN_ATTENTION_FLASH_ACCELERATED, 0},
        {ATT_FLASH_DECODE_NAME, RUDNN_ATTENTION_FLASH_UNIT, 0},
        {ATT_FLASH_UNIT_NAME, RUDNN_ATTENTION_FLASH_UNIT, 0},
        {ATT_FALLBACK_NAME, RUDNN_ATTENTION_FALLBACK, 0},
    };
    rudnn_attention_kernels_t table;
    memset(&table, 0, sizeof table);
    table.struct_size = (uint32_t)sizeof table;
    table.candidates = candidates;
    table.candidate_count = C_COUNT;
    table.check = att_check;
    table.workspace = att_workspace;
    table.run = att_run;
#if RDG_ATTENTION_BACKWARD_VERIFIED || defined(RDG_UNVERIFIED_FAMILIES)
    table.backward_workspace = rdg_attention_backward_workspace;
    table.backward = rdg_attention_backward;
#endif
    return table;
}

} // namespace

void rdg_att_make_args(const rudnn_attention_plan_t *plan, rudnn_mem_ref_t q, rudnn_mem_ref_t k,
                       rudnn_mem_ref_t v, rudnn_mem_ref_t mask, rudnn_mem_ref_t bias, rudnn_mem_ref_t out,
                       rudnn_mem_ref_t lse, rdg_att_args *a)
{
    memset(a, 0, sizeof *a);
    const size_t elem = plan->dtype == RUDNN_F32 ? 4 : 2;
    a->q = rdg_at(q);
    a->k = rdg_at(k); /* Skv 0: may be NULL, never read */
    a->v = rdg_at(v);
    a->mask = plan->has_mask ? (const uint8_t *)rdg_at(mask) : nullptr;
    a->bias = plan->has_bias ? rdg_at(bias) : nullptr;
    a->bias_dtype = a->bias ? (int)plan->bias_dtype : ATT_NO_BIAS;
    a->out = rdg_at(out);
    a->lse = plan->has_lse ? (float *)rdg_at(lse) : nullptr;
    for (int s = 0; s < 3; s++) {
        a->qs[s] = plan->q_stride[s];
        a->ks[s] = plan->k_stride[s];
        a->vs[s] = plan->v_stride[s];
        a->os[s] = plan->out_stride[s];
        a->ms[s] = a->mask ? plan->mask_stride[s] : 0;
        a->bs[s] = a->bias ? plan->bias_stride[s] : 0;
    }
    a->batch = plan->batch;
    a->heads_q = plan->heads_q;
    a->group = plan->heads_q / plan->heads_kv;
    a->seq_q = plan->seq_q;
    a->seq_kv = plan->seq_kv;
    a->window_left = plan->window_left;
    a->window_right = plan->window_right;
    a->d = (int)plan->head_dim;
    a->dv = (int)plan->head_dim_v;
    a->vec_q = rdg_att_vec_ok(a->q, plan->q_stride, plan->head_dim, elem);
    a->vec_kv = rdg_att_vec_ok(a->k, plan->k_stride, plan->head_dim, elem) && rdg_att_vec_ok(a->v, plan->v_stride, plan->head_dim_v, elem);
    a->vec_out = rdg_att_vec_ok(a->out, plan->out_stride, plan->head_dim_v, elem);
    a->scale = plan->scale;
    a->softcap = plan->softcap;
}

rudnn_status_t rdg_att_allow_smem(const rdg_queue_t *q, const void *fn, size_t smem)
{
    if (smem <= ATT_SMEM_DEFAULT_LIMIT)
        return RUDNN_STATUS_SUCCESS;
    /* the device's whole allowance, so that no launch lowers it for another thread's */
    cudaFuncAttributes fa;
    cudaError_t err = cudaFuncGetAttributes(&fa, fn);
    if (err != cudaSuccess)
        return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, "FuncGetAttributes");
    err = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)(q->dev.smem_optin - fa.sharedSizeBytes));
    if (err != cudaSuccess)
        return rdg_fail(RUDNN_STATUS_DEVICE_ERROR, err, "FuncSetAttribute(MaxDynamicSharedMemorySize)");
    return RUDNN_STATUS_SUCCESS;
}

const rudnn_attention_kernels_t *rdg_attention_table(void)
{
    /* filled once: C++ initialises a function's static under its own lock */
    static const rudnn_attention_kernels_t table = make_attention_table();
    return &table;
}
