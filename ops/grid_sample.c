/* Grid sampling (rudnn/grid_sample.h): the contract of the forward and the backward, the plan and
 * the calls into the backend's table. No GPU API here. */
#include <stdio.h>
#include <string.h>

#include "rudnn/grid_sample.h"
#include "validate.h"

void rudnn_grid_sample_options_init(rudnn_grid_sample_options_t *options)
{
    if (!options)
        return;
    memset(options, 0, sizeof *options);
}

static rudnn_status_t check_options(const char *op, const rudnn_grid_sample_options_t *o, int d)
{
    if ((unsigned)o->mode > RUDNN_GRID_SAMPLE_BICUBIC)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.mode = %d, expected RUDNN_GRID_SAMPLE_BILINEAR "
                               "(0), _NEAREST (1) or _BICUBIC (2)", op, (int)o->mode);
    if ((unsigned)o->padding > RUDNN_GRID_SAMPLE_REFLECTION)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.padding = %d, expected RUDNN_GRID_SAMPLE_ZEROS "
                               "(0), _BORDER (1) or _REFLECTION (2)", op, (int)o->padding);
    if (o->align_corners != 0 && o->align_corners != 1)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.align_corners = %d, expected 0 or 1", op,
                               o->align_corners);
    if (o->mode == RUDNN_GRID_SAMPLE_BICUBIC && d == 3)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.mode BICUBIC takes 2D inputs only (x of rank 4), "
                               "as PyTorch's", op);
    return RUDNN_STATUS_SUCCESS;
}

static int64_t stride_of(const rudnn_tensor_t *t, int i) { return t->dims[i] == 1 ? 0 : t->strides[i]; }

/* [n, d, h, w, coordinate] of grids (2D: d stride 0). */
static void grid_strides(const rudnn_tensor_t *t, int d, int64_t s[5])
{
    s[0] = stride_of(t, 0), s[1] = d == 3 ? stride_of(t, 1) : 0;
    s[2] = stride_of(t, t->rank - 3), s[3] = stride_of(t, t->rank - 2), s[4] = stride_of(t, t->rank - 1);
}

/* x, grid and y (or dy) of one call; fills plan. */
static rudnn_status_t validate(const char *op, rudnn_queue_t queue, const rudnn_tensor_t *x,
                               const rudnn_tensor_t *grid, const rudnn_tensor_t *y, const char *yn,
                               const rudnn_grid_sample_options_t *options, rudnn_grid_sample_plan_t *plan)
{
    TRY(rudnn_check_queue(op, queue));
    TRY(rudnn_check_view_arg(op, "x", queue, x));
    TRY(rudnn_check_view_arg(op, "grid", queue, grid));
    TRY(rudnn_check_view_arg(op, yn, queue, y));
    rudnn_grid_sample_options_t def;
    if (!options) {
        rudnn_grid_sample_options_init(&def);
        options = &def;
    }
    TRY(rudnn_check_float_dtype(op, "x", x));
    TRY(rudnn_check_dtype(op, "grid", grid, x->dtype, "one dtype for every tensor"));
    TRY(rudnn_check_dtype(op, yn, y, x->dtype, "one dtype for every tensor"));
    if (x->rank != 4 && x->rank != 5)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: x has rank %d, expected 4 ([N, C, H, W]) or 5 ([N, C, D, "
                               "H, W])", op, x->rank);
    const int rank = x->rank, d = rank - 2;
    TRY(check_options(op, options, d));
    for (int i = 0; i < rank; i++)
        if (x->dims[i] < (i < 2 ? 0 : 1) || x->dims[i] > RUDNN_GRID_SAMPLE_MAX_DIM)
            return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: x dims[%d] = %lld, expected %d..%lld", op, i,
                                   (long long)x->dims[i], i < 2 ? 0 : 1, (long long)RUDNN_GRID_SAMPLE_MAX_DIM);
    if (grid->rank != rank)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: grid has rank %d, expected %d ([N, %s%d] beside x of "
                               "rank %d)", op, grid->rank, rank, d == 3 ? "Do, Ho, Wo, " : "Ho, Wo, ", d, rank);
    for (int i = 1; i < rank - 1; i++)
        if (grid->dims[i] < 0 || grid->dims[i] > RUDNN_GRID_SAMPLE_MAX_DIM)
            return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: grid dims[%d] = %lld, expected 0..%lld", op, i,
                                   (long long)grid->dims[i], (long long)RUDNN_GRID_SAMPLE_MAX_DIM);
    int64_t want[5];
    want[0] = x->dims[0];
    for (int i = 1; i < rank - 1; i++)
        want[i] = grid->dims[i];
    want[rank - 1] = d;
    TRY(rudnn_check_dims(op, "grid", grid, want, rank, d == 3 ? "[N, Do, Ho, Wo, 3]: N of x, one (x, y, z) per point"
                                                        : "[N, Ho, Wo, 2]: N of x, one (x, y) per point"));
    int64_t ywant[5] = {x->dims[0], x->dims[1]};
    for (int i = 0; i < d; i++)
        ywant[2 + i] = grid->dims[1 + i];
    TRY(rudnn_check_dims(op, yn, y, ywant, rank, "[N, C] of x, the grid's points"));
    memset(plan, 0, sizeof *plan);
    plan->mode = options->mode;
    plan->padding = options->padding;
    plan->align_corners = options->align_corners;
    plan->dtype = x->dtype;
    plan->spatial = d;
    plan->batch = x->dims[0];
    plan->channels = x->dims[1];
    for (int i = 0; i < 3; i++) {
        const int k = i - (3 - d);
        plan->in_size[i] = k >= 0 ? x->dims[2 + k] : 1;
        plan->out_size[i] = k >= 0 ? grid->dims[1 + k] : 1;
    }
    rudnn_spatial_strides(x, d, plan->x_stride);
    rudnn_spatial_strides(y, d, plan->y_stride);
    grid_strides(grid, d, plan->grid_stride);
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t require_kernels(const char *op, rudnn_context_t ctx, const rudnn_grid_sample_kernels_t **k)
{
    *k = RUDNN_FAMILY_TABLE(ctx->backend, grid_sample);
    if (!*k)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: backend '%s' has no grid-sample kernels", op,
                               ctx->backend->name);
    return RUDNN_STATUS_SUCCESS;
}

