/* Convolution (rudnn/convolution.h): the contract of the three directions, the plan, the guide's
 * strategy overrides, and the candidate choice (ops/choose.c) into the backend's table. No GPU API
 * here. */
#include <stdio.h>
#include <string.h>

#include "choose.h"
#include "rudnn/convolution.h"

void rudnn_conv_options_init(rudnn_conv_options_t *options)
{
    if (!options)
        return;
    memset(options, 0, sizeof *options);
    for (int i = 0; i < RUDNN_CONV_MAX_SPATIAL; i++)
        options->stride[i] = options->dilation[i] = 1;
    options->groups = 1;
}

static const char *strategy_name(int s)
{
    switch (s) {
    case RUDNN_CONV_AUTOTUNE: return "Autotune";
    case RUDNN_CONV_DIRECT: return "Direct";
    case RUDNN_CONV_IMPLICIT_GEMM: return "ImplicitGemm";
    default: return "invalid";
    }
}

static const char *direction_name(int d)
{
    switch (d) {
    case RUDNN_CONV_FORWARD: return "forward";
    case RUDNN_CONV_DATA_BACKWARD: return "data backward";
    case RUDNN_CONV_WEIGHT_BACKWARD: return "weight backward";
    default: return "invalid";
    }
}

/* ---- shapes ---------------------------------------------------------------------------------- */

static rudnn_status_t check_options(const char *op, const rudnn_conv_options_t *o, int d)
{
    static const char *const what[3] = {"stride", "padding", "dilation"};
    for (int i = 0; i < d; i++) {
        const int64_t v[3] = {o->stride[i], o->padding[i], o->dilation[i]};
        for (int j = 0; j < 3; j++) {
            const int64_t lo = j == 1 ? 0 : 1;
            if (v[j] < lo || v[j] > RUDNN_CONV_MAX_PARAM)
                return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.%s[%d] = %lld, expected %lld..%d", op,
                                       what[j], i, (long long)v[j], (long long)lo, RUDNN_CONV_MAX_PARAM);
        }
    }
    if (o->groups < 1)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.groups = %lld, expected >= 1", op,
                               (long long)o->groups);
    return RUDNN_STATUS_SUCCESS;
}

/* The shape rule shared by every direction: x [N, C, S], w [K, Cg, R] give y [N, K, P]. xn and wn
 * name the two tensors in messages (x or dx, w or dw). */
static rudnn_status_t output_dims(const char *op, int rank, const int64_t *x, const int64_t *w,
                                  const rudnn_conv_options_t *o, const char *xn, const char *wn, int64_t *y)
{
    if (rank < 3 || rank > 2 + RUDNN_CONV_MAX_SPATIAL)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has rank %d, expected 3, 4 or 5 ([N, C] and 1 to 3 "
                               "spatial dims)", op, xn, rank);
    const int d = rank - 2;
    TRY(check_options(op, o, d));
    for (int i = 0; i < rank; i++) {
        if (x[i] < (i == 0 ? 0 : 1) || x[i] > RUDNN_CONV_MAX_DIM)
            return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s dims[%d] = %lld, expected %d..%lld", op, xn, i,
                                   (long long)x[i], i == 0 ? 0 : 1, (long long)RUDNN_CONV_MAX_DIM);
        if (w[i] < 1 || w[i] > RUDNN_CONV_MAX_DIM)
            return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s dims[%d] = %lld, expected 1..%lld", op, wn, i,
                                   (long long)w[i], (long long)RUDNN_CONV_MAX_DIM);
    }
    const int64_t G = o->groups;
    if (G > x[1])
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: groups = %lld is more than C = %lld (%s dims[1]): groups "
                               "divide C", op, (long long)G, (long long)x[1], xn);
    if (w[1] * G != x[1])
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has %lld input channels a group (dims[1]) and groups "
                               "is %lld, so C must be %lld, but %s has C = %lld", op, wn, (long long)w[1],
                               (long long)G, (long long)(w[1] * G), xn, (long long)x[1]);
    if (w[0] % G)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: groups = %lld does not divide K = %lld (%s dims[0])", op,
                               (long long)G, (long long)w[0], wn);
    y[0] = x[0];
    y[1] = w[0];
    for (int i = 0; i < d; i++) {
        const int64_t span = o->dilation[i] * (w[2 + i] - 1) + 1;
        const int64_t room = x[2 + i] + 2 * o->padding[i];
        if (room < span)
            return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: spatial dim %d: the filter spans %lld (dilation %lld "
                                   "x (R %lld - 1) + 1), more than the padded input %lld (S %lld + 2 x padding %lld): "
                                   "no output position", op, i, (long long)span, (long long)o->dilation[i],
                                   (long long)w[2 + i], (long long)room, (long long)x[2 + i], (long long)o->padding[i]);
        y[2 + i] = (room - span) / o->stride[i] + 1;
    }
    return RUDNN_STATUS_SUCCESS;
}

