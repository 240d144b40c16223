/* Normalization family: contracts, plans and dispatch to the backend kernels. */
#include <stdint.h>

#include "validate.h"

/* Checks an input of rank >= 1 with a non-empty last axis and fills the plan. */
static rudnn_status_t plan_rows(const char *op, const char *arg, rudnn_queue_t queue,
                                const rudnn_tensor_t *input, float eps, rudnn_norm_plan_t *plan)
{
    TRY(rudnn_check_tensor(op, arg, queue, input, 1));
    TRY(rudnn_check_float_dtype(op, arg, input));
    int64_t cols = input->dims[input->rank - 1];
    if (cols == 0) {
        char s[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has shape %s: the last axis must not be empty",
                               op, arg, rudnn_shape_str(input, s, sizeof s));
    }
    if (cols > INT32_MAX)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: %s last axis %lld exceeds the limit %d", op,
                               arg, (long long)cols, INT32_MAX);
    plan->dtype = input->dtype;
    plan->cols = cols;
    plan->rows = rudnn_tensor_numel(input) / cols;
    plan->eps = eps;
    return RUDNN_STATUS_SUCCESS;
}

/* gamma/beta: F32 [cols] on the queue's device. */
static rudnn_status_t check_affine(const char *op, const char *arg, rudnn_queue_t queue,
                                   const rudnn_tensor_t *t, int64_t cols)
{
    TRY(rudnn_check_tensor(op, arg, queue, t, 0));
    TRY(rudnn_check_vector(op, arg, t, cols, "last axis of input"));
    return rudnn_check_dtype(op, arg, t, RUDNN_F32, "affine parameters stay f32 for every input dtype");
}

static rudnn_status_t check_output(const char *op, const char *arg, rudnn_queue_t queue,
                                   const rudnn_tensor_t *out, const char *in_arg, const rudnn_tensor_t *in)
{
    TRY(rudnn_check_tensor(op, arg, queue, out, 1));
    TRY(rudnn_check_like(op, arg, out, in_arg, in));
    return rudnn_check_overlap(op, arg, out, in_arg, in);
}

static const rudnn_norm_kernels_t *kernels(rudnn_queue_t queue)
{
    return RUDNN_FAMILY_TABLE(queue->context->backend, norm);
}

static rudnn_status_t missing(const char *op, rudnn_queue_t queue)
{
    return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: backend '%s' has no kernel for this op", op,
                           queue->context->backend->name);
}

rudnn_status_t rudnn_layer_norm(rudnn_queue_t queue, const rudnn_tensor_t *input,
                                const rudnn_tensor_t *gamma, const rudnn_tensor_t *beta, float eps,
                                const rudnn_tensor_t *output)
{
    const char *op = "layer_norm";
    rudnn_norm_plan_t plan;
    rudnn_clear_error();
    TRY(rudnn_check_queue(op, queue));
    TRY(plan_rows(op, "input", queue, input, eps, &plan));
    TRY(check_affine(op, "gamma", queue, gamma, plan.cols));
    if (beta)
        TRY(check_affine(op, "beta", queue, beta, plan.cols));
    TRY(rudnn_check_eps(op, eps));
    TRY(check_output(op, "output", queue, output, "input", input));
    TRY(rudnn_check_overlap(op, "output", output, "gamma", gamma));
    TRY(rudnn_check_overlap(op, "output", output, "beta", beta));
    if (!kernels(queue) || !kernels(queue)->layer_norm)
        return missing(op, queue);
    if (plan.rows == 0)
        return RUDNN_STATUS_SUCCESS;
    return rudnn_kernel_status(op, kernels(queue)->layer_norm(queue->handle, &plan, rudnn_mem_of(input),
                                                              rudnn_mem_of(gamma), rudnn_mem_of(beta),
                                                              rudnn_mem_of(output)));
}

rudnn_status_t rudnn_rms_norm(rudnn_queue_t queue, const rudnn_tensor_t *input, const rudnn_tensor_t *gamma,
                              float eps, const rudnn_tensor_t *output)
{
    const char *op = "rms_norm";
    rudnn_norm_plan_t plan;
    rudnn_clear_error();
    TRY(rudnn_check_queue(op, queue));
    TRY(plan_rows(op, "input", queue, input, eps, &plan));
    TRY(check_affine(op, "gamma", queue, gamma, plan.cols));
    TRY(rudnn_check_eps(op, eps));
    TRY(check_output(op, "output", queue, output, "input", input));
    TRY(rudnn_check_overlap(op, "output", output, "gamma", gamma));
    if (!kernels(queue) || !kernels(queue)->rms_norm)
        return missing(op, queue);
    if (plan.rows == 0)
        return RUDNN_STATUS_SUCCESS;
    return rudnn_kernel_status(op, kernels(queue)->rms_norm(queue->handle, &plan, rudnn_mem_of(input),
                                                            rudnn_mem_of(gamma), rudnn_mem_of(output)));
}