static uint64_t points(const rudnn_grid_sample_plan_t *p)
{
    return (uint64_t)p->batch * (uint64_t)p->out_size[0] * (uint64_t)p->out_size[1] * (uint64_t)p->out_size[2];
}

rudnn_status_t rudnn_grid_sample_forward(rudnn_queue_t queue, const rudnn_tensor_t *x, const rudnn_tensor_t *grid,
                                         const rudnn_grid_sample_options_t *options, const rudnn_tensor_t *y)
{
    const char *op = "grid_sample_forward";
    rudnn_clear_error();
    rudnn_grid_sample_plan_t plan;
    TRY(validate(op, queue, x, grid, y, "y", options, &plan));
    TRY(rudnn_check_disjoint(op, "y", y, "x", x));
    TRY(rudnn_check_disjoint(op, "y", y, "grid", grid));
    const rudnn_grid_sample_kernels_t *k;
    TRY(require_kernels(op, queue->context, &k));
    if (plan.channels == 0 || points(&plan) == 0)
        return RUDNN_STATUS_SUCCESS;
    rudnn_grid_sample_operands_t o;
    memset(&o, 0, sizeof o);
    o.x = rudnn_mem_of(x), o.grid = rudnn_mem_of(grid), o.y = rudnn_mem_of(y);
    return rudnn_kernel_status(op, k->forward(queue->handle, &plan, &o));
}

/* The backward's checks beyond validate's; fills the plan's gradient fields. */
static rudnn_status_t validate_backward(const char *op, rudnn_queue_t queue, const rudnn_tensor_t *x,
                                        const rudnn_tensor_t *grid, const rudnn_tensor_t *dy,
                                        const rudnn_grid_sample_options_t *options, const rudnn_tensor_t *dx,
                                        const rudnn_tensor_t *dgrid, rudnn_grid_sample_plan_t *plan)
{
    TRY(validate(op, queue, x, grid, dy, "dy", options, plan));
    if (!dx && !dgrid)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: dx and dgrid are both NULL: nothing to compute", op);
    if (dx) {
        TRY(rudnn_check_view_arg(op, "dx", queue, dx));
        TRY(rudnn_check_like(op, "dx", dx, "x", x));
        rudnn_spatial_strides(dx, plan->spatial, plan->dx_stride);
    }
    if (dgrid) {
        TRY(rudnn_check_view_arg(op, "dgrid", queue, dgrid));
        TRY(rudnn_check_like(op, "dgrid", dgrid, "grid", grid));
        grid_strides(dgrid, plan->spatial, plan->dgrid_stride);
    }
    const rudnn_tensor_t *ins[3] = {x, grid, dy};
    static const char *const in_names[3] = {"x", "grid", "dy"};
    for (int i = 0; i < 3; i++) {
        TRY(rudnn_check_disjoint(op, "dx", dx, in_names[i], ins[i]));
        TRY(rudnn_check_disjoint(op, "dgrid", dgrid, in_names[i], ins[i]));
    }
    TRY(rudnn_check_disjoint(op, "dx", dx, "dgrid", dgrid));
    plan->has_dx = dx != NULL;
    plan->has_dgrid = dgrid != NULL;
    return RUDNN_STATUS_SUCCESS;
}