static const rudnn_conv_options_t *options_or_default(const rudnn_conv_options_t *o, rudnn_conv_options_t *def)
{
    if (o)
        return o;
    rudnn_conv_options_init(def);
    return def;
}

rudnn_status_t rudnn_conv_output_dims(int x_rank, const int64_t *x_dims, const int64_t *w_dims,
                                      const rudnn_conv_options_t *options, int64_t *y_dims)
{
    const char *op = "conv_output_dims";
    rudnn_clear_error();
    TRY(rudnn_check_arg(op, "x_dims", x_dims));
    TRY(rudnn_check_arg(op, "w_dims", w_dims));
    TRY(rudnn_check_arg(op, "y_dims", y_dims));
    rudnn_conv_options_t def;
    int64_t y[2 + RUDNN_CONV_MAX_SPATIAL];
    TRY(output_dims(op, x_rank, x_dims, w_dims, options_or_default(options, &def), "x", "w", y));
    memcpy(y_dims, y, (size_t)x_rank * sizeof *y);
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_conv_channels_last(rudnn_tensor_t *tensor, rudnn_buffer_t buffer, size_t offset,
                                        rudnn_dtype_t dtype, int rank, const int64_t *dims)
{
    const char *op = "conv_channels_last";
    rudnn_clear_error();
    TRY(rudnn_check_arg(op, "tensor", tensor));
    if (rank < 3 || rank > 2 + RUDNN_CONV_MAX_SPATIAL)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: rank %d, expected 3, 4 or 5 ([N, C, spatial...])", op,
                               rank);
    rudnn_tensor_t t;
    const rudnn_status_t st = rudnn_tensor_init(&t, buffer, offset, dtype, rank, dims);
    if (st) {
        rudnn_error_prefix(op);
        return st;
    }
    /* memory [N, S_1 .. S_d, C]: C innermost, then the spatial dims from the last, then N */
    t.strides[1] = 1;
    int64_t s = dims[1] ? dims[1] : 1;
    for (int i = rank - 1; i >= 2; i--) {
        t.strides[i] = s;
        s *= dims[i] ? dims[i] : 1;
    }
    t.strides[0] = s;
    *tensor = t;
    return RUDNN_STATUS_SUCCESS;
}

/* ---- arguments ------------------------------------------------------------------------------- */

typedef struct conv_args {
    rudnn_queue_t queue;
    rudnn_conv_direction_t direction;
    const rudnn_tensor_t *x, *w, *y, *bias; /* by role: x or dx, w or dw, y or dy, bias or dbias */
    const rudnn_conv_options_t *options;
    rudnn_conv_strategy_t strategy;
} conv_args_t;

/* The names of the roles in this direction. */
typedef struct role_names {
    const char *x, *w, *y, *bias;
    int out_x, out_w, out_y, out_bias; /* which roles are outputs */
} role_names_t;

static role_names_t roles_of(rudnn_conv_direction_t d)
{
    switch (d) {
    case RUDNN_CONV_DATA_BACKWARD: return (role_names_t){"dx", "w", "dy", "bias", 1, 0, 0, 0};
    case RUDNN_CONV_WEIGHT_BACKWARD: return (role_names_t){"x", "dw", "dy", "dbias", 0, 1, 0, 1};
    default: return (role_names_t){"x", "w", "y", "bias", 0, 0, 1, 0};
    }
}

