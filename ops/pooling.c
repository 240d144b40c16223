/* Pooling (rudnn/pooling.h): the contract of the forward and the backward, the plan and the call
 * into the backend's table. No GPU API here. */
#include <stdio.h>
#include <string.h>

#include "rudnn/pooling.h"
#include "validate.h"

void rudnn_pool_options_init(rudnn_pool_options_t *options)
{
    if (!options)
        return;
    memset(options, 0, sizeof *options);
    options->mode = RUDNN_POOL_MAX;
    for (int i = 0; i < RUDNN_POOL_MAX_SPATIAL; i++)
        options->window[i] = options->stride[i] = options->dilation[i] = 1;
}

static const rudnn_pool_options_t *options_or_default(const rudnn_pool_options_t *o, rudnn_pool_options_t *def)
{
    if (o)
        return o;
    rudnn_pool_options_init(def);
    return def;
}

static rudnn_status_t check_options(const char *op, const rudnn_pool_options_t *o, int d)
{
    if ((unsigned)o->mode > RUDNN_POOL_AVG_EXCLUDE_PAD)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.mode = %d, expected RUDNN_POOL_MAX (0), "
                               "RUDNN_POOL_AVG_INCLUDE_PAD (1) or RUDNN_POOL_AVG_EXCLUDE_PAD (2)", op, (int)o->mode);
    if (o->ceil_mode != 0 && o->ceil_mode != 1)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.ceil_mode = %d, expected 0 or 1", op,
                               o->ceil_mode);
    static const char *const what[3] = {"window", "stride", "dilation"};
    for (int i = 0; i < d; i++) {
        const int64_t v[3] = {o->window[i], o->stride[i], o->dilation[i]};
        for (int j = 0; j < 3; j++)
            if (v[j] < 1 || v[j] > RUDNN_POOL_MAX_PARAM)
                return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.%s[%d] = %lld, expected 1..%d", op,
                                       what[j], i, (long long)v[j], RUDNN_POOL_MAX_PARAM);
        if (o->padding[i] < 0 || o->padding[i] > o->window[i] / 2)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.padding[%d] = %lld, expected 0..%lld (at most "
                                   "half the window %lld)", op, i, (long long)o->padding[i],
                                   (long long)(o->window[i] / 2), (long long)o->window[i]);
        if (o->mode != RUDNN_POOL_MAX && o->dilation[i] != 1)
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.dilation[%d] = %lld, expected 1: the averages "
                                   "take no dilation", op, i, (long long)o->dilation[i]);
    }
    return RUDNN_STATUS_SUCCESS;
}

/* The shape rule: x [N, C, S] gives y [N, C, P] (xn names x in messages). */
static rudnn_status_t output_dims(const char *op, int rank, const int64_t *x, const rudnn_pool_options_t *o,
                                  const char *xn, int64_t *y)
{
    if (rank < 3 || rank > 2 + RUDNN_POOL_MAX_SPATIAL)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has rank %d, expected 3, 4 or 5 ([N, C] and 1 to 3 "
                               "spatial dims)", op, xn, rank);
    const int d = rank - 2;
    TRY(check_options(op, o, d));
    for (int i = 0; i < rank; i++)
        if (x[i] < (i < 2 ? 0 : 1) || x[i] > RUDNN_POOL_MAX_DIM)
            return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s dims[%d] = %lld, expected %d..%lld", op, xn, i,
                                   (long long)x[i], i < 2 ? 0 : 1, (long long)RUDNN_POOL_MAX_DIM);
    y[0] = x[0];
    y[1] = x[1];
    for (int i = 0; i < d; i++) {
        const int64_t S = x[2 + i], st = o->stride[i], pad = o->padding[i];
        const int64_t span = o->dilation[i] * (o->window[i] - 1) + 1;
        /* PyTorch's rule: floor division (ceil_mode adds stride - 1 first), then ceil_mode drops a
         * last window that would start past the input and its left padding */
        const int64_t num = S + 2 * pad - span + (o->ceil_mode ? st - 1 : 0);
        int64_t P = (num >= 0 ? num / st : -((-num + st - 1) / st)) + 1;
        if (o->ceil_mode && P >= 1 && (P - 1) * st >= S + pad)
            P--;
        if (P < 1)
            return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: spatial dim %d: the window spans %lld (dilation %lld x "
                                   "(window %lld - 1) + 1), more than the padded input %lld (S %lld + 2 x padding "
                                   "%lld)%s: no output position", op, i, (long long)span, (long long)o->dilation[i],
                                   (long long)o->window[i], (long long)(S + 2 * pad), (long long)S, (long long)pad,
                                   o->ceil_mode ? " by a stride or more" : "");
        y[2 + i] = P;
    }
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_pool_output_dims(int x_rank, const int64_t *x_dims, const rudnn_pool_options_t *options,
                                      int64_t *y_dims)
{
    const char *op = "pool_output_dims";
    rudnn_clear_error();
    TRY(rudnn_check_arg(op, "x_dims", x_dims));
    TRY(rudnn_check_arg(op, "y_dims", y_dims));
    rudnn_pool_options_t def;
    int64_t y[2 + RUDNN_POOL_MAX_SPATIAL];
    TRY(output_dims(op, x_rank, x_dims, options_or_default(options, &def), "x", y));
    memcpy(y_dims, y, (size_t)x_rank * sizeof *y);
    return RUDNN_STATUS_SUCCESS;
}