/* Whether the backward has anything to write: no batch rows leave both outputs empty; no points
 * leave dx zeros (still written), no channels dgrid zeros. */
static int backward_empty(const rudnn_grid_sample_plan_t *p) { return p->batch == 0; }

/* *bytes is written only on success. */
static rudnn_status_t backward_need(const char *op, rudnn_queue_t queue, const rudnn_grid_sample_plan_t *plan,
                                    const rudnn_grid_sample_kernels_t *k, size_t *bytes)
{
    size_t need = 0;
    if (!backward_empty(plan))
        TRY(rudnn_kernel_status(op, k->backward_workspace(queue->context->device, plan, &need)));
    *bytes = need;
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_grid_sample_backward_workspace_size(rudnn_queue_t queue, const rudnn_tensor_t *x,
                                                         const rudnn_tensor_t *grid, const rudnn_tensor_t *dy,
                                                         const rudnn_grid_sample_options_t *options,
                                                         const rudnn_tensor_t *dx, const rudnn_tensor_t *dgrid,
                                                         size_t *bytes)
{
    const char *op = "grid_sample_backward_workspace_size";
    rudnn_clear_error();
    TRY(rudnn_check_arg(op, "bytes", bytes));
    rudnn_grid_sample_plan_t plan;
    TRY(validate_backward(op, queue, x, grid, dy, options, dx, dgrid, &plan));
    const rudnn_grid_sample_kernels_t *k;
    TRY(require_kernels(op, queue->context, &k));
    return backward_need(op, queue, &plan, k, bytes);
}

rudnn_status_t rudnn_grid_sample_backward(rudnn_queue_t queue, const rudnn_tensor_t *x, const rudnn_tensor_t *grid,
                                          const rudnn_tensor_t *dy, const rudnn_grid_sample_options_t *options,
                                          rudnn_buffer_t workspace, size_t workspace_bytes, const rudnn_tensor_t *dx,
                                          const rudnn_tensor_t *dgrid)
{
    const char *op = "grid_sample_backward";
    rudnn_clear_error();
    rudnn_grid_sample_plan_t plan;
    TRY(validate_backward(op, queue, x, grid, dy, options, dx, dgrid, &plan));
    const rudnn_grid_sample_kernels_t *k;
    TRY(require_kernels(op, queue->context, &k));
    size_t need;
    TRY(backward_need(op, queue, &plan, k, &need));
    const rudnn_tensor_t *all[5] = {x, grid, dy, dx, dgrid};
    static const char *const names[5] = {"x", "grid", "dy", "dx", "dgrid"};
    TRY(rudnn_check_workspace(op, queue, workspace, workspace_bytes, need,
                              "rudnn_grid_sample_backward_workspace_size", all, names, 5));
    if (backward_empty(&plan))
        return RUDNN_STATUS_SUCCESS;
    rudnn_grid_sample_operands_t o;
    memset(&o, 0, sizeof o);
    o.x = rudnn_mem_of(x), o.grid = rudnn_mem_of(grid), o.y = rudnn_mem_of(dy);
    o.dx = rudnn_mem_of(dx), o.dgrid = rudnn_mem_of(dgrid);
    void *mem = NULL;
    if (workspace || need)
        TRY(rudnn_scratch_begin(op, queue, workspace, need, &mem));
    o.workspace = (rudnn_mem_ref_t){mem, 0};
    const rudnn_status_t st = k->backward(queue->handle, &plan, &o);
    if (workspace || need)
        rudnn_scratch_end(queue, workspace, mem, need);
    return rudnn_kernel_status(op, st);
}