/* tensors -> roles, for resolve and workspace_size: the fields of the direction, others NULL. */
static rudnn_status_t args_of(const char *op, rudnn_conv_direction_t dir, const rudnn_conv_tensors_t *t,
                              conv_args_t *a)
{
    TRY(rudnn_check_arg(op, "tensors", t));
    const rudnn_tensor_t *x = NULL, *w = NULL, *y = NULL, *bias = NULL;
    const char *unused[4];
    const rudnn_tensor_t *unused_t[4];
    int n = 0;
    switch (dir) {
    case RUDNN_CONV_FORWARD:
        x = t->x, w = t->w, y = t->y, bias = t->bias;
        unused[n] = "dy", unused_t[n++] = t->dy;
        unused[n] = "dx", unused_t[n++] = t->dx;
        unused[n] = "dw", unused_t[n++] = t->dw;
        unused[n] = "dbias", unused_t[n++] = t->dbias;
        break;
    case RUDNN_CONV_DATA_BACKWARD:
        x = t->dx, w = t->w, y = t->dy;
        unused[n] = "x", unused_t[n++] = t->x;
        unused[n] = "y", unused_t[n++] = t->y;
        unused[n] = "bias", unused_t[n++] = t->bias;
        unused[n] = "dw", unused_t[n++] = t->dw;
        break;
    case RUDNN_CONV_WEIGHT_BACKWARD:
        x = t->x, w = t->dw, y = t->dy, bias = t->dbias;
        unused[n] = "w", unused_t[n++] = t->w;
        unused[n] = "y", unused_t[n++] = t->y;
        unused[n] = "bias", unused_t[n++] = t->bias;
        unused[n] = "dx", unused_t[n++] = t->dx;
        break;
    default:
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: direction = %d, expected RUDNN_CONV_FORWARD (0), "
                               "RUDNN_CONV_DATA_BACKWARD (1) or RUDNN_CONV_WEIGHT_BACKWARD (2)", op, (int)dir);
    }
    for (int i = 0; i < n; i++)
        if (unused_t[i])
            return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: tensors->%s is set, but the %s direction takes no %s "
                                   "(leave it NULL)", op, unused[i], direction_name(dir), unused[i]);
    a->direction = dir;
    a->x = x, a->w = w, a->y = y, a->bias = bias;
    return RUDNN_STATUS_SUCCESS;
}

