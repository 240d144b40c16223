/* Dense attention (rudnn/attention.h): the contract, the plan, which candidate runs (static
 * choice or the autotune cache) and the call into the backend's table. No GPU API here. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rudnn/attention.h"
#include "attention_internal.h"
#include "choose.h"


void rudnn_attention_options_init(rudnn_attention_options_t *options)
{
    if (!options)
        return;
    memset(options, 0, sizeof *options);
    options->window_left = RUDNN_ATTENTION_NO_WINDOW;
    options->window_right = RUDNN_ATTENTION_NO_WINDOW;
}

/* ---- arguments ---------------------------------------------------------------------------- */


static const char *strategy_name(int s)
{
    switch (s) {
    case RUDNN_ATTENTION_AUTOTUNE: return "Autotune";
    case RUDNN_ATTENTION_FALLBACK: return "Fallback";
    case RUDNN_ATTENTION_FLASH_UNIT: return "FlashUnit";
    case RUDNN_ATTENTION_FLASH_ACCELERATED: return "FlashBlackboxAccelerated";
    default: return "invalid";
    }
}

static rudnn_status_t check_rank(const char *op, const char *arg, const rudnn_tensor_t *t, int rank,
                                 const char *layout)
{
    if (t->rank == rank)
        return RUDNN_STATUS_SUCCESS;
    char s[160];
    return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has shape %s (rank %d), expected rank %d %s", op, arg,
                           rudnn_shape_str(t, s, sizeof s), t->rank, rank, layout);
}

/* q, k, v, out: a strided view of rank 4 whose last dim is contiguous. */
static rudnn_status_t check_operand(const char *op, const char *arg, rudnn_queue_t queue, const rudnn_tensor_t *t,
                                    const char *layout)
{
    TRY(rudnn_check_tensor_rows(op, arg, queue, t, 0));
    return check_rank(op, arg, t, 4, layout);
}

static rudnn_status_t check_same_dtype(const char *op, const char *arg, const rudnn_tensor_t *t,
                                       const rudnn_tensor_t *q)
{
    if (t->dtype == q->dtype)
        return RUDNN_STATUS_SUCCESS;
    return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: %s has dtype %s, expected %s (dtype of q)", op, arg,
                           rudnn_dtype_name(t->dtype), rudnn_dtype_name(q->dtype));
}

static rudnn_status_t shape_error(const char *op, const char *arg, const rudnn_tensor_t *t, const char *want)
{
    char s[160];
    return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has shape %s, expected %s", op, arg,
                           rudnn_shape_str(t, s, sizeof s), want);
}

static rudnn_status_t check_head_dim(const char *op, const char *arg, const char *name, int64_t d)
{
    if (d >= 1 && d <= RUDNN_ATTENTION_MAX_HEAD_DIM)
        return RUDNN_STATUS_SUCCESS;
    return rudnn_set_error(RUDNN_STATUS_BAD_SHAPE, "%s: %s has head dim %s = %lld, expected 1..%d", op, arg, name,
                           (long long)d, RUDNN_ATTENTION_MAX_HEAD_DIM);
}

/* mask or attn_bias: [B or 1, Hq or 1, Sq, Skv]. */
static rudnn_status_t check_scores_shape(const char *op, const char *arg, const rudnn_tensor_t *t, int64_t b,
                                         int64_t hq, int64_t sq, int64_t skv)
{
    TRY(check_rank(op, arg, t, 4, "[B or 1, Hq or 1, Sq, Skv]"));
    if ((t->dims[0] == b || t->dims[0] == 1) && (t->dims[1] == hq || t->dims[1] == 1) && t->dims[2] == sq &&
        t->dims[3] == skv)
        return RUDNN_STATUS_SUCCESS;
    char want[160];
    snprintf(want, sizeof want, "[%lld or 1, %lld or 1, %lld, %lld] ([B or 1, Hq or 1, Sq, Skv])", (long long)b,
             (long long)hq, (long long)sq, (long long)skv);
    return shape_error(op, arg, t, want);
}

