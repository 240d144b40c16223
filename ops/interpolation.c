/* Interpolation (rudnn/interpolation.h): the contract of the forward and the backward, the plan
 * (with each dim's FP32 coordinate factor) and the call into the backend's table. No GPU API here. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rudnn/interpolation.h"
#include "validate.h"

void rudnn_interp_options_init(rudnn_interp_options_t *options)
{
    if (!options)
        return;
    memset(options, 0, sizeof *options);
    options->mode = RUDNN_INTERP_NEAREST;
}

static rudnn_status_t check_options(const char *op, const rudnn_interp_options_t *o, int d)
{
    if ((unsigned)o->mode > RUDNN_INTERP_CUBIC)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.mode = %d, expected RUDNN_INTERP_NEAREST (0), "
                               "_NEAREST_EXACT (1), _LINEAR (2) or _CUBIC (3)", op, (int)o->mode);
    if (o->align_corners != 0 && o->align_corners != 1)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.align_corners = %d, expected 0 or 1", op,
                               o->align_corners);
    if (o->align_corners && o->mode < RUDNN_INTERP_LINEAR)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.align_corners = 1 with a nearest mode: only "
                               "LINEAR and CUBIC align corners (as PyTorch)", op);
    for (int i = 0; i < d; i++) {
        if (!isfinite(o->scales[i]) || o->scales[i] < 0.0)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.scales[%d] = %g, expected 0 (from the sizes) "
                                   "or a finite value > 0", op, i, o->scales[i]);
        if (o->scales[i] > 0.0 && !isfinite((float)(1.0 / o->scales[i])))
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.scales[%d] = %g: its reciprocal, the "
                                   "coordinate ratio, overflows FP32", op, i, o->scales[i]);
    }
    return RUDNN_STATUS_SUCCESS;
}

/* The coordinate map's FP32 factor of one dim (the header's r_i, or the align_corners step). */
static float ratio_of(const rudnn_interp_options_t *o, int i, int64_t S, int64_t O)
{
    if (o->mode >= RUDNN_INTERP_LINEAR && o->align_corners)
        return O > 1 ? (float)(S - 1) / (float)(O - 1) : 0.0f;
    if (o->scales[i] > 0.0)
        return (float)(1.0 / o->scales[i]);
    return (float)S / (float)O;
}

/* x [N, C, S...] (x or dx) and y [N, C, O...] (y or dy). */
static rudnn_status_t validate(const char *op, rudnn_queue_t queue, const rudnn_tensor_t *x, const char *xn,
                               const rudnn_tensor_t *y, const char *yn, const rudnn_interp_options_t *options,
                               rudnn_interp_plan_t *plan)
{
    TRY(rudnn_check_queue(op, queue));
    TRY(rudnn_check_view_arg(op, xn, queue, x));
    TRY(rudnn_check_view_arg(op, yn, queue, y));
    rudnn_interp_options_t def;
    if (!options) {
        rudnn_interp_options_init(&def);
        options = &def;
    }
    const rudnn_tensor_t *data = x, *other = y;
    const char *data_name = xn, *other_name = yn;
    TRY(rudnn_check_float_dtype(op, data_name, data));
    if (other->dtype != data->dtype)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: %s is %s, expected %s (%s's dtype)", op, other_name,
                               rudnn_dtype_name(other->dtype), rudnn_dtype_name(data->dtype), data_name);
    const int rank = x->rank;
    if (rank < 3 || rank > 2 + RUDNN_INTERP_MAX_SPATIAL)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has rank %d, expected 3, 4 or 5 ([N, C] and 1 to 3 "
                               "spatial dims)", op, xn, rank);
    if (y->rank != rank)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has rank %d and %s rank %d, expected the same", op, yn,
                               y->rank, xn, rank);
    const int d = rank - 2;
    TRY(check_options(op, options, d));
    for (int i = 0; i < rank; i++) {
        const int64_t lo = i < 2 ? 0 : 1;
        if (x->dims[i] < lo || x->dims[i] > RUDNN_INTERP_MAX_DIM)
            return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s dims[%d] = %lld, expected %lld..%lld", op, xn, i,
                                   (long long)x->dims[i], (long long)lo, (long long)RUDNN_INTERP_MAX_DIM);
        if (y->dims[i] < lo || y->dims[i] > RUDNN_INTERP_MAX_DIM)
            return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s dims[%d] = %lld, expected %lld..%lld", op, yn, i,
                                   (long long)y->dims[i], (long long)lo, (long long)RUDNN_INTERP_MAX_DIM);
        if (i < 2 && y->dims[i] != x->dims[i])
            return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s dims[%d] = %lld, expected %lld (%s's %s: only the "
                                   "spatial dims are resized)", op, yn, i, (long long)y->dims[i],
                                   (long long)x->dims[i], xn, i ? "C" : "N");
    }
    memset(plan, 0, sizeof *plan);
    plan->mode = options->mode;
    plan->dtype = data->dtype;
    plan->spatial = d;
    plan->align_corners = options->align_corners;
    plan->batch = x->dims[0];
    plan->channels = x->dims[1];
    for (int i = 0; i < 3; i++) {
        const int k = i - (3 - d);
        plan->in_size[i] = k >= 0 ? x->dims[2 + k] : 1;
        plan->out_size[i] = k >= 0 ? y->dims[2 + k] : 1;
        plan->ratio[i] = k >= 0 ? ratio_of(options, k, plan->in_size[i], plan->out_size[i]) : 1.0f;
    }
    rudnn_spatial_strides(x, d, plan->x_stride);
    rudnn_spatial_strides(y, d, plan->y_stride);
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t require_kernels(const char *op, rudnn_context_t ctx, const rudnn_interpolation_kernels_t **k)
{
    *k = RUDNN_FAMILY_TABLE(ctx->backend, interpolation);
    if (!*k)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: backend '%s' has no interpolation kernels", op,
                               ctx->backend->name);
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_interpolate_forward(rudnn_queue_t queue, const rudnn_tensor_t *x,
                                         const rudnn_interp_options_t *options, const rudnn_tensor_t *y)
{
    const char *op = "interpolate_forward";
    rudnn_clear_error();
    rudnn_interp_plan_t plan;
    TRY(validate(op, queue, x, "x", y, "y", options, &plan));
    TRY(rudnn_check_disjoint(op, "y", y, "x", x));
    const rudnn_interpolation_kernels_t *k;
    TRY(require_kernels(op, queue->context, &k));
    if (plan.batch == 0 || plan.channels == 0)
        return RUDNN_STATUS_SUCCESS;
    const rudnn_interp_operands_t o = {rudnn_mem_of(x), rudnn_mem_of(y)};
    return rudnn_kernel_status(op, k->forward(queue->handle, &plan, &o));
}

rudnn_status_t rudnn_interpolate_backward(rudnn_queue_t queue, const rudnn_tensor_t *dy,
                                          const rudnn_interp_options_t *options, const rudnn_tensor_t *dx)
{
    const char *op = "interpolate_backward";
    rudnn_clear_error();
    rudnn_interp_plan_t plan;
    TRY(validate(op, queue, dx, "dx", dy, "dy", options, &plan));
    TRY(rudnn_check_disjoint(op, "dx", dx, "dy", dy));
    const rudnn_interpolation_kernels_t *k;
    TRY(require_kernels(op, queue->context, &k));
    if (plan.batch == 0 || plan.channels == 0)
        return RUDNN_STATUS_SUCCESS;
    const rudnn_interp_operands_t o = {rudnn_mem_of(dx), rudnn_mem_of(dy)};
    return rudnn_kernel_status(op, k->backward(queue->handle, &plan, &o));
}