/* Every check of the call before a kernel is chosen; fills plan. */
static rudnn_status_t validate(const char *op, const conv_args_t *a, rudnn_conv_plan_t *plan)
{
    TRY(rudnn_check_queue(op, a->queue));
    const role_names_t r = roles_of(a->direction);
    TRY(rudnn_check_view_arg(op, r.x, a->queue, a->x));
    TRY(rudnn_check_view_arg(op, r.w, a->queue, a->w));
    TRY(rudnn_check_view_arg(op, r.y, a->queue, a->y));
    if (a->bias)
        TRY(rudnn_check_view_arg(op, r.bias, a->queue, a->bias));
    if ((unsigned)a->strategy > RUDNN_CONV_IMPLICIT_GEMM)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: strategy = %d, expected RUDNN_CONV_AUTOTUNE (0), "
                               "RUDNN_CONV_DIRECT (1) or RUDNN_CONV_IMPLICIT_GEMM (2)", op, (int)a->strategy);
    /* dtypes: the data tensor's, shared by all */
    const rudnn_tensor_t *data = a->direction == RUDNN_CONV_DATA_BACKWARD ? a->y : a->x;
    const char *data_name = a->direction == RUDNN_CONV_DATA_BACKWARD ? r.y : r.x;
    TRY(rudnn_check_float_dtype(op, data_name, data));
    const rudnn_tensor_t *all[4] = {a->x, a->w, a->y, a->bias};
    const char *names[4] = {r.x, r.w, r.y, r.bias};
    for (int i = 0; i < 4; i++)
        if (all[i] && all[i]->dtype != data->dtype)
            return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: %s is %s, expected %s (%s's dtype: every tensor of a "
                                   "convolution has one dtype)", op, names[i], rudnn_dtype_name(all[i]->dtype),
                                   rudnn_dtype_name(data->dtype), data_name);
    /* shapes: x (dx) and w (dw) decide y (dy) */
    if (a->w->rank != a->x->rank)
        return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has rank %d and %s rank %d, expected the same "
                               "([K, C / groups, R...] beside [N, C, S...])", op, r.w, a->w->rank, r.x, a->x->rank);
    rudnn_conv_options_t def;
    const rudnn_conv_options_t *o = options_or_default(a->options, &def);
    const int rank = a->x->rank;
    int64_t y[2 + RUDNN_CONV_MAX_SPATIAL];
    TRY(output_dims(op, rank, a->x->dims, a->w->dims, o, r.x, r.w, y));
    TRY(rudnn_check_dims(op, r.y, a->y, y, rank, "[N, K, P...] by the shape rule of rudnn/convolution.h"));
    if (a->bias)
        TRY(rudnn_check_dims(op, r.bias, a->bias, &y[1], 1, "[K]"));
    /* outputs touch no input and no other output */
    const int outs[4] = {r.out_x, r.out_w, r.out_y, r.out_bias};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            if (i != j && outs[i] && (!outs[j] || j > i))
                TRY(rudnn_check_disjoint(op, names[i], all[i], names[j], all[j]));
    /* the plan */
    memset(plan, 0, sizeof *plan);
    const int d = rank - 2;
    plan->direction = a->direction;
    plan->dtype = data->dtype;
    plan->spatial = d;
    plan->batch = a->x->dims[0];
    plan->in_channels = a->x->dims[1];
    plan->out_channels = a->w->dims[0];
    plan->groups = o->groups;
    for (int i = 0; i < 3; i++) {
        const int k = i - (3 - d); /* the op's spatial dim, or < 0 for a missing leading one */
        plan->in_size[i] = k >= 0 ? a->x->dims[2 + k] : 1;
        plan->filter_size[i] = k >= 0 ? a->w->dims[2 + k] : 1;
        plan->out_size[i] = k >= 0 ? y[2 + k] : 1;
        plan->stride[i] = k >= 0 ? o->stride[k] : 1;
        plan->padding[i] = k >= 0 ? o->padding[k] : 0;
        plan->dilation[i] = k >= 0 ? o->dilation[k] : 1;
    }
    rudnn_spatial_strides(a->x, d, plan->x_stride);
    rudnn_spatial_strides(a->w, d, plan->w_stride);
    rudnn_spatial_strides(a->y, d, plan->y_stride);
    plan->has_bias = a->bias != NULL;
    plan->bias_stride = a->bias ? a->bias->strides[0] : 0;
    return RUDNN_STATUS_SUCCESS;
}

/* ---- which kernel ------------------------------------------------------------------------------ */

static const rudnn_convolution_kernels_t *conv_kernels(rudnn_context_t ctx)
{
    return RUDNN_FAMILY_TABLE(ctx->backend, convolution);
}

static rudnn_status_t require_kernels(const char *op, rudnn_context_t ctx, const rudnn_convolution_kernels_t **k)
{
    *k = conv_kernels(ctx);
    if (!*k || !(*k)->candidate_count)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: backend '%s' has no convolution kernels", op,
                               ctx->backend->name);
    return RUDNN_STATUS_SUCCESS;
}

/* The guide's overrides (section 2): ImplicitGemm for a 3D F32 convolution, or a grouped one, runs
 * Direct. NULL when the request stands. */
static const char *override_of(const rudnn_conv_plan_t *p, rudnn_conv_strategy_t s)
{
    if (s != RUDNN_CONV_IMPLICIT_GEMM)
        return NULL;
    if (p->spatial == 3 && p->dtype == RUDNN_F32)
        return "ImplicitGemm overridden to Direct: a 3D F32 convolution runs Direct (guide, section 2)";
    if (p->groups > 1)
        return "ImplicitGemm overridden to Direct: a grouped convolution runs Direct (guide, section 2)";
    return NULL;
}

typedef struct choose_arg {
    rudnn_context_t ctx;
    const rudnn_convolution_kernels_t *k;
    const rudnn_conv_plan_t *plan;
} choose_arg_t;

static int applies(void *arg, uint32_t i)
{
    const choose_arg_t *c = arg;
    return c->k->candidate_directions[i] == (int)c->plan->direction;
}

static void check(void *arg, uint32_t i, rudnn_candidate_verdict_t *v)
{
    const choose_arg_t *c = arg;
    c->k->check(c->ctx->device, c->plan, i, v);
}

