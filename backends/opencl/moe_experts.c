/* The SwiGLU expert candidates of the OpenCL plugin (backends/hal/table.h), most preferred
 * first: the portable kernels of moe.c in their two forms, and CLBlast SGEMM (moe_gemm.c) for
 * the TensorCore strategy. ops/moe.c chooses; ocl_experts_run runs exactly the one chosen. */
#include <stdio.h>

#include "ocl_internal.h"

enum { C_CLBLAST_SGEMM, C_SCALAR_TILED, C_SCALAR_DOT };

const rudnn_kernel_candidate_t ocl_experts_candidates[OCL_EXPERTS_CANDIDATES] = {
    /* one SGEMM per expert over F32 copies; reads the expert offsets back */
    {"moe.clblast_sgemm", RUDNN_MOE_TENSOR_CORE, RUDNN_CANDIDATE_SYNCS},
    /* local-memory tiles: GPUs */
    {"moe.scalar_tiled", RUDNN_MOE_SCALAR, 0},
    /* one vectorised dot product per output: CPU devices, where the tiles' barriers cost most */
    {"moe.scalar_dot", RUDNN_MOE_SCALAR, 0},
};

void ocl_experts_check(void *device, const rudnn_moe_rows_plan_t *plan, uint32_t c,
                       rudnn_candidate_verdict_t *verdict)
{
    const int cpu = ((const ocl_device_t *)device)->is_cpu;
    const char *why = NULL;
    switch (c) {
    case C_SCALAR_TILED:
        verdict->preferred = !cpu;
        why = cpu ? "the dot-product kernels are faster on CPU devices" : NULL;
        break;
    case C_SCALAR_DOT:
        verdict->preferred = cpu;
        why = cpu ? NULL : "the tiled kernels are faster on GPUs";
        break;
    default:
#ifdef RUDNN_HAVE_CLBLAST
        if (plan->dtype != RUDNN_F16 && plan->dtype != RUDNN_BF16) {
            verdict->runs = 0;
            snprintf(verdict->why, sizeof verdict->why, "the TensorCore path takes f16 or bf16 weights");
            return;
        }
        why = ocl_clblast_unavailable();
        if (why) {
            verdict->runs = 0;
            snprintf(verdict->why, sizeof verdict->why, "%s", why);
            return;
        }
        /* PoCL (2-core AVX-512, bf16): CLBlast 1.6-2.6x slower than the dot-product kernels */
        verdict->preferred = !cpu;
        why = cpu ? "CLBlast is slower than the scalar kernels on CPU devices" : NULL;
        break;
#else
        (void)plan;
        verdict->runs = 0;
        snprintf(verdict->why, sizeof verdict->why, "this plugin was built without CLBlast");
        return;
#endif
    }
    verdict->runs = 1;
    if (why)
        snprintf(verdict->why, sizeof verdict->why, "%s", why);
}

rudnn_status_t ocl_experts_workspace(void *device, const rudnn_moe_rows_plan_t *plan, uint32_t c,
                                     size_t *bytes)
{
#ifdef RUDNN_HAVE_CLBLAST
    if (c == C_CLBLAST_SGEMM) /* the F32 staging of the SGEMMs */
        return ocl_experts_gemm_workspace(device, plan, bytes);
#endif
    (void)device, (void)plan, (void)c, (void)bytes; /* the scalar kernels take the act ops/ sized */
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t ocl_experts_run(void *queue, const rudnn_moe_rows_plan_t *plan, uint32_t c,
                               rudnn_mem_ref_t tokens, rudnn_mem_ref_t offsets, rudnn_mem_ref_t gate,
                               rudnn_mem_ref_t up, rudnn_mem_ref_t down, rudnn_mem_ref_t act,
                               rudnn_mem_ref_t out)
{
    if (c >= OCL_EXPERTS_CANDIDATES)
        return ocl_fail(RUDNN_STATUS_INTERNAL, "opencl: moe experts: no candidate %u", c);
    ocl_note_kernel(ocl_experts_candidates[c].name);
    if (c == C_CLBLAST_SGEMM) {
#ifdef RUDNN_HAVE_CLBLAST
        return ocl_experts_gemm(queue, plan, tokens, offsets, gate, up, down, act, out);
#else
        return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED, "opencl: moe.clblast_sgemm is not built");
#endif
    }
    return ocl_experts_scalar(queue, plan, c == C_SCALAR_DOT, tokens, offsets, gate, up, down, act,
                              out);
}