static rudnn_status_t check_options(const char *op, const rudnn_attention_options_t *o)
{
    if (!isfinite(o->scale))
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.scale = %g, expected a finite nonzero value "
                               "(0: 1 / sqrt(D))", op, (double)o->scale);
    if (!isfinite(o->softcap) || o->softcap < 0.0f)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.softcap = %g, expected 0 (none) or a finite "
                               "value > 0", op, (double)o->softcap);
    if (o->window_left < RUDNN_ATTENTION_NO_WINDOW)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.window_left = %lld, expected -1 (no window) "
                               "or >= 0", op, (long long)o->window_left);
    if (o->window_right < RUDNN_ATTENTION_NO_WINDOW)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.window_right = %lld, expected -1 (no window) "
                               "or >= 0", op, (long long)o->window_right);
    if (o->causal && o->window_right > 0)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: options.causal with window_right = %lld is "
                               "inconsistent (causal is window_right 0)", op, (long long)o->window_right);
    return RUDNN_STATUS_SUCCESS;
}

static void plan_strides(const rudnn_tensor_t *t, int64_t stride[3])
{
    /* the stride of a dim of size 1 is never used (rudnn/status.h): 0 keeps kernels' offset
     * arithmetic in range, and is how a broadcast mask or bias dim reads */
    for (int i = 0; i < 3; i++)
        stride[i] = t->dims[i] == 1 ? 0 : t->strides[i];
}

/* Every check of rudnn_attention before a kernel is chosen; fills plan. out may be NULL when
 * out_required is 0 (resolve, workspace_size). */