static unsigned long long bucket(int64_t n)
{
    unsigned long long b = 1;
    while (b < (unsigned long long)n && b < (1ull << 62))
        b <<= 1;
    return b;
}

/* A shape bucket: powers of two for the product's sizes (rows N P, the reduction Cg R), exact
 * channels a group, filter, stride and dilation. */
static void key_rest(const rudnn_conv_plan_t *p, char *s, size_t cap)
{
    const int64_t P = p->out_size[0] * p->out_size[1] * p->out_size[2];
    const int64_t S = p->in_size[0] * p->in_size[1] * p->in_size[2];
    snprintf(s, cap, "%s|%s|d%d|np%llu|ns%llu|cg%lld|kg%lld|g%llu|r%lldx%lldx%lld|s%lldx%lldx%lld|l%lldx%lldx%lld|b%d",
             rudnn_dtype_name(p->dtype), direction_name(p->direction), p->spatial, bucket(p->batch * P),
             bucket(p->batch * S), (long long)(p->in_channels / p->groups), (long long)(p->out_channels / p->groups),
             bucket(p->groups), (long long)p->filter_size[0], (long long)p->filter_size[1],
             (long long)p->filter_size[2], (long long)p->stride[0], (long long)p->stride[1], (long long)p->stride[2],
             (long long)p->dilation[0], (long long)p->dilation[1], (long long)p->dilation[2], p->has_bias);
}

static void describe(const rudnn_conv_plan_t *p, char *s, size_t cap)
{
    snprintf(s, cap, "%s %s, %dD [N %lld, C %lld, K %lld, groups %lld, S %lldx%lldx%lld, R %lldx%lldx%lld]",
             rudnn_dtype_name(p->dtype), direction_name(p->direction), p->spatial, (long long)p->batch,
             (long long)p->in_channels, (long long)p->out_channels, (long long)p->groups, (long long)p->in_size[0],
             (long long)p->in_size[1], (long long)p->in_size[2], (long long)p->filter_size[0],
             (long long)p->filter_size[1], (long long)p->filter_size[2]);
}

/* Nothing to run: forward and data backward with no batch rows (weight backward still writes
 * zeros). */
static int nothing_to_run(const rudnn_conv_plan_t *p)
{
    return p->batch == 0 && p->direction != RUDNN_CONV_WEIGHT_BACKWARD;
}

static rudnn_status_t choose(const char *op, rudnn_context_t ctx, const rudnn_conv_plan_t *plan,
                             rudnn_conv_strategy_t requested, rudnn_choice_made_t *d)
{
    const rudnn_convolution_kernels_t *k;
    TRY(require_kernels(op, ctx, &k));
    const char *over = override_of(plan, requested);
    char rest[320], what[256];
    key_rest(plan, rest, sizeof rest);
    describe(plan, what, sizeof what);
    choose_arg_t arg = {ctx, k, plan};
    rudnn_choose_request_t r = {
        .op = op, .context = ctx, .candidates = k->candidates, .count = k->candidate_count,
        .requested = over ? RUDNN_CONV_DIRECT : (int)requested, .autotune = RUDNN_CONV_AUTOTUNE,
        .strategy_name = strategy_name, .applies = applies, .check = check, .arg = &arg,
        .family = "convolution", .key_rest = rest, .what = what,
    };
    TRY(rudnn_choose(&r, d));
    if (over)
        rudnn_choice_note(d, "override", over);
    return RUDNN_STATUS_SUCCESS;
}

static void fill_choice(const rudnn_convolution_kernels_t *k, const rudnn_choice_made_t *d,
                        rudnn_conv_choice_t *choice)
{
    memset(choice, 0, sizeof *choice);
    choice->strategy = (rudnn_conv_strategy_t)k->candidates[d->picked].strategy;
    choice->kernel = k->candidates[d->picked].name;
    rudnn_copy_str(choice->reason, sizeof choice->reason, d->reason);
}

/* ---- running ----------------------------------------------------------------------------------- */

typedef struct run_arg {
    const conv_args_t *a;
    const rudnn_conv_plan_t *plan;
    const rudnn_convolution_kernels_t *k;
} run_arg_t;

static rudnn_status_t run_workspace(void *arg, uint32_t c, size_t *bytes)
{
    const run_arg_t *r = arg;
    *bytes = 0;
    return r->k->workspace(r->a->queue->context->device, r->plan, c, bytes);
}