rudnn_status_t rudnn_softmax_last_axis(rudnn_queue_t queue, const rudnn_tensor_t *input,
                                       const rudnn_tensor_t *output)
{
    const char *op = "softmax_last_axis";
    rudnn_norm_plan_t plan;
    rudnn_clear_error();
    TRY(rudnn_check_queue(op, queue));
    TRY(plan_rows(op, "input", queue, input, 1.0f, &plan));
    TRY(check_output(op, "output", queue, output, "input", input));
    if (!kernels(queue) || !kernels(queue)->softmax)
        return missing(op, queue);
    if (plan.rows == 0)
        return RUDNN_STATUS_SUCCESS;
    return rudnn_kernel_status(op, kernels(queue)->softmax(queue->handle, &plan, rudnn_mem_of(input),
                                                           rudnn_mem_of(output)));
}

rudnn_status_t rudnn_add_rms_norm(rudnn_queue_t queue, const rudnn_tensor_t *a,
                                  const rudnn_tensor_t *residual, const rudnn_tensor_t *gamma, float eps,
                                  const rudnn_tensor_t *y_out, const rudnn_tensor_t *rstd_out,
                                  const rudnn_tensor_t *x_out)
{
    const char *op = "add_rms_norm";
    rudnn_norm_plan_t plan;
    rudnn_clear_error();
    TRY(rudnn_check_queue(op, queue));
    TRY(plan_rows(op, "a", queue, a, eps, &plan));
    TRY(rudnn_check_tensor(op, "residual", queue, residual, 1));
    TRY(rudnn_check_like(op, "residual", residual, "a", a));
    TRY(check_affine(op, "gamma", queue, gamma, plan.cols));
    TRY(rudnn_check_eps(op, eps));
    TRY(check_output(op, "y", queue, y_out, "a", a));
    TRY(check_output(op, "x", queue, x_out, "a", a));
    TRY(rudnn_check_tensor(op, "rstd", queue, rstd_out, 0));
    TRY(rudnn_check_dtype(op, "rstd", rstd_out, RUDNN_F32, "statistics are f32"));
    if (rudnn_tensor_numel(rstd_out) != plan.rows) {
        char s[160];
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE,
                               "add_rms_norm: rstd has shape %s (%lld elements), expected one per row (%lld)",
                               rudnn_shape_str(rstd_out, s, sizeof s), (long long)rudnn_tensor_numel(rstd_out),
                               (long long)plan.rows);
    }
    /* each output may be exactly one of the inputs; y and x must not meet */
    TRY(rudnn_check_overlap(op, "y", y_out, "residual", residual));
    TRY(rudnn_check_overlap(op, "x", x_out, "residual", residual));
    TRY(rudnn_check_overlap(op, "y", y_out, "gamma", gamma));
    TRY(rudnn_check_overlap(op, "x", x_out, "gamma", gamma));
    TRY(rudnn_check_overlap(op, "rstd", rstd_out, "a", a));
    TRY(rudnn_check_overlap(op, "rstd", rstd_out, "residual", residual));
    TRY(rudnn_check_overlap(op, "rstd", rstd_out, "gamma", gamma));
    TRY(rudnn_check_overlap(op, "rstd", rstd_out, "y", y_out));
    TRY(rudnn_check_overlap(op, "rstd", rstd_out, "x", x_out));
    if (y_out->buffer == x_out->buffer && y_out->offset < x_out->offset + rudnn_tensor_bytes(x_out) &&
        x_out->offset < y_out->offset + rudnn_tensor_bytes(y_out))
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "add_rms_norm: y and x outputs overlap");
    if (!kernels(queue) || !kernels(queue)->add_rms_norm)
        return missing(op, queue);
    if (plan.rows == 0)
        return RUDNN_STATUS_SUCCESS;
    return rudnn_kernel_status(
        op, kernels(queue)->add_rms_norm(queue->handle, &plan, rudnn_mem_of(a), rudnn_mem_of(residual),
                                         rudnn_mem_of(gamma), rudnn_mem_of(y_out), rudnn_mem_of(rstd_out),
                                         rudnn_mem_of(x_out)));
}