rudnn_status_t rudnn_attention_validate(const char *op, const attn_args_t *a, int out_required,
                                        rudnn_attention_plan_t *plan)
{
    TRY(rudnn_check_queue(op, a->queue));
    TRY(rudnn_check_arg(op, "q", a->q));
    TRY(rudnn_check_arg(op, "k", a->k));
    TRY(rudnn_check_arg(op, "v", a->v));
    if (out_required)
        TRY(rudnn_check_arg(op, "out", a->out));
    TRY(check_operand(op, "q", a->queue, a->q, "[B, Hq, Sq, D]"));
    TRY(check_operand(op, "k", a->queue, a->k, "[B, Hkv, Skv, D]"));
    TRY(check_operand(op, "v", a->queue, a->v, "[B, Hkv, Skv, Dv]"));
    if (a->out)
        TRY(check_operand(op, "out", a->queue, a->out, "[B, Hq, Sq, Dv]"));
    if (a->mask)
        TRY(rudnn_check_tensor_rows(op, "mask", a->queue, a->mask, 0));
    if (a->bias)
        TRY(rudnn_check_tensor_rows(op, "attn_bias", a->queue, a->bias, 0));
    if (a->lse) {
        TRY(rudnn_check_tensor(op, "lse", a->queue, a->lse, 0));
        TRY(check_rank(op, "lse", a->lse, 3, "[B, Hq, Sq]"));
    }

    /* dtypes */
    const rudnn_tensor_t *q = a->q, *k = a->k, *v = a->v;
    TRY(rudnn_check_float_dtype(op, "q", q));
    TRY(check_same_dtype(op, "k", k, q));
    TRY(check_same_dtype(op, "v", v, q));
    if (a->out)
        TRY(check_same_dtype(op, "out", a->out, q));
    if (a->mask)
        TRY(rudnn_check_dtype(op, "mask", a->mask, RUDNN_BOOL, "nonzero = masked"));
    if (a->bias && a->bias->dtype != RUDNN_F32 && a->bias->dtype != q->dtype)
        return rudnn_set_error(RUDNN_STATUS_BAD_DTYPE, "%s: attn_bias has dtype %s, expected f32 or %s (dtype of q)",
                               op, rudnn_dtype_name(a->bias->dtype), rudnn_dtype_name(q->dtype));
    if (a->lse)
        TRY(rudnn_check_dtype(op, "lse", a->lse, RUDNN_F32, "the log-sum-exp is f32"));

    /* dims */
    const int64_t b = q->dims[0], hq = q->dims[1], sq = q->dims[2], d = q->dims[3];
    const int64_t hkv = k->dims[1], skv = k->dims[2], dv = v->dims[3];
    if (b < 1 || hq < 1)
        return shape_error(op, "q", q, "[B >= 1, Hq >= 1, Sq, D]");
    if (k->dims[0] != b || hkv < 1 || hq % hkv) {
        char want[160];
        snprintf(want, sizeof want, "[%lld, Hkv, Skv, %lld] with Hkv >= 1 dividing Hq = %lld (batch and head dim "
                 "of q)", (long long)b, (long long)d, (long long)hq);
        return shape_error(op, "k", k, want);
    }
    TRY(check_head_dim(op, "q", "D", d));
    if (k->dims[3] != d) {
        char want[160];
        snprintf(want, sizeof want, "[%lld, %lld, %lld, %lld] (head dim D of q)", (long long)b, (long long)hkv,
                 (long long)skv, (long long)d);
        return shape_error(op, "k", k, want);
    }
    if (v->dims[0] != b || v->dims[1] != hkv || v->dims[2] != skv) {
        char want[160];
        snprintf(want, sizeof want, "[%lld, %lld, %lld, Dv] (B, Hkv, Skv of k)", (long long)b, (long long)hkv,
                 (long long)skv);
        return shape_error(op, "v", v, want);
    }
    TRY(check_head_dim(op, "v", "Dv", dv));
    if (a->out && (a->out->dims[0] != b || a->out->dims[1] != hq || a->out->dims[2] != sq || a->out->dims[3] != dv)) {
        char want[160];
        snprintf(want, sizeof want, "[%lld, %lld, %lld, %lld] ([B, Hq, Sq] of q, Dv of v)", (long long)b,
                 (long long)hq, (long long)sq, (long long)dv);
        return shape_error(op, "out", a->out, want);
    }
    if (a->mask)
        TRY(check_scores_shape(op, "mask", a->mask, b, hq, sq, skv));
    if (a->bias)
        TRY(check_scores_shape(op, "attn_bias", a->bias, b, hq, sq, skv));
    if (a->lse && (a->lse->dims[0] != b || a->lse->dims[1] != hq || a->lse->dims[2] != sq)) {
        char want[160];
        snprintf(want, sizeof want, "[%lld, %lld, %lld] ([B, Hq, Sq] of q)", (long long)b, (long long)hq,
                 (long long)sq);
        return shape_error(op, "lse", a->lse, want);
    }

    /* overlap: the outputs touch no input and not each other (not even in place: every row of
     * out reads all of k and v) */
    static const char *const in_names[5] = {"q", "k", "v", "mask", "attn_bias"};
    const rudnn_tensor_t *ins[5] = {q, k, v, a->mask, a->bias};
    for (int i = 0; i < 5; i++) {
        TRY(rudnn_check_disjoint(op, "out", a->out, in_names[i], ins[i]));
        TRY(rudnn_check_disjoint(op, "lse", a->lse, in_names[i], ins[i]));
    }
    TRY(rudnn_check_disjoint(op, "lse", a->lse, "out", a->out));

    /* options and strategy */
    rudnn_attention_options_t o;
    rudnn_attention_options_init(&o);
    if (a->options)
        o = *a->options;
    TRY(check_options(op, &o));
    if ((unsigned)a->strategy > RUDNN_ATTENTION_FLASH_ACCELERATED)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: strategy %d is not a rudnn_attention_strategy_t", op,
                               (int)a->strategy);

    memset(plan, 0, sizeof *plan);
    plan->dtype = q->dtype;
    plan->batch = b;
    plan->heads_q = hq;
    plan->heads_kv = hkv;
    plan->seq_q = sq;
    plan->seq_kv = skv;
    plan->head_dim = d;
    plan->head_dim_v = dv;
    plan_strides(q, plan->q_stride);
    plan_strides(k, plan->k_stride);
    plan_strides(v, plan->v_stride);
    if (a->out) {
        plan_strides(a->out, plan->out_stride);
    } else { /* the contiguous out resolve and workspace_size answer for */
        plan->out_stride[2] = sq == 1 ? 0 : dv;
        plan->out_stride[1] = hq == 1 ? 0 : sq * dv;
        plan->out_stride[0] = b == 1 ? 0 : hq * sq * dv;
    }
    plan->has_mask = a->mask != NULL;
    if (a->mask)
        plan_strides(a->mask, plan->mask_stride);
    plan->has_bias = a->bias != NULL;
    plan->bias_dtype = a->bias ? a->bias->dtype : RUDNN_F32;
    if (a->bias)
        plan_strides(a->bias, plan->bias_stride);
    plan->scale = o.scale != 0.0f ? o.scale : (float)(1.0 / sqrt((double)d));
    plan->softcap = o.softcap;
    plan->causal = o.causal != 0;
    plan->window_left = o.window_left;
    plan->window_right = o.causal ? 0 : o.window_right;
    plan->has_lse = a->lse != NULL;
    return RUDNN_STATUS_SUCCESS;
}