static rudnn_status_t run_candidate(void *arg, uint32_t c, void *ws)
{
    const run_arg_t *r = arg;
    rudnn_conv_operands_t o;
    memset(&o, 0, sizeof o);
    o.x = rudnn_mem_of(r->a->x);
    o.w = rudnn_mem_of(r->a->w);
    o.y = rudnn_mem_of(r->a->y);
    o.bias = rudnn_mem_of(r->a->bias);
    o.workspace.mem = ws;
    return r->k->run(r->a->queue->handle, r->plan, c, &o);
}

static rudnn_status_t check_workspace(const char *op, const conv_args_t *a, rudnn_buffer_t ws, size_t ws_bytes,
                                      size_t need, const char *kernel)
{
    const role_names_t r = roles_of(a->direction);
    const char *const names[4] = {r.x, r.w, r.y, r.bias};
    const rudnn_tensor_t *all[4] = {a->x, a->w, a->y, a->bias};
    char query[160];
    snprintf(query, sizeof query, "kernel %s; rudnn_conv_workspace_size", kernel);
    return rudnn_check_workspace(op, a->queue, ws, ws_bytes, need, query, all, names, 4);
}

static rudnn_status_t conv_call(const char *op, const conv_args_t *a, rudnn_buffer_t workspace, size_t workspace_bytes)
{
    rudnn_conv_plan_t plan;
    TRY(validate(op, a, &plan));
    const rudnn_convolution_kernels_t *k;
    TRY(require_kernels(op, a->queue->context, &k));
    if (nothing_to_run(&plan))
        return check_workspace(op, a, workspace, workspace_bytes, 0, "(none)");
    rudnn_choice_made_t d;
    TRY(choose(op, a->queue->context, &plan, a->strategy, &d));
    run_arg_t ra = {a, &plan, k};
    size_t need = 0;
    TRY(rudnn_kernel_status(op, run_workspace(&ra, d.picked, &need)));
    TRY(check_workspace(op, a, workspace, workspace_bytes, need, k->candidates[d.picked].name));
    const rudnn_candidate_runner_t runner = {run_workspace, run_candidate, &ra};
    return rudnn_run_choice(op, a->queue, k->candidates, &d, workspace, workspace_bytes, &runner);
}

/* ---- public calls ------------------------------------------------------------------------------ */

/* What resolve and workspace_size share: the checks of a call of direction with these tensors, and
 * its choice (*none: N is 0, no kernel runs). */
typedef struct query {
    conv_args_t a;
    rudnn_conv_plan_t plan;
    const rudnn_convolution_kernels_t *k;
    rudnn_choice_made_t d;
    int none;
} query_t;

static rudnn_status_t query(const char *op, rudnn_queue_t queue, rudnn_conv_direction_t direction,
                            const rudnn_conv_tensors_t *tensors, const rudnn_conv_options_t *options,
                            rudnn_conv_strategy_t strategy, query_t *r)
{
    memset(r, 0, sizeof *r);
    r->a = (conv_args_t){queue, direction, NULL, NULL, NULL, NULL, options, strategy};
    TRY(rudnn_check_queue(op, queue));
    TRY(args_of(op, direction, tensors, &r->a));
    TRY(validate(op, &r->a, &r->plan));
    TRY(require_kernels(op, queue->context, &r->k));
    r->none = nothing_to_run(&r->plan);
    return r->none ? RUDNN_STATUS_SUCCESS : choose(op, queue->context, &r->plan, strategy, &r->d);
}

