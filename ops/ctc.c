/* CTC loss (rudnn/ctc.h): the contract, the plan, the lengths table written at the workspace's
 * start, and the call into the backend's table. No GPU API here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rudnn/ctc.h"
#include "validate.h"

void rudnn_ctc_options_init(rudnn_ctc_options_t *options)
{
    if (!options)
        return;
    memset(options, 0, sizeof *options);
}

static rudnn_status_t check_role(const char *op, const char *arg, rudnn_queue_t queue, const rudnn_tensor_t *t,
                                 int rank)
{
    TRY(rudnn_check_arg(op, arg, t));
    TRY(rudnn_check_tensor_view(op, arg, queue, t, 0));
    if (t->rank != rank) {
        char s[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has shape %s (rank %d), expected rank %d", op, arg,
                               rudnn_shape_str(t, s, sizeof s), t->rank, rank);
    }
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t check_dim(const char *op, const char *arg, const rudnn_tensor_t *t, int i, int64_t want,
                                const char *why)
{
    if (t->dims[i] == want)
        return RUDNN_STATUS_SUCCESS;
    char s[160];
    return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has shape %s, expected dims[%d] = %lld (%s)", op, arg,
                           rudnn_shape_str(t, s, sizeof s), i, (long long)want, why);
}

static int64_t stride_of(const rudnn_tensor_t *t, int i) { return t->dims[i] == 1 ? 0 : t->strides[i]; }

/* Every check of the call; fills plan. */
static rudnn_status_t validate(const char *op, rudnn_queue_t queue, const rudnn_ctc_args_t *a,
                               const rudnn_ctc_options_t *options, rudnn_ctc_plan_t *plan)
{
    TRY(rudnn_check_queue(op, queue));
    TRY(rudnn_check_arg(op, "args", a));
    rudnn_ctc_options_t def;
    if (!options) {
        rudnn_ctc_options_init(&def);
        options = &def;
    }
    TRY(check_role(op, "log_probs", queue, a->log_probs, 3));
    TRY(check_role(op, "targets", queue, a->targets, 2));
    TRY(check_role(op, "loss", queue, a->loss, 1));
    if (a->grad_loss)
        TRY(check_role(op, "grad_loss", queue, a->grad_loss, 1));
    if (a->grad_log_probs)
        TRY(check_role(op, "grad_log_probs", queue, a->grad_log_probs, 3));
    TRY(rudnn_check_float_dtype(op, "log_probs", a->log_probs));
    if (a->targets->dtype != RUDNN_I32 && a->targets->dtype != RUDNN_I64)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: targets is %s, expected i32 or i64 (class labels)", op,
                               rudnn_dtype_name(a->targets->dtype));
    TRY(rudnn_check_dtype(op, "loss", a->loss, RUDNN_F32, "losses are f32"));
    if (a->grad_loss)
        TRY(rudnn_check_dtype(op, "grad_loss", a->grad_loss, RUDNN_F32, "grad_loss is f32, as loss"));
    if (a->grad_log_probs)
        TRY(rudnn_check_like(op, "grad_log_probs", a->grad_log_probs, "log_probs", a->log_probs));
    const int64_t T = a->log_probs->dims[0], N = a->log_probs->dims[1], C = a->log_probs->dims[2];
    const int64_t S = a->targets->dims[1];
    if (C < 1)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: log_probs has C = 0 classes, expected >= 1 (the blank "
                               "is one)", op);
    TRY(check_dim(op, "targets", a->targets, 0, N, "N, log_probs' dims[1]"));
    if (S > RUDNN_CTC_MAX_TARGET)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: targets has S = %lld labels a sample, past "
                               "RUDNN_CTC_MAX_TARGET (%d)", op, (long long)S, RUDNN_CTC_MAX_TARGET);
    TRY(check_dim(op, "loss", a->loss, 0, N, "N, log_probs' dims[1]"));
    if (a->grad_loss)
        TRY(check_dim(op, "grad_loss", a->grad_loss, 0, N, "N, log_probs' dims[1]"));
    if (options->blank < 0 || options->blank >= C)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.blank = %lld, expected 0..%lld (a class of "
                               "log_probs)", op, (long long)options->blank, (long long)(C - 1));
    if (options->zero_infinity != 0 && options->zero_infinity != 1)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.zero_infinity = %d, expected 0 or 1", op,
                               options->zero_infinity);
    if (N > 0) {
        TRY(rudnn_check_arg(op, "args->input_lengths", a->input_lengths));
        TRY(rudnn_check_arg(op, "args->target_lengths", a->target_lengths));
        for (int64_t n = 0; n < N; n++) {
            if (a->input_lengths[n] < 0 || a->input_lengths[n] > T)
                return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: input_lengths[%lld] = %lld, expected 0..%lld (T, "
                                       "log_probs' dims[0])", op, (long long)n, (long long)a->input_lengths[n],
                                       (long long)T);
            if (a->target_lengths[n] < 0 || a->target_lengths[n] > S)
                return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: target_lengths[%lld] = %lld, expected 0..%lld (S, "
                                       "targets' dims[1])", op, (long long)n, (long long)a->target_lengths[n],
                                       (long long)S);
        }
    }
    /* outputs touch no input and not each other */
    const rudnn_tensor_t *ins[3] = {a->log_probs, a->targets, a->grad_loss};
    const char *const in_names[3] = {"log_probs", "targets", "grad_loss"};
    for (int i = 0; i < 3; i++) {
        TRY(rudnn_check_disjoint(op, "loss", a->loss, in_names[i], ins[i]));
        TRY(rudnn_check_disjoint(op, "grad_log_probs", a->grad_log_probs, in_names[i], ins[i]));
    }
    TRY(rudnn_check_disjoint(op, "grad_log_probs", a->grad_log_probs, "loss", a->loss));
    memset(plan, 0, sizeof *plan);
    plan->dtype = a->log_probs->dtype;
    plan->target_dtype = a->targets->dtype;
    plan->steps = T;
    plan->batch = N;
    plan->classes = C;
    plan->target_len = S;
    plan->blank = options->blank;
    plan->zero_infinity = options->zero_infinity;
    plan->has_grad = a->grad_log_probs != NULL;
    plan->has_grad_loss = a->grad_loss != NULL && a->grad_log_probs != NULL;
    for (int i = 0; i < 3; i++) {
        plan->lp_stride[i] = stride_of(a->log_probs, i);
        plan->grad_stride[i] = a->grad_log_probs ? stride_of(a->grad_log_probs, i) : 0;
    }
    plan->target_stride[0] = stride_of(a->targets, 0);
    plan->target_stride[1] = stride_of(a->targets, 1);
    plan->loss_stride = stride_of(a->loss, 0);
    plan->grad_loss_stride = a->grad_loss ? stride_of(a->grad_loss, 0) : 0;
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t require_kernels(const char *op, rudnn_context_t ctx, const rudnn_ctc_kernels_t **k)
{
    *k = RUDNN_FAMILY_TABLE(ctx->backend, ctc);
    if (!*k)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: backend '%s' has no CTC kernels", op,
                               ctx->backend->name);
    return RUDNN_STATUS_SUCCESS;
}