/* ---- which candidate runs ------------------------------------------------------------------ */

static const rudnn_attention_kernels_t *attn_kernels(rudnn_context_t ctx)
{
    return RUDNN_FAMILY_TABLE(ctx->backend, attention);
}

static rudnn_status_t require_kernels(const char *op, rudnn_context_t ctx, const rudnn_attention_kernels_t **k)
{
    *k = attn_kernels(ctx);
    if (!*k || !(*k)->candidate_count)
        return rudnn_set_error(RUDNN_STATUS_NOT_SUPPORTED, "%s: backend '%s' has no attention kernels", op,
                               ctx->backend->name);
    return RUDNN_STATUS_SUCCESS;
}

/* Powers of two (rounded up) for the sizes a kernel's speed scales with. */
static unsigned long long bucket(int64_t n)
{
    unsigned long long b = 1;
    while (b < (unsigned long long)n && b < (1ull << 62))
        b <<= 1;
    return b;
}

/* The autotune key's parts after the device: dtype, shape bucket (powers of two for B * Hq, Sq and
 * Skv; exact head dims and GQA ratio) and what changes the kernel (mask, bias dtype, softcap, causal,
 * window sides, lse). */
static void tune_key_rest(const rudnn_attention_plan_t *p, char *rest, size_t cap)
{
    snprintf(rest, cap, "%s|bh%llu|q%llu|k%llu|d%lld|v%lld|g%lld|mask%d|bias-%s|cap%d|causal%d|wl%d|wr%d|lse%d",
             rudnn_dtype_name(p->dtype), bucket(p->batch * p->heads_q), bucket(p->seq_q), bucket(p->seq_kv),
             (long long)p->head_dim, (long long)p->head_dim_v, (long long)(p->heads_q / p->heads_kv),
             p->has_mask, p->has_bias ? rudnn_dtype_name(p->bias_dtype) : "none", p->softcap > 0.0f, p->causal,
             p->window_left >= 0, p->window_right >= 0, p->has_lse);
}

typedef struct choose_arg {
    rudnn_context_t ctx;
    const rudnn_attention_kernels_t *k;
    const rudnn_attention_plan_t *plan;
} choose_arg_t;

static void check_candidate(void *arg, uint32_t i, rudnn_candidate_verdict_t *v)
{
    const choose_arg_t *c = arg;
    c->k->check(c->ctx->device, c->plan, i, v);
}

/* Picks the candidate for the request (ops/choose.c; rudnn_attention_resolve reports it,
 * rudnn_attention runs it) and fills choice. */
static rudnn_status_t choose(const char *op, rudnn_context_t ctx, const rudnn_attention_plan_t *plan,
                             rudnn_attention_strategy_t requested, rudnn_choice_made_t *d,
                             rudnn_attention_choice_t *choice)
{
    memset(choice, 0, sizeof *choice);
    const rudnn_attention_kernels_t *k;
    TRY(require_kernels(op, ctx, &k));
    char rest[256], what[256];
    tune_key_rest(plan, rest, sizeof rest);
    snprintf(what, sizeof what, "%s [B %lld, Hq %lld, Hkv %lld, Sq %lld, Skv %lld, D %lld, Dv %lld]",
             rudnn_dtype_name(plan->dtype), (long long)plan->batch, (long long)plan->heads_q,
             (long long)plan->heads_kv, (long long)plan->seq_q, (long long)plan->seq_kv, (long long)plan->head_dim,
             (long long)plan->head_dim_v);
    choose_arg_t arg = {ctx, k, plan};
    const rudnn_choose_request_t r = {
        .op = op, .context = ctx, .candidates = k->candidates, .count = k->candidate_count,
        .requested = (int)requested, .autotune = RUDNN_ATTENTION_AUTOTUNE, .strategy_name = strategy_name,
        .check = check_candidate, .arg = &arg, .family = "attention", .key_rest = rest, .what = what,
    };
    TRY(rudnn_choose(&r, d));
    choice->strategy = (rudnn_attention_strategy_t)k->candidates[d->picked].strategy;
    choice->kernel = k->candidates[d->picked].name;
    rudnn_copy_str(choice->reason, sizeof choice->reason, d->reason);
    return RUDNN_STATUS_SUCCESS;
}