/* Checks the call (forward: in = x, out = y; backward: in = dx's shape giver, out = dy) and fills
 * plan. The spatial input tensor is `xs` (x or dx), the pooled one `ys` (y or dy). */
static rudnn_status_t validate(const char *op, rudnn_queue_t queue, const rudnn_tensor_t *xs, const char *xs_name,
                               const rudnn_tensor_t *ys, const char *ys_name, const rudnn_tensor_t *x_extra,
                               const rudnn_tensor_t *indices, const rudnn_pool_options_t *options,
                               rudnn_pool_plan_t *plan)
{
    TRY(rudnn_check_queue(op, queue));
    TRY(rudnn_check_view_arg(op, xs_name, queue, xs));
    TRY(rudnn_check_view_arg(op, ys_name, queue, ys));
    if (x_extra)
        TRY(rudnn_check_view_arg(op, "x", queue, x_extra));
    if (indices)
        TRY(rudnn_check_view_arg(op, "indices", queue, indices));
    rudnn_pool_options_t def;
    const rudnn_pool_options_t *o = options_or_default(options, &def);
    TRY(rudnn_check_float_dtype(op, xs_name, xs));
    if (ys->dtype != xs->dtype)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: %s is %s, expected %s (%s's dtype)", op, ys_name,
                               rudnn_dtype_name(ys->dtype), rudnn_dtype_name(xs->dtype), xs_name);
    if (x_extra && x_extra->dtype != xs->dtype)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: x is %s, expected %s (%s's dtype)", op,
                               rudnn_dtype_name(x_extra->dtype), rudnn_dtype_name(xs->dtype), xs_name);
    if (xs->rank >= 3 && xs->rank <= 2 + RUDNN_POOL_MAX_SPATIAL)
        TRY(check_options(op, o, xs->rank - 2)); /* a bad mode is named as such before the indices rule */
    if (indices && o->mode != RUDNN_POOL_MAX)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: indices given with an average mode: only MAX has an "
                               "argmax (pass NULL)", op);
    if (indices)
        TRY(rudnn_check_dtype(op, "indices", indices, RUDNN_I64, "positions are int64, as PyTorch's"));
    const int rank = xs->rank;
    int64_t y[2 + RUDNN_POOL_MAX_SPATIAL];
    TRY(output_dims(op, rank, xs->dims, o, xs_name, y));
    TRY(rudnn_check_dims(op, ys_name, ys, y, rank, "[N, C, P...] by the shape rule of rudnn/pooling.h"));
    if (x_extra)
        TRY(rudnn_check_dims(op, "x", x_extra, xs->dims, rank, "dx's shape"));
    if (indices)
        TRY(rudnn_check_dims(op, "indices", indices, y, rank, "y's shape"));
    memset(plan, 0, sizeof *plan);
    const int d = rank - 2;
    plan->mode = o->mode;
    plan->dtype = xs->dtype;
    plan->spatial = d;
    plan->batch = xs->dims[0];
    plan->channels = xs->dims[1];
    for (int i = 0; i < 3; i++) {
        const int k = i - (3 - d);
        plan->in_size[i] = k >= 0 ? xs->dims[2 + k] : 1;
        plan->out_size[i] = k >= 0 ? y[2 + k] : 1;
        plan->window[i] = k >= 0 ? o->window[k] : 1;
        plan->stride[i] = k >= 0 ? o->stride[k] : 1;
        plan->padding[i] = k >= 0 ? o->padding[k] : 0;
        plan->dilation[i] = k >= 0 ? o->dilation[k] : 1;
    }
    rudnn_spatial_strides(xs, d, plan->x_stride);
    rudnn_spatial_strides(ys, d, plan->y_stride);
    rudnn_spatial_strides(indices, d, plan->idx_stride);
    plan->has_indices = indices != NULL;
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t require_kernels(const char *op, rudnn_context_t ctx, const rudnn_pooling_kernels_t **k)
{
    *k = RUDNN_FAMILY_TABLE(ctx->backend, pooling);
    if (!*k)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: backend '%s' has no pooling kernels", op,
                               ctx->backend->name);
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_pool_forward(rudnn_queue_t queue, const rudnn_tensor_t *x, const rudnn_pool_options_t *options,
                                  const rudnn_tensor_t *y, const rudnn_tensor_t *indices)
{
    const char *op = "pool_forward";
    rudnn_clear_error();
    rudnn_pool_plan_t plan;
    TRY(validate(op, queue, x, "x", y, "y", NULL, indices, options, &plan));
    TRY(rudnn_check_disjoint(op, "y", y, "x", x));
    TRY(rudnn_check_disjoint(op, "indices", indices, "x", x));
    TRY(rudnn_check_disjoint(op, "indices", indices, "y", y));
    const rudnn_pooling_kernels_t *k;
    TRY(require_kernels(op, queue->context, &k));
    if (plan.batch == 0 || plan.channels == 0)
        return RUDNN_STATUS_SUCCESS;
    rudnn_pool_operands_t o;
    memset(&o, 0, sizeof o);
    o.x = rudnn_mem_of(x);
    o.y = rudnn_mem_of(y);
    o.indices = rudnn_mem_of(indices);
    return rudnn_kernel_status(op, k->forward(queue->handle, &plan, &o));
}