rudnn_status_t rudnn_conv_resolve(rudnn_queue_t queue, rudnn_conv_direction_t direction,
                                  const rudnn_conv_tensors_t *tensors, const rudnn_conv_options_t *options,
                                  rudnn_conv_strategy_t strategy, rudnn_conv_choice_t *choice)
{
    const char *op = "conv_resolve";
    rudnn_clear_error();
    TRY(rudnn_check_arg(op, "choice", choice));
    query_t r;
    TRY(query(op, queue, direction, tensors, options, strategy, &r));
    if (r.none) {
        memset(choice, 0, sizeof *choice);
        choice->strategy = strategy;
        choice->kernel = "convolution.none";
        snprintf(choice->reason, sizeof choice->reason, "N is 0: no kernel runs");
        return RUDNN_STATUS_SUCCESS;
    }
    fill_choice(r.k, &r.d, choice);
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_conv_workspace_size(rudnn_queue_t queue, rudnn_conv_direction_t direction,
                                         const rudnn_conv_tensors_t *tensors, const rudnn_conv_options_t *options,
                                         rudnn_conv_strategy_t strategy, size_t *bytes)
{
    const char *op = "conv_workspace_size";
    rudnn_clear_error();
    TRY(rudnn_check_arg(op, "bytes", bytes));
    query_t r;
    TRY(query(op, queue, direction, tensors, options, strategy, &r));
    size_t need = 0;
    if (!r.none) {
        run_arg_t ra = {&r.a, &r.plan, r.k};
        TRY(rudnn_kernel_status(op, run_workspace(&ra, r.d.picked, &need)));
    }
    *bytes = need;
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_conv_forward(rudnn_queue_t queue, const rudnn_tensor_t *x, const rudnn_tensor_t *w,
                                  const rudnn_tensor_t *bias, const rudnn_conv_options_t *options,
                                  rudnn_conv_strategy_t strategy, rudnn_buffer_t workspace, size_t workspace_bytes,
                                  const rudnn_tensor_t *y)
{
    rudnn_clear_error();
    const conv_args_t a = {queue, RUDNN_CONV_FORWARD, x, w, y, bias, options, strategy};
    return conv_call("conv_forward", &a, workspace, workspace_bytes);
}

rudnn_status_t rudnn_conv_data_backward(rudnn_queue_t queue, const rudnn_tensor_t *dy, const rudnn_tensor_t *w,
                                        const rudnn_conv_options_t *options, rudnn_conv_strategy_t strategy,
                                        rudnn_buffer_t workspace, size_t workspace_bytes, const rudnn_tensor_t *dx)
{
    rudnn_clear_error();
    const conv_args_t a = {queue, RUDNN_CONV_DATA_BACKWARD, dx, w, dy, NULL, options, strategy};
    return conv_call("conv_data_backward", &a, workspace, workspace_bytes);
}

rudnn_status_t rudnn_conv_weight_backward(rudnn_queue_t queue, const rudnn_tensor_t *x, const rudnn_tensor_t *dy,
                                          const rudnn_conv_options_t *options, rudnn_conv_strategy_t strategy,
                                          rudnn_buffer_t workspace, size_t workspace_bytes, const rudnn_tensor_t *dw,
                                          const rudnn_tensor_t *dbias)
{
    rudnn_clear_error();
    const conv_args_t a = {queue, RUDNN_CONV_WEIGHT_BACKWARD, x, dw, dy, dbias, options, strategy};
    return conv_call("conv_weight_backward", &a, workspace, workspace_bytes);
}

rudnn_status_t rudnn_conv_kernel_count(rudnn_context_t context, int *count)
{
    const char *op = "conv_kernel_count";
    rudnn_clear_error();
    if (!context || !count)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is NULL", op, context ? "count" : "context");
    const rudnn_convolution_kernels_t *k;
    TRY(require_kernels(op, context, &k));
    *count = (int)k->candidate_count;
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_conv_kernel_info(rudnn_context_t context, int index, const char **name,
                                      rudnn_conv_strategy_t *strategy, rudnn_conv_direction_t *direction)
{
    const char *op = "conv_kernel_info";
    rudnn_clear_error();
    if (!context || !name || !strategy || !direction)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is NULL", op,
                               !context ? "context" : !name ? "name" : !strategy ? "strategy" : "direction");
    const rudnn_convolution_kernels_t *k;
    TRY(require_kernels(op, context, &k));
    if (index < 0 || (uint32_t)index >= k->candidate_count)
        return rudnn_set_error(RUDNN_STATUS_OUT_OF_BOUNDS, "%s: index %d, backend '%s' has %u convolution kernels", op,
                               index, context->backend->name, k->candidate_count);
    *name = k->candidates[index].name;
    *strategy = (rudnn_conv_strategy_t)k->candidates[index].strategy;
    *direction = (rudnn_conv_direction_t)k->candidate_directions[index];
    return RUDNN_STATUS_SUCCESS;
}
