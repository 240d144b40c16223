/* Host launcher of the CTC loss (kernels/ctc.cl): the table of backends/hal/ctc.h. One program per
 * (dtype, target dtype); a work-group per sample. The plan comes validated from ops/ctc.c. */
#include <stdio.h>

#include "ocl_internal.h"
#include "ocl_launch.h"

extern const char rudnn_ocl_src_ctc[];
extern const size_t rudnn_ocl_src_ctc_size;

enum { K_LOSS, K_COUNT };
static const char *const k_names[K_COUNT] = {"rudnn_ctc_loss"};

/* work-items a sample's group: states and classes are dealt round them */
#define CTC_LOCAL 256u

/* Local memory of a group: two rows of 2 S + 1 states and the label flag. */
static uint64_t local_bytes(const rudnn_ctc_plan_t *p)
{
    return ocl_local_arg_bytes(2 * (2 * (uint64_t)p->target_len + 1) * 4) + ocl_local_arg_bytes(4);
}

static rudnn_status_t ctc_workspace(void *device, const rudnn_ctc_plan_t *p, size_t *bytes)
{
    const ocl_device_t *dev = (const ocl_device_t *)device;
    if (local_bytes(p) > dev->local_mem)
        return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED, "ctc: opencl: targets of S = %lld need %llu bytes of local memory "
                        "(two rows of 2 S + 1 states), past the device's %llu", (long long)p->target_len,
                        (unsigned long long)local_bytes(p), (unsigned long long)dev->local_mem);
    /* the gradient keeps every step's alpha row: [N, T, 2 S + 1] floats */
    *bytes = p->has_grad ? (size_t)p->batch * (size_t)p->steps * (size_t)(2 * p->target_len + 1) * 4 : 0;
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t ctc_loss(void *queue, const rudnn_ctc_plan_t *p, const rudnn_ctc_operands_t *o)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    size_t need;
    RUDNN_TRY(ctc_workspace(q->dev, p, &need));
    const size_t es = p->dtype == RUDNN_F32 ? 4 : 2;
    ocl_kernel_set_t *ks;
    RUDNN_TRY(ocl_dtype_program(q, p->dtype, "ctc", "log_probs", "ctc.cl", rudnn_ocl_src_ctc,
                                p->target_dtype == RUDNN_I64 ? "-DCTC_TARGET_I64" : "", k_names, K_COUNT, &ks));
    const size_t ts = p->target_dtype == RUDNN_I64 ? 8 : 4;
    cl_mem lp = (cl_mem)o->log_probs.mem, tg = (cl_mem)o->targets.mem, loss = (cl_mem)o->loss.mem;
    cl_mem table = (cl_mem)o->table.mem;
    /* placeholders where absent: never read (gl without has_gl) or written (grad, scratch without has_grad) */
    cl_mem gl = o->grad_loss.mem ? (cl_mem)o->grad_loss.mem : loss;
    cl_mem grad = o->grad_log_probs.mem ? (cl_mem)o->grad_log_probs.mem : lp;
    cl_mem scratch = o->scratch.mem ? (cl_mem)o->scratch.mem : loss;
    const cl_ulong lpo = o->log_probs.offset / es, tgo = o->targets.offset / ts, lso = o->loss.offset / 4;
    const cl_ulong glo = o->grad_loss.mem ? o->grad_loss.offset / 4 : 0;
    const cl_ulong gro = o->grad_log_probs.mem ? o->grad_log_probs.offset / es : 0;
    const cl_ulong tbo = o->table.offset / 8, sco = o->scratch.mem ? o->scratch.offset / 4 : 0;
    const cl_long T = p->steps, N = p->batch, C = p->classes, S = p->target_len, blank = p->blank;
    const cl_int zero_inf = p->zero_infinity != 0, has_grad = p->has_grad != 0, has_gl = p->has_grad_loss != 0;
    cl_long4 lps, grs;
    for (int i = 0; i < 4; i++) {
        lps.s[i] = i < 3 ? p->lp_stride[i] : 0;
        grs.s[i] = i < 3 ? p->grad_stride[i] : 0;
    }
    cl_long2 tgs;
    tgs.s[0] = p->target_stride[0], tgs.s[1] = p->target_stride[1];
    const cl_long lss = p->loss_stride, gls = p->grad_loss_stride;
    const karg_list_t args =
        KARGS(ARG(lp), ARG(lpo), ARG(tg), ARG(tgo), ARG(gl), ARG(glo), ARG(loss), ARG(lso), ARG(grad), ARG(gro),
              ARG(table), ARG(tbo), ARG(scratch), ARG(sco), GROUP0_ARG(), ARG(T), ARG(N), ARG(C), ARG(S), ARG(blank),
              ARG(zero_inf), ARG(has_grad), ARG(has_gl), ARG(lps), ARG(grs), ARG(tgs), ARG(lss), ARG(gls),
              LOCAL_ARG(2 * (2 * (size_t)S + 1) * 4), LOCAL_ARG(4));
    ocl_note_kernel("ctc.loss");
    return ocl_enqueue_groups(q, ks, K_LOSS, k_names, "ctc", args, (uint64_t)N, ocl_local_cap(q->dev, ks, CTC_LOCAL));
}

const rudnn_ctc_kernels_t ocl_ctc_kernels = {
    .struct_size = sizeof(rudnn_ctc_kernels_t),
    .workspace = ctc_workspace,
    .loss = ctc_loss,
};