rudnn_status_t rudnn_pool_backward(rudnn_queue_t queue, const rudnn_tensor_t *x, const rudnn_tensor_t *dy,
                                   const rudnn_pool_options_t *options, const rudnn_tensor_t *dx)
{
    const char *op = "pool_backward";
    rudnn_clear_error();
    rudnn_pool_options_t def;
    const rudnn_pool_options_t *o = options_or_default(options, &def);
    if (!x && (unsigned)o->mode == RUDNN_POOL_MAX)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: x is NULL: the MAX backward finds each argmax again "
                               "from x", op);
    rudnn_pool_plan_t plan;
    TRY(validate(op, queue, dx, "dx", dy, "dy", x, NULL, o, &plan));
    TRY(rudnn_check_disjoint(op, "dx", dx, "dy", dy));
    TRY(rudnn_check_disjoint(op, "dx", dx, "x", x));
    const rudnn_pooling_kernels_t *k;
    TRY(require_kernels(op, queue->context, &k));
    if (plan.batch == 0 || plan.channels == 0)
        return RUDNN_STATUS_SUCCESS;
    plan.has_x = plan.mode == RUDNN_POOL_MAX;
    rudnn_pool_operands_t ops;
    memset(&ops, 0, sizeof ops);
    if (plan.has_x) {
        ops.x = rudnn_mem_of(x);
        rudnn_spatial_strides(x, plan.spatial, plan.src_stride);
    }
    ops.y = rudnn_mem_of(dy);
    ops.dx = rudnn_mem_of(dx);
    return rudnn_kernel_status(op, k->backward(queue->handle, &plan, &ops));
}
