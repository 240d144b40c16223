/* The attention backward (rudnn/attention.h): the forward's checks on the forward's tensors, the
 * gradients' own checks, and the call into the backend's optional backward entries. No GPU API
 * here. */
#include <stdio.h>
#include <string.h>

#include "attention_internal.h"

static void plan_strides(const rudnn_tensor_t *t, int64_t stride[3])
{
    for (int i = 0; i < 3; i++)
        stride[i] = t->dims[i] == 1 ? 0 : t->strides[i];
}

/* t has ref's dims and dtype, and is a strided view whose last dim is contiguous. */
static rudnn_status_t check_like(const char *op, const char *arg, rudnn_queue_t queue, const rudnn_tensor_t *t,
                                 const char *ref_arg, const rudnn_tensor_t *ref)
{
    TRY(rudnn_check_arg(op, arg, t));
    TRY(rudnn_check_tensor_rows(op, arg, queue, t, 0));
    return rudnn_check_like(op, arg, t, ref_arg, ref);
}

static rudnn_status_t validate(const char *op, rudnn_queue_t queue, const rudnn_attention_backward_args_t *g,
                               const rudnn_attention_options_t *options, rudnn_attention_plan_t *plan)
{
    TRY(rudnn_check_queue(op, queue));
    TRY(rudnn_check_arg(op, "args", g));
    TRY(rudnn_check_arg(op, "args->out", g->out));
    TRY(rudnn_check_arg(op, "args->lse", g->lse));
    const attn_args_t a = {queue, g->q, g->k, g->v, g->mask, g->attn_bias, g->out, g->lse, options,
                           RUDNN_ATTENTION_AUTOTUNE};
    TRY(rudnn_attention_validate(op, &a, 1, plan));
    TRY(check_like(op, "dout", queue, g->dout, "out", g->out));
    TRY(check_like(op, "dq", queue, g->dq, "q", g->q));
    TRY(check_like(op, "dk", queue, g->dk, "k", g->k));
    TRY(check_like(op, "dv", queue, g->dv, "v", g->v));
    const rudnn_tensor_t *ins[8] = {g->q, g->k, g->v, g->mask, g->attn_bias, g->out, g->lse, g->dout};
    static const char *const in_names[8] = {"q", "k", "v", "mask", "attn_bias", "out", "lse", "dout"};
    const rudnn_tensor_t *outs[3] = {g->dq, g->dk, g->dv};
    static const char *const out_names[3] = {"dq", "dk", "dv"};
    for (int o = 0; o < 3; o++) {
        for (int i = 0; i < 8; i++)
            TRY(rudnn_check_disjoint(op, out_names[o], outs[o], in_names[i], ins[i]));
        for (int p = o + 1; p < 3; p++)
            TRY(rudnn_check_disjoint(op, out_names[o], outs[o], out_names[p], outs[p]));
    }
    return RUDNN_STATUS_SUCCESS;
}

typedef struct backward_entries {
    rudnn_status_t (*workspace)(void *device, const rudnn_attention_plan_t *plan, size_t *bytes);
    rudnn_status_t (*run)(void *queue, const rudnn_attention_plan_t *plan,
                          const rudnn_attention_backward_operands_t *ops);
} backward_entries_t;

static rudnn_status_t entries(const char *op, rudnn_context_t ctx, backward_entries_t *e)
{
    const rudnn_attention_kernels_t *k = RUDNN_FAMILY_TABLE(ctx->backend, attention);
    e->workspace = RUDNN_KERNEL_ENTRY(k, backward_workspace);
    e->run = RUDNN_KERNEL_ENTRY(k, backward);
    if (!e->workspace || !e->run)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: backend '%s' has no attention backward kernels", op,
                               ctx->backend->name);
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_attention_backward_workspace_size(rudnn_queue_t queue, const rudnn_attention_backward_args_t *args,
                                                       const rudnn_attention_options_t *options, size_t *bytes)
{
    const char *op = "attention_backward_workspace_size";
    rudnn_clear_error();
    TRY(rudnn_check_arg(op, "bytes", bytes));
    rudnn_attention_plan_t plan;
    TRY(validate(op, queue, args, options, &plan));
    backward_entries_t e;
    TRY(entries(op, queue->context, &e));
    size_t need = 0;
    TRY(rudnn_kernel_status(op, e.workspace(queue->context->device, &plan, &need)));
    *bytes = need;
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_attention_backward(rudnn_queue_t queue, const rudnn_attention_backward_args_t *args,
                                        const rudnn_attention_options_t *options, rudnn_buffer_t workspace,
                                        size_t workspace_bytes)
{
    const char *op = "attention_backward";
    rudnn_clear_error();
    rudnn_attention_plan_t plan;
    TRY(validate(op, queue, args, options, &plan));
    backward_entries_t e;
    TRY(entries(op, queue->context, &e));
    size_t need = 0;
    TRY(rudnn_kernel_status(op, e.workspace(queue->context->device, &plan, &need)));
    const rudnn_tensor_t *all[11] = {args->q,   args->k,    args->v,  args->mask, args->attn_bias, args->out,
                                     args->lse, args->dout, args->dq, args->dk,   args->dv};
    static const char *const names[11] = {"q", "k", "v", "mask", "attn_bias", "out", "lse", "dout", "dq", "dk", "dv"};
    TRY(rudnn_check_workspace(op, queue, workspace, workspace_bytes, need, "rudnn_attention_backward_workspace_size",
                              all, names, 11));
    rudnn_attention_backward_operands_t o;
    memset(&o, 0, sizeof o);
    o.q = rudnn_mem_of(args->q), o.k = rudnn_mem_of(args->k), o.v = rudnn_mem_of(args->v);
    o.mask = rudnn_mem_of(args->mask), o.bias = rudnn_mem_of(args->attn_bias);
    o.out = rudnn_mem_of(args->out), o.lse = rudnn_mem_of(args->lse), o.dout = rudnn_mem_of(args->dout);
    o.dq = rudnn_mem_of(args->dq), o.dk = rudnn_mem_of(args->dk), o.dv = rudnn_mem_of(args->dv);
    plan_strides(args->dout, o.dout_stride);
    plan_strides(args->dq, o.dq_stride);
    plan_strides(args->dk, o.dk_stride);
    plan_strides(args->dv, o.dv_stride);
    void *mem = NULL;
    if (workspace || need)
        TRY(rudnn_scratch_begin(op, queue, workspace, need, &mem));
    o.workspace = (rudnn_mem_ref_t){mem, 0};
    const rudnn_status_t st = e.run(queue->handle, &plan, &o);
    if (workspace || need)
        rudnn_scratch_end(queue, workspace, mem, need);
    return rudnn_kernel_status(op, st);
}
