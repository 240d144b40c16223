/* The attention backward on OpenCL (kernels/attention.cl, part 3): Delta = rowsum(dout * out) into
 * the FP32 workspace, then dq a work-item per query row and dk, dv a work-item per key, every sum in
 * a fixed order (no atomics). */
#include <stdio.h>

#include "ocl_attention.h"
#include "ocl_launch.h"

enum { K_DELTA, K_DQ, K_DKV, K_BACKWARD_COUNT };
static const char *const k_backward_names[K_BACKWARD_COUNT] = {
    "rudnn_attention_bwd_delta",
    "rudnn_attention_bwd_dq",
    "rudnn_attention_bwd_dkv",
};

/* work-items a group (a row or a key each) */
#define ATT_BWD_LOCAL 64u

rudnn_status_t ocl_attention_backward_workspace(void *device, const rudnn_attention_plan_t *plan, size_t *bytes)
{
    (void)device;
    *bytes = (size_t)plan->batch * (size_t)plan->heads_q * (size_t)plan->seq_q * sizeof(float);
    return RUDNN_STATUS_SUCCESS;
}

/* D and Dv rounded up to the private accumulators' size. */
static unsigned dmax_of(const rudnn_attention_plan_t *plan)
{
    const int64_t d = plan->head_dim > plan->head_dim_v ? plan->head_dim : plan->head_dim_v;
    return d <= 64 ? 64u : d <= 128 ? 128u : 256u;
}

static rudnn_status_t launch(ocl_queue_t *q, ocl_kernel_set_t *ks, int k, karg_list_t args, uint64_t items)
{
    if (!items)
        return RUDNN_STATUS_SUCCESS;
    const size_t local = ocl_local_cap(q->dev, ks, ATT_BWD_LOCAL);
    return ocl_enqueue_groups(q, ks, k, k_backward_names, ATT_OP, args, (items + local - 1) / local, local);
}

rudnn_status_t ocl_attention_backward(void *queue, const rudnn_attention_plan_t *plan,
                                      const rudnn_attention_backward_operands_t *o)
{
    att_args_t a;
    RUDNN_TRY(ocl_att_args(queue, plan, o->q, o->k, o->v, o->mask, o->bias, o->out, o->lse, &a));
    ocl_queue_t *q = a.q;
    char options[96];
    snprintf(options, sizeof options, "-DATT_PART=%d -DRUDNN_DTYPE=%d -DATT_DMAX=%u", ATT_PART_BACKWARD, a.code,
             dmax_of(plan));
    ocl_kernel_set_t *ks;
    RUDNN_TRY(ocl_program_get(q->dev, "attention.cl (backward)", rudnn_ocl_src_attention, options, k_backward_names,
                              K_BACKWARD_COUNT, &ks));
    const uint64_t rows = (uint64_t)plan->batch * (uint64_t)plan->heads_q * (uint64_t)plan->seq_q;
    const uint64_t keys = (uint64_t)plan->batch * (uint64_t)plan->heads_kv * (uint64_t)plan->seq_kv;
    cl_mem dout = (cl_mem)o->dout.mem, dq = (cl_mem)o->dq.mem, dk = (cl_mem)o->dk.mem, dv = (cl_mem)o->dv.mem;
    cl_mem delta = o->workspace.mem ? (cl_mem)o->workspace.mem : a.om; /* no rows: never read */
    const cl_ulong doo = o->dout.offset / a.elem, dqo = o->dq.offset / a.elem, dko = o->dk.offset / a.elem;
    const cl_ulong dvo = o->dv.offset / a.elem, delta_off = o->workspace.mem ? o->workspace.offset / 4 : 0;
    const cl_long4 dos = ocl_long4_of(o->dout_stride), dqs = ocl_long4_of(o->dq_stride);
    const cl_long4 dks = ocl_long4_of(o->dk_stride), dvs = ocl_long4_of(o->dv_stride);
    const cl_ulong rows_arg = rows, keys_arg = keys;
    ocl_note_kernel("attention.backward");
    RUDNN_TRY(launch(q, ks, K_DELTA, KARGS(ARG(a.om), ARG(a.oo), ARG(a.os), ARG(dout), ARG(doo), ARG(dos), ARG(delta),
                                           ARG(delta_off), GROUP0_ARG(), ARG(a.heads_q), ARG(a.seq_q), ARG(a.dv),
                                           ARG(rows_arg)),
                     rows));
    RUDNN_TRY(launch(q, ks, K_DQ,
                     KARGS(ARG(a.qm), ARG(a.qo), ARG(a.qs), ARG(a.km), ARG(a.ko), ARG(a.ks), ARG(a.vm), ARG(a.vo),
                           ARG(a.vs), ARG(a.mm), ARG(a.mo), ARG(a.ms), ARG(a.has_mask), ARG(a.bm), ARG(a.bo),
                           ARG(a.bs), ARG(a.bias_code), ARG(dout), ARG(doo), ARG(dos), ARG(a.lm), ARG(a.lo),
                           ARG(delta), ARG(delta_off), ARG(dq), ARG(dqo), ARG(dqs), GROUP0_ARG(), ARG(a.heads_q),
                           ARG(a.group_size), ARG(a.seq_q), ARG(a.seq_kv), ARG(a.d), ARG(a.dv), ARG(a.scale),
                           ARG(a.softcap), ARG(a.window_left), ARG(a.window_right), ARG(rows_arg)),
                     rows));
    return launch(q, ks, K_DKV,
                  KARGS(ARG(a.qm), ARG(a.qo), ARG(a.qs), ARG(a.km), ARG(a.ko), ARG(a.ks), ARG(a.vm), ARG(a.vo),
                        ARG(a.vs), ARG(a.mm), ARG(a.mo), ARG(a.ms), ARG(a.has_mask), ARG(a.bm), ARG(a.bo), ARG(a.bs),
                        ARG(a.bias_code), ARG(dout), ARG(doo), ARG(dos), ARG(a.lm), ARG(a.lo), ARG(delta),
                        ARG(delta_off), ARG(dk), ARG(dko), ARG(dks), ARG(dv), ARG(dvo), ARG(dvs), GROUP0_ARG(),
                        ARG(a.heads_q), ARG(a.group_size), ARG(a.seq_q), ARG(a.seq_kv), ARG(a.d), ARG(a.dv),
                        ARG(a.scale), ARG(a.softcap), ARG(a.window_left), ARG(a.window_right), ARG(keys_arg)),
                  keys);
}