static rudnn_status_t workspace_of(const char *op, rudnn_context_t ctx, const rudnn_attention_plan_t *plan,
                                   uint32_t c, size_t *bytes)
{
    const rudnn_attention_kernels_t *k = attn_kernels(ctx);
    *bytes = 0;
    return rudnn_kernel_status(op, k->workspace(ctx->device, plan, c, bytes));
}

/* ---- public calls -------------------------------------------------------------------------- */

/* Sq 0: nothing runs; resolve says so. */
static void choice_nothing(rudnn_attention_choice_t *choice, rudnn_attention_strategy_t requested)
{
    memset(choice, 0, sizeof *choice);
    choice->strategy = requested;
    choice->kernel = "attention.none";
    snprintf(choice->reason, sizeof choice->reason, "Sq is 0: no kernel runs");
}

static rudnn_status_t resolve(const char *op, const attn_args_t *a, rudnn_attention_plan_t *plan, rudnn_choice_made_t *d,
                              rudnn_attention_choice_t *choice)
{
    TRY(rudnn_attention_validate(op, a, 0, plan));
    const rudnn_attention_kernels_t *k;
    TRY(require_kernels(op, a->queue->context, &k));
    if (plan->seq_q == 0) {
        choice_nothing(choice, a->strategy);
        memset(d, 0, sizeof *d);
        return RUDNN_STATUS_SUCCESS;
    }
    return choose(op, a->queue->context, plan, a->strategy, d, choice);
}

rudnn_status_t rudnn_attention_resolve(rudnn_queue_t queue, const rudnn_tensor_t *q, const rudnn_tensor_t *k,
                                       const rudnn_tensor_t *v, const rudnn_tensor_t *mask,
                                       const rudnn_tensor_t *attn_bias, const rudnn_attention_options_t *options,
                                       rudnn_attention_strategy_t strategy, const rudnn_tensor_t *out,
                                       const rudnn_tensor_t *lse, rudnn_attention_choice_t *choice)
{
    const char *op = "attention_resolve";
    rudnn_clear_error();
    TRY(rudnn_check_arg(op, "choice", choice));
    attn_args_t a = {queue, q, k, v, mask, attn_bias, out, lse, options, strategy};
    rudnn_attention_plan_t plan;
    rudnn_choice_made_t d;
    return resolve(op, &a, &plan, &d, choice);
}

rudnn_status_t rudnn_attention_workspace_size(rudnn_queue_t queue, const rudnn_tensor_t *q, const rudnn_tensor_t *k,
                                              const rudnn_tensor_t *v, const rudnn_tensor_t *mask,
                                              const rudnn_tensor_t *attn_bias,
                                              const rudnn_attention_options_t *options,
                                              rudnn_attention_strategy_t strategy, const rudnn_tensor_t *out,
                                              const rudnn_tensor_t *lse, size_t *bytes)
{
    const char *op = "attention_workspace_size";
    rudnn_clear_error();
    TRY(rudnn_check_arg(op, "bytes", bytes));
    attn_args_t a = {queue, q, k, v, mask, attn_bias, out, lse, options, strategy};
    rudnn_attention_plan_t plan;
    rudnn_choice_made_t d;
    rudnn_attention_choice_t choice;
    TRY(resolve(op, &a, &plan, &d, &choice));
    if (plan.seq_q == 0) {
        *bytes = 0;
        return RUDNN_STATUS_SUCCESS;
    }
    size_t need;
    TRY(workspace_of(op, queue->context, &plan, d.picked, &need));
    *bytes = need;
    return RUDNN_STATUS_SUCCESS;
}

/* The caller's workspace: on the queue's context, holding what the kernel needs, touching no
 * tensor of the call. */
/* A caller's workspace against what the chosen kernel needs (rudnn_check_workspace). */
static rudnn_status_t check_workspace(const char *op, const attn_args_t *a, rudnn_buffer_t ws, size_t ws_bytes,
                                      size_t need, const char *kernel)
{
    static const char *const names[7] = {"q", "k", "v", "mask", "attn_bias", "out", "lse"};
    const rudnn_tensor_t *all[7] = {a->q, a->k, a->v, a->mask, a->bias, a->out, a->lse};
    char query[160];
    snprintf(query, sizeof query, "kernel %s; rudnn_attention_workspace_size", kernel);
    return rudnn_check_workspace(op, a->queue, ws, ws_bytes, need, query, all, names, 7);
}