/* The table and the backend's scratch. */
static rudnn_status_t workspace_need(const char *op, rudnn_queue_t queue, const rudnn_ctc_kernels_t *k,
                                     const rudnn_ctc_plan_t *plan, size_t *scratch, size_t *total)
{
    *scratch = 0;
    TRY(rudnn_kernel_status(op, k->workspace(queue->context->device, plan, scratch)));
    *total = rudnn_ctc_table_bytes(plan->batch) + *scratch;
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_ctc_loss_workspace_size(rudnn_queue_t queue, const rudnn_ctc_args_t *args,
                                             const rudnn_ctc_options_t *options, size_t *bytes)
{
    const char *op = "ctc_loss_workspace_size";
    rudnn_clear_error();
    TRY(rudnn_check_arg(op, "bytes", bytes));
    rudnn_ctc_plan_t plan;
    TRY(validate(op, queue, args, options, &plan));
    const rudnn_ctc_kernels_t *k;
    TRY(require_kernels(op, queue->context, &k));
    if (plan.batch == 0) {
        *bytes = 0;
        return RUDNN_STATUS_SUCCESS;
    }
    size_t scratch;
    return workspace_need(op, queue, k, &plan, &scratch, bytes);
}

/* The lengths table at ws's start (a blocking copy). */
static rudnn_status_t write_table(rudnn_queue_t queue, const rudnn_ctc_args_t *a, int64_t n, void *ws)
{
    const size_t bytes = rudnn_ctc_table_bytes(n);
    int64_t *host = rudnn_host_calloc(bytes, 1);
    if (!host)
        return rudnn_set_error(RUDNN_STATUS_ALLOC_FAILED, "out of host memory for the lengths table");
    memcpy(host, a->input_lengths, (size_t)n * sizeof *host);
    memcpy(host + n, a->target_lengths, (size_t)n * sizeof *host);
    const rudnn_status_t st = queue->context->backend->mem_write(queue->handle, (rudnn_mem_ref_t){ws, 0}, host, bytes);
    free(host);
    return st;
}

rudnn_status_t rudnn_ctc_loss(rudnn_queue_t queue, const rudnn_ctc_args_t *args, const rudnn_ctc_options_t *options,
                              rudnn_buffer_t workspace, size_t workspace_bytes)
{
    const char *op = "ctc_loss";
    rudnn_clear_error();
    rudnn_ctc_plan_t plan;
    TRY(validate(op, queue, args, options, &plan));
    const rudnn_tensor_t *all[5] = {args->log_probs, args->targets, args->grad_loss, args->loss,
                                    args->grad_log_probs};
    const char *const names[5] = {"log_probs", "targets", "grad_loss", "loss", "grad_log_probs"};
    const rudnn_ctc_kernels_t *k;
    TRY(require_kernels(op, queue->context, &k));
    if (plan.batch == 0)
        return rudnn_check_workspace(op, queue, workspace, workspace_bytes, 0, "rudnn_ctc_loss_workspace_size", all,
                                     names, 5);
    size_t scratch, need;
    TRY(workspace_need(op, queue, k, &plan, &scratch, &need));
    TRY(rudnn_check_workspace(op, queue, workspace, workspace_bytes, need, "rudnn_ctc_loss_workspace_size", all,
                              names, 5));
    void *mem;
    TRY(rudnn_scratch_begin(op, queue, workspace, need, &mem));
    rudnn_status_t st = write_table(queue, args, plan.batch, mem);
    if (!st) {
        rudnn_ctc_operands_t o;
        memset(&o, 0, sizeof o);
        o.log_probs = rudnn_mem_of(args->log_probs);
        o.targets = rudnn_mem_of(args->targets);
        o.grad_loss = plan.has_grad_loss ? rudnn_mem_of(args->grad_loss) : (rudnn_mem_ref_t){NULL, 0};
        o.loss = rudnn_mem_of(args->loss);
        o.grad_log_probs = rudnn_mem_of(args->grad_log_probs);
        o.table = (rudnn_mem_ref_t){mem, 0};
        o.scratch = scratch ? (rudnn_mem_ref_t){mem, rudnn_ctc_table_bytes(plan.batch)} : (rudnn_mem_ref_t){NULL, 0};
        st = k->loss(queue->handle, &plan, &o);
    }
    rudnn_scratch_end(queue, workspace, mem, need);
    return rudnn_kernel_status(op, st);
}