typedef struct run_arg {
    const attn_args_t *a;
    const rudnn_attention_plan_t *plan;
} run_arg_t;

static rudnn_status_t run_workspace(void *arg, uint32_t c, size_t *bytes)
{
    const run_arg_t *r = arg;
    const rudnn_context_t ctx = r->a->queue->context;
    *bytes = 0;
    return attn_kernels(ctx)->workspace(ctx->device, r->plan, c, bytes);
}

static rudnn_status_t run_candidate(void *arg, uint32_t c, void *ws)
{
    const run_arg_t *r = arg;
    const attn_args_t *a = r->a;
    const rudnn_attention_kernels_t *k = attn_kernels(a->queue->context);
    rudnn_mem_ref_t none = {NULL, 0}, w = {ws, 0};
    return k->run(a->queue->handle, r->plan, c, rudnn_mem_of(a->q), rudnn_mem_of(a->k), rudnn_mem_of(a->v),
                  a->mask ? rudnn_mem_of(a->mask) : none, a->bias ? rudnn_mem_of(a->bias) : none,
                  rudnn_mem_of(a->out), a->lse ? rudnn_mem_of(a->lse) : none, ws ? w : none);
}

rudnn_status_t rudnn_attention(rudnn_queue_t queue, const rudnn_tensor_t *q, const rudnn_tensor_t *k,
                               const rudnn_tensor_t *v, const rudnn_tensor_t *mask, const rudnn_tensor_t *attn_bias,
                               const rudnn_attention_options_t *options, rudnn_attention_strategy_t strategy,
                               rudnn_buffer_t workspace, size_t workspace_bytes, const rudnn_tensor_t *out,
                               const rudnn_tensor_t *lse)
{
    const char *op = "attention";
    rudnn_clear_error();
    attn_args_t a = {queue, q, k, v, mask, attn_bias, out, lse, options, strategy};
    rudnn_attention_plan_t plan;
    TRY(rudnn_attention_validate(op, &a, 1, &plan));
    const rudnn_attention_kernels_t *table;
    TRY(require_kernels(op, queue->context, &table));
    if (plan.seq_q == 0) {
        if (workspace)
            TRY(check_workspace(op, &a, workspace, workspace_bytes, 0, "(none)"));
        return RUDNN_STATUS_SUCCESS;
    }
    rudnn_choice_made_t d;
    rudnn_attention_choice_t choice;
    TRY(choose(op, queue->context, &plan, strategy, &d, &choice));
    size_t need;
    TRY(workspace_of(op, queue->context, &plan, d.picked, &need));
    if (workspace)
        TRY(check_workspace(op, &a, workspace, workspace_bytes, need, choice.kernel));
    const run_arg_t ra = {&a, &plan};
    const rudnn_candidate_runner_t runner = {run_workspace, run_candidate, (void *)&ra};
    return rudnn_run_choice(op, queue, table->candidates, &d, workspace, workspace_bytes, &runner);
}

rudnn_status_t rudnn_attention_kernel_count(rudnn_context_t context, int *count)
{
    const char *op = "attention_kernel_count";
    rudnn_clear_error();
    if (!context || !count)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is NULL", op, context ? "count" : "context");
    const rudnn_attention_kernels_t *k;
    TRY(require_kernels(op, context, &k));
    *count = (int)k->candidate_count;
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t rudnn_attention_kernel_info(rudnn_context_t context, int index, const char **name,
                                           rudnn_attention_strategy_t *strategy)
{
    const char *op = "attention_kernel_info";
    rudnn_clear_error();
    if (!context || !name || !strategy)
        return rudnn_set_error(RUDNN_STATUS_BAD_PARAM, "%s: %s is NULL", op,
                               !context ? "context" : !name ? "name" : "strategy");
    const rudnn_attention_kernels_t *k;
    TRY(require_kernels(op, context, &k));
    if (index < 0 || (uint32_t)index >= k->candidate_count)
        return rudnn_set_error(RUDNN_STATUS_OUT_OF_BOUNDS, "%s: index %d, backend '%s' has %u attention kernels", op,
                               index, context->backend->name, k->candidate_count);
    *name = k->candidates[index].name;
    *strategy = (rudnn_attention_strategy_t)k->candidates[index].strategy;
    return RUDNN_STATUS_SUCCESS;
}
